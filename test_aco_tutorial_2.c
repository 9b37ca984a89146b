/*
 * test_aco_tutorial_2.c - one standalone co and two cos sharing a stack.
 *
 * It proves, with assert(), that every co's locals come back intact after
 * each turn, whether the co had its stack to itself (never copied) or shared
 * it (saved and restored once per change of hands, counted exactly).
 *
 *   stack S1: co "solo"              alone: its frames never move
 *   stack S2: cos "left" and "right" one at a time; the one not running
 *                                    waits in its private save stack
 *
 * The main co runs the three in turns until all have ended.  Each co keeps
 * a running sum and a table of its own in locals, so every turn shows that
 * its stack came back exactly as it left it, wherever it had to wait.
 *
 * It also follows the one rule that sharing a stack adds (see "Best
 * practice" in docs/core.md): never hand a co a pointer into another co's
 * stack.  "left" and "right" exchange data through memory main() allocated
 * on the heap, never through each other's locals.
 *
 * Copyright 2026 the libaco authors.  Apache License 2.0 (see LICENSE).
 */
#include "aco.h"

#include <stdio.h>
#include <stdlib.h>

#include "aco_assert_override.h"

/* A co's job: add up 1..n, one number per turn, and leave the total. */
struct job {
    const char* name;
    int n;
    long total;            /* written at the end */
    int turns;             /* turns taken so far */
    long* mailbox;         /* heap slot: the latest sum of "left" */
    long seen_from_left;   /* what "right" last read from it */
};

static void summer(void) {
    struct job* job = aco_get_arg();
    /* Locals on this co's stack: on S2 they are copied away and back
     * whenever the other co of S2 runs in between. */
    long sum = 0;
    volatile int table[32]; /* volatile: really in memory, on the stack */
    for (int i = 0; i < 32; i++) table[i] = i * job->n;

    for (int k = 1; k <= job->n; k++) {
        sum += k;
        if (job->mailbox != NULL && job->name[0] == 'l') {
            *job->mailbox = sum;                     /* left posts ... */
        } else if (job->mailbox != NULL) {
            job->seen_from_left = *job->mailbox;     /* ... right reads */
        }
        job->turns++;
        aco_yield();
        /* Back: this co's own locals must be untouched. */
        assert(sum == (long)k * (k + 1) / 2);
        for (int i = 0; i < 32; i++) assert(table[i] == i * job->n);
    }
    job->total = sum;
    aco_exit();
}

int main(void) {
    aco_thread_init(NULL);
    aco_t* main_co = aco_create(NULL, NULL, 0, NULL, NULL);

    aco_share_stack_t* s1 = aco_share_stack_new(0);
    aco_share_stack_t* s2 = aco_share_stack_new(0);

    /* Shared between left and right: on the heap, not on S2. */
    long* mailbox = malloc(sizeof(*mailbox));
    assertalloc_ptr(mailbox);
    *mailbox = 0;

    struct job jobs[3] = {
        {.name = "solo", .n = 5},
        {.name = "left", .n = 7, .mailbox = mailbox},
        {.name = "right", .n = 4, .mailbox = mailbox},
    };
    aco_t* cos[3] = {
        aco_create(main_co, s1, 0, summer, &jobs[0]),
        aco_create(main_co, s2, 0, summer, &jobs[1]),
        aco_create(main_co, s2, 0, summer, &jobs[2]),
    };

    /* Round after round, resume every co that has not ended yet. */
    int running = 3, round = 0;
    while (running > 0) {
        round++;
        for (int i = 0; i < 3; i++) {
            if (cos[i]->is_end) continue;
            aco_resume(cos[i]);
            if (cos[i]->is_end) {
                running--;
                printf("round %d: %-5s ended, total %ld\n", round,
                       jobs[i].name, jobs[i].total);
            } else {
                assert(jobs[i].turns == round);
            }
            if (i == 2 && !cos[2]->is_end) {
                /* right ran right after left: it read left's latest sum */
                assert(jobs[2].seen_from_left == (long)round * (round + 1) / 2);
            }
        }
    }
    for (int i = 0; i < 3; i++) {
        long n = jobs[i].n;
        assert(jobs[i].total == n * (n + 1) / 2);
        assert(jobs[i].turns == jobs[i].n);
    }

    /*
     * The cost of each arrangement.  solo had S1 to itself: no copy, ever.
     * left and right took S2 from each other in every round both were
     * alive, and each such change saved one and restored the other.
     */
    for (int i = 0; i < 3; i++) {
        const aco_save_stack_t* ss = &cos[i]->save_stack;
        printf("%-5s on %s: saved %zu times, restored %zu times, max copy "
               "%zu bytes\n", jobs[i].name, i == 0 ? "S1" : "S2",
               ss->ct_save, ss->ct_restore, ss->max_cpsz);
    }
    assert(cos[0]->save_stack.ct_save == 0);
    assert(cos[0]->save_stack.ct_restore == 0);
    assert(cos[0]->save_stack.max_cpsz == 0);
    /* S2 changed hands twice a round while both lived (rounds 1-5): left
     * was saved in rounds 1-5 and restored in rounds 2-6, right was saved
     * and restored in rounds 2-5.  From round 6 on, left had S2 alone. */
    assert(cos[1]->save_stack.ct_save == 5);
    assert(cos[1]->save_stack.ct_restore == 5);
    assert(cos[2]->save_stack.ct_save == 4);
    assert(cos[2]->save_stack.ct_restore == 4);
    assert(cos[1]->save_stack.max_cpsz >= 32 * sizeof(int));
    assert(cos[2]->save_stack.max_cpsz >= 32 * sizeof(int));

    for (int i = 0; i < 3; i++) aco_destroy(cos[i]);
    aco_share_stack_destroy(s1);
    aco_share_stack_destroy(s2);
    aco_destroy(main_co);
    free(mailbox);
    return 0;
}
