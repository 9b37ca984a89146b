/* test_tls_bb_io.c - reads, writes and ends, from aco_rt_tls.h alone: big
 * transfers (reads of at most a record, writev's pieces in order), a
 * read of 0 bytes, pending and aco_rt_tls_wait with decrypted bytes
 * inside, close_notify (0) against a truncation (-ECONNRESET after the
 * bytes that came, then at once), a TCP reset, -EPIPE for a write to a
 * closed peer (reads go on), a write after our own shutdown, a peer
 * speaking no TLS, a version refused, renegotiation refused, a TLS 1.3
 * key update taken. */
#include "tls_bb_common.h"

static aco_rt_tls_ctx_t *cl, *srv, *srv13;

/* A connected pair of our own (tls_bb_common.h): client *c of cl, server
 * *s of srv. */
static void make_pair(aco_rt_tls_t** c, aco_rt_tls_t** s, int fd[2]) {
    bb_make_pair(cl, srv, c, s, fd);
}
static void free_pair(aco_rt_tls_t* c, aco_rt_tls_t* s, int fd[2]) {
    aco_rt_tls_free(c);
    aco_rt_tls_free(s);
    if (fd[0] >= 0) aco_rt_close(fd[0]);
    if (fd[1] >= 0) aco_rt_close(fd[1]);
}

static unsigned char pat(size_t i) { return (unsigned char)(i * 7 + (i >> 13)); }

/* Read exactly n bytes of the pattern from offset off; each read at most a record. */
static ssize_t read_pat(aco_rt_tls_t* t, size_t off, size_t n, int* bad) {
    static unsigned char buf[65536];
    size_t got = 0;
    while (got < n) {
        ssize_t r = aco_rt_tls_read(t, buf, sizeof buf, DL(5000));
        if (r <= 0) return r;
        if (r > 16384) *bad = 1;
        for (ssize_t i = 0; i < r; i++)
            if (buf[i] != pat(off + got + (size_t)i)) *bad = 2;
        got += (size_t)r;
    }
    return (ssize_t)got;
}

typedef struct {
    aco_rt_tls_t* t;
    size_t n;
    ssize_t r;
    int bad;
} rd_arg_t;
static void reader_co(void* arg) {
    rd_arg_t* a = (rd_arg_t*)arg;
    a->r = read_pat(a->t, 0, a->n, &a->bad);
}

