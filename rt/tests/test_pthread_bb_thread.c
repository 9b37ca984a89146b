/* test_pthread_bb_thread.c - the pthread face's threads (cos) taken at the
 * word of rt/aco_rt_pthread.h, beside glibc's: attributes, create (EPERM
 * without a scheduler), join (EDEADLK, EINVAL, ESRCH, EPERM, ECANCELED),
 * exit values and aco_rt_pthread_exit from deep frames, tryjoin and
 * timedjoin (bad and passed abstimes, a thread that ended), detach, self
 * and equal in and outside cos, yield, a stack of its own; run_main's
 * results; create and join across the cos of a 2-thread pool. */
#include "pthread_bb.h"

/* ---- glibc's answers ------------------------------------------------- */

static struct {
    int join_self, stack_small, detach_bad;
    int timed_bad_ended, timed_passed, try_running;
} g;
static pthread_mutex_t g_mx = PTHREAD_MUTEX_INITIALIZER;
static void* g_block(void* arg) {
    (void)arg;
    pthread_mutex_lock(&g_mx);
    pthread_mutex_unlock(&g_mx);
    return NULL;
}
static void* g_quick(void* arg) { return arg; }
static void glibc_answers(void) {
#if TEST_TSAN
    g.join_self = EDEADLK;      /* TSan's join cannot take it; glibc 2.36 says EDEADLK */
#else
    g.join_self = pthread_join(pthread_self(), NULL);
#endif
    pthread_attr_t a;
    pthread_attr_init(&a);
    g.stack_small = pthread_attr_setstacksize(&a, PTHREAD_STACK_MIN - 1);
    g.detach_bad = pthread_attr_setdetachstate(&a, 5);
    pthread_attr_destroy(&a);

    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, g_quick, (void*)5), 0);
    void* r = NULL;
    struct timespec bad = bb_bad_ns_hi;
    /* the thread ends soon: join it with a bad abstime until it has */
    while ((g.timed_bad_ended = pthread_timedjoin_np(t, &r, &bad)) == EINVAL) sched_yield();
    CHECK(g.timed_bad_ended != 0 || r == (void*)5);

    pthread_mutex_lock(&g_mx);
    CHECK_EQ(pthread_create(&t, NULL, g_block, NULL), 0);
    struct timespec past = bb_abs(CLOCK_REALTIME, -1000);
    g.timed_passed = pthread_timedjoin_np(t, NULL, &past);
    /* (glibc 2.36's timedjoin spins on a bad abstime, or a negative
     * tv_sec, while the thread runs: not asked) */
    g.try_running = pthread_tryjoin_np(t, NULL);
    /* (glibc 2.36 lets a second joiner wait too: not asked) */
    pthread_mutex_unlock(&g_mx);
    CHECK_EQ(pthread_join(t, NULL), 0);
}

/* ---- the co side ----------------------------------------------------- */

static aco_rt_pthread_mutex_t gate;
static void* blocker(void* arg) {
    CHECK_EQ(aco_rt_pthread_mutex_lock(&gate), 0);
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&gate), 0);
    return arg;
}
static void* quick(void* arg) { return arg; }
static void deep(int n, void* v);
static void (*volatile deep_p)(int, void*) = deep;
static __attribute__((noinline)) void deep(int n, void* v) {
    if (n <= 0) aco_rt_pthread_exit(v);
    deep_p(n - 1, v);
    CHECK(0);
}
static void* exiter(void* arg) {
    deep(20, arg);
    return NULL;
}
static int joined_self_rc;
static void* self_joiner(void* arg) {
    (void)arg;
    joined_self_rc = aco_rt_pthread_join(aco_rt_pthread_self(), NULL);
    return NULL;
}
static aco_rt_pthread_t target;
static int joiner_stage;
static void* joiner(void* arg) {
    (void)arg;
    joiner_stage = 1;
    void* r = NULL;
    CHECK_EQ(aco_rt_pthread_join(target, &r), 0);
    CHECK(r == (void*)11);
    joiner_stage = 2;
    return NULL;
}
static int cj_stage;
static void* cancelled_joiner(void* arg) {
    (void)arg;
    cj_stage = 1;
    CHECK_EQ(aco_rt_pthread_join(target, NULL), ECANCELED);    /* waiting */
    CHECK_EQ(aco_rt_pthread_tryjoin_np(target, NULL), ECANCELED);
    struct timespec past = bb_abs(CLOCK_REALTIME, -1000);
    CHECK_EQ(aco_rt_pthread_timedjoin_np(target, NULL, &past), ECANCELED);
    cj_stage = 2;
    return NULL;
}
static void spawned_co(void* arg) { (void)arg; }
static aco_rt_pthread_t in_self;
static void* self_reporter(void* arg) {
    (void)arg;
    in_self = aco_rt_pthread_self();
    return NULL;
}
static int big_rc, big_lock_rc;
static void* big_stack(void* arg) {
    (void)arg;
    aco_rt_pthread_mutex_t m;        /* on a stack of its own: allowed */
    big_rc = aco_rt_pthread_mutex_init(&m, NULL);
    big_lock_rc = aco_rt_pthread_mutex_lock(&m);
    aco_rt_pthread_mutex_unlock(&m);
    aco_rt_pthread_mutex_destroy(&m);
    return NULL;
}

