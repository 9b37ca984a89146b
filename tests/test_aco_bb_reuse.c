/*
 * test_aco_bb_reuse.c - black-box: reset, destroy and main cos over a co's
 * life, from aco.h alone.
 *
 *   - aco_reset / aco_destroy from a sibling co (aco.h: "its main co or
 *     another co of it"; "a non-main co that is not running"): of a co
 *     evicted from the sibling's own stack, and of the owner of another
 *     stack, which then saves nothing of it when a third co takes it.
 *   - aco_reset of a co suspended in aco_yield_to; aco_reset2 changes fp
 *     and arg; the statistics survive resets.
 *   - A main co's cos outlive it: the cos of the last 8 main cos the thread
 *     destroyed can be destroyed afterwards; a replacing main co works.
 */
#include "aco_test.h"

static aco_t* main_co;
static aco_t *A, *B, *C;
static aco_share_stack_t *s1, *s2;

struct st {
    int starts;
    int resumes;
    int bad;
};
static struct st sa, sb, sc;

static void co_generic(void) {
    struct st* t = aco_get_arg();
    t->starts++;
    volatile unsigned char f[aco_test_vla(2000)];
    uint32_t seed = (uint32_t)t->starts * 31u + (uint32_t)(uintptr_t)t;
    aco_test_fill(f, sizeof(f), seed);
    for (;;) {
        aco_yield();
        t->resumes++;
        if (!aco_test_intact(f, sizeof(f), seed)) t->bad++;
    }
}

/* B's body: reset A, destroy C. */
static int b_step;
static void co_b(void) {
    aco_reset(A);                    /* A: evicted from B's stack, or owner of s2 */
    b_step = 1;
    aco_yield();
    aco_destroy(C);                  /* suspended owner of s2, or evicted */
    C = NULL;
    b_step = 2;
    aco_yield();
    aco_exit();
}

static void sibling(int a_on_s2) {
    memset(&sa, 0, sizeof(sa));
    memset(&sc, 0, sizeof(sc));
    b_step = 0;
    A = aco_create(main_co, a_on_s2 ? s2 : s1, 0, co_generic, &sa);
    B = aco_create(main_co, s1, 0, co_b, NULL);
    aco_resume(A);
    aco_resume(A);
    ASSERT_EQ(sa.starts, 1);
    ASSERT_EQ(sa.resumes, 1);
    size_t a_saves = A->save_stack.ct_save;
    aco_resume(B);                   /* resets A */
    ASSERT_EQ(b_step, 1);
    if (a_on_s2) {
        /* A owned s2; now a new co there saves nothing of A */
        C = aco_create(main_co, s2, 0, co_generic, &sc);
        aco_resume(C);
        ASSERT_EQ(A->save_stack.ct_save, a_saves);
        ASSERT_EQ(C->save_stack.ct_restore, 0);
    } else {
        C = aco_create(main_co, s2, 0, co_generic, &sc);
        aco_resume(C);               /* C owns s2 */
    }
    aco_resume(A);                   /* from the top */
    ASSERT_EQ(sa.starts, 2);
    ASSERT_EQ(sa.resumes, 1);
    aco_resume(A);
    ASSERT_EQ(sa.resumes, 2);
    ASSERT_EQ(sa.bad, 0);
    /* the reset kept the statistics */
    CHECK(A->save_stack.ct_save >= a_saves);
    if (a_on_s2) {
        aco_resume(C);               /* A evicted by C, C restored */
        ASSERT_EQ(sc.resumes, 1);
    }
    aco_resume(B);                   /* destroys C */
    ASSERT_EQ(b_step, 2);
    CHECK(C == NULL);
    /* s2's next co: nothing of C is saved, nothing restored */
    struct st sd = {0, 0, 0};
    aco_t* D = aco_create(main_co, s2, 0, co_generic, &sd);
    aco_resume(D);
    aco_resume(D);
    ASSERT_EQ(sd.resumes, 1);
    aco_resume(A);
    aco_resume(D);
    ASSERT_EQ(sa.bad + sd.bad + sc.bad, 0);
    aco_resume(B);
    CHECK(B->is_end);
    aco_destroy(A);
    aco_destroy(B);
    aco_destroy(D);
}

/* aco_reset of a co suspended in aco_yield_to; aco_reset2. */
static aco_t *H, *T;
static int h_after;
static void co_h(void) {
    aco_yield_to(T);
    h_after++;                       /* never: H is reset first */
    aco_exit();
}
static int t_runs;
static void co_t(void) {
    t_runs++;
    aco_yield();
    aco_exit();
}
static int other_ran;
static void co_other(void) {
    other_ran = (int)(intptr_t)aco_get_arg();
    aco_exit();
}

static void reset_handoff(void) {
    H = aco_create(main_co, s1, 0, co_h, NULL);
    T = aco_create(main_co, s1, 0, co_t, NULL);
    ASSERT_PTR_EQ(aco_resume_last(H), T);
    ASSERT_EQ(t_runs, 1);
    aco_reset2(H, co_other, (void*)7);
    CHECK(H->fp == co_other && H->arg == (void*)7);
    aco_resume(H);
    CHECK(H->is_end);
    ASSERT_EQ(other_ran, 7);
    ASSERT_EQ(h_after, 0);
    aco_resume(T);
    CHECK(T->is_end);
    /* reset2 of an ended co back to the first function */
    aco_reset2(H, co_h, NULL);
    aco_reset(T);
    ASSERT_PTR_EQ(aco_resume_last(H), T);
    ASSERT_EQ(t_runs, 2);
    aco_destroy(H);                  /* suspended in its hand-off: fine */
    aco_destroy(T);
}

/* The cos of the last 8 destroyed main cos. */
static void co_yield_forever(void) {
    for (;;) aco_yield();
}
static void old_mains(void) {
    aco_destroy(main_co);
    aco_t* orphans[8];
    for (int i = 0; i < 8; i++) {
        aco_t* m = aco_create(NULL, NULL, 0, NULL, NULL);
        orphans[i] = aco_create(m, s1, 0, co_yield_forever, NULL);
        aco_resume(orphans[i]);
        aco_destroy(m);
    }
    main_co = aco_create(NULL, NULL, 0, NULL, NULL);
    for (int i = 0; i < 8; i++) aco_destroy(orphans[i]);
    /* the new main co works */
    aco_t* co = aco_create(main_co, s1, 0, co_yield_forever, NULL);
    aco_resume(co);
    aco_resume(co);
    aco_destroy(co);
}

int main(void) {
    aco_thread_init(NULL);
    main_co = aco_create(NULL, NULL, 0, NULL, NULL);
    s1 = aco_share_stack_new(0);
    s2 = aco_share_stack_new(0);
    (void)sb;
    sibling(0);
    sibling(1);
    reset_handoff();
    old_mains();
    aco_share_stack_destroy(s1);
    aco_share_stack_destroy(s2);
    aco_destroy(main_co);
    printf("ok\n");
    return 0;
}
