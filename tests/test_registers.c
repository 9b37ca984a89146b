/*
 * test_registers.c - a switch keeps every callee-saved register, and the x87
 * control word and MXCSR as the build's configuration says.
 *
 * Registers: regs_switch() (inline asm) loads known, distinct values into
 * every callee-saved register of the System V ABI (x86-64: rbx, rbp, r12-r15;
 * i386: ebx, ebp, esi, edi), calls aco_resume() or aco_yield() from inside the
 * same asm statement, and stores what the registers hold when that call
 * returns: the other side of the switch has meanwhile run with its own
 * values.  Checked main -> co -> main on a standalone stack, and for two cos
 * sharing one stack (each evicted and restored between its switches).  A
 * probe and a deliberately ABI-breaking callee show that the harness really
 * loads the registers and really notices a change.
 *
 * Control words: by default every co keeps its own x87 control word and
 * MXCSR, and a new co starts with the words aco_thread_init() captured.
 * With ACO_CONFIG_SHARE_FPU_MXCSR_ENV they are one thread-wide setting that
 * switches leave alone.  The test expects whichever the build asks for.
 */
#include "aco_test.h"

#include <fenv.h>
#include <stddef.h>

#define STR_(x) #x
#define STR(x) STR_(x)

/* ------------------------------------------------------------------------ */
/* The register harness                                                     */
/* ------------------------------------------------------------------------ */

#if defined(__x86_64__)
#define NREG 6
static const char* const reg_name[NREG] = {"rbx", "rbp", "r12", "r13", "r14", "r15"};
#define IO_OUT 48
#define IO_FN  96
#define IO_ARG 104
#elif defined(__i386__)
#define NREG 4
static const char* const reg_name[NREG] = {"ebx", "ebp", "esi", "edi"};
#define IO_OUT 16
#define IO_FN  32
#define IO_ARG 36
#else
#error "test_registers: unsupported architecture"
#endif

struct regio {
    uintptr_t in[NREG];   /* loaded into the registers right before the call */
    uintptr_t out[NREG];  /* what the registers held right after it */
    void (*fn)(void);     /* aco_resume, aco_yield or a probe */
    void* arg;            /* fn's argument (ignored by aco_yield) */
};
/* The asm below addresses the fields by these offsets. */
_Static_assert(offsetof(struct regio, out) == IO_OUT, "IO_OUT");
_Static_assert(offsetof(struct regio, fn) == IO_FN, "IO_FN");
_Static_assert(offsetof(struct regio, arg) == IO_ARG, "IO_ARG");

/*
 * Load io->in into the callee-saved registers, call io->fn(io->arg), store
 * the registers into io->out.  The compiler's own values of those registers
 * are pushed first and popped last, so none needs to be declared clobbered
 * (gcc cannot give up rbp or the i386 PIC register ebx anyway); everything
 * a call may clobber is declared.  The stack is 16-byte aligned at the call,
 * as the ABI requires, and on x86-64 the asm first steps over the 128-byte
 * red zone, where the compiler may keep live data.
 */
