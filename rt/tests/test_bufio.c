/* test_bufio.c - the buffered reader and writer (aco_rt.h, "Buffered I/O")
 * taken at the header's word: every call, input split at every byte over a
 * socketpair fed by another co, limits, end of file in the middle,
 * deadlines, cancel (and a shielded co's goodbye), the writer's kept error,
 * a reset after part of a read_full, MSG_MORE on a socket and a pipe,
 * reads into stack buffers of cos sharing one share stack, bufios freed
 * and made again in sizes that change; on both backends. */
#define _GNU_SOURCE
#include "rt_test.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>

/* ------------------------------------------------------------------------ */
/* A feeder co: data[0, split), a pause, data[split, len), then (if eof) the
 * write side shut.                                                         */
/* ------------------------------------------------------------------------ */

typedef struct {
    int fd;
    const char* data;
    size_t len, split;
    int64_t pause_ns;
    int eof;
    int bytewise;               /* one byte a write, a pause between */
} feed_t;

static void feeder(void* arg) {
    feed_t* f = arg;
    if (f->bytewise) {
        for (size_t i = 0; i < f->len; i++) {
            CHECK_EQ(aco_rt_write(f->fd, f->data + i, 1, -1), 1);
            aco_rt_sleep(f->pause_ns);
        }
    } else {
        if (f->split) CHECK_EQ(aco_rt_write(f->fd, f->data, f->split, -1), (ssize_t)f->split);
        aco_rt_sleep(f->pause_ns);
        if (f->len > f->split)
            CHECK_EQ(aco_rt_write(f->fd, f->data + f->split, f->len - f->split, -1),
                     (ssize_t)(f->len - f->split));
    }
    if (f->eof) shutdown(f->fd, SHUT_WR);
}

static void pair(int sv[2]) { CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0); }

static void spawn_detached(aco_rt_sched_t* s, aco_rt_fn_t fn, void* arg) {
    aco_rt_co_t* co = aco_rt_spawn(s, fn, arg);
    CHECK(co != NULL);
    CHECK_EQ(aco_rt_detach(co), 0);
}

/* A reader's work over one split of the input. */
typedef struct {
    feed_t f;
    aco_rt_bufio_t* b;
    void (*check)(aco_rt_bufio_t* b, const char* data, size_t len);
} split_t;

static void split_reader(void* arg) {
    split_t* t = arg;
    t->check(t->b, t->f.data, t->f.len);
}

/* check(b, data, len) for every split of data, and byte by byte; rsize: the
 * read buffer (small: the bytes move to its start often). */
static void every_split(aco_rt_sched_t* s, const char* data, size_t rsize,
                        void (*check)(aco_rt_bufio_t*, const char*, size_t)) {
    size_t len = strlen(data);
    for (size_t k = 0; k <= len + 1; k++) {
        int sv[2];
        pair(sv);
        split_t t = {.f = {.fd = sv[1], .data = data, .len = len, .split = k > len ? 0 : k,
                           .pause_ns = k > len ? 50000 : 200000, .eof = 1,
                           .bytewise = k > len},
                     .check = check};
        t.b = aco_rt_bufio_new(sv[0], rsize, 0);
        CHECK(t.b != NULL);
        spawn_detached(s, feeder, &t.f);
        spawn_detached(s, split_reader, &t);
        test_run(s);
        aco_rt_bufio_free(t.b);
        close(sv[0]);
        close(sv[1]);
    }
}

static const char lines[] = "GET / HTTP/1.1\r\nHost: a\r\n\r\nx\n\nlonger line of text here\nend";

static void check_lines(aco_rt_bufio_t* b, const char* data, size_t len) {
    char got[256];
    size_t at = 0;
    const char* v;
    ssize_t n;
    while ((n = aco_rt_bufio_read_until(b, '\n', 32, &v, -1)) > 0) {
        CHECK_LE(at + (size_t)n, len);
        memcpy(got + at, v, (size_t)n);
        at += (size_t)n;
        if (at < len) CHECK_EQ(v[n - 1], '\n');
        else CHECK_NE(v[n - 1], '\n');          /* the tail at EOF */
        /* a delimiter only at the end of each piece */
        CHECK(memchr(v, '\n', (size_t)n - 1) == NULL);
    }
    CHECK_EQ(n, 0);
    CHECK_EQ(at, len);
    CHECK(memcmp(got, data, len) == 0);
    CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 0, &v, -1), 0);   /* EOF again */
}

/* Frames: a length byte ('0' + n) and n bytes. */
static const char frames[] = "3abc0" "5hello" "1x" "9123456789" "2yz";

static void check_frames(aco_rt_bufio_t* b, const char* data, size_t len) {
    (void)data;
    (void)len;
    const char* want[] = {"abc", "", "hello", "x", "123456789", "yz"};
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        char h, body[16];
        CHECK_EQ(aco_rt_bufio_read_full(b, &h, 1, -1), 1);
        size_t n = (size_t)(h - '0');
        CHECK_EQ(n, strlen(want[i]));
        CHECK_EQ(aco_rt_bufio_read_full(b, body, n, -1), (ssize_t)n);
        CHECK(memcmp(body, want[i], n) == 0);
    }
    char c;
    CHECK_EQ(aco_rt_bufio_read_full(b, &c, 1, -1), 0);
}

/* Messages ending in an empty line, found with peek/fill and taken with
 * consume, as an HTTP server finds request heads. */
static const char heads[] = "A: 1\r\n\r\nB: 22\r\nC: 3\r\n\r\n\r\n\r\nD\r\n\r\n";

