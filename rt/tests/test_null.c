/* test_null.c - a NULL where a call does not say what NULL means is refused
 * (aco_rt.h, "NULL"; aco_rt_pthread.h, "EINVAL"): -EINVAL before anything
 * else (-EFAULT for a buffer or I/O vector of a non-zero size), the zero of
 * a call without an error, nothing done by one without a result; in a co
 * on both backends and outside cos; a size over SSIZE_MAX: -EFAULT at
 * once, nothing moved.  (aco_rt_tls.h's are in test_tls.) */
#define _GNU_SOURCE
#include "rt_test.h"
#include "../aco_rt_pthread.h"

#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <poll.h>
#include <string.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

static void no_init(void) {}
static int no_main(int argc, char** argv) { (void)argc, (void)argv; return 7; }

/* The calls that take a scheduler's co or none: in_co says which. */
static void core_calls(int in_co) {
    int perm = in_co ? 0 : -EPERM;      /* (outside: NULL is still first) */
    (void)perm;
    CHECK_EQ(aco_rt_key_create(NULL, NULL), -EINVAL);
    CHECK_EQ(aco_rt_sched_run(NULL), -EINVAL);         /* (its -EPERM is not NULL's) */
    aco_rt_timer_init(NULL);
    aco_rt_stats(NULL, NULL);
    CHECK(aco_rt_group_sched(NULL) == NULL);
    CHECK_EQ(aco_rt_group_size(NULL), 0);

    /* I/O vectors (the kernel's EFAULT): a socket that has a byte */
    int sv[2];
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    CHECK_EQ(write(sv[1], "x", 1), 1);
    if (in_co) {
        CHECK_EQ(aco_rt_readv(sv[0], NULL, 1, -1), -EFAULT);
        CHECK_EQ(aco_rt_writev(sv[0], NULL, 1, -1), -EFAULT);
        CHECK_EQ(aco_rt_preadv(sv[0], NULL, 1, -1, 0, -1), -EFAULT);
        CHECK_EQ(aco_rt_pwritev(sv[0], NULL, 1, -1, 0, -1), -EFAULT);
    }

    /* Sync */
    aco_rt_mutex_init(NULL);
    aco_rt_cond_init(NULL);
    aco_rt_sem_init(NULL, 1);
    aco_rt_wg_init(NULL);
    aco_rt_cond_signal(NULL);
    aco_rt_cond_broadcast(NULL);
    aco_rt_sem_post(NULL);
    CHECK_EQ(aco_rt_mutex_lock(NULL, 0), -EINVAL);
    CHECK_EQ(aco_rt_mutex_trylock(NULL), -EINVAL);
    CHECK_EQ(aco_rt_mutex_unlock(NULL), -EINVAL);
    static aco_rt_mutex_t m;
    static aco_rt_cond_t c;
    if (in_co) CHECK_EQ(aco_rt_mutex_lock(&m, -1), 0);
    CHECK_EQ(aco_rt_cond_wait(NULL, &m, aco_rt_now() + 1000000), -EINVAL);
    CHECK_EQ(aco_rt_cond_wait(&c, NULL, aco_rt_now() + 1000000), -EINVAL);
    if (in_co) CHECK_EQ(aco_rt_mutex_unlock(&m), 0);
    CHECK_EQ(aco_rt_sem_wait(NULL, 0), -EINVAL);
    CHECK_EQ(aco_rt_sem_trywait(NULL), -EINVAL);
    CHECK_EQ(aco_rt_wg_add(NULL, 1), -EINVAL);
    CHECK_EQ(aco_rt_wg_done(NULL), -EINVAL);
    CHECK_EQ(aco_rt_wg_wait(NULL, 0), -EINVAL);

    /* Channels: an element buffered, room for one more */
    aco_rt_chan_t* ch = aco_rt_chan_new(sizeof(int), 2);
    CHECK(ch != NULL);
    int one = 1, got = 0;
    if (in_co) CHECK_EQ(aco_rt_chan_send(ch, &one, -1), 0);
    CHECK_EQ(aco_rt_chan_send(NULL, &one, 0), -EINVAL);
    CHECK_EQ(aco_rt_chan_send(ch, NULL, 0), -EINVAL);
    CHECK_EQ(aco_rt_chan_recv(NULL, &got, 0), -EINVAL);
    CHECK_EQ(aco_rt_chan_recv(ch, NULL, 0), -EINVAL);
    CHECK_EQ(aco_rt_chan_len(ch), in_co ? 1 : 0);   /* nothing was taken */
    CHECK_EQ(aco_rt_chan_len(NULL), 0);
    CHECK_EQ(aco_rt_chan_close(NULL), -EINVAL);
    if (in_co) CHECK_EQ(aco_rt_chan_recv(ch, &got, -1), 0);
    CHECK_EQ(got, in_co ? 1 : 0);
    CHECK_EQ(aco_rt_chan_free(ch), 0);
    CHECK_EQ(aco_rt_chan_free(NULL), 0);            /* as free(3) */

    /* Buffered I/O: b NULL, then a real one with buf NULL */
    char buf[8];
    const char* v;
    CHECK_EQ(aco_rt_bufio_fd(NULL), -EINVAL);
    CHECK_EQ(aco_rt_bufio_buffered(NULL), 0);
    CHECK_EQ(aco_rt_bufio_unflushed(NULL), 0);
    CHECK_EQ(aco_rt_bufio_consume(NULL, 0), -EINVAL);
    CHECK_EQ(aco_rt_bufio_read(NULL, buf, 1, 0), -EINVAL);
    CHECK_EQ(aco_rt_bufio_read_full(NULL, buf, 1, 0), -EINVAL);
    CHECK_EQ(aco_rt_bufio_read_until(NULL, '\n', 0, &v, 0), -EINVAL);
    CHECK_EQ(aco_rt_bufio_peek(NULL, 1, &v, 0), -EINVAL);
    CHECK_EQ(aco_rt_bufio_fill(NULL, 0), -EINVAL);
    CHECK_EQ(aco_rt_bufio_write(NULL, buf, 1, 0), -EINVAL);
    CHECK_EQ(aco_rt_bufio_flush(NULL, 0), -EINVAL);
    CHECK_EQ(aco_rt_bufio_flush_more(NULL, 0), -EINVAL);
    aco_rt_bufio_t* b = aco_rt_bufio_new(sv[0], 16, 16);
    CHECK(b != NULL);
    if (in_co) {
        CHECK_EQ(aco_rt_bufio_peek(b, 1, &v, -1), 1);
        CHECK_EQ(aco_rt_bufio_read(b, NULL, 1, -1), -EFAULT);
        CHECK_EQ(aco_rt_bufio_read_full(b, NULL, 1, -1), -EFAULT);
        CHECK_EQ(aco_rt_bufio_buffered(b), 1);      /* nothing consumed */
        CHECK_EQ(aco_rt_bufio_write(b, NULL, 1, -1), -EFAULT);
        CHECK_EQ(aco_rt_bufio_unflushed(b), 0);
        CHECK_EQ(aco_rt_bufio_read(b, NULL, 0, -1), 0);
        CHECK_EQ(aco_rt_bufio_write(b, NULL, 0, -1), 0);
    }
    aco_rt_bufio_free(b);
    close(sv[0]);
    close(sv[1]);
}

