/* test_header.c - aco_rt.h taken at its word: each check is one sentence of
 * the header (quoted or named above it), written from the header's text
 * alone, as a program that only read it would rely on it.  Sections follow
 * the header: scheduler, cos, a co's end and keys, timers, I/O, sync,
 * channels, pools, groups, seeing inside.  Both backends; pools of two
 * threads where the header speaks of threads.
 */
#define _GNU_SOURCE
#include "rt_test.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <time.h>

static int checks;      /* promises checked (each body counts its own) */
#define PROMISE() (checks++)

static aco_rt_sched_t* S;       /* the scheduler of the body being run */

/* Run fn(arg) as a detached co of S and run S to its end. */
static void in_co(aco_rt_fn_t fn, void* arg) { test_go(S, fn, arg); }

static int64_t since(int64_t t0) { return aco_rt_now() - t0; }

/* ======================================================================== */
/* Scheduler                                                                */
/* ======================================================================== */

/* "NULL with errno set on failure: ... EBUSY (the thread has one)". */
static void sched_ebusy(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    PROMISE();
    CHECK(aco_rt_sched_current() == s);
    errno = 0;
    aco_rt_opts_t o = {0};
    o.backend = test_backend_id;
    CHECK(aco_rt_sched_new(&o) == NULL);
    CHECK_EQ(errno, EBUSY);
    CHECK(aco_rt_sched_current() == s);
}

/* EINVAL (bad opts, or an unknown $ACO_RT_BACKEND); ENOMEM (a stack_size
 * the address space cannot take); sched_current NULL before and after. */
static void sched_new_errors(void) {
    PROMISE();
    CHECK(aco_rt_sched_current() == NULL);
    aco_rt_opts_t o = {0};
    o.backend = 77;
    errno = 0;
    CHECK(aco_rt_sched_new(&o) == NULL);
    CHECK_EQ(errno, EINVAL);
    CHECK(aco_rt_sched_current() == NULL);

    PROMISE();
    const char* old = getenv("ACO_RT_BACKEND");
    char* keep = old ? strdup(old) : NULL;
    setenv("ACO_RT_BACKEND", "carrier-pigeon", 1);
    errno = 0;
    CHECK(aco_rt_sched_new(NULL) == NULL);
    CHECK_EQ(errno, EINVAL);
    if (keep) { setenv("ACO_RT_BACKEND", keep, 1); free(keep); }
    else unsetenv("ACO_RT_BACKEND");
    CHECK(aco_rt_sched_current() == NULL);

    PROMISE();
    o.backend = ACO_RT_BACKEND_EPOLL;
    o.stack_size = sizeof(size_t) == 8 ? (size_t)1 << (sizeof(size_t) * 8 - 4) : (size_t)-1 - 65535;
    errno = 0;
    CHECK(aco_rt_sched_new(&o) == NULL);
    CHECK_EQ(errno, ENOMEM);
    CHECK(aco_rt_sched_current() == NULL);

    /* and the thread can still make one after all these */
    PROMISE();
    aco_rt_sched_t* s = aco_rt_sched_new(NULL);
    CHECK(s != NULL);
    const char* n = aco_rt_backend_name(s);
    CHECK(strcmp(n, "uring") == 0 || strcmp(n, "epoll") == 0);
    CHECK_EQ(aco_rt_sched_run(s), 0);       /* no co: returns */
    aco_rt_sched_free(s);
    CHECK(aco_rt_sched_current() == NULL);
}

/* run: "-EPERM (another thread's scheduler, from a co, or already
 * running)". */
static void run_from_co(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_sched_run(S), -EPERM);
}
static void* run_from_thread(void* arg) {
    return (void*)(intptr_t)aco_rt_sched_run((aco_rt_sched_t*)arg);
}
static void sched_run_eperm(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    PROMISE();
    in_co(run_from_co, NULL);
    PROMISE();
    pthread_t th;
    void* r;
    CHECK_EQ(pthread_create(&th, NULL, run_from_thread, s), 0);
    CHECK_EQ(pthread_join(th, &r), 0);
    CHECK_EQ((intptr_t)r, -EPERM);
}

/* -EDEADLK when every co waits on another co without a deadline and
 * nothing else can wake one; "The cos are then left as they are". */
static aco_rt_mutex_t dl_m;
static aco_rt_chan_t* dl_ch;
static int dl_after;
static void dl_holder(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_mutex_lock(&dl_m, -1), 0);
    int v;
    CHECK_EQ(aco_rt_chan_recv(dl_ch, &v, -1), 0);   /* woken after the -EDEADLK */
    CHECK_EQ(v, 42);
    CHECK_EQ(aco_rt_mutex_unlock(&dl_m), 0);
}
static void dl_waiter(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_mutex_lock(&dl_m, -1), 0);
    dl_after = 1;
    CHECK_EQ(aco_rt_mutex_unlock(&dl_m), 0);
}
static void dl_sender(void* arg) {
    (void)arg;
    int v = 42;
    CHECK_EQ(aco_rt_chan_send(dl_ch, &v, -1), 0);
}
static void sched_edeadlk(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    PROMISE();
    memset(&dl_m, 0, sizeof dl_m);
    dl_after = 0;
    dl_ch = aco_rt_chan_new(sizeof(int), 0);
    CHECK(dl_ch != NULL);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, dl_holder, NULL)), 0);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, dl_waiter, NULL)), 0);
    CHECK_EQ(aco_rt_sched_run(s), -EDEADLK);
    CHECK_EQ(dl_after, 0);
    aco_rt_stats_t st;
    aco_rt_stats(s, &st);
    CHECK_EQ(st.cos_alive, 2);
    /* left as they are: a new co wakes them and the run ends */
    PROMISE();
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, dl_sender, NULL)), 0);
    CHECK_EQ(aco_rt_sched_run(s), 0);
    CHECK_EQ(dl_after, 1);
    CHECK_EQ(aco_rt_chan_free(dl_ch), 0);
}

/* stop: "asked while s does not run, it makes the next run return at once
 * (a stop is never lost, and ends one run)"; "a later aco_rt_sched_run()
 * goes on with them". */
static int stop_count;
static void stop_counter(void* arg) {
    (void)arg;
    for (int i = 0; i < 5; i++) {
        stop_count++;
        CHECK_EQ(aco_rt_yield(), 0);
    }
}
static void stop_self(void* arg) {
    aco_rt_sched_stop((aco_rt_sched_t*)arg);
    stop_count += 100;
    CHECK_EQ(aco_rt_sleep(1 * MS), 0);
    stop_count += 1000;
}
/* The sleeper parks (a far deadline: the run waits in the kernel) until the
 * test lets it go, not for a time the stop must beat: on a loaded machine
 * the thread may run late. */
static aco_rt_sem_t stop_release;
static atomic_int stop_parking;
static void* stop_from_thread(void* arg) {
    for (int i = 0; !atomic_load(&stop_parking); i++) {
        CHECK_LT(i, 60000);             /* a minute: the co never ran */
        usleep(1000);
    }
    usleep(30000);                      /* (the run is asleep by now, mostly) */
    aco_rt_sched_stop((aco_rt_sched_t*)arg);
    return NULL;
}
static void stop_sleeper(void* arg) {
    (void)arg;
    atomic_store(&stop_parking, 1);
    CHECK_EQ(aco_rt_sem_wait(&stop_release, aco_rt_in_ms(100000)), 0);
}
static void sched_stop_checks(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    PROMISE();
    stop_count = 0;
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, stop_counter, NULL)), 0);
    aco_rt_sched_stop(s);
    CHECK_EQ(aco_rt_sched_run(s), 0);
    CHECK_LE(stop_count, 1);                /* returned at once */
    PROMISE();
    CHECK_EQ(aco_rt_sched_run(s), 0);       /* the stop ended one run */
    CHECK_EQ(stop_count, 5);

    /* from a co: the run returns after the current round, the co stays */
    PROMISE();
    stop_count = 0;
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, stop_self, s)), 0);
    CHECK_EQ(aco_rt_sched_run(s), 0);
    CHECK_EQ(stop_count, 100);
    CHECK_EQ(aco_rt_sched_run(s), 0);
    CHECK_EQ(stop_count, 1100);

    /* from another thread while the run waits in the kernel */
    PROMISE();
    pthread_t th;
    aco_rt_sem_init(&stop_release, 0);
    atomic_store(&stop_parking, 0);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, stop_sleeper, NULL)), 0);
    CHECK_EQ(pthread_create(&th, NULL, stop_from_thread, s), 0);
    CHECK_EQ(aco_rt_sched_run(s), 0);
    CHECK_EQ(pthread_join(th, NULL), 0);
    aco_rt_stats_t st;
    aco_rt_stats(s, &st);
    CHECK_EQ(st.cos_alive, 1);
    CHECK_EQ(st.cos_parked, 1);         /* still waits: the stop ended the run */
    aco_rt_sem_post(&stop_release);
    CHECK_EQ(aco_rt_sched_run(s), 0);
    aco_rt_stats(s, &st);
    CHECK_EQ(st.cos_alive, 0);
}

/* free: "a co that has not finished is destroyed without running any more
 * of its code, and leaves the wait queues of the objects it waited on; a
 * mutex it held stays locked". */
static aco_rt_mutex_t fr_m;
static aco_rt_chan_t* fr_ch;
static aco_rt_sem_t fr_sem;
static int fr_ran_after;
static void fr_holder(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_mutex_lock(&fr_m, -1), 0);
    CHECK_EQ(aco_rt_sleep(10000 * MS), 0);
    fr_ran_after = 1;
}
static void fr_chan_waiter(void* arg) {
    (void)arg;
    int v;
    aco_rt_chan_recv(fr_ch, &v, -1);
    fr_ran_after = 1;
}
static void fr_sem_waiter(void* arg) {
    (void)arg;
    aco_rt_sem_wait(&fr_sem, -1);
    fr_ran_after = 1;
}
static void fr_stopper(void* arg) {
    CHECK_EQ(aco_rt_sleep(5 * MS), 0);
    aco_rt_sched_stop((aco_rt_sched_t*)arg);
}
static void fr_after_trylock(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_mutex_trylock(&fr_m), -EBUSY);
    CHECK_EQ(aco_rt_sem_trywait(&fr_sem), -EAGAIN);
    aco_rt_sem_post(&fr_sem);       /* nobody waits any more: it stays */
    CHECK_EQ(aco_rt_sem_trywait(&fr_sem), 0);
}
static void sched_free_checks(void) {
    int bs[8];
    int n = test_backends(bs, 8);
    for (int i = 0; i < n; i++) {
        test_backend_id = bs[i];
        test_backend_label = test_backend_str(bs[i]);
        PROMISE();
        memset(&fr_m, 0, sizeof fr_m);
        memset(&fr_sem, 0, sizeof fr_sem);
        fr_ran_after = 0;
        fr_ch = aco_rt_chan_new(sizeof(int), 0);
        aco_rt_sched_t* s = test_sched_on(bs[i], NULL);
        aco_rt_co_t* joinable = aco_rt_spawn(s, fr_holder, NULL);   /* never joined */
        CHECK(joinable != NULL);
        CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, fr_chan_waiter, NULL)), 0);
        CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, fr_sem_waiter, NULL)), 0);
        CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, fr_stopper, s)), 0);
        CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, fr_chan_waiter, NULL)), 0);
        CHECK_EQ(aco_rt_sched_run(s), 0);
        aco_rt_sched_free(s);
        CHECK_EQ(fr_ran_after, 0);
        /* the channel has no waiter left: it can be freed */
        CHECK_EQ(aco_rt_chan_free(fr_ch), 0);
        s = test_sched_on(bs[i], NULL);
        S = s;
        in_co(fr_after_trylock, NULL);
        aco_rt_sched_free(s);
        test_backend_label = "";
    }
}

/* ======================================================================== */
/* Cos                                                                      */
/* ======================================================================== */

/* spawn: "NULL with errno: ... EPERM (s NULL and the thread has no
 * scheduler)"; spawn from another thread "travels as a message". */
static void nop(void* arg) { (void)arg; }
static atomic_int remote_ran;
static void remote_body(void* arg) {
    (void)arg;
    CHECK(aco_rt_sched_current() == S);
    atomic_fetch_add(&remote_ran, 1);
}
static void* spawn_from_thread(void* arg) {
    errno = 0;
    CHECK(aco_rt_spawn(NULL, nop, NULL) == NULL);
    CHECK_EQ(errno, EPERM);
    aco_rt_co_t* co = aco_rt_spawn((aco_rt_sched_t*)arg, remote_body, NULL);
    CHECK(co != NULL);
    CHECK_EQ(aco_rt_detach(co), 0);        /* "From any thread" */
    return NULL;
}
static void wait_remote(void* arg) {
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, spawn_from_thread, arg), 0);
    int64_t t0 = aco_rt_now();
    while (atomic_load(&remote_ran) == 0 && since(t0) < 5000 * MS)
        CHECK_EQ(aco_rt_sleep(1 * MS), 0);
    CHECK_EQ(atomic_load(&remote_ran), 1);
    CHECK_EQ(pthread_join(th, NULL), 0);
}
static void co_spawn_remote(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    PROMISE();
    PROMISE();
    atomic_store(&remote_ran, 0);
    in_co(wait_remote, s);
    CHECK_EQ(atomic_load(&remote_ran), 1);
}

/* A spawned co "is ready at once and starts when the scheduler comes to it"
 * (in turn: spawn order); yield "Let every other ready co run once, then
 * come back". */
static int order[16], norder;
static void rec(void* arg) {
    order[norder++] = (int)(intptr_t)arg;
    CHECK_EQ(aco_rt_yield(), 0);
    order[norder++] = 10 + (int)(intptr_t)arg;
}
static void co_order(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    PROMISE();
    norder = 0;
    for (int i = 0; i < 3; i++) CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, rec, (void*)(intptr_t)i)), 0);
    test_run(s);
    CHECK_EQ(norder, 6);
    int want[6] = {0, 1, 2, 10, 11, 12};
    for (int i = 0; i < 6; i++) CHECK_EQ(order[i], want[i]);
}

