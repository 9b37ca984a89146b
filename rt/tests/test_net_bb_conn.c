/* test_net_bb_conn.c - aco_rt_listen, aco_rt_dial, aco_rt_net_port,
 * aco_rt_accept, aco_rt_connect and aco_rt_shutdown, written from the
 * header (rt/aco_rt.h, "Connections" and "I/O") and docs/runtime.md alone:
 * every listed error code, the options as getsockopt sees them, dual-stack
 * ":port", IPv6, a dial that times out against a listener whose queue is
 * full, dial's "this host" order, Unix stream sockets through
 * aco_rt_connect, shutdown's rules.  TCP ports 47400-47499 on loopback. */
#include "rt_test.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>

static int have_v6;

/* Ports 47400-47499 on loopback; the kernel's ephemeral range covers them,
 * so a port may be held by another program's connection: each listen
 * takes the next port of the range that is free. */
static int next_port = 47400;
static int take_port(void) {
    int p = next_port++;
    if (next_port > 47499) next_port = 47400;
    return p;
}
/* aco_rt_listen on fmt (with one %d for the port) on a free port */
static int listen_free(const char* fmt, const aco_rt_net_opts_t* o, int* port) {
    for (int i = 0; i < 100; i++) {
        char a[96];
        int p = take_port();
        snprintf(a, sizeof(a), fmt, p);
        int l = aco_rt_listen(a, o, -1);
        if (l == -EADDRINUSE) continue;
        CHECK_GE(l, 0);
        *port = p;
        return l;
    }
    TEST_FAIL_AT(__FILE__, __LINE__, "no free port in 47400-47499");
}
static const char* at(const char* fmt, int port) {
    static char b[4][96];
    static int k;
    char* r = b[k++ & 3];
    snprintf(r, 96, fmt, port);
    return r;
}

static int raw_flags(int fd) { return (int)syscall(SYS_fcntl, fd, F_GETFL); }
static int raw_fdflags(int fd) { return (int)syscall(SYS_fcntl, fd, F_GETFD); }
static int sockopt(int fd, int lvl, int opt) {
    int v = -1;
    socklen_t l = sizeof(v);
    CHECK_EQ(getsockopt(fd, lvl, opt, &v, &l), 0);
    return v;
}

/* A plain TCP listener on 127.0.0.1:port with the given backlog. */
static int raw_bound(int* port) {
    for (int i = 0; i < 100; i++) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        CHECK_GE(fd, 0);
        int one = 1;
        CHECK_EQ(setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)), 0);
        struct sockaddr_in a = {0};
        a.sin_family = AF_INET;
        a.sin_port = htons((uint16_t)(*port = take_port()));
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (bind(fd, (struct sockaddr*)&a, sizeof(a)) == 0) return fd;
        CHECK_EQ(errno, EADDRINUSE);
        close(fd);
    }
    TEST_FAIL_AT(__FILE__, __LINE__, "no free port in 47400-47499");
}
static int raw_listener(int* port, int backlog) {
    int fd = raw_bound(port);
    CHECK_EQ(listen(fd, backlog), 0);
    return fd;
}

/* A port nobody listens on: bound, not listening, kept until closed. */
static int closed_port(int* holder) {
    int port;
    *holder = raw_bound(&port);
    return port;
}

static void check_pair(int a, int b) {
    char c = 0;
    CHECK_EQ(aco_rt_send(a, "p", 1, 0, aco_rt_in_ms(5000)), 1);
    CHECK_EQ(aco_rt_recv(b, &c, 1, 0, aco_rt_in_ms(5000)), 1);
    CHECK_EQ(c, 'p');
    CHECK_EQ(aco_rt_send(b, "q", 1, 0, aco_rt_in_ms(5000)), 1);
    CHECK_EQ(aco_rt_recv(a, &c, 1, 0, aco_rt_in_ms(5000)), 1);
    CHECK_EQ(c, 'q');
}

