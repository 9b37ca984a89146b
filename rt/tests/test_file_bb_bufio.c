/* test_file_bb_bufio.c - aco_rt_bufio_*, black box, over pipes: NULL and bad
 * arguments, -EPERM outside a co, -ECANCELED with bytes at hand (and the
 * shield), read_until with lines longer than the buffer, at exactly its
 * size, EOF mid-line, delimiters as unsigned char; read_full's deadline
 * (nothing consumed), peek / fill / consume; writes gathered, a reader
 * gone (-EPIPE kept, never SIGPIPE), deadlines on a full pipe (nothing
 * lost, nothing twice); a transport of the program's own that takes one
 * byte at a time; and random lines against a model, cut at random. */
#include "bb_file.h"

#include <sys/uio.h>

/* ---------------- arguments ---------------- */

static void args_co(void* arg) {
    (void)arg;
    const char* v;
    char buf[8];
    CHECK_EQ(aco_rt_bufio_read(NULL, buf, 1, -1), -EINVAL);
    CHECK_EQ(aco_rt_bufio_read_full(NULL, buf, 1, -1), -EINVAL);
    CHECK_EQ(aco_rt_bufio_read_until(NULL, '\n', 0, &v, -1), -EINVAL);
    CHECK_EQ(aco_rt_bufio_peek(NULL, 0, &v, -1), -EINVAL);
    CHECK_EQ(aco_rt_bufio_fill(NULL, -1), -EINVAL);
    CHECK_EQ(aco_rt_bufio_consume(NULL, 0), -EINVAL);
    CHECK_EQ(aco_rt_bufio_write(NULL, buf, 1, -1), -EINVAL);
    CHECK_EQ(aco_rt_bufio_flush(NULL, -1), -EINVAL);
    CHECK_EQ(aco_rt_bufio_flush_more(NULL, -1), -EINVAL);
    CHECK_EQ(aco_rt_bufio_fd(NULL), -EINVAL);
    CHECK_EQ(aco_rt_bufio_buffered(NULL), 0);
    CHECK_EQ(aco_rt_bufio_unflushed(NULL), 0);
    aco_rt_bufio_free(NULL);

    int p[2];
    CHECK_EQ(pipe2(p, O_CLOEXEC), 0);
    aco_rt_bufio_t* b = aco_rt_bufio_new(p[0], 16, 16);
    CHECK(b != NULL);
    CHECK_EQ(aco_rt_bufio_fd(b), p[0]);
    CHECK_EQ(aco_rt_bufio_read(b, NULL, 1, -1), -EFAULT);
    CHECK_EQ(aco_rt_bufio_read_full(b, NULL, 1, -1), -EFAULT);
    CHECK_EQ(aco_rt_bufio_write(b, NULL, 1, -1), -EFAULT);
    CHECK_EQ(aco_rt_bufio_read(b, NULL, 0, -1), 0);
    CHECK_EQ(aco_rt_bufio_read(b, buf, 0, -1), 0);
    CHECK_EQ(aco_rt_bufio_write(b, NULL, 0, -1), 0);
    CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 17, &v, -1), -EINVAL);
    CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 0, NULL, -1), -EINVAL);
    CHECK_EQ(aco_rt_bufio_peek(b, 17, &v, -1), -EINVAL);
    CHECK_EQ(aco_rt_bufio_peek(b, 0, NULL, -1), -EINVAL);
    CHECK_EQ(aco_rt_bufio_peek(b, 0, &v, -1), 0);
    CHECK_EQ(aco_rt_bufio_consume(b, 1), -EINVAL);
    CHECK_EQ(aco_rt_bufio_consume(b, 0), 0);
    /* bytes buffered: given even with a deadline passed */
    CHECK_EQ(write(p[1], "abcdef", 6), 6);
    CHECK_EQ(aco_rt_bufio_peek(b, 6, &v, -1), 6);
    CHECK_EQ(memcmp(v, "abcdef", 6), 0);
    CHECK_EQ(aco_rt_bufio_buffered(b), 6);
    CHECK_EQ(aco_rt_bufio_consume(b, 7), -EINVAL);
    CHECK_EQ(aco_rt_bufio_buffered(b), 6);
    CHECK_EQ(aco_rt_bufio_read(b, buf, 2, 0), 2);
    CHECK_EQ(memcmp(buf, "ab", 2), 0);
    CHECK_EQ(aco_rt_bufio_consume(b, 1), 0);
    CHECK_EQ(aco_rt_bufio_read(b, buf, 8, 0), 3);
    CHECK_EQ(memcmp(buf, "def", 3), 0);
    /* nothing buffered, deadline passed: -ETIMEDOUT */
    CHECK_EQ(aco_rt_bufio_read(b, buf, 8, 0), -ETIMEDOUT);
    CHECK_EQ(aco_rt_bufio_fill(b, 0), -ETIMEDOUT);
    /* a cancel: -ECANCELED even with bytes buffered; the shield lets them */
    CHECK_EQ(write(p[1], "xyz\n", 4), 4);
    CHECK_EQ(aco_rt_bufio_fill(b, -1), 4);
    CHECK_EQ(aco_rt_cancel(aco_rt_self()), 0);
    CHECK_EQ(aco_rt_bufio_read(b, buf, 1, -1), -ECANCELED);
    CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 0, &v, -1), -ECANCELED);
    CHECK_EQ(aco_rt_bufio_peek(b, 1, &v, -1), -ECANCELED);
    CHECK_EQ(aco_rt_bufio_read_full(b, buf, 1, -1), -ECANCELED);
    CHECK_EQ(aco_rt_bufio_write(b, "q", 1, -1), -ECANCELED);
    CHECK_EQ(aco_rt_bufio_flush(b, -1), -ECANCELED);
    CHECK_EQ(aco_rt_bufio_buffered(b), 4);
    CHECK_EQ(aco_rt_cancel_shield(1), 0);
    CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 0, &v, -1), 4);
    CHECK_EQ(memcmp(v, "xyz\n", 4), 0);
    CHECK_EQ(aco_rt_cancel_shield(0), 1);
    CHECK_EQ(aco_rt_bufio_read(b, buf, 1, -1), -ECANCELED);
    aco_rt_bufio_free(b);
    close(p[0]);
    close(p[1]);
}

