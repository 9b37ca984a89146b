/* test_matrix.c - every promise across threads: each blocking call of
 * aco_rt.h, ended each way the header names, by a waker on the waiter's own
 * pool thread, on the other pool thread, or on a plain thread outside any
 * scheduler.  A pool of 2 threads; the waiter always runs on thread 0.
 *
 * A cell is (call, end, waker).  It checks the exact result, that it came
 * promptly (the waits that must end otherwise have a 10 s deadline: never
 * -ETIMEDOUT, well before it), that a deadline is never early, that nothing
 * was lost or transferred twice (looked at afterwards from a fresh co), and
 * that aco_rt_pool_wait(DRAIN) then returns 0 within a bound.
 *
 * Ends: the natural one (data, space, a connection, unlock, signal, post,
 * done, send/recv, the co's or the group's end), aco_rt_close of the
 * descriptor (-EBADF), aco_rt_cancel (-ECANCELED), the deadline
 * (-ETIMEDOUT; a sleep returns 0), aco_rt_chan_close (-EPIPE),
 * aco_rt_sched_stop of the waiter's scheduler (the waiter stays parked; the
 * pool runs its scheduler again and a later end reaches it) and
 * aco_rt_pool_wait(CANCEL).
 *
 * Columns left out, by the header's word:
 *  - a deadline has no waker: one cell per call;
 *  - aco_rt_pool_wait is "outside the pool's threads": only from a plain
 *    thread (from a co it is -EDEADLK, checked once);
 *  - the natural end from a plain thread only where it is not a blocking
 *    call or a co's act: I/O (plain system calls), cond_signal, sem_post,
 *    wg_done.  Not: channel send/recv (blocking calls: -EPERM outside a
 *    co), mutex unlock (the caller must hold it), a co's or group's end.
 *
 * Two more, outside the table: sched_stop as aco_rt_sched_run sees it (on
 * a scheduler of the main thread, stopped from its own co, a pool thread,
 * a plain thread), and pool_wait(CANCEL) leaving alone a co spawned at
 * once after it onto a thread that had nothing to cancel.
 *
 * Descriptor numbers are never reused within a pool (a cell's numbers are
 * kept taken by /dev/null until the pool is gone): reuse is another
 * promise, tested in test_io.
 *
 * The backends run at once, a process each: a cell's time is waiting.
 *
 * $ACO_RT_MATRIX_ALL=1: run every cell and count failures instead of
 * stopping at the first; $ACO_RT_MATRIX_LONG_MS: the long deadline (10000);
 * $ACO_RT_MATRIX_ONLY=<call>: only that call's row; $ACO_RT_MATRIX_SKIP=<end>:
 * not that end's column.
 */
#define _GNU_SOURCE
#include "rt_test.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <time.h>

enum { W_SAME, W_OTHER, W_PLAIN, NWAKERS };
enum { E_NATURAL, E_CLOSE, E_CANCEL, E_DEADLINE, E_CHAN_CLOSE, E_STOP, E_POOL_CANCEL, NENDS };
#define B(e) (1u << (e))
#define ENDS_SYNC (B(E_NATURAL) | B(E_CANCEL) | B(E_DEADLINE) | B(E_STOP) | B(E_POOL_CANCEL))
#define ENDS_IO (ENDS_SYNC | B(E_CLOSE))
#define ENDS_CHAN (ENDS_SYNC | B(E_CHAN_CLOSE))
#define ENDS_SLEEP (ENDS_SYNC & ~B(E_NATURAL))

static const char* const waker_name[NWAKERS] = {"same", "other", "plain"};
static const char* const end_name[NENDS] = {"natural", "close", "cancel", "deadline",
                                            "chan_close", "sched_stop", "pool_cancel"};

#define SHORT_NS (100 * MS)         /* the deadline of a deadline cell */
#define SETTLE_NS ((SLOW ? 30 : 10) * MS)   /* for the waiter to park */
#define ANY_FD LONG_MIN             /* a natural result: any descriptor */

static int64_t long_ns = 10000 * MS;
static aco_rt_pool_t* pool;
static int keep_going, failures, cells;
static int devnull;

static aco_rt_sched_t* T(unsigned i) { return aco_rt_pool_sched(pool, i); }

typedef struct cell cell_t;

/* One row: a blocking call and what its ends need. */
typedef struct {
    const char* name;
    unsigned ends;                  /* the ends that apply (B(E_...)) */
    int no_plain_natural;           /* see the top */
    int helper;                     /* H_*: a co the waiter waits on */
    int stop_then;                  /* the end that follows a sched_stop */
    int sleeps;                     /* its deadline end returns 0 */
    long natural;                   /* the natural end's result */
    void (*setup)(cell_t*);         /* main thread, before */
    void (*pre)(cell_t*);           /* the waiter, before the call */
    long (*call)(cell_t*, int64_t deadline);
    void (*after)(cell_t*, long r); /* the waiter, after it */
    void (*natural_end)(cell_t*, int in_co);
    void (*post)(cell_t*);          /* a fresh co of thread 1, after */
} call_t;

enum { H_NONE, H_HOLD, H_TARGET, H_GROUP };

#define MAXFD 12

/* Static: objects other cos use must not live on a co's stack. */
struct cell {
    const call_t* k;
    int end, waker;
    char label[64];
    atomic_int fd[MAXFD];           /* [0]: the waiter's, [1]: its peer */
    atomic_int nfd;
    size_t fill;                    /* bytes put in to make the waiter wait */
    struct sockaddr_in addr;
    aco_rt_mutex_t m;
    aco_rt_cond_t cv;
    aco_rt_sem_t sem, release;      /* release: lets the helper co end */
    aco_rt_wg_t wg;
    aco_rt_chan_t *ch, *ch2;
    aco_rt_case_t cases[2];
    long elem, elem2;
    aco_rt_group_t* g;
    aco_rt_co_t* target;
    _Atomic(aco_rt_co_t*) waiter;
    atomic_int helper_ready, armed, done, released, failed;
    atomic_long result;
    atomic_llong t_call, t_ret;
    char buf[64];
    struct iovec iov[2];
};
static cell_t cell;

