/* test_lend: lent receives (aco_rt_recv_lend, aco_rt_lend_return), on
 * TCP, AF_UNIX stream sockets and pipes, on both backends.
 *
 *   - an 8 MiB patterned stream in random chunks arrives whole and in
 *     order, lent; the end is 0, again and again; io_uring lends from its
 *     ring (stats), epoll from the heap;
 *   - a reader that keeps 300 buffers (more than the ring has) still gets
 *     every byte: a lend never waits for a buffer;
 *   - lends mixed at random with recv, MSG_PEEK, readv, the buffered reader
 *     and aco_rt_wait(POLLIN): one stream, in order;
 *   - aco_rt_wait(POLLIN) on a descriptor whose multishot is armed wakes
 *     when bytes come, and with a passed deadline sees what it took;
 *   - deadline, cancel, aco_rt_close by another co while one waits (-EBADF),
 *     the number reused by a new socket (its own bytes only), a reset;
 *     close(2) behind the runtime's back and the number reused: the new
 *     socket's bytes within the header's first look (1 s); aco_rt_close
 *     from another thread of a socket whose rx holds bytes and the end;
 *   - buffers returned by another thread, and after the scheduler is gone;
 *   - a receive on another thread's scheduler while the multishot holds the
 *     bytes: -EBUSY at once (epoll: an ordinary read), and not for a new
 *     socket under the number once that thread closed the lent one;
 *     misuse: -EINVAL, -EBUSY, -EPERM;
 *   - aco_rt_close on another thread, the number reused at once, read or
 *     lent here before this thread's loop ran: the new socket's bytes;
 *   - cos parked in a heap lend destroyed by aco_rt_sched_free: their
 *     buffers freed (ASan's leak check).
 */
#define _GNU_SOURCE
#include "rt_test.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/uio.h>

enum { K_TCP, K_UNIX, K_PIPE };

static uint8_t pat(uint64_t i) { return (uint8_t)(i * 2654435761u >> 13); }

static struct sockaddr_in loopback(uint16_t port) {
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    return a;
}

/* fds[0] reads, fds[1] writes. */
static void make_pair(int kind, int fds[2]) {
    if (kind == K_PIPE) {
        CHECK_EQ(pipe2(fds, O_CLOEXEC), 0);
    } else if (kind == K_UNIX) {
        CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    } else {
        int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        CHECK(l >= 0);
        struct sockaddr_in a = loopback(0);
        CHECK_EQ(bind(l, (struct sockaddr*)&a, sizeof(a)), 0);
        CHECK_EQ(listen(l, 1), 0);
        socklen_t len = sizeof(a);
        CHECK_EQ(getsockname(l, (struct sockaddr*)&a, &len), 0);
        int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        CHECK_EQ(connect(c, (struct sockaddr*)&a, sizeof(a)), 0);
        int s = accept4(l, NULL, NULL, SOCK_CLOEXEC);
        CHECK(s >= 0);
        CHECK_EQ(close(l), 0);
        int one = 1;
        setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        fds[0] = s;
        fds[1] = c;
    }
}

/* A new pair of kind whose reading end has the number num (dup2). */
static void make_pair_at(int kind, int num, int fds[2]) {
    make_pair(kind, fds);
    if (fds[0] != num) {
        CHECK_EQ(dup2(fds[0], num), num);
        CHECK_EQ(close(fds[0]), 0);
        fds[0] = num;
    }
}

static uint64_t rnd_state = 88172645463325252ull;
static uint64_t rnd(void) {
    rnd_state ^= rnd_state << 13;
    rnd_state ^= rnd_state >> 7;
    rnd_state ^= rnd_state << 17;
    return rnd_state;
}

/* ---- a patterned stream, written in random chunks ---------------------- */

typedef struct {
    int fd;
    size_t total;
    int pause_every;        /* sleep 1 ms after every this many chunks (0: never) */
    size_t max_chunk;
    int close_after;        /* aco_rt_close the writer at the end */
} writer_t;

static void writer_co(void* arg) {
    writer_t* w = arg;
    uint8_t* buf = malloc(w->max_chunk);
    CHECK(buf != NULL);
    size_t off = 0;
    int n = 0;
    while (off < w->total) {
        size_t k = 1 + rnd() % w->max_chunk;
        if (k > w->total - off) k = w->total - off;
        for (size_t i = 0; i < k; i++) buf[i] = pat(off + i);
        CHECK_EQ(aco_rt_write(w->fd, buf, k, -1), (ssize_t)k);
        off += k;
        if (w->pause_every && ++n % w->pause_every == 0) aco_rt_sleep(MS);
    }
    free(buf);
    if (w->close_after) CHECK_EQ(aco_rt_close(w->fd), 0);
}

