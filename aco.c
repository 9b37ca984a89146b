/*
 * aco.c - libaco's core: cos, share stacks and the lazy save/restore.
 * Copyright 2026 the libaco authors.  Apache License 2.0 (see LICENSE).
 *
 * Sections 1-10 are the core path.  The files included at the end are not
 * (the SIGSEGV reporter aco_fault.c, checked mode aco_checked.c, the tools'
 * glue aco_tools.c); they join in only through six hooks (section 4):
 * ext_init, ext_stack, ext_co, ext_mem, ext_copy, ext_switch.  docs/core.md,
 * "Inside the core", says why.
 */
/* MAP_ANONYMOUS and friends under strict -std=c11; mremap and dladdr. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "aco.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <unistd.h>

/* ==== 1. Layout ========================================================= */

/* acosw.S's layout table is the single source; check aco.h against it. */
#define ACO_ASM_LAYOUT_ONLY
#include "acosw.S"
#undef ACO_ASM_LAYOUT_ONLY

#define SLOT(off) ((off) / sizeof(void*))

/* Which aco_t.reg slot holds pc, sp and each callee-saved integer register
 * (tools/aco_gdb.py reads it: gdb's register is the name after "slot_"). */
enum aco__slot {
    aco__slot_pc = SLOT(ACO_OFF_PC), aco__slot_sp = SLOT(ACO_OFF_SP),
#if defined(__x86_64__)
    aco__slot_rbx = SLOT(ACO_OFF_RBX), aco__slot_rbp = SLOT(ACO_OFF_RBP),
    aco__slot_r12 = SLOT(ACO_OFF_R12), aco__slot_r13 = SLOT(ACO_OFF_R13),
    aco__slot_r14 = SLOT(ACO_OFF_R14), aco__slot_r15 = SLOT(ACO_OFF_R15),
#define SLOT_BP aco__slot_rbp
#elif defined(__i386__)
    aco__slot_ebx = SLOT(ACO_OFF_EBX), aco__slot_ebp = SLOT(ACO_OFF_EBP),
    aco__slot_esi = SLOT(ACO_OFF_ESI), aco__slot_edi = SLOT(ACO_OFF_EDI),
#define SLOT_BP aco__slot_ebp
#elif defined(__aarch64__)
    aco__slot_x19 = SLOT(ACO_OFF_X19), aco__slot_x20, aco__slot_x21, aco__slot_x22,
    aco__slot_x23, aco__slot_x24, aco__slot_x25, aco__slot_x26, aco__slot_x27,
    aco__slot_x28, aco__slot_x29 = SLOT(ACO_OFF_FP), aco__slot_x30 = SLOT(ACO_OFF_LR),
    aco__slot_lr = SLOT(ACO_OFF_LR),
#define SLOT_BP aco__slot_x29
#else
    aco__slot_s0 = SLOT(ACO_OFF_S0), aco__slot_s1, aco__slot_s2, aco__slot_s3,
    aco__slot_s4, aco__slot_s5, aco__slot_s6, aco__slot_s7, aco__slot_s8,
    aco__slot_s9, aco__slot_s10, aco__slot_s11,
    aco__slot_ra = SLOT(ACO_OFF_LR), aco__slot_lr = SLOT(ACO_OFF_LR),
#define SLOT_BP aco__slot_s0
#endif
};
#define PC(co) ((co)->reg[aco__slot_pc])
#define SP(co) ((co)->reg[aco__slot_sp])

#if defined(__aarch64__)
_Static_assert(aco__slot_x21 == SLOT(ACO_OFF_X21) && aco__slot_x23 == SLOT(ACO_OFF_X23) &&
               aco__slot_x25 == SLOT(ACO_OFF_X25) && aco__slot_x27 == SLOT(ACO_OFF_X27) &&
               aco__slot_x28 + 1 == aco__slot_x29, "x19-x29 disagree with acosw.S");
_Static_assert(offsetof(aco_t, reg_fpctl) == ACO_OFF_FPCR, "FPCR slot disagrees");
#define OFF_FPCTL ACO_OFF_FPCR
#elif defined(__riscv)
_Static_assert(aco__slot_s11 + 1 == aco__slot_ra, "s0-s11 disagree with acosw.S");
_Static_assert(offsetof(aco_t, reg_fpctl) == ACO_OFF_FRM, "frm slot disagrees");
#define OFF_FPCTL ACO_OFF_FRM
#else
_Static_assert(offsetof(aco_t, reg_fpucw) == ACO_OFF_FPUCW &&
               offsetof(aco_t, reg_mxcsr) == ACO_OFF_MXCSR, "control-word slots disagree");
_Static_assert(offsetof(aco_t, is_end) == ACO_OFF_FPUCW + 2,
               "is_end lives in the two bytes acosw.S never writes");
#define OFF_FPCTL ACO_OFF_FPUCW
#endif
_Static_assert(offsetof(aco_t, reg) == 0 && sizeof(((aco_t*)0)->reg) == ACO_REG_SLOTS *
               sizeof(void*), "aco_t.reg disagrees with acosw.S's layout");
_Static_assert(ACO_OFF_PC % sizeof(void*) == 0 && ACO_OFF_SP % sizeof(void*) == 0 &&
               SLOT(ACO_OFF_PC) < ACO_REG_SLOTS && SLOT(ACO_OFF_SP) < ACO_REG_SLOTS,
               "pc and sp must be whole reg[] slots");
#ifdef ACO_OFF_LR
_Static_assert(ACO_OFF_LR % sizeof(void*) == 0 && SLOT(ACO_OFF_LR) < ACO_REG_SLOTS,
               "lr must be a whole reg[] slot");
#endif
/* aco_resume reads is_end and state as one little-endian 16-bit word. */
_Static_assert(offsetof(aco_t, state) == offsetof(aco_t, is_end) + 1 &&
               __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "state must follow is_end");
_Static_assert(sizeof(void*) == sizeof(uintptr_t) && sizeof(void*) == sizeof(size_t),
               "pointers, uintptr_t and size_t differ in size");
/* Upstream's names for the slots (aco.h). */
_Static_assert(ACO_REG_IDX_RETADDR == aco__slot_pc && ACO_REG_IDX_SP == aco__slot_sp &&
               ACO_REG_IDX_BP == SLOT_BP && ACO_REG_IDX_FPU == SLOT(OFF_FPCTL),
               "ACO_REG_IDX_* disagree with acosw.S");

/* ==== 2. Thread state =================================================== */

/* initial-exec: every access is one instruction, in libaco.so too. */
#define TLS __thread __attribute__((tls_model("initial-exec")))

