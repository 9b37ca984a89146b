/* test_deadlines_load: deadlines firing under load.
 *
 * 1000 socketpairs (CO_MANY: fewer under gcc's TSan), a reader co on
 * each end (2000 readers) doing read /
 * recv / readv with short random deadlines (heap and stack buffers), 100
 * writer cos sending to random ends at random times, and busy cos that only
 * compute and yield.  Every -ETIMEDOUT comes at or after its deadline; every
 * byte written arrives, in order (each end is a checked stream), and EOF
 * ends each reader; meanwhile readers are cancelled at random (60 every
 * ~0.5 ms): a cancelled reader's calls fail with -ECANCELED and take
 * nothing, and a new co reads its stream on from there.
 */
#include "rt_test.h"

#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#define NPAIRS CO_MANY(1000)
#define NEND (2 * NPAIRS)
#define NWRITERS 100
#define WRITES_PER_END 6
#define NBUSY 20

static int fds[NEND];                   /* end e is read; peer(e) writes to it */
static uint64_t sent[NEND], got[NEND];
static int writes_left[NEND];
static long timeouts, early;
static int readers_left;               /* ends not read to EOF yet */
static uint8_t eof_seen[NEND];
static int busy_stop;
static int writers_left;
static long cancels;
static uint8_t* heap_buf;               /* per reader: 2 KiB each */

static inline int peer(int e) { return e ^ 1; }

static inline uint8_t pat(uint32_t k, uint64_t i) {
    return (uint8_t)(i * 29u + k * 131u + (i >> 8));
}

static void check_bytes(const uint8_t* b, size_t n, int e, uint64_t off) {
    for (size_t i = 0; i < n; i++)
        if (b[i] != pat((uint32_t)e, off + i))
            TEST_FAIL_AT(__FILE__, __LINE__, "end %d byte %llu: got %u want %u", e,
                         (unsigned long long)(off + i), b[i], pat((uint32_t)e, off + i));
}

static void reader(void* arg) {
    int e = (int)(intptr_t)arg;
    uint64_t rng = 0x1234 + (uint64_t)e * 77;
    uint8_t sbuf[1024];
    uint8_t* hb = heap_buf + (size_t)e * 2048;
    for (;;) {
        int64_t d = aco_rt_now() + 100000 + (int64_t)(test_rand(&rng) % (1500 * 1000));
        int mode = (int)(test_rand(&rng) % 4);
        uint8_t* b = (test_rand(&rng) & 1) ? sbuf : hb;
        size_t cap = b == sbuf ? sizeof(sbuf) : 2048;
        ssize_t r;
        if (mode == 0) {
            r = aco_rt_read(fds[e], b, cap, d);
        } else if (mode == 1) {
            r = aco_rt_recv(fds[e], b, cap, 0, d);
        } else {
            struct iovec iov[2] = {{b, 7}, {b + 7, cap - 7}};
            r = aco_rt_readv(fds[e], iov, 2, d);
        }
        if (r == -ETIMEDOUT) {
            int64_t now = aco_rt_now();
            if (now < d) {
                fprintf(stderr, "end %d: -ETIMEDOUT %lld ns before its deadline\n", e,
                        (long long)(d - now));
                early++;
            }
            timeouts++;
            continue;
        }
        if (r == -ECANCELED) return;        /* see cancel_some */
        CHECK_GE(r, 0);
        if (r == 0) break;
        check_bytes(b, (size_t)r, e, got[e]);
        got[e] += (uint64_t)r;
    }
    CHECK_EQ(got[e], sent[e]);
    if (!eof_seen[e]) {
        eof_seen[e] = 1;
        readers_left--;
    }
}

static void writer(void* arg) {
    int w = (int)(intptr_t)arg;
    uint64_t rng = 0xabcdef + (uint64_t)w;
    uint8_t buf[1500];
    /* the ends this writer feeds: w, w + NWRITERS, ... */
    int mine = 0;
    for (int e = w; e < NEND; e += NWRITERS) mine++;
    int left = mine * WRITES_PER_END;
    while (left > 0) {
        CHECK_EQ(aco_rt_sleep((int64_t)(test_rand(&rng) % (MS / 2))), 0);
        int k = (int)(test_rand(&rng) % (uint64_t)mine);
        int e = w + k * NWRITERS;
        if (writes_left[e] == 0) {
            for (e = w; e < NEND && writes_left[e] == 0; e += NWRITERS) {}
            CHECK_LT(e, NEND);
        }
        size_t n = (size_t)(1 + test_rand(&rng) % sizeof(buf));
        for (size_t i = 0; i < n; i++) buf[i] = pat((uint32_t)e, sent[e] + i);
        CHECK_EQ(aco_rt_write(fds[peer(e)], buf, n, -1), (ssize_t)n);
        sent[e] += n;
        if (--writes_left[e] == 0) CHECK_EQ(shutdown(fds[peer(e)], SHUT_WR), 0);
        left--;
    }
    writers_left--;
}