static void check_heads(aco_rt_bufio_t* b, const char* data, size_t len) {
    (void)data;
    (void)len;
    const char* want[] = {"A: 1\r\n\r\n", "B: 22\r\nC: 3\r\n\r\n", "\r\n\r\n", "D\r\n\r\n"};
    size_t i = 0;
    for (;;) {
        const char* v;
        ssize_t n = aco_rt_bufio_peek(b, 0, &v, -1);
        CHECK_GE(n, 0);
        const char* end = memmem(v, (size_t)n, "\r\n\r\n", 4);
        if (end == NULL) {
            ssize_t r = aco_rt_bufio_fill(b, -1);
            CHECK_GE(r, 0);
            if (r == 0) {
                CHECK_EQ(n, 0);
                break;
            }
            continue;
        }
        size_t m = (size_t)(end - v) + 4;
        CHECK_LT(i, 4);
        CHECK_EQ(m, strlen(want[i]));
        CHECK(memcmp(v, want[i], m) == 0);
        CHECK_EQ(aco_rt_bufio_consume(b, m), 0);
        i++;
    }
    CHECK_EQ(i, 4);
}

/* read: some bytes, the buffered ones first. */
static void check_read(aco_rt_bufio_t* b, const char* data, size_t len) {
    char got[256];
    size_t at = 0;
    ssize_t n;
    while ((n = aco_rt_bufio_read(b, got + at, 5, -1)) > 0) {
        CHECK_LE(n, 5);
        at += (size_t)n;
    }
    CHECK_EQ(n, 0);
    CHECK_EQ(at, len);
    CHECK(memcmp(got, data, len) == 0);
}

static void t_splits(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    every_split(s, lines, 40, check_lines);
    every_split(s, frames, 12, check_frames);
    every_split(s, heads, 24, check_heads);
    every_split(s, lines, 16, check_read);
}

/* ------------------------------------------------------------------------ */
/* Limits, EOF in the middle, misuse                                        */
/* ------------------------------------------------------------------------ */

typedef struct {
    int fd;
    aco_rt_bufio_t* b;
} conn_t;

static void limits_co(void* arg) {
    int* sv = arg;
    aco_rt_bufio_t* b = aco_rt_bufio_new(sv[0], 16, 16);
    CHECK(b != NULL);
    const char* v;
    CHECK_EQ(aco_rt_write(sv[1], "abcdefghij\nrest", 15, -1), 15);
    /* no delimiter within the limit: -EMSGSIZE, the bytes stay */
    CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 8, &v, -1), -EMSGSIZE);
    CHECK_GE(aco_rt_bufio_buffered(b), 8);
    CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 8, &v, -1), -EMSGSIZE);
    char four[4];
    CHECK_EQ(aco_rt_bufio_read_full(b, four, 4, -1), 4);
    CHECK(memcmp(four, "abcd", 4) == 0);
    /* now the delimiter is within 8 */
    CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 8, &v, -1), 7);
    CHECK(memcmp(v, "efghij\n", 7) == 0);
    /* misuse: -EINVAL, nothing consumed */
    CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 17, &v, -1), -EINVAL);
    CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 0, NULL, -1), -EINVAL);
    CHECK_EQ(aco_rt_bufio_peek(b, 17, &v, -1), -EINVAL);
    CHECK_EQ(aco_rt_bufio_peek(b, 1, NULL, -1), -EINVAL);
    CHECK_EQ(aco_rt_bufio_peek(b, 4, &v, -1), 4);
    CHECK(memcmp(v, "rest", 4) == 0);
    CHECK_EQ(aco_rt_bufio_consume(b, 5), -EINVAL);
    CHECK_EQ(aco_rt_bufio_buffered(b), 4);
    /* a full buffer: fill says -ENOBUFS, a delimiter-less line -EMSGSIZE */
    CHECK_EQ(aco_rt_write(sv[1], "0123456789ABCDEF", 16, -1), 16);
    CHECK_EQ(aco_rt_bufio_peek(b, 16, &v, -1), 16);
    CHECK(memcmp(v, "rest0123456789AB", 16) == 0);
    CHECK_EQ(aco_rt_bufio_fill(b, -1), -ENOBUFS);
    CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 0, &v, -1), -EMSGSIZE);
    CHECK_EQ(aco_rt_bufio_consume(b, 16), 0);
    CHECK_EQ(aco_rt_bufio_buffered(b), 1);  /* the byte that told it: "C" */
    /* n = 0 reads nothing */
    CHECK_EQ(aco_rt_bufio_read(b, four, 0, -1), 0);
    CHECK_EQ(aco_rt_bufio_peek(b, 0, &v, -1), 1);   /* what is buffered */
    /* EOF in the middle: short counts, then 0 */
    CHECK_EQ(aco_rt_write(sv[1], "xyz", 3, -1), 3);
    shutdown(sv[1], SHUT_WR);
    char buf[64];
    CHECK_EQ(aco_rt_bufio_peek(b, 6, &v, -1), 3 + 4);    /* "CDEF" + "xyz" */
    CHECK_EQ(aco_rt_bufio_read_full(b, buf, 10, -1), 7);
    CHECK(memcmp(buf, "CDEFxyz", 7) == 0);
    CHECK_EQ(aco_rt_bufio_read_full(b, buf, 10, -1), 0);
    CHECK_EQ(aco_rt_bufio_read(b, buf, 10, -1), 0);
    CHECK_EQ(aco_rt_bufio_fill(b, -1), 0);
    aco_rt_bufio_free(b);
    b = aco_rt_bufio_new(sv[0], 8, 0);
    CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 0, &v, -1), 0);
    aco_rt_bufio_free(b);
    CHECK_EQ(aco_rt_bufio_fd(b = aco_rt_bufio_new(7, 0, 0)), 7);
    aco_rt_bufio_free(b);
}

