/* test_pthread_bb_mutex.c - the pthread face's mutexes taken at the word of
 * rt/aco_rt_pthread.h, beside glibc's where it says "as pthreads": kinds,
 * trylock, timedlock and clocklock with bad and passed abstimes, unlock by
 * a non-holder, destroy while held, refused objects, FIFO hand-over,
 * cancel, EPERM outside cos; across the cos of a 2-thread pool. */
#include "pthread_bb.h"

#include <limits.h>

static aco_rt_pthread_mutex_t m_norm, m_err, m_rec, m_zero;
static aco_rt_pthread_mutex_t m_static_rec = ACO_RT_PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static aco_rt_pthread_mutex_t m_static_err = ACO_RT_PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP;
static aco_rt_pthread_mutex_t m_static = ACO_RT_PTHREAD_MUTEX_INITIALIZER;

static void init_kind(aco_rt_pthread_mutex_t* m, int kind) {
    aco_rt_pthread_mutexattr_t a;
    CHECK_EQ(aco_rt_pthread_mutexattr_init(&a), 0);
    CHECK_EQ(aco_rt_pthread_mutexattr_settype(&a, kind), 0);
    int t = -5;
    CHECK_EQ(aco_rt_pthread_mutexattr_gettype(&a, &t), 0);
    CHECK_EQ(t, kind);
    CHECK_EQ(aco_rt_pthread_mutex_init(m, &a), 0);
    CHECK_EQ(aco_rt_pthread_mutexattr_destroy(&a), 0);
}

/* ---- glibc's answers, the same calls on real pthreads ---------------- */

typedef struct {
    int err_relock, err_trylock_self, rec_trylock_self, norm_trylock_self;
    int err_unlock_unheld, rec_unlock_unheld;
    int destroy_held;
    int timed_bad_free, timed_bad_held, timed_passed_held, timed_negsec_held;
    int timed_err_self;
    int clock_bad_clk_held;
    int settype_bad, setpshared_bad;
} glibc_ans_t;

static pthread_mutex_t g_m;
static glibc_ans_t g;
static void* g_holder(void* arg) {
    (void)arg;
    /* g_m is held by the main thread: a non-holder's calls */
#if TEST_TSAN
    g.err_unlock_unheld = EPERM;    /* TSan reports the call; glibc 2.36: EPERM */
#else
    g.err_unlock_unheld = pthread_mutex_unlock(&g_m);
#endif
    struct timespec bad = bb_bad_ns_hi, past = bb_abs(CLOCK_REALTIME, -1000);
    struct timespec neg = {-1, 0};
    g.timed_bad_held = pthread_mutex_timedlock(&g_m, &bad);
    g.timed_passed_held = pthread_mutex_timedlock(&g_m, &past);
    g.timed_negsec_held = pthread_mutex_timedlock(&g_m, &neg);
    struct timespec soon = bb_abs(CLOCK_REALTIME, -1);
    g.clock_bad_clk_held = pthread_mutex_clocklock(&g_m, CLOCK_PROCESS_CPUTIME_ID, &soon);
    return NULL;
}

static void glibc_answers(void) {
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    g.settype_bad = pthread_mutexattr_settype(&a, 77);
    g.setpshared_bad = pthread_mutexattr_setpshared(&a, 5);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ERRORCHECK);
    pthread_mutex_init(&g_m, &a);
    CHECK_EQ(pthread_mutex_lock(&g_m), 0);
    g.err_relock = pthread_mutex_lock(&g_m);
    g.err_trylock_self = pthread_mutex_trylock(&g_m);
    struct timespec far = bb_abs(CLOCK_REALTIME, 10000);
    g.timed_err_self = pthread_mutex_timedlock(&g_m, &far);
#if TEST_TSAN
    g.destroy_held = EBUSY;     /* TSan reports the call itself; glibc 2.36 says EBUSY */
#else
    g.destroy_held = pthread_mutex_destroy(&g_m);
