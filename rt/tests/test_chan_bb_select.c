/* test_chan_bb_select.c - channels and select from aco_rt.h alone: refusals
 * that do nothing (NULL cases, bad ops, n < 1, a cancelled co), closed
 * channels as cases (index and *err), duplicates, case order, a select's
 * own send never paired with its own receive, two selects pairing, 64
 * cases, a select's leftovers never taking a later element, a channel
 * closed or freed under a waiting select, creation limits. */
#include "rt_test.h"

#include <stdint.h>

static int64_t soon(int ms) { return aco_rt_now() + ms * MS; }

/* ---- refusals: -EINVAL, -EPERM, -ECANCELED, nothing done ---- */
static void refusals_co(void* arg) {
    (void)arg;
    aco_rt_chan_t* ch = aco_rt_chan_new(sizeof(long), 2);
    CHECK(ch != NULL);
    long v = 7, out = 0;
    CHECK_EQ(aco_rt_chan_send(ch, &v, -1), 0);
    CHECK_EQ(aco_rt_chan_len(ch), 1);
    int err = 12345;
    aco_rt_case_t c[3];
    /* a good ready case before a bad one: -EINVAL, the element stays */
    c[0] = (aco_rt_case_t){ch, ACO_RT_RECV, &out};
    c[1] = (aco_rt_case_t){NULL, ACO_RT_RECV, &out};
    CHECK_EQ(aco_rt_chan_select(c, 2, &err, -1), -EINVAL);
    c[1] = (aco_rt_case_t){ch, ACO_RT_RECV, NULL};
    CHECK_EQ(aco_rt_chan_select(c, 2, &err, -1), -EINVAL);
    c[1] = (aco_rt_case_t){ch, 0, &out};
    CHECK_EQ(aco_rt_chan_select(c, 2, &err, -1), -EINVAL);
    c[1] = (aco_rt_case_t){ch, ACO_RT_SEND | ACO_RT_RECV, &out};
    CHECK_EQ(aco_rt_chan_select(c, 2, &err, -1), -EINVAL);
    c[1] = (aco_rt_case_t){ch, -1, &out};
    CHECK_EQ(aco_rt_chan_select(c, 2, &err, -1), -EINVAL);
    CHECK_EQ(aco_rt_chan_select(c, 0, &err, -1), -EINVAL);
    CHECK_EQ(aco_rt_chan_select(c, -3, &err, -1), -EINVAL);
    CHECK_EQ(aco_rt_chan_select(NULL, 1, &err, -1), -EINVAL);
    CHECK_EQ(out, 0);
    CHECK_EQ(aco_rt_chan_len(ch), 1);
    /* a send case before a bad case: nothing sent */
    long w = 9;
    c[0] = (aco_rt_case_t){ch, ACO_RT_SEND, &w};
    c[1] = (aco_rt_case_t){ch, 77, &out};
    CHECK_EQ(aco_rt_chan_select(c, 2, &err, -1), -EINVAL);
    CHECK_EQ(aco_rt_chan_len(ch), 1);
    /* send / recv NULLs */
    CHECK_EQ(aco_rt_chan_send(NULL, &v, -1), -EINVAL);
    CHECK_EQ(aco_rt_chan_send(ch, NULL, -1), -EINVAL);
    CHECK_EQ(aco_rt_chan_recv(NULL, &out, -1), -EINVAL);
    CHECK_EQ(aco_rt_chan_recv(ch, NULL, -1), -EINVAL);
    CHECK_EQ(aco_rt_chan_len(ch), 1);
    /* err NULL is fine */
    c[0] = (aco_rt_case_t){ch, ACO_RT_RECV, &out};
    CHECK_EQ(aco_rt_chan_select(c, 1, NULL, -1), 0);
    CHECK_EQ(out, 7);
    CHECK_EQ(aco_rt_chan_len(ch), 0);
    /* a past deadline with a ready case: the case goes */
    CHECK_EQ(aco_rt_chan_send(ch, &w, 0), 0);
    err = 5;
    CHECK_EQ(aco_rt_chan_select(c, 1, &err, 0), 0);
    CHECK_EQ(err, 0);
    CHECK_EQ(out, 9);
    /* nothing ready, deadline passed: -ETIMEDOUT at once, for each past value */
    int64_t pasts[] = {0, -2, -100, INT64_MIN, 1};
    for (size_t i = 0; i < sizeof(pasts) / sizeof(pasts[0]); i++) {
        CHECK_EQ(aco_rt_chan_select(c, 1, &err, pasts[i]), -ETIMEDOUT);
        CHECK_EQ(aco_rt_chan_recv(ch, &out, pasts[i]), -ETIMEDOUT);
    }
    /* full: a send with a passed deadline times out, nothing added */
    CHECK_EQ(aco_rt_chan_send(ch, &w, 0), 0);
    CHECK_EQ(aco_rt_chan_send(ch, &w, 0), 0);
    CHECK_EQ(aco_rt_chan_send(ch, &w, 0), -ETIMEDOUT);
    CHECK_EQ(aco_rt_chan_len(ch), 2);
    /* a cancelled co: -ECANCELED from send, recv and select, even when
     * ready; nothing moves.  -EINVAL still comes first. */
    CHECK_EQ(aco_rt_cancel(aco_rt_self()), 0);
    CHECK_EQ(aco_rt_chan_recv(ch, &out, -1), -ECANCELED);
    CHECK_EQ(aco_rt_chan_select(c, 1, &err, -1), -ECANCELED);
    CHECK_EQ(aco_rt_chan_len(ch), 2);
    CHECK_EQ(aco_rt_chan_recv(ch, NULL, -1), -EINVAL);
    CHECK_EQ(aco_rt_chan_send(NULL, &v, 0), -EINVAL);
    aco_rt_chan_t* ch0 = aco_rt_chan_new(sizeof(long), 0);
    CHECK(ch0 != NULL);
    CHECK_EQ(aco_rt_chan_close(ch0), 0);
    CHECK_EQ(aco_rt_chan_send(ch0, &v, -1), -ECANCELED);
    CHECK_EQ(aco_rt_chan_recv(ch0, &out, -1), -ECANCELED);
    c[0] = (aco_rt_case_t){ch0, ACO_RT_RECV, &out};
    CHECK_EQ(aco_rt_chan_select(c, 1, &err, -1), -ECANCELED);
    CHECK_EQ(aco_rt_chan_free(ch0), 0);
    CHECK_EQ(aco_rt_chan_free(ch), 0);
}

