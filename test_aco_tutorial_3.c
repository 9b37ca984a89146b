/*
 * test_aco_tutorial_3.c - libaco in several threads.
 *
 * It proves, with assert(), that cos of four threads running at once always
 * yield to their own thread's main co, and that every step they take is
 * counted exactly once, per thread and in one global atomic counter.
 *
 * A set of cos belongs to the thread that created them: libaco keeps its
 * state (the running co, the last-word function, the control words) per
 * thread, and never shares anything between threads.  So each thread
 * simply does what a single-threaded program does: aco_thread_init(), a
 * main co of its own, share stacks and cos of its own.  Never resume a co
 * from a thread other than its main co's.
 *
 * What the cos of different threads share is the program's business.  Here
 * every co adds to one global counter at each step, so the counter needs
 * real synchronisation: a C11 atomic.  (A pthread mutex works just as well;
 * libaco neither helps nor hinders.)
 *
 * Copyright 2026 the libaco authors.  Apache License 2.0 (see LICENSE).
 */
#include "aco.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include "aco_assert_override.h"

enum {
    THREADS = 4,
    COS_PER_THREAD = 6, /* on two share stacks, three cos each */
    STEPS = 500,        /* each co yields this many times */
};

/* Steps done by all cos of all threads: shared, hence atomic. */
static atomic_long total_steps;

/* One per thread, touched by that thread's cos and main co only. */
struct thread_data {
    int index;
    aco_t* main_co;
    long steps;        /* steps of this thread's cos: no lock needed */
    size_t copies;     /* save + restore copies on its share stacks */
};

/* The co function; its argument is its thread's struct thread_data. */
static void stepper(void) {
    struct thread_data* td = aco_get_arg();
    for (int i = 0; i < STEPS; i++) {
        /* Cos of one thread never run at the same time: a plain increment
         * of their thread's counter is safe.  The global one is not. */
        td->steps++;
        atomic_fetch_add_explicit(&total_steps, 1, memory_order_relaxed);
        /* Whatever the other threads run meanwhile, this thread's current
         * co is still this co, and it yields to this thread's main co. */
        assert(aco_get_co()->main_co == td->main_co);
        aco_yield();
    }
    aco_exit();
}

static void* thread_main(void* p) {
    struct thread_data* td = p;

    aco_thread_init(NULL);                      /* first, in every thread */
    aco_t* main_co = aco_create(NULL, NULL, 0, NULL, NULL);
    td->main_co = main_co;
    aco_share_stack_t* stacks[2] = {aco_share_stack_new(0),
                                    aco_share_stack_new(0)};
    aco_t* cos[COS_PER_THREAD];
    for (int i = 0; i < COS_PER_THREAD; i++)
        cos[i] = aco_create(main_co, stacks[i % 2], 0, stepper, td);

    /* Round-robin until every co has ended. */
    for (int alive = COS_PER_THREAD; alive > 0;) {
        alive = 0;
        for (int i = 0; i < COS_PER_THREAD; i++) {
            if (cos[i]->is_end) continue;
            aco_resume(cos[i]);
            assert(aco_get_co() == main_co); /* back in this thread's main */
            if (!cos[i]->is_end) alive++;
        }
    }

    td->copies = 0;
    for (int i = 0; i < COS_PER_THREAD; i++) {
        const aco_save_stack_t* ss = &cos[i]->save_stack;
        td->copies += ss->ct_save + ss->ct_restore;
        aco_destroy(cos[i]);
    }
    aco_share_stack_destroy(stacks[0]);
    aco_share_stack_destroy(stacks[1]);
    aco_destroy(main_co);
    return NULL;
}

int main(void) {
    pthread_t threads[THREADS];
    struct thread_data data[THREADS];

    for (int t = 0; t < THREADS; t++) {
        data[t] = (struct thread_data){.index = t};
        int err = pthread_create(&threads[t], NULL, thread_main, &data[t]);
        assert(err == 0);
    }
    long sum = 0;
    for (int t = 0; t < THREADS; t++) {
        int err = pthread_join(threads[t], NULL);
        assert(err == 0);
        printf("thread %d: %ld steps, %zu stack copies\n", data[t].index,
               data[t].steps, data[t].copies);
        assert(data[t].steps == (long)COS_PER_THREAD * STEPS);
        /* Three cos took turns on each stack: plenty of copies. */
        assert(data[t].copies > 0);
        sum += data[t].steps;
    }

    long total = atomic_load(&total_steps);
    printf("all threads: %ld steps (expected %ld)\n", total,
           (long)THREADS * COS_PER_THREAD * STEPS);
    assert(total == sum);
    assert(total == (long)THREADS * COS_PER_THREAD * STEPS);
    return 0;
}
