/*
 * aco.c - libaco's core: cos, share stacks and the lazy save/restore.
 *
 * Copyright 2026 the libaco authors.  Apache License 2.0 (see LICENSE).
 */
/* MAP_ANONYMOUS and friends under strict -std=c11 too. */
#ifndef _DEFAULT_SOURCE
#define _DEFAULT_SOURCE
#endif
#include "aco.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>

#ifdef ACO_USE_VALGRIND
#include <valgrind/memcheck.h>
#endif
#if ACO__ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#include <sanitizer/lsan_interface.h>
#endif
#if ACO__TSAN
#include <sanitizer/tsan_interface.h>
#endif

/* The register layout comes from acosw.S itself; check it against aco.h. */
#define ACO_ASM_LAYOUT_ONLY
#include "acosw.S"
#undef ACO_ASM_LAYOUT_ONLY

_Static_assert(offsetof(aco_t, reg) == 0, "acosw.S addresses aco_t.reg at 0");
_Static_assert(sizeof(((aco_t*)0)->reg) == ACO_REG_SLOTS * sizeof(void*),
               "aco.h ACO_REG_COUNT disagrees with acosw.S's layout");
_Static_assert(ACO_OFF_PC % sizeof(void*) == 0 &&
               ACO_OFF_PC < ACO_REG_SLOTS * sizeof(void*),
               "pc slot must be a whole reg[] slot");
_Static_assert(ACO_OFF_SP % sizeof(void*) == 0 &&
               ACO_OFF_SP < ACO_REG_SLOTS * sizeof(void*),
               "sp slot must be a whole reg[] slot");
#if defined(__x86_64__) || defined(__i386__)
_Static_assert(offsetof(aco_t, reg_fpucw) == ACO_OFF_FPUCW &&
               offsetof(aco_t, reg_mxcsr) == ACO_OFF_MXCSR,
               "control-word slots disagree with acosw.S's layout");
_Static_assert(offsetof(aco_t, is_end) == ACO_OFF_FPUCW + 2,
               "is_end lives in the two bytes acosw.S never writes");
#else
#if defined(__aarch64__)
#define ACO_OFF_FPCTL ACO_OFF_FPCR
#else
#define ACO_OFF_FPCTL ACO_OFF_FRM
#endif
_Static_assert(offsetof(aco_t, reg_fpctl) == ACO_OFF_FPCTL,
               "FP control word disagrees with acosw.S's layout");
#endif
#ifdef ACO_OFF_LR
_Static_assert(ACO_OFF_LR % sizeof(void*) == 0 &&
               ACO_OFF_LR < ACO_REG_SLOTS * sizeof(void*),
               "lr slot must be a whole reg[] slot");
#endif

#define ACO_PC(co) ((co)->reg[ACO_OFF_PC / sizeof(void*)])
#define ACO_SP(co) ((co)->reg[ACO_OFF_SP / sizeof(void*)])

/* ------------------------------------------------------------------------ */
/* Thread-local state.  initial-exec keeps every access one instruction,   */
/* in libaco.so too.                                                        */
/* ------------------------------------------------------------------------ */

#define ACO_TLS __thread __attribute__((tls_model("initial-exec")))

/* The running co; between runs, the thread's main co (NULL before one). */
ACO_TLS aco_t* aco_gtls_co;
static ACO_TLS aco_cofuncp_t aco__last_word;
static ACO_TLS char aco__inited;
/* The FP control words captured by aco_thread_init(): new cos start with
 * them (aco__fpenv_give). */
#if defined(__x86_64__) || defined(__i386__)
static ACO_TLS uint16_t aco__fpucw;
static ACO_TLS uint32_t aco__mxcsr;

static void aco__fpenv_capture(void) {
    __asm__ volatile("fnstcw %0" : "=m"(aco__fpucw));
    __asm__ volatile("stmxcsr %0" : "=m"(aco__mxcsr));
}

static void aco__fpenv_give(aco_t* co) {
    co->reg_fpucw = aco__fpucw;
    co->reg_mxcsr = aco__mxcsr;
}
#else
static ACO_TLS uint32_t aco__fpctl;     /* FPCR (its bits 32-63 are RES0) / frm */

static void aco__fpenv_capture(void) {
    uintptr_t v;
#if defined(__aarch64__)
    __asm__ volatile("mrs %0, fpcr" : "=r"(v));
#else
    __asm__ volatile("frrm %0" : "=r"(v));
#endif
    aco__fpctl = (uint32_t)v;
}

static void aco__fpenv_give(aco_t* co) {
    co->reg_fpctl = aco__fpctl;
}
#endif

/* ------------------------------------------------------------------------ */
/* Errors: name the function and the rule, then abort.                      */
/* ------------------------------------------------------------------------ */

__attribute__((noreturn, cold, format(printf, 2, 3)))
static void aco__fatal(const char* fn, const char* fmt, ...) {
    va_list ap;
    fprintf(stderr, "aco: %s: ", fn);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    abort();
}

#define aco__check(fn, cond, ...)                                             \
    do {                                                                      \
        if (aco_unlikely(!(cond))) aco__fatal(fn, __VA_ARGS__);               \
    } while (0)

static void* aco__alloc(const char* fn, size_t sz) {
    void* p = malloc(sz);
    aco__check(fn, p != NULL, "out of memory (malloc of %zu bytes failed)", sz);
    return p;
}

