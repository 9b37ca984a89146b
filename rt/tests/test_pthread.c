/* test_pthread: co-local keys (aco_rt.h) and the pthread-like face
 * (aco_rt_pthread.h).
 *
 *  - keys: values per co (interleaved), NULL until set; destructors in slot
 *    order, with the value already NULL, never for NULL values or keys
 *    without one, rounds while destructors set values again (at most
 *    ACO_RT_KEY_DTOR_ROUNDS), a destructor that blocks; a deleted key: no
 *    destructor, invisible to a later key of its slot (also once the key
 *    numbers of its slot came round), EINVAL; a record
 *    used again starts with NULLs; 10000 cos with three keys each; all
 *    ACO_RT_KEYS_MAX keys, then EAGAIN; values outside cos per thread
 *    (main thread, a plain pthread whose destructors run at its exit);
 *    keys made and used by cos of four threads at once; aco_rt_sched_free
 *    with cos holding values (no destructor, no leak); aco_rt_exit from
 *    nested frames runs the destructors; outside a co it aborts;
 *  - threads: attributes (defaults, EINVAL); create/join with values from
 *    return and from aco_rt_pthread_exit (nested frames, destructors run
 *    first), join misuse (EDEADLK, EINVAL, ESRCH, EPERM), tryjoin EBUSY,
 *    timedjoin ETIMEDOUT never early; detach (running, ended, self, by
 *    attribute, twice: EINVAL), nothing left (cos_alive, leak checkers);
 *    self/equal in cos and outside; exit in a plain co and in a
 *    destructor; yield round robin; create without a scheduler: EPERM; a
 *    stack size above the share stacks: a stack of its own (a big array,
 *    a mutex on it shared with another co); init of an object on a share
 *    stack: EINVAL;
 *  - mutexes: NORMAL, ERRORCHECK (EDEADLK, EBUSY, EPERM), RECURSIVE (depth,
 *    others wait for the last unlock), static initializers, destroy
 *    (EBUSY, then EINVAL), EPERM outside cos, timedlock/clocklock:
 *    ETIMEDOUT never early on CLOCK_REALTIME and CLOCK_MONOTONIC, EINVAL
 *    for a bad abstime only when it must wait, a free mutex with a passed
 *    abstime: 0; attributes (ENOTSUP for PROCESS_SHARED);
 *  - conds: signal (FIFO), broadcast, timedwait never early on the cond's
 *    clock (REALTIME default, MONOTONIC by attribute), clockwait, the
 *    mutex held again after a timeout and a cancel (then: EDEADLK before
 *    ECANCELED; a RECURSIVE mutex it holds: lock ECANCELED, trylock and
 *    unlock work), EPERM without the
 *    mutex, a RECURSIVE mutex held twice released fully and taken back
 *    twice, destroy EBUSY, signal from outside cos;
 *  - once: 50 cos at once with an init that sleeps: one run, everybody
 *    returns after it; a recursive once: EDEADLK; outside cos EPERM, then
 *    0 once done;
 *  - rwlock: readers together, writers alone, EDEADLK, EBUSY, EPERM,
 *    a bad abstime EINVAL on a free lock too (as glibc's),
 *    timedwrlock never early, a reader locking again past a waiting
 *    writer, a cancelled co can still unlock; barrier: 5 cos, 3 rounds, one
 *    SERIAL each, nobody through early, EINVAL, EBUSY; the SERIAL co
 *    destroys and unmaps the barrier while the others are woken (on one
 *    scheduler, and on a pool's two threads).
 */
#include "rt_test.h"
#include "../aco_rt_pthread.h"

#include <pthread.h>
#include <sys/mman.h>
#include <stdint.h>
#include <time.h>

static aco_rt_sched_t* S;

