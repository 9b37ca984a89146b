/* test_lend_edges.c - the receive calls on a socket that lends (a
 * multishot receive armed by aco_rt_recv_lend, io_uring) at their edges,
 * each as the plain socket answers on epoll:
 *   - recv(MSG_PEEK | MSG_WAITALL) with a passed deadline returns what is
 *     there (it spun for good: the peek took nothing, WAITALL asked again);
 *   - a reset after part of a recv(MSG_WAITALL | MSG_DONTWAIT): the part,
 *     then -ECONNRESET (the reset was dropped: the next recv said 0);
 *   - a recv of none waits for its deadline (it returned 0 at once);
 *   - aco_rt_wait(POLLOUT) on a full socket while another co waits for
 *     POLLIN and bytes come: -ETIMEDOUT (it said POLLIN);
 *   - a lend on an unconnected Unix stream socket says -EINVAL without
 *     turning the scheduler's lends to the heap, and a socket's queued
 *     bytes are lent in order (they were skipped);
 *   - an error kept after part of a transfer is said by the next lend (it
 *     said 0), and a read of none leaves it kept (it took it); a read
 *     gets the bytes the peer sent before the reset first (the kept error
 *     came before them);
 *   - a co woken by readiness whose socket is closed, and its number given
 *     to a new socket, before it runs: -EBADF, the new socket's bytes left
 *     for it (the co read them).
 * Each failed before (the review's repros, /tmp/s78c/repro).
 *   - when aco_rt_close returns, the socket is closed in the kernel: its
 *     peer sees the end at once (poll(2) with timeout 0 says POLLIN and
 *     POLLRDHUP, a read 0) and a Unix peer's send says EPIPE, a TCP
 *     peer's second send EPIPE or ECONNRESET; with the multishot armed,
 *     with a co parked in a lend, a read, a wait or a poll on it; a
 *     duplicate keeps it open until its own close (io_uring: the
 *     cancelled operations held the file until the scheduler's next
 *     poll, the peer's sends succeeded; the black-box repro
 *     bb_repro_lend_close).
 */
#define _GNU_SOURCE
#include "rt_test.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

