/* test_stats_bb_dump.c - aco_rt_stats and aco_rt_dump from aco_rt.h alone,
 * both backends, against a known set of cos: the dump has one line per
 * co (its handle once, its name), what each waits on (a semaphore, mutex,
 * channel, joined co and group by address; a deadline shown only where
 * there is one), no line for a finished co, only the thread's own cos on a
 * pool thread; the counters: timers (deadlines, one per co asleep for
 * good, an armed callback timer until stopped, none for a wait without a
 * deadline), cos_parked and cos_ready over more kinds of wait, io_inflight
 * for a read, polls only when the scheduler blocks, switches for yields,
 * spawned for group members and aco_rt_exit, lend_ring 0 on epoll. */
#define _GNU_SOURCE
#include "rt_test.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>

static int64_t in_ms(int ms) { return aco_rt_now() + ms * MS; }

/* the dump of s (NULL: current) into buf */
static char dbuf[1 << 16];
static const char* dump_of(const aco_rt_sched_t* s) {
    int p[2];
    CHECK_EQ(pipe(p), 0);
    CHECK_EQ(fcntl(p[0], F_SETFL, O_NONBLOCK), 0);
    CHECK_EQ(fcntl(p[1], F_SETPIPE_SZ, 1 << 17) >= (1 << 16), 1);
    aco_rt_dump(s, p[1]);
    ssize_t n = read(p[0], dbuf, sizeof(dbuf) - 1);
    CHECK_GE(n, 0);
    dbuf[n] = 0;
    close(p[0]);
    close(p[1]);
    return dbuf;
}
/* the one line of the dump that holds ptr; fails if none or several */
static char line_buf[1024];
static const char* line_of(const char* d, const void* ptr) {
    char key[32];
    snprintf(key, sizeof(key), "%p", ptr);
    const char* hit = NULL;
    int n = 0;
    for (const char* l = d; *l;) {
        const char* e = strchr(l, '\n');
        size_t len = e ? (size_t)(e - l) : strlen(l);
        char tmp[1024];
        snprintf(tmp, sizeof(tmp), "%.*s", (int)len, l);
        /* a whole token: not the prefix of a longer address */
        const char* f = strstr(tmp, key);
        while (f) {
            char after = f[strlen(key)];
            if (!((after >= '0' && after <= '9') || (after >= 'a' && after <= 'f'))) break;
            f = strstr(f + 1, key);
        }
        if (f && (f == tmp || f[-1] == ' ' || f[-1] == '(')) {
            if (!hit) snprintf(line_buf, sizeof(line_buf), "%s", tmp);
            hit = line_buf;
            n++;
        }
        l += len + (e != NULL);
    }
    if (n != 1)
        TEST_FAIL_AT(__FILE__, __LINE__, "%p is on %d lines of the dump, not 1:\n%s", ptr, n, d);
    return hit;
}
static int count_of(const char* d, const void* ptr) {
    char key[32];
    snprintf(key, sizeof(key), "%p ", ptr);
    int n = 0;
    for (const char* f = strstr(d, key); f; f = strstr(f + 1, key)) n++;
    return n;
}

static aco_rt_sem_t sem;
static aco_rt_mutex_t mx;
static aco_rt_chan_t* ch;
static aco_rt_group_t* grp;
static aco_rt_co_t* joined;
static int pfd[2];

static void sem_timed(void* a) { (void)a; CHECK_EQ(aco_rt_sem_wait(&sem, in_ms(5000)), 0); }
static void sem_forever(void* a) { (void)a; CHECK_EQ(aco_rt_sem_wait(&sem, -1), 0); }
static void mx_waiter(void* a) {
    (void)a;
    CHECK_EQ(aco_rt_mutex_lock(&mx, -1), 0);
    CHECK_EQ(aco_rt_mutex_unlock(&mx), 0);
}
static void ch_waiter(void* a) {
    (void)a;
    int v;
    CHECK_EQ(aco_rt_chan_recv(ch, &v, -1), 0);
    CHECK_EQ(v, 5);
}
static void joiner(void* a) { (void)a; CHECK_EQ(aco_rt_join(joined, -1), 0); }
static aco_rt_co_t* joined2;
static int pfd2[2];
static void joiner_timed(void* a) { (void)a; CHECK_EQ(aco_rt_join(joined2, in_ms(5000)), 0); }
static void mx_timed(void* a) {
    (void)a;
    CHECK_EQ(aco_rt_mutex_lock(&mx, in_ms(5000)), 0);
    CHECK_EQ(aco_rt_mutex_unlock(&mx), 0);
}
static void reader_timed(void* a) {
    (void)a;
    char c;
    CHECK_EQ(aco_rt_read(pfd2[0], &c, 1, in_ms(5000)), 1);
}
static void grp_joiner(void* a) { (void)a; CHECK_EQ(aco_rt_group_join(grp, -1), 0); }
static void asleep(void* a) { (void)a; CHECK_EQ(aco_rt_sleep_until(-1), -ECANCELED); }
static void reader(void* a) {
    (void)a;
    char c;
    CHECK_EQ(aco_rt_read(pfd[0], &c, 1, -1), 1);
}
static void yielder(void* a) {
    int n = (int)(intptr_t)a;
    for (int i = 0; i < n; i++) CHECK_EQ(aco_rt_yield(), 0);
}
static void quick(void* a) { (void)a; }
static void exiter(void* a) { (void)a; aco_rt_exit(); }
static int timer_fired;
static void timer_fn(aco_rt_timer_t* t) { (void)t; timer_fired++; }
static aco_rt_timer_t tm;

