/* test_sched_bb_misc.c - schedulers, cos, pools, stats and dump from
 * aco_rt.h alone: every call that needs a co says -EPERM outside one (and
 * does nothing), the calls that never wait work there; NULL arguments
 * (-EINVAL, or nothing done); sched_new's refusals (EBUSY, EINVAL for bad
 * opts and $ACO_RT_BACKEND, ENOMEM for a stack the address space cannot
 * take); sched_run's -EINVAL, -EPERM (another thread's, already running)
 * and -EDEADLK with the cos left as they were; spawn options (a stack
 * larger than the share stacks, standalone, name in the dump, private
 * buffer, save_size over 1 GiB: ENOMEM); join and detach rules; a cancel
 * of the caller itself, of a finished co; the counters (spawned,
 * cos_alive, cos_ready, cos_parked, switches, handoffs); pools: spawns
 * from outside and from cos, pool_wait's -ETIMEDOUT, CANCEL (later spawns
 * not cancelled), pool_free destroying parked cos, group refusals. */
#define _GNU_SOURCE
#include "rt_test.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>

static int64_t in_ms(int ms) { return aco_rt_now() + ms * MS; }

/* ---- outside cos ---- */
static aco_rt_mutex_t mx;
static aco_rt_cond_t cv;
static aco_rt_sem_t sem;
static aco_rt_wg_t wg;
static void* nop_fn(void* a) { return a; }

static void outside(aco_rt_sched_t* s) {
    (void)s;
    int sv[2];
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    CHECK_EQ(write(sv[1], "abc", 3), 3);
    char buf[8];
    struct iovec iov = {buf, sizeof(buf)};
    struct pollfd p = {sv[0], POLLIN, 0};
    const char* d = NULL;
    CHECK(aco_rt_self() == NULL);
    CHECK_EQ(aco_rt_cancelled(), 0);
    CHECK_EQ(aco_rt_cancel_check(), -EPERM);
    CHECK_EQ(aco_rt_cancel_shield(1), -EPERM);
    CHECK_EQ(aco_rt_yield(), -EPERM);
    CHECK_EQ(aco_rt_sleep(0), -EPERM);
    CHECK_EQ(aco_rt_sleep(1000), -EPERM);
    CHECK_EQ(aco_rt_sleep_until(-1), -EPERM);
    CHECK_EQ(aco_rt_sleep_until(0), -EPERM);
    size_t sz = 7;
    CHECK(aco_rt_private(&sz) == NULL);
    CHECK_EQ(sz, 0);
    CHECK(aco_rt_private(NULL) == NULL);
    CHECK_EQ(aco_rt_mutex_lock(&mx, 0), -EPERM);
    CHECK_EQ(aco_rt_mutex_lock(&mx, -1), -EPERM);
    CHECK_EQ(aco_rt_mutex_trylock(&mx), -EPERM);
    CHECK_EQ(aco_rt_mutex_unlock(&mx), -EPERM);
    CHECK_EQ(aco_rt_cond_wait(&cv, &mx, 0), -EPERM);
    CHECK_EQ(aco_rt_sem_wait(&sem, -1), -EPERM);
    CHECK_EQ(aco_rt_wg_wait(&wg, -1), -EPERM);
    CHECK_EQ(aco_rt_read(sv[0], buf, 1, -1), -EPERM);
    CHECK_EQ(aco_rt_readv(sv[0], &iov, 1, -1), -EPERM);
    CHECK_EQ(aco_rt_recv(sv[0], buf, 1, 0, -1), -EPERM);
    CHECK_EQ(aco_rt_recv(sv[0], buf, 1, MSG_DONTWAIT, -1), -EPERM);
    CHECK_EQ(aco_rt_write(sv[0], "x", 1, -1), -EPERM);
    CHECK_EQ(aco_rt_send(sv[0], "x", 1, 0, -1), -EPERM);
    CHECK_EQ(aco_rt_wait(sv[0], POLLIN, -1), -EPERM);
    CHECK_EQ(aco_rt_poll(&p, 1, -1), -EPERM);
    CHECK_EQ(aco_rt_recv_lend(sv[0], &d, -1), -EPERM);
    CHECK_EQ(aco_rt_offload(nop_fn, NULL, NULL, NULL, -1), -EPERM);
    sigset_t set;
    sigemptyset(&set);
    CHECK_EQ(aco_rt_signal_wait(&set, NULL, -1), -EPERM);
    aco_rt_chan_t* ch = aco_rt_chan_new(sizeof(int), 1);
    CHECK(ch != NULL);
    int v = 1;
    CHECK_EQ(aco_rt_chan_send(ch, &v, 0), -EPERM);
    CHECK_EQ(aco_rt_chan_recv(ch, &v, 0), -EPERM);
    aco_rt_case_t c = {ch, ACO_RT_RECV, &v};
    CHECK_EQ(aco_rt_chan_select(&c, 1, NULL, 0), -EPERM);
    CHECK_EQ(aco_rt_chan_len(ch), 0);
    CHECK_EQ(aco_rt_chan_free(ch), 0);
    aco_rt_group_t* g = aco_rt_group_new(NULL);
    CHECK(g != NULL);
    CHECK_EQ(aco_rt_group_join(g, 0), -EPERM);
    CHECK_EQ(aco_rt_group_cancel(g, 0), -EPERM);
    CHECK_EQ(aco_rt_group_free(g), 0);
    /* nothing was taken: the bytes are all there */
    CHECK_EQ(recv(sv[0], buf, sizeof(buf), MSG_DONTWAIT), 3);
    /* the calls that never wait work outside cos */
    aco_rt_sem_init(&sem, 0);
    aco_rt_sem_post(&sem);
    CHECK_EQ(aco_rt_sem_trywait(&sem), 0);
    CHECK_EQ(aco_rt_sem_trywait(&sem), -EAGAIN);
    CHECK_EQ(aco_rt_wg_add(&wg, 2), 0);
    CHECK_EQ(aco_rt_wg_done(&wg), 0);
    CHECK_EQ(aco_rt_wg_done(&wg), 0);
    CHECK_EQ(aco_rt_wg_done(&wg), -EINVAL);
    CHECK_EQ(aco_rt_wg_add(&wg, INT64_MAX), 0);
    CHECK_EQ(aco_rt_wg_add(&wg, 1), -EINVAL);
    CHECK_EQ(aco_rt_wg_add(&wg, -INT64_MAX), 0);
    aco_rt_cond_signal(&cv);
    aco_rt_cond_broadcast(&cv);
    /* NULL objects */
    aco_rt_sem_post(NULL);
    aco_rt_cond_signal(NULL);
    aco_rt_cond_broadcast(NULL);
    aco_rt_mutex_init(NULL);
    aco_rt_cond_init(NULL);
    aco_rt_sem_init(NULL, 3);
    aco_rt_wg_init(NULL);
    aco_rt_timer_init(NULL);
    CHECK_EQ(aco_rt_timer_stop(NULL), 0);
    CHECK_EQ(aco_rt_sem_trywait(NULL), -EINVAL);
    CHECK_EQ(aco_rt_wg_add(NULL, 1), -EINVAL);
    CHECK_EQ(aco_rt_wg_done(NULL), -EINVAL);
    CHECK_EQ(aco_rt_cancel(NULL), -EINVAL);
    CHECK_EQ(aco_rt_detach(NULL), -EINVAL);
    CHECK_EQ(aco_rt_group_free(NULL), 0);
    CHECK_EQ(aco_rt_group_size(NULL), 0);
    CHECK(aco_rt_group_sched(NULL) == NULL);
    CHECK_EQ(aco_rt_group_spawn(NULL, (aco_rt_fn_t)free, NULL, NULL), -EINVAL);
    CHECK(aco_rt_backend_name(NULL) == NULL);
    CHECK_EQ(aco_rt_sched_run(NULL), -EINVAL);
    aco_rt_stats(s, NULL);
    aco_rt_dump(NULL, -1);
    aco_rt_dump(s, -1);
    aco_rt_sched_stop(NULL);
    aco_rt_sched_free(NULL);
    CHECK_EQ(aco_rt_lend_return(NULL), -EINVAL);
    errno = 0;
    CHECK(aco_rt_chan_new(0, 1) == NULL);
    CHECK_EQ(errno, EINVAL);
    CHECK_EQ(aco_rt_chan_free(NULL), 0);
    CHECK_EQ(aco_rt_chan_close(NULL), -EINVAL);
    CHECK_EQ(aco_rt_chan_len(NULL), 0);
    close(sv[0]);
    close(sv[1]);
}