/* The pthread face: EINVAL, before anything else. */
static void pthread_calls(void) {
    CHECK_EQ(aco_rt_pthread_attr_init(NULL), EINVAL);
    CHECK_EQ(aco_rt_pthread_attr_setstacksize(NULL, 1 << 20), EINVAL);
    CHECK_EQ(aco_rt_pthread_attr_setdetachstate(NULL, ACO_RT_PTHREAD_CREATE_DETACHED), EINVAL);
    aco_rt_pthread_attr_t a;
    CHECK_EQ(aco_rt_pthread_attr_init(&a), 0);
    size_t n;
    int st;
    CHECK_EQ(aco_rt_pthread_attr_getstacksize(NULL, &n), EINVAL);
    CHECK_EQ(aco_rt_pthread_attr_getstacksize(&a, NULL), EINVAL);
    CHECK_EQ(aco_rt_pthread_attr_getdetachstate(NULL, &st), EINVAL);
    CHECK_EQ(aco_rt_pthread_attr_getdetachstate(&a, NULL), EINVAL);

    int k;
    clockid_t clk;
    aco_rt_pthread_mutexattr_t ma;
    CHECK_EQ(aco_rt_pthread_mutexattr_init(NULL), EINVAL);
    CHECK_EQ(aco_rt_pthread_mutexattr_init(&ma), 0);
    CHECK_EQ(aco_rt_pthread_mutexattr_settype(NULL, ACO_RT_PTHREAD_MUTEX_NORMAL), EINVAL);
    CHECK_EQ(aco_rt_pthread_mutexattr_gettype(NULL, &k), EINVAL);
    CHECK_EQ(aco_rt_pthread_mutexattr_gettype(&ma, NULL), EINVAL);
    CHECK_EQ(aco_rt_pthread_mutexattr_setpshared(NULL, ACO_RT_PTHREAD_PROCESS_PRIVATE), EINVAL);
    CHECK_EQ(aco_rt_pthread_mutexattr_getpshared(&ma, NULL), EINVAL);
    aco_rt_pthread_condattr_t ca;
    CHECK_EQ(aco_rt_pthread_condattr_init(NULL), EINVAL);
    CHECK_EQ(aco_rt_pthread_condattr_init(&ca), 0);
    CHECK_EQ(aco_rt_pthread_condattr_setclock(NULL, CLOCK_MONOTONIC), EINVAL);
    CHECK_EQ(aco_rt_pthread_condattr_getclock(&ca, NULL), EINVAL);
    CHECK_EQ(aco_rt_pthread_condattr_getclock(NULL, &clk), EINVAL);
    CHECK_EQ(aco_rt_pthread_condattr_setpshared(NULL, ACO_RT_PTHREAD_PROCESS_PRIVATE), EINVAL);
    CHECK_EQ(aco_rt_pthread_condattr_getpshared(&ca, NULL), EINVAL);
    aco_rt_pthread_rwlockattr_t ra;
    CHECK_EQ(aco_rt_pthread_rwlockattr_init(NULL), EINVAL);
    CHECK_EQ(aco_rt_pthread_rwlockattr_init(&ra), 0);
    CHECK_EQ(aco_rt_pthread_rwlockattr_setpshared(NULL, ACO_RT_PTHREAD_PROCESS_PRIVATE), EINVAL);
    CHECK_EQ(aco_rt_pthread_rwlockattr_getpshared(&ra, NULL), EINVAL);
    aco_rt_pthread_barrierattr_t ba;
    CHECK_EQ(aco_rt_pthread_barrierattr_init(NULL), EINVAL);
    CHECK_EQ(aco_rt_pthread_barrierattr_init(&ba), 0);
    CHECK_EQ(aco_rt_pthread_barrierattr_setpshared(NULL, ACO_RT_PTHREAD_PROCESS_PRIVATE), EINVAL);
    CHECK_EQ(aco_rt_pthread_barrierattr_getpshared(&ba, NULL), EINVAL);
    CHECK_EQ(aco_rt_pthread_attr_destroy(NULL), EINVAL);
    CHECK_EQ(aco_rt_pthread_mutexattr_destroy(NULL), EINVAL);
    CHECK_EQ(aco_rt_pthread_condattr_destroy(NULL), EINVAL);
    CHECK_EQ(aco_rt_pthread_rwlockattr_destroy(NULL), EINVAL);
    CHECK_EQ(aco_rt_pthread_barrierattr_destroy(NULL), EINVAL);

    aco_rt_pthread_t t;
    static aco_rt_pthread_once_t once = ACO_RT_PTHREAD_ONCE_INIT;
    aco_rt_pthread_key_t key;
    CHECK_EQ(aco_rt_pthread_create(NULL, NULL, (void* (*)(void*))no_init, NULL), EINVAL);
    CHECK_EQ(aco_rt_pthread_create(&t, NULL, NULL, NULL), EINVAL);
    CHECK_EQ(aco_rt_pthread_once(NULL, no_init), EINVAL);
    CHECK_EQ(aco_rt_pthread_once(&once, NULL), EINVAL);
    CHECK_EQ(aco_rt_pthread_key_create(NULL, NULL), EINVAL);
    (void)key;

    static aco_rt_pthread_mutex_t m = ACO_RT_PTHREAD_MUTEX_INITIALIZER;
    struct timespec ts = {0, 0};
    CHECK_EQ(aco_rt_pthread_mutex_init(NULL, NULL), EINVAL);
    CHECK_EQ(aco_rt_pthread_mutex_destroy(NULL), EINVAL);
    CHECK_EQ(aco_rt_pthread_mutex_lock(NULL), EINVAL);
    CHECK_EQ(aco_rt_pthread_mutex_trylock(NULL), EINVAL);
    CHECK_EQ(aco_rt_pthread_mutex_timedlock(NULL, &ts), EINVAL);
    CHECK_EQ(aco_rt_pthread_mutex_clocklock(NULL, CLOCK_MONOTONIC, &ts), EINVAL);
    CHECK_EQ(aco_rt_pthread_mutex_unlock(NULL), EINVAL);
    static aco_rt_pthread_cond_t c = ACO_RT_PTHREAD_COND_INITIALIZER;
    CHECK_EQ(aco_rt_pthread_cond_init(NULL, NULL), EINVAL);
    CHECK_EQ(aco_rt_pthread_cond_destroy(NULL), EINVAL);
    CHECK_EQ(aco_rt_pthread_cond_signal(NULL), EINVAL);
    CHECK_EQ(aco_rt_pthread_cond_broadcast(NULL), EINVAL);
    CHECK_EQ(aco_rt_pthread_cond_wait(NULL, &m), EINVAL);
    CHECK_EQ(aco_rt_pthread_cond_wait(&c, NULL), EINVAL);
    CHECK_EQ(aco_rt_pthread_cond_timedwait(NULL, &m, &ts), EINVAL);
    CHECK_EQ(aco_rt_pthread_cond_timedwait(&c, NULL, &ts), EINVAL);
    CHECK_EQ(aco_rt_pthread_cond_clockwait(NULL, &m, CLOCK_MONOTONIC, &ts), EINVAL);
    CHECK_EQ(aco_rt_pthread_cond_clockwait(&c, NULL, CLOCK_MONOTONIC, &ts), EINVAL);
    CHECK_EQ(aco_rt_pthread_rwlock_init(NULL, NULL), EINVAL);
    CHECK_EQ(aco_rt_pthread_rwlock_destroy(NULL), EINVAL);
    CHECK_EQ(aco_rt_pthread_rwlock_rdlock(NULL), EINVAL);
    CHECK_EQ(aco_rt_pthread_rwlock_tryrdlock(NULL), EINVAL);
    CHECK_EQ(aco_rt_pthread_rwlock_timedrdlock(NULL, &ts), EINVAL);
    CHECK_EQ(aco_rt_pthread_rwlock_wrlock(NULL), EINVAL);
    CHECK_EQ(aco_rt_pthread_rwlock_trywrlock(NULL), EINVAL);
    CHECK_EQ(aco_rt_pthread_rwlock_timedwrlock(NULL, &ts), EINVAL);
    CHECK_EQ(aco_rt_pthread_rwlock_unlock(NULL), EINVAL);
    CHECK_EQ(aco_rt_pthread_barrier_init(NULL, NULL, 1), EINVAL);
    CHECK_EQ(aco_rt_pthread_barrier_destroy(NULL), EINVAL);
    CHECK_EQ(aco_rt_pthread_barrier_wait(NULL), EINVAL);
}

