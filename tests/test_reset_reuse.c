/*
 * test_reset_reuse.c - aco_reset() and aco_reset2() put a co back into the
 * init state from any state, reusing its memory: its next resume runs the
 * co function from the top, nothing of a discarded run ever runs or is
 * copied again, and it starts with the FP control state aco_thread_init()
 * captured.
 *
 * The rules checked (aco.h):
 *   - After a reset the next aco_resume() runs the co function from the top
 *     again, with the same aco_t, share stack and save-stack buffer, for a
 *     co that ended, one suspended (its frames are discarded: no more of
 *     its code runs, nothing of it is saved or restored), one suspended
 *     while owning its share stack (the stack then has no owner) and one
 *     still in the init state.
 *   - main_co, share_stack, fp, arg and the statistics survive a reset;
 *     aco_reset2() replaces fp and arg.
 *   - A reset co starts with the FP control state aco_thread_init()
 *     captured (per co unless ACO_CONFIG_SHARE_FPU_MXCSR_ENV).
 *   - Another co of the same thread may reset a co; a pool of reusable cos
 *     runs many tasks with no co created after the pool.
 * (The misuse of aco_reset and aco_new's failure are test_reset's.)
 */
#include "aco_test.h"

#include <fenv.h>

static aco_t* main_co;

/* ------------------------------------------------------------------------ */
/* A co that counts its starts and keeps patterned frames across yields.   */
/* ------------------------------------------------------------------------ */

struct job {
    int starts;           /* times the co function began */
    int finishes;         /* times it reached aco_exit() */
    int yields;           /* yields per run, at the bottom of the dive */
    int depth;            /* frames between the function and its yields */
    int steps;            /* yields done in the current run */
    int after_reset_bad;  /* a discarded run resumed anyway */
    int bad;              /* patterns that did not survive a yield */
    uint32_t seed;
    int round_mode;       /* fegetround() at the function's start */
};

static unsigned char pat(uint32_t seed, size_t i) {
    return (unsigned char)(seed * 2654435761u + i * 37u);
}

__attribute__((noinline)) static void dive(struct job* j, int depth,
                                           int run) {
    volatile unsigned char buf[160];
    for (size_t i = 0; i < sizeof(buf); i++) buf[i] = pat(j->seed + (uint32_t)depth, i);
    if (depth > 0) {
        dive(j, depth - 1, run);
    } else {
        while (j->steps < j->yields) {
            aco_yield();
            /* A reset discards this run: it must never come back here. */
            if (j->starts != run) j->after_reset_bad++;
            j->steps++;
        }
    }
    for (size_t i = 0; i < sizeof(buf); i++)
        if (buf[i] != pat(j->seed + (uint32_t)depth, i)) j->bad++;
}

static void co_job(void) {
    struct job* j = aco_get_arg();
    int run = ++j->starts;
    j->round_mode = fegetround();
    j->steps = 0;
    dive(j, j->depth, run);
    j->finishes++;
    aco_exit();
}

/* Resume until it ends; returns the number of resumes. */
static int run_to_end(aco_t* co) {
    int n = 0;
    while (!co->is_end) {
        aco_resume(co);
        n++;
    }
    return n;
}

/* ------------------------------------------------------------------------ */

