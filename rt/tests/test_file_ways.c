/* test_file_ways.c - what a deadline or cancel leaves of a file call, and
 * the ways a call goes (aco_rt.h, "Files, directories, ..."):
 *   - [meta]: an openat of a FIFO (it waits for a writer) ends at its
 *     deadline and at a cancel, on time; the open goes on without the co,
 *     and the descriptor it makes when a writer comes is closed by the
 *     runtime (none leaks); the same when aco_rt_sched_free destroys the
 *     co while it waits;
 *   - a writer waiting in open(2) of the FIFO that a co's open lets in
 *     keeps its reader while that open goes on (no EPIPE, its bytes come);
 *   - [data]: a pread queued behind a busy helper thread ends at its
 *     deadline without touching the buffer; a pread of a pipe takes the
 *     readiness way (its deadline and a cancel end it; the bytes written
 *     after are all there);
 *   - every case on io_uring, on epoll, and (but the last) on io_uring with
 *     $ACO_RT_URING_OFF=all (the helper fallback), and a fallback is said
 *     once on stderr, not at all under $ACO_RT_QUIET;
 *   - sendfile of a cached file the caller may not write, on a kernel
 *     without cachestat (a seccomp filter: ENOSYS), as user nobody: a
 *     helper's, not the thread's (mincore(2) says every page of such a
 *     file is there); root only.
 */
#define _GNU_SOURCE
#include "rt_test.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/stat.h>

static char dir[64], fifo[96], file[96];
static int nfifos;

/* A FIFO of its own for each case: an open a case left behind may still
 * be on its way into open(2) (a helper thread not yet there when the
 * deadline came), and would wait on that FIFO for good, taking the
 * partner of a later case's open. */
static void new_fifo(void) {
    snprintf(fifo, sizeof(fifo), "%s/fifo%d", dir, nfifos++);
    CHECK_EQ(mkfifo(fifo, 0600), 0);
}

/* Descriptors of this process open on the files of the test's directory
 * (the FIFOs, the file): what a call left behind would show as; others
 * (a library's, the harness's) do not count. */
static int open_fds(void) {
    int n = 0;
    DIR* d = opendir("/proc/self/fd");
    CHECK(d != NULL);
    struct dirent* e;
    size_t k = strlen(dir);
    while ((e = readdir(d))) {
        char p[300], t[300];
        snprintf(p, sizeof(p), "/proc/self/fd/%s", e->d_name);
        ssize_t len = readlink(p, t, sizeof(t) - 1);
        if (len > 0 && (size_t)len > k && memcmp(t, dir, k) == 0 && t[k] == '/') n++;
    }
    closedir(d);
    return n;
}

/* Wait (as a co) until the process has want descriptors open and no
 * operation a co left is still in the kernel: 5 s at most (a FIFO's open
 * and close touch its inode, which a busy disk's journal may hold up).
 * The count alone is not enough: an open a writer let in installs its
 * descriptor a moment later (in io_uring's worker or a helper thread), and
 * is closed only after that.  io_uring's in-flight count says when its
 * orphan ended; a helper's open is closed right after it returns, on its
 * own thread, so the count must hold for 200 ms there. */
static void fds_report(void);
static int fds_settle(int want) {
    int steady = 0, enough = strcmp(aco_rt_file_way("openat"), "uring") == 0 ? 1 : 40;
    for (int i = 0; i < 1000 && steady < enough; i++) {
        aco_rt_stats_t st;
        aco_rt_stats(NULL, &st);
        steady = open_fds() == want && st.io_inflight == 0 ? steady + 1 : 0;
        if (steady < enough) aco_rt_sleep(5 * MS);
    }
    int n = open_fds();
    if (n != want) fds_report();
    return n;
}

/* What is open, for a failure's report. */
static void fds_report(void) {
    {
        DIR* d = opendir("/proc/self/fd");
        struct dirent* e;
        while (d && (e = readdir(d))) {
            char p[300], t[300] = "";
            snprintf(p, sizeof(p), "/proc/self/fd/%s", e->d_name);
            ssize_t k = readlink(p, t, sizeof(t) - 1);
            if (k > 0) t[k] = 0;
            fprintf(stderr, "  fd %s -> %s\n", e->d_name, t);
        }
        if (d) closedir(d);
    }
}

