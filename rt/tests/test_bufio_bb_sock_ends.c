/* test_bufio_bb_sock_ends.c - how aco_rt.h's buffered reader and writer
 * end on sockets, socketpairs and pipes, from the header alone: each call
 * parked and ended by a near deadline (-ETIMEDOUT, never early, measured
 * against the deadline), passed deadlines (0, -2, INT64_MIN, a moment ago:
 * at once; a passed deadline still gives the bytes at hand and makes one
 * try at the descriptor), INT64_MAX waiting; a cancel during a parked
 * read_until, peek, read_full, fill, read, flush and a large write (nothing
 * consumed, the unsent bytes kept in order: another co takes the bufio on
 * and every byte comes once), a cancel from a plain thread; read_full past
 * the read buffer cut by a cancel (the count) and a deadline (the count,
 * then -ETIMEDOUT once, even with bytes come since); the peer's half-close
 * while parked (the tail without its delimiter, short counts, then 0; our
 * side still writes), a reset while parked (-ECONNRESET once, the part
 * kept, then the tail and 0), a reset after part of a long read_full; a
 * writer whose peer is gone or reset (-EPIPE or -ECONNRESET, kept, never
 * SIGPIPE: at its default action, and blocked with none left pending); and
 * streams cut by deadlines of 0-300 us and by cancels at random moments on
 * both sides, every byte once and in order. */
#define _GNU_SOURCE
#include "bufio_bb.h"

#include <stdint.h>
#include <sys/ioctl.h>

static char label[32];
static void set_label(int k) {
    snprintf(label, sizeof(label), "%s %s", test_backend_str(test_backend_id), kind_name[k]);
    test_backend_label = label;
}

static void wait_avail(int fd, int n) {
    int64_t dl = in_ms(5000);
    int a = 0;
    while (ioctl(fd, FIONREAD, &a) == 0 && a < n && aco_rt_now() < dl) aco_rt_sleep(1 * MS);
    CHECK_GE(a, n);
}
/* the peer's end of writing: shutdown for a socket, close for a pipe */
static void peer_end(int k, int c[2]) {
    if (k == K_PIPE) {
        CHECK_EQ(close(c[1]), 0);
        c[1] = -1;
    } else {
        CHECK_EQ(shutdown(c[1], SHUT_WR), 0);
    }
}
static unsigned char pat0(size_t i) { return pat_byte(i, 0); }

/* ---------------- deadlines: the reading side ---------------- */
static const int64_t passed[] = {0, -2, INT64_MIN, 1};   /* 1: a moment ago */
static int64_t passed_dl(int i) { return i == 3 ? aco_rt_now() - 1 : passed[i]; }

static int lw_fd;
static void late_line(void* arg) {
    (void)arg;
    aco_rt_sleep(20 * MS);
    CHECK_EQ(write(lw_fd, "late\n", 5), 5);
}

static void case_read_deadlines(int k) {
    int c[2];
    conn(k, 0, c);
    aco_rt_bufio_t* b = aco_rt_bufio_new(c[0], 16, 16);
    CHECK(b != NULL);
    const char* v;
    char t[64];
    /* nothing there: each call waits to its deadline */
    for (int call = 0; call < 6; call++) {
        int64_t dl = in_ms(15);
        ssize_t r = call == 0 ? aco_rt_bufio_read(b, t, 4, dl)
                  : call == 1 ? aco_rt_bufio_read_full(b, t, 4, dl)
                  : call == 2 ? aco_rt_bufio_read_full(b, t, 40, dl)
                  : call == 3 ? aco_rt_bufio_read_until(b, '\n', 0, &v, dl)
                  : call == 4 ? aco_rt_bufio_peek(b, 1, &v, dl)
                  : aco_rt_bufio_fill(b, dl);
        CHECK_EQ(r, -ETIMEDOUT);
        CHECK_NOT_EARLY(dl);
        CHECK_EQ(aco_rt_bufio_buffered(b), 0);
        /* passed: at once */
        for (int i = 0; i < 4; i++) {
            int64_t t0 = aco_rt_now();
            dl = passed_dl(i);
            r = call == 0 ? aco_rt_bufio_read(b, t, 4, dl)
              : call == 1 ? aco_rt_bufio_read_full(b, t, 4, dl)
              : call == 2 ? aco_rt_bufio_read_full(b, t, 40, dl)
              : call == 3 ? aco_rt_bufio_read_until(b, '\n', 0, &v, dl)
              : call == 4 ? aco_rt_bufio_peek(b, 1, &v, dl)
              : aco_rt_bufio_fill(b, dl);
            CHECK_EQ(r, -ETIMEDOUT);
            CHECK_LT(aco_rt_now() - t0, 1000 * MS);
        }
    }
    /* part of a record buffered: the near deadline consumes nothing */
    CHECK_EQ(write(c[1], "abc", 3), 3);
    CHECK_EQ(aco_rt_bufio_peek(b, 3, &v, in_ms(5000)), 3);
    for (int call = 0; call < 3; call++) {
        int64_t dl = in_ms(15);
        ssize_t r = call == 0 ? aco_rt_bufio_read_until(b, '\n', 0, &v, dl)
                  : call == 1 ? aco_rt_bufio_peek(b, 5, &v, dl)
                  : aco_rt_bufio_read_full(b, t, 5, dl);
        CHECK_EQ(r, -ETIMEDOUT);
        CHECK_NOT_EARLY(dl);
        CHECK_EQ(aco_rt_bufio_buffered(b), 3);
        r = call == 0 ? aco_rt_bufio_read_until(b, '\n', 0, &v, 0)
          : call == 1 ? aco_rt_bufio_peek(b, 5, &v, -2)
          : aco_rt_bufio_read_full(b, t, 5, INT64_MIN);
        CHECK_EQ(r, -ETIMEDOUT);
        CHECK_EQ(aco_rt_bufio_buffered(b), 3);
    }
    /* bytes at hand: given whatever the deadline */
    CHECK_EQ(aco_rt_bufio_peek(b, 2, &v, 0), 3);
    CHECK_EQ(aco_rt_bufio_read(b, t, 1, INT64_MIN), 1);
    CHECK_EQ(t[0], 'a');
    CHECK_EQ(aco_rt_bufio_read_full(b, t, 1, -2), 1);
    CHECK_EQ(t[0], 'b');
    /* bytes waiting in the descriptor, a passed deadline: one try takes
     * them (as aco_rt_read's) */
    CHECK_EQ(write(c[1], "xyz\n", 4), 4);
    wait_avail(c[0], 4);
    CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 0, &v, 0), 5);
    CHECK_EQ(memcmp(v, "cxyz\n", 5), 0);
    CHECK_EQ(write(c[1], "12", 2), 2);
    wait_avail(c[0], 2);
    CHECK_EQ(aco_rt_bufio_fill(b, aco_rt_now() - 1), 2);
    CHECK_EQ(write(c[1], "34", 2), 2);
    wait_avail(c[0], 2);
    CHECK_EQ(aco_rt_bufio_peek(b, 4, &v, -2), 4);
    CHECK_EQ(memcmp(v, "1234", 4), 0);
    CHECK_EQ(write(c[1], "56", 2), 2);
    wait_avail(c[0], 2);
    CHECK_EQ(aco_rt_bufio_read_full(b, t, 6, INT64_MIN), 6);
    CHECK_EQ(memcmp(t, "123456", 6), 0);
    CHECK_EQ(write(c[1], "78", 2), 2);
    wait_avail(c[0], 2);
    CHECK_EQ(aco_rt_bufio_read(b, t, 40, 0), 2);
    CHECK_EQ(memcmp(t, "78", 2), 0);
    /* INT64_MAX: no overflow into "passed", it waits */
    lw_fd = c[1];
    aco_rt_co_t* w = go(late_line, NULL);
    CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 0, &v, INT64_MAX), 5);
    CHECK_EQ(memcmp(v, "late\n", 5), 0);
    join(w);
    aco_rt_bufio_free(b);
    close2(c);
}

