/* test_many_conns: 10000 concurrent TCP connections over loopback in one
 * scheduler (server cos and client cos), on each backend.
 *
 * Every client connects (at most 1000 connects in flight, so the accept
 * queue never overflows and no SYN waits for its 1 s retransmission), then
 * waits until all 10000 are connected (all open at once), sends a message
 * of its own (heap and stack buffers), reads the echo and checks every byte.
 * The server accepts all of them, each served by a co of its own that
 * echoes until EOF.
 *
 * Descriptors: 2 per connection, so RLIMIT_NOFILE is raised to 20100+
 * (root may raise the hard limit).  If the hard limit is lower and cannot
 * be raised, the test runs with as many connections as fit and says so on
 * stderr.
 */
#include "rt_test.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <sys/socket.h>

#define WANT_CONNS 10000

/* ThreadSanitizer counts each started, unfinished co as a thread (libaco
 * gives it a TSan fiber): it dies beyond 8128 and slows down more than
 * linearly well before (3900 connections: 35 s).  There, 2000 connections
 * (4000 cos; test_io has 1000 too). */
#define TSAN_MAX_CONNS 2000

static int nconns;
static int listener;
static uint16_t port;
static aco_rt_sem_t connecting;         /* connects in flight */
static aco_rt_wg_t all_connected, all_done;
static int accepted, echoed, ok;
static int max_open;

static inline uint8_t pat(uint32_t k, uint64_t i) { return (uint8_t)(i * 13u + k * 101u + (k >> 8)); }

static void handler(void* arg) {
    int fd = (int)(intptr_t)arg;
    char buf[1024];
    for (;;) {
        ssize_t r = aco_rt_read(fd, buf, sizeof(buf), -1);
        CHECK_GE(r, 0);
        if (r == 0) break;
        CHECK_EQ(aco_rt_write(fd, buf, (size_t)r, -1), r);
        echoed++;
    }
    CHECK_EQ(aco_rt_close(fd), 0);
}

static void server(void* arg) {
    (void)arg;
    for (int i = 0; i < nconns; i++) {
        int s = aco_rt_accept(listener, NULL, NULL, SOCK_CLOEXEC, -1);
        if (s < 0) TEST_FAIL_AT(__FILE__, __LINE__, "accept #%d: %s", i, strerror(-s));
        accepted++;
        aco_rt_co_t* c = aco_rt_spawn(NULL, handler, (void*)(intptr_t)s);
        CHECK(c != NULL);
        CHECK_EQ(aco_rt_detach(c), 0);
    }
}

static int open_now;

static void client(void* arg) {
    uint32_t id = (uint32_t)(uintptr_t)arg;
    CHECK_EQ(aco_rt_sem_wait(&connecting, -1), 0);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) TEST_FAIL_AT(__FILE__, __LINE__, "socket #%u: %s", id, strerror(errno));
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    int r = aco_rt_connect(fd, (struct sockaddr*)&a, sizeof(a), aco_rt_now() + 30000 * MS);
    if (r != 0) TEST_FAIL_AT(__FILE__, __LINE__, "connect #%u: %s", id, strerror(-r));
    aco_rt_sem_post(&connecting);
    if (++open_now > max_open) max_open = open_now;
    /* everybody connected before anybody talks */
    CHECK_EQ(aco_rt_wg_done(&all_connected), 0);
    CHECK_EQ(aco_rt_wg_wait(&all_connected, -1), 0);
    size_t n = 16 + (id * 2654435761u) % 1500;
    uint8_t sbuf[800];
    uint8_t* hb = malloc(n);
    CHECK(hb != NULL);
    for (size_t i = 0; i < n; i++) hb[i] = pat(id, i);
    if (id & 1) {
        CHECK_EQ(aco_rt_write(fd, hb, n, -1), (ssize_t)n);
    } else {
        for (size_t off = 0; off < n;) {
            size_t m = n - off < sizeof(sbuf) ? n - off : sizeof(sbuf);
            memcpy(sbuf, hb + off, m);
            CHECK_EQ(aco_rt_send(fd, sbuf, m, 0, -1), (ssize_t)m);
            off += m;
        }
    }
    size_t got = 0;
    while (got < n) {
        uint8_t* b = (id & 2) ? sbuf : hb;
        size_t cap = (id & 2) ? sizeof(sbuf) : n;
        ssize_t k = aco_rt_read(fd, b, cap, aco_rt_now() + 30000 * MS);
        if (k <= 0) TEST_FAIL_AT(__FILE__, __LINE__, "client %u: read %zd after %zu of %zu", id, k, got, n);
        for (ssize_t i = 0; i < k; i++)
            if (b[i] != pat(id, got + (size_t)i))
                TEST_FAIL_AT(__FILE__, __LINE__, "client %u: byte %zu wrong", id, got + (size_t)i);
        got += (size_t)k;
    }
    free(hb);
    CHECK_EQ(aco_rt_close(fd), 0);
    open_now--;
    ok++;
    CHECK_EQ(aco_rt_wg_done(&all_done), 0);
}

