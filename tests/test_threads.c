/*
 * test_threads.c - cos of several threads running at once never see one
 * another: each thread's running co, share-stack owners, locals and FP
 * control words are its own, and the threads' totals add up.
 *
 * libaco keeps its state per thread, so N threads each running their own main
 * co, share stacks and cos must never see one another.  Every thread here
 * builds a world: a main co, two share stacks used by several cos each, two
 * used by one co each, and a pseudo-random (but per-thread reproducible)
 * schedule of resumes, with cos ending and being replaced and suspended cos
 * being destroyed.  Every co keeps patterned locals in a chain of frames and
 * verifies them after each resume; main checks what aco_get_co() and the
 * share stacks' owners say after each resume.  Totals go through atomics and
 * must add up at the end.
 *
 * Floating-point control words: each thread sets its own rounding mode before
 * aco_thread_init(), so its new cos must start with that mode, not another
 * thread's and not a later one.  In the default build (each co owns its FP
 * control words: x87 CW and MXCSR, FPCR, frm) the thread's main co then
 * switches to yet another mode, and half of the cos pick a mode of their
 * own; every co and main check their mode after every switch, in the words
 * and in an actual division.
 * With ACO_CONFIG_SHARE_FPU_MXCSR_ENV the words belong to the thread, so the
 * check is only that every co sees its thread's mode.
 */
#define _GNU_SOURCE     /* pthread barriers, even under -std=c11 */
#include "aco_test.h"

#include <fenv.h>
#include <pthread.h>
#include <stdatomic.h>

#define N_THREADS 4
#define N_STACKS 4
#define N_COS 10
#define MAX_DEPTH 4
#define MAX_WORDS 128

static const int fe_modes[4] = {FE_TONEAREST, FE_DOWNWARD, FE_UPWARD,
                                FE_TOWARDZERO};

/* The control words and the value of 1.0 / 3.0 under each mode, measured
 * by the main thread before any co runs (no hard-coded bit layouts). */
static uint64_t mode_ctl[4];
static double mode_third[4];
/* Memcheck's FPU emulation ignores the rounding mode in arithmetic (the
 * control words still read back as set), so the quotient only counts natively. */
static int arith_follows_mode;

static volatile double one = 1.0, three = 3.0;

/* The FP control words as one number: x86 the x87 control word (bits 0-15)
 * and the MXCSR control bits (16 up; its bits 0-5 are sticky exception
 * flags), aarch64 FPCR, riscv64 frm. */
#if defined(__x86_64__) || defined(__i386__)
#define MXCSR_CONTROL 0xffc0u
static uint64_t read_ctl(void) {
    uint16_t cw;
    uint32_t m;
    __asm__ volatile("fnstcw %0" : "=m"(cw));
    __asm__ volatile("stmxcsr %0" : "=m"(m));
    return (uint64_t)cw | (uint64_t)(m & MXCSR_CONTROL) << 16;
}
/* Both words differ between two modes (fesetround sets both). */
#define CTL_DIFFER(a, b) (((a) ^ (b)) & 0xffffu && ((a) ^ (b)) >> 16)
#elif defined(__aarch64__)
static uint64_t read_ctl(void) {
    uint64_t v;
    __asm__ volatile("mrs %0, fpcr" : "=r"(v));
    return v;
}
#define CTL_DIFFER(a, b) ((a) != (b))
#elif defined(__riscv)
static uint64_t read_ctl(void) {
    uint64_t v;
    __asm__ volatile("frrm %0" : "=r"(v));
    return v;
}
#define CTL_DIFFER(a, b) ((a) != (b))
#else
#error "test_threads: unsupported architecture"
#endif

static double third(void) {
    volatile double q = one / three;
    return q;
}

/* Which of the four modes the FPU is in right now, as seen by both control
 * words and by arithmetic; -1 if they disagree or match none. */
static int current_mode(void) {
    uint64_t ctl = read_ctl();
    double q = third();
    for (int m = 0; m < 4; m++) {
        if (ctl == mode_ctl[m] &&
            (!arith_follows_mode || memcmp(&q, &mode_third[m], sizeof(q)) == 0))
            return m;
    }
    return -1;
}

/* ------------------------------------------------------------------------ */

static atomic_long g_resumes, g_yields, g_exits, g_failures;
static pthread_barrier_t g_start;

struct world;

struct co_state {
    struct world* w;
    aco_t* co;
    int slot;
    uint32_t id;        /* unique in the world: slot and generation */
    uint32_t rng;
    int steps;          /* yields before aco_exit */
    int mode;           /* the mode this co must see after every resume */
    int own_mode;       /* it sets mode itself on its first run */
    int finished;       /* about to call aco_exit */
};

