/* test_fd_identity.c - a descriptor is the file, not the number.
 *
 * The runtime keeps state per descriptor number (whether it is a socket,
 * epoll registrations, waiters).  The program may change the file under a
 * number behind the runtime's back.  Each case first makes the runtime
 * remember the old file (a call that waited on it), then:
 *   - reuse: close(2) it and get the number again for a new file, blocking
 *     or not, socket or pipe: a read with data coming 100 ms later returns
 *     it then (not at its deadline), and the thread goes on running other
 *     cos meanwhile (a ticker co counts) - the read never blocks the thread;
 *   - dup2: another file put over the number, the old one kept alive
 *     elsewhere or not;
 *   - O_NONBLOCK cleared by fcntl after the runtime used the descriptor: a
 *     read and a write to a full pipe park, never block the thread;
 *   - a pipe's numbers (which the runtime made O_NONBLOCK) given to a
 *     blocking socket pair by close(2) or dup2: the sockets stay blocking;
 *   - across threads: aco_rt_close from a co of one pool thread, or from a
 *     thread outside any scheduler, wakes a co of the other pool thread
 *     blocked on that descriptor (read, wait, accept) with -EBADF at once,
 *     and the pool drains;
 *   - the same close just as the co begins to wait (0-15 us after it
 *     calls read or wait, many rounds): the call returns -EBADF at once,
 *     never at its deadline (a close that looked for waiters a moment
 *     before the wait was counted lost it: epoll's registration went with
 *     the file, and nobody told the co); a third of the rounds instead end
 *     the wait with a byte and close(2) both ends, so that the next
 *     round's number had a file the runtime waited on (epoll: its wait
 *     finds that registration gone and takes the new file as the closer
 *     looks, and the closer's message named the old one);
 *   - a dup: aco_rt_close of one number ends the read waiting on it with
 *     -EBADF, never the read waiting on the file's other number.
 * Stack and heap buffers (the readiness and the io_uring ways), both
 * backends, at once (a process each: the time is waiting).
 */
#define _GNU_SOURCE
#include "rt_test.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <time.h>


static volatile int ticking;
static volatile long ticks;

static void ticker(void* arg) {
    (void)arg;
    while (ticking) {
        aco_rt_sleep(MS);
        ticks++;
    }
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

/* ------------------------------------------------------------------------ */
/* One scheduler                                                            */
/* ------------------------------------------------------------------------ */

enum { NEW_SOCK, NEW_SOCK_NB, NEW_PIPE, NEW_PIPE_NB, NEW_KINDS };
static const char* const new_name[] = {"socket", "non-blocking socket", "pipe",
                                       "non-blocking pipe"};

static char heap_buf[64];
static int late_fd;
static int64_t wrote_at;

static void late_writer(void* arg) {
    (void)arg;
    aco_rt_sleep(100 * MS);
    CHECK_EQ(write(late_fd, "x", 1), 1);
    wrote_at = aco_rt_now();
}

/* Read fd (data comes 100 ms from now through late_fd): 1 byte, soon, and
 * other cos ran meanwhile. */
static void read_soon(int fd, int heap, const char* what) {
    char sbuf[64];
    char* b = heap ? heap_buf : sbuf;
    aco_rt_co_t* w = aco_rt_spawn(NULL, late_writer, NULL);
    CHECK(w != NULL);
    long t0 = ticks;
    int64_t start = aco_rt_now();
    ssize_t r = aco_rt_read(fd, b, sizeof(sbuf), start + 3000 * MS);
    int64_t took = aco_rt_now() - start;
    if (r != 1 || took > 2000 * MS)
        TEST_FAIL_AT(__FILE__, __LINE__, "%s (%s buffer): read %zd after %lld ms (written "
                     "after %lld ms)", what, heap ? "heap" : "stack", r, (long long)(took / MS),
                     (long long)((wrote_at - start) / MS));
    CHECK_EQ(b[0], 'x');
    if (ticks - t0 < 3)                /* ~100 ticks (fewer on a busy machine): the thread ran them */
        TEST_FAIL_AT(__FILE__, __LINE__, "%s (%s buffer): %ld ticks in %lld ms", what,
                     heap ? "heap" : "stack", ticks - t0, (long long)(took / MS));
    CHECK_EQ(aco_rt_join(w, -1), 0);
}

/* Make the runtime remember fd: a read that waits and times out. */
static void remember(int fd, int heap) {
    char sbuf[8];
    CHECK_EQ(aco_rt_read(fd, heap ? heap_buf : sbuf, 8, aco_rt_now() + 5 * MS), -ETIMEDOUT);
}

/* A new file of kind k whose number is `want`: *rd read end, *wr write end. */
static void new_file(int k, int want, int* rd, int* wr) {
    int v[2];
    if (k == NEW_SOCK || k == NEW_SOCK_NB)
        CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | (k == NEW_SOCK_NB ? SOCK_NONBLOCK : 0), 0, v), 0);
    else
        CHECK_EQ(pipe2(v, k == NEW_PIPE_NB ? O_NONBLOCK : 0), 0);
    CHECK_EQ(v[0], want);          /* the lowest free number: the old one */
    *rd = v[0];
    *wr = v[1];
}

