/*
 * test_alignment.c - code running in a co sees a stack aligned as the ABI
 * requires at every function entry: on x86 (sp + sizeof(void*)) % 16 == 0
 * (the call pushed the return address onto a 16-byte aligned stack), on
 * aarch64 and riscv64 sp % 16 == 0 (the return address is in a register).
 *
 * A misaligned co stack shows up as crashes or wrong output in innocent
 * code: printf("%f") spills SSE registers with aligned stores on x86-64,
 * compilers place 16-byte vector and long double locals assuming the
 * alignment.  Checked inside cos on their first entry, after resumes, and
 * after being evicted from a shared stack and restored at various depths, on
 * share stacks of odd sizes with and without a guard page:
 *   - the co function's own entry (through __builtin_frame_address) and the
 *     entry of a called asm probe that returns its stack pointer;
 *   - snprintf of doubles and long doubles gives the text main produced;
 *   - _Alignas(64), long double and 16-byte vector locals are aligned.
 * The same checks run on main's stack first, proving the method.
 */
#include "aco_test.h"

#include <math.h>
#include <stdalign.h>

/* Returns the stack pointer at its own entry (x86: pointing at the return
 * address, the caller's stack pointer at the call minus one slot; aarch64,
 * riscv64: the caller's stack pointer at the call). */
uintptr_t test_align_entry_sp(void);
#if defined(__x86_64__)
__asm__(".text\n"
        ".globl test_align_entry_sp\n"
        ".type test_align_entry_sp, @function\n"
        "test_align_entry_sp:\n\t"
        "movq %rsp, %rax\n\t"
        "ret\n"
        ".size test_align_entry_sp, .-test_align_entry_sp\n");
#elif defined(__i386__)
__asm__(".text\n"
        ".globl test_align_entry_sp\n"
        ".type test_align_entry_sp, @function\n"
        "test_align_entry_sp:\n\t"
        "movl %esp, %eax\n\t"
        "ret\n"
        ".size test_align_entry_sp, .-test_align_entry_sp\n");
#elif defined(__aarch64__)
__asm__(".text\n"
        ".globl test_align_entry_sp\n"
        ".type test_align_entry_sp, %function\n"
        "test_align_entry_sp:\n\t"
#if defined(__ARM_FEATURE_BTI_DEFAULT) && __ARM_FEATURE_BTI_DEFAULT
        "hint #34\n\t"          /* bti c */
#endif
        "mov x0, sp\n\t"
        "ret\n"
        ".size test_align_entry_sp, .-test_align_entry_sp\n");
#elif defined(__riscv)
__asm__(".text\n"
        ".globl test_align_entry_sp\n"
        ".type test_align_entry_sp, %function\n"
        "test_align_entry_sp:\n\t"
        "mv a0, sp\n\t"
        "ret\n"
        ".size test_align_entry_sp, .-test_align_entry_sp\n");
#else
#error "test_alignment: unsupported architecture"
#endif

#if defined(__x86_64__) || defined(__i386__)
#define ENTRY_SP_BIAS sizeof(void*)   /* the pushed return address */
#else
#define ENTRY_SP_BIAS 0
#endif

static int entry_sp_ok(uintptr_t entry_sp) {
    return (entry_sp + ENTRY_SP_BIAS) % 16 == 0;
}

#if defined(__x86_64__) || defined(__i386__)
/* With a frame pointer (which __builtin_frame_address(0) forces) the frame
 * address is where the caller's frame pointer was pushed, one slot below
 * the return address: entry sp == frame address + one slot. */
#define FRAME_ENTRY_SP() ((uintptr_t)__builtin_frame_address(0) + sizeof(void*))
#elif defined(__riscv)
/* The frame pointer s0 is set to the entry sp by the prologue. */
#define FRAME_ENTRY_SP() ((uintptr_t)__builtin_frame_address(0))
#else
/* aarch64: x29 points at the frame record (x29, x30), which gcc and clang
 * place a multiple of 16 bytes below the entry sp: the same remainder
 * mod 16, all that entry_sp_ok() looks at. */
