/* aco_file_bench - the runtime's file calls (aco_rt.h, "Files, directories,
 * and the rest of the Linux calls") under load, and a thread-pool peer;
 * bench/bench_file.sh runs it beside fio and cp.
 *
 *   aco_file_bench randread --direct|--cached --file F --depth N --secs S
 *                  [--backend uring|epoll] [--helpers H] [--no-fixed]
 *       N cos on one scheduler (aco_rt_sched_new, opts.backend; default
 *       uring), each with a 4096-aligned 4 KiB buffer of its own (the N
 *       in one block, registered with aco_rt_register_buffers unless
 *       --no-fixed: fio's --fixedbufs), each
 *       doing aco_rt_pread of 4 KiB at uniformly random 4 KiB-aligned
 *       offsets of F (opened O_RDONLY, | O_DIRECT for --direct) in a loop
 *       of S seconds (each co reads the clock every 16 reads).  --helpers
 *       H: the helper pool's bound (aco_rt_offload_limits; default the
 *       runtime's, 8), for the epoll backend, whose reads go to helper
 *       threads.
 *   aco_file_bench threads --direct|--cached --file F --depth N --secs S [--nowait]
 *       the peer: N pthreads each doing pread(2) in the same loop, on one
 *       descriptor (as fio's one job has one), until the main thread, asleep
 *       for S seconds, says stop.  --nowait: preadv2(2) with RWF_NOWAIT
 *       instead (pread(2) after an EAGAIN): the floor of aco_rt_pread on a
 *       file in the page cache, which tries exactly that first.
 *   aco_file_bench copy SRC DST [--chunk BYTES] [--backend uring|epoll]
 *       SRC copied to DST (created or truncated) in one co: aco_rt_splice
 *       from SRC into a pipe (its size set to the chunk, default 256 KiB:
 *       the fastest here, see bench_file.sh; at most pipe-max-size, 1 MiB
 *       by default, for a process without CAP_SYS_RESOURCE) and from the
 *       pipe to DST, chunk by chunk; no fsync (cp makes none either).
 *
 * Each prints `<metric> <value>` lines: ios, secs, iops, cpu_s (utime +
 * stime of the whole process over the run, getrusage RUSAGE_SELF: every
 * thread, helper threads and io_uring's iou-wrk workers too), utime_s,
 * stime_s, cpu_ns_per_io, iops_per_cpu_s (randread, threads); bytes,
 * secs, cpu_s, mib_per_s (copy); then, for the runtime's modes, `way
 * read=...` (aco_rt_file_way) and `stats k=v ...` (aco_rt_stats: the file_*
 * counters and polls, switches).  Any failed call (a negative result, a
 * short read) ends the run with status 1.  Pin it (taskset) for stable
 * figures.
 */
#define _GNU_SOURCE
#include "aco_rt.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define BS 4096

static const char* prog = "aco_file_bench";

static _Noreturn void die(const char* what, int err) {
    fprintf(stderr, "%s: %s: %s\n", prog, what, strerror(err));
    exit(1);
}

static _Noreturn void usage(void) {
    fprintf(stderr,
            "usage: %s randread --direct|--cached --file F --depth N --secs S "
            "[--backend uring|epoll] [--helpers H] [--no-fixed]\n"
            "       %s threads --direct|--cached --file F --depth N --secs S\n"
            "       %s copy SRC DST [--chunk BYTES] [--backend uring|epoll]\n",
            prog, prog, prog);
    exit(2);
}

static double ts_s(struct timeval tv) { return (double)tv.tv_sec + (double)tv.tv_usec / 1e6; }

static int64_t mono_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* The process's CPU over a run: every thread's, live or ended. */
typedef struct { double user, sys; } cpu_t;
static cpu_t cpu_now(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (cpu_t){ts_s(ru.ru_utime), ts_s(ru.ru_stime)};
}

