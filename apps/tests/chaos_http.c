/* chaos_http.c - a crowd of misbehaving clients for an HTTP/1.1 static-file
 * server (aco_http), written on plain threads and blocking sockets (not on
 * the runtime, so it judges the server independently), and the checks of
 * what must survive.
 *
 *   chaos_http --port P --root DIR --seconds S [--pid PID] [--workers W]
 *              [--header-timeout-ms T] [--idle-timeout-ms T] [--slow K]
 *              [--seed X] [--only SCENARIO] [--slack-mib M]
 *              [--halfclose-max BYTES]
 *
 * It first writes its files into DIR, the server's root (chaos_N.bin: 0,
 * 1, 137, 4096, 65549 bytes, 1 and 4 MiB of random bytes), then for S
 * seconds W worker threads each pick, again and again, one of:
 *   good       1-8 valid requests on one keep-alive connection, sent in
 *              random pieces, one at a time or pipelined: GET and HEAD of
 *              the files, single Ranges (a-b, a-, -n; past the end: 416 or
 *              the whole file; with HEAD 206 or 200, as Range is defined
 *              for GET only), If-Modified-Since (the file's own date:
 *              304; an older one: 200), a missing file (404), HTTP/1.0
 *              (then the server closes); every response byte-exact; the
 *              connection then kept, closed or reset
 *   pipebad    valid requests pipelined with one bad one (and maybe more
 *              valid ones after it), all in one send: every response before
 *              the bad one complete and in order, then a 4xx or a close
 *   bad        one malformed request on a new connection: random bytes; no
 *              version (HEAD /x: GET /x is HTTP/0.9); a 10-40 KiB method;
 *              a bad version (HTTP/9.9: 505 allowed; HTTP/1.x); NULs in the
 *              line or a header; a header line without a colon; an unknown
 *              method and POST with a body (405); traversal (/../, %2e%2e,
 *              never a 2xx); a request line longer than 8 KiB; answered by
 *              a 4xx or a close, never by nothing
 *   lf         a valid request with bare LF line ends: served (byte-exact)
 *              or refused (4xx or close), RFC 9112 lets a server do either
 *   hugehdr    a header of 9-64 KiB (or 40 of 1 KiB): 431, another 4xx or
 *              a close
 *   manyhdr    50-300 small headers, under 4 KiB in all: served, or 431
 *   halfclose  valid requests, then shutdown(SHUT_WR): every response must
 *              still arrive, then the server's EOF (--halfclose-max: of
 *              files up to that size only; nginx takes the client's FIN
 *              as an abort, 499, once a response must wait for room to
 *              send: 65536 lets it pass)
 *   cutreq     part of a valid request, then close or reset
 *   cutresp    a GET of the 4 MiB file (or several pipelined), a few KiB of
 *              the response read, then close or reset (SO_LINGER 0)
 *   idle       (with --idle-timeout-ms) a valid request, then silence: the
 *              server must close within its idle timeout + 3 s
 * while one thread (with --header-timeout-ms) keeps K slowloris connections
 * trickling a request's header 1 byte per 20-150 ms, never ending it: the
 * server must close each within its header timeout + 3 s of the
 * connection's start (a 408 first is allowed), and K/4 more trickle a whole
 * request fast enough to end it within half the header timeout: each must
 * be served.
 *
 * A response must come (or the connection close) within IO_TIMEOUT_S.  At
 * the end a GET of each file must be byte-exact; with --pid, the server's
 * open descriptors must come back to their count before the run (within
 * 20 s; files under the root are counted apart: an open-file cache keeps
 * them, at most 2 * NFILES + 2), and its RSS to within
 *   baseline + 64 KiB * most connections open at once + M MiB (32):
 * memory a closed connection freed may stay with the allocator but is
 * reused, so it is bounded by the connections open at once, not by how many
 * came and went.
 *
 * What the server answered to each kind of bad request is printed (status
 * codes and closes, counted).  Exit status 0 only if every check held; the
 * first failures are printed.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CHAOS_NAME "chaos_http"
#define MAX_WORKERS 64
#define IO_TIMEOUT_S 10             /* a response that takes longer is a failure */
#define SEND_PIECE 512
#define HEAD_MAX 65536              /* a response's header, at most */
#define NFILES 7
#define BIG_FILE 6                  /* 4 MiB, for cutresp */

#include "chaos.h"

static int nslow = 16, header_timeout_ms, idle_timeout_ms;
static size_t halfclose_max = SIZE_MAX;
static const char* root;

enum { S_GOOD, S_PIPEBAD, S_BAD, S_LF, S_HUGEHDR, S_MANYHDR, S_HALFCLOSE, S_CUTREQ, S_CUTRESP,
       S_IDLE, S_SLOW, S_SLOWOK, S_N };
static const char* const scen_name[S_N] = {"good", "pipebad", "bad", "lf", "hugehdr", "manyhdr",
                                           "halfclose", "cutreq", "cutresp", "idle", "slowloris",
                                           "slow-valid"};
static atomic_long scen_runs[S_N];
/* The workers' mix: where the share of each ends in a draw of 0-99. */
static const unsigned char scen_upto[S_IDLE + 1] = {
    [S_GOOD] = 35, [S_PIPEBAD] = 45, [S_BAD] = 60, [S_LF] = 64, [S_HUGEHDR] = 69, [S_MANYHDR] = 74,
    [S_HALFCLOSE] = 84, [S_CUTREQ] = 91, [S_CUTRESP] = 99, [S_IDLE] = 100};

/* The kinds of bad request, and what the server did with each: a status
 * code (100-599) or a close (0). */