/* The running co; between runs, the thread's main co (NULL before one).
 * Public: aco.h's inline aco_yield reads it.  The rest of a thread's state
 * is th, whose address names the thread (aco_share_stack_t.thread). */
TLS aco_t* aco_gtls_co;

#define GONE_MAINS 8
static TLS struct {
    uint64_t fp;                /* aco_thread_init's FP control state */
    aco_cofuncp_t last_word;    /* aco_thread_init's argument */
    aco_t* hop;                 /* the hand-off co (section 9), or NULL */
    aco_t* hop_from, *hop_to;   /* the co handing off, the one it hands to */
    aco_t* gone[GONE_MAINS];    /* the main cos destroyed last: their cos */
    unsigned gone_next;         /* are still this thread's (aco_destroy) */
    char inited;                /* aco_thread_init was called */
} th;

/* Upstream's primitive, and ours: the calling thread's FP control state at
 * p, as aco.h says (x86: control word at p, MXCSR at p + 4). */
void aco_save_fpucw_mxcsr(void* p) {
#if defined(__x86_64__) || defined(__i386__)
    uint16_t cw;
    uint32_t csr;
    __asm__ volatile("fnstcw %0\n\tstmxcsr %1" : "=m"(cw), "=m"(csr));
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

/* x86-64 (acosw.S): load to's FP control words on every switch (1: AMD and
 * Hygon, where reading back what stmxcsr stored is slow), or only when they
 * differ (0).  aco__fp_mode (tests; hidden): the one in use, -1 where the
 * build has one; mode 0 or 1 selects it.  (docs/benchmarks.md) */
#if defined(__x86_64__) && !defined(ACO_CONFIG_SHARE_FPU_MXCSR_ENV)
#include <cpuid.h>
extern unsigned char aco__fp_eager __attribute__((visibility("hidden")));
__attribute__((constructor)) static void fp_eager_init(void) {
    unsigned a, b, c, d;
    char v[12];
    if (!__get_cpuid(0, &a, &b, &c, &d)) return;
    memcpy(v, &b, 4), memcpy(v + 4, &d, 4), memcpy(v + 8, &c, 4);
    aco__fp_eager = memcmp(v, "AuthenticAMD", 12) == 0 || memcmp(v, "HygonGenuine", 12) == 0;
}
#endif

__attribute__((visibility("hidden"))) int aco__fp_mode(int mode);
int aco__fp_mode(int mode) {
#if defined(__x86_64__) && !defined(ACO_CONFIG_SHARE_FPU_MXCSR_ENV)
    if (mode == 0 || mode == 1) aco__fp_eager = (unsigned char)mode;
    return aco__fp_eager;
#else
    return (void)mode, -1;
#endif
}

static void ext_init(int thread);

void aco_thread_init(aco_cofuncp_t last_word_co_fp) {
    aco_save_fpucw_mxcsr(&th.fp);
    th.last_word = last_word_co_fp;
    th.inited = 1;
    ext_init(1);
}

/* ==== 3. Errors: "aco: <function>: <rule broken>", then abort =========== */

__attribute__((noreturn, cold, format(printf, 2, 3)))
static void fatal(const char* fn, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "aco: %s: ", fn);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    abort();
}

#define check(fn, cond, ...) do { if (aco_unlikely(!(cond))) fatal(fn, __VA_ARGS__); } while (0)

/* A live co's state (aco.h), and the word of is_end and state. */
#define LIVE(co) ((co)->state == aco__state_off || (co)->state == aco__state_on)
#define STATE_WORD(is_end, state) ((uint16_t)((is_end) | (state) << 8))

void aco__not_a_co(const char* fn, const aco_t* co) {
    if (co == NULL) fatal(fn, "co must not be NULL");
    if (co->state == aco__state_dead)
        fatal(fn, "co %p was destroyed (aco_destroy); it cannot be used any more",
              (const void*)co);
    fatal(fn, "%p is not a co: aco_create never returned it, or it was overwritten "
          "(state byte 0x%02x)", (const void*)co, co->state);
}

void aco__yield_misuse(const char* fn) {
    aco_t* co = aco_gtls_co;
    fatal(fn, "must be called from a non-main co (the caller is %s %p)",
          co == NULL ? "no co" : "main co", (void*)co);
}

/* Where a co "returns" to: aco_protector in acosw.S, which calls this. */
extern const char aco_protector_ret[] __attribute__((visibility("hidden")));
__attribute__((visibility("hidden"), noreturn)) void aco__funcp_protector(void);

void aco__funcp_protector(void) {
    aco_t* co = aco_gtls_co;
#ifndef ACO_OFF_LR
    /* x86: the return popped the stack's return-address slot, dead to
     * memcheck from then on, and the next co to start there returns through
     * it (a last word may aco_exit() this one): say it again. */
    if (co != NULL && co->share_stack != NULL)
        *(const void**)co->share_stack->align_retptr = aco_protector_ret;
#endif
    if (th.last_word != NULL) th.last_word();
    fatal("protector", "co %p returned from its co function %p instead of "
          "calling aco_exit(); a co function must end with aco_exit()",
          (void*)co, co != NULL ? (void*)co->fp : NULL);
}

/* Upstream's names: the protector, and its self-check (section 1's). */
void aco_funcp_protector(void) __attribute__((alias("aco__funcp_protector")));
void aco_funcp_protector_asm(void) __attribute__((noreturn, alias("aco__funcp_protector")));

void aco_runtime_test(void) {}

/* ==== 4. Hooks ========================================================== */

/* The six calls of the parts outside the core path (aco_tools.c tells each
 * event).  The tools' glue is compiled in (TOOLS); checked mode is chosen
 * at run time: ext says what the hooks want, fixed by ext_init. */
#if defined(ACO_USE_VALGRIND) || aco__san_switch
#define TOOLS 1
#else
#define TOOLS 0
#endif

static struct {
    size_t co_bytes;    /* kept after each aco_t for the hooks */
    size_t stack_bytes; /* kept after each aco_share_stack_t */
    char on;            /* ext_co and ext_stack want their events */
    char maps;          /* every share stack a mapping of its own */
    char switches;      /* every resume and hand-off by ext_switch */
    char heap_saves;    /* save stacks from the allocator, never pooled */
    int ready;
} ext;

enum {
    EXT_NEW, EXT_FREE, EXT_MAIN, EXT_START, EXT_DEAD,      /* ext_stack, ext_co */
    EXT_ARENA, EXT_GIVE, EXT_TAKE, EXT_LINK, EXT_PEEK,     /* ext_mem */
    EXT_ROOM, EXT_SAVE, EXT_RESTORE                        /* ext_copy */
};

