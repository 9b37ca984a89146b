/* test_file_pipes.c - the Files section's calls on pipes and sockets, where
 * three promises of aco_rt.h meet: no call raises SIGPIPE ("a write ... to
 * a socket, pipe or FIFO whose reader is gone returns -EPIPE, whatever the
 * program's SIGPIPE disposition"); a descriptor is the file, not the
 * number (a number that held a regular file, closed with close(2) behind
 * the runtime's back and reused by a socket, is read as a socket: one
 * transfer by readiness, never a helper thread kept on it, and written as
 * one, SIGPIPE held); the caller's RWF_NOWAIT never waits; sendfile(2)'s
 * own errors.  On both backends, and with $ACO_RT_URING_OFF=all (every
 * operation on the fallback): aco_rt_pwritev at the file position into a
 * pipe and a socket whose reader is gone, aco_rt_sendfile into both,
 * aco_rt_splice (file -> pipe, pipe -> pipe) and aco_rt_tee into a pipe
 * whose reader is gone: -EPIPE and no SIGPIPE (counted by a handler, and
 * the default disposition would end the test); the reused number;
 * aco_rt_sendfile from a pipe at its position: -EINVAL, as sendfile(2).
 */
#define _GNU_SOURCE
#include "rt_test.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>

static volatile sig_atomic_t sigpipes;
static void on_sigpipe(int sig) { (void)sig; sigpipes++; }

static char path[] = "/tmp/test_file_pipes.XXXXXX";
static int file;                /* 64 bytes of a regular file */

#define NO_SIGPIPE_EPIPE(call)                                                  \
    do {                                                                        \
        sig_atomic_t before_ = sigpipes;                                        \
        CHECK_EQ((call), -EPIPE);                                               \
        CHECK_EQ(sigpipes, before_);                                            \
    } while (0)

static void gone_reader(void) {
    char b[8] = "abcdefg";
    struct iovec v = {b, sizeof(b)};
    int p[2], q[2], sv[2];
    int64_t off = 0;

    CHECK_EQ(pipe(p), 0);
    CHECK_EQ(aco_rt_close(p[0]), 0);
    NO_SIGPIPE_EPIPE(aco_rt_pwritev(p[1], &v, 1, -1, 0, -1));
    NO_SIGPIPE_EPIPE(aco_rt_sendfile(p[1], file, &off, 8, -1));
    NO_SIGPIPE_EPIPE(aco_rt_splice(file, &off, p[1], NULL, 8, 0, -1));
    CHECK_EQ(aco_rt_close(p[1]), 0);

    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    CHECK_EQ(aco_rt_close(sv[1]), 0);
    NO_SIGPIPE_EPIPE(aco_rt_pwritev(sv[0], &v, 1, -1, 0, -1));
    off = 0;
    NO_SIGPIPE_EPIPE(aco_rt_sendfile(sv[0], file, &off, 8, -1));
    CHECK_EQ(aco_rt_close(sv[0]), 0);

    CHECK_EQ(pipe(p), 0);
    CHECK_EQ(pipe(q), 0);
    CHECK_EQ(aco_rt_close(q[0]), 0);
    CHECK_EQ(aco_rt_write(p[1], "xyz", 3, -1), 3);
    NO_SIGPIPE_EPIPE(aco_rt_tee(p[0], q[1], 3, 0, -1));
    NO_SIGPIPE_EPIPE(aco_rt_splice(p[0], NULL, q[1], NULL, 3, 0, -1));
    /* the bytes are still there: nothing was lost on the way */
    char got[3];
    CHECK_EQ(aco_rt_read(p[0], got, 3, -1), 3);
    CHECK_EQ(memcmp(got, "xyz", 3), 0);
    CHECK_EQ(aco_rt_close(p[0]), 0);
    CHECK_EQ(aco_rt_close(p[1]), 0);
    CHECK_EQ(aco_rt_close(q[1]), 0);
}

/* A number that held a regular file (the runtime read it, so its entry
 * knows a file there), closed with close(2), reused by a socket with 4
 * bytes: a read of 64 at the position is one transfer of 4, at once; a
 * write to it at the position a socket's, read whole by the peer; and
 * one whose peer is gone -EPIPE, no SIGPIPE. */
static void reused_number(void) {
    char buf[64];
    for (int round = 0; round < 3; round++) {
        /* a number of its own each round: its entry knows only a file */
        int fd = 100 + round;
        int f = open(path, O_RDONLY);
        CHECK(f >= 0);
        CHECK_EQ(dup2(f, fd), fd);
        CHECK_EQ(close(f), 0);
        CHECK_EQ(aco_rt_pread(fd, buf, 8, 0, -1), 8);
        CHECK_EQ(aco_rt_preadv(fd, &(struct iovec){buf, 8}, 1, -1, 0, -1), 8);
        CHECK_EQ(close(fd), 0);                     /* behind the runtime's back */
        int sv[2];
        CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
        CHECK_EQ(dup2(sv[0], fd), fd);              /* the number comes back, a socket */
        CHECK_EQ(close(sv[0]), 0);
        int s = fd, peer = sv[1];
        CHECK_EQ(write(peer, "sock", 4), 4);
        struct iovec v = {buf, sizeof(buf)};
        int64_t t0 = aco_rt_now();
        if (round == 0) {
            CHECK_EQ(aco_rt_preadv(s, &v, 1, -1, 0, aco_rt_now() + 5000 * (int64_t)1000000), 4);
            CHECK_EQ(memcmp(buf, "sock", 4), 0);
        } else if (round == 1) {
            close(peer);
            peer = -1;
            v.iov_len = 5;
            NO_SIGPIPE_EPIPE(aco_rt_pwritev(s, &v, 1, -1, 0, -1));
        } else {
            v.iov_len = 5;
            memcpy(buf, "back!", 5);
            CHECK_EQ(aco_rt_pwritev(s, &v, 1, -1, 0, aco_rt_now() + 5000 * (int64_t)1000000), 5);
            CHECK_EQ(read(peer, buf, sizeof(buf)), 5);
            CHECK_EQ(memcmp(buf, "back!", 5), 0);
        }
        CHECK_LT(aco_rt_now() - t0, 1000 * (int64_t)1000000);
        CHECK_EQ(aco_rt_close(s), 0);
        if (peer >= 0) close(peer);
    }
}