enum { B_GARBAGE, B_NOVERSION, B_HUGEMETHOD, B_VERSION99, B_VERSIONX, B_NUL_LINE, B_NUL_HDR,
       B_NOCOLON, B_METHOD, B_POST, B_TRAVERSAL, B_ENCTRAV, B_LONGLINE, B_HUGEHDR, B_LF, B_N };
static const char* const bad_name[B_N] = {
    "garbage", "no-version", "huge-method", "HTTP/9.9", "HTTP/1.x", "NUL-in-line", "NUL-in-header",
    "no-colon", "unknown-method", "POST", "traversal", "encoded-traversal", "long-line",
    "huge-header", "bare-LF"};
static atomic_long outcome[B_N][600];

/* ---- the files ------------------------------------------------------------ */
typedef struct { char name[32]; char* data; size_t size; char date[64], older[64]; } file_t;
static file_t files[NFILES];
static const size_t file_size[NFILES] = {0, 1, 137, 4096, 65549, 1 << 20, 4 << 20};

static void http_date(char* out, size_t cap, time_t t) {
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, cap, "%a, %d %b %Y %H:%M:%S GMT", &tm);
}

static int make_files(void) {
    for (int i = 0; i < NFILES; i++) {
        file_t* f = &files[i];
        snprintf(f->name, sizeof(f->name), "chaos_%d.bin", i);
        f->size = file_size[i];
        f->data = malloc(f->size + 1);
        if (f->data == NULL) return -1;
        for (size_t j = 0; j < f->size; j += 8) {
            uint64_t x = mix(seed ^ ((uint64_t)i << 48) ^ j);
            for (size_t k = 0; k < 8 && j + k < f->size; k++, x >>= 8) f->data[j + k] = (char)x;
        }
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", root, f->name);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) { fprintf(stderr, "chaos_http: %s: %s\n", path, strerror(errno)); return -1; }
        for (size_t off = 0; off < f->size;) {
            ssize_t w = write(fd, f->data + off, f->size - off);
            if (w <= 0) { close(fd); return -1; }
            off += (size_t)w;
        }
        struct stat st;
        fstat(fd, &st);
        close(fd);
        http_date(f->date, sizeof(f->date), st.st_mtime);
        http_date(f->older, sizeof(f->older), st.st_mtime - 86400);
    }
    return 0;
}

/* n bytes of c: the oversized parts of bad requests. */
static void buf_fill(buf_t* b, char c, size_t n) {
    buf_reserve(b, n);
    memset(b->p + b->len, c, n);
    b->len += n;
}

/* A response's header, parsed. */
typedef struct {
    int status;             /* 0: closed before a response began */
    long long clen;         /* Content-Length, -1 if none */
    int chunked, close;
    char crange[128];       /* Content-Range's value, or "" */
} resp_t;

/* Reads a response's header: 0 (status set), 1 if the server closed before
 * its first byte (status 0), -1 on a timeout, a reset mid-header or a
 * malformed header (failed, named after what). */
static int read_head(rd_t* r, resp_t* h, const char* what) {
    memset(h, 0, sizeof(*h));
    h->clen = -1;
    char* end;
    for (;;) {
        end = r->b.len > r->off ? memmem(r->b.p + r->off, r->b.len - r->off, "\r\n\r\n", 4) : NULL;
        if (end) break;
        if (r->b.len - r->off > HEAD_MAX) { fail("%s: a response header over %d bytes", what, HEAD_MAX); return -1; }
        rd_compact(r);
        int k = rd_fill(r);
        if (k == 1) continue;
        int e = errno;
        if (r->b.len == r->off && (k == 0 || closed_errno(e))) return 1;
        if (k < 0 && (e == EAGAIN || e == EWOULDBLOCK))
            fail("%s: no response within %d s (server hung?)", what, IO_TIMEOUT_S);
        else
            fail("%s: the connection ended inside a response header (%zu bytes: '%.60s')", what,
                 r->b.len - r->off, r->b.p + r->off);
        return -1;
    }
    char* s = r->b.p + r->off;
    *end = 0;
    r->off = (size_t)(end + 4 - r->b.p);
    int minor;
    if (sscanf(s, "HTTP/1.%d %3d", &minor, &h->status) != 2 || h->status < 100 || h->status > 599) {
        fail("%s: a bad status line '%.60s'", what, s);
        return -1;
    }
    for (char* l = strstr(s, "\r\n"); l; l = strstr(l, "\r\n")) {
        l += 2;
        char* colon = strchr(l, ':');
        if (colon == NULL) break;
        char* v = colon + 1;
        while (*v == ' ' || *v == '\t') v++;
        size_t n = (size_t)(colon - l), vl = strcspn(v, "\r");
        if (n == 14 && !strncasecmp(l, "Content-Length", n)) h->clen = strtoll(v, NULL, 10);
        else if (n == 17 && !strncasecmp(l, "Transfer-Encoding", n)) h->chunked = strncasecmp(v, "chunked", 7) == 0;
        else if (n == 10 && !strncasecmp(l, "Connection", n)) h->close = strncasecmp(v, "close", 5) == 0;
        else if (n == 13 && !strncasecmp(l, "Content-Range", n))
            snprintf(h->crange, sizeof(h->crange), "%.*s", (int)(vl < 127 ? vl : 127), v);
    }
    if (minor == 0) h->close = 1;
    return 0;
}

/* Reads n body bytes, compared with want (NULL: not compared): 0, or -1
 * (failed). */
