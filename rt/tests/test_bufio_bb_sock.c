/* test_bufio_bb_sock.c - aco_rt.h's "Buffered I/O" on sockets,
 * socketpairs and pipes, from the header alone: the arguments (b NULL
 * -EINVAL first of all: before -EPERM outside a co and before -ECANCELED
 * in a cancelled one; buf NULL -EFAULT; n 0; out NULL; limits and peeks
 * past the read buffer), the sizes (0: 16 KiB each, seen by fill and by
 * what a write keeps; 1 byte; 1 GiB; over 1 GiB and SIZE_MAX EINVAL; fd <
 * 0), a read of at least the read buffer's size going straight into buf
 * (more than rsize at once), views kept across calls that neither read
 * nor consume (an echo of the view), free dropping unflushed bytes and
 * leaving fd open, -EBADF kept by the writer (a new file under the number
 * never gets the held bytes) while the reader goes on, -ENOMEM at 2^24,
 * aco_rt_close under a parked read (-EBADF, the part of a line kept),
 * blocking descriptors (the co parks, the thread runs others, O_NONBLOCK
 * as it was), calls outside cos (-EPERM with bytes at hand; consume and
 * the counts work there), a bufio made on a plain thread, and one moved
 * between cos of two pool threads mid-stream. */
#define _GNU_SOURCE
#include "bufio_bb.h"

#include <limits.h>
#include <stdint.h>
#include <sys/ioctl.h>

/* ---- b NULL: -EINVAL first of all (here in a cancelled co) ---- */
static void nulls_all(int64_t dl) {
    const char* v;
    char buf[4];
    CHECK_EQ(aco_rt_bufio_read(NULL, buf, 1, dl), -EINVAL);
    CHECK_EQ(aco_rt_bufio_read(NULL, NULL, 1, dl), -EINVAL);
    CHECK_EQ(aco_rt_bufio_read_full(NULL, buf, 1, dl), -EINVAL);
    CHECK_EQ(aco_rt_bufio_read_until(NULL, '\n', 0, &v, dl), -EINVAL);
    CHECK_EQ(aco_rt_bufio_read_until(NULL, '\n', 0, NULL, dl), -EINVAL);
    CHECK_EQ(aco_rt_bufio_peek(NULL, 1, &v, dl), -EINVAL);
    CHECK_EQ(aco_rt_bufio_fill(NULL, dl), -EINVAL);
    CHECK_EQ(aco_rt_bufio_consume(NULL, 0), -EINVAL);
    CHECK_EQ(aco_rt_bufio_consume(NULL, 5), -EINVAL);
    CHECK_EQ(aco_rt_bufio_write(NULL, buf, 1, dl), -EINVAL);
    CHECK_EQ(aco_rt_bufio_write(NULL, NULL, 1, dl), -EINVAL);
    CHECK_EQ(aco_rt_bufio_flush(NULL, dl), -EINVAL);
    CHECK_EQ(aco_rt_bufio_flush_more(NULL, dl), -EINVAL);
    CHECK_EQ(aco_rt_bufio_fd(NULL), -EINVAL);
    CHECK_EQ(aco_rt_bufio_buffered(NULL), 0);
    CHECK_EQ(aco_rt_bufio_unflushed(NULL), 0);
    aco_rt_bufio_free(NULL);
}

/* ---- a cancelled co: NULL first, then -ECANCELED with bytes at hand
 * (nothing taken); consume and the counts work ---- */
static void case_cancelled(void) {
    aco_rt_cancel(aco_rt_self());
    nulls_all(-1);
    nulls_all(0);
    int c[2];
    conn(K_UNIX, 0, c);
    aco_rt_bufio_t* b = aco_rt_bufio_new(c[0], 32, 32);
    CHECK(b != NULL);
    CHECK_EQ(send(c[1], "hello\nworld", 11, 0), 11);
    const char* v;
    char buf[16];
    CHECK_EQ(aco_rt_bufio_read(b, buf, 1, -1), -ECANCELED);
    CHECK_EQ(aco_rt_bufio_fill(b, -1), -ECANCELED);
    CHECK_EQ(aco_rt_bufio_buffered(b), 0);
    CHECK_EQ(aco_rt_cancel_shield(1), 0);
    CHECK_EQ(aco_rt_bufio_peek(b, 11, &v, in_ms(5000)), 11);
    CHECK_EQ(aco_rt_cancel_shield(0), 1);
    CHECK_EQ(aco_rt_bufio_buffered(b), 11);
    CHECK_EQ(aco_rt_bufio_read(b, buf, 1, -1), -ECANCELED);
    CHECK_EQ(aco_rt_bufio_read(b, buf, 1, 0), -ECANCELED);
    CHECK_EQ(aco_rt_bufio_read_full(b, buf, 3, -1), -ECANCELED);
    CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 0, &v, -1), -ECANCELED);
    CHECK_EQ(aco_rt_bufio_peek(b, 0, &v, -1), -ECANCELED);
    CHECK_EQ(aco_rt_bufio_peek(b, 3, &v, -1), -ECANCELED);
    CHECK_EQ(aco_rt_bufio_write(b, "x", 1, -1), -ECANCELED);
    CHECK_EQ(aco_rt_bufio_unflushed(b), 0);
    CHECK_EQ(aco_rt_bufio_flush(b, -1), -ECANCELED);
    CHECK_EQ(aco_rt_bufio_flush_more(b, -1), -ECANCELED);
    CHECK_EQ(aco_rt_bufio_buffered(b), 11);
    CHECK_EQ(aco_rt_bufio_consume(b, 12), -EINVAL);
    CHECK_EQ(aco_rt_bufio_consume(b, 6), 0);
    CHECK_EQ(aco_rt_bufio_buffered(b), 5);
    CHECK_EQ(aco_rt_bufio_fd(b), c[0]);
    /* the bytes are still the bufio's: a shielded read has them */
    CHECK_EQ(aco_rt_cancel_shield(1), 0);
    CHECK_EQ(aco_rt_bufio_read(b, buf, sizeof(buf), 0), 5);
    CHECK_EQ(memcmp(buf, "world", 5), 0);
    CHECK_EQ(aco_rt_cancel_shield(0), 1);
    aco_rt_bufio_free(b);
    close2(c);
}
static void cancelled_co(void* arg) {
    (void)arg;
    case_cancelled();
}

