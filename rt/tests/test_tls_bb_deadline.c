/* test_tls_bb_deadline.c - deadlines, cancels and closes, from aco_rt_tls.h
 * alone, against peers that do not answer: a handshake cut short goes on
 * when called again (client and server); a read that times out in the
 * middle of a record consumes nothing; aco_rt_tls_wait waits past part
 * of a record; a write cut short by the deadline or a cancel returns the
 * count taken and the next write sends the rest of its record first
 * (every byte once, in order); a shutdown stuck behind a full socket goes
 * on; a cancel in each call (-ECANCELED, then at once; the shield lets a
 * goodbye through); aco_rt_close of the socket under a waiting call
 * (-EBADF); the reason after each. */
#include "tls_bb_common.h"

static aco_rt_tls_ctx_t *cl, *srv;

/* A connected pair of our own (tls_bb_common.h): client *c of cl, server
 * *s of srv. */
static void make_pair(aco_rt_tls_t** c, aco_rt_tls_t** s, int fd[2]) {
    bb_make_pair(cl, srv, c, s, fd);
}
static void free_pair(aco_rt_tls_t* c, aco_rt_tls_t* s, int fd[2]) {
    aco_rt_tls_free(c);
    aco_rt_tls_free(s);
    aco_rt_close(fd[0]);
    aco_rt_close(fd[1]);
}
static unsigned char pat(size_t i) { return (unsigned char)(i * 13 + (i >> 11)); }

/* Handshakes cut short by their deadline go on when called again. */
static void handshake_resumes(void) {
    int fd[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fd) == 0);
    aco_rt_tls_t* c = aco_rt_tls_new(cl, fd[0], "localhost");
    aco_rt_tls_t* s = aco_rt_tls_new(srv, fd[1], NULL);
    int64_t t0 = aco_rt_now();
    EXPECT_EQ(aco_rt_tls_handshake(c, 0), -ETIMEDOUT);     /* past: sends its hello, no wait */
    EXPECT_STR(aco_rt_tls_error(c), strerror(ETIMEDOUT));
    EXPECT_EQ(aco_rt_tls_handshake(c, DL(100)), -ETIMEDOUT);
    EXPECT(aco_rt_now() - t0 >= 100 * MS, "deadline fired early");
    EXPECT_EQ(aco_rt_tls_read(c, (char[4]){0}, 4, DL(50)), -ETIMEDOUT);   /* a read does it too */
    /* the server, step by step with past deadlines too */
    EXPECT_EQ(aco_rt_tls_handshake(s, 0), -ETIMEDOUT);
    bb_hs_t a = {s, -1};
    aco_rt_co_t* co = aco_rt_spawn(NULL, bb_hs_co, &a);
    EXPECT_EQ(aco_rt_tls_handshake(c, DL(5000)), 0);
    CHECK_EQ(aco_rt_join(co, DL(5000)), 0);
    EXPECT_EQ(a.rc, 0);
    EXPECT_EQ(aco_rt_tls_handshake(c, 0), 0);     /* a second call: 0 at once */
    EXPECT_EQ(aco_rt_tls_handshake(s, 0), 0);
    EXPECT_EQ(aco_rt_tls_write(c, "hi", 2, DL(1000)), 2);
    char b[4];
    EXPECT_EQ(aco_rt_tls_read(s, b, sizeof b, DL(1000)), 2);
    free_pair(c, s, fd);

    /* a server whose client says nothing */
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fd) == 0);
    s = aco_rt_tls_new(srv, fd[1], NULL);
    EXPECT_EQ(aco_rt_tls_handshake(s, DL(100)), -ETIMEDOUT);
    aco_rt_tls_free(s);
    close(fd[0]);
    aco_rt_close(fd[1]);
}

/* A relay between the server's socket and the client's, that can hold the
 * tail of what it carries back until told. */
typedef struct {
    int from, to;
    int split;                  /* hold back the last `split` bytes of the next chunk */
    aco_rt_sem_t* go;
    int done;
} relay_t;
static void relay_co(void* arg) {
    relay_t* r = (relay_t*)arg;
    static char buf[2][65536];
    char* b = buf[r->split ? 1 : 0];
    for (;;) {
        ssize_t n = aco_rt_read(r->from, b, 65536, DL(10000));
        if (n <= 0) break;
        if (r->split && n > r->split) {
            CHECK_EQ(aco_rt_write(r->to, b, (size_t)(n - r->split), DL(5000)), n - r->split);
            CHECK_EQ(aco_rt_sem_wait(r->go, DL(10000)), 0);
            CHECK_EQ(aco_rt_write(r->to, b + n - r->split, (size_t)r->split, DL(5000)), r->split);
            r->split = 0;
            r->done = 1;
        } else if (aco_rt_write(r->to, b, (size_t)n, DL(5000)) != n)
            break;
    }
    shutdown(r->to, SHUT_WR);
}

