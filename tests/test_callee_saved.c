/*
 * test_callee_saved.c - every callee-saved register of the ABI holds the
 * same value after a switch as before it, in both directions (main -> co
 * across aco_resume(), co -> main across aco_yield()), for a co on its own
 * stack and for two cos that evict each other from one shared stack.
 *
 * regs_switch() (inline asm) loads known, distinct values into every
 * callee-saved register (x86-64: rbx, rbp, r12-r15; i386: ebx, ebp, esi,
 * edi; aarch64: x19-x29 and d8-d15; riscv64: s0-s11 and fs0-fs11), calls
 * aco_resume() or aco_yield() from inside the same asm statement, and
 * stores what the registers hold when that call returns: the other side of
 * the switch has meanwhile run with its own values.  A probe and a
 * deliberately ABI-breaking callee show first that the harness really loads
 * the registers and really notices a change.  (The FP control words are
 * test_fp_control's.)
 */
#include "aco_test.h"

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
#elif defined(__aarch64__)
/* d8-d15 as 64-bit patterns: AAPCS64 keeps only their low halves. */
#define NREG 19
static const char* const reg_name[NREG] = {
    "x19", "x20", "x21", "x22", "x23", "x24", "x25", "x26", "x27", "x28",
    "x29", "d8",  "d9",  "d10", "d11", "d12", "d13", "d14", "d15"};
#define IO_OUT 152
#define IO_FN  304
#define IO_ARG 312
#elif defined(__riscv)
#define NREG 24
static const char* const reg_name[NREG] = {
    "s0",  "s1",  "s2",  "s3",  "s4",  "s5",  "s6",  "s7",
    "s8",  "s9",  "s10", "s11", "fs0", "fs1", "fs2", "fs3",
    "fs4", "fs5", "fs6", "fs7", "fs8", "fs9", "fs10", "fs11"};
#define IO_OUT 192
#define IO_FN  384
#define IO_ARG 392
#else
#error "test_callee_saved: unsupported architecture"
#endif

#if defined(__aarch64__) && defined(__ARM_FEATURE_BTI_DEFAULT) && \
    __ARM_FEATURE_BTI_DEFAULT
#define BTI_C "hint #34\n\t"   /* bti c: the asm functions are called by blr */
#else
#define BTI_C ""
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
 * red zone, where the compiler may keep live data.  On aarch64 the whole
 * q8-q15 are saved: the compiler assumes an asm keeps all 128 bits, a call
 * only the low 64.
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
#elif defined(__i386__)
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
#elif defined(__aarch64__)
    register struct regio* x0 __asm__("x0") = io;
    __asm__ volatile(
        "sub   sp, sp, #240\n\t"           /* sp stays 16-byte aligned */
        "stp   x19, x20, [sp, #0]\n\t"
        "stp   x21, x22, [sp, #16]\n\t"
        "stp   x23, x24, [sp, #32]\n\t"
        "stp   x25, x26, [sp, #48]\n\t"
        "stp   x27, x28, [sp, #64]\n\t"
        "stp   x29, x30, [sp, #80]\n\t"
        "stp   q8, q9, [sp, #96]\n\t"
        "stp   q10, q11, [sp, #128]\n\t"
        "stp   q12, q13, [sp, #160]\n\t"
        "stp   q14, q15, [sp, #192]\n\t"
        "str   x0, [sp, #224]\n\t"         /* io */
        "ldr   x16, [x0, #" STR(IO_FN) "]\n\t"
        "ldp   x19, x20, [x0, #0]\n\t"
        "ldp   x21, x22, [x0, #16]\n\t"
        "ldp   x23, x24, [x0, #32]\n\t"
        "ldp   x25, x26, [x0, #48]\n\t"
        "ldp   x27, x28, [x0, #64]\n\t"
        "ldr   x29, [x0, #80]\n\t"
        "ldp   d8, d9, [x0, #88]\n\t"
        "ldp   d10, d11, [x0, #104]\n\t"
        "ldp   d12, d13, [x0, #120]\n\t"
        "ldp   d14, d15, [x0, #136]\n\t"
        "ldr   x0, [x0, #" STR(IO_ARG) "]\n\t"
        "blr   x16\n\t"
        "ldr   x0, [sp, #224]\n\t"
        "stp   x19, x20, [x0, #" STR(IO_OUT) "+0]\n\t"
        "stp   x21, x22, [x0, #" STR(IO_OUT) "+16]\n\t"
        "stp   x23, x24, [x0, #" STR(IO_OUT) "+32]\n\t"
        "stp   x25, x26, [x0, #" STR(IO_OUT) "+48]\n\t"
        "stp   x27, x28, [x0, #" STR(IO_OUT) "+64]\n\t"
        "str   x29, [x0, #" STR(IO_OUT) "+80]\n\t"
        "stp   d8, d9, [x0, #" STR(IO_OUT) "+88]\n\t"
        "stp   d10, d11, [x0, #" STR(IO_OUT) "+104]\n\t"
        "stp   d12, d13, [x0, #" STR(IO_OUT) "+120]\n\t"
        "stp   d14, d15, [x0, #" STR(IO_OUT) "+136]\n\t"
        "ldp   x19, x20, [sp, #0]\n\t"
        "ldp   x21, x22, [sp, #16]\n\t"
        "ldp   x23, x24, [sp, #32]\n\t"
        "ldp   x25, x26, [sp, #48]\n\t"
        "ldp   x27, x28, [sp, #64]\n\t"
        "ldp   x29, x30, [sp, #80]\n\t"
        "ldp   q8, q9, [sp, #96]\n\t"
        "ldp   q10, q11, [sp, #128]\n\t"
        "ldp   q12, q13, [sp, #160]\n\t"
        "ldp   q14, q15, [sp, #192]\n\t"
        "add   sp, sp, #240\n\t"
        : "+r"(x0)
        :
        : "x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8", "x9", "x10", "x11",
          "x12", "x13", "x14", "x15", "x16", "x17", "x18",
          "v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "v16", "v17", "v18",
          "v19", "v20", "v21", "v22", "v23", "v24", "v25", "v26", "v27", "v28",
          "v29", "v30", "v31", "memory", "cc");
