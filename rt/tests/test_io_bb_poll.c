/* test_io_bb_poll.c - aco_rt_wait, aco_rt_poll and the hooks' pause and
 * resume from the I/O section of aco_rt.h alone: revents beside poll(2)'s
 * for pipes, socketpairs, a regular file, a hung-up pipe and a shut
 * socket; -EBADF for a number not open, -ENOMEM at 2^24 (poll: POLLNVAL,
 * it keeps no record), -EPERM outside a co; ACO_RT_WAIT_AFTER_EAGAIN
 * with a passed deadline -ETIMEDOUT at once; poll over several
 * descriptors woken by one of them, the count and each revents as poll(2)
 * writes them (fd < 0 skipped and zeroed, events 0 still POLLHUP, a number
 * not open POLLNVAL and counted), n 0 sleeping until the deadline (never
 * early), a passed deadline one look, n over RLIMIT_NOFILE -EINVAL, NULL
 * fds -EFAULT; pollfd arrays on one share stack shared by 8 cos; the
 * hooks' depth nesting per thread, a resume too many doing nothing, and
 * aco_rt_hooks_active 0 in a program without the hooks; a regular file
 * ready at once for reading and writing and never for anything else. */
#define _GNU_SOURCE
#include "io_bb.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/socket.h>

static short raw_revents(int fd, short events) {
    struct pollfd p = {fd, events, 0};
    CHECK_GE(poll(&p, 1, 0), 0);
    return p.revents;
}
/* aco_rt_wait beside poll(2) on a ready descriptor */
static void same(int fd, short events) {
    short want = raw_revents(fd, events);
    CHECK_NE(want, 0);
    int got = aco_rt_wait(fd, events, in_ms(1000));
    if (got != want)
        TEST_FAIL_AT(__FILE__, __LINE__, "wait(%d, %#x) = %#x, poll(2) says %#x", fd, (unsigned)events,
                     (unsigned)got, (unsigned)want);
    struct pollfd p = {fd, events, 0};
    CHECK_EQ(aco_rt_poll(&p, 1, in_ms(1000)), 1);
    CHECK_EQ(p.revents, want);
}

