/*
 * test_copy_counts.c - cos sharing a stack are copied lazily, exactly when
 * the stack changes hands: every ct_save and ct_restore is the count the
 * rules predict, every save covers the evicted co's live frames, and a save
 * stack grows on demand to fit the largest copy.
 *
 * The rules checked (aco.h, aco.c): a share stack's owner is the co whose
 * frames are on it.  Resuming a co that is not the owner first copies the
 * owner's live bytes to the owner's save stack (ct_save++, max_cpsz
 * updated), then copies the resumed co's saved bytes back (ct_restore++),
 * each only if there are bytes to copy; resuming the owner copies nothing,
 * and an exited owner leaves the stack to nobody.  The counts are spelled
 * out step by step for two cos, predicted by a small model of the rules for
 * a random schedule of six, and given in closed form for a round robin of
 * four.  Every worker (aco_test.h) checks its patterned locals after every
 * resume.  (The protocol itself, and the cos that never copy, are
 * test_resume_protocol's.)
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

/* Deterministic, cheap pseudo-random numbers (no libc state). */
static uint32_t rng_next(uint32_t* s) {
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

/* ------------------------------------------------------------------------ */
/* Two cos alternating on one stack: every count, step by step.             */
/* ------------------------------------------------------------------------ */

static void test_two_alternating(void) {
    aco_share_stack_t* sstk = aco_share_stack_new(128 * 1024);
    struct aco_test_worker wa, wb;
    const size_t big_a = 1500, big_b = 3000;
    aco_t* a = aco_test_worker_new(main_co, sstk, 0, &wa, 11, big_a, 3);
    aco_t* b = aco_test_worker_new(main_co, sstk, 0, &wb, 22, big_b, 3);

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
    CHECK(a->save_stack.max_cpsz >= aco_test_worker_live(sstk, &wa));
    /* Not more than A's frames plus the yield's own small frames. */
    CHECK(a->save_stack.max_cpsz <= aco_test_worker_live(sstk, &wa) + 2048);
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
    CHECK(b->save_stack.max_cpsz >= aco_test_worker_live(sstk, &wb));

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
/* Many cos, random schedule and depths, counts predicted by a model.       */
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
    struct aco_test_worker w[NCO];
    aco_t* co[NCO];
    struct model m = {.owner = -1};
    uint32_t rng = 0x1234567u;
    int live = NCO;
    long steps = 0;
    const int rounds = (int)aco_test_scale(300, 30);

    for (int i = 0; i < NCO; i++) {
        size_t big = 64 + (size_t)(rng_next(&rng) % 4000);
        int yields = rounds + (int)(rng_next(&rng) % 50);
        co[i] = aco_test_worker_new(main_co, sstk, 1 + (size_t)i * 40, &w[i],
                                    1000u + (uint32_t)i, big, yields);
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
            CHECK(ev->save_stack.max_cpsz >=
                  aco_test_worker_live(sstk, &w[owner_before]));
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
/* Round robin: closed-form counts.                                         */
/* ------------------------------------------------------------------------ */

static void test_round_robin(void) {
    enum { K = 4 };
    const int rounds = (int)aco_test_scale(500, 25);
    aco_share_stack_t* sstk = aco_share_stack_new(64 * 1024);
    struct aco_test_worker w[K];
    aco_t* co[K];
    for (int i = 0; i < K; i++)
        co[i] = aco_test_worker_new(main_co, sstk, 0, &w[i], 77u * (uint32_t)i,
                                    256, rounds);
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
/* Save stacks grow on demand from a tiny initial size.                     */
/* ------------------------------------------------------------------------ */

static void test_save_stack_growth(void) {
    aco_share_stack_t* sstk = aco_share_stack_new(64 * 1024);
    struct aco_test_worker wg, wo;
    /* Initial save stack of 1 byte; the other co takes the stack each time. */
    aco_t* g = aco_test_worker_new(main_co, sstk, 1, &wg, 5, 64, 10);
    aco_t* o = aco_test_worker_new(main_co, sstk, 0, &wo, 6, 64, 10);
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
        size_t live = aco_test_worker_live(sstk, &wg);
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
    CHECK(g->save_stack.max_cpsz >= (size_t)depths[3] * ACO_TEST_FRAME_BYTES);
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

int main(void) {
    aco_thread_init(NULL);
    main_co = aco_create(NULL, NULL, 0, NULL, NULL);

    test_two_alternating();
    test_random_schedule();
    test_round_robin();
    test_save_stack_growth();

    aco_destroy(main_co);
    printf("test_copy_counts: OK\n");
    return 0;
}