#endif
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, g_holder, NULL), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
    CHECK_EQ(pthread_mutex_unlock(&g_m), 0);
    struct timespec bad = bb_bad_ns_hi;
    g.timed_bad_free = pthread_mutex_timedlock(&g_m, &bad);
    if (g.timed_bad_free == 0) pthread_mutex_unlock(&g_m);
    pthread_mutex_destroy(&g_m);

    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&g_m, &a);
    CHECK_EQ(pthread_mutex_lock(&g_m), 0);
    g.rec_trylock_self = pthread_mutex_trylock(&g_m);
    pthread_mutex_unlock(&g_m);
    pthread_mutex_unlock(&g_m);
#if TEST_TSAN
    g.rec_unlock_unheld = EPERM;    /* TSan reports the call; glibc 2.36: EPERM */
#else
    g.rec_unlock_unheld = pthread_mutex_unlock(&g_m);
#endif
    pthread_mutex_destroy(&g_m);

    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_NORMAL);
    pthread_mutex_init(&g_m, &a);
    CHECK_EQ(pthread_mutex_lock(&g_m), 0);
    g.norm_trylock_self = pthread_mutex_trylock(&g_m);
    pthread_mutex_unlock(&g_m);
    pthread_mutex_destroy(&g_m);
    pthread_mutexattr_destroy(&a);
}

/* ---- the co side ----------------------------------------------------- */

static int holder_release;          /* set by the main co: let m go */
static aco_rt_pthread_cond_t holder_cv;
static aco_rt_pthread_mutex_t holder_cm;
static aco_rt_pthread_mutex_t* holder_target;
static int holder_has_it;

/* A co that takes *holder_target and keeps it until told. */
static void* holder(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_pthread_mutex_lock(holder_target), 0);
    holder_has_it = 1;
    CHECK_EQ(aco_rt_pthread_mutex_lock(&holder_cm), 0);
    while (!holder_release) CHECK_EQ(aco_rt_pthread_cond_wait(&holder_cv, &holder_cm), 0);
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&holder_cm), 0);
    CHECK_EQ(aco_rt_pthread_mutex_unlock(holder_target), 0);
    return (void*)7;
}
static aco_rt_pthread_t start_holder(aco_rt_pthread_mutex_t* m) {
    aco_rt_pthread_t t;
    holder_target = m;
    holder_release = 0;
    holder_has_it = 0;
    CHECK_EQ(aco_rt_pthread_create(&t, NULL, holder, NULL), 0);
    while (!holder_has_it) CHECK_EQ(aco_rt_pthread_yield(), 0);
    return t;
}
static void stop_holder(aco_rt_pthread_t t) {
    CHECK_EQ(aco_rt_pthread_mutex_lock(&holder_cm), 0);
    holder_release = 1;
    CHECK_EQ(aco_rt_pthread_cond_signal(&holder_cv), 0);
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&holder_cm), 0);
    void* r = NULL;
    CHECK_EQ(aco_rt_pthread_join(t, &r), 0);
    CHECK(r == (void*)7);
}