/* read_full larger than the read buffer, the stream ending in its middle:
 * the count; n at most the buffer: all or the short count at EOF. */
static void big_eof_co(void* arg) {
    int* sv = arg;
    aco_rt_bufio_t* b = aco_rt_bufio_new(sv[0], 16, 16);
    static char src[1000], dst[2000];
    for (size_t i = 0; i < sizeof(src); i++) src[i] = (char)(i * 7 + 1);
    CHECK_EQ(aco_rt_write(sv[1], src, sizeof(src), -1), (ssize_t)sizeof(src));
    shutdown(sv[1], SHUT_WR);
    CHECK_EQ(aco_rt_bufio_read_full(b, dst, 3, -1), 3);
    CHECK_EQ(aco_rt_bufio_read_full(b, dst + 3, sizeof(dst), -1), (ssize_t)sizeof(src) - 3);
    CHECK(memcmp(src, dst, sizeof(src)) == 0);
    aco_rt_bufio_free(b);
}

/* read_until at the limit: a tail of exactly limit bytes at end of file is
 * the tail (the limit the buffer's size too); one byte more is -EMSGSIZE,
 * at end of file or before, and every byte stays buffered. */
static void one_tail(size_t rsize, size_t limit, const char* data, int eof, ssize_t want) {
    int sv[2];
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    aco_rt_bufio_t* b = aco_rt_bufio_new(sv[0], rsize, 0);
    CHECK(b != NULL);
    size_t n = strlen(data);
    CHECK_EQ(aco_rt_write(sv[1], data, n, -1), (ssize_t)n);
    if (eof) CHECK_EQ(shutdown(sv[1], SHUT_WR), 0);
    const char* v;
    CHECK_EQ(aco_rt_bufio_read_until(b, '\n', limit, &v, aco_rt_now() + 10000 * MS), want);
    if (want > 0) {
        CHECK(memcmp(v, data, n) == 0);
        CHECK_EQ(aco_rt_bufio_read_until(b, '\n', limit, &v, -1), 0);
    } else {
        CHECK_EQ(aco_rt_bufio_buffered(b), n);
        char buf[64];
        CHECK_EQ(aco_rt_bufio_read_full(b, buf, n, -1), (ssize_t)n);
        CHECK(memcmp(buf, data, n) == 0);
    }
    aco_rt_bufio_free(b);
    close(sv[0]);
    close(sv[1]);
}

static void tails_co(void* arg) {
    (void)arg;
    one_tail(16, 5, "abcde", 1, 5);
    one_tail(8, 0, "abcdefgh", 1, 8);       /* limit = the buffer's size */
    one_tail(8, 8, "abcdefgh", 1, 8);
    one_tail(16, 5, "abcd", 1, 4);
    one_tail(16, 5, "abcdef", 1, -EMSGSIZE);
    one_tail(16, 5, "abcdef", 0, -EMSGSIZE);
    one_tail(8, 0, "abcdefghi", 0, -EMSGSIZE);
    one_tail(16, 5, "abcd\n", 1, 5);        /* the delim at the limit */
    /* exactly limit bytes, then more after a pause: -EMSGSIZE, once they come */
    int sv[2];
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    aco_rt_bufio_t* b = aco_rt_bufio_new(sv[0], 8, 0);
    CHECK(b != NULL);
    static feed_t f;                        /* not on the share stack */
    f = (feed_t){.fd = sv[1], .data = "abcdefgh\n", .len = 9, .split = 8, .pause_ns = 20 * MS};
    aco_rt_co_t* fc = aco_rt_spawn(NULL, feeder, &f);
    CHECK(fc != NULL);
    const char* v;
    CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 0, &v, -1), -EMSGSIZE);
    CHECK_EQ(aco_rt_bufio_buffered(b), 9);
    CHECK_EQ(aco_rt_join(fc, -1), 0);
    aco_rt_bufio_free(b);
    close(sv[0]);
    close(sv[1]);
}

/* A transport that gives 10 bytes, then -ETIMEDOUT of its own, then the
 * end (ctx: the step). */
static ssize_t once_read(void* ctx, void* buf, size_t n, int64_t deadline) {
    (void)deadline;
    int* step = ctx;
    switch ((*step)++) {
    case 0:
        CHECK_GE(n, 10);
        memcpy(buf, "0123456789", 10);
        return 10;
    case 1: return -ETIMEDOUT;
    default: return 0;
    }
}
static ssize_t never_writev(void* ctx, const struct iovec* iov, int n, int64_t deadline) {
    (void)ctx, (void)iov, (void)n, (void)deadline;
    return -EPIPE;
}

/* read_full larger than the read buffer, the peer gone with a reset after
 * 20 bytes (a Unix socket closed with bytes unread in its own queue: the
 * kernel says ECONNRESET once, then end of file): the count, then the
 * error from the next read call, then 0.  And fill reads into all the
 * free room: 3 bytes buffered past the start, 13 waiting, one fill takes
 * the 13. */