/* join: 0; -EINVAL self / second joiner / detached; -EPERM not in a co;
 * -ETIMEDOUT: "co goes on and the handle stays valid"; -ECANCELED. */
static aco_rt_co_t* jn_target;
static int jn_done;
static void jn_sleeper(void* arg) {
    CHECK_EQ(aco_rt_sleep((int64_t)(intptr_t)arg * MS), 0);
    jn_done = 1;
}
static void jn_second(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_join(jn_target, -1), -EINVAL);      /* has a joiner */
    CHECK_EQ(aco_rt_detach(jn_target), -EINVAL);        /* has a joiner */
}
static void jn_main(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_join(aco_rt_self(), -1), -EINVAL);
    jn_done = 0;
    jn_target = aco_rt_spawn(NULL, jn_sleeper, (void*)(intptr_t)60);
    CHECK(jn_target != NULL);
    int64_t t0 = aco_rt_now();
    CHECK_EQ(aco_rt_join(jn_target, aco_rt_now() + 20 * MS), -ETIMEDOUT);
    CHECK_GE(since(t0), 20 * MS);
    CHECK_EQ(jn_done, 0);
    CHECK_EQ(aco_rt_join(jn_target, 0), -ETIMEDOUT);    /* past: no wait */
    CHECK_EQ(aco_rt_join(jn_target, -7), -ETIMEDOUT);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(NULL, jn_second, NULL)), 0);
    CHECK_EQ(aco_rt_join(jn_target, -1), 0);
    CHECK_EQ(jn_done, 1);
    /* detached, still alive: -EINVAL */
    aco_rt_co_t* d = aco_rt_spawn(NULL, jn_sleeper, (void*)(intptr_t)20);
    CHECK_EQ(aco_rt_detach(d), 0);
    CHECK_EQ(aco_rt_join(d, -1), -EINVAL);
    /* a co that already finished: join at once */
    aco_rt_co_t* q = aco_rt_spawn(NULL, nop, NULL);
    CHECK_EQ(aco_rt_yield(), 0);
    CHECK_EQ(aco_rt_join(q, 0), 0);
}
static void co_join(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    PROMISE(); PROMISE(); PROMISE(); PROMISE(); PROMISE();
    in_co(jn_main, NULL);
    PROMISE();
    aco_rt_co_t* c = aco_rt_spawn(s, nop, NULL);
    CHECK_EQ(aco_rt_join(c, -1), -EPERM);
    CHECK_EQ(aco_rt_detach(c), 0);
    PROMISE();
    CHECK_EQ(aco_rt_detach(c), -EINVAL);        /* still valid: not run yet */
    test_run(s);
}

/* cancel: "its blocking call (now or next) returns -ECANCELED, and so does
 * every later one", "whether or not they would have had to wait"; "a call
 * that returns an error transferred nothing"; cancel twice or after the end
 * does nothing; from any thread. */
static aco_rt_chan_t* cn_ch;
static aco_rt_mutex_t cn_m;
static aco_rt_sem_t cn_sem;
static aco_rt_wg_t cn_wg;
static int cn_fds[2];
static void cn_victim(void* arg) {
    (void)arg;
    CHECK(!aco_rt_cancelled());
    CHECK_EQ(aco_rt_sleep(10000 * MS), -ECANCELED);
    CHECK(aco_rt_cancelled());
    /* every later blocking call, even those that need not wait */
    CHECK_EQ(aco_rt_yield(), -ECANCELED);
    CHECK_EQ(aco_rt_sleep(0), -ECANCELED);
    CHECK_EQ(aco_rt_sleep_until(0), -ECANCELED);
    CHECK_EQ(aco_rt_mutex_lock(&cn_m, -1), -ECANCELED);
    CHECK_EQ(aco_rt_sem_wait(&cn_sem, -1), -ECANCELED);
    CHECK_EQ(aco_rt_wg_wait(&cn_wg, -1), -ECANCELED);
    int v = 0;
    CHECK_EQ(aco_rt_chan_recv(cn_ch, &v, -1), -ECANCELED);
    CHECK_EQ(aco_rt_chan_send(cn_ch, &v, 0), -ECANCELED);
    aco_rt_case_t c = {cn_ch, ACO_RT_RECV, &v};
    CHECK_EQ(aco_rt_chan_select(&c, 1, NULL, -1), -ECANCELED);
    char b[8];
    CHECK_EQ(aco_rt_read(cn_fds[0], b, sizeof b, -1), -ECANCELED);
    CHECK_EQ(aco_rt_write(cn_fds[1], "x", 1, -1), -ECANCELED);
    CHECK_EQ(aco_rt_wait(cn_fds[1], POLLOUT, -1), -ECANCELED);
    CHECK_EQ(aco_rt_join(aco_rt_spawn(NULL, nop, NULL), -1), -ECANCELED);
}
static void cn_main(void* arg) {
    (void)arg;
    memset(&cn_m, 0, sizeof cn_m);
    aco_rt_sem_init(&cn_sem, 3);
    aco_rt_wg_init(&cn_wg);
    cn_ch = aco_rt_chan_new(sizeof(int), 4);
    int one = 1;
    CHECK_EQ(aco_rt_chan_send(cn_ch, &one, -1), 0);
    CHECK_EQ(pipe(cn_fds), 0);
    CHECK_EQ(aco_rt_write(cn_fds[1], "ab", 2, -1), 2);
    aco_rt_co_t* v = aco_rt_spawn(NULL, cn_victim, NULL);
    CHECK_EQ(aco_rt_sleep(5 * MS), 0);
    CHECK_EQ(aco_rt_cancel(v), 0);
    CHECK_EQ(aco_rt_cancel(v), 0);
    CHECK_EQ(aco_rt_join(v, -1), 0);
    /* nothing was transferred by the failed calls */
    CHECK_EQ(aco_rt_mutex_trylock(&cn_m), 0);
    CHECK_EQ(aco_rt_mutex_unlock(&cn_m), 0);
    CHECK_EQ(aco_rt_sem_trywait(&cn_sem), 0);
    CHECK_EQ(aco_rt_sem_trywait(&cn_sem), 0);
    CHECK_EQ(aco_rt_sem_trywait(&cn_sem), 0);
    CHECK_EQ(aco_rt_chan_len(cn_ch), 1);
    char b[8];
    CHECK_EQ(aco_rt_read(cn_fds[0], b, sizeof b, 0), 2);
    CHECK_EQ(aco_rt_chan_free(cn_ch), 0);
    close(cn_fds[0]);
    close(cn_fds[1]);
    /* cancel of a finished co (not yet joined) does nothing */
    aco_rt_co_t* f = aco_rt_spawn(NULL, nop, NULL);
    CHECK_EQ(aco_rt_yield(), 0);
    CHECK_EQ(aco_rt_cancel(f), 0);
    CHECK_EQ(aco_rt_join(f, -1), 0);
}
static void cn_remote_victim(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_sleep_until(-1), -ECANCELED);
}
static void* cn_canceller(void* arg) {
    usleep(20000);
    CHECK_EQ(aco_rt_cancel((aco_rt_co_t*)arg), 0);
    return NULL;
}
static void cn_remote(void* arg) {
    (void)arg;
    aco_rt_co_t* v = aco_rt_spawn(NULL, cn_remote_victim, NULL);
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, cn_canceller, v), 0);
    int64_t t0 = aco_rt_now();
    CHECK_EQ(aco_rt_join(v, aco_rt_now() + 5000 * MS), 0);
    CHECK_LT(since(t0), 3000 * MS);
    CHECK_EQ(pthread_join(th, NULL), 0);
}
static void co_cancel(aco_rt_sched_t* s, void* arg) {
    (void)s; (void)arg;
    PROMISE(); PROMISE(); PROMISE(); PROMISE();
    in_co(cn_main, NULL);
    PROMISE();
    in_co(cn_remote, NULL);
}

/* self, private, cancelled outside cos; private buffer zeroed, its size. */
static void pv_body(void* arg) {
    size_t want = (size_t)(intptr_t)arg;
    size_t n = 99;
    unsigned char* p = aco_rt_private(&n);
    CHECK(aco_rt_self() != NULL);
    if (want == 0) {
        CHECK(p == NULL);
        CHECK_EQ(n, 0);
        return;
    }
    CHECK(p != NULL);
    CHECK_EQ(n, want);
    for (size_t i = 0; i < n; i++) CHECK_EQ(p[i], 0);
    memset(p, 0xa5, n);         /* dirty it for the next record */
    CHECK_EQ(aco_rt_yield(), 0);
    CHECK(aco_rt_private(NULL) == p);
}
static void co_private(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    PROMISE();
    CHECK(aco_rt_self() == NULL);
    size_t n = 5;
    CHECK(aco_rt_private(&n) == NULL);
    CHECK_EQ(n, 0);
    CHECK_EQ(aco_rt_cancelled(), 0);
    PROMISE();
    for (int round = 0; round < 3; round++) {
        for (size_t sz = 0; sz <= 4096; sz = sz ? sz * 4 : 1) {
            aco_rt_spawn_opts_t o = {0};
            o.private_size = sz;
            aco_rt_co_t* c = aco_rt_spawn2(s, pv_body, (void*)(intptr_t)sz, &o);
            CHECK(c != NULL);
            CHECK_EQ(aco_rt_detach(c), 0);
        }
        test_run(s);
    }
}

/* spawn2: a stack_size above the share stacks' gives "a stack of its own of
 * this size"; standalone; objects on a stack of its own may be shared;
 * save_size small and frames that outgrow it; name shown by dump. */
static void big_frame(void* arg) {
    (void)arg;
    volatile char buf[600 * 1024];
    for (size_t i = 0; i < sizeof buf; i += 512) buf[i] = (char)i;
    CHECK_EQ(aco_rt_yield(), 0);
    for (size_t i = 0; i < sizeof buf; i += 512) CHECK_EQ(buf[i], (char)i);
}
static int deep(int n) {
    volatile char pad[1024];
    pad[0] = (char)n;
    if (n == 0) {
        CHECK_EQ(aco_rt_yield(), 0);
        return pad[0];
    }
    return deep(n - 1) + pad[0];
}
static void deep_frames(void* arg) {
    int n = (int)(intptr_t)arg;
    int want = n * (n + 1) / 2;
    CHECK_EQ(deep(n), want);
}
static aco_rt_mutex_t* sa_shared;
static int sa_got;
static void sa_user(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_mutex_lock(sa_shared, -1), 0);
    sa_got = 1;
    CHECK_EQ(aco_rt_mutex_unlock(sa_shared), 0);
}
static void sa_owner(void* arg) {
    (void)arg;
    aco_rt_mutex_t m = {0};     /* on a stack of its own: may be shared */
    sa_shared = &m;
    CHECK_EQ(aco_rt_mutex_lock(&m, -1), 0);
    aco_rt_co_t* u = aco_rt_spawn(NULL, sa_user, NULL);
    /* let others (on the share stacks) run while it waits */
    for (int i = 0; i < 10; i++) CHECK_EQ(aco_rt_yield(), 0);
    CHECK_EQ(sa_got, 0);
    CHECK_EQ(aco_rt_mutex_unlock(&m), 0);
    CHECK_EQ(aco_rt_join(u, -1), 0);
    CHECK_EQ(sa_got, 1);
}
static void co_spawn2(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    PROMISE();
    aco_rt_spawn_opts_t o = {0};
    o.stack_size = 1 << 20;
    for (int i = 0; i < 3; i++) CHECK_EQ(aco_rt_detach(aco_rt_spawn2(s, big_frame, NULL, &o)), 0);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn2(s, deep_frames, (void*)(intptr_t)20, NULL)), 0);
    test_run(s);
    PROMISE();
    memset(&o, 0, sizeof o);
    o.standalone = 1;
    sa_got = 0;
    CHECK_EQ(aco_rt_detach(aco_rt_spawn2(s, sa_owner, NULL, &o)), 0);
    for (int i = 0; i < 4; i++) CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, deep_frames, (void*)(intptr_t)30)), 0);
    test_run(s);
    PROMISE();
    memset(&o, 0, sizeof o);
    o.save_size = 64;           /* far too small: the frames get their own */
    for (int i = 0; i < 4; i++)
        CHECK_EQ(aco_rt_detach(aco_rt_spawn2(s, deep_frames, (void*)(intptr_t)(10 + i * 10), &o)), 0);
    test_run(s);
}

/* sleep: never early, "0, or -ECANCELED"; a past deadline does not wait. */
static void sl_body(void* arg) {
    (void)arg;
    for (int i = 0; i < 20; i++) {
        int64_t d = (i % 5 + 1) * MS;
        int64_t t0 = aco_rt_now();
        CHECK_EQ(aco_rt_sleep(d), 0);
        CHECK_GE(since(t0), d);
        int64_t until = aco_rt_now() + d;
        CHECK_EQ(aco_rt_sleep_until(until), 0);
        CHECK_GE(aco_rt_now(), until);
    }
    /* (a loaded machine may take the CPU away for longer than the bound
     * in any one round: the fastest of up to 20 rounds counts) */
    int64_t best = INT64_MAX;
    for (int round = 0; round < 20 && best >= 50 * MS; round++) {
        int64_t t0 = aco_rt_now();
        CHECK_EQ(aco_rt_sleep_until(0), 0);
        CHECK_EQ(aco_rt_sleep_until(-5), 0);
        CHECK_EQ(aco_rt_sleep_until(INT64_MIN), 0);
        CHECK_EQ(aco_rt_sleep(0), 0);
        CHECK_EQ(aco_rt_sleep(-1000), 0);
        if (since(t0) < best) best = since(t0);
    }
    CHECK_LT(best, 50 * MS);
}
static void co_sleep(aco_rt_sched_t* s, void* arg) {
    (void)s; (void)arg;
    PROMISE(); PROMISE();
    in_co(sl_body, NULL);
    PROMISE();      /* aco_rt_now is CLOCK_MONOTONIC */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t m = ts.tv_sec * 1000000000LL + ts.tv_nsec;
    int64_t n = aco_rt_now();
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t m2 = ts.tv_sec * 1000000000LL + ts.tv_nsec;
    CHECK_GE(n, m);
    CHECK_LE(n, m2);        /* between two reads of it (not a time bound) */
    PROMISE();      /* -EPERM outside a co */
    CHECK_EQ(aco_rt_sleep(1), -EPERM);
    CHECK_EQ(aco_rt_sleep_until(-1), -EPERM);
    CHECK_LE(aco_rt_yield(), 0);    /* unspecified outside a co: no crash */
}

