/* test_chan: channels and select.
 *
 *  - buffered FIFO (cap 1, 3, 100): order, aco_rt_chan_len, deadline 0 on
 *    full / empty; several senders keep their own order;
 *  - rendezvous (cap 0): send returns only once a receiver has the element;
 *  - close: buffered elements drain, then -EPIPE; blocked senders (their
 *    elements never delivered) and receivers get -EPIPE; close twice and
 *    send after close: -EPIPE; chan_free with a waiter: -EBUSY;
 *  - deadlines and cancel on send and recv: an element is delivered iff its
 *    send returned 0, exactly once (random deadlines, both sides);
 *  - 4 KiB elements with checksums;
 *  - select: first ready case in order, woken by a sender / receiver on any
 *    of its channels, mixed cases, closed channel (index, err -EPIPE),
 *    deadline, cancel, -EINVAL; after it returned its other cases are off
 *    their queues (a later send / receive on them is not swallowed);
 *    300 cases of two element sizes; its channels freed once a case fired
 *    (the one that fired, one whose stale waiter a close dropped) are not
 *    touched when it runs on;
 *    a random select stress that conserves every element;
 *  - elements no memory holds: a select whose sizes' sum wraps round, a
 *    send, receive or select of one past half the address space: -ENOMEM;
 *  - the share-stack hazard: 64 cos on the default share stacks send and
 *    receive elements in their own stack frames (plain calls and select),
 *    with deep recursion between operations overwriting the stacks; every
 *    element checked (sender, sequence, checksum), each received once.
 */
#include "rt_test.h"

#include <stdint.h>

/* ------------------------------------------------------------------------ */
/* Buffered and rendezvous                                                  */
/* ------------------------------------------------------------------------ */

typedef struct {
    aco_rt_chan_t* ch;
    int id;
    int n;
    int rc;
} ep_t;

static void seq_sender(void* arg) {
    ep_t* e = (ep_t*)arg;
    for (int i = 0; i < e->n; i++) {
        int v = e->id * 100000 + i;
        CHECK_EQ(aco_rt_chan_send(e->ch, &v, -1), 0);
        if (i % 5 == 0) CHECK_EQ(aco_rt_yield(), 0);
    }
}

static void fifo_main(void* arg) {
    (void)arg;
    size_t caps[] = {1, 3, 100};
    for (size_t k = 0; k < 3; k++) {
        size_t cap = caps[k];
        aco_rt_chan_t* ch = aco_rt_chan_new(sizeof(int), cap);
        CHECK(ch != NULL);
        /* fill without a receiver */
        for (size_t i = 0; i < cap; i++) {
            int v = (int)i;
            CHECK_EQ(aco_rt_chan_send(ch, &v, 0), 0);
            CHECK_EQ(aco_rt_chan_len(ch), i + 1);
        }
        int v = -1;
        CHECK_EQ(aco_rt_chan_send(ch, &v, 0), -ETIMEDOUT);
        int64_t d = aco_rt_now() + MS;
        CHECK_EQ(aco_rt_chan_send(ch, &v, d), -ETIMEDOUT);
        CHECK_GE(aco_rt_now(), d);
        CHECK_EQ(aco_rt_chan_len(ch), cap);
        for (size_t i = 0; i < cap; i++) {
            CHECK_EQ(aco_rt_chan_recv(ch, &v, 0), 0);
            CHECK_EQ(v, (int)i);
        }
        CHECK_EQ(aco_rt_chan_len(ch), 0);
        CHECK_EQ(aco_rt_chan_recv(ch, &v, 0), -ETIMEDOUT);
        d = aco_rt_now() + MS;
        CHECK_EQ(aco_rt_chan_recv(ch, &v, d), -ETIMEDOUT);
        CHECK_GE(aco_rt_now(), d);
        /* 4 senders, one receiver: each sender's order kept, all arrive */
        ep_t e[4];
        aco_rt_co_t* c[4];
        for (int i = 0; i < 4; i++) {
            e[i] = (ep_t){ch, i, 300, 0};
            c[i] = aco_rt_spawn(NULL, seq_sender, &e[i]);
        }
        int next[4] = {0, 0, 0, 0};
        for (int i = 0; i < 1200; i++) {
            CHECK_EQ(aco_rt_chan_recv(ch, &v, -1), 0);
            int id = v / 100000, seq = v % 100000;
            CHECK(id >= 0 && id < 4);
            CHECK_EQ(seq, next[id]);
            next[id]++;
            CHECK_LE(aco_rt_chan_len(ch), cap);
            if (i % 7 == 0) CHECK_EQ(aco_rt_yield(), 0);
        }
        for (int i = 0; i < 4; i++) CHECK_EQ(aco_rt_join(c[i], -1), 0);
        CHECK_EQ(aco_rt_chan_free(ch), 0);
    }
}

static int rv_sent;
static void rv_sender(void* arg) {
    aco_rt_chan_t* ch = (aco_rt_chan_t*)arg;
    for (int i = 0; i < 10; i++) {
        int v = 1000 + i;
        CHECK_EQ(aco_rt_chan_send(ch, &v, -1), 0);
        rv_sent = i + 1;
    }
}

static void rendezvous_main(void* arg) {
    (void)arg;
    aco_rt_chan_t* ch = aco_rt_chan_new(sizeof(int), 0);
    CHECK(ch != NULL);
    int v = 5;
    CHECK_EQ(aco_rt_chan_send(ch, &v, 0), -ETIMEDOUT);      /* nobody there */
    CHECK_EQ(aco_rt_chan_len(ch), 0);
    rv_sent = 0;
    aco_rt_co_t* c = aco_rt_spawn(NULL, rv_sender, ch);
    for (int i = 0; i < 10; i++) {
        /* the sender cannot finish its send before we receive */
        for (int k = 0; k < 3; k++) CHECK_EQ(aco_rt_yield(), 0);
        CHECK_EQ(rv_sent, i);
        CHECK_EQ(aco_rt_chan_len(ch), 0);
        CHECK_EQ(aco_rt_chan_recv(ch, &v, (i & 1) ? 0 : -1), 0);   /* it waits: 0 works */
        CHECK_EQ(v, 1000 + i);
        CHECK_EQ(aco_rt_yield(), 0);
        CHECK_EQ(rv_sent, i + 1);
    }
    CHECK_EQ(aco_rt_join(c, -1), 0);
    CHECK_EQ(aco_rt_chan_free(ch), 0);
}

