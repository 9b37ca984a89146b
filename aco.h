/*
 * aco.h - libaco: asymmetric stackful coroutines for C, with a hand-written
 * context switch.  This header is the manual: the public API comes first,
 * one contract per function; the data types follow; internals come last.
 *
 * Copyright 2026 the libaco authors.  Apache License 2.0 (see LICENSE).
 *
 * ---------------------------------------------------------------------------
 * Model
 *
 *   main co      One per thread: the code that was running on the thread's own
 *                stack when it called aco_create(NULL, NULL, 0, NULL, NULL).
 *   non-main co  Created with a function and a share stack.  aco_resume(co)
 *                runs it until it calls aco_yield() (back to its main co) or
 *                aco_exit() (the end; it never runs again).  Returning from
 *                the co function is a bug: the library aborts loudly.  A
 *                running co may hand off to another with aco_yield_to(co):
 *                co runs at once, and yields back to the main co in turn.
 *   share stack  The execution stack non-main cos run on.  Many cos may share
 *                one.  The co whose frames are on it is its owner; when
 *                another co takes it, the owner's live bytes are copied to the
 *                owner's private save stack first (lazily: only then).  A co
 *                alone on its share stack ("standalone") never copies.
 *
 * Every call below that finds its rules broken (NULL where a pointer is
 * required, resuming an ended co, yielding from a main co, running out of
 * memory ...) prints "aco: <function>: <rule broken>" to stderr and aborts.
 * State is thread-local: each thread runs its own set of cos.
 *
 * Build macros (define them for aco.c, acosw.S and your program alike):
 *   ACO_CONFIG_SHARE_FPU_MXCSR_ENV  undefined by default: every co keeps its
 *       own floating-point control state (x86: x87 control word and MXCSR;
 *       aarch64: FPCR; riscv64: the rounding mode frm), switched with it.
 *       Define it when no code changes them (fesetround, ...) to save a few
 *       ns per switch.  Either way the exception flags (fetestexcept) are
 *       status, not control: across a switch they are unspecified (a co
 *       may find its own from before it yielded, or what another co
 *       raised), so test them between two switches only.
 *   ACO_USE_VALGRIND  undefined by default: define it to run under valgrind
 *       memcheck with zero false reports, shared stacks included (needs
 *       <valgrind/valgrind.h>; costs a little per stack copy).  Misuse of a
 *       destroyed co is a true report there (a read of freed memory) before
 *       libaco's abort: such a build tells memcheck that a destroyed co's
 *       pooled memory is free.
 *
 * Environment: ACO_CHECKED=1 runs the process in checked mode, where a
 * pointer into a suspended co's frames faults at once with a report (see
 * "Checked mode" below).
 *
 * Sanitizers need no macro: compiled with -fsanitize=address or
 * -fsanitize=thread (aco.c and your program alike), libaco announces every
 * switch to the sanitizer and keeps ASan's view of the shared stacks exact
 * (see "Sanitizers" below).  -fsanitize=undefined needs nothing.
 * ---------------------------------------------------------------------------
 */
#ifndef ACO_H
#define ACO_H

/* libaco 1.2.x programs expect these to come with aco.h. */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#ifdef ACO_USE_VALGRIND
#include <valgrind/valgrind.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define ACO_VERSION_MAJOR 1
#define ACO_VERSION_MINOR 2
#define ACO_VERSION_PATCH 4

typedef struct aco_s aco_t;
typedef struct aco_share_stack_s aco_share_stack_t;

/* A co function: takes nothing (use aco_get_arg()), ends with aco_exit(). */
typedef void (*aco_cofuncp_t)(void);

/* ======================================================================== */
/* API                                                                      */
/* ======================================================================== */

/* Upstream libaco 1.2.4's self-check of the build (the layout aco.h and
 * acosw.S agree on, the sizes of the types it relies on).  Here the build
 * checks all of it at compile time, so the call returns and does
 * nothing. */
void aco_runtime_test(void);

/* Initialise libaco for the calling thread; call it once per thread before
 * any other call (the aco_create* calls abort without it; a second call
 * records again what the first did).  Records the thread's current FP
 * control state (x87 control word and MXCSR, FPCR, frm): new cos start
 * with it.  last_word_co_fp, if not NULL, is called (on the offending co,
 * so aco_get_co() works) when a co function returns instead of calling
 * aco_exit(); when it returns, the process aborts.  (One that calls
 * aco_exit() itself ends the co as aco_exit() does; one that yields returns
 * to the resumer, and the abort comes when the co is resumed.) */
void aco_thread_init(aco_cofuncp_t last_word_co_fp);

