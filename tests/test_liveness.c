/*
 * test_liveness.c - libaco knows which cos are alive: a destroyed co, or an
 * object that never was a co, passed to aco_destroy / aco_resume /
 * aco_reset / aco_reset2 makes it abort with a message naming the function
 * (and "destroyed" for a destroyed co), never crash or corrupt memory;
 * aco_is_main_co(NULL), and aco_yield1 / aco_exit1 on a co that is not the
 * running one, abort too.  Live cos are always distinct objects, however
 * many were destroyed and created before them.
 *
 * Each misuse runs in a forked child that must die by SIGABRT with the
 * expected words on stderr (aco_test.h).
 */
#include "aco_test.h"

#include <sys/resource.h>

static aco_t* main_co;
static aco_share_stack_t* sstk;

static void co_yield_then_exit(void) {
    aco_yield();
    aco_exit();
}

static void co_exit_now(void) {
    aco_exit();
}

/* ---- destroyed cos ----------------------------------------------------- */
static void destroy_twice(void* arg) {
    (void)arg;
    aco_t* co = aco_create(main_co, sstk, 0, co_exit_now, NULL);
    aco_resume(co);
    aco_destroy(co);
    aco_destroy(co);
}

static void destroy_twice_suspended(void* arg) {
    (void)arg;
    aco_t* co = aco_create(main_co, sstk, 0, co_yield_then_exit, NULL);
    aco_resume(co);
    aco_destroy(co);
    aco_destroy(co);
}

static void resume_destroyed(void* arg) {
    (void)arg;
    aco_t* co = aco_create(main_co, sstk, 0, co_yield_then_exit, NULL);
    aco_resume(co);                 /* suspended */
    aco_destroy(co);
    aco_resume(co);
}

static void resume_destroyed_init(void* arg) {
    (void)arg;
    aco_t* co = aco_create(main_co, sstk, 0, co_yield_then_exit, NULL);
    aco_destroy(co);
    aco_resume(co);
}

static void reset_destroyed(void* arg) {
    (void)arg;
    aco_t* co = aco_create(main_co, sstk, 0, co_exit_now, NULL);
    aco_resume(co);
    aco_destroy(co);
    aco_reset(co);
}

static void reset2_destroyed(void* arg) {
    (void)arg;
    aco_t* co = aco_create(main_co, sstk, 0, co_yield_then_exit, NULL);
    aco_resume(co);
    aco_destroy(co);
    aco_reset2(co, co_exit_now, NULL);
}

static void destroy_main_twice(void* arg) {
    (void)arg;
    aco_destroy(main_co);
    aco_destroy(main_co);
}

/* ---- objects that never were cos --------------------------------------- */
enum { OP_RESUME, OP_DESTROY, OP_RESET };
struct foreign {
    int kind;           /* 0: zeros, 1: 0xa5 pattern, 2: a share stack */
    int op;
};

static void use_foreign(void* arg) {
    const struct foreign* f = arg;
    aco_t* co;
    if (f->kind == 2) {
        co = (aco_t*)(void*)aco_share_stack_new(0);
    } else {
        co = malloc(sizeof(aco_t));
        CHECK(co != NULL);
        memset(co, f->kind == 0 ? 0 : 0xa5, sizeof(aco_t));
    }
    if (f->op == OP_RESUME) aco_resume(co);
    else if (f->op == OP_DESTROY) aco_destroy(co);
    else aco_reset(co);
}

/* ---- aco_is_main_co(NULL) ---------------------------------------------- */
static void is_main_null(void* arg) {
    (void)arg;
    aco_t* volatile p = NULL;
    volatile int r = aco_is_main_co(p);
    (void)r;
}

/* ---- aco_yield1 / aco_exit1 on a co that is not running ---------------- */
static aco_t* other_co;

static void co_yield1_other(void) {
    aco_yield1(other_co);
    aco_exit();
}

static void co_exit1_other(void) {
    aco_exit1(other_co);
    aco_exit();
}

static void yield1_other(void* arg) {
    (void)arg;
    other_co = aco_create(main_co, sstk, 0, co_yield_then_exit, NULL);
    aco_resume(other_co);           /* suspended, not running */
    aco_t* co = aco_create(main_co, sstk, 0, co_yield1_other, NULL);
    aco_resume(co);
}

static void exit1_other(void* arg) {
    (void)arg;
    other_co = aco_create(main_co, sstk, 0, co_yield_then_exit, NULL);
    aco_resume(other_co);
    aco_t* co = aco_create(main_co, sstk, 0, co_exit1_other, NULL);
    aco_resume(co);
}

static void yield1_from_main(void* arg) {
    (void)arg;
    aco_t* co = aco_create(main_co, sstk, 0, co_yield_then_exit, NULL);
    aco_resume(co);
    aco_yield1(co);                 /* co is suspended; main is running */
}

static void exit1_from_main(void* arg) {
    (void)arg;
    aco_t* co = aco_create(main_co, sstk, 0, co_yield_then_exit, NULL);
    aco_resume(co);
    aco_exit1(co);
}

