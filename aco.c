/*
 * aco.c - libaco's core: cos, share stacks and the lazy save/restore.
 *
 * Copyright 2026 the libaco authors.  Apache License 2.0 (see LICENSE).
 *
 * Read it top to bottom:
 *   1. Layout         aco.h's aco_t against acosw.S's tables
 *   2. Thread state   the running co; the FP control state new cos start with
 *   3. Errors         name the function and the rule broken, then abort
 *   4. Tool hooks     what the core tells valgrind, ASan and TSan (one line
 *                     each; bodies in section 11, empty without the tool)
 *   5. Share stacks
 *   6. Pools          co objects and small save stacks
 *   7. Create
 *   8. Copy engine    who owns a share stack; save, restore, take
 *   9. Resume, yield
 *  10. Exit, reset, destroy
 *  11. Tool glue      valgrind, ASan, TSan
 *  12. Checked mode   each co on a window of its own (aco.h, "Checked mode")
 */
/* MAP_ANONYMOUS and friends under strict -std=c11 too; mremap, dladdr and
 * the signal context's registers for checked mode (section 12). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "aco.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>

/* ======================================================================== */
/* 1. Layout                                                                */
/* ======================================================================== */

/* acosw.S's layout table is the single source; check aco.h against it. */
#define ACO_ASM_LAYOUT_ONLY
#include "acosw.S"
#undef ACO_ASM_LAYOUT_ONLY

#define SLOT(off) ((off) / sizeof(void*))

/* Which aco_t.reg slot holds what.  The named registers are the callee-saved
 * integer ones a debugger needs for a backtrace: tools/aco_gdb.py reads
 * this enum from the debug information (gdb register = name after "slot_"). */
enum aco__slot {
    aco__slot_pc = SLOT(ACO_OFF_PC),
    aco__slot_sp = SLOT(ACO_OFF_SP),
#if defined(__x86_64__)
    aco__slot_rbx = SLOT(ACO_OFF_RBX), aco__slot_rbp = SLOT(ACO_OFF_RBP),
    aco__slot_r12 = SLOT(ACO_OFF_R12), aco__slot_r13 = SLOT(ACO_OFF_R13),
    aco__slot_r14 = SLOT(ACO_OFF_R14), aco__slot_r15 = SLOT(ACO_OFF_R15),
#elif defined(__i386__)
    aco__slot_ebx = SLOT(ACO_OFF_EBX), aco__slot_ebp = SLOT(ACO_OFF_EBP),
    aco__slot_esi = SLOT(ACO_OFF_ESI), aco__slot_edi = SLOT(ACO_OFF_EDI),
#elif defined(__aarch64__)
    /* x19-x28 in pairs from ACO_OFF_X19 (stp), then x29 and x30 (lr) */
    aco__slot_x19 = SLOT(ACO_OFF_X19), aco__slot_x20, aco__slot_x21,
    aco__slot_x22, aco__slot_x23, aco__slot_x24, aco__slot_x25,
    aco__slot_x26, aco__slot_x27, aco__slot_x28,
    aco__slot_x29 = SLOT(ACO_OFF_FP), aco__slot_x30 = SLOT(ACO_OFF_LR),
    aco__slot_lr = SLOT(ACO_OFF_LR),
#else
    /* s0-s11 one slot each from ACO_OFF_S0, then ra (lr) */
    aco__slot_s0 = SLOT(ACO_OFF_S0), aco__slot_s1, aco__slot_s2, aco__slot_s3,
    aco__slot_s4, aco__slot_s5, aco__slot_s6, aco__slot_s7, aco__slot_s8,
    aco__slot_s9, aco__slot_s10, aco__slot_s11,
    aco__slot_ra = SLOT(ACO_OFF_LR), aco__slot_lr = SLOT(ACO_OFF_LR),
#endif
};

#if defined(__aarch64__)
_Static_assert(aco__slot_x21 == SLOT(ACO_OFF_X21) && aco__slot_x23 == SLOT(ACO_OFF_X23) &&
               aco__slot_x25 == SLOT(ACO_OFF_X25) && aco__slot_x27 == SLOT(ACO_OFF_X27) &&
               aco__slot_x28 + 1 == aco__slot_x29, "x19-x29 disagree with acosw.S");
#elif defined(__riscv)
_Static_assert(aco__slot_s11 + 1 == aco__slot_ra, "s0-s11 disagree with acosw.S");
#endif

#define PC(co) ((co)->reg[aco__slot_pc])
#define SP(co) ((co)->reg[aco__slot_sp])

_Static_assert(offsetof(aco_t, reg) == 0, "acosw.S addresses aco_t.reg at 0");
_Static_assert(sizeof(((aco_t*)0)->reg) == ACO_REG_SLOTS * sizeof(void*),
               "aco.h ACO_REG_COUNT disagrees with acosw.S's layout");
_Static_assert(ACO_OFF_PC % sizeof(void*) == 0 && SLOT(ACO_OFF_PC) < ACO_REG_SLOTS &&
               ACO_OFF_SP % sizeof(void*) == 0 && SLOT(ACO_OFF_SP) < ACO_REG_SLOTS,
               "pc and sp must be whole reg[] slots");
#if defined(__x86_64__) || defined(__i386__)
_Static_assert(offsetof(aco_t, reg_fpucw) == ACO_OFF_FPUCW &&
               offsetof(aco_t, reg_mxcsr) == ACO_OFF_MXCSR,
               "control-word slots disagree with acosw.S's layout");
_Static_assert(offsetof(aco_t, is_end) == ACO_OFF_FPUCW + 2,
               "is_end lives in the two bytes acosw.S never writes");
#elif defined(__aarch64__)
_Static_assert(offsetof(aco_t, reg_fpctl) == ACO_OFF_FPCR, "FPCR slot disagrees");
#else
_Static_assert(offsetof(aco_t, reg_fpctl) == ACO_OFF_FRM, "frm slot disagrees");
#endif
#ifdef ACO_OFF_LR
_Static_assert(ACO_OFF_LR % sizeof(void*) == 0 && SLOT(ACO_OFF_LR) < ACO_REG_SLOTS,
               "lr must be a whole reg[] slot");
#endif
/* aco_resume tests is_end and state with one 16-bit load (little-endian:
 * is_end is its low byte). */
_Static_assert(offsetof(aco_t, state) == offsetof(aco_t, is_end) + 1,
               "aco_t.state must follow is_end");
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "little-endian only");
/* Upstream's names for the slots (aco.h). */
_Static_assert(ACO_REG_IDX_RETADDR == aco__slot_pc && ACO_REG_IDX_SP == aco__slot_sp,
               "ACO_REG_IDX_RETADDR/SP disagree with acosw.S");
#if defined(__x86_64__)
_Static_assert(ACO_REG_IDX_BP == aco__slot_rbp && ACO_REG_IDX_FPU == SLOT(ACO_OFF_FPUCW),
               "ACO_REG_IDX_BP/FPU disagree with acosw.S");
#elif defined(__i386__)
_Static_assert(ACO_REG_IDX_BP == aco__slot_ebp && ACO_REG_IDX_FPU == SLOT(ACO_OFF_FPUCW),
               "ACO_REG_IDX_BP/FPU disagree with acosw.S");
#elif defined(__aarch64__)
_Static_assert(ACO_REG_IDX_BP == aco__slot_x29 && ACO_REG_IDX_FPU == SLOT(ACO_OFF_FPCR),
               "ACO_REG_IDX_BP/FPU disagree with acosw.S");
#else
_Static_assert(ACO_REG_IDX_BP == aco__slot_s0 && ACO_REG_IDX_FPU == SLOT(ACO_OFF_FRM),
               "ACO_REG_IDX_BP/FPU disagree with acosw.S");
#endif

/* ======================================================================== */
/* 2. Thread state                                                          */
/* ======================================================================== */

/* initial-exec: every access is one instruction, in libaco.so too. */
#define TLS __thread __attribute__((tls_model("initial-exec")))

/* The running co; between runs, the thread's main co (NULL before one). */
TLS aco_t* aco_gtls_co;
static TLS aco_cofuncp_t last_word;     /* aco_thread_init's argument */
static TLS char inited;

/* Upstream's primitive, and ours: the calling thread's FP control state at
 * p, as aco.h says (x86: control word at p, MXCSR at p + 4). */
void aco_save_fpucw_mxcsr(void* p) {
#if defined(__x86_64__) || defined(__i386__)
    uint16_t cw;
    uint32_t csr;
    __asm__ volatile("fnstcw %0" : "=m"(cw));
    __asm__ volatile("stmxcsr %0" : "=m"(csr));
    memcpy(p, &cw, sizeof(cw));
    memcpy((char*)p + 4, &csr, sizeof(csr));
#else
    uint64_t v;
#if defined(__aarch64__)
    __asm__ volatile("mrs %0, fpcr" : "=r"(v));
#else
    __asm__ volatile("frrm %0" : "=r"(v));
#endif
    memcpy(p, &v, sizeof(v));
#endif
}

/* The FP control state aco_thread_init() captured, as stored by
 * aco_save_fpucw_mxcsr: new cos start with it. */
static TLS uint64_t init_fp;

static void fpenv_give(aco_t* co) {
#if defined(__x86_64__) || defined(__i386__)
    memcpy(&co->reg_fpucw, &init_fp, sizeof(co->reg_fpucw));
    memcpy(&co->reg_mxcsr, (char*)&init_fp + 4, sizeof(co->reg_mxcsr));
#else
    co->reg_fpctl = (uint32_t)init_fp;  /* FPCR's bits 32-63 are RES0; frm */
#endif
}

/* How acosw.S treats to's FP control words on x86-64 (ACO_SWITCH64): 1
 * loads them on every switch, where loading is cheap and reading back what
 * stmxcsr just stored is slow (AMD and Hygon, by cpuid's vendor string); 0
 * compares and loads only on a difference (Intel and the rest).  Either is
 * correct at any switch; set before main, read by every switch. */
#if defined(__x86_64__) && !defined(ACO_CONFIG_SHARE_FPU_MXCSR_ENV)
#include <cpuid.h>

extern unsigned char aco__fp_eager __attribute__((visibility("hidden")));

__attribute__((constructor))
static void fp_eager_init(void) {
    unsigned a, b, c, d;
    char v[12];
    if (!__get_cpuid(0, &a, &b, &c, &d)) return;
    memcpy(v, &b, 4);
    memcpy(v + 4, &d, 4);
    memcpy(v + 8, &c, 4);
    aco__fp_eager = memcmp(v, "AuthenticAMD", 12) == 0 || memcmp(v, "HygonGenuine", 12) == 0;
}
#endif

/* For tests and the benchmark (hidden; tests/aco_test.h): the strategy in
 * use, 0 or 1 as above, or -1 where the build has only one (i386, aarch64,
 * riscv64, ACO_CONFIG_SHARE_FPU_MXCSR_ENV).  mode 0 or 1 selects it, -1
 * only asks. */
__attribute__((visibility("hidden"))) int aco__fp_mode(int mode);

int aco__fp_mode(int mode) {
#if defined(__x86_64__) && !defined(ACO_CONFIG_SHARE_FPU_MXCSR_ENV)
    if (mode == 0 || mode == 1) aco__fp_eager = (unsigned char)mode;
    return aco__fp_eager;
#else
    (void)mode;
    return -1;
#endif
}

static void overflow_altstack(void);
static int overflow_installed;

/* Checked mode (section 12): decided once per process; ckd() after that. */
static int checked_decide(void);
static int checked_state;       /* 0 undecided, 1 off, 2 on */
static inline int ckd(void) {
    return aco_unlikely(__atomic_load_n(&checked_state, __ATOMIC_RELAXED) == 2);
}

void aco_thread_init(aco_cofuncp_t last_word_co_fp) {
    aco_save_fpucw_mxcsr(&init_fp);
    last_word = last_word_co_fp;
    inited = 1;
    if (checked_decide() || overflow_installed) overflow_altstack();
}

/* ======================================================================== */
/* 3. Errors: "aco: <function>: <rule broken>", then abort                  */
/* ======================================================================== */

/* What the reports below do from their signal handlers goes to the system
 * calls themselves, not to read(), write(), close() or dup2(), which a
 * program may interpose.  The runtime's syscall hooks do: in a co, their
 * read parks the co, and they allocate, which a signal handler must not. */
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

static long sys_read(int fd, void* b, size_t n) { return syscall(SYS_read, fd, b, n); }
static void sys_close(int fd) { (void)syscall(SYS_close, fd); }
static void sys_dup2(int fd, int to) {      /* (dup3: no dup2 on aarch64) */
    if (fd != to) (void)syscall(SYS_dup3, fd, to, 0);
}
/* fork without fork(): no atfork handler runs (the program's, and libaco's
 * and the runtime's, which take locks the faulting thread may hold), and no
 * libc state is reset; the child only dups, opens and execs.  clone with
 * SIGCHLD alone and no new stack is a fork on every ABI (aarch64 and
 * riscv64 have no fork system call), whatever the order of the rest. */
static pid_t sys_fork(void) {
    return (pid_t)syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
}

/* (stderr may be non-blocking: the hooks make a descriptor so when a co
 * waits on it.  Then a full pipe is waited for, a second at a time.) */
static void err_write(const char* p, size_t n) {
    int saved = errno;
    while (n > 0) {
        long r = syscall(SYS_write, 2, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && errno == EAGAIN) {
            struct pollfd pf = {2, POLLOUT, 0};
            struct { long s, ns; } sec = {1, 0};    /* the kernel's timespec on each ABI */
            if (syscall(SYS_ppoll, &pf, 1, &sec, NULL, 0) > 0) continue;
            break;
        }
        if (r <= 0) break;
        p += r;
        n -= (size_t)r;
    }
    errno = saved;
}

__attribute__((noreturn, cold, format(printf, 2, 3)))
static void fatal(const char* fn, const char* fmt, ...) {
    va_list ap;
    fprintf(stderr, "aco: %s: ", fn);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    abort();
}

#define check(fn, cond, ...)                                                  \
    do {                                                                      \
        if (aco_unlikely(!(cond))) fatal(fn, __VA_ARGS__);                    \
    } while (0)

/* A live co's state (aco.h), and the word of is_end and state. */
#define LIVE(co) ((co)->state == aco__state_off || (co)->state == aco__state_on)
#define STATE_WORD(is_end, state) ((uint16_t)((is_end) | (state) << 8))

/* The program's allocator (aco_set_allocator), NULL: malloc and the pools.
 * Fixed once anything was allocated (alloc_used). */
static void* (*user_alloc)(void* cookie, size_t sz);
static void (*user_free)(void* cookie, void* p, size_t sz);
static void* user_cookie;
static int alloc_used;

void aco_set_allocator(void* (*a)(void* cookie, size_t sz),
                       void (*f)(void* cookie, void* p, size_t sz), void* cookie) {
    static const char fn[] = "aco_set_allocator";
    check(fn, (a == NULL) == (f == NULL), "give both alloc and free, or neither");
    if (a == NULL) return;
    check(fn, !__atomic_load_n(&alloc_used, __ATOMIC_RELAXED) && user_alloc == NULL,
          "call it once, before libaco allocates anything (the first co, share "
          "stack or aco_thread_init)");
    user_alloc = a;
    user_free = f;
    user_cookie = cookie;
}

static inline void mark_used(void) {
    if (!__atomic_load_n(&alloc_used, __ATOMIC_RELAXED))
        __atomic_store_n(&alloc_used, 1, __ATOMIC_RELAXED);
}

/* fn NULL: the caller takes a NULL (out of memory) instead of the abort. */
static void* alloc(const char* fn, size_t sz) {
    mark_used();
    void* p = user_alloc ? user_alloc(user_cookie, sz) : malloc(sz);
    if (fn == NULL) return p;
    check(fn, p != NULL, "out of memory (%s of %zu bytes failed)",
          user_alloc ? "the program's allocator" : "malloc", sz);
    return p;
}

/* Give back what alloc(sz) gave. */
static void dealloc(void* p, size_t sz) {
    if (user_free) user_free(user_cookie, p, sz);
    else free(p);
}

