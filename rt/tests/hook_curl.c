/* hook_curl.c - libcurl's blocking API, unchanged, in cos of one thread
 * through the syscall hooks, against an HTTP server of its own (a plain
 * thread, no co: its calls are libc's) that answers "GET /<ms>/<id>" <ms>
 * ms after it came, on kept-alive connections.  In order:
 *   - outside cos, before any scheduler, curl is as without the hooks;
 *   - overlap: --cos cos each in a curl_easy_perform of 100 ms take about
 *     one request's time, not --cos times it (fails without the hooks);
 *   - per request: 100 sequential 2 ms requests in a co cost at most 10%
 *     more than the same 100 outside cos (median, interleaved rounds);
 *   - curl multi driven by curl_multi_fdset + select in several cos at
 *     once: all their transfers overlap;
 *   - a cancel ends a curl_easy_perform that waits for an answer that never
 *     comes, at once and cheaply (hk_cancel_check);
 *   - a server process killed mid-transfer ends every co's transfer with
 *     curl's error.
 * Every body is checked.
 *
 *   hook_curl --hooks|--no-hooks [--cos N]
 *
 * --hooks: the hooks must be live and everything above hold.  --no-hooks
 * (run without them): they must not be, and the overlap check then fails,
 * which proves it can.  Exit status 0 only if every check held.  Run with
 * LD_PRELOAD="libhook_count.so libaco_hook.so", or linked with
 * libaco_hook and LD_PRELOAD=libhook_count.so.
 */
#include "hook_lib.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/select.h>
#include <sys/wait.h>
#include <unistd.h>

enum {
    SLOW_MS = 100,      /* the overlapping requests */
    FAST_MS = 2,        /* the sequential ones */
    SEQ = 100,          /* requests per sequential batch */
    ROUNDS = 3,         /* batches in a co and outside, interleaved */
    MULTI_COS = 8,      /* cos driving a curl multi handle each */
    MULTI_EACH = 4,     /* transfers per multi handle */
    KILL_COS = 10,      /* cos in a transfer when the server dies */
    MAX_CONNS = 256     /* the server's connections at once */
};

static int port, mute_port, kill_port;
static pid_t kill_pid;

static int64_t since_ms(int64_t t0) { return (aco_rt_now() - t0) / HK_MS; }
static double ms_of(int64_t ns) { return (double)ns / 1e6; }

/* ------------------------------------------------------------------------ */
/* The servers                                                              */
/* ------------------------------------------------------------------------ */

/* A listening socket on 127.0.0.1, an ephemeral port (in *p). */
static int listen_on(int* p) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    HK_CHECK(fd >= 0, "socket: %s", strerror(errno));
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof(a);
    HK_CHECK(bind(fd, (struct sockaddr*)&a, l) == 0 && listen(fd, 512) == 0 &&
             getsockname(fd, (struct sockaddr*)&a, &l) == 0, "listen: %s", strerror(errno));
    *p = ntohs(a.sin_port);
    return fd;
}

/* The body the server sends for a request, and the one a client expects. */
static int body_of(char* b, size_t n, int ms, int id) {
    return snprintf(b, n, "request %d, answered after %d ms\n", id, ms);
}

typedef struct {
    int fd;
    size_t len;
    int64_t due;        /* when to answer the request in `in`; 0: none yet */
    int ms, id;
    char in[1024];
} sconn_t;

static struct {
    int lfd, stop[2];
    pthread_t th;
    sconn_t conns[MAX_CONNS];
    int n;
} srv;

static void sconn_drop(int i) {
    close(srv.conns[i].fd);
    srv.conns[i] = srv.conns[--srv.n];
}

/* A whole request in c->in: its answer's time set.  -1: not HTTP we know. */
static int sconn_parse(sconn_t* c) {
    c->in[c->len] = 0;
    if (strstr(c->in, "\r\n\r\n") == NULL) return 0;
    if (sscanf(c->in, "GET /%d/%d ", &c->ms, &c->id) != 2) return -1;
    c->due = aco_rt_now() + c->ms * HK_MS;
    return 0;
}