/* aco_share_stack_new2(sz, 1). */
aco_share_stack_t* aco_share_stack_new(size_t sz);

/* A new share stack.  sz is a hint in bytes, 0 meaning 2 MiB.  The usable
 * size is >= 4096, >= sz, a multiple of 16 (of the page size when
 * guard_page_enabled is non-zero), and as close to sz as that allows; any
 * size the address space and memory allow (a stack with a guard page is
 * mapped, its pages committed as the cos touch them; one without comes from
 * the allocator, whose limits apply, except in checked mode).  With a guard
 * page, an inaccessible region of 1 MiB and a page sits right below the
 * stack, so an overflow that reaches it faults (SIGSEGV) instead of
 * corrupting memory (aco_overflow_report_install names the co): also a
 * single large frame, built with the compiler's default flags, whose
 * lowest byte lies up to 1 MiB below the stack.  A frame that jumps
 * further is caught only where the program is built with
 * -fstack-clash-protection (gcc on x86-64, i386 and aarch64, clang on
 * x86-64 and i386), which makes frames touch their pages in order; the
 * region costs address space only (1 MiB and a page a stack, never
 * committed, made by the stack's own mmap; the kernel lists it as an area
 * of its own).  Never returns NULL.
 * A share stack belongs to the thread whose co was first created on it; it
 * passes to another thread only when no co uses it any more (every co on it
 * destroyed): then the next aco_create on it, from any thread, claims it. */
aco_share_stack_t* aco_share_stack_new2(size_t sz, char guard_page_enabled);

/* aco_share_stack_new2, but NULL with errno ENOMEM when memory or the
 * address space runs out (not an abort). */
aco_share_stack_t* aco_share_stack_try_new2(size_t sz, char guard_page_enabled);

/* Free a share stack.  Every co created on it must have been destroyed. */
void aco_share_stack_destroy(aco_share_stack_t* sstk);

/* Create a co.  Never returns NULL.
 *   aco_create(NULL, NULL, 0, NULL, NULL) creates the calling thread's main
 *   co (arg may be anything; it is stored in co->arg; save_stack_sz is
 *   ignored).  A thread has one main co at a time: one made while another
 *   exists takes its place, and the cos of the old one can no longer run
 *   (nor can the old one be destroyed): destroy the old one first.
 *   Otherwise main_co is the thread's main co (aco_yield() returns to it),
 *   share_stack the stack to run on, save_stack_sz the initial size of the
 *   private save stack (0: none until the co's frames are first copied out,
 *   then exactly what they need; it grows to fit on demand; more than
 *   4 GiB - 8 aborts), fp the co function and arg its argument
 *   (aco_get_arg()).  The new co is in the "init" state: its first
 *   aco_resume() calls fp. */
aco_t* aco_create(aco_t* main_co, aco_share_stack_t* share_stack,
                  size_t save_stack_sz, aco_cofuncp_t fp, void* arg);

/* Bytes aco_create_in() needs for a co whose save stack holds save_sz bytes
 * of frames (at most 4 GiB - 8), in this build (the co object, a multiple of
 * 16, and the save stack; a sanitizer's state too).  aco_co_size(0): the co
 * object alone, the least aco_create_in() takes. */
size_t aco_co_size(size_t save_sz);

/* aco_create(main_co, share_stack, 0, fp, arg) in the caller's memory: mem,
 * 16-byte aligned, sz >= aco_co_size(0) bytes.  The co object takes the
 * first aco_co_size(0) bytes and the rest is its save stack (sz =
 * aco_co_size(n): one for n bytes of frames), so a co whose frames fit is
 * made and run without any allocation (frames that outgrow it get a save
 * stack of libaco's, as a co of aco_create's does, and the room in mem
 * stays unused from then on; so does room past aco_co_size(4 GiB - 8)).
 * With the caller's own data beside it this is one allocation per co.  mem
 * must stay where it is, untouched by the program, until aco_destroy(co);
 * that frees only what libaco allocated for co, and mem is the caller's
 * again (to free, or to make another co in).
 * Only non-main cos.  Returns mem, as the co. */
aco_t* aco_create_in(void* mem, size_t sz, aco_t* main_co, aco_share_stack_t* share_stack,
                     aco_cofuncp_t fp, void* arg);

/* aco_create(NULL, NULL, 0, NULL, arg), the calling thread's main co, in
 * the caller's memory: mem, 16-byte aligned, sz >= aco_co_size(0) bytes
 * (nothing is allocated: no abort).  aco_destroy(co) leaves mem to the
 * caller.  Returns mem, as the co. */
