/* test_hook_bb_clients.c - real client libraries (hiredis' blocking API,
 * libcurl's easy interface) in many cos of one scheduler thread through the
 * syscall hooks (rt/hook.c linked in), against a server that misbehaves,
 * from docs/hooks.md and aco_rt.h alone.
 *
 * The fake server runs on plain threads (libc's blocking calls: the hooks
 * pass them on outside cos), a listener per scenario, a thread per
 * connection.  Against it, for each scenario, COPIES cos at once with
 * hiredis or curl:
 *   - trickle: the reply a byte at a time, 1 ms apart (curl: the whole
 *     response, headers too), then 12 ms apart for longer than the client's
 *     per-call timeout (hiredis' SO_RCVTIMEO of 1 s; curl's
 *     CURLOPT_LOW_SPEED_* of 10 B/s for 1 s): every reply whole and right;
 *   - stall: part of the reply, then nothing: hiredis' redisSetTimeout
 *     (REDIS_ERR_IO, "Resource temporarily unavailable"), curl's
 *     CURLOPT_TIMEOUT_MS and CURLOPT_LOW_SPEED_* (CURLE_OPERATION_TIMEDOUT),
 *     none of them early; with no timeout, aco_rt_cancel ends the call;
 *   - close mid-reply (REDIS_ERR_EOF, CURLE_PARTIAL_FILE) and before any
 *     reply (REDIS_ERR_EOF, CURLE_GOT_NOTHING);
 *   - reset (SO_LINGER 0) mid-reply: REDIS_ERR_IO "Connection reset by
 *     peer", CURLE_RECV_ERROR;
 *   - garbage: REDIS_ERR_PROTOCOL; curl: not HTTP at all
 *     (CURLE_UNSUPPORTED_PROTOCOL: HTTP/0.9 not allowed) and a NUL byte in
 *     a header (CURLE_WEIRD_SERVER_REPLY);
 *   - accepts, never reads: a 256 KiB SET / POST fills the socket and waits
 *     in its write: the timeouts as above, or aco_rt_cancel.
 * Each scenario's result (hiredis: err and errstr; curl: the CURLcode, the
 * body) must be the one the same client gets outside cos, on a plain
 * thread, where the calls are libc's (run first, all at once), and the one
 * named above.  Meanwhile a ticker co sleeps 1 ms at a time: every call
 * that waits (trickle, stall, never-read) must see it tick, so the thread
 * was not blocked in it; cos doing good requests (hiredis GET, curl GET on
 * a kept-alive connection) to a well-behaved listener of the same server
 * complete, each reply checked, while the bad ones wait.  The cancelled
 * cos were inside the library call when cancelled, leave it (hiredis
 * REDIS_ERR_IO "Operation canceled"; curl, whose waits are polls,
 * CURLE_BAD_FUNCTION_ARGUMENT as docs/hooks.md says) and finish (joined).
 * No descriptor is left (/proc/self/fd before and after), no SIGPIPE
 * (the default action: it would kill the test).  On every backend of
 * $ACO_RT_TEST_BACKENDS, a process each.
 *
 * Built with pkg-config's hiredis and libcurl (rt/tests/tests.list's pkg=
 * column); without them make.sh builds the stub at the end, which fails
 * naming the packages.
 */
#define _GNU_SOURCE
#include "hook_bb.h"

#ifndef TEST_PKG_MISSING

#include <arpa/inet.h>
#include <curl/curl.h>
#include <dirent.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/time.h>

enum { REF = 99, COPIES = 3, GOOD_COS = 4, VAL_LEN = 100, PART_BODY = 20, BIG = 256 << 10 };

enum mode { M_GOOD, M_TRICKLE, M_STALL, M_CLOSE, M_CLOSE_EARLY, M_RESET, M_GARBAGE, M_NUL_HDR,
            M_NOREAD };
enum opt { O_NONE, O_TMO, O_LOWSPEED, O_CANCEL };
enum lib { L_REDIS, L_CURL };

typedef struct {
    const char* name;
    int lib, mode, gap_ms;  /* gap: trickle's pause between bytes */
    int head_at_once;       /* trickle: the HTTP head in one send, the body trickled */
    int opt, tmo_ms;        /* O_TMO: redisSetTimeout / CURLOPT_TIMEOUT_MS;
                               O_LOWSPEED: CURLOPT_LOW_SPEED_LIMIT (B/s) for 1 s */
    int want;               /* hiredis: c->err (0: the value); curl: the CURLcode */
    int want_errno;         /* hiredis REDIS_ERR_IO: errstr is strerror of it */
    const char* want_str;   /* else hiredis' errstr, when not NULL */
    int waits;              /* the call waits (>= 100 ms): the ticker must tick in it */
    int min_ms;             /* the call takes at least this long */
} scen_t;

