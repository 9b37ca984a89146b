/* test_handoff.c - a co that blocks or yields runs the next ready co itself
 * (aco_rt.h: the model), and that changes nothing a program can see but
 * the speed.
 *
 *   - Ping-pong over unbuffered channels between cos of two share stacks:
 *     nearly every run is a hand-off (stats.handoffs), the values arrive in
 *     order, and the scheduler still comes round every 64 runs.
 *   - No starvation: while a pair hands off to each other without end, a
 *     sleeping co wakes (its timer is looked at), a third co that yields
 *     gets its turns in FIFO order, and an I/O wait completes.
 *   - FIFO: cos yielding in a loop run in strict round robin, hand-offs or
 *     not; a yield with nobody else ready returns at once, without a
 *     switch.
 *   - Cos of one share stack meet in the loop (their frames are copied
 *     there), and stay intact; a mutex handed over between two cos and a
 *     semaphore wake work the same.
 */
#define _GNU_SOURCE
#include "rt_test.h"

#include <unistd.h>

static aco_rt_chan_t *ping, *pong;
static volatile int stop_pair;

static void pong_co(void* arg) {
    (void)arg;
    int v;
    while (aco_rt_chan_recv(ping, &v, -1) == 0)
        if (aco_rt_chan_send(pong, &v, -1) != 0) break;
}

/* ---- ping-pong: hand-offs, order ------------------------------------------ */

static void pingpong(void* arg) {
    (void)arg;
    aco_rt_stats_t a, b;
    aco_rt_co_t* p = aco_rt_spawn(NULL, pong_co, NULL);
    CHECK(p != NULL);
    aco_rt_stats(NULL, &a);
    for (int i = 0; i < 10000; i++) {
        int v = i;
        CHECK_EQ(aco_rt_chan_send(ping, &v, -1), 0);
        CHECK_EQ(aco_rt_chan_recv(pong, &v, -1), 0);
        CHECK_EQ(v, i);
    }
    aco_rt_stats(NULL, &b);
    uint64_t runs = b.switches - a.switches, hand = b.handoffs - a.handoffs;
    /* Two runs a round, all but one in 64 of them handed off. */
    CHECK_GE(runs, 20000);
    CHECK_LE(runs, 20002);
    CHECK_GE(hand, runs - runs / 64 - 2);
    CHECK_LT(hand, runs);       /* the loop's turns are there */
    CHECK_EQ(aco_rt_chan_close(ping), 0);
    CHECK_EQ(aco_rt_join(p, -1), 0);
}

/* ---- no starvation --------------------------------------------------------- */

static void pair_a(void* arg) {
    (void)arg;
    int v = 0;
    while (!stop_pair) {
        if (aco_rt_chan_send(ping, &v, -1) != 0) break;
        if (aco_rt_chan_recv(pong, &v, -1) != 0) break;
    }
    aco_rt_chan_close(ping);
}

static int yields_done;

static void yielder(void* arg) {
    (void)arg;
    for (int i = 0; i < 1000; i++) CHECK_EQ(aco_rt_yield(), 0);
    yields_done = 1;
}

static void starvation(void* arg) {
    (void)arg;
    stop_pair = 0;
    yields_done = 0;
    aco_rt_co_t* a = aco_rt_spawn(NULL, pair_a, NULL);
    aco_rt_co_t* b = aco_rt_spawn(NULL, pong_co, NULL);
    aco_rt_co_t* y = aco_rt_spawn(NULL, yielder, NULL);
    CHECK(a && b && y);
    /* A timer and I/O while the pair hands off to each other. */
    int64_t t0 = aco_rt_now();
    CHECK_EQ(aco_rt_sleep(2 * 1000 * 1000), 0);
    int64_t slept = aco_rt_now() - t0;
    CHECK_GE(slept, 2 * 1000 * 1000);
    CHECK_LT(slept, 2000LL * 1000 * 1000);     /* (a bound a starved timer misses) */
    int pfd[2];
    CHECK_EQ(pipe(pfd), 0);
    CHECK_EQ(write(pfd[1], "x", 1), 1);
    char c;
    CHECK_EQ(aco_rt_read(pfd[0], &c, 1, aco_rt_in_ms(2000)), 1);
    CHECK_EQ(aco_rt_join(y, aco_rt_in_ms(5000)), 0);
    CHECK(yields_done);
    stop_pair = 1;
    CHECK_EQ(aco_rt_join(a, aco_rt_in_ms(5000)), 0);
    CHECK_EQ(aco_rt_join(b, aco_rt_in_ms(5000)), 0);
    close(pfd[0]);
    close(pfd[1]);
    aco_rt_stats_t st;
    aco_rt_stats(NULL, &st);
    CHECK_GT(st.handoffs, 1000);
}