static void reuse_co(void* arg) {
    (void)arg;
    aco_rt_co_t* t = aco_rt_spawn(NULL, ticker, NULL);
    CHECK(t != NULL);
    char what[128];
    for (int k = 0; k < NEW_KINDS; k++) {
        for (int heap = 0; heap < 2; heap++) {
            /* close(2) and reuse */
            int a[2];
            CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, a), 0);
            remember(a[0], heap);
            remember(a[0], !heap);
            int old = a[0];
            CHECK_EQ(close(a[0]), 0);
            CHECK_EQ(close(a[1]), 0);
            int rd, wr;
            new_file(k, old, &rd, &wr);
            late_fd = wr;
            snprintf(what, sizeof(what), "close(2), reused by a %s", new_name[k]);
            read_soon(rd, heap, what);
            CHECK_EQ(aco_rt_close(rd), 0);
            CHECK_EQ(close(wr), 0);

            /* dup2 over a remembered number; the old file alive or not */
            for (int keep = 0; keep < 2; keep++) {
                CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, a), 0);
                remember(a[0], heap);
                int kept = keep ? dup(a[0]) : -1;
                int v[2];
                if (k == NEW_SOCK || k == NEW_SOCK_NB)
                    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | (k == NEW_SOCK_NB ? SOCK_NONBLOCK : 0), 0, v), 0);
                else
                    CHECK_EQ(pipe2(v, k == NEW_PIPE_NB ? O_NONBLOCK : 0), 0);
                CHECK_EQ(dup2(v[0], a[0]), a[0]);
                CHECK_EQ(close(v[0]), 0);
                late_fd = v[1];
                snprintf(what, sizeof(what), "dup2 of a %s over it (old file %s)", new_name[k],
                         keep ? "kept" : "gone");
                read_soon(a[0], heap, what);
                /* the old file, if kept, still works with its own number */
                if (keep) {
                    CHECK_EQ(write(a[1], "y", 1), 1);
                    char c = 0;
                    CHECK_EQ(aco_rt_read(kept, &c, 1, aco_rt_now() + 1000 * MS), 1);
                    CHECK_EQ(c, 'y');
                    CHECK_EQ(aco_rt_close(kept), 0);
                }
                CHECK_EQ(aco_rt_close(a[0]), 0);
                CHECK_EQ(close(a[1]), 0);
                CHECK_EQ(close(v[1]), 0);
            }
        }
    }

    /* O_NONBLOCK cleared behind the runtime's back */
    for (int heap = 0; heap < 2; heap++) {
        for (int sock = 0; sock < 2; sock++) {
            int v[2];
            if (sock) CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, v), 0);
            else CHECK_EQ(pipe(v), 0);
            remember(v[0], heap);
            int fl = fcntl(v[0], F_GETFL);
            CHECK_EQ(fcntl(v[0], F_SETFL, fl & ~O_NONBLOCK), 0);
            late_fd = v[1];
            read_soon(v[0], heap, sock ? "O_NONBLOCK cleared (socket)" : "O_NONBLOCK cleared (pipe)");
            /* a write to a full pipe or socket: parks until its deadline */
            char chunk[4096];
            memset(chunk, 7, sizeof(chunk));
            while (aco_rt_write(v[1], chunk, sizeof(chunk), 0) > 0) {}
            fl = fcntl(v[1], F_GETFL);
            CHECK_EQ(fcntl(v[1], F_SETFL, fl & ~O_NONBLOCK), 0);
            long t0 = ticks;
            int64_t start = aco_rt_now();
            ssize_t r = aco_rt_write(v[1], heap ? heap_buf : chunk, 64, start + 100 * MS);
            CHECK_EQ(r, -ETIMEDOUT);
            CHECK_GE(aco_rt_now() - start, 100 * MS);
            CHECK_GE(ticks - t0, 3);
            CHECK_EQ(aco_rt_close(v[0]), 0);
            CHECK_EQ(aco_rt_close(v[1]), 0);
        }
    }
    /* A pipe's numbers (remembered as no socket; epoll made them
     * O_NONBLOCK) given to a blocking socket pair by close(2) or dup2: the
     * sockets work and are left as they are, blocking ("Sockets are left
     * as they are"). */
    for (int heap = 0; heap < 2; heap++) {
        for (int how = 0; how < 2; how++) {
            int p[2], v[2];
            char buf[8];
            char* b = heap ? heap_buf : buf;
            CHECK_EQ(pipe(p), 0);
            CHECK_EQ(aco_rt_write(p[1], "x", 1, -1), 1);
            CHECK_EQ(aco_rt_read(p[0], b, 1, -1), 1);
            if (how == 0) {
                CHECK_EQ(close(p[0]), 0);
                CHECK_EQ(close(p[1]), 0);
                CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, v), 0);
                CHECK_EQ(v[0], p[0]);
                CHECK_EQ(v[1], p[1]);
            } else {
                CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, v), 0);
                CHECK_EQ(dup2(v[0], p[0]), p[0]);
                CHECK_EQ(dup2(v[1], p[1]), p[1]);
                CHECK_EQ(close(v[0]), 0);
                CHECK_EQ(close(v[1]), 0);
                v[0] = p[0];
                v[1] = p[1];
            }
            CHECK_EQ(aco_rt_write(v[1], "ab", 2, -1), 2);
            CHECK_EQ(aco_rt_read(v[0], b, 8, -1), 2);
            CHECK_EQ(memcmp(b, "ab", 2), 0);
            CHECK_EQ(aco_rt_wait(v[1], POLLOUT, aco_rt_now() + 1000 * MS) & POLLOUT, POLLOUT);
            if (fcntl(v[0], F_GETFL) & O_NONBLOCK)
                TEST_FAIL_AT(__FILE__, __LINE__, "a pipe's number %s by a socket: made O_NONBLOCK",
                             how ? "dup2'd over" : "reused");
            CHECK_EQ(fcntl(v[1], F_GETFL) & O_NONBLOCK, 0);
            CHECK_EQ(aco_rt_close(v[0]), 0);
            CHECK_EQ(aco_rt_close(v[1]), 0);
        }
    }
    ticking = 0;
    CHECK_EQ(aco_rt_join(t, -1), 0);
}

