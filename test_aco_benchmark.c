/*
 * test_aco_benchmark.c - libaco's benchmark table: the cost of aco_create,
 * of a resume + yield round trip (standalone, and on a shared stack with a
 * given number of live bytes to copy), of one acosw, and of aco_destroy.
 *
 * Copyright 2026 the libaco authors.  Apache License 2.0 (see LICENSE).
 *
 *   test_aco_benchmark            the default table (~15 s of CPU)
 *   test_aco_benchmark --long     the full table (minutes; up to 10M cos)
 *   test_aco_benchmark --smoke    a tiny run of every row kind (what test.sh
 *                                 runs, under valgrind memcheck too)
 *
 * Pin it for stable numbers: taskset -c 1 ./test_aco_benchmark
 *
 * Every row is checked, and the exit status says whether every check held:
 * cos on a shared stack verify their live bytes after each yield (cheaply)
 * and at the end (every byte), and the copy size in a row's label is the
 * one libaco really copied (save_stack.max_cpsz, the same for every co),
 * which must lie within BENCH_COPY_SLACK bytes of the size the case asked
 * for.  The live bytes are made observable on purpose: an unused local
 * array is a dead store the compiler deletes, and a benchmark built on one
 * silently measures ~24-byte copies whatever its labels say.
 *
 * Layout, for extending it (side-by-side runs of other context switches, a
 * memory mode): the three workloads - create N cos, run R resume/yield round
 * trips over them, destroy them - are the functions bench_create(),
 * bench_rounds() and bench_destroy(); a case (bench_case_t) strings them
 * together with the checks, and a mode is a table of cases.
 */
#include "aco.h"

#include <alloca.h>
#include <inttypes.h>
#include <stdarg.h>
#include <sys/resource.h>

#ifdef ACO_USE_VALGRIND
#include <valgrind/valgrind.h>
#endif

/* __VERSION__ names clang ("... Clang 14.0.6 ...") but not gcc ("12.2.0"). */
#if defined(__clang__)
#define BENCH_COMPILER __VERSION__
#elif defined(__GNUC__)
#define BENCH_COMPILER "gcc " __VERSION__
#else
#define BENCH_COMPILER __VERSION__
#endif

#if defined(__x86_64__)
#define BENCH_ARCH "x86_64"
#elif defined(__i386__)
#define BENCH_ARCH "i386"
#else
#error "test_aco_benchmark: unknown architecture"
#endif

/* A measured copy size may differ this much from the intended one: sizes
 * move in 16-byte steps (the ABI's stack alignment), and the smallest ones
 * are whatever frame the compiler gives the co function. */
#define BENCH_COPY_SLACK 16

/* Initial save stack of every co, as in upstream's table. */
#define BENCH_INIT_SAVE_STK_SZ 64

/* ------------------------------------------------------------------------ */
/* Checks: report, count, keep going; the count decides the exit status.   */
/* ------------------------------------------------------------------------ */

static unsigned long bench_failures;