static const scen_t scens[] = {
    {"redis trickle 1 ms", L_REDIS, M_TRICKLE, 1, 0, O_NONE, 0, 0, 0, NULL, 1, 100},
    {"redis trickle 12 ms, SO_RCVTIMEO 1 s", L_REDIS, M_TRICKLE, 12, 0, O_TMO, 1000, 0, 0, NULL, 1, 1000},
    {"redis stall, 300 ms timeout", L_REDIS, M_STALL, 0, 0, O_TMO, 300, REDIS_ERR_IO, EAGAIN, NULL, 1, 300},
    {"redis stall, cancelled", L_REDIS, M_STALL, 0, 0, O_CANCEL, 0, REDIS_ERR_IO, ECANCELED, NULL, 1, 0},
    {"redis close mid-reply", L_REDIS, M_CLOSE, 0, 0, O_NONE, 0, REDIS_ERR_EOF, 0, "Server closed the connection", 0, 0},
    {"redis close before a reply", L_REDIS, M_CLOSE_EARLY, 0, 0, O_NONE, 0, REDIS_ERR_EOF, 0, "Server closed the connection", 0, 0},
    {"redis reset mid-reply", L_REDIS, M_RESET, 0, 0, O_NONE, 0, REDIS_ERR_IO, ECONNRESET, NULL, 0, 0},
    {"redis garbage", L_REDIS, M_GARBAGE, 0, 0, O_NONE, 0, REDIS_ERR_PROTOCOL, 0, "Protocol error, got \"!\" as reply type byte", 0, 0},
    {"redis never read, 300 ms timeout", L_REDIS, M_NOREAD, 0, 0, O_TMO, 300, REDIS_ERR_IO, EAGAIN, NULL, 1, 300},
    {"redis never read, cancelled", L_REDIS, M_NOREAD, 0, 0, O_CANCEL, 0, REDIS_ERR_IO, ECANCELED, NULL, 1, 0},
    {"curl trickle 1 ms", L_CURL, M_TRICKLE, 1, 0, O_NONE, 0, CURLE_OK, 0, NULL, 1, 100},
    {"curl trickle 12 ms, low speed 10 B/s", L_CURL, M_TRICKLE, 12, 1, O_LOWSPEED, 10, CURLE_OK, 0, NULL, 1, 1000},
    {"curl stall, 300 ms timeout", L_CURL, M_STALL, 0, 0, O_TMO, 300, CURLE_OPERATION_TIMEDOUT, 0, NULL, 1, 300},
    {"curl stall, low speed 1000 B/s", L_CURL, M_STALL, 0, 0, O_LOWSPEED, 1000, CURLE_OPERATION_TIMEDOUT, 0, NULL, 1, 1000},
    {"curl stall, cancelled", L_CURL, M_STALL, 0, 0, O_CANCEL, 0, CURLE_BAD_FUNCTION_ARGUMENT, 0, NULL, 1, 0},
    {"curl close mid-reply", L_CURL, M_CLOSE, 0, 0, O_NONE, 0, CURLE_PARTIAL_FILE, 0, NULL, 0, 0},
    {"curl close before a reply", L_CURL, M_CLOSE_EARLY, 0, 0, O_NONE, 0, CURLE_GOT_NOTHING, 0, NULL, 0, 0},
    {"curl reset mid-reply", L_CURL, M_RESET, 0, 0, O_NONE, 0, CURLE_RECV_ERROR, 0, NULL, 0, 0},
    {"curl garbage", L_CURL, M_GARBAGE, 0, 0, O_NONE, 0, CURLE_UNSUPPORTED_PROTOCOL, 0, NULL, 0, 0},
    {"curl NUL in a header", L_CURL, M_NUL_HDR, 0, 0, O_NONE, 0, CURLE_WEIRD_SERVER_REPLY, 0, NULL, 0, 0},
    {"curl never read, 300 ms timeout", L_CURL, M_NOREAD, 0, 0, O_TMO, 300, CURLE_OPERATION_TIMEDOUT, 0, NULL, 1, 300},
    {"curl never read, cancelled", L_CURL, M_NOREAD, 0, 0, O_CANCEL, 0, CURLE_BAD_FUNCTION_ARGUMENT, 0, NULL, 1, 0},
};
enum { NSC = sizeof(scens) / sizeof(scens[0]), GOOD = NSC };

static char* big;       /* the never-read scenarios' 256 KiB value / body */

/* ------------------------------------------------------------------------ */
/* Replies                                                                  */
/* ------------------------------------------------------------------------ */

/* The value for key: VAL_LEN bytes, its own. */
static void value_of(const char* key, char* v) {
    int n = snprintf(v, VAL_LEN + 1, "value of %s:", key);
    for (int i = n; i < VAL_LEN; i++) v[i] = (char)('a' + (i * 7 + (int)strlen(key)) % 26);
    v[VAL_LEN] = 0;
}