static void test_reset_ended(void) {
    aco_share_stack_t* s = aco_share_stack_new(64 * 1024);
    struct job j = {.yields = 3, .depth = 4, .seed = 7};
    aco_t* co = aco_create(main_co, s, 0, co_job, &j);
    ASSERT_EQ(run_to_end(co), 4);
    ASSERT_EQ(j.starts, 1);
    ASSERT_EQ(j.finishes, 1);
    /* Alone on its stack it is never copied: with the default size its
     * save stack is never even allocated.  Whatever it has, it keeps. */
    void* save_buf = co->save_stack.ptr;
    size_t save_sz = co->save_stack.sz;

    for (int round = 2; round <= 5; round++) {
        aco_reset(co);
        ASSERT_EQ(co->is_end, 0);
        ASSERT_EQ(j.starts, round - 1);       /* reset runs nothing */
        ASSERT_PTR_EQ(co->main_co, main_co);
        ASSERT_PTR_EQ(co->share_stack, s);
        ASSERT_PTR_EQ(co->arg, &j);
        CHECK(co->fp == co_job);
        ASSERT_PTR_EQ(co->save_stack.ptr, save_buf);   /* memory reused */
        ASSERT_EQ(co->save_stack.sz, save_sz);
        ASSERT_EQ(run_to_end(co), 4);
        ASSERT_EQ(j.starts, round);
        ASSERT_EQ(j.finishes, round);
    }
    ASSERT_EQ(j.bad + j.after_reset_bad, 0);
    /* Alone on its stack: never copied, resets or not. */
    ASSERT_EQ(co->save_stack.ct_save + co->save_stack.ct_restore, 0);
    aco_destroy(co);
    aco_share_stack_destroy(s);
}

/* Two cos on one stack: A suspended deep and evicted (bytes saved), B the
 * owner.  Resetting A drops its saved bytes; resetting the owner B leaves
 * the stack without an owner, so nothing of B is saved afterwards. */
static void test_reset_suspended(void) {
    aco_share_stack_t* s = aco_share_stack_new(64 * 1024);
    struct job ja = {.yields = 5, .depth = 6, .seed = 11};
    struct job jb = {.yields = 5, .depth = 3, .seed = 22};
    aco_t* a = aco_create(main_co, s, 0, co_job, &ja);
    aco_t* b = aco_create(main_co, s, 0, co_job, &jb);

    aco_resume(a);                 /* A yields at depth 6 */
    aco_resume(b);                 /* A evicted: saved */
    ASSERT_EQ(a->save_stack.ct_save, 1);
    CHECK(a->save_stack.valid_sz > 6 * 160);
    size_t a_max = a->save_stack.max_cpsz;
    ASSERT_PTR_EQ(s->owner, b);

    /* Reset the evicted A: it starts over; its saved frames are not
     * restored (ct_restore stays 0); B, the owner, is saved as usual. */
    void* a_buf = a->save_stack.ptr;
    size_t a_cap = a->save_stack.sz;
    CHECK(a_buf != NULL);
    aco_reset(a);
    ASSERT_EQ(a->save_stack.valid_sz, 0);
    ASSERT_PTR_EQ(a->save_stack.ptr, a_buf);    /* the buffer is kept */
    ASSERT_EQ(a->save_stack.sz, a_cap);
    ASSERT_EQ(a->save_stack.ct_save, 1);        /* statistics kept */
    ASSERT_EQ(a->save_stack.max_cpsz, a_max);
    ASSERT_PTR_EQ(s->owner, b);                 /* not A's to give up */
    aco_resume(a);
    ASSERT_EQ(ja.starts, 2);
    ASSERT_EQ(a->save_stack.ct_restore, 0);
    ASSERT_EQ(b->save_stack.ct_save, 1);
    ASSERT_PTR_EQ(s->owner, a);

    /* Reset the owner A (suspended, its frames on the stack): the stack is
     * left without an owner, and B comes back without A being saved. */
    aco_reset(a);
    ASSERT_PTR_EQ(s->owner, NULL);
    aco_resume(b);
    ASSERT_EQ(a->save_stack.ct_save, 1);        /* not saved again */
    ASSERT_EQ(b->save_stack.ct_restore, 1);
    ASSERT_PTR_EQ(s->owner, b);
    ASSERT_EQ(jb.starts, 1);
    ASSERT_EQ(jb.steps, 1);

    /* Both run to their ends; every frame that was not discarded came back
     * intact, and no discarded run continued. */
    ASSERT_EQ(run_to_end(b), 4);             /* its yields 2..5, then the end */
    ASSERT_EQ(run_to_end(a), 6);             /* all of a fresh run */
    ASSERT_EQ(ja.starts, 3);
    ASSERT_EQ(ja.finishes, 1);
    ASSERT_EQ(jb.finishes, 1);
    ASSERT_EQ(ja.bad + jb.bad + ja.after_reset_bad + jb.after_reset_bad, 0);

    /* An init co: a reset changes nothing. */
    struct job jc = {.yields = 1, .depth = 0, .seed = 33};
    aco_t* c = aco_create(main_co, s, 0, co_job, &jc);
    aco_reset(c);
    aco_reset(c);
    ASSERT_EQ(jc.starts, 0);
    ASSERT_EQ(run_to_end(c), 2);
    ASSERT_EQ(jc.starts, 1);
    ASSERT_EQ(jc.finishes, 1);

    aco_destroy(a);
    aco_destroy(b);
    aco_destroy(c);
    aco_share_stack_destroy(s);   /* co_ct: every co accounted for */
}