static void ext_init(int thread);                   /* before any allocation */
static void ext_stack(aco_share_stack_t* s, int ev);
static void ext_co(aco_t* co, int ev);
static void ext_mem(void* p, size_t n, int ev);     /* tool builds: the pools */
static size_t ext_copy(aco_t* co, size_t n, int ev);   /* tool builds: 1 copied */
static aco_t* ext_switch(aco_t* from, aco_t* co);   /* checked mode: switches */

/* ==== 5. Memory ========================================================= */

/* The program's allocator (aco_set_allocator); NULL: malloc and the pools.
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

/* fn NULL: NULL when memory runs out, not the abort. */
static void* alloc(const char* fn, size_t sz) {
    mark_used();
    void* p = user_alloc ? user_alloc(user_cookie, sz) : malloc(sz);
    check(fn, fn == NULL || p != NULL, "out of memory (%s of %zu bytes failed)",
          user_alloc ? "the program's allocator" : "malloc", sz);
    return p;
}

static void dealloc(void* p, size_t sz) { user_free ? user_free(user_cookie, p, sz) : free(p); }

void* aco_alloc(size_t sz) {
    if (sz == 0) fatal("aco_alloc", "sz must not be 0");
    return alloc(NULL, sz);
}

void aco_free(void* p, size_t sz) { if (p != NULL) dealloc(p, sz); }

/* Pools: equal slots from 64 KiB slabs, no header or rounding, for co
 * objects and for save stacks in 8-byte steps up to SAVE_POOLED bytes.
 * Slabs come from 2 MiB mappings, found by masking a slot's address; up to
 * EMPTY_KEEP empty ones wait for any pool, then go back at once.  One mutex,
 * skipped while the process has one thread, free across a fork. (memory.md) */
#define SLAB_BYTES  ((size_t)64 << 10)
#define ARENA_SLABS 32
#define SAVE_POOLED 512
#define SAVE_STEP   8
#define EMPTY_KEEP  16

typedef struct slab slab;
typedef struct {
    slab*  avail;       /* slabs with a free slot */
    size_t slot;        /* bytes per slot */
} pool;

struct slab {
    slab*  prev, *next; /* in pool->avail */
    pool*  pool;
    void*  free;        /* freed slots, linked through their first word */
    size_t live;        /* slots in use */
    size_t carved;      /* slots handed out at least once */
};
#define SLAB_FIRST ((sizeof(slab) + 15) & ~(size_t)15)

static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static pool co_pool;
static pool save_pool[SAVE_POOLED / SAVE_STEP];   /* i: (i + 1) * 8 bytes */
static char*  arena;        /* the rest of the current 2 MiB mapping */
static size_t arena_left;   /* slabs left in it */
static slab*  empty[EMPTY_KEEP];    /* empty slabs, their pages still in */
static size_t n_empty;

#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 32)
#include <sys/single_threaded.h>
#define single_threaded() (__libc_single_threaded != 0)
#else
#define single_threaded() 0
#endif

static void pool_prefork(void) { pthread_mutex_lock(&pool_mu); }
static void pool_postfork(void) { pthread_mutex_unlock(&pool_mu); }
__attribute__((constructor)) static void pool_atfork(void) {
    pthread_atfork(pool_prefork, pool_postfork, pool_postfork);
}
static int pool_lock(void) { return single_threaded() ? 0 : (pool_prefork(), 1); }
static void pool_unlock(int locked) { if (locked) pool_postfork(); }

static size_t slab_slots(const pool* pl) { return (SLAB_BYTES - SLAB_FIRST) / pl->slot; }

static void avail_unlink(slab* b) {
    if (b->prev) b->prev->next = b->next; else b->pool->avail = b->next;
    if (b->next) b->next->prev = b->prev;
    b->prev = b->next = NULL;
}

static void avail_push(slab* b) {
    b->prev = NULL, b->next = b->pool->avail;
    if (b->next) b->next->prev = b;
    b->pool->avail = b;
}

/* Unmap the kept slabs, each run of neighbours in one call (a destroy-all
 * empties them in the order they were carved).  Called locked. */
static void empty_release(void) {
    for (size_t i = 0, j = 1; i < n_empty; i = j++) {
        while (j < n_empty && (char*)empty[j] == (char*)empty[j - 1] + SLAB_BYTES) j++;
        munmap(empty[i], (j - i) * SLAB_BYTES);
    }
    n_empty = 0;
}

/* A slab of pl's with no slot carved, on its avail list: a kept one (pl's
 * own first: a destroyed co's slot stays a co's), else a fresh (zero) one;
 * NULL when out of memory.  Called locked. */
static slab* slab_new(pool* pl) {
    slab* b;
    if (n_empty > 0) {
        size_t i = n_empty - 1;
        for (size_t k = 0; k < n_empty; k++) i = empty[k]->pool == pl ? k : i;
        b = empty[i];
        empty[i] = empty[--n_empty];
        b->free = NULL, b->carved = 0;      /* (live is 0) */
    } else {
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
            if (TOOLS) ext_mem(al, want, EXT_ARENA);
        }
        b = (slab*)arena;
        arena += SLAB_BYTES, arena_left--;
    }
    b->pool = pl;
    avail_push(b);
    return b;
}

/* fn NULL: NULL when out of memory, not the abort. */
static void* pool_alloc(pool* pl, size_t slot, const char* fn) {
    int locked = pool_lock();
    pl->slot = slot;
    slab* b = pl->avail != NULL ? pl->avail : slab_new(pl);
    void* p = b != NULL ? b->free : NULL;
    if (p != NULL) {
        if (TOOLS) ext_mem(p, slot, EXT_PEEK);
        b->free = *(void**)p;
    } else if (b != NULL) {
        p = (char*)b + SLAB_FIRST + b->carved++ * slot;
    }
    if (b != NULL && ++b->live == slab_slots(pl)) avail_unlink(b);
    pool_unlock(locked);
    check(fn, fn == NULL || p != NULL, "out of memory (mmap of a slab failed)");
    if (TOOLS && p != NULL) ext_mem(p, slot, EXT_GIVE);
    return p;
}

static void pool_free(void* p) {
    slab* b = (slab*)((uintptr_t)p & ~(uintptr_t)(SLAB_BYTES - 1));
    if (TOOLS) ext_mem(p, 0, EXT_TAKE);
    int locked = pool_lock();
    *(void**)p = b->free;
    b->free = p;
    if (b->live-- == slab_slots(b->pool)) avail_push(b);
    if (b->live == 0) {         /* empty: kept for slab_new */
        avail_unlink(b);
        if (n_empty == EMPTY_KEEP) empty_release();
        empty[n_empty++] = b;
    } else if (TOOLS) {
        ext_mem(p, 0, EXT_LINK);    /* locked: another thread may take p next */
    }
    pool_unlock(locked);
}

