/* chaos_resp.c - a crowd of misbehaving clients for a RESP server (aco_resp),
 * written on plain threads and blocking sockets (not on the runtime, so it
 * judges the server independently), and the checks of what must survive.
 *
 *   chaos_resp --port P --seconds S [--pid PID] [--workers W] [--idle N]
 *              [--slow K] [--seed X] [--only SCENARIO] [--slack-mib M]
 *
 * For S seconds W worker threads each pick, again and again, one of:
 *   good       SETs of unique keys (binary values, multibulk or inline,
 *              sent in random pieces, pipelined), each recorded as
 *              acknowledged only once its +OK is read; some read back at
 *              once; the connection kept for a few batches, then closed,
 *              reset (SO_LINGER 0) or ended by QUIT
 *   halfclose  a pipeline of SETs, then shutdown(SHUT_WR): every reply
 *              must still arrive, then the server's EOF
 *   cut        a command cut short, then close or reset (after some good
 *              commands on the same connection)
 *   unread     complete SETs, then a reset before reading the replies
 *   garbage    random bytes, then close, reset, or half-close (then the
 *              server must close within 20 s)
 *   proto      a protocol error: the reply must be that error, then EOF
 *   oversize   an inline line over 64 KiB (error, then EOF), or a bulk
 *              announced at 512 MiB followed by a few MiB and a close
 *   big        a SET of a 1-4 MiB value (within a budget of 64 MiB)
 *   writeall   300000 GETs written whole before a reply is read (one such
 *              connection at a time, one a second)
 * while one thread trickles SETs 1 byte per 10-100 ms on K connections
 * (slowloris; each +OK is an acknowledged SET) and one opens N idle
 * connections (a quarter with half a command sent), holds them a few
 * seconds (with --pid: the server must then hold N more descriptors), drops
 * them (half by reset) and starts over.
 *
 * Then, with every connection closed: each acknowledged SET must read back
 * with its value (GET, on 4 connections), DBSIZE must count them, PING must
 * answer; with --pid, the server's open descriptors must come back to their
 * count before the run (within 20 s), and its RSS within
 *   baseline + 2 * (key and value bytes stored) + 128 * keys
 *            + 40 KiB * most connections open at once + 32 MiB:
 * the store grows by its data (twice: a big value also passed through an
 * input buffer, and the holes both leave behind are kept; measured: 1-4
 * MiB values rewritten, RSS settles at twice their size) plus per key about
 * 48 bytes of header and allocator rounding and at most 64 of table slots
 * (load 3/8 to 3/4, two tables while it grows); memory a closed connection freed may stay with
 * the allocator (glibc keeps a freed hole mapped) but is reused, so it is
 * bounded by the connections open at once (a 16 KiB input buffer, its
 * co's save stack, its socket) and not by how many came and went; 32 MiB
 * (--slack-mib: a sanitizer's allocator keeps far more) for the
 * allocator's per-thread arenas and what it keeps.  A leak grows
 * with the run, which the 10-minute soak makes far larger than the bound
 * (the store's data is capped: later SETs overwrite).
 *
 * Exit status 0 only if every check held; the first failures are printed.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define CHAOS_NAME "chaos_resp"
#define MAX_WORKERS 64
#define IO_TIMEOUT_S 20             /* a reply that takes longer is a failure */
#define SEND_PIECE 4096
#define BIG_BUDGET ((int64_t)64 << 20)
#define KEY_BUDGET ((int64_t)32 << 20)     /* then good SETs overwrite */
#define MAYBE_KEYS 1000             /* unread SETs reuse these keys */

#include "chaos.h"

static int nidle = 3000, nslow = 40;
static atomic_long big_bytes, stored_bytes, key_bytes, maybe_bytes;

enum { S_GOOD, S_HALFCLOSE, S_CUT, S_UNREAD, S_GARBAGE, S_PROTO, S_OVERSIZE, S_BIG, S_WRITEALL,
       S_SLOW, S_IDLE, S_N };
static const char* const scen_name[S_N] = {"good", "halfclose", "cut", "unread", "garbage",
                                           "proto", "oversize", "big", "writeall", "slow", "idle"};
static atomic_long scen_runs[S_N];
/* The workers' mix: where the share of each ends in a draw of 0-99 (a
 * writeall comes of a 0, one a second at most). */
static const unsigned char scen_upto[S_BIG + 1] = {
    [S_GOOD] = 45, [S_HALFCLOSE] = 55, [S_CUT] = 65, [S_UNREAD] = 70, [S_GARBAGE] = 80,
    [S_PROTO] = 90, [S_OVERSIZE] = 97, [S_BIG] = 100};