/* ---- addresses the header calls malformed, and bad opts ---- */
static void case_einval(void) {
    int P;
    static const char* bad[] = {
        "",            "127.0.0.1",      "127.0.0.1:",      "127.0.0.1:65536",
        "127.0.0.1:-1", "127.0.0.1:99999999999", "[::1:47401", "::1:47401",
        ":",           "[::1]",          "127.0.0.1:80x",   "127.0.0.1: 80",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int r = aco_rt_listen(bad[i], NULL, -1);
        if (r != -EINVAL) TEST_FAIL_AT(__FILE__, __LINE__, "listen(\"%s\") = %d, want -EINVAL", bad[i], r);
        r = aco_rt_dial(bad[i], NULL, aco_rt_in_ms(2000));
        if (r != -EINVAL) TEST_FAIL_AT(__FILE__, __LINE__, "dial(\"%s\") = %d, want -EINVAL", bad[i], r);
    }
    /* an over-long host */
    char lng[400];
    memset(lng, 'a', sizeof(lng));
    memcpy(lng + sizeof(lng) - 7, ":47401", 7);
    CHECK_EQ(aco_rt_listen(lng, NULL, -1), -EINVAL);
    aco_rt_net_opts_t o = {-1, 0};
    CHECK_EQ(aco_rt_listen("127.0.0.1:0", &o, -1), -EINVAL);
    o.backlog = 0;
    o.flags = 1u << 20;
    CHECK_EQ(aco_rt_listen("127.0.0.1:0", &o, -1), -EINVAL);
    /* dial: port 0 */
    CHECK_EQ(aco_rt_dial("127.0.0.1:0", NULL, aco_rt_in_ms(2000)), -EINVAL);
    /* dial ignores backlog and the listen-only flags */
    int l = listen_free("127.0.0.1:%d", NULL, &P);
    CHECK_GE(l, 0);
    aco_rt_net_opts_t od = {-5, ACO_RT_NET_REUSEPORT | ACO_RT_NET_NO_REUSEADDR};
    int d = aco_rt_dial(at("127.0.0.1:%d", P), &od, aco_rt_in_ms(5000));
    CHECK_GE(d, 0);
    CHECK_EQ(aco_rt_close(d), 0);
    CHECK_EQ(aco_rt_close(l), 0);
}