static void reuse_body(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    ticking = 1;
    test_go(s, reuse_co, NULL);
}

/* ------------------------------------------------------------------------ */
/* Across threads                                                           */
/* ------------------------------------------------------------------------ */

enum { W_READ_STACK, W_READ_HEAP, W_WAIT, W_ACCEPT, W_KINDS };
static const char* const wait_name[] = {"read (stack buffer)", "read (heap buffer)", "wait",
                                        "accept"};

typedef struct {
    int fd;
    int kind;
    volatile int parked;        /* the waiter is about to block */
    int64_t took;
    int rc;
} xt_t;

static char xt_heap[64];

static void xt_waiter(void* arg) {
    xt_t* x = arg;
    char sbuf[64];
    int64_t start = aco_rt_now(), dl = start + 5000 * MS;
    __atomic_store_n(&x->parked, 1, __ATOMIC_RELEASE);
    switch (x->kind) {
    case W_READ_STACK: x->rc = (int)aco_rt_read(x->fd, sbuf, sizeof(sbuf), dl); break;
    case W_READ_HEAP:  x->rc = (int)aco_rt_read(x->fd, xt_heap, sizeof(xt_heap), dl); break;
    case W_WAIT:       x->rc = aco_rt_wait(x->fd, POLLIN, dl); break;
    default:           x->rc = aco_rt_accept(x->fd, NULL, NULL, 0, dl); break;
    }
    x->took = aco_rt_now() - start;
}