/* ------------------------------------------------------------------------ */
/* Close                                                                    */
/* ------------------------------------------------------------------------ */

static void blocked_sender(void* arg) {
    ep_t* e = (ep_t*)arg;
    int v = 777000 + e->id;
    e->rc = aco_rt_chan_send(e->ch, &v, -1);
}
static void blocked_receiver(void* arg) {
    ep_t* e = (ep_t*)arg;
    int v = -1;
    e->rc = aco_rt_chan_recv(e->ch, &v, -1);
    if (e->rc == 0) e->n = v;
}

static void close_main(void* arg) {
    (void)arg;
    for (size_t cap = 0; cap < 4; cap += 3) {
        aco_rt_chan_t* ch = aco_rt_chan_new(sizeof(int), cap);
        for (int i = 0; i < (int)cap; i++) CHECK_EQ(aco_rt_chan_send(ch, &i, 0), 0);
        ep_t e[3];
        aco_rt_co_t* c[3];
        for (int i = 0; i < 3; i++) {
            e[i] = (ep_t){ch, i, 0, 1};
            c[i] = aco_rt_spawn(NULL, blocked_sender, &e[i]);
        }
        CHECK_EQ(aco_rt_yield(), 0);
        for (int i = 0; i < 3; i++) CHECK_EQ(e[i].rc, 1);
        CHECK_EQ(aco_rt_chan_free(ch), -EBUSY);
        CHECK_EQ(aco_rt_chan_close(ch), 0);
        CHECK_EQ(aco_rt_chan_close(ch), -EPIPE);
        int v = 1;
        CHECK_EQ(aco_rt_chan_send(ch, &v, -1), -EPIPE);
        CHECK_EQ(aco_rt_chan_send(ch, &v, 0), -EPIPE);
        for (int i = 0; i < 3; i++) {
            CHECK_EQ(aco_rt_join(c[i], -1), 0);
            CHECK_EQ(e[i].rc, -EPIPE);
        }
        /* what was buffered drains, the blocked senders' elements do not come */
        for (int i = 0; i < (int)cap; i++) {
            CHECK_EQ(aco_rt_chan_recv(ch, &v, -1), 0);
            CHECK_EQ(v, i);
        }
        CHECK_EQ(aco_rt_chan_recv(ch, &v, -1), -EPIPE);
        CHECK_EQ(aco_rt_chan_recv(ch, &v, 0), -EPIPE);
        CHECK_EQ(aco_rt_chan_free(ch), 0);

        /* blocked receivers */
        ch = aco_rt_chan_new(sizeof(int), cap);
        for (int i = 0; i < 3; i++) {
            e[i] = (ep_t){ch, i, -5, 1};
            c[i] = aco_rt_spawn(NULL, blocked_receiver, &e[i]);
        }
        CHECK_EQ(aco_rt_yield(), 0);
        v = 42;
        CHECK_EQ(aco_rt_chan_send(ch, &v, -1), 0);      /* goes to the first */
        CHECK_EQ(aco_rt_chan_free(ch), -EBUSY);
        CHECK_EQ(aco_rt_chan_close(ch), 0);
        for (int i = 0; i < 3; i++) CHECK_EQ(aco_rt_join(c[i], -1), 0);
        CHECK_EQ(e[0].rc, 0);
        CHECK_EQ(e[0].n, 42);
        CHECK_EQ(e[1].rc, -EPIPE);
        CHECK_EQ(e[2].rc, -EPIPE);
        CHECK_EQ(e[1].n, -5);
        CHECK_EQ(aco_rt_chan_free(ch), 0);
    }
    errno = 0;
    CHECK(aco_rt_chan_new(0, 4) == NULL);
    CHECK_EQ(errno, EINVAL);
    CHECK(aco_rt_chan_new(SIZE_MAX / 2, 4) == NULL);
}

/* ------------------------------------------------------------------------ */
/* Deadlines and cancel: exactly what was sent is received                  */
/* ------------------------------------------------------------------------ */

#define DL_N 3000
static aco_rt_chan_t* dl_ch;
static uint8_t dl_sent[DL_N], dl_recv[DL_N];
static int dl_senders_done;

static void dl_sender(void* arg) {
    int id = (int)(intptr_t)arg;
    uint64_t rng = 99 + (uint64_t)id;
    for (int i = id; i < DL_N; i += 4) {
        int64_t d;
        switch (test_rand(&rng) % 4) {
        case 0: d = 0; break;
        case 1: d = -1; break;
        default: d = aco_rt_now() + (int64_t)(test_rand(&rng) % 200000); break;
        }
        int r = aco_rt_chan_send(dl_ch, &i, d);
        if (r == 0) dl_sent[i] = 1;
        else {
            CHECK_EQ(r, -ETIMEDOUT);
            if (d > 0) CHECK_GE(aco_rt_now(), d);
        }
        if (test_rand(&rng) % 3 == 0) CHECK_EQ(aco_rt_yield(), 0);
    }
    dl_senders_done++;
}

static void dl_receiver(void* arg) {
    uint64_t rng = 7 + (uint64_t)(intptr_t)arg;
    for (;;) {
        int v = -1;
        int64_t d = (test_rand(&rng) % 2) ? 0 : aco_rt_now() + (int64_t)(test_rand(&rng) % 300000);
        int r = aco_rt_chan_recv(dl_ch, &v, d);
        if (r == -EPIPE) return;
        if (r == -ETIMEDOUT) {
            if (d > 0) CHECK_GE(aco_rt_now(), d);
            continue;
        }
        CHECK_EQ(r, 0);
        CHECK(v >= 0 && v < DL_N);
        CHECK_EQ(dl_recv[v], 0);
        dl_recv[v] = 1;
        if (test_rand(&rng) % 4 == 0) CHECK_EQ(aco_rt_sleep((int64_t)(test_rand(&rng) % 50000)), 0);
    }
}