/* ---- listen: sockets as the header says ---- */
static void case_listen(void) {
    int P;
    int l = aco_rt_listen("127.0.0.1:0", NULL, -1);
    CHECK_GE(l, 0);
    int port = aco_rt_net_port(l);
    CHECK_GT(port, 0);
    CHECK_EQ(sockopt(l, SOL_SOCKET, SO_TYPE), SOCK_STREAM);
    CHECK_EQ(sockopt(l, SOL_SOCKET, SO_ACCEPTCONN), 1);
    CHECK(sockopt(l, SOL_SOCKET, SO_REUSEADDR) != 0);
    CHECK_EQ(sockopt(l, SOL_SOCKET, SO_REUSEPORT), 0);
    CHECK(raw_fdflags(l) & FD_CLOEXEC);
    CHECK_EQ(raw_flags(l) & O_NONBLOCK, 0);           /* left blocking */
    /* the same port again: taken, never another port */
    char a[64];
    snprintf(a, sizeof(a), "127.0.0.1:%d", port);
    CHECK_EQ(aco_rt_listen(a, NULL, -1), -EADDRINUSE);
    aco_rt_net_opts_t rp = {0, ACO_RT_NET_REUSEPORT};
    CHECK_EQ(aco_rt_listen(a, &rp, -1), -EADDRINUSE);   /* the first lacks it */
    /* dial it: connected, O_NONBLOCK, close-on-exec */
    int d = aco_rt_dial(a, NULL, aco_rt_in_ms(5000));
    CHECK_GE(d, 0);
    CHECK(raw_flags(d) & O_NONBLOCK);
    CHECK(raw_fdflags(d) & FD_CLOEXEC);
    CHECK_EQ(sockopt(d, IPPROTO_TCP, TCP_NODELAY), 0);
    struct sockaddr_in peer;
    socklen_t pl = sizeof(peer);
    int c = aco_rt_accept(l, (struct sockaddr*)&peer, &pl, SOCK_CLOEXEC, aco_rt_in_ms(5000));
    CHECK_GE(c, 0);
    CHECK_EQ(pl, sizeof(peer));
    CHECK_EQ(peer.sin_family, AF_INET);
    CHECK_EQ(ntohs(peer.sin_port), aco_rt_net_port(d));
    CHECK(raw_fdflags(c) & FD_CLOEXEC);
    CHECK_EQ(raw_flags(c) & O_NONBLOCK, 0);
    check_pair(c, d);
    CHECK_EQ(aco_rt_close(c), 0);
    CHECK_EQ(aco_rt_close(d), 0);
    CHECK_EQ(aco_rt_close(l), 0);

    /* REUSEPORT both: two listeners on one port */
    int r1 = listen_free("127.0.0.1:%d", &rp, &P);
    CHECK_GE(r1, 0);
    CHECK_EQ(sockopt(r1, SOL_SOCKET, SO_REUSEPORT), 1);
    int r2 = aco_rt_listen(at("127.0.0.1:%d", P), &rp, -1);
    CHECK_GE(r2, 0);
    CHECK_EQ(aco_rt_close(r2), 0);
    CHECK_EQ(aco_rt_close(r1), 0);

    /* NODELAY: the listener's, inherited by accepted sockets; on dial's */
    aco_rt_net_opts_t nd = {0, ACO_RT_NET_NODELAY};
    l = listen_free("127.0.0.1:%d", &nd, &P);
    CHECK_GE(l, 0);
    CHECK(sockopt(l, IPPROTO_TCP, TCP_NODELAY) != 0);
    d = aco_rt_dial(at("127.0.0.1:%d", P), &nd, aco_rt_in_ms(5000));
    CHECK_GE(d, 0);
    CHECK(sockopt(d, IPPROTO_TCP, TCP_NODELAY) != 0);
    c = aco_rt_accept(l, NULL, NULL, 0, aco_rt_in_ms(5000));
    CHECK_GE(c, 0);
    CHECK(sockopt(c, IPPROTO_TCP, TCP_NODELAY) != 0);
    CHECK_EQ(raw_fdflags(c) & FD_CLOEXEC, 0);     /* accept's own flags: none */
    CHECK_EQ(aco_rt_close(c), 0);
    CHECK_EQ(aco_rt_close(d), 0);
    CHECK_EQ(aco_rt_close(l), 0);

    /* INHERIT: not close-on-exec, on both; NO_REUSEADDR */
    aco_rt_net_opts_t in = {0, ACO_RT_NET_INHERIT | ACO_RT_NET_NO_REUSEADDR};
    l = listen_free("127.0.0.1:%d", &in, &P);
    CHECK_GE(l, 0);
    CHECK_EQ(raw_fdflags(l) & FD_CLOEXEC, 0);
    CHECK_EQ(sockopt(l, SOL_SOCKET, SO_REUSEADDR), 0);
    d = aco_rt_dial(at("127.0.0.1:%d", P), &in, aco_rt_in_ms(5000));
    CHECK_GE(d, 0);
    CHECK_EQ(raw_fdflags(d) & FD_CLOEXEC, 0);
    c = aco_rt_accept(l, NULL, NULL, SOCK_NONBLOCK, aco_rt_in_ms(5000));
    CHECK_GE(c, 0);
    CHECK(raw_flags(c) & O_NONBLOCK);
    CHECK_EQ(aco_rt_close(c), 0);
    CHECK_EQ(aco_rt_close(d), 0);
    CHECK_EQ(aco_rt_close(l), 0);

    /* backlog: the kernel's view is not visible; a given backlog works */
    aco_rt_net_opts_t bl = {1, 0};
    l = listen_free("127.0.0.1:%d", &bl, &P);
    CHECK_GE(l, 0);
    CHECK_EQ(aco_rt_close(l), 0);

    /* not one of this host's addresses; a port below 1024 */
    CHECK_EQ(aco_rt_listen("192.0.2.1:47407", NULL, -1), -EADDRNOTAVAIL);
    if (geteuid() != 0) CHECK_EQ(aco_rt_listen("127.0.0.1:1", NULL, -1), -EACCES);
    if (have_v6) CHECK_EQ(aco_rt_listen("[2001:db8::1]:47407", NULL, -1), -EADDRNOTAVAIL);
}

