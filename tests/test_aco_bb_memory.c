/*
 * test_aco_bb_memory.c - black-box: what libaco allocates, seen through the
 * program's allocator (aco_set_allocator), from aco.h alone.
 *
 *   - Every allocation comes with the cookie; every free gives back a block
 *     the allocator handed out, with the size that was asked for; at the end
 *     (everything destroyed, the main co too) nothing is left.
 *   - A guarded share stack is mapped (not the allocator's); an unguarded
 *     one is the allocator's.
 *   - aco_create_in: a co whose frames fit its memory is created, switched
 *     (evicted and restored) and destroyed without an allocation; frames
 *     that outgrow it cost a save stack, freed at aco_destroy; the memory
 *     is the caller's again after destroy (reused for a new co).
 *   - aco_resume_reserve(co): afterwards aco_resume(co) allocates nothing,
 *     also when co's stack holds another co's frames that outgrew its save
 *     stack; from a co about to hand off to a co of its own stack, the
 *     hand-off allocates nothing.
 *   - aco_reset keeps the save stack's buffer: a reset co's next evictions
 *     allocate nothing; its statistics are kept.
 *   - aco_alloc/aco_free go through the program's allocator.
 */
#include "aco_test.h"

#define COOKIE ((void*)0xc0c0)
#define MAXBLK 4096

static struct blk { void* p; size_t sz; void* raw; } blks[MAXBLK];
static size_t slack;             /* bytes of ours below the next blocks */
static long n_alloc, n_free, live;
static int bad;
static int fail_next;

static void* my_alloc(void* cookie, size_t sz) {
    if (cookie != COOKIE) bad++;
    if (fail_next) { fail_next = 0; return NULL; }
    void* raw = NULL;
    if (posix_memalign(&raw, 16, (sz ? sz : 1) + slack) != 0) return NULL;
    void* p = (char*)raw + slack;
    for (int i = 0; i < MAXBLK; i++) {
        if (blks[i].p == NULL) {
            blks[i].p = p;
            blks[i].raw = raw;
            blks[i].sz = sz;
            n_alloc++;
            live++;
            return p;
        }
    }
    fprintf(stderr, "too many blocks\n");
    abort();
}

static void my_free(void* cookie, void* p, size_t sz) {
    if (cookie != COOKIE) bad++;
    for (int i = 0; i < MAXBLK; i++) {
        if (blks[i].p == p) {
            if (blks[i].sz != sz) {
                fprintf(stderr, "free(%p, %zu): it was allocated with %zu\n", p, sz,
                        blks[i].sz);
                bad++;
            }
            blks[i].p = NULL;
            n_free++;
            live--;
            free(blks[i].raw);
            return;
        }
    }
    fprintf(stderr, "free(%p, %zu): not a block of ours\n", p, sz);
    bad++;
}

static aco_t* main_co;

static void co_frames(void) {
    size_t n = (size_t)aco_get_arg();
    for (;;) {
        volatile unsigned char f[aco_test_vla(n)];
        aco_test_fill(f, n, (uint32_t)n);
        aco_yield();
        CHECK(aco_test_intact(f, n, (uint32_t)n));
        n = (size_t)aco_get_arg();          /* main may change it */
        if (n == 0) break;
    }
    aco_exit();
}

static void co_yield_forever(void) {
    for (;;) aco_yield();
}

/* --- aco_create_in --- */
static void create_in(void) {
    aco_share_stack_t* s = aco_share_stack_new(0);
    long a0 = n_alloc;
    size_t room = 8192;
    size_t sz = aco_co_size(room);
    void* mem[3];
    aco_t* co[3];
    for (int i = 0; i < 3; i++) {
        CHECK(posix_memalign(&mem[i], 16, sz) == 0);
        co[i] = aco_create_in(mem[i], sz, main_co, s, co_frames,
                              (void*)(size_t)(1000 + 1500 * i));
        ASSERT_PTR_EQ(co[i], mem[i]);
    }
    ASSERT_EQ(n_alloc, a0);
    for (int r = 0; r < 50; r++)
        for (int i = 0; i < 3; i++) aco_resume(co[i]);
    ASSERT_EQ(n_alloc, a0);          /* frames fit: not one allocation */
    for (int i = 0; i < 3; i++) CHECK(co[i]->save_stack.ct_save >= 49);
    /* co[0] outgrows its room: one save stack of libaco's */
    aco_destroy(co[0]);              /* fine: suspended */
    ASSERT_EQ(n_alloc, a0);
    co[0] = aco_create_in(mem[0], sz, main_co, s, co_frames, (void*)(size_t)20000);
    aco_resume(co[0]);
    aco_resume(co[1]);               /* evicts co[0]: 20000 bytes > room */
    ASSERT_EQ(n_alloc, a0 + 1);
    aco_resume(co[0]);
    aco_resume(co[1]);
    ASSERT_EQ(n_alloc, a0 + 1);      /* the save stack is kept */
    /* aco_co_size(m) holds m bytes of frames: the same co, made in exactly
     * that much memory, switches without an allocation */
    size_t m = co[0]->save_stack.max_cpsz;
    CHECK(m >= 20000);
    void* exact;
    CHECK(posix_memalign(&exact, 16, aco_co_size(m)) == 0);
    aco_t* e = aco_create_in(exact, aco_co_size(m), main_co, s, co_frames,
                             (void*)(size_t)20000);
    long a1 = n_alloc;
    for (int r = 0; r < 3; r++) {
        aco_resume(e);
        aco_resume(co[1]);
    }
    ASSERT_EQ(e->save_stack.max_cpsz, m);
    ASSERT_EQ(n_alloc, a1);
    aco_destroy(e);
    free(exact);
    long live0 = live;
    aco_destroy(co[0]);
    ASSERT_EQ(live, live0 - 1);      /* its save stack went with it */
    for (int i = 1; i < 3; i++) aco_destroy(co[i]);
    for (int i = 0; i < 3; i++) free(mem[i]);
    aco_share_stack_destroy(s);
    ASSERT_EQ(bad, 0);
}