__attribute__((format(printf, 3, 4)))
static void bench_fail(const char* file, int line, const char* fmt, ...) {
    va_list ap;
    fflush(stdout);
    fprintf(stderr, "%s:%d: CHECK failed: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    bench_failures++;
}

#define BENCH_CHECK(cond, ...)                                                \
    do {                                                                      \
        if (aco_unlikely(!(cond))) bench_fail(__FILE__, __LINE__, __VA_ARGS__); \
    } while (0)

/* ------------------------------------------------------------------------ */
/* Clock and memory                                                         */
/* ------------------------------------------------------------------------ */

static uint64_t bench_now_ns(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) {
        perror("clock_gettime(CLOCK_MONOTONIC)");
        exit(1);
    }
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Peak resident set of the process so far, in KiB. */
static long bench_peak_rss_kib(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return -1;
    return ru.ru_maxrss;
}

static void* bench_xmalloc(size_t sz) {
    void* p = malloc(sz);
    if (p == NULL) {
        fprintf(stderr, "test_aco_benchmark: out of memory (%zu bytes)\n", sz);
        exit(1);
    }
    return p;
}

static int bench_on_valgrind(void) {
#ifdef ACO_USE_VALGRIND
    return RUNNING_ON_VALGRIND != 0;
#else
    return 0;
#endif
}

/* ------------------------------------------------------------------------ */
/* The co functions.  One case runs at a time, so they take their orders   */
/* from one global instead of a per-co argument (10M args would cost RAM). */
/* ------------------------------------------------------------------------ */

static struct {
    size_t payload;     /* bytes co_fp_live allocates and keeps live */
    aco_t* expect;      /* the co being resumed: whose bytes must be there */
    int    finish;      /* set: verify everything, then aco_exit() */
    size_t bad;         /* failed data checks */
} bench;

/* Nothing may be cached across it: another co ran in between. */
#define BENCH_BARRIER() __asm__ volatile("" ::: "memory")

/* Word i of the live bytes of the co whose identity (address) is seed:
 * distinct per co and per position, and cheap enough to keep no constant
 * in a register across the yield (which would grow the frame). */
static inline uintptr_t bench_word(uintptr_t seed, size_t i) {
    return seed + i;
}

/* The body of every co function: keeps the n words at w live on its stack
 * across every yield.  They are written once, handed to the compiler as
 * observable (so neither the stores nor the buffer can be optimised away),
 * spot-checked after every yield and checked in full at the end.  Little
 * else survives a yield, so the frame around the buffer stays small. */
__attribute__((always_inline))
static inline void bench_co_body(uintptr_t* w, size_t n) {
    uintptr_t seed = (uintptr_t)aco_get_co();
    for (size_t i = 0; i < n; i++) w[i] = bench_word(seed, i);
    __asm__ volatile("" : : "r"(w) : "memory");     /* w escapes: keep it */
    for (;;) {
        aco_yield();
        BENCH_BARRIER();
        if (bench.finish) break;
        if (n != 0) {
            seed = (uintptr_t)bench.expect;
            if (aco_unlikely(w[0] != bench_word(seed, 0) ||
                             w[n - 1] != bench_word(seed, n - 1)))
                bench.bad++;
        }
    }
    seed = (uintptr_t)aco_get_co();
    if (seed != (uintptr_t)bench.expect) bench.bad++;
    for (size_t i = 0; i < n; i++)
        if (aco_unlikely(w[i] != bench_word(seed, i))) bench.bad++;
    aco_exit();
}

/* The least a co can keep on its stack: its own frame, no buffer. */
static void co_fp_min(void) {
    bench_co_body(NULL, 0);
}

/* Small fixed frames, for the copy sizes below co_fp_live's smallest. */
#define BENCH_CO_FIXED(bytes)                                                 \
    static void co_fp_fixed##bytes(void) {                                    \
        uintptr_t w[(bytes) / sizeof(uintptr_t)];                             \
        bench_co_body(w, (bytes) / sizeof(uintptr_t));                        \
    }
BENCH_CO_FIXED(16)
BENCH_CO_FIXED(32)
BENCH_CO_FIXED(48)

/* Any size: bench.payload bytes (a multiple of 16) from alloca. */
static void co_fp_live(void) {
    size_t n = bench.payload / sizeof(uintptr_t);
    bench_co_body(alloca(n * sizeof(uintptr_t)), n);
}

/* ------------------------------------------------------------------------ */
/* Workloads, each timed on its own.                                        */
/* ------------------------------------------------------------------------ */

static uint64_t bench_create(aco_t** cos, size_t n, aco_t* main_co,
                             aco_share_stack_t* sstk, aco_cofuncp_t fp) {
    uint64_t t0 = bench_now_ns();
    for (size_t i = 0; i < n; i++)
        cos[i] = aco_create(main_co, sstk, BENCH_INIT_SAVE_STK_SZ, fp, NULL);
    return bench_now_ns() - t0;
}

/* rounds resume + yield round trips over cos[0..n), round robin from
 * cos[0].  With n > 1 on one share stack, each round trip saves the
 * previous co's live bytes and restores this one's. */
static uint64_t bench_rounds(aco_t** cos, size_t n, size_t rounds) {
    size_t i = 0;
    uint64_t t0 = bench_now_ns();
    for (size_t r = 0; r < rounds; r++) {
        bench.expect = cos[i];
        BENCH_BARRIER();
        aco_resume(cos[i]);
        if (++i == n) i = 0;
    }
    return bench_now_ns() - t0;
}

