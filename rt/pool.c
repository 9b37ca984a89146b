/* pool.c - pools of scheduler threads, and groups of cos.
 *
 * A pool is T threads, each running its own scheduler (aco_rt_sched_run)
 * until the pool is freed; an idle one sleeps in its backend.  A co stays
 * on the thread where it first runs.  aco_rt_pool_spawn from outside the
 * pool picks the scheduler with the fewest cos, and the spawn travels as a
 * message to that thread's inbox; from a pool thread the new co waits,
 * unstarted, in that thread's queue of new cos, where an idle sibling may
 * take it before it starts (co.c: stealing).  Started cos never move.
 *
 * A group is a set of cos on one scheduler: spawned into it, detached, and
 * joined or cancelled together.
 */
#define _GNU_SOURCE
#include "rt_impl.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

struct aco_rt_pool {
    unsigned          n;
    aco_rt_sched_t**  s;
    pthread_t*        th;
    aco_rt_opts_t     o;
    int*              cpu;              /* pin: the CPUs the pool's creator may
                                           run on, in order; thread i takes
                                           cpu[i % ncpu] */
    unsigned          ncpu;
    /* start-up, idle waits (aco_rt_pool_wait) */
    rt_idle_t         idle;             /* its mutex and cond serve start-up too */
    unsigned          started;
    int               err;
    int               go;               /* 1: run, -1: the pool failed to start */
    int               closing;          /* atomic: no more spawns */
    pthread_barrier_t stopped;          /* every loop ended and aco_rt_pool_free
                                           is done with them: free them */
};

typedef struct { aco_rt_pool_t* p; unsigned i; } start_t;

#ifndef ACO_RT_NO_THREADS
/* The CPUs the calling thread may run on (its affinity mask, as taskset or
 * a cpuset left it), in increasing order: their number, the list in *out
 * (malloc'd); 0 with errno on failure. */
static unsigned allowed_cpus(int** out) {
    for (int max = 1024; max <= (1 << 20); max *= 2) {
        cpu_set_t* set = CPU_ALLOC((size_t)max);
        if (set == NULL) { errno = ENOMEM; return 0; }
        size_t size = CPU_ALLOC_SIZE((size_t)max);
        if (sched_getaffinity(0, size, set) != 0) {
            int e = errno;
            CPU_FREE(set);
            if (e == EINVAL) continue;      /* more possible CPUs than max */
            errno = e;
            return 0;
        }
        unsigned n = (unsigned)CPU_COUNT_S(size, set), k = 0;
        int* cpu = n ? malloc(n * sizeof(*cpu)) : NULL;
        if (cpu == NULL) { CPU_FREE(set); errno = n ? ENOMEM : EINVAL; return 0; }
        for (int c = 0; c < max && k < n; c++)
            if (CPU_ISSET_S((size_t)c, size, set)) cpu[k++] = c;
        CPU_FREE(set);
        *out = cpu;
        return n;
    }
    errno = EINVAL;
    return 0;
}
#endif

/* The calling thread runs on cpu only: 0 or an errno. */
static int pin_self(int cpu) {
    cpu_set_t* set = CPU_ALLOC((size_t)cpu + 1);
    if (set == NULL) return ENOMEM;
    size_t size = CPU_ALLOC_SIZE((size_t)cpu + 1);
    CPU_ZERO_S(size, set);
    CPU_SET_S((size_t)cpu, size, set);
    int r = pthread_setaffinity_np(pthread_self(), size, set);
    CPU_FREE(set);
    return r;
}