static void read_mid_record(void) {
    int a[2], b[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, a) == 0);   /* client - relay */
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, b) == 0);   /* relay - server */
    aco_rt_sem_t* go = malloc(sizeof *go);
    CHECK(go != NULL);
    aco_rt_sem_init(go, 0);
    static relay_t up, down;
    up = (relay_t){.from = a[1], .to = b[0]};
    down = (relay_t){.from = b[0], .to = a[1], .go = go};
    /* two relays on a[1]/b[0]: dup so each direction has its own number */
    down.from = dup(b[0]);
    down.to = dup(a[1]);
    aco_rt_co_t* r1 = aco_rt_spawn(NULL, relay_co, &up);
    aco_rt_co_t* r2 = aco_rt_spawn(NULL, relay_co, &down);
    aco_rt_tls_t* c = aco_rt_tls_new(cl, a[0], "localhost");
    aco_rt_tls_t* s = aco_rt_tls_new(srv, b[1], NULL);
    bb_hs_t h = {s, -1};
    aco_rt_co_t* co = aco_rt_spawn(NULL, bb_hs_co, &h);
    CHECK_EQ(aco_rt_tls_handshake(c, DL(5000)), 0);
    CHECK_EQ(aco_rt_join(co, DL(5000)), 0);
    CHECK_EQ(h.rc, 0);
    /* TLS 1.3: the tickets come first; read them through */
    char m[100], r[200];
    for (int i = 0; i < 100; i++) m[i] = (char)i;
    EXPECT_EQ(aco_rt_tls_write(s, "t", 1, DL(1000)), 1);
    EXPECT_EQ(aco_rt_tls_read(c, r, sizeof r, DL(1000)), 1);
    down.split = 20;
    EXPECT_EQ(aco_rt_tls_write(s, m, sizeof m, DL(1000)), 100);
    /* the head of the record came, not its tail */
    EXPECT_EQ(aco_rt_tls_read(c, r, sizeof r, DL(100)), -ETIMEDOUT);
    EXPECT_EQ(aco_rt_tls_wait(c, DL(100)), -ETIMEDOUT);
    EXPECT_EQ(aco_rt_tls_read(c, r, sizeof r, 0), -ETIMEDOUT);
    fprintf(stderr, "  [%s] info: part of a record inside: pending %d\n", test_backend_label,
            aco_rt_tls_pending(c));
    aco_rt_sem_post(go);
    EXPECT_EQ(aco_rt_tls_wait(c, DL(2000)), 0);
    ssize_t n = aco_rt_tls_read(c, r, sizeof r, DL(2000));
    EXPECT(n == 100 && memcmp(r, m, 100) == 0, "the record after the timeouts: %zd", n);
    EXPECT(down.done, "the relay did not split");
    EXPECT_EQ(aco_rt_tls_shutdown(c, DL(1000)), 0);
    EXPECT_EQ(aco_rt_tls_read(s, r, sizeof r, DL(1000)), 0);
    EXPECT_EQ(aco_rt_tls_shutdown(s, DL(1000)), 0);
    EXPECT_EQ(aco_rt_tls_read(c, r, sizeof r, DL(1000)), 0);
    aco_rt_tls_free(c);
    aco_rt_tls_free(s);
    aco_rt_close(a[0]);
    aco_rt_close(b[1]);
    CHECK_EQ(aco_rt_join(r1, DL(5000)), 0);
    CHECK_EQ(aco_rt_join(r2, DL(5000)), 0);
    aco_rt_close(a[1]);
    aco_rt_close(b[0]);
    aco_rt_close(down.from);
    aco_rt_close(down.to);
    free(go);
}

/* The server's reader: exactly want bytes of the pattern, then the end. */
typedef struct {
    aco_rt_tls_t* t;
    size_t want, got;
    int bad;
    ssize_t last;
} sink_t;
static void sink_co(void* arg) {
    sink_t* k = (sink_t*)arg;
    static unsigned char buf[65536];
    for (;;) {
        ssize_t n = aco_rt_tls_read(k->t, buf, sizeof buf, DL(10000));
        if (n <= 0) {
            k->last = n;
            break;
        }
        for (ssize_t i = 0; i < n; i++)
            if (buf[i] != pat(k->got + (size_t)i) && !k->bad) {
                k->bad = 1;
                fprintf(stderr, "  byte %zu differs\n", k->got + (size_t)i);
            }
        k->got += (size_t)n;
    }
}