/* ======================================================================== */
/* A co's end, co-local keys                                                */
/* ======================================================================== */

/* ACO_RT_KEYS_MAX "keys alive at once" (a program that made none has them
 * all); -EAGAIN past them; delete: 0, -EINVAL (not a key, or deleted). */
static void keys_max(void) {
    PROMISE();
    static aco_rt_key_t k[ACO_RT_KEYS_MAX + 1];
    int n = 0;
    while (n <= ACO_RT_KEYS_MAX && aco_rt_key_create(&k[n], NULL) == 0) n++;
    CHECK_EQ(n, ACO_RT_KEYS_MAX);
    aco_rt_key_t extra;
    CHECK_EQ(aco_rt_key_create(&extra, NULL), -EAGAIN);
    PROMISE();
    CHECK_EQ(aco_rt_key_delete(k[5]), 0);
    CHECK_EQ(aco_rt_key_delete(k[5]), -EINVAL);
    CHECK_EQ(aco_rt_key_create(&extra, NULL), 0);        /* one is free again */
    CHECK_EQ(aco_rt_key_create(&k[5], NULL), -EAGAIN);
    CHECK_EQ(aco_rt_key_delete(extra), 0);
    for (int i = 0; i < n; i++)
        if (i != 5) CHECK_EQ(aco_rt_key_delete(k[i]), 0);
    PROMISE();
    CHECK_EQ(aco_rt_key_delete(k[0]), -EINVAL);
    CHECK_EQ(aco_rt_key_delete((aco_rt_key_t)-1), -EINVAL);
    CHECK_EQ(aco_rt_key_delete(123456789u), -EINVAL);
    CHECK_EQ(aco_rt_setspecific(123456789u, "x"), -EINVAL);
    CHECK_EQ(aco_rt_setspecific(k[0], "x"), -EINVAL);    /* deleted: not a key */
    CHECK(aco_rt_getspecific(123456789u) == NULL);
}

/* Destructors: "set to NULL and passed to it, in the order of the keys'
 * slots (creation order while none was deleted), in the co (a destructor
 * may block, and may set values again: rounds go on while a round called
 * one, at most ACO_RT_KEY_DTOR_ROUNDS)"; aco_rt_exit runs them, then the
 * joiner goes on; a record used again starts with NULLs; NULL values and
 * keys without destructor are skipped; deleted keys: no destructor. */
static aco_rt_key_t kd[4];      /* kd[3]: no destructor */
static int kd_log[64], kd_n;
static int kd_resets;           /* rounds that set a value again */
static void kd_dtor(void* v) {
    int which = (int)(intptr_t)v;           /* 1..3 */
    kd_log[kd_n++] = which;
    CHECK(aco_rt_self() != NULL);           /* in the co */
    CHECK(aco_rt_getspecific(kd[which - 1]) == NULL);   /* set to NULL first */
    CHECK_EQ(aco_rt_sleep(1 * MS), 0);      /* may block */
    if (which == 2 && kd_resets > 0) {
        kd_resets--;
        CHECK_EQ(aco_rt_setspecific(kd[1], (void*)(intptr_t)2), 0);
    }
}
static int kd_after_exit;
static void kd_set_all(void) {
    for (int i = 0; i < 3; i++) CHECK_EQ(aco_rt_setspecific(kd[i], (void*)(intptr_t)(i + 1)), 0);
    CHECK_EQ(aco_rt_setspecific(kd[3], "no dtor"), 0);
}
static void kd_exit_inner(void) {
    kd_set_all();
    aco_rt_exit();
}
static void kd_body(void* arg) {
    int how = (int)(intptr_t)arg;
    for (int i = 0; i < 4; i++) CHECK(aco_rt_getspecific(kd[i]) == NULL);
    if (how == 1) {
        kd_exit_inner();
        kd_after_exit = 1;
    }
    kd_set_all();
}
static void kd_joiner(void* arg) {
    int how = (int)(intptr_t)arg;
    kd_n = 0;
    aco_rt_co_t* c = aco_rt_spawn(NULL, kd_body, arg);
    CHECK_EQ(aco_rt_join(c, -1), 0);
    /* the joiner goes on after the destructors */
    if (how == 2) {
        /* rounds: kd[1] set again twice, three rounds call kd[1] */
        CHECK_EQ(kd_n, 5);
        int want[5] = {1, 2, 3, 2, 2};
        for (int i = 0; i < 5; i++) CHECK_EQ(kd_log[i], want[i]);
    } else if (how == 3) {
        /* set again forever: at most ACO_RT_KEY_DTOR_ROUNDS rounds */
        CHECK_EQ(kd_n, 3 + ACO_RT_KEY_DTOR_ROUNDS - 1);
    } else {
        CHECK_EQ(kd_n, 3);
        for (int i = 0; i < 3; i++) CHECK_EQ(kd_log[i], i + 1);
    }
    CHECK_EQ(kd_after_exit, 0);
}
static void keys_dtor(aco_rt_sched_t* s, void* arg) {
    (void)s; (void)arg;
    for (int i = 0; i < 3; i++) CHECK_EQ(aco_rt_key_create(&kd[i], kd_dtor), 0);
    CHECK_EQ(aco_rt_key_create(&kd[3], NULL), 0);
    PROMISE(); PROMISE(); PROMISE();
    kd_resets = 0;
    in_co(kd_joiner, (void*)(intptr_t)0);
    PROMISE();
    kd_resets = 0;
    kd_after_exit = 0;
    in_co(kd_joiner, (void*)(intptr_t)1);
    PROMISE();
    kd_resets = 2;
    in_co(kd_joiner, (void*)(intptr_t)2);
    PROMISE();
    kd_resets = 1000;
    in_co(kd_joiner, (void*)(intptr_t)3);
    kd_resets = 0;
    PROMISE();      /* records reused start with NULLs (kd_body checks) */
    for (int i = 0; i < 3; i++) in_co(kd_joiner, (void*)(intptr_t)0);
    for (int i = 0; i < 4; i++) CHECK_EQ(aco_rt_key_delete(kd[i]), 0);
}

/* "Delete key: no destructor runs for its values, which no later key
 * sees"; getspecific of a deleted key is NULL; values are per co, and the
 * thread's own outside cos are apart from its cos'. */
static aco_rt_key_t kx;
static int kx_dtor_calls;
static void kx_dtor(void* v) { (void)v; kx_dtor_calls++; }
static void kx_setter(void* arg) {
    CHECK(aco_rt_getspecific(kx) == NULL);          /* not the thread's */
    CHECK_EQ(aco_rt_setspecific(kx, arg), 0);
    CHECK_EQ(aco_rt_yield(), 0);
    CHECK(aco_rt_getspecific(kx) == arg);           /* its own */
    CHECK_EQ(aco_rt_yield(), 0);
}
static void kx_deleter(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_setspecific(kx, "mine"), 0);
    CHECK_EQ(aco_rt_key_delete(kx), 0);
    CHECK(aco_rt_getspecific(kx) == NULL);
    aco_rt_key_t k2;
    CHECK_EQ(aco_rt_key_create(&k2, kx_dtor), 0);
    CHECK(aco_rt_getspecific(k2) == NULL);          /* no later key sees it */
    CHECK_EQ(aco_rt_key_delete(k2), 0);
}
static void keys_delete(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    PROMISE();
    CHECK_EQ(aco_rt_key_create(&kx, kx_dtor), 0);
    CHECK_EQ(aco_rt_setspecific(kx, "thread"), 0);
    for (int i = 1; i <= 3; i++) CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, kx_setter, (void*)(intptr_t)i)), 0);
    kx_dtor_calls = 0;
    test_run(s);
    CHECK_EQ(kx_dtor_calls, 3);
    CHECK(strcmp(aco_rt_getspecific(kx), "thread") == 0);
    PROMISE();
    kx_dtor_calls = 0;
    in_co(kx_deleter, NULL);
    CHECK_EQ(kx_dtor_calls, 0);
    CHECK(aco_rt_getspecific(kx) == NULL);
}

/* "A co destroyed by aco_rt_sched_free before its end runs no
 * destructor"; "A thread's values outside cos get their destructors when
 * it exits through pthreads". */
static aco_rt_key_t kf;
static atomic_int kf_calls;
static void kf_dtor(void* v) { (void)v; atomic_fetch_add(&kf_calls, 1); }
static void kf_body(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_setspecific(kf, "v"), 0);
    aco_rt_sleep(100000 * MS);
}
static void kf_stop(void* arg) {
    CHECK_EQ(aco_rt_sleep(2 * MS), 0);
    aco_rt_sched_stop((aco_rt_sched_t*)arg);
}
static void* kf_thread(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_setspecific(kf, "thread value"), 0);
    CHECK(strcmp(aco_rt_getspecific(kf), "thread value") == 0);
    return NULL;
}
static void keys_free_and_thread(void) {
    PROMISE();
    CHECK_EQ(aco_rt_key_create(&kf, kf_dtor), 0);
    aco_rt_sched_t* s = test_sched(NULL);
    atomic_store(&kf_calls, 0);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, kf_body, NULL)), 0);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, kf_stop, s)), 0);
    CHECK_EQ(aco_rt_sched_run(s), 0);
    aco_rt_sched_free(s);
    CHECK_EQ(atomic_load(&kf_calls), 0);
    PROMISE();
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, kf_thread, NULL), 0);
    CHECK_EQ(pthread_join(th, NULL), 0);
    CHECK_EQ(atomic_load(&kf_calls), 1);
    CHECK_EQ(aco_rt_key_delete(kf), 0);
}

/* ======================================================================== */
/* Timers                                                                   */
/* ======================================================================== */

static aco_rt_timer_t tm_t[8];
static int64_t tm_due[8], tm_at[8];
static int tm_fired[8];
static void tm_fn(aco_rt_timer_t* t) {
    int i = (int)(t - tm_t);
    tm_at[i] = aco_rt_now();
    tm_fired[i]++;
    CHECK(aco_rt_self() == NULL);       /* from the scheduler, not a co */
}
static aco_rt_timer_t tm_chain;
static int tm_chain_n;
static void tm_chain_fn(aco_rt_timer_t* t) {
    if (++tm_chain_n < 5) CHECK_EQ(aco_rt_timer_start(t, aco_rt_now() + 1 * MS, tm_chain_fn), 0);
}
/* Is p in the frame around here (on the co's stack)?  Not when ASan's
 * detect_stack_use_after_return moved the locals to its fake stack. */
#define NEAR_FRAME(p) \
    ((uintptr_t)(p) - (uintptr_t)__builtin_frame_address(0) + 65536 < 131072)
