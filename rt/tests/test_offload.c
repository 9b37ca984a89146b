/* test_offload.c - aco_rt_offload: blocking work on helper threads while
 * the co parks.  Results, queueing past the thread limit, the thread running
 * other cos meanwhile, deadline and cancel (drop exactly once, after fn
 * ended or instead of it), a full queue, the share-stack rule, -EPERM,
 * cos of a pool's threads, a co destroyed while it waits, calls in the
 * child of a fork while the parent's helper idles, and none of the
 * parent's queued work running there; -ENOSYS in the
 * single-thread build.
 */
#include "rt_test.h"

#include <pthread.h>
#include <sys/mman.h>
#include <time.h>

static void nap_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {}
}

/* ------------------------------------------------------------------------ */
/* A job whose steps the test watches (heap: the share-stack rule)          */
/* ------------------------------------------------------------------------ */

typedef struct {
    int   sleep_ms;             /* fn sleeps this long (the thread, not a co) */
    int   hold;                 /* atomic: fn waits while it is non-zero */
    int   hold_max_ms;          /* (non-zero: for at most this long) */
    int   started, ended;       /* atomic: fn's steps */
    int   drops;                /* atomic: drop calls */
    int   drop_saw_end;         /* drop came after fn's end */
    void* drop_result;
    long  value;
} job_t;

static job_t* job_new(int sleep_ms) {
    job_t* j = calloc(1, sizeof(*j));
    CHECK(j != NULL);
    j->sleep_ms = sleep_ms;
    return j;
}

static void* job_fn(void* arg) {
    job_t* j = arg;
    __atomic_store_n(&j->started, 1, __ATOMIC_SEQ_CST);
    for (int ms = 0; __atomic_load_n(&j->hold, __ATOMIC_SEQ_CST); ms++) {
        if (j->hold_max_ms && ms >= j->hold_max_ms) break;
        nap_ms(1);
    }
    if (j->sleep_ms) nap_ms(j->sleep_ms);
    __atomic_store_n(&j->ended, 1, __ATOMIC_SEQ_CST);
    return (void*)(j->value + 1);
}

static void job_drop(void* arg, void* result) {
    job_t* j = arg;
    j->drop_saw_end = __atomic_load_n(&j->ended, __ATOMIC_SEQ_CST);
    j->drop_result = result;
    __atomic_fetch_add(&j->drops, 1, __ATOMIC_SEQ_CST);
}

static int atomic_get(int* p) { return __atomic_load_n(p, __ATOMIC_SEQ_CST); }

/* Wait (in a co) until *p == v, for up to 5 s. */
static void co_wait_eq(int* p, int v) {
    for (int i = 0; i < 5000 && atomic_get(p) != v; i++) aco_rt_sleep(MS);
    CHECK_EQ(atomic_get(p), v);
}

#ifndef ACO_RT_NO_THREADS

/* ------------------------------------------------------------------------ */
/* The result; the thread runs other cos while fn blocks                    */
/* ------------------------------------------------------------------------ */

static long ticks;
static int ticking;
static job_t* tick_job;         /* let go once 50 ticks are in */

static void ticker(void* arg) {
    (void)arg;
    while (__atomic_load_n(&ticking, __ATOMIC_SEQ_CST)) {
        ticks++;
        if (ticks >= 50 && tick_job) __atomic_store_n(&tick_job->hold, 0, __ATOMIC_SEQ_CST);
        aco_rt_sleep(MS);
    }
}

static void result_co(void* arg) {
    (void)arg;
    job_t* j = job_new(300);
    j->value = 41;
    /* fn also waits for the ticker's 50th tick (a loaded machine may tick
     * far slower than every ms), for at most 20 s */
    j->hold = 1;
    j->hold_max_ms = 20000;
    void* res = NULL;
    ticks = 0;
    tick_job = j;
    int64_t t0 = aco_rt_now();
    CHECK_EQ(aco_rt_offload(job_fn, j, job_drop, &res, -1), 0);
    int64_t took = aco_rt_now() - t0;
    tick_job = NULL;
    CHECK_EQ((long)res, 42);
    CHECK_GE(took, 300 * MS);
    /* the ticker co ran while fn blocked: far more than the 0-1 ticks a
     * blocked thread would allow */
    CHECK_GE(ticks, 50);
    CHECK_EQ(atomic_get(&j->drops), 0);
    /* result may be NULL: fn's result is then not wanted */
    j->sleep_ms = 0;
    CHECK_EQ(aco_rt_offload(job_fn, j, job_drop, NULL, aco_rt_in_ms(5000)), 0);
    __atomic_store_n(&ticking, 0, __ATOMIC_SEQ_CST);
    free(j);
}