/* The whole reply to a request for key, and where its head ends. */
static size_t reply_of(int http, const char* key, char* out, size_t* head) {
    char v[VAL_LEN + 1];
    value_of(key, v);
    int h = http ? snprintf(out, 256, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                            "Content-Length: %d\r\n\r\n", VAL_LEN)
                 : snprintf(out, 256, "$%d\r\n", VAL_LEN);
    memcpy(out + h, v, VAL_LEN);
    size_t n = (size_t)h + VAL_LEN;
    if (!http) memcpy(out + n, "\r\n", 2), n += 2;
    *head = (size_t)h;
    return n;
}

/* A whole request at the start of in (RESP's array of bulk strings, or an
 * HTTP head): its length, its key (the second word / the path past '/')
 * and protocol; 0 while incomplete; -1 if it is neither. */
static long parse_req(const char* in, size_t len, char* key, int* http) {
    if (len == 0) return 0;
    if (in[0] == '*') {
        *http = 0;
        char* e;
        long n = strtol(in + 1, &e, 10), at;
        const char* crlf = memmem(in, len, "\r\n", 2);
        if (crlf == NULL) return 0;
        at = crlf - in + 2;
        for (long i = 0; i < n; i++) {
            if ((size_t)at >= len) return 0;
            if (in[at] != '$') return -1;
            crlf = memmem(in + at, len - (size_t)at, "\r\n", 2);
            if (crlf == NULL) return 0;
            long l = strtol(in + at + 1, &e, 10);
            long d = crlf - in + 2;
            if ((size_t)(d + l + 2) > len) return 0;
            if (i == 1) snprintf(key, 64, "%.*s", (int)(l < 63 ? l : 63), in + d);
            at = d + l + 2;
        }
        return at;
    }
    *http = 1;
    const char* end = memmem(in, len, "\r\n\r\n", 4);
    if (end == NULL) return 0;
    if (sscanf(in, "GET /%63s ", key) != 1) return -1;
    return end - in + 4;
}

/* ------------------------------------------------------------------------ */
/* The fake server: plain threads, plain blocking calls                     */
/* ------------------------------------------------------------------------ */

static struct {
    int lfd[NSC + 1], port[NSC + 1];
    int stop[2];                    /* written once: every thread ends */
    pthread_t acceptor;
    pthread_t th[1024];
    int nth;
    int reached[NSC];               /* connections at their stall point (atomic) */
} srv;

typedef struct { int fd, sc; } conn_t;

static int stopped(void) {
    struct pollfd p = {srv.stop[0], POLLIN, 0};
    return poll(&p, 1, 0) > 0;
}

/* Wait for the end of the test (or, watch set, for the client to go). */
static void wait_stop(int fd, int watch) {
    for (;;) {
        struct pollfd p[2] = {{srv.stop[0], POLLIN, 0}, {fd, POLLIN, 0}};
        if (poll(p, watch ? 2 : 1, -1) < 0) continue;
        if (p[0].revents) return;
        if (watch && p[1].revents) {
            char b[4096];
            if (recv(fd, b, sizeof(b), 0) <= 0) return;
        }
    }
}

static int send_all(int fd, const char* p, size_t n) {
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0) return -1;
        p += w, n -= (size_t)w;
    }
    return 0;
}

