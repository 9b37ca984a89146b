/* test_bufio_bb_sock_lines.c - aco_rt.h's buffered reader parsing
 * protocols on sockets, socketpairs and pipes, from the header alone: a
 * peer trickling one byte per write, garbage of every byte value, lines
 * shorter, as long as and longer than the limit and the buffer, the
 * delimiter '\n', NUL and 0xff (given as an int past 255 too), against a
 * model (-EMSGSIZE with the bytes left buffered, skipped by peek and
 * consume; the tail at the end without its delimiter, then 0); exactly
 * limit bytes without a delimiter (it reads on: a near deadline never
 * early, nothing consumed; then -EMSGSIZE for a longer record, the tail
 * at the end); length-prefixed records found with peek and consume, those
 * over the buffer by read_full, one cut by the end (the count, every byte
 * there), a length past the buffer (-EINVAL, nothing taken); cos on one
 * 64 KiB share stack reading and writing through their stack buffers; and
 * a pipelined echo, full duplex, two bufios on one TCP socket. */
#define _GNU_SOURCE
#include "bufio_bb.h"

#include <stdint.h>

static char label[32];
static void set_label(int k) {
    snprintf(label, sizeof(label), "%s %s", test_backend_str(test_backend_id), kind_name[k]);
    test_backend_label = label;
}

/* ---- a feeder: data in pieces of 1..maxpiece bytes, pauses, then the end ---- */
typedef struct {
    int k;
    int* c;
    const unsigned char* data;
    size_t len, maxpiece;
    uint64_t seed;
} feed_t;
static void feeder(void* arg) {
    feed_t* f = arg;
    size_t off = 0;
    while (off < f->len) {
        size_t n = 1 + (f->maxpiece > 1 ? test_rand(&f->seed) % f->maxpiece : 0);
        if (n > f->len - off) n = f->len - off;
        CHECK_EQ(aco_rt_write(f->c[1], f->data + off, n, in_ms(10000)), (ssize_t)n);
        off += n;
        uint64_t z = test_rand(&f->seed) % 8;
        if (z == 0) aco_rt_sleep((int64_t)(test_rand(&f->seed) % 50000));
        else if (z < 3) aco_rt_yield();
    }
    if (f->k == K_PIPE) {
        CHECK_EQ(close(f->c[1]), 0);
        f->c[1] = -1;
    } else {
        CHECK_EQ(shutdown(f->c[1], SHUT_WR), 0);
    }
}

/* ---- trickled garbage and lines against a model ---- */
static void case_model(int k) {
    uint64_t seed = 1000 + (uint64_t)k;
    int rounds = FEW ? 3 : 8;
    for (int round = 0; round < rounds; round++) {
        size_t rsize = 1 + test_rand(&seed) % 40;
        size_t n = FEW ? 400 : 1500;
        int delim_int = round % 4 == 0 ? '\n' : round % 4 == 1 ? 0 : round % 4 == 2 ? 0xff : 0x1ff;
        unsigned char delim = (unsigned char)delim_int;
        unsigned char* in = malloc(n);
        for (size_t i = 0; i < n; i++) {
            uint64_t r = test_rand(&seed);
            in[i] = r % 9 == 0 ? delim : (unsigned char)(r >> 20);   /* any byte */
        }
        int c[2];
        conn(k, 0, c);
        feed_t f = {k, c, in, n, round % 2 ? 1 : 64, seed};
        aco_rt_co_t* fc = go(feeder, &f);
        aco_rt_bufio_t* b = aco_rt_bufio_new(c[0], rsize, 1);
        CHECK(b != NULL);
        size_t pos = 0;
        for (;;) {
            size_t lim = test_rand(&seed) % (rsize + 1);
            size_t L = lim ? lim : rsize;
            const char* v;
            ssize_t r = aco_rt_bufio_read_until(b, delim_int, lim, &v, in_ms(10000));
            const unsigned char* nl = memchr(in + pos, delim, n - pos < L ? n - pos : L);
            if (nl) {
                size_t want = (size_t)(nl - (in + pos)) + 1;
                CHECK_EQ(r, (ssize_t)want);
                CHECK_EQ(memcmp(v, in + pos, want), 0);
                CHECK_EQ((unsigned char)v[want - 1], delim);
                pos += want;
            } else if (n - pos > L) {
                CHECK_EQ(r, -EMSGSIZE);
                /* they stay buffered: skip them by peek and consume */
                CHECK_GE(aco_rt_bufio_buffered(b), L);
                ssize_t p = aco_rt_bufio_peek(b, L, &v, in_ms(10000));
                CHECK_GE(p, (ssize_t)L);
                CHECK_EQ(memcmp(v, in + pos, L), 0);
                CHECK_EQ(aco_rt_bufio_consume(b, L), 0);
                pos += L;
            } else if (n - pos > 0) {
                CHECK_EQ(r, (ssize_t)(n - pos));            /* the tail, at the end */
                CHECK_EQ(memcmp(v, in + pos, n - pos), 0);
                pos = n;
            } else {
                CHECK_EQ(r, 0);
                CHECK_EQ(aco_rt_bufio_read_until(b, delim_int, lim, &v, in_ms(10000)), 0);
                break;
            }
        }
        join(fc);
        aco_rt_bufio_free(b);
        close2(c);
        free(in);
    }
}