/* ---- live cos are distinct --------------------------------------------- */
#define NLIVE 96

static void check_distinct(aco_t** live, int n) {
    for (int i = 0; i < n; i++) {
        CHECK(live[i] != main_co);
        CHECK((void*)live[i] != (void*)sstk);
        for (int j = i + 1; j < n; j++) CHECK(live[i] != live[j]);
    }
}

static void test_distinct(void) {
    aco_t* live[NLIVE];
    int n = 0;
    uint32_t seed = 0x2545f491u;
    long rounds = aco_test_scale(200, 20);
    for (; n < NLIVE / 2; n++)
        live[n] = aco_create(main_co, sstk, 0, co_yield_then_exit, NULL);
    check_distinct(live, n);
    for (long r = 0; r < rounds; r++) {
        /* destroy a random part (some run first), then refill */
        int kill = (int)(aco_test_rand(&seed) % (uint32_t)n) + 1;
        for (int k = 0; k < kill && n > 0; k++) {
            int i = (int)(aco_test_rand(&seed) % (uint32_t)n);
            uint32_t how = aco_test_rand(&seed) % 3;
            if (how >= 1) aco_resume(live[i]);          /* suspended */
            if (how == 2) aco_resume(live[i]);          /* ended */
            aco_destroy(live[i]);
            live[i] = live[--n];
        }
        int add = (int)(aco_test_rand(&seed) % (uint32_t)(NLIVE - n)) + 1;
        for (int k = 0; k < add && n < NLIVE; k++)
            live[n++] = aco_create(main_co, sstk, 0, co_yield_then_exit, NULL);
        check_distinct(live, n);
    }
    /* they all still work */
    for (int i = 0; i < n; i++) {
        aco_resume(live[i]);
        aco_resume(live[i]);
        ASSERT_EQ(live[i]->is_end, 1);
        aco_destroy(live[i]);
    }
}

/* ------------------------------------------------------------------------ */
struct child {
    void (*fn)(void*);
    void* arg;
};

static void child_main(void* arg) {
    const struct child* c = arg;
    struct rlimit rl = {0, 0};
    setrlimit(RLIMIT_CORE, &rl);
    c->fn(c->arg);
}

static int fails, ran;

static void expect_abort(const char* what, void (*fn)(void*), void* arg,
                         const char* needle) {
    struct child c = {fn, arg};
    ran++;
    fails += aco_test_expect_signal(what, child_main, &c, SIGABRT, needle);
}

int main(void) {
    aco_thread_init(NULL);
    main_co = aco_create(NULL, NULL, 0, NULL, NULL);
    sstk = aco_share_stack_new(64 * 1024);

    expect_abort("destroy twice (ended co)", destroy_twice, NULL,
                 "aco_destroy|destroyed");
    expect_abort("destroy twice (suspended co)", destroy_twice_suspended, NULL,
                 "aco_destroy|destroyed");
    expect_abort("resume after destroy (suspended co)", resume_destroyed, NULL,
                 "aco_resume|destroyed");
    expect_abort("resume after destroy (init co)", resume_destroyed_init, NULL,
                 "aco_resume|destroyed");
    expect_abort("reset after destroy", reset_destroyed, NULL,
                 "aco_reset|destroyed");
    expect_abort("reset2 after destroy", reset2_destroyed, NULL,
                 "aco_reset2|destroyed");
    expect_abort("destroy of the main co twice", destroy_main_twice, NULL,
                 "aco_destroy");

    static const char* const kinds[] = {"zero-filled buffer", "0xa5-filled buffer",
                                        "share stack"};
    static const char* const ops[] = {"aco_resume", "aco_destroy", "aco_reset"};
    static struct foreign fo[3][3];
    for (int k = 0; k < 3; k++) {
        for (int o = 0; o < 3; o++) {
            char what[96];
            snprintf(what, sizeof(what), "%s of a %s", ops[o], kinds[k]);
            fo[k][o].kind = k;
            fo[k][o].op = o;
            expect_abort(what, use_foreign, &fo[k][o], ops[o]);
        }
    }

    expect_abort("aco_is_main_co(NULL)", is_main_null, NULL, "aco_is_main_co");
    expect_abort("aco_yield1 of another co, in a co", yield1_other, NULL,
                 "aco_yield");
    expect_abort("aco_exit1 of another co, in a co", exit1_other, NULL,
                 "aco_exit");
    expect_abort("aco_yield1 of a suspended co, in the main co",
                 yield1_from_main, NULL, "aco_yield");
    expect_abort("aco_exit1 of a suspended co, in the main co",
                 exit1_from_main, NULL, "aco_exit");
    ASSERT_EQ(fails, 0);

    test_distinct();

    /* nothing above touched this process's objects */
    aco_t* co = aco_create(main_co, sstk, 0, co_yield_then_exit, NULL);
    aco_resume(co);
    aco_resume(co);
    ASSERT_EQ(co->is_end, 1);
    aco_destroy(co);
    aco_share_stack_destroy(sstk);
    aco_destroy(main_co);
    printf("test_liveness: OK (%d misuses aborted with their message)\n", ran);
    return 0;
}
