/* test_tls_bb_bufio.c - aco_rt_tls_bufio_new, from aco_rt_tls.h and aco_rt.h's
 * "Buffered I/O" alone: lines there and back, a big write and read_full,
 * peek/fill/consume, buffered counts the bufio's bytes only, a flush cut
 * short by its deadline goes on (every byte once, in order), the clean end
 * (the tail without its delimiter, then 0) against a truncation
 * (-ECONNRESET), a write error kept, misuse. */
#include "tls_bb_common.h"

static aco_rt_tls_ctx_t *cl, *srv;

/* A connected pair of our own (tls_bb_common.h): client *c of cl, server
 * *s of srv. */
static void make_pair(aco_rt_tls_t** c, aco_rt_tls_t** s, int fd[2]) {
    bb_make_pair(cl, srv, c, s, fd);
}
static unsigned char pat(size_t i) { return (unsigned char)(i * 5 + (i >> 12)); }

#define LINES 2000
#define BIG (3u << 20)

typedef struct {
    aco_rt_bufio_t* b;
    aco_rt_tls_t* t;
    int phase;
} srv_t;
/* The server: lines, a big block, a tail without newline, close_notify. */
static void server_co(void* arg) {
    srv_t* x = (srv_t*)arg;
    aco_rt_bufio_t* b = x->b;
    char line[64];
    for (int i = 0; i < LINES; i++) {
        int n = snprintf(line, sizeof line, "line %d %.*s\n", i, i % 40, "........................................");
        CHECK_EQ(aco_rt_bufio_write(b, line, (size_t)n, DL(5000)), n);
    }
    CHECK_EQ(aco_rt_bufio_flush(b, DL(5000)), 0);
    unsigned char* big = malloc(BIG);
    CHECK(big != NULL);
    for (size_t i = 0; i < BIG; i++) big[i] = pat(i);
    EXPECT_EQ(aco_rt_bufio_write(b, big, BIG, DL(10000)), BIG);
    EXPECT_EQ(aco_rt_bufio_write(b, "tail", 4, DL(5000)), 4);
    EXPECT_EQ(aco_rt_bufio_flush(b, DL(5000)), 0);
    EXPECT_EQ(aco_rt_bufio_unflushed(b), 0);
    EXPECT_EQ(aco_rt_tls_shutdown(x->t, DL(5000)), 0);
    free(big);
}

