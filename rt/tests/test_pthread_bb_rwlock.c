/* test_pthread_bb_rwlock.c - the pthread face's rwlocks and barriers taken
 * at the word of rt/aco_rt_pthread.h, beside glibc's: readers first (a
 * reader gets in while a writer waits, as glibc's default), EDEADLK for a
 * writer's own calls, the timed variants with bad and passed abstimes,
 * unlock's EPERM, destroy's EBUSY, cancel; barriers: SERIAL_THREAD exactly
 * once per round over many rounds, count 1, count 0 and never-made
 * barriers, a cancelled waiter that no longer counts; both across the cos
 * of a 2-thread pool. */
#include "pthread_bb.h"

/* ---- glibc's answers ------------------------------------------------- */

static struct {
    int wr_rdlock, wr_wrlock, wr_tryrd, wr_trywr;
    int timedrd_bad_free, timedwr_bad_free, timedrd_passed_free, timedwr_passed_free;
    int timedrd_passed_wr, timedwr_passed_rd;
    int tryrd_writer_waiting;   /* -1: not looked at (memcheck) */
    int barrier_0, barrier_1;
} g;

static pthread_rwlock_t gl = PTHREAD_RWLOCK_INITIALIZER;
static pthread_rwlock_t* gl_p = &gl;
static atomic_int g_tid;
static void* g_writer(void* arg) {
    (void)arg;
    atomic_store(&g_tid, bb_tid());
    CHECK_EQ(pthread_rwlock_wrlock(gl_p), 0);
    CHECK_EQ(pthread_rwlock_unlock(gl_p), 0);
    return NULL;
}
static void* g_passed(void* arg) {
    (void)arg;
    struct timespec past = bb_abs(CLOCK_REALTIME, -1000);
    g.timedwr_passed_rd = pthread_rwlock_timedwrlock(gl_p, &past);
    return NULL;
}

static void glibc_answers(void) {
    struct timespec bad = bb_bad_ns_hi, past = bb_abs(CLOCK_REALTIME, -1000);
    g.timedrd_bad_free = pthread_rwlock_timedrdlock(&gl, &bad);
    if (g.timedrd_bad_free == 0) pthread_rwlock_unlock(&gl);
    g.timedwr_bad_free = pthread_rwlock_timedwrlock(&gl, &bad);
    if (g.timedwr_bad_free == 0) pthread_rwlock_unlock(&gl);
    g.timedrd_passed_free = pthread_rwlock_timedrdlock(&gl, &past);
    if (g.timedrd_passed_free == 0) pthread_rwlock_unlock(&gl);
    g.timedwr_passed_free = pthread_rwlock_timedwrlock(&gl, &past);
    if (g.timedwr_passed_free == 0) pthread_rwlock_unlock(&gl);

    CHECK_EQ(pthread_rwlock_wrlock(&gl), 0);
    g.wr_rdlock = pthread_rwlock_rdlock(&gl);
    g.wr_wrlock = pthread_rwlock_wrlock(&gl);
    g.wr_tryrd = pthread_rwlock_tryrdlock(&gl);
    g.wr_trywr = pthread_rwlock_trywrlock(&gl);
    CHECK_EQ(pthread_rwlock_unlock(&gl), 0);

    /* held for reading: another thread's passed timedwrlock */
    CHECK_EQ(pthread_rwlock_rdlock(&gl), 0);
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, g_passed, NULL), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
    CHECK_EQ(pthread_rwlock_unlock(&gl), 0);

    /* a reader gets in while a writer waits (the default kind) */
    g.tryrd_writer_waiting = -1;
#ifndef ACO_USE_VALGRIND    /* memcheck's threads sleep on its own lock too */
    CHECK_EQ(pthread_rwlock_rdlock(&gl), 0);
    CHECK_EQ(pthread_create(&t, NULL, g_writer, NULL), 0);
    while (atomic_load(&g_tid) == 0) sched_yield();
    bb_wait_asleep(atomic_load(&g_tid));
    g.tryrd_writer_waiting = pthread_rwlock_tryrdlock(&gl);
    if (g.tryrd_writer_waiting == 0) pthread_rwlock_unlock(&gl);
    CHECK_EQ(pthread_rwlock_unlock(&gl), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
#endif
    (void)g_writer;
    pthread_barrier_t b;
    g.barrier_0 = pthread_barrier_init(&b, NULL, 0);
    CHECK_EQ(pthread_barrier_init(&b, NULL, 1), 0);
    g.barrier_1 = pthread_barrier_wait(&b);
    pthread_barrier_destroy(&b);
}

