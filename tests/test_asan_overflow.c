/*
 * test_asan_overflow.c - under ASan, a co on a shared stack keeps its red
 * zones across evictions, and a real stack-buffer overflow in it is reported.
 *
 * Co V keeps a fixed-size array and a VLA live across its yields; co E, on
 * the same share stack, runs deeper over the very same addresses and so
 * evicts V every round.  Checked (ASan's public interface, no report may
 * happen in this process):
 *   - the share-stack memory that no live frame uses is unpoisoned: below V
 *     at its yield, below E at its deepest point, everything once both are
 *     gone (ended, or destroyed while suspended);
 *   - after every restore, the byte right after each of V's arrays is
 *     poisoned again (its red zone came back with the frame) and the arrays
 *     themselves are not.  The VLA always lies on the share stack; the fixed
 *     array lies in ASan's fake stack when detect_stack_use_after_return=1,
 *     and then only its contents are checked.
 * Then, in forked children (ASan reports, then aborts: abort_on_error=1), V
 * is evicted and restored again and writes one byte past its fixed array,
 * or past its VLA: each child must die with ASan's report of a
 * (dynamic-)stack-buffer-overflow in thread T0's stack, in V's function.
 *
 * Without ASan the program says so and checks only that V and E run; test.sh
 * runs it in the asan target only.
 */
#include "aco_test.h"

#if aco__asan
#include <sanitizer/asan_interface.h>

/* Children report and abort, so the harness judges them by SIGABRT. */
const char* __asan_default_options(void);
const char* __asan_default_options(void) {
    return "abort_on_error=1";
}
#endif

#define ROUNDS 8
#define FIXED 40            /* bytes of V's fixed-size array */
#define VLA 72              /* bytes of V's VLA */
#define E_BYTES 6000        /* E's frame: well over V's */

enum { OVERFLOW_NONE, OVERFLOW_FIXED, OVERFLOW_VLA };

static aco_share_stack_t* sstk;
static volatile int overflow_kind;      /* what V does after its last round */
static volatile size_t overflow_at;     /* index one past the end */
#if aco__asan
static long checks;
#endif

/* Is [lo, hi) of the share stack free of poison?  The check runs in ASan's
 * runtime, which reads shadow memory without touching the bytes. */
static void expect_clean(const char* where, uintptr_t lo, uintptr_t hi) {
#if aco__asan
    if (hi <= lo) return;
    void* bad = __asan_region_is_poisoned((void*)lo, (size_t)(hi - lo));
    if (bad != NULL) {
        fprintf(stderr, "%s: share-stack byte %p (stack [%p, %p)) is poisoned\n",
                where, bad, sstk->ptr, (void*)((char*)sstk->ptr + sstk->sz));
        exit(1);
    }
    checks++;
#else
    (void)where, (void)lo, (void)hi;
#endif
}

static int on_share_stack(const void* p) {
    return (uintptr_t)p >= (uintptr_t)sstk->ptr &&
           (uintptr_t)p < (uintptr_t)sstk->ptr + sstk->sz;
}

/* Red zone right after an array: poisoned; the array's last byte: not. */
static void expect_red_zone(const char* what, volatile char* a, size_t n) {
#if aco__asan
    if (!on_share_stack((const void*)a)) return;
    if (!__asan_address_is_poisoned((const void*)(a + n)) ||
        __asan_address_is_poisoned((const void*)(a + n - 1))) {
        fprintf(stderr, "%s at %p: red zone after byte %zu not restored "
                "(poisoned: last byte %d, next byte %d)\n", what, (void*)a, n,
                __asan_address_is_poisoned((const void*)(a + n - 1)),
                __asan_address_is_poisoned((const void*)(a + n)));
        exit(1);
    }
    checks++;
#else
    (void)what, (void)a, (void)n;
#endif
}

static char pat(size_t i, int round) {
    return (char)(i * 13 + (size_t)round * 7 + 1);
}

/* V: both arrays live across every yield. */
__attribute__((noinline)) static void victim_frame(void) {
    volatile char fixed[FIXED];
    volatile char vla[aco_test_vla(VLA)];
    CHECK(on_share_stack((const void*)vla));
    for (int round = 0; round < ROUNDS; round++) {
        for (size_t i = 0; i < FIXED; i++) fixed[i] = pat(i, round);
        for (size_t i = 0; i < VLA; i++) vla[i] = pat(i, ~round);
        expect_clean("below V at its yield", (uintptr_t)sstk->ptr, aco_test_sp());
        aco_yield();    /* E runs over these addresses before we come back */
        for (size_t i = 0; i < FIXED; i++) CHECK(fixed[i] == pat(i, round));
        for (size_t i = 0; i < VLA; i++) CHECK(vla[i] == pat(i, ~round));
        expect_red_zone("V's fixed array", fixed, FIXED);
        expect_red_zone("V's VLA", vla, VLA);
    }
    printf("V's fixed array: %s; its VLA: on the share stack\n",
           on_share_stack((const void*)fixed) ? "on the share stack"
                                              : "in ASan's fake stack");
    /* The bug the children inject: one byte past the end. */
    if (overflow_kind == OVERFLOW_FIXED) fixed[overflow_at] = 1;
    if (overflow_kind == OVERFLOW_VLA) vla[overflow_at] = 1;
}

