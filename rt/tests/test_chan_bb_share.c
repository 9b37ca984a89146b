/* test_chan_bb_share.c - selects of many cases over a few channels, by cos
 * of two pool threads whose cos all share one 64 KiB share stack each, from
 * aco_rt.h alone: every element (40 bytes and 2 KiB, built and received in
 * the co's stack frames) taken exactly once and whole, whatever mix of
 * send and receive cases, duplicates, capacities and deadlines; each co's
 * own frames (a canary beside its buffers) untouched while it was parked.
 * Then -EDEADLK of a lone scheduler whose co waits on a channel, the cos
 * left as they are. */
#include "rt_test.h"

#include <stdatomic.h>
#include <stdint.h>

#define NCH 3
#define NCO 8
#define OPS (FEW ? 150 : 1500)
#define NV (NCO * OPS)

static aco_rt_chan_t* chs[NCH];
static size_t esz;                 /* 40 or 2048 */
static _Atomic int sent[NV];       /* 1: a send case said 0 */
static _Atomic int got[NV];
static _Atomic int closers;

static void fill(unsigned char* b, uint32_t id) {
    memcpy(b, &id, 4);
    for (size_t i = 4; i < esz; i++) b[i] = (unsigned char)(id * 31 + i);
}
static uint32_t verify(const unsigned char* b) {
    uint32_t id;
    memcpy(&id, b, 4);
    CHECK_LT(id, NV);
    for (size_t i = 4; i < esz; i++)
        if (b[i] != (unsigned char)(id * 31 + i))
            TEST_FAIL_AT(__FILE__, __LINE__, "element %u torn at byte %zu", id, i);
    return id;
}

__attribute__((noinline)) static void one_select(int me, int k, uint64_t* st) {
    unsigned char canary1[64];
    unsigned char bufs[4][2048];
    unsigned char canary2[64];
    memset(canary1, 0xa0 + me, sizeof(canary1));
    memset(canary2, 0xb0 + me, sizeof(canary2));
    aco_rt_case_t c[4];
    int n = 1 + (int)(test_rand(st) % 4);
    uint32_t myid = (uint32_t)(me * OPS + k);
    int has_send = 0;
    for (int i = 0; i < n; i++) {
        uint64_t r = test_rand(st);
        c[i].ch = chs[r % NCH];
        c[i].op = (r >> 8) & 1 ? ACO_RT_SEND : ACO_RT_RECV;
        if (c[i].op == ACO_RT_SEND) { fill(bufs[i], myid); has_send = 1; }
        else memset(bufs[i], 0xee, esz);
        c[i].elem = bufs[i];
        if (i > 0 && (r >> 16) % 5 == 0) { c[i] = c[i - 1]; c[i].elem = bufs[i]; memcpy(bufs[i], bufs[i - 1], esz); }
    }
    int err = 1;
    uint64_t r = test_rand(st);
    int64_t dl = (r & 7) == 0 ? 0 : aco_rt_now() + (int64_t)(r % 200000);
    int idx = aco_rt_chan_select(c, n, &err, dl);
    for (size_t i = 0; i < sizeof(canary1); i++) {
        CHECK_EQ(canary1[i], (unsigned char)(0xa0 + me));
        CHECK_EQ(canary2[i], (unsigned char)(0xb0 + me));
    }
    if (idx == -ETIMEDOUT) {
        for (int i = 0; i < n; i++)
            if (c[i].op == ACO_RT_RECV) {
                unsigned char* b = bufs[i];
                for (size_t j = 0; j < esz; j++) CHECK_EQ(b[j], 0xee);
            }
        return;
    }
    CHECK_GE(idx, 0);
    CHECK_LT(idx, n);
    CHECK_EQ(err, 0);
    /* the other cases' buffers are untouched */
    for (int i = 0; i < n; i++) {
        if (i == idx) continue;
        if (c[i].op == ACO_RT_RECV) for (size_t j = 0; j < esz; j++) CHECK_EQ(bufs[i][j], 0xee);
        else CHECK_EQ(verify(bufs[i]), myid);
    }
    if (c[idx].op == ACO_RT_SEND) {
        CHECK_EQ(atomic_exchange(&sent[myid], 1), 0);
    } else {
        uint32_t id = verify(bufs[idx]);
        atomic_fetch_add(&got[id], 1);
    }
    (void)has_send;
}

