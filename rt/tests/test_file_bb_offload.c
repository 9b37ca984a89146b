/* test_file_bb_offload.c - blocking work, signals and timers, black box:
 *  - aco_rt_offload: -EPERM, -EINVAL (fn NULL, arg on the share stack; a
 *    standalone co's stack is fine), drop exactly once in each of its
 *    three places (a passed deadline or a cancel: in the calling co before
 *    the return; fn running: on the helper after it; queued: on a helper,
 *    fn never run), a full queue (-EAGAIN, and the file calls' -EAGAIN),
 *    aco_rt_offload_limits' bounds;
 *  - aco_rt_signal_wait: -EPERM, -EINVAL (NULL, a signal not blocked),
 *    SIGKILL in the set, an empty set, a pending signal at once, si_value,
 *    each signal ending one wait of several, a cancel, no descriptor left;
 *  - timers: -EPERM, -EINVAL (NULL, armed, on a share stack), stop's
 *    1 / 0, never early. */
#include "bb_file.h"

#include <pthread.h>
#include <stdatomic.h>

/* ---------------- offload ---------------- */

static atomic_int ran, dropped, drop_null, drop_same_thread;
static pthread_t co_thread;
static int gate[2];             /* fn blocks reading gate[0] until a byte comes */

static void* fn_plain(void* a) {
    atomic_fetch_add(&ran, 1);
    return a;
}
static void* fn_gated(void* a) {
    atomic_fetch_add(&ran, 1);
    char c;
    CHECK_EQ(read(gate[0], &c, 1), 1);
    return a;
}
static void drop_fn(void* a, void* r) {
    (void)a;
    atomic_fetch_add(&dropped, 1);
    if (r == NULL) atomic_fetch_add(&drop_null, 1);
    if (pthread_equal(pthread_self(), co_thread)) atomic_fetch_add(&drop_same_thread, 1);
}
static void reset_counts(void) {
    ran = dropped = drop_null = drop_same_thread = 0;
}
/* wait (5 ms sleeps, at most 5 s) until *v == want */
static int settle(atomic_int* v, int want) {
    int64_t end = aco_rt_now() + 5000 * MS;
    while (atomic_load(v) != want && aco_rt_now() < end) aco_rt_sleep(5 * MS);
    return atomic_load(v);
}

static void offload_stack_co(void* arg) {
    (void)arg;
    int on_stack = 1;
    void* r;
    if (!bb_on_share(&on_stack)) return;        /* (ASan's fake stack) */
    CHECK_EQ(aco_rt_offload(fn_plain, &on_stack, NULL, &r, -1), -EINVAL);
    CHECK_EQ(ran, 0);
}
static void offload_standalone_co(void* arg) {
    (void)arg;
    int on_stack = 1;
    void* r = NULL;
    CHECK_EQ(aco_rt_offload(fn_plain, &on_stack, NULL, &r, -1), 0);
    CHECK(r == &on_stack);
}

static int heap_arg;
static int q_result;
static void queued_co(void* arg) {
    (void)arg;
    q_result = aco_rt_offload(fn_plain, &heap_arg, drop_fn, NULL, -1);
}
static void blocker_co(void* arg) {
    (void)arg;
    void* r;
    CHECK_EQ(aco_rt_offload(fn_gated, &heap_arg, drop_fn, &r, -1), 0);
    CHECK(r == &heap_arg);
}