/* Answer c's request and drop it from c->in (curl sends one at a time). */
static int sconn_answer(sconn_t* c) {
    char body[128], out[256];
    int bl = body_of(body, sizeof(body), c->ms, c->id);
    int n = snprintf(out, sizeof(out), "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                     "Content-Length: %d\r\n\r\n%s", bl, body);
    if (send(c->fd, out, (size_t)n, MSG_NOSIGNAL) != n) return -1;
    char* end = strstr(c->in, "\r\n\r\n") + 4;
    c->len -= (size_t)(end - c->in);
    memmove(c->in, end, c->len);
    c->due = 0;
    return sconn_parse(c);
}

static void* server_main(void* arg) {
    (void)arg;
    static struct pollfd p[MAX_CONNS + 2];
    for (;;) {
        int64_t now = aco_rt_now(), next = -1;
        for (int i = 0; i < srv.n; i++) {
            sconn_t* c = &srv.conns[i];
            if (c->due && c->due <= now && sconn_answer(c) < 0) { sconn_drop(i--); continue; }
            if (c->due && (next < 0 || c->due < next)) next = c->due;
        }
        p[0] = (struct pollfd){srv.lfd, POLLIN, 0};
        p[1] = (struct pollfd){srv.stop[0], POLLIN, 0};
        for (int i = 0; i < srv.n; i++) p[2 + i] = (struct pollfd){srv.conns[i].fd, POLLIN, 0};
        struct timespec t, *tp = NULL;
        if (next >= 0) {
            int64_t left = next > now ? next - now : 0;
            t = (struct timespec){left / 1000000000, left % 1000000000};
            tp = &t;
        }
        int n = srv.n;
        if (ppoll(p, (nfds_t)n + 2, tp, NULL) < 0) continue;
        if (p[1].revents) break;
        for (int i = n - 1; i >= 0; i--) {
            if (!p[2 + i].revents) continue;
            sconn_t* c = &srv.conns[i];
            ssize_t r = recv(c->fd, c->in + c->len, sizeof(c->in) - 1 - c->len, 0);
            if (r <= 0) { sconn_drop(i); continue; }
            c->len += (size_t)r;
            if ((c->due == 0 && sconn_parse(c) < 0) || c->len == sizeof(c->in) - 1) sconn_drop(i);
        }
        if (p[0].revents) {
            int fd = accept4(srv.lfd, NULL, NULL, SOCK_CLOEXEC), one = 1;
            if (fd < 0) continue;
            if (srv.n == MAX_CONNS) { close(fd); continue; }
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
            srv.conns[srv.n++] = (sconn_t){.fd = fd};
        }
    }
    while (srv.n) sconn_drop(0);
    return NULL;
}

/* The server that is killed: a process of its own (so that its death is
 * the kernel closing its sockets), forked before any thread.  It sends
 * each request the head of a 1 MB answer and 4 KiB of it, then nothing. */
static void kill_server(int lfd) {
    static char part[4096];
    memset(part, 'x', sizeof(part));
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    for (;;) {
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0) continue;
        char in[1024];
        size_t len = 0;
        ssize_t r;
        while (len < sizeof(in) - 1 && (r = recv(fd, in + len, sizeof(in) - 1 - len, 0)) > 0) {
            len += (size_t)r;
            in[len] = 0;
            if (strstr(in, "\r\n\r\n")) break;
        }
        const char* head = "HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n";
        send(fd, head, strlen(head), MSG_NOSIGNAL);
        send(fd, part, sizeof(part), MSG_NOSIGNAL);
    }
}

/* ------------------------------------------------------------------------ */
/* The client side                                                          */
/* ------------------------------------------------------------------------ */

typedef struct {
    char b[256];
    size_t len;
} body_t;

static size_t on_body(char* p, size_t sz, size_t n, void* arg) {
    body_t* b = arg;
    size_t k = sz * n;
    if (b->len + k >= sizeof(b->b)) return 0;   /* too much: curl's write error */
    memcpy(b->b + b->len, p, k);
    b->len += k;
    b->b[b->len] = 0;
    return k;
}

