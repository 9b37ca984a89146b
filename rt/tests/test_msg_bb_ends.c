/* test_msg_bb_ends.c - how aco_rt_sendmsg and aco_rt_recvmsg end, from
 * aco_rt.h alone: parked on UDP (v4, v6), Unix datagram, seqpacket, stream
 * and TCP sockets, and sending to a full Unix datagram peer (connected, and
 * by address) or a full stream, each ended by
 *   - a near deadline: -ETIMEDOUT, never before the deadline;
 *   - a passed one (0, -2, INT64_MIN, now - 1): one try, -ETIMEDOUT at
 *     once with nothing there, the message when one is there;
 *   - a cancel while parked and before the call: -ECANCELED, and every later
 *     call too, at once, even with a message there;
 *   - aco_rt_close from another co: -EBADF;
 *   - no limit (-1, INT64_MAX, INT64_MAX - 1, 2^60 ns ahead): the message
 *     that comes 20 ms later (or the room), whole;
 * with nothing lost each time: a failed receive took nothing (the message
 * and its descriptors are there for the next), a failed send sent nothing.
 * Then races: deadlines of 0-300 us, cancels and closes against datagrams
 * carrying descriptors as they arrive: every datagram received once, in
 * order, every descriptor either received or still queued, and none leaked
 * (counted in /proc/self/fd).  Both backends at once, a process each. */
#define _GNU_SOURCE
#include "msg_bb.h"

#include <limits.h>

/* the kinds a receive parks on, and the sends that park */
enum { R_UDP4, R_UDP6, R_UNIX, R_SEQ, R_STREAM, R_TCP, S_UNIX, S_UNIX_ADDR, S_STREAM, NK };
static const char* const kname[NK] = {"recv udp4", "recv udp6", "recv unix dgram", "recv seqpacket",
                                      "recv stream", "recv tcp", "send unix dgram full",
                                      "send unix by address, full", "send stream full"};
enum { E_NEAR, E_PASSED, E_CANCEL, E_CANCEL_FIRST, E_CLOSE, E_WAKE, NE };
static const char* const ename[NE] = {"near deadline", "passed deadline", "cancel", "cancel first",
                                      "aco_rt_close", "wake"};

typedef struct {
    int kind, end;
    int fd, peer;               /* the co's socket; the other end */
    struct sockaddr_storage to; /* S_UNIX_ADDR: the peer's name */
    socklen_t tol;
    int filled;                 /* datagrams that filled the peer */
    size_t fbytes;              /* the bytes of them */
    int64_t deadline;
    int cancel_first;
    volatile int done;
    ssize_t res;
    int64_t ended;
    int flags;                  /* msg_flags after a receive */
    int nfds;                   /* descriptors it received */
    uint64_t ino;               /* the first one's pipe */
    char data[64];
    struct sockaddr_storage from;
    socklen_t froml;
} fx_t;

static fx_t F;
static int pipe_sent[2];        /* the pipe whose read end travels */