void* aco_alloc(size_t sz) {
    if (sz == 0) fatal("aco_alloc", "sz must not be 0");
    mark_used();
    return user_alloc ? user_alloc(user_cookie, sz) : malloc(sz);
}

void aco_free(void* p, size_t sz) {
    if (p != NULL) dealloc(p, sz);
}

/* Called from aco_protector (acosw.S) when a co function returned: a bug. */
__attribute__((visibility("hidden"), noreturn))
void aco__funcp_protector(void);

static void protector_slot_again(const aco_t* co);

void aco__funcp_protector(void) {
    aco_t* co = aco_gtls_co;
    if (co != NULL && co->share_stack != NULL) protector_slot_again(co);
    if (last_word != NULL) last_word();
    fatal("protector", "co %p returned from its co function %p instead of "
          "calling aco_exit(); a co function must end with aco_exit()",
          (void*)co, co != NULL ? (void*)co->fp : NULL);
}

/* Upstream's names of the same: the C function and the entry a returning co
 * function lands in (here aco_protector in acosw.S; this one does the same
 * when called). */
void aco_funcp_protector(void) {
    aco__funcp_protector();
}

void aco_funcp_protector_asm(void) {
    aco__funcp_protector();
}

void aco_runtime_test(void) {
    static const char fn[] = "aco_runtime_test";
    check(fn, sizeof(void*) == sizeof(uintptr_t) && sizeof(size_t) == sizeof(void*),
          "pointers, uintptr_t and size_t differ in size");
    check(fn, sizeof(((aco_t*)0)->reg) == ACO_REG_SLOTS * sizeof(void*),
          "aco.h and acosw.S disagree on the register layout");
    aco_t probe;
    memset(&probe, 0, sizeof(probe));
    probe.is_end = 1;
    probe.state = aco__state_on;
    uint16_t w;
    memcpy(&w, &probe.is_end, sizeof(w));
    check(fn, w == STATE_WORD(1, aco__state_on), "aco_t.is_end and state are not "
          "one little-endian word");
}

/* ======================================================================== */
/* 4. Tool hooks                                                            */
/*                                                                          */
/* The core's whole conversation with valgrind (ACO_USE_VALGRIND), ASan and */
/* TSan (aco.h detects them).  Each hook is a static inline function of     */
/* section 11; without the tool it is empty and compiles to nothing.        */
/* ======================================================================== */

/* Bytes a co object carries after its aco_t for the tools (0 without):
 * aco_t itself is the same in every build. */
static inline size_t tool_co_extra(void);
/* Non-zero: save stacks come from malloc, not the pools (ASan then watches
 * them, and each has room for its shadow). */
static inline int tool_wants_malloc(void);
/* A fresh pool mapping (LeakSanitizer scans it: co objects point to heap
 * blocks). */
static inline void tool_arena_new(void* p, size_t n);
/* Bytes a save buffer of capacity cap needs beyond cap (ASan: the shadow). */
static inline size_t tool_save_extra(size_t cap);

static inline void tool_stack_new(aco_share_stack_t* s);
static inline void tool_stack_destroy(aco_share_stack_t* s);

/* A pool slot: handed out (its free-list link read first), taken back, and
 * its link written while free. */
static inline void tool_slot_link_read(void* p);
static inline void tool_slot_given(void* p, size_t sz);
static inline void tool_slot_taken(void* p);
static inline void tool_slot_linked(void* p);

static inline void tool_main_co_new(aco_t* co);
/* Where a new co's first switch goes: co->fp, or a tool's entry first. */
static inline void* tool_entry(aco_t* co);

/* Non-zero: the stack copies must run uninstrumented, by tool_copy. */
static inline int tool_plain_copies(void);
static void tool_copy(void* dst, const void* src, size_t n);
/* owner's n live bytes were saved / co's n bytes restored to dst: the
 * tool's state of them moves along. */
static inline void tool_saved(aco_t* owner, size_t n);
static inline void tool_restoring(aco_t* co, char* dst, size_t n);
static inline void tool_restored(aco_t* co, char* dst, size_t n);
/* co's frames died (reset or destroy) while it owned its stack or not. */
static inline void tool_frames_dead(aco_t* co, int owned_stack);

/* Checked mode's hooks (section 12); never called outside it. */
static size_t stack_rec_bytes(void);
static int checked_stack_map(const char* fn, aco_share_stack_t* s, size_t sz, size_t pg,
                             char guard, int may_fail);
static void checked_stack_unmap(const char* fn, aco_share_stack_t* s);
static void checked_stack_laid(aco_share_stack_t* s);
static size_t checked_co_extra(void);
static void checked_co_new(const char* fn, aco_t* co);
static void checked_co_destroy(aco_t* co);
static char* checked_top(const aco_t* co);
static size_t checked_live_bytes(aco_t* owner);
static aco_t* checked_resume(aco_t* co) __attribute__((noinline, cold));
static void checked_open(aco_t* co);
static void checked_close(aco_t* co);
static void checked_shared(aco_share_stack_t* s);

/* ======================================================================== */
/* 5. Share stacks                                                          */
/* ======================================================================== */

#define DEFAULT_STACK   ((size_t)2 << 20)
#define MIN_STACK       ((size_t)4096)
#define STACK_ALIGN     16      /* the stack pointer's alignment at a call
                                   (x86-64 and i386 psABI, AAPCS64, RISC-V) */

/* Where a co "returns" to: aco_protector in acosw.S. */
extern const char aco_protector_ret[] __attribute__((visibility("hidden")));

static size_t page_size(const char* fn) {
    long pg = sysconf(_SC_PAGESIZE);
    check(fn, pg > 0 && (pg & (pg - 1)) == 0, "sysconf(_SC_PAGESIZE) returned %ld", pg);
    return (size_t)pg;
}

/* The guard below a stack that has one: 1 MiB and a page, PROT_NONE.  A
 * page would do for frames that touch every page, but compilers probe no
 * frame by default (gcc and clang need -fstack-clash-protection, and
 * aarch64's gcc probes every 64 KiB even then): a frame whose lowest byte
 * lies up to 1 MiB below the stack still faults here, where the overflow
 * report finds it.  It costs address space, not memory: never committed,
 * part of the stack's own mapping (no mapping more). */
#define GUARD_REACH ((size_t)1 << 20)

static size_t guard_bytes(size_t pg) {
    return GUARD_REACH + pg;
}

aco_share_stack_t* aco_share_stack_new(size_t sz) {
    return aco_share_stack_new2(sz, 1);
}

/* A share stack (aco_share_stack_new2); may_fail: NULL with errno instead
 * of an abort when memory or the address space runs out; plain: never a
 * checked-mode stack (the hand-off co's). */