/* cancel a blocked sender / receiver: nothing transferred */
static void cancel_part(void) {
    aco_rt_chan_t* ch = aco_rt_chan_new(sizeof(int), 0);
    ep_t e = {ch, 1, 0, 1};
    aco_rt_co_t* c = aco_rt_spawn(NULL, blocked_sender, &e);
    CHECK_EQ(aco_rt_yield(), 0);
    CHECK_EQ(aco_rt_cancel(c), 0);
    int v;
    CHECK_EQ(aco_rt_chan_recv(ch, &v, 0), -ETIMEDOUT);      /* it left */
    CHECK_EQ(aco_rt_join(c, -1), 0);
    CHECK_EQ(e.rc, -ECANCELED);
    e = (ep_t){ch, 1, -5, 1};
    c = aco_rt_spawn(NULL, blocked_receiver, &e);
    CHECK_EQ(aco_rt_yield(), 0);
    CHECK_EQ(aco_rt_cancel(c), 0);
    v = 3;
    CHECK_EQ(aco_rt_chan_send(ch, &v, 0), -ETIMEDOUT);      /* it left */
    CHECK_EQ(aco_rt_join(c, -1), 0);
    CHECK_EQ(e.rc, -ECANCELED);
    CHECK_EQ(e.n, -5);
    CHECK_EQ(aco_rt_chan_free(ch), 0);
}

static void deadline_main(void* arg) {
    (void)arg;
    cancel_part();
    for (size_t cap = 0; cap < 3; cap += 2) {
        dl_ch = aco_rt_chan_new(sizeof(int), cap);
        memset(dl_sent, 0, sizeof(dl_sent));
        memset(dl_recv, 0, sizeof(dl_recv));
        dl_senders_done = 0;
        aco_rt_co_t* s[4];
        aco_rt_co_t* r[3];
        for (int i = 0; i < 4; i++) s[i] = aco_rt_spawn(NULL, dl_sender, (void*)(intptr_t)i);
        for (int i = 0; i < 3; i++) r[i] = aco_rt_spawn(NULL, dl_receiver, (void*)(intptr_t)i);
        for (int i = 0; i < 4; i++) CHECK_EQ(aco_rt_join(s[i], -1), 0);
        CHECK_EQ(aco_rt_chan_close(dl_ch), 0);
        for (int i = 0; i < 3; i++) CHECK_EQ(aco_rt_join(r[i], -1), 0);
        int nsent = 0;
        for (int i = 0; i < DL_N; i++) {
            if (dl_sent[i] != dl_recv[i])
                TEST_FAIL_AT(__FILE__, __LINE__, "cap %zu: element %d sent %d received %d",
                             cap, i, dl_sent[i], dl_recv[i]);
            nsent += dl_sent[i];
        }
        CHECK_GT(nsent, 0);
        CHECK_EQ(aco_rt_chan_free(dl_ch), 0);
    }
}

/* ------------------------------------------------------------------------ */
/* Large elements                                                           */
/* ------------------------------------------------------------------------ */

typedef struct {
    uint32_t seq;
    uint32_t words[1021];
    uint64_t sum;
} big_t;                    /* 4 KiB */

static void big_fill(big_t* b, uint32_t seq) {
    b->seq = seq;
    uint64_t s = seq;
    for (int i = 0; i < 1021; i++) {
        b->words[i] = seq * 2654435761u + (uint32_t)i * 40503u;
        s = s * 31 + b->words[i];
    }
    b->sum = s;
}
static void big_check(const big_t* b, uint32_t seq) {
    CHECK_EQ(b->seq, seq);
    uint64_t s = seq;
    for (int i = 0; i < 1021; i++) s = s * 31 + b->words[i];
    CHECK_EQ(b->sum, s);
}

static void big_sender(void* arg) {
    aco_rt_chan_t* ch = (aco_rt_chan_t*)arg;
    big_t b;        /* on the co's share stack */
    for (uint32_t i = 0; i < 200; i++) {
        big_fill(&b, i);
        CHECK_EQ(aco_rt_chan_send(ch, &b, -1), 0);
        memset(&b, 0xee, sizeof(b));    /* the channel has its own copy */
    }
}

static void big_main(void* arg) {
    (void)arg;
    CHECK_EQ(sizeof(big_t), 4096);
    for (size_t cap = 0; cap < 6; cap += 5) {
        aco_rt_chan_t* ch = aco_rt_chan_new(sizeof(big_t), cap);
        aco_rt_co_t* c = aco_rt_spawn(NULL, big_sender, ch);
        big_t b;
        for (uint32_t i = 0; i < 200; i++) {
            memset(&b, 0, sizeof(b));
            CHECK_EQ(aco_rt_chan_recv(ch, &b, -1), 0);
            big_check(&b, i);
            if (i % 3 == 0) CHECK_EQ(aco_rt_yield(), 0);
        }
        CHECK_EQ(aco_rt_join(c, -1), 0);
        CHECK_EQ(aco_rt_chan_free(ch), 0);
    }
}

/* ------------------------------------------------------------------------ */
/* Select                                                                   */
/* ------------------------------------------------------------------------ */

static aco_rt_chan_t* SC[4];

typedef struct {
    int ch;
    int v;
    int rc;
    int64_t deadline;
} op_t;

static void op_send(void* arg) {
    op_t* o = (op_t*)arg;
    o->rc = aco_rt_chan_send(SC[o->ch], &o->v, o->deadline);
}
static void op_recv(void* arg) {
    op_t* o = (op_t*)arg;
    o->rc = aco_rt_chan_recv(SC[o->ch], &o->v, o->deadline);
}

static int sel_idx, sel_err;
static int sel_v[4];
static int64_t sel_deadline;
/* recv on SC[0], SC[1]; send sel_v[2] on SC[2] */
static void selector(void* arg) {
    (void)arg;
    for (int i = 0; i < 4; i++) sel_v[i] = -1;
    sel_v[2] = 222;
    aco_rt_case_t cs[3] = {
        {SC[0], ACO_RT_RECV, &sel_v[0]},
        {SC[1], ACO_RT_RECV, &sel_v[1]},
        {SC[2], ACO_RT_SEND, &sel_v[2]},
    };
    sel_err = 99;
    sel_idx = aco_rt_chan_select(cs, 3, &sel_err, sel_deadline);
}

