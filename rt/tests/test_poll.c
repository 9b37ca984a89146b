/* test_poll.c - aco_rt_poll and aco_rt_cancel_shield taken at their word:
 * written from aco_rt.h's text alone (each check is a sentence of their
 * comments, quoted or named above it), on both backends.
 *
 *  - readiness from another co wakes exactly the right entries; revents as
 *    poll(2) writes them (each result compared with poll(2) on a copy, at
 *    the moment the call returns: nothing runs in between); the count;
 *    POLLOUT after a full socket drained, POLLRDHUP, the peer's end; two
 *    made ready before the co runs again; readiness is a state (bytes
 *    left after a partial read, bytes that came between calls); several
 *    cos on one descriptor with their own events, a poller beside a
 *    reader that takes the byte (never a stale "ready");
 *  - deadlines: one already passed (0, -2, INT64_MIN, now) is one look;
 *    -ETIMEDOUT with nothing ready, never early; -1 waits on; n == 0 and an
 *    array of fd < 0 only sleep until the deadline;
 *  - -ECANCELED: cancelled before (ready descriptors, n == 0, past
 *    deadline too), while waiting (from a co, from a plain thread), and
 *    every later call; -EPERM outside a co (no scheduler, a scheduler not
 *    running, a timer callback, a plain thread); -EINVAL: n over the
 *    RLIMIT_NOFILE soft limit (also a lowered one; n with high bits set),
 *    n equal to it is fine; -EBUSY: a socket that lends on another
 *    thread's scheduler;
 *  - fd < 0 skipped; events 0 (or only POLLERR|POLLHUP|POLLNVAL) still
 *    gets POLLHUP / POLLERR / POLLNVAL (at once and woken); a number not
 *    open: POLLNVAL (numbers past 2^24 too); aco_rt_close by another co or
 *    a plain thread while the co waits: POLLNVAL, and the file is let go;
 *    duplicates (the same number in 2 to 1000 entries, dups of it); a
 *    regular file ready at once for reading and writing and never for
 *    anything else; close(2) + reuse of a number and dup2 over it between
 *    calls (no stale readiness);
 *  - 10,000 descriptors in one wait (5,000 socketpairs): the right one
 *    reported, promptly, rounds with other ends, two at once, an
 *    aco_rt_close among them, a cancel, idle CPU and no backend waits in
 *    steps while waiting, a poll operation each (io_uring), nothing left
 *    in flight afterwards, a final wait on all that times out (no stale
 *    wake-up) and one more that works;
 *  - the share-stack rule: 40 cos on ONE share stack, each with its array
 *    (and canaries) at a different depth of its own stack, all waiting at
 *    once, each ended its own way (data on a random subset, deadline,
 *    cancel, aco_rt_close): each its own right answer, frames untouched;
 *  - 200 cos polling 2 pipes each, woken in random order (one or both,
 *    batches and singles), 3 rounds;
 *  - aco_rt_cancel_shield: the previous setting, -EPERM outside a co; a
 *    cancel before or during neither fails nor ends sleep, yield, poll,
 *    read, sem, join, channel receive (also a cancel from a plain thread,
 *    and a group's cancel); aco_rt_cancelled() says 1; off again: the
 *    next blocking call fails; nesting restores; cos that end (return,
 *    aco_rt_exit) with it on leave nothing to the next co (records
 *    reused); cos destroyed by aco_rt_sched_free with it on, parked in a
 *    sleep or a poll, leave no leak (ASan);
 *  - last (each once found failing; they run after everything else, so a
 *    failure there hides nothing): waiting for POLLPRI alone is woken by
 *    TCP urgent data; an aco_rt_close'd entry says POLLNVAL even when its
 *    number is taken again before the co runs.
 * Observations that the header does not settle are printed as "note:".
 */
#define _GNU_SOURCE
#include "rt_test.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>

static int checks;      /* promises checked */
#define PROMISE() (checks++)

static aco_rt_sched_t* S;       /* the scheduler of the body being run */

#define D (20 * MS)                             /* a waker's delay */
#define SOON (SLOW ? 2000 * MS : 300 * MS)      /* "at once", "promptly" */
#define GARBAGE ((short)0x5a5a)                 /* revents before a call */

static int64_t since(int64_t t0) { return aco_rt_now() - t0; }
static void in_co(aco_rt_fn_t fn, void* arg) { test_go(S, fn, arg); }

static aco_rt_co_t* spawn_j(aco_rt_fn_t fn, void* arg) {
    aco_rt_co_t* h = aco_rt_spawn(NULL, fn, arg);
    CHECK(h != NULL);
    return h;
}
static void join_ok(aco_rt_co_t* h) { CHECK_EQ(aco_rt_join(h, -1), 0); }

static void mk_pipe(int p[2]) { CHECK_EQ(pipe2(p, O_CLOEXEC), 0); }
static void mk_pair(int sv[2]) {
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
}
static void xclose(int fd) { CHECK_EQ(close(fd), 0); }
static void close2(int p[2]) { xclose(p[0]); xclose(p[1]); }

