/* test_hook_file.c - the syscall hooks' file calls (rt/hook.c linked in,
 * as test_hook): outside cos each is libc's; in a co each is the runtime's
 * (the counters of aco_rt_stats move: a page-cache hit on the thread, an
 * open, a stat, a sync on io_uring or a helper thread) with libc's results
 * and errno: open and its names, creat, pread/pwrite and the v/v2 kinds,
 * read/write/readv/writev of a file at the file position, fsync,
 * fdatasync, ftruncate, fallocate, the stat family (the fields libc gives,
 * __xstat's too), statx, unlink, rmdir, rename, mkdir; sendfile, splice
 * and tee; sendmsg and recvmsg with a descriptor passed; shutdown.  Calls
 * that wait park the co while a ticker co runs: an open of a FIFO until a
 * writer comes, F_SETLKW while another process holds the lock.  A
 * cancelled co's file calls fail with ECANCELED; pread on a pipe is
 * ESPIPE; the program's O_NONBLOCK still says EAGAIN for recvmsg, and
 * MSG_ERRQUEUE never waits; a number glibc's fclose let go and a pipe
 * took is a pipe.  pthread mutexes held across a park: another co waits
 * (the thread runs on), a recursive one's holder may lock it again, an
 * error-checking one says EDEADLK, trylock EBUSY, 40 held at once.  The
 * fortified names keep their checks.  The calls here are plain libc
 * names.
 */
#define _GNU_SOURCE
#include "rt_test.h"

#include <fcntl.h>
#include <linux/stat.h>
#include <poll.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>

static char dir[64];
static char path[128];

static void at(char* out, size_t n, const char* name) { snprintf(out, n, "%s/%s", dir, name); }

static aco_rt_stats_t stats(void) {
    aco_rt_stats_t st;
    aco_rt_stats(NULL, &st);
    return st;
}
/* file calls the runtime made (any way) */
static uint64_t rt_calls(const aco_rt_stats_t* s) {
    return s->file_nowait + s->file_uring + s->file_helper;
}

/* The same fields as libc's stat of the same file (outside the co: libc). */
static void same_stat(const struct stat* a, const struct stat* b) {
    CHECK_EQ(a->st_dev, b->st_dev);
    CHECK_EQ(a->st_ino, b->st_ino);
    CHECK_EQ(a->st_mode, b->st_mode);
    CHECK_EQ(a->st_nlink, b->st_nlink);
    CHECK_EQ(a->st_uid, b->st_uid);
    CHECK_EQ(a->st_gid, b->st_gid);
    CHECK_EQ(a->st_rdev, b->st_rdev);
    CHECK_EQ(a->st_size, b->st_size);
    CHECK_EQ(a->st_blksize, b->st_blksize);
    CHECK_EQ(a->st_blocks, b->st_blocks);
    CHECK_EQ(a->st_mtim.tv_sec, b->st_mtim.tv_sec);
    CHECK_EQ(a->st_mtim.tv_nsec, b->st_mtim.tv_nsec);
    CHECK_EQ(a->st_ctim.tv_sec, b->st_ctim.tv_sec);
    CHECK_EQ(a->st_ctim.tv_nsec, b->st_ctim.tv_nsec);
}

/* ------------------------------------------------------------------------ */
/* Outside cos: libc's                                                      */
/* ------------------------------------------------------------------------ */

static struct stat outside_st;      /* of "f", taken outside cos */

static void outside(void) {
    at(path, sizeof path, "f");
    int fd = open(path, O_CREAT | O_RDWR | O_TRUNC | O_CLOEXEC, 0640);
    CHECK_GE(fd, 0);
    CHECK_EQ(pwrite(fd, "outside", 7, 0), 7);
    char b[16] = {0};
    CHECK_EQ(pread(fd, b, 7, 0), 7);
    CHECK(memcmp(b, "outside", 7) == 0);
    CHECK_EQ(fsync(fd), 0);
    struct iovec one = {b, 1};
    errno = 0;
    CHECK_EQ(preadv(fd, &one, 1, -1), -1);      /* preadv's -1 is no position */
    CHECK_EQ(errno, EINVAL);
    CHECK_EQ(preadv2(fd, &one, 1, -1, 0), 1);   /* preadv2's is */
    CHECK_EQ(fstat(fd, &outside_st), 0);
    CHECK_EQ(outside_st.st_size, 7);
    struct stat st;
    CHECK_EQ(stat(path, &st), 0);
    same_stat(&st, &outside_st);
    errno = 0;
    CHECK_EQ(open("/nonexistent/x", O_RDONLY), -1);
    CHECK_EQ(errno, ENOENT);
    close(fd);
}