static void lines_and_eof(void) {
    aco_rt_tls_t *c, *s;
    int fd[2];
    make_pair(&c, &s, fd);
    aco_rt_bufio_t* bc = aco_rt_tls_bufio_new(c, 0, 0);
    aco_rt_bufio_t* bs = aco_rt_tls_bufio_new(s, 4096, 1000);
    CHECK(bc && bs);
    EXPECT_EQ(aco_rt_bufio_fd(bc), fd[0]);
    EXPECT_EQ(aco_rt_bufio_fd(bs), fd[1]);
    srv_t x = {bs, s, 0};
    aco_rt_co_t* co = aco_rt_spawn(NULL, server_co, &x);
    const char* v;
    char want[64];
    for (int i = 0; i < LINES; i++) {
        int wn = snprintf(want, sizeof want, "line %d %.*s\n", i, i % 40, "........................................");
        ssize_t n = aco_rt_bufio_read_until(bc, '\n', 64, &v, DL(5000));
        if (n != wn || memcmp(v, want, (size_t)n) != 0) {
            EXPECT(0, "line %d: %zd bytes", i, n);
            break;
        }
        if (i == 0) {
            /* what the bufio holds, not what waits inside t */
            EXPECT(aco_rt_bufio_buffered(bc) > 0, "buffered 0 after the first line");
        }
    }
    /* peek at the block's first 100 bytes, consume 10, read_full the rest */
    ssize_t n = aco_rt_bufio_peek(bc, 100, &v, DL(5000));
    EXPECT(n >= 100, "peek: %zd", n);
    int bad = 0;
    for (int i = 0; n >= 100 && i < 100; i++)
        if ((unsigned char)v[i] != pat((size_t)i)) bad = 1;
    EXPECT(!bad, "peek: wrong bytes");
    EXPECT_EQ(aco_rt_bufio_consume(bc, 10), 0);
    unsigned char* big = malloc(BIG);
    CHECK(big != NULL);
    n = aco_rt_bufio_read_full(bc, big, BIG - 10, DL(10000));
    EXPECT_EQ(n, BIG - 10);
    for (size_t i = 0; i + 10 < BIG && n == (ssize_t)(BIG - 10); i++)
        if (big[i] != pat(i + 10)) {
            EXPECT(0, "big block: byte %zu", i + 10);
            break;
        }
    /* the tail, then the end */
    n = aco_rt_bufio_read_until(bc, '\n', 64, &v, DL(5000));
    EXPECT(n == 4 && memcmp(v, "tail", 4) == 0, "tail: %zd", n);
    EXPECT_EQ(aco_rt_bufio_read_until(bc, '\n', 64, &v, DL(5000)), 0);
    EXPECT_EQ(aco_rt_bufio_read(bc, big, 10, DL(5000)), 0);
    EXPECT_EQ(aco_rt_bufio_fill(bc, DL(5000)), 0);
    CHECK_EQ(aco_rt_join(co, DL(10000)), 0);
    aco_rt_bufio_free(bc);
    aco_rt_bufio_free(bs);
    aco_rt_tls_free(c);
    aco_rt_tls_free(s);
    aco_rt_close(fd[0]);
    aco_rt_close(fd[1]);
    free(big);
}

/* A flush cut short while the peer does not read; the peer then reads. */
typedef struct {
    aco_rt_bufio_t* b;
    size_t got;
    int bad;
    ssize_t last;
} sink_t;
static void sink_co(void* arg) {
    sink_t* k = (sink_t*)arg;
    static char buf[30000];
    for (;;) {
        ssize_t n = aco_rt_bufio_read(k->b, buf, sizeof buf, DL(10000));
        if (n <= 0) {
            k->last = n;
            return;
        }
        for (ssize_t i = 0; i < n; i++)
            if ((unsigned char)buf[i] != pat(k->got + (size_t)i)) k->bad = 1;
        k->got += (size_t)n;
    }
}
static void flush_cut(void) {
    aco_rt_tls_t *c, *s;
    int fd[2];
    make_pair(&c, &s, fd);
    aco_rt_bufio_t* bc = aco_rt_tls_bufio_new(c, 0, 1 << 20);
    aco_rt_bufio_t* bs = aco_rt_tls_bufio_new(s, 0, 0);
    size_t N = 6u << 20, off = 0;
    unsigned char* big = malloc(N);
    CHECK(big != NULL);
    for (size_t i = 0; i < N; i++) big[i] = pat(i);
    int timeouts = 0;
    while (off < N) {
        ssize_t w = aco_rt_bufio_write(bc, big + off, N - off > 100000 ? 100000 : N - off, DL(50));
        if (w == -ETIMEDOUT) {
            timeouts++;
            break;
        }
        EXPECT(w > 0, "bufio write: %zd", w);
        if (w <= 0) break;
        off += (size_t)w;
    }
    EXPECT(timeouts > 0, "a write to a peer that does not read never timed out (%zu taken)", off);
    EXPECT_EQ(aco_rt_bufio_flush(bc, DL(50)), -ETIMEDOUT);
    sink_t k = {bs, 0, 0, 1};
    aco_rt_co_t* co = aco_rt_spawn(NULL, sink_co, &k);
    while (off < N) {
        ssize_t w = aco_rt_bufio_write(bc, big + off, N - off, DL(10000));
        EXPECT(w > 0, "bufio write after: %zd", w);
        if (w <= 0) break;
        off += (size_t)w;
    }
    EXPECT_EQ(aco_rt_bufio_flush(bc, DL(10000)), 0);
    EXPECT_EQ(aco_rt_tls_shutdown(c, DL(5000)), 0);
    CHECK_EQ(aco_rt_join(co, DL(20000)), 0);
    EXPECT(k.got == N && !k.bad && k.last == 0, "flush cut: got %zu of %zu bad %d last %zd", k.got, N,
           k.bad, k.last);
    aco_rt_bufio_free(bc);
    aco_rt_bufio_free(bs);
    aco_rt_tls_free(c);
    aco_rt_tls_free(s);
    aco_rt_close(fd[0]);
    aco_rt_close(fd[1]);
    free(big);
}

