/* test_file_bb_share.c - the share-stack rule for the file calls, black box:
 * 48 cos on one small share stack write, sync, drop from the page cache
 * and read back a file of their own, all at once, with every buffer, iovec
 * array, path and struct statx on their stacks; each co's bytes must be
 * its own (a bounce buffer that lands in another co's frames, or a result
 * written after the co moved off the stack, shows as a wrong byte or a
 * broken co).  aco_rt_stats' file_bounce must count the bounced transfers. */
#include "bb_file.h"

#include <sys/uio.h>
#include <sys/vfs.h>

#define NCO 48
#define ROUNDS (FEW ? 4 : 12)

static int done;

__attribute__((noinline)) static void one_round(int id, int round, int fd) {
    unsigned char w[3000], r1[1500], r2[1500];
    unsigned seed = (unsigned)(id * 31 + round);
    size_t n = 1000 + (size_t)((id * 97 + round * 13) % 2000);
    for (size_t i = 0; i < n; i++) w[i] = bb_byte(i, seed);
    int64_t off = (int64_t)round * 4096;
    CHECK_EQ(aco_rt_pwrite(fd, w, n, off, aco_rt_in_ms(10000)), (ssize_t)n);
    CHECK_EQ(aco_rt_fdatasync(fd, aco_rt_in_ms(10000)), 0);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED); /* the next read waits for the disk */
    memset(r1, 0, sizeof(r1));
    memset(r2, 0, sizeof(r2));
    struct iovec v[2] = {{r1, n / 2}, {r2, n - n / 2}};
    CHECK_EQ(aco_rt_preadv(fd, v, 2, off, 0, aco_rt_in_ms(10000)), (ssize_t)n);
    for (size_t i = 0; i < n / 2; i++) CHECK_EQ(r1[i], bb_byte(i, seed));
    for (size_t i = n / 2; i < n; i++) CHECK_EQ(r2[i - n / 2], bb_byte(i, seed));
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    memset(w, 0, n);
    CHECK_EQ(aco_rt_pread(fd, w, n, off, aco_rt_in_ms(10000)), (ssize_t)n);
    for (size_t i = 0; i < n; i++) CHECK_EQ(w[i], bb_byte(i, seed));
    /* a path and a statx on the stack */
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/s%d.%d", bb_dir, (int)getpid(), id);
    struct statx sx;
    memset(&sx, 0, sizeof(sx));
    CHECK_EQ(aco_rt_statx(AT_FDCWD, p, 0, STATX_SIZE | STATX_INO, &sx, aco_rt_in_ms(10000)), 0);
    CHECK_GE(sx.stx_size, (uint64_t)(off + (int64_t)n));
    struct stat st;
    CHECK_EQ(fstat(fd, &st), 0);
    CHECK_EQ(sx.stx_ino, st.st_ino);
}

static int fake_stack;          /* ASan's: the buffers were not on the share stack */

static void worker(void* arg) {
    int id = (int)(intptr_t)arg;
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/s%d.%d", bb_dir, (int)getpid(), id);
    if (!bb_on_share(p)) fake_stack = 1;
    int fd = aco_rt_openat(AT_FDCWD, p, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600,
                           aco_rt_in_ms(10000));
    CHECK_GE(fd, 0);
    for (int round = 0; round < ROUNDS; round++) one_round(id, round, fd);
    CHECK_EQ(aco_rt_close(fd), 0);
    CHECK_EQ(aco_rt_unlinkat(AT_FDCWD, p, 0, aco_rt_in_ms(10000)), 0);
    done++;
}

static void share_backend(void) {
    aco_rt_opts_t o = {0};
    o.share_stacks = 1;
    o.stack_size = 64 * 1024;
    aco_rt_sched_t* s = test_sched_on(test_backend_id, &o);
    done = 0;
    for (int i = 0; i < NCO; i++) {
        aco_rt_co_t* c = aco_rt_spawn(s, worker, (void*)(intptr_t)i);
        CHECK(c != NULL);
        CHECK_EQ(aco_rt_detach(c), 0);
    }
    test_run(s);
    CHECK_EQ(done, NCO);
    aco_rt_stats_t st;
    aco_rt_stats(s, &st);
    /* ext4's buffered writes never take RWF_NOWAIT: each pwrite parked and
     * bounced (tmpfs and others may serve them on the thread) */
    if (getenv("BB_VERBOSE"))
        fprintf(stderr, "[%s] bounce %llu uring %llu helper %llu nowait %llu\n", test_backend_label,
                (unsigned long long)st.file_bounce, (unsigned long long)st.file_uring,
                (unsigned long long)st.file_helper, (unsigned long long)st.file_nowait);
    CHECK_LE(st.file_bounce, st.file_uring + st.file_helper);
    struct statfs fs;
    if (!fake_stack && statfs(bb_dir, &fs) == 0 && fs.f_type == 0xEF53 /* ext4 */)
        CHECK_GE(st.file_bounce, (uint64_t)NCO * ROUNDS);
    aco_rt_sched_free(s);
}

int main(void) {
    test_watchdog();
    bb_mkdir();
    bb_apart(share_backend);
    printf("test_file_bb_share: ok\n");
    return 0;
}