/* read_full past the read buffer cut by the deadline: the count, then the
 * next read call says -ETIMEDOUT once, even with a new deadline and bytes
 * come since; then the bytes, in order. */
static void case_read_full_cut(int k) {
    int c[2];
    conn(k, 0, c);
    aco_rt_bufio_t* b = aco_rt_bufio_new(c[0], 16, 16);
    CHECK(b != NULL);
    unsigned char src[100], t[100];
    for (size_t i = 0; i < sizeof(src); i++) src[i] = pat0(i);
    CHECK_EQ(write(c[1], src, 30), 30);
    wait_avail(c[0], 30);
    int64_t dl = in_ms(20);
    ssize_t r = aco_rt_bufio_read_full(b, t, 100, dl);
    CHECK_EQ(r, 30);
    CHECK_NOT_EARLY(dl);
    CHECK_EQ(memcmp(t, src, 30), 0);
    CHECK_EQ(write(c[1], src + 30, 70), 70);
    wait_avail(c[0], 70);
    const char* v;
    CHECK_EQ(aco_rt_bufio_peek(b, 1, &v, in_ms(5000)), -ETIMEDOUT);   /* once */
    CHECK_EQ(aco_rt_bufio_read_full(b, t, 70, in_ms(5000)), 70);
    CHECK_EQ(memcmp(t, src + 30, 70), 0);
    /* the same when only buffered bytes were taken before the deadline */
    CHECK_EQ(write(c[1], src, 10), 10);
    CHECK_EQ(aco_rt_bufio_peek(b, 10, &v, in_ms(5000)), 10);
    dl = in_ms(20);
    r = aco_rt_bufio_read_full(b, t, 50, dl);
    CHECK_NOT_EARLY(dl);
    printf("note: [%s] read_full past the buffer, only buffered bytes taken by its deadline: %zd\n",
           label, r);
    if (r == -ETIMEDOUT) {
        CHECK_EQ(aco_rt_bufio_buffered(b), 10);    /* nothing consumed */
        CHECK_EQ(aco_rt_bufio_read_full(b, t, 10, in_ms(5000)), 10);
    } else {
        CHECK_EQ(r, 10);
        CHECK_EQ(aco_rt_bufio_read(b, t + 10, 5, in_ms(5000)), -ETIMEDOUT);
    }
    CHECK_EQ(memcmp(t, src, 10), 0);
    CHECK_EQ(write(c[1], "z", 1), 1);
    CHECK_EQ(aco_rt_bufio_read(b, t, 5, in_ms(5000)), 1);
    CHECK_EQ(t[0], 'z');
    aco_rt_bufio_free(b);
    close2(c);
}