static void body_result(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    __atomic_store_n(&ticking, 1, __ATOMIC_SEQ_CST);
    aco_rt_co_t* t = aco_rt_spawn(s, ticker, NULL);
    CHECK(t != NULL);
    CHECK_EQ(aco_rt_detach(t), 0);
    /* one co waiting without deadline on a helper is not a deadlock */
    test_go(s, result_co, NULL);
}

/* ------------------------------------------------------------------------ */
/* More callers than threads: queued, at most `threads` at once             */
/* ------------------------------------------------------------------------ */

static int running, most;

static void* count_fn(void* arg) {
    int now = __atomic_add_fetch(&running, 1, __ATOMIC_SEQ_CST);
    int m = __atomic_load_n(&most, __ATOMIC_SEQ_CST);
    while (now > m && !__atomic_compare_exchange_n(&most, &m, now, 0, __ATOMIC_SEQ_CST,
                                                   __ATOMIC_SEQ_CST)) {}
    nap_ms(20);
    __atomic_sub_fetch(&running, 1, __ATOMIC_SEQ_CST);
    return (void*)((long)(intptr_t)arg * 2);
}

static void many_co(void* arg) {
    long i = (long)(intptr_t)arg;
    void* res = NULL;
    CHECK_EQ(aco_rt_offload(count_fn, (void*)(intptr_t)i, NULL, &res, aco_rt_in_ms(10000)), 0);
    CHECK_EQ((long)res, 2 * i);
}

static void body_many(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_offload_limits(4, 0), 0);
    most = 0;
    int64_t t0 = aco_rt_now();
    for (long i = 0; i < 40; i++) {
        aco_rt_co_t* co = aco_rt_spawn(s, many_co, (void*)(intptr_t)i);
        CHECK(co != NULL);
        CHECK_EQ(aco_rt_detach(co), 0);
    }
    test_run(s);
    /* 40 jobs of 20 ms on 4 threads: 10 rounds */
    CHECK_GE(aco_rt_now() - t0, 200 * MS);
    CHECK_EQ(most, 4);
    CHECK_EQ(aco_rt_offload_limits(0, 0), 0);
}

/* ------------------------------------------------------------------------ */
/* Deadline and cancel: drop exactly once, after fn's end                   */
/* ------------------------------------------------------------------------ */

/* fn is held until the test lets it go (not a time the deadline or the
 * cancel must beat: a loaded machine may run the co late), so its end can
 * not come first.  A loaded machine may also not start fn before the 30 ms
 * deadline: then it never runs and drop gets NULL (the header's queued
 * case), which is checked instead. */
static void deadline_co(void* arg) {
    (void)arg;
    job_t* j = job_new(0);
    j->hold = 1;
    void* res = (void*)7;
    int64_t t0 = aco_rt_now();
    CHECK_EQ(aco_rt_offload(job_fn, j, job_drop, &res, aco_rt_in_ms(30)), -ETIMEDOUT);
    int64_t took = aco_rt_now() - t0;
    CHECK_GE(took, 30 * MS);
    CHECK_EQ(atomic_get(&j->ended), 0); /* did not wait for fn */
    CHECK_EQ((long)res, 7);             /* untouched */
    int ran = atomic_get(&j->started);
    if (ran) CHECK_EQ(atomic_get(&j->drops), 0); /* fn still runs, held */
    __atomic_store_n(&j->hold, 0, __ATOMIC_SEQ_CST);
    co_wait_eq(&j->drops, 1);
    if (ran || atomic_get(&j->started)) {
        CHECK_EQ(j->drop_saw_end, 1);
        CHECK_EQ((long)j->drop_result, 1);  /* fn's result went to drop */
    } else {
        CHECK(j->drop_result == NULL);      /* queued at the deadline: never ran */
    }
    aco_rt_sleep(50 * MS);
    CHECK_EQ(atomic_get(&j->drops), 1);
    if (!ran) CHECK_EQ(atomic_get(&j->started), j->drop_result != NULL);
    free(j);
}