#elif defined(__riscv)
    register struct regio* a0 __asm__("a0") = io;
    __asm__ volatile(
        "addi  sp, sp, -208\n\t"           /* sp stays 16-byte aligned */
        "sd    ra, 0(sp)\n\t"
        "sd    s0, 8(sp)\n\t"
        "sd    s1, 16(sp)\n\t"
        "sd    s2, 24(sp)\n\t"
        "sd    s3, 32(sp)\n\t"
        "sd    s4, 40(sp)\n\t"
        "sd    s5, 48(sp)\n\t"
        "sd    s6, 56(sp)\n\t"
        "sd    s7, 64(sp)\n\t"
        "sd    s8, 72(sp)\n\t"
        "sd    s9, 80(sp)\n\t"
        "sd    s10, 88(sp)\n\t"
        "sd    s11, 96(sp)\n\t"
        "fsd   fs0, 104(sp)\n\t"
        "fsd   fs1, 112(sp)\n\t"
        "fsd   fs2, 120(sp)\n\t"
        "fsd   fs3, 128(sp)\n\t"
        "fsd   fs4, 136(sp)\n\t"
        "fsd   fs5, 144(sp)\n\t"
        "fsd   fs6, 152(sp)\n\t"
        "fsd   fs7, 160(sp)\n\t"
        "fsd   fs8, 168(sp)\n\t"
        "fsd   fs9, 176(sp)\n\t"
        "fsd   fs10, 184(sp)\n\t"
        "fsd   fs11, 192(sp)\n\t"
        "sd    a0, 200(sp)\n\t"            /* io */
        "ld    t1, " STR(IO_FN) "(a0)\n\t"
        "ld    s0, 0(a0)\n\t"
        "ld    s1, 8(a0)\n\t"
        "ld    s2, 16(a0)\n\t"
        "ld    s3, 24(a0)\n\t"
        "ld    s4, 32(a0)\n\t"
        "ld    s5, 40(a0)\n\t"
        "ld    s6, 48(a0)\n\t"
        "ld    s7, 56(a0)\n\t"
        "ld    s8, 64(a0)\n\t"
        "ld    s9, 72(a0)\n\t"
        "ld    s10, 80(a0)\n\t"
        "ld    s11, 88(a0)\n\t"
        "fld   fs0, 96(a0)\n\t"
        "fld   fs1, 104(a0)\n\t"
        "fld   fs2, 112(a0)\n\t"
        "fld   fs3, 120(a0)\n\t"
        "fld   fs4, 128(a0)\n\t"
        "fld   fs5, 136(a0)\n\t"
        "fld   fs6, 144(a0)\n\t"
        "fld   fs7, 152(a0)\n\t"
        "fld   fs8, 160(a0)\n\t"
        "fld   fs9, 168(a0)\n\t"
        "fld   fs10, 176(a0)\n\t"
        "fld   fs11, 184(a0)\n\t"
        "ld    a0, " STR(IO_ARG) "(a0)\n\t"
        "jalr  t1\n\t"
        "ld    a0, 200(sp)\n\t"
        "sd    s0, " STR(IO_OUT) "+0(a0)\n\t"
        "sd    s1, " STR(IO_OUT) "+8(a0)\n\t"
        "sd    s2, " STR(IO_OUT) "+16(a0)\n\t"
        "sd    s3, " STR(IO_OUT) "+24(a0)\n\t"
        "sd    s4, " STR(IO_OUT) "+32(a0)\n\t"
        "sd    s5, " STR(IO_OUT) "+40(a0)\n\t"
        "sd    s6, " STR(IO_OUT) "+48(a0)\n\t"
        "sd    s7, " STR(IO_OUT) "+56(a0)\n\t"
        "sd    s8, " STR(IO_OUT) "+64(a0)\n\t"
        "sd    s9, " STR(IO_OUT) "+72(a0)\n\t"
        "sd    s10, " STR(IO_OUT) "+80(a0)\n\t"
        "sd    s11, " STR(IO_OUT) "+88(a0)\n\t"
        "fsd   fs0, " STR(IO_OUT) "+96(a0)\n\t"
        "fsd   fs1, " STR(IO_OUT) "+104(a0)\n\t"
        "fsd   fs2, " STR(IO_OUT) "+112(a0)\n\t"
        "fsd   fs3, " STR(IO_OUT) "+120(a0)\n\t"
        "fsd   fs4, " STR(IO_OUT) "+128(a0)\n\t"
        "fsd   fs5, " STR(IO_OUT) "+136(a0)\n\t"
        "fsd   fs6, " STR(IO_OUT) "+144(a0)\n\t"
        "fsd   fs7, " STR(IO_OUT) "+152(a0)\n\t"
        "fsd   fs8, " STR(IO_OUT) "+160(a0)\n\t"
        "fsd   fs9, " STR(IO_OUT) "+168(a0)\n\t"
        "fsd   fs10, " STR(IO_OUT) "+176(a0)\n\t"
        "fsd   fs11, " STR(IO_OUT) "+184(a0)\n\t"
        "ld    ra, 0(sp)\n\t"
        "ld    s0, 8(sp)\n\t"
        "ld    s1, 16(sp)\n\t"
        "ld    s2, 24(sp)\n\t"
        "ld    s3, 32(sp)\n\t"
        "ld    s4, 40(sp)\n\t"
        "ld    s5, 48(sp)\n\t"
        "ld    s6, 56(sp)\n\t"
        "ld    s7, 64(sp)\n\t"
        "ld    s8, 72(sp)\n\t"
        "ld    s9, 80(sp)\n\t"
        "ld    s10, 88(sp)\n\t"
        "ld    s11, 96(sp)\n\t"
        "fld   fs0, 104(sp)\n\t"
        "fld   fs1, 112(sp)\n\t"
        "fld   fs2, 120(sp)\n\t"
        "fld   fs3, 128(sp)\n\t"
        "fld   fs4, 136(sp)\n\t"
        "fld   fs5, 144(sp)\n\t"
        "fld   fs6, 152(sp)\n\t"
        "fld   fs7, 160(sp)\n\t"
        "fld   fs8, 168(sp)\n\t"
        "fld   fs9, 176(sp)\n\t"
        "fld   fs10, 184(sp)\n\t"
        "fld   fs11, 192(sp)\n\t"
        "addi  sp, sp, 208\n\t"
        : "+r"(a0)
        :
        : "t0", "t1", "t2", "t3", "t4", "t5", "t6", "a1", "a2", "a3", "a4",
          "a5", "a6", "a7", "ft0", "ft1", "ft2", "ft3", "ft4", "ft5", "ft6",
          "ft7", "ft8", "ft9", "ft10", "ft11", "fa0", "fa1", "fa2", "fa3",
          "fa4", "fa5", "fa6", "fa7", "memory");
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
#elif defined(__i386__)
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
#elif defined(__aarch64__)
/* The breaker flips bit k of register k: eor with a one-bit immediate for
 * x19-x29, through x9 for d8-d15. */