static void spawn_detached(aco_rt_sched_t* s, aco_rt_fn_t fn, void* arg) {
    aco_rt_co_t* co = aco_rt_spawn(s, fn, arg);
    CHECK(co != NULL);
    CHECK_EQ(aco_rt_detach(co), 0);
}

/* ---- 1. a whole stream, lent ------------------------------------------- */

typedef struct {
    int fd;
    size_t total;
    int keep;               /* keep every buffer until the end */
    size_t got;
    const char** kept;
    size_t nkept;
} reader_t;

static void check_bytes(const char* p, size_t n, uint64_t off) {
    for (size_t i = 0; i < n; i++)
        if ((uint8_t)p[i] != pat(off + i))
            TEST_FAIL_AT(__FILE__, __LINE__, "byte %llu: got %u want %u",
                         (unsigned long long)(off + i), (uint8_t)p[i], pat(off + i));
}

static void lend_reader_co(void* arg) {
    reader_t* r = arg;
    for (;;) {
        const char* p = NULL;
        ssize_t n = aco_rt_recv_lend(r->fd, &p, -1);
        CHECK_GE(n, 0);
        if (n == 0) break;
        CHECK_LE(n, ACO_RT_LEND_SIZE);
        CHECK(p != NULL);
        check_bytes(p, (size_t)n, r->got);
        r->got += (size_t)n;
        if (r->keep) {
            r->kept[r->nkept++] = p;
        } else {
            memset((char*)p, 0xee, (size_t)n);      /* the caller's to write */
            CHECK_EQ(aco_rt_lend_return(p), 0);
        }
    }
    const char* p = (const char*)1;
    CHECK_EQ(aco_rt_recv_lend(r->fd, &p, -1), 0);   /* the end, again */
    CHECK_EQ(r->got, r->total);
    for (size_t i = 0; i < r->nkept; i++) CHECK_EQ(aco_rt_lend_return(r->kept[i]), 0);
    CHECK_EQ(aco_rt_close(r->fd), 0);
}

static void whole_stream(aco_rt_sched_t* s, int kind, int keep) {
    int fds[2];
    make_pair(kind, fds);
    writer_t w = {fds[1], keep ? 300 * 100 : 8 << 20, keep ? 1 : 16, keep ? 100 : 70000, 1};
    reader_t r = {fds[0], w.total, keep, 0, NULL, 0};
    if (keep) r.kept = calloc(w.total, sizeof(char*));
    aco_rt_stats_t a, b;
    aco_rt_stats(s, &a);
    spawn_detached(s, writer_co, &w);
    spawn_detached(s, lend_reader_co, &r);
    test_run(s);
    aco_rt_stats(s, &b);
    CHECK_EQ(r.got, w.total);
    uint64_t lends = b.lends - a.lends, heap = b.lend_heap - a.lend_heap;
    CHECK_GT(lends, 0);
    if (test_backend_id == ACO_RT_BACKEND_EPOLL || kind == K_PIPE) {
        CHECK_EQ(heap, lends);
    } else {
        CHECK_EQ(b.lend_ring, 1);
        if (keep) CHECK_GT(heap, 0);            /* the ring ran dry */
        else CHECK_LT(heap * 10, lends);        /* (the ring, mostly) */
    }
    free(r.kept);
}

/* ---- 2. lends mixed with the other receive calls ----------------------- */

typedef struct {
    int fd;
    size_t total;
    size_t got;
} mixer_t;