/* ---- keys and values ------------------------------------------------------
 * A key is named by (namespace, worker, seq) and its value by those and a
 * version, so the expected value is recomputed, never kept. */
enum { NS_KEY, NS_BIG, NS_SLOW, NS_CUT, NS_MAYBE, NS_PIPE };
static const char* const ns_name[] = {"chaos", "chaosbig", "chaosslow", "chaoscut", "chaosmaybe",
                                      "chaospipe"};

static size_t key_of(char* k, int ns, unsigned w, uint64_t seq) {
    return (size_t)sprintf(k, "%s:%u:%llu", ns_name[ns], w, (unsigned long long)seq);
}

static uint64_t val_seed(int ns, unsigned w, uint64_t seq, unsigned ver) {
    return mix(seed ^ mix(((uint64_t)ns << 56) ^ ((uint64_t)w << 40) ^ seq) ^ ((uint64_t)ver << 20));
}

/* Inline commands carry printable values without blanks or quotes. */
static int is_inline(int ns, uint64_t seq, unsigned ver) {
    return ns == NS_KEY && (val_seed(ns, 0, seq, ver) & 7) == 7;
}

static size_t val_len(int ns, unsigned w, uint64_t seq, unsigned ver) {
    uint64_t h = val_seed(ns, w, seq, ver);
    if (ns == NS_BIG) return ((size_t)1 << 20) + (size_t)(h % (3 << 20));
    if (ns == NS_SLOW) return (size_t)(h % 16);     /* 1 byte per 10-100 ms */
    if (ns == NS_PIPE) return 100;
    if (is_inline(ns, seq, ver)) return 1 + (size_t)(h % 200);
    if ((h >> 8) % 32 == 0) return (size_t)((h >> 16) % 16384);
    return (size_t)((h >> 16) % 64);   /* empty values too */
}

static void val_fill(char* v, size_t n, int ns, unsigned w, uint64_t seq, unsigned ver) {
    uint64_t h = val_seed(ns, w, seq, ver) * 31;
    int printable = is_inline(ns, seq, ver);
    for (size_t i = 0; i < n; i += 8) {
        uint64_t x = mix(h + i);
        for (size_t j = 0; j < 8 && i + j < n; j++, x >>= 8)
            v[i + j] = printable ? (char)('a' + (x & 0xff) % 26) : (char)(x & 0xff);
    }
}

static void buf_bulk(buf_t* b, const char* s, size_t n) {
    buf_fmt(b, "$%zu\r\n", n);
    buf_add(b, s, n);
    buf_add(b, "\r\n", 2);
}

/* Append SET key value for (ns, w, seq, ver); returns the value's length. */
static size_t add_set(buf_t* b, int ns, unsigned w, uint64_t seq, unsigned ver) {
    char k[64];
    size_t kl = key_of(k, ns, w, seq), vl = val_len(ns, w, seq, ver);
    if (is_inline(ns, seq, ver)) {
        buf_fmt(b, "SET %s ", k);
        buf_reserve(b, vl + 2);
        val_fill(b->p + b->len, vl, ns, w, seq, ver);
        b->len += vl;
        buf_add(b, "\r\n", 2);
        return vl;
    }
    buf_add(b, "*3\r\n$3\r\nSET\r\n", 13);
    buf_bulk(b, k, kl);
    buf_fmt(b, "$%zu\r\n", vl);
    buf_reserve(b, vl + 2);
    val_fill(b->p + b->len, vl, ns, w, seq, ver);
    b->len += vl;
    buf_add(b, "\r\n", 2);
    return vl;
}

static void add_get(buf_t* b, int ns, unsigned w, uint64_t seq) {
    char k[64];
    size_t kl = key_of(k, ns, w, seq);
    buf_add(b, "*2\r\n$3\r\nGET\r\n", 13);
    buf_bulk(b, k, kl);
}

/* ---- replies -------------------------------------------------------------- */
/* One line without its \r\n (into line, NUL-terminated, cut at cap-1):
 * its length, or -1 at EOF, error or timeout. */
static long rd_line(rd_t* r, char* line, size_t cap) {
    for (;;) {
        char* s = r->b.p + r->off;
        char* nl = r->b.len > r->off ? memmem(s, r->b.len - r->off, "\r\n", 2) : NULL;
        if (nl) {
            size_t n = (size_t)(nl - s);
            size_t c = n < cap - 1 ? n : cap - 1;
            memcpy(line, s, c);
            line[c] = 0;
            r->off += n + 2;
            return (long)n;
        }
        if (rd_fill(r) <= 0) return -1;
    }
}

/* n bytes and their \r\n: a pointer into the reader (valid until the next
 * read), or NULL. */