#define FRAME_ENTRY_SP() ((uintptr_t)__builtin_frame_address(0))
#endif

__attribute__((noinline)) static uintptr_t c_function_entry_sp(void) {
    return FRAME_ENTRY_SP();
}

/* A 16-byte vector (__m128-like, without needing SSE headers on i386). */
typedef float v4sf __attribute__((vector_size(16)));

/* ------------------------------------------------------------------------ */
/* What is checked, wherever the current stack is                           */
/* ------------------------------------------------------------------------ */

#define NVAL 6
static double vals[NVAL];
static char expect[NVAL][128];

static void format_value(char* buf, size_t n, double v) {
    snprintf(buf, n, "%f|%.12e|%g|%Lf", v, v, v, (long double)v * 3.0L);
}

/* Computes every value at run time and formats it on main's stack. */
static void make_expectations(void) {
    vals[0] = 4.0 * atan(1.0);
    vals[1] = -1.0 / 3.0;
    vals[2] = 1e10 / 7.0;
    vals[3] = sqrt(2.0) / 1e4;
    vals[4] = 123456.789 * (1 + vals[3]);
    vals[5] = exp(-3.5);
    for (int i = 0; i < NVAL; i++) {
        format_value(expect[i], sizeof(expect[i]), vals[i]);
        /* The reference is sane: its "%f" field reads back as the value. */
        double back = strtod(expect[i], NULL);
        CHECK(fabs(back - vals[i]) <= 1e-6 * (1 + fabs(vals[i])));
    }
}

__attribute__((noinline)) static void check_formatting(const char* where) {
    char got[128];
    for (int i = 0; i < NVAL; i++) {
        format_value(got, sizeof(got), vals[i]);
        if (strcmp(got, expect[i]) != 0) {
            fprintf(stderr, "%s: formatted \"%s\", expected \"%s\"\n", where,
                    got, expect[i]);
            exit(1);
        }
    }
}

/* Takes addresses so the locals must live in memory at their alignment. */
__attribute__((noinline)) static void use_vector(v4sf* v, const float* in) {
    v4sf t = {in[0], in[1], in[2], in[3]};
    *v = t * t + *v;
}

__attribute__((noinline)) static void check_aligned_locals(const char* where,
                                                           int seed) {
    _Alignas(64) volatile unsigned char a64[64];
    volatile long double ld = (long double)seed / 7.0L;
    v4sf vec = {1.0f, 2.0f, 3.0f, (float)seed};
    float in[4] = {(float)seed, 0.5f, -2.0f, 4.0f};

    use_vector(&vec, in);
    for (int i = 0; i < 64; i++) a64[i] = (unsigned char)(seed + i);

    if ((uintptr_t)a64 % 64 != 0 || (uintptr_t)&ld % alignof(long double) != 0 ||
        (uintptr_t)&vec % 16 != 0) {
        fprintf(stderr, "%s: misaligned locals: _Alignas(64) at %p, "
                "long double at %p, vector at %p\n", where, (void*)a64,
                (void*)&ld, (void*)&vec);
        exit(1);
    }
    /* The vector arithmetic gave the scalar results. */
    float want[4] = {1.0f + in[0] * in[0], 2.0f + in[1] * in[1],
                     3.0f + in[2] * in[2], (float)seed + in[3] * in[3]};
    for (int i = 0; i < 4; i++) CHECK(vec[i] == want[i]);
    CHECK(ld * 7.0L > (long double)seed - 1e-9L && ld * 7.0L < (long double)seed + 1e-9L);
    for (int i = 0; i < 64; i++) CHECK(a64[i] == (unsigned char)(seed + i));
}

