/* test_hook_bb_wait.c - the syscall hooks' waits, written from
 * docs/hooks.md alone: poll, ppoll, select, pselect, epoll_wait with
 * timeouts 0, -1 and small, their revents, sets, counts and the kernel's
 * errors beside the raw system call's; the sleeps (sleep, usleep,
 * nanosleep, clock_nanosleep with its clocks and TIMER_ABSTIME, their
 * errors); getaddrinfo in a co as outside.  Outside cos and in cos (where a
 * ticker co must keep running while another waits).  rt/hook.c linked in. */
#define _GNU_SOURCE
#include "hook_bb.h"

#include <fcntl.h>
#include <netdb.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>


/* a co that writes a byte to fd after 30 ms (in a co) */
static int late_fd;
static void late_writer(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_sleep(30 * MS), 0);
    CHECK_EQ(write(late_fd, "L", 1), 1);
}
static aco_rt_co_t* write_later(int fd) {
    late_fd = fd;
    aco_rt_co_t* co = aco_rt_spawn(NULL, late_writer, NULL);
    CHECK(co != NULL);
    return co;
}

static void case_poll(void) {
    int sv[2];
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    struct pollfd p[3] = {{sv[0], POLLIN, 0}, {-1, POLLIN, 0}, {999999, POLLIN, 0}};
    struct pollfd k[3];
    memcpy(k, p, sizeof(p));
    /* timeout 0: one is POLLNVAL */
    SAME(RES(poll(p, 3, 0)), RES(syscall(SYS_poll, k, 3, 0)));
    for (int i = 0; i < 3; i++) CHECK_EQ(p[i].revents, k[i].revents);
    CHECK_EQ(p[2].revents, POLLNVAL);
    /* small: 0 after it */
    int64_t t0 = aco_rt_now();
    IS(RES(poll(p, 2, 40)), 0, 0);
    CHECK_GE(aco_rt_now() - t0, 40 * MS);
    IS(RES(poll(NULL, 0, 20)), 0, 0);
    /* POLLOUT at once, the count of entries */
    struct pollfd q[2] = {{sv[0], POLLIN | POLLOUT, 0}, {sv[1], POLLOUT, 0}};
    IS(RES(poll(q, 2, -1)), 2, 0);
    CHECK_EQ(q[0].revents, POLLOUT);
    /* -1 and a negative other than -1: wait for good */
    if (in_co()) {
        aco_rt_co_t* co = write_later(sv[1]);
        struct pollfd r = {sv[0], POLLIN, 0};
        IS(RES(poll(&r, 1, -1)), 1, 0);
        CHECK_EQ(r.revents, POLLIN);
        CHECK_EQ(aco_rt_join(co, -1), 0);
        char c;
        CHECK_EQ(read(sv[0], &c, 1), 1);
        co = write_later(sv[1]);
        r.revents = 0;
        IS(RES(poll(&r, 1, -7)), 1, 0);
        CHECK_EQ(aco_rt_join(co, -1), 0);
        CHECK_EQ(read(sv[0], &c, 1), 1);
    }
    /* POLLHUP and POLLRDHUP when the peer goes */
    int sp[2];
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sp), 0);
    close(sp[1]);
    struct pollfd h = {sp[0], POLLIN | POLLRDHUP, 0}, hk = h;
    SAME(RES(poll(&h, 1, 0)), RES(syscall(SYS_poll, &hk, 1, 0)));
    CHECK_EQ(h.revents, hk.revents);
    h.revents = 0;
    IS(RES(poll(&h, 1, -1)), 1, 0);
    CHECK_EQ(h.revents, hk.revents);
    close(sp[0]);
    /* more entries than RLIMIT_NOFILE: EINVAL (not under memcheck, which
     * shows the program a lower limit than the kernel's) */
#ifndef ACO_USE_VALGRIND
    struct rlimit rl;
    CHECK_EQ(getrlimit(RLIMIT_NOFILE, &rl), 0);
    if (rl.rlim_cur < 100000) {
        size_t n = rl.rlim_cur + 1;
        struct pollfd* big = calloc(n, sizeof(*big));
        for (size_t i = 0; i < n; i++) big[i].fd = -1;
        SAME(RES(poll(big, n, 0)), RES(syscall(SYS_poll, big, n, 0)));
        free(big);
    }