/* ---- arguments on a live bufio ---- */
static void case_args(int k) {
    int c[2];
    conn(k, 0, c);
    aco_rt_bufio_t* b = aco_rt_bufio_new(c[0], 16, 16);
    CHECK(b != NULL);
    CHECK_EQ(aco_rt_bufio_fd(b), c[0]);
    CHECK_EQ(aco_rt_bufio_buffered(b), 0);
    CHECK_EQ(aco_rt_bufio_unflushed(b), 0);
    const char* v = NULL;
    char buf[32];
    CHECK_EQ(aco_rt_bufio_read(b, NULL, 1, in_ms(5000)), -EFAULT);
    CHECK_EQ(aco_rt_bufio_read_full(b, NULL, 1, in_ms(5000)), -EFAULT);
    CHECK_EQ(aco_rt_bufio_read_full(b, NULL, 100, in_ms(5000)), -EFAULT);
    if (k != K_PIPE) {
        CHECK_EQ(aco_rt_bufio_write(b, NULL, 1, in_ms(5000)), -EFAULT);
        CHECK_EQ(aco_rt_bufio_write(b, NULL, 100, in_ms(5000)), -EFAULT);
        CHECK_EQ(aco_rt_bufio_unflushed(b), 0);
    }
    /* n 0 with nothing there: 0 at once (a wait would end in
     * -ETIMEDOUT at the deadline, 5 s off: no byte ever comes) */
    CHECK_EQ(aco_rt_bufio_read(b, buf, 0, in_ms(5000)), 0);
    CHECK_EQ(aco_rt_bufio_read(b, NULL, 0, in_ms(5000)), 0);
    CHECK_EQ(aco_rt_bufio_read_full(b, buf, 0, in_ms(5000)), 0);
    CHECK_EQ(aco_rt_bufio_read_full(b, NULL, 0, in_ms(5000)), 0);
    CHECK_EQ(aco_rt_bufio_peek(b, 0, &v, in_ms(5000)), 0);
    CHECK_EQ(aco_rt_bufio_write(b, NULL, 0, in_ms(5000)), 0);
    CHECK_EQ(aco_rt_bufio_write(b, buf, 0, in_ms(5000)), 0);
    CHECK_EQ(aco_rt_bufio_unflushed(b), 0);
    CHECK_EQ(aco_rt_bufio_consume(b, 0), 0);
    CHECK_EQ(aco_rt_bufio_consume(b, 1), -EINVAL);
    /* limits and peeks: up to the read buffer's size */
    CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 17, &v, in_ms(5000)), -EINVAL);
    CHECK_EQ(aco_rt_bufio_read_until(b, '\n', SIZE_MAX, &v, in_ms(5000)), -EINVAL);
    CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 0, NULL, in_ms(5000)), -EINVAL);
    CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 16, NULL, in_ms(5000)), -EINVAL);
    CHECK_EQ(aco_rt_bufio_peek(b, 17, &v, in_ms(5000)), -EINVAL);
    CHECK_EQ(aco_rt_bufio_peek(b, SIZE_MAX, &v, in_ms(5000)), -EINVAL);
    CHECK_EQ(aco_rt_bufio_peek(b, 1, NULL, in_ms(5000)), -EINVAL);
    CHECK_EQ(aco_rt_bufio_peek(b, 0, NULL, in_ms(5000)), -EINVAL);
    /* bytes at hand: the refusals take none of them */
    CHECK_EQ(write(c[1], "line\nrest", 9), 9);
    CHECK_EQ(aco_rt_bufio_peek(b, 9, &v, in_ms(5000)), 9);
    CHECK_EQ(memcmp(v, "line\nrest", 9), 0);
    CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 17, &v, in_ms(5000)), -EINVAL);
    CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 0, NULL, in_ms(5000)), -EINVAL);
    CHECK_EQ(aco_rt_bufio_peek(b, 17, &v, in_ms(5000)), -EINVAL);
    CHECK_EQ(aco_rt_bufio_read(b, NULL, 3, in_ms(5000)), -EFAULT);
    CHECK_EQ(aco_rt_bufio_read_full(b, NULL, 3, in_ms(5000)), -EFAULT);
    CHECK_EQ(aco_rt_bufio_consume(b, 10), -EINVAL);
    CHECK_EQ(aco_rt_bufio_buffered(b), 9);
    CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 16, &v, 0), 5);
    CHECK_EQ(memcmp(v, "line\n", 5), 0);
    CHECK_EQ(aco_rt_bufio_read(b, buf, sizeof(buf), 0), 4);
    CHECK_EQ(memcmp(buf, "rest", 4), 0);
    aco_rt_bufio_free(b);
    close2(c);
}