static void mixer_co(void* arg) {
    mixer_t* m = arg;
    static char buf[40000];
    while (m->got < m->total) {
        unsigned how = (unsigned)(rnd() % 6);
        size_t want = 1 + rnd() % 20000;
        ssize_t n;
        if (how == 0) {
            const char* p;
            n = aco_rt_recv_lend(m->fd, &p, -1);
            CHECK_GT(n, 0);
            check_bytes(p, (size_t)n, m->got);
            CHECK_EQ(aco_rt_lend_return(p), 0);
        } else if (how == 1) {
            n = aco_rt_recv(m->fd, buf, want, 0, -1);
            CHECK_GT(n, 0);
            check_bytes(buf, (size_t)n, m->got);
        } else if (how == 2) {
            n = aco_rt_recv(m->fd, buf, want, MSG_PEEK, -1);
            CHECK_GT(n, 0);
            check_bytes(buf, (size_t)n, m->got);
            n = aco_rt_read(m->fd, buf, (size_t)n, -1);    /* the same bytes */
            CHECK_GT(n, 0);
            check_bytes(buf, (size_t)n, m->got);
        } else if (how == 3) {
            size_t a = want / 3 + 1;
            struct iovec v[3] = {{buf, a}, {buf + 20000, 7}, {buf + 30000, want % 10000 + 1}};
            n = aco_rt_readv(m->fd, v, 3, -1);
            CHECK_GT(n, 0);
            size_t k = (size_t)n < a ? (size_t)n : a;
            check_bytes(buf, k, m->got);
            if ((size_t)n > a) {
                size_t k2 = (size_t)n - a < 7 ? (size_t)n - a : 7;
                check_bytes(buf + 20000, k2, m->got + a);
                if ((size_t)n > a + 7) check_bytes(buf + 30000, (size_t)n - a - 7, m->got + a + 7);
            }
        } else if (how == 4) {
            size_t left = m->total - m->got;
            if (want > left) want = left;
            n = aco_rt_recv(m->fd, buf, want, MSG_WAITALL, -1);
            /* (all of it from the ring; epoll's recv may return less) */
            if (test_backend_id == ACO_RT_BACKEND_URING) CHECK_EQ(n, (ssize_t)want);
            CHECK_GT(n, 0);
            CHECK_LE(n, (ssize_t)want);
            check_bytes(buf, (size_t)n, m->got);
        } else {
            int ev = aco_rt_wait(m->fd, POLLIN, -1);
            CHECK(ev > 0 && (ev & POLLIN));
            n = aco_rt_recv(m->fd, buf, want, MSG_DONTWAIT, -1);
            CHECK_GT(n, 0);     /* readable: bytes are there */
            check_bytes(buf, (size_t)n, m->got);
        }
        m->got += (size_t)n;
    }
    const char* p;
    CHECK_EQ(aco_rt_recv_lend(m->fd, &p, -1), 0);
    CHECK_EQ(aco_rt_recv(m->fd, buf, 10, 0, -1), 0);
    CHECK_EQ(aco_rt_close(m->fd), 0);
}

static void mixed(aco_rt_sched_t* s, int kind) {
    int fds[2];
    make_pair(kind, fds);
    writer_t w = {fds[1], 4 << 20, 8, 50000, 1};
    mixer_t m = {fds[0], w.total, 0};
    spawn_detached(s, writer_co, &w);
    spawn_detached(s, mixer_co, &m);
    test_run(s);
    CHECK_EQ(m.got, w.total);
}

/* ---- 3. wait(POLLIN) while the multishot is armed ---------------------- */

typedef struct {
    int fd, wfd;
    int phase;
} poll_t;

static void poll_waiter_co(void* arg) {
    poll_t* t = arg;
    const char* p;
    /* arm the multishot: a lend that times out */
    CHECK_EQ(aco_rt_recv_lend(t->fd, &p, aco_rt_in_ms(5)), -ETIMEDOUT);
    t->phase = 1;
    int ev = aco_rt_wait(t->fd, POLLIN, aco_rt_in_ms(5000));
    CHECK(ev > 0 && (ev & POLLIN));
    char c[4];
    CHECK_EQ(aco_rt_recv(t->fd, c, sizeof(c), 0, -1), 3);
    CHECK(memcmp(c, "abc", 3) == 0);
    /* and a wait for either way, with bytes queued: at once */
    CHECK_EQ(aco_rt_write(t->wfd, "de", 2, -1), 2);
    CHECK_EQ(aco_rt_recv_lend(t->fd, &p, -1), 2);
    CHECK_EQ(aco_rt_lend_return(p), 0);
    /* a passed deadline (the one try): bytes the multishot took and the
     * loop has not reaped yet count */
    CHECK_EQ(write(t->wfd, "fg", 2), 2);    /* (no park: nothing reaped) */
    struct timespec nap = {0, 20 * 1000000L};  /* the thread's: reaps nothing */
    while (nanosleep(&nap, &nap) != 0) {}
    ev = aco_rt_wait(t->fd, POLLIN, 0);
    CHECK(ev > 0 && (ev & POLLIN));
    CHECK_EQ(aco_rt_recv_lend(t->fd, &p, 0), 2);
    CHECK(memcmp(p, "fg", 2) == 0);
    CHECK_EQ(aco_rt_lend_return(p), 0);
    CHECK_EQ(aco_rt_wait(t->fd, POLLIN, 0), -ETIMEDOUT);
    t->phase = 2;
}

