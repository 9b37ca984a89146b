/* test_chan_direct - channels whose first waiter waits in the channel
 * itself, and wakes that go between the threads of a pool in mailboxes.
 *
 * The header promises FIFO order among a channel's waiters, exactly-once
 * delivery, and the same deadlines, cancels, close and free for every
 * waiter; the first co to wait on an empty side of a channel takes another
 * road inside the runtime (chan.c, "the direct waiter"), and so does a wake
 * from a sibling thread of a pool (sched.c, "mailboxes").  These checks put
 * that first waiter, and the ones queued behind it, through every way in
 * and out, on one thread and across two, with elements of 1 to 16 bytes.
 */
#include "rt_test.h"

#include <sched.h>
#include <stdint.h>

/* ------------------------------------------------------------------------ */
/* One thread                                                               */
/* ------------------------------------------------------------------------ */

static aco_rt_chan_t* ch;

/* A receiver of an n-byte element: the bytes it got, between two guards
 * that must stay untouched (the copy is exactly n bytes). */
typedef struct {
    size_t   n;
    int64_t  deadline;
    int      r;
    uint8_t  buf[24];           /* guard 4, element n, guard after */
} rx_t;

static void rx_co(void* arg) {
    rx_t* x = arg;
    memset(x->buf, 0xAA, sizeof(x->buf));
    x->r = aco_rt_chan_recv(ch, x->buf + 4, x->deadline);
}

static void rx_check(const rx_t* x, uint8_t first) {
    CHECK_EQ(x->r, 0);
    for (size_t i = 0; i < 4; i++) CHECK_EQ(x->buf[i], 0xAA);
    for (size_t i = 0; i < x->n; i++) CHECK_EQ(x->buf[4 + i], (uint8_t)(first + i));
    for (size_t i = 4 + x->n; i < sizeof(x->buf); i++) CHECK_EQ(x->buf[i], 0xAA);
}

typedef struct {
    size_t   n;
    int64_t  deadline;
    uint8_t  first;
    int      r;
} tx_t;

static void tx_co(void* arg) {
    tx_t* x = arg;
    uint8_t e[16];
    for (size_t i = 0; i < x->n; i++) e[i] = (uint8_t)(x->first + i);
    x->r = aco_rt_chan_send(ch, e, x->deadline);
}

static void send_n(size_t n, uint8_t first) {
    uint8_t e[16];
    for (size_t i = 0; i < n; i++) e[i] = (uint8_t)(first + i);
    CHECK_EQ(aco_rt_chan_send(ch, e, -1), 0);
}

static void recv_n(size_t n, uint8_t first) {
    uint8_t e[20];
    memset(e, 0xAA, sizeof(e));
    CHECK_EQ(aco_rt_chan_recv(ch, e, -1), 0);
    for (size_t i = 0; i < n; i++) CHECK_EQ(e[i], (uint8_t)(first + i));
    for (size_t i = n; i < sizeof(e); i++) CHECK_EQ(e[i], 0xAA);
}

/* Let every other ready co run until it parks. */
static void settle(void) {
    for (int i = 0; i < 8; i++) aco_rt_yield();
}

/* Three receivers wait in turn (the first in the channel, two queued), with
 * and without deadlines; sends reach them in that order, whole. */
static void fifo_main(void* arg) {
    (void)arg;
    static const size_t sizes[] = {1, 2, 4, 8, 3, 16};
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        size_t n = sizes[k];
        ch = aco_rt_chan_new(n, 0);
        CHECK(ch != NULL);
        static rx_t rx[3];     /* (written by other cos: not on a stack) */
        aco_rt_co_t* c[3];
        for (int i = 0; i < 3; i++) {
            memset(&rx[i], 0, sizeof(rx[i]));
            rx[i].n = n;
            rx[i].deadline = i == 1 ? aco_rt_now() + 60000 * MS : -1;
            c[i] = aco_rt_spawn(NULL, rx_co, &rx[i]);
            CHECK(c[i] != NULL);
            settle();
        }
        for (int i = 0; i < 3; i++) send_n(n, (uint8_t)(10 * (i + 1)));
        for (int i = 0; i < 3; i++) {
            CHECK_EQ(aco_rt_join(c[i], -1), 0);
            rx_check(&rx[i], (uint8_t)(10 * (i + 1)));
        }
        /* senders: the first waits in the channel, the others queued */
        static tx_t tx[3];
        for (int i = 0; i < 3; i++) {
            tx[i] = (tx_t){n, i == 2 ? aco_rt_now() + 60000 * MS : -1, (uint8_t)(i + 1), -1};
            c[i] = aco_rt_spawn(NULL, tx_co, &tx[i]);
            settle();
        }
        for (int i = 0; i < 3; i++) recv_n(n, (uint8_t)(i + 1));
        for (int i = 0; i < 3; i++) {
            CHECK_EQ(aco_rt_join(c[i], -1), 0);
            CHECK_EQ(tx[i].r, 0);
        }
        CHECK_EQ(aco_rt_chan_free(ch), 0);
    }
}