static void new_sc(size_t cap) {
    for (int i = 0; i < 4; i++) {
        SC[i] = aco_rt_chan_new(sizeof(int), cap);
        CHECK(SC[i] != NULL);
    }
}
static void free_sc(void) {
    for (int i = 0; i < 4; i++) CHECK_EQ(aco_rt_chan_free(SC[i]), 0);
}

static void select_main(void* arg) {
    (void)arg;
    int a = -1, b = -1, c = 5, err = 7;
    /* misuse */
    new_sc(2);
    aco_rt_case_t bad[2] = {{SC[0], ACO_RT_RECV, &a}, {SC[1], 3, &b}};
    CHECK_EQ(aco_rt_chan_select(bad, 0, &err, -1), -EINVAL);
    CHECK_EQ(aco_rt_chan_select(bad, 2, &err, -1), -EINVAL);
    bad[1] = (aco_rt_case_t){NULL, ACO_RT_RECV, &b};
    CHECK_EQ(aco_rt_chan_select(bad, 2, &err, -1), -EINVAL);
    CHECK_EQ(aco_rt_chan_select(NULL, 1, &err, -1), -EINVAL);

    /* several ready: the first in order */
    int x = 10;
    CHECK_EQ(aco_rt_chan_send(SC[1], &x, 0), 0);
    x = 20;
    CHECK_EQ(aco_rt_chan_send(SC[2], &x, 0), 0);
    aco_rt_case_t cs[3] = {
        {SC[0], ACO_RT_RECV, &a}, {SC[1], ACO_RT_RECV, &b}, {SC[2], ACO_RT_RECV, &c}};
    CHECK_EQ(aco_rt_chan_select(cs, 3, &err, -1), 1);
    CHECK_EQ(err, 0);
    CHECK_EQ(b, 10);
    CHECK_EQ(c, 5);
    CHECK_EQ(aco_rt_chan_select(cs, 3, NULL, 0), 2);
    CHECK_EQ(c, 20);
    CHECK_EQ(aco_rt_chan_select(cs, 3, &err, 0), -ETIMEDOUT);
    int64_t d = aco_rt_now() + 2 * MS;
    CHECK_EQ(aco_rt_chan_select(cs, 3, &err, d), -ETIMEDOUT);
    CHECK_GE(aco_rt_now(), d);
    /* mixed: a send case with room comes first */
    x = 30;
    aco_rt_case_t mx[2] = {{SC[0], ACO_RT_RECV, &a}, {SC[3], ACO_RT_SEND, &x}};
    CHECK_EQ(aco_rt_chan_select(mx, 2, &err, -1), 1);
    CHECK_EQ(aco_rt_chan_len(SC[3]), 1);
    CHECK_EQ(aco_rt_chan_recv(SC[3], &a, 0), 0);
    CHECK_EQ(a, 30);
    free_sc();

    for (size_t cap = 0; cap < 2; cap++) {
        new_sc(cap);
        /* woken by a sender on each recv case, a receiver on the send case */
        for (int k = 0; k < 3; k++) {
            sel_deadline = -1;
            sel_idx = -100;
            aco_rt_co_t* s = aco_rt_spawn(NULL, selector, NULL);
            if (cap) {     /* SC[2] must be full for the send case to wait */
                int f = 9;
                CHECK_EQ(aco_rt_chan_send(SC[2], &f, 0), 0);
            }
            CHECK_EQ(aco_rt_yield(), 0);
            CHECK_EQ(sel_idx, -100);
            op_t o = {k, 100 + k, 1, -1};
            aco_rt_co_t* p = aco_rt_spawn(NULL, k == 2 ? op_recv : op_send, &o);
            CHECK_EQ(aco_rt_join(p, -1), 0);
            CHECK_EQ(o.rc, 0);
            CHECK_EQ(aco_rt_join(s, -1), 0);
            CHECK_EQ(sel_idx, k);
            CHECK_EQ(sel_err, 0);
            if (k < 2) {
                CHECK_EQ(sel_v[k], 100 + k);
            } else if (cap) {
                CHECK_EQ(o.v, 9);           /* the old one first */
                CHECK_EQ(aco_rt_chan_recv(SC[2], &a, 0), 0);
                CHECK_EQ(a, 222);
            } else {
                CHECK_EQ(o.v, 222);
            }
            /* its other cases left their queues: nothing is swallowed */
            for (int j = 0; j < 3; j++) {
                if (j == k) continue;
                int z = 5;
                if (j < 2) {
                    CHECK_EQ(aco_rt_chan_send(SC[j], &z, 0), cap ? 0 : -ETIMEDOUT);
                } else {
                    if (cap) {      /* the filler, and nothing after it */
                        CHECK_EQ(aco_rt_chan_recv(SC[j], &z, 0), 0);
                        CHECK_EQ(z, 9);
                    }
                    CHECK_EQ(aco_rt_chan_recv(SC[j], &z, 0), -ETIMEDOUT);
                }
                if (cap && j < 2) {
                    CHECK_EQ(aco_rt_chan_recv(SC[j], &z, 0), 0);
                    CHECK_EQ(z, 5);
                }
            }
            CHECK_EQ(aco_rt_chan_len(SC[0]) + aco_rt_chan_len(SC[1]) + aco_rt_chan_len(SC[2]), 0);
        }
        /* a later send on another of its channels goes to another receiver */
        sel_deadline = -1;
        aco_rt_co_t* s = aco_rt_spawn(NULL, selector, NULL);
        if (cap) {
            int f = 9;
            CHECK_EQ(aco_rt_chan_send(SC[2], &f, 0), 0);
        }
        CHECK_EQ(aco_rt_yield(), 0);
        op_t o0 = {0, 500, 1, -1};
        CHECK(aco_rt_spawn(NULL, op_send, &o0) != NULL);
        CHECK_EQ(aco_rt_join(s, -1), 0);
        CHECK_EQ(sel_idx, 0);
        op_t r1 = {1, -1, 1, -1};
        aco_rt_co_t* rc = aco_rt_spawn(NULL, op_recv, &r1);
        CHECK_EQ(aco_rt_yield(), 0);
        op_t o1 = {1, 501, 1, -1};
        aco_rt_co_t* sc = aco_rt_spawn(NULL, op_send, &o1);
        CHECK_EQ(aco_rt_join(sc, -1), 0);
        CHECK_EQ(aco_rt_join(rc, -1), 0);
        CHECK_EQ(o1.rc, 0);
        CHECK_EQ(r1.rc, 0);
        CHECK_EQ(r1.v, 501);
        if (cap) CHECK_EQ(aco_rt_chan_recv(SC[2], &a, 0), 0);
        free_sc();
    }

    /* deadline and cancel of a blocked select: it leaves every queue */
    new_sc(0);
    sel_deadline = aco_rt_now() + 2 * MS;
    aco_rt_co_t* s = aco_rt_spawn(NULL, selector, NULL);
    CHECK_EQ(aco_rt_join(s, -1), 0);
    CHECK_EQ(sel_idx, -ETIMEDOUT);
    CHECK_GE(aco_rt_now(), sel_deadline);
    sel_deadline = -1;
    s = aco_rt_spawn(NULL, selector, NULL);
    CHECK_EQ(aco_rt_yield(), 0);
    CHECK_EQ(aco_rt_cancel(s), 0);
    CHECK_EQ(aco_rt_join(s, -1), 0);
    CHECK_EQ(sel_idx, -ECANCELED);
    for (int j = 0; j < 3; j++) {
        int z = 5;
        if (j < 2) CHECK_EQ(aco_rt_chan_send(SC[j], &z, 0), -ETIMEDOUT);
        else CHECK_EQ(aco_rt_chan_recv(SC[j], &z, 0), -ETIMEDOUT);
    }
    /* a closed channel: its case goes on with -EPIPE */
    s = aco_rt_spawn(NULL, selector, NULL);
    CHECK_EQ(aco_rt_yield(), 0);
    CHECK_EQ(aco_rt_chan_close(SC[1]), 0);
    CHECK_EQ(aco_rt_join(s, -1), 0);
    CHECK_EQ(sel_idx, 1);
    CHECK_EQ(sel_err, -EPIPE);
    CHECK_EQ(sel_v[1], -1);
    s = aco_rt_spawn(NULL, selector, NULL);     /* closed at once */
    CHECK_EQ(aco_rt_join(s, -1), 0);
    CHECK_EQ(sel_idx, 1);
    CHECK_EQ(sel_err, -EPIPE);
    CHECK_EQ(aco_rt_chan_close(SC[2]), 0);      /* send case on a closed one */
    aco_rt_case_t sc2[2] = {{SC[0], ACO_RT_RECV, &a}, {SC[2], ACO_RT_SEND, &x}};
    CHECK_EQ(aco_rt_chan_select(sc2, 2, &err, -1), 1);
    CHECK_EQ(err, -EPIPE);
    s = aco_rt_spawn(NULL, selector, NULL);
    CHECK_EQ(aco_rt_join(s, -1), 0);
    CHECK_EQ(sel_idx, 1);                       /* in order */
    free_sc();
    /* closed while a send case waits */
    new_sc(0);
    s = aco_rt_spawn(NULL, selector, NULL);
    CHECK_EQ(aco_rt_yield(), 0);
    CHECK_EQ(aco_rt_chan_close(SC[2]), 0);
    CHECK_EQ(aco_rt_join(s, -1), 0);
    CHECK_EQ(sel_idx, 2);
    CHECK_EQ(sel_err, -EPIPE);
    free_sc();
    /* a buffered closed channel with elements: they come first, err 0 */
    new_sc(2);
    x = 77;
    CHECK_EQ(aco_rt_chan_send(SC[1], &x, 0), 0);
    CHECK_EQ(aco_rt_chan_close(SC[1]), 0);
    s = aco_rt_spawn(NULL, selector, NULL);
    CHECK_EQ(aco_rt_join(s, -1), 0);
    CHECK_EQ(sel_idx, 1);
    CHECK_EQ(sel_err, 0);
    CHECK_EQ(sel_v[1], 77);
    free_sc();
}

