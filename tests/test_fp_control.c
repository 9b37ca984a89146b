/*
 * test_fp_control.c - a switch keeps the FP control words (x87 control word
 * and MXCSR on x86, FPCR on aarch64, frm on riscv64) as the build says: by
 * default every co has its own, and a new co starts with the words
 * aco_thread_init() captured; with ACO_CONFIG_SHARE_FPU_MXCSR_ENV they are
 * one thread-wide setting that switches leave alone.
 *
 * The words are set to variants that differ in rounding mode (and, where
 * the machine has them natively, precision and flush-to-zero) and compared
 * field by field after every switch, for a co that yields and exits, one
 * that exits without yielding, and two cos evicting each other from one
 * shared stack; a division rounded up shows that the words really govern
 * the arithmetic.  (The callee-saved registers are test_callee_saved's.)
 */
#include "aco_test.h"

#include <fenv.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

/* Per architecture: struct fpwords, fp_get(), fp_set(), ASSERT_FP_EQ(),
 * make_words() filling w0 (the startup words) and wv[] (three variants
 * that differ from them and each other, wv[1] rounding up). */
#if defined(__x86_64__) || defined(__i386__)

/* Compare the control fields only: x87 exception masks, precision and
 * rounding control; MXCSR everything but the six sticky exception flags,
 * which ordinary arithmetic sets. */
#define CW_MASK 0x0f3fu
#define MXCSR_MASK 0xffc0u

struct fpwords {
    uint16_t cw;
    uint32_t mxcsr;
};

static struct fpwords fp_get(void) {
    struct fpwords w;
    __asm__ volatile("fnstcw %0" : "=m"(w.cw) : : "memory");
    __asm__ volatile("stmxcsr %0" : "=m"(w.mxcsr) : : "memory");
    w.cw &= CW_MASK;
    w.mxcsr &= MXCSR_MASK;
    return w;
}

static void fp_set(struct fpwords w) {
    uint16_t cw;
    uint32_t mx;
    __asm__ volatile("fnstcw %0" : "=m"(cw) : : "memory");
    __asm__ volatile("stmxcsr %0" : "=m"(mx) : : "memory");
    cw = (uint16_t)((cw & ~CW_MASK) | w.cw);
    mx = (mx & ~MXCSR_MASK) | w.mxcsr;
    __asm__ volatile("fldcw %0" : : "m"(cw) : "memory");
    __asm__ volatile("ldmxcsr %0" : : "m"(mx) : "memory");
}

#define ASSERT_FP_EQ(got, want)                                               \
    do {                                                                      \
        struct fpwords g_ = (got), w_ = (want);                               \
        ASSERT_EQ(g_.cw, w_.cw);                                              \
        ASSERT_EQ(g_.mxcsr, w_.mxcsr);                                        \
    } while (0)

/* Startup words and three variants that differ from them and each other in
 * the rounding mode (x87 RC bits 10-11, MXCSR RC bits 13-14).  Natively the
 * x87 precision and MXCSR flush-to-zero vary too; valgrind only emulates
 * the rounding mode, so there the rest stays as it was. */
static struct fpwords w0, wv[3];

static void make_words(void) {
    static const unsigned rc[3] = {1, 2, 3};     /* down, up, toward zero */
    static const unsigned pc[3] = {2, 3, 0};     /* double, extended, single */
    static const unsigned ftz[3] = {1, 0, 1};
    int emulated = aco_test_on_valgrind();
    w0 = fp_get();
    for (int i = 0; i < 3; i++) {
        struct fpwords w = w0;
        w.cw = (uint16_t)((w.cw & ~0x0c00u) | rc[i] << 10);
        w.mxcsr = (w.mxcsr & ~0x6000u) | rc[i] << 13;
        if (!emulated) {
            w.cw = (uint16_t)((w.cw & ~0x0300u) | pc[i] << 8);
            w.mxcsr = (w.mxcsr & ~0x8000u) | ftz[i] << 15;
        }
        wv[i] = w;
    }
}

#else   /* aarch64, riscv64: one control register */

/* aarch64 FPCR: RMode (bits 22-23: 0 nearest, 1 up, 2 down, 3 toward zero),
 * FZ (24), DN (25).  riscv64 frm: 0 nearest, 1 toward zero, 2 down, 3 up. */
struct fpwords {
    uint64_t ctl;
};

static struct fpwords fp_get(void) {
    struct fpwords w;
#if defined(__aarch64__)
    __asm__ volatile("mrs %0, fpcr" : "=r"(w.ctl) : : "memory");
#else
    __asm__ volatile("frrm %0" : "=r"(w.ctl) : : "memory");
#endif
    return w;
}

static void fp_set(struct fpwords w) {
#if defined(__aarch64__)
    __asm__ volatile("msr fpcr, %0" : : "r"(w.ctl) : "memory");
#else
    __asm__ volatile("fsrm %0" : : "r"(w.ctl) : "memory");
#endif
}

