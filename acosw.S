/*
 * acosw.S - libaco's context switch: void acosw(aco_t* from, aco_t* to).
 *
 * Copyright 2026 the libaco authors.  Apache License 2.0 (see LICENSE).
 *
 * acosw returns, in the co it continues, `from` (x86-64 moves it to rax;
 * i386 eax, aarch64 x0 and riscv64 a0 hold it throughout): so a co learns
 * which co switched to it (aco_resume_last, aco_yield_to's hand-off co).
 *
 * acosw saves into from->reg exactly what the calling convention makes
 * callee-saved (plus the resume address and the stack pointer), loads the
 * same from to->reg and continues `to` where it stopped.  Everything else is
 * scratch at a call, so the caller of acosw already assumes it lost.  The
 * floating-point control state is kept per co too (x86 psABI: "the control
 * bits ... are callee-saved"; aarch64 FPCR and riscv64 frm alike), unless
 * ACO_CONFIG_SHARE_FPU_MXCSR_ENV declares that no code changes it.
 *
 * Stack-pointer rule: at every instruction the stack pointer points into a
 * real stack, `from`'s until the single instruction that loads `to`'s, so a
 * signal may arrive anywhere (the handler runs on that stack).  Nothing is
 * ever addressed through the stack pointer except the return address x86
 * pops, and puts back for a ret (aarch64 and riscv64 do not address it at
 * all).
 *
 * Each architecture section opens with the layout of aco_t.reg.  Its ACO_OFF_*
 * names are the single source: aco.c includes this file with
 * ACO_ASM_LAYOUT_ONLY defined and checks them against aco.h with
 * _Static_assert.
 *
 * A new co starts with reg.pc = its function and reg.sp = the share stack's
 * align_retptr.  On x86 that is a slot holding aco_protector_ret: the
 * function sees a normal call frame whose return address is the protector,
 * which reports a co that returned instead of calling aco_exit().  Where the
 * return address lives in a register (aarch64 x30, riscv64 ra) there is no
 * slot: align_retptr is the 16-byte aligned top itself, and the new co's
 * reg.lr holds aco_protector_ret instead (ACO_OFF_LR exists exactly there).
 */

#if defined(__CET__) && (__CET__ & 1)
#define ACO_IBT 1
#else
#define ACO_IBT 0
#endif

#if defined(__x86_64__)
/*
 * x86-64 System V (psABI 1.0, 3.2.1 "Registers", Figure 3.4): callee-saved
 * are rbx, rbp, r12-r15, rsp, and the x87 CW / MXCSR control bits.
 *
 *   offset  slot  content
 *   0x00    0     rbx
 *   0x08    1     rbp
 *   0x10    2     r12
 *   0x18    3     r13
 *   0x20    4     r14
 *   0x28    5     r15
 *   0x30    6     pc:  where the co continues
 *   0x38    7     sp:  rsp at pc (the caller's rsp after acosw returns)
 *   0x40          x87 control word (16 bits)    aco_t.reg_fpucw
 *   0x42          (aco_t.is_end: never written here)
 *   0x44          MXCSR (32 bits)               aco_t.reg_mxcsr
 */
#define ACO_OFF_RBX     0x00
#define ACO_OFF_RBP     0x08
#define ACO_OFF_R12     0x10
#define ACO_OFF_R13     0x18
#define ACO_OFF_R14     0x20
#define ACO_OFF_R15     0x28
#define ACO_OFF_PC      0x30
#define ACO_OFF_SP      0x38
#define ACO_OFF_FPUCW   0x40
#define ACO_OFF_MXCSR   0x44
#define ACO_REG_SLOTS   8           /* pointer-sized slots before 0x40 */

#ifndef ACO_ASM_LAYOUT_ONLY
/* from's registers saved, to's loaded; rdx = from's resume pc. */
.macro ACO_GPRS64
    popq    %rdx                        /* rdx = from's resume pc; rsp = its sp */
    /* Absolute, not an adjustment: clang's assembler applies adjustments
     * as if .cfi_restore_state had not run (the second copy of this came
     * out at rsp-8). */
    .cfi_def_cfa_offset 0
    .cfi_register %rip, %rdx
    movq    %rdx, ACO_OFF_PC(%rdi)
    movq    %rsp, ACO_OFF_SP(%rdi)
    movq    %rbx, ACO_OFF_RBX(%rdi)
    movq    %rbp, ACO_OFF_RBP(%rdi)
    movq    %r12, ACO_OFF_R12(%rdi)
    movq    %r13, ACO_OFF_R13(%rdi)
    movq    %r14, ACO_OFF_R14(%rdi)
    movq    %r15, ACO_OFF_R15(%rdi)
    movq    ACO_OFF_RBX(%rsi), %rbx
    movq    ACO_OFF_RBP(%rsi), %rbp
    movq    ACO_OFF_R12(%rsi), %r12
    movq    ACO_OFF_R13(%rsi), %r13
    movq    ACO_OFF_R14(%rsi), %r14
    movq    ACO_OFF_R15(%rsi), %r15