/* ---- another thread: no scheduler, or its own ---- */
static aco_rt_sched_t* main_s;
static void* other_thread(void* arg) {
    (void)arg;
    CHECK(aco_rt_sched_current() == NULL);
    aco_rt_stats_t st;
    memset(&st, 0xab, sizeof(st));
    aco_rt_stats(NULL, &st);       /* no scheduler here: every counter 0 */
    const unsigned char* z = (const unsigned char*)&st;
    for (size_t i = 0; i < sizeof(st); i++) CHECK_EQ(z[i], 0);
    aco_rt_dump(NULL, -1);
    errno = 0;
    CHECK(aco_rt_spawn(NULL, (aco_rt_fn_t)free, NULL) == NULL);
    CHECK_EQ(errno, EPERM);
    errno = 0;
    CHECK(aco_rt_group_new(NULL) == NULL);
    CHECK_EQ(errno, EPERM);
    /* another thread's scheduler: -EPERM, nothing done */
    CHECK_EQ(aco_rt_sched_run(main_s), -EPERM);
    aco_rt_sched_free(main_s);
    aco_rt_sched_t* s2 = aco_rt_sched_new(NULL);
    CHECK(s2 != NULL);
    CHECK(aco_rt_sched_current() == s2);
    CHECK_EQ(aco_rt_sched_run(s2), 0);
    aco_rt_sched_free(s2);
    CHECK(aco_rt_sched_current() == NULL);
    return NULL;
}