static void regs_switch(struct regio* io) {
#if defined(__x86_64__)
    __asm__ volatile(
        "movq  %%rsp, %%rcx\n\t"
        "subq  $128, %%rsp\n\t"           /* step over the red zone */
        "andq  $-16, %%rsp\n\t"
        "pushq %%rcx\n\t"                 /* 56(%%rsp) at the call: old rsp */
        "pushq %%rax\n\t"                 /* 48: io */
        "pushq %%rbx\n\t"
        "pushq %%rbp\n\t"
        "pushq %%r12\n\t"
        "pushq %%r13\n\t"
        "pushq %%r14\n\t"
        "pushq %%r15\n\t"                 /* 8 pushes: aligned again */
        "movq  " STR(IO_ARG) "(%%rax), %%rdi\n\t"
        "movq  " STR(IO_FN) "(%%rax), %%rsi\n\t"
        "movq  0(%%rax), %%rbx\n\t"
        "movq  8(%%rax), %%rbp\n\t"
        "movq  16(%%rax), %%r12\n\t"
        "movq  24(%%rax), %%r13\n\t"
        "movq  32(%%rax), %%r14\n\t"
        "movq  40(%%rax), %%r15\n\t"
        "callq *%%rsi\n\t"
        "movq  48(%%rsp), %%rax\n\t"
        "movq  %%rbx, " STR(IO_OUT) "+0(%%rax)\n\t"
        "movq  %%rbp, " STR(IO_OUT) "+8(%%rax)\n\t"
        "movq  %%r12, " STR(IO_OUT) "+16(%%rax)\n\t"
        "movq  %%r13, " STR(IO_OUT) "+24(%%rax)\n\t"
        "movq  %%r14, " STR(IO_OUT) "+32(%%rax)\n\t"
        "movq  %%r15, " STR(IO_OUT) "+40(%%rax)\n\t"
        "popq  %%r15\n\t"
        "popq  %%r14\n\t"
        "popq  %%r13\n\t"
        "popq  %%r12\n\t"
        "popq  %%rbp\n\t"
        "popq  %%rbx\n\t"
        "popq  %%rax\n\t"
        "popq  %%rsp\n\t"                 /* back to the rsp of the asm's start */
        : "+a"(io)
        :
        : "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11",
          "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7",
          "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15",
          "st", "st(1)", "st(2)", "st(3)", "st(4)", "st(5)", "st(6)", "st(7)",
          "memory", "cc");
#else
    __asm__ volatile(
        "movl  %%esp, %%ecx\n\t"
        "andl  $-16, %%esp\n\t"
        "pushl %%ecx\n\t"                 /* 28(%%esp) at the call: old esp */
        "pushl %%eax\n\t"                 /* 24: io */
        "pushl %%ebx\n\t"                 /* 20 */
        "pushl %%ebp\n\t"                 /* 16 */
        "pushl %%esi\n\t"                 /* 12 */
        "pushl %%edi\n\t"                 /* 8 */
        "subl  $4, %%esp\n\t"             /* 4: padding */
        "pushl " STR(IO_ARG) "(%%eax)\n\t" /* 0: the argument; aligned */
        "movl  " STR(IO_FN) "(%%eax), %%ecx\n\t"
        "movl  0(%%eax), %%ebx\n\t"
        "movl  4(%%eax), %%ebp\n\t"
        "movl  8(%%eax), %%esi\n\t"
        "movl  12(%%eax), %%edi\n\t"
        "call  *%%ecx\n\t"
        "movl  24(%%esp), %%eax\n\t"
        "movl  %%ebx, " STR(IO_OUT) "+0(%%eax)\n\t"
        "movl  %%ebp, " STR(IO_OUT) "+4(%%eax)\n\t"
        "movl  %%esi, " STR(IO_OUT) "+8(%%eax)\n\t"
        "movl  %%edi, " STR(IO_OUT) "+12(%%eax)\n\t"
        "addl  $8, %%esp\n\t"
        "popl  %%edi\n\t"
        "popl  %%esi\n\t"
        "popl  %%ebp\n\t"
        "popl  %%ebx\n\t"
        "popl  %%eax\n\t"
        "popl  %%esp\n\t"
        : "+a"(io)
        :
        : "ecx", "edx",
#ifdef __SSE__
          "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7",
#endif
          "st", "st(1)", "st(2)", "st(3)", "st(4)", "st(5)", "st(6)", "st(7)",
          "memory", "cc");
#endif
}

/* Harness self-checks, called through regs_switch like aco_resume:
 * regs_probe stores the callee-saved registers it was called with into
 * arg; regs_breaker flips one bit in each (an ABI violation on purpose). */
void test_regs_probe(uintptr_t* seen);
void test_regs_breaker(void);
#if defined(__x86_64__)
__asm__(
    ".text\n"
    ".globl test_regs_probe\n"
    ".type test_regs_probe, @function\n"
    "test_regs_probe:\n\t"
    "movq %rbx, 0(%rdi)\n\t"
    "movq %rbp, 8(%rdi)\n\t"
    "movq %r12, 16(%rdi)\n\t"
    "movq %r13, 24(%rdi)\n\t"
    "movq %r14, 32(%rdi)\n\t"
    "movq %r15, 40(%rdi)\n\t"
    "ret\n"
    ".size test_regs_probe, .-test_regs_probe\n"
    ".globl test_regs_breaker\n"
    ".type test_regs_breaker, @function\n"
    "test_regs_breaker:\n\t"
    "xorq $1, %rbx\n\t"
    "xorq $2, %rbp\n\t"
    "xorq $4, %r12\n\t"
    "xorq $8, %r13\n\t"
    "xorq $16, %r14\n\t"
    "xorq $32, %r15\n\t"
    "ret\n"
    ".size test_regs_breaker, .-test_regs_breaker\n");