static aco_share_stack_t* stack_new(const char* fn, size_t sz, char guard_page_enabled,
                                    int may_fail, int plain) {
    if (sz == 0) sz = DEFAULT_STACK;
    if (sz < MIN_STACK) sz = MIN_STACK;
    size_t pg = page_size(fn);
    /* Rounded up, plus the guard: it must still fit a size_t. */
    size_t room = SIZE_MAX - pg - guard_bytes(pg);
    if (may_fail && sz > room) { errno = ENOMEM; return NULL; }
    check(fn, sz <= room, "stack size %zu exceeds the address space", sz);

    int checked = checked_decide() && !plain;
    aco_share_stack_t* s = alloc(may_fail ? NULL : fn, stack_rec_bytes());
    if (s == NULL) { errno = ENOMEM; return NULL; }
    memset(s, 0, stack_rec_bytes());
    if (checked) {
        if (!checked_stack_map(fn, s, sz, pg, guard_page_enabled, may_fail)) {
            dealloc(s, stack_rec_bytes());
            return NULL;
        }
        sz = s->sz;
    } else if (guard_page_enabled) {
        size_t gap = guard_bytes(pg);
        sz = (sz + pg - 1) & ~(pg - 1);
        s->real_sz = sz + gap;
        /* NORESERVE: a stack's pages are committed as they are touched. */
        s->real_ptr = mmap(NULL, s->real_sz, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        /* Below the stack: stacks grow down on every supported architecture. */
        if (may_fail && (s->real_ptr == MAP_FAILED || mprotect(s->real_ptr, gap, PROT_NONE))) {
            int e = errno;
            if (s->real_ptr != MAP_FAILED) munmap(s->real_ptr, s->real_sz);
            dealloc(s, sizeof(*s));
            errno = e;
            return NULL;
        }
        check(fn, s->real_ptr != MAP_FAILED, "out of memory (mmap of %zu bytes "
              "failed: %s)", s->real_sz, strerror(errno));
        check(fn, mprotect(s->real_ptr, gap, PROT_NONE) == 0,
              "mprotect of the guard failed: %s", strerror(errno));
        s->ptr = (char*)s->real_ptr + gap;
        s->guard_page_enabled = 1;
    } else {
        sz = (sz + STACK_ALIGN - 1) & ~(size_t)(STACK_ALIGN - 1);
        s->real_sz = sz;
        s->real_ptr = alloc(may_fail ? NULL : fn, sz);
        if (s->real_ptr == NULL) {
            dealloc(s, sizeof(*s));
            errno = ENOMEM;
            return NULL;
        }
        s->ptr = s->real_ptr;
    }
    s->sz = sz;

    uintptr_t high = ((uintptr_t)s->ptr + sz) & ~(uintptr_t)(STACK_ALIGN - 1);
    s->align_highptr = (void*)high;
#ifdef ACO_OFF_LR
    /* The return address is a register (aco_create sets a new co's lr to the
     * protector): a co function enters with sp == highptr, aligned as at a
     * call (AAPCS64, RISC-V psABI). */
    s->align_retptr = (void*)high;
#else
    /* x86: the protector's address in the slot below highptr, so a starting
     * co function finds a return address and, per the ABI,
     * (sp + sizeof(void*)) % 16 == 0 at entry. */
    s->align_retptr = (void*)(high - sizeof(void*));
    *(const void**)s->align_retptr = aco_protector_ret;
#endif
    s->align_limit = (size_t)((uintptr_t)s->align_retptr - (uintptr_t)s->ptr);
    if (checked) checked_stack_laid(s);
    tool_stack_new(s);
    return s;
}

aco_share_stack_t* aco_share_stack_new2(size_t sz, char guard_page_enabled) {
    return stack_new("aco_share_stack_new2", sz, guard_page_enabled, 0, 0);
}

aco_share_stack_t* aco_share_stack_try_new2(size_t sz, char guard_page_enabled) {
    return stack_new("aco_share_stack_try_new2", sz, guard_page_enabled, 1, 0);
}

void aco_share_stack_destroy(aco_share_stack_t* sstk) {
    static const char fn[] = "aco_share_stack_destroy";
    check(fn, sstk != NULL, "sstk must not be NULL");
    check(fn, sstk->co_ct == 0, "share stack %p is still used by %zu co(s); "
          "destroy them first", (void*)sstk, sstk->co_ct);
    tool_stack_destroy(sstk);
    if (ckd()) {
        checked_stack_unmap(fn, sstk);
    } else if (sstk->guard_page_enabled) {
        check(fn, munmap(sstk->real_ptr, sstk->real_sz) == 0, "munmap failed: %s",
              strerror(errno));
    } else {
        dealloc(sstk->real_ptr, sstk->real_sz);
    }
    dealloc(sstk, stack_rec_bytes());
}

/* The overflow report (aco.h), opt-in.  A co that overflows runs on its
 * share stack, so the faulting thread's running co names it: no registry of
 * stacks is needed.  The handler runs on an alternate stack (the share
 * stack is exhausted), writes one line (err_write) and hands the fault on:
 * to the previous handler, or back to the default action, which kills the
 * process with SIGSEGV when the faulting instruction runs again. */
#include <signal.h>

#define ALTSTACK_BYTES ((size_t)64 << 10)

static struct sigaction overflow_prev;
static pthread_key_t overflow_key;
static pthread_once_t overflow_key_once = PTHREAD_ONCE_INIT;

static char* put_hex(char* p, uintptr_t v) {
    char tmp[2 * sizeof(v)];
    int n = 0;
    do tmp[n++] = "0123456789abcdef"[v & 15]; while ((v >>= 4) != 0);
    *p++ = '0';
    *p++ = 'x';
    while (n > 0) *p++ = tmp[--n];
    return p;
}

static char* put_str(char* p, const char* s) {
    while (*s) *p++ = *s++;
    return p;
}

static void overflow_handler(int sig, siginfo_t* si, void* ctx) {
    aco_t* co = aco_gtls_co;
    uintptr_t a = (uintptr_t)si->si_addr;
    if (co != NULL && co->main_co != NULL && co->share_stack != NULL && !ckd() &&
        co->share_stack->guard_page_enabled &&
        a >= (uintptr_t)co->share_stack->real_ptr && a < (uintptr_t)co->share_stack->ptr) {
        aco_share_stack_t* s = co->share_stack;
        char line[256], *p = line;
        p = put_str(p, "aco: co ");
        p = put_hex(p, (uintptr_t)co);
        p = put_str(p, " overflowed its share stack ");
        p = put_hex(p, (uintptr_t)s);
        p = put_str(p, " [");
        p = put_hex(p, (uintptr_t)s->ptr);
        p = put_str(p, ", ");
        p = put_hex(p, (uintptr_t)s->ptr + s->sz);
        p = put_str(p, "), ");
        p = put_hex(p, s->sz);
        p = put_str(p, " bytes: fault at ");
        p = put_hex(p, a);
        p = put_str(p, " in its guard region (co function ");
        p = put_hex(p, (uintptr_t)co->fp);
        p = put_str(p, ")\n");
        err_write(line, (size_t)(p - line));
    }
    if (overflow_prev.sa_flags & SA_SIGINFO) {
        overflow_prev.sa_sigaction(sig, si, ctx);
    } else if (overflow_prev.sa_handler != SIG_DFL && overflow_prev.sa_handler != SIG_IGN) {
        overflow_prev.sa_handler(sig);
    } else {
        /* Die of it now, as without us (SA_NODEFER: raise delivers at
         * once).  Not by returning to the fault to repeat it: valgrind's
         * registers at a fault may be stale, so that the repeat can write
         * where the fault did not. */
        signal(sig, SIG_DFL);
        raise(sig);
    }
}

static void overflow_altstack_free(void* mem) {
    stack_t off = {.ss_flags = SS_DISABLE};
    sigaltstack(&off, NULL);
    munmap(mem, ALTSTACK_BYTES);
}

static void overflow_key_make(void) {
    check("aco_thread_init", pthread_key_create(&overflow_key, overflow_altstack_free) == 0,
          "pthread_key_create failed");
}

/* The calling thread's alternate signal stack, unless it has one (for the
 * overflow report and checked mode's). */
static void overflow_altstack(void) {
    pthread_once(&overflow_key_once, overflow_key_make);
    stack_t cur;
    if (sigaltstack(NULL, &cur) != 0 || !(cur.ss_flags & SS_DISABLE)) return;
    void* mem = mmap(NULL, ALTSTACK_BYTES, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    check("aco_overflow_report_install", mem != MAP_FAILED,
          "out of memory (mmap of an alternate signal stack failed: %s)", strerror(errno));
    stack_t st = {.ss_sp = mem, .ss_size = ALTSTACK_BYTES, .ss_flags = 0};
    check("aco_overflow_report_install", sigaltstack(&st, NULL) == 0,
          "sigaltstack failed: %s", strerror(errno));
    pthread_setspecific(overflow_key, mem);     /* unmapped at thread exit */
}

void aco_overflow_report_install(void) {
    static const char fn[] = "aco_overflow_report_install";
    if (overflow_installed) return;
    overflow_altstack();
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = overflow_handler;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    check(fn, sigaction(SIGSEGV, &sa, &overflow_prev) == 0, "sigaction failed: %s",
          strerror(errno));
    overflow_installed = 1;
}

/* ======================================================================== */
/* 6. Pools: co objects and small save stacks                               */
/*                                                                          */
/* Each pool hands out equal slots from 64 KiB slabs, with no per-object    */
/* header or rounding: at ten million cos, malloc's 8-byte header and       */
/* 16-byte rounding would cost ~24 bytes a co.  One pool holds co objects;  */
/* save stacks up to SAVE_POOLED bytes come from pools in 8-byte steps (an  */
/* x86-64 co's live bytes are 16k+8: they fit exactly), larger ones from    */
/* malloc.  Slabs are carved from 2 MiB mappings and unmapped when empty,   */
/* except one spare per pool.  A slot finds its slab by masking its address.*/
/* One mutex guards all pools (a co may be destroyed in any thread); it is  */
/* skipped while the process has a single thread, as glibc's malloc does.   */
/* ======================================================================== */

#define SLAB_BYTES  ((size_t)64 << 10)
#define ARENA_SLABS 32
#define SAVE_POOLED 512
#define SAVE_STEP   8

typedef struct slab slab;
typedef struct {
    slab*  avail;       /* slabs with a free slot */
    size_t slot;        /* bytes per slot (set, under the lock, by each alloc) */
} pool;

struct slab {
    slab*  prev;        /* in pool->avail */
    slab*  next;
    pool*  pool;
    void*  free;        /* freed slots, linked through their first word */
    size_t live;        /* slots in use */
    size_t carved;      /* slots handed out at least once */
};
#define SLAB_FIRST  ((sizeof(slab) + 15) & ~(size_t)15)

static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static pool co_pool;
static pool save_pool[SAVE_POOLED / SAVE_STEP];   /* i: (i + 1) * 8 bytes */
static char*  arena;        /* the rest of the current 2 MiB mapping */
static size_t arena_left;   /* slabs left in it */

#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 32)
#include <sys/single_threaded.h>
#define single_threaded() (__libc_single_threaded != 0)
#else
#define single_threaded() 0
#endif

static int pool_lock(void) {
    if (single_threaded()) return 0;
    pthread_mutex_lock(&pool_mu);
    return 1;
}

static void pool_unlock(int locked) {
    if (locked) pthread_mutex_unlock(&pool_mu);
}

/* fork: the child must find the pools unlocked whatever other threads were
 * doing, so no thread may hold the lock across the fork.  (A fork in a
 * single-threaded process has nobody to wait for: the lock is then free.)
 * In the child only the forking thread lives: its cos stay usable, other
 * threads' cos are dead memory (never resume them). */
static void pool_prefork(void) {
    pthread_mutex_lock(&pool_mu);
}

static void pool_postfork(void) {
    pthread_mutex_unlock(&pool_mu);
}

__attribute__((constructor))
static void pool_atfork(void) {
    pthread_atfork(pool_prefork, pool_postfork, pool_postfork);
}

static size_t slab_slots(const pool* pl) {
    return (SLAB_BYTES - SLAB_FIRST) / pl->slot;
}

static void avail_unlink(slab* b) {
    if (b->prev) b->prev->next = b->next; else b->pool->avail = b->next;
    if (b->next) b->next->prev = b->prev;
    b->prev = b->next = NULL;
}

static void avail_push(slab* b) {
    b->prev = NULL;
    b->next = b->pool->avail;
    if (b->next) b->next->prev = b;
    b->pool->avail = b;
}

/* A fresh (zero) slab; NULL when out of memory.  Called locked. */
static slab* slab_map(void) {
    if (arena_left == 0) {
        size_t want = ARENA_SLABS * SLAB_BYTES;
        char* m = mmap(NULL, want + SLAB_BYTES, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) return NULL;
        /* Keep the slab-aligned middle: slots find their slab by masking. */
        char* al = (char*)(((uintptr_t)m + SLAB_BYTES - 1) & ~(uintptr_t)(SLAB_BYTES - 1));
        if (al > m) munmap(m, (size_t)(al - m));
        if (al + want < m + want + SLAB_BYTES)
            munmap(al + want, (size_t)(m + want + SLAB_BYTES - (al + want)));
        arena = al;
        arena_left = ARENA_SLABS;
        tool_arena_new(al, want);
    }
    slab* b = (slab*)arena;
    arena += SLAB_BYTES;
    arena_left--;
    return b;
}

static void* pool_alloc(pool* pl, size_t slot, const char* fn) {
    int locked = pool_lock();
    pl->slot = slot;
    slab* b = pl->avail;
    if (b == NULL) {
        b = slab_map();
        if (b == NULL) {
            pool_unlock(locked);
            if (fn == NULL) return NULL;        /* the caller's to say */
            fatal(fn, "out of memory (mmap of a slab failed)");
        }
        b->pool = pl;
        avail_push(b);
    }
    void* p;
    if (b->free != NULL) {
        p = b->free;
        tool_slot_link_read(p);
        b->free = *(void**)p;
    } else {
        p = (char*)b + SLAB_FIRST + b->carved++ * pl->slot;
    }
    if (++b->live == slab_slots(pl)) avail_unlink(b);
    pool_unlock(locked);
    tool_slot_given(p, pl->slot);
    return p;
}

static void pool_free(void* p) {
    slab* b = (slab*)((uintptr_t)p & ~(uintptr_t)(SLAB_BYTES - 1));
    tool_slot_taken(p);
    int locked = pool_lock();
    *(void**)p = b->free;
    b->free = p;
    if (b->live-- == slab_slots(b->pool)) avail_push(b);
    if (b->live == 0 && (b->prev != NULL || b->next != NULL)) {
        /* Empty and not the pool's only slab with room: give it back. */
        avail_unlink(b);
        munmap(b, SLAB_BYTES);
    } else {
        tool_slot_linked(p);    /* locked: another thread may take p next */
    }
    pool_unlock(locked);
}

/* A save stack's capacity says where it comes from (save_alloc).  Capacities are multiples of 8, so save_stack.sz has room for
 * two flags: SS_IN, the co object is the caller's memory (aco_create_in),
 * and SS_EMBED, its save stack is the rest of that memory.  Live sizes are
 * multiples of 4 (the stack pointer's alignment on every ABI here), so
 * "n > sz" is "n > capacity" with the flags in: take's fast path compares
 * sz as it is. */
#define SS_IN    1u
#define SS_EMBED 2u
#define SS_CAP(ss) ((size_t)((ss)->sz & ~(uint32_t)7))
#define SAVE_MAX ((size_t)UINT32_MAX & ~(size_t)7)

/* A zeroed co object, with the tools' bytes after it. */
static size_t co_extra(void) { return tool_co_extra() + (ckd() ? checked_co_extra() : 0); }
static size_t co_bytes(void) { return (sizeof(aco_t) + co_extra() + 15) & ~(size_t)15; }

static aco_t* co_alloc(const char* fn) {
    size_t sz = sizeof(aco_t) + co_extra();
    mark_used();
    aco_t* co = user_alloc ? alloc(fn, co_bytes()) : pool_alloc(&co_pool, co_bytes(), fn);
    memset(co, 0, sz);
    return co;
}

/* The slot keeps co's state byte (aco__state_dead): only its first word
 * links the free slots, so a destroyed co is recognised until the slot is
 * handed out again. */
static void co_free(aco_t* co) {
    if (co->save_stack.sz & SS_IN) return;     /* the caller's (aco_create_in) */
    if (user_free) {
        co->state = aco__state_dead;    /* (until the program reuses it) */
        dealloc(co, co_bytes());
        return;
    }
    pool_free(co);
}

/* Save stacks: pooled up to SAVE_POOLED bytes, malloc'd above (SS_CAP). */
static size_t save_capacity(size_t n) {
    return (n + SAVE_STEP - 1) & ~(size_t)(SAVE_STEP - 1);
}

static void* save_alloc(size_t cap, const char* fn) {
    mark_used();
    if (!user_alloc && !tool_wants_malloc() && cap <= SAVE_POOLED)
        return pool_alloc(&save_pool[cap / SAVE_STEP - 1], cap, fn);
    return alloc(fn, cap + tool_save_extra(cap));
}

static void save_free(aco_save_stack_t* ss) {
    size_t cap = SS_CAP(ss);
    if (ss->ptr == NULL || (ss->sz & SS_EMBED)) {
        /* nothing, or the caller's */
    } else if (!user_free && !tool_wants_malloc() && cap <= SAVE_POOLED) {
        pool_free(ss->ptr);
    } else {
        dealloc(ss->ptr, cap + tool_save_extra(cap));
    }
    ss->ptr = NULL;
    ss->sz &= SS_IN;
}

/* ======================================================================== */
/* 7. Create                                                                */
/* ======================================================================== */

/* The registers of a co that has not run yet: its first switch enters
 * co->fp at the top of its share stack, with the protector as the return
 * address and the FP control state aco_thread_init() captured. */
static void init_regs_at(aco_t* co, void* sp) {
    memset(co->reg, 0, sizeof(co->reg));
    PC(co) = tool_entry(co);
    SP(co) = sp;
#ifdef ACO_OFF_LR
    co->reg[aco__slot_lr] = (void*)(uintptr_t)aco_protector_ret;
#endif
    fpenv_give(co);
}

/* x86: the co function's return popped its share stack's return-address
 * slot, which memcheck counts as dead from then on, and the next co to
 * start there returns through it (a last word may end this co with
 * aco_exit()): say it again.  (The lr architectures have no slot.) */
static void protector_slot_again(const aco_t* co) {
#ifndef ACO_OFF_LR
    *(const void**)(ckd() ? checked_top(co) : (char*)co->share_stack->align_retptr) =
        aco_protector_ret;
#else
    (void)co;
#endif
}

static void init_regs(aco_t* co) {
    init_regs_at(co, ckd() ? checked_top(co) : co->share_stack->align_retptr);
}

/* The checks of a non-main co's creation. */
static void check_create(const char* fn, aco_t* main_co, aco_share_stack_t* share_stack,
                         aco_cofuncp_t fp) {
    if (aco_unlikely(!LIVE(main_co))) aco__not_a_co(fn, main_co);
    check(fn, aco_is_main_co(main_co), "main_co %p is not a main co", (void*)main_co);
    check(fn, aco_gtls_co == main_co || (aco_gtls_co != NULL && aco_gtls_co->main_co == main_co),
          "main_co %p is not this thread's main co (the running co is %p)",
          (void*)main_co, (void*)aco_gtls_co);
    check(fn, share_stack != NULL, "share_stack must not be NULL for a non-main co");
    /* The share stack is this thread's, or free (aco.h). */
    check(fn, share_stack->co_ct == 0 || share_stack->thread == &inited,
          "share stack %p belongs to another thread (%zu co(s) of it use it); a "
          "share stack passes to another thread only when no co uses it",
          (void*)share_stack, share_stack->co_ct);
    check(fn, fp != NULL, "fp must not be NULL for a non-main co");
}

/* Fill in the zeroed co of a non-main co; its share stack counts it. */
static void make(const char* fn, aco_t* co, aco_t* main_co, aco_share_stack_t* share_stack,
                 aco_cofuncp_t fp, void* arg) {
    co->main_co = main_co;
    co->arg = arg;
    co->fp = fp;
    co->share_stack = share_stack;
    co->state = aco__state_off;         /* until its first resume takes the stack */
    if (ckd()) checked_co_new(fn, co);
    init_regs(co);
    share_stack->co_ct++;
    share_stack->thread = &inited;
    if (ckd()) checked_shared(share_stack);
}

/* The thread's main co in co (zeroed, from co_alloc or the caller's
 * memory), after fn's check that no co runs now. */
static aco_t* main_make(const char* fn, aco_t* co, void* arg) {
    check(fn, aco_gtls_co == NULL || aco_is_main_co(aco_gtls_co),
          "a main co must be created outside any running co (co %p is running)",
          (void*)aco_gtls_co);
    co->arg = arg;
    co->state = aco__state_off;         /* owns no share stack: never resumed */
    tool_main_co_new(co);
    aco_gtls_co = co;
    return co;
}

aco_t* aco_create(aco_t* main_co, aco_share_stack_t* share_stack,
                  size_t save_stack_sz, aco_cofuncp_t fp, void* arg) {
    static const char fn[] = "aco_create";
    check(fn, inited, "aco_thread_init() must be called in this thread first");
    if (main_co == NULL) {
        check(fn, share_stack == NULL && fp == NULL,
              "a main co (main_co == NULL) takes no share stack and no co function");
        return main_make(fn, co_alloc(fn), arg);
    }
    check(fn, save_stack_sz <= SAVE_MAX, "save_stack_sz %zu exceeds 4 GiB - 8", save_stack_sz);
    check_create(fn, main_co, share_stack, fp);
    aco_t* co = co_alloc(fn);
    make(fn, co, main_co, share_stack, fp, arg);
    /* The save stack is allocated when first needed, exactly as large as
     * needed, unless the caller asked for an initial size. */
    if (save_stack_sz != 0) {
        size_t cap = save_capacity(save_stack_sz);
        co->save_stack.ptr = save_alloc(cap, fn);
        co->save_stack.sz = (uint32_t)cap;
    }
    return co;
}

size_t aco_co_size(size_t save_sz) {
    checked_decide();
    check("aco_co_size", save_sz <= SAVE_MAX, "save_sz %zu exceeds 4 GiB - 8", save_sz);
    size_t cap = save_capacity(save_sz);
    return co_bytes() + cap + (cap ? tool_save_extra(cap) : 0);
}

aco_t* aco_create_in(void* mem, size_t sz, aco_t* main_co, aco_share_stack_t* share_stack,
                     aco_cofuncp_t fp, void* arg) {
    static const char fn[] = "aco_create_in";
    check(fn, inited, "aco_thread_init() must be called in this thread first");
    check(fn, main_co != NULL, "main_co must not be NULL: aco_create_in makes non-main "
          "cos only (aco_create makes the main co)");
    check(fn, mem != NULL && ((uintptr_t)mem & 15) == 0,
          "mem %p must be 16-byte aligned memory", mem);
    check(fn, sz >= co_bytes(), "sz %zu is less than aco_co_size(0) (%zu)", sz, co_bytes());
    check_create(fn, main_co, share_stack, fp);
    aco_t* co = mem;
    memset(co, 0, sizeof(aco_t) + co_extra());
    make(fn, co, main_co, share_stack, fp, arg);
    /* The rest of mem: the largest save stack that fits with the bytes the
     * tools keep after it (ASan: a shadow copy, an eighth of it): down by
     * what is too much, then up while the next step fits. */
    size_t room = sz - co_bytes(), cap = (room < SAVE_MAX ? room : SAVE_MAX) & ~(size_t)7;
    for (size_t over; cap > 0 && (over = cap + tool_save_extra(cap)) > room;)
        cap -= save_capacity(over - room);
    while (cap + SAVE_STEP <= SAVE_MAX &&
           cap + SAVE_STEP + tool_save_extra(cap + SAVE_STEP) <= room)
        cap += SAVE_STEP;
    co->save_stack.sz = SS_IN;
    if (cap > 0) {
        co->save_stack.ptr = (char*)co + co_bytes();
        co->save_stack.sz = (uint32_t)cap | SS_IN | SS_EMBED;
    }
    return co;
}

aco_t* aco_create_main_in(void* mem, size_t sz, void* arg) {
    static const char fn[] = "aco_create_main_in";
    check(fn, inited, "aco_thread_init() must be called in this thread first");
    check(fn, mem != NULL && ((uintptr_t)mem & 15) == 0,
          "mem %p must be 16-byte aligned memory", mem);
    check(fn, sz >= co_bytes(), "sz %zu is less than aco_co_size(0) (%zu)", sz, co_bytes());
    aco_t* co = mem;
    memset(co, 0, sizeof(aco_t) + co_extra());
    co->save_stack.sz = SS_IN;          /* aco_destroy leaves mem alone */
    return main_make(fn, co, arg);
}

/* ======================================================================== */
/* 8. Copy engine                                                           */
/*                                                                          */
/* Contract.                                                                */
/*  - A share stack's bytes belong to its owner (s->owner): the co whose    */
/*    frames are on it, from its saved sp (or, while it runs, its real sp)  */
/*    up to align_retptr, its "live bytes".  Nobody else may keep a pointer */
/*    into them that is used after the owner changes.                        */
/*  - A co's state is aco__state_on exactly when it owns its share stack; a */
/*    main co, a co not yet run and an ended one are always off it.         */
/*  - Saving is lazy: the owner's live bytes go to its save stack only when */
/*    another co takes the stack (aco_resume of that co).  A co alone on its */
/*    stack never copies.  Restoring is immediate: a co taking the stack    */
/*    gets its save_stack.valid_sz bytes back right below align_retptr      */
/*    before it runs.                                                       */
/*  - At each switch: the co switched to owns its stack and its frames are  */
/*    exactly as it left them; the one switched from is either still owner  */
/*    (yield) or was copied out whole (the take).  An ended or reset co owns */
/*    nothing, so its dead frames are never saved.                          */
/*  - A save stack grows only here, to fit exactly, its old content dropped */
/*    (it is about to be overwritten whole).                                */
/* ======================================================================== */

/* Copies below COPY_SMALL bytes are straight-line (below); larger ones and
 * a save stack that must grow take take_slow (memcpy), so that the common
 * path calls nothing and spills no register.  A power of two: see take. */
#define COPY_SMALL 256

/* Moves of `width` bytes: 16 (SSE2 on x86-64, NEON on aarch64, what the
 * compiler makes of a 16-byte memcpy elsewhere), 32 (AVX) or 64 (AVX-512),
 * the last two on x86-64 CPUs that have them (see aco_resume).  The vector
 * types are unaligned and alias anything: gcc and clang emit each as one
 * full-width move (gcc splits a constant-size memcpy's 32-byte moves in two
 * for generic tuning). */
#if defined(__x86_64__)
typedef char v32 __attribute__((vector_size(32), aligned(1), may_alias));
typedef char v64 __attribute__((vector_size(64), aligned(1), may_alias));
#endif

/* k bytes: 4, 8 or a multiple of 16, up to 128. */
__attribute__((always_inline))
static inline void copy_block(char* d, const char* s, size_t k, int width) {
#if defined(__x86_64__)
    if (width == 64 && k >= 64) {
        for (size_t i = 0; i < k; i += 64) *(v64*)(d + i) = *(const v64*)(s + i);
        return;
    }
    if (width >= 32 && k >= 32) {
        for (size_t i = 0; i < k; i += 32) *(v32*)(d + i) = *(const v32*)(s + i);
        return;
    }
#endif
    (void)width;
    memcpy(d, s, k);
}

/* n bytes, a multiple of 4 (both ends are slot-aligned).  width == 0: any n,
 * by memcpy (take_slow).  Else n < COPY_SMALL: one block of the largest
 * power of two not above n from each end, overlapping in the middle, chosen
 * by a two-level size test (width is a constant once inlined). */
__attribute__((always_inline))
static inline void copy(void* dst, const void* src, size_t n, int width) {
    char* d = dst;
    const char* s = src;
    if (tool_plain_copies()) {
        tool_copy(dst, src, n);
        return;
    }
#define ENDS(k)                                                               \
    do {                                                                      \
        copy_block(d, s, k, width);                                           \
        copy_block(d + n - (k), s + n - (k), k, width);                       \
    } while (0)
    if (width == 0) memcpy(d, s, n);
    else if (n > 64) { if (n > 128) ENDS(128); else ENDS(64); }
    else if (n > 16) { if (n > 32) ENDS(32); else ENDS(16); }
    else if (n >= 8) ENDS(8);
    else if (n >= 4) ENDS(4);
#undef ENDS
}

__attribute__((noinline, cold, noreturn))
static void overflowed(aco_t* owner) {
    aco_share_stack_t* s = owner->share_stack;
    fatal("aco_resume", "co %p's stack pointer %p lies outside its share stack "
          "[%p, %p): it overflowed", (void*)owner, SP(owner), s->ptr, s->align_retptr);
}

/* The owner's live bytes.  Checked: a co that overflowed a stack without a
 * guard page is caught here at the latest (n wraps if sp is above the top). */
static inline size_t live_bytes(aco_t* owner, aco_share_stack_t* s) {
    size_t n = (uintptr_t)s->align_retptr - (uintptr_t)SP(owner);
    if (aco_unlikely(n > s->align_limit)) overflowed(owner);
    return n;
}

/* Copy them to the owner's save stack, which is large enough. */
static inline void save(aco_t* owner, size_t n, int width) {
    aco_save_stack_t* ss = &owner->save_stack;
    if (n > 0) {
        copy(ss->ptr, SP(owner), n, width);
        ss->ct_save++;
        tool_saved(owner, n);
    }
    ss->valid_sz = (uint32_t)n;
    if (n > ss->max_cpsz) ss->max_cpsz = n;
    owner->state = aco__state_off;
}

/* Put co's n saved bytes back where they were: right below top. */
static inline void restore(aco_t* co, char* top, size_t n, int width) {
    char* dst = top - n;
    tool_restoring(co, dst, n);
    if (n == 0) return;
    copy(dst, co->save_stack.ptr, n, width);
    co->save_stack.ct_restore++;
    tool_restored(co, dst, n);
}

/* co now holds its share stack s, and runs. */
static inline aco_t* take_done(aco_t* co, aco_share_stack_t* s) {
    s->owner = co;
    co->state = aco__state_on;
    /* cur is co->main_co (or the co handing off), but reading it from co
     * here, after the copies' stores, measured ~1 ns slower per stack change
     * than from TLS. */
    aco_t* cur = aco_gtls_co;
    aco_gtls_co = co;
    return aco__sw(cur, co);   /* a tail jump, as in aco_resume */
}

/* aco_resume when the share stack changes hands: the owner's live bytes are
 * saved, co's restored.  Entered by a tail jump and calling nothing, so that
 * neither aco_resume's fast path nor this one saves a register. */
static aco_t* take_slow(aco_t* co);

__attribute__((always_inline))
static inline aco_t* take(aco_t* co, int width) {
    aco_share_stack_t* s = co->share_stack;
    aco_t* owner = s->owner;
    size_t n = 0;
    if (owner != NULL) {
        n = live_bytes(owner, s);
        if (aco_unlikely(n > owner->save_stack.sz)) return take_slow(co);
    }
    /* Both below a power of two: so is their OR, and conversely. */
    size_t m = co->save_stack.valid_sz;
    if (aco_unlikely((n | m) >= COPY_SMALL)) return take_slow(co);
    if (owner != NULL) save(owner, n, width);
    restore(co, s->align_retptr, m, width);
    return take_done(co, s);
}

__attribute__((noinline))
static aco_t* take16(aco_t* co) {
    return take(co, 16);
}

/* On x86-64 the copies' width follows the CPU: one store of a 120-byte
 * frame's 2 x 64 bytes is 8 SSE moves, 4 AVX ones or 2 AVX-512 ones, and
 * the stores are what a switch with copies waits for.  AVX-512 only where
 * it does not cost clock speed (Ice Lake and later: VBMI2 tells them).
 * Sanitizer builds copy word by word (tool_copy): one width. */
#if defined(__x86_64__) && !aco__san_switch
#define VEC_DISPATCH 1
__attribute__((noinline, target("avx")))
static aco_t* take32(aco_t* co) {
    return take(co, 32);
}

__attribute__((noinline, target("avx512f")))
static aco_t* take64(aco_t* co) {
    return take(co, 64);
}

static unsigned char vec_width = 16;       /* in use */
static unsigned char vec_max = 16;         /* the widest this CPU has */

__attribute__((constructor))
static void vec_init(void) {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vbmi2"))
        vec_max = 64;
    else if (__builtin_cpu_supports("avx"))
        vec_max = 32;
    vec_width = vec_max;
}
#else
#define VEC_DISPATCH 0
#endif

/* For tests (hidden; declared in tests/aco_test.h): the copy width in use
 * (0: the build has one kind of copy); width != 0 selects it if this CPU
 * and build have it.  Returns the width now in use, -1 if it is not there. */
__attribute__((visibility("hidden"))) int aco__copy_width(int width);

int aco__copy_width(int width) {
#if VEC_DISPATCH
    if (width == 0) return vec_width;
    if ((width != 16 && width != 32 && width != 64) || width > vec_max) return -1;
    vec_width = (unsigned char)width;
    return width;
#else
    return width == 0 ? 0 : -1;
#endif
}

/* take with memcpy for every copy, after growing the owner's save stack if
 * it is too small. */
__attribute__((noinline))
static aco_t* take_slow(aco_t* co) {
    aco_share_stack_t* s = co->share_stack;
    aco_t* owner = s->owner;
    if (owner != NULL) {
        aco_save_stack_t* ss = &owner->save_stack;
        size_t n = live_bytes(owner, s);
        if (n > SS_CAP(ss)) {
            check("aco_resume", n <= SAVE_MAX, "co %p has %zu live bytes on its "
                  "share stack: a save stack holds less than 4 GiB", (void*)owner, n);
            size_t cap = save_capacity(n);
            save_free(ss);
            ss->ptr = save_alloc(cap, "aco_resume");
            ss->sz |= (uint32_t)cap;
        }
        save(owner, n, 0);
    }
    restore(co, s->align_retptr, co->save_stack.valid_sz, 0);
    return take_done(co, s);
}

/* take at the width in use. */
static inline aco_t* take_any(aco_t* co) {
#if VEC_DISPATCH
    if (vec_width == 64) return take64(co);
    if (vec_width == 32) return take32(co);
#endif
    return take16(co);
}

static aco_t* hop_make(const char* fn, aco_t* main_co);
static TLS aco_t* hop;

/* The main cos this thread destroyed last: their cos are still its, to be
 * destroyed (aco_destroy). */
#define GONE_MAINS 8
static TLS aco_t* gone_mains[GONE_MAINS];
static TLS unsigned gone_next;

int aco_resume_reserve(aco_t* co) {
    static const char fn[] = "aco_resume_reserve";
    if (aco_unlikely(co == NULL || !LIVE(co))) aco__not_a_co(fn, co);
    check(fn, co->main_co != NULL, "co %p is a main co; only non-main cos are resumed",
          (void*)co);
    aco_t* cur = aco_gtls_co;
    check(fn, cur != NULL && (cur == co->main_co || cur->main_co == co->main_co),
          "co %p belongs to main co %p; the caller must be that main co or one of its "
          "cos (the caller is co %p)", (void*)co, (void*)co->main_co, (void*)cur);
    aco_share_stack_t* s = co->share_stack;
    aco_t* owner = s->owner;
    int handing = cur != NULL && cur != co && cur->main_co == co->main_co;
    if (handing && hop == NULL && (ckd() || cur->share_stack == s)) {
        if ((hop = hop_make(NULL, co->main_co)) == NULL) { errno = ENOMEM; return -1; }
    }
    if (owner == NULL || owner == co) return 0;
    aco_save_stack_t* ss = &owner->save_stack;
    size_t n;
    if (owner == cur) {     /* running: from here, with room for the hand-off */
        n = (uintptr_t)s->align_retptr - (uintptr_t)__builtin_frame_address(0) + 512;
        if (n > s->align_limit) n = s->align_limit;
    } else {
        n = ckd() ? checked_live_bytes(owner) : live_bytes(owner, s);
    }
    if (n <= SS_CAP(ss)) return 0;
    size_t cap = save_capacity(n);
    void* p = n <= SAVE_MAX ? save_alloc(cap, NULL) : NULL;    /* NULL: no abort */
    if (p == NULL) { errno = ENOMEM; return -1; }
    save_free(ss);
    ss->ptr = p;
    ss->sz |= (uint32_t)cap;
    return 0;
}

/* ======================================================================== */
/* 9. Resume, yield                                                         */
/* ======================================================================== */

void aco__not_a_co(const char* fn, const aco_t* co) {
    if (co == NULL) fatal(fn, "co must not be NULL");
    if (co->state == aco__state_dead)
        fatal(fn, "co %p was destroyed (aco_destroy); it cannot be used any more",
              (const void*)co);
    fatal(fn, "%p is not a co: aco_create never returned it, or it was overwritten "
          "(state byte 0x%02x)", (const void*)co, co->state);
}

/* co is a live co of this thread, not running: the caller is its main co
 * or another co of it. */
static void check_ours(const char* fn, const aco_t* co, const char* what) {
    aco_t* cur = aco_gtls_co;
    if (aco_unlikely(co == NULL || !LIVE(co))) aco__not_a_co(fn, co);
    check(fn, co != cur, "co %p is running; a co cannot %s itself", (const void*)co, what);
    check(fn, cur != NULL && (cur == co->main_co || cur->main_co == co->main_co),
          "co %p belongs to main co %p, not to this thread's (the caller is co %p)",
          (const void*)co, (void*)co->main_co, (void*)cur);
}

__attribute__((noinline, cold, noreturn))
static void resume_misuse(const char* fn, aco_t* co) {
    if (co == NULL || !LIVE(co)) aco__not_a_co(fn, co);
    check(fn, !aco_is_main_co(co), "co %p is a main co; only non-main cos can be "
          "resumed", (void*)co);
    check(fn, aco_gtls_co == co->main_co, "must be called from co %p's main co %p, "
          "not from co %p", (void*)co, (void*)co->main_co, (void*)aco_gtls_co);
    check(fn, !co->is_end, "co %p has ended (it called aco_exit())", (void*)co);
    fatal(fn, "co %p: inconsistent state", (void*)co);
}

void aco__yield_misuse(const char* fn) {
    aco_t* co = aco_gtls_co;
    fatal(fn, "must be called from a non-main co (the caller is %s %p)",
          co == NULL ? "no co" : "main co", (void*)co);
}

/* is_end and state at once.  Whether a co owns its stack is derivable
 * (share_stack->owner == co), but kept in step by every owner change
 * (take_done, save, aco_exit, drop_frames): the derived test's two
 * dependent loads measured 4-6 % slower standalone round trips. */
static inline uint16_t state_word(const aco_t* co) {
    uint16_t both;
    memcpy(&both, &co->is_end, sizeof(both));
    return both;
}

__attribute__((always_inline))
static inline aco_t* resume(const char* fn, aco_t* co) {
    aco_t* cur = aco_gtls_co;
    /* cur == NULL passes only for a main co, which is never aco__state_on. */
    if (aco_unlikely(co == NULL || co->main_co != cur)) resume_misuse(fn, co);
    uint16_t st = state_word(co);
    if (aco_unlikely(st != STATE_WORD(0, aco__state_on))) {
        if (aco_unlikely(st != STATE_WORD(0, aco__state_off) || cur == NULL))
            resume_misuse(fn, co);
        if (ckd())          /* never aco__state_on: every resume comes here */
            return checked_resume(co);
        return take_any(co);
    }
    aco_gtls_co = co;
    /* Last, so that compilers emit a tail jump: acosw then records our
     * caller's return address, and the main co continues right there when
     * co yields (aco_yield sets aco_gtls_co back), with no return of ours to
     * mispredict.  Without the tail call (-O0) it is merely slower.
     * (Sanitizer builds: aco__switch, which returns here.) */
    return aco__sw(cur, co);
}

void aco_resume(aco_t* co) {
    resume("aco_resume", co);
}

aco_t* aco_resume_last(aco_t* co) {
    return resume("aco_resume_last", co);
}

/* The API function behind the aco_yield() macro of aco.h. */
void (aco_yield)(void) {
    aco__yield_inline();
}

void aco__yield1(aco_t* co, const char* fn) {
    if (aco_unlikely(co == NULL || !LIVE(co))) aco__not_a_co(fn, co);
    check(fn, co == aco_gtls_co && co->main_co != NULL,
          "co %p must be the running non-main co (the running co is %p)",
          (void*)co, (void*)aco_gtls_co);
    aco__yield_inline();
}

/* ---- the hand-off: aco_yield_to ----------------------------------------
 * A co handing off to a co of another share stack does what aco_resume
 * does (the same take), only from the co instead of the main co: one
 * switch, no detour.  Two cases need code that runs on neither stack: a
 * co handing off to a co of its own share stack (its live frames cannot be
 * copied out by code that runs on them, nor co's copied in over them), and
 * every hand-off in checked mode (the caller's window is closed once
 * nothing runs on it).  The thread's hand-off co does those: a co of its
 * own, alone on a small stack of its own (never a checked one, so always
 * open), that the caller switches to.  It saves the caller's frames as the
 * main co would, restores co's, switches to co, and waits there for the
 * next such hand-off.  It is made on the first (or by aco_resume_reserve)
 * and freed with the main co.  It never switches to the main co, so
 * aco_resume_last never returns it. */

#define HOP_STACK ((size_t)64 << 10)

/* hop: the thread's hand-off co, or NULL (declared above) */
static TLS aco_t* hop_from;     /* the co handing off, suspended */
static TLS aco_t* hop_to;       /* the co it hands off to */

static void hop_fn(void) {
    for (;;) {
        aco_t* to = hop_to;
        if (ckd()) {
            checked_close(hop_from);
            checked_open(to);
            aco_gtls_co = to;
            aco__sw(hop, to);
        } else {
            take_any(to);       /* saves hop_from, the stack's owner */
        }
    }
}

/* fn NULL: NULL when memory runs out, instead of an abort. */
static aco_t* hop_make(const char* fn, aco_t* main_co) {
    aco_share_stack_t* s = stack_new(fn ? fn : "aco_resume_reserve", HOP_STACK, 1,
                                     fn == NULL, 1);
    if (s == NULL) return NULL;
    aco_t* h = alloc(fn, co_bytes());
    if (h == NULL) {
        tool_stack_destroy(s);
        munmap(s->real_ptr, s->real_sz);
        dealloc(s, stack_rec_bytes());
        return NULL;
    }
    memset(h, 0, co_bytes());
    h->main_co = main_co;
    h->fp = hop_fn;
    h->share_stack = s;
    init_regs_at(h, s->align_retptr);
    h->state = aco__state_on;           /* alone on its stack, for good */
    s->owner = h;
    s->co_ct = 1;
    s->thread = &inited;
    return h;
}

static void hop_free(void) {
    aco_t* h = hop;
    aco_share_stack_t* s = h->share_stack;
    hop = NULL;
    tool_frames_dead(h, 1);
    tool_stack_destroy(s);
    check("aco_destroy", munmap(s->real_ptr, s->real_sz) == 0, "munmap failed: %s",
          strerror(errno));
    dealloc(s, stack_rec_bytes());
    dealloc(h, co_bytes());
}

__attribute__((noinline, cold, noreturn))
static void yield_to_misuse(aco_t* co) {
    static const char fn[] = "aco_yield_to";
    aco_t* cur = aco_gtls_co;
    if (cur == NULL || cur->main_co == NULL) aco__yield_misuse(fn);
    if (co == NULL || !LIVE(co)) aco__not_a_co(fn, co);
    check(fn, co != cur, "co %p is the caller; a co cannot hand off to itself", (void*)co);
    check(fn, co->main_co == cur->main_co, "co %p belongs to main co %p, not to the "
          "caller's (%p)", (void*)co, (void*)co->main_co, (void*)cur->main_co);
    check(fn, !co->is_end, "co %p has ended (it called aco_exit())", (void*)co);
    fatal(fn, "co %p: inconsistent state", (void*)co);
}

/* Through the hand-off co. */
__attribute__((noinline))
static void hop_switch(aco_t* cur, aco_t* co) {
    if (aco_unlikely(hop == NULL)) hop = hop_make("aco_yield_to", cur->main_co);
    hop_from = cur;
    hop_to = co;
    aco_gtls_co = hop;
    aco__sw(cur, hop);
}

void aco_yield_to(aco_t* co) {
    aco_t* cur = aco_gtls_co;
    /* cur must be a non-main co (its main_co not NULL), co another co of
     * its main co; co == cur->main_co is aco_yield. */
    if (aco_unlikely(cur == NULL || co == NULL || co == cur || cur->main_co == NULL ||
                     co->main_co != cur->main_co)) {
        if (cur != NULL && co == cur->main_co && co != NULL) {
            aco__yield_inline();
            return;
        }
        yield_to_misuse(co);
    }
    uint16_t st = state_word(co);
    if (aco_likely(st == STATE_WORD(0, aco__state_on))) {
        aco_gtls_co = co;
        aco__sw(cur, co);       /* a tail jump, as in aco_resume */
        return;
    }
    if (aco_unlikely(st != STATE_WORD(0, aco__state_off))) yield_to_misuse(co);
    if (ckd() || co->share_stack == cur->share_stack) {
        hop_switch(cur, co);
        return;
    }
    take_any(co);
}

aco_t* aco_get_co(void) {
    return aco_gtls_co;
}

void* aco_get_arg(void) {
    aco_t* co = aco_gtls_co;
    check("aco_get_arg", co != NULL, "no co in this thread");
    return co->arg;
}

/* ======================================================================== */
/* 10. Exit, reset, destroy                                                 */
/* ======================================================================== */

void aco_exit(void) {
    aco_t* co = aco_gtls_co;
    if (aco_unlikely(co == NULL || co->main_co == NULL)) aco__yield_misuse("aco_exit");
    co->is_end = 1;
    /* Its frames are dead now: the next co on this stack need not save them. */
    co->share_stack->owner = NULL;
    co->state = aco__state_off;
    co->save_stack.valid_sz = 0;
    aco_gtls_co = co->main_co;
    aco__sw_back(co, co->main_co);
    fatal("aco_exit", "co %p was resumed after its end", (void*)co);
}

void aco__exit1(aco_t* co) {
    static const char fn[] = "aco_exit1";
    if (aco_unlikely(co == NULL || !LIVE(co))) aco__not_a_co(fn, co);
    check(fn, co == aco_gtls_co && co->main_co != NULL,
          "co %p must be the running non-main co (the running co is %p)",
          (void*)co, (void*)aco_gtls_co);
    aco_exit();
}

/* A suspended (or ended) co's frames die, by reset or destroy: if it still
 * owns its share stack, nothing of it is saved later. */
static void drop_frames(aco_t* co) {
    aco_share_stack_t* s = co->share_stack;
    int owned = s->owner == co;
    co->state = aco__state_off;
    if (owned) s->owner = NULL;
    tool_frames_dead(co, owned);
}

/* Back to the init state (aco.h).  A co's frames are dead once it ended or
 * is reset: it stops being the owner, and its save stack holds nothing to
 * restore. */
static void reset(const char* fn, aco_t* co, aco_cofuncp_t fp, void* arg) {
    if (aco_unlikely(co == NULL || !LIVE(co))) aco__not_a_co(fn, co);
    check(fn, !aco_is_main_co(co), "co %p is a main co; only non-main cos can be "
          "reset", (void*)co);
    check_ours(fn, co, "reset");
    check(fn, fp != NULL, "fp must not be NULL");
    drop_frames(co);
    co->save_stack.valid_sz = 0;
    co->is_end = 0;
    co->fp = fp;
    co->arg = arg;
    init_regs(co);
}

void aco_reset(aco_t* co) {
    reset("aco_reset", co, co != NULL && LIVE(co) ? co->fp : NULL,
          co != NULL && LIVE(co) ? co->arg : NULL);
}

void aco_reset2(aco_t* co, aco_cofuncp_t fp, void* arg) {
    reset("aco_reset2", co, fp, arg);
}

void aco_destroy(aco_t* co) {
    static const char fn[] = "aco_destroy";
    if (aco_unlikely(co == NULL || !LIVE(co))) aco__not_a_co(fn, co);
    if (aco_is_main_co(co)) {
        if (aco_gtls_co != co) {
            check(fn, aco_gtls_co == NULL || aco_gtls_co->main_co != co,
                  "main co %p cannot be destroyed while co %p runs", (void*)co,
                  (void*)aco_gtls_co);
            fatal(fn, "main co %p is not this thread's main co (%p); destroy a main "
                  "co from its own thread", (void*)co, (void*)aco_gtls_co);
        }
        aco_gtls_co = NULL;
        if (hop != NULL && hop->main_co == co) hop_free();
        gone_mains[gone_next++ % GONE_MAINS] = co;      /* its cos outlive it */
    } else {
        /* A co outlives its main co (aco.h), so a co of this thread is one
         * of its main co now or of one it destroyed; only then is the co's
         * share stack looked at (an object that never was a co would have
         * its pointers followed), and it must be this thread's. */
        aco_t* cur = aco_gtls_co;
        check(fn, co != cur, "co %p is running; a co cannot destroy itself", (void*)co);
        int ours = cur != NULL && (cur == co->main_co || cur->main_co == co->main_co);
        for (unsigned i = 0; i < GONE_MAINS && !ours; i++) ours = gone_mains[i] == co->main_co;
        check(fn, ours && co->share_stack->thread == &inited,
              "co %p belongs to main co %p, not to this thread's nor to one it destroyed "
              "(the caller is co %p): another thread's co, or no co", (void*)co,
              (void*)co->main_co, (void*)cur);
        drop_frames(co);
        if (ckd()) checked_co_destroy(co);
        aco_share_stack_t* s = co->share_stack;
        if (--s->co_ct == 0) s->thread = NULL;  /* free for any thread */
        if (ckd()) checked_shared(s);
        save_free(&co->save_stack);
    }
    co->state = aco__state_dead;     /* the pools keep it: see pool_free */
    co_free(co);
}

/* ======================================================================== */
/* 11. Tool glue: valgrind, ASan, TSan                                      */
/*                                                                          */
/* valgrind (ACO_USE_VALGRIND): share stacks are registered as stacks; pool */
/* slots are announced as heap blocks; a region about to receive restored  */
/* frames is made addressable first (another co may have run deeper there  */
/* and returned, leaving it inaccessible), with the red zone below it.     */
/*                                                                          */
/* ASan and TSan: every switch goes through aco__switch (aco.h's aco__sw), */
/* which announces it: ASan learns the stack the next co runs on and keeps */
/* one fake stack per co (detect_stack_use_after_return=1), TSan switches   */
/* fibers.  A co's frames on a share stack carry ASan state that the bytes  */
/* alone do not: the shadow that marks the red zones around its arrays.  So */
/* a save moves that shadow along with the bytes, into the save buffer     */
/* right after them, and leaves the vacated region unpoisoned for the next  */
/* co; the restore puts it back.  The shadow is read and written directly   */
/* (its mapping from the public __asan_get_shadow_mapping), one byte per    */
/* 8-byte granule: exact, red-zone kinds included, an eighth of the copy's  */
/* cost.  The copies themselves run uninstrumented and never call memcpy    */
/* (ASan checks every memcpy): the bytes they move include red zones.       */
/*                                                                          */
/* Invariant: share-stack bytes outside its owner's live frames (everything */
/* below the owner's stack pointer; the whole stack when it has no owner)   */
/* are unpoisoned.  Frames that return unpoison themselves; a co evicted,   */
/* ended, reset or destroyed has its region unpoisoned here.                */
/* ======================================================================== */

#ifdef ACO_USE_VALGRIND
#include <valgrind/memcheck.h>
#endif
#if aco__asan
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#include <sanitizer/lsan_interface.h>
#endif
#if aco__tsan
#include <sanitizer/tsan_interface.h>
#endif

/* NOSAN: a function the sanitizers leave alone.  clang's
 * no_sanitize("thread") still brackets a function with TSan's
 * __tsan_func_entry/exit, which must not run around a fiber switch;
 * disable_sanitizer_instrumentation (clang >= 14) drops those, and
 * no_sanitize the memory checks (clang 14's ASan ignores the former). */
#if !aco__san_switch
#define NOSAN
#elif defined(__clang__) && defined(__has_attribute) && \
    __has_attribute(disable_sanitizer_instrumentation)
#define NOSAN __attribute__((noinline, disable_sanitizer_instrumentation, \
                             no_sanitize("address", "thread")))