/* the co: one call, every structure on its own stack */
static void op_co(void* arg) {
    fx_t* f = arg;
    if (f->cancel_first) {
        CHECK_EQ(aco_rt_cancel(aco_rt_self()), 0);
    }
    char buf[64];
    memset(buf, 0, sizeof(buf));
    struct sockaddr_storage from;
    ctl8_t ctl;
    struct iovec v;
    struct msghdr m;
    if (f->kind < S_UNIX) {
        memset(&m, 0, sizeof(m));
        v.iov_base = buf;
        v.iov_len = sizeof(buf);
        m.msg_iov = &v;
        m.msg_iovlen = 1;
        m.msg_name = &from;
        m.msg_namelen = sizeof(from);
        m.msg_control = ctl.buf;
        m.msg_controllen = sizeof(ctl.buf);
        f->res = aco_rt_recvmsg(f->fd, &m, MSG_CMSG_CLOEXEC, f->deadline);
        f->ended = aco_rt_now();
        if (f->res >= 0) {
            f->flags = m.msg_flags;
            memcpy(f->data, buf, sizeof(buf));
            f->from = from;
            f->froml = m.msg_namelen;
            int rf[8];
            f->nfds = got_fds(&m, rf, 8);
            for (int i = 0; i < f->nfds && i < 8; i++) {
                if (i == 0) f->ino = ino_of(rf[i]);
                CHECK(fcntl(rf[i], F_GETFD) & FD_CLOEXEC);
                CHECK_EQ(aco_rt_close(rf[i]), 0);
            }
        }
    } else {
        memset(buf, 'S', sizeof(buf));
        int one = pipe_sent[0];
        fill_send(&m, &v, buf, f->kind == S_STREAM ? sizeof(buf) : 9,
                  f->kind == S_UNIX_ADDR ? &f->to : NULL, f->tol, &one,
                  f->kind == S_STREAM ? 0 : 1, &ctl);
        f->res = aco_rt_sendmsg(f->fd, &m, 0, f->deadline);
        f->ended = aco_rt_now();
    }
    if (f->end == E_CANCEL || f->end == E_CANCEL_FIRST) {
        /* every later call fails at once, a message there or not */
        struct iovec v2 = {buf, sizeof(buf)};
        struct msghdr m2;
        memset(&m2, 0, sizeof(m2));
        m2.msg_iov = &v2;
        m2.msg_iovlen = 1;
        CHECK_EQ(aco_rt_recvmsg(f->fd, &m2, MSG_DONTWAIT, -1), -ECANCELED);
        CHECK_EQ(aco_rt_sendmsg(f->fd, &m2, MSG_DONTWAIT, 0), -ECANCELED);
    }
    f->done = 1;
}

/* a datagram socket kind's pair; the send kinds' peer filled */
static void fixture(fx_t* f) {
    int fd[2] = {-1, -1};
    f->fd = f->peer = -1;
    f->filled = 0;
    switch (f->kind) {
    case R_UDP4: mk_pair(K_UDP4, fd, NULL, NULL); break;
    case R_UDP6: mk_pair(K_UDP6, fd, NULL, NULL); break;
    case R_UNIX: mk_pair(K_UNIX_NAMED, fd, NULL, NULL); break;
    case R_SEQ: mk_pair(K_SEQPACKET, fd, NULL, NULL); break;
    case R_STREAM: mk_pair(K_STREAM, fd, NULL, NULL); break;
    case R_TCP: mk_pair(K_TCP, fd, NULL, NULL); break;
    case S_UNIX: mk_pair(K_UNIX_PAIR, fd, NULL, NULL); break;
    case S_UNIX_ADDR: {
        struct sockaddr_storage sa;
        socklen_t sal;
        fd[1] = unix_bound(SOCK_DGRAM, &f->to, &f->tol);
        fd[0] = unix_bound(SOCK_DGRAM, &sa, &sal);
        break;
    }
    case S_STREAM: mk_pair(K_STREAM, fd, NULL, NULL); break;
    }
    if (f->kind < S_UNIX) {
        f->fd = fd[1];          /* the co receives */
        f->peer = fd[0];
    } else {
        f->fd = fd[0];          /* the co sends; fill its peer */
        f->peer = fd[1];
        char b[4096];
        memset(b, 'f', sizeof(b));
        for (;;) {
            ssize_t r = f->kind == S_UNIX_ADDR
                ? sendto(f->fd, b, 9, MSG_DONTWAIT, (struct sockaddr*)&f->to, f->tol)
                : send(f->fd, b, f->kind == S_STREAM ? sizeof(b) : 9, MSG_DONTWAIT);
            if (r < 0) {
                CHECK_EQ(errno, EAGAIN);
                break;
            }
            f->filled++;
            f->fbytes += (size_t)r;
        }
        CHECK_GT(f->filled, 0);
    }
}

/* send one message to the receiving co's socket: "M<i>" with the pipe */
static void send_one(fx_t* f, int i) {
    char b[16];
    int n = snprintf(b, sizeof(b), "M%d", i);
    struct msghdr m;
    struct iovec v;
    ctl8_t ctl;
    int with_fd = f->kind == R_UNIX || f->kind == R_SEQ || f->kind == R_STREAM;
    fill_send(&m, &v, b, (size_t)n, NULL, 0, &pipe_sent[0], with_fd, &ctl);
    CHECK_EQ(sendmsg(f->peer, &m, MSG_DONTWAIT | MSG_NOSIGNAL), n);
}

/* the receive side after a failed call: the message sent since is all
 * there for the next call, with its descriptor */