static void reset_fill_co(void* arg) {
    (void)arg;
    int sv[2];
    pair(sv);
    aco_rt_bufio_t* b = aco_rt_bufio_new(sv[0], 16, 16);
    CHECK(b != NULL);
    char buf[40];
    CHECK_EQ(aco_rt_write(sv[0], "z", 1, -1), 1);          /* unread by sv[1] */
    CHECK_EQ(aco_rt_write(sv[1], "0123456789abcdefghij", 20, -1), 20);
    CHECK_EQ(close(sv[1]), 0);
    CHECK_EQ(aco_rt_bufio_read_full(b, buf, sizeof(buf), -1), 20);
    CHECK(memcmp(buf, "0123456789abcdefghij", 20) == 0);
    /* calls that read nothing leave it: n == 0, a refused argument */
    const char* v;
    CHECK_EQ(aco_rt_bufio_peek(b, 0, &v, -1), 0);
    CHECK_EQ(aco_rt_bufio_read(b, buf, 0, -1), 0);
    CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 17, &v, -1), -EINVAL);
    CHECK_EQ(aco_rt_bufio_read_full(b, buf, sizeof(buf), -1), -ECONNRESET);
    CHECK_EQ(aco_rt_bufio_read(b, buf, sizeof(buf), -1), 0);
    aco_rt_bufio_free(b);
    close(sv[0]);

    /* a transport's own -ETIMEDOUT (a TCP peer dead to keepalive, told
     * once) with no deadline of the caller's: kept as the reset is; the
     * caller's passed deadline too: said once by the next read, which
     * then goes on */
    static const aco_rt_bufio_io_t io = {once_read, never_writev};
    int step = 0;
    b = aco_rt_bufio_new_io(&io, &step, -1, 16, 16);
    CHECK(b != NULL);
    CHECK_EQ(aco_rt_bufio_read_full(b, buf, sizeof(buf), -1), 10);
    CHECK_EQ(aco_rt_bufio_read_full(b, buf, sizeof(buf), -1), -ETIMEDOUT);
    CHECK_EQ(aco_rt_bufio_read(b, buf, sizeof(buf), -1), 0);
    aco_rt_bufio_free(b);
    step = 0;
    b = aco_rt_bufio_new_io(&io, &step, -1, 16, 16);
    CHECK_EQ(aco_rt_bufio_read_full(b, buf, sizeof(buf), aco_rt_now() - 1), 10);
    CHECK_EQ(aco_rt_bufio_read(b, buf, sizeof(buf), -1), -ETIMEDOUT);
    CHECK_EQ(aco_rt_bufio_read(b, buf, sizeof(buf), -1), 0);   /* (step 2: the end) */
    aco_rt_bufio_free(b);
    /* the same over a pipe whose writer stays: the deadline cuts a large
     * read_full after 20 bytes, bytes come after it, and the next read
     * says -ETIMEDOUT before it has them (a short count is never taken
     * for the end of file) */
    int p[2];
    CHECK_EQ(pipe2(p, O_CLOEXEC), 0);
    b = aco_rt_bufio_new(p[0], 8, 8);
    CHECK(b != NULL);
    CHECK_EQ(write(p[1], "0123456789abcdefghij", 20), 20);
    CHECK_EQ(aco_rt_bufio_read_full(b, buf, sizeof(buf), aco_rt_in_ms(30)), 20);
    CHECK_EQ(write(p[1], "XYZ", 3), 3);
    CHECK_EQ(aco_rt_bufio_read(b, buf, sizeof(buf), aco_rt_in_ms(2000)), -ETIMEDOUT);
    CHECK_EQ(aco_rt_bufio_read(b, buf, sizeof(buf), aco_rt_in_ms(2000)), 3);
    CHECK(memcmp(buf, "XYZ", 3) == 0);
    aco_rt_bufio_free(b);
    close(p[0]);
    close(p[1]);

    pair(sv);
    b = aco_rt_bufio_new(sv[0], 16, 16);
    CHECK(b != NULL);
    CHECK_EQ(aco_rt_write(sv[1], "abcd", 4, -1), 4);
    CHECK_EQ(aco_rt_bufio_peek(b, 4, &v, -1), 4);
    CHECK_EQ(aco_rt_bufio_consume(b, 1), 0);
    CHECK_EQ(aco_rt_write(sv[1], "efghijklmnopq", 13, -1), 13);
    CHECK_EQ(aco_rt_bufio_fill(b, -1), 13);
    CHECK_EQ(aco_rt_bufio_peek(b, 16, &v, 0), 16);
    CHECK(memcmp(v, "bcdefghijklmnopq", 16) == 0);
    CHECK_EQ(aco_rt_bufio_fill(b, -1), -ENOBUFS);
    aco_rt_bufio_free(b);
    close(sv[0]);
    close(sv[1]);
}

static void t_limits(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    int sv[2];
    pair(sv);
    test_go(s, limits_co, sv);
    close(sv[0]);
    close(sv[1]);
    pair(sv);
    test_go(s, big_eof_co, sv);
    close(sv[0]);
    close(sv[1]);
    test_go(s, tails_co, NULL);
    test_go(s, reset_fill_co, NULL);
}

/* ------------------------------------------------------------------------ */
/* Deadlines, cancel, -EPERM                                                */
/* ------------------------------------------------------------------------ */