#elif defined(__clang__)
#define NOSAN __attribute__((noinline, no_sanitize("address", "thread")))
#else
#define NOSAN __attribute__((noinline, no_sanitize_address, no_sanitize_thread))
#endif

/* What a co object carries after its aco_t in sanitizer builds. */
#if aco__san_switch
typedef struct {
    void*       asan_fake_stack;    /* its ASan fake stack while switched out */
    const void* asan_stack_lo;      /* main co: its stack, as ASan knows it */
    size_t      asan_stack_sz;
    void*       tsan_fiber;         /* its TSan fiber while it lives (main co:
                                       the thread's), else NULL */
} tool_co;

static inline tool_co* tool_of(aco_t* co) {
    return (tool_co*)(void*)(co + 1);
}

/* The co that made the thread's last switch: the one a co that continues
 * was switched from (asan_entry cannot take acosw's return value). */
static TLS aco_t* switch_from;
#define TOOL_CO_BYTES sizeof(tool_co)
#else
#define TOOL_CO_BYTES 0
#endif

static inline size_t tool_co_extra(void) {
    return TOOL_CO_BYTES;
}

static inline int tool_wants_malloc(void) {
    return aco__asan;
}

static inline void tool_arena_new(void* p, size_t n) {
#if aco__asan
    __lsan_register_root_region(p, n);
#endif
    (void)p, (void)n;
}

