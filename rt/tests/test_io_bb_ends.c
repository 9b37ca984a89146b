/* test_io_bb_ends.c - how the I/O section's blocking calls end, from
 * aco_rt.h alone: each of read, readv, recv, recv(MSG_WAITALL), write,
 * writev, send, accept, wait, poll and connect parked on a descriptor that
 * will not be ready (an empty pipe, a full pipe or socket, a listener with
 * no client, a Unix listener whose queue is full) and ended by a near
 * deadline (-ETIMEDOUT, never early), a passed one (0, -2, INT64_MIN, a
 * moment ago: -ETIMEDOUT at once), a cancel from another co and one made
 * before the call (-ECANCELED), and aco_rt_close from another co (-EBADF;
 * poll: POLLNVAL), each time with nothing lost: bytes written after the
 * failure all there, a full pipe or socket holding what it held, a later
 * client accepted, the peer seeing the end at once after the close.  Then:
 * a passed deadline on a ready descriptor succeeds; writes cut short by a
 * deadline return the part sent; a cancelled MSG_WAITALL loses nothing;
 * two waiters of one closed descriptor; a close of one of two numbers of a
 * file; close(2) behind the runtime's back (the deadline ends it); the end
 * and a reset while waiting; connect's and accept's errors and flags; a
 * close after part of a write or MSG_WAITALL moved (the part is the
 * count); a stream moved by calls with deadlines of 0-300 us (every byte
 * once, in order); a close of a lingering socket parking only the co. */
#define _GNU_SOURCE
#include "io_bb.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>

static int raw_fdflags(int fd) { return (int)syscall(SYS_fcntl, fd, F_GETFD); }

/* ---- the matrix: kinds x ends ---- */
enum { K_READ, K_READV, K_RECV, K_WAITALL, K_WRITE, K_WRITEV, K_SEND, K_ACCEPT,
       K_WAIT, K_POLL, K_CONNECT, NK };
static const char* kname[NK] = {"read", "readv", "recv", "recv_waitall", "write", "writev",
                                "send", "accept", "wait", "poll", "connect"};
enum { E_NEAR, E_PASSED, E_CANCEL, E_CANCEL_FIRST, E_CLOSE, NE };
static const char* ename[NE] = {"near deadline", "passed deadline", "cancel", "cancel first",
                                "aco_rt_close"};

struct fx {
    int kind;
    int fd;                 /* the one the call parks on */
    int peer;               /* the other end (pipes, pairs), or -1 */
    int extra[64];          /* the full Unix queue's clients */
    int nextra;
    size_t held;            /* bytes a full pipe/socket held */
    struct sockaddr_in tcp; /* accept's listener */
    struct sockaddr_un un;  /* connect's full listener */
    int64_t deadline;
    ssize_t res;
    short revents;
    int64_t took, ended;
    int cancel_first;
};
static char wbuf[1 << 20];

static void fixture(struct fx* f, int kind) {
    memset(f, 0, sizeof(*f));
    f->kind = kind;
    f->peer = -1;
    int p[2], sv[2];
    switch (kind) {
    case K_READ: case K_READV: case K_WAIT: case K_POLL:
        CHECK_EQ(pipe2(p, O_CLOEXEC), 0);
        f->fd = p[0];
        f->peer = p[1];
        break;
    case K_RECV: case K_WAITALL:
        CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
        f->fd = sv[0];
        f->peer = sv[1];
        if (kind == K_WAITALL) CHECK_EQ(send(sv[1], "ab", 2, 0), 2);  /* part there */
        break;
    case K_WRITE: case K_WRITEV:
        CHECK_EQ(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
        f->fd = p[1];
        f->peer = p[0];
        for (;;) {
            ssize_t w = write(p[1], wbuf, sizeof(wbuf));
            if (w < 0) { CHECK_EQ(errno, EAGAIN); break; }
            f->held += (size_t)w;
        }
        break;
    case K_SEND: {
        CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
        int sz = 4096;
        CHECK_EQ(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz)), 0);
        f->fd = sv[0];
        f->peer = sv[1];
        for (;;) {
            ssize_t w = send(sv[0], wbuf, sizeof(wbuf), MSG_DONTWAIT);
            if (w < 0) { CHECK_EQ(errno, EAGAIN); break; }
            f->held += (size_t)w;
        }
        break;
    }
    case K_ACCEPT:
        f->fd = loopback_listener(&f->tcp, 8);
        break;
    case K_CONNECT: {
        int l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        CHECK_GE(l, 0);
        f->un.sun_family = AF_UNIX;
        snprintf(f->un.sun_path + 1, sizeof(f->un.sun_path) - 1, "aco_io_bb_ends.%d.%d", (int)getpid(), kind);
        socklen_t al = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(f->un.sun_path + 1));
        CHECK_EQ(bind(l, (struct sockaddr*)&f->un, al), 0);
        CHECK_EQ(listen(l, 0), 0);
        f->peer = l;
        for (;;) {
            CHECK_LT(f->nextra, 64);
            int c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
            CHECK_GE(c, 0);
            f->extra[f->nextra++] = c;
            if (connect(c, (struct sockaddr*)&f->un, al) != 0) {
                CHECK_EQ(errno, EAGAIN);
                break;
            }
        }
        f->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        CHECK_GE(f->fd, 0);
        break;
    }
    }
}
static socklen_t un_len(const struct sockaddr_un* u) {
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(u->sun_path + 1));
}

