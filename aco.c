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
_Static_assert(offsetof(aco_t, reg_fpucw) == ACO_OFF_FPUCW &&
               offsetof(aco_t, reg_mxcsr) == ACO_OFF_MXCSR,
               "control-word slots disagree with acosw.S's layout");
_Static_assert(offsetof(aco_t, is_end) == ACO_OFF_FPUCW + 2,
               "is_end lives in the two bytes acosw.S never writes");

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
/* The control words captured by aco_thread_init(): new cos start with them. */
static ACO_TLS uint16_t aco__fpucw;
static ACO_TLS uint32_t aco__mxcsr;

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
/* Thread init and the protector                                            */
/* ------------------------------------------------------------------------ */

void aco_thread_init(aco_cofuncp_t last_word_co_fp) {
    __asm__ volatile("fnstcw %0" : "=m"(aco__fpucw));
    __asm__ volatile("stmxcsr %0" : "=m"(aco__mxcsr));
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
        /* The guard sits below the stack: x86 stacks grow down. */
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

    /* Top of the stack: a 16-byte aligned highptr with the protector's
     * address just below it, so a starting co function finds a return
     * address and, per the ABI, (sp + sizeof(void*)) % 16 == 0 at entry. */
    uintptr_t high = ((uintptr_t)s->ptr + sz) & ~(uintptr_t)15;
    s->align_highptr = (void*)high;
    s->align_retptr = (void*)(high - sizeof(void*));
    *(const void**)s->align_retptr = aco_protector_ret;
    s->align_limit = (size_t)((uintptr_t)s->align_retptr - (uintptr_t)s->ptr);
    s->owner = NULL;
#ifdef ACO_USE_VALGRIND
    s->valgrind_stk_id = VALGRIND_STACK_REGISTER(s->ptr, (char*)s->ptr + sz);
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
    if (sstk->guard_page_enabled) {
        aco__check(fn, munmap(sstk->real_ptr, sstk->real_sz) == 0,
                   "munmap failed: %s", strerror(errno));
    } else {
        free(sstk->real_ptr);
    }
    free(sstk);
}

/* ------------------------------------------------------------------------ */
/* Co objects                                                               */
/*                                                                          */
/* A co is one fixed-size object from a 64 KiB slab, with no per-object     */
/* malloc header or rounding: with ten million cos that is 16 bytes each,   */
/* and allocating never touches more memory than the objects themselves.    */
/* Slabs are shared by all threads (a co may be destroyed anywhere) under   */
/* one mutex held for a few instructions; an empty slab is freed unless it  */
/* is the only one with free slots.                                         */
/* ------------------------------------------------------------------------ */

#define ACO_SLAB_BYTES ((size_t)64 << 10)
#define ACO_SLOT_BYTES ((sizeof(aco_t) + 15) & ~(size_t)15)

typedef struct aco__slab aco__slab;
struct aco__slab {
    aco__slab* prev;    /* in the list of slabs that have a free slot */
    aco__slab* next;
    void*      free;    /* freed slots, linked through their first word */
    size_t     live;    /* slots in use */
    size_t     carved;  /* slots handed out at least once */
};
#define ACO_SLAB_FIRST ((sizeof(aco__slab) + 15) & ~(size_t)15)
#define ACO_SLAB_SLOTS ((ACO_SLAB_BYTES - ACO_SLAB_FIRST) / ACO_SLOT_BYTES)

static pthread_mutex_t aco__slab_mu = PTHREAD_MUTEX_INITIALIZER;
static aco__slab* aco__slabs;   /* slabs with a free slot */

/* While the process has a single thread nobody can race us: skip the
 * mutex's two atomic instructions, as glibc's malloc does. */
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 32)
#include <sys/single_threaded.h>
#define aco__single_threaded() (__libc_single_threaded != 0)
#else
#define aco__single_threaded() 0
#endif

static int aco__slab_lock(void) {
    if (aco__single_threaded()) return 0;
    pthread_mutex_lock(&aco__slab_mu);
    return 1;
}

static void aco__slab_unlock(int locked) {
    if (locked) pthread_mutex_unlock(&aco__slab_mu);
}

static void aco__slab_unlink(aco__slab* b) {
    if (b->prev) b->prev->next = b->next; else aco__slabs = b->next;
    if (b->next) b->next->prev = b->prev;
    b->prev = b->next = NULL;
}

static void aco__slab_push(aco__slab* b) {
    b->prev = NULL;
    b->next = aco__slabs;
    if (aco__slabs) aco__slabs->prev = b;
    aco__slabs = b;
}

/* A zeroed co object. */
static aco_t* aco__co_alloc(const char* fn) {
    int locked = aco__slab_lock();
    aco__slab* b = aco__slabs;
    if (b == NULL) {
        void* mem = NULL;
        if (posix_memalign(&mem, ACO_SLAB_BYTES, ACO_SLAB_BYTES) != 0) {
            aco__slab_unlock(locked);
            aco__fatal(fn, "out of memory (a %zu-byte slab of cos)", ACO_SLAB_BYTES);
        }
        b = mem;
        memset(b, 0, sizeof(*b));
        aco__slab_push(b);
    }
    void* co;
    if (b->free != NULL) {
        co = b->free;
#ifdef ACO_USE_VALGRIND
        VALGRIND_MAKE_MEM_DEFINED(co, sizeof(void*));
#endif
        b->free = *(void**)co;
    } else {
        co = (char*)b + ACO_SLAB_FIRST + b->carved++ * ACO_SLOT_BYTES;
    }
    if (++b->live == ACO_SLAB_SLOTS) aco__slab_unlink(b);
    aco__slab_unlock(locked);
#ifdef ACO_USE_VALGRIND
    VALGRIND_MALLOCLIKE_BLOCK(co, sizeof(aco_t), 0, 0);
#endif
    memset(co, 0, sizeof(aco_t));
    return co;
}

