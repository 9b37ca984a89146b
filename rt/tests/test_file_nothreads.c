/* test_file_nothreads.c - file calls where no thread can start (aco_rt.h,
 * "Files, directories, ...": -EAGAIN when a helper thread was needed and
 * none could be started).
 *
 * A child process that gives up root for user nobody (or, not root, keeps
 * its user) and lowers RLIMIT_NPROC to 1 can start neither io_uring's
 * io-wq workers (the kernel then cancels the operation it queued for one)
 * nor the runtime's helper threads; a pthread_create in the child proves
 * it.  There each call returns its result or -EAGAIN within a second,
 * never another error (io_uring's cancel was taken for a close of the
 * descriptor: -EBADF of an open one) and never hangs or spins (the
 * operation made again on the ring, or sendfile's refused helper taken for
 * a socket not ready): openat, pwrite (small, and 1 MiB), pread, fsync,
 * statx, ftruncate, fallocate, unlinkat, and sendfile of a file the user
 * cannot write (the kernel does not say whether it is cached, so the
 * helper's way) into a socket pair.  Both backends, a child each.  Where
 * threads cannot be limited (a user with CAP_SYS_RESOURCE): skipped,
 * saying so (also where a container refuses the change of user).
 */
#define _GNU_SOURCE
#include "rt_test.h"

#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

static char dir[64], src[96];
static int fails;

static void one(const char* what, long r, int64_t took) {
    if ((r < 0 && r != -EAGAIN) || took > (SLOW ? 5000 : 1000) * MS) {
        fprintf(stderr, "FAIL [%s]: %s = %ld (%s) after %lld ms: its result or -EAGAIN, "
                "at once\n", test_backend_label, what, r, r < 0 ? strerror((int)-r) : "",
                (long long)(took / MS));
        fails++;
    }
}

#define CALL(r, expr)                                       \
    do {                                                    \
        int64_t t0_ = aco_rt_now();                         \
        r = (long)(expr);                                   \
        one(#expr, r, aco_rt_now() - t0_);                  \
    } while (0)

static char big[1 << 20];

static void calls(void* arg) {
    (void)arg;
    char p[128];
    snprintf(p, sizeof(p), "%s/f", dir);
    long r;
    CALL(r, aco_rt_openat(AT_FDCWD, p, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600, -1));
    int fd = r >= 0 ? (int)r : open(p, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    CHECK_GE(fd, 0);
    CALL(r, aco_rt_pwrite(fd, "abc", 3, 0, -1));
    CALL(r, aco_rt_pwrite(fd, big, sizeof(big), 0, -1));
    char b[64];
    CALL(r, aco_rt_pread(fd, b, sizeof(b), 0, -1));
    CALL(r, aco_rt_fsync(fd, -1));
    struct statx sx;
    CALL(r, aco_rt_statx(AT_FDCWD, p, 0, STATX_SIZE, &sx, -1));
    CALL(r, aco_rt_ftruncate(fd, 10, -1));
    CALL(r, aco_rt_fallocate(fd, 0, 0, 4096, -1));
    CHECK_EQ(aco_rt_close(fd), 0);
    CALL(r, aco_rt_unlinkat(AT_FDCWD, p, 0, -1));
    if (r != 0) unlink(p);

    int in = open(src, O_RDONLY | O_CLOEXEC), sp[2];
    CHECK_GE(in, 0);
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
    int64_t off = 0;
    CALL(r, aco_rt_sendfile(sp[0], in, &off, 65536, -1));
    CHECK_EQ(aco_rt_close(sp[0]), 0);
    CHECK_EQ(close(sp[1]), 0);
    CHECK_EQ(close(in), 0);
}

static void* nothing(void* arg) { return arg; }

/* In the child: threads can no longer start, or exit 77 (skipped). */
static void no_threads(void) {
    /* (a container may refuse the change of user: skipped then) */
    if (geteuid() == 0 && (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0))
        _exit(77);
    struct rlimit rl = {1, 1};
    if (setrlimit(RLIMIT_NPROC, &rl) != 0) _exit(77);
    pthread_t t;
    if (pthread_create(&t, NULL, nothing, NULL) == 0) {
        pthread_join(t, NULL);
        _exit(77);
    }
}

static int backend_child(int b) {
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        alarm(0);
        no_threads();
        test_backend_label = test_backend_str(b);
        aco_rt_sched_t* s = test_sched_on(b, NULL);
        test_go(s, calls, NULL);
        aco_rt_sched_free(s);
        _exit(fails ? 1 : 0);
    }
    /* a hang is the failure looked for: 20 s, then the child is killed */
    int st = 0;
    int64_t end = aco_rt_now() + 20000 * MS;
    while (waitpid(pid, &st, WNOHANG) == 0) {
        if (aco_rt_now() > end) {
            fprintf(stderr, "FAIL [%s]: no end after 20 s (a file call waits for good)\n",
                    test_backend_str(b));
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            return 1;
        }
        usleep(10000);
    }
    if (WIFEXITED(st) && WEXITSTATUS(st) == 77) return 77;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "FAIL [%s]: the child ended with status %#x\n", test_backend_str(b), st);
        return 1;
    }
    return 0;
}

int main(void) {
    snprintf(dir, sizeof(dir), "/tmp/aco_nothreads_XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
    snprintf(src, sizeof(src), "%s/src", dir);
    int fd = open(src, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    CHECK_GE(fd, 0);
    static char data[65536];
    memset(data, 's', sizeof(data));
    CHECK_EQ(write(fd, data, sizeof(data)), (ssize_t)sizeof(data));
    CHECK_EQ(close(fd), 0);
    /* nobody makes and removes its file here; src stays root's (a
     * container without that user: skipped) */
    int bs[8], n = test_backends(bs, 8), bad = 0, skipped = 0;
    if (geteuid() == 0 && chown(dir, 65534, 65534) != 0) n = 0, skipped = 1;
    for (int i = 0; i < n; i++) {
        int r = backend_child(bs[i]);
        if (r == 77) skipped = 1;
        else bad |= r;
    }
    unlink(src);
    char p[128];
    snprintf(p, sizeof(p), "%s/f", dir);
    unlink(p);
    rmdir(dir);
    if (bad) return 1;
    puts(skipped ? "file calls without threads: skipped (threads or the user could not be limited)"
                 : "file calls without threads: results or -EAGAIN, at once: ok");
    return 0;
}