static int read_body(rd_t* r, size_t n, const char* want, const char* what) {
    size_t got = 0;
    while (got < n) {
        if (r->off == r->b.len) {
            int k = rd_fill(r);
            if (k <= 0) {
                fail("%s: the body cut short at %zu of %zu bytes: %s", what, got, n,
                     k == 0 ? "EOF" : strerror(errno));
                return -1;
            }
        }
        size_t c = r->b.len - r->off < n - got ? r->b.len - r->off : n - got;
        if (want && memcmp(r->b.p + r->off, want + got, c) != 0) {
            size_t i = 0;
            while (r->b.p[r->off + i] == want[got + i]) i++;
            fail("%s: the body differs at byte %zu of %zu", what, got + i, n);
            return -1;
        }
        r->off += c;
        got += c;
    }
    return 0;
}

/* Skips a body we do not check (an error page): Content-Length or chunks;
 * with neither, nothing (the connection is not reused after one). */
static int skip_body(rd_t* r, const resp_t* h, const char* what) {
    if (h->clen >= 0) return read_body(r, (size_t)h->clen, NULL, what);
    if (!h->chunked) return 0;
    for (;;) {
        char* nl;
        while ((nl = r->b.len > r->off ? memmem(r->b.p + r->off, r->b.len - r->off, "\r\n", 2) : NULL) == NULL)
            if (rd_fill(r) <= 0) { fail("%s: a chunked body cut short", what); return -1; }
        size_t n = strtoul(r->b.p + r->off, NULL, 16);
        r->off = (size_t)(nl + 2 - r->b.p);
        if (read_body(r, n + 2, NULL, what) < 0) return -1;
        if (n == 0) return 0;
    }
}

/* ---- valid requests ------------------------------------------------------- */
typedef struct {
    int file;               /* -1: a missing one (404) */
    int head, http10, close;
    int range;              /* 0 none, 1 a-b, 2 a-, 3 -n, 4 past the end */
    size_t ra, rb;          /* bytes=ra-rb (rb past the end: to the end); -rb */
    int ims;                /* 0 none, 1 the file's date (304), 2 older (200) */
} req_t;

static void pick_req(rng_t* g, req_t* q, int allow_close) {
    memset(q, 0, sizeof(*q));
    q->file = below(g, 16) == 0 ? -1 : (int)below(g, NFILES);
    q->head = below(g, 8) == 0;
    q->http10 = allow_close && below(g, 16) == 0;
    q->close = allow_close && !q->http10 && below(g, 12) == 0;
    if (q->file < 0) return;
    size_t size = files[q->file].size;
    unsigned k = (unsigned)below(g, 10);
    if (k < 4 && size > 0) {
        q->range = 1 + (int)below(g, 3);
        q->ra = below(g, size);
        if (q->range == 1) q->rb = q->ra + below(g, size - q->ra + 64);     /* may end past the end */
        if (q->range == 3) q->rb = 1 + below(g, size + 16);     /* the suffix' length */
    } else if (k == 4) {
        q->range = 4;
        q->ra = size + below(g, 100);
    } else if (k == 5) {
        q->ims = 1 + (int)below(g, 2);
    }
}

static void add_req(buf_t* b, const req_t* q, const char* eol) {
    const char* m = q->head ? "HEAD" : "GET";
    if (q->file < 0) buf_fmt(b, "%s /chaos_missing_%llx HTTP/1.%d%s", m, (unsigned long long)mix((uint64_t)b->len), q->http10 ? 0 : 1, eol);
    else buf_fmt(b, "%s /%s HTTP/1.%d%s", m, files[q->file].name, q->http10 ? 0 : 1, eol);
    buf_fmt(b, "Host: 127.0.0.1:%d%sUser-Agent: chaos_http%s", port, eol, eol);
    if (q->range == 1) buf_fmt(b, "Range: bytes=%zu-%zu%s", q->ra, q->rb, eol);
    if (q->range == 2) buf_fmt(b, "Range: bytes=%zu-%s", q->ra, eol);
    if (q->range == 3) buf_fmt(b, "Range: bytes=-%zu%s", q->rb, eol);
    if (q->range == 4) buf_fmt(b, "Range: bytes=%zu-%s", q->ra, eol);
    if (q->ims) buf_fmt(b, "If-Modified-Since: %s%s", q->ims == 1 ? files[q->file].date : files[q->file].older, eol);
    if (q->close) buf_fmt(b, "Connection: close%s", eol);
    buf_fmt(b, "%s", eol);
}

/* The response to q, checked byte for byte: 0, or -1 (failed). */
static int check_resp(rd_t* r, const req_t* q, const char* what) {
    resp_t h;
    char w[160];
    snprintf(w, sizeof(w), "%s: %s %s%s", what, q->head ? "HEAD" : "GET",
             q->file < 0 ? "(missing)" : files[q->file].name,
             q->range ? " with Range" : q->ims == 1 ? " If-Modified-Since its date" : q->ims ? " If-Modified-Since older" : "");
    int k = read_head(r, &h, w);
    if (k == 1) fail("%s: the server closed instead of answering", w);
    if (k) return -1;
    if (h.chunked) { fail("%s: a chunked response to a file", w); return -1; }
    if (q->file < 0) {
        if (h.status != 404) { fail("%s: status %d, wanted 404", w, h.status); return -1; }
        return q->head ? 0 : skip_body(r, &h, w);
    }
    const file_t* f = &files[q->file];
    size_t size = f->size, a = 0, n = size;
    int want = 200;
    if (q->ims == 1) want = 304;
    if (q->range >= 1 && q->range <= 3 && q->head && h.status == 200) {
        /* Range is defined for GET only (RFC 9110 14.2): a HEAD may ignore it */
    } else if (q->range >= 1 && q->range <= 3) {
        want = 206;
        a = q->range == 3 ? (q->rb >= size ? 0 : size - q->rb) : q->ra;
        size_t e = q->range == 1 && q->rb < size ? q->rb : size - 1;
        n = e - a + 1;
        char cr[128];
        snprintf(cr, sizeof(cr), "bytes %zu-%zu/%zu", a, e, size);
        if (h.status == 206 && strcmp(h.crange, cr) != 0) {
            fail("%s: Content-Range '%s', wanted '%s'", w, h.crange, cr);
            return -1;
        }
    }
    if (q->range == 4) {
        if (h.status == 416) return q->head ? 0 : skip_body(r, &h, w);
        want = 200;     /* or the whole file: the Range ignored */
    }
    if (h.status != want) { fail("%s: status %d, wanted %d", w, h.status, want); return -1; }
    if (want == 304) return 0;
    if (h.clen != (long long)n) { fail("%s: Content-Length %lld, wanted %zu", w, h.clen, n); return -1; }
    if (q->head) return 0;
    return read_body(r, n, f->data + a, w);
}

