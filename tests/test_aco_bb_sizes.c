/*
 * test_aco_bb_sizes.c - black-box: share-stack sizes, the guard, save-stack
 * and co sizes, from aco.h alone.
 *
 *   - aco_share_stack_new2(sz, guard): sz 0 means 2 MiB; the usable size is
 *     >= 4096, >= sz, a multiple of 16 (of the page size with a guard), as
 *     close to sz as that allows; guard_page_enabled says which;
 *     aco_share_stack_new(sz) is new2(sz, 1).  A co can use the stack from
 *     its top down to nearly ptr, in sizes that are no page multiple too.
 *   - With a guard, 1 MiB and a page below ptr are inaccessible: a write at
 *     ptr - 1 and at ptr - 1 MiB - page faults (SIGSEGV), and so does a
 *     co's single frame whose lowest byte lies up to 1 MiB below the stack;
 *     aco_overflow_report_install names the co and the stack first.
 *   - aco_share_stack_try_new2 says NULL/ENOMEM for sizes no memory holds
 *     (SIZE_MAX and near it: no wrap-around into a small stack), where
 *     aco_share_stack_new2 aborts naming itself.
 *   - aco_co_size(0) is a multiple of 16 and aco_co_size(n) holds n more.
 */
#include "aco_test.h"

#include <sys/mman.h>

static aco_t* main_co;
static size_t page;
static int fails;

static size_t round_up(size_t x, size_t u) { return (x + u - 1) / u * u; }

/* A co that touches its stack down to `arg` bytes above ptr, then yields. */
struct deep { size_t keep; int ok; };

static void co_fill(void) {
    struct deep* d = aco_get_arg();
    aco_share_stack_t* s = aco_get_co()->share_stack;
    uintptr_t sp = aco_test_sp();
    uintptr_t lo = (uintptr_t)s->ptr + d->keep;
    CHECK(sp > lo && sp <= (uintptr_t)s->ptr + s->sz);
    size_t n = sp - lo - 256;           /* a VLA from below sp to lo */
    volatile unsigned char b[aco_test_vla(n)];
    aco_test_fill(b, n, 42);
    aco_yield();
    d->ok = aco_test_intact(b, n, 42);
    aco_exit();
}

static void co_yield_once(void) {
    aco_yield();
    aco_exit();
}

static void sizes(void) {
    static const size_t asks[] = {0, 1, 15, 16, 17, 4095, 4096, 4097, 5000, 12345,
                                  65536 + 8, 3 * 1024 * 1024 + 1};
    for (unsigned i = 0; i < sizeof(asks) / sizeof(asks[0]); i++) {
        for (int g = 0; g < 3; g++) {
            size_t sz = asks[i];
            aco_share_stack_t* s =
                g == 2 ? aco_share_stack_new(sz) : aco_share_stack_new2(sz, (char)g);
            int guard = g != 0;
            size_t want = sz == 0 ? 2u << 20 : sz;
            if (want < 4096) want = 4096;
            want = round_up(want, guard ? page : 16);
            if (s->sz != want) {
                fprintf(stderr, "new2(%zu, %d): sz %zu, expected %zu\n", sz, g, s->sz,
                        want);
                fails++;
            }
            CHECK((s->guard_page_enabled != 0) == guard);
            /* (16 is not promised: valgrind's i386 malloc gives 8) */
            CHECK((uintptr_t)s->ptr % sizeof(void*) == 0);
            if (guard && !aco_checked()) CHECK((uintptr_t)s->ptr % page == 0);
            ASSERT_PTR_EQ(s->owner, NULL);

            /* Two cos use it: one fills it down to near ptr (not under the
             * sanitizers on the smallest stacks: their runtime runs on the
             * co's stack, aco.h). */
            size_t keep = aco__san_switch ? 3072 : 1024;
            if (s->sz >= 4 * keep + 4096 || (!aco__san_switch && s->sz >= 4096)) {
                struct deep d = {keep, 0};
                aco_t* a = aco_create(main_co, s, 0, co_fill, &d);
                aco_t* b = aco_create(main_co, s, 0, co_yield_once, NULL);
                aco_resume(a);
                aco_resume(b);          /* evicts a: nearly the whole stack */
                CHECK(a->save_stack.max_cpsz + keep + 512 >= s->sz);
                aco_resume(a);
                CHECK(a->is_end);
                CHECK(d.ok);
                aco_resume(b);
                aco_destroy(a);
                aco_destroy(b);
            }
            aco_share_stack_destroy(s);
        }
    }
}

/* ------------------------------------------------------------------------ */
/* The guard.                                                               */
/* ------------------------------------------------------------------------ */

static aco_share_stack_t* guarded;

static void child_write_below(void* arg) {
    size_t off = (size_t)arg;
    volatile char* p = (volatile char*)guarded->ptr - off;
    *p = 1;
}

static void co_big_frame(void) {
    size_t n = (size_t)aco_get_arg();
    volatile unsigned char b[aco_test_vla(n)];
    b[0] = 1;                           /* its lowest byte first */
    b[n - 1] = 1;
    CHECK(b[0] == 1);
    aco_exit();
}

