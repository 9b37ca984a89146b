/* test_timer_bb_deadlines.c - deadlines, sleeps and callback timers from
 * aco_rt.h alone: every blocking call (sync objects, channels, select,
 * joins, groups, reads, receives, waits, polls, accepts, lends, signal
 * waits, sleeps) under deadlines 0, -2, INT64_MIN, a moment ago (no wait:
 * -ETIMEDOUT, or 0 for a sleep), a near one (never early), and -1,
 * INT64_MAX, a far one (no limit: the call waits for its wake, no overflow
 * into "passed"); a passed deadline on an object ready now still succeeds;
 * aco_rt_in_ns / aco_rt_in_ms at their edges; sleeps of ns <= 0 letting
 * the ready cos run first; a sleep for good ended by aco_rt_sched_stop
 * (never -EDEADLK) and by a cancel from outside cos; timers: never early,
 * in deadline order, passed deadlines firing soon, INT64_MAX never, a run
 * with armed timers and no co returning, a later run firing them, a
 * callback that restarts its timer and stops another, timers firing while
 * cos stay ready, sched_free disarming them; callbacks that spawn, post,
 * cancel and close; stops asked before a run, and from a signal handler
 * (errno kept). */
#define _GNU_SOURCE
#include "rt_test.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/un.h>
#include <time.h>

static int64_t in_ms(int ms) { return aco_rt_now() + ms * MS; }
static aco_rt_sched_t* cur;

/* ---- the clock and the relative deadlines ---- */
static void clock_checks(void) {
    struct timespec ts;
    CHECK_EQ(clock_gettime(CLOCK_MONOTONIC, &ts), 0);
    int64_t mono = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    int64_t a = aco_rt_now();
    CHECK_GE(a, mono);
    CHECK_LT(a - mono, 100 * MS);
    int64_t b = aco_rt_now();
    CHECK_GE(b, a);
    CHECK_EQ(aco_rt_in_ns(-1), -1);
    CHECK_EQ(aco_rt_in_ns(-7), -1);
    CHECK_EQ(aco_rt_in_ns(INT64_MIN), -1);
    CHECK_EQ(aco_rt_in_ms(-1), -1);
    CHECK_EQ(aco_rt_in_ms(INT64_MIN), -1);
    CHECK_EQ(aco_rt_in_ns(INT64_MAX), INT64_MAX);
    CHECK_EQ(aco_rt_in_ns(INT64_MAX - 5), INT64_MAX);
    CHECK_EQ(aco_rt_in_ms(INT64_MAX), INT64_MAX);
    CHECK_EQ(aco_rt_in_ms(INT64_MAX / 1000000 + 1), INT64_MAX);
    CHECK_EQ(aco_rt_in_ms(INT64_MAX / 1000000), INT64_MAX);
    int64_t t0 = aco_rt_now(), z = aco_rt_in_ns(0), t1 = aco_rt_now();
    CHECK(z >= t0 && z <= t1);
    t0 = aco_rt_now(), z = aco_rt_in_ms(0), t1 = aco_rt_now();
    CHECK(z >= t0 && z <= t1);
    t0 = aco_rt_now(), z = aco_rt_in_ms(5), t1 = aco_rt_now();
    CHECK(z >= t0 + 5 * MS && z <= t1 + 5 * MS);
}

/* ---- every blocking call under every kind of deadline ---- */
enum {
    OP_SEM, OP_MUTEX, OP_COND, OP_WG, OP_RECV_CH, OP_SEND_CH, OP_SELECT, OP_JOIN,
    OP_GROUP, OP_READ, OP_RECV, OP_WAIT, OP_POLL, OP_ACCEPT, OP_LEND, OP_SIGWAIT,
    OP_SLEEP_UNTIL, OP_N
};
static const char* op_name[OP_N] = {
    "sem_wait", "mutex_lock", "cond_wait", "wg_wait", "chan_recv", "chan_send",
    "chan_select", "join", "group_join", "read", "recv", "wait", "poll", "accept",
    "recv_lend", "signal_wait", "sleep_until"};