static void check_recv_kept(fx_t* f) {
    send_one(f, 7);
    if (f->kind == R_TCP) aco_rt_sleep(2 * MS);
    char b[64];
    ctl8_t ctl;
    struct iovec v = {b, sizeof(b)};
    struct msghdr m;
    fill_recv(&m, &v, &ctl);
    ssize_t r = recvmsg(f->fd, &m, MSG_DONTWAIT);
    CHECK_EQ(r, 2);
    CHECK(memcmp(b, "M7", 2) == 0);
    int rf[8];
    int k = got_fds(&m, rf, 8);
    int with_fd = f->kind == R_UNIX || f->kind == R_SEQ || f->kind == R_STREAM;
    CHECK_EQ(k, with_fd);
    for (int i = 0; i < k; i++) {
        CHECK_EQ(ino_of(rf[i]), ino_of(pipe_sent[0]));
        close(rf[i]);
    }
    CHECK_EQ(recv(f->fd, b, sizeof(b), MSG_DONTWAIT), -1);
}

/* the send side after a failed call: the peer holds the filler alone */
static void check_send_none(fx_t* f) {
    char b[8192];
    int n = 0;
    size_t bytes = 0;
    for (;;) {
        ssize_t r = recv(f->peer, b, sizeof(b), MSG_DONTWAIT);
        if (r < 0) break;
        if (f->kind != S_STREAM) CHECK_EQ(r, 9);
        for (ssize_t i = 0; i < r; i++) CHECK_EQ(b[i], 'f');
        n++;
        bytes += (size_t)r;
    }
    if (f->kind == S_STREAM) CHECK_EQ(bytes, f->fbytes);
    else CHECK_EQ(n, f->filled);
}

static void one(int kind, int end, int64_t deadline) {
    fx_t* f = &F;
    memset(f, 0, sizeof(*f));
    f->kind = kind;
    f->end = end;
    fixture(f);
    int before = test_open_fds();
    f->deadline = end == E_NEAR ? in_ms(30) : end == E_PASSED || end == E_WAKE ? deadline : -1;
    f->cancel_first = end == E_CANCEL_FIRST;
    if (end == E_CANCEL_FIRST && kind < S_UNIX) send_one(f, 1);   /* there, and still refused */
    int64_t t0 = aco_rt_now();
    aco_rt_co_t* co = go(op_co, f);
    if (end == E_CANCEL || end == E_CLOSE || end == E_WAKE) {
        aco_rt_sleep(20 * MS);
        if (f->done)
            TEST_FAIL_AT(__FILE__, __LINE__, "%s: the call ended (%zd) with nothing to end it",
                         kname[kind], f->res);
        if (end == E_CANCEL) CHECK_EQ(aco_rt_cancel(co), 0);
        if (end == E_CLOSE) CHECK_EQ(aco_rt_close(f->fd), 0);
        if (end == E_WAKE) {
            if (kind < S_UNIX) {
                send_one(f, 3);
            } else {
                /* room: the peer drained (a blocking send(2) too waits
                 * until most of the sender's buffer is free again) */
                check_send_none(f);
                f->filled = 0;
                f->fbytes = 0;
            }
        }
    }
    join(co);
    int64_t took = aco_rt_now() - t0;
    CHECK(f->done);
    ssize_t want = end == E_NEAR || end == E_PASSED ? -ETIMEDOUT
                 : end == E_CLOSE ? -EBADF : end == E_WAKE ? (kind < S_UNIX ? 2 : kind == S_STREAM ? 64 : 9)
                 : -ECANCELED;
    if (f->res != want)
        TEST_FAIL_AT(__FILE__, __LINE__, "%s, %s (deadline %lld): %zd, want %zd", kname[kind],
                     ename[end], (long long)f->deadline, f->res, want);
    if (end == E_NEAR && f->ended < f->deadline)
        TEST_FAIL_AT(__FILE__, __LINE__, "%s: ended %lld ns before its deadline", kname[kind],
                     (long long)(f->deadline - f->ended));
    if ((end == E_PASSED || end == E_CANCEL_FIRST) && took > 1000 * MS)
        TEST_FAIL_AT(__FILE__, __LINE__, "%s, %s: waited %lld ms", kname[kind], ename[end],
                     (long long)(took / MS));
    if (end == E_WAKE && kind < S_UNIX) {
        CHECK(memcmp(f->data, "M3", 2) == 0);
        int with_fd = kind == R_UNIX || kind == R_SEQ || kind == R_STREAM;
        CHECK_EQ(f->nfds, with_fd);
        if (with_fd) CHECK_EQ(f->ino, ino_of(pipe_sent[0]));
        CHECK_EQ(f->flags & (MSG_TRUNC | MSG_CTRUNC), 0);
    }
    /* nothing lost */
    if (end != E_CLOSE) {
        if (kind < S_UNIX) {
            if (end == E_CANCEL_FIRST) {    /* "M1" waits there still */
                char b[16];
                CHECK_EQ(recv(f->fd, b, sizeof(b), MSG_DONTWAIT), 2);
                CHECK(memcmp(b, "M1", 2) == 0);
            }
            if (end != E_WAKE) check_recv_kept(f);
        } else if (end != E_WAKE) {
            check_send_none(f);
        } else {
            /* the one sent is last, whole, with its descriptor */
            char b[8192];
            ctl8_t ctl;
            int n = 0, fds = 0;
            size_t bytes = 0;
            for (;;) {
                struct iovec v = {b, sizeof(b)};
                struct msghdr m;
                fill_recv(&m, &v, &ctl);
                ssize_t r = recvmsg(f->peer, &m, MSG_DONTWAIT);
                if (r < 0) break;
                int rf[8];
                int k = got_fds(&m, rf, 8);
                for (int i = 0; i < k; i++) close(rf[i]);
                fds += k;
                if (kind != S_STREAM && n == f->filled) {
                    CHECK_EQ(r, 9);
                    CHECK_EQ(b[0], 'S');
                    CHECK_EQ(k, 1);
                }
                n++;
                bytes += (size_t)r;
            }
            if (kind == S_STREAM) CHECK_EQ(bytes, 64);
            else {
                CHECK_EQ(n, f->filled + 1);
                CHECK_EQ(fds, 1);
            }
        }
    } else {
        CHECK_EQ(fcntl(f->fd, F_GETFD), -1);   /* closed */
        CHECK_EQ(errno, EBADF);
    }
    if (end != E_CLOSE) CHECK_EQ(aco_rt_close(f->fd), 0);
    CHECK_EQ(aco_rt_close(f->peer), 0);
    CHECK_EQ(test_open_fds(), before - 2);
}