/* ------------------------------------------------------------------------ */
/* In a co: the runtime's                                                   */
/* ------------------------------------------------------------------------ */

static volatile int ticks, tick_stop;
static void ticker(void* arg) {
    (void)arg;
    while (!tick_stop) {
        aco_rt_sleep(MS);
        ticks++;
    }
}

static void calls(void* arg) {
    (void)arg;
    char p2[128], p3[128];
    at(path, sizeof path, "f");
    aco_rt_stats_t a = stats();

    /* open (mode read where O_CREAT asks), the result libc's */
    at(p2, sizeof p2, "g");
    int g = open(p2, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
    CHECK_GE(g, 0);
    aco_rt_stats_t b = stats();
    CHECK_GT(rt_calls(&b), rt_calls(&a));
    struct stat st;
    CHECK_EQ(fstat(g, &st), 0);
    CHECK_EQ(st.st_mode & 0777, 0600);
    CHECK(S_ISREG(st.st_mode));
    errno = 0;
    CHECK_EQ(open(p2, O_CREAT | O_EXCL | O_RDWR, 0600), -1);
    CHECK_EQ(errno, EEXIST);
    errno = 0;
    CHECK_EQ(open64("/nonexistent/x", O_RDONLY), -1);
    CHECK_EQ(errno, ENOENT);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    CHECK_GE(dfd, 0);
    int f = openat(dfd, "f", O_RDWR | O_CLOEXEC);
    CHECK_GE(f, 0);
    /* the program's O_NONBLOCK is the program's to see */
    int nb = openat64(dfd, "f", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    CHECK_GE(nb, 0);
    CHECK(fcntl(nb, F_GETFL) & O_NONBLOCK);
    close(nb);

    /* stat family: the fields libc gave outside */
    struct stat s1, s2, s3, s4;
    CHECK_EQ(fstat(f, &s1), 0);
    same_stat(&s1, &outside_st);
    CHECK_EQ(stat(path, &s2), 0);
    same_stat(&s2, &outside_st);
    CHECK_EQ(lstat(path, &s3), 0);
    same_stat(&s3, &outside_st);
    CHECK_EQ(fstatat(dfd, "f", &s4, 0), 0);
    same_stat(&s4, &outside_st);
    struct stat64 s5;
    CHECK_EQ(stat64(path, &s5), 0);
    CHECK_EQ(s5.st_ino, outside_st.st_ino);
    CHECK_EQ(s5.st_size, outside_st.st_size);
    CHECK_EQ(fstat64(f, &s5), 0);
    CHECK_EQ(s5.st_ino, outside_st.st_ino);
    struct statx x;
    CHECK_EQ(statx(dfd, "f", 0, STATX_BASIC_STATS, &x), 0);
    CHECK_EQ(x.stx_ino, outside_st.st_ino);
    CHECK_EQ(x.stx_size, 7);
    /* a symlink: lstat says link, stat the target */
    at(p3, sizeof p3, "lnk");
    CHECK_EQ(symlinkat("f", dfd, "lnk"), 0);
    CHECK_EQ(lstat(p3, &s3), 0);
    CHECK(S_ISLNK(s3.st_mode));
    CHECK_EQ(stat(p3, &s3), 0);
    CHECK_EQ(s3.st_ino, outside_st.st_ino);
    CHECK_EQ(fstatat(dfd, "lnk", &s3, AT_SYMLINK_NOFOLLOW), 0);
    CHECK(S_ISLNK(s3.st_mode));
    errno = 0;
    CHECK_EQ(stat("/nonexistent/x", &s3), -1);
    CHECK_EQ(errno, ENOENT);
    errno = 0;
    CHECK_EQ(fstat(-1, &s3), -1);
    CHECK_EQ(errno, EBADF);
    errno = 0;
    CHECK_EQ(fstat(1000000, &s3), -1);
    CHECK_EQ(errno, EBADF);
    /* a pipe's fstat stays libc's (no file call counted) */
    int pp[2];
    CHECK_EQ(pipe2(pp, O_CLOEXEC), 0);
    a = stats();
    CHECK_EQ(fstat(pp[0], &s3), 0);
    CHECK(S_ISFIFO(s3.st_mode));
    b = stats();
    CHECK_EQ(rt_calls(&b), rt_calls(&a));

    /* pread/pwrite and the vector kinds */
    CHECK_EQ(pwrite(g, "0123456789", 10, 0), 10);
    char buf[32] = {0};
    CHECK_EQ(pread(g, buf, 4, 3), 4);
    CHECK(memcmp(buf, "3456", 4) == 0);
    CHECK_EQ(pread64(g, buf, 32, 8), 2);
    CHECK(memcmp(buf, "89", 2) == 0);
    CHECK_EQ(pwrite64(g, "AB", 2, 10), 2);
    struct iovec v[2] = {{buf, 3}, {buf + 10, 3}};
    memset(buf, 0, sizeof buf);
    CHECK_EQ(preadv(g, v, 2, 0), 6);
    CHECK(memcmp(buf, "012", 3) == 0 && memcmp(buf + 10, "345", 3) == 0);
    struct iovec w[2] = {{"xy", 2}, {"z", 1}};
    CHECK_EQ(pwritev(g, w, 2, 12), 3);
    CHECK_EQ(pwritev2(g, w, 2, 15, 0), 3);
    memset(buf, 0, sizeof buf);
    CHECK_EQ(preadv2(g, v, 1, 10, 0), 3);
    CHECK(memcmp(buf, "ABx", 3) == 0);
    errno = 0;
    CHECK_EQ(pread(g, buf, 1, -1), -1);
    CHECK_EQ(errno, EINVAL);
    errno = 0;
    CHECK_EQ(pread(pp[0], buf, 1, 0), -1);
    CHECK_EQ(errno, ESPIPE);
    errno = 0;
    CHECK_EQ(pwrite(1000000, "x", 1, 0), -1);
    CHECK_EQ(errno, EBADF);
    int ro = open(p2, O_RDONLY | O_CLOEXEC);
    CHECK_GE(ro, 0);
    errno = 0;
    CHECK_EQ(pwrite(ro, "x", 1, 0), -1);
    CHECK_EQ(errno, EBADF);
    close(ro);

    /* read/write/readv/writev of a file: at the file position, counted */
    CHECK_EQ(lseek(g, 2, SEEK_SET), 2);
    a = stats();
    CHECK_EQ(read(g, buf, 3), 3);
    b = stats();
    CHECK(memcmp(buf, "234", 3) == 0);
    CHECK_GT(rt_calls(&b), rt_calls(&a));
    CHECK_EQ(lseek(g, 0, SEEK_CUR), 5);
    CHECK_EQ(write(g, "WW", 2), 2);
    CHECK_EQ(lseek(g, 0, SEEK_CUR), 7);
    CHECK_EQ(readv(g, v, 2), 6);
    CHECK(memcmp(buf, "789", 3) == 0 && memcmp(buf + 10, "ABx", 3) == 0);
    CHECK_EQ(lseek(g, 0, SEEK_END), 18);
    CHECK_EQ(writev(g, w, 2), 3);
    CHECK_EQ(pread(g, buf, 32, 0), 21);
    CHECK(memcmp(buf, "01234WW789ABxyzxyzxyz", 21) == 0);
    /* a buffer on the co's (share) stack works: the runtime bounces it */
    {
        char onstack[4096];
        memset(onstack, 'q', sizeof onstack);
        CHECK_EQ(pwrite(g, onstack, sizeof onstack, 4096), (ssize_t)sizeof onstack);
        memset(onstack, 0, sizeof onstack);
        CHECK_EQ(pread(g, onstack, sizeof onstack, 4096), (ssize_t)sizeof onstack);
        CHECK(onstack[0] == 'q' && onstack[4095] == 'q');
    }

    /* syncs, sizes */
    a = stats();
    CHECK_EQ(fsync(g), 0);
    CHECK_EQ(fdatasync(g), 0);
    b = stats();
    CHECK_GE(rt_calls(&b), rt_calls(&a) + 2);
    errno = 0;
    CHECK_EQ(fsync(1000000), -1);
    CHECK_EQ(errno, EBADF);
    CHECK_EQ(ftruncate(g, 100), 0);
    CHECK_EQ(fstat(g, &st), 0);
    CHECK_EQ(st.st_size, 100);
    CHECK_EQ(ftruncate64(g, 50), 0);
    CHECK_EQ(fstat(g, &st), 0);
    CHECK_EQ(st.st_size, 50);
    errno = 0;
    CHECK_EQ(ftruncate(g, -1), -1);
    CHECK_EQ(errno, EINVAL);
    int fa = fallocate(g, 0, 0, 65536);
    CHECK(fa == 0 || errno == EOPNOTSUPP);
    if (fa == 0) {
        CHECK_EQ(fstat(g, &st), 0);
        CHECK_EQ(st.st_size, 65536);
    }

    /* directories and names */
    at(p3, sizeof p3, "d");
    CHECK_EQ(mkdir(p3, 0700), 0);
    errno = 0;
    CHECK_EQ(mkdir(p3, 0700), -1);
    CHECK_EQ(errno, EEXIST);
    CHECK_EQ(mkdirat(dfd, "d/e", 0700), 0);
    errno = 0;
    CHECK_EQ(rmdir(p3), -1);
    CHECK_EQ(errno, ENOTEMPTY);
    CHECK_EQ(unlinkat(dfd, "d/e", AT_REMOVEDIR), 0);
    CHECK_EQ(rmdir(p3), 0);
    char p4[128];
    at(p4, sizeof p4, "g2");
    CHECK_EQ(rename(p2, p4), 0);
    errno = 0;
    CHECK_EQ(stat(p2, &st), -1);
    CHECK_EQ(errno, ENOENT);
    CHECK_EQ(renameat(dfd, "g2", dfd, "g"), 0);
    CHECK_EQ(renameat2(dfd, "g", dfd, "f", RENAME_EXCHANGE), 0);   /* back by exchange */
    CHECK_EQ(renameat2(dfd, "g", dfd, "f", RENAME_EXCHANGE), 0);
    errno = 0;
    CHECK_EQ(renameat2(dfd, "g", dfd, "f", RENAME_NOREPLACE), -1);
    CHECK_EQ(errno, EEXIST);
    errno = 0;
    CHECK_EQ(unlink("/nonexistent/x"), -1);
    CHECK_EQ(errno, ENOENT);
    errno = 0;
    CHECK_EQ(unlink(dir), -1);
    CHECK(errno == EISDIR || errno == EPERM);
    CHECK_EQ(unlink(p3 /* gone */ ), -1);
    CHECK_EQ(unlinkat(dfd, "lnk", 0), 0);

    /* sendfile to a socket, read by another co */
    int sv[2];
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    off_t off = 1;
    CHECK_EQ(sendfile(sv[0], g, &off, 5), 5);
    CHECK_EQ(off, 6);
    memset(buf, 0, sizeof buf);
    CHECK_EQ(recv(sv[1], buf, 5, MSG_WAITALL), 5);
    CHECK(memcmp(buf, "1234W", 5) == 0);
    /* splice a file into a pipe, tee it, read both */
    loff_t lo = 0;
    CHECK_EQ(splice(g, &lo, pp[1], NULL, 4, 0), 4);
    CHECK_EQ(lo, 4);
    int pq[2];
    CHECK_EQ(pipe2(pq, O_CLOEXEC), 0);
    CHECK_EQ(tee(pp[0], pq[1], 4, 0), 4);
    memset(buf, 0, sizeof buf);
    CHECK_EQ(read(pp[0], buf, 4), 4);
    CHECK_EQ(read(pq[0], buf + 4, 4), 4);
    CHECK(memcmp(buf, "01230123", 8) == 0);

    /* sendmsg/recvmsg with a descriptor passed */
    {
        char data = 'm';
        struct iovec iv = {&data, 1};
        union { char b[CMSG_SPACE(sizeof(int))]; struct cmsghdr align; } cm;
        memset(&cm, 0, sizeof cm);
        struct msghdr m = {.msg_iov = &iv, .msg_iovlen = 1, .msg_control = cm.b,
                           .msg_controllen = sizeof cm.b};
        struct cmsghdr* c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &g, sizeof(int));
        CHECK_EQ(sendmsg(sv[0], &m, 0), 1);
        char got = 0;
        struct iovec ir = {&got, 1};
        union { char b[CMSG_SPACE(sizeof(int))]; struct cmsghdr align; } cr;
        struct msghdr r = {.msg_iov = &ir, .msg_iovlen = 1, .msg_control = cr.b,
                           .msg_controllen = sizeof cr.b};
        CHECK_EQ(recvmsg(sv[1], &r, MSG_CMSG_CLOEXEC), 1);
        CHECK_EQ(got, 'm');
        struct cmsghdr* rc = CMSG_FIRSTHDR(&r);
        CHECK(rc != NULL && rc->cmsg_type == SCM_RIGHTS);
        int passed;
        memcpy(&passed, CMSG_DATA(rc), sizeof(int));
        CHECK_EQ(fstat(passed, &st), 0);
        struct stat gs;
        CHECK_EQ(fstat(g, &gs), 0);
        CHECK_EQ(st.st_ino, gs.st_ino);
        close(passed);
        /* the program's O_NONBLOCK: EAGAIN, no wait */
        CHECK_EQ(fcntl(sv[1], F_SETFL, O_NONBLOCK), 0);
        errno = 0;
        CHECK_EQ(recvmsg(sv[1], &r, 0), -1);
        CHECK_EQ(errno, EAGAIN);
        CHECK_EQ(fcntl(sv[1], F_SETFL, 0), 0);
    }
    /* shutdown: the peer reads the end */
    CHECK_EQ(shutdown(sv[0], SHUT_WR), 0);
    CHECK_EQ(read(sv[1], buf, 1), 0);
    errno = 0;
    CHECK_EQ(shutdown(pp[0], SHUT_RD), -1);
    CHECK_EQ(errno, ENOTSOCK);

    close(sv[0]);
    close(sv[1]);
    close(pp[0]);
    close(pp[1]);
    close(pq[0]);
    close(pq[1]);
    close(g);
    close(f);
    close(dfd);
    at(p2, sizeof p2, "g");
    CHECK_EQ(unlink(p2), 0);
}

/* ------------------------------------------------------------------------ */
/* Waits that park: a FIFO's open, F_SETLKW                                 */
/* ------------------------------------------------------------------------ */

static char fifo[128];
static int fifo_read_fd = -1;
static int64_t fifo_opened_at;

static void fifo_reader(void* arg) {
    (void)arg;
    fifo_read_fd = open(fifo, O_RDONLY | O_CLOEXEC);
    fifo_opened_at = aco_rt_now();
}

static void fifo_writer(void* arg) {
    (void)arg;
    aco_rt_sleep(50 * MS);
    CHECK_LT(fifo_read_fd, 0);      /* the reader still waits, parked */
    CHECK_GT(ticks, 0);             /* and the ticker ran meanwhile */
    int w = open(fifo, O_WRONLY | O_CLOEXEC);
    CHECK_GE(w, 0);
    CHECK_EQ(write(w, "x", 1), 1);
    close(w);
}

static void waits(void* arg) {
    (void)arg;
    tick_stop = 0;
    ticks = 0;
    CHECK(aco_rt_spawn(NULL, ticker, NULL) != NULL);
    at(fifo, sizeof fifo, "fifo");
    CHECK_EQ(mkfifo(fifo, 0600), 0);
    fifo_read_fd = -1;
    int64_t t0 = aco_rt_now();
    aco_rt_co_t* r = aco_rt_spawn(NULL, fifo_reader, NULL);
    aco_rt_co_t* w = aco_rt_spawn(NULL, fifo_writer, NULL);
    CHECK(r && w);
    CHECK_EQ(aco_rt_join(r, -1), 0);
    CHECK_EQ(aco_rt_join(w, -1), 0);
    CHECK_GE(fifo_read_fd, 0);
    CHECK_GE(fifo_opened_at - t0, 50 * MS);
    char c;
    CHECK_EQ(read(fifo_read_fd, &c, 1), 1);
    close(fifo_read_fd);
    CHECK_EQ(unlink(fifo), 0);

    /* F_SETLKW: a child holds the lock 100 ms */
    at(path, sizeof path, "f");
    int fd = open(path, O_RDWR | O_CLOEXEC);
    CHECK_GE(fd, 0);
    int go[2];
    CHECK_EQ(pipe2(go, O_CLOEXEC), 0);
    pid_t pid = fork();
    CHECK_GE(pid, 0);
    if (pid == 0) {
        struct flock l = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1};
        if (syscall(SYS_fcntl, fd, F_SETLK, &l) != 0) _exit(2);
        if (syscall(SYS_write, go[1], "g", 1) != 1) _exit(3);
        struct timespec ts = {0, 100 * MS};
        syscall(SYS_clock_nanosleep, CLOCK_MONOTONIC, 0, &ts, NULL);
        _exit(0);
    }
    char g;
    CHECK_EQ(read(go[0], &g, 1), 1);
    struct flock l = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1};
    errno = 0;
    CHECK_EQ(fcntl(fd, F_SETLK, &l), -1);   /* held by the child */
    CHECK(errno == EAGAIN || errno == EACCES);
    int before = ticks;
    CHECK_EQ(fcntl(fd, F_SETLKW, &l), 0);
    CHECK_GT(ticks - before, 0);    /* parked: the ticker ran */
    int st;
    CHECK_EQ(waitpid(pid, &st, 0), pid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    l.l_type = F_UNLCK;
    CHECK_EQ(fcntl(fd, F_SETLK, &l), 0);
    close(go[0]);
    close(go[1]);
    close(fd);
    tick_stop = 1;
}

