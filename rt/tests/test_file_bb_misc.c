/* test_file_bb_misc.c - the rest of the Files section, black box:
 * aco_rt_file_way (every listed name, unknown names, NULL), registered
 * buffers' -EINVAL / -EBUSY / -ENXIO / -EPERM, splice / tee / sendfile
 * (flags, offsets advanced only by what moved, a reader gone: -EPIPE, no
 * SIGPIPE; deadlines on an empty pipe), O_DIRECT through a misaligned
 * share-stack buffer, and cos reading one descriptor at its file position
 * at once (each read one contiguous range, together the file once). */
#include "bb_file.h"

#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/uio.h>

static const char* names[] = {"read", "write", "fsync", "sync_file_range", "fallocate",
                              "ftruncate", "openat", "openat2", "statx", "unlinkat",
                              "renameat", "mkdirat", "symlinkat", "linkat", "splice",
                              "tee", "sendfile", "sendmsg", "recvmsg", "shutdown"};

static void check_ways(void) {
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        const char* w = aco_rt_file_way(names[i]);
        CHECK(w != NULL);
        CHECK(strcmp(w, "uring") == 0 || strcmp(w, "helper") == 0 || strcmp(w, "thread") == 0);
    }
    CHECK(aco_rt_file_way("nope") == NULL);
    CHECK(aco_rt_file_way("") == NULL);
    CHECK(aco_rt_file_way("READ") == NULL);
    CHECK(aco_rt_file_way("pread") == NULL);
    CHECK(strcmp(aco_rt_file_way("shutdown"), "thread") == 0);
    CHECK(strcmp(aco_rt_file_way("sendfile"), "uring") != 0);
}

static void ways_co(void* arg) {
    (void)arg;
    check_ways();
    const char* w = aco_rt_file_way("statx");
    CHECK_EQ(strcmp(w, test_backend_id == ACO_RT_BACKEND_EPOLL || getenv("ACO_RT_URING_OFF")
                           ? "helper" : "uring"), 0);
}

/* ---------------- registered buffers ---------------- */

static void reg_stack_co(void* arg) {
    (void)arg;
    char st[4096] = {0};
    struct iovec v = {st, sizeof(st)};
    if (!bb_on_share(st)) return;       /* (ASan's fake stack) */
    CHECK_EQ(aco_rt_register_buffers(&v, 1), -EINVAL);
}
static void reg_co(void* arg) {
    (void)arg;
    static char a[8192] __attribute__((aligned(4096))), b[8192] __attribute__((aligned(4096)));
    struct iovec v[2] = {{a, sizeof(a)}, {b, sizeof(b)}};
    CHECK_EQ(aco_rt_unregister_buffers(), -ENXIO);
    CHECK_EQ(aco_rt_register_buffers(NULL, 1), -EINVAL);
    CHECK_EQ(aco_rt_register_buffers(v, 0), -EINVAL);
    CHECK_EQ(aco_rt_register_buffers(v, 16385), -EINVAL);
    struct iovec bad[2] = {{NULL, 10}, {b, 10}};
    CHECK_EQ(aco_rt_register_buffers(bad, 2), -EINVAL);
    struct iovec empty[1] = {{a, 0}};
    CHECK_EQ(aco_rt_register_buffers(empty, 1), -EINVAL);
    struct iovec huge[1] = {{a, (1ul << 30) + 1}};
    CHECK_EQ(aco_rt_register_buffers(huge, 1), -EINVAL);
    struct iovec wrap[1] = {{(void*)(UINTPTR_MAX - 4095), 8192}};
    CHECK_EQ(aco_rt_register_buffers(wrap, 1), -EINVAL);
    struct iovec over[2] = {{a, 8192}, {a + 4096, 4096}};
    CHECK_EQ(aco_rt_register_buffers(over, 2), -EINVAL);
    struct iovec over2[3] = {{b, 100}, {a, 8192}, {a + 8191, 1}};
    CHECK_EQ(aco_rt_register_buffers(over2, 3), -EINVAL);
    struct iovec same[2] = {{a, 100}, {a, 100}};
    CHECK_EQ(aco_rt_register_buffers(same, 2), -EINVAL);
    aco_rt_co_t* c = aco_rt_spawn(NULL, reg_stack_co, NULL);
    CHECK_EQ(aco_rt_join(c, -1), 0);
    /* nothing registered by the refusals */
    CHECK_EQ(aco_rt_unregister_buffers(), -ENXIO);
    /* adjacent buffers do not overlap */
    struct iovec adj[2] = {{a, 4096}, {a + 4096, 4096}};
    CHECK_EQ(aco_rt_register_buffers(adj, 2), 0);
    CHECK_EQ(aco_rt_register_buffers(v, 2), -EBUSY);
    /* a transfer inside a registered buffer */
    int fd = bb_make_file("reg", 8192, 4);
    CHECK_EQ(aco_rt_pread(fd, a + 100, 1000, 10, -1), 1000);
    for (int i = 0; i < 1000; i++) CHECK_EQ((unsigned char)a[100 + i], bb_byte(10 + i, 4));
    /* one across the two: as any other */
    CHECK_EQ(aco_rt_pread(fd, a + 4000, 1000, 0, -1), 1000);
    for (int i = 0; i < 1000; i++) CHECK_EQ((unsigned char)a[4000 + i], bb_byte(i, 4));
    close(fd);
    CHECK_EQ(aco_rt_unregister_buffers(), 0);
    CHECK_EQ(aco_rt_unregister_buffers(), -ENXIO);
    CHECK_EQ(aco_rt_register_buffers(v, 2), 0);
    CHECK_EQ(aco_rt_unregister_buffers(), 0);
}