/* One byte into fd (a socket: MSG_NOSIGNAL; else write(2)). */
static void poke(int fd) {
    ssize_t r = send(fd, "x", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (r < 0 && errno == ENOTSOCK) r = write(fd, "x", 1);
    CHECK_EQ(r, 1);
}
/* Read fd until nothing is there (plain calls: readiness checked first). */
static size_t drain(int fd) {
    char b[4096];
    size_t got = 0;
    for (;;) {
        struct pollfd q = {fd, POLLIN, 0};
        if (poll(&q, 1, 0) != 1 || !(q.revents & POLLIN)) return got;
        ssize_t r = read(fd, b, sizeof b);
        if (r <= 0) return got;
        got += (size_t)r;
    }
}
/* Move fd to number num (num not open): num. */
static int move_to(int fd, int num) {
    if (fd == num) return num;
    CHECK_EQ(dup3(fd, num, O_CLOEXEC), num);
    xclose(fd);
    return num;
}
static void garbage(struct pollfd* f, nfds_t n) {
    for (nfds_t i = 0; i < n; i++) f[i].revents = GARBAGE;
}

/* "the count of entries whose revents came back non-zero (each entry's
 * revents written, as poll(2) writes them)": r against its entries, and
 * each entry against poll(2) on a copy, now (nothing ran in between). */
#define CHECK_AS_POLL(f, n, r) check_as_poll(__FILE__, __LINE__, f, n, r)
static void check_as_poll(const char* file, int line, const struct pollfd* f, nfds_t n, int r) {
    int cnt = 0;
    for (nfds_t i = 0; i < n; i++) cnt += f[i].revents != 0;
    if (r != cnt)
        TEST_FAIL_AT(file, line, "aco_rt_poll returned %d, %d entries have revents", r, cnt);
    struct pollfd* c = malloc(n * sizeof *c + 1);
    CHECK(c != NULL);
    for (nfds_t i = 0; i < n; i++) {
        c[i] = f[i];
        c[i].revents = GARBAGE;
    }
    int pr = poll(c, n, 0);
    for (nfds_t i = 0; i < n; i++)
        if (c[i].revents != f[i].revents)
            TEST_FAIL_AT(file, line,
                         "entry %zu (fd %d, events %#x): revents %#x, poll(2) says %#x",
                         (size_t)i, f[i].fd, (unsigned)(unsigned short)f[i].events,
                         (unsigned)(unsigned short)f[i].revents,
                         (unsigned)(unsigned short)c[i].revents);
    free(c);
    if (pr != r) TEST_FAIL_AT(file, line, "aco_rt_poll returned %d, poll(2) %d", r, pr);
}

/* ------------------------------------------------------------------------ */
/* Actors: a detached co that does one thing at a time                      */
/* ------------------------------------------------------------------------ */

enum { A_POKE, A_POKE2, A_CLOSE, A_RTCLOSE, A_SHUT_WR, A_CANCEL, A_DRAIN, A_OOB };
typedef struct {
    int act, fd, fd2;
    aco_rt_co_t* co;
    int64_t at;
} act_t;
static int64_t acted_at;        /* when the last actor acted */

static void act_co(void* arg) {
    act_t a = *(act_t*)arg;
    free(arg);
    if (a.at > aco_rt_now()) CHECK_EQ(aco_rt_sleep_until(a.at), 0);
    switch (a.act) {
    case A_POKE: poke(a.fd); break;
    case A_POKE2: poke(a.fd); poke(a.fd2); break;
    case A_CLOSE: xclose(a.fd); break;
    case A_RTCLOSE: CHECK_EQ(aco_rt_close(a.fd), 0); break;
    case A_SHUT_WR: CHECK_EQ(shutdown(a.fd, SHUT_WR), 0); break;
    case A_CANCEL: CHECK_EQ(aco_rt_cancel(a.co), 0); break;
    case A_DRAIN: CHECK_GT(drain(a.fd), 0); break;
    case A_OOB: CHECK_EQ(send(a.fd, "!", 1, MSG_OOB | MSG_NOSIGNAL), 1); break;
    }
    acted_at = aco_rt_now();
}
static void act_at(int64_t at, int act, int fd, int fd2, aco_rt_co_t* co) {
    act_t* a = malloc(sizeof *a);
    CHECK(a != NULL);
    a->act = act;
    a->fd = fd;
    a->fd2 = fd2;
    a->co = co;
    a->at = at;
    aco_rt_co_t* h = aco_rt_spawn(NULL, act_co, a);
    CHECK(h != NULL);
    CHECK_EQ(aco_rt_detach(h), 0);
}
#define AFTER(ns, act, fd) act_at(aco_rt_now() + (ns), act, fd, -1, NULL)
#define CANCEL_AFTER(ns, co) act_at(aco_rt_now() + (ns), A_CANCEL, -1, -1, co)

/* The scheduler's I/O operations in flight (io_uring) / cos waiting on
 * epoll readiness. */
static uint64_t inflight(void) {
    aco_rt_stats_t st;
    aco_rt_stats(NULL, &st);
    return st.io_inflight;
}
/* The wait's records are gone: io_inflight back to base within a second
 * (io_uring's cancellations complete on their own time). */
static void settle_inflight(uint64_t base) {
    int64_t t0 = aco_rt_now();
    while (inflight() > base && since(t0) < 1000 * MS) CHECK_EQ(aco_rt_sleep(1 * MS), 0);
    CHECK_EQ(inflight(), base);
}

/* ======================================================================== */
/* Readiness, revents, the count                                            */
/* ======================================================================== */

static void basics_co(void* arg) {
    (void)arg;
    uint64_t base = inflight();
    int p[2], q[2], sv[2];
    mk_pipe(p);
    mk_pipe(q);
    mk_pair(sv);

    /* ready at once (sv[0] writable): deadline -1 returns now, the fd < 0
     * entry gets revents 0 */
    PROMISE();
    struct pollfd f[5] = {{p[0], POLLIN, 0}, {sv[0], POLLIN | POLLOUT, 0},
                          {sv[1], POLLIN, 0}, {-1, POLLIN, 0}, {q[0], POLLIN, 0}};
    garbage(f, 5);
    int64_t t0 = aco_rt_now();
    int r = aco_rt_poll(f, 5, -1);
    CHECK_LT(since(t0), SOON);
    CHECK_EQ(r, 1);
    CHECK_EQ(f[1].revents, POLLOUT);
    CHECK_EQ(f[3].revents, 0);
    CHECK_AS_POLL(f, 5, r);

    /* readiness from another co wakes exactly the entry made ready, each
     * in turn; the call waited for it */
    int rd[4] = {p[0], sv[0], sv[1], q[0]};
    int wr[4] = {p[1], sv[1], sv[0], q[1]};
    for (int k = 0; k < 4; k++) {
        PROMISE();
        struct pollfd g[4];
        for (int i = 0; i < 4; i++) g[i] = (struct pollfd){rd[i], POLLIN, GARBAGE};
        t0 = aco_rt_now();
        AFTER(D, A_POKE, wr[k]);
        r = aco_rt_poll(g, 4, aco_rt_now() + 5000 * MS);
        int64_t t1 = aco_rt_now();
        CHECK_EQ(r, 1);
        for (int i = 0; i < 4; i++) CHECK_EQ(g[i].revents, i == k ? POLLIN : 0);
        CHECK_AS_POLL(g, 4, r);
        CHECK_GE(t1 - t0, D);
        CHECK_LT(t1 - acted_at, SOON);
        CHECK_EQ(drain(rd[k]), 1);
    }

    /* two made ready before the co runs again: both reported, count 2 */
    PROMISE();
    {
        struct pollfd g[4];
        for (int i = 0; i < 4; i++) g[i] = (struct pollfd){rd[i], POLLIN, GARBAGE};
        act_at(aco_rt_now() + D, A_POKE2, p[1], q[1], NULL);
        r = aco_rt_poll(g, 4, -1);
        CHECK_EQ(r, 2);
        CHECK_EQ(g[0].revents, POLLIN);
        CHECK_EQ(g[3].revents, POLLIN);
        CHECK_AS_POLL(g, 4, r);
        drain(p[0]);
        drain(q[0]);
    }

    /* readiness is a state, not an event: bytes left over after a partial
     * read, and bytes that came while the co did something else, are seen
     * at once by a call without limit */
    PROMISE();
    {
        CHECK_EQ(write(p[1], "ab", 2), 2);
        struct pollfd g = {p[0], POLLIN, GARBAGE};
        CHECK_EQ(aco_rt_poll(&g, 1, -1), 1);
        char c;
        CHECK_EQ(read(p[0], &c, 1), 1);
        for (int i = 0; i < 3; i++) {
            g.revents = GARBAGE;
            t0 = aco_rt_now();
            CHECK_EQ(aco_rt_poll(&g, 1, aco_rt_now() + 5000 * MS), 1);
            CHECK_LT(since(t0), SOON);
            CHECK_EQ(g.revents, POLLIN);
        }
        CHECK_EQ(read(p[0], &c, 1), 1);
        /* woken, drained, then a byte comes while the co sleeps */
        AFTER(D, A_POKE, p[1]);
        g.revents = GARBAGE;
        CHECK_EQ(aco_rt_poll(&g, 1, -1), 1);
        CHECK_EQ(drain(p[0]), 1);
        AFTER(D / 2, A_POKE, p[1]);
        CHECK_EQ(aco_rt_sleep(D), 0);
        g.revents = GARBAGE;
        t0 = aco_rt_now();
        CHECK_EQ(aco_rt_poll(&g, 1, -1), 1);
        CHECK_LT(since(t0), SOON);
        CHECK_EQ(g.revents, POLLIN);
        CHECK_EQ(drain(p[0]), 1);
    }

    /* POLLOUT: a full socket waits, and is woken when the peer drains it */
    PROMISE();
    {
        char big[4096];
        memset(big, 'b', sizeof big);
        while (send(sv[0], big, sizeof big, MSG_DONTWAIT | MSG_NOSIGNAL) > 0) {}
        CHECK(errno == EAGAIN || errno == EWOULDBLOCK);
        struct pollfd g = {sv[0], POLLOUT, GARBAGE};
        int64_t dl = aco_rt_now() + D;
        CHECK_EQ(aco_rt_poll(&g, 1, dl), -ETIMEDOUT);
        CHECK_GE(aco_rt_now(), dl);
        AFTER(D, A_DRAIN, sv[1]);
        g.revents = GARBAGE;
        r = aco_rt_poll(&g, 1, aco_rt_now() + 5000 * MS);
        CHECK_EQ(r, 1);
        CHECK_EQ(g.revents, POLLOUT);
        CHECK_AS_POLL(&g, 1, r);
    }

    /* every mask at once on a socket with data whose peer shut down its
     * writing: revents exactly as poll(2)'s */
    PROMISE();
    {
        int s2[2];
        mk_pair(s2);
        poke(s2[1]);
        CHECK_EQ(shutdown(s2[1], SHUT_WR), 0);
        static const short masks[] = {
            POLLIN, POLLRDNORM, POLLIN | POLLRDHUP, POLLRDHUP, POLLOUT, POLLWRNORM, POLLPRI,
            0, POLLRDBAND, POLLWRBAND,
            POLLIN | POLLOUT | POLLRDHUP | POLLPRI | POLLRDNORM | POLLRDBAND | POLLWRNORM |
                POLLWRBAND};
        enum { NM = sizeof masks / sizeof masks[0] };
        struct pollfd g[2 * NM];
        for (int i = 0; i < NM; i++) {
            g[i] = (struct pollfd){s2[0], masks[i], GARBAGE};
            g[NM + i] = (struct pollfd){s2[1], masks[i], GARBAGE};
        }
        r = aco_rt_poll(g, 2 * NM, -1);
        CHECK_GT(r, 0);
        CHECK_AS_POLL(g, 2 * NM, r);
        close2(s2);
    }

    /* POLLRDHUP alone, woken by the peer's shutdown(SHUT_WR) */
    PROMISE();
    {
        int s3[2];
        mk_pair(s3);
        struct pollfd g[2] = {{s3[0], POLLRDHUP, GARBAGE}, {s3[1], POLLIN, GARBAGE}};
        AFTER(D, A_SHUT_WR, s3[1]);
        r = aco_rt_poll(g, 2, aco_rt_now() + 5000 * MS);
        CHECK_EQ(r, 1);
        CHECK_EQ(g[0].revents, POLLRDHUP);
        CHECK_EQ(g[1].revents, 0);
        CHECK_AS_POLL(g, 2, r);
        close2(s3);
    }

    /* POLLIN woken by the peer's close: POLLIN and POLLHUP, as poll(2) */
    PROMISE();
    {
        int s4[2];
        mk_pair(s4);
        struct pollfd g = {s4[0], POLLIN, GARBAGE};
        AFTER(D, A_CLOSE, s4[1]);
        r = aco_rt_poll(&g, 1, aco_rt_now() + 5000 * MS);
        CHECK_EQ(r, 1);
        CHECK(g.revents & POLLIN);
        CHECK(g.revents & POLLHUP);
        CHECK_AS_POLL(&g, 1, r);
        xclose(s4[0]);
    }

    close2(p);
    close2(q);
    close2(sv);
    settle_inflight(base);
}

/* Several cos on one descriptor at once, each with its own events: each
 * woken by what it waits for, as poll(2) in several threads would be. */
typedef struct {
    int fd;
    short events;
    int64_t deadline;
    int r;
    short revents;
    int64_t at;
} sh1_t;
static sh1_t sh1[6];
static void sh1_poller(void* arg) {
    sh1_t* w = (sh1_t*)arg;
    struct pollfd f[2] = {{w->fd, w->events, GARBAGE}, {-1, 0, GARBAGE}};
    w->r = aco_rt_poll(f, 2, w->deadline);
    w->revents = f[0].revents;
    w->at = aco_rt_now();
    if (w->r > 0) CHECK_AS_POLL(f, 2, w->r);
}
static int sh1_read_r;
static void sh1_reader(void* arg) {
    char c;
    sh1_read_r = (int)aco_rt_read((int)(intptr_t)arg, &c, 1, aco_rt_now() + 5000 * MS);
}
static void shared_co(void* arg) {
    (void)arg;
    uint64_t base = inflight();
    int sv[2];
    mk_pair(sv);
    /* three pollers for POLLIN (one with POLLRDHUP too), one for POLLRDHUP
     * only: a byte wakes the three, not the fourth */
    PROMISE();
    int64_t dl = aco_rt_now() + 5000 * MS;
    sh1[0] = (sh1_t){sv[0], POLLIN, dl, 0, 0, 0};
    sh1[1] = (sh1_t){sv[0], POLLIN | POLLRDHUP, dl, 0, 0, 0};
    sh1[2] = (sh1_t){sv[0], POLLIN, dl, 0, 0, 0};
    sh1[3] = (sh1_t){sv[0], POLLRDHUP, aco_rt_now() + 4 * D, 0, 0, 0};
    aco_rt_co_t* h[4];
    for (int i = 0; i < 4; i++) h[i] = spawn_j(sh1_poller, &sh1[i]);
    CHECK_EQ(aco_rt_sleep(D), 0);
    poke(sv[1]);
    int64_t tw = aco_rt_now();
    for (int i = 0; i < 3; i++) {
        join_ok(h[i]);
        CHECK_EQ(sh1[i].r, 1);
        CHECK_EQ(sh1[i].revents, POLLIN);
        CHECK_LT(sh1[i].at - tw, SOON);
    }
    join_ok(h[3]);
    CHECK_EQ(sh1[3].r, -ETIMEDOUT);
    CHECK_EQ(drain(sv[0]), 1);

    /* a poller and a reader on one descriptor: the reader takes the byte;
     * the poller never says ready when nothing is (it waits on, or says
     * what poll(2) said), and sees the next byte */
    PROMISE();
    sh1_read_r = 0;
    sh1[4] = (sh1_t){sv[0], POLLIN, aco_rt_now() + 5000 * MS, 0, 0, 0};
    aco_rt_co_t* rd = spawn_j(sh1_reader, (void*)(intptr_t)sv[0]);
    CHECK_EQ(aco_rt_sleep(1 * MS), 0);
    aco_rt_co_t* pl = spawn_j(sh1_poller, &sh1[4]);
    CHECK_EQ(aco_rt_sleep(D), 0);
    poke(sv[1]);
    join_ok(rd);
    CHECK_EQ(sh1_read_r, 1);
    CHECK_EQ(aco_rt_sleep(D), 0);
    if (sh1[4].at == 0) poke(sv[1]);    /* it still waits: the next byte */
    join_ok(pl);
    CHECK_EQ(sh1[4].r, 1);
    CHECK_EQ(sh1[4].revents, POLLIN);
    drain(sv[0]);

    /* POLLIN and POLLOUT pollers on a full socket: draining it from the
     * other end wakes the POLLOUT one only */
    PROMISE();
    {
        char big[4096];
        memset(big, 'z', sizeof big);
        while (send(sv[0], big, sizeof big, MSG_DONTWAIT | MSG_NOSIGNAL) > 0) {}
        sh1[4] = (sh1_t){sv[0], POLLOUT, aco_rt_now() + 5000 * MS, 0, 0, 0};
        sh1[5] = (sh1_t){sv[0], POLLIN, aco_rt_now() + 5 * D, 0, 0, 0};
        aco_rt_co_t* a = spawn_j(sh1_poller, &sh1[4]);
        aco_rt_co_t* b = spawn_j(sh1_poller, &sh1[5]);
        CHECK_EQ(aco_rt_sleep(D), 0);
        CHECK_GT(drain(sv[1]), 0);
        join_ok(a);
        CHECK_EQ(sh1[4].r, 1);
        CHECK_EQ(sh1[4].revents, POLLOUT);
        join_ok(b);
        CHECK_EQ(sh1[5].r, -ETIMEDOUT);
    }
    close2(sv);
    settle_inflight(base);
}

/* ======================================================================== */
/* Deadlines                                                                */
/* ======================================================================== */

static void deadlines_co(void* arg) {
    (void)arg;
    int p[2];
    mk_pipe(p);
    struct pollfd f = {p[0], POLLIN, 0};
    int64_t past[] = {0, -2, INT64_MIN, -1000 * MS, 1, 0 /* now, below */};
    enum { NP = sizeof past / sizeof past[0] };

    /* "a deadline already passed: one look": ready is seen (even readiness
     * that came behind the runtime's back), at once */
    PROMISE();
    poke(p[1]);
    for (int i = 0; i < NP; i++) {
        if (i == NP - 1) past[i] = aco_rt_now();
        f.revents = GARBAGE;
        int64_t t0 = aco_rt_now();
        CHECK_EQ(aco_rt_poll(&f, 1, past[i]), 1);
        CHECK_LT(since(t0), SOON);
        CHECK_EQ(f.revents, POLLIN);
    }
    CHECK_EQ(drain(p[0]), 1);

    /* none ready: -ETIMEDOUT at once ("where poll(2) with timeout 0 says
     * 0") */
    PROMISE();
    for (int i = 0; i < NP; i++) {
        if (i == NP - 1) past[i] = aco_rt_now();
        int64_t t0 = aco_rt_now();
        CHECK_EQ(aco_rt_poll(&f, 1, past[i]), -ETIMEDOUT);
        CHECK_LT(since(t0), SOON);
        CHECK_EQ(aco_rt_poll(NULL, 0, past[i]), -ETIMEDOUT);
        CHECK_LT(since(t0), SOON);
    }

    /* -ETIMEDOUT, never early */
    PROMISE();
    int64_t dls[] = {1 * MS + 12345, 7 * MS + 1, 3 * D};
    for (size_t i = 0; i < sizeof dls / sizeof dls[0]; i++) {
        int64_t dl = aco_rt_now() + dls[i];
        CHECK_EQ(aco_rt_poll(&f, 1, dl), -ETIMEDOUT);
        int64_t t1 = aco_rt_now();
        CHECK_GE(t1, dl);
        CHECK_LT(t1 - dl, SOON);
    }

    /* data that comes after the timeout is not lost: the next look has it */
    PROMISE();
    poke(p[1]);
    f.revents = GARBAGE;
    CHECK_EQ(aco_rt_poll(&f, 1, 0), 1);
    CHECK_EQ(f.revents, POLLIN);
    CHECK_EQ(drain(p[0]), 1);

    /* -1 waits without limit */
    PROMISE();
    int64_t t0 = aco_rt_now();
    AFTER(3 * D, A_POKE, p[1]);
    f.revents = GARBAGE;
    CHECK_EQ(aco_rt_poll(&f, 1, -1), 1);
    CHECK_GE(since(t0), 3 * D);
    CHECK_EQ(f.revents, POLLIN);
    CHECK_EQ(drain(p[0]), 1);

    /* "n 0 sleeps until the deadline (-ETIMEDOUT)", never early; fds NULL
     * or not */
    PROMISE();
    for (int i = 0; i < 2; i++) {
        int64_t dl = aco_rt_now() + D + 777;
        CHECK_EQ(aco_rt_poll(i ? &f : NULL, 0, dl), -ETIMEDOUT);
        CHECK_GE(aco_rt_now(), dl);
        CHECK_LT(aco_rt_now() - dl, SOON);
    }

    /* only skipped entries: nothing to wait for but the deadline */
    PROMISE();
    {
        struct pollfd g[3] = {{-1, POLLIN, GARBAGE}, {-7, POLLOUT, GARBAGE},
                              {INT_MIN, POLLIN | POLLOUT, GARBAGE}};
        int64_t dl = aco_rt_now() + D;
        CHECK_EQ(aco_rt_poll(g, 3, dl), -ETIMEDOUT);
        CHECK_GE(aco_rt_now(), dl);
        CHECK_EQ(aco_rt_poll(g, 3, 0), -ETIMEDOUT);
    }
    close2(p);
}

/* ======================================================================== */
/* Cancel                                                                   */
/* ======================================================================== */

/* "this call and every later blocking call of the co fail so, at once,
 * whether or not they would have had to wait" */
static void cancel_self_co(void* arg) {
    (void)arg;
    int p[2], q[2];
    mk_pipe(p);
    mk_pipe(q);
    poke(p[1]);
    CHECK_EQ(aco_rt_cancel(aco_rt_self()), 0);
    CHECK(aco_rt_cancelled());
    int64_t t0 = aco_rt_now();
    struct pollfd f = {p[0], POLLIN, 0};
    CHECK_EQ(aco_rt_poll(&f, 1, -1), -ECANCELED);       /* ready */
    CHECK_EQ(aco_rt_poll(&f, 1, 0), -ECANCELED);        /* ready, one look */
    CHECK_EQ(aco_rt_poll(NULL, 0, -1), -ECANCELED);     /* n 0 */
    CHECK_EQ(aco_rt_poll(NULL, 0, 0), -ECANCELED);
    f.fd = q[0];
    CHECK_EQ(aco_rt_poll(&f, 1, -1), -ECANCELED);       /* would wait */
    CHECK_EQ(aco_rt_poll(&f, 1, aco_rt_now() + 5000 * MS), -ECANCELED);
    CHECK_LT(since(t0), SOON);
    /* it transferred nothing: the byte is still there */
    CHECK_EQ(drain(p[0]), 1);
    close2(p);
    close2(q);
}

typedef struct {
    int fd;             /* -2: n == 0; -3: fd < 0 entries only; else a pipe's read end */
    int64_t deadline;
    int expect;
    int64_t done_at;
} cw_t;
static void cancel_waiter(void* arg) {
    cw_t* w = (cw_t*)arg;
    struct pollfd f[3] = {{w->fd, POLLIN, 0}, {-1, POLLIN, 0}, {-1, POLLIN, 0}};
    int r;
    if (w->fd == -2) r = aco_rt_poll(NULL, 0, w->deadline);
    else if (w->fd == -3) r = aco_rt_poll(f + 1, 2, w->deadline);
    else r = aco_rt_poll(f, 1, w->deadline);
    w->done_at = aco_rt_now();
    CHECK_EQ(r, w->expect);
    /* and every later call */
    CHECK_EQ(aco_rt_poll(f + 1, 1, -1), -ECANCELED);
    CHECK_EQ(aco_rt_poll(NULL, 0, 0), -ECANCELED);
    CHECK_LT(since(w->done_at), SOON);
}

static void* cancel_from_thread(void* arg) {
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
    CHECK_EQ(aco_rt_cancel((aco_rt_co_t*)arg), 0);
    return NULL;
}

static void cancel_co(void* arg) {
    (void)arg;
    uint64_t base = inflight();
    /* cancelled by itself */
    PROMISE();
    join_ok(spawn_j(cancel_self_co, NULL));

    int p[2];
    mk_pipe(p);
    static cw_t w;      /* another co's: not on this co's stack */

    /* cancelled before it ever ran */
    PROMISE();
    w = (cw_t){p[0], -1, -ECANCELED, 0};
    aco_rt_co_t* h = spawn_j(cancel_waiter, &w);
    CHECK_EQ(aco_rt_cancel(h), 0);
    join_ok(h);

    /* cancelled while waiting: without limit, with a deadline, n == 0,
     * skipped entries only */
    int kinds[][2] = {{p[0], -1}, {p[0], 1}, {-2, -1}, {-2, 1}, {-3, -1}};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        PROMISE();
        w = (cw_t){kinds[i][0], kinds[i][1] < 0 ? -1 : aco_rt_now() + 5000 * MS, -ECANCELED, 0};
        int64_t t0 = aco_rt_now();
        h = spawn_j(cancel_waiter, &w);
        CHECK_EQ(aco_rt_sleep(D), 0);
        CHECK_EQ(w.done_at, 0);         /* it waits */
        int64_t tc = aco_rt_now();
        CHECK_EQ(aco_rt_cancel(h), 0);
        join_ok(h);
        CHECK_GE(w.done_at, t0 + D);
        CHECK_LT(w.done_at - tc, SOON);
    }

    /* cancelled from a plain thread (aco_rt_cancel: "From any thread") */
    PROMISE();
    w = (cw_t){p[0], aco_rt_now() + 3000 * MS, -ECANCELED, 0};
    int64_t t0 = aco_rt_now();
    h = spawn_j(cancel_waiter, &w);
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, cancel_from_thread, h), 0);
    join_ok(h);
    CHECK_EQ(pthread_join(th, NULL), 0);
    CHECK_LT(w.done_at - t0, 20 * MS + SOON);

    /* the cancelled waits left nothing: data now does not disturb anyone,
     * and nothing is in flight */
    poke(p[1]);
    settle_inflight(base);
    close2(p);
}

