/* test_file_devices.c - the Files section's transfers on what is neither a
 * regular file nor a pipe or socket: a character device and a terminal,
 * which refuse RWF_NOWAIT.  aco_rt.h: the runtime sets O_NONBLOCK on such
 * a descriptor for its own call alone; the open file is shared (a shell's
 * terminal, a child's stdin), so after every call its flags are what they
 * were, and while a co waits on it another thread's blocking read still
 * blocks.  And the calls' answers are the syscalls': aco_rt_pread and
 * aco_rt_pwrite of no bytes are pread(2) and pwrite(2) (pwrite of none on
 * /dev/full says ENOSPC; pwritev2 of an empty vector says 0), and
 * aco_rt_openat2 with a size above the page says E2BIG as openat2(2).
 * Each answer is compared with the syscall's on the same descriptor.  On
 * both backends, and with $ACO_RT_URING_OFF=all.
 */
#define _GNU_SOURCE
#include "rt_test.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <termios.h>

static int flags_of(int fd) {
    int fl = fcntl(fd, F_GETFL);
    CHECK_GE(fl, 0);
    return fl;
}

/* /dev/full: reads give zeros, writes ENOSPC; each call as the syscall,
 * the flags untouched. */
static void dev_full(void) {
    int fd = open("/dev/full", O_RDWR);
    CHECK_GE(fd, 0);
    int fl = flags_of(fd);
    char a[16], b[16];
    memset(a, 'x', sizeof(a));
    CHECK_EQ(pread(fd, b, sizeof(b), 0), (ssize_t)sizeof(b));
    CHECK_EQ(aco_rt_pread(fd, a, sizeof(a), 0, -1), (ssize_t)sizeof(a));
    CHECK_EQ(memcmp(a, b, sizeof(a)), 0);
    CHECK_EQ(flags_of(fd), fl);

    CHECK_EQ(pwrite(fd, b, sizeof(b), 0), -1);
    int want = -errno;
    CHECK_EQ(aco_rt_pwrite(fd, a, sizeof(a), 0, -1), want);
    CHECK_EQ(flags_of(fd), fl);

    struct iovec v[2] = {{a, 5}, {a + 5, 11}};
    CHECK_EQ(aco_rt_preadv(fd, v, 2, 0, 0, -1), 16);
    CHECK_EQ(flags_of(fd), fl);
    CHECK_EQ(aco_rt_pwritev(fd, v, 2, -1, 0, -1), want);
    CHECK_EQ(flags_of(fd), fl);

    /* no bytes: pwrite(2) and pread(2) ask the driver; pwritev2(2) of an
     * empty vector does not */
    errno = 0;
    long r = pwrite(fd, b, 0, 0);
    CHECK_EQ(aco_rt_pwrite(fd, a, 0, 0, -1), r < 0 ? -errno : r);
    errno = 0;
    r = pread(fd, b, 0, 0);
    CHECK_EQ(aco_rt_pread(fd, a, 0, 0, -1), r < 0 ? -errno : r);
    struct iovec none = {a, 0};
    errno = 0;
    r = pwritev2(fd, &none, 1, 0, 0);
    CHECK_EQ(aco_rt_pwritev(fd, &none, 1, 0, 0, -1), r < 0 ? -errno : r);
    CHECK_EQ(flags_of(fd), fl);
    CHECK_EQ(aco_rt_close(fd), 0);
}

typedef struct {
    int master;
    int fl;             /* the terminal's own flags */
    int tty;
    volatile int seen_nb;
} pty_t;

/* While the reader parks on the terminal, its flags are its own. */
static void pty_writer(void* arg) {
    pty_t* p = arg;
    CHECK_EQ(aco_rt_sleep(50 * MS), 0);
    if (flags_of(p->tty) != p->fl) p->seen_nb = 1;
    CHECK_EQ(write(p->master, "late", 4), 4);
}

static void pty(void) {
    pty_t p = {0};
    p.master = posix_openpt(O_RDWR | O_NOCTTY);
    CHECK_GE(p.master, 0);
    CHECK_EQ(grantpt(p.master), 0);
    CHECK_EQ(unlockpt(p.master), 0);
    p.tty = open(ptsname(p.master), O_RDWR | O_NOCTTY);
    CHECK_GE(p.tty, 0);
    struct termios t;
    CHECK_EQ(tcgetattr(p.tty, &t), 0);
    cfmakeraw(&t);
    CHECK_EQ(tcsetattr(p.tty, TCSANOW, &t), 0);
    p.fl = flags_of(p.tty);

    char b[16];
    CHECK_EQ(write(p.master, "abc", 3), 3);
    struct iovec v = {b, sizeof(b)};
    CHECK_EQ(aco_rt_preadv(p.tty, &v, 1, -1, 0, aco_rt_now() + 5000 * MS), 3);
    CHECK_EQ(memcmp(b, "abc", 3), 0);
    CHECK_EQ(flags_of(p.tty), p.fl);

    struct iovec w = {"xy", 2};
    CHECK_EQ(aco_rt_pwritev(p.tty, &w, 1, -1, 0, aco_rt_now() + 5000 * MS), 2);
    CHECK_EQ(flags_of(p.tty), p.fl);
    CHECK_EQ(read(p.master, b, sizeof(b)), 2);
    CHECK_EQ(memcmp(b, "xy", 2), 0);

    /* a read that waits: the flag is on for each try alone */
    aco_rt_co_t* c = aco_rt_spawn(NULL, pty_writer, &p);
    CHECK(c != NULL);
    CHECK_EQ(aco_rt_preadv(p.tty, &v, 1, -1, 0, aco_rt_now() + 5000 * MS), 4);
    CHECK_EQ(memcmp(b, "late", 4), 0);
    CHECK_EQ(aco_rt_join(c, -1), 0);
    CHECK_EQ(p.seen_nb, 0);
    CHECK_EQ(flags_of(p.tty), p.fl);
    CHECK_EQ(aco_rt_close(p.tty), 0);
    CHECK_EQ(aco_rt_close(p.master), 0);
}

/* openat2(2): a size above the page is E2BIG, before anything else. */
static void openat2_size(void) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE), size = page + 8;
    struct open_how* how = calloc(1, size);
    CHECK(how != NULL);
    how->flags = O_RDONLY;
    errno = 0;
    long r = syscall(SYS_openat2, AT_FDCWD, "/dev/null", how, size);
    int want = r < 0 ? -errno : 0;
    if (r >= 0) close((int)r);
    if (want != -ENOSYS) CHECK_EQ(want, -E2BIG);
    CHECK_EQ(aco_rt_openat2(AT_FDCWD, "/dev/null", how, size, -1), -E2BIG);
    r = aco_rt_openat2(AT_FDCWD, "/dev/null", how, page, -1);     /* zeros past it: taken */
    CHECK(r >= 0 || r == -ENOSYS);
    if (r >= 0) CHECK_EQ(aco_rt_close((int)r), 0);
    free(how);
}

static void body_co(void* arg) {
    (void)arg;
    dev_full();
    pty();
    openat2_size();
}

static void body(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    test_go(s, body_co, NULL);
}

int main(void) {
    test_on_backends(NULL, body, NULL);
    setenv("ACO_RT_URING_OFF", "all", 1);
    setenv("ACO_RT_QUIET", "1", 1);
    test_on_backends(NULL, body, NULL);
    return 0;
}