/* ------------------------------------------------------------------------ */

static int second_fn_runs;

static void co_second(void) {
    int* p = aco_get_arg();
    (*p)++;
    second_fn_runs++;
    aco_yield();
    (*p) += 10;
    aco_exit();
}

/* aco_reset2: another function and argument, from the init, suspended and
 * ended states. */
static void test_reset2(void) {
    aco_share_stack_t* s = aco_share_stack_new2(32 * 1024, 0);
    struct job j = {.yields = 2, .depth = 2, .seed = 5};
    aco_t* co = aco_create(main_co, s, 0, co_job, &j);
    int x = 0, y = 100;

    aco_reset2(co, co_second, &x);           /* init state */
    CHECK(co->fp == co_second);
    ASSERT_PTR_EQ(co->arg, &x);
    ASSERT_EQ(run_to_end(co), 2);
    ASSERT_EQ(x, 11);
    ASSERT_EQ(j.starts, 0);                  /* co_job never ran */

    aco_reset2(co, co_job, &j);              /* ended */
    aco_resume(co);                          /* suspended in co_job */
    ASSERT_EQ(j.starts, 1);
    aco_reset2(co, co_second, &y);           /* suspended */
    ASSERT_EQ(run_to_end(co), 2);
    ASSERT_EQ(y, 111);
    ASSERT_EQ(j.finishes, 0);
    ASSERT_EQ(j.after_reset_bad, 0);
    /* aco_reset keeps what aco_reset2 set. */
    aco_reset(co);
    CHECK(co->fp == co_second);
    ASSERT_PTR_EQ(co->arg, &y);
    ASSERT_EQ(run_to_end(co), 2);
    ASSERT_EQ(y, 122);
    ASSERT_EQ(second_fn_runs, 3);
    aco_destroy(co);
    aco_share_stack_destroy(s);
}

/* ------------------------------------------------------------------------ */
/* A co resets a sibling (allowed: same thread, not running).               */
/* ------------------------------------------------------------------------ */

static aco_t* sibling;

static void co_resetter(void) {
    aco_reset(sibling);
    aco_exit();
}

static void test_reset_by_co(void) {
    aco_share_stack_t* s = aco_share_stack_new(64 * 1024);
    struct job j = {.yields = 4, .depth = 5, .seed = 99};
    sibling = aco_create(main_co, s, 0, co_job, &j);
    aco_t* r = aco_create(main_co, s, 0, co_resetter, NULL);
    aco_resume(sibling);                     /* suspended, owner */
    aco_resume(r);                           /* evicts it, then resets it */
    ASSERT_EQ(r->is_end, 1);
    ASSERT_EQ(sibling->save_stack.valid_sz, 0);
    ASSERT_EQ(run_to_end(sibling), 5);
    ASSERT_EQ(j.starts, 2);
    ASSERT_EQ(j.finishes, 1);
    ASSERT_EQ(j.bad + j.after_reset_bad, 0);
    ASSERT_EQ(sibling->save_stack.ct_restore, 0);
    aco_destroy(sibling);
    aco_destroy(r);
    aco_share_stack_destroy(s);
}

/* ------------------------------------------------------------------------ */
/* FP control state: a reset co starts with what aco_thread_init captured. */
/* ------------------------------------------------------------------------ */

static void co_round(void) {
    struct job* j = aco_get_arg();
    j->round_mode = fegetround();
    j->starts++;
    CHECK(fesetround(FE_UPWARD) == 0);
    aco_yield();
    aco_exit();
}