/* ---------------- deadlines: the writing side ---------------- */
typedef struct {
    int fd;
    size_t want, got;
    unsigned char* buf;
    int64_t pause;
} drainer_t;
static void drainer(void* arg) {
    drainer_t* d = arg;
    if (d->pause) aco_rt_sleep(d->pause);
    while (d->got < d->want) {
        size_t n = d->want - d->got;
        if (n > 65536) n = 65536;
        ssize_t r = aco_rt_read(d->fd, d->buf + d->got, n, in_ms(10000));
        CHECK_GT(r, 0);
        d->got += (size_t)r;
    }
}
/* a full descriptor: topped up until a pause lets it take no more (a TCP
 * queue moves on a little at first) */
static size_t fill_full(int w) {
    size_t n = fill_up(w, pat0);
    for (int i = 0; i < 100; i++) {
        aco_rt_sleep(5 * MS);
        size_t m = fill_up_from(w, pat0, n);
        if (m == 0) return n;
        n += m;
    }
    CHECK(!"never full");
    return n;
}

/* A TCP queue that took no more may still move on later (the receiver
 * compacts its queue and opens its window): there a call may also find
 * room before its deadline. */
static void case_write_deadlines(int k) {
    int c[2];
    conn(k, 1, c);
    small_bufs(c[0], c[1]);
    int tcp = k == K_TCP;
    size_t held = fill_full(c[0]);
    aco_rt_bufio_t* b = aco_rt_bufio_new(c[0], 16, 16);
    CHECK(b != NULL);
    CHECK_EQ(aco_rt_bufio_write(b, "0123456789", 10, in_ms(5000)), 10);
    for (int i = 0; i < 6; i++) {
        int64_t t0 = aco_rt_now();
        int64_t dl = i < 4 ? passed_dl(i) : in_ms(15);
        int f = i == 5 ? aco_rt_bufio_flush_more(b, dl) : aco_rt_bufio_flush(b, dl);
        if (f == -ETIMEDOUT) {
            if (i < 4) CHECK_LT(aco_rt_now() - t0, 1000 * MS);
            else CHECK_NOT_EARLY(dl);
        } else {
            CHECK(tcp && f == 0);
        }
        CHECK_LE(aco_rt_bufio_unflushed(b), 10);
        if (!tcp) CHECK_EQ(aco_rt_bufio_unflushed(b), 10);
    }
    /* a write that does not fit: part taken (the count) or none (-errno) */
    static unsigned char big[100];
    for (size_t i = 0; i < sizeof(big); i++) big[i] = (unsigned char)('A' + i % 26);
    int64_t dl = in_ms(15);
    ssize_t r = aco_rt_bufio_write(b, big, sizeof(big), dl);
    size_t taken = r == -ETIMEDOUT ? 0 : (size_t)r;
    if (tcp && r == (ssize_t)sizeof(big)) {
    } else {
        CHECK_NOT_EARLY(dl);
        CHECK(r == -ETIMEDOUT || (r > 0 && r < (ssize_t)sizeof(big)));
    }
    if (!tcp) CHECK_EQ(aco_rt_bufio_unflushed(b), 10 + taken);     /* nothing could go */
    /* the peer reads: a later flush goes on, every byte once, in order */
    drainer_t d = {c[1], held + 10 + taken, 0, malloc(held + 10 + taken), 5 * MS};
    aco_rt_co_t* co = go(drainer, &d);
    CHECK_EQ(aco_rt_bufio_flush(b, in_ms(5000)), 0);
    CHECK_EQ(aco_rt_bufio_unflushed(b), 0);
    join(co);
    for (size_t i = 0; i < held; i++) CHECK_EQ(d.buf[i], pat0(i));
    CHECK_EQ(memcmp(d.buf + held, "0123456789", 10), 0);
    CHECK_EQ(memcmp(d.buf + held + 10, big, taken), 0);
    free(d.buf);
    /* a passed deadline with room: one try sends */
    CHECK_EQ(aco_rt_bufio_write(b, "room", 4, 0), 4);
    CHECK_EQ(aco_rt_bufio_flush(b, 0), 0);
    char t[8];
    CHECK_EQ(aco_rt_read(c[1], t, sizeof(t), in_ms(5000)), 4);
    CHECK_EQ(memcmp(t, "room", 4), 0);
    aco_rt_bufio_free(b);
    close2(c);
}