static aco_rt_sem_t sem, target_go, member_go;
static aco_rt_mutex_t mx, cm;
static aco_rt_cond_t cv;
static aco_rt_wg_t wg;
static aco_rt_chan_t *ch_empty, *ch_full;
static aco_rt_co_t* target;
static aco_rt_group_t* grp;
static int pp[2], sp[2], lp[2], lsn;
static struct sockaddr_un lsn_addr;
static socklen_t lsn_len;

static int op;                  /* the op under test */
static int64_t op_dl;
static int op_rc;
static int64_t op_end;
static aco_rt_co_t* blocker;

static void target_fn(void* arg) {
    CHECK_EQ(aco_rt_sem_wait(arg ? &member_go : &target_go, in_ms(20000)), 0);
}

static void setup(aco_rt_sched_t* s) {
    aco_rt_sem_init(&sem, 0);
    aco_rt_sem_init(&target_go, 0);
    aco_rt_sem_init(&member_go, 0);
    aco_rt_mutex_init(&mx);
    aco_rt_mutex_init(&cm);
    aco_rt_cond_init(&cv);
    aco_rt_wg_init(&wg);
    CHECK_EQ(aco_rt_wg_add(&wg, 1), 0);
    ch_empty = aco_rt_chan_new(sizeof(int), 1);
    ch_full = aco_rt_chan_new(sizeof(int), 1);
    CHECK(ch_empty && ch_full);
    target = aco_rt_spawn(s, target_fn, NULL);
    CHECK(target != NULL);
    grp = aco_rt_group_new(s);
    CHECK(grp != NULL);
    CHECK_EQ(aco_rt_group_spawn(grp, target_fn, &member_go, NULL), 0);
    CHECK_EQ(pipe(pp), 0);
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sp), 0);
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, lp), 0);
    lsn = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK_GE(lsn, 0);
    memset(&lsn_addr, 0, sizeof(lsn_addr));
    lsn_addr.sun_family = AF_UNIX;
    snprintf(lsn_addr.sun_path + 1, sizeof(lsn_addr.sun_path) - 1, "aco_bb_dl_%d_%d",
             (int)getpid(), test_backend_id);
    lsn_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(lsn_addr.sun_path + 1));
    CHECK_EQ(bind(lsn, (struct sockaddr*)&lsn_addr, lsn_len), 0);
    CHECK_EQ(listen(lsn, 8), 0);
}

/* The call of op with deadline dl, in the blocker co. */
static int do_op(int64_t dl) {
    static int v;
    static char buf[8];
    switch (op) {
    case OP_SEM: return aco_rt_sem_wait(&sem, dl);
    case OP_MUTEX: {
        int r = aco_rt_mutex_lock(&mx, dl);
        if (r == 0) CHECK_EQ(aco_rt_mutex_unlock(&mx), 0);
        return r;
    }
    case OP_COND: {
        CHECK_EQ(aco_rt_mutex_lock(&cm, -1), 0);
        int r = aco_rt_cond_wait(&cv, &cm, dl);
        /* the mutex is held again, whatever the result */
        CHECK_EQ(aco_rt_mutex_unlock(&cm), 0);
        return r;
    }
    case OP_WG: return aco_rt_wg_wait(&wg, dl);
    case OP_RECV_CH: return aco_rt_chan_recv(ch_empty, &v, dl);
    case OP_SEND_CH: v = 2; return aco_rt_chan_send(ch_full, &v, dl);
    case OP_SELECT: {
        static aco_rt_case_t c[2];
        c[0] = (aco_rt_case_t){ch_empty, ACO_RT_RECV, &v};
        c[1] = (aco_rt_case_t){ch_full, ACO_RT_SEND, &v};
        int err = 1;
        int r = aco_rt_chan_select(c, 2, &err, dl);
        if (r >= 0) CHECK_EQ(err, 0);
        return r;
    }
    case OP_JOIN: return aco_rt_join(target, dl);
    case OP_GROUP: return aco_rt_group_join(grp, dl);
    case OP_READ: return (int)aco_rt_read(pp[0], buf, 1, dl);
    case OP_RECV: return (int)aco_rt_recv(sp[0], buf, 1, 0, dl);
    case OP_WAIT: return aco_rt_wait(sp[0], POLLIN, dl);
    case OP_POLL: {
        static struct pollfd p;
        p.fd = sp[0];
        p.events = POLLIN;
        p.revents = 0;
        return aco_rt_poll(&p, 1, dl);
    }
    case OP_ACCEPT: {
        int r = aco_rt_accept(lsn, NULL, NULL, SOCK_CLOEXEC, dl);
        if (r >= 0) {
            CHECK_EQ(aco_rt_close(r), 0);
            r = 0;
        }
        return r;
    }
    case OP_LEND: {
        const char* d = (const char*)&v;
        ssize_t r = aco_rt_recv_lend(lp[0], &d, dl);
        if (r > 0) {
            CHECK_EQ(d[0], 'L');
            CHECK_EQ(aco_rt_lend_return(d), 0);
        } else {
            CHECK(d == (const char*)&v);
        }
        return (int)r;
    }
    case OP_SIGWAIT: {
        static sigset_t set;
        sigemptyset(&set);
        return aco_rt_signal_wait(&set, NULL, dl);
    }
    case OP_SLEEP_UNTIL: return aco_rt_sleep_until(dl);
    }
    abort();
}