static void open_deadline(void* arg) {
    (void)arg;
    new_fifo();
    int base = open_fds();
    int64_t t0 = aco_rt_now();
    int r = aco_rt_openat(AT_FDCWD, fifo, O_RDONLY | O_CLOEXEC, 0, aco_rt_in_ms(50));
    int64_t el = aco_rt_now() - t0;
    CHECK_EQ(r, -ETIMEDOUT);
    CHECK_GE(el, 49 * MS);
    CHECK_LT(el, 2000 * MS);
    /* a writer comes: an open left behind (a helper's) completes, its
     * descriptor is closed by the runtime; io_uring's way left none
     * (ENXIO: no reader) */
    int w = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    int mine = w >= 0;
    CHECK_EQ(fds_settle(base + mine), base + mine);
    if (w >= 0) close(w);
}

static aco_rt_co_t* victim;
static void open_cancelled(void* arg) {
    int* res = arg;
    *res = aco_rt_openat(AT_FDCWD, fifo, O_RDONLY | O_CLOEXEC, 0, -1);
}
static void canceller(void* arg) {
    (void)arg;
    aco_rt_sleep(20 * MS);
    CHECK_EQ(aco_rt_cancel(victim), 0);
}

/* The open a cancel left behind may still wait for a writer (a helper's,
 * or io_uring's in its worker, unless the cancel ended it there): one
 * comes, and the late descriptor is closed, on the scheduler's thread (in
 * a co, so that the scheduler looks at its completions meanwhile). */
static void writer_comes(void* arg) {
    int base = *(int*)arg;
    int w = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC);     /* ENXIO: no reader left */
    if (w >= 0) close(w);
    CHECK_EQ(fds_settle(base), base);
}

static void data_queued(void* arg) {
    (void)arg;
    /* O_DIRECT: never tried on the thread first (a hot page would be) */
    int fd = open(file, O_RDONLY | O_CLOEXEC | O_DIRECT);
    if (fd < 0 && errno == EINVAL) {
        printf("no O_DIRECT on %s: the queued pread not tried\n", dir);
        return;
    }
    CHECK_GE(fd, 0);
    static _Alignas(4096) char buf[4096];
    memset(buf, 0x5a, sizeof(buf));
    int64_t t0 = aco_rt_now();
    ssize_t r = aco_rt_pread(fd, buf, sizeof(buf), 0, aco_rt_in_ms(30));
    if (strcmp(aco_rt_file_way("read"), "helper") == 0) {
        /* queued behind the sleeper: dropped before it began */
        CHECK_EQ(r, -ETIMEDOUT);
        CHECK_GE(aco_rt_now() - t0, 29 * MS);
        for (size_t i = 0; i < sizeof(buf); i++) CHECK_EQ(buf[i], 0x5a);
    } else {
        CHECK_EQ(r, 4096);              /* io_uring: no helper in the way */
        CHECK_EQ(buf[0], 'f');
    }
    aco_rt_close(fd);
}
static void* sleeper(void* arg) {
    (void)arg;
    usleep(150 * 1000);
    return NULL;
}
static void busy_helper(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_offload(sleeper, NULL, NULL, NULL, -1), 0);
}

static void pipe_read(void* arg) {
    (void)arg;
    int p[2];
    CHECK_EQ(pipe2(p, O_CLOEXEC), 0);
    char buf[16];
    int64_t t0 = aco_rt_now();
    CHECK_EQ(aco_rt_preadv(p[0], &(struct iovec){buf, sizeof(buf)}, 1, -1, 0, aco_rt_in_ms(40)),
             -ETIMEDOUT);
    CHECK_GE(aco_rt_now() - t0, 39 * MS);
    CHECK_EQ(write(p[1], "abc", 3), 3);
    CHECK_EQ(aco_rt_preadv(p[0], &(struct iovec){buf, sizeof(buf)}, 1, -1, 0, -1), 3);
    CHECK_EQ(memcmp(buf, "abc", 3), 0);
    /* not seekable: pread(2)'s answer */
    CHECK_EQ(aco_rt_pread(p[0], buf, sizeof(buf), 0, -1), -ESPIPE);
    close(p[0]);
    close(p[1]);
}

/* A writer blocked in open(2) of the FIFO: a co's open for reading lets it
 * in (io_uring's first try does, at once), and it must never find the FIFO
 * without a reader after that (EPIPE) while the open goes on: its bytes
 * all come. */
