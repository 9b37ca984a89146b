/* test_file_bb_meta.c - the [meta] file calls of aco_rt.h, black box: openat,
 * openat2, statx, unlinkat, renameat(2), mkdirat, symlinkat, linkat,
 * fsync, fdatasync, sync_file_range, fallocate, ftruncate: each error the
 * kernel gives (compared with the plain system call), NULL paths
 * (-EFAULT), PATH_MAX paths (-ENAMETOOLONG), outside a co (-EPERM), a
 * passed deadline and a cancel (nothing done). */
#include "bb_file.h"

#include <linux/openat2.h>
#include <linux/stat.h>

static char longpath[PATH_MAX + 16];

static void fill_long(void) {
    /* PATH_MAX bytes of path: "/" then 'a's (the kernel says ENAMETOOLONG
     * for PATH_MAX bytes with the NUL too) */
    memset(longpath, 'a', PATH_MAX);
    longpath[0] = '/';
    longpath[PATH_MAX] = 0;
}

static void meta_co(void* arg) {
    (void)arg;
    char p[PATH_MAX], q[PATH_MAX], r[PATH_MAX];
    int fd, dfd;

    /* ---- openat ---- */
    CHECK_EQ(aco_rt_openat(AT_FDCWD, bb_path(p, "nope"), O_RDONLY, 0, -1), -ENOENT);
    fd = aco_rt_openat(AT_FDCWD, bb_path(p, "f"), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0640, -1);
    CHECK_GE(fd, 0);
    CHECK_EQ(fcntl(fd, F_GETFD), FD_CLOEXEC);
    CHECK_EQ(aco_rt_openat(AT_FDCWD, p, O_RDWR | O_CREAT | O_EXCL, 0600, -1), -EEXIST);
    snprintf(q, sizeof(q), "%s/x", p);
    CHECK_EQ(aco_rt_openat(AT_FDCWD, q, O_RDONLY, 0, -1), -ENOTDIR);
    CHECK_EQ(aco_rt_openat(AT_FDCWD, bb_dir, O_WRONLY, 0, -1), -EISDIR);
    CHECK_EQ(aco_rt_openat(AT_FDCWD, p, O_RDONLY | O_DIRECTORY, 0, -1), -ENOTDIR);
    CHECK_EQ(aco_rt_openat(1000000, "x", O_RDONLY, 0, -1), -EBADF);
    CHECK_EQ(aco_rt_openat(-5, "x", O_RDONLY, 0, -1), -EBADF);
    CHECK_EQ(aco_rt_openat(fd, "x", O_RDONLY, 0, -1), -ENOTDIR);
    CHECK_EQ(aco_rt_openat(AT_FDCWD, bb_dir, O_TMPFILE | O_RDONLY, 0600, -1),
             BB_SYS(openat(AT_FDCWD, bb_dir, O_TMPFILE | O_RDONLY, 0600)));
    CHECK_EQ(aco_rt_openat(AT_FDCWD, NULL, O_RDONLY, 0, -1), -EFAULT);
    CHECK_EQ(aco_rt_openat(AT_FDCWD, longpath, O_RDONLY, 0, -1), -ENAMETOOLONG);
    CHECK_EQ(aco_rt_openat(AT_FDCWD, "", O_RDONLY, 0, -1), -ENOENT);
    /* a component over NAME_MAX: the kernel's ENAMETOOLONG */
    {
        char name[300];
        memset(name, 'b', sizeof(name) - 1);
        name[sizeof(name) - 1] = 0;
        CHECK_EQ(aco_rt_openat(AT_FDCWD, bb_path(q, name), O_RDONLY | O_CREAT, 0600, -1),
                 -ENAMETOOLONG);
    }
    /* relative to a directory descriptor */
    dfd = aco_rt_openat(AT_FDCWD, bb_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0, -1);
    CHECK_GE(dfd, 0);
    int fd2 = aco_rt_openat(dfd, "f", O_RDONLY | O_CLOEXEC, 0, -1);
    CHECK_GE(fd2, 0);
    struct stat a, b;
    CHECK_EQ(fstat(fd, &a), 0);
    CHECK_EQ(fstat(fd2, &b), 0);
    CHECK_EQ(a.st_ino, b.st_ino);
    CHECK_EQ(a.st_mode & 0777, 0640 & ~0022 & 0777);
    CHECK_EQ(aco_rt_close(fd2), 0);
    /* O_TMPFILE works */
    fd2 = aco_rt_openat(dfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600, -1);
    CHECK_EQ(fd2 >= 0, BB_SYS(open(bb_dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600)) >= 0 ? 1 : 0);
    if (fd2 >= 0) aco_rt_close(fd2);

    /* ---- openat2 ---- */
    struct open_how how;
    memset(&how, 0, sizeof(how));
    how.flags = O_RDONLY | O_CLOEXEC;
    how.resolve = RESOLVE_BENEATH;
    long raw = BB_SYS(syscall(SYS_openat2, dfd, "f", &how, sizeof(how)));
    if (raw >= 0) close((int)raw);
    if (raw == -ENOSYS) {
        CHECK_EQ(aco_rt_openat2(dfd, "f", &how, sizeof(how), -1), -ENOSYS);
        goto after_openat2;             /* (valgrind 3.19 has no openat2) */
    }
    CHECK_EQ(aco_rt_openat2(dfd, "../x", &how, sizeof(how), -1), -EXDEV);
    fd2 = aco_rt_openat2(dfd, "f", &how, sizeof(how), -1);
    CHECK_GE(fd2, 0);
    aco_rt_close(fd2);
    CHECK_EQ(aco_rt_openat2(dfd, "f", NULL, sizeof(how), -1), -EFAULT);
    CHECK_EQ(aco_rt_openat2(dfd, "f", &how, 8, -1), -EINVAL); /* under OPEN_HOW_SIZE_VER0 */
    how.mode = 0600;                                          /* mode without O_CREAT */
    CHECK_EQ(aco_rt_openat2(dfd, "f", &how, sizeof(how), -1), -EINVAL);
    how.mode = 0;
    how.resolve = 1ULL << 40;                                 /* unknown resolve bit */
    CHECK_EQ(aco_rt_openat2(dfd, "f", &how, sizeof(how), -1), -EINVAL);
    how.resolve = 0;
    {
        /* a bigger struct with a non-zero tail: E2BIG; a zero tail: fine */
        struct {
            struct open_how h;
            uint64_t more;
        } big;
        memset(&big, 0, sizeof(big));
        big.h.flags = O_RDONLY | O_CLOEXEC;
        big.more = 1;
        CHECK_EQ(aco_rt_openat2(dfd, "f", &big.h, sizeof(big), -1), -E2BIG);
        big.more = 0;
        fd2 = aco_rt_openat2(dfd, "f", &big.h, sizeof(big), -1);
        CHECK_GE(fd2, 0);
        aco_rt_close(fd2);
    }
    CHECK_EQ(aco_rt_openat2(dfd, NULL, &how, sizeof(how), -1), -EFAULT);
    CHECK_EQ(aco_rt_openat2(AT_FDCWD, longpath, &how, sizeof(how), -1), -ENAMETOOLONG);
after_openat2:;

    /* ---- statx ---- */
    struct statx sx;
    memset(&sx, 0xa5, sizeof(sx));
    CHECK_EQ(aco_rt_statx(AT_FDCWD, bb_path(q, "nope"), 0, STATX_BASIC_STATS, &sx, -1), -ENOENT);
    for (size_t i = 0; i < sizeof(sx); i++) CHECK_EQ(((unsigned char*)&sx)[i], 0xa5);
    CHECK_EQ(aco_rt_statx(AT_FDCWD, p, 0, STATX_BASIC_STATS, NULL, -1), -EFAULT);
    CHECK_EQ(aco_rt_statx(AT_FDCWD, NULL, 0, STATX_BASIC_STATS, &sx, -1), -EFAULT);
    CHECK_EQ(aco_rt_statx(AT_FDCWD, p, 0x40000000, STATX_BASIC_STATS, &sx, -1), -EINVAL);
    CHECK_EQ(aco_rt_statx(AT_FDCWD, p, 0, STATX__RESERVED, &sx, -1), -EINVAL);
    CHECK_EQ(aco_rt_statx(AT_FDCWD, longpath, 0, STATX_BASIC_STATS, &sx, -1), -ENAMETOOLONG);
    CHECK_EQ(aco_rt_statx(1000000, "f", 0, STATX_BASIC_STATS, &sx, -1), -EBADF);
    CHECK_EQ(aco_rt_statx(AT_FDCWD, q, 0, STATX_BASIC_STATS, &sx, -1), -ENOENT);
    snprintf(r, sizeof(r), "%s/x", p);
    CHECK_EQ(aco_rt_statx(AT_FDCWD, r, 0, STATX_BASIC_STATS, &sx, -1), -ENOTDIR);
    CHECK_EQ(aco_rt_statx(AT_FDCWD, p, 0, STATX_BASIC_STATS, &sx, -1), 0);
    CHECK_EQ(sx.stx_ino, a.st_ino);
    CHECK_EQ(sx.stx_size, 0);
    memset(&sx, 0, sizeof(sx));
    CHECK_EQ(aco_rt_statx(fd, NULL, AT_EMPTY_PATH, STATX_BASIC_STATS, &sx, -1), 0);
    CHECK_EQ(sx.stx_ino, a.st_ino);
    memset(&sx, 0, sizeof(sx));
    CHECK_EQ(aco_rt_statx(fd, "", AT_EMPTY_PATH, STATX_BASIC_STATS, &sx, -1), 0);
    CHECK_EQ(sx.stx_ino, a.st_ino);
    CHECK_EQ(aco_rt_statx(fd, "", 0, STATX_BASIC_STATS, &sx, -1), -ENOENT);

    /* ---- mkdirat ---- */
    CHECK_EQ(aco_rt_mkdirat(AT_FDCWD, bb_path(q, "d"), 0700, -1), 0);
    CHECK_EQ(aco_rt_mkdirat(AT_FDCWD, q, 0700, -1), -EEXIST);
    CHECK_EQ(aco_rt_mkdirat(AT_FDCWD, bb_path(q, "no/d"), 0700, -1), -ENOENT);
    snprintf(q, sizeof(q), "%s/d", p);
    CHECK_EQ(aco_rt_mkdirat(AT_FDCWD, q, 0700, -1), -ENOTDIR);
    CHECK_EQ(aco_rt_mkdirat(AT_FDCWD, NULL, 0700, -1), -EFAULT);
    CHECK_EQ(aco_rt_mkdirat(AT_FDCWD, longpath, 0700, -1), -ENAMETOOLONG);
    CHECK_EQ(aco_rt_mkdirat(1000000, "d", 0700, -1), -EBADF);
    CHECK_EQ(aco_rt_mkdirat(dfd, "d/e", 0700, -1), 0);

    /* ---- unlinkat ---- */
    CHECK_EQ(aco_rt_unlinkat(dfd, "nope", 0, -1), -ENOENT);
    CHECK_EQ(aco_rt_unlinkat(dfd, "d", 0, -1), -EISDIR);
    CHECK_EQ(aco_rt_unlinkat(dfd, "f", AT_REMOVEDIR, -1), -ENOTDIR);
    CHECK_EQ(aco_rt_unlinkat(dfd, "d", AT_REMOVEDIR, -1), -ENOTEMPTY);
    CHECK_EQ(aco_rt_unlinkat(dfd, "f", 0x1, -1), -EINVAL);
    CHECK_EQ(aco_rt_unlinkat(dfd, NULL, 0, -1), -EFAULT);
    CHECK_EQ(aco_rt_unlinkat(AT_FDCWD, longpath, 0, -1), -ENAMETOOLONG);
    CHECK_EQ(aco_rt_unlinkat(1000000, "f", 0, -1), -EBADF);
    CHECK_EQ(aco_rt_unlinkat(dfd, "d/e", AT_REMOVEDIR, -1), 0);
    CHECK_EQ(aco_rt_unlinkat(dfd, "d/e", AT_REMOVEDIR, -1), -ENOENT);

    /* ---- renameat, renameat2 ---- */
    CHECK_EQ(aco_rt_renameat(dfd, "nope", dfd, "x", -1), -ENOENT);
    CHECK_EQ(aco_rt_renameat(dfd, "d", dfd, "f", -1), -ENOTDIR);
    CHECK_EQ(aco_rt_renameat(dfd, "f", dfd, "d", -1), -EISDIR);
    CHECK_EQ(aco_rt_renameat(dfd, "d", dfd, "d/sub", -1), -EINVAL);
    CHECK_EQ(aco_rt_renameat(dfd, NULL, dfd, "x", -1), -EFAULT);
    CHECK_EQ(aco_rt_renameat(dfd, "f", dfd, NULL, -1), -EFAULT);
    CHECK_EQ(aco_rt_renameat(AT_FDCWD, longpath, dfd, "x", -1), -ENAMETOOLONG);
    CHECK_EQ(aco_rt_renameat(dfd, "f", AT_FDCWD, longpath, -1), -ENAMETOOLONG);
    CHECK_EQ(aco_rt_renameat(1000000, "f", dfd, "x", -1), -EBADF);
    CHECK_EQ(aco_rt_renameat(dfd, "f", 1000000, "x", -1), -EBADF);
    CHECK_EQ(aco_rt_renameat(dfd, "f", dfd, "g", -1), 0);
    CHECK_EQ(faccessat(dfd, "f", F_OK, 0), -1);
    CHECK_EQ(faccessat(dfd, "g", F_OK, 0), 0);
    int gfd = bb_make_file("h", 3, 1);
    close(gfd);
    CHECK_EQ(aco_rt_renameat2(dfd, "g", dfd, "h", RENAME_NOREPLACE, -1), -EEXIST);
    CHECK_EQ(aco_rt_renameat2(dfd, "g", dfd, "nope", RENAME_EXCHANGE, -1), -ENOENT);
    CHECK_EQ(aco_rt_renameat2(dfd, "g", dfd, "h", RENAME_EXCHANGE | RENAME_NOREPLACE, -1),
             -EINVAL);
    CHECK_EQ(aco_rt_renameat2(dfd, "g", dfd, "h", 0x80, -1), -EINVAL);
    CHECK_EQ(aco_rt_renameat2(dfd, "g", dfd, "h", RENAME_EXCHANGE, -1), 0);
    CHECK_EQ(aco_rt_statx(dfd, "g", 0, STATX_SIZE, &sx, -1), 0);
    CHECK_EQ(sx.stx_size, 3);
    CHECK_EQ(aco_rt_renameat2(dfd, "h", dfd, "f", RENAME_NOREPLACE, -1), 0);
    CHECK_EQ(aco_rt_renameat2(dfd, NULL, dfd, "f", 0, -1), -EFAULT);

    /* ---- symlinkat ---- */
    CHECK_EQ(aco_rt_symlinkat("f", dfd, "s", -1), 0);
    CHECK_EQ(aco_rt_symlinkat("f", dfd, "s", -1), -EEXIST);
    CHECK_EQ(aco_rt_symlinkat("f", dfd, "no/s", -1), -ENOENT);
    CHECK_EQ(aco_rt_symlinkat(NULL, dfd, "s2", -1), -EFAULT);
    CHECK_EQ(aco_rt_symlinkat("f", dfd, NULL, -1), -EFAULT);
    CHECK_EQ(aco_rt_symlinkat("", dfd, "s2", -1), -ENOENT);
    CHECK_EQ(aco_rt_symlinkat(longpath, dfd, "s2", -1), -ENAMETOOLONG);
    CHECK_EQ(aco_rt_symlinkat("f", AT_FDCWD, longpath, -1), -ENAMETOOLONG);
    CHECK_EQ(aco_rt_symlinkat("f", 1000000, "s2", -1), -EBADF);
    {
        char t[64];
        ssize_t n = readlinkat(dfd, "s", t, sizeof(t));
        CHECK_EQ(n, 1);
        CHECK_EQ(t[0], 'f');
    }
    /* a dangling link: statx with and without following */
    CHECK_EQ(aco_rt_symlinkat("gone", dfd, "dl", -1), 0);
    CHECK_EQ(aco_rt_statx(dfd, "dl", 0, STATX_BASIC_STATS, &sx, -1), -ENOENT);
    CHECK_EQ(aco_rt_statx(dfd, "dl", AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &sx, -1), 0);
    CHECK(S_ISLNK(sx.stx_mode));
    CHECK_EQ(aco_rt_openat(dfd, "dl", O_RDONLY | O_NOFOLLOW, 0, -1), -ELOOP);

    /* ---- linkat ---- */
    CHECK_EQ(aco_rt_linkat(dfd, "f", dfd, "l", 0, -1), 0);
    CHECK_EQ(aco_rt_linkat(dfd, "f", dfd, "l", 0, -1), -EEXIST);
    CHECK_EQ(aco_rt_linkat(dfd, "nope", dfd, "l2", 0, -1), -ENOENT);
    CHECK_EQ(aco_rt_linkat(dfd, "d", dfd, "l2", 0, -1), -EPERM);
    CHECK_EQ(aco_rt_linkat(dfd, "f", dfd, "l2", 0x1, -1), -EINVAL);
    CHECK_EQ(aco_rt_linkat(dfd, NULL, dfd, "l2", 0, -1), -EFAULT);
    CHECK_EQ(aco_rt_linkat(dfd, "f", dfd, NULL, 0, -1), -EFAULT);
    CHECK_EQ(aco_rt_linkat(AT_FDCWD, longpath, dfd, "l2", 0, -1), -ENAMETOOLONG);
    CHECK_EQ(aco_rt_statx(dfd, "f", 0, STATX_NLINK, &sx, -1), 0);
    CHECK_EQ(sx.stx_nlink, 2);
    /* through the symlink: the link itself, or (AT_SYMLINK_FOLLOW) its target */
    CHECK_EQ(aco_rt_linkat(dfd, "s", dfd, "ls", 0, -1), 0);
    CHECK_EQ(aco_rt_linkat(dfd, "s", dfd, "lf", AT_SYMLINK_FOLLOW, -1), 0);
    CHECK_EQ(aco_rt_statx(dfd, "ls", AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &sx, -1), 0);
    CHECK(S_ISLNK(sx.stx_mode));
    CHECK_EQ(aco_rt_statx(dfd, "lf", AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &sx, -1), 0);
    CHECK(S_ISREG(sx.stx_mode));
    CHECK_EQ(aco_rt_linkat(fd, "", dfd, "le", AT_EMPTY_PATH, -1),
             BB_SYS(linkat(fd, "", dfd, "le2", AT_EMPTY_PATH)));

    /* ---- fsync & co ---- */
    int pp[2];
    CHECK_EQ(pipe2(pp, O_CLOEXEC), 0);
    CHECK_EQ(aco_rt_fsync(fd, -1), 0);
    CHECK_EQ(aco_rt_fdatasync(fd, -1), 0);
    CHECK_EQ(aco_rt_fsync(1000000, -1), -EBADF);
    CHECK_EQ(aco_rt_fsync(-1, -1), -EBADF);
    CHECK_EQ(aco_rt_fdatasync(1000000, -1), -EBADF);
    CHECK_EQ(aco_rt_fsync(pp[0], -1), BB_SYS(fsync(pp[0])));
    CHECK_EQ(aco_rt_fdatasync(pp[1], -1), BB_SYS(fdatasync(pp[1])));
    CHECK_EQ(aco_rt_fsync(dfd, -1), BB_SYS(fsync(dfd)));
    CHECK_EQ(aco_rt_sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE, -1), 0);
    CHECK_EQ(aco_rt_sync_file_range(fd, -1, 0, SYNC_FILE_RANGE_WRITE, -1), -EINVAL);
    CHECK_EQ(aco_rt_sync_file_range(fd, 0, -1, SYNC_FILE_RANGE_WRITE, -1), -EINVAL);
    CHECK_EQ(aco_rt_sync_file_range(fd, 0, 0, 0x100, -1), -EINVAL);
    CHECK_EQ(aco_rt_sync_file_range(1000000, 0, 0, SYNC_FILE_RANGE_WRITE, -1), -EBADF);
    CHECK_EQ(aco_rt_sync_file_range(pp[1], 0, 0, SYNC_FILE_RANGE_WRITE, -1),
             BB_SYS(sync_file_range(pp[1], 0, 0, SYNC_FILE_RANGE_WRITE)));
    /* a range over 4 GiB (the header: helper) */
    CHECK_EQ(aco_rt_sync_file_range(fd, 0, 8LL << 30, SYNC_FILE_RANGE_WRITE, -1), 0);
    CHECK_EQ(aco_rt_fallocate(fd, 0, 0, 4096, -1), 0);
    CHECK_EQ(aco_rt_statx(fd, "", AT_EMPTY_PATH, STATX_SIZE, &sx, -1), 0);
    CHECK_EQ(sx.stx_size, 4096);
    CHECK_EQ(aco_rt_fallocate(fd, 0, 0, 0, -1), -EINVAL);
    CHECK_EQ(aco_rt_fallocate(fd, 0, -1, 10, -1), -EINVAL);
    CHECK_EQ(aco_rt_fallocate(fd, 0x1000, 0, 10, -1), BB_SYS(fallocate(fd, 0x1000, 0, 10)));
    CHECK_EQ(aco_rt_fallocate(1000000, 0, 0, 10, -1), -EBADF);
    CHECK_EQ(aco_rt_fallocate(pp[1], 0, 0, 10, -1), -ESPIPE);
    CHECK_EQ(aco_rt_ftruncate(fd, 10, -1), 0);
    CHECK_EQ(aco_rt_statx(fd, "", AT_EMPTY_PATH, STATX_SIZE, &sx, -1), 0);
    CHECK_EQ(sx.stx_size, 10);
    CHECK_EQ(aco_rt_ftruncate(fd, -1, -1), -EINVAL);
    CHECK_EQ(aco_rt_ftruncate(1000000, 0, -1), -EBADF);
    CHECK_EQ(aco_rt_ftruncate(pp[1], 0, -1), BB_SYS(ftruncate(pp[1], 0)));
    CHECK_EQ(aco_rt_ftruncate(dfd, 0, -1), BB_SYS(ftruncate(dfd, 0)));
    {
        int ro = aco_rt_openat(dfd, "f", O_RDONLY | O_CLOEXEC, 0, -1);
        CHECK_GE(ro, 0);
        CHECK_EQ(aco_rt_ftruncate(ro, 0, -1), BB_SYS(ftruncate(ro, 0)));
        CHECK_EQ(aco_rt_fallocate(ro, 0, 0, 10, -1), -EBADF);
        aco_rt_close(ro);
    }
    /* over the largest file size the file system takes */
    CHECK_EQ(aco_rt_ftruncate(fd, INT64_MAX, -1), BB_SYS(ftruncate(fd, INT64_MAX)));
    CHECK_EQ(aco_rt_fallocate(fd, 0, INT64_MAX - 10, 100, -1), -EFBIG);
    close(pp[0]);
    close(pp[1]);

    aco_rt_close(fd);
    aco_rt_close(dfd);
    /* leave the directory as it was */
    unlink(bb_path(p, "f"));
    unlink(bb_path(p, "g"));
    unlink(bb_path(p, "s"));
    unlink(bb_path(p, "dl"));
    unlink(bb_path(p, "l"));
    unlink(bb_path(p, "ls"));
    unlink(bb_path(p, "lf"));
    unlink(bb_path(p, "le"));
    unlink(bb_path(p, "le2"));
    rmdir(bb_path(p, "d"));
}

