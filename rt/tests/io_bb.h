/* io_bb.h - what the I/O section's black-box tests share
 * (test_io_bb_stream, test_io_bb_ends, test_io_bb_poll): a deadline from
 * now, a spawned co and its join, a descriptor's status flags and what
 * waits in it, read past the runtime. */
#ifndef IO_BB_H
#define IO_BB_H

#include "rt_test.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>

static inline int64_t in_ms(int ms) { return aco_rt_now() + ms * MS; }
/* fcntl(2)'s F_GETFL, past any hook */
static inline int raw_flags(int fd) { return (int)syscall(SYS_fcntl, fd, F_GETFL); }

/* a co of the calling thread's scheduler, and its join (20 s at most) */
static inline aco_rt_co_t* go(aco_rt_fn_t fn, void* arg) {
    aco_rt_co_t* co = aco_rt_spawn(NULL, fn, arg);
    CHECK(co != NULL);
    return co;
}
static inline void join(aco_rt_co_t* co) { CHECK_EQ(aco_rt_join(co, in_ms(20000)), 0); }

/* a TCP socket bound on loopback, port 0 (the kernel's choice: *a says
 * it), listening with backlog (< 0: bound only, nobody listens there) */
static inline int loopback_listener(struct sockaddr_in* a, int backlog) {
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK_GE(l, 0);
    memset(a, 0, sizeof(*a));
    a->sin_family = AF_INET;
    a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK_EQ(bind(l, (struct sockaddr*)a, sizeof(*a)), 0);
    if (backlog >= 0) CHECK_EQ(listen(l, backlog), 0);
    socklen_t al = sizeof(*a);
    CHECK_EQ(getsockname(l, (struct sockaddr*)a, &al), 0);
    return l;
}

/* bytes waiting in a pipe or socket, taken by raw non-blocking reads
 * (never inlined: its 64 KiB buffer would join the caller's frame, which
 * overflowed a co's stack under ASan) */
static __attribute__((noinline, unused)) size_t drain(int fd) {
    char b[65536];
    size_t t = 0;
    for (;;) {
        ssize_t r = recv(fd, b, sizeof(b), MSG_DONTWAIT);
        if (r < 0 && errno == ENOTSOCK) {
            struct pollfd p = {fd, POLLIN, 0};
            if (poll(&p, 1, 0) != 1 || !(p.revents & POLLIN)) return t;
            r = read(fd, b, sizeof(b));
        }
        if (r <= 0) return t;
        t += (size_t)r;
    }
}

#endif