static void conns_main(void* arg) {
    (void)arg;
    accepted = echoed = ok = 0;
    open_now = max_open = 0;
    aco_rt_sem_init(&connecting, 1000);
    aco_rt_wg_init(&all_connected);
    aco_rt_wg_init(&all_done);
    CHECK_EQ(aco_rt_wg_add(&all_connected, nconns), 0);
    CHECK_EQ(aco_rt_wg_add(&all_done, nconns), 0);
    listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK_GE(listener, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK_EQ(bind(listener, (struct sockaddr*)&a, sizeof(a)), 0);
    CHECK_EQ(listen(listener, 4096), 0);
    socklen_t len = sizeof(a);
    CHECK_EQ(getsockname(listener, (struct sockaddr*)&a, &len), 0);
    port = ntohs(a.sin_port);
    aco_rt_co_t* srv = aco_rt_spawn(NULL, server, NULL);
    CHECK(srv != NULL);
    for (int i = 0; i < nconns; i++) {
        aco_rt_co_t* c = aco_rt_spawn(NULL, client, (void*)(uintptr_t)i);
        CHECK(c != NULL);
        CHECK_EQ(aco_rt_detach(c), 0);
    }
    CHECK_EQ(aco_rt_join(srv, -1), 0);
    CHECK_EQ(aco_rt_wg_wait(&all_done, -1), 0);
    CHECK_EQ(accepted, nconns);
    CHECK_EQ(ok, nconns);
    CHECK_EQ(max_open, nconns);     /* all open at once */
    CHECK_GE(echoed, nconns);
    CHECK_EQ(aco_rt_close(listener), 0);
}

static void body(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    int64_t t0 = aco_rt_now();
    test_go(s, conns_main, NULL);
    aco_rt_stats_t st;
    aco_rt_stats(s, &st);
    CHECK_EQ(st.cos_alive, 0);
    CHECK_EQ(st.io_inflight, 0);
    if (getenv("ACO_RT_TEST_VERBOSE"))
        fprintf(stderr, "test_many_conns: %s: %d connections in %.0f ms\n", test_backend_label,
                nconns, (double)(aco_rt_now() - t0) / 1e6);
}

int main(void) {
    long need = 2L * WANT_CONNS + 100;
    long have = test_raise_nofile(need);
    nconns = WANT_CONNS;
    if (have < need) {
        struct rlimit rl;
        CHECK_EQ(getrlimit(RLIMIT_NOFILE, &rl), 0);
        /* only allowed when even the hard limit is lower */
        CHECK_LT((long)rl.rlim_max, need);
        nconns = (int)((have - 100) / 2);
        CHECK_GT(nconns, 0);
        fprintf(stderr, "test_many_conns: RLIMIT_NOFILE hard limit %ld < %ld: testing %d "
                "connections instead of %d\n", (long)rl.rlim_max, need, nconns, WANT_CONNS);
    }
    if (TEST_TSAN && nconns > TSAN_MAX_CONNS) {
        fprintf(stderr, "test_many_conns: ThreadSanitizer (a fiber per live co, 8128 at "
                "most): testing %d connections instead of %d\n", TSAN_MAX_CONNS, nconns);
        nconns = TSAN_MAX_CONNS;
    }
    test_on_backends(NULL, body, NULL);
    return 0;
}