static void case_matrix(void) {
    static const int64_t passed[] = {0, -2, INT64_MIN, 1};
    static const int64_t far[] = {-1, INT64_MAX, INT64_MAX - 1, 1};
    for (int k = 0; k < NK; k++)
        for (int e = 0; e < NE; e++) {
            if (e == E_PASSED) {
                for (int i = 0; i < 4; i++) one(k, e, i == 3 ? aco_rt_now() - 1 : passed[i]);
            } else if (e == E_WAKE) {
                for (int i = 0; i < 4; i++) one(k, e, i == 3 ? aco_rt_now() + (1LL << 60) : far[i]);
            } else {
                one(k, e, 0);
            }
        }
}

/* a passed deadline with the message there: one try that succeeds; with
 * room: a send that succeeds */
static void case_passed_ready(void) {
    static const int64_t passed[] = {0, -2, INT64_MIN, 1};
    for (int i = 0; i < 4; i++) {
        int64_t dl = i == 3 ? aco_rt_now() - 1 : passed[i];
        int fd[2];
        mk_pair(K_UNIX_PAIR, fd, NULL, NULL);
        struct msghdr m;
        struct iovec v;
        ctl8_t ctl;
        fill_send(&m, &v, "ready", 5, NULL, 0, &pipe_sent[0], 1, &ctl);
        CHECK_EQ(aco_rt_sendmsg(fd[0], &m, 0, dl), 5);
        char b[16];
        ctl8_t rc;
        struct iovec rv = {b, sizeof(b)};
        struct msghdr rm;
        fill_recv(&rm, &rv, &rc);
        CHECK_EQ(aco_rt_recvmsg(fd[1], &rm, 0, dl), 5);
        int rf[8];
        CHECK_EQ(got_fds(&rm, rf, 8), 1);
        CHECK_EQ(ino_of(rf[0]), ino_of(pipe_sent[0]));
        CHECK_EQ(aco_rt_close(rf[0]), 0);
        CHECK_EQ(aco_rt_close(fd[0]), 0);
        CHECK_EQ(aco_rt_close(fd[1]), 0);
    }
}

