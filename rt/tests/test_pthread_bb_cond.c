/* test_pthread_bb_cond.c - the pthread face's condition variables taken at
 * the word of rt/aco_rt_pthread.h, beside glibc's: timed waits on
 * CLOCK_REALTIME and CLOCK_MONOTONIC conds and clockwait (never early, the
 * mutex held again), bad and passed abstimes, signal's FIFO and exactly
 * one, broadcast, no spurious wakeups, a RECURSIVE mutex released fully,
 * a cancelled waiter, destroy (EBUSY; freed at once after broadcast),
 * refused conds; signals from a plain thread to the cos of a pool, and a
 * bounded buffer between the pool's threads. */
#include "pthread_bb.h"

/* ---- glibc's answers ------------------------------------------------- */

static struct {
    int setclock_bad, timed_bad_hi, timed_bad_lo, timed_passed, timed_negsec;
    int clockwait_bad_clk, unlock_after_bad;
} g;

static void glibc_answers(void) {
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    g.setclock_bad = pthread_condattr_setclock(&a, CLOCK_PROCESS_CPUTIME_ID);
    pthread_condattr_destroy(&a);
    pthread_cond_t c = PTHREAD_COND_INITIALIZER;
    pthread_mutex_t m;
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ERRORCHECK);
    pthread_mutex_init(&m, &ma);
    pthread_mutex_lock(&m);
    struct timespec t = bb_bad_ns_hi;
    g.timed_bad_hi = pthread_cond_timedwait(&c, &m, &t);
    t = bb_bad_ns_lo;
    g.timed_bad_lo = pthread_cond_timedwait(&c, &m, &t);
    t = bb_abs(CLOCK_REALTIME, -1000);
    g.timed_passed = pthread_cond_timedwait(&c, &m, &t);
    struct timespec neg = {-1, 0};
    g.timed_negsec = pthread_cond_timedwait(&c, &m, &neg);
    t = bb_abs(CLOCK_REALTIME, 100);
    g.clockwait_bad_clk = pthread_cond_clockwait(&c, &m, CLOCK_PROCESS_CPUTIME_ID, &t);
    g.unlock_after_bad = pthread_mutex_unlock(&m);     /* still held: 0 */
    pthread_mutex_destroy(&m);
    pthread_cond_destroy(&c);
}

/* ---- the co side ----------------------------------------------------- */

static aco_rt_pthread_mutex_t m, m_rec;
static aco_rt_pthread_cond_t c_real, c_mono, c_zero = ACO_RT_PTHREAD_COND_INITIALIZER;

