/* steal.c - what the threads of a pool exchange: spawns batched to a
 * sibling (outboxes), new cos that a sibling may take (stealing), and
 * records given back for those taken.
 *
 * Outboxes.  A co of a pool thread that spawns on a sibling (another
 * thread's scheduler of the same pool) does not push each spawn to the
 * sibling's inbox: they wait in the outbox for that sibling, and go as
 * one chain when the co stops running or the outbox is full.
 *
 * Stealing.  A pool thread's new cos (aco_rt_pool_spawn from the pool)
 * wait in its newq, unstarted; the thread starts them when it has nothing
 * else, an idle sibling takes half.  While in a newq a co is counted in
 * newq_n, then in its taker's sent until it is started (load):
 * aco_rt_pool_wait reads them in that order.
 *
 * The single-thread build (ACO_RT_NO_THREADS) has no pool: no stealing
 * (rt_impl.h has the stubs), and outboxes stay empty.
 */
#define _GNU_SOURCE
#include "rt_impl.h"

#include <stdlib.h>

/* ------------------------------------------------------------------------ */
/* Outboxes                                                                 */
/* ------------------------------------------------------------------------ */

/* Spawns from one pool thread to another go out in batches: kept in the
 * sender's outbox for the target until the spawning co parks or yields (the
 * loop flushes after each co) or RT_OUTBOX_MAX are waiting, then pushed as
 * one chain: one swap of the target's inbox tail, one wake, instead of one
 * per co (each moves the inbox's cache line between the CPUs). */
#define RT_OUTBOX_MAX 32

static void outbox_flush(aco_rt_sched_t* me, unsigned t) {
    rt_outbox_t* o = &me->outbox[t];
    aco_rt_sched_t* s = o->to;
    __atomic_store_n(&o->last->next, NULL, __ATOMIC_RELAXED);
    rt_msg_t* prev = __atomic_exchange_n(&s->inbox.tail, o->last, __ATOMIC_SEQ_CST);
    __atomic_store_n(&prev->next, o->first, __ATOMIC_RELEASE);
    o->first = o->last = NULL;
    o->n = 0;
    rt_notify(s);
}

static void newq_publish(aco_rt_sched_t* s);

void rt_outbox_flush_all(aco_rt_sched_t* me) {
    for (unsigned t = 0; t < me->noutbox; t++)
        if (me->outbox[t].n) outbox_flush(me, t);
    if (me->nq_priv_n) newq_publish(me);
    me->out_pending = 0;
}

#ifndef ACO_RT_NO_THREADS
void rt_send_spawn(aco_rt_sched_t* s, rt_msg_t* m) {
    aco_rt_sched_t* me = rt_tls_sched;
    if (me == NULL || me->outbox == NULL || s->pool != me->pool || s->pool_idx >= me->noutbox) {
        rt_send(s, m, RT_MSG_SPAWN);
        return;
    }
    rt_outbox_t* o = &me->outbox[s->pool_idx];
    rt_container_of(m, aco_rt_co_t, msg)->msg_kind = RT_MSG_SPAWN;
    __atomic_store_n(&m->next, NULL, __ATOMIC_RELAXED);
    o->to = s;
    if (o->last) o->last->next = m; else o->first = m;
    o->last = m;
    me->out_pending = 1;
    if (++o->n >= RT_OUTBOX_MAX) outbox_flush(me, s->pool_idx);
}

/* ------------------------------------------------------------------------ */
/* Stealing                                                                 */
/* ------------------------------------------------------------------------ */

/* Ask for the lines of record co that a spawn writes (NULL: nothing). */
static inline void rec_prefetch(const aco_rt_co_t* co) {
    if (co == NULL) return;
    for (size_t off = 0; off < sizeof(*co); off += 64) __builtin_prefetch((const char*)co + off, 1);
}

/* A record without a libaco co (whoever starts it makes one on its own
 * share stacks), with room for priv bytes: one that a thief gave back, or
 * one of the finished records kept here, its co destroyed in place (cheap:
 * nothing to free), else a new one.  Recycling matters: a record made here
 * and freed by the thief, at every spawn, made both threads wait on
 * malloc's arena lock. */