/* ------------------------------------------------------------------------ */
/* Mutexes held across a park                                               */
/* ------------------------------------------------------------------------ */

static pthread_mutex_t mx_normal = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t mx_rec, mx_chk;
static pthread_mutex_t mx_many[40];
static int mx_in;                   /* cos inside mx_normal at once */
static int mx_order[4], mx_n;

/* Holds the mutex across a park (a sleep), as a library holds its lock
 * across a read: the co that wants it meanwhile must wait, not stop the
 * thread, and nobody else is inside at the same time. */
static void mx_holder(void* arg) {
    int id = (int)(intptr_t)arg;
    CHECK_EQ(pthread_mutex_lock(&mx_normal), 0);
    CHECK_EQ(++mx_in, 1);
    aco_rt_sleep(20 * MS);
    mx_order[mx_n++] = id;
    mx_in--;
    CHECK_EQ(pthread_mutex_unlock(&mx_normal), 0);
}

static void mx_rec_holder(void* arg) {
    (void)arg;
    CHECK_EQ(pthread_mutex_lock(&mx_rec), 0);
    CHECK_EQ(pthread_mutex_lock(&mx_rec), 0);   /* its own again */
    CHECK_EQ(pthread_mutex_lock(&mx_chk), 0);
    CHECK_EQ(pthread_mutex_lock(&mx_chk), EDEADLK);
    /* more held at once than a small table would keep */
    for (int i = 0; i < 40; i++) CHECK_EQ(pthread_mutex_lock(&mx_many[i]), 0);
    aco_rt_sleep(20 * MS);
    for (int i = 0; i < 40; i++) CHECK_EQ(pthread_mutex_unlock(&mx_many[i]), 0);
    CHECK_EQ(pthread_mutex_unlock(&mx_chk), 0);
    CHECK_EQ(pthread_mutex_unlock(&mx_rec), 0);
    mx_order[mx_n++] = 1;
    CHECK_EQ(pthread_mutex_unlock(&mx_rec), 0);
}

