/*
 * test_aco_tutorial_1.c - the statistics in co->save_stack.
 *
 * It proves, with assert(), that two cos sharing a stack are copied lazily:
 * after every step of a fixed schedule each co's save and restore counts are
 * exactly the predicted ones, a 4 KiB frame survives its eviction, and
 * max_cpsz records the largest copy.
 *
 * Two cos, A and B, share one stack S.  Only one of them can have its frames
 * on S at a time (S's "owner").  When the other one is resumed, libaco first
 * copies the owner's live bytes (from its stack pointer to the top of S) to
 * the owner's private save stack, then copies the newcomer's saved bytes
 * back onto S.  Every co counts these copies:
 *
 *   co->save_stack.ct_save     times its frames were copied S -> save stack
 *   co->save_stack.ct_restore  times they were copied save stack -> S
 *   co->save_stack.max_cpsz    the largest such copy, in bytes
 *
 * The save is lazy: it happens only when another co takes S, never merely
 * because the owner yielded.  The program walks A and B through a fixed
 * schedule and checks the counters after every step.
 *
 * Copyright 2026 the libaco authors.  Apache License 2.0 (see LICENSE).
 */
#include "aco.h"

#include <stdio.h>

#include "aco_assert_override.h"

enum { BIG = 4096 }; /* bytes A keeps live on S during one of its yields */

/* Yield with a BIG buffer live in this frame, then check that it came back
 * intact: while we were away, B ran on S and overwrote these very bytes, so
 * only a correct save and restore leaves them as they were. */
__attribute__((noinline)) static void yield_with_big_frame(void) {
    volatile unsigned char buf[BIG];
    for (size_t i = 0; i < BIG; i++) buf[i] = (unsigned char)(i * 7 + 1);
    aco_yield();
    for (size_t i = 0; i < BIG; i++)
        assert(buf[i] == (unsigned char)(i * 7 + 1));
}

/* A: resumed 5 times (steps 1, 2, 4, 6 and 8 below). */
static void co_a(void) {
    aco_yield();           /* step 1 */
    aco_yield();           /* step 2 */
    aco_yield();           /* step 4 */
    yield_with_big_frame(); /* step 6 */
    aco_exit();            /* step 8 */
}

/* B: resumed 4 times (steps 3, 5, 7 and 9).  The volatile local makes B use
 * S too, over A's bytes. */
static void co_b(void) {
    volatile char mark[256];
    for (size_t i = 0; i < sizeof(mark); i++) mark[i] = 'b';
    for (int round = 0; round < 3; round++) {
        aco_yield();       /* steps 3, 5, 7 */
        for (size_t i = 0; i < sizeof(mark); i++) assert(mark[i] == 'b');
    }
    aco_exit();            /* step 9 */
}

static void show(const char* what, const aco_t* a, const aco_t* b) {
    printf("%-34s A: save %zu restore %zu max %5zu | B: save %zu restore %zu "
           "max %4zu\n",
           what, a->save_stack.ct_save, a->save_stack.ct_restore,
           a->save_stack.max_cpsz, b->save_stack.ct_save,
           b->save_stack.ct_restore, b->save_stack.max_cpsz);
}

/* Resume co, print the counters, check them against the expected ones. */
static void step(aco_t* co, const char* what, aco_t* a, aco_t* b,
                 size_t a_save, size_t a_restore, size_t b_save,
                 size_t b_restore) {
    aco_resume(co);
    show(what, a, b);
    assert(a->save_stack.ct_save == a_save);
    assert(a->save_stack.ct_restore == a_restore);
    assert(b->save_stack.ct_save == b_save);
    assert(b->save_stack.ct_restore == b_restore);
    /* The co that just ran keeps S after yielding (nothing is copied until
     * another co needs S); one that ended leaves S free. */
    assert(co->share_stack->owner == (co->is_end ? NULL : co));
}

int main(void) {
    aco_thread_init(NULL);
    aco_t* main_co = aco_create(NULL, NULL, 0, NULL, NULL);
    aco_share_stack_t* s = aco_share_stack_new(0);
    aco_t* a = aco_create(main_co, s, 0, co_a, NULL);
    aco_t* b = aco_create(main_co, s, 0, co_b, NULL);

    /*                                                save/restore: A    B */
    step(a, "1 A starts; S was empty:", a, b, 0, 0, 0, 0);
    step(a, "2 A again; still owns S: no copy:", a, b, 0, 0, 0, 0);
    step(b, "3 B starts; A saved:", a, b, 1, 0, 0, 0);
    step(a, "4 A; B saved, A restored:", a, b, 1, 1, 1, 0);
    step(b, "5 B; A saved, B restored:", a, b, 2, 1, 1, 1);
    step(a, "6 A yields deep; B saved:", a, b, 2, 2, 2, 1);
    step(b, "7 B; A saved with its big frame:", a, b, 3, 2, 2, 2);
    step(a, "8 A restored, checks, exits:", a, b, 3, 3, 3, 2);
    /* A ended, so its frames are dead: B takes S without saving them. */
    step(b, "9 B restored, exits:", a, b, 3, 3, 3, 3);
    assert(a->is_end && b->is_end);

    /*
     * max_cpsz is the high-water mark of a co's copies.  A's came at step 7,
     * with the BIG buffer live; B never had more than its small frame.  The
     * save stack was allocated at the first copy and grew to fit the largest
     * one exactly; creating a co with save_stack_sz = a known max_cpsz
     * spares it those regrowths.
     */
    assert(a->save_stack.max_cpsz >= BIG);
    assert(a->save_stack.max_cpsz <= s->sz);
    assert(b->save_stack.max_cpsz >= 256 && b->save_stack.max_cpsz < BIG);
    assert(a->save_stack.sz >= a->save_stack.max_cpsz);
    assert(b->save_stack.sz >= b->save_stack.max_cpsz);
    printf("A's save stack grew to %zu bytes, B's to %zu\n",
           (size_t)a->save_stack.sz, (size_t)b->save_stack.sz);

    aco_destroy(a);
    aco_destroy(b);
    aco_share_stack_destroy(s);
    aco_destroy(main_co);
    return 0;
}
