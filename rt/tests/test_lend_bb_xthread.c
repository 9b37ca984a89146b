/* test_lend_bb_xthread.c - lent receives across the threads of a pool,
 * from aco_rt.h alone: while a socket's multishot belongs to one thread's
 * scheduler, the other's recv, read, readv, wait(POLLIN) and poll(POLLIN)
 * get -EBUSY at once (POLLOUT not refused; epoll: plain receives), and the
 * bytes are read at home; lends of two threads split a stream, every byte
 * once; a lent buffer handed through a channel to a co of the other
 * thread and to a plain thread, written whole and returned there;
 * aco_rt_close from a plain thread and from a co of the other thread
 * ending a waiting lend (-EBADF); a new socket under the closed number not
 * refused on the other thread; a cancel from a plain thread ending a
 * waiting lend. */
#include "rt_test.h"

#include <pthread.h>
#include <stdatomic.h>

static int64_t in_ms(int ms) { return aco_rt_now() + ms * MS; }
static aco_rt_pool_t* pool;
static int ring;                /* io_uring with multishot lends (6.0+) */
static aco_rt_sched_t* S(int i) { return aco_rt_pool_sched(pool, (unsigned)i); }
static void drain(void) { CHECK_EQ(aco_rt_pool_wait(pool, ACO_RT_POOL_DRAIN, in_ms(20000)), 0); }
static void go(int t, aco_rt_fn_t fn, void* arg) {
    aco_rt_co_t* c = aco_rt_spawn(S(t), fn, arg);
    CHECK(c != NULL);
    CHECK_EQ(aco_rt_detach(c), 0);
}

static int sv[2];
static aco_rt_sem_t s_a, s_b;

/* ---- X1: -EBUSY elsewhere, the bytes read at home ---- */
static void home_co(void* arg) {
    (void)arg;
    const char* d;
    aco_rt_stats_t st;
    CHECK_EQ(aco_rt_write(sv[1], "a", 1, -1), 1);
    CHECK_EQ(aco_rt_recv_lend(sv[0], &d, in_ms(2000)), 1);
    CHECK_EQ(aco_rt_lend_return(d), 0);
    aco_rt_stats(NULL, &st);
    ring = st.lend_ring == 1;
    /* bytes come to the multishot while no call waits */
    CHECK_EQ(aco_rt_write(sv[1], "queued", 6, -1), 6);
    CHECK_EQ(aco_rt_sleep(10 * MS), 0);
    aco_rt_sem_post(&s_b);
    CHECK_EQ(aco_rt_sem_wait(&s_a, in_ms(10000)), 0);
    char buf[16];
    if (ring) {
        CHECK_EQ(aco_rt_recv(sv[0], buf, sizeof(buf), 0, in_ms(1000)), 6);
        CHECK(memcmp(buf, "queued", 6) == 0);
    }
    aco_rt_sem_post(&s_b);
}
static void away_co(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_sem_wait(&s_b, in_ms(10000)), 0);
    char buf[16];
    struct iovec iov = {buf, sizeof(buf)};
    struct pollfd p = {sv[0], POLLIN, 0};
    if (ring) {
        int64_t t0 = aco_rt_now();
        CHECK_EQ(aco_rt_recv(sv[0], buf, sizeof(buf), 0, in_ms(3000)), -EBUSY);
        CHECK_EQ(aco_rt_read(sv[0], buf, sizeof(buf), in_ms(3000)), -EBUSY);
        CHECK_EQ(aco_rt_readv(sv[0], &iov, 1, in_ms(3000)), -EBUSY);
        CHECK_EQ(aco_rt_wait(sv[0], POLLIN, in_ms(3000)), -EBUSY);
        CHECK_EQ(aco_rt_wait(sv[0], POLLIN | POLLOUT, in_ms(3000)), -EBUSY);
        CHECK_EQ(aco_rt_poll(&p, 1, in_ms(3000)), -EBUSY);
        CHECK_LT(aco_rt_now() - t0, 1000 * MS);
        /* POLLOUT is not refused */
        CHECK_EQ(aco_rt_wait(sv[0], POLLOUT, in_ms(3000)), POLLOUT);
        p.events = POLLOUT;
        CHECK_EQ(aco_rt_poll(&p, 1, in_ms(3000)), 1);
        CHECK_EQ(p.revents, POLLOUT);
    } else {
        CHECK_EQ(aco_rt_wait(sv[0], POLLIN, in_ms(3000)) & POLLIN, POLLIN);
        CHECK_EQ(aco_rt_recv(sv[0], buf, sizeof(buf), 0, in_ms(1000)), 6);
        CHECK(memcmp(buf, "queued", 6) == 0);
    }
    aco_rt_sem_post(&s_a);
    CHECK_EQ(aco_rt_sem_wait(&s_b, in_ms(10000)), 0);
}