static const char* rd_bulk(rd_t* r, size_t n) {
    while (r->b.len - r->off < n + 2) {
        /* keep what is there and make room for the rest */
        rd_compact(r);
        buf_reserve(&r->b, n + 2);
        if (rd_fill(r) <= 0) return NULL;
    }
    const char* p = r->b.p + r->off;
    r->off += n + 2;
    return p;
}

/* Expect a simple reply: 0 if it is want. */
static int expect_line(rd_t* r, const char* want, const char* what) {
    char line[256];
    if (rd_line(r, line, sizeof(line)) < 0) {
        fail("%s: no reply (wanted %s): %s", what, want, errno ? strerror(errno) : "EOF");
        return -1;
    }
    if (strcmp(line, want) != 0) {
        fail("%s: reply '%s', wanted '%s'", what, line, want);
        return -1;
    }
    return 0;
}

/* Read a GET reply and compare it with (ns, w, seq, ver): 0 if equal. */
static int expect_value(rd_t* r, int ns, unsigned w, uint64_t seq, unsigned ver, buf_t* tmp) {
    char line[256], k[64];
    key_of(k, ns, w, seq);
    if (rd_line(r, line, sizeof(line)) < 0) {
        fail("GET %s: no reply: %s", k, errno ? strerror(errno) : "EOF");
        return -1;
    }
    size_t vl = val_len(ns, w, seq, ver);
    char* end;
    if (line[0] != '$' || strtoll(line + 1, &end, 10) != (long long)vl || *end) {
        fail("GET %s: reply '%s', wanted $%zu (version %u)", k, line, vl, ver);
        return -1;
    }
    const char* got = rd_bulk(r, vl);
    if (got == NULL) {
        fail("GET %s: value cut short", k);
        return -1;
    }
    tmp->len = 0;
    buf_reserve(tmp, vl);
    val_fill(tmp->p, vl, ns, w, seq, ver);
    if (memcmp(got, tmp->p, vl) != 0 || got[vl] != '\r' || got[vl + 1] != '\n') {
        fail("GET %s: the value differs (version %u, %zu bytes)", k, ver, vl);
        return -1;
    }
    return 0;
}

/* ---- what each worker knows is stored ------------------------------------ */
typedef struct { uint64_t seq; unsigned ver; int ns; } ack_t;
typedef struct {
    unsigned id;
    rng_t rng;
    ack_t* acks;
    size_t nacks, cap;
    uint64_t next_seq;
    unsigned char maybe_sent[MAYBE_KEYS];   /* counted in maybe_bytes */
    buf_t out, tmp;
} worker_t;

static worker_t workers[MAX_WORKERS + 1];   /* the last: the slowloris thread */

static void ack_add(worker_t* w, int ns, uint64_t seq, unsigned ver) {
    if (w->nacks == w->cap) {
        w->cap = w->cap ? 2 * w->cap : 1024;
        w->acks = realloc(w->acks, w->cap * sizeof(*w->acks));
        if (w->acks == NULL) { fprintf(stderr, "chaos_resp: out of memory\n"); exit(2); }
    }
    w->acks[w->nacks++] = (ack_t){seq, ver, ns};
    char k[64];
    long n = (long)(key_of(k, ns, w->id, seq) + val_len(ns, w->id, seq, ver));
    atomic_fetch_add(&stored_bytes, n);
    if (ns == NS_KEY) atomic_fetch_add(&key_bytes, n);
}

/* ---- the scenarios ---------------------------------------------------------
 * Each returns the connection it leaves open (or -1), so that "good" can
 * keep one for several batches. */

/* A batch of SETs (new keys, or once the store budget is used, new versions
 * of this worker's keys), maybe read back; acknowledged as each +OK is read. */