/* Deadlines and cancels of the first waiter: it leaves, nothing of it is
 * delivered later, and the next waiter takes its place. */
static void leave_main(void* arg) {
    (void)arg;
    ch = aco_rt_chan_new(4, 0);
    CHECK(ch != NULL);
    /* a receiver's deadline; one queued behind it without one */
    static rx_t a, b, c;       /* (written by other cos: not on a stack) */
    static tx_t t;
    a = (rx_t){.n = 4, .deadline = aco_rt_now() + 20 * MS};
    b = (rx_t){.n = 4, .deadline = -1};
    aco_rt_co_t* ca = aco_rt_spawn(NULL, rx_co, &a);
    settle();
    aco_rt_co_t* cb = aco_rt_spawn(NULL, rx_co, &b);
    CHECK_EQ(aco_rt_join(ca, -1), 0);
    CHECK_EQ(a.r, -ETIMEDOUT);
    send_n(4, 40);
    CHECK_EQ(aco_rt_join(cb, -1), 0);
    rx_check(&b, 40);
    /* the first waiter leaves while one is queued: a newcomer queues
     * behind that one (it does not take the first waiter's place) */
    a = (rx_t){.n = 4, .deadline = aco_rt_now() + 20 * MS};
    b = (rx_t){.n = 4, .deadline = -1};
    c = (rx_t){.n = 4, .deadline = -1};
    ca = aco_rt_spawn(NULL, rx_co, &a);
    settle();
    cb = aco_rt_spawn(NULL, rx_co, &b);
    settle();
    CHECK_EQ(aco_rt_join(ca, -1), 0);
    CHECK_EQ(a.r, -ETIMEDOUT);
    aco_rt_co_t* cc = aco_rt_spawn(NULL, rx_co, &c);
    settle();
    send_n(4, 41);
    CHECK_EQ(aco_rt_join(cb, -1), 0);
    rx_check(&b, 41);
    send_n(4, 42);
    CHECK_EQ(aco_rt_join(cc, -1), 0);
    rx_check(&c, 42);
    /* a receiver alone: timed out, then another one is served */
    a = (rx_t){.n = 4, .deadline = aco_rt_now() + 10 * MS};
    ca = aco_rt_spawn(NULL, rx_co, &a);
    CHECK_EQ(aco_rt_join(ca, -1), 0);
    CHECK_EQ(a.r, -ETIMEDOUT);
    b = (rx_t){.n = 4, .deadline = -1};
    cb = aco_rt_spawn(NULL, rx_co, &b);
    settle();
    send_n(4, 50);
    CHECK_EQ(aco_rt_join(cb, -1), 0);
    rx_check(&b, 50);
    /* a sender's deadline: its element is not received afterwards */
    t = (tx_t){4, aco_rt_now() + 10 * MS, 60, -1};
    aco_rt_co_t* ct = aco_rt_spawn(NULL, tx_co, &t);
    CHECK_EQ(aco_rt_join(ct, -1), 0);
    CHECK_EQ(t.r, -ETIMEDOUT);
    uint32_t v = 0;
    CHECK_EQ(aco_rt_chan_recv(ch, &v, aco_rt_now() + 10 * MS), -ETIMEDOUT);
    CHECK_EQ(aco_rt_chan_recv(ch, &v, 0), -ETIMEDOUT);
    /* cancels: a receiver, then a sender */
    a = (rx_t){.n = 4, .deadline = -1};
    ca = aco_rt_spawn(NULL, rx_co, &a);
    settle();
    CHECK_EQ(aco_rt_cancel(ca), 0);
    CHECK_EQ(aco_rt_join(ca, -1), 0);
    CHECK_EQ(a.r, -ECANCELED);
    t = (tx_t){4, -1, 70, -1};
    ct = aco_rt_spawn(NULL, tx_co, &t);
    settle();
    CHECK_EQ(aco_rt_cancel(ct), 0);
    CHECK_EQ(aco_rt_join(ct, -1), 0);
    CHECK_EQ(t.r, -ECANCELED);
    CHECK_EQ(aco_rt_chan_send(ch, &v, aco_rt_now() + 5 * MS), -ETIMEDOUT);
    CHECK_EQ(aco_rt_chan_recv(ch, &v, aco_rt_now() + 5 * MS), -ETIMEDOUT);
    CHECK_EQ(aco_rt_chan_free(ch), 0);
}

