/* test_uring_old.c - io_uring as Linux 5.11 to 5.18 have it: an
 * ASYNC_CANCEL takes no key (IORING_ASYNC_CANCEL_FD, _ALL, _ANY came in
 * 5.19, with the SOCKET operation), and any flag makes it fail with
 * EINVAL.  aco_rt_close must still end every wait on the descriptor with
 * -EBADF (aco_rt_poll: POLLNVAL) at once, as the header promises.
 *
 * The kernel here is newer; the program is linked with -Wl,--wrap for
 * liburing's probe and submit calls (make.sh), so that each of the
 * runtime's calls comes here first: the probe loses SOCKET and every later
 * operation, as on 5.18, and a cancel with a key, submitted, is made one
 * the kernel refuses (ioprio 1: EINVAL, as 5.18 says for a key) and
 * counted.  Each wait (read, recv, a lent receive, wait, poll, accept)
 * begins with a deadline 5 s away; another co closes the descriptor 20 ms
 * later; the wait must end with -EBADF within a second, and no keyed cancel
 * may have been sent.  On the epoll backend the same checks hold (nothing
 * of io_uring is used).
 */
#define _GNU_SOURCE
#include "rt_test.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

/* ------------------------------------------------------------------------ */
/* A 5.18 kernel's io_uring, by wrapping liburing                           */
/* ------------------------------------------------------------------------ */

static int probes;              /* the runtime looked at the operations */
static int keyed;               /* cancels with a key it submitted */

#ifdef ACO_RT_HAVE_URING       /* (else only the epoll backend: no wrap) */
#include <liburing.h>

struct io_uring_probe* __real_io_uring_get_probe_ring(struct io_uring* ring);
struct io_uring_probe* __wrap_io_uring_get_probe_ring(struct io_uring* ring) {
    struct io_uring_probe* p = __real_io_uring_get_probe_ring(ring);
    if (p) {
        for (unsigned op = IORING_OP_SOCKET; op < p->ops_len; op++)
            p->ops[op].flags &= (__u16)~IO_URING_OP_SUPPORTED;
        if (p->last_op >= IORING_OP_SOCKET) p->last_op = IORING_OP_SOCKET - 1;
        __atomic_add_fetch(&probes, 1, __ATOMIC_RELAXED);
    }
    return p;
}

/* The entries queued since the last submit: a keyed cancel among them is
 * counted and made to fail as 5.18 fails it. */
static void age(struct io_uring* ring) {
    struct io_uring_sq* sq = &ring->sq;
    for (unsigned i = sq->sqe_head; i != sq->sqe_tail; i++) {
        struct io_uring_sqe* e = &sq->sqes[i & sq->ring_mask];
        if (e->opcode == IORING_OP_ASYNC_CANCEL && e->cancel_flags) {
            e->ioprio = 1;
            __atomic_add_fetch(&keyed, 1, __ATOMIC_RELAXED);
        }
    }
}

int __real_io_uring_submit(struct io_uring* ring);
int __wrap_io_uring_submit(struct io_uring* ring) {
    age(ring);
    return __real_io_uring_submit(ring);
}

int __real_io_uring_submit_and_wait_timeout(struct io_uring* ring, struct io_uring_cqe** cqe,
                                            unsigned n, struct __kernel_timespec* ts,
                                            sigset_t* sigmask);
int __wrap_io_uring_submit_and_wait_timeout(struct io_uring* ring, struct io_uring_cqe** cqe,
                                            unsigned n, struct __kernel_timespec* ts,
                                            sigset_t* sigmask) {
    age(ring);
    return __real_io_uring_submit_and_wait_timeout(ring, cqe, n, ts, sigmask);
}

int __real_io_uring_submit_and_get_events(struct io_uring* ring);
int __wrap_io_uring_submit_and_get_events(struct io_uring* ring) {
    age(ring);
    return __real_io_uring_submit_and_get_events(ring);
}
#endif