static int64_t clock_ns(clockid_t clk) {
    struct timespec ts;
    clock_gettime(clk, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static struct timespec ts_of(int64_t ns) {
    struct timespec ts = {(time_t)(ns / 1000000000), (long)(ns % 1000000000)};
    return ts;
}

/* abstime ns from now on clk */
static struct timespec in_ns(clockid_t clk, int64_t ns) { return ts_of(clock_ns(clk) + ns); }

static int log_[1 << 16];
static int nlog;

/* ======================================================================== */
/* Keys                                                                     */
/* ======================================================================== */

static aco_rt_key_t K1, K2, K3, KN;     /* KN: no destructor */
static int dlog[64];
static int ndlog;
static int tag[4];                      /* values: &tag[i] */

static void d1(void* v) {
    CHECK(v == &tag[1]);
    CHECK(aco_rt_getspecific(K1) == NULL);      /* NULL before the call */
    dlog[ndlog++] = 1;
}
static void d2(void* v) {
    CHECK(v == &tag[2]);
    dlog[ndlog++] = 2;
}
static void d3(void* v) {
    CHECK(v == &tag[3]);
    /* a destructor may block */
    CHECK_EQ(aco_rt_sleep(MS), 0);
    dlog[ndlog++] = 3;
}

static void keys_basic_co(void* arg) {
    int id = (int)(intptr_t)arg;
    CHECK(aco_rt_getspecific(K1) == NULL);
    CHECK(aco_rt_getspecific(KN) == NULL);
    CHECK_EQ(aco_rt_setspecific(KN, &log_[id]), 0);
    for (int i = 0; i < 5; i++) {
        CHECK(aco_rt_getspecific(KN) == &log_[id]);
        CHECK_EQ(aco_rt_yield(), 0);
    }
    CHECK_EQ(aco_rt_setspecific(KN, NULL), 0);
    CHECK(aco_rt_getspecific(KN) == NULL);
    if (id == 0) {
        /* set in reverse order: the destructors go in slot order */
        CHECK_EQ(aco_rt_setspecific(K3, &tag[3]), 0);
        CHECK_EQ(aco_rt_setspecific(K2, &tag[2]), 0);
        CHECK_EQ(aco_rt_setspecific(K1, &tag[1]), 0);
        CHECK_EQ(aco_rt_setspecific(KN, &tag[0]), 0);   /* no destructor */
    }
    if (id == 1) CHECK_EQ(aco_rt_setspecific(K2, NULL), 0);   /* NULL: none */
}

static void keys_basic(void* arg) {
    (void)arg;
    ndlog = 0;
    aco_rt_co_t* c[3];
    for (int i = 0; i < 3; i++) c[i] = aco_rt_spawn(NULL, keys_basic_co, (void*)(intptr_t)i);
    CHECK_EQ(aco_rt_join(c[0], -1), 0);
    /* join returned after the destructors (d3 slept) */
    CHECK_EQ(ndlog, 3);
    CHECK_EQ(dlog[0], 1);
    CHECK_EQ(dlog[1], 2);
    CHECK_EQ(dlog[2], 3);
    CHECK_EQ(aco_rt_join(c[1], -1), 0);
    CHECK_EQ(aco_rt_join(c[2], -1), 0);
    CHECK_EQ(ndlog, 3);
}

/* Rounds: a destructor that sets its value again. */
static aco_rt_key_t KR, KR2;
static int rounds_left, rcalls, r2calls;
static void dr(void* v) {
    rcalls++;
    if (rounds_left-- > 0) CHECK_EQ(aco_rt_setspecific(KR, v), 0);
}
static void dr2(void* v) {      /* sets the other key again: a next round */
    r2calls++;
    if (r2calls == 1) CHECK_EQ(aco_rt_setspecific(KR, v), 0);
}
static void rounds_co(void* arg) {
    CHECK_EQ(aco_rt_setspecific(KR, &tag[0]), 0);
    if (arg) CHECK_EQ(aco_rt_setspecific(KR2, &tag[1]), 0);
}

static void keys_rounds(void* arg) {
    (void)arg;
    for (int again = 0; again < 6; again++) {
        rounds_left = again;
        rcalls = 0;
        aco_rt_co_t* c = aco_rt_spawn(NULL, rounds_co, NULL);
        CHECK_EQ(aco_rt_join(c, -1), 0);
        /* called once per round: while it sets the value again, up to the
         * limit; then the value is dropped */
        CHECK_EQ(rcalls, again + 1 < ACO_RT_KEY_DTOR_ROUNDS ? again + 1 : ACO_RT_KEY_DTOR_ROUNDS);
    }
    /* a destructor of a later slot sets an earlier key: a second round */
    rounds_left = 0;
    rcalls = r2calls = 0;
    aco_rt_co_t* c = aco_rt_spawn(NULL, rounds_co, (void*)1);
    CHECK_EQ(aco_rt_join(c, -1), 0);
    CHECK_EQ(rcalls, 2);
    CHECK_EQ(r2calls, 1);
}

/* A deleted key: its values are not destroyed, nor seen by a key that
 * takes its slot. */
static aco_rt_key_t KD;
static int kd_calls;
static void dkd(void* v) { (void)v; kd_calls++; }
static aco_rt_wg_t kd_wg;
static aco_rt_sem_t kd_go;

static void deleted_co(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_setspecific(KD, &tag[0]), 0);
    CHECK_EQ(aco_rt_wg_done(&kd_wg), 0);
    CHECK_EQ(aco_rt_sem_wait(&kd_go, -1), 0);
    /* KD was deleted and its slot taken by the new KD: not this value */
    CHECK(aco_rt_getspecific(KD) == NULL);
}

static void keys_deleted(void* arg) {
    (void)arg;
    kd_calls = 0;
    CHECK_EQ(aco_rt_key_create(&KD, dkd), 0);
    aco_rt_key_t old = KD;
    aco_rt_wg_init(&kd_wg);
    aco_rt_sem_init(&kd_go, 0);
    CHECK_EQ(aco_rt_wg_add(&kd_wg, 1), 0);
    aco_rt_co_t* c = aco_rt_spawn(NULL, deleted_co, NULL);
    CHECK_EQ(aco_rt_wg_wait(&kd_wg, -1), 0);
    CHECK_EQ(aco_rt_key_delete(KD), 0);
    CHECK_EQ(aco_rt_key_delete(KD), -EINVAL);
    CHECK_EQ(aco_rt_setspecific(old, &tag[0]), -EINVAL);
    CHECK_EQ(aco_rt_key_create(&KD, dkd), 0);
    CHECK_EQ(KD & (ACO_RT_KEYS_MAX - 1), old & (ACO_RT_KEYS_MAX - 1));  /* the same slot */
    CHECK_NE(KD, old);
    aco_rt_sem_post(&kd_go);
    CHECK_EQ(aco_rt_join(c, -1), 0);
    CHECK_EQ(kd_calls, 0);              /* the old key's value: no destructor */

    /* The same once the slot's sequence bits in a key came round (2^21
     * creates and deletes): the new key's number is the old one's, and
     * still it sees no old value, nor runs its destructor on one. */
    old = KD;
    CHECK_EQ(aco_rt_wg_add(&kd_wg, 1), 0);
    c = aco_rt_spawn(NULL, deleted_co, NULL);
    CHECK_EQ(aco_rt_wg_wait(&kd_wg, -1), 0);
    CHECK_EQ(aco_rt_key_delete(KD), 0);
    for (long i = 0;; i++) {
        CHECK_LE(i, 1L << 22);
        CHECK_EQ(aco_rt_key_create(&KD, dkd), 0);
        if (KD == old) break;
        CHECK_EQ(aco_rt_key_delete(KD), 0);
    }
    aco_rt_sem_post(&kd_go);
    CHECK_EQ(aco_rt_join(c, -1), 0);
    CHECK_EQ(kd_calls, 0);
    CHECK_EQ(aco_rt_key_delete(KD), 0);
}

/* A record used again starts with every value NULL. */
static aco_rt_co_t* first_rec;
static void reuse_a(void* arg) {
    (void)arg;
    first_rec = aco_rt_self();
    CHECK_EQ(aco_rt_setspecific(KN, &tag[0]), 0);
    CHECK_EQ(aco_rt_setspecific(K1, &tag[1]), 0);
}
static void reuse_b(void* arg) {
    (void)arg;
    CHECK(aco_rt_self() == first_rec);  /* it is the same record */
    CHECK(aco_rt_getspecific(KN) == NULL);
    CHECK(aco_rt_getspecific(K1) == NULL);
}

static void keys_reuse(void* arg) {
    (void)arg;
    ndlog = 0;
    aco_rt_co_t* a = aco_rt_spawn(NULL, reuse_a, NULL);
    CHECK_EQ(aco_rt_join(a, -1), 0);
    CHECK_EQ(ndlog, 1);
    aco_rt_co_t* b = aco_rt_spawn(NULL, reuse_b, NULL);
    CHECK(b == a);
    CHECK_EQ(aco_rt_join(b, -1), 0);
}

/* 10000 cos, three keys each, with heap values. */
#define MANY CO_MANY(10000)
static aco_rt_key_t KM[3];
static int64_t many_freed;
static void dmany(void* v) {
    CHECK_GE(*(int*)v, 0);
    free(v);
    many_freed++;
}
static void many_co(void* arg) {
    int id = (int)(intptr_t)arg;
    int nk = id % 50 == 0 ? 3 : 2;     /* a few use the far slot too */
    for (int k = 0; k < nk; k++) {
        int* v = malloc(sizeof(int));
        CHECK(v != NULL);
        *v = id * 3 + k;
        CHECK_EQ(aco_rt_setspecific(KM[k], v), 0);
        /* a third of them wait among the others (TSan takes at most 8128
         * cos alive at once: each is a fiber to it) */
        if (id % 3 == 0) CHECK_EQ(aco_rt_yield(), 0);
    }
    for (int k = 0; k < nk; k++) CHECK_EQ(*(int*)aco_rt_getspecific(KM[k]), id * 3 + k);
    if (nk == 2) CHECK(aco_rt_getspecific(KM[2]) == NULL);
}

static void keys_many(void* arg) {
    (void)arg;
    many_freed = 0;
    static aco_rt_co_t* c[MANY];
    for (int i = 0; i < MANY; i++) c[i] = aco_rt_spawn(NULL, many_co, (void*)(intptr_t)i);
    for (int i = 0; i < MANY; i++) CHECK_EQ(aco_rt_join(c[i], -1), 0);
    CHECK_EQ(many_freed, 2 * MANY + MANY / 50);
}

/* Every slot, then EAGAIN. */
static void keys_all(void* arg) {
    (void)arg;
    static aco_rt_key_t k[ACO_RT_KEYS_MAX];
    int n = 0;
    while (n < ACO_RT_KEYS_MAX && aco_rt_key_create(&k[n], NULL) == 0) n++;
    CHECK_LT(n, ACO_RT_KEYS_MAX);       /* the test's keys hold some */
    aco_rt_key_t x;
    CHECK_EQ(aco_rt_key_create(&x, NULL), -EAGAIN);
    /* the highest slot works */
    CHECK_EQ(aco_rt_setspecific(k[n - 1], &tag[2]), 0);
    CHECK(aco_rt_getspecific(k[n - 1]) == &tag[2]);
    for (int i = 0; i < n; i++) CHECK_EQ(aco_rt_key_delete(k[i]), 0);
    CHECK_EQ(aco_rt_key_create(&x, NULL), 0);
    CHECK_EQ(aco_rt_key_delete(x), 0);
}

/* aco_rt_exit from nested frames: the destructors run, the joiner goes on. */
static int after_exit;
static void exit_deep(int depth) {
    if (depth < 0) return;              /* (never: for -Winfinite-recursion) */
    if (depth == 0) aco_rt_exit();
    exit_deep(depth - 1);
    after_exit = 1;
}
static void exit_co(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_setspecific(K2, &tag[2]), 0);
    exit_deep(5);
    after_exit = 1;
}

static void keys_exit(void* arg) {
    (void)arg;
    ndlog = 0;
    after_exit = 0;
    aco_rt_co_t* c = aco_rt_spawn(NULL, exit_co, NULL);
    CHECK_EQ(aco_rt_join(c, -1), 0);
    CHECK_EQ(after_exit, 0);
    CHECK_EQ(ndlog, 1);
    CHECK_EQ(dlog[0], 2);
}

/* Values outside cos are the thread's. */
static void thread_vs_co(void* arg) {
    (void)arg;
    CHECK(aco_rt_getspecific(KN) == NULL);      /* not the thread's */
    CHECK_EQ(aco_rt_setspecific(KN, &tag[1]), 0);
    CHECK_EQ(aco_rt_yield(), 0);
    CHECK(aco_rt_getspecific(KN) == &tag[1]);
}

static int thr_dtor_calls;
static void dthr(void* v) {
    CHECK(v == &tag[3]);
    __atomic_fetch_add(&thr_dtor_calls, 1, __ATOMIC_RELAXED);
}
static aco_rt_key_t KT;
static void* plain_thread(void* arg) {
    (void)arg;
    CHECK(aco_rt_getspecific(KT) == NULL);      /* not the main thread's */
    CHECK_EQ(aco_rt_setspecific(KT, &tag[3]), 0);
    CHECK(aco_rt_getspecific(KT) == &tag[3]);
    return NULL;                                /* dthr runs at the exit */
}

static void keys_threads(void) {
    thr_dtor_calls = 0;
    CHECK_EQ(aco_rt_setspecific(KN, &tag[0]), 0);
    CHECK(aco_rt_getspecific(KN) == &tag[0]);
    test_go(S, thread_vs_co, NULL);
    CHECK(aco_rt_getspecific(KN) == &tag[0]);
    CHECK_EQ(aco_rt_setspecific(KN, NULL), 0);

    CHECK_EQ(aco_rt_key_create(&KT, dthr), 0);
    CHECK_EQ(aco_rt_setspecific(KT, &tag[2]), 0);
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, plain_thread, NULL), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
    CHECK_EQ(thr_dtor_calls, 1);
    CHECK(aco_rt_getspecific(KT) == &tag[2]);
    CHECK_EQ(aco_rt_setspecific(KT, NULL), 0);
    CHECK_EQ(aco_rt_key_delete(KT), 0);
}