/* ---------------- splice, tee, sendfile ---------------- */

static void splice_co(void* arg) {
    (void)arg;
    int fd = bb_make_file("sp", 10000, 6);
    int p[2], q[2];
    CHECK_EQ(pipe2(p, O_CLOEXEC), 0);
    CHECK_EQ(pipe2(q, O_CLOEXEC), 0);
    int64_t off = 100;
    CHECK_EQ(aco_rt_splice(fd, &off, p[1], NULL, 1000, SPLICE_F_NONBLOCK, -1), -EINVAL);
    CHECK_EQ(off, 100);
    CHECK_EQ(aco_rt_splice(fd, &off, fd, NULL, 1000, 0, -1), -EINVAL);
    CHECK_EQ(aco_rt_splice(fd, &off, p[1], NULL, 0, 0, -1), 0);
    CHECK_EQ(off, 100);
    CHECK_EQ(aco_rt_splice(fd, &off, p[1], &off, 10, 0, -1), -ESPIPE);
    CHECK_EQ(aco_rt_splice(-1, &off, p[1], NULL, 10, 0, -1), -EBADF);
    int64_t neg = -5;
    CHECK_EQ(aco_rt_splice(fd, &neg, p[1], NULL, 10, 0, -1), -EINVAL);
    CHECK_EQ(neg, -5);
    CHECK_EQ(aco_rt_splice(fd, &off, p[1], NULL, 1000, 0, -1), 1000);
    CHECK_EQ(off, 1100);
    /* past the end: 0, the offset stays */
    int64_t end = 20000;
    CHECK_EQ(aco_rt_splice(fd, &end, p[1], NULL, 1000, 0, -1), 0);
    CHECK_EQ(end, 20000);
    /* tee, then splice on to a file */
    CHECK_EQ(aco_rt_tee(p[0], q[1], 5000, 0, -1), 1000);
    CHECK_EQ(aco_rt_tee(p[0], q[1], 10, SPLICE_F_NONBLOCK, -1), -EINVAL);
    CHECK_EQ(aco_rt_tee(fd, q[1], 10, 0, -1), -EINVAL);
    unsigned char b[2000];
    CHECK_EQ(read(q[0], b, sizeof(b)), 1000);
    for (int i = 0; i < 1000; i++) CHECK_EQ(b[i], bb_byte(100 + i, 6));
    int out = bb_make_file("sp2", 0, 0);
    int64_t ooff = 5;
    CHECK_EQ(aco_rt_splice(p[0], NULL, out, &ooff, 5000, 0, -1), 1000);
    CHECK_EQ(ooff, 1005);
    CHECK_EQ(pread(out, b, sizeof(b), 5), 1000);
    for (int i = 0; i < 1000; i++) CHECK_EQ(b[i], bb_byte(100 + i, 6));
    /* an empty pipe: the deadline, nothing moved, the offset kept */
    int64_t t0 = aco_rt_now();
    ooff = 0;
    CHECK_EQ(aco_rt_splice(p[0], NULL, out, &ooff, 10, 0, t0 + 100 * MS), -ETIMEDOUT);
    CHECK_GE(aco_rt_now() - t0, 100 * MS);
    CHECK_EQ(ooff, 0);
    CHECK_EQ(aco_rt_tee(p[0], q[1], 10, 0, aco_rt_in_ms(100)), -ETIMEDOUT);
    /* the reader gone: -EPIPE, no SIGPIPE */
    close(q[0]);
    CHECK_EQ(aco_rt_splice(fd, &off, q[1], NULL, 10, 0, -1), -EPIPE);
    CHECK_EQ(off, 1100);
    CHECK_EQ(write(p[1], "abc", 3), 3);
    CHECK_EQ(aco_rt_tee(p[0], q[1], 3, 0, -1), -EPIPE);
    int64_t so = 0;
    CHECK_EQ(aco_rt_sendfile(q[1], fd, &so, 100, -1), -EPIPE);
    CHECK_EQ(so, 0);
    close(q[1]);
    /* sendfile: offsets, NULL (the position), 0 bytes, past the end, a pipe in */
    CHECK_EQ(pipe2(q, O_CLOEXEC), 0);
    so = 9990;
    CHECK_EQ(aco_rt_sendfile(q[1], fd, &so, 100, -1), 10);
    CHECK_EQ(so, 10000);
    CHECK_EQ(aco_rt_sendfile(q[1], fd, &so, 100, -1), 0);
    CHECK_EQ(aco_rt_sendfile(q[1], fd, &so, 0, -1), 0);
    CHECK_EQ(lseek(fd, 50, SEEK_SET), 50);
    CHECK_EQ(aco_rt_sendfile(q[1], fd, NULL, 20, -1), 20);
    CHECK_EQ(lseek(fd, 0, SEEK_CUR), 70);
    CHECK_EQ(read(q[0], b, sizeof(b)), 30);
    for (int i = 0; i < 10; i++) CHECK_EQ(b[i], bb_byte(9990 + i, 6));
    for (int i = 0; i < 20; i++) CHECK_EQ(b[10 + i], bb_byte(50 + i, 6));
    so = 0;
    {   /* a pipe in, at an offset: the kernel's -ESPIPE (or -EINVAL: not a file) */
        ssize_t r = aco_rt_sendfile(q[1], p[0], &so, 10, -1);
        CHECK(r == -ESPIPE || r == -EINVAL);
        CHECK_EQ(so, 0);
    }
    so = -1;
    CHECK_EQ(aco_rt_sendfile(q[1], fd, &so, 10, -1), -EINVAL);
    CHECK_EQ(aco_rt_sendfile(q[1], -1, NULL, 10, -1), -EBADF);
    close(q[0]);
    close(q[1]);
    close(p[0]);
    close(p[1]);
    close(fd);
    close(out);
}