/* What the wake makes the call return (a cancel for those with none). */
static int woken_rc(void) {
    switch (op) {
    case OP_READ: case OP_RECV: case OP_LEND: case OP_POLL: return 1;
    case OP_WAIT: return POLLIN;
    case OP_SELECT: return 1;
    case OP_SIGWAIT: case OP_SLEEP_UNTIL: return -ECANCELED;
    }
    return 0;
}
static int passed_rc(void) { return op == OP_SLEEP_UNTIL ? 0 : -ETIMEDOUT; }

static void wake(void) {
    static int v = 1;
    char c;
    switch (op) {
    case OP_SEM: aco_rt_sem_post(&sem); break;
    case OP_MUTEX: CHECK_EQ(aco_rt_mutex_unlock(&mx), 0); break;
    case OP_COND: aco_rt_cond_signal(&cv); break;
    case OP_WG: CHECK_EQ(aco_rt_wg_done(&wg), 0); break;
    case OP_RECV_CH: CHECK_EQ(aco_rt_chan_send(ch_empty, &v, -1), 0); break;
    case OP_SEND_CH: case OP_SELECT: CHECK_EQ(aco_rt_chan_recv(ch_full, &v, -1), 0); break;
    case OP_JOIN: aco_rt_sem_post(&target_go); break;
    case OP_GROUP: aco_rt_sem_post(&member_go); break;
    case OP_READ: CHECK_EQ(write(pp[1], "r", 1), 1); break;
    case OP_RECV: case OP_WAIT: case OP_POLL: CHECK_EQ(write(sp[1], "s", 1), 1); break;
    case OP_LEND: CHECK_EQ(write(lp[1], "L", 1), 1); break;
    case OP_ACCEPT: {
        int c2 = socket(AF_UNIX, SOCK_STREAM, 0);
        CHECK_GE(c2, 0);
        CHECK_EQ(connect(c2, (struct sockaddr*)&lsn_addr, lsn_len), 0);
        CHECK_EQ(close(c2), 0);
        break;
    }
    case OP_SIGWAIT: case OP_SLEEP_UNTIL:
        CHECK_EQ(aco_rt_cancel(blocker), 0); break;
    }
    (void)c;
}

/* After a successful wake: the objects as they were before. */
static void reset(void) {
    static int v;
    char c;
    switch (op) {
    case OP_MUTEX: CHECK_EQ(aco_rt_mutex_lock(&mx, -1), 0); break;
    case OP_WG: CHECK_EQ(aco_rt_wg_add(&wg, 1), 0); break;
    case OP_SEND_CH: case OP_SELECT:
        /* the blocker's element is in; the channel is full again */
        CHECK_EQ(aco_rt_chan_len(ch_full), 1);
        break;
    case OP_JOIN:
        target = aco_rt_spawn(NULL, target_fn, NULL);
        CHECK(target != NULL);
        break;
    case OP_GROUP: CHECK_EQ(aco_rt_group_spawn(grp, target_fn, &member_go, NULL), 0); break;
    case OP_WAIT: case OP_POLL: CHECK_EQ(read(sp[0], &c, 1), 1); break;
    }
    (void)v;
}

static void blocker_fn(void* arg) {
    (void)arg;
    op_rc = do_op(op_dl);
    op_end = aco_rt_now();
}