/* ---------------- read_until ---------------- */

static int pr[2];
static const char* feed;
static size_t feed_len;
static size_t feed_chunk;
static void feeder(void* arg) {
    (void)arg;
    for (size_t i = 0; i < feed_len; i += feed_chunk) {
        size_t k = feed_len - i < feed_chunk ? feed_len - i : feed_chunk;
        CHECK_EQ(aco_rt_write(pr[1], feed + i, k, aco_rt_in_ms(5000)), (ssize_t)k);
        aco_rt_yield();
    }
    close(pr[1]);
}
static void start_feed(const char* s, size_t n, size_t chunk) {
    CHECK_EQ(pipe2(pr, O_CLOEXEC), 0);
    feed = s;
    feed_len = n;
    feed_chunk = chunk;
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(NULL, feeder, NULL)), 0);
}

#define EXPECT_LINE(b, lim, str)                                                       \
    do {                                                                              \
        const char* v_;                                                               \
        ssize_t r_ = aco_rt_bufio_read_until(b, '\n', lim, &v_, aco_rt_in_ms(5000));  \
        CHECK_EQ(r_, (ssize_t)strlen(str));                                           \
        CHECK_EQ(memcmp(v_, str, strlen(str)), 0);                                    \
    } while (0)
#define EXPECT_R(b, lim, want)                                                         \
    do {                                                                              \
        const char* v_;                                                               \
        CHECK_EQ(aco_rt_bufio_read_until(b, '\n', lim, &v_, aco_rt_in_ms(5000)), want); \
    } while (0)