/* ---- the scenarios -------------------------------------------------------- */
typedef struct { unsigned id; rng_t rng; buf_t out; } worker_t;
static worker_t workers[MAX_WORKERS + 1];

/* n valid requests on fd (sequential or pipelined), each response checked;
 * the last may end the connection (HTTP/1.0 or Connection: close), then
 * the server must close.  Returns 1 if the connection is still usable, 0 if
 * the server closed it as asked, -1 on a failure. */
static int good_batch(worker_t* w, int fd, int n, int halfclose, const char* what) {
    req_t q[8];
    int pipelined = below(&w->rng, 2);
    for (int i = 0; i < n; i++) {
        do pick_req(&w->rng, &q[i], i == n - 1 && !halfclose);
        while (halfclose && q[i].file >= 0 && files[q[i].file].size > halfclose_max);
    }
    rd_t r = {.fd = fd};
    int ok = 0;
    w->out.len = 0;
    for (int i = 0; i < n && ok == 0; i++) {
        add_req(&w->out, &q[i], "\r\n");
        if (pipelined && i < n - 1) continue;
        if (send_all(fd, w->out.p, w->out.len, &w->rng) < 0) {
            fail("%s: send: %s", what, strerror(errno));
            ok = -1;
            break;
        }
        w->out.len = 0;
        if (halfclose && i == n - 1) shutdown(fd, SHUT_WR);
        for (int j = pipelined ? 0 : i; j <= i && ok == 0; j++) ok = check_resp(&r, &q[j], what);
    }
    int ended = n > 0 && (q[n - 1].http10 || q[n - 1].close);
    if (ok == 0 && (ended || halfclose) && rd_eof(&r) < 0) {
        fail("%s: the server did not close after the last response (%s)", what,
             halfclose ? "after a half-close" : q[n - 1].http10 ? "HTTP/1.0" : "Connection: close");
        ok = -1;
    }
    if (ok == 0 && r.off != r.b.len) {
        fail("%s: %zu bytes more than the responses", what, r.b.len - r.off);
        ok = -1;
    }
    rd_free(&r);
    return ok < 0 ? -1 : ended || halfclose ? 0 : 1;
}

static int good(worker_t* w, int fd) {
    if (fd < 0 && (fd = conn_open()) < 0) return -1;
    int k = good_batch(w, fd, 1 + (int)below(&w->rng, 8), 0, "good");
    if (k <= 0) { conn_close(fd, 0); return -1; }
    switch (below(&w->rng, 6)) {
    case 0: conn_close(fd, 0); return -1;
    case 1: conn_close(fd, 1); return -1;
    default: return fd;     /* kept for the next batch */
    }
}

/* Appends bad request kind to b. */
static void add_bad(worker_t* w, buf_t* b, int kind) {
    rng_t* g = &w->rng;
    switch (kind) {
    case B_GARBAGE: {
        size_t n = 1 + below(g, 300);
        buf_reserve(b, n);
        for (size_t i = 0; i < n; i++) {
            char c = (char)rnd(g);
            b->p[b->len++] = c == '\n' ? 'x' : c;   /* one line of junk */
        }
        buf_add(b, "\r\n\r\n", 4);
        break;
    }
    case B_NOVERSION: buf_fmt(b, "HEAD /%s\r\n\r\n", files[3].name); break;
    case B_HUGEMETHOD:
        buf_fill(b, 'G', 10240 + below(g, 30720));
        buf_fmt(b, " /%s HTTP/1.1\r\nHost: x\r\n\r\n", files[3].name);
        break;
    case B_VERSION99: buf_fmt(b, "GET /%s HTTP/9.9\r\nHost: x\r\n\r\n", files[3].name); break;
    case B_VERSIONX: buf_fmt(b, "GET /%s HTTP/1.x\r\nHost: x\r\n\r\n", files[3].name); break;
    case B_NUL_LINE:
        buf_fmt(b, "GET /%s", files[3].name);
        buf_add(b, "\0\0 HTTP/1.1\r\nHost: x\r\n\r\n", 24);
        break;
    case B_NUL_HDR:
        buf_fmt(b, "GET /%s HTTP/1.1\r\nHost: x\r\nX-Nul: a", files[3].name);
        buf_add(b, "\0b\r\n\r\n", 6);
        break;
    case B_NOCOLON: buf_fmt(b, "GET /%s HTTP/1.1\r\nHost: x\r\nthis header has no colon\r\n\r\n", files[3].name); break;
    case B_METHOD: buf_fmt(b, "FROB /%s HTTP/1.1\r\nHost: x\r\n\r\n", files[3].name); break;
    case B_POST: buf_fmt(b, "POST /%s HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello", files[3].name); break;
    case B_TRAVERSAL: buf_fmt(b, "GET /../../../../../../etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n"); break;
    case B_ENCTRAV: buf_fmt(b, "GET /%%2e%%2e/%%2e%%2e/%%2e%%2e/%%2e%%2e/etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n"); break;
    case B_LONGLINE:
        buf_add(b, "GET /", 5);
        buf_fill(b, 'a', 9000 + below(g, 30000));
        buf_add(b, " HTTP/1.1\r\nHost: x\r\n\r\n", 22);
        break;
    case B_HUGEHDR:
        buf_fmt(b, "GET /%s HTTP/1.1\r\nHost: x\r\n", files[3].name);
        if (below(g, 2)) {
            buf_add(b, "X-Huge: ", 8);
            buf_fill(b, 'h', 9 * 1024 + below(g, 55 * 1024));
            buf_add(b, "\r\n", 2);
        } else {
            for (int i = 0; i < 40; i++) {
                buf_fmt(b, "X-Big-%d: ", i);
                buf_fill(b, 'b', 1024);
                buf_add(b, "\r\n", 2);
            }
        }
        buf_add(b, "\r\n", 2);
        break;
    }
}