static void kinds_and_codes(void) {
    init_kind(&m_norm, ACO_RT_PTHREAD_MUTEX_NORMAL);
    init_kind(&m_err, ACO_RT_PTHREAD_MUTEX_ERRORCHECK);
    init_kind(&m_rec, ACO_RT_PTHREAD_MUTEX_RECURSIVE);
    memset(&m_zero, 0, sizeof(m_zero));

    /* NORMAL (attr NULL too, and all-zero): relock EDEADLK, not a hang */
    aco_rt_pthread_mutex_t* normals[] = {&m_norm, &m_zero, &m_static};
    for (int i = 0; i < 3; i++) {
        aco_rt_pthread_mutex_t* m = normals[i];
        CHECK_EQ(aco_rt_pthread_mutex_lock(m), 0);
        CHECK_EQ(aco_rt_pthread_mutex_lock(m), EDEADLK);
        CHECK_EQ(aco_rt_pthread_mutex_trylock(m), EBUSY);
        CHECK_EQ(g.norm_trylock_self, EBUSY);
        struct timespec far = bb_abs(CLOCK_REALTIME, 10000);
        CHECK_EQ(aco_rt_pthread_mutex_timedlock(m, &far), EDEADLK);
        CHECK_EQ(aco_rt_pthread_mutex_clocklock(m, CLOCK_MONOTONIC, &far), EDEADLK);
        CHECK_EQ(aco_rt_pthread_mutex_destroy(m), EBUSY);
        CHECK_EQ(aco_rt_pthread_mutex_unlock(m), 0);
        CHECK_EQ(aco_rt_pthread_mutex_unlock(m), EPERM);      /* held by nobody */
    }
    CHECK_EQ(aco_rt_pthread_mutex_init(&m_norm, NULL), 0);

    /* ERRORCHECK, against glibc's */
    aco_rt_pthread_mutex_t* errs[] = {&m_err, &m_static_err};
    for (int i = 0; i < 2; i++) {
        aco_rt_pthread_mutex_t* m = errs[i];
        CHECK_EQ(aco_rt_pthread_mutex_lock(m), 0);
        CHECK_EQ(aco_rt_pthread_mutex_lock(m), g.err_relock);
        CHECK_EQ(g.err_relock, EDEADLK);
        CHECK_EQ(aco_rt_pthread_mutex_trylock(m), g.err_trylock_self);
        struct timespec far = bb_abs(CLOCK_REALTIME, 10000);
        CHECK_EQ(aco_rt_pthread_mutex_timedlock(m, &far), g.timed_err_self);
        CHECK_EQ(aco_rt_pthread_mutex_destroy(m), g.destroy_held);
        CHECK_EQ(g.destroy_held, EBUSY);
        CHECK_EQ(aco_rt_pthread_mutex_unlock(m), 0);
        CHECK_EQ(aco_rt_pthread_mutex_unlock(m), EPERM);
    }

    /* RECURSIVE: n locks, n unlocks, then EPERM as glibc's */
    aco_rt_pthread_mutex_t* recs[] = {&m_rec, &m_static_rec};
    for (int i = 0; i < 2; i++) {
        aco_rt_pthread_mutex_t* m = recs[i];
        for (int k = 0; k < 5; k++) CHECK_EQ(aco_rt_pthread_mutex_lock(m), 0);
        CHECK_EQ(aco_rt_pthread_mutex_trylock(m), g.rec_trylock_self);
        CHECK_EQ(g.rec_trylock_self, 0);
        struct timespec past = bb_abs(CLOCK_REALTIME, -1000);
        CHECK_EQ(aco_rt_pthread_mutex_timedlock(m, &past), 0);    /* held by the caller: no wait */
        CHECK_EQ(aco_rt_pthread_mutex_destroy(m), EBUSY);
        for (int k = 0; k < 7; k++) CHECK_EQ(aco_rt_pthread_mutex_unlock(m), 0);
        CHECK_EQ(aco_rt_pthread_mutex_unlock(m), g.rec_unlock_unheld);
        CHECK_EQ(g.rec_unlock_unheld, EPERM);
    }

    /* a free mutex and a bad abstime: no wait needed, 0 as glibc's */
    aco_rt_pthread_mutex_t* all[] = {&m_norm, &m_err, &m_rec};
    for (int i = 0; i < 3; i++) {
        struct timespec bad = bb_bad_ns_hi;
        CHECK_EQ(aco_rt_pthread_mutex_timedlock(all[i], &bad), g.timed_bad_free);
        CHECK_EQ(g.timed_bad_free, 0);
        CHECK_EQ(aco_rt_pthread_mutex_unlock(all[i]), 0);
        bad = bb_bad_ns_lo;
        CHECK_EQ(aco_rt_pthread_mutex_clocklock(all[i], CLOCK_MONOTONIC, &bad), 0);
        CHECK_EQ(aco_rt_pthread_mutex_unlock(all[i]), 0);
    }

    /* held by another co: a non-holder's unlock EPERM (every kind), timed
     * calls as glibc's */
    for (int i = 0; i < 3; i++) {
        aco_rt_pthread_mutex_t* m = all[i];
        aco_rt_pthread_t h = start_holder(m);
        CHECK_EQ(aco_rt_pthread_mutex_unlock(m), EPERM);
        CHECK_EQ(g.err_unlock_unheld, EPERM);
        CHECK_EQ(aco_rt_pthread_mutex_trylock(m), EBUSY);
        struct timespec bad = bb_bad_ns_hi;
        CHECK_EQ(aco_rt_pthread_mutex_timedlock(m, &bad), g.timed_bad_held);
        CHECK_EQ(g.timed_bad_held, EINVAL);
        bad = bb_bad_ns_lo;
        CHECK_EQ(aco_rt_pthread_mutex_timedlock(m, &bad), EINVAL);
        CHECK_EQ(aco_rt_pthread_mutex_clocklock(m, CLOCK_MONOTONIC, &bad), EINVAL);
        CHECK_EQ(aco_rt_pthread_mutex_timedlock(m, NULL), EINVAL);
        struct timespec past = bb_abs(CLOCK_REALTIME, -1000);
        CHECK_EQ(aco_rt_pthread_mutex_timedlock(m, &past), g.timed_passed_held);
        CHECK_EQ(g.timed_passed_held, ETIMEDOUT);
        struct timespec neg = {-1, 0};
        CHECK_EQ(aco_rt_pthread_mutex_timedlock(m, &neg), g.timed_negsec_held);
        struct timespec mpast = bb_abs(CLOCK_MONOTONIC, -1000);
        CHECK_EQ(aco_rt_pthread_mutex_clocklock(m, CLOCK_MONOTONIC, &mpast), ETIMEDOUT);
        struct timespec soon = bb_abs(CLOCK_REALTIME, -1);
        CHECK_EQ(aco_rt_pthread_mutex_clocklock(m, CLOCK_PROCESS_CPUTIME_ID, &soon),
                 g.clock_bad_clk_held);
        CHECK_EQ(g.clock_bad_clk_held, EINVAL);
        /* a deadline that has to be waited for: never early (both clocks) */
        int64_t r0 = bb_real_ns(), m0 = bb_mono_ns();
        struct timespec t100 = bb_abs(CLOCK_REALTIME, 100);
        CHECK_EQ(aco_rt_pthread_mutex_timedlock(m, &t100), ETIMEDOUT);
        CHECK_GE(bb_real_ns() - r0, 100 * MS);
        CHECK_GE(bb_mono_ns() - m0, 100 * MS - 1 * MS);
        m0 = bb_mono_ns();
        struct timespec m100 = bb_abs(CLOCK_MONOTONIC, 100);
        CHECK_EQ(aco_rt_pthread_mutex_clocklock(m, CLOCK_MONOTONIC, &m100), ETIMEDOUT);
        CHECK_GE(bb_mono_ns() - m0, 100 * MS);
        CHECK_EQ(aco_rt_pthread_mutex_destroy(m), EBUSY);
        stop_holder(h);
        /* free again: taken, and given back */
        struct timespec far = bb_abs(CLOCK_REALTIME, 10000);
        CHECK_EQ(aco_rt_pthread_mutex_timedlock(m, &far), 0);
        CHECK_EQ(aco_rt_pthread_mutex_unlock(m), 0);
    }

    /* destroy: then EINVAL for every call; init makes it work again */
    static const int kinds[] = {ACO_RT_PTHREAD_MUTEX_NORMAL, ACO_RT_PTHREAD_MUTEX_ERRORCHECK,
                                ACO_RT_PTHREAD_MUTEX_RECURSIVE};
    for (int i = 0; i < 3; i++) {
        aco_rt_pthread_mutex_t* m = all[i];
        CHECK_EQ(aco_rt_pthread_mutex_destroy(m), 0);
        CHECK_EQ(aco_rt_pthread_mutex_lock(m), EINVAL);
        CHECK_EQ(aco_rt_pthread_mutex_trylock(m), EINVAL);
        struct timespec far = bb_abs(CLOCK_REALTIME, 10000);
        CHECK_EQ(aco_rt_pthread_mutex_timedlock(m, &far), EINVAL);
        CHECK_EQ(aco_rt_pthread_mutex_destroy(m), EINVAL);
        init_kind(m, kinds[i]);
        CHECK_EQ(aco_rt_pthread_mutex_lock(m), 0);
        CHECK_EQ(aco_rt_pthread_mutex_unlock(m), 0);
    }
}