static void busy(void* arg) {
    uint64_t x = (uint64_t)(uintptr_t)arg;
    while (!busy_stop) {
        for (int i = 0; i < 200; i++) x = x * 6364136223846793005ULL + 1;
        CHECK_EQ(aco_rt_yield(), 0);
    }
    if (x == 42) fprintf(stderr, "!");
}

/* cancel readers at random while the data flows (waiting, or between
 * calls); a new reader goes on with the stream from where the cancelled
 * one stopped: what a call that failed returned was nothing */
static void cancel_some(void* arg) {
    aco_rt_co_t** rc = (aco_rt_co_t**)arg;
    uint64_t rng = 99;
    while (writers_left > 0) {
        CHECK_EQ(aco_rt_sleep((int64_t)(test_rand(&rng) % MS)), 0);
        for (int k = 0; k < 60; k++) {
            int e = (int)(test_rand(&rng) % NEND);
            CHECK_EQ(aco_rt_cancel(rc[e]), 0);
            CHECK_EQ(aco_rt_join(rc[e], -1), 0);
            rc[e] = aco_rt_spawn(NULL, reader, (void*)(intptr_t)e);
            CHECK(rc[e] != NULL);
            cancels++;
        }
    }
}

static void load_main(void* arg) {
    (void)arg;
    static aco_rt_co_t* rc[NEND];
    aco_rt_co_t* wc[NWRITERS];
    aco_rt_co_t* bc[NBUSY];
    for (int i = 0; i < NPAIRS; i++)
        CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, &fds[2 * i]), 0);
    for (int e = 0; e < NEND; e++) {
        sent[e] = got[e] = 0;
        eof_seen[e] = 0;
        writes_left[e] = WRITES_PER_END;
    }
    timeouts = early = cancels = 0;
    writers_left = NWRITERS;
    readers_left = NEND;
    busy_stop = 0;
    for (int e = 0; e < NEND; e++) {
        rc[e] = aco_rt_spawn(NULL, reader, (void*)(intptr_t)e);
        CHECK(rc[e] != NULL);
    }
    for (int i = 0; i < NBUSY; i++) bc[i] = aco_rt_spawn(NULL, busy, (void*)(intptr_t)i);
    for (int i = 0; i < NWRITERS; i++) wc[i] = aco_rt_spawn(NULL, writer, (void*)(intptr_t)i);
    aco_rt_co_t* cs = aco_rt_spawn(NULL, cancel_some, rc);
    for (int i = 0; i < NWRITERS; i++) CHECK_EQ(aco_rt_join(wc[i], -1), 0);
    CHECK_EQ(aco_rt_join(cs, -1), 0);
    for (int e = 0; e < NEND; e++) CHECK_EQ(aco_rt_join(rc[e], -1), 0);
    CHECK_EQ(readers_left, 0);
    CHECK_GT(cancels, 0);
    busy_stop = 1;
    for (int i = 0; i < NBUSY; i++) CHECK_EQ(aco_rt_join(bc[i], -1), 0);
    uint64_t total = 0;
    for (int e = 0; e < NEND; e++) {
        CHECK_EQ(got[e], sent[e]);
        CHECK_EQ(writes_left[e], 0);
        total += sent[e];
    }
    CHECK_EQ(early, 0);
    CHECK_GT(timeouts, NEND);
    for (int i = 0; i < NEND; i++) CHECK_EQ(aco_rt_close(fds[i]), 0);
    aco_rt_stats_t st;
    aco_rt_stats(NULL, &st);
    CHECK_EQ(st.io_inflight, 0);
    CHECK_EQ(st.timers, 0);
    CHECK_EQ(st.cos_alive, 1);
    (void)total;
}

static void body(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    test_go(s, load_main, NULL);
}

int main(void) {
    test_raise_nofile(NEND + 256);
    heap_buf = malloc((size_t)NEND * 2048);
    CHECK(heap_buf != NULL);
    test_on_backends(NULL, body, NULL);
    free(heap_buf);
    return 0;
}
