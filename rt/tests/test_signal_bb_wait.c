/* test_signal_bb_wait.c - aco_rt_signal_wait from aco_rt.h alone, both
 * backends: -EPERM outside cos, -EINVAL (NULL set, a signal the thread
 * does not block; SIGKILL and SIGSTOP excepted), an empty set waiting for
 * its deadline (never early, the other cos running), a passed deadline's
 * one try taking a pending signal; the si_* fields of kill (SI_USER, pid,
 * uid), sigqueue (SI_QUEUE, value), pthread_kill (SI_TKILL, seen by that
 * thread's scheduler only), SIGCHLD (CLD_EXITED, pid, status), a POSIX
 * timer (SI_TIMER, value, overrun) and F_SETSIG (POLL_IN, si_fd, si_band);
 * several cos waiting for one queued signal (each signal ends one wait);
 * a cancel (-ECANCELED, the signal left pending); overlapping sets; one
 * signal with waiters on two schedulers taken once; a signal and a
 * cancel at once (taken, or left pending: never lost); no descriptor left by a
 * wait, nor by a co sched_free destroys in one; a pool thread's mask being
 * its maker's; helper threads (aco_rt_offload's) blocking every signal
 * though the thread that started them did not. */
#define _GNU_SOURCE
#include "rt_test.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

static int64_t in_ms(int ms) { return aco_rt_now() + ms * MS; }

#define SIG_Q (SIGRTMIN)
#define SIG_IO (SIGRTMIN + 1)
#define SIG_T (SIGRTMIN + 2)
#define SIG_TM (SIGRTMIN + 4)

static sigset_t one(int sig) {
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, sig);
    return s;
}
/* take every pending signal of ours (the next backend starts clean) */
static void drain(void) {
    sigset_t all;
    sigemptyset(&all);
    int sigs[] = {SIGUSR1, SIGCHLD, SIG_Q, SIG_IO, SIG_T, SIG_TM};
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) sigaddset(&all, sigs[i]);
    struct timespec z = {0, 0};
    while (sigtimedwait(&all, NULL, &z) > 0) {
    }
}
static int lowest_fd(void) {
    int fd = dup(0);
    CHECK_GE(fd, 0);
    close(fd);
    return fd;
}

static atomic_int ticks;
static volatile int ticking;
static void ticker(void* arg) {
    (void)arg;
    while (ticking) {
        atomic_fetch_add(&ticks, 1);
        CHECK_EQ(aco_rt_sleep(1 * MS), 0);
    }
}

/* ---- refusals, deadlines ---- */
static void refusals(void* arg) {
    (void)arg;
    sigset_t s = one(SIGUSR2);          /* not blocked */
    CHECK_EQ(aco_rt_signal_wait(NULL, NULL, 0), -EINVAL);
    CHECK_EQ(aco_rt_signal_wait(NULL, NULL, -1), -EINVAL);
    CHECK_EQ(aco_rt_signal_wait(&s, NULL, 0), -EINVAL);
    sigaddset(&s, SIGUSR1);
    CHECK_EQ(aco_rt_signal_wait(&s, NULL, -1), -EINVAL);
    /* SIGKILL and SIGSTOP are no refusal */
    s = one(SIGKILL);
    sigaddset(&s, SIGSTOP);
    sigaddset(&s, SIGUSR1);
    CHECK_EQ(aco_rt_signal_wait(&s, NULL, 0), -ETIMEDOUT);
    s = one(SIGKILL);
    CHECK_EQ(aco_rt_signal_wait(&s, NULL, -7), -ETIMEDOUT);
    /* an empty set: the deadline, never early, the others running */
    int fd0 = lowest_fd();
    sigemptyset(&s);
    ticking = 1;
    atomic_store(&ticks, 0);
    aco_rt_co_t* t = aco_rt_spawn(NULL, ticker, NULL);
    int64_t d = in_ms(30);
    CHECK_EQ(aco_rt_signal_wait(&s, NULL, d), -ETIMEDOUT);
    CHECK_GE(aco_rt_now(), d);
    CHECK_GE(atomic_load(&ticks), 1);     /* the others ran meanwhile */
    d = in_ms(15);
    s = one(SIGUSR1);
    CHECK_EQ(aco_rt_signal_wait(&s, NULL, d), -ETIMEDOUT);
    CHECK_GE(aco_rt_now(), d);
    ticking = 0;
    CHECK_EQ(aco_rt_join(t, in_ms(5000)), 0);
    /* a passed deadline with nothing pending: at once */
    int64_t t0 = aco_rt_now();
    CHECK_EQ(aco_rt_signal_wait(&s, NULL, 0), -ETIMEDOUT);
    CHECK_LT(aco_rt_now() - t0, 1000 * MS);     /* (loose: a loaded machine) */
    CHECK_EQ(lowest_fd(), fd0);
}