/* ---- wait ---- */
static void case_wait(void) {
    int p[2], sv[2];
    CHECK_EQ(pipe2(p, O_CLOEXEC), 0);
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    same(p[1], POLLOUT);
    same(sv[0], POLLOUT);
    same(sv[0], POLLOUT | POLLIN | POLLRDHUP);
    CHECK_EQ(write(p[1], "a", 1), 1);
    CHECK_EQ(write(sv[1], "a", 1), 1);
    same(p[0], POLLIN);
    same(sv[0], POLLIN);
    same(sv[0], POLLIN | POLLOUT);
    /* the end: a hung-up pipe, a socket shut for writing by the peer */
    CHECK_EQ(aco_rt_close(p[1]), 0);
    same(p[0], POLLIN);
    CHECK_EQ(shutdown(sv[1], SHUT_WR), 0);
    same(sv[0], POLLIN | POLLRDHUP);
    /* a regular file: ready at once */
    int f = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    CHECK_GE(f, 0);
    CHECK_EQ(aco_rt_wait(f, POLLIN, -1), POLLIN);
    CHECK_EQ(aco_rt_wait(f, POLLIN | POLLOUT, 0), POLLIN | POLLOUT);
    CHECK_EQ(aco_rt_wait(f, POLLIN | POLLPRI, in_ms(1000)), POLLIN);
    /* and never for anything else: one look, or the deadline */
    CHECK_EQ(aco_rt_wait(f, POLLPRI, 0), -ETIMEDOUT);
    CHECK_EQ(aco_rt_wait(f, 0, -2), -ETIMEDOUT);
    struct pollfd fp = {f, POLLPRI, 0x7f};
    int64_t d0 = in_ms(25);
    CHECK_EQ(aco_rt_poll(&fp, 1, d0), -ETIMEDOUT);
    CHECK_GE(aco_rt_now(), d0);
    fp.events = 0;
    CHECK_EQ(aco_rt_poll(&fp, 1, in_ms(10)), -ETIMEDOUT);
    fp.events = POLLPRI | POLLRDHUP | POLLIN;
    CHECK_EQ(aco_rt_poll(&fp, 1, in_ms(1000)), 1);
    CHECK_EQ(fp.revents, POLLIN);
    CHECK_EQ(aco_rt_close(f), 0);
    /* a number not open; 2^24 */
    CHECK_EQ(aco_rt_wait(f, POLLIN, in_ms(1000)), -EBADF);
    CHECK_EQ(aco_rt_wait(-1, POLLIN, in_ms(1000)), -EBADF);
    CHECK_EQ(aco_rt_wait(1 << 24, POLLIN, in_ms(1000)), -ENOMEM);
    /* not ready: a near deadline never early, a passed one at once */
    int q[2];
    CHECK_EQ(pipe2(q, O_CLOEXEC), 0);
    int64_t d = in_ms(25);
    CHECK_EQ(aco_rt_wait(q[0], POLLIN, d), -ETIMEDOUT);
    CHECK_GE(aco_rt_now(), d);
    int64_t t0 = aco_rt_now();
    CHECK_EQ(aco_rt_wait(q[0], POLLIN, 0), -ETIMEDOUT);
    CHECK_EQ(aco_rt_wait(q[0], POLLIN, -5), -ETIMEDOUT);
    CHECK_LT(aco_rt_now() - t0, 200 * MS);
    /* AFTER_EAGAIN on a socket after its EAGAIN: a passed deadline is
     * -ETIMEDOUT at once, even though data came since */
    int u[2];
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, u), 0);
    char b[4];
    CHECK_EQ(aco_rt_recv(u[0], b, 1, MSG_DONTWAIT, -1), -EAGAIN);
    CHECK_EQ(aco_rt_wait(u[0], POLLIN | ACO_RT_WAIT_AFTER_EAGAIN, 0), -ETIMEDOUT);
    /* with time left it finds readiness that came since */
    CHECK_EQ(aco_rt_recv(u[0], b, 1, MSG_DONTWAIT, -1), -EAGAIN);
    CHECK_EQ(write(u[1], "x", 1), 1);
    CHECK_EQ(aco_rt_wait(u[0], POLLIN | ACO_RT_WAIT_AFTER_EAGAIN, in_ms(2000)), POLLIN);
    /* on a pipe the flag changes nothing: the look is made */
    CHECK_EQ(write(q[1], "x", 1), 1);
    CHECK_EQ(aco_rt_wait(q[0], POLLIN | ACO_RT_WAIT_AFTER_EAGAIN, 0), POLLIN);
    CHECK_EQ(aco_rt_close(q[0]), 0);
    CHECK_EQ(aco_rt_close(q[1]), 0);
    CHECK_EQ(aco_rt_close(u[0]), 0);
    CHECK_EQ(aco_rt_close(u[1]), 0);
    CHECK_EQ(aco_rt_close(p[0]), 0);
    CHECK_EQ(aco_rt_close(sv[0]), 0);
    CHECK_EQ(aco_rt_close(sv[1]), 0);
}