static void poll_sender_co(void* arg) {
    poll_t* t = arg;
    while (t->phase == 0) aco_rt_sleep(MS);
    aco_rt_sleep(10 * MS);              /* the waiter is in its wait */
    CHECK_EQ(aco_rt_write(t->wfd, "abc", 3, -1), 3);
}

static void poll_armed(aco_rt_sched_t* s) {
    int fds[2];
    make_pair(K_TCP, fds);
    poll_t t = {fds[0], fds[1], 0};
    spawn_detached(s, poll_waiter_co, &t);
    spawn_detached(s, poll_sender_co, &t);
    test_run(s);
    CHECK_EQ(t.phase, 2);
    CHECK_EQ(aco_rt_close(fds[0]), 0);
    CHECK_EQ(aco_rt_close(fds[1]), 0);
}

/* ---- 4. deadline, cancel, close, reuse, reset -------------------------- */

typedef struct {
    int fds[2];
    int res;
    int done;
} ends_t;

static void deadline_co(void* arg) {
    ends_t* t = arg;
    const char* p;
    CHECK_EQ(aco_rt_recv_lend(t->fds[0], &p, aco_rt_in_ms(20)), -ETIMEDOUT);
    CHECK_EQ(aco_rt_recv_lend(t->fds[0], &p, 0), -ETIMEDOUT);       /* passed: one try */
    CHECK_EQ(aco_rt_write(t->fds[1], "xyz", 3, -1), 3);
    CHECK_EQ(aco_rt_recv_lend(t->fds[0], &p, aco_rt_in_ms(2000)), 3);
    CHECK(memcmp(p, "xyz", 3) == 0);
    CHECK_EQ(aco_rt_lend_return(p), 0);
    CHECK_EQ(aco_rt_lend_return(NULL), -EINVAL);
    CHECK_EQ(aco_rt_recv_lend(t->fds[0], NULL, -1), -EINVAL);
    CHECK_EQ(aco_rt_recv_lend(-1, &p, -1), -EBADF);
}

static void blocked_lend_co(void* arg) {
    ends_t* t = arg;
    const char* p;
    t->res = (int)aco_rt_recv_lend(t->fds[0], &p, aco_rt_in_ms(5000));
    t->done = 1;
}

static void second_lend_co(void* arg) {
    ends_t* t = arg;
    const char* p;
    aco_rt_sleep(2 * MS);
    /* one waiter per multishot; heap lends are plain receives, and the
     * close wakes both */
    ssize_t r = aco_rt_recv_lend(t->fds[0], &p, aco_rt_in_ms(1000));
    CHECK_EQ(r, test_backend_id == ACO_RT_BACKEND_URING ? -EBUSY : -EBADF);
}

static void closer_co(void* arg) {
    ends_t* t = arg;
    aco_rt_sleep(10 * MS);
    CHECK_EQ(t->done, 0);
    CHECK_EQ(aco_rt_close(t->fds[0]), 0);
}

