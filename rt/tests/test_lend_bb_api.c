/* test_lend_bb_api.c - lent receives from aco_rt.h alone, on one
 * scheduler: refusals (-EPERM, -EINVAL, a bad descriptor); a stream lent
 * whole and in order while the reader keeps up to 200 buffers (more than
 * the ring's 128), each buffer all ACO_RT_LEND_SIZE bytes the caller's and
 * none shared with another lent one; the counters (lends, lend_ring,
 * lend_heap); the end (0 again at every call, *data left as it was);
 * datagrams cut at ACO_RT_LEND_SIZE and empty ones; deadlines (-1, 0,
 * negative, INT64_MIN, a wait never early, bytes that come after a
 * timed-out lend not lost); a cancel (the bytes stay for another co);
 * aco_rt_close under a lend; one waiter at a time while a multishot holds
 * the socket (-EBUSY; aco_rt_wait not counted) and none of that on epoll;
 * lends mixed with MSG_PEEK, read, readv, MSG_WAITALL, wait(POLLIN), poll,
 * bufio, and the refused flags (-EOPNOTSUPP); a pipe; a reset; buffers
 * returned from a plain thread and after the scheduler is freed. */
#include "rt_test.h"

#include <pthread.h>
#include <sys/uio.h>
#include <sys/utsname.h>

static int64_t in_ms(int ms) { return aco_rt_now() + ms * MS; }
static int ring_expected;       /* io_uring on a kernel of 6.0 or later */
static int backend_uring;

static int kernel_at_least(int maj, int min) {
    struct utsname u;
    if (uname(&u) != 0) return 0;
    int a = 0, b = 0;
    if (sscanf(u.release, "%d.%d", &a, &b) != 2) return 0;
    return a > maj || (a == maj && b >= min);
}

static void stats(aco_rt_stats_t* st) {
    memset(st, 0, sizeof(*st));
    aco_rt_stats(NULL, st);
}

/* ---- a stream, many buffers kept ---- */
#define STREAM_BYTES (FEW ? 400000 : 1600000)
#define KEEP 200
static int sv[2];
static const char* kept[KEEP];
static ssize_t kept_n[KEEP];

static unsigned char pat(size_t i) { return (unsigned char)(i * 7 + (i >> 9)); }

static void stream_writer(void* arg) {
    (void)arg;
    static unsigned char buf[40000];
    uint64_t rnd = 12345;
    size_t off = 0;
    while (off < STREAM_BYTES) {
        size_t n = 1 + test_rand(&rnd) % sizeof(buf);
        if (n > STREAM_BYTES - off) n = STREAM_BYTES - off;
        for (size_t i = 0; i < n; i++) buf[i] = pat(off + i);
        CHECK_EQ(aco_rt_write(sv[1], buf, n, in_ms(20000)), (long long)n);
        off += n;
        if (test_rand(&rnd) % 4 == 0) CHECK_EQ(aco_rt_sleep(test_rand(&rnd) % 200000), 0);
    }
    CHECK_EQ(aco_rt_shutdown(sv[1], SHUT_WR, -1), 0);
}