/* The answer to a bad request: a 4xx (505 to a bad version) or a close;
 * counted.  0, or -1 (failed). */
static int judge_bad(rd_t* r, int kind, const char* what) {
    resp_t h;
    char w[96];
    snprintf(w, sizeof(w), "%s (%s)", what, bad_name[kind]);
    if (kind == B_NOVERSION) {
        /* without a version a request is HTTP/0.9, whose response is a
         * bare body, then a close: a refusal too */
        while (r->b.len - r->off < 5 && rd_fill(r) == 1) {}
        if (r->b.len - r->off >= 5 && memcmp(r->b.p + r->off, "HTTP/", 5) != 0) {
            int k;
            r->off = r->b.len;
            while ((k = rd_fill(r)) == 1) r->off = r->b.len;
            if (k < 0 && !closed_errno(errno)) {
                fail("%s: an HTTP/0.9 response not ended by a close: %s", w, strerror(errno));
                return -1;
            }
            atomic_fetch_add(&outcome[kind][9], 1);
            return 0;
        }
    }
    int k = read_head(r, &h, w);
    if (k < 0) return -1;
    atomic_fetch_add(&outcome[kind][h.status], 1);
    if (k == 1) return 0;
    int okcode = h.status >= 400 && h.status < 500;
    if (kind == B_VERSION99 && h.status == 505) okcode = 1;
    if (!okcode) { fail("%s: status %d, wanted a 4xx or a close", w, h.status); return -1; }
    return 0;
}

static void bad(worker_t* w) {
    int fd = conn_open();
    if (fd < 0) return;
    int kind = (int)below(&w->rng, B_HUGEHDR);     /* hugehdr and lf have their own */
    w->out.len = 0;
    add_bad(w, &w->out, kind);
    rd_t r = {.fd = fd};
    /* the server may answer and close before taking it all: a send that
     * fails after some bytes is the server's right */
    if (send_all(fd, w->out.p, w->out.len, &w->rng) < 0 && !closed_errno(errno))
        fail("bad (%s): send: %s", bad_name[kind], strerror(errno));
    judge_bad(&r, kind, "bad");
    rd_free(&r);
    conn_close(fd, (int)below(&w->rng, 2));
}

static void pipebad(worker_t* w) {
    int fd = conn_open();
    if (fd < 0) return;
    req_t q[8];
    int n = (int)below(&w->rng, 6), after = (int)below(&w->rng, 3);
    int kind = (int)below(&w->rng, B_HUGEHDR);
    w->out.len = 0;
    for (int i = 0; i < n; i++) {
        pick_req(&w->rng, &q[i], 0);
        add_req(&w->out, &q[i], "\r\n");
    }
    add_bad(w, &w->out, kind);
    for (int i = 0; i < after; i++) {
        req_t x;
        pick_req(&w->rng, &x, 0);
        add_req(&w->out, &x, "\r\n");
    }
    rd_t r = {.fd = fd};
    if (send_all(fd, w->out.p, w->out.len, NULL) < 0 && !closed_errno(errno))
        fail("pipebad: send: %s", strerror(errno));
    int ok = 0;
    char what[96];
    snprintf(what, sizeof(what), "pipebad (%d before a bad one, %s, %d after)", n, bad_name[kind], after);
    for (int i = 0; i < n && ok == 0; i++) ok = check_resp(&r, &q[i], what);
    if (ok == 0) judge_bad(&r, kind, "pipebad");
    rd_free(&r);
    conn_close(fd, 0);
}

/* Bare LF line ends: served byte-exact, or refused. */
static void lf(worker_t* w) {
    int fd = conn_open();
    if (fd < 0) return;
    req_t q;
    pick_req(&w->rng, &q, 0);
    w->out.len = 0;
    add_req(&w->out, &q, "\n");
    rd_t r = {.fd = fd};
    if (send_all(fd, w->out.p, w->out.len, &w->rng) < 0) fail("lf: send: %s", strerror(errno));
    /* peek at the status: a 4xx or close is a refusal, else the response is checked */
    while (r.b.len < 12) {
        int k = rd_fill(&r);
        if (k == 1) continue;
        if (r.b.len == 0 && (k == 0 || closed_errno(errno))) {
            atomic_fetch_add(&outcome[B_LF][0], 1);
        } else {
            fail("lf: %s", k == 0 ? "the connection ended inside a status line" : strerror(errno));
        }
        goto out;
    }
    int status = atoi(r.b.p + 9);
    if (status >= 100 && status < 600) atomic_fetch_add(&outcome[B_LF][status], 1);
    if (status >= 400 && status < 500) goto out;
    check_resp(&r, &q, "lf (bare LF, served)");
out:
    rd_free(&r);
    conn_close(fd, 0);
}