struct world {
    int idx;
    int init_mode;      /* set before aco_thread_init */
    int main_mode;      /* main co's mode afterwards */
    uint32_t rng;
    aco_t* main_co;
    aco_share_stack_t* stacks[N_STACKS];
    struct co_state cos[N_COS];
    uint32_t generation;
    long resumes, replaced, killed;
};

#define WCHECK(w, cond)                                                       \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "%s:%d: thread %d: CHECK failed: %s\n", __FILE__, \
                    __LINE__, (w)->idx, #cond);                               \
            atomic_fetch_add(&g_failures, 1);                                 \
        }                                                                     \
    } while (0)

static uint32_t pattern(uint32_t key, uint32_t i) {
    uint32_t x = key ^ (i * 0x9e3779b1u);
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    return x;
}

/* Stack layout per world: which stack each co slot uses.  Stacks 0 and 1 are
 * shared (5 and 3 cos), 2 and 3 standalone (one co each). */
static int stack_of_slot(int slot) {
    return slot < 5 ? 0 : slot < 8 ? 1 : slot == 8 ? 2 : 3;
}

/* ------------------------------------------------------------------------ */

/* What a co checks each time it is back from a yield. */
static void check_resumed(struct co_state* st, aco_t* self) {
    struct world* w = st->w;
    WCHECK(w, aco_get_co() == self);
    WCHECK(w, aco_get_arg() == st);
    WCHECK(w, self->share_stack->owner == self);
    WCHECK(w, !self->is_end);
    WCHECK(w, current_mode() == st->mode);
}

__attribute__((noinline)) static void descend(struct co_state* st,
                                              aco_t* self, uint32_t step,
                                              int depth) {
    uint32_t key = (uint32_t)st->w->idx << 28 ^ st->id << 12 ^ step << 3 ^
                   (uint32_t)depth;
    uint32_t n = 1 + pattern(key, 999) % MAX_WORDS;
    uint32_t buf[MAX_WORDS];
    for (uint32_t i = 0; i < n; i++) buf[i] = pattern(key, i);
    __asm__ volatile("" : : "r"(buf) : "memory");
    if (depth > 0) {
        descend(st, self, step, depth - 1);
    } else {
        atomic_fetch_add_explicit(&g_yields, 1, memory_order_relaxed);
        aco_yield();
        check_resumed(st, self);
    }
    __asm__ volatile("" : : "r"(buf) : "memory");
    uint32_t bad = 0;
    for (uint32_t i = 0; i < n; i++) bad += buf[i] != pattern(key, i);
    WCHECK(st->w, bad == 0);
}

static void worker_co(void) {
    struct co_state* st = aco_get_arg();
    aco_t* self = aco_get_co();
    /* A new co starts with the words aco_thread_init() captured. */
    WCHECK(st->w, current_mode() == st->w->init_mode);
#ifndef ACO_CONFIG_SHARE_FPU_MXCSR_ENV
    if (st->own_mode) {
        WCHECK(st->w, fesetround(fe_modes[st->mode]) == 0);
    }
#endif
    WCHECK(st->w, current_mode() == st->mode);
    for (int step = 0; step < st->steps; step++)
        descend(st, self, (uint32_t)step, (int)(aco_test_rand(&st->rng) % (MAX_DEPTH + 1)));
    st->finished = 1;
    atomic_fetch_add_explicit(&g_exits, 1, memory_order_relaxed);
    aco_exit();
}

static void spawn(struct world* w, int slot) {
    struct co_state* st = &w->cos[slot];
    memset(st, 0, sizeof(*st));
    st->w = w;
    st->slot = slot;
    st->id = (uint32_t)slot | ++w->generation << 4;
    st->rng = pattern(st->id, (uint32_t)w->idx) | 1;
    st->steps = 1 + (int)(aco_test_rand(&w->rng) % 200);
    st->mode = w->init_mode;
#ifndef ACO_CONFIG_SHARE_FPU_MXCSR_ENV
    if (aco_test_rand(&w->rng) % 2) {
        st->own_mode = 1;
        st->mode = (int)(aco_test_rand(&w->rng) % 4);
    }
#endif
    static const size_t save_sizes[3] = {0, 256, 8192};
    st->co = aco_create(w->main_co, w->stacks[stack_of_slot(slot)],
                        save_sizes[aco_test_rand(&w->rng) % 3], worker_co, st);
}

static void retire(struct world* w, int slot) {
    struct co_state* st = &w->cos[slot];
    if (stack_of_slot(slot) >= 2) {
        /* Alone on its stack: the lazy save never has a reason to copy. */
        WCHECK(w, st->co->save_stack.ct_save == 0);
        WCHECK(w, st->co->save_stack.ct_restore == 0);
    }
    aco_destroy(st->co);
    st->co = NULL;
}