/* Capacities are multiples of 8: save_stack.sz holds SS_IN (the co is the
 * caller's memory, aco_create_in) and SS_EMBED (its save stack is too);
 * live sizes are multiples of 4, so "n > sz" is "n > capacity" (take). */
#define SS_IN    1u
#define SS_EMBED 2u
#define SS_CAP(ss) ((size_t)((ss)->sz & ~(uint32_t)7))
#define SAVE_MAX ((size_t)UINT32_MAX & ~(size_t)7)

/* Co objects, zeroed, with the hooks' bytes after them.  A pool's slot
 * keeps the state byte (only its first word links free slots): a destroyed
 * co is recognised until the slot is handed out again. */
#define co_bytes() ((sizeof(aco_t) + ext.co_bytes + 15) & ~(size_t)15)

static aco_t* co_alloc(const char* fn) {
    mark_used();
    aco_t* co = user_alloc ? alloc(fn, co_bytes()) : pool_alloc(&co_pool, co_bytes(), fn);
    memset(co, 0, sizeof(aco_t) + ext.co_bytes);
    return co;
}

static void co_free(aco_t* co) {
    if (co->save_stack.sz & SS_IN) return;     /* the caller's (aco_create_in) */
    if (user_free) dealloc(co, co_bytes());
    else pool_free(co);
}

/* Save stacks: the capacity for n bytes, the bytes a capacity takes (the
 * tools keep some after it; SIZE_MAX: more than the address space, as on
 * 32-bit near SAVE_MAX), and whether it comes from a pool. */
#define save_capacity(n) (((n) + SAVE_STEP - 1) & ~(size_t)(SAVE_STEP - 1))
static inline size_t save_bytes(size_t cap) {
    size_t room = TOOLS && cap ? ext_copy(NULL, cap, EXT_ROOM) : 0;
    return cap + room < cap ? SIZE_MAX : cap + room;
}
#define save_pooled(cap) (!user_alloc && !ext.heap_saves && (cap) <= SAVE_POOLED)

static void save_free(aco_save_stack_t* ss) {
    size_t cap = SS_CAP(ss);
    if (ss->ptr != NULL && !(ss->sz & SS_EMBED)) {      /* not the caller's */
        if (save_pooled(cap)) pool_free(ss->ptr);
        else dealloc(ss->ptr, save_bytes(cap));
    }
    ss->ptr = NULL;
    ss->sz &= SS_IN;
}

/* co's save stack, grown to hold n live bytes (its content is about to be
 * overwritten whole); fn NULL: 0 when memory runs out, not the abort. */
static int save_grow(const char* fn, aco_t* co, size_t n) {
    aco_save_stack_t* ss = &co->save_stack;
    if (n <= SS_CAP(ss)) return 1;
    size_t cap = save_capacity(n);
    int fits = n <= SAVE_MAX && save_bytes(cap) != SIZE_MAX;
    if (fn == NULL && !fits) return 0;
    check(fn, fits, "co %p has %zu live bytes on its share stack: a save stack holds less "
          "than 4 GiB, and less than the address space", (void*)co, n);
    mark_used();
    if (fn != NULL) save_free(ss);      /* else kept until the new one is had */
    void* p = save_pooled(cap) ? pool_alloc(&save_pool[cap / SAVE_STEP - 1], cap, fn)
                               : alloc(fn, save_bytes(cap));
    if (p == NULL) return 0;
    save_free(ss);
    ss->ptr = p;
    ss->sz |= (uint32_t)cap;
    return 1;
}

/* ==== 6. Share stacks =================================================== */

#define DEFAULT_STACK ((size_t)2 << 20)
#define MIN_STACK     ((size_t)4096)
#define STACK_ALIGN   16    /* sp's alignment at a call, on every ABI here */

static size_t page_size(const char* fn) {
    long pg = sysconf(_SC_PAGESIZE);
    check(fn, pg > 0 && (pg & (pg - 1)) == 0, "sysconf(_SC_PAGESIZE) returned %ld", pg);
    return (size_t)pg;
}

/* The guard: 1 MiB and a page, not one page, as frames are not probed by
 * default: one whose lowest byte lies up to 1 MiB below still faults in it
 * (docs/core.md, "Big frames").  It costs address space only. */
#define GUARD_REACH ((size_t)1 << 20)
#define guard_bytes(pg) (GUARD_REACH + (pg))
#define stack_bytes() (sizeof(aco_share_stack_t) + ext.stack_bytes)

/* A share stack; may_fail: NULL with errno instead of an abort when memory
 * or the address space runs out.  A mapping of its own with a guard or
 * when the hooks ask (ext.maps), else the allocator's. */
static aco_share_stack_t* stack_new(const char* fn, size_t sz, char guard, int may_fail) {
    size_t pg = page_size(fn), room = SIZE_MAX - pg - guard_bytes(pg);
    sz = sz == 0 ? DEFAULT_STACK : sz < MIN_STACK ? MIN_STACK : sz;
    if (may_fail && sz > room) { errno = ENOMEM; return NULL; }
    check(fn, sz <= room, "stack size %zu exceeds the address space", sz);
    ext_init(0);
    aco_share_stack_t* s = alloc(may_fail ? NULL : fn, stack_bytes());
    if (s == NULL) { errno = ENOMEM; return NULL; }
    memset(s, 0, stack_bytes());
    sz = (sz + (guard ? pg : STACK_ALIGN) - 1) & ~((guard ? pg : STACK_ALIGN) - 1);
    if (guard || ext.maps) {
        size_t gap = guard ? guard_bytes(pg) : 0, n = ((sz + pg - 1) & ~(pg - 1)) + gap;
        /* The guard below (stacks grow down); pages committed as touched. */
        void* m = mmap(NULL, n, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED || (gap && mprotect(m, gap, PROT_NONE))) {
            int e = errno;
            if (m != MAP_FAILED) munmap(m, n);
            dealloc(s, stack_bytes());
            check(fn, may_fail, "out of memory (mmap of %zu bytes failed: %s)", n, strerror(e));
            errno = ENOMEM;     /* (whatever mmap said: valgrind's says EINVAL) */
            return NULL;
        }
        s->real_ptr = m;
        s->real_sz = n;
        s->ptr = (char*)m + gap;
        s->guard_page_enabled = guard ? 1 : 0;
    } else if (sz <= PTRDIFF_MAX &&     /* (valgrind calls more "fishy") */
               (s->ptr = s->real_ptr = alloc(may_fail ? NULL : fn, sz)) != NULL) {
        s->real_sz = sz;
    } else {
        dealloc(s, stack_bytes());
        check(fn, may_fail, "out of memory (a stack of %zu bytes)", sz);
        errno = ENOMEM;
        return NULL;
    }
    s->sz = sz;
    uintptr_t high = ((uintptr_t)s->ptr + sz) & ~(uintptr_t)(STACK_ALIGN - 1);
    s->align_highptr = (void*)high;
#ifdef ACO_OFF_LR
    /* A new co's lr is the protector: its function enters with sp ==
     * highptr, aligned as at a call (AAPCS64, RISC-V psABI). */
    s->align_retptr = (void*)high;
#else
    /* x86: the protector's address in the slot below highptr: a starting
     * co function finds a return address, and (sp + 8) % 16 == 0. */
    s->align_retptr = (void*)(high - sizeof(void*));
    *(const void**)s->align_retptr = aco_protector_ret;
#endif
    s->align_limit = (size_t)((uintptr_t)s->align_retptr - (uintptr_t)s->ptr);
    if (ext.on) ext_stack(s, EXT_NEW);
    return s;
}