.endm

/* Continue `to`: an indirect jump, or (same=1) a return when `to` stopped
 * at the very call site `from` is leaving (rdx: from's resume pc).
 *
 * Why both.  The call that entered the switch pushed from's resume address
 * on the CPU's return-address predictor; only a ret takes it off.  After a
 * jump it stays, one entry too many, so every later ret into frames older
 * than the switch is predicted from the wrong entry and missed (about 6.5
 * ns each on AMD Zen 4: docs/benchmarks.md, "Returns after a switch").  A
 * ret keeps that stack in step, and is predicted right when the two resume
 * addresses are equal: cos handing off at the same place (the runtime's
 * cos parked in the same call), whose older frames are then often the
 * same code too, predicted right as well.  Where they differ (resume and
 * yield, a main co and its cos), the indirect jump, whose predictor learns
 * the pattern, is right more often than a ret would be; it is the
 * fall-through, so that path pays only a mov, a compare and a branch not
 * taken (nothing measurable: docs/benchmarks.md).  The ret
 * puts the address back into the slot the call wrote it to, under to's
 * sp.
 *
 * A resume address is not an IBT landing pad (it follows a call), hence
 * notrack; a new co's pc is a C function, which has its own endbr64 (and
 * the ret is right there too, should it ever equal from's resume pc: it
 * does what the jump does, the one write under to's sp aside). */
.macro ACO_GO64 same
    .cfi_remember_state
    movq    %rdi, %rax                  /* `to` sees acosw return from */
    /* to's pc in rcx: rdx, from's, is where the unwind info finds the
     * return address until the stack pointer moves, then rcx */
    movq    ACO_OFF_PC(%rsi), %rcx
    movq    ACO_OFF_SP(%rsi), %rsp      /* the one instruction that moves stacks */
    .cfi_register %rip, %rcx
.if \same
    cmpq    %rcx, %rdx
    je      1f
.endif
#if ACO_IBT
    notrack jmp *%rcx
#else
    jmp     *%rcx
#endif
.if \same
1:
    .cfi_remember_state
    pushq   %rcx
    .cfi_def_cfa_offset 8               /* (absolute: see ACO_GPRS64) */
    .cfi_offset %rip, -8
    ret
    .cfi_restore_state
.endif
    .cfi_restore_state                  /* (for the code that follows) */
.endm

/* The FP control words, unless shared.  Reading MXCSR (stmxcsr) is slow on
 * every x86 and cannot be avoided: nothing else says whether the co changed
 * it.  What to do with to's words depends on the vendor (aco__fp_eager, set
 * once at load time by aco.c from cpuid):
 *   0 (Intel and others): fldcw and ldmxcsr are slow (microcoded,
 *     serialising): compare the words just saved with to's and load only on
 *     a difference.  MXCSR bits 0-5 are exception flags, status not control
 *     (scratch at a call): ignored.  The compare comes last, to read the
 *     stored words back as late as possible.
 *   1 (AMD, Hygon): loading is cheap, and reading back what stmxcsr has
 *     just stored waits for it (docs/benchmarks.md, "What makes the
 *     switch fast"): load to's words unconditionally, right away.
 *     (MXCSR's exception flags then travel with each co, the x87 status
 *     word's never do; either way they are status, which a call may
 *     change.)
 * The two paths are whole copies: the compare, and AMD's, which begins
 * with the one taken branch at the top (the compare's path pays one
 * not-taken test more). */
.macro ACO_SWITCH64 name same
    .p2align 4
    .globl  \name
    .type   \name, @function
\name:
    /* rdi = from, rsi = to */
    .cfi_startproc
#if ACO_IBT
    endbr64
#endif
#ifdef ACO_CONFIG_SHARE_FPU_MXCSR_ENV
    ACO_GPRS64
    ACO_GO64 \same