/* ---- sizes ---- */
static void case_sizes(void) {
    int c[2];
    conn(K_UNIX, 0, c);
    errno = 0;
    CHECK(aco_rt_bufio_new(-1, 0, 0) == NULL);
    CHECK_EQ(errno, EINVAL);
    errno = 0;
    CHECK(aco_rt_bufio_new(INT_MIN, 16, 16) == NULL);
    CHECK_EQ(errno, EINVAL);
    errno = 0;
    CHECK(aco_rt_bufio_new(c[0], SIZE_MAX, 0) == NULL);
    CHECK_EQ(errno, EINVAL);
    errno = 0;
    CHECK(aco_rt_bufio_new(c[0], 0, SIZE_MAX) == NULL);
    CHECK_EQ(errno, EINVAL);
    errno = 0;
    CHECK(aco_rt_bufio_new(c[0], ((size_t)1 << 30) + 1, 1) == NULL);
    CHECK_EQ(errno, EINVAL);
    errno = 0;
    CHECK(aco_rt_bufio_new(c[0], 1, ((size_t)1 << 30) + 1) == NULL);
    CHECK_EQ(errno, EINVAL);

    /* 0: 16 KiB each.  The read side: one fill takes 16384 of 20000
     * waiting, then -ENOBUFS; limits and peeks up to 16384. */
    static char big[20000], got[20000];
    for (size_t i = 0; i < sizeof(big); i++) big[i] = (char)pat_byte(i, 1);
    aco_rt_bufio_t* b = aco_rt_bufio_new(c[0], 0, 0);
    CHECK(b != NULL);
    CHECK_EQ(send(c[1], big, sizeof(big), 0), (ssize_t)sizeof(big));
    const char* v;
    CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 16385, &v, in_ms(5000)), -EINVAL);
    CHECK_EQ(aco_rt_bufio_peek(b, 16385, &v, in_ms(5000)), -EINVAL);
    CHECK_EQ(aco_rt_bufio_fill(b, in_ms(5000)), 16384);
    CHECK_EQ(aco_rt_bufio_fill(b, in_ms(5000)), -ENOBUFS);
    CHECK_EQ(aco_rt_bufio_buffered(b), 16384);
    CHECK_EQ(aco_rt_bufio_peek(b, 16384, &v, 0), 16384);
    CHECK_EQ(memcmp(v, big, 16384), 0);
    CHECK_EQ(aco_rt_bufio_read_full(b, got, sizeof(got), in_ms(5000)), (ssize_t)sizeof(got));
    CHECK_EQ(memcmp(got, big, sizeof(big)), 0);
    /* the write side: 16384 bytes stay, one more sends */
    CHECK_EQ(aco_rt_bufio_write(b, big, 16384, in_ms(5000)), 16384);
    CHECK_EQ(aco_rt_bufio_unflushed(b), 16384);
    CHECK_EQ(recv(c[1], got, sizeof(got), MSG_DONTWAIT), -1);
    CHECK_EQ(errno, EAGAIN);
    CHECK_EQ(aco_rt_bufio_write(b, big + 16384, 1, in_ms(5000)), 1);
    size_t un = aco_rt_bufio_unflushed(b);
    CHECK_LE(un, 16384);
    size_t sent = drain(c[1]);
    CHECK_EQ(sent + un, 16385);
    CHECK_EQ(aco_rt_bufio_flush(b, in_ms(5000)), 0);
    CHECK_EQ(aco_rt_bufio_unflushed(b), 0);
    CHECK_EQ(drain(c[1]), un);
    aco_rt_bufio_free(b);

    /* 1 byte each: read_until looks at rsize + 1 */
    b = aco_rt_bufio_new(c[0], 1, 1);
    CHECK(b != NULL);
    CHECK_EQ(aco_rt_bufio_peek(b, 2, &v, 0), -EINVAL);
    CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 2, &v, 0), -EINVAL);
    CHECK_EQ(send(c[1], "a\n\nbc\n", 6, 0), 6);
    CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 0, &v, in_ms(5000)), -EMSGSIZE);
    CHECK_GE(aco_rt_bufio_buffered(b), 1);
    CHECK_EQ(aco_rt_bufio_peek(b, 1, &v, 0), (ssize_t)aco_rt_bufio_buffered(b));
    CHECK_EQ(v[0], 'a');
    char t[8];
    CHECK_EQ(aco_rt_bufio_read_full(b, t, 1, in_ms(5000)), 1);
    CHECK_EQ(t[0], 'a');
    CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 1, &v, in_ms(5000)), 1);
    CHECK_EQ(v[0], '\n');
    CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 0, &v, in_ms(5000)), 1);
    CHECK_EQ(v[0], '\n');
    /* n >= rsize: the buffered ones if any, else straight into buf,
     * more than the buffer at once */
    size_t held = aco_rt_bufio_buffered(b);
    CHECK_LE(held, 2);
    CHECK_EQ(aco_rt_bufio_read(b, t, sizeof(t), in_ms(5000)), held ? (ssize_t)held : 3);
    if (held) CHECK_EQ(aco_rt_bufio_read(b, t + held, sizeof(t) - held, in_ms(5000)), 3 - (ssize_t)held);
    CHECK_EQ(memcmp(t, "bc\n", 3), 0);
    CHECK_EQ(aco_rt_bufio_buffered(b), 0);
    CHECK_EQ(aco_rt_bufio_write(b, "x", 1, -1), 1);
    CHECK_EQ(aco_rt_bufio_unflushed(b), 1);
    CHECK_EQ(recv(c[1], t, sizeof(t), MSG_DONTWAIT), -1);
    CHECK_EQ(aco_rt_bufio_write(b, "yz", 2, in_ms(5000)), 2);
    CHECK_EQ(aco_rt_bufio_flush(b, in_ms(5000)), 0);
    CHECK_EQ(recv(c[1], t, sizeof(t), MSG_DONTWAIT), 3);
    CHECK_EQ(memcmp(t, "xyz", 3), 0);
    aco_rt_bufio_free(b);

    /* 1 GiB is not over 1 GiB: made (or ENOMEM where the address space
     * is short), and it works.  (Not under memcheck or a sanitizer, whose
     * allocators die of an allocation this size rather than say ENOMEM,
     * nor on 32 bits.) */