static void op_co(void* arg) {
    struct fx* f = arg;
    static char rb[64];
    struct iovec v[2];
    if (f->cancel_first) CHECK_EQ(aco_rt_cancel(aco_rt_self()), 0);
    int64_t t0 = aco_rt_now();
    int64_t d = f->deadline;
    switch (f->kind) {
    case K_READ: f->res = aco_rt_read(f->fd, rb, sizeof(rb), d); break;
    case K_READV:
        v[0] = (struct iovec){rb, 10};
        v[1] = (struct iovec){rb + 10, 20};
        f->res = aco_rt_readv(f->fd, v, 2, d);
        break;
    case K_RECV: f->res = aco_rt_recv(f->fd, rb, sizeof(rb), 0, d); break;
    case K_WAITALL: f->res = aco_rt_recv(f->fd, rb, sizeof(rb), MSG_WAITALL, d); break;
    case K_WRITE: f->res = aco_rt_write(f->fd, wbuf, 100000, d); break;
    case K_WRITEV:
        v[0] = (struct iovec){wbuf, 50000};
        v[1] = (struct iovec){wbuf + 50000, 50000};
        f->res = aco_rt_writev(f->fd, v, 2, d);
        break;
    case K_SEND: f->res = aco_rt_send(f->fd, wbuf, 100000, 0, d); break;
    case K_ACCEPT: f->res = aco_rt_accept(f->fd, NULL, NULL, SOCK_CLOEXEC, d); break;
    case K_WAIT: f->res = aco_rt_wait(f->fd, POLLIN, d); break;
    case K_POLL: {
        struct pollfd pf = {f->fd, POLLIN, 0x7f};
        f->res = aco_rt_poll(&pf, 1, d);
        f->revents = pf.revents;
        break;
    }
    case K_CONNECT: f->res = aco_rt_connect(f->fd, (struct sockaddr*)&f->un, un_len(&f->un), d); break;
    }
    f->ended = aco_rt_now();
    f->took = f->ended - t0;
}