typedef struct {
    aco_rt_tls_t* t;
    const unsigned char* buf;
    size_t n;
    ssize_t r;
    int shut;
    int cancel_shield_after;
} wr_t;
static void writer_co(void* arg) {
    wr_t* w = (wr_t*)arg;
    w->r = aco_rt_tls_write(w->t, w->buf, w->n, -1);
    if (w->cancel_shield_after) {
        /* the cancelled co's goodbye: the rest, then close_notify */
        EXPECT_EQ(aco_rt_tls_write(w->t, "x", 1, -1), -ECANCELED);
        EXPECT_STR(aco_rt_tls_error(w->t), strerror(ECANCELED));
        EXPECT_EQ(aco_rt_tls_shutdown(w->t, -1), -ECANCELED);
        EXPECT_EQ(aco_rt_cancel_shield(1), 0);
        size_t off = w->r > 0 ? (size_t)w->r : 0;
        ssize_t r2 = aco_rt_tls_write(w->t, w->buf + off, w->n - off, DL(10000));
        EXPECT(r2 == (ssize_t)(w->n - off), "rest after cancel: %zd of %zu", r2, w->n - off);
        w->shut = aco_rt_tls_shutdown(w->t, DL(5000));
        aco_rt_cancel_shield(0);
    }
}

/* A write cut short (deadline, then cancel) while the peer does not read. */
static void write_cut(int by_cancel) {
    aco_rt_tls_t *c, *s;
    int fd[2];
    make_pair(&c, &s, fd);
    size_t N = 2u << 20;
    unsigned char* big = malloc(N);
    CHECK(big != NULL);
    for (size_t i = 0; i < N; i++) big[i] = pat(i);
    ssize_t r;
    wr_t w = {c, big, N, 0, -1, 1};
    aco_rt_co_t* wco = NULL;
    if (!by_cancel) {
        r = aco_rt_tls_write(c, big, N, DL(200));
        EXPECT(r > 0 && r < (ssize_t)N, "write with nobody reading: %zd", r);
        if (r < 0) r = 0;
        /* a write with a past deadline and a shutdown cut short: the rest stays */
        ssize_t r0 = aco_rt_tls_write(c, big + r, N - (size_t)r, 0);
        EXPECT(r0 == -ETIMEDOUT || r0 >= 0, "second write: %zd", r0);
        if (r0 > 0) r += r0;
        EXPECT_EQ(aco_rt_tls_shutdown(c, DL(100)), -ETIMEDOUT);
        EXPECT_STR(aco_rt_tls_error(c), strerror(ETIMEDOUT));
    } else {
        wco = aco_rt_spawn(NULL, writer_co, &w);
        /* it runs until the full socket parks it */
        CHECK_EQ(aco_rt_yield(), 0);
        CHECK_EQ(aco_rt_cancel(wco), 0);
    }
    sink_t k = {s, N, 0, 0, 0};
    aco_rt_co_t* kco = aco_rt_spawn(NULL, sink_co, &k);
    if (!by_cancel) {
        ssize_t r2 = aco_rt_tls_write(c, big + r, N - (size_t)r, DL(10000));
        EXPECT(r2 == (ssize_t)N - r, "the rest: %zd of %zd", r2, (ssize_t)N - r);
        EXPECT_EQ(aco_rt_tls_shutdown(c, DL(5000)), 0);
    } else {
        CHECK_EQ(aco_rt_join(wco, DL(20000)), 0);
        EXPECT(w.r > 0 && w.r < (ssize_t)N, "cancelled write: %zd", w.r);
        EXPECT_EQ(w.shut, 0);
    }
    CHECK_EQ(aco_rt_join(kco, DL(20000)), 0);
    EXPECT(k.got == N && k.bad == 0 && k.last == 0, "%s: the peer got %zu of %zu, bad %d, end %zd",
           by_cancel ? "cancel" : "deadline", k.got, N, k.bad, k.last);
    free_pair(c, s, fd);
    free(big);
}