static void busy_elsewhere(void) {
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    aco_rt_sem_init(&s_a, 0);
    aco_rt_sem_init(&s_b, 0);
    go(0, home_co, NULL);
    go(1, away_co, NULL);
    drain();
    CHECK_EQ(aco_rt_close(sv[0]), 0);
    CHECK_EQ(aco_rt_close(sv[1]), 0);
}

/* ---- X2: lends on both threads split a stream ---- */
#define SPLIT_BYTES (FEW ? 200000 : 1000000)
static _Atomic long long split_got, split_sum;
static _Atomic int split_busy;
static void split_co(void* arg) {
    (void)arg;
    long long got = 0, sum = 0;
    for (;;) {
        const char* d;
        ssize_t n = aco_rt_recv_lend(sv[0], &d, in_ms(10000));
        if (n == -EBUSY) {
            atomic_fetch_add(&split_busy, 1);
            break;
        }
        CHECK_GE(n, 0);
        if (n == 0) break;
        for (ssize_t i = 0; i < n; i++) sum += (unsigned char)d[i];
        got += n;
        CHECK_EQ(aco_rt_lend_return(d), 0);
        if (got % 3 == 0) CHECK_EQ(aco_rt_yield(), 0);
    }
    atomic_fetch_add(&split_got, got);
    atomic_fetch_add(&split_sum, sum);
}
static void* split_writer(void* arg) {
    (void)arg;
    static unsigned char buf[8192];
    long long sum = 0, off = 0;
    while (off < SPLIT_BYTES) {
        size_t n = sizeof(buf);
        if ((long long)n > SPLIT_BYTES - off) n = (size_t)(SPLIT_BYTES - off);
        for (size_t i = 0; i < n; i++) {
            buf[i] = (unsigned char)((off + (long long)i) * 13);
            sum += buf[i];
        }
        size_t w = 0;
        while (w < n) {
            ssize_t r = write(sv[1], buf + w, n - w);
            CHECK_GT(r, 0);
            w += (size_t)r;
        }
        off += (long long)n;
    }
    CHECK_EQ(shutdown(sv[1], SHUT_WR), 0);
    return (void*)(intptr_t)sum;
}
static void split(void) {
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    atomic_store(&split_got, 0);
    atomic_store(&split_sum, 0);
    atomic_store(&split_busy, 0);
    go(0, split_co, NULL);
    go(1, split_co, NULL);
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, split_writer, NULL), 0);
    void* sum;
    CHECK_EQ(pthread_join(t, &sum), 0);
    drain();
    /* a lend is never -EBUSY for another thread's */
    CHECK_EQ(atomic_load(&split_busy), 0);
    CHECK_EQ(atomic_load(&split_got), SPLIT_BYTES);
    CHECK_EQ(atomic_load(&split_sum), (long long)(intptr_t)sum);
    CHECK_EQ(aco_rt_close(sv[0]), 0);
    CHECK_EQ(aco_rt_close(sv[1]), 0);
}

/* ---- X3: buffers handed to the other thread and a plain thread ---- */
#define HAND 150
static aco_rt_chan_t* hand_ch;
static const char* to_plain[HAND];
static int n_plain;
static void lender_co(void* arg) {
    (void)arg;
    static char buf[600];
    for (int i = 0; i < HAND; i++) {
        memset(buf, 'A' + i % 26, sizeof(buf));
        size_t n = 1 + (size_t)(i * 37) % sizeof(buf);
        CHECK_EQ(aco_rt_write(sv[1], buf, n, -1), (long long)n);
        const char* d;
        CHECK_EQ(aco_rt_recv_lend(sv[0], &d, in_ms(2000)), (long long)n);
        CHECK_EQ(d[0], 'A' + i % 26);
        if (i % 2) CHECK_EQ(aco_rt_chan_send(hand_ch, &d, in_ms(5000)), 0);
        else to_plain[n_plain++] = d;
    }
    CHECK_EQ(aco_rt_chan_close(hand_ch), 0);
}
static void returner_co(void* arg) {
    (void)arg;
    const char* d;
    int n = 0;
    while (aco_rt_chan_recv(hand_ch, &d, in_ms(5000)) == 0) {
        CHECK(d[0] >= 'A' && d[0] <= 'Z');
        memset((char*)d, 0x5a, ACO_RT_LEND_SIZE);
        CHECK_EQ(aco_rt_lend_return(d), 0);
        n++;
    }
    CHECK_EQ(n, HAND / 2);
}
static void handed(void) {
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    hand_ch = aco_rt_chan_new(sizeof(const char*), 4);
    CHECK(hand_ch != NULL);
    n_plain = 0;
    go(0, lender_co, NULL);
    go(1, returner_co, NULL);
    drain();
    for (int i = 0; i < n_plain; i++) {
        memset((char*)to_plain[i], 0, ACO_RT_LEND_SIZE);
        CHECK_EQ(aco_rt_lend_return(to_plain[i]), 0);
    }
    CHECK_EQ(aco_rt_chan_free(hand_ch), 0);
    CHECK_EQ(aco_rt_close(sv[0]), 0);
    CHECK_EQ(aco_rt_close(sv[1]), 0);
}