/* An unbuffered channel its scheduler owns (64 calls in a row), a
 * receiver parked on it (the direct waiter): the send's fastest way
 * refuses a NULL element too, and the receiver still waits. */
static aco_rt_chan_t* g_ch;
static int g_got;
static void receiver(void* arg) {
    (void)arg;
    int v;
    while (aco_rt_chan_recv(g_ch, &v, -1) == 0) g_got = v;
}

static void owned_direct(void) {
    CHECK((g_ch = aco_rt_chan_new(sizeof(int), 0)) != NULL);
    aco_rt_co_t* r = aco_rt_spawn(NULL, receiver, NULL);
    CHECK(r != NULL);
    for (int i = 1; i <= 100; i++) CHECK_EQ(aco_rt_chan_send(g_ch, &i, -1), 0);
    CHECK_EQ(aco_rt_yield(), 0);                    /* it parks again */
    CHECK_EQ(g_got, 100);
    CHECK_EQ(aco_rt_chan_send(g_ch, NULL, -1), -EINVAL);
    int last = 101;
    CHECK_EQ(aco_rt_chan_send(g_ch, &last, -1), 0);
    CHECK_EQ(aco_rt_yield(), 0);
    CHECK_EQ(g_got, 101);
    CHECK_EQ(aco_rt_chan_close(g_ch), 0);
    CHECK_EQ(aco_rt_join(r, -1), 0);
    CHECK_EQ(aco_rt_chan_free(g_ch), 0);
}

