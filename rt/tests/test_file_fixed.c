/* test_file_fixed.c - registered buffers (aco_rt.h, aco_rt_register_buffers
 * and aco_rt_unregister_buffers), taken at the header's word on every
 * backend of $ACO_RT_TEST_BACKENDS:
 *  - -EPERM on a thread without a scheduler; -ENXIO with none registered;
 *  - -EINVAL for each bad set: iov NULL, n 0 and 16385, a NULL or empty
 *    buffer, one above 1 GiB, one that wraps, two that overlap, one on a
 *    share stack; nothing is registered after any of them;
 *  - -EBUSY for a second set; unregistered, a set again;
 *  - transfers (a buffered file and an O_DIRECT one, pread, pwrite, preadv
 *    and pwritev of one iovec) inside a registered buffer move the right
 *    bytes and are counted in file_fixed on io_uring (as many as went to
 *    the ring), never on epoll; one that leaves its buffer, or spans two,
 *    moves the right bytes and is not counted; none after unregistering;
 *  - io_uring pins the bytes (VmPin of /proc/self/status grows by them,
 *    and falls back at unregister and at aco_rt_sched_free of a set
 *    registered outside the scheduler's cos);
 *  - unregistering while a read into the set is in the kernel: a co
 *    waits for it; outside a co (the scheduler stopped with the reader
 *    parked), -EBUSY;
 *  - io_uring's own refusals: unmapped memory -EFAULT, read-only memory
 *    -EFAULT, RLIMIT_MEMLOCK too small for the set -ENOMEM (in a child,
 *    as nobody when run as root: CAP_IPC_LOCK lifts the limit);
 *  - io_uring_register(2) refused by a seccomp filter (EPERM, in a child):
 *    the set is kept, not pinned (0), its transfers move the right bytes
 *    uncounted, and it unregisters (0).
 */
#define _GNU_SOURCE
#include "rt_test.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>

static int checks;
#define PROMISE() (checks++)

static char dir[64];
static int dfd = -1;
static int uring;               /* this round's backend is io_uring */

#define KB 1024
#define BUF_A (64 * KB)
#define BUF_B (16 * KB)

static aco_rt_stats_t stats(void) {
    aco_rt_stats_t st;
    aco_rt_stats(NULL, &st);
    return st;
}

/* kB of VmPin in /proc/self/status, or -1 where the kernel has none */
static long vm_pin_kb(void) {
    FILE* f = fopen("/proc/self/status", "r");
    CHECK(f != NULL);
    char line[256];
    long kb = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmPin: %ld kB", &kb) == 1) break;
    fclose(f);
    return kb;
}

static void fill(unsigned char* b, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) b[i] = (unsigned char)(i * 7 + seed + i / 4096);
}

static int same(const unsigned char* a, const unsigned char* b, size_t n) { return memcmp(a, b, n) == 0; }

static void* no_sched_thread(void* arg) {
    (void)arg;
    static unsigned char b[4096];
    struct iovec v = {b, sizeof b};
    CHECK_EQ(aco_rt_register_buffers(&v, 1), -EPERM);
    CHECK_EQ(aco_rt_unregister_buffers(), -EPERM);
    return NULL;
}