#define FLIP_D(d, bit) \
    "fmov x9, " d "\n\teor x9, x9, #(1 << " bit ")\n\tfmov " d ", x9\n\t"
__asm__(
    ".text\n"
    ".globl test_regs_probe\n"
    ".type test_regs_probe, %function\n"
    "test_regs_probe:\n\t"
    BTI_C
    "stp x19, x20, [x0, #0]\n\t"
    "stp x21, x22, [x0, #16]\n\t"
    "stp x23, x24, [x0, #32]\n\t"
    "stp x25, x26, [x0, #48]\n\t"
    "stp x27, x28, [x0, #64]\n\t"
    "str x29, [x0, #80]\n\t"
    "stp d8, d9, [x0, #88]\n\t"
    "stp d10, d11, [x0, #104]\n\t"
    "stp d12, d13, [x0, #120]\n\t"
    "stp d14, d15, [x0, #136]\n\t"
    "ret\n"
    ".size test_regs_probe, .-test_regs_probe\n"
    ".globl test_regs_breaker\n"
    ".type test_regs_breaker, %function\n"
    "test_regs_breaker:\n\t"
    BTI_C
    "eor x19, x19, #(1 << 0)\n\t"
    "eor x20, x20, #(1 << 1)\n\t"
    "eor x21, x21, #(1 << 2)\n\t"
    "eor x22, x22, #(1 << 3)\n\t"
    "eor x23, x23, #(1 << 4)\n\t"
    "eor x24, x24, #(1 << 5)\n\t"
    "eor x25, x25, #(1 << 6)\n\t"
    "eor x26, x26, #(1 << 7)\n\t"
    "eor x27, x27, #(1 << 8)\n\t"
    "eor x28, x28, #(1 << 9)\n\t"
    "eor x29, x29, #(1 << 10)\n\t"
    FLIP_D("d8", "11") FLIP_D("d9", "12") FLIP_D("d10", "13")
    FLIP_D("d11", "14") FLIP_D("d12", "15") FLIP_D("d13", "16")
    FLIP_D("d14", "17") FLIP_D("d15", "18")
    "ret\n"
    ".size test_regs_breaker, .-test_regs_breaker\n");