/* ---- closed channels as cases; order; duplicates ---- */
static void closed_co(void* arg) {
    (void)arg;
    aco_rt_chan_t* open0 = aco_rt_chan_new(sizeof(int), 0);
    aco_rt_chan_t* open1 = aco_rt_chan_new(sizeof(int), 1);
    aco_rt_chan_t* cl = aco_rt_chan_new(sizeof(int), 3);
    CHECK(open0 && open1 && cl);
    int a = 1, b = 2, r1 = 0, r2 = 0, err = 99;
    CHECK_EQ(aco_rt_chan_send(cl, &a, -1), 0);
    CHECK_EQ(aco_rt_chan_send(cl, &b, -1), 0);
    CHECK_EQ(aco_rt_chan_close(cl), 0);
    CHECK_EQ(aco_rt_chan_close(cl), -EPIPE);
    CHECK_EQ(aco_rt_chan_close(NULL), -EINVAL);
    CHECK_EQ(aco_rt_chan_len(cl), 2);
    /* a send on the closed channel goes on and fails, index said */
    aco_rt_case_t c[4] = {
        {open0, ACO_RT_RECV, &r1},
        {cl, ACO_RT_SEND, &a},
        {cl, ACO_RT_RECV, &r2},
    };
    CHECK_EQ(aco_rt_chan_select(c, 3, &err, -1), 1);
    CHECK_EQ(err, -EPIPE);
    CHECK_EQ(aco_rt_chan_len(cl), 2);
    /* a receive on the closed channel that holds elements takes one */
    c[1] = c[2];
    err = 99;
    CHECK_EQ(aco_rt_chan_select(c, 2, &err, -1), 1);
    CHECK_EQ(err, 0);
    CHECK_EQ(r2, 1);
    CHECK_EQ(aco_rt_chan_select(c, 2, &err, -1), 1);
    CHECK_EQ(err, 0);
    CHECK_EQ(r2, 2);
    /* closed and empty: the receive case fails with -EPIPE */
    err = 99;
    r2 = 555;
    CHECK_EQ(aco_rt_chan_select(c, 2, &err, -1), 1);
    CHECK_EQ(err, -EPIPE);
    CHECK_EQ(aco_rt_chan_recv(cl, &r2, -1), -EPIPE);
    CHECK_EQ(aco_rt_chan_send(cl, &a, -1), -EPIPE);
    CHECK_EQ(aco_rt_chan_send(cl, &a, 0), -EPIPE);
    CHECK_EQ(aco_rt_chan_len(cl), 0);
    CHECK_EQ(r1, 0);
    /* case order: both ready, the first listed wins */
    CHECK_EQ(aco_rt_chan_send(open1, &b, -1), 0);
    aco_rt_case_t d[3] = {{cl, ACO_RT_RECV, &r2}, {open1, ACO_RT_RECV, &r1}};
    CHECK_EQ(aco_rt_chan_select(d, 2, &err, -1), 0);
    CHECK_EQ(err, -EPIPE);
    CHECK_EQ(aco_rt_chan_len(open1), 1);
    d[0] = (aco_rt_case_t){open1, ACO_RT_RECV, &r1};
    d[1] = (aco_rt_case_t){cl, ACO_RT_RECV, &r2};
    err = 99;
    CHECK_EQ(aco_rt_chan_select(d, 2, &err, -1), 0);
    CHECK_EQ(err, 0);
    CHECK_EQ(r1, 2);
    /* duplicates: one channel in several cases */
    int x = 41, y = 0;
    aco_rt_case_t e[4] = {
        {open1, ACO_RT_RECV, &y},
        {open1, ACO_RT_RECV, &y},
        {open1, ACO_RT_SEND, &x},
        {open1, ACO_RT_SEND, &x},
    };
    CHECK_EQ(aco_rt_chan_select(e, 4, &err, -1), 2);    /* empty: the first send */
    CHECK_EQ(aco_rt_chan_len(open1), 1);
    CHECK_EQ(aco_rt_chan_select(e, 4, &err, -1), 0);    /* the first receive */
    CHECK_EQ(y, 41);
    CHECK_EQ(aco_rt_chan_len(open1), 0);
    /* capacity 0: a select's own send never meets its own receive */
    aco_rt_case_t f[2] = {{open0, ACO_RT_SEND, &x}, {open0, ACO_RT_RECV, &y}};
    CHECK_EQ(aco_rt_chan_select(f, 2, &err, soon(30)), -ETIMEDOUT);
    aco_rt_case_t g[2] = {{open0, ACO_RT_RECV, &y}, {open0, ACO_RT_SEND, &x}};
    CHECK_EQ(aco_rt_chan_select(g, 2, &err, soon(10)), -ETIMEDOUT);
    CHECK_EQ(aco_rt_chan_free(open0), 0);
    CHECK_EQ(aco_rt_chan_free(open1), 0);
    CHECK_EQ(aco_rt_chan_free(cl), 0);
    CHECK_EQ(aco_rt_chan_free(NULL), 0);
}

