/* test_sync_bb_cos.c - cos, joins, cancels, the shield, keys, groups and
 * timers from aco_rt.h alone: every listed refusal (-EINVAL, -EPERM,
 * -EDEADLK, -EBUSY, -EAGAIN), a join from another thread's co with
 * deadlines (the handle kept), a join cancelled from a plain thread, a
 * cancel kept by the shield across threads, key destructors' rounds,
 * aco_rt_exit, a group cancelled while empty. */
#include "rt_test.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

/* BB_ASAN: 1 under AddressSanitizer (gcc's and clang's) */
#if defined(__SANITIZE_ADDRESS__)
#define BB_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BB_ASAN 1
#endif
#endif
#ifndef BB_ASAN
#define BB_ASAN 0
#endif

static int64_t in_ms(int ms) { return aco_rt_now() + ms * MS; }
static aco_rt_pool_t* pool;
static aco_rt_sched_t* S(int i) { return aco_rt_pool_sched(pool, (unsigned)i & 1); }
static void drain(void) { CHECK_EQ(aco_rt_pool_wait(pool, ACO_RT_POOL_DRAIN, in_ms(60000)), 0); }

/* ---- joins across threads ---- */
static aco_rt_sem_t j_go, j_ret;
static aco_rt_co_t* j_target;
static _Atomic int j_stage;
static void j_target_fn(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_sem_wait(&j_go, in_ms(20000)), 0);
}
static void j_second(void* arg) {
    (void)arg;
    /* the target has a joiner (the other thread's co): -EINVAL */
    CHECK_EQ(aco_rt_join(j_target, in_ms(20000)), -EINVAL);
    CHECK_EQ(aco_rt_detach(j_target), -EINVAL);
    atomic_store(&j_stage, 2);
}
static void j_joiner(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_join(j_target, 0), -ETIMEDOUT);
    CHECK_EQ(aco_rt_join(j_target, in_ms(5)), -ETIMEDOUT);
    CHECK_EQ(aco_rt_join(aco_rt_self(), -1), -EINVAL);
    CHECK_EQ(aco_rt_join(NULL, -1), -EINVAL);
    atomic_store(&j_stage, 1);
    /* cancelled from a plain thread while it waits: the handle stays */
    CHECK_EQ(aco_rt_join(j_target, in_ms(20000)), -ECANCELED);
    aco_rt_sem_post(&j_ret);
}
static void j_final(void* arg) {
    (void)arg;
    /* the cancelled join has returned: no joiner left */
    CHECK_EQ(aco_rt_sem_wait(&j_ret, in_ms(20000)), 0);
    aco_rt_sem_post(&j_go);
    CHECK_EQ(aco_rt_join(j_target, in_ms(20000)), 0);
}
static void joins(void) {
    aco_rt_sem_init(&j_go, 0);
    aco_rt_sem_init(&j_ret, 0);
    atomic_store(&j_stage, 0);
    j_target = aco_rt_spawn(S(0), j_target_fn, NULL);
    CHECK(j_target);
    aco_rt_co_t* jj = aco_rt_spawn(S(1), j_joiner, NULL);
    CHECK(jj);
    while (atomic_load(&j_stage) < 1) sched_yield();
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(S(0), j_second, NULL)), 0);
    while (atomic_load(&j_stage) < 2) sched_yield();
    CHECK_EQ(aco_rt_cancel(jj), 0);
    CHECK_EQ(aco_rt_detach(jj), 0);
    /* once the cancelled join returned, another co of the other thread joins */
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(S(0), j_final, NULL)), 0);
    drain();
    /* a finished co, not joined: cancel does nothing; a join of it from a
     * co returns 0 with a passed deadline */
    j_target = aco_rt_spawn(S(1), j_target_fn, NULL);
    aco_rt_sem_post(&j_go);
    drain();
    CHECK_EQ(aco_rt_cancel(j_target), 0);
    CHECK_EQ(aco_rt_cancel(NULL), -EINVAL);
    CHECK_EQ(aco_rt_detach(NULL), -EINVAL);
    CHECK_EQ(aco_rt_join(j_target, 0), -EPERM);
    aco_rt_sem_init(&j_go, 1);
    aco_rt_sem_init(&j_ret, 1);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(S(0), j_final, NULL)), 0);   /* joins with the post spare */
    drain();
}