/* Every bad set: -EINVAL, and nothing registered after it. */
static void bad_sets(unsigned char* a) {
    PROMISE();          /* -EINVAL for each bad set, nothing registered */
    struct iovec v[2];
    CHECK_EQ(aco_rt_register_buffers(NULL, 1), -EINVAL);
    v[0] = (struct iovec){a, 4096};
    CHECK_EQ(aco_rt_register_buffers(v, 0), -EINVAL);
    CHECK_EQ(aco_rt_register_buffers(v, 16385), -EINVAL);
    v[0] = (struct iovec){NULL, 4096};
    CHECK_EQ(aco_rt_register_buffers(v, 1), -EINVAL);
    v[0] = (struct iovec){a, 0};
    CHECK_EQ(aco_rt_register_buffers(v, 1), -EINVAL);
    v[0] = (struct iovec){a, (1ul << 30) + 4096};
    CHECK_EQ(aco_rt_register_buffers(v, 1), -EINVAL);
    v[0] = (struct iovec){(void*)(uintptr_t)-4096, 8192};
    CHECK_EQ(aco_rt_register_buffers(v, 1), -EINVAL);
    v[0] = (struct iovec){a, 8192};
    v[1] = (struct iovec){a + 4096, 8192};
    CHECK_EQ(aco_rt_register_buffers(v, 2), -EINVAL);
    unsigned char local[256];
    if (aco_on_share_stack(aco_get_co(), local, sizeof local)) {
        v[0] = (struct iovec){local, sizeof local};
        CHECK_EQ(aco_rt_register_buffers(v, 1), -EINVAL);
        v[0] = (struct iovec){a, 4096};
        v[1] = (struct iovec){local, sizeof local};
        CHECK_EQ(aco_rt_register_buffers(v, 2), -EINVAL);
    }
    CHECK_EQ(aco_rt_unregister_buffers(), -ENXIO);
}

typedef struct {
    int fd;
    int direct;
} file_t;

/* n bytes at off of f through buf (a registered buffer or not): written,
 * read back into rb (a registered buffer or not), compared. */
static void round_trip(file_t* f, unsigned char* wb, unsigned char* rb, size_t n, int64_t off,
                       unsigned seed, int vec) {
    fill(wb, n, seed);
    if (vec) {
        struct iovec v = {wb, n};
        CHECK_EQ(aco_rt_pwritev(f->fd, &v, 1, off, 0, -1), (ssize_t)n);
    } else {
        CHECK_EQ(aco_rt_pwrite(f->fd, wb, n, off, -1), (ssize_t)n);
    }
    memset(rb, 0xee, n);
    if (vec) {
        struct iovec v = {rb, n};
        CHECK_EQ(aco_rt_preadv(f->fd, &v, 1, off, 0, -1), (ssize_t)n);
    } else {
        CHECK_EQ(aco_rt_pread(f->fd, rb, n, off, -1), (ssize_t)n);
    }
    CHECK(same(wb, rb, n));
}