static void print_io_figures(uint64_t ios, int64_t ns, cpu_t c0, cpu_t c1) {
    double secs = (double)ns / 1e9, u = c1.user - c0.user, s = c1.sys - c0.sys, cpu = u + s;
    printf("ios %llu\n", (unsigned long long)ios);
    printf("secs %.6f\n", secs);
    printf("iops %.1f\n", secs > 0 ? (double)ios / secs : 0.0);
    printf("cpu_s %.6f\n", cpu);
    printf("utime_s %.6f\n", u);
    printf("stime_s %.6f\n", s);
    printf("cpu_ns_per_io %.1f\n", ios ? cpu * 1e9 / (double)ios : 0.0);
    printf("iops_per_cpu_s %.1f\n", cpu > 0 ? (double)ios / cpu : 0.0);
}

static void print_stats(aco_rt_sched_t* s) {
    aco_rt_stats_t st;
    aco_rt_stats(s, &st);
    printf("stats file_nowait=%llu file_uring=%llu file_helper=%llu file_bounce=%llu "
           "file_fixed=%llu polls=%llu switches=%llu handoffs=%llu\n",
           (unsigned long long)st.file_nowait, (unsigned long long)st.file_uring,
           (unsigned long long)st.file_helper, (unsigned long long)st.file_bounce,
           (unsigned long long)st.file_fixed,
           (unsigned long long)st.polls, (unsigned long long)st.switches,
           (unsigned long long)st.handoffs);
}

/* ---- options ---------------------------------------------------------------- */
static int opt_direct = -1, opt_depth = 0, opt_helpers = 0, opt_nowait = 0, opt_fixed = 1;
static double opt_secs = 0;
static const char* opt_file;
static int opt_backend = ACO_RT_BACKEND_URING;
static size_t opt_chunk = 256 << 10;

static long num_arg(const char* name, const char* v, long lo, long hi) {
    char* end;
    errno = 0;
    long n = strtol(v, &end, 0);
    if (errno || *end || n < lo || n > hi) {
        fprintf(stderr, "%s: %s wants a number from %ld to %ld, not '%s'\n", prog, name, lo, hi, v);
        exit(2);
    }
    return n;
}

/* Options from argv[i] on; positional arguments into pos (at most npos). */
static void parse(int argc, char** argv, int i, const char** pos, int npos) {
    int np = 0;
    for (; i < argc; i++) {
        const char* a = argv[i];
        const char* v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--direct") == 0) opt_direct = 1;
        else if (strcmp(a, "--nowait") == 0) opt_nowait = 1;
        else if (strcmp(a, "--no-fixed") == 0) opt_fixed = 0;
        else if (strcmp(a, "--cached") == 0) opt_direct = 0;
        else if (strcmp(a, "--file") == 0 && v) opt_file = v, i++;
        else if (strcmp(a, "--depth") == 0 && v) opt_depth = (int)num_arg(a, v, 1, 4096), i++;
        else if (strcmp(a, "--helpers") == 0 && v) opt_helpers = (int)num_arg(a, v, 1, 1024), i++;
        else if (strcmp(a, "--chunk") == 0 && v) opt_chunk = (size_t)num_arg(a, v, BS, 1L << 30), i++;
        else if (strcmp(a, "--secs") == 0 && v) {
            char* end;
            opt_secs = strtod(v, &end);
            if (*end || !(opt_secs > 0 && opt_secs < 1e6)) usage();
            i++;
        } else if (strcmp(a, "--backend") == 0 && v) {
            if (strcmp(v, "uring") == 0) opt_backend = ACO_RT_BACKEND_URING;
            else if (strcmp(v, "epoll") == 0) opt_backend = ACO_RT_BACKEND_EPOLL;
            else usage();
            i++;
        } else if (a[0] != '-' && np < npos) pos[np++] = a;
        else usage();
    }
    if (np != npos) usage();
}

/* The file to read, and its number of 4 KiB blocks. */
static int read_fd = -1;
static uint64_t nblocks;