/* Cancel in each call; the shield. */
typedef struct {
    aco_rt_tls_t* t;
    int what;           /* 0 handshake, 1 read, 2 wait, 3 shutdown */
    long rc;
    long rc2;
    char err[128];
} cx_t;
static void canc_co(void* arg) {
    cx_t* x = (cx_t*)arg;
    char b[16];
    switch (x->what) {
    case 0: x->rc = aco_rt_tls_handshake(x->t, DL(10000)); break;
    case 1: x->rc = aco_rt_tls_read(x->t, b, sizeof b, DL(10000)); break;
    case 2: x->rc = aco_rt_tls_wait(x->t, DL(10000)); break;
    }
    snprintf(x->err, sizeof x->err, "%s", aco_rt_tls_error(x->t));
    int64_t t0 = aco_rt_now();
    x->rc2 = aco_rt_tls_read(x->t, b, sizeof b, DL(10000));      /* at once */
    EXPECT(aco_rt_now() - t0 < 2000 * MS, "a cancelled co's read waited");
}
static void cancels(void) {
    for (int what = 0; what < 3; what++) {
        int fd[2];
        aco_rt_tls_t *c, *s;
        if (what == 0) {
            CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fd) == 0);
            c = aco_rt_tls_new(cl, fd[0], "localhost");
            s = aco_rt_tls_new(srv, fd[1], NULL);
        } else
            make_pair(&c, &s, fd);
        if (what == 2) {
            /* the server's tickets (TLS 1.3) wait on the socket: take them */
            char t[8];
            EXPECT_EQ(aco_rt_tls_read(c, t, sizeof t, DL(50)), -ETIMEDOUT);
        }
        cx_t x = {c, what, 1, 1, ""};
        aco_rt_co_t* co = aco_rt_spawn(NULL, canc_co, &x);
        CHECK_EQ(aco_rt_yield(), 0);   /* it runs until it parks */
        CHECK_EQ(aco_rt_cancel(co), 0);
        CHECK_EQ(aco_rt_join(co, DL(5000)), 0);
        EXPECT(x.rc == -ECANCELED && x.rc2 == -ECANCELED, "cancel in call %d: %ld then %ld", what,
               x.rc, x.rc2);
        EXPECT(strcmp(x.err, strerror(ECANCELED)) == 0, "cancel in call %d: reason \"%s\"", what, x.err);
        /* the connection goes on in another co: a handshake left half done too */
        bb_hs_t h = {s, -1};
        aco_rt_co_t* hco = aco_rt_spawn(NULL, bb_hs_co, &h);
        EXPECT_EQ(aco_rt_tls_handshake(c, DL(5000)), 0);
        CHECK_EQ(aco_rt_join(hco, DL(5000)), 0);
        EXPECT_EQ(h.rc, 0);
        EXPECT_EQ(aco_rt_tls_write(s, "abc", 3, DL(1000)), 3);
        char b[8];
        EXPECT_EQ(aco_rt_tls_read(c, b, sizeof b, DL(1000)), 3);   /* nothing was consumed */
        free_pair(c, s, fd);
    }
}

/* aco_rt_close of the socket under a waiting read. */
typedef struct {
    aco_rt_tls_t* t;
    ssize_t r, r2;
} cl_t;
static void closed_reader(void* arg) {
    cl_t* x = (cl_t*)arg;
    char b[8];
    x->r = aco_rt_tls_read(x->t, b, sizeof b, DL(5000));
    x->r2 = aco_rt_tls_read(x->t, b, sizeof b, DL(100));
}
static void closes(void) {
    aco_rt_tls_t *c, *s;
    int fd[2];
    make_pair(&c, &s, fd);
    cl_t x = {c, 1, 1};
    aco_rt_co_t* co = aco_rt_spawn(NULL, closed_reader, &x);
    CHECK_EQ(aco_rt_yield(), 0);
    aco_rt_close(fd[0]);
    CHECK_EQ(aco_rt_join(co, DL(5000)), 0);
    EXPECT(x.r == -EBADF, "read under aco_rt_close: %zd", x.r);
    EXPECT(x.r2 == -EBADF, "then: %zd", x.r2);
    aco_rt_tls_free(c);
    aco_rt_tls_free(s);
    aco_rt_close(fd[1]);
}

static void body(void* arg) {
    (void)arg;
    handshake_resumes();
    read_mid_record();
    write_cut(0);
    write_cut(1);
    cancels();
    closes();
}

int main(void) {
    bb_files();
    cl = bb_client();
    srv = bb_server(BB_SRV_PEM, BB_SRV_KEY);
    bb_on_backends(body, NULL);
    aco_rt_tls_ctx_free(cl);
    aco_rt_tls_ctx_free(srv);
    return bb_end("test_tls_bb_deadline");
}