/* ---- exactly limit bytes without the delimiter: it reads on ---- */
static void case_limit_edge(int k) {
    for (int end = 0; end < 2; end++) {
        int c[2];
        conn(k, 0, c);
        aco_rt_bufio_t* b = aco_rt_bufio_new(c[0], 8, 8);
        const char* v;
        char t[16];
        CHECK_EQ(write(c[1], "1234567\n", 8), 8);          /* the delimiter at the limit */
        CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 0, &v, in_ms(5000)), 8);
        CHECK_EQ(write(c[1], "abc\n", 4), 4);
        CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 4, &v, in_ms(5000)), 4);
        CHECK_EQ(write(c[1], "12345678", 8), 8);
        int64_t dl = in_ms(20);
        CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 0, &v, dl), -ETIMEDOUT);
        CHECK_NOT_EARLY(dl);
        CHECK_EQ(aco_rt_bufio_buffered(b), 8);
        CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 0, &v, 0), -ETIMEDOUT);
        CHECK_EQ(aco_rt_bufio_buffered(b), 8);
        /* a smaller limit sees more than it at once */
        CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 5, &v, -1), -EMSGSIZE);
        if (end) {
            /* the end: a tail of exactly limit bytes */
            if (k == K_PIPE) {
                CHECK_EQ(close(c[1]), 0);
                c[1] = -1;
            } else {
                CHECK_EQ(shutdown(c[1], SHUT_WR), 0);
            }
            CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 0, &v, in_ms(5000)), 8);
            CHECK_EQ(memcmp(v, "12345678", 8), 0);
            CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 0, &v, in_ms(5000)), 0);
        } else {
            /* the delimiter next: a record longer than the limit */
            CHECK_EQ(write(c[1], "\nxy", 3), 3);
            CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 0, &v, in_ms(5000)), -EMSGSIZE);
            CHECK_GE(aco_rt_bufio_buffered(b), 8);
            CHECK_EQ(aco_rt_bufio_read_full(b, t, 8, in_ms(5000)), 8);
            CHECK_EQ(memcmp(t, "12345678", 8), 0);
            CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 0, &v, in_ms(5000)), 1);
            CHECK_EQ(v[0], '\n');
            dl = in_ms(10);
            CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 0, &v, dl), -ETIMEDOUT);
            CHECK_NOT_EARLY(dl);
            CHECK_EQ(aco_rt_bufio_buffered(b), 2);
        }
        aco_rt_bufio_free(b);
        close2(c);
    }
}