static void co_fixed(void* arg) {
    (void)arg;
    unsigned char* a = aligned_alloc(4096, BUF_A + 4096);     /* registered: [a, a + BUF_A) */
    unsigned char* b = aligned_alloc(4096, BUF_B);            /* registered whole */
    unsigned char* h = aligned_alloc(4096, BUF_A);            /* never registered */
    CHECK(a && b && h);
    memset(a, 0, BUF_A + 4096);
    memset(b, 0, BUF_B);
    memset(h, 0, BUF_A);
    CHECK_EQ(aco_rt_unregister_buffers(), -ENXIO);
    bad_sets(a);

    long pin0 = vm_pin_kb();
    PROMISE();          /* a set registered; a second one -EBUSY */
    struct iovec set[2] = {{b, BUF_B}, {a, BUF_A}};             /* (not in address order) */
    CHECK_EQ(aco_rt_register_buffers(set, 2), 0);
    CHECK_EQ(aco_rt_register_buffers(set, 1), -EBUSY);
    long pin1 = vm_pin_kb();
    if (uring && pin0 >= 0) {
        PROMISE();      /* io_uring pins the bytes */
        CHECK_GE(pin1 - pin0, (BUF_A + BUF_B) / KB);
    }

    file_t fs[2];
    fs[0].fd = aco_rt_openat(dfd, "buffered", O_CREAT | O_RDWR | O_CLOEXEC, 0600, -1);
    fs[0].direct = 0;
    CHECK_GE(fs[0].fd, 0);
    fs[1].fd = aco_rt_openat(dfd, "direct", O_CREAT | O_RDWR | O_CLOEXEC | O_DIRECT, 0600, -1);
    fs[1].direct = 1;
    if (fs[1].fd == -EINVAL) printf("note: O_DIRECT not supported in %s: buffered only\n", dir);
    int nf = fs[1].fd >= 0 ? 2 : 1;
    for (int i = 0; i < nf; i++) {
        file_t* f = &fs[i];
        PROMISE();      /* inside a registered buffer: right bytes, counted on io_uring */
        aco_rt_stats_t s0 = stats();
        round_trip(f, a, a + 32 * KB, 16 * KB, 0, 1, 0);
        round_trip(f, b, a + 4096, 4096, 8192, 2, 1);
        round_trip(f, a + BUF_A - 8192, b + BUF_B - 8192, 8192, 65536, 3, 0);
        aco_rt_stats_t s1 = stats();
        uint64_t ring = s1.file_uring - s0.file_uring, fixed = s1.file_fixed - s0.file_fixed;
        CHECK_LE(fixed, ring);
        if (uring) CHECK_EQ(fixed, ring);
        else CHECK_EQ(fixed, 0u);
        if (f->direct && uring && strcmp(aco_rt_file_way("read"), "uring") == 0 &&
            strcmp(aco_rt_file_way("write"), "uring") == 0)
            CHECK_EQ(fixed, 6u);    /* (O_DIRECT: never RWF_NOWAIT) */

        PROMISE();      /* leaving a buffer, or spanning two: right bytes, not counted */
        s0 = stats();
        round_trip(f, a + BUF_A - 4096, h, 8192, 0, 4, 0);      /* past a's end */
        round_trip(f, h, a + BUF_A - 4096, 8192, 8192, 5, 1);
        round_trip(f, h, h + 16 * KB, 8192, 16384, 6, 0);       /* not registered */
        s1 = stats();
        CHECK_EQ(s1.file_fixed, s0.file_fixed);
    }
    if (b + BUF_B == a || a + BUF_A == b) {
        PROMISE();      /* adjacent buffers: a transfer across both is not fixed */
        unsigned char* lo = b + BUF_B == a ? b : a;
        size_t lo_n = lo == b ? BUF_B : BUF_A;
        aco_rt_stats_t s0 = stats();
        round_trip(&fs[0], lo + lo_n - 4096, h, 8192, 0, 7, 0);
        CHECK_EQ(stats().file_fixed, s0.file_fixed);
    }

    PROMISE();          /* unregistered: pins dropped, no transfer counted, a set again */
    CHECK_EQ(aco_rt_unregister_buffers(), 0);
    CHECK_EQ(aco_rt_unregister_buffers(), -ENXIO);
    if (uring && pin0 >= 0) CHECK_LE(vm_pin_kb(), pin0);
    aco_rt_stats_t s0 = stats();
    for (int i = 0; i < nf; i++) round_trip(&fs[i], a, b, 4096, 0, 8, 0);
    CHECK_EQ(stats().file_fixed, s0.file_fixed);
    CHECK_EQ(aco_rt_register_buffers(set + 1, 1), 0);
    s0 = stats();
    round_trip(&fs[nf - 1], a, a + 4096, 4096, 0, 9, 0);
    if (uring) CHECK_GT(stats().file_fixed, s0.file_fixed);
    CHECK_EQ(aco_rt_unregister_buffers(), 0);

    if (uring) {
        PROMISE();      /* io_uring's refusals: unmapped, read-only */
        unsigned char* m = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        CHECK(m != MAP_FAILED);
        CHECK_EQ(munmap(m, 8192), 0);
        struct iovec v = {m, 8192};
        CHECK_EQ(aco_rt_register_buffers(&v, 1), -EFAULT);
        m = mmap(NULL, 8192, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        CHECK(m != MAP_FAILED);
        v.iov_base = m;
        CHECK_EQ(aco_rt_register_buffers(&v, 1), -EFAULT);
        CHECK_EQ(munmap(m, 8192), 0);
        CHECK_EQ(aco_rt_unregister_buffers(), -ENXIO);
    }
    for (int i = 0; i < nf; i++) CHECK_EQ(aco_rt_close(fs[i].fd), 0);
    CHECK_EQ(unlinkat(dfd, "buffered", 0), 0);
    if (nf == 2) CHECK_EQ(unlinkat(dfd, "direct", 0), 0);
    free(a);
    free(b);
    free(h);
}

static int small_memlock;       /* not root, RLIMIT_MEMLOCK under 1 MiB */

static void body(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    uring = test_backend_id == ACO_RT_BACKEND_URING;
    if (uring && small_memlock) {
        printf("note: RLIMIT_MEMLOCK under 1 MiB: io_uring's round skipped\n");
        return;
    }
    test_go(s, co_fixed, NULL);
}

/* Unregistering while a transfer into the set is in the kernel: a co waits
 * for its end; outside a co, -EBUSY. */
#define BIG (1 << 20)
typedef struct {
    aco_rt_sched_t* s;
    int fd;
    unsigned char* buf;
    int done;
    ssize_t r;
} inflight_t;

static void co_reader(void* arg) {
    inflight_t* t = arg;
    t->r = aco_rt_pread(t->fd, t->buf, BIG, 0, -1);
    t->done = 1;
}
static void co_unregister(void* arg) {
    inflight_t* t = arg;
    CHECK(!t->done);            /* (the reader parked in its read first) */
    CHECK_EQ(aco_rt_unregister_buffers(), 0);
    CHECK(t->done);
    CHECK_EQ(t->r, BIG);
}
static void co_stopper(void* arg) { aco_rt_sched_stop(((inflight_t*)arg)->s); }

static void spawn2(aco_rt_sched_t* s, aco_rt_fn_t a, aco_rt_fn_t b, void* arg) {
    aco_rt_co_t* x = aco_rt_spawn(s, a, arg);
    aco_rt_co_t* y = aco_rt_spawn(s, b, arg);
    CHECK(x && y);
    CHECK_EQ(aco_rt_detach(x), 0);
    CHECK_EQ(aco_rt_detach(y), 0);
}

static void inflight(void) {
    inflight_t t;
    memset(&t, 0, sizeof t);
    int w = openat(dfd, "big", O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0600);
    CHECK_GE(w, 0);
    unsigned char* src = malloc(BIG);
    CHECK(src != NULL);
    fill(src, BIG, 11);
    CHECK_EQ(write(w, src, BIG), BIG);
    CHECK_EQ(close(w), 0);
    t.fd = openat(dfd, "big", O_RDONLY | O_DIRECT | O_CLOEXEC);
    aco_rt_opts_t o;
    memset(&o, 0, sizeof o);
    o.backend = ACO_RT_BACKEND_URING;
    t.s = aco_rt_sched_new(&o);
    t.buf = aligned_alloc(4096, BIG);
    CHECK(t.buf != NULL);
    struct iovec v = {t.buf, BIG};
    if (t.fd >= 0 && t.s && strcmp(aco_rt_file_way("read"), "uring") == 0 &&
        aco_rt_register_buffers(&v, 1) == 0) {
        PROMISE();      /* in a co: unregister waits for the read into the set */
        spawn2(t.s, co_reader, co_unregister, &t);
        test_run(t.s);
        CHECK(t.done);
        CHECK(memcmp(t.buf, src, BIG) == 0);
        PROMISE();      /* outside a co, the read still in flight: -EBUSY */
        CHECK_EQ(aco_rt_register_buffers(&v, 1), 0);
        t.done = 0;
        memset(t.buf, 0, BIG);
        spawn2(t.s, co_reader, co_stopper, &t);
        test_run(t.s);  /* (returns at the stop, the reader parked) */
        CHECK(!t.done);
        CHECK_EQ(aco_rt_unregister_buffers(), -EBUSY);
        test_run(t.s);
        CHECK(t.done);
        CHECK_EQ(t.r, BIG);
        CHECK(memcmp(t.buf, src, BIG) == 0);
        CHECK_EQ(aco_rt_unregister_buffers(), 0);
    } else {
        printf("note: no O_DIRECT or no io_uring read here: unregister with a read in flight not tried\n");
    }
    if (t.s) aco_rt_sched_free(t.s);
    if (t.fd >= 0) CHECK_EQ(close(t.fd), 0);
    CHECK_EQ(unlinkat(dfd, "big", 0), 0);
    free(t.buf);
    free(src);
}

/* On the scheduler's thread outside its cos, and left registered:
 * aco_rt_sched_free lets the pages go (VmPin back where it was). */
static void left_to_free(void) {
    aco_rt_opts_t o;
    memset(&o, 0, sizeof o);
    o.backend = ACO_RT_BACKEND_URING;
    aco_rt_sched_t* s = aco_rt_sched_new(&o);
    if (s == NULL) return;
    PROMISE();          /* registered outside a co; freed with the scheduler */
    long pin0 = vm_pin_kb();
    unsigned char* m = aligned_alloc(4096, BUF_A);
    CHECK(m != NULL);
    memset(m, 0, BUF_A);
    struct iovec v = {m, BUF_A};
    CHECK_EQ(aco_rt_register_buffers(&v, 1), 0);
    if (pin0 >= 0) CHECK_GE(vm_pin_kb() - pin0, BUF_A / KB);
    aco_rt_sched_free(s);
    /* (the kernel tears a ring down on a work queue: soon, not at once) */
    for (int i = 0; pin0 >= 0 && vm_pin_kb() > pin0 && i < 500; i++) usleep(10000);
    if (pin0 >= 0) CHECK_LE(vm_pin_kb(), pin0);
    CHECK_EQ(aco_rt_register_buffers(&v, 1), -EPERM);
    free(m);
}

/* In a child: RLIMIT_MEMLOCK of at most 8 MiB (Debian's default; the
 * ring's own memory counts there too on some kernels), without
 * CAP_IPC_LOCK (as nobody if root), and a set of 16 MiB on io_uring:
 * -ENOMEM.  Exit 3 or 4: the limit or the user could not be set. */
static void memlock_child(void* arg) {
    (void)arg;
    struct rlimit rl;
    if (getrlimit(RLIMIT_MEMLOCK, &rl) != 0) _exit(3);
    if (rl.rlim_max == RLIM_INFINITY || rl.rlim_max > (8u << 20)) rl.rlim_max = 8u << 20;
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_MEMLOCK, &rl) != 0) _exit(3);
    if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(4);    /* (no such ids here) */
    aco_rt_opts_t o;
    memset(&o, 0, sizeof o);
    o.backend = ACO_RT_BACKEND_URING;
    aco_rt_sched_t* s = aco_rt_sched_new(&o);
    if (s == NULL) { fprintf(stderr, "memlock child: aco_rt_sched_new: %s\n", strerror(errno)); _exit(5); }
    void* m = aligned_alloc(4096, 16 << 20);
    if (m == NULL) _exit(6);
    memset(m, 1, 16 << 20);
    struct iovec v = {m, 16 << 20};
    int r = aco_rt_register_buffers(&v, 1);
    aco_rt_sched_free(s);
    if (r != -ENOMEM) fprintf(stderr, "memlock child: aco_rt_register_buffers: %d\n", r);
    _exit(r == -ENOMEM ? 0 : 7);
}