static void attrs(void) {
    aco_rt_pthread_attr_t a;
    CHECK_EQ(aco_rt_pthread_attr_init(&a), 0);
    size_t n = 0;
    CHECK_EQ(aco_rt_pthread_attr_getstacksize(&a, &n), 0);
    CHECK_EQ(n, 256 * 1024);                 /* the scheduler's share stacks (default) */
    CHECK_EQ(aco_rt_pthread_attr_setstacksize(&a, ACO_RT_PTHREAD_STACK_MIN - 1), g.stack_small);
    CHECK_EQ(g.stack_small, EINVAL);
    CHECK_EQ(aco_rt_pthread_attr_setstacksize(&a, ACO_RT_PTHREAD_STACK_MIN), 0);
    CHECK_EQ(aco_rt_pthread_attr_getstacksize(&a, &n), 0);
    CHECK_EQ(n, ACO_RT_PTHREAD_STACK_MIN);
    int st = -1;
    CHECK_EQ(aco_rt_pthread_attr_getdetachstate(&a, &st), 0);
    CHECK_EQ(st, ACO_RT_PTHREAD_CREATE_JOINABLE);
    CHECK_EQ(aco_rt_pthread_attr_setdetachstate(&a, 5), g.detach_bad);
    CHECK_EQ(g.detach_bad, EINVAL);
    CHECK_EQ(aco_rt_pthread_attr_getdetachstate(&a, &st), 0);
    CHECK_EQ(st, ACO_RT_PTHREAD_CREATE_JOINABLE);
    CHECK_EQ(aco_rt_pthread_attr_destroy(&a), 0);
    CHECK_EQ(aco_rt_pthread_attr_init(NULL), EINVAL);
    CHECK_EQ(aco_rt_pthread_attr_getstacksize(&a, NULL), EINVAL);

    /* a small stack size: share stack; a big one: a stack of its own */
    static aco_rt_pthread_attr_t sa;
    CHECK_EQ(aco_rt_pthread_attr_init(&sa), 0);
    CHECK_EQ(aco_rt_pthread_attr_setstacksize(&sa, 1 << 20), 0);
    aco_rt_pthread_t t;
    big_rc = big_lock_rc = -1;
    CHECK_EQ(aco_rt_pthread_create(&t, &sa, big_stack, NULL), 0);
    CHECK_EQ(aco_rt_pthread_join(t, NULL), 0);
    CHECK_EQ(big_rc, 0);
    CHECK_EQ(big_lock_rc, 0);
    if (bb_locals_on_share_stack()) {
        CHECK_EQ(aco_rt_pthread_attr_setstacksize(&sa, 64 * 1024), 0);
        big_rc = -1;
        CHECK_EQ(aco_rt_pthread_create(&t, &sa, big_stack, NULL), 0);
        CHECK_EQ(aco_rt_pthread_join(t, NULL), 0);
        CHECK_EQ(big_rc, EINVAL);
    }
    /* a bad attr: EINVAL */
    aco_rt_pthread_attr_t bad = {0, 9};
    CHECK_EQ(aco_rt_pthread_create(&t, &bad, quick, NULL), EINVAL);
    bad.detachstate_ = ACO_RT_PTHREAD_CREATE_JOINABLE;
    bad.stacksize_ = 100;
    CHECK_EQ(aco_rt_pthread_create(&t, &bad, quick, NULL), EINVAL);
    CHECK_EQ(aco_rt_pthread_create(NULL, NULL, quick, NULL), EINVAL);
    CHECK_EQ(aco_rt_pthread_create(&t, NULL, NULL, NULL), EINVAL);
}