/* ---------------- cancels ---------------- */
typedef struct {
    aco_rt_bufio_t* b;
    int call;
    volatile int parked;
    ssize_t r;
    char t[128];
} cx_t;
static void cx_reader(void* arg) {
    cx_t* x = arg;
    const char* v;
    x->parked = 1;
    switch (x->call) {
    case 0: x->r = aco_rt_bufio_read_until(x->b, '\n', 0, &v, in_ms(10000)); break;
    case 1: x->r = aco_rt_bufio_peek(x->b, 8, &v, in_ms(10000)); break;
    case 2: x->r = aco_rt_bufio_read_full(x->b, x->t, 8, in_ms(10000)); break;
    case 3: x->r = aco_rt_bufio_fill(x->b, in_ms(10000)); break;
    case 4: x->r = aco_rt_bufio_read(x->b, x->t, 8, in_ms(10000)); break;
    case 5: x->r = aco_rt_bufio_read_full(x->b, x->t, 100, in_ms(10000)); break;
    }
    x->parked = 2;
    /* and later calls of the cancelled co fail at once */
    CHECK_EQ(aco_rt_bufio_read(x->b, x->t, 1, -1), -ECANCELED);
}
static void case_read_cancels(int k) {
    for (int call = 0; call < 6; call++) {
        int c[2];
        conn(k, 0, c);
        static cx_t x;
        memset(&x, 0, sizeof(x));
        x.b = aco_rt_bufio_new(c[0], 16, 16);
        x.call = call;
        CHECK(x.b != NULL);
        /* part of a record first (read: none; read_full past the buffer: 20) */
        const char* first = call == 5 ? "0123456789abcdefghij" : call == 4 ? "" : "par";
        size_t fl = strlen(first);
        const char* v;
        if (fl) CHECK_EQ(write(c[1], first, fl), (ssize_t)fl);
        if (fl && call != 5) CHECK_EQ(aco_rt_bufio_peek(x.b, fl, &v, in_ms(5000)), (ssize_t)fl);
        aco_rt_co_t* co = go(cx_reader, &x);
        while (x.parked == 0) aco_rt_yield();
        aco_rt_sleep(10 * MS);
        CHECK_EQ(x.parked, 1);
        if (call != 5 && call != 4) CHECK_EQ(aco_rt_bufio_buffered(x.b), fl);
        CHECK_EQ(aco_rt_cancel(co), 0);
        join(co);
        char t[128];
        if (call == 5) {
            /* the count taken so far, the bytes in buf */
            CHECK_EQ(x.r, 20);
            CHECK_EQ(memcmp(x.t, first, 20), 0);
            /* another co goes on: perhaps told of the cut once, then the
             * next bytes, none lost */
            CHECK_EQ(write(c[1], "klmn", 4), 4);
            ssize_t r = aco_rt_bufio_read_full(x.b, t, 4, in_ms(5000));
            if (r == -ECANCELED) {
                printf("note: [%s] a co after a cancelled read_full past the buffer got -ECANCELED once\n",
                       label);
                r = aco_rt_bufio_read_full(x.b, t, 4, in_ms(5000));
            }
            CHECK_EQ(r, 4);
            CHECK_EQ(memcmp(t, "klmn", 4), 0);
        } else {
            CHECK_EQ(x.r, -ECANCELED);
            CHECK_EQ(aco_rt_bufio_buffered(x.b), fl);
            /* nothing consumed: another co has the whole record */
            CHECK_EQ(write(c[1], "tial\n", 5), 5);
            if (call == 4) {
                CHECK_EQ(aco_rt_bufio_read(x.b, t, 8, in_ms(5000)), 5);
                CHECK_EQ(memcmp(t, "tial\n", 5), 0);
            } else {
                CHECK_EQ(aco_rt_bufio_read_until(x.b, '\n', 0, &v, in_ms(5000)), 8);
                CHECK_EQ(memcmp(v, "partial\n", 8), 0);
            }
        }
        aco_rt_bufio_free(x.b);
        close2(c);
    }
}

/* a cancel from a plain thread, outside any scheduler */
static aco_rt_co_t* pc_co;
static void* pc_thread(void* arg) {
    (void)arg;
    usleep(30000);
    CHECK_EQ(aco_rt_cancel(pc_co), 0);
    return NULL;
}
static void case_cancel_thread(int k) {
    int c[2];
    conn(k, 0, c);
    static cx_t x;
    memset(&x, 0, sizeof(x));
    x.b = aco_rt_bufio_new(c[0], 16, 16);
    CHECK_EQ(write(c[1], "par", 3), 3);
    pc_co = go(cx_reader, &x);
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, pc_thread, NULL), 0);
    int64_t t0 = aco_rt_now();
    join(pc_co);
    CHECK_EQ(pthread_join(th, NULL), 0);
    CHECK_EQ(x.r, -ECANCELED);
    CHECK_LT(aco_rt_now() - t0, 5000 * MS);
    CHECK_EQ(aco_rt_bufio_buffered(x.b), 3);
    aco_rt_bufio_free(x.b);
    close2(c);
}

/* the writing side: a parked flush, and a large write, cancelled; another
 * co goes on; every byte once, in order */