/* ---- IPv6 and ":port" ---- */
static void case_v6(void) {
    int P;
    /* ":port": dual-stack, V6ONLY off; both families reach it */
    int l = listen_free(":%d", NULL, &P);
    CHECK_GE(l, 0);
    CHECK_EQ(aco_rt_net_port(l), P);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    CHECK_EQ(getsockname(l, (struct sockaddr*)&ss, &sl), 0);
    if (have_v6) {
        CHECK_EQ(ss.ss_family, AF_INET6);
        CHECK_EQ(sockopt(l, IPPROTO_IPV6, IPV6_V6ONLY), 0);
    }
    int d4 = aco_rt_dial(at("127.0.0.1:%d", P), NULL, aco_rt_in_ms(5000));
    CHECK_GE(d4, 0);
    int c4 = aco_rt_accept(l, NULL, NULL, 0, aco_rt_in_ms(5000));
    CHECK_GE(c4, 0);
    check_pair(c4, d4);
    if (have_v6) {
        int d6 = aco_rt_dial(at("[::1]:%d", P), NULL, aco_rt_in_ms(5000));
        CHECK_GE(d6, 0);
        int c6 = aco_rt_accept(l, NULL, NULL, 0, aco_rt_in_ms(5000));
        CHECK_GE(c6, 0);
        check_pair(c6, d6);
        CHECK_EQ(aco_rt_close(c6), 0);
        CHECK_EQ(aco_rt_close(d6), 0);
    }
    /* dial ":port": this host */
    int d = aco_rt_dial(at(":%d", P), NULL, aco_rt_in_ms(5000));
    CHECK_GE(d, 0);
    int c = aco_rt_accept(l, NULL, NULL, 0, aco_rt_in_ms(5000));
    CHECK_GE(c, 0);
    check_pair(c, d);
    CHECK_EQ(aco_rt_close(c), 0);
    CHECK_EQ(aco_rt_close(d), 0);
    CHECK_EQ(aco_rt_close(c4), 0);
    CHECK_EQ(aco_rt_close(d4), 0);
    CHECK_EQ(aco_rt_close(l), 0);
    if (!have_v6) return;

    /* "[::1]:port" alone: dial ":port" tries 127.0.0.1 (refused) then ::1 */
    l = listen_free("[::1]:%d", NULL, &P);
    CHECK_GE(l, 0);
    sl = sizeof(ss);
    CHECK_EQ(getsockname(l, (struct sockaddr*)&ss, &sl), 0);
    CHECK_EQ(ss.ss_family, AF_INET6);
    CHECK_EQ(aco_rt_dial(at("127.0.0.1:%d", P), NULL, aco_rt_in_ms(5000)), -ECONNREFUSED);
    d = aco_rt_dial(at(":%d", P), NULL, aco_rt_in_ms(5000));
    CHECK_GE(d, 0);
    c = aco_rt_accept(l, (struct sockaddr*)&ss, &sl, 0, aco_rt_in_ms(5000));
    CHECK_GE(c, 0);
    CHECK_EQ(ss.ss_family, AF_INET6);
    check_pair(c, d);
    CHECK_EQ(aco_rt_close(c), 0);
    CHECK_EQ(aco_rt_close(d), 0);
    /* with a scope (an interface name, a number) */
    d = aco_rt_dial(at("[::1%%lo]:%d", P), NULL, aco_rt_in_ms(5000));
    CHECK_GE(d, 0);
    c = aco_rt_accept(l, NULL, NULL, 0, aco_rt_in_ms(5000));
    CHECK_GE(c, 0);
    CHECK_EQ(aco_rt_close(c), 0);
    CHECK_EQ(aco_rt_close(d), 0);
    CHECK_EQ(aco_rt_close(l), 0);
    /* ":port" taken by a v4 listener: -EADDRINUSE, never another port */
    int r4 = listen_free("127.0.0.1:%d", NULL, &P);
    CHECK_GE(r4, 0);
    CHECK_EQ(aco_rt_listen(at(":%d", P), NULL, -1), -EADDRINUSE);
    CHECK_EQ(aco_rt_close(r4), 0);
}