static void stream_reader(void* arg) {
    (void)arg;
    aco_rt_stats_t a, b;
    stats(&a);
    size_t off = 0;
    int nk = 0, lends = 0;
    for (;;) {
        const char* d = (const char*)&nk;       /* a sentinel */
        ssize_t n = aco_rt_recv_lend(sv[0], &d, in_ms(20000));
        if (n == 0) {
            CHECK(d == (const char*)&nk);
            break;
        }
        CHECK_GE(n, 1);
        CHECK_LE(n, ACO_RT_LEND_SIZE);
        CHECK(d != NULL && d != (const char*)&nk);
        lends++;
        for (ssize_t i = 0; i < n; i++)
            if ((unsigned char)d[i] != pat(off + (size_t)i))
                TEST_FAIL_AT(__FILE__, __LINE__, "byte %zu: %d, want %d", off + (size_t)i,
                             (unsigned char)d[i], pat(off + (size_t)i));
        off += (size_t)n;
        /* all ACO_RT_LEND_SIZE bytes are the caller's: stamp them all */
        memset((char*)d, (unsigned char)(nk + 1), ACO_RT_LEND_SIZE);
        kept[nk] = d;
        kept_n[nk] = n;
        nk++;
        if (nk == KEEP) {
            /* none of the kept buffers was lent twice or written behind */
            for (int i = 0; i < nk; i++) {
                for (size_t j = 0; j < ACO_RT_LEND_SIZE; j += 997)
                    CHECK_EQ((unsigned char)kept[i][j], (unsigned char)(i + 1));
                CHECK_EQ((unsigned char)kept[i][ACO_RT_LEND_SIZE - 1], (unsigned char)(i + 1));
                CHECK_EQ(aco_rt_lend_return(kept[i]), 0);
            }
            nk = 0;
        }
    }
    CHECK_EQ(off, STREAM_BYTES);
    for (int i = 0; i < nk; i++) {
        CHECK_EQ((unsigned char)kept[i][0], (unsigned char)(i + 1));
        CHECK_EQ(aco_rt_lend_return(kept[i]), 0);
    }
    /* the end again at every later call, nothing lent */
    for (int i = 0; i < 3; i++) {
        const char* d = (const char*)&off;
        CHECK_EQ(aco_rt_recv_lend(sv[0], &d, in_ms(1000)), 0);
        CHECK(d == (const char*)&off);
    }
    const char* d0 = (const char*)&off;
    CHECK_EQ(aco_rt_recv_lend(sv[0], &d0, 0), 0);
    CHECK(d0 == (const char*)&off);
    stats(&b);
    CHECK_EQ(b.lends - a.lends, (uint64_t)lends);
    CHECK_LE(b.lend_heap - a.lend_heap, b.lends - a.lends);
    if (ring_expected) {
        CHECK_EQ(b.lend_ring, 1);
        /* more than 128 kept: some came from the heap */
        if (lends > 128 + 10) CHECK_GE(b.lend_heap - a.lend_heap, 1);
        CHECK_LT(b.lend_heap - a.lend_heap, b.lends - a.lends);
    } else {
        CHECK_EQ(b.lend_ring, 0);
        CHECK_EQ(b.lend_heap - a.lend_heap, b.lends - a.lends);
    }
}

static void stream_case(aco_rt_sched_t* s) {
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    aco_rt_stats_t st;
    stats(&st);
    CHECK_EQ(st.lend_ring, 0);      /* no lend yet */
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, stream_reader, NULL)), 0);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, stream_writer, NULL)), 0);
    test_run(s);
    CHECK_EQ(aco_rt_close(sv[0]), 0);
    CHECK_EQ(aco_rt_close(sv[1]), 0);
}

/* ---- refusals ---- */
static void refusals_co(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_recv_lend(sv[0], NULL, in_ms(10)), -EINVAL);
    const char* d = (const char*)&d;
    CHECK_EQ(aco_rt_recv_lend(-1, &d, in_ms(10)), -EBADF);
    CHECK(d == (const char*)&d);
    int nfd = dup(0);
    CHECK_GE(nfd, 0);
    CHECK_EQ(close(nfd), 0);
    CHECK_EQ(aco_rt_recv_lend(nfd, &d, in_ms(10)), -EBADF);
    CHECK(d == (const char*)&d);
    CHECK_EQ(aco_rt_lend_return(NULL), -EINVAL);
}

static void refusals_case(aco_rt_sched_t* s) {
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    const char* d = (const char*)&d;
    CHECK_EQ(write(sv[1], "x", 1), 1);
    /* outside a co: -EPERM, nothing taken */
    CHECK_EQ(aco_rt_recv_lend(sv[0], &d, -1), -EPERM);
    CHECK_EQ(aco_rt_recv_lend(sv[0], &d, 0), -EPERM);
    CHECK(d == (const char*)&d);
    CHECK_EQ(aco_rt_lend_return(NULL), -EINVAL);
    test_go(s, refusals_co, NULL);
    char c = 0;
    CHECK_EQ(recv(sv[0], &c, 1, MSG_DONTWAIT), 1);
    CHECK_EQ(c, 'x');
    CHECK_EQ(aco_rt_close(sv[0]), 0);
    CHECK_EQ(aco_rt_close(sv[1]), 0);
}