static int good_batch(worker_t* w, int fd, int halfclose) {
    int n = 1 + (int)below(&w->rng, 32);
    ack_t batch[32];
    int over = atomic_load(&key_bytes) > KEY_BUDGET && w->nacks > 64;
    size_t first = over ? below(&w->rng, w->nacks - 32) : 0;
    w->out.len = 0;
    for (int i = 0; i < n; i++) {
        if (over) {
            ack_t* a = &w->acks[first + (size_t)i];
            if (a->ns != NS_KEY) { n = i; break; }
            batch[i] = (ack_t){a->seq, a->ver + 1, NS_KEY};
        } else {
            batch[i] = (ack_t){w->next_seq++, 0, NS_KEY};
        }
        add_set(&w->out, NS_KEY, w->id, batch[i].seq, batch[i].ver);
    }
    int readback = below(&w->rng, 2) == 0;
    if (readback)
        for (int i = 0; i < n; i++) add_get(&w->out, NS_KEY, w->id, batch[i].seq);
    if (send_all(fd, w->out.p, w->out.len, &w->rng) < 0) {
        fail("good: send: %s", strerror(errno));
        return -1;
    }
    if (halfclose) shutdown(fd, SHUT_WR);
    rd_t r = {.fd = fd};
    int ok = 0;
    for (int i = 0; i < n && ok == 0; i++) {
        ok = expect_line(&r, "+OK", halfclose ? "SET after a half-close" : "SET");
        if (ok) break;
        if (over) {
            ack_t* a = &w->acks[first + (size_t)i];
            atomic_fetch_add(&stored_bytes, (long)val_len(NS_KEY, w->id, a->seq, a->ver + 1) -
                                                (long)val_len(NS_KEY, w->id, a->seq, a->ver));
            a->ver++;
        } else {
            ack_add(w, NS_KEY, batch[i].seq, 0);
        }
    }
    for (int i = 0; readback && i < n && ok == 0; i++)
        ok = expect_value(&r, NS_KEY, w->id, batch[i].seq, batch[i].ver, &w->tmp);
    if (ok == 0 && halfclose && rd_eof(&r) < 0) {
        fail("half-close: the server did not close after the replies");
        ok = -1;
    }
    if (ok == 0 && r.off != r.b.len) {
        fail("good: %zu bytes more than the replies", r.b.len - r.off);
        ok = -1;
    }
    rd_free(&r);
    if (ok < 0) { conn_close(fd, 0); return -1; }
    return fd;
}

static int good(worker_t* w, int fd) {
    if (fd < 0 && (fd = conn_open()) < 0) return -1;
    if ((fd = good_batch(w, fd, 0)) < 0) return -1;
    switch (below(&w->rng, 8)) {
    case 0: conn_close(fd, 0); return -1;
    case 1: conn_close(fd, 1); return -1;
    case 2: {
        rd_t r = {.fd = fd};
        int ok = send_all(fd, "QUIT\r\n", 6, NULL) == 0 && expect_line(&r, "+OK", "QUIT") == 0;
        if (ok && rd_eof(&r) < 0) fail("QUIT: the server did not close");
        rd_free(&r);
        conn_close(fd, 0);
        return -1;
    }
    default: return fd;     /* kept for the next good batch */
    }
}

static void halfclose(worker_t* w) {
    int fd = conn_open();
    if (fd < 0) return;
    if (good_batch(w, fd, 1) >= 0) conn_close(fd, 0);
}

/* Good SETs, then a SET cut short, then close or reset. */
static void cut(worker_t* w) {
    int fd = conn_open();
    if (fd < 0) return;
    if (below(&w->rng, 2) && (fd = good_batch(w, fd, 0)) < 0) return;
    w->out.len = 0;
    add_set(&w->out, NS_CUT, w->id, w->next_seq++, 0);
    size_t n = below(&w->rng, w->out.len);
    if (send_all(fd, w->out.p, n, &w->rng) < 0) fail("cut: send: %s", strerror(errno));
    conn_close(fd, (int)below(&w->rng, 2));
}

/* Complete SETs, then a reset without reading: stored or not, never read. */
static void unread(worker_t* w) {
    int fd = conn_open();
    if (fd < 0) return;
    w->out.len = 0;
    int n = 1 + (int)below(&w->rng, 16);
    for (int i = 0; i < n; i++) {
        uint64_t seq = below(&w->rng, MAYBE_KEYS);
        char k[64];
        if (!w->maybe_sent[seq]) {
            w->maybe_sent[seq] = 1;
            atomic_fetch_add(&maybe_bytes,
                             (long)(key_of(k, NS_MAYBE, w->id, seq) + val_len(NS_MAYBE, w->id, seq, 0)));
        }
        add_set(&w->out, NS_MAYBE, w->id, seq, 0);
    }
    send_all(fd, w->out.p, w->out.len, &w->rng);
    conn_close(fd, 1);
}

static void garbage(worker_t* w) {
    int fd = conn_open();
    if (fd < 0) return;
    size_t n = 1 + below(&w->rng, 65536);
    w->out.len = 0;
    buf_reserve(&w->out, n);
    for (size_t i = 0; i < n; i++) w->out.p[i] = (char)rnd(&w->rng);
    /* the server may close as soon as it sees an error: sending can fail */
    send_all(fd, w->out.p, n, &w->rng);
    switch (below(&w->rng, 3)) {
    case 0: conn_close(fd, 0); return;
    case 1: conn_close(fd, 1); return;
    }
    shutdown(fd, SHUT_WR);
    /* whatever it answers (errors for garbage lines), it must then close */
    char sink[65536];
    int64_t until = now_ns() + (int64_t)IO_TIMEOUT_S * 1000000000;
    ssize_t k;
    while ((k = recv(fd, sink, sizeof(sink), 0)) > 0 && now_ns() < until) {}
    if (k < 0 && errno != ECONNRESET) fail("garbage: the server did not close: %s", strerror(errno));
    conn_close(fd, 0);
}