static void reuse_co(void* arg) {
    ends_t* t = arg;
    /* bytes for the old socket wait in its multishot's buffers: close it,
     * and a new socket under the same number gets only its own */
    const char* p;
    CHECK_EQ(aco_rt_write(t->fds[1], "old", 3, -1), 3);
    CHECK_EQ(aco_rt_recv_lend(t->fds[0], &p, aco_rt_in_ms(5)), 3);
    CHECK_EQ(aco_rt_lend_return(p), 0);
    CHECK_EQ(aco_rt_write(t->fds[1], "stale", 5, -1), 5);
    aco_rt_sleep(5 * MS);               /* the multishot takes them */
    int old = t->fds[0];
    CHECK_EQ(aco_rt_close(old), 0);
    CHECK_EQ(aco_rt_close(t->fds[1]), 0);
    int fds[2];
    make_pair_at(K_TCP, old, fds);
    CHECK_EQ(aco_rt_write(fds[1], "new", 3, -1), 3);
    CHECK_EQ(aco_rt_recv_lend(old, &p, aco_rt_in_ms(2000)), 3);
    CHECK(memcmp(p, "new", 3) == 0);
    CHECK_EQ(aco_rt_lend_return(p), 0);
    /* a reset */
    struct linger lg = {1, 0};
    CHECK_EQ(setsockopt(fds[1], SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
    CHECK_EQ(aco_rt_close(fds[1]), 0);
    ssize_t n = aco_rt_recv_lend(old, &p, aco_rt_in_ms(2000));
    CHECK_EQ(n, -ECONNRESET);
    CHECK_EQ(aco_rt_close(old), 0);
}

/* close(2) behind the runtime's back, the number reused: with nothing
 * queued, a waiting lend finds the new socket's bytes at its first look
 * at the socket (1 s), never later (the header's bound). */
static void raw_close_co(void* arg) {
    ends_t* t = arg;
    const char* p;
    CHECK_EQ(aco_rt_write(t->fds[1], "abc", 3, -1), 3);
    CHECK_EQ(aco_rt_recv_lend(t->fds[0], &p, -1), 3);      /* (multishot armed) */
    CHECK_EQ(aco_rt_lend_return(p), 0);
    int old = t->fds[0];
    CHECK_EQ(close(old), 0);        /* (its peer stays open: no end comes) */
    int fds[2];
    make_pair_at(K_UNIX, old, fds);
    CHECK_EQ(aco_rt_write(fds[1], "new", 3, -1), 3);
    int64_t t0 = aco_rt_now();
    CHECK_EQ(aco_rt_recv_lend(old, &p, aco_rt_in_ms(5000)), 3);
    CHECK(memcmp(p, "new", 3) == 0);
    CHECK_EQ(aco_rt_lend_return(p), 0);
    CHECK_LT(aco_rt_now() - t0, 3000 * MS);
    CHECK_EQ(aco_rt_close(old), 0);
    CHECK_EQ(aco_rt_close(fds[1]), 0);
    CHECK_EQ(aco_rt_close(t->fds[1]), 0);
}

/* aco_rt_close from a thread with no scheduler, of a socket whose rx
 * holds bytes and the end (its multishot over): the rx goes with the
 * close, and the number, reused, gives the new socket's bytes. */
typedef struct {
    int fd;
    int newpeer;
} remote_t;

static void* remote_closer(void* arg) {
    remote_t* r = arg;
    CHECK_EQ(aco_rt_close(r->fd), 0);
    int fds[2];
    make_pair_at(K_UNIX, r->fd, fds);
    CHECK_EQ(write(fds[1], "new", 3), 3);
    r->newpeer = fds[1];
    return NULL;
}

static void remote_close_co(void* arg) {
    ends_t* t = arg;
    const char* p;
    CHECK_EQ(aco_rt_write(t->fds[1], "a", 1, -1), 1);
    CHECK_EQ(aco_rt_recv_lend(t->fds[0], &p, -1), 1);      /* (multishot armed) */
    CHECK_EQ(aco_rt_lend_return(p), 0);
    CHECK_EQ(aco_rt_write(t->fds[1], "x", 1, -1), 1);
    CHECK_EQ(aco_rt_close(t->fds[1]), 0);
    aco_rt_sleep(20 * MS);          /* "x" and the end come to the rx */
    remote_t r = {t->fds[0], -1};
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, remote_closer, &r), 0);
    CHECK_EQ(pthread_join(th, NULL), 0);
    aco_rt_sleep(20 * MS);          /* the close is heard */
    ssize_t n = aco_rt_recv_lend(r.fd, &p, aco_rt_in_ms(500));
    CHECK_EQ(n, 3);
    CHECK(memcmp(p, "new", 3) == 0);
    CHECK_EQ(aco_rt_lend_return(p), 0);
    CHECK_EQ(aco_rt_close(r.fd), 0);
    CHECK_EQ(close(r.newpeer), 0);
}

static aco_rt_co_t* victim;

static void cancel_victim_co(void* arg) {
    ends_t* t = arg;
    const char* p;
    t->res = (int)aco_rt_recv_lend(t->fds[0], &p, -1);
}

static void canceller_co(void* arg) {
    (void)arg;
    aco_rt_sleep(5 * MS);
    CHECK_EQ(aco_rt_cancel(victim), 0);
}

