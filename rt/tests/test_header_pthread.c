/* test_header_pthread.c - aco_rt_pthread.h taken at its word: each check is
 * a sentence of the header, written from its text alone.  Both backends.
 */
#define _GNU_SOURCE
#include "rt_test.h"
#include "../aco_rt_pthread.h"

#include <pthread.h>
#include <time.h>

static int checks;
#define PROMISE() (checks++)

static aco_rt_sched_t* S;

static int64_t since(int64_t t0) { return aco_rt_now() - t0; }

static struct timespec rt_in(int64_t ns) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t t = ts.tv_sec * 1000000000LL + ts.tv_nsec + ns;
    ts.tv_sec = t / 1000000000LL;
    ts.tv_nsec = t % 1000000000LL;
    return ts;
}

/* ---- threads ---------------------------------------------------------- */

static void* ret_arg(void* a) { return a; }
static void* sleeper(void* a) {
    aco_rt_sleep((int64_t)(intptr_t)a * MS);
    return (void*)7;
}
static void* exiter(void* a) {
    (void)a;
    aco_rt_pthread_exit((void*)99);
}
static void plain(void* a) { (void)a; }
static aco_rt_pthread_t self_id;
static void* join_self(void* a) {
    (void)a;
    self_id = aco_rt_pthread_self();
    CHECK_EQ(aco_rt_pthread_join(aco_rt_pthread_self(), NULL), EDEADLK);
    CHECK((aco_rt_co_t*)self_id == aco_rt_self());
    return NULL;
}
static void* th_main(void* a) {
    (void)a;
    aco_rt_pthread_t t;
    void* r = NULL;
    CHECK_EQ(aco_rt_pthread_create(&t, NULL, ret_arg, (void*)42), 0);
    CHECK_EQ(aco_rt_pthread_join(t, &r), 0);
    CHECK_EQ((intptr_t)r, 42);
    CHECK_EQ(aco_rt_pthread_create(&t, NULL, exiter, NULL), 0);
    CHECK_EQ(aco_rt_pthread_join(t, &r), 0);
    CHECK_EQ((intptr_t)r, 99);
    CHECK_EQ(aco_rt_pthread_create(&t, NULL, join_self, NULL), 0);
    CHECK_EQ(aco_rt_pthread_join(t, NULL), 0);
    /* tryjoin / timedjoin */
    CHECK_EQ(aco_rt_pthread_create(&t, NULL, sleeper, (void*)30), 0);
    CHECK_EQ(aco_rt_pthread_tryjoin_np(t, &r), EBUSY);
    int64_t t0 = aco_rt_now();              /* (before the deadline is made) */
    struct timespec ts = rt_in(5 * MS);
    CHECK_EQ(aco_rt_pthread_timedjoin_np(t, &r, &ts), ETIMEDOUT);
    CHECK_GE(since(t0), 4 * MS);      /* wall clock vs monotonic: a little slack */
    struct timespec bad = {0, 2000000000L};
    CHECK_EQ(aco_rt_pthread_timedjoin_np(t, &r, &bad), EINVAL);
    CHECK_EQ(aco_rt_pthread_join(t, &r), 0);
    CHECK_EQ((intptr_t)r, 7);
    /* detach: join then EINVAL; detach twice EINVAL */
    CHECK_EQ(aco_rt_pthread_create(&t, NULL, sleeper, (void*)5), 0);
    CHECK_EQ(aco_rt_pthread_detach(t), 0);
    CHECK_EQ(aco_rt_pthread_detach(t), EINVAL);
    CHECK_EQ(aco_rt_pthread_join(t, NULL), EINVAL);
    /* attr: detached */
    aco_rt_pthread_attr_t at;
    CHECK_EQ(aco_rt_pthread_attr_init(&at), 0);
    CHECK_EQ(aco_rt_pthread_attr_setdetachstate(&at, 5), EINVAL);
    CHECK_EQ(aco_rt_pthread_attr_setdetachstate(&at, ACO_RT_PTHREAD_CREATE_DETACHED), 0);
    int st = -1;
    CHECK_EQ(aco_rt_pthread_attr_getdetachstate(&at, &st), 0);
    CHECK_EQ(st, ACO_RT_PTHREAD_CREATE_DETACHED);
    CHECK_EQ(aco_rt_pthread_create(&t, &at, sleeper, (void*)1), 0);
    CHECK_EQ(aco_rt_pthread_join(t, NULL), EINVAL);
    /* ESRCH: not made by aco_rt_pthread_create */
    aco_rt_co_t* c = aco_rt_spawn(NULL, plain, NULL);
    CHECK_EQ(aco_rt_pthread_join((aco_rt_pthread_t)c, NULL), ESRCH);
    CHECK_EQ(aco_rt_pthread_detach((aco_rt_pthread_t)c), ESRCH);
    CHECK_EQ(aco_rt_join(c, -1), 0);
    /* a big stack: its own, usable */
    CHECK_EQ(aco_rt_pthread_attr_setstacksize(&at, ACO_RT_PTHREAD_STACK_MIN - 1), EINVAL);
    size_t n = 0;
    CHECK_EQ(aco_rt_pthread_attr_init(&at), 0);
    CHECK_EQ(aco_rt_pthread_attr_getstacksize(&at, &n), 0);
    CHECK_EQ(n, 256 * 1024);                 /* the scheduler's share stacks */
    CHECK_EQ(aco_rt_pthread_attr_setstacksize(&at, 2 << 20), 0);
    CHECK_EQ(aco_rt_pthread_attr_getstacksize(&at, &n), 0);
    CHECK_EQ(n, 2 << 20);
    CHECK_EQ(aco_rt_pthread_equal(aco_rt_pthread_self(), aco_rt_pthread_self()), 1);
    CHECK(aco_rt_pthread_equal(aco_rt_pthread_self(), self_id) == 0);
    CHECK_EQ(aco_rt_pthread_yield(), 0);
    return NULL;
}
static void threads(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    for (int i = 0; i < 16; i++) PROMISE();
    aco_rt_pthread_t t;
    CHECK_EQ(aco_rt_pthread_create(&t, NULL, th_main, NULL), 0);   /* outside a co */
    CHECK_EQ(aco_rt_pthread_join(t, NULL), EPERM);                  /* outside a co */
    CHECK_EQ(aco_rt_pthread_detach(t), 0);
    test_run(s);
    PROMISE();
    aco_rt_pthread_t me = aco_rt_pthread_self();
    CHECK(me != 0);
    CHECK(aco_rt_self() == NULL);
    CHECK_EQ(aco_rt_pthread_yield(), 0);
}
static void* create_no_sched(void* a) {
    (void)a;
    aco_rt_pthread_t t;
    size_t n = 0;
    aco_rt_pthread_attr_t at;
    aco_rt_pthread_attr_init(&at);
    CHECK_EQ(aco_rt_pthread_attr_getstacksize(&at, &n), 0);
    CHECK_EQ(n, 256 * 1024);
    return (void*)(intptr_t)aco_rt_pthread_create(&t, NULL, ret_arg, NULL);
}