static void test_reset_fpenv(void) {
    aco_share_stack_t* s = aco_share_stack_new(64 * 1024);
    struct job j = {0};
    aco_t* co = aco_create(main_co, s, 0, co_round, &j);
    ASSERT_EQ(fegetround(), FE_TONEAREST);   /* what aco_thread_init saw */
    CHECK(fesetround(FE_DOWNWARD) == 0);     /* main's own mode now */
    aco_resume(co);                          /* co switches to upward */
    aco_reset(co);                           /* suspended with upward */
    aco_resume(co);
    ASSERT_EQ(j.starts, 2);
#ifndef ACO_CONFIG_SHARE_FPU_MXCSR_ENV
    ASSERT_EQ(j.round_mode, FE_TONEAREST);   /* the captured mode again */
    ASSERT_EQ(fegetround(), FE_DOWNWARD);    /* main kept its own */
#else
    ASSERT_EQ(j.round_mode, FE_UPWARD);      /* one mode for the thread */
    ASSERT_EQ(fegetround(), FE_UPWARD);
#endif
    aco_resume(co);
    ASSERT_EQ(co->is_end, 1);
    CHECK(fesetround(FE_TONEAREST) == 0);
    aco_destroy(co);
    aco_share_stack_destroy(s);
}

/* ------------------------------------------------------------------------ */
/* A pool: K cos run T tasks, each co reset for its next task.              */
/* ------------------------------------------------------------------------ */

struct task {
    uint32_t n;           /* sum 1..n in steps, yielding between them */
    uint64_t sum;
    int done;
};

static void co_task(void) {
    struct task* t = aco_get_arg();
    uint64_t sum = 0;
    for (uint32_t i = 1; i <= t->n; i++) {
        volatile uint32_t frame[8] = {i, i, i, i, i, i, i, i};
        sum += frame[i % 8];
        if (i % 3 == 0) aco_yield();
    }
    t->sum = sum;
    t->done = 1;
    aco_exit();
}

static void test_pool(void) {
    enum { K = 4, T = 200 };
    aco_share_stack_t* s = aco_share_stack_new(0);
    static struct task tasks[T];
    aco_t* pool[K];
    int next = 0, running = 0;
    for (int i = 0; i < T; i++) tasks[i] = (struct task){.n = 1 + (uint32_t)(i * 7) % 40};
    /* Created once, with the first tasks; reset for every later one. */
    for (int k = 0; k < K; k++) pool[k] = aco_create(main_co, s, 0, co_task, &tasks[next++]);
    running = K;
    aco_t* created[K];
    for (int k = 0; k < K; k++) created[k] = pool[k];
    while (running > 0) {
        for (int k = 0; k < K; k++) {
            aco_t* co = pool[k];
            if (co->is_end) continue;
            aco_resume(co);
            if (co->is_end) {
                if (next < T) aco_reset2(co, co_task, &tasks[next++]);
                else running--;
            }
        }
    }
    for (int i = 0; i < T; i++) {
        uint64_t n = tasks[i].n;
        CHECK(tasks[i].done);
        ASSERT_EQ(tasks[i].sum, n * (n + 1) / 2);
    }
    size_t saves = 0;
    for (int k = 0; k < K; k++) {
        ASSERT_PTR_EQ(pool[k], created[k]);
        saves += pool[k]->save_stack.ct_save;
        aco_destroy(pool[k]);
    }
    CHECK(saves > 0);                        /* they did share the stack */
    printf("pool: %d cos ran %d tasks, %zu saves\n", K, T, saves);
    aco_share_stack_destroy(s);
}

int main(void) {
    CHECK(fesetround(FE_TONEAREST) == 0);
    aco_thread_init(NULL);
    main_co = aco_create(NULL, NULL, 0, NULL, NULL);

    test_reset_ended();
    test_reset_suspended();
    test_reset2();
    test_reset_by_co();
    test_reset_fpenv();
    test_pool();

    aco_destroy(main_co);
    printf("test_reset_reuse: OK\n");
    return 0;
}