/* ---- kinds and their fields ---- */
static void kinds(void* arg) {
    (void)arg;
    siginfo_t si;
    sigset_t s = one(SIGUSR1);
    sigaddset(&s, SIG_Q);
    /* pending before the wait, one try with a passed deadline takes it */
    CHECK_EQ(kill(getpid(), SIGUSR1), 0);
    memset(&si, 0x55, sizeof(si));
    CHECK_EQ(aco_rt_signal_wait(&s, &si, 0), SIGUSR1);
    CHECK_EQ(si.si_signo, SIGUSR1);
    CHECK_EQ(si.si_code, SI_USER);
    CHECK_EQ(si.si_errno, 0);
    CHECK_EQ(si.si_pid, getpid());
    CHECK_EQ(si.si_uid, getuid());
    /* sigqueue: SI_QUEUE, the value; info NULL is fine */
    union sigval v;
    v.sival_int = 4242;
    CHECK_EQ(sigqueue(getpid(), SIG_Q, v), 0);
    memset(&si, 0, sizeof(si));
    CHECK_EQ(aco_rt_signal_wait(&s, &si, in_ms(2000)), SIG_Q);
    CHECK_EQ(si.si_code, SI_QUEUE);
    CHECK_EQ(si.si_pid, getpid());
    CHECK_EQ(si.si_uid, getuid());
    CHECK_EQ(si.si_value.sival_int, 4242);
    CHECK_EQ(sigqueue(getpid(), SIG_Q, v), 0);
    CHECK_EQ(aco_rt_signal_wait(&s, NULL, -1), SIG_Q);

    /* SIGCHLD of a child that exits 7 */
    s = one(SIGCHLD);
    fflush(NULL);
    pid_t pid = fork();
    CHECK_GE(pid, 0);
    if (pid == 0) _exit(7);
    memset(&si, 0, sizeof(si));
    CHECK_EQ(aco_rt_signal_wait(&s, &si, in_ms(5000)), SIGCHLD);
    CHECK_EQ(si.si_signo, SIGCHLD);
    CHECK_EQ(si.si_code, CLD_EXITED);
    CHECK_EQ(si.si_pid, pid);
    CHECK_EQ(si.si_uid, getuid());
    CHECK_EQ(si.si_status, 7);
    CHECK_GE(si.si_utime, 0);
    CHECK_GE(si.si_stime, 0);
    int st;
    CHECK_EQ(waitpid(pid, &st, 0), pid);

    /* a POSIX timer */
    struct sigevent ev;
    memset(&ev, 0, sizeof(ev));
    ev.sigev_notify = SIGEV_SIGNAL;
    ev.sigev_signo = SIG_TM;
    ev.sigev_value.sival_int = 77;
    timer_t tid;
    CHECK_EQ(timer_create(CLOCK_MONOTONIC, &ev, &tid), 0);
    struct itimerspec its;
    memset(&its, 0, sizeof(its));
    its.it_value.tv_nsec = 5 * MS;
    CHECK_EQ(timer_settime(tid, 0, &its, NULL), 0);
    s = one(SIG_TM);
    memset(&si, 0, sizeof(si));
    CHECK_EQ(aco_rt_signal_wait(&s, &si, in_ms(5000)), SIG_TM);
    CHECK_EQ(si.si_code, SI_TIMER);
    CHECK_EQ(si.si_value.sival_int, 77);
    CHECK_EQ(si.si_overrun, 0);
    CHECK_EQ(timer_delete(tid), 0);

    /* F_SETSIG: POLL_IN with the descriptor and its band */
    int p[2];
    CHECK_EQ(pipe(p), 0);
    CHECK_EQ(fcntl(p[0], F_SETOWN, getpid()), 0);
    CHECK_EQ(fcntl(p[0], F_SETSIG, SIG_IO), 0);
    CHECK_EQ(fcntl(p[0], F_SETFL, fcntl(p[0], F_GETFL) | O_ASYNC | O_NONBLOCK), 0);
    s = one(SIG_IO);
    CHECK_EQ(write(p[1], "x", 1), 1);
    memset(&si, 0, sizeof(si));
    CHECK_EQ(aco_rt_signal_wait(&s, &si, in_ms(5000)), SIG_IO);
    CHECK_EQ(si.si_code, POLL_IN);
    CHECK_EQ(si.si_fd, p[0]);
    CHECK(si.si_band & POLLIN);
    close(p[0]);
    close(p[1]);
}

