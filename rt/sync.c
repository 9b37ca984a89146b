/* sync.c - mutex, condition variable, semaphore and wait group, for cos of
 * any threads.
 *
 * Each is a word of state, a spin lock and a FIFO wait queue of waiters
 * that live in the cos' records.  Whoever releases hands over directly:
 * unlock makes the first waiter the owner before waking it, post gives the
 * unit to the first waiter, so a co that comes later cannot overtake one
 * that waits (FIFO fairness), and a woken co never has to try again.  A
 * waiter is handed something only if its claim is won (rt_wq_take): one
 * whose deadline or cancel came first is skipped.
 *
 * Lock-free fast paths: an uncontended mutex is a compare-and-swap of
 * owner_ from 0 to the co and back; its low bit says "go the slow way, there
 * may be waiters".  A semaphore with units left is a compare-and-swap of
 * the count.  A wait group's add that does not reach 0 is one atomic add.
 */
#include "rt_impl.h"

/* ------------------------------------------------------------------------ */
/* Mutex                                                                    */
/* ------------------------------------------------------------------------ */

#define MUTEX_WAITERS ((uintptr_t)1)

void aco_rt_mutex_init(aco_rt_mutex_t* m) {
    if (m) memset(m, 0, sizeof(*m));
}

static inline aco_rt_co_t* owner_of(uintptr_t o) {
    return (aco_rt_co_t*)(o & ~MUTEX_WAITERS);
}

/* co's count of mutexes held, +1 or -1 (255 stays: its record is kept).
 * Written by co's thread, and by an unlock that hands a mutex to co while
 * it is parked (relaxed: its wake orders it). */
static inline void held_add(aco_rt_co_t* co, int d) {
    uint8_t h = __atomic_load_n(&co->held, __ATOMIC_RELAXED);
    if (h != 255) __atomic_store_n(&co->held, (uint8_t)(h + d), __ATOMIC_RELAXED);
}

/* Queue me on m unless it is free (then take it): 1 if queued (lock
 * released, park next), 0 if taken. */
static int lock_or_queue(aco_rt_mutex_t* m, aco_rt_co_t* me) {
    rt_lock(&m->lock_);
    uintptr_t o = rt_load(&m->owner_);
    for (;;) {
        if (o == 0) {
            if (rt_cas(&m->owner_, &o, (uintptr_t)me)) {
                rt_unlock(&m->lock_);
                held_add(me, 1);
                return 0;
            }
        } else if ((o & MUTEX_WAITERS) || rt_cas(&m->owner_, &o, o | MUTEX_WAITERS)) {
            break;
        }
    }
    rt_claim_reset(me);
    rt_wq_push_locked(&m->q_, &me->w, &m->lock_);
    rt_unlock(&m->lock_);
    return 1;
}

/* The fast paths of lock and unlock are one compare-and-swap each, in
 * small functions of their own (fewer registers saved and restored); the
 * rest is out of line. */
__attribute__((noinline))
static int lock_slow(aco_rt_mutex_t* m, aco_rt_co_t* me, int64_t deadline) {
    if (rt_unlikely(m == NULL)) return -EINVAL;
    if (rt_unlikely(me == NULL)) return -EPERM;
    if (owner_of(rt_load(&m->owner_)) == me) return -EDEADLK;
    if (rt_co_cancelled(me)) return -ECANCELED;
    int r = rt_may_block(me, deadline);
    if (r) return r;
    if (!lock_or_queue(m, me)) return 0;
    return rt_park(me, RT_W_MUTEX, m, deadline);
    /* 0: unlock made us the owner (and counted it) */
}

int aco_rt_mutex_lock(aco_rt_mutex_t* m, int64_t deadline) {
    aco_rt_co_t* me = rt_self();
    if (rt_likely(me != NULL && m != NULL && !rt_co_cancelled(me))) {
        /* A held mutex is seen with a plain load: a compare-and-swap that
         * fails costs a locked instruction all the same (a fifth of a
         * hand-off).  (The line asked for to write: the swap that follows
         * a free one then needs no second transfer.) */
        rt_prefetch_w(&m->owner_);
        uintptr_t o = rt_load(&m->owner_);
        if (rt_likely(o == 0 && rt_cas(&m->owner_, &o, (uintptr_t)me))) {
            held_add(me, 1);
            return 0;
        }
    }
    return lock_slow(m, me, deadline);
}

int aco_rt_mutex_trylock(aco_rt_mutex_t* m) {
    aco_rt_co_t* me = rt_self();
    if (m == NULL) return -EINVAL;
    if (me == NULL) return -EPERM;
    uintptr_t o = 0;
    if (!rt_cas(&m->owner_, &o, (uintptr_t)me)) return -EBUSY;
    held_add(me, 1);
    return 0;
}

