/*
 * test_resume_protocol.c - aco_resume(co) runs co until its next aco_yield()
 * or aco_exit(), exactly one step per call; the running co, its argument and
 * the fields aco_create() set are what the program gave; aco_exit() and
 * aco_destroy() of the co that holds a share stack leave the stack without an
 * owner; and a co alone on its share stack never copies a byte.
 *
 * The rules checked (aco.h, aco.c):
 *   - aco_get_co()/aco_get_arg() name the running co; the fields a program
 *     may read (main_co, arg, fp, share_stack, is_end) say what aco_create()
 *     was given, for the main co too; back in main, the main co is current.
 *   - A generator co on its own stack: one value per resume, is_end only
 *     after its aco_exit(), no code after aco_exit() ever runs, the stack's
 *     owner is the co from its first resume until its exit, then nobody.
 *   - Destroying a suspended co, owner or evicted, keeps the share stack
 *     consistent: the next co saves nobody, or the owner keeps the stack;
 *     then the stack serves a new co and can be destroyed.
 *   - Cos alone on their share stacks (a standalone generator, two workers
 *     on two stacks) are never saved or restored, however deep they yield.
 * (The exact copy counts of cos sharing a stack are test_copy_counts'.)
 */
#include "aco_test.h"

static aco_t* main_co;

/* ------------------------------------------------------------------------ */
/* Identity and fields; a generator on a standalone stack never copies.     */
/* ------------------------------------------------------------------------ */

struct gen {
    aco_t* self;          /* set by main after aco_create */
    long limit;           /* values to produce before exiting */
    long produced;
    uint64_t value;
    int wrong_identity;   /* counts failed identity checks inside the co */
    int after_exit;       /* set if code after aco_exit() ever ran */
};

static void co_fibonacci(void) {
    struct gen* g = aco_get_arg();
    /* A local array keeps the frame non-trivial: still nothing is copied
     * because no other co ever takes this stack. */
    volatile unsigned char scratch[2048];
    aco_test_fill(scratch, sizeof(scratch), 7);
    uint64_t a = 0, b = 1;
    for (long i = 0; i < g->limit; i++) {
        if (aco_get_co() != g->self || aco_get_arg() != g ||
            aco_is_main_co(aco_get_co()) || aco_get_co()->is_end ||
            aco_get_co()->main_co != main_co)
            g->wrong_identity++;
        g->value = a;
        g->produced++;
        aco_yield();
        uint64_t t = a + b;
        a = b;
        b = t;
    }
    CHECK(aco_test_intact(scratch, sizeof(scratch), 7));
    aco_exit();
    g->after_exit = 1;
}

static void test_standalone_generator(void) {
    aco_share_stack_t* sstk = aco_share_stack_new(64 * 1024);
    struct gen g = {0};
    g.limit = aco_test_scale(20000, 100);
    aco_t* co = aco_create(main_co, sstk, 0, co_fibonacci, &g);
    g.self = co;

    CHECK(co != NULL);
    CHECK(!aco_is_main_co(co));
    ASSERT_PTR_EQ(co->main_co, main_co);
    ASSERT_PTR_EQ(co->share_stack, sstk);
    ASSERT_PTR_EQ(co->arg, &g);
    CHECK(co->fp == co_fibonacci);
    ASSERT_EQ(co->is_end, 0);
    ASSERT_EQ(g.produced, 0);            /* "init": fp not called yet */
    ASSERT_PTR_EQ(sstk->owner, NULL);

    uint64_t a = 0, b = 1;
    for (long i = 0; i < g.limit; i++) {
        aco_resume(co);
        ASSERT_EQ(g.produced, i + 1);     /* exactly one step per resume */
        CHECK(g.value == a);
        ASSERT_EQ(co->is_end, 0);
        ASSERT_PTR_EQ(aco_get_co(), main_co);
        ASSERT_PTR_EQ(sstk->owner, co);
        uint64_t t = a + b;
        a = b;
        b = t;
    }
    aco_resume(co);                       /* runs to aco_exit() */
    ASSERT_EQ(co->is_end, 1);
    ASSERT_EQ(g.produced, g.limit);
    ASSERT_EQ(g.wrong_identity, 0);
    ASSERT_EQ(g.after_exit, 0);
    ASSERT_PTR_EQ(sstk->owner, NULL);
    ASSERT_PTR_EQ(aco_get_co(), main_co);

    /* Standalone: g.limit + 1 resumes, not one copy. */
    EXPECT_COUNTS(co, 0, 0);
    ASSERT_EQ(co->save_stack.max_cpsz, 0);
    printf("standalone: %ld resumes, ct_save %zu, ct_restore %zu, max_cpsz %zu\n",
           g.limit + 1, co->save_stack.ct_save, co->save_stack.ct_restore,
           co->save_stack.max_cpsz);

    aco_destroy(co);
    aco_share_stack_destroy(sstk);
}