static void deadline_co(void* arg) {
    int* sv = arg;
    aco_rt_bufio_t* b = aco_rt_bufio_new(sv[0], 64, 64);
    const char* v;
    char buf[128];
    int64_t t0 = aco_rt_now();
    CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 0, &v, t0 + 20 * MS), -ETIMEDOUT);
    CHECK_GE(aco_rt_now() - t0, 20 * MS);
    CHECK_EQ(aco_rt_bufio_read(b, buf, 1, aco_rt_now() + 5 * MS), -ETIMEDOUT);
    CHECK_EQ(aco_rt_bufio_peek(b, 1, &v, 0), -ETIMEDOUT);
    CHECK_EQ(aco_rt_bufio_fill(b, 0), -ETIMEDOUT);
    /* part of a record, then the deadline: nothing consumed */
    CHECK_EQ(aco_rt_write(sv[1], "0123", 4, -1), 4);
    CHECK_EQ(aco_rt_bufio_read_full(b, buf, 10, aco_rt_now() + 10 * MS), -ETIMEDOUT);
    CHECK_EQ(aco_rt_bufio_buffered(b), 4);
    CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 0, &v, aco_rt_now() + 5 * MS), -ETIMEDOUT);
    CHECK_EQ(aco_rt_bufio_buffered(b), 4);
    CHECK_EQ(aco_rt_write(sv[1], "456789\n", 7, -1), 7);
    CHECK_EQ(aco_rt_bufio_read_full(b, buf, 10, -1), 10);
    CHECK(memcmp(buf, "0123456789", 10) == 0);
    /* bytes at hand: a past deadline does not matter */
    CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 0, &v, 0), 1);
    CHECK_EQ(aco_rt_write(sv[1], "ab\n", 3, -1), 3);
    aco_rt_sleep(2 * MS);
    CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 0, &v, 0), 3);  /* one read, no wait */
    aco_rt_bufio_free(b);
}

static aco_rt_bufio_t* cancel_b;
static int cancel_stage;

static void cancelled_co(void* arg) {
    (void)arg;
    const char* v;
    char c;
    cancel_stage = 1;
    CHECK_EQ(aco_rt_bufio_read_until(cancel_b, '\n', 0, &v, -1), -ECANCELED);
    /* now with bytes at hand: -ECANCELED still, nothing consumed */
    CHECK_EQ(aco_rt_bufio_buffered(cancel_b), 2);
    CHECK_EQ(aco_rt_bufio_read(cancel_b, &c, 1, -1), -ECANCELED);
    CHECK_EQ(aco_rt_bufio_read_full(cancel_b, &c, 1, -1), -ECANCELED);
    CHECK_EQ(aco_rt_bufio_peek(cancel_b, 0, &v, -1), -ECANCELED);
    CHECK_EQ(aco_rt_bufio_fill(cancel_b, -1), -ECANCELED);
    CHECK_EQ(aco_rt_bufio_write(cancel_b, "x", 1, -1), -ECANCELED);
    CHECK_EQ(aco_rt_bufio_flush(cancel_b, -1), -ECANCELED);
    CHECK_EQ(aco_rt_bufio_flush_more(cancel_b, -1), -ECANCELED);
    CHECK_EQ(aco_rt_bufio_consume(cancel_b, 1), 0);          /* never blocks */
    CHECK_EQ(aco_rt_bufio_buffered(cancel_b), 1);
    CHECK_EQ(aco_rt_cancel_check(), -ECANCELED);
    /* The shield (aco_rt.h: a kept cancel "neither fails nor ends any
     * call"): a cancelled co's goodbye goes out, the byte at hand is read;
     * the shield off, the calls fail again. */
    CHECK_EQ(aco_rt_cancel_shield(1), 0);
    CHECK_EQ(aco_rt_cancel_check(), 0);
    CHECK(aco_rt_cancelled());
    CHECK_EQ(aco_rt_bufio_read(cancel_b, &c, 1, -1), 1);
    CHECK_EQ(c, 'b');
    CHECK_EQ(aco_rt_bufio_write(cancel_b, "bye\n", 4, -1), 4);
    CHECK_EQ(aco_rt_bufio_flush(cancel_b, -1), 0);
    CHECK_EQ(aco_rt_bufio_unflushed(cancel_b), 0);
    CHECK_EQ(aco_rt_cancel_shield(0), 1);
    CHECK_EQ(aco_rt_cancel_check(), -ECANCELED);
    CHECK_EQ(aco_rt_bufio_write(cancel_b, "x", 1, -1), -ECANCELED);
    CHECK_EQ(aco_rt_bufio_flush(cancel_b, -1), -ECANCELED);
    cancel_stage = 2;
}

static void canceller(void* arg) {
    int* sv = arg;
    cancel_b = aco_rt_bufio_new(sv[0], 0, 0);
    aco_rt_co_t* co = aco_rt_spawn(NULL, cancelled_co, NULL);
    while (cancel_stage == 0) aco_rt_yield();
    aco_rt_sleep(2 * MS);
    CHECK_EQ(aco_rt_write(sv[1], "ab", 2, -1), 2);           /* no delimiter */
    aco_rt_sleep(2 * MS);
    CHECK_EQ(aco_rt_bufio_buffered(cancel_b), 2);
    CHECK_EQ(aco_rt_cancel(co), 0);
    CHECK_EQ(aco_rt_join(co, -1), 0);
    CHECK_EQ(cancel_stage, 2);
    aco_rt_bufio_free(cancel_b);
    char bye[5] = {0};
    CHECK_EQ(aco_rt_read(sv[1], bye, sizeof bye, -1), 4);    /* the goodbye, alone */
    CHECK(strcmp(bye, "bye\n") == 0);
}

static void t_deadlines(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    int sv[2];
    pair(sv);
    test_go(s, deadline_co, sv);
    close(sv[0]);
    close(sv[1]);
    pair(sv);
    cancel_stage = 0;
    test_go(s, canceller, sv);
    close(sv[0]);
    close(sv[1]);
}