/* ======================================================================== */
/* -EPERM, -EINVAL                                                          */
/* ======================================================================== */

static void eperm_calls(const char* where) {
    int p[2];
    mk_pipe(p);
    poke(p[1]);
    struct pollfd f = {p[0], POLLIN, 0};
    if (aco_rt_poll(&f, 1, -1) != -EPERM || aco_rt_poll(&f, 1, 0) != -EPERM ||
        aco_rt_poll(NULL, 0, -1) != -EPERM || aco_rt_cancel_shield(1) != -EPERM ||
        aco_rt_cancel_shield(0) != -EPERM) {
        fprintf(stderr, "%s: ", where);
        CHECK(!"-EPERM outside a co");
    }
    close2(p);
}
static void* eperm_thread(void* arg) {
    eperm_calls((const char*)arg);
    return NULL;
}
static aco_rt_timer_t eperm_timer;
static int eperm_timer_ran;
static void eperm_timer_fn(aco_rt_timer_t* t) {
    (void)t;
    CHECK(aco_rt_self() == NULL);
    eperm_calls("a timer callback");
    eperm_timer_ran = 1;
}
static void eperm_co(void* arg) {
    (void)arg;
    PROMISE();
    CHECK_EQ(aco_rt_timer_start(&eperm_timer, aco_rt_now() + 1 * MS, eperm_timer_fn), 0);
    CHECK_EQ(aco_rt_sleep(D), 0);
    CHECK_EQ(eperm_timer_ran, 1);
    PROMISE();
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, eperm_thread, (void*)"a plain thread"), 0);
    CHECK_EQ(pthread_join(th, NULL), 0);
}

static void einval_co(void* arg) {
    (void)arg;
    struct rlimit rl;
    CHECK_EQ(getrlimit(RLIMIT_NOFILE, &rl), 0);
    if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > (1u << 22)) {
        /* an array of the limit's size would not be small: lower it */
        struct rlimit r2 = rl;
        r2.rlim_cur = 4096;
        CHECK_EQ(setrlimit(RLIMIT_NOFILE, &r2), 0);
        CHECK_EQ(getrlimit(RLIMIT_NOFILE, &rl), 0);
    }
    nfds_t lim = (nfds_t)rl.rlim_cur;
    int p[2];
    mk_pipe(p);
    poke(p[1]);
    struct pollfd* f = malloc((lim + 1) * sizeof *f);
    CHECK(f != NULL);
    for (nfds_t i = 0; i <= lim; i++) f[i] = (struct pollfd){-1, POLLIN, 0};
    f[lim - 1].fd = p[0];

    /* "-EINVAL  n is over the RLIMIT_NOFILE soft limit": whatever the
     * deadline, with a ready entry in the array */
    PROMISE();
    CHECK_EQ(aco_rt_poll(f, lim + 1, -1), -EINVAL);
    CHECK_EQ(aco_rt_poll(f, lim + 1, 0), -EINVAL);
    CHECK_EQ(aco_rt_poll(f, lim + 1, aco_rt_now() + D), -EINVAL);
    /* n with high bits set is over too (not cut to an int) */
#if __SIZEOF_LONG__ > 4
    CHECK_EQ(aco_rt_poll(f, ((nfds_t)1 << 32) + 1, -1), -EINVAL);
#endif
    CHECK_EQ(aco_rt_poll(f, (nfds_t)-1, -1), -EINVAL);
    /* n equal to the limit is fine */
    PROMISE();
    garbage(f, lim);
    CHECK_EQ(aco_rt_poll(f, lim, -1), 1);
    CHECK_EQ(f[lim - 1].revents, POLLIN);
    CHECK_EQ(f[0].revents, 0);

    /* a soft limit lowered meanwhile counts (not under memcheck, which
     * keeps the process's real limit and shows the program one of its own) */
#ifndef ACO_USE_VALGRIND
    PROMISE();
    struct rlimit low = rl;
    low.rlim_cur = 64;
    CHECK_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
    struct pollfd g[65];
    for (int i = 0; i < 65; i++) g[i] = (struct pollfd){-1, POLLIN, 0};
    g[0].fd = p[0];
    int r65 = aco_rt_poll(g, 65, -1);
    int r64 = aco_rt_poll(g, 64, -1);
    CHECK_EQ(setrlimit(RLIMIT_NOFILE, &rl), 0);
    CHECK_EQ(r65, -EINVAL);
    CHECK_EQ(r64, 1);
#endif
    free(f);
    close2(p);
}

/* ======================================================================== */
/* fd < 0, events 0, POLLNVAL, aco_rt_close, duplicates                     */
/* ======================================================================== */

typedef struct {
    int fd;
    int64_t at;
} rtc_t;
static void* rtclose_from_thread(void* arg) {
    rtc_t* c = (rtc_t*)arg;
    struct timespec ts = {0, 0};
    int64_t d = c->at - aco_rt_now();
    if (d > 0) {
        ts.tv_sec = d / 1000000000;
        ts.tv_nsec = d % 1000000000;
        nanosleep(&ts, NULL);
    }
    CHECK_EQ(aco_rt_close(c->fd), 0);
    return NULL;
}

/* aco_rt_close(*fd), then a new pipe with a byte in it at the same
 * number, before the waiting co runs again. */
static int reuse_new_wr;
static void reuse_closer(void* arg) {
    int num = *(int*)arg;
    CHECK_EQ(aco_rt_sleep(D), 0);
    CHECK_EQ(aco_rt_close(num), 0);
    int n[2];
    mk_pipe(n);
    if (n[1] == num) n[1] = move_to(n[1], num + 1000);
    n[0] = move_to(n[0], num);
    poke(n[1]);
    reuse_new_wr = n[1];
}