static uint64_t bench_destroy(aco_t** cos, size_t n) {
    uint64_t t0 = bench_now_ns();
    for (size_t i = 0; i < n; i++) aco_destroy(cos[i]);
    return bench_now_ns() - t0;
}

/* Untimed: resume every co once (a first resume runs its set-up) ... */
static void bench_warm(aco_t** cos, size_t n) {
    (void)bench_rounds(cos, n, n);
}

/* ... and at the end once more, to verify its bytes and aco_exit(). */
static void bench_finish(aco_t** cos, size_t n) {
    bench.finish = 1;
    (void)bench_rounds(cos, n, n);
    bench.finish = 0;
    for (size_t i = 0; i < n; i++)
        BENCH_CHECK(cos[i]->is_end, "co %zu of %zu did not end", i, n);
}

/* ------------------------------------------------------------------------ */
/* Table                                                                    */
/* ------------------------------------------------------------------------ */

static void bench_row(const char* comment, size_t amount, uint64_t ns) {
    double sec = (double)ns / 1e9;
    double per = amount ? (double)ns / (double)amount : 0.0;
    double speed = ns ? (double)amount * 1e9 / (double)ns : 0.0;
    printf("%-52s  %12zu  %11.3f s  %10.2f ns/op  %14.2f op/s\n", comment,
           amount, sec, per, speed);
    fflush(stdout);
}

static void bench_header(const char* mode) {
    printf("+build:%s\n", BENCH_ARCH);
#ifdef ACO_CONFIG_SHARE_FPU_MXCSR_ENV
    printf("+build:-DACO_CONFIG_SHARE_FPU_MXCSR_ENV\n");
    printf("+build:share fpu & mxcsr control words between coroutines\n");
#else
    printf("+build:undefined ACO_CONFIG_SHARE_FPU_MXCSR_ENV\n");
    printf("+build:each coroutine has its own fpu & mxcsr control words\n");
#endif
#ifdef ACO_USE_VALGRIND
    printf("+build:-DACO_USE_VALGRIND\n");
    printf("+build:valgrind memcheck friendly support\n");
#else
    printf("+build:undefined ACO_USE_VALGRIND\n");
    printf("+build:without valgrind memcheck friendly support\n");
#endif
    printf("+build:compiler: %s\n", BENCH_COMPILER);
    printf("+build:sizeof(aco_t)=%zu\n", sizeof(aco_t));
    printf("+mode:%s%s\n", mode,
           bench_on_valgrind() ? " (under valgrind: the times mean nothing)"
                               : "");
    printf("\n\n%-52s  %12s  %13s  %16s  %19s\n\n", "comment", "task_amount",
           "all_time_cost", "ns_per_op", "speed");
}

/* ------------------------------------------------------------------------ */
/* Shapes: which co function and payload give a wanted copy size.  The     */
/* frame around the payload depends on compiler and architecture, so it is */
/* measured once at start-up (bench_calibrate) rather than assumed.        */
/* ------------------------------------------------------------------------ */

typedef struct {
    aco_cofuncp_t fp;
    size_t payload;     /* bench.payload while the case runs */
} bench_shape_t;

/* The fixed-frame co functions and, once calibrated, their copy sizes. */
static struct {
    aco_cofuncp_t fp;
    const char* name;
    size_t cpsz;
} bench_fixed[] = {
    {co_fp_min, "co_fp_min", 0},
    {co_fp_fixed16, "co_fp_fixed16", 0},
    {co_fp_fixed32, "co_fp_fixed32", 0},
    {co_fp_fixed48, "co_fp_fixed48", 0},
};
static size_t bench_live_cpsz;   /* copy size of co_fp_live with payload 0 */

#define BENCH_COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* The copy size libaco measures for a co of this shape: two cos take turns
 * on one share stack, so each is saved at its yield. */