/* An easy handle with the body into *b.  No signals: curl's threads and
 * alarms are no business of cos. */
static CURL* easy(body_t* b) {
    CURL* h = curl_easy_init();
    HK_CHECK(h != NULL, "curl_easy_init failed");
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, b);
    return h;
}

static void set_url(CURL* h, body_t* b, int p, int ms, int id) {
    char url[96];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/%d/%d", p, ms, id);
    curl_easy_setopt(h, CURLOPT_URL, url);
    b->len = 0;
}

/* The body of a finished transfer is the one asked for. */
static void check_body(CURL* h, const body_t* b, int ms, int id) {
    char want[128];
    long code = 0;
    body_of(want, sizeof(want), ms, id);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    HK_CHECK(code == 200 && strcmp(b->b, want) == 0, "GET /%d/%d: status %ld, body \"%s\"",
             ms, id, code, b->b);
}

/* GET /ms/id on h, checked: how long it took. */
static int64_t get(CURL* h, int ms, int id) {
    body_t* b;
    curl_easy_getinfo(h, CURLINFO_PRIVATE, (char**)&b);
    set_url(h, b, port, ms, id);
    int64_t t0 = aco_rt_now();
    CURLcode rc = curl_easy_perform(h);
    int64_t took = aco_rt_now() - t0;
    HK_CHECK(rc == CURLE_OK, "GET /%d/%d: %s", ms, id, curl_easy_strerror(rc));
    check_body(h, b, ms, id);
    return took;
}

static CURL* easy_get(body_t* b) {
    CURL* h = easy(b);
    curl_easy_setopt(h, CURLOPT_PRIVATE, b);
    return h;
}

static int cmp64(const void* a, const void* b) {
    int64_t x = *(const int64_t*)a, y = *(const int64_t*)b;
    return (x > y) - (x < y);
}

static int64_t median(int64_t* t, int n) {
    qsort(t, (size_t)n, sizeof(*t), cmp64);
    return t[n / 2];
}

/* Run fn(arg) in a co of s, alone, to its end. */
static void run_one(aco_rt_sched_t* s, aco_rt_fn_t fn, void* arg) {
    aco_rt_co_t* co = aco_rt_spawn(s, fn, arg);
    HK_CHECK(co != NULL && aco_rt_detach(co) == 0, "spawn: %s", strerror(errno));
    HK_CHECK(aco_rt_sched_run(s) == 0, "aco_rt_sched_run failed");
}

/* ------------------------------------------------------------------------ */
/* Outside cos                                                              */
/* ------------------------------------------------------------------------ */

/* No scheduler yet: the hooks (if loaded) pass every call to libc, and
 * curl must wait as it always does: no answer sooner than the server gives
 * it, nor much later (the median, and the better of two slow ones: a busy
 * machine may delay any one), a timeout at its time. */
static void test_outside(void) {
    HK_CHECK(aco_rt_sched_current() == NULL, "a scheduler already");
    body_t b;
    CURL* h = easy_get(&b);
    int64_t fast[9], slow = INT64_MAX;
    for (int i = 0; i < 9; i++) {
        fast[i] = get(h, FAST_MS, i);
        HK_CHECK(fast[i] >= FAST_MS * HK_MS, "a %d ms answer came after %.2f ms", FAST_MS,
                 ms_of(fast[i]));
    }
    for (int i = 0; i < 2; i++) {
        int64_t t = get(h, SLOW_MS, 10 + i);
        HK_CHECK(t >= SLOW_MS * HK_MS, "a %d ms answer came after %.2f ms", SLOW_MS, ms_of(t));
        if (t < slow) slow = t;
    }
    curl_easy_cleanup(h);
    int64_t med = median(fast, 9);
    HK_CHECK(med < (FAST_MS + 5) * HK_MS, "%d ms requests took %.2f ms (median)", FAST_MS, ms_of(med));
    HK_CHECK(slow < (SLOW_MS + 50) * HK_MS, "a %d ms request took %.2f ms", SLOW_MS, ms_of(slow));
    /* the server that never answers, with curl's own timeout */
    h = easy(&b);
    set_url(h, &b, mute_port, 0, 0);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 50L);
    int64_t t0 = aco_rt_now();
    CURLcode rc = curl_easy_perform(h);
    int64_t tmo = aco_rt_now() - t0;
    curl_easy_cleanup(h);
    HK_CHECK(rc == CURLE_OPERATION_TIMEDOUT, "a 50 ms timeout said %s", curl_easy_strerror(rc));
    HK_CHECK(tmo >= 50 * HK_MS && tmo < 200 * HK_MS, "a 50 ms timeout came after %.2f ms", ms_of(tmo));
    printf("outside cos: %d ms requests %.2f ms (median of 9), %d ms ones %.2f ms, "
           "a 50 ms timeout after %.2f ms\n", FAST_MS, ms_of(med), SLOW_MS, ms_of(slow), ms_of(tmo));
}