static void tm_share_stack(void* arg) {
    (void)arg;
    aco_rt_timer_t t;
    memset(&t, 0, sizeof t);
    if (!NEAR_FRAME(&t)) return;        /* (off the share stack: allowed) */
    CHECK_EQ(aco_rt_timer_start(&t, aco_rt_now() + MS, tm_fn), -EINVAL);
}
static void tm_own_stack(void* arg) {
    (void)arg;
    aco_rt_timer_t t;
    memset(&t, 0, sizeof t);
    /* a stack of its own is no share stack */
    CHECK_EQ(aco_rt_timer_start(&t, aco_rt_now() + MS, (void (*)(aco_rt_timer_t*))nop), 0);
    CHECK_EQ(aco_rt_timer_stop(&t), 1);
}
static void tm_body(void* arg) {
    (void)arg;
    memset(tm_t, 0, sizeof tm_t);
    memset(tm_fired, 0, sizeof tm_fired);
    CHECK_EQ(aco_rt_timer_stop(&tm_t[7]), 0);     /* never started */
    int64_t now = aco_rt_now();
    for (int i = 0; i < 6; i++) {
        tm_due[i] = now + (int64_t)(6 - i) * 3 * MS;
        CHECK_EQ(aco_rt_timer_start(&tm_t[i], tm_due[i], tm_fn), 0);
    }
    CHECK_EQ(aco_rt_timer_start(&tm_t[0], now + MS, tm_fn), -EINVAL);   /* armed */
    aco_rt_stats_t st;
    aco_rt_stats(NULL, &st);
    CHECK_GE(st.timers, 6);
    CHECK_EQ(aco_rt_timer_stop(&tm_t[5]), 1);
    CHECK_EQ(aco_rt_timer_stop(&tm_t[5]), 0);
    /* past deadlines fire in the next round */
    tm_due[6] = 0;
    int64_t armed = aco_rt_now();
    CHECK_EQ(aco_rt_timer_start(&tm_t[6], -5, tm_fn), 0);
    int yields = 0, late_yields = 0;
    while (tm_fired[6] == 0 && yields < 100000) {
        /* yields begun once the clock is past the next tick (2^14 ns) */
        if (aco_rt_now() >= armed + 2 * 16384) late_yields++;
        CHECK_EQ(aco_rt_yield(), 0);
        yields++;
    }
    /* The header: a passed deadline fires at the first look at the timers
     * after the clock enters the next 16 us tick; while this co keeps
     * yielding (a co always ready) the scheduler looks every 64 resumes, so
     * it fires with the co never parking, within about a tick (a 64-yield
     * round can take less than a tick: yields alone cannot bound it).
     * Counted in yields after that tick, not in ms: a loaded machine may
     * stop the thread for any time in between. */
    CHECK_EQ(tm_fired[6], 1);
    CHECK_LE(late_yields, 2 * 64 + 1);
    CHECK_EQ(aco_rt_sleep(40 * MS), 0);
    int64_t late = 0;
    for (int i = 0; i < 5; i++) {
        CHECK_EQ(tm_fired[i], 1);
        CHECK_GE(tm_at[i], tm_due[i]);                  /* never early */
        if (tm_at[i] - tm_due[i] > late) late = tm_at[i] - tm_due[i];
        CHECK_EQ(aco_rt_timer_stop(&tm_t[i]), 0);       /* fired */
    }
    CHECK_EQ(tm_fired[5], 0);
    /* not late by more than a generous 30 ms: a loaded machine may stop
     * the thread longer than that in any one round, so further rounds of
     * the same timers may show it (the best of up to 10) */
    for (int round = 0; round < 10 && late >= 30 * MS; round++) {
        memset(tm_fired, 0, 5 * sizeof tm_fired[0]);
        now = aco_rt_now();
        for (int i = 0; i < 5; i++) {
            tm_due[i] = now + (int64_t)(6 - i) * 3 * MS;
            CHECK_EQ(aco_rt_timer_start(&tm_t[i], tm_due[i], tm_fn), 0);
        }
        CHECK_EQ(aco_rt_sleep(40 * MS), 0);
        late = 0;
        for (int i = 0; i < 5; i++) {
            CHECK_EQ(tm_fired[i], 1);
            CHECK_GE(tm_at[i], tm_due[i]);
            if (tm_at[i] - tm_due[i] > late) late = tm_at[i] - tm_due[i];
        }
    }
    CHECK_LT(late, 30 * MS);
    /* a fired timer may be armed again; callbacks may start timers */
    CHECK_EQ(aco_rt_timer_start(&tm_t[0], aco_rt_now() + MS, tm_fn), 0);
    tm_chain_n = 0;
    memset(&tm_chain, 0, sizeof tm_chain);
    CHECK_EQ(aco_rt_timer_start(&tm_chain, aco_rt_now(), tm_chain_fn), 0);
    /* (on a busy machine under a sanitizer five 1 ms hops may take more
     * than 30 ms: wait for them, boundedly) */
    for (int i = 0; i < 200 && (tm_fired[0] < 2 || tm_chain_n < 5); i++)
        CHECK_EQ(aco_rt_sleep(10 * MS), 0);
    CHECK_EQ(tm_fired[0], 2);
    CHECK_EQ(tm_chain_n, 5);
    aco_rt_stats(NULL, &st);
    CHECK_EQ(st.timers, 0);
}
static void* tm_no_sched(void* arg) {
    (void)arg;
    aco_rt_timer_t t;
    memset(&t, 0, sizeof t);
    return (void*)(intptr_t)aco_rt_timer_start(&t, 0, tm_fn);
}
static void timers(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    PROMISE(); PROMISE(); PROMISE(); PROMISE(); PROMISE(); PROMISE(); PROMISE();
    in_co(tm_body, NULL);
    PROMISE();
    in_co(tm_share_stack, NULL);
    PROMISE();
    aco_rt_spawn_opts_t o = {0};
    o.standalone = 1;
    CHECK_EQ(aco_rt_detach(aco_rt_spawn2(s, tm_own_stack, NULL, &o)), 0);
    test_run(s);
    PROMISE();
    pthread_t th;
    void* r;
    CHECK_EQ(pthread_create(&th, NULL, tm_no_sched, NULL), 0);
    CHECK_EQ(pthread_join(th, &r), 0);
    CHECK_EQ((intptr_t)r, -EPERM);
    /* "Before its first start it is all-zero ... or given to
     * aco_rt_timer_init": memory with other bytes, made a timer */
    PROMISE();
    aco_rt_timer_t* h = malloc(sizeof *h);
    CHECK(h != NULL);
    memset(h, 0xbe, sizeof *h);
    aco_rt_timer_init(h);
    CHECK_EQ(aco_rt_timer_stop(h), 0);          /* never started */
    CHECK_EQ(aco_rt_timer_start(h, aco_rt_now() + 1000 * MS, (void (*)(aco_rt_timer_t*))nop), 0);
    CHECK_EQ(aco_rt_timer_start(h, aco_rt_now() + 1000 * MS, (void (*)(aco_rt_timer_t*))nop), -EINVAL);
    CHECK_EQ(aco_rt_timer_stop(h), 1);
    free(h);
    /* from the scheduler's thread outside any co, before the run */
    PROMISE();
    memset(tm_fired, 0, sizeof tm_fired);
    memset(&tm_t[0], 0, sizeof tm_t[0]);
    tm_due[0] = aco_rt_now() + 2 * MS;
    CHECK_EQ(aco_rt_timer_start(&tm_t[0], tm_due[0], tm_fn), 0);
    test_run(s);        /* an armed timer keeps the run going? */
    if (tm_fired[0] == 0) {
        /* the header does not say the run waits for timers: stop it */
        CHECK_EQ(aco_rt_timer_stop(&tm_t[0]), 1);
    } else {
        CHECK_GE(tm_at[0], tm_due[0]);
    }
}


/* ======================================================================== */
/* I/O                                                                      */
/* ======================================================================== */

static int io_fds[2];
static int tcp_listener(uint16_t* port) {
    int l = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(l >= 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK_EQ(bind(l, (struct sockaddr*)&a, sizeof a), 0);
    CHECK_EQ(listen(l, 16), 0);
    socklen_t len = sizeof a;
    CHECK_EQ(getsockname(l, (struct sockaddr*)&a, &len), 0);
    *port = ntohs(a.sin_port);
    return l;
}

/* "read/recv return as soon as some bytes are there"; a past deadline does
 * not wait but still reads what is there; -ETIMEDOUT never early. */
static void io_read_some(void* arg) {
    (void)arg;
    int p[2];
    CHECK_EQ(pipe(p), 0);
    char buf[100];
    CHECK_EQ(aco_rt_read(p[0], buf, sizeof buf, 0), -ETIMEDOUT);
    CHECK_EQ(aco_rt_read(p[0], buf, sizeof buf, -3), -ETIMEDOUT);
    int64_t t0 = aco_rt_now();
    CHECK_EQ(aco_rt_read(p[0], buf, sizeof buf, aco_rt_now() + 15 * MS), -ETIMEDOUT);
    CHECK_GE(since(t0), 15 * MS);
    CHECK_EQ(write(p[1], "0123456789", 10), 10);
    CHECK_EQ(aco_rt_read(p[0], buf, sizeof buf, -1), 10);
    CHECK_EQ(write(p[1], "abc", 3), 3);
    CHECK_EQ(aco_rt_read(p[0], buf, sizeof buf, 0), 3);   /* there: read */
    CHECK(memcmp(buf, "abc", 3) == 0);
    /* pipes are left as they are (RWF_NOWAIT, call by call) */
    CHECK_EQ(fcntl(p[0], F_GETFL) & O_NONBLOCK, 0);
    /* a reader that waits gets the bytes as soon as they come */
    int sp[2];
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sp), 0);
    int fl = fcntl(sp[0], F_GETFL);
    CHECK_EQ(aco_rt_send(sp[1], "hey", 3, 0, -1), 3);
    CHECK_EQ(aco_rt_recv(sp[0], buf, sizeof buf, 0, -1), 3);
    CHECK_EQ(fcntl(sp[0], F_GETFL), fl);      /* "Sockets are left as they are" */
    CHECK_EQ(aco_rt_recv(sp[0], buf, sizeof buf, 0, aco_rt_now() + 5 * MS), -ETIMEDOUT);
    for (int i = 0; i < 2; i++) {
        close(p[i]);
        close(sp[i]);
    }
}

/* "write/send/writev send everything (like a blocking socket)"; buffers on
 * the co's share stack; no byte lost. */
#define BIG (4 << 20)
static void io_big_reader(void* arg) {
    int fd = (int)(intptr_t)arg;
    char buf[3000];     /* on the share stack */
    size_t got = 0;
    uint8_t want = 0;
    while (got < 3 * BIG) {
        ssize_t r = aco_rt_read(fd, buf, sizeof buf, -1);
        CHECK_GT(r, 0);
        for (ssize_t i = 0; i < r; i++, want++) CHECK_EQ((uint8_t)buf[i], want);
        got += (size_t)r;
    }
    CHECK_EQ(got, 3 * BIG);
}
static void io_write_all(void* arg) {
    (void)arg;
    int sp[2];
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sp), 0);
    uint8_t* b = malloc(BIG);
    for (size_t i = 0; i < BIG; i++) b[i] = (uint8_t)i;
    aco_rt_co_t* r = aco_rt_spawn(NULL, io_big_reader, (void*)(intptr_t)sp[0]);
    CHECK_EQ(aco_rt_write(sp[1], b, BIG, -1), BIG);
    CHECK_EQ(aco_rt_send(sp[1], b, BIG, 0, -1), BIG);
    struct iovec iov[3] = {{b, 1000}, {b + 1000, BIG - 2000}, {b + BIG - 1000, 1000}};
    CHECK_EQ(aco_rt_writev(sp[1], iov, 3, -1), BIG);
    CHECK_EQ(aco_rt_join(r, -1), 0);
    /* pipes too, with a stack buffer */
    int p[2];
    CHECK_EQ(pipe(p), 0);
    r = aco_rt_spawn(NULL, io_big_reader, (void*)(intptr_t)p[0]);
    char chunk[4096];
    uint8_t v = 0;
    for (int k = 0; k < 3 * BIG / (int)sizeof chunk; k++) {
        for (size_t i = 0; i < sizeof chunk; i++) chunk[i] = (char)v++;
        CHECK_EQ(aco_rt_write(p[1], chunk, sizeof chunk, -1), (ssize_t)sizeof chunk);
    }
    CHECK_EQ(aco_rt_join(r, -1), 0);
    free(b);
    close(sp[0]); close(sp[1]); close(p[0]); close(p[1]);
}

/* "return less than asked only when an error or the deadline comes after
 * part was sent"; "a call that returns an error transferred nothing". */
static void io_partial(void* arg) {
    (void)arg;
    int sp[2];
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sp), 0);
    size_t n = 64 << 20;
    char* b = calloc(1, n);
    int64_t t0 = aco_rt_now();
    ssize_t w = aco_rt_write(sp[1], b, n, aco_rt_now() + 30 * MS);
    CHECK_GE(since(t0), 30 * MS);
    CHECK_GT(w, 0);
    CHECK_LT(w, (ssize_t)n);
    /* the buffer is full now: nothing more goes, -ETIMEDOUT */
    CHECK_EQ(aco_rt_write(sp[1], b, n, aco_rt_now() + 5 * MS), -ETIMEDOUT);
    /* the reader finds exactly w bytes */
    ssize_t got = 0, r;
    while ((r = aco_rt_read(sp[0], b, n, aco_rt_now() + 20 * MS)) > 0) got += r;
    CHECK_EQ(r, -ETIMEDOUT);
    CHECK_EQ(got, w);
    free(b);
    close(sp[0]); close(sp[1]);
}

/* Cancel a waiting read: -ECANCELED and nothing consumed. */
static void io_cancel_reader(void* arg) {
    (void)arg;
    char b[4];
    CHECK_EQ(aco_rt_read(io_fds[0], b, sizeof b, -1), -ECANCELED);
}
static void io_cancel(void* arg) {
    (void)arg;
    CHECK_EQ(pipe(io_fds), 0);
    aco_rt_co_t* c = aco_rt_spawn(NULL, io_cancel_reader, NULL);
    CHECK_EQ(aco_rt_sleep(2 * MS), 0);
    CHECK_EQ(aco_rt_cancel(c), 0);
    CHECK_EQ(write(io_fds[1], "zz", 2), 2);
    CHECK_EQ(aco_rt_join(c, -1), 0);
    char b[4];
    CHECK_EQ(aco_rt_read(io_fds[0], b, sizeof b, 0), 2);
    close(io_fds[0]); close(io_fds[1]);
}

/* aco_rt_close: "calls of other cos blocked on it return -EBADF first, on
 * every scheduler of the process ... From any thread, in a co or not". */
static int io_badf;
static void io_close_waiter(void* arg) {
    int kind = (int)(intptr_t)arg;
    char b[4];
    int r;
    if (kind == 0) r = (int)aco_rt_read(io_fds[0], b, sizeof b, aco_rt_now() + 3000 * MS);
    else r = aco_rt_wait(io_fds[0], POLLIN, aco_rt_now() + 3000 * MS);
    CHECK_EQ(r, -EBADF);
    io_badf++;
}
static void* io_close_thread(void* arg) {
    (void)arg;
    usleep(20000);
    CHECK_EQ(aco_rt_close(io_fds[0]), 0);
    return NULL;
}
static void io_close(void* arg) {
    int from_thread = (int)(intptr_t)arg;
    CHECK_EQ(pipe(io_fds), 0);
    io_badf = 0;
    aco_rt_co_t* a = aco_rt_spawn(NULL, io_close_waiter, (void*)0);
    aco_rt_co_t* b = aco_rt_spawn(NULL, io_close_waiter, (void*)1);
    int64_t t0 = aco_rt_now();
    pthread_t th;
    if (from_thread) CHECK_EQ(pthread_create(&th, NULL, io_close_thread, NULL), 0);
    else {
        CHECK_EQ(aco_rt_sleep(5 * MS), 0);
        CHECK_EQ(aco_rt_close(io_fds[0]), 0);
    }
    CHECK_EQ(aco_rt_join(a, -1), 0);
    CHECK_EQ(aco_rt_join(b, -1), 0);
    CHECK_LT(since(t0), 2000 * MS);
    CHECK_EQ(io_badf, 2);
    if (from_thread) CHECK_EQ(pthread_join(th, NULL), 0);
    close(io_fds[1]);
}

/* "recv on a stream socket with MSG_WAITALL, and neither MSG_PEEK nor
 * MSG_DONTWAIT: once n bytes came, or sooner with what came when the end,
 * an error or the deadline does" (a writer co trickles the bytes). */