#endif
    /* ppoll: NULL timeout waits; a bad timespec: EINVAL */
    struct timespec bad = {0, 2000000000L};
    struct pollfd r = {sv[0], POLLIN, 0}, rk = r;
    SAME(RES(ppoll(&r, 1, &bad, NULL)), RES(syscall(SYS_ppoll, &rk, 1, &bad, NULL, 8)));
    struct timespec neg = {-1, 0};
    SAME(RES(ppoll(&r, 1, &neg, NULL)), RES(syscall(SYS_ppoll, &rk, 1, &neg, NULL, 8)));
    struct timespec ts = {0, 30 * 1000000};
    t0 = aco_rt_now();
    IS(RES(ppoll(&r, 1, &ts, NULL)), 0, 0);
    CHECK_GE(aco_rt_now() - t0, 30 * MS);
    CHECK_EQ(ts.tv_sec, 0);                 /* glibc's ppoll keeps it */
    CHECK_EQ(ts.tv_nsec, 30 * 1000000);
    struct timespec z = {0, 0};
    IS(RES(ppoll(q, 2, &z, NULL)), 2, 0);
    if (in_co()) {
        aco_rt_co_t* co = write_later(sv[1]);
        r.revents = 0;
        IS(RES(ppoll(&r, 1, NULL, NULL)), 1, 0);
        CHECK_EQ(aco_rt_join(co, -1), 0);
        char c;
        CHECK_EQ(read(sv[0], &c, 1), 1);
    }
    close(sv[0]);
    close(sv[1]);
}

static void case_select(void) {
    int sv[2];
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    int nfds = (sv[0] > sv[1] ? sv[0] : sv[1]) + 1;
    fd_set r, w, rk, wk;
    /* timeout 0 */
    FD_ZERO(&r); FD_ZERO(&w);
    FD_SET(sv[0], &r); FD_SET(sv[0], &w);
    rk = r; wk = w;
    struct timeval tv = {0, 0}, tk = {0, 0};
    SAME(RES(select(nfds, &r, &w, NULL, &tv)), RES(syscall(SYS_select, nfds, &rk, &wk, NULL, &tk)));
    CHECK_EQ(memcmp(&r, &rk, sizeof(r)), 0);
    CHECK_EQ(memcmp(&w, &wk, sizeof(w)), 0);
    CHECK(!FD_ISSET(sv[0], &r));
    CHECK(FD_ISSET(sv[0], &w));
    /* small: 0, the sets cleared, the timeval holding what is left (0) */
    FD_ZERO(&r); FD_SET(sv[0], &r);
    tv = (struct timeval){0, 40000};
    int64_t t0 = aco_rt_now();
    IS(RES(select(nfds, &r, NULL, NULL, &tv)), 0, 0);
    CHECK_GE(aco_rt_now() - t0, 40 * MS);
    CHECK(!FD_ISSET(sv[0], &r));
    CHECK_EQ(tv.tv_sec, 0);
    CHECK_EQ(tv.tv_usec, 0);
    /* ready at once: the time left is what the kernel leaves (about all) */
    FD_ZERO(&w); FD_SET(sv[0], &w);
    tv = (struct timeval){5, 0};
    IS(RES(select(nfds, NULL, &w, NULL, &tv)), 1, 0);
    CHECK(tv.tv_sec >= 4 && tv.tv_sec <= 5);
    /* errors: nfds < 0, a bad timeval, a set with a closed number */
    FD_ZERO(&r); FD_SET(sv[0], &r);
    rk = r;
    tv = (struct timeval){0, 0};
    tk = tv;
#ifndef ACO_USE_VALGRIND     /* memcheck reads the sets of a negative nfds */
    SAME(RES(select(-1, &r, NULL, NULL, &tv)), RES(syscall(SYS_select, -1, &rk, NULL, NULL, &tk)));
#endif
    struct timeval badtv = {0, -1}, badk = {0, -1};
    SAME(RES(select(nfds, &r, NULL, NULL, &badtv)), RES(syscall(SYS_select, nfds, &rk, NULL, NULL, &badk)));
    int spare = dup(sv[0]);
    close(spare);
    FD_ZERO(&r); FD_SET(spare, &r);
    rk = r;
    tv = (struct timeval){0, 0};
    tk = tv;
    int n2 = spare + 1;
    SAME(RES(select(n2, &r, NULL, NULL, &tv)), RES(syscall(SYS_select, n2, &rk, NULL, NULL, &tk)));
    /* NULL time, and a wake from another co */
    if (in_co()) {
        aco_rt_co_t* co = write_later(sv[1]);
        FD_ZERO(&r); FD_SET(sv[0], &r);
        IS(RES(select(nfds, &r, NULL, NULL, NULL)), 1, 0);
        CHECK(FD_ISSET(sv[0], &r));
        CHECK_EQ(aco_rt_join(co, -1), 0);
        char c;
        CHECK_EQ(read(sv[0], &c, 1), 1);
    }
    /* pselect: the timespec is kept; a bad one EINVAL */
    struct timespec ts = {0, 30 * 1000000};
    FD_ZERO(&r); FD_SET(sv[0], &r);
    t0 = aco_rt_now();
    IS(RES(pselect(nfds, &r, NULL, NULL, &ts, NULL)), 0, 0);
    CHECK_GE(aco_rt_now() - t0, 30 * MS);
    CHECK_EQ(ts.tv_nsec, 30 * 1000000);
    struct timespec bts = {0, 1000000000L};
    FD_ZERO(&r); FD_SET(sv[0], &r);
    IS(RES(pselect(nfds, &r, NULL, NULL, &bts, NULL)), -1, EINVAL);
    /* select with nothing: a sleep */
    tv = (struct timeval){0, 20000};
    t0 = aco_rt_now();
    IS(RES(select(0, NULL, NULL, NULL, &tv)), 0, 0);
    CHECK_GE(aco_rt_now() - t0, 20 * MS);
    close(sv[0]);
    close(sv[1]);
}