static void timed(void) {
    aco_rt_pthread_condattr_t a;
    CHECK_EQ(aco_rt_pthread_condattr_init(&a), 0);
    clockid_t clk = 99;
    CHECK_EQ(aco_rt_pthread_condattr_getclock(&a, &clk), 0);
    CHECK_EQ(clk, CLOCK_REALTIME);
    CHECK_EQ(aco_rt_pthread_condattr_setclock(&a, CLOCK_PROCESS_CPUTIME_ID), g.setclock_bad);
    CHECK_EQ(g.setclock_bad, EINVAL);
    CHECK_EQ(aco_rt_pthread_condattr_setpshared(&a, ACO_RT_PTHREAD_PROCESS_SHARED), ENOTSUP);
    CHECK_EQ(aco_rt_pthread_cond_init(&c_real, &a), 0);
    CHECK_EQ(aco_rt_pthread_condattr_setclock(&a, CLOCK_MONOTONIC), 0);
    CHECK_EQ(aco_rt_pthread_condattr_getclock(&a, &clk), 0);
    CHECK_EQ(clk, CLOCK_MONOTONIC);
    CHECK_EQ(aco_rt_pthread_cond_init(&c_mono, &a), 0);
    CHECK_EQ(aco_rt_pthread_condattr_destroy(&a), 0);
    CHECK_EQ(aco_rt_pthread_mutex_init(&m, NULL), 0);

    struct {
        aco_rt_pthread_cond_t* c;
        clockid_t clk;
    } cases[] = {{&c_real, CLOCK_REALTIME}, {&c_zero, CLOCK_REALTIME}, {&c_mono, CLOCK_MONOTONIC}};
    for (int i = 0; i < 3; i++) {
        aco_rt_pthread_cond_t* c = cases[i].c;
        clockid_t ck = cases[i].clk;
        CHECK_EQ(aco_rt_pthread_mutex_lock(&m), 0);
        /* bad abstimes: EINVAL, as glibc's, m still held */
        struct timespec t = bb_bad_ns_hi;
        CHECK_EQ(aco_rt_pthread_cond_timedwait(c, &m, &t), g.timed_bad_hi);
        CHECK_EQ(g.timed_bad_hi, EINVAL);
        t = bb_bad_ns_lo;
        CHECK_EQ(aco_rt_pthread_cond_timedwait(c, &m, &t), g.timed_bad_lo);
        CHECK_EQ(aco_rt_pthread_cond_clockwait(c, &m, CLOCK_MONOTONIC, &t), EINVAL);
        t = bb_abs(ck, 100);
        CHECK_EQ(aco_rt_pthread_cond_clockwait(c, &m, CLOCK_PROCESS_CPUTIME_ID, &t),
                 g.clockwait_bad_clk);
        CHECK_EQ(g.clockwait_bad_clk, EINVAL);
        CHECK_EQ(aco_rt_pthread_mutex_lock(&m), EDEADLK);      /* held all along */
        /* passed: ETIMEDOUT, as glibc's */
        t = bb_abs(ck, -1000);
        CHECK_EQ(aco_rt_pthread_cond_timedwait(c, &m, &t), g.timed_passed);
        CHECK_EQ(g.timed_passed, ETIMEDOUT);
        if (ck == CLOCK_REALTIME) {
            struct timespec neg = {-1, 0};
            CHECK_EQ(aco_rt_pthread_cond_timedwait(c, &m, &neg), g.timed_negsec);
        }
        CHECK_EQ(aco_rt_pthread_mutex_lock(&m), EDEADLK);
        /* 100 ms on the cond's clock: never early, m held again */
        int64_t r0 = bb_real_ns(), m0 = bb_mono_ns();
        t = bb_abs(ck, 100);
        CHECK_EQ(aco_rt_pthread_cond_timedwait(c, &m, &t), ETIMEDOUT);
        if (ck == CLOCK_REALTIME) CHECK_GE(bb_real_ns() - r0, 100 * MS);
        else CHECK_GE(bb_mono_ns() - m0, 100 * MS);
        CHECK_EQ(aco_rt_pthread_mutex_lock(&m), EDEADLK);
        /* clockwait on the other clock than the cond's */
        clockid_t other = ck == CLOCK_REALTIME ? CLOCK_MONOTONIC : CLOCK_REALTIME;
        r0 = bb_real_ns();
        m0 = bb_mono_ns();
        t = bb_abs(other, 100);
        CHECK_EQ(aco_rt_pthread_cond_clockwait(c, &m, other, &t), ETIMEDOUT);
        if (other == CLOCK_REALTIME) CHECK_GE(bb_real_ns() - r0, 100 * MS);
        else CHECK_GE(bb_mono_ns() - m0, 100 * MS);
        CHECK_EQ(aco_rt_pthread_mutex_unlock(&m), 0);
        /* not held: EPERM, nothing done */
        t = bb_abs(ck, 10000);
        CHECK_EQ(aco_rt_pthread_cond_timedwait(c, &m, &t), EPERM);
        CHECK_EQ(aco_rt_pthread_cond_wait(c, &m), EPERM);
        CHECK_EQ(aco_rt_pthread_mutex_unlock(&m), EPERM);
    }
    CHECK_EQ(g.unlock_after_bad, 0);
}