/* Attributes, as glibc's where they agree; PROCESS_SHARED is ENOTSUP. */
static void attrs(void) {
    aco_rt_pthread_mutexattr_t a;
    CHECK_EQ(aco_rt_pthread_mutexattr_init(&a), 0);
    int v = -1;
    CHECK_EQ(aco_rt_pthread_mutexattr_gettype(&a, &v), 0);
    CHECK_EQ(v, ACO_RT_PTHREAD_MUTEX_DEFAULT);
    CHECK_EQ(aco_rt_pthread_mutexattr_settype(&a, 77), g.settype_bad);
    CHECK_EQ(g.settype_bad, EINVAL);
    CHECK_EQ(aco_rt_pthread_mutexattr_gettype(&a, &v), 0);
    CHECK_EQ(v, ACO_RT_PTHREAD_MUTEX_DEFAULT);
    CHECK_EQ(aco_rt_pthread_mutexattr_setpshared(&a, ACO_RT_PTHREAD_PROCESS_SHARED), ENOTSUP);
    CHECK_EQ(aco_rt_pthread_mutexattr_setpshared(&a, 5), g.setpshared_bad);
    CHECK_EQ(g.setpshared_bad, EINVAL);
    CHECK_EQ(aco_rt_pthread_mutexattr_setpshared(&a, ACO_RT_PTHREAD_PROCESS_PRIVATE), 0);
    CHECK_EQ(aco_rt_pthread_mutexattr_getpshared(&a, &v), 0);
    CHECK_EQ(v, ACO_RT_PTHREAD_PROCESS_PRIVATE);
    CHECK_EQ(aco_rt_pthread_mutexattr_destroy(&a), 0);
    /* NULLs: EINVAL before anything else */
    CHECK_EQ(aco_rt_pthread_mutexattr_init(NULL), EINVAL);
    CHECK_EQ(aco_rt_pthread_mutexattr_gettype(&a, NULL), EINVAL);
    CHECK_EQ(aco_rt_pthread_mutex_init(NULL, NULL), EINVAL);
    CHECK_EQ(aco_rt_pthread_mutex_lock(NULL), EINVAL);
    CHECK_EQ(aco_rt_pthread_mutex_unlock(NULL), EINVAL);
    CHECK_EQ(aco_rt_pthread_mutex_trylock(NULL), EINVAL);
    struct timespec far = bb_abs(CLOCK_REALTIME, 10000);
    CHECK_EQ(aco_rt_pthread_mutex_timedlock(NULL, &far), EINVAL);
    CHECK_EQ(aco_rt_pthread_mutex_destroy(NULL), EINVAL);
}

