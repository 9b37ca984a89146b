/*
 * test_aco_tutorial_7.c - a pool of reusable cos: aco_reset2 and aco_new.
 *
 * It proves, with assert(), that a pool of 4 cos, each reset with
 * aco_reset2() for its next request, serves all 40 requests: each one is
 * either answered correctly or cancelled mid-run by resetting its co.
 *
 * A server that runs one co per request would create and destroy a co for
 * every request.  A pool creates a few cos once and, when one has finished
 * its request, gives it the next one with aco_reset2(co, fp, arg): the co
 * goes back to the init state keeping its memory (the aco_t and its save
 * stack, already grown to what such requests need), and its next resume
 * starts fp(arg) from the top.  aco_reset(co) does the same with the same
 * fp and arg.
 *
 * Resetting works on a suspended co too: its request is abandoned on the
 * spot (its frames are discarded; nothing more of it runs).  Here a request
 * that takes longer than its deadline is cancelled that way.
 *
 * Here 4 cos on one share stack serve 40 requests.  Request i needs
 * work(i) steps and yields after each (as if waiting for I/O); requests
 * with a deadline shorter than their work are cancelled.  The program
 * checks that every request was either answered correctly or cancelled,
 * and that no co was created beyond the pool.
 *
 * Copyright 2026 the libaco authors.  Apache License 2.0 (see LICENSE).
 */
#include "aco.h"

#include <stdio.h>
#include <stdlib.h>

#include "aco_assert_override.h"

enum { POOL = 4, REQUESTS = 40 };

struct request {
    int id;
    int work;         /* steps it needs */
    int deadline;     /* resumes it may take before it is cancelled */
    int resumes;      /* resumes so far */
    long answer;      /* set when done */
    int done, cancelled;
};

/* The handler every pooled co runs: sums 1..work, one step per resume. */
static void handle(void) {
    struct request* r = aco_get_arg();
    long sum = 0;
    for (int step = 1; step <= r->work; step++) {
        sum += step;
        aco_yield();          /* "waiting for I/O": main serves the others */
    }
    r->answer = sum;
    r->done = 1;
    aco_exit();
}

int main(void) {
    aco_thread_init(NULL);
    aco_t* main_co = aco_create(NULL, NULL, 0, NULL, NULL);
    aco_share_stack_t* sstk = aco_share_stack_new(0);

    /* aco_new: malloc, aborting with a message if it fails. */
    struct request* req;
    aco_new(req, REQUESTS * sizeof(*req));
    for (int i = 0; i < REQUESTS; i++) {
        req[i] = (struct request){.id = i, .work = 1 + i % 9,
                                  .deadline = i % 7 == 3 ? 4 : 100};
    }

    /* The pool: created once, each with the first requests. */
    aco_t* pool[POOL];
    int next = 0;
    for (int k = 0; k < POOL; k++)
        pool[k] = aco_create(main_co, sstk, 0, handle, &req[next++]);

    int busy = POOL;
    while (busy > 0) {
        for (int k = 0; k < POOL; k++) {
            aco_t* co = pool[k];
            struct request* r = co->arg;
            if (r == NULL) continue;              /* idle: no work left */
            if (r->resumes == r->deadline) {
                r->cancelled = 1;                 /* too slow: abandon it */
            } else {
                aco_resume(co);
                r->resumes++;
                if (!co->is_end) continue;        /* still working */
            }
            /* Finished or cancelled: the co takes the next request. */
            if (next < REQUESTS) {
                aco_reset2(co, handle, &req[next++]);
            } else {
                aco_reset2(co, handle, NULL);     /* parked, idle */
                busy--;
            }
        }
    }

    int answered = 0, cancelled = 0;
    for (int i = 0; i < REQUESTS; i++) {
        const struct request* r = &req[i];
        assert(r->done != r->cancelled);          /* exactly one of them */
        if (r->done) {
            assert(r->answer == (long)r->work * (r->work + 1) / 2);
            answered++;
        } else {
            assert(r->work >= r->deadline);
            cancelled++;
        }
    }
    printf("%d requests: %d answered, %d cancelled, by a pool of %d cos\n",
           REQUESTS, answered, cancelled, POOL);
    for (int k = 0; k < POOL; k++) {
        printf("  co %d: largest copy %zu bytes, saved %zu times\n", k,
               pool[k]->save_stack.max_cpsz, pool[k]->save_stack.ct_save);
        aco_destroy(pool[k]);
    }
    assert(answered + cancelled == REQUESTS && cancelled > 0);

    free(req);
    aco_share_stack_destroy(sstk);
    aco_destroy(main_co);
    return 0;
}