/* signal: exactly one, the longest waiter; broadcast: all; no spurious
 * wakeup (each waiter waits once, no predicate loop). */
#define NW 5
static int w_queued, w_woken, w_order[NW];
static void* waiter(void* arg) {
    CHECK_EQ(aco_rt_pthread_mutex_lock(&m), 0);
    w_queued++;
    CHECK_EQ(aco_rt_pthread_cond_wait(&c_real, &m), 0);
    w_order[w_woken++] = (int)(intptr_t)arg;
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&m), 0);
    return NULL;
}
static void let_run(void) {
    for (int i = 0; i < 2 * NW + 2; i++) CHECK_EQ(aco_rt_pthread_yield(), 0);
}
static void signal_broadcast(void) {
    w_queued = w_woken = 0;
    aco_rt_pthread_t t[NW];
    for (int i = 0; i < NW; i++) {
        CHECK_EQ(aco_rt_pthread_create(&t[i], NULL, waiter, (void*)(intptr_t)i), 0);
        while (w_queued != i + 1) CHECK_EQ(aco_rt_pthread_yield(), 0);
    }
    let_run();
    CHECK_EQ(w_woken, 0);                   /* no spurious wakeup */
    CHECK_EQ(aco_rt_pthread_cond_destroy(&c_real), EBUSY);
    for (int k = 1; k <= 2; k++) {
        CHECK_EQ(aco_rt_pthread_cond_signal(&c_real), 0);
        let_run();
        CHECK_EQ(w_woken, k);               /* exactly one per signal */
    }
    CHECK_EQ(aco_rt_pthread_cond_broadcast(&c_real), 0);
    let_run();
    CHECK_EQ(w_woken, NW);
    for (int i = 0; i < NW; i++) CHECK_EQ(w_order[i], i);
    for (int i = 0; i < NW; i++) CHECK_EQ(aco_rt_pthread_join(t[i], NULL), 0);
    /* signals with nobody waiting are lost, as pthreads' */
    CHECK_EQ(aco_rt_pthread_cond_signal(&c_real), 0);
    CHECK_EQ(aco_rt_pthread_mutex_lock(&m), 0);
    struct timespec t0 = bb_abs(CLOCK_REALTIME, 20);
    CHECK_EQ(aco_rt_pthread_cond_timedwait(&c_real, &m, &t0), ETIMEDOUT);
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&m), 0);
}

/* A RECURSIVE mutex held 3 times: released fully, taken back 3 times. */
static int rec_got;
static void* rec_taker(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_pthread_mutex_lock(&m_rec), 0);
    rec_got = 1;
    CHECK_EQ(aco_rt_pthread_cond_signal(&c_mono), 0);
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&m_rec), 0);
    return NULL;
}
static void recursive(void) {
    aco_rt_pthread_mutexattr_t a;
    CHECK_EQ(aco_rt_pthread_mutexattr_init(&a), 0);
    CHECK_EQ(aco_rt_pthread_mutexattr_settype(&a, ACO_RT_PTHREAD_MUTEX_RECURSIVE), 0);
    CHECK_EQ(aco_rt_pthread_mutex_init(&m_rec, &a), 0);
    for (int i = 0; i < 3; i++) CHECK_EQ(aco_rt_pthread_mutex_lock(&m_rec), 0);
    rec_got = 0;
    aco_rt_pthread_t t;
    CHECK_EQ(aco_rt_pthread_create(&t, NULL, rec_taker, NULL), 0);
    struct timespec far = bb_abs(CLOCK_MONOTONIC, 10000);
    while (!rec_got) CHECK_EQ(aco_rt_pthread_cond_timedwait(&c_mono, &m_rec, &far), 0);
    CHECK_EQ(aco_rt_pthread_join(t, NULL), 0);
    for (int i = 0; i < 3; i++) CHECK_EQ(aco_rt_pthread_mutex_unlock(&m_rec), 0);
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&m_rec), EPERM);
}