static void victim_co(void* arg) {
    job_t* j = arg;
    CHECK_EQ(aco_rt_offload(job_fn, j, job_drop, NULL, -1), -ECANCELED);
    CHECK_EQ(atomic_get(&j->drops), 0);
    /* and every later call fails the same way, at once, with drop */
    job_t* k = job_new(0);
    CHECK_EQ(aco_rt_offload(job_fn, k, job_drop, NULL, -1), -ECANCELED);
    CHECK_EQ(atomic_get(&k->drops), 1);
    CHECK_EQ(atomic_get(&k->started), 0);
    CHECK(k->drop_result == NULL);
    free(k);
}

static void cancel_co(void* arg) {
    (void)arg;
    job_t* j = job_new(0);
    j->hold = 1;
    aco_rt_co_t* v = aco_rt_spawn(NULL, victim_co, j);
    CHECK(v != NULL);
    co_wait_eq(&j->started, 1);     /* fn runs (held): a cancel of a running job */
    CHECK_EQ(aco_rt_cancel(v), 0);
    CHECK_EQ(aco_rt_join(v, aco_rt_in_ms(5000)), 0);
    CHECK_EQ(atomic_get(&j->ended), 0); /* did not wait for fn */
    __atomic_store_n(&j->hold, 0, __ATOMIC_SEQ_CST);
    co_wait_eq(&j->drops, 1);
    CHECK_EQ(j->drop_saw_end, 1);
    aco_rt_sleep(20 * MS);
    CHECK_EQ(atomic_get(&j->drops), 1);
    free(j);
}

/* A deadline already passed: nothing queued, drop(arg, NULL) before the
 * return; fn never runs. */
static void past_co(void* arg) {
    (void)arg;
    job_t* j = job_new(0);
    CHECK_EQ(aco_rt_offload(job_fn, j, job_drop, NULL, 0), -ETIMEDOUT);
    CHECK_EQ(atomic_get(&j->drops), 1);
    CHECK(j->drop_result == NULL);
    CHECK_EQ(aco_rt_offload(job_fn, j, NULL, NULL, -5), -ETIMEDOUT);  /* drop NULL */
    aco_rt_sleep(20 * MS);
    CHECK_EQ(atomic_get(&j->started), 0);
    free(j);
}

static void body_stop(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    test_go(s, deadline_co, NULL);
    test_go(s, cancel_co, NULL);
    test_go(s, past_co, NULL);
}

/* ------------------------------------------------------------------------ */
/* A full queue; queued work whose co left never runs                        */
/* ------------------------------------------------------------------------ */

static void queued_co(void* arg) {
    job_t* j = arg;
    CHECK_EQ(aco_rt_offload(job_fn, j, job_drop, NULL, aco_rt_in_ms(5000)), 0);
}

static void leaver_co(void* arg) {
    job_t* j = arg;
    CHECK_EQ(aco_rt_offload(job_fn, j, job_drop, NULL, aco_rt_in_ms(20)), -ETIMEDOUT);
}