static void mx_rec_waiter(void* arg) {
    (void)arg;
    /* not its holder: no unlock (once 0, and the holder's own said EPERM) */
    CHECK_EQ(pthread_mutex_unlock(&mx_rec), EPERM);
    CHECK_EQ(pthread_mutex_unlock(&mx_chk), EPERM);
    CHECK_EQ(pthread_mutex_trylock(&mx_rec), EBUSY);
    CHECK_EQ(pthread_mutex_trylock(&mx_many[39]), EBUSY);
    CHECK_EQ(pthread_mutex_lock(&mx_many[39]), 0);
    CHECK_EQ(pthread_mutex_unlock(&mx_many[39]), 0);
    CHECK_EQ(pthread_mutex_lock(&mx_rec), 0);   /* after the holder let go */
    mx_order[mx_n++] = 2;
    CHECK_EQ(pthread_mutex_unlock(&mx_rec), 0);
}

static void mutexes(void* arg) {
    (void)arg;
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
    CHECK_EQ(pthread_mutex_init(&mx_rec, &a), 0);
    for (int i = 0; i < 40; i++) CHECK_EQ(pthread_mutex_init(&mx_many[i], &a), 0);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ERRORCHECK);
    CHECK_EQ(pthread_mutex_init(&mx_chk, &a), 0);
    pthread_mutexattr_destroy(&a);
    tick_stop = 0;
    ticks = 0;
    aco_rt_co_t* t = aco_rt_spawn(NULL, ticker, NULL);
    mx_n = 0;
    aco_rt_co_t* c[3];
    for (int i = 0; i < 3; i++) c[i] = aco_rt_spawn(NULL, mx_holder, (void*)(intptr_t)i);
    for (int i = 0; i < 3; i++) CHECK_EQ(aco_rt_join(c[i], -1), 0);
    CHECK_EQ(mx_n, 3);
    CHECK(mx_order[0] == 0 && mx_order[1] + mx_order[2] == 3);
    CHECK_GT(ticks, 0);             /* the thread ran the ticker meanwhile */
    mx_n = 0;
    c[0] = aco_rt_spawn(NULL, mx_rec_holder, NULL);
    c[1] = aco_rt_spawn(NULL, mx_rec_waiter, NULL);
    CHECK_EQ(aco_rt_join(c[0], -1), 0);
    CHECK_EQ(aco_rt_join(c[1], -1), 0);
    CHECK(mx_n == 2 && mx_order[0] == 1 && mx_order[1] == 2);
    /* outside any co's turn, the thread takes them as libc does */
    tick_stop = 1;
    CHECK_EQ(aco_rt_join(t, -1), 0);
    for (int i = 0; i < 40; i++) pthread_mutex_destroy(&mx_many[i]);
    pthread_mutex_destroy(&mx_rec);
    pthread_mutex_destroy(&mx_chk);
}