#elif defined(__riscv)
/* The breaker flips bit k of register k through t0 (xori's immediate is
 * too short for the high bits), for fs0-fs11 through t1 as well. */
#define FLIP_S(s, bit) "li t0, 1 << " bit "\n\txor " s ", " s ", t0\n\t"
#define FLIP_FS(f, bit) \
    "fmv.x.d t1, " f "\n\tli t0, 1 << " bit "\n\txor t1, t1, t0\n\t" \
    "fmv.d.x " f ", t1\n\t"
__asm__(
    ".text\n"
    ".globl test_regs_probe\n"
    ".type test_regs_probe, %function\n"
    "test_regs_probe:\n\t"
    "sd s0, 0(a0)\n\t"
    "sd s1, 8(a0)\n\t"
    "sd s2, 16(a0)\n\t"
    "sd s3, 24(a0)\n\t"
    "sd s4, 32(a0)\n\t"
    "sd s5, 40(a0)\n\t"
    "sd s6, 48(a0)\n\t"
    "sd s7, 56(a0)\n\t"
    "sd s8, 64(a0)\n\t"
    "sd s9, 72(a0)\n\t"
    "sd s10, 80(a0)\n\t"
    "sd s11, 88(a0)\n\t"
    "fsd fs0, 96(a0)\n\t"
    "fsd fs1, 104(a0)\n\t"
    "fsd fs2, 112(a0)\n\t"
    "fsd fs3, 120(a0)\n\t"
    "fsd fs4, 128(a0)\n\t"
    "fsd fs5, 136(a0)\n\t"
    "fsd fs6, 144(a0)\n\t"
    "fsd fs7, 152(a0)\n\t"
    "fsd fs8, 160(a0)\n\t"
    "fsd fs9, 168(a0)\n\t"
    "fsd fs10, 176(a0)\n\t"
    "fsd fs11, 184(a0)\n\t"
    "ret\n"
    ".size test_regs_probe, .-test_regs_probe\n"
    ".globl test_regs_breaker\n"
    ".type test_regs_breaker, %function\n"
    "test_regs_breaker:\n\t"
    FLIP_S("s0", "0") FLIP_S("s1", "1") FLIP_S("s2", "2") FLIP_S("s3", "3")
    FLIP_S("s4", "4") FLIP_S("s5", "5") FLIP_S("s6", "6") FLIP_S("s7", "7")
    FLIP_S("s8", "8") FLIP_S("s9", "9") FLIP_S("s10", "10")
    FLIP_S("s11", "11")
    FLIP_FS("fs0", "12") FLIP_FS("fs1", "13") FLIP_FS("fs2", "14")
    FLIP_FS("fs3", "15") FLIP_FS("fs4", "16") FLIP_FS("fs5", "17")
    FLIP_FS("fs6", "18") FLIP_FS("fs7", "19") FLIP_FS("fs8", "20")
    FLIP_FS("fs9", "21") FLIP_FS("fs10", "22") FLIP_FS("fs11", "23")
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

int main(void) {
    test_harness_self_check();

    aco_thread_init(NULL);
    aco_t* main_co = aco_create(NULL, NULL, 0, NULL, NULL);

    /* x86-64: both of acosw's ways with the FP words (aco__fp_mode), the
     * CPU's own first; elsewhere the one way. */
    int dflt = aco__fp_mode(-1);
    for (int pass = 0; pass < (dflt < 0 ? 1 : 2); pass++) {
        if (dflt >= 0) aco__fp_mode(pass == 0 ? dflt : !dflt);
        test_main_and_co(main_co);
        test_two_cos_shared_stack(main_co);
    }
    if (dflt >= 0) aco__fp_mode(dflt);

    aco_destroy(main_co);
    printf("test_callee_saved: OK%s\n", dflt < 0 ? "" : " (both ways with the FP words)");
    return 0;
}