static void hugehdr(worker_t* w) {
    int fd = conn_open();
    if (fd < 0) return;
    w->out.len = 0;
    add_bad(w, &w->out, B_HUGEHDR);
    rd_t r = {.fd = fd};
    if (send_all(fd, w->out.p, w->out.len, NULL) < 0 && !closed_errno(errno))
        fail("hugehdr: send: %s", strerror(errno));
    judge_bad(&r, B_HUGEHDR, "hugehdr");
    rd_free(&r);
    conn_close(fd, 0);
}

/* Many small headers, under 4 KiB: served, or 431. */
static void manyhdr(worker_t* w) {
    int fd = conn_open();
    if (fd < 0) return;
    req_t q;
    pick_req(&w->rng, &q, 0);
    w->out.len = 0;
    add_req(&w->out, &q, "\r\n");
    w->out.len -= 2;
    int n = 50 + (int)below(&w->rng, 251);
    for (int i = 0; i < n && w->out.len < 3900; i++) buf_fmt(&w->out, "X-%d: %d\r\n", i, i);
    buf_add(&w->out, "\r\n", 2);
    rd_t r = {.fd = fd};
    if (send_all(fd, w->out.p, w->out.len, &w->rng) < 0) fail("manyhdr: send: %s", strerror(errno));
    while (r.b.len < 12) {
        int k = rd_fill(&r);
        if (k == 1) continue;
        fail("manyhdr: %zu small headers in %zu bytes: %s", (size_t)n, w->out.len,
             k == 0 ? "closed" : strerror(errno));
        goto out;
    }
    if (atoi(r.b.p + 9) != 431) check_resp(&r, &q, "manyhdr");
out:
    rd_free(&r);
    conn_close(fd, 0);
}

static void halfclose(worker_t* w) {
    int fd = conn_open();
    if (fd < 0) return;
    good_batch(w, fd, 1 + (int)below(&w->rng, 4), 1, "halfclose");
    conn_close(fd, 0);
}

static void cutreq(worker_t* w) {
    int fd = conn_open();
    if (fd < 0) return;
    if (below(&w->rng, 2) && good_batch(w, fd, 1 + (int)below(&w->rng, 3), 0, "cutreq (before)") != 1) {
        conn_close(fd, 0);
        return;
    }
    req_t q;
    pick_req(&w->rng, &q, 0);
    w->out.len = 0;
    add_req(&w->out, &q, "\r\n");
    size_t n = below(&w->rng, w->out.len - 1);
    if (send_all(fd, w->out.p, n, &w->rng) < 0) fail("cutreq: send: %s", strerror(errno));
    if (below(&w->rng, 2)) usleep((useconds_t)below(&w->rng, 20000));
    conn_close(fd, (int)below(&w->rng, 2));
}

static void cutresp(worker_t* w) {
    int fd = conn_open();
    if (fd < 0) return;
    req_t q = {.file = BIG_FILE};
    int n = 1 + (int)below(&w->rng, 4);
    w->out.len = 0;
    for (int i = 0; i < n; i++) add_req(&w->out, &q, "\r\n");
    if (send_all(fd, w->out.p, w->out.len, NULL) < 0) { fail("cutresp: send: %s", strerror(errno)); goto out; }
    size_t want = below(&w->rng, 65536), got = 0;
    char tmp[4096];
    while (got < want) {
        ssize_t k = recv(fd, tmp, sizeof(tmp), 0);
        if (k <= 0) { fail("cutresp: %s after %zu bytes", k == 0 ? "EOF" : strerror(errno), got); break; }
        got += (size_t)k;
    }
out:
    conn_close(fd, (int)below(&w->rng, 2));
}

/* After a response, silence: the server must close within its idle timeout
 * and 3 s. */
static void idle(worker_t* w) {
    int fd = conn_open();
    if (fd < 0) return;
    if (good_batch(w, fd, 1, 0, "idle (its request)") != 1) { conn_close(fd, 0); return; }
    int64_t t0 = now_ns(), bound = (int64_t)idle_timeout_ms * 1000000 + 3000000000;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int k = poll(&p, 1, (int)(bound / 1000000));
    char c;
    if (k == 0) fail("idle: the connection still open %lld ms after its response (idle timeout %d ms)",
                     (long long)((now_ns() - t0) / 1000000), idle_timeout_ms);
    else if (k == 1 && recv(fd, &c, 1, 0) > 0) fail("idle: the server sent a byte nobody asked for");
    conn_close(fd, 0);
}

static void* worker_main(void* arg) {
    worker_t* w = (worker_t*)arg;
    int fd = -1;    /* a good connection kept between batches */
    while (running()) {
        unsigned s = pick((unsigned)below(&w->rng, 100), scen_upto);
        if (s == S_IDLE && (idle_timeout_ms <= 0 || now_ns() + (int64_t)idle_timeout_ms * 1000000 > deadline)) continue;
        if (s != S_GOOD && fd >= 0) { conn_close(fd, 0); fd = -1; }
        atomic_fetch_add(&scen_runs[s], 1);
        switch (s) {
        case S_GOOD: fd = good(w, fd); break;
        case S_PIPEBAD: pipebad(w); break;
        case S_BAD: bad(w); break;
        case S_LF: lf(w); break;
        case S_HUGEHDR: hugehdr(w); break;
        case S_MANYHDR: manyhdr(w); break;
        case S_HALFCLOSE: halfclose(w); break;
        case S_CUTREQ: cutreq(w); break;
        case S_CUTRESP: cutresp(w); break;
        case S_IDLE: idle(w); break;
        }
    }
    if (fd >= 0) conn_close(fd, 0);
    return NULL;
}

