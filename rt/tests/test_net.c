/* test_net.c - aco_rt_listen and aco_rt_dial on "host:port": IPv4, IPv6,
 * ":port", names (resolved on a helper thread: other cos run meanwhile),
 * a taken port, malformed addresses, unknown names, deadlines in the past,
 * a closed port, the backlog, descriptor exhaustion, cancel and deadline
 * while a name resolves, the options (TCP_NODELAY, close-on-exec,
 * SO_REUSEADDR/SO_REUSEPORT).
 *
 * getaddrinfo is interposed here (the runtime's call reaches this one
 * first): it records the thread it ran on, and a name "slow-<name>" takes
 * 200 ms before <name> is looked up, so that a slow name server is at hand;
 * "held-<name>" waits while gai_hold is set (at most 30 s), so that a test
 * knows the lookup has not ended, however slow the machine.
 */
#define _GNU_SOURCE
#include "rt_test.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <time.h>

static pthread_t main_thread;
static int gai_calls, gai_on_main;      /* atomic */
static int gai_hold, gai_held_in, gai_held_out;    /* atomic: "held-" names */

/* TSan's own getaddrinfo interceptor ignores the memory accesses inside
 * libc's (its malloc/free pairs synchronise in ways TSan cannot see: false
 * races); this interposer reaches libc's past it where the runtime is
 * linked into the program (clang), so it does the same. */
#if TEST_TSAN
void __tsan_ignore_thread_begin(void);
void __tsan_ignore_thread_end(void);
#else
static inline void __tsan_ignore_thread_begin(void) {}
static inline void __tsan_ignore_thread_end(void) {}
#endif

int getaddrinfo(const char* node, const char* service, const struct addrinfo* hints,
                struct addrinfo** res) {
    int (*real)(const char*, const char*, const struct addrinfo*, struct addrinfo**);
    *(void**)&real = dlsym(RTLD_NEXT, "getaddrinfo");
    __atomic_fetch_add(&gai_calls, 1, __ATOMIC_SEQ_CST);
    if (pthread_equal(pthread_self(), main_thread))
        __atomic_fetch_add(&gai_on_main, 1, __ATOMIC_SEQ_CST);
    int held = 0;
    if (node && strncmp(node, "slow-", 5) == 0) {
        struct timespec ts = {0, 200 * 1000000L};
        while (nanosleep(&ts, &ts) != 0) {}
        node += 5;
    } else if (node && strncmp(node, "held-", 5) == 0) {
        held = 1;
        __atomic_fetch_add(&gai_held_in, 1, __ATOMIC_SEQ_CST);
        for (int i = 0; i < 30000 && __atomic_load_n(&gai_hold, __ATOMIC_SEQ_CST); i++) {
            struct timespec ts = {0, 1000000L};
            while (nanosleep(&ts, &ts) != 0) {}
        }
        node += 5;
    }
    __tsan_ignore_thread_begin();
    int rc = real(node, service, hints, res);
    __tsan_ignore_thread_end();
    if (held) __atomic_fetch_add(&gai_held_out, 1, __ATOMIC_SEQ_CST);
    return rc;
}

static int have_v6;

/* One byte each way between a dialled and an accepted socket. */
static void exchange(int lfd, int cfd) {
    int afd = aco_rt_accept(lfd, NULL, NULL, SOCK_CLOEXEC, aco_rt_in_ms(5000));
    CHECK_GE(afd, 0);
    char c = 'x';
    CHECK_EQ(aco_rt_write(cfd, &c, 1, aco_rt_in_ms(5000)), 1);
    CHECK_EQ(aco_rt_read(afd, &c, 1, aco_rt_in_ms(5000)), 1);
    CHECK_EQ(c, 'x');
    c = 'y';
    CHECK_EQ(aco_rt_write(afd, &c, 1, aco_rt_in_ms(5000)), 1);
    CHECK_EQ(aco_rt_read(cfd, &c, 1, aco_rt_in_ms(5000)), 1);
    CHECK_EQ(c, 'y');
    CHECK_EQ(aco_rt_close(afd), 0);
}