/* A truncation, a write error kept, deadlines, misuse. */
static void errors(void) {
    aco_rt_tls_t *c, *s;
    int fd[2];
    make_pair(&c, &s, fd);
    aco_rt_bufio_t* bc = aco_rt_tls_bufio_new(c, 0, 0);
    const char* v;
    EXPECT_EQ(aco_rt_bufio_read_until(bc, '\n', 0, &v, DL(50)), -ETIMEDOUT);
    EXPECT_EQ(aco_rt_tls_write(s, "ab\ncd", 5, DL(1000)), 5);
    EXPECT_EQ(aco_rt_bufio_read_until(bc, '\n', 0, &v, DL(1000)), 3);
    EXPECT_EQ(aco_rt_bufio_read_until(bc, '\n', 0, &v, DL(50)), -ETIMEDOUT);   /* "cd" stays */
    EXPECT_EQ(aco_rt_bufio_buffered(bc), 2);
    aco_rt_tls_free(s);
    aco_rt_close(fd[1]);                         /* no close_notify */
    ssize_t n = aco_rt_bufio_read_until(bc, '\n', 0, &v, DL(1000));
    EXPECT(n == -ECONNRESET, "bufio read_until at a truncation: %zd", n);
    /* the bytes that came stay: a read has them */
    char b[8];
    EXPECT_EQ(aco_rt_bufio_read(bc, b, sizeof b, DL(1000)), 2);
    n = aco_rt_bufio_read(bc, b, sizeof b, DL(1000));
    EXPECT(n == -ECONNRESET, "then a read: %zd", n);
    /* the truncation met by a read made t done for: writes say it too, kept */
    EXPECT_EQ(aco_rt_bufio_write(bc, "x", 1, DL(1000)), 1);
    EXPECT_EQ(aco_rt_bufio_flush(bc, DL(1000)), -ECONNRESET);
    EXPECT_EQ(aco_rt_bufio_flush(bc, DL(1000)), -ECONNRESET);
    EXPECT_EQ(aco_rt_bufio_write(bc, "y", 1, DL(1000)), -ECONNRESET);
    aco_rt_bufio_free(bc);
    /* misuse */
    errno = 0;
    EXPECT(aco_rt_tls_bufio_new(c, (size_t)2 << 30, 0) == NULL && errno == EINVAL,
           "rsize 2 GiB: errno %d", errno);
    errno = 0;
    EXPECT(aco_rt_tls_bufio_new(c, 0, (size_t)2 << 30) == NULL && errno == EINVAL,
           "wsize 2 GiB: errno %d", errno);
    aco_rt_tls_free(c);
    aco_rt_close(fd[0]);
}

static void body(void* arg) {
    (void)arg;
    lines_and_eof();
    flush_cut();
    errors();
}

int main(void) {
    bb_files();
    cl = bb_client();
    srv = bb_server(BB_SRV_PEM, BB_SRV_KEY);
    bb_on_backends(body, NULL);
    aco_rt_tls_ctx_free(cl);
    aco_rt_tls_ctx_free(srv);
    return bb_end("test_tls_bb_bufio");
}