static void* handler(void* arg) {
    conn_t c = *(conn_t*)arg;
    free(arg);
    int mode = c.sc == GOOD ? M_GOOD : scens[c.sc].mode;
    if (mode == M_NOREAD) {
        __atomic_add_fetch(&srv.reached[c.sc], 1, __ATOMIC_SEQ_CST);
        wait_stop(c.fd, 0);
        close(c.fd);
        return NULL;
    }
    static __thread char in[8192];
    size_t len = 0;
    for (;;) {
        char key[64], out[512];
        int http = 0;
        long rl;
        while ((rl = parse_req(in, len, key, &http)) == 0) {
            if (len == sizeof(in)) goto out;
            ssize_t r = recv(c.fd, in + len, sizeof(in) - len, 0);
            if (r <= 0) goto out;
            len += (size_t)r;
        }
        if (rl < 0) goto out;
        size_t head, n = reply_of(http, key, out, &head), part = head + PART_BODY;
        switch (mode) {
        case M_GOOD:
            if (send_all(c.fd, out, n) < 0) goto out;
            break;
        case M_TRICKLE: {
            const scen_t* s = &scens[c.sc];
            size_t i = 0;
            if (s->head_at_once) {
                if (send_all(c.fd, out, head) < 0) goto out;
                i = head;
            }
            for (; i < n; i++) {
                if (stopped() || send_all(c.fd, out + i, 1) < 0) goto out;
                usleep((useconds_t)s->gap_ms * 1000);
            }
            break;
        }
        case M_STALL:
            send_all(c.fd, out, part);
            __atomic_add_fetch(&srv.reached[c.sc], 1, __ATOMIC_SEQ_CST);
            wait_stop(c.fd, 1);
            goto out;
        case M_CLOSE:
            send_all(c.fd, out, part);
            goto out;
        case M_CLOSE_EARLY:
            goto out;
        case M_RESET: {
            send_all(c.fd, out, part);
            usleep(50000);          /* the client has read the part, and waits */
            struct linger lg = {1, 0};
            setsockopt(c.fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
            goto out;
        }
        case M_GARBAGE: {
            static const char g_resp[] = "!garbage\r\n\x01\x02\xff\r\n";
            static const char g_http[] = "\x01\x02garbage, not HTTP\xff\xfe\r\n\r\n";
            if (http) send_all(c.fd, g_http, sizeof(g_http) - 1);
            else send_all(c.fd, g_resp, sizeof(g_resp) - 1);
            wait_stop(c.fd, 1);
            goto out;
        }
        case M_NUL_HDR: {
            static const char g[] = "HTTP/1.1 200 OK\r\nX-Bad: a\0b\r\nContent-Length: 3\r\n\r\nabc";
            send_all(c.fd, g, sizeof(g) - 1);
            wait_stop(c.fd, 1);
            goto out;
        }
        }
        len -= (size_t)rl;
        memmove(in, in + rl, len);
    }
out:
    close(c.fd);
    return NULL;
}

static void* acceptor(void* arg) {
    (void)arg;
    struct pollfd p[NSC + 2];
    for (;;) {
        p[0] = (struct pollfd){srv.stop[0], POLLIN, 0};
        for (int i = 0; i <= NSC; i++) p[1 + i] = (struct pollfd){srv.lfd[i], POLLIN, 0};
        if (poll(p, NSC + 2, -1) < 0) continue;
        if (p[0].revents) return NULL;
        for (int i = 0; i <= NSC; i++) {
            if (!p[1 + i].revents) continue;
            int fd = accept4(srv.lfd[i], NULL, NULL, SOCK_CLOEXEC), one = 1;
            if (fd < 0) continue;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
            conn_t* c = malloc(sizeof(*c));
            CHECK(c != NULL);
            *c = (conn_t){fd, i};
            CHECK(srv.nth < (int)(sizeof(srv.th) / sizeof(srv.th[0])));
            CHECK_EQ(pthread_create(&srv.th[srv.nth], NULL, handler, c), 0);
            srv.nth++;
        }
    }
}

static void server_start(void) {
    memset(&srv, 0, sizeof(srv));
    CHECK_EQ(pipe2(srv.stop, O_CLOEXEC), 0);
    for (int i = 0; i <= NSC; i++) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1, small = 4096;
        CHECK(fd >= 0);
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        /* the never-read ones: a small window, so a write fills it soon */
        if (i < NSC && scens[i].mode == M_NOREAD)
            CHECK_EQ(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)), 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t l = sizeof(a);
        CHECK_EQ(bind(fd, (struct sockaddr*)&a, l), 0);
        CHECK_EQ(listen(fd, 128), 0);
        CHECK_EQ(getsockname(fd, (struct sockaddr*)&a, &l), 0);
        srv.lfd[i] = fd;
        srv.port[i] = ntohs(a.sin_port);
    }
    CHECK_EQ(pthread_create(&srv.acceptor, NULL, acceptor, NULL), 0);
}

static void server_stop(void) {
    CHECK_EQ(write(srv.stop[1], "x", 1), 1);
    CHECK_EQ(pthread_join(srv.acceptor, NULL), 0);
    for (int i = 0; i < srv.nth; i++) CHECK_EQ(pthread_join(srv.th[i], NULL), 0);
    for (int i = 0; i <= NSC; i++) close(srv.lfd[i]);
    close(srv.stop[0]);
    close(srv.stop[1]);
}

/* ------------------------------------------------------------------------ */
/* The clients                                                              */
/* ------------------------------------------------------------------------ */

typedef struct {
    int sc, copy;
    int err;                /* hiredis: c->err; curl: the CURLcode */
    char errstr[128];       /* hiredis' errstr */
    int ok;                 /* the reply was the value asked for */
    int64_t t0, t1;         /* the library call */
    int64_t ticks0, ticks1; /* the ticker's count then */
    volatile int in_call;
    int done;
} cres_t;

static struct {
    volatile int stop;
    int64_t ticks, max_late, max_late_at;   /* at: when it came due, aco_rt_now() */
    int64_t max_late_cpu;                   /* the thread's CPU time in that tick */
} ticker;