static void worker(void* arg) {
    int me = (int)(intptr_t)arg;
    uint64_t st = 0xC0FFEEULL * (uint64_t)(me + 1);
    for (int k = 0; k < OPS; k++) one_select(me, k, &st);
    /* the last worker closes; then drain what the rings hold */
    if (atomic_fetch_add(&closers, 1) == NCO - 1)
        for (int i = 0; i < NCH; i++) CHECK_EQ(aco_rt_chan_close(chs[i]), 0);
}
static void drainer(void* arg) {
    (void)arg;
    unsigned char b[2048];
    for (int i = 0; i < NCH; i++) {
        int r;
        while ((r = aco_rt_chan_recv(chs[i], b, aco_rt_now() + 20000 * MS)) == 0)
            atomic_fetch_add(&got[verify(b)], 1);
        CHECK_EQ(r, -EPIPE);
    }
}

static void round_(aco_rt_pool_t* p, size_t e, int capmix) {
    esz = e;
    for (int i = 0; i < NCH; i++) {
        chs[i] = aco_rt_chan_new(e, capmix ? (size_t)i : 0);
        CHECK(chs[i]);
    }
    for (int i = 0; i < NV; i++) { atomic_store(&sent[i], 0); atomic_store(&got[i], 0); }
    atomic_store(&closers, 0);
    for (int i = 0; i < NCO; i++)
        CHECK_EQ(aco_rt_detach(aco_rt_spawn(aco_rt_pool_sched(p, (unsigned)i & 1), worker, (void*)(intptr_t)i)), 0);
    CHECK_EQ(aco_rt_pool_wait(p, ACO_RT_POOL_DRAIN, aco_rt_now() + 60000 * MS), 0);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(aco_rt_pool_sched(p, 0), drainer, NULL)), 0);
    CHECK_EQ(aco_rt_pool_wait(p, ACO_RT_POOL_DRAIN, aco_rt_now() + 60000 * MS), 0);
    long nsent = 0;
    for (int i = 0; i < NV; i++) {
        int s = atomic_load(&sent[i]), g = atomic_load(&got[i]);
        if (g != s) TEST_FAIL_AT(__FILE__, __LINE__, "element %d: sent %d, received %d (esz %zu)", i, s, g, e);
        nsent += s;
    }
    if (getenv("BB_VERBOSE")) printf("esz %zu capmix %d: %ld sent\n", e, capmix, nsent);
    CHECK_GT(nsent, 0);
    for (int i = 0; i < NCH; i++) CHECK_EQ(aco_rt_chan_free(chs[i]), 0);
}

/* ---- a lone scheduler whose only co waits on a channel: -EDEADLK ---- */
static aco_rt_chan_t* dch;
static int d_got;
static void d_waiter(void* arg) {
    (void)arg;
    int v = 0;
    CHECK_EQ(aco_rt_chan_recv(dch, &v, -1), 0);
    d_got = v;
}
static void d_sender(void* arg) {
    (void)arg;
    int v = 31;
    CHECK_EQ(aco_rt_chan_send(dch, &v, -1), 0);
}
static void deadlock(int b) {
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        /* a process of one scheduler */
        aco_rt_opts_t o;
        memset(&o, 0, sizeof(o));
        o.backend = b;
        aco_rt_sched_t* s = aco_rt_sched_new(&o);
        CHECK(s);
        dch = aco_rt_chan_new(sizeof(int), 0);
        CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, d_waiter, NULL)), 0);
        CHECK_EQ(aco_rt_sched_run(s), -EDEADLK);
        CHECK_EQ(aco_rt_chan_free(dch), -EBUSY);
        /* the co is left as it is: a sender spawned now meets it */
        CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, d_sender, NULL)), 0);
        CHECK_EQ(aco_rt_sched_run(s), 0);
        CHECK_EQ(d_got, 31);
        CHECK_EQ(aco_rt_chan_free(dch), 0);
        aco_rt_sched_free(s);
        exit(0);
    }
    int st;
    CHECK_EQ(waitpid(pid, &st, 0), pid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

int main(void) {
    test_watchdog();
    int bs[8];
    int nb = test_backends(bs, 8);
    for (int b = 0; b < nb; b++) {
        test_backend_id = bs[b];
        test_backend_label = test_backend_str(bs[b]);
        deadlock(bs[b]);
        aco_rt_pool_opts_t o;
        memset(&o, 0, sizeof(o));
        o.threads = 2;
        o.sched.backend = bs[b];
        o.sched.share_stacks = 1;
        o.sched.stack_size = 64 * 1024;
        aco_rt_pool_t* p = aco_rt_pool_new(&o);
        CHECK(p != NULL);
        round_(p, 40, 0);
        round_(p, 40, 1);
        round_(p, 2048, 0);
        round_(p, 2048, 1);
        CHECK_EQ(aco_rt_pool_free(p), 0);
    }
    puts("test_chan_bb_share: ok");
    return 0;
}