static void xt_closer(void* arg) {
    xt_t* x = arg;
    while (!__atomic_load_n(&x->parked, __ATOMIC_ACQUIRE)) aco_rt_sleep(MS);
    aco_rt_sleep(100 * MS);         /* it has parked by now */
    CHECK_EQ(aco_rt_close(x->fd), 0);
}

static int listener(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(fd >= 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK_EQ(bind(fd, (struct sockaddr*)&a, sizeof(a)), 0);
    CHECK_EQ(listen(fd, 8), 0);
    return fd;
}

static void cross_thread(int backend) {
    aco_rt_pool_opts_t po = {0};
    po.threads = 2;
    po.sched.backend = backend;
    aco_rt_pool_t* p = aco_rt_pool_new(&po);
    CHECK(p != NULL);
    for (int kind = 0; kind < W_KINDS; kind++) {
        for (int from = 0; from < 2; from++) {      /* 0: a co of thread 0; 1: no scheduler */
            xt_t x = {0};
            int peer = -1;
            if (kind == W_ACCEPT) {
                x.fd = listener();
            } else {
                int v[2];
                CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, v), 0);
                x.fd = v[0];
                peer = v[1];
            }
            x.kind = kind;
            aco_rt_co_t* w = aco_rt_spawn(aco_rt_pool_sched(p, 1), xt_waiter, &x);
            CHECK(w != NULL);
            CHECK_EQ(aco_rt_detach(w), 0);
            if (from == 0) {
                aco_rt_co_t* c = aco_rt_spawn(aco_rt_pool_sched(p, 0), xt_closer, &x);
                CHECK(c != NULL);
                CHECK_EQ(aco_rt_detach(c), 0);
            } else {
                while (!__atomic_load_n(&x.parked, __ATOMIC_ACQUIRE)) sleep_ms(1);
                sleep_ms(100);
                CHECK_EQ(aco_rt_close(x.fd), 0);
            }
            int r = aco_rt_pool_wait(p, ACO_RT_POOL_DRAIN, aco_rt_now() + 3000 * MS);
            if (r != 0 || x.rc != -EBADF || x.took > 2000 * MS)
                TEST_FAIL_AT(__FILE__, __LINE__, "%s: %s on thread 1, closed by %s: rc %d after "
                             "%lld ms, drain %d", test_backend_str(backend), wait_name[kind],
                             from ? "a thread outside the schedulers" : "a co of thread 0",
                             x.rc, (long long)(x.took / MS), r);
            if (peer >= 0) CHECK_EQ(close(peer), 0);
        }
    }
    aco_rt_pool_free(p);
}

/* The close races the wait's start: the waiter says it is about to call,
 * the closer (outside the schedulers) spins a random few microseconds and
 * closes. */
typedef struct {
    int fd, wait;
    int started;        /* atomic */
    int rc;
    int64_t took;
} race_t;

static void race_waiter(void* arg) {
    race_t* x = arg;
    char buf[8];
    int64_t start = aco_rt_now(), dl = start + 5000 * MS;
    __atomic_store_n(&x->started, 1, __ATOMIC_RELEASE);
    x->rc = x->wait ? aco_rt_wait(x->fd, POLLIN, dl) : (int)aco_rt_read(x->fd, buf, sizeof(buf), dl);
    x->took = aco_rt_now() - start;
}

static void spin_us(int us) {
    int64_t end = aco_rt_now() + us * 1000LL;
    while (aco_rt_now() < end) {}
}