static inline int tool_plain_copies(void) {
    return aco__san_switch;
}

/* Word by word, uninstrumented, never memcpy. */
typedef uintptr_t word __attribute__((aligned(1), may_alias));

static NOSAN void tool_copy(void* dst, const void* src, size_t n) {
    char* d = dst;
    const char* s = src;
    for (size_t i = 0; i + sizeof(word) <= n; i += sizeof(word)) {
        __asm__("" : "+r"(i));      /* no memcpy idiom */
        *(word*)(d + i) = *(const word*)(s + i);
    }
    for (size_t i = n & ~(sizeof(word) - 1); i < n; i++)
        ((volatile char*)d)[i] = s[i];      /* a 4-byte tail on 64-bit */
}

#if aco__asan
/* The shadow granule: 1 << scale bytes per shadow byte. */
static size_t asan_scale(void) {
    size_t scale, offset;
    __asan_get_shadow_mapping(&scale, &offset);
    return scale;
}

/* Move the shadow of the granules covering [lo, hi) into buf and unpoison
 * them (out != 0), or write buf back into that shadow (out == 0).  The
 * volatile accesses keep the compiler from calling memcpy or memset. */
static NOSAN void asan_shadow_move(uintptr_t lo, uintptr_t hi, unsigned char* buf,
                                   int out) {
    size_t scale, offset;
    __asan_get_shadow_mapping(&scale, &offset);
    uintptr_t g = (uintptr_t)1 << scale;
    lo &= ~(g - 1);
    hi = (hi + g - 1) & ~(g - 1);
    volatile unsigned char* sh = (volatile unsigned char*)((lo >> scale) + offset);
    size_t n = (size_t)((hi - lo) >> scale);
    for (size_t i = 0; i < n; i++) {
        if (out) {
            buf[i] = sh[i];
            sh[i] = 0;
        } else {
            sh[i] = buf[i];
        }
    }
}

/* Unpoison the granules covering [lo, hi) of a share stack: no co's frames
 * live there any more. */
static void asan_vacate(const void* lo, const void* hi) {
    uintptr_t g = (uintptr_t)1 << asan_scale();
    uintptr_t l = (uintptr_t)lo & ~(g - 1);
    __asan_unpoison_memory_region((void*)l, (size_t)((uintptr_t)hi - l));
}

/* Where a new co starts under ASan (its initial pc): finish the switch that
 * started it, then call its function.  aco_protector_ret stays the return
 * address of this frame (lr-register architectures: the protector is in lr
 * at entry and this frame's own return goes there), so the stack's shape is
 * as without ASan plus one frame. */
static NOSAN void asan_entry(void) {
    aco_t* co = aco_gtls_co;
    tool_co* m = tool_of(co->main_co);
    const void* lo;
    size_t sz;
    __sanitizer_finish_switch_fiber(NULL, &lo, &sz);
    if (aco_is_main_co(switch_from)) {   /* (not a co handing off) */
        m->asan_stack_lo = lo;
        m->asan_stack_sz = sz;
    }
    co->fp();
    aco__funcp_protector();     /* the co function returned */
}
#endif

/* A saved range [sp, top) is widened to whole granules, one more at each
 * end: the shadow bytes a save buffer of capacity cap needs after it. */
static inline size_t tool_save_extra(size_t cap) {
#if aco__asan
    return (cap >> asan_scale()) + 2;
#else
    return (void)cap, 0;
#endif
}