/* ---- races ---- */
#define NRACE (FEW ? 150 : 600)
typedef struct {
    int fd;
    int n;                  /* datagrams to take */
    int got, timeouts, fds;
    uint64_t seed;
} racer_t;
static void race_receiver(void* arg) {
    racer_t* r = arg;
    while (r->got < r->n) {
        char b[32];
        ctl8_t ctl;
        struct iovec v = {b, sizeof(b)};
        struct msghdr m;
        fill_recv(&m, &v, &ctl);
        uint64_t x = test_rand(&r->seed);
        int64_t dl = x % 8 == 0 ? 0 : aco_rt_now() + (int64_t)(x % 300000);
        ssize_t n = aco_rt_recvmsg(r->fd, &m, MSG_CMSG_CLOEXEC, dl);
        if (n == -ETIMEDOUT) {
            r->timeouts++;
            continue;
        }
        CHECK_EQ(n, (ssize_t)sizeof(int));
        int seq;
        memcpy(&seq, b, sizeof(seq));
        if (seq != r->got)
            TEST_FAIL_AT(__FILE__, __LINE__, "datagram %d came where %d was due", seq, r->got);
        int rf[8];
        int k = got_fds(&m, rf, 8);
        CHECK_EQ(k, seq % 3 == 0 ? 1 : 0);
        for (int i = 0; i < k; i++) {
            CHECK_EQ(ino_of(rf[i]), ino_of(pipe_sent[0]));
            CHECK_EQ(aco_rt_close(rf[i]), 0);
        }
        r->fds += k;
        r->got++;
    }
}
static void race_sender(void* arg) {
    racer_t* r = arg;
    uint64_t seed = r->seed ^ 0x5555;
    for (int i = 0; i < r->n; i++) {
        uint64_t x = test_rand(&seed);
        if (x % 4 == 0) aco_rt_sleep((int64_t)(x % 200000));
        else if (x % 4 == 1) aco_rt_yield();
        struct msghdr m;
        struct iovec v;
        ctl8_t ctl;
        fill_send(&m, &v, &i, sizeof(i), NULL, 0, &pipe_sent[0], i % 3 == 0, &ctl);
        CHECK_EQ(aco_rt_sendmsg(r->fd, &m, 0, in_ms(5000)), (ssize_t)sizeof(i));
    }
}
/* deadlines of 0-300 us against datagrams as they come */
static void case_race_deadlines(void) {
    int before = test_open_fds();
    for (int k = 0; k < 3; k++) {
        int fd[2];
        mk_pair(k == 0 ? K_UNIX_PAIR : k == 1 ? K_SEQPACKET : K_UNIX_NAMED, fd, NULL, NULL);
        racer_t rr = {fd[1], NRACE, 0, 0, 0, 0x1234 + (uint64_t)k}, rs = rr;
        rs.fd = fd[0];
        aco_rt_co_t* a = go(race_receiver, &rr);
        aco_rt_co_t* b = go(race_sender, &rs);
        join(a);
        join(b);
        CHECK_EQ(rr.got, NRACE);
        CHECK_EQ(rr.fds, (NRACE + 2) / 3);
        CHECK_GT(rr.timeouts, 0);
        char q[8];
        CHECK_EQ(recv(fd[1], q, sizeof(q), MSG_DONTWAIT), -1);  /* nothing more */
        CHECK_EQ(aco_rt_close(fd[0]), 0);
        CHECK_EQ(aco_rt_close(fd[1]), 0);
    }
    CHECK_EQ(test_open_fds(), before);
}

/* a cancel or a close against a datagram (with a descriptor) arriving:
 * either the call took it, or it is still there (cancel) / went with the
 * socket (close); never both, never a descriptor leaked */