/* A cancelled waiter: ECANCELED with m held again; a cancelled co's wait
 * fails at once, m still held; signal and broadcast still work in it. */
static int cw_stage;
static void* cancelled_waiter(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_pthread_mutex_lock(&m), 0);
    cw_stage = 1;
    CHECK_EQ(aco_rt_pthread_cond_wait(&c_real, &m), ECANCELED);
    CHECK_EQ(aco_rt_pthread_mutex_lock(&m), EDEADLK);          /* held again */
    CHECK_EQ(aco_rt_pthread_cond_wait(&c_real, &m), ECANCELED);
    struct timespec far = bb_abs(CLOCK_REALTIME, 10000);
    CHECK_EQ(aco_rt_pthread_cond_timedwait(&c_real, &m, &far), ECANCELED);
    CHECK_EQ(aco_rt_pthread_mutex_lock(&m), EDEADLK);
    CHECK_EQ(aco_rt_pthread_cond_signal(&c_real), 0);
    CHECK_EQ(aco_rt_pthread_cond_broadcast(&c_real), 0);
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&m), 0);
    cw_stage = 2;
    return (void*)3;
}
static void cancel(void) {
    cw_stage = 0;
    aco_rt_pthread_t t;
    CHECK_EQ(aco_rt_pthread_create(&t, NULL, cancelled_waiter, NULL), 0);
    while (cw_stage != 1) CHECK_EQ(aco_rt_pthread_yield(), 0);
    CHECK_EQ(aco_rt_pthread_mutex_lock(&m), 0);     /* it waits: m is free */
    CHECK_EQ(aco_rt_cancel((aco_rt_co_t*)t), 0);
    CHECK_EQ(aco_rt_pthread_yield(), 0);
    CHECK_EQ(cw_stage, 1);                          /* it needs m back first */
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&m), 0);
    void* r = NULL;
    CHECK_EQ(aco_rt_pthread_join(t, &r), 0);
    CHECK(r == (void*)3);
    CHECK_EQ(cw_stage, 2);
    CHECK_EQ(aco_rt_pthread_cond_destroy(&c_real), 0);        /* no waiter left */
    CHECK_EQ(aco_rt_pthread_cond_init(&c_real, NULL), 0);
}

/* Destroy right after broadcast, then free: the woken cos touch it no more
 * (ASan and memcheck would see it). */
typedef struct {
    aco_rt_pthread_cond_t c;
    aco_rt_pthread_mutex_t m;
} pair_t;
static pair_t* heap_pair;
static aco_rt_pthread_mutex_t m_outer;
static int hp_queued, hp_done;
static void* heap_waiter(void* arg) {
    pair_t* p = arg;
    CHECK_EQ(aco_rt_pthread_mutex_lock(&m_outer), 0);
    hp_queued++;
    CHECK_EQ(aco_rt_pthread_cond_wait(&p->c, &m_outer), 0);
    hp_done++;
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&m_outer), 0);
    return NULL;
}
static void destroy_free(void) {
    heap_pair = calloc(1, sizeof(*heap_pair));
    CHECK(heap_pair != NULL);
    CHECK_EQ(aco_rt_pthread_cond_init(&heap_pair->c, NULL), 0);
    hp_queued = hp_done = 0;
    aco_rt_pthread_t t[3];
    for (int i = 0; i < 3; i++) CHECK_EQ(aco_rt_pthread_create(&t[i], NULL, heap_waiter, heap_pair), 0);
    while (hp_queued != 3) CHECK_EQ(aco_rt_pthread_yield(), 0);
    CHECK_EQ(aco_rt_pthread_mutex_lock(&m_outer), 0);
    CHECK_EQ(aco_rt_pthread_cond_broadcast(&heap_pair->c), 0);
    CHECK_EQ(aco_rt_pthread_cond_destroy(&heap_pair->c), 0);
    memset(heap_pair, 0x5a, sizeof(*heap_pair));
    free(heap_pair);
    heap_pair = NULL;
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&m_outer), 0);
    for (int i = 0; i < 3; i++) CHECK_EQ(aco_rt_pthread_join(t[i], NULL), 0);
    CHECK_EQ(hp_done, 3);
}

