/* pthread.c - pthreads' shapes over cos (aco_rt_pthread.h).
 *
 * Threads.  aco_rt_pthread_create spawns pt_main with a small heap record
 * (pt_t: the start routine, its argument, the value for the joiner); an id
 * is the co's handle, so aco_rt_pthread_self() in the co is the id its
 * creator got.  The co's argument is its pt_t: that is how
 * aco_rt_pthread_exit finds where the joiner's value goes (no key of the
 * program's ACO_RT_KEYS_MAX is taken).  When the routine returns or exits,
 * pt_end stores the value and, if the co was detached, frees the pt_t;
 * otherwise join does, after aco_rt_join.  Detach and the end race only
 * across threads: an atomic state word decides which of the two frees it.
 *
 * Mutexes and conds are aco_rt_mutex_t / aco_rt_cond_t plus the pthreads
 * extras: a type, the holder (for RECURSIVE and cond waits) and a count.
 * Once, rwlock and barrier are a mutex and conds of the runtime, so they
 * are as thread-safe as those are.
 *
 * Refused objects.  An init call that refuses its object (on a share
 * stack, or a bad attribute or count) marks it, so that a program that
 * never checks init cannot run on unprotected: a mark word in a field no
 * working object holds that value in, and the init's caller.  The object
 * lies in the caller's own frames or memory, so writing it is safe.
 * Every later call on it checks the mark first and fails with EINVAL; the
 * first one to see it says so on stderr.
 *
 * Deadlines.  An abstime on CLOCK_REALTIME becomes a deadline on
 * CLOCK_MONOTONIC when the call starts: the wall clock is read first, then
 * the monotonic one, so the deadline is never early by the time between
 * the two reads.
 */
#define _GNU_SOURCE
#include "aco_rt_pthread.h"
#include "rt_impl.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

_Static_assert(CLOCK_REALTIME == 0, "a zeroed cond is on CLOCK_REALTIME");
_Static_assert(sizeof(unsigned long) >= sizeof(void*), "an id holds a co's address");

#define NS 1000000000LL

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */
/* ------------------------------------------------------------------------ */

/* abstime on clk as a deadline for the runtime (>= 0: a passed one is 0, a
 * far one INT64_MAX), or -EINVAL. */
static int64_t deadline_of(clockid_t clk, const struct timespec* abs) {
    if (clk != CLOCK_REALTIME && clk != CLOCK_MONOTONIC) return -EINVAL;
    if (abs == NULL || abs->tv_nsec < 0 || abs->tv_nsec >= NS) return -EINVAL;
    int64_t off = 0;                    /* CLOCK_MONOTONIC minus clk */
    if (clk == CLOCK_REALTIME) {
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        off = rt_now() - ((int64_t)now.tv_sec * NS + now.tv_nsec);
    }
    if (abs->tv_sec < 0) return 0;
    int64_t a, d;
    if (__builtin_mul_overflow((int64_t)abs->tv_sec, NS, &a) ||
        __builtin_add_overflow(a, (int64_t)abs->tv_nsec, &a) ||
        __builtin_add_overflow(a, off, &d))
        return INT64_MAX;
    return d < 0 ? 0 : d;
}

/* Would p lie on the share stack of the calling co? */
static int on_share_stack(const void* p, size_t n) {
    aco_rt_co_t* co = rt_self();
    return co != NULL && rt_on_share_stack(co, p, n, 1);
}

/* The mark of a refused object: REFUSED, plus R_SAID once reported, plus
 * R_ARGS when the reason was the arguments, not the share stack.  (A
 * positive int: it fits every field that holds it.) */
#define REFUSED 0x7e5ef050
#define R_SAID  1
#define R_ARGS  2
static inline int marked(unsigned v) { return (v & ~3u) == REFUSED; }

static void mark(void* field, int args) {
    __atomic_store_n((int*)field, REFUSED | (args ? R_ARGS : 0), __ATOMIC_RELAXED);
}

#define SITE() __builtin_return_address(0)

/* EINVAL for a call on a refused object (what: "mutex", ...; mark_at: its
 * mark word, site: where init was called), said on stderr the first time:
 * the site as file+offset, as addr2line -e file takes it. */
static int refused(const char* fn, const char* what, const void* obj, int* mark_at,
                   const void* site) {
    int v = __atomic_load_n(mark_at, __ATOMIC_RELAXED);
    while (marked((unsigned)v) && !(v & R_SAID)) {
        if (!__atomic_compare_exchange_n(mark_at, &v, v | R_SAID, 0, __ATOMIC_RELAXED,
                                         __ATOMIC_RELAXED))
            continue;
        char where[512] = "";
        Dl_info di;
        if (dladdr(site, &di) && di.dli_fname && di.dli_fname[0])
            snprintf(where, sizeof(where), " (%s+%#lx%s%s)", di.dli_fname,
                     (unsigned long)((uintptr_t)site - (uintptr_t)di.dli_fbase),
                     di.dli_sname ? ", in " : "", di.dli_sname ? di.dli_sname : "");
        fprintf(stderr,
                "%s: the %s at %p was refused by aco_rt_pthread_%s_init, called from %p%s: "
                "%s; every call on it fails with EINVAL\n",
                fn, what, obj, what, site, where,
                v & R_ARGS ? "bad attributes or count"
                           : "it lies on a co's share stack (aco_rt_pthread.h)");
        break;
    }
    return EINVAL;
}

/* Take m even if the caller was cancelled (aco_rt_mutex_lock refuses then):
 * for the calls that must not fail on a cancel, unlocks and tries.  The
 * sections these internal mutexes guard never block, so the wait is short;
 * the cancel is put back after. */