static void transfers(void) {
    aco_rt_tls_t *c, *s;
    int fd[2];
    make_pair(&c, &s, fd);
    size_t N = 4u << 20;
    unsigned char* big = malloc(N);
    CHECK(big != NULL);
    for (size_t i = 0; i < N; i++) big[i] = pat(i);
    rd_arg_t a = {s, N, 0, 0};
    aco_rt_co_t* co = aco_rt_spawn(NULL, reader_co, &a);
    EXPECT_EQ(aco_rt_tls_write(c, big, N, DL(10000)), (long long)N);
    CHECK_EQ(aco_rt_join(co, DL(10000)), 0);
    EXPECT(a.r == (ssize_t)N && a.bad == 0, "4 MiB write: read %zd bad %d", a.r, a.bad);

    /* writev of pieces of every size, a zero-length NULL one among them */
    struct iovec iov[64];
    size_t off = 0;
    int k = 0;
    size_t sizes[] = {1, 0, 2, 100, 16383, 16384, 16385, 3, 40000, 7, 0, 1, 65536, 5};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        iov[k].iov_base = sizes[i] ? big + off : NULL;
        iov[k].iov_len = sizes[i];
        off += sizes[i];
        k++;
    }
    rd_arg_t b = {s, off, 0, 0};
    co = aco_rt_spawn(NULL, reader_co, &b);
    EXPECT_EQ(aco_rt_tls_writev(c, iov, k, DL(10000)), (long long)off);
    CHECK_EQ(aco_rt_join(co, DL(10000)), 0);
    EXPECT(b.r == (ssize_t)off && b.bad == 0, "writev: read %zd of %zu, bad %d", b.r, off, b.bad);
    EXPECT_EQ(aco_rt_tls_writev(c, iov, 0, DL(100)), 0);
    EXPECT_EQ(aco_rt_tls_write(c, big, 0, DL(100)), 0);

    /* decrypted bytes inside t: pending, wait at once, read of 0 keeps them */
    char m[100], r[100];
    memset(m, 'q', sizeof m);
    EXPECT_EQ(aco_rt_tls_write(s, m, sizeof m, DL(1000)), 100);
    EXPECT_EQ(aco_rt_tls_read(c, r, 10, DL(1000)), 10);
    EXPECT(aco_rt_tls_pending(c), "90 decrypted bytes inside, pending 0");
    int64_t t0 = aco_rt_now();
    EXPECT_EQ(aco_rt_tls_wait(c, DL(3000)), 0);
    EXPECT(aco_rt_now() - t0 < 2000 * MS, "tls_wait waited with bytes inside");
    EXPECT_EQ(aco_rt_tls_read(c, r, 0, DL(1000)), 0);
    EXPECT_EQ(aco_rt_tls_read(c, NULL, 0, DL(1000)), 0);
    EXPECT_EQ(aco_rt_tls_read(c, r, sizeof r, 0), 90);   /* past deadline: the bytes are there */
    EXPECT_EQ(aco_rt_tls_pending(c), 0);
    /* nothing inside, nothing on the socket: wait and read time out */
    EXPECT_EQ(aco_rt_tls_wait(c, DL(50)), -ETIMEDOUT);
    EXPECT_EQ(aco_rt_tls_read(c, r, sizeof r, DL(50)), -ETIMEDOUT);
    EXPECT_STR(aco_rt_tls_error(c), strerror(ETIMEDOUT));
    EXPECT_EQ(aco_rt_tls_read(c, r, sizeof r, 0), -ETIMEDOUT);
    /* and after all that the connection is whole */
    EXPECT_EQ(aco_rt_tls_write(s, "ok", 2, DL(1000)), 2);
    EXPECT_EQ(aco_rt_tls_wait(c, DL(3000)), 0);
    EXPECT_EQ(aco_rt_tls_read(c, r, sizeof r, DL(1000)), 2);

    /* close_notify: 0, again 0; the socket still open */
    EXPECT_EQ(aco_rt_tls_shutdown(s, DL(1000)), 0);
    EXPECT_EQ(aco_rt_tls_shutdown(s, DL(1000)), 0);
    EXPECT_EQ(aco_rt_tls_write(s, "x", 1, DL(1000)), -EPIPE);
    EXPECT_EQ(aco_rt_tls_wait(c, DL(3000)), 0);
    EXPECT_EQ(aco_rt_tls_read(c, r, sizeof r, DL(1000)), 0);
    EXPECT_EQ(aco_rt_tls_read(c, r, sizeof r, DL(1000)), 0);
    /* reads of the side that shut go on until the peer's close_notify */
    EXPECT_EQ(aco_rt_tls_write(c, "late", 4, DL(1000)), 4);
    EXPECT_EQ(aco_rt_tls_read(s, r, sizeof r, DL(1000)), 4);
    EXPECT_EQ(aco_rt_tls_shutdown(c, DL(1000)), 0);
    EXPECT_EQ(aco_rt_tls_read(s, r, sizeof r, DL(1000)), 0);
    EXPECT_EQ(aco_rt_tls_write(c, "x", 1, DL(1000)), -EPIPE);
    struct iovec one = {"x", 1};
    EXPECT_EQ(aco_rt_tls_writev(c, &one, 1, DL(1000)), -EPIPE);
    free_pair(c, s, fd);
    free(big);
}