/* A select's channels freed once a case fired, before the select ran on:
 * the one that fired (its queues empty: free says 0), which the select
 * does not enter (the chunk malloc gives back, if it is the channel's,
 * stays as written); and one closed meanwhile, whose free says -EBUSY
 * while the select's waiter is still on it (the close's take lost the
 * claim and left it), 0 once the select returned. */
static aco_rt_chan_t* sf_ch[2];
static int sf_idx, sf_v;
static void sf_selector(void* arg) {
    (void)arg;
    int b = -1;
    aco_rt_case_t cs[2] = {{sf_ch[0], ACO_RT_RECV, &sf_v}, {sf_ch[1], ACO_RT_RECV, &b}};
    sf_idx = aco_rt_chan_select(cs, 2, NULL, -1);
}

static void select_free_main(void* arg) {
    (void)arg;
    for (int which = 0; which < 2; which++) {
        for (int i = 0; i < 2; i++) CHECK((sf_ch[i] = aco_rt_chan_new(sizeof(int), 0)) != NULL);
        sf_idx = -1;
        sf_v = 0;
        aco_rt_co_t* s = aco_rt_spawn(NULL, sf_selector, NULL);
        CHECK_EQ(aco_rt_yield(), 0);                /* it waits */
        int x = 42;
        CHECK_EQ(aco_rt_chan_send(sf_ch[0], &x, -1), 0);
        if (which == 1) CHECK_EQ(aco_rt_chan_close(sf_ch[1]), 0);
        void* gone = sf_ch[which];
        if (which == 1) {
            CHECK_EQ(aco_rt_chan_free(gone), -EBUSY);
            CHECK_EQ(aco_rt_join(s, -1), 0);
            CHECK_EQ(sf_idx, 0);
            CHECK_EQ(aco_rt_chan_free(gone), 0);
            CHECK_EQ(aco_rt_chan_free(sf_ch[0]), 0);
            continue;
        }
        CHECK_EQ(aco_rt_chan_free(gone), 0);
        unsigned char* p = malloc(128);
        CHECK(p != NULL);
        memset(p, 0, 128);
        CHECK_EQ(aco_rt_join(s, -1), 0);
        CHECK_EQ(sf_idx, 0);
        CHECK_EQ(sf_v, 42);
        if ((void*)p == gone)
            for (int i = 0; i < 128; i++) CHECK_EQ(p[i], 0);
        free(p);
        CHECK_EQ(aco_rt_chan_free(sf_ch[1 - which]), 0);
    }
}