static void* pool_thread(void* arg) {
    start_t st = *(start_t*)arg;
    aco_rt_pool_t* p = st.p;
    free(arg);
    int pin_err = p->cpu ? pin_self(p->cpu[st.i % p->ncpu]) : 0;
    aco_rt_sched_t* s = pin_err ? NULL : aco_rt_sched_new(&p->o);
    pthread_mutex_lock(&p->idle.mu);
    if (s == NULL) p->err = pin_err ? pin_err : errno;
    else {
        rt_pooled_join(s, p, &p->idle, p->s, st.i, p->n);
        p->s[st.i] = s;
    }
    p->started++;
    pthread_cond_broadcast(&p->idle.cv);
    while (p->go == 0) pthread_cond_wait(&p->idle.cv, &p->idle.mu);
    int go = p->go;
    pthread_mutex_unlock(&p->idle.mu);
    if (s == NULL) return NULL;
    if (go < 0) {
        rt_pooled_leave(s);
        aco_rt_sched_free(s);
        return NULL;
    }
    for (;;) {
        int r = aco_rt_sched_run(s);
        if (rt_load(&p->closing)) break;
        if (r == 0) continue;       /* (a stray aco_rt_sched_stop) */
        /* a backend error: say so, keep serving (the cos are still there) */
        char msg[96];
        int len = snprintf(msg, sizeof(msg), "aco_rt pool thread %u: backend error %d\n", st.i, -r);
        if (write(2, msg, (size_t)len) < 0) { /* nothing better to do */ }
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    /* Past the barrier no co of any thread runs, and aco_rt_pool_free has
     * stopped them all: nobody sends to us or touches our scheduler. */
    pthread_barrier_wait(&p->stopped);
    rt_pooled_leave(s);
    aco_rt_sched_free(s);
    return NULL;
}

/* Join the first n threads and free p. */
static void pool_end(aco_rt_pool_t* p, unsigned n) {
    for (unsigned i = 0; i < n; i++) pthread_join(p->th[i], NULL);
    pthread_barrier_destroy(&p->stopped);
    pthread_cond_destroy(&p->idle.cv);
    pthread_mutex_destroy(&p->idle.mu);
    free(p->s);
    free(p->th);
    free(p->cpu);
    free(p);
}

aco_rt_pool_t* aco_rt_pool_new(const aco_rt_pool_opts_t* opts) {
#ifdef ACO_RT_NO_THREADS
    (void)opts;
    (void)pool_thread;
    errno = ENOSYS;
    return NULL;
#else
    aco_rt_pool_opts_t o = {0};
    if (opts) o = *opts;
    if (o.threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        o.threads = n > 0 ? (unsigned)n : 1;
    }
    if (o.threads > 1024) { errno = EINVAL; return NULL; }
    aco_rt_pool_t* p = calloc(1, sizeof(*p));
    if (p == NULL) return NULL;
    p->n = o.threads;
    p->o = o.sched;
    p->s = calloc(p->n, sizeof(*p->s));
    p->th = calloc(p->n, sizeof(*p->th));
    if (p->s == NULL || p->th == NULL) goto nomem;
    if (o.pin && (p->ncpu = allowed_cpus(&p->cpu)) == 0) {
        int e = errno;
        free(p->s);
        free(p->th);
        free(p);
        errno = e;
        return NULL;
    }
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->idle.cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&p->idle.mu, NULL);
    pthread_barrier_init(&p->stopped, NULL, p->n + 1);     /* + aco_rt_pool_free */
    unsigned made = 0;
    int err = 0;
    for (; made < p->n; made++) {
        start_t* st = malloc(sizeof(*st));
        if (st == NULL) { err = ENOMEM; break; }
        st->p = p;
        st->i = made;
        if ((err = pthread_create(&p->th[made], NULL, pool_thread, st)) != 0) { free(st); break; }
    }
    pthread_mutex_lock(&p->idle.mu);
    while (p->started < made) pthread_cond_wait(&p->idle.cv, &p->idle.mu);
    if (err == 0) err = p->err;
    p->go = err ? -1 : 1;
    pthread_cond_broadcast(&p->idle.cv);
    pthread_mutex_unlock(&p->idle.mu);
    if (err == 0) return p;
    pool_end(p, made);
    errno = err;
    return NULL;
nomem:
    free(p->s);
    free(p->th);
    free(p->cpu);
    free(p);
    errno = ENOMEM;
    return NULL;
#endif
}

unsigned aco_rt_pool_threads(const aco_rt_pool_t* p) { return p ? p->n : 0; }

aco_rt_sched_t* aco_rt_pool_sched(aco_rt_pool_t* p, unsigned i) {
    return p && i < p->n ? p->s[i] : NULL;
}

