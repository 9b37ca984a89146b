/*
 * test_valgrind_deep.c - a co's frames restored over stack that another co's
 * deep recursion has just vacated come back intact, and memcheck reports no
 * error for the copy or for the co's later reads of its locals.
 *
 * Scenario: on one share stack, holder co A is suspended inside a function
 * with a 4 KiB local frame; digger co B then recurses more than 64 KiB deep
 * over the same addresses and returns all the way.  Memcheck marks what B
 * vacated as unaddressable (it lies below the stack pointer), yet that is
 * exactly where A's evicted frames are copied back when A resumes.  Unless
 * the library tells memcheck the region is live again, the copy and A's
 * later reads of its own locals are reported.  So the verdict of the valgrind
 * build is "0 memcheck errors" as much as the exit status; natively it is a
 * plain check that save/restore keeps every byte.
 *
 * On x86-64 "live again" includes the 128-byte red zone below the restored
 * stack pointer, which memcheck takes to be addressable (see red_zone_leaf).
 *
 * Patterns: B yields after returning, B exits after returning, B is evicted
 * while at its deepest (so A is restored into the middle of B's live frames'
 * addresses), and two holders parked at different depths taking turns with B.
 * Each runs on a guarded (mmap) and an unguarded (malloc) share stack, since
 * memcheck tracks the two kinds of memory differently.
 */
#include "aco_test.h"

#define STACK_SZ (512u * 1024)
#define HOLD_WORDS 1024     /* the holder's 4 KiB frame */
#define DIG_WORDS 256       /* 1 KiB per digger level ... */
#define DIG_LEVELS 96       /* ... so > 96 KiB of frames at the deepest */
#define MIN_DIG_BYTES (64u * 1024)

/* A word that depends on every input, so a frame restored at the wrong
 * place, from the wrong save, or from the wrong round is caught. */
static uint32_t pattern(uint32_t tag, uint32_t round, uint32_t i) {
    uint32_t x = tag * 0x9e3779b1u ^ round * 0x85ebca77u ^ i * 0xc2b2ae3du;
    x ^= x >> 15;
    x *= 0x2c1b3c6du;
    x ^= x >> 12;
    return x;
}

/* Out of line, and the buffer escapes, so the frames really are in memory
 * across the switch and the checks really read them back. */
__attribute__((noinline)) static void fill(uint32_t* a, size_t n, uint32_t tag,
                                           uint32_t round) {
    for (size_t i = 0; i < n; i++) a[i] = pattern(tag, round, (uint32_t)i);
    __asm__ volatile("" : : "r"(a) : "memory");
}

__attribute__((noinline)) static size_t count_bad(const uint32_t* a, size_t n,
                                                  uint32_t tag, uint32_t round) {
    __asm__ volatile("" : : "r"(a) : "memory");
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += a[i] != pattern(tag, round, (uint32_t)i);
    return bad;
}

/* A leaf function keeps its locals in the x86-64 red zone, the 128 bytes
 * below the stack pointer that it never reserves.  Memcheck assumes those
 * bytes are addressable whenever it sees the stack pointer move, so a co that
 * calls this right after resuming reads and writes memory that must have been
 * made addressable again by the restore, red zone included.  (i386 has no red
 * zone; there it is an ordinary small frame.) */
__attribute__((noinline)) static uint32_t red_zone_leaf(uint32_t seed) {
    volatile uint32_t scratch[24];
    for (unsigned i = 0; i < 24; i++) scratch[i] = seed + i;
    uint32_t sum = 0;
    for (unsigned i = 0; i < 24; i++) sum += scratch[i];
    return sum;
}

static uint32_t red_zone_expected(uint32_t seed) {
    return 24 * seed + 23 * 24 / 2;
}

/* ------------------------------------------------------------------------ */

struct holder {
    uint32_t tag;
    int rounds;         /* frames parked, one per round */
    int nest;           /* extra 1 KiB frames between the co function and it */
    int verified;       /* rounds whose frame came back intact */
    size_t bad;         /* words that did not */
    char* parked_at;    /* the 4 KiB frame's address in the current round */
    int in_frame;       /* 1 while parked inside the frame */
};

__attribute__((noinline)) static void hold_frame(struct holder* h, int round) {
    uint32_t frame[aco_test_vla(HOLD_WORDS)];   /* a VLA: see aco_test.h */
    fill(frame, HOLD_WORDS, h->tag, (uint32_t)round);
    h->parked_at = (char*)frame;
    h->in_frame = 1;
    aco_yield();
    h->in_frame = 0;
    size_t bad = red_zone_leaf(h->tag) != red_zone_expected(h->tag);
    bad += count_bad(frame, HOLD_WORDS, h->tag, (uint32_t)round);
    h->bad += bad;
    if (bad == 0) h->verified++;
}