static void dial_ok(int lfd, const char* fmt, int port) {
    char a[80];
    snprintf(a, sizeof(a), fmt, port);
    int cfd = aco_rt_dial(a, NULL, aco_rt_in_ms(5000));
    if (cfd < 0) fprintf(stderr, "dial %s: %s\n", a, strerror(-cfd));
    CHECK_GE(cfd, 0);
    exchange(lfd, cfd);
    CHECK_EQ(aco_rt_close(cfd), 0);
}

/* ------------------------------------------------------------------------ */
/* Families and forms                                                       */
/* ------------------------------------------------------------------------ */

/* Bind 127.0.0.1:port without listening (a connect there is refused) and
 * without SO_REUSEADDR, so that no other program (the suite runs this test
 * in several builds at once, and the kernel may give them the same port on
 * another address) can listen there while a dial tries it first: -1 if
 * one already holds it. */
static int hold_v4(int port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK_GE(fd, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(fd, (struct sockaddr*)&a, sizeof(a)) != 0) {
        CHECK_EQ(errno, EADDRINUSE);
        close(fd);
        return -1;
    }
    return fd;
}

static void forms_co(void* arg) {
    (void)arg;
    int lfd = aco_rt_listen("127.0.0.1:0", NULL, -1);
    CHECK_GE(lfd, 0);
    int port = aco_rt_net_port(lfd);
    CHECK_GT(port, 0);
    dial_ok(lfd, "127.0.0.1:%d", port);
    dial_ok(lfd, ":%d", port);          /* this host */
    CHECK_EQ(aco_rt_close(lfd), 0);

    if (have_v6) {
        lfd = aco_rt_listen("[::1]:0", NULL, -1);
        CHECK_GE(lfd, 0);
        port = aco_rt_net_port(lfd);
        dial_ok(lfd, "[::1]:%d", port);
        int held = hold_v4(port);
        if (held >= 0) {
            dial_ok(lfd, ":%d", port);  /* 127.0.0.1 refused, then ::1 */
            close(held);
        }
        CHECK_EQ(aco_rt_close(lfd), 0);
        lfd = aco_rt_listen("[::1%lo]:0", NULL, -1);    /* a scope by name */
        CHECK_GE(lfd, 0);
        CHECK_EQ(aco_rt_close(lfd), 0);
    }

    /* ":port": every address, both families on one socket */
    lfd = aco_rt_listen(":0", NULL, -1);
    CHECK_GE(lfd, 0);
    port = aco_rt_net_port(lfd);
    dial_ok(lfd, "127.0.0.1:%d", port);
    if (have_v6) dial_ok(lfd, "[::1]:%d", port);
    CHECK_EQ(aco_rt_close(lfd), 0);
}

/* A name resolves on a helper thread while the co parks: a co spawned
 * after the listener runs before its listen returns. */
static int marker_ran;
static void marker_co(void* arg) { (void)arg; marker_ran = 1; }

static void name_co(void* arg) {
    (void)arg;
    marker_ran = 0;
    CHECK(aco_rt_spawn(NULL, marker_co, NULL) != NULL);
    int calls = __atomic_load_n(&gai_calls, __ATOMIC_SEQ_CST);
    int lfd = aco_rt_listen("localhost:0", NULL, -1);
    CHECK_GE(lfd, 0);
    CHECK_EQ(marker_ran, 1);
    CHECK_EQ(__atomic_load_n(&gai_calls, __ATOMIC_SEQ_CST), calls + 1);
    CHECK_EQ(__atomic_load_n(&gai_on_main, __ATOMIC_SEQ_CST), 0);
    int port = aco_rt_net_port(lfd);
    dial_ok(lfd, "localhost:%d", port);
    dial_ok(lfd, "slow-localhost:%d", port);
    CHECK_EQ(__atomic_load_n(&gai_on_main, __ATOMIC_SEQ_CST), 0);
    CHECK_EQ(aco_rt_close(lfd), 0);
}

/* A 200 ms lookup: the thread ran another co all along. */
static long ticks;
static int ticking;
static void ticker_co(void* arg) {
    (void)arg;
    while (__atomic_load_n(&ticking, __ATOMIC_SEQ_CST)) {
        ticks++;
        aco_rt_sleep(MS);
    }
}