/* ---- mutexes ---------------------------------------------------------- */

static aco_rt_pthread_mutex_t pm = ACO_RT_PTHREAD_MUTEX_INITIALIZER;
static aco_rt_pthread_mutex_t rm = ACO_RT_PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static aco_rt_pthread_mutex_t em = ACO_RT_PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP;
/* The holder keeps pm until the timed locks are done (released, not a
 * sleep: a slow machine would outlast a sleep). */
static aco_rt_sem_t mx_release;
static void* mx_holder(void* a) {
    (void)a;
    CHECK_EQ(aco_rt_pthread_mutex_lock(&pm), 0);
    CHECK_EQ(aco_rt_sem_wait(&mx_release, -1), 0);
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&pm), 0);
    return NULL;
}
static void* mx_onstack(void* a) {
    (void)a;
    aco_rt_pthread_mutex_t m;
    aco_rt_pthread_cond_t c;
    aco_rt_pthread_barrier_t b;
    /* (ASan's detect_stack_use_after_return moves locals off the share
     * stack, to its fake stack: nothing to refuse then) */
    if ((uintptr_t)&m - (uintptr_t)__builtin_frame_address(0) + 65536 >= 131072) return NULL;
    CHECK_EQ(aco_rt_pthread_mutex_init(&m, NULL), EINVAL);
    CHECK_EQ(aco_rt_pthread_cond_init(&c, NULL), EINVAL);
    CHECK_EQ(aco_rt_pthread_barrier_init(&b, NULL, 2), EINVAL);
    return NULL;
}
static void* mx_main(void* a) {
    (void)a;
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&pm), EPERM);
    CHECK_EQ(aco_rt_pthread_mutex_lock(&pm), 0);
    CHECK_EQ(aco_rt_pthread_mutex_lock(&pm), EDEADLK);
    CHECK_EQ(aco_rt_pthread_mutex_trylock(&pm), EBUSY);
    CHECK_EQ(aco_rt_pthread_mutex_destroy(&pm), EBUSY);
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&pm), 0);
    CHECK_EQ(aco_rt_pthread_mutex_lock(&em), 0);
    CHECK_EQ(aco_rt_pthread_mutex_lock(&em), EDEADLK);
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&em), 0);
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&em), EPERM);
    for (int i = 0; i < 5; i++) CHECK_EQ(aco_rt_pthread_mutex_lock(&rm), 0);
    CHECK_EQ(aco_rt_pthread_mutex_trylock(&rm), 0);
    for (int i = 0; i < 6; i++) CHECK_EQ(aco_rt_pthread_mutex_unlock(&rm), 0);
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&rm), EPERM);
    /* timed: ETIMEDOUT never early; a bad abstime only when it must wait */
    aco_rt_pthread_t h;
    aco_rt_sem_init(&mx_release, 0);
    CHECK_EQ(aco_rt_pthread_create(&h, NULL, mx_holder, NULL), 0);
    CHECK_EQ(aco_rt_pthread_yield(), 0);
    int64_t t0 = aco_rt_now();              /* (before the deadline is made) */
    struct timespec ts = rt_in(5 * MS);
    CHECK_EQ(aco_rt_pthread_mutex_timedlock(&pm, &ts), ETIMEDOUT);
    CHECK_GE(since(t0), 4 * MS);
    struct timespec bad = {0, -1};
    CHECK_EQ(aco_rt_pthread_mutex_timedlock(&pm, &bad), EINVAL);
    struct timespec mono;
    clock_gettime(CLOCK_MONOTONIC, &mono);
    mono.tv_nsec += 3000000;
    if (mono.tv_nsec >= 1000000000L) { mono.tv_sec++; mono.tv_nsec -= 1000000000L; }
    t0 = aco_rt_now();
    CHECK_EQ(aco_rt_pthread_mutex_clocklock(&pm, CLOCK_MONOTONIC, &mono), ETIMEDOUT);
    CHECK_GE(since(t0), 2 * MS);
    CHECK_EQ(aco_rt_pthread_mutex_clocklock(&pm, CLOCK_PROCESS_CPUTIME_ID, &mono), EINVAL);
    aco_rt_sem_post(&mx_release);
    CHECK_EQ(aco_rt_pthread_join(h, NULL), 0);
    CHECK_EQ(aco_rt_pthread_mutex_timedlock(&pm, &bad), 0);   /* free: no wait */
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&pm), 0);
    /* destroyed: EINVAL */
    static aco_rt_pthread_mutex_t dm;
    CHECK_EQ(aco_rt_pthread_mutex_init(&dm, NULL), 0);
    CHECK_EQ(aco_rt_pthread_mutex_destroy(&dm), 0);
    CHECK_EQ(aco_rt_pthread_mutex_lock(&dm), EINVAL);
    /* attrs */
    aco_rt_pthread_mutexattr_t ma;
    CHECK_EQ(aco_rt_pthread_mutexattr_init(&ma), 0);
    CHECK_EQ(aco_rt_pthread_mutexattr_setpshared(&ma, ACO_RT_PTHREAD_PROCESS_SHARED), ENOTSUP);
    CHECK_EQ(aco_rt_pthread_mutexattr_setpshared(&ma, 9), EINVAL);
    CHECK_EQ(aco_rt_pthread_mutexattr_setpshared(&ma, ACO_RT_PTHREAD_PROCESS_PRIVATE), 0);
    aco_rt_pthread_t t;
    CHECK_EQ(aco_rt_pthread_create(&t, NULL, mx_onstack, NULL), 0);
    CHECK_EQ(aco_rt_pthread_join(t, NULL), 0);
    return NULL;
}
static void mutexes(aco_rt_sched_t* s, void* arg) {
    (void)s; (void)arg;
    for (int i = 0; i < 16; i++) PROMISE();
    aco_rt_pthread_t t;
    CHECK_EQ(aco_rt_pthread_create(&t, NULL, mx_main, NULL), 0);
    CHECK_EQ(aco_rt_pthread_detach(t), 0);
    test_run(s);
    PROMISE();
    CHECK_EQ(aco_rt_pthread_mutex_lock(&pm), EPERM);        /* outside a co */
}