/* ------------------------------------------------------------------------ */
/* Overlap                                                                  */
/* ------------------------------------------------------------------------ */

static int in_flight, most_in_flight;
static int64_t one_ns;

static void one_co(void* arg) {
    (void)arg;
    body_t b;
    CURL* h = easy_get(&b);
    one_ns = get(h, SLOW_MS, 0);
    curl_easy_cleanup(h);
}

static void overlap_co(void* arg) {
    body_t b;
    CURL* h = easy_get(&b);
    if (++in_flight > most_in_flight) most_in_flight = in_flight;
    get(h, SLOW_MS, (int)(intptr_t)arg);
    in_flight--;
    curl_easy_cleanup(h);
}

static void test_overlap(aco_rt_sched_t* s, int cos) {
    run_one(s, one_co, NULL);
    int64_t t0 = aco_rt_now();
    for (int i = 0; i < cos; i++) {
        aco_rt_co_t* co = aco_rt_spawn(s, overlap_co, (void*)(intptr_t)(i + 1));
        HK_CHECK(co != NULL && aco_rt_detach(co) == 0, "spawn: %s", strerror(errno));
    }
    HK_CHECK(aco_rt_sched_run(s) == 0, "aco_rt_sched_run failed");
    int64_t all = aco_rt_now() - t0;
    printf("overlap: one %d ms request %.1f ms, %d cos at once %.1f ms (%.2fx), "
           "most in curl_easy_perform at once %d\n", SLOW_MS, ms_of(one_ns), cos, ms_of(all),
           (double)all / (double)one_ns, most_in_flight);
    HK_CHECK(all < 3 * one_ns, "%d cos took %.1f ms, one request %.1f ms: they did not overlap "
             "(curl's waits blocked the thread)", cos, ms_of(all), ms_of(one_ns));
}

/* ------------------------------------------------------------------------ */
/* Per request                                                              */
/* ------------------------------------------------------------------------ */

static int64_t t_co[ROUNDS * SEQ], t_out[ROUNDS * SEQ];

/* SEQ requests on one handle (one kept-alive connection), each's time. */
static void seq_batch(int64_t* t, int first) {
    body_t b;
    CURL* h = easy_get(&b);
    for (int i = 0; i < SEQ; i++) t[i] = get(h, FAST_MS, first + i);
    curl_easy_cleanup(h);
}

static void seq_co(void* arg) { seq_batch((int64_t*)arg, 1000); }

/* Rounds alternate which goes first, so that a drift of the machine's
 * speed falls on both sides. */
static void test_per_request(aco_rt_sched_t* s) {
    for (int r = 0; r < ROUNDS; r++) {
        if (r % 2 == 0) run_one(s, seq_co, t_co + r * SEQ);
        seq_batch(t_out + r * SEQ, 2000);
        if (r % 2 == 1) run_one(s, seq_co, t_co + r * SEQ);
    }
    int64_t in = median(t_co, ROUNDS * SEQ), out = median(t_out, ROUNDS * SEQ);
    double ratio = (double)in / (double)out;
    printf("per request: %d x %d sequential %d ms requests, median in a co %.3f ms, "
           "outside cos %.3f ms, ratio %.3f\n", ROUNDS, SEQ, FAST_MS, ms_of(in), ms_of(out), ratio);
    HK_CHECK(ratio <= 1.10, "a request in a co took %.3f ms, outside %.3f ms: %.1f%% more",
             ms_of(in), ms_of(out), (ratio - 1) * 100);
}