static void case_epoll(void) {
    int sv[2];
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    CHECK_GE(ep, 0);
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 77};
    CHECK_EQ(epoll_ctl(ep, EPOLL_CTL_ADD, sv[0], &ev), 0);
    struct epoll_event out[4];
    IS(RES(epoll_wait(ep, out, 4, 0)), 0, 0);
    int64_t t0 = aco_rt_now();
    IS(RES(epoll_wait(ep, out, 4, 40)), 0, 0);
    CHECK_GE(aco_rt_now() - t0, 40 * MS);
    if (in_co()) {
        aco_rt_co_t* co = write_later(sv[1]);
        IS(RES(epoll_wait(ep, out, 4, -1)), 1, 0);
        CHECK_EQ(out[0].data.u64, 77);
        CHECK_EQ(out[0].events, EPOLLIN);
        CHECK_EQ(aco_rt_join(co, -1), 0);
        char c;
        CHECK_EQ(read(sv[0], &c, 1), 1);
        /* a timeout that ends with nothing */
        t0 = aco_rt_now();
        IS(RES(epoll_pwait(ep, out, 4, 30, NULL)), 0, 0);
        CHECK_GE(aco_rt_now() - t0, 30 * MS);
    }
    CHECK_EQ(write(sv[1], "x", 1), 1);
    IS(RES(epoll_wait(ep, out, 4, 0)), 1, 0);
    /* errors beside the kernel's */
    SAME(RES(epoll_wait(ep, out, 0, 0)), RES(syscall(SYS_epoll_wait, ep, out, 0, 0)));
#ifndef ACO_USE_VALGRIND     /* memcheck checks the array of a negative count */
    volatile int negm = -1;
    SAME(RES(epoll_wait(ep, out, negm, 0)), RES(syscall(SYS_epoll_wait, ep, out, -1, 0)));
#endif
    SAME(RES(epoll_wait(sv[0], out, 4, 0)), RES(syscall(SYS_epoll_wait, sv[0], out, 4, 0)));
    SAME(RES(epoll_wait(999999, out, 4, 0)), RES(syscall(SYS_epoll_wait, 999999, out, 4, 0)));
    SAME(RES(epoll_wait(sv[0], out, 4, -1)), RES(syscall(SYS_epoll_wait, sv[0], out, 4, 0)));
    SAME(RES(epoll_wait(999999, out, 4, 50)), RES(syscall(SYS_epoll_wait, 999999, out, 4, 0)));
    close(ep);
    close(sv[0]);
    close(sv[1]);
}