/* op under dl: waker (if wake_after_ms >= 0) comes after that long. */
static int run_op(int64_t dl, int wake_after_ms, int64_t* took) {
    op_dl = dl;
    op_rc = 12345;
    int64_t t0 = aco_rt_now();
    blocker = aco_rt_spawn(NULL, blocker_fn, NULL);
    CHECK(blocker != NULL);
    if (wake_after_ms >= 0) {
        CHECK_EQ(aco_rt_sleep(wake_after_ms * MS), 0);
        if (op_rc != 12345)
            TEST_FAIL_AT(__FILE__, __LINE__, "%s with deadline %" PRId64 " (now %" PRId64
                         "): returned %d before its wake", op_name[op], dl, t0, op_rc);
        wake();
    }
    CHECK_EQ(aco_rt_join(blocker, in_ms(20000)), 0);
    *took = op_end - t0;
    return op_rc;
}

static void deadlines_co(void* arg) {
    (void)arg;
    static int v = 9;
    CHECK_EQ(aco_rt_chan_send(ch_full, &v, -1), 0);
    for (op = 0; op < OP_N; op++) {
        if (op == OP_MUTEX) CHECK_EQ(aco_rt_mutex_lock(&mx, -1), 0);
        int64_t took;
        int64_t passed[] = {0, -2, -1000, INT64_MIN, aco_rt_now() - 1, aco_rt_now() - 1000 * MS};
        for (size_t i = 0; i < sizeof(passed) / sizeof(passed[0]); i++) {
            int r = run_op(passed[i], -1, &took);
            if (r != passed_rc())
                TEST_FAIL_AT(__FILE__, __LINE__, "%s with passed deadline %" PRId64 ": %d",
                             op_name[op], passed[i], r);
            CHECK_LT(took, 500 * MS);
        }
        int64_t dl = aco_rt_now() + 15 * MS;
        int r = run_op(dl, -1, &took);
        if (r != passed_rc())
            TEST_FAIL_AT(__FILE__, __LINE__, "%s with a deadline in 15 ms: %d", op_name[op], r);
        if (op_end < dl)
            TEST_FAIL_AT(__FILE__, __LINE__, "%s: -ETIMEDOUT %" PRId64 " ns early", op_name[op],
                         dl - op_end);
        int64_t nolimit[] = {-1, INT64_MAX, INT64_MAX - 1, aco_rt_now() + ((int64_t)1 << 60)};
        for (size_t i = 0; i < sizeof(nolimit) / sizeof(nolimit[0]); i++) {
            r = run_op(nolimit[i], 10, &took);
            if (r != woken_rc())
                TEST_FAIL_AT(__FILE__, __LINE__, "%s with deadline %" PRId64 ": %d, want %d",
                             op_name[op], nolimit[i], r, woken_rc());
            reset();
        }
        if (op == OP_MUTEX) CHECK_EQ(aco_rt_mutex_unlock(&mx), 0);
    }
    /* ready now: a passed deadline does not stop the call */
    aco_rt_sem_post(&sem);
    CHECK_EQ(aco_rt_sem_wait(&sem, 0), 0);
    aco_rt_sem_post(&sem);
    CHECK_EQ(aco_rt_sem_wait(&sem, INT64_MIN), 0);
    CHECK_EQ(aco_rt_mutex_lock(&mx, 0), 0);
    CHECK_EQ(aco_rt_mutex_unlock(&mx), 0);
    CHECK_EQ(aco_rt_mutex_lock(&mx, -2), 0);
    CHECK_EQ(aco_rt_mutex_unlock(&mx), 0);
    CHECK_EQ(aco_rt_wg_done(&wg), 0);
    CHECK_EQ(aco_rt_wg_wait(&wg, 0), 0);
    CHECK_EQ(aco_rt_chan_recv(ch_full, &v, 0), 0);
    CHECK_EQ(aco_rt_chan_send(ch_full, &v, -5), 0);
    CHECK_EQ(aco_rt_chan_recv(ch_full, &v, INT64_MIN), 0);
    CHECK_EQ(write(pp[1], "x", 1), 1);
    char c;
    CHECK_EQ(aco_rt_read(pp[0], &c, 1, 0), 1);
    CHECK_EQ(write(sp[1], "y", 1), 1);
    CHECK_EQ(aco_rt_wait(sp[0], POLLIN, 0), POLLIN);
    CHECK_EQ(aco_rt_recv(sp[0], &c, 1, 0, -3), 1);
    aco_rt_sem_post(&target_go);
    aco_rt_sem_post(&member_go);
    CHECK_EQ(aco_rt_sleep(2 * MS), 0);
    CHECK_EQ(aco_rt_join(target, 0), 0);
    CHECK_EQ(aco_rt_group_join(grp, 0), 0);
    CHECK_EQ(aco_rt_group_free(grp), 0);
}