/* ------------------------------------------------------------------------ */
/* curl multi, select-driven                                                */
/* ------------------------------------------------------------------------ */

static int most_selects;

/* MULTI_EACH transfers on a multi handle, driven as curl's docs show:
 * curl_multi_fdset, select until curl_multi_timeout, curl_multi_perform. */
static void multi_co(void* arg) {
    int first = (int)(intptr_t)arg, running = 0, selects = 0;
    CURLM* m = curl_multi_init();
    HK_CHECK(m != NULL, "curl_multi_init failed");
    CURL* h[MULTI_EACH];
    body_t b[MULTI_EACH];
    for (int i = 0; i < MULTI_EACH; i++) {
        h[i] = easy_get(&b[i]);
        set_url(h[i], &b[i], port, SLOW_MS, first + i);
        curl_multi_add_handle(m, h[i]);
    }
    HK_CHECK(curl_multi_perform(m, &running) == CURLM_OK, "curl_multi_perform failed");
    while (running) {
        long tmo = -1;
        curl_multi_timeout(m, &tmo);
        if (tmo < 0 || tmo > 100) tmo = 100;        /* the docs' "a while" */
        fd_set rd, wr, ex;
        FD_ZERO(&rd);
        FD_ZERO(&wr);
        FD_ZERO(&ex);
        int maxfd = -1;
        HK_CHECK(curl_multi_fdset(m, &rd, &wr, &ex, &maxfd) == CURLM_OK, "curl_multi_fdset failed");
        struct timeval tv = {tmo / 1000, (tmo % 1000) * 1000};
        HK_CHECK(select(maxfd + 1, &rd, &wr, &ex, &tv) >= 0, "select: %s", strerror(errno));
        selects++;
        HK_CHECK(curl_multi_perform(m, &running) == CURLM_OK, "curl_multi_perform failed");
    }
    int left, done = 0;
    CURLMsg* msg;
    while ((msg = curl_multi_info_read(m, &left)) != NULL) {
        if (msg->msg != CURLMSG_DONE) continue;
        int i = 0;
        while (i < MULTI_EACH && h[i] != msg->easy_handle) i++;
        HK_CHECK(i < MULTI_EACH && msg->data.result == CURLE_OK, "a multi transfer: %s",
                 curl_easy_strerror(msg->data.result));
        check_body(h[i], &b[i], SLOW_MS, first + i);
        done++;
    }
    HK_CHECK(done == MULTI_EACH, "%d of %d multi transfers finished", done, MULTI_EACH);
    for (int i = 0; i < MULTI_EACH; i++) {
        curl_multi_remove_handle(m, h[i]);
        curl_easy_cleanup(h[i]);
    }
    curl_multi_cleanup(m);
    if (selects > most_selects) most_selects = selects;
}

static void test_multi(aco_rt_sched_t* s) {
    int64_t t0 = aco_rt_now();
    for (int i = 0; i < MULTI_COS; i++) {
        aco_rt_co_t* co = aco_rt_spawn(s, multi_co, (void*)(intptr_t)(3000 + i * MULTI_EACH));
        HK_CHECK(co != NULL && aco_rt_detach(co) == 0, "spawn: %s", strerror(errno));
    }
    HK_CHECK(aco_rt_sched_run(s) == 0, "aco_rt_sched_run failed");
    int64_t all = aco_rt_now() - t0;
    printf("select multi: %d cos x %d transfers of %d ms in %.1f ms (%.2fx one request), "
           "at most %d selects in a co\n", MULTI_COS, MULTI_EACH, SLOW_MS, ms_of(all),
           (double)all / (double)one_ns, most_selects);
    /* one co after another would take MULTI_COS times one request */
    HK_CHECK(all < 2 * one_ns, "%d select-driven multi cos took %.1f ms, one request %.1f ms: "
             "they did not overlap", MULTI_COS, ms_of(all), ms_of(one_ns));
    /* a select that came back with nothing ready would spin the loop */
    HK_CHECK(most_selects <= 50, "a co made %d selects for %d transfers", most_selects, MULTI_EACH);
}