static void aco__co_free(aco_t* co) {
    aco__slab* b = (aco__slab*)((uintptr_t)co & ~(uintptr_t)(ACO_SLAB_BYTES - 1));
#ifdef ACO_USE_VALGRIND
    VALGRIND_FREELIKE_BLOCK(co, 0);
    VALGRIND_MAKE_MEM_UNDEFINED(co, sizeof(void*));
#endif
    int locked = aco__slab_lock();
    *(void**)co = b->free;
    b->free = co;
    if (b->live-- == ACO_SLAB_SLOTS) aco__slab_push(b);
    if (b->live == 0 && (b->prev != NULL || b->next != NULL)) {
        aco__slab_unlink(b);
        free(b);
    }
    aco__slab_unlock(locked);
#ifdef ACO_USE_VALGRIND
    VALGRIND_MAKE_MEM_NOACCESS(co, sizeof(void*));
#endif
}

/* ------------------------------------------------------------------------ */
/* Cos                                                                      */
/* ------------------------------------------------------------------------ */

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
    ACO_PC(co) = (void*)fp;
    ACO_SP(co) = share_stack->align_retptr;
    co->reg_fpucw = aco__fpucw;
    co->reg_mxcsr = aco__mxcsr;
    /* The save stack is allocated when first needed, exactly as large as
     * needed, unless the caller asked for an initial size. */
    if (save_stack_sz != 0) {
        co->save_stack.ptr = aco__alloc(fn, save_stack_sz);
        co->save_stack.sz = (uint32_t)save_stack_sz;
    }
    share_stack->co_ct++;
    return co;
}

/* Copy n bytes between a share stack and a save stack.  n is a multiple of
 * sizeof(void*) (both ends are slot-aligned) and usually small: a co
 * suspended a frame or two above its function.  Small copies run inline in
 * 16-byte blocks, the last block overlapping; large ones go to memcpy. */
typedef long long aco__blk __attribute__((vector_size(16), aligned(1), may_alias));
typedef uintptr_t aco__word __attribute__((aligned(1), may_alias));

static inline void aco__copy(void* dst, const void* src, size_t n) {
    char* d = dst;
    const char* s = src;
    if (n >= 16 && n <= 160) {
        size_t i = 0;
        for (; i + 16 < n; i += 16) {
            /* the empty asm keeps gcc from turning the loop into memcpy */
            __asm__("" : "+r"(i));
            *(aco__blk*)(d + i) = *(const aco__blk*)(s + i);
        }
        *(aco__blk*)(d + n - 16) = *(const aco__blk*)(s + n - 16);
    } else if (n < 16) {
        for (size_t i = 0; i < n; i += sizeof(uintptr_t))
            *(aco__word*)(d + i) = *(const aco__word*)(s + i);
    } else {
        memcpy(d, s, n);
    }
}

/* Copy the live bytes of the share stack's owner (its frames, from its saved
 * stack pointer up to align_retptr) to the owner's save stack. */
static void aco__save(aco_t* owner) {
    static const char fn[] = "aco_resume";
    aco_share_stack_t* s = owner->share_stack;
    uintptr_t sp = (uintptr_t)ACO_SP(owner);
    uintptr_t top = (uintptr_t)s->align_retptr;
    aco__check(fn, sp <= top && top - sp <= s->align_limit,
               "co %p's stack pointer %p lies outside its share stack "
               "[%p, %p): it overflowed", (void*)owner, (void*)sp, s->ptr,
               (void*)top);
    size_t n = top - sp;
    aco_save_stack_t* ss = &owner->save_stack;
    if (n > ss->sz) {
        /* Exact fit.  The old content is replaced whole: no realloc copy. */
        free(ss->ptr);
        ss->ptr = aco__alloc(fn, n);
        ss->sz = (uint32_t)n;
    }
    if (n > 0) {
        aco__copy(ss->ptr, (void*)sp, n);
        ss->ct_save++;
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

/* Put co's saved bytes back where they were: right below align_retptr. */
static void aco__restore(aco_t* co) {
    aco_save_stack_t* ss = &co->save_stack;
    size_t n = ss->valid_sz;
    char* dst = (char*)co->share_stack->align_retptr - n;
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
    aco__copy(dst, ss->ptr, n);
    ss->ct_restore++;
}

/* The share stack changes hands: lazy save of its owner, restore of co. */
void aco__take_stack(aco_t* co) {
    aco_share_stack_t* s = co->share_stack;
    if (s->owner != NULL) aco__save(s->owner);
    aco__restore(co);
    s->owner = co;
    s->align_validsz = co->save_stack.valid_sz;
}

void aco__resume_misuse(aco_t* co) {
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

/* The API functions behind the macros of aco.h. */
void (aco_resume)(aco_t* co) {
    aco__resume_inline(co);
}

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
    co->save_stack.valid_sz = 0;
    acosw(co, co->main_co);
    aco__fatal("aco_exit", "co %p was resumed after its end", (void*)co);
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
    aco_share_stack_t* s = co->share_stack;
    if (s->owner == co) {
        s->owner = NULL;
        s->align_validsz = 0;
    }
    s->co_ct--;
    free(co->save_stack.ptr);
    aco__co_free(co);
}
