/* test_io: the I/O calls, on pipes, AF_UNIX socketpairs and TCP over
 * loopback.
 *
 *  - 8 MiB transfers (writer co, reader co): every call and buffer place
 *    mixed per chunk (write / writev / send from the heap or the co's
 *    stack, one 4 MiB write that must be written fully, read / readv / recv
 *    into the heap or the stack, iovec arrays on the stack); every byte
 *    checked against its stream's pattern; EOF after shutdown / close;
 *  - read / recv / readv deadlines: -ETIMEDOUT not before the deadline and
 *    the data sent later is read whole (nothing lost), heap and stack;
 *  - a write / send deadline and cancel on a full socket: the bytes the
 *    calls report written are exactly the bytes the reader gets;
 *  - cancel of a co blocked in read, write, accept, wait;
 *  - accept (address on the heap, the stack, NULL; the peer's port),
 *    connect (0, -ECONNREFUSED, -ETIMEDOUT to a listener whose backlog is
 *    full), accept deadline;
 *  - aco_rt_wait: POLLIN / POLLOUT at once, woken by a write, deadline,
 *    POLLHUP / POLLRDHUP after the peer closed; ACO_RT_WAIT_AFTER_EAGAIN
 *    (no look first on a socket, a look on a pipe and a regular file);
 *  - half-closed sockets (SHUT_WR: the reader gets 0, the other way still
 *    works); EOF or a reset that came with the last data (before the read
 *    that returned it short): the next read reports it at once; peer
 *    reset mid-request (SO_LINGER 0: -ECONNRESET or 0, then send fails
 *    without a crash);
 *  - aco_rt_close of a descriptor another co is blocked on (read with heap
 *    and stack buffers, write on a full socket, accept, wait; 50 cos on
 *    one descriptor): -EBADF; io_uring with a tiny ring (2 entries: full
 *    submission queue, completion overflow): 300 connections, cancel/close;
 *  - descriptors the program made non-blocking itself (pipe, sockets, a
 *    listener): the calls still wait;
 *  - SIGPIPE: send, write and writev to a socket or a pipe whose reader
 *    is gone are -EPIPE, with the signal's default action in place or
 *    ignored, on both backends; no SIGPIPE is left pending, the mask is
 *    as it was;
 *  - EMFILE at accept: -EMFILE, existing connections keep being served,
 *    accept works again once descriptors are free;
 *  - 1000 concurrent TCP connections echoing checked data (server and
 *    client cos in one scheduler);
 *  - the share-stack hazard: a scheduler with ONE share stack, cos reading
 *    (read, readv with the iovec array and the buffers on the stack, recv)
 *    into char buf[4096] on their stacks while data arrives as other cos
 *    hold the stack; accept with its sockaddr on the stack; a standalone
 *    co reading into its own stack;
 *  - the descriptor table grows (I/O on descriptors up to 16k) while cos
 *    wait on low ones: they are woken right (data, aco_rt_close, deadline);
 *  - a regular file: mixed heap / stack reads and writes share the file
 *    position; aco_rt_wait says ready;
 *  - last (what the contract says): a read with a past deadline and data
 *    ready returns the data on both backends, also right after a short read
 *    on a socket the runtime connected; a cancelled co's later I/O calls
 *    fail with -ECANCELED even with data ready.
 */
#define _GNU_SOURCE
#include "rt_test.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>

enum { K_PIPE, K_UNIX, K_TCP };
static const char* kind_name[] = {"pipe", "unix", "tcp"};

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */
/* ------------------------------------------------------------------------ */

static inline uint8_t pat(uint32_t k, uint64_t i) {
    return (uint8_t)(i * 131u + k * 71u + (i >> 11) * 17u + (i >> 19));
}
static void fill_pat(void* b, size_t n, uint32_t k, uint64_t off) {
    uint8_t* p = (uint8_t*)b;
    for (size_t i = 0; i < n; i++) p[i] = pat(k, off + i);
}
#define CHECK_PAT(b, n, k, off) check_pat_at(__FILE__, __LINE__, b, n, k, off)
static void check_pat_at(const char* file, int line, const void* b, size_t n, uint32_t k,
                         uint64_t off) {
    const uint8_t* p = (const uint8_t*)b;
    for (size_t i = 0; i < n; i++)
        if (p[i] != pat(k, off + i))
            TEST_FAIL_AT(file, line, "stream %u byte %llu: got %u, want %u", k,
                         (unsigned long long)(off + i), p[i], pat(k, off + i));
}

static void closefd(int fd) { CHECK_EQ(aco_rt_close(fd), 0); }

static struct sockaddr_in loopback(uint16_t port) {
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    return a;
}

/* A listening TCP socket on 127.0.0.1 (a port of its own): fd, *port. */
static int tcp_listener(int backlog, uint16_t* port) {
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(l >= 0);
    int one = 1;
    CHECK_EQ(setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)), 0);
    struct sockaddr_in a = loopback(0);
    CHECK_EQ(bind(l, (struct sockaddr*)&a, sizeof(a)), 0);
    CHECK_EQ(listen(l, backlog), 0);
    socklen_t len = sizeof(a);
    CHECK_EQ(getsockname(l, (struct sockaddr*)&a, &len), 0);
    *port = ntohs(a.sin_port);
    return l;
}

/* fds[0] and fds[1] connected (pipe: [0] reads, [1] writes), made with
 * plain blocking system calls (loopback connects at once). */
static void make_pair(int kind, int fds[2]) {
    if (kind == K_PIPE) {
        CHECK_EQ(pipe2(fds, O_CLOEXEC), 0);
    } else if (kind == K_UNIX) {
        CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    } else {
        uint16_t port;
        int l = tcp_listener(1, &port);
        int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in a = loopback(port);
        CHECK_EQ(connect(c, (struct sockaddr*)&a, sizeof(a)), 0);
        int s = accept4(l, NULL, NULL, SOCK_CLOEXEC);
        CHECK(s >= 0);
        CHECK_EQ(close(l), 0);
        int one = 1;
        setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        fds[0] = s;
        fds[1] = c;
    }
}

static uint8_t* HW;     /* the writer's 8 MiB, by stream */
static uint8_t* HR;     /* the reader's heap buffer */
#define XSIZE (8u << 20)
#define HR_SIZE (1u << 20)

/* ------------------------------------------------------------------------ */
/* 8 MiB transfers                                                          */
/* ------------------------------------------------------------------------ */

typedef struct {
    int fd;
    int kind;
    uint32_t k;
    uint64_t total;
    uint64_t seed;
    uint64_t done;
    int finished;
} xfer_t;

static void xwriter(void* arg) {
    xfer_t* x = (xfer_t*)arg;
    uint64_t rng = x->seed;
    uint8_t sbuf[4096];
    uint64_t off = 0;
    int big_done = 0;
    int sock = x->kind != K_PIPE;
    while (off < x->total) {
        uint64_t rem = x->total - off;
        int mode = (int)(test_rand(&rng) % (sock ? 6 : 4));
        if (!big_done && off > x->total / 4) mode = 6, big_done = 1;
        size_t n;
        ssize_t r;
        switch (mode) {
        case 0:     /* write, heap */
            n = (size_t)(1 + test_rand(&rng) % (256 * 1024));
            if (n > rem) n = (size_t)rem;
            r = aco_rt_write(x->fd, HW + off, n, -1);
            break;
        case 1:     /* write, stack */
            n = (size_t)(1 + test_rand(&rng) % sizeof(sbuf));
            if (n > rem) n = (size_t)rem;
            fill_pat(sbuf, n, x->k, off);
            r = aco_rt_write(x->fd, sbuf, n, -1);
            break;
        case 2: {   /* writev, heap pieces, iovec array on the stack */
            struct iovec iov[4];
            n = 0;
            for (int i = 0; i < 4; i++) {
                size_t m = (size_t)(test_rand(&rng) % (64 * 1024));
                if (m > rem - n) m = (size_t)(rem - n);
                iov[i].iov_base = HW + off + n;
                iov[i].iov_len = m;
                n += m;
            }
            r = aco_rt_writev(x->fd, iov, 4, -1);
            break;
        }
        case 3: {   /* writev, stack pieces */
            n = (size_t)(test_rand(&rng) % sizeof(sbuf));
            if (n > rem) n = (size_t)rem;
            fill_pat(sbuf, n, x->k, off);
            struct iovec iov[3] = {{sbuf, n / 3}, {sbuf + n / 3, 0}, {sbuf + n / 3, n - n / 3}};
            r = aco_rt_writev(x->fd, iov, 3, -1);
            break;
        }
        case 4:     /* send, heap */
            n = (size_t)(1 + test_rand(&rng) % (256 * 1024));
            if (n > rem) n = (size_t)rem;
            r = aco_rt_send(x->fd, HW + off, n, 0, -1);
            break;
        case 5:     /* send, stack */
            n = (size_t)(1 + test_rand(&rng) % sizeof(sbuf));
            if (n > rem) n = (size_t)rem;
            fill_pat(sbuf, n, x->k, off);
            r = aco_rt_send(x->fd, sbuf, n, 0, -1);
            break;
        default:    /* one big write, fully written */
            n = (size_t)(rem < (4u << 20) ? rem : (4u << 20));
            r = aco_rt_write(x->fd, HW + off, n, -1);
            break;
        }
        CHECK_EQ(r, (ssize_t)n);
        off += n;
        if (test_rand(&rng) % 16 == 0) CHECK_EQ(aco_rt_yield(), 0);
    }
    x->done = off;
    if (sock) CHECK_EQ(shutdown(x->fd, SHUT_WR), 0);
    else closefd(x->fd);
    x->finished = 1;
}

static void xreader(void* arg) {
    xfer_t* x = (xfer_t*)arg;
    uint64_t rng = x->seed * 3 + 1;
    uint8_t sbuf[4096];
    uint64_t off = 0;
    int sock = x->kind != K_PIPE;
    for (;;) {
        int mode = (int)(test_rand(&rng) % (sock ? 6 : 4));
        ssize_t r;
        size_t n;
        switch (mode) {
        case 0:
            n = (size_t)(1 + test_rand(&rng) % HR_SIZE);
            r = aco_rt_read(x->fd, HR, n, -1);
            if (r > 0) CHECK_PAT(HR, (size_t)r, x->k, off);
            break;
        case 1:
            n = (size_t)(1 + test_rand(&rng) % sizeof(sbuf));
            r = aco_rt_read(x->fd, sbuf, n, -1);
            if (r > 0) CHECK_PAT(sbuf, (size_t)r, x->k, off);
            break;
        case 2: {   /* readv into heap pieces */
            struct iovec iov[3];
            size_t m = (size_t)(test_rand(&rng) % (HR_SIZE / 3));
            for (int i = 0; i < 3; i++) {
                iov[i].iov_base = HR + (size_t)i * (HR_SIZE / 3);
                iov[i].iov_len = i == 1 ? m / 2 : m + 1;
            }
            n = iov[0].iov_len + iov[1].iov_len + iov[2].iov_len;
            r = aco_rt_readv(x->fd, iov, 3, -1);
            if (r > 0) {
                size_t left = (size_t)r;
                uint64_t o = off;
                for (int i = 0; i < 3 && left; i++) {
                    size_t c = left < iov[i].iov_len ? left : iov[i].iov_len;
                    CHECK_PAT(iov[i].iov_base, c, x->k, o);
                    o += c;
                    left -= c;
                }
            }
            break;
        }
        case 3: {   /* readv into stack pieces */
            size_t a = (size_t)(test_rand(&rng) % 2048), b = (size_t)(1 + test_rand(&rng) % 2048);
            struct iovec iov[2] = {{sbuf, a}, {sbuf + 2048, b}};
            n = a + b;
            r = aco_rt_readv(x->fd, iov, 2, -1);
            if (r > 0) {
                size_t c = (size_t)r < a ? (size_t)r : a;
                CHECK_PAT(sbuf, c, x->k, off);
                CHECK_PAT(sbuf + 2048, (size_t)r - c, x->k, off + c);
            }
            break;
        }
        case 4:
            n = (size_t)(1 + test_rand(&rng) % HR_SIZE);
            r = aco_rt_recv(x->fd, HR, n, 0, -1);
            if (r > 0) CHECK_PAT(HR, (size_t)r, x->k, off);
            break;
        default:
            n = (size_t)(1 + test_rand(&rng) % sizeof(sbuf));
            r = aco_rt_recv(x->fd, sbuf, n, 0, -1);
            if (r > 0) CHECK_PAT(sbuf, (size_t)r, x->k, off);
            break;
        }
        if (r == 0 && n > 0) break;     /* EOF */
        CHECK_GE(r, 0);
        CHECK_LE((size_t)r, n);
        off += (uint64_t)r;
        CHECK_LE(off, x->total);
        if (test_rand(&rng) % 8 == 0) CHECK_EQ(aco_rt_yield(), 0);
    }
    CHECK_EQ(off, x->total);
    x->done = off;
    x->finished = 1;
}