static void check_nothing_lost(struct fx* f, int end) {
    char b[64];
    switch (f->kind) {
    case K_READ: case K_READV: case K_RECV: case K_WAITALL: case K_WAIT: case K_POLL:
        if (end == E_CLOSE) {
            /* the file is closed when aco_rt_close returns */
            if (f->kind == K_RECV || f->kind == K_WAITALL)
                CHECK_EQ(recv(f->peer, b, sizeof(b), MSG_DONTWAIT), 0);
            else CHECK_EQ(aco_rt_write(f->peer, "xyz", 3, in_ms(1000)), -EPIPE);
            break;
        }
        CHECK_EQ(aco_rt_write(f->peer, "xyz", 3, in_ms(1000)), 3);
        aco_rt_sleep(2 * MS);       /* a call left in flight would take them */
        if (f->kind == K_WAITALL) CHECK_EQ((f->res > 0 ? f->res : 0) + (ssize_t)drain(f->fd), 5);
        else CHECK_EQ(drain(f->fd), 3);
        break;
    case K_WRITE: case K_WRITEV: case K_SEND:
        CHECK_EQ(drain(f->peer), f->held);
        if (end == E_CLOSE) CHECK_EQ(read(f->peer, b, 1), 0);   /* the end */
        break;
    case K_ACCEPT: {
        int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        CHECK_GE(c, 0);
        int r = aco_rt_connect(c, (struct sockaddr*)&f->tcp, sizeof(f->tcp), in_ms(2000));
        if (end == E_CLOSE) {
            CHECK_EQ(r, -ECONNREFUSED);
        } else {
            CHECK_EQ(r, 0);
            struct pollfd pf = {f->fd, POLLIN, 0};
            CHECK_EQ(poll(&pf, 1, 2000), 1);
            int a = accept4(f->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
            CHECK_GE(a, 0);     /* the connection waits, not taken */
            close(a);
        }
        close(c);
        break;
    }
    case K_CONNECT:
        break;
    }
}

static void release(struct fx* f, int end) {
    if (end != E_CLOSE) CHECK_EQ(aco_rt_close(f->fd), 0);
    if (f->peer >= 0) CHECK_EQ(aco_rt_close(f->peer), 0);
    for (int i = 0; i < f->nextra; i++) CHECK_EQ(aco_rt_close(f->extra[i]), 0);
}

static struct fx F;
static void one(int kind, int end, int64_t passed) {
    struct fx* f = &F;
    fixture(f, kind);
    f->deadline = end == E_NEAR ? in_ms(30) : end == E_PASSED ? passed : -1;
    f->cancel_first = end == E_CANCEL_FIRST;
    int64_t t0 = aco_rt_now();
    aco_rt_co_t* co = go(op_co, f);
    if (end == E_CANCEL || end == E_CLOSE) {
        aco_rt_sleep(10 * MS);
        CHECK_EQ(f->took, 0);   /* still parked */
        if (end == E_CANCEL) CHECK_EQ(aco_rt_cancel(co), 0);
        else CHECK_EQ(aco_rt_close(f->fd), 0);
    }
    join(co);
    int64_t took = aco_rt_now() - t0;
    ssize_t want = end == E_NEAR || end == E_PASSED ? -ETIMEDOUT
                 : end == E_CLOSE ? -EBADF : -ECANCELED;
    /* MSG_WAITALL with 2 bytes there: the deadline returns them; a cancel
     * or close after the call began: those bytes, or the error */
    if (kind == K_WAITALL && (end == E_NEAR || end == E_PASSED)) want = 2;
    if (kind == K_WAITALL && (end == E_CANCEL || end == E_CLOSE) && f->res == 2) want = 2;
    if (kind == K_POLL && end == E_CLOSE) {
        if (f->res != 1 || f->revents != POLLNVAL)
            TEST_FAIL_AT(__FILE__, __LINE__, "%s, %s: %zd revents %#x, want 1 POLLNVAL", kname[kind],
                         ename[end], f->res, (unsigned)f->revents);
    } else if (f->res != want) {
        TEST_FAIL_AT(__FILE__, __LINE__, "%s, %s (deadline %lld): %zd, want %zd", kname[kind], ename[end],
                     (long long)f->deadline, f->res, want);
    }
    if (end == E_NEAR && f->ended < f->deadline)
        TEST_FAIL_AT(__FILE__, __LINE__, "%s: ended %lld ns before its deadline", kname[kind],
                     (long long)(f->deadline - f->ended));
    if (end == E_PASSED || end == E_CANCEL_FIRST)
        if (took > 500 * MS)
            TEST_FAIL_AT(__FILE__, __LINE__, "%s, %s: took %lld ms", kname[kind], ename[end], (long long)(took / MS));
    check_nothing_lost(f, end);
    release(f, end);
}

static void case_matrix(void) {
    static const int64_t passed[] = {0, -2, INT64_MIN, 1};
    for (int k = 0; k < NK; k++)
        for (int e = 0; e < NE; e++) {
            if (e == E_PASSED) {
                for (int i = 0; i < 4; i++) one(k, e, i == 3 ? aco_rt_now() - 1 : passed[i]);
            } else {
                one(k, e, 0);
            }
        }
}

/* ---- a passed deadline on a ready descriptor: one try, that succeeds ---- */
static void case_passed_ready(void) {
    int p[2], sv[2];
    char b[16];
    CHECK_EQ(pipe2(p, O_CLOEXEC), 0);
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    CHECK_EQ(aco_rt_write(p[1], "hello", 5, 0), 5);
    CHECK_EQ(aco_rt_wait(p[0], POLLIN, -2), POLLIN);
    struct pollfd pf[2] = {{p[0], POLLIN, 0}, {p[1], POLLOUT, 0}};
    CHECK_EQ(aco_rt_poll(pf, 2, INT64_MIN), 2);
    CHECK_EQ(aco_rt_read(p[0], b, 2, 0), 2);
    struct iovec v = {b, 3};
    CHECK_EQ(aco_rt_readv(p[0], &v, 1, aco_rt_now() - 1), 3);
    CHECK_EQ(aco_rt_writev(p[1], &v, 1, 0), 3);
    CHECK_EQ(aco_rt_send(sv[0], "abcd", 4, 0, 0), 4);
    CHECK_EQ(aco_rt_recv(sv[1], b, 4, MSG_WAITALL, -2), 4);
    struct sockaddr_in a;
    int l = loopback_listener(&a, 8);
    int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK_EQ(aco_rt_connect(c, (struct sockaddr*)&a, sizeof(a), in_ms(2000)), 0);
    struct pollfd lp = {l, POLLIN, 0};
    CHECK_EQ(poll(&lp, 1, 2000), 1);
    int d = aco_rt_accept(l, NULL, NULL, 0, 0);
    CHECK_GE(d, 0);
    /* TCP's connect is never made at once: a passed deadline -ETIMEDOUT,
     * and another connect waits for that attempt */
    int c2 = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK_EQ(aco_rt_connect(c2, (struct sockaddr*)&a, sizeof(a), 0), -ETIMEDOUT);
    CHECK_EQ(aco_rt_connect(c2, (struct sockaddr*)&a, sizeof(a), in_ms(2000)), 0);
    CHECK_EQ(aco_rt_connect(c2, (struct sockaddr*)&a, sizeof(a), in_ms(2000)), -EISCONN);
    CHECK_EQ(aco_rt_close(c2), 0);
    CHECK_EQ(aco_rt_close(c), 0);
    CHECK_EQ(aco_rt_close(d), 0);
    CHECK_EQ(aco_rt_close(l), 0);
    CHECK_EQ(aco_rt_close(p[0]), 0);
    CHECK_EQ(aco_rt_close(p[1]), 0);
    CHECK_EQ(aco_rt_close(sv[0]), 0);
    CHECK_EQ(aco_rt_close(sv[1]), 0);
}

/* ---- writes cut short: the part sent is the count; cancelled parts ---- */
struct cut { int fd, how; int64_t deadline; ssize_t res; };
static void cut_co(void* arg) {
    struct cut* c = arg;
    struct iovec v[3] = {{wbuf, 1000}, {wbuf, 0}, {wbuf + 1000, sizeof(wbuf) - 1000}};
    if (c->how == 0) c->res = aco_rt_write(c->fd, wbuf, sizeof(wbuf), c->deadline);
    else if (c->how == 1) c->res = aco_rt_writev(c->fd, v, 3, c->deadline);
    else c->res = aco_rt_send(c->fd, wbuf, sizeof(wbuf), 0, c->deadline);
}
static void case_cut(void) {
    for (int how = 0; how < 3; how++)
        for (int cancel = 0; cancel < 2; cancel++) {
            int p[2];
            if (how == 2) CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p), 0);
            else CHECK_EQ(pipe2(p, O_CLOEXEC), 0);
            int w = how == 2 ? p[0] : p[1], r = how == 2 ? p[1] : p[0];
            static struct cut c;
            c = (struct cut){w, how, cancel ? -1 : in_ms(30), 0};
            int64_t t0 = aco_rt_now();
            aco_rt_co_t* co = go(cut_co, &c);
            if (cancel) {
                aco_rt_sleep(20 * MS);
                CHECK_EQ(aco_rt_cancel(co), 0);
            }
            join(co);
            if (!cancel) CHECK_GE(aco_rt_now() - t0, 30 * MS);
            /* room for part of it: the part sent is the count */
            CHECK_GT(c.res, 0);
            CHECK_LT(c.res, sizeof(wbuf));
            CHECK_EQ(drain(r), c.res);
            CHECK_EQ(aco_rt_close(p[0]), 0);
            CHECK_EQ(aco_rt_close(p[1]), 0);
        }
}

