/* chaos.h - what the chaos clients share: options, clock, failures, buffers, connections, the server's RSS. */
/* chaos_http.c and chaos_resp.c include it once, after defining
 *   CHAOS_NAME    the prefix of what they print ("chaos_http")
 *   IO_TIMEOUT_S  how long a socket waits for the server
 *   SEND_PIECE    the longest piece send_all cuts a send into
 * which differ with the server each one judges. */
#ifndef CHAOS_H
#define CHAOS_H

#if !defined(CHAOS_NAME) || !defined(IO_TIMEOUT_S) || !defined(SEND_PIECE)
#error "chaos.h: define CHAOS_NAME, IO_TIMEOUT_S and SEND_PIECE before including it"
#endif

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* ---- the run: the options both take, the clock, failures ------------------ */
static int port, server_pid, nworkers = 8, only = -1, slack_mib = 32;
static double seconds = 10;
static uint64_t seed;
static int64_t deadline;
static atomic_int failures;
static atomic_long open_conns, most_conns;

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The run's start: it ends --seconds later. */
static int64_t start_clock(void) {
    int64_t t0 = now_ns();
    deadline = t0 + (int64_t)(seconds * 1e9);
    return t0;
}

static void sleep_ns(int64_t d) {
    if (d <= 0) return;
    struct timespec ts = {d / 1000000000, d % 1000000000};
    nanosleep(&ts, NULL);
}

/* Counts a failure and prints the first 20: at 20 the threads stop. */
static void fail(const char* fmt, ...) {
    int n = atomic_fetch_add(&failures, 1);
    if (n >= 20) return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, CHAOS_NAME ": FAIL ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static int running(void) { return now_ns() < deadline && atomic_load(&failures) < 20; }

/* Reads the command line: 0, or -1 at a missing value or an option that
 * neither this nor own (1: one of the client's) takes.  --only names one of
 * the first nonly scenarios in names. */
static int read_opts(int argc, char** argv, const char* const* names, int nonly,
                     int (*own)(const char* opt, const char* v)) {
    for (int i = 1; i < argc; i += 2) {
        const char* v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v == NULL) return -1;
        if (!strcmp(argv[i], "--port")) port = atoi(v);
        else if (!strcmp(argv[i], "--seconds")) seconds = atof(v);
        else if (!strcmp(argv[i], "--pid")) server_pid = atoi(v);
        else if (!strcmp(argv[i], "--workers")) nworkers = atoi(v);
        else if (!strcmp(argv[i], "--seed")) seed = strtoull(v, NULL, 0);
        else if (!strcmp(argv[i], "--slack-mib")) slack_mib = atoi(v);
        else if (!strcmp(argv[i], "--only")) {
            for (only = 0; only < nonly && strcmp(v, names[only]); only++) {}
            if (only == nonly) return -1;
        }
        else if (!own(argv[i], v)) return -1;
    }
    return 0;
}

/* ---- randomness ----------------------------------------------------------- */
static uint64_t mix(uint64_t x) {   /* splitmix64's finaliser */
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

typedef struct { uint64_t s; } rng_t;
static uint64_t rnd(rng_t* r) { return mix(r->s++); }
static uint64_t below(rng_t* r, uint64_t n) { return n ? rnd(r) % n : 0; }

/* The scenario a draw k of 0-99 picks, upto[s] being where the share of s
 * ends; or the one --only names. */
static unsigned pick(unsigned k, const unsigned char* upto) {
    if (only >= 0) return (unsigned)only;
    unsigned s = 0;
    while (k >= upto[s]) s++;
    return s;
}

/* ---- a growable byte buffer -------------------------------------------- */
typedef struct { char* p; size_t len, cap; } buf_t;

static void buf_reserve(buf_t* b, size_t extra) {
    if (b->cap - b->len >= extra) return;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap - b->len < extra) cap *= 2;
    char* p = realloc(b->p, cap);
    if (p == NULL) { fprintf(stderr, CHAOS_NAME ": out of memory\n"); exit(2); }
    b->p = p;
    b->cap = cap;
}

static void buf_add(buf_t* b, const void* p, size_t n) {
    buf_reserve(b, n);
    memcpy(b->p + b->len, p, n);
    b->len += n;
}