/* Close wakes the first waiter and the queued ones; free says -EBUSY
 * while the first one waits. */
static void close_main(void* arg) {
    (void)arg;
    ch = aco_rt_chan_new(8, 0);
    CHECK(ch != NULL);
    static rx_t a, b;          /* (written by other cos: not on a stack) */
    static tx_t t;
    a = (rx_t){.n = 8, .deadline = -1};
    b = (rx_t){.n = 8, .deadline = aco_rt_now() + 60000 * MS};
    aco_rt_co_t* ca = aco_rt_spawn(NULL, rx_co, &a);
    settle();
    CHECK_EQ(aco_rt_chan_free(ch), -EBUSY);
    aco_rt_co_t* cb = aco_rt_spawn(NULL, rx_co, &b);
    settle();
    CHECK_EQ(aco_rt_chan_close(ch), 0);
    CHECK_EQ(aco_rt_join(ca, -1), 0);
    CHECK_EQ(aco_rt_join(cb, -1), 0);
    CHECK_EQ(a.r, -EPIPE);
    CHECK_EQ(b.r, -EPIPE);
    CHECK_EQ(aco_rt_chan_free(ch), 0);

    ch = aco_rt_chan_new(8, 0);
    t = (tx_t){8, -1, 1, -1};
    aco_rt_co_t* ct = aco_rt_spawn(NULL, tx_co, &t);
    settle();
    CHECK_EQ(aco_rt_chan_free(ch), -EBUSY);
    CHECK_EQ(aco_rt_chan_close(ch), 0);
    CHECK_EQ(aco_rt_join(ct, -1), 0);
    CHECK_EQ(t.r, -EPIPE);
    uint64_t v;
    CHECK_EQ(aco_rt_chan_recv(ch, &v, -1), -EPIPE);
    CHECK_EQ(aco_rt_chan_free(ch), 0);
}

/* Select meets a first waiter of either kind, of scheduler where (NULL:
 * this one), with an n-byte element (guards around what it receives). */
static void select_meets_first(aco_rt_sched_t* where, size_t n) {
    static rx_t a;             /* (written by other cos: not on a stack) */
    static tx_t t;
    ch = aco_rt_chan_new(n, 0);
    aco_rt_chan_t* other = aco_rt_chan_new(n, 0);
    uint8_t e[16], o[16], got[20];
    for (size_t i = 0; i < n; i++) e[i] = (uint8_t)(90 + i);
    int err = -1;
    a = (rx_t){.n = n, .deadline = -1};
    aco_rt_co_t* c = aco_rt_spawn(where, rx_co, &a);
    if (where) aco_rt_sleep(5 * MS); else settle();
    aco_rt_case_t cs[2] = {{other, ACO_RT_RECV, o}, {ch, ACO_RT_SEND, e}};
    CHECK_EQ(aco_rt_chan_select(cs, 2, &err, -1), 1);
    CHECK_EQ(err, 0);
    CHECK_EQ(aco_rt_join(c, -1), 0);
    rx_check(&a, 90);
    t = (tx_t){n, -1, 70, -1};
    c = aco_rt_spawn(where, tx_co, &t);
    if (where) aco_rt_sleep(5 * MS); else settle();
    memset(got, 0xAA, sizeof(got));
    aco_rt_case_t cr[2] = {{other, ACO_RT_RECV, o}, {ch, ACO_RT_RECV, got}};
    CHECK_EQ(aco_rt_chan_select(cr, 2, &err, -1), 1);
    CHECK_EQ(err, 0);
    for (size_t i = 0; i < n; i++) CHECK_EQ(got[i], (uint8_t)(70 + i));
    for (size_t i = n; i < sizeof(got); i++) CHECK_EQ(got[i], 0xAA);
    CHECK_EQ(aco_rt_join(c, -1), 0);
    CHECK_EQ(t.r, 0);
    CHECK_EQ(aco_rt_chan_free(ch), 0);
    CHECK_EQ(aco_rt_chan_free(other), 0);
}