static void lock_anyway(aco_rt_co_t* me, aco_rt_mutex_t* m) {
    if (aco_rt_mutex_trylock(m) == 0) return;
    uint8_t was = me->flags & RT_CANCELLED;
    for (;;) {
        me->flags &= (uint8_t)~RT_CANCELLED;
        if (aco_rt_mutex_lock(m, -1) == 0) break;
        was = RT_CANCELLED;             /* cancelled while it waited */
    }
    me->flags |= was;
}

/* ------------------------------------------------------------------------ */
/* Attributes                                                               */
/* ------------------------------------------------------------------------ */

int aco_rt_pthread_attr_init(aco_rt_pthread_attr_t* a) {
    if (a == NULL) return EINVAL;
    memset(a, 0, sizeof(*a));
    return 0;
}

int aco_rt_pthread_attr_destroy(aco_rt_pthread_attr_t* a) {
    return a ? 0 : EINVAL;
}

int aco_rt_pthread_attr_setstacksize(aco_rt_pthread_attr_t* a, size_t n) {
    if (a == NULL) return EINVAL;
    if (n < ACO_RT_PTHREAD_STACK_MIN) return EINVAL;
    a->stacksize_ = n;
    return 0;
}

int aco_rt_pthread_attr_getstacksize(const aco_rt_pthread_attr_t* a, size_t* n) {
    if (a == NULL || n == NULL) return EINVAL;
    aco_rt_sched_t* s = rt_tls_sched;
    *n = a->stacksize_ ? a->stacksize_ : s ? s->recs.stack_size : 256 * 1024;
    return 0;
}

int aco_rt_pthread_attr_setdetachstate(aco_rt_pthread_attr_t* a, int st) {
    if (a == NULL) return EINVAL;
    if (st != ACO_RT_PTHREAD_CREATE_JOINABLE && st != ACO_RT_PTHREAD_CREATE_DETACHED)
        return EINVAL;
    a->detachstate_ = st;
    return 0;
}