static aco_rt_co_t* rec_bare(aco_rt_sched_t* s, aco_rt_fn_t fn, size_t priv,
                             const aco_rt_spawn_opts_t* opts) {
    aco_rt_co_t* co;
    if (opts && (opts->standalone || opts->stack_size > s->stack_size)) goto fresh;
    if (s->bare == NULL && __atomic_load_n(&s->gifts, __ATOMIC_RELAXED))
        s->bare = __atomic_exchange_n(&s->gifts, NULL, __ATOMIC_ACQUIRE);
    if ((co = s->bare) != NULL) {
        s->bare = co->next;
        rec_prefetch(co->next);     /* given back by another thread: cold */
        if (co->priv_cap < rt_priv_room(priv) || !rt_rec_save_ok(co, opts, 0)) {
            /* Too small for this spawn: it goes (the list must move on,
             * or what thieves give back would pile up behind it). */
            rt_rec_free(co);
            goto fresh;
        }
    } else if ((co = s->free_recs) != NULL && co->priv_cap >= rt_priv_room(priv) &&
               rt_rec_save_ok(co, opts, 0)) {
        s->free_recs = co->next;
        s->nfree--;
        aco_destroy(rt_aco(co));
    } else {
        goto fresh;
    }
    co->res = 0;
    co->io_abort = 0;
    co->wait_obj = NULL;
    co->cancel_sent = 0;
    co->joiner = NULL;
    co->started = 0;
    co->cancel_req = 0;
    if (priv) memset(rt_priv(co), 0, priv);
    return co;
fresh:
    if ((co = rt_rec_new(priv, rt_save_size(s, fn, opts))) != NULL) rt_rec_init(s, co);
    return co;
}

/* Thief s took n records of victim's: it owes victim as many, and pays
 * them back out of its own kept records (their cos destroyed, one swap of a
 * chain) now and, for what it lacks now, before it next goes idle.  The
 * records go round, and neither thread keeps allocating what the other
 * frees; a thread's stock stays what it made (one that only takes gives all
 * back, one that only spawns gets all back).  What is owed to each
 * sibling is kept beside the outbox for it (a thread steals only with
 * outboxes). */
static void rec_pay(aco_rt_sched_t* s, aco_rt_sched_t* victim, uint32_t n) {
    rt_outbox_t* o = &s->outbox[victim->pool_idx];
    aco_rt_co_t *first = NULL, *last = NULL;
    o->owed += n;
    s->owed += n;
    while (o->owed && s->free_recs) {
        o->owed--;
        s->owed--;
        aco_rt_co_t* co = s->free_recs;
        s->free_recs = co->next;
        s->nfree--;
        aco_destroy(rt_aco(co));
        co->s = victim;
        co->next = first;
        first = co;
        if (last == NULL) last = co;
    }
    if (first == NULL) return;
    aco_rt_co_t* head = __atomic_load_n(&victim->gifts, __ATOMIC_RELAXED);
    do last->next = head;
    while (!__atomic_compare_exchange_n(&victim->gifts, &head, first, 1,
                                        __ATOMIC_RELEASE, __ATOMIC_RELAXED));
}

/* Before going idle: pay every sibling what is owed to it, as far as the
 * kept records go. */
void rt_rec_pay_all(aco_rt_sched_t* s) {
    for (unsigned i = 0; i < s->noutbox && s->owed && s->free_recs; i++)
        if (s->outbox[i].owed) rec_pay(s, aco_rt_pool_sched(s->pool, i), 0);
}

aco_rt_co_t* rt_spawn_stealable(aco_rt_fn_t fn, void* arg, const aco_rt_spawn_opts_t* opts) {
    aco_rt_sched_t* s = rt_tls_sched;
    size_t priv = opts ? opts->private_size : 0;
    aco_rt_co_t* co = rec_bare(s, fn, priv, opts);
    if (co == NULL) return NULL;
    if (rt_rec_opts(co, opts, opts ? opts->stack_size : 0, NULL) < 0) {
        rt_rec_free(co);
        errno = ENOMEM;
        return NULL;
    }
    rt_priv_set_size(co, priv);
    co->fn = fn;
    co->w.slot = arg;                   /* until its libaco co is made */
    co->flags = RT_REMOTE;
    if (opts && (opts->standalone || opts->stack_size > s->stack_size)) co->flags |= RT_STANDALONE;
    co->state = RT_READY;
    /* Kept to this thread first, published by 32 or when the spawning co
     * stops running (run_co): a thief sees batches, and the newq's cache
     * line does not move at every spawn. */
    co->next = NULL;
    if (s->nq_priv_tail) s->nq_priv_tail->next = co; else s->nq_priv_head = co;
    s->nq_priv_tail = co;
    s->out_pending = 1;
    if (++s->nq_priv_n >= 32) newq_publish(s);
    return co;
}

static void newq_publish(aco_rt_sched_t* s) {
    rt_lock(&s->newq_lock);
    int was_empty = s->nq_count == 0;
    if (s->nq_count < RT_NQ_BATCHES) {
        rt_nq_batch_t* b = &s->nq[(s->nq_first + s->nq_count++) % RT_NQ_BATCHES];
        b->head = s->nq_priv_head;
        b->tail = s->nq_priv_tail;
        b->n = s->nq_priv_n;
    } else {                    /* the ring is full: the last batch grows */
        rt_nq_batch_t* b = &s->nq[(s->nq_first + s->nq_count - 1) % RT_NQ_BATCHES];
        b->tail->next = s->nq_priv_head;
        b->tail = s->nq_priv_tail;
        b->n += s->nq_priv_n;
    }
    __atomic_store_n(&s->newq_n, s->newq_n + s->nq_priv_n, __ATOMIC_SEQ_CST);
    rt_unlock(&s->newq_lock);
    s->nq_priv_head = s->nq_priv_tail = NULL;
    s->nq_priv_n = 0;
    if (was_empty) {
        /* work for a sleeping sibling (it looks at newq_n before it sleeps) */
        aco_rt_pool_t* p = s->pool;
        unsigned n = s->noutbox;
        for (unsigned i = 1; i < n; i++) {
            aco_rt_sched_t* t = aco_rt_pool_sched(p, (s->pool_idx + i) % n);
            if (t && __atomic_load_n(&t->sleeping, __ATOMIC_SEQ_CST)) { rt_notify(t); break; }
        }
    }
}

