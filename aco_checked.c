/*
 * aco_checked.c - part of aco.c, which includes it: checked mode (aco.h,
 * "Checked mode"), reached through the hooks of aco.c's section 4.
 *
 * Copyright 2026 the libaco authors.  Apache License 2.0 (see LICENSE).
 *
 * Each non-main co gets a window: a PROT_NONE reservation of its share
 * stack's whole mapping (guard included), at an address of its own.
 * The stack's pages live in exactly one place, `at`: the window of the co
 * that last took the stack, or home (real_ptr, the library's own view, no
 * co runs there) before any did and after that co is destroyed.  Taking
 * the stack moves the pages (mremap: page tables, not bytes) into the
 * taker's window; the copies then run as in aco.c's copy engine, the old
 * owner's frames read at their offset in the new window.  A co's stack
 * pointer and every address of its frames are its window's, so a pointer
 * kept from one co is in nobody else's window, and it faults wherever the
 * pages are not, or are closed: a shared stack's pages are closed while
 * its owner is suspended.
 *
 * Every resume and hand-off takes ext_switch (aco.c's fast path wants
 * aco__state_on, which no co has here), which opens the window before the
 * switch and closes it after the switch returns, when the co yielded or
 * ended: the inlined aco_yield of the program needs no change.
 *
 * A fault in a window is reported (checked_report, called by
 * aco_fault.c's handler) from a registry of windows that the handler scans
 * without a lock (entries are published whole).  The record of a co
 * (checked_co) and of a share stack (checked_stack) are the last of the
 * bytes the core keeps after each for the hooks (ext.co_bytes,
 * ext.stack_bytes).
 *
 * Why windows, not poisoning the vacated range for ASan: a stale pointer
 * lands in the new owner's frames, which are valid for it, so no state of
 * the bytes can tell the two apart; only an address of its own per co
 * can.  And it needs no ASan build, and stops the kernel too (EFAULT).
 * Costs, in this mode only: per co a window of address space and one or
 * two of the kernel's mappings; per round trip of a co on a shared stack
 * two mprotects, and an mremap more when the stack changes hands (system
 * calls: microseconds, and other CPUs interrupted when threads run); a co
 * alone on its stack nothing after its first resume.  Not caught: what
 * aco.h lists (an access while the owner runs, the kernel's own accesses,
 * which fail instead, a pointer kept past aco_destroy, a co alone).
 */
#ifndef ACO_CORE_PARTS
typedef int aco_checked_is_part_of_aco_c;   /* compiled alone: nothing */
#else

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
    return (checked_stack*)(void*)((char*)(s + 1) + ext.stack_bytes - sizeof(checked_stack));
}

static inline checked_co* cco(const aco_t* co) {
    return (checked_co*)(void*)((char*)(co + 1) + ext.co_bytes - sizeof(checked_co));
}

/* The mode, decided once per process (ext_init, checked_wanted). */
static int checked_on;

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

/* A new share stack, laid out at home (ext.maps: a mapping of its own):
 * its pages there, open; where its parts lie in any mapping. */
static void checked_stack_new(aco_share_stack_t* s) {
    checked_stack* cs = cstk(s);
    cs->at = s->real_ptr;
    cs->open = 1;
    cs->gap = (size_t)((char*)s->ptr - (char*)s->real_ptr);
    cs->hi_off = (size_t)((char*)s->align_highptr - (char*)s->real_ptr);
    cs->ret_off = (size_t)((char*)s->align_retptr - (char*)s->real_ptr);
}