/* ---- the co side: rwlocks -------------------------------------------- */

static aco_rt_pthread_rwlock_t l, l_zero;
static int w_stage;
static void* writer(void* arg) {
    (void)arg;
    w_stage = 1;
    CHECK_EQ(aco_rt_pthread_rwlock_wrlock(&l), 0);
    w_stage = 2;
    CHECK_EQ(aco_rt_pthread_rwlock_unlock(&l), 0);
    return NULL;
}
static int r_stage;
static void* reader(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_pthread_rwlock_rdlock(&l), 0);
    r_stage = 1;
    while (r_stage != 2) CHECK_EQ(aco_rt_pthread_yield(), 0);
    CHECK_EQ(aco_rt_pthread_rwlock_unlock(&l), 0);
    return NULL;
}
static void* wholder(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_pthread_rwlock_wrlock(&l), 0);
    r_stage = 1;
    while (r_stage != 2) CHECK_EQ(aco_rt_pthread_yield(), 0);
    CHECK_EQ(aco_rt_pthread_rwlock_unlock(&l), 0);
    return NULL;
}

static void rw(void) {
    CHECK_EQ(aco_rt_pthread_rwlock_init(&l, NULL), 0);
    memset(&l_zero, 0, sizeof(l_zero));
    aco_rt_pthread_rwlock_t* both[] = {&l, &l_zero};
    for (int i = 0; i < 2; i++) {
        aco_rt_pthread_rwlock_t* x = both[i];
        /* free: bad abstime EINVAL even so, passed abstime taken: as glibc */
        struct timespec bad = bb_bad_ns_hi, past = bb_abs(CLOCK_REALTIME, -1000);
        int r = aco_rt_pthread_rwlock_timedrdlock(x, &bad);
        CHECK_EQ(r, g.timedrd_bad_free);
        CHECK_EQ(r, EINVAL);
        r = aco_rt_pthread_rwlock_timedwrlock(x, &bad);
        CHECK_EQ(r, g.timedwr_bad_free);
        bad = bb_bad_ns_lo;
        CHECK_EQ(aco_rt_pthread_rwlock_timedwrlock(x, &bad), EINVAL);
        r = aco_rt_pthread_rwlock_timedrdlock(x, &past);
        CHECK_EQ(r, g.timedrd_passed_free);
        if (r == 0) CHECK_EQ(aco_rt_pthread_rwlock_unlock(x), 0);
        r = aco_rt_pthread_rwlock_timedwrlock(x, &past);
        CHECK_EQ(r, g.timedwr_passed_free);
        if (r == 0) CHECK_EQ(aco_rt_pthread_rwlock_unlock(x), 0);
        CHECK_EQ(aco_rt_pthread_rwlock_unlock(x), EPERM);       /* held by nobody */

        /* held for writing by the caller: EDEADLK, try calls too */
        CHECK_EQ(aco_rt_pthread_rwlock_wrlock(x), 0);
        CHECK_EQ(aco_rt_pthread_rwlock_rdlock(x), EDEADLK);
        CHECK_EQ(g.wr_rdlock, EDEADLK);
        CHECK_EQ(aco_rt_pthread_rwlock_wrlock(x), EDEADLK);
        CHECK_EQ(g.wr_wrlock, EDEADLK);
        CHECK_EQ(aco_rt_pthread_rwlock_tryrdlock(x), EDEADLK);   /* glibc: EBUSY */
        CHECK_EQ(aco_rt_pthread_rwlock_trywrlock(x), EDEADLK);
        struct timespec far = bb_abs(CLOCK_REALTIME, 10000);
        CHECK_EQ(aco_rt_pthread_rwlock_timedrdlock(x, &far), EDEADLK);
        CHECK_EQ(aco_rt_pthread_rwlock_timedwrlock(x, &far), EDEADLK);
        CHECK_EQ(aco_rt_pthread_rwlock_destroy(x), EBUSY);
        CHECK_EQ(aco_rt_pthread_rwlock_unlock(x), 0);
        CHECK_EQ(aco_rt_pthread_rwlock_unlock(x), EPERM);
        /* readers: many at once, each unlock its own */
        for (int k = 0; k < 3; k++) CHECK_EQ(aco_rt_pthread_rwlock_rdlock(x), 0);
        CHECK_EQ(aco_rt_pthread_rwlock_tryrdlock(x), 0);
        CHECK_EQ(aco_rt_pthread_rwlock_trywrlock(x), EBUSY);
        CHECK_EQ(aco_rt_pthread_rwlock_destroy(x), EBUSY);
        for (int k = 0; k < 4; k++) CHECK_EQ(aco_rt_pthread_rwlock_unlock(x), 0);
        CHECK_EQ(aco_rt_pthread_rwlock_unlock(x), EPERM);
    }

    /* readers first: a reader gets in while a writer waits, as glibc's */
    w_stage = 0;
    CHECK_EQ(aco_rt_pthread_rwlock_rdlock(&l), 0);
    aco_rt_pthread_t tw;
    CHECK_EQ(aco_rt_pthread_create(&tw, NULL, writer, NULL), 0);
    while (w_stage != 1) CHECK_EQ(aco_rt_pthread_yield(), 0);
    CHECK_EQ(aco_rt_pthread_yield(), 0);
    CHECK_EQ(w_stage, 1);                                   /* it waits */
    if (g.tryrd_writer_waiting != -1) CHECK_EQ(g.tryrd_writer_waiting, 0);
    CHECK_EQ(aco_rt_pthread_rwlock_tryrdlock(&l), 0);
    CHECK_EQ(aco_rt_pthread_rwlock_rdlock(&l), 0);
    struct timespec far = bb_abs(CLOCK_REALTIME, 10000);
    CHECK_EQ(aco_rt_pthread_rwlock_timedrdlock(&l, &far), 0);
    CHECK_EQ(aco_rt_pthread_rwlock_trywrlock(&l), EBUSY);
    struct timespec past = bb_abs(CLOCK_REALTIME, -1000);
    CHECK_EQ(aco_rt_pthread_rwlock_timedwrlock(&l, &past), ETIMEDOUT);
    for (int k = 0; k < 3; k++) CHECK_EQ(aco_rt_pthread_rwlock_unlock(&l), 0);
    CHECK_EQ(w_stage, 1);                                   /* one read still held */
    CHECK_EQ(aco_rt_pthread_rwlock_unlock(&l), 0);
    CHECK_EQ(aco_rt_pthread_join(tw, NULL), 0);
    CHECK_EQ(w_stage, 2);

    /* held for reading by another co: a passed timedwrlock, as glibc's;
     * a 100 ms one never early */
    r_stage = 0;
    aco_rt_pthread_t tr;
    CHECK_EQ(aco_rt_pthread_create(&tr, NULL, reader, NULL), 0);
    while (r_stage != 1) CHECK_EQ(aco_rt_pthread_yield(), 0);
    past = bb_abs(CLOCK_REALTIME, -1000);
    CHECK_EQ(aco_rt_pthread_rwlock_timedwrlock(&l, &past), g.timedwr_passed_rd);
    CHECK_EQ(g.timedwr_passed_rd, ETIMEDOUT);
    struct timespec bad = bb_bad_ns_hi;
    CHECK_EQ(aco_rt_pthread_rwlock_timedwrlock(&l, &bad), EINVAL);
    int64_t r0 = bb_real_ns();
    struct timespec t100 = bb_abs(CLOCK_REALTIME, 100);
    CHECK_EQ(aco_rt_pthread_rwlock_timedwrlock(&l, &t100), ETIMEDOUT);
    CHECK_GE(bb_real_ns() - r0, 100 * MS);
    r_stage = 2;
    CHECK_EQ(aco_rt_pthread_join(tr, NULL), 0);

    /* held for writing by another co: unlock EPERM; reads wait */
    r_stage = 0;
    CHECK_EQ(aco_rt_pthread_create(&tr, NULL, wholder, NULL), 0);
    while (r_stage != 1) CHECK_EQ(aco_rt_pthread_yield(), 0);
    CHECK_EQ(aco_rt_pthread_rwlock_unlock(&l), EPERM);
    CHECK_EQ(aco_rt_pthread_rwlock_tryrdlock(&l), EBUSY);
    CHECK_EQ(aco_rt_pthread_rwlock_trywrlock(&l), EBUSY);
    past = bb_abs(CLOCK_REALTIME, -1000);
    CHECK_EQ(aco_rt_pthread_rwlock_timedrdlock(&l, &past), ETIMEDOUT);
    r0 = bb_real_ns();
    t100 = bb_abs(CLOCK_REALTIME, 100);
    CHECK_EQ(aco_rt_pthread_rwlock_timedrdlock(&l, &t100), ETIMEDOUT);
    CHECK_GE(bb_real_ns() - r0, 100 * MS);
    CHECK_EQ(aco_rt_pthread_rwlock_destroy(&l), EBUSY);
    r_stage = 2;
    CHECK_EQ(aco_rt_pthread_rwlock_rdlock(&l), 0);          /* once it let go */
    CHECK_EQ(aco_rt_pthread_join(tr, NULL), 0);
    CHECK_EQ(aco_rt_pthread_rwlock_unlock(&l), 0);

    /* destroy, then init again */
    CHECK_EQ(aco_rt_pthread_rwlock_destroy(&l), 0);
    CHECK_EQ(aco_rt_pthread_rwlock_init(&l, NULL), 0);

    /* a bad attr, a share-stack object: refused, and stay so */
    aco_rt_pthread_rwlockattr_t a;
    CHECK_EQ(aco_rt_pthread_rwlockattr_init(&a), 0);
    CHECK_EQ(aco_rt_pthread_rwlockattr_setpshared(&a, ACO_RT_PTHREAD_PROCESS_SHARED), ENOTSUP);
    CHECK_EQ(aco_rt_pthread_rwlockattr_setpshared(&a, 7), EINVAL);
    int ps = -1;
    CHECK_EQ(aco_rt_pthread_rwlockattr_getpshared(&a, &ps), 0);
    CHECK_EQ(ps, ACO_RT_PTHREAD_PROCESS_PRIVATE);
    CHECK_EQ(aco_rt_pthread_rwlockattr_destroy(&a), 0);
    if (bb_locals_on_share_stack()) {
        aco_rt_pthread_rwlock_t local;
        memset(&local, 0, sizeof(local));
        CHECK_EQ(aco_rt_pthread_rwlock_init(&local, NULL), EINVAL);
        CHECK_EQ(aco_rt_pthread_rwlock_rdlock(&local), EINVAL);
        CHECK_EQ(aco_rt_pthread_rwlock_tryrdlock(&local), EINVAL);
        CHECK_EQ(aco_rt_pthread_rwlock_unlock(&local), EINVAL);
        CHECK_EQ(aco_rt_pthread_rwlock_destroy(&local), EINVAL);
    }
}