static void joins(void) {
    CHECK_EQ(aco_rt_pthread_mutex_init(&gate, NULL), 0);
    aco_rt_pthread_t t;
    void* r = NULL;
    /* exit values: returned, and pthread_exit from deep frames */
    CHECK_EQ(aco_rt_pthread_create(&t, NULL, quick, (void*)3), 0);
    CHECK_EQ(aco_rt_pthread_join(t, &r), 0);
    CHECK(r == (void*)3);
    CHECK_EQ(aco_rt_pthread_create(&t, NULL, exiter, (void*)4), 0);
    CHECK_EQ(aco_rt_pthread_join(t, &r), 0);
    CHECK(r == (void*)4);
    CHECK_EQ(aco_rt_pthread_create(&t, NULL, quick, (void*)3), 0);
    CHECK_EQ(aco_rt_pthread_join(t, NULL), 0);                  /* ret NULL */

    /* self: EDEADLK, as glibc's */
    CHECK_EQ(aco_rt_pthread_create(&t, NULL, self_joiner, NULL), 0);
    CHECK_EQ(aco_rt_pthread_join(t, NULL), 0);
    CHECK_EQ(joined_self_rc, g.join_self);
    CHECK_EQ(g.join_self, EDEADLK);

    /* tryjoin and timedjoin of a running co, as glibc's */
    CHECK_EQ(aco_rt_pthread_mutex_lock(&gate), 0);
    CHECK_EQ(aco_rt_pthread_create(&t, NULL, blocker, (void*)11), 0);
    CHECK_EQ(aco_rt_pthread_tryjoin_np(t, NULL), g.try_running);
    CHECK_EQ(g.try_running, EBUSY);
    struct timespec bad = bb_bad_ns_hi;
    CHECK_EQ(aco_rt_pthread_timedjoin_np(t, NULL, &bad), EINVAL);
    struct timespec past = bb_abs(CLOCK_REALTIME, -1000);
    CHECK_EQ(aco_rt_pthread_timedjoin_np(t, NULL, &past), g.timed_passed);
    CHECK_EQ(g.timed_passed, ETIMEDOUT);
    struct timespec neg = {-1, 0};
    CHECK_EQ(aco_rt_pthread_timedjoin_np(t, NULL, &neg), ETIMEDOUT);   /* long past */
    int64_t r0 = bb_real_ns();
    struct timespec t100 = bb_abs(CLOCK_REALTIME, 100);
    CHECK_EQ(aco_rt_pthread_timedjoin_np(t, NULL, &t100), ETIMEDOUT);
    CHECK_GE(bb_real_ns() - r0, 100 * MS);
    /* a second joiner: EINVAL (as glibc's) while the first waits; detach too */
    target = t;
    joiner_stage = 0;
    aco_rt_pthread_t j;
    CHECK_EQ(aco_rt_pthread_create(&j, NULL, joiner, NULL), 0);
    while (joiner_stage != 1) CHECK_EQ(aco_rt_pthread_yield(), 0);
    CHECK_EQ(aco_rt_pthread_yield(), 0);
    CHECK_EQ(aco_rt_pthread_join(t, NULL), EINVAL);
    CHECK_EQ(aco_rt_pthread_tryjoin_np(t, NULL), EBUSY);      /* not ended: first */
    CHECK_EQ(aco_rt_pthread_detach(t), EINVAL);
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&gate), 0);
    CHECK_EQ(aco_rt_pthread_join(j, NULL), 0);
    CHECK_EQ(joiner_stage, 2);

    /* a co that has ended: tryjoin 0; timedjoin with a bad abstime 0 */
    CHECK_EQ(aco_rt_pthread_create(&t, NULL, quick, (void*)12), 0);
    CHECK_EQ(aco_rt_pthread_yield(), 0);
    CHECK_EQ(aco_rt_pthread_tryjoin_np(t, &r), 0);
    CHECK(r == (void*)12);
    CHECK_EQ(aco_rt_pthread_create(&t, NULL, quick, (void*)13), 0);
    CHECK_EQ(aco_rt_pthread_yield(), 0);
    CHECK_EQ(aco_rt_pthread_timedjoin_np(t, &r, &bad), g.timed_bad_ended);
    CHECK_EQ(g.timed_bad_ended, 0);
    CHECK(r == (void*)13);
    CHECK_EQ(aco_rt_pthread_create(&t, NULL, quick, (void*)14), 0);
    CHECK_EQ(aco_rt_pthread_yield(), 0);
    past = bb_abs(CLOCK_REALTIME, -1000);
    CHECK_EQ(aco_rt_pthread_timedjoin_np(t, &r, &past), 0);
    CHECK(r == (void*)14);

    /* detach: then join and detach EINVAL while it lives */
    CHECK_EQ(aco_rt_pthread_mutex_lock(&gate), 0);
    CHECK_EQ(aco_rt_pthread_create(&t, NULL, blocker, NULL), 0);
    CHECK_EQ(aco_rt_pthread_detach(t), 0);
    CHECK_EQ(aco_rt_pthread_detach(t), EINVAL);
    CHECK_EQ(aco_rt_pthread_join(t, NULL), EINVAL);
    CHECK_EQ(aco_rt_pthread_tryjoin_np(t, NULL), EINVAL);
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&gate), 0);
    /* created detached */
    static aco_rt_pthread_attr_t da;
    CHECK_EQ(aco_rt_pthread_attr_init(&da), 0);
    CHECK_EQ(aco_rt_pthread_attr_setdetachstate(&da, ACO_RT_PTHREAD_CREATE_DETACHED), 0);
    CHECK_EQ(aco_rt_pthread_mutex_lock(&gate), 0);
    CHECK_EQ(aco_rt_pthread_create(&t, &da, blocker, NULL), 0);
    CHECK_EQ(aco_rt_pthread_join(t, NULL), EINVAL);
    CHECK_EQ(aco_rt_pthread_detach(t), EINVAL);
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&gate), 0);
    CHECK_EQ(aco_rt_pthread_yield(), 0);

    /* a co not made by create: ESRCH */
    aco_rt_co_t* co = aco_rt_spawn(NULL, spawned_co, NULL);
    CHECK(co != NULL);
    CHECK_EQ(aco_rt_pthread_join((aco_rt_pthread_t)co, NULL), ESRCH);
    CHECK_EQ(aco_rt_pthread_tryjoin_np((aco_rt_pthread_t)co, NULL), ESRCH);
    CHECK_EQ(aco_rt_pthread_detach((aco_rt_pthread_t)co), ESRCH);
    CHECK_EQ(aco_rt_join(co, -1), 0);

    /* a cancelled joiner: ECANCELED waiting, and with t ended */
    CHECK_EQ(aco_rt_pthread_mutex_lock(&gate), 0);
    CHECK_EQ(aco_rt_pthread_create(&target, NULL, blocker, (void*)15), 0);
    cj_stage = 0;
    CHECK_EQ(aco_rt_pthread_create(&j, NULL, cancelled_joiner, NULL), 0);
    while (cj_stage != 1) CHECK_EQ(aco_rt_pthread_yield(), 0);
    CHECK_EQ(aco_rt_pthread_yield(), 0);
    CHECK_EQ(aco_rt_cancel((aco_rt_co_t*)j), 0);
    CHECK_EQ(aco_rt_pthread_join(j, NULL), 0);
    CHECK_EQ(cj_stage, 2);
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&gate), 0);
    CHECK_EQ(aco_rt_pthread_join(target, &r), 0);              /* still joinable */
    CHECK(r == (void*)15);
}