aco_t* aco_create_main_in(void* mem, size_t sz, void* arg);

/* What aco_resume(co), or aco_yield_to(co) from the calling co, may
 * allocate, now, without aborting: when co's share stack holds another co's
 * frames that outgrew that co's save stack, the save stack grows.  co is a
 * non-main co (a main co, NULL or a destroyed co aborts); the caller is its
 * main co (before aco_resume) or a co of it (before aco_yield_to): another
 * thread's aborts.  Called
 * by a non-main co about to hand off to co: if the caller itself owns co's
 * share stack, its frames are measured from the caller's frame with 512
 * bytes to spare (frames deeper than that at the hand-off can still need an
 * allocation), and the thread's hand-off co (see aco_yield_to) is made if
 * the hand-off will need it.  0 (also for an ended co, or the caller
 * itself: nothing to reserve), or -1 with errno ENOMEM (nothing changed).
 * Until another co of the thread runs, aco_resume(co) (aco_yield_to(co))
 * then allocates nothing. */
int aco_resume_reserve(aco_t* co);

/* Run co (start it, or continue it after its aco_yield()) until it yields or
 * exits.  The caller must be co->main_co; co must be a non-main co that has
 * not ended.  If co hands off with aco_yield_to, aco_resume returns when the
 * co it handed off to (or the last of a chain of hand-offs) yields or exits:
 * aco_resume_last tells which. */
void aco_resume(aco_t* co);

/* aco_resume(co), returning the co that yielded or exited back to the
 * caller: co itself, unless co handed off (aco_yield_to).  Its misuse
 * aborts as aco_resume's does, naming aco_resume_last. */
aco_t* aco_resume_last(aco_t* co);

/* Suspend the calling non-main co and continue its main co. */
void aco_yield(void);

/* A direct hand-off: suspend the calling non-main co and run co at once, as
 * if the caller had yielded and its main co had then called aco_resume(co),
 * without going through the main co: one switch instead of two.  co is
 * started, or continued after its aco_yield() or aco_yield_to(); it must be
 * a non-main co of the caller's main co that has not ended, not the caller.
 * co's aco_yield() (or aco_exit()) goes back to the main co, whose
 * aco_resume returns then: libaco stays asymmetric.  co == the caller's main
 * co is aco_yield().  The share-stack rules are aco_resume's: if co's share
 * stack holds another co's frames they are saved; if it holds the caller's
 * own (the two share a stack) the caller's live frames are saved and co's
 * restored by a small hand-off co of the thread (its own 64 KiB stack,
 * mapped at the first such hand-off and freed with the main co; in checked
 * mode every hand-off goes through it); save stacks grow as aco_resume's
 * do (aco_resume_reserve).  Misuse aborts naming aco_yield_to. */
void aco_yield_to(aco_t* co);

/* aco_yield() where the caller names itself: co must be the running co. */
#define aco_yield1(co) aco__yield1((co), "aco_yield1")

/* The running co (in a co function or a last-word function). */
aco_t* aco_get_co(void);

/* aco_get_co(). */
#define aco_co() aco_get_co()

/* aco_get_co()->arg. */
void* aco_get_arg(void);

/* End the calling non-main co: set co->is_end to 1 and yield for good. */
void aco_exit(void);    /* not declared noreturn: gcc would then predict
                           every co function, which ends in it, cold */

/* aco_exit() where the caller names itself: co must be the running co. */
#define aco_exit1(co) aco__exit1(co)

/* Free co and its save stack: a non-main co that is not running (in any
 * other state), from its own thread; or the calling thread's main co, while
 * no co of it runs.  A main co's other cos outlive it, to be destroyed
 * (before or after the thread makes a new main co; the cos of the last 8
 * main cos the thread destroyed); none of them may be resumed again
 * (aco_resume tells a co's main co by its address: it aborts while no
 * other co has the destroyed main co's memory, and is undefined once one
 * has, as a new main co of the thread often does).
 * Destroying something that is not a co aborts, and so does destroying a
 * co twice while its memory is still libaco's; after a wave of destroys
 * a pool gives whole slabs back to the system (docs/memory.md), and a
 * second destroy of a co that was on one then faults, as a second free()
 * of a block a heap gave back may. */
void aco_destroy(aco_t* co);