/* Keys made, used and deleted by cos of four threads at once. */
static int64_t mt_dtors;
static void dmt(void* v) {
    (void)v;
    __atomic_fetch_add(&mt_dtors, 1, __ATOMIC_RELAXED);
}
static void mt_co(void* arg) {
    int id = (int)(intptr_t)arg;
    for (int r = 0; r < 50; r++) {
        aco_rt_key_t k;
        CHECK_EQ(aco_rt_key_create(&k, dmt), 0);
        CHECK_EQ(aco_rt_setspecific(k, &log_[id]), 0);
        CHECK_EQ(aco_rt_setspecific(KM[0], &log_[id + r]), 0);
        CHECK_EQ(aco_rt_yield(), 0);
        CHECK(aco_rt_getspecific(k) == &log_[id]);
        CHECK(aco_rt_getspecific(KM[0]) == &log_[id + r]);
        CHECK_EQ(aco_rt_setspecific(k, NULL), 0);
        CHECK_EQ(aco_rt_key_delete(k), 0);
    }
    CHECK_EQ(aco_rt_setspecific(KM[0], NULL), 0);
    CHECK_EQ(aco_rt_setspecific(KM[1], &log_[id]), 0);  /* dmt at the end */
}
static void* mt_thread(void* arg) {
    aco_rt_sched_t* s = test_sched_on(test_backend_id, NULL);
    for (int i = 0; i < 20; i++) {
        aco_rt_co_t* c = aco_rt_spawn(s, mt_co, (void*)(intptr_t)((intptr_t)arg * 100 + i));
        CHECK(c != NULL);
        CHECK_EQ(aco_rt_detach(c), 0);
    }
    test_run(s);
    aco_rt_sched_free(s);
    return NULL;
}

static void keys_multithread(void) {
    aco_rt_key_t saved[2] = {KM[0], KM[1]};
    CHECK_EQ(aco_rt_key_create(&KM[0], NULL), 0);
    CHECK_EQ(aco_rt_key_create(&KM[1], dmt), 0);
    mt_dtors = 0;
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        CHECK_EQ(pthread_create(&t[i], NULL, mt_thread, (void*)(intptr_t)i), 0);
    for (int i = 0; i < 4; i++) CHECK_EQ(pthread_join(t[i], NULL), 0);
    CHECK_EQ(mt_dtors, 4 * 20);
    CHECK_EQ(aco_rt_key_delete(KM[0]), 0);
    CHECK_EQ(aco_rt_key_delete(KM[1]), 0);
    KM[0] = saved[0];
    KM[1] = saved[1];
}

/* aco_rt_sched_free with cos that hold values: no destructor runs, the
 * values' memory goes (the leak checkers would see it). */
static aco_rt_sem_t never;
static void holder_co(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_setspecific(K1, &tag[1]), 0);
    CHECK_EQ(aco_rt_setspecific(KM[2], &tag[0]), 0);    /* a high slot */
    aco_rt_sem_wait(&never, -1);
    CHECK(0);
}

static void stopper_co(void* arg);
static void* sched_free_thread(void* arg) {
    (void)arg;
    aco_rt_sched_t* s = test_sched_on(test_backend_id, NULL);
    for (int i = 0; i < 10; i++) CHECK(aco_rt_spawn(s, holder_co, NULL) != NULL);
    CHECK(aco_rt_spawn(s, stopper_co, s) != NULL);
    test_run(s);
    aco_rt_stats_t st;
    aco_rt_stats(s, &st);
    CHECK_EQ(st.cos_parked, 10);
    aco_rt_sched_free(s);
    return NULL;
}

static void stopper_co(void* arg) {
    aco_rt_sched_stop((aco_rt_sched_t*)arg);    /* the holders wait by now */
}

static void keys_sched_free(void) {
    ndlog = 0;
    aco_rt_sem_init(&never, 0);
    /* another thread: this one has its scheduler */
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, sched_free_thread, NULL), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
    CHECK_EQ(ndlog, 0);
}

static void exit_outside(void* arg) {
    (void)arg;
    aco_rt_exit();
}
static void pexit_outside(void* arg) {
    (void)arg;
    aco_rt_pthread_exit(NULL);
}

/* ======================================================================== */
/* Threads                                                                  */
/* ======================================================================== */

static void attrs(void) {
    aco_rt_pthread_attr_t a;
    size_t n = 0;
    int st = -1;
    CHECK_EQ(aco_rt_pthread_attr_init(&a), 0);
    CHECK_EQ(aco_rt_pthread_attr_getstacksize(&a, &n), 0);
    CHECK_EQ(n, 256 * 1024);            /* the scheduler's share stacks */
    CHECK_EQ(aco_rt_pthread_attr_getdetachstate(&a, &st), 0);
    CHECK_EQ(st, ACO_RT_PTHREAD_CREATE_JOINABLE);
    CHECK_EQ(aco_rt_pthread_attr_setstacksize(&a, ACO_RT_PTHREAD_STACK_MIN - 1), EINVAL);
    CHECK_EQ(aco_rt_pthread_attr_setstacksize(&a, 1 << 20), 0);
    CHECK_EQ(aco_rt_pthread_attr_getstacksize(&a, &n), 0);
    CHECK_EQ(n, 1 << 20);
    CHECK_EQ(aco_rt_pthread_attr_setdetachstate(&a, 7), EINVAL);
    CHECK_EQ(aco_rt_pthread_attr_setdetachstate(&a, ACO_RT_PTHREAD_CREATE_DETACHED), 0);
    CHECK_EQ(aco_rt_pthread_attr_getdetachstate(&a, &st), 0);
    CHECK_EQ(st, ACO_RT_PTHREAD_CREATE_DETACHED);
    CHECK_EQ(aco_rt_pthread_attr_destroy(&a), 0);
}

static void* ret_arg(void* arg) { return arg; }

static void* exit_nested3(int depth, void* v) {
    if (depth < 0) return NULL;         /* (never: for -Winfinite-recursion) */
    if (depth == 0) aco_rt_pthread_exit(v);
    exit_nested3(depth - 1, v);
    CHECK(0);
    return NULL;
}
static void* exit_nested(void* arg) {
    CHECK_EQ(aco_rt_setspecific(K1, &tag[1]), 0);
    exit_nested3(3, arg);
    CHECK(0);
    return NULL;
}

static aco_rt_pthread_t joined_by_other;
static void* other_joiner(void* arg) {
    (void)arg;
    void* r = NULL;
    CHECK_EQ(aco_rt_pthread_join(joined_by_other, &r), 0);
    CHECK(r == &tag[3]);
    return NULL;
}
static void* sleeper(void* arg) {
    CHECK_EQ(aco_rt_sleep((int64_t)(intptr_t)arg), 0);
    return &tag[3];
}

static aco_rt_pthread_t plain_id, self_t;     /* not on a share stack */
static void plain_co(void* arg) {
    *(aco_rt_pthread_t*)arg = aco_rt_pthread_self();
    CHECK(aco_rt_pthread_self() == (aco_rt_pthread_t)(uintptr_t)aco_rt_self());
    aco_rt_pthread_exit(NULL);          /* a co of aco_rt_spawn: it just ends */
}

static void* self_checker(void* arg) {
    aco_rt_pthread_t* want = (aco_rt_pthread_t*)arg;
    CHECK(aco_rt_pthread_equal(aco_rt_pthread_self(), *want));
    return NULL;
}