/* A truncation: bytes, then the socket closed without close_notify. */
static void truncation(void) {
    aco_rt_tls_t *c, *s;
    int fd[2];
    make_pair(&c, &s, fd);
    EXPECT_EQ(aco_rt_tls_write(s, "abc", 3, DL(1000)), 3);
    aco_rt_tls_free(s);
    aco_rt_close(fd[1]);
    fd[1] = -1;
    char r[16];
    EXPECT_EQ(aco_rt_tls_read(c, r, sizeof r, DL(1000)), 3);
    EXPECT_EQ(aco_rt_tls_read(c, r, sizeof r, DL(1000)), -ECONNRESET);
    EXPECT(aco_rt_tls_error(c)[0] != 0, "no reason after a truncation");
    int64_t t0 = aco_rt_now();
    EXPECT_EQ(aco_rt_tls_read(c, r, sizeof r, -1), -ECONNRESET);
    EXPECT_EQ(aco_rt_tls_wait(c, -1), -ECONNRESET);
    EXPECT(aco_rt_now() - t0 < 2000 * MS, "done-for calls waited");
    aco_rt_tls_free(c);
    aco_rt_close(fd[0]);

    /* a stream cut in the handshake: the server's end, no TLS bytes back */
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    c = aco_rt_tls_new(cl, sv[0], "localhost");
    EXPECT_EQ(aco_rt_tls_handshake(c, DL(50)), -ETIMEDOUT);    /* hello sent */
    char hello[64];
    EXPECT(recv(sv[1], hello, sizeof hello, MSG_DONTWAIT) > 0, "no client hello sent");
    close(sv[1]);
    int hs = aco_rt_tls_handshake(c, DL(1000));
    EXPECT(hs == -ECONNRESET, "handshake cut by the peer's end: %d (%s) \"%s\"", hs, strerror(-hs),
           aco_rt_tls_error(c));
    aco_rt_tls_free(c);
    aco_rt_close(sv[0]);

    /* the same on a server: a client that connects and goes */
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    close(sv[0]);
    s = aco_rt_tls_new(srv, sv[1], NULL);
    hs = aco_rt_tls_handshake(s, DL(1000));
    EXPECT(hs == -ECONNRESET, "server handshake, client gone: %d (%s) \"%s\"", hs, strerror(-hs),
           aco_rt_tls_error(s));
    aco_rt_tls_free(s);
    aco_rt_close(sv[1]);
}

/* -EPIPE: the peer closed its socket; reads go on with what came. */
static void epipe(void) {
    for (int notify = 0; notify < 2; notify++) {
        aco_rt_tls_t *c, *s;
        int fd[2];
        make_pair(&c, &s, fd);
        EXPECT_EQ(aco_rt_tls_write(s, "xyz", 3, DL(1000)), 3);
        if (notify) EXPECT_EQ(aco_rt_tls_shutdown(s, DL(1000)), 0);
        aco_rt_tls_free(s);
        aco_rt_close(fd[1]);
        fd[1] = -1;
        ssize_t w = aco_rt_tls_write(c, "hello", 5, DL(1000));
        /* a socketpair whose peer is closed: send(2) says EPIPE */
        EXPECT(w == -EPIPE, "notify %d: write to a closed peer: %zd", notify, w);
        EXPECT_EQ(aco_rt_tls_write(c, "hello", 5, DL(1000)), -EPIPE);
        EXPECT_EQ(aco_rt_tls_shutdown(c, DL(1000)), -EPIPE);
        char r[16];
        ssize_t n = aco_rt_tls_read(c, r, sizeof r, DL(1000));
        EXPECT(n == 3, "notify %d: read after -EPIPE: %zd (%s)", notify, n, aco_rt_tls_error(c));
        n = aco_rt_tls_read(c, r, sizeof r, DL(1000));
        EXPECT(n == (notify ? 0 : -ECONNRESET), "notify %d: then read %zd (%s)", notify, n,
               aco_rt_tls_error(c));
        free_pair(c, NULL, fd);
    }
}