static void until_co(void* arg) {
    (void)arg;
    for (size_t chunk = 1; chunk <= 32; chunk = chunk * 2 + 1) {
        /* rsize 8: lines of 7+1, 8+1 (too long), exactly 8 at EOF */
        static const char in1[] = "1234567\n12345678\nab\n";
        start_feed(in1, sizeof(in1) - 1, chunk);
        aco_rt_bufio_t* b = aco_rt_bufio_new(pr[0], 8, 8);
        CHECK(b != NULL);
        EXPECT_LINE(b, 0, "1234567\n");
        EXPECT_R(b, 0, -EMSGSIZE);
        /* they stay buffered: 8 of them (the limit), or the 9 (rsize + 1) */
        CHECK_GE(aco_rt_bufio_buffered(b), 8);
        char t[16];
        CHECK_EQ(aco_rt_bufio_read_full(b, t, 8, aco_rt_in_ms(5000)), 8);
        CHECK_EQ(memcmp(t, "12345678", 8), 0);
        EXPECT_LINE(b, 0, "\n");
        EXPECT_LINE(b, 0, "ab\n");
        EXPECT_R(b, 0, 0);
        EXPECT_R(b, 0, 0);
        aco_rt_bufio_free(b);
        close(pr[0]);

        /* exactly limit bytes then EOF: a tail; limit + 1 at EOF: EMSGSIZE */
        static const char in2[] = "12345678";
        start_feed(in2, 8, chunk);
        b = aco_rt_bufio_new(pr[0], 8, 8);
        EXPECT_LINE(b, 0, "12345678");
        EXPECT_R(b, 0, 0);
        aco_rt_bufio_free(b);
        close(pr[0]);
        static const char in3[] = "123456789";
        start_feed(in3, 9, chunk);
        b = aco_rt_bufio_new(pr[0], 8, 8);
        EXPECT_R(b, 0, -EMSGSIZE);
        EXPECT_R(b, 0, -EMSGSIZE);
        /* the buffered ones: 8, or the 9 that read_until held */
        ssize_t got = aco_rt_bufio_read(b, t, 16, aco_rt_in_ms(5000));
        CHECK(got == 8 || got == 9);
        CHECK_EQ(memcmp(t, "123456789", (size_t)got), 0);
        if (got == 8) EXPECT_LINE(b, 0, "9");
        EXPECT_R(b, 0, 0);
        aco_rt_bufio_free(b);
        close(pr[0]);

        /* a smaller limit; EOF mid-line */
        static const char in4[] = "abc\ndefgh\nij";
        start_feed(in4, sizeof(in4) - 1, chunk);
        b = aco_rt_bufio_new(pr[0], 8, 8);
        EXPECT_LINE(b, 4, "abc\n");
        EXPECT_R(b, 5, -EMSGSIZE);
        EXPECT_LINE(b, 6, "defgh\n");
        EXPECT_R(b, 1, -EMSGSIZE);
        EXPECT_LINE(b, 2, "ij");
        EXPECT_R(b, 2, 0);
        aco_rt_bufio_free(b);
        close(pr[0]);

        /* delimiters as unsigned char: -1 and 0x1ff are 0xff */
        static const char in5[] = "a\xff" "b\xff" "c\xff" "d";
        start_feed(in5, sizeof(in5) - 1, chunk);
        b = aco_rt_bufio_new(pr[0], 0, 0);
        const char* v;
        CHECK_EQ(aco_rt_bufio_read_until(b, 0xff, 0, &v, aco_rt_in_ms(5000)), 2);
        CHECK_EQ(aco_rt_bufio_read_until(b, -1, 0, &v, aco_rt_in_ms(5000)), 2);
        CHECK_EQ(v[0], 'b');
        CHECK_EQ(aco_rt_bufio_read_until(b, 0x1ff, 0, &v, aco_rt_in_ms(5000)), 2);
        CHECK_EQ(v[0], 'c');
        CHECK_EQ(aco_rt_bufio_read_until(b, '\0', 0, &v, aco_rt_in_ms(5000)), 1);
        CHECK_EQ(v[0], 'd');
        aco_rt_bufio_free(b);
        close(pr[0]);
    }
}

/* ---------------- random lines against a model ---------------- */

