/*
 * aco_tools.c - part of aco.c, which includes it: the bodies of the core's
 * six hooks (aco.c, section 4), and what valgrind, ASan and TSan need at
 * each.  Each hook does the tools' part, then checked mode's
 * (aco_checked.c); builds without a tool compile the tools' parts to
 * nothing.
 *
 * Copyright 2026 the libaco authors.  Apache License 2.0 (see LICENSE).
 *
 * valgrind (ACO_USE_VALGRIND): share stacks are registered as stacks; pool
 * slots are announced as heap blocks; a region about to receive restored
 * frames is made addressable first (another co may have run deeper there
 * and returned, leaving it inaccessible), with the red zone below it.
 *
 * ASan and TSan: every switch goes through aco__switch (aco.h's aco__sw),
 * which announces it: ASan learns the stack the next co runs on and keeps
 * one fake stack per co (detect_stack_use_after_return=1), TSan switches
 * fibers.  A co's frames on a share stack carry ASan state that the bytes
 * alone do not: the shadow that marks the red zones around its arrays.  So
 * a save moves that shadow along with the bytes, into the save buffer
 * right after them, and leaves the vacated region unpoisoned for the next
 * co; the restore puts it back.  The shadow is read and written directly
 * (its mapping from the public __asan_get_shadow_mapping), one byte per
 * 8-byte granule: exact, red-zone kinds included, an eighth of the copy's
 * cost.  The copies themselves run uninstrumented and never call memcpy
 * (ASan checks every memcpy): the bytes they move include red zones.
 *
 * Invariant: share-stack bytes outside its owner's live frames (everything
 * below the owner's stack pointer; the whole stack when it has no owner)
 * are unpoisoned.  Frames that return unpoison themselves; a co evicted,
 * ended, reset or destroyed has its region unpoisoned here.
 *
 * The tools' state of a co (tool_co) and of a share stack (tool_stack) is
 * the first of the bytes the core keeps after each for the hooks; checked
 * mode's follows.  aco_share_stack_t's valgrind_stk_id holds valgrind's id
 * of the stack, as upstream's does.
 */
#ifndef ACO_CORE_PARTS
typedef int aco_tools_is_part_of_aco_c;     /* compiled alone: nothing */
#else

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

#if aco__asan
typedef struct {
    uintptr_t asan_low;     /* the lowest sp a co left the stack at: its
                               destroy clears the shadow from there up */
} tool_stack;

static inline tool_stack* tool_stk(aco_share_stack_t* s) {
    return (tool_stack*)(void*)(s + 1);
}
#define TOOL_STACK_BYTES sizeof(tool_stack)
#else
#define TOOL_STACK_BYTES 0
#endif

/* Word by word, uninstrumented, never memcpy. */
typedef uintptr_t word __attribute__((aligned(1), may_alias));