/* A cancelled co: ECANCELED from each lock call that can block (a waiting
 * one too); unlock still works. */
static int cv_stage;
static void* rw_victim(void* arg) {
    (void)arg;
    cv_stage = 1;
    CHECK_EQ(aco_rt_pthread_rwlock_rdlock(&l), ECANCELED);     /* waiting */
    cv_stage = 2;
    CHECK_EQ(aco_rt_pthread_rwlock_wrlock(&l), ECANCELED);
    return NULL;
}
static void rw_cancel(void) {
    cv_stage = 0;
    CHECK_EQ(aco_rt_pthread_rwlock_wrlock(&l), 0);
    aco_rt_pthread_t t;
    CHECK_EQ(aco_rt_pthread_create(&t, NULL, rw_victim, NULL), 0);
    while (cv_stage != 1) CHECK_EQ(aco_rt_pthread_yield(), 0);
    CHECK_EQ(aco_rt_pthread_yield(), 0);
    CHECK_EQ(aco_rt_cancel((aco_rt_co_t*)t), 0);
    CHECK_EQ(aco_rt_pthread_join(t, NULL), 0);
    CHECK_EQ(cv_stage, 2);
    CHECK_EQ(aco_rt_pthread_rwlock_unlock(&l), 0);
    CHECK_EQ(aco_rt_pthread_rwlock_destroy(&l), 0);            /* nobody left on it */
    CHECK_EQ(aco_rt_pthread_rwlock_init(&l, NULL), 0);
}