/* ---- deadlines ---- */
static aco_rt_sem_t late_go;
static void deadline_co(void* arg) {
    (void)arg;
    const char* d = (const char*)&d;
    int64_t dls[] = {0, -2, -1000000, INT64_MIN, aco_rt_now() - 1};
    for (size_t i = 0; i < sizeof(dls) / sizeof(dls[0]); i++) {
        CHECK_EQ(aco_rt_recv_lend(sv[0], &d, dls[i]), -ETIMEDOUT);
        CHECK(d == (const char*)&d);
    }
    int64_t t0 = aco_rt_now(), dl = t0 + 30 * MS;
    CHECK_EQ(aco_rt_recv_lend(sv[0], &d, dl), -ETIMEDOUT);
    CHECK_GE(aco_rt_now(), dl);
    CHECK(d == (const char*)&d);
    /* again, now that a multishot may be armed */
    dl = aco_rt_now() + 20 * MS;
    CHECK_EQ(aco_rt_recv_lend(sv[0], &d, dl), -ETIMEDOUT);
    CHECK_GE(aco_rt_now(), dl);
    CHECK_EQ(aco_rt_recv_lend(sv[0], &d, 0), -ETIMEDOUT);
    /* bytes that come after a timed-out lend are not lost */
    CHECK_EQ(aco_rt_write(sv[1], "hello", 5, -1), 5);
    CHECK_EQ(aco_rt_sleep(5 * MS), 0);
    /* bytes there: a passed deadline still lends them */
    CHECK_EQ(aco_rt_recv_lend(sv[0], &d, 0), 5);
    CHECK(memcmp(d, "hello", 5) == 0);
    CHECK_EQ(aco_rt_lend_return(d), 0);
    CHECK_EQ(aco_rt_write(sv[1], "abc", 3, -1), 3);
    CHECK_EQ(aco_rt_recv_lend(sv[0], &d, -2), 3);
    CHECK(memcmp(d, "abc", 3) == 0);
    CHECK_EQ(aco_rt_lend_return(d), 0);
    /* INT64_MAX: no limit (a writer comes in 10 ms), not "passed" */
    aco_rt_sem_post(&late_go);
    CHECK_EQ(aco_rt_recv_lend(sv[0], &d, INT64_MAX), 2);
    CHECK(memcmp(d, "zz", 2) == 0);
    CHECK_EQ(aco_rt_lend_return(d), 0);
}
static void late_writer(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_sem_wait(&late_go, in_ms(10000)), 0);
    CHECK_EQ(aco_rt_sleep(10 * MS), 0);
    CHECK_EQ(aco_rt_write(sv[1], "zz", 2, -1), 2);
}

static void deadline_case(aco_rt_sched_t* s) {
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    aco_rt_sem_init(&late_go, 0);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, deadline_co, NULL)), 0);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, late_writer, NULL)), 0);
    test_run(s);
    CHECK_EQ(aco_rt_close(sv[0]), 0);
    CHECK_EQ(aco_rt_close(sv[1]), 0);
}

/* ---- cancel, close, one waiter ---- */
static aco_rt_co_t* waiter;
static int waiter_res;
static int waiter_stage;
static void waiter_fn(void* arg) {
    int expect_cancel = (int)(intptr_t)arg;
    const char* d = (const char*)&d;
    waiter_stage = 1;
    waiter_res = (int)aco_rt_recv_lend(sv[0], &d, in_ms(5000));
    CHECK(d == (const char*)&d);
    if (expect_cancel) {
        /* bytes are there now: still -ECANCELED at once */
        CHECK_EQ(aco_rt_recv_lend(sv[0], &d, in_ms(5000)), -ECANCELED);
        CHECK_EQ(aco_rt_recv_lend(sv[0], &d, 0), -ECANCELED);
        char c;
        CHECK_EQ(aco_rt_recv(sv[0], &c, 1, 0, 0), -ECANCELED);
        CHECK(d == (const char*)&d);
    }
    waiter_stage = 2;
}