static void stack_free(const char* fn, aco_share_stack_t* s) {
    if (ext.on) ext_stack(s, EXT_FREE);
    if (s->guard_page_enabled || ext.maps)
        check(fn, munmap(s->real_ptr, s->real_sz) == 0, "munmap failed: %s", strerror(errno));
    else dealloc(s->real_ptr, s->real_sz);
    dealloc(s, stack_bytes());
}

aco_share_stack_t* aco_share_stack_new(size_t sz) { return aco_share_stack_new2(sz, 1); }

aco_share_stack_t* aco_share_stack_new2(size_t sz, char guard_page_enabled) {
    return stack_new("aco_share_stack_new2", sz, guard_page_enabled, 0);
}

aco_share_stack_t* aco_share_stack_try_new2(size_t sz, char guard_page_enabled) {
    return stack_new("aco_share_stack_try_new2", sz, guard_page_enabled, 1);
}

void aco_share_stack_destroy(aco_share_stack_t* sstk) {
    static const char fn[] = "aco_share_stack_destroy";
    check(fn, sstk != NULL, "sstk must not be NULL");
    check(fn, sstk->co_ct == 0, "share stack %p is still used by %zu co(s); "
          "destroy them first", (void*)sstk, sstk->co_ct);
    stack_free(fn, sstk);
}

/* ==== 7. Create ========================================================= */

/* The registers of a co that has not run yet: its first switch enters
 * co->fp at sp (the top of its share stack), with the protector as the
 * return address and the FP control state aco_thread_init() captured. */
static void init_regs(aco_t* co, void* sp) {
    memset(co->reg, 0, sizeof(co->reg));
    PC(co) = (void*)co->fp;
    SP(co) = sp;
#if defined(__x86_64__) || defined(__i386__)
    memcpy(&co->reg_fpucw, &th.fp, sizeof(co->reg_fpucw));
    memcpy(&co->reg_mxcsr, (char*)&th.fp + 4, sizeof(co->reg_mxcsr));
#else
    co->reg[aco__slot_lr] = (void*)(uintptr_t)aco_protector_ret;
    co->reg_fpctl = (uint32_t)th.fp;    /* FPCR's bits 32-63 are RES0; frm */
#endif
    if (ext.on) ext_co(co, EXT_START);
}

/* The checks of a creation: of the main co to be (main_co NULL), or of a
 * non-main co's main co, share stack and function. */
static void check_create(const char* fn, aco_t* main_co, aco_share_stack_t* share_stack,
                         aco_cofuncp_t fp) {
    check(fn, th.inited, "aco_thread_init() must be called in this thread first");
    if (main_co == NULL) {
        check(fn, share_stack == NULL && fp == NULL,
              "a main co (main_co == NULL) takes no share stack and no co function");
        check(fn, aco_gtls_co == NULL || aco_is_main_co(aco_gtls_co),
              "a main co must be created outside any running co (co %p is running)",
              (void*)aco_gtls_co);
        return;
    }
    if (aco_unlikely(!LIVE(main_co))) aco__not_a_co(fn, main_co);
    check(fn, aco_is_main_co(main_co), "main_co %p is not a main co", (void*)main_co);
    check(fn, aco_gtls_co == main_co || (aco_gtls_co != NULL && aco_gtls_co->main_co == main_co),
          "main_co %p is not this thread's main co (the running co is %p)",
          (void*)main_co, (void*)aco_gtls_co);
    check(fn, share_stack != NULL, "share_stack must not be NULL for a non-main co");
    /* The share stack is this thread's, or free (aco.h). */
    check(fn, share_stack->co_ct == 0 || share_stack->thread == &th,
          "share stack %p belongs to another thread (%zu co(s) of it use it); a "
          "share stack passes to another thread only when no co uses it",
          (void*)share_stack, share_stack->co_ct);
    check(fn, fp != NULL, "fp must not be NULL for a non-main co");
}

/* Fill in the zeroed co: the thread's main co, or a non-main co, which its
 * share stack counts. */
static aco_t* make(aco_t* co, aco_t* main_co, aco_share_stack_t* share_stack,
                   aco_cofuncp_t fp, void* arg) {
    co->arg = arg;
    co->state = aco__state_off;     /* until its first resume takes the stack */
    if (main_co == NULL) {
        if (ext.on) ext_co(co, EXT_MAIN);
        return aco_gtls_co = co;
    }
    co->main_co = main_co;
    co->fp = fp;
    co->share_stack = share_stack;
    share_stack->co_ct++;
    share_stack->thread = &th;
    if (ext.on) ext_co(co, EXT_NEW);
    init_regs(co, share_stack->align_retptr);
    return co;
}

aco_t* aco_create(aco_t* main_co, aco_share_stack_t* share_stack,
                  size_t save_stack_sz, aco_cofuncp_t fp, void* arg) {
    static const char fn[] = "aco_create";
    check_create(fn, main_co, share_stack, fp);
    check(fn, main_co == NULL || save_stack_sz <= SAVE_MAX, "save_stack_sz %zu exceeds 4 GiB "
          "- 8", save_stack_sz);
    aco_t* co = make(co_alloc(fn), main_co, share_stack, fp, arg);
    /* A save stack is allocated when first needed, as large as needed,
     * unless the caller asks for one now. */
    if (main_co != NULL && save_stack_sz != 0) save_grow(fn, co, save_stack_sz);
    return co;
}

size_t aco_co_size(size_t save_sz) {
    ext_init(0);
    size_t save = save_sz <= SAVE_MAX ? save_bytes(save_capacity(save_sz)) : SIZE_MAX;
    check("aco_co_size", save <= SIZE_MAX - co_bytes(), "save_sz %zu exceeds 4 GiB - 8, or "
          "the address space", save_sz);
    return co_bytes() + save;
}

