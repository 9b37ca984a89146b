/*
 * test_big_stack.c - share stacks of 4 GiB and more work on 64-bit: 8 GiB
 * and 4 GiB - 1 MiB stacks are created with at least the size asked for,
 * two cos on each use a 64 KiB array and a deep recursion, are copied out
 * and back by turns with their locals intact, and everything is destroyed.
 * Sizes no address space can hold (SIZE_MAX - 4096, SIZE_MAX, SIZE_MAX / 2
 * on 64-bit, SIZE_MAX - 1 MiB on 32-bit) make aco_share_stack_new2 abort
 * with its message (on 32-bit with the reason: address space or out of
 * memory), with and without a guard page, never crash (forked children).
 * The largest save stack aco.h allows (4 GiB - 8) on 32-bit: aco_co_size
 * and aco_create abort by name instead of wrapping to a small size (ASan
 * keeps room after a save stack: that sum overflowed), forked children.
 * Sanitizer builds use 1 GiB instead of 8 GiB (their shadow memory).
 * ASan: an 8 GiB stack whose co used little is destroyed without its whole
 * shadow made resident (the RSS grows by less than 128 MiB).
 */
#include "aco_test.h"

#include <sys/resource.h>

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

static volatile long depth_limit = 3000;
static uintptr_t deepest_sp;        /* recurse()'s sp at its deepest */

/* A co that yields once with a small frame, then ends. */
__attribute__((unused)) static void co_shallow(void) {
    volatile char buf[64];
    buf[0] = 1;
    aco_yield();
    buf[63] = buf[0];
    aco_exit();
}

/* Not a tail call: every frame stays live until the callee returns. */
__attribute__((noinline)) static long recurse(long depth) {
    volatile unsigned char buf[aco_test_vla(200)];  /* on the real stack */
    buf[0] = (unsigned char)depth;
    buf[199] = (unsigned char)(depth >> 3);
    if (depth >= depth_limit) {
        deepest_sp = aco_test_sp();
        return buf[0];
    }
    return recurse(depth + 1) + buf[0] - buf[199];
}

/* What recurse(0) returns, computed without recursion. */
static long expected_sum(long limit) {
    long v = (unsigned char)limit;
    for (long d = 0; d < limit; d++)
        v += (unsigned char)d - (unsigned char)(d >> 3);
    return v;
}

struct run {
    aco_share_stack_t* s;
    uintptr_t first_sp, lowest;
    int tag;
};

static void co_use_stack(void) {
    struct run* r = aco_get_arg();
    uintptr_t lo = (uintptr_t)r->s->ptr, hi = lo + r->s->sz;
    r->first_sp = aco_test_sp();
    CHECK(r->first_sp > lo && r->first_sp <= hi);
    CHECK(hi - r->first_sp < 64 * KiB);      /* it starts at the top */
    const size_t n = 64 * KiB;
    volatile unsigned char a[aco_test_vla(n)];
    for (size_t i = 0; i < n; i += 512) a[i] = (unsigned char)(i / 512 + r->tag);
    a[n - 1] = (unsigned char)(0x5a ^ r->tag);
    CHECK((uintptr_t)&a[0] >= lo && (uintptr_t)&a[n - 1] < hi);
    aco_yield();
    long v = recurse(0);
    ASSERT_EQ(v, expected_sum(depth_limit));
    r->lowest = deepest_sp;
    aco_yield();
    /* copied out and back in between: the array is intact */
    for (size_t i = 0; i < n; i += 512)
        CHECK(a[i] == (unsigned char)(i / 512 + r->tag));
    CHECK(a[n - 1] == (unsigned char)(0x5a ^ r->tag));
    aco_exit();
}