/* Refused conds: on this co's share stack, and a bad attr. */
static aco_rt_pthread_cond_t c_refused;
static void refused(void) {
    aco_rt_pthread_condattr_t a = {CLOCK_PROCESS_CPUTIME_ID, 0};
    CHECK_EQ(aco_rt_pthread_cond_init(&c_refused, &a), EINVAL);
    CHECK_EQ(aco_rt_pthread_cond_signal(&c_refused), EINVAL);
    CHECK_EQ(aco_rt_pthread_cond_broadcast(&c_refused), EINVAL);
    CHECK_EQ(aco_rt_pthread_mutex_lock(&m), 0);
    CHECK_EQ(aco_rt_pthread_cond_wait(&c_refused, &m), EINVAL);
    struct timespec past = bb_abs(CLOCK_REALTIME, -1000);
    CHECK_EQ(aco_rt_pthread_cond_timedwait(&c_refused, &m, &past), EINVAL);
    CHECK_EQ(aco_rt_pthread_mutex_lock(&m), EDEADLK);       /* nothing done */
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&m), 0);
    CHECK_EQ(aco_rt_pthread_cond_destroy(&c_refused), EINVAL);
    CHECK_EQ(aco_rt_pthread_cond_init(&c_refused, NULL), 0);
    CHECK_EQ(aco_rt_pthread_cond_signal(&c_refused), 0);
    CHECK_EQ(aco_rt_pthread_cond_destroy(&c_refused), 0);
    if (bb_locals_on_share_stack()) {
        aco_rt_pthread_cond_t local;
        memset(&local, 0, sizeof(local));
        CHECK_EQ(aco_rt_pthread_cond_init(&local, NULL), EINVAL);
        CHECK_EQ(aco_rt_pthread_cond_signal(&local), EINVAL);
    }
    /* NULLs */
    CHECK_EQ(aco_rt_pthread_cond_init(NULL, NULL), EINVAL);
    CHECK_EQ(aco_rt_pthread_cond_signal(NULL), EINVAL);
    CHECK_EQ(aco_rt_pthread_cond_broadcast(NULL), EINVAL);
    CHECK_EQ(aco_rt_pthread_cond_wait(NULL, &m), EINVAL);
    CHECK_EQ(aco_rt_pthread_cond_wait(&c_zero, NULL), EINVAL);
    CHECK_EQ(aco_rt_pthread_condattr_getclock(NULL, NULL), EINVAL);
}

static void body(void) {
    timed();
    signal_broadcast();
    recursive();
    cancel();
    destroy_free();
    refused();
}

/* ---- a pool: signals from a plain thread, a bounded buffer ----------- */

static aco_rt_pthread_cond_t pc = ACO_RT_PTHREAD_COND_INITIALIZER;
static aco_rt_pthread_mutex_t pmx = ACO_RT_PTHREAD_MUTEX_INITIALIZER;
static atomic_int p_waiting, p_woken, p_go;
static void pool_waiter(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_pthread_mutex_lock(&pmx), 0);
    atomic_fetch_add(&p_waiting, 1);
    while (!atomic_load(&p_go)) {
        struct timespec far = bb_abs(CLOCK_REALTIME, 30000);
        CHECK_EQ(aco_rt_pthread_cond_timedwait(&pc, &pmx, &far), 0);
    }
    atomic_fetch_add(&p_woken, 1);
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&pmx), 0);
}
static void* plain_signaller(void* arg) {
    (void)arg;
    /* outside cos: signal and broadcast work; the mutex calls are EPERM */
    CHECK_EQ(aco_rt_pthread_mutex_lock(&pmx), EPERM);
    struct timespec far = bb_abs(CLOCK_REALTIME, 1000);
    CHECK_EQ(aco_rt_pthread_cond_timedwait(&pc, &pmx, &far), EPERM);
    atomic_store(&p_go, 1);
    CHECK_EQ(aco_rt_pthread_cond_broadcast(&pc), 0);
    return NULL;
}

