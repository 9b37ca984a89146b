/*
 * test_aco_tutorial_4.c - a co function must end with aco_exit(): returning
 * from it kills the process.
 *
 * This program breaks the rule on purpose.  Its co function returns, and
 * libaco prints
 *
 *   aco: protector: co 0x... returned from its co function 0x... instead of
 *   calling aco_exit(); a co function must end with aco_exit()
 *
 * to stderr and calls abort(): the program ends by SIGABRT (exit status 134
 * in a shell).  That is its expected outcome.
 *
 * Why not simply treat "return" as a quiet aco_exit()?  A co function is not
 * called by anyone.  aco_resume() jumps into it on a fresh share stack, and
 * the only return address up there is one libaco planted: the "protector".
 * There is no caller frame to go back to; the main co waits in its own saved
 * registers, on another stack.  A co that runs off the end of its function is
 * almost always a bug (a path that forgot aco_exit(), a misplaced brace), and
 * going on would hide it: the co would not be marked ended, and the main co
 * would resume at a point it never expected.  So libaco treats it like a
 * failed assertion: say what happened, then stop.  (Tutorial 5 shows how to
 * run some code of your own before the abort.)
 *
 * Copyright 2026 the libaco authors.  Apache License 2.0 (see LICENSE).
 */
#include "aco.h"

#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include "aco_assert_override.h"

/*
 * Self-check.  Only one abort is the expected one: the library's, after the
 * co has returned.  An assert() that fails earlier aborts too, so a SIGABRT
 * handler tells them apart: before the co returned, it turns the abort into
 * exit status 2 (a failure); afterwards it lets the abort go on.
 */
static volatile sig_atomic_t co_returned;

static void on_sigabrt(int sig) {
    (void)sig;
    if (!co_returned) {
        static const char msg[] = "tutorial 4: abort before the co returned: "
                                  "a check failed\n";
        ssize_t n = write(STDERR_FILENO, msg, sizeof(msg) - 1);
        (void)n;
        _exit(2);
    }
    /* Expected.  Returning from this handler makes abort() restore the
     * default action and raise SIGABRT again: the process dies by it. */
}

/* The faulty co: it yields once, works a little more, and returns. */
static void forgetful(void) {
    int* counter = aco_get_arg();
    (*counter)++;
    aco_yield();
    (*counter)++;
    printf("co: done, returning instead of calling aco_exit()\n");
    fflush(stdout); /* abort() does not flush stdio buffers */
    co_returned = 1;
    return; /* BUG, on purpose: the last statement must be aco_exit(). */
}

int main(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_sigabrt;
    sigemptyset(&sa.sa_mask);
    int err = sigaction(SIGABRT, &sa, NULL);
    assert(err == 0);

    aco_thread_init(NULL); /* NULL: no last word, the default report only */
    aco_t* main_co = aco_create(NULL, NULL, 0, NULL, NULL);
    aco_share_stack_t* sstk = aco_share_stack_new(0);
    int counter = 0;
    aco_t* co = aco_create(main_co, sstk, 0, forgetful, &counter);

    aco_resume(co); /* up to its aco_yield(): all is well so far */
    assert(counter == 1 && co->is_end == 0 && co_returned == 0);
    printf("main: co yielded once, counter %d; resuming it again\n", counter);
    fflush(stdout);

    aco_resume(co); /* the co returns: libaco aborts in there */

    /* Not reached with a correct libaco. */
    fprintf(stderr, "tutorial 4: BUG: aco_resume() came back after the co "
                    "returned (is_end %d, counter %d)\n", co->is_end, counter);
    aco_destroy(co);
    aco_share_stack_destroy(sstk);
    aco_destroy(main_co);
    return 1;
}