static int wa_fd;
static void wa_writer(void* arg) {
    (void)arg;
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(aco_rt_sleep(2 * MS), 0);
        CHECK_EQ(aco_rt_write(wa_fd, "ab", 2, -1), 2);
    }
    CHECK_EQ(aco_rt_sleep(2 * MS), 0);
    CHECK_EQ(aco_rt_write(wa_fd, "c", 1, -1), 1);
    CHECK_EQ(aco_rt_sleep(2 * MS), 0);
    CHECK_EQ(shutdown(wa_fd, SHUT_WR), 0);
}
static void io_waitall(void* arg) {
    (void)arg;
    int sp[2];
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sp), 0);
    wa_fd = sp[1];
    aco_rt_co_t* w = aco_rt_spawn(NULL, wa_writer, NULL);
    CHECK(w != NULL);
    char b[8];
    CHECK_EQ(aco_rt_recv(sp[0], b, 6, MSG_WAITALL, aco_rt_in_ms(5000)), 6);
    CHECK(memcmp(b, "ababab", 6) == 0);
    CHECK_EQ(aco_rt_recv(sp[0], b, 4, MSG_WAITALL, aco_rt_in_ms(5000)), 1);    /* the end */
    CHECK_EQ(b[0], 'c');
    CHECK_EQ(aco_rt_recv(sp[0], b, 4, MSG_WAITALL, aco_rt_in_ms(5000)), 0);
    CHECK_EQ(aco_rt_join(w, -1), 0);
    /* the deadline with part of it: that part */
    CHECK_EQ(write(sp[0], "xy", 2), 2);
    CHECK_EQ(aco_rt_recv(sp[1], b, 4, MSG_WAITALL, aco_rt_in_ms(20)), 2);
    CHECK_EQ(aco_rt_recv(sp[1], b, 4, MSG_WAITALL, aco_rt_in_ms(5)), -ETIMEDOUT);
    close(sp[0]); close(sp[1]);
    /* "a datagram is one message whatever the flags" */
    CHECK_EQ(socketpair(AF_UNIX, SOCK_DGRAM, 0, sp), 0);
    CHECK_EQ(write(sp[1], "hello", 5), 5);
    CHECK_EQ(write(sp[1], "world", 5), 5);
    char d[100];
    CHECK_EQ(aco_rt_recv(sp[0], d, sizeof(d), MSG_WAITALL, aco_rt_in_ms(5000)), 5);
    CHECK(memcmp(d, "hello", 5) == 0);
    CHECK_EQ(aco_rt_recv(sp[0], d, sizeof(d), MSG_WAITALL, aco_rt_in_ms(5000)), 5);
    CHECK(memcmp(d, "world", 5) == 0);
    close(sp[0]); close(sp[1]);
}

/* SIGPIPE: never raised, "whatever the program's SIGPIPE disposition";
 * disposition and mask never changed; "where the program blocks SIGPIPE
 * itself, one that was pending before the call stays pending, and the call
 * adds none". */
static void io_sigpipe(void* arg) {
    (void)arg;
    struct sigaction old, dfl = {0};
    dfl.sa_handler = SIG_DFL;
    CHECK_EQ(sigaction(SIGPIPE, &dfl, &old), 0);
    int p[2], sp[2];
    CHECK_EQ(pipe(p), 0);
    close(p[0]);
    CHECK_EQ(aco_rt_write(p[1], "x", 1, -1), -EPIPE);
    struct iovec iov = {"y", 1};
    CHECK_EQ(aco_rt_writev(p[1], &iov, 1, -1), -EPIPE);
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sp), 0);
    close(sp[0]);
    CHECK_EQ(aco_rt_write(sp[1], "x", 1, -1), -EPIPE);
    CHECK_EQ(aco_rt_send(sp[1], "x", 1, 0, -1), -EPIPE);
    CHECK_EQ(aco_rt_writev(sp[1], &iov, 1, -1), -EPIPE);
    sigset_t m, pend;
    CHECK_EQ(pthread_sigmask(SIG_SETMASK, NULL, &m), 0);
    CHECK(!sigismember(&m, SIGPIPE));
    CHECK_EQ(sigpending(&pend), 0);
    CHECK(!sigismember(&pend, SIGPIPE));
    struct sigaction now;
    CHECK_EQ(sigaction(SIGPIPE, NULL, &now), 0);
    CHECK(now.sa_handler == SIG_DFL);
    /* the program blocks SIGPIPE and has one pending: left to it */
    sigset_t pipe_only;
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    CHECK_EQ(pthread_sigmask(SIG_BLOCK, &pipe_only, NULL), 0);
    /* blocked, none pending: the call adds none */
    CHECK_EQ(aco_rt_write(p[1], "x", 1, -1), -EPIPE);
    CHECK_EQ(aco_rt_writev(p[1], &iov, 1, -1), -EPIPE);
    CHECK_EQ(sigpending(&pend), 0);
    CHECK(!sigismember(&pend, SIGPIPE));
    CHECK_EQ(pthread_kill(pthread_self(), SIGPIPE), 0);
    CHECK_EQ(aco_rt_write(p[1], "x", 1, -1), -EPIPE);
    CHECK_EQ(sigpending(&pend), 0);
    CHECK(sigismember(&pend, SIGPIPE));
    struct timespec zero = {0, 0};
    while (sigtimedwait(&pipe_only, NULL, &zero) == SIGPIPE) {}
    CHECK_EQ(pthread_sigmask(SIG_UNBLOCK, &pipe_only, NULL), 0);
    CHECK_EQ(sigaction(SIGPIPE, &old, NULL), 0);
    close(p[1]); close(sp[1]);
}

/* "A descriptor is the file, not the number": close(2) and a new file on
 * the number, dup2 over it, O_NONBLOCK cleared behind our back: never a
 * blocked thread, never a missed readiness. */
/* Ticks due every 2 ms from tick_t0; a tick whose time has come goes
 * without a sleep, so the ticks due before a deadline are all in before
 * the co of that deadline runs, however late the thread ran. */
static int tick_n;
static int64_t tick_t0;
static void ticker(void* arg) {
    (void)arg;
    for (int i = 1; i <= 10; i++) {
        int64_t due = tick_t0 + i * 2 * MS;
        if (aco_rt_now() < due) CHECK_EQ(aco_rt_sleep_until(due), 0);
        tick_n++;
    }
}
static void io_identity(void* arg) {
    (void)arg;
    int p[2], q[2];
    char b[8];
    CHECK_EQ(pipe(p), 0);
    CHECK_EQ(aco_rt_read(p[0], b, sizeof b, 0), -ETIMEDOUT);   /* known now */
    /* close(2) both ends; a new pipe takes the numbers */
    int old0 = p[0];
    close(p[0]); close(p[1]);
    CHECK_EQ(pipe(q), 0);
    CHECK_EQ(q[0], old0);
    CHECK_EQ(write(q[1], "new", 3), 3);
    CHECK_EQ(aco_rt_read(q[0], b, sizeof b, aco_rt_now() + 1000 * MS), 3);
    /* blocking again behind our back: the next read still never blocks the
     * thread, and a write that comes later is seen */
    CHECK_EQ(fcntl(q[0], F_SETFL, fcntl(q[0], F_GETFL) & ~O_NONBLOCK), 0);
    tick_n = 0;
    tick_t0 = aco_rt_now();
    aco_rt_co_t* t = aco_rt_spawn(NULL, ticker, NULL);
    int64_t t0 = aco_rt_now();
    CHECK_EQ(aco_rt_read(q[0], b, sizeof b, aco_rt_now() + 30 * MS), -ETIMEDOUT);
    CHECK_LT(since(t0), 1000 * MS);
    CHECK_GE(tick_n, 5);
    CHECK_EQ(aco_rt_join(t, -1), 0);
    /* dup2 over a watched number: reads go to the new file */
    int r[2];
    CHECK_EQ(pipe(r), 0);
    CHECK_EQ(dup2(r[0], q[0]), q[0]);
    CHECK_EQ(write(r[1], "dup", 3), 3);
    CHECK_EQ(aco_rt_read(q[0], b, sizeof b, aco_rt_now() + 1000 * MS), 3);
    CHECK(memcmp(b, "dup", 3) == 0);
    CHECK_EQ(aco_rt_read(q[0], b, sizeof b, aco_rt_now() + 5 * MS), -ETIMEDOUT);
    CHECK_EQ(write(r[1], "two", 3), 3);
    CHECK_EQ(aco_rt_read(r[0], b, sizeof b, aco_rt_now() + 1000 * MS), 3);
    close(q[0]); close(q[1]); close(r[0]); close(r[1]);
}

/* "A descriptor closed by close(2) while cos wait on it leaves them waiting
 * until their deadline". */
static int cl_fd;
static void io_closed_waiter(void* arg) {
    (void)arg;
    char b[4];
    int64_t t0 = aco_rt_now();
    ssize_t r = aco_rt_read(cl_fd, b, sizeof b, aco_rt_now() + 40 * MS);
    CHECK_EQ(r, -ETIMEDOUT);
    CHECK_GE(since(t0), 40 * MS);
}
static void io_closed_behind(void* arg) {
    (void)arg;
    int p[2];
    CHECK_EQ(pipe(p), 0);
    cl_fd = p[0];
    aco_rt_co_t* c = aco_rt_spawn(NULL, io_closed_waiter, NULL);
    CHECK_EQ(aco_rt_sleep(5 * MS), 0);
    close(p[0]);
    CHECK_EQ(aco_rt_join(c, -1), 0);
    close(p[1]);
}

/* accept4 flags; connect: 0 or -errno; wait's revents. */
static void io_net(void* arg) {
    (void)arg;
    uint16_t port;
    int l = tcp_listener(&port);
    CHECK_EQ(aco_rt_accept(l, NULL, NULL, 0, aco_rt_now() + 5 * MS), -ETIMEDOUT);
    int c = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    CHECK_EQ(aco_rt_connect(c, (struct sockaddr*)&a, sizeof a, aco_rt_now() + 1000 * MS), 0);
    struct sockaddr_in peer;
    socklen_t plen = sizeof peer;
    int s1 = aco_rt_accept(l, (struct sockaddr*)&peer, &plen, SOCK_NONBLOCK | SOCK_CLOEXEC, -1);
    CHECK_GE(s1, 0);
    CHECK_EQ(plen, sizeof peer);
    CHECK_EQ(peer.sin_family, AF_INET);
    CHECK(fcntl(s1, F_GETFL) & O_NONBLOCK);
    CHECK(fcntl(s1, F_GETFD) & FD_CLOEXEC);
    int c2 = socket(AF_INET, SOCK_STREAM, 0);
    CHECK_EQ(aco_rt_connect(c2, (struct sockaddr*)&a, sizeof a, -1), 0);
    int s2 = aco_rt_accept(l, NULL, NULL, 0, -1);
    CHECK_GE(s2, 0);
    CHECK_EQ(fcntl(s2, F_GETFL) & O_NONBLOCK, 0);
    CHECK_EQ(fcntl(s2, F_GETFD) & FD_CLOEXEC, 0);
    /* wait */
    CHECK_EQ(aco_rt_wait(s1, POLLIN, aco_rt_now() + 5 * MS), -ETIMEDOUT);
    CHECK(aco_rt_wait(s1, POLLOUT, -1) & POLLOUT);
    CHECK_EQ(aco_rt_send(c, "hi", 2, 0, -1), 2);
    CHECK(aco_rt_wait(s1, POLLIN, -1) & POLLIN);
    close(c);
    char b[4];
    CHECK_EQ(aco_rt_read(s1, b, sizeof b, -1), 2);
    CHECK_EQ(aco_rt_read(s1, b, sizeof b, -1), 0);      /* EOF */
    CHECK(aco_rt_wait(s1, POLLIN, -1) & (POLLIN | POLLHUP | POLLRDHUP));
    /* refused */
    close(l);
    int c3 = socket(AF_INET, SOCK_STREAM, 0);
    CHECK_EQ(aco_rt_connect(c3, (struct sockaddr*)&a, sizeof a, aco_rt_now() + 1000 * MS), -ECONNREFUSED);
    /* a pipe whose writer left: POLLHUP */
    int p[2];
    CHECK_EQ(pipe(p), 0);
    close(p[1]);
    CHECK(aco_rt_wait(p[0], POLLIN, -1) & POLLHUP);
    close(p[0]);
    close(c2); close(c3); close(s1); close(s2);
}

static void io_all(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    PROMISE(); PROMISE(); PROMISE(); PROMISE();
    in_co(io_read_some, NULL);
    PROMISE(); PROMISE();
    in_co(io_write_all, NULL);
    PROMISE(); PROMISE();
    in_co(io_partial, NULL);
    PROMISE();
    in_co(io_cancel, NULL);
    PROMISE();
    in_co(io_close, (void*)0);
    PROMISE();
    in_co(io_close, (void*)1);
    PROMISE();
    in_co(io_waitall, NULL);
    PROMISE(); PROMISE(); PROMISE(); PROMISE();
    in_co(io_sigpipe, NULL);
    PROMISE(); PROMISE(); PROMISE();
    in_co(io_identity, NULL);
    PROMISE();
    in_co(io_closed_behind, NULL);
    PROMISE(); PROMISE(); PROMISE();
    in_co(io_net, NULL);
    PROMISE();      /* -EPERM outside a co */
    char b[2];
    CHECK_EQ(aco_rt_read(0, b, 1, 0), -EPERM);
    CHECK_EQ(aco_rt_write(1, b, 1, 0), -EPERM);
    CHECK_EQ(aco_rt_wait(0, POLLIN, 0), -EPERM);
    (void)s;
}

/* aco_rt_close wakes a co of another thread's scheduler (a pool thread),
 * called from outside any scheduler. */
