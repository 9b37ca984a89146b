/* test_file_bb_limits.c - out of descriptors and out of memory, black box, each
 * case in a fresh child process (its first file call made at the limit):
 *  - RLIMIT_NOFILE reached: aco_rt_openat, openat2 -EMFILE,
 *    aco_rt_signal_wait -EMFILE; the calls that need no new descriptor
 *    (pread, statx, fsync, offload, a pipe's read) go on, or say a
 *    documented error (-EMFILE, -EAGAIN); nothing crashes or hangs; one
 *    descriptor given back and openat works again;
 *  - RLIMIT_AS reached: a share-stack buffer's bounce buffer cannot be had:
 *    -ENOMEM and nothing written; a helper thread that cannot start:
 *    -EAGAIN; the limit lifted, the same calls work. */
#include "bb_file.h"

#include <linux/openat2.h>
#include <sys/mman.h>
#include <sys/uio.h>

static int file_fd, pipe_fds[2];
static void* offload_fn(void* a) { return a; }

static int ok_or(long r, long e1, long e2) { return r >= 0 || r == e1 || r == e2; }

static void nofile_co(void* arg) {
    (void)arg;
    char p[PATH_MAX];
    /* fill every descriptor */
    int first = -1, last = -1;
    for (;;) {
        int d = dup(0);
        if (d < 0) {
            CHECK_EQ(errno, EMFILE);
            break;
        }
        if (first < 0) first = d;
        last = d;
    }
    CHECK_GE(last, 0);
    CHECK_EQ(aco_rt_openat(AT_FDCWD, bb_path(p, "lim"), O_RDONLY | O_CLOEXEC, 0, aco_rt_in_ms(5000)),
             -EMFILE);
    CHECK_EQ(aco_rt_openat(AT_FDCWD, bb_path(p, "nope"), O_RDWR | O_CREAT | O_CLOEXEC, 0600,
                           aco_rt_in_ms(5000)),
             -EMFILE);
    CHECK_EQ(access(p, F_OK), -1);
    struct open_how how = {.flags = O_RDONLY | O_CLOEXEC};
    CHECK_EQ(aco_rt_openat2(AT_FDCWD, bb_path(p, "lim"), &how, sizeof(how), aco_rt_in_ms(5000)),
             -EMFILE);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    CHECK_EQ(aco_rt_signal_wait(&set, NULL, aco_rt_in_ms(100)), -EMFILE);
    /* no new descriptor needed: done, or a documented error */
    static char buf[64];
    ssize_t r = aco_rt_pread(file_fd, buf, 10, 0, aco_rt_in_ms(5000));
    CHECK(r == 10 || r == -EMFILE || r == -EAGAIN);
    char st[16];
    r = aco_rt_pwrite(file_fd, st, 10, 100, aco_rt_in_ms(5000));
    CHECK(r == 10 || r == -EMFILE || r == -EAGAIN);
    struct statx sx;
    CHECK(ok_or(aco_rt_statx(AT_FDCWD, p, 0, STATX_SIZE, &sx, aco_rt_in_ms(5000)), -ENOENT, -EAGAIN) ||
          aco_rt_statx(AT_FDCWD, p, 0, STATX_SIZE, &sx, aco_rt_in_ms(5000)) == -EMFILE);
    CHECK(ok_or(aco_rt_fsync(file_fd, aco_rt_in_ms(5000)), -EMFILE, -EAGAIN));
    void* res = NULL;
    int o = aco_rt_offload(offload_fn, (void*)&offload_fn, NULL, &res, aco_rt_in_ms(5000));
    CHECK(o == 0 || o == -EAGAIN || o == -EMFILE);
    if (o == 0) CHECK(res == (void*)&offload_fn);
    CHECK_EQ(write(pipe_fds[1], "ab", 2), 2);
    struct iovec v = {buf, sizeof(buf)};
    r = aco_rt_preadv(pipe_fds[0], &v, 1, -1, 0, aco_rt_in_ms(5000));
    CHECK(r == 2 || r == -EMFILE);
    CHECK_EQ(aco_rt_sleep(1 * MS), 0);
    /* one back: open works */
    close(last);
    int fd = aco_rt_openat(AT_FDCWD, bb_path(p, "lim"), O_RDONLY | O_CLOEXEC, 0, aco_rt_in_ms(5000));
    CHECK_GE(fd, 0);
    CHECK_EQ(aco_rt_pread(fd, buf, 10, 0, aco_rt_in_ms(5000)), 10);
    aco_rt_close(fd);
    for (int d = first; d < last; d++) close(d);
    /* and everything works again */
    CHECK_EQ(aco_rt_pread(file_fd, buf, 10, 0, aco_rt_in_ms(5000)), 10);
    CHECK_EQ(aco_rt_statx(AT_FDCWD, bb_path(p, "lim"), 0, STATX_SIZE, &sx, aco_rt_in_ms(5000)), 0);
    CHECK_EQ(aco_rt_signal_wait(&set, NULL, 0), -ETIMEDOUT);
}