/* recvmsg(MSG_ERRQUEUE) never waits; a number glibc closed inside itself
 * (fclose) and reused for a pipe the program made non-blocking is a pipe,
 * not the file it was: EAGAIN. */
static void odd_ends(void* arg) {
    (void)arg;
    int u = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    CHECK_GE(u, 0);
    char b[16];
    struct iovec iv = {b, sizeof b};
    struct msghdr m = {.msg_iov = &iv, .msg_iovlen = 1};
    errno = 0;
    CHECK_EQ(recvmsg(u, &m, MSG_ERRQUEUE), -1);
    CHECK_EQ(errno, EAGAIN);
    close(u);
    at(path, sizeof path, "f");
    FILE* fp = fopen(path, "r");
    CHECK(fp != NULL);
    int n = fileno(fp);
    struct stat st;
    CHECK_EQ(fstat(n, &st), 0);     /* the hooks know the number for a file */
    CHECK_EQ(read(n, b, 1), 1);
    fclose(fp);                     /* (glibc's own close: no hook sees it) */
    int p[2];
    CHECK_EQ(pipe2(p, O_NONBLOCK | O_CLOEXEC), 0);
    CHECK_EQ(p[0], n);              /* (the lowest free number) */
    errno = 0;
    CHECK_EQ(read(p[0], b, 1), -1);
    CHECK_EQ(errno, EAGAIN);
    close(p[0]);
    close(p[1]);
}