#if !SLOW
    errno = 0;
    b = sizeof(void*) == 8 ? aco_rt_bufio_new(c[0], (size_t)1 << 30, 1) : NULL;
    if (sizeof(void*) < 8) {
    } else if (b == NULL) {
        CHECK_EQ(errno, ENOMEM);
    } else {
        CHECK_EQ(send(c[1], "huge\n", 5, 0), 5);
        CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 0, &v, in_ms(5000)), 5);
        CHECK_EQ(memcmp(v, "huge\n", 5), 0);
        CHECK_EQ(aco_rt_bufio_write(b, "ok", 2, in_ms(5000)), 2);
        CHECK_EQ(aco_rt_bufio_flush(b, in_ms(5000)), 0);
        CHECK_EQ(recv(c[1], t, sizeof(t), 0), 2);
        aco_rt_bufio_free(b);
    }
#endif
    close2(c);
}

/* ---- a read of n >= rsize goes straight into buf; a smaller one takes
 * one read into the buffer ---- */
static void wait_avail(int fd, int n) {
    int64_t dl = in_ms(5000);
    int a = 0;
    while (ioctl(fd, FIONREAD, &a) == 0 && a < n && aco_rt_now() < dl) aco_rt_sleep(1 * MS);
    CHECK_GE(a, n);
}
static void case_straight(int k) {
    int c[2];
    conn(k, 0, c);
    aco_rt_bufio_t* b = aco_rt_bufio_new(c[0], 16, 16);
    CHECK(b != NULL);
    char src[100], buf[200];
    for (size_t i = 0; i < sizeof(src); i++) src[i] = (char)pat_byte(i, 2);
    CHECK_EQ(write(c[1], src, 100), 100);
    wait_avail(c[0], 100);
    /* one read of up to 200 bytes: all 100 (a pipe's and a socket's one
     * write), none left in the buffer */
    CHECK_EQ(aco_rt_bufio_read(b, buf, sizeof(buf), in_ms(5000)), 100);
    CHECK_EQ(memcmp(buf, src, 100), 0);
    CHECK_EQ(aco_rt_bufio_buffered(b), 0);
    /* n < rsize: at most n given, the rest of that read buffered */
    CHECK_EQ(write(c[1], src, 100), 100);
    wait_avail(c[0], 100);
    CHECK_EQ(aco_rt_bufio_read(b, buf, 10, in_ms(5000)), 10);
    CHECK_EQ(memcmp(buf, src, 10), 0);
    CHECK_LE(aco_rt_bufio_buffered(b), 6);
    size_t at = 10;
    while (at < 100) {
        ssize_t r = aco_rt_bufio_read(b, buf, 7, in_ms(5000));
        CHECK_GE(r, 1);
        CHECK_LE(r, 7);
        CHECK_EQ(memcmp(buf, src + at, (size_t)r), 0);
        at += (size_t)r;
    }
    CHECK_EQ(at, 100);
    CHECK_EQ(aco_rt_bufio_buffered(b), 0);
    aco_rt_bufio_free(b);
    close2(c);
}

/* ---- a view stays valid across calls that neither read nor consume: an
 * echo writes the view itself, flushes, counts ---- */
static void case_views(int k) {
    int c[2];
    conn(k, 0, c);
    aco_rt_bufio_t* b = aco_rt_bufio_new(c[0], 64, 8);
    CHECK(b != NULL);
    CHECK_EQ(write(c[1], "first line\nsecond line is longer\nthird\n", 39), 39);
    const char* v;
    char copy[64];
    for (int i = 0; i < 3; i++) {
        ssize_t n = aco_rt_bufio_read_until(b, '\n', 0, &v, in_ms(5000));
        CHECK_GT(n, 0);
        memcpy(copy, v, (size_t)n);
        CHECK_EQ(aco_rt_bufio_write(b, v, (size_t)n, in_ms(5000)), n);  /* over wsize: sent */
        CHECK_EQ(aco_rt_bufio_write(b, v, 1, in_ms(5000)), 1);
        CHECK_EQ(aco_rt_bufio_flush(b, in_ms(5000)), 0);
        CHECK_EQ(aco_rt_bufio_flush_more(b, in_ms(5000)), 0);
        (void)aco_rt_bufio_buffered(b);
        (void)aco_rt_bufio_unflushed(b);
        (void)aco_rt_bufio_fd(b);
        CHECK_EQ(memcmp(v, copy, (size_t)n), 0);
        char back[80];
        size_t got = 0;
        while (got < (size_t)n + 1) {
            ssize_t r = aco_rt_recv(c[1], back + got, sizeof(back) - got, 0, in_ms(5000));
            CHECK_GT(r, 0);
            got += (size_t)r;
        }
        CHECK_EQ(got, (size_t)n + 1);
        CHECK_EQ(memcmp(back, copy, (size_t)n), 0);
        CHECK_EQ(back[n], copy[0]);
    }
    /* a peek's view too, up to consume */
    CHECK_EQ(write(c[1], "abcdef", 6), 6);
    CHECK_EQ(aco_rt_bufio_peek(b, 6, &v, in_ms(5000)), 6);
    CHECK_EQ(aco_rt_bufio_write(b, "0123456789", 10, in_ms(5000)), 10);
    CHECK_EQ(aco_rt_bufio_flush(b, in_ms(5000)), 0);
    CHECK_EQ(memcmp(v, "abcdef", 6), 0);
    CHECK_EQ(aco_rt_bufio_consume(b, 6), 0);
    CHECK_EQ(drain(c[1]), 10);
    aco_rt_bufio_free(b);
    close2(c);
}