#define ASSERT_FP_EQ(got, want)                                               \
    do {                                                                      \
        struct fpwords g_ = (got), w_ = (want);                               \
        ASSERT_EQ(g_.ctl, w_.ctl);                                            \
    } while (0)

static struct fpwords w0, wv[3];

static void make_words(void) {
    w0 = fp_get();
    for (int i = 0; i < 3; i++) {
        struct fpwords w = w0;
#if defined(__aarch64__)
        static const uint64_t rmode[3] = {2, 1, 3};  /* down, up, toward zero */
        static const uint64_t fz[3] = {1, 0, 1};
        static const uint64_t dn[3] = {0, 1, 1};
        w.ctl = (w.ctl & ~((uint64_t)0xf << 22)) | rmode[i] << 22 |
                fz[i] << 24 | dn[i] << 25;
#else
        static const uint64_t frm[3] = {2, 3, 1};    /* down, up, toward zero */
        w.ctl = frm[i];
#endif
        wv[i] = w;
    }
}
#endif

/* 1/3 in the current rounding mode: differs from the round-to-nearest
 * result when rounding up (1/3 rounds down to nearest), in double (SSE on
 * x86-64, the FPU elsewhere) and in extended precision stored to double (x87
 * on i386). */
static double third(void) {
    volatile double one = 1.0, three = 3.0;
    volatile double q = one / three;
    return q;
}

struct fpco {
    struct fpwords at_entry, at_resume;
    double q_up;
    int sets;             /* index into wv[] the co sets before yielding */
};

static void co_fpu(void) {
    struct fpco* f = aco_get_arg();
    f->at_entry = fp_get();
    fp_set(wv[f->sets]);
    f->q_up = third();
    aco_yield();
    f->at_resume = fp_get();
    aco_exit();
}

/* Sets wv[sets] and ends without yielding first. */
static void co_fpu_exit_only(void) {
    struct fpco* f = aco_get_arg();
    f->at_entry = fp_get();
    fp_set(wv[f->sets]);
    aco_exit();
}

/* Called before aco_thread_init: sets the words it must capture. */
static void fpu_before_thread_init(void) {
    make_words();
    fp_set(wv[0]);
}

/* 1/3 rounded to nearest and rounded up, and whether the probe tells them
 * apart (not under valgrind, which keeps the mode word but computes
 * round-to-nearest). */
static double q_near, q_up;
static int rounding_works;

static void probe_rounding(void) {
    q_near = third();
    fp_set(wv[1]);
    q_up = third();
    fp_set(w0);
    rounding_works = q_up != q_near;
    CHECK(rounding_works || aco_test_on_valgrind());
    ASSERT_FP_EQ(fp_get(), w0);   /* main is back to the startup words */
}

/* A co that changes its words and yields, then main changes its own. */
static void test_yield_and_resume(aco_t* main_co, aco_share_stack_t* sstk) {
    /* F starts while main runs with w0; aco_thread_init captured wv[0]. */
    struct fpco f = {.sets = 1};
    aco_t* co = aco_create(main_co, sstk, 0, co_fpu, &f);
    aco_resume(co);
    CHECK(f.q_up == q_up);        /* the co really computed rounding up */
    struct fpwords main_after = fp_get();
    double q_main = third();
#ifndef ACO_CONFIG_SHARE_FPU_MXCSR_ENV
    ASSERT_FP_EQ(f.at_entry, wv[0]);   /* starts with the captured words */
    ASSERT_FP_EQ(main_after, w0);      /* the co's change stayed in the co */
    CHECK(q_main == q_near);
#else
    ASSERT_FP_EQ(f.at_entry, w0);      /* one setting: main's, as it was */
    ASSERT_FP_EQ(main_after, wv[1]);   /* the co's change is main's too */
    CHECK(q_main == q_up || !rounding_works);
#endif

    /* Main changes its words; the co, resumed, sees ... */
    fp_set(wv[2]);
    aco_resume(co);
    ASSERT_EQ(co->is_end, 1);
#ifndef ACO_CONFIG_SHARE_FPU_MXCSR_ENV
    ASSERT_FP_EQ(f.at_resume, wv[1]);  /* ... its own words */
#else
    ASSERT_FP_EQ(f.at_resume, wv[2]);  /* ... main's */
#endif
    ASSERT_FP_EQ(fp_get(), wv[2]);     /* main keeps its own across the exit */
    aco_destroy(co);
}