static void case_sleeps(void) {
    int64_t t0 = aco_rt_now();
    IS(RES(usleep(20000)), 0, 0);
    CHECK_GE(aco_rt_now() - t0, 20 * MS);
    IS(RES(usleep(0)), 0, 0);
    IS(RES(sleep(0)), 0, 0);
    struct timespec ts = {0, 20 * 1000000}, rem = {9, 9};
    t0 = aco_rt_now();
    IS(RES(nanosleep(&ts, &rem)), 0, 0);
    CHECK_GE(aco_rt_now() - t0, 20 * MS);
    /* errors: EINVAL for a bad time, beside the kernel's */
    struct timespec bad = {0, 1000000000L}, neg = {-1, 0}, negn = {0, -1};
    SAME(RES(nanosleep(&bad, NULL)), RES(syscall(SYS_nanosleep, &bad, NULL)));
    SAME(RES(nanosleep(&neg, NULL)), RES(syscall(SYS_nanosleep, &neg, NULL)));
    SAME(RES(nanosleep(&negn, NULL)), RES(syscall(SYS_nanosleep, &negn, NULL)));
    /* clock_nanosleep returns the error, errno untouched */
    errno = 1234;
    CHECK_EQ(clock_nanosleep(CLOCK_MONOTONIC, 0, &bad, NULL), EINVAL);
    CHECK_EQ(errno, 1234);
    CHECK_EQ(clock_nanosleep(CLOCK_MONOTONIC, 0, &neg, NULL), EINVAL);
    CHECK_EQ(clock_nanosleep(CLOCK_THREAD_CPUTIME_ID, 0, &ts, NULL), EINVAL);   /* POSIX, glibc */
    CHECK_EQ(errno, 1234);
    int kr = (int)syscall(SYS_clock_nanosleep, 12345, 0, &ts, NULL) == 0 ? 0 : errno;
    errno = 1234;
    CHECK_EQ(clock_nanosleep(12345, 0, &ts, NULL), kr);
    CHECK_EQ(errno, 1234);
    /* relative on each clock; absolute in the past: at once; absolute
     * ahead on CLOCK_REALTIME and CLOCK_MONOTONIC */
    static const clockid_t clocks[] = {CLOCK_MONOTONIC, CLOCK_REALTIME, CLOCK_BOOTTIME, CLOCK_TAI};
    for (size_t i = 0; i < sizeof(clocks) / sizeof(clocks[0]); i++) {
        t0 = aco_rt_now();
        CHECK_EQ(clock_nanosleep(clocks[i], 0, &ts, NULL), 0);
        CHECK_GE(aco_rt_now() - t0, 20 * MS);
        struct timespec now;
        CHECK_EQ(clock_gettime(clocks[i], &now), 0);
        struct timespec past = {now.tv_sec - 1, now.tv_nsec};
        t0 = aco_rt_now();
        CHECK_EQ(clock_nanosleep(clocks[i], TIMER_ABSTIME, &past, NULL), 0);
        CHECK_LT(aco_rt_now() - t0, 2000 * MS);
        struct timespec ahead = now;
        ahead.tv_nsec += 30 * 1000000;
        if (ahead.tv_nsec >= 1000000000L) { ahead.tv_sec++; ahead.tv_nsec -= 1000000000L; }
        CHECK_EQ(clock_nanosleep(clocks[i], TIMER_ABSTIME, &ahead, NULL), 0);
        struct timespec after;
        CHECK_EQ(clock_gettime(clocks[i], &after), 0);
        CHECK(after.tv_sec > ahead.tv_sec || (after.tv_sec == ahead.tv_sec && after.tv_nsec >= ahead.tv_nsec));
    }
    /* a process CPU-time clock, absolute in the past: at once, 0 */
    CHECK_EQ(clock_nanosleep(CLOCK_PROCESS_CPUTIME_ID, TIMER_ABSTIME, &(struct timespec){0, 0}, NULL), 0);
}

