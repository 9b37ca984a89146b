/*
 * test_aco_bb_lazy.c - black-box: the lazy save/restore of cos sharing a
 * stack, from aco.h and docs/core.md ("lazy save") alone.
 *
 *   - aco_resume(co) copies only when co does not own its share stack:
 *     first the owner's live bytes to the owner's save stack (ct_save),
 *     then co's saved bytes back (ct_restore); an init co restores nothing;
 *     an ended owner is not saved; a co alone on its stack never copies.
 *   - share_stack->owner is the co whose frames are on the stack.
 *   - Locals survive every eviction: many cos (with frames of different
 *     depths and sizes, some far larger than their initial save stack)
 *     round-robin on one stack, each checking its patterned frames.
 *   - max_cpsz is the largest copy, at least the co's live frames.
 *   - Cos created inside a co, resumed from main; the upstream README's
 *     "best practice" pointer rules: a pointer to a co's own local passed
 *     down its own calls is fine across yields.
 *   - save_stack_sz initial sizes 0, 1, 7, 64, 4096: all behave alike.
 */
#include "aco_test.h"

static aco_t* main_co;

/* ------------------------------------------------------------------------ */
/* A worker: a VLA of `bytes` patterned bytes live across each yield, under */
/* `depth` nested frames.                                                   */
/* ------------------------------------------------------------------------ */

struct w {
    aco_t* self;
    size_t bytes;
    int depth;
    int rounds;
    int done;
    int bad;
    uint32_t seed;
};

__attribute__((noinline)) static void dive(struct w* w, int depth, uint32_t seed) {
    volatile unsigned char b[aco_test_vla(96)];
    aco_test_fill(b, sizeof(b), seed + (uint32_t)depth);
    if (depth > 0)
        dive(w, depth - 1, seed);
    else
        aco_yield();
    if (!aco_test_intact(b, sizeof(b), seed + (uint32_t)depth)) w->bad++;
    if (aco_get_co() != w->self) w->bad++;
}

/* A pointer to the co's own local, passed down its own calls. */
__attribute__((noinline)) static void bump(volatile long* p) {
    aco_yield();
    (*p)++;
}

static void worker(void) {
    struct w* w = aco_get_arg();
    volatile unsigned char big[aco_test_vla(w->bytes)];
    volatile long counter = 0;
    for (int r = 0; r < w->rounds; r++) {
        uint32_t seed = w->seed + (uint32_t)r * 977u;
        aco_test_fill(big, w->bytes, seed);
        dive(w, w->depth, seed ^ 0xabcdefu);
        bump(&counter);
        if (!aco_test_intact(big, w->bytes, seed)) w->bad++;
        if (counter != r + 1) w->bad++;
        if (aco_get_arg() != w) w->bad++;
        w->done++;
    }
    aco_exit();
}

static void co_yield_n(void) {
    long n = (long)aco_get_arg();
    for (long i = 0; i < n; i++) aco_yield();
    aco_exit();
}

/* ------------------------------------------------------------------------ */
/* 1. Exact counts, step by step, for two cos on one stack.                 */
/* ------------------------------------------------------------------------ */