static void nofile_child(void) {
    char p[PATH_MAX];
    file_fd = open(bb_path(p, "lim"), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    CHECK_GE(file_fd, 0);
    CHECK_EQ(pwrite(file_fd, "0123456789abcdef", 16, 0), 16);
    CHECK_EQ(pipe2(pipe_fds, O_CLOEXEC), 0);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    CHECK_EQ(pthread_sigmask(SIG_BLOCK, &set, NULL), 0);
    struct rlimit rl = {64, 64};
    CHECK_EQ(setrlimit(RLIMIT_NOFILE, &rl), 0);
    bb_run(NULL, nofile_co, NULL);
}

/* ---- memory ---- */

static void set_as(long extra) {
    /* the address space in use now, plus extra bytes */
    FILE* f = fopen("/proc/self/statm", "r");
    CHECK(f != NULL);
    unsigned long pages = 0;
    CHECK_EQ(fscanf(f, "%lu", &pages), 1);
    fclose(f);
    struct rlimit rl;
    CHECK_EQ(getrlimit(RLIMIT_AS, &rl), 0);
    rl.rlim_cur = pages * (unsigned long)sysconf(_SC_PAGESIZE) + (unsigned long)extra;
    CHECK_EQ(setrlimit(RLIMIT_AS, &rl), 0);
}
static void unset_as(void) {
    struct rlimit rl;
    CHECK_EQ(getrlimit(RLIMIT_AS, &rl), 0);
    rl.rlim_cur = rl.rlim_max;
    CHECK_EQ(setrlimit(RLIMIT_AS, &rl), 0);
}

#define BIGSTACK (600 * 1024)
__attribute__((noinline)) static void bounce_nomem(void) {
    unsigned char big[BIGSTACK];
    memset(big, 0x5a, sizeof(big));
    /* warm everything small first (records, the ring's helpers) */
    CHECK_EQ(aco_rt_pwrite(file_fd, big, 4096, 0, aco_rt_in_ms(5000)), 4096);
    CHECK_EQ(aco_rt_ftruncate(file_fd, 0, aco_rt_in_ms(5000)), 0);
    set_as(64 * 1024);
    ssize_t r = aco_rt_pwrite(file_fd, big, sizeof(big), 0, aco_rt_in_ms(5000));
    unset_as();
    if (getenv("BB_VERBOSE")) fprintf(stderr, "[%s] pwrite at the AS limit: %zd\n", test_backend_label, r);
    struct stat st;
    CHECK_EQ(fstat(file_fd, &st), 0);
    /* served on the thread (a file system with RWF_NOWAIT writes) needs no
     * bounce: then the bytes are all there */
    if (r != -ENOMEM) {
        CHECK_EQ(r, (ssize_t)sizeof(big));
        CHECK_EQ(st.st_size, (off_t)sizeof(big));
    } else {
        CHECK_EQ(st.st_size, 0);
    }
    CHECK_EQ(aco_rt_pwrite(file_fd, big, sizeof(big), 0, aco_rt_in_ms(5000)), (ssize_t)sizeof(big));
    posix_fadvise(file_fd, 0, 0, POSIX_FADV_DONTNEED);
    memset(big, 0, sizeof(big));
    set_as(64 * 1024);
    r = aco_rt_pread(file_fd, big, sizeof(big), 0, aco_rt_in_ms(5000));
    unset_as();
    if (r != -ENOMEM && r != (ssize_t)sizeof(big)) TEST_FAIL_AT(__FILE__, __LINE__, "pread at the AS limit: %zd", r);
    if (r == -ENOMEM) CHECK_EQ(big[0], 0);
    CHECK_EQ(aco_rt_pread(file_fd, big, sizeof(big), 0, aco_rt_in_ms(5000)), (ssize_t)sizeof(big));
    for (size_t i = 0; i < sizeof(big); i++) CHECK_EQ(big[i], 0x5a);
}
static void nomem_co(void* arg) {
    (void)arg;
    bounce_nomem();
}
static void nomem_child(void) {
    char p[PATH_MAX];
    file_fd = open(bb_path(p, "mem"), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    CHECK_GE(file_fd, 0);
    aco_rt_opts_t o = {0};
    o.share_stacks = 1;
    o.stack_size = 1 << 20;
    bb_run(&o, nomem_co, NULL);
}

/* no helper thread can start (its stack cannot be mapped): -EAGAIN */
static void nothread_co(void* arg) {
    (void)arg;
    char p[PATH_MAX];
    struct statx sx;
    set_as(256 * 1024);
    int r = aco_rt_statx(AT_FDCWD, bb_path(p, "mem"), 0, STATX_SIZE, &sx, aco_rt_in_ms(5000));
    void* res;
    int o = aco_rt_offload(offload_fn, (void*)&offload_fn, NULL, &res, aco_rt_in_ms(5000));
    unset_as();
    if (getenv("BB_VERBOSE")) fprintf(stderr, "[%s] statx %d offload %d at the AS limit\n", test_backend_label, r, o);
    CHECK(r == 0 || r == -EAGAIN || r == -ENOMEM);
    CHECK(o == 0 || o == -EAGAIN || o == -ENOMEM);
    if (strcmp(aco_rt_file_way("statx"), "helper") == 0) CHECK_EQ(o == 0, r == 0);
    CHECK_EQ(aco_rt_statx(AT_FDCWD, p, 0, STATX_SIZE, &sx, aco_rt_in_ms(5000)), 0);
    CHECK_EQ(aco_rt_offload(offload_fn, (void*)&offload_fn, NULL, &res, aco_rt_in_ms(5000)), 0);
}
static void nothread_child(void) {
    char p[PATH_MAX];
    close(open(bb_path(p, "mem"), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
    bb_run(NULL, nothread_co, NULL);
}

static void in_child(void (*fn)(void)) {
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        fn();
        exit(0);
    }
    int st;
    CHECK_EQ(waitpid(pid, &st, 0), pid);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        TEST_FAIL_AT(__FILE__, __LINE__, "[%s] child status %#x", test_backend_label, st);
}

static void limits_backend(void) {
    in_child(nofile_child);
    in_child(nomem_child);
    in_child(nothread_child);
}

int main(void) {
    test_watchdog();
    bb_mkdir();
    bb_apart(limits_backend);
    printf("test_file_bb_limits: ok\n");
    return 0;
}