/* ---- dial's errors and deadlines ---- */
static void case_dial(void) {
    int P;
    int holder;
    int port = closed_port(&holder);
    char a[64];
    snprintf(a, sizeof(a), "127.0.0.1:%d", port);
    CHECK_EQ(aco_rt_dial(a, NULL, aco_rt_in_ms(5000)), -ECONNREFUSED);
    /* a deadline passed: one connect that does not wait: -ETIMEDOUT even to
     * a listener on this host */
    int l = listen_free("127.0.0.1:%d", NULL, &P);
    CHECK_GE(l, 0);
    CHECK_EQ(aco_rt_dial(at("127.0.0.1:%d", P), NULL, 0), -ETIMEDOUT);
    CHECK_EQ(aco_rt_dial(at("127.0.0.1:%d", P), NULL, -5), -ETIMEDOUT);
    CHECK_EQ(aco_rt_close(l), 0);
    close(holder);

    /* a listener whose queue is full drops SYNs: dial waits until its
     * deadline (never before it), the thread running other cos */
    int fl = raw_listener(&P, 0);
    int fillers[3];
    for (int i = 0; i < 3; i++) {
        fillers[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        struct sockaddr_in sa = {0};
        sa.sin_family = AF_INET;
        sa.sin_port = htons((uint16_t)P);
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        int r = connect(fillers[i], (struct sockaddr*)&sa, sizeof(sa));
        CHECK(r == 0 || errno == EINPROGRESS);
    }
    /* one is in the queue: full (backlog 0) */
    CHECK_EQ(aco_rt_wait(fl, POLLIN, aco_rt_in_ms(5000)), POLLIN);
    int64_t t0 = aco_rt_now();
    CHECK_EQ(aco_rt_dial(at("127.0.0.1:%d", P), NULL, t0 + 300 * MS), -ETIMEDOUT);
    CHECK_GE(aco_rt_now() - t0, 300 * MS);
    for (int i = 0; i < 3; i++) close(fillers[i]);
    close(fl);
}

/* dial cancelled while it waits on a full queue */
static int cancel_fl;   /* its port */
static void dial_cancelled(void* arg) {
    *(int*)arg = aco_rt_dial(at("127.0.0.1:%d", cancel_fl), NULL, -1);
}
static void case_dial_cancel(void) {
    int fl = raw_listener(&cancel_fl, 0);
    int f = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    struct sockaddr_in sa = {0};
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)cancel_fl);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int r = connect(f, (struct sockaddr*)&sa, sizeof(sa));
    CHECK(r == 0 || errno == EINPROGRESS);
    CHECK_EQ(aco_rt_wait(fl, POLLIN, aco_rt_in_ms(5000)), POLLIN);
    int res = 12345;
    aco_rt_co_t* co = aco_rt_spawn(NULL, dial_cancelled, &res);
    CHECK(co != NULL);
    CHECK_EQ(aco_rt_sleep(50 * MS), 0);
    CHECK_EQ(res, 12345);
    CHECK_EQ(aco_rt_cancel(co), 0);
    CHECK_EQ(aco_rt_join(co, aco_rt_in_ms(5000)), 0);
    CHECK_EQ(res, -ECANCELED);
    close(f);
    close(fl);
}