static void ends(aco_rt_sched_t* s) {
    ends_t t = {{0, 0}, 0, 0};
    make_pair(K_TCP, t.fds);
    test_go(s, deadline_co, &t);

    /* close by another co while one waits; a second lender meanwhile */
    t.done = 0;
    spawn_detached(s, blocked_lend_co, &t);
    spawn_detached(s, second_lend_co, &t);
    spawn_detached(s, closer_co, &t);
    test_run(s);
    CHECK_EQ(t.res, -EBADF);
    CHECK_EQ(close(t.fds[1]), 0);

    make_pair(K_TCP, t.fds);
    test_go(s, reuse_co, &t);

    make_pair(K_UNIX, t.fds);
    test_go(s, raw_close_co, &t);

    make_pair(K_UNIX, t.fds);
    test_go(s, remote_close_co, &t);

    make_pair(K_UNIX, t.fds);
    victim = aco_rt_spawn(s, cancel_victim_co, &t);
    CHECK(victim != NULL);
    CHECK_EQ(aco_rt_detach(victim), 0);     /* (cancelled while it waits) */
    spawn_detached(s, canceller_co, &t);
    test_run(s);
    CHECK_EQ(t.res, -ECANCELED);
    CHECK_EQ(aco_rt_close(t.fds[0]), 0);
    CHECK_EQ(aco_rt_close(t.fds[1]), 0);
}

/* ---- 5. returns from another thread, after the scheduler --------------- */

typedef struct {
    const char* bufs[64];
    int n;
} batch_t;

static void* returner(void* arg) {
    batch_t* b = arg;
    for (int i = 0; i < b->n; i++) CHECK_EQ(aco_rt_lend_return(b->bufs[i]), 0);
    return NULL;
}

typedef struct {
    int fds[2];
    batch_t b, later;
} xthread_t;

static void xthread_co(void* arg) {
    xthread_t* x = arg;
    for (int round = 0; round < 3; round++) {
        x->b.n = 0;
        for (int i = 0; i < 64; i++) {
            char c = (char)i;
            CHECK_EQ(aco_rt_write(x->fds[1], &c, 1, -1), 1);
            const char* p;
            CHECK_EQ(aco_rt_recv_lend(x->fds[0], &p, -1), 1);
            CHECK_EQ(p[0], (char)i);
            x->b.bufs[x->b.n++] = p;
        }
        pthread_t t;
        CHECK_EQ(pthread_create(&t, NULL, returner, &x->b), 0);
        CHECK_EQ(pthread_join(t, NULL), 0);
    }
    /* some kept past the scheduler's end */
    for (int i = 0; i < 8; i++) {
        CHECK_EQ(aco_rt_write(x->fds[1], "k", 1, -1), 1);
        const char* p;
        CHECK_EQ(aco_rt_recv_lend(x->fds[0], &p, -1), 1);
        x->later.bufs[x->later.n++] = p;
    }
}