static void ids(void) {
    aco_rt_pthread_t me = aco_rt_pthread_self();
    CHECK(me == (aco_rt_pthread_t)aco_rt_self());               /* any co's */
    CHECK(aco_rt_pthread_equal(me, me));
    aco_rt_pthread_t t;
    CHECK_EQ(aco_rt_pthread_create(&t, NULL, self_reporter, NULL), 0);
    CHECK_EQ(aco_rt_pthread_join(t, NULL), 0);
    CHECK(in_self == t);
    CHECK(!aco_rt_pthread_equal(me, t));
    CHECK_EQ(aco_rt_pthread_yield(), 0);
}

/* cancelled, a co's create still works; yield says 0 (sched_yield's shape) */
static void body(void) {
    attrs();
    joins();
    ids();
}

/* ---- outside cos ----------------------------------------------------- */

static atomic_ulong other_self;
static int other_create_rc;
static void* plain(void* arg) {
    (void)arg;
    atomic_store(&other_self, aco_rt_pthread_self());
    aco_rt_pthread_t t;
    other_create_rc = aco_rt_pthread_create(&t, NULL, quick, NULL);    /* no scheduler */
    aco_rt_pthread_attr_t a;
    size_t n = 0;
    CHECK_EQ(aco_rt_pthread_attr_init(&a), 0);
    CHECK_EQ(aco_rt_pthread_attr_getstacksize(&a, &n), 0);
    CHECK_EQ(n, 256 * 1024);
    return NULL;
}
static int made_outside_ran;
static void* made_outside(void* arg) {
    made_outside_ran = 1;
    return arg;
}
static aco_rt_pthread_t outside_made;
static void join_outside_made(void* arg) {
    (void)arg;
    void* r = NULL;
    CHECK_EQ(aco_rt_pthread_join(outside_made, &r), 0);
    CHECK(r == (void*)21);
}
static void outside(void) {
    aco_rt_pthread_t me = aco_rt_pthread_self();
    CHECK(me == aco_rt_pthread_self());
    CHECK(me != 0);
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, plain, NULL), 0);
    CHECK_EQ(pthread_join(th, NULL), 0);
    CHECK_EQ(other_create_rc, EPERM);
    CHECK(atomic_load(&other_self) != me);
    CHECK(!aco_rt_pthread_equal(atomic_load(&other_self), me));
    CHECK_EQ(aco_rt_pthread_yield(), 0);

    /* with a scheduler, outside its cos: create works, join is EPERM */
    aco_rt_opts_t o;
    memset(&o, 0, sizeof(o));
    o.stack_size = 128 * 1024;
    aco_rt_sched_t* s = test_sched(&o);
    aco_rt_pthread_attr_t a;
    size_t n = 0;
    CHECK_EQ(aco_rt_pthread_attr_init(&a), 0);
    CHECK_EQ(aco_rt_pthread_attr_getstacksize(&a, &n), 0);
    CHECK_EQ(n, 128 * 1024);
    made_outside_ran = 0;
    CHECK_EQ(aco_rt_pthread_create(&outside_made, NULL, made_outside, (void*)21), 0);
    CHECK_EQ(aco_rt_pthread_join(outside_made, NULL), EPERM);
    CHECK_EQ(aco_rt_pthread_tryjoin_np(outside_made, NULL), EPERM);
    CHECK_EQ(made_outside_ran, 0);                   /* runs when the scheduler does */
    test_go(s, join_outside_made, NULL);
    CHECK_EQ(made_outside_ran, 1);
    aco_rt_sched_free(s);
}