/* ---- barriers -------------------------------------------------------- */

#define BN 4
static aco_rt_pthread_barrier_t b, b1, b_never;
static int rounds;
static atomic_int serial_count[64], arrived[64];
static void* bwaiter(void* arg) {
    (void)arg;
    for (int r = 0; r < rounds; r++) {
        atomic_fetch_add(&arrived[r], 1);
        int x = aco_rt_pthread_barrier_wait(&b);
        CHECK(x == 0 || x == ACO_RT_PTHREAD_BARRIER_SERIAL_THREAD);
        CHECK_EQ(atomic_load(&arrived[r]), BN);    /* nobody passes early */
        if (x == ACO_RT_PTHREAD_BARRIER_SERIAL_THREAD) atomic_fetch_add(&serial_count[r], 1);
        if (r & 1) CHECK_EQ(aco_rt_pthread_yield(), 0);
    }
    return NULL;
}
static int bc_stage;
static void* bvictim(void* arg) {
    (void)arg;
    bc_stage = 1;
    CHECK_EQ(aco_rt_pthread_barrier_wait(&b), ECANCELED);
    CHECK_EQ(aco_rt_pthread_barrier_wait(&b), ECANCELED);      /* at once */
    return NULL;
}
static int late_done;
static void* blate(void* arg) {
    (void)arg;
    int x = aco_rt_pthread_barrier_wait(&b);
    CHECK(x == 0 || x == ACO_RT_PTHREAD_BARRIER_SERIAL_THREAD);
    late_done++;
    return (void*)(intptr_t)x;
}
static void barriers(void) {
    rounds = 20;
    memset(serial_count, 0, sizeof(serial_count));
    memset(arrived, 0, sizeof(arrived));
    CHECK_EQ(aco_rt_pthread_barrier_init(&b, NULL, BN), 0);
    aco_rt_pthread_t t[BN];
    for (int i = 0; i < BN; i++) CHECK_EQ(aco_rt_pthread_create(&t[i], NULL, bwaiter, NULL), 0);
    for (int i = 0; i < BN; i++) CHECK_EQ(aco_rt_pthread_join(t[i], NULL), 0);
    for (int r = 0; r < rounds; r++) CHECK_EQ(atomic_load(&serial_count[r]), 1);

    /* count 1: everyone is the last, as glibc's */
    CHECK_EQ(aco_rt_pthread_barrier_init(&b1, NULL, 1), 0);
    for (int i = 0; i < 3; i++) CHECK_EQ(aco_rt_pthread_barrier_wait(&b1), g.barrier_1);
    CHECK_EQ(g.barrier_1, ACO_RT_PTHREAD_BARRIER_SERIAL_THREAD);
    CHECK_EQ(aco_rt_pthread_barrier_destroy(&b1), 0);
    /* destroyed: EINVAL, as a destroyed mutex, until an init */
    CHECK_EQ(aco_rt_pthread_barrier_wait(&b1), EINVAL);
    CHECK_EQ(aco_rt_pthread_barrier_destroy(&b1), EINVAL);
    /* count 0: refused as glibc's; never made by init: EINVAL */
    CHECK_EQ(aco_rt_pthread_barrier_init(&b1, NULL, 0), g.barrier_0);
    CHECK_EQ(g.barrier_0, EINVAL);
    CHECK_EQ(aco_rt_pthread_barrier_wait(&b1), EINVAL);
    CHECK_EQ(aco_rt_pthread_barrier_destroy(&b1), EINVAL);
    memset(&b_never, 0, sizeof(b_never));
    CHECK_EQ(aco_rt_pthread_barrier_wait(&b_never), EINVAL);
    CHECK_EQ(aco_rt_pthread_barrier_destroy(&b_never), EINVAL);
    aco_rt_pthread_barrierattr_t ba;
    CHECK_EQ(aco_rt_pthread_barrierattr_init(&ba), 0);
    CHECK_EQ(aco_rt_pthread_barrierattr_setpshared(&ba, ACO_RT_PTHREAD_PROCESS_SHARED), ENOTSUP);
    CHECK_EQ(aco_rt_pthread_barrier_init(&b1, &ba, 2), 0);
    CHECK_EQ(aco_rt_pthread_barrier_destroy(&b1), 0);
    /* an attribute no setter made (pshared 9): a bad attr, refused, for
     * every object of this header */
    {
        aco_rt_pthread_barrierattr_t bad_ba = {9};
        CHECK_EQ(aco_rt_pthread_barrier_init(&b1, &bad_ba, 2), EINVAL);
        CHECK_EQ(aco_rt_pthread_barrier_wait(&b1), EINVAL);
        static aco_rt_pthread_rwlock_t bad_l;
        aco_rt_pthread_rwlockattr_t bad_ra = {9};
        CHECK_EQ(aco_rt_pthread_rwlock_init(&bad_l, &bad_ra), EINVAL);
        CHECK_EQ(aco_rt_pthread_rwlock_rdlock(&bad_l), EINVAL);
        static aco_rt_pthread_mutex_t bad_m;
        aco_rt_pthread_mutexattr_t bad_ma;
        CHECK_EQ(aco_rt_pthread_mutexattr_init(&bad_ma), 0);
        bad_ma.pshared_ = 7;
        CHECK_EQ(aco_rt_pthread_mutex_init(&bad_m, &bad_ma), EINVAL);
        CHECK_EQ(aco_rt_pthread_mutex_lock(&bad_m), EINVAL);
        static aco_rt_pthread_cond_t bad_c;
        aco_rt_pthread_condattr_t bad_ca;
        CHECK_EQ(aco_rt_pthread_condattr_init(&bad_ca), 0);
        bad_ca.pshared_ = ACO_RT_PTHREAD_PROCESS_SHARED;
        CHECK_EQ(aco_rt_pthread_cond_init(&bad_c, &bad_ca), EINVAL);
        CHECK_EQ(aco_rt_pthread_cond_signal(&bad_c), EINVAL);
        CHECK_EQ(aco_rt_pthread_barrier_init(&b1, &ba, 2), 0);   /* (made again) */
        CHECK_EQ(aco_rt_pthread_barrier_destroy(&b1), 0);
    }
    CHECK_EQ(aco_rt_pthread_barrierattr_destroy(&ba), 0);
    if (bb_locals_on_share_stack()) {
        aco_rt_pthread_barrier_t local;
        memset(&local, 0, sizeof(local));
        CHECK_EQ(aco_rt_pthread_barrier_init(&local, NULL, 1), EINVAL);
        CHECK_EQ(aco_rt_pthread_barrier_wait(&local), EINVAL);
    }

    /* a cancelled waiter no longer counts: the round needs two others */
    CHECK_EQ(aco_rt_pthread_barrier_init(&b, NULL, 2), 0);
    bc_stage = 0;
    late_done = 0;
    aco_rt_pthread_t v, l1, l2;
    CHECK_EQ(aco_rt_pthread_create(&v, NULL, bvictim, NULL), 0);
    while (bc_stage != 1) CHECK_EQ(aco_rt_pthread_yield(), 0);
    CHECK_EQ(aco_rt_pthread_yield(), 0);
    CHECK_EQ(aco_rt_pthread_barrier_destroy(&b), EBUSY);       /* a co waits */
    CHECK_EQ(aco_rt_cancel((aco_rt_co_t*)v), 0);
    CHECK_EQ(aco_rt_pthread_join(v, NULL), 0);
    CHECK_EQ(aco_rt_pthread_create(&l1, NULL, blate, NULL), 0);
    for (int i = 0; i < 4; i++) CHECK_EQ(aco_rt_pthread_yield(), 0);
    CHECK_EQ(late_done, 0);                 /* the cancelled one did not count */
    CHECK_EQ(aco_rt_pthread_create(&l2, NULL, blate, NULL), 0);
    void *x1, *x2;
    CHECK_EQ(aco_rt_pthread_join(l1, &x1), 0);
    CHECK_EQ(aco_rt_pthread_join(l2, &x2), 0);
    CHECK_EQ((intptr_t)x1 + (intptr_t)x2, ACO_RT_PTHREAD_BARRIER_SERIAL_THREAD);
    CHECK_EQ(aco_rt_pthread_barrier_destroy(&b), 0);
}

