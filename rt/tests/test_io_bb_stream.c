/* test_io_bb_stream.c - the I/O section of aco_rt.h taken at its word for
 * the transfers (aco_rt_read, _write, _readv, _writev, _recv, _send),
 * written from the header alone: -EPERM outside a co (nothing taken),
 * -EBADF, -ENOMEM for a number of 2^24 and above, NULL buffers and vectors
 * (-EFAULT), the calls of no bytes (0 at once whatever the descriptor
 * holds; a write of none on a socket shut for writing -EPIPE; a recv of
 * none that waits, takes nothing, drops a datagram; an empty datagram
 * sent), vectors with zero-length pieces, count 0, -1 and IOV_MAX+1,
 * huge sizes as the system call answers them, short reads (what is
 * there), whole writes of 4 MiB through pipes, socketpairs and TCP over
 * loopback, MSG_PEEK, MSG_WAITALL (n bytes, or what came at the end or the
 * deadline), MSG_DONTWAIT never waiting, UDP messages whole or cut,
 * EOF, a reset (-ECONNRESET once, then the end), -EPIPE and never SIGPIPE,
 * blocking and non-blocking descriptors left as they were and the thread
 * never blocked, and buffers on one 64 KiB share stack shared by 8 cos. */
#define _GNU_SOURCE
#include "io_bb.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>

static void mkpipe(int p[2], int flags) { CHECK_EQ(pipe2(p, O_CLOEXEC | flags), 0); }
static void mkpair(int sv[2], int type) {
    CHECK_EQ(socketpair(AF_UNIX, type | SOCK_CLOEXEC, 0, sv), 0);
}

/* a TCP connection over loopback (port 0: the kernel's choice) */
static void tcp_pair(int sv[2]) {
    struct sockaddr_in a;
    int l = loopback_listener(&a, 4);
    int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK_GE(c, 0);
    CHECK_EQ(aco_rt_connect(c, (struct sockaddr*)&a, sizeof(a), in_ms(5000)), 0);
    int d = aco_rt_accept(l, NULL, NULL, SOCK_CLOEXEC, in_ms(5000));
    CHECK_GE(d, 0);
    CHECK_EQ(aco_rt_close(l), 0);
    sv[0] = c;
    sv[1] = d;
}

static void close2(int p[2]) {
    CHECK_EQ(aco_rt_close(p[0]), 0);
    CHECK_EQ(aco_rt_close(p[1]), 0);
}

/* ---- outside a co: -EPERM, nothing taken ---- */
static void case_eperm(void) {
    int p[2];
    mkpipe(p, 0);
    CHECK_EQ(write(p[1], "abc", 3), 3);
    char b[8];
    struct iovec v = {b, sizeof(b)};
    CHECK_EQ(aco_rt_read(p[0], b, sizeof(b), -1), -EPERM);
    CHECK_EQ(aco_rt_readv(p[0], &v, 1, -1), -EPERM);
    CHECK_EQ(aco_rt_write(p[1], "x", 1, -1), -EPERM);
    CHECK_EQ(aco_rt_writev(p[1], &v, 1, 0), -EPERM);
    int sv[2];
    mkpair(sv, SOCK_STREAM);
    CHECK_EQ(send(sv[0], "abc", 3, 0), 3);
    CHECK_EQ(aco_rt_recv(sv[1], b, sizeof(b), 0, -1), -EPERM);
    CHECK_EQ(aco_rt_recv(sv[1], b, sizeof(b), MSG_DONTWAIT, 0), -EPERM);
    CHECK_EQ(aco_rt_send(sv[0], "x", 1, 0, -1), -EPERM);
    CHECK_EQ(aco_rt_accept(sv[0], NULL, NULL, 0, -1), -EPERM);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    CHECK_EQ(aco_rt_connect(sv[0], (struct sockaddr*)&a, sizeof(a), -1), -EPERM);
    CHECK_EQ(aco_rt_wait(p[0], POLLIN, -1), -EPERM);
    struct pollfd pf = {p[0], POLLIN, 0};
    CHECK_EQ(aco_rt_poll(&pf, 1, -1), -EPERM);
    /* nothing was taken or added */
    CHECK_EQ(drain(p[0]), 3);
    CHECK_EQ(drain(sv[1]), 3);
    CHECK_EQ(drain(sv[0]), 0);
    /* close works outside cos */
    CHECK_EQ(aco_rt_close(p[0]), 0);
    CHECK_EQ(aco_rt_close(p[1]), 0);
    CHECK_EQ(aco_rt_close(sv[0]), 0);
    CHECK_EQ(aco_rt_close(sv[1]), 0);
}