/* ---- aco_rt_connect and aco_rt_accept ---- */
static void case_connect(void) {
    int P;
    int l = listen_free("127.0.0.1:%d", NULL, &P);
    CHECK_GE(l, 0);
    struct sockaddr_in sa = {0};
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)P);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int s = socket(AF_INET, SOCK_STREAM, 0);
    CHECK_EQ(aco_rt_connect(s, (struct sockaddr*)&sa, sizeof(sa), aco_rt_in_ms(5000)), 0);
    CHECK_EQ(aco_rt_connect(s, (struct sockaddr*)&sa, sizeof(sa), aco_rt_in_ms(5000)), -EISCONN);
    int c = aco_rt_accept(l, NULL, NULL, 0, aco_rt_in_ms(5000));
    CHECK_GE(c, 0);
    check_pair(c, s);
    close(c);
    close(s);
    /* a passed deadline: -ETIMEDOUT at once; a later call waits for that
     * attempt and says how it ended */
    s = socket(AF_INET, SOCK_STREAM, 0);
    CHECK_EQ(aco_rt_connect(s, (struct sockaddr*)&sa, sizeof(sa), 0), -ETIMEDOUT);
    int r = aco_rt_connect(s, (struct sockaddr*)&sa, sizeof(sa), aco_rt_in_ms(5000));
    CHECK(r == 0 || r == -EISCONN);
    c = aco_rt_accept(l, NULL, NULL, 0, aco_rt_in_ms(5000));
    CHECK_GE(c, 0);
    check_pair(c, s);
    close(c);
    close(s);
    /* refused: unconnected after it, another connect tries afresh */
    int holder;
    int port = closed_port(&holder);
    struct sockaddr_in ca = sa;
    ca.sin_port = htons((uint16_t)port);
    s = socket(AF_INET, SOCK_STREAM, 0);
    CHECK_EQ(aco_rt_connect(s, (struct sockaddr*)&ca, sizeof(ca), aco_rt_in_ms(5000)), -ECONNREFUSED);
    CHECK_EQ(aco_rt_connect(s, (struct sockaddr*)&sa, sizeof(sa), aco_rt_in_ms(5000)), 0);
    c = aco_rt_accept(l, NULL, NULL, 0, aco_rt_in_ms(5000));
    CHECK_GE(c, 0);
    check_pair(c, s);
    close(c);
    close(s);
    close(holder);
    /* errors as connect(2)'s */
    int notsock = open("/dev/null", O_RDONLY);
    CHECK_EQ(aco_rt_connect(notsock, (struct sockaddr*)&sa, sizeof(sa), aco_rt_in_ms(5000)), -ENOTSOCK);
    close(notsock);
    s = socket(AF_INET, SOCK_STREAM, 0);
    CHECK_EQ(aco_rt_connect(s, (struct sockaddr*)&sa, 3, aco_rt_in_ms(5000)), -EINVAL);
    struct sockaddr_un ua = {0};
    ua.sun_family = AF_UNIX;
    CHECK_EQ(aco_rt_connect(s, (struct sockaddr*)&ua, sizeof(ua), aco_rt_in_ms(5000)), -EAFNOSUPPORT);
    close(s);
    CHECK_EQ(aco_rt_connect(1000000, (struct sockaddr*)&sa, sizeof(sa), aco_rt_in_ms(5000)), -EBADF);

    /* accept: errors */
    CHECK_EQ(aco_rt_accept(l, NULL, NULL, 0x7000, aco_rt_in_ms(5000)), -EINVAL);
    CHECK_EQ(aco_rt_accept(l, NULL, NULL, 0, 0), -ETIMEDOUT);
    int64_t t0 = aco_rt_now();
    CHECK_EQ(aco_rt_accept(l, NULL, NULL, 0, t0 + 100 * MS), -ETIMEDOUT);
    CHECK_GE(aco_rt_now() - t0, 100 * MS);
    s = socket(AF_INET, SOCK_STREAM, 0);
    CHECK_EQ(aco_rt_accept(s, NULL, NULL, 0, aco_rt_in_ms(5000)), -EINVAL);   /* not listening */
    close(s);
    int dg = socket(AF_INET, SOCK_DGRAM, 0);
    CHECK_EQ(aco_rt_accept(dg, NULL, NULL, 0, aco_rt_in_ms(5000)), -EOPNOTSUPP);
    close(dg);
    CHECK_EQ(aco_rt_close(l), 0);
}