static size_t bench_probe(aco_t* main_co, bench_shape_t shape) {
    aco_share_stack_t* sstk = aco_share_stack_new(0);
    aco_t* cos[2];
    bench.payload = shape.payload;
    bench_create(cos, 2, main_co, sstk, shape.fp);
    bench_warm(cos, 2);
    bench_rounds(cos, 2, 2);
    size_t sz = cos[0]->save_stack.max_cpsz;
    BENCH_CHECK(cos[1]->save_stack.max_cpsz == sz,
                "two cos of one shape copied %zu and %zu bytes", sz,
                cos[1]->save_stack.max_cpsz);
    bench_finish(cos, 2);
    bench_destroy(cos, 2);
    aco_share_stack_destroy(sstk);
    return sz;
}

static void bench_calibrate(aco_t* main_co) {
    for (size_t i = 0; i < BENCH_COUNT(bench_fixed); i++)
        bench_fixed[i].cpsz =
            bench_probe(main_co, (bench_shape_t){bench_fixed[i].fp, 0});
    bench_live_cpsz = bench_probe(main_co, (bench_shape_t){co_fp_live, 0});
    /* Every payload byte must be copied: these fail when a buffer was
     * optimised away or does not lie in the copied range. */
    for (size_t i = 1; i < BENCH_COUNT(bench_fixed); i++)
        BENCH_CHECK(bench_fixed[i].cpsz >= bench_fixed[0].cpsz + 16 * i,
                    "%s copies %zu bytes, %s %zu: its buffer is not live",
                    bench_fixed[i].name, bench_fixed[i].cpsz,
                    bench_fixed[0].name, bench_fixed[0].cpsz);
    size_t big = bench_probe(main_co, (bench_shape_t){co_fp_live, 4096});
    BENCH_CHECK(big == bench_live_cpsz + 4096,
                "a co with 4096 live bytes copied %zu bytes, expected %zu",
                big, bench_live_cpsz + 4096);
    BENCH_CHECK(bench.bad == 0, "%zu data checks failed while calibrating",
                bench.bad);
}

static size_t bench_absdiff(size_t a, size_t b) { return a > b ? a - b : b - a; }

/* The shape whose copy size comes nearest to want. */
static bench_shape_t bench_shape_for(size_t want) {
    bench_shape_t best = {co_fp_live, 0};
    if (want > bench_live_cpsz)
        best.payload = (want - bench_live_cpsz + 8) / 16 * 16;
    size_t best_diff = bench_absdiff(want, bench_live_cpsz + best.payload);
    for (size_t i = 0; i < BENCH_COUNT(bench_fixed); i++) {
        size_t d = bench_absdiff(want, bench_fixed[i].cpsz);
        if (d < best_diff) {
            best = (bench_shape_t){bench_fixed[i].fp, 0};
            best_diff = d;
        }
    }
    return best;
}

/* ------------------------------------------------------------------------ */
/* Cases                                                                    */
/* ------------------------------------------------------------------------ */

typedef struct {
    size_t co_amount;   /* 0 marks a standalone co (own stack, never copied) */
    size_t copy_sz;     /* intended live bytes per co at its yield */
    size_t rounds;      /* resume + yield round trips timed */
} bench_case_t;

#define BENCH_STANDALONE(rounds) {0, 0, (rounds)}

/* One co alone on its own share stack: a round trip is two bare switches. */
static void bench_run_standalone(aco_t* main_co, size_t rounds) {
    aco_share_stack_t* sstk = aco_share_stack_new(0);
    aco_t* co;
    char label[128];

    snprintf(label, sizeof(label), "aco_create/init_save_stk_sz=%dB",
             BENCH_INIT_SAVE_STK_SZ);
    bench_row(label, 1, bench_create(&co, 1, main_co, sstk, co_fp_min));
    bench_warm(&co, 1);
    uint64_t ns = bench_rounds(&co, 1, rounds);
    BENCH_CHECK(co->save_stack.max_cpsz == 0 && co->save_stack.ct_save == 0 &&
                co->save_stack.ct_restore == 0,
                "a standalone co was copied: max_cpsz %zu, %zu saves, "
                "%zu restores", co->save_stack.max_cpsz,
                co->save_stack.ct_save, co->save_stack.ct_restore);
    snprintf(label, sizeof(label),
             "aco_resume/co_amount=1/copy_stack_size=%zuB",
             co->save_stack.max_cpsz);
    bench_row(label, rounds, ns);
    bench_row("  -> acosw", 2 * rounds, ns);
    bench_finish(&co, 1);
    bench_row("aco_destroy", 1, bench_destroy(&co, 1));
    aco_share_stack_destroy(sstk);
}