static void threads_join(void* arg) {
    (void)arg;
    aco_rt_pthread_t t, u;
    void* r = NULL;
    /* values from return and from exit in nested frames (destructors
     * first) */
    CHECK_EQ(aco_rt_pthread_create(&t, NULL, ret_arg, &tag[2]), 0);
    CHECK_EQ(aco_rt_pthread_join(t, &r), 0);
    CHECK(r == &tag[2]);
    ndlog = 0;
    CHECK_EQ(aco_rt_pthread_create(&t, NULL, exit_nested, &tag[0]), 0);
    CHECK_EQ(aco_rt_pthread_join(t, &r), 0);
    CHECK(r == &tag[0]);
    CHECK_EQ(ndlog, 1);
    CHECK_EQ(dlog[0], 1);
    CHECK_EQ(aco_rt_pthread_create(&t, NULL, ret_arg, NULL), 0);
    CHECK_EQ(aco_rt_pthread_join(t, NULL), 0);      /* ret NULL: fine */

    /* misuse */
    CHECK_EQ(aco_rt_pthread_join(aco_rt_pthread_self(), NULL), EDEADLK);
    CHECK_EQ(aco_rt_pthread_create(&t, NULL, NULL, NULL), EINVAL);
    aco_rt_pthread_attr_t a;
    aco_rt_pthread_attr_init(&a);
    a.detachstate_ = 9;
    CHECK_EQ(aco_rt_pthread_create(&t, &a, ret_arg, NULL), EINVAL);
    aco_rt_pthread_attr_init(&a);
    a.stacksize_ = 100;
    CHECK_EQ(aco_rt_pthread_create(&t, &a, ret_arg, NULL), EINVAL);
    /* a co of aco_rt_spawn, a thread's id: ESRCH */
    aco_rt_co_t* pc = aco_rt_spawn(NULL, plain_co, &plain_id);
    CHECK_EQ(aco_rt_yield(), 0);
    CHECK_EQ(aco_rt_pthread_join(plain_id, NULL), ESRCH);
    CHECK_EQ(aco_rt_pthread_detach(plain_id), ESRCH);
    CHECK_EQ(aco_rt_join(pc, -1), 0);
    /* second joiner: EINVAL; the first gets the value */
    CHECK_EQ(aco_rt_pthread_create(&joined_by_other, NULL, sleeper, (void*)(intptr_t)(2 * MS)), 0);
    CHECK_EQ(aco_rt_pthread_create(&u, NULL, other_joiner, NULL), 0);
    CHECK_EQ(aco_rt_yield(), 0);
    CHECK_EQ(aco_rt_pthread_join(joined_by_other, NULL), EINVAL);
    CHECK_EQ(aco_rt_pthread_join(u, NULL), 0);

    /* tryjoin, timedjoin */
    CHECK_EQ(aco_rt_pthread_create(&t, NULL, sleeper, (void*)(intptr_t)(30 * MS)), 0);
    CHECK_EQ(aco_rt_pthread_tryjoin_np(t, &r), EBUSY);
    struct timespec bad = {0, 1000000000};
    CHECK_EQ(aco_rt_pthread_timedjoin_np(t, &r, &bad), EINVAL);
    struct timespec ab = in_ns(CLOCK_REALTIME, 10 * MS);
    CHECK_EQ(aco_rt_pthread_timedjoin_np(t, &r, &ab), ETIMEDOUT);
    CHECK_GE(clock_ns(CLOCK_REALTIME), (int64_t)ab.tv_sec * 1000000000 + ab.tv_nsec);
    ab = in_ns(CLOCK_REALTIME, 5000 * MS);
    r = NULL;
    CHECK_EQ(aco_rt_pthread_timedjoin_np(t, &r, &ab), 0);
    CHECK(r == &tag[3]);
    /* a NULL abstime waits as join does (glibc's), here 20 ms */
    CHECK_EQ(aco_rt_pthread_create(&t, NULL, sleeper, (void*)(intptr_t)(20 * MS)), 0);
    int64_t t0 = aco_rt_now();
    r = NULL;
    CHECK_EQ(aco_rt_pthread_timedjoin_np(t, &r, NULL), 0);
    CHECK(r == &tag[3]);
    CHECK_GE(aco_rt_now() - t0, 20 * MS);
    CHECK_EQ(aco_rt_pthread_create(&t, NULL, ret_arg, &tag[1]), 0);
    CHECK_EQ(aco_rt_yield(), 0);
    CHECK_EQ(aco_rt_pthread_tryjoin_np(t, &r), 0);
    CHECK(r == &tag[1]);
    /* a bad abstime where t has ended: joined, 0, as glibc 2.36's (which
     * looks at abstime only to wait); EINVAL while t runs (above) */
    struct timespec bads[] = {{0, 1000000000}, {0, -1}};
    for (int i = 0; i < 2; i++) {
        CHECK_EQ(aco_rt_pthread_create(&t, NULL, ret_arg, &tag[2]), 0);
        CHECK_EQ(aco_rt_yield(), 0);
        r = NULL;
        CHECK_EQ(aco_rt_pthread_timedjoin_np(t, &r, &bads[i]), 0);
        CHECK(r == &tag[2]);
    }

    /* self and equal */
    CHECK_EQ(aco_rt_pthread_create(&self_t, NULL, self_checker, &self_t), 0);
    CHECK_EQ(aco_rt_pthread_join(self_t, NULL), 0);
    CHECK(aco_rt_pthread_equal(aco_rt_pthread_self(), aco_rt_pthread_self()));
    CHECK(!aco_rt_pthread_equal(aco_rt_pthread_self(), t));
}

static int det_done;
static void* det_co(void* arg) {
    if (arg) CHECK_EQ(aco_rt_sleep((int64_t)(intptr_t)arg), 0);
    CHECK_EQ(aco_rt_setspecific(K2, &tag[2]), 0);
    det_done++;
    return &tag[0];
}
static void* self_detach(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_pthread_detach(aco_rt_pthread_self()), 0);
    CHECK_EQ(aco_rt_sleep(MS), 0);
    det_done++;
    aco_rt_pthread_exit(NULL);          /* detached and exiting */
}

static void threads_detach(void* arg) {
    (void)arg;
    det_done = 0;
    ndlog = 0;
    aco_rt_pthread_t t;
    /* running, then detached */
    CHECK_EQ(aco_rt_pthread_create(&t, NULL, det_co, (void*)(intptr_t)MS), 0);
    CHECK_EQ(aco_rt_yield(), 0);
    CHECK_EQ(aco_rt_pthread_detach(t), 0);
    CHECK_EQ(aco_rt_pthread_detach(t), EINVAL);
    CHECK_EQ(aco_rt_pthread_join(t, NULL), EINVAL);
    /* ended, then detached */
    CHECK_EQ(aco_rt_pthread_create(&t, NULL, det_co, NULL), 0);
    CHECK_EQ(aco_rt_yield(), 0);
    CHECK_EQ(aco_rt_pthread_detach(t), 0);
    /* by attribute */
    aco_rt_pthread_attr_t a;
    aco_rt_pthread_attr_init(&a);
    aco_rt_pthread_attr_setdetachstate(&a, ACO_RT_PTHREAD_CREATE_DETACHED);
    CHECK_EQ(aco_rt_pthread_create(&t, &a, det_co, NULL), 0);
    CHECK_EQ(aco_rt_pthread_create(&t, NULL, self_detach, NULL), 0);
    while (det_done < 4) CHECK_EQ(aco_rt_sleep(MS), 0);
    CHECK_EQ(aco_rt_yield(), 0);
    CHECK_EQ(ndlog, 3);                 /* their destructors ran */
    aco_rt_stats_t st;
    aco_rt_stats(NULL, &st);
    CHECK_EQ(st.cos_alive, 1);          /* all gone but this one */
}

static void* yielder(void* arg) {
    int id = (int)(intptr_t)arg;
    for (int i = 0; i < 3; i++) {
        log_[nlog++] = id;
        CHECK_EQ(aco_rt_pthread_yield(), 0);
    }
    return NULL;
}

static void threads_yield(void* arg) {
    (void)arg;
    nlog = 0;
    aco_rt_pthread_t a, b;
    CHECK_EQ(aco_rt_pthread_create(&a, NULL, yielder, (void*)1), 0);
    CHECK_EQ(aco_rt_pthread_create(&b, NULL, yielder, (void*)2), 0);
    CHECK_EQ(aco_rt_pthread_join(a, NULL), 0);
    CHECK_EQ(aco_rt_pthread_join(b, NULL), 0);
    CHECK_EQ(nlog, 6);
    for (int i = 0; i < 6; i++) CHECK_EQ(log_[i], 1 + (i & 1));
}

/* a stack of its own: a big array, and a mutex on it that another co uses */
static void* share_mutex_user(void* arg) {
    aco_rt_pthread_mutex_t* m = (aco_rt_pthread_mutex_t*)arg;
    CHECK_EQ(aco_rt_pthread_mutex_lock(m), 0);
    log_[0]++;
    CHECK_EQ(aco_rt_pthread_mutex_unlock(m), 0);
    return NULL;
}
static void* big_stack(void* arg) {
    (void)arg;
    volatile char big[600 * 1024];
    for (size_t i = 0; i < sizeof(big); i += 4096) big[i] = (char)i;
    aco_rt_pthread_mutex_t m;
    CHECK_EQ(aco_rt_pthread_mutex_init(&m, NULL), 0);     /* not a share stack */
    CHECK_EQ(aco_rt_pthread_mutex_lock(&m), 0);
    aco_rt_pthread_t t;
    log_[0] = 0;
    CHECK_EQ(aco_rt_pthread_create(&t, NULL, share_mutex_user, &m), 0);
    CHECK_EQ(aco_rt_sleep(MS), 0);
    CHECK_EQ(log_[0], 0);
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&m), 0);
    CHECK_EQ(aco_rt_pthread_join(t, NULL), 0);
    CHECK_EQ(log_[0], 1);
    CHECK_EQ(aco_rt_pthread_mutex_destroy(&m), 0);
    for (size_t i = 0; i < sizeof(big); i += 4096) CHECK_EQ(big[i], (char)i);
    return NULL;
}

/* Is p in the frame around here?  Not when ASan's detect_stack_use_after_return
 * moved the locals to its fake stack, off the share stack. */
#define NEAR_FRAME(p) \
    ((uintptr_t)(p) - (uintptr_t)__builtin_frame_address(0) + 65536 < 131072)
#if defined(__SANITIZE_ADDRESS__)
#define TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TEST_ASAN 1
#endif
#endif
#ifndef TEST_ASAN
#define TEST_ASAN 0
#endif

static void threads_stack(void* arg) {
    (void)arg;
    /* on this co's share stack: refused */
    aco_rt_pthread_mutex_t m;
    aco_rt_pthread_cond_t c;
    aco_rt_pthread_rwlock_t l;
    aco_rt_pthread_barrier_t b;
    CHECK(TEST_ASAN || NEAR_FRAME(&m));
    if (NEAR_FRAME(&m)) {
        CHECK_EQ(aco_rt_pthread_mutex_init(&m, NULL), EINVAL);
        CHECK_EQ(aco_rt_pthread_cond_init(&c, NULL), EINVAL);
        CHECK_EQ(aco_rt_pthread_rwlock_init(&l, NULL), EINVAL);
        CHECK_EQ(aco_rt_pthread_barrier_init(&b, NULL, 2), EINVAL);
    }
    aco_rt_pthread_attr_t a;
    aco_rt_pthread_attr_init(&a);
    CHECK_EQ(aco_rt_pthread_attr_setstacksize(&a, 1 << 20), 0);
    aco_rt_pthread_t t;
    CHECK_EQ(aco_rt_pthread_create(&t, &a, big_stack, NULL), 0);
    CHECK_EQ(aco_rt_pthread_join(t, NULL), 0);
}