/* ------------------------------------------------------------------------ */
/* Cancel                                                                   */
/* ------------------------------------------------------------------------ */

static void cancelled_calls(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_sleep(10000 * MS), -ECANCELED);     /* ended by the cancel */
    at(path, sizeof path, "f");
    errno = 0;
    CHECK_EQ(open(path, O_RDONLY), -1);
    CHECK_EQ(errno, ECANCELED);
    errno = 0;
    struct stat st;
    CHECK_EQ(stat(path, &st), -1);
    CHECK_EQ(errno, ECANCELED);
    errno = 0;
    CHECK_EQ(fsync(0), -1);
    CHECK_EQ(errno, ECANCELED);
    errno = 0;
    CHECK_EQ(mkdir(path, 0700), -1);
    CHECK_EQ(errno, ECANCELED);
}

static void cancels(void* arg) {
    (void)arg;
    aco_rt_co_t* c = aco_rt_spawn(NULL, cancelled_calls, NULL);
    CHECK(c != NULL);
    aco_rt_sleep(MS);
    CHECK_EQ(aco_rt_cancel(c), 0);
    CHECK_EQ(aco_rt_join(c, -1), 0);
}

static void body(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    outside();          /* (the last backend's renames moved f's ctime) */
    CHECK(aco_rt_spawn(s, calls, NULL) != NULL);
    test_run(s);
    CHECK(aco_rt_spawn(s, waits, NULL) != NULL);
    test_run(s);
    CHECK(aco_rt_spawn(s, cancels, NULL) != NULL);
    test_run(s);
    CHECK(aco_rt_spawn(s, mutexes, NULL) != NULL);
    test_run(s);
    CHECK(aco_rt_spawn(s, odd_ends, NULL) != NULL);
    test_run(s);
}

