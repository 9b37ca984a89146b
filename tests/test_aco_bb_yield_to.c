/*
 * test_aco_bb_yield_to.c - black-box: aco_yield_to and aco_resume_last, from
 * aco.h and docs/core.md ("Direct hand-off") alone.
 *
 *   - aco_yield_to(co) suspends the caller and runs co at once (started, or
 *     continued after its aco_yield or aco_yield_to); co's aco_yield or
 *     aco_exit goes back to the main co, whose aco_resume returns then, and
 *     aco_resume_last says which co came back.  Chains of hand-offs.
 *   - The share-stack rules are aco_resume's: frames of every co survive,
 *     on one stack (through the hand-off co) and on separate ones, and the
 *     copies are counted as aco_resume's would be.
 *   - aco_resume_reserve from the co about to hand off: 0.
 *   - A scheduler that mixes resumes, hand-offs and exits at random keeps
 *     the strict order a model predicts.
 */
#include "aco_test.h"

static aco_t* main_co;

#define MAXT 4096
static int trace[MAXT];
static int ntrace;
static void note(int v) {
    CHECK(ntrace < MAXT);
    trace[ntrace++] = v;
}

/* ------------------------------------------------------------------------ */
/* 1. A chain: A -> B -> C, C yields; then each is resumed and continues.   */
/* ------------------------------------------------------------------------ */

static aco_t *A, *B, *C;

static void co_a(void) {
    volatile unsigned char f[aco_test_vla(3000)];
    aco_test_fill(f, sizeof(f), 1);
    note(1);
    aco_yield_to(B);
    note(5);
    CHECK(aco_get_co() == A);
    CHECK(aco_test_intact(f, sizeof(f), 1));
    aco_exit();
}

static void co_b(void) {
    volatile unsigned char f[aco_test_vla(5000)];
    aco_test_fill(f, sizeof(f), 2);
    note(2);
    ASSERT_EQ(aco_resume_reserve(C), 0);
    aco_yield_to(C);
    note(7);
    CHECK(aco_get_co() == B);
    CHECK(aco_test_intact(f, sizeof(f), 2));
    aco_yield();
    note(9);
    aco_exit();
}

static void co_c(void) {
    volatile unsigned char f[aco_test_vla(700)];
    aco_test_fill(f, sizeof(f), 3);
    note(3);
    aco_yield();
    note(6);
    CHECK(aco_test_intact(f, sizeof(f), 3));
    aco_yield_to(B);                 /* B continues after its aco_yield_to */
    note(99);                        /* never: C is resumed no more */
    aco_exit();
}

static void chain(int same_stack) {
    aco_share_stack_t* s1 = aco_share_stack_new(0);
    aco_share_stack_t* s2 = same_stack ? s1 : aco_share_stack_new(0);
    aco_share_stack_t* s3 = same_stack ? s1 : aco_share_stack_new(0);
    ntrace = 0;
    A = aco_create(main_co, s1, 0, co_a, NULL);
    B = aco_create(main_co, s2, 0, co_b, NULL);
    C = aco_create(main_co, s3, 0, co_c, NULL);
    aco_t* last = aco_resume_last(A);
    ASSERT_PTR_EQ(last, C);
    note(4);
    last = aco_resume_last(A);          /* A exits */
    ASSERT_PTR_EQ(last, A);
    CHECK(A->is_end);
    last = aco_resume_last(C);          /* C hands to B, B yields */
    ASSERT_PTR_EQ(last, B);
    note(8);
    last = aco_resume_last(B);
    ASSERT_PTR_EQ(last, B);
    CHECK(B->is_end);
    CHECK(!C->is_end);
    static const int want[] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    ASSERT_EQ(ntrace, 9);
    for (int i = 0; i < 9; i++) ASSERT_EQ(trace[i], want[i]);
    if (same_stack) {
        /* every hand-off and resume changed hands: saves and restores as
         * aco_resume's.  A: saved at its hand-off, restored once. */
        EXPECT_COUNTS(A, 1, 1);
        /* B: saved at its hand-off to C, restored when C handed back; saved
         * when main resumed ... nobody else after its yield: only then. */
        CHECK(B->save_stack.ct_save >= 1 && B->save_stack.ct_restore >= 1);
        ASSERT_EQ(B->save_stack.ct_save, B->save_stack.ct_restore);
    } else {
        EXPECT_COUNTS(A, 0, 0);
        EXPECT_COUNTS(B, 0, 0);
        EXPECT_COUNTS(C, 0, 0);
    }
    aco_destroy(A);
    aco_destroy(B);
    aco_destroy(C);
    aco_share_stack_destroy(s1);
    if (!same_stack) {
        aco_share_stack_destroy(s2);
        aco_share_stack_destroy(s3);
    }
}