static void* thread_main(void* arg) {
    struct world* w = arg;
    WCHECK(w, fesetround(fe_modes[w->init_mode]) == 0);
    aco_thread_init(NULL);
#ifndef ACO_CONFIG_SHARE_FPU_MXCSR_ENV
    WCHECK(w, fesetround(fe_modes[w->main_mode]) == 0);
#endif
    w->main_co = aco_create(NULL, NULL, 0, NULL, NULL);
    static const size_t sizes[N_STACKS] = {64 * 1024, 32 * 1024, 16 * 1024,
                                           20000};
    for (int i = 0; i < N_STACKS; i++)
        w->stacks[i] = aco_share_stack_new2(sizes[i], (char)(i % 2 == 0));
    for (int i = 0; i < N_COS; i++) spawn(w, i);

    /* Start the schedules together so the threads really overlap. */
    pthread_barrier_wait(&g_start);

    long rounds = aco_test_scale(150000, 60);
    for (long r = 0; r < rounds; r++) {
        int slot = (int)(aco_test_rand(&w->rng) % N_COS);
        struct co_state* st = &w->cos[slot];
        if (st->co->is_end) {
            WCHECK(w, st->finished);
            retire(w, slot);
            spawn(w, slot);
            w->replaced++;
            continue;
        }
        if (aco_test_rand(&w->rng) % 512 == 0) {
            /* Destroy it wherever it is suspended, owner of its stack or
             * not; the stack must then have no owner or another one. */
            aco_share_stack_t* s = st->co->share_stack;
            uintptr_t dead = (uintptr_t)st->co;
            retire(w, slot);
            WCHECK(w, (uintptr_t)s->owner != dead);
            spawn(w, slot);
            w->killed++;
            continue;
        }
        aco_resume(st->co);
        w->resumes++;
        WCHECK(w, aco_get_co() == w->main_co);
        WCHECK(w, current_mode() == w->main_mode);
        if (st->finished) {
            WCHECK(w, st->co->is_end == 1);
            WCHECK(w, st->co->share_stack->owner == NULL);
        } else {
            WCHECK(w, st->co->is_end == 0);
            WCHECK(w, st->co->share_stack->owner == st->co);
        }
    }

    for (int i = 0; i < N_COS; i++) retire(w, i);
    for (int i = 0; i < N_STACKS; i++) {
        WCHECK(w, w->stacks[i]->co_ct == 0);
        aco_share_stack_destroy(w->stacks[i]);
    }
    aco_destroy(w->main_co);
    atomic_fetch_add(&g_resumes, w->resumes);
    return NULL;
}

int main(void) {
    /* Measure each mode's words and quotient on this machine. */
    for (int m = 0; m < 4; m++) {
        CHECK(fesetround(fe_modes[m]) == 0);
        mode_ctl[m] = read_ctl();
        mode_third[m] = third();
    }
    CHECK(fesetround(FE_TONEAREST) == 0);
    for (int a = 0; a < 4; a++)
        for (int b = a + 1; b < 4; b++)
            CHECK(CTL_DIFFER(mode_ctl[a], mode_ctl[b]));
    /* Arithmetic tells the modes apart too (down and up at least). */
    arith_follows_mode = mode_third[1] != mode_third[2];
    CHECK(arith_follows_mode || aco_test_on_valgrind());

    static struct world worlds[N_THREADS];
    pthread_t tids[N_THREADS];
    CHECK(pthread_barrier_init(&g_start, NULL, N_THREADS) == 0);
    for (int i = 0; i < N_THREADS; i++) {
        worlds[i].idx = i;
        worlds[i].init_mode = i % 4;    /* a different mode per thread */
#ifdef ACO_CONFIG_SHARE_FPU_MXCSR_ENV
        worlds[i].main_mode = worlds[i].init_mode;
#else
        worlds[i].main_mode = (i + 1) % 4;
#endif
        worlds[i].rng = 0x12345u * (uint32_t)(i + 1) | 1;
        CHECK(pthread_create(&tids[i], NULL, thread_main, &worlds[i]) == 0);
    }
    long replaced = 0, killed = 0;
    for (int i = 0; i < N_THREADS; i++) {
        CHECK(pthread_join(tids[i], NULL) == 0);
        replaced += worlds[i].replaced;
        killed += worlds[i].killed;
    }
    pthread_barrier_destroy(&g_start);

    long resumes = atomic_load(&g_resumes);
    long yields = atomic_load(&g_yields), exits = atomic_load(&g_exits);
    printf("test_threads: %d threads, %ld resumes (%ld yields, %ld exits), "
           "%ld cos replaced after exit, %ld destroyed while suspended, "
           "%ld failures\n", N_THREADS, resumes, yields, exits, replaced,
           killed, atomic_load(&g_failures));
    ASSERT_EQ(atomic_load(&g_failures), 0);
    /* Every resume ends in exactly one yield or one exit. */
    ASSERT_EQ(yields + exits, resumes);
    CHECK(exits > 0 && replaced > 0 && killed > 0);
    printf("test_threads: ok\n");
    return 0;
}