/* A refused mutex stays refused (a bad attr); a later init revives it. */
static aco_rt_pthread_mutex_t m_refused;
static void refused(void) {
    aco_rt_pthread_mutexattr_t a = {99, 0};        /* a type no settype gives */
    CHECK_EQ(aco_rt_pthread_mutex_init(&m_refused, &a), EINVAL);
    CHECK_EQ(aco_rt_pthread_mutex_lock(&m_refused), EINVAL);
    CHECK_EQ(aco_rt_pthread_mutex_trylock(&m_refused), EINVAL);
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&m_refused), EINVAL);
    struct timespec far = bb_abs(CLOCK_REALTIME, 10000);
    CHECK_EQ(aco_rt_pthread_mutex_timedlock(&m_refused, &far), EINVAL);
    CHECK_EQ(aco_rt_pthread_mutex_destroy(&m_refused), EINVAL);
    CHECK_EQ(aco_rt_pthread_mutex_init(&m_refused, NULL), 0);
    CHECK_EQ(aco_rt_pthread_mutex_lock(&m_refused), 0);
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&m_refused), 0);
    CHECK_EQ(aco_rt_pthread_mutex_destroy(&m_refused), 0);

    /* one on this co's share stack: refused, and stays so */
    if (bb_locals_on_share_stack()) {
        aco_rt_pthread_mutex_t local;
        memset(&local, 0, sizeof(local));
        CHECK_EQ(aco_rt_pthread_mutex_init(&local, NULL), EINVAL);
        CHECK_EQ(aco_rt_pthread_mutex_lock(&local), EINVAL);
        CHECK_EQ(aco_rt_pthread_mutex_unlock(&local), EINVAL);
    }
}