/* a select with 300 cases (mixed sizes), woken by each of them in turn */
#define WIDE 300
static aco_rt_chan_t* WC[WIDE];
static void wide_sender(void* arg) {
    int k = (int)(intptr_t)arg;
    uint8_t big[512];
    memset(big, k & 0xff, sizeof(big));
    if (k % 2) {
        CHECK_EQ(aco_rt_chan_send(WC[k], big, -1), 0);
    } else {
        uint32_t v = (uint32_t)k * 7;
        CHECK_EQ(aco_rt_chan_send(WC[k], &v, -1), 0);
    }
}

static void wide_select(void* arg) {
    (void)arg;
    static aco_rt_case_t cs[WIDE];
    static uint8_t slots[WIDE][512];
    for (int k = 0; k < WIDE; k++) {
        WC[k] = aco_rt_chan_new(k % 2 ? 512 : 4, 0);
        CHECK(WC[k] != NULL);
        cs[k] = (aco_rt_case_t){WC[k], ACO_RT_RECV, slots[k]};
    }
    for (int round = 0; round < WIDE; round += 37) {
        int k = (round * 13) % WIDE;
        memset(slots, 0xee, sizeof(slots));
        aco_rt_co_t* c = aco_rt_spawn(NULL, wide_sender, (void*)(intptr_t)k);
        int err = 1;
        CHECK_EQ(aco_rt_chan_select(cs, WIDE, &err, aco_rt_now() + 5000 * MS), k);
        CHECK_EQ(err, 0);
        if (k % 2) {
            for (int i = 0; i < 512; i++) CHECK_EQ(slots[k][i], k & 0xff);
        } else {
            uint32_t v;
            memcpy(&v, slots[k], 4);
            CHECK_EQ(v, (uint32_t)k * 7);
            CHECK_EQ(slots[k][4], 0xee);        /* 4 bytes written, no more */
        }
        for (int j = 0; j < WIDE; j++)
            if (j != k) CHECK_EQ(slots[j][0], 0xee);
        CHECK_EQ(aco_rt_join(c, -1), 0);
    }
    for (int k = 0; k < WIDE; k++) CHECK_EQ(aco_rt_chan_free(WC[k]), 0);   /* nobody waits */
}

/* Elements no memory holds, whose sizes a select's sum wraps round (two
 * sends of half the address space, a receive of all of it): -ENOMEM, not
 * a small block that the wait then copies them into. */
static void select_huge(void* arg) {
    (void)arg;
    size_t half = SIZE_MAX / 2 + 1;
    aco_rt_chan_t* h = aco_rt_chan_new(half, 0);
    aco_rt_chan_t* all = aco_rt_chan_new(SIZE_MAX, 0);
    CHECK(h && all);
    char e[16] = {0};
    int64_t d = aco_rt_now() + 20 * MS;
    aco_rt_case_t two[2] = {{h, ACO_RT_SEND, e}, {h, ACO_RT_SEND, e}};
    CHECK_EQ(aco_rt_chan_select(two, 2, NULL, d), -ENOMEM);
    aco_rt_case_t one = {all, ACO_RT_RECV, e};
    CHECK_EQ(aco_rt_chan_select(&one, 1, NULL, d), -ENOMEM);
    aco_rt_case_t mix[2] = {{h, ACO_RT_SEND, e}, {all, ACO_RT_RECV, e}};
    CHECK_EQ(aco_rt_chan_select(mix, 2, NULL, d), -ENOMEM);
    CHECK_EQ(aco_rt_chan_free(h), 0);
    CHECK_EQ(aco_rt_chan_free(all), 0);
}

/* An element past half the address space, which no doubling of a co's
 * block reaches: a send or receive that must wait, and a select, say
 * -ENOMEM at once (the doubling once wrapped round to 0: a hang). */
static void huge_wait(void* arg) {
    (void)arg;
    aco_rt_chan_t* ch = aco_rt_chan_new(SIZE_MAX / 2 + 2, 0);
    CHECK(ch != NULL);
    char e[16] = {0};
    int64_t d = aco_rt_now() + 20 * MS;
    CHECK_EQ(aco_rt_chan_send(ch, e, d), -ENOMEM);
    CHECK_EQ(aco_rt_chan_recv(ch, e, d), -ENOMEM);
    aco_rt_case_t c = {ch, ACO_RT_RECV, e};
    CHECK_EQ(aco_rt_chan_select(&c, 1, NULL, d), -ENOMEM);
    CHECK_EQ(aco_rt_chan_free(ch), 0);
}

/* random selects over 4 channels: every element arrives exactly once */
#define SS_CO 16
#define SS_OPS 400
static aco_rt_chan_t* SS[4];
static uint32_t ss_sent_sum, ss_recv_sum;
static long ss_sent_n, ss_recv_n;