static void pool_close_waiter(void* arg) {
    (void)arg;
    char b[4];
    CHECK_EQ(aco_rt_read(io_fds[0], b, sizeof b, aco_rt_now() + 5000 * MS), -EBADF);
}
static void io_close_pool(void) {
    PROMISE();
    aco_rt_pool_opts_t po = {0};
    po.threads = 2;
    aco_rt_pool_t* p = aco_rt_pool_new(&po);
    CHECK(p != NULL);
    CHECK_EQ(pipe(io_fds), 0);
    aco_rt_co_t* c = aco_rt_pool_spawn(p, pool_close_waiter, NULL, NULL);
    CHECK(c != NULL);
    CHECK_EQ(aco_rt_detach(c), 0);
    usleep(30000);
    int64_t t0 = aco_rt_now();
    CHECK_EQ(aco_rt_close(io_fds[0]), 0);
    CHECK_EQ(aco_rt_pool_wait(p, ACO_RT_POOL_DRAIN, aco_rt_now() + 4000 * MS), 0);
    CHECK_LT(since(t0), 3000 * MS);
    aco_rt_pool_free(p);
    close(io_fds[1]);
}


/* ======================================================================== */
/* Sync                                                                     */
/* ======================================================================== */

/* Zero-initialisable, FIFO ("the longest waiter goes first"), unlock
 * "Hands m to the first waiter" (no overtaking), -EDEADLK, -EBUSY, -EPERM
 * for a non-holder and outside cos, deadlines never early. */
static aco_rt_mutex_t mx;       /* all zero: ready */
static int mx_order[8], mx_n;
static void mx_waiter(void* arg) {
    CHECK_EQ(aco_rt_mutex_lock(&mx, -1), 0);
    mx_order[mx_n++] = (int)(intptr_t)arg;
    CHECK_EQ(aco_rt_mutex_unlock(&mx), 0);
}
static void mx_body(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_mutex_unlock(&mx), -EPERM);     /* nobody holds it */
    CHECK_EQ(aco_rt_mutex_lock(&mx, -1), 0);
    CHECK_EQ(aco_rt_mutex_lock(&mx, -1), -EDEADLK);
    CHECK_EQ(aco_rt_mutex_trylock(&mx), -EBUSY);
    mx_n = 0;
    aco_rt_co_t* w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = aco_rt_spawn(NULL, mx_waiter, (void*)(intptr_t)i);
        CHECK_EQ(aco_rt_yield(), 0);        /* each queues in turn */
    }
    CHECK_EQ(aco_rt_mutex_unlock(&mx), 0);
    CHECK_EQ(aco_rt_mutex_trylock(&mx), -EBUSY);    /* handed over */
    for (int i = 0; i < 4; i++) CHECK_EQ(aco_rt_join(w[i], -1), 0);
    for (int i = 0; i < 4; i++) CHECK_EQ(mx_order[i], i);
    /* deadlines: past deadline on a free mutex takes it */
    CHECK_EQ(aco_rt_mutex_lock(&mx, 0), 0);
    aco_rt_co_t* h = aco_rt_spawn(NULL, mx_waiter, (void*)(intptr_t)9);
    CHECK_EQ(aco_rt_yield(), 0);
    CHECK_EQ(aco_rt_mutex_unlock(&mx), 0);
    CHECK_EQ(aco_rt_join(h, -1), 0);
}
/* The holder keeps mx until the timed locks are done (released, not a
 * sleep: a slow machine would outlast a sleep). */
static aco_rt_sem_t mx_release;
static void mx_holder(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_mutex_lock(&mx, -1), 0);
    CHECK_EQ(aco_rt_sem_wait(&mx_release, -1), 0);
    CHECK_EQ(aco_rt_mutex_unlock(&mx), 0);
}
static void mx_timed(void* arg) {
    (void)arg;
    aco_rt_sem_init(&mx_release, 0);
    aco_rt_co_t* h = aco_rt_spawn(NULL, mx_holder, NULL);
    CHECK_EQ(aco_rt_yield(), 0);
    CHECK_EQ(aco_rt_mutex_lock(&mx, 0), -ETIMEDOUT);
    CHECK_EQ(aco_rt_mutex_lock(&mx, -9), -ETIMEDOUT);
    int64_t t0 = aco_rt_now();
    CHECK_EQ(aco_rt_mutex_lock(&mx, aco_rt_now() + 10 * MS), -ETIMEDOUT);
    CHECK_GE(since(t0), 10 * MS);
    CHECK_EQ(aco_rt_mutex_unlock(&mx), -EPERM);     /* not the holder */
    aco_rt_sem_post(&mx_release);
    CHECK_EQ(aco_rt_mutex_lock(&mx, -1), 0);
    CHECK_EQ(aco_rt_mutex_unlock(&mx), 0);
    CHECK_EQ(aco_rt_join(h, -1), 0);
}
static void sync_mutex(aco_rt_sched_t* s, void* arg) {
    (void)s; (void)arg;
    memset(&mx, 0, sizeof mx);
    PROMISE(); PROMISE(); PROMISE(); PROMISE(); PROMISE(); PROMISE();
    in_co(mx_body, NULL);
    PROMISE(); PROMISE();
    in_co(mx_timed, NULL);
    PROMISE();
    CHECK_EQ(aco_rt_mutex_trylock(&mx), -EPERM);
    CHECK_EQ(aco_rt_mutex_unlock(&mx), -EPERM);
    CHECK_EQ(aco_rt_mutex_lock(&mx, 0), -EPERM);
    aco_rt_mutex_init(&mx);
}

/* cond: "Unlock m, wait for a signal, lock m again (also when the wait
 * failed)"; -EPERM (m not held); signal one (FIFO), broadcast all; a
 * signal with nobody waiting is not kept; signal from another thread. */
static aco_rt_cond_t cv;
static aco_rt_mutex_t cvm;
static int cv_order[8], cv_n, cv_flag;
static void cv_waiter(void* arg) {
    CHECK_EQ(aco_rt_mutex_lock(&cvm, -1), 0);
    CHECK_EQ(aco_rt_cond_wait(&cv, &cvm, -1), 0);
    cv_order[cv_n++] = (int)(intptr_t)arg;
    CHECK_EQ(aco_rt_mutex_unlock(&cvm), 0);
}
/* A signal with nobody waiting is not kept, and the thread may run before
 * the co reaches its wait (a loaded machine): it signals until the co woke. */
static atomic_int cv_thread_woke;
static void* cv_thread_signal(void* arg) {
    (void)arg;
    usleep(20000);
    while (!atomic_load(&cv_thread_woke)) {
        aco_rt_cond_signal(&cv);
        usleep(1000);
    }
    return NULL;
}
static void cv_body(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_cond_wait(&cv, &cvm, -1), -EPERM);
    aco_rt_cond_signal(&cv);            /* not kept */
    CHECK_EQ(aco_rt_mutex_lock(&cvm, -1), 0);
    int64_t t0 = aco_rt_now();
    CHECK_EQ(aco_rt_cond_wait(&cv, &cvm, aco_rt_now() + 10 * MS), -ETIMEDOUT);
    CHECK_GE(since(t0), 10 * MS);
    CHECK_EQ(aco_rt_mutex_unlock(&cvm), 0);         /* held again */
    cv_n = 0;
    aco_rt_co_t* w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = aco_rt_spawn(NULL, cv_waiter, (void*)(intptr_t)i);
        CHECK_EQ(aco_rt_yield(), 0);
    }
    aco_rt_cond_signal(&cv);
    CHECK_EQ(aco_rt_sleep(2 * MS), 0);
    CHECK_EQ(cv_n, 1);
    CHECK_EQ(cv_order[0], 0);
    aco_rt_cond_broadcast(&cv);
    for (int i = 0; i < 4; i++) CHECK_EQ(aco_rt_join(w[i], -1), 0);
    CHECK_EQ(cv_n, 4);
    for (int i = 0; i < 4; i++) CHECK_EQ(cv_order[i], i);
    /* a signal from a thread outside any scheduler */
    pthread_t th;
    CHECK_EQ(aco_rt_mutex_lock(&cvm, -1), 0);
    atomic_store(&cv_thread_woke, 0);
    CHECK_EQ(pthread_create(&th, NULL, cv_thread_signal, NULL), 0);
    CHECK_EQ(aco_rt_cond_wait(&cv, &cvm, aco_rt_now() + 3000 * MS), 0);
    atomic_store(&cv_thread_woke, 1);
    CHECK_EQ(aco_rt_mutex_unlock(&cvm), 0);
    CHECK_EQ(pthread_join(th, NULL), 0);
}
static void cv_cancelled(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_mutex_lock(&cvm, -1), 0);
    CHECK_EQ(aco_rt_cond_wait(&cv, &cvm, -1), -ECANCELED);
    CHECK_EQ(aco_rt_mutex_unlock(&cvm), 0);         /* held again */
}
static void cv_cancel(void* arg) {
    (void)arg;
    aco_rt_co_t* c = aco_rt_spawn(NULL, cv_cancelled, NULL);
    CHECK_EQ(aco_rt_sleep(2 * MS), 0);
    CHECK_EQ(aco_rt_mutex_lock(&cvm, -1), 0);      /* c waits, unlocked */
    CHECK_EQ(aco_rt_cancel(c), 0);
    CHECK_EQ(aco_rt_sleep(2 * MS), 0);
    CHECK_EQ(aco_rt_mutex_unlock(&cvm), 0);
    CHECK_EQ(aco_rt_join(c, -1), 0);
}
static void sync_cond(aco_rt_sched_t* s, void* arg) {
    (void)s; (void)arg;
    memset(&cv, 0, sizeof cv);
    memset(&cvm, 0, sizeof cvm);
    PROMISE(); PROMISE(); PROMISE(); PROMISE(); PROMISE(); PROMISE();
    in_co(cv_body, NULL);
    PROMISE();
    in_co(cv_cancel, NULL);
    (void)cv_flag;
}

/* sem and wait group. */
static aco_rt_sem_t sm;
static aco_rt_wg_t wg;
static int sm_order[4], sm_n;
static void sm_waiter(void* arg) {
    CHECK_EQ(aco_rt_sem_wait(&sm, -1), 0);
    sm_order[sm_n++] = (int)(intptr_t)arg;
}
static void* sm_poster(void* arg) {
    (void)arg;
    usleep(10000);
    aco_rt_sem_post(&sm);
    return NULL;
}
static void wg_member(void* arg) {
    CHECK_EQ(aco_rt_sleep((int64_t)(intptr_t)arg * MS), 0);
    CHECK_EQ(aco_rt_wg_done(&wg), 0);
}
static void sm_body(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_sem_trywait(&sm), -EAGAIN);     /* zero: none */
    aco_rt_sem_init(&sm, 2);
    CHECK_EQ(aco_rt_sem_trywait(&sm), 0);
    CHECK_EQ(aco_rt_sem_wait(&sm, 0), 0);            /* past: no wait needed */
    CHECK_EQ(aco_rt_sem_wait(&sm, 0), -ETIMEDOUT);
    int64_t t0 = aco_rt_now();
    CHECK_EQ(aco_rt_sem_wait(&sm, aco_rt_now() + 10 * MS), -ETIMEDOUT);
    CHECK_GE(since(t0), 10 * MS);
    sm_n = 0;
    aco_rt_co_t* w[3];
    for (int i = 0; i < 3; i++) {
        w[i] = aco_rt_spawn(NULL, sm_waiter, (void*)(intptr_t)i);
        CHECK_EQ(aco_rt_yield(), 0);
    }
    for (int i = 0; i < 3; i++) aco_rt_sem_post(&sm);
    for (int i = 0; i < 3; i++) CHECK_EQ(aco_rt_join(w[i], -1), 0);
    for (int i = 0; i < 3; i++) CHECK_EQ(sm_order[i], i);
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, sm_poster, NULL), 0);
    CHECK_EQ(aco_rt_sem_wait(&sm, aco_rt_now() + 3000 * MS), 0);
    CHECK_EQ(pthread_join(th, NULL), 0);
    /* wait group */
    CHECK_EQ(aco_rt_wg_wait(&wg, 0), 0);         /* zero already */
    CHECK_EQ(aco_rt_wg_done(&wg), -EINVAL);
    CHECK_EQ(aco_rt_wg_add(&wg, 3), 0);
    CHECK_EQ(aco_rt_wg_add(&wg, -4), -EINVAL);
    CHECK_EQ(aco_rt_wg_wait(&wg, aco_rt_now() + 2 * MS), -ETIMEDOUT);
    for (int i = 0; i < 3; i++) CHECK_EQ(aco_rt_detach(aco_rt_spawn(NULL, wg_member, (void*)(intptr_t)(i + 1))), 0);
    t0 = aco_rt_now();
    CHECK_EQ(aco_rt_wg_wait(&wg, -1), 0);
    CHECK_GE(since(t0), 3 * MS - MS);
    CHECK_EQ(aco_rt_wg_add(&wg, -1), -EINVAL);      /* at 0, nothing changed */
    CHECK_EQ(aco_rt_wg_add(&wg, 2), 0);
    CHECK_EQ(aco_rt_wg_add(&wg, -2), 0);
    CHECK_EQ(aco_rt_wg_wait(&wg, 0), 0);
}
static void sync_sem_wg(aco_rt_sched_t* s, void* arg) {
    (void)s; (void)arg;
    memset(&sm, 0, sizeof sm);
    memset(&wg, 0, sizeof wg);
    PROMISE(); PROMISE(); PROMISE(); PROMISE(); PROMISE(); PROMISE(); PROMISE(); PROMISE();
    in_co(sm_body, NULL);
}

/* ======================================================================== */
/* Channels                                                                 */
/* ======================================================================== */