/* A file's round trip through the set (m: BUF_A bytes): 0, or 1. */
static int refused_rc = 1;
static void refused_co(void* arg) {
    unsigned char* m = arg;
    int fd = aco_rt_openat(dfd, "refused", O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600, -1);
    if (fd < 0) return;
    fill(m, 4096, 7);
    memset(m + 8192, 0, 4096);
    if (aco_rt_pwrite(fd, m, 4096, 0, -1) == 4096 && aco_rt_pread(fd, m + 8192, 4096, 0, -1) == 4096 &&
        memcmp(m, m + 8192, 4096) == 0)
        refused_rc = 0;
    aco_rt_close(fd);
    aco_rt_unlinkat(dfd, "refused", 0, -1);
}

/* In a child: a seccomp filter refuses io_uring_register(2) (EPERM) once
 * the ring is made: the set is kept, not pinned.  Exit 3: no filter. */
static void refused_child(void* arg) {
    (void)arg;
    aco_rt_opts_t o;
    memset(&o, 0, sizeof o);
    o.backend = ACO_RT_BACKEND_URING;
    aco_rt_sched_t* s = aco_rt_sched_new(&o);
    if (s == NULL) _exit(5);
    if (test_deny_syscall(__NR_io_uring_register, EPERM) != 0) _exit(3);
    unsigned char* m = aligned_alloc(4096, BUF_A);
    if (m == NULL) _exit(6);
    memset(m, 0, BUF_A);
    long pin0 = vm_pin_kb();
    struct iovec v = {m, BUF_A};
    int r = aco_rt_register_buffers(&v, 1);
    if (r != 0) { fprintf(stderr, "refused child: aco_rt_register_buffers: %d\n", r); _exit(7); }
    if (pin0 >= 0 && vm_pin_kb() > pin0) { fprintf(stderr, "refused child: pinned\n"); _exit(8); }
    aco_rt_co_t* co = aco_rt_spawn(s, refused_co, m);
    if (co == NULL || aco_rt_detach(co) != 0 || aco_rt_sched_run(s) != 0 || refused_rc) _exit(9);
    aco_rt_stats_t st;
    aco_rt_stats(s, &st);
    if (st.file_fixed != 0) { fprintf(stderr, "refused child: counted\n"); _exit(10); }
    r = aco_rt_unregister_buffers();
    if (r != 0) { fprintf(stderr, "refused child: aco_rt_unregister_buffers: %d\n", r); _exit(11); }
    aco_rt_sched_free(s);
    free(m);
    _exit(0);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    snprintf(dir, sizeof dir, "/var/tmp/aco_rt_test_fixed.XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
    dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    CHECK_GE(dfd, 0);

    PROMISE();          /* -EPERM without a scheduler, here and on another thread */
    unsigned char one[4096];
    struct iovec v = {one, sizeof one};
    CHECK_EQ(aco_rt_register_buffers(&v, 1), -EPERM);
    CHECK_EQ(aco_rt_unregister_buffers(), -EPERM);
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, no_sched_thread, NULL), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);

    struct rlimit ml;
    CHECK_EQ(getrlimit(RLIMIT_MEMLOCK, &ml), 0);
    if (geteuid() != 0 && ml.rlim_cur != ml.rlim_max) {     /* (the soft limit up to the hard) */
        ml.rlim_cur = ml.rlim_max;
        (void)setrlimit(RLIMIT_MEMLOCK, &ml);
    }
    small_memlock = geteuid() != 0 && ml.rlim_cur != RLIM_INFINITY && ml.rlim_cur < (1u << 20);
    test_on_backends(NULL, body, NULL);

    int bs[8], n = test_backends(bs, 8), has_uring = 0;
    for (int i = 0; i < n; i++) has_uring |= bs[i] == ACO_RT_BACKEND_URING;
    aco_rt_opts_t o;
    memset(&o, 0, sizeof o);
    o.backend = ACO_RT_BACKEND_URING;
    aco_rt_sched_t* probe = has_uring ? aco_rt_sched_new(&o) : NULL;
    if (probe && small_memlock) aco_rt_sched_free(probe);
    if (probe && !small_memlock) {
        aco_rt_sched_free(probe);
        left_to_free();
        inflight();
        int st = -1;
        CHECK_EQ(test_in_child(memlock_child, NULL, &st), 0);
        if (st == 3 || st == 4) {
            printf("note: RLIMIT_MEMLOCK or the user could not be set (%d): -ENOMEM not tried\n", st);
        } else {
            PROMISE();  /* RLIMIT_MEMLOCK below the set: -ENOMEM */
            CHECK_EQ(st, 0);
        }
        st = -1;
        CHECK_EQ(test_in_child(refused_child, NULL, &st), 0);
        if (st == 3) {
            printf("note: no seccomp filter here: a refused io_uring_register not tried\n");
        } else {
            PROMISE();  /* io_uring_register refused: kept, not pinned */
            CHECK_EQ(st, 0);
        }
    }
    CHECK_EQ(close(dfd), 0);
    CHECK_EQ(rmdir(dir), 0);
    printf("test_file_fixed: %d promises checked\n", checks);
    return 0;
}