/* ---- a thread's own signal ---- */
static atomic_int other_rc;
static atomic_int other_code;
static atomic_int other_ready;
static void other_co(void* arg) {
    (void)arg;
    sigset_t s = one(SIG_T);
    siginfo_t si;
    memset(&si, 0, sizeof(si));
    atomic_store(&other_ready, 1);
    int r = aco_rt_signal_wait(&s, &si, in_ms(5000));
    atomic_store(&other_code, si.si_code);
    atomic_store(&other_rc, r);
}
static void* other_thread(void* arg) {
    int b = *(int*)arg;
    aco_rt_sched_t* s = test_sched_on(b, NULL);
    test_go(s, other_co, NULL);
    aco_rt_sched_free(s);
    return NULL;
}
static void thread_directed(void* arg) {
    (void)arg;
    atomic_store(&other_ready, 0);
    atomic_store(&other_rc, 1);
    pthread_t t;
    int b = test_backend_id;
    CHECK_EQ(pthread_create(&t, NULL, other_thread, &b), 0);
    while (!atomic_load(&other_ready)) CHECK_EQ(aco_rt_sleep(1 * MS), 0);
    CHECK_EQ(pthread_kill(t, SIG_T), 0);
    sigset_t s = one(SIG_T);
    int64_t d = in_ms(40);
    CHECK_EQ(aco_rt_signal_wait(&s, NULL, d), -ETIMEDOUT);
    CHECK_GE(aco_rt_now(), d);
    while (atomic_load(&other_rc) == 1) CHECK_EQ(aco_rt_sleep(1 * MS), 0);
    CHECK_EQ(atomic_load(&other_rc), SIG_T);
    CHECK_EQ(atomic_load(&other_code), SI_TKILL);
    CHECK_EQ(pthread_join(t, NULL), 0);
    /* to this thread: seen here */
    CHECK_EQ(pthread_kill(pthread_self(), SIG_T), 0);
    siginfo_t si;
    CHECK_EQ(aco_rt_signal_wait(&s, &si, in_ms(2000)), SIG_T);
    CHECK_EQ(si.si_code, SI_TKILL);
    CHECK_EQ(si.si_pid, getpid());
}