/* --- aco_resume_reserve --- */
static aco_t* handoff_target;
static int reserve_result = -2;
static long allocs_in_handoff = -1;
static long alloc_at_handoff;
static void co_target(void) {
    allocs_in_handoff = n_alloc - alloc_at_handoff;
    co_frames();
}

static void co_hand_off(void) {
    volatile unsigned char f[aco_test_vla(30000)];
    aco_test_fill(f, sizeof(f), 9);
    reserve_result = aco_resume_reserve(handoff_target);
    alloc_at_handoff = n_alloc;
    aco_yield_to(handoff_target);
    CHECK(aco_test_intact(f, sizeof(f), 9));
    aco_exit();
}

static void reserve(void) {
    aco_share_stack_t* s = aco_share_stack_new(0);
    aco_t* big = aco_create(main_co, s, 0, co_frames, (void*)(size_t)50000);
    aco_t* other = aco_create(main_co, s, 0, co_yield_forever, NULL);
    aco_resume(big);                         /* owns s, 50000 bytes live */
    /* the allocator fails: -1, ENOMEM, nothing changed */
    fail_next = 1;
    errno = 0;
    ASSERT_EQ(aco_resume_reserve(other), -1);
    ASSERT_EQ(errno, ENOMEM);
    fail_next = 0;
    ASSERT_PTR_EQ(s->owner, big);
    EXPECT_COUNTS(big, 0, 0);
    ASSERT_EQ(aco_resume_reserve(other), 0);
    long a = n_alloc;
    aco_resume(other);                       /* evicts big: no allocation */
    ASSERT_EQ(n_alloc - a, 0);
    aco_resume(big);
    aco_resume(other);
    aco_destroy(other);
    aco_destroy(big);

    /* hand-off between two cos of one stack, reserved first */
    aco_t* h = aco_create(main_co, s, 0, co_hand_off, NULL);
    handoff_target = aco_create(main_co, s, 0, co_target, (void*)(size_t)4000);
    aco_t* last = aco_resume_last(h);
    ASSERT_PTR_EQ(last, handoff_target);
    ASSERT_EQ(reserve_result, 0);
    aco_resume(h);
    CHECK(h->is_end);
    ASSERT_EQ(allocs_in_handoff, 0);
    aco_destroy(h);
    aco_destroy(handoff_target);
    aco_share_stack_destroy(s);
}

/* --- aco_reset keeps the buffer and the statistics --- */
static void reset(void) {
    aco_share_stack_t* s = aco_share_stack_new(0);
    aco_t* a = aco_create(main_co, s, 0, co_frames, (void*)(size_t)6000);
    aco_t* b = aco_create(main_co, s, 0, co_yield_forever, NULL);
    aco_resume(a);
    aco_resume(b);                           /* a's save stack made */
    aco_resume(a);
    size_t saves = a->save_stack.ct_save, restores = a->save_stack.ct_restore;
    size_t maxcp = a->save_stack.max_cpsz;
    CHECK(saves == 1 && restores == 1 && maxcp >= 6000);
    long al = n_alloc;
    aco_reset(a);                            /* a owned s: it no longer does */
    aco_resume(b);                           /* nothing of a saved */
    ASSERT_EQ(a->save_stack.ct_save, saves);
    ASSERT_EQ(b->save_stack.ct_restore, 1);
    aco_resume(a);                           /* from the top, evicting b */
    aco_resume(b);
    ASSERT_EQ(a->save_stack.ct_save, saves + 1);
    ASSERT_EQ(a->save_stack.ct_restore, restores);
    CHECK(a->save_stack.max_cpsz >= maxcp);
    long b_saves = (long)b->save_stack.ct_save;
    CHECK(b_saves >= 1);
    ASSERT_EQ(n_alloc - al, 0);      /* both save stacks were there */
    aco_reset2(a, co_yield_forever, (void*)0x99);
    CHECK(a->fp == co_yield_forever && a->arg == (void*)0x99);
    CHECK(a->main_co == main_co && a->share_stack == s);
    aco_resume(a);
    aco_destroy(a);
    aco_destroy(b);
    aco_share_stack_destroy(s);
}