static const struct { const char* req; const char* err; } protos[] = {
    {"*abc\r\n", "-ERR Protocol error: invalid multibulk length"},
    {"*1048577\r\n", "-ERR Protocol error: invalid multibulk length"},
    {"*1\r\n$abc\r\n", "-ERR Protocol error: invalid bulk length"},
    {"*1\r\n$-3\r\n", "-ERR Protocol error: invalid bulk length"},
    {"*1\r\n$536870913\r\n", "-ERR Protocol error: invalid bulk length"},
    {"*2\r\n$3\r\nGET\r\n:1\r\n", "-ERR Protocol error: expected '$', got ':'"},
    {"*1\r\n$3\r\nGETxx", "-ERR Protocol error: bulk data not terminated by CRLF"},
    {"SET \"abc\r\n", "-ERR Protocol error: unbalanced quotes in request"},
    {"SET 'a'b c\r\n", "-ERR Protocol error: unbalanced quotes in request"},
};

/* Maybe good SETs first, then a protocol error: its reply, then EOF. */
static void proto(worker_t* w) {
    int fd = conn_open();
    if (fd < 0) return;
    if (below(&w->rng, 2) && (fd = good_batch(w, fd, 0)) < 0) return;
    size_t i = below(&w->rng, sizeof(protos) / sizeof(protos[0]));
    rd_t r = {.fd = fd};
    if (send_all(fd, protos[i].req, strlen(protos[i].req), &w->rng) < 0)
        fail("proto: send: %s", strerror(errno));
    else if (expect_line(&r, protos[i].err, "a protocol error") == 0 && rd_eof(&r) < 0)
        fail("proto: the server did not close after '%s'", protos[i].err);
    rd_free(&r);
    conn_close(fd, 0);
}

static void oversize(worker_t* w) {
    int fd = conn_open();
    if (fd < 0) return;
    rd_t r = {.fd = fd};
    w->out.len = 0;
    if (below(&w->rng, 2)) {
        /* an inline line too long: 64 KiB + 2 is already an error */
        size_t n = (64 << 10) + 2 + below(&w->rng, 200000);
        buf_reserve(&w->out, n);
        memset(w->out.p, 'a', n);
        w->out.len = n;
        send_all(fd, w->out.p, n, &w->rng);     /* may be cut by the close */
        if (expect_line(&r, "-ERR Protocol error: too big inline request", "long inline") == 0 &&
            rd_eof(&r) < 0)
            fail("oversize: the server did not close after a long inline line");
        conn_close(fd, 0);
    } else {
        /* a bulk as big as allowed, a part of it, then gone */
        static const char hdr[] = "*3\r\n$3\r\nSET\r\n$1\r\nx\r\n$536870912\r\n";
        buf_add(&w->out, hdr, sizeof(hdr) - 1);
        size_t n = below(&w->rng, 4 << 20);
        buf_reserve(&w->out, n);
        memset(w->out.p + w->out.len, 'b', n);
        w->out.len += n;
        if (send_all(fd, w->out.p, w->out.len, NULL) < 0) fail("oversize: send: %s", strerror(errno));
        if (below(&w->rng, 2)) {
            shutdown(fd, SHUT_WR);
            if (rd_eof(&r) < 0)
                fail("oversize: no EOF after a half-close mid-bulk (%zu bytes: %.40s, %s)",
                     r.b.len - r.off, r.b.p + r.off, strerror(errno));
        }
        conn_close(fd, (int)below(&w->rng, 2));
    }
    rd_free(&r);
}

static void big(worker_t* w) {
    uint64_t seq = w->next_seq++;
    size_t vl = val_len(NS_BIG, w->id, seq, 0);
    if (atomic_fetch_add(&big_bytes, (long)vl) + (long)vl > BIG_BUDGET) return;
    int fd = conn_open();
    if (fd < 0) return;
    w->out.len = 0;
    add_set(&w->out, NS_BIG, w->id, seq, 0);
    rd_t r = {.fd = fd};
    if (send_all(fd, w->out.p, w->out.len, &w->rng) < 0)
        fail("big: send: %s", strerror(errno));
    else if (expect_line(&r, "+OK", "big SET") == 0)
        ack_add(w, NS_BIG, seq, 0);
    rd_free(&r);
    conn_close(fd, 0);
}

/* A pipeline written whole before any reply is read, as hiredis' blocking
 * API does: 300000 GETs (9 MB) of a 100-byte value (35 MB of replies), more
 * than the sockets' buffers hold both ways, so the server must go on
 * reading requests while its replies wait.  One at a time, one a second. */