static void model_co(void* arg) {
    (void)arg;
    uint64_t seed = 12345;
    for (int round = 0; round < (FEW ? 20 : 100); round++) {
        size_t rsize = 1 + test_rand(&seed) % 40;
        size_t n = test_rand(&seed) % 600;
        char* in = malloc(n + 1);
        for (size_t i = 0; i < n; i++) in[i] = test_rand(&seed) % 8 == 0 ? '\n' : 'a' + i % 26;
        size_t chunk = 1 + test_rand(&seed) % 50;
        start_feed(in, n, chunk);
        aco_rt_bufio_t* b = aco_rt_bufio_new(pr[0], rsize, 1);
        CHECK(b != NULL);
        size_t pos = 0;
        for (;;) {
            size_t lim = test_rand(&seed) % (rsize + 1);
            size_t L = lim ? lim : rsize;
            const char* v;
            ssize_t r = aco_rt_bufio_read_until(b, '\n', lim, &v, aco_rt_in_ms(5000));
            /* the model: the first '\n' within L bytes from pos */
            const char* nl = memchr(in + pos, '\n', n - pos < L ? n - pos : L);
            if (nl) {
                size_t want = (size_t)(nl - (in + pos)) + 1;
                CHECK_EQ(r, (ssize_t)want);
                CHECK_EQ(memcmp(v, in + pos, want), 0);
                pos += want;
            } else if (n - pos > L) {
                CHECK_EQ(r, -EMSGSIZE);
                /* take what the limit saw, by read_full (at most rsize) */
                char t[64];
                CHECK_EQ(aco_rt_bufio_read_full(b, t, L, aco_rt_in_ms(5000)), (ssize_t)L);
                CHECK_EQ(memcmp(t, in + pos, L), 0);
                pos += L;
            } else if (n - pos > 0) {
                CHECK_EQ(r, (ssize_t)(n - pos));
                CHECK_EQ(memcmp(v, in + pos, n - pos), 0);
                pos = n;
            } else {
                CHECK_EQ(r, 0);
                break;
            }
        }
        aco_rt_bufio_free(b);
        close(pr[0]);
        free(in);
    }
}

/* ---------------- read_full, peek, fill ---------------- */

static void full_co(void* arg) {
    (void)arg;
    int p[2];
    CHECK_EQ(pipe2(p, O_CLOEXEC), 0);
    aco_rt_bufio_t* b = aco_rt_bufio_new(p[0], 16, 16);
    char t[64];
    /* 5 of 10 came: the deadline consumes nothing */
    CHECK_EQ(write(p[1], "01234", 5), 5);
    int64_t t0 = aco_rt_now();
    CHECK_EQ(aco_rt_bufio_read_full(b, t, 10, t0 + 100 * MS), -ETIMEDOUT);
    CHECK_GE(aco_rt_now() - t0, 100 * MS);
    CHECK_EQ(aco_rt_bufio_buffered(b), 5);
    CHECK_EQ(write(p[1], "56789", 5), 5);
    CHECK_EQ(aco_rt_bufio_read_full(b, t, 10, aco_rt_in_ms(5000)), 10);
    CHECK_EQ(memcmp(t, "0123456789", 10), 0);
    /* exactly the buffer's size, then more than it */
    CHECK_EQ(write(p[1], "abcdefghijklmnopqrstuvwxyz", 26), 26);
    CHECK_EQ(aco_rt_bufio_read_full(b, t, 16, aco_rt_in_ms(5000)), 16);
    CHECK_EQ(memcmp(t, "abcdefghijklmnop", 16), 0);
    CHECK_EQ(write(p[1], "0123456789ABCDEFGHIJ", 20), 20);
    CHECK_EQ(aco_rt_bufio_read_full(b, t, 30, aco_rt_in_ms(5000)), 30);
    CHECK_EQ(memcmp(t, "qrstuvwxyz0123456789ABCDEFGHIJ", 30), 0);
    /* peek waits for n, fill adds one read, -ENOBUFS when full */
    const char* v;
    CHECK_EQ(write(p[1], "0123456789abcdefXYZ", 19), 19);
    CHECK_EQ(aco_rt_bufio_peek(b, 3, &v, aco_rt_in_ms(5000)), 16); /* one read fills the buffer */
    CHECK_EQ(memcmp(v, "0123456789abcdef", 16), 0);
    CHECK_EQ(aco_rt_bufio_fill(b, aco_rt_in_ms(5000)), -ENOBUFS);
    CHECK_EQ(aco_rt_bufio_consume(b, 10), 0);
    CHECK_EQ(aco_rt_bufio_fill(b, aco_rt_in_ms(5000)), 3);
    CHECK_EQ(aco_rt_bufio_peek(b, 0, &v, 0), 9);
    CHECK_EQ(memcmp(v, "abcdefXYZ", 9), 0);
    /* EOF: short counts, then 0 */
    close(p[1]);
    CHECK_EQ(aco_rt_bufio_peek(b, 12, &v, aco_rt_in_ms(5000)), 9);
    CHECK_EQ(aco_rt_bufio_fill(b, aco_rt_in_ms(5000)), 0);
    CHECK_EQ(aco_rt_bufio_read_full(b, t, 12, aco_rt_in_ms(5000)), 9);
    CHECK_EQ(memcmp(t, "abcdefXYZ", 9), 0);
    CHECK_EQ(aco_rt_bufio_read_full(b, t, 12, aco_rt_in_ms(5000)), 0);
    CHECK_EQ(aco_rt_bufio_read(b, t, 12, aco_rt_in_ms(5000)), 0);
    CHECK_EQ(aco_rt_bufio_peek(b, 1, &v, aco_rt_in_ms(5000)), 0);
    aco_rt_bufio_free(b);
    close(p[0]);
}