/* ---- two selects, each sending and receiving on one rendezvous channel,
 * pair with each other: one sends, the other receives ---- */
static aco_rt_chan_t* pair_ch;
static int pair_idx[2], pair_in[2];
static void pair_co(void* arg) {
    int me = (int)(intptr_t)arg;
    int out = 100 + me, in = -1, err = 1;
    aco_rt_case_t c[2] = {{pair_ch, ACO_RT_SEND, &out}, {pair_ch, ACO_RT_RECV, &in}};
    if (me) { c[0] = (aco_rt_case_t){pair_ch, ACO_RT_RECV, &in}; c[1] = (aco_rt_case_t){pair_ch, ACO_RT_SEND, &out}; }
    int r = aco_rt_chan_select(c, 2, &err, soon(2000));
    CHECK_GE(r, 0);
    CHECK_EQ(err, 0);
    pair_idx[me] = c[r].op;
    pair_in[me] = in;
}
static void pairs(aco_rt_sched_t* s) {
    for (int round = 0; round < 4; round++) {
        pair_ch = aco_rt_chan_new(sizeof(int), 0);
        aco_rt_co_t* a = aco_rt_spawn(s, pair_co, (void*)0);
        aco_rt_co_t* b = aco_rt_spawn(s, pair_co, (void*)1);
        CHECK(a && b);
        CHECK_EQ(aco_rt_join(a, 0), -EPERM);
        CHECK_EQ(aco_rt_detach(a), 0);
        CHECK_EQ(aco_rt_detach(b), 0);
        CHECK_EQ(aco_rt_detach(b), -EINVAL);
        test_run(s);
        CHECK_NE(pair_idx[0], pair_idx[1]);
        int rx = pair_idx[0] == ACO_RT_RECV ? 0 : 1;
        CHECK_EQ(pair_in[rx], 100 + (1 - rx));
        CHECK_EQ(aco_rt_chan_free(pair_ch), 0);
    }
}