/* Its cos, and those on their way to it: a co moves from newq_n (waiting
 * to start) to sent (taken) to load (started), counted in the next before
 * it leaves the last, so read in that order it is never missed. */
static inline uint32_t load_of(aco_rt_sched_t* s) {
    uint32_t n = __atomic_load_n(&s->newq.n, __ATOMIC_SEQ_CST);
    n += __atomic_load_n(&s->ld.sent, __ATOMIC_SEQ_CST);
    return n + __atomic_load_n(&s->ld.load, __ATOMIC_SEQ_CST);
}

/* The scheduler with the fewest cos; the caller's own on a tie. */
static aco_rt_sched_t* least_loaded(aco_rt_pool_t* p) {
    aco_rt_sched_t* best = rt_tls_sched && rt_tls_sched->pooled.pool == p ? rt_tls_sched : p->s[0];
    uint32_t min = load_of(best);
    for (unsigned i = 0; i < p->n && min > 0; i++) {
        uint32_t l = load_of(p->s[i]);
        if (l < min) { min = l; best = p->s[i]; }
    }
    return best;
}

aco_rt_co_t* aco_rt_pool_spawn(aco_rt_pool_t* p, aco_rt_fn_t fn, void* arg,
                               const aco_rt_spawn_opts_t* opts) {
    if (p == NULL || fn == NULL) { errno = EINVAL; return NULL; }
    if (rt_load(&p->closing)) { errno = EPIPE; return NULL; }
    /* From one of its threads: there (an idle sibling may take it before
     * it starts); from elsewhere: to the thread with the fewest cos. */
#ifndef ACO_RT_NO_THREADS
    if (rt_tls_sched && rt_tls_sched->pooled.pool == p) return rt_spawn_stealable(fn, arg, opts);
#endif
    return rt_spawn(least_loaded(p), fn, arg, opts, 0);
}

/* Has the pool a co anywhere?  Each scheduler's count is read in turn, and
 * a co moving between two of them (spawned by one onto another, or taken
 * by a thief) could be missed by a look at the one before it arrives and
 * at the other after it left.  So a scan counts only when no move ran
 * during it: for every scheduler, ended == begun before the scan, and
 * still the same two numbers after it (moves are counted begun, then
 * ended, around the transfer: seq_cst). */
static int pool_busy(aco_rt_pool_t* p) {
    for (;;) {
        int quiet = 1;
        uint64_t sum1 = 0, sum2 = 0;
        for (unsigned i = 0; i < p->n; i++) {
            uint64_t e = __atomic_load_n(&p->s[i]->ld.mv_ended, __ATOMIC_SEQ_CST);
            uint64_t b = __atomic_load_n(&p->s[i]->ld.mv_begun, __ATOMIC_SEQ_CST);
            if (e != b) quiet = 0;
            sum1 += b;
        }
        for (unsigned i = 0; i < p->n; i++)
            if (load_of(p->s[i])) return 1;
        for (unsigned i = 0; i < p->n; i++) {
            uint64_t e = __atomic_load_n(&p->s[i]->ld.mv_ended, __ATOMIC_SEQ_CST);
            uint64_t b = __atomic_load_n(&p->s[i]->ld.mv_begun, __ATOMIC_SEQ_CST);
            if (e != b) quiet = 0;
            sum2 += b;
        }
        if (quiet && sum1 == sum2) return 0;
        sched_yield();          /* a move was on: look again */
    }
}

/* Has a thread not yet cancelled its cos for aco_rt_pool_wait(CANCEL)?
 * Until it has, a co spawned onto it would be cancelled too ("cos spawned
 * later are not"). */
static int cancel_pending(aco_rt_pool_t* p) {
    for (unsigned i = 0; i < p->n; i++)
        if (__atomic_load_n(&p->s[i]->pooled.cancel_seen, __ATOMIC_SEQ_CST) !=
            __atomic_load_n(&p->s[i]->ask.cancel_gen, __ATOMIC_SEQ_CST))
            return 1;
    return 0;
}