/* ------------------------------------------------------------------------ */
/* Cancel                                                                   */
/* ------------------------------------------------------------------------ */

static hk_ticker_t ticker;
static hk_cancel_t cancel;
static aco_rt_co_t* victim;
static CURLcode victim_rc;
static int64_t victim_calls0;

/* In curl_easy_perform against a server that takes the request and never
 * answers: only the cancel can end it (no curl timeout). */
static void victim_co(void* arg) {
    (void)arg;
    body_t b;
    CURL* h = easy(&b);
    set_url(h, &b, mute_port, 0, 0);
    victim_calls0 = hk_calls();
    victim_rc = curl_easy_perform(h);
    hk_return_mark(&cancel);
    ticker.stop = 1;
    curl_easy_cleanup(h);
}

static void canceller_co(void* arg) {
    (void)arg;
    aco_rt_sleep(30 * HK_MS);
    hk_cancel_mark(&cancel);
    aco_rt_cancel(victim);
}

static void test_cancel(aco_rt_sched_t* s) {
    aco_rt_co_t* t = aco_rt_spawn(s, hk_ticker_co, &ticker);
    victim = aco_rt_spawn(s, victim_co, NULL);
    aco_rt_co_t* c = aco_rt_spawn(s, canceller_co, NULL);
    HK_CHECK(t && victim && c && aco_rt_detach(t) == 0 && aco_rt_detach(victim) == 0 &&
             aco_rt_detach(c) == 0, "spawn: %s", strerror(errno));
    HK_CHECK(aco_rt_sched_run(s) == 0, "aco_rt_sched_run failed");
    printf("cancel: curl_easy_perform returned %d (%s)\n", (int)victim_rc,
           curl_easy_strerror(victim_rc));
    HK_CHECK(cancel.t_cancel > 0 && cancel.t_return >= cancel.t_cancel,
             "curl_easy_perform returned before the cancel: %s", curl_easy_strerror(victim_rc));
    HK_CHECK(victim_rc != CURLE_OK, "a cancelled curl_easy_perform succeeded");
    /* the count sees curl's calls at all (else its bound below says nothing) */
    if (victim_calls0 >= 0) {
        int64_t before = cancel.calls_cancel - victim_calls0;
        printf("cancel: %" PRId64 " hooked calls in curl_easy_perform before the cancel\n", before);
        HK_CHECK(before > 0, "no hooked calls counted in curl_easy_perform");
    }
    hk_cancel_check("cancel: curl_easy_perform", &cancel, &ticker);
}

/* ------------------------------------------------------------------------ */
/* The server killed mid-transfer                                           */
/* ------------------------------------------------------------------------ */

static struct {
    size_t got;
    CURLcode rc;
    int64_t t_end;
} kills[KILL_COS];
static int64_t t_kill;

static size_t on_part(char* p, size_t sz, size_t n, void* arg) {
    (void)p;
    kills[(intptr_t)arg].got += sz * n;
    return sz * n;
}

static void part_co(void* arg) {
    CURL* h = curl_easy_init();
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/big", kill_port);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_part);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, arg);
    kills[(intptr_t)arg].rc = curl_easy_perform(h);
    kills[(intptr_t)arg].t_end = aco_rt_now();
    curl_easy_cleanup(h);
}

/* Once every co has part of its answer, the server dies. */
static void killer_co(void* arg) {
    (void)arg;
    int64_t t0 = aco_rt_now();
    for (;;) {
        int all = 1;
        for (int i = 0; i < KILL_COS; i++) all &= kills[i].got > 0;
        if (all) break;
        HK_CHECK(since_ms(t0) < 5000, "the cos got no part of their answers in 5 s");
        aco_rt_sleep(HK_MS);
    }
    t_kill = aco_rt_now();
    kill(kill_pid, SIGKILL);
}