/* A co that changes the words and exits (no yield); main runs with wv[2]. */
static void test_exit_only(aco_t* main_co, aco_share_stack_t* sstk) {
    fp_set(wv[2]);
    struct fpco g = {.sets = 1};
    aco_t* co = aco_create(main_co, sstk, 0, co_fpu_exit_only, &g);
    aco_resume(co);
    ASSERT_EQ(co->is_end, 1);
#ifndef ACO_CONFIG_SHARE_FPU_MXCSR_ENV
    ASSERT_FP_EQ(g.at_entry, wv[0]);
    ASSERT_FP_EQ(fp_get(), wv[2]);
#else
    ASSERT_FP_EQ(g.at_entry, wv[2]);
    ASSERT_FP_EQ(fp_get(), wv[1]);
#endif
    aco_destroy(co);
}

/* Two cos on one share stack, each with its own words, evicting each
 * other; main runs with w0 throughout. */
static void test_two_cos_shared_stack(aco_t* main_co, aco_share_stack_t* sstk) {
    fp_set(w0);
    struct fpco a = {.sets = 1}, b = {.sets = 2};
    aco_t* ca = aco_create(main_co, sstk, 0, co_fpu, &a);
    aco_t* cb = aco_create(main_co, sstk, 0, co_fpu, &b);
    aco_resume(ca);
    aco_resume(cb);
    struct fpwords main_mid = fp_get();
    aco_resume(ca);
    aco_resume(cb);
    ASSERT_EQ(ca->is_end + cb->is_end, 2);
#ifndef ACO_CONFIG_SHARE_FPU_MXCSR_ENV
    ASSERT_FP_EQ(a.at_entry, wv[0]);
    ASSERT_FP_EQ(b.at_entry, wv[0]);
    ASSERT_FP_EQ(main_mid, w0);
    ASSERT_FP_EQ(a.at_resume, wv[1]);
    ASSERT_FP_EQ(b.at_resume, wv[2]);
    ASSERT_FP_EQ(fp_get(), w0);
#else
    ASSERT_FP_EQ(a.at_entry, w0);
    ASSERT_FP_EQ(b.at_entry, wv[1]);
    ASSERT_FP_EQ(main_mid, wv[2]);
    ASSERT_FP_EQ(a.at_resume, wv[2]);
    ASSERT_FP_EQ(b.at_resume, wv[2]);
    ASSERT_FP_EQ(fp_get(), wv[2]);
#endif
    aco_destroy(ca);
    aco_destroy(cb);
    fp_set(w0);
    /* fesetround agrees: main is back to round-to-nearest. */
    ASSERT_EQ(fegetround(), FE_TONEAREST);
}

int main(void) {
    fpu_before_thread_init();
    aco_thread_init(NULL);
    fp_set(w0);
    aco_t* main_co = aco_create(NULL, NULL, 0, NULL, NULL);
    aco_share_stack_t* sstk = aco_share_stack_new(64 * 1024);

    probe_rounding();
    /* x86-64 has two ways to switch the words (acosw.S): the CPU's own
     * first, then the other; elsewhere the one way, once. */
    int dflt = aco__fp_mode(-1);
#if defined(__x86_64__) && !defined(ACO_CONFIG_SHARE_FPU_MXCSR_ENV)
    {
        unsigned a, b, c, d;
        char v[12];
        ASSERT_EQ(__get_cpuid(0, &a, &b, &c, &d), 1);
        memcpy(v, &b, 4);
        memcpy(v + 4, &d, 4);
        memcpy(v + 8, &c, 4);
        int amd = memcmp(v, "AuthenticAMD", 12) == 0 || memcmp(v, "HygonGenuine", 12) == 0;
        ASSERT_EQ(dflt, amd);   /* eager on AMD and Hygon, compare elsewhere */
    }
#else
    ASSERT_EQ(dflt, -1);
#endif
    for (int pass = 0; pass < (dflt < 0 ? 1 : 2); pass++) {
        if (dflt >= 0) ASSERT_EQ(aco__fp_mode(pass == 0 ? dflt : !dflt), pass == 0 ? dflt : !dflt);
        test_yield_and_resume(main_co, sstk);
        test_exit_only(main_co, sstk);
        test_two_cos_shared_stack(main_co, sstk);
    }
    if (dflt >= 0) aco__fp_mode(dflt);

    aco_share_stack_destroy(sstk);
    aco_destroy(main_co);
#if defined(__x86_64__) || defined(__i386__)
#define FP_WORDS "x87 CW / MXCSR"
#elif defined(__aarch64__)
#define FP_WORDS "FPCR"
#else
#define FP_WORDS "frm"
#endif
#ifdef ACO_CONFIG_SHARE_FPU_MXCSR_ENV
    printf("test_fp_control: OK (" FP_WORDS " shared by all cos)\n");
#else
    if (dflt >= 0)
        printf("test_fp_control: OK (" FP_WORDS " kept per co, both ways: loaded on "
               "every switch, and on a difference; this CPU's is %s)\n",
               dflt ? "every switch" : "on a difference");
    else
        printf("test_fp_control: OK (" FP_WORDS " kept per co)\n");
#endif
    return 0;
}
