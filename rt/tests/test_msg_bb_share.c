/* test_msg_bb_share.c - the share-stack rule of aco_rt.h for aco_rt_recvmsg
 * and aco_rt_sendmsg ("msg and every buffer it points to may lie anywhere"),
 * from the header alone: cos on ONE 64 KiB share stack, each with its
 * msghdr, iovec array, buffers, msg_name and control buffer as locals of
 * its own frame (frames of different depths, canaries around them):
 *   - 16 cos parked at once in recvmsg on UDP v4, UDP v6, named Unix
 *     datagram and seqpacket sockets, while a co stomps on the stack; then
 *     the datagrams come, in reverse order: each co gets exactly its own
 *     bytes, its own sender's address, its own descriptor, msg_flags and
 *     lengths as recvmsg(2) writes them, canaries intact;
 *   - 16 cos parked at once in sendmsg to full Unix datagram peers
 *     (connected, and by an address on the stack): once the peers drain,
 *     each peer gets exactly its co's datagram and descriptor;
 *   - hundreds of cos (pairs over UDP and Unix datagram sockets) exchanging
 *     numbered datagrams, each echoed back, the sender's address checked.
 * Both backends. */
#define _GNU_SOURCE
#include "msg_bb.h"

#define N 16

static int rfd[N], sfd[N], pipes[N][2];
static struct sockaddr_storage saddr[N], raddr[N];
static socklen_t saddrl[N], raddrl[N];
static int kind_of(int i) {
    static const int k[4] = {K_UDP4, K_UDP6, K_UNIX_NAMED, K_SEQPACKET};
    return k[i % 4];
}
static int with_fd(int i) { return kind_of(i) == K_UNIX_NAMED || kind_of(i) == K_SEQPACKET; }
static size_t len_of(int i) { return (size_t)(40 + 7 * i); }
static int done_rx;

/* ---- receivers parked at once ---- */
__attribute__((noinline)) static void rx_frame(int i) {
    unsigned char canary1[32];
    unsigned char b0[17], b1[64], b2[200];
    struct iovec v[3];
    struct sockaddr_storage from;
    ctl8_t ctl;
    struct msghdr m;
    unsigned char canary2[32];
    memset(canary1, 0xC0 + i, sizeof(canary1));
    memset(canary2, 0xD0 + i, sizeof(canary2));
    memset(b0, 0, sizeof(b0));
    memset(b1, 0, sizeof(b1));
    memset(b2, 0xEE, sizeof(b2));
    memset(&from, 0xEE, sizeof(from));
    memset(&ctl, 0xEE, sizeof(ctl));
    v[0].iov_base = b0;
    v[0].iov_len = sizeof(b0);
    v[1].iov_base = b1;
    v[1].iov_len = 0;           /* a piece of none between */
    v[2].iov_base = b2;
    v[2].iov_len = 150;
    memset(&m, 0, sizeof(m));
    m.msg_iov = v;
    m.msg_iovlen = 3;
    m.msg_name = &from;
    m.msg_namelen = sizeof(from);
    m.msg_control = ctl.buf;
    m.msg_controllen = sizeof(ctl.buf);
    m.msg_flags = -1;
    ssize_t r = aco_rt_recvmsg(rfd[i], &m, MSG_CMSG_CLOEXEC, in_ms(10000));
    if (r != (ssize_t)len_of(i))
        TEST_FAIL_AT(__FILE__, __LINE__, "co %d (%s): recvmsg %zd, want %zu", i,
                     kind_name[kind_of(i)], r, len_of(i));
    for (size_t j = 0; j < len_of(i); j++) {
        unsigned char c = j < 17 ? b0[j] : b2[j - 17];
        if (c != pat((unsigned)i, j))
            TEST_FAIL_AT(__FILE__, __LINE__, "co %d: byte %zu is %#x, want %#x", i, j, c,
                         pat((unsigned)i, j));
    }
    for (size_t j = len_of(i) - 17; j < sizeof(b2); j++) CHECK_EQ(b2[j], 0xEE);
    CHECK_EQ(m.msg_iov, v);
    CHECK_EQ(m.msg_iovlen, 3);
    CHECK_EQ(m.msg_flags & (MSG_TRUNC | MSG_CTRUNC), 0);
    if (kind_of(i) != K_SEQPACKET) {
        if (m.msg_namelen != saddrl[i] || memcmp(&from, &saddr[i], saddrl[i]) != 0)
            TEST_FAIL_AT(__FILE__, __LINE__, "co %d (%s): namelen %u (want %u), or not its sender's address",
                         i, kind_name[kind_of(i)], (unsigned)m.msg_namelen, (unsigned)saddrl[i]);
    }
    CHECK(m.msg_name == &from);
    CHECK(m.msg_control == ctl.buf);
    int rf[8];
    int k = got_fds(&m, rf, 8);
    CHECK_EQ(k, with_fd(i));
    if (k) {
        CHECK_EQ(ino_of(rf[0]), ino_of(pipes[i][0]));
        CHECK(fcntl(rf[0], F_GETFD) & FD_CLOEXEC);
        CHECK_EQ(aco_rt_close(rf[0]), 0);
    } else {
        CHECK_EQ(m.msg_controllen, 0);
    }
    for (size_t j = 0; j < sizeof(canary1); j++) {
        CHECK_EQ(canary1[j], 0xC0 + i);
        CHECK_EQ(canary2[j], 0xD0 + i);
    }
}
static void rx_co(void* arg) {
    int i = (int)(intptr_t)arg;
    /* frames at different depths: each co's locals lie elsewhere */
    volatile char pad[1 + 96 * (i % 6)];
    pad[0] = (char)i;
    rx_frame(i);
    CHECK_EQ(pad[0], (char)i);
    done_rx++;
}