/* ---- free: unflushed bytes dropped, fd not closed ---- */
static void case_free(int k) {
    int c[2];
    conn(k, 1, c);
    aco_rt_bufio_t* b = aco_rt_bufio_new(c[0], 16, 64);
    CHECK(b != NULL);
    CHECK_EQ(aco_rt_bufio_write(b, "never sent", 10, in_ms(5000)), 10);
    CHECK_EQ(aco_rt_bufio_unflushed(b), 10);
    aco_rt_bufio_free(b);
    CHECK_GE(fcntl(c[0], F_GETFD), 0);
    struct pollfd p = {c[1], POLLIN, 0};
    CHECK_EQ(poll(&p, 1, 50), 0);          /* no byte, no end */
    /* the descriptor still works */
    CHECK_EQ(aco_rt_write(c[0], "ok", 2, in_ms(5000)), 2);
    char t[16];
    CHECK_EQ(aco_rt_read(c[1], t, sizeof(t), in_ms(5000)), 2);
    CHECK_EQ(memcmp(t, "ok", 2), 0);
    close2(c);
}

/* ---- -EBADF: the writer kept broken (what it held never sent, a new
 * file under the number too); the reader goes on ---- */
static void case_ebadf(int k) {
    int c[2];
    conn(k, 1, c);
    int d[2];
    conn(K_UNIX, 0, d);                 /* (made first: not under num) */
    int num = c[0];
    CHECK_EQ(close(c[0]), 0);
    c[0] = -1;
    aco_rt_bufio_t* b = aco_rt_bufio_new(num, 16, 16);
    CHECK(b != NULL);
    const char* v;
    char t[64];
    CHECK_EQ(aco_rt_bufio_read(b, t, 1, in_ms(5000)), -EBADF);
    CHECK_EQ(aco_rt_bufio_read(b, t, 64, in_ms(5000)), -EBADF);
    CHECK_EQ(aco_rt_bufio_read_full(b, t, 4, in_ms(5000)), -EBADF);
    CHECK_EQ(aco_rt_bufio_read_full(b, t, 40, in_ms(5000)), -EBADF);
    CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 0, &v, in_ms(5000)), -EBADF);
    CHECK_EQ(aco_rt_bufio_peek(b, 1, &v, in_ms(5000)), -EBADF);
    CHECK_EQ(aco_rt_bufio_fill(b, in_ms(5000)), -EBADF);
    CHECK_EQ(aco_rt_bufio_write(b, "held", 4, in_ms(5000)), 4);      /* no system call */
    CHECK_EQ(aco_rt_bufio_flush(b, in_ms(5000)), -EBADF);
    /* a new connection under the number: the writer stays broken */
    CHECK_EQ(dup2(d[0], num), num);
    CHECK_EQ(aco_rt_bufio_flush(b, in_ms(5000)), -EBADF);
    CHECK_EQ(aco_rt_bufio_flush_more(b, in_ms(5000)), -EBADF);
    CHECK_EQ(aco_rt_bufio_write(b, "x", 1, in_ms(5000)), -EBADF);
    CHECK_EQ(aco_rt_bufio_write(b, t, sizeof(t), in_ms(5000)), -EBADF);
    CHECK_EQ(aco_rt_bufio_flush(b, in_ms(5000)), -EBADF);
    CHECK_EQ(recv(d[1], t, sizeof(t), MSG_DONTWAIT), -1);    /* never sent */
    CHECK_EQ(errno, EAGAIN);
    /* the reading side: a failed read consumed nothing, kept nothing */
    CHECK_EQ(send(d[1], "new\n", 4, 0), 4);
    CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 0, &v, in_ms(5000)), 4);
    CHECK_EQ(memcmp(v, "new\n", 4), 0);
    aco_rt_bufio_free(b);
    CHECK_EQ(recv(d[1], t, sizeof(t), MSG_DONTWAIT), -1);
    CHECK_EQ(errno, EAGAIN);
    CHECK_EQ(close(num), 0);
    close2(d);
    close2(c);

    /* numbers of 2^24 and above: -ENOMEM, as aco_rt_read's */
    b = aco_rt_bufio_new(1 << 24, 0, 0);
    CHECK(b != NULL);
    CHECK_EQ(aco_rt_bufio_fd(b), 1 << 24);
    CHECK_EQ(aco_rt_bufio_read(b, t, 1, in_ms(5000)), -ENOMEM);
    CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 0, &v, in_ms(5000)), -ENOMEM);
    CHECK_EQ(aco_rt_bufio_write(b, "x", 1, in_ms(5000)), 1);
    CHECK_EQ(aco_rt_bufio_flush(b, in_ms(5000)), -ENOMEM);
    /* -ENOMEM does not break the writer ("Writing"): the byte stays, the
     * next write is buffered beside it, a later flush tries again */
    CHECK_EQ(aco_rt_bufio_unflushed(b), 1);
    CHECK_EQ(aco_rt_bufio_write(b, "y", 1, in_ms(5000)), 1);
    CHECK_EQ(aco_rt_bufio_unflushed(b), 2);
    CHECK_EQ(aco_rt_bufio_flush(b, in_ms(5000)), -ENOMEM);
    CHECK_EQ(aco_rt_bufio_unflushed(b), 2);
    aco_rt_bufio_free(b);
}