/* Everything but the caller's own entry. */
static void check_here(const char* where, int seed) {
    uintptr_t sp = test_align_entry_sp();
    if (!entry_sp_ok(sp)) {
        fprintf(stderr, "%s: a call from here enters with sp %#" PRIxPTR
                " ((sp + %zu) %% 16 == %zu)\n", where, sp,
                (size_t)ENTRY_SP_BIAS, (size_t)((sp + ENTRY_SP_BIAS) % 16));
        exit(1);
    }
    sp = c_function_entry_sp();
    if (!entry_sp_ok(sp)) {
        fprintf(stderr, "%s: a C function entered with sp %#" PRIxPTR "\n",
                where, sp);
        exit(1);
    }
    check_formatting(where);
    check_aligned_locals(where, seed);
}

/* ------------------------------------------------------------------------ */
/* Cos                                                                      */
/* ------------------------------------------------------------------------ */

struct actx {
    int rounds;           /* yields before aco_exit() */
    int depth;            /* recursion depth of the next yield (set by main) */
    int entry_ok;         /* the co function's own entry was aligned */
    int checks;           /* check_here() calls that passed */
};

/* Recurse with frames of different sizes, checking on the way down and,
 * after the yield at the bottom, on the way up: by then the frames may
 * have been copied out and back in by the lazy save/restore. */
__attribute__((noinline)) static void dive(struct actx* c, int depth) {
    volatile char pad[8 + depth * 40];    /* shifts the frames below */
    pad[0] = (char)depth;
    check_here("co, going down", depth);
    c->checks++;
    if (depth > 0)
        dive(c, depth - 1);
    else
        aco_yield();
    check_here("co, after resume", depth + 100);
    c->checks++;
    CHECK(pad[0] == (char)depth);
}

static void co_align(void) {
    uintptr_t entry = FRAME_ENTRY_SP();
    struct actx* c = aco_get_arg();
    c->entry_ok = entry_sp_ok(entry);
    check_here("co, first entry", 1);
    c->checks++;
    for (int r = 0; r < c->rounds; r++) {
        dive(c, c->depth);
        check_here("co, back at the top", r);
        c->checks++;
    }
    aco_exit();
}

/* Runs cos on one share stack (nco of them, taking turns, so with nco > 1
 * each resume evicts another co) with depths varying per round. */
static void run_cos(size_t stack_sz, char guard, int nco, int rounds) {
    aco_t* main_co = aco_get_co();
    aco_share_stack_t* sstk = aco_share_stack_new2(stack_sz, guard);
    struct actx c[3];
    aco_t* co[3];
    CHECK(nco <= 3);
    for (int i = 0; i < nco; i++) {
        c[i] = (struct actx){.rounds = rounds};
        co[i] = aco_create(main_co, sstk, 0, co_align, &c[i]);
    }
    for (int r = 0; r <= rounds; r++) {
        for (int i = 0; i < nco; i++) {
            c[i].depth = (r * 3 + i * 5) % 9;
            aco_resume(co[i]);
            CHECK(c[i].entry_ok);
        }
    }
    for (int i = 0; i < nco; i++) {
        ASSERT_EQ(co[i]->is_end, 1);
        CHECK(c[i].checks > rounds * 2);
        if (nco > 1) CHECK(co[i]->save_stack.ct_restore > 0);
        aco_destroy(co[i]);
    }
    aco_share_stack_destroy(sstk);
}

int main(void) {
    /* The method first, on main's stack. */
    make_expectations();
    check_here("main", 7);

    aco_thread_init(NULL);
    aco_t* main_co = aco_create(NULL, NULL, 0, NULL, NULL);
    const int rounds = (int)aco_test_scale(40, 4);

    /* Standalone, then shared by 2 and 3 cos; odd sizes, guard on and off
     * (printf needs a few KiB of stack, so none is tiny). */
    static const size_t sizes[] = {64 * 1024, 16385, 20007, 65536 + 8, 0};
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        for (int guard = 0; guard <= 1; guard++) {
            run_cos(sizes[k], (char)guard, 1, rounds);
            run_cos(sizes[k], (char)guard, 2, rounds);
            run_cos(sizes[k], (char)guard, 3, rounds);
        }
    }
    aco_destroy(main_co);
    printf("test_alignment: OK (%s in main and in cos: %s)\n", expect[0],
           "entries aligned, locals aligned, formatting identical");
    return 0;
}