/* FIFO, handed over by unlock: no overtaking, not even by the releaser. */
static aco_rt_pthread_mutex_t m_fifo;
static int fifo_order[8], fifo_n, fifo_queued;
static void* fifo_waiter(void* arg) {
    fifo_queued++;
    CHECK_EQ(aco_rt_pthread_mutex_lock(&m_fifo), 0);
    fifo_order[fifo_n++] = (int)(intptr_t)arg;
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&m_fifo), 0);
    return NULL;
}
static void fifo(void) {
    fifo_n = fifo_queued = 0;
    CHECK_EQ(aco_rt_pthread_mutex_lock(&m_fifo), 0);
    aco_rt_pthread_t t[5];
    for (int i = 0; i < 5; i++) {
        CHECK_EQ(aco_rt_pthread_create(&t[i], NULL, fifo_waiter, (void*)(intptr_t)i), 0);
        while (fifo_queued != i + 1) CHECK_EQ(aco_rt_pthread_yield(), 0);
    }
    CHECK_EQ(aco_rt_pthread_yield(), 0);       /* all five queued on m_fifo */
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&m_fifo), 0);
    CHECK_EQ(aco_rt_pthread_mutex_trylock(&m_fifo), EBUSY);   /* handed to waiter 0 */
    for (int i = 0; i < 5; i++) CHECK_EQ(aco_rt_pthread_join(t[i], NULL), 0);
    CHECK_EQ(fifo_n, 5);
    for (int i = 0; i < 5; i++) CHECK_EQ(fifo_order[i], i);
}

/* Cancel: ECANCELED from lock (waiting, or on a free mutex), EDEADLK first;
 * trylock and unlock still work. */
static aco_rt_pthread_mutex_t m_c;
static int cancel_stage;
static void* cancel_victim(void* arg) {
    (void)arg;
    cancel_stage = 1;
    CHECK_EQ(aco_rt_pthread_mutex_lock(&m_c), ECANCELED);         /* waiting */
    CHECK_EQ(aco_rt_pthread_mutex_lock(&m_norm), ECANCELED);      /* free */
    struct timespec far = bb_abs(CLOCK_REALTIME, 10000);
    CHECK_EQ(aco_rt_pthread_mutex_timedlock(&m_norm, &far), ECANCELED);
    CHECK_EQ(aco_rt_pthread_mutex_trylock(&m_norm), 0);
    CHECK_EQ(aco_rt_pthread_mutex_lock(&m_norm), EDEADLK);        /* before ECANCELED */
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&m_norm), 0);
    CHECK_EQ(aco_rt_pthread_mutex_trylock(&m_err), 0);
    CHECK_EQ(aco_rt_pthread_mutex_lock(&m_err), EDEADLK);
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&m_err), 0);
    CHECK_EQ(aco_rt_pthread_mutex_trylock(&m_rec), 0);
    CHECK_EQ(aco_rt_pthread_mutex_lock(&m_rec), ECANCELED);       /* held too: still ECANCELED */
    CHECK_EQ(aco_rt_pthread_mutex_trylock(&m_rec), 0);            /* trylock: no block */
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&m_rec), 0);
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&m_rec), 0);
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&m_rec), EPERM);
    return (void*)1;
}
static void cancel(void) {
    cancel_stage = 0;
    CHECK_EQ(aco_rt_pthread_mutex_lock(&m_c), 0);
    aco_rt_pthread_t t;
    CHECK_EQ(aco_rt_pthread_create(&t, NULL, cancel_victim, NULL), 0);
    while (!cancel_stage) CHECK_EQ(aco_rt_pthread_yield(), 0);
    CHECK_EQ(aco_rt_pthread_yield(), 0);
    CHECK_EQ(aco_rt_cancel((aco_rt_co_t*)t), 0);
    void* r = NULL;
    CHECK_EQ(aco_rt_pthread_join(t, &r), 0);
    CHECK(r == (void*)1);
    /* the cancelled waiter never got it */
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&m_c), 0);
    CHECK_EQ(aco_rt_pthread_mutex_trylock(&m_c), 0);
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&m_c), 0);
}