/* ---- aco_rt_close from another co under a parked read: -EBADF, the part
 * of a line that came kept ---- */
static aco_rt_bufio_t* cu_b;
static ssize_t cu_res;
static void cu_reader(void* arg) {
    (void)arg;
    const char* v;
    cu_res = 1;
    cu_res = aco_rt_bufio_read_until(cu_b, '\n', 0, &v, in_ms(10000));
}
static void case_close_under(int k) {
    int c[2];
    conn(k, 0, c);
    cu_b = aco_rt_bufio_new(c[0], 64, 64);
    CHECK(cu_b != NULL);
    CHECK_EQ(write(c[1], "part", 4), 4);
    aco_rt_co_t* r = go(cu_reader, NULL);
    while (aco_rt_bufio_buffered(cu_b) < 4) aco_rt_sleep(1 * MS);
    aco_rt_sleep(5 * MS);
    CHECK_EQ(cu_res, 1);                       /* parked */
    int64_t t0 = aco_rt_now();
    CHECK_EQ(aco_rt_close(c[0]), 0);
    join(r);
    CHECK_EQ(cu_res, -EBADF);
    CHECK_LT(aco_rt_now() - t0, 1000 * MS);
    CHECK_EQ(aco_rt_bufio_buffered(cu_b), 4);
    const char* v;
    CHECK_EQ(aco_rt_bufio_peek(cu_b, 4, &v, 0), 4);
    CHECK_EQ(memcmp(v, "part", 4), 0);
    aco_rt_bufio_free(cu_b);
    c[0] = -1;
    close2(c);
}

/* ---- blocking descriptors: the co parks (a ticker runs meanwhile), the
 * flags stay as they were ---- */
static volatile int tick_on;
static int ticks;
static void ticker(void* arg) {
    (void)arg;
    while (tick_on) {
        ticks++;
        aco_rt_sleep(2 * MS);
    }
}
static int bl_peer;
static void late_writer(void* arg) {
    (void)arg;
    aco_rt_sleep(60 * MS);
    CHECK_EQ(write(bl_peer, "late\n", 5), 5);
}
static void late_drainer(void* arg) {
    size_t want = *(size_t*)arg;
    aco_rt_sleep(60 * MS);
    static char t[65536];
    size_t got = 0;
    while (got < want) {
        ssize_t r = aco_rt_read(bl_peer, t, sizeof(t), in_ms(5000));
        CHECK_GT(r, 0);
        got += (size_t)r;
    }
    CHECK_EQ(got, want);
}
static void case_blocking(int k) {
    int c[2];
    conn(k, 0, c);
    int f0 = raw_flags(c[0]);
    CHECK_EQ(f0 & O_NONBLOCK, 0);
    aco_rt_bufio_t* b = aco_rt_bufio_new(c[0], 32, 32);
    tick_on = 1;
    ticks = 0;
    aco_rt_co_t* t = go(ticker, NULL);
    bl_peer = c[1];
    aco_rt_co_t* w = go(late_writer, NULL);
    const char* v;
    CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 0, &v, in_ms(5000)), 5);
    CHECK_EQ(memcmp(v, "late\n", 5), 0);
    CHECK_GE(ticks, 5);                 /* the thread ran the ticker */
    CHECK_EQ(raw_flags(c[0]), f0);
    join(w);
    aco_rt_bufio_free(b);
    close2(c);

    /* the writing side: a full blocking descriptor parks the flush */
    conn(k, 1, c);
    f0 = raw_flags(c[0]);
    CHECK_EQ(f0 & O_NONBLOCK, 0);
    small_bufs(c[0], c[1]);
    size_t held = fill_up(c[0], NULL);
    b = aco_rt_bufio_new(c[0], 32, 32);
    CHECK_EQ(aco_rt_bufio_write(b, "tail", 4, in_ms(5000)), 4);
    ticks = 0;
    bl_peer = c[1];
    size_t want = held + 4;
    w = go(late_drainer, &want);
    CHECK_EQ(aco_rt_bufio_flush(b, in_ms(5000)), 0);
    CHECK_GE(ticks, 5);
    CHECK_EQ(raw_flags(c[0]), f0);
    join(w);
    tick_on = 0;
    join(t);
    aco_rt_bufio_free(b);
    close2(c);
}

/* ---- flush_more on TCP: a partial segment held back until the next
 * send without it (MSG_MORE); a plain flush sends at once ---- */
