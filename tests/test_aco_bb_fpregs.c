/*
 * test_aco_bb_fpregs.c - black-box: what a switch keeps, from aco.h and the
 * upstream README ("Build and Test", "Proof of Correctness") alone.
 *
 *   - Callee-saved registers (x86-64: rbx, rbp, r12-r15) hold, across an
 *     aco_yield() and an aco_resume(), the values their side loaded, also
 *     when the co was evicted from its share stack by another co that
 *     loaded other values (an assembly helper loads them, calls the switch,
 *     stores them).  Other architectures: skipped (test_callee_saved has
 *     them).
 *   - FP control state (rounding mode): without ACO_CONFIG_SHARE_FPU_MXCSR_ENV
 *     each co keeps its own across switches; a new co, and a co after
 *     aco_reset, start with what aco_thread_init captured, and a second
 *     aco_thread_init captures again.  With the macro, every co shares one
 *     state (upstream: "all coroutines share one FPU and MXCSR control
 *     word"): what a co sets, main sees after its yield.
 */
#include "aco_test.h"

#include <fenv.h>

static aco_t* main_co;

/* ------------------------------------------------------------------------ */
/* Callee-saved registers (x86-64).                                         */
/* ------------------------------------------------------------------------ */

#if defined(__x86_64__)
/* bb_regs_call(fn, in, out): load rbx, rbp, r12-r15 from in[0..5], call
 * fn() on a 16-byte aligned stack, store the six into out[0..5]. */
void bb_regs_call(void (*fn)(void), const uint64_t* in, uint64_t* out);
__asm__(
    ".text\n"
    ".globl bb_regs_call\n"
    ".type bb_regs_call, @function\n"
    "bb_regs_call:\n"
    "    pushq %rbx\n"
    "    pushq %rbp\n"
    "    pushq %r12\n"
    "    pushq %r13\n"
    "    pushq %r14\n"
    "    pushq %r15\n"
    "    pushq %rdx\n"          /* out */
    "    movq %rdi, %rax\n"
    "    movq 0(%rsi), %rbx\n"
    "    movq 8(%rsi), %rbp\n"
    "    movq 16(%rsi), %r12\n"
    "    movq 24(%rsi), %r13\n"
    "    movq 32(%rsi), %r14\n"
    "    movq 40(%rsi), %r15\n"
    /* 7 pushes + return address = 64 bytes: rsp is 16-byte aligned */
    "    callq *%rax\n"
    "    popq %rdx\n"
    "    movq %rbx, 0(%rdx)\n"
    "    movq %rbp, 8(%rdx)\n"
    "    movq %r12, 16(%rdx)\n"
    "    movq %r13, 24(%rdx)\n"
    "    movq %r14, 32(%rdx)\n"
    "    movq %r15, 40(%rdx)\n"
    "    popq %r15\n"
    "    popq %r14\n"
    "    popq %r13\n"
    "    popq %r12\n"
    "    popq %rbp\n"
    "    popq %rbx\n"
    "    ret\n"
    ".size bb_regs_call, .-bb_regs_call\n");

static aco_t* to_resume;
static void resume_it(void) { aco_resume(to_resume); }
static void yield_it(void) { aco_yield(); }

static int reg_bad;

static void co_regs(void) {
    uint64_t seed = (uint64_t)(uintptr_t)aco_get_arg();
    for (int r = 0; r < 20; r++) {
        uint64_t in[6], out[6];
        for (int i = 0; i < 6; i++) in[i] = seed * 0x9e3779b97f4a7c15ull + (uint64_t)(r * 6 + i);
        bb_regs_call(yield_it, in, out);
        for (int i = 0; i < 6; i++)
            if (in[i] != out[i]) reg_bad++;
    }
    aco_exit();
}

static void regs(void) {
    aco_share_stack_t* s = aco_share_stack_new(0);
    aco_share_stack_t* s2 = aco_share_stack_new(0);
    aco_t* a = aco_create(main_co, s, 0, co_regs, (void*)1);
    aco_t* b = aco_create(main_co, s, 0, co_regs, (void*)2);   /* evicts a */
    aco_t* c = aco_create(main_co, s2, 0, co_regs, (void*)3);  /* alone */
    aco_t* all[3] = {a, b, c};
    for (int r = 0; r < 21; r++) {
        for (int k = 0; k < 3; k++) {
            uint64_t in[6], out[6];
            for (int i = 0; i < 6; i++) in[i] = 0x1111111111111111ull * (uint64_t)(i + 1) + (uint64_t)r;
            to_resume = all[k];
            bb_regs_call(resume_it, in, out);
            for (int i = 0; i < 6; i++) ASSERT_EQ(out[i], in[i]);
        }
    }
    ASSERT_EQ(reg_bad, 0);
    CHECK(a->save_stack.ct_save > 0);     /* it was evicted */
    ASSERT_EQ(c->save_stack.ct_save, 0);  /* alone: never */
    for (int k = 0; k < 3; k++) {
        CHECK(all[k]->is_end);
        aco_destroy(all[k]);
    }
    aco_share_stack_destroy(s);
    aco_share_stack_destroy(s2);
}
#else
static void regs(void) {
    printf("regs: x86-64 only here (test_callee_saved covers the others): skipped\n");
}
#endif