/* ---------------- writing ---------------- */

static void write_co(void* arg) {
    (void)arg;
    int p[2];
    CHECK_EQ(pipe2(p, O_CLOEXEC), 0);
    CHECK_EQ(fcntl(p[0], F_SETFL, O_NONBLOCK), 0);
    aco_rt_bufio_t* b = aco_rt_bufio_new(p[1], 16, 16);
    char t[64] = {0};
    /* gathered: nothing sent while it fits */
    CHECK_EQ(aco_rt_bufio_write(b, "hello ", 6, -1), 6);
    CHECK_EQ(aco_rt_bufio_write(b, "world", 5, -1), 5);
    CHECK_EQ(aco_rt_bufio_unflushed(b), 11);
    CHECK_EQ(read(p[0], t, sizeof(t)), -1);
    CHECK_EQ(aco_rt_bufio_flush(b, -1), 0);
    CHECK_EQ(aco_rt_bufio_unflushed(b), 0);
    CHECK_EQ(read(p[0], t, sizeof(t)), 11);
    CHECK_EQ(memcmp(t, "hello world", 11), 0);
    CHECK_EQ(aco_rt_bufio_flush(b, -1), 0);
    CHECK_EQ(aco_rt_bufio_flush_more(b, -1), 0);
    /* more than the buffer: all out, in order */
    CHECK_EQ(aco_rt_bufio_write(b, "0123456789", 10, -1), 10);
    CHECK_EQ(aco_rt_bufio_write(b, "abcdefghijklmnopqrstuvwxyz", 26, -1), 26);
    CHECK_EQ(aco_rt_bufio_flush_more(b, -1), 0);
    CHECK_EQ(read(p[0], t, sizeof(t)), 36);
    CHECK_EQ(memcmp(t, "0123456789abcdefghijklmnopqrstuvwxyz", 36), 0);
    /* the reader gone: -EPIPE (no SIGPIPE: default disposition), then
     * every write and flush says it at once */
    close(p[0]);
    CHECK_EQ(aco_rt_bufio_write(b, "x", 1, -1), 1);
    CHECK_EQ(aco_rt_bufio_flush(b, -1), -EPIPE);
    CHECK_EQ(aco_rt_bufio_write(b, "y", 1, -1), -EPIPE);
    CHECK_EQ(aco_rt_bufio_flush(b, -1), -EPIPE);
    CHECK_EQ(aco_rt_bufio_flush_more(b, -1), -EPIPE);
    CHECK_EQ(aco_rt_bufio_write(b, t, 40, -1), -EPIPE);
    aco_rt_bufio_free(b);
    close(p[1]);
    /* an unbuffered big write to a gone reader: -EPIPE */
    CHECK_EQ(pipe2(p, O_CLOEXEC), 0);
    close(p[0]);
    b = aco_rt_bufio_new(p[1], 16, 16);
    CHECK_EQ(aco_rt_bufio_write(b, t, 40, -1), -EPIPE);
    CHECK_EQ(aco_rt_bufio_write(b, t, 1, -1), -EPIPE);
    aco_rt_bufio_free(b);
    close(p[1]);
}