/* ---- a cancelled MSG_WAITALL after part came: nothing lost ---- */
struct wa { int fd; ssize_t res; };
static void wa_co(void* arg) {
    struct wa* w = arg;
    static char b[100];
    w->res = aco_rt_recv(w->fd, b, sizeof(b), MSG_WAITALL, -1);
}
static void case_waitall_cancel(void) {
    for (int i = 0; i < 2; i++) {
        int sv[2];
        CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
        static struct wa w;
        w = (struct wa){sv[0], 0};
        aco_rt_co_t* co = go(wa_co, &w);
        aco_rt_sleep(5 * MS);
        CHECK_EQ(aco_rt_write(sv[1], "0123456789", 10, in_ms(1000)), 10);
        aco_rt_sleep(i ? 10 * MS : 0);
        CHECK_EQ(aco_rt_cancel(co), 0);
        join(co);
        /* the part it took, or -ECANCELED and nothing taken */
        if (w.res == -ECANCELED) CHECK_EQ(drain(sv[0]), 10);
        else {
            CHECK_EQ(w.res, 10);
            CHECK_EQ(drain(sv[0]), 0);
        }
        CHECK_EQ(aco_rt_close(sv[0]), 0);
        CHECK_EQ(aco_rt_close(sv[1]), 0);
    }
}

