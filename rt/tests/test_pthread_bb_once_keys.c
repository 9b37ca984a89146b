/* test_pthread_bb_once_keys.c - the pthread face's once and keys taken at
 * the word of rt/aco_rt_pthread.h, beside glibc's: once runs its routine
 * exactly once while callers that come meanwhile wait (it blocks), EPERM
 * outside cos until it ran, EDEADLK from the routine itself, ECANCELED in
 * a cancelled co; keys' destructors at a co's end and at
 * aco_rt_pthread_exit, their rounds (as many as glibc's), EAGAIN past the
 * last key, EINVAL for keys not made or deleted (as glibc's), values per
 * co and per thread; once and a key across the cos of a 2-thread pool. */
#include "pthread_bb.h"

/* ---- once ------------------------------------------------------------ */

static aco_rt_pthread_once_t o1 = ACO_RT_PTHREAD_ONCE_INIT, o_self, o_out, o_cancel;
static atomic_int init_runs, init_done;
static void init_slow(void) {
    atomic_fetch_add(&init_runs, 1);
    CHECK_EQ(aco_rt_sleep(20 * MS), 0);     /* it may block */
    atomic_store(&init_done, 1);
}
static void* once_caller(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_pthread_once(&o1, init_slow), 0);
    CHECK_EQ(atomic_load(&init_done), 1);  /* it returned before we did */
    return NULL;
}
static int self_rc = -1;
static void init_self(void) { self_rc = aco_rt_pthread_once(&o_self, init_self); }
static int cancel_init_runs;
static void init_count(void) { cancel_init_runs++; }
static void* once_cancelled(void* arg) {
    (void)arg;
    while (!aco_rt_cancelled()) CHECK_EQ(aco_rt_pthread_yield(), 0);
    /* not yet run, and already run: ECANCELED either way */
    CHECK_EQ(aco_rt_pthread_once(&o_cancel, init_count), ECANCELED);
    CHECK_EQ(aco_rt_pthread_once(&o1, init_slow), ECANCELED);
    return NULL;
}

static void once_body(void) {
    memset(&o1, 0, sizeof(o1));
    memset(&o_self, 0, sizeof(o_self));
    memset(&o_cancel, 0, sizeof(o_cancel));
    atomic_store(&init_runs, 0);
    atomic_store(&init_done, 0);
    aco_rt_pthread_t t[8];
    for (int i = 0; i < 8; i++) CHECK_EQ(aco_rt_pthread_create(&t[i], NULL, once_caller, NULL), 0);
    for (int i = 0; i < 8; i++) CHECK_EQ(aco_rt_pthread_join(t[i], NULL), 0);
    CHECK_EQ(atomic_load(&init_runs), 1);
    CHECK_EQ(aco_rt_pthread_once(&o1, init_slow), 0);
    CHECK_EQ(atomic_load(&init_runs), 1);

    self_rc = -1;
    CHECK_EQ(aco_rt_pthread_once(&o_self, init_self), 0);
    CHECK_EQ(self_rc, EDEADLK);
    CHECK_EQ(aco_rt_pthread_once(&o_self, init_self), 0);     /* done now */

    cancel_init_runs = 0;
    aco_rt_pthread_t c;
    CHECK_EQ(aco_rt_pthread_create(&c, NULL, once_cancelled, NULL), 0);
    CHECK_EQ(aco_rt_cancel((aco_rt_co_t*)c), 0);
    CHECK_EQ(aco_rt_pthread_join(c, NULL), 0);
    CHECK_EQ(cancel_init_runs, 0);
    CHECK_EQ(aco_rt_pthread_once(&o_cancel, init_count), 0);
    CHECK_EQ(cancel_init_runs, 1);

    CHECK_EQ(aco_rt_pthread_once(NULL, init_count), EINVAL);
    CHECK_EQ(aco_rt_pthread_once(&o_cancel, NULL), EINVAL);
}

static int out_runs;
static void init_out(void) { out_runs++; }
static void once_out_co(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_pthread_once(&o_out, init_out), 0);
}
static void once_outside(void) {
    memset(&o_out, 0, sizeof(o_out));
    CHECK_EQ(aco_rt_pthread_once(&o_out, init_out), EPERM);   /* not run yet */
    CHECK_EQ(out_runs, 0);
    aco_rt_sched_t* s = test_sched(NULL);
    test_go(s, once_out_co, NULL);
    aco_rt_sched_free(s);
    CHECK_EQ(out_runs, 1);
    CHECK_EQ(aco_rt_pthread_once(&o_out, init_out), 0);       /* ran: 0 */
    CHECK_EQ(out_runs, 1);
}

/* ---- keys ------------------------------------------------------------ */