static void* fifo_writer(void* arg) {
    (void)arg;
    int w = open(fifo, O_WRONLY | O_CLOEXEC);
    if (w < 0) return (void*)1;
    ssize_t n = write(w, "hi", 2);
    close(w);
    return (void*)(intptr_t)(n == 2 ? 0 : 2);
}
static void fifo_reader(void* arg) {
    (void)arg;
    new_fifo();
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, fifo_writer, NULL), 0);
    usleep(20000);              /* (the writer waits in open) */
    int r = aco_rt_openat(AT_FDCWD, fifo, O_RDONLY | O_CLOEXEC, 0, aco_rt_in_ms(5000));
    CHECK_GE(r, 0);
    char b[8];
    size_t got = 0;
    ssize_t n;
    while ((n = aco_rt_read(r, b + got, sizeof(b) - got, aco_rt_in_ms(5000))) > 0) got += (size_t)n;
    CHECK_EQ(n, 0);
    CHECK_EQ(got, 2);
    void* res;
    CHECK_EQ(pthread_join(t, &res), 0);
    CHECK(res == NULL);
    aco_rt_close(r);
}

static void cases(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    test_go(s, open_deadline, NULL);
    test_go(s, fifo_reader, NULL);

    int res = 0;
    new_fifo();
    int base = open_fds();
    victim = aco_rt_spawn(s, open_cancelled, &res);
    aco_rt_detach(victim);
    aco_rt_detach(aco_rt_spawn(s, canceller, NULL));
    test_run(s);
    CHECK_EQ(res, -ECANCELED);
    test_go(s, writer_comes, &base);

    CHECK_EQ(aco_rt_offload_limits(1, 0), 0);
    aco_rt_detach(aco_rt_spawn(s, busy_helper, NULL));
    aco_rt_detach(aco_rt_spawn(s, data_queued, NULL));
    test_run(s);
    CHECK_EQ(aco_rt_offload_limits(0, 0), 0);

    test_go(s, pipe_read, NULL);
}

static void stop_soon(aco_rt_timer_t* t) {
    (void)t;
    aco_rt_sched_stop(aco_rt_sched_current());
}

/* aco_rt_sched_free with a co in an open that waits: nothing leaks once
 * the open ends (a writer comes). */
static void open_forever(void* arg) {
    (void)arg;
    aco_rt_openat(AT_FDCWD, fifo, O_RDONLY | O_CLOEXEC, 0, -1);
    CHECK(0);
}
static void freed_while_open(int b) {
    new_fifo();
    int base = open_fds();
    aco_rt_sched_t* s = test_sched_on(b, NULL);
    aco_rt_detach(aco_rt_spawn(s, open_forever, NULL));
    static aco_rt_timer_t t;
    CHECK_EQ(aco_rt_timer_start(&t, aco_rt_in_ms(30), stop_soon), 0);
    CHECK_EQ(aco_rt_sched_run(s), 0);
    aco_rt_sched_free(s);
    int w = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC);    /* a reader still waits? */
    if (w >= 0) close(w);
    /* (a helper's open installs its descriptor a moment after the writer
     * came, and closes it after that: the count must hold 200 ms) */
    for (int i = 0, steady = 0; i < 1000 && steady < 40; i++) {
        steady = open_fds() == base ? steady + 1 : 0;
        usleep(5000);
    }
    if (open_fds() != base) fds_report();
    CHECK_EQ(open_fds(), base);
}

static void two_statx(void* arg) {
    (void)arg;
    struct statx sx;
    CHECK_EQ(aco_rt_statx(AT_FDCWD, "/", 0, STATX_MODE, &sx, -1), 0);
    CHECK_EQ(aco_rt_statx(AT_FDCWD, "/", 0, STATX_MODE, &sx, -1), 0);
}

/* In a child (root only: exit 3 otherwise): nobody's sendfile of root's
 * file, cachestat refused. */