/* ---- closes: two waiters, a dup, close(2) behind the runtime's back ---- */
struct rd { int fd; int64_t deadline; ssize_t res; int64_t took; };
static void rd_co(void* arg) {
    struct rd* r = arg;
    char b[16];
    int64_t t0 = aco_rt_now();
    r->res = aco_rt_recv(r->fd, b, sizeof(b), 0, r->deadline);
    r->took = aco_rt_now() - t0;
}
static void rdp_co(void* arg) {
    struct rd* r = arg;
    char b[16];
    int64_t t0 = aco_rt_now();
    r->res = aco_rt_read(r->fd, b, sizeof(b), r->deadline);
    r->took = aco_rt_now() - t0;
}
static void case_closes(void) {
    int sv[2];
    char b[8];
    static struct rd r1, r2;
    /* two waiters: both -EBADF */
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    r1 = (struct rd){sv[0], in_ms(5000), 0, 0};
    r2 = r1;
    aco_rt_co_t* a = go(rd_co, &r1);
    aco_rt_co_t* c = go(rdp_co, &r2);
    aco_rt_sleep(10 * MS);
    CHECK_EQ(aco_rt_close(sv[0]), 0);
    CHECK_EQ(recv(sv[1], b, sizeof(b), MSG_DONTWAIT), 0);   /* the end at once */
    join(a);
    join(c);
    CHECK_EQ(r1.res, -EBADF);
    CHECK_EQ(r2.res, -EBADF);
    CHECK_LT(r1.took, 2000 * MS);
    CHECK_EQ(aco_rt_close(sv[1]), 0);
    /* one of two numbers of the file: its waiter -EBADF, the file lives */
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    int dupfd = fcntl(sv[0], F_DUPFD_CLOEXEC, 0);
    CHECK_GE(dupfd, 0);
    r1 = (struct rd){sv[0], in_ms(5000), 0, 0};
    a = go(rd_co, &r1);
    aco_rt_sleep(10 * MS);
    CHECK_EQ(aco_rt_close(sv[0]), 0);
    join(a);
    CHECK_EQ(r1.res, -EBADF);
    CHECK_EQ(recv(sv[1], b, sizeof(b), MSG_DONTWAIT), -1);
    CHECK_EQ(errno, EAGAIN);
    CHECK_EQ(aco_rt_send(sv[1], "dup", 3, 0, in_ms(1000)), 3);
    CHECK_EQ(aco_rt_recv(dupfd, b, sizeof(b), 0, in_ms(1000)), 3);
    CHECK_EQ(aco_rt_close(dupfd), 0);
    CHECK_EQ(aco_rt_close(sv[1]), 0);
    /* close(2) behind its back: not told; the deadline ends the wait */
    int p[2];
    CHECK_EQ(pipe2(p, O_CLOEXEC), 0);
    r1 = (struct rd){p[0], in_ms(60), 0, 0};
    a = go(rdp_co, &r1);
    aco_rt_sleep(10 * MS);
    CHECK_EQ(close(p[0]), 0);
    join(a);
    CHECK_EQ(r1.res, -ETIMEDOUT);
    CHECK_GE(r1.took, 50 * MS);
    CHECK_EQ(aco_rt_close(p[1]), 0);
    /* the end and a reset while waiting */
    CHECK_EQ(pipe2(p, O_CLOEXEC), 0);
    r1 = (struct rd){p[0], in_ms(5000), 0, 0};
    a = go(rdp_co, &r1);
    aco_rt_sleep(10 * MS);
    CHECK_EQ(aco_rt_close(p[1]), 0);
    join(a);
    CHECK_EQ(r1.res, 0);
    CHECK_EQ(aco_rt_close(p[0]), 0);
    struct sockaddr_in ad;
    int l = loopback_listener(&ad, 8);
    int cl = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK_EQ(aco_rt_connect(cl, (struct sockaddr*)&ad, sizeof(ad), in_ms(2000)), 0);
    int sr = aco_rt_accept(l, NULL, NULL, SOCK_CLOEXEC, in_ms(2000));
    CHECK_GE(sr, 0);
    r1 = (struct rd){cl, in_ms(5000), 0, 0};
    a = go(rd_co, &r1);
    aco_rt_sleep(10 * MS);
    struct linger lg = {1, 0};
    CHECK_EQ(setsockopt(sr, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
    CHECK_EQ(aco_rt_close(sr), 0);
    join(a);
    CHECK_EQ(r1.res, -ECONNRESET);
    CHECK_EQ(aco_rt_recv(cl, b, sizeof(b), 0, in_ms(1000)), 0);
    CHECK_EQ(aco_rt_close(cl), 0);
    CHECK_EQ(aco_rt_close(l), 0);
}

/* ---- connect's and accept's errors and flags ---- */
static void case_conn(void) {
    struct sockaddr_in a;
    int hold = loopback_listener(&a, -1);        /* bound, not listening */
    int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK_EQ(aco_rt_connect(c, (struct sockaddr*)&a, sizeof(a), in_ms(2000)), -ECONNREFUSED);
    /* failed: unconnected, another connect tries afresh */
    CHECK_EQ(listen(hold, 8), 0);
    CHECK_EQ(aco_rt_connect(c, (struct sockaddr*)&a, sizeof(a), in_ms(2000)), 0);
    CHECK(raw_flags(c) & O_NONBLOCK);       /* connect's socket is made so */
    /* accept4's flags */
    struct sockaddr_in pa;
    socklen_t pl = sizeof(pa);
    int d = aco_rt_accept(hold, (struct sockaddr*)&pa, &pl, SOCK_NONBLOCK | SOCK_CLOEXEC, in_ms(2000));
    CHECK_GE(d, 0);
    CHECK_EQ(pl, sizeof(pa));
    CHECK_EQ(pa.sin_family, AF_INET);
    CHECK(raw_flags(d) & O_NONBLOCK);
    CHECK(raw_fdflags(d) & FD_CLOEXEC);
    CHECK_EQ(aco_rt_close(d), 0);
    int c2 = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK_EQ(aco_rt_connect(c2, (struct sockaddr*)&a, sizeof(a), in_ms(2000)), 0);
    CHECK_EQ(aco_rt_accept(hold, NULL, NULL, 0x40000000, in_ms(2000)), -EINVAL);
    d = aco_rt_accept(hold, NULL, NULL, 0, in_ms(2000));    /* still there */
    CHECK_GE(d, 0);
    CHECK_EQ(raw_flags(d) & O_NONBLOCK, 0);
    CHECK_EQ(raw_fdflags(d) & FD_CLOEXEC, 0);
    CHECK_EQ(aco_rt_close(d), 0);
    CHECK_EQ(aco_rt_close(c2), 0);
    CHECK_EQ(aco_rt_close(c), 0);
    CHECK_EQ(aco_rt_close(hold), 0);
    /* a Unix path nobody binds; a pipe */
    struct sockaddr_un u = {0};
    u.sun_family = AF_UNIX;
    snprintf(u.sun_path, sizeof(u.sun_path), "/nonexistent/aco_io_bb_ends.%d", (int)getpid());
    int us = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK_EQ(aco_rt_connect(us, (struct sockaddr*)&u, sizeof(u), in_ms(2000)), -ENOENT);
    CHECK_EQ(aco_rt_close(us), 0);
    int p[2];
    CHECK_EQ(pipe2(p, O_CLOEXEC), 0);
    CHECK_EQ(aco_rt_connect(p[0], (struct sockaddr*)&a, sizeof(a), in_ms(2000)), -ENOTSOCK);
    CHECK_EQ(aco_rt_close(p[0]), 0);
    CHECK_EQ(aco_rt_close(p[1]), 0);
}

/* ---- aco_rt_close after part moved: the part is the count ---- */
struct part { int fd, how; ssize_t res; };
static void part_co(void* arg) {
    struct part* w = arg;
    struct iovec v[2] = {{wbuf, 1000}, {wbuf + 1000, sizeof(wbuf) - 1000}};
    static char rb[100];
    switch (w->how) {
    case 0: w->res = aco_rt_write(w->fd, wbuf, sizeof(wbuf), in_ms(5000)); break;
    case 1: w->res = aco_rt_send(w->fd, wbuf, sizeof(wbuf), 0, in_ms(5000)); break;
    case 2: w->res = aco_rt_writev(w->fd, v, 2, in_ms(5000)); break;
    default: w->res = aco_rt_recv(w->fd, rb, sizeof(rb), MSG_WAITALL, in_ms(5000)); break;
    }
}
static void case_close_part(void) {
    for (int how = 0; how < 4; how++) {
        int p[2];
        if (how == 0 || how == 2) CHECK_EQ(pipe2(p, O_CLOEXEC), 0);
        else CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p), 0);
        int fd = how == 3 ? p[0] : p[1], other = how == 3 ? p[1] : p[0];
        int dupfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);  /* the file stays: bytes countable */
        CHECK_GE(dupfd, 0);
        static struct part w;
        w = (struct part){fd, how, 999};
        if (how == 3) CHECK_EQ(write(other, "0123456789", 10), 10);
        aco_rt_co_t* co = go(part_co, &w);
        aco_rt_sleep(15 * MS);
        CHECK_EQ(w.res, 999);           /* parked, part moved */
        CHECK_EQ(aco_rt_close(fd), 0);
        join(co);
        if (how == 3) {
            /* MSG_WAITALL: the 10 bytes it took, or -EBADF and they wait */
            if (w.res == -EBADF) CHECK_EQ(drain(dupfd), 10);
            else { CHECK_EQ(w.res, 10); CHECK_EQ(drain(dupfd), 0); }
        } else {
            CHECK_GT(w.res, 0);
            CHECK_LT(w.res, sizeof(wbuf));
            CHECK_EQ(drain(other), w.res);
        }
        CHECK_EQ(aco_rt_close(dupfd), 0);
        CHECK_EQ(aco_rt_close(other), 0);
    }
}