/* ---- Unix stream sockets: aco_rt_connect waits for room in a full queue ---- */
static const char* upath = "/tmp/aco_net_bb_unix.sock";
static int ures;
static void unix_connector(void* arg) {
    int s = *(int*)arg;
    struct sockaddr_un ua = {0};
    ua.sun_family = AF_UNIX;
    strcpy(ua.sun_path, upath);
    ures = aco_rt_connect(s, (struct sockaddr*)&ua, sizeof(ua), aco_rt_in_ms(10000));
}
static void case_unix(void) {
    unlink(upath);
    int l = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un ua = {0};
    ua.sun_family = AF_UNIX;
    strcpy(ua.sun_path, upath);
    CHECK_EQ(bind(l, (struct sockaddr*)&ua, sizeof(ua)), 0);
    CHECK_EQ(listen(l, 0), 0);
    /* fill the queue: Unix listen(0) holds one */
    int f[4];
    int nf = 0;
    for (; nf < 4; nf++) {
        f[nf] = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
        if (connect(f[nf], (struct sockaddr*)&ua, sizeof(ua)) != 0) {
            CHECK_EQ(errno, EAGAIN);
            close(f[nf]);
            break;
        }
    }
    CHECK_GE(nf, 1);
    CHECK_LT(nf, 4);
    /* a passed deadline: -ETIMEDOUT at once */
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK_EQ(aco_rt_connect(s, (struct sockaddr*)&ua, sizeof(ua), 0), -ETIMEDOUT);
    int64_t t0 = aco_rt_now();
    CHECK_EQ(aco_rt_connect(s, (struct sockaddr*)&ua, sizeof(ua), t0 + 100 * MS), -ETIMEDOUT);
    CHECK_GE(aco_rt_now() - t0, 100 * MS);
    /* waits; an accept makes room */
    ures = 12345;
    aco_rt_co_t* co = aco_rt_spawn(NULL, unix_connector, &s);
    CHECK(co != NULL);
    CHECK_EQ(aco_rt_sleep(30 * MS), 0);
    CHECK_EQ(ures, 12345);
    int a = aco_rt_accept(l, NULL, NULL, 0, aco_rt_in_ms(5000));
    CHECK_GE(a, 0);
    CHECK_EQ(aco_rt_join(co, aco_rt_in_ms(10000)), 0);
    CHECK_EQ(ures, 0);
    /* the rest: accept them all, s among them */
    int got = 0;
    for (int i = 0; i < nf; i++) {
        int b = aco_rt_accept(l, NULL, NULL, 0, aco_rt_in_ms(5000));
        CHECK_GE(b, 0);
        close(b);
        got++;
    }
    CHECK_EQ(got, nf);
    close(a);
    close(s);
    for (int i = 0; i < nf; i++) close(f[i]);
    close(l);
    unlink(upath);
}

/* ---- shutdown ---- */
static int sd_reader_res;
static void sd_reader(void* arg) {
    char b[8];
    sd_reader_res = (int)aco_rt_recv(*(int*)arg, b, sizeof(b), 0, aco_rt_in_ms(10000));
}
static void sd_cancelled(void* arg) {
    int fd = *(int*)arg;
    CHECK_EQ(aco_rt_sleep(10 * MS), -ECANCELED);
    CHECK_EQ(aco_rt_shutdown(fd, SHUT_WR, -1), -ECANCELED);
}
static void case_shutdown(void) {
    int P;
    int sv[2];
    int l = listen_free("127.0.0.1:%d", NULL, &P);
    CHECK_GE(l, 0);
    sv[0] = aco_rt_dial(at("127.0.0.1:%d", P), NULL, aco_rt_in_ms(5000));
    CHECK_GE(sv[0], 0);
    sv[1] = aco_rt_accept(l, NULL, NULL, 0, aco_rt_in_ms(5000));
    CHECK_GE(sv[1], 0);
    /* SHUT_WR with a deadline passed still happens: the peer reads 0, then
     * still writes to us */
    CHECK_EQ(aco_rt_shutdown(sv[0], SHUT_WR, 0), 0);
    char b[8];
    CHECK_EQ(aco_rt_recv(sv[1], b, sizeof(b), 0, aco_rt_in_ms(5000)), 0);
    CHECK_EQ(aco_rt_send(sv[1], "hi", 2, 0, aco_rt_in_ms(5000)), 2);
    CHECK_EQ(aco_rt_recv(sv[0], b, sizeof(b), 0, aco_rt_in_ms(5000)), 2);
    /* the writer shut: a write says -EPIPE, of none too */
    CHECK_EQ(aco_rt_send(sv[0], "x", 1, 0, aco_rt_in_ms(5000)), -EPIPE);
    CHECK_EQ(aco_rt_write(sv[0], "x", 0, aco_rt_in_ms(5000)), -EPIPE);
    /* SHUT_RD wakes a co waiting to read: the end */
    sd_reader_res = 12345;
    aco_rt_co_t* co = aco_rt_spawn(NULL, sd_reader, &sv[0]);
    CHECK(co != NULL);
    CHECK_EQ(aco_rt_sleep(20 * MS), 0);
    CHECK_EQ(sd_reader_res, 12345);
    CHECK_EQ(aco_rt_shutdown(sv[0], SHUT_RD, -1), 0);
    CHECK_EQ(aco_rt_join(co, aco_rt_in_ms(5000)), 0);
    CHECK_EQ(sd_reader_res, 0);
    /* a cancelled co: -ECANCELED */
    co = aco_rt_spawn(NULL, sd_cancelled, &sv[1]);
    CHECK(co != NULL);
    CHECK_EQ(aco_rt_cancel(co), 0);
    CHECK_EQ(aco_rt_join(co, aco_rt_in_ms(5000)), 0);
    /* shutdown(2)'s errors */
    CHECK_EQ(aco_rt_shutdown(sv[1], 7, -1), -EINVAL);
    int u = socket(AF_INET, SOCK_STREAM, 0);
    CHECK_EQ(aco_rt_shutdown(u, SHUT_RDWR, -1), -ENOTCONN);
    close(u);
    int nf = open("/dev/null", O_RDONLY);
    CHECK_EQ(aco_rt_shutdown(nf, SHUT_RDWR, -1), -ENOTSOCK);
    close(nf);
    CHECK_EQ(aco_rt_shutdown(1000000, SHUT_RDWR, -1), -EBADF);
    CHECK_EQ(aco_rt_shutdown(1 << 25, SHUT_RDWR, -1), -EBADF);  /* no record needed */
    /* a passed deadline, and a read of none: 0 at once */
    CHECK_EQ(aco_rt_read(sv[0], b, 0, aco_rt_in_ms(5000)), 0);
    close(sv[0]);
    close(sv[1]);
    CHECK_EQ(aco_rt_close(l), 0);
}