__attribute__((noinline)) static void hold_nested(struct holder* h, int round,
                                                  int nest) {
    if (nest == 0) {
        hold_frame(h, round);
        return;
    }
    uint32_t pad[aco_test_vla(DIG_WORDS)];
    fill(pad, DIG_WORDS, h->tag ^ 0x5a5a5a5au, (uint32_t)(round * 64 + nest));
    hold_nested(h, round, nest - 1);
    h->bad += count_bad(pad, DIG_WORDS, h->tag ^ 0x5a5a5a5au,
                        (uint32_t)(round * 64 + nest));
}

static void holder_co(void) {
    struct holder* h = aco_get_arg();
    for (int r = 0; r < h->rounds; r++) hold_nested(h, r, h->nest);
    aco_exit();
}

struct digger {
    uint32_t tag;
    int rounds;
    int yield_at_bottom;    /* be evicted while at the deepest level */
    int exit_at_end;        /* aco_exit after the last round (else yield on) */
    int round;
    size_t bad;
    char* lowest;           /* deepest frame address reached this round */
    int at_bottom;
};

__attribute__((noinline)) static uint32_t dig(struct digger* d, int level) {
    uint32_t buf[aco_test_vla(DIG_WORDS)];
    fill(buf, DIG_WORDS, d->tag + (uint32_t)level, (uint32_t)d->round);
    if ((char*)buf < d->lowest) d->lowest = (char*)buf;
    uint32_t sum = 0;
    if (level > 0) {
        sum = dig(d, level - 1);
    } else if (d->yield_at_bottom) {
        d->at_bottom = 1;
        aco_yield();
        d->at_bottom = 0;
    }
    d->bad += count_bad(buf, DIG_WORDS, d->tag + (uint32_t)level,
                        (uint32_t)d->round);
    return sum + buf[(unsigned)level % DIG_WORDS];
}

static void digger_co(void) {
    struct digger* d = aco_get_arg();
    for (d->round = 0;; d->round++) {
        d->lowest = (char*)-1;
        (void)dig(d, DIG_LEVELS);
        if (d->round + 1 == d->rounds && d->exit_at_end) aco_exit();
        aco_yield();
    }
}

/* ------------------------------------------------------------------------ */

static aco_t* main_co;

static char* stack_top(const aco_share_stack_t* s) {
    return (char*)s->ptr + s->sz;
}

/* After a digger round: it went > 64 KiB deep and right over the holder's
 * parked frame, so the holder's restore lands in vacated memory. */
static void check_dug_over(const aco_share_stack_t* s, const struct digger* d,
                           const struct holder* h) {
    CHECK(d->lowest >= (char*)s->ptr);
    CHECK((size_t)(stack_top(s) - d->lowest) >= MIN_DIG_BYTES);
    if (h != NULL) CHECK(d->lowest < h->parked_at);
    ASSERT_EQ(d->bad, 0);
}

/* Resume the holder and check it restored (not kept) its frame once. */
static void resume_evicted_holder(aco_t* a, struct holder* h) {
    size_t restores = a->save_stack.ct_restore;
    int verified = h->verified;
    CHECK(a->share_stack->owner != a);
    aco_resume(a);
    ASSERT_EQ(a->save_stack.ct_restore, restores + 1);
    ASSERT_EQ(h->bad, 0);
    ASSERT_EQ(h->verified, verified + 1);
}

/* 1: B returns from its recursion and yields; A is evicted and restored
 *    every round. */
static void scenario_digger_yields(aco_share_stack_t* s) {
    struct holder h = {.tag = 0xa11ce, .rounds = 6};
    struct digger d = {.tag = 0xb0b, .rounds = 6};
    aco_t* a = aco_create(main_co, s, 0, holder_co, &h);
    aco_t* b = aco_create(main_co, s, 0, digger_co, &d);
    aco_resume(a);
    CHECK(h.in_frame);
    for (int r = 0; r < h.rounds; r++) {
        size_t saves = a->save_stack.ct_save;
        aco_resume(b);
        ASSERT_EQ(a->save_stack.ct_save, saves + 1);
        check_dug_over(s, &d, &h);
        resume_evicted_holder(a, &h);
        CHECK(r + 1 == h.rounds ? a->is_end : h.in_frame);
    }
    ASSERT_EQ(h.verified, h.rounds);
    CHECK(!b->is_end);
    aco_destroy(a);
    aco_destroy(b);     /* destroyed while suspended: allowed */
}

/* 2: each round a fresh B recurses, returns and exits, so no save of B ever
 *    happens and A's restore follows a co that no longer exists. */