/* ---- conds ------------------------------------------------------------ */

static aco_rt_pthread_cond_t cv = ACO_RT_PTHREAD_COND_INITIALIZER;
static aco_rt_pthread_cond_t cvm_c;
static int cv_ready;
static void* cv_waiter(void* a) {
    (void)a;
    CHECK_EQ(aco_rt_pthread_mutex_lock(&rm), 0);
    while (!cv_ready) CHECK_EQ(aco_rt_pthread_cond_wait(&cv, &rm), 0);
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&rm), 0);
    return NULL;
}
static void* cv_recursive(void* a) {
    (void)a;
    /* a wait on a RECURSIVE mutex held 3 times releases it fully */
    CHECK_EQ(aco_rt_pthread_mutex_lock(&rm), 0);
    cv_ready = 1;
    CHECK_EQ(aco_rt_pthread_cond_signal(&cv), 0);
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&rm), 0);
    return NULL;
}
static void* cv_main(void* a) {
    (void)a;
    CHECK_EQ(aco_rt_pthread_cond_wait(&cv, &pm), EPERM);
    CHECK_EQ(aco_rt_pthread_mutex_lock(&pm), 0);
    int64_t t0 = aco_rt_now();              /* (before the deadline is made) */
    struct timespec ts = rt_in(5 * MS);
    CHECK_EQ(aco_rt_pthread_cond_timedwait(&cv, &pm, &ts), ETIMEDOUT);
    CHECK_GE(since(t0), 4 * MS);
    CHECK_EQ(aco_rt_pthread_mutex_trylock(&pm), EBUSY);     /* held again */
    struct timespec bad = {0, 1000000000L};
    CHECK_EQ(aco_rt_pthread_cond_timedwait(&cv, &pm, &bad), EINVAL);
    CHECK_EQ(aco_rt_pthread_cond_clockwait(&cv, &pm, CLOCK_THREAD_CPUTIME_ID, &ts), EINVAL);
    /* a MONOTONIC cond */
    aco_rt_pthread_condattr_t ca;
    CHECK_EQ(aco_rt_pthread_condattr_init(&ca), 0);
    CHECK_EQ(aco_rt_pthread_condattr_setclock(&ca, CLOCK_PROCESS_CPUTIME_ID), EINVAL);
    CHECK_EQ(aco_rt_pthread_condattr_setclock(&ca, CLOCK_MONOTONIC), 0);
    clockid_t ck;
    CHECK_EQ(aco_rt_pthread_condattr_getclock(&ca, &ck), 0);
    CHECK_EQ(ck, CLOCK_MONOTONIC);
    CHECK_EQ(aco_rt_pthread_cond_init(&cvm_c, &ca), 0);
    struct timespec mono;
    t0 = aco_rt_now();                      /* (before the deadline is made:
                                               a thread switch of valgrind's
                                               between the two took 3.8 ms) */
    clock_gettime(CLOCK_MONOTONIC, &mono);
    mono.tv_nsec += 4000000;
    if (mono.tv_nsec >= 1000000000L) { mono.tv_sec++; mono.tv_nsec -= 1000000000L; }
    CHECK_EQ(aco_rt_pthread_cond_timedwait(&cvm_c, &pm, &mono), ETIMEDOUT);
    CHECK_GE(since(t0), 3 * MS);
    CHECK_LT(since(t0), 1000 * MS);
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&pm), 0);
    /* recursive mutex held 3 times through a wait */
    cv_ready = 0;
    for (int i = 0; i < 3; i++) CHECK_EQ(aco_rt_pthread_mutex_lock(&rm), 0);
    aco_rt_pthread_t t;
    CHECK_EQ(aco_rt_pthread_create(&t, NULL, cv_recursive, NULL), 0);
    while (!cv_ready) CHECK_EQ(aco_rt_pthread_cond_wait(&cv, &rm), 0);
    for (int i = 0; i < 3; i++) CHECK_EQ(aco_rt_pthread_mutex_unlock(&rm), 0);
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&rm), EPERM);
    CHECK_EQ(aco_rt_pthread_join(t, NULL), 0);
    /* destroy while a co waits: EBUSY */
    cv_ready = 0;
    CHECK_EQ(aco_rt_pthread_create(&t, NULL, cv_waiter, NULL), 0);
    CHECK_EQ(aco_rt_pthread_yield(), 0);
    CHECK_EQ(aco_rt_pthread_cond_destroy(&cv), EBUSY);
    CHECK_EQ(aco_rt_pthread_mutex_lock(&rm), 0);
    cv_ready = 1;
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&rm), 0);
    CHECK_EQ(aco_rt_pthread_cond_broadcast(&cv), 0);
    CHECK_EQ(aco_rt_pthread_join(t, NULL), 0);
    CHECK_EQ(aco_rt_pthread_cond_destroy(&cv), 0);
    return NULL;
}
static void conds(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    for (int i = 0; i < 12; i++) PROMISE();
    aco_rt_pthread_t t;
    CHECK_EQ(aco_rt_pthread_create(&t, NULL, cv_main, NULL), 0);
    CHECK_EQ(aco_rt_pthread_detach(t), 0);
    test_run(s);
    PROMISE();
    CHECK_EQ(aco_rt_pthread_cond_signal(&cvm_c), 0);        /* from anywhere */
    CHECK_EQ(aco_rt_pthread_cond_broadcast(&cvm_c), 0);
    aco_rt_pthread_cond_t z = ACO_RT_PTHREAD_COND_INITIALIZER;
    cv = z;
}