/* Put a non-main co back into the "init" state, keeping its memory: the next
 * aco_resume(co) calls co->fp from the top again, on the same share stack,
 * with the FP control state aco_thread_init() captured, as if co had just
 * been created.  Call it from co's thread (its main co or another co of it);
 * co must not be running (a co cannot reset itself).
 *   ended co      the main use: a pool of cos that are reused instead of
 *                 destroyed and created again.
 *   suspended co  its frames are discarded without running any more of its
 *                 code (whatever only they pointed to is lost).  If it owned
 *                 its share stack it stops owning it: nothing of it is saved
 *                 when another co takes the stack.
 *   init co       nothing changes.
 * Kept: main_co, share_stack, fp, arg, the save stack's buffer, and the
 * statistics (save_stack.max_cpsz, ct_save, ct_restore count over the
 * object's whole life).  A main co cannot be reset. */
void aco_reset(aco_t* co);

/* aco_reset(co), then co runs fp (not NULL) with arg from now on. */
void aco_reset2(aco_t* co, aco_cofuncp_t fp, void* arg);

/* Non-zero if co (not NULL) is a main co. */
#define aco_is_main_co(co) aco__is_main_co(co)

/* Opt-in (a library does not take SIGSEGV by itself): from now on a co that
 * overflows into the guard page of its share stack makes the process print
 * "aco: co <co> overflowed its share stack <stack> [lo, hi) ..." before it
 * dies of the SIGSEGV as it would have anyway.  Installs a SIGSEGV handler
 * (any previous one is called for faults that are not such an overflow) and
 * gives the calling thread, and every thread calling aco_thread_init()
 * afterwards, an alternate signal stack to run it on.  Call it once, from
 * the main thread, before creating threads; calling it again does nothing. */
void aco_overflow_report_install(void);

/* Checked mode (see "Checked mode" below): non-zero when this process runs
 * in it.  Decided once, by the environment variable ACO_CHECKED, at the
 * first aco_thread_init(), aco_share_stack_new*(), aco_co_size() or
 * aco_checked() call of the process, whichever comes first; the same every
 * call after that. */
int aco_checked(void);

/* Non-zero if any of the n bytes at p (n == 0: the byte at p) lie where co
 * keeps its frames when it runs: its share stack's [ptr, ptr + sz), the
 * same addresses for every co of that stack; in checked mode (below) co's
 * own window only, so that another co's locals are not on co's stack
 * there.  0 for a main co, for co == NULL and for p == NULL.  The
 * runtime's test for "this buffer is on a share stack". */
int aco_on_share_stack(const aco_t* co, const void* p, size_t n);

/* In checked mode: if any of the n bytes at p (n == 0: the byte at p, as
 * aco_on_share_stack) lie on the stack of a co that is suspended (so that a
 * touch would fault, below), report it as an escape by the calling
 * thread's running co, as if it had touched them ("handed
 * on for writing" when write is non-zero, "for reading" else), and die of
 * SIGSEGV.  Otherwise, and outside checked mode, nothing.  For code that
 * hands memory to the kernel or to another thread, where an escape would
 * not fault: a system call given such memory fails with EFAULT instead. */
void aco_checked_access(const void* p, size_t n, int write);

/* The program's allocator for everything libaco allocates: co objects,
 * save stacks, share stack records and share stacks without a guard page
 * (a guard page needs a mapping of its own: those stay mmap'd).  Each call
 * gets cookie; free gets the size that was asked for.  Then libaco's own
 * pools are not used: every co object and save stack is an allocation of
 * the program's.  Call it before libaco allocates anything (before the
 * first aco_thread_init's co, share stack or co), at most once, with both
 * functions (or both NULL: no change); alloc must return memory aligned
 * to 16 bytes, or NULL (libaco then aborts, naming the size). */
void aco_set_allocator(void* (*alloc)(void* cookie, size_t sz),
                       void (*free)(void* cookie, void* p, size_t sz), void* cookie);

/* sz (not 0) bytes, 16-byte aligned, from libaco's allocator: the program's
 * (aco_set_allocator) or malloc; NULL when out of memory (not an abort: the
 * caller decides).  For memory kept per co beside libaco's, such as
 * aco_create_in's, so that it all comes from the one allocator.  aco_free(p,
 * sz) gives it back, with the size that was asked for. */
void* aco_alloc(size_t sz);
void aco_free(void* p, size_t sz);

/* Branch hints and an assert that is never compiled out and says what
 * failed.  aco_assert_override.h maps likely/unlikely/assert/... to these. */
#define aco_likely(x)   (__builtin_expect(!!(x), 1))
#define aco_unlikely(x) (__builtin_expect(!!(x), 0))

/* Abort with "aco: assertion failed", the expression, file and line,
 * unless EX holds (never compiled out: NDEBUG changes nothing). */