typedef struct {
    aco_rt_bufio_t* b;
    const unsigned char* src;
    size_t n;
    volatile int parked;
    ssize_t r;
    int flush;
} wx_t;
static void wx_writer(void* arg) {
    wx_t* x = arg;
    x->parked = 1;
    x->r = x->flush ? aco_rt_bufio_flush(x->b, in_ms(10000))
                    : aco_rt_bufio_write(x->b, x->src, x->n, in_ms(10000));
    x->parked = 2;
    CHECK_EQ(aco_rt_bufio_flush(x->b, -1), -ECANCELED);
    CHECK_EQ(aco_rt_bufio_write(x->b, "x", 1, -1), -ECANCELED);
}
static void case_write_cancels(int k) {
    const size_t N = 200000;
    unsigned char* src = malloc(N);
    for (size_t i = 0; i < N; i++) src[i] = pat_byte(i, 3);
    for (int flush = 0; flush < 2; flush++) {
        int c[2];
        conn(k, 1, c);
        small_bufs(c[0], c[1]);
        size_t held = fill_full(c[0]);
        static wx_t x;
        memset(&x, 0, sizeof(x));
        x.b = aco_rt_bufio_new(c[0], 16, flush ? N : 16);
        x.src = src;
        x.n = N;
        x.flush = flush;
        if (flush) {                            /* all held: no system call */
            CHECK_EQ(aco_rt_bufio_write(x.b, src, N, in_ms(5000)), (ssize_t)N);
            CHECK_EQ(aco_rt_bufio_unflushed(x.b), N);
        }
        aco_rt_co_t* co = go(wx_writer, &x);
        while (x.parked == 0) aco_rt_yield();
        aco_rt_sleep(10 * MS);
        CHECK_EQ(x.parked, 1);
        CHECK_EQ(aco_rt_cancel(co), 0);
        join(co);
        size_t taken;
        if (flush) {
            /* the unsent bytes stay buffered, in order */
            CHECK_EQ(x.r, -ECANCELED);
            CHECK_GT(aco_rt_bufio_unflushed(x.b), 0);
            CHECK_LE(aco_rt_bufio_unflushed(x.b), N);
            taken = N;
        } else {
            CHECK(x.r == -ECANCELED || (x.r > 0 && x.r < (ssize_t)N));
            taken = x.r > 0 ? (size_t)x.r : 0;
            CHECK_LE(aco_rt_bufio_unflushed(x.b), taken);
        }
        /* another co: the rest, then a flush; the peer reads it all */
        drainer_t d = {c[1], held + N, 0, malloc(held + N), 2 * MS};
        aco_rt_co_t* dc = go(drainer, &d);
        if (taken < N) CHECK_EQ(aco_rt_bufio_write(x.b, src + taken, N - taken, in_ms(10000)),
                                (ssize_t)(N - taken));
        CHECK_EQ(aco_rt_bufio_flush(x.b, in_ms(10000)), 0);
        join(dc);
        CHECK_EQ(d.got, held + N);
        for (size_t i = 0; i < held; i++) CHECK_EQ(d.buf[i], pat0(i));
        for (size_t i = 0; i < N; i++)
            if (d.buf[held + i] != src[i]) TEST_FAIL_AT(__FILE__, __LINE__, "byte %zu differs", i);
        CHECK_EQ(drain(c[1]), 0);                 /* nothing twice */
        free(d.buf);
        aco_rt_bufio_free(x.b);
        close2(c);
    }
    free(src);
}

/* ---------------- the peer's end while parked ---------------- */
typedef struct {
    int k;
    int* c;
    int64_t pause;
    int how;            /* 0: end of writing, 1: reset */
} ender_t;
static void ender(void* arg) {
    ender_t* e = arg;
    aco_rt_sleep(e->pause);
    if (e->how == 0) {
        peer_end(e->k, e->c);
    } else if (e->k == K_TCP) {
        rst_close(e->c[1]);
        e->c[1] = -1;
    } else {
        /* a socketpair: a close with bytes unread is the reset */
        CHECK_EQ(close(e->c[1]), 0);
        e->c[1] = -1;
    }
}
static void case_half_close(int k) {
    for (int call = 0; call < 5; call++) {
        int c[2];
        conn(k, 0, c);
        aco_rt_bufio_t* b = aco_rt_bufio_new(c[0], 16, 16);
        CHECK(b != NULL);
        unsigned char src[40];
        for (size_t i = 0; i < sizeof(src); i++) src[i] = (unsigned char)('a' + i % 26);
        size_t sent = call == 3 ? 20 : 4;
        CHECK_EQ(write(c[1], src, sent), (ssize_t)sent);
        ender_t e = {k, c, 20 * MS, 0};
        aco_rt_co_t* co = go(ender, &e);
        const char* v;
        char t[64];
        switch (call) {
        case 0:     /* EOF mid-line: the tail without its delimiter, then 0 */
            CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 0, &v, in_ms(5000)), 4);
            CHECK_EQ(memcmp(v, "abcd", 4), 0);
            CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 0, &v, in_ms(5000)), 0);
            CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 0, &v, in_ms(5000)), 0);
            break;
        case 1:     /* peek: fewer only at the end */
            CHECK_EQ(aco_rt_bufio_peek(b, 10, &v, in_ms(5000)), 4);
            CHECK_EQ(memcmp(v, "abcd", 4), 0);
            CHECK_EQ(aco_rt_bufio_peek(b, 10, &v, in_ms(5000)), 4);
            CHECK_EQ(aco_rt_bufio_consume(b, 4), 0);
            CHECK_EQ(aco_rt_bufio_peek(b, 1, &v, in_ms(5000)), 0);
            break;
        case 2:     /* read_full within the buffer: the count */
            CHECK_EQ(aco_rt_bufio_read_full(b, t, 10, in_ms(5000)), 4);
            CHECK_EQ(memcmp(t, "abcd", 4), 0);
            CHECK_EQ(aco_rt_bufio_read_full(b, t, 10, in_ms(5000)), 0);
            break;
        case 3:     /* read_full past it */
            CHECK_EQ(aco_rt_bufio_read_full(b, t, 40, in_ms(5000)), 20);
            CHECK_EQ(memcmp(t, src, 20), 0);
            CHECK_EQ(aco_rt_bufio_read_full(b, t, 40, in_ms(5000)), 0);
            CHECK_EQ(aco_rt_bufio_read(b, t, 40, in_ms(5000)), 0);
            break;
        case 4:     /* fill: 4, then 0 */
            CHECK_EQ(aco_rt_bufio_peek(b, 4, &v, in_ms(5000)), 4);
            CHECK_EQ(aco_rt_bufio_fill(b, in_ms(5000)), 0);
            CHECK_EQ(aco_rt_bufio_fill(b, in_ms(5000)), 0);
            CHECK_EQ(aco_rt_bufio_buffered(b), 4);
            break;
        }
        join(co);
        /* a socket's half-close leaves our writing side as it was */
        if (k != K_PIPE) {
            CHECK_EQ(aco_rt_bufio_write(b, "reply", 5, in_ms(5000)), 5);
            CHECK_EQ(aco_rt_bufio_flush(b, in_ms(5000)), 0);
            CHECK_EQ(aco_rt_read(c[1], t, sizeof(t), in_ms(5000)), 5);
            CHECK_EQ(memcmp(t, "reply", 5), 0);
        }
        aco_rt_bufio_free(b);
        close2(c);
    }
}