/* ------------------------------------------------------------------------ */
/* Sanitizers (aco.h detects them: ACO__ASAN, ACO__TSAN).                   */
/*                                                                          */
/* Every switch goes through aco__switch (below), which announces it: ASan  */
/* learns the stack the next co runs on and keeps one fake stack per co     */
/* (detect_stack_use_after_return=1), TSan switches fibers.                 */
/*                                                                          */
/* A co's frames on a share stack carry ASan state that the bytes alone do  */
/* not: the shadow memory that marks the red zones around its arrays.  So   */
/* the lazy save moves that shadow along with the bytes, into the save      */
/* buffer right after them, and leaves the vacated share-stack region       */
/* unpoisoned for the next co; the restore puts it back.  The shadow is read */
/* and written directly (its mapping comes from the public                   */
/* __asan_get_shadow_mapping), one byte per 8-byte granule: exact, red-zone */
/* kinds included, and an eighth of the copy's cost.  The copies themselves */
/* run in uninstrumented code that never calls memcpy (ASan checks every   */
/* memcpy): the bytes they move include red zones.                          */
/*                                                                          */
/* Invariant: share-stack bytes outside its owner's live frames (everything */
/* below the owner's stack pointer; the whole stack when it has no owner)   */
/* are unpoisoned.  Frames that return unpoison themselves; a co evicted,   */
/* ended, reset or destroyed has its region unpoisoned by the library.      */
/*                                                                          */
/* Under ASan, co objects and save stacks come from malloc, not the pools:  */
/* ASan then watches them (a use after aco_destroy is reported) and         */
/* LeakSanitizer sees what they point to.                                   */
/* ------------------------------------------------------------------------ */

/* ACO__NOSAN: a function the sanitizers leave alone.  clang's
 * no_sanitize("thread") still brackets a function with TSan's
 * __tsan_func_entry/exit, which must not run around a fiber switch;
 * disable_sanitizer_instrumentation (clang >= 14) drops those, and
 * no_sanitize the memory checks (clang 14's ASan ignores the former). */
#if !ACO__SAN_SWITCH
#define ACO__NOSAN
#elif defined(__clang__) && defined(__has_attribute) && \
    __has_attribute(disable_sanitizer_instrumentation)
#define ACO__NOSAN __attribute__((noinline, disable_sanitizer_instrumentation, \
                                    no_sanitize("address", "thread")))
#elif defined(__clang__)
#define ACO__NOSAN __attribute__((noinline, no_sanitize("address", "thread")))
#else
#define ACO__NOSAN __attribute__((noinline, no_sanitize_address, no_sanitize_thread))
#endif

/* The hot-path helpers of the stack copies: inline, except in sanitizer
 * builds, where they stay out of line and uninstrumented. */
#if ACO__SAN_SWITCH
#define ACO__INLINE_NOSAN ACO__NOSAN
#else
#define ACO__INLINE_NOSAN inline
#endif

#if ACO__ASAN
/* The shadow granule: 1 << scale bytes per shadow byte. */
static size_t aco__asan_scale(void) {
    size_t scale, offset;
    __asan_get_shadow_mapping(&scale, &offset);
    return scale;
}

/* Shadow bytes a save buffer of sz bytes needs for its granules: a saved
 * range [sp, top) is widened to whole granules, one more at each end. */
static size_t aco__asan_shadow_cap(size_t sz) {
    return (sz >> aco__asan_scale()) + 2;
}

/* Move the shadow of the granules covering [lo, hi) into buf and unpoison
 * them (out != 0), or write buf back into that shadow (out == 0).  The
 * volatile accesses keep the compiler from calling memcpy or memset. */