#else
__asm__(
    ".text\n"
    ".globl test_regs_probe\n"
    ".type test_regs_probe, @function\n"
    "test_regs_probe:\n\t"
    "movl 4(%esp), %eax\n\t"
    "movl %ebx, 0(%eax)\n\t"
    "movl %ebp, 4(%eax)\n\t"
    "movl %esi, 8(%eax)\n\t"
    "movl %edi, 12(%eax)\n\t"
    "ret\n"
    ".size test_regs_probe, .-test_regs_probe\n"
    ".globl test_regs_breaker\n"
    ".type test_regs_breaker, @function\n"
    "test_regs_breaker:\n\t"
    "xorl $1, %ebx\n\t"
    "xorl $2, %ebp\n\t"
    "xorl $4, %esi\n\t"
    "xorl $8, %edi\n\t"
    "ret\n"
    ".size test_regs_breaker, .-test_regs_breaker\n");
#endif

/* A value per (side, round, register), all distinct, every bit in play: the
 * low 32 bits encode side, round and register; on x86-64 the high 32 bits
 * are their complement. */
static uintptr_t reg_value(unsigned who, unsigned long round, int k) {
    uint32_t lo = (uint32_t)who << 28 | (uint32_t)(round & 0xfffff) << 8 |
                  (uint32_t)(0xa0 + k);
    uint64_t v = (uint64_t)(uint32_t)~lo << 32 | lo;
    return (uintptr_t)v;
}

static void load_values(struct regio* io, unsigned who, unsigned long round) {
    for (int k = 0; k < NREG; k++) {
        io->in[k] = reg_value(who, round, k);
        io->out[k] = 0;
    }
}

/* Number of registers whose value did not survive; prints each one. */
static int mismatches(const struct regio* io, const char* where,
                      unsigned long round) {
    int bad = 0;
    for (int k = 0; k < NREG; k++) {
        if (io->out[k] != io->in[k]) {
            fprintf(stderr, "%s, round %lu: %s was %#" PRIxPTR
                    " before the switch, %#" PRIxPTR " after it\n",
                    where, round, reg_name[k], io->in[k], io->out[k]);
            bad++;
        }
    }
    return bad;
}

static void test_harness_self_check(void) {
    struct regio io;
    uintptr_t seen[NREG];
    memset(seen, 0, sizeof(seen));
    load_values(&io, 1, 12345);
    io.fn = (void (*)(void))test_regs_probe;
    io.arg = seen;
    regs_switch(&io);
    for (int k = 0; k < NREG; k++) ASSERT_EQ(seen[k], io.in[k]);
    ASSERT_EQ(mismatches(&io, "probe", 0), 0);

    /* A callee that breaks the ABI must be caught, register by register. */
    load_values(&io, 2, 54321);
    io.fn = test_regs_breaker;
    io.arg = NULL;
    regs_switch(&io);
    for (int k = 0; k < NREG; k++) ASSERT_EQ(io.out[k], io.in[k] ^ ((uintptr_t)1 << k));
}

/* ------------------------------------------------------------------------ */
/* Registers across switches                                                */
/* ------------------------------------------------------------------------ */

enum { WHO_MAIN = 1, WHO_CO = 2 };  /* cos use WHO_CO + their index */

struct side {
    unsigned who;
    long rounds;          /* yields before aco_exit() */
    long checked;
    long bad;
};

static void co_regs(void) {
    struct side* s = aco_get_arg();
    for (long i = 0; i < s->rounds; i++) {
        struct regio io;
        load_values(&io, s->who, (unsigned long)i);
        io.fn = aco_yield;
        io.arg = NULL;
        regs_switch(&io);     /* back here only when main resumes us */
        s->bad += mismatches(&io, "co, across aco_yield", (unsigned long)i);
        s->checked++;
    }
    aco_exit();
}

