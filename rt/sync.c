/* sync.c - mutex, condition variable, semaphore and wait group among the cos
 * of one scheduler.
 *
 * All of them are a word of state and a FIFO wait queue of waiters that
 * live in the cos' records.  Whoever releases hands over directly: unlock
 * makes the first waiter the owner before waking it, post gives the unit to
 * the first waiter, so a co that comes later cannot overtake one that
 * waits (FIFO fairness), and a woken co never has to try again.
 */
#include "rt_impl.h"

/* ------------------------------------------------------------------------ */
/* Mutex                                                                    */
/* ------------------------------------------------------------------------ */

void aco_rt_mutex_init(aco_rt_mutex_t* m) { memset(m, 0, sizeof(*m)); }

int aco_rt_mutex_lock(aco_rt_mutex_t* m, int64_t deadline) {
    aco_rt_co_t* me = rt_self();
    if (rt_unlikely(me == NULL)) return -EPERM;
    if (rt_likely(m->owner_ == NULL && !(me->flags & RT_CANCELLED))) {
        m->owner_ = me;
        return 0;
    }
    if (m->owner_ == me) return -EDEADLK;
    if (me->flags & RT_CANCELLED) return -ECANCELED;
    int r = rt_may_block(me, deadline);
    if (r) return r;
    rt_wq_push(&m->q_, &me->w);
    return rt_park(me, "mutex", m, deadline, rt_abort_waitq);
    /* 0: unlock made us the owner */
}

int aco_rt_mutex_trylock(aco_rt_mutex_t* m) {
    aco_rt_co_t* me = rt_self();
    if (me == NULL) return -EPERM;
    if (m->owner_ != NULL) return -EBUSY;
    m->owner_ = me;
    return 0;
}

int aco_rt_mutex_unlock(aco_rt_mutex_t* m) {
    aco_rt_co_t* me = rt_self();
    if (rt_unlikely(me == NULL || m->owner_ != me)) return -EPERM;
    rt_waiter_t* w = rt_wq_pop(&m->q_);
    m->owner_ = w ? w->co : NULL;
    if (w) rt_wake(w->co, 0);
    return 0;
}

/* Take m back after a condition wait, whatever happened to the co. */
static void relock(aco_rt_co_t* me, aco_rt_mutex_t* m) {
    if (m->owner_ == NULL) { m->owner_ = me; return; }
    rt_wq_push(&m->q_, &me->w);
    /* No deadline, and a cancel must not make us leave the queue:
     * the caller is owed the mutex. */
    while (rt_park(me, "mutex", m, -1, rt_abort_waitq) != 0)
        if (m->owner_ != me) rt_wq_push(&m->q_, &me->w);
}

/* ------------------------------------------------------------------------ */
/* Condition variable                                                       */
/* ------------------------------------------------------------------------ */

void aco_rt_cond_init(aco_rt_cond_t* c) { memset(c, 0, sizeof(*c)); }

int aco_rt_cond_wait(aco_rt_cond_t* c, aco_rt_mutex_t* m, int64_t deadline) {
    aco_rt_co_t* me = rt_self();
    if (me == NULL || m->owner_ != me) return -EPERM;
    if (me->flags & RT_CANCELLED) return -ECANCELED;
    int r = rt_may_block(me, deadline);
    if (r) return r;
    aco_rt_mutex_unlock(m);
    rt_wq_push(&c->q_, &me->w);
    r = rt_park(me, "cond", c, deadline, rt_abort_waitq);
    relock(me, m);
    return r;
}

void aco_rt_cond_signal(aco_rt_cond_t* c) {
    rt_waiter_t* w = rt_wq_pop(&c->q_);
    if (w) rt_wake(w->co, 0);
}

void aco_rt_cond_broadcast(aco_rt_cond_t* c) {
    rt_waiter_t* w;
    while ((w = rt_wq_pop(&c->q_)) != NULL) rt_wake(w->co, 0);
}

/* ------------------------------------------------------------------------ */
/* Semaphore                                                                */
/* ------------------------------------------------------------------------ */

void aco_rt_sem_init(aco_rt_sem_t* s, int64_t count) {
    memset(s, 0, sizeof(*s));
    s->count_ = count;
}

int aco_rt_sem_wait(aco_rt_sem_t* s, int64_t deadline) {
    aco_rt_co_t* me = rt_self();
    if (me == NULL) return -EPERM;
    if (me->flags & RT_CANCELLED) return -ECANCELED;
    if (s->count_ > 0) {
        s->count_--;
        return 0;
    }
    int r = rt_may_block(me, deadline);
    if (r) return r;
    rt_wq_push(&s->q_, &me->w);
    return rt_park(me, "sem", s, deadline, rt_abort_waitq);
}

int aco_rt_sem_trywait(aco_rt_sem_t* s) {
    if (s->count_ <= 0) return -EAGAIN;
    s->count_--;
    return 0;
}

void aco_rt_sem_post(aco_rt_sem_t* s) {
    rt_waiter_t* w = rt_wq_pop(&s->q_);
    if (w) rt_wake(w->co, 0);       /* the unit goes straight to it */
    else s->count_++;
}

/* ------------------------------------------------------------------------ */
/* Wait group                                                               */
/* ------------------------------------------------------------------------ */

void aco_rt_wg_init(aco_rt_wg_t* wg) { memset(wg, 0, sizeof(*wg)); }

int aco_rt_wg_add(aco_rt_wg_t* wg, int64_t n) {
    if (n < 0 ? (n == INT64_MIN || wg->count_ < -n) : wg->count_ > INT64_MAX - n)
        return -EINVAL;
    wg->count_ += n;
    if (wg->count_ == 0) {
        rt_waiter_t* w;
        while ((w = rt_wq_pop(&wg->q_)) != NULL) rt_wake(w->co, 0);
    }
    return 0;
}

int aco_rt_wg_done(aco_rt_wg_t* wg) { return aco_rt_wg_add(wg, -1); }

int aco_rt_wg_wait(aco_rt_wg_t* wg, int64_t deadline) {
    aco_rt_co_t* me = rt_self();
    if (me == NULL) return -EPERM;
    if (me->flags & RT_CANCELLED) return -ECANCELED;
    if (wg->count_ == 0) return 0;
    int r = rt_may_block(me, deadline);
    if (r) return r;
    rt_wq_push(&wg->q_, &me->w);
    return rt_park(me, "waitgroup", wg, deadline, rt_abort_waitq);
}