/* Take cos from victim's newq, oldest first, and start them here: all of
 * them (the owner), or about half (a thief): half of the batches, whole,
 * so that under the lock only the ring moves and no record is touched; of
 * a lone batch, its first half (up to 32 records walked under the lock). */
unsigned rt_take_new(aco_rt_sched_t* s, aco_rt_sched_t* victim, int all) {
    rt_nq_batch_t got[RT_NQ_BATCHES];
    uint32_t nb = 0, n = 0;
    rt_lock(&victim->newq_lock);
    /* A pool cancel asked of victim and not yet done there
     * (aco_rt_pool_wait(CANCEL)): the cos taken now were spawned before it,
     * so they are cancelled here as victim would have cancelled them.  (A
     * thief that had done its own cancel already would miss them:
     * rt_cancel_all marks only what is in the newq while it looks, under
     * this lock.) */
    int cancel = __atomic_load_n(&victim->cancel_gen, __ATOMIC_SEQ_CST) !=
                 __atomic_load_n(&victim->cancel_seen, __ATOMIC_SEQ_CST);
    uint32_t want = all ? victim->nq_count : victim->nq_count / 2;
    while (nb < want) {
        got[nb] = victim->nq[victim->nq_first];
        n += got[nb++].n;
        victim->nq_first = (victim->nq_first + 1) % RT_NQ_BATCHES;
        victim->nq_count--;
    }
    if (nb == 0 && victim->nq_count == 1) {
        rt_nq_batch_t* b = &victim->nq[victim->nq_first];
        uint32_t k = (b->n + 1) / 2 < 32 ? (b->n + 1) / 2 : 32;
        aco_rt_co_t* last = b->head;
        for (uint32_t i = 1; i < k; i++) last = last->next;
        got[0] = (rt_nq_batch_t){b->head, last, k};
        nb = 1;
        n = k;
        if ((b->n -= k) == 0) {
            victim->nq_first = (victim->nq_first + 1) % RT_NQ_BATCHES;
            victim->nq_count--;
        } else {
            b->head = last->next;
        }
    }
    if (n) {
        if (victim != s) __atomic_fetch_add(&s->mv_begun, 1u, __ATOMIC_SEQ_CST);
        __atomic_fetch_add(&s->sent, n, __ATOMIC_SEQ_CST);
        __atomic_store_n(&victim->newq_n, victim->newq_n - n, __ATOMIC_SEQ_CST);
        if (victim != s) __atomic_fetch_add(&s->mv_ended, 1u, __ATOMIC_SEQ_CST);
    }
    rt_unlock(&victim->newq_lock);
    for (uint32_t b = 0; b < nb; b++) {
        aco_rt_co_t* c = got[b].head;
        for (uint32_t i = got[b].n; i--; ) {
            aco_rt_co_t* next = c->next;
            if (victim != s && i) rec_prefetch(next);
            c->s = s;           /* published to others by started (rt_spawn_arrived) */
            if (cancel) __atomic_store_n(&c->cancel_req, (uint8_t)1, __ATOMIC_SEQ_CST);
            rt_spawn_arrived(s, c);
            c = next;
        }
    }
    if (n && victim != s) rec_pay(s, victim, n);
    return n;
}

/* Is there work in a sibling's newq? */
int rt_sibling_work(aco_rt_sched_t* s) {
    for (unsigned i = 1; i < s->noutbox; i++) {
        aco_rt_sched_t* t = aco_rt_pool_sched(s->pool, (s->pool_idx + i) % s->noutbox);
        if (t && __atomic_load_n(&t->newq_n, __ATOMIC_SEQ_CST)) return 1;
    }
    return 0;
}

/* Idle: take half of the first sibling's newq that has some. */
unsigned rt_steal(aco_rt_sched_t* s) {
    for (unsigned i = 1; i < s->noutbox; i++) {
        aco_rt_sched_t* t = aco_rt_pool_sched(s->pool, (s->pool_idx + i) % s->noutbox);
        uint32_t n = t ? __atomic_load_n(&t->newq_n, __ATOMIC_SEQ_CST) : 0;
        if (n) return rt_take_new(s, t, 0);
    }
    return 0;
}
#else
static void newq_publish(aco_rt_sched_t* s) { (void)s; }
#endif