static void test_kill(aco_rt_sched_t* s) {
    for (int i = 0; i < KILL_COS; i++) {
        aco_rt_co_t* co = aco_rt_spawn(s, part_co, (void*)(intptr_t)i);
        HK_CHECK(co != NULL && aco_rt_detach(co) == 0, "spawn: %s", strerror(errno));
    }
    aco_rt_co_t* k = aco_rt_spawn(s, killer_co, NULL);
    HK_CHECK(k != NULL && aco_rt_detach(k) == 0, "spawn: %s", strerror(errno));
    HK_CHECK(aco_rt_sched_run(s) == 0, "aco_rt_sched_run failed");
    waitpid(kill_pid, NULL, 0);
    int64_t last = 0;
    int same = 0;
    for (int i = 0; i < KILL_COS; i++) {
        HK_CHECK(kills[i].rc != CURLE_OK, "co %d: its transfer succeeded without a server", i);
        if (kills[i].t_end - t_kill > last) last = kills[i].t_end - t_kill;
        same += kills[i].rc == kills[0].rc;
    }
    printf("server killed: %d cos in a transfer, each got an error, %d of them %d (%s), the "
           "last %.2f ms after the kill\n", KILL_COS, same, (int)kills[0].rc,
           curl_easy_strerror(kills[0].rc), ms_of(last));
    HK_CHECK(last < 1000 * HK_MS, "the last transfer ended %.1f ms after the kill", ms_of(last));
}

int main(int argc, char** argv) {
    int hooks = -1, cos = 50;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--hooks") == 0) hooks = 1;
        else if (strcmp(argv[i], "--no-hooks") == 0) hooks = 0;
        else if (strcmp(argv[i], "--cos") == 0 && i + 1 < argc) cos = atoi(argv[++i]);
        else hooks = -1, i = argc;
    }
    if (hooks < 0 || cos < 2) {
        fprintf(stderr, "usage: hook_curl --hooks|--no-hooks [--cos N]\n");
        return 2;
    }
    hk_mode_check(hooks);
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* The killed server first: fork before any thread exists. */
    int klfd = listen_on(&kill_port);
    kill_pid = fork();
    HK_CHECK(kill_pid >= 0, "fork: %s", strerror(errno));
    if (kill_pid == 0) kill_server(klfd);
    close(klfd);
    int mute = listen_on(&mute_port);       /* takes connections, never reads */
    srv.lfd = listen_on(&port);
    HK_CHECK(pipe2(srv.stop, O_CLOEXEC) == 0 && pthread_create(&srv.th, NULL, server_main, NULL) == 0,
             "the server thread: %s", strerror(errno));
    /* Before any co: curl_easy_init would otherwise run it lazily in
     * whichever co comes first, and it is process-wide set-up (OpenSSL's
     * too) under curl's spin lock: a co parked in it would leave the next
     * co spinning on that lock on the thread the first needs to go on. */
    HK_CHECK(curl_global_init(CURL_GLOBAL_ALL) == CURLE_OK, "curl_global_init failed");

    test_outside();
    aco_rt_sched_t* s = aco_rt_sched_new(NULL);
    HK_CHECK(s != NULL, "aco_rt_sched_new: %s", strerror(errno));
    printf("hook_curl: %s, backend %s, hooked calls %s\n", hooks ? "hooks" : "no hooks",
           aco_rt_backend_name(s), hk_calls() < 0 ? "not counted" : "counted");
    test_overlap(s, cos);
    test_per_request(s);
    test_multi(s);
    test_cancel(s);
    test_kill(s);

    aco_rt_sched_free(s);
    HK_CHECK(write(srv.stop[1], "", 1) == 1 && pthread_join(srv.th, NULL) == 0, "server stop");
    close(mute);
    curl_global_cleanup();
    printf("hook_curl: every check held\n");
    return 0;
}