/* In mem: the co object, then the largest save stack that fits with the
 * bytes the tools keep after it: down by what is too much, then up while
 * the next step fits. */
static aco_t* make_in(const char* fn, void* mem, size_t sz, aco_t* main_co,
                      aco_share_stack_t* share_stack, aco_cofuncp_t fp, void* arg) {
    check_create(fn, main_co, share_stack, fp);
    check(fn, mem != NULL, "mem must not be NULL");
    check(fn, ((uintptr_t)mem & 15) == 0, "mem %p must be 16-byte aligned memory", mem);
    check(fn, sz >= co_bytes(), "sz %zu is less than aco_co_size(0) (%zu)", sz, co_bytes());
    aco_t* co = mem;
    memset(co, 0, sizeof(aco_t) + ext.co_bytes);
    co->save_stack.sz = SS_IN;          /* aco_destroy leaves mem alone */
    make(co, main_co, share_stack, fp, arg);
    if (main_co == NULL) return co;
    size_t room = sz - co_bytes(), cap = (room < SAVE_MAX ? room : SAVE_MAX) & ~(size_t)7;
    for (size_t over; cap > 0 && (over = save_bytes(cap)) > room;)
        cap -= over == SIZE_MAX ? (cap / 8 + SAVE_STEP) & ~(size_t)(SAVE_STEP - 1)
                                : save_capacity(over - room);
    while (cap + SAVE_STEP <= SAVE_MAX && save_bytes(cap + SAVE_STEP) <= room) cap += SAVE_STEP;
    if (cap > 0) {
        co->save_stack.ptr = (char*)co + co_bytes();
        co->save_stack.sz = (uint32_t)cap | SS_IN | SS_EMBED;
    }
    return co;
}

aco_t* aco_create_in(void* mem, size_t sz, aco_t* main_co, aco_share_stack_t* share_stack,
                     aco_cofuncp_t fp, void* arg) {
    static const char fn[] = "aco_create_in";
    check(fn, main_co != NULL, "main_co must not be NULL: aco_create_in makes non-main "
          "cos only (aco_create makes the main co)");
    return make_in(fn, mem, sz, main_co, share_stack, fp, arg);
}

aco_t* aco_create_main_in(void* mem, size_t sz, void* arg) {
    return make_in("aco_create_main_in", mem, sz, NULL, NULL, NULL, arg);
}

/* ==== 8. Copy engine ==================================================== */

/* A share stack's live bytes, from sp up to align_retptr, belong to its
 * owner, the one co that is aco__state_on.  Saving is lazy: they go to the
 * owner's save stack only when another co takes the stack (a co alone
 * never copies); the taker's come back at once, before it runs.  So each
 * switch finds its co's frames as it left them; an ended or reset co owns
 * nothing, and its dead frames are never saved.  Copies below COPY_SMALL
 * (a power of two: see take) are straight-line, so the common path calls
 * nothing and spills no register; larger ones take take_slow (memcpy). */
#define COPY_SMALL 256

/* Moves of `width` bytes: 16 (a 16-byte memcpy), 32 (AVX) or 64 (AVX-512);
 * unaligned, aliasing anything, one full-width move each (gcc splits a
 * constant memcpy's 32-byte moves in two for generic tuning). */
#if defined(__x86_64__)
typedef char v32 __attribute__((vector_size(32), aligned(1), may_alias));
typedef char v64 __attribute__((vector_size(64), aligned(1), may_alias));
#endif

__attribute__((always_inline))     /* k: 4, 8 or a multiple of 16, to 128 */
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

/* n bytes, a multiple of 4; width 0: memcpy.  Else n < COPY_SMALL: a block
 * of the largest power of two <= n from each end, overlapping. */
__attribute__((always_inline))
static inline void copy(void* dst, const void* src, size_t n, int width) {
    char* d = dst;
    const char* s = src;
#define ENDS(k) (copy_block(d, s, k, width), copy_block(d + n - (k), s + n - (k), k, width))
    if (width == 0) memcpy(d, s, n);
    else if (n > 64) { if (n > 128) ENDS(128); else ENDS(64); }
    else if (n > 16) { if (n > 32) ENDS(32); else ENDS(16); }
    else if (n >= 8) ENDS(8);
    else if (n >= 4) ENDS(4);
#undef ENDS
}

/* n bytes past the limit: an overflow; but x86's sp a slot above the top is
 * a co that tail-called aco_yield (`aco_yield(); }`): nothing live. */
__attribute__((noinline, cold)) static size_t overflowed(aco_t* owner, size_t n) {
    aco_share_stack_t* s = owner->share_stack;
    if (n == (size_t)0 - sizeof(void*)) return 0;      /* (where lr holds it: never) */
    fatal("aco_resume", "co %p's stack pointer %p lies outside its share stack "
          "[%p, %p): it overflowed", (void*)owner, SP(owner), s->ptr, s->align_retptr);
}

/* The owner's live bytes; an overflow of a stack without a guard is caught
 * here at the latest (n wraps if sp is above the top). */
static inline size_t live_bytes(aco_t* owner, aco_share_stack_t* s) {
    size_t n = (uintptr_t)s->align_retptr - (uintptr_t)SP(owner);
    return aco_likely(n <= s->align_limit) ? n : overflowed(owner, n);
}

/* Copy them to the owner's save stack, which is large enough. */
static inline void save(aco_t* owner, size_t n, int width) {
    aco_save_stack_t* ss = &owner->save_stack;
    if (n > 0) {
        if (!(TOOLS && ext_copy(owner, n, EXT_SAVE))) copy(ss->ptr, SP(owner), n, width);
        ss->ct_save++;
    }
    ss->valid_sz = (uint32_t)n;
    if (n > ss->max_cpsz) ss->max_cpsz = n;
    owner->state = aco__state_off;
}

/* Put co's n saved bytes back where they were: right below top. */
static inline void restore(aco_t* co, char* top, size_t n, int width) {
    int done = TOOLS && ext_copy(co, n, EXT_RESTORE);
    if (n == 0) return;
    if (!done) copy(top - n, co->save_stack.ptr, n, width);
    co->save_stack.ct_restore++;
}

/* co now holds its share stack s, and runs. */
static inline aco_t* take_done(aco_t* co, aco_share_stack_t* s) {
    s->owner = co;
    co->state = aco__state_on;
    aco_t* cur = aco_gtls_co;  /* not co->main_co: slower after the copies */
    aco_gtls_co = co;
    return aco__sw(cur, co);   /* a tail jump, as in aco_resume */
}

/* aco_resume when the share stack changes hands: the owner's live bytes are
 * saved, co's restored.  Entered by a tail jump and calling nothing, so that
 * neither aco_resume's fast path nor this one saves a register. */