static void cancel_co(void* arg) {
    (void)arg;
    const char* d;
    /* arm (a lend that takes bytes) */
    CHECK_EQ(aco_rt_write(sv[1], "a", 1, -1), 1);
    CHECK_EQ(aco_rt_recv_lend(sv[0], &d, in_ms(1000)), 1);
    CHECK_EQ(aco_rt_lend_return(d), 0);
    waiter = aco_rt_spawn(NULL, waiter_fn, (void*)(intptr_t)1);
    CHECK(waiter != NULL);
    while (waiter_stage < 1) CHECK_EQ(aco_rt_yield(), 0);
    CHECK_EQ(aco_rt_sleep(2 * MS), 0);
    CHECK_EQ(aco_rt_cancel(waiter), 0);
    CHECK_EQ(aco_rt_write(sv[1], "bcd", 3, -1), 3);
    CHECK_EQ(aco_rt_join(waiter, in_ms(5000)), 0);
    CHECK_EQ(waiter_res, -ECANCELED);
    /* the bytes stayed for the next reader */
    CHECK_EQ(aco_rt_recv_lend(sv[0], &d, in_ms(1000)), 3);
    CHECK(memcmp(d, "bcd", 3) == 0);
    CHECK_EQ(aco_rt_lend_return(d), 0);
}

static void busy_co(void* arg) {
    (void)arg;
    const char* d;
    CHECK_EQ(aco_rt_write(sv[1], "a", 1, -1), 1);
    CHECK_EQ(aco_rt_recv_lend(sv[0], &d, in_ms(1000)), 1);
    CHECK_EQ(aco_rt_lend_return(d), 0);
    waiter_stage = 0;
    waiter = aco_rt_spawn(NULL, waiter_fn, NULL);
    CHECK(waiter != NULL);
    while (waiter_stage < 1) CHECK_EQ(aco_rt_yield(), 0);
    CHECK_EQ(aco_rt_sleep(2 * MS), 0);
    char buf[8];
    struct iovec iov = {buf, sizeof(buf)};
    const char* e = (const char*)&e;
    if (ring_expected) {
        /* another co waits in a lend: one at a time, -EBUSY at once */
        int64_t t0 = aco_rt_now();
        CHECK_EQ(aco_rt_recv_lend(sv[0], &e, in_ms(3000)), -EBUSY);
        CHECK(e == (const char*)&e);
        CHECK_EQ(aco_rt_recv(sv[0], buf, sizeof(buf), 0, in_ms(3000)), -EBUSY);
        CHECK_EQ(aco_rt_read(sv[0], buf, sizeof(buf), in_ms(3000)), -EBUSY);
        CHECK_EQ(aco_rt_readv(sv[0], &iov, 1, in_ms(3000)), -EBUSY);
        CHECK_LT(aco_rt_now() - t0, 1000 * MS);
    } else {
        /* no multishot: nothing refused, a second waiter times out */
        CHECK_EQ(aco_rt_recv_lend(sv[0], &e, in_ms(5)), -ETIMEDOUT);
        CHECK_EQ(aco_rt_recv(sv[0], buf, sizeof(buf), 0, in_ms(5)), -ETIMEDOUT);
    }
    /* aco_rt_wait is not counted */
    CHECK_EQ(aco_rt_wait(sv[0], POLLIN, in_ms(5)), -ETIMEDOUT);
    CHECK_EQ(aco_rt_wait(sv[0], POLLOUT, in_ms(5)), POLLOUT);
    CHECK_EQ(waiter_stage, 1);
    /* close under the waiting lend: -EBADF */
    CHECK_EQ(aco_rt_close(sv[0]), 0);
    CHECK_EQ(aco_rt_join(waiter, in_ms(5000)), 0);
    CHECK_EQ(waiter_res, -EBADF);
    /* the number again, a new socket: its own bytes only */
    int old = sv[0];
    int nv[2];
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, nv), 0);
    if (nv[0] != old) {
        CHECK_EQ(dup2(nv[0], old), old);
        CHECK_EQ(close(nv[0]), 0);
    }
    CHECK_EQ(aco_rt_write(sv[1], "OLD", 3, -1), -EPIPE);
    CHECK_EQ(aco_rt_write(nv[1], "new", 3, -1), 3);
    CHECK_EQ(aco_rt_recv_lend(old, &d, in_ms(1000)), 3);
    CHECK(memcmp(d, "new", 3) == 0);
    CHECK_EQ(aco_rt_lend_return(d), 0);
    CHECK_EQ(aco_rt_close(nv[1]), 0);
    CHECK_EQ(aco_rt_recv_lend(old, &d, in_ms(1000)), 0);
    sv[0] = old;
}