/* ---- once, keys, rwlock, barrier -------------------------------------- */

static aco_rt_pthread_once_t once = ACO_RT_PTHREAD_ONCE_INIT;
static aco_rt_pthread_once_t once2 = ACO_RT_PTHREAD_ONCE_INIT;
static int once_runs, once_inner;
static void once_init(void) {
    once_runs++;
    aco_rt_sleep(5 * MS);       /* may block: others wait */
}
static void once_recurse(void) { once_inner = aco_rt_pthread_once(&once2, once_recurse); }
static void* once_caller(void* a) {
    (void)a;
    CHECK_EQ(aco_rt_pthread_once(&once, once_init), 0);
    CHECK_EQ(once_runs, 1);     /* returned only once init returned */
    return NULL;
}
static aco_rt_pthread_rwlock_t rw = ACO_RT_PTHREAD_RWLOCK_INITIALIZER;
static aco_rt_pthread_barrier_t bar;
static int bar_serial;
static void* bar_waiter(void* a) {
    (void)a;
    int r = aco_rt_pthread_barrier_wait(&bar);
    CHECK(r == 0 || r == ACO_RT_PTHREAD_BARRIER_SERIAL_THREAD);
    if (r == ACO_RT_PTHREAD_BARRIER_SERIAL_THREAD) bar_serial++;
    return NULL;
}
static void* rw_reader(void* a) {
    (void)a;
    CHECK_EQ(aco_rt_pthread_rwlock_rdlock(&rw), 0);
    aco_rt_sleep(2 * MS);
    CHECK_EQ(aco_rt_pthread_rwlock_unlock(&rw), 0);
    return NULL;
}
/* Waiters that aco_rt_sched_free destroys "leave the wait queues of the
 * objects [they] waited on" (aco_rt.h): a thread's scheduler with a co in
 * wrlock and one in barrier_wait is freed under them. */