__attribute__((noinline))
static int unlock_slow(aco_rt_mutex_t* m, aco_rt_co_t* me, uintptr_t o) {
    if (rt_unlikely(m == NULL)) return -EINVAL;
    if (rt_unlikely(me == NULL || owner_of(o) != me)) return -EPERM;
    held_add(me, -1);
    /* Waiters may be queued: hand m to the first that can take it. */
    rt_lock(&m->lock_);
    rt_waiter_t* w = rt_wq_take(&m->q_);
    rt_store(&m->owner_, w ? (uintptr_t)w->co | (rt_wq_empty(&m->q_) ? 0 : MUTEX_WAITERS) : 0);
    if (w) held_add(w->co, 1);
    rt_unlock(&m->lock_);
    if (w) rt_wake_any(w->co, 0);
    return 0;
}

int aco_rt_mutex_unlock(aco_rt_mutex_t* m) {
    aco_rt_co_t* me = rt_self();
    if (rt_unlikely(me == NULL || m == NULL)) return unlock_slow(m, me, 0);
    /* (a waiter queued sets the low bit: a plain load sees it, and the
     * swap that would fail is not tried, as in lock) */
    uintptr_t o = rt_load(&m->owner_);
    if (rt_likely(o == (uintptr_t)me && rt_cas(&m->owner_, &o, 0))) {
        held_add(me, -1);
        return 0;
    }
    return unlock_slow(m, me, o);
}

/* Take m back after a condition wait, whatever happened to the co: no
 * deadline, and a cancel does not make it give up (the caller is owed m). */
static void relock(aco_rt_co_t* me, aco_rt_mutex_t* m) {
    uintptr_t o = 0;
    if (rt_cas(&m->owner_, &o, (uintptr_t)me)) {
        held_add(me, 1);
        return;
    }
    while (lock_or_queue(m, me) && rt_park(me, RT_W_MUTEX, m, -1) != 0) {
        /* a cancel took us off the queue: queue again */
    }
}

/* ------------------------------------------------------------------------ */
/* Condition variable                                                       */
/* ------------------------------------------------------------------------ */

void aco_rt_cond_init(aco_rt_cond_t* c) {
    if (c) memset(c, 0, sizeof(*c));
}

int aco_rt_cond_wait(aco_rt_cond_t* c, aco_rt_mutex_t* m, int64_t deadline) {
    aco_rt_co_t* me = rt_self();
    if (c == NULL || m == NULL) return -EINVAL;
    if (me == NULL || owner_of(rt_load(&m->owner_)) != me) return -EPERM;
    if (rt_co_cancelled(me)) return -ECANCELED;
    int r = rt_may_block(me, deadline);
    if (r) return r;
    /* On c's queue before m is let go: a signal after the unlock finds us. */
    rt_lock(&c->lock_);
    rt_claim_reset(me);
    rt_wq_push_locked(&c->q_, &me->w, &c->lock_);
    rt_unlock(&c->lock_);
    aco_rt_mutex_unlock(m);
    r = rt_park(me, RT_W_COND, c, deadline);
    relock(me, m);
    return r;
}

void aco_rt_cond_signal(aco_rt_cond_t* c) {
    if (c == NULL) return;
    rt_lock(&c->lock_);
    rt_waiter_t* w = rt_wq_take(&c->q_);
    rt_unlock(&c->lock_);
    if (w) rt_wake_any(w->co, 0);
}

void aco_rt_cond_broadcast(aco_rt_cond_t* c) {
    while (c) {
        rt_lock(&c->lock_);
        rt_waiter_t* w = rt_wq_take(&c->q_);
        rt_unlock(&c->lock_);
        if (w == NULL) return;
        rt_wake_any(w->co, 0);
    }
}

/* ------------------------------------------------------------------------ */
/* Semaphore                                                                */
/* ------------------------------------------------------------------------ */

void aco_rt_sem_init(aco_rt_sem_t* s, int64_t count) {
    if (s == NULL) return;
    memset(s, 0, sizeof(*s));
    s->count_ = count;
}

/* A unit if there is one (lock-free): 1, else 0. */
static inline int sem_take(aco_rt_sem_t* s) {
    int64_t c = rt_load(&s->count_);
    while (c > 0)
        if (rt_cas(&s->count_, &c, c - 1)) return 1;
    return 0;
}

int aco_rt_sem_wait(aco_rt_sem_t* s, int64_t deadline) {
    aco_rt_co_t* me = rt_self();
    if (s == NULL) return -EINVAL;
    if (me == NULL) return -EPERM;
    if (rt_co_cancelled(me)) return -ECANCELED;
    if (sem_take(s)) return 0;
    int r = rt_may_block(me, deadline);
    if (r) return r;
    rt_lock(&s->lock_);
    if (sem_take(s)) { rt_unlock(&s->lock_); return 0; }    /* a post came */
    rt_claim_reset(me);
    rt_wq_push_locked(&s->q_, &me->w, &s->lock_);
    rt_unlock(&s->lock_);
    return rt_park(me, RT_W_SEM, s, deadline);
}