static void sched_refusals(aco_rt_sched_t* s) {
    main_s = s;
    errno = 0;
    CHECK(aco_rt_sched_new(NULL) == NULL);
    CHECK_EQ(errno, EBUSY);
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, other_thread, NULL), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
    CHECK(aco_rt_sched_current() == s);
}

static void* bad_opts_thread(void* arg) {
    (void)arg;
    aco_rt_opts_t o;
    memset(&o, 0, sizeof(o));
    o.backend = 7;
    errno = 0;
    CHECK(aco_rt_sched_new(&o) == NULL);
    CHECK_EQ(errno, EINVAL);
    o.backend = -1;
    errno = 0;
    CHECK(aco_rt_sched_new(&o) == NULL);
    CHECK_EQ(errno, EINVAL);
    memset(&o, 0, sizeof(o));
    o.backend = ACO_RT_BACKEND_EPOLL;
    o.stack_size = (size_t)1 << 60;
    errno = 0;
    CHECK(aco_rt_sched_new(&o) == NULL);
    CHECK_EQ(errno, ENOMEM);
    /* the thread has no scheduler after those */
    CHECK(aco_rt_sched_current() == NULL);
    CHECK_EQ(setenv("ACO_RT_BACKEND", "bogus", 1), 0);
    errno = 0;
    CHECK(aco_rt_sched_new(NULL) == NULL);
    CHECK_EQ(errno, EINVAL);
    CHECK_EQ(unsetenv("ACO_RT_BACKEND"), 0);
    aco_rt_sched_t* s = aco_rt_sched_new(NULL);
    CHECK(s != NULL);
    aco_rt_sched_free(s);
    return NULL;
}

/* ---- -EDEADLK, the cos left as they were ---- */
static aco_rt_sem_t dl_a, dl_b;
static int dl_done;
static void dl_one(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_sem_wait(&dl_a, -1), 0);
    aco_rt_sem_post(&dl_b);
    dl_done++;
}
static void dl_two(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_sem_wait(&dl_b, -1), 0);
    dl_done++;
}
static _Atomic int other_made, other_free;
static void other_free_cb(aco_rt_timer_t* t) { (void)t; atomic_store(&other_free, 1); }
static void deadlock(aco_rt_sched_t* s) {
    aco_rt_sem_init(&dl_a, 0);
    aco_rt_sem_init(&dl_b, 0);
    dl_done = 0;
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, dl_one, NULL)), 0);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, dl_two, NULL)), 0);
    CHECK_EQ(aco_rt_sched_run(s), -EDEADLK);
    CHECK_EQ(dl_done, 0);
    aco_rt_stats_t st;
    aco_rt_stats(s, &st);
    CHECK_EQ(st.cos_alive, 2);
    CHECK_EQ(st.cos_parked, 2);
    CHECK_EQ(st.cos_ready, 0);
    aco_rt_sem_post(&dl_a);        /* from outside cos */
    CHECK_EQ(aco_rt_sched_run(s), 0);
    CHECK_EQ(dl_done, 2);
}

/* -EDEADLK waits while another thread's scheduler is alive, and comes
 * when it is freed */
static void* other_sched_thread(void* arg) {
    (void)arg;
    aco_rt_sched_t* o = aco_rt_sched_new(NULL);
    CHECK(o != NULL);
    atomic_store(&other_made, 1);
    while (!atomic_load(&other_free)) usleep(1000);
    aco_rt_sched_free(o);
    return NULL;
}
static void deadlock_other(aco_rt_sched_t* s) {
    aco_rt_sem_init(&dl_a, 0);
    aco_rt_sem_init(&dl_b, 0);
    dl_done = 0;
    atomic_store(&other_made, 0);
    atomic_store(&other_free, 0);
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, other_sched_thread, NULL), 0);
    while (!atomic_load(&other_made)) sched_yield();
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, dl_one, NULL)), 0);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, dl_two, NULL)), 0);
    /* a timer of the run's own frees the other scheduler in 40 ms: the
     * run cannot say -EDEADLK before that timer's deadline (measured from
     * the deadline itself, not from a clock read after it was set: under
     * memcheck the timer's start alone can take half a millisecond) */
    static aco_rt_timer_t t_free;
    int64_t free_at = in_ms(40);
    CHECK_EQ(aco_rt_timer_start(&t_free, free_at, other_free_cb), 0);
    CHECK_EQ(aco_rt_sched_run(s), -EDEADLK);
    CHECK_GE(aco_rt_now(), free_at);
    CHECK_EQ(pthread_join(t, NULL), 0);
    CHECK_EQ(dl_done, 0);
    aco_rt_sem_post(&dl_a);
    CHECK_EQ(aco_rt_sched_run(s), 0);
    CHECK_EQ(dl_done, 2);
}