/* A NULL buffer of a non-zero size: -EFAULT at once, even where nothing
 * is there to read, no room to write or no connection to take (a wait
 * first would wait for nothing: for good without a deadline), and a lent
 * receive's bytes are not copied to NULL (nor lost). */
static int64_t fault_t0;
#define QUICK_EFAULT(call)                                                   \
    do {                                                                     \
        fault_t0 = aco_rt_now();                                             \
        CHECK_EQ((call), -EFAULT);                                           \
        CHECK_LT(aco_rt_now() - fault_t0, 500 * MS);                         \
    } while (0)

static void null_buffers(void) {
    int64_t later = aco_rt_now() + 2000 * MS;
    int p[2], sv[2];
    CHECK_EQ(pipe2(p, O_CLOEXEC), 0);
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    struct iovec nil = {NULL, 4};
    QUICK_EFAULT(aco_rt_read(p[0], NULL, 1, later));
    QUICK_EFAULT(aco_rt_readv(p[0], &nil, 1, later));
    QUICK_EFAULT(aco_rt_preadv(p[0], &nil, 1, -1, 0, later));
    QUICK_EFAULT(aco_rt_recv(sv[0], NULL, 1, 0, later));
    QUICK_EFAULT(aco_rt_recv(sv[0], NULL, 1, MSG_WAITALL, later));
    struct msghdr mh = {0};
    mh.msg_iov = &nil;
    mh.msg_iovlen = 1;
    QUICK_EFAULT(aco_rt_recvmsg(sv[0], &mh, 0, later));
    mh.msg_iov = NULL;                  /* (a vector of one at NULL) */
    QUICK_EFAULT(aco_rt_recvmsg(sv[0], &mh, 0, later));
    QUICK_EFAULT(aco_rt_sendmsg(sv[0], &mh, 0, later));
    /* the write side, a full pipe: no wait for room either */
    CHECK_EQ(fcntl(p[1], F_SETFL, O_NONBLOCK), 0);
    static char fill[65536];
    while (write(p[1], fill, sizeof(fill)) > 0) {}
    QUICK_EFAULT(aco_rt_write(p[1], NULL, 1, later));
    QUICK_EFAULT(aco_rt_writev(p[1], &nil, 1, later));
    QUICK_EFAULT(aco_rt_pwritev(p[1], &nil, 1, -1, 0, later));
    QUICK_EFAULT(aco_rt_pread(p[0], NULL, 1, 0, later));
    QUICK_EFAULT(aco_rt_pwrite(p[1], NULL, 1, 0, later));
    /* an address without its length: refused before a connection is taken */
    int lfd = aco_rt_listen("127.0.0.1:0", NULL, later);
    CHECK_GE(lfd, 0);
    struct sockaddr_storage a;
    QUICK_EFAULT(aco_rt_accept(lfd, (struct sockaddr*)&a, NULL, 0, later));
    /* lent bytes queued in the runtime: refused, then all still there */
    CHECK_EQ(write(sv[1], "abc", 3), 3);
    const char* d;
    CHECK_EQ(aco_rt_recv_lend(sv[0], &d, later), 3);
    CHECK_EQ(aco_rt_lend_return(d), 0);
    CHECK_EQ(write(sv[1], "xyz", 3), 3);
    CHECK_EQ(aco_rt_sleep(20 * MS), 0);
    QUICK_EFAULT(aco_rt_recv(sv[0], NULL, 3, 0, later));
    QUICK_EFAULT(aco_rt_read(sv[0], NULL, 3, later));
    char got[4] = {0};
    CHECK_EQ(aco_rt_recv(sv[0], got, 3, 0, later), 3);
    CHECK(memcmp(got, "xyz", 3) == 0);
    /* a negative descriptor is not open, a passed deadline or not */
    CHECK_EQ(aco_rt_wait(-1, POLLIN, 0), -EBADF);
    CHECK_EQ(aco_rt_wait(-1, POLLIN, aco_rt_now() + 10 * MS), -EBADF);
    CHECK_EQ(aco_rt_close(lfd), 0);
    CHECK_EQ(aco_rt_close(sv[0]), 0);
    close(sv[1]);
    close(p[0]);
    close(p[1]);
}