static void slow_co(void* arg) {
    (void)arg;
    ticks = 0;
    __atomic_store_n(&ticking, 1, __ATOMIC_SEQ_CST);
    CHECK(aco_rt_spawn(NULL, ticker_co, NULL) != NULL);
    int64_t t0 = aco_rt_now();
    int lfd = aco_rt_listen("slow-localhost:0", NULL, aco_rt_in_ms(5000));
    CHECK_GE(lfd, 0);
    CHECK_GE(aco_rt_now() - t0, 200 * MS);
    CHECK_GE(ticks, 50);
    __atomic_store_n(&ticking, 0, __ATOMIC_SEQ_CST);
    CHECK_EQ(aco_rt_close(lfd), 0);
}

/* ------------------------------------------------------------------------ */
/* Errors                                                                   */
/* ------------------------------------------------------------------------ */

static void taken_co(void* arg) {
    (void)arg;
    int lfd = aco_rt_listen("127.0.0.1:0", NULL, -1);
    CHECK_GE(lfd, 0);
    int port = aco_rt_net_port(lfd);
    char a[64];
    snprintf(a, sizeof(a), "127.0.0.1:%d", port);
    CHECK_EQ(aco_rt_listen(a, NULL, -1), -EADDRINUSE);     /* never elsewhere */
    snprintf(a, sizeof(a), ":%d", port);
    CHECK_EQ(aco_rt_listen(a, NULL, -1), -EADDRINUSE);
    CHECK_EQ(aco_rt_close(lfd), 0);
    /* SO_REUSEPORT on both: two sockets share the port */
    aco_rt_net_opts_t o = {.flags = ACO_RT_NET_REUSEPORT};
    lfd = aco_rt_listen("127.0.0.1:0", &o, -1);
    CHECK_GE(lfd, 0);
    snprintf(a, sizeof(a), "127.0.0.1:%d", aco_rt_net_port(lfd));
    int l2 = aco_rt_listen(a, &o, -1);
    CHECK_GE(l2, 0);
    CHECK_EQ(aco_rt_net_port(l2), aco_rt_net_port(lfd));
    CHECK_EQ(aco_rt_close(l2), 0);
    CHECK_EQ(aco_rt_close(lfd), 0);
    /* a port nobody listens on */
    CHECK_EQ(aco_rt_dial(a, NULL, aco_rt_in_ms(5000)), -ECONNREFUSED);
    CHECK_EQ(aco_rt_dial("127.0.0.1:0", NULL, -1), -EINVAL);
    /* an address that is not this host's */
    CHECK_EQ(aco_rt_listen("192.0.2.1:0", NULL, -1), -EADDRNOTAVAIL);
}

static const char* const malformed[] = {
    "", "80", "127.0.0.1", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:-1",
    "127.0.0.1:+80", "127.0.0.1:8x", "127.0.0.1:080000", "::1:80", "[::1]80", "[::1",
    "[]:80", "[::1]:", "[zz]:80", "[1.2.3.4]:80", "[::1%nosuchif0]:80", "host name:80",
    "a\tb:80", "a/b:80", ":123456", "[::1]:80:80", "localhost:http",
};