/* ---------------- O_DIRECT through a share-stack buffer ---------------- */

__attribute__((noinline)) static void direct_frame(int fd) {
    unsigned char st[4096 + 8192];
    unsigned char* mis = st + ((uintptr_t)st % 4096 == 3 ? 0 : 3); /* not aligned */
    if (((uintptr_t)mis & 511) == 0) mis++;
    memset(mis, 0, 8192);
    if (!bb_on_share(mis)) return;      /* (ASan's fake stack: no bounce) */
    CHECK_EQ(aco_rt_pread(fd, mis, 8192, 4096, aco_rt_in_ms(5000)), 8192);
    for (int i = 0; i < 8192; i++) CHECK_EQ(mis[i], bb_byte(4096 + i, 8));
    struct iovec v[2] = {{mis, 4096}, {mis + 4096, 4096}};
    memset(mis, 0, 8192);
    CHECK_EQ(aco_rt_preadv(fd, v, 2, 0, 0, aco_rt_in_ms(5000)), 8192);
    for (int i = 0; i < 8192; i++) CHECK_EQ(mis[i], bb_byte(i, 8));
    /* a length the file system cannot take: the kernel's -EINVAL */
    CHECK_EQ(aco_rt_pread(fd, mis, 1000, 0, aco_rt_in_ms(5000)), -EINVAL);
    /* the end of the file: short */
    CHECK_EQ(aco_rt_pread(fd, mis, 8192, 16384 - 4096, aco_rt_in_ms(5000)), 4096);
}
static void direct_co(void* arg) {
    (void)arg;
    char p[PATH_MAX];
    int w = bb_make_file("direct", 16384, 8);
    close(w);
    int fd = open(bb_path(p, "direct"), O_RDONLY | O_DIRECT | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "test_file_bb_misc: no O_DIRECT here (%s): skipped\n", strerror(errno));
        return;
    }
    static unsigned char* heapb;
    if (!heapb) heapb = aligned_alloc(4096, 16384);
    CHECK_EQ(aco_rt_pread(fd, heapb + 1, 4096, 0, aco_rt_in_ms(5000)), -EINVAL);
    CHECK_EQ(aco_rt_pread(fd, heapb, 4096, 0, aco_rt_in_ms(5000)), 4096);
    direct_frame(fd);
    close(fd);
}