static volatile int stomping;
static void stomper(void* arg) {
    (void)arg;
    while (stomping) {
        volatile unsigned char junk[12000];
        for (size_t j = 0; j < sizeof(junk); j += 8) junk[j] = 0x5A;
        aco_rt_yield();
    }
}

static void wait_parked(aco_rt_sched_t* s, uint64_t n) {
    for (int t = 0; t < 2000; t++) {
        aco_rt_stats_t st;
        aco_rt_stats(s, &st);
        if (st.cos_parked >= n) return;
        aco_rt_sleep(1 * MS);
    }
    TEST_FAIL_AT(__FILE__, __LINE__, "the cos did not all park");
}

static void case_rx(aco_rt_sched_t* s) {
    int before = test_open_fds();
    for (int i = 0; i < N; i++) {
        int fd[2];
        mk_pair(kind_of(i), fd, &saddr[i], &saddrl[i]);
        sfd[i] = fd[0];
        rfd[i] = fd[1];
        CHECK_EQ(pipe2(pipes[i], O_CLOEXEC), 0);
    }
    done_rx = 0;
    aco_rt_co_t* cos[N];
    for (int i = 0; i < N; i++) cos[i] = go(rx_co, (void*)(intptr_t)i);
    stomping = 1;
    aco_rt_co_t* st = go(stomper, NULL);
    wait_parked(s, N);
    CHECK_EQ(done_rx, 0);
    static unsigned char b[N][400];
    for (int i = N - 1; i >= 0; i--) {
        for (size_t j = 0; j < len_of(i); j++) b[i][j] = pat((unsigned)i, j);
        struct msghdr m;
        struct iovec v;
        ctl8_t ctl;
        fill_send(&m, &v, b[i], len_of(i), NULL, 0, &pipes[i][0], with_fd(i), &ctl);
        CHECK_EQ(sendmsg(sfd[i], &m, MSG_DONTWAIT), (ssize_t)len_of(i));
        if (i % 3 == 0) aco_rt_yield();
    }
    for (int i = 0; i < N; i++) join(cos[i]);
    stomping = 0;
    join(st);
    CHECK_EQ(done_rx, N);
    for (int i = 0; i < N; i++) {
        CHECK_EQ(aco_rt_close(sfd[i]), 0);
        CHECK_EQ(aco_rt_close(rfd[i]), 0);
        CHECK_EQ(aco_rt_close(pipes[i][0]), 0);
        CHECK_EQ(aco_rt_close(pipes[i][1]), 0);
    }
    CHECK_EQ(test_open_fds(), before);
}