/* ------------------------------------------------------------------------ */
/* Destroying suspended cos, then reusing their stack.                      */
/* ------------------------------------------------------------------------ */

static void test_destroy_suspended(void) {
    aco_share_stack_t* sstk = aco_share_stack_new(64 * 1024);
    struct aco_test_worker we, wc, wd;

    /* E runs and is evicted by C; C is the owner when it is destroyed. */
    aco_t* e = aco_test_worker_new(main_co, sstk, 0, &we, 31, 900, 2);
    aco_t* c = aco_test_worker_new(main_co, sstk, 0, &wc, 32, 2000, 5);
    aco_resume(e);
    aco_resume(c);
    ASSERT_PTR_EQ(sstk->owner, c);
    EXPECT_COUNTS(e, 1, 0);
    aco_destroy(c);                       /* suspended, not ended */
    ASSERT_PTR_EQ(sstk->owner, NULL);

    /* E comes back: nobody to save (C is gone), E is restored intact. */
    aco_resume(e);
    EXPECT_COUNTS(e, 1, 1);
    ASSERT_EQ(we.rounds_done, 1);
    ASSERT_EQ(we.bad, 0);

    /* D is new on the stack E still occupies: E is saved, D starts clean. */
    aco_t* d = aco_test_worker_new(main_co, sstk, 0, &wd, 33, 1200, 1);
    aco_resume(d);
    EXPECT_COUNTS(e, 2, 1);
    EXPECT_COUNTS(d, 0, 0);

    /* Destroy E while evicted (not the owner): D keeps the stack. */
    aco_destroy(e);
    ASSERT_PTR_EQ(sstk->owner, d);
    aco_resume(d);
    ASSERT_EQ(d->is_end, 1);
    EXPECT_COUNTS(d, 0, 0);
    ASSERT_EQ(wd.bad, 0);
    aco_destroy(d);

    /* The stack is reusable after all that; F starts with nothing to save. */
    struct aco_test_worker wf;
    aco_t* f = aco_test_worker_new(main_co, sstk, 0, &wf, 34, 100, 1);
    aco_resume(f);
    aco_resume(f);
    ASSERT_EQ(f->is_end, 1);
    EXPECT_COUNTS(f, 0, 0);
    ASSERT_EQ(wf.bad, 0);
    aco_destroy(f);
    /* Succeeds only if every co on it was accounted for. */
    aco_share_stack_destroy(sstk);
}

/* ------------------------------------------------------------------------ */
/* Cos on different stacks do not disturb each other.                       */
/* ------------------------------------------------------------------------ */

static void test_separate_stacks(void) {
    aco_share_stack_t* s1 = aco_share_stack_new2(16 * 1024, 0);
    aco_share_stack_t* s2 = aco_share_stack_new2(16 * 1024, 1);
    struct aco_test_worker w1, w2;
    aco_t* c1 = aco_test_worker_new(main_co, s1, 0, &w1, 41, 3000, 50);
    aco_t* c2 = aco_test_worker_new(main_co, s2, 0, &w2, 42, 3000, 50);
    while (!c1->is_end || !c2->is_end) {
        w1.depth = w1.rounds_done % 7;
        w2.depth = w2.rounds_done % 5;
        if (!c1->is_end) aco_resume(c1);
        if (!c2->is_end) aco_resume(c2);
    }
    EXPECT_COUNTS(c1, 0, 0);
    EXPECT_COUNTS(c2, 0, 0);
    ASSERT_EQ(w1.bad + w2.bad, 0);
    ASSERT_EQ(w1.rounds_done, 50);
    ASSERT_EQ(w2.rounds_done, 50);
    aco_destroy(c1);
    aco_destroy(c2);
    aco_share_stack_destroy(s1);
    aco_share_stack_destroy(s2);
}

int main(void) {
    static int main_arg;
    aco_thread_init(NULL);
    main_co = aco_create(NULL, NULL, 0, NULL, &main_arg);
    CHECK(main_co != NULL);
    CHECK(aco_is_main_co(main_co));
    ASSERT_PTR_EQ(main_co->main_co, NULL);
    ASSERT_PTR_EQ(main_co->share_stack, NULL);
    ASSERT_PTR_EQ(main_co->arg, &main_arg);
    CHECK(main_co->fp == NULL);
    ASSERT_EQ(main_co->is_end, 0);

    test_standalone_generator();
    test_destroy_suspended();
    test_separate_stacks();

    /* Between runs the thread's current co is its main co again. */
    ASSERT_PTR_EQ(aco_get_co(), main_co);
    ASSERT_PTR_EQ(aco_get_arg(), &main_arg);
    aco_destroy(main_co);
    printf("test_resume_protocol: OK\n");
    return 0;
}