int aco_rt_pthread_attr_getdetachstate(const aco_rt_pthread_attr_t* a, int* st) {
    if (a == NULL || st == NULL) return EINVAL;
    *st = a->detachstate_;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Threads                                                                  */
/* ------------------------------------------------------------------------ */

typedef struct {
    void* (*fn)(void*);
    void*    arg;
    void*    ret;               /* for the joiner */
    uint32_t state;             /* PT_ENDED | PT_DETACHED (atomic) */
} pt_t;
enum { PT_ENDED = 1, PT_DETACHED = 2 };

static pthread_once_t pt_hook_once = PTHREAD_ONCE_INIT;
static void pt_dropped(aco_rt_co_t* co);
static void pt_hook(void) {
    __atomic_store_n(&rt_co_dropped, pt_dropped, __ATOMIC_RELEASE);
}

/* The co's argument: its pt_t, tagged PT_OVER once its routine is over
 * (then a detach on another thread may free it: an exit from a key
 * destructor must not look at it), NULL once freed by the end. */
#define PT_OVER ((uintptr_t)1)

/* p's routine is over with ret: for the joiner, or p goes if detached. */
static void pt_end(pt_t* p, void* ret) {
    aco_t* a = rt_aco(rt_self());
    __atomic_store_n(&a->arg, (void*)((uintptr_t)p | PT_OVER), __ATOMIC_RELAXED);
    p->ret = ret;
    if (__atomic_fetch_or(&p->state, PT_ENDED, __ATOMIC_ACQ_REL) & PT_DETACHED) {
        /* (its key destructors may still block) */
        __atomic_store_n(&a->arg, NULL, __ATOMIC_RELAXED);
        free(p);
    }
}

static void pt_main(void* arg);

/* aco_rt_sched_free destroys co: its pt_t goes, unless its end freed it
 * (detached) - nobody can join it any more. */
static void pt_dropped(aco_rt_co_t* co) {
    if (co->fn != pt_main) return;
    /* (a local spawn: made at once) */
    pt_t* p = (pt_t*)((uintptr_t)__atomic_load_n(&rt_aco(co)->arg, __ATOMIC_RELAXED) & ~PT_OVER);
    if (p == NULL) return;
    uint32_t st = __atomic_load_n(&p->state, __ATOMIC_ACQUIRE);
    if ((st & (PT_ENDED | PT_DETACHED)) != (PT_ENDED | PT_DETACHED)) free(p);
}

static void pt_main(void* arg) {
    pt_t* p = (pt_t*)arg;
    pt_end(p, p->fn(p->arg));
}

int aco_rt_pthread_create(aco_rt_pthread_t* t, const aco_rt_pthread_attr_t* attr,
                          void* (*fn)(void*), void* arg) {
    if (t == NULL || fn == NULL) return EINVAL;
    if (attr && ((attr->stacksize_ && attr->stacksize_ < ACO_RT_PTHREAD_STACK_MIN) ||
                 (attr->detachstate_ != ACO_RT_PTHREAD_CREATE_JOINABLE &&
                  attr->detachstate_ != ACO_RT_PTHREAD_CREATE_DETACHED)))
        return EINVAL;
    aco_rt_sched_t* s = rt_tls_sched;
    if (s == NULL) return EPERM;
    pthread_once(&pt_hook_once, pt_hook);
    pt_t* p = calloc(1, sizeof(*p));
    if (p == NULL) return EAGAIN;
    p->fn = fn;
    p->arg = arg;
    aco_rt_spawn_opts_t o = {.stack_size = attr ? attr->stacksize_ : 0};
    aco_rt_co_t* co = aco_rt_spawn2(s, pt_main, p, &o);
    if (co == NULL) {
        int e = errno;
        free(p);
        return e == EPERM ? EPERM : EAGAIN;
    }
    if (attr && attr->detachstate_ == ACO_RT_PTHREAD_CREATE_DETACHED) {
        p->state = PT_DETACHED;         /* it has not run yet */
        aco_rt_detach(co);
    }
    *t = (aco_rt_pthread_t)(uintptr_t)co;
    return 0;
}

/* The pt_t of id t and its co, NULL if t is no co of ours. */
static pt_t* pt_of(aco_rt_pthread_t t, aco_rt_co_t** co) {
    if (t == 0 || (t & 1)) return NULL;         /* a thread's id */
    aco_rt_co_t* c = (aco_rt_co_t*)(uintptr_t)t;
    if (c->fn != pt_main) return NULL;          /* a co of aco_rt_spawn */
    *co = c;
    /* (made at once: a local spawn; the tag is only for its own exit) */
    return (pt_t*)((uintptr_t)__atomic_load_n(&rt_aco(c)->arg, __ATOMIC_RELAXED) & ~PT_OVER);
}

/* Join t until deadline; busy: the error for a deadline that passed. */
static int join_until(aco_rt_pthread_t t, void** ret, int64_t deadline, int busy) {
    aco_rt_co_t* me = rt_self();
    if (me == NULL) return EPERM;
    if (t == (aco_rt_pthread_t)(uintptr_t)me) return EDEADLK;
    aco_rt_co_t* co;
    pt_t* p = pt_of(t, &co);
    if (p == NULL) return ESRCH;
    if (__atomic_load_n(&p->state, __ATOMIC_ACQUIRE) & PT_DETACHED) return EINVAL;
    int r = aco_rt_join(co, deadline);
    if (r == -ETIMEDOUT) return busy;
    /* (tryjoin: one that has not ended is EBUSY first, as glibc's, also
     * when another co joins it) */
    if (r == -EINVAL && busy == EBUSY &&
        !(__atomic_load_n(&p->state, __ATOMIC_ACQUIRE) & (PT_ENDED | PT_DETACHED)))
        return EBUSY;
    if (r) return -r;
    if (ret) *ret = p->ret;
    free(p);
    return 0;
}

int aco_rt_pthread_join(aco_rt_pthread_t t, void** ret) {
    return join_until(t, ret, -1, 0);
}

int aco_rt_pthread_tryjoin_np(aco_rt_pthread_t t, void** ret) {
    return join_until(t, ret, 0, EBUSY);
}

/* (glibc 2.36 looks at abstime only to wait: a thread that has ended is
 * joined whatever abstime says, so here too; one still running with a
 * bad abstime is EINVAL, where glibc's own spins until it ends.  A NULL
 * abstime is no limit there, as here.) */
int aco_rt_pthread_timedjoin_np(aco_rt_pthread_t t, void** ret, const struct timespec* abstime) {
    if (abstime == NULL) return join_until(t, ret, -1, 0);
    int64_t d = deadline_of(CLOCK_REALTIME, abstime);
    if (d < 0) return join_until(t, ret, 0, EINVAL);
    return join_until(t, ret, d, ETIMEDOUT);
}

int aco_rt_pthread_detach(aco_rt_pthread_t t) {
    aco_rt_co_t* co;
    pt_t* p = pt_of(t, &co);
    if (p == NULL) return ESRCH;
    int r = aco_rt_detach(co);
    if (r) return -r;
    if (__atomic_fetch_or(&p->state, PT_DETACHED, __ATOMIC_ACQ_REL) & PT_ENDED) free(p);
    return 0;
}

static RT_TLS int thread_id;  /* outside cos, a thread's id is its address */

aco_rt_pthread_t aco_rt_pthread_self(void) {
    aco_rt_co_t* co = rt_self();
    /* odd: never a co's record (malloc's alignment) */
    return co ? (aco_rt_pthread_t)(uintptr_t)co : (aco_rt_pthread_t)(uintptr_t)&thread_id | 1;
}

int aco_rt_pthread_equal(aco_rt_pthread_t a, aco_rt_pthread_t b) { return a == b; }

void aco_rt_pthread_exit(void* ret) {
    if (rt_self() == NULL) {
        fprintf(stderr, "aco_rt_pthread_exit: called outside a co (a thread that "
                "runs a scheduler is not a co of it)\n");
        abort();
    }
    /* Its routine's pt_t, unless it is a co of aco_rt_spawn, or its
     * routine is over (an exit from a key destructor). */
    aco_rt_co_t* me = rt_self();
    uintptr_t a = (uintptr_t)rt_aco(me)->arg;
    if (me->fn == pt_main && a != 0 && !(a & PT_OVER)) pt_end((pt_t*)a, ret);
    aco_rt_exit();
}

int aco_rt_pthread_yield(void) {
    if (rt_self() == NULL) return sched_yield() ? errno : 0;
    aco_rt_yield();
    return 0;
}

typedef struct {
    int (*fn)(int, char**);
    int    argc;
    char** argv;
    int    rc;
    aco_rt_sched_t* s;
} run_main_t;

static void* main_co(void* arg) {
    run_main_t* m = (run_main_t*)arg;
    m->rc = m->fn(m->argc, m->argv);
    aco_rt_sched_stop(m->s);            /* main returned: the program ends */
    return NULL;
}

int aco_rt_pthread_run_main(int (*main_fn)(int, char**), int argc, char** argv) {
    if (main_fn == NULL) {
        fprintf(stderr, "aco_rt_pthread_run_main: main_fn is NULL\n");
        return 1;
    }
    aco_rt_sched_t* s = rt_tls_sched;
    int own = s == NULL;
    if (own && (s = aco_rt_sched_new(NULL)) == NULL) {
        fprintf(stderr, "aco_rt_pthread_run_main: no scheduler: %s\n", strerror(errno));
        return 1;
    }
    run_main_t m = {main_fn, argc, argv, 0, s};
    aco_rt_pthread_attr_t a;
    aco_rt_pthread_attr_init(&a);
    aco_rt_pthread_attr_setdetachstate(&a, ACO_RT_PTHREAD_CREATE_DETACHED);
    /* A stack of its own: programs put what their threads share there. */
    aco_rt_pthread_attr_setstacksize(&a, (size_t)8 << 20);
    if (s->recs.stack_size >= a.stacksize_) a.stacksize_ = s->recs.stack_size + 4096;
    aco_rt_pthread_t t;
    int r = aco_rt_pthread_create(&t, &a, main_co, &m);
    if (r == 0) {
        r = aco_rt_sched_run(s);
        if (r < 0) {
            fprintf(stderr, "aco_rt_pthread_run_main: the scheduler stopped: %s\n",
                    r == -EDEADLK ? "every co waits for another (a deadlock)" : strerror(-r));
            m.rc = 1;
        }
    } else {
        fprintf(stderr, "aco_rt_pthread_run_main: cannot make the main co: %s\n", strerror(r));
        m.rc = 1;
    }
    if (own) aco_rt_sched_free(s);
    return m.rc;
}

/* ------------------------------------------------------------------------ */
/* Mutexes                                                                  */
/* ------------------------------------------------------------------------ */

int aco_rt_pthread_mutexattr_init(aco_rt_pthread_mutexattr_t* a) {
    if (a == NULL) return EINVAL;
    memset(a, 0, sizeof(*a));
    return 0;
}

int aco_rt_pthread_mutexattr_destroy(aco_rt_pthread_mutexattr_t* a) {
    return a ? 0 : EINVAL;
}

int aco_rt_pthread_mutexattr_settype(aco_rt_pthread_mutexattr_t* a, int type) {
    if (a == NULL) return EINVAL;
    if (type != ACO_RT_PTHREAD_MUTEX_NORMAL && type != ACO_RT_PTHREAD_MUTEX_RECURSIVE &&
        type != ACO_RT_PTHREAD_MUTEX_ERRORCHECK)
        return EINVAL;
    a->type_ = type;
    return 0;
}

int aco_rt_pthread_mutexattr_gettype(const aco_rt_pthread_mutexattr_t* a, int* type) {
    if (a == NULL || type == NULL) return EINVAL;
    *type = a->type_;
    return 0;
}

static int set_pshared(int* field, int ps) {
    if (ps == ACO_RT_PTHREAD_PROCESS_SHARED) return ENOTSUP;
    if (ps != ACO_RT_PTHREAD_PROCESS_PRIVATE) return EINVAL;
    *field = ps;
    return 0;
}

int aco_rt_pthread_mutexattr_setpshared(aco_rt_pthread_mutexattr_t* a, int ps) {
    if (a == NULL) return EINVAL;
    return set_pshared(&a->pshared_, ps);
}

int aco_rt_pthread_mutexattr_getpshared(const aco_rt_pthread_mutexattr_t* a, int* ps) {
    if (a == NULL || ps == NULL) return EINVAL;
    *ps = a->pshared_;
    return 0;
}

static inline void* holder(const aco_rt_pthread_mutex_t* m) {
    return __atomic_load_n(&m->owner_, __ATOMIC_RELAXED);
}
static inline void set_holder(aco_rt_pthread_mutex_t* m, void* co) {
    __atomic_store_n(&m->owner_, co, __ATOMIC_RELAXED);
}
static inline int type_ok(int type) { return type >= 0 && type <= 2; }
/* An attribute's pshared: only what setpshared takes (PRIVATE). */
static inline int pshared_ok(int ps) { return ps == ACO_RT_PTHREAD_PROCESS_PRIVATE; }

static int mutex_bad(aco_rt_pthread_mutex_t* m, const char* fn) {
    return refused(fn, "mutex", m, &m->type_, holder(m));
}

int aco_rt_pthread_mutex_init(aco_rt_pthread_mutex_t* m, const aco_rt_pthread_mutexattr_t* attr) {
    if (m == NULL) return EINVAL;
    int type = attr ? attr->type_ : ACO_RT_PTHREAD_MUTEX_NORMAL;
    int bad = !type_ok(type) || (attr && !pshared_ok(attr->pshared_));
    if (bad || on_share_stack(m, sizeof(*m))) {
        mark(&m->type_, bad);
        set_holder(m, SITE());
        return EINVAL;
    }
    memset(m, 0, sizeof(*m));
    m->type_ = type;
    return 0;
}

/* EBUSY if a co waits on queue q (lock l), else 0 once none is left on
 * it: a co whose deadline or cancel came first claimed itself and is
 * taking itself off (rt_abort_shared), which is waited for, as glibc's
 * destroy waits for the waiters that are leaving, so that the memory can
 * be freed at once.  (Such a co is another thread's: on this thread its
 * abort runs whole between two of our calls.) */
static int queue_busy(uint32_t* l, aco_rt_waitq_t* q) {
    for (;;) {
        int waiting = 0, leaving = 0;
        rt_lock(l);
        for (rt_waiter_t* w = rt_wq_first(q); w; w = w->next) {
            if (__atomic_load_n(&w->co->claim, __ATOMIC_RELAXED)) leaving = 1;
            else waiting = 1;
        }
        rt_unlock(l);
        if (waiting) return EBUSY;
        if (!leaving) return 0;
        sched_yield();
    }
}

int aco_rt_pthread_mutex_destroy(aco_rt_pthread_mutex_t* m) {
    if (m == NULL) return EINVAL;
    if (!type_ok(m->type_)) return mutex_bad(m, "aco_rt_pthread_mutex_destroy");
    /* held or handed to a waiter: the runtime's owner is set */
    if (__atomic_load_n(&m->m_.owner_, __ATOMIC_RELAXED) != 0 ||
        queue_busy(&m->m_.lock_, &m->m_.q_))
        return EBUSY;
    m->type_ = -1;
    return 0;
}

static int lock_until(aco_rt_pthread_mutex_t* m, int64_t deadline, const char* fn) {
    if (m == NULL) return EINVAL;
    if (rt_unlikely(marked((unsigned)m->type_))) return mutex_bad(m, fn);   /* (anywhere) */
    aco_rt_co_t* me = rt_self();
    if (me == NULL) return EPERM;
    if (!type_ok(m->type_)) return EINVAL;          /* destroyed */
    if (m->type_ == ACO_RT_PTHREAD_MUTEX_RECURSIVE && holder(m) == me) {
        /* (as the runtime's lock would: a cancelled co cannot go on
         * locking, held or not) */
        if (rt_co_cancelled(me)) return ECANCELED;
        if (m->count_ == UINT_MAX) return EAGAIN;
        m->count_++;
        return 0;
    }
    int r = aco_rt_mutex_lock(&m->m_, deadline);
    if (r) return -r;
    set_holder(m, me);
    m->count_ = 1;
    return 0;
}

int aco_rt_pthread_mutex_lock(aco_rt_pthread_mutex_t* m) {
    return lock_until(m, -1, "aco_rt_pthread_mutex_lock");
}

int aco_rt_pthread_mutex_clocklock(aco_rt_pthread_mutex_t* m, clockid_t clk,
                                   const struct timespec* abstime) {
    if (clk != CLOCK_REALTIME && clk != CLOCK_MONOTONIC) return EINVAL;
    int64_t d = deadline_of(clk, abstime);
    /* a bad abstime matters only when it has to wait (POSIX) */
    int r = lock_until(m, d < 0 ? 0 : d, "aco_rt_pthread_mutex_clocklock");
    return d < 0 && r == ETIMEDOUT ? EINVAL : r;
}

int aco_rt_pthread_mutex_timedlock(aco_rt_pthread_mutex_t* m, const struct timespec* abstime) {
    return aco_rt_pthread_mutex_clocklock(m, CLOCK_REALTIME, abstime);
}

int aco_rt_pthread_mutex_trylock(aco_rt_pthread_mutex_t* m) {
    if (m == NULL) return EINVAL;
    if (rt_unlikely(marked((unsigned)m->type_)))
        return mutex_bad(m, "aco_rt_pthread_mutex_trylock");
    aco_rt_co_t* me = rt_self();
    if (me == NULL) return EPERM;
    if (!type_ok(m->type_)) return EINVAL;          /* destroyed */
    if (m->type_ == ACO_RT_PTHREAD_MUTEX_RECURSIVE && holder(m) == me) {
        if (m->count_ == UINT_MAX) return EAGAIN;
        m->count_++;
        return 0;
    }
    if (aco_rt_mutex_trylock(&m->m_) != 0) return EBUSY;
    set_holder(m, me);
    m->count_ = 1;
    return 0;
}

int aco_rt_pthread_mutex_unlock(aco_rt_pthread_mutex_t* m) {
    if (m == NULL) return EINVAL;
    aco_rt_co_t* me = rt_self();
    if (rt_unlikely(marked((unsigned)m->type_)))
        return mutex_bad(m, "aco_rt_pthread_mutex_unlock");
    if (me == NULL || holder(m) != me) return EPERM;
    if (--m->count_ > 0) return 0;      /* RECURSIVE, still held */
    set_holder(m, NULL);
    return -aco_rt_mutex_unlock(&m->m_);
}

/* ------------------------------------------------------------------------ */
/* Condition variables                                                      */
/* ------------------------------------------------------------------------ */

static inline int clock_ok(clockid_t c) { return c == CLOCK_REALTIME || c == CLOCK_MONOTONIC; }

int aco_rt_pthread_condattr_init(aco_rt_pthread_condattr_t* a) {
    if (a == NULL) return EINVAL;
    memset(a, 0, sizeof(*a));
    a->clock_ = CLOCK_REALTIME;
    return 0;
}

int aco_rt_pthread_condattr_destroy(aco_rt_pthread_condattr_t* a) {
    return a ? 0 : EINVAL;
}

int aco_rt_pthread_condattr_setclock(aco_rt_pthread_condattr_t* a, clockid_t clk) {
    if (a == NULL) return EINVAL;
    if (!clock_ok(clk)) return EINVAL;
    a->clock_ = clk;
    return 0;
}

int aco_rt_pthread_condattr_getclock(const aco_rt_pthread_condattr_t* a, clockid_t* clk) {
    if (a == NULL || clk == NULL) return EINVAL;
    *clk = a->clock_;
    return 0;
}

int aco_rt_pthread_condattr_setpshared(aco_rt_pthread_condattr_t* a, int ps) {
    if (a == NULL) return EINVAL;
    return set_pshared(&a->pshared_, ps);
}

int aco_rt_pthread_condattr_getpshared(const aco_rt_pthread_condattr_t* a, int* ps) {
    if (a == NULL || ps == NULL) return EINVAL;
    *ps = a->pshared_;
    return 0;
}

/* (A refused cond's mark is its clock, its init's caller its queue's head.) */
static inline int cond_refused(const aco_rt_pthread_cond_t* c) {
    return rt_unlikely(marked((unsigned)c->clock_));
}

static int cond_bad(aco_rt_pthread_cond_t* c, const char* fn) {
    return refused(fn, "cond", c, (int*)&c->clock_, c->c_.q_.head_);
}

int aco_rt_pthread_cond_init(aco_rt_pthread_cond_t* c, const aco_rt_pthread_condattr_t* attr) {
    if (c == NULL) return EINVAL;
    clockid_t clk = attr ? attr->clock_ : CLOCK_REALTIME;
    int bad = !clock_ok(clk) || (attr && !pshared_ok(attr->pshared_));
    if (bad || on_share_stack(c, sizeof(*c))) {
        mark(&c->clock_, bad);
        c->c_.q_.head_ = SITE();
        return EINVAL;
    }
    memset(c, 0, sizeof(*c));
    c->clock_ = clk;
    return 0;
}

int aco_rt_pthread_cond_destroy(aco_rt_pthread_cond_t* c) {
    if (c == NULL) return EINVAL;
    if (cond_refused(c)) return cond_bad(c, "aco_rt_pthread_cond_destroy");
    return queue_busy(&c->c_.lock_, &c->c_.q_);
}

/* timed: until abstime on clk (EINVAL for a bad one), else no deadline. */
static int wait_until(aco_rt_pthread_cond_t* c, aco_rt_pthread_mutex_t* m, int timed,
                      clockid_t clk, const struct timespec* abstime, const char* fn) {
    if (c == NULL || m == NULL) return EINVAL;
    if (cond_refused(c)) return cond_bad(c, fn);
    if (rt_unlikely(marked((unsigned)m->type_))) return mutex_bad(m, fn);
    int64_t deadline = timed ? deadline_of(clk, abstime) : -1;
    if (timed && deadline < 0) return EINVAL;
    aco_rt_co_t* me = rt_self();
    if (me == NULL || holder(m) != me) return EPERM;
    /* let go of it fully (RECURSIVE: however often held), take it back so */
    unsigned n = m->count_;
    m->count_ = 0;
    set_holder(m, NULL);
    int r = aco_rt_cond_wait(&c->c_, &m->m_, deadline);
    set_holder(m, me);                  /* held again, whatever r says */
    m->count_ = n;
    return -r;
}

int aco_rt_pthread_cond_wait(aco_rt_pthread_cond_t* c, aco_rt_pthread_mutex_t* m) {
    return wait_until(c, m, 0, CLOCK_REALTIME, NULL, "aco_rt_pthread_cond_wait");
}

int aco_rt_pthread_cond_clockwait(aco_rt_pthread_cond_t* c, aco_rt_pthread_mutex_t* m,
                                  clockid_t clk, const struct timespec* abstime) {
    return wait_until(c, m, 1, clk, abstime, "aco_rt_pthread_cond_clockwait");
}

int aco_rt_pthread_cond_timedwait(aco_rt_pthread_cond_t* c, aco_rt_pthread_mutex_t* m,
                                  const struct timespec* abstime) {
    if (c == NULL || m == NULL) return EINVAL;
    return wait_until(c, m, 1, c->clock_, abstime, "aco_rt_pthread_cond_timedwait");
}

int aco_rt_pthread_cond_signal(aco_rt_pthread_cond_t* c) {
    if (c == NULL) return EINVAL;
    if (cond_refused(c)) return cond_bad(c, "aco_rt_pthread_cond_signal");
    aco_rt_cond_signal(&c->c_);
    return 0;
}

int aco_rt_pthread_cond_broadcast(aco_rt_pthread_cond_t* c) {
    if (c == NULL) return EINVAL;
    if (cond_refused(c)) return cond_bad(c, "aco_rt_pthread_cond_broadcast");
    aco_rt_cond_broadcast(&c->c_);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Once                                                                     */
/* ------------------------------------------------------------------------ */

int aco_rt_pthread_once(aco_rt_pthread_once_t* o, void (*init)(void)) {
    if (o == NULL || init == NULL) return EINVAL;
    aco_rt_co_t* me = rt_self();
    /* (a cancelled co gets ECANCELED from a call that can block even when
     * this one would not: aco_rt.h) */
    if (me && rt_co_cancelled(me)) return ECANCELED;
    if (__atomic_load_n(&o->done_, __ATOMIC_ACQUIRE)) return 0;
    if (me == NULL) return EPERM;
    /* The first to lock runs init holding the mutex; the others queue on it
     * (FIFO) and find it done. */
    int r = aco_rt_mutex_lock(&o->m_, -1);
    if (r) return -r;
    if (!o->done_) {
        init();
        __atomic_store_n(&o->done_, 1, __ATOMIC_RELEASE);
    }
    aco_rt_mutex_unlock(&o->m_);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Keys                                                                     */
/* ------------------------------------------------------------------------ */

int aco_rt_pthread_key_create(aco_rt_pthread_key_t* key, void (*dtor)(void*)) {
    return -aco_rt_key_create(key, dtor);
}

int aco_rt_pthread_key_delete(aco_rt_pthread_key_t key) { return -aco_rt_key_delete(key); }

void* aco_rt_pthread_getspecific(aco_rt_pthread_key_t key) { return aco_rt_getspecific(key); }

int aco_rt_pthread_setspecific(aco_rt_pthread_key_t key, const void* val) {
    return -aco_rt_setspecific(key, val);
}

/* ------------------------------------------------------------------------ */
/* Read-write locks                                                         */
/* ------------------------------------------------------------------------ */

int aco_rt_pthread_rwlockattr_init(aco_rt_pthread_rwlockattr_t* a) {
    if (a == NULL) return EINVAL;
    memset(a, 0, sizeof(*a));
    return 0;
}

int aco_rt_pthread_rwlockattr_destroy(aco_rt_pthread_rwlockattr_t* a) {
    return a ? 0 : EINVAL;
}

int aco_rt_pthread_rwlockattr_setpshared(aco_rt_pthread_rwlockattr_t* a, int ps) {
    if (a == NULL) return EINVAL;
    return set_pshared(&a->pshared_, ps);
}

int aco_rt_pthread_rwlockattr_getpshared(const aco_rt_pthread_rwlockattr_t* a, int* ps) {
    if (a == NULL || ps == NULL) return EINVAL;
    *ps = a->pshared_;
    return 0;
}

/* (A refused rwlock's mark is mark_, its init's caller writer_.) */
static inline int rw_refused(const aco_rt_pthread_rwlock_t* l) {
    return rt_unlikely(marked(l->mark_));
}

static int rw_bad(aco_rt_pthread_rwlock_t* l, const char* fn) {
    return refused(fn, "rwlock", l, (int*)&l->mark_, l->writer_);
}

int aco_rt_pthread_rwlock_init(aco_rt_pthread_rwlock_t* l,
                               const aco_rt_pthread_rwlockattr_t* attr) {
    if (l == NULL) return EINVAL;
    int bad = attr && !pshared_ok(attr->pshared_);
    if (bad || on_share_stack(l, sizeof(*l))) {
        mark(&l->mark_, bad);
        l->writer_ = SITE();
        return EINVAL;
    }
    memset(l, 0, sizeof(*l));
    return 0;
}

/* Cos waiting on c: what its queue holds (a co that a deadline, a cancel
 * or aco_rt_sched_free took away is off it: no count of ours can say so). */
static unsigned cond_waiters(aco_rt_cond_t* c) {
    unsigned n = 0;
    rt_lock(&c->lock_);
    for (rt_waiter_t* w = rt_wq_first(&c->q_); w; w = w->next)
        n += __atomic_load_n(&w->co->claim, __ATOMIC_RELAXED) == 0;   /* (not leaving) */
    rt_unlock(&c->lock_);
    return n;
}

int aco_rt_pthread_rwlock_destroy(aco_rt_pthread_rwlock_t* l) {
    if (l == NULL) return EINVAL;
    if (rw_refused(l)) return rw_bad(l, "aco_rt_pthread_rwlock_destroy");
    if (l->writer_ || l->readers_ || __atomic_load_n(&l->m_.owner_, __ATOMIC_RELAXED) != 0 ||
        queue_busy(&l->m_.lock_, &l->m_.q_) ||
        queue_busy(&l->writers_q_.lock_, &l->writers_q_.q_) ||
        queue_busy(&l->readers_q_.lock_, &l->readers_q_.q_))
        return EBUSY;
    return 0;
}

enum { RW_READ, RW_WRITE };

/* Lock l for how until deadline; try: EBUSY instead of waiting. */
static int rw_lock(aco_rt_pthread_rwlock_t* l, int how, int64_t deadline, int try,
                   const char* fn) {
    if (l == NULL) return EINVAL;
    if (rw_refused(l)) return rw_bad(l, fn);
    aco_rt_co_t* me = rt_self();
    if (me == NULL) return EPERM;
    int r = 0;
    if (try) lock_anyway(me, &l->m_);
    else if ((r = -aco_rt_mutex_lock(&l->m_, -1)) != 0) return r;
    if (l->writer_ == me) {
        r = EDEADLK;
    } else if (how == RW_READ) {
        while (l->writer_ && r == 0)
            r = try ? EBUSY : -aco_rt_cond_wait(&l->readers_q_, &l->m_, deadline);
        if (r == ETIMEDOUT && l->writer_ == NULL) r = 0;  /* free after all */
        if (r == 0 && l->readers_ == UINT_MAX) r = EAGAIN;
        if (r == 0) l->readers_++;
    } else {
        while ((l->writer_ || l->readers_) && r == 0)
            r = try ? EBUSY : -aco_rt_cond_wait(&l->writers_q_, &l->m_, deadline);
        if (r == ETIMEDOUT && l->writer_ == NULL && l->readers_ == 0) r = 0;
        if (r == 0) l->writer_ = me;
    }
    aco_rt_mutex_unlock(&l->m_);
    return r;
}

static int rw_timed(aco_rt_pthread_rwlock_t* l, int how, const struct timespec* abstime,
                    const char* fn) {
    int64_t d = deadline_of(CLOCK_REALTIME, abstime);
    /* A bad abstime is EINVAL even when l is free, as glibc's rwlock says
     * (it checks abstime first; its mutex only when it has to wait); a
     * refused l says that first. */
    if (d < 0) return l && rw_refused(l) ? rw_bad(l, fn) : EINVAL;
    return rw_lock(l, how, d, 0, fn);
}

int aco_rt_pthread_rwlock_rdlock(aco_rt_pthread_rwlock_t* l) {
    return rw_lock(l, RW_READ, -1, 0, "aco_rt_pthread_rwlock_rdlock");
}

int aco_rt_pthread_rwlock_tryrdlock(aco_rt_pthread_rwlock_t* l) {
    return rw_lock(l, RW_READ, 0, 1, "aco_rt_pthread_rwlock_tryrdlock");
}

int aco_rt_pthread_rwlock_wrlock(aco_rt_pthread_rwlock_t* l) {
    return rw_lock(l, RW_WRITE, -1, 0, "aco_rt_pthread_rwlock_wrlock");
}

int aco_rt_pthread_rwlock_trywrlock(aco_rt_pthread_rwlock_t* l) {
    return rw_lock(l, RW_WRITE, 0, 1, "aco_rt_pthread_rwlock_trywrlock");
}

int aco_rt_pthread_rwlock_timedrdlock(aco_rt_pthread_rwlock_t* l, const struct timespec* abstime) {
    return rw_timed(l, RW_READ, abstime, "aco_rt_pthread_rwlock_timedrdlock");
}

int aco_rt_pthread_rwlock_timedwrlock(aco_rt_pthread_rwlock_t* l, const struct timespec* abstime) {
    return rw_timed(l, RW_WRITE, abstime, "aco_rt_pthread_rwlock_timedwrlock");
}

int aco_rt_pthread_rwlock_unlock(aco_rt_pthread_rwlock_t* l) {
    if (l == NULL) return EINVAL;
    if (rw_refused(l)) return rw_bad(l, "aco_rt_pthread_rwlock_unlock");
    aco_rt_co_t* me = rt_self();
    if (me == NULL) return EPERM;
    int r = 0;
    lock_anyway(me, &l->m_);
    /* (a signal with no writer waiting does nothing: the queue says, not
     * a count, which a waiter destroyed by aco_rt_sched_free would leave
     * wrong) */
    if (l->writer_ == me) {
        l->writer_ = NULL;
        aco_rt_cond_broadcast(&l->readers_q_);
        aco_rt_cond_signal(&l->writers_q_);
    } else if (l->readers_ > 0 && l->writer_ == NULL) {
        if (--l->readers_ == 0) aco_rt_cond_signal(&l->writers_q_);
    } else {
        r = EPERM;
    }
    aco_rt_mutex_unlock(&l->m_);
    return r;
}

/* ------------------------------------------------------------------------ */
/* Barriers                                                                 */
/* ------------------------------------------------------------------------ */

int aco_rt_pthread_barrierattr_init(aco_rt_pthread_barrierattr_t* a) {
    if (a == NULL) return EINVAL;
    memset(a, 0, sizeof(*a));
    return 0;
}

int aco_rt_pthread_barrierattr_destroy(aco_rt_pthread_barrierattr_t* a) {
    return a ? 0 : EINVAL;
}

int aco_rt_pthread_barrierattr_setpshared(aco_rt_pthread_barrierattr_t* a, int ps) {
    if (a == NULL) return EINVAL;
    return set_pshared(&a->pshared_, ps);
}

int aco_rt_pthread_barrierattr_getpshared(const aco_rt_pthread_barrierattr_t* a, int* ps) {
    if (a == NULL || ps == NULL) return EINVAL;
    *ps = a->pshared_;
    return 0;
}

/* A barrier with no count was refused (its mark arrived_, its init's
 * caller its mutex's owner), or never made. */
static int barrier_bad(aco_rt_pthread_barrier_t* b, const char* fn) {
    return refused(fn, "barrier", b, (int*)&b->arrived_, (const void*)b->m_.owner_);
}

int aco_rt_pthread_barrier_init(aco_rt_pthread_barrier_t* b,
                                const aco_rt_pthread_barrierattr_t* attr, unsigned count) {
    if (b == NULL) return EINVAL;
    int bad = count == 0 || (attr && !pshared_ok(attr->pshared_));
    if (bad || on_share_stack(b, sizeof(*b))) {
        b->n_ = 0;
        mark(&b->arrived_, bad);
        b->m_.owner_ = (uintptr_t)SITE();
        return EINVAL;
    }
    memset(b, 0, sizeof(*b));
    b->n_ = count;
    return 0;
}

int aco_rt_pthread_barrier_destroy(aco_rt_pthread_barrier_t* b) {
    if (b == NULL) return EINVAL;
    if (b->n_ == 0) return barrier_bad(b, "aco_rt_pthread_barrier_destroy");
    if (__atomic_load_n(&b->m_.owner_, __ATOMIC_RELAXED) != 0 ||
        queue_busy(&b->m_.lock_, &b->m_.q_) || queue_busy(&b->q_.lock_, &b->q_.q_))
        return EBUSY;
    b->n_ = 0;                  /* destroyed: EINVAL from now on (unmarked: */
    b->arrived_ = 0;            /* nothing said), until an init */
    return 0;
}

int aco_rt_pthread_barrier_wait(aco_rt_pthread_barrier_t* b) {
    if (b == NULL) return EINVAL;
    if (b->n_ == 0) return barrier_bad(b, "aco_rt_pthread_barrier_wait");
    if (rt_self() == NULL) return EPERM;
    int r = aco_rt_mutex_lock(&b->m_, -1);
    if (r) return -r;
    /* arrived_ may count cos that left (cancelled, or destroyed by
     * aco_rt_sched_free): when it says the round is full, the queue says
     * who is still there (one look per round). */
    if (++b->arrived_ >= b->n_ && (b->arrived_ = cond_waiters(&b->q_) + 1) >= b->n_) {
        b->arrived_ = 0;
        aco_rt_cond_broadcast(&b->q_);
        aco_rt_mutex_unlock(&b->m_);
        return ACO_RT_PTHREAD_BARRIER_SERIAL_THREAD;
    }
    /* The condition wait without its relock: on the queue before m_ is
     * let go (the round's last co takes m_ first), then nothing of b is
     * touched after the wake, for the last co may destroy and free b as
     * soon as it returns (POSIX lets it).  Only the round's end wakes
     * (0); a cancel that won takes the co off the queue (ECANCELED: it no
     * longer counts, above). */
    aco_rt_co_t* me = rt_self();
    if ((r = rt_may_block(me, -1)) != 0) {
        aco_rt_mutex_unlock(&b->m_);
        return -r;
    }
    rt_lock(&b->q_.lock_);
    rt_claim_reset(me);
    rt_wq_push_locked(&b->q_.q_, &me->w, &b->q_.lock_);
    rt_unlock(&b->q_.lock_);
    aco_rt_mutex_unlock(&b->m_);
    return -rt_park(me, RT_W_COND, &b->q_, -1);
}