static void cancel_case(aco_rt_sched_t* s) {
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    waiter_stage = 0;
    test_go(s, cancel_co, NULL);
    CHECK_EQ(aco_rt_close(sv[0]), 0);
    CHECK_EQ(aco_rt_close(sv[1]), 0);
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    test_go(s, busy_co, NULL);
    CHECK_EQ(aco_rt_close(sv[0]), 0);
    CHECK_EQ(aco_rt_close(sv[1]), 0);
}

/* ---- mixing with the other receives ---- */
static void mix_co(void* arg) {
    (void)arg;
    const char* d;
    char buf[64];
    CHECK_EQ(aco_rt_write(sv[1], "A", 1, -1), 1);
    CHECK_EQ(aco_rt_recv_lend(sv[0], &d, in_ms(1000)), 1);
    CHECK_EQ(d[0], 'A');
    CHECK_EQ(aco_rt_lend_return(d), 0);
    /* bytes come while no call waits (with io_uring: into the ring) */
    CHECK_EQ(aco_rt_write(sv[1], "0123456789", 10, -1), 10);
    CHECK_EQ(aco_rt_sleep(10 * MS), 0);
    CHECK_EQ(aco_rt_write(sv[1], "abcdefghij", 10, -1), 10);
    CHECK_EQ(aco_rt_sleep(10 * MS), 0);
    CHECK_EQ(aco_rt_wait(sv[0], POLLIN, in_ms(1000)) & POLLIN, POLLIN);
    struct pollfd p = {sv[0], POLLIN, 0};
    CHECK_EQ(aco_rt_poll(&p, 1, in_ms(1000)), 1);
    CHECK_EQ(p.revents & POLLIN, POLLIN);
    CHECK_EQ(aco_rt_recv(sv[0], buf, 4, MSG_PEEK, in_ms(1000)), 4);
    CHECK(memcmp(buf, "0123", 4) == 0);
    CHECK_EQ(aco_rt_recv(sv[0], buf, 3, MSG_PEEK | MSG_DONTWAIT, in_ms(1000)), 3);
    CHECK(memcmp(buf, "012", 3) == 0);
    if (ring_expected) {
        CHECK_EQ(aco_rt_recv(sv[0], buf, 4, MSG_TRUNC, in_ms(1000)), -EOPNOTSUPP);
        CHECK_EQ(aco_rt_recv(sv[0], buf, 4, MSG_OOB, in_ms(1000)), -EOPNOTSUPP);
        struct iovec mi = {buf, 4};
        struct msghdr mh;
        memset(&mh, 0, sizeof(mh));
        mh.msg_iov = &mi;
        mh.msg_iovlen = 1;
        CHECK_EQ(aco_rt_recvmsg(sv[0], &mh, 0, in_ms(1000)), -EOPNOTSUPP);
    }
    CHECK_EQ(aco_rt_read(sv[0], buf, 3, in_ms(1000)), 3);
    CHECK(memcmp(buf, "012", 3) == 0);
    struct iovec iov[2] = {{buf, 2}, {buf + 2, 2}};
    CHECK_EQ(aco_rt_readv(sv[0], iov, 2, in_ms(1000)), 4);
    CHECK(memcmp(buf, "3456", 4) == 0);
    CHECK_EQ(aco_rt_recv(sv[0], buf, 1, MSG_DONTWAIT | MSG_NOSIGNAL, in_ms(1000)), 1);
    CHECK_EQ(buf[0], '7');
    /* MSG_WAITALL across queued bytes and bytes still to come */
    CHECK_EQ(aco_rt_write(sv[1], "KLM", 3, -1), 3);
    CHECK_EQ(aco_rt_recv(sv[0], buf, 15, MSG_WAITALL, in_ms(1000)), 15);
    CHECK(memcmp(buf, "89abcdefghijKLM", 15) == 0);
    /* the buffered reader */
    CHECK_EQ(aco_rt_write(sv[1], "line one\nline two\nrest", 23, -1), 23);
    CHECK_EQ(aco_rt_sleep(5 * MS), 0);
    aco_rt_bufio_t* b = aco_rt_bufio_new(sv[0], 0, 0);
    CHECK(b != NULL);
    const char* v;
    CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 0, &v, in_ms(1000)), 9);
    CHECK(memcmp(v, "line one\n", 9) == 0);
    CHECK_EQ(aco_rt_bufio_read_until(b, '\n', 0, &v, in_ms(1000)), 9);
    CHECK(memcmp(v, "line two\n", 9) == 0);
    CHECK_EQ(aco_rt_bufio_read_full(b, buf, 4, in_ms(1000)), 4);
    CHECK(memcmp(buf, "rest", 4) == 0);
    aco_rt_bufio_free(b);
    /* then lends again, in order */
    CHECK_EQ(aco_rt_write(sv[1], "tail", 4, -1), 4);
    CHECK_EQ(aco_rt_recv_lend(sv[0], &d, in_ms(1000)), 4);
    CHECK(memcmp(d, "tail", 4) == 0);
    CHECK_EQ(aco_rt_lend_return(d), 0);
    /* MSG_DONTWAIT with nothing there: one try, -EAGAIN, as recv(2) */
    int64_t t0 = aco_rt_now();
    CHECK_EQ(aco_rt_recv(sv[0], buf, 4, MSG_DONTWAIT, in_ms(1000)), -EAGAIN);
    CHECK_EQ(aco_rt_recv(sv[0], buf, 4, MSG_DONTWAIT | MSG_PEEK, in_ms(1000)), -EAGAIN);
    CHECK_EQ(aco_rt_recv(sv[0], buf, 0, MSG_DONTWAIT, in_ms(1000)), -EAGAIN);
    CHECK_EQ(aco_rt_recv(sv[0], buf, 0, MSG_DONTWAIT | MSG_PEEK, in_ms(1000)), -EAGAIN);
    CHECK_LT(aco_rt_now() - t0, 500 * MS);
    /* ... and with bytes there, they come, in order */
    CHECK_EQ(aco_rt_write(sv[1], "DW", 2, -1), 2);
    CHECK_EQ(aco_rt_sleep(5 * MS), 0);
    CHECK_EQ(aco_rt_recv(sv[0], buf, 0, MSG_DONTWAIT, in_ms(1000)), 0);
    CHECK_EQ(aco_rt_recv(sv[0], buf, 1, MSG_DONTWAIT, in_ms(1000)), 1);
    CHECK_EQ(buf[0], 'D');
    CHECK_EQ(aco_rt_recv_lend(sv[0], &d, 0), 1);
    CHECK_EQ(d[0], 'W');
    CHECK_EQ(aco_rt_lend_return(d), 0);
    /* a poll that waits is woken by bytes that come later */
    p.revents = 0;
    CHECK_EQ(aco_rt_poll(&p, 1, in_ms(5)), -ETIMEDOUT);
}