static atomic_int writeall_busy;
static atomic_llong writeall_next;

static void writeall(worker_t* w) {
    enum { N = 300000 };
    int fd = conn_open();
    if (fd < 0) return;
    uint64_t seq = w->next_seq++;
    rd_t r = {.fd = fd};
    w->out.len = 0;
    add_set(&w->out, NS_PIPE, w->id, seq, 0);
    if (send_all(fd, w->out.p, w->out.len, NULL) < 0 || expect_line(&r, "+OK", "SET before a pipeline") < 0)
        goto out;
    ack_add(w, NS_PIPE, seq, 0);
    w->out.len = 0;
    for (int i = 0; i < N; i++) add_get(&w->out, NS_PIPE, w->id, seq);
    if (send_all(fd, w->out.p, w->out.len, NULL) < 0) {
        fail("writeall: a pipeline of %d GETs not taken whole before its replies are read: %s", N,
             strerror(errno));
        goto out;
    }
    for (int i = 0; i < N; i++)
        if (expect_value(&r, NS_PIPE, w->id, seq, 0, &w->tmp) < 0) break;
out:
    rd_free(&r);
    conn_close(fd, 0);
}

static void* worker_main(void* arg) {
    worker_t* w = (worker_t*)arg;
    int fd = -1;    /* a good connection kept between batches */
    while (running()) {
        unsigned k = (unsigned)below(&w->rng, 100), s = pick(k, scen_upto);
        if (k == 0 && (only < 0 || only == S_WRITEALL) && now_ns() > atomic_load(&writeall_next) &&
            !atomic_exchange(&writeall_busy, 1))
            s = S_WRITEALL;
        else if (s == S_WRITEALL)
            continue;
        atomic_fetch_add(&scen_runs[s], 1);
        switch (s) {
        case S_GOOD: fd = good(w, fd); break;
        case S_HALFCLOSE: halfclose(w); break;
        case S_CUT: cut(w); break;
        case S_UNREAD: unread(w); break;
        case S_GARBAGE: garbage(w); break;
        case S_PROTO: proto(w); break;
        case S_OVERSIZE: oversize(w); break;
        case S_BIG: big(w); break;
        case S_WRITEALL:
            writeall(w);
            atomic_store(&writeall_next, now_ns() + 1000000000);
            atomic_store(&writeall_busy, 0);
            break;
        }
    }
    if (fd >= 0) conn_close(fd, 0);
    return NULL;
}

/* ---- slowloris: SETs trickled 1 byte per 10-100 ms on nslow connections -- */
typedef struct { int fd; buf_t cmd; size_t sent; uint64_t seq; int64_t due; } slow_t;

static void slow_next(worker_t* w, slow_t* c) {
    c->cmd.len = 0;
    c->seq = w->next_seq++;
    add_set(&c->cmd, NS_SLOW, w->id, c->seq, 0);
    c->sent = 0;
}

static void* slow_main(void* arg) {
    worker_t* w = (worker_t*)arg;
    slow_t* cs = calloc((size_t)nslow, sizeof(*cs));
    for (int i = 0; i < nslow; i++) cs[i].fd = -1;
    while (running()) {
        int64_t t = now_ns(), next = t + 100000000;
        for (int i = 0; i < nslow; i++) {
            slow_t* c = &cs[i];
            if (c->fd < 0) {
                if ((c->fd = conn_open()) < 0) continue;
                slow_next(w, c);
                c->due = t;
            }
            if (c->due <= t) {
                if (send(c->fd, c->cmd.p + c->sent, 1, MSG_NOSIGNAL) != 1) {
                    fail("slowloris: send: %s", strerror(errno));
                    conn_close(c->fd, 0);
                    c->fd = -1;
                    continue;
                }
                if (++c->sent == c->cmd.len) {
                    rd_t r = {.fd = c->fd};
                    if (expect_line(&r, "+OK", "slowloris SET") == 0) ack_add(w, NS_SLOW, c->seq, 0);
                    rd_free(&r);
                    atomic_fetch_add(&scen_runs[S_SLOW], 1);
                    if (below(&w->rng, 4) == 0) { conn_close(c->fd, 0); c->fd = -1; continue; }
                    slow_next(w, c);
                }
                c->due = t + 10000000 + (int64_t)below(&w->rng, 90000000);
            }
            if (c->due < next) next = c->due;
        }
        sleep_ns(next - now_ns());
    }
    for (int i = 0; i < nslow; i++) {
        if (cs[i].fd >= 0) conn_close(cs[i].fd, (int)(i & 1));   /* mid-command */
        free(cs[i].cmd.p);
    }
    free(cs);
    return NULL;
}

