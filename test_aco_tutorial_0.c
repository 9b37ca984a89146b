/*
 * test_aco_tutorial_0.c - the basics: a main co and one standalone co.
 *
 * It proves, with assert(), that each aco_resume() runs the co to its next
 * aco_yield() two calls deep, that the co's locals survive every yield,
 * that aco_exit() ends it, and that a co alone on its stack is never copied.
 *
 * A coroutine ("co") is a function that can stop in the middle (yield) and
 * later go on from exactly where it stopped (be resumed), with its local
 * variables and its whole call chain intact.  libaco's cos are:
 *
 *   asymmetric  a co never picks who runs next: aco_yield() always returns
 *               to the co that resumed it, the thread's "main co";
 *   stackful    a co has a real stack, so it may yield from any call depth,
 *               not only from its top-level function.
 *
 * This program has the smallest useful cast: the main co (main() itself)
 * and one non-main co that has a share stack all to itself, which libaco
 * calls a "standalone" co.  Tutorial 2 puts several cos on one stack.
 *
 * Copyright 2026 the libaco authors.  Apache License 2.0 (see LICENSE).
 */
#include "aco.h"

#include <stdio.h>

#include "aco_assert_override.h"

/* What the main co and the co share.  It lives in main()'s frame, on the
 * thread's own stack, which only the main co ever runs on, so the co may
 * keep a pointer to it for its whole life. */
struct chat {
    int question; /* written by main, read by the co */
    int answer;   /* written by the co, read by main */
    int turns;    /* how many answers the co gave */
};

/* Two levels down from the co function: the co yields from here. */
static int answer_one(struct chat* c, int bias) {
    c->answer = c->question * c->question + bias;
    c->turns++;
    /*
     * aco_yield() saves this co's registers (stack pointer and instruction
     * pointer among them) and switches to its main co, whose aco_resume()
     * call then returns.  This frame, its caller's and the co function's
     * all stay where they are on the co's stack: nothing else runs on it.
     * When main resumes us, aco_yield() returns here as if it were an
     * ordinary call.
     */
    aco_yield();
    return c->question; /* main has put the next question in meanwhile */
}

/* The co function.  Its type is aco_cofuncp_t, void (*)(void): the input
 * comes from aco_get_arg(), the results go wherever the arg points. */
static void squarer(void) {
    struct chat* c = aco_get_arg();
    aco_t* self = aco_get_co(); /* the co now running: this one */
    assert(c == self->arg);

    /* An ordinary local.  It lives on the co's stack and keeps its value
     * across every yield below. */
    int bias = 1000;
    printf("co   %p: first resume, question %d\n", (void*)self, c->question);

    while (c->question != 0) {
        int next = answer_one(c, bias);
        /* Back after a yield: still the same co, and our locals are ours. */
        assert(aco_get_co() == self);
        assert(bias == 1000 + c->turns - 1);
        bias++;
        printf("co   %p: resumed, next question %d\n", (void*)self, next);
    }

    /*
     * The end.  aco_exit() marks the co ended (co->is_end = 1) and switches
     * to the main co for the last time; it never returns.  A co function
     * must not "return" instead: there is no caller to return to, and the
     * library aborts if it tries (tutorial 4).
     */
    printf("co   %p: question 0, exit\n", (void*)self);
    aco_exit();
}

int main(void) {
    /*
     * 1. Once per thread, before any other libaco call.  It records the
     *    thread's floating-point control words for new cos to start with,
     *    and the optional "last word" function (NULL here; tutorial 5).
     */
    aco_thread_init(NULL);

    /*
     * 2. The main co: not a new function but this very code, running on the
     *    thread's own stack.  It is the co every non-main co yields to.
     */
    aco_t* main_co = aco_create(NULL, NULL, 0, NULL, NULL);
    assert(aco_is_main_co(main_co));

    /*
     * 3. A share stack for the co to run on: 0 means the default size
     *    (2 MiB).  aco_share_stack_new() puts a guard page below it, so an
     *    overflow faults right away instead of corrupting memory.
     */
    aco_share_stack_t* sstk = aco_share_stack_new(0);
    assert(sstk->sz >= 4096 && sstk->guard_page_enabled);

    /*
     * 4. The co.  Arguments: its main co, its stack, the initial size of its
     *    private save stack (0: a small default; unused here, see below),
     *    its function and its argument.  Creating does not run anything: the
     *    co is in the "init" state until its first aco_resume().
     */
    struct chat c = {.question = 3, .answer = 0, .turns = 0};
    aco_t* co = aco_create(main_co, sstk, 0, squarer, &c);
    assert(!aco_is_main_co(co) && co->main_co == main_co);
    assert(co->share_stack == sstk && co->fp == squarer && co->is_end == 0);
    assert(c.turns == 0); /* not started yet */

    /*
     * 5. Drive it.  aco_resume(co) switches to co and returns when co yields
     *    (or exits).  The first call starts squarer(); the later ones make
     *    its pending aco_yield() return.
     */
    const int questions[] = {3, 4, 5, 0};
    for (int i = 0; i < 4; i++) {
        c.question = questions[i];
        printf("main %p: resume with question %d\n", (void*)main_co,
               c.question);
        aco_resume(co);
        if (c.question != 0) {
            /* The co answered and yielded; it has not ended. */
            assert(c.turns == i + 1);
            assert(c.answer == c.question * c.question + 1000 + i);
            assert(co->is_end == 0);
            printf("main %p: answer %d\n", (void*)main_co, c.answer);
        }
    }
    /* The question 0 made it leave its loop and call aco_exit(). */
    assert(co->is_end == 1);
    assert(c.turns == 3);

    /*
     * 6. What it cost.  The co had its stack to itself, so its frames just
     *    stayed there between runs: not a single byte was copied.  (Cos that
     *    share a stack copy their frames out and back in: tutorials 1, 2.)
     */
    assert(co->save_stack.ct_save == 0 && co->save_stack.ct_restore == 0);
    printf("main: the standalone co was saved %zu times, restored %zu\n",
           co->save_stack.ct_save, co->save_stack.ct_restore);

    /*
     * 7. Clean up: the co (resuming an ended co is an error, destroying it
     *    is the only thing left to do), then the stack, which must no longer
     *    carry any co, and the main co last.
     */
    aco_destroy(co);
    co = NULL;
    aco_share_stack_destroy(sstk);
    sstk = NULL;
    aco_destroy(main_co);
    main_co = NULL;
    printf("main: done\n");
    return 0;
}