/* ---- 64 cases, the element on a random one; leftovers take nothing ---- */
#define NC 64
static aco_rt_chan_t* many[NC];
static int many_pick, many_got_idx;
static long many_got;
static void many_rx(void* arg) {
    (void)arg;
    long buf[NC];
    aco_rt_case_t c[NC];
    for (int i = 0; i < NC; i++) { buf[i] = -1; c[i] = (aco_rt_case_t){many[i], ACO_RT_RECV, &buf[i]}; }
    int err = 7;
    many_got_idx = aco_rt_chan_select(c, NC, &err, soon(2000));
    CHECK_EQ(err, 0);
    CHECK_GE(many_got_idx, 0);
    many_got = buf[many_got_idx];
    for (int i = 0; i < NC; i++) if (i != many_got_idx) CHECK_EQ(buf[i], -1);
}
static void many_tx(void* arg) {
    int buffered = (int)(intptr_t)arg;
    aco_rt_yield();
    long v = 1000 + many_pick;
    CHECK_EQ(aco_rt_chan_send(many[many_pick], &v, soon(2000)), 0);
    /* the select is over: a send on any other case's channel finds nobody */
    if (!buffered)
    for (int i = 0; i < NC; i += 7) {
        if (i == many_pick) continue;
        CHECK_EQ(aco_rt_chan_send(many[i], &v, soon(2)), -ETIMEDOUT);
    }
    if (!buffered) CHECK_EQ(aco_rt_chan_send(many[many_pick], &v, soon(2)), -ETIMEDOUT);
}
/* run rx and tx together */
static void many_cases2(aco_rt_sched_t* s) {
    uint64_t st = 0x9E3779B97F4A7C15ULL;
    for (int round = 0; round < 8; round++) {
        for (int i = 0; i < NC; i++) { many[i] = aco_rt_chan_new(sizeof(long), round & 1); CHECK(many[i]); }
        many_pick = round == 0 ? NC - 1 : round == 1 ? 0 : (int)(test_rand(&st) % NC);
        many_got_idx = -2;
        CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, many_rx, NULL)), 0);
        CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, many_tx, (void*)(intptr_t)(round & 1))), 0);
        test_run(s);
        CHECK_EQ(many_got_idx, many_pick);
        CHECK_EQ(many_got, 1000 + many_pick);
        for (int i = 0; i < NC; i++) CHECK_EQ(aco_rt_chan_free(many[i]), 0);
    }
}

/* ---- a channel closed under a waiting select: its case ends it ---- */
static aco_rt_chan_t *cw_a, *cw_b;
static int cw_r, cw_err;
static void cw_waiter(void* arg) {
    (void)arg;
    int x = 3, y = 0;
    aco_rt_case_t c[3] = {{cw_a, ACO_RT_RECV, &y}, {cw_b, ACO_RT_SEND, &x}, {cw_b, ACO_RT_RECV, &y}};
    cw_err = 1;
    cw_r = aco_rt_chan_select(c, 3, &cw_err, soon(2000));
}
static void cw_closer(void* arg) {
    (void)arg;
    aco_rt_yield();
    /* a waiting select keeps both channels busy */
    CHECK_EQ(aco_rt_chan_free(cw_a), -EBUSY);
    CHECK_EQ(aco_rt_chan_free(cw_b), -EBUSY);
    CHECK_EQ(aco_rt_chan_close(cw_b), 0);
}
static void close_under_select(aco_rt_sched_t* s) {
    cw_a = aco_rt_chan_new(sizeof(int), 0);
    cw_b = aco_rt_chan_new(sizeof(int), 0);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, cw_waiter, NULL)), 0);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, cw_closer, NULL)), 0);
    test_run(s);
    /* both cases on cw_b become possible at once: the header gives the
     * send's index (the close takes the senders first), with -EPIPE */
    CHECK_EQ(cw_r, 1);
    CHECK_EQ(cw_err, -EPIPE);
    CHECK_EQ(aco_rt_chan_free(cw_a), 0);
    CHECK_EQ(aco_rt_chan_free(cw_b), 0);
}