static aco_rt_chan_t* ch;
static int ch_got;
static void ch_recv_one(void* arg) {
    (void)arg;
    int v;
    CHECK_EQ(aco_rt_chan_recv(ch, &v, -1), 0);
    ch_got = v;
}
static void ch_closed_sender(void* arg) {
    int v = 5;
    CHECK_EQ(aco_rt_chan_send((aco_rt_chan_t*)arg, &v, -1), -EPIPE);
}
static void ch_closed_receiver(void* arg) {
    int v;
    CHECK_EQ(aco_rt_chan_recv((aco_rt_chan_t*)arg, &v, -1), -EPIPE);
}
static void ch_body(void* arg) {
    (void)arg;
    errno = 0;
    CHECK(aco_rt_chan_new(0, 4) == NULL);
    CHECK_EQ(errno, EINVAL);
    /* buffered FIFO, len, full, empty */
    ch = aco_rt_chan_new(sizeof(int), 3);
    for (int i = 0; i < 3; i++) CHECK_EQ(aco_rt_chan_send(ch, &i, 0), 0);
    CHECK_EQ(aco_rt_chan_len(ch), 3);
    int v = 99;
    int64_t t0 = aco_rt_now();
    CHECK_EQ(aco_rt_chan_send(ch, &v, aco_rt_now() + 5 * MS), -ETIMEDOUT);
    CHECK_GE(since(t0), 5 * MS);
    CHECK_EQ(aco_rt_chan_len(ch), 3);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(aco_rt_chan_recv(ch, &v, 0), 0);
        CHECK_EQ(v, i);
    }
    CHECK_EQ(aco_rt_chan_recv(ch, &v, 0), -ETIMEDOUT);
    CHECK_EQ(aco_rt_chan_recv(ch, &v, -2), -ETIMEDOUT);
    /* close: drain, then -EPIPE; send -EPIPE; close again -EPIPE */
    v = 7;
    CHECK_EQ(aco_rt_chan_send(ch, &v, -1), 0);
    CHECK_EQ(aco_rt_chan_close(ch), 0);
    CHECK_EQ(aco_rt_chan_close(ch), -EPIPE);
    CHECK_EQ(aco_rt_chan_send(ch, &v, -1), -EPIPE);
    v = 0;
    CHECK_EQ(aco_rt_chan_recv(ch, &v, -1), 0);
    CHECK_EQ(v, 7);
    CHECK_EQ(aco_rt_chan_recv(ch, &v, -1), -EPIPE);
    CHECK_EQ(aco_rt_chan_free(ch), 0);
    /* close wakes waiting senders and receivers with -EPIPE */
    aco_rt_chan_t* r0 = aco_rt_chan_new(sizeof(int), 0);
    aco_rt_chan_t* r1 = aco_rt_chan_new(sizeof(int), 0);
    aco_rt_co_t* a = aco_rt_spawn(NULL, ch_closed_sender, r0);
    aco_rt_co_t* b = aco_rt_spawn(NULL, ch_closed_receiver, r1);
    CHECK_EQ(aco_rt_yield(), 0);
    /* free with a waiter: -EBUSY, nothing freed */
    CHECK_EQ(aco_rt_chan_free(r0), -EBUSY);
    CHECK_EQ(aco_rt_chan_free(r1), -EBUSY);
    CHECK_EQ(aco_rt_chan_close(r0), 0);
    CHECK_EQ(aco_rt_chan_close(r1), 0);
    CHECK_EQ(aco_rt_join(a, -1), 0);
    CHECK_EQ(aco_rt_join(b, -1), 0);
    CHECK_EQ(aco_rt_chan_free(r0), 0);
    CHECK_EQ(aco_rt_chan_free(r1), 0);
    /* rendezvous: a send without a receiver times out and leaves nothing */
    ch = aco_rt_chan_new(sizeof(int), 0);
    v = 3;
    CHECK_EQ(aco_rt_chan_send(ch, &v, aco_rt_now() + 3 * MS), -ETIMEDOUT);
    CHECK_EQ(aco_rt_chan_len(ch), 0);
    CHECK_EQ(aco_rt_chan_recv(ch, &v, aco_rt_now() + 3 * MS), -ETIMEDOUT);
    /* "send returns once a receiver has the element" */
    ch_got = 0;
    aco_rt_co_t* r = aco_rt_spawn(NULL, ch_recv_one, NULL);
    v = 11;
    CHECK_EQ(aco_rt_chan_send(ch, &v, -1), 0);
    CHECK_EQ(ch_got, 11);
    CHECK_EQ(aco_rt_join(r, -1), 0);
    CHECK_EQ(aco_rt_chan_free(ch), 0);
    /* big elements through a heap mailbox, buffers on the share stack */
    aco_rt_chan_t* big = aco_rt_chan_new(8192, 1);
    char e[8192], f[8192];
    memset(e, 'q', sizeof e);
    CHECK_EQ(aco_rt_chan_send(big, e, -1), 0);
    CHECK_EQ(aco_rt_yield(), 0);
    CHECK_EQ(aco_rt_chan_recv(big, f, -1), 0);
    CHECK(memcmp(e, f, sizeof e) == 0);
    CHECK_EQ(aco_rt_chan_free(big), 0);
}

/* select: "in case order when several can now; else the first to become
 * possible"; closed channel: index, *err -EPIPE, else 0; -EINVAL (n < 1 or
 * a bad case); -ETIMEDOUT. */
static aco_rt_chan_t* sc[3];
static void sc_late_sender(void* arg) {
    CHECK_EQ(aco_rt_sleep(3 * MS), 0);
    int v = 77;
    CHECK_EQ(aco_rt_chan_send(sc[(intptr_t)arg], &v, -1), 0);
}
static void sc_body(void* arg) {
    (void)arg;
    for (int i = 0; i < 3; i++) sc[i] = aco_rt_chan_new(sizeof(int), 2);
    int a = 1, b = 2, x = 0, y = 0, err = 123;
    CHECK_EQ(aco_rt_chan_send(sc[1], &a, -1), 0);
    CHECK_EQ(aco_rt_chan_send(sc[2], &b, -1), 0);
    aco_rt_case_t cs[3] = {{sc[0], ACO_RT_RECV, &x}, {sc[2], ACO_RT_RECV, &y}, {sc[1], ACO_RT_RECV, &x}};
    CHECK_EQ(aco_rt_chan_select(cs, 3, &err, -1), 1);
    CHECK_EQ(err, 0);
    CHECK_EQ(y, 2);
    CHECK_EQ(aco_rt_chan_select(cs, 3, &err, -1), 2);
    CHECK_EQ(x, 1);
    CHECK_EQ(aco_rt_chan_select(cs, 3, &err, aco_rt_now() + 3 * MS), -ETIMEDOUT);
    CHECK_EQ(aco_rt_chan_select(cs, 3, NULL, 0), -ETIMEDOUT);
    CHECK_EQ(aco_rt_chan_select(cs, 0, &err, -1), -EINVAL);
    aco_rt_case_t bad[2] = {{sc[0], ACO_RT_RECV, &x}, {sc[1], 0, &x}};
    CHECK_EQ(aco_rt_chan_select(bad, 2, &err, -1), -EINVAL);
    aco_rt_case_t badch = {NULL, ACO_RT_RECV, &x};
    CHECK_EQ(aco_rt_chan_select(&badch, 1, &err, -1), -EINVAL);
    /* the first to become possible */
    aco_rt_co_t* c = aco_rt_spawn(NULL, sc_late_sender, (void*)2);
    CHECK_EQ(aco_rt_chan_select(cs, 3, &err, -1), 1);     /* cs[1] is sc[2] */
    CHECK_EQ(y, 77);
    CHECK_EQ(aco_rt_join(c, -1), 0);
    /* send cases: in case order; a full channel is skipped */
    CHECK_EQ(aco_rt_chan_send(sc[0], &a, -1), 0);
    CHECK_EQ(aco_rt_chan_send(sc[0], &a, -1), 0);
    int s1 = 41, s2 = 42;
    aco_rt_case_t ss[2] = {{sc[0], ACO_RT_SEND, &s1}, {sc[1], ACO_RT_SEND, &s2}};
    CHECK_EQ(aco_rt_chan_select(ss, 2, &err, -1), 1);
    CHECK_EQ(aco_rt_chan_recv(sc[1], &x, 0), 0);
    CHECK_EQ(x, 42);
    /* a closed channel's case can go on and fails */
    CHECK_EQ(aco_rt_chan_close(sc[2]), 0);
    aco_rt_case_t cc[2] = {{sc[1], ACO_RT_RECV, &x}, {sc[2], ACO_RT_RECV, &x}};
    err = 0;
    CHECK_EQ(aco_rt_chan_select(cc, 2, &err, -1), 1);
    CHECK_EQ(err, -EPIPE);
    aco_rt_case_t cs2 = {sc[2], ACO_RT_SEND, &s1};
    err = 0;
    CHECK_EQ(aco_rt_chan_select(&cs2, 1, &err, -1), 0);
    CHECK_EQ(err, -EPIPE);
    CHECK_EQ(aco_rt_chan_select(&cs2, 1, NULL, -1), 0);   /* err may be NULL */
    for (int i = 0; i < 2; i++) CHECK_EQ(aco_rt_chan_recv(sc[0], &x, 0), 0);
    for (int i = 0; i < 3; i++) CHECK_EQ(aco_rt_chan_free(sc[i]), 0);
}
static void chans(aco_rt_sched_t* s, void* arg) {
    (void)s; (void)arg;
    PROMISE(); PROMISE(); PROMISE(); PROMISE(); PROMISE(); PROMISE(); PROMISE();
    PROMISE(); PROMISE(); PROMISE(); PROMISE();
    in_co(ch_body, NULL);
    PROMISE(); PROMISE(); PROMISE(); PROMISE(); PROMISE(); PROMISE(); PROMISE();
    in_co(sc_body, NULL);
    PROMISE();      /* -EPERM outside a co for blocking calls */
    aco_rt_chan_t* c = aco_rt_chan_new(4, 1);
    int v = 0;
    CHECK_EQ(aco_rt_chan_send(c, &v, 0), -EPERM);
    CHECK_EQ(aco_rt_chan_recv(c, &v, 0), -EPERM);
    CHECK_EQ(aco_rt_chan_free(c), 0);
}


/* ======================================================================== */
/* Pools                                                                    */
/* ======================================================================== */

static aco_rt_pool_t* PL;
static atomic_int pl_done, pl_cancelled;
static void pl_stay(void* arg) {
    (void)arg;
    aco_rt_sched_t* home = aco_rt_sched_current();
    CHECK(home != NULL);
    for (int i = 0; i < 20; i++) {
        CHECK_EQ(aco_rt_sleep(100000), 0);
        CHECK_EQ(aco_rt_yield(), 0);
        CHECK(aco_rt_sched_current() == home);      /* stays on its thread */
    }
    atomic_fetch_add(&pl_done, 1);
}
static void pl_forever(void* arg) {
    (void)arg;
    int r = aco_rt_sleep_until(-1);
    CHECK_EQ(r, -ECANCELED);
    CHECK_EQ(aco_rt_yield(), -ECANCELED);
    atomic_fetch_add(&pl_cancelled, 1);
}
static void pl_wait_inside(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_pool_wait(PL, ACO_RT_POOL_DRAIN, 0), -EDEADLK);
}
static aco_rt_sched_t* pl_where[2];
static aco_rt_sem_t pl_hold;
static void pl_where_am_i(void* arg) {
    __atomic_store_n(&pl_where[(intptr_t)arg], aco_rt_sched_current(), __ATOMIC_RELEASE);
    CHECK_EQ(aco_rt_sem_wait(&pl_hold, aco_rt_in_ms(100000)), 0);
}
static void pools(void) {
    PROMISE();
    aco_rt_pool_opts_t po = {0};
    po.threads = 2;
    po.sched.backend = 77;
    errno = 0;
    CHECK(aco_rt_pool_new(&po) == NULL);
    CHECK_EQ(errno, EINVAL);
    int bs[8];
    int nb = test_backends(bs, 8);
    for (int b = 0; b < nb; b++) {
        test_backend_label = test_backend_str(bs[b]);
        po.sched.backend = bs[b];
        PL = aco_rt_pool_new(&po);
        CHECK(PL != NULL);
        PROMISE();
        CHECK_EQ(aco_rt_pool_threads(PL), 2);
        CHECK(aco_rt_pool_sched(PL, 0) != NULL);
        CHECK(aco_rt_pool_sched(PL, 1) != NULL);
        CHECK(aco_rt_pool_sched(PL, 0) != aco_rt_pool_sched(PL, 1));
        CHECK(aco_rt_pool_sched(PL, 2) == NULL);
        CHECK_EQ(strcmp(aco_rt_backend_name(aco_rt_pool_sched(PL, 0)), test_backend_label), 0);
        /* from outside: to the thread with the fewest cos */
        PROMISE();
        memset(&pl_hold, 0, sizeof pl_hold);
        for (int i = 0; i < 2; i++) __atomic_store_n(&pl_where[i], NULL, __ATOMIC_RELEASE);
        for (int i = 0; i < 2; i++) {
            CHECK_EQ(aco_rt_detach(aco_rt_pool_spawn(PL, pl_where_am_i, (void*)(intptr_t)i, NULL)), 0);
            /* it runs (and stays, held) before the next comes: waited
             * for, not a time (a loaded machine runs the pool late) */
            for (int k = 0; __atomic_load_n(&pl_where[i], __ATOMIC_ACQUIRE) == NULL; k++) {
                CHECK_LT(k, 60000);     /* a minute: the pool never ran it */
                usleep(1000);
            }
        }
        aco_rt_sched_t* w0 = __atomic_load_n(&pl_where[0], __ATOMIC_ACQUIRE);
        aco_rt_sched_t* w1 = __atomic_load_n(&pl_where[1], __ATOMIC_ACQUIRE);
        CHECK(w0 != NULL && w1 != NULL);
        CHECK(w0 != w1);
        aco_rt_sem_post(&pl_hold);
        aco_rt_sem_post(&pl_hold);
        /* drain; "Once started, a co stays on its thread" */
        PROMISE(); PROMISE();
        atomic_store(&pl_done, 0);
        for (int i = 0; i < 20; i++) CHECK_EQ(aco_rt_detach(aco_rt_pool_spawn(PL, pl_stay, NULL, NULL)), 0);
        CHECK_EQ(aco_rt_pool_wait(PL, ACO_RT_POOL_DRAIN, -1), 0);
        CHECK_EQ(atomic_load(&pl_done), 20);
        /* -ETIMEDOUT: they go on; CANCEL */
        PROMISE(); PROMISE();
        atomic_store(&pl_cancelled, 0);
        for (int i = 0; i < 6; i++) CHECK_EQ(aco_rt_detach(aco_rt_pool_spawn(PL, pl_forever, NULL, NULL)), 0);
        int64_t t0 = aco_rt_now();
        CHECK_EQ(aco_rt_pool_wait(PL, ACO_RT_POOL_DRAIN, aco_rt_now() + 20 * MS), -ETIMEDOUT);
        CHECK_GE(since(t0), 20 * MS);
        CHECK_EQ(aco_rt_pool_wait(PL, ACO_RT_POOL_DRAIN, 0), -ETIMEDOUT);
        CHECK_EQ(atomic_load(&pl_cancelled), 0);
        CHECK_EQ(aco_rt_pool_wait(PL, ACO_RT_POOL_CANCEL, aco_rt_now() + 5000 * MS), 0);
        CHECK_EQ(atomic_load(&pl_cancelled), 6);
        /* "cos spawned later are not" cancelled */
        PROMISE();
        atomic_store(&pl_done, 0);
        CHECK_EQ(aco_rt_detach(aco_rt_pool_spawn(PL, pl_stay, NULL, NULL)), 0);
        CHECK_EQ(aco_rt_pool_wait(PL, ACO_RT_POOL_DRAIN, -1), 0);
        CHECK_EQ(atomic_load(&pl_done), 1);
        /* -EDEADLK from one of its threads; -EINVAL for a bad how */
        PROMISE(); PROMISE();
        CHECK_EQ(aco_rt_detach(aco_rt_pool_spawn(PL, pl_wait_inside, NULL, NULL)), 0);
        CHECK_EQ(aco_rt_pool_wait(PL, ACO_RT_POOL_DRAIN, -1), 0);
        CHECK_EQ(aco_rt_pool_wait(PL, 7, -1), -EINVAL);
        /* "0" when every co has finished: also with CANCEL and a deadline
         * that has passed (nothing to wait for), and the cancel hits no co
         * spawned after */
        PROMISE();
        for (int i = 0; i < 3; i++) {
            CHECK_EQ(aco_rt_pool_wait(PL, ACO_RT_POOL_CANCEL, 0), 0);
            CHECK_EQ(aco_rt_pool_wait(PL, ACO_RT_POOL_CANCEL, -5), 0);
        }
        atomic_store(&pl_done, 0);
        CHECK_EQ(aco_rt_detach(aco_rt_pool_spawn(PL, pl_stay, NULL, NULL)), 0);
        CHECK_EQ(aco_rt_pool_wait(PL, ACO_RT_POOL_DRAIN, -1), 0);
        CHECK_EQ(atomic_load(&pl_done), 1);
        /* free with cos still there: destroyed where they stand */
        PROMISE();
        for (int i = 0; i < 4; i++) CHECK_EQ(aco_rt_detach(aco_rt_pool_spawn(PL, pl_forever, NULL, NULL)), 0);
        usleep(10000);
        aco_rt_pool_free(PL);
        CHECK_EQ(atomic_load(&pl_cancelled), 6);
        test_backend_label = "";
    }
}