/* ---- slowloris: headers trickled, never ended; and slow but in time ------- */
typedef struct { int fd, valid; buf_t req; size_t sent; int64_t start, due, step; req_t q; } slow_t;

static void slow_start(worker_t* w, slow_t* c, int valid) {
    c->valid = valid;
    c->req.len = 0;
    c->sent = 0;
    c->start = c->due = now_ns();
    if (valid) {
        pick_req(&w->rng, &c->q, 0);
        c->q.head = 1;      /* small responses: the thread waits for them */
        add_req(&c->req, &c->q, "\r\n");
        /* the whole request within half the header timeout */
        c->step = (int64_t)header_timeout_ms * 1000000 / 2 / (int64_t)c->req.len;
    } else {
        buf_fmt(&c->req, "GET /%s HTTP/1.1\r\nHost: x\r\nX-Slow: ", files[3].name);
        buf_fill(&c->req, 's', 65536);      /* more than it will send */
        c->step = 0;
    }
}

static int64_t slow_longest;     /* the slowest close, ns (the slowloris thread's) */

static void* slow_main(void* arg) {
    worker_t* w = (worker_t*)arg;
    int nvalid = nslow / 4 + 1, n = nslow + nvalid;
    slow_t* cs = calloc((size_t)n, sizeof(*cs));
    int64_t bound = (int64_t)header_timeout_ms * 1000000 + 3000000000;
    for (int i = 0; i < n; i++) cs[i].fd = -1;
    while (running()) {
        int64_t t = now_ns(), next = t + 100000000;
        for (int i = 0; i < n; i++) {
            slow_t* c = &cs[i];
            if (c->fd < 0) {
                if (t + bound > deadline) continue;     /* no new ones near the end */
                if ((c->fd = conn_open()) < 0) continue;
                slow_start(w, c, i >= nslow);
            }
            struct pollfd p = {.fd = c->fd, .events = POLLIN};
            if (!c->valid && poll(&p, 1, 0) == 1) {
                /* the server ended it (a 408 first is allowed) */
                atomic_fetch_add(&scen_runs[S_SLOW], 1);
                if (t - c->start > slow_longest) slow_longest = t - c->start;
                conn_close(c->fd, 0);
                c->fd = -1;
                continue;
            }
            if (!c->valid && t - c->start > bound) {
                fail("slowloris: the connection still open %lld ms after it began trickling (header timeout %d ms)",
                     (long long)((t - c->start) / 1000000), header_timeout_ms);
                conn_close(c->fd, 1);
                c->fd = -1;
                continue;
            }
            if (c->due <= t) {
                if (send(c->fd, c->req.p + c->sent, 1, MSG_NOSIGNAL) != 1) {
                    if (c->valid || !closed_errno(errno)) fail("slow: send: %s", strerror(errno));
                    else {
                        atomic_fetch_add(&scen_runs[S_SLOW], 1);
                        if (t - c->start > slow_longest) slow_longest = t - c->start;
                    }
                    conn_close(c->fd, 0);
                    c->fd = -1;
                    continue;
                }
                if (c->valid && ++c->sent == c->req.len) {
                    rd_t r = {.fd = c->fd};
                    check_resp(&r, &c->q, "slow-valid (sent within half the header timeout)");
                    rd_free(&r);
                    atomic_fetch_add(&scen_runs[S_SLOWOK], 1);
                    conn_close(c->fd, 0);
                    c->fd = -1;
                    continue;
                }
                if (!c->valid) c->sent++;
                c->due = t + (c->valid ? c->step : 20000000 + (int64_t)below(&w->rng, 130000000));
            }
            if (c->due < next) next = c->due;
        }
        int64_t d = next - now_ns();
        if (d > 20000000) d = 20000000;     /* to see closes soon */
        sleep_ns(d);
    }
    for (int i = 0; i < n; i++) {
        if (cs[i].fd >= 0) conn_close(cs[i].fd, (int)(i & 1));
        free(cs[i].req.p);
    }
    free(cs);
    return NULL;
}

/* ---- the server's descriptors and memory ---------------------------------- */
/* The server's open descriptors other than files under the root (a server
 * may keep those open, as in an open-file cache: their count goes to
 * *cached, if not NULL). */
static long server_fds(long* cached) {
    char path[64], link[PATH_MAX + 64], real[PATH_MAX];
    snprintf(path, sizeof(path), "/proc/%d/fd", server_pid);
    DIR* d = opendir(path);
    if (d == NULL) return -1;
    size_t rl = realpath(root, real) ? strlen(real) : 0;
    long n = 0, c = 0;
    struct dirent* e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        snprintf(link, sizeof(link), "%s/%s", path, e->d_name);
        char to[PATH_MAX];
        ssize_t k = readlink(link, to, sizeof(to) - 1);
        if (rl && k > (ssize_t)rl && strncmp(to, real, rl) == 0 && to[rl] == '/') c++;
        else n++;
    }
    closedir(d);
    if (cached) *cached = c;
    return n;
}