/* co_amount cos on one share stack, each keeping about copy_sz bytes live:
 * every round trip saves one co and restores the next. */
static void bench_run_shared(aco_t* main_co, size_t co_amount, size_t copy_sz,
                             size_t rounds) {
    bench_shape_t shape = bench_shape_for(copy_sz);
    aco_share_stack_t* sstk = aco_share_stack_new(0);
    aco_t** cos = bench_xmalloc(co_amount * sizeof(*cos));
    char label[128];
    size_t bad0 = bench.bad;

    bench.payload = shape.payload;
    snprintf(label, sizeof(label), "aco_create/init_save_stk_sz=%dB",
             BENCH_INIT_SAVE_STK_SZ);
    bench_row(label, co_amount,
              bench_create(cos, co_amount, main_co, sstk, shape.fp));
    bench_warm(cos, co_amount);
    uint64_t ns = bench_rounds(cos, co_amount, rounds);

    /* What was copied, before the end (aco_exit) clears valid_sz. */
    size_t cpsz = cos[0]->save_stack.max_cpsz;
    size_t odd = 0;
    for (size_t i = 0; i < co_amount; i++) {
        const aco_save_stack_t* ss = &cos[i]->save_stack;
        if (ss->max_cpsz != cpsz || ss->valid_sz != cpsz || ss->ct_save == 0)
            odd++;
    }
    BENCH_CHECK(odd == 0, "%zu of %zu cos were never saved or saved at a "
                "size other than %zu bytes", odd, co_amount, cpsz);
    /* No co copies less than co_fp_min: on i386 that is ~44 bytes, since
     * aco_yield's own frame lies below it (on x86-64 the compiler makes
     * aco_yield tail-call acosw).  Wants below it mean the minimum. */
    size_t want = copy_sz > bench_fixed[0].cpsz ? copy_sz : bench_fixed[0].cpsz;
    BENCH_CHECK(bench_absdiff(cpsz, want) <= BENCH_COPY_SLACK,
                "co_amount=%zu: copied %zu bytes per co, wanted %zu +- %d",
                co_amount, cpsz, want, BENCH_COPY_SLACK);
    snprintf(label, sizeof(label),
             "aco_resume/co_amount=%zu/copy_stack_size=%zuB", co_amount, cpsz);
    bench_row(label, rounds, ns);

    bench_finish(cos, co_amount);
    BENCH_CHECK(bench.bad == bad0, "co_amount=%zu copy %zuB: %zu live-byte "
                "checks failed", co_amount, cpsz, bench.bad - bad0);
    bench_row("aco_destroy", co_amount, bench_destroy(cos, co_amount));
    free(cos);
    aco_share_stack_destroy(sstk);
}

static void bench_run_case(aco_t* main_co, const bench_case_t* c) {
    if (c->co_amount == 0)
        bench_run_standalone(main_co, c->rounds);
    else
        bench_run_shared(main_co, c->co_amount, c->copy_sz, c->rounds);
    printf("\n");
}

/* ------------------------------------------------------------------------ */
/* Modes                                                                    */
/* ------------------------------------------------------------------------ */

#define K 1000u
#define M 1000000u

/* Every row kind, a copy at each end of the size range, in well under a
 * second (and ~10 s under memcheck). */
static const bench_case_t bench_smoke[] = {
    BENCH_STANDALONE(200 * K),
    {2, 8, 20 * K},
    {2, 120, 20 * K},
    {100, 1000, 10 * K},
    {10, 7992, 2 * K},
};

/* ~15 s of CPU: the copy-size curve with 2 cos (hot caches), then many cos
 * (cold caches: every round trip misses) at a few sizes. */