/* fds[0] the accepted end, fds[1] the client's, over loopback. */
static void tcp_pair(int fds[2]) {
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK_GE(l, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof(a);
    CHECK_EQ(bind(l, (struct sockaddr*)&a, sizeof(a)), 0);
    CHECK_EQ(getsockname(l, (struct sockaddr*)&a, &al), 0);
    CHECK_EQ(listen(l, 4), 0);
    fds[1] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK_EQ(connect(fds[1], (struct sockaddr*)&a, sizeof(a)), 0);
    fds[0] = accept4(l, NULL, NULL, SOCK_CLOEXEC);
    CHECK_GE(fds[0], 0);
    close(l);
}

static void rst_close(int fd) {
    struct linger lg = {1, 0};
    CHECK_EQ(setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
    CHECK_EQ(close(fd), 0);
}

/* A lend of what is there: the multishot stays armed (io_uring). */
static void lend_one(int fd, int peer) {
    const char* p;
    CHECK_EQ(write(peer, "0123456789", 10), 10);
    CHECK_EQ(aco_rt_recv_lend(fd, &p, -1), 10);
    CHECK_EQ(aco_rt_lend_return(p), 0);
}

static void peek_waitall(void* arg) {
    (void)arg;
    int fds[2];
    tcp_pair(fds);
    lend_one(fds[0], fds[1]);
    CHECK_EQ(write(fds[1], "abcde", 5), 5);
    aco_rt_sleep(50 * MS);
    char buf[100];
    CHECK_EQ(aco_rt_recv(fds[0], buf, sizeof(buf), MSG_PEEK | MSG_WAITALL, 0), 5);
    CHECK(memcmp(buf, "abcde", 5) == 0);
    CHECK_EQ(aco_rt_recv(fds[0], buf, sizeof(buf), 0, -1), 5);    /* still there */
    aco_rt_close(fds[0]);
    close(fds[1]);
}

static void waitall_reset(void* arg) {
    (void)arg;
    int fds[2];
    tcp_pair(fds);
    lend_one(fds[0], fds[1]);
    CHECK_EQ(write(fds[1], "abcdefghij", 10), 10);
    aco_rt_sleep(50 * MS);
    rst_close(fds[1]);
    aco_rt_sleep(50 * MS);
    char buf[100];
    CHECK_EQ(aco_rt_recv(fds[0], buf, sizeof(buf), MSG_WAITALL | MSG_DONTWAIT, aco_rt_in_ms(1000)), 10);
    CHECK_EQ(aco_rt_recv(fds[0], buf, sizeof(buf), 0, aco_rt_in_ms(1000)), -ECONNRESET);
    aco_rt_close(fds[0]);
}

static void recv_none(void* arg) {
    (void)arg;
    int fds[2];
    tcp_pair(fds);
    lend_one(fds[0], fds[1]);
    char buf[8];
    int64_t t0 = aco_rt_now();
    CHECK_EQ(aco_rt_recv(fds[0], buf, 0, 0, t0 + 200 * MS), -ETIMEDOUT);
    CHECK_GE(aco_rt_now() - t0, 190 * MS);
    CHECK_EQ(write(fds[1], "z", 1), 1);
    CHECK_EQ(aco_rt_recv(fds[0], buf, 0, 0, aco_rt_in_ms(2000)), 0);     /* a byte came */
    CHECK_EQ(aco_rt_recv(fds[0], buf, sizeof(buf), 0, -1), 1);           /* untaken */
    aco_rt_close(fds[0]);
    close(fds[1]);
}

static int pw_fd, pw_in, pw_out;
static void pw_in_co(void* arg) {
    (void)arg;
    pw_in = aco_rt_wait(pw_fd, POLLIN, aco_rt_in_ms(2000));
}
static void pw_out_co(void* arg) {
    (void)arg;
    pw_out = aco_rt_wait(pw_fd, POLLOUT, aco_rt_in_ms(400));
}
static void pollout_wait(void* arg) {
    (void)arg;
    int fds[2];
    tcp_pair(fds);
    lend_one(fds[0], fds[1]);
    static char junk[65536];
    while (send(fds[0], junk, sizeof(junk), MSG_DONTWAIT) > 0) {}
    pw_fd = fds[0];
    aco_rt_co_t* a = aco_rt_spawn(NULL, pw_in_co, NULL);
    aco_rt_co_t* b = aco_rt_spawn(NULL, pw_out_co, NULL);
    aco_rt_sleep(100 * MS);
    CHECK_EQ(write(fds[1], "y", 1), 1);
    CHECK_EQ(aco_rt_join(a, -1), 0);
    CHECK_EQ(aco_rt_join(b, -1), 0);
    CHECK(pw_in > 0 && (pw_in & POLLIN));
    CHECK_EQ(pw_out, -ETIMEDOUT);
    aco_rt_close(fds[0]);
    close(fds[1]);
}

static void unix_einval(void* arg) {
    (void)arg;
    int u = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK_GE(u, 0);
    const char* p;
    CHECK_EQ(aco_rt_recv_lend(u, &p, aco_rt_in_ms(300)), -EINVAL);
    int fds[2];
    tcp_pair(fds);
    lend_one(fds[0], fds[1]);
    CHECK_EQ(write(fds[1], "BBBB", 4), 4);
    aco_rt_sleep(50 * MS);
    CHECK_EQ(write(fds[1], "CC", 2), 2);
    ssize_t n = aco_rt_recv_lend(fds[0], &p, aco_rt_in_ms(1000));
    CHECK_GE(n, 4);
    CHECK(memcmp(p, "BBBB", 4) == 0);
    CHECK_EQ(aco_rt_lend_return(p), 0);
    aco_rt_close(u);
    aco_rt_close(fds[0]);
    close(fds[1]);
}

static void kept_errors(void* arg) {
    (void)arg;
    for (int lend = 0; lend < 2; lend++) {
        int fds[2];
        tcp_pair(fds);
        CHECK_EQ(write(fds[1], "01234", 5), 5);
        aco_rt_sleep(20 * MS);
        rst_close(fds[1]);
        aco_rt_sleep(20 * MS);
        char buf[100];
        CHECK_EQ(aco_rt_recv(fds[0], buf, sizeof(buf), MSG_WAITALL, aco_rt_in_ms(1000)), 5);
        if (lend) {
            const char* p;
            CHECK_EQ(aco_rt_recv_lend(fds[0], &p, aco_rt_in_ms(1000)), -ECONNRESET);
        } else {
            CHECK_EQ(aco_rt_read(fds[0], buf, 0, aco_rt_in_ms(1000)), 0);  /* none: kept */
            CHECK_EQ(aco_rt_read(fds[0], buf, sizeof(buf), aco_rt_in_ms(1000)), -ECONNRESET);
        }
        CHECK_EQ(aco_rt_recv(fds[0], buf, sizeof(buf), 0, aco_rt_in_ms(1000)), 0);
        aco_rt_close(fds[0]);
    }
}

/* A write cut by a reset after part was sent keeps its error for the
 * next call; a read then gets the bytes the peer sent before the reset
 * first, as recv(2) gives its queue before the socket's error (the kept
 * error came first, and the bytes were never read). */
static int kb_peer;
static void kb_resetter(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_sleep(50 * MS), 0);
    rst_close(kb_peer);
}
static void kept_after_bytes(void* arg) {
    (void)arg;
    int fds[2];
    tcp_pair(fds);
    CHECK_EQ(write(fds[1], "tail", 4), 4);
    kb_peer = fds[1];
    size_t big = 64 << 20;              /* (more than the buffers hold) */
    char* b = malloc(big);
    CHECK(b != NULL);
    memset(b, 'x', big);
    aco_rt_co_t* c = aco_rt_spawn(NULL, kb_resetter, NULL);
    CHECK(c != NULL);
    ssize_t w = aco_rt_write(fds[0], b, big, aco_rt_in_ms(5000));
    CHECK(w > 0 && (size_t)w < big);    /* part, the error kept */
    CHECK_EQ(aco_rt_join(c, -1), 0);
    char buf[16];
    CHECK_EQ(aco_rt_read(fds[0], buf, sizeof(buf), aco_rt_in_ms(1000)), 4);
    CHECK(memcmp(buf, "tail", 4) == 0);
    ssize_t r = aco_rt_read(fds[0], buf, sizeof(buf), aco_rt_in_ms(1000));
    CHECK(r == -ECONNRESET || r == -EPIPE);
    free(b);
    aco_rt_close(fds[0]);
}

/* the woken reader: its buffer on its stack (the readiness way on both) */
static int wr_x[2], wr_new[2];
static volatile int wr_done;
static ssize_t wr_got;
static int64_t wr_t0;
static char wr_data[16];
static void wr_reader(void* arg) {
    (void)arg;
    char local[16];
    wr_got = aco_rt_read(wr_x[0], local, sizeof(local), aco_rt_in_ms(3000));
    if (wr_got > 0) memcpy(wr_data, local, (size_t)wr_got);
}
static void wr_closer(void* arg) {
    (void)arg;
    aco_rt_sleep(20 * MS);
    CHECK_EQ(aco_rt_close(wr_x[0]), 0);
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, wr_new), 0);
    CHECK_EQ(write(wr_new[1], "NEW", 3), 3);
    wr_done = 1;
}
static void wr_spinner(void* arg) {
    (void)arg;
    while (aco_rt_now() < wr_t0 + 30 * MS) {}      /* busy past the closer's time */
    CHECK_EQ(write(wr_x[1], "old", 3), 3);
    while (!wr_done) aco_rt_yield();
}
static void woken_reader(void* arg) {
    (void)arg;
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, wr_x), 0);
    wr_done = 0;
    wr_got = 0;
    wr_t0 = aco_rt_now();
    aco_rt_co_t* c[3] = {aco_rt_spawn(NULL, wr_reader, NULL), aco_rt_spawn(NULL, wr_closer, NULL),
                         aco_rt_spawn(NULL, wr_spinner, NULL)};
    for (int i = 0; i < 3; i++) CHECK_EQ(aco_rt_join(c[i], -1), 0);
    if (wr_new[0] == wr_x[0]) {         /* the number was reused: the case */
        /* -EBADF; or, where io_uring read the old file (a buffer the
         * sanitizer moved off the stack), its bytes; never the new one's */
        if (wr_got != -EBADF) {
            CHECK_EQ(wr_got, 3);
            CHECK(memcmp(wr_data, "old", 3) == 0);
        }
        char b[8];
        CHECK_EQ(aco_rt_recv(wr_new[0], b, sizeof b, MSG_DONTWAIT, 0), 3);
    }
    close(wr_x[1]);
    close(wr_new[0]);
    close(wr_new[1]);
}