static void transfers(void* arg) {
    (void)arg;
    for (int kind = 0; kind < 3; kind++) {
        int fds[2];
        make_pair(kind, fds);
        uint32_t k = (uint32_t)kind + 1;
        fill_pat(HW, XSIZE, k, 0);
        xfer_t w = {fds[1], kind, k, XSIZE, 1000 + (uint64_t)kind, 0, 0};
        xfer_t r = {fds[0], kind, k, XSIZE, 2000 + (uint64_t)kind, 0, 0};
        aco_rt_co_t* cr = aco_rt_spawn(NULL, xreader, &r);
        aco_rt_co_t* cw = aco_rt_spawn(NULL, xwriter, &w);
        CHECK(cr && cw);
        CHECK_EQ(aco_rt_join(cw, -1), 0);
        CHECK_EQ(aco_rt_join(cr, -1), 0);
        if (!r.finished || r.done != XSIZE)
            TEST_FAIL_AT(__FILE__, __LINE__, "%s: read %llu of %u", kind_name[kind],
                         (unsigned long long)r.done, XSIZE);
        CHECK_EQ(w.done, XSIZE);
        closefd(fds[0]);
        if (kind != K_PIPE) closefd(fds[1]);
    }
    /* both directions of one socket at once */
    int fds[2];
    make_pair(K_UNIX, fds);
    fill_pat(HW, XSIZE / 2, 9, 0);
    xfer_t w1 = {fds[1], K_UNIX, 9, XSIZE / 2, 31, 0, 0}, r1 = {fds[0], K_UNIX, 9, XSIZE / 2, 32, 0, 0};
    xfer_t w2 = {fds[0], K_UNIX, 9, XSIZE / 2, 33, 0, 0}, r2 = {fds[1], K_UNIX, 9, XSIZE / 2, 34, 0, 0};
    aco_rt_co_t* c[4] = {aco_rt_spawn(NULL, xreader, &r1), aco_rt_spawn(NULL, xwriter, &w1),
                         aco_rt_spawn(NULL, xwriter, &w2), NULL};
    /* the readers share HR: r2 starts when r1 is done (w2 waits meanwhile) */
    for (int i = 0; i < 3; i++) CHECK(c[i] != NULL);
    CHECK_EQ(aco_rt_join(c[0], -1), 0);
    c[3] = aco_rt_spawn(NULL, xreader, &r2);
    for (int i = 1; i < 4; i++) CHECK_EQ(aco_rt_join(c[i], -1), 0);
    CHECK_EQ(r1.done, XSIZE / 2);
    CHECK_EQ(r2.done, XSIZE / 2);
    closefd(fds[0]);
    closefd(fds[1]);
}

/* ------------------------------------------------------------------------ */
/* Read deadlines: nothing lost                                             */
/* ------------------------------------------------------------------------ */

typedef struct {
    int fd;
    int rounds;
    uint64_t bytes;     /* writer: sent; reader: received */
} dl_t;

static void dl_writer(void* arg) {
    dl_t* d = (dl_t*)arg;
    uint64_t rng = 4242;
    uint8_t buf[512];
    uint64_t off = 0;
    for (int i = 0; i < d->rounds; i++) {
        CHECK_EQ(aco_rt_sleep((int64_t)(test_rand(&rng) % MS)), 0);
        size_t n = (size_t)(1 + test_rand(&rng) % sizeof(buf));
        fill_pat(buf, n, 77, off);
        CHECK_EQ(aco_rt_write(d->fd, buf, n, -1), (ssize_t)n);
        off += n;
    }
    d->bytes = off;
    CHECK_EQ(shutdown(d->fd, SHUT_WR), 0);
}

static void dl_reader(void* arg) {
    dl_t* d = (dl_t*)arg;
    uint64_t rng = 777;
    uint8_t sbuf[700];
    uint64_t off = 0;
    int timeouts = 0;
    for (;;) {
        int64_t dl = aco_rt_now() + (int64_t)(test_rand(&rng) % (MS / 2));
        int mode = (int)(test_rand(&rng) % 5);
        ssize_t r;
        uint8_t* b = (mode & 1) ? sbuf : HR;
        if (mode < 2) {
            r = aco_rt_read(d->fd, b, sizeof(sbuf), dl);
        } else if (mode < 4) {
            r = aco_rt_recv(d->fd, b, sizeof(sbuf), 0, dl);
        } else {
            struct iovec iov[2] = {{HR, 100}, {HR + 100, sizeof(sbuf) - 100}};
            r = aco_rt_readv(d->fd, iov, 2, dl);
        }
        if (r == -ETIMEDOUT) {
            CHECK_GE(aco_rt_now(), dl);
            timeouts++;
            continue;
        }
        CHECK_GE(r, 0);
        if (r == 0) break;
        CHECK_PAT(b == sbuf ? sbuf : HR, (size_t)r, 77, off);
        off += (uint64_t)r;
    }
    d->bytes = off;
    CHECK_GT(timeouts, 0);
}

static void read_deadlines(void* arg) {
    (void)arg;
    for (int kind = K_UNIX; kind <= K_TCP; kind++) {
        int fds[2];
        make_pair(kind, fds);
        /* a plain timeout: not before the deadline */
        char c;
        int64_t d = aco_rt_now() + 3 * MS;
        CHECK_EQ(aco_rt_read(fds[0], HR, 10, d), -ETIMEDOUT);
        CHECK_GE(aco_rt_now(), d);
        d = aco_rt_now() + 2 * MS;
        CHECK_EQ(aco_rt_read(fds[0], &c, 1, d), -ETIMEDOUT);
        CHECK_GE(aco_rt_now(), d);
        CHECK_EQ(aco_rt_read(fds[0], &c, 1, 0), -ETIMEDOUT);
        /* read returns as soon as some bytes are there */
        CHECK_EQ(write(fds[1], "hello", 5), 5);
        CHECK_EQ(aco_rt_read(fds[0], HR, 4096, -1), 5);
        CHECK_EQ(memcmp(HR, "hello", 5), 0);
        dl_t dd = {fds[1], 100, 0}, rd = {fds[0], 100, 0};
        aco_rt_co_t* w = aco_rt_spawn(NULL, dl_writer, &dd);
        aco_rt_co_t* r = aco_rt_spawn(NULL, dl_reader, &rd);
        CHECK_EQ(aco_rt_join(w, -1), 0);
        CHECK_EQ(aco_rt_join(r, -1), 0);
        CHECK_EQ(rd.bytes, dd.bytes);
        closefd(fds[0]);
        closefd(fds[1]);
    }
}

/* ------------------------------------------------------------------------ */
/* Write deadlines and cancel on a full socket: written == received         */
/* ------------------------------------------------------------------------ */

typedef struct {
    int fd;
    int64_t deadline;
    int use_send;
    int stack;
    size_t n;
    ssize_t rc;
    uint64_t off;
} wr_t;

static void one_write(void* arg) {
    wr_t* w = (wr_t*)arg;
    uint8_t sbuf[3000];
    if (w->stack) {
        fill_pat(sbuf, w->n < sizeof(sbuf) ? w->n : sizeof(sbuf), 55, w->off);
        w->rc = w->use_send ? aco_rt_send(w->fd, sbuf, w->n, 0, w->deadline)
                            : aco_rt_write(w->fd, sbuf, w->n, w->deadline);
    } else {
        w->rc = w->use_send ? aco_rt_send(w->fd, HW + w->off, w->n, 0, w->deadline)
                            : aco_rt_write(w->fd, HW + w->off, w->n, w->deadline);
    }
}

/* read want bytes (checked), then make sure nothing more comes */
static uint64_t drain_check(int fd, uint64_t want, uint32_t k) {
    uint64_t off = 0;
    while (off < want) {
        ssize_t r = aco_rt_read(fd, HR, HR_SIZE, aco_rt_now() + 5000 * MS);
        if (r == -ETIMEDOUT) return off;
        CHECK_GT(r, 0);
        CHECK_PAT(HR, (size_t)r, k, off);
        off += (uint64_t)r;
    }
    ssize_t r = aco_rt_read(fd, HR, HR_SIZE, aco_rt_now() + 3 * MS);
    if (r > 0) off += (uint64_t)r;
    else CHECK_EQ(r, -ETIMEDOUT);
    return off;
}