/* ---- FIFO round robin ------------------------------------------------------ */

static int order[3000];
static int norder;

static void rr(void* arg) {
    int id = (int)(intptr_t)arg;
    for (int i = 0; i < 500; i++) {
        order[norder++] = id;
        CHECK_EQ(aco_rt_yield(), 0);
    }
}

static void fifo(void* arg) {
    (void)arg;
    norder = 0;
    aco_rt_co_t* c[3];
    for (int i = 0; i < 3; i++) CHECK((c[i] = aco_rt_spawn(NULL, rr, (void*)(intptr_t)i)) != NULL);
    for (int i = 0; i < 3; i++) CHECK_EQ(aco_rt_join(c[i], -1), 0);
    CHECK_EQ(norder, 1500);
    for (int i = 0; i < norder; i++) CHECK_EQ(order[i], i % 3);
    /* Alone: a yield is no switch. */
    aco_rt_stats_t a, b;
    aco_rt_stats(NULL, &a);
    for (int i = 0; i < 10; i++) CHECK_EQ(aco_rt_yield(), 0);
    aco_rt_stats(NULL, &b);
    CHECK_EQ(b.switches - a.switches, 0);
}

/* ---- one share stack ------------------------------------------------------- */

static aco_rt_mutex_t mu;
static int in_mutex, mutex_overlap;

static void stacker(void* arg) {
    uint32_t seed = (uint32_t)(uintptr_t)arg;
    volatile unsigned char buf[700];
    for (size_t i = 0; i < sizeof(buf); i++) buf[i] = (unsigned char)(seed * 31 + i);
    for (int r = 0; r < 200; r++) {
        CHECK_EQ(aco_rt_mutex_lock(&mu, -1), 0);
        if (in_mutex++) mutex_overlap++;
        CHECK_EQ(aco_rt_yield(), 0);
        in_mutex--;
        CHECK_EQ(aco_rt_mutex_unlock(&mu), 0);
        for (size_t i = 0; i < sizeof(buf); i++)
            if (buf[i] != (unsigned char)(seed * 31 + i))
                TEST_FAIL_AT(__FILE__, __LINE__, "co %u: byte %zu changed", seed, i);
    }
}

static void one_stack(void* arg) {
    (void)arg;
    aco_rt_mutex_init(&mu);
    in_mutex = mutex_overlap = 0;
    aco_rt_co_t* c[4];
    for (int i = 0; i < 4; i++)
        CHECK((c[i] = aco_rt_spawn(NULL, stacker, (void*)(uintptr_t)(i + 1))) != NULL);
    for (int i = 0; i < 4; i++) CHECK_EQ(aco_rt_join(c[i], -1), 0);
    CHECK_EQ(mutex_overlap, 0);
}

static void body(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    ping = aco_rt_chan_new(sizeof(int), 0);
    pong = aco_rt_chan_new(sizeof(int), 0);
    CHECK(ping && pong);
    test_go(s, pingpong, NULL);
    CHECK_EQ(aco_rt_chan_free(ping), 0);
    ping = aco_rt_chan_new(sizeof(int), 0);
    test_go(s, starvation, NULL);
    test_go(s, fifo, NULL);
    test_go(s, one_stack, NULL);
    CHECK_EQ(aco_rt_chan_free(ping), 0);
    CHECK_EQ(aco_rt_chan_free(pong), 0);
}

static void body_one(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    test_go(s, one_stack, NULL);
    test_go(s, fifo, NULL);
    aco_rt_stats_t st;
    aco_rt_stats(s, &st);
    CHECK_EQ(st.handoffs, 0);       /* every co shares the one stack */
}

int main(void) {
    test_on_backends(NULL, body, NULL);
    /* One share stack: every co meets the others in the loop. */
    aco_rt_opts_t one = {.share_stacks = 1};
    test_on_backends(&one, body_one, NULL);
    printf("test_handoff: ok\n");
    return 0;
}
