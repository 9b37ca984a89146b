/* test_dgram.c - the I/O section's calls on datagram and seqpacket
 * sockets, each answer compared with the syscall's on the same queue:
 *
 *   - MSG_WAITALL on a Unix SOCK_SEQPACKET socket takes one record, as
 *     recv(2) does (io_uring's own going on once joined two records, and
 *     with MSG_PEEK peeked the same bytes again; with one record queued it
 *     waited for more): recv, recv with MSG_PEEK, recvmsg;
 *   - a send to a Unix datagram peer whose queue is full returns once the
 *     peer took one, having sent the datagram once (on io_uring aco_rt_send
 *     waited to its deadline and aco_rt_sendmsg said 0 with nothing sent);
 *   - the same to a peer named by address (readiness knows no peer, so a
 *     wait for POLLOUT ends at once): the co waits, the thread does not spin
 *     (its CPU time under half the wall time), -ETIMEDOUT at the deadline;
 *   - the caller's MSG_DONTWAIT on aco_rt_recv and aco_rt_send: -EAGAIN at
 *     once (they once waited to the deadline);
 *   - aco_rt_recvmsg and aco_rt_recv with MSG_ERRQUEUE on an empty error
 *     queue: -EAGAIN at once, as recvmsg(2) and recv(2).
 * Buffers in the heap (io_uring takes them) and on the co's stack; both
 * backends.
 */
#define _GNU_SOURCE
#include "rt_test.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>

