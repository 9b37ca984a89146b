/* test_chan_bb_race.c - channels across pool threads, from aco_rt.h alone:
 * sends and receives whose deadlines pass as the other side arrives,
 * receivers cancelled from another thread's co mid-stream, selects over
 * two channels with deadlines, elements of 8 and 40 bytes, capacities 0, 1
 * and 4.  Every element whose send returned 0 is received exactly once,
 * whole; one whose send failed is never received; a receive that failed
 * took nothing.  Then a close from a plain thread with cos of both pool
 * threads waiting on both sides. */
#include "rt_test.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#define NS 4                      /* senders */
#define NR 4                      /* receivers: the odd ones get cancelled */
#define PER (FEW ? 150 : 1500)    /* elements per sender */
#define NV (NS * PER)

typedef struct { uint64_t id, a, b, c, d; } big_t;     /* 40 bytes */

static aco_rt_chan_t* ch;
static aco_rt_chan_t* ch2;        /* the select round's second channel */
static size_t esz;
static int use_select;
static _Atomic int sent_res[NV];  /* 1: send said 0; 2: failed */
static _Atomic int got[NV];
static _Atomic long nrecv;
static aco_rt_wg_t senders_wg;
static _Atomic int senders_left;
static aco_rt_co_t* rx[NR];
static _Atomic int rx_stop[NR];

static void mk(void* buf, uint64_t id) {
    if (esz == 8) { memcpy(buf, &id, 8); return; }
    big_t b = {id, id * 3 + 1, ~id, id ^ 0x5a5a5a5a5a5a5a5aULL, id + 77};
    memcpy(buf, &b, sizeof(b));
}
static uint64_t check_elem(const void* buf) {
    uint64_t id;
    memcpy(&id, buf, 8);
    if (esz != 8) {
        big_t b;
        memcpy(&b, buf, sizeof(b));
        CHECK(b.a == id * 3 + 1 && b.b == ~id && b.c == (id ^ 0x5a5a5a5a5a5a5a5aULL) && b.d == id + 77);
    }
    CHECK_LT(id, NV);
    return id;
}

static int64_t jitter(uint64_t* st) {
    /* 0 to ~60 us, and now and then a deadline already passed */
    uint64_t r = test_rand(st);
    if ((r & 15) == 0) return 0;
    return aco_rt_now() + (int64_t)(r % 60000);
}

static void sender(void* arg) {
    int me = (int)(intptr_t)arg;
    uint64_t st = 0x1234567ULL * (uint64_t)(me + 1);
    big_t buf;
    for (int k = 0; k < PER; k++) {
        uint64_t id = (uint64_t)me * PER + (uint64_t)k;
        mk(&buf, id);
        int r;
        if (use_select && (k & 1)) {
            aco_rt_case_t c[2] = {{ch2, ACO_RT_SEND, &buf}, {ch, ACO_RT_SEND, &buf}};
            int err = 1;
            r = aco_rt_chan_select(c, 2, &err, jitter(&st));
            if (r >= 0) { CHECK_EQ(err, 0); r = 0; }
        } else {
            r = aco_rt_chan_send(ch, &buf, jitter(&st));
        }
        CHECK(r == 0 || r == -ETIMEDOUT);
        atomic_store(&sent_res[id], r == 0 ? 1 : 2);
    }
    atomic_fetch_sub(&senders_left, 1);
    CHECK_EQ(aco_rt_wg_done(&senders_wg), 0);
}

static void receiver(void* arg) {
    int me = (int)(intptr_t)arg;
    uint64_t st = 0xabcdefULL * (uint64_t)(me + 3);
    big_t buf;
    int closed1 = 0, closed2 = !use_select;
    for (;;) {
        memset(&buf, 0xee, sizeof(buf));
        int r;
        if (use_select) {
            big_t b2;
            memset(&b2, 0xee, sizeof(b2));
            aco_rt_case_t c[2] = {{ch, ACO_RT_RECV, &buf}, {ch2, ACO_RT_RECV, &b2}};
            int err = 1, n = 2;
            aco_rt_case_t* cp = c;
            if (closed1) { cp = c + 1; n = 1; }
            else if (closed2) n = 1;
            r = aco_rt_chan_select(cp, n, &err, jitter(&st));
            if (r >= 0) {
                aco_rt_case_t* hit = &cp[r];
                if (err == -EPIPE) {
                    if (hit->ch == ch) closed1 = 1; else closed2 = 1;
                    if (closed1 && closed2) return;
                    continue;
                }
                CHECK_EQ(err, 0);
                if (hit->ch == ch2) memcpy(&buf, &b2, sizeof(buf));
                r = 0;
            }
        } else {
            r = aco_rt_chan_recv(ch, &buf, jitter(&st));
        }
        if (r == -EPIPE) { CHECK(!use_select); return; }
        if (r == -ECANCELED) {
            CHECK(me & 1);
            /* nothing was taken: buf untouched */
            unsigned char* p = (unsigned char*)&buf;
            for (size_t i = 0; i < esz; i++) CHECK_EQ(p[i], 0xee);
            /* and every later call fails so, at once */
            CHECK_EQ(aco_rt_chan_recv(ch, &buf, -1), -ECANCELED);
            return;
        }
        if (r == -ETIMEDOUT) continue;
        CHECK_EQ(r, 0);
        uint64_t id = check_elem(&buf);
        atomic_fetch_add(&got[id], 1);
        atomic_fetch_add(&nrecv, 1);
    }
}