/* ---- free while a select waits, and after it was woken but before it ran ---- */
static aco_rt_chan_t *fw_a, *fw_b;
static int fw_stage;
static void fw_waiter(void* arg) {
    (void)arg;
    int y = 0, err = 0;
    aco_rt_case_t c[2] = {{fw_a, ACO_RT_RECV, &y}, {fw_b, ACO_RT_RECV, &y}};
    CHECK_EQ(aco_rt_chan_select(c, 2, &err, soon(2000)), 0);
    CHECK_EQ(y, 5);
    fw_stage = 2;
}
static void fw_sender(void* arg) {
    (void)arg;
    aco_rt_yield();
    int v = 5;
    CHECK_EQ(aco_rt_chan_free(fw_b), -EBUSY);
    CHECK_EQ(aco_rt_chan_send(fw_a, &v, soon(2000)), 0);
    /* the select's case ended it, but it has not run on: still busy */
    if (fw_stage != 2) CHECK_EQ(aco_rt_chan_free(fw_b), -EBUSY);
    aco_rt_yield();
    aco_rt_yield();
    CHECK_EQ(fw_stage, 2);
    CHECK_EQ(aco_rt_chan_free(fw_b), 0);
    fw_b = NULL;
}
static void free_under_select(aco_rt_sched_t* s) {
    fw_a = aco_rt_chan_new(sizeof(int), 0);
    fw_b = aco_rt_chan_new(sizeof(int), 0);
    fw_stage = 0;
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, fw_waiter, NULL)), 0);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, fw_sender, NULL)), 0);
    test_run(s);
    CHECK(fw_b == NULL);
    CHECK_EQ(aco_rt_chan_free(fw_a), 0);
}

/* ---- outside cos ---- */
static void outside(void) {
    aco_rt_chan_t* ch = aco_rt_chan_new(sizeof(int), 1);
    int v = 1, err;
    aco_rt_case_t c[1] = {{ch, ACO_RT_RECV, &v}};
    CHECK_EQ(aco_rt_chan_send(ch, &v, 0), -EPERM);
    CHECK_EQ(aco_rt_chan_recv(ch, &v, 0), -EPERM);
    CHECK_EQ(aco_rt_chan_select(c, 1, &err, 0), -EPERM);
    CHECK_EQ(aco_rt_chan_len(ch), 0);
    CHECK_EQ(aco_rt_chan_len(NULL), 0);
    CHECK_EQ(aco_rt_chan_close(ch), 0);
    CHECK_EQ(aco_rt_chan_free(ch), 0);
    /* creation limits */
    errno = 0;
    CHECK(aco_rt_chan_new(0, 4) == NULL);
    CHECK_EQ(errno, EINVAL);
    errno = 0;
    CHECK(aco_rt_chan_new(SIZE_MAX, 2) == NULL);
    CHECK(errno == ENOMEM || errno == EINVAL);
    errno = 0;
    CHECK(aco_rt_chan_new(8, SIZE_MAX / 4) == NULL);
    CHECK(errno == ENOMEM || errno == EINVAL);
    /* a rendezvous channel of huge elements needs no ring: made or refused */
    errno = 0;
    aco_rt_chan_t* huge = aco_rt_chan_new(SIZE_MAX / 2, 0);
    if (huge == NULL) CHECK(errno == ENOMEM || errno == EINVAL);
    CHECK_EQ(aco_rt_chan_free(huge), 0);
    aco_rt_chan_t* big0 = aco_rt_chan_new((size_t)1 << 20, 0);   /* 1 MiB elements, rendezvous */
    CHECK(big0 != NULL);
    CHECK_EQ(aco_rt_chan_free(big0), 0);
}

static void body(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    test_go(s, refusals_co, NULL);
    test_go(s, closed_co, NULL);
    pairs(s);
    many_cases2(s);
    close_under_select(s);
    free_under_select(s);
}

int main(void) {
    outside();
    test_on_backends(NULL, body, NULL);
    outside();
    puts("test_chan_bb_select: ok");
    return 0;
}