static void open_read_file(void) {
    if (!opt_file || opt_direct < 0 || opt_depth <= 0 || opt_secs <= 0) usage();
    read_fd = open(opt_file, O_RDONLY | O_CLOEXEC | (opt_direct ? O_DIRECT : 0));
    if (read_fd < 0) die(opt_file, errno);
    struct stat st;
    if (fstat(read_fd, &st) < 0) die(opt_file, errno);
    nblocks = (uint64_t)st.st_size / BS;
    if (nblocks == 0) {
        fprintf(stderr, "%s: %s is smaller than %d bytes\n", prog, opt_file, BS);
        exit(1);
    }
}

/* Uniformly random block numbers: xorshift64* per reader, seeded apart. */
static uint64_t rand_next(uint64_t* s) {
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}
static int64_t rand_off(uint64_t* s) {
    /* the top 53 bits scaled: no modulo bias worth the name for any file */
    double u = (double)(rand_next(s) >> 11) / 9007199254740992.0;
    uint64_t b = (uint64_t)(u * (double)nblocks);
    if (b >= nblocks) b = nblocks - 1;
    return (int64_t)(b * BS);
}
static uint64_t seed_of(int i) {
    uint64_t z = 0x9E3779B97F4A7C15ULL * (uint64_t)(i + 1) + (uint64_t)mono_ns();
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    return z ? z : 1;
}

static void* aligned_buf(size_t n) {
    void* p = NULL;
    int e = posix_memalign(&p, BS, n);
    if (e) die("posix_memalign", e);
    memset(p, 0, n);
    return p;
}

static _Noreturn void read_failed(ssize_t r, int64_t off) {
    if (r < 0) {
        char what[64];
        snprintf(what, sizeof(what), "read at %lld", (long long)off);
        die(what, (int)-r);
    }
    fprintf(stderr, "%s: read at %lld: %zd bytes, not %d\n", prog, (long long)off, r, BS);
    exit(1);
}

/* ---- randread: N cos on one scheduler ---------------------------------------- */
/* Each co reads the clock every CHECK_EVERY reads and stops at the deadline:
 * a read served from the page cache (RWF_NOWAIT on the calling thread) never
 * parks, so a co asleep until the end would never get to run. */
#define CHECK_EVERY 16
static int64_t run_deadline;
static uint64_t co_ios_total;
static const char* read_way;

typedef struct { int id; void* buf; uint64_t ios; } reader_t;

static void reader_co(void* arg) {
    reader_t* r = arg;
    uint64_t seed = seed_of(r->id);
    if (r->id == 0) read_way = aco_rt_file_way("read");
    for (;;) {
        for (int k = 0; k < CHECK_EVERY; k++) {
            int64_t off = rand_off(&seed);
            ssize_t n = aco_rt_pread(read_fd, r->buf, BS, off, -1);
            if (n != BS) read_failed(n, off);
            r->ios++;
        }
        if (aco_rt_now() >= run_deadline) break;
    }
    co_ios_total += r->ios;
}