static void test_size(aco_t* main_co, size_t want, int touch_bottom) {
    aco_share_stack_t* s = aco_share_stack_new(want);
    CHECK(s != NULL && s->ptr != NULL);
    CHECK(s->sz >= want);
    if (touch_bottom) {
        /* the whole range is usable memory, its lowest byte included */
        volatile unsigned char* bottom = s->ptr;
        bottom[0] = 0x77;
        CHECK(bottom[0] == 0x77);
        bottom[0] = 0;
    }
    struct run r1 = {s, 0, 0, 1}, r2 = {s, 0, 0, 2};
    aco_t* c1 = aco_create(main_co, s, 0, co_use_stack, &r1);
    aco_t* c2 = aco_create(main_co, s, 0, co_use_stack, &r2);
    aco_resume(c1);
    aco_resume(c2);                 /* c1 (64 KiB and more) copied out */
    aco_resume(c1);
    aco_resume(c2);
    aco_resume(c1);
    aco_resume(c2);
    ASSERT_EQ(c1->is_end, 1);
    ASSERT_EQ(c2->is_end, 1);
    CHECK(c1->save_stack.max_cpsz >= 64 * KiB);
    CHECK(r1.lowest >= (uintptr_t)s->ptr);
    CHECK(r1.first_sp - r1.lowest > 64 * KiB + (size_t)depth_limit * 200);
    aco_destroy(c1);
    aco_destroy(c2);
    aco_share_stack_destroy(s);
}

/* ---- impossible sizes -------------------------------------------------- */
struct huge {
    size_t sz;
    char guard;
};

static void child_huge(void* arg) {
    const struct huge* h = arg;
    struct rlimit rl = {0, 0};
    setrlimit(RLIMIT_CORE, &rl);
    aco_share_stack_t* s = aco_share_stack_new2(h->sz, h->guard);
    fprintf(stderr, "got a share stack of %zu bytes at %p\n", s->sz, s->ptr);
}

/* Run child_huge in a child, capturing its stderr into buf. */
static int run_huge(const struct huge* h, char* buf, size_t cap) {
    int pfd[2];
    CHECK(pipe(pfd) == 0);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        close(pfd[0]);
        dup2(pfd[1], 2);
        close(pfd[1]);
        child_huge((void*)h);
        _exit(0);
    }
    close(pfd[1]);
    size_t len = 0;
    char chunk[4096];
    ssize_t r;
    /* to the end: what does not fit is dropped, the child never blocks */
    while ((r = read(pfd[0], chunk, sizeof(chunk))) != 0) {
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) break;
        size_t n = (size_t)r < cap - 1 - len ? (size_t)r : cap - 1 - len;
        memcpy(buf + len, chunk, n);
        len += n;
    }
    buf[len] = 0;
    close(pfd[0]);
    int st;
    while (waitpid(pid, &st, 0) < 0) CHECK(errno == EINTR);
    return st;
}

static int expect_refused(size_t sz, char guard, int need_reason) {
    static char buf[8192];
    struct huge h = {sz, guard};
    int st = run_huge(&h, buf, sizeof(buf));
    int ok = WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT &&
             strstr(buf, "aco_share_stack_new2") != NULL;
    if (ok && need_reason)
        ok = strstr(buf, "address space") != NULL ||
             strstr(buf, "out of memory") != NULL;
    if (!ok) {
        fprintf(stderr, "aco_share_stack_new2(%zu, %d): expected SIGABRT and "
                "\"aco_share_stack_new2\"%s; status 0x%x, stderr:\n%s\n", sz,
                guard, need_reason ? " and the reason" : "", st, buf);
        return 1;
    }
    return 0;
}

/* ---- the largest save stack ------------------------------------------- */
#define SAVE_MAX_SZ ((size_t)UINT32_MAX & ~(size_t)7)  /* aco.h: 4 GiB - 8 */

static aco_t* big_main;
static aco_share_stack_t* big_sstk;

static void child_co_size(void* arg) {
    (void)arg;
    size_t sz = aco_co_size(SAVE_MAX_SZ);
    fprintf(stderr, "aco_co_size(%zu) returned %zu\n", SAVE_MAX_SZ, sz);
}