/* ------------------------------------------------------------------------ */
/* FP control state: the rounding mode.                                     */
/* ------------------------------------------------------------------------ */

#ifdef ACO_CONFIG_SHARE_FPU_MXCSR_ENV
#define SHARED 1
#else
#define SHARED 0
#endif

static int seen[8];

static void co_round(void) {
    int mode = (int)(intptr_t)aco_get_arg();
    seen[0] = fegetround();             /* what it started with */
    fesetround(mode);
    aco_yield();
    seen[1] = fegetround();             /* its own, unless shared */
    aco_yield();
    seen[2] = fegetround();
    fesetround(FE_TONEAREST);
    aco_exit();
}

static void fpenv(void) {
    aco_share_stack_t* s = aco_share_stack_new(0);
    fesetround(FE_TONEAREST);
    aco_thread_init(NULL);              /* captures to-nearest */
    aco_t* a = aco_create(main_co, s, 0, co_round, (void*)(intptr_t)FE_UPWARD);
    aco_resume(a);
    ASSERT_EQ(seen[0], FE_TONEAREST);
    if (SHARED) {
        ASSERT_EQ(fegetround(), FE_UPWARD);  /* one state for all */
        fesetround(FE_TONEAREST);
        aco_resume(a);
        ASSERT_EQ(seen[1], FE_TONEAREST);
        fesetround(FE_DOWNWARD);
        aco_resume(a);
        ASSERT_EQ(seen[2], FE_DOWNWARD);
        CHECK(a->is_end);
        ASSERT_EQ(fegetround(), FE_TONEAREST);
        aco_destroy(a);
        aco_share_stack_destroy(s);
        return;
    }
    ASSERT_EQ(fegetround(), FE_TONEAREST);   /* main's own */
    fesetround(FE_DOWNWARD);
    /* A new co (evicting a) starts with the captured state, not main's. */
    aco_t* b = aco_create(main_co, s, 0, co_round, (void*)(intptr_t)FE_TOWARDZERO);
    aco_resume(b);
    ASSERT_EQ(seen[0], FE_TONEAREST);
    ASSERT_EQ(fegetround(), FE_DOWNWARD);
    aco_resume(a);
    ASSERT_EQ(seen[1], FE_UPWARD);
    ASSERT_EQ(fegetround(), FE_DOWNWARD);
    aco_resume(b);
    ASSERT_EQ(seen[1], FE_TOWARDZERO);
    aco_resume(a);
    ASSERT_EQ(seen[2], FE_UPWARD);
    CHECK(a->is_end);
    ASSERT_EQ(fegetround(), FE_DOWNWARD);

    /* aco_reset: starts again with the captured state. */
    aco_reset(a);
    aco_resume(a);
    ASSERT_EQ(seen[0], FE_TONEAREST);
    aco_resume(b);
    ASSERT_EQ(seen[2], FE_TOWARDZERO);
    CHECK(b->is_end);

    /* A second aco_thread_init records again: new cos start with upward. */
    fesetround(FE_UPWARD);
    aco_thread_init(NULL);
    fesetround(FE_TONEAREST);
    aco_t* c = aco_create(main_co, s, 0, co_round, (void*)(intptr_t)FE_DOWNWARD);
    aco_resume(c);
    ASSERT_EQ(seen[0], FE_UPWARD);
    ASSERT_EQ(fegetround(), FE_TONEAREST);
    aco_resume(c);
    ASSERT_EQ(seen[1], FE_DOWNWARD);
    aco_resume(c);
    CHECK(c->is_end);
    /* and a reset co too */
    aco_reset(b);
    aco_resume(b);
    ASSERT_EQ(seen[0], FE_UPWARD);
    aco_resume(b);
    aco_resume(b);
    CHECK(b->is_end);
    ASSERT_EQ(fegetround(), FE_TONEAREST);

    aco_destroy(a);
    aco_destroy(b);
    aco_destroy(c);
    aco_share_stack_destroy(s);
    aco_thread_init(NULL);
}

int main(void) {
    aco_thread_init(NULL);
    main_co = aco_create(NULL, NULL, 0, NULL, NULL);
    regs();
    fpenv();
    aco_destroy(main_co);
    printf("ok (%s FP control state)\n", SHARED ? "shared" : "per-co");
    return 0;
}