/* On the other pool thread: cancel the odd receivers once some elements
 * went by, then wait for the senders and close. */
static void canceller(void* arg) {
    (void)arg;
    for (int i = 1; i < NR; i += 2) {
        long want = (long)NV * i / (NR * 2);
        while (atomic_load(&nrecv) < want && atomic_load(&senders_left) > 0)
            CHECK_EQ(aco_rt_sleep(50000), 0);
        CHECK_EQ(aco_rt_cancel(rx[i]), 0);
    }
    CHECK_EQ(aco_rt_wg_wait(&senders_wg, aco_rt_now() + 20000 * MS), 0);
    CHECK_EQ(aco_rt_chan_close(ch), 0);
    if (use_select) CHECK_EQ(aco_rt_chan_close(ch2), 0);
    /* join the receivers from here (a co of another thread for half) */
    for (int i = 0; i < NR; i++) CHECK_EQ(aco_rt_join(rx[i], aco_rt_now() + 20000 * MS), 0);
}

static void one_round(aco_rt_pool_t* p, size_t elem, size_t cap, int sel) {
    esz = elem;
    use_select = sel;
    ch = aco_rt_chan_new(elem, cap);
    ch2 = sel ? aco_rt_chan_new(elem, cap) : NULL;
    CHECK(ch != NULL);
    for (int i = 0; i < NV; i++) { atomic_store(&sent_res[i], 0); atomic_store(&got[i], 0); }
    atomic_store(&nrecv, 0);
    aco_rt_wg_init(&senders_wg);
    CHECK_EQ(aco_rt_wg_add(&senders_wg, NS), 0);
    atomic_store(&senders_left, NS);
    aco_rt_sched_t* s0 = aco_rt_pool_sched(p, 0);
    aco_rt_sched_t* s1 = aco_rt_pool_sched(p, 1);
    for (int i = 0; i < NR; i++) {
        rx[i] = aco_rt_spawn(i & 1 ? s0 : s1, receiver, (void*)(intptr_t)i);
        CHECK(rx[i] != NULL);
        atomic_store(&rx_stop[i], 0);
    }
    for (int i = 0; i < NS; i++)
        CHECK_EQ(aco_rt_detach(aco_rt_spawn(i & 1 ? s1 : s0, sender, (void*)(intptr_t)i)), 0);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(s1, canceller, NULL)), 0);
    CHECK_EQ(aco_rt_pool_wait(p, ACO_RT_POOL_DRAIN, aco_rt_now() + 60000 * MS), 0);
    long ok = 0;
    for (int i = 0; i < NV; i++) {
        int sr = atomic_load(&sent_res[i]), g = atomic_load(&got[i]);
        if (sr == 1 && g != 1) TEST_FAIL_AT(__FILE__, __LINE__, "elem %d sent, received %d times (esz %zu cap %zu sel %d)", i, g, elem, cap, sel);
        if (sr == 2 && g != 0) TEST_FAIL_AT(__FILE__, __LINE__, "elem %d failed to send, received %d times (esz %zu cap %zu sel %d)", i, g, elem, cap, sel);
        CHECK(sr == 1 || sr == 2);
        ok += sr == 1;
    }
    CHECK_EQ(ok, atomic_load(&nrecv));
    if (getenv("BB_VERBOSE")) printf("esz %zu cap %zu sel %d: %ld of %d delivered\n", elem, cap, sel, ok, NV);
    CHECK_EQ(aco_rt_chan_len(ch), 0);
    CHECK_EQ(aco_rt_chan_free(ch), 0);
    if (ch2) CHECK_EQ(aco_rt_chan_free(ch2), 0);
}

/* ---- a close from a plain thread with cos of both pool threads waiting
 * on both sides (receivers on one channel, senders on another, a select
 * sending and receiving on a third) ---- */