static NOSAN void tool_copy(void* dst, const void* src, size_t n) {
#if aco__san_switch
    char* d = dst;
    const char* s = src;
    for (size_t i = 0; i + sizeof(word) <= n; i += sizeof(word)) {
        __asm__("" : "+r"(i));      /* no memcpy idiom */
        *(word*)(d + i) = *(const word*)(s + i);
    }
    for (size_t i = n & ~(sizeof(word) - 1); i < n; i++)
        ((volatile char*)d)[i] = s[i];      /* a 4-byte tail on 64-bit */
#else
    memcpy(dst, src, n);
#endif
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


/* Bytes below the stack pointer that memcheck treats as addressable: the
 * x86-64 red zone (psABI 3.2.2). */
#if defined(__x86_64__)
#define RED_ZONE 128
#else
#define RED_ZONE 0
#endif

/* ---- the hooks ---------------------------------------------------------- */

/* Once per process, before anything is allocated: what the hooks want of
 * the core (ext), checked mode decided (ACO_CHECKED=1) and started.
 * thread (aco_thread_init): the calling thread's alternate signal stack,
 * once the fault reporter is in. */
static void ext_init(int thread) {
    if (aco_unlikely(!__atomic_load_n(&ext.ready, __ATOMIC_ACQUIRE))) {
        static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
        pthread_mutex_lock(&mu);
        if (!ext.ready) {
            int checked = checked_wanted();
            ext.co_bytes = TOOL_CO_BYTES + (checked ? sizeof(checked_co) : 0);
            ext.stack_bytes = TOOL_STACK_BYTES + (checked ? sizeof(checked_stack) : 0);
            ext.on = TOOLS || checked;
            ext.maps = (char)checked;
            ext.switches = (char)checked;
            ext.heap_saves = aco__asan;
            if (checked) checked_start();
            __atomic_store_n(&ext.ready, 1, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&mu);
    }
    if (thread && __atomic_load_n(&fault_in, __ATOMIC_ACQUIRE)) fault_altstack("aco_thread_init");
}

/* A share stack laid out (EXT_NEW), or about to be freed (EXT_FREE). */
static void ext_stack(aco_share_stack_t* s, int ev) {
    if (ev == EXT_NEW) {
#ifdef ACO_USE_VALGRIND
        s->valgrind_stk_id = VALGRIND_STACK_REGISTER(s->ptr, (char*)s->ptr + s->sz);
#endif
#if aco__asan
        /* LeakSanitizer scans heap blocks and thread stacks, not our
         * mappings: a suspended owner's locals may hold the only pointer
         * to a block. */
        if (s->guard_page_enabled) __lsan_register_root_region(s->ptr, s->sz);
        tool_stk(s)->asan_low = (uintptr_t)s->align_highptr;
#endif
        if (checked_on) checked_stack_new(s);
        return;
    }
    if (checked_on) checked_stack_free(s);
#ifdef ACO_USE_VALGRIND
    VALGRIND_STACK_DEREGISTER(s->valgrind_stk_id);
#endif
#if aco__asan
    /* No stale poison for whatever gets the memory next.  Red zones lie
     * only where frames were: above the lowest sp a co switched away at
     * (frames below it returned, and ASan cleared theirs), with a page to
     * spare.  Not the whole stack: the shadow of a big one that was never
     * touched would be written, and made resident, for nothing. */
    char* lo = (char*)tool_stk(s)->asan_low - 4096;
    if (lo < (char*)s->ptr || lo > (char*)s->ptr + s->sz) lo = s->ptr;
    asan_vacate(lo, (char*)s->ptr + s->sz);
    if (s->guard_page_enabled) __lsan_unregister_root_region(s->ptr, s->sz);
#endif
}

/* A main co made (EXT_MAIN); a non-main co made and counted on its stack
 * (EXT_NEW); a co's registers set to start from its function, at create
 * or reset (EXT_START); its frames dying, at reset or destroy, before it
 * stops owning its stack (EXT_DEAD); destroyed, no longer counted on its
 * stack (EXT_FREE). */
static void ext_co(aco_t* co, int ev) {
    switch (ev) {
    case EXT_MAIN:
#if aco__tsan
        tool_of(co)->tsan_fiber = __tsan_get_current_fiber();
#endif
        break;
    case EXT_NEW:
        if (checked_on) checked_co_new(co);
        break;
    case EXT_START:
#if aco__asan
        PC(co) = (void*)asan_entry;     /* it finishes the switch first */
#endif
        if (checked_on) checked_co_start(co);
        break;
    case EXT_DEAD: {
        /* ASan: the dead frames' red zones are cleared (a fake stack cannot
         * be freed from outside its co: ASan frees one only when its co
         * leaves for good, in aco_exit).  TSan: the co's fiber, which holds
         * them, goes. */
#if aco__asan
        if (co->share_stack->owner == co) asan_vacate(SP(co), co->share_stack->align_highptr);
#endif
#if aco__tsan
        tool_co* t = tool_of(co);
        if (t->tsan_fiber != NULL) __tsan_destroy_fiber(t->tsan_fiber);
        t->tsan_fiber = NULL;
#endif
        break;
    }
    default:    /* EXT_FREE */
        if (checked_on) checked_co_free(co);
        break;
    }
}

/* Tool builds, the pools: a mapping of n bytes made (EXT_ARENA); slot p of
 * n bytes handed out (EXT_GIVE), taken back (EXT_TAKE), its free-list link
 * written (EXT_LINK) or about to be read (EXT_PEEK). */
static void ext_mem(void* p, size_t n, int ev) {
    switch (ev) {
    case EXT_ARENA:     /* LeakSanitizer scans it: co objects point to heap blocks */
#if aco__asan
        __lsan_register_root_region(p, n);
#endif
        break;
#ifdef ACO_USE_VALGRIND
    case EXT_GIVE:
        VALGRIND_MALLOCLIKE_BLOCK(p, n, 0, 0);
        break;
    case EXT_TAKE:
        VALGRIND_FREELIKE_BLOCK(p, 0);
        VALGRIND_MAKE_MEM_UNDEFINED(p, sizeof(void*));
        break;
    case EXT_LINK:
        VALGRIND_MAKE_MEM_NOACCESS(p, sizeof(void*));
        break;
    case EXT_PEEK:
        VALGRIND_MAKE_MEM_DEFINED(p, sizeof(void*));
        break;
#endif
    default:
        break;
    }
    (void)p, (void)n;
}

/* Tool builds: co's n live bytes about to go to its save stack (EXT_SAVE)
 * or back below its stack's top (EXT_RESTORE, n may be 0), with the tools'
 * state of them.  1: copied here (sanitizers: uninstrumented, never
 * memcpy, the bytes hold red zones); 0: the core copies (valgrind, whose
 * annotations come first).  EXT_ROOM (co NULL): the bytes a save stack of
 * capacity n needs beyond n. */
static size_t ext_copy(aco_t* co, size_t n, int ev) {
    if (ev == EXT_ROOM) {
#if aco__asan
        /* A saved range [sp, top) is widened to whole granules, one more at
         * each end: the shadow bytes a save buffer of capacity n needs
         * after it. */
        return (n >> asan_scale()) + 2;
#else
        return 0;
#endif
    }
    aco_save_stack_t* ss = &co->save_stack;
    if (ev == EXT_SAVE) {
        if (!aco__san_switch) return 0;
        tool_copy(ss->ptr, SP(co), n);
#if aco__asan
        asan_shadow_move((uintptr_t)SP(co), (uintptr_t)co->share_stack->align_highptr,
                         (unsigned char*)ss->ptr + SS_CAP(ss), 1);
#endif
        return 1;
    }
    char* dst = (char*)co->share_stack->align_retptr - n;      /* EXT_RESTORE */
#ifdef ACO_USE_VALGRIND
    /* Make co's region and its red zone addressable; the copy then carries
     * the saved definedness (memcheck checks a call's push against the red
     * zone's state). */
    char* low = dst - RED_ZONE;
    if (low < (char*)co->share_stack->ptr) low = co->share_stack->ptr;
    VALGRIND_MAKE_MEM_UNDEFINED(low, (size_t)(dst - low) + n);
#endif
    /* (ASan: a co that never ran, n == 0, finds the region clean) */
    if (!aco__san_switch || n == 0) return 0;
    tool_copy(dst, ss->ptr, n);
#if aco__asan
    asan_shadow_move((uintptr_t)dst, (uintptr_t)co->share_stack->align_highptr,
                     (unsigned char*)ss->ptr + SS_CAP(ss), 0);
#endif
    return 1;
}

/* Checked mode: every resume (from NULL) and every hand-off through the
 * hand-off co (from: the co handing off). */
static aco_t* ext_switch(aco_t* from, aco_t* co) {
    return checked_switch(from, co);
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
        tool_stack* ts = tool_stk(came->share_stack);
        if ((uintptr_t)SP(came) < ts->asan_low) ts->asan_low = (uintptr_t)SP(came);
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

#endif /* ACO_CORE_PARTS */