/* Every call at once: a passed deadline and a cancel start nothing. */
static void nothing_co(void* arg) {
    int64_t dl = *(int64_t*)arg;
    char p[PATH_MAX], q[PATH_MAX];
    int fd = bb_make_file("n", 100, 3);
    int expect = dl == -1 ? -ECANCELED : -ETIMEDOUT;
    if (dl == -1) CHECK_EQ(aco_rt_cancel(aco_rt_self()), 0);
    CHECK_EQ(aco_rt_openat(AT_FDCWD, bb_path(p, "c"), O_RDWR | O_CREAT, 0600, dl), expect);
    CHECK_EQ(access(p, F_OK), -1);
    CHECK_EQ(aco_rt_openat(AT_FDCWD, bb_path(p, "n"), O_RDWR | O_TRUNC, 0600, dl), expect);
    struct open_how how = {.flags = O_RDWR | O_CREAT, .mode = 0600};
    CHECK_EQ(aco_rt_openat2(AT_FDCWD, bb_path(p, "c"), &how, sizeof(how), dl), expect);
    CHECK_EQ(access(p, F_OK), -1);
    CHECK_EQ(aco_rt_mkdirat(AT_FDCWD, bb_path(p, "c"), 0700, dl), expect);
    CHECK_EQ(access(p, F_OK), -1);
    CHECK_EQ(aco_rt_symlinkat("n", AT_FDCWD, bb_path(p, "c"), dl), expect);
    CHECK_EQ(access(p, F_OK), -1);
    CHECK_EQ(aco_rt_linkat(AT_FDCWD, bb_path(q, "n"), AT_FDCWD, bb_path(p, "c"), 0, dl), expect);
    CHECK_EQ(access(p, F_OK), -1);
    CHECK_EQ(aco_rt_renameat(AT_FDCWD, bb_path(q, "n"), AT_FDCWD, bb_path(p, "c"), dl), expect);
    CHECK_EQ(aco_rt_renameat2(AT_FDCWD, bb_path(q, "n"), AT_FDCWD, bb_path(p, "c"), 0, dl), expect);
    CHECK_EQ(access(p, F_OK), -1);
    CHECK_EQ(aco_rt_unlinkat(AT_FDCWD, bb_path(q, "n"), 0, dl), expect);
    CHECK_EQ(access(q, F_OK), 0);
    struct statx sx;
    memset(&sx, 0x5a, sizeof(sx));
    CHECK_EQ(aco_rt_statx(AT_FDCWD, q, 0, STATX_BASIC_STATS, &sx, dl), expect);
    for (size_t i = 0; i < sizeof(sx); i++) CHECK_EQ(((unsigned char*)&sx)[i], 0x5a);
    CHECK_EQ(aco_rt_fsync(fd, dl), expect);
    CHECK_EQ(aco_rt_fdatasync(fd, dl), expect);
    CHECK_EQ(aco_rt_sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE, dl), expect);
    CHECK_EQ(aco_rt_fallocate(fd, 0, 0, 8192, dl), expect);
    CHECK_EQ(aco_rt_ftruncate(fd, 0, dl), expect);
    struct stat st;
    CHECK_EQ(fstat(fd, &st), 0);
    CHECK_EQ(st.st_size, 100);
    /* bad arguments with a passed deadline or a cancel: which one wins is
     * not said; either is an error, nothing done */
    CHECK_LT(aco_rt_openat(AT_FDCWD, NULL, O_RDONLY, 0, dl), 0);
    close(fd);
    unlink(q);
}