static aco_t* take_slow(aco_t* co);

__attribute__((always_inline)) static inline aco_t* take(aco_t* co, int width) {
    aco_share_stack_t* s = co->share_stack;
    aco_t* owner = s->owner;
    size_t n = 0;
    if (owner != NULL) {
        n = (uintptr_t)s->align_retptr - (uintptr_t)SP(owner);     /* (live_bytes: take_slow) */
        if (aco_unlikely(n > s->align_limit || n > owner->save_stack.sz)) return take_slow(co);
    }
    /* Both below a power of two: so is their OR, and conversely. */
    size_t m = co->save_stack.valid_sz;
    if (aco_unlikely((n | m) >= COPY_SMALL)) return take_slow(co);
    if (owner != NULL) save(owner, n, width);
    restore(co, s->align_retptr, m, width);
    return take_done(co, s);
}

__attribute__((noinline)) static aco_t* take16(aco_t* co) {
    return take(co, 16);
}

/* take with memcpy, after growing the owner's save stack if it must (and
 * live_bytes' look past the limit). */
__attribute__((noinline)) static aco_t* take_slow(aco_t* co) {
    aco_share_stack_t* s = co->share_stack;
    aco_t* owner = s->owner;
    if (owner != NULL) {
        size_t n = live_bytes(owner, s);
        save_grow("aco_resume", owner, n);
        save(owner, n, 0);
    }
    restore(co, s->align_retptr, co->save_stack.valid_sz, 0);
    return take_done(co, s);
}

/* x86-64: the widest copies the CPU has (AVX-512 where VBMI2 says it costs
 * no clock speed): a switch with copies waits for its stores.
 * aco__copy_width (tests; hidden): the width in use, 0 where the build has
 * one (sanitizers: ext_copy); width != 0 selects it if there, else -1. */
__attribute__((visibility("hidden"))) int aco__copy_width(int width);
#if defined(__x86_64__) && !aco__san_switch
__attribute__((noinline, target("avx"))) static aco_t* take32(aco_t* co) {
    return take(co, 32);
}

__attribute__((noinline, target("avx512f"))) static aco_t* take64(aco_t* co) {
    return take(co, 64);
}

static unsigned char vec_width = 16, vec_max = 16;     /* in use, the widest */

__attribute__((constructor)) static void vec_init(void) {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vbmi2")) vec_max = 64;
    else if (__builtin_cpu_supports("avx")) vec_max = 32;
    vec_width = vec_max;
}

int aco__copy_width(int width) {
    if (width == 0) return vec_width;
    if ((width != 16 && width != 32 && width != 64) || width > vec_max) return -1;
    vec_width = (unsigned char)width;
    return width;
}

static inline aco_t* take_any(aco_t* co) {        /* at the width in use */
    if (vec_width == 64) return take64(co);
    if (vec_width == 32) return take32(co);
    return take16(co);
}
#else
int aco__copy_width(int width) {
    return width == 0 ? 0 : -1;
}
#define take_any take16
#endif

/* ==== 9. Resume, yield ================================================== */

__attribute__((noinline, cold, noreturn)) static void resume_misuse(const char* fn, aco_t* co) {
    if (co == NULL || !LIVE(co)) aco__not_a_co(fn, co);
    check(fn, !aco_is_main_co(co), "co %p is a main co; only non-main cos can be "
          "resumed", (void*)co);
    check(fn, aco_gtls_co == co->main_co, "must be called from co %p's main co %p, "
          "not from co %p", (void*)co, (void*)co->main_co, (void*)aco_gtls_co);
    check(fn, !co->is_end, "co %p has ended (it called aco_exit())", (void*)co);
    fatal(fn, "co %p: inconsistent state", (void*)co);
}

/* is_end and state at once.  Owning the stack is derivable (owner == co),
 * but kept in state by every owner change: one load, not two dependent. */
static inline uint16_t state_word(const aco_t* co) {
    uint16_t both;
    memcpy(&both, &co->is_end, sizeof(both));
    return both;
}

__attribute__((always_inline)) static inline aco_t* resume(const char* fn, aco_t* co) {
    aco_t* cur = aco_gtls_co;
    /* cur == NULL passes only for a main co, which is never aco__state_on. */
    if (aco_unlikely(co == NULL || co->main_co != cur)) resume_misuse(fn, co);
    uint16_t st = state_word(co);
    if (aco_unlikely(st != STATE_WORD(0, aco__state_on))) {
        if (aco_unlikely(st != STATE_WORD(0, aco__state_off) || cur == NULL))
            resume_misuse(fn, co);
        if (ext.switches)   /* never aco__state_on: every resume comes here */
            return ext_switch(NULL, co);
        return take_any(co);
    }
    aco_gtls_co = co;
    /* A tail jump (but at -O0): acosw records our caller's return address,
     * so the main co continues right there when co yields, with no return
     * of ours to mispredict.  (Sanitizer builds: aco__switch returns here.) */
    return aco__sw(cur, co);
}

void aco_resume(aco_t* co) { resume("aco_resume", co); }

aco_t* aco_resume_last(aco_t* co) { return resume("aco_resume_last", co); }

/* The API function behind the aco_yield() macro of aco.h. */
void (aco_yield)(void) { aco__yield_inline(); }

static void check_running(const char* fn, aco_t* co) {
    if (aco_unlikely(co == NULL || !LIVE(co))) aco__not_a_co(fn, co);
    check(fn, co == aco_gtls_co && co->main_co != NULL, "co %p must be the running non-main "
          "co (the running co is %p)", (void*)co, (void*)aco_gtls_co);
}

void aco__yield1(aco_t* co, const char* fn) {
    check_running(fn, co);
    aco__yield_inline();
}

/* The hand-off: to a co of another stack, the take from the co itself.  To
 * one of its own stack (frames cannot be copied out from under their code)
 * and in checked mode (a window closes when nothing runs on it): through
 * the thread's hand-off co, alone on a small stack, made at the first need
 * (or by aco_resume_reserve), freed with the main co; it never switches to
 * the main co, so aco_resume_last never returns it.  (docs/core.md) */
#define HOP_STACK ((size_t)64 << 10)

static void hop_fn(void) {
    for (;;) {
        if (ext.switches) ext_switch(th.hop_from, th.hop_to);
        else take_any(th.hop_to);       /* saves hop_from, the stack's owner */
    }
}