static void* no_sched_thread(void* arg) {
    (void)arg;
    aco_rt_pthread_t t;
    CHECK_EQ(aco_rt_pthread_create(&t, NULL, ret_arg, NULL), EPERM);
    /* a thread's id: odd, stable, its own */
    aco_rt_pthread_t me = aco_rt_pthread_self();
    CHECK(me & 1);
    CHECK(aco_rt_pthread_equal(me, aco_rt_pthread_self()));
    return (void*)(uintptr_t)me;
}

static void outside_cos(void) {
    aco_rt_pthread_t me = aco_rt_pthread_self(), other;
    CHECK(me & 1);
    pthread_t pt;
    void* r;
    CHECK_EQ(pthread_create(&pt, NULL, no_sched_thread, NULL), 0);
    CHECK_EQ(pthread_join(pt, &r), 0);
    other = (aco_rt_pthread_t)(uintptr_t)r;
    CHECK(!aco_rt_pthread_equal(me, other));
    CHECK_EQ(aco_rt_pthread_yield(), 0);        /* sched_yield */
    static aco_rt_pthread_mutex_t m = ACO_RT_PTHREAD_MUTEX_INITIALIZER;
    static aco_rt_pthread_cond_t c = ACO_RT_PTHREAD_COND_INITIALIZER;
    static aco_rt_pthread_rwlock_t l = ACO_RT_PTHREAD_RWLOCK_INITIALIZER;
    static aco_rt_pthread_barrier_t b;
    CHECK_EQ(aco_rt_pthread_barrier_init(&b, NULL, 2), 0);
    struct timespec ts = in_ns(CLOCK_REALTIME, 0);
    CHECK_EQ(aco_rt_pthread_mutex_lock(&m), EPERM);
    CHECK_EQ(aco_rt_pthread_mutex_trylock(&m), EPERM);
    CHECK_EQ(aco_rt_pthread_mutex_timedlock(&m, &ts), EPERM);
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&m), EPERM);
    CHECK_EQ(aco_rt_pthread_cond_wait(&c, &m), EPERM);
    CHECK_EQ(aco_rt_pthread_cond_timedwait(&c, &m, &ts), EPERM);
    CHECK_EQ(aco_rt_pthread_cond_signal(&c), 0);
    CHECK_EQ(aco_rt_pthread_cond_broadcast(&c), 0);
    CHECK_EQ(aco_rt_pthread_rwlock_rdlock(&l), EPERM);
    CHECK_EQ(aco_rt_pthread_rwlock_trywrlock(&l), EPERM);
    CHECK_EQ(aco_rt_pthread_rwlock_unlock(&l), EPERM);
    CHECK_EQ(aco_rt_pthread_barrier_wait(&b), EPERM);
    CHECK_EQ(aco_rt_pthread_join(me, NULL), EPERM);
    CHECK_EQ(aco_rt_pthread_barrier_destroy(&b), 0);
    int sig = test_in_child(exit_outside, NULL, NULL);
    CHECK_EQ(sig, SIGABRT);
    sig = test_in_child(pexit_outside, NULL, NULL);
    CHECK_EQ(sig, SIGABRT);
}

/* ======================================================================== */
/* Mutexes                                                                  */
/* ======================================================================== */

static aco_rt_pthread_mutex_t MN = ACO_RT_PTHREAD_MUTEX_INITIALIZER;
static aco_rt_pthread_mutex_t ME = ACO_RT_PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP;
static aco_rt_pthread_mutex_t MR = ACO_RT_PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static aco_rt_pthread_mutex_t MX;       /* for init/destroy */

static void* try_other(void* arg) {
    aco_rt_pthread_mutex_t* m = (aco_rt_pthread_mutex_t*)arg;
    CHECK_EQ(aco_rt_pthread_mutex_trylock(m), EBUSY);
    CHECK_EQ(aco_rt_pthread_mutex_unlock(m), EPERM);
    CHECK_EQ(aco_rt_pthread_mutex_lock(m), 0);      /* after the last unlock */
    log_[nlog++] = 2;
    CHECK_EQ(aco_rt_pthread_mutex_unlock(m), 0);
    return NULL;
}

static void mutex_kinds(void* arg) {
    (void)arg;
    aco_rt_pthread_mutex_t* two[] = {&MN, &ME};
    for (int i = 0; i < 2; i++) {
        aco_rt_pthread_mutex_t* m = two[i];
        CHECK_EQ(aco_rt_pthread_mutex_unlock(m), EPERM);        /* free */
        CHECK_EQ(aco_rt_pthread_mutex_lock(m), 0);
        CHECK_EQ(aco_rt_pthread_mutex_lock(m), EDEADLK);
        CHECK_EQ(aco_rt_pthread_mutex_trylock(m), EBUSY);
        struct timespec ts = in_ns(CLOCK_REALTIME, MS);
        CHECK_EQ(aco_rt_pthread_mutex_timedlock(m, &ts), EDEADLK);
        nlog = 0;
        aco_rt_pthread_t t;
        CHECK_EQ(aco_rt_pthread_create(&t, NULL, try_other, m), 0);
        CHECK_EQ(aco_rt_yield(), 0);
        log_[nlog++] = 1;
        CHECK_EQ(aco_rt_pthread_mutex_unlock(m), 0);
        CHECK_EQ(aco_rt_pthread_mutex_unlock(m), EPERM);
        CHECK_EQ(aco_rt_pthread_join(t, NULL), 0);
        CHECK_EQ(nlog, 2);
        CHECK_EQ(log_[0], 1);
        CHECK_EQ(log_[1], 2);
    }
    /* recursive: the others wait for the last unlock */
    nlog = 0;
    CHECK_EQ(aco_rt_pthread_mutex_lock(&MR), 0);
    CHECK_EQ(aco_rt_pthread_mutex_lock(&MR), 0);
    CHECK_EQ(aco_rt_pthread_mutex_trylock(&MR), 0);
    struct timespec ts = in_ns(CLOCK_REALTIME, MS);
    CHECK_EQ(aco_rt_pthread_mutex_timedlock(&MR, &ts), 0);
    aco_rt_pthread_t t;
    CHECK_EQ(aco_rt_pthread_create(&t, NULL, try_other, &MR), 0);
    CHECK_EQ(aco_rt_yield(), 0);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(aco_rt_pthread_mutex_unlock(&MR), 0);
        CHECK_EQ(aco_rt_yield(), 0);
        CHECK_EQ(nlog, 0);              /* still held */
    }
    log_[nlog++] = 1;
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&MR), 0);
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&MR), EPERM);
    CHECK_EQ(aco_rt_pthread_join(t, NULL), 0);
    CHECK_EQ(nlog, 2);

    /* attributes, init, destroy */
    aco_rt_pthread_mutexattr_t a;
    int v = -1;
    CHECK_EQ(aco_rt_pthread_mutexattr_init(&a), 0);
    CHECK_EQ(aco_rt_pthread_mutexattr_gettype(&a, &v), 0);
    CHECK_EQ(v, ACO_RT_PTHREAD_MUTEX_DEFAULT);
    CHECK_EQ(aco_rt_pthread_mutexattr_settype(&a, 42), EINVAL);
    CHECK_EQ(aco_rt_pthread_mutexattr_settype(&a, ACO_RT_PTHREAD_MUTEX_RECURSIVE), 0);
    CHECK_EQ(aco_rt_pthread_mutexattr_gettype(&a, &v), 0);
    CHECK_EQ(v, ACO_RT_PTHREAD_MUTEX_RECURSIVE);
    CHECK_EQ(aco_rt_pthread_mutexattr_setpshared(&a, ACO_RT_PTHREAD_PROCESS_SHARED), ENOTSUP);
    CHECK_EQ(aco_rt_pthread_mutexattr_setpshared(&a, 5), EINVAL);
    CHECK_EQ(aco_rt_pthread_mutexattr_setpshared(&a, ACO_RT_PTHREAD_PROCESS_PRIVATE), 0);
    CHECK_EQ(aco_rt_pthread_mutexattr_getpshared(&a, &v), 0);
    CHECK_EQ(v, ACO_RT_PTHREAD_PROCESS_PRIVATE);
    CHECK_EQ(aco_rt_pthread_mutex_init(&MX, &a), 0);
    CHECK_EQ(aco_rt_pthread_mutexattr_destroy(&a), 0);
    CHECK_EQ(aco_rt_pthread_mutex_lock(&MX), 0);
    CHECK_EQ(aco_rt_pthread_mutex_lock(&MX), 0);
    CHECK_EQ(aco_rt_pthread_mutex_destroy(&MX), EBUSY);
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&MX), 0);
    CHECK_EQ(aco_rt_pthread_mutex_destroy(&MX), EBUSY);
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&MX), 0);
    CHECK_EQ(aco_rt_pthread_mutex_destroy(&MX), 0);
    CHECK_EQ(aco_rt_pthread_mutex_lock(&MX), EINVAL);
    CHECK_EQ(aco_rt_pthread_mutex_trylock(&MX), EINVAL);
    CHECK_EQ(aco_rt_pthread_mutex_destroy(&MX), EINVAL);
    CHECK_EQ(aco_rt_pthread_mutex_init(&MX, NULL), 0);
    CHECK_EQ(aco_rt_pthread_mutex_lock(&MX), 0);
    CHECK_EQ(aco_rt_pthread_mutex_lock(&MX), EDEADLK);      /* NORMAL now */
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&MX), 0);
    CHECK_EQ(aco_rt_pthread_mutex_destroy(&MX), 0);
}