static void scenario_digger_exits(aco_share_stack_t* s) {
    struct holder h = {.tag = 0xc0ffee, .rounds = 5, .nest = 2};
    aco_t* a = aco_create(main_co, s, 0, holder_co, &h);
    aco_resume(a);
    for (int r = 0; r < h.rounds; r++) {
        struct digger d = {.tag = 0xd16u + (uint32_t)r, .rounds = 1,
                           .exit_at_end = 1};
        aco_t* b = aco_create(main_co, s, 0, digger_co, &d);
        aco_resume(b);
        CHECK(b->is_end);
        CHECK(s->owner == NULL);
        ASSERT_EQ(b->save_stack.ct_save, 0);
        check_dug_over(s, &d, &h);
        aco_destroy(b);
        resume_evicted_holder(a, &h);
    }
    CHECK(a->is_end);
    aco_destroy(a);
}

/* 3: B is evicted at its deepest (a > 96 KiB save), A is restored into the
 *    addresses of B's upper frames, then B is restored and unwinds. */
static void scenario_digger_evicted_deep(aco_share_stack_t* s) {
    struct holder h = {.tag = 0xfeed, .rounds = 4};
    struct digger d = {.tag = 0xdee9, .rounds = 4, .yield_at_bottom = 1,
                       .exit_at_end = 1};
    aco_t* a = aco_create(main_co, s, 0, holder_co, &h);
    aco_t* b = aco_create(main_co, s, 0, digger_co, &d);
    aco_resume(a);
    for (int r = 0; r < h.rounds; r++) {
        aco_resume(b);                  /* to the bottom */
        CHECK(d.at_bottom);
        resume_evicted_holder(a, &h);   /* parks its next frame or ends */
        CHECK(b->save_stack.valid_sz >= MIN_DIG_BYTES);
        size_t restores = b->save_stack.ct_restore;
        aco_resume(b);                  /* unwinds, then yields or exits */
        ASSERT_EQ(b->save_stack.ct_restore, restores + 1);
        CHECK(!d.at_bottom);
        check_dug_over(s, &d, &h);
        CHECK(r + 1 == d.rounds ? b->is_end : !b->is_end);
    }
    CHECK(a->is_end);
    /* A co that starts (not resumes) on the stack B's unwinding vacated. */
    struct holder late = {.tag = 0x1a7e, .rounds = 1};
    aco_t* c = aco_create(main_co, s, 0, holder_co, &late);
    aco_resume(c);
    CHECK(late.in_frame);
    aco_resume(c);
    CHECK(c->is_end);
    ASSERT_EQ(late.verified, 1);
    aco_destroy(c);
    aco_destroy(a);
    aco_destroy(b);
}

/* 4: two holders parked at different depths (the second below 8 KiB of extra
 *    frames) alternate with B; each is evicted and restored many times. */
static void scenario_two_holders(aco_share_stack_t* s) {
    struct holder h1 = {.tag = 0x1111, .rounds = 5};
    struct holder h2 = {.tag = 0x2222, .rounds = 5, .nest = 8};
    struct digger d = {.tag = 0x3333, .rounds = 10};
    aco_t* a1 = aco_create(main_co, s, 0, holder_co, &h1);
    aco_t* a2 = aco_create(main_co, s, 4096, holder_co, &h2);
    aco_t* b = aco_create(main_co, s, 0, digger_co, &d);
    aco_resume(a1);
    aco_resume(a2);
    CHECK(h1.in_frame && h2.in_frame);
    CHECK(h2.parked_at < h1.parked_at);
    for (int r = 0; r < h1.rounds; r++) {
        aco_resume(b);
        check_dug_over(s, &d, &h2);
        resume_evicted_holder(a1, &h1);
        aco_resume(b);
        check_dug_over(s, &d, &h1);
        resume_evicted_holder(a2, &h2);
    }
    CHECK(a1->is_end && a2->is_end);
    ASSERT_EQ(h1.verified + h2.verified, h1.rounds + h2.rounds);
    aco_destroy(a1);
    aco_destroy(a2);
    aco_destroy(b);
}

int main(void) {
    aco_thread_init(NULL);
    main_co = aco_create(NULL, NULL, 0, NULL, NULL);
    for (int guard = 1; guard >= 0; guard--) {
        aco_share_stack_t* s = aco_share_stack_new2(STACK_SZ, (char)guard);
        scenario_digger_yields(s);
        scenario_digger_exits(s);
        scenario_digger_evicted_deep(s);
        scenario_two_holders(s);
        ASSERT_EQ(s->co_ct, 0);
        aco_share_stack_destroy(s);
    }
    aco_destroy(main_co);
    printf("test_valgrind_deep: ok\n");
    return 0;
}