static void mix_case(aco_rt_sched_t* s) {
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    test_go(s, mix_co, NULL);
    CHECK_EQ(aco_rt_close(sv[0]), 0);
    CHECK_EQ(aco_rt_close(sv[1]), 0);
}

/* ---- datagrams, a pipe, a reset ---- */
static void dgram_co(void* arg) {
    int type = (int)(intptr_t)arg;
    aco_rt_stats_t a, b;
    stats(&a);
    static char big[20000];
    memset(big, 'q', sizeof(big));
    big[ACO_RT_LEND_SIZE - 1] = 'E';
    const char* d;
    CHECK_EQ(aco_rt_send(sv[1], big, sizeof(big), 0, -1), (long long)sizeof(big));
    CHECK_EQ(aco_rt_send(sv[1], "", 0, 0, -1), 0);
    CHECK_EQ(aco_rt_send(sv[1], "xy", 2, 0, -1), 2);
    CHECK_EQ(aco_rt_recv_lend(sv[0], &d, in_ms(1000)), ACO_RT_LEND_SIZE);
    CHECK_EQ(d[0], 'q');
    CHECK_EQ(d[ACO_RT_LEND_SIZE - 1], 'E');
    CHECK_EQ(aco_rt_lend_return(d), 0);
    const char* e = (const char*)&e;
    CHECK_EQ(aco_rt_recv_lend(sv[0], &e, in_ms(1000)), 0);
    /* an empty datagram: 0, then the next one (the cut one's tail gone) */
    if (e != (const char*)&e) CHECK_EQ(aco_rt_lend_return(e), 0);
    CHECK_EQ(aco_rt_recv_lend(sv[0], &d, in_ms(1000)), 2);
    CHECK(memcmp(d, "xy", 2) == 0);
    CHECK_EQ(aco_rt_lend_return(d), 0);
    stats(&b);
    CHECK_GE(b.lends - a.lends, 2);
    CHECK_EQ(b.lend_heap - a.lend_heap, b.lends - a.lends);
    (void)type;
}