static void xthread(int b) {
    aco_rt_sched_t* s = test_sched_on(b, NULL);
    xthread_t x;
    memset(&x, 0, sizeof(x));
    make_pair(K_TCP, x.fds);
    test_go(s, xthread_co, &x);
    aco_rt_sched_free(s);
    CHECK_EQ(aco_rt_lend_return(x.later.bufs[0]), 0);       /* no scheduler here */
    pthread_t t;
    batch_t rest = x.later;
    for (int i = 0; i < rest.n - 1; i++) rest.bufs[i] = rest.bufs[i + 1];
    rest.n--;
    CHECK_EQ(pthread_create(&t, NULL, returner, &rest), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
    CHECK_EQ(close(x.fds[0]), 0);
    CHECK_EQ(close(x.fds[1]), 0);
}

/* "its bytes are its scheduler's: on another scheduler ... those receives
 * and aco_rt_wait(POLLIN) get -EBUSY at once": a socket lent from on one
 * scheduler, read on another thread's.  Without a multishot (epoll, no
 * ring) the read there is an ordinary one. */
typedef struct {
    int fd, ring, close_there;
    ssize_t rd, rd2;
    int wt;
    int64_t took;
    char buf[16];
} elsewhere_t;

static void lend_once_co(void* arg) {
    elsewhere_t* x = arg;
    const char* p;
    CHECK_EQ(aco_rt_recv_lend(x->fd, &p, aco_rt_in_ms(5000)), 1);
    CHECK_EQ(aco_rt_lend_return(p), 0);
}
static void other_reader_co(void* arg) {
    elsewhere_t* x = arg;
    int64_t t0 = aco_rt_now();
    x->wt = aco_rt_wait(x->fd, POLLIN, aco_rt_in_ms(3000));
    x->rd = aco_rt_read(x->fd, x->buf, sizeof(x->buf), aco_rt_in_ms(3000));
    x->took = aco_rt_now() - t0;
    if (!x->close_there) return;
    /* closed here, the number at once another socket's: that one is
     * nobody's lend (the lending thread has not heard of the close yet) */
    CHECK_EQ(aco_rt_close(x->fd), 0);
    int p[2];
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, p), 0);
    if (p[0] != x->fd) {                /* (usually it is: the lowest free) */
        CHECK_EQ(dup2(p[0], x->fd), x->fd);
        CHECK_EQ(close(p[0]), 0);
    }
    CHECK_EQ(write(p[1], "NEW", 3), 3);
    x->rd2 = aco_rt_read(x->fd, x->buf, sizeof(x->buf), aco_rt_in_ms(3000));
    CHECK_EQ(aco_rt_close(x->fd), 0);
    CHECK_EQ(close(p[1]), 0);
}
static void* other_thread(void* arg) {
    elsewhere_t* x = arg;
    aco_rt_sched_t* s = test_sched_on(test_backend_id, NULL);
    test_go(s, other_reader_co, x);
    aco_rt_sched_free(s);
    return NULL;
}
static void home_reader_co(void* arg) {
    elsewhere_t* x = arg;
    CHECK_EQ(aco_rt_read(x->fd, x->buf, sizeof(x->buf), aco_rt_in_ms(5000)), 5);
    CHECK_EQ(memcmp(x->buf, "hello", 5), 0);
    CHECK_EQ(aco_rt_close(x->fd), 0);
}
static void yield_co(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_sleep(5 * MS), 0);
}
static void elsewhere(int b, int close_there) {
    aco_rt_sched_t* s = test_sched_on(b, NULL);
    int fds[2];
    make_pair(K_TCP, fds);
    elsewhere_t x;
    memset(&x, 0, sizeof(x));
    x.fd = fds[0];
    x.close_there = close_there;
    CHECK_EQ(write(fds[1], "x", 1), 1);
    test_go(s, lend_once_co, &x);
    aco_rt_stats_t st;
    aco_rt_stats(s, &st);
    x.ring = st.lend_ring != 0;
    CHECK_EQ(write(fds[1], "hello", 5), 5);
    usleep(20000);                      /* (the multishot takes them) */
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, other_thread, &x), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
    if (x.ring) {
        CHECK_EQ(x.wt, -EBUSY);
        CHECK_EQ(x.rd, -EBUSY);
        CHECK_LT(x.took, 1000 * MS);    /* at once, not at the deadline */
        if (close_there) {
            CHECK_EQ(x.rd2, 3);         /* (it once said -EBUSY) */
            CHECK_EQ(memcmp(x.buf, "NEW", 3), 0);
            test_go(s, yield_co, NULL); /* (home hears of the close) */
        } else {
            test_go(s, home_reader_co, &x); /* the bytes wait at home */
        }
    } else if (close_there) {
        CHECK_EQ(x.rd2, 3);
    } else {
        CHECK(x.wt > 0 && (x.wt & POLLIN));
        CHECK_EQ(x.rd, 5);
        CHECK_EQ(memcmp(x.buf, "hello", 5), 0);
        CHECK_EQ(close(fds[0]), 0);
    }
    aco_rt_sched_free(s);
    CHECK_EQ(close(fds[1]), 0);
}

/* aco_rt_close on another thread of a socket whose bytes this
 * scheduler's lend holds, the number at once a new socket's, and then a
 * read or a lend here before the loop ran (the closer is joined from the
 * co): the new socket's bytes, never the old one's (they once came
 * first). */
