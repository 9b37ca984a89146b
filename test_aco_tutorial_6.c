/*
 * test_aco_tutorial_6.c - a small round-robin scheduler.
 *
 * It proves, with assert(), that under round-robin every worker ends exactly
 * in the round its work predicts, with its frames' tables intact after every
 * copy between runs, and that every unit of work and every resume is counted.
 *
 * With asymmetric cos, every aco_yield() goes back to the main co, so the
 * main co is the natural place for a scheduler: it keeps the cos that can
 * run in a queue, resumes the first, and when that co yields, puts it at
 * the back (or, if it ended, destroys it).  Real runtimes put cos waiting
 * for I/O or timers aside and queue them again when ready; the loop is the
 * same.
 *
 * Here 24 workers share 3 stacks (8 per stack).  Worker i has a different
 * amount of work, yields after every unit, and does each unit a few calls
 * deep, so the frames libaco copies in and out vary in size.  Round-robin
 * makes the end of each worker predictable: one with s units ends in round
 * s + 1, which the program checks along with the total work done.
 *
 * Copyright 2026 the libaco authors.  Apache License 2.0 (see LICENSE).
 */
#include "aco.h"

#include <stdio.h>
#include <stdlib.h>

#include "aco_assert_override.h"

enum { WORKERS = 24, STACKS = 3 };

struct worker {
    int id;
    int units;       /* work to do */
    int done;        /* units done so far */
    int end_round;   /* scheduler round in which it ended (0: not yet) */
    int finished;    /* set just before its aco_exit() */
};

/* Units done by all workers.  Only one co of a thread runs at a time, so a
 * plain variable is enough; no lock. */
static long total_units;

/* Entry i of worker w's table at call depth `depth`. */
static unsigned table_entry(const struct worker* w, unsigned i, int depth) {
    return (unsigned)w->id * 131u + i * 7u + (unsigned)depth;
}

/* One unit of work, done `depth` calls deep, yielding at the bottom.  Each
 * level keeps a small table that must survive the yield: with 8 workers per
 * stack, the frames are copied out and back between any two runs. */
__attribute__((noinline)) static unsigned unit(struct worker* w, int depth) {
    volatile unsigned table[8];
    for (unsigned i = 0; i < 8; i++) table[i] = table_entry(w, i, depth);
    unsigned sum = 0;
    if (depth == 0) {
        w->done++;
        total_units++;
        aco_yield(); /* the scheduler runs the others meanwhile */
    } else {
        sum = unit(w, depth - 1);
    }
    for (unsigned i = 0; i < 8; i++) {
        assert(table[i] == table_entry(w, i, depth));
        sum += table[i];
    }
    return sum;
}

static void worker_main(void) {
    struct worker* w = aco_get_arg();
    unsigned checksum = 0;
    for (int u = 0; u < w->units; u++) checksum += unit(w, u % 4);
    assert(checksum != 0 && w->done == w->units);
    w->finished = 1;
    aco_exit();
}

/* The run queue: a ring of the cos ready to run. */
struct runq {
    aco_t* slot[WORKERS];
    size_t head, len;
};

static void runq_push(struct runq* q, aco_t* co) {
    assert(q->len < WORKERS);
    q->slot[(q->head + q->len++) % WORKERS] = co;
}

static aco_t* runq_pop(struct runq* q) {
    assert(q->len > 0);
    aco_t* co = q->slot[q->head];
    q->head = (q->head + 1) % WORKERS;
    q->len--;
    return co;
}

int main(void) {
    aco_thread_init(NULL);
    aco_t* main_co = aco_create(NULL, NULL, 0, NULL, NULL);
    aco_share_stack_t* stacks[STACKS];
    for (int s = 0; s < STACKS; s++) stacks[s] = aco_share_stack_new(64 * 1024);

    /* Shared between the cos and main: on the heap (never on a share
     * stack, where another co's frames may sit the next moment). */
    struct worker* w = calloc(WORKERS, sizeof(*w));
    assertalloc_ptr(w);

    struct runq q = {.head = 0, .len = 0};
    long expected_units = 0;
    for (int i = 0; i < WORKERS; i++) {
        w[i].id = i;
        w[i].units = 1 + (i * 7) % 10; /* 1 .. 10 units */
        expected_units += w[i].units;
        runq_push(&q, aco_create(main_co, stacks[i % STACKS], 0, worker_main,
                                 &w[i]));
    }

    /* The scheduler.  A round is one pass over the queue as it stood when
     * the round began. */
    size_t copies = 0, max_copy = 0;
    long resumes = 0;
    for (int round = 1; q.len > 0; round++) {
        size_t in_round = q.len;
        char ended[128] = ""; /* ids of the workers that ended this round */
        size_t len = 0;
        for (size_t k = 0; k < in_round; k++) {
            aco_t* co = runq_pop(&q);
            aco_resume(co);
            resumes++;
            if (!co->is_end) {
                runq_push(&q, co); /* to the back of the line */
                continue;
            }
            struct worker* done = co->arg;
            assert(done->finished && done->done == done->units);
            done->end_round = round;
            len += (size_t)snprintf(ended + len, sizeof(ended) - len, " %d",
                                    done->id);
            assert(len < sizeof(ended));
            /* Its statistics die with it: collect them first. */
            copies += co->save_stack.ct_save + co->save_stack.ct_restore;
            if (co->save_stack.max_cpsz > max_copy)
                max_copy = co->save_stack.max_cpsz;
            aco_destroy(co);
        }
        printf("round %2d: %2zu runnable%s%s\n", round, in_round,
               len > 0 ? ", ended:" : "", ended);
    }

    /* Every worker ran to its end, at the round round-robin promises. */
    long expected_resumes = 0;
    for (int i = 0; i < WORKERS; i++) {
        assert(w[i].finished && w[i].done == w[i].units);
        assert(w[i].end_round == w[i].units + 1);
        expected_resumes += w[i].units + 1; /* a yield per unit, then exit */
    }
    assert(total_units == expected_units);
    assert(resumes == expected_resumes);
    printf("%d workers, %ld units of work, %ld resumes, %zu stack copies, "
           "largest %zu bytes\n", WORKERS, total_units, resumes, copies,
           max_copy);
    assert(copies > 0 && max_copy > 0);

    free(w);
    for (int s = 0; s < STACKS; s++) aco_share_stack_destroy(stacks[s]);
    aco_destroy(main_co);
    return 0;
}