static void full_co(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_offload_limits(1, 2), 0);
    job_t* a = job_new(0);
    a->hold = 1;                        /* occupies the one thread */
    job_t* b = job_new(0);
    job_t* c = job_new(0);
    job_t* d = job_new(0);
    aco_rt_co_t* ca = aco_rt_spawn(NULL, queued_co, a);
    CHECK(ca != NULL);
    co_wait_eq(&a->started, 1);
    aco_rt_co_t* cb = aco_rt_spawn(NULL, queued_co, b);
    aco_rt_co_t* cc = aco_rt_spawn(NULL, leaver_co, c);
    CHECK(cb != NULL && cc != NULL);
    aco_rt_yield();                     /* b and c are queued: the queue is full */
    CHECK_EQ(aco_rt_offload(job_fn, d, job_drop, NULL, -1), -EAGAIN);
    CHECK_EQ(atomic_get(&d->drops), 0); /* -EAGAIN: arg is still ours */
    CHECK_EQ(aco_rt_join(cc, aco_rt_in_ms(5000)), 0);   /* c gave up */
    CHECK_EQ(atomic_get(&c->drops), 0); /* still queued behind a */
    __atomic_store_n(&a->hold, 0, __ATOMIC_SEQ_CST);
    CHECK_EQ(aco_rt_join(ca, aco_rt_in_ms(5000)), 0);
    CHECK_EQ(aco_rt_join(cb, aco_rt_in_ms(5000)), 0);
    co_wait_eq(&c->drops, 1);
    CHECK_EQ(atomic_get(&c->started), 0);   /* never ran: drop(arg, NULL) */
    CHECK(c->drop_result == NULL);
    CHECK_EQ(atomic_get(&b->ended), 1);
    CHECK_EQ(aco_rt_offload_limits(0, 0), 0);
    free(a); free(b); free(c); free(d);
}

static void body_full(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    test_go(s, full_co, NULL);
}

/* ------------------------------------------------------------------------ */
/* Misuse: the share-stack rule, fn NULL, outside cos, limits               */
/* ------------------------------------------------------------------------ */

static int never_called;
static void* never_fn(void* arg) { (void)arg; never_called = 1; return NULL; }
static void never_drop(void* arg, void* r) { (void)arg; (void)r; never_called = 1; }

static int share_seen;

static void misuse_co(void* arg) {
    int local = 0;
    /* a share stack's local, unless ASan's detect_stack_use_after_return
     * moved it to its fake stack (heap): then nothing forbids it */
    const aco_share_stack_t* ss = aco_get_co()->share_stack;
    int on_share = arg == NULL && (char*)&local >= (char*)ss->ptr &&
                   (char*)&local < (char*)ss->ptr + ss->sz;
    int r = aco_rt_offload(never_fn, &local, never_drop, NULL, -1);
    if (!on_share) {
        CHECK_EQ(r, 0);                 /* its stack is its own: fine */
        CHECK_EQ(never_called, 1);
        never_called = 0;
    } else {
        CHECK_EQ(r, -EINVAL);
        share_seen = 1;
    }
    CHECK_EQ(aco_rt_offload(NULL, NULL, never_drop, NULL, -1), -EINVAL);
    static int in_static;
    CHECK_EQ(aco_rt_offload(never_fn, &in_static, NULL, NULL, -1), 0);
    CHECK_EQ(never_called, 1);
    never_called = 0;
}

static void body_misuse(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    test_go(s, misuse_co, NULL);
    CHECK_EQ(never_called, 0);
    if (!SLOW) CHECK_EQ(share_seen, 1);     /* (ASan may move locals off it) */
    aco_rt_spawn_opts_t so = {.standalone = 1};
    aco_rt_co_t* co = aco_rt_spawn2(s, misuse_co, (void*)1, &so);
    CHECK(co != NULL);
    CHECK_EQ(aco_rt_detach(co), 0);
    test_run(s);
    /* outside a co (the scheduler exists, but this is its thread's main) */
    int x;
    CHECK_EQ(aco_rt_offload(never_fn, &x, never_drop, NULL, -1), -EPERM);
    CHECK_EQ(never_called, 0);
    CHECK_EQ(aco_rt_offload_limits(1025, 0), -EINVAL);
    CHECK_EQ(aco_rt_offload_limits(0, (1u << 20) + 1), -EINVAL);
}

/* ------------------------------------------------------------------------ */
/* Cos of a pool's threads; a co destroyed while it waits                   */
/* ------------------------------------------------------------------------ */

static long pool_sum;

static void* square_fn(void* arg) {
    long v = (long)(intptr_t)arg;
    return (void*)(intptr_t)(v * v);
}