static int64_t cpu_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static int bad_left;        /* bad cos not finished yet */
static int good_meanwhile[2], good_total[2];

static void key_of(char* key, int sc, int copy) { snprintf(key, 64, "k%d-%d", sc, copy); }

static void mark_start(cres_t* r) {
    r->ticks0 = ticker.ticks;
    r->in_call = 1;
    r->t0 = aco_rt_now();
}

static void mark_end(cres_t* r) {
    r->t1 = aco_rt_now();
    r->in_call = 0;
    r->ticks1 = ticker.ticks;
}

static void redis_client(cres_t* r) {
    const scen_t* s = &scens[r->sc];
    char key[64], want[VAL_LEN + 1];
    key_of(key, r->sc, r->copy);
    value_of(key, want);
    struct timeval ctv = {1, 0};
    redisContext* c = s->opt == O_TMO ? redisConnectWithTimeout("127.0.0.1", srv.port[r->sc], ctv)
                                      : redisConnect("127.0.0.1", srv.port[r->sc]);
    CHECK(c != NULL);
    if (c->err) TEST_FAIL_AT(__FILE__, __LINE__, "%s: connect: %s", s->name, c->errstr);
    if (s->opt == O_TMO) {
        struct timeval tv = {s->tmo_ms / 1000, (s->tmo_ms % 1000) * 1000};
        CHECK_EQ(redisSetTimeout(c, tv), REDIS_OK);
    }
    redisReply* rep;
    if (s->mode == M_NOREAD) {
        int small = 4096;
        CHECK_EQ(setsockopt(c->fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);
        mark_start(r);
        rep = redisCommand(c, "SET %s %b", key, big, (size_t)BIG);
    } else {
        mark_start(r);
        rep = redisCommand(c, "GET %s", key);
    }
    mark_end(r);
    r->err = c->err;
    snprintf(r->errstr, sizeof(r->errstr), "%s", c->errstr);
    r->ok = rep != NULL && rep->type == REDIS_REPLY_STRING && rep->len == VAL_LEN &&
            memcmp(rep->str, want, VAL_LEN) == 0;
    if (rep) freeReplyObject(rep);
    redisFree(c);
}

typedef struct {
    char b[4096];
    size_t len;
} body_t;

static size_t on_body(char* p, size_t sz, size_t n, void* arg) {
    body_t* b = arg;
    size_t k = sz * n;
    if (b->len + k >= sizeof(b->b)) return 0;
    memcpy(b->b + b->len, p, k);
    b->len += k;
    return k;
}

static int small_sndbuf(void* arg, curl_socket_t fd, curlsocktype purpose) {
    (void)arg, (void)purpose;
    int small = 4096;
    return setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)) == 0
               ? CURL_SOCKOPT_OK : CURL_SOCKOPT_ERROR;
}

static CURL* curl_for(int sc, const char* key, body_t* b) {
    CURL* h = curl_easy_init();
    CHECK(h != NULL);
    char url[128];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/%s", srv.port[sc], key);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, b);
    b->len = 0;
    return h;
}

static void curl_client(cres_t* r) {
    const scen_t* s = &scens[r->sc];
    char key[64], want[VAL_LEN + 1];
    key_of(key, r->sc, r->copy);
    value_of(key, want);
    body_t* b = calloc(1, sizeof(*b));
    CHECK(b != NULL);
    CURL* h = curl_for(r->sc, key, b);
    struct curl_slist* hdrs = NULL;
    if (s->opt == O_TMO) curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)s->tmo_ms);
    if (s->opt == O_LOWSPEED) {
        curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, (long)s->tmo_ms);
        curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, 1L);
    }
    if (s->mode == M_NOREAD) {
        hdrs = curl_slist_append(NULL, "Expect:");
        CHECK(hdrs != NULL);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, big);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)BIG);
        curl_easy_setopt(h, CURLOPT_SOCKOPTFUNCTION, small_sndbuf);
    }
    mark_start(r);
    CURLcode rc = curl_easy_perform(h);
    mark_end(r);
    r->err = (int)rc;
    snprintf(r->errstr, sizeof(r->errstr), "%s", curl_easy_strerror(rc));
    long code = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    r->ok = rc == CURLE_OK && code == 200 && b->len == VAL_LEN && memcmp(b->b, want, VAL_LEN) == 0;
    curl_easy_cleanup(h);
    curl_slist_free_all(hdrs);
    free(b);
}

static void client(cres_t* r) {
    if (scens[r->sc].lib == L_REDIS) redis_client(r);
    else curl_client(r);
    r->done = 1;
}

/* ------------------------------------------------------------------------ */
/* Outside cos: what the libraries say without the hooks                    */
/* ------------------------------------------------------------------------ */

static cres_t ref[NSC];