/* ---- length-prefixed records ---- */
#define RSZ 64
static void case_records(int k) {
    uint64_t seed = 77 + (uint64_t)k;
    int nrec = FEW ? 60 : 300;
    size_t cap = (size_t)nrec * 260 + 64;
    unsigned char* in = malloc(cap);
    size_t* lens = malloc(sizeof(size_t) * (size_t)nrec);
    size_t n = 0;
    for (int i = 0; i < nrec; i++) {
        size_t L = test_rand(&seed) % 4 == 0 ? 63 + test_rand(&seed) % 190 : test_rand(&seed) % 63;
        lens[i] = L;
        in[n++] = (unsigned char)(L >> 8);
        in[n++] = (unsigned char)L;
        for (size_t j = 0; j < L; j++) in[n++] = (unsigned char)(i * 31 + (int)j);
    }
    /* a record cut by the end: it says 50 bytes, 20 come */
    in[n++] = 0;
    in[n++] = 50;
    for (int j = 0; j < 20; j++) in[n++] = (unsigned char)('a' + j);
    int c[2];
    conn(k, 0, c);
    feed_t f = {k, c, in, n, 100, seed};
    aco_rt_co_t* fc = go(feeder, &f);
    aco_rt_bufio_t* b = aco_rt_bufio_new(c[0], RSZ, 16);
    unsigned char big[300];
    for (int i = 0; i < nrec; i++) {
        const char* v;
        CHECK_GE(aco_rt_bufio_peek(b, 2, &v, in_ms(10000)), 2);
        size_t L = ((size_t)(unsigned char)v[0] << 8) | (unsigned char)v[1];
        CHECK_EQ(L, lens[i]);
        const unsigned char* p;
        if (L + 2 <= RSZ) {
            ssize_t r = aco_rt_bufio_peek(b, L + 2, &v, in_ms(10000));
            CHECK_GE(r, (ssize_t)(L + 2));
            p = (const unsigned char*)v + 2;
            for (size_t j = 0; j < L; j++) CHECK_EQ(p[j], (unsigned char)(i * 31 + (int)j));
            CHECK_EQ(aco_rt_bufio_consume(b, L + 2), 0);
        } else {
            CHECK_EQ(aco_rt_bufio_peek(b, L + 2, &v, in_ms(10000)), -EINVAL);
            CHECK_GE(aco_rt_bufio_buffered(b), 2);          /* nothing taken */
            CHECK_EQ(aco_rt_bufio_consume(b, 2), 0);
            CHECK_EQ(aco_rt_bufio_read_full(b, big, L, in_ms(10000)), (ssize_t)L);
            for (size_t j = 0; j < L; j++) CHECK_EQ(big[j], (unsigned char)(i * 31 + (int)j));
        }
    }
    /* the cut one: peek gives what came (fewer only at the end), read_full
     * the same, every byte there; then 0 */
    const char* v;
    CHECK_EQ(aco_rt_bufio_peek(b, 52, &v, in_ms(10000)), 22);
    CHECK_EQ(v[0], 0);
    CHECK_EQ(v[1], 50);
    CHECK_EQ(memcmp(v + 2, "abcdefghijklmnopqrst", 20), 0);
    CHECK_EQ(aco_rt_bufio_read_full(b, big, 52, in_ms(10000)), 22);
    CHECK_EQ(memcmp(big + 2, "abcdefghijklmnopqrst", 20), 0);
    CHECK_EQ(aco_rt_bufio_peek(b, 2, &v, in_ms(10000)), 0);
    CHECK_EQ(aco_rt_bufio_read_full(b, big, 2, in_ms(10000)), 0);
    join(fc);
    aco_rt_bufio_free(b);
    close2(c);
    free(in);
    free(lens);
}

/* ---- cos on one 64 KiB share stack: their buffers on it ---- */
#define SS_PAIRS 4
#define SS_BLOCK 8192
typedef struct {
    int k;
    int c[2];
    int id;
    int done;
} ss_t;
static unsigned char ss_byte(int id, size_t i) { return (unsigned char)(id * 37 + i * 13 + (i >> 8)); }
__attribute__((noinline)) static void ss_writer(void* arg) {
    ss_t* x = arg;
    unsigned char buf[SS_BLOCK];          /* on the share stack */
    char line[64];
    aco_rt_bufio_t* b = aco_rt_bufio_new(x->c[1], 0, 1024);
    CHECK(b != NULL);
    for (int round = 0; round < 3; round++) {
        int n = snprintf(line, sizeof(line), "pair %d round %d\n", x->id, round);
        CHECK_EQ(aco_rt_bufio_write(b, line, (size_t)n, in_ms(10000)), n);
        for (size_t i = 0; i < sizeof(buf); i++) buf[i] = ss_byte(x->id + round, i);
        CHECK_EQ(aco_rt_bufio_write(b, buf, 100, in_ms(10000)), 100);           /* kept */
        CHECK_EQ(aco_rt_bufio_write(b, buf + 100, sizeof(buf) - 100, in_ms(10000)),
                 (ssize_t)(sizeof(buf) - 100));                                  /* out */
        CHECK_EQ(aco_rt_bufio_flush(b, in_ms(10000)), 0);
        aco_rt_sleep(1 * MS);
        for (size_t i = 0; i < sizeof(buf); i++) CHECK_EQ(buf[i], ss_byte(x->id + round, i));
    }
    aco_rt_bufio_free(b);
}
__attribute__((noinline)) static void ss_reader(void* arg) {
    ss_t* x = arg;
    unsigned char buf[SS_BLOCK];          /* on the share stack */
    char line[64], want[64];
    aco_rt_bufio_t* b = aco_rt_bufio_new(x->c[0], 1024, 0);
    CHECK(b != NULL);
    for (int round = 0; round < 3; round++) {
        const char* v;
        ssize_t n = aco_rt_bufio_read_until(b, '\n', 64, &v, in_ms(10000));
        int wn = snprintf(want, sizeof(want), "pair %d round %d\n", x->id, round);
        CHECK_EQ(n, wn);
        memcpy(line, v, (size_t)n);
        memset(buf, 0, sizeof(buf));
        CHECK_EQ(aco_rt_bufio_read_full(b, buf, 10, in_ms(10000)), 10);      /* by the buffer */
        CHECK_EQ(aco_rt_bufio_read_full(b, buf + 10, sizeof(buf) - 10, in_ms(10000)),
                 (ssize_t)(sizeof(buf) - 10));                               /* straight */
        for (size_t i = 0; i < sizeof(buf); i++) CHECK_EQ(buf[i], ss_byte(x->id + round, i));
        CHECK_EQ(memcmp(line, want, (size_t)wn), 0);
    }
    aco_rt_bufio_free(b);
    x->done = 1;
}
static void run_share_stack(int backend) {
    aco_rt_sched_t* s = test_one_stack_sched(backend);
    static ss_t x[SS_PAIRS];
    for (int i = 0; i < SS_PAIRS; i++) {
        x[i].k = i % 3;
        x[i].id = i;
        x[i].done = 0;
        conn(x[i].k, 0, x[i].c);
        aco_rt_co_t* r = aco_rt_spawn(s, ss_reader, &x[i]);
        aco_rt_co_t* w = aco_rt_spawn(s, ss_writer, &x[i]);
        CHECK(r && w);
        CHECK_EQ(aco_rt_detach(r), 0);
        CHECK_EQ(aco_rt_detach(w), 0);
    }
    test_run(s);
    for (int i = 0; i < SS_PAIRS; i++) {
        CHECK(x[i].done);
        close2(x[i].c);
    }
    aco_rt_sched_free(s);
}