static void counts_step_by_step(size_t save_sz) {
    aco_share_stack_t* s = aco_share_stack_new(0);
    ASSERT_PTR_EQ(s->owner, NULL);
    aco_t* a = aco_create(main_co, s, save_sz, co_yield_n, (void*)3L);
    aco_t* b = aco_create(main_co, s, save_sz, co_yield_n, (void*)3L);
    EXPECT_COUNTS(a, 0, 0);
    ASSERT_EQ(a->save_stack.max_cpsz, 0);

    aco_resume(a);               /* a: init, stack free: no copy */
    ASSERT_PTR_EQ(s->owner, a);
    EXPECT_COUNTS(a, 0, 0);
    aco_resume(a);               /* a owns it: no copy */
    EXPECT_COUNTS(a, 0, 0);
    aco_resume(b);               /* a saved; b init: nothing restored */
    ASSERT_PTR_EQ(s->owner, b);
    EXPECT_COUNTS(a, 1, 0);
    EXPECT_COUNTS(b, 0, 0);
    CHECK(a->save_stack.max_cpsz > 0);
    aco_resume(b);               /* b owns it */
    EXPECT_COUNTS(b, 0, 0);
    aco_resume(a);               /* b saved, a restored */
    ASSERT_PTR_EQ(s->owner, a);
    EXPECT_COUNTS(a, 1, 1);
    EXPECT_COUNTS(b, 1, 0);
    aco_resume(a);               /* a exits */
    CHECK(a->is_end);
    EXPECT_COUNTS(a, 1, 1);
    aco_resume(b);               /* a ended: not saved; b restored */
    EXPECT_COUNTS(a, 1, 1);
    EXPECT_COUNTS(b, 1, 1);
    ASSERT_PTR_EQ(s->owner, b);
    aco_resume(b);
    CHECK(b->is_end);
    ASSERT_PTR_EQ(s->owner, NULL);
    EXPECT_COUNTS(b, 1, 1);

    /* A new co on the stack after b ended: b is not saved. */
    aco_t* c = aco_create(main_co, s, save_sz, co_yield_n, (void*)1L);
    aco_resume(c);
    EXPECT_COUNTS(b, 1, 1);
    EXPECT_COUNTS(c, 0, 0);
    aco_destroy(c);              /* suspended owner destroyed */
    aco_t* d = aco_create(main_co, s, save_sz, co_yield_n, (void*)1L);
    aco_resume(d);
    EXPECT_COUNTS(d, 0, 0);
    aco_resume(d);
    CHECK(d->is_end);
    aco_destroy(a);
    aco_destroy(b);
    aco_destroy(d);
    aco_share_stack_destroy(s);
}

/* ------------------------------------------------------------------------ */
/* 2. Many cos round robin on one small stack, frames intact.               */
/* ------------------------------------------------------------------------ */

#define NCOS 64

static void round_robin(void) {
    aco_share_stack_t* s = aco_share_stack_new2(256 * 1024, 0);
    static struct w ws[NCOS];
    aco_t* cos[NCOS];
    static const size_t init_sz[] = {0, 1, 7, 64, 4096, 100};
    int rounds = (int)aco_test_scale(6, 3);
    for (int i = 0; i < NCOS; i++) {
        memset(&ws[i], 0, sizeof(ws[i]));
        ws[i].bytes = 16 + (size_t)(i * 397) % 12000;
        ws[i].depth = i % 5;
        ws[i].rounds = rounds;
        ws[i].seed = 0x1000u + (uint32_t)i;
        cos[i] = aco_create(main_co, s, init_sz[i % 6], worker, &ws[i]);
        ws[i].self = cos[i];
    }
    /* Each round a co yields twice (dive, bump): 2 * rounds + 1 resumes. */
    for (int step = 0; step < 2 * rounds + 1; step++) {
        for (int i = 0; i < NCOS; i++) {
            CHECK(!cos[i]->is_end);
            aco_resume(cos[i]);
            ASSERT_PTR_EQ(s->owner, step == 2 * rounds ? NULL : cos[i]);
        }
    }
    for (int i = 0; i < NCOS; i++) {
        CHECK(cos[i]->is_end);
        ASSERT_EQ(ws[i].bad, 0);
        ASSERT_EQ(ws[i].done, rounds);
        /* evicted after each of its 2 * rounds yields, restored as often */
        EXPECT_COUNTS(cos[i], 2 * rounds, 2 * rounds);
        /* its biggest copy held at least its big array */
        CHECK(cos[i]->save_stack.max_cpsz >= ws[i].bytes);
        CHECK(cos[i]->save_stack.max_cpsz < ws[i].bytes + 4096);
        aco_destroy(cos[i]);
    }
    aco_share_stack_destroy(s);
}

/* ------------------------------------------------------------------------ */
/* 3. A co alone on its stack never copies; so does a co on a stack whose   */
/*    other co has ended.                                                   */
/* ------------------------------------------------------------------------ */

static void standalone(void) {
    aco_share_stack_t* s = aco_share_stack_new(0);
    static struct w wa;
    memset(&wa, 0, sizeof(wa));
    wa.bytes = 50000;
    wa.depth = 7;
    wa.rounds = 5;
    wa.seed = 77;
    aco_t* a = aco_create(main_co, s, 0, worker, &wa);
    wa.self = a;
    while (!a->is_end) aco_resume(a);
    EXPECT_COUNTS(a, 0, 0);
    ASSERT_EQ(a->save_stack.max_cpsz, 0);
    ASSERT_EQ(wa.bad, 0);
    aco_destroy(a);
    aco_share_stack_destroy(s);
}

