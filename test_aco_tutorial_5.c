/*
 * test_aco_tutorial_5.c - a "last word" function of your own.
 *
 * It proves that the function given to aco_thread_init() runs before the
 * abort that follows a co function's return, on the faulty co itself (even
 * one that was evicted and restored on the way): the program dies by SIGABRT
 * only after its last word has checked that.
 *
 * When a co function returns instead of calling aco_exit() (tutorial 4),
 * libaco aborts the process; nothing can stop that.  But the program can
 * have a last word first: the function given to aco_thread_init() runs
 * just before the abort, on the faulty co itself, so aco_get_co() and
 * aco_get_arg() tell it which co failed and what it was working on.
 *
 * Typical last words: log the co's identity and state, and flush buffered
 * output (abort() does not flush stdio, so whatever printf() left in the
 * buffer of a pipe or file would be lost).  Keep it short and do not try to
 * resume, yield or exit from it: the co is broken; the process is ending.
 *
 * This program ends by SIGABRT on purpose (exit status 134 in a shell).
 *
 * Copyright 2026 the libaco authors.  Apache License 2.0 (see LICENSE).
 */
#include "aco.h"

#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include "aco_assert_override.h"

/* What the cos work on; the last word reports it. */
struct task {
    const char* name;
    int progress;
};

static aco_t* faulty_co; /* set by main(), checked by the last word */

/*
 * Self-check, as in tutorial 4: the expected abort is the one that follows
 * a last word that found everything as documented.  Any earlier abort (a
 * failed assert() in main() or in the last word, or a library that aborts
 * without calling the last word) exits with status 2 instead.
 */
static volatile sig_atomic_t last_word_checked;

static void on_sigabrt(int sig) {
    (void)sig;
    if (!last_word_checked) {
        static const char msg[] = "tutorial 5: abort without a checked last "
                                  "word: a check failed\n";
        ssize_t n = write(STDERR_FILENO, msg, sizeof(msg) - 1);
        (void)n;
        _exit(2);
    }
    /* Expected: return; abort() then dies by SIGABRT, the default action. */
}

/* The last word.  Same type as a co function: void (*)(void). */
static void last_word(void) {
    aco_t* co = aco_get_co();
    struct task* t = aco_get_arg();
    fprintf(stderr, "last word: co %p (task \"%s\", progress %d) returned "
            "from its co function; is_end %d, saved %zu times\n",
            (void*)co, t->name, t->progress, co->is_end,
            co->save_stack.ct_save);

    /* The documented guarantees: it runs on the faulty co, which has not
     * ended (it never called aco_exit()). */
    assert(co == faulty_co);
    assert(!aco_is_main_co(co) && co->is_end == 0);
    assert(t->progress == 2);

    fflush(stdout); /* save what main() printed before the abort eats it */
    last_word_checked = 1;
    /* Returning lets libaco print its own report and abort. */
}

/* A well-behaved co. */
static void good(void) {
    struct task* t = aco_get_arg();
    t->progress++;
    aco_yield();
    t->progress++;
    aco_exit();
}

/* The faulty one: same work, but it returns at the end. */
static void bad(void) {
    struct task* t = aco_get_arg();
    t->progress++;
    aco_yield();
    t->progress++;
    return; /* BUG, on purpose: it must call aco_exit() */
}

int main(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_sigabrt;
    sigemptyset(&sa.sa_mask);
    int err = sigaction(SIGABRT, &sa, NULL);
    assert(err == 0);

    aco_thread_init(last_word); /* this thread's last word */
    aco_t* main_co = aco_create(NULL, NULL, 0, NULL, NULL);
    aco_share_stack_t* sstk = aco_share_stack_new(0);

    /* Two cos on one stack, so the faulty one is saved and restored on the
     * way: the last word still finds it intact. */
    struct task good_task = {.name = "good", .progress = 0};
    struct task bad_task = {.name = "bad", .progress = 0};
    aco_t* good_co = aco_create(main_co, sstk, 0, good, &good_task);
    faulty_co = aco_create(main_co, sstk, 0, bad, &bad_task);

    aco_resume(faulty_co);
    aco_resume(good_co);
    aco_resume(good_co);
    assert(good_co->is_end && good_task.progress == 2);
    assert(!faulty_co->is_end && bad_task.progress == 1);
    assert(faulty_co->save_stack.ct_save == 1);
    printf("main: good co ended; resuming the bad one, expect its last word\n");

    aco_resume(faulty_co); /* it returns: last word, then abort */

    /* Not reached with a correct libaco. */
    fprintf(stderr, "tutorial 5: BUG: aco_resume() came back after the co "
                    "returned\n");
    return 1;
}