static void select_main(void* arg) {
    (void)arg;
    select_meets_first(NULL, 2);
}

/* A buffered channel, full: the first waiting sender's element joins the
 * ring behind the ones there, then the queued sender's. */
static void buffered_main(void* arg) {
    (void)arg;
    ch = aco_rt_chan_new(4, 2);
    send_n(4, 1);
    send_n(4, 2);
    static tx_t t1, t2;        /* (written by other cos: not on a stack) */
    t1 = (tx_t){4, -1, 3, -1};
    t2 = (tx_t){4, -1, 4, -1};
    aco_rt_co_t* c1 = aco_rt_spawn(NULL, tx_co, &t1);
    settle();
    aco_rt_co_t* c2 = aco_rt_spawn(NULL, tx_co, &t2);
    settle();
    CHECK_EQ(aco_rt_chan_len(ch), 2);
    for (uint8_t i = 1; i <= 4; i++) recv_n(4, i);
    CHECK_EQ(aco_rt_join(c1, -1), 0);
    CHECK_EQ(aco_rt_join(c2, -1), 0);
    CHECK_EQ(t1.r, 0);
    CHECK_EQ(t2.r, 0);
    CHECK_EQ(aco_rt_chan_len(ch), 0);
    CHECK_EQ(aco_rt_chan_free(ch), 0);
}

static void body(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    test_go(s, fifo_main, NULL);
    test_go(s, leave_main, NULL);
    test_go(s, close_main, NULL);
    test_go(s, select_main, NULL);
    test_go(s, buffered_main, NULL);
}

/* A scheduler freed while a co waits first in a channel: the channel
 * forgets it (free says 0, a later send finds no receiver). */
static void stopper_co(void* arg) {
    settle();
    aco_rt_sched_stop(arg);
}
static void freed_waiter(void) {
    ch = aco_rt_chan_new(4, 0);
    aco_rt_sched_t* s = test_sched(NULL);
    rx_t a = {.n = 4, .deadline = -1};
    CHECK(aco_rt_spawn(s, rx_co, &a) != NULL);
    CHECK(aco_rt_spawn(s, stopper_co, s) != NULL);
    CHECK_EQ(aco_rt_sched_run(s), 0);
    aco_rt_sched_free(s);
    CHECK_EQ(aco_rt_chan_free(ch), 0);
    ch = aco_rt_chan_new(4, 0);
    rx_t b = {.n = 4, .deadline = -1};
    s = test_sched(NULL);
    CHECK(aco_rt_spawn(s, rx_co, &b) != NULL);
    CHECK(aco_rt_spawn(s, stopper_co, s) != NULL);
    CHECK_EQ(aco_rt_sched_run(s), 0);
    aco_rt_sched_free(s);
    s = test_sched(NULL);
    tx_t t = {4, aco_rt_now() + 10 * MS, 1, -1};
    aco_rt_co_t* c = aco_rt_spawn(s, tx_co, &t);
    CHECK_EQ(aco_rt_detach(c), 0);
    test_run(s);
    CHECK_EQ(t.r, -ETIMEDOUT);
    aco_rt_sched_free(s);
    CHECK_EQ(aco_rt_chan_free(ch), 0);
}

/* ------------------------------------------------------------------------ */
/* Two threads of a pool                                                    */
/* ------------------------------------------------------------------------ */

static aco_rt_pool_t* pool;