static void* ref_thread(void* arg) {
    /* a SIGPIPE here is libc's, as the library has it: not this test's
     * question (the cos' SIGPIPE would still kill the process) */
    sigset_t m;
    sigemptyset(&m);
    sigaddset(&m, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &m, NULL);
    CHECK(aco_rt_sched_current() == NULL && !in_co());
    client(arg);
    return NULL;
}

static int64_t t_refs;

static void references(void) {
    int64_t t0 = aco_rt_now();
    server_start();
    pthread_t th[NSC];
    int n = 0, at[NSC];
    for (int i = 0; i < NSC; i++) {
        if (scens[i].opt == O_CANCEL) continue;     /* no cancel without cos */
        ref[i] = (cres_t){.sc = i, .copy = REF};
        at[n] = i;
        CHECK_EQ(pthread_create(&th[n++], NULL, ref_thread, &ref[i]), 0);
    }
    for (int k = 0; k < n; k++) CHECK_EQ(pthread_join(th[k], NULL), 0);
    for (int k = 0; k < n; k++) CHECK(ref[at[k]].done);
    server_stop();
    t_refs = aco_rt_now() - t0;
}

/* ------------------------------------------------------------------------ */
/* In cos                                                                   */
/* ------------------------------------------------------------------------ */

static cres_t res[NSC][COPIES];
static aco_rt_co_t* victims[NSC][COPIES];
static int64_t t_cancel;

static void ticker_co(void* arg) {
    (void)arg;
    while (!ticker.stop) {
        int64_t due = aco_rt_now() + MS, cpu = cpu_ns();
        if (aco_rt_sleep_until(due) < 0) break;
        int64_t late = aco_rt_now() - due;
        if (late > ticker.max_late)
            ticker.max_late = late, ticker.max_late_at = due, ticker.max_late_cpu = cpu_ns() - cpu;
        ticker.ticks++;
    }
}

static void bad_co(void* arg) {
    client(arg);
    if (--bad_left == 0) ticker.stop = 1;
}

/* Good requests on one connection each, checked, until the bad cos end. */
static void good_redis_co(void* arg) {
    int id = (int)(intptr_t)arg;
    redisContext* c = redisConnect("127.0.0.1", srv.port[GOOD]);
    CHECK(c != NULL && c->err == 0);
    for (int k = 0; bad_left > 0; k++) {
        char key[64], want[VAL_LEN + 1];
        snprintf(key, sizeof(key), "good%d-%d", id, k);
        value_of(key, want);
        redisReply* rep = redisCommand(c, "GET %s", key);
        if (rep == NULL) TEST_FAIL_AT(__FILE__, __LINE__, "good GET %s: %s", key, c->errstr);
        CHECK(rep->type == REDIS_REPLY_STRING && rep->len == VAL_LEN &&
              memcmp(rep->str, want, VAL_LEN) == 0);
        freeReplyObject(rep);
        good_total[L_REDIS]++;
        if (bad_left > 0) good_meanwhile[L_REDIS]++;
        aco_rt_sleep(2 * MS);
    }
    redisFree(c);
}

static void good_curl_co(void* arg) {
    int id = (int)(intptr_t)arg;
    body_t* b = calloc(1, sizeof(*b));
    CHECK(b != NULL);
    CURL* h = curl_for(GOOD, "x", b);
    for (int k = 0; bad_left > 0; k++) {
        char key[64], want[VAL_LEN + 1], url[128];
        snprintf(key, sizeof(key), "good%d-%d", id, k);
        value_of(key, want);
        snprintf(url, sizeof(url), "http://127.0.0.1:%d/%s", srv.port[GOOD], key);
        curl_easy_setopt(h, CURLOPT_URL, url);
        b->len = 0;
        CURLcode rc = curl_easy_perform(h);
        long code = 0;
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
        if (rc != CURLE_OK) TEST_FAIL_AT(__FILE__, __LINE__, "good GET %s: %s", key, curl_easy_strerror(rc));
        CHECK(code == 200 && b->len == VAL_LEN && memcmp(b->b, want, VAL_LEN) == 0);
        good_total[L_CURL]++;
        if (bad_left > 0) good_meanwhile[L_CURL]++;
        aco_rt_sleep(2 * MS);
    }
    curl_easy_cleanup(h);
    free(b);
}

/* Once every victim is at its server's stall point (and 100 ms more: in
 * its wait), cancel them all; then each must finish. */