/* ---- the counters while cos wait ---- */
static aco_rt_sem_t st_sem;
static int st_pipe[2], st_sp[2];
static void st_poller(void* arg) {
    (void)arg;
    static struct pollfd p[3];
    p[0] = (struct pollfd){st_pipe[0], POLLIN, 0};
    p[1] = (struct pollfd){st_sp[0], POLLIN, 0};
    p[2] = (struct pollfd){st_sp[1], POLLIN, 0};
    CHECK_EQ(aco_rt_poll(p, 3, in_ms(5000)), 1);
}
static void st_waiter(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_wait(st_sp[1], POLLIN, in_ms(5000)), POLLIN);
}
static void st_semmer(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_sem_wait(&st_sem, in_ms(5000)), 0);
}
static void st_forever(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_sem_wait(&st_sem, -1), 0);
}
static void st_yielder(void* arg) {
    (void)arg;
    for (int i = 0; i < 10; i++) CHECK_EQ(aco_rt_yield(), 0);
}
static void stats_live_co(void* arg) {
    (void)arg;
    aco_rt_stats_t a, b;
    aco_rt_stats(NULL, &a);
    CHECK_EQ(a.cos_alive, 1);
    CHECK_EQ(a.cos_parked, 0);
    CHECK_EQ(a.io_inflight, 0);
    aco_rt_sem_init(&st_sem, 0);
    CHECK_EQ(pipe(st_pipe), 0);
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, st_sp), 0);
    aco_rt_co_t* c[4];
    c[0] = aco_rt_spawn(NULL, st_poller, NULL);
    c[1] = aco_rt_spawn(NULL, st_waiter, NULL);
    c[2] = aco_rt_spawn(NULL, st_semmer, NULL);
    c[3] = aco_rt_spawn(NULL, st_forever, NULL);
    aco_rt_stats(NULL, &b);
    CHECK_EQ(b.cos_ready, 4);
    CHECK_EQ(b.cos_alive, 5);
    CHECK_EQ(b.spawned - a.spawned, 4);
    CHECK_EQ(aco_rt_sleep(5 * MS), 0);
    aco_rt_stats(NULL, &b);
    CHECK_EQ(b.cos_alive, 5);
    CHECK_EQ(b.cos_parked, 4);
    CHECK_EQ(b.cos_ready, 0);
    CHECK_EQ(b.io_inflight, 4);         /* a poll of 3 counts 3, a wait 1 */
    CHECK_GE(b.timers, 3);              /* three deadlines */
    CHECK_EQ(write(st_sp[0], "x", 1), 1);
    aco_rt_sem_post(&st_sem);
    aco_rt_sem_post(&st_sem);
    for (int i = 0; i < 4; i++) CHECK_EQ(aco_rt_join(c[i], in_ms(5000)), 0);
    /* (io_uring: the poll's cancelled operations are in the kernel until
     * their completions come, at the scheduler's next look) */
    CHECK_EQ(aco_rt_sleep(2 * MS), 0);
    aco_rt_stats(NULL, &b);
    CHECK_EQ(b.cos_alive, 1);
    CHECK_EQ(b.cos_parked, 0);
    CHECK_EQ(b.io_inflight, 0);
    /* hand-offs among yielding cos */
    aco_rt_stats(NULL, &a);
    for (int i = 0; i < 3; i++) c[i] = aco_rt_spawn(NULL, st_yielder, NULL);
    for (int i = 0; i < 3; i++) CHECK_EQ(aco_rt_join(c[i], in_ms(5000)), 0);
    aco_rt_stats(NULL, &b);
    CHECK_GE(b.switches - a.switches, 30);
    CHECK_GT(b.handoffs - a.handoffs, 0);
    CHECK_LE(b.handoffs - a.handoffs, b.switches - a.switches);
    close(st_pipe[0]);
    close(st_pipe[1]);
    CHECK_EQ(aco_rt_close(st_sp[0]), 0);
    CHECK_EQ(aco_rt_close(st_sp[1]), 0);
}

/* ---- spawn options, joins, detach, cancel ---- */
static void deep_fn(void* arg) {
    size_t n = (size_t)(intptr_t)arg;
    volatile char* big = __builtin_alloca(n);
    for (size_t i = 0; i < n; i += 4096) big[i] = (char)i;
    big[n - 1] = 1;
    CHECK_EQ(aco_rt_yield(), 0);
    for (size_t i = 0; i < n; i += 4096) CHECK_EQ(big[i], (char)i);
}
static aco_rt_sem_t hold;
static void holder_fn(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_sem_wait(&hold, in_ms(10000)), 0);
}
static void priv_fn(void* arg) {
    size_t want = (size_t)(intptr_t)arg, sz = 1;
    unsigned char* p = aco_rt_private(&sz);
    if (want == 0) {
        CHECK(p == NULL);
        CHECK_EQ(sz, 0);
        return;
    }
    CHECK(p != NULL);
    CHECK_EQ(sz, want);
    for (size_t i = 0; i < want; i++) CHECK_EQ(p[i], 0);
    memset(p, 0xee, want);
    CHECK_EQ(aco_rt_yield(), 0);
}
static aco_rt_co_t* fin;
static void quick_fn(void* arg) { (void)arg; }
static int self_cancel_rc[3];
static void self_cancel_fn(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_cancel(aco_rt_self()), 0);
    CHECK_EQ(aco_rt_cancelled(), 1);
    CHECK_EQ(aco_rt_cancel_check(), -ECANCELED);
    self_cancel_rc[0] = aco_rt_yield();
    self_cancel_rc[1] = aco_rt_sleep(0);
    self_cancel_rc[2] = aco_rt_sem_wait(&hold, 0);
}
static void dump_check(aco_rt_sched_t* s) {
    int p[2];
    CHECK_EQ(pipe(p), 0);
    CHECK_EQ(fcntl(p[0], F_SETFL, O_NONBLOCK), 0);
    aco_rt_dump(s, p[1]);
    aco_rt_dump(NULL, p[1]);
    static char buf[65536];
    ssize_t n = read(p[0], buf, sizeof(buf) - 1);
    CHECK_GT(n, 0);
    buf[n] = 0;
    if (strstr(buf, "bb-named-holder") == NULL)
        TEST_FAIL_AT(__FILE__, __LINE__, "the dump lacks the co's name:\n%s", buf);
    close(p[0]);
    close(p[1]);
}