static aco_rt_pthread_rwlock_t rw2 = ACO_RT_PTHREAD_RWLOCK_INITIALIZER;
static aco_rt_pthread_barrier_t bar3;
static int dw_parked;
static void dw_writer(void* a) {
    (void)a;
    __atomic_add_fetch(&dw_parked, 1, __ATOMIC_SEQ_CST);
    aco_rt_pthread_rwlock_wrlock(&rw2);         /* destroyed in it */
    CHECK(!"a destroyed waiter ran on");
}
static void dw_barrier(void* a) {
    (void)a;
    __atomic_add_fetch(&dw_parked, 1, __ATOMIC_SEQ_CST);
    aco_rt_pthread_barrier_wait(&bar3);         /* destroyed in it */
    CHECK(!"a destroyed waiter ran on");
}
static void dw_stop(void* a) {
    (void)a;
    while (__atomic_load_n(&dw_parked, __ATOMIC_SEQ_CST) < 2) aco_rt_sleep(1 * MS);
    aco_rt_sleep(5 * MS);       /* (both are in their waits by now) */
    aco_rt_sched_stop(aco_rt_sched_current());
}
static void* dw_thread(void* a) {
    (void)a;
    aco_rt_opts_t o = {0};
    o.backend = test_backend_id;
    aco_rt_sched_t* s = aco_rt_sched_new(&o);
    CHECK(s != NULL);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, dw_writer, NULL)), 0);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, dw_barrier, NULL)), 0);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, dw_stop, NULL)), 0);
    CHECK_EQ(aco_rt_sched_run(s), 0);
    aco_rt_sched_free(s);
    return NULL;
}
static int dw_late_came;
static void* dw_late(void* a) {
    (void)a;
    aco_rt_sleep(20 * MS);
    __atomic_store_n(&dw_late_came, 1, __ATOMIC_SEQ_CST);
    int r = aco_rt_pthread_barrier_wait(&bar3);
    CHECK(r == 0 || r == ACO_RT_PTHREAD_BARRIER_SERIAL_THREAD);
    return (void*)(intptr_t)r;
}
static void* dw_early(void* a) {
    (void)a;
    int r = aco_rt_pthread_barrier_wait(&bar3);
    CHECK(r == 0 || r == ACO_RT_PTHREAD_BARRIER_SERIAL_THREAD);
    return (void*)(intptr_t)r;
}
static void destroyed_waiters(void) {
    dw_parked = 0;
    dw_late_came = 0;
    aco_rt_pthread_rwlock_t zr = ACO_RT_PTHREAD_RWLOCK_INITIALIZER;
    rw2 = zr;
    CHECK_EQ(aco_rt_pthread_barrier_init(&bar3, NULL, 3), 0);
    CHECK_EQ(aco_rt_pthread_rwlock_rdlock(&rw2), 0);    /* the writer waits */
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, dw_thread, NULL), 0);
    while (__atomic_load_n(&dw_parked, __ATOMIC_SEQ_CST) < 2) aco_rt_sleep(1 * MS);
    /* (pthread_join would block this co's scheduler: poll for the end) */
    while (pthread_tryjoin_np(th, NULL) != 0) aco_rt_sleep(1 * MS);
    CHECK_EQ(aco_rt_pthread_rwlock_unlock(&rw2), 0);
    CHECK_EQ(aco_rt_pthread_rwlock_destroy(&rw2), 0);   /* nobody waits */
    CHECK_EQ(aco_rt_pthread_rwlock_trywrlock(&rw2), 0);
    CHECK_EQ(aco_rt_pthread_rwlock_unlock(&rw2), 0);
    /* "Wait for count cos": the destroyed one does not count */
    aco_rt_pthread_t e, l;
    CHECK_EQ(aco_rt_pthread_create(&e, NULL, dw_early, NULL), 0);
    CHECK_EQ(aco_rt_pthread_create(&l, NULL, dw_late, NULL), 0);
    CHECK_EQ(aco_rt_pthread_yield(), 0);
    int r = aco_rt_pthread_barrier_wait(&bar3);
    CHECK_EQ(__atomic_load_n(&dw_late_came, __ATOMIC_SEQ_CST), 1);
    void *re, *rl;
    CHECK_EQ(aco_rt_pthread_join(e, &re), 0);
    CHECK_EQ(aco_rt_pthread_join(l, &rl), 0);
    CHECK_EQ((r == ACO_RT_PTHREAD_BARRIER_SERIAL_THREAD) +
             ((intptr_t)re == ACO_RT_PTHREAD_BARRIER_SERIAL_THREAD) +
             ((intptr_t)rl == ACO_RT_PTHREAD_BARRIER_SERIAL_THREAD), 1);
    CHECK_EQ(aco_rt_pthread_barrier_destroy(&bar3), 0);
}
static void* cancelled_once(void* a) {
    (void)a;
    CHECK_EQ(aco_rt_cancel(aco_rt_self()), 0);
    /* "ECANCELED (in a cancelled co, whether or not init already ran)" */
    CHECK_EQ(aco_rt_pthread_once(&once, once_init), ECANCELED);
    return NULL;
}
static void* misc_main(void* a) {
    (void)a;
    aco_rt_pthread_t t[3];
    for (int i = 0; i < 3; i++) CHECK_EQ(aco_rt_pthread_create(&t[i], NULL, once_caller, NULL), 0);
    for (int i = 0; i < 3; i++) CHECK_EQ(aco_rt_pthread_join(t[i], NULL), 0);
    CHECK_EQ(once_runs, 1);
    CHECK_EQ(aco_rt_pthread_once(&once2, once_recurse), 0);
    CHECK_EQ(once_inner, EDEADLK);
    /* keys */
    aco_rt_pthread_key_t k;
    CHECK_EQ(aco_rt_pthread_key_create(&k, NULL), 0);
    CHECK_EQ(aco_rt_pthread_setspecific(k, "v"), 0);
    CHECK(aco_rt_pthread_getspecific(k) != NULL);
    CHECK_EQ(aco_rt_pthread_key_delete(k), 0);
    CHECK_EQ(aco_rt_pthread_key_delete(k), EINVAL);
    CHECK_EQ(aco_rt_pthread_setspecific(k, "v"), EINVAL);
    /* all ACO_RT_PTHREAD_KEYS_MAX are the program's, pthread cos running
     * or not; EAGAIN (no key left) past them */
    static aco_rt_pthread_key_t ks[ACO_RT_PTHREAD_KEYS_MAX];
    for (int i = 0; i < ACO_RT_PTHREAD_KEYS_MAX; i++)
        CHECK_EQ(aco_rt_pthread_key_create(&ks[i], NULL), 0);
    CHECK_EQ(aco_rt_pthread_key_create(&k, NULL), EAGAIN);
    for (int i = 0; i < ACO_RT_PTHREAD_KEYS_MAX; i++) CHECK_EQ(aco_rt_pthread_key_delete(ks[i]), 0);
    CHECK_EQ(aco_rt_pthread_create(&t[0], NULL, cancelled_once, NULL), 0);
    CHECK_EQ(aco_rt_pthread_join(t[0], NULL), 0);
    destroyed_waiters();
    /* rwlock */
    CHECK_EQ(aco_rt_pthread_rwlock_unlock(&rw), EPERM);
    CHECK_EQ(aco_rt_pthread_rwlock_rdlock(&rw), 0);
    CHECK_EQ(aco_rt_pthread_rwlock_rdlock(&rw), 0);     /* again while holding */
    CHECK_EQ(aco_rt_pthread_rwlock_trywrlock(&rw), EBUSY);
    CHECK_EQ(aco_rt_pthread_rwlock_destroy(&rw), EBUSY);
    CHECK_EQ(aco_rt_pthread_rwlock_unlock(&rw), 0);
    CHECK_EQ(aco_rt_pthread_rwlock_unlock(&rw), 0);
    CHECK_EQ(aco_rt_pthread_rwlock_wrlock(&rw), 0);
    CHECK_EQ(aco_rt_pthread_rwlock_rdlock(&rw), EDEADLK);
    int tr = aco_rt_pthread_rwlock_tryrdlock(&rw);   /* either sentence */
    CHECK(tr == EDEADLK || tr == EBUSY);
    CHECK_EQ(aco_rt_pthread_create(&t[0], NULL, rw_reader, NULL), 0);
    CHECK_EQ(aco_rt_pthread_yield(), 0);
    CHECK_EQ(aco_rt_pthread_rwlock_unlock(&rw), 0);
    CHECK_EQ(aco_rt_pthread_join(t[0], NULL), 0);
    int64_t t0 = aco_rt_now();              /* (before the deadline is made) */
    struct timespec ts = rt_in(3 * MS);
    CHECK_EQ(aco_rt_pthread_rwlock_rdlock(&rw), 0);
    CHECK_EQ(aco_rt_pthread_rwlock_timedwrlock(&rw, &ts), ETIMEDOUT);
    CHECK_GE(since(t0), 2 * MS);
    CHECK_EQ(aco_rt_pthread_rwlock_unlock(&rw), 0);
    CHECK_EQ(aco_rt_pthread_rwlock_destroy(&rw), 0);
    /* barrier */
    CHECK_EQ(aco_rt_pthread_barrier_init(&bar, NULL, 0), EINVAL);
    CHECK_EQ(aco_rt_pthread_barrier_init(&bar, NULL, 3), 0);
    bar_serial = 0;
    for (int i = 0; i < 2; i++) CHECK_EQ(aco_rt_pthread_create(&t[i], NULL, bar_waiter, NULL), 0);
    CHECK_EQ(aco_rt_pthread_yield(), 0);
    CHECK_EQ(aco_rt_pthread_barrier_destroy(&bar), EBUSY);
    CHECK_EQ(aco_rt_pthread_barrier_wait(&bar), ACO_RT_PTHREAD_BARRIER_SERIAL_THREAD);  /* last */
    for (int i = 0; i < 2; i++) CHECK_EQ(aco_rt_pthread_join(t[i], NULL), 0);
    CHECK_EQ(bar_serial, 0);
    CHECK_EQ(aco_rt_pthread_barrier_destroy(&bar), 0);
    return NULL;
}
static void misc(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    for (int i = 0; i < 18; i++) PROMISE();
    aco_rt_pthread_t t;
    CHECK_EQ(aco_rt_pthread_create(&t, NULL, misc_main, NULL), 0);
    CHECK_EQ(aco_rt_pthread_detach(t), 0);
    test_run(s);
    PROMISE();      /* once outside a co: EPERM unless it already ran */
    static aco_rt_pthread_once_t o3 = ACO_RT_PTHREAD_ONCE_INIT;
    CHECK_EQ(aco_rt_pthread_once(&o3, once_init), EPERM);
    CHECK_EQ(aco_rt_pthread_once(&once, once_init), 0);
    CHECK_EQ(aco_rt_pthread_rwlock_rdlock(&rw), EPERM);
    CHECK_EQ(aco_rt_pthread_barrier_wait(&bar), EINVAL);       /* destroyed */
    CHECK_EQ(aco_rt_pthread_barrier_init(&bar, NULL, 2), 0);
    CHECK_EQ(aco_rt_pthread_barrier_wait(&bar), EPERM);
    CHECK_EQ(aco_rt_pthread_barrier_destroy(&bar), 0);
}

