/* chan.c - bounded channels of fixed-size elements, and select.
 *
 * A channel is a ring of cap elements plus two wait queues.  At most one of
 * them is non-empty: senders wait only while the ring is full, receivers
 * only while it is empty.  An element never moves through a co's stack
 * while that co is blocked: a blocked sender's element waits in the
 * sender's heap mailbox (rt_extra), and a sender that finds a receiver
 * waiting writes into the receiver's mailbox, which the receiver copies out
 * once it runs (the share-stack rule).
 *
 * Select puts one waiter per case on the channels' queues (the waiters are
 * in the co's rt_extra, allocated once and kept); the first case to go on
 * takes the others off their queues before waking the co with its index.
 */
#include "rt_impl.h"

#include <stdlib.h>

struct aco_rt_chan {
    size_t         elem_size;
    size_t         cap;
    size_t         head;        /* index of the oldest element */
    size_t         len;
    int            closed;
    aco_rt_waitq_t sendq;
    aco_rt_waitq_t recvq;
    char*          ring;
};

aco_rt_chan_t* aco_rt_chan_new(size_t elem_size, size_t cap) {
    if (elem_size == 0 || (cap && elem_size > SIZE_MAX / cap)) { errno = EINVAL; return NULL; }
    aco_rt_chan_t* ch = calloc(1, sizeof(*ch));
    if (ch == NULL) return NULL;
    ch->elem_size = elem_size;
    ch->cap = cap;
    if (cap && (ch->ring = malloc(elem_size * cap)) == NULL) { free(ch); return NULL; }
    return ch;
}

int aco_rt_chan_free(aco_rt_chan_t* ch) {
    if (ch == NULL) return 0;
    if (!rt_wq_empty(&ch->sendq) || !rt_wq_empty(&ch->recvq)) return -EBUSY;
    free(ch->ring);
    free(ch);
    return 0;
}

size_t aco_rt_chan_len(const aco_rt_chan_t* ch) { return ch->len; }

static inline void* ring_at(aco_rt_chan_t* ch, size_t i) {
    size_t k = ch->head + i;
    if (k >= ch->cap) k -= ch->cap;
    return ch->ring + k * ch->elem_size;
}

/* Wake the co of waiter w, which won with result res: for a select waiter,
 * its other cases leave their queues and the co learns the index. */
static inline void fire(rt_waiter_t* w, int err) {
    aco_rt_co_t* co = w->co;
    if (w->idx < 0) { rt_wake(co, err); return; }
    rt_extra_t* x = co->x;
    for (int i = 0; i < x->selw_cap; i++)
        if (x->selw[i].q) rt_wq_remove(&x->selw[i]);
    x->sel_err = err;
    rt_wake(co, w->idx);
}

/* Waiting receiver gets elem; a waiting sender gives its element: both
 * done without blocking.  Return 1 if it happened. */
static inline int send_now(aco_rt_chan_t* ch, const void* elem) {
    rt_waiter_t* w = rt_wq_pop(&ch->recvq);
    if (w) {
        rt_copy(w->slot, elem, ch->elem_size);
        fire(w, 0);
        return 1;
    }
    if (ch->len < ch->cap) {
        rt_copy(ring_at(ch, ch->len), elem, ch->elem_size);
        ch->len++;
        return 1;
    }
    return 0;
}

static inline int recv_now(aco_rt_chan_t* ch, void* elem) {
    if (ch->len) {
        rt_copy(elem, ring_at(ch, 0), ch->elem_size);
        ch->head = ch->head + 1 == ch->cap ? 0 : ch->head + 1;
        ch->len--;
        /* room now: the first waiting sender's element joins the ring */
        rt_waiter_t* w = rt_wq_pop(&ch->sendq);
        if (w) {
            rt_copy(ring_at(ch, ch->len), w->slot, ch->elem_size);
            ch->len++;
            fire(w, 0);
        }
        return 1;
    }
    rt_waiter_t* w = rt_wq_pop(&ch->sendq);     /* rendezvous */
    if (w) {
        rt_copy(elem, w->slot, ch->elem_size);
        fire(w, 0);
        return 1;
    }
    return 0;
}

int aco_rt_chan_send(aco_rt_chan_t* ch, const void* elem, int64_t deadline) {
    aco_rt_co_t* me = rt_self();
    if (rt_unlikely(me == NULL)) return -EPERM;
    if (rt_unlikely(me->flags & RT_CANCELLED)) return -ECANCELED;
    if (ch->closed) return -EPIPE;
    if (send_now(ch, elem)) return 0;
    int r = rt_may_block(me, deadline);
    if (r) return r;
    rt_extra_t* x = rt_extra(me, ch->elem_size);
    if (x == NULL) return -ENOMEM;
    rt_copy(x->buf, elem, ch->elem_size);
    me->w.slot = x->buf;
    rt_wq_push(&ch->sendq, &me->w);
    return rt_park(me, "chan_send", ch, deadline, rt_abort_waitq);
}

