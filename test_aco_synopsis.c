/*
 * test_aco_synopsis.c - libaco on one page.
 *
 * It proves, with assert(), that each aco_resume() runs the co exactly one
 * step, to its next aco_yield() (made from a nested call), and that the co
 * is ended once it has called aco_exit().
 *
 * The main co resumes one non-main co over and over.  Each time, the co
 * does one step of its loop, reports its progress through the int its
 * argument points to, and yields back.  After its last step it calls
 * aco_exit(), and main() frees everything.
 *
 * Build and run (add -m32, -DACO_USE_VALGRIND, ... as you like):
 *   gcc -O2 -g -I. test_aco_synopsis.c aco.c acosw.S -o synopsis && ./synopsis
 *
 * Copyright 2026 the libaco authors.  Apache License 2.0 (see LICENSE).
 */
#include "aco.h"

#include <stdio.h>

/* Last: it turns assert() into aco_assert(), which NDEBUG cannot remove. */
#include "aco_assert_override.h"

enum { STEPS = 4 };

/* Called by the co.  It yields from a nested call: a stackful co can stop
 * at any depth, and its frames wait on its stack until it is resumed. */
static void report_and_yield(int* progress, int step) {
    *progress = step;
    printf("  co %p: step %d done, yield\n", (void*)aco_get_co(), step);
    aco_yield();
}

/* A co function takes no parameters; its input is aco_get_arg(), the last
 * argument given to aco_create().  Here: the address of main()'s counter. */
static void stepper(void) {
    int* progress = aco_get_arg();
    printf("  co %p: started, progress %d\n", (void*)aco_get_co(), *progress);
    for (int step = 1; step <= STEPS; step++) report_and_yield(progress, step);
    *progress = -1; /* "finished" */
    printf("  co %p: exit\n", (void*)aco_get_co());
    aco_exit(); /* never return from a co function: see tutorial 4 */
}

int main(void) {
    aco_thread_init(NULL); /* once per thread, before anything else */

    /* The main co is this thread's own context, running on its own stack. */
    aco_t* main_co = aco_create(NULL, NULL, 0, NULL, NULL);

    /* A stack for non-main cos to run on; 0 asks for the default 2 MiB. */
    aco_share_stack_t* sstk = aco_share_stack_new(0);

    /* main co's locals are safe to share: the thread's stack is its alone. */
    int progress = 0;
    aco_t* co = aco_create(main_co, sstk, 0, stepper, &progress);
    assert(co->is_end == 0 && co->arg == &progress);

    for (int step = 1; step <= STEPS; step++) {
        printf("main: resume co %p\n", (void*)co);
        aco_resume(co); /* returns when the co yields */
        assert(progress == step);
        assert(co->is_end == 0);
    }
    printf("main: resume co %p for the last time\n", (void*)co);
    aco_resume(co); /* returns when the co exits */
    assert(progress == -1);
    assert(co->is_end == 1);

    /* An ended co cannot be resumed again; it can only be destroyed.  Cos
     * go first, then the stacks they used, then the main co. */
    aco_destroy(co);
    aco_share_stack_destroy(sstk);
    aco_destroy(main_co);
    printf("main: all destroyed\n");
    return 0;
}