/* ---- several waiters, cancel ---- */
static int got[3], got_val[3];
static void qwaiter(void* arg) {
    int i = (int)(intptr_t)arg;
    sigset_t s = one(SIG_Q);
    siginfo_t si;
    memset(&si, 0, sizeof(si));
    got[i] = aco_rt_signal_wait(&s, &si, in_ms(300));
    got_val[i] = si.si_value.sival_int;
}
static int cancel_rc;
static void cwaiter(void* arg) {
    (void)arg;
    sigset_t s = one(SIGUSR1);
    cancel_rc = aco_rt_signal_wait(&s, NULL, -1);
}
static void several(void* arg) {
    (void)arg;
    int fd0 = lowest_fd();
    aco_rt_co_t* c[3];
    for (int i = 0; i < 3; i++) {
        got[i] = 1;
        got_val[i] = 0;
        c[i] = aco_rt_spawn(NULL, qwaiter, (void*)(intptr_t)i);
    }
    CHECK_EQ(aco_rt_sleep(5 * MS), 0);
    union sigval v;
    v.sival_int = 1;
    CHECK_EQ(sigqueue(getpid(), SIG_Q, v), 0);
    v.sival_int = 2;
    CHECK_EQ(sigqueue(getpid(), SIG_Q, v), 0);
    for (int i = 0; i < 3; i++) CHECK_EQ(aco_rt_join(c[i], in_ms(5000)), 0);
    int n_sig = 0, n_to = 0, sum = 0;
    for (int i = 0; i < 3; i++) {
        if (got[i] == SIG_Q) {
            n_sig++;
            sum += got_val[i];
        } else {
            CHECK_EQ(got[i], -ETIMEDOUT);
            n_to++;
        }
    }
    CHECK_EQ(n_sig, 2);
    CHECK_EQ(n_to, 1);
    CHECK_EQ(sum, 3);
    sigset_t pend;
    CHECK_EQ(sigpending(&pend), 0);
    CHECK(!sigismember(&pend, SIG_Q));

    /* a cancel: -ECANCELED, and a signal after it stays pending */
    cancel_rc = 1;
    aco_rt_co_t* w = aco_rt_spawn(NULL, cwaiter, NULL);
    CHECK_EQ(aco_rt_sleep(3 * MS), 0);
    CHECK_EQ(aco_rt_cancel(w), 0);
    CHECK_EQ(aco_rt_join(w, in_ms(5000)), 0);
    CHECK_EQ(cancel_rc, -ECANCELED);
    CHECK_EQ(kill(getpid(), SIGUSR1), 0);
    CHECK_EQ(sigpending(&pend), 0);
    CHECK(sigismember(&pend, SIGUSR1));
    sigset_t s = one(SIGUSR1);
    CHECK_EQ(aco_rt_signal_wait(&s, NULL, 0), SIGUSR1);
    CHECK_EQ(lowest_fd(), fd0);
}