/* Resume co with main's registers set to (WHO_MAIN, round) values. */
static void resume_with_regs(aco_t* co, unsigned long round) {
    struct regio io;
    load_values(&io, WHO_MAIN, round);
    io.fn = (void (*)(void))aco_resume;
    io.arg = co;
    regs_switch(&io);
    ASSERT_EQ(mismatches(&io, "main, across aco_resume", round), 0);
}

static void test_main_and_co(aco_t* main_co) {
    aco_share_stack_t* sstk = aco_share_stack_new(64 * 1024);
    struct side s = {.who = WHO_CO, .rounds = aco_test_scale(20000, 100)};
    aco_t* co = aco_create(main_co, sstk, 0, co_regs, &s);
    for (long i = 0; i <= s.rounds; i++) resume_with_regs(co, (unsigned long)i);
    ASSERT_EQ(co->is_end, 1);
    ASSERT_EQ(s.checked, s.rounds);
    ASSERT_EQ(s.bad, 0);
    aco_destroy(co);
    aco_share_stack_destroy(sstk);
}

/* Two cos on one share stack: each resume evicts the other, so each co's
 * registers come back from its aco_t after the other ran in between. */
static void test_two_cos_shared_stack(aco_t* main_co) {
    aco_share_stack_t* sstk = aco_share_stack_new(64 * 1024);
    struct side s[2] = {
        {.who = WHO_CO + 1, .rounds = aco_test_scale(5000, 50)},
        {.who = WHO_CO + 2, .rounds = aco_test_scale(5000, 50)},
    };
    aco_t* co[2];
    for (int c = 0; c < 2; c++) co[c] = aco_create(main_co, sstk, 0, co_regs, &s[c]);
    unsigned long round = 0;
    for (long i = 0; i <= s[0].rounds; i++)
        for (int c = 0; c < 2; c++) resume_with_regs(co[c], round++);
    for (int c = 0; c < 2; c++) {
        ASSERT_EQ(co[c]->is_end, 1);
        ASSERT_EQ(s[c].checked, s[c].rounds);
        ASSERT_EQ(s[c].bad, 0);
        /* The evictions really happened: each co was copied out and back
         * in once per round (its exit needs no save). */
        ASSERT_EQ(co[c]->save_stack.ct_save, s[c].rounds);
        ASSERT_EQ(co[c]->save_stack.ct_restore, s[c].rounds);
        aco_destroy(co[c]);
    }
    aco_share_stack_destroy(sstk);
}

/* ------------------------------------------------------------------------ */
/* x87 control word and MXCSR                                               */
/* ------------------------------------------------------------------------ */

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

/* 1/3 in the current rounding mode: differs from the round-to-nearest
 * result when rounding up (1/3 rounds down to nearest), in double (SSE on
 * x86-64) and in extended precision stored to double (x87 on i386). */
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

static void test_fpu(aco_t* main_co) {
    aco_share_stack_t* sstk = aco_share_stack_new(64 * 1024);
    double q_near = third();
    fp_set(wv[1]);
    double q_up = third();
    fp_set(w0);
    /* The probe can tell the modes apart, except under valgrind, which
     * keeps the mode word but computes round-to-nearest. */
    int rounding_works = q_up != q_near;
    CHECK(rounding_works || aco_test_on_valgrind());
    ASSERT_FP_EQ(fp_get(), w0);   /* main is back to the startup words */

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

    /* A co that changes the words and exits (no yield). */
    struct fpco g = {.sets = 1};
    co = aco_create(main_co, sstk, 0, co_fpu_exit_only, &g);
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

    /* Two cos on one share stack, each with its own words, evicting each
     * other; main runs with w0 throughout. */
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
    aco_share_stack_destroy(sstk);
}

int main(void) {
    test_harness_self_check();

    fpu_before_thread_init();
    aco_thread_init(NULL);
    fp_set(w0);
    aco_t* main_co = aco_create(NULL, NULL, 0, NULL, NULL);

    test_main_and_co(main_co);
    test_two_cos_shared_stack(main_co);
    test_fpu(main_co);

    aco_destroy(main_co);
#ifdef ACO_CONFIG_SHARE_FPU_MXCSR_ENV
    printf("test_registers: OK (x87 CW / MXCSR shared by all cos)\n");
#else
    printf("test_registers: OK (x87 CW / MXCSR kept per co)\n");
#endif
    return 0;
}