/* The peer of a socket just closed sees the end now, with no look by the
 * scheduler in between (a Unix socket's send: EPIPE; TCP's: the first
 * send meets a closed socket, whose reset the next one says). */
static void peer_ended(int peer, int tcp, const char* what) {
    struct pollfd p = {peer, POLLIN | POLLRDHUP, 0};
    int r = poll(&p, 1, 0);
    if (r != 1 || (p.revents & (POLLIN | POLLRDHUP)) != (POLLIN | POLLRDHUP))
        TEST_FAIL_AT(__FILE__, __LINE__, "%s: the peer's poll: %d, revents %#x", what, r,
                     (unsigned)p.revents);
    char b[8];
    ssize_t n = recv(peer, b, sizeof(b), MSG_DONTWAIT);
    if (n != 0) TEST_FAIL_AT(__FILE__, __LINE__, "%s: the peer's read: %zd (%s)", what, n,
                             n < 0 ? strerror(errno) : "bytes");
    n = send(peer, "y", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (tcp && n == 1) n = send(peer, "y", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n != -1 || (errno != EPIPE && errno != ECONNRESET))
        TEST_FAIL_AT(__FILE__, __LINE__, "%s: the peer's send: %zd (%s)", what, n,
                     n < 0 ? strerror(errno) : "sent");
}

static void any_pair(int fds[2], int tcp) {
    if (tcp) tcp_pair(fds);
    else CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
}

/* the co's own close, the multishot armed; a duplicate keeps the file */
static void close_lending(void* arg) {
    (void)arg;
    for (int tcp = 0; tcp < 2; tcp++) {
        int fds[2];
        any_pair(fds, tcp);
        lend_one(fds[0], fds[1]);
        CHECK_EQ(aco_rt_close(fds[0]), 0);
        peer_ended(fds[1], tcp, tcp ? "lending, tcp" : "lending, unix");
        close(fds[1]);

        any_pair(fds, tcp);
        lend_one(fds[0], fds[1]);
        int d = dup(fds[0]);
        CHECK_GE(d, 0);
        CHECK_EQ(aco_rt_close(fds[0]), 0);
        struct pollfd p = {fds[1], POLLIN | POLLRDHUP, 0};
        CHECK_EQ(poll(&p, 1, 0), 0);                   /* open through d */
        CHECK_EQ(close(d), 0);
        peer_ended(fds[1], tcp, tcp ? "lending, dup closed, tcp" : "lending, dup closed, unix");
        close(fds[1]);
    }
}

/* a co parked on the socket, another co closes it */
enum { P_LEND, P_READ, P_WAIT, P_POLL, P_N };
static const char* const p_names[P_N] = {"a lend", "a read", "a wait", "a poll"};
static int pk_fd, pk_kind;
static ssize_t pk_got;
static void parked_co(void* arg) {
    (void)arg;
    const char* data;
    char* buf = malloc(64);     /* (in the heap: io_uring's read operation) */
    struct pollfd* pf = malloc(sizeof(*pf));
    CHECK(buf && pf);
    if (pk_kind == P_LEND) {
        pk_got = aco_rt_recv_lend(pk_fd, &data, aco_rt_in_ms(5000));
        if (pk_got > 0) aco_rt_lend_return(data);
    } else if (pk_kind == P_READ) {
        pk_got = aco_rt_read(pk_fd, buf, 64, aco_rt_in_ms(5000));
    } else if (pk_kind == P_WAIT) {
        pk_got = aco_rt_wait(pk_fd, POLLIN, aco_rt_in_ms(5000));
    } else {
        *pf = (struct pollfd){pk_fd, POLLIN, 0};
        pk_got = aco_rt_poll(pf, 1, aco_rt_in_ms(5000));
        if (pk_got == 1) pk_got = pf->revents;
    }
    free(buf);
    free(pf);
}
static void close_parked(void* arg) {
    (void)arg;
    for (int tcp = 0; tcp < 2; tcp++)
        for (int k = 0; k < P_N; k++)
            for (int lent = 0; lent < 2; lent++) {
                if (k == P_LEND && !lent) continue;
                int fds[2];
                any_pair(fds, tcp);
                if (lent) lend_one(fds[0], fds[1]);
                pk_fd = fds[0];
                pk_kind = k;
                pk_got = 1000;
                aco_rt_co_t* c = aco_rt_spawn(NULL, parked_co, NULL);
                CHECK(c != NULL);
                aco_rt_sleep(20 * MS);          /* parked, its operation in the kernel */
                CHECK_EQ(pk_got, 1000);
                CHECK_EQ(aco_rt_close(fds[0]), 0);
                char what[64];
                snprintf(what, sizeof(what), "%s%s, %s", p_names[k], lent ? " (lending)" : "",
                         tcp ? "tcp" : "unix");
                peer_ended(fds[1], tcp, what);
                CHECK_EQ(aco_rt_join(c, aco_rt_in_ms(5000)), 0);
                if (k == P_POLL) CHECK_EQ(pk_got, POLLNVAL);
                else CHECK_EQ(pk_got, -EBADF);
                close(fds[1]);
            }
}

static void body(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    test_go(s, peek_waitall, NULL);
    test_go(s, waitall_reset, NULL);
    test_go(s, recv_none, NULL);
    test_go(s, pollout_wait, NULL);
    test_go(s, unix_einval, NULL);
    test_go(s, kept_errors, NULL);
    test_go(s, kept_after_bytes, NULL);
    test_go(s, woken_reader, NULL);
    test_go(s, close_lending, NULL);
    test_go(s, close_parked, NULL);
}

int main(void) {
    test_on_backends(NULL, body, NULL);
    printf("test_lend_edges: ok\n");
    return 0;
}