static inline void tool_stack_new(aco_share_stack_t* s) {
#ifdef ACO_USE_VALGRIND
    s->valgrind_stk_id = VALGRIND_STACK_REGISTER(s->ptr, (char*)s->ptr + s->sz);
#endif
#if aco__asan
    /* LeakSanitizer scans heap blocks and thread stacks, not our mappings:
     * a suspended owner's locals may hold the only pointer to a block. */
    if (s->guard_page_enabled) __lsan_register_root_region(s->ptr, s->sz);
    s->valgrind_stk_id = (unsigned long)(uintptr_t)s->align_highptr;    /* asan_low */
#endif
    (void)s;
}

static inline void tool_stack_destroy(aco_share_stack_t* s) {
#ifdef ACO_USE_VALGRIND
    VALGRIND_STACK_DEREGISTER(s->valgrind_stk_id);
#endif
#if aco__asan
    /* No stale poison for whatever gets the memory next.  Red zones lie
     * only where frames were: above the lowest sp a co switched away at
     * (frames below it returned, and ASan cleared theirs), with a page to
     * spare.  Not the whole stack: the shadow of a big one that was never
     * touched would be written, and made resident, for nothing.  (Checked
     * mode moves stacks: all of it there.) */
    char* lo = (char*)(uintptr_t)s->valgrind_stk_id - 4096;
    if (ckd() || lo < (char*)s->ptr || lo > (char*)s->ptr + s->sz) lo = s->ptr;
    asan_vacate(lo, (char*)s->ptr + s->sz);
    if (s->guard_page_enabled) __lsan_unregister_root_region(s->ptr, s->sz);
#endif
    (void)s;
}

static inline void tool_slot_link_read(void* p) {
#ifdef ACO_USE_VALGRIND
    VALGRIND_MAKE_MEM_DEFINED(p, sizeof(void*));
#endif
    (void)p;
}

static inline void tool_slot_given(void* p, size_t sz) {
#ifdef ACO_USE_VALGRIND
    VALGRIND_MALLOCLIKE_BLOCK(p, sz, 0, 0);
#endif
    (void)p, (void)sz;
}

static inline void tool_slot_taken(void* p) {
#ifdef ACO_USE_VALGRIND
    VALGRIND_FREELIKE_BLOCK(p, 0);
    VALGRIND_MAKE_MEM_UNDEFINED(p, sizeof(void*));
#endif
    (void)p;
}

static inline void tool_slot_linked(void* p) {
#ifdef ACO_USE_VALGRIND
    VALGRIND_MAKE_MEM_NOACCESS(p, sizeof(void*));
#endif
    (void)p;
}

static inline void tool_main_co_new(aco_t* co) {
#if aco__tsan
    tool_of(co)->tsan_fiber = __tsan_get_current_fiber();
#endif
    (void)co;
}

static inline void* tool_entry(aco_t* co) {
#if aco__asan
    (void)co;
    return (void*)asan_entry;   /* it finishes the switch first */
#else
    return (void*)co->fp;
#endif
}

static inline void tool_saved(aco_t* owner, size_t n) {
#if aco__asan
    aco_save_stack_t* ss = &owner->save_stack;
    asan_shadow_move((uintptr_t)SP(owner), (uintptr_t)owner->share_stack->align_highptr,
                     (unsigned char*)ss->ptr + SS_CAP(ss), 1);
#endif
    (void)owner, (void)n;
}

/* Bytes below the stack pointer that memcheck treats as addressable: the
 * x86-64 red zone (psABI 3.2.2). */
#if defined(__x86_64__)
#define RED_ZONE 128
#else
#define RED_ZONE 0
#endif

static inline void tool_restoring(aco_t* co, char* dst, size_t n) {
#ifdef ACO_USE_VALGRIND
    /* Make co's region and its red zone addressable; the copy then carries
     * the saved definedness (memcheck checks a call's push against the red
     * zone's state). */
    char* low = dst - RED_ZONE;
    if (low < (char*)co->share_stack->ptr) low = co->share_stack->ptr;
    VALGRIND_MAKE_MEM_UNDEFINED(low, (size_t)(dst - low) + n);
#endif
    (void)co, (void)dst, (void)n;
}

static inline void tool_restored(aco_t* co, char* dst, size_t n) {
#if aco__asan
    /* n == 0 (a co that never ran) finds the region clean: the invariant. */
    asan_shadow_move((uintptr_t)dst, (uintptr_t)co->share_stack->align_highptr,
                     (unsigned char*)co->save_stack.ptr + SS_CAP(&co->save_stack), 0);
#endif
    (void)co, (void)dst, (void)n;
}

/* ASan: the dead frames' red zones are cleared (a fake stack cannot be
 * freed from outside its co: ASan frees one only when its co leaves for
 * good, in aco_exit).  TSan: the co's fiber, which holds them, goes. */
static inline void tool_frames_dead(aco_t* co, int owned_stack) {
#if aco__asan
    if (owned_stack) asan_vacate(SP(co), co->share_stack->align_highptr);
#endif
#if aco__tsan
    tool_co* t = tool_of(co);
    if (t->tsan_fiber != NULL) __tsan_destroy_fiber(t->tsan_fiber);
    t->tsan_fiber = NULL;
#endif
    (void)co, (void)owned_stack;
}

#if aco__san_switch
/* Every switch of a sanitizer build (aco.h's aco__sw).  Uninstrumented:
 * TSan's fiber switch must come right before the stack switch with no
 * instrumented code between them, and ASan must not see the stacks change
 * under it. */
aco_t* aco__switch(aco_t* from, aco_t* to) NOSAN;

aco_t* aco__switch(aco_t* from, aco_t* to) {
    tool_co* f = tool_of(from);
    tool_co* t = tool_of(to);
    (void)f, (void)t;
#if aco__asan
    const void* lo;
    size_t sz;
    if (aco_is_main_co(to)) {
        lo = t->asan_stack_lo;      /* recorded when it resumed `from` */
        sz = t->asan_stack_sz;
    } else {
        lo = to->share_stack->ptr;
        sz = to->share_stack->sz;
    }
    /* A co leaving for good passes NULL: ASan frees its fake stack. */
    __sanitizer_start_switch_fiber(from->is_end ? NULL : &f->asan_fake_stack, lo, sz);
#endif
#if aco__tsan
    /* A co's fiber lives from its first run to its end: TSan counts fibers
     * as threads, and in the child of a fork with other threads it stops
     * tracking synchronisation.  Cos created before a fork and run after
     * it (a common test pattern) are then fine. */
    if (t->tsan_fiber == NULL) t->tsan_fiber = __tsan_create_fiber(0);
    /* flags 0: the switch orders what `from` did before what `to` does. */
    __tsan_switch_to_fiber(t->tsan_fiber, 0);
#endif
    switch_from = from;
    acosw(from, to);
    /* Back in `from`, switched to by `came`: a main co by the co it resumed
     * or the last one that co handed off to (aco_yield_to); a non-main co by
     * its main co, or by a co handing off to it. */
    aco_t* came = switch_from;
    (void)came;
#if aco__tsan
    /* Back in a main co from a co that ended: its fiber is done. */
    if (aco_is_main_co(from) && came->is_end) {
        tool_co* c = tool_of(came);
        __tsan_destroy_fiber(c->tsan_fiber);
        c->tsan_fiber = NULL;
    }
#endif
#if aco__asan
    const void* prev_lo;
    size_t prev_sz;
    __sanitizer_finish_switch_fiber(f->asan_fake_stack, &prev_lo, &prev_sz);
    if (!aco_is_main_co(came)) {
        /* how deep its stack has had frames at a switch (asan_low) */
        aco_share_stack_t* cs = came->share_stack;
        if ((uintptr_t)SP(came) < cs->valgrind_stk_id) cs->valgrind_stk_id = (uintptr_t)SP(came);
    }
    if (aco_is_main_co(from)) {
        if (came->is_end)   /* its frames are dead: clear their red zones */
            asan_vacate(SP(came), came->share_stack->align_highptr);
    } else if (aco_is_main_co(came)) {
        tool_co* m = tool_of(from->main_co);
        m->asan_stack_lo = prev_lo;
        m->asan_stack_sz = prev_sz;
    }
#endif
    return came;
}
#endif

/* ======================================================================== */
/* 12. Checked mode (aco.h, "Checked mode")                                 */
/*                                                                          */
/* Each non-main co gets a window: a PROT_NONE reservation of its share     */
/* stack's whole mapping (guard included), at an address of its own.    */
/* The stack's pages live in exactly one place, `at`: the window of the co  */
/* that last took the stack, or home (real_ptr, the library's own view, no  */
/* co runs there) before any did and after that co is destroyed.  Taking   */
/* the stack moves the pages (mremap: page tables, not bytes) into the     */
/* taker's window; the copies then run exactly as in section 8, the old    */
/* owner's frames read at their offset in the new window.  A co's stack    */
/* pointer and every address of its frames are its window's, so a pointer  */
/* kept from one co is in nobody else's window, and it faults wherever the */
/* pages are not, or are closed: a shared stack's pages are closed while   */
/* its owner is suspended.                                                  */
/*                                                                          */
/* Every resume takes checked_resume (the fast path wants aco__state_on,    */
/* which no co has here), which opens the window before the switch and      */
/* closes it after the switch returns, when the co yielded or ended: the    */
/* inlined aco_yield of the program needs no change.                        */
/*                                                                          */
/* A fault in a window is reported from a registry of windows that the     */
/* SIGSEGV handler scans without a lock (entries are published whole).    */
/*                                                                          */
/* Why windows, not poisoning the vacated range for ASan: a stale pointer  */
/* lands in the new owner's frames, which are valid for it, so no state of */
/* the bytes can tell the two apart; only an address of its own per co     */
/* can.  And it needs no ASan build, and stops the kernel too (EFAULT).    */
/* Costs, in this mode only: per co a window of address space and one or   */
/* two of the kernel's mappings; per round trip of a co on a shared stack  */
/* two mprotects, and an mremap more when the stack changes hands (system  */
/* calls: microseconds, and other CPUs interrupted when threads run); a co */
/* alone on its stack nothing after its first resume.  Not caught: what    */
/* aco.h lists (an access while the owner runs, the kernel's own accesses, */
/* which fail instead, a pointer kept past aco_destroy, a co alone).       */
/* ======================================================================== */

#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unwind.h>

#ifndef MREMAP_DONTUNMAP
#define MREMAP_DONTUNMAP 4
#endif
#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

typedef struct {
    char*  at;      /* base of the mapping the stack's pages are in now */
    char   open;    /* they are readable and writable there */
    size_t gap;     /* offsets in a mapping: ptr (the guard's size), */
    size_t hi_off;  /* align_highptr and align_retptr */
    size_t ret_off;
} checked_stack;

typedef struct {
    char*  win;     /* the window: real_sz bytes, the share stack's layout */
    size_t slot;    /* its registry entry */
} checked_co;

static inline checked_stack* cstk(const aco_share_stack_t* s) {
    return (checked_stack*)(void*)(s + 1);
}

static inline checked_co* cco(const aco_t* co) {
    return (checked_co*)(void*)((char*)(co + 1) + tool_co_extra());
}

static size_t stack_rec_bytes(void) {
    return sizeof(aco_share_stack_t) + (ckd() ? sizeof(checked_stack) : 0);
}

static size_t checked_co_extra(void) {
    return sizeof(checked_co);
}

/* Bytes below the stack proper: the guard (guard_bytes), or nothing. */
static size_t stack_gap(const aco_share_stack_t* s) {
    return cstk(s)->gap;
}

/* The lowest byte of co's stack in its window; its align_retptr there. */
static inline char* window_lo(const aco_t* co) {
    return cco(co)->win + cstk(co->share_stack)->gap;
}

static char* checked_top(const aco_t* co) {
    return cco(co)->win + cstk(co->share_stack)->ret_off;
}

static size_t checked_live_bytes(aco_t* owner) {
    size_t n = (uintptr_t)checked_top(owner) - (uintptr_t)SP(owner);
    if (aco_unlikely(n > owner->share_stack->align_limit)) {
        fatal("aco_resume", "co %p's stack pointer %p lies outside its share stack "
              "[%p, %p) (its window in checked mode): it overflowed", (void*)owner,
              SP(owner), (void*)window_lo(owner), (void*)checked_top(owner));
    }
    return n;
}

/* ---- the registry of windows ------------------------------------------- */

typedef struct {
    uintptr_t lo, hi;   /* the window [lo, hi) */
    aco_t* co;          /* NULL: free (hi then links the free entries) */
} win_ent;

#define REG_CHUNK  4096
#define REG_CHUNKS 4096     /* 16M windows: far beyond vm.max_map_count */
static win_ent* reg_chunk[REG_CHUNKS];
static size_t reg_used;         /* entries ever handed out */
static uintptr_t reg_lo = UINTPTR_MAX, reg_hi;  /* every window ever was in */
static size_t reg_free = SIZE_MAX;
static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;

/* fork: no thread may hold the registry's lock across it (as pool_mu). */
static void reg_prefork(void) {
    pthread_mutex_lock(&reg_mu);
}

static void reg_postfork(void) {
    pthread_mutex_unlock(&reg_mu);
}

__attribute__((constructor))
static void reg_atfork(void) {
    pthread_atfork(reg_prefork, reg_postfork, reg_postfork);
}

static win_ent* reg_at(size_t i) {
    return &reg_chunk[i / REG_CHUNK][i % REG_CHUNK];
}

static size_t reg_add(const char* fn, aco_t* co, char* lo, size_t n) {
    pthread_mutex_lock(&reg_mu);
    size_t i = reg_free;
    if (i != SIZE_MAX) {
        reg_free = reg_at(i)->hi;
    } else {
        i = reg_used;
        if (i % REG_CHUNK == 0) {
            void* m = i / REG_CHUNK < REG_CHUNKS
                          ? mmap(NULL, REG_CHUNK * sizeof(win_ent), PROT_READ | PROT_WRITE,
                                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) : MAP_FAILED;
            if (m == MAP_FAILED) {
                pthread_mutex_unlock(&reg_mu);
                fatal(fn, "out of memory (checked mode's registry of windows)");
            }
            __atomic_store_n(&reg_chunk[i / REG_CHUNK], (win_ent*)m, __ATOMIC_RELEASE);
        }
        __atomic_store_n(&reg_used, i + 1, __ATOMIC_RELEASE);
    }
    win_ent* e = reg_at(i);
    e->lo = (uintptr_t)lo;
    e->hi = (uintptr_t)lo + n;
    if (e->lo < reg_lo) __atomic_store_n(&reg_lo, e->lo, __ATOMIC_RELEASE);
    if (e->hi > reg_hi) __atomic_store_n(&reg_hi, e->hi, __ATOMIC_RELEASE);
    __atomic_store_n(&e->co, co, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&reg_mu);
    return i;
}

static void reg_del(size_t i) {
    pthread_mutex_lock(&reg_mu);
    win_ent* e = reg_at(i);
    __atomic_store_n(&e->co, NULL, __ATOMIC_RELEASE);
    e->lo = e->hi = 0;
    e->hi = reg_free;
    reg_free = i;
    pthread_mutex_unlock(&reg_mu);
}

/* The co whose window holds a, or NULL.  Lock-free: the signal handler's. */
static aco_t* reg_find(uintptr_t a) {
    size_t n = __atomic_load_n(&reg_used, __ATOMIC_ACQUIRE);
    for (size_t i = 0; i < n; i++) {
        win_ent* c = __atomic_load_n(&reg_chunk[i / REG_CHUNK], __ATOMIC_ACQUIRE);
        win_ent* e = &c[i % REG_CHUNK];
        aco_t* co = __atomic_load_n(&e->co, __ATOMIC_ACQUIRE);
        if (co != NULL && a >= e->lo && a < e->hi) return co;
    }
    return NULL;
}

/* ---- mappings ----------------------------------------------------------- */