/* The other way round: a number that held a pipe, closed with close(2)
 * and reused by a regular file whose pages were dropped: the read gets
 * the file's bytes.  (With the pipe's hint it would spin on the readiness
 * way until the kernel's readahead brought them: a file is always ready,
 * and RWF_NOWAIT says EAGAIN meanwhile.  This checks the bytes, not the
 * spin, which this kernel's readahead cuts short.) */
static void reused_as_file(void) {
    char dpath[] = "/var/tmp/test_file_pipes.XXXXXX", buf[8];
    int d = mkstemp(dpath);
    CHECK(d >= 0);
    CHECK_EQ(unlink(dpath), 0);
    char blk[4096];
    memset(blk, 'd', sizeof(blk));
    CHECK_EQ(write(d, blk, sizeof(blk)), (long)sizeof(blk));
    CHECK_EQ(fsync(d), 0);
    int p[2];
    CHECK_EQ(pipe(p), 0);
    CHECK_EQ(aco_rt_write(p[1], "x", 1, -1), 1);
    CHECK_EQ(aco_rt_preadv(p[0], &(struct iovec){buf, 1}, 1, -1, 0, -1), 1);
    CHECK_EQ(close(p[0]), 0);                       /* behind the runtime's back */
    CHECK_EQ(dup2(d, p[0]), p[0]);
    posix_fadvise(p[0], 0, 0, POSIX_FADV_DONTNEED);
    CHECK_EQ(aco_rt_pread(p[0], buf, 8, 0, aco_rt_now() + 5000 * (int64_t)1000000), 8);
    CHECK_EQ(memcmp(buf, "dddddddd", 8), 0);
    CHECK_EQ(aco_rt_close(p[0]), 0);
    CHECK_EQ(aco_rt_close(p[1]), 0);
    close(d);
}

/* The caller's RWF_NOWAIT on an empty pipe whose entry knows it: -EAGAIN
 * at once, never a wait. */
static void nowait_pipe(void) {
    int p[2];
    char c;
    CHECK_EQ(pipe(p), 0);
    CHECK_EQ(aco_rt_write(p[1], "x", 1, -1), 1);
    CHECK_EQ(aco_rt_preadv(p[0], &(struct iovec){&c, 1}, 1, -1, 0, -1), 1);
    int64_t t0 = aco_rt_now();
    CHECK_EQ(aco_rt_preadv(p[0], &(struct iovec){&c, 1}, 1, -1, RWF_NOWAIT,
                           aco_rt_now() + 2000 * (int64_t)1000000), -EAGAIN);
    CHECK_LT(aco_rt_now() - t0, 1000 * (int64_t)1000000);
    CHECK_EQ(aco_rt_close(p[0]), 0);
    CHECK_EQ(aco_rt_close(p[1]), 0);
}

static void body_co(void* arg) {
    (void)arg;
    gone_reader();
    reused_number();
    reused_as_file();
    nowait_pipe();
    /* sendfile(2) from a pipe at its position says EINVAL */
    int p[2], sv[2];
    CHECK_EQ(pipe(p), 0);
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    CHECK_EQ(aco_rt_write(p[1], "abc", 3, -1), 3);
    CHECK_EQ(sendfile(sv[0], p[0], NULL, 3), -1);
    int want = -errno;
    CHECK_EQ(aco_rt_sendfile(sv[0], p[0], NULL, 3, -1), want);
    close(p[0]);
    close(p[1]);
    close(sv[0]);
    close(sv[1]);
}

static void body(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    test_go(s, body_co, NULL);
}

int main(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_sigpipe;
    CHECK_EQ(sigaction(SIGPIPE, &sa, NULL), 0);
    file = mkstemp(path);
    CHECK(file >= 0);
    char b[64];
    memset(b, 'f', sizeof(b));
    CHECK_EQ(write(file, b, sizeof(b)), (long)sizeof(b));
    test_on_backends(NULL, body, NULL);
    /* every operation on the fallback (helper threads, the thread itself) */
    setenv("ACO_RT_URING_OFF", "all", 1);
    setenv("ACO_RT_QUIET", "1", 1);
    test_on_backends(NULL, body, NULL);
    CHECK_EQ(sigpipes, 0);
    close(file);
    unlink(path);
    return 0;
}