/* ---- the shield, with a cancel from another thread ---- */
static aco_rt_co_t* sh_co;
static _Atomic int sh_stage;
static aco_rt_sem_t sh_sem;
static void sh_fn(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_cancel_shield(1), 0);
    CHECK_EQ(aco_rt_cancel_shield(1), 1);
    CHECK_EQ(aco_rt_cancelled(), 0);
    atomic_store(&sh_stage, 1);
    /* the cancel comes meanwhile: kept, the wait goes on to the post */
    CHECK_EQ(aco_rt_sem_wait(&sh_sem, in_ms(20000)), 0);
    CHECK(aco_rt_cancelled());
    CHECK_EQ(aco_rt_cancel_check(), 0);
    CHECK_EQ(aco_rt_sleep(0), 0);
    CHECK_EQ(aco_rt_yield(), 0);
    aco_rt_sem_post(&sh_sem);
    CHECK_EQ(aco_rt_sem_wait(&sh_sem, -1), 0);
    CHECK_EQ(aco_rt_cancel_shield(0), 1);
    CHECK_EQ(aco_rt_cancel_check(), -ECANCELED);
    CHECK(aco_rt_cancelled());
    aco_rt_sem_post(&sh_sem);
    CHECK_EQ(aco_rt_sem_wait(&sh_sem, -1), -ECANCELED);     /* ready, still fails */
    CHECK_EQ(aco_rt_sem_trywait(&sh_sem), 0);               /* never waits: works */
    CHECK_EQ(aco_rt_yield(), -ECANCELED);
    CHECK_EQ(aco_rt_sleep(1000000), -ECANCELED);
    CHECK_EQ(aco_rt_sleep_until(-1), -ECANCELED);
    /* on again: held off again */
    CHECK_EQ(aco_rt_cancel_shield(1), 0);
    CHECK_EQ(aco_rt_cancel_check(), 0);
    CHECK_EQ(aco_rt_sleep(1000), 0);
    /* ends with it on: nothing left behind */
}
static void shield(void) {
    aco_rt_sem_init(&sh_sem, 0);
    atomic_store(&sh_stage, 0);
    sh_co = aco_rt_spawn(S(1), sh_fn, NULL);
    CHECK(sh_co);
    while (atomic_load(&sh_stage) < 1) sched_yield();
    CHECK_EQ(aco_rt_cancel(sh_co), 0);
    aco_rt_sem_post(&sh_sem);
    CHECK_EQ(aco_rt_detach(sh_co), 0);
    drain();
    CHECK_EQ(aco_rt_cancel_shield(1), -EPERM);
    CHECK_EQ(aco_rt_cancel_check(), -EPERM);
    CHECK_EQ(aco_rt_cancelled(), 0);
    CHECK_EQ(aco_rt_yield(), -EPERM);
    CHECK_EQ(aco_rt_sleep(1), -EPERM);
    CHECK(aco_rt_self() == NULL);
}

