/*
 * test_aco_benchmark.c - libaco's benchmark: the cost of aco_create, of a
 * resume + yield round trip (standalone, and on a shared stack with a given
 * number of live bytes to copy), of one acosw and of aco_destroy; the same
 * workloads side by side with Boost.Context's fcontext and glibc's
 * swapcontext; and the memory a suspended co costs.
 *
 * As a test (test.sh runs it with --smoke) it proves that every kind of row
 * runs with each co's live bytes intact, and that libaco copies the sizes
 * the rows claim; a missed performance target fails nothing.
 *
 * Copyright 2026 the libaco authors.  Apache License 2.0 (see LICENSE).
 *
 *   test_aco_benchmark              the short table, a short comparison,
 *                                   the headline (minimal loops) and the
 *                                   10M-co memory runs, glibc and tcmalloc
 *                                   (what `bash make.sh bench` runs; ~1 min)
 *   test_aco_benchmark --headline   only the headline and memory runs
 *   test_aco_benchmark --quick      only the headline loops, few rounds
 *   test_aco_benchmark --compare    the full comparison (15 rounds; ~15 s)
 *   test_aco_benchmark --memory N K peak RSS of N cos, K live bytes each
 *   test_aco_benchmark --long       the full table, the full comparison and
 *                                   the headline (~2 min; ~3 GiB of RAM)
 *   test_aco_benchmark --smoke      a tiny run of every kind of row, peers
 *                                   and memory included (test.sh runs it,
 *                                   under valgrind memcheck too)
 *   options: --csv FILE   append the comparison's and the memory runs'
 *                         results to FILE (tools/plot_bench.sh reads it)
 *            --rounds R   rounds of the comparison (odd is best)
 *
 * Every mode but --smoke pins itself to the last CPU it may run on.
 *
 * Every row is checked, and the exit status says whether every check held:
 * cos verify their live bytes after each yield (cheaply) and at the end
 * (every byte), and the copy size in a row's label is the one libaco really
 * copied (save_stack.max_cpsz, the same for every co), which must lie within
 * BENCH_COPY_SLACK bytes of the size the case asked for.  The live bytes are
 * made observable on purpose: an unused local array is a dead store the
 * compiler deletes, and a benchmark built on one silently measures ~24-byte
 * copies whatever its labels say.  A missed performance target is reported
 * (MISS) but is not a failure: only a broken check is.
 *
 * The peers run the very same co body as libaco's cos (the same live bytes,
 * the same checks), each context on its own mmap'd stack with a guard page.
 * fcontext is the one of Debian's libboost-context-dev (its static archive;
 * jump_fcontext and make_fcontext have C linkage); make.sh links it into the
 * x86-64 programs and defines BENCH_HAVE_FCONTEXT.  There is no i386 build of
 * it to link next to the amd64 one, so i386 compares with swapcontext only.
 *
 * Fairness: fcontext's jump and glibc's swapcontext save and load the whole
 * MXCSR, exception flags included, on every switch, and loading a changed
 * MXCSR costs many times an unchanged one on some machines.  Any inexact
 * floating-point operation (printf("%f") does some) sets a flag in the
 * caller only, so the flags are cleared before every peer context is made
 * and before every timed segment,
 * times are kept in integer ns until all rounds are done, and every peer
 * context reports its MXCSR as it ends: it must equal main's.  acosw compares
 * the control bits only and ignores the flags, or (AMD) loads the whole
 * MXCSR too; the headline also times that with main's flags set.
 *
 * Layout: the workloads - create N cos, run R resume/yield round trips over
 * them, destroy them - are bench_create(), bench_rounds() and bench_destroy()
 * for libaco and bench_peer_*() for the peers; the table's cases
 * (bench_case_t) string them together with the checks; the comparison
 * (bench_compare) runs them in interleaved rounds; the memory run
 * (bench_memory) and the create/destroy pairs (bench_cd_run) run in fresh,
 * re-executed children of this program (bench_spawn).  BENCH_EXEC_WRAPPER,
 * if set, is the command (space-separated words) the children are run with:
 * test.sh sets it to the emulator for cross-built programs under qemu-user,
 * where the kernel cannot exec a foreign binary itself (no binfmt_misc).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE     /* sched_setaffinity, MAP_ANONYMOUS */
#endif
#include "aco.h"

/* aco.c's hidden hook (tests/aco_test.h): the width of the stack copies'
 * moves on x86-64 (0 where the build has one kind of copy). */
int aco__copy_width(int w);
/* ... and how acosw treats the FP control words on x86-64: 1 loads them on
 * every switch (AMD), 0 on a difference (the rest), -1: one way only. */
int aco__fp_mode(int mode);

#include <alloca.h>
#include <errno.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#include <fenv.h>
#include <gnu/libc-version.h>
#include <inttypes.h>
#include <malloc.h>
#include <math.h>
#include <sched.h>
#include <stdarg.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <ucontext.h>

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
#elif defined(__aarch64__)
#define BENCH_ARCH "aarch64"
#elif defined(__riscv) && __riscv_xlen == 64
#define BENCH_ARCH "riscv64"
#else
#error "test_aco_benchmark: unknown architecture"
#endif

/* Boost.Context's fcontext: the C-linkage entry points of its static
 * archive (boost/context/detail/fcontext.hpp declares them for C++). */
#ifdef BENCH_HAVE_FCONTEXT
#if defined(__has_include)
#if __has_include(<boost/version.hpp>)
#include <boost/version.hpp>
#endif
#endif
typedef void* bench_fctx_t;
typedef struct {
    bench_fctx_t fctx;  /* the context that jumped here */
    void* data;         /* what it passed */
} bench_fctx_transfer_t;
bench_fctx_transfer_t jump_fcontext(bench_fctx_t to, void* vp);
bench_fctx_t make_fcontext(void* sp, size_t size,
                           void (*fn)(bench_fctx_transfer_t));
#endif

/* The switch's floor (x86-64): a switch that keeps only the stack and
 * instruction pointers, the least any stackful switch must move, in acosw's
 * shape (the resume address popped and jumped to, not returned to).
 * bench_floor_sw(from, to) saves {sp, pc} in *from and continues *to;
 * bench_floor_co is the other side's whole body: hand back, forever.  It
 * touches no register but rdi, rsi, rdx and rsp, so main's callee-saved
 * registers survive without being saved: that is what makes it a floor and
 * not a switch (a C caller of it keeps its own registers only because this
 * co keeps its hands off them). */
#if defined(__x86_64__)
#define BENCH_HAVE_FLOOR 1
typedef struct { void* sp; void* pc; } bench_floor_ctx_t;
void bench_floor_sw(bench_floor_ctx_t* from, bench_floor_ctx_t* to);
void bench_floor_co(void);
#if defined(__CET__) && (__CET__ & 1)
#define BENCH_ENDBR "endbr64\n\t"
#define BENCH_NOTRACK "notrack "
#else
#define BENCH_ENDBR ""
#define BENCH_NOTRACK ""
#endif
__asm__(
    ".text\n\t"
    ".p2align 4\n\t"
    ".globl bench_floor_sw\n\t"
    ".hidden bench_floor_sw\n\t"
    ".type bench_floor_sw, @function\n"
    "bench_floor_sw:\n\t"
    ".cfi_startproc\n\t"
    BENCH_ENDBR
    "popq %rdx\n\t"
    ".cfi_def_cfa_offset 0\n\t"
    ".cfi_register %rip, %rdx\n\t"
    "movq %rdx, 8(%rdi)\n\t"
    "movq %rsp, (%rdi)\n\t"
    "movq 8(%rsi), %rdx\n\t"
    "movq (%rsi), %rsp\n\t"
    BENCH_NOTRACK "jmp *%rdx\n\t"
    ".cfi_endproc\n\t"
    ".size bench_floor_sw, .-bench_floor_sw\n\t"
    ".p2align 4\n\t"
    ".globl bench_floor_co\n\t"
    ".hidden bench_floor_co\n\t"
    ".type bench_floor_co, @function\n"
    "bench_floor_co:\n\t"
    ".cfi_startproc\n\t"
    ".cfi_undefined %rip\n\t"       /* the bottom of its stack */
    BENCH_ENDBR
    "1:\n\t"
    "movq %rdi, %rdx\n\t"            /* back to whoever switched here */
    "movq %rsi, %rdi\n\t"
    "movq %rdx, %rsi\n\t"
    "call bench_floor_sw\n\t"
    "jmp 1b\n\t"
    ".cfi_endproc\n\t"
    ".size bench_floor_co, .-bench_floor_co\n\t"
    ".previous");
#endif

/* A measured copy size may differ this much from the intended one: sizes
 * move in 16-byte steps (the ABI's stack alignment), and the smallest ones
 * are whatever frame the compiler gives the co function. */
#define BENCH_COPY_SLACK 16

/* Initial save stack of every co in the table, as in upstream's table. */
#define BENCH_INIT_SAVE_STK_SZ 64

/* Stack of every co that has one of its own in the comparison (peers, and
 * libaco's "own stack" row of the RocketCo table): RocketCo's 128 KiB. */
#define BENCH_OWN_STACK_SZ (128u << 10)

#define BENCH_COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* Placements of main's frame, for timings that must not hang on where a
 * stack lands modulo the 4 KiB page (see "Headline"): placement i lowers
 * main's frame by i * BENCH_PLACE_STEP bytes, 33 cache lines apart, so
 * BENCH_PLACES of them cover the page. */
#define BENCH_PLACES 8
#define BENCH_PLACE_STEP 528

#define K 1000u
#define M 1000000u

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