static void deadlines(aco_rt_sched_t* s) {
    setup(s);
    test_go(s, deadlines_co, NULL);
    CHECK_EQ(aco_rt_chan_free(ch_empty), 0);
    CHECK_EQ(aco_rt_chan_free(ch_full), 0);
    int fds[] = {pp[0], pp[1], sp[0], sp[1], lp[0], lp[1], lsn};
    for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++) CHECK_EQ(aco_rt_close(fds[i]), 0);
}

/* ---- sleeps ---- */
static int ran;
static void mark_fn(void* arg) { (void)arg; ran++; }
static void sleeps_co(void* arg) {
    (void)arg;
    int64_t zeros[] = {0, -1, -2, INT64_MIN};
    for (size_t i = 0; i < 4; i++) {
        ran = 0;
        for (int k = 0; k < 3; k++) CHECK_EQ(aco_rt_detach(aco_rt_spawn(NULL, mark_fn, NULL)), 0);
        CHECK_EQ(aco_rt_sleep(zeros[i]), 0);
        CHECK_EQ(ran, 3);
    }
    int64_t pasts[] = {0, -2, INT64_MIN, aco_rt_now()};
    for (size_t i = 0; i < 4; i++) {
        ran = 0;
        for (int k = 0; k < 3; k++) CHECK_EQ(aco_rt_detach(aco_rt_spawn(NULL, mark_fn, NULL)), 0);
        CHECK_EQ(aco_rt_sleep_until(pasts[i]), 0);
        CHECK_EQ(ran, 3);
    }
    for (int i = 0; i < 5; i++) {
        int64_t t0 = aco_rt_now();
        int64_t ns = (int64_t)(i + 1) * 700000;
        CHECK_EQ(aco_rt_sleep(ns), 0);
        CHECK_GE(aco_rt_now() - t0, ns);
        int64_t dl = aco_rt_now() + ns;
        CHECK_EQ(aco_rt_sleep_until(dl), 0);
        CHECK_GE(aco_rt_now(), dl);
    }
}

static aco_rt_co_t* forever;
static int forever_rc = 1;
static void forever_fn(void* arg) {
    (void)arg;
    forever_rc = aco_rt_sleep_until(-1);
}
static aco_rt_co_t* forever2;
static int forever2_rc = 1;
static void forever2_fn(void* arg) {
    (void)arg;
    forever2_rc = aco_rt_sleep(INT64_MAX);
}
static aco_rt_timer_t stop_timer;
static void stop_cb(aco_rt_timer_t* t) {
    (void)t;
    aco_rt_sched_stop(cur);
}

static void sleeps(aco_rt_sched_t* s) {
    test_go(s, sleeps_co, NULL);
    /* asleep for good: the run goes on (no -EDEADLK) until a stop */
    forever_rc = forever2_rc = 1;
    forever = aco_rt_spawn(s, forever_fn, NULL);
    forever2 = aco_rt_spawn(s, forever2_fn, NULL);
    CHECK(forever && forever2);
    /* (the run lasts until the stop timer's deadline: measured from that
     * deadline, not from a clock read after the timer was armed) */
    int64_t stop_at = in_ms(30);
    CHECK_EQ(aco_rt_timer_start(&stop_timer, stop_at, stop_cb), 0);
    CHECK_EQ(aco_rt_sched_run(s), 0);
    CHECK_GE(aco_rt_now(), stop_at);
    CHECK_EQ(forever_rc, 1);
    CHECK_EQ(forever2_rc, 1);
    aco_rt_stats_t st;
    aco_rt_stats(s, &st);
    CHECK_EQ(st.cos_alive, 2);
    CHECK_EQ(st.cos_parked, 2);
    CHECK_GE(st.timers, 2);         /* one per co asleep for good */
    /* a cancel from outside cos ends each */
    CHECK_EQ(aco_rt_cancel(forever), 0);
    CHECK_EQ(aco_rt_cancel(forever2), 0);
    CHECK_EQ(aco_rt_detach(forever2), 0);
    CHECK_EQ(aco_rt_sched_run(s), 0);
    CHECK_EQ(forever_rc, -ECANCELED);
    CHECK_EQ(forever2_rc, -ECANCELED);
    CHECK_EQ(aco_rt_detach(forever), 0);
    CHECK_EQ(aco_rt_sched_run(s), 0);
}

