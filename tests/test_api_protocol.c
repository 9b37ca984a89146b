/*
 * test_api_protocol.c - the resume/yield/exit protocol and the exact lazy
 * save/restore bookkeeping.
 *
 * The rules checked (aco.h, aco.c):
 *   - aco_resume(co) runs co until its next aco_yield()/aco_exit(), exactly
 *     once per call; aco_get_co()/aco_get_arg() name the running co; the
 *     fields a program may read (main_co, arg, fp, share_stack, is_end) say
 *     what aco_create() was given.
 *   - A share stack's owner is the co whose frames are on it.  Resuming a co
 *     that is not the owner first copies the owner's live bytes to the
 *     owner's save stack (ct_save++, max_cpsz updated), then copies the
 *     resumed co's saved bytes back (ct_restore++), each only if there are
 *     bytes to copy.  aco_exit() and aco_destroy() of the owner leave the
 *     stack without an owner, so the next co saves nobody.
 *   - A co alone on its share stack never copies anything.
 * Every count below is predicted by a small model of those rules (or spelled
 * out step by step) and compared exactly.
 */
#include "aco_test.h"

/* The statistics are size_t: printing them with %zu must be right (the
 * build uses -Wall -Werror, so printf format checking enforces it too). */
#define IS_SIZE_T(x) _Generic((x), size_t: 1, default: 0)
_Static_assert(IS_SIZE_T(((aco_t*)0)->save_stack.max_cpsz), "max_cpsz: size_t");
_Static_assert(IS_SIZE_T(((aco_t*)0)->save_stack.ct_save), "ct_save: size_t");
_Static_assert(IS_SIZE_T(((aco_t*)0)->save_stack.ct_restore), "ct_restore: size_t");
_Static_assert(IS_SIZE_T(((aco_share_stack_t*)0)->sz), "share_stack.sz: size_t");

static aco_t* main_co;

#define EXPECT_COUNTS(co, save, restore)                                      \
    do {                                                                      \
        ASSERT_EQ((co)->save_stack.ct_save, (save));                          \
        ASSERT_EQ((co)->save_stack.ct_restore, (restore));                    \
    } while (0)