static void malformed_co(void* arg) {
    (void)arg;
    for (size_t i = 0; i < sizeof(malformed) / sizeof(malformed[0]); i++) {
        int l = aco_rt_listen(malformed[i], NULL, -1);
        int d = aco_rt_dial(malformed[i], NULL, -1);
        if (l != -EINVAL || d != -EINVAL)
            fprintf(stderr, "case \"%s\": listen %d, dial %d\n", malformed[i], l, d);
        CHECK_EQ(l, -EINVAL);
        CHECK_EQ(d, -EINVAL);
    }
    CHECK_EQ(aco_rt_listen(NULL, NULL, -1), -EINVAL);
    CHECK_EQ(aco_rt_dial(NULL, NULL, -1), -EINVAL);
    char long_name[300];
    memset(long_name, 'a', sizeof(long_name));
    strcpy(long_name + 280, ".example:80");
    CHECK_EQ(aco_rt_listen(long_name, NULL, -1), -EINVAL);
    aco_rt_net_opts_t o = {.backlog = -1};
    CHECK_EQ(aco_rt_listen("127.0.0.1:0", &o, -1), -EINVAL);
    /* dial ignores the backlog; listen's socket is left blocking, dial's
     * is O_NONBLOCK (connected by aco_rt_connect) */
    int lfd = aco_rt_listen("127.0.0.1:0", NULL, -1);
    CHECK_GE(lfd, 0);
    CHECK_EQ(fcntl(lfd, F_GETFL) & O_NONBLOCK, 0);
    char a[40];
    snprintf(a, sizeof(a), "127.0.0.1:%d", aco_rt_net_port(lfd));
    int cfd = aco_rt_dial(a, &o, aco_rt_in_ms(5000));
    CHECK_GE(cfd, 0);
    CHECK(fcntl(cfd, F_GETFL) & O_NONBLOCK);
    exchange(lfd, cfd);
    CHECK_EQ(aco_rt_close(cfd), 0);
    CHECK_EQ(aco_rt_close(lfd), 0);
    o = (aco_rt_net_opts_t){.flags = 1u << 12};
    CHECK_EQ(aco_rt_listen("127.0.0.1:0", &o, -1), -EINVAL);
    CHECK_EQ(aco_rt_dial("127.0.0.1:1", &o, -1), -EINVAL);
    /* no such name (RFC 6761: .invalid never resolves) */
    int r = aco_rt_dial("no-such-host.invalid:80", NULL, aco_rt_in_ms(20000));
    if (r == -EAGAIN) printf("test_net: no name server answered: -EAGAIN, not -ENXIO\n");
    else CHECK_EQ(r, -ENXIO);
}

static void past_co(void* arg) {
    (void)arg;
    /* numeric: nothing to wait for, done at once */
    int lfd = aco_rt_listen("127.0.0.1:0", NULL, 0);
    CHECK_GE(lfd, 0);
    int port = aco_rt_net_port(lfd);
    char a[64];
    snprintf(a, sizeof(a), "localhost:%d", port);
    CHECK_EQ(aco_rt_listen("localhost:0", NULL, 0), -ETIMEDOUT);
    CHECK_EQ(aco_rt_dial(a, NULL, 0), -ETIMEDOUT);
    CHECK_EQ(aco_rt_dial(a, NULL, -7), -ETIMEDOUT);
    /* a numeric dial with a deadline passed: one try that does not wait
     * (a loaded machine may stop the thread longer than the bound in any
     * one try: the fastest of up to 20 counts) */
    snprintf(a, sizeof(a), "127.0.0.1:%d", port);
    int64_t best = INT64_MAX;
    for (int round = 0; round < 20 && best >= 100 * MS; round++) {
        int64_t t0 = aco_rt_now();
        int c = aco_rt_dial(a, NULL, 0);
        if (aco_rt_now() - t0 < best) best = aco_rt_now() - t0;
        CHECK(c >= 0 || c == -ETIMEDOUT);
        if (c >= 0) exchange(lfd, c), aco_rt_close(c);
    }
    CHECK_LT(best, 100 * MS);
    CHECK_EQ(aco_rt_close(lfd), 0);
}

/* Cancel and deadline while a name resolves (held until the test lets it
 * go): before the lookup's end; the lookup's record is freed when it ends
 * (LeakSanitizer). */
static void resolver_co(void* arg) {
    CHECK_EQ(aco_rt_dial("held-localhost:9", NULL, -1), -ECANCELED);
    *(int*)arg = 1;
}

static void cancel_co(void* arg) {
    (void)arg;
    static int done;
    done = 0;
    __atomic_store_n(&gai_hold, 1, __ATOMIC_SEQ_CST);
    int out0 = __atomic_load_n(&gai_held_out, __ATOMIC_SEQ_CST);
    aco_rt_co_t* r = aco_rt_spawn(NULL, resolver_co, &done);
    CHECK(r != NULL);
    aco_rt_sleep(20 * MS);
    CHECK_EQ(aco_rt_cancel(r), 0);
    CHECK_EQ(aco_rt_join(r, aco_rt_in_ms(5000)), 0);
    CHECK_EQ(__atomic_load_n(&gai_held_out, __ATOMIC_SEQ_CST), out0);  /* not waited for */
    CHECK_EQ(done, 1);
    int64_t t0 = aco_rt_now();
    CHECK_EQ(aco_rt_listen("held-localhost:0", NULL, aco_rt_in_ms(30)), -ETIMEDOUT);
    CHECK_GE(aco_rt_now() - t0, 30 * MS);
    CHECK_EQ(__atomic_load_n(&gai_held_out, __ATOMIC_SEQ_CST), out0);  /* not waited for */
    __atomic_store_n(&gai_hold, 0, __ATOMIC_SEQ_CST);
    /* the lookups that started end, their records go */
    while (__atomic_load_n(&gai_held_out, __ATOMIC_SEQ_CST) !=
           __atomic_load_n(&gai_held_in, __ATOMIC_SEQ_CST))
        aco_rt_sleep(MS);
    aco_rt_sleep(300 * MS);
}