/* ---- run_main -------------------------------------------------------- */

static int rm_flag;
static aco_rt_pthread_mutex_t rm_gate;
static void* rm_forever(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_pthread_mutex_lock(&rm_gate), 0);       /* held by main: forever */
    rm_flag = 99;
    return NULL;
}
static void* rm_after(void* arg) {
    (void)arg;
    for (int i = 0; i < 5; i++) CHECK_EQ(aco_rt_pthread_yield(), 0);
    CHECK_EQ(aco_rt_sleep(10 * MS), 0);
    rm_flag = 1;
    return NULL;
}
static int main_ret(int argc, char** argv) {
    CHECK_EQ(argc, 2);
    CHECK(strcmp(argv[1], "x") == 0);
    aco_rt_pthread_mutex_t local;                /* main co's own stack */
    CHECK_EQ(aco_rt_pthread_mutex_init(&local, NULL), 0);
    CHECK_EQ(aco_rt_pthread_mutex_lock(&rm_gate), 0);
    aco_rt_pthread_t t;
    CHECK_EQ(aco_rt_pthread_create(&t, NULL, rm_forever, NULL), 0);
    CHECK_EQ(aco_rt_pthread_yield(), 0);
    return 7;                                    /* rm_forever is stopped */
}
static int main_exit(int argc, char** argv) {
    (void)argc;
    (void)argv;
    aco_rt_pthread_t t;
    CHECK_EQ(aco_rt_pthread_create(&t, NULL, rm_after, NULL), 0);
    CHECK_EQ(aco_rt_pthread_detach(t), 0);
    aco_rt_pthread_exit((void*)5);               /* the others run to their end */
}
static int main_deadlock(int argc, char** argv) {
    (void)argc;
    (void)argv;
    CHECK_EQ(aco_rt_pthread_mutex_lock(&rm_gate), 0);
    aco_rt_pthread_t t;
    CHECK_EQ(aco_rt_pthread_create(&t, NULL, rm_forever, NULL), 0);
    CHECK_EQ(aco_rt_pthread_join(t, NULL), 0);    /* never: every co waits */
    return 0;
}
static void rm_child(void* arg) {
    int which = (int)(intptr_t)arg;
    char a0[] = "prog", a1[] = "x";
    char* argv[] = {a0, a1, NULL};
    int r;
    /* stderr to /dev/null: the messages are expected */
    if (which != 1) CHECK(freopen("/dev/null", "w", stderr) != NULL);
    memset(&rm_gate, 0, sizeof(rm_gate));
    switch (which) {
    case 0: r = aco_rt_pthread_run_main(main_ret, 2, argv); CHECK_EQ(rm_flag, 0); break;
    case 1: r = aco_rt_pthread_run_main(main_exit, 2, argv); CHECK_EQ(rm_flag, 1); break;
    case 2: r = aco_rt_pthread_run_main(NULL, 2, argv); break;
    default: r = aco_rt_pthread_run_main(main_deadlock, 2, argv); break;
    }
    CHECK(aco_rt_sched_current() == NULL);       /* made here, freed after */
    fflush(stdout);
    exit(r);
}
/* run_main on a thread that has a scheduler: it uses that one, stops (not
 * destroys) the other cos when main_fn returns, and leaves it; a later run
 * goes on with them.  aco_rt_pthread_exit outside a co aborts. */