/* Deterministic, cheap pseudo-random numbers (no libc state). */
static uint32_t rng_next(uint32_t* s) {
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

static unsigned char pattern_byte(uint32_t seed, size_t i) {
    return (unsigned char)(seed * 2654435761u + i * 131u + (i >> 8));
}

static void fill(volatile unsigned char* p, size_t n, uint32_t seed) {
    for (size_t i = 0; i < n; i++) p[i] = pattern_byte(seed, i);
}

static int intact(const volatile unsigned char* p, size_t n, uint32_t seed) {
    for (size_t i = 0; i < n; i++)
        if (p[i] != pattern_byte(seed, i)) return 0;
    return 1;
}

/* ------------------------------------------------------------------------ */
/* 1. Identity and fields; a generator on a standalone stack never copies.  */
/* ------------------------------------------------------------------------ */

struct gen {
    aco_t* self;          /* set by main after aco_create */
    long limit;           /* values to produce before exiting */
    long produced;
    uint64_t value;
    int wrong_identity;   /* counts failed identity checks inside the co */
    int after_exit;       /* set if code after aco_exit() ever ran */
};

static void co_fibonacci(void) {
    struct gen* g = aco_get_arg();
    /* A local array keeps the frame non-trivial: still nothing is copied
     * because no other co ever takes this stack. */
    volatile unsigned char scratch[2048];
    fill(scratch, sizeof(scratch), 7);
    uint64_t a = 0, b = 1;
    for (long i = 0; i < g->limit; i++) {
        if (aco_get_co() != g->self || aco_get_arg() != g ||
            aco_is_main_co(aco_get_co()) || aco_get_co()->is_end ||
            aco_get_co()->main_co != main_co)
            g->wrong_identity++;
        g->value = a;
        g->produced++;
        aco_yield();
        uint64_t t = a + b;
        a = b;
        b = t;
    }
    CHECK(intact(scratch, sizeof(scratch), 7));
    aco_exit();
    g->after_exit = 1;
}

static void test_standalone_generator(void) {
    aco_share_stack_t* sstk = aco_share_stack_new(64 * 1024);
    struct gen g = {0};
    g.limit = aco_test_scale(20000, 100);
    aco_t* co = aco_create(main_co, sstk, 0, co_fibonacci, &g);
    g.self = co;

    CHECK(co != NULL);
    CHECK(!aco_is_main_co(co));
    ASSERT_PTR_EQ(co->main_co, main_co);
    ASSERT_PTR_EQ(co->share_stack, sstk);
    ASSERT_PTR_EQ(co->arg, &g);
    CHECK(co->fp == co_fibonacci);
    ASSERT_EQ(co->is_end, 0);
    ASSERT_EQ(g.produced, 0);            /* "init": fp not called yet */
    ASSERT_PTR_EQ(sstk->owner, NULL);

    uint64_t a = 0, b = 1;
    for (long i = 0; i < g.limit; i++) {
        aco_resume(co);
        ASSERT_EQ(g.produced, i + 1);     /* exactly one step per resume */
        CHECK(g.value == a);
        ASSERT_EQ(co->is_end, 0);
        ASSERT_PTR_EQ(aco_get_co(), main_co);
        ASSERT_PTR_EQ(sstk->owner, co);
        uint64_t t = a + b;
        a = b;
        b = t;
    }
    aco_resume(co);                       /* runs to aco_exit() */
    ASSERT_EQ(co->is_end, 1);
    ASSERT_EQ(g.produced, g.limit);
    ASSERT_EQ(g.wrong_identity, 0);
    ASSERT_EQ(g.after_exit, 0);
    ASSERT_PTR_EQ(sstk->owner, NULL);
    ASSERT_PTR_EQ(aco_get_co(), main_co);

    /* Standalone: g.limit + 1 resumes, not one copy. */
    EXPECT_COUNTS(co, 0, 0);
    ASSERT_EQ(co->save_stack.max_cpsz, 0);
    printf("standalone: %ld resumes, ct_save %zu, ct_restore %zu, max_cpsz %zu\n",
           g.limit + 1, co->save_stack.ct_save, co->save_stack.ct_restore,
           co->save_stack.max_cpsz);

    aco_destroy(co);
    aco_share_stack_destroy(sstk);
}

/* ------------------------------------------------------------------------ */
/* Workers: cos that keep patterned locals at a chosen depth across yields.  */
/* ------------------------------------------------------------------------ */

#define FRAME_BYTES 200

struct worker {
    aco_t* self;
    uint32_t seed;        /* pattern seed, changed by the worker every round */
    size_t big;           /* bytes of the patterned array in the co function */
    int depth;            /* frames of FRAME_BYTES below it at the next yield */
    int rounds_left;      /* yields left; then aco_exit() from a nested call */
    int rounds_done;
    uintptr_t low_addr;   /* lowest patterned byte at the last yield */
    int bad;              /* identity or pattern failures seen inside */
    int after_exit;
};

__attribute__((noinline)) static void worker_finish(struct worker* w) {
    aco_exit();
    w->after_exit = 1;
}

/* Recurse `depth` frames, each with its own patterned buffer, then yield at
 * the bottom; on the way back every buffer must still hold its pattern. */
__attribute__((noinline)) static void worker_dive(struct worker* w, int depth,
                                                  uint32_t seed) {
    volatile unsigned char buf[aco_test_vla(FRAME_BYTES)];  /* VLA: aco_test.h */
    fill(buf, sizeof(buf), seed + (uint32_t)depth);
    if (depth > 0) {
        worker_dive(w, depth - 1, seed);
    } else {
        w->low_addr = (uintptr_t)buf;
        aco_yield();
        if (aco_get_co() != w->self || aco_get_arg() != w) w->bad++;
    }
    if (!intact(buf, sizeof(buf), seed + (uint32_t)depth)) w->bad++;
}

static void co_worker(void) {
    struct worker* w = aco_get_arg();
    /* A VLA: its size comes from main, so the compiler cannot shrink it. */
    volatile unsigned char big[w->big];
    while (w->rounds_left > 0) {
        uint32_t seed = w->seed;
        fill(big, w->big, seed);
        w->low_addr = (uintptr_t)big;
        if (w->depth > 0)
            worker_dive(w, w->depth, seed ^ 0x5a5a5a5au);
        else
            aco_yield();
        if (aco_get_co() != w->self || aco_get_co()->is_end) w->bad++;
        if (!intact(big, w->big, seed)) w->bad++;
        w->rounds_left--;
        w->rounds_done++;
        w->seed = seed * 7u + 1u;
    }
    worker_finish(w);
}

static aco_t* new_worker(aco_share_stack_t* sstk, size_t save_sz,
                         struct worker* w, uint32_t seed, size_t big,
                         int rounds) {
    memset(w, 0, sizeof(*w));
    w->seed = seed;
    w->big = big;
    w->rounds_left = rounds;
    aco_t* co = aco_create(main_co, sstk, save_sz, co_worker, w);
    w->self = co;
    ASSERT_PTR_EQ(co->share_stack, sstk);
    ASSERT_PTR_EQ(co->main_co, main_co);
    ASSERT_PTR_EQ(co->arg, w);
    CHECK(co->fp == co_worker);
    CHECK(!aco_is_main_co(co));
    EXPECT_COUNTS(co, 0, 0);
    ASSERT_EQ(co->save_stack.max_cpsz, 0);
    return co;
}

/* The live bytes of a worker suspended at its last yield reach from below
 * low_addr up to the top of the share stack (align_retptr, within 24 bytes
 * of ptr + sz), so a save copies at least this much. */
static size_t min_live_bytes(const aco_share_stack_t* s, const struct worker* w) {
    uintptr_t top = (uintptr_t)s->ptr + s->sz - 24;
    CHECK(w->low_addr >= (uintptr_t)s->ptr && w->low_addr < top);
    return top - w->low_addr;
}

/* ------------------------------------------------------------------------ */
/* 2. Two cos alternating on one stack: every count, step by step.          */
/* ------------------------------------------------------------------------ */

static void test_two_alternating(void) {
    aco_share_stack_t* sstk = aco_share_stack_new(128 * 1024);
    struct worker wa, wb;
    const size_t big_a = 1500, big_b = 3000;
    aco_t* a = new_worker(sstk, 0, &wa, 11, big_a, 3);
    aco_t* b = new_worker(sstk, 0, &wb, 22, big_b, 3);

    /* A starts: nobody owned the stack, A had nothing saved. */
    aco_resume(a);
    ASSERT_EQ(wa.rounds_done, 0);
    ASSERT_PTR_EQ(sstk->owner, a);
    EXPECT_COUNTS(a, 0, 0);
    EXPECT_COUNTS(b, 0, 0);

    /* A again: it owns the stack, nothing moves. */
    aco_resume(a);
    ASSERT_EQ(wa.rounds_done, 1);
    EXPECT_COUNTS(a, 0, 0);

    /* B starts: A is saved, B has nothing to restore. */
    aco_resume(b);
    ASSERT_PTR_EQ(sstk->owner, b);
    EXPECT_COUNTS(a, 1, 0);
    EXPECT_COUNTS(b, 0, 0);
    CHECK(a->save_stack.max_cpsz >= big_a);
    CHECK(a->save_stack.max_cpsz >= min_live_bytes(sstk, &wa));
    /* Not more than A's frames plus the yield's own small frames. */
    CHECK(a->save_stack.max_cpsz <= min_live_bytes(sstk, &wa) + 2048);
    CHECK(a->save_stack.sz >= a->save_stack.max_cpsz);
    ASSERT_EQ(b->save_stack.max_cpsz, 0);

    /* A: B saved, A restored; A's locals survived the eviction. */
    aco_resume(a);
    ASSERT_PTR_EQ(sstk->owner, a);
    ASSERT_EQ(wa.rounds_done, 2);
    ASSERT_EQ(wa.bad, 0);
    EXPECT_COUNTS(a, 1, 1);
    EXPECT_COUNTS(b, 1, 0);
    CHECK(b->save_stack.max_cpsz >= big_b);
    CHECK(b->save_stack.max_cpsz >= min_live_bytes(sstk, &wb));

    /* B: A saved again, B restored. */
    aco_resume(b);
    ASSERT_EQ(wb.rounds_done, 1);
    EXPECT_COUNTS(a, 2, 1);
    EXPECT_COUNTS(b, 1, 1);

    /* B twice more: it owns the stack; the second runs it to aco_exit(),
     * which leaves the stack without an owner. */
    aco_resume(b);
    ASSERT_EQ(wb.rounds_done, 2);
    ASSERT_EQ(b->is_end, 0);
    aco_resume(b);
    ASSERT_EQ(wb.rounds_done, 3);
    ASSERT_EQ(b->is_end, 1);
    ASSERT_EQ(wb.after_exit, 0);
    ASSERT_PTR_EQ(sstk->owner, NULL);
    EXPECT_COUNTS(b, 1, 1);

    /* A: nobody to save (B ended), A restored. */
    aco_resume(a);
    ASSERT_EQ(wa.rounds_done, 3);
    ASSERT_EQ(a->is_end, 1);
    ASSERT_EQ(wa.after_exit, 0);
    EXPECT_COUNTS(a, 2, 2);
    EXPECT_COUNTS(b, 1, 1);
    ASSERT_EQ(wa.bad, 0);
    ASSERT_EQ(wb.bad, 0);
    ASSERT_PTR_EQ(sstk->owner, NULL);
    ASSERT_PTR_EQ(aco_get_co(), main_co);

    printf("two on one stack: A saved %zu/restored %zu (max %zu B), "
           "B saved %zu/restored %zu (max %zu B)\n",
           a->save_stack.ct_save, a->save_stack.ct_restore,
           a->save_stack.max_cpsz, b->save_stack.ct_save,
           b->save_stack.ct_restore, b->save_stack.max_cpsz);

    aco_destroy(a);
    aco_destroy(b);
    aco_share_stack_destroy(sstk);
}

/* ------------------------------------------------------------------------ */
/* 3. Many cos, random schedule and depths, counts predicted by a model.    */
/* ------------------------------------------------------------------------ */

#define NCO 6

struct model {
    int owner;            /* index of the co on the stack, -1 for none */
    int saved[NCO];       /* has bytes in its save stack */
    size_t ct_save[NCO], ct_restore[NCO];
};

static void model_resume(struct model* m, int i, int ends) {
    if (m->owner != i) {
        if (m->owner >= 0) {
            m->ct_save[m->owner]++;
            m->saved[m->owner] = 1;
        }
        if (m->saved[i]) m->ct_restore[i]++;
        m->owner = i;
    }
    if (ends) m->owner = -1;
}

static void test_random_schedule(void) {
    aco_share_stack_t* sstk = aco_share_stack_new(256 * 1024);
    struct worker w[NCO];
    aco_t* co[NCO];
    struct model m = {.owner = -1};
    uint32_t rng = 0x1234567u;
    int live = NCO;
    long steps = 0;
    const int rounds = (int)aco_test_scale(300, 30);

    for (int i = 0; i < NCO; i++) {
        size_t big = 64 + (size_t)(rng_next(&rng) % 4000);
        int yields = rounds + (int)(rng_next(&rng) % 50);
        co[i] = new_worker(sstk, 1 + (size_t)i * 40, &w[i], 1000u + (uint32_t)i,
                           big, yields);
    }
    int started[NCO] = {0};
    while (live > 0) {
        int i = (int)(rng_next(&rng) % NCO);
        if (co[i]->is_end) continue;
        /* Each round yields at a different depth: evicted frames of
         * different sizes go out and come back at the same addresses. */
        w[i].depth = (int)(rng_next(&rng) % 12);
        /* The first resume starts a worker (it yields before its first
         * round); every later one finishes a round, the last by exiting. */
        int ends = started[i] && w[i].rounds_left == 1;
        int done_before = w[i].rounds_done;
        size_t max_before = co[i]->save_stack.max_cpsz;
        int owner_before = m.owner;

        aco_resume(co[i]);
        model_resume(&m, i, ends);
        steps++;

        ASSERT_EQ(co[i]->is_end, ends);
        ASSERT_EQ(w[i].rounds_done, done_before + started[i]);
        started[i] = 1;
        /* Only evicting a co copies its frames, never resuming it. */
        ASSERT_EQ(co[i]->save_stack.max_cpsz, max_before);
        for (int j = 0; j < NCO; j++) {
            EXPECT_COUNTS(co[j], m.ct_save[j], m.ct_restore[j]);
            ASSERT_EQ(w[j].bad, 0);
        }
        /* The evicted co's copy covered its patterned locals. */
        if (owner_before >= 0 && owner_before != i) {
            aco_t* ev = co[owner_before];
            CHECK(ev->save_stack.max_cpsz >= min_live_bytes(sstk, &w[owner_before]));
            CHECK(ev->save_stack.sz >= ev->save_stack.max_cpsz);
        }
        if (ends) {
            live--;
            ASSERT_EQ(w[i].after_exit, 0);
            ASSERT_PTR_EQ(sstk->owner, NULL);
        } else {
            ASSERT_PTR_EQ(sstk->owner, co[i]);
        }
    }
    size_t total_save = 0, total_restore = 0;
    for (int i = 0; i < NCO; i++) {
        total_save += co[i]->save_stack.ct_save;
        total_restore += co[i]->save_stack.ct_restore;
        aco_destroy(co[i]);
    }
    printf("random schedule: %ld resumes of %d cos, %zu saves, %zu restores\n",
           steps, NCO, total_save, total_restore);
    CHECK(total_save > 0 && total_restore > 0);
    aco_share_stack_destroy(sstk);
}

/* ------------------------------------------------------------------------ */
/* 4. Round robin: closed-form counts.                                      */
/* ------------------------------------------------------------------------ */

static void test_round_robin(void) {
    enum { K = 4 };
    const int rounds = (int)aco_test_scale(500, 25);
    aco_share_stack_t* sstk = aco_share_stack_new(64 * 1024);
    struct worker w[K];
    aco_t* co[K];
    for (int i = 0; i < K; i++)
        co[i] = new_worker(sstk, 0, &w[i], 77u * (uint32_t)i, 256, rounds);
    /* Round r (1-based) of resumes: co i saves its predecessor and, from
     * round 2 on, restores itself. */
    for (int r = 1; r <= rounds; r++) {
        for (int i = 0; i < K; i++) {
            aco_resume(co[i]);
            ASSERT_EQ(co[i]->save_stack.ct_restore, r - 1);
            int prev = (i + K - 1) % K;
            if (r > 1 || i > 0)
                ASSERT_EQ(co[prev]->save_stack.ct_save, i > 0 ? r : r - 1);
        }
    }
    for (int i = 0; i < K; i++) {
        EXPECT_COUNTS(co[i], i < K - 1 ? rounds : rounds - 1, rounds - 1);
    }
    /* One more round: each runs to its end.  Only co 0 has someone to save
     * (co K-1); after that every exit leaves the stack free. */
    for (int i = 0; i < K; i++) {
        aco_resume(co[i]);
        ASSERT_EQ(co[i]->is_end, 1);
        ASSERT_PTR_EQ(sstk->owner, NULL);
    }
    for (int i = 0; i < K; i++) {
        EXPECT_COUNTS(co[i], rounds, rounds);
        ASSERT_EQ(w[i].rounds_done, rounds);
        ASSERT_EQ(w[i].bad, 0);
        aco_destroy(co[i]);
    }
    aco_share_stack_destroy(sstk);
}

/* ------------------------------------------------------------------------ */
/* 5. Save stacks grow on demand from a tiny initial size.                  */
/* ------------------------------------------------------------------------ */

static void test_save_stack_growth(void) {
    aco_share_stack_t* sstk = aco_share_stack_new(64 * 1024);
    struct worker wg, wo;
    /* Initial save stack of 1 byte; the other co takes the stack each time. */
    aco_t* g = new_worker(sstk, 1, &wg, 5, 64, 10);
    aco_t* o = new_worker(sstk, 0, &wo, 6, 64, 10);
    ASSERT_EQ(g->save_stack.sz, 8);       /* rounded up to the 8-byte step */
    CHECK(g->save_stack.ptr != NULL);     /* an initial size is allocated now */
    ASSERT_EQ(o->save_stack.sz, 0);       /* 0: allocated when first needed */
    CHECK(o->save_stack.ptr == NULL);

    const int depths[] = {0, 5, 20, 40};  /* ~0.2, 1, 4, 8 KiB deep */
    size_t prev_max = 0, prev_sz = 8;
    for (int k = 0; k < 4; k++) {
        wg.depth = depths[k];
        aco_resume(g);
        aco_resume(o);                    /* evicts g: copies its frames */
        size_t live = min_live_bytes(sstk, &wg);
        printf("save stack growth: depth %d: copied %zu bytes (live >= %zu), "
               "save stack now %zu bytes\n", depths[k], g->save_stack.max_cpsz,
               live, (size_t)g->save_stack.sz);
        CHECK(g->save_stack.max_cpsz >= live);
        CHECK(g->save_stack.max_cpsz > prev_max);   /* deeper each time */
        /* exact fit: as large as the largest copy, up to the 8-byte step
         * of the small-save-stack pools */
        CHECK(g->save_stack.sz >= g->save_stack.max_cpsz &&
              g->save_stack.sz - g->save_stack.max_cpsz < 8);
        CHECK(g->save_stack.sz >= prev_sz);
        ASSERT_EQ(g->save_stack.ct_save, k + 1);
        prev_max = g->save_stack.max_cpsz;
        prev_sz = g->save_stack.sz;
    }
    CHECK(g->save_stack.max_cpsz >= (size_t)depths[3] * FRAME_BYTES);
    CHECK(g->save_stack.sz >= 4096);      /* grew from 1 byte to KiBs */
    /* Shallower again: max_cpsz keeps the maximum. */
    wg.depth = 0;
    aco_resume(g);
    aco_resume(o);
    ASSERT_EQ(g->save_stack.max_cpsz, prev_max);
    /* Run both to their ends; the locals were intact all along. */
    while (!g->is_end) aco_resume(g);
    while (!o->is_end) aco_resume(o);
    ASSERT_EQ(wg.bad, 0);
    ASSERT_EQ(wo.bad, 0);
    aco_destroy(g);
    aco_destroy(o);
    aco_share_stack_destroy(sstk);
}

/* ------------------------------------------------------------------------ */
/* 6. Destroying suspended cos, then reusing their stack.                   */
/* ------------------------------------------------------------------------ */

static void test_destroy_suspended(void) {
    aco_share_stack_t* sstk = aco_share_stack_new(64 * 1024);
    struct worker we, wc, wd;

    /* E runs and is evicted by C; C is the owner when it is destroyed. */
    aco_t* e = new_worker(sstk, 0, &we, 31, 900, 2);
    aco_t* c = new_worker(sstk, 0, &wc, 32, 2000, 5);
    aco_resume(e);
    aco_resume(c);
    ASSERT_PTR_EQ(sstk->owner, c);
    EXPECT_COUNTS(e, 1, 0);
    aco_destroy(c);                       /* suspended, not ended */
    ASSERT_PTR_EQ(sstk->owner, NULL);

    /* E comes back: nobody to save (C is gone), E is restored intact. */
    aco_resume(e);
    EXPECT_COUNTS(e, 1, 1);
    ASSERT_EQ(we.rounds_done, 1);
    ASSERT_EQ(we.bad, 0);

    /* D is new on the stack E still occupies: E is saved, D starts clean. */
    aco_t* d = new_worker(sstk, 0, &wd, 33, 1200, 1);
    aco_resume(d);
    EXPECT_COUNTS(e, 2, 1);
    EXPECT_COUNTS(d, 0, 0);

    /* Destroy E while evicted (not the owner): D keeps the stack. */
    aco_destroy(e);
    ASSERT_PTR_EQ(sstk->owner, d);
    aco_resume(d);
    ASSERT_EQ(d->is_end, 1);
    EXPECT_COUNTS(d, 0, 0);
    ASSERT_EQ(wd.bad, 0);
    aco_destroy(d);

    /* The stack is reusable after all that; F starts with nothing to save. */
    struct worker wf;
    aco_t* f = new_worker(sstk, 0, &wf, 34, 100, 1);
    aco_resume(f);
    aco_resume(f);
    ASSERT_EQ(f->is_end, 1);
    EXPECT_COUNTS(f, 0, 0);
    ASSERT_EQ(wf.bad, 0);
    aco_destroy(f);
    /* Succeeds only if every co on it was accounted for. */
    aco_share_stack_destroy(sstk);
}

/* ------------------------------------------------------------------------ */
/* 7. Cos on different stacks do not disturb each other.                    */
/* ------------------------------------------------------------------------ */

static void test_separate_stacks(void) {
    aco_share_stack_t* s1 = aco_share_stack_new2(16 * 1024, 0);
    aco_share_stack_t* s2 = aco_share_stack_new2(16 * 1024, 1);
    struct worker w1, w2;
    aco_t* c1 = new_worker(s1, 0, &w1, 41, 3000, 50);
    aco_t* c2 = new_worker(s2, 0, &w2, 42, 3000, 50);
    while (!c1->is_end || !c2->is_end) {
        w1.depth = w1.rounds_done % 7;
        w2.depth = w2.rounds_done % 5;
        if (!c1->is_end) aco_resume(c1);
        if (!c2->is_end) aco_resume(c2);
    }
    EXPECT_COUNTS(c1, 0, 0);
    EXPECT_COUNTS(c2, 0, 0);
    ASSERT_EQ(w1.bad + w2.bad, 0);
    ASSERT_EQ(w1.rounds_done, 50);
    ASSERT_EQ(w2.rounds_done, 50);
    aco_destroy(c1);
    aco_destroy(c2);
    aco_share_stack_destroy(s1);
    aco_share_stack_destroy(s2);
}

int main(void) {
    static int main_arg;
    aco_thread_init(NULL);
    main_co = aco_create(NULL, NULL, 0, NULL, &main_arg);
    CHECK(main_co != NULL);
    CHECK(aco_is_main_co(main_co));
    ASSERT_PTR_EQ(main_co->main_co, NULL);
    ASSERT_PTR_EQ(main_co->share_stack, NULL);
    ASSERT_PTR_EQ(main_co->arg, &main_arg);
    CHECK(main_co->fp == NULL);
    ASSERT_EQ(main_co->is_end, 0);

    test_standalone_generator();
    test_two_alternating();
    test_random_schedule();
    test_round_robin();
    test_save_stack_growth();
    test_destroy_suspended();
    test_separate_stacks();

    /* Between runs the thread's current co is its main co again. */
    ASSERT_PTR_EQ(aco_get_co(), main_co);
    ASSERT_PTR_EQ(aco_get_arg(), &main_arg);
    aco_destroy(main_co);
    printf("test_api_protocol: OK\n");
    return 0;
}