static int run_randread(void) {
    open_read_file();
    if (opt_helpers && aco_rt_offload_limits((unsigned)opt_helpers, 0) != 0) {
        fprintf(stderr, "%s: aco_rt_offload_limits(%d) failed\n", prog, opt_helpers);
        return 1;
    }
    aco_rt_opts_t o;
    memset(&o, 0, sizeof(o));
    o.backend = opt_backend;
    aco_rt_sched_t* s = aco_rt_sched_new(&o);
    if (!s) die("aco_rt_sched_new", errno);
    reader_t* r = calloc((size_t)opt_depth, sizeof(*r));
    if (!r) die("calloc", ENOMEM);
    char* bufs = aligned_buf((size_t)opt_depth * BS);
    struct iovec all = {bufs, (size_t)opt_depth * BS};
    int e = opt_fixed ? aco_rt_register_buffers(&all, 1) : 0;
    if (e) fprintf(stderr, "%s: aco_rt_register_buffers: %s: reading without\n", prog, strerror(-e));
    for (int i = 0; i < opt_depth; i++) {
        r[i].id = i;
        r[i].buf = bufs + (size_t)i * BS;
        aco_rt_co_t* c = aco_rt_spawn(s, reader_co, &r[i]);
        if (!c) die("aco_rt_spawn", errno);
        aco_rt_detach(c);
    }
    cpu_t c0 = cpu_now();
    int64_t t0 = mono_ns();
    run_deadline = aco_rt_now() + (int64_t)(opt_secs * 1e9);
    int rc = aco_rt_sched_run(s);
    int64_t t1 = mono_ns();
    cpu_t c1 = cpu_now();
    if (rc != 0) die("aco_rt_sched_run", -rc);
    printf("mode randread %s backend %s depth %d file %s blocks %llu\n",
           opt_direct ? "direct" : "cached", aco_rt_backend_name(s), opt_depth, opt_file,
           (unsigned long long)nblocks);
    print_io_figures(co_ios_total, t1 - t0, c0, c1);
    printf("way read=%s\n", read_way ? read_way : "?");
    print_stats(s);
    aco_rt_sched_free(s);
    free(bufs);
    free(r);
    close(read_fd);
    return 0;
}

/* ---- threads: the peer ------------------------------------------------------- */
static atomic_int stop_flag;
typedef struct { int id; pthread_t t; uint64_t ios; } thr_t;

static void* reader_thread(void* arg) {
    thr_t* t = arg;
    void* buf = aligned_buf(BS);
    uint64_t seed = seed_of(t->id);
    while (!atomic_load_explicit(&stop_flag, memory_order_relaxed)) {
        int64_t off = rand_off(&seed);
        ssize_t n;
        if (opt_nowait) {       /* the floor of the runtime's hot read */
            struct iovec v = {buf, BS};
            n = preadv2(read_fd, &v, 1, (off_t)off, RWF_NOWAIT);
            if (n < 0 && errno == EAGAIN) n = pread(read_fd, buf, BS, (off_t)off);
        } else {
            n = pread(read_fd, buf, BS, (off_t)off);
        }
        if (n != BS) read_failed(n < 0 ? -errno : n, off);
        t->ios++;
    }
    free(buf);
    return NULL;
}

static int run_threads(void) {
    open_read_file();
    thr_t* t = calloc((size_t)opt_depth, sizeof(*t));
    if (!t) die("calloc", ENOMEM);
    cpu_t c0 = cpu_now();
    int64_t t0 = mono_ns();
    for (int i = 0; i < opt_depth; i++) {
        t[i].id = i;
        int e = pthread_create(&t[i].t, NULL, reader_thread, &t[i]);
        if (e) die("pthread_create", e);
    }
    int64_t ns = (int64_t)(opt_secs * 1e9);
    struct timespec d = {(time_t)(ns / 1000000000), (long)(ns % 1000000000)};
    while (nanosleep(&d, &d) != 0 && errno == EINTR) {}
    atomic_store(&stop_flag, 1);
    uint64_t ios = 0;
    for (int i = 0; i < opt_depth; i++) {
        pthread_join(t[i].t, NULL);
        ios += t[i].ios;
    }
    int64_t t1 = mono_ns();
    cpu_t c1 = cpu_now();
    printf("mode threads %s depth %d file %s blocks %llu\n", opt_direct ? "direct" : "cached",
           opt_depth, opt_file, (unsigned long long)nblocks);
    print_io_figures(ios, t1 - t0, c0, c1);
    free(t);
    close(read_fd);
    return 0;
}

/* ---- copy: file -> pipe -> file with aco_rt_splice ----------------------------- */
static int copy_in = -1, copy_out = -1, copy_pipe[2];
static int64_t copy_size, copy_done;
static const char* splice_way;