int aco_rt_pool_wait(aco_rt_pool_t* p, int how, int64_t deadline) {
    if (p == NULL || (how != ACO_RT_POOL_DRAIN && how != ACO_RT_POOL_CANCEL)) return -EINVAL;
    if (rt_tls_sched && rt_tls_sched->pooled.pool == p) return -EDEADLK;
    if (how == ACO_RT_POOL_CANCEL) {
        for (unsigned i = 0; i < p->n; i++) rt_cancel_ask(p->s[i]);
    }
    struct timespec ts;
    if (deadline < -1) deadline = 0;    /* -1: no deadline; others: long past */
    if (deadline >= 0) {
        ts.tv_sec = deadline / 1000000000;
        ts.tv_nsec = deadline % 1000000000;
    }
    int r = 0;
    pthread_mutex_lock(&p->idle.mu);
    __atomic_fetch_add(&p->idle.waiters, 1u, __ATOMIC_SEQ_CST);
    int cancel = how == ACO_RT_POOL_CANCEL, late = 0;
    for (;;) {
        int busy = pool_busy(p);
        if (!busy && !(cancel && cancel_pending(p))) break;
        if (busy && late) { r = -ETIMEDOUT; break; }
        /* Past the deadline with no co left, the cancel has only to be
         * seen by the idle threads (at once: they were notified), so that
         * it hits no co spawned after we return. */
        if (deadline < 0 || late) pthread_cond_wait(&p->idle.cv, &p->idle.mu);
        else if (pthread_cond_timedwait(&p->idle.cv, &p->idle.mu, &ts) == ETIMEDOUT) late = 1;
    }
    __atomic_fetch_sub(&p->idle.waiters, 1u, __ATOMIC_SEQ_CST);
    pthread_mutex_unlock(&p->idle.mu);
    return r;
}