static void t_outside(void) {
    int sv[2];
    pair(sv);
    aco_rt_bufio_t* b = aco_rt_bufio_new(sv[0], 0, 0);
    CHECK(b != NULL);
    const char* v;
    char c;
    CHECK_EQ(aco_rt_bufio_read(b, &c, 1, -1), -EPERM);
    CHECK_EQ(aco_rt_bufio_read_full(b, &c, 1, -1), -EPERM);
    CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 0, &v, -1), -EPERM);
    CHECK_EQ(aco_rt_bufio_peek(b, 0, &v, -1), -EPERM);
    CHECK_EQ(aco_rt_bufio_fill(b, -1), -EPERM);
    CHECK_EQ(aco_rt_bufio_write(b, "x", 1, -1), -EPERM);
    CHECK_EQ(aco_rt_bufio_flush(b, -1), -EPERM);
    CHECK_EQ(aco_rt_bufio_flush_more(b, -1), -EPERM);
    CHECK_EQ(aco_rt_bufio_unflushed(b), 0);
    CHECK_EQ(aco_rt_cancel_check(), -EPERM);
    aco_rt_bufio_free(b);
    aco_rt_bufio_free(NULL);
    close(sv[0]);
    close(sv[1]);
    /* bad arguments */
    errno = 0;
    CHECK(aco_rt_bufio_new(-1, 0, 0) == NULL);
    CHECK_EQ(errno, EINVAL);
    errno = 0;
    CHECK(aco_rt_bufio_new(0, ((size_t)1 << 30) + 1, 0) == NULL);
    CHECK_EQ(errno, EINVAL);
    errno = 0;
    CHECK(aco_rt_bufio_new(0, 0, ((size_t)1 << 30) + 1) == NULL);
    CHECK_EQ(errno, EINVAL);
}

/* Free and make again, sizes changing: a new bufio is empty and whole
 * whatever was freed before it (the runtime keeps freed blocks for the
 * next bufios of the same sizes), and several alive at once are distinct. */
static void reuse_co(void* arg) {
    int* sv = arg;
    static const size_t sizes[][2] = {{64, 32}, {0, 0}, {64, 32}, {16, 4096},
                                      {4096, 16}, {300 * 1024, 1}, {64, 32}};
    char* pat = malloc(300 * 1024);
    char* got = malloc(300 * 1024);
    CHECK(pat && got);
    for (int round = 0; round < 40; round++) {
        size_t rs = sizes[round % 7][0], ws = sizes[round % 7][1];
        size_t rcap = rs ? rs : 16 * 1024, wcap = ws ? ws : 16 * 1024;
        aco_rt_bufio_t* b = aco_rt_bufio_new(sv[0], rs, ws);
        CHECK(b != NULL);
        CHECK_EQ(aco_rt_bufio_buffered(b), 0);
        CHECK_EQ(aco_rt_bufio_unflushed(b), 0);
        CHECK_EQ(aco_rt_bufio_fd(b), sv[0]);
        /* the read buffer filled to its size, every byte right */
        for (size_t i = 0; i < rcap; i++) pat[i] = (char)(i * 7 + (size_t)round);
        for (size_t at = 0; at < rcap;) {
            ssize_t w = aco_rt_write(sv[1], pat + at, rcap - at, 0);
            CHECK_GT(w, 0);     /* (the bufio has taken all before: room) */
            at += (size_t)w;
            const char* v;
            ssize_t n = aco_rt_bufio_peek(b, at, &v, -1);
            CHECK_GE(n, (ssize_t)at);
        }
        const char* v;
        CHECK_EQ(aco_rt_bufio_peek(b, 0, &v, 0), (ssize_t)rcap);
        CHECK(memcmp(v, pat, rcap) == 0);
        CHECK_EQ(aco_rt_bufio_read_full(b, got, rcap - 1, -1), (ssize_t)rcap - 1);
        CHECK(memcmp(got, pat, rcap - 1) == 0);
        /* the write buffer filled to its size without a flush, then left:
         * the unread byte and the unflushed ones go with the free */
        for (size_t i = 0; i < wcap; i++) pat[i] = (char)(i * 3 + (size_t)round);
        CHECK_EQ(aco_rt_bufio_write(b, pat, wcap, -1), (ssize_t)wcap);
        CHECK_EQ(aco_rt_bufio_buffered(b), 1);
        aco_rt_bufio_free(b);
        /* (nothing was written to sv[0]'s peer: the pair is still quiet) */
        char c;
        CHECK_EQ(aco_rt_read(sv[1], &c, 1, 0), -ETIMEDOUT);
    }
    /* twelve at once, freed, twelve again */
    aco_rt_bufio_t* many[12];
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < 12; i++) {
            CHECK((many[i] = aco_rt_bufio_new(sv[0], 64, 32)) != NULL);
            CHECK_EQ(aco_rt_bufio_buffered(many[i]), 0);
            CHECK_EQ(aco_rt_bufio_unflushed(many[i]), 0);
            CHECK_EQ(aco_rt_bufio_write(many[i], "abc", 3, -1), 3);
            for (int j = 0; j < i; j++) CHECK(many[j] != many[i]);
        }
        for (int i = 0; i < 12; i++) CHECK_EQ(aco_rt_bufio_unflushed(many[i]), 3);
        for (int i = 0; i < 12; i++) aco_rt_bufio_free(many[i]);
    }
    free(pat);
    free(got);
}