/* ---- reset: -ECONNRESET once, then the end ---- */
static void case_reset(void) {
    int P;
    int l = listen_free("127.0.0.1:%d", NULL, &P);
    CHECK_GE(l, 0);
    int d = aco_rt_dial(at("127.0.0.1:%d", P), NULL, aco_rt_in_ms(5000));
    CHECK_GE(d, 0);
    int c = aco_rt_accept(l, NULL, NULL, 0, aco_rt_in_ms(5000));
    CHECK_GE(c, 0);
    struct linger lg = {1, 0};
    CHECK_EQ(setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
    CHECK_EQ(aco_rt_close(c), 0);
    char b[8];
    CHECK_EQ(aco_rt_recv(d, b, sizeof(b), 0, aco_rt_in_ms(5000)), -ECONNRESET);
    CHECK_EQ(aco_rt_recv(d, b, sizeof(b), 0, aco_rt_in_ms(5000)), 0);
    CHECK_EQ(aco_rt_send(d, "x", 1, 0, aco_rt_in_ms(5000)), -EPIPE);
    CHECK_EQ(aco_rt_close(d), 0);
    CHECK_EQ(aco_rt_close(l), 0);
}

static void main_co(void* arg) {
    (void)arg;
    case_einval();
    case_listen();
    case_v6();
    case_dial();
    case_dial_cancel();
    case_connect();
    case_unix();
    case_shutdown();
    case_reset();
}

static void body(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    test_go(s, main_co, NULL);
}

int main(void) {
    int P;
    int t = socket(AF_INET6, SOCK_STREAM, 0);
    if (t >= 0) {
        struct sockaddr_in6 a6 = {0};
        a6.sin6_family = AF_INET6;
        a6.sin6_addr = in6addr_loopback;
        have_v6 = bind(t, (struct sockaddr*)&a6, sizeof(a6)) == 0;
        close(t);
    }
    /* outside cos: listen works, dial is -EPERM */
    int l = listen_free("127.0.0.1:%d", NULL, &P);
    CHECK_GE(l, 0);
    CHECK_EQ(aco_rt_net_port(l), P);
    CHECK_EQ(aco_rt_dial(at("127.0.0.1:%d", P), NULL, -1), -EPERM);
    CHECK_EQ(aco_rt_listen(at("127.0.0.1:%d", P), NULL, -1), -EADDRINUSE);
    CHECK_EQ(aco_rt_listen("bad", NULL, -1), -EINVAL);
    close(l);
    int u = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK_EQ(aco_rt_net_port(u), -EAFNOSUPPORT);
    close(u);
    CHECK_EQ(aco_rt_net_port(1000000), -EBADF);
    test_on_backends(NULL, body, NULL);
    printf("test_net_bb_conn: ok\n");
    return 0;
}