static void case_more(void) {
    int c[2];
    conn(K_TCP, 1, c);
    aco_rt_bufio_t* b = aco_rt_bufio_new(c[0], 16, 64);
    char t[32];
    CHECK_EQ(aco_rt_bufio_write(b, "now", 3, in_ms(5000)), 3);
    CHECK_EQ(aco_rt_bufio_flush(b, in_ms(5000)), 0);
    CHECK_EQ(aco_rt_read(c[1], t, sizeof(t), in_ms(5000)), 3);
    CHECK_EQ(aco_rt_bufio_write(b, "head", 4, in_ms(5000)), 4);
    CHECK_EQ(aco_rt_bufio_flush_more(b, in_ms(5000)), 0);
    CHECK_EQ(aco_rt_bufio_unflushed(b), 0);
    /* (over loopback a segment sent is there when send(2) returns) */
    CHECK_EQ(recv(c[1], t, sizeof(t), MSG_DONTWAIT), -1);
    CHECK_EQ(errno, EAGAIN);
    CHECK_EQ(aco_rt_bufio_write(b, "body", 4, in_ms(5000)), 4);
    CHECK_EQ(aco_rt_bufio_flush(b, in_ms(5000)), 0);
    size_t got = 0;
    while (got < 8) {
        ssize_t r = aco_rt_read(c[1], t + got, sizeof(t) - got, in_ms(5000));
        CHECK_GT(r, 0);
        got += (size_t)r;
    }
    CHECK_EQ(got, 8);
    CHECK_EQ(memcmp(t, "headbody", 8), 0);
    aco_rt_bufio_free(b);
    close2(c);
}

static void main_co(void* arg) {
    (void)arg;
    aco_rt_co_t* co = go(cancelled_co, NULL);
    join(co);
    static char label[32];
    for (int k = 0; k < NKIND; k++) {
        snprintf(label, sizeof(label), "%s %s", test_backend_str(test_backend_id), kind_name[k]);
        test_backend_label = label;
        case_args(k);
        case_straight(k);
        case_free(k);
        case_ebadf(k);
        case_close_under(k);
        case_blocking(k);
        if (k != K_PIPE) case_views(k);
    }
    test_backend_label = test_backend_str(test_backend_id);
    case_sizes();
    case_more();
}

/* ---- outside cos: -EPERM with bytes at hand, nothing taken; consume and
 * the counts work there ---- */
static int oc_c[2];
static aco_rt_bufio_t* oc_b;
static void oc_fill(void* arg) {
    (void)arg;
    const char* v;
    CHECK_EQ(send(oc_c[1], "abc\ndef", 7, 0), 7);
    CHECK_EQ(aco_rt_bufio_peek(oc_b, 7, &v, in_ms(5000)), 7);
    CHECK_EQ(aco_rt_bufio_write(oc_b, "held", 4, in_ms(5000)), 4);
}
static void outside_checks(aco_rt_bufio_t* b) {
    const char* v;
    char t[8];
    nulls_all(-1);
    CHECK_EQ(aco_rt_bufio_read(b, t, 1, -1), -EPERM);
    CHECK_EQ(aco_rt_bufio_read(b, t, 1, 0), -EPERM);
    CHECK_EQ(aco_rt_bufio_read_full(b, t, 1, -1), -EPERM);
    CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 0, &v, -1), -EPERM);
    CHECK_EQ(aco_rt_bufio_peek(b, 1, &v, -1), -EPERM);
    CHECK_EQ(aco_rt_bufio_peek(b, 0, &v, 0), -EPERM);
    CHECK_EQ(aco_rt_bufio_fill(b, -1), -EPERM);
    CHECK_EQ(aco_rt_bufio_write(b, "x", 1, -1), -EPERM);
    CHECK_EQ(aco_rt_bufio_flush(b, -1), -EPERM);
    CHECK_EQ(aco_rt_bufio_flush_more(b, -1), -EPERM);
    CHECK_EQ(aco_rt_bufio_buffered(b), 7);
    CHECK_EQ(aco_rt_bufio_unflushed(b), 4);
    CHECK_EQ(aco_rt_bufio_fd(b), oc_c[0]);
}
static void* oc_thread(void* arg) {
    outside_checks(arg);
    CHECK_EQ(aco_rt_bufio_consume(arg, 4), 0);        /* never blocks: works */
    CHECK_EQ(aco_rt_bufio_buffered(arg), 3);
    return NULL;
}
static void oc_rest(void* arg) {
    (void)arg;
    char t[8];
    CHECK_EQ(aco_rt_bufio_read(oc_b, t, sizeof(t), 0), 3);
    CHECK_EQ(memcmp(t, "def", 3), 0);
    CHECK_EQ(aco_rt_bufio_flush(oc_b, in_ms(5000)), 0);
    CHECK_EQ(aco_rt_read(oc_c[1], t, sizeof(t), in_ms(5000)), 4);
    CHECK_EQ(memcmp(t, "held", 4), 0);
}
static void* oc_maker(void* arg) {
    (void)arg;
    return aco_rt_bufio_new(oc_c[0], 64, 64);       /* from any thread */
}
static void* oc_freer(void* arg) {
    aco_rt_bufio_free(arg);
    return NULL;
}
static void case_outside(aco_rt_sched_t* s) {
    conn(K_UNIX, 0, oc_c);
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, oc_maker, NULL), 0);
    void* made;
    CHECK_EQ(pthread_join(th, &made), 0);
    oc_b = made;
    CHECK(oc_b != NULL);
    test_go(s, oc_fill, NULL);
    /* the scheduler's thread outside its cos, and a thread with none */
    outside_checks(oc_b);
    CHECK_EQ(pthread_create(&th, NULL, oc_thread, oc_b), 0);
    CHECK_EQ(pthread_join(th, NULL), 0);
    test_go(s, oc_rest, NULL);
    CHECK_EQ(pthread_create(&th, NULL, oc_freer, oc_b), 0);
    CHECK_EQ(pthread_join(th, NULL), 0);
    close2(oc_c);
}