int aco_rt_chan_recv(aco_rt_chan_t* ch, void* elem, int64_t deadline) {
    aco_rt_co_t* me = rt_self();
    if (rt_unlikely(me == NULL)) return -EPERM;
    if (rt_unlikely(me->flags & RT_CANCELLED)) return -ECANCELED;
    if (recv_now(ch, elem)) return 0;
    if (ch->closed) return -EPIPE;
    int r = rt_may_block(me, deadline);
    if (r) return r;
    rt_extra_t* x = rt_extra(me, ch->elem_size);
    if (x == NULL) return -ENOMEM;
    me->w.slot = x->buf;
    rt_wq_push(&ch->recvq, &me->w);
    r = rt_park(me, "chan_recv", ch, deadline, rt_abort_waitq);
    if (r == 0) rt_copy(elem, x->buf, ch->elem_size);
    return r;
}

int aco_rt_chan_close(aco_rt_chan_t* ch) {
    if (ch->closed) return -EPIPE;
    ch->closed = 1;
    rt_waiter_t* w;
    while ((w = rt_wq_pop(&ch->sendq)) != NULL) fire(w, -EPIPE);
    while ((w = rt_wq_pop(&ch->recvq)) != NULL) fire(w, -EPIPE);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Select                                                                   */
/* ------------------------------------------------------------------------ */

static void select_abort(aco_rt_co_t* co, int err) {
    rt_extra_t* x = co->x;
    for (int i = 0; i < x->selw_cap; i++)
        if (x->selw[i].q) rt_wq_remove(&x->selw[i]);
    rt_wake(co, err);
}

int aco_rt_chan_select(aco_rt_case_t* cases, int n, int* err, int64_t deadline) {
    aco_rt_co_t* me = rt_self();
    if (me == NULL) return -EPERM;
    if (cases == NULL || n < 1) return -EINVAL;
    if (me->flags & RT_CANCELLED) return -ECANCELED;
    size_t send_bytes = 0, recv_max = 0;
    for (int i = 0; i < n; i++) {
        aco_rt_case_t* c = &cases[i];
        if (c->ch == NULL || c->elem == NULL || (c->op != ACO_RT_SEND && c->op != ACO_RT_RECV))
            return -EINVAL;
        if (c->op == ACO_RT_SEND) send_bytes += c->ch->elem_size;
        else if (c->ch->elem_size > recv_max) recv_max = c->ch->elem_size;
    }
    /* A case that can go on now, in order. */
    for (int i = 0; i < n; i++) {
        aco_rt_case_t* c = &cases[i];
        if (c->op == ACO_RT_SEND) {
            if (c->ch->closed) { if (err) *err = -EPIPE; return i; }
            if (send_now(c->ch, c->elem)) { if (err) *err = 0; return i; }
        } else {
            if (recv_now(c->ch, c->elem)) { if (err) *err = 0; return i; }
            if (c->ch->closed) { if (err) *err = -EPIPE; return i; }
        }
    }
    int r = rt_may_block(me, deadline);
    if (r) return r;
    /* Wait on every case: send elements and the receive slot in the heap. */
    rt_extra_t* x = rt_extra(me, send_bytes + recv_max);
    if (x == NULL) return -ENOMEM;
    if (x->selw_cap < n) {
        rt_waiter_t* ws = realloc(x->selw, (size_t)n * sizeof(*ws));
        if (ws == NULL) return -ENOMEM;
        x->selw = ws;
        x->selw_cap = n;
    }
    memset(x->selw, 0, (size_t)x->selw_cap * sizeof(*x->selw));
    char* p = (char*)x->buf;
    char* rslot = p + send_bytes;
    for (int i = 0; i < n; i++) {
        aco_rt_case_t* c = &cases[i];
        rt_waiter_t* w = &x->selw[i];
        w->co = me;
        w->idx = i;
        if (c->op == ACO_RT_SEND) {
            rt_copy(p, c->elem, c->ch->elem_size);
            w->slot = p;
            p += c->ch->elem_size;
            rt_wq_push(&c->ch->sendq, w);
        } else {
            w->slot = rslot;
            rt_wq_push(&c->ch->recvq, w);
        }
    }
    r = rt_park(me, "select", cases, deadline, select_abort);
    if (r < 0) return r;
    if (err) *err = x->sel_err;
    if (cases[r].op == ACO_RT_RECV && x->sel_err == 0)
        rt_copy(cases[r].elem, rslot, cases[r].ch->elem_size);
    return r;
}