static void pipe_co(void* arg) {
    int* p = arg;
    const char* d;
    CHECK_EQ(aco_rt_write(p[1], "pipe!", 5, -1), 5);
    CHECK_EQ(aco_rt_recv_lend(p[0], &d, in_ms(1000)), 5);
    CHECK(memcmp(d, "pipe!", 5) == 0);
    CHECK_EQ(aco_rt_lend_return(d), 0);
    CHECK_EQ(aco_rt_recv_lend(p[0], &d, in_ms(5)), -ETIMEDOUT);
    CHECK_EQ(aco_rt_close(p[1]), 0);
    CHECK_EQ(aco_rt_recv_lend(p[0], &d, in_ms(1000)), 0);
}

static void reset_co(void* arg) {
    (void)arg;
    const char* d;
    CHECK_EQ(aco_rt_write(sv[1], "x", 1, -1), 1);
    CHECK_EQ(aco_rt_recv_lend(sv[0], &d, in_ms(1000)), 1);
    CHECK_EQ(aco_rt_lend_return(d), 0);
    /* the peer closes with bytes of ours unread: a reset */
    CHECK_EQ(aco_rt_write(sv[0], "unread", 6, -1), 6);
    CHECK_EQ(aco_rt_close(sv[1]), 0);
    CHECK_EQ(aco_rt_recv_lend(sv[0], &d, in_ms(1000)), -ECONNRESET);
    CHECK_EQ(aco_rt_recv_lend(sv[0], &d, in_ms(1000)), 0);
    CHECK_EQ(aco_rt_recv_lend(sv[0], &d, in_ms(1000)), 0);
}

/* SHUT_RD by another co: a parked lend, and a parked recv on a lending
 * socket, see the end of input */
static int shut_stage;
static ssize_t shut_rc[2];
static void shut_lender(void* arg) {
    (void)arg;
    const char* d;
    CHECK_EQ(aco_rt_write(sv[1], "s", 1, -1), 1);
    CHECK_EQ(aco_rt_recv_lend(sv[0], &d, in_ms(1000)), 1);
    CHECK_EQ(aco_rt_lend_return(d), 0);
    shut_stage = 1;
    const char* e = (const char*)&e;
    shut_rc[0] = aco_rt_recv_lend(sv[0], &e, in_ms(3000));
    CHECK(e == (const char*)&e);
    shut_stage = 2;
}
static void shut_co(void* arg) {
    (void)arg;
    while (shut_stage < 1) CHECK_EQ(aco_rt_yield(), 0);
    CHECK_EQ(aco_rt_sleep(3 * MS), 0);
    int64_t t0 = aco_rt_now();
    CHECK_EQ(aco_rt_shutdown(sv[0], SHUT_RD, -1), 0);
    while (shut_stage < 2) CHECK_EQ(aco_rt_sleep(1 * MS), 0);
    CHECK_EQ(shut_rc[0], 0);
    CHECK_LT(aco_rt_now() - t0, 1000 * MS);
    char b;
    CHECK_EQ(aco_rt_recv(sv[0], &b, 1, 0, in_ms(1000)), 0);
    CHECK_EQ(aco_rt_wait(sv[0], POLLIN, in_ms(1000)) & POLLIN, POLLIN);
}