static void run_on(unsigned i, aco_rt_fn_t fn, void* arg) {
    aco_rt_co_t* co = aco_rt_spawn(aco_rt_pool_sched(pool, i), fn, arg);
    CHECK(co != NULL);
    CHECK_EQ(aco_rt_detach(co), 0);
    CHECK_EQ(aco_rt_pool_wait(pool, ACO_RT_POOL_DRAIN, aco_rt_now() + 120000 * MS), 0);
}

/* Ping-pong across the threads: every value arrives, in order, whole. */
#define PP_ROUNDS (SLOW ? 5000 : 100000)
static aco_rt_chan_t *ping, *pong;
static void pong_co(void* arg) {
    (void)arg;
    uint8_t v;
    uint32_t want = 0;
    while (aco_rt_chan_recv(ping, &v, -1) == 0) {
        CHECK_EQ(v, (uint8_t)want);
        uint64_t w = want * 0x0101010101010101ULL;
        CHECK_EQ(aco_rt_chan_send(pong, &w, -1), 0);
        want++;
    }
    CHECK_EQ(want, PP_ROUNDS);
}
static void ping_co(void* arg) {
    (void)arg;
    aco_rt_co_t* p = aco_rt_spawn(aco_rt_pool_sched(pool, 1), pong_co, NULL);
    CHECK(p != NULL);
    for (uint32_t i = 0; i < PP_ROUNDS; i++) {
        uint8_t v = (uint8_t)i;
        CHECK_EQ(aco_rt_chan_send(ping, &v, -1), 0);
        uint64_t w = 0;
        CHECK_EQ(aco_rt_chan_recv(pong, &w, -1), 0);
        CHECK_EQ(w, (uint64_t)i * 0x0101010101010101ULL);
    }
    CHECK_EQ(aco_rt_chan_close(ping), 0);
    CHECK_EQ(aco_rt_join(p, -1), 0);
}

/* A burst: 300 cos of thread 1 each wait first in a channel of their own;
 * one co of thread 0 serves them all while a co of thread 1 keeps that
 * thread busy (it reads no message until all 300 are sent: more wakes than
 * a mailbox holds, the rest through the inbox), then the same with 300
 * waiting senders. */
#define BURST 300
static aco_rt_chan_t* bch[BURST];
static aco_rt_wg_t bwg;
static int bgot[BURST];
static void burst_rx(void* arg) {
    int i = (int)(intptr_t)arg;
    uint32_t v = 0;
    aco_rt_wg_done(&bwg);
    CHECK_EQ(aco_rt_chan_recv(bch[i], &v, -1), 0);
    CHECK_EQ(v, (uint32_t)i * 7u + 1u);
    bgot[i]++;
}
static void burst_tx(void* arg) {
    int i = (int)(intptr_t)arg;
    uint32_t v = (uint32_t)i * 5u + 2u;
    aco_rt_wg_done(&bwg);
    CHECK_EQ(aco_rt_chan_send(bch[i], &v, -1), 0);
    bgot[i]++;
}
static int busy_state;         /* atomic: 1 thread 1 is busy, 2 may stop */
static void busy_co(void* arg) {
    (void)arg;
    __atomic_store_n(&busy_state, 1, __ATOMIC_RELEASE);
    int64_t end = aco_rt_now() + 10000 * MS;   /* (a bound, should 2 never come) */
    while (__atomic_load_n(&busy_state, __ATOMIC_ACQUIRE) != 2 && aco_rt_now() < end) {}
}
static void burst_main(void* arg) {
    (void)arg;
    for (int round = 0; round < 2; round++) {
        aco_rt_wg_add(&bwg, BURST);
        aco_rt_co_t* c[BURST];
        for (int i = 0; i < BURST; i++) {
            bgot[i] = 0;
            c[i] = aco_rt_spawn(aco_rt_pool_sched(pool, 1), round ? burst_tx : burst_rx,
                                (void*)(intptr_t)i);
            CHECK(c[i] != NULL);
        }
        CHECK_EQ(aco_rt_wg_wait(&bwg, -1), 0);
        aco_rt_sleep(5 * MS);       /* (each one in its receive or send) */
        __atomic_store_n(&busy_state, 0, __ATOMIC_RELEASE);
        aco_rt_co_t* busy = aco_rt_spawn(aco_rt_pool_sched(pool, 1), busy_co, NULL);
        while (__atomic_load_n(&busy_state, __ATOMIC_ACQUIRE) != 1) aco_rt_sleep(MS / 10);
        for (int i = 0; i < BURST; i++) {
            uint32_t v = (uint32_t)i * 7u + 1u;
            if (round == 0) {
                CHECK_EQ(aco_rt_chan_send(bch[i], &v, -1), 0);
            } else {
                CHECK_EQ(aco_rt_chan_recv(bch[i], &v, -1), 0);
                CHECK_EQ(v, (uint32_t)i * 5u + 2u);
            }
        }
        __atomic_store_n(&busy_state, 2, __ATOMIC_RELEASE);
        CHECK_EQ(aco_rt_join(busy, -1), 0);
        for (int i = 0; i < BURST; i++) {
            CHECK_EQ(aco_rt_join(c[i], -1), 0);
            CHECK_EQ(bgot[i], 1);
        }
    }
}

