/*
 * acosw.S - libaco's context switch: void acosw(aco_t* from, aco_t* to).
 *
 * Copyright 2026 the libaco authors.  Apache License 2.0 (see LICENSE).
 *
 * acosw saves into from->reg exactly what the System V calling convention
 * makes callee-saved (plus the resume address and the stack pointer), loads
 * the same from to->reg and continues `to` where it stopped.  Everything else
 * is scratch at a call, so the caller of acosw already assumes it lost.  The
 * x87 control word and MXCSR control bits are callee-saved too (psABI: "the
 * control bits ... are callee-saved"), so each co keeps its own unless
 * ACO_CONFIG_SHARE_FPU_MXCSR_ENV declares that no code changes them.
 *
 * Stack-pointer rule: at every instruction the stack pointer points into a
 * real stack, `from`'s until the single instruction that loads `to`'s, so a
 * signal may arrive anywhere (the handler runs on that stack).  Nothing is
 * ever addressed through the stack pointer except the return address we pop.
 *
 * Each architecture section opens with the layout of aco_t.reg.  Its ACO_OFF_*
 * names are the single source: aco.c includes this file with
 * ACO_ASM_LAYOUT_ONLY defined and checks them against aco.h with
 * _Static_assert.
 *
 * A new co starts with reg.pc = its function and reg.sp = the share stack's
 * align_retptr, a slot holding aco_protector_ret: the function sees a normal
 * call frame whose return address is the protector, which reports a co that
 * returned instead of calling aco_exit().
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
    .text
    .p2align 4
    .globl  acosw
    .type   acosw, @function
acosw:
    /* rdi = from, rsi = to */
    .cfi_startproc
#if ACO_IBT
    endbr64
#endif
    popq    %rdx                        /* rdx = from's resume pc; rsp = its sp */
    .cfi_adjust_cfa_offset -8
    .cfi_register %rip, %rdx
    movq    %rdx, ACO_OFF_PC(%rdi)
    movq    %rsp, ACO_OFF_SP(%rdi)
    movq    %rbx, ACO_OFF_RBX(%rdi)
    movq    %rbp, ACO_OFF_RBP(%rdi)
    movq    %r12, ACO_OFF_R12(%rdi)
    movq    %r13, ACO_OFF_R13(%rdi)
    movq    %r14, ACO_OFF_R14(%rdi)
    movq    %r15, ACO_OFF_R15(%rdi)
#ifndef ACO_CONFIG_SHARE_FPU_MXCSR_ENV
    fnstcw  ACO_OFF_FPUCW(%rdi)
    stmxcsr ACO_OFF_MXCSR(%rdi)
    /* fldcw and ldmxcsr are slow (microcoded, serialising): load the words
     * only when the control bits differ.  MXCSR bits 0-5 are exception
     * flags, status not control (scratch at a call): ignore them. */
    movl    ACO_OFF_MXCSR(%rdi), %eax
    xorl    ACO_OFF_MXCSR(%rsi), %eax
    andl    $~0x3f, %eax
    movzwl  ACO_OFF_FPUCW(%rdi), %ecx
    xorw    ACO_OFF_FPUCW(%rsi), %cx
    orl     %ecx, %eax
    jnz     .Lload_env64
.Lenv_done64:
#endif
    movq    ACO_OFF_RBX(%rsi), %rbx
    movq    ACO_OFF_RBP(%rsi), %rbp
    movq    ACO_OFF_R12(%rsi), %r12
    movq    ACO_OFF_R13(%rsi), %r13
    movq    ACO_OFF_R14(%rsi), %r14
    movq    ACO_OFF_R15(%rsi), %r15
    movq    ACO_OFF_PC(%rsi), %rdx
    movq    ACO_OFF_SP(%rsi), %rsp      /* the one instruction that moves stacks */
    /* A resume address is not an IBT landing pad (it follows a call), hence
     * notrack; a new co's pc is a C function, which has its own endbr64. */
#if ACO_IBT
    notrack jmp *%rdx
#else
    jmp     *%rdx
#endif
#ifndef ACO_CONFIG_SHARE_FPU_MXCSR_ENV
.Lload_env64:                           /* off the hot path */
    fldcw   ACO_OFF_FPUCW(%rsi)
    ldmxcsr ACO_OFF_MXCSR(%rsi)
    jmp     .Lenv_done64
#endif
    .cfi_endproc
    .size   acosw, .-acosw

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
    .text
    .p2align 4
    .globl  acosw
    .type   acosw, @function
acosw:
    .cfi_startproc
#if ACO_IBT
    endbr32
#endif
    movl    4(%esp), %eax               /* eax = from */
    movl    8(%esp), %ecx               /* ecx = to */
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
    fnstcw  ACO_OFF_FPUCW(%eax)
    stmxcsr ACO_OFF_MXCSR(%eax)
    /* As on x86-64: load the words only when the control bits differ.
     * ebx and esi are saved already: free to use until loaded below. */
    movl    ACO_OFF_MXCSR(%eax), %ebx
    xorl    ACO_OFF_MXCSR(%ecx), %ebx
    andl    $~0x3f, %ebx
    movzwl  ACO_OFF_FPUCW(%eax), %esi
    xorw    ACO_OFF_FPUCW(%ecx), %si
    orl     %esi, %ebx
    jnz     .Lload_env32
.Lenv_done32:
#endif
    movl    ACO_OFF_EBX(%ecx), %ebx
    movl    ACO_OFF_EBP(%ecx), %ebp
    movl    ACO_OFF_ESI(%ecx), %esi
    movl    ACO_OFF_EDI(%ecx), %edi
    movl    ACO_OFF_PC(%ecx), %edx
    movl    ACO_OFF_SP(%ecx), %esp      /* the one instruction that moves stacks */
#if ACO_IBT
    notrack jmp *%edx
#else
    jmp     *%edx
#endif
#ifndef ACO_CONFIG_SHARE_FPU_MXCSR_ENV
.Lload_env32:                           /* off the hot path */
    fldcw   ACO_OFF_FPUCW(%ecx)
    ldmxcsr ACO_OFF_MXCSR(%ecx)
    jmp     .Lenv_done32
#endif
    .cfi_endproc
    .size   acosw, .-acosw

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
    call    aco__funcp_protector        /* hidden: a direct call, PIC or not */
    ud2
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
#endif /* ACO_ASM_LAYOUT_ONLY */