/* ---- senders parked at once ---- */
static int filled[N];
static int done_tx;
__attribute__((noinline)) static void tx_frame(int i) {
    unsigned char canary[32];
    unsigned char b[300];
    struct sockaddr_storage to;
    struct msghdr m;
    struct iovec v;
    ctl8_t ctl;
    memset(canary, 0xA0 + i, sizeof(canary));
    for (size_t j = 0; j < len_of(i); j++) b[j] = pat((unsigned)i + 100, j);
    to = raddr[i];
    int by_addr = i % 2;
    fill_send(&m, &v, b, len_of(i), by_addr ? &to : NULL, raddrl[i], &pipes[i][0], 1, &ctl);
    ssize_t r = aco_rt_sendmsg(sfd[i], &m, 0, in_ms(10000));
    if (r != (ssize_t)len_of(i))
        TEST_FAIL_AT(__FILE__, __LINE__, "co %d: sendmsg %zd, want %zu", i, r, len_of(i));
    for (size_t j = 0; j < sizeof(canary); j++) CHECK_EQ(canary[j], 0xA0 + i);
}
static void tx_co(void* arg) {
    int i = (int)(intptr_t)arg;
    volatile char pad[1 + 128 * (i % 5)];
    pad[0] = (char)i;
    tx_frame(i);
    CHECK_EQ(pad[0], (char)i);
    done_tx++;
}
static void case_tx(aco_rt_sched_t* s) {
    int before = test_open_fds();
    for (int i = 0; i < N; i++) {
        if (i % 2) {    /* by address: an unconnected sender */
            struct sockaddr_storage sa;
            socklen_t sal;
            rfd[i] = unix_bound(SOCK_DGRAM, &raddr[i], &raddrl[i]);
            sfd[i] = unix_bound(SOCK_DGRAM, &sa, &sal);
        } else {
            int fd[2];
            mk_pair(K_UNIX_PAIR, fd, NULL, NULL);
            sfd[i] = fd[0];
            rfd[i] = fd[1];
        }
        CHECK_EQ(pipe2(pipes[i], O_CLOEXEC), 0);
        filled[i] = 0;
        for (;;) {
            ssize_t r = i % 2 ? sendto(sfd[i], "f", 1, MSG_DONTWAIT, (struct sockaddr*)&raddr[i], raddrl[i])
                              : send(sfd[i], "f", 1, MSG_DONTWAIT);
            if (r < 0) {
                CHECK_EQ(errno, EAGAIN);
                break;
            }
            filled[i]++;
        }
    }
    done_tx = 0;
    aco_rt_co_t* cos[N];
    for (int i = 0; i < N; i++) cos[i] = go(tx_co, (void*)(intptr_t)i);
    stomping = 1;
    aco_rt_co_t* st = go(stomper, NULL);
    wait_parked(s, N);
    aco_rt_sleep(20 * MS);
    CHECK_EQ(done_tx, 0);
    /* drain every peer, newest first; each gets its co's datagram last */
    int got[N];
    memset(got, 0, sizeof(got));
    for (int round = 0; round < 4000; round++) {
        int all = 1;
        for (int i = N - 1; i >= 0; i--) {
            for (;;) {
                unsigned char b[400];
                ctl8_t ctl;
                struct iovec v = {b, sizeof(b)};
                struct msghdr m;
                fill_recv(&m, &v, &ctl);
                ssize_t r = recvmsg(rfd[i], &m, MSG_DONTWAIT);
                if (r < 0) break;
                int rf[8];
                int k = got_fds(&m, rf, 8);
                if (r == 1 && b[0] == 'f' && k == 0) {
                    filled[i]--;
                    continue;
                }
                CHECK_EQ(filled[i], 0);     /* after its filler */
                if (r != (ssize_t)len_of(i))
                    TEST_FAIL_AT(__FILE__, __LINE__, "peer %d: %zd bytes, want %zu", i, r, len_of(i));
                for (size_t j = 0; j < len_of(i); j++)
                    if (b[j] != pat((unsigned)i + 100, j))
                        TEST_FAIL_AT(__FILE__, __LINE__, "peer %d: byte %zu differs", i, j);
                CHECK_EQ(k, 1);
                CHECK_EQ(ino_of(rf[0]), ino_of(pipes[i][0]));
                CHECK_EQ(aco_rt_close(rf[0]), 0);
                got[i]++;
            }
            if (got[i] != 1) all = 0;
        }
        if (all) break;
        aco_rt_sleep(1 * MS);
    }
    for (int i = 0; i < N; i++) join(cos[i]);
    stomping = 0;
    join(st);
    CHECK_EQ(done_tx, N);
    for (int i = 0; i < N; i++) {
        if (got[i] != 1) TEST_FAIL_AT(__FILE__, __LINE__, "peer %d got %d datagrams of its co", i, got[i]);
        CHECK_EQ(aco_rt_close(sfd[i]), 0);
        CHECK_EQ(aco_rt_close(rfd[i]), 0);
        CHECK_EQ(aco_rt_close(pipes[i][0]), 0);
        CHECK_EQ(aco_rt_close(pipes[i][1]), 0);
    }
    CHECK_EQ(test_open_fds(), before);
}

/* ---- hundreds of cos: numbered datagrams, echoed ---- */
#define PAIRS CO_MANY(FEW ? 100 : 200)
#define ROUNDS (FEW ? 8 : 25)
typedef struct {
    int cfd, sfd;                   /* client's and server's sockets */
    struct sockaddr_storage ca, sa; /* their addresses */
    socklen_t cal, sal;
    int echoed, served;
} pair_t;
static pair_t* pairs;
typedef struct { uint32_t pair, seq, pad[6]; } dgram_t;