static void nval_co(void* arg) {
    (void)arg;
    uint64_t base = inflight();
    int p[2], q[2];
    mk_pipe(p);
    mk_pipe(q);
    int r;

    /* "An entry with fd < 0 is skipped (revents 0)" */
    PROMISE();
    {
        poke(p[1]);
        struct pollfd f[4] = {{-1, POLLIN | POLLOUT, GARBAGE}, {p[0], POLLIN, GARBAGE},
                              {-5, 0, GARBAGE}, {INT_MIN, POLLIN, GARBAGE}};
        r = aco_rt_poll(f, 4, -1);
        CHECK_EQ(r, 1);
        CHECK_EQ(f[0].revents, 0);
        CHECK_EQ(f[1].revents, POLLIN);
        CHECK_EQ(f[2].revents, 0);
        CHECK_EQ(f[3].revents, 0);
        CHECK_EQ(drain(p[0]), 1);
    }

    /* "with events 0 it still says POLLERR, POLLHUP and POLLNVAL": at once */
    PROMISE();
    {
        int hp[2], ep[2], cs[2], closed[2];
        mk_pipe(hp);
        mk_pipe(ep);
        mk_pair(cs);
        mk_pipe(closed);
        xclose(hp[1]);          /* hp[0]: POLLHUP */
        xclose(ep[0]);          /* ep[1]: POLLERR */
        xclose(cs[1]);          /* cs[0]: POLLHUP */
        xclose(closed[0]);      /* not open: POLLNVAL */
        struct pollfd f[5] = {{hp[0], 0, GARBAGE}, {ep[1], 0, GARBAGE}, {cs[0], 0, GARBAGE},
                              {closed[0], 0, GARBAGE}, {q[0], 0, GARBAGE}};
        r = aco_rt_poll(f, 5, -1);
        CHECK_EQ(r, 4);
        CHECK_EQ(f[0].revents, POLLHUP);
        CHECK_EQ(f[1].revents, POLLERR);
        CHECK_EQ(f[2].revents, POLLHUP);
        CHECK_EQ(f[3].revents, POLLNVAL);
        CHECK_EQ(f[4].revents, 0);
        CHECK_AS_POLL(f, 5, r);
        xclose(hp[0]);
        xclose(ep[1]);
        xclose(cs[0]);
        xclose(closed[1]);
    }

    /* events 0: data is not waited for, but the peer's end and a reader's
     * end are (woken while waiting) */
    PROMISE();
    {
        int cs[2], ep[2];
        mk_pair(cs);
        mk_pipe(ep);
        poke(cs[1]);
        /* (events of only POLLERR|POLLHUP|POLLNVAL: the same as 0) */
        struct pollfd f[4] = {{cs[0], 0, GARBAGE}, {ep[1], 0, GARBAGE},
                              {cs[0], POLLERR | POLLHUP | POLLNVAL, GARBAGE},
                              {ep[1], POLLERR | POLLHUP | POLLNVAL, GARBAGE}};
        int64_t dl = aco_rt_now() + D;
        CHECK_EQ(aco_rt_poll(f, 4, dl), -ETIMEDOUT);
        CHECK_GE(aco_rt_now(), dl);
        AFTER(D, A_CLOSE, cs[1]);
        garbage(f, 4);
        r = aco_rt_poll(f, 4, aco_rt_now() + 5000 * MS);
        CHECK_EQ(r, 2);
        CHECK_EQ(f[0].revents, POLLHUP);
        CHECK_EQ(f[1].revents, 0);
        CHECK_EQ(f[2].revents, POLLHUP);
        CHECK_EQ(f[3].revents, 0);
        CHECK_AS_POLL(f, 4, r);
        f[0].fd = f[2].fd = -1;
        AFTER(D, A_CLOSE, ep[0]);
        garbage(f, 4);
        r = aco_rt_poll(f, 4, aco_rt_now() + 5000 * MS);
        CHECK_EQ(r, 2);
        CHECK_EQ(f[1].revents, POLLERR);
        CHECK_EQ(f[3].revents, POLLERR);
        CHECK_AS_POLL(f, 4, r);
        xclose(cs[0]);
        xclose(ep[1]);
    }

    /* "A number not open says POLLNVAL", at once with -1, counted */
    PROMISE();
    {
        int c[2];
        mk_pipe(c);
        close2(c);
        struct pollfd f[5] = {{c[0], POLLIN, GARBAGE}, {q[0], POLLIN, GARBAGE},
                              {c[1], POLLOUT, GARBAGE}, {19999, POLLIN, GARBAGE},
                              {1 << 20, POLLIN, GARBAGE}};
        int64_t t0 = aco_rt_now();
        r = aco_rt_poll(f, 5, -1);
        CHECK_LT(since(t0), SOON);
        CHECK_EQ(r, 4);
        CHECK_EQ(f[0].revents, POLLNVAL);
        CHECK_EQ(f[1].revents, 0);
        CHECK_EQ(f[2].revents, POLLNVAL);
        CHECK_EQ(f[3].revents, POLLNVAL);
        CHECK_EQ(f[4].revents, POLLNVAL);
        CHECK_AS_POLL(f, 5, r);
    }
    /* numbers past what the runtime keeps records for (2^24) */
    PROMISE();
    {
        struct pollfd f[2] = {{(1 << 24) + 5, POLLIN, GARBAGE}, {INT_MAX, POLLIN, GARBAGE}};
        r = aco_rt_poll(f, 2, -1);
        if (r != 2)
            fprintf(stderr, "[%s] numbers over 2^24 not open: aco_rt_poll says %d (%s)\n",
                    test_backend_label, r, r < 0 ? strerror(-r) : "");
        CHECK_EQ(r, 2);
        CHECK_EQ(f[0].revents, POLLNVAL);
        CHECK_EQ(f[1].revents, POLLNVAL);
    }

    /* "one closed with aco_rt_close while the co waits ends the wait with
     * POLLNVAL": by another co, the same number twice, events 0 */
    PROMISE();
    {
        int c[2];
        mk_pipe(c);
        struct pollfd f[4] = {{c[0], POLLIN, GARBAGE}, {q[0], POLLIN, GARBAGE},
                              {c[0], 0, GARBAGE}, {c[0], POLLIN | POLLPRI, GARBAGE}};
        int64_t t0 = aco_rt_now();
        AFTER(D, A_RTCLOSE, c[0]);
        r = aco_rt_poll(f, 4, aco_rt_now() + 5000 * MS);
        CHECK_GE(since(t0), D);
        CHECK_LT(aco_rt_now() - acted_at, SOON);
        CHECK_EQ(r, 3);
        CHECK_EQ(f[0].revents, POLLNVAL);
        CHECK_EQ(f[1].revents, 0);
        CHECK_EQ(f[2].revents, POLLNVAL);
        CHECK_EQ(f[3].revents, POLLNVAL);
        CHECK_AS_POLL(f, 4, r);
        xclose(c[1]);
    }
    /* a socket closed so: the runtime lets go of it (the peer sees its end) */
    PROMISE();
    {
        int cs[2];
        mk_pair(cs);
        struct pollfd f = {cs[0], POLLIN, GARBAGE};
        AFTER(D, A_RTCLOSE, cs[0]);
        r = aco_rt_poll(&f, 1, aco_rt_now() + 5000 * MS);
        CHECK_EQ(r, 1);
        CHECK_EQ(f.revents, POLLNVAL);
        int64_t t0 = aco_rt_now();
        struct pollfd g = {cs[1], POLLIN, 0};
        while (!(poll(&g, 1, 0) == 1 && (g.revents & POLLHUP)) && since(t0) < 1000 * MS)
            CHECK_EQ(aco_rt_sleep(1 * MS), 0);
        CHECK(g.revents & POLLHUP);
        xclose(cs[1]);
    }
    /* by a plain thread ("aco_rt_close ... From any thread") */
    PROMISE();
    {
        int c[2];
        mk_pipe(c);
        static rtc_t rc;
        rc = (rtc_t){c[0], aco_rt_now() + D};
        pthread_t th;
        CHECK_EQ(pthread_create(&th, NULL, rtclose_from_thread, &rc), 0);
        struct pollfd f[2] = {{q[0], POLLIN, GARBAGE}, {c[0], POLLIN, GARBAGE}};
        r = aco_rt_poll(f, 2, aco_rt_now() + 3000 * MS);
        int64_t t1 = aco_rt_now();
        CHECK_EQ(pthread_join(th, NULL), 0);
        CHECK_EQ(r, 1);
        CHECK_EQ(f[0].revents, 0);
        CHECK_EQ(f[1].revents, POLLNVAL);
        CHECK_LT(t1 - rc.at, SOON);
        xclose(c[1]);
    }

    /* duplicates: the same number twice and a dup(2) of it, each entry its
     * own revents */
    PROMISE();
    {
        int cs[2];
        mk_pair(cs);
        int d = dup(cs[0]);
        CHECK(d >= 0);
        struct pollfd f[5] = {{cs[0], POLLIN, 0}, {cs[0], POLLIN | POLLRDHUP, 0},
                              {d, POLLIN, 0}, {cs[0], 0, 0}, {cs[0], POLLOUT, 0}};
        garbage(f, 5);
        r = aco_rt_poll(f, 5, -1);        /* writable at once */
        CHECK_EQ(r, 1);
        CHECK_EQ(f[4].revents, POLLOUT);
        CHECK_AS_POLL(f, 5, r);
        f[4].fd = -1;
        garbage(f, 5);
        AFTER(D, A_POKE, cs[1]);
        r = aco_rt_poll(f, 5, aco_rt_now() + 5000 * MS);
        CHECK_EQ(r, 3);
        CHECK_EQ(f[0].revents, POLLIN);
        CHECK_EQ(f[1].revents, POLLIN);
        CHECK_EQ(f[2].revents, POLLIN);
        CHECK_EQ(f[3].revents, 0);
        CHECK_AS_POLL(f, 5, r);
        CHECK_EQ(drain(cs[0]), 1);
        garbage(f, 5);
        AFTER(D, A_CLOSE, cs[1]);
        r = aco_rt_poll(f, 5, aco_rt_now() + 5000 * MS);
        CHECK_EQ(r, 4);
        CHECK_EQ(f[3].revents, POLLHUP);
        CHECK(f[1].revents & POLLRDHUP);
        CHECK_AS_POLL(f, 5, r);
        /* aco_rt_close of one number: its entries POLLNVAL, the dup lives */
        int e[2];
        mk_pipe(e);
        struct pollfd g[4] = {{e[0], POLLIN, 0}, {e[0], POLLIN, 0}, {q[0], POLLIN, 0},
                              {-1, 0, 0}};
        int ed = dup(e[0]);
        CHECK(ed >= 0);
        g[3].fd = ed;
        g[3].events = POLLIN;
        garbage(g, 4);
        AFTER(D, A_RTCLOSE, e[0]);
        r = aco_rt_poll(g, 4, aco_rt_now() + 5000 * MS);
        CHECK_EQ(r, 2);
        CHECK_EQ(g[0].revents, POLLNVAL);
        CHECK_EQ(g[1].revents, POLLNVAL);
        CHECK_EQ(g[2].revents, 0);
        CHECK_EQ(g[3].revents, 0);
        CHECK_AS_POLL(g, 4, r);
        xclose(ed);
        xclose(e[1]);
        xclose(cs[0]);
        xclose(d);
    }
    /* one descriptor in 1000 entries (and dups of another) */
    PROMISE();
    {
        enum { ND = 1000 };
        int e[2];
        mk_pipe(e);
        int dd[8];
        for (int i = 0; i < 8; i++) CHECK((dd[i] = dup(q[0])) >= 0);
        struct pollfd* f = malloc(ND * sizeof *f);
        CHECK(f != NULL);
        for (int i = 0; i < ND; i++)
            f[i] = (struct pollfd){i % 2 ? e[0] : dd[i / 2 % 8], POLLIN, GARBAGE};
        AFTER(D, A_POKE, e[1]);
        r = aco_rt_poll(f, ND, aco_rt_now() + 5000 * MS);
        CHECK_EQ(r, ND / 2);
        for (int i = 0; i < ND; i++) CHECK_EQ(f[i].revents, i % 2 ? POLLIN : 0);
        garbage(f, ND);
        AFTER(D, A_POKE, q[1]);
        CHECK_EQ(drain(e[0]), 1);
        r = aco_rt_poll(f, ND, aco_rt_now() + 5000 * MS);
        CHECK_EQ(r, ND / 2);
        for (int i = 0; i < ND; i++) CHECK_EQ(f[i].revents, i % 2 ? 0 : POLLIN);
        CHECK_EQ(drain(q[0]), 1);
        free(f);
        for (int i = 0; i < 8; i++) xclose(dd[i]);
        close2(e);
    }
    close2(p);
    close2(q);
    settle_inflight(base);
}

/* ======================================================================== */
/* A regular file; other descriptors without readiness (noted)             */
/* ======================================================================== */

static void note_unpollable(const char* what, int fd) {
    struct pollfd f = {fd, POLLIN | POLLOUT, GARBAGE};
    struct pollfd c = f;
    int r = aco_rt_poll(&f, 1, aco_rt_now() + 50 * MS);
    int pr = poll(&c, 1, 0);
    if (r != pr || f.revents != c.revents)
        printf("  note [%s]: %s, POLLIN|POLLOUT: aco_rt_poll %d revents %#x; poll(2) %d "
               "revents %#x\n",
               test_backend_label, what, r, (unsigned)(unsigned short)f.revents, pr,
               (unsigned)(unsigned short)c.revents);
}