typedef struct {
    int fd;
    ssize_t res;
    int nfds;
    int seq;
} one_rx_t;
static void one_rx(void* arg) {
    one_rx_t* o = arg;
    char b[32];
    ctl8_t ctl;
    struct iovec v = {b, sizeof(b)};
    struct msghdr m;
    fill_recv(&m, &v, &ctl);
    o->res = aco_rt_recvmsg(o->fd, &m, 0, in_ms(5000));
    if (o->res >= 0) {
        memcpy(&o->seq, b, sizeof(int));
        int rf[8];
        o->nfds = got_fds(&m, rf, 8);
        for (int i = 0; i < o->nfds; i++) {
            CHECK_EQ(ino_of(rf[i]), ino_of(pipe_sent[0]));
            CHECK_EQ(aco_rt_close(rf[i]), 0);
        }
    }
}
static void case_race_cancel_close(void) {
    int before = test_open_fds();
    uint64_t seed = 99;
    int took = 0, left = 0, closed = 0;
    for (int i = 0; i < NRACE; i++) {
        int close_it = i % 2;
        int fd[2];
        mk_pair(i % 4 < 2 ? K_UNIX_PAIR : K_SEQPACKET, fd, NULL, NULL);
        one_rx_t o = {fd[1], 0, 0, -1};
        aco_rt_co_t* co = go(one_rx, &o);
        uint64_t x = test_rand(&seed);
        if (x & 1) aco_rt_yield();      /* parked first, or not yet */
        struct msghdr m;
        struct iovec v;
        ctl8_t ctl;
        int seq = i;
        fill_send(&m, &v, &seq, sizeof(seq), NULL, 0, &pipe_sent[0], 1, &ctl);
        if (x & 2) CHECK_EQ(sendmsg(fd[0], &m, MSG_DONTWAIT), (ssize_t)sizeof(int));
        int spins = (int)((x >> 8) % 4);
        for (int s = 0; s < spins; s++) aco_rt_yield();
        if (close_it) CHECK_EQ(aco_rt_close(fd[1]), 0);
        else CHECK_EQ(aco_rt_cancel(co), 0);
        if (!(x & 2) && !close_it) CHECK_EQ(sendmsg(fd[0], &m, MSG_DONTWAIT), (ssize_t)sizeof(int));
        join(co);
        if (o.res >= 0) {
            CHECK_EQ(o.res, (ssize_t)sizeof(int));
            CHECK_EQ(o.seq, i);
            CHECK_EQ(o.nfds, 1);
            took++;
            if (!close_it) {    /* nothing more there */
                char q[8];
                CHECK_EQ(recv(fd[1], q, sizeof(q), MSG_DONTWAIT), -1);
            }
        } else if (close_it) {
            CHECK_EQ(o.res, -EBADF);
            closed++;
        } else {
            CHECK_EQ(o.res, -ECANCELED);
            /* the datagram and its descriptor are there still */
            char b[8];
            ctl8_t rc;
            struct iovec rv = {b, sizeof(b)};
            struct msghdr rm;
            fill_recv(&rm, &rv, &rc);
            CHECK_EQ(recvmsg(fd[1], &rm, MSG_DONTWAIT), (ssize_t)sizeof(int));
            int rf[8];
            CHECK_EQ(got_fds(&rm, rf, 8), 1);
            close(rf[0]);
            left++;
        }
        if (!close_it) CHECK_EQ(aco_rt_close(fd[1]), 0);
        CHECK_EQ(aco_rt_close(fd[0]), 0);
        if (test_open_fds() != before)
            TEST_FAIL_AT(__FILE__, __LINE__, "round %d (%s, result %zd): %d descriptors, %d before", i,
                         close_it ? "close" : "cancel", o.res, test_open_fds(), before);
    }
    CHECK_GT(took, 0);
    CHECK_GT(left + closed, 0);
}

static void main_co(void* arg) {
    (void)arg;
    CHECK_EQ(pipe2(pipe_sent, O_CLOEXEC), 0);
    int before = test_open_fds();
    case_matrix();
    case_passed_ready();
    case_race_deadlines();
    case_race_cancel_close();
    CHECK_EQ(test_open_fds(), before);
    CHECK_EQ(aco_rt_close(pipe_sent[0]), 0);
    CHECK_EQ(aco_rt_close(pipe_sent[1]), 0);
}

static int one_backend(int b) {
    aco_rt_sched_t* s = test_sched_on(b, NULL);
    test_go(s, main_co, NULL);
    aco_rt_sched_free(s);
    return 0;
}

int main(void) {
    test_watchdog();
    test_backends_apart(one_backend);
    printf("test_msg_bb_ends: ok\n");
    return 0;
}