/* ---- run_main ---------------------------------------------------------- */

/* The other thread sleeps far longer than any run of the test: had
 * run_main waited for it, its end would show. */
#define RM_OTHER_MS 100000
static int rm_other_ran_to_end;
static void* rm_other(void* a) {
    (void)a;
    aco_rt_sleep(RM_OTHER_MS * MS);
    rm_other_ran_to_end = 1;
    return NULL;
}
static int rm_main(int argc, char** argv) {
    CHECK_EQ(argc, 2);
    CHECK(strcmp(argv[1], "x") == 0);
    /* its stack is its own: objects on it may be shared */
    aco_rt_pthread_mutex_t m;
    CHECK_EQ(aco_rt_pthread_mutex_init(&m, NULL), 0);
    aco_rt_pthread_t t;
    CHECK_EQ(aco_rt_pthread_create(&t, NULL, rm_other, NULL), 0);
    CHECK_EQ(aco_rt_pthread_detach(t), 0);
    return 17;
}
static void* rm_thread(void* a) {
    (void)a;
    char* argv[] = {"prog", "x", NULL};
    rm_other_ran_to_end = 0;
    int64_t t0 = aco_rt_now();
    int r = aco_rt_pthread_run_main(rm_main, 2, argv);
    CHECK_EQ(r, 17);
    CHECK_LT(since(t0), RM_OTHER_MS * MS);  /* others stopped, not waited for */
    CHECK_EQ(rm_other_ran_to_end, 0);
    CHECK(aco_rt_sched_current() == NULL);  /* made here, freed after */
    return NULL;
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    PROMISE();
    pthread_t th;
    void* r;
    CHECK_EQ(pthread_create(&th, NULL, create_no_sched, NULL), 0);
    CHECK_EQ(pthread_join(th, &r), 0);
    CHECK_EQ((intptr_t)r, EPERM);
    PROMISE();
    CHECK_EQ(pthread_create(&th, NULL, rm_thread, NULL), 0);
    CHECK_EQ(pthread_join(th, NULL), 0);
    void (*parts[])(aco_rt_sched_t*, void*) = {threads, mutexes, conds, misc};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        once_runs = 0;
        aco_rt_pthread_once_t z = ACO_RT_PTHREAD_ONCE_INIT;
        once = z;
        once2 = z;
        aco_rt_pthread_rwlock_t zr = ACO_RT_PTHREAD_RWLOCK_INITIALIZER;
        rw = zr;
        test_on_backends(NULL, parts[i], NULL);
    }
    (void)S;
    printf("test_header_pthread: %d promises checked\n", checks);
    return 0;
}