/* ---- a pipelined echo, full duplex: the client's writer and reader are
 * two cos with a bufio each on one TCP socket ---- */
#define ECHO_N (FEW ? 300 : 2000)
static int ec[2];
static void echo_server(void* arg) {
    (void)arg;
    aco_rt_bufio_t* b = aco_rt_bufio_new(ec[1], 256, 512);
    const char* v;
    ssize_t n;
    while ((n = aco_rt_bufio_read_until(b, '\n', 0, &v, in_ms(10000))) > 0) {
        CHECK_EQ(aco_rt_bufio_write(b, v, (size_t)n, in_ms(10000)), n);
        /* flush once no more requests are at hand */
        if (aco_rt_bufio_buffered(b) == 0) CHECK_EQ(aco_rt_bufio_flush(b, in_ms(10000)), 0);
    }
    CHECK_EQ(n, 0);
    CHECK_EQ(aco_rt_bufio_flush(b, in_ms(10000)), 0);
    CHECK_EQ(shutdown(ec[1], SHUT_WR), 0);
    aco_rt_bufio_free(b);
}
static void echo_writer(void* arg) {
    (void)arg;
    aco_rt_bufio_t* b = aco_rt_bufio_new(ec[0], 16, 100);
    char line[64];
    for (int i = 0; i < ECHO_N; i++) {
        int n = snprintf(line, sizeof(line), "request %d %.*s\n", i, i % 37, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
        CHECK_EQ(aco_rt_bufio_write(b, line, (size_t)n, in_ms(10000)), n);
        if (i % 7 == 0) CHECK_EQ(aco_rt_bufio_flush_more(b, in_ms(10000)), 0);
    }
    CHECK_EQ(aco_rt_bufio_flush(b, in_ms(10000)), 0);
    CHECK_EQ(shutdown(ec[0], SHUT_WR), 0);
    aco_rt_bufio_free(b);
}
static void echo_reader(void* arg) {
    (void)arg;
    aco_rt_bufio_t* b = aco_rt_bufio_new(ec[0], 100, 16);
    char want[64];
    const char* v;
    for (int i = 0; i < ECHO_N; i++) {
        int n = snprintf(want, sizeof(want), "request %d %.*s\n", i, i % 37, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
        CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 0, &v, in_ms(10000)), n);
        CHECK_EQ(memcmp(v, want, (size_t)n), 0);
    }
    CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 0, &v, in_ms(10000)), 0);
    aco_rt_bufio_free(b);
}
static void case_echo(void) {
    tcp_pair(ec);
    aco_rt_co_t* s = go(echo_server, NULL);
    aco_rt_co_t* w = go(echo_writer, NULL);
    aco_rt_co_t* r = go(echo_reader, NULL);
    join(w);
    join(r);
    join(s);
    close2(ec);
}

static void main_co(void* arg) {
    (void)arg;
    for (int k = 0; k < NKIND; k++) {
        set_label(k);
        case_model(k);
        case_limit_edge(k);
        case_records(k);
    }
    test_backend_label = test_backend_str(test_backend_id);
    case_echo();
}

static int one_backend(int backend) {
    aco_rt_sched_t* s = test_sched_on(backend, NULL);
    test_go(s, main_co, NULL);
    aco_rt_sched_free(s);
    run_share_stack(backend);
    return 0;
}

int main(void) {
    test_watchdog();
    signal(SIGPIPE, SIG_DFL);
    test_backends_apart(one_backend);
    printf("test_bufio_bb_sock_lines: ok\n");
    return 0;
}