static void pool_co(void* arg) {
    long i = (long)(intptr_t)arg;
    for (long k = 0; k < 20; k++) {
        void* res;
        CHECK_EQ(aco_rt_offload(square_fn, (void*)(intptr_t)(i + k), NULL, &res, -1), 0);
        CHECK_EQ((long)(intptr_t)res, (i + k) * (i + k));
        __atomic_fetch_add(&pool_sum, 1, __ATOMIC_SEQ_CST);
    }
}

static void test_pool_threads(void) {
    aco_rt_pool_opts_t po = {.threads = 2};
    aco_rt_pool_t* p = aco_rt_pool_new(&po);
    CHECK(p != NULL);
    int n = SLOW ? 40 : 200;
    for (long i = 0; i < n; i++) {
        aco_rt_co_t* co = aco_rt_pool_spawn(p, pool_co, (void*)(intptr_t)i, NULL);
        CHECK(co != NULL);
        CHECK_EQ(aco_rt_detach(co), 0);
    }
    CHECK_EQ(aco_rt_pool_wait(p, ACO_RT_POOL_DRAIN, aco_rt_in_ms(60000)), 0);
    CHECK_EQ(pool_sum, 20L * n);
    aco_rt_pool_free(p);
}

static void forsaken_co(void* arg) {
    job_t* j = arg;
    aco_rt_offload(job_fn, j, job_drop, NULL, -1);
    CHECK(0);                           /* destroyed before it returns */
}

static void stopper_co(void* arg) { aco_rt_sched_stop(arg); }

/* aco_rt_sched_free while one co waits on fn and another's fn already
 * ended (its wake not yet taken): drop once each, nothing leaks (ASan). */
static void test_forsake(void) {
    aco_rt_sched_t* s = test_sched(NULL);
    job_t* a = job_new(100);
    job_t* b = job_new(0);
    CHECK(aco_rt_spawn(s, forsaken_co, a) != NULL);
    CHECK(aco_rt_spawn(s, forsaken_co, b) != NULL);
    CHECK(aco_rt_spawn(s, stopper_co, s) != NULL);
    CHECK_EQ(aco_rt_sched_run(s), 0);   /* one round: both cos park */
    for (int i = 0; i < 5000 && !atomic_get(&b->ended); i++) nap_ms(1);
    nap_ms(10);                         /* b's wake is in the inbox */
    aco_rt_sched_free(s);
    CHECK_EQ(atomic_get(&b->drops), 1);    /* in the free: fn had ended */
    CHECK_EQ((long)b->drop_result, 1);
    for (int i = 0; i < 5000 && !atomic_get(&a->drops); i++) nap_ms(1);
    CHECK_EQ(atomic_get(&a->drops), 1);    /* on the helper, after fn */
    CHECK_EQ(a->drop_saw_end, 1);
    nap_ms(20);
    CHECK_EQ(atomic_get(&a->drops), 1);
    CHECK_EQ(atomic_get(&b->drops), 1);
    free(a);
    free(b);
}

/* A co whose wait a cancel ended (the job is the helper's then), freed
 * before it ran again: the free leaves the job alone, and the helper drops
 * it once, after fn (the free dropped and freed it too: a double free). */
static void cancelled_co(void* arg) {
    job_t* j = arg;
    CHECK_EQ(aco_rt_offload(job_fn, j, job_drop, NULL, -1), -ECANCELED);
    CHECK(0);                           /* destroyed before it returns */
}

static void test_forsake_cancelled(void) {
    aco_rt_sched_t* s = test_sched(NULL);
    job_t* a = job_new(0);
    a->hold = 1;
    aco_rt_co_t* c = aco_rt_spawn(s, cancelled_co, a);
    CHECK(c != NULL);
    CHECK(aco_rt_spawn(s, stopper_co, s) != NULL);
    CHECK_EQ(aco_rt_sched_run(s), 0);   /* c parks, fn holds */
    for (int i = 0; i < 5000 && !atomic_get(&a->started); i++) nap_ms(1);
    aco_rt_cancel(c);                   /* taken by the free's drain */
    aco_rt_sched_free(s);
    CHECK_EQ(atomic_get(&a->drops), 0); /* fn still runs: the helper's */
    __atomic_store_n(&a->hold, 0, __ATOMIC_SEQ_CST);
    for (int i = 0; i < 5000 && !atomic_get(&a->drops); i++) nap_ms(1);
    nap_ms(20);
    CHECK_EQ(atomic_get(&a->drops), 1);
    CHECK_EQ(a->drop_saw_end, 1);
    free(a);
}