static void main_co(void* arg) {
    aco_rt_sched_t* s = arg;
    aco_rt_stats_t a, b;
    aco_rt_stats(NULL, &a);
    CHECK_EQ(a.cos_alive, 1);
    CHECK_EQ(a.timers, 0);
    CHECK_EQ(a.cos_parked, 0);
    if (test_backend_id == ACO_RT_BACKEND_EPOLL) CHECK_EQ(a.lend_ring, 0);

    aco_rt_sem_init(&sem, 0);
    aco_rt_mutex_init(&mx);
    CHECK_EQ(aco_rt_mutex_lock(&mx, -1), 0);
    ch = aco_rt_chan_new(sizeof(int), 0);
    CHECK(ch != NULL);
    grp = aco_rt_group_new(NULL);
    CHECK(grp != NULL);
    CHECK_EQ(pipe(pfd), 0);
    aco_rt_spawn_opts_t o;
    memset(&o, 0, sizeof(o));
    o.name = "bb-dump-timed";
    aco_rt_co_t* c_timed = aco_rt_spawn2(NULL, sem_timed, NULL, &o);
    aco_rt_co_t* c_forever = aco_rt_spawn(NULL, sem_forever, NULL);
    aco_rt_co_t* c_mx = aco_rt_spawn(NULL, mx_waiter, NULL);
    aco_rt_co_t* c_ch = aco_rt_spawn(NULL, ch_waiter, NULL);
    joined = aco_rt_spawn(NULL, sem_forever, NULL);   /* c_forever's twin */
    aco_rt_co_t* c_join = aco_rt_spawn(NULL, joiner, NULL);
    CHECK_EQ(aco_rt_group_spawn(grp, sem_timed, NULL, NULL), 0);
    aco_rt_co_t* c_gj = aco_rt_spawn(NULL, grp_joiner, NULL);
    aco_rt_co_t* c_sleep = aco_rt_spawn(NULL, asleep, NULL);
    aco_rt_co_t* c_read = aco_rt_spawn(NULL, reader, NULL);
    CHECK_EQ(pipe(pfd2), 0);
    joined2 = aco_rt_spawn(NULL, sem_forever, NULL);
    aco_rt_co_t* c_join2 = aco_rt_spawn(NULL, joiner_timed, NULL);
    aco_rt_co_t* c_mx2 = aco_rt_spawn(NULL, mx_timed, NULL);
    aco_rt_co_t* c_read2 = aco_rt_spawn(NULL, reader_timed, NULL);
    aco_rt_stats(NULL, &b);
    CHECK_EQ(b.spawned - a.spawned, 14);
    CHECK_EQ(b.cos_alive, 15);
    CHECK_EQ(b.cos_ready, 14);
    CHECK_EQ(aco_rt_sleep(3 * MS), 0);
    aco_rt_co_t* c_ready = aco_rt_spawn(NULL, quick, NULL);
    CHECK_EQ(aco_rt_timer_start(&tm, in_ms(60000), timer_fn), 0);
    aco_rt_stats(NULL, &b);
    CHECK_EQ(b.cos_alive, 16);
    CHECK_EQ(b.cos_parked, 14);
    CHECK_EQ(b.cos_ready, 1);
    /* deadlines: c_timed, the group member, a join, a lock and a read;
     * asleep for good: one; the callback timer: one; the others wait
     * without a deadline */
    CHECK_EQ(b.timers, 7);
    CHECK_EQ(b.io_inflight, 2);

    const char* d = dump_of(NULL);
    /* one line per co: each handle once */
    aco_rt_co_t* all[] = {aco_rt_self(), c_timed, c_forever, c_mx, c_ch,
                          c_join, c_gj, c_sleep, c_read, c_ready, c_join2, c_mx2, c_read2};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) line_of(d, all[i]);
    int lines = 0;
    for (const char* l = strchr(d, '\n'); l; l = strchr(l + 1, '\n')) lines++;
    CHECK_GE(lines, 16);            /* 16 cos (and whatever heading) */
    CHECK_LE(lines, 17);
    CHECK(strstr(line_of(d, c_join2), "deadline") != NULL);
    CHECK(strstr(line_of(d, c_mx2), "deadline") != NULL);
    CHECK(strstr(line_of(d, c_read2), "deadline") != NULL);
    CHECK(strstr(line_of(d, c_read), "deadline") == NULL);
    CHECK(strstr(line_of(d, c_mx), "deadline") == NULL);
    const char* l = line_of(d, c_timed);
    CHECK(strstr(l, "bb-dump-timed") != NULL);
    char addr[32];
    snprintf(addr, sizeof(addr), "%p", (void*)&sem);
    CHECK(strstr(l, addr) != NULL);
    CHECK(strstr(l, "deadline") != NULL);
    l = line_of(d, c_forever);
    CHECK(strstr(l, addr) != NULL);
    CHECK(strstr(l, "deadline") == NULL);
    CHECK(strstr(l, "bb-dump-timed") == NULL);
    snprintf(addr, sizeof(addr), "%p", (void*)&mx);
    CHECK(strstr(line_of(d, c_mx), addr) != NULL);
    snprintf(addr, sizeof(addr), "%p", (void*)ch);
    CHECK(strstr(line_of(d, c_ch), addr) != NULL);
    snprintf(addr, sizeof(addr), "%p", (void*)grp);
    CHECK(strstr(line_of(d, c_gj), addr) != NULL);
    /* the joiner's line names the joined co: its handle on two lines */
    CHECK_EQ(count_of(d, joined), 2);
    CHECK_EQ(count_of(line_of(d, c_join), joined), 1);
    /* the state: the dumping co, a ready one, a parked one */
    CHECK(strstr(line_of(d, aco_rt_self()), "running") != NULL);
    CHECK(strstr(line_of(d, c_ready), "ready") != NULL);
    CHECK(strstr(line_of(d, c_forever), "parked") != NULL);
    /* the same from outside: aco_rt_dump(s) and aco_rt_dump(NULL) agree on the cos */
    const char* d2 = dump_of(s);
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) line_of(d2, all[i]);
    CHECK_EQ(count_of(d2, joined), 2);

    /* wake them all, in turn */
    CHECK_EQ(aco_rt_timer_stop(&tm), 1);
    aco_rt_stats(NULL, &b);
    CHECK_EQ(b.timers, 6);
    for (int i = 0; i < 5; i++) aco_rt_sem_post(&sem);
    CHECK_EQ(write(pfd2[1], "y", 1), 1);
    CHECK_EQ(aco_rt_mutex_unlock(&mx), 0);
    int five = 5;
    CHECK_EQ(aco_rt_chan_send(ch, &five, in_ms(5000)), 0);
    CHECK_EQ(aco_rt_cancel(c_sleep), 0);
    CHECK_EQ(write(pfd[1], "x", 1), 1);
    aco_rt_co_t* rest[] = {c_timed, c_forever, c_mx, c_ch, c_join, c_gj, c_sleep,
                           c_read, c_ready, c_join2, c_mx2, c_read2};
    for (size_t i = 0; i < sizeof(rest) / sizeof(rest[0]); i++)
        CHECK_EQ(aco_rt_join(rest[i], in_ms(5000)), 0);
    CHECK_EQ(aco_rt_sleep(2 * MS), 0);
    aco_rt_stats(NULL, &b);
    CHECK_EQ(b.cos_alive, 1);
    CHECK_EQ(b.cos_parked, 0);
    CHECK_EQ(b.cos_ready, 0);
    CHECK_EQ(b.timers, 0);
    CHECK_EQ(b.io_inflight, 0);
    d = dump_of(NULL);
    line_of(d, aco_rt_self());
    CHECK_EQ(count_of(d, c_timed), 0);
    CHECK_EQ(timer_fired, 0);

    /* yields: switches, and no backend wait while cos stay ready */
    aco_rt_stats(NULL, &a);
    int K = 500;
    aco_rt_co_t* y1 = aco_rt_spawn(NULL, yielder, (void*)(intptr_t)K);
    aco_rt_co_t* y2 = aco_rt_spawn(NULL, yielder, (void*)(intptr_t)K);
    yielder((void*)(intptr_t)(K + 2));
    aco_rt_stats(NULL, &b);
    CHECK_GE(b.switches - a.switches, 3 * (uint64_t)K);
    CHECK_LE(b.switches - a.switches, 3 * (uint64_t)K + 12);
    CHECK_EQ(b.polls - a.polls, 0);
    CHECK_GE(b.handoffs - a.handoffs, 2 * (uint64_t)K);
    CHECK_EQ(aco_rt_join(y1, in_ms(5000)), 0);
    CHECK_EQ(aco_rt_join(y2, in_ms(5000)), 0);
    /* an idle sleep blocks in the backend */
    aco_rt_stats(NULL, &a);
    CHECK_EQ(aco_rt_sleep(5 * MS), 0);
    aco_rt_stats(NULL, &b);
    CHECK_GE(b.polls - a.polls, 1);
    CHECK_EQ(b.switches - a.switches, 1);
    /* spawned: group members, aco_rt_exit's co */
    aco_rt_stats(NULL, &a);
    CHECK_EQ(aco_rt_group_spawn(grp, quick, NULL, NULL), 0);
    CHECK_EQ(aco_rt_group_spawn(grp, exiter, NULL, NULL), 0);
    aco_rt_stats(NULL, &b);
    CHECK_EQ(b.spawned - a.spawned, 2);
    CHECK_EQ(b.cos_alive, 3);
    CHECK_EQ(aco_rt_group_join(grp, in_ms(5000)), 0);
    aco_rt_stats(NULL, &b);
    CHECK_EQ(b.cos_alive, 1);
    CHECK_EQ(aco_rt_group_free(grp), 0);
    aco_rt_chan_free(ch);
    close(pfd[0]);
    close(pfd[1]);
    close(pfd2[0]);
    close(pfd2[1]);
}