static void body(void) {
    kinds_and_codes();
    attrs();
    refused();
    fifo();
    cancel();
}

/* Outside any co: the calls that need one are EPERM; attr and init work. */
static void outside(void) {
    aco_rt_pthread_mutex_t m = ACO_RT_PTHREAD_MUTEX_INITIALIZER;   /* the thread's stack */
    CHECK_EQ(aco_rt_pthread_mutex_init(&m, NULL), 0);
    CHECK_EQ(aco_rt_pthread_mutex_lock(&m), EPERM);
    CHECK_EQ(aco_rt_pthread_mutex_trylock(&m), EPERM);
    struct timespec far = bb_abs(CLOCK_REALTIME, 10000);
    CHECK_EQ(aco_rt_pthread_mutex_timedlock(&m, &far), EPERM);
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&m), EPERM);
    CHECK_EQ(aco_rt_pthread_mutex_destroy(&m), 0);
}

/* Across a pool's two threads: each kind counts right under contention,
 * and a holder on one thread is EPERM to an unlock from the other. */
#define POOL_COS 8
static aco_rt_pthread_mutex_t pm[3];
static long pcount[3];
static int prounds;
static void pool_co(void* arg) {
    int i = (int)(intptr_t)arg;
    for (int r = 0; r < prounds; r++) {
        aco_rt_pthread_mutex_t* m = &pm[r % 3];
        CHECK_EQ(aco_rt_pthread_mutex_lock(m), 0);
        if (r % 3 == 1) CHECK_EQ(aco_rt_pthread_mutex_lock(m), EDEADLK);
        if (r % 3 == 2) CHECK_EQ(aco_rt_pthread_mutex_lock(m), 0);
        long v = pcount[r % 3];
        if ((r + i) % 4 == 0) CHECK_EQ(aco_rt_pthread_yield(), 0);
        pcount[r % 3] = v + 1;
        if (r % 3 == 2) CHECK_EQ(aco_rt_pthread_mutex_unlock(m), 0);
        CHECK_EQ(aco_rt_pthread_mutex_unlock(m), 0);
    }
}
static void pool(void) {
    init_kind(&pm[0], ACO_RT_PTHREAD_MUTEX_NORMAL);
    init_kind(&pm[1], ACO_RT_PTHREAD_MUTEX_ERRORCHECK);
    init_kind(&pm[2], ACO_RT_PTHREAD_MUTEX_RECURSIVE);
    prounds = FEW ? 300 : 3000;
    bb_on_pool(POOL_COS, pool_co);
    long total = pcount[0] + pcount[1] + pcount[2];
    CHECK_EQ(total, (long)POOL_COS * prounds);
    for (int k = 0; k < 3; k++) CHECK_EQ(aco_rt_pthread_mutex_destroy(&pm[k]), 0);
}

int main(void) {
    glibc_answers();
    outside();
    bb_on_backends(body);
    pool();
    printf("test_pthread_bb_mutex: ok\n");
    return 0;
}