static void body(void) {
    rw();
    rw_cancel();
    barriers();
}

/* ---- outside cos, and a pool ----------------------------------------- */

static void outside(void) {
    CHECK_EQ(aco_rt_pthread_rwlock_init(&l, NULL), 0);
    CHECK_EQ(aco_rt_pthread_rwlock_rdlock(&l), EPERM);
    CHECK_EQ(aco_rt_pthread_rwlock_tryrdlock(&l), EPERM);
    CHECK_EQ(aco_rt_pthread_rwlock_wrlock(&l), EPERM);
    CHECK_EQ(aco_rt_pthread_rwlock_trywrlock(&l), EPERM);
    CHECK_EQ(aco_rt_pthread_barrier_init(&b, NULL, 2), 0);
    CHECK_EQ(aco_rt_pthread_barrier_wait(&b), EPERM);
    CHECK_EQ(aco_rt_pthread_barrier_destroy(&b), 0);
    CHECK_EQ(aco_rt_pthread_rwlock_destroy(&l), 0);
}

#define PN 6
static aco_rt_pthread_rwlock_t pl = ACO_RT_PTHREAD_RWLOCK_INITIALIZER;
static aco_rt_pthread_barrier_t pb;
static long shared_a, shared_b;
static atomic_int pserial[64];
static int prounds;
static void pool_co(void* arg) {
    int i = (int)(intptr_t)arg;
    for (int r = 0; r < prounds; r++) {
        if ((r + i) % 3 == 0) {
            CHECK_EQ(aco_rt_pthread_rwlock_wrlock(&pl), 0);
            shared_a++;
            if (r & 1) CHECK_EQ(aco_rt_pthread_yield(), 0);
            shared_b++;
            CHECK_EQ(aco_rt_pthread_rwlock_unlock(&pl), 0);
        } else {
            CHECK_EQ(aco_rt_pthread_rwlock_rdlock(&pl), 0);
            CHECK_EQ(shared_a, shared_b);                   /* no writer inside */
            CHECK_EQ(aco_rt_pthread_rwlock_unlock(&pl), 0);
        }
        if (r % 10 == 0) {
            int x = aco_rt_pthread_barrier_wait(&pb);
            CHECK(x == 0 || x == ACO_RT_PTHREAD_BARRIER_SERIAL_THREAD);
            if (x) atomic_fetch_add(&pserial[r / 10], 1);
        }
    }
}
static void pool(void) {
    prounds = FEW ? 100 : 600;
    CHECK_EQ(aco_rt_pthread_barrier_init(&pb, NULL, PN), 0);
    bb_on_pool(PN, pool_co);
    for (int k = 0; k < prounds / 10; k++) CHECK_EQ(atomic_load(&pserial[k]), 1);
    CHECK_EQ(shared_a, shared_b);
    CHECK_EQ(aco_rt_pthread_barrier_destroy(&pb), 0);
    CHECK_EQ(aco_rt_pthread_rwlock_destroy(&pl), 0);
}

int main(void) {
    glibc_answers();
    outside();
    bb_on_backends(body);
    pool();
    printf("test_pthread_bb_rwlock: ok\n");
    return 0;
}