/* ---- one bufio moved between cos of two pool threads mid-stream: the
 * buffered bytes go with it; the peer a plain thread ---- */
static aco_rt_chan_t* mv_ch;
static int mv_c[2];
static void mv_first(void* arg) {
    (void)arg;
    aco_rt_bufio_t* b = aco_rt_bufio_new(mv_c[0], 256, 256);
    CHECK(b != NULL);
    const char* v;
    CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 0, &v, in_ms(5000)), 4);
    CHECK_EQ(memcmp(v, "one\n", 4), 0);
    CHECK_EQ(aco_rt_bufio_write(b, "from A;", 7, in_ms(5000)), 7);
    /* (both lines came in one write: the second is buffered by now, or
     * waits in the socket) */
    CHECK_EQ(aco_rt_chan_send(mv_ch, &b, in_ms(5000)), 0);
}
static void mv_second(void* arg) {
    (void)arg;
    aco_rt_bufio_t* b;
    CHECK_EQ(aco_rt_chan_recv(mv_ch, &b, in_ms(5000)), 0);
    CHECK_EQ(aco_rt_bufio_unflushed(b), 7);
    const char* v;
    CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 0, &v, in_ms(5000)), 4);
    CHECK_EQ(memcmp(v, "two\n", 4), 0);
    CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 0, &v, in_ms(5000)), 6);
    CHECK_EQ(memcmp(v, "three\n", 6), 0);
    CHECK_EQ(aco_rt_bufio_write(b, "from B\n", 7, in_ms(5000)), 7);
    CHECK_EQ(aco_rt_bufio_flush(b, in_ms(5000)), 0);
    aco_rt_bufio_free(b);
}
static void* mv_peer(void* arg) {
    (void)arg;
    CHECK_EQ(write(mv_c[1], "one\ntwo\n", 8), 8);
    usleep(30000);
    CHECK_EQ(write(mv_c[1], "three\n", 6), 6);
    char t[32];
    size_t got = 0;
    while (got < 14) {
        ssize_t r = read(mv_c[1], t + got, sizeof(t) - got);
        CHECK_GT(r, 0);
        got += (size_t)r;
    }
    CHECK_EQ(got, 14);
    CHECK_EQ(memcmp(t, "from A;from B\n", 14), 0);
    return NULL;
}
static void case_move(int backend) {
    aco_rt_pool_opts_t o;
    memset(&o, 0, sizeof(o));
    o.threads = 2;
    o.sched.backend = backend;
    aco_rt_pool_t* p = aco_rt_pool_new(&o);
    CHECK(p != NULL);
    for (int k = 0; k < 2; k++) {
        conn(k == 0 ? K_UNIX : K_TCP, 0, mv_c);
        mv_ch = aco_rt_chan_new(sizeof(aco_rt_bufio_t*), 0);
        CHECK(mv_ch != NULL);
        pthread_t th;
        CHECK_EQ(pthread_create(&th, NULL, mv_peer, NULL), 0);
        aco_rt_co_t* a = aco_rt_spawn(aco_rt_pool_sched(p, 0), mv_first, NULL);
        aco_rt_co_t* b = aco_rt_spawn(aco_rt_pool_sched(p, 1), mv_second, NULL);
        CHECK(a && b);
        CHECK_EQ(aco_rt_detach(a), 0);
        CHECK_EQ(aco_rt_detach(b), 0);
        CHECK_EQ(aco_rt_pool_wait(p, ACO_RT_POOL_DRAIN, in_ms(10000)), 0);
        CHECK_EQ(pthread_join(th, NULL), 0);
        CHECK_EQ(aco_rt_chan_free(mv_ch), 0);
        close2(mv_c);
    }
    CHECK_EQ(aco_rt_pool_free(p), 0);
}

static int one_backend(int backend) {
    aco_rt_sched_t* s = test_sched_on(backend, NULL);
    test_go(s, main_co, NULL);
    case_outside(s);
    aco_rt_sched_free(s);
    case_move(backend);
    return 0;
}

int main(void) {
    test_watchdog();
    signal(SIGPIPE, SIG_DFL);
    /* no scheduler at all: NULL first, then -EPERM */
    nulls_all(-1);
    int c[2];
    conn(K_UNIX, 0, c);
    aco_rt_bufio_t* b = aco_rt_bufio_new(c[0], 0, 0);
    CHECK(b != NULL);
    char t[4];
    const char* v;
    CHECK_EQ(send(c[1], "zz", 2, 0), 2);
    CHECK_EQ(aco_rt_bufio_read(b, t, 1, -1), -EPERM);
    CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 0, &v, 0), -EPERM);
    CHECK_EQ(aco_rt_bufio_fill(b, -1), -EPERM);
    CHECK_EQ(aco_rt_bufio_write(b, "x", 1, -1), -EPERM);
    CHECK_EQ(aco_rt_bufio_unflushed(b), 0);
    CHECK_EQ(aco_rt_bufio_buffered(b), 0);
    aco_rt_bufio_free(b);
    CHECK_EQ(recv(c[0], t, sizeof(t), MSG_DONTWAIT), 2);     /* nothing taken */
    close2(c);
    test_backends_apart(one_backend);
    printf("test_bufio_bb_sock: ok\n");
    return 0;
}