static void offload_co(void* arg) {
    (void)arg;
    co_thread = pthread_self();
    void* r = (void*)1;
    reset_counts();
    CHECK_EQ(aco_rt_offload(NULL, &heap_arg, drop_fn, &r, -1), -EINVAL);
    CHECK_EQ(aco_rt_offload(fn_plain, &heap_arg, NULL, NULL, -1), 0);
    CHECK_EQ(aco_rt_offload(fn_plain, &heap_arg, drop_fn, &r, -1), 0);
    CHECK(r == &heap_arg);
    CHECK_EQ(ran, 2);
    CHECK_EQ(dropped, 0);
    /* a passed deadline: fn never runs, drop(arg, NULL) here, before the return */
    reset_counts();
    CHECK_EQ(aco_rt_offload(fn_plain, &heap_arg, drop_fn, &r, 0), -ETIMEDOUT);
    CHECK_EQ(dropped, 1);
    CHECK_EQ(drop_null, 1);
    CHECK_EQ(drop_same_thread, 1);
    CHECK_EQ(aco_rt_offload(fn_plain, &heap_arg, drop_fn, &r, -7), -ETIMEDOUT);
    CHECK_EQ(dropped, 2);
    CHECK_EQ(ran, 0);
    /* the arg on the share stack */
    aco_rt_co_t* c = aco_rt_spawn(NULL, offload_stack_co, NULL);
    CHECK_EQ(aco_rt_join(c, -1), 0);
    aco_rt_spawn_opts_t so = {0};
    so.standalone = 1;
    c = aco_rt_spawn2(NULL, offload_standalone_co, NULL, &so);
    CHECK_EQ(aco_rt_join(c, -1), 0);

    /* fn running at the deadline: it runs on; drop(arg, result) once, on the helper */
    CHECK_EQ(pipe2(gate, O_CLOEXEC), 0);
    reset_counts();
    int64_t t0 = aco_rt_now();
    CHECK_EQ(aco_rt_offload(fn_gated, &heap_arg, drop_fn, &r, t0 + 200 * MS), -ETIMEDOUT);
    CHECK_GE(aco_rt_now() - t0, 200 * MS);
    CHECK_EQ(dropped, 0);
    CHECK_EQ(write(gate[1], "g", 1), 1);
    CHECK_EQ(settle(&dropped, 1), 1);
    CHECK_EQ(drop_null, 0);
    CHECK_EQ(drop_same_thread, 0);
    CHECK_EQ(ran, 1);

    /* one helper, a queue of one: a blocker, one queued (then cancelled),
     * a third call finds the queue full */
    CHECK_EQ(aco_rt_offload_limits(1, 1), 0);
    reset_counts();
    aco_rt_co_t* blk = aco_rt_spawn(NULL, blocker_co, NULL);
    CHECK_EQ(settle(&ran, 1), 1);      /* the helper has it */
    q_result = 1;
    aco_rt_co_t* q = aco_rt_spawn(NULL, queued_co, NULL);
    for (int i = 0; i < 3; i++) aco_rt_yield();
    CHECK_EQ(q_result, 1);
    CHECK_EQ(aco_rt_offload(fn_plain, &heap_arg, drop_fn, &r, aco_rt_in_ms(2000)), -EAGAIN);
    /* the file calls that need a helper say so too */
    if (strcmp(aco_rt_file_way("statx"), "helper") == 0) {
        struct statx sx;
        CHECK_EQ(aco_rt_statx(AT_FDCWD, "/", 0, STATX_SIZE, &sx, aco_rt_in_ms(2000)), -EAGAIN);
        CHECK_EQ(aco_rt_mkdirat(AT_FDCWD, bb_dir, 0700, aco_rt_in_ms(2000)), -EAGAIN);
    }
    CHECK_EQ(dropped, 0);
    CHECK_EQ(aco_rt_cancel(q), 0);
    CHECK_EQ(aco_rt_join(q, aco_rt_in_ms(5000)), 0);
    CHECK_EQ(q_result, -ECANCELED);
    CHECK_EQ(dropped, 0);              /* still queued behind the blocker */
    CHECK_EQ(write(gate[1], "g", 1), 1);
    CHECK_EQ(aco_rt_join(blk, aco_rt_in_ms(5000)), 0);
    CHECK_EQ(settle(&dropped, 1), 1);  /* the queued one: drop(arg, NULL) */
    CHECK_EQ(drop_null, 1);
    CHECK_EQ(ran, 1);                  /* its fn never ran */
    CHECK_EQ(aco_rt_offload_limits(0, 0), 0);
    close(gate[0]);
    close(gate[1]);

    /* a cancelled co: -ECANCELED, drop here before the return */
    reset_counts();
    CHECK_EQ(aco_rt_cancel(aco_rt_self()), 0);
    CHECK_EQ(aco_rt_offload(fn_plain, &heap_arg, drop_fn, &r, -1), -ECANCELED);
    CHECK_EQ(dropped, 1);
    CHECK_EQ(drop_same_thread, 1);
    CHECK_EQ(ran, 0);
}

/* ---------------- signals ---------------- */

static int sig_results[4];
static void sig_waiter(void* arg) {
    int i = (int)(intptr_t)arg;
    static sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGRTMIN);
    siginfo_t info;
    sig_results[i] = aco_rt_signal_wait(&set, &info, aco_rt_in_ms(5000));
}