/* ---- the server's descriptors and memory ---------------------------------- */
static long server_fds(void) {
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/fd", server_pid);
    DIR* d = opendir(path);
    if (d == NULL) return -1;
    long n = 0;
    struct dirent* e;
    while ((e = readdir(d)) != NULL) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static long base_fds, base_rss;

/* ---- idle connections: opened by the thousand, held, dropped -------------- */
static void* idle_main(void* arg) {
    (void)arg;
    int* fds = malloc((size_t)nidle * sizeof(int));
    rng_t rng = {mix(seed ^ 0x1d1e)};
    int64_t hold = (int64_t)(seconds * 1e9 / 4);
    if (hold > 5000000000) hold = 5000000000;
    while (now_ns() + hold < deadline && atomic_load(&failures) < 20) {
        int n = 0;
        for (; n < nidle && now_ns() < deadline; n++) {
            if ((fds[n] = conn_open()) < 0) break;
            /* a quarter have half a command in the server's buffer */
            if (below(&rng, 4) == 0) send_all(fds[n], "*3\r\n$3\r\nSET\r\n$2\r\nk", 18, NULL);
        }
        atomic_fetch_add(&scen_runs[S_IDLE], n);
        int64_t until = now_ns() + hold;
        if (server_pid && n == nidle) {
            /* the server must hold them all: wait for its accept loops */
            long got = 0;
            while (now_ns() < until && (got = server_fds()) < base_fds + n) usleep(50000);
            if (got < base_fds + n)
                fail("idle: the server holds %ld descriptors with %d idle connections open, "
                     "%ld before", got, n, base_fds);
        }
        while (now_ns() < until) usleep(50000);
        for (int i = 0; i < n; i++) conn_close(fds[i], i & 1);
        usleep(500000);
    }
    free(fds);
    return NULL;
}

/* ---- the verdict: every acknowledged SET reads back ----------------------- */
static atomic_long verified;

static void* verify_main(void* arg) {
    long part = (long)(intptr_t)arg;
    int fd = conn_open();
    if (fd < 0) return NULL;
    rd_t r = {.fd = fd};
    buf_t out = {0}, tmp = {0};
    for (int wi = 0; wi <= nworkers; wi++) {
        worker_t* w = &workers[wi];
        for (size_t i = (size_t)part * 256; i < w->nacks; i += 4 * 256) {
            size_t n = w->nacks - i < 256 ? w->nacks - i : 256;
            out.len = 0;
            for (size_t j = 0; j < n; j++) add_get(&out, w->acks[i + j].ns, w->id, w->acks[i + j].seq);
            if (send_all(fd, out.p, out.len, NULL) < 0) { fail("verify: send: %s", strerror(errno)); goto out; }
            for (size_t j = 0; j < n; j++) {
                ack_t* a = &w->acks[i + j];
                if (expect_value(&r, a->ns, w->id, a->seq, a->ver, &tmp) < 0 &&
                    atomic_load(&failures) >= 20)
                    goto out;
                atomic_fetch_add(&verified, 1);
            }
        }
    }
out:
    rd_free(&r);
    free(out.p);
    free(tmp.p);
    conn_close(fd, 0);
    return NULL;
}

/* One command on a fresh connection: its first reply line. */
static int ask(const char* cmd, char* line, size_t cap) {
    int fd = conn_open();
    if (fd < 0) return -1;
    rd_t r = {.fd = fd};
    int ok = send_all(fd, cmd, strlen(cmd), NULL) == 0 && rd_line(&r, line, cap) >= 0;
    rd_free(&r);
    conn_close(fd, 0);
    return ok ? 0 : -1;
}

static void usage(void) {
    fprintf(stderr, "usage: chaos_resp --port P --seconds S [--pid PID] [--workers W] [--idle N]"
                    " [--slow K] [--seed X] [--slack-mib M] [--only good|halfclose|cut|unread|garbage|proto|oversize|big|writeall]\n");
    exit(2);
}

/* The options only chaos_resp takes: 1 if opt is one. */
static int own_opt(const char* opt, const char* v) {
    if (!strcmp(opt, "--idle")) nidle = atoi(v);
    else if (!strcmp(opt, "--slow")) nslow = atoi(v);
    else return 0;
    return 1;
}

int main(int argc, char** argv) {
    if (read_opts(argc, argv, scen_name, S_WRITEALL + 1, own_opt) < 0) usage();
    if (port <= 0 || nworkers < 1 || nworkers > MAX_WORKERS || nidle < 0 || nslow < 0) usage();
    if (seed == 0) seed = (uint64_t)time(NULL) ^ (uint64_t)getpid() << 32;
    signal(SIGPIPE, SIG_IGN);       /* sends use MSG_NOSIGNAL; this is for shutdown races */
    /* the idle connections, the workers' and the slowloris ones */
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur < (rlim_t)(nidle + nworkers + nslow + 64)) {
        nidle = (int)rl.rlim_cur - nworkers - nslow - 64;
        fprintf(stderr, "chaos_resp: RLIMIT_NOFILE %lu: %d idle connections\n",
                (unsigned long)rl.rlim_cur, nidle);
    }
    if (server_pid) {
        base_fds = server_fds();
        base_rss = server_rss();
        if (base_fds < 0 || base_rss < 0) {
            fprintf(stderr, "chaos_resp: cannot read /proc/%d\n", server_pid);
            return 2;
        }
        /* (a script that runs other clients beside starts them after this
         * line: their connections are not the baseline's) */
        printf("chaos_resp: baseline %ld descriptors, %ld KiB\n", base_fds, base_rss >> 10);
        fflush(stdout);
    }
    printf("chaos_resp: port %d, %.0f s, %d workers, %d idle, %d slowloris, seed %#llx\n", port,
           seconds, nworkers, nidle, nslow, (unsigned long long)seed);
    fflush(stdout);
    int64_t t0 = start_clock();
    pthread_t th[MAX_WORKERS + 2];
    for (int i = 0; i <= nworkers; i++) {
        workers[i].id = (unsigned)i;
        workers[i].rng.s = mix(seed + (uint64_t)i);
    }
    for (int i = 0; i < nworkers; i++) pthread_create(&th[i], NULL, worker_main, &workers[i]);
    pthread_create(&th[nworkers], NULL, slow_main, &workers[nworkers]);
    pthread_create(&th[nworkers + 1], NULL, idle_main, NULL);
    long peak_rss = watch_rss();
    for (int i = 0; i < nworkers + 2; i++) pthread_join(th[i], NULL);
    long peak_conns = atomic_load(&most_conns);
    printf("chaos_resp: ran %.1f s:", (double)(now_ns() - t0) / 1e9);
    for (int s = 0; s < S_N; s++) printf(" %s %ld", scen_name[s], atomic_load(&scen_runs[s]));
    printf("; at most %ld connections at once\n", peak_conns);

    /* every acknowledged SET reads back */
    long nacks = 0;
    for (int i = 0; i <= nworkers; i++) nacks += (long)workers[i].nacks;
    pthread_t vt[4];
    for (long i = 0; i < 4; i++) pthread_create(&vt[i], NULL, verify_main, (void*)(intptr_t)i);
    for (int i = 0; i < 4; i++) pthread_join(vt[i], NULL);
    printf("chaos_resp: %ld acknowledged SETs (%ld bytes of keys and values), %ld read back\n",
           nacks, atomic_load(&stored_bytes), atomic_load(&verified));
    if (atomic_load(&verified) != nacks && atomic_load(&failures) == 0)
        fail("%ld acknowledged SETs, %ld read back", nacks, atomic_load(&verified));
    char line[256];
    long keys = -1;
    if (ask("DBSIZE\r\n", line, sizeof(line)) < 0 || line[0] != ':')
        fail("DBSIZE: %s", line);
    else if ((keys = atol(line + 1)) < nacks)
        fail("DBSIZE %ld, fewer than the %ld acknowledged SETs", keys, nacks);
    if (ask("PING\r\n", line, sizeof(line)) < 0 || strcmp(line, "+PONG") != 0)
        fail("PING after the run: '%s'", line);

    if (server_pid) {
        /* descriptors back to the count before, memory within the bound */
        long fds = -1;
        int64_t until = now_ns() + 20000000000;
        while ((fds = server_fds()) != base_fds && now_ns() < until) usleep(100000);
        long rss = server_rss();
        long data = atomic_load(&stored_bytes) + atomic_load(&maybe_bytes);
        long bound = base_rss + 2 * data + 128 * (keys > 0 ? keys : nacks) + 40960 * peak_conns +
                     ((long)slack_mib << 20);
        printf("chaos_resp: server descriptors %ld before, %ld after; RSS %ld KiB before, %ld KiB at "
               "most, %ld KiB after (bound %ld KiB: data %ld KiB, %ld keys, %ld connections)\n",
               base_fds, fds, base_rss >> 10, peak_rss >> 10, rss >> 10, bound >> 10, data >> 10,
               keys, peak_conns);
        if (fds != base_fds) fail("the server holds %ld descriptors, %ld before the run", fds, base_fds);
        if (rss < 0) fail("the server is gone");
        else if (rss > bound) fail("the server's RSS %ld KiB is over the bound %ld KiB", rss >> 10, bound >> 10);
    }
    return verdict();
}