/* ---- poll over several descriptors ---- */
struct later { int fd; int ms; };
static void later_co(void* arg) {
    struct later* l = arg;
    aco_rt_sleep(l->ms * MS);
    CHECK_EQ(aco_rt_write(l->fd, "w", 1, in_ms(1000)), 1);
}
static void case_poll(void) {
    enum { N = 6 };
    int p[N][2];
    for (int i = 0; i < N; i++) CHECK_EQ(pipe2(p[i], O_CLOEXEC), 0);
    struct pollfd pf[N + 3];
    /* nothing ready: one of them becomes so */
    for (int i = 0; i < N; i++) pf[i] = (struct pollfd){p[i][0], POLLIN, 0x55};
    static struct later l;
    l = (struct later){p[3][1], 15};
    aco_rt_co_t* co = go(later_co, &l);
    CHECK_EQ(aco_rt_poll(pf, N, in_ms(5000)), 1);
    for (int i = 0; i < N; i++) CHECK_EQ(pf[i].revents, i == 3 ? POLLIN : 0);
    join(co);
    /* fd < 0 skipped (revents 0), events 0 still POLLHUP, a number not
     * open POLLNVAL, 2^24 POLLNVAL; the count as poll(2)'s */
    CHECK_EQ(aco_rt_close(p[1][1]), 0);     /* p[1][0] hung up */
    int closed = p[5][0];
    CHECK_EQ(aco_rt_close(closed), 0);
    pf[0] = (struct pollfd){-1, POLLIN, 0x77};
    pf[1] = (struct pollfd){p[1][0], 0, 0x77};
    pf[2] = (struct pollfd){p[2][0], POLLIN, 0x77};
    pf[3] = (struct pollfd){p[3][0], POLLIN, 0x77};
    pf[4] = (struct pollfd){p[4][1], POLLOUT, 0x77};
    pf[5] = (struct pollfd){closed, POLLIN, 0x77};
    pf[6] = (struct pollfd){1 << 24, POLLIN, 0x77};
    pf[7] = (struct pollfd){-5, 0, 0x77};
    struct pollfd raw[8];
    memcpy(raw, pf, sizeof(raw));
    int want = poll(raw, 8, 0);
    CHECK_EQ(want, 5);
    CHECK_EQ(aco_rt_poll(pf, 8, in_ms(1000)), want);
    for (int i = 0; i < 8; i++)
        if (pf[i].revents != raw[i].revents)
            TEST_FAIL_AT(__FILE__, __LINE__, "entry %d: revents %#x, poll(2) %#x", i, (unsigned)pf[i].revents,
                         (unsigned)raw[i].revents);
    CHECK_EQ(pf[0].revents, 0);
    CHECK_EQ(pf[1].revents, POLLHUP);
    CHECK_EQ(pf[5].revents, POLLNVAL);
    CHECK_EQ(pf[6].revents, POLLNVAL);
    /* a passed deadline with none ready: one look, -ETIMEDOUT */
    char b[4];
    CHECK_EQ(aco_rt_read(p[3][0], b, 1, 0), 1);
    pf[0] = (struct pollfd){p[2][0], POLLIN, 0x77};
    pf[1] = (struct pollfd){p[3][0], POLLIN, 0x77};
    int64_t t0 = aco_rt_now();
    CHECK_EQ(aco_rt_poll(pf, 2, 0), -ETIMEDOUT);
    CHECK_EQ(aco_rt_poll(pf, 2, INT64_MIN), -ETIMEDOUT);
    CHECK_LT(aco_rt_now() - t0, 200 * MS);
    int64_t d = in_ms(25);
    CHECK_EQ(aco_rt_poll(pf, 2, d), -ETIMEDOUT);
    CHECK_GE(aco_rt_now(), d);
    /* n 0: sleeps until the deadline, never early */
    d = in_ms(25);
    CHECK_EQ(aco_rt_poll(pf, 0, d), -ETIMEDOUT);
    CHECK_GE(aco_rt_now(), d);
    d = in_ms(10);
    CHECK_EQ(aco_rt_poll(NULL, 0, d), -ETIMEDOUT);
    CHECK_GE(aco_rt_now(), d);
    /* errors: n over the RLIMIT_NOFILE soft limit; NULL fds */
    struct rlimit rl;
    CHECK_EQ(getrlimit(RLIMIT_NOFILE, &rl), 0);
    CHECK_EQ(aco_rt_poll(pf, (nfds_t)rl.rlim_cur + 1, in_ms(1000)), -EINVAL);
#ifndef ACO_USE_VALGRIND /* (memcheck reports the kernel's view of it) */
    CHECK_EQ(aco_rt_poll(NULL, 2, in_ms(1000)), -EFAULT);
#endif
    /* a cancel while parked; then at once with one ready */
    for (int i = 0; i < N; i++) {
        if (i == 5) continue;
        CHECK_EQ(aco_rt_close(p[i][0]), 0);
        if (i != 1) CHECK_EQ(aco_rt_close(p[i][1]), 0);
    }
    CHECK_EQ(aco_rt_close(p[5][1]), 0);
}