static void signal_co(void* arg) {
    (void)arg;
    int fds = test_open_fds();
    static sigset_t set;
    siginfo_t info;
    CHECK_EQ(aco_rt_signal_wait(NULL, &info, 0), -EINVAL);
    sigemptyset(&set);
    sigaddset(&set, SIGUSR2); /* not blocked */
    CHECK_EQ(aco_rt_signal_wait(&set, &info, 0), -EINVAL);
    sigaddset(&set, SIGUSR1);
    CHECK_EQ(aco_rt_signal_wait(&set, &info, 0), -EINVAL);
    /* SIGKILL and SIGSTOP need no block */
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGKILL);
    sigaddset(&set, SIGSTOP);
    int64_t t0 = aco_rt_now();
    CHECK_EQ(aco_rt_signal_wait(&set, &info, t0 + 100 * MS), -ETIMEDOUT);
    CHECK_GE(aco_rt_now() - t0, 100 * MS);
    /* an empty set waits for the deadline */
    sigemptyset(&set);
    t0 = aco_rt_now();
    CHECK_EQ(aco_rt_signal_wait(&set, &info, t0 + 100 * MS), -ETIMEDOUT);
    CHECK_GE(aco_rt_now() - t0, 100 * MS);
    /* pending: at once, even with a deadline passed; si_value */
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGRTMIN);
    CHECK_EQ(raise(SIGUSR1), 0);
    memset(&info, 0, sizeof(info));
    CHECK_EQ(aco_rt_signal_wait(&set, &info, -1), SIGUSR1);
    CHECK_EQ(info.si_signo, SIGUSR1);
    CHECK_EQ(info.si_pid, getpid());
    union sigval sv = {.sival_int = 4242};
    CHECK_EQ(sigqueue(getpid(), SIGRTMIN, sv), 0);
    CHECK_EQ(aco_rt_signal_wait(&set, &info, 0), SIGRTMIN);
    CHECK_EQ(info.si_code, SI_QUEUE);
    CHECK_EQ(info.si_value.sival_int, 4242);
    CHECK_EQ(aco_rt_signal_wait(&set, NULL, 0), -ETIMEDOUT);
    /* three waiters, three signals: each ends one wait */
    aco_rt_co_t* w[3];
    for (int i = 0; i < 3; i++) {
        sig_results[i] = 0;
        w[i] = aco_rt_spawn(NULL, sig_waiter, (void*)(intptr_t)i);
    }
    aco_rt_sleep(20 * MS);
    for (int i = 0; i < 3; i++) CHECK_EQ(sigqueue(getpid(), SIGRTMIN, sv), 0);
    for (int i = 0; i < 3; i++) CHECK_EQ(aco_rt_join(w[i], -1), 0);
    for (int i = 0; i < 3; i++) CHECK_EQ(sig_results[i], SIGRTMIN);
    /* a cancel ends a wait */
    sig_results[3] = 0;
    aco_rt_co_t* c = aco_rt_spawn(NULL, sig_waiter, (void*)(intptr_t)3);
    aco_rt_sleep(20 * MS);
    CHECK_EQ(aco_rt_cancel(c), 0);
    CHECK_EQ(aco_rt_join(c, -1), 0);
    CHECK_EQ(sig_results[3], -ECANCELED);
    /* the signalfds were closed */
    CHECK_EQ(test_open_fds(), fds);
}

/* ---------------- timers ---------------- */

static aco_rt_timer_t tm;
static int64_t fired_at;
static void on_timer(aco_rt_timer_t* t) {
    CHECK(t == &tm);
    fired_at = aco_rt_now();
}
static void timer_co(void* arg) {
    (void)arg;
    aco_rt_timer_t on_stack = {0};
    if (bb_on_share(&on_stack))         /* (not on ASan's fake stack) */
        CHECK_EQ(aco_rt_timer_start(&on_stack, aco_rt_in_ms(10), on_timer), -EINVAL);
    CHECK_EQ(aco_rt_timer_start(NULL, aco_rt_in_ms(10), on_timer), -EINVAL);
    CHECK_EQ(aco_rt_timer_start(&tm, aco_rt_in_ms(10), NULL), -EINVAL);
    fired_at = 0;
    int64_t dl = aco_rt_in_ms(50);
    CHECK_EQ(aco_rt_timer_start(&tm, dl, on_timer), 0);
    CHECK_EQ(aco_rt_timer_start(&tm, dl, on_timer), -EINVAL);
    CHECK_EQ(aco_rt_timer_stop(&tm), 1);
    CHECK_EQ(aco_rt_timer_stop(&tm), 0);
    CHECK_EQ(aco_rt_timer_start(&tm, dl, on_timer), 0);
    aco_rt_sleep_until(dl + 20 * MS);
    CHECK_GE(fired_at, dl);
    CHECK_EQ(aco_rt_timer_stop(&tm), 0);
    /* a deadline passed: fires soon, after the call */
    fired_at = 0;
    int64_t t0 = aco_rt_now();
    CHECK_EQ(aco_rt_timer_start(&tm, 0, on_timer), 0);
    CHECK_EQ(fired_at, 0);
    aco_rt_sleep(5 * MS);
    CHECK_GE(fired_at, t0);
}

static void offload_backend(void) {
    bb_run(NULL, offload_co, NULL);
    bb_run(NULL, signal_co, NULL);
    bb_run(NULL, timer_co, NULL);
}

int main(void) {
    test_watchdog();
    bb_mkdir();
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGRTMIN);
    CHECK_EQ(pthread_sigmask(SIG_BLOCK, &set, NULL), 0);
    /* outside a co */
    void* r;
    CHECK_EQ(aco_rt_offload(fn_plain, &heap_arg, NULL, &r, -1), -EPERM);
    CHECK_EQ(aco_rt_signal_wait(&set, NULL, 0), -EPERM);
    CHECK_EQ(aco_rt_timer_start(&tm, 0, on_timer), -EPERM);
    CHECK_EQ(aco_rt_offload_limits(1025, 0), -EINVAL);
    CHECK_EQ(aco_rt_offload_limits(0, (1u << 20) + 1), -EINVAL);
    CHECK_EQ(aco_rt_offload_limits(1024, 1u << 20), 0);
    CHECK_EQ(aco_rt_offload_limits(0, 0), 0);
    bb_apart(offload_backend);
    printf("test_file_bb_offload: ok\n");
    return 0;
}