#else
    testb   $1, aco__fp_eager(%rip)
    jnz     .Leager\@
    fnstcw  ACO_OFF_FPUCW(%rdi)
    stmxcsr ACO_OFF_MXCSR(%rdi)
    .cfi_remember_state
    ACO_GPRS64
    movl    ACO_OFF_MXCSR(%rdi), %eax
    xorl    ACO_OFF_MXCSR(%rsi), %eax
    testl   $~0x3f, %eax
    jnz     .Lload\@
    movzwl  ACO_OFF_FPUCW(%rdi), %ecx
    cmpw    %cx, ACO_OFF_FPUCW(%rsi)
    jne     .Lload\@
    ACO_GO64 \same
.Lload\@:                               /* off the hot path */
    fldcw   ACO_OFF_FPUCW(%rsi)
    ldmxcsr ACO_OFF_MXCSR(%rsi)
    ACO_GO64 \same
    .cfi_restore_state
.Leager\@:
    fnstcw  ACO_OFF_FPUCW(%rdi)
    stmxcsr ACO_OFF_MXCSR(%rdi)
    fldcw   ACO_OFF_FPUCW(%rsi)
    ldmxcsr ACO_OFF_MXCSR(%rsi)
    ACO_GPRS64
    ACO_GO64 \same
#endif
    .cfi_endproc
    .size   \name, .-\name
.endm

    .text
    ACO_SWITCH64 acosw 0
    /* The same switch at a second address, for aco_yield and aco_exit (the
     * way back to the main co): each of the two ends in an indirect jump of
     * its own, so the branch predictor learns the two directions apart
     * (through one, resume and yield alternate its target; the figures:
     * docs/benchmarks.md, "What makes the switch fast"). */
    ACO_SWITCH64 aco__yieldsw 0
    /* And a third, aco_yield_to's, from one co to another: where both
     * stopped at the same call, it returns (ACO_GO64). */
    ACO_SWITCH64 aco__handsw 1
    .hidden aco__handsw
    /* The switch's end, for tests that ask whether a pc lies in it:
     * [acosw, aco__acosw_end) holds acosw, aco__yieldsw, aco__handsw and
     * the alignment padding between them. */
    .globl  aco__acosw_end
    .hidden aco__acosw_end
aco__acosw_end:

#ifndef ACO_CONFIG_SHARE_FPU_MXCSR_ENV
    .bss
    .globl  aco__fp_eager
    .hidden aco__fp_eager
    .type   aco__fp_eager, @object
    .size   aco__fp_eager, 1
aco__fp_eager:
    .zero   1
    .text
#endif

/* The co function "returns" here: rsp == align_retptr + 8 == align_highptr,
 * 16-byte aligned, as a call requires. */
    .p2align 4
    .globl  aco_protector
    .hidden aco_protector
    .type   aco_protector, @function
aco_protector:
    .cfi_startproc
    .cfi_undefined %rip                 /* the outermost frame of every co */
    nop                                 /* unwinders look up ret-1: keep it here */
    .globl  aco_protector_ret
    .hidden aco_protector_ret
aco_protector_ret:
    /* Below the slot that holds aco_protector_ret: the call must not write
     * over it, for the next co to start on this stack (a last word may end
     * the co with aco_exit() and return here no more). */
    subq    $16, %rsp
    .cfi_adjust_cfa_offset 16
    call    aco__funcp_protector        /* never returns */
    ud2
    .cfi_endproc
    .size   aco_protector, .-aco_protector
#endif /* ACO_ASM_LAYOUT_ONLY */

#elif defined(__i386__)
/*
 * i386 System V (psABI 1.1, 2.2.1 "Registers", Table 2.3): callee-saved are
 * ebx, ebp, esi, edi, esp, and the x87 CW / MXCSR control bits.  Arguments
 * arrive on the stack: from at 4(%esp), to at 8(%esp).
 *
 *   offset  slot  content
 *   0x00    0     ebx
 *   0x04    1     ebp
 *   0x08    2     esi
 *   0x0c    3     edi
 *   0x10    4     pc:  where the co continues
 *   0x14    5     sp:  esp at pc (the caller's esp after acosw returns)
 *   0x18          x87 control word (16 bits)    aco_t.reg_fpucw
 *   0x1a          (aco_t.is_end: never written here)
 *   0x1c          MXCSR (32 bits)               aco_t.reg_mxcsr
 */
#define ACO_OFF_EBX     0x00
#define ACO_OFF_EBP     0x04
#define ACO_OFF_ESI     0x08
#define ACO_OFF_EDI     0x0c
#define ACO_OFF_PC      0x10
#define ACO_OFF_SP      0x14
#define ACO_OFF_FPUCW   0x18
#define ACO_OFF_MXCSR   0x1c
#define ACO_REG_SLOTS   6