/* a reset while parked (sockets): -ECONNRESET once, what came kept */
static void case_reset(int k) {
    for (int call = 0; call < 2; call++) {
        int c[2];
        conn(k, 0, c);
        aco_rt_bufio_t* b = aco_rt_bufio_new(c[0], 16, 16);
        CHECK(b != NULL);
        const char* v;
        char t[64];
        if (k == K_UNIX) CHECK_EQ(write(c[0], "u", 1), 1);  /* unread by the peer */
        size_t sent = call == 0 ? 3 : 20;
        CHECK_EQ(write(c[1], "abcdefghijklmnopqrstuvwxyz", sent), (ssize_t)sent);
        CHECK_EQ(aco_rt_bufio_peek(b, call == 0 ? 3 : 16, &v, in_ms(5000)), call == 0 ? 3 : 16);
        ender_t e = {k, c, 20 * MS, 1};
        aco_rt_co_t* co = go(ender, &e);
        if (call == 0) {
            CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 0, &v, in_ms(5000)), -ECONNRESET);
            CHECK_EQ(aco_rt_bufio_buffered(b), 3);
            /* said once: then the end, and the tail */
            CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 0, &v, in_ms(5000)), 3);
            CHECK_EQ(memcmp(v, "abc", 3), 0);
            CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 0, &v, in_ms(5000)), 0);
        } else {
            /* past the buffer, after part: the count, then why, once */
            CHECK_EQ(aco_rt_bufio_read_full(b, t, 40, in_ms(5000)), 20);
            CHECK_EQ(memcmp(t, "abcdefghijklmnopqrst", 20), 0);
            CHECK_EQ(aco_rt_bufio_read(b, t, 40, in_ms(5000)), -ECONNRESET);
            CHECK_EQ(aco_rt_bufio_read(b, t, 40, in_ms(5000)), 0);
        }
        join(co);
        aco_rt_bufio_free(b);
        close2(c);
    }
}

/* the writer's peer gone or reset: -EPIPE or -ECONNRESET, kept; never
 * SIGPIPE (at its default action here: it would end the process) */
static void case_peer_gone(int k) {
    for (int how = 0; how < 3; how++) {
        if (how == 2 && k != K_TCP) continue;
        int c[2];
        conn(k, 1, c);
        aco_rt_bufio_t* b = aco_rt_bufio_new(c[0], 16, 16);
        CHECK(b != NULL);
        ssize_t err = 0;
        if (how == 1) {
            /* parked in a flush when the reset comes */
            small_bufs(c[0], c[1]);
            fill_full(c[0]);
            CHECK_EQ(aco_rt_bufio_write(b, "abc", 3, in_ms(5000)), 3);
            ender_t e = {k, c, 20 * MS, k == K_PIPE ? 0 : 1};   /* a pipe's reader: closed */
            aco_rt_co_t* co = go(ender, &e);
            err = aco_rt_bufio_flush(b, in_ms(5000));
            /* (a TCP queue may have moved on first) */
            for (int i = 0; i < 100 && err == 0; i++) {
                CHECK_EQ(aco_rt_bufio_write(b, "xyz", 3, in_ms(5000)), 3);
                err = aco_rt_bufio_flush(b, in_ms(5000));
                if (err == 0) aco_rt_sleep(1 * MS);
            }
            join(co);
        } else {
            if (how == 2) rst_close(c[1]);
            else CHECK_EQ(close(c[1]), 0);
            c[1] = -1;
            /* TCP may take a first send before it hears the end */
            for (int i = 0; i < 100 && err == 0; i++) {
                CHECK_EQ(aco_rt_bufio_write(b, "xyz", 3, in_ms(5000)), 3);
                err = aco_rt_bufio_flush(b, in_ms(5000));
                if (err == 0) aco_rt_sleep(1 * MS);
            }
        }
        CHECK(err == -EPIPE || err == -ECONNRESET);
        if (k == K_PIPE) CHECK_EQ(err, -EPIPE);
        /* kept: every later write and flush says it at once */
        CHECK_EQ(aco_rt_bufio_flush(b, in_ms(5000)), err);
        CHECK_EQ(aco_rt_bufio_flush_more(b, in_ms(5000)), err);
        CHECK_EQ(aco_rt_bufio_write(b, "q", 1, in_ms(5000)), err);
        CHECK_EQ(aco_rt_bufio_write(b, "0123456789abcdefghij", 20, in_ms(5000)), err);
        CHECK_EQ(aco_rt_bufio_flush(b, 0), err);
        aco_rt_bufio_free(b);
        close2(c);
    }
    /* SIGPIPE blocked by the program: none left pending by the runtime */
    sigset_t set, old, pend;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    CHECK_EQ(pthread_sigmask(SIG_BLOCK, &set, &old), 0);
    int c[2];
    conn(k, 1, c);
    CHECK_EQ(close(c[1]), 0);
    c[1] = -1;
    aco_rt_bufio_t* b = aco_rt_bufio_new(c[0], 16, 16);
    ssize_t err = 0;
    for (int i = 0; i < 100 && err == 0; i++) {
        CHECK_EQ(aco_rt_bufio_write(b, "xyz", 3, in_ms(5000)), 3);
        err = aco_rt_bufio_flush(b, in_ms(5000));
        if (err == 0) aco_rt_sleep(1 * MS);
    }
    CHECK(err == -EPIPE || err == -ECONNRESET);
    CHECK_EQ(sigpending(&pend), 0);
    CHECK(!sigismember(&pend, SIGPIPE));
    CHECK_EQ(pthread_sigmask(SIG_SETMASK, &old, NULL), 0);
    aco_rt_bufio_free(b);
    close2(c);
}