static void t_reuse(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    int sv[2];
    pair(sv);
    test_go(s, reuse_co, sv);
    close(sv[0]);
    close(sv[1]);
}

/* ------------------------------------------------------------------------ */
/* Writing                                                                  */
/* ------------------------------------------------------------------------ */

/* Read exactly n bytes of fd (plain runtime reads) into buf. */
static void recv_all(int fd, char* buf, size_t n) {
    size_t at = 0;
    while (at < n) {
        ssize_t r = aco_rt_read(fd, buf + at, n - at, -1);
        CHECK_GT(r, 0);
        at += (size_t)r;
    }
}

static void gather_co(void* arg) {
    int* sv = arg;
    aco_rt_bufio_t* b = aco_rt_bufio_new(sv[0], 0, 4096);
    static char buf[8192], big[10000];
    /* small writes stay buffered until a flush */
    for (int i = 0; i < 100; i++) CHECK_EQ(aco_rt_bufio_write(b, "0123456789", 10, -1), 10);
    CHECK_EQ(aco_rt_bufio_unflushed(b), 1000);
    CHECK_EQ(recv(sv[1], buf, sizeof(buf), MSG_DONTWAIT), -1);
    CHECK_EQ(errno, EAGAIN);
    CHECK_EQ(aco_rt_bufio_flush(b, -1), 0);
    CHECK_EQ(aco_rt_bufio_unflushed(b), 0);
    recv_all(sv[1], buf, 1000);
    for (int i = 0; i < 1000; i++) CHECK_EQ(buf[i], '0' + i % 10);
    CHECK_EQ(aco_rt_bufio_flush(b, -1), 0);
    /* filling up: 3000 + 3000 (the buffer sent full, 1904 kept) */
    memset(big, 'a', 3000);
    memset(big + 3000, 'b', 3000);
    CHECK_EQ(aco_rt_bufio_write(b, big, 3000, -1), 3000);
    CHECK_EQ(aco_rt_bufio_write(b, big + 3000, 3000, -1), 3000);
    CHECK_EQ(aco_rt_bufio_unflushed(b), 6000 - 4096);
    recv_all(sv[1], buf, 4096);
    CHECK(memcmp(buf, big, 4096) == 0);
    /* a write over the buffer's size: out with the buffered bytes, in order */
    for (size_t i = 0; i < sizeof(big); i++) big[i] = (char)(i % 251);
    CHECK_EQ(aco_rt_bufio_write(b, big, sizeof(big), -1), (ssize_t)sizeof(big));
    CHECK_EQ(aco_rt_bufio_unflushed(b), 0);
    recv_all(sv[1], buf, 6000 - 4096);
    for (int i = 0; i < 6000 - 4096; i++) CHECK_EQ(buf[i], 'b');
    static char got[sizeof(big)];
    recv_all(sv[1], got, sizeof(got));
    CHECK(memcmp(got, big, sizeof(big)) == 0);
    /* flush_more on a socket: the bytes arrive */
    CHECK_EQ(aco_rt_bufio_write(b, "head", 4, -1), 4);
    CHECK_EQ(aco_rt_bufio_flush_more(b, -1), 0);
    CHECK_EQ(aco_rt_bufio_write(b, "body", 4, -1), 4);
    CHECK_EQ(aco_rt_bufio_flush(b, -1), 0);
    recv_all(sv[1], buf, 8);
    CHECK(memcmp(buf, "headbody", 8) == 0);
    aco_rt_bufio_free(b);
}

/* flush_more on a pipe (no MSG_MORE there): a plain flush. */
static void pipe_co(void* arg) {
    (void)arg;
    int p[2];
    CHECK_EQ(pipe2(p, O_CLOEXEC), 0);
    aco_rt_bufio_t* w = aco_rt_bufio_new(p[1], 0, 0);
    aco_rt_bufio_t* r = aco_rt_bufio_new(p[0], 0, 0);
    CHECK_EQ(aco_rt_bufio_write(w, "line\n", 5, -1), 5);
    CHECK_EQ(aco_rt_bufio_flush_more(w, -1), 0);
    const char* v;
    CHECK_EQ(aco_rt_bufio_read_until(r, '\n', 0, &v, -1), 5);
    CHECK(memcmp(v, "line\n", 5) == 0);
    aco_rt_bufio_free(w);
    aco_rt_bufio_free(r);
    close(p[0]);
    close(p[1]);
}

/* The peer gone: -EPIPE, kept: later writes and flushes fail at once. */
static void epipe_co(void* arg) {
    int* sv = arg;
    aco_rt_bufio_t* b = aco_rt_bufio_new(sv[0], 0, 64);
    close(sv[1]);
    CHECK_EQ(aco_rt_bufio_write(b, "abc", 3, -1), 3);
    CHECK_EQ(aco_rt_bufio_flush(b, -1), -EPIPE);
    CHECK_EQ(aco_rt_bufio_write(b, "d", 1, -1), -EPIPE);
    CHECK_EQ(aco_rt_bufio_flush(b, -1), -EPIPE);
    CHECK_EQ(aco_rt_bufio_flush_more(b, -1), -EPIPE);
    aco_rt_bufio_free(b);
    /* a big write straight to the broken peer */
    b = aco_rt_bufio_new(sv[0], 0, 64);
    static char big[1000];
    CHECK_EQ(aco_rt_bufio_write(b, big, sizeof(big), -1), -EPIPE);
    CHECK_EQ(aco_rt_bufio_write(b, big, 1, -1), -EPIPE);
    aco_rt_bufio_free(b);
}