/* Not a check but the benchmark itself failing to run: stop. */
__attribute__((noreturn, format(printf, 1, 2)))
static void bench_die(const char* fmt, ...) {
    va_list ap;
    fflush(stdout);
    fprintf(stderr, "test_aco_benchmark: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

/* ------------------------------------------------------------------------ */
/* Clock, memory, CPU and the floating-point environment                    */
/* ------------------------------------------------------------------------ */

static uint64_t bench_now_ns(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
        bench_die("clock_gettime(CLOCK_MONOTONIC): %s", strerror(errno));
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Peak resident set of the process so far, in KiB. */
static long bench_peak_rss_kib(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return -1;
    return ru.ru_maxrss;
}

/* The same from the kernel's mm: VmHWM, which exec starts afresh. */
static long bench_vmhwm_kib(void) {
    FILE* f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    if (f == NULL) return -1;
    while (fgets(line, sizeof(line), f) != NULL)
        if (sscanf(line, "VmHWM: %ld kB", &kib) == 1) break;
    fclose(f);
    return kib;
}

static void* bench_xmalloc(size_t sz) {
    void* p = malloc(sz);
    if (p == NULL) bench_die("out of memory (%zu bytes)", sz);
    return p;
}

static int bench_on_valgrind(void) {
#ifdef ACO_USE_VALGRIND
    return RUNNING_ON_VALGRIND != 0;
#else
    return 0;
#endif
}

/* Pin the process to the last CPU it may run on; that CPU, or -1. */
static int bench_pin_last_cpu(void) {
    cpu_set_t set;
    int last = -1;
    if (sched_getaffinity(0, sizeof(set), &set) != 0) return -1;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set)) last = c;
    if (last < 0) return -1;
    CPU_ZERO(&set);
    CPU_SET(last, &set);
    return sched_setaffinity(0, sizeof(set), &set) == 0 ? last : -1;
}

/* Clear the x87 and SSE exception flags (see "Fairness" above).  On x86 by
 * hand: i386's feclearexcept is libm's, and upstream's build line, which
 * this program builds with too (tests/check_vendor.sh), links no -lm. */
static void bench_fp_quiet(void) {
#if defined(__x86_64__) || defined(__i386__)
    uint32_t csr;
    __asm__ volatile("fnclex\n\tstmxcsr %0" : "=m"(csr));
    csr &= ~(uint32_t)0x3f;
    __asm__ volatile("ldmxcsr %0" : : "m"(csr));
#else
    feclearexcept(FE_ALL_EXCEPT);
#endif
}

/* The FP control/status word the peers' switches carry: MXCSR on x86; on
 * aarch64 FPCR, on riscv64 fcsr (frm and the flags). */
static inline uint32_t bench_mxcsr(void) {
    uint32_t v;
#if defined(__x86_64__) || defined(__i386__)
    __asm__ volatile("stmxcsr %0" : "=m"(v));
#else
    uintptr_t r;
#if defined(__aarch64__)
    __asm__ volatile("mrs %0, fpcr" : "=r"(r));
#else
    __asm__ volatile("frcsr %0" : "=r"(r));
#endif
    v = (uint32_t)r;
#endif
    return v;
}

/* ------------------------------------------------------------------------ */
/* Stacks of the peers: mmap'd with a guard page below, as libaco's.        */
/* ------------------------------------------------------------------------ */

typedef struct {
    void*  map;         /* the whole mapping, guard page first */
    size_t map_sz;
    char*  lo;          /* lowest usable byte */
    size_t sz;          /* usable bytes */
#ifdef ACO_USE_VALGRIND
    unsigned vg_id;
#endif
} bench_stack_t;

static size_t bench_page_sz(void) {
    static size_t pg;
    if (pg == 0) {
        long v = sysconf(_SC_PAGESIZE);
        pg = v > 0 ? (size_t)v : 4096;
    }
    return pg;
}

static void bench_stack_new(bench_stack_t* s, size_t sz) {
    size_t pg = bench_page_sz();
    s->sz = (sz + pg - 1) & ~(pg - 1);
    s->map_sz = s->sz + pg;
    s->map = mmap(NULL, s->map_sz, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (s->map == MAP_FAILED) bench_die("mmap of a stack: %s", strerror(errno));
    if (mprotect(s->map, pg, PROT_NONE) != 0)
        bench_die("mprotect of a guard page: %s", strerror(errno));
    s->lo = (char*)s->map + pg;
#ifdef ACO_USE_VALGRIND
    s->vg_id = VALGRIND_STACK_REGISTER(s->lo, s->lo + s->sz);
#endif
}

static void bench_stack_free(bench_stack_t* s) {
#ifdef ACO_USE_VALGRIND
    VALGRIND_STACK_DEREGISTER(s->vg_id);
#endif
    if (munmap(s->map, s->map_sz) != 0)
        bench_die("munmap of a stack: %s", strerror(errno));
}

/* ------------------------------------------------------------------------ */
/* The co functions.  One case runs at a time, so they take their orders   */
/* from one global instead of a per-co argument (10M args would cost RAM). */
/* ------------------------------------------------------------------------ */

/* Who runs a co body: libaco, or a peer. */
enum { BENCH_ACO, BENCH_FCTX, BENCH_UCTX, BENCH_IMPLS };
static const char* const bench_impl_name[BENCH_IMPLS] = {
    "aco", "fcontext", "swapcontext"};

/* A peer's co.  A swapcontext co's ucontext_t follows it in the same
 * allocation; an fcontext co needs only the two context pointers. */
typedef struct {
    bench_stack_t stack;
    size_t payload;     /* bytes its body keeps live */
    char   ended;
    uint32_t mxcsr;     /* its MXCSR as it ended (see "Fairness") */
#ifdef BENCH_HAVE_FCONTEXT
    bench_fctx_t ctx;   /* fcontext: where it continues */
    bench_fctx_t back;  /* fcontext: where its yield goes */
#endif
    ucontext_t* uc;     /* swapcontext: its context */
} bench_peer_t;

static struct {
    size_t payload;     /* bytes co_fp_live allocates and keeps live */
    const void* expect; /* the co being resumed: whose bytes must be there */
    int    finish;      /* set: verify everything, then end */
    size_t bad;         /* failed data checks */
} bench;

/* swapcontext: main's context while a peer runs. */
static ucontext_t bench_main_uc;

/* Nothing may be cached across it: another co ran in between. */
#define BENCH_BARRIER() __asm__ volatile("" ::: "memory")

/* Word i of the live bytes of the co whose identity (address) is seed:
 * distinct per co and per position, and cheap enough to keep no constant
 * in a register across the yield (which would grow the frame). */
static inline uintptr_t bench_word(uintptr_t seed, size_t i) {
    return seed + i;
}

/* Switch from a running co back to main: the yield of each implementation.
 * Inlined with a constant kind, it leaves one call in the body. */
__attribute__((always_inline))
static inline void bench_switch_out(int kind, bench_peer_t* p) {
    if (kind == BENCH_ACO) {
        aco_yield();
#ifdef BENCH_HAVE_FCONTEXT
    } else if (kind == BENCH_FCTX) {
        p->back = jump_fcontext(p->back, NULL).fctx;
#endif
    } else {
        (void)swapcontext(p->uc, &bench_main_uc);
    }
}

/* The body of every co function, libaco's and the peers': keeps the n
 * words at w live on its stack across every yield.  They are written once,
 * handed to the compiler as observable (so neither the stores nor the
 * buffer can be optimised away), spot-checked after every yield and
 * checked in full at the end.  Little else survives a yield, so the frame
 * around the buffer stays small.  p is the peer (NULL for libaco). */
__attribute__((always_inline))
static inline void bench_co_body(int kind, bench_peer_t* p, uintptr_t* w,
                                 size_t n) {
    uintptr_t seed = kind == BENCH_ACO ? (uintptr_t)aco_get_co() : (uintptr_t)p;
    for (size_t i = 0; i < n; i++) w[i] = bench_word(seed, i);
    __asm__ volatile("" : : "r"(w) : "memory");     /* w escapes: keep it */
    for (;;) {
        bench_switch_out(kind, p);
        BENCH_BARRIER();
        if (bench.finish) break;
        if (n != 0) {
            seed = (uintptr_t)bench.expect;
            if (aco_unlikely(w[0] != bench_word(seed, 0) ||
                             w[n - 1] != bench_word(seed, n - 1)))
                bench.bad++;
        }
    }
    seed = kind == BENCH_ACO ? (uintptr_t)aco_get_co() : (uintptr_t)p;
    if (seed != (uintptr_t)bench.expect) bench.bad++;
    for (size_t i = 0; i < n; i++)
        if (aco_unlikely(w[i] != bench_word(seed, i))) bench.bad++;
    if (kind == BENCH_ACO) {
        aco_exit();
    } else {
        p->mxcsr = bench_mxcsr();
        p->ended = 1;
        bench_switch_out(kind, p);
    }
    bench_die("a %s co was resumed after its end", bench_impl_name[kind]);
}

/* The least a co can keep on its stack: its own frame, no buffer. */
static void co_fp_min(void) {
    bench_co_body(BENCH_ACO, NULL, NULL, 0);
}

/* Small fixed frames, for the copy sizes below co_fp_live's smallest. */
#define BENCH_CO_FIXED(bytes)                                                 \
    static void co_fp_fixed##bytes(void) {                                    \
        uintptr_t w[(bytes) / sizeof(uintptr_t)];                             \
        bench_co_body(BENCH_ACO, NULL, w, (bytes) / sizeof(uintptr_t));       \
    }
BENCH_CO_FIXED(16)
BENCH_CO_FIXED(32)
BENCH_CO_FIXED(48)

/* Any size: bench.payload bytes (a multiple of 16) from alloca. */
static void co_fp_live(void) {
    size_t n = bench.payload / sizeof(uintptr_t);
    bench_co_body(BENCH_ACO, NULL, alloca(n * sizeof(uintptr_t)), n);
}

/* The peers' co functions: p->payload live bytes from alloca. */
#ifdef BENCH_HAVE_FCONTEXT
static void bench_fctx_entry(bench_fctx_transfer_t t) {
    bench_peer_t* p = t.data;
    p->back = t.fctx;
    size_t n = p->payload / sizeof(uintptr_t);
    bench_co_body(BENCH_FCTX, p, alloca(n * sizeof(uintptr_t)), n);
}
#endif

/* makecontext passes no pointer portably: the first resume's bench.expect
 * names the peer (every driver below sets it before a resume). */
static void bench_uctx_entry(void) {
    bench_peer_t* p = (bench_peer_t*)bench.expect;
    size_t n = p->payload / sizeof(uintptr_t);
    bench_co_body(BENCH_UCTX, p, alloca(n * sizeof(uintptr_t)), n);
}

/* ------------------------------------------------------------------------ */
/* Peers: create, resume, free                                              */
/* ------------------------------------------------------------------------ */

static int bench_have(int kind) {
#ifdef BENCH_HAVE_FCONTEXT
    (void)kind;
    return 1;
#else
    return kind != BENCH_FCTX;
#endif
}

static bench_peer_t* bench_peer_new(int kind, size_t stack_sz, size_t payload) {
    size_t head = (sizeof(bench_peer_t) + 63) & ~(size_t)63;
    bench_peer_t* p =
        bench_xmalloc(kind == BENCH_UCTX ? head + sizeof(ucontext_t) : head);
    memset(p, 0, sizeof(*p));
    p->payload = (payload + 15) & ~(size_t)15;
    bench_stack_new(&p->stack, stack_sz);
#ifdef BENCH_HAVE_FCONTEXT
    if (kind == BENCH_FCTX) {
        p->ctx = make_fcontext(p->stack.lo + p->stack.sz, p->stack.sz,
                               bench_fctx_entry);
        return p;
    }
#endif
    p->uc = (ucontext_t*)((char*)p + head);
    if (getcontext(p->uc) != 0) bench_die("getcontext: %s", strerror(errno));
    p->uc->uc_stack.ss_sp = p->stack.lo;
    p->uc->uc_stack.ss_size = p->stack.sz;
    p->uc->uc_link = NULL;
    makecontext(p->uc, bench_uctx_entry, 0);
    return p;
}

__attribute__((always_inline))
static inline void bench_peer_resume(int kind, bench_peer_t* p) {
#ifdef BENCH_HAVE_FCONTEXT
    if (kind == BENCH_FCTX) {
        /* the first jump hands the new context p (bench_fctx_entry) */
        p->ctx = jump_fcontext(p->ctx, p).fctx;
        return;
    }
#endif
    (void)kind;
    (void)swapcontext(&bench_main_uc, p->uc);
}

static void bench_peer_free(bench_peer_t* p) {
    bench_stack_free(&p->stack);
    free(p);
}

/* rounds round trips over ps[0..n), round robin: bench_rounds' twin. */
__attribute__((always_inline))
static inline uint64_t bench_peer_rounds_k(int kind, bench_peer_t** ps,
                                           size_t n, size_t rounds) {
    size_t i = 0;
    uint64_t t0 = bench_now_ns();
    for (size_t r = 0; r < rounds; r++) {
        bench.expect = ps[i];
        BENCH_BARRIER();
        bench_peer_resume(kind, ps[i]);
        if (++i == n) i = 0;
    }
    return bench_now_ns() - t0;
}

/* One instance per kind, so each loop holds exactly one switch. */
#ifdef BENCH_HAVE_FCONTEXT
static uint64_t bench_fctx_rounds(bench_peer_t** ps, size_t n, size_t rounds) {
    return bench_peer_rounds_k(BENCH_FCTX, ps, n, rounds);
}
#endif
static uint64_t bench_uctx_rounds(bench_peer_t** ps, size_t n, size_t rounds) {
    return bench_peer_rounds_k(BENCH_UCTX, ps, n, rounds);
}

static uint64_t bench_peer_rounds(int kind, bench_peer_t** ps, size_t n,
                                  size_t rounds) {
#ifdef BENCH_HAVE_FCONTEXT
    if (kind == BENCH_FCTX) return bench_fctx_rounds(ps, n, rounds);
#endif
    (void)kind;
    return bench_uctx_rounds(ps, n, rounds);
}

/* Every peer once more, to verify its bytes and end; its MXCSR must be
 * main's (both with the flags cleared). */
static void bench_peer_finish(int kind, bench_peer_t** ps, size_t n) {
    bench_fp_quiet();
    uint32_t mine = bench_mxcsr();
    bench.finish = 1;
    (void)bench_peer_rounds(kind, ps, n, n);
    bench.finish = 0;
    size_t odd = 0;
    for (size_t i = 0; i < n; i++) {
        BENCH_CHECK(ps[i]->ended, "%s co %zu of %zu did not end",
                    bench_impl_name[kind], i, n);
        if (ps[i]->mxcsr != mine) odd++;
    }
    BENCH_CHECK(odd == 0, "%zu %s co(s) ran with an MXCSR other than main's "
                "0x%" PRIx32 ": the comparison would be unfair", odd,
                bench_impl_name[kind], mine);
}

/* ------------------------------------------------------------------------ */
/* libaco's workloads, each timed on its own.                               */
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

static void bench_header(const char* mode, int cpu) {
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
    int fm = aco__fp_mode(-1);
    if (fm >= 0)
        printf("+build:FP control words: %s (this CPU's way; the headline "
               "also times the other)\n", fm ? "loaded on every switch" :
               "compared, loaded on a difference");
    int w = aco__copy_width(0);
    if (w != 0)
        printf("+build:stack copies: %d-byte moves (the widest aco.c uses on "
               "this CPU)\n", w);
#ifdef BENCH_HAVE_FCONTEXT
#ifdef BOOST_LIB_VERSION
    printf("+peer:fcontext: Boost.Context %s jump_fcontext/make_fcontext "
           "(static libboost_context.a)\n", BOOST_LIB_VERSION);
#else
    printf("+peer:fcontext: Boost.Context jump_fcontext/make_fcontext "
           "(static libboost_context.a)\n");
#endif
#else
    printf("+peer:fcontext: not linked into this build (%s); install "
           "libboost-context-dev for x86-64 builds\n",
           strcmp(BENCH_ARCH, "i386") == 0
               ? "i386: Debian has no -m32 libboost-context next to the amd64 one"
               : "libboost_context.a was not found");
#endif
    printf("+peer:swapcontext: glibc %s\n", gnu_get_libc_version());
    if (cpu >= 0)
        printf("+cpu:pinned to CPU %d (sched_setaffinity, the last allowed)\n",
               cpu);
    else
        printf("+cpu:not pinned\n");
    if (getenv("LD_PRELOAD") != NULL && !bench_on_valgrind())
        printf("+malloc:LD_PRELOAD=%s (not plain glibc malloc)\n",
               getenv("LD_PRELOAD"));
    printf("+mode:%s%s\n", mode,
           bench_on_valgrind() ? " (under valgrind: the times mean nothing)"
                               : "");
}

static void bench_table_header(void) {
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

/* After some round trips: every co was saved, all at one size near want.
 * The copy size, or 0 when the check failed. */
static size_t bench_check_copies(aco_t** cos, size_t n, size_t want) {
    size_t cpsz = cos[0]->save_stack.max_cpsz;
    size_t odd = 0;
    for (size_t i = 0; i < n; i++) {
        const aco_save_stack_t* ss = &cos[i]->save_stack;
        if (ss->max_cpsz != cpsz || ss->valid_sz != cpsz || ss->ct_save == 0)
            odd++;
    }
    BENCH_CHECK(odd == 0, "%zu of %zu cos were never saved or saved at a "
                "size other than %zu bytes", odd, n, cpsz);
    /* No co copies less than co_fp_min: on i386 that is ~44 bytes, since
     * aco_yield's own frame lies below it (on x86-64 the compiler makes
     * aco_yield tail-call acosw).  Wants below it mean the minimum. */
    if (want < bench_fixed[0].cpsz) want = bench_fixed[0].cpsz;
    BENCH_CHECK(bench_absdiff(cpsz, want) <= BENCH_COPY_SLACK,
                "%zu cos: copied %zu bytes per co, wanted %zu +- %d", n, cpsz,
                want, BENCH_COPY_SLACK);
    return odd == 0 ? cpsz : 0;
}

/* ------------------------------------------------------------------------ */
/* Cases of the table                                                       */
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
    size_t cpsz = bench_check_copies(cos, co_amount, copy_sz);
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

/* Every row kind, a copy at each end of the size range, in well under a
 * second (and ~10 s under memcheck). */
static const bench_case_t bench_smoke[] = {
    BENCH_STANDALONE(200 * K),
    {2, 8, 20 * K},
    {2, 120, 20 * K},
    {100, 1000, 10 * K},
    {10, 7992, 2 * K},
};

/* ~5 s: the copy-size curve with 2 cos (hot caches), then many cos (cold
 * caches: every round trip misses) at a few sizes. */
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

/* Upstream's table, and more: ~1 min, and ~3 GiB at 10M cos. */
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

/* ------------------------------------------------------------------------ */
/* Series: one timed segment per round; medians once all rounds are done.  */
/* ------------------------------------------------------------------------ */

#define BENCH_MAX_ROUNDS 101

typedef struct {
    uint64_t ns[BENCH_MAX_ROUNDS];  /* one sample per round, integer ns */
    size_t   n;
    uint64_t ops;                   /* operations in each sample */
} bench_series_t;

static void bench_series_add(bench_series_t* s, uint64_t ns) {
    if (s->n < BENCH_MAX_ROUNDS) s->ns[s->n++] = ns;
}

static int bench_cmp_double(const void* a, const void* b) {
    double x = *(const double*)a, y = *(const double*)b;
    return x < y ? -1 : x > y;
}

static double bench_median(double* v, size_t n) {
    if (n == 0) return 0.0;
    qsort(v, n, sizeof(*v), bench_cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

/* Median ns per operation. */
static double bench_series_median(const bench_series_t* s) {
    double v[BENCH_MAX_ROUNDS];
    for (size_t i = 0; i < s->n; i++)
        v[i] = (double)s->ns[i] / (double)(s->ops ? s->ops : 1);
    return bench_median(v, s->n);
}

/* Median over rounds of a's ns per op / b's ns per op in the same round:
 * pairs taken close in time, so the machine's drift cancels. */
static double bench_series_ratio(const bench_series_t* a,
                                 const bench_series_t* b) {
    double v[BENCH_MAX_ROUNDS];
    size_t n = a->n < b->n ? a->n : b->n;
    for (size_t i = 0; i < n; i++) {
        double x = (double)a->ns[i] / (double)(a->ops ? a->ops : 1);
        double y = (double)b->ns[i] / (double)(b->ops ? b->ops : 1);
        v[i] = y > 0.0 ? x / y : 0.0;
    }
    return bench_median(v, n);
}

/* ------------------------------------------------------------------------ */
/* Machine-readable results: kind,impl,n,bytes,value,extra                  */
/* ------------------------------------------------------------------------ */

static FILE* bench_csv;

static void bench_csv_row(const char* kind, const char* impl, size_t n,
                          size_t bytes, double value, double extra) {
    if (bench_csv == NULL) return;
    fprintf(bench_csv, "%s,%s,%zu,%zu,%.3f,%.3f\n", kind, impl, n, bytes,
            value, extra);
    fflush(bench_csv);
}

/* ------------------------------------------------------------------------ */
/* The comparison                                                           */
/* ------------------------------------------------------------------------ */

typedef struct {
    const char* name;
    size_t rounds;              /* timed rounds (one more warms up) */
    const size_t* sizes;        /* live bytes per co of the copy rows */
    size_t nsizes;
    uint64_t rt_ops;            /* round trips per segment (libaco's: up to
                                 * 512 B; fewer above, as its copies grow) */
    uint64_t uctx_div;          /* swapcontext runs rt_ops / uctx_div */
    size_t create_n;            /* cos created, then destroyed (target 4) */
    size_t table_n[2];          /* cos of the RocketCo table ... */
    size_t table_s;             /* ... round trips each ... */
    size_t table_s_uctx;        /* ... swapcontext's */
} bench_compare_cfg_t;

static const size_t bench_sizes_full[] = {8, 24, 56, 120, 232, 488, 1000,
                                          2024, 4072, 7992};
static const size_t bench_sizes_short[] = {8, 120, 488, 2024, 7992};
static const size_t bench_sizes_smoke[] = {8, 120, 7992};

static const bench_compare_cfg_t bench_cmp_full = {
    "full", 15, bench_sizes_full, BENCH_COUNT(bench_sizes_full),
    1 * M, 25, 1 * M, {1000, 5000}, 100, 10};
static const bench_compare_cfg_t bench_cmp_short = {
    "short", 7, bench_sizes_short, BENCH_COUNT(bench_sizes_short),
    500 * K, 25, 1 * M, {1000, 5000}, 100, 10};
static const bench_compare_cfg_t bench_cmp_smoke = {
    "smoke", 1, bench_sizes_smoke, BENCH_COUNT(bench_sizes_smoke),
    2 * K, 10, 1 * K, {50, 100}, 3, 2};

/* One row of round trips: the same workload for every implementation.
 * libaco runs it on one share stack (copies for n == 2); a peer's cos have
 * stacks of their own and never copy. */
typedef struct {
    size_t want;                /* live bytes per co */
    size_t nco;                 /* 1: standalone; 2: two cos alternating */
    size_t cpsz;                /* what libaco copied, checked */
    aco_share_stack_t* sstk;
    aco_t* cos[2];
    bench_peer_t* peers[BENCH_IMPLS][2];
    bench_series_t s[BENCH_IMPLS];
} bench_rt_row_t;

static aco_t* bench_main_co;

static void bench_rt_row_init(bench_rt_row_t* row, size_t nco, size_t want,
                              const bench_compare_cfg_t* cfg) {
    memset(row, 0, sizeof(*row));
    row->nco = nco;
    row->want = want;
    /* Segments of about equal length: libaco's copies grow with want, the
     * peers' round trips do not. */
    uint64_t ops = cfg->rt_ops;
    uint64_t aco_ops = want > 512 ? ops * 512 / want : ops;
    bench_fp_quiet();
    row->sstk = aco_share_stack_new(0);
    bench_shape_t shape = nco == 1 ? (bench_shape_t){co_fp_min, 0}
                                   : bench_shape_for(want);
    bench.payload = shape.payload;
    bench_create(row->cos, nco, bench_main_co, row->sstk, shape.fp);
    bench_warm(row->cos, nco);
    row->s[BENCH_ACO].ops = aco_ops;
    for (int k = BENCH_FCTX; k < BENCH_IMPLS; k++) {
        if (!bench_have(k)) continue;
        for (size_t i = 0; i < nco; i++)
            row->peers[k][i] = bench_peer_new(k, BENCH_OWN_STACK_SZ,
                                              nco == 1 ? 0 : want);
        (void)bench_peer_rounds(k, row->peers[k], nco, nco);   /* start */
        row->s[k].ops = k == BENCH_UCTX ? (ops + cfg->uctx_div - 1) / cfg->uctx_div
                                        : ops;
    }
}

/* Round r runs with main's frame at placement r % BENCH_PLACES, for every
 * implementation alike: the medians over rounds do not hang on one. */
__attribute__((noinline))
static void bench_rt_row_segment(bench_rt_row_t* row, int k, size_t r) {
    if (!bench_have(k)) return;
    char* pad = alloca((r % BENCH_PLACES) * BENCH_PLACE_STEP + 16);
    __asm__ volatile("" : : "r"(pad) : "memory");
    bench_fp_quiet();
    uint64_t ns = k == BENCH_ACO
                      ? bench_rounds(row->cos, row->nco, row->s[k].ops)
                      : bench_peer_rounds(k, row->peers[k], row->nco,
                                          row->s[k].ops);
    bench_series_add(&row->s[k], ns);
}

static void bench_rt_row_end(bench_rt_row_t* row) {
    size_t bad0 = bench.bad;
    if (row->nco == 1) {
        const aco_save_stack_t* ss = &row->cos[0]->save_stack;
        BENCH_CHECK(ss->ct_save == 0 && ss->ct_restore == 0,
                    "a standalone co was copied (%zu saves)", ss->ct_save);
        row->cpsz = 0;
    } else {
        row->cpsz = bench_check_copies(row->cos, row->nco, row->want);
    }
    bench_finish(row->cos, row->nco);
    bench_destroy(row->cos, row->nco);
    aco_share_stack_destroy(row->sstk);
    for (int k = BENCH_FCTX; k < BENCH_IMPLS; k++) {
        if (!bench_have(k)) continue;
        bench_peer_finish(k, row->peers[k], row->nco);
        for (size_t i = 0; i < row->nco; i++) bench_peer_free(row->peers[k][i]);
    }
    BENCH_CHECK(bench.bad == bad0, "%zu live-byte checks failed (%zu cos, "
                "%zu B)", bench.bad - bad0, row->nco, row->want);
}

/* ------------------------------------------------------------------------ */
/* Children: this program re-executed, for a fresh process (an empty heap, */
/* glibc's malloc thresholds at their defaults, its own VmHWM).             */
/* ------------------------------------------------------------------------ */

/* Start av[0] (a path, or a name looked up in PATH) with arguments av
 * (NULL-terminated); its stdout comes back through the returned stream. */
static FILE* bench_run(char* const* av, pid_t* pid) {
    int fd[2];
    if (pipe(fd) != 0) bench_die("pipe: %s", strerror(errno));
    fflush(stdout);
    *pid = fork();
    if (*pid < 0) bench_die("fork: %s", strerror(errno));
    if (*pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        close(fd[1]);
        execvp(av[0], av);
        fprintf(stderr, "test_aco_benchmark: exec %s: %s\n", av[0],
                strerror(errno));
        _exit(127);
    }
    close(fd[1]);
    FILE* f = fdopen(fd[0], "r");
    if (f == NULL) bench_die("fdopen: %s", strerror(errno));
    return f;
}

/* Start "this-program args..." (args NULL-terminated), through
 * BENCH_EXEC_WRAPPER if set; its stdout comes back through the stream. */
static FILE* bench_spawn(const char* const* args, pid_t* pid) {
    char self[4096], wrapper[256];
    char* av[16];
    size_t n = 0;
    /* valgrind virtualises readlink, not exec, of /proc/self/exe */
    ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (len <= 0) bench_die("readlink /proc/self/exe: %s", strerror(errno));
    self[len] = '\0';
    const char* w = getenv("BENCH_EXEC_WRAPPER");
    if (w != NULL && *w != '\0') {
        if (strlen(w) >= sizeof(wrapper)) bench_die("BENCH_EXEC_WRAPPER is too long");
        strcpy(wrapper, w);
        for (char* tok = strtok(wrapper, " "); tok != NULL && n < 8;
             tok = strtok(NULL, " "))
            av[n++] = tok;
    }
    av[n++] = self;
    while (*args != NULL && n < BENCH_COUNT(av) - 1) av[n++] = (char*)*args++;
    av[n] = NULL;
    return bench_run(av, pid);
}

/* Close the stream and reap the child: non-zero when it exited with 0. */
static int bench_spawn_wait(FILE* f, pid_t pid, const char* what) {
    int st;
    fclose(f);
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) bench_die("waitpid: %s", strerror(errno));
    int ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
    BENCH_CHECK(ok, "%s child failed: status 0x%x", what, st);
    return ok;
}

/* ------------------------------------------------------------------------ */
/* Target 4: N cos created, then all destroyed, against N malloc(sizeof     */
/* (aco_t)), then N free, interleaved.  glibc adapts its trim and mmap      */
/* thresholds to what a process freed before, and that decides whether      */
/* each create-all pays its page faults again; so this runs in a fresh      */
/* child, in two heap states: glibc's defaults (a destroy-all trims the     */
/* heap, so every round faults its pages back in, on both sides), then the  */
/* heap kept (mallopt(M_TRIM_THRESHOLD, 1 GiB)).  The floor: what any      */
/* allocator pays for N fresh objects of that size and their return, the    */
/* pages faulted in and zeroed, each object's bytes written once, the       */
/* pages given back (one mmap, N stores of sizeof(aco_t), one munmap).      */
/* ------------------------------------------------------------------------ */

enum { BENCH_CD_CREATE, BENCH_CD_DESTROY, BENCH_CD_ACO, BENCH_CD_MALLOC,
       BENCH_CD_FREE, BENCH_CD_MAL, BENCH_CD_FLOOR, BENCH_CD_SERIES };

typedef struct {
    size_t n;
    aco_share_stack_t* sstk;
    aco_t** cos;
    void** ptrs;
    bench_series_t s[2][BENCH_CD_SERIES];   /* [heap kept][what] */
} bench_cd_t;

static void bench_cd_aco(bench_cd_t* cd, bench_series_t* s) {
    bench_fp_quiet();
    uint64_t t0 = bench_now_ns();
    for (size_t i = 0; i < cd->n; i++)     /* default arguments */
        cd->cos[i] = aco_create(bench_main_co, cd->sstk, 0, co_fp_min, NULL);
    uint64_t t1 = bench_now_ns();
    for (size_t i = 0; i < cd->n; i++) aco_destroy(cd->cos[i]);
    uint64_t t2 = bench_now_ns();
    bench_series_add(&s[BENCH_CD_CREATE], t1 - t0);
    bench_series_add(&s[BENCH_CD_DESTROY], t2 - t1);
    bench_series_add(&s[BENCH_CD_ACO], t2 - t0);
}

static void bench_cd_malloc(bench_cd_t* cd, bench_series_t* s) {
    bench_fp_quiet();
    uint64_t t0 = bench_now_ns();
    for (size_t i = 0; i < cd->n; i++) {
        cd->ptrs[i] = malloc(sizeof(aco_t));
        /* the pointer escapes: no malloc/free pair may be elided */
        __asm__ volatile("" : : "r"(cd->ptrs[i]) : "memory");
    }
    uint64_t t1 = bench_now_ns();
    for (size_t i = 0; i < cd->n; i++) free(cd->ptrs[i]);
    uint64_t t2 = bench_now_ns();
    for (size_t i = 0; i < cd->n; i++)
        if (cd->ptrs[i] == NULL) bench_die("out of memory (malloc)");
    bench_series_add(&s[BENCH_CD_MALLOC], t1 - t0);
    bench_series_add(&s[BENCH_CD_FREE], t2 - t1);
    bench_series_add(&s[BENCH_CD_MAL], t2 - t0);
}

static void bench_cd_floor(bench_cd_t* cd, bench_series_t* s) {
    size_t sz = cd->n * sizeof(aco_t);
    bench_fp_quiet();
    uint64_t t0 = bench_now_ns();
    char* m = mmap(NULL, sz ? sz : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    if (m == MAP_FAILED) bench_die("out of memory (mmap)");
    for (size_t i = 0; i < cd->n; i++) {
        memset(m + i * sizeof(aco_t), 1, sizeof(aco_t));
        __asm__ volatile("" : : "r"(m + i * sizeof(aco_t)) : "memory");
    }
    munmap(m, sz ? sz : 1);
    bench_series_add(&s[BENCH_CD_FLOOR], bench_now_ns() - t0);
}

/* The child: rounds (after one warm-up) in each heap state, then every
 * sample on stdout: "cd <kept> <what> <count> <ns>...". */
static int bench_cd_child(size_t n, size_t rounds) {
    bench_cd_t* cd = calloc(1, sizeof(*cd));
    if (cd == NULL) bench_die("out of memory");
    if (rounds >= BENCH_MAX_ROUNDS) rounds = BENCH_MAX_ROUNDS - 1;
    aco_thread_init(NULL);
    bench_main_co = aco_create(NULL, NULL, 0, NULL, NULL);
    cd->n = n;
    cd->sstk = aco_share_stack_new(0);
    cd->cos = bench_xmalloc((n ? n : 1) * sizeof(*cd->cos));
    cd->ptrs = bench_xmalloc((n ? n : 1) * sizeof(*cd->ptrs));
    for (int kept = 0; kept < 2; kept++) {
        bench_series_t* s = cd->s[kept];
        if (kept && mallopt(M_TRIM_THRESHOLD, 1 << 30) != 1)
            bench_die("mallopt(M_TRIM_THRESHOLD) failed");
        for (size_t r = 0; r <= rounds; r++) {
            if (r % 2) {
                bench_cd_aco(cd, s);
                bench_cd_malloc(cd, s);
            } else {
                bench_cd_malloc(cd, s);
                bench_cd_aco(cd, s);
            }
            bench_cd_floor(cd, s);
            if (r == 0)     /* the warm-up round */
                for (int w = 0; w < BENCH_CD_SERIES; w++) s[w].n = 0;
        }
    }
    for (int kept = 0; kept < 2; kept++)
        for (int w = 0; w < BENCH_CD_SERIES; w++) {
            const bench_series_t* x = &cd->s[kept][w];
            printf("cd %d %d %zu", kept, w, x->n);
            for (size_t i = 0; i < x->n; i++) printf(" %" PRIu64, x->ns[i]);
            printf("\n");
        }
    aco_share_stack_destroy(cd->sstk);
    aco_destroy(bench_main_co);
    free(cd->cos);
    free(cd->ptrs);
    free(cd);
    return bench_failures == 0 ? 0 : 1;
}

/* Run the child; its samples in cd->s (ops = n).  Non-zero when it ran. */
static int bench_cd_run(bench_cd_t* cd, size_t n, size_t rounds) {
    char ns[32], rs[32];
    const char* args[] = {"--cd-child", ns, rs, NULL};
    pid_t pid;
    snprintf(ns, sizeof(ns), "%zu", n);
    snprintf(rs, sizeof(rs), "%zu", rounds);
    memset(cd, 0, sizeof(*cd));
    cd->n = n;
    FILE* f = bench_spawn(args, &pid);
    int kept, w;
    size_t cnt;
    while (fscanf(f, " cd %d %d %zu", &kept, &w, &cnt) == 3) {
        if (kept < 0 || kept > 1 || w < 0 || w >= BENCH_CD_SERIES) break;
        bench_series_t* x = &cd->s[kept][w];
        x->ops = n;
        for (size_t i = 0; i < cnt; i++) {
            uint64_t v;
            if (fscanf(f, " %" SCNu64, &v) != 1) break;
            bench_series_add(x, v);
        }
    }
    return bench_spawn_wait(f, pid, "create/destroy");
}

/* The RocketCo table (seed 002): N cos, each resumed S times round robin.
 * create: ns per co to make it (its stack and record; untimed: the first
 * resume, which starts it and touches its stack); switch: ns per context
 * switch, half a resume + yield round trip. */
enum { BENCH_T_ACO_SHARED, BENCH_T_ACO_OWN, BENCH_T_FCTX, BENCH_T_UCTX,
       BENCH_T_LANES };
static const char* const bench_t_name[BENCH_T_LANES] = {
    "aco, one share stack for all",
    "aco, own 128 KiB share stack each",
    "fcontext, own 128 KiB stack each",
    "swapcontext, own 128 KiB stack each",
};
static const char* const bench_t_id[BENCH_T_LANES] = {   /* in the CSV */
    "aco_shared", "aco_own", "fcontext", "swapcontext"};

typedef struct {
    bench_series_t create[BENCH_T_LANES][2];
    bench_series_t sw[BENCH_T_LANES][2];
} bench_table_t;

static int bench_t_have(int lane) {
    return lane != BENCH_T_FCTX || bench_have(BENCH_FCTX);
}

static void bench_table_segment(bench_table_t* t, int lane, int ni,
                                const bench_compare_cfg_t* cfg) {
    size_t n = cfg->table_n[ni];
    size_t s = lane == BENCH_T_UCTX ? cfg->table_s_uctx : cfg->table_s;
    uint64_t t0, t1, t2, t3;
    size_t bad0 = bench.bad;

    bench_fp_quiet();
    if (lane == BENCH_T_ACO_SHARED || lane == BENCH_T_ACO_OWN) {
        aco_t** cos = bench_xmalloc(n * sizeof(*cos));
        aco_share_stack_t** st = NULL;
        aco_share_stack_t* shared = NULL;
        if (lane == BENCH_T_ACO_SHARED) {
            shared = aco_share_stack_new(0);    /* untimed: one for all */
            t0 = bench_now_ns();
            for (size_t i = 0; i < n; i++)
                cos[i] = aco_create(bench_main_co, shared, 0, co_fp_min, NULL);
            t1 = bench_now_ns();
        } else {
            st = bench_xmalloc(n * sizeof(*st));
            t0 = bench_now_ns();
            for (size_t i = 0; i < n; i++) {
                st[i] = aco_share_stack_new(BENCH_OWN_STACK_SZ);
                cos[i] = aco_create(bench_main_co, st[i], 0, co_fp_min, NULL);
            }
            t1 = bench_now_ns();
        }
        bench_warm(cos, n);
        bench_fp_quiet();
        t2 = bench_now_ns();
        (void)bench_rounds(cos, n, n * s);
        t3 = bench_now_ns();
        bench_finish(cos, n);
        bench_destroy(cos, n);
        if (shared != NULL) aco_share_stack_destroy(shared);
        if (st != NULL) {
            for (size_t i = 0; i < n; i++) aco_share_stack_destroy(st[i]);
            free(st);
        }
        free(cos);
    } else {
        int k = lane == BENCH_T_FCTX ? BENCH_FCTX : BENCH_UCTX;
        bench_peer_t** ps = bench_xmalloc(n * sizeof(*ps));
        t0 = bench_now_ns();
        for (size_t i = 0; i < n; i++)
            ps[i] = bench_peer_new(k, BENCH_OWN_STACK_SZ, 0);
        t1 = bench_now_ns();
        (void)bench_peer_rounds(k, ps, n, n);   /* start */
        bench_fp_quiet();
        t2 = bench_now_ns();
        (void)bench_peer_rounds(k, ps, n, n * s);
        t3 = bench_now_ns();
        bench_peer_finish(k, ps, n);
        for (size_t i = 0; i < n; i++) bench_peer_free(ps[i]);
        free(ps);
    }
    BENCH_CHECK(bench.bad == bad0, "RocketCo table, %s, N=%zu: %zu live-byte "
                "checks failed", bench_t_name[lane], n, bench.bad - bad0);
    t->create[lane][ni].ops = n;
    bench_series_add(&t->create[lane][ni], t1 - t0);
    t->sw[lane][ni].ops = 2 * n * s;
    bench_series_add(&t->sw[lane][ni], t3 - t2);
}

/* The performance targets this run judged, for the summary line at the
 * end: a MISS fails nothing, but it is never hidden behind "passed". */
static struct {
    int met, missed;
    char met_s[128], missed_s[256];
} bench_targets;

static void bench_target_note(char* buf, size_t sz, const char* fmt,
                              const char* id, double v, double limit) {
    size_t len = strlen(buf);
    if (len + 1 < sz)
        snprintf(buf + len, sz - len, fmt, len ? ", " : "", id, v, limit);
}

/* AMD (or Hygon, its licensee): the switch targets differ there. */
static int bench_cpu_amd(void) {
#if defined(__x86_64__) || defined(__i386__)
    unsigned a, b, c, d;
    char v[12];
    if (!__get_cpuid(0, &a, &b, &c, &d)) return 0;
    memcpy(v, &b, 4);
    memcpy(v + 4, &d, 4);
    memcpy(v + 8, &c, 4);
    return memcmp(v, "AuthenticAMD", 12) == 0 || memcmp(v, "HygonGenuine", 12) == 0;
#else
    return 0;
#endif
}

/* PASS or MISS for target id (v <= limit), counted for the summary. */
static const char* bench_verdict(const char* id, double v, double limit) {
    int ok = v <= limit;
    if (ok) {
        bench_targets.met++;
        bench_target_note(bench_targets.met_s, sizeof(bench_targets.met_s),
                          "%s%s (%.3g <= %.3g)", id, v, limit);
    } else {
        bench_targets.missed++;
        bench_target_note(bench_targets.missed_s,
                          sizeof(bench_targets.missed_s),
                          "%s%s (%.3g > %.3g)", id, v, limit);
    }
    return ok ? "PASS" : "MISS";
}

/* Print a ratio, or n/a when a peer is missing. */
static void bench_print_ratio(int have, double r) {
    if (have)
        printf("  %9.3f", r);
    else
        printf("  %9s", "n/a");
}

static void bench_compare(const bench_compare_cfg_t* cfg, size_t rounds) {
    size_t nrows = 1 + cfg->nsizes;
    bench_rt_row_t* rows = bench_xmalloc(nrows * sizeof(*rows));
    bench_cd_t* cd = bench_xmalloc(sizeof(*cd));
    bench_table_t* tab = bench_xmalloc(sizeof(*tab));
    int have_f = bench_have(BENCH_FCTX);

    if (rounds == 0) rounds = cfg->rounds;
    if (rounds >= BENCH_MAX_ROUNDS) rounds = BENCH_MAX_ROUNDS - 1;
    printf("\n== comparison (%s): %zu interleaved rounds after one warm-up; "
           "each round runs every workload on aco, fcontext and swapcontext "
           "back to back, the order rotating; medians over rounds\n",
           cfg->name, rounds);
    printf("   MXCSR/x87 exception flags cleared before each "
           "timed segment and before each peer context is made; times in "
           "integer ns; peers' MXCSR checked equal to main's at the end\n");
    fflush(stdout);

    bench_rt_row_init(&rows[0], 1, 0, cfg);
    for (size_t i = 0; i < cfg->nsizes; i++)
        bench_rt_row_init(&rows[1 + i], 2, cfg->sizes[i], cfg);

    memset(tab, 0, sizeof(*tab));

    for (size_t r = 0; r <= rounds; r++) {
        /* round 0 warms caches, the heap and the page tables: dropped */
        for (size_t i = 0; i < nrows; i++)
            for (int j = 0; j < BENCH_IMPLS; j++)
                bench_rt_row_segment(&rows[i], (int)((j + r) % BENCH_IMPLS), r);
        for (int ni = 0; ni < 2; ni++)
            for (int j = 0; j < BENCH_T_LANES; j++) {
                int lane = (int)((j + r) % BENCH_T_LANES);
                if (bench_t_have(lane)) bench_table_segment(tab, lane, ni, cfg);
            }
        if (r == 0) {
            for (size_t i = 0; i < nrows; i++)
                for (int k = 0; k < BENCH_IMPLS; k++) rows[i].s[k].n = 0;
            for (int l = 0; l < BENCH_T_LANES; l++)
                for (int ni = 0; ni < 2; ni++)
                    tab->create[l][ni].n = tab->sw[l][ni].n = 0;
        }
    }
    for (size_t i = 0; i < nrows; i++) bench_rt_row_end(&rows[i]);
    int cd_ok = bench_cd_run(cd, cfg->create_n, rounds);

    /* Round trips. */
    printf("\n%-44s  %9s  %9s  %11s  %9s  %9s\n",
           "round trip: resume + yield, ns (median)", "aco", "fcontext",
           "swapcontext", "aco/fctx", "aco/swapc");
    for (size_t i = 0; i < nrows; i++) {
        bench_rt_row_t* row = &rows[i];
        char label[96];
        if (row->nco == 1)
            snprintf(label, sizeof(label), "standalone (aco: own share stack)");
        else
            snprintf(label, sizeof(label), "2 cos, %zu B live each (aco: %zu B "
                     "copied)", row->want, row->cpsz);
        double med[BENCH_IMPLS];
        for (int k = 0; k < BENCH_IMPLS; k++)
            med[k] = bench_series_median(&row->s[k]);
        printf("%-44s  %9.2f", label, med[BENCH_ACO]);
        if (have_f) printf("  %9.2f", med[BENCH_FCTX]); else printf("  %9s", "n/a");
        printf("  %11.2f", med[BENCH_UCTX]);
        bench_print_ratio(have_f, bench_series_ratio(&row->s[BENCH_ACO],
                                                     &row->s[BENCH_FCTX]));
        bench_print_ratio(1, bench_series_ratio(&row->s[BENCH_ACO],
                                                &row->s[BENCH_UCTX]));
        printf("\n");
        for (int k = 0; k < BENCH_IMPLS; k++)
            if (bench_have(k))
                bench_csv_row(row->nco == 1 ? "standalone" : "copy",
                              bench_impl_name[k], row->nco,
                              k == BENCH_ACO ? row->cpsz : row->want, med[k],
                              (double)row->s[k].ops);
    }
    printf("  (peers: each co on its own stack, the same live bytes, never "
           "copied; swapcontext ran 1/%" PRIu64 " of the round trips)\n",
           cfg->uctx_div);

    /* Create + destroy. */
    double c_ratio[2] = {0.0, 0.0};
    printf("\n%zu cos: create all, then destroy all, ns per co (medians; a "
           "fresh child process, %zu rounds)\n", cd->n, rounds);
    printf("  %-50s  %-29s%s\n", "", "glibc defaults", "heap kept");
    printf("  %-50s", "aco_create(main, sstk, 0, fp, NULL) + aco_destroy");
    for (int kept = 0; kept < 2; kept++) {
        const bench_series_t* x = cd->s[kept];
        printf("%s%7.2f = %6.2f + %6.2f", kept ? "    " : "  ",
               bench_series_median(&x[BENCH_CD_ACO]),
               bench_series_median(&x[BENCH_CD_CREATE]),
               bench_series_median(&x[BENCH_CD_DESTROY]));
    }
    printf("\n");
    char lm[64];
    snprintf(lm, sizeof(lm), "malloc(sizeof(aco_t) = %zu B) + free",
             sizeof(aco_t));
    printf("  %-50s", lm);
    for (int kept = 0; kept < 2; kept++) {
        const bench_series_t* x = cd->s[kept];
        printf("%s%7.2f = %6.2f + %6.2f", kept ? "    " : "  ",
               bench_series_median(&x[BENCH_CD_MAL]),
               bench_series_median(&x[BENCH_CD_MALLOC]),
               bench_series_median(&x[BENCH_CD_FREE]));
    }
    printf("\n  %-50s", "ratio (median of per-round ratios)");
    for (int kept = 0; kept < 2; kept++) {
        const bench_series_t* x = cd->s[kept];
        c_ratio[kept] = bench_series_ratio(&x[BENCH_CD_ACO], &x[BENCH_CD_MAL]);
        printf("%*s%7.3f", kept ? 22 : 2, "", c_ratio[kept]);
        bench_csv_row("create_destroy", "aco", cd->n, 0,
                      bench_series_median(&x[BENCH_CD_ACO]), kept);
        bench_csv_row("create_destroy", "malloc", cd->n, sizeof(aco_t),
                      bench_series_median(&x[BENCH_CD_MAL]), kept);
    }
    printf("\n  %-50s  %7.2f\n", "floor: fresh pages, each object's bytes written once",
           bench_series_median(&cd->s[0][BENCH_CD_FLOOR]));
    printf("  (glibc defaults: each destroy-all trims the heap, so each "
           "create-all faults its pages in again, on both sides; heap kept: "
           "mallopt(M_TRIM_THRESHOLD, 1 GiB))\n");

    /* The RocketCo table. */
    printf("\nRocketCo-style table (seed 002): create = ns per co (stack and "
           "record; its first resume untimed),\n"
           "switch = ns per context switch = half a resume + yield round trip "
           "(%zu round trips per co, swapcontext %zu)\n",
           cfg->table_s, cfg->table_s_uctx);
    char h0[32], h1[32];
    snprintf(h0, sizeof(h0), "N=%zu create", cfg->table_n[0]);
    snprintf(h1, sizeof(h1), "N=%zu create", cfg->table_n[1]);
    printf("%-38s  %13s  %12s  %13s  %12s\n", "", h0, "switch", h1, "switch");
    for (int l = 0; l < BENCH_T_LANES; l++) {
        printf("%-38s", bench_t_name[l]);
        for (int ni = 0; ni < 2; ni++) {
            if (!bench_t_have(l)) {
                printf("  %13s  %12s", "n/a", "n/a");
                continue;
            }
            double cr = bench_series_median(&tab->create[l][ni]);
            double sw = bench_series_median(&tab->sw[l][ni]);
            printf("  %13.1f  %12.2f", cr, sw);
            bench_csv_row("table_create", bench_t_id[l], cfg->table_n[ni], 0,
                          cr, 0);
            bench_csv_row("table_switch", bench_t_id[l], cfg->table_n[ni], 0,
                          sw, 0);
        }
        printf("\n");
    }

    /* The speed targets (informational: a MISS fails nothing); switch
     * and copy120 are the headline's (bench_headline), not this table's. */
    printf("\ntargets (ratios: medians of per-round ratios; a MISS is "
           "informational, the exit status stays 0)\n");
    printf("  switch, copy120: from the headline's minimal loops (the default "
           "run, --headline, --quick), not from these rows\n");
    if (cd_ok) {
        char l4[96];
        snprintf(l4, sizeof(l4), "create: create + destroy, %zu share-stack "
                 "cos, / malloc + free", cd->n);
        printf("  %-66s %6.3f  <= 1.10  %s  (heap kept: %.3f)\n", l4,
               c_ratio[0], bench_verdict("create", c_ratio[0], 1.10), c_ratio[1]);
        bench_csv_row("target", "create", cd->n, 0, c_ratio[0], 1.10);
        const bench_series_t* x = cd->s[0];
        double a = bench_series_median(&x[BENCH_CD_ACO]);
        double fl = bench_series_median(&x[BENCH_CD_FLOOR]);
        printf("headline create_destroy_ns aco=%.2f malloc=%.2f ratio=%.3f floor=%.2f "
               "vs_floor=%.3f\n", a, bench_series_median(&x[BENCH_CD_MAL]), c_ratio[0],
               fl, fl > 0 ? a / fl : 0.0);
    }
    fflush(stdout);
    free(cd);
    free(tab);
    free(rows);
}

/* ------------------------------------------------------------------------ */
/* Memory: N cos on one share stack, each suspended with K live bytes.      */
/* The workload runs in a re-executed child of this program, so its heap   */
/* starts empty and its VmHWM counts it alone; an empty child (N = 0) is    */
/* the baseline.                                                            */
/* ------------------------------------------------------------------------ */

/* The child: prints "bench-memory <cpsz> <VmHWM KiB>". */
static int bench_memory_child(size_t n, size_t k) {
    aco_thread_init(NULL);
    bench_main_co = aco_create(NULL, NULL, 0, NULL, NULL);
    bench_calibrate(bench_main_co);
    bench_shape_t shape = bench_shape_for(k);
    aco_share_stack_t* sstk = aco_share_stack_new(0);
    /* The benchmark's own bookkeeping: one pointer per co. */
    aco_t** cos = bench_xmalloc((n ? n : 1) * sizeof(*cos));
    size_t cpsz = 0;

    bench.payload = shape.payload;
    for (size_t i = 0; i < n; i++)     /* default arguments */
        cos[i] = aco_create(bench_main_co, sstk, 0, shape.fp, NULL);
    if (n > 0) {
        /* Each co starts and yields with its K bytes live; starting the
         * next saves it.  Resuming cos[0] once more saves the last one. */
        bench_warm(cos, n);
        (void)bench_rounds(cos, n, 1);
        cpsz = bench_check_copies(cos, n, k);
    }
    long hwm = bench_vmhwm_kib();
    bench_finish(cos, n);
    bench_destroy(cos, n);
    free(cos);
    aco_share_stack_destroy(sstk);
    aco_destroy(bench_main_co);
    BENCH_CHECK(bench.bad == 0, "%zu live-byte checks failed", bench.bad);
    printf("bench-memory %zu %ld\n", cpsz, hwm);
    return bench_failures == 0 ? 0 : 1;
}

/* Run the child for (n, k): its copy size and VmHWM, or -1. */
static long bench_memory_spawn(size_t n, size_t k, size_t* cpsz) {
    char ns[32], ks[32];
    const char* args[] = {"--memory-child", ns, ks, NULL};
    pid_t pid;
    long hwm = -1;
    snprintf(ns, sizeof(ns), "%zu", n);
    snprintf(ks, sizeof(ks), "%zu", k);
    FILE* f = bench_spawn(args, &pid);
    if (fscanf(f, "bench-memory %zu %ld", cpsz, &hwm) != 2) hwm = -1;
    return bench_spawn_wait(f, pid, "memory") ? hwm : -1;
}

/* Bytes per co, or -1. */
static double bench_memory(size_t n, size_t k) {
    size_t cpsz = 0, cpsz0 = 0;
    printf("\n== memory: %zu cos on one share stack, each suspended with "
           "%zu B live; default aco_create arguments; malloc: %s\n", n, k,
           getenv("LD_PRELOAD") && !bench_on_valgrind()
               ? "LD_PRELOAD'ed (see above)" : "plain glibc");
    fflush(stdout);
    long base = bench_memory_spawn(0, k, &cpsz0);
    long peak = bench_memory_spawn(n, k, &cpsz);
    if (base < 0 || peak < 0 || n == 0) {
        BENCH_CHECK(n > 0, "--memory needs N > 0");
        return -1.0;
    }
    double per = (double)(peak - base) * 1024.0 / (double)n;
    printf("   copy size %zu B (checked on every co: save_stack.max_cpsz and "
           "valid_sz)\n", cpsz);
    printf("   peak RSS (VmHWM of a fresh child) %ld KiB, empty child %ld KiB"
           "\n   => %.1f B per co, %.3f GiB for %zu cos\n", peak, base, per,
           per * (double)n / (1024.0 * 1024.0 * 1024.0), n);
    printf("   counted: all the child touched - each co (sizeof(aco_t) = %zu"
           " B), its save stack, the allocators' overhead - and the "
           "benchmark's own array of co pointers (%zu B per co)\n",
           sizeof(aco_t), sizeof(aco_t*));
    if (n == 10 * M && k == 120) {
        int tc = getenv("LD_PRELOAD") != NULL && !bench_on_valgrind();
        printf("  %-66s %6.1f  <= 280   %s\n",
               "memory: peak RSS per co, 10M cos x 120 B live, B", per,
               bench_verdict(tc ? "memory (tcmalloc)" : "memory", per, 280.0));
    }
    bench_csv_row("memory", "aco", n, cpsz, per, (double)peak);
    return per;
}

/* ------------------------------------------------------------------------ */
/* Headline: the minimal symmetric loop.  One resume + one yield per        */
/* iteration for libaco, two jump_fcontext calls for fcontext; the co       */
/* bodies do nothing but switch back (the copy case keeps its 120 live      */
/* bytes observable, nothing more), nothing else runs in either loop, and  */
/* each side keeps its context in a register.  Each side is timed at        */
/* BENCH_PLACES placements of main's frame (and of fcontext's stack top)   */
/* spread over a 4 KiB page, and a round counts their median: where        */
/* a stack lands modulo the page can decide, on some CPUs, whether a        */
/* switch's loads wait for the other side's just-pushed stores (4K          */
/* aliasing), and ASLR moves main's stack by a random part of a page every  */
/* run, so no single placement may decide.  Rounds interleave the sides;    */
/* figures are medians over rounds, ratios medians of per-round ratios;     */
/* the real run repeats all that in 5 fresh processes and takes the median  */
/* of theirs (bench_headline_procs).                                        */
/* ------------------------------------------------------------------------ */


/* BENCH_HL_SOLO_ALT: the solo loop with acosw's other way with the FP
 * words (x86-64: see aco__fp_mode); BENCH_HL_SOLO_DIRTY: the solo loop
 * with main's inexact flag set and the co's clear, so that a switch that
 * loads MXCSR whole loads a changed one every time.  Both in the same
 * rounds, not in the targets.  The floors, in the same rounds too:
 * BENCH_HL_FLOOR_SW the solo loop's shape with bench_floor_sw (stack and
 * instruction pointers only; x86-64), BENCH_HL_FLOOR_COPY the solo loop
 * plus what the copy loop's bytes cost at least: a memcpy of them out of a
 * stack-shaped buffer and one back in, each round trip. */
enum { BENCH_HL_SOLO, BENCH_HL_FCTX, BENCH_HL_COPY, BENCH_HL_SOLO_ALT,
       BENCH_HL_SOLO_DIRTY, BENCH_HL_FLOOR_SW, BENCH_HL_FLOOR_COPY,
       BENCH_HL_SERIES };

static struct {
    size_t payload;             /* bench_hl_co_copy's alloca bytes */
    size_t cpsz;                /* what the copy loop moves each way */
    char* img;                  /* BENCH_HL_FLOOR_COPY's stack top image */
    char* save[2];              /* ... and its two save buffers */
} bench_hl;

static void bench_hl_co_solo(void) {
    for (;;) aco_yield();
}

/* bench_hl.payload bytes stay live (observable to the compiler) across
 * every yield; what the copy moves is that, the frame and the return
 * address: calibrated to 120 B by bench_hl_calibrate. */
static void bench_hl_co_copy(void) {
    size_t n = bench_hl.payload;
    char* w = alloca(n + 1);
    memset(w, 0x5a, n + 1);
    for (;;) {
        aco_yield();
        __asm__ volatile("" : : "r"(w) : "memory");
    }
}

__attribute__((noinline))
static uint64_t bench_hl_solo_loop(aco_t* co, size_t iters) {
    uint64_t t0 = bench_now_ns();
    for (size_t i = 0; i < iters; i++) aco_resume(co);
    return bench_now_ns() - t0;
}

/* Two round trips per iteration, one per co: each takes the stack from
 * the other, so every round trip saves 120 B and restores 120 B. */
__attribute__((noinline))
static uint64_t bench_hl_copy_loop(aco_t* a, aco_t* b, size_t iters) {
    uint64_t t0 = bench_now_ns();
    for (size_t i = 0; i < iters; i += 2) {
        aco_resume(a);
        aco_resume(b);
    }
    return bench_now_ns() - t0;
}

/* The copy floor: the solo loop, and per round trip the copy loop's bytes
 * saved out of a stack top and restored into it, as the copy path does
 * (out to one save buffer, in from the other, which the round trip before
 * wrote), with glibc's memcpy of a size it learns at run time. */
__attribute__((noinline))
static uint64_t bench_hl_copy_floor_loop(aco_t* co, size_t iters) {
    size_t n = *(volatile size_t*)&bench_hl.cpsz;
    char* img = bench_hl.img;
    uint64_t t0 = bench_now_ns();
    for (size_t i = 0; i < iters; i++) {
        memcpy(bench_hl.save[i & 1], img, n);
        memcpy(img, bench_hl.save[(i + 1) & 1], n);
        aco_resume(co);
    }
    return bench_now_ns() - t0;
}

#ifdef BENCH_HAVE_FLOOR
__attribute__((noinline))
static uint64_t bench_hl_floor_loop(bench_floor_ctx_t* co, size_t iters) {
    bench_floor_ctx_t self;
    uint64_t t0 = bench_now_ns();
    for (size_t i = 0; i < iters; i++) bench_floor_sw(&self, co);
    return bench_now_ns() - t0;
}
#endif

#ifdef BENCH_HAVE_FCONTEXT
static void bench_hl_fctx_entry(bench_fctx_transfer_t t) {
    for (;;) t = jump_fcontext(t.fctx, NULL);
}

__attribute__((noinline))
static uint64_t bench_hl_fctx_loop(bench_fctx_t* ctx, size_t iters) {
    bench_fctx_t c = *ctx;
    uint64_t t0 = bench_now_ns();
    for (size_t i = 0; i < iters; i++) c = jump_fcontext(c, NULL).fctx;
    uint64_t ns = bench_now_ns() - t0;
    *ctx = c;
    return ns;
}
#endif

typedef struct {
    aco_t* solo;
    aco_t* copy[2];
#ifdef BENCH_HAVE_FCONTEXT
    bench_fctx_t fctx[BENCH_PLACES];
#endif
#ifdef BENCH_HAVE_FLOOR
    bench_floor_ctx_t floor[BENCH_PLACES];
#endif
} bench_hl_cos_t;

/* One segment of workload w with main's frame off bytes lower. */
__attribute__((noinline))
static uint64_t bench_hl_segment(bench_hl_cos_t* c, int w, size_t place,
                                 size_t iters) {
    char* pad = alloca(place * BENCH_PLACE_STEP + 16);
    __asm__ volatile("" : : "r"(pad) : "memory");
    bench_fp_quiet();
    /* The solo co's words as main's are now, flags clear: where a switch
     * compares and finds the control bits equal, the co ran with main's
     * flags, and a DIRTY segment's would stay in its record. */
    if (w == BENCH_HL_SOLO || w == BENCH_HL_SOLO_ALT || w == BENCH_HL_SOLO_DIRTY ||
        w == BENCH_HL_FLOOR_COPY)
        aco_resume(c->solo);
    switch (w) {
    case BENCH_HL_SOLO: return bench_hl_solo_loop(c->solo, iters);
    case BENCH_HL_FLOOR_COPY: return bench_hl_copy_floor_loop(c->solo, iters);
#ifdef BENCH_HAVE_FLOOR
    case BENCH_HL_FLOOR_SW: return bench_hl_floor_loop(&c->floor[place], iters);
#endif
    case BENCH_HL_COPY: return bench_hl_copy_loop(c->copy[0], c->copy[1], iters);
    case BENCH_HL_SOLO_ALT: {
        int m = aco__fp_mode(-1);
        aco__fp_mode(!m);
        uint64_t ns = bench_hl_solo_loop(c->solo, iters);
        aco__fp_mode(m);
        return ns;
    }
    case BENCH_HL_SOLO_DIRTY: {
        volatile double x = 1.0, y = 3.0;
        volatile double z = x / y;      /* inexact */
        (void)z;
        return bench_hl_solo_loop(c->solo, iters);
    }
#ifdef BENCH_HAVE_FCONTEXT
    case BENCH_HL_FCTX: return bench_hl_fctx_loop(&c->fctx[place], iters);
#endif
    }
    return 0;
}

/* The copy size of two bench_hl_co_copy cos taking turns, with payload p. */
static size_t bench_hl_probe(size_t p) {
    aco_share_stack_t* s = aco_share_stack_new(0);
    aco_t* a = aco_create(bench_main_co, s, 0, bench_hl_co_copy, NULL);
    aco_t* b = aco_create(bench_main_co, s, 0, bench_hl_co_copy, NULL);
    bench_hl.payload = p;
    aco_resume(a);
    aco_resume(b);
    aco_resume(a);
    size_t sz = a->save_stack.max_cpsz;
    BENCH_CHECK(b->save_stack.max_cpsz == sz, "headline: two cos of one shape "
                "copied %zu and %zu B", sz, b->save_stack.max_cpsz);
    aco_destroy(a);
    aco_destroy(b);
    aco_share_stack_destroy(s);
    return sz;
}

/* The payload whose copies come nearest to want bytes (exactly want with
 * gcc and clang -O2 on x86-64; elsewhere frames move in 16-byte steps). */
static size_t bench_hl_calibrate(size_t want) {
    size_t best = 0, best_d = SIZE_MAX;
    for (size_t p = 0; p <= want && best_d != 0; p += 8) {
        size_t d = bench_absdiff(bench_hl_probe(p), want);
        if (d < best_d) {
            best = p;
            best_d = d;
        }
    }
    return best;
}

/* The median of one round's placements (the upper of the middle two):
 * a placement that happens to alias does not move it. */
static uint64_t bench_hl_mid(uint64_t* t) {
    for (size_t i = 1; i < BENCH_PLACES; i++)    /* insertion sort */
        for (size_t j = i; j > 0 && t[j - 1] > t[j]; j--) {
            uint64_t x = t[j];
            t[j] = t[j - 1];
            t[j - 1] = x;
        }
    return t[BENCH_PLACES / 2];
}

/* Whether this build times workload w (fcontext, the other FP way and the
 * switch's floor are not everywhere). */
static int bench_hl_times(int w, int have_f, int fp_mode) {
    if (w == BENCH_HL_FCTX) return have_f;
    if (w == BENCH_HL_SOLO_ALT || w == BENCH_HL_SOLO_DIRTY) return fp_mode >= 0;
#ifndef BENCH_HAVE_FLOOR
    if (w == BENCH_HL_FLOOR_SW) return 0;
#endif
    return 1;
}

/* What one process measures for the headline: medians over its rounds,
 * ratios medians of per-round ratios (NAN where a side is missing). */
typedef struct {
    double solo, copy, fctx;    /* ns per round trip */
    double r1, r2;              /* solo and copy / fcontext's solo */
    double alt, r_alt;          /* solo, the other FP way; / solo */
    double dirty, r_dirty;      /* solo, main's flags set; / solo */
    double fsw, r_fsw;          /* the switch's floor; solo / it */
    double fcp, r_fcp;          /* the copy loop's floor; copy / it */
    size_t cpsz;                /* bytes each copy moved */
} bench_hl_res_t;

/* The headline loops in this process (see above).  quick: 0 the real
 * thing, 1 fewer round trips (--quick), 2 a functional check (--smoke). */
static void bench_headline_measure(size_t rounds, int quick, bench_hl_res_t* res) {
    const size_t iters = quick == 0 ? 200000 : quick == 1 ? 20000 : 2000;
    int have_f = bench_have(BENCH_FCTX);
    int fp_mode = aco__fp_mode(-1);     /* -1: no other way to time */
    bench_hl_cos_t c;
    bench_series_t* s = bench_xmalloc(BENCH_HL_SERIES * sizeof(*s));
    memset(s, 0, BENCH_HL_SERIES * sizeof(*s));

    bench_hl.payload = bench_hl_calibrate(120);

    aco_share_stack_t* s_solo = aco_share_stack_new(0);
    aco_share_stack_t* s_copy = aco_share_stack_new(0);
    c.solo = aco_create(bench_main_co, s_solo, 0, bench_hl_co_solo, NULL);
    c.copy[0] = aco_create(bench_main_co, s_copy, 0, bench_hl_co_copy, NULL);
    c.copy[1] = aco_create(bench_main_co, s_copy, 0, bench_hl_co_copy, NULL);
    aco_resume(c.solo);
    aco_resume(c.copy[0]);
    aco_resume(c.copy[1]);
    /* the copy floor's buffers: a page whose end is a stack's top */
    bench_hl.cpsz = c.copy[0]->save_stack.max_cpsz;
    char* page = aligned_alloc(4096, 4096);
    if (page == NULL) bench_die("headline: no memory for the copy floor");
    memset(page, 0x5a, 4096);
    bench_hl.img = page + 4096 - bench_hl.cpsz;
    for (int i = 0; i < 2; i++) {
        bench_hl.save[i] = bench_xmalloc(bench_hl.cpsz + 1);
        memcpy(bench_hl.save[i], bench_hl.img, bench_hl.cpsz);
    }
#ifdef BENCH_HAVE_FLOOR
    bench_stack_t flst[BENCH_PLACES];
    for (size_t i = 0; i < BENCH_PLACES; i++) {
        size_t off = ((i + BENCH_PLACES / 2) % BENCH_PLACES) * BENCH_PLACE_STEP;
        bench_stack_new(&flst[i], 2 * BENCH_PLACE_STEP * BENCH_PLACES);
        c.floor[i].sp = flst[i].lo + flst[i].sz - off - 16;
        c.floor[i].pc = (void*)bench_floor_co;
    }
#endif
#ifdef BENCH_HAVE_FCONTEXT
    bench_stack_t fst[BENCH_PLACES];
    for (size_t i = 0; i < BENCH_PLACES; i++) {
        size_t off = ((i + BENCH_PLACES / 2) % BENCH_PLACES) * BENCH_PLACE_STEP;
        bench_stack_new(&fst[i], BENCH_OWN_STACK_SZ);
        bench_fp_quiet();
        c.fctx[i] = make_fcontext(fst[i].lo + fst[i].sz - off,
                                  fst[i].sz - off, bench_hl_fctx_entry);
        c.fctx[i] = jump_fcontext(c.fctx[i], NULL).fctx;   /* started */
    }
#endif

    for (int w = 0; w < BENCH_HL_SERIES; w++) s[w].ops = iters;
    for (size_t r = 0; r <= rounds; r++) {
        uint64_t t[BENCH_HL_SERIES][BENCH_PLACES];
        for (size_t p = 0; p < BENCH_PLACES; p++)
            for (int j = 0; j < BENCH_HL_SERIES; j++) {
                int w = (int)((j + r + p) % BENCH_HL_SERIES);  /* rotate */
                if (bench_hl_times(w, have_f, fp_mode))
                    t[w][p] = bench_hl_segment(&c, w, p, iters);
            }
        if (r == 0) continue;      /* the warm-up round */
        for (int w = 0; w < BENCH_HL_SERIES; w++)
            if (bench_hl_times(w, have_f, fp_mode))
                bench_series_add(&s[w], bench_hl_mid(t[w]));
    }

    size_t cpsz = c.copy[0]->save_stack.max_cpsz;
    BENCH_CHECK(bench_absdiff(cpsz, 120) <= BENCH_COPY_SLACK &&
                c.copy[1]->save_stack.max_cpsz == cpsz &&
                c.copy[0]->save_stack.ct_save >= rounds * iters / 2,
                "headline: the copy cos copied %zu and %zu B (want 120), "
                "saved %zu times", cpsz, c.copy[1]->save_stack.max_cpsz,
                c.copy[0]->save_stack.ct_save);
    BENCH_CHECK(c.solo->save_stack.ct_save == 0, "headline: the standalone co "
                "was copied %zu times", c.solo->save_stack.ct_save);

    res->cpsz = cpsz;
    res->solo = bench_series_median(&s[BENCH_HL_SOLO]);
    res->copy = bench_series_median(&s[BENCH_HL_COPY]);
    res->fctx = res->r1 = res->r2 = NAN;
    res->alt = res->r_alt = res->dirty = res->r_dirty = NAN;
    res->fsw = res->r_fsw = NAN;
    res->fcp = bench_series_median(&s[BENCH_HL_FLOOR_COPY]);
    res->r_fcp = bench_series_ratio(&s[BENCH_HL_COPY], &s[BENCH_HL_FLOOR_COPY]);
    if (bench_hl_times(BENCH_HL_FLOOR_SW, have_f, fp_mode)) {
        res->fsw = bench_series_median(&s[BENCH_HL_FLOOR_SW]);
        res->r_fsw = bench_series_ratio(&s[BENCH_HL_SOLO], &s[BENCH_HL_FLOOR_SW]);
    }
    if (have_f) {
        res->fctx = bench_series_median(&s[BENCH_HL_FCTX]);
        res->r1 = bench_series_ratio(&s[BENCH_HL_SOLO], &s[BENCH_HL_FCTX]);
        res->r2 = bench_series_ratio(&s[BENCH_HL_COPY], &s[BENCH_HL_FCTX]);
    }
    if (fp_mode >= 0) {
        res->alt = bench_series_median(&s[BENCH_HL_SOLO_ALT]);
        res->r_alt = bench_series_ratio(&s[BENCH_HL_SOLO_ALT], &s[BENCH_HL_SOLO]);
        res->dirty = bench_series_median(&s[BENCH_HL_SOLO_DIRTY]);
        res->r_dirty = bench_series_ratio(&s[BENCH_HL_SOLO_DIRTY], &s[BENCH_HL_SOLO]);
    }

    aco_destroy(c.solo);
    aco_destroy(c.copy[0]);
    aco_destroy(c.copy[1]);
    aco_share_stack_destroy(s_solo);
    aco_share_stack_destroy(s_copy);
#ifdef BENCH_HAVE_FCONTEXT
    for (size_t i = 0; i < BENCH_PLACES; i++) bench_stack_free(&fst[i]);
#endif
#ifdef BENCH_HAVE_FLOOR
    for (size_t i = 0; i < BENCH_PLACES; i++) bench_stack_free(&flst[i]);
#endif
    free(bench_hl.save[0]);
    free(bench_hl.save[1]);
    free(page);
    free(s);
}

/* The real headline's processes (bench_headline_procs). */
#define BENCH_HL_PROCS 5

/* The fields of bench_hl_res_t as one line, for --headline-child. */
#define BENCH_HL_FMT "hlchild %la %la %la %la %la %la %la %la %la %la %la %la %la %zu\n"
#define BENCH_HL_NF 13      /* the doubles in it */

static int bench_headline_child(size_t rounds, int quick) {
    bench_hl_res_t r;
    bench_headline_measure(rounds, quick, &r);
    printf(BENCH_HL_FMT, r.solo, r.copy, r.fctx, r.r1, r.r2, r.alt, r.r_alt,
           r.dirty, r.r_dirty, r.fsw, r.r_fsw, r.fcp, r.r_fcp, r.cpsz);
    return bench_failures != 0;
}

static int bench_dbl_cmp(const void* a, const void* b) {
    double x = *(const double*)a, y = *(const double*)b;
    return x < y ? -1 : x > y;
}

/* The median of n values (NAN if any is NAN: a side was missing). */
static double bench_median_of(double* v, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (isnan(v[i])) return NAN;
    qsort(v, n, sizeof(*v), bench_dbl_cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The headline in procs fresh processes, one after another (this program
 * again, --headline-child): on the Zen 3 guest one process's ratio differed
 * from the next's by up to a third, with the machine's state (its other
 * tenants) and the process's address-space layout, so that one process is
 * one draw.  Every field of res is the median over the processes of
 * theirs. */
static void bench_headline_procs(size_t rounds, int quick, int procs,
                                 bench_hl_res_t* res, double* r1s) {
    double f[BENCH_HL_NF][BENCH_HL_PROCS];
    size_t cpsz = 0;
    if (procs < 1 || procs > BENCH_HL_PROCS) bench_die("headline: %d processes", procs);
    char r[32], q[32];
    snprintf(r, sizeof(r), "%zu", rounds);
    snprintf(q, sizeof(q), "%d", quick);
    const char* args[] = {"--headline-child", r, q, NULL};
    for (int i = 0; i < procs; i++) {
        pid_t pid;
        fflush(stdout);
        FILE* in = bench_spawn(args, &pid);
        char line[1024];
        int got = 0;
        while (fgets(line, sizeof(line), in) != NULL) {
            double v[BENCH_HL_NF];
            size_t cz;
            if (sscanf(line, BENCH_HL_FMT, &v[0], &v[1], &v[2], &v[3], &v[4],
                       &v[5], &v[6], &v[7], &v[8], &v[9], &v[10], &v[11],
                       &v[12], &cz) == BENCH_HL_NF + 1) {
                for (int k = 0; k < BENCH_HL_NF; k++) f[k][i] = v[k];
                cpsz = cz;
                got = 1;
            } else {
                fputs(line, stdout);    /* not ours: pass it on */
            }
        }
        if (!bench_spawn_wait(in, pid, "headline") || !got) {
            BENCH_CHECK(got, "headline: process %d of %d printed no figures", i + 1, procs);
            for (int k = 0; k < BENCH_HL_NF; k++) f[k][i] = NAN;
        }
        r1s[i] = f[3][i];
    }
    double* out[BENCH_HL_NF] = {&res->solo, &res->copy, &res->fctx, &res->r1,
                                &res->r2, &res->alt, &res->r_alt, &res->dirty,
                                &res->r_dirty, &res->fsw, &res->r_fsw,
                                &res->fcp, &res->r_fcp};
    for (int k = 0; k < BENCH_HL_NF; k++) *out[k] = bench_median_of(f[k], (size_t)procs);
    res->cpsz = cpsz;
}

/* A headline's floor fields and its end: " floor=F vs_floor=R" (n/a where
 * this build has no such floor). */
static void bench_floor_fields(double floor, double ratio) {
    if (isnan(floor)) printf(" floor=n/a vs_floor=n/a\n");
    else printf(" floor=%.2f vs_floor=%.3f\n", floor, ratio);
}

/* The floors' row of the headline's table. */
static void bench_floor_table(const bench_hl_res_t* r) {
    printf("   floors, ns (median): ");
    if (isnan(r->fsw)) printf("no switch floor on " BENCH_ARCH);
    else printf("a switch of sp and pc only %.2f (standalone / it %.3f)", r->fsw, r->r_fsw);
    printf("; standalone + memcpy of the %zu B out and in %.2f (copy / it %.3f)\n",
           r->cpsz, r->fcp, r->r_fcp);
}

/* The headline lines ("headline NAME ours=... peer=... ratio=..."), after a table of what
 * they came from.  quick: 0 the real thing, 1 fewer round trips (--quick),
 * 2 a functional check (--smoke).  rounds 0: 9, or 3 with quick.  The real
 * thing runs in BENCH_HL_PROCS fresh processes (bench_headline_procs),
 * --smoke in 2, --quick in this one.  Returns fcontext's round trip in ns (0 without fcontext). */
static double bench_headline(size_t rounds, int quick) {
    double fctx_ns = 0.0;
    const size_t iters = quick == 0 ? 200000 : quick == 1 ? 20000 : 2000;
    if (rounds == 0) rounds = quick ? 3 : 9;
    if (rounds >= BENCH_MAX_ROUNDS) rounds = BENCH_MAX_ROUNDS - 1;
    /* --smoke: two small ones, so that the suite runs this path too */
    int procs = quick == 0 ? BENCH_HL_PROCS : quick == 2 ? 2 : 1;
    int have_f = bench_have(BENCH_FCTX);
    int fp_mode = aco__fp_mode(-1);

    printf("\n== headline: minimal symmetric loops (aco: one aco_resume, the "
           "co one aco_yield; fcontext: one jump_fcontext each way, its own "
           "%u KiB stack; nothing else in either loop), %zu round trips per "
           "segment, the median of %d placements of main's frame (and "
           "fcontext's stack top) per round, %zu interleaved rounds after one warm-up, "
           "medians; FP exception flags cleared before each segment (but the "
           "one that times them set)",
           BENCH_OWN_STACK_SZ >> 10, iters, BENCH_PLACES, rounds);
    if (procs > 1)
        printf("; in %d fresh processes one after another (each its own "
               "address-space layout), the median of theirs", procs);
    printf("\n");

    bench_hl_res_t res;
    double r1s[BENCH_HL_PROCS];
    if (procs > 1) {
        bench_headline_procs(rounds, quick, procs, &res, r1s);
    } else {
        bench_headline_measure(rounds, quick, &res);
    }
    double solo = res.solo, copy = res.copy;
    size_t cpsz = res.cpsz;
    if (fp_mode >= 0)
        printf("   FP control words %s (this CPU's way): standalone %.2f ns; "
               "%s instead: %.2f ns, %.3f times; this CPU's way with main's "
               "inexact flag set: %.2f ns, %.3f times\n",
               fp_mode ? "loaded on every switch" : "compared, loaded on a difference",
               solo, fp_mode ? "compared, loaded on a difference" : "loaded on every switch",
               res.alt, res.r_alt, res.dirty, res.r_dirty);
    printf("   round trip, ns (median)   aco %.2f standalone, %.2f with %zu B "
           "copied each way", solo, copy, cpsz);
    if (have_f) {
        double f = res.fctx;
        fctx_ns = f;
        double r1 = res.r1, r2 = res.r2;
        printf("; fcontext %.2f\n", f);
        if (procs > 1) {
            printf("   standalone / fcontext in each process:");
            for (int i = 0; i < procs; i++) printf(" %.3f", r1s[i]);
            printf("\n");
        }
        /* The switch targets: per vendor, since the FP words cost what
         * they cost on each; the shared-FP build has its own for the solo
         * round trip. */
        int amd = bench_cpu_amd();
        double t1 = amd ? 1.00 : 0.90, t2 = amd ? 1.25 : 1.40;
#ifdef ACO_CONFIG_SHARE_FPU_MXCSR_ENV
        t1 = 0.55;
#endif
        const char* v1 = bench_verdict("switch", r1, t1);
        const char* v2 = bench_verdict("copy120", r2, t2);
        printf("   targets (%s): switch: standalone / fcontext %.3f <= %.2f %s; "
               "copy120: 120 B copy / fcontext standalone %.3f <= %.2f %s "
               "(%.2fx its floor, a switch plus memcpy of the bytes)\n",
#ifdef ACO_CONFIG_SHARE_FPU_MXCSR_ENV
               amd ? "shared FP env; AMD" : "shared FP env",
#else
               amd ? "AMD" : "Intel and others",
#endif
               r1, t1, v1, r2, t2, v2, res.r_fcp);
        bench_csv_row("target", "switch", 0, 0, r1, t1);
        bench_csv_row("target", "copy120", 0, 0, r2, t2);
        bench_floor_table(&res);
        printf("headline solo_roundtrip_ns aco=%.2f fcontext=%.2f ratio=%.3f",
               solo, f, r1);
        bench_floor_fields(res.fsw, res.r_fsw);
        printf("headline copy120_roundtrip_ns aco=%.2f fcontext=%.2f "
               "ratio=%.3f", copy, f, r2);
        bench_floor_fields(res.fcp, res.r_fcp);
    } else {
        printf("; fcontext not in this build\n");
        bench_floor_table(&res);
        printf("headline solo_roundtrip_ns aco=%.2f fcontext=n/a ratio=n/a",
               solo);
        bench_floor_fields(res.fsw, res.r_fsw);
        printf("headline copy120_roundtrip_ns aco=%.2f fcontext=n/a "
               "ratio=n/a", copy);
        bench_floor_fields(res.fcp, res.r_fcp);
    }
    fflush(stdout);
    return fctx_ns;
}

/* The fcontext figure against an independent minimal loop, run right
 * after the headline's: BENCH_FCONTEXT_LOOP names the program
 * (bench/fcontext_loop.c; make.sh bench sets it), which prints
 * "fcontext_loop: <ns> ns per round trip ...". */
static void bench_independent_check(double fctx_ns) {
    const char* prog = getenv("BENCH_FCONTEXT_LOOP");
    if (prog == NULL || *prog == '\0' || fctx_ns <= 0.0) return;
    char line[256] = "";
    double ns = 0.0;
    char* av[] = {(char*)prog, NULL};
    pid_t pid;
    FILE* f = bench_run(av, &pid);
    if (fgets(line, sizeof(line), f) == NULL ||
        sscanf(line, "fcontext_loop: %lf", &ns) != 1)
        ns = 0.0;
    if (!bench_spawn_wait(f, pid, "fcontext_loop") || ns <= 0.0) return;
    double apart = fabs(fctx_ns - ns) / ns;
    printf("%s", line);
    printf("check: headline fcontext %.2f ns, independent loop (%s) %.2f ns: "
           "%.1f%% apart (%s 15%%)\n", fctx_ns, prog, ns, 100.0 * apart,
           apart <= 0.15 ? "within" : "NOT within");
    fflush(stdout);
}

/* Where tcmalloc's minimal library is, for the memory headline; NULL if
 * it is not installed (Debian: libtcmalloc-minimal4). */
static const char* bench_tcmalloc_path(void) {
    static const char* const where[] = {
#if defined(__x86_64__)
        "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4",
#elif defined(__i386__)
        "/usr/lib/i386-linux-gnu/libtcmalloc_minimal.so.4",
#elif defined(__aarch64__)
        "/usr/lib/aarch64-linux-gnu/libtcmalloc_minimal.so.4",
#else
        "/usr/lib/riscv64-linux-gnu/libtcmalloc_minimal.so.4",
#endif
        "/usr/local/lib/libtcmalloc_minimal.so.4",
        "/usr/lib/libtcmalloc_minimal.so.4",
    };
    const char* env = getenv("BENCH_TCMALLOC");
    if (env != NULL) return *env && access(env, R_OK) == 0 ? env : NULL;
    for (size_t i = 0; i < BENCH_COUNT(where); i++)
        if (access(where[i], R_OK) == 0) return where[i];
    return NULL;
}

/* MemAvailable of /proc/meminfo in KiB, or -1. */
static long bench_mem_available_kib(void) {
    FILE* f = fopen("/proc/meminfo", "r");
    char line[128];
    long kib = -1;
    if (f == NULL) return -1;
    while (fgets(line, sizeof(line), f) != NULL)
        if (sscanf(line, "MemAvailable: %ld kB", &kib) == 1) break;
    fclose(f);
    return kib;
}

/* Say what the memory run of n cos will need, before it starts, and
 * whether this machine has it: the bytes per co measured at n / 100 cos
 * (one child, a fraction of a second), times n, plus a quarter for the
 * other allocator and the page tables.  0: leave the run out. */
static int bench_memory_fits(size_t n, size_t k) {
    size_t cpsz;
    size_t probe_n = n / 100;
    long base = bench_memory_spawn(0, k, &cpsz);
    long peak = bench_memory_spawn(probe_n, k, &cpsz);
    long avail = bench_mem_available_kib();
    if (base < 0 || peak < 0) return 1;     /* the run itself will say */
    double need_gib = (double)(peak - base) * 100.0 * 1.25 /
                      (1024.0 * 1024.0);
    double avail_gib = (double)avail / (1024.0 * 1024.0);
    printf("\n== memory runs of %zu cos need about %.1f GiB each (measured "
           "at %zu cos, +25%%); MemAvailable: %.1f GiB\n", n, need_gib,
           probe_n, avail_gib);
    if (avail >= 0 && avail_gib < need_gib) {
        printf("   left out: this machine has too little memory for them\n");
        return 0;
    }
    return 1;
}

/* headline bytes_per_co_10M: the memory run with glibc's malloc, then with
 * tcmalloc preloaded into the child (the seed's figure used gperftools). */
static void bench_headline_memory(void) {
    const char* tc = bench_tcmalloc_path();
    if (!bench_memory_fits(10 * M, 120)) {
        printf("headline bytes_per_co_10M glibc=n/a tcmalloc=n/a "
               "(left out: too little memory)\n");
        fflush(stdout);
        return;
    }
    double g = bench_memory(10 * M, 120);
    double t = -1.0;
    if (tc != NULL) {
        setenv("LD_PRELOAD", tc, 1);
        t = bench_memory(10 * M, 120);
        unsetenv("LD_PRELOAD");
    } else {
        printf("   tcmalloc: not installed (Debian: libtcmalloc-minimal4)\n");
    }
    if (t >= 0.0)
        printf("headline bytes_per_co_10M glibc=%.1f tcmalloc=%.1f\n", g, t);
    else
        printf("headline bytes_per_co_10M glibc=%.1f tcmalloc=n/a\n", g);
    fflush(stdout);
}

/* ------------------------------------------------------------------------ */
/* main                                                                     */
/* ------------------------------------------------------------------------ */

static void bench_usage(FILE* f) {
    fprintf(f,
        "usage: test_aco_benchmark [MODE] [--csv FILE] [--rounds R]\n"
        "  (none)         the short table and a short comparison (~10 s)\n"
        "  --compare      the full comparison with fcontext and swapcontext\n"
        "  --memory N K   peak RSS of N cos, each with K live bytes\n"
        "  --long         the full table, comparison and 10M-co memory run\n"
        "                 (~2 min, ~3 GiB of RAM)\n"
        "  --smoke        a tiny run of everything (the test suite's)\n"
        "  --headline     only the headline loops and the 10M-co memory runs\n"
        "  --quick        only the headline loops, few rounds (seconds)\n"
        "  --no-headline  (default, --long) leave the headline out\n"
        "  --csv FILE     append machine-readable results to FILE\n"
        "  --rounds R     rounds of the comparison\n");
}

static size_t bench_parse_size(const char* s) {
    char* end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0') {
        fprintf(stderr, "test_aco_benchmark: not a number: '%s'\n", s);
        bench_usage(stderr);
        exit(2);
    }
    return (size_t)v;
}

enum { MODE_DEFAULT, MODE_SMOKE, MODE_LONG, MODE_COMPARE, MODE_MEMORY,
       MODE_QUICK, MODE_HEADLINE, MODE_MEMORY_CHILD, MODE_CD_CHILD,
       MODE_HEADLINE_CHILD };

int main(int argc, char** argv) {
    int mode = MODE_DEFAULT;
    size_t mem_n = 0, mem_k = 0, rounds = 0;
    int no_headline = 0;
    const char* csv = NULL;

    for (int i = 1; i < argc; i++) {
        const char* a = argv[i];
        if (strcmp(a, "--smoke") == 0) {
            mode = MODE_SMOKE;
        } else if (strcmp(a, "--long") == 0) {
            mode = MODE_LONG;
        } else if (strcmp(a, "--compare") == 0) {
            mode = MODE_COMPARE;
        } else if (strcmp(a, "--quick") == 0) {
            mode = MODE_QUICK;
        } else if (strcmp(a, "--headline") == 0) {
            mode = MODE_HEADLINE;
        } else if (strcmp(a, "--headline-child") == 0 && i + 2 < argc) {
            mode = MODE_HEADLINE_CHILD;         /* bench_headline_procs */
            mem_n = bench_parse_size(argv[++i]);        /* rounds */
            mem_k = bench_parse_size(argv[++i]);        /* quick */
        } else if (strcmp(a, "--no-headline") == 0) {
            no_headline = 1;
        } else if ((strcmp(a, "--memory") == 0 ||
                    strcmp(a, "--memory-child") == 0 ||
                    strcmp(a, "--cd-child") == 0) && i + 2 < argc) {
            mode = strcmp(a, "--memory") == 0         ? MODE_MEMORY
                   : strcmp(a, "--memory-child") == 0 ? MODE_MEMORY_CHILD
                                                      : MODE_CD_CHILD;
            mem_n = bench_parse_size(argv[++i]);
            mem_k = bench_parse_size(argv[++i]);
        } else if (strcmp(a, "--csv") == 0 && i + 1 < argc) {
            csv = argv[++i];
        } else if (strcmp(a, "--rounds") == 0 && i + 1 < argc) {
            rounds = bench_parse_size(argv[++i]);
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            bench_usage(stdout);
            return 0;
        } else {
            bench_usage(stderr);
            return 2;
        }
    }
    if (mode == MODE_MEMORY_CHILD) return bench_memory_child(mem_n, mem_k);
    if (mode == MODE_CD_CHILD) return bench_cd_child(mem_n, mem_k);
    if (mode == MODE_HEADLINE_CHILD) {
        (void)bench_pin_last_cpu();
        aco_thread_init(NULL);
        bench_main_co = aco_create(NULL, NULL, 0, NULL, NULL);
        return bench_headline_child(mem_n, (int)mem_k);
    }
    if (csv != NULL) {
        bench_csv = fopen(csv, "a");
        if (bench_csv == NULL) bench_die("cannot open %s: %s", csv, strerror(errno));
    }

    /* The test suite runs --smoke next to other tests: leave it unpinned. */
    int cpu = mode == MODE_SMOKE ? -1 : bench_pin_last_cpu();
    static const char* const mode_name[] = {
        "default (short table and comparison; --long for the full ones)",
        "smoke (tiny run for the test suite)",
        "long (the full table, comparison and memory run)",
        "compare (the full comparison)",
        "memory",
        "quick (the headline loops, few rounds)",
        "headline (the headline loops and the memory headline)",
    };
    aco_thread_init(NULL);
    bench_main_co = aco_create(NULL, NULL, 0, NULL, NULL);
    bench_header(mode_name[mode], cpu);
    bench_calibrate(bench_main_co);

    const bench_case_t* cases = NULL;
    size_t ncases = 0;
    if (mode == MODE_DEFAULT) {
        cases = bench_default;
        ncases = BENCH_COUNT(bench_default);
    } else if (mode == MODE_SMOKE) {
        cases = bench_smoke;
        ncases = BENCH_COUNT(bench_smoke);
    } else if (mode == MODE_LONG) {
        cases = bench_long;
        ncases = BENCH_COUNT(bench_long);
    }
    if (ncases > 0) {
        bench_table_header();
        for (size_t i = 0; i < ncases; i++)
            bench_run_case(bench_main_co, &cases[i]);
        printf("+copy sizes:");
        for (size_t i = 0; i < BENCH_COUNT(bench_fixed); i++)
            printf(" %s %zuB,", bench_fixed[i].name, bench_fixed[i].cpsz);
        printf(" co_fp_live %zuB + payload\n", bench_live_cpsz);
        printf("+peak RSS: %ld KiB\n", bench_peak_rss_kib());
    }

    if (mode == MODE_SMOKE) {
        bench_compare(&bench_cmp_smoke, rounds);
        bench_memory(1000, 120);
        bench_headline(1, 2);
    } else if (mode == MODE_DEFAULT) {
        bench_compare(&bench_cmp_short, rounds);
    } else if (mode == MODE_COMPARE) {
        bench_compare(&bench_cmp_full, rounds);
    } else if (mode == MODE_LONG) {
        bench_compare(&bench_cmp_full, rounds);
    } else if (mode == MODE_MEMORY) {
        bench_memory(mem_n, mem_k);
    } else if (mode == MODE_QUICK) {
        bench_headline(rounds, 1);
    }
    /* The headline lines come last. */
    if ((mode == MODE_DEFAULT || mode == MODE_LONG || mode == MODE_HEADLINE) &&
        !no_headline) {
        bench_independent_check(bench_headline(rounds, 0));
        bench_headline_memory();
    }

    aco_destroy(bench_main_co);
    if (bench_csv != NULL) fclose(bench_csv);
    if (bench_failures != 0) {
        fprintf(stderr, "test_aco_benchmark: %lu check(s) failed\n",
                bench_failures);
        return 1;
    }
    /* One line: which speed targets this run judged, met and missed (a
     * MISS line above says more).  The shared-FP build is held to the
     * default build's copy and create targets only for information. */
    if (bench_targets.met + bench_targets.missed == 0) {
        printf("+every correctness check passed; no target is judged in "
               "this mode\n");
        return 0;
    }
    printf("+every correctness check passed; speed targets%s: %d met%s%s, %d "
           "missed%s%s\n",
#ifdef ACO_CONFIG_SHARE_FPU_MXCSR_ENV
           " (for information)",
#else
           "",
#endif
           bench_targets.met, bench_targets.met ? ": " : "",
           bench_targets.met_s, bench_targets.missed,
           bench_targets.missed ? ": " : "", bench_targets.missed_s);
    return 0;
}