static void misc_case(aco_rt_sched_t* s) {
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    shut_stage = 0;
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, shut_lender, NULL)), 0);
    test_go(s, shut_co, NULL);
    CHECK_EQ(aco_rt_close(sv[0]), 0);
    CHECK_EQ(aco_rt_close(sv[1]), 0);
    int types[2] = {SOCK_DGRAM, SOCK_SEQPACKET};
    for (int i = 0; i < 2; i++) {
        CHECK_EQ(socketpair(AF_UNIX, types[i], 0, sv), 0);
        test_go(s, dgram_co, (void*)(intptr_t)types[i]);
        CHECK_EQ(aco_rt_close(sv[0]), 0);
        CHECK_EQ(aco_rt_close(sv[1]), 0);
    }
    static int p[2];
    CHECK_EQ(pipe(p), 0);
    test_go(s, pipe_co, p);
    CHECK_EQ(aco_rt_close(p[0]), 0);
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    test_go(s, reset_co, NULL);
    CHECK_EQ(aco_rt_close(sv[0]), 0);
}

/* ---- returns from elsewhere ---- */
#define HELD 40
static const char* held[HELD];
static void hold_co(void* arg) {
    (void)arg;
    static char buf[4096];
    memset(buf, 'h', sizeof(buf));
    for (int i = 0; i < HELD; i++) {
        CHECK_EQ(aco_rt_write(sv[1], buf, 100 + (size_t)i, -1), 100 + i);
        CHECK_EQ(aco_rt_recv_lend(sv[0], &held[i], in_ms(1000)), 100 + i);
    }
    /* bytes left queued in the runtime for sched_free to drop */
    CHECK_EQ(aco_rt_write(sv[1], buf, sizeof(buf), -1), (long long)sizeof(buf));
    CHECK_EQ(aco_rt_sleep(5 * MS), 0);
}
static void* return_thread(void* arg) {
    (void)arg;
    for (int i = 0; i < HELD / 2; i++) {
        CHECK_EQ(held[i][0], 'h');
        memset((char*)held[i], 0, ACO_RT_LEND_SIZE);
        CHECK_EQ(aco_rt_lend_return(held[i]), 0);
    }
    return NULL;
}

static void returns_body(aco_rt_sched_t* s) {
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    test_go(s, hold_co, NULL);
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, return_thread, NULL), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
}

static void body(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    backend_uring = test_backend_id == ACO_RT_BACKEND_URING;
    ring_expected = backend_uring && kernel_at_least(6, 0);
    stream_case(s);
    refusals_case(s);
    deadline_case(s);
    cancel_case(s);
    mix_case(s);
    misc_case(s);
}

int main(void) {
    test_on_backends(NULL, body, NULL);
    /* buffers kept past their scheduler's free, returned after it */
    int bs[8];
    int nb = test_backends(bs, 8);
    for (int b = 0; b < nb; b++) {
        test_backend_label = test_backend_str(bs[b]);
        test_backend_id = bs[b];
        aco_rt_sched_t* s = test_sched_on(bs[b], NULL);
        returns_body(s);
        aco_rt_sched_free(s);
        for (int i = HELD / 2; i < HELD; i++) {
            CHECK_EQ(held[i][0], 'h');
            CHECK_EQ(aco_rt_lend_return(held[i]), 0);
        }
        CHECK_EQ(close(sv[0]), 0);
        CHECK_EQ(close(sv[1]), 0);
        test_backend_label = "";
    }
    puts("test_lend_bb_api: ok");
    return 0;
}