/* ------------------------------------------------------------------------ */
/* Fortified names                                                          */
/* ------------------------------------------------------------------------ */

extern ssize_t __pread_chk(int fd, void* buf, size_t n, off_t off, size_t buflen);
extern int __open_2(const char* p, int flags);

static void dies_of_abort(int which) {
    pid_t pid = fork();
    CHECK_GE(pid, 0);
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0) dup2(null, 2);
        char b[4];
        if (which == 0) __pread_chk(null, b, 8, 0, sizeof b);
        else __open_2(path, O_CREAT | O_RDWR);
        _exit(0);
    }
    int st;
    CHECK_EQ(waitpid(pid, &st, 0), pid);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
}

static void fortified(void) {
    at(path, sizeof path, "f");
    int fd = __open_2(path, O_RDONLY);
    CHECK_GE(fd, 0);
    char b[8];
    CHECK_EQ(__pread_chk(fd, b, 7, 0, sizeof b), 7);
    close(fd);
    dies_of_abort(0);
    dies_of_abort(1);
}

int main(void) {
    snprintf(dir, sizeof dir, "/var/tmp/aco_hook_file.XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
    outside();
    fortified();
    test_on_backends(NULL, body, NULL);
    at(path, sizeof path, "f");
    CHECK_EQ(unlink(path), 0);
    CHECK_EQ(rmdir(dir), 0);
    printf("test_hook_file: all passed\n");
    return 0;
}
