/*
 * test_create_in.c - aco_create_in: a co in the caller's memory, its save
 * stack the rest of that memory (aco_co_size(n): room for n bytes of
 * frames).  Cos whose frames fit there are created,
 * switched (their frames copied out and back through it) and destroyed
 * without one allocation (counted through aco_set_allocator); a co whose
 * frames outgrow it gets exactly one save stack of libaco's, given back at
 * destroy; aco_destroy never frees the caller's memory, which can hold a
 * new co afterwards; aco_reset keeps the embedded save stack.  aco_alloc /
 * aco_free go through the program's allocator with its cookie and the size,
 * and aco_alloc says NULL instead of aborting.  Misuse (NULL or misaligned
 * memory, too small, a main co, a destroyed co resumed) aborts naming the
 * function (forked children, judged by SIGABRT).
 */
#include "aco_test.h"

#include <alloca.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    long allocs, frees;
    long long bytes;                /* live */
    int fail_next;                  /* the next allocation fails */
} counts_t;

static counts_t counts;

static void* my_alloc(void* cookie, size_t sz) {
    CHECK(cookie == &counts);
    if (counts.fail_next) { counts.fail_next = 0; return NULL; }
    char* p = aligned_alloc(16, 16 + ((sz + 15) & ~(size_t)15));
    if (p == NULL) return NULL;
    *(size_t*)p = sz;
    counts.allocs++;
    counts.bytes += (long long)sz;
    return p + 16;
}

static void my_free(void* cookie, void* p, size_t sz) {
    CHECK(cookie == &counts);
    char* b = (char*)p - 16;
    ASSERT_EQ(*(size_t*)b, sz);     /* the size it was asked for */
    counts.frees++;
    counts.bytes -= (long long)sz;
    free(b);
}

static aco_t* main_co;
static aco_share_stack_t* sstk;

/* Keeps `bytes` of patterned stack live across `rounds` yields. */
typedef struct {
    size_t   bytes;
    int      rounds;
    uint32_t seed;
    int      done;
} job_t;

static void worker(void) {
    job_t* j = aco_get_arg();
    volatile unsigned char* buf = alloca(j->bytes);
    aco_test_fill(buf, j->bytes, j->seed);
    for (int r = 0; r < j->rounds; r++) {
        aco_yield();
        CHECK(aco_test_intact(buf, j->bytes, j->seed));
    }
    j->done = 1;
    aco_exit();
}

static void* block(size_t sz) {
    void* m = aligned_alloc(16, (sz + 15) & ~(size_t)15);   /* not counted */
    CHECK(m != NULL);
    memset(m, 0xa5, sz);            /* garbage, even a co's "on" state byte */
    return m;
}

/* Three cos on one share stack, round robin: every resume copies the
 * previous one's frames out to its save stack and this one's back. */
static void no_allocation(void) {
    size_t sz = aco_co_size(2048);
    CHECK(sz >= aco_co_size(0) + 2048);
    void* mem[3];
    job_t jobs[3];
    aco_t* cos[3];
    long allocs = counts.allocs, frees = counts.frees;
    for (int i = 0; i < 3; i++) {
        mem[i] = block(sz);
        jobs[i] = (job_t){.bytes = 300 + 200 * (size_t)i, .rounds = 50, .seed = 7u + (uint32_t)i};
        cos[i] = aco_create_in(mem[i], sz, main_co, sstk, worker, &jobs[i]);
        ASSERT_PTR_EQ(cos[i], mem[i]);
        ASSERT_PTR_EQ(cos[i]->save_stack.ptr, (char*)mem[i] + aco_co_size(0));
        CHECK(cos[i]->save_stack.valid_sz == 0 && !cos[i]->is_end);
    }
    for (int r = 0; r <= 50; r++)
        for (int i = 0; i < 3; i++)
            if (!cos[i]->is_end) aco_resume(cos[i]);
    for (int i = 0; i < 3; i++) {
        CHECK(jobs[i].done && cos[i]->is_end);
        CHECK(cos[i]->save_stack.ct_save >= 50 && cos[i]->save_stack.ct_restore >= 50);
        CHECK(cos[i]->save_stack.max_cpsz > jobs[i].bytes);
        ASSERT_PTR_EQ(cos[i]->save_stack.ptr, (char*)mem[i] + aco_co_size(0));
    }
    /* reset: the same co runs again, still in its own memory */
    jobs[1].done = 0;
    aco_reset(cos[1]);
    while (!cos[1]->is_end) aco_resume(cos[1]);
    CHECK(jobs[1].done);
    ASSERT_PTR_EQ(cos[1]->save_stack.ptr, (char*)mem[1] + aco_co_size(0));
    for (int i = 0; i < 3; i++) aco_destroy(cos[i]);
    ASSERT_EQ(counts.allocs, allocs);           /* not one allocation */
    ASSERT_EQ(counts.frees, frees);             /* nor a free */
    /* the memory is the caller's again: another co in it */
    job_t j = {.bytes = 64, .rounds = 3, .seed = 99};
    aco_t* co = aco_create_in(mem[0], sz, main_co, sstk, worker, &j);
    while (!co->is_end) aco_resume(co);
    CHECK(j.done);
    aco_destroy(co);
    ASSERT_EQ(counts.allocs, allocs);
    for (int i = 0; i < 3; i++) free(mem[i]);
    printf("create_in: 3 cos, %d switches each, no allocation\n", 2 * 51);
}

/* Frames larger than the room: one save stack of libaco's, freed at
 * destroy; and no room at all (sz == aco_co_size(0)): the same, lazily. */