static void child_create(void* arg) {
    (void)arg;
    struct rlimit rl = {0, 0};
    setrlimit(RLIMIT_CORE, &rl);
    aco_t* co = aco_create(big_main, big_sstk, SAVE_MAX_SZ, co_shallow, NULL);
    fprintf(stderr, "aco_create returned a co with a save stack of %u bytes\n",
            co->save_stack.sz);
}

static int largest_save_stack(aco_t* main_co) {
    int fails = 0;
    if (sizeof(void*) == 8) {
        CHECK(aco_co_size(SAVE_MAX_SZ) >= aco_co_size(0) + SAVE_MAX_SZ);
        return 0;
    }
    big_main = main_co;
    big_sstk = aco_share_stack_new(0);
    fails += aco_test_expect_signal("aco_co_size(4 GiB - 8)", child_co_size, NULL,
                                    SIGABRT, "aco: aco_co_size: |address space");
    fails += aco_test_expect_signal("aco_create(4 GiB - 8)", child_create, NULL, SIGABRT,
                                    "aco: aco_create: ");
    aco_share_stack_destroy(big_sstk);
    return fails;
}

int main(void) {
    aco_thread_init(NULL);
    aco_t* main_co = aco_create(NULL, NULL, 0, NULL, NULL);
    int fails = 0;
    const int wide = sizeof(void*) == 8;

    if (aco_test_on_valgrind()) depth_limit = 1000;
    if (wide) {
        size_t big = (size_t)8 << 30;
        int touch = !aco__san_switch && !aco_test_on_valgrind();
        if (aco__san_switch) {
            big = (size_t)1 << 30;
            printf("test_big_stack: sanitizer build: 1 GiB instead of 8 GiB "
                   "(the sanitizer's shadow and mapping limits)\n");
        }
        if (!touch)
            printf("test_big_stack: the stacks' lowest byte not written "
                   "(sanitizer or valgrind build: its view of the stack)\n");
        test_size(main_co, big, touch);
        test_size(main_co, ((size_t)4 << 30) - MiB, touch);
        test_size(main_co, ((size_t)4 << 30) + 4096, touch);
    } else {
        printf("test_big_stack: 32-bit: no stacks of 4 GiB and more (no "
               "address space for them); 64 MiB instead\n");
        test_size(main_co, 64 * MiB, !aco__san_switch && !aco_test_on_valgrind());
    }

    /* 64-bit: no address space holds 8 EiB; 32-bit: none holds 4 GiB (2 GiB
     * may well fit there) */
    fails += expect_refused(SIZE_MAX - 4096, 1, !wide);
    fails += expect_refused(SIZE_MAX, 1, !wide);
    fails += expect_refused(SIZE_MAX - 4, 0, !wide);
    if (wide) {
        fails += expect_refused(SIZE_MAX / 2, 1, 0);
        fails += expect_refused(SIZE_MAX / 2, 0, 0);
    } else {
        fails += expect_refused(SIZE_MAX - MiB, 1, 1);
        fails += expect_refused(SIZE_MAX - MiB, 0, 1);
    }
    fails += largest_save_stack(main_co);
    ASSERT_EQ(fails, 0);

#if aco__asan
    /* ASan: destroying a big stack writes the shadow of the part frames
     * used, not of all of it (8 GiB: 1 GiB of shadow, made resident for
     * nothing, took a second and the RSS with it). */
    if (wide) {
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        long before = ru.ru_maxrss;
        aco_share_stack_t* s = aco_share_stack_new2((size_t)8 << 30, 1);
        aco_t* co = aco_create(main_co, s, 0, co_shallow, NULL);
        aco_resume(co);
        aco_resume(co);
        ASSERT_EQ(co->is_end, 1);
        aco_destroy(co);
        aco_share_stack_destroy(s);
        getrusage(RUSAGE_SELF, &ru);
        if (ru.ru_maxrss - before > 128 * 1024) {
            fprintf(stderr, "test_big_stack: destroying an 8 GiB stack under ASan took "
                    "%ld KiB of RSS\n", ru.ru_maxrss - before);
            return 1;
        }
    }
#endif

    aco_destroy(main_co);
    printf("test_big_stack: OK\n");
    return 0;
}