/* ---- keys ---- */
static aco_rt_key_t k1, k2;
static _Atomic int d1_calls, d2_calls;
static int d_order[16];
static _Atomic int d_n;
static void dtor1(void* v) {
    CHECK(v != NULL);
    d_order[atomic_fetch_add(&d_n, 1) & 15] = 1;
    int c = atomic_fetch_add(&d1_calls, 1);
    CHECK(aco_rt_getspecific(k1) == NULL);       /* set to NULL before the call */
    /* set again each time: rounds go on, at most ACO_RT_KEY_DTOR_ROUNDS */
    CHECK_EQ(aco_rt_setspecific(k1, (void*)(uintptr_t)(100 + c)), 0);
    /* may block */
    CHECK_EQ(aco_rt_sleep(1000), 0);
}
static void dtor2(void* v) {
    CHECK_EQ((uintptr_t)v, 22);
    d_order[atomic_fetch_add(&d_n, 1) & 15] = 2;
    atomic_fetch_add(&d2_calls, 1);
}
static void key_fn(void* arg) {
    int ex = (int)(intptr_t)arg;
    CHECK(aco_rt_getspecific(k1) == NULL);
    CHECK_EQ(aco_rt_setspecific(k1, (void*)11), 0);
    CHECK_EQ(aco_rt_setspecific(k2, (void*)22), 0);
    CHECK_EQ((uintptr_t)aco_rt_getspecific(k1), 11);
    CHECK_EQ(aco_rt_yield(), 0);
    CHECK_EQ((uintptr_t)aco_rt_getspecific(k2), 22);
    if (ex) aco_rt_exit();
}
static _Atomic int kv_ready;
static void key_other(void* arg) {
    (void)arg;
    CHECK(aco_rt_getspecific(k1) == NULL);
    CHECK(aco_rt_getspecific(k2) == NULL);
}
static void keys(void) {
    CHECK_EQ(aco_rt_key_create(NULL, NULL), -EINVAL);
    CHECK_EQ(aco_rt_key_create(&k1, dtor1), 0);
    CHECK_EQ(aco_rt_key_create(&k2, dtor2), 0);
    for (int ex = 0; ex < 2; ex++) {
        atomic_store(&d1_calls, 0);
        atomic_store(&d2_calls, 0);
        atomic_store(&d_n, 0);
        aco_rt_co_t* c = aco_rt_spawn(S(ex), key_fn, (void*)(intptr_t)ex);
        CHECK(c);
        CHECK_EQ(aco_rt_detach(c), 0);
        drain();
        CHECK_EQ(atomic_load(&d1_calls), ACO_RT_KEY_DTOR_ROUNDS);
        CHECK_EQ(atomic_load(&d2_calls), 1);
        CHECK_EQ(d_order[0], 1);
        CHECK_EQ(d_order[1], 2);
        /* a reused record starts with NULLs */
        CHECK_EQ(aco_rt_detach(aco_rt_spawn(S(ex), key_other, NULL)), 0);
        drain();
    }
    /* outside cos: the thread's own values */
    CHECK(aco_rt_getspecific(k1) == NULL);
    CHECK_EQ(aco_rt_setspecific(k2, (void*)5), 0);
    CHECK_EQ((uintptr_t)aco_rt_getspecific(k2), 5);
    CHECK_EQ(aco_rt_setspecific(k2, NULL), 0);
    CHECK_EQ(aco_rt_key_delete(k1), 0);
    CHECK_EQ(aco_rt_key_delete(k1), -EINVAL);
    CHECK_EQ(aco_rt_setspecific(k1, (void*)1), -EINVAL);
    CHECK(aco_rt_getspecific(k1) == NULL);
    CHECK_EQ(aco_rt_key_delete(k2), 0);
    CHECK_EQ(aco_rt_key_delete(0xFFFFFFFFu), -EINVAL);
    CHECK_EQ(aco_rt_setspecific(0xFFFFFFFFu, (void*)1), -EINVAL);
    CHECK(aco_rt_getspecific(0xFFFFFFFFu) == NULL);
    /* all keys: -EAGAIN past ACO_RT_KEYS_MAX alive */
    static aco_rt_key_t ks[ACO_RT_KEYS_MAX + 1];
    int n = 0, r;
    while ((r = aco_rt_key_create(&ks[n], NULL)) == 0) { n++; CHECK_LE(n, ACO_RT_KEYS_MAX); }
    CHECK_EQ(r, -EAGAIN);
    CHECK_GE(n, ACO_RT_KEYS_MAX - 8);
    for (int i = 0; i < n; i++) CHECK_EQ(aco_rt_key_delete(ks[i]), 0);
    CHECK_EQ(aco_rt_key_create(&ks[0], NULL), 0);
    CHECK_EQ(aco_rt_key_delete(ks[0]), 0);
    (void)kv_ready;
}