static void child_big_frame(void* arg) {
    aco_t* co = aco_create(main_co, guarded, 0, co_big_frame, arg);
    aco_resume(co);
}

static void child_big_frame_reported(void* arg) {
    aco_overflow_report_install();
    child_big_frame(arg);
}

static void guard(void) {
    if (aco_checked()) {
        printf("guard: checked mode, ptr is not where a co runs (aco.h): skipped\n");
        return;
    }
    guarded = aco_share_stack_new(64 * 1024);
    if (aco_test_expect_signal("write at ptr - 1", child_write_below, (void*)1,
                               SIGSEGV, NULL))
        fails++;
    if (aco_test_expect_signal("write at ptr - page", child_write_below,
                               (void*)page, SIGSEGV, NULL))
        fails++;
    if (aco_test_expect_signal("write at ptr - 1 MiB - page", child_write_below,
                               (void*)((1u << 20) + page), SIGSEGV, NULL))
        fails++;
    /* a single frame whose lowest byte is 900 KiB below the stack */
    size_t n = 64 * 1024 + 900 * 1024;
    if (aco_test_expect_signal("a 964 KiB frame on a 64 KiB stack", child_big_frame,
                               (void*)n, SIGSEGV, NULL))
        fails++;
    char needle[256];
    snprintf(needle, sizeof(needle), "overflowed its share stack %p", (void*)guarded);
    if (aco_test_expect_signal("the same, reported", child_big_frame_reported,
                               (void*)n, SIGSEGV, needle))
        fails++;
    /* a frame that fits is fine */
    aco_t* co = aco_create(main_co, guarded, 0, co_big_frame,
                           (void*)(size_t)(32 * 1024));
    aco_resume(co);
    CHECK(co->is_end);
    aco_destroy(co);
    aco_share_stack_destroy(guarded);
}

/* ------------------------------------------------------------------------ */
/* Impossible sizes.                                                        */
/* ------------------------------------------------------------------------ */

static void child_new2_huge(void* arg) {
    char g = (char)(intptr_t)arg;
    volatile size_t sz = SIZE_MAX - 4095;
    aco_share_stack_t* s = aco_share_stack_new2(sz, g);
    fprintf(stderr, "new2(SIZE_MAX - 4095, %d) returned %p, sz %zu\n", g, (void*)s,
            s ? s->sz : 0);
}

static void impossible(void) {
    const size_t huge[] = {SIZE_MAX, SIZE_MAX - 1, SIZE_MAX - 15, SIZE_MAX - 4095,
                           SIZE_MAX - (2u << 20), SIZE_MAX / 2 + 1};
    /* half the address space may be had on i386: 64-bit only */
    unsigned count = sizeof(huge) / sizeof(huge[0]) - (sizeof(size_t) == 4);
    for (unsigned i = 0; i < count; i++) {
        for (int g = 0; g < 2; g++) {
            errno = 0;
            volatile size_t sz = huge[i];
            aco_share_stack_t* s = aco_share_stack_try_new2(sz, (char)g);
            if (s != NULL || errno != ENOMEM) {
                fprintf(stderr, "try_new2(%zu, %d): %p (sz %zu), errno %d; "
                        "expected NULL, ENOMEM\n", huge[i], g, (void*)s,
                        s ? s->sz : 0, errno);
                fails++;
                if (s && s->sz >= huge[i]) aco_share_stack_destroy(s);
            }
        }
    }
    for (intptr_t g = 0; g < 2; g++) {
        char what[64];
        snprintf(what, sizeof(what), "new2(SIZE_MAX - 4095, %d)", (int)g);
        if (aco_test_expect_signal(what, child_new2_huge, (void*)g, SIGABRT,
                                   "aco: aco_share_stack_new2: "))
            fails++;
    }
}

/* ------------------------------------------------------------------------ */
/* aco_co_size.                                                             */
/* ------------------------------------------------------------------------ */

static void co_sizes(void) {
    size_t base = aco_co_size(0);
    CHECK(base % 16 == 0);
    CHECK(base >= sizeof(aco_t));
    static const size_t ns[] = {1, 8, 100, 4096, 1u << 20, (size_t)UINT32_MAX - 7};
    size_t prev = base;
    /* 4 GiB - 8 only where size_t holds it with the co object */
    unsigned count = sizeof(ns) / sizeof(ns[0]) - (sizeof(size_t) == 4);
    for (unsigned i = 0; i < count; i++) {
        size_t c = aco_co_size(ns[i]);
        CHECK(c >= base + ns[i]);
        CHECK(c >= prev);
        prev = c;
    }
}

int main(void) {
    page = (size_t)sysconf(_SC_PAGESIZE);
    aco_thread_init(NULL);
    main_co = aco_create(NULL, NULL, 0, NULL, NULL);
    sizes();
    guard();
    impossible();
    co_sizes();
    aco_destroy(main_co);
    if (fails) {
        fprintf(stderr, "%d failures\n", fails);
        return 1;
    }
    printf("ok\n");
    return 0;
}