/* ------------------------------------------------------------------------ */
/* Waits that a close ends                                                  */
/* ------------------------------------------------------------------------ */

enum { W_READ, W_RECV, W_LEND, W_WAIT, W_POLL, W_ACCEPT, W_N };
static const char* const w_names[W_N] = {"read", "recv", "recv_lend", "wait", "poll", "accept"};

typedef struct {
    int kind, fd;
    long rc;
    short revents;
    int64_t took;
} wait_t;

static void waiter(void* arg) {
    wait_t* w = arg;
    char buf[64];
    const char* d;
    struct pollfd p = {w->fd, POLLIN, 0};
    int64_t t0 = aco_rt_now(), dl = t0 + 5000 * MS;
    switch (w->kind) {
    case W_READ:   w->rc = aco_rt_read(w->fd, buf, sizeof buf, dl); break;
    case W_RECV:   w->rc = aco_rt_recv(w->fd, buf, sizeof buf, 0, dl); break;
    case W_LEND:   w->rc = aco_rt_recv_lend(w->fd, &d, dl); break;
    case W_WAIT:   w->rc = aco_rt_wait(w->fd, POLLIN, dl); break;
    case W_POLL:   w->rc = aco_rt_poll(&p, 1, dl); w->revents = p.revents; break;
    case W_ACCEPT: w->rc = aco_rt_accept(w->fd, NULL, NULL, 0, dl); break;
    }
    w->took = aco_rt_now() - t0;
}

static void closer(void* arg) {
    wait_t* w = arg;
    CHECK_EQ(aco_rt_sleep(20 * MS), 0);
    CHECK_EQ(aco_rt_close(w->fd), 0);
}

/* A listening socket on loopback, and a connected pair through it. */
static int listener(void) {
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    CHECK(l >= 0);
    CHECK_EQ(bind(l, (struct sockaddr*)&a, sizeof a), 0);
    CHECK_EQ(listen(l, 4), 0);
    return l;
}

static void tcp_pair(int sv[2]) {
    int l = listener();
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    CHECK_EQ(getsockname(l, (struct sockaddr*)&a, &len), 0);
    sv[0] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(sv[0] >= 0);
    CHECK_EQ(connect(sv[0], (struct sockaddr*)&a, sizeof a), 0);
    sv[1] = accept4(l, NULL, NULL, SOCK_CLOEXEC);
    CHECK(sv[1] >= 0);
    close(l);
}

static int one_backend(int b) {
    for (int k = 0; k < W_N; k++) {
        int sv[2] = {-1, -1};
        wait_t w = {.kind = k, .rc = 1};
        if (k == W_ACCEPT) {
            w.fd = listener();
        } else {
            tcp_pair(sv);
            w.fd = sv[1];
        }
        aco_rt_sched_t* s = test_sched_on(b, NULL);
        aco_rt_detach(aco_rt_spawn(s, waiter, &w));
        aco_rt_detach(aco_rt_spawn(s, closer, &w));
        test_run(s);
        aco_rt_sched_free(s);
        if (k == W_POLL) {
            CHECK_EQ(w.rc, 1);
            CHECK_EQ(w.revents, POLLNVAL);
        } else {
            CHECK_EQ(w.rc, -EBADF);
        }
        if (w.took >= 1000 * MS)
            fprintf(stderr, "[%s] %s: the close ended the wait after %lld ms\n",
                    test_backend_str(b), w_names[k], (long long)(w.took / MS));
        CHECK_LT(w.took, 1000 * MS);
        if (sv[0] >= 0) close(sv[0]);
    }
    CHECK_EQ(__atomic_load_n(&keyed, __ATOMIC_RELAXED), 0);
    if (b == ACO_RT_BACKEND_URING) CHECK_GT(__atomic_load_n(&probes, __ATOMIC_RELAXED), 0);
    return 0;
}

int main(void) {
    test_watchdog();
    test_backends_apart(one_backend);
    printf("test_uring_old: ok\n");
    return 0;
}