/* A TCP reset. */
typedef struct {
    int lfd, afd;
} tcp_arg_t;
static void acc_co(void* arg) {
    tcp_arg_t* a = (tcp_arg_t*)arg;
    a->afd = aco_rt_accept(a->lfd, NULL, NULL, SOCK_CLOEXEC, DL(5000));
}
static void tcp_reset(void) {
    char addr[32];
    int lfd = -1;
    for (int p = 47110; p < 47120 && lfd < 0; p++) {
        snprintf(addr, sizeof addr, "127.0.0.1:%d", p);
        lfd = aco_rt_listen(addr, NULL, -1);
    }
    CHECK(lfd >= 0);
    tcp_arg_t a = {lfd, -1};
    aco_rt_co_t* co = aco_rt_spawn(NULL, acc_co, &a);
    int cfd = aco_rt_dial(addr, NULL, DL(5000));
    CHECK(cfd >= 0);
    CHECK_EQ(aco_rt_join(co, DL(5000)), 0);
    CHECK(a.afd >= 0);
    aco_rt_tls_t* c = aco_rt_tls_new(cl, cfd, "localhost");
    aco_rt_tls_t* s = aco_rt_tls_new(srv, a.afd, NULL);
    bb_hs_t h = {s, -1};
    co = aco_rt_spawn(NULL, bb_hs_co, &h);
    CHECK_EQ(aco_rt_tls_handshake(c, DL(5000)), 0);
    CHECK_EQ(aco_rt_join(co, DL(5000)), 0);
    CHECK_EQ(h.rc, 0);
    struct linger lg = {1, 0};
    CHECK(setsockopt(a.afd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg) == 0);
    aco_rt_tls_free(s);
    aco_rt_close(a.afd);
    char r[16];
    ssize_t n = aco_rt_tls_read(c, r, sizeof r, DL(2000));
    EXPECT(n == -ECONNRESET, "read after a reset: %zd (%s)", n, aco_rt_tls_error(c));
    n = aco_rt_tls_write(c, "x", 1, DL(2000));
    EXPECT(n == -EPIPE || n == -ECONNRESET, "write after a reset: %zd (%s)", n, aco_rt_tls_error(c));
    aco_rt_tls_free(c);
    aco_rt_close(cfd);
    aco_rt_close(lfd);
}