#ifndef ACO_ASM_LAYOUT_ONLY
/* As on x86-64, one switch emitted three times: acosw, aco__yieldsw and
 * aco__handsw (which returns where both stopped alike).  i386
 * keeps the compare on every vendor: its code may be PIC, where reaching
 * aco__fp_eager would cost a GOT base per switch. */
.macro ACO_SWITCH32 name same
    .p2align 4
    .globl  \name
    .type   \name, @function
\name:
    .cfi_startproc
#if ACO_IBT
    endbr32
#endif
    movl    4(%esp), %eax               /* eax = from */
    movl    8(%esp), %ecx               /* ecx = to */
#ifndef ACO_CONFIG_SHARE_FPU_MXCSR_ENV
    fnstcw  ACO_OFF_FPUCW(%eax)         /* first: slow, and read back last */
    stmxcsr ACO_OFF_MXCSR(%eax)
#endif
    popl    %edx                        /* edx = from's resume pc; esp = its sp */
    .cfi_adjust_cfa_offset -4
    .cfi_register %eip, %edx
    movl    %edx, ACO_OFF_PC(%eax)
    movl    %esp, ACO_OFF_SP(%eax)
    movl    %ebx, ACO_OFF_EBX(%eax)
    movl    %ebp, ACO_OFF_EBP(%eax)
    movl    %esi, ACO_OFF_ESI(%eax)
    movl    %edi, ACO_OFF_EDI(%eax)
#ifndef ACO_CONFIG_SHARE_FPU_MXCSR_ENV
    /* As on x86-64: load the words only when the control bits differ.
     * ebx and esi are saved already: free to use until loaded below. */
    movl    ACO_OFF_MXCSR(%eax), %ebx
    xorl    ACO_OFF_MXCSR(%ecx), %ebx
    andl    $~0x3f, %ebx
    movzwl  ACO_OFF_FPUCW(%eax), %esi
    xorw    ACO_OFF_FPUCW(%ecx), %si
    orl     %esi, %ebx
    jnz     .Lload\@
.Ldone\@:
#endif
.if \same                               /* a ret where both stopped alike */
    cmpl    ACO_OFF_PC(%ecx), %edx      /* (see ACO_GO64 on x86-64): the */
.endif                                  /* flags live through the movs */
    movl    ACO_OFF_EBX(%ecx), %ebx
    movl    ACO_OFF_EBP(%ecx), %ebp
    movl    ACO_OFF_ESI(%ecx), %esi
    movl    ACO_OFF_EDI(%ecx), %edi
    movl    ACO_OFF_PC(%ecx), %edx
    movl    ACO_OFF_SP(%ecx), %esp      /* the one instruction that moves stacks */
.if \same
    je      1f
.endif
#if ACO_IBT
    notrack jmp *%edx
#else
    jmp     *%edx
#endif
.if \same
1:
    .cfi_remember_state
    pushl   %edx
    .cfi_def_cfa_offset 4
    .cfi_offset %eip, -4
    ret
    .cfi_restore_state
.endif
#ifndef ACO_CONFIG_SHARE_FPU_MXCSR_ENV
.Lload\@:                               /* off the hot path */
    fldcw   ACO_OFF_FPUCW(%ecx)
    ldmxcsr ACO_OFF_MXCSR(%ecx)
    jmp     .Ldone\@
#endif
    .cfi_endproc
    .size   \name, .-\name
.endm

    .text
    ACO_SWITCH32 acosw 0
    ACO_SWITCH32 aco__yieldsw 0
    ACO_SWITCH32 aco__handsw 1
    .hidden aco__handsw
    .globl  aco__acosw_end              /* as on x86-64 */
    .hidden aco__acosw_end
aco__acosw_end:

/* The co function "returns" here: esp == align_highptr, 16-byte aligned. */
    .p2align 4
    .globl  aco_protector
    .hidden aco_protector
    .type   aco_protector, @function
aco_protector:
    .cfi_startproc
    .cfi_undefined %eip
    nop
    .globl  aco_protector_ret
    .hidden aco_protector_ret
aco_protector_ret:
    subl    $16, %esp                   /* (as on x86-64: keep the slot) */
    .cfi_adjust_cfa_offset 16
    call    aco__funcp_protector        /* hidden: a direct call, PIC or not */
    ud2
    .cfi_endproc
    .size   aco_protector, .-aco_protector
#endif /* ACO_ASM_LAYOUT_ONLY */