static void cell_fail(cell_t* c, int line, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s:%d: [%s] cell %s: ", __FILE__, line, test_backend_label, c->label);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    atomic_store(&c->failed, 1);
}

#define CELL_OP_(c, a, op, b)                                                 \
    do {                                                                      \
        long long a_ = (long long)(a), b_ = (long long)(b);                   \
        if (!(a_ op b_))                                                      \
            cell_fail(c, __LINE__, "%s %s %s failed: %lld vs %lld", #a, #op, #b, a_, b_); \
    } while (0)
#define CELL_EQ(c, a, b) CELL_OP_(c, a, ==, b)
#define CELL_LT(c, a, b) CELL_OP_(c, a, <, b)
#define CELL_GE(c, a, b) CELL_OP_(c, a, >=, b)

static int64_t deadline_long(void) { return aco_rt_now() + long_ns; }

static void pause_ns(int in_co, int64_t ns) {
    if (in_co) {
        aco_rt_sleep(ns);
    } else {
        struct timespec ts = {(time_t)(ns / 1000000000), (long)(ns % 1000000000)};
        nanosleep(&ts, NULL);
    }
}

/* Wait for *f (a co sleeps, a plain thread naps): 0 if it never came. */
static int await_flag(atomic_int* f, int in_co) {
    int64_t end = deadline_long() + long_ns;
    while (!atomic_load(f)) {
        if (aco_rt_now() > end) return 0;
        pause_ns(in_co, MS);
    }
    return 1;
}

static int ended_naturally(const cell_t* c) {
    return c->end == E_NATURAL || (c->end == E_STOP && c->k->stop_then == E_NATURAL);
}

/* ------------------------------------------------------------------------ */
/* Descriptors                                                              */
/* ------------------------------------------------------------------------ */

static void add_fd(cell_t* c, int fd) {
    CHECK_GE(fd, 0);
    int i = atomic_fetch_add(&c->nfd, 1);
    CHECK_LT(i, MAXFD);
    atomic_store(&c->fd[i], fd);
}

static int fd_of(cell_t* c, int i) { return atomic_load(&c->fd[i]); }

/* fd[0] the waiter's end, fd[1] the waker's; non-blocking both. */
static void mk_pipe(cell_t* c, int waiter_reads) {
    int p[2];
    CHECK_EQ(pipe2(p, O_NONBLOCK | O_CLOEXEC), 0);
    add_fd(c, p[waiter_reads ? 0 : 1]);
    add_fd(c, p[waiter_reads ? 1 : 0]);
}

static void mk_socketpair(cell_t* c) {
    int sv[2];
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
    add_fd(c, sv[0]);
    add_fd(c, sv[1]);
}

/* Fill fd[0] until it takes no more: the waiter's write must wait. */
static void fill(cell_t* c) {
    static const char f[4096] = {0};
    for (;;) {
        ssize_t n = write(fd_of(c, 0), f, sizeof(f));
        if (n < 0) {
            CHECK(errno == EAGAIN);
            break;
        }
        c->fill += (size_t)n;
    }
    /* (a socket takes less than a page once nearly full) */
    while (write(fd_of(c, 0), f, 1) == 1) c->fill++;
    CHECK_GT(c->fill, 0);
}

static int tcp_listener(cell_t* c, int backlog) {
    int l = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    CHECK_GE(l, 0);
    memset(&c->addr, 0, sizeof(c->addr));
    c->addr.sin_family = AF_INET;
    c->addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK_EQ(bind(l, (struct sockaddr*)&c->addr, sizeof(c->addr)), 0);
    socklen_t len = sizeof(c->addr);
    CHECK_EQ(getsockname(l, (struct sockaddr*)&c->addr, &len), 0);
    CHECK_EQ(listen(l, backlog), 0);
    return l;
}

/* ------------------------------------------------------------------------ */
/* The rows                                                                 */
/* ------------------------------------------------------------------------ */

static const char MSG[8] = {'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'};
static const char PAYLOAD[16] = "0123456789ABCDE";
static const long ELEM_A = 0xA, ELEM_B = 0xB, ELEM_X = 0x5eed;

static void setup_pipe_r(cell_t* c) { mk_pipe(c, 1); }
static void setup_pipe_w(cell_t* c) { mk_pipe(c, 0); fill(c); }
static void setup_sp_r(cell_t* c) { mk_socketpair(c); }
static void setup_sp_w(cell_t* c) { mk_socketpair(c); fill(c); }

static long call_read(cell_t* c, int64_t dl) { return aco_rt_read(fd_of(c, 0), c->buf, sizeof(c->buf), dl); }
static long call_recv(cell_t* c, int64_t dl) { return aco_rt_recv(fd_of(c, 0), c->buf, sizeof(c->buf), 0, dl); }
static long call_readv(cell_t* c, int64_t dl) {
    c->iov[0] = (struct iovec){c->buf, 3};
    c->iov[1] = (struct iovec){c->buf + 3, sizeof(c->buf) - 3};
    return aco_rt_readv(fd_of(c, 0), c->iov, 2, dl);
}
static long call_write(cell_t* c, int64_t dl) { return aco_rt_write(fd_of(c, 0), PAYLOAD, 16, dl); }
static long call_send(cell_t* c, int64_t dl) { return aco_rt_send(fd_of(c, 0), PAYLOAD, 16, 0, dl); }
static long call_writev(cell_t* c, int64_t dl) {
    c->iov[0] = (struct iovec){(void*)PAYLOAD, 5};
    c->iov[1] = (struct iovec){(void*)(PAYLOAD + 5), 11};
    return aco_rt_writev(fd_of(c, 0), c->iov, 2, dl);
}

static void after_read(cell_t* c, long r) {
    if (r == 8) CELL_EQ(c, memcmp(c->buf, MSG, 8), 0);
}

/* The natural end of a read: 8 bytes on the peer. */
static void put_msg(cell_t* c, int in_co) {
    ssize_t n = in_co ? aco_rt_write(fd_of(c, 1), MSG, 8, deadline_long())
                      : write(fd_of(c, 1), MSG, 8);
    CELL_EQ(c, n, 8);
}

/* The natural end of a write: the peer takes exactly the filler. */
static void take_fill(cell_t* c, int in_co) {
    char b[4096];
    size_t got = 0;
    while (got < c->fill) {
        size_t want = c->fill - got < sizeof(b) ? c->fill - got : sizeof(b);
        ssize_t n = in_co ? aco_rt_read(fd_of(c, 1), b, want, deadline_long())
                          : read(fd_of(c, 1), b, want);
        if (n <= 0) {
            cell_fail(c, __LINE__, "taking the filler: %zd (%s)", n, strerror(errno));
            return;
        }
        got += (size_t)n;
    }
}

/* Nothing left on the waiter's end after a read: the message came once. */
static void post_read(cell_t* c) {
    if (c->end == E_CLOSE) return;      /* (the number is gone) */
    char b[64];
    ssize_t n = read(fd_of(c, 0), b, sizeof(b));
    CELL_EQ(c, n, -1);
    CELL_EQ(c, errno, EAGAIN);
}

/* What the peer holds after a write: the filler, and the payload whole
 * after a natural end (the filler was taken), else nothing of it. */
static void post_write(cell_t* c) {
    char b[4096];
    size_t total = 0, want = ended_naturally(c) ? 16 : c->fill;
    for (;;) {
        ssize_t n = read(fd_of(c, 1), b, sizeof(b));
        if (n <= 0) break;
        if (ended_naturally(c)) {
            CELL_EQ(c, n, 16);
            CELL_EQ(c, memcmp(b, PAYLOAD, 16), 0);
        }
        total += (size_t)n;
    }
    CELL_EQ(c, total, want);
}

/* accept: a loopback listener; the natural end is a connection. */
static void setup_accept(cell_t* c) { add_fd(c, tcp_listener(c, 16)); }
static long call_accept(cell_t* c, int64_t dl) { return aco_rt_accept(fd_of(c, 0), NULL, NULL, SOCK_CLOEXEC, dl); }
static void after_accept(cell_t* c, long r) { if (r >= 0) add_fd(c, (int)r); }
static void connect_in(cell_t* c, int in_co) {
    int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    add_fd(c, s);
    int r = in_co ? aco_rt_connect(s, (struct sockaddr*)&c->addr, sizeof(c->addr), deadline_long())
                  : connect(s, (struct sockaddr*)&c->addr, sizeof(c->addr));
    if (r != 0 && !(r < 0 && !in_co && errno == EINPROGRESS)) cell_fail(c, __LINE__, "connect: %d", r);
}
/* Accepted once: none left. */
static void post_accept(cell_t* c) {
    if (c->end == E_CLOSE) return;
    CELL_EQ(c, accept4(fd_of(c, 0), NULL, NULL, SOCK_NONBLOCK), -1);
    CELL_EQ(c, errno, EAGAIN);
}

/* connect: to a listener whose backlog (0) is full, so the SYN is dropped
 * and the connect waits; the natural end takes the queued connections
 * (the SYN's retransmission then gets in: about 1 s). */
static void setup_connect(cell_t* c) {
    int l = tcp_listener(c, 0);
    int f = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    CHECK_GE(f, 0);
    int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    add_fd(c, s);
    add_fd(c, l);
    add_fd(c, f);
    int r = connect(f, (struct sockaddr*)&c->addr, sizeof(c->addr));
    CHECK(r == 0 || errno == EINPROGRESS);
    struct pollfd p = {f, POLLOUT, 0};
    CHECK_EQ(poll(&p, 1, 5000), 1);
}
static long call_connect(cell_t* c, int64_t dl) {
    return aco_rt_connect(fd_of(c, 0), (struct sockaddr*)&c->addr, sizeof(c->addr), dl);
}
static void accept_all(cell_t* c, int in_co) {
    int64_t end = deadline_long();
    while (!atomic_load(&c->done) && aco_rt_now() < end) {
        int a = accept4(fd_of(c, 1), NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (a >= 0) add_fd(c, a);
        else pause_ns(in_co, 5 * MS);
    }
}

/* wait: readiness, nothing taken. */
static long call_wait(cell_t* c, int64_t dl) { return aco_rt_wait(fd_of(c, 0), POLLIN, dl); }
static void post_wait(cell_t* c) {
    char b[64];
    ssize_t n = read(fd_of(c, 0), b, sizeof(b));
    if (ended_naturally(c)) {
        CELL_EQ(c, n, 8);
    } else if (c->end != E_CLOSE) {
        CELL_EQ(c, n, -1);
        CELL_EQ(c, errno, EAGAIN);
    }
}

static long call_sleep(cell_t* c, int64_t dl) { (void)c; return aco_rt_sleep(dl - aco_rt_now()); }
static long call_sleep_until(cell_t* c, int64_t dl) { (void)c; return aco_rt_sleep_until(dl); }

/* The helper co (mutex holder, join target, group member) ends when
 * released; for the natural end the waker releases it. */
static void release(cell_t* c, int in_co) {
    (void)in_co;
    if (!atomic_exchange(&c->released, 1)) aco_rt_sem_post(&c->release);
}

static long call_join(cell_t* c, int64_t dl) { return aco_rt_join(c->target, dl); }
static void after_join(cell_t* c, long r) {
    if (r != 0) CELL_EQ(c, aco_rt_detach(c->target), 0);   /* (its handle stayed valid) */
}

static long call_lock(cell_t* c, int64_t dl) { return aco_rt_mutex_lock(&c->m, dl); }
static void after_lock(cell_t* c, long r) { if (r == 0) CELL_EQ(c, aco_rt_mutex_unlock(&c->m), 0); }
/* Nobody holds it afterwards. */
static void post_mutex(cell_t* c) {
    CELL_EQ(c, aco_rt_mutex_trylock(&c->m), 0);
    CELL_EQ(c, aco_rt_mutex_unlock(&c->m), 0);
}

static void pre_cond(cell_t* c) { CELL_EQ(c, aco_rt_mutex_lock(&c->m, -1), 0); }
static long call_cond(cell_t* c, int64_t dl) { return aco_rt_cond_wait(&c->cv, &c->m, dl); }
/* It holds m again, also after a failed wait. */
static void after_cond(cell_t* c, long r) { (void)r; CELL_EQ(c, aco_rt_mutex_unlock(&c->m), 0); }
static void signal_cond(cell_t* c, int in_co) {
    if (in_co) {
        /* with m held the waiter is queued: the signal cannot come early */
        CELL_EQ(c, aco_rt_mutex_lock(&c->m, deadline_long()), 0);
        aco_rt_cond_signal(&c->cv);
        CELL_EQ(c, aco_rt_mutex_unlock(&c->m), 0);
        return;
    }
    /* a plain thread cannot take m: it signals until the waiter is done
     * (the settle time makes the first one count, as a rule) */
    int64_t end = deadline_long();
    do {
        aco_rt_cond_signal(&c->cv);
        pause_ns(0, 2 * MS);
    } while (!atomic_load(&c->done) && aco_rt_now() < end);
}

static long call_sem(cell_t* c, int64_t dl) { return aco_rt_sem_wait(&c->sem, dl); }
static void post_sem_end(cell_t* c, int in_co) { (void)in_co; aco_rt_sem_post(&c->sem); }
/* Taken once: none left. */
static void post_sem(cell_t* c) { CELL_EQ(c, aco_rt_sem_trywait(&c->sem), -EAGAIN); }

static void setup_wg(cell_t* c) { CHECK_EQ(aco_rt_wg_add(&c->wg, 1), 0); }
static long call_wg(cell_t* c, int64_t dl) { return aco_rt_wg_wait(&c->wg, dl); }
static void wg_end(cell_t* c, int in_co) { (void)in_co; CELL_EQ(c, aco_rt_wg_done(&c->wg), 0); }
static void post_wg(cell_t* c) {
    CELL_EQ(c, aco_rt_wg_wait(&c->wg, 0), ended_naturally(c) ? 0 : -ETIMEDOUT);
}

static void setup_chans(cell_t* c) {
    CHECK((c->ch = aco_rt_chan_new(sizeof(long), 1)) != NULL);
    CHECK((c->ch2 = aco_rt_chan_new(sizeof(long), 1)) != NULL);
}
/* A full channel: A is in. */
static void pre_fill_ch(cell_t* c) { CELL_EQ(c, aco_rt_chan_send(c->ch, &ELEM_A, 0), 0); }
static void pre_fill_ch2(cell_t* c) { CELL_EQ(c, aco_rt_chan_send(c->ch2, &ELEM_A, 0), 0); }
static long call_chan_send(cell_t* c, int64_t dl) { return aco_rt_chan_send(c->ch, &ELEM_B, dl); }
static long call_chan_recv(cell_t* c, int64_t dl) { return aco_rt_chan_recv(c->ch, &c->elem, dl); }
static void after_chan_recv(cell_t* c, long r) { if (r == 0) CELL_EQ(c, c->elem, ELEM_X); }
/* select between receiving on an empty channel and sending B on a full
 * one; the case that must go is the first: its index 0, a closed case's
 * -EPIPE folded into the result. */
static long select2(cell_t* c, aco_rt_chan_t* recv_ch, aco_rt_chan_t* send_ch, int send_first,
                    int64_t dl) {
    c->elem2 = ELEM_B;
    c->cases[send_first] = (aco_rt_case_t){recv_ch, ACO_RT_RECV, &c->elem};
    c->cases[!send_first] = (aco_rt_case_t){send_ch, ACO_RT_SEND, &c->elem2};
    int err = 1;
    int r = aco_rt_chan_select(c->cases, 2, &err, dl);
    if (r >= 0) {
        CELL_EQ(c, r, 0);
        return err ? err : r;
    }
    return r;
}
/* The receive goes: ch (empty) gets X. */
static long call_select(cell_t* c, int64_t dl) { return select2(c, c->ch, c->ch2, 0, dl); }
/* The send goes: ch (full of A) gets B once A is taken. */
static long call_select_send(cell_t* c, int64_t dl) { return select2(c, c->ch2, c->ch, 1, dl); }
static void setup_chan0(cell_t* c) { CHECK((c->ch = aco_rt_chan_new(sizeof(long), 0)) != NULL); }
static void send_x(cell_t* c, int in_co) {
    (void)in_co;
    CELL_EQ(c, aco_rt_chan_send(c->ch, &ELEM_X, deadline_long()), 0);
}
static void recv_a(cell_t* c, int in_co) {
    (void)in_co;
    long e = 0;
    CELL_EQ(c, aco_rt_chan_recv(c->ch, &e, deadline_long()), 0);
    CELL_EQ(c, e, ELEM_A);
}
/* (a rendezvous: the waiter's B itself) */
static void recv_b(cell_t* c, int in_co) {
    (void)in_co;
    long e = 0;
    CELL_EQ(c, aco_rt_chan_recv(c->ch, &e, deadline_long()), 0);
    CELL_EQ(c, e, ELEM_B);
}
/* What a channel holds: want[0..n), then it is empty (or closed). */
static void chan_holds(cell_t* c, aco_rt_chan_t* ch, const long* want, int n, int closed) {
    for (int i = 0; i < n; i++) {
        long e = 0;
        CELL_EQ(c, aco_rt_chan_recv(ch, &e, 0), 0);
        CELL_EQ(c, e, want[i]);
    }
    long e = 0;
    CELL_EQ(c, aco_rt_chan_recv(ch, &e, 0), closed ? -EPIPE : -ETIMEDOUT);
}
static void post_chan_send(cell_t* c) {
    static const long b[1] = {0xB}, a[1] = {0xA};
    chan_holds(c, c->ch, ended_naturally(c) ? b : a, 1, c->end == E_CHAN_CLOSE);
}
static void post_chan_recv(cell_t* c) { chan_holds(c, c->ch, NULL, 0, c->end == E_CHAN_CLOSE); }
static void post_select_send(cell_t* c) {
    post_chan_send(c);
    chan_holds(c, c->ch2, NULL, 0, 0);
}
static void post_select(cell_t* c) {
    static const long a[1] = {0xA};
    chan_holds(c, c->ch, NULL, 0, c->end == E_CHAN_CLOSE);
    chan_holds(c, c->ch2, a, 1, 0);
}

static long call_group(cell_t* c, int64_t dl) { return aco_rt_group_join(c->g, dl); }

#define IO_ROW(nm, su, cl, af, ne, po, nat)                                   \
    {.name = nm, .ends = ENDS_IO, .stop_then = E_NATURAL, .natural = nat,     \
     .setup = su, .call = cl, .after = af, .natural_end = ne, .post = po}

static const call_t calls[] = {
    IO_ROW("read", setup_pipe_r, call_read, after_read, put_msg, post_read, 8),
    IO_ROW("recv", setup_sp_r, call_recv, after_read, put_msg, post_read, 8),
    IO_ROW("readv", setup_sp_r, call_readv, after_read, put_msg, post_read, 8),
    IO_ROW("write", setup_pipe_w, call_write, NULL, take_fill, post_write, 16),
    IO_ROW("send", setup_sp_w, call_send, NULL, take_fill, post_write, 16),
    IO_ROW("writev", setup_pipe_w, call_writev, NULL, take_fill, post_write, 16),
    IO_ROW("accept", setup_accept, call_accept, after_accept, connect_in, post_accept, ANY_FD),
    /* (after a stop, a cancel: the natural end takes a SYN retransmission) */
    {.name = "connect", .ends = ENDS_IO, .stop_then = E_CANCEL, .natural = 0,
     .setup = setup_connect, .call = call_connect, .natural_end = accept_all},
    IO_ROW("wait", setup_sp_r, call_wait, NULL, put_msg, post_wait, POLLIN),
    {.name = "sleep", .ends = ENDS_SLEEP, .stop_then = E_CANCEL, .sleeps = 1, .call = call_sleep},
    {.name = "sleep_until", .ends = ENDS_SLEEP, .stop_then = E_CANCEL, .sleeps = 1,
     .call = call_sleep_until},
    {.name = "join", .ends = ENDS_SYNC, .no_plain_natural = 1, .helper = H_TARGET,
     .stop_then = E_NATURAL, .call = call_join, .after = after_join, .natural_end = release},
    {.name = "mutex_lock", .ends = ENDS_SYNC, .no_plain_natural = 1, .helper = H_HOLD,
     .stop_then = E_NATURAL, .call = call_lock, .after = after_lock, .natural_end = release,
     .post = post_mutex},
    {.name = "cond_wait", .ends = ENDS_SYNC, .stop_then = E_NATURAL, .pre = pre_cond,
     .call = call_cond, .after = after_cond, .natural_end = signal_cond, .post = post_mutex},
    {.name = "sem_wait", .ends = ENDS_SYNC, .stop_then = E_NATURAL, .call = call_sem,
     .natural_end = post_sem_end, .post = post_sem},
    {.name = "wg_wait", .ends = ENDS_SYNC, .stop_then = E_NATURAL, .setup = setup_wg,
     .call = call_wg, .natural_end = wg_end, .post = post_wg},
    {.name = "chan_send", .ends = ENDS_CHAN, .no_plain_natural = 1, .stop_then = E_NATURAL,
     .setup = setup_chans, .pre = pre_fill_ch, .call = call_chan_send, .natural_end = recv_a,
     .post = post_chan_send},
    {.name = "chan_recv", .ends = ENDS_CHAN, .no_plain_natural = 1, .stop_then = E_NATURAL,
     .setup = setup_chans, .call = call_chan_recv, .after = after_chan_recv,
     .natural_end = send_x, .post = post_chan_recv},
    {.name = "chan_select", .ends = ENDS_CHAN, .no_plain_natural = 1, .stop_then = E_NATURAL,
     .setup = setup_chans, .pre = pre_fill_ch2, .call = call_select, .after = after_chan_recv,
     .natural_end = send_x,
     .post = post_select},
    {.name = "chan_select_send", .ends = ENDS_CHAN, .no_plain_natural = 1,
     .stop_then = E_NATURAL, .setup = setup_chans, .pre = pre_fill_ch, .call = call_select_send,
     .natural_end = recv_a, .post = post_select_send},
    /* rendezvous: send returns once a receiver has the element */
    {.name = "chan_send0", .ends = ENDS_CHAN, .no_plain_natural = 1, .stop_then = E_NATURAL,
     .setup = setup_chan0, .call = call_chan_send, .natural_end = recv_b, .post = post_chan_recv},
    {.name = "chan_recv0", .ends = ENDS_CHAN, .no_plain_natural = 1, .stop_then = E_NATURAL,
     .setup = setup_chan0, .call = call_chan_recv, .after = after_chan_recv,
     .natural_end = send_x, .post = post_chan_recv},
    {.name = "group_join", .ends = ENDS_SYNC, .no_plain_natural = 1, .helper = H_GROUP,
     .stop_then = E_NATURAL, .call = call_group, .natural_end = release},
};
#define NCALLS ((int)(sizeof(calls) / sizeof(calls[0])))

/* ------------------------------------------------------------------------ */
/* The cell's cos and threads                                               */
/* ------------------------------------------------------------------------ */

static void helper_co(void* arg) {
    cell_t* c = arg;
    if (c->k->helper == H_HOLD) CELL_EQ(c, aco_rt_mutex_lock(&c->m, -1), 0);
    atomic_store(&c->helper_ready, 1);
    int r = aco_rt_sem_wait(&c->release, deadline_long());
    if (r == -ECANCELED && c->end == E_POOL_CANCEL) {
        /* Cancelled with the waiter (on the other thread): hold on, without
         * a switch, until the waiter has its result, so that it is exactly
         * -ECANCELED (not a wake by this co's end or unlock). */
        int64_t end = deadline_long();
        while (!atomic_load(&c->done) && aco_rt_now() < end) sched_yield();
    } else {
        CELL_EQ(c, r, 0);
    }
    if (c->k->helper == H_HOLD) CELL_EQ(c, aco_rt_mutex_unlock(&c->m), 0);
}

static void waiter_co(void* arg) {
    cell_t* c = arg;
    if (c->k->pre) c->k->pre(c);
    int64_t t0 = aco_rt_now();
    atomic_store(&c->t_call, t0);
    atomic_store(&c->armed, 1);
    long r = c->k->call(c, t0 + (c->end == E_DEADLINE ? SHORT_NS : long_ns));
    atomic_store(&c->t_ret, aco_rt_now());
    atomic_store(&c->result, r);
    if (c->k->after) c->k->after(c, r);
    atomic_store(&c->done, 1);
}

static void do_end(cell_t* c, int end, int in_co) {
    switch (end) {
    case E_NATURAL:
        c->k->natural_end(c, in_co);
        break;
    case E_CLOSE:
        CELL_EQ(c, aco_rt_close(fd_of(c, 0)), 0);
        break;
    case E_CANCEL:
        CELL_EQ(c, aco_rt_cancel(atomic_load(&c->waiter)), 0);
        break;
    case E_DEADLINE:
        break;
    case E_CHAN_CLOSE:
        CELL_EQ(c, aco_rt_chan_close(c->ch), 0);
        break;
    case E_STOP:
        aco_rt_sched_stop(T(0));
        pause_ns(in_co, 3 * SETTLE_NS);
        CELL_EQ(c, atomic_load(&c->done), 0);      /* still parked */
        do_end(c, c->k->stop_then, in_co);
        break;
    case E_POOL_CANCEL:
        CELL_EQ(c, aco_rt_pool_wait(pool, ACO_RT_POOL_CANCEL, deadline_long() + long_ns), 0);
        break;
    }
}

static void wake(cell_t* c, int in_co) {
    if (!await_flag(&c->armed, in_co)) {
        cell_fail(c, __LINE__, "the waiter never came to its call");
        return;
    }
    pause_ns(in_co, SETTLE_NS);
    do_end(c, c->end, in_co);
    if (!await_flag(&c->done, in_co)) cell_fail(c, __LINE__, "the waiter never returned");
    if (c->k->helper) release(c, in_co);
}

static void waker_co(void* arg) { wake(arg, 1); }
static void* waker_thread(void* arg) { wake(arg, 0); return NULL; }

static void post_co(void* arg) {
    cell_t* c = arg;
    CELL_EQ(c, aco_rt_join(atomic_load(&c->waiter), deadline_long()), 0);
    if (c->k->post) c->k->post(c);
}

/* ------------------------------------------------------------------------ */
/* A cell                                                                   */
/* ------------------------------------------------------------------------ */

static int applies(const call_t* k, int end, int waker) {
    if (!(k->ends & B(end))) return 0;
    if (end == E_DEADLINE) return waker == W_SAME;
    if (end == E_POOL_CANCEL) return waker == W_PLAIN;
    if (waker == W_PLAIN && k->no_plain_natural &&
        (end == E_NATURAL || (end == E_STOP && k->stop_then == E_NATURAL)))
        return 0;
    return 1;
}

static long expected(const cell_t* c) {
    int e = c->end == E_STOP ? c->k->stop_then : c->end;
    switch (e) {
    case E_NATURAL: return c->k->natural;
    case E_CLOSE: return -EBADF;
    case E_CANCEL: case E_POOL_CANCEL: return -ECANCELED;
    case E_DEADLINE: return c->k->sleeps ? 0 : -ETIMEDOUT;
    default: return -EPIPE;
    }
}

static int drain_pool(cell_t* c, const char* what) {
    int64_t t = aco_rt_now();
    int r = aco_rt_pool_wait(pool, ACO_RT_POOL_DRAIN, t + 2 * long_ns + 5000 * MS);
    if (r != 0) cell_fail(c, __LINE__, "pool_wait(DRAIN) %s: %d", what, r);
    return r;
}

static int* retired;
static int nretired, capretired;

/* Keep the cell's descriptor numbers taken (by /dev/null) until the pool
 * is gone; what the cell's end closed is taken again too. */
static void retire_fds(cell_t* c) {
    int n = atomic_load(&c->nfd);
    for (int i = 0; i < n; i++) {
        int fd = fd_of(c, i);
        CHECK_EQ(dup2(devnull, fd), fd);
        if (nretired == capretired) {
            capretired = capretired ? 2 * capretired : 1024;
            CHECK((retired = realloc(retired, (size_t)capretired * sizeof(int))) != NULL);
        }
        retired[nretired++] = fd;
    }
}

static void run_cell(const call_t* k, int end, int waker) {
    cell_t* c = &cell;
    memset(c, 0, sizeof(*c));
    c->k = k;
    c->end = end;
    c->waker = waker;
    snprintf(c->label, sizeof(c->label), "%s/%s/%s", k->name, end_name[end], waker_name[waker]);
    if (k->setup) k->setup(c);
    unsigned h = waker == W_SAME ? 0 : 1;       /* the helper's thread */
    if (k->helper == H_GROUP) {
        CHECK((c->g = aco_rt_group_new(T(h))) != NULL);
        CHECK_EQ(aco_rt_group_spawn(c->g, helper_co, c, NULL), 0);
    } else if (k->helper) {
        CHECK((c->target = aco_rt_spawn(T(h), helper_co, c)) != NULL);
        if (k->helper == H_HOLD) CHECK_EQ(aco_rt_detach(c->target), 0);
    }
    if (k->helper) CHECK(await_flag(&c->helper_ready, 0));
    aco_rt_co_t* w = aco_rt_spawn(T(0), waiter_co, c);
    CHECK(w != NULL);
    atomic_store(&c->waiter, w);
    pthread_t th;
    if (end == E_POOL_CANCEL) {
        wake(c, 0);                     /* this thread is the plain waker */
    } else if (waker == W_PLAIN) {
        CHECK_EQ(pthread_create(&th, NULL, waker_thread, c), 0);
    } else {
        aco_rt_co_t* wk = aco_rt_spawn(T(waker == W_SAME ? 0 : 1), waker_co, c);
        CHECK(wk != NULL);
        CHECK_EQ(aco_rt_detach(wk), 0);
    }
    drain_pool(c, "after the cell");
    if (waker == W_PLAIN && end != E_POOL_CANCEL) CHECK_EQ(pthread_join(th, NULL), 0);

    long r = atomic_load(&c->result), want = expected(c);
    int64_t took = atomic_load(&c->t_ret) - atomic_load(&c->t_call);
    if (want == ANY_FD) CELL_GE(c, r, 0);
    else CELL_EQ(c, r, want);
    if (end == E_DEADLINE) CELL_GE(c, took, SHORT_NS);     /* never early */
    CELL_LT(c, took, long_ns / 2);                          /* promptly */

    /* On thread 1: after pool_wait(CANCEL) it may have had nothing to
     * cancel, and this co comes later: it must not be cancelled. */
    CHECK(aco_rt_spawn(T(1), post_co, c) != NULL);  /* (joins the waiter) */
    drain_pool(c, "after the checks");

    if (c->ch) CELL_EQ(c, aco_rt_chan_free(c->ch), 0);
    if (c->ch2) CELL_EQ(c, aco_rt_chan_free(c->ch2), 0);
    if (c->g) CELL_EQ(c, aco_rt_group_free(c->g), 0);
    retire_fds(c);
    cells++;
    if (atomic_load(&c->failed)) {
        failures++;
        if (!keep_going) abort();
    }
}

static aco_rt_pool_t* new_pool(int backend) {
    aco_rt_pool_opts_t o = {0};
    o.threads = 2;
    o.sched.backend = backend;
    aco_rt_pool_t* p = aco_rt_pool_new(&o);
    if (p == NULL) {
        fprintf(stderr, "FAIL: a pool on backend %s: %s\n", test_backend_str(backend), strerror(errno));
        abort();
    }
    for (unsigned i = 0; i < 2; i++)
        CHECK_EQ(strcmp(aco_rt_backend_name(aco_rt_pool_sched(p, i)), test_backend_str(backend)), 0);
    return p;
}

/* aco_rt_pool_wait from a co of the pool: -EDEADLK (hence no co column). */
static atomic_int edeadlk_seen;
static void pool_wait_in_co(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_pool_wait(pool, ACO_RT_POOL_CANCEL, 0), -EDEADLK);
    CHECK_EQ(aco_rt_pool_wait(pool, ACO_RT_POOL_DRAIN, 0), -EDEADLK);
    atomic_store(&edeadlk_seen, 1);
}

/* sched_stop as the run sees it: on a scheduler of this thread (the pool
 * runs its own again at once), a co parked in sem_wait; a stop from a co of
 * the same scheduler, of a pool thread, or a plain thread makes run return
 * 0 promptly with the co still parked; the next run goes on with it. */
static aco_rt_sched_t* stop_s;
static aco_rt_sem_t stop_sem;
static atomic_int stop_armed, stop_done;
static atomic_long stop_result;

static void stop_waiter(void* arg) {
    (void)arg;
    atomic_store(&stop_armed, 1);
    atomic_store(&stop_result, aco_rt_sem_wait(&stop_sem, deadline_long()));
    atomic_store(&stop_done, 1);
}
static void stop_it(int in_co) {
    while (!atomic_load(&stop_armed)) pause_ns(in_co, MS);
    pause_ns(in_co, SETTLE_NS);
    aco_rt_sched_stop(stop_s);
}
static void stop_co(void* arg) { (void)arg; stop_it(1); }
static void* stop_thread(void* arg) { (void)arg; stop_it(0); return NULL; }

static void test_stop_returns(int backend) {
    for (int w = 0; w < NWAKERS; w++) {
        stop_s = test_sched_on(backend, NULL);
        aco_rt_sem_init(&stop_sem, 0);
        atomic_store(&stop_armed, 0);
        atomic_store(&stop_done, 0);
        aco_rt_co_t* co = aco_rt_spawn(stop_s, stop_waiter, NULL);
        CHECK(co != NULL);
        CHECK_EQ(aco_rt_detach(co), 0);
        pthread_t th;
        if (w == W_PLAIN) {
            CHECK_EQ(pthread_create(&th, NULL, stop_thread, NULL), 0);
        } else {
            co = aco_rt_spawn(w == W_SAME ? stop_s : T(1), stop_co, NULL);
            CHECK(co != NULL);
            CHECK_EQ(aco_rt_detach(co), 0);
        }
        int64_t t = aco_rt_now();
        CHECK_EQ(aco_rt_sched_run(stop_s), 0);
        CHECK_LT(aco_rt_now() - t, long_ns / 2);
        CHECK_EQ(atomic_load(&stop_done), 0);       /* still parked */
        if (w == W_PLAIN) CHECK_EQ(pthread_join(th, NULL), 0);
        CHECK_EQ(aco_rt_pool_wait(pool, ACO_RT_POOL_DRAIN, deadline_long()), 0);
        aco_rt_sem_post(&stop_sem);
        CHECK_EQ(aco_rt_sched_run(stop_s), 0);
        CHECK_EQ(atomic_load(&stop_done), 1);
        CHECK_EQ(atomic_load(&stop_result), 0);
        CHECK_LT(aco_rt_now() - t, long_ns / 2);
        aco_rt_sched_free(stop_s);
        cells++;
    }
}

/* aco_rt_pool_wait(CANCEL): "cos spawned later are not" cancelled, also
 * on a thread that had nothing to cancel and is spawned onto at once. */
static aco_rt_sem_t later_sem;
static atomic_int later_cancelled;
static void later_waiter(void* arg) { (void)arg; aco_rt_sem_wait(&later_sem, -1); }
static void later_co(void* arg) {
    (void)arg;
    if (aco_rt_sleep(1000) == -ECANCELED || aco_rt_cancelled()) atomic_fetch_add(&later_cancelled, 1);
}

static void test_cancel_then_spawn(void) {
    int rounds = SLOW ? 100 : 500;
    atomic_store(&later_cancelled, 0);
    for (int i = 0; i < rounds; i++) {
        aco_rt_co_t* co = aco_rt_spawn(T(0), later_waiter, NULL);
        CHECK(co != NULL);
        CHECK_EQ(aco_rt_detach(co), 0);
        CHECK_EQ(aco_rt_pool_wait(pool, ACO_RT_POOL_CANCEL, deadline_long()), 0);
        CHECK((co = aco_rt_spawn(T(1), later_co, NULL)) != NULL);
        CHECK_EQ(aco_rt_detach(co), 0);
        CHECK_EQ(aco_rt_pool_wait(pool, ACO_RT_POOL_DRAIN, deadline_long()), 0);
    }
    int cancelled = atomic_load(&later_cancelled);
    CHECK_EQ(cancelled, 0);
    cells++;
}

static const char *only, *skip;

/* Every cell on backend b, then the pool freed: the failures. */
static int run_backend(int b) {
    pool = new_pool(b);
    aco_rt_co_t* co = aco_rt_spawn(T(1), pool_wait_in_co, NULL);
    CHECK(co != NULL);
    CHECK_EQ(aco_rt_detach(co), 0);
    CHECK_EQ(aco_rt_pool_wait(pool, ACO_RT_POOL_DRAIN, aco_rt_now() + long_ns), 0);
    CHECK_EQ(atomic_load(&edeadlk_seen), 1);
    int64_t t = aco_rt_now();
    test_stop_returns(b);
    test_cancel_then_spawn();
    for (int k = 0; k < NCALLS; k++) {
        if (only && strcmp(only, calls[k].name) != 0) continue;
        for (int e = 0; e < NENDS; e++)
            for (int w = 0; w < NWAKERS; w++)
                if (applies(&calls[k], e, w) && !(skip && strcmp(skip, end_name[e]) == 0))
                    run_cell(&calls[k], e, w);
    }
    aco_rt_pool_free(pool);
    for (int i = 0; i < nretired; i++) close(retired[i]);
    nretired = 0;
    free(retired);
    printf("matrix [%s]: %d cells (calls x ends x wakers) in %.1f s, %d failed\n",
           test_backend_label, cells, (double)(aco_rt_now() - t) / 1e9, failures);
    return failures;
}

int main(void) {
    test_watchdog();
    test_raise_nofile(8192);
    keep_going = getenv("ACO_RT_MATRIX_ALL") && atoi(getenv("ACO_RT_MATRIX_ALL"));
    if (getenv("ACO_RT_MATRIX_LONG_MS")) long_ns = atoll(getenv("ACO_RT_MATRIX_LONG_MS")) * MS;
    only = getenv("ACO_RT_MATRIX_ONLY");
    skip = getenv("ACO_RT_MATRIX_SKIP");
    CHECK_GE(devnull = open("/dev/null", O_RDONLY | O_CLOEXEC), 0);
    test_backends_apart(run_backend);
    printf("matrix: no cell failed\n");
    close(devnull);
    return 0;
}