/* ---- timers ---- */
#define NT 64
static aco_rt_timer_t tm[NT];
static int64_t tm_dl[NT], tm_at[NT];
static int tm_fired[NT], tm_order[NT], n_fired;
static void tm_cb(aco_rt_timer_t* t) {
    int i = (int)(t - tm);
    tm_at[i] = aco_rt_now();
    tm_fired[i]++;
    tm_order[n_fired++] = i;
    CHECK(aco_rt_self() == NULL);       /* not in a co */
}
static int periodic_left;
static aco_rt_timer_t periodic, victim;
static int victim_fired;
static void victim_cb(aco_rt_timer_t* t) { (void)t; victim_fired++; }
static void periodic_cb(aco_rt_timer_t* t) {
    CHECK(t == &periodic);
    if (--periodic_left > 0) CHECK_EQ(aco_rt_timer_start(t, in_ms(1), periodic_cb), 0);
    /* stop another armed timer from a callback */
    if (periodic_left == 2) CHECK_EQ(aco_rt_timer_stop(&victim), 1);
}
static void wait_ms_co(void* arg) { CHECK_EQ(aco_rt_sleep((int64_t)(intptr_t)arg * MS), 0); }

static aco_rt_timer_t busy_tm;
static int busy_fired;
static void busy_cb(aco_rt_timer_t* t) { (void)t; busy_fired = 1; }
static void yielder(void* arg) {
    (void)arg;
    int64_t end = in_ms(100);
    while (!busy_fired && aco_rt_now() < end) CHECK_EQ(aco_rt_yield(), 0);
    CHECK_EQ(busy_fired, 1);
}
static void* thread_no_sched(void* arg) {
    (void)arg;
    static aco_rt_timer_t t;
    CHECK_EQ(aco_rt_timer_start(&t, 0, victim_cb), -EPERM);
    return NULL;
}