/* A peer that does not read: the deadline cuts the writes; what was taken
 * (counts returned) then arrives whole and in order after a flush. */
static int slow_fd;
static size_t slow_taken;
static const size_t slow_total = 4 << 20;

static char slow_byte(size_t i) { return (char)((i * 13) % 251); }

static void slow_reader(void* arg) {
    (void)arg;
    static char buf[65536];
    size_t at = 0;
    ssize_t n;
    while ((n = aco_rt_read(slow_fd, buf, sizeof(buf), -1)) > 0) {
        for (ssize_t i = 0; i < n; i++) CHECK_EQ(buf[i], slow_byte(at + (size_t)i));
        at += (size_t)n;
    }
    CHECK_EQ(n, 0);
    CHECK_EQ(at, slow_taken);
}

static void slow_writer(void* arg) {
    int* sv = arg;
    int small = 4096;
    setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
    aco_rt_bufio_t* b = aco_rt_bufio_new(sv[0], 0, 1000);
    static char chunk[1500];
    size_t at = 0;
    int timed_out = 0;
    int64_t dl = aco_rt_now() + 30 * MS;
    while (at < slow_total) {
        size_t n = (at / 7) % 2 ? 700 : sizeof(chunk);     /* both write paths */
        for (size_t i = 0; i < n; i++) chunk[i] = slow_byte(at + i);
        ssize_t r = aco_rt_bufio_write(b, chunk, n, dl);
        if (r == -ETIMEDOUT) {
            timed_out = 1;
            break;
        }
        CHECK_GT(r, 0);
        at += (size_t)r;
        if ((size_t)r < n) {
            timed_out = 1;
            break;
        }
    }
    CHECK(timed_out);
    CHECK_EQ(aco_rt_bufio_flush(b, aco_rt_now() + 5 * MS), -ETIMEDOUT);    /* not kept */
    slow_taken = at;
    slow_fd = sv[1];
    spawn_detached(NULL, slow_reader, NULL);
    CHECK_EQ(aco_rt_bufio_flush(b, -1), 0);
    CHECK_EQ(aco_rt_bufio_unflushed(b), 0);
    shutdown(sv[0], SHUT_WR);
    aco_rt_bufio_free(b);
}

static void t_write(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    int sv[2];
    pair(sv);
    test_go(s, gather_co, sv);
    close(sv[0]);
    close(sv[1]);
    test_go(s, pipe_co, NULL);
    pair(sv);
    test_go(s, epipe_co, sv);
    close(sv[0]);
    pair(sv);
    test_go(s, slow_writer, sv);
    close(sv[0]);
    close(sv[1]);
}

/* ------------------------------------------------------------------------ */
/* Stack buffers of cos that share one share stack                          */
/* ------------------------------------------------------------------------ */

#define SHARED_COS 4
#define SHARED_BYTES 100000

typedef struct {
    int sv[2];
    int id;
    feed_t f;
    char* src;
} shared_t;

static void shared_reader(void* arg) {
    shared_t* t = arg;
    aco_rt_bufio_t* b = aco_rt_bufio_new(t->sv[0], 4096, 0);
    char dst[SHARED_BYTES];                 /* on the share stack */
    char line[64];
    const char* v;
    /* a line through the buffer, then the rest straight into dst */
    ssize_t n = aco_rt_bufio_read_until(b, '\n', 0, &v, -1);
    CHECK_GT(n, 0);
    memcpy(line, v, (size_t)n);
    CHECK_EQ(line[0], 'a' + t->id);
    CHECK_EQ(aco_rt_bufio_read_full(b, dst, sizeof(dst) - (size_t)n, -1),
             (ssize_t)(sizeof(dst) - (size_t)n));
    CHECK(memcmp(dst, t->src + n, sizeof(dst) - (size_t)n) == 0);
    char c;
    CHECK_EQ(aco_rt_bufio_read(b, &c, 1, -1), 0);
    aco_rt_bufio_free(b);
}

static void t_share_stack(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    static shared_t t[SHARED_COS];
    for (int i = 0; i < SHARED_COS; i++) {
        pair(t[i].sv);
        t[i].id = i;
        t[i].src = malloc(SHARED_BYTES);
        for (int k = 0; k < SHARED_BYTES; k++) t[i].src[k] = (char)('0' + (k * (i + 3)) % 61);
        memcpy(t[i].src, "a line\n", 7);
        t[i].src[0] = (char)('a' + i);
        t[i].f = (feed_t){.fd = t[i].sv[1], .data = t[i].src, .len = SHARED_BYTES,
                          .split = 3 + (size_t)i * 1000, .pause_ns = 2 * MS, .eof = 1};
        spawn_detached(s, shared_reader, &t[i]);
        spawn_detached(s, feeder, &t[i].f);
    }
    test_run(s);
    for (int i = 0; i < SHARED_COS; i++) {
        close(t[i].sv[0]);
        close(t[i].sv[1]);
        free(t[i].src);
    }
}

int main(void) {
    t_outside();
    test_on_backends(NULL, t_splits, NULL);
    test_on_backends(NULL, t_limits, NULL);
    test_on_backends(NULL, t_deadlines, NULL);
    test_on_backends(NULL, t_write, NULL);
    test_on_backends(NULL, t_reuse, NULL);
    aco_rt_opts_t one = {.share_stacks = 1};
    test_on_backends(&one, t_share_stack, NULL);
    printf("test_bufio: ok\n");
    return 0;
}