/* ------------------------------------------------------------------------ */
/* 4. Cos created inside a co, resumed from main.                           */
/* ------------------------------------------------------------------------ */

static aco_share_stack_t* inner_stack;
static aco_t* made_inside[4];
static struct w inner_w[4];

static void maker(void) {
    /* its own frame stays live across the yields */
    volatile unsigned char mine[aco_test_vla(3000)];
    aco_test_fill(mine, sizeof(mine), 99);
    for (int i = 0; i < 4; i++) {
        memset(&inner_w[i], 0, sizeof(inner_w[i]));
        inner_w[i].bytes = 1000 * (size_t)(i + 1);
        inner_w[i].depth = i;
        inner_w[i].rounds = 3;
        inner_w[i].seed = 500u + (uint32_t)i;
        /* on the maker's own share stack, and on another one */
        made_inside[i] = aco_create(aco_get_co()->main_co,
                                    i % 2 ? inner_stack : aco_get_co()->share_stack,
                                    0, worker, &inner_w[i]);
        inner_w[i].self = made_inside[i];
        aco_yield();
        CHECK(aco_test_intact(mine, sizeof(mine), 99));
    }
    aco_exit();
}

static void created_inside(void) {
    aco_share_stack_t* s = aco_share_stack_new(0);
    inner_stack = aco_share_stack_new(0);
    aco_t* m = aco_create(main_co, s, 0, maker, NULL);
    for (int i = 0; i < 4; i++) {
        aco_resume(m);
        ASSERT_PTR_EQ(made_inside[i]->main_co, main_co);
        /* the new co runs from main, interleaved with the maker */
        aco_resume(made_inside[i]);
    }
    aco_resume(m);
    CHECK(m->is_end);
    for (int k = 0; k < 8; k++)
        for (int i = 0; i < 4; i++)
            if (!made_inside[i]->is_end) aco_resume(made_inside[i]);
    for (int i = 0; i < 4; i++) {
        CHECK(made_inside[i]->is_end);
        ASSERT_EQ(inner_w[i].bad, 0);
        ASSERT_EQ(inner_w[i].done, 3);
        aco_destroy(made_inside[i]);
    }
    aco_destroy(m);
    aco_share_stack_destroy(s);
    aco_share_stack_destroy(inner_stack);
}

/* ------------------------------------------------------------------------ */
/* 5. A save stack grows: a co whose live frames grow from a few bytes to   */
/*    200 KB and shrink again, evicted at each size.                        */
/* ------------------------------------------------------------------------ */

static void grower(void) {
    static const size_t sizes[] = {8, 100, 5000, 200000, 64, 150000, 16};
    for (unsigned k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        volatile unsigned char b[aco_test_vla(sizes[k])];
        aco_test_fill(b, sizes[k], 3000u + k);
        aco_yield();
        CHECK(aco_test_intact(b, sizes[k], 3000u + k));
    }
    aco_exit();
}

static void growth(void) {
    aco_share_stack_t* s = aco_share_stack_new(1024 * 1024);
    aco_t* g = aco_create(main_co, s, 16, grower, NULL);
    aco_t* other = aco_create(main_co, s, 0, co_yield_n, (void*)100L);
    size_t prev_max = 0;
    while (!g->is_end) {
        aco_resume(g);
        aco_resume(other);       /* evicts g */
        CHECK(g->save_stack.max_cpsz >= prev_max);
        prev_max = g->save_stack.max_cpsz;
    }
    CHECK(prev_max >= 200000);
    ASSERT_EQ(g->save_stack.ct_save, 7);
    ASSERT_EQ(g->save_stack.ct_restore, 7);
    aco_destroy(g);
    aco_destroy(other);
    aco_share_stack_destroy(s);
}

int main(void) {
    aco_thread_init(NULL);
    main_co = aco_create(NULL, NULL, 0, NULL, NULL);
    static const size_t sz[] = {0, 1, 7, 64, 4096};
    for (unsigned i = 0; i < sizeof(sz) / sizeof(sz[0]); i++) counts_step_by_step(sz[i]);
    round_robin();
    standalone();
    created_inside();
    growth();
    aco_destroy(main_co);
    printf("ok\n");
    return 0;
}