/* Deadlines race wakes from the other thread: whatever a sender was told
 * it sent was received once, and nothing else (counts and sums agree). */
#define RACE_N (SLOW ? 3000 : 40000)
static aco_rt_chan_t* rch;
static uint64_t nsent, sent_sum, nrecv, recv_sum;
static int race_tx_done;         /* atomic */
static void race_rx(void* arg) {
    uint64_t rng = (uint64_t)(uintptr_t)arg * 77 + 1;
    while (!__atomic_load_n(&race_tx_done, __ATOMIC_ACQUIRE) || aco_rt_chan_len(rch)) {
        uint32_t v;
        int64_t dl = aco_rt_now() + (int64_t)(test_rand(&rng) % 40000);
        int r = aco_rt_chan_recv(rch, &v, dl);
        if (r == 0) { nrecv++; recv_sum += v; }
        else CHECK_EQ(r, -ETIMEDOUT);
    }
    /* the last ones: anything still on its way */
    uint32_t v;
    while (aco_rt_chan_recv(rch, &v, aco_rt_now() + 20 * MS) == 0) { nrecv++; recv_sum += v; }
}
static void race_tx(void* arg) {
    uint64_t rng = (uint64_t)(uintptr_t)arg * 31 + 5;
    for (uint32_t i = 1; i <= RACE_N; i++) {
        int64_t dl = aco_rt_now() + (int64_t)(test_rand(&rng) % 40000);
        int r = aco_rt_chan_send(rch, &i, dl);
        if (r == 0) { nsent++; sent_sum += i; }
        else CHECK_EQ(r, -ETIMEDOUT);
    }
}
static void race_main(void* arg) {
    (void)arg;
    for (size_t cap = 0; cap < 2; cap++) {
        rch = aco_rt_chan_new(4, cap);
        nsent = sent_sum = nrecv = recv_sum = 0;
        __atomic_store_n(&race_tx_done, 0, __ATOMIC_RELEASE);
        aco_rt_co_t* rx[2];
        for (int i = 0; i < 2; i++)
            rx[i] = aco_rt_spawn(aco_rt_pool_sched(pool, 1), race_rx, (void*)(uintptr_t)i);
        aco_rt_co_t* tx = aco_rt_spawn(NULL, race_tx, (void*)(uintptr_t)cap);
        CHECK_EQ(aco_rt_join(tx, -1), 0);
        __atomic_store_n(&race_tx_done, 1, __ATOMIC_RELEASE);
        for (int i = 0; i < 2; i++) CHECK_EQ(aco_rt_join(rx[i], -1), 0);
        /* (sent_* written on this thread, recv_* on thread 1: joined) */
        CHECK_GT(nsent, 0);
        CHECK_EQ(nrecv, nsent);
        CHECK_EQ(recv_sum, sent_sum);
        CHECK_EQ(aco_rt_chan_free(rch), 0);
    }
}

/* Cancel from the other thread of a co waiting first in a channel. */
static void xcancel_main(void* arg) {
    (void)arg;
    ch = aco_rt_chan_new(4, 0);
    static rx_t a;             /* (written by other cos: not on a stack) */
    a = (rx_t){.n = 4, .deadline = -1};
    aco_rt_co_t* c = aco_rt_spawn(aco_rt_pool_sched(pool, 1), rx_co, &a);
    aco_rt_sleep(5 * MS);
    CHECK_EQ(aco_rt_cancel(c), 0);
    CHECK_EQ(aco_rt_join(c, -1), 0);
    CHECK_EQ(a.r, -ECANCELED);
    uint32_t v = 9;
    CHECK_EQ(aco_rt_chan_send(ch, &v, aco_rt_now() + 5 * MS), -ETIMEDOUT);
    CHECK_EQ(aco_rt_chan_free(ch), 0);
}