/* a ticker co keeps running while the main co waits */
static volatile int ticking, ticks;
static void ticker(void* arg) {
    (void)arg;
    while (ticking) {
        CHECK_EQ(aco_rt_sleep(2 * MS), 0);
        ticks++;
    }
}
static void case_thread_free(void) {
    ticking = 1;
    ticks = 0;
    aco_rt_co_t* t = aco_rt_spawn(NULL, ticker, NULL);
    CHECK(t != NULL);
    CHECK_EQ(aco_rt_yield(), 0);
    int before = ticks;
    struct pollfd p = {-1, 0, 0};
    CHECK_EQ(poll(&p, 1, 50), 0);
    CHECK_GT(ticks, before);
    before = ticks;
    CHECK_EQ(usleep(50000), 0);
    CHECK_GT(ticks, before);
    before = ticks;
    struct timespec ts = {0, 50 * 1000000};
    CHECK_EQ(clock_nanosleep(CLOCK_REALTIME, 0, &ts, NULL), 0);
    CHECK_GT(ticks, before);
    before = ticks;
    struct timeval tv = {0, 50000};
    CHECK_EQ(select(0, NULL, NULL, NULL, &tv), 0);
    CHECK_GT(ticks, before);
    ticking = 0;
    CHECK_EQ(aco_rt_join(t, -1), 0);
}

/* getaddrinfo: the same answers in a co as outside */
static char gai_out[4096];
static void gai_describe(char* out, size_t cap) {
    static const struct { const char* host; const char* serv; int flags; int family; } q[] = {
        {"127.0.0.1", "80", AI_NUMERICHOST, AF_UNSPEC},
        {"::1", "443", AI_NUMERICHOST | AI_NUMERICSERV, AF_INET6},
        {"localhost", "7", 0, AF_INET},
        {"not an address", "80", AI_NUMERICHOST, AF_UNSPEC},
        {"127.0.0.1", "nosuchservice-xyz", 0, AF_UNSPEC},
        {"127.0.0.1", "80", 0x12345678, AF_UNSPEC},
        {"127.0.0.1", "80", 0, 9999},
        {NULL, NULL, 0, AF_UNSPEC},
        {NULL, "80", AI_PASSIVE, AF_INET},
    };
    size_t len = 0;
    for (size_t i = 0; i < sizeof(q) / sizeof(q[0]); i++) {
        struct addrinfo h = {0}, *res = NULL;
        h.ai_flags = q[i].flags;
        h.ai_family = q[i].family;
        h.ai_socktype = SOCK_STREAM;
        int r = getaddrinfo(q[i].host, q[i].serv, &h, &res);
        len += (size_t)snprintf(out + len, cap - len, "[%d:%d", (int)i, r);
        for (struct addrinfo* a = res; a; a = a->ai_next) {
            char hb[NI_MAXHOST], sb[NI_MAXSERV];
            CHECK_EQ(getnameinfo(a->ai_addr, a->ai_addrlen, hb, sizeof(hb), sb, sizeof(sb),
                                 NI_NUMERICHOST | NI_NUMERICSERV), 0);
            len += (size_t)snprintf(out + len, cap - len, " %d/%d/%s/%s", a->ai_family,
                                    a->ai_protocol, hb, sb);
        }
        len += (size_t)snprintf(out + len, cap - len, "]");
        if (res) freeaddrinfo(res);
        CHECK_LT(len, cap - 200);
    }
}
static void case_gai(void) {
    char here[4096];
    gai_describe(here, sizeof(here));
    CHECK(strcmp(here, gai_out) == 0 || (fprintf(stderr, "co: %s\nout: %s\n", here, gai_out), 0));
}

static void all_cases(void) {
    case_poll();
    case_select();
    case_epoll();
    case_sleeps();
    case_gai();
}

static void main_co(void* arg) {
    (void)arg;
    all_cases();
    case_thread_free();
}

static void body(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    test_go(s, main_co, NULL);
}

int main(void) {
    if (!aco_rt_hooks_active()) {
        fprintf(stderr, "the hooks are not live\n");
        return 1;
    }
    gai_describe(gai_out, sizeof(gai_out));
    all_cases();
    test_on_backends(NULL, body, NULL);
    printf("test_hook_bb_wait: ok\n");
    return 0;
}