static void buf_fmt(buf_t* b, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char tmp[512];
    int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    buf_add(b, tmp, (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
}

/* ---- connections ---------------------------------------------------------- */
static void count_open(int d) {
    long n = atomic_fetch_add(&open_conns, d) + d;
    long m = atomic_load(&most_conns);
    while (n > m && !atomic_compare_exchange_weak(&most_conns, &m, n)) {}
}

/* A connected socket with I/O timeouts, or -1 (a failure only if it cannot
 * connect for 5 s: a full backlog or a busy port range is not one). */
static int conn_open(void) {
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int64_t until = now_ns() + 5000000000;
    for (;;) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) { fail("socket: %s", strerror(errno)); return -1; }
        struct timeval tv = {.tv_sec = IO_TIMEOUT_S};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (connect(fd, (struct sockaddr*)&sa, sizeof(sa)) == 0) {
            count_open(1);
            return fd;
        }
        int e = errno;
        close(fd);
        if (now_ns() > until) { fail("connect: %s", strerror(e)); return -1; }
        usleep(10000);
    }
}

static void conn_close(int fd, int reset) {
    if (reset) {
        struct linger l = {.l_onoff = 1, .l_linger = 0};
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
    }
    close(fd);
    count_open(-1);
}

/* Sends all of p[0..n) in pieces of random size (rng NULL: at once); 0, or
 * -1 with errno. */
static int send_all(int fd, const char* p, size_t n, rng_t* r) {
    while (n) {
        size_t k = n;
        if (r && below(r, 4) == 0) k = 1 + below(r, n < SEND_PIECE ? n : SEND_PIECE);
        ssize_t w = send(fd, p, k, MSG_NOSIGNAL);
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* ---- reading what the server sends ---------------------------------------- */
typedef struct { int fd; buf_t b; size_t off; } rd_t;

/* 1 with more bytes, 0 at EOF, -1 on an error (errno; EAGAIN: timeout). */
static int rd_fill(rd_t* r) {
    if (r->off == r->b.len) r->off = r->b.len = 0;
    buf_reserve(&r->b, 65536);
    ssize_t n = recv(r->fd, r->b.p + r->b.len, r->b.cap - r->b.len, 0);
    if (n <= 0) return n == 0 ? 0 : -1;
    r->b.len += (size_t)n;
    return 1;
}

/* Moves the bytes not read yet to the buffer's start, to make room behind
 * them. */
static void rd_compact(rd_t* r) {
    if (r->off == 0) return;
    memmove(r->b.p, r->b.p + r->off, r->b.len - r->off);
    r->b.len -= r->off;
    r->off = 0;
}

static void rd_free(rd_t* r) { free(r->b.p); }

static int closed_errno(int e) { return e == ECONNRESET || e == EPIPE; }

/* After the last answer: the server must close (EOF, or a reset) within
 * IO_TIMEOUT_S, sending nothing more. */
static int rd_eof(rd_t* r) {
    if (r->off < r->b.len) return -1;
    int k = rd_fill(r);
    if (k == 0) return 0;
    if (k < 0 && closed_errno(errno)) return 0;
    return -1;
}

/* ---- the server's memory and the verdict ---------------------------------- */
static long server_rss(void) {     /* bytes */
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/statm", server_pid);
    FILE* f = fopen(path, "r");
    long size, rss;
    if (f == NULL) return -1;
    int ok = fscanf(f, "%ld %ld", &size, &rss) == 2;
    fclose(f);
    return ok ? rss * sysconf(_SC_PAGESIZE) : -1;
}

/* Until the deadline, the server's RSS at its highest (with --pid; else 0):
 * a server that is gone ends the watch as a failure. */
static long watch_rss(void) {
    long peak = 0;
    while (now_ns() < deadline) {
        usleep(200000);
        if (server_pid) {
            long r = server_rss();
            if (r > peak) peak = r;
            if (r < 0) { fail("the server is gone"); break; }
        }
    }
    return peak;
}

/* The last line, and the exit status: 0 only if every check held. */
static int verdict(void) {
    int f = atomic_load(&failures);
    printf(CHAOS_NAME ": %s (%d failures)\n", f ? "FAIL" : "ok", f);
    return f ? 1 : 0;
}

#endif