/* a cancelled co: argument errors first, the calls that never wait work */
static aco_rt_mutex_t cmx, other_mx;
static aco_rt_cond_t ccv;
static void cancelled_sync_fn(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_mutex_lock(&cmx, -1), 0);
    CHECK_EQ(aco_rt_cancel(aco_rt_self()), 0);
    CHECK_EQ(aco_rt_mutex_lock(&cmx, -1), -EDEADLK);
    CHECK_EQ(aco_rt_mutex_lock(NULL, -1), -EINVAL);
    CHECK_EQ(aco_rt_mutex_unlock(&other_mx), -EPERM);
    CHECK_EQ(aco_rt_cond_wait(&ccv, &other_mx, -1), -EPERM);
    CHECK_EQ(aco_rt_cond_wait(NULL, &cmx, -1), -EINVAL);
    CHECK_EQ(aco_rt_cond_wait(&ccv, NULL, -1), -EINVAL);
    CHECK_EQ(aco_rt_sem_wait(NULL, -1), -EINVAL);
    CHECK_EQ(aco_rt_wg_wait(NULL, -1), -EINVAL);
    /* a good cond_wait: -ECANCELED, the mutex held again */
    CHECK_EQ(aco_rt_cond_wait(&ccv, &cmx, -1), -ECANCELED);
    CHECK_EQ(aco_rt_mutex_trylock(&cmx), -EBUSY);
    CHECK_EQ(aco_rt_mutex_unlock(&cmx), 0);
    /* trylock and unlock work in a cancelled co; lock does not */
    CHECK_EQ(aco_rt_mutex_trylock(&cmx), 0);
    CHECK_EQ(aco_rt_mutex_unlock(&cmx), 0);
    CHECK_EQ(aco_rt_mutex_lock(&cmx, -1), -ECANCELED);
    CHECK_EQ(aco_rt_mutex_trylock(&cmx), 0);
    CHECK_EQ(aco_rt_mutex_unlock(&cmx), 0);
    aco_rt_sem_post(&hold);
    CHECK_EQ(aco_rt_sem_trywait(&hold), 0);
    CHECK_EQ(aco_rt_sem_wait(&hold, 0), -ECANCELED);
    aco_rt_cond_signal(&ccv);
    CHECK_EQ(aco_rt_cancel_shield(1), 0);
    CHECK_EQ(aco_rt_cancel_check(), 0);
    CHECK_EQ(aco_rt_mutex_lock(&cmx, -1), 0);
    CHECK_EQ(aco_rt_mutex_unlock(&cmx), 0);
    CHECK_EQ(aco_rt_cancel_shield(0), 1);
    CHECK_EQ(aco_rt_cancel_check(), -ECANCELED);
}

/* a cancelled co: every blocking call fails at once, ready or not, and
 * takes nothing */