#define aco_assert(EX)                                                        \
    (aco_likely(EX) ? (void)0                                                 \
                    : (fprintf(stderr, "aco: assertion failed: %s at %s:%d\n", \
                               #EX, __FILE__, __LINE__),                      \
                       abort()))

/* aco_assert((ptr) != NULL). */
#define aco_assertptr(ptr) aco_assert((ptr) != NULL)

/* Abort with "aco: out of memory", the expression, file and line, unless
 * b holds. */
#define aco_assertalloc_bool(b)                                               \
    do {                                                                      \
        if (aco_unlikely(!(b))) {                                             \
            fprintf(stderr, "aco: out of memory: %s at %s:%d\n", #b,          \
                    __FILE__, __LINE__);                                      \
            abort();                                                          \
        }                                                                     \
    } while (0)

/* aco_assertalloc_bool((ptr) != NULL). */
#define aco_assertalloc_ptr(ptr) aco_assertalloc_bool((ptr) != NULL)

/* p = malloc(sz), aborting with a message naming p, file and line if the
 * allocation fails: `aco_new(buf, n * sizeof(*buf));`.  An expression of p's
 * type (the new pointer); p is evaluated once, sz once.  sz must not be 0
 * (malloc(0) may return NULL). */
#define aco_new(p, sz)                                                        \
    ((p) = (__typeof__(p))aco__new_checked((sz), #p, __FILE__, __LINE__))

static inline void* aco__new_checked(size_t sz, const char* what,
                                     const char* file, int line) {
    void* p = malloc(sz);
    if (aco_unlikely(p == NULL)) {
        fprintf(stderr, "aco: out of memory: aco_new(%s, %zu) at %s:%d\n",
                what, sz, file, line);
        abort();
    }
    return p;
}

/* ======================================================================== */
/* Upstream libaco 1.2.4's other names, with their meaning there            */
/* ======================================================================== */

/* A function attribute: no AddressSanitizer instrumentation (under ASan). */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define aco_attr_no_asan __attribute__((__no_sanitize_address__))
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(aco_attr_no_asan)
#define aco_attr_no_asan __attribute__((__no_sanitize_address__))
#endif
#ifndef aco_attr_no_asan
#define aco_attr_no_asan
#endif

/* Store the calling thread's FP control state at p: x86 the x87 control word
 * (16 bits) at p and MXCSR (32 bits) at p + 4, the layout of aco_t's
 * reg_fpucw/reg_mxcsr; aarch64 FPCR (64 bits); riscv64 frm (64 bits). */
void aco_save_fpucw_mxcsr(void* p) __asm__("aco_save_fpucw_mxcsr");

/* Where a co function that returns lands (acosw.S's aco_protector), and the
 * function it calls: it calls the last word (aco_thread_init) and aborts. */
void aco_funcp_protector_asm(void) __asm__("aco_funcp_protector_asm");
void aco_funcp_protector(void) __attribute__((noreturn));

/* Indices into aco_t.reg of a suspended co: its resume address, its stack
 * pointer, its frame pointer (rbp / ebp; aarch64 x29, riscv64 s0); FPU: the
 * index at which its FP control state starts (one past the last register on
 * x86, as upstream; aco.c checks them against acosw.S's layout). */
#if defined(__x86_64__)
#define ACO_REG_IDX_RETADDR 6
#define ACO_REG_IDX_SP      7
#define ACO_REG_IDX_BP      1
#define ACO_REG_IDX_FPU     8
#elif defined(__i386__)
#define ACO_REG_IDX_RETADDR 4
#define ACO_REG_IDX_SP      5
#define ACO_REG_IDX_BP      1
#define ACO_REG_IDX_FPU     6
#elif defined(__aarch64__)
#define ACO_REG_IDX_RETADDR 13
#define ACO_REG_IDX_SP      12
#define ACO_REG_IDX_BP      10
#define ACO_REG_IDX_FPU     22
#else
#define ACO_REG_IDX_RETADDR 14
#define ACO_REG_IDX_SP      13
#define ACO_REG_IDX_BP      0
#define ACO_REG_IDX_FPU     27
#endif

/* ======================================================================== */
/* Checked mode: a pointer into another co's frames faults at once.         */
/*                                                                          */
/* A share stack's one danger: a pointer to a co's local, used while the co */
/* is suspended, reads or writes whatever frames are on the stack then:     */
/* another co's, silently (the bytes are valid memory; only their owner     */
/* changed).  Run a program with ACO_CHECKED=1 in its environment (any      */
/* other value, or none: off) and such an access faults on its instruction, */
/* with a report, instead:                                                  */
/*                                                                          */
/*   - Each non-main co runs on its own view of its share stack: a range of */
/*     addresses of its own (a "window"), the share stack's size, guard     */
/*     page included.  The stack's memory moves (mremap) to the window of   */
/*     the co that takes it, so the copy semantics are libaco's as ever:    */
/*     lazy saves, the same copies, the same statistics (ct_save, ...).     */
/*   - A co's window is accessible while it runs.  It is inaccessible      */
/*     (PROT_NONE: any read or write through a pointer into it, by any co   */
/*     or thread, is a SIGSEGV) once the co ended, once another co took the */
/*     stack, and while the co is suspended (yielded, or reset, or not      */
/*     started) with other cos on its share stack (share_stack->co_ct > 1,  */
/*     as it is now: creating or destroying a co there closes or reopens    */
/*     it).  A co alone on its share stack keeps its window while suspended */
/*     (nothing else can run there: its frames stay valid, as libaco has    */
/*     always promised).                                                    */
/*   - The fault prints, with the write(2) system call itself (not a        */
/*     write() the program interposes), lines starting "aco: checked:"      */
/*     naming: the co that made the access (or "main co", or "a thread with */
/*     no co") and its frame (function, file:line when the program has      */
/*     debug information and addr2line is installed, else the pc); the co   */
/*     whose window it is, that it is suspended (or ended, or not started), */
/*     and the frame of its that the address lies in (the same way); the    */
/*     address and whether it was a read or a write where the machine tells */
/*     it (x86: always; aarch64: where the kernel passes ESR; else          */
/*     "access").  Then the process dies of that SIGSEGV (under gdb it      */
/*     stops first, in the offending frame).  A guard-page fault of the     */
/*     running co prints aco_overflow_report_install's line if that was     */
/*     installed, and nothing else.  The report is libaco's SIGSEGV handler */
/*     (installed with the mode; faults not in a window go to the handler   */
/*     before it): a handler the program installs later must hand the      */
/*     faults it does not know on to the one it replaced.                   */
/*   - Pointers into a co's frames from the co itself, into a main co's     */
/*     stack, into the heap: unaffected.                                    */
/*                                                                          */
/* Costs (checked mode only; a process without ACO_CHECKED=1 runs exactly   */
/* the default code, its switch's fast path untouched): aco_co_size() is at */
/* most 16 bytes more (the window's record, after the aco_t); a window of    */
/* address space per co (no memory: 3 MiB + a page for the default 2 MiB   */
/* stack and its guard of 1 MiB + a page)                                   */
/* and one or two memory mappings of the kernel's per-process limit          */
/* (vm.max_map_count, 65530 by default: about 30000 cos that have run; past */
/* it aco_create or aco_resume aborts naming it, aco_resume_reserve's 0     */
/* notwithstanding); every resume of a co whose stack is shared takes the   */
/* slow path, with one mprotect before the switch and one after it returns, */
/* plus an mremap when the stack changes hands; an ended or reset co's     */
/* window stays reserved until aco_destroy.  Share stacks are always page-  */
/* aligned mappings in checked mode (a stack without a guard page too: it   */
/* does not come from aco_set_allocator's allocator then).                  */
/*                                                                          */
/* What it cannot catch: an access while the owner runs (another thread     */
/* touching a running co's frames); the kernel: a system call or io_uring   */
/* request that reaches a suspended co's window fails with EFAULT instead   */
/* of writing (no signal: aco_checked_access lets code that hands memory on */
/* report it first); a pointer kept past aco_destroy (the window's          */
/* addresses may be reused); a co alone on its stack (see above).           */
/* The share stack's ptr, align_highptr and align_retptr follow its pages: */
/* they are its addresses in the window of the co that last took it (a     */
/* place of the library's own before any co did, and again once that co is  */
/* destroyed).  So while a co runs they describe its frames, as ever; for   */
/* any co at any time, ask aco_on_share_stack().                            */
/*                                                                          */
/* With the tools: gdb and tools/aco_gdb.py work (a co's saved registers    */
/* are addresses in its window).  UBSan and TSan combine with it.  ASan and */
/* ACO_USE_VALGRIND builds ignore ACO_CHECKED, saying so once on stderr:    */
/* both keep state of their own per stack address (ASan's shadow, which    */
/* libaco moves with the frames; valgrind's registered stacks) that the     */
/* windows would have to follow.  Supported on x86-64, i386, aarch64 and    */
/* riscv64 Linux (mremap); i386's address space holds only about 1300     */
/* windows for the default 2 MiB stack.                                     */
/* ======================================================================== */

/* ======================================================================== */
/* Sanitizers                                                               */
/*                                                                          */
/* Compile aco.c and the program with the same -fsanitize= flags.  Under    */
/* ASan or TSan every switch is announced (ASan: start/finish_switch_fiber, */
/* one fake stack per co; TSan: one fiber per co), from uninstrumented code */
/* in aco.c, and under ASan a co's red zones travel with its frames when    */
/* they are copied out and back.  This costs a call per switch in those     */
/* builds only.  Each switch runs the sanitizer's runtime on the co's stack:*/
/* leave it a few KiB more.  With detect_stack_use_after_return=1 a co's   */
/* locals may live on its ASan fake stack, which is freed when the co       */
/* exits (a co destroyed or reset while suspended leaves it to the          */
/* process).  Detection: __SANITIZE_ADDRESS__ / __SANITIZE_THREAD__ (gcc),  */
/* __has_feature(...) (clang).  The macros below are internal.  aco_t and   */
/* aco_share_stack_t are the same in every build (the sanitizers' per-co    */
/* state lives after the aco_t, in the same allocation), so a library and a */
/* program built with different flags agree on them.                        */
/* ======================================================================== */

#if defined(__SANITIZE_ADDRESS__)
#define aco__asan 1
#endif
#if defined(__SANITIZE_THREAD__)
#define aco__tsan 1
#endif
#if defined(__has_feature)
#if __has_feature(address_sanitizer) && !defined(aco__asan)
#define aco__asan 1
#endif
#if __has_feature(thread_sanitizer) && !defined(aco__tsan)
#define aco__tsan 1
#endif
#endif
#ifndef aco__asan
#define aco__asan 0
#endif
#ifndef aco__tsan
#define aco__tsan 0
#endif
/* Non-zero when switches must be announced to a sanitizer. */
#define aco__san_switch (aco__asan || aco__tsan)

/* ======================================================================== */
/* Data types.  Fields marked (read) may be read by programs; the library   */
/* owns every field, so never write one.                                    */
/* ======================================================================== */

typedef struct {
    void*    ptr;       /* buffer holding the co's frames while evicted */
    uint32_t sz;        /* its capacity in bytes, a multiple of 8, with two
                           flags of aco.c's in the low bits */
    uint32_t valid_sz;  /* bytes of it in use */
    size_t   max_cpsz;  /* (read) the largest copy so far, in bytes */
    size_t   ct_save;   /* (read) copies share stack -> save stack */
    size_t   ct_restore; /* (read) copies save stack -> share stack */
} aco_save_stack_t;

struct aco_share_stack_s {
    void*  ptr;             /* (read) lowest usable byte (checked mode: where
                               the stack is now, see there) */
    size_t sz;              /* (read) usable bytes */
    void*  align_highptr;   /* 16-byte aligned top of the used area */
    void*  align_retptr;    /* a new co's sp, the top of live bytes: x86 the
                               slot below highptr holding the protector's
                               address; aarch64, riscv64 highptr itself */
    size_t align_validsz;   /* always 0: upstream's, which it wrote and
                               never read; kept so that its programs build */
    size_t align_limit;     /* bytes a co may have live at a switch */
    aco_t* owner;           /* (read) co whose frames are on the stack */
    char   guard_page_enabled; /* (read) */
    void*  real_ptr;        /* the whole mapping / allocation */
    size_t real_sz;
    size_t co_ct;           /* non-main cos created on it, not destroyed */
    const void* thread;     /* the thread it belongs to (an address unique to
                               each live thread), NULL while no co uses it */
    unsigned long valgrind_stk_id; /* ACO_USE_VALGRIND builds: valgrind's
                               id of the stack */
};

/* Saved registers of a suspended co; the layout is acosw.S's, see there.
 * Packed so that a co is 144 bytes on x86-64 (72 on i386; 256 on aarch64,
 * 296 on riscv64). */
#if defined(__x86_64__)
#define ACO_REG_COUNT 8     /* rbx rbp r12-r15, pc, sp */
#elif defined(__i386__)
#define ACO_REG_COUNT 6     /* ebx ebp esi edi, pc, sp */
#elif defined(__aarch64__)
#define ACO_REG_COUNT 22    /* x19-x28, x29, lr, sp, pc, d8-d15 */
#elif defined(__riscv) && __riscv_xlen == 64
#define ACO_REG_COUNT 27    /* s0-s11, lr, sp, pc, fs0-fs11 */
#else
#error "libaco: unsupported architecture"
#endif

struct aco_s {
    void*    reg[ACO_REG_COUNT];    /* acosw.S's slots; must stay first */
#if defined(__x86_64__) || defined(__i386__)
    uint16_t reg_fpucw;             /* acosw.S: x87 control word */
    char     is_end;                /* (read) 1 once the co called aco_exit */
    unsigned char state;            /* private: aco__state_on, aco__state_off,
                                       aco__state_dead (below) */
    uint32_t reg_mxcsr;             /* acosw.S: MXCSR */
#else
    uint32_t reg_fpctl;             /* acosw.S: FPCR (aarch64), frm (riscv64) */
    char     is_end;                /* (read) 1 once the co called aco_exit */
    unsigned char state;            /* private: as on x86 */
    char     reserved_[2];
#endif
    aco_t*   main_co;               /* (read) NULL for a main co */
    void*    arg;                   /* (read) */
    aco_cofuncp_t fp;               /* (read) */
    aco_share_stack_t* share_stack; /* (read) NULL for a main co */
    aco_save_stack_t   save_stack;  /* (read) statistics, see above */
};

/* ======================================================================== */
/* Internals (not API)                                                      */
/* ======================================================================== */

/* Save the callee-saved state of from_co, load to_co's and continue it
 * (acosw.S).  Returns in from_co when something switches back to it, with
 * the co that did. */
aco_t* acosw(aco_t* from_co, aco_t* to_co) __asm__("acosw");

/* acosw again, at an address of its own on x86 (acosw.S): the way back to
 * the main co, which aco_yield and aco_exit take. */
aco_t* aco__yieldsw(aco_t* from_co, aco_t* to_co) __asm__("aco__yieldsw");

/* And a third, aco_yield_to's (aco.c's alone: hidden), which returns
 * where the two cos stopped at the same call (acosw.S, ACO_GO64). */
aco_t* aco__handsw(aco_t* from_co, aco_t* to_co) __asm__("aco__handsw")
    __attribute__((visibility("hidden")));

/* The running co of this thread (between runs: its main co). */
extern __thread aco_t* aco_gtls_co __attribute__((tls_model("initial-exec")));

/* The out-of-line half of the inline aco_yield below (aco.c). */
void aco__yield_misuse(const char* fn) __attribute__((noreturn, cold));

/* aco_t.state, next to is_end: aco_resume reads both as one 16-bit word and
 * takes its fast path when that is (aco__state_on << 8): not ended, owning
 * its share stack.  Any value but these three means that the object is not a
 * co (aco_create never returned it, or it was overwritten). */
#define aco__state_off  0x5a    /* live; its frames are not on its share stack */
#define aco__state_on   0xa5    /* live; it owns its share stack */
#define aco__state_dead 0xdd    /* aco_destroy'ed */

void aco__not_a_co(const char* fn, const aco_t* co) __attribute__((noreturn, cold));

static inline int aco__is_main_co(const aco_t* co) {
    if (aco_unlikely(co == NULL)) aco__not_a_co("aco_is_main_co", co);
    return co->main_co == NULL;
}

void aco__yield1(aco_t* co, const char* fn);
void aco__exit1(aco_t* co);     /* no noreturn: see aco_exit */

/* The switches the library and aco_yield call: aco__sw, aco__sw_back for
 * the way back to the main co, aco__sw_hand from co to co.  Sanitizer
 * builds call aco.c's uninstrumented aco__switch for all three: it
 * announces the switch to ASan or TSan, calls acosw, and finishes the
 * announcement on the other side.  Other builds call acosw, aco__yieldsw
 * and aco__handsw directly. */
#if aco__san_switch
aco_t* aco__switch(aco_t* from_co, aco_t* to_co);
#define aco__sw aco__switch
#define aco__sw_back aco__switch
#define aco__sw_hand aco__switch
#else
#define aco__sw acosw
#define aco__sw_back aco__yieldsw
#define aco__sw_hand aco__handsw
#endif

/* aco_yield is inlined into the co's code so that acosw continues the co
 * right there: an out-of-line function would return through a return-stack-
 * buffer entry the other side pushed, a mispredicted branch on every switch.
 * (aco_resume needs no inlining: it ends in a tail jump to acosw, so the main
 * co continues directly in aco_resume's caller.)  The real aco_yield exists
 * too, for function pointers and other languages. */
static inline void aco__yield_inline(void) {
    aco_t* co = aco_gtls_co;
    if (aco_unlikely(co == NULL || co->main_co == NULL))
        aco__yield_misuse("aco_yield");
    aco_gtls_co = co->main_co;
    aco__sw_back(co, co->main_co);
}

#define aco_yield() aco__yield_inline()

#ifdef __cplusplus
}
#endif

#endif /* ACO_H */