/* The free racing helpers that end waits: a helper must not send a wake
 * into a scheduler past its drain (the woken co's record is freed next;
 * TSan saw the send write it).  Every call's job is taken exactly once:
 * its drop or the co's return. */
static int race_calls, race_taken;
static void* race_fn(void* arg) {
    struct timespec ts = {0, (long)((uintptr_t)arg % 200) * 1000};
    nanosleep(&ts, NULL);
    return arg;
}
static void race_drop(void* arg, void* r) {
    (void)arg;
    (void)r;
    __atomic_fetch_add(&race_taken, 1, __ATOMIC_SEQ_CST);
}
static void race_co(void* arg) {
    for (uintptr_t k = (uintptr_t)arg;; k += 7) {
        __atomic_fetch_add(&race_calls, 1, __ATOMIC_SEQ_CST);
        void* r;
        CHECK_EQ(aco_rt_offload(race_fn, (void*)k, race_drop, &r, -1), 0);
        CHECK(r == (void*)k);
        __atomic_fetch_add(&race_taken, 1, __ATOMIC_SEQ_CST);
    }
}
static void race_stopper(void* arg) {
    aco_rt_sleep((int64_t)((uintptr_t)arg % 300) * 1000);
    aco_rt_sched_stop(aco_rt_sched_current());
}

static void test_forsake_race(void) {
    for (int round = 0; round < 150; round++) {
        aco_rt_sched_t* s = test_sched(NULL);
        for (uintptr_t i = 0; i < 4; i++) CHECK(aco_rt_spawn(s, race_co, (void*)(i + round)) != NULL);
        CHECK(aco_rt_spawn(s, race_stopper, (void*)(uintptr_t)(round * 37)) != NULL);
        CHECK_EQ(aco_rt_sched_run(s), 0);
        aco_rt_sched_free(s);
    }
    for (int i = 0; i < 5000 && atomic_get(&race_taken) != atomic_get(&race_calls); i++) nap_ms(1);
    CHECK_EQ(atomic_get(&race_taken), atomic_get(&race_calls));
}

/* ------------------------------------------------------------------------ */
/* fork: the child's calls start helpers of its own                         */
/* ------------------------------------------------------------------------ */

/* The parent's helper waits for work when the fork comes: the child's queue
 * must not count it as a waiter (its signal would wait for a thread that
 * is not there), call after call. */
static void* plus_fn(void* arg) { return (void*)((intptr_t)arg + 1); }

static void offloads_co(void* arg) {
    int* ok = arg;
    for (intptr_t i = 0; i < 5; i++) {
        void* r = NULL;
        CHECK_EQ(aco_rt_offload(plus_fn, (void*)i, NULL, &r, aco_rt_in_ms(10000)), 0);
        CHECK_EQ((intptr_t)r, i + 1);
    }
    *ok = 1;
}

static void forked(void* arg) {
    (void)arg;
    alarm(60);                  /* a hang dies of SIGALRM: the case fails */
    aco_rt_sched_t* s = aco_rt_sched_new(NULL);
    CHECK(s != NULL);
    int ok = 0;
    test_go(s, offloads_co, &ok);
    aco_rt_sched_free(s);
    _exit(ok ? 0 : 3);
}

/* Work queued in the parent when it forks never runs in the child (its fn
 * would run twice): a helper held busy, a job queued behind it, a fork
 * from a plain thread, and in the child a call that starts a helper. */