/* Before the core unmaps it: its last co took its pages home. */
static void checked_stack_free(aco_share_stack_t* s) {
    check("aco_share_stack_destroy", cstk(s)->at == (char*)s->real_ptr, "checked mode: "
          "share stack %p's pages are not home", (void*)s);
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

/* s gained or lost a co: the pages of its owner, if it is suspended, are
 * open exactly when it is alone on s (aco.h); those of an ended co, or of
 * none (home), stay as they are. */
static void checked_shared(aco_share_stack_t* s) {
    checked_stack* cs = cstk(s);
    aco_t* owner = s->owner;
    if (owner == NULL || cco(owner)->win != cs->at || owner == aco_gtls_co) return;
    pages_prot(s, s->co_ct == 1);
}

static void checked_co_new(aco_t* co) {
    static const char fn[] = "aco_create";
    aco_share_stack_t* s = co->share_stack;
    char* w = mmap(NULL, s->real_sz, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    check(fn, w != MAP_FAILED, "checked mode: out of address space or mappings (mmap of "
          "a co's window of %zu bytes failed: %s; see vm.max_map_count)", s->real_sz,
          strerror(errno));
    cco(co)->win = w;
    cco(co)->slot = reg_add(fn, co, w, s->real_sz);
    checked_shared(s);
}

/* co is destroyed: its pages go home first if they are in its window. */
static void checked_co_free(aco_t* co) {
    aco_share_stack_t* s = co->share_stack;
    checked_co* c = cco(co);
    if (cstk(s)->at == c->win) pages_move(s, s->real_ptr);
    reg_del(c->slot);
    check("aco_destroy", munmap(c->win, s->real_sz) == 0, "munmap failed: %s",
          strerror(errno));
    c->win = NULL;
    checked_shared(s);
}

/* co starts from its function (created or reset): at the top of its
 * window.  (The hand-off co has no window: it runs on its own stack.) */
static void checked_co_start(aco_t* co) {
    if (cco(co)->win != NULL) SP(co) = checked_top(co);
}

/* Before co runs: its stack's pages in its window, open, its frames in
 * place (the owner's saved): the core's take, on windows, with memcpy (the
 * copies are not what this mode is for). */
static void checked_open(aco_t* co) {
    aco_share_stack_t* s = co->share_stack;
    aco_t* owner = s->owner;
    if (owner != co) {
        size_t n = 0;
        if (owner != NULL) {
            n = live_bytes(owner, s);     /* its pages are in its window */
            save_grow("aco_resume", owner, n);
        }
        pages_move(s, cco(co)->win);
        if (owner != NULL) {
            /* The owner's frames, at their offset in co's window now. */
            char* src = (char*)SP(owner) - cco(owner)->win + cco(co)->win;
            aco_save_stack_t* ss = &owner->save_stack;
            if (n > 0) {
                memcpy(ss->ptr, src, n);
                ss->ct_save++;
            }
            ss->valid_sz = (uint32_t)n;
            if (n > ss->max_cpsz) ss->max_cpsz = n;
        }
        size_t m = co->save_stack.valid_sz;
        if (m > 0) {
            memcpy(checked_top(co) - m, co->save_stack.ptr, m);
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

/* ext_switch: the running co switches to co, resumed by its main co or
 * handed off to by the hand-off co, which closes `from` (the co handing
 * off) first.  A resume returns here when co yields or ends, or the last co
 * it handed off to does: that one is closed. */
static aco_t* checked_switch(aco_t* from, aco_t* co) {
    if (from != NULL) checked_close(from);
    checked_open(co);
    aco_t* cur = aco_gtls_co;
    aco_gtls_co = co;
    aco_t* last = aco__sw(cur, co);
    if (aco_is_main_co(cur)) checked_close(last);
    return last;
}

/* ---- the public calls --------------------------------------------------- */

int aco_checked(void) {
    ext_init(0);
    return checked_on;
}

int aco_on_share_stack(const aco_t* co, const void* p, size_t n) {
    if (co == NULL || p == NULL || co->main_co == NULL) return 0;
    const aco_share_stack_t* s = co->share_stack;
    uintptr_t lo = (uintptr_t)s->ptr, a = (uintptr_t)p;
    if (checked_on) lo = (uintptr_t)window_lo(co);
    if (n == 0) n = 1;
    /* [a, a + n) meets [lo, lo + sz): a + n itself may wrap past the top */
    return a < lo + s->sz && (a >= lo || n > lo - a);
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
    if (!checked_on || p == NULL) return;
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

/* "the address lies in its frame [lo, hi) of:" and the call at pc. */
static void frame_line(line_buf* l, uintptr_t lo, uintptr_t hi, uintptr_t pc) {
    lb_str(l, "aco: checked:   the address lies in its frame [");
    lb_hex(l, lo);
    lb_str(l, ", ");
    lb_hex(l, hi);
    lb_str(l, ") of:\n");
    describe_pc(l, "    ", pc - 1);
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
        frame_line(l, lo, hi, pc);
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
    frame_line(l, lo, hi, pc);
}

/* aco_fault.c's handler asks here about a fault that is not an overflow of
 * the running co: 0 when it is in no window.  Else the report, and the
 * process dies of the fault: 1. */
static int checked_report(siginfo_t* si, void* ctx) {
    uintptr_t a = (uintptr_t)si->si_addr;
    aco_t* owner = reg_find(a);
    if (owner == NULL) return 0;
    aco_t* cur = aco_gtls_co;
    aco_share_stack_t* s = owner->share_stack;
    line_buf l;
    l.n = 0;
    uintptr_t lo = (uintptr_t)window_lo(owner);
    if (a < lo) {           /* the guard of a window: a pointer far below a frame */
        signal(SIGSEGV, SIG_DFL);
        return 1;
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
    signal(SIGSEGV, SIG_DFL);
    if (hand) raise(SIGSEGV);
    return 1;
}

/* ACO_CHECKED=1, read once per process by ext_init. */
static int checked_wanted(void) {
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
    return on;
}

/* The mode on: its report in, before any co can run. */
static void checked_start(void) {
    checked_on = 1;
    fault_checked = checked_report;
    fault_install("aco_thread_init");
}

#endif /* ACO_CORE_PARTS */