static void outgrown(size_t room) {
    size_t sz = aco_co_size(0) + room;
    void* mem = block(sz);
    job_t a = {.bytes = 4000, .rounds = 20, .seed = 3}, b = {.bytes = 100, .rounds = 20, .seed = 4};
    aco_t* big = aco_create_in(mem, sz, main_co, sstk, worker, &a);
    aco_t* other = aco_create(main_co, sstk, 0, worker, &b);
    CHECK(room > 0 ? big->save_stack.ptr != NULL : big->save_stack.ptr == NULL);
    long allocs = counts.allocs, frees = counts.frees;
    while (!big->is_end || !other->is_end) {
        if (!big->is_end) aco_resume(big);
        if (!other->is_end) aco_resume(other);
    }
    CHECK(a.done && b.done);
    /* big's save stack grew once (its own, outside mem), other's once */
    ASSERT_EQ(counts.allocs, allocs + 2);
    CHECK(big->save_stack.ptr != (char*)mem + aco_co_size(0));
    aco_destroy(big);
    ASSERT_EQ(counts.frees, frees + 1);         /* the save stack, not mem */
    aco_destroy(other);
    free(mem);
    printf("create_in: room %zu, frames of %zu bytes: one save stack of libaco's\n",
           room, a.bytes);
}

/* aco_co_size(n) leaves room for n bytes of frames, whatever the build
 * keeps beside them (its low 3 bits aside, save_stack.sz is the capacity). */
static void sizes(void) {
    for (size_t n = 0; n <= 4100; n += n < 64 ? 1 : 7) {
        size_t sz = aco_co_size(n);
        CHECK(sz >= aco_co_size(0) + n);
        void* mem = block(sz);
        aco_t* co = aco_create_in(mem, sz, main_co, sstk, worker, NULL);
        CHECK((size_t)(co->save_stack.sz & ~7u) >= n);
        CHECK(n == 0 || co->save_stack.ptr == (char*)mem + aco_co_size(0));
        aco_destroy(co);
        free(mem);
    }
}

static void alloc_free(void) {
    long allocs = counts.allocs, frees = counts.frees;
    void* p = aco_alloc(1000);
    CHECK(p != NULL && ((uintptr_t)p & 15) == 0);
    ASSERT_EQ(counts.allocs, allocs + 1);
    memset(p, 1, 1000);
    aco_free(p, 1000);                          /* my_free checks the size */
    ASSERT_EQ(counts.frees, frees + 1);
    aco_free(NULL, 5);                          /* nothing */
    counts.fail_next = 1;
    CHECK(aco_alloc(64) == NULL);               /* out of memory: NULL */
    ASSERT_EQ(counts.allocs, allocs + 1);
}

static char misuse_mem[4096] __attribute__((aligned(16)));

static void null_mem(void* arg) {
    (void)arg;
    aco_create_in(NULL, 4096, main_co, sstk, worker, NULL);
}

static void misaligned(void* arg) {
    (void)arg;
    aco_create_in(misuse_mem + 8, 4000, main_co, sstk, worker, NULL);
}

static void too_small(void* arg) {
    (void)arg;
    aco_create_in(misuse_mem, aco_co_size(0) - 16, main_co, sstk, worker, NULL);
}

static void as_main(void* arg) {
    (void)arg;
    aco_create_in(misuse_mem, sizeof(misuse_mem), NULL, NULL, NULL, NULL);
}

static void destroyed(void* arg) {
    (void)arg;
    job_t j = {.bytes = 16, .rounds = 1, .seed = 1};
    aco_t* co = aco_create_in(misuse_mem, sizeof(misuse_mem), main_co, sstk, worker, &j);
    aco_destroy(co);
    aco_resume(co);
}

static void huge_size(void* arg) {
    (void)arg;
    aco_co_size((size_t)UINT32_MAX);
}

static void zero_alloc(void* arg) {
    (void)arg;
    aco_alloc(0);
}

int main(void) {
    aco_set_allocator(my_alloc, my_free, &counts);
    aco_thread_init(NULL);
    main_co = aco_create(NULL, NULL, 0, NULL, NULL);
    sstk = aco_share_stack_new2(128 * 1024, 1);
    CHECK(aco_co_size(0) >= sizeof(aco_t) && aco_co_size(0) % 16 == 0);

    sizes();
    no_allocation();
    outgrown(1024);
    outgrown(0);
    alloc_free();

    int fails = 0;
    fails += aco_test_expect_signal("NULL mem", null_mem, NULL, SIGABRT,
                                    "aco_create_in|mem must not be NULL");
    fails += aco_test_expect_signal("misaligned", misaligned, NULL, SIGABRT,
                                    "aco_create_in|16-byte aligned");
    fails += aco_test_expect_signal("too small", too_small, NULL, SIGABRT,
                                    "aco_create_in|less than aco_co_size(0)");
    fails += aco_test_expect_signal("main co", as_main, NULL, SIGABRT,
                                    "aco_create_in|non-main cos only");
    fails += aco_test_expect_signal("resume destroyed", destroyed, NULL, SIGABRT,
                                    "aco_resume|destroyed");
    fails += aco_test_expect_signal("aco_co_size(4 GiB)", huge_size, NULL, SIGABRT,
                                    "aco_co_size|exceeds 4 GiB");
    fails += aco_test_expect_signal("aco_alloc(0)", zero_alloc, NULL, SIGABRT,
                                    "aco_alloc|must not be 0");

    aco_share_stack_destroy(sstk);
    aco_destroy(main_co);
    ASSERT_EQ(counts.allocs, counts.frees);
    ASSERT_EQ(counts.bytes, 0);
    if (fails) return 1;
    printf("test_create_in: all passed\n");
    return 0;
}