/* ======================================================================== */
/* Groups                                                                   */
/* ======================================================================== */

static aco_rt_group_t* G;
static atomic_int gr_ended, gr_cancelled;
static void gr_member(void* arg) {
    int r = aco_rt_sleep((int64_t)(intptr_t)arg * MS);
    if (r == -ECANCELED) atomic_fetch_add(&gr_cancelled, 1);
    atomic_fetch_add(&gr_ended, 1);
}
static void gr_self_join(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_group_join(G, -1), -EDEADLK);
}
static void gr_spawner(void* arg) {
    (void)arg;
    /* spawns more members while the group is cancelled */
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(aco_rt_group_spawn(G, gr_member, (void*)(intptr_t)100000, NULL), 0);
        aco_rt_sleep(1 * MS);
    }
    aco_rt_sleep(100000 * MS);
    atomic_fetch_add(&gr_ended, 1);
}
static void gr_body(void* arg) {
    (void)arg;
    errno = 0;
    CHECK(aco_rt_group_sched(G) == S);
    CHECK_EQ(aco_rt_group_size(G), 0);
    CHECK_EQ(aco_rt_group_join(G, 0), 0);       /* empty: at once */
    atomic_store(&gr_ended, 0);
    for (int i = 0; i < 5; i++) CHECK_EQ(aco_rt_group_spawn(G, gr_member, (void*)(intptr_t)(2 + i), NULL), 0);
    CHECK_EQ(aco_rt_group_size(G), 5);
    CHECK_EQ(aco_rt_group_free(G), -EBUSY);
    int64_t t0 = aco_rt_now();
    CHECK_EQ(aco_rt_group_join(G, aco_rt_now() + 1 * MS), -ETIMEDOUT);
    CHECK_GE(since(t0), 1 * MS);
    CHECK_EQ(aco_rt_group_join(G, -1), 0);
    CHECK_EQ(atomic_load(&gr_ended), 5);
    CHECK_EQ(aco_rt_group_size(G), 0);
    /* a member joining its own group */
    CHECK_EQ(aco_rt_group_spawn(G, gr_self_join, NULL, NULL), 0);
    CHECK_EQ(aco_rt_group_join(G, -1), 0);
    /* cancel: every member, and those spawned until it is empty */
    atomic_store(&gr_ended, 0);
    atomic_store(&gr_cancelled, 0);
    for (int i = 0; i < 3; i++) CHECK_EQ(aco_rt_group_spawn(G, gr_member, (void*)(intptr_t)100000, NULL), 0);
    CHECK_EQ(aco_rt_group_spawn(G, gr_spawner, NULL, NULL), 0);
    CHECK_EQ(aco_rt_yield(), 0);
    t0 = aco_rt_now();
    CHECK_EQ(aco_rt_group_cancel(G, aco_rt_now() + 3000 * MS), 0);
    CHECK_LT(since(t0), 2000 * MS);
    CHECK_EQ(aco_rt_group_size(G), 0);
    CHECK_GE(atomic_load(&gr_cancelled), 4);
    /* "On a group that is empty it cancels nothing, now or later" */
    CHECK_EQ(aco_rt_group_cancel(G, 0), 0);
    CHECK_EQ(aco_rt_group_cancel(G, aco_rt_now() + 1 * MS), 0);
    atomic_store(&gr_cancelled, 0);
    atomic_store(&gr_ended, 0);
    CHECK_EQ(aco_rt_group_spawn(G, gr_member, (void*)(intptr_t)1, NULL), 0);
    CHECK_EQ(aco_rt_group_join(G, -1), 0);
    CHECK_EQ(atomic_load(&gr_ended), 1);
    CHECK_EQ(atomic_load(&gr_cancelled), 0);
    CHECK_EQ(aco_rt_group_free(G), 0);
}
static void* gr_remote_spawn(void* arg) {
    for (int i = 0; i < 4; i++) CHECK_EQ(aco_rt_group_spawn((aco_rt_group_t*)arg, gr_member, (void*)(intptr_t)1, NULL), 0);
    return NULL;
}
static void gr_pool_joiner(void* arg) {
    aco_rt_group_t* g = arg;
    CHECK_EQ(aco_rt_group_join(g, aco_rt_now() + 5000 * MS), 0);
    CHECK_EQ(aco_rt_group_size(g), 0);
}
static void groups(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    PROMISE(); PROMISE(); PROMISE(); PROMISE(); PROMISE(); PROMISE(); PROMISE(); PROMISE();
    PROMISE(); PROMISE(); PROMISE();
    G = aco_rt_group_new(NULL);
    CHECK(G != NULL);
    in_co(gr_body, NULL);
    PROMISE();
    aco_rt_group_t* g = aco_rt_group_new(s);
    CHECK_EQ(aco_rt_group_join(g, 0), -EPERM);
    CHECK_EQ(aco_rt_group_free(g), 0);
}
static void* gr_no_sched(void* arg) {
    (void)arg;
    errno = 0;
    CHECK(aco_rt_group_new(NULL) == NULL);
    CHECK_EQ(errno, EPERM);
    return NULL;
}
static void groups_pool(void) {
    PROMISE();
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, gr_no_sched, NULL), 0);
    CHECK_EQ(pthread_join(th, NULL), 0);
    PROMISE();      /* a pool group: spawn from any thread, join from a co */
    aco_rt_pool_opts_t po = {0};
    po.threads = 2;
    aco_rt_pool_t* p = aco_rt_pool_new(&po);
    aco_rt_group_t* g = aco_rt_pool_group_new(p);
    CHECK(g != NULL);
    aco_rt_sched_t* gs = aco_rt_group_sched(g);
    CHECK(gs == aco_rt_pool_sched(p, 0) || gs == aco_rt_pool_sched(p, 1));
    atomic_store(&gr_ended, 0);
    CHECK_EQ(pthread_create(&th, NULL, gr_remote_spawn, g), 0);
    CHECK_EQ(pthread_join(th, NULL), 0);
    aco_rt_sched_t* other = aco_rt_pool_sched(p, gs == aco_rt_pool_sched(p, 0) ? 1 : 0);
    aco_rt_co_t* j = aco_rt_spawn(other, gr_pool_joiner, g);
    CHECK_EQ(aco_rt_detach(j), 0);
    CHECK_EQ(aco_rt_pool_wait(p, ACO_RT_POOL_DRAIN, aco_rt_now() + 5000 * MS), 0);
    CHECK_EQ(atomic_load(&gr_ended), 4);
    CHECK_EQ(aco_rt_group_free(g), 0);
    aco_rt_pool_free(p);
}

/* ======================================================================== */
/* Seeing inside                                                            */
/* ======================================================================== */

/* Parked (with a deadline: an armed timer) until the checks are done, not
 * for a time the 20 ms sleep below must beat. */
static aco_rt_sem_t st_release;
static void st_sleeper(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_sem_wait(&st_release, aco_rt_in_ms(100000)), 0);
}
static void st_body(void* arg) {
    (void)arg;
    aco_rt_stats_t a, b;
    aco_rt_sem_init(&st_release, 0);
    aco_rt_stats(NULL, &a);
    aco_rt_spawn_opts_t o = {0};
    o.name = "napper-xyz";
    aco_rt_co_t* c = aco_rt_spawn2(NULL, st_sleeper, NULL, &o);
    aco_rt_co_t* r = aco_rt_spawn(NULL, nop, NULL);
    aco_rt_stats(NULL, &b);
    CHECK_EQ(b.spawned, a.spawned + 2);
    CHECK_EQ(b.cos_alive, a.cos_alive + 2);
    CHECK_GE(b.cos_ready, 2);
    /* long enough that the scheduler must wait in the backend (a slow
     * build may take a few ms to come round) */
    CHECK_EQ(aco_rt_sleep(20 * MS), 0);
    aco_rt_stats(NULL, &b);
    CHECK_EQ(b.cos_alive, a.cos_alive + 1);         /* r finished */
    CHECK_GE(b.cos_parked, 1);
    CHECK_GE(b.timers, 1);
    CHECK_GT(b.switches, a.switches);
    CHECK_GT(b.polls, a.polls);
    /* dump: one line per co, with its name */
    char path[] = "/tmp/test_header_dumpXXXXXX";
    int fd = mkstemp(path);
    CHECK_GE(fd, 0);
    unlink(path);
    aco_rt_dump(NULL, fd);
    char buf[8192] = {0};
    CHECK_GT(pread(fd, buf, sizeof buf - 1, 0), 0);
    close(fd);
    CHECK(strstr(buf, "napper-xyz") != NULL);
    int lines = 0;
    for (char* q = buf; *q; q++) lines += *q == '\n';
    CHECK_GE(lines, 2);
    aco_rt_sem_post(&st_release);
    CHECK_EQ(aco_rt_join(c, -1), 0);
    CHECK_EQ(aco_rt_join(r, -1), 0);
}
static void stats_dump(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    PROMISE(); PROMISE(); PROMISE(); PROMISE(); PROMISE(); PROMISE(); PROMISE(); PROMISE();
    in_co(st_body, NULL);
    aco_rt_stats_t a;
    aco_rt_stats(s, &a);
    CHECK_EQ(a.cos_alive, 0);
    CHECK_EQ(a.cos_parked, 0);
    CHECK_EQ(a.cos_ready, 0);
    CHECK_EQ(a.io_inflight, 0);
}

/* MAIN-BEGIN */
typedef void (*body_fn)(aco_rt_sched_t*, void*);
static void with_S(aco_rt_sched_t* s, void* arg) {
    S = s;
    ((body_fn)(uintptr_t)arg)(s, NULL);
}
int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    keys_max();
    sched_new_errors();
    sched_free_checks();
    keys_free_and_thread();
    io_close_pool();
    pools();
    groups_pool();
    struct { const char* name; void (*body)(aco_rt_sched_t*, void*); } parts[] = {
        {"sched EBUSY", sched_ebusy}, {"run EPERM", sched_run_eperm},
        {"EDEADLK", sched_edeadlk}, {"stop", sched_stop_checks},
        {"spawn remote", co_spawn_remote}, {"order", co_order}, {"join", co_join},
        {"cancel", co_cancel}, {"private", co_private}, {"spawn2", co_spawn2},
        {"sleep", co_sleep}, {"keys dtor", keys_dtor}, {"keys delete", keys_delete},
        {"timers", timers}, {"io", io_all},
        {"mutex", sync_mutex}, {"cond", sync_cond}, {"sem wg", sync_sem_wg},
        {"chan", chans}, {"groups", groups}, {"stats dump", stats_dump},
    };
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        int64_t t0 = aco_rt_now();
        test_on_backends(NULL, with_S, (void*)(uintptr_t)parts[i].body);
        printf("  %-14s %4lld ms\n", parts[i].name, (long long)(since(t0) / MS));
    }
    printf("test_header: %d promises checked\n", checks);
    return 0;
}