static void meta_backend(void) {
    bb_run(NULL, meta_co, NULL);
    int64_t dls[] = {0, -2, INT64_MIN, -1 /* cancel */};
    for (size_t i = 0; i < sizeof(dls) / sizeof(dls[0]); i++) bb_run(NULL, nothing_co, &dls[i]);
}

int main(void) {
    test_watchdog();
    bb_mkdir();
    fill_long();
    umask(022);
    /* -EPERM outside a co (no scheduler at all) */
    char p[PATH_MAX];
    struct statx sx;
    CHECK_EQ(aco_rt_openat(AT_FDCWD, bb_path(p, "x"), O_RDWR | O_CREAT, 0600, -1), -EPERM);
    CHECK_EQ(access(p, F_OK), -1);
    CHECK_EQ(aco_rt_statx(AT_FDCWD, "/", 0, STATX_BASIC_STATS, &sx, -1), -EPERM);
    CHECK_EQ(aco_rt_mkdirat(AT_FDCWD, p, 0700, -1), -EPERM);
    CHECK_EQ(aco_rt_unlinkat(AT_FDCWD, p, 0, -1), -EPERM);
    CHECK_EQ(aco_rt_fsync(1, -1), -EPERM);
    CHECK_EQ(aco_rt_ftruncate(1, 0, -1), -EPERM);
    bb_each_backend(meta_backend);
    /* the helper way for every operation */
    setenv("ACO_RT_URING_OFF", "all", 1);
    setenv("ACO_RT_QUIET", "1", 1);
    bb_each_backend(meta_backend);
    printf("test_file_bb_meta: ok\n");
    return 0;
}