/* A peer that speaks no TLS, and a version refused. */
static void raw_http(bb_raw_t* r, SSL* ssl) { (void)r; (void)ssl; }
static void not_tls(void) {
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    const char req[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    CHECK(write(sv[0], req, sizeof req - 1) == (ssize_t)sizeof req - 1);
    aco_rt_tls_t* s = aco_rt_tls_new(srv, sv[1], NULL);
    int hs = aco_rt_tls_handshake(s, DL(2000));
    EXPECT(hs == -EPROTO, "server, an HTTP request: %d (%s)", hs, aco_rt_tls_error(s));
    EXPECT(aco_rt_tls_error(s)[0] != 0, "server, an HTTP request: no reason");
    EXPECT_EQ(aco_rt_tls_read(s, NULL, 0, -1), -EPROTO);     /* done for */
    aco_rt_tls_free(s);
    close(sv[0]);
    aco_rt_close(sv[1]);

    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    const char resp[] = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
    CHECK(write(sv[1], resp, sizeof resp - 1) == (ssize_t)sizeof resp - 1);
    aco_rt_tls_t* c = aco_rt_tls_new(cl, sv[0], "localhost");
    hs = aco_rt_tls_handshake(c, DL(2000));
    EXPECT(hs == -EPROTO, "client, an HTTP answer: %d (%s)", hs, aco_rt_tls_error(c));
    EXPECT_HAS(aco_rt_tls_error(c), "wrong version number");
    aco_rt_tls_free(c);
    close(sv[1]);
    aco_rt_close(sv[0]);

    /* TLS 1.2 at most against min_version 1.3, both ways */
    bb_raw_t r = {.server = 0, .maxv = TLS1_2_VERSION, .host = "localhost", .fn = raw_http};
    int fd = bb_raw_pair(&r);
    s = aco_rt_tls_new(srv13, fd, NULL);
    hs = aco_rt_tls_handshake(s, DL(2000));
    EXPECT(hs == -EPROTO, "server min 1.3, client 1.2: %d (%s)", hs, aco_rt_tls_error(s));
    EXPECT_HAS(aco_rt_tls_error(s), "unsupported protocol");
    aco_rt_tls_free(s);
    aco_rt_close(fd);
    bb_raw_join(&r);

    aco_rt_tls_opts_t o = {.ca_file = bb_ca_file, .min_version = ACO_RT_TLS_1_3};
    aco_rt_tls_ctx_t* c13 = bb_ctx(o);
    bb_raw_t r2 = {.server = 1, .maxv = TLS1_2_VERSION, .cert = BB_SRV_PEM, .key = BB_SRV_KEY};
    fd = bb_raw_pair(&r2);
    c = aco_rt_tls_new(c13, fd, "localhost");
    hs = aco_rt_tls_handshake(c, DL(2000));
    EXPECT(hs == -EPROTO, "client min 1.3, server 1.2: %d (%s)", hs, aco_rt_tls_error(c));
    EXPECT(aco_rt_tls_error(c)[0] != 0, "client min 1.3: no reason");
    aco_rt_tls_free(c);
    aco_rt_close(fd);
    bb_raw_join(&r2);
    aco_rt_tls_ctx_free(c13);
}

/* Renegotiation: a TLS 1.2 peer of plain OpenSSL asks for one. */
static void raw_reneg_client(bb_raw_t* r, SSL* ssl) {
    SSL_write(ssl, "one", 3);
    r->out = SSL_renegotiate(ssl);
    int hs = SSL_do_handshake(ssl);
    /* whatever the server answered: try to write more and read */
    char b[16];
    SSL_write(ssl, "two", 3);
    int n = SSL_read(ssl, b, sizeof b);
    r->out = hs * 1000 + n;
}
static void raw_reneg_server(bb_raw_t* r, SSL* ssl) {
    SSL_write(ssl, "one", 3);
    SSL_renegotiate(ssl);
    int hs = SSL_do_handshake(ssl);
    SSL_write(ssl, "two", 3);
    char b[16];
    ERR_clear_error();
    int n = SSL_read(ssl, b, sizeof b);
    r->out = hs * 1000 + n;
    ERR_error_string_n(ERR_peek_last_error(), r->errs, sizeof r->errs);
}
static void reneg(void) {
    bb_raw_t r = {.server = 0, .maxv = TLS1_2_VERSION, .host = "localhost", .fn = raw_reneg_client};
    int fd = bb_raw_pair(&r);
    aco_rt_tls_t* s = aco_rt_tls_new(srv, fd, NULL);
    EXPECT_EQ(aco_rt_tls_handshake(s, DL(2000)), 0);
    char b[16];
    ssize_t n = aco_rt_tls_read(s, b, sizeof b, DL(2000));
    EXPECT_EQ(n, 3);
    n = aco_rt_tls_read(s, b, sizeof b, DL(2000));
    /* the renegotiation is refused: never the peer's "two" after a new handshake */
    EXPECT(n == -EPROTO, "server, client renegotiates: read %zd (%s)", n, aco_rt_tls_error(s));
    fprintf(stderr, "  [%s] info: server, client renegotiates: read %zd \"%s\"\n", test_backend_label, n,
            aco_rt_tls_error(s));
    aco_rt_tls_free(s);
    aco_rt_close(fd);
    bb_raw_join(&r);

    bb_raw_t r2 = {.server = 1, .maxv = TLS1_2_VERSION, .cert = BB_SRV_PEM, .key = BB_SRV_KEY,
                   .fn = raw_reneg_server};
    fd = bb_raw_pair(&r2);
    aco_rt_tls_t* c = aco_rt_tls_new(cl, fd, "localhost");
    EXPECT_EQ(aco_rt_tls_handshake(c, DL(2000)), 0);
    n = aco_rt_tls_read(c, b, sizeof b, DL(2000));
    EXPECT_EQ(n, 3);
    /* the hello request is refused with an alert (the server's read fails
     * with no_renegotiation), and no new handshake: the bytes go on */
    n = aco_rt_tls_read(c, b, sizeof b, DL(2000));
    EXPECT(n == 3, "client, server renegotiates: read %zd (%s)", n, aco_rt_tls_error(c));
    n = aco_rt_tls_read(c, b, sizeof b, DL(2000));
    fprintf(stderr, "  [%s] info: client, server renegotiates: then read %zd \"%s\"\n", test_backend_label, n,
            aco_rt_tls_error(c));
    EXPECT(n == -EPROTO, "client, server renegotiates, then its fatal alert: read %zd (%s)", n, aco_rt_tls_error(c));
    aco_rt_tls_free(c);
    aco_rt_close(fd);
    bb_raw_join(&r2);
    EXPECT(strstr(r2.errs, "no renegotiation") != NULL, "the renegotiating server saw \"%s\"", r2.errs);
}

/* A TLS 1.3 key update is no renegotiation: taken. */
static void raw_keyupdate(bb_raw_t* r, SSL* ssl) {
    char b[16];
    SSL_write(ssl, "one", 3);
    SSL_key_update(ssl, SSL_KEY_UPDATE_REQUESTED);
    SSL_write(ssl, "two", 3);
    int n = SSL_read(ssl, b, sizeof b);
    r->out = n;
    SSL_shutdown(ssl);
}
static void keyupdate(void) {
    bb_raw_t r = {.server = 1, .cert = BB_SRV_PEM, .key = BB_SRV_KEY, .fn = raw_keyupdate};
    int fd = bb_raw_pair(&r);
    aco_rt_tls_t* c = aco_rt_tls_new(cl, fd, "localhost");
    EXPECT_EQ(aco_rt_tls_handshake(c, DL(2000)), 0);
    char b[16];
    size_t got = 0;
    while (got < 6) {
        ssize_t n = aco_rt_tls_read(c, b + got, sizeof b - got, DL(2000));
        if (n <= 0) {
            EXPECT(0, "key update: read %zd (%s)", n, aco_rt_tls_error(c));
            break;
        }
        got += (size_t)n;
    }
    EXPECT(got == 6 && memcmp(b, "onetwo", 6) == 0, "key update: %zu bytes", got);
    EXPECT_EQ(aco_rt_tls_write(c, "back", 4, DL(2000)), 4);
    EXPECT_EQ(aco_rt_tls_read(c, b, sizeof b, DL(2000)), 0);
    aco_rt_tls_free(c);
    aco_rt_close(fd);
    bb_raw_join(&r);
    EXPECT_EQ(r.out, 4);
}

static void body(void* arg) {
    (void)arg;
    transfers();
    truncation();
    epipe();
    tcp_reset();
    not_tls();
    reneg();
    keyupdate();
}

int main(void) {
    bb_files();
    cl = bb_client();
    srv = bb_server(BB_SRV_PEM, BB_SRV_KEY);
    aco_rt_tls_opts_t o = {.server = 1, .cert_pem = BB_SRV_PEM, .key_pem = BB_SRV_KEY,
                           .min_version = ACO_RT_TLS_1_3};
    srv13 = bb_ctx(o);
    bb_on_backends(body, NULL);
    aco_rt_tls_ctx_free(cl);
    aco_rt_tls_ctx_free(srv);
    aco_rt_tls_ctx_free(srv13);
    return bb_end("test_tls_bb_io");
}