/* Results that cross in a mailbox: a close and a select of this thread
 * meet a first waiter of the other, receiver or sender, with a 3-byte
 * element between guards. */
static void xresults_main(void* arg) {
    (void)arg;
    static rx_t a;             /* (written by other cos: not on a stack) */
    static tx_t t;
    aco_rt_sched_t* t1 = aco_rt_pool_sched(pool, 1);
    ch = aco_rt_chan_new(3, 0);
    a = (rx_t){.n = 3, .deadline = -1};
    aco_rt_co_t* c = aco_rt_spawn(t1, rx_co, &a);
    aco_rt_sleep(5 * MS);
    CHECK_EQ(aco_rt_chan_close(ch), 0);
    CHECK_EQ(aco_rt_join(c, -1), 0);
    CHECK_EQ(a.r, -EPIPE);
    CHECK_EQ(aco_rt_chan_free(ch), 0);
    ch = aco_rt_chan_new(3, 0);
    t = (tx_t){3, -1, 1, -1};
    c = aco_rt_spawn(t1, tx_co, &t);
    aco_rt_sleep(5 * MS);
    CHECK_EQ(aco_rt_chan_close(ch), 0);
    CHECK_EQ(aco_rt_join(c, -1), 0);
    CHECK_EQ(t.r, -EPIPE);
    CHECK_EQ(aco_rt_chan_free(ch), 0);

    select_meets_first(t1, 3);
}

/* Three threads: 1 and 2 each ping-pong with 0 at once (thread 0 reads
 * two mailboxes, made at the same time). */
#define TRI_ROUNDS (SLOW ? 3000 : 50000)
static aco_rt_chan_t* tri_ch[2][2];         /* [pair][0: to the far side, 1: back] */
static void tri_far(void* arg) {
    int k = (int)(intptr_t)arg;
    uint16_t v;
    uint32_t n = 0;
    while (aco_rt_chan_recv(tri_ch[k][0], &v, -1) == 0) {
        CHECK_EQ(v, (uint16_t)(n * 3 + (uint32_t)k));
        v = (uint16_t)~v;
        CHECK_EQ(aco_rt_chan_send(tri_ch[k][1], &v, -1), 0);
        n++;
    }
    CHECK_EQ(n, TRI_ROUNDS);
}
static void tri_near(void* arg) {
    int k = (int)(intptr_t)arg;
    for (uint32_t n = 0; n < TRI_ROUNDS; n++) {
        uint16_t v = (uint16_t)(n * 3 + (uint32_t)k);
        CHECK_EQ(aco_rt_chan_send(tri_ch[k][0], &v, -1), 0);
        uint16_t w = 0;
        CHECK_EQ(aco_rt_chan_recv(tri_ch[k][1], &w, -1), 0);
        CHECK_EQ(w, (uint16_t)~v);
    }
    CHECK_EQ(aco_rt_chan_close(tri_ch[k][0]), 0);
}
static void tri_main(void* arg) {
    (void)arg;
    aco_rt_co_t* c[4];
    for (int k = 0; k < 2; k++) {
        c[2 * k] = aco_rt_spawn(aco_rt_pool_sched(pool, (unsigned)k + 1), tri_far, (void*)(intptr_t)k);
        c[2 * k + 1] = aco_rt_spawn(NULL, tri_near, (void*)(intptr_t)k);
    }
    for (int i = 0; i < 4; i++) CHECK_EQ(aco_rt_join(c[i], -1), 0);
}

/* A select on thread 0 (receives from X and Y) fired by a send on Y from
 * thread 1, which then closes X and frees it as soon as the free says 0:
 * the select, woken, must not enter X after that.  Its waiter on X stays
 * queued (the close's take lost its claim) until the select takes it off,
 * so the free says -EBUSY until then; a taker once took it off all the
 * same, and the free's 0 came while the select was about to enter X
 * (ASan: a use after free; natively a spin on a reused lock word). */