/* A length no buffer can have (over SSIZE_MAX): read, write, pread and
 * pwrite say -EFAULT (read(2)'s answer on 64-bit Linux), on both backends
 * (io_uring, which takes at most 1 GiB a call, must not read into the
 * part that exists), at once, bytes there or not; nothing taken (the
 * bytes still there).  A vector with a length over it, or a total over
 * it of lengths each under it: readv(2)'s -EINVAL, from every vector call
 * (never a total wrapped round to a small one, nor one the result cannot
 * hold).  (recv and send cut a size as recv(2) and send(2) do:
 * test_io_bb_stream.) */
static void huge_lengths(void) {
    int64_t later = aco_rt_now() + 2000 * MS;
    int p[2], sv[2], dg[2];
    CHECK_EQ(pipe2(p, O_CLOEXEC), 0);
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    CHECK_EQ(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, dg), 0);
    char buf[8];
    const size_t huge[] = {SIZE_MAX, (size_t)SSIZE_MAX + 1};
    for (int i = 0; i < 2; i++) {
        size_t n = huge[i];
        CHECK_EQ(write(p[1], "ab", 2), 2);
        CHECK_EQ(write(sv[1], "cd", 2), 2);
        CHECK_EQ(send(dg[1], "ef", 2, 0), 2);
        QUICK_EFAULT(aco_rt_read(p[0], buf, n, later));
        QUICK_EFAULT(aco_rt_read(sv[0], buf, n, later));
        QUICK_EFAULT(aco_rt_write(p[1], buf, n, later));
        QUICK_EFAULT(aco_rt_write(sv[1], buf, n, later));
        /* vectors: readv(2)'s -EINVAL (a length over SSIZE_MAX) */
        struct iovec v = {buf, n};
        struct msghdr mh = {0};
        mh.msg_iov = &v;
        mh.msg_iovlen = 1;
        CHECK_EQ(aco_rt_readv(p[0], &v, 1, later), -EINVAL);
        CHECK_EQ(aco_rt_readv(sv[0], &v, 1, later), -EINVAL);
        CHECK_EQ(aco_rt_writev(p[1], &v, 1, later), -EINVAL);
        CHECK_EQ(aco_rt_writev(sv[1], &v, 1, later), -EINVAL);
        CHECK_EQ(aco_rt_recvmsg(dg[0], &mh, 0, later), -EINVAL);
        CHECK_EQ(aco_rt_sendmsg(dg[1], &mh, 0, later), -EINVAL);
        /* a total over it, of lengths each under it (the same buffer
         * again: on a 32-bit ABI memory that exists): -EINVAL from every
         * vector call, before a byte moves */
        struct iovec w[3] = {{buf, (size_t)SSIZE_MAX / 2 + 1}, {buf, (size_t)SSIZE_MAX / 2 + 1}, {buf, 3}};
        if (i == 1) w[0].iov_len = w[1].iov_len = (size_t)SSIZE_MAX;   /* (sums to 1) */
        mh.msg_iov = w;
        mh.msg_iovlen = 3;
        CHECK_EQ(aco_rt_preadv(p[0], w, 3, -1, 0, later), -EINVAL);
        CHECK_EQ(aco_rt_pwritev(p[1], w, 3, -1, 0, later), -EINVAL);
        CHECK_EQ(aco_rt_readv(p[0], w, 3, later), -EINVAL);
        CHECK_EQ(aco_rt_readv(sv[0], w, 3, later), -EINVAL);
        CHECK_EQ(aco_rt_writev(p[1], w, 3, later), -EINVAL);
        CHECK_EQ(aco_rt_writev(sv[1], w, 3, later), -EINVAL);
        CHECK_EQ(aco_rt_recvmsg(dg[0], &mh, 0, later), -EINVAL);
        CHECK_EQ(aco_rt_sendmsg(dg[1], &mh, 0, later), -EINVAL);
        CHECK_EQ(aco_rt_sendmsg(sv[1], &mh, 0, later), -EINVAL);
        CHECK_EQ(aco_rt_read(p[0], buf, sizeof(buf), later), 2);
        CHECK(memcmp(buf, "ab", 2) == 0);
        CHECK_EQ(aco_rt_recv(sv[0], buf, sizeof(buf), 0, later), 2);
        CHECK(memcmp(buf, "cd", 2) == 0);
        CHECK_EQ(aco_rt_recv(dg[0], buf, sizeof(buf), 0, later), 2);
        CHECK(memcmp(buf, "ef", 2) == 0);
        CHECK_EQ(aco_rt_recv(sv[0], buf, sizeof(buf), MSG_DONTWAIT, -1), -EAGAIN);
        QUICK_EFAULT(aco_rt_pread(p[0], buf, n, 0, later));
        QUICK_EFAULT(aco_rt_pwrite(p[1], buf, n, 0, later));
    }
    /* a bufio's read, read_full and write the same: nothing taken */
    CHECK_EQ(write(sv[1], "ij", 2), 2);
    aco_rt_bufio_t* b = aco_rt_bufio_new(sv[0], 0, 0);
    CHECK(b != NULL);
    CHECK_EQ(aco_rt_bufio_fill(b, later), 2);
    CHECK_EQ(aco_rt_bufio_write(b, "k", 1, later), 1);
    QUICK_EFAULT(aco_rt_bufio_read(b, buf, SIZE_MAX, later));
    QUICK_EFAULT(aco_rt_bufio_read_full(b, buf, (size_t)SSIZE_MAX + 1, later));
    QUICK_EFAULT(aco_rt_bufio_write(b, buf, SIZE_MAX, later));
    CHECK_EQ(aco_rt_bufio_buffered(b), 2);
    CHECK_EQ(aco_rt_bufio_unflushed(b), 1);
    aco_rt_bufio_free(b);
    /* a file: nothing read or written past the buffer */
    char path[] = "/tmp/test_null_XXXXXX";
    int f = mkstemp(path);
    CHECK_GE(f, 0);
    CHECK_EQ(unlink(path), 0);
    CHECK_EQ(write(f, "gh", 2), 2);
    QUICK_EFAULT(aco_rt_pread(f, buf, SIZE_MAX, 0, later));
    QUICK_EFAULT(aco_rt_pwrite(f, buf, (size_t)SSIZE_MAX + 1, 0, later));
    QUICK_EFAULT(aco_rt_read(f, buf, SIZE_MAX, later));
    QUICK_EFAULT(aco_rt_write(f, buf, SIZE_MAX, later));
    struct stat st;
    CHECK_EQ(fstat(f, &st), 0);
    CHECK_EQ(st.st_size, 2);
    CHECK_EQ(aco_rt_close(f), 0);
    for (int i = 0; i < 2; i++) {
        CHECK_EQ(aco_rt_close(sv[i]), 0);
        CHECK_EQ(aco_rt_close(dg[i]), 0);
        CHECK_EQ(aco_rt_close(p[i]), 0);
    }
}

static void in_co(void* arg) {
    (void)arg;
    null_buffers();
    huge_lengths();
    core_calls(1);
    owned_direct();
    pthread_calls();
    CHECK_EQ(aco_rt_pthread_run_main(NULL, 0, NULL), 1);
}

static void body(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    test_go(s, in_co, NULL);
}

int main(void) {
    core_calls(0);
    pthread_calls();
    CHECK_EQ(aco_rt_pthread_run_main(NULL, 0, NULL), 1);       /* and a message */
    test_on_backends(NULL, body, NULL);
    CHECK_EQ(aco_rt_pthread_run_main(no_main, 0, NULL), 7);    /* (still works) */
    printf("test_null: ok\n");
    return 0;
}