#define BUF 4
static aco_rt_pthread_cond_t not_full, not_empty;
static aco_rt_pthread_mutex_t bm;
static int buf[BUF], bhead, bcount;
static long consumed_sum;
static int items;
static void producer(void* arg) {
    int id = (int)(intptr_t)arg;
    for (int i = 0; i < items; i++) {
        CHECK_EQ(aco_rt_pthread_mutex_lock(&bm), 0);
        while (bcount == BUF) CHECK_EQ(aco_rt_pthread_cond_wait(&not_full, &bm), 0);
        buf[(bhead + bcount++) % BUF] = id * 100000 + i;
        CHECK_EQ(aco_rt_pthread_cond_signal(&not_empty), 0);
        CHECK_EQ(aco_rt_pthread_mutex_unlock(&bm), 0);
    }
}
static void consumer(void* arg) {
    (void)arg;
    for (int i = 0; i < items; i++) {
        CHECK_EQ(aco_rt_pthread_mutex_lock(&bm), 0);
        while (bcount == 0) CHECK_EQ(aco_rt_pthread_cond_wait(&not_empty, &bm), 0);
        consumed_sum += buf[bhead];
        bhead = (bhead + 1) % BUF;
        bcount--;
        CHECK_EQ(aco_rt_pthread_cond_signal(&not_full), 0);
        CHECK_EQ(aco_rt_pthread_mutex_unlock(&bm), 0);
    }
}
static void pool_co(void* arg) {
    int i = (int)(intptr_t)arg;
    if (i < 4) pool_waiter(arg);
    else if (i < 7) producer((void*)(intptr_t)(i - 4));
    else consumer(arg);
}

static void pool(void) {
    items = FEW ? 200 : 3000;
    aco_rt_pthread_condattr_t a;
    CHECK_EQ(aco_rt_pthread_condattr_init(&a), 0);
    CHECK_EQ(aco_rt_pthread_condattr_setclock(&a, CLOCK_MONOTONIC), 0);
    CHECK_EQ(aco_rt_pthread_cond_init(&not_full, &a), 0);
    CHECK_EQ(aco_rt_pthread_cond_init(&not_empty, NULL), 0);
    CHECK_EQ(aco_rt_pthread_mutex_init(&bm, NULL), 0);

    aco_rt_pool_opts_t po;
    memset(&po, 0, sizeof(po));
    po.threads = 2;
    aco_rt_pool_t* p = aco_rt_pool_new(&po);
    CHECK(p != NULL);
    for (int i = 0; i < 10; i++) {
        aco_rt_co_t* co = aco_rt_spawn(aco_rt_pool_sched(p, (unsigned)(i & 1)), pool_co,
                                       (void*)(intptr_t)i);
        CHECK(co != NULL);
        CHECK_EQ(aco_rt_detach(co), 0);
    }
    while (atomic_load(&p_waiting) != 4) sched_yield();
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, plain_signaller, NULL), 0);
    CHECK_EQ(pthread_join(th, NULL), 0);
    CHECK_EQ(aco_rt_pool_wait(p, ACO_RT_POOL_DRAIN, aco_rt_in_ms(60000)), 0);
    CHECK_EQ(aco_rt_pool_free(p), 0);
    CHECK_EQ(atomic_load(&p_woken), 4);
    long want = 0;
    for (int id = 0; id < 3; id++)
        for (int i = 0; i < items; i++) want += id * 100000 + i;
    CHECK_EQ(consumed_sum * 1, want);   /* 3 producers' items, 3 consumers */
    CHECK_EQ(bcount, 0);
}

int main(void) {
    glibc_answers();
    bb_on_backends(body);
    pool();
    printf("test_pthread_bb_cond: ok\n");
    return 0;
}