/* ---------------- streams cut at random ---------------- */
#define RS_LEN (FEW ? 40000 : 300000)
static unsigned char* rs_src;
static unsigned char* rs_dst;
static size_t rs_got;

/* the writer: the stream in random pieces, with random pauses */
typedef struct { int fd; uint64_t seed; int pauses; } rw_t;
static void rs_writer(void* arg) {
    rw_t* w = arg;
    size_t off = 0;
    while (off < RS_LEN) {
        size_t n = 1 + test_rand(&w->seed) % 3000;
        if (n > RS_LEN - off) n = RS_LEN - off;
        CHECK_EQ(aco_rt_write(w->fd, rs_src + off, n, in_ms(10000)), (ssize_t)n);
        size_t before = off;
        off += n;
        if (w->pauses == 2) aco_rt_sleep(300000);   /* slow: readers are cancelled mid-stream */
        else if (test_rand(&w->seed) % 4 == 0) aco_rt_sleep((int64_t)(test_rand(&w->seed) % 200000));
        /* twice, once the reader has it all: a pause its deadlines see */
        int cross = (before < RS_LEN / 3 && off >= RS_LEN / 3) ||
                    (before < 2 * RS_LEN / 3 && off >= 2 * RS_LEN / 3);
        if (w->pauses == 1 && cross) {
            while (rs_got < off) aco_rt_sleep(100000);
            aco_rt_sleep(3 * MS);
        }
    }
}

/* one step of a reader: some bytes by a random call, its deadline dl; the
 * result (-ETIMEDOUT, -ECANCELED) or what it took */
static ssize_t rs_step(aco_rt_bufio_t* b, uint64_t* st, int64_t dl, int big_ok, int* cut) {
    const char* v;
    int call = (int)(test_rand(st) % (big_ok ? 6 : 5));
    size_t want = 1 + test_rand(st) % 16;
    if (want > RS_LEN - rs_got) want = RS_LEN - rs_got;
    ssize_t r;
    switch (call) {
    case 0:
        r = aco_rt_bufio_read_until(b, 'A', 0, &v, dl);
        if (r == -EMSGSIZE) {               /* (so 17 or more are left) */
            r = aco_rt_bufio_read_full(b, rs_dst + rs_got, 16, dl);
            return r;
        }
        if (r > 0) memcpy(rs_dst + rs_got, v, (size_t)r);
        return r;
    case 1:
        r = aco_rt_bufio_peek(b, want, &v, dl);
        if (r > 0) {
            size_t k = (size_t)r < want ? (size_t)r : want;
            memcpy(rs_dst + rs_got, v, k);
            CHECK_EQ(aco_rt_bufio_consume(b, k), 0);
            return (ssize_t)k;
        }
        return r;
    case 2: return aco_rt_bufio_read(b, rs_dst + rs_got, want, dl);
    case 3: return aco_rt_bufio_read_full(b, rs_dst + rs_got, want, dl);
    case 4:
        r = aco_rt_bufio_fill(b, dl);
        return r == -ENOBUFS ? 0 : r < 0 ? r : 0;
    default:
        want = 17 + test_rand(st) % 5000;
        if (want > RS_LEN - rs_got) want = RS_LEN - rs_got;
        r = aco_rt_bufio_read_full(b, rs_dst + rs_got, want, dl);
        if (r >= 0 && (size_t)r < want) *cut = 1;
        return r;
    }
}

static void case_read_race(int k) {
    int c[2];
    conn(k, 0, c);
    aco_rt_bufio_t* b = aco_rt_bufio_new(c[0], 16, 16);
    rw_t w = {c[1], 11, 1};
    memset(rs_dst, 0, RS_LEN);
    rs_got = 0;
    aco_rt_co_t* co = go(rs_writer, &w);
    uint64_t st = 5;
    int timeouts = 0, cut = 0;
    while (rs_got < RS_LEN) {
        int64_t dl = aco_rt_now() + (int64_t)(test_rand(&st) % 300000);
        int was_cut = cut;
        cut = 0;
        ssize_t r = rs_step(b, &st, dl, 1, &cut);
        if (was_cut) {
            /* after a cut read_full the next call says why, once */
            CHECK_EQ(r, -ETIMEDOUT);
            continue;
        }
        if (r == -ETIMEDOUT) {
            timeouts++;
            continue;
        }
        CHECK_GE(r, 0);
        rs_got += (size_t)r;
        CHECK_LE(rs_got, RS_LEN);
    }
    join(co);
    CHECK(memcmp(rs_src, rs_dst, RS_LEN) == 0);
    char t;
    CHECK_EQ(aco_rt_bufio_read(b, &t, 1, 0), -ETIMEDOUT);
    CHECK_GT(timeouts, 0);
    aco_rt_bufio_free(b);
    close2(c);
}