static void server_co(void* arg) {
    pair_t* p = &pairs[(intptr_t)arg];
    for (int s = 0; s < ROUNDS; s++) {
        dgram_t d;
        struct sockaddr_storage from;
        struct iovec v = {&d, sizeof(d)};
        struct msghdr m;
        memset(&m, 0, sizeof(m));
        m.msg_iov = &v;
        m.msg_iovlen = 1;
        m.msg_name = &from;
        m.msg_namelen = sizeof(from);
        CHECK_EQ(aco_rt_recvmsg(p->sfd, &m, 0, in_ms(20000)), (ssize_t)sizeof(d));
        CHECK_EQ(d.pair, (uint32_t)(p - pairs));
        CHECK_EQ(d.seq, (uint32_t)s);
        for (int j = 0; j < 6; j++) CHECK_EQ(d.pad[j], d.seq * 6 + (uint32_t)j);
        CHECK_EQ(m.msg_namelen, p->cal);
        CHECK(memcmp(&from, &p->ca, p->cal) == 0);
        d.seq = ~d.seq;
        struct msghdr e;
        struct iovec ev;
        fill_send(&e, &ev, &d, sizeof(d), &from, m.msg_namelen, NULL, 0, NULL);
        CHECK_EQ(aco_rt_sendmsg(p->sfd, &e, 0, in_ms(20000)), (ssize_t)sizeof(d));
        p->served++;
        if (s % 5 == 0) aco_rt_yield();
    }
}
static void client_co(void* arg) {
    pair_t* p = &pairs[(intptr_t)arg];
    for (int s = 0; s < ROUNDS; s++) {
        dgram_t d;
        d.pair = (uint32_t)(p - pairs);
        d.seq = (uint32_t)s;
        for (int j = 0; j < 6; j++) d.pad[j] = d.seq * 6 + (uint32_t)j;
        struct sockaddr_storage to = p->sa;
        struct msghdr m;
        struct iovec v;
        fill_send(&m, &v, &d, sizeof(d), &to, p->sal, NULL, 0, NULL);
        CHECK_EQ(aco_rt_sendmsg(p->cfd, &m, 0, in_ms(20000)), (ssize_t)sizeof(d));
        dgram_t e;
        struct sockaddr_storage from;
        struct iovec ev = {&e, sizeof(e)};
        struct msghdr r;
        memset(&r, 0, sizeof(r));
        r.msg_iov = &ev;
        r.msg_iovlen = 1;
        r.msg_name = &from;
        r.msg_namelen = sizeof(from);
        CHECK_EQ(aco_rt_recvmsg(p->cfd, &r, 0, in_ms(20000)), (ssize_t)sizeof(e));
        CHECK_EQ(e.pair, d.pair);
        CHECK_EQ(e.seq, ~d.seq);
        CHECK_EQ(r.msg_namelen, p->sal);
        CHECK(memcmp(&from, &p->sa, p->sal) == 0);
        p->echoed++;
    }
}
static void case_many(void) {
    int before = test_open_fds();
    pairs = calloc((size_t)PAIRS, sizeof(pair_t));
    CHECK(pairs != NULL);
    aco_rt_co_t** cos = calloc((size_t)PAIRS * 2, sizeof(*cos));
    CHECK(cos != NULL);
    for (int i = 0; i < PAIRS; i++) {
        pair_t* p = &pairs[i];
        if (i % 3 == 2) {
            p->cfd = unix_bound(SOCK_DGRAM, &p->ca, &p->cal);
            p->sfd = unix_bound(SOCK_DGRAM, &p->sa, &p->sal);
        } else {
            int fam = i % 3 == 0 ? AF_INET : AF_INET6;
            p->cfd = udp_bound(fam, &p->ca, &p->cal);
            p->sfd = udp_bound(fam, &p->sa, &p->sal);
        }
    }
    for (int i = 0; i < PAIRS; i++) {
        cos[2 * i] = go(server_co, (void*)(intptr_t)i);
        cos[2 * i + 1] = go(client_co, (void*)(intptr_t)i);
    }
    for (int i = 0; i < 2 * PAIRS; i++) join(cos[i]);
    for (int i = 0; i < PAIRS; i++) {
        CHECK_EQ(pairs[i].echoed, ROUNDS);
        CHECK_EQ(pairs[i].served, ROUNDS);
        CHECK_EQ(aco_rt_close(pairs[i].cfd), 0);
        CHECK_EQ(aco_rt_close(pairs[i].sfd), 0);
    }
    free(cos);
    free(pairs);
    CHECK_EQ(test_open_fds(), before);
}

static aco_rt_sched_t* cur;
static void main_co(void* arg) {
    (void)arg;
    case_rx(cur);
    case_tx(cur);
    case_many();
}

static void body(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    cur = s;
    test_go(s, main_co, NULL);
}

int main(void) {
    test_raise_nofile(4096);
    aco_rt_opts_t o;
    memset(&o, 0, sizeof(o));
    o.share_stacks = 1;         /* one share stack for every co */
    o.stack_size = 64 * 1024;
    test_on_backends(&o, body, NULL);
    printf("test_msg_bb_share: ok\n");
    return 0;
}