/* ---- bad numbers, NULLs ---- */
static void case_bad(void) {
    char b[8] = "bad";
    struct iovec v = {b, sizeof(b)};
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    CHECK_GE(fd, 0);
    close(fd);  /* a number not open */
    CHECK_EQ(aco_rt_read(fd, b, 1, in_ms(1000)), -EBADF);
    CHECK_EQ(aco_rt_write(fd, b, 1, in_ms(1000)), -EBADF);
    CHECK_EQ(aco_rt_readv(fd, &v, 1, in_ms(1000)), -EBADF);
    CHECK_EQ(aco_rt_writev(fd, &v, 1, in_ms(1000)), -EBADF);
    CHECK_EQ(aco_rt_recv(fd, b, 1, 0, in_ms(1000)), -EBADF);
    CHECK_EQ(aco_rt_send(fd, b, 1, 0, in_ms(1000)), -EBADF);
    CHECK_EQ(aco_rt_accept(fd, NULL, NULL, 0, in_ms(1000)), -EBADF);
    CHECK_EQ(aco_rt_read(-1, b, 1, in_ms(1000)), -EBADF);
    CHECK_EQ(aco_rt_send(-1, b, 1, 0, in_ms(1000)), -EBADF);
    CHECK_EQ(aco_rt_close(fd), -EBADF);
    /* 2^24 and above: -ENOMEM from the calls that keep a record */
    int big = 1 << 24;
    CHECK_EQ(aco_rt_read(big, b, 1, in_ms(1000)), -ENOMEM);
    CHECK_EQ(aco_rt_write(big, b, 1, in_ms(1000)), -ENOMEM);
    CHECK_EQ(aco_rt_readv(big, &v, 1, in_ms(1000)), -ENOMEM);
    CHECK_EQ(aco_rt_writev(big, &v, 1, in_ms(1000)), -ENOMEM);
    CHECK_EQ(aco_rt_recv(big, b, 1, 0, in_ms(1000)), -ENOMEM);
    CHECK_EQ(aco_rt_send(big + 5, b, 1, 0, in_ms(1000)), -ENOMEM);
    CHECK_EQ(aco_rt_accept(INT_MAX, NULL, NULL, 0, in_ms(1000)), -ENOMEM);
    CHECK_EQ(aco_rt_wait(big, POLLIN, in_ms(1000)), -ENOMEM);
    CHECK_EQ(aco_rt_close(big), -EBADF);    /* close(2)'s error */
    /* NULL buffers and vectors of a non-zero size: -EFAULT, nothing taken */
    int p[2];
    mkpipe(p, 0);
    CHECK_EQ(write(p[1], "abc", 3), 3);
    CHECK_EQ(aco_rt_read(p[0], NULL, 3, in_ms(1000)), -EFAULT);
    CHECK_EQ(aco_rt_readv(p[0], NULL, 1, in_ms(1000)), -EFAULT);
    struct iovec nv = {NULL, 3};
    CHECK_EQ(aco_rt_readv(p[0], &nv, 1, in_ms(1000)), -EFAULT);
    CHECK_EQ(aco_rt_write(p[1], NULL, 3, in_ms(1000)), -EFAULT);
    CHECK_EQ(aco_rt_writev(p[1], NULL, 2, in_ms(1000)), -EFAULT);
    CHECK_EQ(drain(p[0]), 3);
    int sv[2];
    mkpair(sv, SOCK_STREAM);
    CHECK_EQ(send(sv[0], "abc", 3, 0), 3);
    CHECK_EQ(aco_rt_recv(sv[1], NULL, 3, 0, in_ms(1000)), -EFAULT);
    CHECK_EQ(aco_rt_send(sv[0], NULL, 3, 0, in_ms(1000)), -EFAULT);
    CHECK_EQ(drain(sv[1]), 3);
    /* recv on a pipe, accept on a socket not listening: the kernel's */
    CHECK_EQ(aco_rt_recv(p[0], b, 1, MSG_DONTWAIT, in_ms(1000)), -ENOTSOCK);
    CHECK_EQ(aco_rt_accept(p[0], NULL, NULL, 0, in_ms(1000)), -ENOTSOCK);
    CHECK_EQ(aco_rt_accept(sv[0], NULL, NULL, 0, in_ms(1000)), -EINVAL);
    close2(p);
    close2(sv);
}