/* deadlines on a full pipe: every byte arrives once, in order */
static int wp[2];
static size_t wtotal;
static int drain_done;
static void drainer(void* arg) {
    unsigned char* got = arg;
    size_t n = 0;
    for (;;) {
        aco_rt_sleep(2 * MS);
        ssize_t r = aco_rt_read(wp[0], got + n, 3000, aco_rt_in_ms(5000));
        CHECK_GE(r, 0);
        if (r == 0) break;
        n += (size_t)r;
    }
    CHECK_EQ(n, wtotal);
    drain_done = 1;
}
static void deadline_write_co(void* arg) {
    (void)arg;
    CHECK_EQ(pipe2(wp, O_CLOEXEC), 0);
    CHECK_EQ(fcntl(wp[1], F_SETPIPE_SZ, 4096), 4096);
    const size_t total = 200000;
    unsigned char* src = malloc(total);
    unsigned char* got = malloc(total + 4096);
    for (size_t i = 0; i < total; i++) src[i] = bb_byte(i, 11);
    wtotal = total;
    drain_done = 0;
    aco_rt_co_t* d = aco_rt_spawn(NULL, drainer, got);
    aco_rt_bufio_t* b = aco_rt_bufio_new(wp[1], 0, 1000);
    size_t off = 0;
    int timeouts = 0;
    uint64_t seed = 7;
    while (off < total) {
        size_t k = 1 + test_rand(&seed) % 3000;
        if (k > total - off) k = total - off;
        ssize_t r = aco_rt_bufio_write(b, src + off, k, aco_rt_in_ns(1 * MS));
        if (r == -ETIMEDOUT) {
            timeouts++;
            continue;
        }
        CHECK_GE(r, 0);
        if ((size_t)r < k) timeouts++;
        off += (size_t)r;
    }
    int f;
    while ((f = aco_rt_bufio_flush(b, aco_rt_in_ns(1 * MS))) == -ETIMEDOUT) timeouts++;
    CHECK_EQ(f, 0);
    CHECK_EQ(aco_rt_bufio_unflushed(b), 0);
    aco_rt_bufio_free(b);
    close(wp[1]);
    CHECK_EQ(aco_rt_join(d, aco_rt_in_ms(5000)), 0);
    CHECK(drain_done);
    CHECK_GT(timeouts, 0);
    for (size_t i = 0; i < total; i++)
        if (got[i] != src[i]) TEST_FAIL_AT(__FILE__, __LINE__, "byte %zu differs", i);
    close(wp[0]);
    free(src);
    free(got);
}

/* ---------------- a transport of one byte at a time ---------------- */