static int* fk_shared;          /* [0] hold, [1] held, [2] runs, [3] in child */
static pid_t fk_parent;
static void* hold_fn(void* arg) {
    (void)arg;
    __atomic_store_n(&fk_shared[1], 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&fk_shared[0], __ATOMIC_SEQ_CST)) nap_ms(1);
    return NULL;
}
static void* fk_count_fn(void* arg) {
    (void)arg;
    __atomic_fetch_add(&fk_shared[2], 1, __ATOMIC_SEQ_CST);
    if (getpid() != fk_parent) __atomic_fetch_add(&fk_shared[3], 1, __ATOMIC_SEQ_CST);
    return NULL;
}
static void offload_co(void* arg) {
    CHECK_EQ(aco_rt_offload((void* (*)(void*))arg, NULL, NULL, NULL, aco_rt_in_ms(20000)), 0);
}
static void* fork_thread(void* arg) {
    (void)arg;
    while (!__atomic_load_n(&fk_shared[1], __ATOMIC_SEQ_CST)) nap_ms(1);
    nap_ms(20);                 /* the second job is queued */
    int st = -1;
    CHECK_EQ(test_in_child(forked, NULL, &st), 0);
    CHECK_EQ(st, 0);
    __atomic_store_n(&fk_shared[0], 0, __ATOMIC_SEQ_CST);
    return NULL;
}
static void test_fork_queued(void) {
    fk_shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(fk_shared != MAP_FAILED);
    fk_shared[0] = 1;
    fk_parent = getpid();
    CHECK_EQ(aco_rt_offload_limits(1, 0), 0);
    aco_rt_sched_t* s = aco_rt_sched_new(NULL);
    CHECK(s != NULL);
    aco_rt_co_t* a = aco_rt_spawn(s, offload_co, (void*)hold_fn);
    aco_rt_co_t* b = aco_rt_spawn(s, offload_co, (void*)fk_count_fn);
    CHECK(a && b);
    CHECK_EQ(aco_rt_detach(a), 0);
    CHECK_EQ(aco_rt_detach(b), 0);
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, fork_thread, NULL), 0);
    test_run(s);
    CHECK_EQ(pthread_join(t, NULL), 0);
    aco_rt_sched_free(s);
    CHECK_EQ(fk_shared[2], 1);
    CHECK_EQ(fk_shared[3], 0);
    CHECK_EQ(aco_rt_offload_limits(0, 0), 0);
    munmap(fk_shared, 4096);
}

static void test_fork(void) {
    aco_rt_sched_t* s = aco_rt_sched_new(NULL);
    CHECK(s != NULL);
    int ok = 0;
    test_go(s, offloads_co, &ok);       /* the parent's helpers, now idle */
    CHECK_EQ(ok, 1);
    aco_rt_sched_free(s);
    nap_ms(20);
    for (int i = 0; i < 3; i++) {
        int st = -1;
        CHECK_EQ(test_in_child(forked, NULL, &st), 0);
        CHECK_EQ(st, 0);
    }
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    test_on_backends(NULL, body_result, NULL);
    test_on_backends(NULL, body_many, NULL);
    test_on_backends(NULL, body_stop, NULL);
    test_on_backends(NULL, body_full, NULL);
    test_on_backends(NULL, body_misuse, NULL);
    test_pool_threads();
    test_forsake();
    test_forsake_cancelled();
    test_forsake_race();
    test_fork();
    test_fork_queued();
    printf("test_offload: OK\n");
    return 0;
}

#else   /* the single-thread build: no helper threads */

static void st_co(void* arg) {
    (void)arg;
    job_t* j = job_new(0);
    CHECK_EQ(aco_rt_offload(job_fn, j, job_drop, NULL, -1), -ENOSYS);
    CHECK_EQ(atomic_get(&j->drops), 0);
    CHECK_EQ(atomic_get(&j->started), 0);
    free(j);
}

static void body_st(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    test_go(s, st_co, NULL);
    CHECK_EQ(aco_rt_offload_limits(4, 4), -ENOSYS);
}

int main(void) {
    test_on_backends(NULL, body_st, NULL);
    (void)co_wait_eq;
    printf("test_offload (single-thread build): OK\n");
    return 0;
}

#endif