/* ---- groups ---- */
static aco_rt_group_t* g;
static aco_rt_sem_t g_sem;
static _Atomic int g_cancelled_seen, g_ran;
static void g_member(void* arg) {
    (void)arg;
    atomic_fetch_add(&g_ran, 1);
    int r = aco_rt_sem_wait(&g_sem, in_ms(20000));
    if (r == -ECANCELED) atomic_fetch_add(&g_cancelled_seen, 1);
    else CHECK_EQ(r, 0);
}
static void g_self_join(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_group_join(g, -1), -EDEADLK);
    CHECK_EQ(aco_rt_group_cancel(g, -1), -EDEADLK);
    CHECK_EQ(aco_rt_group_free(g), -EBUSY);
}
static void g_boss(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_group_join(NULL, -1), -EINVAL);
    CHECK_EQ(aco_rt_group_cancel(NULL, -1), -EINVAL);
    /* empty: cancels nothing, now or later */
    CHECK_EQ(aco_rt_group_cancel(g, in_ms(20000)), 0);
    CHECK_EQ(aco_rt_group_spawn(g, g_member, NULL, NULL), 0);
    CHECK_EQ(aco_rt_group_spawn(g, g_self_join, NULL, NULL), 0);
    CHECK_EQ(aco_rt_group_join(g, 0), -ETIMEDOUT);
    aco_rt_sem_post(&g_sem);
    CHECK_EQ(aco_rt_group_join(g, in_ms(20000)), 0);
    CHECK_EQ(atomic_load(&g_cancelled_seen), 0);
    CHECK_EQ(aco_rt_group_size(g), 0);
    /* now members waiting, cancelled from here (another thread's group) */
    for (int i = 0; i < 4; i++) CHECK_EQ(aco_rt_group_spawn(g, g_member, NULL, NULL), 0);
    CHECK_EQ(aco_rt_group_free(g), -EBUSY);
    CHECK_EQ(aco_rt_group_cancel(g, in_ms(20000)), 0);
    CHECK_EQ(atomic_load(&g_cancelled_seen), 4);
    CHECK_EQ(aco_rt_group_size(g), 0);
    CHECK_EQ(aco_rt_group_free(g), 0);
    CHECK_EQ(aco_rt_group_free(NULL), 0);
}
static void groups(void) {
    g = aco_rt_group_new(S(1));
    CHECK(g);
    CHECK(aco_rt_group_sched(g) == S(1));
    errno = 0;
    CHECK(aco_rt_group_new(NULL) == NULL);
    CHECK_EQ(errno, EPERM);
    errno = 0;
    CHECK(aco_rt_pool_group_new(NULL) == NULL);
    CHECK_EQ(errno, EINVAL);
    CHECK_EQ(aco_rt_group_spawn(g, NULL, NULL, NULL), -EINVAL);
    CHECK_EQ(aco_rt_group_spawn(NULL, g_member, NULL, NULL), -EINVAL);
    aco_rt_sem_init(&g_sem, 0);
    atomic_store(&g_cancelled_seen, 0);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(S(0), g_boss, NULL)), 0);
    drain();
}