/* ---- no bytes ---- */
static void case_zero(void) {
    int p[2];
    char b[8];
    mkpipe(p, 0);
    int64_t t0 = aco_rt_now();
    /* an empty pipe: read/readv/writev of none return 0 at once */
    CHECK_EQ(aco_rt_read(p[0], b, 0, in_ms(3000)), 0);
    struct iovec z[3] = {{b, 0}, {NULL, 0}, {b + 1, 0}};
    CHECK_EQ(aco_rt_readv(p[0], z, 3, in_ms(3000)), 0);
    CHECK_EQ(aco_rt_readv(p[0], z, 0, in_ms(3000)), 0);
    CHECK_EQ(aco_rt_writev(p[1], z, 3, in_ms(3000)), 0);
    CHECK_EQ(aco_rt_writev(p[1], z, 0, in_ms(3000)), 0);
    CHECK_EQ(aco_rt_write(p[1], b, 0, in_ms(3000)), 0);
    CHECK_LT(aco_rt_now() - t0, 1000 * MS);
    CHECK_EQ(drain(p[0]), 0);   /* nothing was written */
    /* a full pipe: still 0 at once */
    CHECK_EQ(write(p[1], "abc", 3), 3);
    CHECK_EQ(aco_rt_read(p[0], b, 0, -1), 0);
    CHECK_EQ(aco_rt_readv(p[0], z, 3, -1), 0);
    CHECK_EQ(drain(p[0]), 3);
    close2(p);
    /* a write of none on a socket shut for writing: -EPIPE, no SIGPIPE */
    int sv[2];
    mkpair(sv, SOCK_STREAM);
    CHECK_EQ(shutdown(sv[0], SHUT_WR), 0);
    CHECK_EQ(aco_rt_write(sv[0], b, 0, in_ms(1000)), -EPIPE);
    CHECK_EQ(aco_rt_send(sv[0], b, 0, 0, in_ms(1000)), -EPIPE);
    /* recv of none on a stream: waits for bytes (never early), takes none */
    t0 = aco_rt_now();
    CHECK_EQ(aco_rt_recv(sv[0], b, 0, 0, t0 + 40 * MS), -ETIMEDOUT);
    CHECK_GE(aco_rt_now() - t0, 40 * MS);
    CHECK_EQ(send(sv[1], "xy", 2, 0), 2);
    CHECK_EQ(aco_rt_recv(sv[0], b, 0, 0, in_ms(1000)), 0);
    CHECK_EQ(aco_rt_recv(sv[0], b, sizeof(b), 0, in_ms(1000)), 2);
    close2(sv);
    /* datagrams: a write of none sends an empty datagram; a recv of none
     * takes the next datagram whole and drops it */
    mkpair(sv, SOCK_DGRAM);
    CHECK_EQ(aco_rt_write(sv[0], b, 0, in_ms(1000)), 0);
    CHECK_EQ(aco_rt_send(sv[0], b, 0, 0, in_ms(1000)), 0);
    CHECK_EQ(recv(sv[1], b, sizeof(b), MSG_DONTWAIT), 0);
    CHECK_EQ(recv(sv[1], b, sizeof(b), MSG_DONTWAIT), 0);
    CHECK_EQ(recv(sv[1], b, sizeof(b), MSG_DONTWAIT), -1);
    CHECK_EQ(errno, EAGAIN);
    CHECK_EQ(send(sv[0], "one", 3, 0), 3);
    CHECK_EQ(send(sv[0], "two", 3, 0), 3);
    CHECK_EQ(aco_rt_recv(sv[1], b, 0, 0, in_ms(1000)), 0);
    memset(b, 0, sizeof(b));
    CHECK_EQ(aco_rt_recv(sv[1], b, sizeof(b), 0, in_ms(1000)), 3);
    CHECK(memcmp(b, "two", 3) == 0);
    close2(sv);
}

/* ---- vectors ---- */
static void case_vectors(void) {
    int p[2];
    mkpipe(p, 0);
    char a1[] = "hello", a2[] = "world";
    struct iovec w[5] = {{NULL, 0}, {a1, 5}, {a1, 0}, {a2, 5}, {NULL, 0}};
    CHECK_EQ(aco_rt_writev(p[1], w, 5, in_ms(1000)), 10);
    char r1[3], r2[4], r3[8];
    struct iovec r[5] = {{r1, 3}, {NULL, 0}, {r2, 4}, {r3, 0}, {r3, 8}};
    /* short: what is there, in order across the pieces */
    CHECK_EQ(aco_rt_readv(p[0], r, 5, in_ms(1000)), 10);
    CHECK(memcmp(r1, "hel", 3) == 0);
    CHECK(memcmp(r2, "lowo", 4) == 0);
    CHECK(memcmp(r3, "rld", 3) == 0);
    /* count -1 and IOV_MAX+1: readv(2)'s and writev(2)'s -EINVAL, nothing
     * moved */
    static struct iovec many[IOV_MAX + 1];
    static char one[IOV_MAX + 1];
    for (int i = 0; i <= IOV_MAX; i++) many[i] = (struct iovec){one + i, 1};
    CHECK_EQ(aco_rt_writev(p[1], many, IOV_MAX + 1, in_ms(1000)), -EINVAL);
    CHECK_EQ(aco_rt_writev(p[1], many, -1, in_ms(1000)), -EINVAL);
    CHECK_EQ(drain(p[0]), 0);
    CHECK_EQ(write(p[1], "abc", 3), 3);
    CHECK_EQ(aco_rt_readv(p[0], many, IOV_MAX + 1, in_ms(1000)), -EINVAL);
    CHECK_EQ(aco_rt_readv(p[0], many, -1, in_ms(1000)), -EINVAL);
    /* IOV_MAX itself works */
    memset(one, 0, sizeof(one));
    CHECK_EQ(aco_rt_readv(p[0], many, IOV_MAX, in_ms(1000)), 3);
    CHECK(memcmp(one, "abc", 3) == 0);
    memset(one, 'v', sizeof(one));
    CHECK_EQ(aco_rt_writev(p[1], many, IOV_MAX, in_ms(1000)), IOV_MAX);
    CHECK_EQ(drain(p[0]), IOV_MAX);
    /* lengths whose total is over SSIZE_MAX: readv(2)'s EINVAL as POSIX
     * and the manual say (Linux itself cuts the total, then meets the end
     * of r3: EFAULT), and nothing taken */
    struct iovec huge[2] = {{r3, SSIZE_MAX}, {r3, 16}};
    CHECK_EQ(write(p[1], "abc", 3), 3);
    CHECK_EQ(aco_rt_readv(p[0], huge, 2, in_ms(1000)), -EINVAL);
    CHECK_EQ(aco_rt_writev(p[1], huge, 2, in_ms(1000)), -EINVAL);
    CHECK_EQ(drain(p[0]), 3);
    close2(p);
}