/* ------------------------------------------------------------------------ */
/* Options, backlog, descriptors                                            */
/* ------------------------------------------------------------------------ */

static int get_int(int fd, int level, int opt) {
    int v = -1;
    socklen_t len = sizeof(v);
    CHECK_EQ(getsockopt(fd, level, opt, &v, &len), 0);
    return v;
}

static void opts_co(void* arg) {
    (void)arg;
    aco_rt_net_opts_t nd = {.flags = ACO_RT_NET_NODELAY};
    int lfd = aco_rt_listen("127.0.0.1:0", &nd, -1);
    CHECK_GE(lfd, 0);
    CHECK(fcntl(lfd, F_GETFD) & FD_CLOEXEC);
    CHECK_NE(get_int(lfd, SOL_SOCKET, SO_REUSEADDR), 0);
    char a[64];
    snprintf(a, sizeof(a), "127.0.0.1:%d", aco_rt_net_port(lfd));
    int c = aco_rt_dial(a, &nd, aco_rt_in_ms(5000));
    CHECK_GE(c, 0);
    CHECK_NE(get_int(c, IPPROTO_TCP, TCP_NODELAY), 0);
    CHECK(fcntl(c, F_GETFD) & FD_CLOEXEC);
    int s = aco_rt_accept(lfd, NULL, NULL, 0, aco_rt_in_ms(5000));
    CHECK_GE(s, 0);
    CHECK_NE(get_int(s, IPPROTO_TCP, TCP_NODELAY), 0);     /* inherited */
    aco_rt_close(s);
    aco_rt_close(c);
    aco_rt_net_opts_t inh = {.flags = ACO_RT_NET_INHERIT};
    c = aco_rt_dial(a, &inh, aco_rt_in_ms(5000));
    CHECK_GE(c, 0);
    CHECK_EQ(get_int(c, IPPROTO_TCP, TCP_NODELAY), 0);
    CHECK_EQ(fcntl(c, F_GETFD) & FD_CLOEXEC, 0);
    aco_rt_close(c);
    aco_rt_close(lfd);
    aco_rt_net_opts_t plain = {.flags = ACO_RT_NET_INHERIT | ACO_RT_NET_NO_REUSEADDR};
    lfd = aco_rt_listen("127.0.0.1:0", &plain, -1);
    CHECK_GE(lfd, 0);
    CHECK_EQ(fcntl(lfd, F_GETFD) & FD_CLOEXEC, 0);
    CHECK_EQ(get_int(lfd, SOL_SOCKET, SO_REUSEADDR), 0);
    aco_rt_close(lfd);
}

/* The backlog the kernel took: a listening socket's tcpi_sacked. */
static unsigned backlog_of(int lfd) {
    struct tcp_info ti;
    socklen_t len = sizeof(ti);
    CHECK_EQ(getsockopt(lfd, IPPROTO_TCP, TCP_INFO, &ti, &len), 0);
    return ti.tcpi_sacked;
}

static int bl_port, bl_ok;
static void client_co(void* arg) {
    int* fds = arg;
    char a[64];
    snprintf(a, sizeof(a), "127.0.0.1:%d", bl_port);
    /* a SYN dropped by a full queue is sent again after 1 s: too late */
    int c = aco_rt_dial(a, NULL, aco_rt_in_ms(800));
    if (c >= 0) bl_ok++;
    *fds = c;
}