int aco_rt_sem_trywait(aco_rt_sem_t* s) {
    if (s == NULL) return -EINVAL;
    return sem_take(s) ? 0 : -EAGAIN;
}

void aco_rt_sem_post(aco_rt_sem_t* s) {
    if (s == NULL) return;
    /* Under the lock: a waiter queues only after it saw count 0 there (or
     * a debt, which this pays first: no unit for a waiter then).  The
     * count only falls meanwhile (sem_take): at INT64_MAX it stays, not
     * wrapping round to a debt that no post could pay. */
    rt_lock(&s->lock_);
    int64_t c = rt_load(&s->count_);
    rt_waiter_t* w = c >= 0 ? rt_wq_take(&s->q_) : NULL;
    while (w == NULL && c < INT64_MAX && !rt_cas(&s->count_, &c, c + 1)) {
    }
    rt_unlock(&s->lock_);
    if (w) rt_wake_any(w->co, 0);   /* the unit goes straight to it */
}

/* ------------------------------------------------------------------------ */
/* Wait group                                                               */
/* ------------------------------------------------------------------------ */

void aco_rt_wg_init(aco_rt_wg_t* wg) {
    if (wg) memset(wg, 0, sizeof(*wg));
}

static inline int wg_bad(int64_t c, int64_t n) {   /* below 0, or past INT64_MAX */
    return n < 0 ? (n == INT64_MIN || c < -n) : c > INT64_MAX - n;
}

/* The count reaches 0 only under the lock, which is let go only once every
 * waiter is taken (chained through their next: they are off the queue):
 * a waiter may free wg, or add to it again, as soon as its wait returns
 * 0, so nothing of wg is touched after the unlock (the wakes touch only
 * the cos' records), and a new round's count cannot leave a waiter of the
 * old one queued.  A wait that sees 0 without the lock waits for it. */
int aco_rt_wg_add(aco_rt_wg_t* wg, int64_t n) {
    if (wg == NULL) return -EINVAL;
    int64_t c = rt_load(&wg->count_);
    do {
        if (wg_bad(c, n)) return -EINVAL;
        if (c + n == 0 && n != 0) break;           /* to 0: under the lock */
    } while (!rt_cas(&wg->count_, &c, c + n));
    if (c + n != 0 || n == 0) return 0;
    rt_waiter_t* first = NULL;
    rt_waiter_t** last = &first;
    rt_lock(&wg->lock_);
    c = rt_load(&wg->count_);
    do {
        if (wg_bad(c, n)) { rt_unlock(&wg->lock_); return -EINVAL; }
    } while (!rt_cas(&wg->count_, &c, c + n));
    if (c + n == 0)
        for (rt_waiter_t* w; (w = rt_wq_take(&wg->q_)) != NULL; last = &w->next) *last = w;
    rt_unlock(&wg->lock_);
    while (first) {
        rt_waiter_t* w = first;
        first = w->next;                /* (before its co may run and wait again) */
        rt_wake_any(w->co, 0);
    }
    return 0;
}

int aco_rt_wg_done(aco_rt_wg_t* wg) { return aco_rt_wg_add(wg, -1); }

/* The count is 0, and the add that made it so is out of wg: it holds the
 * lock until it took the waiters (a few instructions), and once this says
 * 0 the caller may free wg. */
static inline int wg_zero(aco_rt_wg_t* wg) {
    if (rt_load(&wg->count_) != 0) return 0;
    for (unsigned i = 0; __atomic_load_n(&wg->lock_, __ATOMIC_ACQUIRE); i++) {
        if (i < 64) rt_pause(); else sched_yield();
    }
    return 1;
}

int aco_rt_wg_wait(aco_rt_wg_t* wg, int64_t deadline) {
    aco_rt_co_t* me = rt_self();
    if (wg == NULL) return -EINVAL;
    if (me == NULL) return -EPERM;
    if (rt_co_cancelled(me)) return -ECANCELED;
    if (wg_zero(wg)) return 0;
    int r = rt_may_block(me, deadline);
    if (r) return r;
    rt_lock(&wg->lock_);
    if (rt_load(&wg->count_) == 0) { rt_unlock(&wg->lock_); return 0; }
    rt_claim_reset(me);
    rt_wq_push_locked(&wg->q_, &me->w, &wg->lock_);
    rt_unlock(&wg->lock_);
    return rt_park(me, RT_W_WG, wg, deadline);
}

RT_WAIT_KINDS(sync, {RT_W_MUTEX, {"mutex", rt_abort_shared, NULL}},
              {RT_W_COND, {"cond", rt_abort_shared, NULL}},
              {RT_W_SEM, {"sem", rt_abort_shared, NULL}},
              {RT_W_WG, {"waitgroup", rt_abort_shared, NULL}})