/* ---- cancel ---- */
struct pw { int fd; int res; int second; };
static void pw_co(void* arg) {
    struct pw* w = arg;
    struct pollfd pf = {w->fd, POLLIN, 0};
    w->res = aco_rt_poll(&pf, 1, -1);
    /* cancelled: later calls fail at once, ready or not */
    pf.fd = w->fd;
    pf.events = POLLOUT;
    w->second = aco_rt_poll(&pf, 1, -1);
}
static void case_cancel(void) {
    int p[2];
    CHECK_EQ(pipe2(p, O_CLOEXEC), 0);
    static struct pw w;
    w = (struct pw){p[0], 0, 0};
    aco_rt_co_t* co = go(pw_co, &w);
    aco_rt_sleep(10 * MS);
    CHECK_EQ(aco_rt_cancel(co), 0);
    join(co);
    CHECK_EQ(w.res, -ECANCELED);
    CHECK_EQ(w.second, -ECANCELED);
    CHECK_EQ(aco_rt_close(p[0]), 0);
    CHECK_EQ(aco_rt_close(p[1]), 0);
}

/* ---- pollfd arrays on one share stack, 8 cos ---- */
static int sh_pipes[8][2];
__attribute__((noinline)) static void sh_co(void* arg) {
    int id = (int)(intptr_t)arg;
    for (int round = 0; round < (FEW ? 10 : 50); round++) {
        struct pollfd pf[3];    /* on the share stack */
        pf[0] = (struct pollfd){sh_pipes[id][0], POLLIN, 0x33};
        pf[1] = (struct pollfd){-1, POLLIN, 0x33};
        pf[2] = (struct pollfd){sh_pipes[(id + 1) % 8][0], 0, 0x33};
        /* let the next co write ours */
        CHECK_EQ(aco_rt_write(sh_pipes[(id + 7) % 8][1], "t", 1, in_ms(5000)), 1);
        int r = aco_rt_poll(pf, 3, in_ms(5000));
        CHECK_EQ(r, 1);
        CHECK_EQ(pf[0].revents, POLLIN);
        CHECK_EQ(pf[1].revents, 0);
        CHECK_EQ(pf[2].revents, 0);
        CHECK_EQ(pf[0].fd, sh_pipes[id][0]);
        char b;
        CHECK_EQ(aco_rt_read(sh_pipes[id][0], &b, 1, in_ms(5000)), 1);
        int w = aco_rt_wait(sh_pipes[id][1], POLLOUT, in_ms(5000));
        CHECK_EQ(w, POLLOUT);
    }
}
static void share_main(void* arg) {
    (void)arg;
    static aco_rt_co_t* c[8];
    for (int i = 0; i < 8; i++) CHECK_EQ(pipe2(sh_pipes[i], O_CLOEXEC), 0);
    for (int i = 0; i < 8; i++) c[i] = go(sh_co, (void*)(intptr_t)i);
    for (int i = 0; i < 8; i++) join(c[i]);
    for (int i = 0; i < 8; i++) {
        CHECK_EQ(aco_rt_close(sh_pipes[i][0]), 0);
        CHECK_EQ(aco_rt_close(sh_pipes[i][1]), 0);
    }
}