/* ---- X4, X5: closes from elsewhere ---- */
static _Atomic int waiting;
static int waiter_rc;
static void waiting_lender(void* arg) {
    (void)arg;
    const char* d;
    CHECK_EQ(aco_rt_write(sv[1], "w", 1, -1), 1);
    CHECK_EQ(aco_rt_recv_lend(sv[0], &d, in_ms(2000)), 1);
    CHECK_EQ(aco_rt_lend_return(d), 0);
    atomic_store(&waiting, 1);
    waiter_rc = (int)aco_rt_recv_lend(sv[0], &d, in_ms(10000));
    atomic_store(&waiting, 2);
}
static void closer_co(void* arg) {
    (void)arg;
    while (atomic_load(&waiting) < 1) CHECK_EQ(aco_rt_sleep(1 * MS), 0);
    CHECK_EQ(aco_rt_sleep(5 * MS), 0);
    int old = sv[0];
    CHECK_EQ(aco_rt_close(sv[0]), 0);
    /* a new socket under the number: not refused here, its own bytes */
    int nv[2];
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, nv), 0);
    if (nv[0] != old) {
        CHECK_EQ(dup2(nv[0], old), old);
        CHECK_EQ(close(nv[0]), 0);
    }
    CHECK_EQ(write(nv[1], "new", 3), 3);
    char buf[8];
    CHECK_EQ(aco_rt_recv(old, buf, sizeof(buf), 0, in_ms(2000)), 3);
    CHECK(memcmp(buf, "new", 3) == 0);
    CHECK_EQ(aco_rt_close(old), 0);
    CHECK_EQ(aco_rt_close(nv[1]), 0);
}
static void closes(void) {
    int64_t t0;
    /* from a plain thread */
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    atomic_store(&waiting, 0);
    waiter_rc = 1;
    go(0, waiting_lender, NULL);
    while (atomic_load(&waiting) < 1) sched_yield();
    usleep(5000);
    t0 = aco_rt_now();
    CHECK_EQ(aco_rt_close(sv[0]), 0);
    drain();
    CHECK_EQ(waiter_rc, -EBADF);
    CHECK_LT(aco_rt_now() - t0, 2000 * MS);
    CHECK_EQ(aco_rt_close(sv[1]), 0);
    /* from a co of the other thread, the number reused there at once */
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    atomic_store(&waiting, 0);
    waiter_rc = 1;
    t0 = aco_rt_now();
    go(0, waiting_lender, NULL);
    go(1, closer_co, NULL);
    drain();
    CHECK_EQ(waiter_rc, -EBADF);
    CHECK_LT(aco_rt_now() - t0, 2000 * MS);
    CHECK_EQ(aco_rt_close(sv[1]), 0);
}

/* ---- X6: a cancel from a plain thread ends a waiting lend ---- */
static aco_rt_co_t* lc;
static void cancelled_lender(void* arg) {
    (void)arg;
    const char* d;
    CHECK_EQ(aco_rt_write(sv[1], "c", 1, -1), 1);
    CHECK_EQ(aco_rt_recv_lend(sv[0], &d, in_ms(2000)), 1);
    CHECK_EQ(aco_rt_lend_return(d), 0);
    atomic_store(&waiting, 1);
    waiter_rc = (int)aco_rt_recv_lend(sv[0], &d, in_ms(10000));
    /* a later call fails at once, bytes there or not */
    CHECK_EQ(aco_rt_write(sv[1], "late", 4, -1), -ECANCELED);
    CHECK_EQ(aco_rt_recv_lend(sv[0], &d, in_ms(10000)), -ECANCELED);
    atomic_store(&waiting, 2);
}
static void cancels(void) {
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    atomic_store(&waiting, 0);
    waiter_rc = 1;
    lc = aco_rt_spawn(S(0), cancelled_lender, NULL);
    CHECK(lc != NULL);
    while (atomic_load(&waiting) < 1) sched_yield();
    usleep(5000);
    int64_t t0 = aco_rt_now();
    CHECK_EQ(aco_rt_cancel(lc), 0);
    CHECK_EQ(aco_rt_detach(lc), 0);
    drain();
    CHECK_EQ(waiter_rc, -ECANCELED);
    CHECK_LT(aco_rt_now() - t0, 2000 * MS);
    CHECK_EQ(aco_rt_close(sv[0]), 0);
    CHECK_EQ(aco_rt_close(sv[1]), 0);
}

static void body(aco_rt_pool_t* p) {
    pool = p;
    busy_elsewhere();
    split();
    handed();
    closes();
    cancels();
}

int main(void) {
    test_on_pools(2, body, NULL);
    puts("test_lend_bb_xthread: ok");
    return 0;
}