/* parked when the run stopped: the counters and dump as left */
static aco_rt_sched_t* cur;
static void stop_co(void* a) {
    (void)a;
    CHECK_EQ(aco_rt_sleep(1 * MS), 0);
    aco_rt_sched_stop(cur);
    CHECK_EQ(aco_rt_yield(), 0);
}
static void body(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    cur = s;
    test_go(s, main_co, s);
    aco_rt_stats_t st;
    aco_rt_stats(s, &st);
    CHECK_EQ(st.cos_alive, 0);
    const char* d = dump_of(s);
    int lines = 0;
    for (const char* l = strchr(d, '\n'); l; l = strchr(l + 1, '\n')) lines++;
    CHECK_LE(lines, 1);                 /* no co: a heading at most */
    /* stopped with a co parked and one ready */
    aco_rt_sem_init(&sem, 0);
    aco_rt_co_t* p = aco_rt_spawn(s, sem_forever, NULL);
    aco_rt_co_t* q = aco_rt_spawn(s, stop_co, NULL);
    CHECK_EQ(aco_rt_sched_run(s), 0);
    aco_rt_stats(s, &st);
    CHECK_EQ(st.cos_alive, 2);
    CHECK_EQ(st.cos_parked, 1);
    CHECK_EQ(st.cos_ready, 1);
    CHECK_EQ(st.timers, 0);
    d = dump_of(s);
    line_of(d, p);
    line_of(d, q);
    aco_rt_sem_post(&sem);
    CHECK_EQ(aco_rt_detach(p), 0);
    CHECK_EQ(aco_rt_detach(q), 0);
    test_run(s);
}