/* ---- the hooks' pause and resume ---- */
static void* other_thread(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_hooks_paused(), 0);     /* the depth is the thread's */
    aco_rt_hooks_pause();
    CHECK_EQ(aco_rt_hooks_paused(), 1);
    aco_rt_hooks_resume();
    CHECK_EQ(aco_rt_hooks_paused(), 0);
    return NULL;
}
static void hooks_depth(void) {
    CHECK_EQ(aco_rt_hooks_active(), 0);     /* not linked in */
    CHECK_EQ(aco_rt_hooks_paused(), 0);
    aco_rt_hooks_pause();
    aco_rt_hooks_pause();
    CHECK_EQ(aco_rt_hooks_paused(), 2);
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, other_thread, NULL), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
    CHECK_EQ(aco_rt_hooks_paused(), 2);
    aco_rt_hooks_resume();
    CHECK_EQ(aco_rt_hooks_paused(), 1);
    aco_rt_hooks_resume();
    CHECK_EQ(aco_rt_hooks_paused(), 0);
    aco_rt_hooks_resume();                  /* one too many: nothing */
    aco_rt_hooks_resume();
    CHECK_EQ(aco_rt_hooks_paused(), 0);
    aco_rt_hooks_pause();
    CHECK_EQ(aco_rt_hooks_paused(), 1);
    aco_rt_hooks_resume();
    CHECK_EQ(aco_rt_hooks_paused(), 0);
}
static void hooks_co(void* arg) {
    (void)arg;
    hooks_depth();
    /* the runtime's own calls go on while paused */
    aco_rt_hooks_pause();
    int p[2];
    CHECK_EQ(pipe2(p, O_CLOEXEC), 0);
    CHECK_EQ(aco_rt_write(p[1], "h", 1, in_ms(1000)), 1);
    CHECK_EQ(aco_rt_wait(p[0], POLLIN, in_ms(1000)), POLLIN);
    aco_rt_hooks_resume();
    CHECK_EQ(aco_rt_close(p[0]), 0);
    CHECK_EQ(aco_rt_close(p[1]), 0);
}

static void eperm(void) {
    int p[2];
    CHECK_EQ(pipe2(p, O_CLOEXEC), 0);
    CHECK_EQ(aco_rt_wait(p[1], POLLOUT, -1), -EPERM);
    CHECK_EQ(aco_rt_wait(p[1], POLLOUT, 0), -EPERM);
    struct pollfd pf = {p[1], POLLOUT, 0};
    CHECK_EQ(aco_rt_poll(&pf, 1, -1), -EPERM);
    CHECK_EQ(aco_rt_poll(NULL, 0, 0), -EPERM);
    close(p[0]);
    close(p[1]);
}

/* ---- aco_rt_wait on a file poll(2) never says ready for what is asked:
 * the header says such a wait sleeps until its deadline (-ETIMEDOUT, never
 * early).  Each mismatch is said, then the test fails.  (Before the fix,
 * epoll returned the events asked at once and io_uring -EINVAL.) ---- */
static int wait_file_bad;
static void wait_file_expect(int fd, int events, const char* what) {
    int64_t d = in_ms(20);
    int r = aco_rt_wait(fd, events, d);
    if (r != -ETIMEDOUT || aco_rt_now() < d) {
        fprintf(stderr, "%s: [%s] aco_rt_wait(%s) = %d, want -ETIMEDOUT at the deadline (poll(2) revents: %#x)\n",
                __FILE__, test_backend_label, what, r, (unsigned)raw_revents(fd, (short)events));
        wait_file_bad++;
    }
}
static void case_wait_file(void) {
    int f = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    CHECK_GE(f, 0);
    int dir = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    CHECK_GE(dir, 0);
    wait_file_bad = 0;
    wait_file_expect(f, POLLPRI, "regular file, POLLPRI, in 20 ms");
    wait_file_expect(f, POLLRDHUP, "regular file, POLLRDHUP, in 20 ms");
    wait_file_expect(f, 0, "regular file, events 0, in 20 ms");
    wait_file_expect(dir, POLLPRI, "directory, POLLPRI, in 20 ms");
    CHECK_EQ(aco_rt_close(f), 0);
    CHECK_EQ(aco_rt_close(dir), 0);
    CHECK_EQ(wait_file_bad, 0);
}

static void main_co(void* arg) {
    (void)arg;
    case_wait();
    case_poll();
    case_cancel();
    hooks_co(NULL);
    case_wait_file();
}
static void body(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    eperm();
    test_go(s, main_co, NULL);
}
static void body_share(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    test_go(s, share_main, NULL);
}

int main(void) {
    eperm();
    hooks_depth();
    test_on_backends(NULL, body, NULL);
    aco_rt_opts_t o;
    memset(&o, 0, sizeof(o));
    o.share_stacks = 1;
    o.stack_size = 64 * 1024;
    test_on_backends(&o, body_share, NULL);
    printf("test_io_bb_poll: ok\n");
    return 0;
}