static aco_rt_chan_t *cl_rx, *cl_tx, *cl_sel;
static _Atomic int cl_epipe, cl_ready;
static aco_rt_sem_t cl_go;
static void cl_receiver(void* arg) {
    (void)arg;
    big_t b;
    memset(&b, 0xee, sizeof(b));
    CHECK_EQ(aco_rt_chan_recv(cl_rx, &b, aco_rt_now() + 20000 * MS), -EPIPE);
    unsigned char* q = (unsigned char*)&b;
    for (size_t i = 0; i < sizeof(b); i++) CHECK_EQ(q[i], 0xee);
    atomic_fetch_add(&cl_epipe, 1);
}
static void cl_sender(void* arg) {
    big_t b;
    mk(&b, (uint64_t)(intptr_t)arg);
    CHECK_EQ(aco_rt_chan_send(cl_tx, &b, aco_rt_now() + 20000 * MS), -EPIPE);
    atomic_fetch_add(&cl_epipe, 1);
}
static void cl_both(void* arg) {
    (void)arg;
    big_t in, out;
    mk(&out, 3);
    memset(&in, 0xee, sizeof(in));
    aco_rt_case_t c[2] = {{cl_sel, ACO_RT_RECV, &in}, {cl_sel, ACO_RT_SEND, &out}};
    int err = 0;
    int r = aco_rt_chan_select(c, 2, &err, aco_rt_now() + 20000 * MS);
    /* both cases become possible at once (the header names no order) */
    CHECK(r == 0 || r == 1);
    CHECK_EQ(err, -EPIPE);
    atomic_fetch_add(&cl_epipe, 1);
}
/* spawned after the waiters of its thread: they all parked before it runs */
static void cl_mark(void* arg) { (void)arg; aco_rt_sem_post(&cl_go); }
static void cl_check(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_sem_wait(&cl_go, aco_rt_now() + 20000 * MS), 0);
    CHECK_EQ(aco_rt_chan_free(cl_rx), -EBUSY);
    CHECK_EQ(aco_rt_chan_free(cl_tx), -EBUSY);
    CHECK_EQ(aco_rt_chan_free(cl_sel), -EBUSY);
    atomic_store(&cl_ready, 1);
}
static void close_both_sides(aco_rt_pool_t* p) {
    esz = sizeof(big_t);
    cl_rx = aco_rt_chan_new(sizeof(big_t), 0);
    cl_tx = aco_rt_chan_new(sizeof(big_t), 0);
    cl_sel = aco_rt_chan_new(sizeof(big_t), 0);
    CHECK(cl_rx && cl_tx && cl_sel);
    atomic_store(&cl_epipe, 0);
    atomic_store(&cl_ready, 0);
    aco_rt_sem_init(&cl_go, 0);
    for (int i = 0; i < 6; i++) {
        aco_rt_sched_t* s = aco_rt_pool_sched(p, (unsigned)i & 1);
        CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, cl_receiver, NULL)), 0);
        CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, cl_sender, (void*)(intptr_t)i)), 0);
    }
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(aco_rt_pool_sched(p, 0), cl_both, NULL)), 0);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(aco_rt_pool_sched(p, 1), cl_mark, NULL)), 0);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(aco_rt_pool_sched(p, 0), cl_check, NULL)), 0);
    while (!atomic_load(&cl_ready)) sched_yield();
    CHECK_EQ(aco_rt_chan_free(cl_rx), -EBUSY);
    CHECK_EQ(aco_rt_chan_close(cl_rx), 0);
    CHECK_EQ(aco_rt_chan_close(cl_tx), 0);
    CHECK_EQ(aco_rt_chan_close(cl_sel), 0);
    CHECK_EQ(aco_rt_pool_wait(p, ACO_RT_POOL_DRAIN, aco_rt_now() + 20000 * MS), 0);
    CHECK_EQ(atomic_load(&cl_epipe), 13);
    CHECK_EQ(aco_rt_chan_free(cl_rx), 0);
    CHECK_EQ(aco_rt_chan_free(cl_tx), 0);
    CHECK_EQ(aco_rt_chan_free(cl_sel), 0);
}

static void body(aco_rt_pool_t* p) {
    size_t caps[] = {0, 1, 4};
    for (int e = 0; e < 2; e++)
        for (int c = 0; c < 3; c++)
            for (int sel = 0; sel < 2; sel++)
                one_round(p, e ? sizeof(big_t) : 8, caps[c], sel);
    close_both_sides(p);
}

int main(void) {
    test_on_pools(2, body, NULL);
    puts("test_chan_bb_race: ok");
    return 0;
}