static aco_rt_chan_t *sfx, *sfy;
static int sf_waiting;
static int64_t sf_spin;
static void sf_select(void* arg) {
    (void)arg;
    uint64_t vx, vy;
    aco_rt_case_t c[2] = {{sfx, ACO_RT_RECV, &vx}, {sfy, ACO_RT_RECV, &vy}};
    __atomic_store_n(&sf_waiting, 1, __ATOMIC_RELEASE);
    int e = -1;
    CHECK_EQ(aco_rt_chan_select(c, 2, &e, -1), 1);
    CHECK_EQ(e, 0);
    CHECK_EQ(vy, 7);
}
static void sf_sender(void* arg) {
    (void)arg;
    while (!__atomic_load_n(&sf_waiting, __ATOMIC_ACQUIRE)) sched_yield();
    uint64_t v = 7;
    CHECK_EQ(aco_rt_chan_send(sfy, &v, -1), 0);     /* (it waits for the select) */
    int64_t t = aco_rt_now() + sf_spin;
    while (aco_rt_now() < t) {}
    CHECK_EQ(aco_rt_chan_close(sfx), 0);
    int r;
    while ((r = aco_rt_chan_free(sfx)) == -EBUSY) sched_yield();
    CHECK_EQ(r, 0);
}
static void select_freed(void) {
    for (int i = 0; i < (FEW ? 300 : 3000); i++) {
        CHECK((sfx = aco_rt_chan_new(8, 0)) != NULL);
        CHECK((sfy = aco_rt_chan_new(8, 0)) != NULL);
        sf_waiting = 0;
        sf_spin = (i % 40) * 250;               /* 0 .. 10 us */
        aco_rt_co_t* a = aco_rt_spawn(aco_rt_pool_sched(pool, 0), sf_select, NULL);
        aco_rt_co_t* b = aco_rt_spawn(aco_rt_pool_sched(pool, 1), sf_sender, NULL);
        CHECK(a && b);
        CHECK_EQ(aco_rt_detach(a), 0);
        CHECK_EQ(aco_rt_detach(b), 0);
        CHECK_EQ(aco_rt_pool_wait(pool, ACO_RT_POOL_DRAIN, -1), 0);
        CHECK_EQ(aco_rt_chan_free(sfy), 0);
    }
}

static void pool_part(void) {
    aco_rt_pool_opts_t o = {0};
    o.threads = 2;
    const char* b = getenv("ACO_RT_TEST_BACKENDS");
    if (b && strstr(b, "uring") == NULL) o.sched.backend = ACO_RT_BACKEND_EPOLL;
    pool = aco_rt_pool_new(&o);
    CHECK(pool != NULL);
    ping = aco_rt_chan_new(1, 0);
    pong = aco_rt_chan_new(8, 0);
    run_on(0, ping_co, NULL);
    CHECK_EQ(aco_rt_chan_free(ping), 0);
    CHECK_EQ(aco_rt_chan_free(pong), 0);
    for (int i = 0; i < BURST; i++) CHECK((bch[i] = aco_rt_chan_new(4, 0)) != NULL);
    run_on(0, burst_main, NULL);
    for (int i = 0; i < BURST; i++) CHECK_EQ(aco_rt_chan_free(bch[i]), 0);
    run_on(0, race_main, NULL);
    run_on(0, xcancel_main, NULL);
    run_on(0, xresults_main, NULL);
    select_freed();
    aco_rt_pool_free(pool);

    o.threads = 3;
    pool = aco_rt_pool_new(&o);
    CHECK(pool != NULL);
    for (int k = 0; k < 2; k++)
        for (int d = 0; d < 2; d++) CHECK((tri_ch[k][d] = aco_rt_chan_new(2, 0)) != NULL);
    run_on(0, tri_main, NULL);
    for (int k = 0; k < 2; k++)
        for (int d = 0; d < 2; d++) CHECK_EQ(aco_rt_chan_free(tri_ch[k][d]), 0);
    aco_rt_pool_free(pool);
}

int main(void) {
    test_on_backends(NULL, body, NULL);
    freed_waiter();
    pool_part();
    return 0;
}
