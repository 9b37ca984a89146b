/* bufio_bb.h - what the black-box tests of aco_rt.h's "Buffered I/O" on
 * sockets, socketpairs and pipes share (test_bufio_bb_sock, _ends,
 * _lines): the kinds of connection, a TCP pair over loopback made with
 * plain system calls (blocking, as a library would hand one over), a
 * reset, filling a descriptor up, a byte pattern. */
#ifndef BUFIO_BB_H
#define BUFIO_BB_H

#include "io_bb.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/uio.h>

enum { K_UNIX, K_TCP, K_PIPE, NKIND };
static const char* const kind_name[NKIND] __attribute__((unused)) = {"unix", "tcp", "pipe"};

/* A TCP connection over loopback: c[0] the client, c[1] the accepted
 * end, both blocking (plain connect(2): loopback connects at once). */
static __attribute__((unused)) void tcp_pair(int c[2]) {
    struct sockaddr_in a;
    int l = loopback_listener(&a, 4);
    c[0] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK_GE(c[0], 0);
    CHECK_EQ(connect(c[0], (struct sockaddr*)&a, sizeof(a)), 0);
    c[1] = accept4(l, NULL, NULL, SOCK_CLOEXEC);
    CHECK_GE(c[1], 0);
    int one = 1;
    CHECK_EQ(setsockopt(c[0], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)), 0);
    CHECK_EQ(setsockopt(c[1], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)), 0);
    CHECK_EQ(close(l), 0);
}

/* A connection of kind k: c[0] is the bufio's end, c[1] the peer's.  A
 * pipe goes one way: we_write says which (c[0] its write end then). */
static __attribute__((unused)) void conn(int k, int we_write, int c[2]) {
    if (k == K_UNIX) {
        CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, c), 0);
    } else if (k == K_TCP) {
        tcp_pair(c);
    } else {
        int p[2];
        CHECK_EQ(pipe2(p, O_CLOEXEC), 0);
        c[0] = we_write ? p[1] : p[0];
        c[1] = we_write ? p[0] : p[1];
    }
}

static __attribute__((unused)) void close2(int c[2]) {
    if (c[0] >= 0) CHECK_EQ(close(c[0]), 0);
    if (c[1] >= 0) CHECK_EQ(close(c[1]), 0);
    c[0] = c[1] = -1;
}

/* Close a TCP socket with a reset (SO_LINGER on, time 0). */
static __attribute__((unused)) void rst_close(int fd) {
    struct linger lg = {1, 0};
    CHECK_EQ(setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
    CHECK_EQ(close(fd), 0);
}

/* Small kernel buffers between w (writes) and r (reads): a Unix socket's
 * 4 KiB (the kernel doubles it), a TCP socket's 64 KiB (smaller windows
 * crawl over loopback: delayed acknowledgements), a pipe's one page. */
static __attribute__((unused)) void small_bufs(int w, int r) {
    int sz = 4096, dom = 0;
    socklen_t dl = sizeof(dom);
    if (getsockopt(w, SOL_SOCKET, SO_DOMAIN, &dom, &dl) == 0 && dom == AF_INET) sz = 65536;
    if (setsockopt(w, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz)) == 0) {
        CHECK_EQ(setsockopt(r, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz)), 0);
    } else {
        CHECK_EQ(errno, ENOTSOCK);
        CHECK_EQ(fcntl(w, F_SETPIPE_SZ, 4096), 4096);
    }
}

/* Write pattern bytes pat(base + i) to w, by plain non-blocking writes,
 * until it takes no more: their count (w's O_NONBLOCK as it was after). */
static __attribute__((unused)) size_t fill_up_from(int w, unsigned char (*pat)(size_t), size_t base) {
    static unsigned char chunk[4096];
    int fl = fcntl(w, F_GETFL);
    CHECK_GE(fl, 0);
    CHECK_EQ(fcntl(w, F_SETFL, fl | O_NONBLOCK), 0);
    size_t n = 0;
    for (;;) {
        for (size_t i = 0; i < sizeof(chunk); i++) chunk[i] = pat ? pat(base + n + i) : 'f';
        ssize_t r = write(w, chunk, sizeof(chunk));
        if (r < 0) {
            CHECK_EQ(errno, EAGAIN);
            break;
        }
        n += (size_t)r;
    }
    CHECK_EQ(fcntl(w, F_SETFL, fl), 0);
    return n;
}
static __attribute__((unused)) size_t fill_up(int w, unsigned char (*pat)(size_t)) {
    return fill_up_from(w, pat, 0);
}

/* The stream's bytes: byte i of stream `seed`. */
static inline unsigned char pat_byte(size_t i, unsigned seed) {
    return (unsigned char)((i * 131 + (i >> 9) * 7 + seed * 17) & 0xff);
}

/* Now at or past dl (never early), measured against the deadline itself. */
#define CHECK_NOT_EARLY(dl) CHECK_GE(aco_rt_now(), (dl))

#endif