static void canceller_co(void* arg) {
    (void)arg;
    int64_t t0 = aco_rt_now();
    for (int i = 0; i < NSC; i++) {
        if (scens[i].opt != O_CANCEL) continue;
        while (__atomic_load_n(&srv.reached[i], __ATOMIC_SEQ_CST) < COPIES) {
            if (aco_rt_now() - t0 > 5000 * MS)
                TEST_FAIL_AT(__FILE__, __LINE__, "%s: %d of %d connections stalled in 5 s",
                             scens[i].name, srv.reached[i], COPIES);
            CHECK_EQ(aco_rt_sleep(MS), 0);
        }
    }
    CHECK_EQ(aco_rt_sleep(100 * MS), 0);
    t_cancel = aco_rt_now();
    for (int i = 0; i < NSC; i++)
        for (int k = 0; k < COPIES && scens[i].opt == O_CANCEL; k++) {
            if (!res[i][k].in_call)
                TEST_FAIL_AT(__FILE__, __LINE__, "%s: not in the library call when cancelled",
                             scens[i].name);
            CHECK_EQ(aco_rt_cancel(victims[i][k]), 0);
        }
    for (int i = 0; i < NSC; i++)
        for (int k = 0; k < COPIES && scens[i].opt == O_CANCEL; k++)
            CHECK_EQ(aco_rt_join(victims[i][k], aco_rt_in_ms(5000)), 0);
}

static void spawn_detached(aco_rt_sched_t* s, aco_rt_fn_t fn, void* arg) {
    aco_rt_co_t* co = aco_rt_spawn(s, fn, arg);
    CHECK(co != NULL);
    CHECK_EQ(aco_rt_detach(co), 0);
}

/* hiredis: err and errstr; curl: the code. */
static int same_result(const cres_t* a, const cres_t* b) {
    return a->err == b->err && a->ok == b->ok &&
           (scens[a->sc].lib == L_CURL || strcmp(a->errstr, b->errstr) == 0);
}

static void check_result(const cres_t* r, const cres_t* rf) {
    const scen_t* s = &scens[r->sc];
    int64_t took = r->t1 - r->t0, ticks = r->ticks1 - r->ticks0;
    if (!r->done) TEST_FAIL_AT(__FILE__, __LINE__, "%s #%d: never finished", s->name, r->copy);
    /* the named result */
    int want_ok = s->want == 0;
    if (r->err != s->want || r->ok != want_ok)
        TEST_FAIL_AT(__FILE__, __LINE__, "%s #%d: %s %d (%s), value %s; want %d%s", s->name, r->copy,
                     s->lib == L_REDIS ? "err" : "CURLcode", r->err, r->errstr,
                     r->ok ? "right" : "not given", s->want, want_ok ? " and the value" : "");
    if (s->lib == L_REDIS && s->want == REDIS_ERR_IO && strcmp(r->errstr, strerror(s->want_errno)) != 0)
        TEST_FAIL_AT(__FILE__, __LINE__, "%s #%d: errstr \"%s\", want \"%s\"", s->name, r->copy,
                     r->errstr, strerror(s->want_errno));
    if (s->lib == L_REDIS && s->want_str && strcmp(r->errstr, s->want_str) != 0)
        TEST_FAIL_AT(__FILE__, __LINE__, "%s #%d: errstr \"%s\", want \"%s\"", s->name, r->copy,
                     r->errstr, s->want_str);
    /* the same as without the hooks */
    if (rf && !same_result(r, rf))
        TEST_FAIL_AT(__FILE__, __LINE__, "%s #%d: %d (%s) in a co, %d (%s) outside cos", s->name,
                     r->copy, r->err, r->errstr, rf->err, rf->errstr);
    /* never early (curl's own clock is in ms, and its differences may
     * round a 999.6 ms up to 1000: it may end its timeouts up to 1 ms
     * early, outside cos too); ended within 3 s of its time (a hang is no
     * answer) */
    if (took < (int64_t)s->min_ms * MS - (s->lib == L_CURL ? 2 * MS : 0))
        TEST_FAIL_AT(__FILE__, __LINE__, "%s #%d: took %.1f ms, at least %d wanted", s->name,
                     r->copy, took / 1e6, s->min_ms);
    if (s->opt != O_CANCEL && took > (int64_t)(s->min_ms + 3000) * MS)
        TEST_FAIL_AT(__FILE__, __LINE__, "%s #%d: took %.1f ms", s->name, r->copy, took / 1e6);
    /* it parked: the ticker co ran while this co was inside the call, so
     * the call did not hold the thread for its whole wait (held, the
     * ticker could not have run: 0) */
    if (r->copy != REF && s->waits && ticks < 1)
        TEST_FAIL_AT(__FILE__, __LINE__, "%s #%d: the ticker ticked %" PRId64 " times in its %.1f ms "
                     "call: the call blocked the thread", s->name, r->copy, ticks, took / 1e6);
}