static const bench_case_t bench_default[] = {
    BENCH_STANDALONE(10 * M),
    {2, 8, 4 * M},
    {2, 24, 4 * M},
    {2, 40, 4 * M},
    {2, 56, 4 * M},
    {2, 120, 4 * M},
    {2, 232, 2 * M},
    {2, 488, 2 * M},
    {2, 1000, 1 * M},
    {2, 2024, 1 * M},
    {2, 4072, 1 * M},
    {2, 7992, 1 * M},
    {1 * M, 8, 5 * M},
    {1 * M, 120, 5 * M},
    {1 * M, 488, 5 * M},
    {100 * K, 1000, 2 * M},
    {100 * K, 2024, 1 * M},
    {100 * K, 7992, 1 * M},
};

/* Upstream's table, and more: minutes, and ~4 GiB at 10M cos. */
static const bench_case_t bench_long[] = {
    BENCH_STANDALONE(20 * M),
    BENCH_STANDALONE(20 * M),
    {2, 8, 20 * M},
    {2, 24, 20 * M},
    {2, 40, 20 * M},
    {2, 56, 20 * M},
    {2, 120, 20 * M},
    {2, 136, 20 * M},
    {2, 152, 20 * M},
    {2, 232, 20 * M},
    {2, 488, 10 * M},
    {2, 1000, 10 * M},
    {2, 2024, 5 * M},
    {2, 4072, 5 * M},
    {2, 7992, 2 * M},
    {2 * M, 8, 20 * M},
    {2 * M, 24, 20 * M},
    {2 * M, 40, 20 * M},
    {2 * M, 56, 20 * M},
    {2 * M, 120, 20 * M},
    {10 * M, 8, 40 * M},
    {10 * M, 56, 40 * M},
    {10 * M, 120, 40 * M},
    {2 * M, 136, 20 * M},
    {2 * M, 152, 20 * M},
    {2 * M, 232, 20 * M},
    {2 * M, 488, 20 * M},
    {1 * M, 1000, 20 * M},
    {100 * K, 1000, 20 * M},
    {100 * K, 2024, 10 * M},
    {100 * K, 4072, 10 * M},
    {100 * K, 7992, 10 * M},
};

static void bench_usage(FILE* f) {
    fprintf(f, "usage: test_aco_benchmark [--smoke | --long]\n"
               "  (none)   the default table, ~15 s of CPU\n"
               "  --long   the full table, minutes, ~4 GiB of RAM\n"
               "  --smoke  a tiny run of every row kind (the test suite's)\n");
}

int main(int argc, char** argv) {
    const bench_case_t* cases = bench_default;
    size_t ncases = BENCH_COUNT(bench_default);
    const char* mode = "default (short table; --long for the full one)";

    if (argc > 2) { bench_usage(stderr); return 2; }
    if (argc == 2) {
        if (strcmp(argv[1], "--smoke") == 0) {
            cases = bench_smoke;
            ncases = BENCH_COUNT(bench_smoke);
            mode = "smoke (tiny run for the test suite)";
        } else if (strcmp(argv[1], "--long") == 0) {
            cases = bench_long;
            ncases = BENCH_COUNT(bench_long);
            mode = "long (the full table)";
        } else if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
            bench_usage(stdout);
            return 0;
        } else {
            bench_usage(stderr);
            return 2;
        }
    }

    aco_thread_init(NULL);
    aco_t* main_co = aco_create(NULL, NULL, 0, NULL, NULL);

    bench_header(mode);
    bench_calibrate(main_co);
    for (size_t i = 0; i < ncases; i++) bench_run_case(main_co, &cases[i]);

    aco_destroy(main_co);
    printf("+copy sizes:");
    for (size_t i = 0; i < BENCH_COUNT(bench_fixed); i++)
        printf(" %s %zuB,", bench_fixed[i].name, bench_fixed[i].cpsz);
    printf(" co_fp_live %zuB + payload\n", bench_live_cpsz);
    printf("+peak RSS: %ld KiB\n", bench_peak_rss_kib());
    if (bench_failures != 0) {
        fprintf(stderr, "test_aco_benchmark: %lu check(s) failed\n",
                bench_failures);
        return 1;
    }
    printf("+all checks passed\n");
    return 0;
}