static void usage(void) {
    fprintf(stderr, "usage: chaos_http --port P --root DIR --seconds S [--pid PID] [--workers W]"
                    " [--header-timeout-ms T] [--idle-timeout-ms T] [--slow K] [--seed X]"
                    " [--slack-mib M] [--halfclose-max BYTES] [--only good|pipebad|bad|lf|hugehdr|manyhdr|halfclose|cutreq|cutresp|idle]\n");
    exit(2);
}

/* The options only chaos_http takes: 1 if opt is one. */
static int own_opt(const char* opt, const char* v) {
    if (!strcmp(opt, "--root")) root = v;
    else if (!strcmp(opt, "--header-timeout-ms")) header_timeout_ms = atoi(v);
    else if (!strcmp(opt, "--idle-timeout-ms")) idle_timeout_ms = atoi(v);
    else if (!strcmp(opt, "--slow")) nslow = atoi(v);
    else if (!strcmp(opt, "--halfclose-max")) halfclose_max = strtoull(v, NULL, 0);
    else return 0;
    return 1;
}

int main(int argc, char** argv) {
    if (read_opts(argc, argv, scen_name, S_IDLE + 1, own_opt) < 0) usage();
    if (port <= 0 || root == NULL || nworkers < 1 || nworkers > MAX_WORKERS || nslow < 0) usage();
    if (seed == 0) seed = (uint64_t)time(NULL) ^ (uint64_t)getpid() << 32;
    signal(SIGPIPE, SIG_IGN);
    if (make_files() < 0) return 2;
    long base_fds = 0, base_rss = 0;
    if (server_pid) {
        base_fds = server_fds(NULL);
        base_rss = server_rss();
        if (base_fds < 0 || base_rss < 0) {
            fprintf(stderr, "chaos_http: cannot read /proc/%d\n", server_pid);
            return 2;
        }
    }
    if (header_timeout_ms <= 0) nslow = 0;
    printf("chaos_http: port %d, %.0f s, %d workers, %d slowloris (header timeout %d ms), idle "
           "timeout %d ms, seed %#llx\n", port, seconds, nworkers, nslow, header_timeout_ms,
           idle_timeout_ms, (unsigned long long)seed);
    fflush(stdout);
    int64_t t0 = start_clock();
    pthread_t th[MAX_WORKERS + 1];
    for (int i = 0; i <= nworkers; i++) {
        workers[i].id = (unsigned)i;
        workers[i].rng.s = mix(seed + (uint64_t)i);
    }
    for (int i = 0; i < nworkers; i++) pthread_create(&th[i], NULL, worker_main, &workers[i]);
    int slow = nslow > 0 && (only < 0);
    if (slow) pthread_create(&th[nworkers], NULL, slow_main, &workers[nworkers]);
    long peak_rss = watch_rss();
    for (int i = 0; i < nworkers + slow; i++) pthread_join(th[i], NULL);
    long peak_conns = atomic_load(&most_conns);
    printf("chaos_http: ran %.1f s:", (double)(now_ns() - t0) / 1e9);
    for (int s = 0; s < S_N; s++) printf(" %s %ld", scen_name[s], atomic_load(&scen_runs[s]));
    printf("; at most %ld connections at once\n", peak_conns);
    if (slow)
        printf("chaos_http: slowloris connections closed by the server %lld ms after they began, at most\n",
               (long long)(slow_longest / 1000000));
    for (int b = 0; b < B_N; b++) {
        printf("chaos_http: %-17s", bad_name[b]);
        int any = 0;
        for (int s = 0; s < 600; s++) {
            long n = atomic_load(&outcome[b][s]);
            if (n == 0) continue;
            if (s == 0) printf("%s close x%ld", any ? "," : "", n);
            else if (s == 9) printf("%s HTTP/0.9 body and close x%ld", any ? "," : "", n);
            else printf("%s %d x%ld", any ? "," : "", s, n);
            any = 1;
        }
        printf("%s\n", any ? "" : " (not run)");
    }
    /* the server still serves every file, byte for byte */
    int fd = conn_open();
    if (fd >= 0) {
        rd_t r = {.fd = fd};
        for (int i = 0; i < NFILES; i++) {
            req_t q = {.file = i};
            buf_t b = {0};
            add_req(&b, &q, "\r\n");
            if (send_all(fd, b.p, b.len, NULL) < 0 || check_resp(&r, &q, "after the run") < 0) i = NFILES;
            free(b.p);
        }
        rd_free(&r);
        conn_close(fd, 0);
    } else {
        fail("after the run: the server takes no connection");
    }

    if (server_pid) {
        /* descriptors back to the count before, memory within the bound */
        long fds = -1, cached = 0;
        int64_t until = now_ns() + 20000000000;
        while ((fds = server_fds(&cached)) != base_fds && now_ns() < until) usleep(100000);
        long rss = server_rss();
        long bound = base_rss + 65536 * peak_conns + ((long)slack_mib << 20);
        printf("chaos_http: server descriptors %ld before, %ld after (and %ld files of the root); RSS %ld"
               " KiB before, %ld KiB at most, %ld KiB after (bound %ld KiB, %ld connections)\n",
               base_fds, fds, cached, base_rss >> 10, peak_rss >> 10, rss >> 10, bound >> 10, peak_conns);
        if (fds != base_fds) fail("the server holds %ld descriptors, %ld before the run", fds, base_fds);
        /* a cache holds each path once (a file may have two: "/" and "/index.html") */
        if (cached > 2 * NFILES + 2)
            fail("the server holds %ld files of the root open, more than a cache would", cached);
        if (rss < 0) fail("the server is gone");
        else if (rss > bound) fail("the server's RSS %ld KiB is over the bound %ld KiB", rss >> 10, bound >> 10);
    }
    return verdict();
}