static void copy_co(void* arg) {
    (void)arg;
    splice_way = aco_rt_file_way("splice");
    int64_t off_in = 0, off_out = 0;
    while (off_in < copy_size) {
        size_t want = opt_chunk;
        if ((int64_t)want > copy_size - off_in) want = (size_t)(copy_size - off_in);
        ssize_t n = aco_rt_splice(copy_in, &off_in, copy_pipe[1], NULL, want, SPLICE_F_MOVE, -1);
        if (n < 0) die("splice from the source", (int)-n);
        if (n == 0) break;      /* the source shrank: copied what there was */
        while (n > 0) {
            ssize_t m = aco_rt_splice(copy_pipe[0], NULL, copy_out, &off_out, (size_t)n,
                                      SPLICE_F_MOVE, -1);
            if (m < 0) die("splice to the destination", (int)-m);
            if (m == 0) {
                fprintf(stderr, "%s: splice to the destination moved nothing\n", prog);
                exit(1);
            }
            n -= m;
        }
    }
    copy_done = off_out;
}

static int run_copy(const char* src, const char* dst) {
    copy_in = open(src, O_RDONLY | O_CLOEXEC);
    if (copy_in < 0) die(src, errno);
    struct stat st;
    if (fstat(copy_in, &st) < 0) die(src, errno);
    copy_size = st.st_size;
    aco_rt_opts_t o;
    memset(&o, 0, sizeof(o));
    o.backend = opt_backend;
    aco_rt_sched_t* s = aco_rt_sched_new(&o);
    if (!s) die("aco_rt_sched_new", errno);
    cpu_t c0 = cpu_now();
    int64_t t0 = mono_ns();
    /* opening and sizing the pipe are part of the copy, as cp's open is */
    copy_out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (copy_out < 0) die(dst, errno);
    if (pipe2(copy_pipe, O_CLOEXEC) < 0) die("pipe2", errno);
    int psz = fcntl(copy_pipe[1], F_SETPIPE_SZ, (int)opt_chunk);
    if (psz < 0) psz = fcntl(copy_pipe[1], F_GETPIPE_SZ);
    if (psz > 0 && (size_t)psz < opt_chunk) opt_chunk = (size_t)psz;
    aco_rt_co_t* c = aco_rt_spawn(s, copy_co, NULL);
    if (!c) die("aco_rt_spawn", errno);
    aco_rt_detach(c);
    int rc = aco_rt_sched_run(s);
    if (close(copy_out) < 0) die(dst, errno);
    int64_t t1 = mono_ns();
    cpu_t c1 = cpu_now();
    if (rc != 0) die("aco_rt_sched_run", -rc);
    if (copy_done != copy_size) {
        fprintf(stderr, "%s: copied %lld bytes of %lld\n", prog, (long long)copy_done,
                (long long)copy_size);
        return 1;
    }
    double secs = (double)(t1 - t0) / 1e9, u = c1.user - c0.user, sy = c1.sys - c0.sys;
    printf("mode copy backend %s chunk %zu src %s dst %s\n", aco_rt_backend_name(s), opt_chunk,
           src, dst);
    printf("bytes %lld\n", (long long)copy_done);
    printf("secs %.6f\n", secs);
    printf("cpu_s %.6f\n", u + sy);
    printf("utime_s %.6f\n", u);
    printf("stime_s %.6f\n", sy);
    printf("mib_per_s %.1f\n", secs > 0 ? (double)copy_done / 1048576.0 / secs : 0.0);
    printf("way splice=%s\n", splice_way ? splice_way : "?");
    print_stats(s);
    aco_rt_sched_free(s);
    close(copy_pipe[0]);
    close(copy_pipe[1]);
    close(copy_in);
    return 0;
}

int main(int argc, char** argv) {
    if (argc < 2) usage();
    const char* what = argv[1];
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (strcmp(what, "randread") == 0) {
        parse(argc, argv, 2, NULL, 0);
        return run_randread();
    }
    if (strcmp(what, "threads") == 0) {
        parse(argc, argv, 2, NULL, 0);
        return run_threads();
    }
    if (strcmp(what, "copy") == 0) {
        const char* pos[2];
        parse(argc, argv, 2, pos, 2);
        return run_copy(pos[0], pos[1]);
    }
    usage();
}