static int checked_stack_map(const char* fn, aco_share_stack_t* s, size_t sz, size_t pg,
                             char guard, int may_fail) {
    size_t gap = guard ? guard_bytes(pg) : 0;
    sz = guard ? (sz + pg - 1) & ~(pg - 1)
               : (sz + STACK_ALIGN - 1) & ~(size_t)(STACK_ALIGN - 1);
    s->real_sz = ((sz + pg - 1) & ~(pg - 1)) + gap;
    s->real_ptr = mmap(NULL, s->real_sz, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (s->real_ptr == MAP_FAILED || (gap && mprotect(s->real_ptr, gap, PROT_NONE) != 0)) {
        int e = errno;
        if (s->real_ptr != MAP_FAILED) munmap(s->real_ptr, s->real_sz);
        check(fn, may_fail, "out of memory (mmap of %zu bytes failed: %s)", s->real_sz,
              strerror(e));
        errno = ENOMEM;
        return 0;
    }
    s->ptr = (char*)s->real_ptr + gap;
    s->sz = sz;
    s->guard_page_enabled = guard ? 1 : 0;
    cstk(s)->at = s->real_ptr;
    cstk(s)->open = 1;
    cstk(s)->gap = gap;
    return 1;
}

/* stack_new has laid the stack out at home: note where, in any mapping. */
static void checked_stack_laid(aco_share_stack_t* s) {
    cstk(s)->hi_off = (size_t)((char*)s->align_highptr - (char*)s->real_ptr);
    cstk(s)->ret_off = (size_t)((char*)s->align_retptr - (char*)s->real_ptr);
}

static void checked_stack_unmap(const char* fn, aco_share_stack_t* s) {
    check(fn, cstk(s)->at == (char*)s->real_ptr, "checked mode: share stack %p's "
          "pages are not home", (void*)s);
    check(fn, munmap(s->real_ptr, s->real_sz) == 0, "munmap failed: %s", strerror(errno));
}

/* Open or close the pages of s where they are. */
static void pages_prot(aco_share_stack_t* s, int open) {
    checked_stack* cs = cstk(s);
    if (cs->open == open) return;
    check("aco_resume", mprotect(cs->at + stack_gap(s), s->real_sz - stack_gap(s),
                                 open ? PROT_READ | PROT_WRITE : PROT_NONE) == 0,
          "checked mode: mprotect of a window failed: %s (out of memory mappings? see "
          "vm.max_map_count)", strerror(errno));
    cs->open = (char)open;
}

/* Move the pages of s to the mapping at `to` (a window, or home), open.
 * The place they leave stays reserved, PROT_NONE: MREMAP_DONTUNMAP leaves
 * it mapped and empty (Linux >= 5.7); else it is mapped again, never over
 * anything another thread may have mapped in the moment between. */
static void pages_move(aco_share_stack_t* s, char* to) {
    static const char fn[] = "aco_resume";
    checked_stack* cs = cstk(s);
    size_t gap = stack_gap(s), n = s->real_sz - gap;
    char* from = cs->at;
    if (from == to) {
        pages_prot(s, 1);
        return;
    }
    pages_prot(s, 0);               /* what the old place keeps */
    void* r = mremap(from + gap, n, n, MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP,
                     to + gap);
    if (r == MAP_FAILED && errno == EINVAL) {
        r = mremap(from + gap, n, n, MREMAP_MAYMOVE | MREMAP_FIXED, to + gap);
        if (r != MAP_FAILED) {
            void* m = mmap(from + gap, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS |
                           MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
            check(fn, m == from + gap, "checked mode: cannot reserve a window again "
                  "(mmap: %s)", m == MAP_FAILED ? strerror(errno) : "elsewhere");
        }
    }
    check(fn, r == to + gap, "checked mode: mremap of a share stack's pages failed: %s "
          "(out of memory mappings? see vm.max_map_count)", strerror(errno));
    cs->at = to;
    cs->open = 0;
    pages_prot(s, 1);
    /* The record tells where the stack is now (aco.h). */
    s->ptr = to + gap;
    s->align_highptr = to + cs->hi_off;
    s->align_retptr = to + cs->ret_off;
}

static void checked_co_new(const char* fn, aco_t* co) {
    aco_share_stack_t* s = co->share_stack;
    char* w = mmap(NULL, s->real_sz, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    check(fn, w != MAP_FAILED, "checked mode: out of address space or mappings (mmap of "
          "a co's window of %zu bytes failed: %s; see vm.max_map_count)", s->real_sz,
          strerror(errno));
    cco(co)->win = w;
    cco(co)->slot = reg_add(fn, co, w, s->real_sz);
}

/* s gained or lost a co: the pages of its owner, if it is suspended, are
 * open exactly when it is alone on s (aco.h); those of an ended co, or of
 * none (home), stay as they are. */
static void checked_shared(aco_share_stack_t* s) {
    checked_stack* cs = cstk(s);
    aco_t* owner = s->owner;
    if (owner == NULL || cco(owner)->win != cs->at || owner == aco_gtls_co) return;
    pages_prot(s, s->co_ct == 1);
}

/* co is destroyed: its pages go home first if they are in its window. */
static void checked_co_destroy(aco_t* co) {
    aco_share_stack_t* s = co->share_stack;
    checked_co* c = cco(co);
    if (cstk(s)->at == c->win) pages_move(s, s->real_ptr);
    reg_del(c->slot);
    check("aco_destroy", munmap(c->win, s->real_sz) == 0, "munmap failed: %s",
          strerror(errno));
    c->win = NULL;
}

/* aco_resume in checked mode: section 8's take, on windows, with memcpy
 * (the copies are not what this mode is for), then the switch, which
 * returns here when co yields or ends. */
/* Before co runs: its stack's pages in its window, open, its frames in
 * place (the owner's saved). */
static void checked_open(aco_t* co) {
    static const char fn[] = "aco_resume";
    aco_share_stack_t* s = co->share_stack;
    aco_t* owner = s->owner;
    if (owner != co) {
        size_t n = 0;
        if (owner != NULL) {
            aco_save_stack_t* ss = &owner->save_stack;
            n = checked_live_bytes(owner);
            if (n > SS_CAP(ss)) {
                check(fn, n <= SAVE_MAX, "co %p has %zu live bytes on its share stack: a "
                      "save stack holds less than 4 GiB", (void*)owner, n);
                size_t cap = save_capacity(n);
                save_free(ss);
                ss->ptr = save_alloc(cap, fn);
                ss->sz |= (uint32_t)cap;
            }
        }
        pages_move(s, cco(co)->win);
        if (owner != NULL) {
            /* The owner's frames, at their offset in co's window now. */
            char* src = (char*)SP(owner) - cco(owner)->win + cco(co)->win;
            aco_save_stack_t* ss = &owner->save_stack;
            if (n > 0) {
                copy(ss->ptr, src, n, 0);
                ss->ct_save++;
            }
            ss->valid_sz = (uint32_t)n;
            if (n > ss->max_cpsz) ss->max_cpsz = n;
        }
        size_t m = co->save_stack.valid_sz;
        if (m > 0) {
            copy(checked_top(co) - m, co->save_stack.ptr, m, 0);
            co->save_stack.ct_restore++;
        }
        s->owner = co;
    } else {
        pages_move(s, cco(co)->win);        /* there already: opens them */
    }
}

/* co yielded, ended or handed off.  Its frames stay where they are; nobody
 * else may touch them now, unless co is alone on its stack (aco.h). */
static void checked_close(aco_t* co) {
    aco_share_stack_t* s = co->share_stack;
    if (cstk(s)->at == cco(co)->win && (co->is_end || s->co_ct > 1)) pages_prot(s, 0);
}

static aco_t* checked_resume(aco_t* co) {
    checked_open(co);
    aco_t* cur = aco_gtls_co;
    aco_gtls_co = co;
    aco_t* last = aco__sw(cur, co);     /* co, or the last it handed off to */
    checked_close(last);
    return last;
}

/* ---- the public calls --------------------------------------------------- */

int aco_checked(void) {
    return checked_decide();
}

int aco_on_share_stack(const aco_t* co, const void* p, size_t n) {
    if (co == NULL || p == NULL || co->main_co == NULL) return 0;
    const aco_share_stack_t* s = co->share_stack;
    uintptr_t lo = (uintptr_t)s->ptr, a = (uintptr_t)p;
    if (ckd()) lo = (uintptr_t)window_lo(co);
    if (n == 0) n = 1;
    return a < lo + s->sz && a + n > lo;
}

/* Set by aco_checked_access for the report: 1 read, 2 write; its callers
 * (frame 0 is aco_checked_access). */
#define HANDING_FRAMES 5
static TLS int handing;
static TLS void* handing_pcs[HANDING_FRAMES];
static TLS int handing_n;

/* The calls that led here, by libgcc's unwinder (glibc's backtrace() needs
 * libgcc_s.so, which a static program lacks). */
static _Unwind_Reason_Code handing_step(struct _Unwind_Context* c, void* arg) {
    (void)arg;
    handing_pcs[handing_n] = (void*)_Unwind_GetIP(c);
    return ++handing_n == HANDING_FRAMES ? _URC_END_OF_STACK : _URC_NO_REASON;
}

/* The first byte of [a, end) on the stack part of a window that is closed
 * or empty (a touch would fault there), or 0.  One pass over the registry,
 * after two cheap answers: the bytes are all in the calling co's own open
 * window, or outside every window there ever was. */
static uintptr_t first_closed(uintptr_t a, uintptr_t end) {
    aco_t* cur = aco_gtls_co;
    if (cur != NULL && cur->main_co != NULL && cstk(cur->share_stack)->at == cco(cur)->win &&
        a >= (uintptr_t)window_lo(cur) &&
        end <= (uintptr_t)cco(cur)->win + cur->share_stack->real_sz)
        return 0;
    if (end <= __atomic_load_n(&reg_lo, __ATOMIC_ACQUIRE) ||
        a >= __atomic_load_n(&reg_hi, __ATOMIC_ACQUIRE))
        return 0;
    size_t n = __atomic_load_n(&reg_used, __ATOMIC_ACQUIRE);
    for (size_t i = 0; i < n; i++) {
        win_ent* e = &__atomic_load_n(&reg_chunk[i / REG_CHUNK], __ATOMIC_ACQUIRE)[i % REG_CHUNK];
        aco_t* co = __atomic_load_n(&e->co, __ATOMIC_ACQUIRE);
        if (co == NULL || a >= e->hi || end <= e->lo) continue;
        uintptr_t lo = (uintptr_t)window_lo(co), x = a > lo ? a : lo;
        if (x >= end || x >= e->hi) continue;   /* only its guard */
        checked_stack* cs = cstk(co->share_stack);
        if (cs->at != cco(co)->win || !cs->open) return x;
    }
    return 0;
}

void aco_checked_access(const void* p, size_t n, int write) {
    if (!ckd() || p == NULL) return;
    if (n == 0) n = 1;
    uintptr_t a = (uintptr_t)p, end = a + n < a ? UINTPTR_MAX : a + n;
    uintptr_t x = first_closed(a, end);
    if (x == 0) return;
    handing = write ? 2 : 1;
    handing_n = 0;
    _Unwind_Backtrace(handing_step, NULL);
    if (handing_n < 2) {    /* no unwind tables (riscv64's default): the caller */
        handing_pcs[1] = __builtin_return_address(0);
        handing_n = 2;
    }
    __atomic_signal_fence(__ATOMIC_SEQ_CST);    /* the handler reads them */
    (void)*(volatile const char*)x;     /* faults: the report, then death */
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    handing = 0;
}

/* ---- the report --------------------------------------------------------- */

/* Lines built in a buffer and written with err_write: the handler's. */
typedef struct {
    char b[1024];
    size_t n;
} line_buf;

static void lb_str(line_buf* l, const char* s) {
    while (*s && l->n < sizeof(l->b) - 1) l->b[l->n++] = *s++;
}

static void lb_hex(line_buf* l, uintptr_t v) {
    char tmp[2 + 2 * sizeof(v) + 1];
    *put_hex(tmp, v) = '\0';
    lb_str(l, tmp);
}

static void lb_flush(line_buf* l) {
    err_write(l->b, l->n);
    l->n = 0;
}

/* Is v in an executable segment of a loaded object (so possibly a return
 * address)?  dl_iterate_phdr works in static programs too. */
typedef struct {
    uintptr_t v;
    int found;
} text_q;

static int text_cb(struct dl_phdr_info* info, size_t sz, void* arg) {
    text_q* q = arg;
    (void)sz;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr)* ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && q->v >= lo + 8 &&
            q->v < lo + ph->p_memsz) {
            q->found = 1;
            return 1;
        }
    }
    return 0;
}

/* A return address: in code, and (where the instruction set makes it
 * cheap to tell) right after a call. */
static int looks_like_return(uintptr_t v) {
    text_q q = {v, 0};
    dl_iterate_phdr(text_cb, &q);
    if (!q.found) return 0;
#if defined(__x86_64__) || defined(__i386__)
    const unsigned char* c = (const unsigned char*)v;
    if (c[-5] == 0xe8) return 1;                                    /* call rel32 */
    if (c[-2] == 0xff && (c[-1] & 0xf8) == 0xd0) return 1;          /* call *%reg */
    if (c[-3] == 0xff && (c[-2] & 0x38) == 0x10) return 1;          /* call *d8(..) */
    if (c[-6] == 0xff && (c[-5] & 0x38) == 0x10) return 1;          /* call *d32(..) */
    if (c[-7] == 0xff && (c[-6] & 0x38) == 0x10) return 1;          /* with a SIB */
    if (c[-4] == 0xff && (c[-3] & 0x38) == 0x10) return 1;          /* call *d8(sib) */
    return 0;
#elif defined(__aarch64__)
    uint32_t insn;
    memcpy(&insn, (const char*)v - 4, 4);
    return (insn & 0xfc000000u) == 0x94000000u ||                   /* bl */
           (insn & 0xfffffc1fu) == 0xd63f0000u ||                   /* blr */
           (insn & 0xfffffc1fu) == 0xd63f081fu;                     /* blraa(z) ... */
#else
    return 1;
#endif
}

/* The child of describe_pc's sys_fork: addr2line's answer into fds[1],
 * nothing else of it anywhere.  System calls alone (a sanitizer's libc
 * wrappers may wait for a lock another thread of the parent held). */
__attribute__((noreturn))
static void addr2line_child(const int fds[2], const char* path, const char* obj,
                            const char* hex) {
    sys_dup2(fds[1], 1);
    int null = (int)syscall(SYS_openat, AT_FDCWD, "/dev/null", O_RDWR);
    if (null >= 0) { sys_dup2(null, 0); sys_dup2(null, 2); }
    sys_close(fds[0]);
    const char* argv[] = {"addr2line", "-f", "-i", "-p", "-C", "-e", obj, hex, NULL};
    static const char name[] = "/addr2line";
    char file[512];
    for (const char* d = path; ; d++) {          /* each directory of PATH */
        const char* e = d;
        while (*e != '\0' && *e != ':') e++;
        size_t n = (size_t)(e - d);
        if (n == 0) {
            file[0] = '.';          /* an empty entry: the current directory */
            n = 1;
        } else if (n < sizeof(file) - sizeof(name)) {
            memcpy(file, d, n);
        }
        if (n < sizeof(file) - sizeof(name)) {
            memcpy(file + n, name, sizeof(name));
            (void)syscall(SYS_execve, file, argv, environ);
        }
        if (*e == '\0') break;
        d = e;
    }
    for (;;) (void)syscall(SYS_exit_group, 127);
}

/* "function (file:line)" of pc (the call's line for a return address:
 * pass pc - 1) on lines of their own, through addr2line where it is
 * installed and the program has debug information; else what dladdr
 * knows; else the bare pc. */