static void ss_co(void* arg) {
    int id = (int)(intptr_t)arg;
    uint64_t rng = 1234567 + (uint64_t)id;
    uint32_t seq = 0;
    for (int op = 0; op < SS_OPS; op++) {
        aco_rt_case_t cs[4];
        uint32_t vals[4];
        int n = 1 + (int)(test_rand(&rng) % 4);
        for (int i = 0; i < n; i++) {
            cs[i].ch = SS[test_rand(&rng) % 4];
            cs[i].op = (test_rand(&rng) % 2) ? ACO_RT_SEND : ACO_RT_RECV;
            vals[i] = cs[i].op == ACO_RT_SEND ? ((uint32_t)id << 20 | seq++) : 0xffffffff;
            cs[i].elem = &vals[i];
        }
        int64_t d = (test_rand(&rng) % 3 == 0) ? 0 : aco_rt_now() + (int64_t)(test_rand(&rng) % 100000);
        int err = 1;
        int r = aco_rt_chan_select(cs, n, &err, d);
        if (r == -ETIMEDOUT) continue;
        CHECK(r >= 0 && r < n);
        CHECK_EQ(err, 0);
        if (cs[r].op == ACO_RT_SEND) {
            ss_sent_sum += vals[r];
            ss_sent_n++;
        } else {
            CHECK_NE(vals[r], 0xffffffff);
            ss_recv_sum += vals[r];
            ss_recv_n++;
        }
        /* the other receive slots were not written */
        for (int i = 0; i < n; i++)
            if (i != r && cs[i].op == ACO_RT_RECV) CHECK_EQ(vals[i], 0xffffffff);
    }
}

static void ss_drain(void* arg) {
    aco_rt_chan_t* ch = (aco_rt_chan_t*)arg;
    uint32_t v;
    while (aco_rt_chan_recv(ch, &v, -1) == 0) {
        ss_recv_sum += v;
        ss_recv_n++;
    }
}

static void select_stress(void* arg) {
    (void)arg;
    for (size_t cap = 0; cap < 3; cap += 2) {
        for (int i = 0; i < 4; i++) SS[i] = aco_rt_chan_new(sizeof(uint32_t), i == 3 ? 0 : cap);
        ss_sent_sum = ss_recv_sum = 0;
        ss_sent_n = ss_recv_n = 0;
        aco_rt_co_t* c[SS_CO];
        for (int i = 0; i < SS_CO; i++) c[i] = aco_rt_spawn(NULL, ss_co, (void*)(intptr_t)i);
        for (int i = 0; i < SS_CO; i++) CHECK_EQ(aco_rt_join(c[i], -1), 0);
        for (int i = 0; i < 4; i++) {
            CHECK_EQ(aco_rt_chan_close(SS[i]), 0);
            ss_drain(SS[i]);
            CHECK_EQ(aco_rt_chan_free(SS[i]), 0);
        }
        CHECK_EQ(ss_sent_n, ss_recv_n);
        CHECK_EQ(ss_sent_sum, ss_recv_sum);
        CHECK_GT(ss_sent_n, 0);
    }
}

/* ------------------------------------------------------------------------ */
/* The share-stack hazard                                                   */
/* ------------------------------------------------------------------------ */

#define HZ_CO 64            /* 32 senders, 32 receivers */
#define HZ_MSGS 150
#define HZ_CH 4

typedef struct {
    uint32_t sender;
    uint32_t seq;
    uint64_t payload[5];
    uint64_t sum;
} msg_t;                    /* 56 bytes */

static aco_rt_chan_t* HC[HZ_CH];
static uint8_t hz_seen[HZ_CO / 2][HZ_MSGS];
/* [receiver (the last: the final drain)][sender][channel]: last seq */
static int hz_last[HZ_CO / 2 + 1][HZ_CO / 2][HZ_CH];
static long hz_recv_n;

static uint64_t msg_sum(const msg_t* m) {
    uint64_t s = ((uint64_t)m->sender << 32) ^ m->seq;
    for (int i = 0; i < 5; i++) s = s * 1099511628211ULL + m->payload[i];
    return s;
}
static void msg_make(msg_t* m, uint32_t sender, uint32_t seq) {
    m->sender = sender;
    m->seq = seq;
    for (int i = 0; i < 5; i++) m->payload[i] = (uint64_t)sender * 0x9e3779b97f4a7c15ULL + seq * 31u + (uint64_t)i;
    m->sum = msg_sum(m);
}

/* recursion that fills its frames with a pattern and checks them after */
static uint64_t scribble(int depth, uint64_t pat) {
    volatile uint64_t frame[32];
    for (int i = 0; i < 32; i++) frame[i] = pat + (uint64_t)i;
    uint64_t r = depth ? scribble(depth - 1, pat * 3 + 1) : 0;
    for (int i = 0; i < 32; i++) CHECK_EQ(frame[i], pat + (uint64_t)i);
    return r + frame[depth % 32];
}

static int hc_index(const aco_rt_chan_t* ch) {
    for (int i = 0; i < HZ_CH; i++)
        if (HC[i] == ch) return i;
    CHECK(0);
    return -1;
}

static void hz_got(int me, int chi, const msg_t* m) {
    CHECK_EQ(m->sum, msg_sum(m));
    CHECK(m->sender < HZ_CO / 2 && m->seq < HZ_MSGS);
    CHECK_EQ(hz_seen[m->sender][m->seq], 0);
    hz_seen[m->sender][m->seq] = 1;
    /* a channel is FIFO: one sender's messages through it reach a receiver
     * in order */
    CHECK_GT((int)m->seq, hz_last[me][m->sender][chi]);
    hz_last[me][m->sender][chi] = (int)m->seq;
    hz_recv_n++;
}

/* the operation happens deep in the stack, with frames around it */
static int hz_send_deep(int depth, aco_rt_chan_t* ch, uint32_t id, uint32_t seq, int use_select,
                        uint64_t* rng) {
    volatile uint64_t guard[16];
    for (int i = 0; i < 16; i++) guard[i] = seq * 1000003u + (uint64_t)i;
    int r;
    if (depth > 0) {
        r = hz_send_deep(depth - 1, ch, id, seq, use_select, rng);
    } else {
        msg_t m;                        /* on this co's (share) stack */
        msg_make(&m, id, seq);
        if (use_select) {
            msg_t dummy;
            memset(&dummy, 0, sizeof(dummy));
            aco_rt_chan_t* other = HC[(test_rand(rng) % HZ_CH)];
            aco_rt_case_t cs[2] = {{ch, ACO_RT_SEND, &m}, {other, ACO_RT_SEND, &m}};
            int err = 1;
            r = aco_rt_chan_select(cs, 2, &err, -1);
            CHECK(r == 0 || r == 1);
            CHECK_EQ(err, 0);
            r = 0;
        } else {
            r = aco_rt_chan_send(ch, &m, -1);
        }
        /* the element was copied: the frame is still what it was */
        CHECK_EQ(m.sum, msg_sum(&m));
        CHECK_EQ(m.sender, id);
        CHECK_EQ(m.seq, seq);
    }
    for (int i = 0; i < 16; i++) CHECK_EQ(guard[i], seq * 1000003u + (uint64_t)i);
    return r;
}