int aco_rt_pool_free(aco_rt_pool_t* p) {
    if (p == NULL) return 0;
    /* (its threads would wait for this one at the barrier: for good) */
    if (rt_tls_sched && rt_tls_sched->pooled.pool == p) return -EDEADLK;
    rt_store(&p->closing, 1);
    for (unsigned i = 0; i < p->n; i++) aco_rt_sched_stop(p->s[i]);
    pthread_barrier_wait(&p->stopped);
    pool_end(p, p->n);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Groups                                                                   */
/* ------------------------------------------------------------------------ */

struct aco_rt_group {
    aco_rt_sched_t* s;
    uint32_t        lock;
    int             cancelling;     /* until the group is empty */
    size_t          n;              /* members alive */
    aco_rt_co_t*    head;           /* their list (gnext, gprev) */
    aco_rt_waitq_t  q;              /* cos in aco_rt_group_join */
};

aco_rt_group_t* aco_rt_group_new(aco_rt_sched_t* s) {
    if (s == NULL) s = rt_tls_sched;
    if (s == NULL) { errno = EPERM; return NULL; }
    aco_rt_group_t* g = calloc(1, sizeof(*g));
    if (g == NULL) return NULL;
    g->s = s;
    return g;
}

aco_rt_group_t* aco_rt_pool_group_new(aco_rt_pool_t* p) {
    if (p == NULL) { errno = EINVAL; return NULL; }
    return aco_rt_group_new(least_loaded(p));
}

aco_rt_sched_t* aco_rt_group_sched(const aco_rt_group_t* g) { return g ? g->s : NULL; }

/* co, made and held (rt_spawn), joins g, cancelled if g is being
 * cancelled.  (co->x was made by the spawn.) */
static void group_join_new(aco_rt_group_t* g, aco_rt_co_t* co) {
    rt_extra_t* x = co->x;
    x->group = g;
    rt_lock(&g->lock);
    /* before it is listed: a cancel from another thread reads the flags
     * of the listed members (after our unlock) */
    if (g->cancelling) co->flags |= RT_CANCELLED;
    x->gprev = NULL;
    x->gnext = g->head;
    if (g->head) g->head->x->gprev = co;
    g->head = co;
    g->n++;
    rt_unlock(&g->lock);
}

static void group_leave(aco_rt_co_t* co) {
    rt_extra_t* x = co->x;
    aco_rt_group_t* g = x->group;
    rt_lock(&g->lock);
    if (x->gprev) x->gprev->x->gnext = x->gnext; else g->head = x->gnext;
    if (x->gnext) x->gnext->x->gprev = x->gprev;
    x->group = NULL;
    if (--g->n == 0) {
        g->cancelling = 0;
        rt_waiter_t* w;
        while ((w = rt_wq_take(&g->q)) != NULL) rt_wake_any(w->co, 0);
    }
    rt_unlock(&g->lock);
}

int aco_rt_group_spawn(aco_rt_group_t* g, aco_rt_fn_t fn, void* arg,
                       const aco_rt_spawn_opts_t* opts) {
    if (g == NULL || fn == NULL) return -EINVAL;
    aco_rt_co_t* co = rt_spawn(g->s, fn, arg, opts, 1);
    if (co == NULL) return -errno;
    group_join_new(g, co);
    rt_spawn_go(co);
    aco_rt_detach(co);
    return 0;
}

size_t aco_rt_group_size(aco_rt_group_t* g) {
    if (g == NULL) return 0;
    rt_lock(&g->lock);
    size_t n = g->n;
    rt_unlock(&g->lock);
    return n;
}

int aco_rt_group_join(aco_rt_group_t* g, int64_t deadline) {
    aco_rt_co_t* me = rt_self();
    if (me == NULL) return -EPERM;
    if (g == NULL) return -EINVAL;
    if (me->x && me->x->group == g) return -EDEADLK;
    if (rt_co_cancelled(me)) return -ECANCELED;
    rt_lock(&g->lock);
    if (g->n == 0) { rt_unlock(&g->lock); return 0; }
    int r = rt_may_block(me, deadline);
    if (r) { rt_unlock(&g->lock); return r; }
    rt_claim_reset(me);
    rt_wq_push_locked(&g->q, &me->w, &g->lock);
    rt_unlock(&g->lock);
    /* (woken by the last member's end, it does not look at g again: the
     * group may be freed before it runs) */
    return rt_park(me, RT_W_GROUP, g, deadline);
}

int aco_rt_group_cancel(aco_rt_group_t* g, int64_t deadline) {
    aco_rt_co_t* me = rt_self();
    if (me == NULL) return -EPERM;
    if (g == NULL) return -EINVAL;
    if (me->x && me->x->group == g) return -EDEADLK;
    int here = g->s == me->s;
    rt_lock(&g->lock);
    g->cancelling = g->n != 0;      /* (empty: nothing to cancel, nor later) */
    aco_rt_co_t* first = g->head;
    /* From another thread, through the members' inbox: a cancel runs the
     * co's abort, which takes other locks, and none is taken under ours.
     * Not into a scheduler that frees (past its drain, a message would
     * stay in its inbox, in a record it frees): its free destroys the
     * members anyway, and they leave the group then (an empty group's
     * scheduler may be gone: g->s is not looked at). */
    if (!here && first && rt_hold_try(g->s)) {
        for (aco_rt_co_t* c = first; c; c = c->x->gnext) rt_cancel_async(c);
        rt_hold_end(g->s);
    }
    rt_unlock(&g->lock);
    /* On the group's own thread, at once (as aco_rt_cancel there: no wake
     * that comes after this call may end a member's wait with success),
     * after the unlock.  The list from first on stays as it is meanwhile:
     * members leave it only as they end, on this thread, and this co does
     * not switch here; members spawned since (by other threads, at the
     * head) see cancelling.  A member another thread spawned whose
     * message has not come yet (RT_REMOTE, cleared here as it comes) waits
     * on nothing, and its spawner may still read its flags: the inbox. */
    if (here)
        for (aco_rt_co_t* c = first; c; c = c->x->gnext) {
            if (c->flags & RT_REMOTE) rt_cancel_async(c);
            else aco_rt_cancel(c);
        }
    return aco_rt_group_join(g, deadline);
}

int aco_rt_group_free(aco_rt_group_t* g) {
    if (g == NULL) return 0;
    rt_lock(&g->lock);
    int busy = g->n != 0 || !rt_wq_empty(&g->q);
    rt_unlock(&g->lock);
    if (busy) return -EBUSY;
    free(g);
    return 0;
}

RT_WAIT_KINDS(group, {RT_W_GROUP, {"group", rt_abort_shared, NULL}})
RT_HOOK(rt_hook_group_leave, group_leave)