static int run_backend(int b) {
    memset(&ticker, 0, sizeof(ticker));
    memset(res, 0, sizeof(res));
    memset(good_meanwhile, 0, sizeof(good_meanwhile));
    memset(good_total, 0, sizeof(good_total));
    int fds0 = test_open_fds();
    server_start();
    aco_rt_sched_t* s = test_sched_on(b, NULL);
    spawn_detached(s, ticker_co, NULL);
    bad_left = NSC * COPIES;
    for (int i = 0; i < NSC; i++)
        for (int k = 0; k < COPIES; k++) {
            res[i][k] = (cres_t){.sc = i, .copy = k};
            aco_rt_co_t* co = aco_rt_spawn(s, bad_co, &res[i][k]);
            CHECK(co != NULL);
            if (scens[i].opt == O_CANCEL) victims[i][k] = co;
            else CHECK_EQ(aco_rt_detach(co), 0);
        }
    for (int g = 0; g < GOOD_COS; g++) {
        spawn_detached(s, good_redis_co, (void*)(intptr_t)g);
        spawn_detached(s, good_curl_co, (void*)(intptr_t)g);
    }
    spawn_detached(s, canceller_co, NULL);
    int64_t t0 = aco_rt_now();
    test_run(s);
    int64_t t_cos = aco_rt_now() - t0;
    aco_rt_sched_free(s);
    server_stop();

    /* what each scenario gave (outside cos, and its first co) before the
     * checks, so that a failure shows them */
    for (int i = 0; i < NSC; i++) {
        const cres_t* r = &res[i][0];
        printf("[%s] %-40s %-4s %3d  %-40.40s %7.1f ms, %4" PRId64 " ticks in it; outside cos "
               "%d, %.1f ms\n", test_backend_label, scens[i].name, r->ok ? "ok" : "err", r->err,
               r->errstr, (r->t1 - r->t0) / 1e6, r->ticks1 - r->ticks0,
               scens[i].opt == O_CANCEL ? -1 : ref[i].err,
               scens[i].opt == O_CANCEL ? 0.0 : (ref[i].t1 - ref[i].t0) / 1e6);
    }
    printf("[%s] references outside cos %.0f ms; cos %.0f ms, %" PRId64 " ticks, the latest %.1f ms "
           "late (due %.1f ms into the run; %.1f ms of the thread's CPU in it); good requests: hiredis %d (%d while bad ones waited), "
           "curl %d (%d)\n", test_backend_label, t_refs / 1e6, t_cos / 1e6, ticker.ticks,
           ticker.max_late / 1e6, (ticker.max_late_at - t0) / 1e6, ticker.max_late_cpu / 1e6,
           good_total[L_REDIS], good_meanwhile[L_REDIS], good_total[L_CURL], good_meanwhile[L_CURL]);
    for (int i = 0; i < NSC; i++)
        if (scens[i].opt != O_CANCEL) check_result(&ref[i], NULL);
    for (int i = 0; i < NSC; i++)
        for (int k = 0; k < COPIES; k++) {
            const cres_t* r = &res[i][k];
            check_result(r, scens[i].opt == O_CANCEL ? NULL : &ref[i]);
            if (scens[i].opt == O_CANCEL && r->t1 - t_cancel > 1000 * MS)
                TEST_FAIL_AT(__FILE__, __LINE__, "%s #%d: returned %.1f ms after the cancel",
                             scens[i].name, k, (r->t1 - t_cancel) / 1e6);
        }
    for (int l = 0; l < 2; l++) CHECK_GE(good_meanwhile[l], 10);
    /* the thread was never held for long: 1 s of slack (the longest wait
     * held in the thread would be its own 300 ms to 1.3 s, and a stall
     * without a timeout for good), 3 s under a sanitizer or memcheck,
     * whose start of 90 cos takes the CPU a while (and the backends'
     * processes share it) */
    CHECK_LT(ticker.max_late, (SLOW ? 3000 : 1000) * MS);
    CHECK_EQ(test_open_fds(), fds0);
    return 0;
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (!aco_rt_hooks_active()) {
        fprintf(stderr, "FAIL: the syscall hooks are not live (aco_rt_hooks_active)\n");
        return 1;
    }
    CHECK_EQ(curl_global_init(CURL_GLOBAL_ALL), CURLE_OK);
    big = malloc(BIG);
    CHECK(big != NULL);
    memset(big, 'x', BIG);
    test_watchdog();
    /* what the clients say without the hooks, once, before the backends'
     * processes (no thread is left running: each makes its own server) */
    references();
    test_backends_apart(run_backend);
    free(big);
    curl_global_cleanup();
    printf("test_hook_bb_clients: every check held\n");
    return 0;
}

#else

int main(void) {
    fprintf(stderr, "FAIL: test_hook_bb_clients needs hiredis and libcurl (pkg-config hiredis libcurl): "
            "install libhiredis-dev and libcurl4-openssl-dev, then build again\n");
    return 1;
}

#endif