typedef struct {
    int fd, peer, new_peer, lend;
} reuse_t;
static void* closer_reuser(void* arg) {
    reuse_t* x = arg;
    CHECK_EQ(aco_rt_close(x->fd), 0);
    int p[2];
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, p), 0);
    if (p[1] == x->fd) {                /* (the ends are alike) */
        p[1] = p[0];
        p[0] = x->fd;
    }
    if (p[0] != x->fd) {
        CHECK_EQ(dup2(p[0], x->fd), x->fd);
        CHECK_EQ(close(p[0]), 0);
    }
    CHECK_EQ(write(p[1], "NEW", 3), 3);
    x->new_peer = p[1];
    return NULL;
}
static void reuse_reader_co(void* arg) {
    reuse_t* x = arg;
    const char* p;
    CHECK_EQ(aco_rt_recv_lend(x->fd, &p, aco_rt_in_ms(5000)), 1);   /* (arms it) */
    CHECK_EQ(aco_rt_lend_return(p), 0);
    CHECK_EQ(write(x->peer, "old", 3), 3);
    CHECK_EQ(aco_rt_sleep(20 * MS), 0);     /* (the loop takes them in) */
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, closer_reuser, x), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);     /* (the thread waits: no loop) */
    if (x->lend) {
        CHECK_EQ(aco_rt_recv_lend(x->fd, &p, aco_rt_in_ms(3000)), 3);
        CHECK_EQ(memcmp(p, "NEW", 3), 0);
        CHECK_EQ(aco_rt_lend_return(p), 0);
    } else {
        char b[16];
        CHECK_EQ(aco_rt_read(x->fd, b, sizeof(b), aco_rt_in_ms(3000)), 3);
        CHECK_EQ(memcmp(b, "NEW", 3), 0);
    }
    CHECK_EQ(aco_rt_close(x->fd), 0);
    CHECK_EQ(close(x->new_peer), 0);
}
static void reuse_remote(int b, int lend) {
    aco_rt_sched_t* s = test_sched_on(b, NULL);
    int fds[2];
    make_pair(K_TCP, fds);
    reuse_t x = {fds[0], fds[1], -1, lend};
    CHECK_EQ(write(fds[1], "x", 1), 1);
    test_go(s, reuse_reader_co, &x);
    aco_rt_sched_free(s);
    CHECK_EQ(close(fds[1]), 0);
}

/* A co parked in a lend from the heap (a pipe's: no ring) when
 * aco_rt_sched_free destroys it: the buffer its read holds is freed once
 * the backend is gone (ASan's leak check; it once leaked 16 KiB), and
 * bytes written after are nobody's. */
static void parked_lend_co(void* arg) {
    const char* p;
    aco_rt_recv_lend(*(int*)arg, &p, -1);
    CHECK(0);                           /* (never comes back) */
}
static void stop_co(void* arg) {
    for (int i = 0; i < 4; i++) aco_rt_yield();
    aco_rt_sched_stop((aco_rt_sched_t*)arg);
}
static void freed_parked(int b) {
    aco_rt_sched_t* s = test_sched_on(b, NULL);
    int p[2];
    CHECK_EQ(pipe(p), 0);
    for (int i = 0; i < 3; i++) CHECK(aco_rt_spawn(s, parked_lend_co, &p[0]) != NULL);
    aco_rt_co_t* st = aco_rt_spawn(s, stop_co, s);
    CHECK(st != NULL);
    CHECK_EQ(aco_rt_detach(st), 0);
    CHECK_EQ(aco_rt_sched_run(s), 0);
    aco_rt_sched_free(s);
    CHECK_EQ(write(p[1], "late", 4), 4);
    CHECK_EQ(close(p[0]), 0);
    CHECK_EQ(close(p[1]), 0);
}

static void body(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    whole_stream(s, K_TCP, 0);
    whole_stream(s, K_UNIX, 0);
    whole_stream(s, K_PIPE, 0);
    whole_stream(s, K_TCP, 1);
    mixed(s, K_TCP);
    mixed(s, K_UNIX);
    poll_armed(s);
    ends(s);
}

int main(void) {
    const char* p;
    CHECK_EQ(aco_rt_recv_lend(0, &p, -1), -EPERM);      /* not in a co */
    test_on_backends(NULL, body, NULL);
    int bs[8];
    int n = test_backends(bs, 8);
    for (int i = 0; i < n; i++) {
        test_backend_id = bs[i];
        test_backend_label = test_backend_str(bs[i]);
        xthread(bs[i]);
        elsewhere(bs[i], 0);
        elsewhere(bs[i], 1);
        freed_parked(bs[i]);
        reuse_remote(bs[i], 0);
        reuse_remote(bs[i], 1);
    }
    printf("test_lend: ok\n");
    return 0;
}