static void backlog_co(void* arg) {
    (void)arg;
    long somax = 4096;
    FILE* f = fopen("/proc/sys/net/core/somaxconn", "r");
    if (f) { CHECK_EQ(fscanf(f, "%ld", &somax), 1); fclose(f); }
    aco_rt_net_opts_t o = {.backlog = 10};
    int lfd = aco_rt_listen("127.0.0.1:0", &o, -1);
    CHECK_EQ(backlog_of(lfd), 10);
    aco_rt_close(lfd);
    lfd = aco_rt_listen("127.0.0.1:0", NULL, -1);
    CHECK_EQ(backlog_of(lfd), somax < 4096 ? somax : 4096);
    bl_port = aco_rt_net_port(lfd);
    /* 1000 clients at once, none accepted yet: all connect promptly */
    int n = somax >= 1000 ? 1000 : (int)somax - 10;
    static int fds[1000];
    bl_ok = 0;
    aco_rt_co_t* cos[1000];
    for (int i = 0; i < n; i++) CHECK((cos[i] = aco_rt_spawn(NULL, client_co, &fds[i])) != NULL);
    for (int i = 0; i < n; i++) CHECK_EQ(aco_rt_join(cos[i], -1), 0);
    CHECK_EQ(bl_ok, n);
    for (int i = 0; i < n; i++) {
        int s = aco_rt_accept(lfd, NULL, NULL, 0, aco_rt_in_ms(5000));
        CHECK_GE(s, 0);
        aco_rt_close(s);
        aco_rt_close(fds[i]);
    }
    aco_rt_close(lfd);
}

/* Out of descriptors: -EMFILE from both, no crash; fine again after. */
static void emfile_co(void* arg) {
    (void)arg;
    int lfd = aco_rt_listen("127.0.0.1:0", NULL, -1);
    CHECK_GE(lfd, 0);
    char a[64];
    snprintf(a, sizeof(a), "127.0.0.1:%d", aco_rt_net_port(lfd));
    struct rlimit old, low;
    CHECK_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
    low = old;
    low.rlim_cur = 256;
    CHECK_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
    int base = open("/dev/null", O_RDONLY | O_CLOEXEC);
    CHECK_GE(base, 0);
    int held[256], nh = 0, d;
    while (nh < 256 && (d = dup(base)) >= 0) held[nh++] = d;
    CHECK_EQ(errno, EMFILE);
    CHECK_EQ(aco_rt_listen("127.0.0.1:0", NULL, -1), -EMFILE);
    CHECK_EQ(aco_rt_listen(":0", NULL, -1), -EMFILE);
    CHECK_EQ(aco_rt_dial(a, NULL, aco_rt_in_ms(1000)), -EMFILE);
    CHECK_EQ(aco_rt_dial(":9", NULL, aco_rt_in_ms(1000)), -EMFILE);
    while (nh) close(held[--nh]);
    close(base);
    CHECK_EQ(setrlimit(RLIMIT_NOFILE, &old), 0);
    dial_ok(lfd, ":%d", aco_rt_net_port(lfd));
    aco_rt_close(lfd);
}

static void body(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    test_go(s, forms_co, NULL);
    test_go(s, name_co, NULL);
    test_go(s, slow_co, NULL);
    test_go(s, taken_co, NULL);
    test_go(s, malformed_co, NULL);
    test_go(s, past_co, NULL);
    test_go(s, cancel_co, NULL);
    test_go(s, opts_co, NULL);
    test_go(s, backlog_co, NULL);
    test_go(s, emfile_co, NULL);
    /* outside a co: listen works (a name in this thread), dial does not */
    int lfd = aco_rt_listen("localhost:0", NULL, -1);
    CHECK_GE(lfd, 0);
    CHECK_EQ(__atomic_load_n(&gai_on_main, __ATOMIC_SEQ_CST), 1);
    __atomic_store_n(&gai_on_main, 0, __ATOMIC_SEQ_CST);
    CHECK_EQ(aco_rt_dial("127.0.0.1:80", NULL, -1), -EPERM);
    aco_rt_close(lfd);
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    main_thread = pthread_self();
    test_raise_nofile(4096);
    int fd = socket(AF_INET6, SOCK_STREAM, 0);
    struct sockaddr_in6 s6 = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    have_v6 = fd >= 0 && bind(fd, (struct sockaddr*)&s6, sizeof(s6)) == 0;
    if (fd >= 0) close(fd);
    if (!have_v6) printf("test_net: no IPv6 loopback in this kernel: its checks skipped\n");
    test_on_backends(NULL, body, NULL);
    printf("test_net: OK\n");
    return 0;
}