/* ---- a stream moved by calls with deadlines of 0-300 us: every byte
 * once, in order, whatever the counts the deadlines cut ---- */
#define RS (FEW ? (256 << 10) : (2 << 20))
static char rs_src[2 << 20], rs_dst[2 << 20];
struct rs { int fd, how; size_t got; };
static void rs_reader(void* arg) {
    struct rs* r = arg;
    uint64_t st = 7;
    r->got = 0;
    while (r->got < RS) {
        size_t want = 1 + test_rand(&st) % 100000;
        if (want > RS - r->got) want = RS - r->got;
        int64_t d = aco_rt_now() + (int64_t)(test_rand(&st) % 300000);
        ssize_t k = r->how == 1 ? aco_rt_recv(r->fd, rs_dst + r->got, want, 0, d)
                                : aco_rt_read(r->fd, rs_dst + r->got, want, d);
        if (k == -ETIMEDOUT) continue;
        CHECK_GT(k, 0);
        r->got += (size_t)k;
    }
}
static void case_resume(void) {
    for (size_t i = 0; i < RS; i++) rs_src[i] = (char)(i * 7 + (i >> 11));
    for (int how = 0; how < 3; how++) {
        int p[2];
        if (how == 1) CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p), 0);
        else CHECK_EQ(pipe2(p, O_CLOEXEC), 0);
        memset(rs_dst, 0, RS);
        static struct rs r;
        r = (struct rs){p[0], how, 0};
        aco_rt_co_t* co = go(rs_reader, &r);
        uint64_t st = 99;
        size_t off = 0;
        while (off < RS) {
            size_t n = RS - off;
            struct iovec v[3] = {{rs_src + off, n / 3}, {rs_src, 0}, {rs_src + off + n / 3, n - n / 3}};
            int64_t d = aco_rt_now() + (int64_t)(test_rand(&st) % 300000);
            ssize_t w = how == 1 ? aco_rt_send(p[1], rs_src + off, n, 0, d)
                      : how == 2 ? aco_rt_writev(p[1], v, 3, d)
                      : aco_rt_write(p[1], rs_src + off, n, d);
            if (w == -ETIMEDOUT) continue;
            CHECK_GT(w, 0);
            CHECK_LE(w, n);
            off += (size_t)w;
        }
        join(co);
        CHECK_EQ(r.got, RS);
        CHECK(memcmp(rs_src, rs_dst, RS) == 0);
        CHECK_EQ(aco_rt_close(p[0]), 0);
        CHECK_EQ(aco_rt_close(p[1]), 0);
    }
}