static void regfile_co(void* arg) {
    (void)arg;
    uint64_t base = inflight();
    char path[] = "/tmp/test_poll.XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    int ro = open(path, O_RDONLY | O_CLOEXEC);
    CHECK(ro >= 0);
    CHECK_EQ(unlink(path), 0);
    int p[2];
    mk_pipe(p);

    /* "A regular file is ready for reading and writing at once (poll(2))":
     * an empty file, its end, a read-only descriptor */
    static const short masks[] = {POLLIN, POLLOUT, POLLIN | POLLOUT, POLLIN | POLLPRI,
                                  POLLOUT | POLLRDHUP, POLLRDNORM, POLLWRNORM,
                                  POLLIN | POLLOUT | POLLRDNORM | POLLWRNORM};
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < sizeof masks / sizeof masks[0]; i++) {
            PROMISE();
            struct pollfd f[3] = {{p[0], POLLIN, GARBAGE}, {fd, masks[i], GARBAGE},
                                  {ro, masks[i], GARBAGE}};
            int64_t t0 = aco_rt_now();
            int r = aco_rt_poll(f, 3, aco_rt_now() + SOON);
            CHECK_LT(since(t0), SOON);
            CHECK_EQ(r, 2);
            CHECK_EQ(f[0].revents, 0);
            CHECK(f[1].revents & (POLLIN | POLLOUT | POLLRDNORM | POLLWRNORM));
            CHECK_AS_POLL(f, 3, r);
            if (pass == 0 && i == 0) CHECK_EQ(write(fd, "0123456789", 10), 10);
        }
    /* "and never for anything else": the deadline ends it (never early),
     * or another descriptor's readiness */
    static const short never[] = {POLLPRI, POLLRDHUP, 0, POLLPRI | POLLRDHUP};
    for (size_t i = 0; i < sizeof never / sizeof never[0]; i++) {
        PROMISE();
        struct pollfd f[2] = {{fd, never[i], GARBAGE}, {ro, never[i], GARBAGE}};
        int64_t dl = aco_rt_now() + D / 2;
        CHECK_EQ(aco_rt_poll(f, 2, dl), -ETIMEDOUT);
        CHECK_GE(aco_rt_now(), dl);
    }
    PROMISE();
    {
        struct pollfd f[2] = {{fd, POLLPRI, GARBAGE}, {p[0], POLLIN, GARBAGE}};
        AFTER(D, A_POKE, p[1]);
        int r = aco_rt_poll(f, 2, aco_rt_now() + 5000 * MS);
        CHECK_EQ(r, 1);
        CHECK_EQ(f[0].revents, 0);
        CHECK_EQ(f[1].revents, POLLIN);
        CHECK_AS_POLL(f, 2, r);
        CHECK_EQ(drain(p[0]), 1);
    }

    /* not promised by the header: what other descriptors that poll(2)
     * calls always ready give (noted when they differ from poll(2)) */
    int dn = open("/dev/null", O_RDWR | O_CLOEXEC);
    int dir = open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    CHECK(dn >= 0 && dir >= 0);
    note_unpollable("/dev/null", dn);
    note_unpollable("a directory", dir);
    xclose(dn);
    xclose(dir);

    xclose(fd);
    xclose(ro);
    close2(p);
    settle_inflight(base);
}

/* ======================================================================== */
/* A descriptor is the file: close(2) and reuse, dup2 over, between calls   */
/* ======================================================================== */


static void identity_co(void* arg) {
    (void)arg;
    uint64_t base = inflight();
    int r;
    PROMISE();
    int a[2];
    mk_pipe(a);
    struct pollfd f = {a[0], POLLIN, GARBAGE};
    AFTER(D, A_POKE, a[1]);
    CHECK_EQ(aco_rt_poll(&f, 1, -1), 1);
    int num = a[0];
    close2(a);                      /* behind the runtime's back */
    f.revents = GARBAGE;
    CHECK_EQ(aco_rt_poll(&f, 1, -1), 1);
    CHECK_EQ(f.revents, POLLNVAL);  /* not open now */

    /* a new pipe at the same number: its own readiness, no stale one */
    PROMISE();
    int b[2];
    mk_pipe(b);
    if (b[1] == num) b[1] = move_to(b[1], num + 1000);
    b[0] = move_to(b[0], num);
    f = (struct pollfd){num, POLLIN, GARBAGE};
    int64_t dl = aco_rt_now() + D;
    CHECK_EQ(aco_rt_poll(&f, 1, dl), -ETIMEDOUT);
    CHECK_GE(aco_rt_now(), dl);
    AFTER(D, A_POKE, b[1]);
    f.revents = GARBAGE;
    r = aco_rt_poll(&f, 1, aco_rt_now() + 5000 * MS);
    CHECK_EQ(r, 1);
    CHECK_EQ(f.revents, POLLIN);
    CHECK_AS_POLL(&f, 1, r);
    close2(b);

    /* dup2 over a number whose old file lives on under another number: the
     * old file's readiness is not the number's */
    PROMISE();
    int sv[2];
    mk_pair(sv);
    int keep = dup(sv[0]);
    CHECK(keep >= 0);
    f = (struct pollfd){sv[0], POLLIN, GARBAGE};
    AFTER(D, A_POKE, sv[1]);
    CHECK_EQ(aco_rt_poll(&f, 1, aco_rt_now() + 5000 * MS), 1);
    CHECK_EQ(drain(sv[0]), 1);
    int c[2];
    mk_pipe(c);
    CHECK_EQ(dup3(c[0], sv[0], O_CLOEXEC), sv[0]);     /* sv[0] is the pipe now */
    xclose(c[0]);
    f = (struct pollfd){sv[0], POLLIN, GARBAGE};
    AFTER(D, A_POKE, sv[1]);        /* to the old socket */
    dl = aco_rt_now() + 3 * D;
    r = aco_rt_poll(&f, 1, dl);
    if (r != -ETIMEDOUT)
        fprintf(stderr, "[%s] dup2 over: got %d revents %#x\n", test_backend_label, r,
                (unsigned)(unsigned short)f.revents);
    CHECK_EQ(r, -ETIMEDOUT);
    CHECK_GE(aco_rt_now(), dl);
    AFTER(D, A_POKE, c[1]);
    f.revents = GARBAGE;
    r = aco_rt_poll(&f, 1, aco_rt_now() + 5000 * MS);
    CHECK_EQ(r, 1);
    CHECK_EQ(f.revents, POLLIN);
    CHECK_AS_POLL(&f, 1, r);
    /* the socket, by its other number, has its byte */
    f = (struct pollfd){keep, POLLIN, GARBAGE};
    CHECK_EQ(aco_rt_poll(&f, 1, 0), 1);
    CHECK_EQ(f.revents, POLLIN);
    xclose(keep);
    xclose(sv[0]);
    xclose(sv[1]);
    xclose(c[1]);
    settle_inflight(base);
}

/* ======================================================================== */
/* -EBUSY: a socket that lends on another thread's scheduler                */
/* ======================================================================== */

static int lend_sv[2];
static atomic_int lend_state;       /* 1: lent, 2: let go */
static uint64_t lend_ring_seen;
static void lender_co(void* arg) {
    (void)arg;
    const char* d = NULL;
    CHECK_EQ(aco_rt_recv_lend(lend_sv[0], &d, aco_rt_in_ms(2000)), 1);
    CHECK_EQ(d[0], 'L');
    CHECK_EQ(aco_rt_lend_return(d), 0);
    aco_rt_stats_t st;
    aco_rt_stats(NULL, &st);
    lend_ring_seen = st.lend_ring;
    atomic_store(&lend_state, 1);
    while (atomic_load(&lend_state) != 2) CHECK_EQ(aco_rt_sleep(1 * MS), 0);
}
static void* lender_thread(void* arg) {
    (void)arg;
    aco_rt_opts_t o = {0};
    o.backend = ACO_RT_BACKEND_URING;
    aco_rt_sched_t* s = test_sched(&o);
    test_go(s, lender_co, NULL);
    aco_rt_sched_free(s);
    return NULL;
}
static void ebusy_co(void* arg) {
    (void)arg;
    if (!lend_ring_seen) {
        printf("  skip [%s]: -EBUSY: the lender's io_uring has no buffer ring (kernel)\n",
               test_backend_label);
        return;
    }
    PROMISE();
    int p[2];
    mk_pipe(p);
    poke(p[1]);
    struct pollfd f[2] = {{p[0], POLLIN, 0}, {lend_sv[0], POLLIN, 0}};
    int64_t t0 = aco_rt_now();
    CHECK_EQ(aco_rt_poll(f + 1, 1, aco_rt_now() + 5000 * MS), -EBUSY);
    CHECK_EQ(aco_rt_poll(f + 1, 1, 0), -EBUSY);
    CHECK_EQ(aco_rt_poll(f, 2, -1), -EBUSY);
    CHECK_LT(since(t0), SOON);
    close2(p);
}
/* Same scheduler: poll(POLLIN) on a socket whose bytes a multishot receive
 * took (the header names aco_rt_wait(POLLIN) among the calls that see
 * them, not aco_rt_poll): noted. */
static void lend_same_co(void* arg) {
    (void)arg;
    int sv[2];
    mk_pair(sv);
    poke(sv[1]);
    const char* d = NULL;
    CHECK_EQ(aco_rt_recv_lend(sv[0], &d, aco_rt_in_ms(2000)), 1);
    CHECK_EQ(aco_rt_lend_return(d), 0);
    AFTER(D, A_POKE, sv[1]);
    struct pollfd f = {sv[0], POLLIN, GARBAGE};
    int r = aco_rt_poll(&f, 1, aco_rt_now() + 10 * D);
    int w = aco_rt_wait(sv[0], POLLIN, 0);
    if (r != 1 || f.revents != POLLIN)
        printf("  note [%s]: a byte that came to a lending socket: aco_rt_poll(POLLIN) says "
               "%d (revents %#x), aco_rt_wait(POLLIN) %#x\n",
               test_backend_label, r, (unsigned)(unsigned short)f.revents, (unsigned)w);
    char c;
    CHECK_EQ(aco_rt_read(sv[0], &c, 1, aco_rt_in_ms(1000)), 1);
    CHECK_EQ(aco_rt_close(sv[0]), 0);
    xclose(sv[1]);
}
static void ebusy_body(aco_rt_sched_t* s) {
    (void)s;
#ifdef ACO_USE_VALGRIND
    /* the lender's scheduler is io_uring's, which memcheck cannot run
     * beside another thread (it holds its lock through io_uring_enter) */
    printf("  skip [%s]: -EBUSY: a lender on io_uring, under memcheck\n", test_backend_label);
    return;
#endif
    mk_pair(lend_sv);
    CHECK_EQ(send(lend_sv[1], "L", 1, MSG_NOSIGNAL), 1);
    atomic_store(&lend_state, 0);
    lend_ring_seen = 0;
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, lender_thread, NULL), 0);
    int64_t t0 = aco_rt_now();
    while (atomic_load(&lend_state) != 1 && since(t0) < 5000 * MS) usleep(1000);
    CHECK_EQ(atomic_load(&lend_state), 1);
    in_co(ebusy_co, NULL);
    atomic_store(&lend_state, 2);
    CHECK_EQ(pthread_join(th, NULL), 0);
    CHECK_EQ(aco_rt_close(lend_sv[0]), 0);      /* outside a co */
    xclose(lend_sv[1]);
    in_co(lend_same_co, NULL);
}

/* ======================================================================== */
/* The share-stack rule: ONE share stack, all cos waiting at once           */
/* ======================================================================== */

enum { SS_N = 40, SS_K = 8 };
enum { SS_DATA, SS_TIMEOUT, SS_CANCEL, SS_CLOSE };
static int ss_rd[SS_N][SS_K], ss_wr[SS_N][SS_K];
static int ss_k[SS_N], ss_kind[SS_N], ss_mask[SS_N], ss_done[SS_N];
static aco_rt_co_t* ss_co[SS_N];
static int ss_parked;