static void timers(aco_rt_sched_t* s) {
    memset(tm, 0, sizeof(tm));
    memset(tm_fired, 0, sizeof(tm_fired));
    n_fired = 0;
    uint64_t rnd = 99;
    int64_t base = aco_rt_now();
    for (int i = 0; i < NT; i++) {
        if (i % 2) aco_rt_timer_init(&tm[i]);
        tm_dl[i] = base + (int64_t)(test_rand(&rnd) % 40000000);
        if (i == 0) tm_dl[i] = 0;
        if (i == 1) tm_dl[i] = -1;
        if (i == 2) tm_dl[i] = INT64_MIN;
        if (i == 3) tm_dl[i] = INT64_MAX;
        CHECK_EQ(aco_rt_timer_start(&tm[i], tm_dl[i], tm_cb), 0);
    }
    aco_rt_stats_t st;
    aco_rt_stats(s, &st);
    CHECK_GE(st.timers, NT);
    /* armed timers do not keep a run going: no co, the run returns */
    int64_t t0 = aco_rt_now();
    CHECK_EQ(aco_rt_sched_run(s), 0);
    CHECK_LT(aco_rt_now() - t0, 30 * MS);
    /* a run lasting past their deadlines fires them */
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, wait_ms_co, (void*)(intptr_t)60)), 0);
    CHECK_EQ(aco_rt_sched_run(s), 0);
    for (int i = 0; i < NT; i++) {
        if (i == 3) {
            CHECK_EQ(tm_fired[i], 0);
            continue;
        }
        CHECK_EQ(tm_fired[i], 1);
        if (tm_at[i] < tm_dl[i])
            TEST_FAIL_AT(__FILE__, __LINE__, "timer %d fired %" PRId64 " ns early", i,
                         tm_dl[i] - tm_at[i]);
    }
    CHECK_EQ(n_fired, NT - 1);
    /* in deadline order (up to a tick) */
    for (int k = 1; k < n_fired; k++) {
        int64_t a = tm_dl[tm_order[k - 1]], b = tm_dl[tm_order[k]];
        CHECK_LE(a < base ? base : a, (b < base ? base : b) + 16384 * 2);
    }
    CHECK_EQ(aco_rt_timer_stop(&tm[0]), 0);
    CHECK_EQ(aco_rt_timer_stop(&tm[3]), 1);
    CHECK_EQ(aco_rt_timer_stop(&tm[3]), 0);
    /* a fired timer starts again */
    CHECK_EQ(aco_rt_timer_start(&tm[0], in_ms(1), tm_cb), 0);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, wait_ms_co, (void*)(intptr_t)10)), 0);
    CHECK_EQ(aco_rt_sched_run(s), 0);
    CHECK_EQ(tm_fired[0], 2);
    /* a callback that restarts itself and stops another */
    periodic_left = 5;
    victim_fired = 0;
    CHECK_EQ(aco_rt_timer_start(&periodic, in_ms(1), periodic_cb), 0);
    CHECK_EQ(aco_rt_timer_start(&victim, in_ms(200), victim_cb), 0);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, wait_ms_co, (void*)(intptr_t)300)), 0);
    CHECK_EQ(aco_rt_sched_run(s), 0);
    CHECK_EQ(periodic_left, 0);
    CHECK_EQ(victim_fired, 0);
    CHECK_EQ(aco_rt_timer_stop(&periodic), 0);
    /* while cos stay ready, timers still fire */
    busy_fired = 0;
    CHECK_EQ(aco_rt_timer_start(&busy_tm, in_ms(3), busy_cb), 0);
    for (int i = 0; i < 3; i++) CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, yielder, NULL)), 0);
    CHECK_EQ(aco_rt_sched_run(s), 0);
    /* no scheduler on the thread: -EPERM */
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, thread_no_sched, NULL), 0);
    CHECK_EQ(pthread_join(th, NULL), 0);
    /* left armed for sched_free to disarm */
    CHECK_EQ(aco_rt_timer_start(&tm[5], in_ms(100000), tm_cb), 0);
    CHECK_EQ(aco_rt_timer_start(&tm[6], INT64_MAX, tm_cb), 0);
}

/* ---- stops asked before a run ---- */
static int stop_ran;
static void stop_co(void* arg) {
    (void)arg;
    stop_ran++;
    CHECK_EQ(aco_rt_yield(), 0);
    stop_ran++;
}
static void stops(aco_rt_sched_t* s) {
    aco_rt_sched_stop(NULL);        /* nothing */
    stop_ran = 0;
    aco_rt_co_t* c = aco_rt_spawn(s, stop_co, NULL);
    CHECK(c != NULL);
    aco_rt_sched_stop(s);
    aco_rt_sched_stop(s);
    aco_rt_sched_stop(s);
    CHECK_EQ(aco_rt_sched_run(s), 0);
    CHECK_EQ(stop_ran, 0);          /* it returned at once */
    /* several stops before a run end that run only */
    CHECK_EQ(aco_rt_detach(c), 0);
    CHECK_EQ(aco_rt_sched_run(s), 0);
    CHECK_EQ(stop_ran, 2);
}