struct slow {
    const char* in;
    size_t in_len, in_pos;
    char out[256];
    size_t out_len;
};
static ssize_t slow_read(void* ctx, void* buf, size_t n, int64_t dl) {
    (void)dl;
    struct slow* s = ctx;
    if (n == 0) return 0;
    if (s->in_pos == s->in_len) return 0;
    ((char*)buf)[0] = s->in[s->in_pos++];
    return 1;
}
static ssize_t slow_writev(void* ctx, const struct iovec* iov, int iovcnt, int64_t dl) {
    (void)dl;
    struct slow* s = ctx;
    for (int i = 0; i < iovcnt; i++)
        if (iov[i].iov_len) {
            CHECK_LT(s->out_len, sizeof(s->out));
            s->out[s->out_len++] = ((const char*)iov[i].iov_base)[0];
            return 1;
        }
    return 0;
}
static const aco_rt_bufio_io_t slow_io = {slow_read, slow_writev};
static void io_co(void* arg) {
    (void)arg;
    struct slow* s = calloc(1, sizeof(*s));
    s->in = "line one\nline two\ntail";
    s->in_len = strlen(s->in);
    aco_rt_bufio_t* b = aco_rt_bufio_new_io(&slow_io, s, -1, 8, 4);
    CHECK(b != NULL);
    CHECK_EQ(aco_rt_bufio_fd(b), -1);
    const char* v;
    CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 0, &v, -1), -EMSGSIZE);
    char t[32];
    CHECK_EQ(aco_rt_bufio_read_full(b, t, 8, -1), 8);
    CHECK_EQ(memcmp(t, "line one", 8), 0);
    CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 0, &v, -1), 1);
    CHECK_EQ(aco_rt_bufio_read_full(b, t, 20, -1), 13);
    CHECK_EQ(memcmp(t, "line two\ntail", 13), 0);
    CHECK_EQ(aco_rt_bufio_read(b, t, 20, -1), 0);
    CHECK_EQ(aco_rt_bufio_write(b, "abc", 3, -1), 3);
    CHECK_EQ(aco_rt_bufio_write(b, "defghijk", 8, -1), 8);
    CHECK_EQ(aco_rt_bufio_flush(b, -1), 0);
    CHECK_EQ(s->out_len, 11);
    CHECK_EQ(memcmp(s->out, "abcdefghijk", 11), 0);
    aco_rt_bufio_free(b);
    /* bad transports */
    errno = 0;
    CHECK(aco_rt_bufio_new_io(NULL, s, -1, 0, 0) == NULL);
    CHECK_EQ(errno, EINVAL);
    aco_rt_bufio_io_t half = {slow_read, NULL};
    errno = 0;
    CHECK(aco_rt_bufio_new_io(&half, s, -1, 0, 0) == NULL);
    CHECK_EQ(errno, EINVAL);
    errno = 0;
    CHECK(aco_rt_bufio_new_io(&slow_io, s, -2, 0, 0) == NULL);
    CHECK_EQ(errno, EINVAL);
    errno = 0;
    CHECK(aco_rt_bufio_new_io(&slow_io, s, -1, (1u << 30) + 1, 0) == NULL);
    CHECK_EQ(errno, EINVAL);
    free(s);
}

static void bufio_backend(void) {
    bb_run(NULL, args_co, NULL);
    bb_run(NULL, until_co, NULL);
    bb_run(NULL, model_co, NULL);
    bb_run(NULL, full_co, NULL);
    bb_run(NULL, write_co, NULL);
    bb_run(NULL, deadline_write_co, NULL);
    bb_run(NULL, io_co, NULL);
    aco_rt_opts_t o = {0};
    o.share_stacks = 1;
    bb_run(&o, until_co, NULL);
    bb_run(&o, full_co, NULL);
}

int main(void) {
    test_watchdog();
    signal(SIGPIPE, SIG_DFL);
    /* outside a co: -EPERM, even with bytes buffered (NULL: -EINVAL first) */
    int p[2];
    CHECK_EQ(pipe2(p, O_CLOEXEC), 0);
    aco_rt_bufio_t* b = aco_rt_bufio_new(p[0], 0, 0);
    CHECK(b != NULL);
    char t[4];
    const char* v;
    CHECK_EQ(aco_rt_bufio_read(b, t, 1, -1), -EPERM);
    CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 0, &v, -1), -EPERM);
    CHECK_EQ(aco_rt_bufio_write(b, "x", 1, -1), -EPERM);
    CHECK_EQ(aco_rt_bufio_flush(b, -1), -EPERM);
    CHECK_EQ(aco_rt_bufio_read(NULL, t, 1, -1), -EINVAL);
    aco_rt_bufio_free(b);
    errno = 0;
    CHECK(aco_rt_bufio_new(-1, 0, 0) == NULL);
    CHECK_EQ(errno, EINVAL);
    errno = 0;
    CHECK(aco_rt_bufio_new(p[0], (1u << 30) + 1, 0) == NULL);
    CHECK_EQ(errno, EINVAL);
    errno = 0;
    CHECK(aco_rt_bufio_new(p[0], 0, (1u << 30) + 1) == NULL);
    CHECK_EQ(errno, EINVAL);
    close(p[0]);
    close(p[1]);
    bb_apart(bufio_backend);
    printf("test_file_bb_bufio: ok\n");
    return 0;
}