static void describe_pc(line_buf* l, const char* indent, uintptr_t pc) {
    Dl_info di;
    memset(&di, 0, sizeof(di));
    int have = dladdr((void*)pc, &di) != 0;
    /* The program's own path (addr2line's /proc/self/exe would be itself). */
    char exe[512];
    ssize_t en = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    exe[en > 0 ? en : 0] = '\0';
    const char* obj = exe;
    uintptr_t rel = pc;
    if (have && di.dli_fname != NULL && di.dli_fname[0] != '\0' && di.dli_fbase != NULL &&
        strcmp(di.dli_fname, program_invocation_name) != 0)
        obj = di.dli_fname;
    if (have && di.dli_fbase != NULL &&
        ((const ElfW(Ehdr)*)di.dli_fbase)->e_type == ET_DYN)
        rel = pc - (uintptr_t)di.dli_fbase;
    char out[1024];
    size_t got = 0;
    int fds[2];
    if (obj[0] != '\0' && pipe(fds) == 0) {
        char hex[2 + 2 * sizeof(rel) + 1];
        *put_hex(hex, rel) = '\0';
        const char* path = getenv("PATH");
        pid_t pid = sys_fork();
        if (pid == 0) addr2line_child(fds, path ? path : "/usr/bin:/bin", obj, hex);
        sys_close(fds[1]);
        if (pid > 0) {
            long r;
            while (got < sizeof(out) - 1 &&
                   ((r = sys_read(fds[0], out + got, sizeof(out) - 1 - got)) > 0 ||
                    (r < 0 && errno == EINTR)))
                if (r > 0) got += (size_t)r;
            int st;
            while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
        }
        sys_close(fds[0]);
    }
    out[got] = '\0';
    if (got > 0 && strncmp(out, "??", 2) != 0) {
        /* "f at file:line\n (inlined by) g at file:line\n": one line each */
        for (char* line = out; *line;) {
            char* nl = strchr(line, '\n');
            if (nl) *nl = '\0';
            lb_str(l, "aco: checked: ");
            lb_str(l, indent);
            lb_str(l, line);
            lb_str(l, "\n");
            if (!nl) break;
            line = nl + 1;
        }
        return;
    }
    lb_str(l, "aco: checked: ");
    lb_str(l, indent);
    if (have && di.dli_sname != NULL) {
        lb_str(l, di.dli_sname);
        lb_str(l, "+");
        lb_hex(l, pc - (uintptr_t)di.dli_saddr);
        lb_str(l, " ");
    }
    lb_str(l, "(pc ");
    lb_hex(l, pc);
    lb_str(l, " in ");
    lb_str(l, have && di.dli_fname ? di.dli_fname : "the program");
    lb_str(l, "; no debug information or no addr2line)\n");
}

static void describe_co(line_buf* l, const aco_t* co) {
    if (co == NULL) {
        lb_str(l, "a thread with no co");
        return;
    }
    lb_str(l, co->main_co == NULL ? "main co " : "co ");
    lb_hex(l, (uintptr_t)co);
    if (co->main_co != NULL) {
        lb_str(l, " (co function ");
        lb_hex(l, (uintptr_t)co->fp);
        lb_str(l, ")");
    }
}

/* The pc of the access, and whether it wrote (1), read (0) or the machine
 * does not say (-1). */
static uintptr_t fault_pc(void* ctx, int* wrote) {
    ucontext_t* uc = ctx;
    *wrote = -1;
#if defined(__x86_64__)
    *wrote = (uc->uc_mcontext.gregs[REG_ERR] & 2) != 0;
    return (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
#elif defined(__i386__)
    *wrote = (uc->uc_mcontext.gregs[REG_ERR] & 2) != 0;
    return (uintptr_t)uc->uc_mcontext.gregs[REG_EIP];
#elif defined(__aarch64__)
    /* The kernel's esr_context among the records after the registers. */
    struct _aarch64_ctx* h = (struct _aarch64_ctx*)(void*)uc->uc_mcontext.__reserved;
    for (size_t off = 0; off + sizeof(*h) <= sizeof(uc->uc_mcontext.__reserved) && h->magic;
         off += h->size, h = (struct _aarch64_ctx*)(void*)((char*)h + h->size)) {
        if (h->magic == ESR_MAGIC) {
            uint64_t esr = ((struct esr_context*)(void*)h)->esr;
            unsigned ec = (unsigned)(esr >> 26) & 0x3f;
            if (ec == 0x24 || ec == 0x25) *wrote = (esr >> 6) & 1;     /* WnR */
            break;
        }
        if (h->size == 0) break;
    }
    return (uintptr_t)uc->uc_mcontext.pc;
#else
    return (uintptr_t)uc->uc_mcontext.__gregs[REG_PC];
#endif
}

/* The unwinder, run on owner's own stack: its frames are put back where
 * they were (read-only pages opened; an evicted co's bytes copied from its
 * save stack into its window), then acosw enters unwind_entry as if
 * owner's suspended frame had called it (its registers, its stack pointer,
 * its resume address as the return address), which records each frame's pc
 * and the CFA libgcc gives with it, which is the stack pointer of that frame
 * at its call (the CFA of the frame it called): frame i spans
 * [CFA(i), CFA(i + 1)), the outermost up to the top of the stack.  The
 * process dies after the report: what this leaves in the window does not
 * matter, but the window is closed again so that the access faults again. */

#define UW_FRAMES 64
static aco_t uw_back, uw_fake;
static uintptr_t uw_ip[UW_FRAMES], uw_cfa[UW_FRAMES];
static int uw_n;

static _Unwind_Reason_Code unwind_step(struct _Unwind_Context* c, void* arg) {
    (void)arg;
    uw_ip[uw_n] = (uintptr_t)_Unwind_GetIP(c);
    uw_cfa[uw_n] = (uintptr_t)_Unwind_GetCFA(c);
    if (uw_ip[uw_n] == 0 || ++uw_n == UW_FRAMES) return _URC_END_OF_STACK;
    return _URC_NO_REASON;
}

static NOSAN __attribute__((noinline)) void unwind_entry(void) {
    uw_n = 0;
    _Unwind_Backtrace(unwind_step, NULL);
    acosw(&uw_fake, &uw_back);      /* back into unwind_owner */
}

static int unwind_owner(aco_t* owner, uintptr_t a, uintptr_t* lo, uintptr_t* hi,
                        uintptr_t* pc) {
    aco_share_stack_t* s = owner->share_stack;
    char* stk = window_lo(owner);
    size_t n = s->real_sz - stack_gap(s);
    if (mprotect(stk, n, PROT_READ | PROT_WRITE) != 0) return 0;
    if (s->owner != owner || cstk(s)->at != cco(owner)->win) {    /* evicted */
        if (owner->save_stack.ptr == NULL) return 0;
        memcpy(SP(owner), owner->save_stack.ptr, owner->save_stack.valid_sz);
#ifndef ACO_OFF_LR
        *(const void**)checked_top(owner) = aco_protector_ret;
#endif
    }
    memcpy(&uw_fake, owner, sizeof(uw_fake));
    PC(&uw_fake) = (void*)(uintptr_t)unwind_entry;
#ifdef ACO_OFF_LR
    uw_fake.reg[aco__slot_lr] = PC(owner);
#else
    char* sp = (char*)SP(owner) - sizeof(void*);
    memcpy(sp, &PC(owner), sizeof(void*));
    SP(&uw_fake) = sp;
#endif
    uw_n = 0;
    acosw(&uw_back, &uw_fake);
    mprotect(stk, n, PROT_NONE);
    /* uw 0 is unwind_entry; 1 owner's suspended frame; then its callers. */
    for (int i = 1; i < uw_n; i++) {
        uintptr_t end = i + 1 < uw_n ? uw_cfa[i + 1] : (uintptr_t)checked_top(owner);
        if (a >= uw_cfa[i] && a < end) {
            *lo = uw_cfa[i];
            *hi = end;
            *pc = uw_ip[i];
            return 1;
        }
    }
    return 0;
}

/* The frame of owner's that a lies in: the nearest return address below a
 * (between owner's stack pointer and a) is the call the frame's function
 * made last; none: a is in the innermost frame, whose function owner is
 * suspended in (its saved pc).  Read from the pages (opened: the process
 * dies after the report) or from owner's save stack. */
static void owner_frame(line_buf* l, aco_t* owner, uintptr_t a) {
    aco_share_stack_t* s = owner->share_stack;
    uintptr_t sp = (uintptr_t)SP(owner), top = (uintptr_t)checked_top(owner);
    if (owner->is_end) {
        lb_str(l, "aco: checked:   it has ended: its frames are dead\n");
        return;
    }
    if (sp == top) {
        lb_str(l, "aco: checked:   it has not started: it has no frames\n");
        return;
    }
    if (a < sp) {
        lb_str(l, "aco: checked:   the address is below its stack pointer ");
        lb_hex(l, sp);
        lb_str(l, ": in no live frame of it (a frame that returned)\n");
        return;
    }
    if (a >= top) {
        lb_str(l, "aco: checked:   the address is above its live frames (top ");
        lb_hex(l, top);
        lb_str(l, "): the top of its stack, in no frame\n");
        return;
    }
    uintptr_t lo, hi, pc;
    if (unwind_owner(owner, a, &lo, &hi, &pc)) {
        lb_str(l, "aco: checked:   the address lies in its frame [");
        lb_hex(l, lo);
        lb_str(l, ", ");
        lb_hex(l, hi);
        lb_str(l, ") of:\n");
        describe_pc(l, "    ", pc - 1);
        return;
    }
    /* No unwinder answer: guess by the nearest return address. */
    int on_stack = s->owner == owner, opened = 0;
    const char* base;       /* where the byte at sp is readable now */
    if (on_stack) {
        /* Opened for the reads below, closed again: the access must fault
         * again when the handler returns, for good. */
        opened = cstk(s)->at == cco(owner)->win && !cstk(s)->open &&
                 mprotect(cstk(s)->at + stack_gap(s), s->real_sz - stack_gap(s),
                          PROT_READ) == 0;
        base = (const char*)sp;
    } else {
        base = owner->save_stack.ptr;
        if (base == NULL) return;
    }
    pc = (uintptr_t)PC(owner), lo = sp, hi = top;
    for (uintptr_t x = (a & ~(uintptr_t)(sizeof(void*) - 1)); x >= sp + sizeof(void*);) {
        x -= sizeof(void*);
        uintptr_t v;
        memcpy(&v, base + (x - sp), sizeof(v));
        if (looks_like_return(v)) {
            pc = v;
            lo = x + sizeof(void*);
            break;
        }
    }
    for (uintptr_t x = (a & ~(uintptr_t)(sizeof(void*) - 1)); x + sizeof(void*) <= top;
         x += sizeof(void*)) {
        uintptr_t v;
        memcpy(&v, base + (x - sp), sizeof(v));
        if (looks_like_return(v)) {
            hi = x + sizeof(void*);
            break;
        }
    }
    if (opened)
        mprotect(cstk(s)->at + stack_gap(s), s->real_sz - stack_gap(s), PROT_NONE);
    lb_str(l, "aco: checked:   the address lies in its frame [");
    lb_hex(l, lo);
    lb_str(l, ", ");
    lb_hex(l, hi);
    lb_str(l, ") of:\n");
    describe_pc(l, "    ", pc - 1);
}

static struct sigaction checked_prev;

/* Hand a fault that is not ours on, as overflow_handler does. */
static void checked_chain(int sig, siginfo_t* si, void* ctx) {
    if (checked_prev.sa_flags & SA_SIGINFO) {
        checked_prev.sa_sigaction(sig, si, ctx);
    } else if (checked_prev.sa_handler != SIG_DFL && checked_prev.sa_handler != SIG_IGN) {
        checked_prev.sa_handler(sig);
    } else {
        signal(sig, SIG_DFL);
    }
}

static void checked_handler(int sig, siginfo_t* si, void* ctx) {
    int saved_errno = errno;
    uintptr_t a = (uintptr_t)si->si_addr;
    aco_t* owner = reg_find(a);
    if (owner == NULL) {
        checked_chain(sig, si, ctx);
        errno = saved_errno;
        return;
    }
    aco_t* cur = aco_gtls_co;
    aco_share_stack_t* s = owner->share_stack;
    line_buf l;
    l.n = 0;
    uintptr_t lo = (uintptr_t)window_lo(owner);
    if (a < lo) {
        /* The window's guard: the running co overflowed (or a pointer
         * far below a frame).  aco_overflow_report_install's line, if asked. */
        if (owner == cur && overflow_installed) {
            lb_str(&l, "aco: co ");
            lb_hex(&l, (uintptr_t)owner);
            lb_str(&l, " overflowed its share stack ");
            lb_hex(&l, (uintptr_t)s);
            lb_str(&l, " [");
            lb_hex(&l, lo);
            lb_str(&l, ", ");
            lb_hex(&l, lo + s->sz);
            lb_str(&l, "), ");
            lb_hex(&l, s->sz);
            lb_str(&l, " bytes: fault at ");
            lb_hex(&l, a);
            lb_str(&l, " in its guard region (co function ");
            lb_hex(&l, (uintptr_t)owner->fp);
            lb_str(&l, ")\n");
            lb_flush(&l);
        }
        signal(sig, SIG_DFL);
        errno = saved_errno;
        return;
    }
    int wrote;
    uintptr_t pc = fault_pc(ctx, &wrote);
    int hand = handing;
    if (hand) wrote = hand == 2;
    lb_str(&l, "aco: checked: ");
    describe_co(&l, cur);
    lb_str(&l, hand ? (wrote ? " handed on for writing " : " handed on for reading ")
                    : wrote == 1 ? " wrote " : wrote == 0 ? " read " : " accessed ");
    lb_hex(&l, a);
    lb_str(&l, ": a byte of the stack of ");
    describe_co(&l, owner);
    int evicted = s->owner != owner && !owner->is_end && SP(owner) != checked_top(owner);
    lb_str(&l, owner->is_end ? ", which has ended"
               : SP(owner) == checked_top(owner) ? ", which has not started"
               : owner == cur ? ", which is running (on another thread?)"
               : evicted ? ", which is suspended (its frames evicted to its save stack)"
                         : ", which is suspended");
    lb_str(&l, "\naco: checked:   a pointer into a co's frames was used while that co was "
               "not running (share stack ");
    lb_hex(&l, (uintptr_t)s);
    lb_str(&l, ", that co's window [");
    lb_hex(&l, lo);
    lb_str(&l, ", ");
    lb_hex(&l, lo + s->sz);
    lb_str(&l, "))\naco: checked:   the access, by ");
    describe_co(&l, cur);
    lb_str(&l, ", in:\n");
    lb_flush(&l);
    if (hand) {     /* the calls that led to aco_checked_access */
        for (int i = 1; i < handing_n; i++) {
            if ((const char*)handing_pcs[i] == aco_protector_ret) break;   /* the co's bottom */
            describe_pc(&l, "    ", (uintptr_t)handing_pcs[i] - 1);
            lb_flush(&l);
        }
    } else {
        describe_pc(&l, "    ", pc);
    }
    lb_flush(&l);
    lb_str(&l, "aco: checked:   the co whose stack it is, ");
    describe_co(&l, owner);
    lb_str(&l, ":\n");
    lb_flush(&l);
    owner_frame(&l, owner, a);
    lb_flush(&l);
    /* Die of this SIGSEGV: the access runs again and faults for good. */
    signal(sig, SIG_DFL);
    if (hand) raise(SIGSEGV);
    errno = saved_errno;
}

/* The mode, from ACO_CHECKED, once per process; the handler goes in with
 * the decision, before any co can run in it. */
static int checked_decide(void) {
    int st = __atomic_load_n(&checked_state, __ATOMIC_ACQUIRE);
    if (aco_likely(st != 0)) return st == 2;
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&mu);
    st = __atomic_load_n(&checked_state, __ATOMIC_ACQUIRE);
    if (st == 0) {
        const char* e = getenv("ACO_CHECKED");
        int on = e != NULL && strcmp(e, "1") == 0;
#if aco__asan || defined(ACO_USE_VALGRIND)
        if (on) {
            static const char msg[] = "aco: ACO_CHECKED=1 is ignored: checked mode does "
                                      "not combine with ASan or ACO_USE_VALGRIND builds (aco.h)\n";
            err_write(msg, sizeof(msg) - 1);
            on = 0;
        }
#endif
        if (on) {
            struct sigaction sa;
            memset(&sa, 0, sizeof(sa));
            sa.sa_sigaction = checked_handler;
            sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
            sigemptyset(&sa.sa_mask);
            check("aco_thread_init", sigaction(SIGSEGV, &sa, &checked_prev) == 0,
                  "checked mode: sigaction failed: %s", strerror(errno));
        }
        st = on ? 2 : 1;
        __atomic_store_n(&checked_state, st, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&mu);
    return st == 2;
}