__attribute__((noinline)) static int ss_poll_at(int i, int depth) {
    volatile unsigned char canary[40 + 24 * (SS_N - i) % 200];
    unsigned char pat = (unsigned char)(0xA0 + i);
    for (size_t c = 0; c < sizeof canary; c++) canary[c] = (unsigned char)(pat ^ c);
    int r;
    if (depth > 0) {
        r = ss_poll_at(i, depth - 1);
    } else {
        int k = ss_k[i];
        struct pollfd f[SS_K + 1];
        for (int j = 0; j < k; j++) f[j] = (struct pollfd){ss_rd[i][j], POLLIN, GARBAGE};
        f[k] = (struct pollfd){-1 - i, POLLIN, GARBAGE};
        int64_t dl = aco_rt_now() + (ss_kind[i] == SS_TIMEOUT ? 6 * D : 5000 * MS);
        ss_parked++;
        r = aco_rt_poll(f, (nfds_t)k + 1, dl);
        switch (ss_kind[i]) {
        case SS_DATA: {
            CHECK_NE(ss_mask[i], 0);
            CHECK_EQ(r, __builtin_popcount((unsigned)ss_mask[i]));
            for (int j = 0; j < k; j++)
                CHECK_EQ(f[j].revents, (ss_mask[i] >> j & 1) ? POLLIN : 0);
            break;
        }
        case SS_TIMEOUT:
            CHECK_EQ(r, -ETIMEDOUT);
            CHECK_GE(aco_rt_now(), dl);
            break;
        case SS_CANCEL:
            CHECK_EQ(r, -ECANCELED);
            break;
        case SS_CLOSE:
            CHECK_EQ(r, 1);
            CHECK_EQ(f[0].revents, POLLNVAL);
            for (int j = 1; j < k; j++) CHECK_EQ(f[j].revents, 0);
            break;
        }
        CHECK_EQ(f[k].revents, r < 0 ? f[k].revents : 0);
        /* the call reads and writes revents only */
        for (int j = 0; j < k; j++) {
            CHECK_EQ(f[j].fd, ss_rd[i][j]);
            CHECK_EQ(f[j].events, POLLIN);
        }
        CHECK_EQ(f[k].fd, -1 - i);
    }
    for (size_t c = 0; c < sizeof canary; c++) CHECK_EQ(canary[c], (unsigned char)(pat ^ c));
    return r;
}
static void ss_poller(void* arg) {
    int i = (int)(intptr_t)arg;
    ss_poll_at(i, i % 5);
    ss_done[i] = 1;
    for (int j = 0; j < ss_k[i]; j++)
        if (ss_mask[i] >> j & 1) CHECK_EQ(drain(ss_rd[i][j]), 1);
}
static void ss_waker(void* arg) {
    (void)arg;
    uint64_t rng = 0x5eed5eedULL + (uint64_t)test_backend_id;
    int64_t t0 = aco_rt_now();
    while (ss_parked < SS_N && since(t0) < 5000 * MS) CHECK_EQ(aco_rt_sleep(1 * MS), 0);
    CHECK_EQ(ss_parked, SS_N);
    int order[SS_N];
    for (int i = 0; i < SS_N; i++) order[i] = i;
    for (int i = SS_N - 1; i > 0; i--) {
        int j = (int)(test_rand(&rng) % (uint64_t)(i + 1));
        int t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (int o = 0; o < SS_N; o++) {
        int i = order[o];
        switch (ss_kind[i]) {
        case SS_DATA: {
            int m = 0;
            while (m == 0) m = (int)(test_rand(&rng) & ((1u << ss_k[i]) - 1));
            ss_mask[i] = m;
            for (int j = 0; j < ss_k[i]; j++)
                if (m >> j & 1) poke(ss_wr[i][j]);
            break;
        }
        case SS_CANCEL: CHECK_EQ(aco_rt_cancel(ss_co[i]), 0); break;
        case SS_CLOSE: CHECK_EQ(aco_rt_close(ss_rd[i][0]), 0); break;
        default: break;
        }
        uint64_t x = test_rand(&rng) % 8;
        if (x < 3) CHECK_EQ(aco_rt_yield(), 0);
        else if (x == 3) CHECK_EQ(aco_rt_sleep(1 * MS), 0);
    }
}
static void sharestack_co(void* arg) {
    (void)arg;
    uint64_t base = inflight();
    uint64_t rng = 77;
    ss_parked = 0;
    for (int i = 0; i < SS_N; i++) {
        ss_k[i] = 1 + (int)(test_rand(&rng) % SS_K);
        ss_kind[i] = i % 10 == 3 ? SS_TIMEOUT : i % 10 == 6 ? SS_CANCEL : i % 10 == 8 ? SS_CLOSE : SS_DATA;
        ss_mask[i] = 0;
        ss_done[i] = 0;
        for (int j = 0; j < ss_k[i]; j++) {
            int p[2];
            mk_pipe(p);
            ss_rd[i][j] = p[0];
            ss_wr[i][j] = p[1];
        }
    }
    PROMISE();
    for (int i = 0; i < SS_N; i++) ss_co[i] = spawn_j(ss_poller, (void*)(intptr_t)i);
    aco_rt_co_t* w = spawn_j(ss_waker, NULL);
    join_ok(w);
    for (int i = 0; i < SS_N; i++) join_ok(ss_co[i]);
    for (int i = 0; i < SS_N; i++) {
        CHECK(ss_done[i]);
        for (int j = 0; j < ss_k[i]; j++) {
            if (!(ss_kind[i] == SS_CLOSE && j == 0)) xclose(ss_rd[i][j]);
            xclose(ss_wr[i][j]);
        }
    }
    settle_inflight(base);
}

/* ======================================================================== */
/* 200 cos, 2 descriptors each, woken in random order                       */
/* ======================================================================== */

#define MC_N (CO_MANY(200))
enum { MC_ROUNDS = 3 };
static int mc_rd[200][2], mc_wr[200][2];
static int mc_expect[200];
static aco_rt_wg_t mc_wg;

static void mc_poller(void* arg) {
    int i = (int)(intptr_t)arg;
    for (int round = 0; round < MC_ROUNDS; round++) {
        struct pollfd f[2] = {{mc_rd[i][0], POLLIN, GARBAGE}, {mc_rd[i][1], POLLIN, GARBAGE}};
        int r = aco_rt_poll(f, 2, aco_rt_now() + 5000 * MS);
        int e = mc_expect[i];
        CHECK_NE(e, 0);
        CHECK_EQ(r, __builtin_popcount((unsigned)e));
        CHECK_EQ(f[0].revents, (e & 1) ? POLLIN : 0);
        CHECK_EQ(f[1].revents, (e & 2) ? POLLIN : 0);
        for (int j = 0; j < 2; j++)
            if (e >> j & 1) CHECK_EQ(drain(mc_rd[i][j]), 1);
        mc_expect[i] = 0;
        CHECK_EQ(aco_rt_wg_done(&mc_wg), 0);
    }
}
static void many_co(void* arg) {
    (void)arg;
    uint64_t base = inflight();
    uint64_t rng = 0xabcdef12345ULL + (uint64_t)test_backend_id;
    for (int i = 0; i < MC_N; i++)
        for (int j = 0; j < 2; j++) {
            int p[2];
            mk_pipe(p);
            mc_rd[i][j] = p[0];
            mc_wr[i][j] = p[1];
        }
    aco_rt_wg_init(&mc_wg);
    aco_rt_co_t* h[200];
    for (int i = 0; i < MC_N; i++) h[i] = spawn_j(mc_poller, (void*)(intptr_t)i);
    int order[200];
    for (int round = 0; round < MC_ROUNDS; round++) {
        PROMISE();
        CHECK_EQ(aco_rt_wg_add(&mc_wg, MC_N), 0);
        CHECK_EQ(aco_rt_sleep(2 * MS), 0);
        for (int i = 0; i < MC_N; i++) order[i] = i;
        for (int i = MC_N - 1; i > 0; i--) {
            int j = (int)(test_rand(&rng) % (uint64_t)(i + 1));
            int t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
        for (int o = 0; o < MC_N; o++) {
            int i = order[o];
            int e = 1 + (int)(test_rand(&rng) % 3);
            mc_expect[i] = e;
            for (int j = 0; j < 2; j++)
                if (e >> j & 1) poke(mc_wr[i][j]);
            uint64_t x = test_rand(&rng) % 16;
            if (x < 4) CHECK_EQ(aco_rt_yield(), 0);
            else if (x == 4) CHECK_EQ(aco_rt_sleep(0), 0);
            else if (x == 5) CHECK_EQ(aco_rt_sleep(1 * MS), 0);
        }
        CHECK_EQ(aco_rt_wg_wait(&mc_wg, aco_rt_now() + 10000 * MS), 0);
    }
    for (int i = 0; i < MC_N; i++) join_ok(h[i]);
    for (int i = 0; i < MC_N; i++)
        for (int j = 0; j < 2; j++) {
            xclose(mc_rd[i][j]);
            xclose(mc_wr[i][j]);
        }
    settle_inflight(base);
}

/* ======================================================================== */
/* 10,000 descriptors in one wait                                           */
/* ======================================================================== */

enum { BIG_PAIRS = 5000, BIG_N = 2 * BIG_PAIRS };
static int* big_peer;           /* big_peer[i]: the other end of entry i's socket */
static struct pollfd* big_f;
static int64_t big_cpu0, big_cpu1;
static uint64_t big_polls_settle, big_polls0, big_polls1, big_inflight_during;

static int64_t cpu_now(void) {
    struct timespec ts;
    CHECK_EQ(clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts), 0);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
/* Runs while the poller waits: after 50 ms (the scheduler may still be
 * finishing the begin of this wait and the end of the last one: O(n)),
 * CPU and backend waits over 200 ms, the operations in flight; then makes
 * entry k ready. */
static void big_watcher(void* arg) {
    int k = (int)(intptr_t)arg;
    aco_rt_stats_t st;
    aco_rt_stats(NULL, &st);
    big_polls_settle = st.polls;
    CHECK_EQ(aco_rt_sleep(50 * MS), 0);
    aco_rt_stats(NULL, &st);
    big_polls0 = st.polls;
    big_polls_settle = big_polls0 - big_polls_settle;
    big_cpu0 = cpu_now();
    CHECK_EQ(aco_rt_sleep(200 * MS), 0);
    big_cpu1 = cpu_now();
    aco_rt_stats(NULL, &st);
    big_polls1 = st.polls;
    big_inflight_during = st.io_inflight;
    poke(big_peer[k]);
    acted_at = aco_rt_now();
}

static void big_cancelled(void* arg) {
    cw_t* w = (cw_t*)arg;
    int r = aco_rt_poll(big_f, BIG_N, w->deadline);
    w->done_at = aco_rt_now();
    CHECK_EQ(r, w->expect);
}

static void big_co(void* arg) {
    (void)arg;
    uint64_t base = inflight();
    big_f = malloc(BIG_N * sizeof *big_f);
    big_peer = malloc(BIG_N * sizeof *big_peer);
    CHECK(big_f && big_peer);
    for (int i = 0; i < BIG_PAIRS; i++) {
        int sv[2];
        mk_pair(sv);
        big_f[2 * i] = (struct pollfd){sv[0], POLLIN, 0};
        big_f[2 * i + 1] = (struct pollfd){sv[1], POLLIN, 0};
        big_peer[2 * i] = sv[1];
        big_peer[2 * i + 1] = sv[0];
    }
    uint64_t rng = 0x10000ULL + (uint64_t)test_backend_id;
    int rounds = FEW ? 4 : 12;
    int64_t worst = 0, sum_wait = 0;

    /* one look at all of them: nothing ready */
    PROMISE();
    int64_t t0 = aco_rt_now();
    CHECK_EQ(aco_rt_poll(big_f, BIG_N, 0), -ETIMEDOUT);
    int64_t look = since(t0);

    /* one ready each round (two at once in some), from another co */
    for (int round = 0; round < rounds; round++) {
        PROMISE();
        garbage(big_f, BIG_N);
        int k = (int)(test_rand(&rng) % BIG_N), k2 = -1;
        if (round % 3 == 2) {
            do k2 = (int)(test_rand(&rng) % BIG_N); while (k2 == k);
        }
        acted_at = 0;
        act_at(aco_rt_now() + 5 * MS, k2 >= 0 ? A_POKE2 : A_POKE, big_peer[k],
               k2 >= 0 ? big_peer[k2] : -1, NULL);
        t0 = aco_rt_now();
        int r = aco_rt_poll(big_f, BIG_N, aco_rt_now() + 5000 * MS);
        int64_t t1 = aco_rt_now();
        CHECK_EQ(r, k2 >= 0 ? 2 : 1);
        for (int i = 0; i < BIG_N; i++)
            if (big_f[i].revents != ((i == k || i == k2) ? POLLIN : 0))
                TEST_FAIL_AT(__FILE__, __LINE__, "round %d (ready: %d, %d): entry %d revents %#x",
                             round, k, k2, i, (unsigned)(unsigned short)big_f[i].revents);
        CHECK_GT(acted_at, 0);
        int64_t lat = t1 - acted_at;
        CHECK_LT(lat, SOON);
        if (lat > worst) worst = lat;
        sum_wait += t1 - t0;
        CHECK_EQ(drain(big_f[k].fd), 1);
        if (k2 >= 0) CHECK_EQ(drain(big_f[k2].fd), 1);
    }

    /* a long wait: idle meanwhile ("nothing while it waits, no looking
     * again in steps"), a poll operation each on io_uring */
    PROMISE();
    {
        int k = (int)(test_rand(&rng) % BIG_N);
        garbage(big_f, BIG_N);
        aco_rt_co_t* w = spawn_j(big_watcher, (void*)(intptr_t)k);
        int r = aco_rt_poll(big_f, BIG_N, aco_rt_now() + 5000 * MS);
        int64_t t1 = aco_rt_now();
        join_ok(w);
        CHECK_EQ(r, 1);
        CHECK_EQ(big_f[k].revents, POLLIN);
        CHECK_LT(t1 - acted_at, SOON);
        int64_t cpu = big_cpu1 - big_cpu0;
        printf("  [%s] 10k wait: %llu backend waits in its first 50 ms; then %lld us CPU "
               "and %llu backend waits in 200 ms; %llu in flight\n",
               test_backend_label, (unsigned long long)big_polls_settle,
               (long long)(cpu / 1000), (unsigned long long)(big_polls1 - big_polls0),
               (unsigned long long)big_inflight_during);
        CHECK_LT(cpu, SLOW ? 50 * MS : 10 * MS);
        CHECK_LE(big_polls1 - big_polls0, 10);
        if (test_backend_id == ACO_RT_BACKEND_URING) CHECK_GE(big_inflight_during, BIG_N);
        else CHECK_GE(big_inflight_during, 1);
        CHECK_EQ(drain(big_f[k].fd), 1);
    }

    /* one of them closed with aco_rt_close meanwhile: POLLNVAL there; its
     * peer may say its end (POLLIN|POLLHUP) if the close got there first */
    PROMISE();
    {
        int k = (int)(test_rand(&rng) % BIG_N);
        int kp = k ^ 1;
        garbage(big_f, BIG_N);
        act_at(aco_rt_now() + 5 * MS, A_RTCLOSE, big_f[k].fd, -1, NULL);
        int r = aco_rt_poll(big_f, BIG_N, aco_rt_now() + 5000 * MS);
        CHECK_GE(r, 1);
        CHECK_EQ(big_f[k].revents, POLLNVAL);
        CHECK(big_f[kp].revents == 0 || big_f[kp].revents == (POLLIN | POLLHUP));
        CHECK_EQ(r, 1 + (big_f[kp].revents != 0));
        for (int i = 0; i < BIG_N; i++)
            if (i != k && i != kp) CHECK_EQ(big_f[i].revents, 0);
        big_f[k].fd = -1;
        xclose(big_f[kp].fd);
        big_f[kp].fd = -1;
    }

    /* a 10k wait ended by a cancel (another co's) and by its deadline */
    PROMISE();
    {
        static cw_t bw;
        bw = (cw_t){0, -1, -ECANCELED, 0};
        aco_rt_co_t* h = spawn_j(big_cancelled, &bw);
        CHECK_EQ(aco_rt_sleep(D), 0);
        CHECK_EQ(bw.done_at, 0);
        CHECK_EQ(aco_rt_cancel(h), 0);
        join_ok(h);
        int64_t dl = aco_rt_now() + 5 * MS;
        CHECK_EQ(aco_rt_poll(big_f, BIG_N, dl), -ETIMEDOUT);
        CHECK_GE(aco_rt_now(), dl);
    }

    /* afterwards: no stale wake-up, nothing left in flight */
    PROMISE();
    int64_t dl = aco_rt_now() + 3 * D;
    CHECK_EQ(aco_rt_poll(big_f, BIG_N, dl), -ETIMEDOUT);
    CHECK_GE(aco_rt_now(), dl);
    settle_inflight(base);
    CHECK_EQ(aco_rt_sleep(D), 0);
    CHECK_EQ(inflight(), base);
    /* and the same array still works (cleaned up, not just timed out) */
    PROMISE();
    {
        int k;
        do k = (int)(test_rand(&rng) % BIG_N); while (big_f[k].fd < 0);
        AFTER(5 * MS, A_POKE, big_peer[k]);
        garbage(big_f, BIG_N);
        CHECK_EQ(aco_rt_poll(big_f, BIG_N, aco_rt_now() + 5000 * MS), 1);
        CHECK_EQ(big_f[k].revents, POLLIN);
        CHECK_EQ(drain(big_f[k].fd), 1);
    }
    printf("  [%s] 10k descriptors: one look %lld us, a wait (5 ms + begin/end) %lld us on "
           "average, wake-up at worst %lld us\n",
           test_backend_label, (long long)(look / 1000),
           (long long)(sum_wait / rounds / 1000), (long long)(worst / 1000));
    for (int i = 0; i < BIG_N; i++)
        if (big_f[i].fd >= 0) xclose(big_f[i].fd);
    free(big_f);
    free(big_peer);
    settle_inflight(base);
}

/* ======================================================================== */
/* aco_rt_cancel_shield                                                     */
/* ======================================================================== */

/* "the previous setting (0 or 1)" */
static void shield_prev_co(void* arg) {
    (void)arg;
    PROMISE();
    CHECK_EQ(aco_rt_cancel_shield(0), 0);
    CHECK_EQ(aco_rt_cancel_shield(1), 0);
    CHECK_EQ(aco_rt_cancel_shield(1), 1);
    CHECK_EQ(aco_rt_cancel_shield(7), 1);
    CHECK_EQ(aco_rt_cancel_shield(-1), 1);
    CHECK_EQ(aco_rt_cancel_shield(0), 1);
    CHECK_EQ(aco_rt_cancel_shield(0), 0);
    CHECK_EQ(aco_rt_cancelled(), 0);
    /* on and off with no cancel changes nothing */
    CHECK_EQ(aco_rt_sleep(1 * MS), 0);
    CHECK_EQ(aco_rt_yield(), 0);
    CHECK_EQ(aco_rt_poll(NULL, 0, 0), -ETIMEDOUT);
}

static aco_rt_sem_t sh_sem;
static void sh_sleeper(void* arg) { CHECK_EQ(aco_rt_sleep((int64_t)(intptr_t)arg), 0); }
static void sh_sender(void* arg) {
    CHECK_EQ(aco_rt_sleep(D), 0);
    int v = 42;
    CHECK_EQ(aco_rt_chan_send((aco_rt_chan_t*)arg, &v, -1), 0);
}

/* After the shield goes off: the co is cancelled as usual, at once. */
static void expect_cancelled_now(int p0) {
    int64_t t0 = aco_rt_now();
    struct pollfd f = {p0, POLLIN, 0};
    CHECK(aco_rt_cancelled());
    CHECK_EQ(aco_rt_poll(&f, 1, -1), -ECANCELED);
    CHECK_EQ(aco_rt_sleep(5000 * MS), -ECANCELED);
    CHECK_EQ(aco_rt_yield(), -ECANCELED);
    char c;
    CHECK_EQ(aco_rt_read(p0, &c, 1, -1), -ECANCELED);
    CHECK_LT(since(t0), SOON);
}

/* a cancel that came before the shield went on */
static void shield_before_co(void* arg) {
    (void)arg;
    int p[2];
    mk_pipe(p);
    PROMISE();
    CHECK_EQ(aco_rt_cancel(aco_rt_self()), 0);
    CHECK(aco_rt_cancelled());
    CHECK_EQ(aco_rt_cancel_shield(1), 0);
    CHECK(aco_rt_cancelled());      /* "a cancel kept by the shield counts" */
    int64_t t0 = aco_rt_now();
    CHECK_EQ(aco_rt_sleep(D), 0);
    CHECK_GE(since(t0), D);
    CHECK_EQ(aco_rt_yield(), 0);
    struct pollfd f = {p[0], POLLIN, GARBAGE};
    int64_t dl = aco_rt_now() + D;
    CHECK_EQ(aco_rt_poll(&f, 1, dl), -ETIMEDOUT);
    CHECK_GE(aco_rt_now(), dl);
    dl = aco_rt_now() + D;
    CHECK_EQ(aco_rt_poll(NULL, 0, dl), -ETIMEDOUT);
    CHECK_GE(aco_rt_now(), dl);
    poke(p[1]);
    CHECK_EQ(aco_rt_poll(&f, 1, -1), 1);
    CHECK_EQ(f.revents, POLLIN);
    char c;
    CHECK_EQ(aco_rt_read(p[0], &c, 1, -1), 1);
    AFTER(D, A_POKE, p[1]);         /* woken while shielded */
    f.revents = GARBAGE;
    CHECK_EQ(aco_rt_poll(&f, 1, -1), 1);
    CHECK_EQ(f.revents, POLLIN);
    CHECK_EQ(aco_rt_read(p[0], &c, 1, -1), 1);
    aco_rt_sem_init(&sh_sem, 1);
    CHECK_EQ(aco_rt_sem_wait(&sh_sem, -1), 0);
    dl = aco_rt_now() + D;
    CHECK_EQ(aco_rt_sem_wait(&sh_sem, dl), -ETIMEDOUT);
    CHECK_GE(aco_rt_now(), dl);
    CHECK(aco_rt_cancelled());
    PROMISE();
    CHECK_EQ(aco_rt_cancel_shield(0), 1);
    expect_cancelled_now(p[0]);
    close2(p);
}

/* a cancel that comes while shielded, during each kind of wait */
static void shield_during_co(void* arg) {
    (void)arg;
    int p[2];
    mk_pipe(p);
    aco_rt_co_t* me = aco_rt_self();
    CHECK_EQ(aco_rt_cancel_shield(1), 0);

    PROMISE();      /* poll with a deadline: runs to its deadline */
    CANCEL_AFTER(D, me);
    struct pollfd f = {p[0], POLLIN, GARBAGE};
    int64_t dl = aco_rt_now() + 4 * D;
    CHECK_EQ(aco_rt_poll(&f, 1, dl), -ETIMEDOUT);
    CHECK_GE(aco_rt_now(), dl);
    CHECK(aco_rt_cancelled());

    PROMISE();      /* sleep: its whole length (a second cancel: nothing) */
    CANCEL_AFTER(D, me);
    int64_t t0 = aco_rt_now();
    CHECK_EQ(aco_rt_sleep(3 * D), 0);
    CHECK_GE(since(t0), 3 * D);

    PROMISE();      /* poll without limit, ended by data that comes later */
    t0 = aco_rt_now();
    CANCEL_AFTER(D / 2, me);
    AFTER(2 * D, A_POKE, p[1]);
    f.revents = GARBAGE;
    CHECK_EQ(aco_rt_poll(&f, 1, -1), 1);
    CHECK_GE(since(t0), 2 * D);
    CHECK_EQ(f.revents, POLLIN);
    char c;
    CHECK_EQ(aco_rt_read(p[0], &c, 1, -1), 1);

    PROMISE();      /* read without limit */
    AFTER(D, A_POKE, p[1]);
    CHECK_EQ(aco_rt_read(p[0], &c, 1, -1), 1);

    PROMISE();      /* join */
    aco_rt_co_t* h = spawn_j(sh_sleeper, (void*)(intptr_t)(2 * D));
    CANCEL_AFTER(D / 2, me);
    CHECK_EQ(aco_rt_join(h, -1), 0);

    PROMISE();      /* channel receive */
    aco_rt_chan_t* ch = aco_rt_chan_new(sizeof(int), 0);
    CHECK(ch != NULL);
    aco_rt_co_t* snd = spawn_j(sh_sender, ch);
    CANCEL_AFTER(D / 2, me);
    int v = 0;
    CHECK_EQ(aco_rt_chan_recv(ch, &v, -1), 0);
    CHECK_EQ(v, 42);
    join_ok(snd);
    CHECK_EQ(aco_rt_chan_free(ch), 0);

    PROMISE();      /* from a plain thread */
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, cancel_from_thread, me), 0);
    t0 = aco_rt_now();
    CHECK_EQ(aco_rt_sleep(4 * D), 0);
    CHECK_GE(since(t0), 4 * D);
    CHECK_EQ(pthread_join(th, NULL), 0);

    CHECK(aco_rt_cancelled());
    PROMISE();
    CHECK_EQ(aco_rt_cancel_shield(0), 1);
    expect_cancelled_now(p[0]);
    close2(p);
}