/* timedlock: held by another co */
static aco_rt_sem_t hold_go;
static void* mutex_holder(void* arg) {
    aco_rt_pthread_mutex_t* m = (aco_rt_pthread_mutex_t*)arg;
    CHECK_EQ(aco_rt_pthread_mutex_lock(m), 0);
    CHECK_EQ(aco_rt_sem_wait(&hold_go, -1), 0);
    CHECK_EQ(aco_rt_pthread_mutex_unlock(m), 0);
    return NULL;
}

static void mutex_timed(void* arg) {
    (void)arg;
    aco_rt_sem_init(&hold_go, 0);
    aco_rt_pthread_t t;
    struct timespec ts;
    /* free, abstime passed or bad: taken */
    ts = in_ns(CLOCK_REALTIME, -1000 * MS);
    CHECK_EQ(aco_rt_pthread_mutex_timedlock(&MN, &ts), 0);
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&MN), 0);
    ts.tv_nsec = -1;
    CHECK_EQ(aco_rt_pthread_mutex_timedlock(&MN, &ts), 0);
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&MN), 0);
    CHECK_EQ(aco_rt_pthread_mutex_clocklock(&MN, CLOCK_PROCESS_CPUTIME_ID, &ts), EINVAL);

    CHECK_EQ(aco_rt_pthread_create(&t, NULL, mutex_holder, &MN), 0);
    CHECK_EQ(aco_rt_yield(), 0);
    ts.tv_nsec = 1000000000;
    CHECK_EQ(aco_rt_pthread_mutex_timedlock(&MN, &ts), EINVAL);   /* must wait */
    ts = in_ns(CLOCK_REALTIME, -MS);
    CHECK_EQ(aco_rt_pthread_mutex_timedlock(&MN, &ts), ETIMEDOUT);
    for (int i = 0; i < 5; i++) {
        int64_t wait = (i + 1) * 3 * MS;
        ts = in_ns(CLOCK_REALTIME, wait);
        CHECK_EQ(aco_rt_pthread_mutex_timedlock(&MN, &ts), ETIMEDOUT);
        CHECK_GE(clock_ns(CLOCK_REALTIME), (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec);
        ts = in_ns(CLOCK_MONOTONIC, wait);
        CHECK_EQ(aco_rt_pthread_mutex_clocklock(&MN, CLOCK_MONOTONIC, &ts), ETIMEDOUT);
        CHECK_GE(clock_ns(CLOCK_MONOTONIC), (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec);
    }
    /* released before the abstime: 0 */
    aco_rt_sem_post(&hold_go);
    ts = in_ns(CLOCK_REALTIME, 5000 * MS);
    CHECK_EQ(aco_rt_pthread_mutex_timedlock(&MN, &ts), 0);
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&MN), 0);
    CHECK_EQ(aco_rt_pthread_join(t, NULL), 0);
}

/* ======================================================================== */
/* Conds                                                                    */
/* ======================================================================== */

static aco_rt_pthread_cond_t CV = ACO_RT_PTHREAD_COND_INITIALIZER;
static aco_rt_pthread_cond_t CVM;       /* CLOCK_MONOTONIC */
static int cv_ready;

static void* cv_waiter(void* arg) {
    int id = (int)(intptr_t)arg;
    CHECK_EQ(aco_rt_pthread_mutex_lock(&MN), 0);
    while (cv_ready == 0) CHECK_EQ(aco_rt_pthread_cond_wait(&CV, &MN), 0);
    cv_ready--;
    log_[nlog++] = id;
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&MN), 0);
    return NULL;
}

static void cond_basic(void* arg) {
    (void)arg;
    nlog = 0;
    cv_ready = 0;
    aco_rt_pthread_t t[5];
    for (int i = 0; i < 5; i++)
        CHECK_EQ(aco_rt_pthread_create(&t[i], NULL, cv_waiter, (void*)(intptr_t)i), 0);
    CHECK_EQ(aco_rt_yield(), 0);
    CHECK_EQ(aco_rt_pthread_cond_wait(&CV, &MN), EPERM);   /* not held */
    for (int i = 0; i < 2; i++) {       /* one each, in order */
        CHECK_EQ(aco_rt_pthread_mutex_lock(&MN), 0);
        cv_ready++;
        CHECK_EQ(aco_rt_pthread_cond_signal(&CV), 0);
        CHECK_EQ(aco_rt_pthread_mutex_unlock(&MN), 0);
        CHECK_EQ(aco_rt_yield(), 0);
        CHECK_EQ(nlog, i + 1);
        CHECK_EQ(log_[i], i);
    }
    CHECK_EQ(aco_rt_pthread_cond_destroy(&CV), EBUSY);
    CHECK_EQ(aco_rt_pthread_mutex_lock(&MN), 0);
    cv_ready = 3;
    CHECK_EQ(aco_rt_pthread_cond_broadcast(&CV), 0);
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&MN), 0);
    for (int i = 0; i < 5; i++) CHECK_EQ(aco_rt_pthread_join(t[i], NULL), 0);
    CHECK_EQ(nlog, 5);
    CHECK_EQ(aco_rt_pthread_cond_destroy(&CV), 0);
    CHECK_EQ(aco_rt_pthread_cond_init(&CV, NULL), 0);
}

static void cond_timed(void* arg) {
    (void)arg;
    aco_rt_pthread_condattr_t a;
    clockid_t clk = -1;
    int ps = -1;
    CHECK_EQ(aco_rt_pthread_condattr_init(&a), 0);
    CHECK_EQ(aco_rt_pthread_condattr_getclock(&a, &clk), 0);
    CHECK_EQ(clk, CLOCK_REALTIME);
    CHECK_EQ(aco_rt_pthread_condattr_setclock(&a, CLOCK_THREAD_CPUTIME_ID), EINVAL);
    CHECK_EQ(aco_rt_pthread_condattr_setclock(&a, CLOCK_MONOTONIC), 0);
    CHECK_EQ(aco_rt_pthread_condattr_getclock(&a, &clk), 0);
    CHECK_EQ(clk, CLOCK_MONOTONIC);
    CHECK_EQ(aco_rt_pthread_condattr_setpshared(&a, ACO_RT_PTHREAD_PROCESS_SHARED), ENOTSUP);
    CHECK_EQ(aco_rt_pthread_condattr_getpshared(&a, &ps), 0);
    CHECK_EQ(ps, ACO_RT_PTHREAD_PROCESS_PRIVATE);
    CHECK_EQ(aco_rt_pthread_cond_init(&CVM, &a), 0);
    CHECK_EQ(aco_rt_pthread_condattr_destroy(&a), 0);

    CHECK_EQ(aco_rt_pthread_mutex_lock(&MN), 0);
    struct timespec ts = {0, -5};
    CHECK_EQ(aco_rt_pthread_cond_timedwait(&CV, &MN, &ts), EINVAL);
    ts = in_ns(CLOCK_REALTIME, -MS);
    CHECK_EQ(aco_rt_pthread_cond_timedwait(&CV, &MN, &ts), ETIMEDOUT);
    for (int i = 0; i < 5; i++) {
        int64_t wait = (i + 1) * 3 * MS;
        ts = in_ns(CLOCK_REALTIME, wait);
        CHECK_EQ(aco_rt_pthread_cond_timedwait(&CV, &MN, &ts), ETIMEDOUT);
        CHECK_GE(clock_ns(CLOCK_REALTIME), (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec);
        ts = in_ns(CLOCK_MONOTONIC, wait);
        CHECK_EQ(aco_rt_pthread_cond_timedwait(&CVM, &MN, &ts), ETIMEDOUT);
        CHECK_GE(clock_ns(CLOCK_MONOTONIC), (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec);
        ts = in_ns(CLOCK_MONOTONIC, wait);
        CHECK_EQ(aco_rt_pthread_cond_clockwait(&CV, &MN, CLOCK_MONOTONIC, &ts), ETIMEDOUT);
        CHECK_GE(clock_ns(CLOCK_MONOTONIC), (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec);
    }
    CHECK_EQ(aco_rt_pthread_cond_clockwait(&CV, &MN, CLOCK_BOOTTIME, &ts), EINVAL);
    /* held again after every timeout */
    CHECK_EQ(aco_rt_pthread_mutex_lock(&MN), EDEADLK);
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&MN), 0);
    CHECK_EQ(aco_rt_pthread_cond_destroy(&CVM), 0);
}

/* A RECURSIVE mutex held twice: a cond wait lets go of it fully. */
static void* rec_taker(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_pthread_mutex_lock(&MR), 0);
    log_[nlog++] = 7;
    CHECK_EQ(aco_rt_pthread_cond_signal(&CV), 0);
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&MR), 0);
    return NULL;
}

static void cond_recursive(void* arg) {
    (void)arg;
    nlog = 0;
    CHECK_EQ(aco_rt_pthread_mutex_lock(&MR), 0);
    CHECK_EQ(aco_rt_pthread_mutex_lock(&MR), 0);
    aco_rt_pthread_t t;
    CHECK_EQ(aco_rt_pthread_create(&t, NULL, rec_taker, NULL), 0);
    while (nlog == 0) CHECK_EQ(aco_rt_pthread_cond_wait(&CV, &MR), 0);
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&MR), 0);
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&MR), 0);        /* twice, as before */
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&MR), EPERM);
    CHECK_EQ(aco_rt_pthread_join(t, NULL), 0);
}