/* ---- aco_rt_close of a socket with SO_LINGER whose data the peer does
 * not take: in a co the number goes at once, the co parks while the
 * close waits, the thread runs other cos meanwhile ---- */
static volatile int ticking;
static int ticks;
static void ticker_co(void* arg) {
    (void)arg;
    while (ticking) {
        ticks++;
        aco_rt_sleep(5 * MS);
    }
}
static void case_linger(void) {
    struct sockaddr_in a;
    int l = loopback_listener(&a, 4);
    int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK_GE(c, 0);
    int sz = 4096;
    CHECK_EQ(setsockopt(c, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz)), 0);
    CHECK_EQ(aco_rt_connect(c, (struct sockaddr*)&a, sizeof(a), in_ms(2000)), 0);
    int d = aco_rt_accept(l, NULL, NULL, SOCK_CLOEXEC, in_ms(2000));
    CHECK_GE(d, 0);
    CHECK_EQ(setsockopt(d, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz)), 0);
    for (;;) {
        ssize_t w = aco_rt_send(c, wbuf, sizeof(wbuf), MSG_DONTWAIT, -1);
        if (w == -EAGAIN) break;
        CHECK_GT(w, 0);
    }
    struct linger lg = {1, 1};
    CHECK_EQ(setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
    ticking = 1;
    ticks = 0;
    aco_rt_co_t* t = go(ticker_co, NULL);
    aco_rt_yield();
    int64_t t0 = aco_rt_now();
    CHECK_EQ(aco_rt_close(c), 0);
    int64_t took = aco_rt_now() - t0;
    ticking = 0;
    join(t);
    CHECK_EQ(fcntl(c, F_GETFD), -1);    /* the number is gone */
    CHECK_GE(took, 500 * MS);            /* the linger was waited for */
#ifndef ACO_USE_VALGRIND /* (memcheck holds its lock over a close(2): one thread runs) */
    CHECK_GT(ticks, 20);                 /* ... by the co, not the thread */
#endif
    CHECK_EQ(aco_rt_close(d), 0);
    CHECK_EQ(aco_rt_close(l), 0);
}

static void main_co(void* arg) {
    (void)arg;
    case_matrix();
    case_passed_ready();
    case_cut();
    case_waitall_cancel();
    case_closes();
    case_conn();
    case_close_part();
    case_resume();
    case_linger();
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
    printf("test_io_bb_ends: ok\n");
    return 0;
}