static aco_rt_sem_t r_sem;
static aco_rt_wg_t r_wg;
static aco_rt_mutex_t r_mx;
static aco_rt_chan_t* r_ch;
static aco_rt_co_t* r_done;
static int r_pipe[2];
static void cancelled_ready_fn(void* arg) {
    (void)arg;
    aco_rt_sem_init(&r_sem, 1);
    aco_rt_wg_init(&r_wg);
    r_ch = aco_rt_chan_new(sizeof(int), 2);
    CHECK(r_ch != NULL);
    int v = 5;
    CHECK_EQ(aco_rt_chan_send(r_ch, &v, -1), 0);
    r_done = aco_rt_spawn(NULL, quick_fn, NULL);
    CHECK(r_done != NULL);
    CHECK_EQ(aco_rt_sleep(0), 0);           /* it finished */
    aco_rt_group_t* g = aco_rt_group_new(NULL);
    CHECK(g != NULL);
    CHECK_EQ(pipe(r_pipe), 0);
    CHECK_EQ(write(r_pipe[1], "p", 1), 1);
    CHECK_EQ(aco_rt_cancel(aco_rt_self()), 0);
    CHECK_EQ(aco_rt_sem_wait(&r_sem, -1), -ECANCELED);
    CHECK_EQ(aco_rt_sem_wait(&r_sem, 0), -ECANCELED);
    CHECK_EQ(aco_rt_wg_wait(&r_wg, -1), -ECANCELED);
    CHECK_EQ(aco_rt_mutex_lock(&r_mx, 0), -ECANCELED);
    CHECK_EQ(aco_rt_chan_recv(r_ch, &v, -1), -ECANCELED);
    CHECK_EQ(aco_rt_chan_send(r_ch, &v, -1), -ECANCELED);
    aco_rt_case_t c = {r_ch, ACO_RT_RECV, &v};
    CHECK_EQ(aco_rt_chan_select(&c, 1, NULL, -1), -ECANCELED);
    CHECK_EQ(aco_rt_join(r_done, -1), -ECANCELED);
    CHECK_EQ(aco_rt_group_join(g, -1), -ECANCELED);
    char b;
    CHECK_EQ(aco_rt_read(r_pipe[0], &b, 1, -1), -ECANCELED);
    CHECK_EQ(aco_rt_wait(r_pipe[0], POLLIN, -1), -ECANCELED);
    CHECK_EQ(aco_rt_write(r_pipe[1], "q", 1, -1), -ECANCELED);
    CHECK_EQ(aco_rt_sleep(-1), -ECANCELED);
    /* nothing was taken */
    CHECK_EQ(aco_rt_sem_trywait(&r_sem), 0);
    CHECK_EQ(aco_rt_chan_len(r_ch), 1);
    CHECK_EQ(read(r_pipe[0], &b, 1), 1);
    CHECK_EQ(b, 'p');
    /* the handle stayed valid: let it go */
    CHECK_EQ(aco_rt_detach(r_done), 0);
    CHECK_EQ(aco_rt_group_free(g), 0);
    CHECK_EQ(aco_rt_chan_close(r_ch), 0);
    CHECK_EQ(aco_rt_chan_free(r_ch), 0);
    close(r_pipe[0]);
    close(r_pipe[1]);
}

static void cos_co(void* arg) {
    aco_rt_sched_t* s = arg;
    aco_rt_spawn_opts_t o;
    /* a stack larger than the share stacks (64 KiB here): its own */
    memset(&o, 0, sizeof(o));
    o.stack_size = 512 * 1024;
    o.name = "deep";
    aco_rt_co_t* c = aco_rt_spawn2(NULL, deep_fn, (void*)(intptr_t)(300 * 1024), &o);
    CHECK(c != NULL);
    CHECK_EQ(aco_rt_join(c, in_ms(5000)), 0);
    memset(&o, 0, sizeof(o));
    o.standalone = 1;
    c = aco_rt_spawn2(NULL, deep_fn, (void*)(intptr_t)(30 * 1024), &o);
    CHECK(c != NULL);
    CHECK_EQ(aco_rt_join(c, in_ms(5000)), 0);
    /* private buffers: zeroed each time, also in a reused record */
    for (int i = 0; i < 6; i++) {
        memset(&o, 0, sizeof(o));
        o.private_size = (size_t)(i % 3) * 1000;
        c = aco_rt_spawn2(NULL, priv_fn, (void*)(intptr_t)o.private_size, &o);
        CHECK(c != NULL);
        CHECK_EQ(aco_rt_join(c, in_ms(5000)), 0);
    }
    /* save_size over 1 GiB: ENOMEM */
    memset(&o, 0, sizeof(o));
    o.save_size = ((size_t)1 << 30) + 1;
    errno = 0;
    CHECK(aco_rt_spawn2(NULL, quick_fn, NULL, &o) == NULL);
    CHECK_EQ(errno, ENOMEM);
    o.save_size = 4096;
    c = aco_rt_spawn2(NULL, deep_fn, (void*)(intptr_t)(20 * 1024), &o);
    CHECK(c != NULL);
    CHECK_EQ(aco_rt_join(c, in_ms(5000)), 0);
    errno = 0;
    CHECK(aco_rt_spawn2(NULL, NULL, NULL, NULL) == NULL);
    CHECK_EQ(errno, EINVAL);
    /* a named co shows in the dump, with its state */
    aco_rt_sem_init(&hold, 0);
    memset(&o, 0, sizeof(o));
    o.name = "bb-named-holder";
    aco_rt_co_t* h = aco_rt_spawn2(s, holder_fn, NULL, &o);
    CHECK(h != NULL);
    CHECK_EQ(aco_rt_sleep(1 * MS), 0);
    /* joins and detaches */
    CHECK_EQ(aco_rt_join(h, 0), -ETIMEDOUT);
    CHECK_EQ(aco_rt_join(h, in_ms(2)), -ETIMEDOUT);
    CHECK_EQ(aco_rt_join(aco_rt_self(), -1), -EINVAL);
    CHECK_EQ(aco_rt_join(NULL, -1), -EINVAL);
    CHECK_EQ(aco_rt_detach(h), 0);
    CHECK_EQ(aco_rt_detach(h), -EINVAL);
    CHECK_EQ(aco_rt_join(h, 0), -EINVAL);
    dump_check(s);
    aco_rt_sem_post(&hold);
    /* a finished co not yet joined: cancel does nothing, join says 0 */
    fin = aco_rt_spawn(NULL, quick_fn, NULL);
    CHECK(fin != NULL);
    CHECK_EQ(aco_rt_sleep(0), 0);
    CHECK_EQ(aco_rt_cancel(fin), 0);
    CHECK_EQ(aco_rt_cancel(fin), 0);
    CHECK_EQ(aco_rt_join(fin, 0), 0);
    /* a co that cancels itself */
    aco_rt_co_t* sc = aco_rt_spawn(NULL, self_cancel_fn, NULL);
    CHECK(sc != NULL);
    CHECK_EQ(aco_rt_join(sc, in_ms(5000)), 0);
    CHECK_EQ(self_cancel_rc[0], -ECANCELED);
    CHECK_EQ(self_cancel_rc[1], -ECANCELED);
    CHECK_EQ(self_cancel_rc[2], -ECANCELED);
    sc = aco_rt_spawn(NULL, cancelled_ready_fn, NULL);
    CHECK(sc != NULL);
    CHECK_EQ(aco_rt_join(sc, in_ms(5000)), 0);
    sc = aco_rt_spawn(NULL, cancelled_sync_fn, NULL);
    CHECK(sc != NULL);
    CHECK_EQ(aco_rt_join(sc, in_ms(5000)), 0);
}