static void write_deadlines(void* arg) {
    (void)arg;
    fill_pat(HW, XSIZE, 55, 0);
    for (int kind = K_UNIX; kind <= K_TCP; kind++) {
        for (int round = 0; round < 8; round++) {
            int fds[2];
            make_pair(kind, fds);
            int sz = 64 * 1024;
            setsockopt(fds[1], SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
            setsockopt(fds[0], SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
            uint64_t written = 0;
            int use_send = round & 1, stack = (round >> 1) & 1, cancel = round >> 2;
            /* writes until one cannot finish: deadline, or cancel */
            for (int i = 0; i < 200; i++) {
                wr_t w = {fds[1], cancel ? -1 : aco_rt_now() + 2 * MS, use_send, stack,
                          stack ? 3000 : 200000, 1, written};
                aco_rt_co_t* c = aco_rt_spawn(NULL, one_write, &w);
                if (cancel) {
                    CHECK_EQ(aco_rt_yield(), 0);
                    if (w.rc == 1) {    /* it waits: let it wait a little */
                        CHECK_EQ(aco_rt_sleep(MS), 0);
                        CHECK_EQ(aco_rt_cancel(c), 0);
                    }
                }
                CHECK_EQ(aco_rt_join(c, -1), 0);
                if (w.rc == (ssize_t)w.n) {
                    written += w.n;
                    continue;
                }
                int err = cancel ? -ECANCELED : -ETIMEDOUT;
                if (w.rc < 0) {
                    CHECK_EQ(w.rc, err);
                } else {
                    CHECK_LT(w.rc, (ssize_t)w.n);
                    written += (uint64_t)w.rc;
                }
                if (!cancel) CHECK_GE(aco_rt_now(), w.deadline);
                /* stack writes of 3000 bytes: go on until one fails whole */
                if (w.rc < 0 || !stack) break;
            }
            /* what was written arrives, nothing more */
            uint64_t got = drain_check(fds[0], written, 55);
            if (got != written)
                TEST_FAIL_AT(__FILE__, __LINE__, "%s round %d: written %llu, received %llu",
                             kind_name[kind], round, (unsigned long long)written,
                             (unsigned long long)got);
            /* a later write goes on from there */
            wr_t w = {fds[1], -1, 0, 0, 1000, 1, written};
            aco_rt_co_t* c = aco_rt_spawn(NULL, one_write, &w);
            CHECK_EQ(aco_rt_join(c, -1), 0);
            CHECK_EQ(w.rc, 1000);
            ssize_t r = aco_rt_read(fds[0], HR, 1000, -1);
            CHECK_EQ(r, 1000);
            CHECK_PAT(HR, 1000, 55, written);
            closefd(fds[0]);
            closefd(fds[1]);
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Cancel of blocked calls; aco_rt_close of their descriptor                */
/* ------------------------------------------------------------------------ */

typedef struct {
    int what;       /* 0 read heap, 1 read stack, 2 write (full), 3 accept,
                       4 wait, 5 recv heap, 6 readv stack */
    int fd;
    ssize_t rc;
    int started;
} blk_t;

static void blocked_call(void* arg) {
    blk_t* b = (blk_t*)arg;
    char sbuf[256];
    b->started = 1;
    switch (b->what) {
    case 0: b->rc = aco_rt_read(b->fd, HR, 100, -1); break;
    case 1: b->rc = aco_rt_read(b->fd, sbuf, sizeof(sbuf), -1); break;
    case 2: b->rc = aco_rt_write(b->fd, HW, XSIZE, -1); break;
    case 3: b->rc = aco_rt_accept(b->fd, NULL, NULL, 0, -1); break;
    case 4: b->rc = aco_rt_wait(b->fd, POLLIN, -1); break;
    case 5: b->rc = aco_rt_recv(b->fd, HR, 100, 0, -1); break;
    default: {
        struct iovec iov[2] = {{sbuf, 10}, {sbuf + 10, 100}};
        b->rc = aco_rt_readv(b->fd, iov, 2, -1);
        break;
    }
    }
}

/* many cos blocked on one descriptor, heap and stack buffers */
#define MANY_BLK 50
static void many_blocked_one_fd(void) {
    for (int kind = K_PIPE; kind <= K_UNIX; kind++) {
        int fds[2];
        make_pair(kind, fds);
        static blk_t b[MANY_BLK];
        aco_rt_co_t* c[MANY_BLK];
        for (int i = 0; i < MANY_BLK; i++) {
            b[i] = (blk_t){i % 3 == 0 ? 0 : i % 3 == 1 ? 1 : 4, fds[0], 12345, 0};
            c[i] = aco_rt_spawn(NULL, blocked_call, &b[i]);
        }
        CHECK_EQ(aco_rt_sleep(MS / 5), 0);
        /* one byte: exactly one reader gets it (or waiters see it) */
        CHECK_EQ(write(fds[1], "Q", 1), 1);
        /* (the reader that gets it may run late on a loaded machine under
         * TSan: waited for up to 5 s, then a while more for a second one
         * that must not come) */
        int got = 0;
        for (int ms = 0; ms < 5000 && got == 0; ms++) {
            CHECK_EQ(aco_rt_sleep(MS), 0);
            for (int i = 0; i < MANY_BLK; i++)
                if (b[i].what != 4 && b[i].rc == 1) got++;
        }
        CHECK_EQ(aco_rt_sleep(5 * MS), 0);
        got = 0;
        for (int i = 0; i < MANY_BLK; i++)
            if (b[i].what != 4 && b[i].rc == 1) got++;
        CHECK_EQ(got, 1);
        closefd(fds[0]);
        for (int i = 0; i < MANY_BLK; i++) {
            CHECK_EQ(aco_rt_join(c[i], -1), 0);
            if (b[i].what == 4) {
                /* aco_rt_wait: woken by the byte, or by the close */
                CHECK(b[i].rc == -EBADF || (b[i].rc > 0 && (b[i].rc & POLLIN)));
            } else if (b[i].rc != 1) {
                CHECK_EQ(b[i].rc, -EBADF);
            }
        }
        closefd(fds[1]);
    }
}

static void cancel_and_close(void* arg) {
    (void)arg;
    many_blocked_one_fd();
    for (int how = 0; how < 2; how++) {         /* 0: cancel, 1: aco_rt_close */
        for (int what = 0; what < 7; what++) {
            for (int kind = K_PIPE; kind <= K_TCP; kind++) {
                if (what == 3 && kind != K_TCP) continue;
                if ((what == 2 || what == 5) && kind == K_PIPE) continue;
                int fds[2] = {-1, -1};
                uint16_t port = 0;
                int fd;
                if (what == 3) {
                    fd = tcp_listener(4, &port);
                } else {
                    make_pair(kind, fds);
                    fd = what == 2 ? fds[1] : fds[0];
                }
                blk_t b = {what, fd, 12345, 0};
                aco_rt_co_t* c = aco_rt_spawn(NULL, blocked_call, &b);
                /* (io_uring: the operation is in the kernel by then) */
                CHECK_EQ(aco_rt_sleep(MS / 5), 0);
                CHECK_EQ(b.started, 1);
                if (what != 2) CHECK_EQ(b.rc, 12345);  /* still blocked */
                if (how == 0) {
                    CHECK_EQ(aco_rt_cancel(c), 0);
                } else {
                    closefd(fd);
                }
                CHECK_EQ(aco_rt_join(c, -1), 0);
                if (what == 2 && b.rc > 0) {
                    CHECK_LT(b.rc, (ssize_t)XSIZE);     /* a part went */
                } else if (b.rc != (how == 0 ? -ECANCELED : -EBADF)) {
                    TEST_FAIL_AT(__FILE__, __LINE__, "%s of a co blocked in call %d on %s: %zd (%s)",
                                 how ? "aco_rt_close" : "cancel", what, kind_name[kind], b.rc,
                                 b.rc < 0 ? strerror((int)-b.rc) : "");
                }
                if (how == 0) {
                    /* the descriptor still works: nothing was taken */
                    if (what != 3 && what != 2) {
                        CHECK_EQ(write(fds[1], "xyz", 3), 3);
                        CHECK_EQ(aco_rt_read(fds[0], HR, 100, -1), 3);
                        CHECK_EQ(memcmp(HR, "xyz", 3), 0);
                    }
                    closefd(fd);
                }
                if (what != 3) closefd(what == 2 ? fds[0] : fds[1]);
            }
        }
    }
}

/* ------------------------------------------------------------------------ */
/* accept, connect                                                          */
/* ------------------------------------------------------------------------ */

typedef struct {
    uint16_t port;
    int fd;
    int rc;
    uint16_t local_port;
} cl_t;

static void client_connect(void* arg) {
    cl_t* c = (cl_t*)arg;
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(c->fd >= 0);
    int one = 1;
    CHECK_EQ(setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)), 0);
    struct sockaddr_in a = loopback(c->port);
    c->rc = aco_rt_connect(c->fd, (struct sockaddr*)&a, sizeof(a), aco_rt_now() + 5000 * MS);
    struct sockaddr_in me;
    socklen_t len = sizeof(me);
    CHECK_EQ(getsockname(c->fd, (struct sockaddr*)&me, &len), 0);
    c->local_port = ntohs(me.sin_port);
}

static struct sockaddr_in heap_addr;

static void accept_connect(void* arg) {
    (void)arg;
    uint16_t port;
    int l = tcp_listener(16, &port);
    /* accept deadline */
    int64_t d = aco_rt_now() + 3 * MS;
    CHECK_EQ(aco_rt_accept(l, NULL, NULL, 0, d), -ETIMEDOUT);
    CHECK_GE(aco_rt_now(), d);
    CHECK_EQ(aco_rt_accept(l, NULL, NULL, 0, 0), -ETIMEDOUT);
    /* (that try, its deadline passed, was the readiness way's, which
     * left the listener O_NONBLOCK: cleared, for what follows) */
    CHECK_EQ(fcntl(l, F_SETFL, fcntl(l, F_GETFL) & ~O_NONBLOCK), 0);
    /* heap, stack, NULL, stack with room for 4 bytes of it (cut short, the
     * length the address's own, as accept4(2) does) */
    for (int where = 0; where < 4; where++) {
        cl_t c = {port, -1, 1, 0};
        aco_rt_co_t* cc = aco_rt_spawn(NULL, client_connect, &c);
        struct sockaddr_in stack_addr;
        struct sockaddr_in* a = where == 0 ? &heap_addr : where == 2 ? NULL : &stack_addr;
        socklen_t len = where == 3 ? 4 : sizeof(struct sockaddr_in);
        memset(&heap_addr, 0, sizeof(heap_addr));
        memset(&stack_addr, 0xa5, sizeof(stack_addr));
        int s = aco_rt_accept(l, (struct sockaddr*)a, a ? &len : NULL,
                              where == 1 ? SOCK_CLOEXEC : 0, -1);
        CHECK_GE(s, 0);
        CHECK_EQ(aco_rt_join(cc, -1), 0);
        CHECK_EQ(c.rc, 0);
        if (a) {
            CHECK_EQ(len, sizeof(struct sockaddr_in));
            CHECK_EQ(a->sin_family, AF_INET);
            if (where == 3) {
                CHECK_EQ(ntohs(a->sin_port), c.local_port);        /* (bytes 2-3) */
                CHECK_EQ(a->sin_addr.s_addr, 0xa5a5a5a5u);         /* untouched */
            } else {
                CHECK_EQ(ntohs(a->sin_port), c.local_port);
            }
        }
        /* io_uring accepts with the address anywhere: the listener is left
         * as it was (epoll's way needs O_NONBLOCK on it, aco_rt.h) */
        if (strncmp(test_backend_label, "uring", 5) == 0)
            CHECK_EQ(fcntl(l, F_GETFL) & O_NONBLOCK, 0);
        /* the two ends talk */
        CHECK_EQ(aco_rt_write(c.fd, "ping", 4, -1), 4);
        char buf[8];
        CHECK_EQ(aco_rt_read(s, buf, sizeof(buf), -1), 4);
        CHECK_EQ(memcmp(buf, "ping", 4), 0);
        CHECK_EQ(aco_rt_send(s, "pong!", 5, 0, -1), 5);
        CHECK_EQ(aco_rt_recv(c.fd, buf, sizeof(buf), 0, -1), 5);
        CHECK_EQ(memcmp(buf, "pong!", 5), 0);
        closefd(s);
        closefd(c.fd);
    }
    closefd(l);
    /* refused: nobody listens on that port any more */
    cl_t c = {port, -1, 1, 0};
    client_connect(&c);
    CHECK_EQ(c.rc, -ECONNREFUSED);
    closefd(c.fd);

    /* a full backlog: the connect waits until its deadline */
    l = tcp_listener(0, &port);
    int fds[8];
    int timed_out = 0, n = 0;
    for (; n < 8 && !timed_out; n++) {
        fds[n] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in a = loopback(port);
        d = aco_rt_now() + 20 * MS;
        int r = aco_rt_connect(fds[n], (struct sockaddr*)&a, sizeof(a), d);
        if (r == -ETIMEDOUT) {
            CHECK_GE(aco_rt_now(), d);
            timed_out = 1;
        } else {
            CHECK_EQ(r, 0);
        }
    }
    CHECK(timed_out);
    for (int i = 0; i < n; i++) closefd(fds[i]);
    closefd(l);
}

/* ------------------------------------------------------------------------ */
/* aco_rt_wait, half-close, reset                                           */
/* ------------------------------------------------------------------------ */

static void late_write(void* arg) {
    int fd = *(int*)arg;
    CHECK_EQ(aco_rt_sleep(3 * MS), 0);
    CHECK_EQ(aco_rt_write(fd, "w", 1, -1), 1);
}

static void wait_main(void* arg) {
    (void)arg;
    for (int kind = K_PIPE; kind <= K_TCP; kind++) {
        int fds[2];
        make_pair(kind, fds);
        int64_t d = aco_rt_now() + 2 * MS;
        CHECK_EQ(aco_rt_wait(fds[0], POLLIN, d), -ETIMEDOUT);
        CHECK_GE(aco_rt_now(), d);
        CHECK_EQ(aco_rt_wait(fds[0], POLLIN, 0), -ETIMEDOUT);
        int r = aco_rt_wait(fds[1], POLLOUT, -1);
        CHECK(r > 0 && (r & POLLOUT));
        aco_rt_co_t* c = aco_rt_spawn(NULL, late_write, &fds[1]);
        r = aco_rt_wait(fds[0], POLLIN, -1);
        CHECK(r > 0 && (r & POLLIN));
        CHECK_EQ(aco_rt_join(c, -1), 0);
        r = aco_rt_wait(fds[0], POLLIN, 0);         /* still there */
        CHECK(r > 0 && (r & POLLIN));
        char ch;
        CHECK_EQ(aco_rt_read(fds[0], &ch, 1, -1), 1);
        CHECK_EQ(ch, 'w');
        /* the peer goes: POLLIN (EOF) and a hang-up flag */
        closefd(fds[1]);
        r = aco_rt_wait(fds[0], POLLIN, aco_rt_now() + 1000 * MS);
        CHECK_GT(r, 0);
        CHECK(r & (POLLIN | POLLHUP));
        CHECK_EQ(aco_rt_read(fds[0], &ch, 1, -1), 0);
        closefd(fds[0]);
    }
    /* a closed descriptor number */
    int fds[2];
    make_pair(K_PIPE, fds);
    closefd(fds[0]);
    closefd(fds[1]);
    CHECK_EQ(aco_rt_wait(fds[0], POLLIN, aco_rt_now() + MS), -EBADF);
}

/* ACO_RT_WAIT_AFTER_EAGAIN: on a socket no look first (a passed deadline
 * says -ETIMEDOUT though bytes are there: the proof that it did not
 * look), else as without it; a wait finds bytes that came. */
static void wait_after_eagain_main(void* arg) {
    (void)arg;
    const int F = ACO_RT_WAIT_AFTER_EAGAIN;
    for (int kind = K_PIPE; kind <= K_TCP; kind++) {
        int fds[2];
        make_pair(kind, fds);
        char ch;
        CHECK_EQ(aco_rt_read(fds[0], &ch, 1, 0), -ETIMEDOUT);      /* the EAGAIN */
        CHECK_EQ(aco_rt_wait(fds[0], POLLIN | F, 0), -ETIMEDOUT);
        int64_t d = aco_rt_now() + 2 * MS;
        CHECK_EQ(aco_rt_wait(fds[0], POLLIN | F, d), -ETIMEDOUT);
        CHECK_GE(aco_rt_now(), d);
        aco_rt_co_t* c = aco_rt_spawn(NULL, late_write, &fds[1]);
        int r = aco_rt_wait(fds[0], POLLIN | F, -1);
        CHECK(r > 0 && (r & POLLIN));
        CHECK_EQ(aco_rt_join(c, -1), 0);
        /* the byte is there (the flag's promise broken on purpose): a
         * socket's wait does not look, a pipe's does */
        r = aco_rt_wait(fds[0], POLLIN | F, 0);
        if (kind == K_PIPE) CHECK(r > 0 && (r & POLLIN));
        else CHECK_EQ(r, -ETIMEDOUT);
        CHECK_EQ(aco_rt_read(fds[0], &ch, 1, -1), 1);
        CHECK_EQ(ch, 'w');
        r = aco_rt_wait(fds[1], POLLOUT | F, -1);
        CHECK(r > 0 && (r & POLLOUT));
        closefd(fds[0]);
        closefd(fds[1]);
    }
    /* a regular file (epoll cannot wait on one): ready at once */
    char path[] = "/tmp/test_io_wait.XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    unlink(path);
    int r = aco_rt_wait(fd, POLLIN | POLLOUT | F, 0);
    CHECK(r > 0 && (r & POLLIN) && (r & POLLOUT));
    closefd(fd);
}

static void half_reader(void* arg) {
    int fd = *(int*)arg;
    char buf[64];
    ssize_t r = aco_rt_read(fd, buf, sizeof(buf), -1);
    CHECK_EQ(r, 3);
    CHECK_EQ(memcmp(buf, "abc", 3), 0);
    CHECK_EQ(aco_rt_read(fd, buf, sizeof(buf), -1), 0);     /* blocked, then EOF */
    CHECK_EQ(aco_rt_recv(fd, HR, 10, 0, -1), 0);
    CHECK_EQ(aco_rt_read(fd, HR, 10, 0), 0);
    /* the other way still works */
    CHECK_EQ(aco_rt_write(fd, "back", 4, -1), 4);
}

static void half_close(void* arg) {
    (void)arg;
    for (int kind = K_UNIX; kind <= K_TCP; kind++) {
        int fds[2];
        make_pair(kind, fds);
        aco_rt_co_t* c = aco_rt_spawn(NULL, half_reader, &fds[0]);
        CHECK_EQ(aco_rt_write(fds[1], "abc", 3, -1), 3);
        CHECK_EQ(aco_rt_sleep(MS), 0);
        CHECK_EQ(shutdown(fds[1], SHUT_WR), 0);
        char buf[8];
        CHECK_EQ(aco_rt_read(fds[1], buf, sizeof(buf), -1), 4);
        CHECK_EQ(memcmp(buf, "back", 4), 0);
        CHECK_EQ(aco_rt_join(c, -1), 0);
        closefd(fds[0]);
        closefd(fds[1]);
    }
}

/* EOF (or a reset) that arrived with the last data, before the read that
 * returned that data short: the next read returns it at once */
typedef struct {
    int fd;
    int stack;
    ssize_t first, second;
    int64_t second_ns;
} eof_t;

static void eof_reader(void* arg) {
    eof_t* e = (eof_t*)arg;
    char sbuf[4096];
    char* b = e->stack ? sbuf : (char*)HR;
    e->first = aco_rt_read(e->fd, b, 4096, aco_rt_now() + 2000 * MS);   /* waits */
    int64_t t0 = aco_rt_now();
    e->second = aco_rt_read(e->fd, b, 4096, aco_rt_now() + 2000 * MS);
    e->second_ns = aco_rt_now() - t0;
}

static void eof_after_short_read(void* arg) {
    (void)arg;
    for (int round = 0; round < 8; round++) {
        int stack = round & 1, reset = (round >> 1) & 1, peer_reads = round >> 2;
        /* sockets the runtime made: aco_rt_connect / aco_rt_accept */
        uint16_t port;
        int l = tcp_listener(4, &port);
        cl_t c = {port, -1, 1, 0};
        aco_rt_co_t* cc = aco_rt_spawn(NULL, client_connect, &c);
        int s = aco_rt_accept(l, NULL, NULL, 0, aco_rt_now() + 5000 * MS);
        CHECK_GE(s, 0);
        CHECK_EQ(aco_rt_join(cc, -1), 0);
        CHECK_EQ(c.rc, 0);
        int rfd = peer_reads ? s : c.fd, wfd = peer_reads ? c.fd : s;
        eof_t e = {rfd, stack, 1, 1, 0};
        aco_rt_co_t* r = aco_rt_spawn(NULL, eof_reader, &e);
        CHECK_EQ(aco_rt_yield(), 0);            /* it waits for data */
        CHECK_EQ(e.first, 1);
        /* data and the end, in one go */
        CHECK_EQ(aco_rt_write(wfd, "last words", 10, -1), 10);
        if (reset) {
            struct linger lg = {1, 0};
            CHECK_EQ(setsockopt(wfd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
            closefd(wfd);
        } else {
            CHECK_EQ(shutdown(wfd, SHUT_WR), 0);
        }
        CHECK_EQ(aco_rt_join(r, -1), 0);
        if (e.first == 10) {
            if (e.second != (reset ? -ECONNRESET : 0) && !(reset && e.second == 0))
                TEST_FAIL_AT(__FILE__, __LINE__, "round %d: read after the last data: %zd (%s) "
                             "after %.1f ms, want %s at once", round, e.second,
                             e.second < 0 ? strerror((int)-e.second) : "", e.second_ns / 1e6,
                             reset ? "-ECONNRESET" : "0 (EOF)");
        } else {
            /* a reset may take the data with it */
            CHECK(reset && (e.first == -ECONNRESET || e.first == 0));
        }
        closefd(rfd);
        if (!reset) closefd(wfd);
        closefd(l);
    }
}

static ssize_t reset_rc;
static void reset_reader(void* arg) {
    int fd = *(int*)arg;
    char buf[64];
    CHECK_EQ(aco_rt_read(fd, buf, 5, -1), 5);          /* the request's start */
    reset_rc = aco_rt_read(fd, HR, 4096, -1);           /* blocked: the peer resets */
}

static void reset_main(void* arg) {
    (void)arg;
    for (int round = 0; round < 4; round++) {
        int fds[2];
        make_pair(K_TCP, fds);
        reset_rc = 12345;
        aco_rt_co_t* c = aco_rt_spawn(NULL, reset_reader, &fds[0]);
        CHECK_EQ(aco_rt_write(fds[1], "GET /", 5, -1), 5);
        CHECK_EQ(aco_rt_sleep(MS), 0);
        struct linger lg = {1, 0};
        CHECK_EQ(setsockopt(fds[1], SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
        if (round & 1) CHECK_EQ(aco_rt_write(fds[1], "xx", 2, -1), 2);
        closefd(fds[1]);
        CHECK_EQ(aco_rt_join(c, -1), 0);
        if (!(reset_rc == -ECONNRESET || reset_rc == 0 || reset_rc == 2))
            TEST_FAIL_AT(__FILE__, __LINE__, "read after a reset: %zd", reset_rc);
        /* answering fails, without a signal */
        ssize_t r = aco_rt_send(fds[0], "HTTP", 4, 0, -1);
        if (r == 4) r = aco_rt_send(fds[0], "HTTP", 4, 0, -1);
        if (!(r == -EPIPE || r == -ECONNRESET))
            TEST_FAIL_AT(__FILE__, __LINE__, "send after a reset: %zd", r);
        closefd(fds[0]);
    }
}

/* A reset that cuts a transfer short: the part is returned and the next
 * call says ECONNRESET, as the kernel keeps it (the runtime's retry took it
 * and the next call said 0, a clean end, or EPIPE). */
static int pe_fd;
static void pe_rst(int fd) {
    struct linger lg = {1, 0};
    CHECK_EQ(setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
    closefd(fd);
}
static void pe_sender(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_sleep(20 * MS), 0);
    CHECK_EQ(aco_rt_write(pe_fd, "abc", 3, -1), 3);
    CHECK_EQ(aco_rt_sleep(20 * MS), 0);
    pe_rst(pe_fd);
}
static void pe_reader(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_sleep(50 * MS), 0);
    CHECK_GT(aco_rt_read(pe_fd, HR, 1000, -1), 0);
    pe_rst(pe_fd);
}
/* aco_rt_close's -EBADF is the waiter's result, whatever comes first
 * after it: a waiter whose deadline passes while the closer keeps the
 * thread busy still gets -EBADF (io_uring said -ETIMEDOUT: the close only
 * asked the kernel to cancel, and the deadline was seen first). */
static int cb_fd, cb_res;
static void cb_waiter(void* arg) {
    char* heap = arg;
    cb_res = heap ? (int)aco_rt_read(cb_fd, heap, 8, aco_rt_in_ms(200))
                  : aco_rt_wait(cb_fd, POLLIN, aco_rt_in_ms(200));
}
static void close_then_busy(void* arg) {
    (void)arg;
    char* heap = malloc(8);
    CHECK(heap != NULL);
    for (int k = 0; k < 2; k++) {
        int p[2];
        CHECK_EQ(pipe(p), 0);
        cb_fd = p[0];
        cb_res = 1;
        aco_rt_co_t* w = aco_rt_spawn(NULL, cb_waiter, k ? heap : NULL);
        aco_rt_sleep(50 * MS);
        CHECK_EQ(aco_rt_close(p[0]), 0);
        int64_t until = aco_rt_now() + 400 * MS;    /* busy past its deadline */
        while (aco_rt_now() < until) {}
        CHECK_EQ(aco_rt_join(w, -1), 0);
        CHECK_EQ(cb_res, -EBADF);
        close(p[1]);
    }
    free(heap);
}

/* Many cos waiting on one descriptor, then one aco_rt_close: every one
 * gets -EBADF well before its deadline (io_uring's cancel by the file had
 * the kernel look at every operation in flight for each one it ended:
 * 16,000 waiters took 4 s of the thread, past their 3 s deadline). */
static int cm_fd, cm_badf, cm_other, cm_first_other;
static void cm_waiter(void* arg) {
    (void)arg;
    /* (30 s: a sanitizer's slow spawns and a loaded machine; the 4 s of
     * before show as close_then_busy's -ETIMEDOUT) */
    int r = aco_rt_wait(cm_fd, POLLIN, aco_rt_in_ms(30000));
    if (r == -EBADF) cm_badf++;
    else if (cm_other++ == 0) cm_first_other = r;
}
static void close_many(void* arg) {
    (void)arg;
    int n = SLOW ? 2000 : 16000;
    int p[2];
    CHECK_EQ(pipe(p), 0);
    cm_fd = p[0];
    cm_badf = cm_other = 0;
    aco_rt_co_t** c = malloc((size_t)n * sizeof(*c));
    CHECK(c != NULL);
    for (int i = 0; i < n; i++) CHECK((c[i] = aco_rt_spawn(NULL, cm_waiter, NULL)) != NULL);
    aco_rt_sleep(20 * MS);                          /* all parked */
    CHECK_EQ(aco_rt_close(p[0]), 0);
    for (int i = 0; i < n; i++) CHECK_EQ(aco_rt_join(c[i], -1), 0);
    if (cm_other) TEST_FAIL_AT(__FILE__, __LINE__, "%d of %d waiters: not -EBADF (the first %d)",
                               cm_other, n, cm_first_other);
    CHECK_EQ(cm_badf, n);
    free(c);
    close(p[1]);
}

/* aco_rt_close of a TCP socket with SO_LINGER on (1 s) and bytes the peer
 * does not take: close(2) waits in the kernel for up to that second.  The
 * thread must not: a ticker co of the same thread ticks meanwhile (it did
 * not: the thread waited in close), and the close still waits (the
 * co's call returns after the linger, 0), the number gone at once. */
static volatile int lg_ticking, lg_ticks;

static void lg_ticker(void* arg) {
    (void)arg;
    while (lg_ticking) {
        aco_rt_sleep(10 * MS);
        lg_ticks++;
    }
}

static void linger_close_main(void* arg) {
    (void)arg;
    int fds[2];
    make_pair(K_TCP, fds);
    static char fill[65536];
    while (aco_rt_send(fds[0], fill, sizeof fill, MSG_DONTWAIT, 0) > 0) {}
    struct linger l = {1, 1};
    CHECK_EQ(setsockopt(fds[0], SOL_SOCKET, SO_LINGER, &l, sizeof l), 0);
    lg_ticking = 1;
    lg_ticks = 0;
    aco_rt_co_t* t = aco_rt_spawn(NULL, lg_ticker, NULL);
    aco_rt_sleep(20 * MS);
    int before = lg_ticks;
    int64_t t0 = aco_rt_now();
    CHECK_EQ(aco_rt_close(fds[0]), 0);
    int64_t took = aco_rt_now() - t0;
    CHECK_GE(took, 500 * MS);                   /* the kernel's linger was kept */
#ifndef ACO_USE_VALGRIND     /* (memcheck holds its lock through a close(2): one thread runs) */
    CHECK_GE(lg_ticks - before, 10);            /* and the thread ran meanwhile */
#else
    (void)before;
#endif
    CHECK_EQ(fcntl(fds[0], F_GETFD), -1);       /* (the number went at once) */
    lg_ticking = 0;
    CHECK_EQ(aco_rt_join(t, -1), 0);
    close(fds[1]);
}

static void partial_error_main(void* arg) {
    (void)arg;
    int fds[2];
    make_pair(K_TCP, fds);
    pe_fd = fds[0];
    aco_rt_co_t* c = aco_rt_spawn(NULL, pe_sender, NULL);
    char b[16];
    CHECK_EQ(aco_rt_recv(fds[1], b, 9, MSG_WAITALL, -1), 3);
    CHECK_EQ(aco_rt_recv(fds[1], b, 9, MSG_WAITALL, -1), -ECONNRESET);
    CHECK_EQ(aco_rt_recv(fds[1], b, 9, 0, -1), 0);              /* then the end */
    CHECK_EQ(aco_rt_join(c, -1), 0);
    closefd(fds[1]);
    make_pair(K_TCP, fds);
    pe_fd = fds[0];
    int sz = 8192;
    setsockopt(fds[1], SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
    setsockopt(fds[0], SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
    c = aco_rt_spawn(NULL, pe_reader, NULL);
    ssize_t n = aco_rt_write(fds[1], HW, XSIZE, -1);
    CHECK_GT(n, 0);
    CHECK_LT(n, (ssize_t)XSIZE);
    CHECK_EQ(aco_rt_write(fds[1], HW, 10, -1), -ECONNRESET);
    CHECK_EQ(aco_rt_write(fds[1], HW, 10, -1), -EPIPE);         /* then the kernel's */
    CHECK_EQ(aco_rt_join(c, -1), 0);
    closefd(fds[1]);
}

/* ------------------------------------------------------------------------ */
/* SIGPIPE                                                                  */
/* ------------------------------------------------------------------------ */

static ssize_t sp_rc;
static int sp_sv[2];
static char sp_hbuf[64];        /* not on a stack: io_uring may take it */
/* which: op (0 send, 1 write, 2 writev) + 3 * heap buffer + 6 * pipe */
static void sp_co(void* arg) {
    int which = (int)(intptr_t)arg, op = which % 3, heap = which / 3 % 2;
    char sbuf[64];
    memset(sbuf, 1, sizeof(sbuf));
    const void* b = heap ? (const void*)sp_hbuf : sbuf;
    struct iovec v[2] = {{(void*)b, 32}, {(char*)b + 32, 32}};
    switch (op) {
    case 0:  sp_rc = aco_rt_send(sp_sv[0], b, 64, 0, -1); break;
    case 1:  sp_rc = aco_rt_write(sp_sv[0], b, 64, -1); break;
    default: sp_rc = aco_rt_writev(sp_sv[0], v, 2, -1); break;
    }
}

/* arg: backend << 8 | which << 1 | ignore SIGPIPE */
static void sp_child(void* arg) {
    int v = (int)(intptr_t)arg, which = (v >> 1) & 15;
    signal(SIGPIPE, (v & 1) ? SIG_IGN : SIG_DFL);
    aco_rt_sched_t* s = test_sched_on(v >> 8, NULL);
    if (which >= 6) {
        CHECK_EQ(pipe(sp_sv), 0);       /* [0] read end: swap, write to [0] */
        int t = sp_sv[0]; sp_sv[0] = sp_sv[1]; sp_sv[1] = t;
    } else {
        CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sp_sv), 0);
    }
    CHECK_EQ(close(sp_sv[1]), 0);
    sp_rc = 1;
    test_go(s, sp_co, (void*)(intptr_t)which);
    aco_rt_sched_free(s);
    /* the runtime left no SIGPIPE pending, and the mask as it was */
    sigset_t set;
    CHECK_EQ(sigpending(&set), 0);
    CHECK(!sigismember(&set, SIGPIPE));
    CHECK_EQ(sigprocmask(SIG_BLOCK, NULL, &set), 0);
    CHECK(!sigismember(&set, SIGPIPE));
    _exit(sp_rc == -EPIPE ? 0 : 10);
}

/* A write whose reader is gone is -EPIPE, never SIGPIPE: sockets and
 * pipes, write, writev and send, stack (readiness) and heap (io_uring)
 * buffers, SIGPIPE at its default action or ignored. */
static void sigpipe_test(void) {
    int bs[8];
    int nb = test_backends(bs, 8);
    static const char* const opn[] = {"aco_rt_send", "aco_rt_write", "aco_rt_writev"};
    for (int i = 0; i < nb; i++) {
        for (int which = 0; which < 12; which++) {
            if (which >= 6 && which % 3 == 0) continue;     /* send: sockets only */
            for (int ign = 0; ign < 2; ign++) {
                int st = -1;
                int sig = test_in_child(sp_child, (void*)(intptr_t)(bs[i] << 8 | which << 1 | ign), &st);
                if (sig != 0 || st != 0)
                    TEST_FAIL_AT(__FILE__, __LINE__, "%s: %s (%s buffer) to a %s whose reader is "
                                 "gone (SIGPIPE %s): signal %d, exit %d", test_backend_str(bs[i]),
                                 opn[which % 3], which / 3 % 2 ? "heap" : "stack",
                                 which >= 6 ? "pipe" : "socket", ign ? "ignored" : "default",
                                 sig, st);
            }
        }
    }
}

/* ------------------------------------------------------------------------ */
/* EMFILE at accept                                                         */
/* ------------------------------------------------------------------------ */

static void echo_handler(void* arg) {
    int fd = (int)(intptr_t)arg;
    char buf[2048];
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    for (;;) {
        ssize_t r = aco_rt_read(fd, buf, sizeof(buf), -1);
        if (r <= 0) break;
        CHECK_EQ(aco_rt_write(fd, buf, (size_t)r, -1), r);
    }
    closefd(fd);
}

static void echo_check(int fd, uint32_t k, size_t n) {
    static uint8_t tmp[20000];
    CHECK_LE(n, sizeof(tmp));
    fill_pat(tmp, n, k, 0);
    CHECK_EQ(aco_rt_write(fd, tmp, n, -1), (ssize_t)n);
    size_t got = 0;
    while (got < n) {
        ssize_t r = aco_rt_read(fd, tmp, n - got, aco_rt_now() + 5000 * MS);
        CHECK_GT(r, 0);
        CHECK_PAT(tmp, (size_t)r, k, got);
        got += (size_t)r;
    }
}

static uint16_t local_port(int fd, int peer) {
    struct sockaddr_in a;
    socklen_t len = sizeof(a);
    if (peer) CHECK_EQ(getpeername(fd, (struct sockaddr*)&a, &len), 0);
    else CHECK_EQ(getsockname(fd, (struct sockaddr*)&a, &len), 0);
    return ntohs(a.sin_port);
}

/* accept one connection and serve it: which of the n clients it is */
static int accept_serve(int l, const int* cl, int n) {
    int s = aco_rt_accept(l, NULL, NULL, 0, aco_rt_now() + 5000 * MS);
    CHECK_GE(s, 0);
    uint16_t p = local_port(s, 1);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(NULL, echo_handler, (void*)(intptr_t)s)), 0);
    for (int i = 0; i < n; i++)
        if (cl[i] >= 0 && local_port(cl[i], 0) == p) return i;
    CHECK(0);
    return -1;
}

/* a client whose pending connection the server side dropped (valgrind does
 * that: its own descriptor check closes what accept4 returned beyond the
 * limit it shows) connects again */
static void reconnect_if_dropped(int* fd, uint16_t port) {
    char c;
    ssize_t r = aco_rt_recv(*fd, &c, 1, MSG_PEEK, 0);
    if (r == -ETIMEDOUT) return;        /* alive, waiting to be accepted */
    CHECK(r == 0 || r == -ECONNRESET);
    closefd(*fd);
    cl_t n = {port, -1, 1, 0};
    client_connect(&n);
    CHECK_EQ(n.rc, 0);
    *fd = n.fd;
}

static void emfile_main(void* arg) {
    (void)arg;
    uint16_t port;
    int l = tcp_listener(64, &port);
    /* an existing connection, served */
    cl_t e = {port, -1, 1, 0};
    aco_rt_co_t* ec = aco_rt_spawn(NULL, client_connect, &e);
    int es = aco_rt_accept(l, NULL, NULL, 0, -1);
    CHECK_GE(es, 0);
    CHECK_EQ(aco_rt_join(ec, -1), 0);
    CHECK_EQ(e.rc, 0);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(NULL, echo_handler, (void*)(intptr_t)es)), 0);
    echo_check(e.fd, 1, 1000);
    /* three clients wait in the backlog */
    int cl[3];
    for (int i = 0; i < 3; i++) {
        cl_t c = {port, -1, 1, 0};
        client_connect(&c);
        CHECK_EQ(c.rc, 0);
        cl[i] = c.fd;
    }
    /* no descriptor left */
    struct rlimit old, rl;
    CHECK_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
    int top = cl[2] > e.fd ? cl[2] : e.fd;
    rl = old;
    rl.rlim_cur = (rlim_t)top + 8;
    CHECK_EQ(setrlimit(RLIMIT_NOFILE, &rl), 0);
    static int fill[4096];
    int nfill = 0;
    for (;;) {
        int f = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (f < 0) {
            CHECK_EQ(errno, EMFILE);
            break;
        }
        CHECK_LT(nfill, 4096);
        fill[nfill++] = f;
    }
    CHECK_EQ(aco_rt_accept(l, NULL, NULL, 0, -1), -EMFILE);
    CHECK_EQ(aco_rt_accept(l, NULL, NULL, 0, aco_rt_now() + 100 * MS), -EMFILE);
    /* the existing connection is still served */
    echo_check(e.fd, 2, 5000);
    /* room for two: the server accepts again, and serves them */
    CHECK_GE(nfill, 2);
    close(fill[--nfill]);
    close(fill[--nfill]);
    for (int i = 0; i < 3; i++) reconnect_if_dropped(&cl[i], port);
    int served[3] = {0, 0, 0};
    for (int i = 0; i < 2; i++) {
        int k = accept_serve(l, cl, 3);
        CHECK_EQ(served[k], 0);
        served[k] = 1;
        echo_check(cl[k], 3 + (uint32_t)i, 3000);
    }
    echo_check(e.fd, 5, 3000);
    while (nfill) close(fill[--nfill]);
    CHECK_EQ(setrlimit(RLIMIT_NOFILE, &old), 0);
    int k = accept_serve(l, cl, 3);
    CHECK_EQ(served[k], 0);
    echo_check(cl[k], 6, 3000);
    for (int i = 0; i < 3; i++) closefd(cl[i]);
    closefd(e.fd);
    closefd(l);
}

/* ------------------------------------------------------------------------ */
/* 1000 concurrent connections                                              */
/* ------------------------------------------------------------------------ */

#define NCONN_MAX 1000
static int nconn = NCONN_MAX;
#define NCONN nconn
static int conn_listener;
static uint16_t conn_port;
static int conn_ok;
static aco_rt_wg_t conn_wg;

static void conn_server(void* arg) {
    (void)arg;
    for (int i = 0; i < NCONN; i++) {
        struct sockaddr_in a;
        socklen_t len = sizeof(a);
        int s = aco_rt_accept(conn_listener, (struct sockaddr*)&a, &len, SOCK_CLOEXEC, -1);
        CHECK_GE(s, 0);
        CHECK(aco_rt_spawn(NULL, echo_handler, (void*)(intptr_t)s) != NULL);
    }
}

static void conn_client(void* arg) {
    uint32_t id = (uint32_t)(uintptr_t)arg;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK_GE(fd, 0);
    struct sockaddr_in a = loopback(conn_port);
    CHECK_EQ(aco_rt_connect(fd, (struct sockaddr*)&a, sizeof(a), -1), 0);
    size_t n = 100 + (id * 7919u) % 12000;
    uint8_t* out = malloc(n);
    CHECK(out != NULL);
    fill_pat(out, n, id, 0);
    /* half from the heap, the rest from the stack */
    CHECK_EQ(aco_rt_write(fd, out, n / 2, -1), (ssize_t)(n / 2));
    uint8_t sbuf[1024];
    size_t off = n / 2;
    while (off < n) {
        size_t m = n - off < sizeof(sbuf) ? n - off : sizeof(sbuf);
        fill_pat(sbuf, m, id, off);
        CHECK_EQ(aco_rt_send(fd, sbuf, m, 0, -1), (ssize_t)m);
        off += m;
        CHECK_EQ(aco_rt_yield(), 0);
    }
    CHECK_EQ(shutdown(fd, SHUT_WR), 0);
    size_t got = 0;
    for (;;) {
        int64_t d = aco_rt_now() + 10000 * MS;
        ssize_t r = (id & 1) ? aco_rt_read(fd, sbuf, sizeof(sbuf), d)
                             : aco_rt_recv(fd, out, n, 0, d);
        if (r < 0)
            TEST_FAIL_AT(__FILE__, __LINE__, "client %u: read after %zu of %zu: %zd (%s)", id,
                         got, n, r, strerror((int)-r));
        if (r == 0) break;
        CHECK_PAT((id & 1) ? sbuf : out, (size_t)r, id, got);
        got += (size_t)r;
    }
    CHECK_EQ(got, n);
    free(out);
    closefd(fd);
    conn_ok++;
    CHECK_EQ(aco_rt_wg_done(&conn_wg), 0);
}

static void many_conns(void* arg) {
    (void)arg;
    conn_listener = tcp_listener(NCONN + 24, &conn_port);
    conn_ok = 0;
    aco_rt_wg_init(&conn_wg);
    CHECK_EQ(aco_rt_wg_add(&conn_wg, NCONN), 0);
    aco_rt_co_t* srv = aco_rt_spawn(NULL, conn_server, NULL);
    for (uintptr_t i = 0; i < (uintptr_t)NCONN; i++)
        CHECK_EQ(aco_rt_detach(aco_rt_spawn(NULL, conn_client, (void*)i)), 0);
    CHECK_EQ(aco_rt_join(srv, -1), 0);
    CHECK_EQ(aco_rt_wg_wait(&conn_wg, -1), 0);
    CHECK_EQ(conn_ok, NCONN);
    closefd(conn_listener);
}

/* ------------------------------------------------------------------------ */
/* The share-stack hazard: one share stack                                  */
/* ------------------------------------------------------------------------ */

#define HZ_PAIRS 4
#define HZ_BYTES (256 * 1024)
static int hz_fd[HZ_PAIRS][2];
static uint64_t hz_got[HZ_PAIRS];

static uint64_t scribble(int depth, uint64_t p) {
    volatile uint64_t frame[64];
    for (int i = 0; i < 64; i++) frame[i] = p + (uint64_t)i;
    uint64_t r = depth ? scribble(depth - 1, p * 5 + 3) : 0;
    for (int i = 0; i < 64; i++) CHECK_EQ(frame[i], p + (uint64_t)i);
    return r + frame[depth % 64];
}

static void hz_writer(void* arg) {
    int i = (int)(intptr_t)arg;
    uint64_t rng = 31337 + (uint64_t)i;
    uint8_t buf[1500];
    uint64_t off = 0;
    while (off < HZ_BYTES) {
        size_t n = (size_t)(1 + test_rand(&rng) % sizeof(buf));
        if (n > HZ_BYTES - off) n = (size_t)(HZ_BYTES - off);
        fill_pat(buf, n, 100 + (uint32_t)i, off);
        CHECK_EQ(aco_rt_write(hz_fd[i][1], buf, n, -1), (ssize_t)n);
        off += n;
        scribble((int)(test_rand(&rng) % 20), rng);
        if (test_rand(&rng) % 4 == 0) CHECK_EQ(aco_rt_sleep((int64_t)(test_rand(&rng) % 50000)), 0);
        else CHECK_EQ(aco_rt_yield(), 0);
    }
    CHECK_EQ(shutdown(hz_fd[i][1], SHUT_WR), 0);
}

/* the read happens deep in the stack, with frames of others over it while
 * it waits */
static ssize_t hz_read_deep(int depth, int i, uint64_t* rng, uint64_t off) {
    volatile uint64_t guard[8];
    for (int j = 0; j < 8; j++) guard[j] = off + (uint64_t)j * 3;
    ssize_t r;
    if (depth) {
        r = hz_read_deep(depth - 1, i, rng, off);
    } else {
        char buf[4096];
        memset(buf, 0x5a, sizeof(buf));
        int mode = (int)(test_rand(rng) % 3);
        if (mode == 0) {
            r = aco_rt_read(hz_fd[i][0], buf, sizeof(buf), -1);
            if (r > 0) CHECK_PAT(buf, (size_t)r, 100 + (uint32_t)i, off);
        } else if (mode == 1) {
            r = aco_rt_recv(hz_fd[i][0], buf, sizeof(buf), 0, -1);
            if (r > 0) CHECK_PAT(buf, (size_t)r, 100 + (uint32_t)i, off);
        } else {
            struct iovec iov[3] = {{buf, 1}, {buf + 100, 1000}, {buf + 2000, 2000}};
            r = aco_rt_readv(hz_fd[i][0], iov, 3, -1);
            size_t left = r > 0 ? (size_t)r : 0;
            uint64_t o = off;
            for (int k = 0; k < 3 && left; k++) {
                size_t c = left < iov[k].iov_len ? left : iov[k].iov_len;
                CHECK_PAT(iov[k].iov_base, c, 100 + (uint32_t)i, o);
                o += c;
                left -= c;
            }
        }
    }
    for (int j = 0; j < 8; j++) CHECK_EQ(guard[j], off + (uint64_t)j * 3);
    return r;
}

static void hz_reader(void* arg) {
    int i = (int)(intptr_t)arg;
    uint64_t rng = 4711 + (uint64_t)i;
    uint64_t off = 0;
    for (;;) {
        scribble((int)(test_rand(&rng) % 20), rng);
        ssize_t r = hz_read_deep((int)(test_rand(&rng) % 40), i, &rng, off);
        CHECK_GE(r, 0);
        if (r == 0) break;
        off += (uint64_t)r;
    }
    hz_got[i] = off;
}

static int hz_acc_fd;
static uint16_t hz_acc_port, hz_acc_client_port;
static void hz_acceptor(void* arg) {
    int l = (int)(intptr_t)arg;
    scribble(10, 99);
    struct sockaddr_in a;               /* on the share stack */
    socklen_t len = sizeof(a);
    memset(&a, 0, sizeof(a));
    hz_acc_fd = aco_rt_accept(l, (struct sockaddr*)&a, &len, 0, -1);
    CHECK_GE(hz_acc_fd, 0);
    CHECK_EQ(len, sizeof(a));
    CHECK_EQ(a.sin_family, AF_INET);
    hz_acc_port = ntohs(a.sin_port);
}
static void hz_connector(void* arg) {
    uint16_t port = (uint16_t)(uintptr_t)arg;
    scribble(30, 7);
    CHECK_EQ(aco_rt_sleep(2 * MS), 0);      /* the acceptor waits meanwhile */
    cl_t c = {port, -1, 1, 0};
    client_connect(&c);
    CHECK_EQ(c.rc, 0);
    hz_acc_client_port = c.local_port;
    scribble(30, 8);
    closefd(c.fd);
}

static uint64_t standalone_got;
static void standalone_reader(void* arg) {
    int fd = (int)(intptr_t)arg;
    char buf[4096];                     /* its own stack: not shared */
    uint64_t off = 0;
    for (;;) {
        ssize_t r = aco_rt_read(fd, buf, sizeof(buf), -1);
        CHECK_GE(r, 0);
        if (r == 0) break;
        CHECK_PAT(buf, (size_t)r, 200, off);
        off += (uint64_t)r;
    }
    standalone_got = off;
}
static void standalone_writer(void* arg) {
    int fd = (int)(intptr_t)arg;
    uint64_t rng = 5;
    char buf[3000];
    uint64_t off = 0;
    while (off < HZ_BYTES) {
        size_t n = (size_t)(1 + test_rand(&rng) % sizeof(buf));
        if (n > HZ_BYTES - off) n = (size_t)(HZ_BYTES - off);
        fill_pat(buf, n, 200, off);
        CHECK_EQ(aco_rt_write(fd, buf, n, -1), (ssize_t)n);
        off += n;
        scribble((int)(test_rand(&rng) % 30), off);
        CHECK_EQ(aco_rt_yield(), 0);
    }
    CHECK_EQ(shutdown(fd, SHUT_WR), 0);
}

static void hazard_main(void* arg) {
    (void)arg;
    for (int i = 0; i < HZ_PAIRS; i++) {
        make_pair(i % 2 ? K_TCP : K_UNIX, hz_fd[i]);
        hz_got[i] = 0;
        /* small buffers (AF_UNIX: TCP would stall on its window): the
         * writers, from their stacks, wait too */
        int sz = 4096;
        if (i % 2 == 0) {
            setsockopt(hz_fd[i][1], SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
            setsockopt(hz_fd[i][0], SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
        }
    }
    aco_rt_co_t* c[2 * HZ_PAIRS];
    for (int i = 0; i < HZ_PAIRS; i++) {
        c[2 * i] = aco_rt_spawn(NULL, hz_reader, (void*)(intptr_t)i);
        c[2 * i + 1] = aco_rt_spawn(NULL, hz_writer, (void*)(intptr_t)i);
    }
    /* accept with its address on the share stack */
    uint16_t port;
    int l = tcp_listener(4, &port);
    aco_rt_co_t* a = aco_rt_spawn(NULL, hz_acceptor, (void*)(intptr_t)l);
    aco_rt_co_t* b = aco_rt_spawn(NULL, hz_connector, (void*)(uintptr_t)port);
    /* a standalone co reading into its own stack */
    int sfd[2];
    make_pair(K_UNIX, sfd);
    aco_rt_spawn_opts_t so = {.stack_size = 64 * 1024, .standalone = 1, .name = "standalone reader"};
    aco_rt_co_t* sr = aco_rt_spawn2(NULL, standalone_reader, (void*)(intptr_t)sfd[0], &so);
    aco_rt_co_t* sw = aco_rt_spawn(NULL, standalone_writer, (void*)(intptr_t)sfd[1]);
    for (int i = 0; i < 2 * HZ_PAIRS; i++) CHECK_EQ(aco_rt_join(c[i], -1), 0);
    CHECK_EQ(aco_rt_join(a, -1), 0);
    CHECK_EQ(aco_rt_join(b, -1), 0);
    CHECK_EQ(aco_rt_join(sr, -1), 0);
    CHECK_EQ(aco_rt_join(sw, -1), 0);
    for (int i = 0; i < HZ_PAIRS; i++) {
        CHECK_EQ(hz_got[i], HZ_BYTES);
        closefd(hz_fd[i][0]);
        closefd(hz_fd[i][1]);
    }
    CHECK_EQ(hz_acc_port, hz_acc_client_port);
    CHECK_EQ(standalone_got, HZ_BYTES);
    closefd(hz_acc_fd);
    closefd(l);
    closefd(sfd[0]);
    closefd(sfd[1]);
}

/* ------------------------------------------------------------------------ */
/* The descriptor table grows while cos wait on low descriptors             */
/* ------------------------------------------------------------------------ */

#define GROW_WAITERS 8
static int grow_fd[GROW_WAITERS][2];
static ssize_t grow_rc[GROW_WAITERS];

static void grow_waiter(void* arg) {
    int i = (int)(intptr_t)arg;
    char buf[32];
    int64_t d = (i % 4 == 3) ? aco_rt_now() + 30 * MS : -1;
    if (i & 1) grow_rc[i] = aco_rt_read(grow_fd[i][0], buf, sizeof(buf), d);
    else grow_rc[i] = aco_rt_read(grow_fd[i][0], HR + 64 * i, 32, d);
    if (grow_rc[i] == 1) CHECK_EQ(((i & 1) ? buf : (char*)HR + 64 * i)[0], 'a' + i);
}

static void fd_table_growth(void* arg) {
    (void)arg;
    for (int i = 0; i < GROW_WAITERS; i++) {
        make_pair(i & 1 ? K_UNIX : K_PIPE, grow_fd[i]);
        grow_rc[i] = 12345;
    }
    aco_rt_co_t* c[GROW_WAITERS];
    for (int i = 0; i < GROW_WAITERS; i++)
        c[i] = aco_rt_spawn(NULL, grow_waiter, (void*)(intptr_t)i);
    CHECK_EQ(aco_rt_yield(), 0);        /* all wait */
    /* I/O on ever higher descriptor numbers: the table grows */
    int p[2];
    make_pair(K_UNIX, p);
    for (int hi = 70; hi < 17000; hi = hi * 2 + 1) {
        int h = dup2(p[0], hi);
        CHECK_EQ(h, hi);
        char ch;
        CHECK_EQ(aco_rt_read(h, &ch, 1, aco_rt_now() + MS / 10), -ETIMEDOUT);
        CHECK_EQ(aco_rt_read(h, &ch, 1, 0), -ETIMEDOUT);
        closefd(h);
    }
    closefd(p[0]);
    closefd(p[1]);
    /* the waiters are woken right: data, close, deadline */
    for (int i = 0; i < GROW_WAITERS; i++) {
        if (i % 4 == 1) {
            closefd(grow_fd[i][0]);
            grow_fd[i][0] = -1;
        } else if (i % 4 != 3) {
            char ch = (char)('a' + i);
            CHECK_EQ(write(grow_fd[i][1], &ch, 1), 1);
        }
    }
    for (int i = 0; i < GROW_WAITERS; i++) {
        CHECK_EQ(aco_rt_join(c[i], -1), 0);
        if (i % 4 == 1) CHECK_EQ(grow_rc[i], -EBADF);
        else if (i % 4 == 3) CHECK_EQ(grow_rc[i], -ETIMEDOUT);
        else CHECK_EQ(grow_rc[i], 1);
        if (grow_fd[i][0] >= 0) closefd(grow_fd[i][0]);
        closefd(grow_fd[i][1]);
    }
}

/* descriptors the program made non-blocking itself: the calls still wait */
static void nb_writer(void* arg) {
    int fd = (int)(intptr_t)arg;    /* by value: nothing of its spawner's stack */
    CHECK_EQ(aco_rt_sleep(2 * MS), 0);
    CHECK_EQ(write(fd, "nonblock", 8), 8);
}

static void user_nonblock(void* arg) {
    (void)arg;
    for (int kind = K_PIPE; kind <= K_TCP; kind++) {
        for (int stack = 0; stack < 2; stack++) {
            int fds[2];
            make_pair(kind, fds);
            CHECK_EQ(fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK), 0);
            aco_rt_co_t* c = aco_rt_spawn(NULL, nb_writer, (void*)(intptr_t)fds[1]);
            char sbuf[16];
            char* b = stack ? sbuf : (char*)HR;
            ssize_t r = kind == K_PIPE ? aco_rt_read(fds[0], b, 16, aco_rt_now() + 5000 * MS)
                                       : aco_rt_recv(fds[0], b, 16, 0, aco_rt_now() + 5000 * MS);
            CHECK_EQ(r, 8);
            CHECK_EQ(memcmp(b, "nonblock", 8), 0);
            CHECK_EQ(aco_rt_join(c, -1), 0);
            closefd(fds[0]);
            closefd(fds[1]);
        }
    }
    /* a non-blocking listener */
    uint16_t port;
    int l = tcp_listener(4, &port);
    CHECK_EQ(fcntl(l, F_SETFL, fcntl(l, F_GETFL) | O_NONBLOCK), 0);
    cl_t c = {port, -1, 1, 0};
    aco_rt_co_t* cc = aco_rt_spawn(NULL, client_connect, &c);
    CHECK_EQ(aco_rt_accept(l, NULL, NULL, 0, 0), -ETIMEDOUT);     /* not yet */
    int s2 = aco_rt_accept(l, NULL, NULL, SOCK_NONBLOCK, aco_rt_now() + 5000 * MS);
    CHECK_GE(s2, 0);
    CHECK_EQ(aco_rt_join(cc, -1), 0);
    CHECK_EQ(c.rc, 0);
    /* the accepted socket asked for O_NONBLOCK: reads still wait */
    aco_rt_co_t* w = aco_rt_spawn(NULL, nb_writer, (void*)(intptr_t)c.fd);
    CHECK_EQ(aco_rt_read(s2, HR, 16, aco_rt_now() + 5000 * MS), 8);
    CHECK_EQ(aco_rt_join(w, -1), 0);
    closefd(s2);
    closefd(c.fd);
    closefd(l);
}

/* a regular file: always ready (epoll cannot wait on it), uses and moves
 * the file position like read(2) and write(2) */
static void regular_file(void* arg) {
    (void)arg;
    char path[] = "/tmp/aco_rt_test_io_XXXXXX";
    int fd = mkstemp(path);
    CHECK_GE(fd, 0);
    CHECK_EQ(unlink(path), 0);
    uint8_t sbuf[3000];
    uint64_t off = 0;
    uint64_t rng = 3;
    fill_pat(HW, 300000, 12, 0);
    while (off < 300000) {
        size_t n = (size_t)(1 + test_rand(&rng) % sizeof(sbuf));
        if (n > 300000 - off) n = (size_t)(300000 - off);
        ssize_t r;
        if (test_rand(&rng) & 1) {
            fill_pat(sbuf, n, 12, off);
            r = aco_rt_write(fd, sbuf, n, -1);
        } else {
            r = aco_rt_write(fd, HW + off, n, aco_rt_now() + 5000 * MS);
        }
        CHECK_EQ(r, (ssize_t)n);
        off += n;
    }
    int ev = aco_rt_wait(fd, POLLIN | POLLOUT, -1);
    CHECK(ev > 0 && (ev & POLLIN));
    CHECK_EQ(lseek(fd, 0, SEEK_SET), 0);
    off = 0;
    for (;;) {
        size_t n = (size_t)(1 + test_rand(&rng) % sizeof(sbuf));
        ssize_t r;
        uint8_t* b = (test_rand(&rng) & 1) ? sbuf : HR;
        r = aco_rt_read(fd, b, n, -1);
        CHECK_GE(r, 0);
        if (r == 0) break;
        CHECK_PAT(b, (size_t)r, 12, off);
        off += (uint64_t)r;
    }
    CHECK_EQ(off, 300000);
    closefd(fd);
}

/* ------------------------------------------------------------------------ */
/* A cancelled co: every later blocking call fails at once                  */
/* ------------------------------------------------------------------------ */

static int cio_fd[2];
static int cio_stage;
static void cancelled_io(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_sleep(10000 * MS), -ECANCELED);
    cio_stage = 1;
    char sbuf[8];
    /* data is there, but "this call and every later blocking call of the
     * co fail so, at once" (-ECANCELED) */
    CHECK_EQ(aco_rt_read(cio_fd[0], sbuf, 1, -1), -ECANCELED);
    cio_stage = 2;
    CHECK_EQ(aco_rt_read(cio_fd[0], HR, 1, -1), -ECANCELED);
    cio_stage = 3;
    CHECK_EQ(aco_rt_write(cio_fd[1], sbuf, 1, -1), -ECANCELED);
    cio_stage = 4;
}

static void cancelled_io_main(void* arg) {
    (void)arg;
    make_pair(K_UNIX, cio_fd);
    CHECK_EQ(write(cio_fd[1], "abcd", 4), 4);
    cio_stage = 0;
    aco_rt_co_t* c = aco_rt_spawn(NULL, cancelled_io, NULL);
    CHECK_EQ(aco_rt_yield(), 0);
    CHECK_EQ(aco_rt_cancel(c), 0);
    CHECK_EQ(aco_rt_join(c, -1), 0);
    CHECK_EQ(cio_stage, 4);
    closefd(cio_fd[0]);
    closefd(cio_fd[1]);
}

/* ------------------------------------------------------------------------ */
/* Deadlines in the past                                                    */
/* ------------------------------------------------------------------------ */

/* a TCP pair made by the runtime's own calls (aco_rt_connect and
 * aco_rt_accept): fds[0] the accepted end, fds[1] the client */
static void rt_tcp_pair(int fds[2]) {
    uint16_t port;
    int l = tcp_listener(4, &port);
    cl_t c = {port, -1, 1, 0};
    aco_rt_co_t* cc = aco_rt_spawn(NULL, client_connect, &c);
    int s = aco_rt_accept(l, NULL, NULL, 0, aco_rt_now() + 5000 * MS);
    CHECK_GE(s, 0);
    CHECK_EQ(aco_rt_join(cc, -1), 0);
    CHECK_EQ(c.rc, 0);
    closefd(l);
    fds[0] = s;
    fds[1] = c.fd;
}

static void past_deadline(void* arg) {
    (void)arg;
    /* after a short read, new data: a read with a past deadline gets it (as
     * with deadline 0) */
    for (int round = 0; round < 2; round++) {
        int fds[2];
        rt_tcp_pair(fds);
        char sbuf[100];
        char* b = round ? sbuf : (char*)HR;
        CHECK_EQ(aco_rt_write(fds[1], "0123456789", 10, -1), 10);
        CHECK_EQ(aco_rt_sleep(MS), 0);
        CHECK_EQ(aco_rt_read(fds[0], b, 100, -1), 10);         /* short */
        CHECK_EQ(aco_rt_write(fds[1], "abcdefghij", 10, -1), 10);
        CHECK_EQ(aco_rt_read(fds[0], b, 100, aco_rt_now() - 1), 10);
        CHECK_EQ(memcmp(b, "abcdefghij", 10), 0);
        CHECK_EQ(aco_rt_write(fds[1], "ABCDEFGHIJ", 10, -1), 10);
        CHECK_EQ(aco_rt_read(fds[0], b, 100, 0), 10);
        CHECK_EQ(memcmp(b, "ABCDEFGHIJ", 10), 0);
        closefd(fds[0]);
        closefd(fds[1]);
    }
    for (int kind = K_PIPE; kind <= K_TCP; kind++) {
        int fds[2];
        make_pair(kind, fds);
        char sbuf[16];
        /* "a time in the past (e.g. 0) does not wait at all": the call is
         * still made; with data there it returns the data */
        CHECK_EQ(aco_rt_write(fds[1], "0123456789", 10, -1), 10);
        CHECK_EQ(aco_rt_read(fds[0], HR, 2, 0), 2);                        /* heap, 0 */
        CHECK_EQ(aco_rt_read(fds[0], sbuf, 2, aco_rt_now() - 1), 2);       /* stack */
        CHECK_EQ(aco_rt_read(fds[0], HR, 2, aco_rt_now() - 1), 2);         /* heap */
        CHECK_EQ(memcmp(HR, "45", 2), 0);
        CHECK_EQ(aco_rt_write(fds[1], HW, 2, aco_rt_now() - 1), 2);        /* room */
        CHECK_EQ(aco_rt_read(fds[0], HR, 100, 1), 6);
        closefd(fds[0]);
        closefd(fds[1]);
    }
}

/* ------------------------------------------------------------------------ */

/* test_go, the co on a stack of its own.  The tests below hand their
 * locals (a channel of results, a client record, a descriptor) to the cos
 * they spawn and wait for them: that is sound only on a stack no other co
 * can take while they wait (aco_rt.h's share-stack rule; checked mode,
 * aco.h, faults on it otherwise). */
/* accept from a co on a share stack, the address and its length its
 * locals (a server's usual code): on io_uring the kernel writes a heap
 * copy, so the listener is never made O_NONBLOCK there (other processes
 * sharing it would see it); the address cut to the room given, the
 * length its own, as accept4(2). */
static void accept_on_share(void* arg) {
    (void)arg;
    uint16_t port;
    int l = tcp_listener(16, &port);
    for (int how = 0; how < 3; how++) {         /* whole, cut to 4 bytes, no address */
        static cl_t c;                  /* (the client co writes it: not on our stack) */
        c = (cl_t){port, -1, 1, 0};
        aco_rt_co_t* cc = aco_rt_spawn(NULL, client_connect, &c);
        struct sockaddr_in peer;
        memset(&peer, 0xa5, sizeof(peer));
        socklen_t len = how == 1 ? 4 : sizeof(peer);
        int s = aco_rt_accept(l, how == 2 ? NULL : (struct sockaddr*)&peer, &len, 0, -1);
        CHECK_GE(s, 0);
        CHECK_EQ(aco_rt_join(cc, -1), 0);
        CHECK_EQ(c.rc, 0);
        if (how < 2) {
            CHECK_EQ(len, sizeof(peer));
            CHECK_EQ(peer.sin_family, AF_INET);
            CHECK_EQ(ntohs(peer.sin_port), c.local_port);
            if (how == 1) CHECK_EQ(peer.sin_addr.s_addr, 0xa5a5a5a5u);    /* not written */
            else CHECK_EQ(peer.sin_addr.s_addr, htonl(INADDR_LOOPBACK));
        }
        if (strncmp(test_backend_label, "uring", 5) == 0)
            CHECK_EQ(fcntl(l, F_GETFL) & O_NONBLOCK, 0);
        closefd(s);
        closefd(c.fd);
    }
    closefd(l);
}

static void test_go_solo(aco_rt_sched_t* s, aco_rt_fn_t fn, void* arg) {
    aco_rt_spawn_opts_t o;
    memset(&o, 0, sizeof(o));
    o.standalone = 1;
    aco_rt_co_t* co = aco_rt_spawn2(s, fn, arg, &o);
    CHECK(co != NULL);
    CHECK_EQ(aco_rt_detach(co), 0);
    test_run(s);
}

static void body(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    test_go_solo(s, transfers, NULL);
    test_go_solo(s, read_deadlines, NULL);
    test_go_solo(s, write_deadlines, NULL);
    test_go_solo(s, cancel_and_close, NULL);
    test_go_solo(s, accept_connect, NULL);
    test_go(s, accept_on_share, NULL);
    test_go_solo(s, wait_main, NULL);
    test_go_solo(s, wait_after_eagain_main, NULL);
    test_go_solo(s, half_close, NULL);
    test_go_solo(s, eof_after_short_read, NULL);
    test_go_solo(s, reset_main, NULL);
    test_go_solo(s, partial_error_main, NULL);
    test_go_solo(s, linger_close_main, NULL);
    test_go_solo(s, close_then_busy, NULL);
    test_go_solo(s, close_many, NULL);
    test_go_solo(s, emfile_main, NULL);
    test_go(s, many_conns, NULL);
    test_go(s, fd_table_growth, NULL);
    test_go(s, regular_file, NULL);
    test_go_solo(s, user_nonblock, NULL);
    aco_rt_stats_t st;
    aco_rt_stats(s, &st);
    CHECK_EQ(st.io_inflight, 0);
    CHECK_EQ(st.cos_alive, 0);
}

/* io_uring with a tiny ring: the submission queue fills up between polls
 * and completions overflow the completion queue */
static void body_small_ring(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    nconn = 300;
    test_go(s, many_conns, NULL);
    nconn = NCONN_MAX;
    test_go_solo(s, cancel_and_close, NULL);
}

static void body_hazard(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    test_go(s, hazard_main, NULL);
}

static void body_last(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    test_go(s, past_deadline, NULL);
    test_go_solo(s, cancelled_io_main, NULL);
}

int main(void) {
    HW = malloc(XSIZE);
    HR = malloc(HR_SIZE);
    CHECK(HW && HR);
    test_raise_nofile(4096);
    test_on_backends(NULL, body, NULL);
    aco_rt_opts_t one = {0};
    one.share_stacks = 1;
    test_on_backends(&one, body_hazard, NULL);
    aco_rt_opts_t tiny = {0};
    tiny.uring_entries = 2;
    test_on_backends(&tiny, body_small_ring, NULL);
    sigpipe_test();
    test_on_backends(NULL, body_last, NULL);
    free(HW);
    free(HR);
    return 0;
}