/* A cancelled co's cond wait: ECANCELED, the mutex held. */
static void* cancel_waiter(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_pthread_mutex_lock(&MR), 0);
    CHECK_EQ(aco_rt_pthread_mutex_lock(&ME), 0);
    CHECK_EQ(aco_rt_pthread_cond_wait(&CV, &ME), ECANCELED);
    CHECK_EQ(aco_rt_pthread_mutex_lock(&ME), EDEADLK);     /* (before ECANCELED) */
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&ME), 0);
    /* a RECURSIVE mutex it holds: no more locking (a loop of lock and
     * unlock hears the cancel), the trylock and unlock still work */
    struct timespec ts = {0, 0};
    CHECK_EQ(aco_rt_pthread_mutex_lock(&MR), ECANCELED);
    CHECK_EQ(aco_rt_pthread_mutex_timedlock(&MR, &ts), ECANCELED);
    CHECK_EQ(aco_rt_pthread_mutex_trylock(&MR), 0);
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&MR), 0);
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&MR), 0);
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&MR), EPERM);     /* let go of */
    return &tag[1];
}

static void cond_cancel(void* arg) {
    (void)arg;
    aco_rt_pthread_t t;
    CHECK_EQ(aco_rt_pthread_create(&t, NULL, cancel_waiter, NULL), 0);
    CHECK_EQ(aco_rt_yield(), 0);
    CHECK_EQ(aco_rt_cancel((aco_rt_co_t*)(uintptr_t)t), 0);
    void* r = NULL;
    CHECK_EQ(aco_rt_pthread_join(t, &r), 0);
    CHECK(r == &tag[1]);
}

/* ======================================================================== */
/* Once                                                                     */
/* ======================================================================== */

static aco_rt_pthread_once_t ONCE = ACO_RT_PTHREAD_ONCE_INIT;
static aco_rt_pthread_once_t ONCE_REC = ACO_RT_PTHREAD_ONCE_INIT;
static int once_runs, once_done;

static void once_init(void) {
    once_runs++;
    CHECK_EQ(aco_rt_sleep(10 * MS), 0);         /* others come meanwhile */
    CHECK_EQ(aco_rt_yield(), 0);
    once_done = 1;
}

static void* once_caller(void* arg) {
    if (arg) CHECK_EQ(aco_rt_sleep((int64_t)(intptr_t)arg), 0);
    CHECK_EQ(aco_rt_pthread_once(&ONCE, once_init), 0);
    CHECK_EQ(once_done, 1);
    return NULL;
}

static void once_rec_init(void) {
    CHECK_EQ(aco_rt_pthread_once(&ONCE_REC, once_rec_init), EDEADLK);
}

static void once_test(void* arg) {
    (void)arg;
    aco_rt_pthread_t t[50];
    for (int i = 0; i < 50; i++)
        CHECK_EQ(aco_rt_pthread_create(&t[i], NULL, once_caller, (void*)(intptr_t)(i % 5 * MS)), 0);
    for (int i = 0; i < 50; i++) CHECK_EQ(aco_rt_pthread_join(t[i], NULL), 0);
    CHECK_EQ(once_runs, 1);
    CHECK_EQ(aco_rt_pthread_once(&ONCE_REC, once_rec_init), 0);
}

/* ======================================================================== */
/* rwlock, barrier                                                          */
/* ======================================================================== */

static aco_rt_pthread_rwlock_t RW = ACO_RT_PTHREAD_RWLOCK_INITIALIZER;
static int readers_in, writers_in, max_readers;

static void* rw_reader(void* arg) {
    (void)arg;
    for (int i = 0; i < 20; i++) {
        CHECK_EQ(aco_rt_pthread_rwlock_rdlock(&RW), 0);
        CHECK_EQ(writers_in, 0);
        if (++readers_in > max_readers) max_readers = readers_in;
        CHECK_EQ(aco_rt_yield(), 0);
        CHECK_EQ(writers_in, 0);
        readers_in--;
        CHECK_EQ(aco_rt_pthread_rwlock_unlock(&RW), 0);
        CHECK_EQ(aco_rt_yield(), 0);
    }
    return NULL;
}

static void* rw_writer(void* arg) {
    (void)arg;
    for (int i = 0; i < 10; i++) {
        CHECK_EQ(aco_rt_pthread_rwlock_wrlock(&RW), 0);
        CHECK_EQ(aco_rt_pthread_rwlock_wrlock(&RW), EDEADLK);
        CHECK_EQ(aco_rt_pthread_rwlock_rdlock(&RW), EDEADLK);
        CHECK_EQ(readers_in + writers_in, 0);
        writers_in++;
        CHECK_EQ(aco_rt_yield(), 0);
        writers_in--;
        CHECK_EQ(aco_rt_pthread_rwlock_unlock(&RW), 0);
        CHECK_EQ(aco_rt_yield(), 0);
    }
    return NULL;
}

static aco_rt_sem_t rw_go;
static void* rw_hold_read(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_pthread_rwlock_rdlock(&RW), 0);
    CHECK_EQ(aco_rt_sem_wait(&rw_go, -1), -ECANCELED);
    /* cancelled: unlocking still works */
    CHECK_EQ(aco_rt_pthread_rwlock_unlock(&RW), 0);
    return NULL;
}
static void* rw_wait_write(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_pthread_rwlock_wrlock(&RW), 0);
    log_[nlog++] = 5;
    CHECK_EQ(aco_rt_pthread_rwlock_unlock(&RW), 0);
    return NULL;
}