/* ---- overlapping sets; a process signal with waiters on two threads ---- */
static int ov_rc[2];
static void ov_waiter(void* arg) {
    int i = (int)(intptr_t)arg;
    sigset_t s = one(SIGUSR1);
    if (i == 1) sigaddset(&s, SIG_Q);
    ov_rc[i] = aco_rt_signal_wait(&s, NULL, in_ms(i == 0 ? 60 : 5000));
}
static atomic_int two_got, two_to, two_ready;
static void two_waiter(void* arg) {
    (void)arg;
    sigset_t s = one(SIG_Q);
    atomic_fetch_add(&two_ready, 1);
    int r = aco_rt_signal_wait(&s, NULL, in_ms(300));
    if (r == SIG_Q) atomic_fetch_add(&two_got, 1);
    else if (r == -ETIMEDOUT) atomic_fetch_add(&two_to, 1);
    else CHECK(0);
}
static void* two_thread(void* arg) {
    int b = *(int*)arg;
    aco_rt_sched_t* s = test_sched_on(b, NULL);
    test_go(s, two_waiter, NULL);
    aco_rt_sched_free(s);
    return NULL;
}
static void overlap(void* arg) {
    (void)arg;
    ov_rc[0] = ov_rc[1] = 1;
    aco_rt_co_t* a = aco_rt_spawn(NULL, ov_waiter, (void*)(intptr_t)0);
    aco_rt_co_t* b = aco_rt_spawn(NULL, ov_waiter, (void*)(intptr_t)1);
    CHECK_EQ(aco_rt_sleep(3 * MS), 0);
    union sigval v;
    v.sival_int = 9;
    CHECK_EQ(sigqueue(getpid(), SIG_Q, v), 0);
    CHECK_EQ(aco_rt_join(b, in_ms(5000)), 0);
    CHECK_EQ(ov_rc[1], SIG_Q);
    CHECK_EQ(aco_rt_join(a, in_ms(5000)), 0);
    CHECK_EQ(ov_rc[0], -ETIMEDOUT);
    /* one process-directed signal, a waiter here and one on another
     * thread's scheduler: exactly one takes it */
    atomic_store(&two_got, 0);
    atomic_store(&two_to, 0);
    atomic_store(&two_ready, 0);
    pthread_t t;
    int be = test_backend_id;
    CHECK_EQ(pthread_create(&t, NULL, two_thread, &be), 0);
    aco_rt_co_t* w = aco_rt_spawn(NULL, two_waiter, NULL);
    while (atomic_load(&two_ready) < 2) CHECK_EQ(aco_rt_sleep(1 * MS), 0);
    CHECK_EQ(aco_rt_sleep(5 * MS), 0);
    CHECK_EQ(sigqueue(getpid(), SIG_Q, v), 0);
    CHECK_EQ(aco_rt_join(w, in_ms(5000)), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
    CHECK_EQ(atomic_load(&two_got), 1);
    CHECK_EQ(atomic_load(&two_to), 1);
}

/* ---- a signal and a cancel at once: the signal taken, or left pending */
static int race_rc;
static void race_waiter(void* arg) {
    (void)arg;
    sigset_t s = one(SIG_Q);
    siginfo_t si;
    memset(&si, 0, sizeof(si));
    race_rc = aco_rt_signal_wait(&s, &si, -1);
    if (race_rc == SIG_Q) CHECK_EQ(si.si_value.sival_int, 31);
}
static void race(void* arg) {
    (void)arg;
    int taken = 0, kept = 0;
    for (int round = 0; round < 40; round++) {
        race_rc = 1;
        aco_rt_co_t* w = aco_rt_spawn(NULL, race_waiter, NULL);
        CHECK_EQ(aco_rt_sleep(round % 2 ? 1 * MS : 0), 0);
        union sigval v;
        v.sival_int = 31;
        CHECK_EQ(sigqueue(getpid(), SIG_Q, v), 0);
        if (round % 4 >= 2) CHECK_EQ(aco_rt_yield(), 0);
        CHECK_EQ(aco_rt_cancel(w), 0);
        CHECK_EQ(aco_rt_join(w, in_ms(5000)), 0);
        sigset_t pend;
        CHECK_EQ(sigpending(&pend), 0);
        if (race_rc == SIG_Q) {
            CHECK(!sigismember(&pend, SIG_Q));
            taken++;
        } else {
            CHECK_EQ(race_rc, -ECANCELED);
            CHECK(sigismember(&pend, SIG_Q));
            siginfo_t si;
            sigset_t s = one(SIG_Q);
            CHECK_EQ(aco_rt_signal_wait(&s, &si, 0), SIG_Q);
            CHECK_EQ(si.si_value.sival_int, 31);
            kept++;
        }
    }
    CHECK_EQ(taken + kept, 40);
}

/* ---- sched_free of a co in a wait closes its descriptor ---- */
static aco_rt_sched_t* fs;
static void stuck_waiter(void* arg) {
    (void)arg;
    sigset_t s = one(SIGUSR1);
    aco_rt_signal_wait(&s, NULL, -1);
    CHECK(0);
}
static void stopper(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_sleep(3 * MS), 0);
    aco_rt_sched_stop(fs);
}
static void* free_thread(void* arg) {
    int b = *(int*)arg;
    fs = test_sched_on(b, NULL);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(fs, stuck_waiter, NULL)), 0);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(fs, stopper, NULL)), 0);
    CHECK_EQ(aco_rt_sched_run(fs), 0);
    aco_rt_sched_free(fs);
    return NULL;
}