/* ---- counters ---- */
static void counters(aco_rt_sched_t* s) {
    aco_rt_stats_t a, b;
    aco_rt_stats(s, &a);
    aco_rt_stats_t z;
    memset(&z, 0, sizeof(z));
    aco_rt_stats(NULL, &z);
    CHECK_EQ(z.spawned, a.spawned);
    for (int i = 0; i < 5; i++) CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, quick_fn, NULL)), 0);
    aco_rt_stats(s, &b);
    CHECK_EQ(b.spawned - a.spawned, 5);
    CHECK_EQ(b.cos_alive, a.cos_alive + 5);
    CHECK_EQ(b.cos_ready, a.cos_ready + 5);
    CHECK_EQ(aco_rt_sched_run(s), 0);
    aco_rt_stats(s, &b);
    CHECK_EQ(b.cos_alive, 0);
    CHECK_EQ(b.cos_ready, 0);
    CHECK_EQ(b.cos_parked, 0);
    CHECK_GE(b.switches - a.switches, 5);
    CHECK_LE(b.handoffs, b.switches);
}

static void body(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    outside(s);
    sched_refusals(s);
    deadlock(s);
    deadlock_other(s);
    counters(s);
    test_go(s, stats_live_co, NULL);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, cos_co, s)), 0);
    test_run(s);
}

/* ---- pools ---- */
static aco_rt_pool_t* pool;
static _Atomic int pc_cancelled, pc_late_ok, pc_started;
static void late_fn(void* arg) {
    (void)arg;
    /* spawned after the cancel: not cancelled */
    if (aco_rt_sleep(1 * MS) == 0 && aco_rt_cancel_check() == 0) atomic_fetch_add(&pc_late_ok, 1);
}
static void looper(void* arg) {
    int spawn_late = (int)(intptr_t)arg;
    atomic_fetch_add(&pc_started, 1);
    int r;
    while ((r = aco_rt_sleep(1 * MS)) == 0) {}
    CHECK_EQ(r, -ECANCELED);
    atomic_fetch_add(&pc_cancelled, 1);
    if (spawn_late) CHECK_EQ(aco_rt_detach(aco_rt_pool_spawn(pool, late_fn, NULL, NULL)), 0);
}
static void napper(void* arg) { CHECK_EQ(aco_rt_sleep((int64_t)(intptr_t)arg * MS), 0); }
static aco_rt_sem_t never;
static void parked_forever(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_sem_wait(&never, -1), 0);
    abort();        /* never woken: destroyed by pool_free */
}
static aco_rt_sem_t fewest_hold;
static aco_rt_sched_t* _Atomic fewest_where;
static void fewest_holder(void* arg) { (void)arg; CHECK_EQ(aco_rt_sem_wait(&fewest_hold, in_ms(10000)), 0); }
static void fewest_probe(void* arg) { (void)arg; atomic_store(&fewest_where, aco_rt_sched_current()); }
static void fewest(void) {
    /* thread 0 holds three cos, thread 1 none: a spawn from outside and a
     * group go to thread 1 */
    aco_rt_sem_init(&fewest_hold, 0);
    for (int k = 0; k < 2; k++) {
        int busy = k, idle = 1 - k;
        for (int i = 0; i < 3; i++)
            CHECK_EQ(aco_rt_detach(aco_rt_spawn(aco_rt_pool_sched(pool, (unsigned)busy),
                                                fewest_holder, NULL)), 0);
        usleep(2000);
        atomic_store(&fewest_where, NULL);
        CHECK_EQ(aco_rt_detach(aco_rt_pool_spawn(pool, fewest_probe, NULL, NULL)), 0);
        while (atomic_load(&fewest_where) == NULL) sched_yield();
        CHECK(atomic_load(&fewest_where) == aco_rt_pool_sched(pool, (unsigned)idle));
        aco_rt_group_t* g = aco_rt_pool_group_new(pool);
        CHECK(g != NULL);
        CHECK(aco_rt_group_sched(g) == aco_rt_pool_sched(pool, (unsigned)idle));
        CHECK_EQ(aco_rt_group_free(g), 0);
        for (int i = 0; i < 3; i++) aco_rt_sem_post(&fewest_hold);
        CHECK_EQ(aco_rt_pool_wait(pool, ACO_RT_POOL_DRAIN, in_ms(10000)), 0);
    }
}