/* Rounds: a destructor that sets its value again every time. */
static int g_rounds, co_rounds;
static pthread_key_t gk;
static void g_dtor(void* v) {
    g_rounds++;
    pthread_setspecific(gk, v);
}
static void* g_thread(void* arg) {
    (void)arg;
    pthread_setspecific(gk, (void*)1);
    return NULL;
}
static struct {
    int delete_bad, set_bad, delete_twice;
} g;
static void glibc_answers(void) {
    CHECK_EQ(pthread_key_create(&gk, g_dtor), 0);
#if TEST_TSAN
    /* clang's TSan dies in a destructor at a plain thread's exit */
    (void)g_thread;
    g_rounds = PTHREAD_DESTRUCTOR_ITERATIONS;
#else
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, g_thread, NULL), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
#endif
    CHECK_EQ(pthread_key_delete(gk), 0);
    g.delete_twice = pthread_key_delete(gk);
    g.delete_bad = pthread_key_delete(100000);
    g.set_bad = pthread_setspecific(100000, (void*)1);
}

static aco_rt_pthread_key_t k1, k2, k3, kr;
static int log_[16], nlog;
static void d1(void* v) { log_[nlog++] = 100 + (int)(intptr_t)v; }
static void d2(void* v) {
    log_[nlog++] = 200 + (int)(intptr_t)v;
    CHECK(aco_rt_pthread_getspecific(k2) == NULL);    /* set to NULL before */
}
static void dr(void* v) {
    co_rounds++;
    CHECK_EQ(aco_rt_pthread_setspecific(kr, v), 0);
}

static void* key_co(void* arg) {
    int how = (int)(intptr_t)arg;
    CHECK(aco_rt_pthread_getspecific(k1) == NULL);     /* a co starts with NULLs */
    CHECK_EQ(aco_rt_pthread_setspecific(k1, (void*)1), 0);
    CHECK_EQ(aco_rt_pthread_setspecific(k2, (void*)2), 0);
    CHECK_EQ(aco_rt_pthread_setspecific(k3, (void*)3), 0);     /* no destructor */
    CHECK(aco_rt_pthread_getspecific(k2) == (void*)2);
    CHECK_EQ(aco_rt_pthread_yield(), 0);
    CHECK(aco_rt_pthread_getspecific(k1) == (void*)1);         /* its own, still */
    if (how == 1) aco_rt_pthread_exit((void*)42);
    return (void*)41;
}
static void* rounds_co(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_pthread_setspecific(kr, (void*)5), 0);
    return NULL;
}

static void keys_body(void) {
    CHECK_EQ(aco_rt_pthread_key_create(&k1, d1), 0);
    CHECK_EQ(aco_rt_pthread_key_create(&k2, d2), 0);
    CHECK_EQ(aco_rt_pthread_key_create(&k3, NULL), 0);
    CHECK_EQ(aco_rt_pthread_key_create(&kr, dr), 0);
    CHECK_EQ(aco_rt_pthread_setspecific(k1, (void*)9), 0);     /* the main co's */
    for (int how = 0; how < 2; how++) {
        nlog = 0;
        aco_rt_pthread_t t;
        CHECK_EQ(aco_rt_pthread_create(&t, NULL, key_co, (void*)(intptr_t)how), 0);
        void* r;
        CHECK_EQ(aco_rt_pthread_join(t, &r), 0);
        CHECK(r == (void*)(intptr_t)(how ? 42 : 41));
        CHECK_EQ(nlog, 2);                  /* in key order, once each */
        CHECK_EQ(log_[0], 101);
        CHECK_EQ(log_[1], 202);
    }
    CHECK(aco_rt_pthread_getspecific(k1) == (void*)9);
    /* rounds: as many as glibc's, which PTHREAD_DESTRUCTOR_ITERATIONS says */
    co_rounds = 0;
    aco_rt_pthread_t t;
    CHECK_EQ(aco_rt_pthread_create(&t, NULL, rounds_co, NULL), 0);
    CHECK_EQ(aco_rt_pthread_join(t, NULL), 0);
    CHECK_EQ(co_rounds, ACO_RT_PTHREAD_DESTRUCTOR_ITERATIONS);
    CHECK_EQ(co_rounds, g_rounds);
    CHECK_EQ(ACO_RT_PTHREAD_DESTRUCTOR_ITERATIONS, PTHREAD_DESTRUCTOR_ITERATIONS);
    CHECK_EQ(aco_rt_pthread_setspecific(k1, NULL), 0);
    /* a deleted key: EINVAL as glibc's, its destructor no longer runs */
    CHECK_EQ(aco_rt_pthread_key_delete(kr), 0);
    CHECK_EQ(aco_rt_pthread_key_delete(kr), g.delete_twice);
    CHECK_EQ(g.delete_twice, EINVAL);
    CHECK_EQ(aco_rt_pthread_setspecific(kr, (void*)1), g.set_bad);
    CHECK_EQ(g.set_bad, EINVAL);
    CHECK(aco_rt_pthread_getspecific(kr) == NULL);
    CHECK_EQ(aco_rt_pthread_key_delete(100000), g.delete_bad);
    CHECK_EQ(aco_rt_pthread_key_create(&kr, dr), 0);
    CHECK_EQ(aco_rt_pthread_key_delete(k1), 0);
    CHECK_EQ(aco_rt_pthread_key_delete(k2), 0);
    CHECK_EQ(aco_rt_pthread_key_delete(k3), 0);
    CHECK_EQ(aco_rt_pthread_key_delete(kr), 0);
}