static void co_victim(void) {
    victim_frame();
    aco_exit();
}

/* E: one big frame, written whole, over V's region. */
__attribute__((noinline)) static void evictor_frame(int round) {
    volatile char big[aco_test_vla(E_BYTES)];
    for (size_t i = 0; i < E_BYTES; i++) big[i] = (char)(i + (size_t)round);
    expect_clean("below E at its deepest", (uintptr_t)sstk->ptr, aco_test_sp());
    aco_yield();
    for (size_t i = 0; i < E_BYTES; i++) CHECK(big[i] == (char)(i + (size_t)round));
}

static void co_evictor(void) {
    for (int round = 0;; round++) evictor_frame(round);
}

static aco_t* main_co;

/* ROUNDS rounds of V then E on one stack.  Returns V, suspended or ended. */
static aco_t* run_rounds(aco_t** e_out) {
    aco_t* v = aco_create(main_co, sstk, 0, co_victim, NULL);
    aco_t* e = aco_create(main_co, sstk, 0, co_evictor, NULL);
    for (int round = 0; round < ROUNDS; round++) {
        aco_resume(v);
        aco_resume(e);      /* evicts V */
        CHECK(v->save_stack.ct_save == (size_t)round + 1);
    }
    *e_out = e;
    return v;
}

#if aco__asan
static void overflow_child(void* kind) {
    overflow_kind = *(int*)kind;
    overflow_at = overflow_kind == OVERFLOW_FIXED ? FIXED : VLA;
    aco_t* e;
    aco_t* v = run_rounds(&e);
    aco_resume(v);          /* restored, then the overflow */
    fprintf(stderr, "the overflow went unreported\n");
}
#endif

int main(void) {
    aco_thread_init(NULL);
    main_co = aco_create(NULL, NULL, 0, NULL, NULL);
    sstk = aco_share_stack_new(64 * 1024);
    uintptr_t lo = (uintptr_t)sstk->ptr, hi = lo + sstk->sz;

    /* V ends normally; E is destroyed while it owns the stack. */
    aco_t* e;
    aco_t* v = run_rounds(&e);
    aco_resume(v);
    CHECK(v->is_end);
    expect_clean("after V ended", lo, hi);
    aco_resume(e);
    CHECK(sstk->owner == e);
    aco_destroy(e);
    expect_clean("after E was destroyed while suspended", lo, hi);
    aco_destroy(v);

    /* V destroyed while it owns the stack, restored mid-round. */
    v = aco_create(main_co, sstk, 0, co_victim, NULL);
    e = aco_create(main_co, sstk, 0, co_evictor, NULL);
    aco_resume(v);
    aco_resume(e);
    aco_resume(v);
    CHECK(!v->is_end && sstk->owner == v && v->save_stack.ct_restore == 1);
    aco_destroy(v);
    expect_clean("after V was destroyed while suspended", lo, hi);
    aco_destroy(e);

#if aco__asan
    int fails = 0;
    static int kinds[2] = {OVERFLOW_FIXED, OVERFLOW_VLA};
    fails += aco_test_expect_signal(
        "overflow of V's fixed array", overflow_child, &kinds[0], SIGABRT,
        "ERROR: AddressSanitizer: stack-buffer-overflow|WRITE of size 1|"
        "in stack of thread T0|victim_frame");
    fails += aco_test_expect_signal(
        "overflow of V's VLA", overflow_child, &kinds[1], SIGABRT,
        "ERROR: AddressSanitizer: dynamic-stack-buffer-overflow|WRITE of size 1|"
        "victim_frame");
    ASSERT_EQ(fails, 0);
    printf("test_asan_overflow: ok (%ld shadow checks, both overflows "
           "reported)\n", checks);
#else
    printf("test_asan_overflow: not an ASan build: V and E ran; nothing "
           "else to check\n");
#endif
    aco_share_stack_destroy(sstk);
    aco_destroy(main_co);
    return 0;
}