#elif defined(__aarch64__)
/*
 * AArch64, AAPCS64 6.1.1 "General-purpose Registers" and 6.1.2 "SIMD and
 * Floating-Point Registers": callee-saved are x19-x28, the frame pointer
 * x29, sp, and the low 64 bits of v8-v15 (d8-d15).  The return address
 * arrives in x30 (lr), not on the stack.  FPCR (rounding mode, flush-to-zero,
 * trap enables) is "a global register" that only support functions such as
 * fesetround change: like x86's control words it is kept per co unless
 * ACO_CONFIG_SHARE_FPU_MXCSR_ENV.  FPSR holds sticky status flags, which are
 * not preserved across calls: not saved.  Arguments: x0 = from, x1 = to.
 *
 *   offset  slot  content
 *   0x00    0     x19
 *   ...           x20-x27, one slot each
 *   0x48    9     x28
 *   0x50    10    x29 (fp)
 *   0x58    11    lr:  x30 at the switch; a new co's is aco_protector_ret
 *   0x60    12    sp:  sp at pc (the caller's sp after acosw returns)
 *   0x68    13    pc:  where the co continues (a new co: its function)
 *   0x70    14    d8
 *   ...           d9-d14, one slot each
 *   0xa8    21    d15
 *   0xb0          FPCR (32 bits; its bits 32-63 are RES0)   aco_t.reg_fpctl
 *   0xb4          (aco_t.is_end: never written here)
 *
 * Pairs are adjacent so stp/ldp move two slots per instruction.
 */
#define ACO_OFF_X19     0x00
#define ACO_OFF_X21     0x10
#define ACO_OFF_X23     0x20
#define ACO_OFF_X25     0x30
#define ACO_OFF_X27     0x40
#define ACO_OFF_FP      0x50
#define ACO_OFF_LR      0x58
#define ACO_OFF_SP      0x60
#define ACO_OFF_PC      0x68
#define ACO_OFF_D8      0x70
#define ACO_OFF_D10     0x80
#define ACO_OFF_D12     0x90
#define ACO_OFF_D14     0xa0
#define ACO_OFF_FPCR    0xb0
#define ACO_REG_SLOTS   22          /* pointer-sized slots before 0xb0 */

/* Branch Target Identification (-mbranch-protection=bti|standard): on
 * guarded pages an indirect call (blr, or br via x16/x17 as PLT stubs do)
 * must land on "bti c".  Written as its hint encoding so that assemblers
 * without the BTI extension enabled accept it; a no-op on older cores. */
#if defined(__ARM_FEATURE_BTI_DEFAULT) && __ARM_FEATURE_BTI_DEFAULT
#define ACO_BTI 1
#define ACO_BTI_C hint #34
#else
#define ACO_BTI 0
#define ACO_BTI_C
#endif

#ifndef ACO_ASM_LAYOUT_ONLY
    .text
    .p2align 4
    .globl  acosw
    .type   acosw, %function