/* ------------------------------------------------------------------------ */
/* 2. Ping-pong on one stack, big frames; counts as resumes would make.     */
/* ------------------------------------------------------------------------ */

static aco_t* pp[2];
static int ball;
static int pp_rounds;

static void player(void) {
    int me = (int)(intptr_t)aco_get_arg();
    volatile unsigned char f[aco_test_vla(4000 + 1000 * (size_t)me)];
    aco_test_fill(f, sizeof(f), 10u + (uint32_t)me);
    while (ball < pp_rounds) {
        CHECK(ball % 2 == me);
        ball++;
        aco_yield_to(pp[!me]);
        CHECK(aco_test_intact(f, sizeof(f), 10u + (uint32_t)me));
    }
    aco_exit();
}

static void ping_pong(void) {
    aco_share_stack_t* s = aco_share_stack_new(0);
    pp_rounds = (int)aco_test_scale(1000, 20);
    ball = 0;
    for (intptr_t i = 0; i < 2; i++) pp[i] = aco_create(main_co, s, 0, player, (void*)i);
    aco_t* last = aco_resume_last(pp[0]);
    CHECK(last->is_end);
    ASSERT_EQ(ball, pp_rounds);
    aco_t* other = last == pp[0] ? pp[1] : pp[0];
    CHECK(!other->is_end);
    aco_resume(other);
    CHECK(other->is_end);
    /* each hand-off evicted the caller: about pp_rounds / 2 saves each */
    for (int i = 0; i < 2; i++) {
        CHECK(pp[i]->save_stack.ct_save + 2 >= (size_t)pp_rounds / 2);
        CHECK(pp[i]->save_stack.ct_save <= (size_t)pp_rounds / 2 + 2);
        CHECK(pp[i]->save_stack.max_cpsz >= 4000);
        aco_destroy(pp[i]);
    }
    aco_share_stack_destroy(s);
}

/* ------------------------------------------------------------------------ */
/* 3. A random mix against a model.                                         */
/* ------------------------------------------------------------------------ */

#define NM 6
static aco_t* mc[NM];
static uint32_t rnd;
static int steps_left[NM];       /* actions each co takes before exiting */
static int model_last;           /* index of the co that went back to main */
static int model_bad;

static void mixer(void) {
    int me = (int)(intptr_t)aco_get_arg();
    volatile unsigned char f[aco_test_vla(64 + 300 * (size_t)me)];
    aco_test_fill(f, sizeof(f), 100u + (uint32_t)me);
    for (;;) {
        if (aco_get_co() != mc[me]) model_bad++;
        if (!aco_test_intact(f, sizeof(f), 100u + (uint32_t)me)) model_bad++;
        if (steps_left[me]-- == 0) {
            model_last = me;
            aco_exit();
        }
        uint32_t r = aco_test_rand(&rnd);
        int to = (int)(r % NM);
        if (r % 3 == 0 || to == me || mc[to]->is_end) {
            model_last = me;
            aco_yield();
        } else {
            aco_yield_to(mc[to]);
        }
    }
}

static void random_mix(int nstacks) {
    aco_share_stack_t* s[NM];
    for (int i = 0; i < nstacks; i++) s[i] = aco_share_stack_new(0);
    rnd = 0x1234567u + (uint32_t)nstacks;
    for (intptr_t i = 0; i < NM; i++) {
        steps_left[i] = 50 + (int)i * 7;
        mc[i] = aco_create(main_co, s[i % nstacks], 0, mixer, (void*)i);
    }
    for (int live = NM; live > 0;) {
        int pick = (int)(aco_test_rand(&rnd) % NM);
        if (mc[pick]->is_end) continue;
        aco_t* last = aco_resume_last(mc[pick]);
        ASSERT_PTR_EQ(last, mc[model_last]);
        live = 0;
        for (int i = 0; i < NM; i++) live += !mc[i]->is_end;
    }
    ASSERT_EQ(model_bad, 0);
    for (int i = 0; i < NM; i++) {
        ASSERT_EQ(steps_left[i], -1);
        aco_destroy(mc[i]);
    }
    for (int i = 0; i < nstacks; i++) aco_share_stack_destroy(s[i]);
}

int main(void) {
    aco_thread_init(NULL);
    main_co = aco_create(NULL, NULL, 0, NULL, NULL);
    chain(0);
    chain(1);
    ping_pong();
    random_mix(1);
    random_mix(2);
    random_mix(NM);
    aco_destroy(main_co);
    printf("ok\n");
    return 0;
}