/* readers cancelled at random moments, each one's successor going on */
typedef struct { aco_rt_bufio_t* b; uint64_t st; } rc_t;
static void rc_reader(void* arg) {
    rc_t* x = arg;
    int cut = 0;
    while (rs_got < RS_LEN) {
        ssize_t r = rs_step(x->b, &x->st, in_ms(10000), 0, &cut);
        if (r == -ECANCELED) {
            CHECK(aco_rt_cancelled());
            return;
        }
        CHECK_GE(r, 0);
        rs_got += (size_t)r;
    }
}
static void case_read_cancel_race(int k) {
    int c[2];
    conn(k, 0, c);
    static rc_t x;
    x.b = aco_rt_bufio_new(c[0], 16, 16);
    x.st = 3;
    rw_t w = {c[1], 13, 2};
    memset(rs_dst, 0, RS_LEN);
    rs_got = 0;
    aco_rt_co_t* wc = go(rs_writer, &w);
    uint64_t st = 17;
    int cancels = 0;
    while (rs_got < RS_LEN) {
        aco_rt_co_t* r = go(rc_reader, &x);
        aco_rt_sleep((int64_t)(test_rand(&st) % 500000));
        CHECK_EQ(aco_rt_cancel(r), 0);
        join(r);
        if (rs_got < RS_LEN) cancels++;          /* one cut mid-stream */
    }
    join(wc);
    CHECK(memcmp(rs_src, rs_dst, RS_LEN) == 0);
    CHECK_GT(cancels, 3);
    aco_rt_bufio_free(x.b);
    close2(c);
}

/* writers cut by deadlines and by cancels, a slow reader: every byte once */
typedef struct { aco_rt_bufio_t* b; size_t off; uint64_t st; int dls; } wr_t;
static void wr_writer(void* arg) {
    wr_t* x = arg;
    while (x->off < RS_LEN) {
        size_t n = 1 + test_rand(&x->st) % 5000;
        if (n > RS_LEN - x->off) n = RS_LEN - x->off;
        int64_t dl = x->dls ? aco_rt_now() + (int64_t)(test_rand(&x->st) % 300000) : in_ms(10000);
        ssize_t r = aco_rt_bufio_write(x->b, rs_src + x->off, n, dl);
        if (r == -ETIMEDOUT) continue;
        if (r == -ECANCELED) return;
        CHECK_GT(r, 0);
        x->off += (size_t)r;
    }
    int f;
    while ((f = aco_rt_bufio_flush(x->b, x->dls ? aco_rt_now() + 100000 : in_ms(10000))) == -ETIMEDOUT)
        ;
    if (f == -ECANCELED) return;
    CHECK_EQ(f, 0);
    x->off = RS_LEN + 1;        /* done */
}
static void slow_reader(void* arg) {
    int fd = *(int*)arg;
    uint64_t st = 23;
    while (rs_got < RS_LEN) {
        if (test_rand(&st) % 3 == 0) aco_rt_sleep((int64_t)(test_rand(&st) % 300000));
        size_t n = 1 + test_rand(&st) % 6000;
        if (n > RS_LEN - rs_got) n = RS_LEN - rs_got;
        ssize_t r = aco_rt_read(fd, rs_dst + rs_got, n, in_ms(10000));
        CHECK_GT(r, 0);
        rs_got += (size_t)r;
        CHECK_LE(rs_got, RS_LEN);
    }
}
static void case_write_race(int k) {
    for (int dls = 0; dls < 2; dls++) {
        int c[2];
        conn(k, 1, c);
        small_bufs(c[0], c[1]);
        static wr_t x;
        x.b = aco_rt_bufio_new(c[0], 16, 1000);
        x.off = 0;
        x.st = 29;
        x.dls = dls;
        memset(rs_dst, 0, RS_LEN);
        rs_got = 0;
        aco_rt_co_t* rc = go(slow_reader, &c[1]);
        uint64_t st = 31;
        while (x.off <= RS_LEN) {
            aco_rt_co_t* w = go(wr_writer, &x);
            if (dls) {
                join(w);
            } else {
                aco_rt_sleep((int64_t)(test_rand(&st) % 2000000));
                CHECK_EQ(aco_rt_cancel(w), 0);
                join(w);
            }
        }
        join(rc);
        CHECK(memcmp(rs_src, rs_dst, RS_LEN) == 0);
        CHECK_EQ(drain(c[1]), 0);
        aco_rt_bufio_free(x.b);
        close2(c);
    }
}

static void main_co(void* arg) {
    (void)arg;
    rs_src = malloc(RS_LEN);
    rs_dst = malloc(RS_LEN);
    for (size_t i = 0; i < RS_LEN; i++) rs_src[i] = pat_byte(i, 9);
    for (int k = 0; k < NKIND; k++) {
        set_label(k);
        case_read_deadlines(k);
        case_read_full_cut(k);
        case_write_deadlines(k);
        case_read_cancels(k);
        case_cancel_thread(k);
        case_write_cancels(k);
        case_half_close(k);
        if (k != K_PIPE) case_reset(k);
        case_peer_gone(k);
        case_read_race(k);
        case_read_cancel_race(k);
        case_write_race(k);
    }
    free(rs_src);
    free(rs_dst);
}

static int one_backend(int backend) {
    aco_rt_sched_t* s = test_sched_on(backend, NULL);
    test_go(s, main_co, NULL);
    aco_rt_sched_free(s);
    return 0;
}

int main(void) {
    test_watchdog();
    signal(SIGPIPE, SIG_DFL);
    test_backends_apart(one_backend);
    printf("test_bufio_bb_sock_ends: ok\n");
    return 0;
}