acosw:
    .cfi_startproc
    ACO_BTI_C                           /* reached by blr or a PLT's br x17 */
    stp     x19, x20, [x0, #ACO_OFF_X19]
    stp     x21, x22, [x0, #ACO_OFF_X21]
    stp     x23, x24, [x0, #ACO_OFF_X23]
    stp     x25, x26, [x0, #ACO_OFF_X25]
    stp     x27, x28, [x0, #ACO_OFF_X27]
    stp     x29, x30, [x0, #ACO_OFF_FP]
    mov     x9, sp                      /* stp cannot store sp itself */
    stp     x9, x30, [x0, #ACO_OFF_SP]  /* sp, pc = the return address */
    stp     d8, d9, [x0, #ACO_OFF_D8]
    stp     d10, d11, [x0, #ACO_OFF_D10]
    stp     d12, d13, [x0, #ACO_OFF_D12]
    stp     d14, d15, [x0, #ACO_OFF_D14]
#ifndef ACO_CONFIG_SHARE_FPU_MXCSR_ENV
    /* Writing FPCR can stall the FP pipeline: write only on a change. */
    mrs     x9, fpcr
    str     w9, [x0, #ACO_OFF_FPCR]
    ldr     w10, [x1, #ACO_OFF_FPCR]    /* zero-extends into x10 */
    cmp     w9, w10
    b.ne    .Lload_fpcr64
.Lfpcr_done64:
#endif
    ldp     x19, x20, [x1, #ACO_OFF_X19]
    ldp     x21, x22, [x1, #ACO_OFF_X21]
    ldp     x23, x24, [x1, #ACO_OFF_X23]
    ldp     x25, x26, [x1, #ACO_OFF_X25]
    ldp     x27, x28, [x1, #ACO_OFF_X27]
    ldp     d8, d9, [x1, #ACO_OFF_D8]
    ldp     d10, d11, [x1, #ACO_OFF_D10]
    ldp     d12, d13, [x1, #ACO_OFF_D12]
    ldp     d14, d15, [x1, #ACO_OFF_D14]
    ldp     x9, x10, [x1, #ACO_OFF_SP]  /* x9 = to's sp, x10 = to's pc */
    ldp     x29, x30, [x1, #ACO_OFF_FP]
    .cfi_register x30, x10              /* from here on this is `to` returning */
    mov     sp, x9                      /* the one instruction that moves stacks */
    /* Continue `to` with a return, not a br: RET is exempt from BTI (a
     * resume address follows a bl and is no landing pad; a new co's pc is
     * a C function, which has its own), and it pops the return-stack entry
     * our caller's bl pushed, keeping the predictor's stack balanced. */
    ret     x10
#ifndef ACO_CONFIG_SHARE_FPU_MXCSR_ENV
.Lload_fpcr64:                          /* off the hot path */
    msr     fpcr, x10
    b       .Lfpcr_done64
#endif
    .globl  aco__acosw_end              /* as on x86-64 */
    .hidden aco__acosw_end
aco__acosw_end:
    .cfi_endproc
    .size   acosw, .-acosw
    /* aco__yieldsw, aco_yield's switch, is acosw itself here: x86 has a
     * second copy so that each direction has an indirect branch of its
     * own; these ports run under qemu in our suite, where nothing about a
     * branch predictor can be measured, and stay one switch. */
    .globl  aco__yieldsw
    .type   aco__yieldsw, %function
    .set    aco__yieldsw, acosw
    .size   aco__yieldsw, aco__acosw_end - acosw
    .globl  aco__handsw                 /* (aco_yield_to's: acosw too) */
    .hidden aco__handsw
    .type   aco__handsw, %function
    .set    aco__handsw, acosw
    .size   aco__handsw, aco__acosw_end - acosw

/* The co function "returns" here (its lr was set to aco_protector_ret):
 * sp == align_highptr, 16-byte aligned, as a call requires. */
    .p2align 4
    .globl  aco_protector
    .hidden aco_protector
    .type   aco_protector, %function
aco_protector:
    .cfi_startproc
    .cfi_undefined x30                  /* the outermost frame of every co */
    nop                                 /* unwinders look up ret-1: keep it here */
    .globl  aco_protector_ret
    .hidden aco_protector_ret
aco_protector_ret:                      /* reached by ret: no landing pad */
    bl      aco__funcp_protector        /* never returns */
    brk     #0x3c
    .cfi_endproc
    .size   aco_protector, .-aco_protector
#endif /* ACO_ASM_LAYOUT_ONLY */

#elif defined(__riscv) && __riscv_xlen == 64
/*
 * RISC-V 64, LP64D (RISC-V psABI, "Integer Register Convention" and
 * "Floating-point Register Convention"): callee-saved are sp, s0-s11 (s0 is
 * the frame pointer) and fs0-fs11 (whole 64 bits under the D ABI).  The
 * return address arrives in ra, not on the stack.  fcsr "must have thread
 * storage duration" (psABI); its rounding mode field frm is kept per co
 * unless ACO_CONFIG_SHARE_FPU_MXCSR_ENV, as x86's control words are.  fflags
 * holds sticky status flags: not saved.  Arguments: a0 = from, a1 = to.
 *
 *   offset  slot  content
 *   0x00    0     s0 (fp)
 *   ...           s1-s10, one slot each
 *   0x58    11    s11
 *   0x60    12    lr:  ra at the switch; a new co's is aco_protector_ret
 *   0x68    13    sp:  sp at pc (the caller's sp after acosw returns)
 *   0x70    14    pc:  where the co continues (a new co: its function)
 *   0x78    15    fs0
 *   ...           fs1-fs10, one slot each
 *   0xd0    26    fs11
 *   0xd8          frm (3 bits, in 32)           aco_t.reg_fpctl
 *   0xdc          (aco_t.is_end: never written here)
 */
#if !defined(__riscv_float_abi_double)
#error "libaco: riscv64 needs the LP64D ABI (fs0-fs11 are saved as doubles)"
#endif
#define ACO_OFF_S0      0x00
#define ACO_OFF_LR      0x60
#define ACO_OFF_SP      0x68
#define ACO_OFF_PC      0x70
#define ACO_OFF_FS0     0x78
#define ACO_OFF_FRM     0xd8
#define ACO_REG_SLOTS   27          /* pointer-sized slots before 0xd8 */

#ifndef ACO_ASM_LAYOUT_ONLY
    .text
    .p2align 2
    .globl  acosw
    .type   acosw, %function
acosw:
    .cfi_startproc
    sd      s0, ACO_OFF_S0+0x00(a0)
    sd      s1, ACO_OFF_S0+0x08(a0)
    sd      s2, ACO_OFF_S0+0x10(a0)
    sd      s3, ACO_OFF_S0+0x18(a0)
    sd      s4, ACO_OFF_S0+0x20(a0)
    sd      s5, ACO_OFF_S0+0x28(a0)
    sd      s6, ACO_OFF_S0+0x30(a0)
    sd      s7, ACO_OFF_S0+0x38(a0)
    sd      s8, ACO_OFF_S0+0x40(a0)
    sd      s9, ACO_OFF_S0+0x48(a0)
    sd      s10, ACO_OFF_S0+0x50(a0)
    sd      s11, ACO_OFF_S0+0x58(a0)
    sd      ra, ACO_OFF_LR(a0)
    sd      sp, ACO_OFF_SP(a0)
    sd      ra, ACO_OFF_PC(a0)          /* pc = the return address */
    fsd     fs0, ACO_OFF_FS0+0x00(a0)
    fsd     fs1, ACO_OFF_FS0+0x08(a0)
    fsd     fs2, ACO_OFF_FS0+0x10(a0)
    fsd     fs3, ACO_OFF_FS0+0x18(a0)
    fsd     fs4, ACO_OFF_FS0+0x20(a0)
    fsd     fs5, ACO_OFF_FS0+0x28(a0)
    fsd     fs6, ACO_OFF_FS0+0x30(a0)
    fsd     fs7, ACO_OFF_FS0+0x38(a0)
    fsd     fs8, ACO_OFF_FS0+0x40(a0)
    fsd     fs9, ACO_OFF_FS0+0x48(a0)
    fsd     fs10, ACO_OFF_FS0+0x50(a0)
    fsd     fs11, ACO_OFF_FS0+0x58(a0)
#ifndef ACO_CONFIG_SHARE_FPU_MXCSR_ENV
    /* A CSR write may serialise the pipeline: write frm only on a change. */
    frrm    t0
    sw      t0, ACO_OFF_FRM(a0)
    lw      t1, ACO_OFF_FRM(a1)
    bne     t0, t1, .Lload_frm
.Lfrm_done:
#endif
    ld      s0, ACO_OFF_S0+0x00(a1)
    ld      s1, ACO_OFF_S0+0x08(a1)
    ld      s2, ACO_OFF_S0+0x10(a1)
    ld      s3, ACO_OFF_S0+0x18(a1)
    ld      s4, ACO_OFF_S0+0x20(a1)
    ld      s5, ACO_OFF_S0+0x28(a1)
    ld      s6, ACO_OFF_S0+0x30(a1)
    ld      s7, ACO_OFF_S0+0x38(a1)
    ld      s8, ACO_OFF_S0+0x40(a1)
    ld      s9, ACO_OFF_S0+0x48(a1)
    ld      s10, ACO_OFF_S0+0x50(a1)
    ld      s11, ACO_OFF_S0+0x58(a1)
    fld     fs0, ACO_OFF_FS0+0x00(a1)
    fld     fs1, ACO_OFF_FS0+0x08(a1)
    fld     fs2, ACO_OFF_FS0+0x10(a1)
    fld     fs3, ACO_OFF_FS0+0x18(a1)
    fld     fs4, ACO_OFF_FS0+0x20(a1)
    fld     fs5, ACO_OFF_FS0+0x28(a1)
    fld     fs6, ACO_OFF_FS0+0x30(a1)
    fld     fs7, ACO_OFF_FS0+0x38(a1)
    fld     fs8, ACO_OFF_FS0+0x40(a1)
    fld     fs9, ACO_OFF_FS0+0x48(a1)
    fld     fs10, ACO_OFF_FS0+0x50(a1)
    fld     fs11, ACO_OFF_FS0+0x58(a1)
    ld      t0, ACO_OFF_PC(a1)
    ld      t1, ACO_OFF_SP(a1)
    ld      ra, ACO_OFF_LR(a1)
    .cfi_register ra, t0                /* from here on this is `to` returning */
    mv      sp, t1                      /* the one instruction that moves stacks */
    /* jalr x0 through t0 (x5, an alternate link register) is a "return"
     * hint (ISA, JALR): it pops the return-address-stack entry our caller's
     * call pushed, keeping the predictor's stack balanced. */
    jr      t0
#ifndef ACO_CONFIG_SHARE_FPU_MXCSR_ENV
.Lload_frm:                             /* off the hot path */
    fsrm    t1
    j       .Lfrm_done
#endif
    .globl  aco__acosw_end              /* as on x86-64 */
    .hidden aco__acosw_end
aco__acosw_end:
    .cfi_endproc
    .size   acosw, .-acosw
    /* aco__yieldsw, aco_yield's switch, is acosw itself here: x86 has a
     * second copy so that each direction has an indirect branch of its
     * own; these ports run under qemu in our suite, where nothing about a
     * branch predictor can be measured, and stay one switch. */
    .globl  aco__yieldsw
    .type   aco__yieldsw, %function
    .set    aco__yieldsw, acosw
    .size   aco__yieldsw, aco__acosw_end - acosw
    .globl  aco__handsw                 /* (aco_yield_to's: acosw too) */
    .hidden aco__handsw
    .type   aco__handsw, %function
    .set    aco__handsw, acosw
    .size   aco__handsw, aco__acosw_end - acosw

/* The co function "returns" here (its ra was set to aco_protector_ret):
 * sp == align_highptr, 16-byte aligned, as a call requires. */
    .p2align 2
    .globl  aco_protector
    .hidden aco_protector
    .type   aco_protector, %function
aco_protector:
    .cfi_startproc
    .cfi_undefined ra                   /* the outermost frame of every co */
    nop                                 /* unwinders look up ret-1: keep it here */
    .globl  aco_protector_ret
    .hidden aco_protector_ret
aco_protector_ret:
    call    aco__funcp_protector        /* never returns */
    unimp
    .cfi_endproc
    .size   aco_protector, .-aco_protector
#endif /* ACO_ASM_LAYOUT_ONLY */

#else
#error "libaco: acosw.S has no section for this architecture"
#endif

#ifndef ACO_ASM_LAYOUT_ONLY
/* No executable stack for any program that links us. */
    .section .note.GNU-stack, "", %progbits

/* With -fcf-protection: claim IBT, which holds (every indirect-call target
 * above starts with endbr, indirect jumps elsewhere are notrack).  Never claim
 * SHSTK: the switch does not maintain shadow stacks, and a claim would let the
 * loader enable them and fault at the first switch. */
#if ACO_IBT
    .section .note.gnu.property, "a"
#if defined(__x86_64__)
    .p2align 3
#else
    .p2align 2
#endif
    .long   4                           /* n_namesz: "GNU\0" */
    .long   3f - 2f                     /* n_descsz */
    .long   5                           /* NT_GNU_PROPERTY_TYPE_0 */
    .asciz  "GNU"
2:  .long   0xc0000002                  /* GNU_PROPERTY_X86_FEATURE_1_AND */
    .long   4                           /* pr_datasz */
    .long   1                           /* GNU_PROPERTY_X86_FEATURE_1_IBT */
#if defined(__x86_64__)
    .p2align 3
#else
    .p2align 2
#endif
3:
#endif

/* With -mbranch-protection=bti|standard: claim BTI, which holds (acosw, the
 * only indirect-call target here, starts with bti c; every other entry is
 * reached by ret or bl).  Never claim PAC, even when the C code signs its
 * return addresses: acosw keeps a suspended co's resume address unsigned in
 * aco_t.reg, so it would be a false claim.  (Return addresses that C frames
 * signed are safe to move: a co's frames are always restored at the
 * addresses they were saved from, so the sp modifiers still match.) */
#if defined(__aarch64__) && ACO_BTI
    .section .note.gnu.property, "a"
    .p2align 3
    .long   4                           /* n_namesz: "GNU\0" */
    .long   3f - 2f                     /* n_descsz */
    .long   5                           /* NT_GNU_PROPERTY_TYPE_0 */
    .asciz  "GNU"
2:  .long   0xc0000000                  /* GNU_PROPERTY_AARCH64_FEATURE_1_AND */
    .long   4                           /* pr_datasz */
    .long   1                           /* GNU_PROPERTY_AARCH64_FEATURE_1_BTI */
    .p2align 3
3:
#endif
#endif /* ACO_ASM_LAYOUT_ONLY */