/* "Nested use: restore the setting it returned." */
static int library_cleanup(void) {
    int prev = aco_rt_cancel_shield(1);
    CHECK(prev == 0 || prev == 1);
    int r = aco_rt_sleep(D / 2);
    CHECK_EQ(aco_rt_cancel_shield(prev), 1);
    return r;
}
static void shield_nest_co(void* arg) {
    (void)arg;
    int p[2];
    mk_pipe(p);
    PROMISE();
    int p1 = aco_rt_cancel_shield(1);
    CHECK_EQ(p1, 0);
    CHECK_EQ(aco_rt_cancel(aco_rt_self()), 0);
    int p2 = aco_rt_cancel_shield(1);
    CHECK_EQ(p2, 1);
    CHECK_EQ(aco_rt_sleep(1 * MS), 0);
    CHECK_EQ(library_cleanup(), 0);         /* a third level */
    CHECK_EQ(aco_rt_cancel_shield(p2), 1);  /* still on */
    CHECK_EQ(aco_rt_sleep(1 * MS), 0);
    CHECK_EQ(aco_rt_poll(NULL, 0, aco_rt_now() + 1 * MS), -ETIMEDOUT);
    CHECK_EQ(aco_rt_cancel_shield(p1), 1);  /* off */
    expect_cancelled_now(p[0]);
    /* a cleanup in a cancelled co completes, and the co stays cancelled */
    PROMISE();
    CHECK_EQ(library_cleanup(), 0);
    expect_cancelled_now(p[0]);
    close2(p);
}

/* one co's shield is its own */
static void sh_victim(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_sleep(5000 * MS), -ECANCELED);
}
static void shield_own_co(void* arg) {
    (void)arg;
    PROMISE();
    CHECK_EQ(aco_rt_cancel_shield(1), 0);
    aco_rt_co_t* v = spawn_j(sh_victim, NULL);
    CHECK_EQ(aco_rt_sleep(1 * MS), 0);
    CHECK_EQ(aco_rt_cancel(v), 0);
    CHECK_EQ(aco_rt_cancel(aco_rt_self()), 0);
    join_ok(v);                     /* shielded: the join works */
    CHECK_EQ(aco_rt_cancel_shield(0), 1);
    CHECK_EQ(aco_rt_sleep(1 * MS), -ECANCELED);
}