/* Keys run out: EAGAIN (positive), then one more after a delete. */
static void keys_limit(void) {
    static aco_rt_pthread_key_t ks[ACO_RT_PTHREAD_KEYS_MAX + 1];
    int n = 0, r;
    while ((r = aco_rt_pthread_key_create(&ks[n], NULL)) == 0) {
        n++;
        CHECK_LE(n, ACO_RT_PTHREAD_KEYS_MAX);
    }
    CHECK_EQ(r, EAGAIN);
    CHECK_GT(n, ACO_RT_PTHREAD_KEYS_MAX / 2);
    CHECK_EQ(aco_rt_pthread_key_delete(ks[n / 2]), 0);
    CHECK_EQ(aco_rt_pthread_key_create(&ks[n / 2], NULL), 0);
    CHECK_EQ(aco_rt_pthread_key_create(&ks[n], NULL), EAGAIN);
    for (int i = 0; i < n; i++) CHECK_EQ(aco_rt_pthread_key_delete(ks[i]), 0);
    CHECK_EQ(aco_rt_pthread_key_create(NULL, NULL), EINVAL);
}

/* Outside cos: the thread's own values, kept apart from its cos'. */
static aco_rt_pthread_key_t kt;
static void kt_co(void* arg) {
    (void)arg;
    CHECK(aco_rt_pthread_getspecific(kt) == NULL);
    CHECK_EQ(aco_rt_pthread_setspecific(kt, (void*)7), 0);
}
static void keys_outside(void) {
    CHECK_EQ(aco_rt_pthread_key_create(&kt, NULL), 0);
    CHECK_EQ(aco_rt_pthread_setspecific(kt, (void*)3), 0);
    aco_rt_sched_t* s = test_sched(NULL);
    test_go(s, kt_co, NULL);
    aco_rt_sched_free(s);
    CHECK(aco_rt_pthread_getspecific(kt) == (void*)3);
    CHECK_EQ(aco_rt_pthread_setspecific(kt, NULL), 0);
    CHECK_EQ(aco_rt_pthread_key_delete(kt), 0);
}

static void body(void) {
    once_body();
    keys_body();
}

/* ---- a pool: once and a key between two threads' cos ----------------- */

static aco_rt_pthread_once_t po = ACO_RT_PTHREAD_ONCE_INIT;
static atomic_int p_runs, p_done, p_dtor;
static aco_rt_pthread_key_t pk;
static void p_init(void) {
    atomic_fetch_add(&p_runs, 1);
    CHECK_EQ(aco_rt_sleep(10 * MS), 0);
    CHECK_EQ(aco_rt_pthread_key_create(&pk, NULL), 0);
    atomic_store(&p_done, 1);
}
static void p_dtor_fn(void* v) {
    CHECK(v != NULL);
    atomic_fetch_add(&p_dtor, 1);
}
static aco_rt_pthread_key_t pk2;
static void pool_co(void* arg) {
    int i = (int)(intptr_t)arg;
    CHECK_EQ(aco_rt_pthread_once(&po, p_init), 0);
    CHECK_EQ(atomic_load(&p_done), 1);
    CHECK_EQ(aco_rt_pthread_setspecific(pk, (void*)(intptr_t)(i + 1)), 0);
    CHECK_EQ(aco_rt_pthread_setspecific(pk2, (void*)(intptr_t)(i + 1)), 0);
    CHECK_EQ(aco_rt_pthread_yield(), 0);
    CHECK(aco_rt_pthread_getspecific(pk) == (void*)(intptr_t)(i + 1));
}
static void pool(void) {
    CHECK_EQ(aco_rt_pthread_key_create(&pk2, p_dtor_fn), 0);
    bb_on_pool(16, pool_co);
    CHECK_EQ(atomic_load(&p_runs), 1);
    CHECK_EQ(atomic_load(&p_dtor), 16);
    CHECK_EQ(aco_rt_pthread_key_delete(pk), 0);
    CHECK_EQ(aco_rt_pthread_key_delete(pk2), 0);
}

int main(void) {
    glibc_answers();
    once_outside();
    keys_limit();
    keys_outside();
    bb_on_backends(body);
    pool();
    printf("test_pthread_bb_once_keys: ok\n");
    return 0;
}