static void pools(int b) {
    aco_rt_pool_opts_t o;
    memset(&o, 0, sizeof(o));
    o.threads = 2;
    o.sched.backend = b;
    pool = aco_rt_pool_new(&o);
    CHECK(pool != NULL);
    CHECK_EQ(aco_rt_pool_threads(pool), 2);
    CHECK(aco_rt_pool_sched(pool, 0) != NULL && aco_rt_pool_sched(pool, 1) != NULL);
    CHECK(aco_rt_pool_sched(pool, 0) != aco_rt_pool_sched(pool, 1));
    CHECK(aco_rt_pool_sched(pool, 2) == NULL);
    CHECK(aco_rt_pool_sched(NULL, 0) == NULL);
    CHECK_EQ(aco_rt_pool_threads(NULL), 0);
    errno = 0;
    CHECK(aco_rt_pool_group_new(NULL) == NULL);
    CHECK_EQ(errno, EINVAL);
    errno = 0;
    CHECK(aco_rt_pool_spawn(NULL, napper, NULL, NULL) == NULL);
    CHECK_EQ(errno, EINVAL);
    fewest();
    /* empty: a wait returns 0 even with a passed deadline */
    CHECK_EQ(aco_rt_pool_wait(pool, ACO_RT_POOL_DRAIN, 0), 0);
    CHECK_EQ(aco_rt_pool_wait(pool, ACO_RT_POOL_CANCEL, 0), 0);
    /* -ETIMEDOUT while they run, they go on */
    for (int i = 0; i < 4; i++)
        CHECK_EQ(aco_rt_detach(aco_rt_pool_spawn(pool, napper, (void*)(intptr_t)40, NULL)), 0);
    CHECK_EQ(aco_rt_pool_wait(pool, ACO_RT_POOL_DRAIN, 0), -ETIMEDOUT);
    int64_t dl = in_ms(5);
    CHECK_EQ(aco_rt_pool_wait(pool, ACO_RT_POOL_DRAIN, dl), -ETIMEDOUT);
    CHECK_GE(aco_rt_now(), dl);
    CHECK_EQ(aco_rt_pool_wait(pool, ACO_RT_POOL_DRAIN, -1), 0);
    /* CANCEL: each cancelled, those spawned later not */
    atomic_store(&pc_cancelled, 0);
    atomic_store(&pc_late_ok, 0);
    atomic_store(&pc_started, 0);
    for (int i = 0; i < 4; i++)
        CHECK_EQ(aco_rt_detach(aco_rt_pool_spawn(pool, looper, (void*)(intptr_t)(i < 2), NULL)), 0);
    while (atomic_load(&pc_started) < 4) sched_yield();
    CHECK_EQ(aco_rt_pool_wait(pool, ACO_RT_POOL_CANCEL, in_ms(10000)), 0);
    CHECK_EQ(atomic_load(&pc_cancelled), 4);
    /* two spawned by cancelled cos while the wait went on (whichever
     * thread runs them), two after it returned: none cancelled */
    CHECK_EQ(atomic_load(&pc_late_ok), 2);
    for (int i = 0; i < 2; i++)
        CHECK_EQ(aco_rt_detach(aco_rt_pool_spawn(pool, late_fn, NULL, NULL)), 0);
    CHECK_EQ(aco_rt_pool_wait(pool, ACO_RT_POOL_DRAIN, in_ms(10000)), 0);
    CHECK_EQ(atomic_load(&pc_late_ok), 4);
    /* a joinable co of the pool joined from a co of another thread's
     * scheduler: here, a plain join needs a co, so drain it instead */
    /* pool_free destroys parked cos (no leak, no abort) */
    aco_rt_sem_init(&never, 0);
    for (int i = 0; i < 3; i++)
        CHECK_EQ(aco_rt_detach(aco_rt_pool_spawn(pool, parked_forever, NULL, NULL)), 0);
    CHECK_EQ(aco_rt_pool_wait(pool, ACO_RT_POOL_DRAIN, in_ms(20)), -ETIMEDOUT);
    CHECK_EQ(aco_rt_pool_free(pool), 0);
    CHECK_EQ(aco_rt_pool_free(NULL), 0);
}

int main(void) {
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, bad_opts_thread, NULL), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
    aco_rt_opts_t base;
    memset(&base, 0, sizeof(base));
    base.stack_size = 64 * 1024;
    test_on_backends(&base, body, NULL);
    test_each_backend(pools);
    puts("test_sched_bb_misc: ok");
    return 0;
}