/* A co that outgrows an unguarded stack (into slack of ours: nothing is
 * harmed) is caught at the next switch that copies its frames (docs/core.md,
 * "What is misuse": "the next switch that copies its frames checks its stack
 * pointer"). */
static void co_past_the_end(void) {
    aco_share_stack_t* s = aco_get_co()->share_stack;
    size_t n = s->sz + 8192;
    volatile unsigned char f[aco_test_vla(n)];
    f[n - 1] = 1;                    /* its top, within the stack */
    aco_yield();                     /* sp below ptr */
    CHECK(f[n - 1] == 1);
    aco_exit();
}

static void child_unguarded_overflow(void* arg) {
    (void)arg;
    slack = 256 * 1024;
    aco_share_stack_t* s = aco_share_stack_new2(64 * 1024, 0);
    slack = 0;
    aco_t* a = aco_create(main_co, s, 0, co_past_the_end, NULL);
    aco_t* b = aco_create(main_co, s, 0, co_yield_forever, NULL);
    aco_resume(a);
    aco_resume(b);                   /* copies a's frames: caught */
    fprintf(stderr, "the overflow was not caught\n");
}

int main(void) {
    aco_set_allocator(my_alloc, my_free, COOKIE);
    aco_thread_init(NULL);
    main_co = aco_create(NULL, NULL, 0, NULL, NULL);
    CHECK(n_alloc >= 1);                         /* the main co */

    /* share stacks: guarded mapped, unguarded the allocator's */
    long a = n_alloc;
    aco_share_stack_t* g = aco_share_stack_new2(100000, 1);
    long with_guard = n_alloc - a;
    a = n_alloc;
    aco_share_stack_t* u = aco_share_stack_new2(100000, 0);
    long without = n_alloc - a;
    int big_block = 0;
    for (int i = 0; i < MAXBLK; i++)
        if (blks[i].p && blks[i].sz >= 100000) big_block = 1;
    CHECK(big_block || aco_checked());
    CHECK(without >= with_guard);
    aco_share_stack_destroy(g);
    aco_share_stack_destroy(u);

    /* try_new2: NULL, ENOMEM when the allocator fails (its record, or an
     * unguarded stack's memory) */
    for (int g = 0; g < 2; g++) {
        long before = live;
        fail_next = 1;
        errno = 0;
        aco_share_stack_t* t = aco_share_stack_try_new2(8192, (char)g);
        if (t != NULL) {
            /* the first allocation was not its: fine, if nothing failed */
            CHECK(fail_next == 1);
            fail_next = 0;
            aco_share_stack_destroy(t);
        } else {
            ASSERT_EQ(errno, ENOMEM);
            ASSERT_EQ(live, before);
        }
    }
    /* aco_create_main_in allocates nothing, and leaves mem to the caller */
    {
        aco_destroy(main_co);
        static _Alignas(16) unsigned char mm[1024];
        long a1 = n_alloc;
        CHECK(aco_co_size(0) <= sizeof(mm));
        main_co = aco_create_main_in(mm, sizeof(mm), (void*)5);
        ASSERT_PTR_EQ(main_co, (void*)mm);
        ASSERT_EQ(n_alloc, a1);
        CHECK(aco_is_main_co(main_co) && main_co->arg == (void*)5);
        aco_destroy(main_co);
        main_co = aco_create(NULL, NULL, 0, NULL, NULL);
    }

    void* p = aco_alloc(24);
    CHECK(p != NULL && ((uintptr_t)p & 15) == 0);
    aco_free(p, 24);
    fail_next = 1;
    CHECK(aco_alloc(32) == NULL);

    create_in();
    reserve();
    reset();
    if (!aco_checked() && !aco__asan &&
        aco_test_expect_signal("a co past the end of an unguarded stack",
                               child_unguarded_overflow, NULL, SIGABRT,
                               "aco: aco_resume: "))
        return 1;

    aco_destroy(main_co);
    if (live != 0) {
        fprintf(stderr, "%ld blocks left after everything was destroyed:\n", live);
        for (int i = 0; i < MAXBLK; i++)
            if (blks[i].p) fprintf(stderr, "  %p %zu\n", blks[i].p, blks[i].sz);
        return 1;
    }
    ASSERT_EQ(bad, 0);
    printf("ok: %ld allocations, all freed\n", n_alloc);
    return 0;
}