static ACO__NOSAN void aco__asan_shadow_move(uintptr_t lo, uintptr_t hi,
                                             unsigned char* buf, int out) {
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
static void aco__asan_vacate(const void* lo, const void* hi) {
    uintptr_t g = (uintptr_t)1 << aco__asan_scale();
    uintptr_t l = (uintptr_t)lo & ~(g - 1);
    __asan_unpoison_memory_region((void*)l, (size_t)((uintptr_t)hi - l));
}

static void aco__asan_entry(void);
#endif

/* ------------------------------------------------------------------------ */
/* Thread init and the protector                                            */
/* ------------------------------------------------------------------------ */

void aco_thread_init(aco_cofuncp_t last_word_co_fp) {
    aco__fpenv_capture();
    aco__last_word = last_word_co_fp;
    aco__inited = 1;
}

/* Called from aco_protector when a co function returned: a bug. */
__attribute__((visibility("hidden"), noreturn))
void aco__funcp_protector(void);

void aco__funcp_protector(void) {
    aco_t* co = aco_gtls_co;
    if (aco__last_word != NULL) aco__last_word();
    aco__fatal("protector", "co %p returned from its co function %p instead of "
               "calling aco_exit(); a co function must end with aco_exit()",
               (void*)co, co != NULL ? (void*)co->fp : NULL);
}

/* ------------------------------------------------------------------------ */
/* Share stacks                                                             */
/* ------------------------------------------------------------------------ */

/* Where a co "returns" to: aco_protector in acosw.S. */
extern const char aco_protector_ret[] __attribute__((visibility("hidden")));

static size_t aco__pagesize(void) {
    long pg = sysconf(_SC_PAGESIZE);
    aco__check("aco_share_stack_new2", pg > 0 && (pg & (pg - 1)) == 0,
               "sysconf(_SC_PAGESIZE) returned %ld", pg);
    return (size_t)pg;
}

aco_share_stack_t* aco_share_stack_new(size_t sz) {
    return aco_share_stack_new2(sz, 1);
}

aco_share_stack_t* aco_share_stack_new2(size_t sz, char guard_page_enabled) {
    static const char fn[] = "aco_share_stack_new2";
    if (sz == 0) sz = 2u << 20;
    if (sz < 4096) sz = 4096;
    /* Save stacks count in 32 bits: a co never has 4 GiB live. */
    aco__check(fn, (uint64_t)sz <= UINT32_MAX - (1u << 20),
               "stack size %zu exceeds 4 GiB", sz);

    aco_share_stack_t* s = aco__alloc(fn, sizeof(*s));
    memset(s, 0, sizeof(*s));
    if (guard_page_enabled) {
        size_t pg = aco__pagesize();
        sz = (sz + pg - 1) & ~(pg - 1);
        s->real_sz = sz + pg;
        s->real_ptr = mmap(NULL, s->real_sz, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        aco__check(fn, s->real_ptr != MAP_FAILED,
                   "out of memory (mmap of %zu bytes failed: %s)", s->real_sz,
                   strerror(errno));
        /* The guard sits below the stack: stacks grow down on every
         * supported architecture. */
        aco__check(fn, mprotect(s->real_ptr, pg, PROT_NONE) == 0,
                   "mprotect of the guard page failed: %s", strerror(errno));
        s->ptr = (char*)s->real_ptr + pg;
        s->guard_page_enabled = 1;
    } else {
        sz = (sz + 15) & ~(size_t)15;
        s->real_sz = sz;
        s->real_ptr = aco__alloc(fn, sz);
        s->ptr = s->real_ptr;
    }
    s->sz = sz;

    uintptr_t high = ((uintptr_t)s->ptr + sz) & ~(uintptr_t)15;
    s->align_highptr = (void*)high;
#ifdef ACO_OFF_LR
    /* The return address is a register (aco_create sets a new co's lr to
     * the protector): a co function enters with sp == highptr, and
     * sp % 16 == 0 at a call is the ABI's rule (AAPCS64, RISC-V psABI). */
    s->align_retptr = (void*)high;
#else
    /* Top of the stack: a 16-byte aligned highptr with the protector's
     * address just below it, so a starting co function finds a return
     * address and, per the ABI, (sp + sizeof(void*)) % 16 == 0 at entry. */
    s->align_retptr = (void*)(high - sizeof(void*));
    *(const void**)s->align_retptr = aco_protector_ret;
#endif
    s->align_limit = (size_t)((uintptr_t)s->align_retptr - (uintptr_t)s->ptr);
    s->owner = NULL;
#ifdef ACO_USE_VALGRIND
    s->valgrind_stk_id = VALGRIND_STACK_REGISTER(s->ptr, (char*)s->ptr + sz);
#endif
#if ACO__ASAN
    /* LeakSanitizer scans heap blocks and thread stacks, not our mappings:
     * a suspended owner's locals may hold the only pointer to a block. */
    if (s->guard_page_enabled) __lsan_register_root_region(s->ptr, s->sz);
#endif
    return s;
}

void aco_share_stack_destroy(aco_share_stack_t* sstk) {
    static const char fn[] = "aco_share_stack_destroy";
    aco__check(fn, sstk != NULL, "sstk must not be NULL");
    aco__check(fn, sstk->co_ct == 0,
               "share stack %p is still used by %zu co(s); destroy them first",
               (void*)sstk, sstk->co_ct);
#ifdef ACO_USE_VALGRIND
    VALGRIND_STACK_DEREGISTER(sstk->valgrind_stk_id);
#endif
#if ACO__ASAN
    /* Leave no stale poison for whatever reuses the memory. */
    aco__asan_vacate(sstk->ptr, (char*)sstk->ptr + sstk->sz);
    if (sstk->guard_page_enabled) __lsan_unregister_root_region(sstk->ptr, sstk->sz);
#endif
    if (sstk->guard_page_enabled) {
        aco__check(fn, munmap(sstk->real_ptr, sstk->real_sz) == 0,
                   "munmap failed: %s", strerror(errno));
    } else {
        free(sstk->real_ptr);
    }
    free(sstk);
}

/* ------------------------------------------------------------------------ */
/* Pools: co objects and small save stacks                                  */
/*                                                                          */
/* Each pool hands out equal slots from 64 KiB slabs, with no per-object    */
/* header or rounding: at ten million cos, malloc's 8-byte header and       */
/* 16-byte rounding would cost ~24 bytes a co.  One pool holds aco_t's;     */
/* save stacks up to ACO_SAVE_POOLED bytes come from pools in 8-byte steps  */
/* (an x86-64 co's live bytes are 16k+8: they fit exactly); larger ones     */
/* from malloc.  Slabs are carved from 2 MiB mappings and unmapped when     */
/* empty, except one spare per pool.  A slab is found from any of its slots */
/* by masking the address.  One mutex guards all pools (a co may be         */
/* destroyed in any thread); it is skipped while the process has a single  */
/* thread, as glibc's malloc does.                                          */
/* ------------------------------------------------------------------------ */

#define ACO_SLAB_BYTES  ((size_t)64 << 10)
#define ACO_ARENA_SLABS 32
#define ACO_SAVE_POOLED 512

typedef struct aco__slab aco__slab;
typedef struct {
    aco__slab* avail;   /* slabs with a free slot */
    size_t     slot;    /* bytes per slot (set, under the lock, by each alloc) */
} aco__pool;

struct aco__slab {
    aco__slab* prev;    /* in pool->avail */
    aco__slab* next;
    aco__pool* pool;
    void*      free;    /* freed slots, linked through their first word */
    size_t     live;    /* slots in use */
    size_t     carved;  /* slots handed out at least once */
};
#define ACO_SLAB_FIRST  ((sizeof(aco__slab) + 15) & ~(size_t)15)

static pthread_mutex_t aco__pool_mu = PTHREAD_MUTEX_INITIALIZER;
static aco__pool aco__co_pool;
static aco__pool aco__save_pool[ACO_SAVE_POOLED / 8];  /* i: (i + 1) * 8 bytes */
static char*  aco__arena;       /* the rest of the current 2 MiB mapping */
static size_t aco__arena_left;  /* slabs left in it */

#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 32)
#include <sys/single_threaded.h>
#define aco__single_threaded() (__libc_single_threaded != 0)
#else
#define aco__single_threaded() 0
#endif

static int aco__pool_lock(void) {
    if (aco__single_threaded()) return 0;
    pthread_mutex_lock(&aco__pool_mu);
    return 1;
}

static void aco__pool_unlock(int locked) {
    if (locked) pthread_mutex_unlock(&aco__pool_mu);
}

static size_t aco__slab_slots(const aco__pool* pool) {
    return (ACO_SLAB_BYTES - ACO_SLAB_FIRST) / pool->slot;
}

static void aco__avail_unlink(aco__slab* b) {
    if (b->prev) b->prev->next = b->next; else b->pool->avail = b->next;
    if (b->next) b->next->prev = b->prev;
    b->prev = b->next = NULL;
}

static void aco__avail_push(aco__slab* b) {
    b->prev = NULL;
    b->next = b->pool->avail;
    if (b->next) b->next->prev = b;
    b->pool->avail = b;
}

/* A fresh (zero) slab; NULL when out of memory.  Called locked. */
static aco__slab* aco__slab_map(void) {
    if (aco__arena_left == 0) {
        size_t want = ACO_ARENA_SLABS * ACO_SLAB_BYTES;
        char* m = mmap(NULL, want + ACO_SLAB_BYTES, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) return NULL;
        /* Keep the slab-aligned middle: slots find their slab by masking. */
        char* al = (char*)(((uintptr_t)m + ACO_SLAB_BYTES - 1) &
                           ~(uintptr_t)(ACO_SLAB_BYTES - 1));
        if (al > m) munmap(m, (size_t)(al - m));
        if (al + want < m + want + ACO_SLAB_BYTES)
            munmap(al + want, (size_t)(m + want + ACO_SLAB_BYTES - (al + want)));
        aco__arena = al;
        aco__arena_left = ACO_ARENA_SLABS;
    }
    aco__slab* b = (aco__slab*)aco__arena;
    aco__arena += ACO_SLAB_BYTES;
    aco__arena_left--;
    return b;
}

static void* aco__pool_alloc(aco__pool* pool, size_t slot, const char* fn) {
    int locked = aco__pool_lock();
    pool->slot = slot;
    aco__slab* b = pool->avail;
    if (b == NULL) {
        b = aco__slab_map();
        if (b == NULL) {
            aco__pool_unlock(locked);
            aco__fatal(fn, "out of memory (mmap of a slab failed)");
        }
        b->pool = pool;
        aco__avail_push(b);
    }
    void* p;
    if (b->free != NULL) {
        p = b->free;
#ifdef ACO_USE_VALGRIND
        VALGRIND_MAKE_MEM_DEFINED(p, sizeof(void*));
#endif
        b->free = *(void**)p;
    } else {
        p = (char*)b + ACO_SLAB_FIRST + b->carved++ * pool->slot;
    }
    if (++b->live == aco__slab_slots(pool)) aco__avail_unlink(b);
    aco__pool_unlock(locked);
#ifdef ACO_USE_VALGRIND
    VALGRIND_MALLOCLIKE_BLOCK(p, pool->slot, 0, 0);
#endif
    return p;
}

static void aco__pool_free(void* p) {
    aco__slab* b = (aco__slab*)((uintptr_t)p & ~(uintptr_t)(ACO_SLAB_BYTES - 1));
#ifdef ACO_USE_VALGRIND
    VALGRIND_FREELIKE_BLOCK(p, 0);
    VALGRIND_MAKE_MEM_UNDEFINED(p, sizeof(void*));
#endif
    int locked = aco__pool_lock();
    *(void**)p = b->free;
    b->free = p;
    if (b->live-- == aco__slab_slots(b->pool)) aco__avail_push(b);
    if (b->live == 0 && (b->prev != NULL || b->next != NULL)) {
        /* Empty and not the pool's only slab with room: give it back. */
        aco__avail_unlink(b);
        munmap(b, ACO_SLAB_BYTES);
        p = NULL;
    }
    aco__pool_unlock(locked);
#ifdef ACO_USE_VALGRIND
    if (p != NULL) VALGRIND_MAKE_MEM_NOACCESS(p, sizeof(void*));
#endif
}

/* A zeroed co object (ASan: from malloc, see "Sanitizers"). */
static aco_t* aco__co_alloc(const char* fn) {
    aco_t* co = ACO__ASAN ? aco__alloc(fn, sizeof(aco_t))
                          : aco__pool_alloc(&aco__co_pool,
                                            (sizeof(aco_t) + 15) & ~(size_t)15, fn);
    memset(co, 0, sizeof(*co));
    return co;
}

static void aco__co_free(aco_t* co) {
    if (ACO__ASAN) free(co);
    else aco__pool_free(co);
}

/* Save stacks: pooled up to ACO_SAVE_POOLED bytes, malloc'd above; the
 * capacity (save_stack.sz) says which. */
static size_t aco__save_capacity(size_t n) {
    return n <= ACO_SAVE_POOLED ? (n + 7) & ~(size_t)7 : n;
}

/* Bytes a save buffer of capacity cap holds beyond cap: under ASan, the
 * shadow of the saved bytes (see "Sanitizers"). */
static size_t aco__save_extra(size_t cap) {
#if ACO__ASAN
    return aco__asan_shadow_cap(cap);
#else
    (void)cap;
    return 0;
#endif
}

static void* aco__save_alloc(size_t cap, const char* fn) {
    if (!ACO__ASAN && cap <= ACO_SAVE_POOLED) {
        return aco__pool_alloc(&aco__save_pool[cap / 8 - 1], cap, fn);
    }
    return aco__alloc(fn, cap + aco__save_extra(cap));
}

static void aco__save_free(aco_save_stack_t* ss) {
    if (ss->ptr == NULL) return;
    if (!ACO__ASAN && ss->sz <= ACO_SAVE_POOLED) aco__pool_free(ss->ptr);
    else free(ss->ptr);
    ss->ptr = NULL;
}

/* ------------------------------------------------------------------------ */
/* Cos                                                                      */
/* ------------------------------------------------------------------------ */

/* The registers of a co that has not run yet: its first switch enters
 * co->fp at the top of its share stack, with the protector as the return
 * address and the FP control words aco_thread_init() captured. */
static void aco__init_regs(aco_t* co) {
    memset(co->reg, 0, sizeof(co->reg));
#if ACO__ASAN
    ACO_PC(co) = (void*)aco__asan_entry;    /* it finishes the switch first */
#else
    ACO_PC(co) = (void*)co->fp;
#endif
    ACO_SP(co) = co->share_stack->align_retptr;
#ifdef ACO_OFF_LR
    co->reg[ACO_OFF_LR / sizeof(void*)] = (void*)(uintptr_t)aco_protector_ret;
#endif
    aco__fpenv_give(co);
}

aco_t* aco_create(aco_t* main_co, aco_share_stack_t* share_stack,
                  size_t save_stack_sz, aco_cofuncp_t fp, void* arg) {
    static const char fn[] = "aco_create";
    aco__check(fn, aco__inited,
               "aco_thread_init() must be called in this thread first");
    if (main_co == NULL) {
        aco__check(fn, share_stack == NULL && fp == NULL,
                   "a main co (main_co == NULL) takes no share stack and no "
                   "co function");
        aco__check(fn, aco_gtls_co == NULL || aco_is_main_co(aco_gtls_co),
                   "a main co must be created outside any running co "
                   "(co %p is running)", (void*)aco_gtls_co);
        aco_t* co = aco__co_alloc(fn);
        co->arg = arg;
        co->away_ = 1;      /* owns no share stack: never resumed */
#if ACO__TSAN
        co->tsan_fiber = __tsan_get_current_fiber();
#endif
        aco_gtls_co = co;
        return co;
    }
    aco__check(fn, aco_is_main_co(main_co), "main_co %p is not a main co",
               (void*)main_co);
    aco__check(fn, share_stack != NULL,
               "share_stack must not be NULL for a non-main co");
    aco__check(fn, fp != NULL, "fp must not be NULL for a non-main co");

    aco__check(fn, save_stack_sz <= UINT32_MAX,
               "save_stack_sz %zu exceeds 4 GiB", save_stack_sz);

    aco_t* co = aco__co_alloc(fn);
    co->main_co = main_co;
    co->arg = arg;
    co->fp = fp;
    co->share_stack = share_stack;
    co->away_ = 1;      /* until its first resume takes the stack */
    aco__init_regs(co);
    /* The save stack is allocated when first needed, exactly as large as
     * needed, unless the caller asked for an initial size. */
    if (save_stack_sz != 0) {
        size_t cap = aco__save_capacity(save_stack_sz);
        co->save_stack.ptr = aco__save_alloc(cap, fn);
        co->save_stack.sz = (uint32_t)cap;
    }
    share_stack->co_ct++;
    return co;
}

/* Copy n bytes between a share stack and a save stack.  n is a multiple of
 * 4 (both ends are slot-aligned) and usually small: a co suspended a frame
 * or two above its function.  Below ACO_COPY_SMALL bytes the copy is
 * straight-line: one fixed-size block from each end, overlapping in the
 * middle (gcc and clang expand a constant-size memcpy into a few vector
 * moves, no call), chosen by a two-level size test.  Larger copies call
 * memcpy, from a path of their own (aco__resume_big), so that the common
 * one calls nothing and spills no register. */
#define ACO_COPY_SMALL 256      /* a power of two: see aco__resume_taking */

#if ACO__SAN_SWITCH
/* Sanitizer builds: uninstrumented, word by word, never memcpy (ASan checks
 * a memcpy's whole range, and the frames copied have poisoned red zones). */
typedef uintptr_t aco__word __attribute__((aligned(1), may_alias));

static ACO__NOSAN void aco__copy(void* dst, const void* src, size_t n,
                                 int w) {
    char* d = dst;
    const char* s = src;
    (void)w;
    for (size_t i = 0; i + sizeof(aco__word) <= n; i += sizeof(aco__word)) {
        __asm__("" : "+r"(i));  /* no memcpy idiom */
        *(aco__word*)(d + i) = *(const aco__word*)(s + i);
    }
    for (size_t i = n & ~(sizeof(aco__word) - 1); i < n; i++)
        ((volatile char*)d)[i] = s[i];      /* a 4-byte tail on 64-bit */
}
#else
/* Moves of w bytes: 16 (SSE2 on x86-64, NEON on aarch64, what the compiler
 * makes of a 16-byte memcpy elsewhere), 32 (AVX) or 64 (AVX-512), the
 * last two on x86-64 CPUs that have them (aco__resume_taking's dispatch).
 * The vector types are unaligned and alias anything; gcc and clang emit
 * each as one full-width move (gcc splits a constant-size memcpy's 32-byte
 * moves in two for generic tuning). */
#if defined(__x86_64__)
typedef char aco__v32 __attribute__((vector_size(32), aligned(1), may_alias));
typedef char aco__v64 __attribute__((vector_size(64), aligned(1), may_alias));
#endif

/* k bytes: 4, 8 or a multiple of 16, up to 128. */
__attribute__((always_inline))
static inline void aco__block(char* d, const char* s, size_t k, int w) {
#if defined(__x86_64__)
    if (w == 64 && k >= 64) {
        for (size_t i = 0; i < k; i += 64)
            *(aco__v64*)(d + i) = *(const aco__v64*)(s + i);
        return;
    }
    if (w >= 32 && k >= 32) {
        for (size_t i = 0; i < k; i += 32)
            *(aco__v32*)(d + i) = *(const aco__v32*)(s + i);
        return;
    }
#endif
    (void)w;
    memcpy(d, s, k);
}

/* w == 0: any n, by memcpy (aco__resume_big).  Else n < ACO_COPY_SMALL,
 * by two blocks of the largest power of two not above n (w is a constant
 * once inlined). */
__attribute__((always_inline))
static inline void aco__copy(void* dst, const void* src, size_t n, int w) {
    char* d = dst;
    const char* s = src;
#define ACO_ENDS(k)                                                           \
    do {                                                                      \
        aco__block(d, s, k, w);                                               \
        aco__block(d + n - (k), s + n - (k), k, w);                           \
    } while (0)
    if (w == 0) {
        memcpy(d, s, n);
    } else if (n > 64) {
        if (n > 128) ACO_ENDS(128);
        else ACO_ENDS(64);
    } else if (n > 16) {
        if (n > 32) ACO_ENDS(32);
        else ACO_ENDS(16);
    } else if (n >= 8) {
        ACO_ENDS(8);
    } else if (n >= 4) {
        ACO_ENDS(4);
    }
#undef ACO_ENDS
}
#endif

__attribute__((noinline, cold, noreturn))
static void aco__overflowed(aco_t* owner) {
    aco_share_stack_t* s = owner->share_stack;
    aco__fatal("aco_resume", "co %p's stack pointer %p lies outside its share "
               "stack [%p, %p): it overflowed", (void*)owner, ACO_SP(owner),
               s->ptr, s->align_retptr);
}

/* The owner's live bytes: its frames, from its saved stack pointer up to
 * align_retptr.  Checked: a co that overflowed a stack without a guard page
 * is caught here at the latest. */
static inline size_t aco__live(aco_t* owner, aco_share_stack_t* s) {
    size_t n = (uintptr_t)s->align_retptr - (uintptr_t)ACO_SP(owner);
    if (aco_unlikely(n > s->align_limit)) aco__overflowed(owner);  /* or sp above */
    return n;
}

/* Copy them to the owner's save stack, which is large enough. */
static ACO__INLINE_NOSAN void aco__save(aco_t* owner, size_t n, int w) {
    aco_save_stack_t* ss = &owner->save_stack;
    if (n > 0) {
        aco__copy(ss->ptr, ACO_SP(owner), n, w);
        ss->ct_save++;
#if ACO__ASAN
        aco__asan_shadow_move((uintptr_t)ACO_SP(owner),
                              (uintptr_t)owner->share_stack->align_highptr,
                              (unsigned char*)ss->ptr + ss->sz, 1);
#endif
    }
    ss->valid_sz = (uint32_t)n;
    if (n > ss->max_cpsz) ss->max_cpsz = n;
}

/* Bytes below the stack pointer that memcheck treats as addressable: the
 * x86-64 red zone (psABI 3.2.2). */
#if defined(__x86_64__)
#define ACO_RED_ZONE 128
#else
#define ACO_RED_ZONE 0
#endif

/* Put co's n saved bytes (save_stack.valid_sz) back where they were: right
 * below top, its share stack's align_retptr. */
static ACO__INLINE_NOSAN void aco__restore(aco_t* co, char* top, size_t n,
                                          int w) {
    aco_save_stack_t* ss = &co->save_stack;
    char* dst = top - n;
#ifdef ACO_USE_VALGRIND
    /* Another co may have run deeper here and returned, leaving this region
     * marked inaccessible.  It is about to hold co's live frames again, with
     * co's red zone below them (memcheck checks a call's push against the
     * red zone's state).  The copy then carries the saved definedness. */
    char* low = dst - ACO_RED_ZONE;
    if (low < (char*)co->share_stack->ptr) low = co->share_stack->ptr;
    VALGRIND_MAKE_MEM_UNDEFINED(low, (size_t)(dst - low) + n);
#endif
    if (n == 0) return;
    aco__copy(dst, ss->ptr, n, w);
    ss->ct_restore++;
#if ACO__ASAN
    /* n == 0 (a co that never ran) finds the region clean: the invariant. */
    aco__asan_shadow_move((uintptr_t)dst, (uintptr_t)co->share_stack->align_highptr,
                          (unsigned char*)ss->ptr + ss->sz, 0);
#endif
}

/* co now holds its share stack s, with n bytes restored, and runs.  (The
 * arguments spare reloads the copies' char stores would force.) */
static inline void aco__take_done(aco_t* co, aco_share_stack_t* s, size_t n) {
    s->owner = co;
    co->away_ = 0;
    s->align_validsz = n;
    /* cur is co->main_co, but reading it from co here, after the copies'
     * stores, measured ~1 ns slower per stack change than from TLS. */
    aco_t* cur = aco_gtls_co;
    aco_gtls_co = co;
    ACO__SW(cur, co);   /* a tail jump, as in aco_resume */
}

/* aco_resume when the share stack changes hands.  Lazy save: its holder is
 * copied out only now that co needs the stack; a co alone on its stack never
 * is.  Out of line and entered by a tail jump, so that aco_resume's fast path
 * saves no registers; it calls nothing, so it saves none either: a save
 * stack that must grow and copies of ACO_COPY_SMALL bytes or more take
 * aco__resume_big, by a tail jump too. */
static void aco__resume_big(aco_t* co);

__attribute__((always_inline))
static inline void aco__take(aco_t* co, int w) {
    aco_share_stack_t* s = co->share_stack;
    aco_t* owner = s->owner;
    size_t n = 0;
    if (owner != NULL) {
        n = aco__live(owner, s);
        if (aco_unlikely(n > owner->save_stack.sz)) {
            aco__resume_big(co);
            return;
        }
    }
    /* Both below a power of two: so is their OR, and conversely. */
    if (aco_unlikely((n | co->save_stack.valid_sz) >= ACO_COPY_SMALL)) {
        aco__resume_big(co);
        return;
    }
    size_t m = co->save_stack.valid_sz;
    char* top = s->align_retptr;
    if (owner != NULL) {
        aco__save(owner, n, w);
        owner->away_ = 1;
    }
    aco__restore(co, top, m, w);
    aco__take_done(co, s, m);
}

__attribute__((noinline))
static void aco__resume_taking(aco_t* co) {
    aco__take(co, 16);
}

/* On x86-64 the copies' width follows the CPU: one store of a 120-byte
 * frame's 2 x 64 bytes is 8 SSE moves, 4 AVX ones or 2 AVX-512 ones, and
 * the stores are what a switch with copies waits for.  AVX-512 only where
 * it does not cost clock speed (Ice Lake and later: VBMI2 tells them). */
#if defined(__x86_64__) && !ACO__SAN_SWITCH
#define ACO__VEC_DISPATCH 1
__attribute__((noinline, target("avx")))
static void aco__resume_taking_avx(aco_t* co) {
    aco__take(co, 32);
}

__attribute__((noinline, target("avx512f")))
static void aco__resume_taking_avx512(aco_t* co) {
    aco__take(co, 64);
}

static unsigned char aco__vec_w = 16;      /* in use */
static unsigned char aco__vec_max = 16;    /* the widest this CPU has */

__attribute__((constructor))
static void aco__vec_init(void) {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512vbmi2"))
        aco__vec_max = 64;
    else if (__builtin_cpu_supports("avx"))
        aco__vec_max = 32;
    aco__vec_w = aco__vec_max;
}
#else
#define ACO__VEC_DISPATCH 0
#endif

/* For tests (hidden; declared in tests/aco_test.h): the copy width in use
 * (0: the build has one kind of copy); w != 0 selects width w if this CPU
 * and build have it.  Returns the width now in use, -1 if w is not there. */
__attribute__((visibility("hidden"))) int aco__copy_width(int w);

int aco__copy_width(int w) {
#if ACO__VEC_DISPATCH
    if (w == 0) return aco__vec_w;
    if ((w != 16 && w != 32 && w != 64) || w > aco__vec_max) return -1;
    aco__vec_w = (unsigned char)w;
    return w;
#else
    return w == 0 ? 0 : -1;
#endif
}

/* The same with memcpy for every copy, after growing the owner's save stack
 * if it is too small: replaced by one that fits exactly (its old content is
 * replaced whole: no realloc copy). */
__attribute__((noinline))
static void aco__resume_big(aco_t* co) {
    aco_share_stack_t* s = co->share_stack;
    aco_t* owner = s->owner;
    if (owner != NULL) {
        aco_save_stack_t* ss = &owner->save_stack;
        size_t n = aco__live(owner, s);
        if (n > ss->sz) {
            size_t cap = aco__save_capacity(n);
            aco__save_free(ss);
            ss->ptr = aco__save_alloc(cap, "aco_resume");
            ss->sz = (uint32_t)cap;
        }
        aco__save(owner, n, 0);
        owner->away_ = 1;
    }
    size_t m = co->save_stack.valid_sz;
    aco__restore(co, s->align_retptr, m, 0);
    aco__take_done(co, s, m);
}

__attribute__((noinline, cold, noreturn))
static void aco__resume_misuse(aco_t* co) {
    static const char fn[] = "aco_resume";
    aco__check(fn, co != NULL, "co must not be NULL");
    aco__check(fn, !aco_is_main_co(co),
               "co %p is a main co; only non-main cos can be resumed",
               (void*)co);
    aco__check(fn, aco_gtls_co == co->main_co,
               "must be called from co %p's main co %p, not from co %p",
               (void*)co, (void*)co->main_co, (void*)aco_gtls_co);
    aco__check(fn, !co->is_end, "co %p has ended (it called aco_exit())",
               (void*)co);
    aco__fatal(fn, "co %p: inconsistent state", (void*)co);
}

void aco__yield_misuse(const char* fn) {
    aco_t* co = aco_gtls_co;
    aco__fatal(fn, "must be called from a non-main co (the caller is %s %p)",
               co == NULL ? "no co" : "main co", (void*)co);
}

/* is_end and away_ are adjacent bytes: aco_resume tests both at once.
 * away_ is derivable (share_stack->owner != co) and kept in step by every
 * owner change (aco__take_done, aco__take, aco__resume_big, aco_exit,
 * aco__drop_frames); the derived test's two dependent loads measured 4-6 %
 * slower standalone round trips in the benchmark's comparison. */
_Static_assert(offsetof(aco_t, away_) == offsetof(aco_t, is_end) + 1,
               "aco_t.away_ must follow is_end");

static inline int aco__ended_or_away(const aco_t* co) {
    uint16_t both;
    memcpy(&both, &co->is_end, sizeof(both));
    return both != 0;
}

void aco_resume(aco_t* co) {
    aco_t* cur = aco_gtls_co;
    /* cur == NULL passes only for a main co, which is always away_. */
    if (aco_unlikely(co == NULL || co->main_co != cur))
        aco__resume_misuse(co);
    if (aco_unlikely(aco__ended_or_away(co))) {
        if (aco_unlikely(co->is_end || cur == NULL)) aco__resume_misuse(co);
#if ACO__VEC_DISPATCH
        if (aco__vec_w == 64) {
            aco__resume_taking_avx512(co);
            return;
        }
        if (aco__vec_w == 32) {
            aco__resume_taking_avx(co);
            return;
        }
#endif
        aco__resume_taking(co);
        return;
    }
    aco_gtls_co = co;
    /* Last, so that compilers emit a tail jump: acosw then records our
     * caller's return address, and the main co continues right there when
     * co yields (aco_yield sets aco_gtls_co back), with no return of ours to
     * mispredict.  Without the tail call (-O0) it is merely slower.
     * (Sanitizer builds: aco__switch, which returns here.) */
    ACO__SW(cur, co);
}

#if ACO__SAN_SWITCH
/* Every switch of a sanitizer build (aco.h's ACO__SW).  Uninstrumented:
 * TSan's fiber switch must come right before the stack switch with no
 * instrumented code between them, and ASan must not see the stacks change
 * under it. */
void aco__switch(aco_t* from, aco_t* to) ACO__NOSAN;

void aco__switch(aco_t* from, aco_t* to) {
#if ACO__ASAN
    const void* lo;
    size_t sz;
    if (aco_is_main_co(to)) {
        lo = to->asan_stack_lo;     /* recorded when it resumed `from` */
        sz = to->asan_stack_sz;
    } else {
        lo = to->share_stack->ptr;
        sz = to->share_stack->sz;
    }
    /* A co leaving for good passes NULL: ASan frees its fake stack. */
    __sanitizer_start_switch_fiber(from->is_end ? NULL : &from->asan_fake_stack,
                                   lo, sz);
#endif
#if ACO__TSAN
    /* A co's fiber lives from its first run to its end: TSan counts fibers
     * as threads, and in the child of a fork with other threads it stops
     * tracking synchronisation.  Cos created before a fork and run after
     * it (a common test pattern) are then fine. */
    if (to->tsan_fiber == NULL) to->tsan_fiber = __tsan_create_fiber(0);
    /* flags 0: the switch orders what `from` did before what `to` does. */
    __tsan_switch_to_fiber(to->tsan_fiber, 0);
#endif
    acosw(from, to);
#if ACO__TSAN
    /* Back in a main co from a co that ended: its fiber is done. */
    if (aco_is_main_co(from) && to->is_end) {
        __tsan_destroy_fiber(to->tsan_fiber);
        to->tsan_fiber = NULL;
    }
#endif
#if ACO__ASAN
    /* Back in `from`: a main co returns here only from the co it resumed,
     * `to`; a non-main co only from its main co. */
    const void* prev_lo;
    size_t prev_sz;
    __sanitizer_finish_switch_fiber(from->asan_fake_stack, &prev_lo, &prev_sz);
    if (aco_is_main_co(from)) {
        if (to->is_end)     /* its frames are dead: clear their red zones */
            aco__asan_vacate(ACO_SP(to), to->share_stack->align_highptr);
    } else {
        from->main_co->asan_stack_lo = prev_lo;
        from->main_co->asan_stack_sz = prev_sz;
    }
#endif
}
#endif

#if ACO__ASAN
/* Where a new co starts under ASan (its initial pc): finish the switch that
 * started it, then call its function.  aco_protector_ret stays the return
 * address of this frame (lr-register architectures: the protector is in lr
 * at entry and this frame's own return goes there), so the stack's shape is
 * as without ASan plus one frame. */
static ACO__NOSAN void aco__asan_entry(void) {
    aco_t* co = aco_gtls_co;
    __sanitizer_finish_switch_fiber(NULL, &co->main_co->asan_stack_lo,
                                    &co->main_co->asan_stack_sz);
    co->fp();
    aco__funcp_protector();     /* the co function returned */
}
#endif

/* The API function behind the aco_yield() macro of aco.h. */
void (aco_yield)(void) {
    aco__yield_inline();
}

aco_t* aco_get_co(void) {
    return aco_gtls_co;
}

void* aco_get_arg(void) {
    aco_t* co = aco_gtls_co;
    aco__check("aco_get_arg", co != NULL, "no co in this thread");
    return co->arg;
}

void aco_exit(void) {
    aco_t* co = aco_gtls_co;
    if (aco_unlikely(co == NULL || co->main_co == NULL))
        aco__yield_misuse("aco_exit");
    co->is_end = 1;
    /* Its frames are dead now: the next co on this stack need not save them. */
    co->share_stack->owner = NULL;
    co->share_stack->align_validsz = 0;
    co->away_ = 1;
    co->save_stack.valid_sz = 0;
    aco_gtls_co = co->main_co;
    ACO__SW(co, co->main_co);
    aco__fatal("aco_exit", "co %p was resumed after its end", (void*)co);
}

/* A suspended (or ended) co's frames die, by reset or destroy: if it still
 * owns its share stack, nothing of it is saved later.  Under ASan its red
 * zones there are cleared (its fake stack, if any, cannot be freed from
 * outside it: ASan frees one only when its co leaves for good, in
 * aco_exit); under TSan its fiber, which holds the dead frames, goes. */
static void aco__drop_frames(aco_t* co) {
    aco_share_stack_t* s = co->share_stack;
    co->away_ = 1;
    if (s->owner == co) {
        s->owner = NULL;
        s->align_validsz = 0;
#if ACO__ASAN
        aco__asan_vacate(ACO_SP(co), s->align_highptr);
#endif
    }
#if ACO__TSAN
    if (co->tsan_fiber != NULL) __tsan_destroy_fiber(co->tsan_fiber);
    co->tsan_fiber = NULL;
#endif
}

/* Back to the init state (aco.h).  A co's frames are dead once it ended or
 * is reset, so whatever it left on the share stack is not saved: it stops
 * being the owner, and its save stack holds nothing to restore. */
static void aco__reset(const char* fn, aco_t* co, aco_cofuncp_t fp,
                       void* arg) {
    aco__check(fn, co != NULL, "co must not be NULL");
    aco__check(fn, !aco_is_main_co(co),
               "co %p is a main co; only non-main cos can be reset",
               (void*)co);
    aco__check(fn, co != aco_gtls_co,
               "co %p is running; a co cannot reset itself", (void*)co);
    aco_t* cur = aco_gtls_co;
    aco__check(fn, cur != NULL && (cur == co->main_co ||
                                   cur->main_co == co->main_co),
               "co %p belongs to main co %p, not to this thread's (the "
               "caller is co %p)", (void*)co, (void*)co->main_co, (void*)cur);
    aco__check(fn, fp != NULL, "fp must not be NULL");
    aco__drop_frames(co);
    co->save_stack.valid_sz = 0;
    co->is_end = 0;
    co->fp = fp;
    co->arg = arg;
    aco__init_regs(co);
}

void aco_reset(aco_t* co) {
    aco__reset("aco_reset", co, co != NULL ? co->fp : NULL,
               co != NULL ? co->arg : NULL);
}

void aco_reset2(aco_t* co, aco_cofuncp_t fp, void* arg) {
    aco__reset("aco_reset2", co, fp, arg);
}

void aco_destroy(aco_t* co) {
    static const char fn[] = "aco_destroy";
    aco__check(fn, co != NULL, "co must not be NULL");
    if (aco_is_main_co(co)) {
        aco__check(fn, aco_gtls_co == NULL || aco_is_main_co(aco_gtls_co),
                   "main co %p cannot be destroyed while co %p runs",
                   (void*)co, (void*)aco_gtls_co);
        if (aco_gtls_co == co) aco_gtls_co = NULL;
        aco__co_free(co);
        return;
    }
    aco__check(fn, co != aco_gtls_co,
               "co %p is running; a co cannot destroy itself", (void*)co);
    aco__drop_frames(co);
    co->share_stack->co_ct--;
    aco__save_free(&co->save_stack);
    aco__co_free(co);
}