static void close_race(int backend) {
    aco_rt_pool_opts_t po = {0};
    po.threads = 2;
    po.sched.backend = backend;
    aco_rt_pool_t* p = aco_rt_pool_new(&po);
    CHECK(p != NULL);
    unsigned seed = 12345;
    /* (not under TSan: it reports the close racing the wait's epoll_ctl
     * on the same descriptor, which is the case itself) */
    int rounds = TEST_TSAN ? 0 : SLOW ? 200 : 3000;
    for (int i = 0; i < rounds; i++) {
        race_t x = {0};
        int v[2];
        CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, v), 0);
        x.fd = v[0];
        x.wait = i & 1;
        seed = seed * 1103515245 + 12345;
        int byte = (seed >> 16) % 3 == 0;      /* a round that ends in close(2) */
        aco_rt_co_t* w = aco_rt_spawn(aco_rt_pool_sched(p, 1), race_waiter, &x);
        CHECK(w != NULL);
        CHECK_EQ(aco_rt_detach(w), 0);
        while (!__atomic_load_n(&x.started, __ATOMIC_ACQUIRE)) {}
        seed = seed * 1103515245 + 12345;
        spin_us((int)(seed >> 16) % 16);
        if (byte) {
            CHECK_EQ(write(v[1], "x", 1), 1);
            CHECK_EQ(aco_rt_pool_wait(p, ACO_RT_POOL_DRAIN, aco_rt_now() + 10000 * MS), 0);
            CHECK_EQ(x.rc, x.wait ? POLLIN : 1);
            CHECK_EQ(close(v[0]), 0);
            CHECK_EQ(close(v[1]), 0);
            continue;
        }
        CHECK_EQ(aco_rt_close(x.fd), 0);
        int r = aco_rt_pool_wait(p, ACO_RT_POOL_DRAIN, aco_rt_now() + 10000 * MS);
        if (r != 0 || x.rc != -EBADF || x.took > 2000 * MS)
            TEST_FAIL_AT(__FILE__, __LINE__, "%s: round %d: %s closed as it began: rc %d after "
                         "%lld ms, drain %d", test_backend_str(backend), i,
                         x.wait ? "wait" : "read", x.rc, (long long)(x.took / MS), r);
        CHECK_EQ(close(v[1]), 0);
    }
    aco_rt_pool_free(p);
}

/* Two numbers of one pipe (dup), a co reading on each (heap buffers: on
 * io_uring, read operations in the kernel); aco_rt_close of one number
 * ends its reader with -EBADF, and the other's read goes on: it returns
 * the byte written after the close (io_uring cancels a close's
 * operations by the file, its other numbers' too: those go again). */
static char dup_buf[2][8];
static int dup_fd[2], dup_wr;
static ssize_t dup_rc[2];
static void dup_reader(void* arg) {
    int i = (int)(intptr_t)arg;
    dup_rc[i] = aco_rt_read(dup_fd[i], dup_buf[i], sizeof(dup_buf[i]), aco_rt_in_ms(3000));
}
static void dup_closer(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_sleep(20 * MS), 0);
    CHECK_EQ(aco_rt_close(dup_fd[0]), 0);
    CHECK_EQ(aco_rt_sleep(20 * MS), 0);
    CHECK_EQ(write(dup_wr, "d", 1), 1);
}
static void dup_close_body(aco_rt_sched_t* s) {
    int p[2];
    CHECK_EQ(pipe(p), 0);
    dup_fd[0] = p[0];
    dup_fd[1] = dup(p[0]);
    dup_wr = p[1];
    CHECK_GE(dup_fd[1], 0);
    for (int i = 0; i < 2; i++) CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, dup_reader, (void*)(intptr_t)i)), 0);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, dup_closer, NULL)), 0);
    test_run(s);
    CHECK_EQ(dup_rc[0], -EBADF);
    CHECK_EQ(dup_rc[1], 1);
    CHECK_EQ(dup_buf[1][0], 'd');
    CHECK_EQ(aco_rt_close(dup_fd[1]), 0);
    CHECK_EQ(close(dup_wr), 0);
}

static int one_backend(int backend) {
    aco_rt_sched_t* s = test_sched_on(backend, NULL);
    reuse_body(s, NULL);
    dup_close_body(s);
    aco_rt_sched_free(s);
    cross_thread(backend);
    close_race(backend);
    return 0;
}

int main(void) {
    test_watchdog();
    test_backends_apart(one_backend);
    printf("test_fd_identity: ok\n");
    return 0;
}