static int ro_fd;
static long ro_sent = -1;
static void ro_sender(void* arg) {
    (void)arg;
    int sp[2];
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
    int64_t off = 0;
    ro_sent = aco_rt_sendfile(sp[0], ro_fd, &off, 4096, -1);
    aco_rt_close(sp[0]);
    close(sp[1]);
}
static void ro_child(void* arg) {
    (void)arg;
    char ro[128];
    snprintf(ro, sizeof(ro), "%s/ro", dir);
    ro_fd = open(ro, O_RDONLY | O_CLOEXEC);
    char c;
    if (ro_fd < 0 || read(ro_fd, &c, 1) != 1) _exit(4);         /* (cached now) */
    if (geteuid() != 0 || setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0)
        _exit(3);
    if (test_deny_syscall(451 /* cachestat, Linux 6.5 */, ENOSYS) != 0) _exit(3);
    aco_rt_sched_t* s = test_sched_on(ACO_RT_BACKEND_EPOLL, NULL);
    test_go(s, ro_sender, NULL);
    aco_rt_stats_t st;
    aco_rt_stats(s, &st);
    aco_rt_sched_free(s);
    if (ro_sent != 4096 || st.file_nowait != 0 || st.file_helper == 0) {
        fprintf(stderr, "sendfile of a file nobody may not write: %ld, on the thread %llu, "
                "helper %llu (a helper's)\n", ro_sent, (unsigned long long)st.file_nowait,
                (unsigned long long)st.file_helper);
        _exit(5);
    }
    _exit(0);
}

static void not_writable(void) {
    char ro[128];
    snprintf(ro, sizeof(ro), "%s/ro", dir);
    int fd = open(ro, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    CHECK_GE(fd, 0);
    static char page[4096];
    CHECK_EQ(write(fd, page, sizeof(page)), 4096);
    CHECK_EQ(close(fd), 0);
    CHECK_EQ(chmod(dir, 0755), 0);          /* (nobody needs no path: the fd) */
    int st = -1;
    CHECK_EQ(test_in_child(ro_child, NULL, &st), 0);
    if (st == 3) printf("note: not root, or no seccomp: the unwritable file's sendfile not tried\n");
    else CHECK_EQ(st, 0);
    unlink(ro);
}

/* The fallback said once, in a child with stderr into a pipe. */
static void fallback_said(int quiet) {
    int p[2];
    CHECK_EQ(pipe(p), 0);
    fflush(NULL);
    pid_t pid = fork();
    CHECK_GE(pid, 0);
    if (pid == 0) {
        dup2(p[1], 2);
        setenv("ACO_RT_URING_OFF", "statx", 1);
        if (quiet) setenv("ACO_RT_QUIET", "1", 1);
        aco_rt_sched_t* s = test_sched_on(ACO_RT_BACKEND_URING, NULL);
        CHECK_EQ(strcmp(aco_rt_file_way("statx"), "helper"), 0);
        CHECK_EQ(strcmp(aco_rt_file_way("openat"), "uring"), 0);
        test_go(s, two_statx, NULL);
        aco_rt_sched_free(s);
        exit(0);
    }
    close(p[1]);
    char out[4096];
    size_t k = 0;
    ssize_t r;
    while ((r = read(p[0], out + k, sizeof(out) - 1 - k)) > 0) k += (size_t)r;
    out[k] = 0;
    close(p[0]);
    int st;
    CHECK_EQ(waitpid(pid, &st, 0), pid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    int lines = 0;
    for (char* q = out; (q = strstr(q, "aco_rt: io_uring has no statx")); q++) lines++;
    CHECK_EQ(lines, quiet ? 0 : 1);
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);   /* (a writer that lost its reader says EPIPE) */
    snprintf(dir, sizeof(dir), "/tmp/aco_file_ways_XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
    snprintf(file, sizeof(file), "%s/file", dir);
    int fd = open(file, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    CHECK_GE(fd, 0);
    static char page[4096];
    memset(page, 'f', sizeof(page));
    CHECK_EQ(write(fd, page, sizeof(page)), 4096);
    close(fd);

    test_on_backends(NULL, cases, NULL);
    int bs[8], n = test_backends(bs, 8);
    for (int i = 0; i < n; i++) freed_while_open(bs[i]);
    for (int i = 0; i < n; i++) {
        if (bs[i] != ACO_RT_BACKEND_URING) continue;
        setenv("ACO_RT_URING_OFF", "all", 1);
        setenv("ACO_RT_QUIET", "1", 1);
        test_on_backends(NULL, cases, NULL);
        unsetenv("ACO_RT_URING_OFF");
        unsetenv("ACO_RT_QUIET");
        fallback_said(0);
        fallback_said(1);
    }

    if (n) not_writable();

    for (int i = 0; i < nfifos; i++) {
        snprintf(fifo, sizeof(fifo), "%s/fifo%d", dir, i);
        unlink(fifo);
    }
    unlink(file);
    rmdir(dir);
    puts("file ways: deadlines, cancels, orphans, fallbacks: ok");
    return 0;
}