/* fn NULL: NULL when memory runs out, not the abort. */
static aco_t* hop_make(const char* fn, aco_t* main_co) {
    const char* name = fn ? fn : "aco_resume_reserve";
    aco_share_stack_t* s = stack_new(name, HOP_STACK, 1, fn == NULL);
    aco_t* h = s != NULL ? alloc(fn, co_bytes()) : NULL;
    if (h == NULL) {
        if (s != NULL) stack_free(name, s);
        return NULL;
    }
    memset(h, 0, co_bytes());
    h->main_co = main_co;
    h->fp = hop_fn;
    h->share_stack = s;
    init_regs(h, s->align_retptr);
    h->state = aco__state_on;           /* alone on its stack, for good */
    s->owner = h;
    s->co_ct = 1;
    s->thread = &th;
    return h;
}

static void hop_free(void) {
    aco_t* h = th.hop;
    th.hop = NULL;
    if (ext.on) ext_co(h, EXT_DEAD);
    stack_free("aco_destroy", h->share_stack);
    dealloc(h, co_bytes());
}

__attribute__((noinline, cold, noreturn)) static void yield_to_misuse(aco_t* co) {
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

__attribute__((noinline)) static void hop_switch(aco_t* cur, aco_t* co) {
    if (aco_unlikely(th.hop == NULL)) th.hop = hop_make("aco_yield_to", cur->main_co);
    th.hop_from = cur;
    th.hop_to = co;
    aco_gtls_co = th.hop;
    aco__sw(cur, th.hop);
}

void aco_yield_to(aco_t* co) {
    aco_t* cur = aco_gtls_co;
    /* cur a non-main co, co another of its main co's (or that: aco_yield) */
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
        aco__sw_hand(cur, co);  /* a tail jump, as in aco_resume */
        return;
    }
    if (aco_unlikely(st != STATE_WORD(0, aco__state_off))) yield_to_misuse(co);
    if (ext.switches || co->share_stack == cur->share_stack) {
        hop_switch(cur, co);
        return;
    }
    take_any(co);
}

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
    int handoff = cur != co && cur->main_co == co->main_co;
    if (handoff && th.hop == NULL && (ext.switches || cur->share_stack == s) &&
        (th.hop = hop_make(NULL, co->main_co)) == NULL) return errno = ENOMEM, -1;
    if (owner == NULL || owner == co) return 0;
    /* The owner running: its bytes from here, with room for the hand-off. */
    size_t n = owner != cur ? live_bytes(owner, s)
               : (uintptr_t)s->align_retptr - (uintptr_t)__builtin_frame_address(0) + 512;
    if (save_grow(NULL, owner, n < s->align_limit ? n : s->align_limit)) return 0;
    return errno = ENOMEM, -1;
}

aco_t* aco_get_co(void) { return aco_gtls_co; }

void* aco_get_arg(void) {
    aco_t* co = aco_gtls_co;
    check("aco_get_arg", co != NULL, "no co in this thread");
    return co->arg;
}

/* ==== 10. Exit, reset, destroy ========================================== */

void aco_exit(void) {
    aco_t* co = aco_gtls_co;
    if (aco_unlikely(co == NULL || co->main_co == NULL)) aco__yield_misuse("aco_exit");
    co->is_end = 1;
    co->share_stack->owner = NULL;      /* its frames are dead: never saved */
    co->state = aco__state_off;
    co->save_stack.valid_sz = 0;
    aco_gtls_co = co->main_co;
    aco__sw_back(co, co->main_co);
    fatal("aco_exit", "co %p was resumed after its end", (void*)co);
}

void aco__exit1(aco_t* co) {
    check_running("aco_exit1", co);
    aco_exit();
}

/* A suspended or ended co's frames die (reset, destroy): none is saved. */
static void drop_frames(aco_t* co) {
    aco_share_stack_t* s = co->share_stack;
    if (ext.on) ext_co(co, EXT_DEAD);
    co->state = aco__state_off;
    if (s->owner == co) s->owner = NULL;
}

/* Back to the init state (aco.h): no frames, nothing saved to restore. */
static void reset(const char* fn, aco_t* co, aco_cofuncp_t fp, void* arg) {
    aco_t* cur = aco_gtls_co;
    if (aco_unlikely(co == NULL || !LIVE(co))) aco__not_a_co(fn, co);
    check(fn, !aco_is_main_co(co), "co %p is a main co; only non-main cos can be "
          "reset", (void*)co);
    check(fn, co != cur, "co %p is running; a co cannot reset itself", (void*)co);
    check(fn, cur != NULL && (cur == co->main_co || cur->main_co == co->main_co),
          "co %p belongs to main co %p, not to this thread's (the caller is co %p)",
          (void*)co, (void*)co->main_co, (void*)cur);
    check(fn, fp != NULL, "fp must not be NULL");
    drop_frames(co);
    co->save_stack.valid_sz = 0;
    co->is_end = 0;
    co->fp = fp;
    co->arg = arg;
    init_regs(co, co->share_stack->align_retptr);
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
    aco_t* cur = aco_gtls_co;
    if (aco_unlikely(co == NULL || !LIVE(co))) aco__not_a_co(fn, co);
    if (aco_is_main_co(co)) {
        check(fn, cur == co || cur == NULL || cur->main_co != co,
              "main co %p cannot be destroyed while co %p runs", (void*)co, (void*)cur);
        check(fn, cur == co, "main co %p is not this thread's main co (%p): another "
              "thread's, or one a newer main co replaced; only a thread's current main co "
              "can be destroyed, from that thread", (void*)co, (void*)cur);
        aco_gtls_co = NULL;
        if (th.hop != NULL && th.hop->main_co == co) hop_free();
        th.gone[th.gone_next++ % GONE_MAINS] = co;      /* its cos outlive it */
    } else {
        /* A co outlives its main co (aco.h): a co of this thread is one of
         * its main co or of one it destroyed; only then is its share stack
         * looked at (a non-co's pointers are not followed). */
        check(fn, co != cur, "co %p is running; a co cannot destroy itself", (void*)co);
        int ours = cur != NULL && (cur == co->main_co || cur->main_co == co->main_co);
        for (unsigned i = 0; i < GONE_MAINS && !ours; i++) ours = th.gone[i] == co->main_co;
        check(fn, ours && co->share_stack->thread == &th,
              "co %p belongs to main co %p, not to this thread's nor to one it destroyed "
              "(the caller is co %p): another thread's co, or no co", (void*)co,
              (void*)co->main_co, (void*)cur);
        drop_frames(co);
        aco_share_stack_t* s = co->share_stack;
        if (--s->co_ct == 0) s->thread = NULL;  /* free for any thread */
        if (ext.on) ext_co(co, EXT_FREE);
        save_free(&co->save_stack);
    }
    co->state = aco__state_dead;     /* the pools keep it: see co_bytes */
    co_free(co);
}

/* ==== The parts outside the core path (see the top of this file) ======== */

#define ACO_CORE_PARTS
#include "aco_fault.c"
#include "aco_checked.c"
#include "aco_tools.c"