static int rm_later_flag;
static void* rm_later(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_sleep(20 * MS), 0);
    rm_later_flag = 1;
    return NULL;
}
static int main_quick(int argc, char** argv) {
    (void)argc;
    (void)argv;
    aco_rt_pthread_t t;
    CHECK_EQ(aco_rt_pthread_create(&t, NULL, rm_later, NULL), 0);
    CHECK_EQ(aco_rt_pthread_detach(t), 0);
    return 9;
}
static void exit_outside(void* arg) {
    (void)arg;
    CHECK(freopen("/dev/null", "w", stderr) != NULL);
    aco_rt_pthread_exit(NULL);
}
static void run_main_existing(void) {
    aco_rt_sched_t* s = test_sched(NULL);
    rm_later_flag = 0;
    CHECK_EQ(aco_rt_pthread_run_main(main_quick, 0, NULL), 9);
    CHECK(aco_rt_sched_current() == s);
    CHECK_EQ(rm_later_flag, 0);
    test_run(s);
    CHECK_EQ(rm_later_flag, 1);
    aco_rt_sched_free(s);
    CHECK_EQ(test_in_child(exit_outside, NULL, NULL), SIGABRT);
}

static void run_main(void) {
    run_main_existing();
    int want[] = {7, 0, 1, 1};
    for (int i = 0; i < 4; i++) {
        int st = -1;
        int sig = test_in_child(rm_child, (void*)(intptr_t)i, &st);
        if (sig != 0 || st != want[i])
            TEST_FAIL_AT(__FILE__, __LINE__, "run_main case %d: signal %d, status %d, want %d",
                         i, sig, st, want[i]);
    }
}

/* ---- a pool: create stays on the creator's thread; joins across ------ */

static aco_rt_pthread_t pool_ids[8];
static atomic_int pool_made;
static aco_rt_sched_t* pool_where[8];
static void* pool_child(void* arg) {
    int i = (int)(intptr_t)arg;
    pool_where[i] = aco_rt_sched_current();
    CHECK_EQ(aco_rt_sleep(5 * MS), 0);
    return (void*)(intptr_t)(i * 10);
}
static void pool_co(void* arg) {
    int i = (int)(intptr_t)arg;
    if (i < 8) {
        /* cos 0-7 create one each, on their own thread */
        CHECK_EQ(aco_rt_pthread_create(&pool_ids[i], NULL, pool_child, arg), 0);
        aco_rt_sched_t* mine = aco_rt_sched_current();
        atomic_fetch_add(&pool_made, 1);
        /* wait for it through a yield loop, then check where it ran */
        while (pool_where[i] == NULL) CHECK_EQ(aco_rt_pthread_yield(), 0);
        CHECK(pool_where[i] == mine);
    } else {
        /* cos 8-15 join the one made by co i-8 (on the other thread when
         * i-8's parity differs: 8+k has parity of k, so use k ^ 1) */
        int k = (i - 8) ^ 1;
        while (atomic_load(&pool_made) != 8) CHECK_EQ(aco_rt_sleep(1 * MS), 0);
        void* r = NULL;
        CHECK_EQ(aco_rt_pthread_join(pool_ids[k], &r), 0);
        CHECK_EQ((intptr_t)r, k * 10);
    }
}
static void pool(void) { bb_on_pool(16, pool_co); }

int main(void) {
    glibc_answers();
    outside();
    run_main();
    bb_on_backends(body);
    pool();
    printf("test_pthread_bb_thread: ok\n");
    return 0;
}