static int64_t thread_cpu(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void seqpacket(char* b) {
    int sv[2];
    CHECK_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
    CHECK_EQ(send(sv[1], "abc", 3, 0), 3);
    CHECK_EQ(send(sv[1], "defgh", 5, 0), 5);
    CHECK_EQ(recv(sv[0], b, 100, MSG_WAITALL | MSG_PEEK), 3);         /* the kernel's */
    memset(b, 0, 100);
    CHECK_EQ(aco_rt_recv(sv[0], b, 100, MSG_WAITALL | MSG_PEEK, aco_rt_in_ms(1000)), 3);
    CHECK_EQ(memcmp(b, "abc", 4), 0);
    CHECK_EQ(aco_rt_recv(sv[0], b, 100, MSG_WAITALL, aco_rt_in_ms(1000)), 3);
    CHECK_EQ(memcmp(b, "abc", 3), 0);
    struct iovec v = {b, 100};
    struct msghdr m = {.msg_iov = &v, .msg_iovlen = 1};
    CHECK_EQ(send(sv[1], "ij", 2, 0), 2);
    CHECK_EQ(aco_rt_recvmsg(sv[0], &m, MSG_WAITALL, aco_rt_in_ms(1000)), 5);
    CHECK_EQ(memcmp(b, "defgh", 5), 0);
    int64_t t0 = aco_rt_now();          /* one record queued: at once */
    CHECK_EQ(aco_rt_recv(sv[0], b, 100, MSG_WAITALL, aco_rt_in_ms(2000)), 2);
    CHECK_LT(aco_rt_now() - t0, 1000 * MS);
    close(sv[0]);
    close(sv[1]);
}

typedef struct {
    int r;              /* the receiver */
    int taken;
} drain_t;

static void drainer_co(void* arg) {
    drain_t* d = arg;
    CHECK_EQ(aco_rt_sleep(100 * MS), 0);
    char c;
    CHECK_EQ(recv(d->r, &c, 1, MSG_DONTWAIT), 1);
    d->taken = 1;
}

/* The receiver's queue filled by s: the count. */
static int fill(int s, const struct sockaddr_un* a, int connected) {
    int n = 0;
    while ((connected ? send(s, "f", 1, MSG_DONTWAIT)
                      : sendto(s, "f", 1, MSG_DONTWAIT, (const struct sockaddr*)a, sizeof(*a))) == 1)
        n++;
    CHECK_EQ(errno, EAGAIN);
    return n;
}

/* A named receiver r, a sender s (connected to it if connected), the
 * receiver's queue filled: the count. */
static int full_peer(int* r, int* s, struct sockaddr_un* a, int connected) {
    *r = socket(AF_UNIX, SOCK_DGRAM, 0);
    *s = socket(AF_UNIX, SOCK_DGRAM, 0);
    CHECK(*r >= 0 && *s >= 0);
    memset(a, 0, sizeof(*a));
    a->sun_family = AF_UNIX;
    snprintf(a->sun_path, sizeof(a->sun_path), "/tmp/test_dgram.%d", (int)getpid());
    unlink(a->sun_path);
    CHECK_EQ(bind(*r, (struct sockaddr*)a, sizeof(*a)), 0);
    if (connected) CHECK_EQ(connect(*s, (struct sockaddr*)a, sizeof(*a)), 0);
    return fill(*s, a, connected);
}

/* What r holds: fillers f and the datagram 'W'. */
static void count(int r, int* f, int* w) {
    char c;
    *f = *w = 0;
    while (recv(r, &c, 1, MSG_DONTWAIT) == 1) (c == 'W' ? (*w)++ : (*f)++);
}

static void full_send(char* b, int connected, int use_msg) {
    int r, s, f, w;
    struct sockaddr_un a;
    int n = full_peer(&r, &s, &a, connected);
    b[0] = 'W';
    struct iovec v = {b, 1};
    struct msghdr m = {.msg_name = connected ? NULL : &a,
                       .msg_namelen = connected ? 0 : sizeof(a),
                       .msg_iov = &v, .msg_iovlen = 1};
    /* nobody takes one: the deadline, the thread asleep meanwhile */
    int64_t t0 = aco_rt_now(), c0 = thread_cpu();
    ssize_t k = use_msg || !connected ? aco_rt_sendmsg(s, &m, 0, aco_rt_in_ms(300))
                                      : aco_rt_send(s, b, 1, 0, aco_rt_in_ms(300));
    int64_t wall = aco_rt_now() - t0, cpu = thread_cpu() - c0;
    CHECK_EQ(k, -ETIMEDOUT);
    CHECK_LT(cpu, wall / 2);
    count(r, &f, &w);
    CHECK_EQ(f, n);
    CHECK_EQ(w, 0);
    /* full again; the receiver takes one after 100 ms: sent, once */
    CHECK_EQ(fill(s, &a, connected), n);
    drain_t d = {r, 0};
    aco_rt_co_t* dc = aco_rt_spawn(NULL, drainer_co, &d);
    CHECK(dc != NULL);
    t0 = aco_rt_now();
    c0 = thread_cpu();
    k = use_msg || !connected ? aco_rt_sendmsg(s, &m, 0, aco_rt_in_ms(3000))
                              : aco_rt_send(s, b, 1, 0, aco_rt_in_ms(3000));
    wall = aco_rt_now() - t0;
    cpu = thread_cpu() - c0;
    CHECK_EQ(k, 1);
    CHECK_LT(cpu, wall / 2);
    CHECK_EQ(aco_rt_join(dc, -1), 0);
    CHECK(d.taken);
    count(r, &f, &w);
    CHECK_EQ(w, 1);
    close(r);
    close(s);
    unlink(a.sun_path);
}

static void dontwait(char* b) {
    int u = socket(AF_INET, SOCK_DGRAM, 0);
    CHECK_GE(u, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    CHECK_EQ(bind(u, (struct sockaddr*)&a, sizeof(a)), 0);
    CHECK_EQ(recv(u, b, 16, MSG_DONTWAIT), -1);
    int want = -errno;
    int64_t t0 = aco_rt_now();
    CHECK_EQ(aco_rt_recv(u, b, 16, MSG_DONTWAIT, aco_rt_in_ms(2000)), want);
    CHECK_LT(aco_rt_now() - t0, 1000 * MS);
    /* MSG_ERRQUEUE: nothing there, never a wait */
    int on = 1;
    CHECK_EQ(setsockopt(u, IPPROTO_IP, IP_RECVERR, &on, sizeof(on)), 0);
    char ctl[256];
    struct iovec v = {b, 16};
    struct msghdr m = {.msg_iov = &v, .msg_iovlen = 1, .msg_control = ctl,
                       .msg_controllen = sizeof(ctl)};
    CHECK_EQ(recvmsg(u, &m, MSG_ERRQUEUE), -1);
    want = -errno;
    m.msg_controllen = sizeof(ctl);
    t0 = aco_rt_now();
    CHECK_EQ(aco_rt_recvmsg(u, &m, MSG_ERRQUEUE, aco_rt_in_ms(2000)), want);
    CHECK_LT(aco_rt_now() - t0, 1000 * MS);
    CHECK_EQ(recv(u, b, 16, MSG_ERRQUEUE), -1);
    want = -errno;
    t0 = aco_rt_now();
    CHECK_EQ(aco_rt_recv(u, b, 16, MSG_ERRQUEUE, aco_rt_in_ms(2000)), want);
    CHECK_LT(aco_rt_now() - t0, 1000 * MS);
    close(u);
    /* a stream socket whose peer's buffer is full: a send says EAGAIN */
    int sv[2];
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    static char fill[65536];
    while (send(sv[0], fill, sizeof(fill), MSG_DONTWAIT) > 0) {}
    t0 = aco_rt_now();
    CHECK_EQ(aco_rt_send(sv[0], b, 16, MSG_DONTWAIT, aco_rt_in_ms(2000)), -EAGAIN);
    CHECK_LT(aco_rt_now() - t0, 1000 * MS);
    close(sv[0]);
    close(sv[1]);
}

static void body_co(void* arg) {
    (void)arg;
    char on_stack[128];
    char* heap = malloc(128);
    CHECK(heap != NULL);
    for (int i = 0; i < 2; i++) {
        char* b = i ? on_stack : heap;
        seqpacket(b);
        for (int connected = 0; connected < 2; connected++)
            for (int use_msg = 0; use_msg < 2; use_msg++) full_send(b, connected, use_msg);
        dontwait(b);
    }
    free(heap);
}

static void body(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    test_go(s, body_co, NULL);
}

int main(void) {
    test_on_backends(NULL, body, NULL);
    printf("test_dgram: ok\n");
    return 0;
}