static void hz_sender(void* arg) {
    uint32_t id = (uint32_t)(uintptr_t)arg;
    uint64_t rng = 555 + id;
    for (uint32_t seq = 0; seq < HZ_MSGS; seq++) {
        scribble((int)(test_rand(&rng) % 40), rng);
        aco_rt_chan_t* ch = HC[test_rand(&rng) % HZ_CH];
        int depth = (int)(test_rand(&rng) % 30);
        CHECK_EQ(hz_send_deep(depth, ch, id, seq, (int)(test_rand(&rng) % 3 == 0), &rng), 0);
        if (test_rand(&rng) % 4 == 0) CHECK_EQ(aco_rt_yield(), 0);
    }
}

static int hz_recv_deep(int depth, int me, uint64_t* rng) {
    volatile uint64_t guard[16];
    for (int i = 0; i < 16; i++) guard[i] = (uint64_t)me * 7777 + (uint64_t)depth + (uint64_t)i;
    int r;
    if (depth > 0) {
        r = hz_recv_deep(depth - 1, me, rng);
    } else {
        msg_t m[HZ_CH];                 /* on this co's (share) stack */
        memset(m, 0xa5, sizeof(m));
        if (test_rand(rng) % 2) {
            aco_rt_case_t cs[HZ_CH];
            int start = (int)(test_rand(rng) % HZ_CH);
            for (int i = 0; i < HZ_CH; i++)
                cs[i] = (aco_rt_case_t){HC[(start + i) % HZ_CH], ACO_RT_RECV, &m[i]};
            int err = 1;
            r = aco_rt_chan_select(cs, HZ_CH, &err, -1);
            if (r >= 0 && err == 0) {
                hz_got(me, hc_index(cs[r].ch), &m[r]);
                r = 0;
            } else if (r >= 0) {
                CHECK_EQ(err, -EPIPE);
                r = -EPIPE;
            }
        } else {
            int chi = (int)(test_rand(rng) % HZ_CH);
            r = aco_rt_chan_recv(HC[chi], &m[0], aco_rt_now() + 2 * MS);
            if (r == 0) hz_got(me, chi, &m[0]);
            else if (r == -ETIMEDOUT) r = 0;
        }
    }
    for (int i = 0; i < 16; i++)
        CHECK_EQ(guard[i], (uint64_t)me * 7777 + (uint64_t)depth + (uint64_t)i);
    return r;
}

static void hz_receiver(void* arg) {
    int me = (int)(intptr_t)arg;
    uint64_t rng = 999 + (uint64_t)me;
    for (;;) {
        scribble((int)(test_rand(&rng) % 40), rng);
        int r = hz_recv_deep((int)(test_rand(&rng) % 30), me, &rng);
        if (r == -EPIPE) return;
        CHECK_EQ(r, 0);
    }
}

static void hazard_main(void* arg) {
    (void)arg;
    for (size_t cap = 0; cap < 4; cap += 3) {
        for (int i = 0; i < HZ_CH; i++) HC[i] = aco_rt_chan_new(sizeof(msg_t), cap);
        memset(hz_seen, 0, sizeof(hz_seen));
        for (int i = 0; i <= HZ_CO / 2; i++)
            for (int j = 0; j < HZ_CO / 2; j++)
                for (int k = 0; k < HZ_CH; k++) hz_last[i][j][k] = -1;
        hz_recv_n = 0;
        aco_rt_co_t* s[HZ_CO / 2];
        aco_rt_co_t* r[HZ_CO / 2];
        for (int i = 0; i < HZ_CO / 2; i++) {
            s[i] = aco_rt_spawn(NULL, hz_sender, (void*)(intptr_t)i);
            r[i] = aco_rt_spawn(NULL, hz_receiver, (void*)(intptr_t)i);
            CHECK(s[i] && r[i]);
        }
        for (int i = 0; i < HZ_CO / 2; i++) CHECK_EQ(aco_rt_join(s[i], -1), 0);
        /* receivers end on the closed channels once they are drained: with
         * select they stop at the first closed one, so drain here too */
        for (int i = 0; i < HZ_CH; i++) CHECK_EQ(aco_rt_chan_close(HC[i]), 0);
        for (int i = 0; i < HZ_CO / 2; i++) CHECK_EQ(aco_rt_join(r[i], -1), 0);
        for (int i = 0; i < HZ_CH; i++) {
            msg_t m;
            while (aco_rt_chan_recv(HC[i], &m, 0) == 0) hz_got(HZ_CO / 2, i, &m);
        }
        CHECK_EQ(hz_recv_n, (HZ_CO / 2) * HZ_MSGS);
        for (int i = 0; i < HZ_CO / 2; i++)
            for (int j = 0; j < HZ_MSGS; j++) CHECK_EQ(hz_seen[i][j], 1);
        for (int i = 0; i < HZ_CH; i++) CHECK_EQ(aco_rt_chan_free(HC[i]), 0);
    }
}

/* ------------------------------------------------------------------------ */

static void body(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    test_go(s, fifo_main, NULL);
    test_go(s, rendezvous_main, NULL);
    test_go(s, close_main, NULL);
    test_go(s, deadline_main, NULL);
    test_go(s, big_main, NULL);
    test_go(s, select_main, NULL);
    test_go(s, select_free_main, NULL);
    test_go(s, select_stress, NULL);
    test_go(s, wide_select, NULL);
    test_go(s, select_huge, NULL);
    test_go(s, huge_wait, NULL);
    test_go(s, hazard_main, NULL);
}

int main(void) {
    test_on_backends(NULL, body, NULL);
    return 0;
}