static void body(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    sigset_t set = one(SIGUSR1);
    CHECK_EQ(aco_rt_signal_wait(&set, NULL, 0), -EPERM);
    CHECK_EQ(aco_rt_signal_wait(NULL, NULL, 0), -EPERM);
    test_go(s, refusals, NULL);
    test_go(s, kinds, NULL);
    test_go(s, thread_directed, NULL);
    test_go(s, several, NULL);
    test_go(s, overlap, NULL);
    test_go(s, race, NULL);
    int fd0 = lowest_fd();
    pthread_t t;
    int b = test_backend_id;
    CHECK_EQ(pthread_create(&t, NULL, free_thread, &b), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
    CHECK_EQ(lowest_fd(), fd0);
    drain();
}

/* ---- a pool thread's mask is its maker's ---- */
static atomic_int pool_ok;
static void pool_co(void* arg) {
    (void)arg;
    sigset_t s = one(SIGUSR2);      /* blocked when the pool was made */
    CHECK_EQ(aco_rt_signal_wait(&s, NULL, 0), -ETIMEDOUT);
    s = one(SIGHUP);                /* blocked nowhere */
    CHECK_EQ(aco_rt_signal_wait(&s, NULL, 0), -EINVAL);
    atomic_fetch_add(&pool_ok, 1);
}
static void pools(int b) {
    sigset_t u2 = one(SIGUSR2), old;
    CHECK_EQ(pthread_sigmask(SIG_BLOCK, &u2, &old), 0);
    aco_rt_pool_opts_t o;
    memset(&o, 0, sizeof(o));
    o.threads = 2;
    o.sched.backend = b;
    aco_rt_pool_t* p = aco_rt_pool_new(&o);
    CHECK(p != NULL);
    CHECK_EQ(pthread_sigmask(SIG_SETMASK, &old, NULL), 0);
    atomic_store(&pool_ok, 0);
    for (int i = 0; i < 4; i++) CHECK_EQ(aco_rt_detach(aco_rt_pool_spawn(p, pool_co, NULL, NULL)), 0);
    CHECK_EQ(aco_rt_pool_wait(p, ACO_RT_POOL_DRAIN, in_ms(5000)), 0);
    CHECK_EQ(atomic_load(&pool_ok), 4);
    CHECK_EQ(aco_rt_pool_free(p), 0);
}

/* ---- the runtime's helper threads block every signal themselves ----
 * Last: a thread that leaves SIGUSR2 open starts the helper threads
 * (aco_rt_offload), then blocks it, as the main thread does by then: a
 * process SIGUSR2 must wait for the co; a helper that left it open would
 * take it, and its default action would end the test. */
static void* slow_fn(void* a) {
    usleep(20000);
    return a;
}
static int hm_rc;
static void hm_co(void* arg) {
    (void)arg;
    void* r = NULL;
    CHECK_EQ(aco_rt_offload(slow_fn, &hm_rc, NULL, &r, in_ms(5000)), 0);
    CHECK(r == &hm_rc);
    sigset_t u2 = one(SIGUSR2);
    CHECK_EQ(pthread_sigmask(SIG_BLOCK, &u2, NULL), 0);
    CHECK_EQ(kill(getpid(), SIGUSR2), 0);
    siginfo_t si;
    hm_rc = aco_rt_signal_wait(&u2, &si, in_ms(5000));
}
static void* hm_thread(void* arg) {
    int b = *(int*)arg;
    sigset_t u2 = one(SIGUSR2);
    CHECK_EQ(pthread_sigmask(SIG_UNBLOCK, &u2, NULL), 0);
    aco_rt_sched_t* s = test_sched_on(b, NULL);
    test_go(s, hm_co, NULL);
    aco_rt_sched_free(s);
    return NULL;
}
static void helper_mask(int b) {
    hm_rc = 1;
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, hm_thread, &b), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
    CHECK_EQ(hm_rc, SIGUSR2);
}

int main(void) {
    /* block ours in main before any thread (SIGUSR2 and SIGHUP stay open) */
    sigset_t m;
    sigemptyset(&m);
    sigaddset(&m, SIGUSR1);
    sigaddset(&m, SIGCHLD);
    sigaddset(&m, SIG_Q);
    sigaddset(&m, SIG_IO);
    sigaddset(&m, SIG_T);
    sigaddset(&m, SIG_TM);
    CHECK_EQ(pthread_sigmask(SIG_BLOCK, &m, NULL), 0);
    test_on_backends(NULL, body, NULL);
    test_each_backend(pools);
    sigset_t u2 = one(SIGUSR2);
    CHECK_EQ(pthread_sigmask(SIG_BLOCK, &u2, NULL), 0);
    signal(SIGUSR2, SIG_DFL);
    test_each_backend(helper_mask);
    puts("test_signal_bb_wait: ok");
    return 0;
}