/* ---- huge sizes: as the system call answers, on a twin holding the
 * same bytes; the buffer is 1 MiB of mapped memory before a page the
 * kernel may not touch (a send takes what fits, then waits or meets it) ---- */
#ifndef ACO_USE_VALGRIND /* (memcheck checks the whole length it is given) */
#include <sys/mman.h>
static const size_t huge_n[] = {
    (size_t)1 << 31,
#if SIZE_MAX > 0xffffffffu
    ((size_t)1 << 32) + 2, (size_t)1 << 32,
#endif
    (size_t)SSIZE_MAX, SIZE_MAX};
static ssize_t neg(ssize_t r) { return r < 0 ? -errno : r; }
static void case_huge(void) {
    size_t len = 1 << 20, pg = (size_t)sysconf(_SC_PAGESIZE);
    char* m = mmap(NULL, len + pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(m != MAP_FAILED);
    CHECK_EQ(mprotect(m + len, pg, PROT_NONE), 0);
    char* b = m;
    for (size_t k = 0; k < sizeof(huge_n) / sizeof(huge_n[0]); k++) {
        size_t n = huge_n[k];
        int p[2], q[2];
        mkpipe(p, 0);
        mkpipe(q, 0);
        CHECK_EQ(write(p[1], "abc", 3), 3);
        CHECK_EQ(write(q[1], "abc", 3), 3);
        ssize_t want = neg(syscall(SYS_read, q[0], b, n));
        ssize_t got = aco_rt_read(p[0], b, n, in_ms(1000));
        /* read(2) says -EFAULT for a length past SSIZE_MAX, the runtime
         * may clamp it: an error took nothing, a count is the bytes */
        if (n < (size_t)SSIZE_MAX) CHECK_EQ(got, want);
        else if (got < 0) CHECK_EQ(drain(p[0]), 3);
        else CHECK_EQ(got, 3);
        close2(p);
        close2(q);
        int sv[2], sw[2];
        mkpair(sv, SOCK_STREAM);
        mkpair(sw, SOCK_STREAM);
        CHECK_EQ(send(sv[0], "abc", 3, 0), 3);
        CHECK_EQ(send(sw[0], "abc", 3, 0), 3);
        want = neg(syscall(SYS_recvfrom, sw[1], b, n, MSG_DONTWAIT, NULL, NULL));
        got = aco_rt_recv(sv[1], b, n, 0, in_ms(1000));
        CHECK_EQ(got, want);
        /* send: what the first try takes, then a wait to the deadline or
         * the fault: the part sent is the count */
        want = neg(syscall(SYS_sendto, sw[1], b, n, MSG_DONTWAIT | MSG_NOSIGNAL, NULL, 0));
        got = aco_rt_send(sv[1], b, n, 0, in_ms(30));
        CHECK_EQ(got, want);
        if (got > 0) CHECK_EQ(drain(sv[0]), got);
        close2(sv);
        close2(sw);
    }
    CHECK_EQ(munmap(m, len + pg), 0);
}
#else
static void case_huge(void) {}
#endif

/* ---- whole transfers ---- */
#define BIG (4 << 20)
struct xfer {
    int fd, how;            /* how: 0 read/write, 1 readv/writev, 2 recv/send */
    size_t total;
    uint32_t sum;
};
static uint8_t pat(size_t i) { return (uint8_t)(i * 131 + (i >> 9)); }
static void reader_co(void* arg) {
    struct xfer* x = arg;
    static char buf[70000];
    size_t t = 0;
    for (;;) {
        ssize_t r;
        size_t want = 1 + (t * 7919) % sizeof(buf);
        if (x->how == 1) {
            struct iovec v[3] = {{buf, want / 2}, {buf + want / 2, 0}, {buf + want / 2, want - want / 2}};
            r = aco_rt_readv(x->fd, v, 3, in_ms(10000));
        } else if (x->how == 2) {
            r = aco_rt_recv(x->fd, buf, want, 0, in_ms(10000));
        } else {
            r = aco_rt_read(x->fd, buf, want, in_ms(10000));
        }
        CHECK_GE(r, 0);
        CHECK_LE(r, want);
        if (r == 0) break;
        for (ssize_t i = 0; i < r; i++)
            if ((uint8_t)buf[i] != pat(t + (size_t)i))
                TEST_FAIL_AT(__FILE__, __LINE__, "byte %zu wrong", t + (size_t)i);
        t += (size_t)r;
    }
    x->total = t;
}
static void whole(int rfd, int wfd, int how) {
    static char* src;
    if (!src) {
        src = malloc(BIG);
        CHECK(src != NULL);
        for (size_t i = 0; i < BIG; i++) src[i] = (char)pat(i);
    }
    struct xfer x = {rfd, how, 0, 0};
    aco_rt_co_t* r = go(reader_co, &x);
    ssize_t w;
    if (how == 1) {
        struct iovec v[4] = {{src, 1000}, {src + 1000, 0}, {src + 1000, BIG / 2 - 1000}, {src + BIG / 2, BIG / 2}};
        w = aco_rt_writev(wfd, v, 4, in_ms(10000));
    } else if (how == 2) {
        w = aco_rt_send(wfd, src, BIG, 0, in_ms(10000));
    } else {
        w = aco_rt_write(wfd, src, BIG, in_ms(10000));
    }
    CHECK_EQ(w, BIG);       /* everything, as a blocking socket */
    CHECK_EQ(aco_rt_close(wfd), 0);
    join(r);
    CHECK_EQ(x.total, BIG);
    CHECK_EQ(aco_rt_close(rfd), 0);
}
static void case_whole(void) {
    int n = FEW ? 1 : 3;
    for (int how = 0; how < n; how++) {
        int p[2], sv[2];
        mkpipe(p, 0);
        whole(p[0], p[1], how == 2 ? 0 : how);
        mkpipe(p, O_NONBLOCK);
        whole(p[0], p[1], how == 2 ? 1 : how);
        mkpair(sv, SOCK_STREAM);
        whole(sv[0], sv[1], how);
        tcp_pair(sv);
        whole(sv[1], sv[0], how);
    }
}

/* ---- short reads, EOF, MSG_* ---- */
static int wa_fd;
static void dribble_co(void* arg) {
    (void)arg;
    for (int i = 0; i < 5; i++) {
        aco_rt_sleep(5 * MS);
        CHECK_EQ(aco_rt_send(wa_fd, "ab", 2, 0, in_ms(1000)), 2);
    }
}
static void case_short(void) {
    char b[64];
    int p[2];
    mkpipe(p, 0);
    CHECK_EQ(write(p[1], "12345", 5), 5);
    CHECK_EQ(aco_rt_read(p[0], b, sizeof(b), -1), 5);
    CHECK_EQ(aco_rt_close(p[1]), 0);
    CHECK_EQ(aco_rt_read(p[0], b, sizeof(b), -1), 0);    /* the end */
    CHECK_EQ(aco_rt_read(p[0], b, sizeof(b), 0), 0);
    CHECK_EQ(aco_rt_close(p[0]), 0);

    int sv[2];
    mkpair(sv, SOCK_STREAM);
    /* PEEK leaves the bytes */
    CHECK_EQ(send(sv[0], "peek", 4, 0), 4);
    CHECK_EQ(aco_rt_recv(sv[1], b, sizeof(b), MSG_PEEK, in_ms(1000)), 4);
    CHECK_EQ(aco_rt_recv(sv[1], b, 2, 0, in_ms(1000)), 2);
    CHECK_EQ(aco_rt_recv(sv[1], b, sizeof(b), 0, in_ms(1000)), 2);
    CHECK(memcmp(b, "ek", 2) == 0);
    /* DONTWAIT: one try, -EAGAIN at once even with no deadline */
    int64_t t0 = aco_rt_now();
    CHECK_EQ(aco_rt_recv(sv[1], b, sizeof(b), MSG_DONTWAIT, -1), -EAGAIN);
    CHECK_LT(aco_rt_now() - t0, 500 * MS);
    /* WAITALL: n bytes */
    wa_fd = sv[0];
    aco_rt_co_t* d = go(dribble_co, NULL);
    CHECK_EQ(aco_rt_recv(sv[1], b, 10, MSG_WAITALL, in_ms(5000)), 10);
    CHECK(memcmp(b, "ababababab", 10) == 0);
    join(d);
    /* WAITALL: the deadline with what came (2 bytes at least, there
     * before the call; a slow lane may see more come before it ends) */
    CHECK_EQ(send(sv[0], "ab", 2, 0), 2);
    d = go(dribble_co, NULL);
    t0 = aco_rt_now();
    ssize_t r = aco_rt_recv(sv[1], b, 64, MSG_WAITALL, t0 + 17 * MS);
    CHECK_GE(aco_rt_now() - t0, 17 * MS);
    CHECK_GE(r, 2);
    CHECK_LE(r, 12);
    join(d);
    CHECK_EQ(r + (ssize_t)drain(sv[1]), 12);
    /* WAITALL: the end with what came */
    CHECK_EQ(send(sv[0], "xyz", 3, 0), 3);
    CHECK_EQ(shutdown(sv[0], SHUT_WR), 0);
    CHECK_EQ(aco_rt_recv(sv[1], b, 64, MSG_WAITALL, in_ms(1000)), 3);
    CHECK_EQ(aco_rt_recv(sv[1], b, 64, MSG_WAITALL, in_ms(1000)), 0);
    CHECK_EQ(aco_rt_recv(sv[1], b, 64, 0, in_ms(1000)), 0);
    CHECK_EQ(aco_rt_read(sv[1], b, 64, in_ms(1000)), 0);
    /* WAITALL with PEEK: returns as soon as some bytes are there */
    CHECK_EQ(send(sv[1], "q", 1, 0), 1);
    CHECK_EQ(aco_rt_recv(sv[0], b, 64, MSG_WAITALL | MSG_PEEK, in_ms(1000)), 1);
    CHECK_EQ(aco_rt_recv(sv[0], b, 64, 0, in_ms(1000)), 1);
    close2(sv);

    /* send DONTWAIT on a full socket: -EAGAIN or part, never a wait */
    mkpair(sv, SOCK_STREAM);
    static char fill[1 << 20];
    size_t sent = 0;
    t0 = aco_rt_now();
    for (;;) {
        ssize_t w = aco_rt_send(sv[0], fill, sizeof(fill), MSG_DONTWAIT, -1);
        if (w == -EAGAIN) break;
        CHECK_GT(w, 0);
        sent += (size_t)w;
    }
    CHECK_LT(aco_rt_now() - t0, 1000 * MS);
    CHECK_EQ(drain(sv[1]), sent);
    close2(sv);
}

/* ---- datagrams ---- */
static void case_dgram(void) {
    char b[64];
    int u = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), v = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    CHECK_GE(u, 0);
    CHECK_GE(v, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK_EQ(bind(u, (struct sockaddr*)&a, sizeof(a)), 0);
    socklen_t al = sizeof(a);
    CHECK_EQ(getsockname(u, (struct sockaddr*)&a, &al), 0);
    CHECK_EQ(aco_rt_connect(v, (struct sockaddr*)&a, sizeof(a), in_ms(1000)), 0);
    CHECK_EQ(aco_rt_send(v, "0123456789", 10, 0, in_ms(1000)), 10);
    CHECK_EQ(aco_rt_write(v, "abc", 3, in_ms(1000)), 3);
    CHECK_EQ(aco_rt_send(v, "WAIT", 4, 0, in_ms(1000)), 4);
    /* one message each; a short buffer cuts it, the rest dropped */
    CHECK_EQ(aco_rt_recv(u, b, 4, 0, in_ms(1000)), 4);
    CHECK(memcmp(b, "0123", 4) == 0);
    CHECK_EQ(aco_rt_read(u, b, sizeof(b), in_ms(1000)), 3);
    CHECK(memcmp(b, "abc", 3) == 0);
    /* MSG_WAITALL on a datagram: still one message */
    CHECK_EQ(aco_rt_recv(u, b, sizeof(b), MSG_WAITALL, in_ms(1000)), 4);
    /* nothing left: a deadline, never early */
    int64_t t0 = aco_rt_now();
    CHECK_EQ(aco_rt_recv(u, b, sizeof(b), 0, t0 + 30 * MS), -ETIMEDOUT);
    CHECK_GE(aco_rt_now() - t0, 30 * MS);
    CHECK_EQ(aco_rt_close(u), 0);
    CHECK_EQ(aco_rt_close(v), 0);
    /* SOCK_SEQPACKET: a record is one message whatever the flags */
    int sv[2];
    mkpair(sv, SOCK_SEQPACKET);
    CHECK_EQ(aco_rt_send(sv[0], "rec1", 4, 0, in_ms(1000)), 4);
    CHECK_EQ(aco_rt_send(sv[0], "rec2", 4, 0, in_ms(1000)), 4);
    CHECK_EQ(aco_rt_recv(sv[1], b, sizeof(b), MSG_WAITALL, in_ms(1000)), 4);
    CHECK_EQ(aco_rt_recv(sv[1], b, sizeof(b), MSG_WAITALL, in_ms(1000)), 4);
    CHECK(memcmp(b, "rec2", 4) == 0);
    close2(sv);
}

/* ---- reset, EPIPE and no SIGPIPE ---- */
static volatile sig_atomic_t pipes_seen;
static void on_pipe(int sig) { (void)sig; pipes_seen++; }
static void rst(int sv[2]) {
    tcp_pair(sv);
    struct linger lg = {1, 0};
    CHECK_EQ(setsockopt(sv[1], SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
    CHECK_EQ(aco_rt_close(sv[1]), 0);
    aco_rt_sleep(10 * MS);
}
static void case_reset(void) {
    char b[8];
    int sv[2];
    struct sigaction sa, old;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_pipe;
    CHECK_EQ(sigaction(SIGPIPE, &sa, &old), 0);
    pipes_seen = 0;
    /* the reset: -ECONNRESET once, then the end */
    rst(sv);
    CHECK_EQ(aco_rt_read(sv[0], b, sizeof(b), in_ms(1000)), -ECONNRESET);
    CHECK_EQ(aco_rt_read(sv[0], b, sizeof(b), in_ms(1000)), 0);
    CHECK_EQ(aco_rt_write(sv[0], "x", 1, in_ms(1000)), -EPIPE);
    CHECK_EQ(aco_rt_close(sv[0]), 0);
    rst(sv);
    CHECK_EQ(aco_rt_send(sv[0], "x", 1, 0, in_ms(1000)), -ECONNRESET);
    CHECK_EQ(aco_rt_send(sv[0], "x", 1, 0, in_ms(1000)), -EPIPE);
    CHECK_EQ(aco_rt_recv(sv[0], b, sizeof(b), 0, in_ms(1000)), 0);
    CHECK_EQ(aco_rt_close(sv[0]), 0);
    rst(sv);
    struct iovec v = {b, 1};
    CHECK_EQ(aco_rt_readv(sv[0], &v, 1, in_ms(1000)), -ECONNRESET);
    CHECK_EQ(aco_rt_writev(sv[0], &v, 1, in_ms(1000)), -EPIPE);
    CHECK_EQ(aco_rt_close(sv[0]), 0);
    /* -EPIPE on a pipe whose reader is gone, a socketpair's, never SIGPIPE */
    int p[2];
    mkpipe(p, 0);
    CHECK_EQ(aco_rt_close(p[0]), 0);
    CHECK_EQ(aco_rt_write(p[1], "x", 1, in_ms(1000)), -EPIPE);
    CHECK_EQ(aco_rt_writev(p[1], &v, 1, in_ms(1000)), -EPIPE);
    CHECK_EQ(aco_rt_close(p[1]), 0);
    mkpair(sv, SOCK_STREAM);
    CHECK_EQ(aco_rt_close(sv[1]), 0);
    CHECK_EQ(aco_rt_send(sv[0], "x", 1, 0, in_ms(1000)), -EPIPE);
    CHECK_EQ(aco_rt_write(sv[0], "x", 1, in_ms(1000)), -EPIPE);
    CHECK_EQ(aco_rt_close(sv[0]), 0);
    CHECK_EQ(pipes_seen, 0);
    /* the mask kept, a pending SIGPIPE stays pending */
    sigset_t m, before, after, pend;
    sigemptyset(&m);
    sigaddset(&m, SIGPIPE);
    CHECK_EQ(pthread_sigmask(SIG_BLOCK, &m, &before), 0);
    CHECK_EQ(raise(SIGPIPE), 0);
    mkpipe(p, 0);
    CHECK_EQ(aco_rt_close(p[0]), 0);
    CHECK_EQ(aco_rt_write(p[1], "x", 1, in_ms(1000)), -EPIPE);
    CHECK_EQ(aco_rt_close(p[1]), 0);
    CHECK_EQ(sigpending(&pend), 0);
    CHECK(sigismember(&pend, SIGPIPE));
    CHECK_EQ(pthread_sigmask(SIG_SETMASK, &before, &after), 0);
    CHECK(sigismember(&after, SIGPIPE));
    CHECK_EQ(pipes_seen, 1);    /* the one raised, let through now */
    CHECK_EQ(sigaction(SIGPIPE, &old, NULL), 0);
}

/* ---- blocking and non-blocking descriptors: flags kept, thread free ---- */
static int ticks;
static volatile int ticking;
static void ticker_co(void* arg) {
    (void)arg;
    while (ticking) {
        ticks++;
        aco_rt_sleep(2 * MS);
    }
}
struct flag_probe { int fd, want, wfd; };
static void flags_co(void* arg) {
    struct flag_probe* f = arg;
    aco_rt_sleep(10 * MS);
    CHECK_EQ(raw_flags(f->fd) & O_NONBLOCK, f->want);   /* while a co waits */
    CHECK_EQ(write(f->wfd, "z", 1), 1);
}
static void case_blocking(void) {
    for (int nb = 0; nb < 2; nb++) {
        int fl = nb ? O_NONBLOCK : 0;
        int p[2];
        mkpipe(p, fl);
        struct flag_probe f = {p[0], fl, p[1]};
        ticking = 1;
        ticks = 0;
        aco_rt_co_t* t = go(ticker_co, NULL);
        aco_rt_co_t* c = go(flags_co, &f);
        char b[4];
        CHECK_EQ(aco_rt_read(p[0], b, sizeof(b), in_ms(5000)), 1);
        CHECK_GT(ticks, 0);                     /* the thread ran others */
        join(c);
        CHECK_EQ(raw_flags(p[0]) & O_NONBLOCK, fl);
        CHECK_EQ(raw_flags(p[1]) & O_NONBLOCK, fl);
        /* a full pipe: the write waits for the reader, flags kept */
        static char big[200000];
        struct xfer x = {p[0], 0, 0, 0};
        memset(big, 0, sizeof(big));
        for (size_t i = 0; i < sizeof(big); i++) big[i] = (char)pat(i);
        aco_rt_co_t* r = go(reader_co, &x);
        CHECK_EQ(aco_rt_write(p[1], big, sizeof(big), in_ms(5000)), sizeof(big));
        CHECK_EQ(raw_flags(p[1]) & O_NONBLOCK, fl);
        CHECK_EQ(aco_rt_close(p[1]), 0);
        join(r);
        CHECK_EQ(x.total, sizeof(big));
        CHECK_EQ(raw_flags(p[0]) & O_NONBLOCK, fl);
        CHECK_EQ(aco_rt_close(p[0]), 0);
        /* a socket: left as it is */
        int sv[2];
        CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | (nb ? SOCK_NONBLOCK : 0), 0, sv), 0);
        struct flag_probe g = {sv[0], fl, sv[1]};
        c = go(flags_co, &g);
        CHECK_EQ(aco_rt_recv(sv[0], b, sizeof(b), 0, in_ms(5000)), 1);
        join(c);
        CHECK_EQ(raw_flags(sv[0]) & O_NONBLOCK, fl);
        close2(sv);
        ticking = 0;
        join(t);
    }
}

/* ---- buffers on a share stack: 8 cos on one 64 KiB stack ---- */
struct ring { int in, out, id; };
__attribute__((noinline)) static void share_co(void* arg) {
    struct ring* r = arg;
    char buf[512];          /* on the share stack */
    char got[512];
    struct iovec v[2];
    for (int round = 0; round < (FEW ? 20 : 100); round++) {
        memset(buf, 'a' + (r->id + round) % 26, sizeof(buf));
        ssize_t w;
        switch (round % 3) {
        case 0: w = aco_rt_write(r->out, buf, sizeof(buf), in_ms(5000)); break;
        case 1:
            v[0] = (struct iovec){buf, 100};
            v[1] = (struct iovec){buf + 100, sizeof(buf) - 100};
            w = aco_rt_writev(r->out, v, 2, in_ms(5000));
            break;
        default: w = aco_rt_send(r->out, buf, sizeof(buf), 0, in_ms(5000)); break;
        }
        if (w != (ssize_t)sizeof(buf))
            TEST_FAIL_AT(__FILE__, __LINE__, "co %d round %d kind %d: %zd", r->id, round, round % 3, w);
        size_t t = 0;
        while (t < sizeof(got)) {
            ssize_t k;
            switch (round % 3) {
            case 0: k = aco_rt_read(r->in, got + t, sizeof(got) - t, in_ms(5000)); break;
            case 1:
                v[0] = (struct iovec){got + t, (sizeof(got) - t) / 2};
                v[1] = (struct iovec){got + t + (sizeof(got) - t) / 2, sizeof(got) - t - (sizeof(got) - t) / 2};
                k = aco_rt_readv(r->in, v, 2, in_ms(5000));
                break;
            default: k = aco_rt_recv(r->in, got + t, sizeof(got) - t, MSG_WAITALL, in_ms(5000)); break;
            }
            CHECK_GT(k, 0);
            t += (size_t)k;
        }
        /* what the co before in the ring sent */
        char c = (char)('a' + ((r->id + 7) % 8 + round) % 26);
        for (size_t i = 0; i < sizeof(got); i++) CHECK_EQ(got[i], c);
        aco_rt_yield();
    }
}
static void share_main(void* arg) {
    (void)arg;
    enum { N = 8 };
    /* static: other cos read them while this co's frames are swapped out */
    static int fds[N][2];
    for (int i = 0; i < N; i++) mkpair(fds[i], SOCK_STREAM);
    static struct ring r[N];
    static aco_rt_co_t* c[N];
    for (int i = 0; i < N; i++) {
        r[i].id = i;
        r[i].out = fds[i][0];           /* co i writes pair i */
        r[i].in = fds[(i + N - 1) % N][1];   /* reads pair i-1 */
    }
    for (int i = 0; i < N; i++) c[i] = go(share_co, &r[i]);
    for (int i = 0; i < N; i++) join(c[i]);
    for (int i = 0; i < N; i++) close2(fds[i]);
}

static void main_co(void* arg) {
    (void)arg;
    case_bad();
    case_zero();
    case_vectors();
    case_huge();
    case_short();
    case_dgram();
    case_reset();
    case_blocking();
    case_whole();
}

static void body(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    case_eperm();           /* a scheduler, not in a co */
    test_go(s, main_co, NULL);
}
static void body_share(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    test_go(s, share_main, NULL);
}

int main(void) {
    case_eperm();           /* no scheduler at all */
    test_on_backends(NULL, body, NULL);
    /* one 64 KiB share stack for all */
    aco_rt_opts_t o;
    memset(&o, 0, sizeof(o));
    o.share_stacks = 1;
    o.stack_size = 64 * 1024;
    test_on_backends(&o, body_share, NULL);
    printf("test_io_bb_stream: ok\n");
    return 0;
}