/* ---- what a callback may do: the calls that never wait, spawn, cancel ---- */
static aco_rt_timer_t cb_t[4];
static aco_rt_sem_t cb_sem;
static aco_rt_chan_t* cb_ch;
static aco_rt_co_t* cb_sleeper;
static int cb_flags;
static void cb_spawned(void* arg) { (void)arg; cb_flags |= 1; }
static void cb_spawn(aco_rt_timer_t* t) {
    (void)t;
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(NULL, cb_spawned, NULL)), 0);
}
static void cb_post(aco_rt_timer_t* t) { (void)t; aco_rt_sem_post(&cb_sem); }
static void cb_cancel(aco_rt_timer_t* t) { (void)t; CHECK_EQ(aco_rt_cancel(cb_sleeper), 0); }
static void cb_close(aco_rt_timer_t* t) { (void)t; CHECK_EQ(aco_rt_chan_close(cb_ch), 0); }
static void cb_sem_co(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_sem_wait(&cb_sem, -1), 0);
    cb_flags |= 2;
}
static void cb_sleep_co(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_sleep_until(-1), -ECANCELED);
    cb_flags |= 4;
}
static void cb_chan_co(void* arg) {
    (void)arg;
    int v;
    CHECK_EQ(aco_rt_chan_recv(cb_ch, &v, -1), -EPIPE);
    cb_flags |= 8;
}
static void callbacks(aco_rt_sched_t* s) {
    cb_flags = 0;
    aco_rt_sem_init(&cb_sem, 0);
    cb_ch = aco_rt_chan_new(sizeof(int), 0);
    CHECK(cb_ch != NULL);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, cb_sem_co, NULL)), 0);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, cb_chan_co, NULL)), 0);
    cb_sleeper = aco_rt_spawn(s, cb_sleep_co, NULL);
    CHECK(cb_sleeper != NULL);
    CHECK_EQ(aco_rt_timer_start(&cb_t[0], in_ms(2), cb_spawn), 0);
    CHECK_EQ(aco_rt_timer_start(&cb_t[1], in_ms(3), cb_post), 0);
    CHECK_EQ(aco_rt_timer_start(&cb_t[2], in_ms(4), cb_cancel), 0);
    CHECK_EQ(aco_rt_timer_start(&cb_t[3], in_ms(5), cb_close), 0);
    CHECK_EQ(aco_rt_sched_run(s), 0);
    CHECK_EQ(cb_flags, 15);
    CHECK_EQ(aco_rt_detach(cb_sleeper), 0);
    CHECK_EQ(aco_rt_sched_run(s), 0);
    CHECK_EQ(aco_rt_chan_free(cb_ch), 0);
}

/* ---- a stop from a signal handler (errno kept) ---- */
static volatile sig_atomic_t sig_errno_ok;
static void on_usr1(int sig) {
    (void)sig;
    int saved = errno;
    errno = 4242;
    aco_rt_sched_stop(cur);
    sig_errno_ok = errno == 4242;
    errno = saved;
}
static pthread_t main_thread;
static void* killer(void* arg) {
    (void)arg;
    usleep(20000);
    CHECK_EQ(pthread_kill(main_thread, SIGUSR1), 0);
    return NULL;
}
static void signal_stop(aco_rt_sched_t* s) {
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_usr1;
    CHECK_EQ(sigaction(SIGUSR1, &sa, NULL), 0);
    main_thread = pthread_self();
    forever_rc = 1;
    forever = aco_rt_spawn(s, forever_fn, NULL);
    CHECK(forever != NULL);
    sig_errno_ok = 0;
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, killer, NULL), 0);
    CHECK_EQ(aco_rt_sched_run(s), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
    CHECK_EQ(sig_errno_ok, 1);
    CHECK_EQ(forever_rc, 1);
    CHECK_EQ(aco_rt_cancel(forever), 0);
    CHECK_EQ(aco_rt_detach(forever), 0);
    CHECK_EQ(aco_rt_sched_run(s), 0);
    CHECK_EQ(forever_rc, -ECANCELED);
    signal(SIGUSR1, SIG_DFL);
}

static void body(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    cur = s;
    deadlines(s);
    sleeps(s);
    stops(s);
    callbacks(s);
    signal_stop(s);
    timers(s);
}

static int one_backend(int b) {
    aco_rt_sched_t* s = test_sched_on(b, NULL);
    body(s, NULL);
    aco_rt_sched_free(s);
    /* sched_free disarmed what was left */
    CHECK_EQ(aco_rt_timer_stop(&tm[5]), 0);
    CHECK_EQ(aco_rt_timer_stop(&tm[6]), 0);
    return 0;
}

int main(void) {
    test_watchdog();
    clock_checks();
    /* (the backends at once, a process each: the time goes to waiting) */
    test_backends_apart(one_backend);
    puts("test_timer_bb_deadlines: ok");
    return 0;
}
