/*
 * test_allocator.c - aco_set_allocator: every co object, save stack, share
 * stack record and unguarded share stack comes from the program's
 * allocator, with its cookie, and goes back to it with the size it was
 * asked for; guarded stacks stay mmap'd; nothing is left when all is
 * destroyed.  Misuse (a second call, a call after libaco allocated, only
 * one of the two functions) aborts naming aco_set_allocator (forked
 * children: each must die by SIGABRT with the rule).
 */
#include "aco_test.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    long allocs, frees;
    long long bytes;                /* live */
    long long peak;
} counts_t;

static counts_t counts;

/* Each block carries its size in front, to check what free is told. */
static void* my_alloc(void* cookie, size_t sz) {
    CHECK(cookie == &counts);
    char* p = aligned_alloc(16, 16 + ((sz + 15) & ~(size_t)15));
    if (p == NULL) return NULL;
    *(size_t*)p = sz;
    counts.allocs++;
    counts.bytes += (long long)sz;
    if (counts.bytes > counts.peak) counts.peak = counts.bytes;
    return p + 16;
}

static void my_free(void* cookie, void* p, size_t sz) {
    CHECK(cookie == &counts);
    CHECK(p != NULL);
    char* b = (char*)p - 16;
    ASSERT_EQ(*(size_t*)b, sz);     /* the size it was asked for */
    counts.frees++;
    counts.bytes -= (long long)sz;
    free(b);
}

static int depth_rounds;

/* Uses n KiB of its stack across a yield: its save stack grows to it. */
static void deep(int kib) {
    volatile char buf[1024];
    memset((char*)buf, kib, sizeof(buf));
    if (kib > 1) deep(kib - 1);
    else aco_yield();
    CHECK(buf[0] == (char)kib && buf[1023] == (char)kib);
}

static void co_fn(void) {
    int kib = *(int*)aco_get_arg();
    for (int r = 0; r < depth_rounds; r++) deep(kib + r % 3);
    aco_exit();
}

static void test_counted(void) {
    aco_set_allocator(my_alloc, my_free, &counts);
    aco_thread_init(NULL);
    aco_t* main_co = aco_create(NULL, NULL, 0, NULL, NULL);
    CHECK(counts.allocs >= 1);                  /* the main co itself */
    long main_allocs = counts.allocs;
    /* two share stacks: one guarded (its memory mmap'd), one not */
    aco_share_stack_t* sg = aco_share_stack_new2(64 * 1024, 1);
    aco_share_stack_t* su = aco_share_stack_new2(64 * 1024, 0);
    /* two records, one stack (checked mode maps every stack: aco.h) */
    ASSERT_EQ(counts.allocs, main_allocs + (aco_checked() ? 2 : 3));
    int kibs[6] = {1, 3, 5, 8, 13, 2};
    aco_t* cos[6];
    depth_rounds = 4;
    for (int i = 0; i < 6; i++)
        cos[i] = aco_create(main_co, i & 1 ? su : sg, 0, co_fn, &kibs[i]);
    long before_run = counts.allocs;
    /* interleaved on two stacks: every switch saves the other's frames */
    for (int round = 0; round <= depth_rounds; round++)
        for (int i = 0; i < 6; i++)
            if (!cos[i]->is_end) aco_resume(cos[i]);
    for (int i = 0; i < 6; i++) CHECK(cos[i]->is_end);
    CHECK(counts.allocs > before_run);          /* save stacks grew */
    for (int i = 0; i < 6; i++) aco_destroy(cos[i]);
    aco_share_stack_destroy(sg);
    aco_share_stack_destroy(su);
    aco_destroy(main_co);
    ASSERT_EQ(counts.allocs, counts.frees);
    ASSERT_EQ(counts.bytes, 0);
    /* the unguarded stack (checked mode maps it instead: aco.h) */
    CHECK(aco_checked() || counts.peak >= 64 * 1024);
    printf("allocator: %ld allocations, all given back, peak %lld bytes\n",
           counts.allocs, counts.peak);
}

static void* other_alloc(void* c, size_t sz) { (void)c; return malloc(sz); }
static void other_free(void* c, void* p, size_t sz) { (void)c; (void)sz; free(p); }

static void again(void* arg) {
    (void)arg;
    aco_set_allocator(other_alloc, other_free, NULL);   /* a second time */
}

static void half(void* arg) {
    (void)arg;
    aco_set_allocator(other_alloc, NULL, NULL);
}

int main(void) {
    /* misuse first, in children (this process has not allocated yet) */
    int fails = 0;
    fails += aco_test_expect_signal("only alloc", half, NULL, SIGABRT,
                                    "aco_set_allocator|give both alloc and free");
    test_counted();
    fails += aco_test_expect_signal("after allocating", again, NULL, SIGABRT,
                                    "aco_set_allocator|before libaco allocates");
    aco_set_allocator(NULL, NULL, NULL);        /* (both NULL: no change) */
    if (fails) return 1;
    printf("test_allocator: all passed\n");
    return 0;
}
