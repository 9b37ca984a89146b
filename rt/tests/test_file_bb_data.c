/* test_file_bb_data.c - the [data] file calls of aco_rt.h, black box: pread,
 * pwrite, preadv, pwritev on regular files, directories, pipes, /dev/zero,
 * /dev/null and /proc files: counts at and past the end, zero lengths,
 * huge lengths, negative offsets, off -1 (the file position), O_APPEND
 * and RWF_APPEND, NULL buffers and vectors (-EFAULT), bad vectors
 * (-EINVAL), bad descriptors, -EPERM outside a co, a passed deadline and
 * a cancel (nothing moved), heap and share-stack buffers; every result
 * compared with the plain system call's. */
#include "bb_file.h"

#include <sys/uio.h>

#define BIG (1 << 20)

static unsigned char* heap;     /* BIG bytes */

static void check_pattern(const unsigned char* b, size_t off, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++)
        if (b[i] != bb_byte(off + i, seed))
            TEST_FAIL_AT(__FILE__, __LINE__, "byte %zu of a read at %zu: %u, not %u", i, off,
                         b[i], bb_byte(off + i, seed));
}

static void reads_co(void* arg) {
    (void)arg;
    const size_t fsz = 100000;
    int fd = bb_make_file("r", fsz, 5);
    unsigned char st[4096];     /* on the co's (share) stack */
    /* whole, partial, at the end, past the end */
    CHECK_EQ(aco_rt_pread(fd, heap, BIG, 0, -1), (ssize_t)fsz);
    check_pattern(heap, 0, fsz, 5);
    CHECK_EQ(aco_rt_pread(fd, heap, 10, fsz - 3, -1), 3);
    check_pattern(heap, fsz - 3, 3, 5);
    CHECK_EQ(aco_rt_pread(fd, heap, 10, fsz, -1), 0);
    CHECK_EQ(aco_rt_pread(fd, heap, 10, fsz + 12345, -1), 0);
    CHECK_EQ(aco_rt_pread(fd, heap, 10, INT64_MAX, -1), BB_SYS(pread(fd, heap, 10, INT64_MAX)));
    CHECK_EQ(aco_rt_pread(fd, st, sizeof(st), fsz - 100, -1), 100);
    check_pattern(st, fsz - 100, 100, 5);
    CHECK_EQ(aco_rt_pread(fd, st, sizeof(st), 777, -1), (ssize_t)sizeof(st));
    check_pattern(st, 777, sizeof(st), 5);
    /* zero length: 0, even past the end and with NULL */
    CHECK_EQ(aco_rt_pread(fd, heap, 0, 0, -1), 0);
    CHECK_EQ(aco_rt_pread(fd, heap, 0, fsz * 2, -1), 0);
    CHECK_EQ(aco_rt_pread(fd, NULL, 0, 0, -1), BB_SYS(pread(fd, NULL, 0, 0)));
    CHECK_EQ(aco_rt_pread(fd, st, 0, 0, -1), 0);
    /* negative offsets */
    CHECK_EQ(aco_rt_pread(fd, heap, 10, -5, -1), -EINVAL);
    CHECK_EQ(aco_rt_pread(fd, heap, 10, -1, -1), BB_SYS(pread(fd, heap, 10, -1)));
    CHECK_EQ(aco_rt_pread(fd, heap, 10, INT64_MIN, -1), -EINVAL);
    /* NULL buffer with a length: -EFAULT */
    CHECK_EQ(aco_rt_pread(fd, NULL, 10, 0, -1), -EFAULT);
    /* huge lengths with a heap buffer much smaller: memory the call may
     * not write (undefined, as in libc), but no file byte past the end is
     * there to write: the file's bytes, or -EFAULT as pread(2) says
     * (over SSIZE_MAX, implementation-defined in POSIX: -EINVAL too) */
#ifndef ACO_USE_VALGRIND /* (memcheck reports the kernel's view past the block) */
    {
        size_t huge[] = {(size_t)1 << 40, SIZE_MAX, (size_t)SSIZE_MAX + 1, (size_t)1 << 31};
        for (size_t i = 0; i < sizeof(huge) / sizeof(huge[0]); i++) {
            ssize_t r = aco_rt_pread(fd, heap, huge[i], 0, -1);
            if (r != (ssize_t)fsz && r != -EFAULT && !(r == -EINVAL && huge[i] > SSIZE_MAX))
                TEST_FAIL_AT(__FILE__, __LINE__, "pread of %zu bytes: %zd", huge[i], r);
        }
        check_pattern(heap, 0, fsz, 5);
    }
#endif
    /* bad descriptors */
    CHECK_EQ(aco_rt_pread(-1, heap, 10, 0, -1), -EBADF);
    CHECK_EQ(aco_rt_pread(1000000, heap, 10, 0, -1), -EBADF);
    CHECK_EQ(aco_rt_pread(1 << 25, heap, 10, 0, -1), -EBADF);
    {
        int wo = open(bb_path((char[PATH_MAX]){0}, "r"), O_WRONLY | O_CLOEXEC);
        CHECK_GE(wo, 0);
        CHECK_EQ(aco_rt_pread(wo, heap, 10, 0, -1), -EBADF);
        CHECK_EQ(aco_rt_pread(wo, st, 10, 0, -1), -EBADF);
        close(wo);
    }
    /* a directory */
    {
        int d = open(bb_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        CHECK_GE(d, 0);
        CHECK_EQ(aco_rt_pread(d, heap, 10, 0, -1), -EISDIR);
        CHECK_EQ(aco_rt_pread(d, st, 10, 0, -1), -EISDIR);
        CHECK_EQ(aco_rt_pwrite(d, heap, 10, 0, -1), -EBADF);
        struct iovec v = {heap, 10};
        CHECK_EQ(aco_rt_preadv(d, &v, 1, -1, 0, -1), -EISDIR);
        close(d);
    }
    /* preadv: vectors */
    {
        struct iovec v[3] = {{heap, 5}, {st, 7}, {heap + 100, 20000}};
        CHECK_EQ(aco_rt_preadv(fd, v, 3, 10, 0, -1), 20012);
        check_pattern(heap, 10, 5, 5);
        check_pattern(st, 15, 7, 5);
        check_pattern(heap + 100, 22, 20000, 5);
        CHECK_EQ(aco_rt_preadv(fd, v, 0, 0, 0, -1), 0);
        CHECK_EQ(aco_rt_preadv(fd, NULL, 0, 0, 0, -1), BB_SYS(preadv2(fd, NULL, 0, 0, 0)));
        CHECK_EQ(aco_rt_preadv(fd, NULL, 1, 0, 0, -1), -EFAULT);
        CHECK_EQ(aco_rt_preadv(fd, v, -1, 0, 0, -1), -EINVAL);
        CHECK_EQ(aco_rt_preadv(fd, v, IOV_MAX + 1, 0, 0, -1), -EINVAL);
        CHECK_EQ(aco_rt_preadv(fd, v, 3, -2, 0, -1), -EINVAL);
        CHECK_EQ(aco_rt_preadv(fd, v, 3, 0, 0x12340000, -1), -EOPNOTSUPP);
        struct iovec nb[2] = {{NULL, 10}, {heap, 10}};
        CHECK_EQ(aco_rt_preadv(fd, nb, 2, 0, 0, -1), -EFAULT);
        struct iovec z[2] = {{NULL, 0}, {heap, 10}};
        CHECK_EQ(aco_rt_preadv(fd, z, 2, 0, 0, -1), 10);
        /* lengths that overflow ssize_t together: EINVAL, as readv(2) says
         * (the kernel's access check may say EFAULT first) */
        struct iovec ov[2] = {{heap, SSIZE_MAX}, {heap, SSIZE_MAX}};
        {
            ssize_t r = aco_rt_preadv(fd, ov, 2, 0, 0, -1);
            CHECK(r == -EINVAL || r == -EFAULT);
        }
        /* at and past the end */
        struct iovec e[2] = {{heap, 10}, {st, 10}};
        CHECK_EQ(aco_rt_preadv(fd, e, 2, fsz - 15, 0, -1), 15);
        check_pattern(heap, fsz - 15, 10, 5);
        check_pattern(st, fsz - 5, 5, 5);
        CHECK_EQ(aco_rt_preadv(fd, e, 2, fsz + 1, 0, -1), 0);
        /* a vector of IOV_MAX entries */
        static struct iovec many[IOV_MAX];
        for (int i = 0; i < IOV_MAX; i++) many[i] = (struct iovec){heap + i * 10, 10};
        CHECK_EQ(aco_rt_preadv(fd, many, IOV_MAX, 3, 0, -1), IOV_MAX * 10);
        check_pattern(heap, 3, IOV_MAX * 10, 5);
    }
    /* off -1: the file position, used and advanced */
    {
        CHECK_EQ(lseek(fd, 1000, SEEK_SET), 1000);
        struct iovec v = {st, 100};
        CHECK_EQ(aco_rt_preadv(fd, &v, 1, -1, 0, -1), 100);
        check_pattern(st, 1000, 100, 5);
        CHECK_EQ(lseek(fd, 0, SEEK_CUR), 1100);
        v.iov_base = heap;
        CHECK_EQ(aco_rt_preadv(fd, &v, 1, -1, 0, -1), 100);
        check_pattern(heap, 1100, 100, 5);
        CHECK_EQ(lseek(fd, 0, SEEK_CUR), 1200);
        /* a positioned read leaves the position alone */
        CHECK_EQ(aco_rt_pread(fd, heap, 100, 0, -1), 100);
        CHECK_EQ(lseek(fd, 0, SEEK_CUR), 1200);
        CHECK_EQ(lseek(fd, fsz - 1, SEEK_SET), (off_t)fsz - 1);
        v.iov_len = 50;
        CHECK_EQ(aco_rt_preadv(fd, &v, 1, -1, 0, -1), 1);
        CHECK_EQ(aco_rt_preadv(fd, &v, 1, -1, 0, -1), 0);
        CHECK_EQ(lseek(fd, 0, SEEK_CUR), (off_t)fsz);
    }
    /* RWF_NOWAIT asked: a page-cache file is read */
    {
        struct iovec v = {heap, 4096};
        CHECK_EQ(aco_rt_preadv(fd, &v, 1, 0, RWF_NOWAIT, -1), 4096);
        check_pattern(heap, 0, 4096, 5);
    }
    close(fd);
    /* an empty file */
    fd = bb_make_file("e", 0, 0);
    CHECK_EQ(aco_rt_pread(fd, heap, 100, 0, -1), 0);
    CHECK_EQ(aco_rt_pread(fd, st, 100, 0, -1), 0);
    close(fd);
    /* /dev/zero: a huge read fills what is asked (capped by the kernel as
     * read(2) caps it); /dev/null: 0 */
    fd = open("/dev/zero", O_RDONLY | O_CLOEXEC);
    CHECK_GE(fd, 0);
    memset(heap, 1, BIG);
    CHECK_EQ(aco_rt_pread(fd, heap, BIG, 0, -1), BIG);
    for (size_t i = 0; i < BIG; i++) CHECK_EQ(heap[i], 0);
    memset(st, 1, sizeof(st));
    CHECK_EQ(aco_rt_pread(fd, st, sizeof(st), 12345, -1), (ssize_t)sizeof(st));
    for (size_t i = 0; i < sizeof(st); i++) CHECK_EQ(st[i], 0);
    close(fd);
    fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    CHECK_GE(fd, 0);
    CHECK_EQ(aco_rt_pread(fd, heap, 100, 0, -1), 0);
    CHECK_EQ(aco_rt_pwrite(fd, heap, 100, 0, -1), 100);
    CHECK_EQ(aco_rt_pwrite(fd, st, 100, 0, -1), 100);
    close(fd);
    /* a /proc file: what read(2) of it says, in two parts */
    {
        fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
        CHECK_GE(fd, 0);
        size_t total = 0;
        ssize_t n;
        while ((n = aco_rt_pread(fd, heap + total, 1000, (int64_t)total, -1)) > 0) total += n;
        CHECK_EQ(n, 0);
        CHECK_GT(total, 0);
        close(fd);
    }
}

static void writes_co(void* arg) {
    (void)arg;
    char p[PATH_MAX];
    int fd = bb_make_file("w", 0, 0);
    unsigned char st[3000];
    for (size_t i = 0; i < BIG; i++) heap[i] = bb_byte(i, 9);
    CHECK_EQ(aco_rt_pwrite(fd, heap, BIG, 0, -1), BIG);
    for (size_t i = 0; i < sizeof(st); i++) st[i] = bb_byte(i + 5000, 9);
    CHECK_EQ(aco_rt_pwrite(fd, st, sizeof(st), 5000, -1), (ssize_t)sizeof(st));
    CHECK_EQ(pread(fd, heap, BIG, 0), BIG);
    check_pattern(heap, 0, BIG, 9);
    /* zero length: nothing, even past the end */
    CHECK_EQ(aco_rt_pwrite(fd, heap, 0, 10 * BIG, -1), 0);
    CHECK_EQ(aco_rt_pwrite(fd, NULL, 0, 0, -1), BB_SYS(pwrite(fd, NULL, 0, 0)));
    struct stat sb;
    CHECK_EQ(fstat(fd, &sb), 0);
    CHECK_EQ(sb.st_size, BIG);
    /* past the end: a hole */
    CHECK_EQ(aco_rt_pwrite(fd, "xyz", 3, 2 * BIG, -1), 3);
    CHECK_EQ(fstat(fd, &sb), 0);
    CHECK_EQ(sb.st_size, 2 * BIG + 3);
    CHECK_EQ(aco_rt_pread(fd, st, 10, 2 * BIG - 5, -1), 8);
    CHECK_EQ(memcmp(st, "\0\0\0\0\0xyz", 8), 0);
    /* errors */
    CHECK_EQ(aco_rt_pwrite(fd, NULL, 10, 0, -1), -EFAULT);
    CHECK_EQ(aco_rt_pwrite(fd, heap, 10, -7, -1), -EINVAL);
    CHECK_EQ(aco_rt_pwrite(fd, heap, 10, -1, -1), BB_SYS(pwrite(fd, heap, 10, -1)));
    CHECK_EQ(aco_rt_pwrite(-1, heap, 10, 0, -1), -EBADF);
    CHECK_EQ(aco_rt_pwrite(1000000, st, 10, 0, -1), -EBADF);
    CHECK_EQ(aco_rt_pwrite(fd, heap, 10, INT64_MAX - 5, -1),
             BB_SYS(pwrite(fd, heap, 10, INT64_MAX - 5)));
    {
        int ro = open(bb_path(p, "w"), O_RDONLY | O_CLOEXEC);
        CHECK_GE(ro, 0);
        CHECK_EQ(aco_rt_pwrite(ro, heap, 10, 0, -1), -EBADF);
        CHECK_EQ(aco_rt_pwrite(ro, st, 10, 0, -1), -EBADF);
        struct iovec v = {heap, 10};
        CHECK_EQ(aco_rt_pwritev(ro, &v, 1, 0, 0, -1), -EBADF);
        close(ro);
    }
    /* pwritev: vectors, off -1, RWF_APPEND */
    {
        CHECK_EQ(aco_rt_ftruncate(fd, 0, -1), 0);
        struct iovec v[3] = {{"ab", 2}, {st, 0}, {"cdef", 4}};
        CHECK_EQ(aco_rt_pwritev(fd, v, 3, 0, 0, -1), 6);
        CHECK_EQ(lseek(fd, 2, SEEK_SET), 2);
        struct iovec w = {"XY", 2};
        CHECK_EQ(aco_rt_pwritev(fd, &w, 1, -1, 0, -1), 2);
        CHECK_EQ(lseek(fd, 0, SEEK_CUR), 4);
        CHECK_EQ(aco_rt_pwritev(fd, &w, 1, 0, RWF_APPEND, -1), 2);
        char b[16] = {0};
        CHECK_EQ(pread(fd, b, sizeof(b), 0), 8);
        CHECK_EQ(memcmp(b, "abXYefXY", 8), 0);
        CHECK_EQ(aco_rt_pwritev(fd, NULL, 1, 0, 0, -1), -EFAULT);
        CHECK_EQ(aco_rt_pwritev(fd, v, -1, 0, 0, -1), -EINVAL);
        CHECK_EQ(aco_rt_pwritev(fd, v, IOV_MAX + 1, 0, 0, -1), -EINVAL);
        CHECK_EQ(aco_rt_pwritev(fd, v, 0, 0, 0, -1), 0);
        CHECK_EQ(aco_rt_pwritev(fd, v, 3, -3, 0, -1), -EINVAL);
        CHECK_EQ(aco_rt_pwritev(fd, v, 3, 0, 0x12340000, -1), -EOPNOTSUPP);
        struct iovec nb[2] = {{"ab", 2}, {NULL, 10}};
        /* a NULL buffer of a non-zero size anywhere in the vector: refused,
         * nothing done (the header's NULL rule; pwritev2(2) would write
         * the first part) */
        struct iovec nb2[2] = {{"QQ", 2}, {NULL, 10}};
        CHECK_EQ(aco_rt_pwritev(fd, nb2, 2, 0, 0, -1), -EFAULT);
        CHECK_EQ(aco_rt_pwritev(fd, nb, 2, 0, 0, -1), -EFAULT);
        CHECK_EQ(pread(fd, b, sizeof(b), 0), 8);
        CHECK_EQ(memcmp(b, "abXYefXY", 8), 0);
        /* RWF_DSYNC and RWF_SYNC pass */
        CHECK_EQ(aco_rt_pwritev(fd, &w, 1, 0, RWF_DSYNC, -1), 2);
        CHECK_EQ(aco_rt_pwritev(fd, &w, 1, 0, RWF_SYNC, -1), 2);
    }
    close(fd);
    /* O_APPEND: pwrite appends whatever the offset, as pwrite(2) on Linux */
    {
        int a = open(bb_path(p, "w"), O_WRONLY | O_APPEND | O_TRUNC | O_CLOEXEC);
        CHECK_GE(a, 0);
        CHECK_EQ(aco_rt_pwrite(a, "12345", 5, 0, -1), 5);
        CHECK_EQ(aco_rt_pwrite(a, "678", 3, 0, -1), 3);
        CHECK_EQ(aco_rt_pwrite(a, st, 2, 1, -1), 2);
        struct iovec v = {"9", 1};
        CHECK_EQ(aco_rt_pwritev(a, &v, 1, 0, 0, -1), 1);
        CHECK_EQ(aco_rt_pwritev(a, &v, 1, -1, 0, -1), 1);
        char b[16] = {0};
        int r = open(p, O_RDONLY | O_CLOEXEC);
        CHECK_EQ(pread(r, b, sizeof(b), 0), 12);
        CHECK_EQ(memcmp(b, "12345678", 8), 0);
        CHECK_EQ(memcmp(b + 10, "99", 2), 0);
        close(r);
        close(a);
    }
    unlink(p);
}

/* pipes: the readiness way; pread(2) on one says ESPIPE, off -1 reads */
static void pipe_co(void* arg) {
    (void)arg;
    int pp[2];
    CHECK_EQ(pipe2(pp, O_CLOEXEC), 0);
    char st[64];
    CHECK_EQ(write(pp[1], "hello", 5), 5);
    CHECK_EQ(aco_rt_pread(pp[0], st, sizeof(st), 0, -1), BB_SYS(pread(pp[0], st, sizeof(st), 0)));
    struct iovec v = {st, sizeof(st)};
    CHECK_EQ(aco_rt_preadv(pp[0], &v, 1, -1, 0, -1), 5);
    CHECK_EQ(memcmp(st, "hello", 5), 0);
    struct iovec w = {"abc", 3};
    CHECK_EQ(aco_rt_pwritev(pp[1], &w, 1, -1, 0, -1), 3);
    CHECK_EQ(aco_rt_pwrite(pp[1], "abc", 3, 0, -1), BB_SYS(pwrite(pp[1], "abc", 3, 0)));
    CHECK_EQ(aco_rt_preadv(pp[0], &v, 1, -1, 0, -1), 3);
    CHECK_EQ(memcmp(st, "abc", 3), 0);
    /* the end of a pipe: 0 */
    close(pp[1]);
    CHECK_EQ(aco_rt_preadv(pp[0], &v, 1, -1, 0, -1), 0);
    close(pp[0]);
}

static void nothing_co(void* arg) {
    int64_t dl = *(int64_t*)arg;
    int fd = bb_make_file("n", 1000, 2);
    int expect = -ETIMEDOUT;
    if (dl == -1) {
        CHECK_EQ(aco_rt_cancel(aco_rt_self()), 0);
        expect = -ECANCELED;
    }
    char st[100];
    memset(st, 0x77, sizeof(st));
    memset(heap, 0x77, 100);
    CHECK_EQ(aco_rt_pread(fd, st, sizeof(st), 0, dl), expect);
    CHECK_EQ(aco_rt_pread(fd, heap, 100, 0, dl), expect);
    for (int i = 0; i < 100; i++) CHECK_EQ(st[i], 0x77);
    for (int i = 0; i < 100; i++) CHECK_EQ(heap[i], 0x77);
    CHECK_EQ(aco_rt_pwrite(fd, st, sizeof(st), 0, dl), expect);
    CHECK_EQ(aco_rt_pwrite(fd, heap, 100, 2000, dl), expect);
    struct iovec v = {heap, 100};
    CHECK_EQ(aco_rt_preadv(fd, &v, 1, 0, 0, dl), expect);
    CHECK_EQ(aco_rt_pwritev(fd, &v, 1, 0, 0, dl), expect);
    CHECK_EQ(aco_rt_pwritev(fd, &v, 1, -1, 0, dl), expect);
    CHECK_EQ(lseek(fd, 0, SEEK_CUR), 0);
    struct stat sb;
    CHECK_EQ(fstat(fd, &sb), 0);
    CHECK_EQ(sb.st_size, 1000);
    CHECK_EQ(pread(fd, st, sizeof(st), 0), 100);
    check_pattern((unsigned char*)st, 0, 100, 2);
    /* a pipe with bytes waiting: nothing taken */
    int pp[2];
    CHECK_EQ(pipe2(pp, O_CLOEXEC), 0);
    CHECK_EQ(write(pp[1], "data", 4), 4);
    struct iovec r = {st, sizeof(st)};
    CHECK_EQ(aco_rt_preadv(pp[0], &r, 1, -1, 0, dl), expect);
    CHECK_EQ(aco_rt_pwritev(pp[1], &r, 1, -1, 0, dl), expect);
    CHECK_EQ(read(pp[0], st, sizeof(st)), 4);
    close(pp[0]);
    close(pp[1]);
    close(fd);
}

static void data_backend(void) {
    bb_run(NULL, reads_co, NULL);
    bb_run(NULL, writes_co, NULL);
    bb_run(NULL, pipe_co, NULL);
    int64_t dls[] = {0, -2, INT64_MIN, -1 /* cancel */};
    for (size_t i = 0; i < sizeof(dls) / sizeof(dls[0]); i++) bb_run(NULL, nothing_co, &dls[i]);
    /* one share stack for everything: the stack buffers bounce */
    aco_rt_opts_t o = {0};
    o.share_stacks = 1;
    bb_run(&o, reads_co, NULL);
    bb_run(&o, writes_co, NULL);
}

int main(void) {
    test_watchdog();
    bb_mkdir();
    heap = malloc(BIG);
    CHECK(heap != NULL);
    int fd = bb_make_file("o", 10, 1);
    CHECK_EQ(aco_rt_pread(fd, heap, 10, 0, -1), -EPERM);
    CHECK_EQ(aco_rt_pwrite(fd, heap, 10, 0, -1), -EPERM);
    struct iovec v = {heap, 10};
    CHECK_EQ(aco_rt_preadv(fd, &v, 1, 0, 0, -1), -EPERM);
    CHECK_EQ(aco_rt_pwritev(fd, &v, 1, 0, 0, -1), -EPERM);
    close(fd);
    bb_each_backend(data_backend);
    setenv("ACO_RT_URING_OFF", "all", 1);
    setenv("ACO_RT_QUIET", "1", 1);
    bb_each_backend(data_backend);
    free(heap);
    printf("test_file_bb_data: ok\n");
    return 0;
}