/* ---------------- the file position, shared ---------------- */

#define POS_FILE (2 << 20)
#define POS_COS 6
static int pos_fd;
static unsigned char* seen;     /* one per 8 bytes of the file */
static void pos_reader(void* arg) {
    (void)arg;
    uint64_t* buf = malloc(96 * 1024 + 8);
    for (;;) {
        struct iovec v = {buf, 96 * 1024};
        ssize_t r = aco_rt_preadv(pos_fd, &v, 1, -1, 0, aco_rt_in_ms(5000));
        CHECK_GE(r, 0);
        if (r == 0) break;
        CHECK_EQ(r % 8, 0);
        /* one contiguous range: stamps k, k+1, ... */
        uint64_t first = buf[0];
        for (ssize_t i = 0; i < r / 8; i++) {
            if (buf[i] != first + (uint64_t)i)
                TEST_FAIL_AT(__FILE__, __LINE__, "read of %zd bytes from stamp %llu: word %zd is %llu",
                             r, (unsigned long long)first, i, (unsigned long long)buf[i]);
            CHECK_LT(buf[i], POS_FILE / 8);
            CHECK_EQ(seen[buf[i]], 0);
            seen[buf[i]] = 1;
        }
    }
    free(buf);
}
static void pos_co(void* arg) {
    (void)arg;
    char p[PATH_MAX];
    int w = open(bb_path(p, "pos"), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    uint64_t* stamps = malloc(POS_FILE);
    for (size_t i = 0; i < POS_FILE / 8; i++) stamps[i] = i;
    CHECK_EQ(write(w, stamps, POS_FILE), POS_FILE);
    CHECK_EQ(fdatasync(w), 0);
    free(stamps);
    /* every other 64 KiB out of the page cache: reads served in part */
    for (off_t o = 0; o < POS_FILE; o += 128 * 1024) posix_fadvise(w, o, 64 * 1024, POSIX_FADV_DONTNEED);
    close(w);
    pos_fd = open(p, O_RDONLY | O_CLOEXEC);
    seen = calloc(POS_FILE / 8, 1);
    aco_rt_co_t* c[POS_COS];
    for (int i = 0; i < POS_COS; i++) c[i] = aco_rt_spawn(NULL, pos_reader, NULL);
    for (int i = 0; i < POS_COS; i++) CHECK_EQ(aco_rt_join(c[i], -1), 0);
    for (size_t i = 0; i < POS_FILE / 8; i++) CHECK_EQ(seen[i], 1);
    CHECK_EQ(lseek(pos_fd, 0, SEEK_CUR), POS_FILE);
    free(seen);
    close(pos_fd);
    unlink(p);
}

static void misc_backend(void) {
    bb_run(NULL, ways_co, NULL);
    bb_run(NULL, reg_co, NULL);
    bb_run(NULL, splice_co, NULL);
    aco_rt_opts_t o = {0};
    o.share_stacks = 1;
    bb_run(&o, direct_co, NULL);
    for (int i = 0; i < 3; i++) bb_run(NULL, pos_co, NULL);
}

int main(void) {
    test_watchdog();
    signal(SIGPIPE, SIG_DFL);
    bb_mkdir();
    /* outside a scheduler: what a new epoll scheduler would do */
    check_ways();
    CHECK_EQ(strcmp(aco_rt_file_way("statx"), "helper"), 0);
    struct iovec v = {bb_dir, 10};
    CHECK_EQ(aco_rt_register_buffers(&v, 1), -EPERM);
    CHECK_EQ(aco_rt_unregister_buffers(), -EPERM);
    bb_apart(misc_backend);
    printf("test_file_bb_misc: ok\n");
    return 0;
}