/* "A co that ends with it on leaves nothing behind." */
enum { END_CHECK, END_ON, END_ON_CANCELLED, END_ON_CANCELLED_WAITING, END_EXIT };
static int end_cancel_seen;
static void ends_on_co(void* arg) {
    int mode = (int)(intptr_t)arg;
    CHECK_EQ(aco_rt_cancelled(), 0);
    if (mode == END_CHECK) {
        /* a cancel works as usual: no shield was left on */
        CANCEL_AFTER(D / 4, aco_rt_self());
        int64_t t0 = aco_rt_now();
        CHECK_EQ(aco_rt_sleep(5000 * MS), -ECANCELED);
        CHECK_LT(since(t0), SOON);
        end_cancel_seen++;
        CHECK_EQ(aco_rt_cancel_shield(0), 0);
        return;
    }
    CHECK_EQ(aco_rt_cancel_shield(0), 0);   /* starts off */
    CHECK_EQ(aco_rt_cancel_shield(1), 0);
    if (mode == END_ON_CANCELLED || mode == END_EXIT) CHECK_EQ(aco_rt_cancel(aco_rt_self()), 0);
    if (mode == END_ON_CANCELLED_WAITING) {
        /* the cancel comes while it sleeps (and before it ends: the
         * canceller holds its handle) */
        CANCEL_AFTER(1 * MS, aco_rt_self());
        while (!aco_rt_cancelled()) CHECK_EQ(aco_rt_sleep(1 * MS), 0);
    }
    CHECK_EQ(aco_rt_sleep(0), 0);
    if (mode == END_EXIT) aco_rt_exit();
}
static int forever_pipe[2] = {-1, -1};     /* closed in main, at the end */
static int forever_parked;
static void sh_forever(void* arg) {
    int kind = (int)(intptr_t)arg;
    CHECK_EQ(aco_rt_cancel_shield(1), 0);
    CHECK_EQ(aco_rt_cancel(aco_rt_self()), 0);
    forever_parked++;
    /* destroyed here by sched_free: a sleep, an empty poll, a poll on
     * descriptors (its records, io_uring's operations) */
    if (kind == 0) aco_rt_sleep_until(-1);
    else if (kind == 1) aco_rt_poll(NULL, 0, -1);
    else {
        struct pollfd f[4] = {{forever_pipe[0], POLLIN, 0}, {forever_pipe[0], 0, 0},
                              {forever_pipe[1], 0, 0}, {-1, 0, 0}};
        aco_rt_poll(f, 4, -1);
    }
    CHECK(!"a shielded wait for good came back");
}
/* A group's cancel reaches a shielded member: it finishes its work, and
 * the group's cancel waits for it. */
static void sh_member(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_cancel_shield(1), 0);
    int64_t t0 = aco_rt_now();
    CHECK_EQ(aco_rt_sleep(3 * D), 0);
    CHECK_GE(since(t0), 3 * D);
    CHECK(aco_rt_cancelled());
    CHECK_EQ(aco_rt_cancel_shield(0), 1);
    CHECK_EQ(aco_rt_yield(), -ECANCELED);
}
static void shield_group_co(void* arg) {
    (void)arg;
    PROMISE();
    aco_rt_group_t* g = aco_rt_group_new(NULL);
    CHECK(g != NULL);
    CHECK_EQ(aco_rt_group_spawn(g, sh_member, NULL, NULL), 0);
    CHECK_EQ(aco_rt_group_spawn(g, sh_member, NULL, NULL), 0);
    CHECK_EQ(aco_rt_sleep(1 * MS), 0);
    int64_t t0 = aco_rt_now();
    CHECK_EQ(aco_rt_group_cancel(g, aco_rt_now() + 5000 * MS), 0);
    CHECK_GE(since(t0), 2 * D);
    CHECK_EQ(aco_rt_group_free(g), 0);
}
static void sh_stopper(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_sleep(2 * MS), 0);
    aco_rt_sched_stop(S);
}
static void shield_end_co(void* arg) {
    (void)arg;
    int n = FEW ? 12 : 40;
    end_cancel_seen = 0;
    for (int i = 0; i < n; i++) {
        PROMISE();
        join_ok(spawn_j(ends_on_co, (void*)(intptr_t)(1 + i % 4)));
        join_ok(spawn_j(ends_on_co, (void*)(intptr_t)END_CHECK));
    }
    CHECK_EQ(end_cancel_seen, n);
    /* several ended shielded at once, then fresh cos on their records */
    PROMISE();
    aco_rt_co_t* h[16];
    for (int i = 0; i < 16; i++) h[i] = spawn_j(ends_on_co, (void*)(intptr_t)(1 + i % 4));
    for (int i = 0; i < 16; i++) join_ok(h[i]);
    for (int i = 0; i < 16; i++) h[i] = spawn_j(ends_on_co, (void*)(intptr_t)END_CHECK);
    for (int i = 0; i < 16; i++) join_ok(h[i]);
}

/* ======================================================================== */
/* Last: the checks that once disagreed with the implementation (they run  */
/* after everything else, so that a failure here hides nothing)            */
/* ======================================================================== */

/* TCP urgent data: a co waiting for POLLPRI alone is woken, with
 * POLLPRI, as poll(2) would be ("Wait until one of fds[0..n) is ready, as
 * poll(2) does"). */
static void pri_co(void* arg) {
    (void)arg;
    int r;
    /* POLLPRI: TCP urgent data */
    PROMISE();
    {
        int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        CHECK(l >= 0);
        struct sockaddr_in a;
        memset(&a, 0, sizeof a);
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        CHECK_EQ(bind(l, (struct sockaddr*)&a, sizeof a), 0);
        CHECK_EQ(listen(l, 1), 0);
        socklen_t len = sizeof a;
        CHECK_EQ(getsockname(l, (struct sockaddr*)&a, &len), 0);
        int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        CHECK_EQ(connect(c, (struct sockaddr*)&a, sizeof a), 0);
        int s = accept4(l, NULL, NULL, SOCK_CLOEXEC);
        CHECK(s >= 0);
        xclose(l);
        struct pollfd g = {s, POLLPRI, GARBAGE};
        int64_t dl = aco_rt_now() + D;
        CHECK_EQ(aco_rt_poll(&g, 1, dl), -ETIMEDOUT);
        CHECK_GE(aco_rt_now(), dl);
        AFTER(D, A_OOB, c);
        g.revents = GARBAGE;
        r = aco_rt_poll(&g, 1, aco_rt_now() + 1000 * MS);
        CHECK_EQ(r, 1);
        CHECK_EQ(g.revents, POLLPRI);
        CHECK_AS_POLL(&g, 1, r);
        xclose(s);
        xclose(c);
    }
}

/* "one closed with aco_rt_close while the co waits ends the wait with
 * POLLNVAL", also when the number is taken again (a new pipe with a byte
 * in it) before the co runs: the entry is about the file it waited on. */
static void reuse_co(void* arg) {
    (void)arg;
    int r;
    int q[2];
    mk_pipe(q);
    /* closed so, and its number taken again (a new pipe with a byte in it)
     * before the co runs: the wait still ends, its entry POLLNVAL */
    PROMISE();
    {
        int c[2];
        mk_pipe(c);
        static int reuse_fd;
        reuse_fd = c[0];
        aco_rt_co_t* h = spawn_j(reuse_closer, &reuse_fd);
        struct pollfd f[2] = {{c[0], POLLIN, GARBAGE}, {q[0], POLLIN, GARBAGE}};
        r = aco_rt_poll(f, 2, aco_rt_now() + 5000 * MS);
        join_ok(h);
        CHECK_EQ(r, 1);
        if (f[0].revents != POLLNVAL)
            fprintf(stderr, "[%s] closed with aco_rt_close and reused: revents %#x\n",
                    test_backend_label, (unsigned)(unsigned short)f[0].revents);
        CHECK_EQ(f[0].revents, POLLNVAL);
        CHECK_EQ(f[1].revents, 0);
        xclose(c[0]);           /* the new pipe's read end, now */
        xclose(c[1]);
        xclose(reuse_new_wr);
    }
    close2(q);
}

/* ======================================================================== */
/* Bodies                                                                   */
/* ======================================================================== */

static void body_basics(aco_rt_sched_t* s) { (void)s; in_co(basics_co, NULL); }
static void body_deadlines(aco_rt_sched_t* s) { (void)s; in_co(deadlines_co, NULL); }
static void body_shared(aco_rt_sched_t* s) { (void)s; in_co(shared_co, NULL); }
static void body_pri(aco_rt_sched_t* s) { (void)s; in_co(pri_co, NULL); }
static void body_reuse(aco_rt_sched_t* s) { (void)s; in_co(reuse_co, NULL); }
static void body_cancel(aco_rt_sched_t* s) { (void)s; in_co(cancel_co, NULL); }
static void body_errors(aco_rt_sched_t* s) {
    /* -EPERM: a scheduler that exists but does not run */
    PROMISE();
    eperm_calls("outside a co, scheduler not running");
    memset(&eperm_timer, 0, sizeof eperm_timer);
    eperm_timer_ran = 0;
    (void)s;
    in_co(eperm_co, NULL);
    in_co(einval_co, NULL);
}
static void body_nval(aco_rt_sched_t* s) { (void)s; in_co(nval_co, NULL); }
static void body_regfile(aco_rt_sched_t* s) { (void)s; in_co(regfile_co, NULL); }
static void body_identity(aco_rt_sched_t* s) { (void)s; in_co(identity_co, NULL); }
static void body_many(aco_rt_sched_t* s) { (void)s; in_co(many_co, NULL); }
static void body_big(aco_rt_sched_t* s) {
    (void)s;
    long got = test_raise_nofile(BIG_N + 1024);
    if (got < BIG_N + 256) {
        printf("  skip [%s]: 10k descriptors: RLIMIT_NOFILE hard limit %ld is too low\n",
               test_backend_label, got);
        return;
    }
    in_co(big_co, NULL);
}
static void body_sharestack(aco_rt_sched_t* s) { (void)s; in_co(sharestack_co, NULL); }
static void body_shield(aco_rt_sched_t* s) {
    (void)s;
    in_co(shield_prev_co, NULL);
    in_co(shield_before_co, NULL);
    in_co(shield_during_co, NULL);
    in_co(shield_nest_co, NULL);
    in_co(shield_own_co, NULL);
    in_co(shield_end_co, NULL);
    in_co(shield_group_co, NULL);
    /* last: a co parked for good with the shield on and a cancel kept,
     * destroyed by aco_rt_sched_free after this body (ASan: no leak) */
    PROMISE();
    if (forever_pipe[0] < 0) mk_pipe(forever_pipe);
    forever_parked = 0;
    for (int k = 0; k < 3; k++)
        CHECK_EQ(aco_rt_detach(aco_rt_spawn(S, sh_forever, (void*)(intptr_t)k)), 0);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(S, sh_stopper, NULL)), 0);
    CHECK_EQ(aco_rt_sched_run(S), 0);
    CHECK_EQ(forever_parked, 3);
    aco_rt_stats_t st;
    aco_rt_stats(S, &st);
    CHECK_GE(st.cos_alive, 3);
}

typedef void (*body_fn)(aco_rt_sched_t*);
static int64_t part_ms[3];      /* by backend id, this part */
static void with_S(aco_rt_sched_t* s, void* arg) {
    S = s;
    int64_t t0 = aco_rt_now();
    ((body_fn)(uintptr_t)arg)(s);
    part_ms[test_backend_id == ACO_RT_BACKEND_EPOLL ? 2 : 1] += since(t0) / MS;
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* -EPERM with no scheduler at all */
    PROMISE();
    CHECK(aco_rt_sched_current() == NULL);
    eperm_calls("no scheduler");

    struct {
        const char* name;
        body_fn body;
        int one_stack;
    } parts[] = {
        {"basics", body_basics, 0},       {"one fd, many", body_shared, 0},
        {"deadlines", body_deadlines, 0},
        {"cancel", body_cancel, 0},       {"eperm einval", body_errors, 0},
        {"nval dup", body_nval, 0},       {"regular file", body_regfile, 0},
        {"identity", body_identity, 0},   {"ebusy", ebusy_body, 0},
        {"share stack", body_sharestack, 1}, {"200 cos", body_many, 0},
        {"10k fds", body_big, 0},         {"shield", body_shield, 0},
        {"last: POLLPRI", body_pri, 0},   {"last: reuse", body_reuse, 0},
    };
    int64_t total[3] = {0};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        aco_rt_opts_t o;
        memset(&o, 0, sizeof o);
        o.share_stacks = parts[i].one_stack ? 1 : 0;   /* 1: ONE share stack */
        part_ms[1] = part_ms[2] = 0;
        test_on_backends(&o, with_S, (void*)(uintptr_t)parts[i].body);
        printf("  %-13s uring %5lld ms  epoll %5lld ms\n", parts[i].name,
               (long long)part_ms[1], (long long)part_ms[2]);
        total[1] += part_ms[1];
        total[2] += part_ms[2];
    }
    if (forever_pipe[0] >= 0) close2(forever_pipe);
    printf("test_poll: %d promises checked; uring %lld ms, epoll %lld ms\n", checks,
           (long long)total[1], (long long)total[2]);
    return 0;
}