static void rwlock_test(void* arg) {
    (void)arg;
    aco_rt_pthread_rwlockattr_t a;
    int ps = -1;
    CHECK_EQ(aco_rt_pthread_rwlockattr_init(&a), 0);
    CHECK_EQ(aco_rt_pthread_rwlockattr_setpshared(&a, ACO_RT_PTHREAD_PROCESS_SHARED), ENOTSUP);
    CHECK_EQ(aco_rt_pthread_rwlockattr_getpshared(&a, &ps), 0);
    CHECK_EQ(ps, ACO_RT_PTHREAD_PROCESS_PRIVATE);
    CHECK_EQ(aco_rt_pthread_rwlock_init(&RW, &a), 0);
    CHECK_EQ(aco_rt_pthread_rwlockattr_destroy(&a), 0);
    CHECK_EQ(aco_rt_pthread_rwlock_unlock(&RW), EPERM);
    /* a bad abstime: EINVAL though the lock is free (glibc checks it
     * first), and nothing taken */
    struct timespec bad[2] = {{0, -1}, {0, 1000000000}};
    for (int i = 0; i < 2; i++) {
        CHECK_EQ(aco_rt_pthread_rwlock_timedrdlock(&RW, &bad[i]), EINVAL);
        CHECK_EQ(aco_rt_pthread_rwlock_timedwrlock(&RW, &bad[i]), EINVAL);
    }
    CHECK_EQ(aco_rt_pthread_rwlock_unlock(&RW), EPERM);

    readers_in = writers_in = max_readers = 0;
    aco_rt_pthread_t t[8];
    for (int i = 0; i < 8; i++)
        CHECK_EQ(aco_rt_pthread_create(&t[i], NULL, i % 4 == 3 ? rw_writer : rw_reader, NULL), 0);
    for (int i = 0; i < 8; i++) CHECK_EQ(aco_rt_pthread_join(t[i], NULL), 0);
    CHECK_GE(max_readers, 3);           /* readers were in together */

    /* tries and deadlines */
    CHECK_EQ(aco_rt_pthread_rwlock_rdlock(&RW), 0);
    CHECK_EQ(aco_rt_pthread_rwlock_tryrdlock(&RW), 0);
    CHECK_EQ(aco_rt_pthread_rwlock_trywrlock(&RW), EBUSY);
    struct timespec ts = in_ns(CLOCK_REALTIME, 5 * MS);
    CHECK_EQ(aco_rt_pthread_rwlock_timedwrlock(&RW, &ts), ETIMEDOUT);
    CHECK_GE(clock_ns(CLOCK_REALTIME), (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec);
    ts.tv_nsec = 2000000000;
    CHECK_EQ(aco_rt_pthread_rwlock_timedwrlock(&RW, &ts), EINVAL);
    CHECK_EQ(aco_rt_pthread_rwlock_destroy(&RW), EBUSY);
    CHECK_EQ(aco_rt_pthread_rwlock_unlock(&RW), 0);
    CHECK_EQ(aco_rt_pthread_rwlock_unlock(&RW), 0);
    CHECK_EQ(aco_rt_pthread_rwlock_unlock(&RW), EPERM);
    CHECK_EQ(aco_rt_pthread_rwlock_wrlock(&RW), 0);
    CHECK_EQ(aco_rt_pthread_rwlock_tryrdlock(&RW), EDEADLK);
    CHECK_EQ(aco_rt_pthread_rwlock_trywrlock(&RW), EDEADLK);
    ts = in_ns(CLOCK_REALTIME, MS);
    CHECK_EQ(aco_rt_pthread_rwlock_timedrdlock(&RW, &ts), EDEADLK);
    CHECK_EQ(aco_rt_pthread_rwlock_unlock(&RW), 0);

    /* a reader holds it; a writer waits; the reader reads again (readers
     * first); cancelled, it can still unlock; then the writer gets in */
    nlog = 0;
    aco_rt_sem_init(&rw_go, 0);
    aco_rt_pthread_t r, w;
    CHECK_EQ(aco_rt_pthread_create(&r, NULL, rw_hold_read, NULL), 0);
    CHECK_EQ(aco_rt_yield(), 0);
    CHECK_EQ(aco_rt_pthread_create(&w, NULL, rw_wait_write, NULL), 0);
    CHECK_EQ(aco_rt_yield(), 0);
    ts = in_ns(CLOCK_REALTIME, 1000 * MS);
    CHECK_EQ(aco_rt_pthread_rwlock_timedrdlock(&RW, &ts), 0);    /* past the writer */
    CHECK_EQ(aco_rt_pthread_rwlock_unlock(&RW), 0);
    CHECK_EQ(nlog, 0);
    CHECK_EQ(aco_rt_cancel((aco_rt_co_t*)(uintptr_t)r), 0);
    CHECK_EQ(aco_rt_pthread_join(r, NULL), 0);
    CHECK_EQ(aco_rt_pthread_join(w, NULL), 0);
    CHECK_EQ(nlog, 1);
    CHECK_EQ(aco_rt_pthread_rwlock_destroy(&RW), 0);
}

static aco_rt_pthread_barrier_t BAR;
static int bar_round_count[3], serials[3];

static void* bar_co(void* arg) {
    (void)arg;
    for (int r = 0; r < 3; r++) {
        bar_round_count[r]++;
        int rc = aco_rt_pthread_barrier_wait(&BAR);
        CHECK(rc == 0 || rc == ACO_RT_PTHREAD_BARRIER_SERIAL_THREAD);
        if (rc) serials[r]++;
        CHECK_EQ(bar_round_count[r], 5);        /* nobody through early */
    }
    return NULL;
}

static void barrier_test(void* arg) {
    (void)arg;
    aco_rt_pthread_barrierattr_t a;
    int ps = -1;
    CHECK_EQ(aco_rt_pthread_barrierattr_init(&a), 0);
    CHECK_EQ(aco_rt_pthread_barrierattr_setpshared(&a, ACO_RT_PTHREAD_PROCESS_SHARED), ENOTSUP);
    CHECK_EQ(aco_rt_pthread_barrierattr_getpshared(&a, &ps), 0);
    CHECK_EQ(ps, ACO_RT_PTHREAD_PROCESS_PRIVATE);
    CHECK_EQ(aco_rt_pthread_barrier_init(&BAR, &a, 0), EINVAL);
    CHECK_EQ(aco_rt_pthread_barrier_init(&BAR, &a, 5), 0);
    CHECK_EQ(aco_rt_pthread_barrierattr_destroy(&a), 0);
    memset(bar_round_count, 0, sizeof(bar_round_count));
    memset(serials, 0, sizeof(serials));
    aco_rt_pthread_t t[5];
    for (int i = 0; i < 4; i++) CHECK_EQ(aco_rt_pthread_create(&t[i], NULL, bar_co, NULL), 0);
    CHECK_EQ(aco_rt_sleep(MS), 0);
    CHECK_EQ(bar_round_count[0], 4);
    CHECK_EQ(aco_rt_pthread_barrier_destroy(&BAR), EBUSY);
    CHECK_EQ(aco_rt_pthread_create(&t[4], NULL, bar_co, NULL), 0);
    for (int i = 0; i < 5; i++) CHECK_EQ(aco_rt_pthread_join(t[i], NULL), 0);
    for (int r = 0; r < 3; r++) CHECK_EQ(serials[r], 1);
    CHECK_EQ(aco_rt_pthread_barrier_destroy(&BAR), 0);
}

/* The co that gets SERIAL destroys the barrier and gives its memory back
 * (POSIX lets it: the others, woken, are no longer in it): the others
 * must not touch it after their wake.  The barrier on a page of its own,
 * unmapped: a touch is a SIGSEGV.  Cos of this scheduler and of a pool's
 * two threads. */
static aco_rt_pthread_barrier_t* bar_page;
static int bar_serial, bar_other;
static void* bar_free_co(void* arg) {
    (void)arg;
    int rc = aco_rt_pthread_barrier_wait(bar_page);
    if (rc == ACO_RT_PTHREAD_BARRIER_SERIAL_THREAD) {
        CHECK_EQ(aco_rt_pthread_barrier_destroy(bar_page), 0);
        CHECK_EQ(munmap(bar_page, 4096), 0);
        __atomic_fetch_add(&bar_serial, 1, __ATOMIC_RELAXED);
    } else {
        CHECK_EQ(rc, 0);
        __atomic_fetch_add(&bar_other, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}
static void bar_free_co_v(void* arg) { bar_free_co(arg); }
static void bar_page_new(unsigned n) {
    bar_page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(bar_page != MAP_FAILED);
    CHECK_EQ(aco_rt_pthread_barrier_init(bar_page, NULL, n), 0);
    bar_serial = bar_other = 0;
}
static void barrier_freed(void* arg) {
    (void)arg;
    aco_rt_pthread_t t[3];
    bar_page_new(3);
    for (int i = 0; i < 3; i++) CHECK_EQ(aco_rt_pthread_create(&t[i], NULL, bar_free_co, NULL), 0);
    for (int i = 0; i < 3; i++) CHECK_EQ(aco_rt_pthread_join(t[i], NULL), 0);
    CHECK_EQ(bar_serial, 1);
    CHECK_EQ(bar_other, 2);
}
static void barrier_freed_pool(void) {
    aco_rt_pool_opts_t o = {0};
    o.threads = 2;
    aco_rt_pool_t* p = aco_rt_pool_new(&o);
    CHECK(p != NULL);
    for (int round = 0; round < (FEW ? 50 : 500); round++) {
        bar_page_new(4);
        for (int i = 0; i < 4; i++) {
            aco_rt_co_t* co = aco_rt_pool_spawn(p, bar_free_co_v, NULL, NULL);
            CHECK(co != NULL);
            CHECK_EQ(aco_rt_detach(co), 0);
        }
        CHECK_EQ(aco_rt_pool_wait(p, ACO_RT_POOL_DRAIN, aco_rt_now() + 60000 * MS), 0);
        CHECK_EQ(bar_serial, 1);
        CHECK_EQ(bar_other, 3);
    }
    aco_rt_pool_free(p);
}

/* ======================================================================== */

static void keys_setup(void) {
    CHECK_EQ(aco_rt_key_create(&K1, d1), 0);
    CHECK_EQ(aco_rt_key_create(&K2, d2), 0);
    CHECK_EQ(aco_rt_key_create(&K3, d3), 0);
    CHECK_EQ(aco_rt_pthread_key_create(&KN, NULL), 0);
    CHECK_EQ(aco_rt_key_create(&KR, dr), 0);
    CHECK_EQ(aco_rt_key_create(&KR2, dr2), 0);
    CHECK_EQ(aco_rt_key_create(&KM[0], dmany), 0);
    CHECK_EQ(aco_rt_key_create(&KM[1], dmany), 0);
    /* a slot far up: the values' array grows */
    static aco_rt_key_t pad[200];
    for (int i = 0; i < 200; i++) CHECK_EQ(aco_rt_key_create(&pad[i], NULL), 0);
    CHECK_EQ(aco_rt_key_create(&KM[2], dmany), 0);
    for (int i = 0; i < 200; i++) CHECK_EQ(aco_rt_key_delete(pad[i]), 0);
    CHECK_GE(KM[2] & (ACO_RT_KEYS_MAX - 1), 200);
}

static void body(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    S = s;
    test_go(s, keys_basic, NULL);
    test_go(s, keys_rounds, NULL);
    test_go(s, keys_deleted, NULL);
    test_go(s, keys_reuse, NULL);
    test_go(s, keys_many, NULL);
    test_go(s, keys_all, NULL);
    test_go(s, keys_exit, NULL);
    keys_threads();
    keys_multithread();
    keys_sched_free();

    attrs();
    test_go(s, threads_join, NULL);
    test_go(s, threads_detach, NULL);
    test_go(s, threads_yield, NULL);
    test_go(s, threads_stack, NULL);
    outside_cos();

    test_go(s, mutex_kinds, NULL);
    test_go(s, mutex_timed, NULL);
    test_go(s, cond_basic, NULL);
    test_go(s, cond_timed, NULL);
    test_go(s, cond_recursive, NULL);
    test_go(s, cond_cancel, NULL);

    once_runs = once_done = 0;
    ONCE = (aco_rt_pthread_once_t)ACO_RT_PTHREAD_ONCE_INIT;
    CHECK_EQ(aco_rt_pthread_once(&ONCE, once_init), EPERM);    /* not done, no co */
    test_go(s, once_test, NULL);
    CHECK_EQ(aco_rt_pthread_once(&ONCE, once_init), 0);        /* done */
    CHECK_EQ(once_runs, 1);

    test_go(s, rwlock_test, NULL);
    test_go(s, barrier_test, NULL);
    test_go(s, barrier_freed, NULL);

    aco_rt_stats_t st;
    aco_rt_stats(s, &st);
    CHECK_EQ(st.cos_alive, 0);
}

int main(void) {
    keys_setup();
    test_on_backends(NULL, body, NULL);
    barrier_freed_pool();
    return 0;
}