/* a pool thread's dump: its own cos only */
static _Atomic(aco_rt_co_t*) pool_cos[2];
static atomic_int pool_idx, pool_ok;
static aco_rt_sem_t pool_sem;
static void pool_co(void* a) {
    (void)a;
    int i = atomic_fetch_add(&pool_idx, 1);
    pool_cos[i] = aco_rt_self();
    if (i == 0) {
        CHECK_EQ(aco_rt_sem_wait(&pool_sem, in_ms(5000)), 0);
        return;
    }
    while (pool_cos[0] == NULL) CHECK_EQ(aco_rt_sleep(1 * MS), 0);
    const char* d = dump_of(NULL);
    line_of(d, aco_rt_self());
    CHECK_EQ(count_of(d, pool_cos[0]), 0);
    aco_rt_stats_t st;
    aco_rt_stats(NULL, &st);
    CHECK_EQ(st.cos_alive, 1);
    aco_rt_sem_post(&pool_sem);
    atomic_fetch_add(&pool_ok, 1);
}
static void pool_body(aco_rt_pool_t* p) {
    aco_rt_sem_init(&pool_sem, 0);
    atomic_store(&pool_idx, 0);
    atomic_store(&pool_ok, 0);
    pool_cos[0] = pool_cos[1] = NULL;
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(aco_rt_pool_sched(p, 0), pool_co, NULL)), 0);
    while (atomic_load(&pool_idx) < 1) sched_yield();
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(aco_rt_pool_sched(p, 1), pool_co, NULL)), 0);
    CHECK_EQ(aco_rt_pool_wait(p, ACO_RT_POOL_DRAIN, in_ms(5000)), 0);
    CHECK_EQ(atomic_load(&pool_ok), 1);
}

int main(void) {
    test_on_backends(NULL, body, NULL);
    test_on_pools(2, pool_body, NULL);
    puts("test_stats_bb_dump: ok");
    return 0;
}
