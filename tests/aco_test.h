/*
 * aco_test.h - the little harness every program in tests/ uses.
 *
 * A test is one self-checking program: exit status 0 is a pass, anything
 * else (a failed CHECK, a crash, an abort) a failure.  Expected crashes run
 * in a forked child and are judged by the signal that ended it.
 */
#ifndef ACO_TEST_H
#define ACO_TEST_H

#include "aco.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef ACO_USE_VALGRIND
#include <valgrind/valgrind.h>
#endif

#define CHECK(cond)                                                           \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__,  \
                    #cond);                                                   \
            exit(1);                                                          \
        }                                                                     \
    } while (0)

/* Compare two integers (any integer type), printing both on failure. */
#define ASSERT_EQ(a, b)                                                       \
    do {                                                                      \
        intmax_t a_ = (intmax_t)(a), b_ = (intmax_t)(b);                      \
        if (a_ != b_) {                                                       \
            fprintf(stderr, "%s:%d: ASSERT_EQ failed: %s == %jd, %s == %jd\n", \
                    __FILE__, __LINE__, #a, a_, #b, b_);                      \
            exit(1);                                                          \
        }                                                                     \
    } while (0)

#define ASSERT_PTR_EQ(a, b)                                                   \
    do {                                                                      \
        const void *a_ = (const void*)(a), *b_ = (const void*)(b);            \
        if (a_ != b_) {                                                       \
            fprintf(stderr, "%s:%d: ASSERT_PTR_EQ failed: %s == %p, %s == %p\n", \
                    __FILE__, __LINE__, #a, a_, #b, b_);                      \
            exit(1);                                                          \
        }                                                                     \
    } while (0)

/* The stack pointer at the call site.  Tests that ask whether code runs on
 * some stack use this, not the address of a local: under ASan with
 * detect_stack_use_after_return=1, locals may live on ASan's fake stack. */
__attribute__((always_inline)) static inline uintptr_t aco_test_sp(void) {
    uintptr_t sp;
#if defined(__x86_64__)
    __asm__ volatile("movq %%rsp, %0" : "=r"(sp));
#elif defined(__i386__)
    __asm__ volatile("movl %%esp, %0" : "=r"(sp));
#elif defined(__aarch64__)
    __asm__ volatile("mov %0, sp" : "=r"(sp));
#elif defined(__riscv)
    __asm__ volatile("mv %0, sp" : "=r"(sp));
#else
#error "aco_test.h: unsupported architecture"
#endif
    return sp;
}

/* n, opaque to the compiler.  `T a[aco_test_vla(n)]` is a VLA: tests whose
 * checks need an array in the co's frame on its share stack declare it so,
 * because ASan's detect_stack_use_after_return=1 moves fixed-size arrays to
 * its fake stack but never a VLA (still guarded by red zones). */
static inline size_t aco_test_vla(size_t n) {
    __asm__("" : "+r"(n));
    return n;
}

/* Marsaglia's xorshift32: the tests' seeded random numbers (*s != 0). */
static inline uint32_t aco_test_rand(uint32_t* s) {
    uint32_t x = *s;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return *s = x;
}

/* aco.c's hidden test hook: the width of the stack copies' moves on x86-64
 * (16, 32 or 64 bytes, chosen by CPU; 0 elsewhere and in sanitizer builds,
 * which have one kind of copy).  w != 0 selects w if available; returns
 * the width now in use, or -1 when w is not available. */
int aco__copy_width(int w);

/* aco.c's other hidden hook: how acosw treats the FP control words on
 * x86-64 (1: loads to's on every switch, AMD's default; 0: compares and
 * loads on a difference, everyone else's); -1 where the build has one way.
 * mode 0 or 1 selects it; returns the mode in use. */
int aco__fp_mode(int mode);

/* Non-zero when running under valgrind (only known in valgrind builds). */
static inline int aco_test_on_valgrind(void) {
#ifdef ACO_USE_VALGRIND
    return RUNNING_ON_VALGRIND != 0;
#else
    return 0;
#endif
}

/* n, or n / div (at least 1) under valgrind, which is ~50x slower. */
static inline long aco_test_scale(long n, long div) {
    if (!aco_test_on_valgrind()) return n;
    return n / div > 0 ? n / div : 1;
}

/*
 * Run fn(arg) in a forked child whose stderr is captured.  Returns 0 when
 * the child was killed by signal `sig` and (if `needle` is not NULL) its
 * stderr contains every '|'-separated part of needle; otherwise prints why
 * and returns 1.  The child's stderr is echoed on failure.
 */
static inline int aco_test_expect_signal(const char* what, void (*fn)(void*),
                                         void* arg, int sig,
                                         const char* needle) {
    int pfd[2];
    if (pipe(pfd) != 0) { perror("pipe"); return 1; }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) { perror("fork"); return 1; }
    if (pid == 0) {
        close(pfd[0]);
        dup2(pfd[1], 2);
        close(pfd[1]);
        fn(arg);
        _exit(0);   /* returning means the expected crash did not happen */
    }
    close(pfd[1]);
    static char buf[16384];
    size_t len = 0;
    ssize_t r;
    while ((r = read(pfd[0], buf + len, sizeof(buf) - 1 - len)) > 0 ||
           (r < 0 && errno == EINTR)) {
        if (r > 0) len += (size_t)r;
        if (len == sizeof(buf) - 1) break;
    }
    buf[len] = 0;
    close(pfd[0]);
    int st;
    while (waitpid(pid, &st, 0) < 0) {
        if (errno != EINTR) { perror("waitpid"); return 1; }
    }
    int ok = WIFSIGNALED(st) && WTERMSIG(st) == sig;
    if (!ok) {
        if (WIFSIGNALED(st))
            fprintf(stderr, "%s: child killed by signal %d, expected %d\n",
                    what, WTERMSIG(st), sig);
        else
            fprintf(stderr, "%s: child exited with %d, expected signal %d\n",
                    what, WEXITSTATUS(st), sig);
    }
    if (ok && needle != NULL) {
        const char* p = needle;
        while (*p) {
            const char* bar = strchr(p, '|');
            size_t n = bar ? (size_t)(bar - p) : strlen(p);
            char part[256];
            if (n >= sizeof(part)) n = sizeof(part) - 1;
            memcpy(part, p, n);
            part[n] = 0;
            if (strstr(buf, part) == NULL) {
                fprintf(stderr, "%s: child's stderr lacks \"%s\"\n", what, part);
                ok = 0;
            }
            p += n;
            if (*p == '|') p++;
        }
    }
    if (!ok) fprintf(stderr, "%s: child's stderr:\n%s\n", what, buf);
    return ok ? 0 : 1;
}

/*
 * Patterned bytes, and a worker co that keeps them live across its yields:
 * the fixture of the programs about the resume protocol and the copies of a
 * shared stack (test_resume_protocol, test_copy_counts).
 */

/* Byte i of the pattern `seed`. */
static inline unsigned char aco_test_pattern(uint32_t seed, size_t i) {
    return (unsigned char)(seed * 2654435761u + i * 131u + (i >> 8));
}

static inline void aco_test_fill(volatile unsigned char* p, size_t n,
                                 uint32_t seed) {
    for (size_t i = 0; i < n; i++) p[i] = aco_test_pattern(seed, i);
}

static inline int aco_test_intact(const volatile unsigned char* p, size_t n,
                                  uint32_t seed) {
    for (size_t i = 0; i < n; i++)
        if (p[i] != aco_test_pattern(seed, i)) return 0;
    return 1;
}

/* The copy statistics of co, exactly. */
#define EXPECT_COUNTS(co, save, restore)                                      \
    do {                                                                      \
        ASSERT_EQ((co)->save_stack.ct_save, (save));                          \
        ASSERT_EQ((co)->save_stack.ct_restore, (restore));                    \
    } while (0)

/* Bytes of each frame a worker dives through. */
#define ACO_TEST_FRAME_BYTES 200

/* A worker keeps a patterned array of `big` bytes in its co function and,
 * below it, `depth` frames of ACO_TEST_FRAME_BYTES patterned bytes each,
 * live across every yield; it checks them all after each resume.  After
 * its rounds it calls aco_exit() from a nested call. */
struct aco_test_worker {
    aco_t* self;
    uint32_t seed;        /* pattern seed, changed by the worker every round */
    size_t big;           /* bytes of the patterned array in the co function */
    int depth;            /* frames below it at the next yield */
    int rounds_left;      /* yields left; then aco_exit() from a nested call */
    int rounds_done;
    uintptr_t low_addr;   /* lowest patterned byte at the last yield */
    int bad;              /* identity or pattern failures seen inside */
    int after_exit;       /* set if code after aco_exit() ever ran */
};

/* noinline, hence not `inline`: `unused` spares the programs that do not
 * use the worker gcc's warning. */
__attribute__((noinline, unused)) static void
aco_test_worker_finish(struct aco_test_worker* w) {
    aco_exit();
    w->after_exit = 1;
}

/* Recurse `depth` frames, each with its own patterned buffer, then yield at
 * the bottom; on the way back every buffer must still hold its pattern. */
__attribute__((noinline, unused)) static void
aco_test_worker_dive(struct aco_test_worker* w, int depth, uint32_t seed) {
    /* A VLA, so that it lies on the share stack (see aco_test_vla). */
    volatile unsigned char buf[aco_test_vla(ACO_TEST_FRAME_BYTES)];
    aco_test_fill(buf, sizeof(buf), seed + (uint32_t)depth);
    if (depth > 0) {
        aco_test_worker_dive(w, depth - 1, seed);
    } else {
        w->low_addr = (uintptr_t)buf;
        aco_yield();
        if (aco_get_co() != w->self || aco_get_arg() != w) w->bad++;
    }
    if (!aco_test_intact(buf, sizeof(buf), seed + (uint32_t)depth)) w->bad++;
}

/* The worker's co function; its argument is its struct aco_test_worker. */
static inline void aco_test_worker_co(void) {
    struct aco_test_worker* w = aco_get_arg();
    /* A VLA: its size comes from main, so the compiler cannot shrink it. */
    volatile unsigned char big[w->big];
    while (w->rounds_left > 0) {
        uint32_t seed = w->seed;
        aco_test_fill(big, w->big, seed);
        w->low_addr = (uintptr_t)big;
        if (w->depth > 0)
            aco_test_worker_dive(w, w->depth, seed ^ 0x5a5a5a5au);
        else
            aco_yield();
        if (aco_get_co() != w->self || aco_get_co()->is_end) w->bad++;
        if (!aco_test_intact(big, w->big, seed)) w->bad++;
        w->rounds_left--;
        w->rounds_done++;
        w->seed = seed * 7u + 1u;
    }
    aco_test_worker_finish(w);
}

/* A new worker co on sstk (save stack of save_sz bytes to start with) that
 * yields `rounds` times after its start; checks the fields aco_create set. */
static inline aco_t* aco_test_worker_new(aco_t* main_co,
                                         aco_share_stack_t* sstk,
                                         size_t save_sz,
                                         struct aco_test_worker* w,
                                         uint32_t seed, size_t big,
                                         int rounds) {
    memset(w, 0, sizeof(*w));
    w->seed = seed;
    w->big = big;
    w->rounds_left = rounds;
    aco_t* co = aco_create(main_co, sstk, save_sz, aco_test_worker_co, w);
    w->self = co;
    ASSERT_PTR_EQ(co->share_stack, sstk);
    ASSERT_PTR_EQ(co->main_co, main_co);
    ASSERT_PTR_EQ(co->arg, w);
    CHECK(co->fp == aco_test_worker_co);
    CHECK(!aco_is_main_co(co));
    EXPECT_COUNTS(co, 0, 0);
    ASSERT_EQ(co->save_stack.max_cpsz, 0);
    return co;
}

/* The live bytes of a worker suspended at its last yield reach from below
 * low_addr up to the top of the share stack (align_retptr, within 24 bytes
 * of ptr + sz), so a save copies at least this much. */
static inline size_t aco_test_worker_live(const aco_share_stack_t* s,
                                          const struct aco_test_worker* w) {
    uintptr_t top = (uintptr_t)s->ptr + s->sz - 24;
    CHECK(w->low_addr >= (uintptr_t)s->ptr && w->low_addr < top);
    return top - w->low_addr;
}

#endif /* ACO_TEST_H */