/* ---- pool and scheduler refusals ---- */
static void in_pool(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_pool_wait(pool, ACO_RT_POOL_DRAIN, 0), -EDEADLK);
    CHECK_EQ(aco_rt_pool_free(pool), -EDEADLK);
    errno = 0;
    CHECK(aco_rt_sched_new(NULL) == NULL);
    CHECK_EQ(errno, EBUSY);
    CHECK_EQ(aco_rt_sched_run(aco_rt_sched_current()), -EPERM);
    CHECK_EQ(aco_rt_sched_run(S(0) == aco_rt_sched_current() ? S(1) : S(0)), -EPERM);
    aco_rt_sched_free(aco_rt_sched_current());      /* from a co: nothing */
    aco_rt_sched_free(NULL);
    size_t sz = 1;
    CHECK(aco_rt_private(&sz) == NULL);
    CHECK_EQ(sz, 0);
    aco_rt_timer_t t;          /* on the co's stack */
    aco_rt_timer_init(&t);
    int tr = aco_rt_timer_start(&t, in_ms(10000), (void (*)(aco_rt_timer_t*))free);
#if BB_ASAN
    /* detect_stack_use_after_return puts the co's locals on ASan's heap
     * fake stack, off the share stack: then the timer is accepted */
    if (tr == 0) CHECK_EQ(aco_rt_timer_stop(&t), 1);
    else CHECK_EQ(tr, -EINVAL);
#else
    CHECK_EQ(tr, -EINVAL);
#endif
    static aco_rt_timer_t st;
    CHECK_EQ(aco_rt_timer_start(&st, in_ms(10000), (void (*)(aco_rt_timer_t*))free), 0);
    CHECK_EQ(aco_rt_timer_start(&st, in_ms(10000), (void (*)(aco_rt_timer_t*))free), -EINVAL);
    CHECK_EQ(aco_rt_timer_start(NULL, in_ms(10000), (void (*)(aco_rt_timer_t*))free), -EINVAL);
    static aco_rt_timer_t st2;
    CHECK_EQ(aco_rt_timer_start(&st2, in_ms(10000), NULL), -EINVAL);
    CHECK_EQ(aco_rt_timer_stop(&st), 1);
    CHECK_EQ(aco_rt_timer_stop(&st), 0);
    CHECK_EQ(aco_rt_timer_stop(&st2), 0);
}
static void priv_fn(void* arg) {
    (void)arg;
    size_t sz = 0;
    unsigned char* p = aco_rt_private(&sz);
    CHECK(p != NULL);
    CHECK_EQ(sz, 100);
    for (int i = 0; i < 100; i++) CHECK_EQ(p[i], 0);
    memset(p, 0xff, 100);
}
static void refusals(void) {
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(S(0), in_pool, NULL)), 0);
    drain();
    errno = 0;
    CHECK(aco_rt_spawn(S(0), NULL, NULL) == NULL);
    CHECK_EQ(errno, EINVAL);
    errno = 0;
    CHECK(aco_rt_spawn(NULL, in_pool, NULL) == NULL);
    CHECK_EQ(errno, EPERM);
    errno = 0;
    CHECK(aco_rt_pool_spawn(pool, NULL, NULL, NULL) == NULL);
    CHECK_EQ(errno, EINVAL);
    CHECK_EQ(aco_rt_pool_wait(NULL, ACO_RT_POOL_DRAIN, 0), -EINVAL);
    CHECK_EQ(aco_rt_pool_wait(pool, 7, 0), -EINVAL);
    CHECK_EQ(aco_rt_pool_free(NULL), 0);
    CHECK(aco_rt_pool_sched(pool, 2) == NULL);
    CHECK_EQ(aco_rt_pool_threads(pool), 2);
    aco_rt_spawn_opts_t o;
    memset(&o, 0, sizeof(o));
    o.private_size = 100;
    for (int i = 0; i < 3; i++) CHECK_EQ(aco_rt_detach(aco_rt_pool_spawn(pool, priv_fn, NULL, &o)), 0);
    drain();
    CHECK_EQ(aco_rt_sched_stop != NULL, 1);
}

static void body(aco_rt_pool_t* p) {
    pool = p;
    joins();
    shield();
    keys();
    groups();
    refusals();
}

int main(void) {
    test_on_pools(2, body, NULL);
    puts("test_sync_bb_cos: ok");
    return 0;
}
