/* file.c - files, directories and the rest of the Linux calls (aco_rt.h,
 * "Files, directories, and the rest of the Linux calls").
 *
 * A regular file has no readiness, so each call is an operation done for
 * the co while it parks, one of three ways (way()):
 *   uring   the ring's own operation (io_uring.c probes which the kernel
 *           has: rt_ur_f_on);
 *   helper  the system call on a helper thread (offload.c);
 *   thread  the system call here (shutdown; the single-thread build).
 * Before any of them, a read or write of a file that is not O_DIRECT is
 * tried here with RWF_NOWAIT: a page cache hit costs what pread(2) does.
 *
 * [data] calls use the caller's buffers in place and wait out what the
 * kernel began (io_uring's cancel, the helper queue's "not started yet");
 * [meta] calls keep everything the operation touches in a heap record
 * (fop_t), so their co can leave at its deadline: the record is then the
 * operation's (io_uring's orphan, offload's drop), which frees it, and
 * closes the descriptor a late open made.
 *
 * Every system call here is syscall(2), past any hook of libaco_hook.
 */
#define _GNU_SOURCE
#include "rt_impl.h"
#include "rt_io.h"
#include "rt_sys.h"

#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#ifdef ACO_RT_HAVE_URING
#include <liburing.h>
#endif

#ifndef SYS_cachestat
#define SYS_cachestat 451               /* Linux 6.5 */
#endif

/* One call's record, in the heap: what a helper thread or the kernel reads
 * and writes while the co is parked. */
typedef struct fop {
#ifdef ACO_RT_HAVE_URING
    rt_ur_meta_t m;                     /* (first: io_uring's [meta] header) */
#endif
    uint8_t      w;                     /* RT_F_* */
    uint8_t      has_off, has_off2;     /* splice, sendfile: offsets given */
    uint8_t      no_uring;              /* a helper's even where io_uring
                                           has the operation */
    int          own_fd;                /* a descriptor the record closes
                                           if its co leaves (-1: none) */
    int          fd, fd2, flags;
    unsigned     uflags, mask;
    mode_t       mode;
    int64_t      off, off2, len;
    struct iovec* iov;                  /* read, write: the vector */
    int          cnt;
    const char*  p1;                    /* paths: copies in tail */
    const char*  p2;
    size_t       howsz;
    struct open_how how;
    struct statx stx;
    long         res;
    void*        bounce;                /* freed with the record */
    char         tail[];
} fop_t;

static void fop_free(fop_t* f) {
    free(f->bounce);
    free(f);
}

/* syscall(2) with six arguments, each made a long: an int passed through
 * "..." leaves the upper half of its register undefined (memcheck says
 * so); a call with fewer ignores the rest. */
#define SC(n, a, b, c, d, e, f) \
    syscall((n), (long)(a), (long)(b), (long)(c), (long)(d), (long)(e), (long)(f))


#if UINTPTR_MAX == 0xffffffffu
/* 32 bits: the calls whose 64-bit arguments take register pairs in an
 * order of each ABI's own, through the C library (ours: past no hook of
 * libaco_hook, which wraps none of these) */
#define SYS_FALLOC(fd, mode, off, len) fallocate64((fd), (mode), (off), (len))
#define SYS_SFR(fd, off, n, fl) sync_file_range((fd), (off), (n), (fl))
#define SYS_FTRUNC(fd, len) ftruncate64((fd), (len))
#define SYS_SENDFILE(out, in, po, n) sendfile64((out), (in), (po), (n))
typedef off64_t rt_sf_off_t;
#else
#define SYS_FALLOC(fd, mode, off, len) SC(SYS_fallocate, fd, mode, off, len, 0, 0)
#define SYS_SFR(fd, off, n, fl) SC(SYS_sync_file_range, fd, off, n, fl, 0, 0)
#define SYS_FTRUNC(fd, len) SC(SYS_ftruncate, fd, len, 0, 0, 0, 0)
#define SYS_SENDFILE(out, in, po, n) SC(SYS_sendfile, out, in, po, n, 0, 0)
typedef off_t rt_sf_off_t;
#endif

/* The system call itself: its result or -errno. */
static long fop_sys(fop_t* f) {
    long r;
    loff_t a = f->off, b = f->off2;
    rt_sf_off_t o = (rt_sf_off_t)f->off;
    switch (f->w) {
    case RT_F_READ: r = rt_sys_prw(0, f->fd, f->iov, f->cnt, f->off, f->flags); break;
    case RT_F_WRITE: r = rt_sys_prw(1, f->fd, f->iov, f->cnt, f->off, f->flags); break;
    case RT_F_FSYNC: r = SC(f->flags ? SYS_fdatasync : SYS_fsync, f->fd, 0, 0, 0, 0, 0); break;
    case RT_F_SFR: r = SYS_SFR(f->fd, f->off, f->len, f->uflags); break;
    case RT_F_FALLOC: r = SYS_FALLOC(f->fd, f->flags, f->off, f->len); break;
    case RT_F_FTRUNC: r = SYS_FTRUNC(f->fd, f->len); break;
    case RT_F_OPENAT: r = SC(SYS_openat, f->fd, f->p1, f->flags, f->mode, 0, 0); break;
    case RT_F_OPENAT2: r = SC(SYS_openat2, f->fd, f->p1, &f->how, f->howsz, 0, 0); break;
    case RT_F_STATX: r = SC(SYS_statx, f->fd, f->p1, f->flags, f->mask, &f->stx, 0); break;
    case RT_F_UNLINK: r = SC(SYS_unlinkat, f->fd, f->p1, f->flags, 0, 0, 0); break;
    case RT_F_RENAME: r = SC(SYS_renameat2, f->fd, f->p1, f->fd2, f->p2, f->uflags, 0); break;
    case RT_F_MKDIR: r = SC(SYS_mkdirat, f->fd, f->p1, f->mode, 0, 0, 0); break;
    case RT_F_SYMLINK: r = SC(SYS_symlinkat, f->p1, f->fd, f->p2, 0, 0, 0); break;
    case RT_F_LINK: r = SC(SYS_linkat, f->fd, f->p1, f->fd2, f->p2, f->flags, 0); break;
    case RT_F_SPLICE:
        r = SC(SYS_splice, f->fd, f->has_off ? &a : NULL, f->fd2, f->has_off2 ? &b : NULL,
               f->len, f->uflags);
        break;
    case RT_F_TEE: r = SC(SYS_tee, f->fd, f->fd2, f->len, f->uflags, 0, 0); break;
    case RT_F_SENDFILE:
        r = SYS_SENDFILE(f->fd2, f->fd, f->has_off ? &o : NULL, (size_t)f->len);
        break;
    default: r = -1; errno = ENOSYS; break;
    }
    return r < 0 ? -errno : r;
}

/* ------------------------------------------------------------------------ */
/* The ways                                                                 */
/* ------------------------------------------------------------------------ */

enum { WAY_URING, WAY_HELPER, WAY_THREAD };

static int way(aco_rt_sched_t* s, unsigned w) {
    if (w == RT_F_SHUTDOWN) return WAY_THREAD;
    if (s && rt_ur_f_on(s, w)) return WAY_URING;
    if (w == RT_F_TEE) return WAY_THREAD;   /* (two pipes: by readiness) */
#ifdef ACO_RT_NO_THREADS
    return WAY_THREAD;
#else
    /* (sendmsg and recvmsg on epoll: the readiness way, io.c) */
    return w == RT_F_SENDMSG || w == RT_F_RECVMSG ? WAY_THREAD : WAY_HELPER;
#endif
}

const char* aco_rt_file_way(const char* call) {
    static const char* const names[] = {"uring", "helper", "thread"};
    if (call == NULL) return NULL;
    for (unsigned w = 0; w < RT_F_N; w++)
        if (strcmp(call, rt_f_names[w]) == 0) return names[way(rt_tls_sched, w)];
    return NULL;
}

/* An operation io_uring lacks here, said once per process. */
static uint32_t said;
static void say_fallback(aco_rt_sched_t* s, unsigned w) {
    if (s->backend.ops != &rt_backend_uring || w == RT_F_SENDFILE || rt_ur_f_on(s, w)) return;
    if (__atomic_fetch_or(&said, 1u << w, __ATOMIC_RELAXED) & (1u << w)) return;
    if (getenv("ACO_RT_QUIET") == NULL)
        fprintf(stderr, "aco_rt: io_uring has no %s operation here (by its probe, or "
                "$ACO_RT_URING_OFF): "
                "aco_rt_%s%s runs on helper threads\n", rt_f_names[w],
                w == RT_F_READ ? "pread" : w == RT_F_WRITE ? "pwrite" : rt_f_names[w],
                w == RT_F_READ || w == RT_F_WRITE ? "(v)"
                : w == RT_F_FSYNC               ? " and aco_rt_fdatasync"
                                                : "");
}

static void* fop_helper(void* arg) {
    fop_t* f = (fop_t*)arg;
    f->res = fop_sys(f);
    return NULL;
}

/* A co left the call: the operation ended without it (or never ran). */
static void fop_orphan_end(fop_t* f, long res) {
    if ((f->w == RT_F_OPENAT || f->w == RT_F_OPENAT2) && res >= 0) rt_sys_close((int)res);
    if (f->own_fd >= 0) rt_sys_close(f->own_fd);
    fop_free(f);
}
#define NOT_RUN LONG_MIN
static void fop_drop(void* arg, void* result) {
    (void)result;
    fop_t* f = (fop_t*)arg;
    fop_orphan_end(f, f->res);      /* (NOT_RUN if it never ran) */
}

#ifdef ACO_RT_HAVE_URING
static void fop_orphan(rt_ur_meta_t* m, int res) { fop_orphan_end((fop_t*)m, res); }

/* io_uring first tries an operation in the submitting thread, trusting the
 * file to say EAGAIN where it would wait; a FUSE file does not (6.18: its
 * open, read and write wait for the daemon in io_uring_enter, with the
 * whole scheduler thread), and the opens, stats and syncs of other file
 * systems may read the disk there.  So every file operation goes straight
 * to io_uring's workers (IOSQE_ASYNC), but O_DIRECT reads and writes,
 * which the block layer queues without waiting (the ring's fast path). */

/* f as an SQE. */
static void fop_prep(struct io_uring_sqe* sqe, fop_t* f) {
    switch (f->w) {
    case RT_F_READ:         /* (rw_way's own, without a record, is the usual) */
        io_uring_prep_readv2(sqe, f->fd, f->iov, (unsigned)f->cnt, (uint64_t)f->off,
                             f->flags & ~RWF_HIPRI);
        break;
    case RT_F_WRITE:
        io_uring_prep_writev2(sqe, f->fd, f->iov, (unsigned)f->cnt, (uint64_t)f->off,
                              f->flags & ~RWF_HIPRI);
        break;
    case RT_F_FSYNC: io_uring_prep_fsync(sqe, f->fd, f->flags ? IORING_FSYNC_DATASYNC : 0); break;
    case RT_F_SFR:
        io_uring_prep_rw(IORING_OP_SYNC_FILE_RANGE, sqe, f->fd, NULL, (unsigned)f->len,
                         (uint64_t)f->off);
        sqe->sync_range_flags = f->uflags;
        break;
    case RT_F_FALLOC:
        io_uring_prep_fallocate(sqe, f->fd, f->flags, (uint64_t)f->off, (uint64_t)f->len);
        break;
    case RT_F_FTRUNC:       /* IORING_OP_FTRUNCATE, 6.9: no name in liburing 2.3 */
        io_uring_prep_rw(55, sqe, f->fd, NULL, 0, (uint64_t)f->len);
        break;
    case RT_F_OPENAT: io_uring_prep_openat(sqe, f->fd, f->p1, f->flags, f->mode); break;
    case RT_F_OPENAT2: io_uring_prep_openat2(sqe, f->fd, f->p1, &f->how); break;
    case RT_F_STATX: io_uring_prep_statx(sqe, f->fd, f->p1, f->flags, f->mask, &f->stx); break;
    case RT_F_UNLINK: io_uring_prep_unlinkat(sqe, f->fd, f->p1, f->flags); break;
    case RT_F_RENAME: io_uring_prep_renameat(sqe, f->fd, f->p1, f->fd2, f->p2, f->uflags); break;
    case RT_F_MKDIR: io_uring_prep_mkdirat(sqe, f->fd, f->p1, f->mode); break;
    case RT_F_SYMLINK: io_uring_prep_symlinkat(sqe, f->p1, f->fd, f->p2); break;
    case RT_F_LINK: io_uring_prep_linkat(sqe, f->fd, f->p1, f->fd2, f->p2, f->flags); break;
    case RT_F_SPLICE:
        io_uring_prep_splice(sqe, f->fd, f->has_off ? f->off : -1, f->fd2,
                             f->has_off2 ? f->off2 : -1, (unsigned)f->len, f->uflags);
        break;
    case RT_F_TEE: io_uring_prep_tee(sqe, f->fd, f->fd2, (unsigned)f->len, f->uflags); break;
    }
    sqe->flags |= IOSQE_ASYNC;      /* (why: above) */
}
#endif

/* Run f for co its call's way: the result; *gone when f is no longer the
 * caller's (a [meta] call whose co left: the operation's end frees it; a
 * [data] call dropped before its helper began). */
static long fop_run(aco_rt_co_t* co, fop_t* f, int meta, int64_t deadline, int* gone) {
    aco_rt_sched_t* s = co->s;
    *gone = 0;
    long r = rt_may_block(co, deadline);
    if (r) return r;
    int wy = way(s, f->w);
    if (f->no_uring && wy == WAY_URING) wy = way(NULL, f->w);
    switch (wy) {
#ifdef ACO_RT_HAVE_URING
    case WAY_URING: {
        struct io_uring_sqe* sqe = rt_ur_sqe(s);
        fop_prep(sqe, f);
        s->st.file_uring++;
        if (!meta) {
            r = rt_ur_data_op(co, sqe, f->fd, deadline);
        } else {
            f->m.orphan = fop_orphan;
            r = rt_ur_meta_op(co, sqe, &f->m, deadline, gone);
        }
        if (r != RT_UR_AGAIN) return r;
        /* (the ring did not run it: a helper's way, or its -EAGAIN) */
        if ((r = rt_may_block(co, deadline)) != 0) return r;
        __attribute__((fallthrough));
    }
#endif
    case WAY_HELPER:
        say_fallback(s, f->w);
        s->st.file_helper++;
        f->res = NOT_RUN;
        r = rt_offload_call(co, fop_helper, f, fop_drop, NULL, deadline, !meta);
        if (r == 0) return f->res;
        if (r == -ETIMEDOUT || r == -ECANCELED) *gone = 1;
        if (r != -ENOSYS) return r;
        return fop_sys(f);      /* (no helper threads: cannot be, way() knows) */
    default:
        return fop_sys(f);
    }
}

static fop_t* fop_new(unsigned w, size_t tail) {
    fop_t* f = calloc(1, sizeof(*f) + tail);
    if (f) {
        f->w = (uint8_t)w;
        f->own_fd = -1;
    }
    return f;
}

/* The calling co, or return -EPERM; a cancelled co's calls fail at once. */
#define CO_OR_EPERM(co)                                         \
    aco_rt_co_t* co = rt_self();                                \
    if (rt_unlikely(co == NULL)) return -EPERM;                 \
    if (rt_unlikely(rt_co_cancelled(co))) return -ECANCELED

/* ------------------------------------------------------------------------ */
/* Reads and writes                                                         */
/* ------------------------------------------------------------------------ */

/* Is fd O_DIRECT (or not to be tried with RWF_NOWAIT for writes: *nw)?
 * The entry's hint, looked up again every 64 calls (and before a helper
 * takes a transfer: fd_mode_again). */
#define FM_KNOWN  1
#define FM_DIRECT 2
#define FM_NO_NW_WRITE 4
#define FM_NOTREG 8             /* a pipe, socket, terminal...: readiness */
static int fd_mode_look(rt_fd_t* e, int fd);
/* (*cached: the hint is the entry's, not looked up now) */
static int fd_mode(aco_rt_sched_t* s, int fd, int* cached) {
    rt_fd_t* e = rt_fd_get(&s->fds, fd);
    *cached = e && (e->fmode & FM_KNOWN) && (++e->fage & 63) != 0;
    return *cached ? e->fmode : fd_mode_look(e, fd);
}

/* A hint of the entry may be old: the number closed with close(2) and
 * reused behind our back.  A helper thread on a pipe's or socket's
 * transfer would be kept for good: before one takes a transfer, the
 * hint is looked up again (a hand-off to a helper costs far more). */
static int fd_mode_again(aco_rt_sched_t* s, int fd) {
    return fd_mode_look(rt_fd_peek(&s->fds, fd), fd);
}

static int fd_mode_look(rt_fd_t* e, int fd) {
    int fl = rt_sys_fcntl(fd, F_GETFL, 0);
    rt_sys_fid_t id;
    int m = FM_KNOWN | (fl >= 0 && (fl & O_DIRECT) ? FM_DIRECT : 0);
    if (fl >= 0 && rt_sys_fid(fd, &id) == 0 && !S_ISREG(id.mode) && !S_ISBLK(id.mode))
        m |= FM_NOTREG;
    if (e) {
        e->fmode = (uint8_t)(m & FM_NOTREG ? m : m | (e->fmode & FM_NO_NW_WRITE));
        e->fage = 1;
        return e->fmode;
    }
    return m;
}

static void iov_skip(struct iovec** v, int* cnt, size_t k) {
    while (*cnt > 0 && k >= (*v)->iov_len) {
        k -= (*v)->iov_len;
        (*v)++;
        (*cnt)--;
    }
    if (*cnt > 0 && k) {
        (*v)->iov_base = (char*)(*v)->iov_base + k;
        (*v)->iov_len -= k;
    }
}

static size_t iov_total(const struct iovec* v, int cnt) {
    size_t t = 0;
    for (int i = 0; i < cnt; i++) t += v[i].iov_len;
    return t;
}

/* Registered buffers (aco_rt_register_buffers): by address, so that a
 * transfer finds the one that holds it in log2(n) steps; none at all costs
 * one test. */
struct rt_fbuf { uintptr_t lo, hi; unsigned idx; };
#define FBUF_MAX 16384              /* the kernel's (IORING_MAX_REG_BUFFERS) */
#define FBUF_LEN_MAX (1ul << 30)    /* ... and its largest buffer */

#ifdef ACO_RT_HAVE_URING
/* The index of the registered buffer that holds [p, p + n) whole, or -1. */
static int fbuf_find(const aco_rt_sched_t* s, const void* p, size_t n) {
    if (rt_likely(!s->fbuf.pinned)) return -1;
    uintptr_t a = (uintptr_t)p;
    unsigned lo = 0, hi = s->fbuf.n;
    while (lo < hi) {               /* the first that ends past a */
        unsigned m = (lo + hi) / 2;
        if (s->fbuf.r[m].hi <= a) lo = m + 1;
        else hi = m;
    }
    const struct rt_fbuf* b = &s->fbuf.r[lo];
    return lo < s->fbuf.n && b->lo <= a && n <= b->hi - a ? (int)b->idx : -1;
}

/* The SQE of one buffer's read or write at off: READ/WRITE, whose SQE
 * holds the buffer (no vector for the kernel to read later), or their
 * FIXED forms when a registered buffer holds it whole (*fixed: 1). */
static inline struct io_uring_sqe* prep_one(aco_rt_sched_t* s, int write, int fd, void* buf,
                                            size_t len, int64_t off, int flags, int* fixed) {
    struct io_uring_sqe* sqe = rt_ur_sqe(s);
    /* (at most what one read(2) moves: MAX_RW_COUNT) */
    unsigned n = len > 0x7ffff000 ? 0x7ffff000 : (unsigned)len;
    int bi = fbuf_find(s, buf, n);
    *fixed = bi >= 0;
    if (bi >= 0) {              /* its pages pinned once: none per call */
        if (write) io_uring_prep_write_fixed(sqe, fd, buf, n, (uint64_t)off, bi);
        else io_uring_prep_read_fixed(sqe, fd, buf, n, (uint64_t)off, bi);
        s->st.file_fixed++;
    } else if (write) {
        io_uring_prep_write(sqe, fd, buf, n, (uint64_t)off);
    } else {
        io_uring_prep_read(sqe, fd, buf, n, (uint64_t)off);
    }
    sqe->rw_flags = flags;
    return sqe;
}
#endif

static int fbuf_cmp(const void* x, const void* y) {
    uintptr_t a = ((const struct rt_fbuf*)x)->lo, b = ((const struct rt_fbuf*)y)->lo;
    return a < b ? -1 : a > b;
}

int aco_rt_register_buffers(const struct iovec* iov, unsigned n) {
    aco_rt_sched_t* s = rt_tls_sched;
    if (s == NULL) return -EPERM;
    if (iov == NULL || n == 0 || n > FBUF_MAX) return -EINVAL;
    if (s->fbuf.n) return -EBUSY;
    struct rt_fbuf* r = malloc(n * sizeof(*r));
    if (r == NULL) return -ENOMEM;
    int err = 0;
    for (unsigned i = 0; i < n && !err; i++) {
        uintptr_t a = (uintptr_t)iov[i].iov_base;
        size_t len = iov[i].iov_len;
        if (a == 0 || len == 0 || len > FBUF_LEN_MAX || a + len < a) err = -EINVAL;
        /* no share stack of s: other cos' frames come and go there (in
         * checked mode the caller's frames are in a window of its own, and
         * a suspended co's window is an escape, reported) */
        if (!err && rt_on_any_share_stack(s, (void*)a, len, 1)) err = -EINVAL;
        r[i] = (struct rt_fbuf){a, a + len, i};
    }
    if (err) {                  /* (r is filled only up to the bad one) */
        free(r);
        return err;
    }
    qsort(r, n, sizeof(*r), fbuf_cmp);
    for (unsigned i = 1; i < n && !err; i++)
        if (r[i].lo < r[i - 1].hi) err = -EINVAL;      /* overlapping */
    int pinned = 0;
#ifdef ACO_RT_HAVE_URING
    if (!err && s->backend.ops == &rt_backend_uring) {
        err = rt_ur_buffers(s, iov, n);
        pinned = err == 0;
        /* kept, not pinned: a kernel that cannot yet, or a filter
         * (seccomp) that refuses io_uring_register itself */
        if (err == -ENOSYS || err == -EPERM || err == -EACCES) err = 0;
    }
#endif
    if (err) {
        free(r);
        return err;
    }
    s->fbuf.r = r;
    s->fbuf.n = n;
    s->fbuf.pinned = pinned;
    return 0;
}

int aco_rt_unregister_buffers(void) {
    aco_rt_sched_t* s = rt_tls_sched;
    if (s == NULL) return -EPERM;
    if (s->fbuf.n == 0) return -ENXIO;
    /* Transfers into them first: many kernels' unregister waits for them
     * in the thread (and with DEFER_TASKRUN their completions need this
     * thread); a co waits for them parked, in 1 ms steps. */
    while (s->fbuf.inflight) {
        if (rt_self() == NULL) return -EBUSY;       /* (not in a co: no way to wait) */
        if (aco_rt_sleep(1000000) == -ECANCELED) return -ECANCELED;
        if (s->fbuf.n == 0) return -ENXIO;          /* another co's unregister won */
    }
#ifdef ACO_RT_HAVE_URING
    if (s->fbuf.pinned) {
        int r = rt_ur_buffers(s, NULL, 0);
        if (r < 0) return r;
    }
#endif
    rt_file_fini(s);
    return 0;
}

void rt_file_fini(aco_rt_sched_t* s) {
    free(s->fbuf.r);
    s->fbuf.r = NULL;
    s->fbuf.n = 0;
    s->fbuf.pinned = 0;
}

/* The way of a [data] transfer at off.  At the file position (off -1)
 * the kernel's read(2) and write(2) hold the file's position lock for the
 * whole transfer; io_uring's do not (two reads may get the same bytes, two
 * writes land on each other): a helper's preadv2/pwritev2 then, which do. */
static int data_way(aco_rt_sched_t* s, int write, int64_t off) {
    unsigned w = write ? RT_F_WRITE : RT_F_READ;
    int wy = way(s, w);
    return off == -1 && wy == WAY_URING ? way(NULL, w) : wy;
}

/* One [data] transfer of the vector v (in the heap or in place; *v may be
 * advanced) the way of w: the count, or -errno. */
static ssize_t rw_way(aco_rt_co_t* co, int write, int fd, struct iovec* v, int cnt, int64_t off,
                      int flags, int64_t deadline) {
    aco_rt_sched_t* s = co->s;
    unsigned w = write ? RT_F_WRITE : RT_F_READ;
    int wy = data_way(s, write, off);
#ifdef ACO_RT_HAVE_URING
    if (wy == WAY_URING) {
        long r;
    again:
        r = rt_may_block(co, deadline);
        if (r) return r;
        struct io_uring_sqe* sqe;
        /* RWF_HIPRI is a hint (polled completion), which a ring set up
         * without IOPOLL refuses: dropped there, as preadv2(2) ignores it
         * where it cannot poll */
        flags &= ~RWF_HIPRI;
        int fixed = 0;
        if (cnt == 1) {
            sqe = prep_one(s, write, fd, v->iov_base, v->iov_len, off, flags, &fixed);
        } else {
            sqe = rt_ur_sqe(s);
            if (write) io_uring_prep_writev2(sqe, fd, v, (unsigned)cnt, (uint64_t)off, flags);
            else io_uring_prep_readv2(sqe, fd, v, (unsigned)cnt, (uint64_t)off, flags);
        }
        rt_fd_t* e = rt_fd_peek(&s->fds, fd);
        if (!(e && (e->fmode & FM_DIRECT)) && !(flags & RWF_NOWAIT)) sqe->flags |= IOSQE_ASYNC;
        s->st.file_uring++;
        s->fbuf.inflight += (uint32_t)fixed;
        r = rt_ur_data_op(co, sqe, fd, deadline);
        s->fbuf.inflight -= (uint32_t)fixed;
        if (r == RT_UR_AGAIN) {
            /* the ring did not run it (no io-wq worker could start, or a
             * close of a dup's number cancelled it): a helper's */
        } else {
            if (r != -EAGAIN || (flags & RWF_NOWAIT)) return r;
            /* the file is O_NONBLOCK, which io_uring takes as "never
             * wait for the disk": a helper's */
            int fl = rt_sys_fcntl(fd, F_GETFL, 0);
            if (fl >= 0 && !(fl & O_NONBLOCK)) goto again;
        }
        wy = WAY_HELPER;
    }
#endif
    (void)wy;
    fop_t* f = fop_new(w, (size_t)cnt * sizeof(*v));
    if (f == NULL) return -ENOMEM;
    f->fd = fd;
    f->iov = (struct iovec*)f->tail;
    memcpy(f->iov, v, (size_t)cnt * sizeof(*v));
    f->cnt = cnt;
    f->off = off;
    f->flags = flags;
    f->no_uring = 1;        /* (the ring's way was above, or is not to be) */
    int gone;
    long r = fop_run(co, f, 0, deadline, &gone);
    if (!gone) fop_free(f);
    return r;
}

/* rt_sys_prw with SIGPIPE held around it if hold: the result, errno set.
 * Out of line: the held signal mask (128 bytes) stays out of the frames a
 * co keeps while it waits (they are copied at every switch). */
static __attribute__((noinline)) long prw_held(int write, int fd, const struct iovec* v, int cnt,
                                               int64_t off, int flags, int hold) {
    if (!hold) return rt_sys_prw(write, fd, v, cnt, off, flags);
    rt_sigpipe_t h;
    rt_sigpipe_hold(&h);
    long r = rt_sys_prw(write, fd, v, cnt, off, flags);
    rt_sigpipe_release(&h, r < 0 && errno == EPIPE);      /* (errno kept) */
    return r;
}

/* A pipe, socket, terminal...: it has readiness, so the readiness way
 * (never a helper thread, which such a read could keep for good): a try
 * that does not block (RWF_NOWAIT; where a driver refuses it, O_NONBLOCK
 * for that try alone: the open file is shared), then a wait, and again.
 * One transfer, as preadv2(2). */
static ssize_t rw_ready(aco_rt_co_t* co, int write, int fd, const struct iovec* iov, int cnt,
                        int64_t off, int flags, int64_t deadline) {
    int nw = RWF_NOWAIT;
    for (;;) {
        long r = nw ? prw_held(write, fd, iov, cnt, off, flags | nw, write)
                    : rt_prw_once(write, fd, iov, cnt, off, flags);
        if (r >= 0) return r;
        r = -errno;
        if (r == -EOPNOTSUPP && nw) {
            nw = 0;
            continue;
        }
        if (r != -EAGAIN) return r;
        if ((r = rt_may_block(co, deadline)) != 0) return r;
        if ((r = co->s->backend.ops->wait_fd(co, fd, write ? POLLOUT : POLLIN, deadline)) < 0)
            return r;
    }
}

/* The transfer of v[0..cnt) (in the heap; advanced) the way of its call:
 * the count, or -errno.  A read served in part goes on: pread(2) on a
 * file is short only at its end. */
static ssize_t way_all(aco_rt_co_t* co, int write, int fd, struct iovec* v, int cnt,
                       int64_t off, int flags, int64_t deadline) {
    size_t total = iov_total(v, cnt);
    ssize_t r = rw_way(co, write, fd, v, cnt, off, flags, deadline);
    if (r < 0) return r;
    ssize_t done = r;
    while (!write && r > 0 && (size_t)done < total && !(flags & RWF_NOWAIT)) {
        iov_skip(&v, &cnt, (size_t)r);
        if (off != -1) off += r;
        r = rw_way(co, 0, fd, v, cnt, off, flags, deadline);
        if (r > 0) done += r;
    }
    return done;
}

/* The same through a bounce buffer in the heap, for a vector whose
 * buffers lie on the co's share stack (another co's by the time the
 * kernel or a helper gets to them). */
static ssize_t way_bounce(aco_rt_co_t* co, int write, int fd, const struct iovec* v, int cnt,
                          int64_t off, int flags, int64_t deadline) {
    size_t total = iov_total(v, cnt);
    void* b = NULL;
    rt_extra_t* x = rt_extra(co, 0);    /* (held there while it waits) */
    if (x == NULL || posix_memalign(&b, 4096, (total + 4095) & ~(size_t)4095)) return -ENOMEM;
    x->held = b;
    co->s->st.file_bounce++;
    size_t k = 0;
    if (write)
        for (int i = 0; i < cnt; i++) {
            memcpy((char*)b + k, v[i].iov_base, v[i].iov_len);
            k += v[i].iov_len;
        }
    struct iovec one = {b, total};
    ssize_t r = way_all(co, write, fd, &one, 1, off, flags, deadline);
    x->held = NULL;
    k = 0;
    for (int i = 0; !write && r > 0 && i < cnt && k < (size_t)r; i++) {
        size_t c = v[i].iov_len < (size_t)r - k ? v[i].iov_len : (size_t)r - k;
        memcpy(v[i].iov_base, (char*)b + k, c);
        k += c;
    }
    free(b);
    return r;
}

/* A read or write of iov[0..cnt) (at most IOV_MAX; on_stack: a buffer
 * lies on the co's share stack): a pipe's or socket's by readiness, else
 * RWF_NOWAIT here first (on the caller's memory: the co runs), then the
 * way of the call for the rest. */
static ssize_t rw(aco_rt_co_t* co, int write, int fd, const struct iovec* iov, int cnt,
                  int64_t off, int flags, int on_stack, int64_t deadline) {
    aco_rt_sched_t* s = co->s;
    size_t total = iov_total(iov, cnt);
    /* A hint that comes from the entry may be old (fd_mode_again).  The
     * caller's RWF_NOWAIT never waits, whatever fd is: no hint there. */
    int fm_cached = 0;
    int fm = (flags & RWF_NOWAIT) ? FM_KNOWN | FM_DIRECT : fd_mode(s, fd, &fm_cached);
    /* (an old "pipe or socket" on what is a file now would go round
     * rw_ready for good: a file is always ready, and its RWF_NOWAIT read
     * of a cold page says EAGAIN each time) */
    if ((fm & FM_NOTREG) && fm_cached) fm = fd_mode_again(s, fd);
    if (fm & FM_NOTREG) return rw_ready(co, write, fd, iov, cnt, off, flags, deadline);
    ssize_t done = 0;
    /* (a copy of the vector to advance: in the co's extra block, in the
     * heap, since io_uring's READV reads it after the co parked; one
     * buffer goes as a READ, whose SQE holds it, and a helper's transfer
     * copies its vector: that one may stay here) */
    struct iovec one, *v = &one;
    if (cnt == 1) {
        one = *iov;
    } else {
        rt_extra_t* x = rt_extra(co, (size_t)cnt * sizeof(*iov));
        if (x == NULL) return -ENOMEM;
        v = (struct iovec*)x->buf;
        memcpy(v, iov, (size_t)cnt * sizeof(*iov));
    }
    if (!(fm & FM_DIRECT) && !(write && (fm & FM_NO_NW_WRITE))) {
        /* a write at the position on an old hint may meet a pipe or a
         * socket now, whose reader may be gone: SIGPIPE held (a positioned
         * one gets ESPIPE there, never SIGPIPE) */
        int hold = write && off == -1 && fm_cached;
        for (;;) {
            long r = prw_held(write, fd, v, cnt, off, flags | RWF_NOWAIT, hold);
            if (r < 0) {
                r = -errno;
                if (r == -EOPNOTSUPP && write) {
                    rt_fd_t* e = rt_fd_get(&s->fds, fd);
                    if (e) e->fmode |= FM_NO_NW_WRITE;
                }
                /* O_DIRECT behind the runtime's back (an old hint) meets a
                 * buffer the file system refuses: looked at again, the way
                 * below takes it (a bounce buffer on the share stack) */
                if (r == -EINVAL && fm_cached && !done && (fd_mode_again(s, fd) & FM_DIRECT)) break;
                if (r != -EAGAIN && r != -EOPNOTSUPP) return done ? done : r;
                break;
            }
            done += r;
            if (off != -1) off += r;
            if ((size_t)done == total || r == 0) {
                if (done == r) s->st.file_nowait++;
                return done;
            }
            iov_skip(&v, &cnt, (size_t)r);
        }
    }
    if (fm_cached && data_way(s, write, off) != WAY_URING && (fd_mode_again(s, fd) & FM_NOTREG))
        return done ? done : rw_ready(co, write, fd, v, cnt, off, flags, deadline);
    ssize_t r = on_stack ? way_bounce(co, write, fd, v, cnt, off, flags, deadline)
                         : way_all(co, write, fd, v, cnt, off, flags, deadline);
    /* the caller's RWF_NOWAIT on a file that cannot do it without waiting
     * (ext4's buffered writes): pwritev2(2) says EOPNOTSUPP, io_uring
     * EAGAIN; the header's answer is -EAGAIN, on every way */
    if (r == -EOPNOTSUPP && (flags & RWF_NOWAIT)) r = -EAGAIN;
    if (r < 0) return done ? done : r;
    return done + r;
}

__attribute__((noinline))       /* (its frame stays out of prw_flat's callers) */
static ssize_t prw(int write, int fd, const struct iovec* iov, int cnt, int64_t off, int flags,
                   int64_t deadline) {
    CO_OR_EPERM(co);
    if (cnt < 0 || cnt > IOV_MAX) return -EINVAL;
    if (iov == NULL && cnt) return -EFAULT;
    if (off < -1) return -EINVAL;
    int bad = rt_iov_bad(iov, cnt);         /* (io.c's rules) */
    if (bad) return bad;
    size_t total = 0;
    int on_stack = 0;
    for (int i = 0; i < cnt; i++) {
        total += iov[i].iov_len;                /* (at most SSIZE_MAX: rt_iov_bad) */
        if (iov[i].iov_len && rt_on_share_stack(co, iov[i].iov_base, iov[i].iov_len, !write))
            on_stack = 1;
    }
    if (rt_unlikely(total == 0)) {          /* no bytes: the call's own answer, at once */
        long r = rt_sys_prw(write, fd, iov, cnt, off, flags);
        return r < 0 ? -errno : r;
    }
    if (rt_passed(deadline)) return rt_may_block(co, deadline);
    return rw(co, write, fd, iov, cnt, off, flags, on_stack, deadline);
}

/* aco_rt_pread's and aco_rt_pwrite's usual case on the ring, flat: bytes
 * off the share stack at an offset (off >= 0) of a descriptor the table
 * knows as O_DIRECT, whose hint needs no look (fd_mode's count).  The SQE
 * goes from here, so that a co waiting for the disk keeps few frames,
 * copied at each switch of its share stack (a reader of
 * bench/aco_file_bench.c kept 824 bytes by the general way, 360 by this).
 * NOT_FLAT: anything else, or an end the general way must take again
 * (-EAGAIN: nothing moved). */
#define NOT_FLAT ((ssize_t)INT32_MIN)     /* (never a count nor an -errno) */
static inline ssize_t prw_flat(int write, int fd, void* buf, size_t n, int64_t off,
                               int64_t deadline) {
#ifdef ACO_RT_HAVE_URING
    aco_rt_co_t* co = rt_self();
    if (rt_unlikely(co == NULL || n == 0 || n > SSIZE_MAX)) return NOT_FLAT;
    aco_rt_sched_t* s = co->s;
    rt_fd_t* e = rt_fd_peek(&s->fds, fd);
    if (e == NULL || (e->fmode & (FM_KNOWN | FM_DIRECT | FM_NOTREG)) != (FM_KNOWN | FM_DIRECT))
        return NOT_FLAT;
    uint8_t age = (uint8_t)(e->fage + 1);
    if ((age & 63) == 0 || !rt_ur_f_on(s, write ? RT_F_WRITE : RT_F_READ)) return NOT_FLAT;
    /* prw's order: a cancel, the buffer (checked mode's report), then the
     * deadline */
    if (rt_unlikely(rt_co_cancelled(co))) return -ECANCELED;
    if (rt_on_share_stack(co, buf, n, !write)) return NOT_FLAT;
    long r = rt_may_block(co, deadline);
    if (r) return r;
    e->fage = age;
    int fixed;
    struct io_uring_sqe* sqe = prep_one(s, write, fd, buf, n, off, 0, &fixed);
    s->st.file_uring++;
    s->fbuf.inflight += (uint32_t)fixed;
    r = rt_ur_data_op(co, sqe, fd, deadline);
    s->fbuf.inflight -= (uint32_t)fixed;
    return r == -EAGAIN || r == RT_UR_AGAIN ? NOT_FLAT : r;
#else
    (void)write; (void)fd; (void)buf; (void)n; (void)off; (void)deadline;
    return NOT_FLAT;
#endif
}

/* A NULL buffer of a non-zero size, or a size over SSIZE_MAX (no buffer
 * has it: the kernel's access check): -EFAULT, after -EPERM and
 * -ECANCELED (io.c's rule). */
__attribute__((noinline, cold)) static ssize_t null_buf(void) {
    aco_rt_co_t* co = rt_self();
    if (co == NULL) return -EPERM;
    return rt_co_cancelled(co) ? -ECANCELED : -EFAULT;
}

/* pread(2) or pwrite(2) of no bytes, at once.  On a device (a pipe, a
 * socket...) the call itself, whose answer is the driver's (pwrite of
 * none on /dev/full says ENOSPC, where pwritev2 of an empty vector says
 * 0); on a file as an empty vector's, which the kernel answers before it
 * asks the file system (a FUSE file's pread of none asks its server for
 * the size: a wait in this thread). */
__attribute__((noinline, cold)) static ssize_t p_none(int write, int fd, const void* buf,
                                                      int64_t off) {
    CO_OR_EPERM(co);
    int cached;
    struct iovec v = {(void*)buf, 0};
    long r = fd_mode(co->s, fd, &cached) & FM_NOTREG ? rt_sys_pio(write, fd, buf, 0, off)
                                                     : rt_sys_prw(write, fd, &v, 1, off, 0);
    return r < 0 ? -errno : r;
}

ssize_t aco_rt_pread(int fd, void* buf, size_t n, int64_t off, int64_t deadline) {
    if (off < 0) return rt_self() ? -EINVAL : -EPERM;
    if (rt_unlikely((buf == NULL && n) || n > SSIZE_MAX)) return null_buf();
    if (rt_unlikely(n == 0)) return p_none(0, fd, buf, off);
    ssize_t r = prw_flat(0, fd, buf, n, off, deadline);
    if (rt_unlikely(r == NOT_FLAT)) {
        struct iovec v = {buf, n};
        return prw(0, fd, &v, 1, off, 0, deadline);
    }
    if (rt_likely(r <= 0 || (size_t)r == n)) return r;
    /* short (pread(2) on a file is, only at its end): the rest as way_all */
    struct iovec rest = {(char*)buf + r, n - (size_t)r};
    ssize_t k = prw(0, fd, &rest, 1, off + r, 0, deadline);
    return k > 0 ? r + k : r;
}

ssize_t aco_rt_pwrite(int fd, const void* buf, size_t n, int64_t off, int64_t deadline) {
    if (off < 0) return rt_self() ? -EINVAL : -EPERM;
    if (rt_unlikely((buf == NULL && n) || n > SSIZE_MAX)) return null_buf();
    if (rt_unlikely(n == 0)) return p_none(1, fd, buf, off);
    ssize_t r = prw_flat(1, fd, (void*)buf, n, off, deadline);
    if (rt_likely(r != NOT_FLAT)) return r;
    struct iovec v = {(void*)buf, n};
    return prw(1, fd, &v, 1, off, 0, deadline);
}

ssize_t aco_rt_preadv(int fd, const struct iovec* iov, int iovcnt, int64_t off, int flags,
                      int64_t deadline) {
    return prw(0, fd, iov, iovcnt, off, flags, deadline);
}

ssize_t aco_rt_pwritev(int fd, const struct iovec* iov, int iovcnt, int64_t off, int flags,
                       int64_t deadline) {
    return prw(1, fd, iov, iovcnt, off, flags, deadline);
}

/* ------------------------------------------------------------------------ */
/* [meta] calls                                                             */
/* ------------------------------------------------------------------------ */

/* A record for w with room for the paths a and b (may be NULL) copied in:
 * NULL with *err. */
static fop_t* meta_new(unsigned w, const char* a, const char* b, int* err) {
    size_t la = a ? strnlen(a, PATH_MAX) : 0, lb = b ? strnlen(b, PATH_MAX) : 0;
    if (la >= PATH_MAX || lb >= PATH_MAX) {
        *err = -ENAMETOOLONG;
        return NULL;
    }
    fop_t* f = fop_new(w, (a ? la + 1 : 0) + (b ? lb + 1 : 0));
    if (f == NULL) {
        *err = -ENOMEM;
        return NULL;
    }
    char* t = f->tail;
    if (a) { memcpy(t, a, la + 1); f->p1 = t; t += la + 1; }
    if (b) { memcpy(t, b, lb + 1); f->p2 = t; }
    return f;
}

/* Run f ([meta]) and free it unless the operation kept it. */
static long meta_run(aco_rt_co_t* co, fop_t* f, int64_t deadline) {
    int gone;
    long r = fop_run(co, f, 1, deadline, &gone);
    if (!gone) fop_free(f);
    return r;
}

#define META_BEGIN(w, a, b)                                     \
    CO_OR_EPERM(co);                                            \
    if (rt_passed(deadline)) return -ETIMEDOUT;                 \
    int err_ = 0;                                               \
    fop_t* f = meta_new((w), (a), (b), &err_);                  \
    if (f == NULL) return err_

int aco_rt_fsync(int fd, int64_t deadline) {
    META_BEGIN(RT_F_FSYNC, NULL, NULL);
    f->fd = fd;
    return (int)meta_run(co, f, deadline);
}

int aco_rt_fdatasync(int fd, int64_t deadline) {
    META_BEGIN(RT_F_FSYNC, NULL, NULL);
    f->fd = fd;
    f->flags = 1;
    return (int)meta_run(co, f, deadline);
}

int aco_rt_sync_file_range(int fd, int64_t off, int64_t nbytes, unsigned flags, int64_t deadline) {
    META_BEGIN(RT_F_SFR, NULL, NULL);
    /* io_uring's length is 32 bits: larger ranges (and the kernel's own
     * -EINVAL for a negative one) go to a helper */
    f->no_uring = nbytes < 0 || nbytes > UINT32_MAX;
    f->fd = fd;
    f->off = off;
    f->len = nbytes;
    f->uflags = flags;
    return (int)meta_run(co, f, deadline);
}

int aco_rt_fallocate(int fd, int mode, int64_t off, int64_t len, int64_t deadline) {
    META_BEGIN(RT_F_FALLOC, NULL, NULL);
    f->fd = fd;
    f->flags = mode;
    f->off = off;
    f->len = len;
    return (int)meta_run(co, f, deadline);
}

int aco_rt_ftruncate(int fd, int64_t len, int64_t deadline) {
    META_BEGIN(RT_F_FTRUNC, NULL, NULL);
    f->fd = fd;
    f->len = len;
    return (int)meta_run(co, f, deadline);
}

/* A descriptor opened: its entry is made fresh (O_DIRECT as asked). */
static int opened(aco_rt_co_t* co, long r, int flags) {
    if (r < 0) return (int)r;
    rt_fd_t* e = rt_fd_get(&co->s->fds, (int)r);
    if (e) {
        if (e->registered || e->busy || e->rx) co->s->backend.ops->closing(co->s, (int)r, 1);
        rt_fd_forget(e);
        e->fmode = (uint8_t)(FM_KNOWN | (flags & O_DIRECT ? FM_DIRECT : 0));
        e->fage = 1;
    }
    return (int)r;
}

/* io_uring opens with O_NONBLOCK first (then clears it), so a FIFO does
 * not wait for its other end there: for writing it fails with ENXIO (done
 * again on a helper, which waits for a reader as openat(2) does); for
 * reading it opens at once, and no call can tell a writer that has opened
 * and not yet written from none: the open returns once a writer has
 * written or come and gone (POLLIN, POLLHUP), said in the header.  (A
 * second, blocking open would need a second writer if the first came and
 * went meanwhile.)  1: open the way of a helper. */
static int fifo_fix(aco_rt_co_t* co, unsigned w, long* r, int flags, int64_t deadline) {
    if (way(co->s, w) != WAY_URING || (flags & (O_NONBLOCK | O_PATH | O_DIRECTORY))) return 0;
    if (*r == -ENXIO) return (flags & O_ACCMODE) == O_WRONLY;
    if (*r < 0 || (flags & O_ACCMODE) != O_RDONLY) return 0;
    rt_sys_fid_t id;
    if (rt_sys_fid((int)*r, &id) != 0 || !S_ISFIFO(id.mode)) return 0;
#ifdef ACO_RT_HAVE_URING
    /* The wait is a [meta] operation whose record owns the descriptor
     * until the co takes it: a co that leaves (deadline, cancel, its
     * scheduler freed) leaves nothing open. */
    fop_t* f = fop_new(RT_F_N, 0);
    if (f == NULL) {
        rt_sys_close((int)*r);
        *r = -ENOMEM;
        return 0;
    }
    f->own_fd = (int)*r;
    f->m.orphan = fop_orphan;
    struct io_uring_sqe* sqe = rt_ur_sqe(co->s);
    io_uring_prep_poll_add(sqe, f->own_fd, POLLIN);
    int gone;
    int e = rt_ur_meta_op(co, sqe, &f->m, deadline, &gone);
    if (e == RT_UR_AGAIN) e = -EAGAIN;          /* (a poll: no worker's) */
    if (gone) {
        *r = e;
        return 0;
    }
    if (e < 0) {
        rt_sys_close(f->own_fd);
        *r = e;
    }
    fop_free(f);
#else
    (void)deadline;     /* (without io_uring no call gets here) */
#endif
    return 0;
}

static int open_(unsigned w, int dirfd, const char* path, int flags, mode_t mode,
                 const struct open_how* how, int64_t deadline) {
    for (int pass = 0;; pass++) {
        META_BEGIN(w, path, NULL);
        f->fd = dirfd;
        f->flags = flags;
        f->mode = mode;
        if (how) {
            f->how = *how;
            f->howsz = sizeof(*how);
        }
        f->no_uring = (uint8_t)pass;
        long r = meta_run(co, f, deadline);
        if (pass == 0 && fifo_fix(co, w, &r, flags, deadline)) continue;
        return opened(co, r, flags);
    }
}

int aco_rt_openat(int dirfd, const char* path, int flags, mode_t mode, int64_t deadline) {
    if (path == NULL) return rt_self() ? -EFAULT : -EPERM;
    return open_(RT_F_OPENAT, dirfd, path, flags, mode, NULL, deadline);
}

int aco_rt_openat2(int dirfd, const char* path, const struct open_how* how, size_t size,
                   int64_t deadline) {
    if (path == NULL || how == NULL) return rt_self() ? -EFAULT : -EPERM;
    if (size < sizeof(struct open_how)) return rt_self() ? -EINVAL : -EPERM;
    if (size > (size_t)sysconf(_SC_PAGESIZE)) return rt_self() ? -E2BIG : -EPERM;
    /* (a larger struct's extra bytes must be zero: openat2(2)'s E2BIG) */
    for (size_t i = sizeof(struct open_how); i < size; i++)
        if (((const char*)how)[i]) return rt_self() ? -E2BIG : -EPERM;
    return open_(RT_F_OPENAT2, dirfd, path, (int)how->flags, 0, how, deadline);
}

int aco_rt_statx(int dirfd, const char* path, int flags, unsigned mask, struct statx* buf,
                 int64_t deadline) {
    if (path == NULL && (flags & AT_EMPTY_PATH)) path = "";     /* (as Linux 6.11 takes it) */
    if (path == NULL || buf == NULL) return rt_self() ? -EFAULT : -EPERM;
    META_BEGIN(RT_F_STATX, path, NULL);
    f->fd = dirfd;
    f->flags = flags;
    f->mask = mask;
    int gone;
    long r = fop_run(co, f, 1, deadline, &gone);
    if (gone) return (int)r;
    if (r == 0) {
        if (rt_unlikely(aco_checked())) aco_checked_access(buf, sizeof(*buf), 1);
        *buf = f->stx;
    }
    fop_free(f);
    return (int)r;
}

int aco_rt_unlinkat(int dirfd, const char* path, int flags, int64_t deadline) {
    if (path == NULL) return rt_self() ? -EFAULT : -EPERM;
    META_BEGIN(RT_F_UNLINK, path, NULL);
    f->fd = dirfd;
    f->flags = flags;
    return (int)meta_run(co, f, deadline);
}

int aco_rt_renameat2(int olddirfd, const char* oldpath, int newdirfd, const char* newpath,
                     unsigned flags, int64_t deadline) {
    if (oldpath == NULL || newpath == NULL) return rt_self() ? -EFAULT : -EPERM;
    META_BEGIN(RT_F_RENAME, oldpath, newpath);
    f->fd = olddirfd;
    f->fd2 = newdirfd;
    f->uflags = flags;
    return (int)meta_run(co, f, deadline);
}

int aco_rt_renameat(int olddirfd, const char* oldpath, int newdirfd, const char* newpath,
                    int64_t deadline) {
    return aco_rt_renameat2(olddirfd, oldpath, newdirfd, newpath, 0, deadline);
}

int aco_rt_mkdirat(int dirfd, const char* path, mode_t mode, int64_t deadline) {
    if (path == NULL) return rt_self() ? -EFAULT : -EPERM;
    META_BEGIN(RT_F_MKDIR, path, NULL);
    f->fd = dirfd;
    f->mode = mode;
    return (int)meta_run(co, f, deadline);
}

int aco_rt_symlinkat(const char* target, int newdirfd, const char* linkpath, int64_t deadline) {
    if (target == NULL || linkpath == NULL) return rt_self() ? -EFAULT : -EPERM;
    META_BEGIN(RT_F_SYMLINK, target, linkpath);
    f->fd = newdirfd;
    return (int)meta_run(co, f, deadline);
}

int aco_rt_linkat(int olddirfd, const char* oldpath, int newdirfd, const char* newpath, int flags,
                  int64_t deadline) {
    if (oldpath == NULL || newpath == NULL) return rt_self() ? -EFAULT : -EPERM;
    META_BEGIN(RT_F_LINK, oldpath, newpath);
    f->fd = olddirfd;
    f->fd2 = newdirfd;
    f->flags = flags;
    return (int)meta_run(co, f, deadline);
}

/* ------------------------------------------------------------------------ */
/* splice, tee, sendfile                                                    */
/* ------------------------------------------------------------------------ */

enum { K_FILE, K_PIPE, K_SOCK, K_OTHER };
static int fd_type(int fd, int* err) {
    rt_sys_fid_t id;
    if (rt_sys_fid(fd, &id) < 0) {
        *err = -errno;
        return K_OTHER;
    }
    return S_ISREG(id.mode) ? K_FILE : S_ISFIFO(id.mode) ? K_PIPE
         : S_ISSOCK(id.mode) ? K_SOCK : K_OTHER;
}

/* Are the bytes [off, off + len) of fd all in the page cache?  cachestat
 * (Linux 6.5); older kernels: mincore(2) of a mapping of the range, made
 * and unmade for the question (a few microseconds; a file that cannot be
 * mapped, as FUSE's direct_io ones, is taken as not cached: a helper).
 * Both answer only for a file the caller owns or may write (cachestat
 * refuses with EPERM, mincore says every page is there): any other file
 * is taken as not cached (may_write's test errs that way: no ACLs). */
static int may_write(int fd) {
    struct stat st;
    if (fstat(fd, &st) != 0) return 0;
    uid_t u = geteuid();
    return u == 0 || st.st_uid == u || (st.st_mode & S_IWOTH) ||
           ((st.st_mode & S_IWGRP) && st.st_gid == getegid());
}
static int nocachestat;
static int cached(int fd, int64_t off, size_t len) {
    if (off < 0 || len == 0) return 0;
    uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t first = (uint64_t)off / pg * pg;
    uint64_t pages = ((uint64_t)off + len + pg - 1) / pg - (uint64_t)off / pg;
    if (!__atomic_load_n(&nocachestat, __ATOMIC_RELAXED)) {
        struct { uint64_t off, len; } range = {(uint64_t)off, len};
        struct { uint64_t cache, dirty, writeback, evicted, recently_evicted; } cs;
        if (SC(SYS_cachestat, fd, &range, &cs, 0, 0, 0) == 0) {
            if (cs.cache >= pages) return 1;
            /* (a range past the end of the file: only its pages count) */
            struct statx x;
            if (SC(SYS_statx, fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_SIZE, &x, 0) < 0 ||
                x.stx_size >= (uint64_t)off + len)
                return 0;
            return x.stx_size <= (uint64_t)off ||
                   cs.cache >= (x.stx_size + pg - 1) / pg - (uint64_t)off / pg;
        }
        if (errno != ENOSYS) return 0;
        __atomic_store_n(&nocachestat, 1, __ATOMIC_RELAXED);
    }
    if (pages > 4096 || !may_write(fd)) return 0;   /* (16 MiB: the vector on the stack) */
    size_t maplen = (size_t)(pages * pg);
    void* m = mmap64(NULL, maplen, PROT_READ, MAP_SHARED, fd, (off64_t)first);
    if (m == MAP_FAILED) return 0;
    unsigned char vec[4096];
    int in = mincore(m, maplen, vec) == 0;
    for (uint64_t i = 0; in && i < pages; i++) in = vec[i] & 1;
    munmap(m, maplen);
    return in;
}

/* A splice or tee that must not block the thread (SPLICE_F_NONBLOCK, the
 * pipe and socket ends O_NONBLOCK): here when no file end would wait for
 * the disk, else on a helper.  -EAGAIN: a pipe or socket end is not
 * ready: wait for it and go again. */
static ssize_t move_way(aco_rt_co_t* co, unsigned w, int in, int kin, int64_t* oin, int out,
                        int kout, int64_t* oout, size_t len, unsigned flags, int64_t deadline) {
    for (;;) {
        long r = rt_may_block(co, deadline);
        if (r) return r;
        int here = kout != K_FILE && (kin != K_FILE || cached(in, oin ? *oin : -1, len));
        if (here) {
            loff_t a = oin ? *oin : 0, b = oout ? *oout : 0;
            rt_sigpipe_t h;             /* (out: a pipe, or a socket) */
            rt_sigpipe_hold(&h);
            r = w == RT_F_TEE ? SC(SYS_tee, in, out, len, flags | SPLICE_F_NONBLOCK, 0, 0)
                              : SC(SYS_splice, in, oin ? &a : NULL, out, oout ? &b : NULL, len,
                                   flags | SPLICE_F_NONBLOCK);
            r = r < 0 ? -errno : r;
            rt_sigpipe_release(&h, r == -EPIPE);
            if (r >= 0) co->s->st.file_nowait++;
        } else {
            fop_t* f = fop_new(w, 0);
            if (f == NULL) return -ENOMEM;
            f->fd = in;
            f->fd2 = out;
            f->has_off = oin != NULL;
            f->has_off2 = oout != NULL;
            f->off = oin ? *oin : 0;
            f->off2 = oout ? *oout : 0;
            f->len = (int64_t)len;
            f->uflags = flags | SPLICE_F_NONBLOCK;
            f->no_uring = 1;    /* (the ring's way is not to be, or failed) */
            int gone;
            r = fop_run(co, f, 0, deadline, &gone);
            if (gone) return r;
            int refused = r == -EAGAIN && f->res == NOT_RUN;   /* (no helper) */
            fop_free(f);
            if (refused) return r;
        }
        if (r != -EAGAIN) return r;
        /* which end is not ready? */
        struct pollfd p = {in, POLLIN, 0};
        int fd = out, ev = POLLOUT;
        if (kin != K_FILE && rt_sys_poll0(&p, 1) == 0) fd = in, ev = POLLIN;
        else if (kout == K_FILE) return -EAGAIN;    /* (cannot be: a file end is ready) */
        r = co->s->backend.ops->wait_fd(co, fd, ev, deadline);
        if (r < 0) return r;
    }
}

/* splice or tee as io_uring's operation.  An end the program made
 * O_NONBLOCK makes it say EAGAIN: wait for the end that is not ready, and
 * go again.  RT_UR_AGAIN: the ring did not run it (no io-wq worker, a
 * close of a dup's number): the caller goes the other way. */
static ssize_t uring_move(aco_rt_co_t* co, unsigned w, int in, int64_t oin, int out, int64_t oout,
                          size_t len, unsigned flags, int64_t deadline) {
#ifdef ACO_RT_HAVE_URING
    for (;;) {
        long r = rt_may_block(co, deadline);
        if (r) return r;
        struct io_uring_sqe* sqe = rt_ur_sqe(co->s);
        if (w == RT_F_TEE) io_uring_prep_tee(sqe, in, out, (unsigned)len, flags);
        else io_uring_prep_splice(sqe, in, oin, out, oout, (unsigned)len, flags);
        co->s->st.file_uring++;
        r = rt_ur_data_op(co, sqe, in, deadline);
        if (r != -EAGAIN) return r;     /* (RT_UR_AGAIN too) */
        struct pollfd p[2] = {{in, POLLIN, 0}, {out, POLLOUT, 0}};
        rt_sys_poll0(p, 2);
        int fd = !(p[0].revents & (POLLIN | POLLHUP | POLLERR)) ? in : out;
        if (fd == out && (p[1].revents & (POLLOUT | POLLERR))) continue;   /* both ready now */
        r = co->s->backend.ops->wait_fd(co, fd, fd == in ? POLLIN : POLLOUT, deadline);
        if (r < 0) return r;
    }
#else
    (void)co; (void)w; (void)in; (void)oin; (void)out; (void)oout; (void)len; (void)flags;
    (void)deadline;
    return -ENOSYS;
#endif
}

static int nonblock_ends(int k, int fd) {
    return (k == K_PIPE || k == K_SOCK) ? rt_fd_nonblock(fd) : 0;
}

/* The flags splice(2) and tee(2) take from a caller: SPLICE_F_NONBLOCK is
 * the runtime's, and a bit they do not know is their EINVAL (io_uring's
 * reads bit 31 as "fd_in is a registered file": EBADF): splice's after a
 * len of 0 (its 0), tee's before, as the system calls look. */
#define SPLICE_OK (SPLICE_F_MOVE | SPLICE_F_MORE | SPLICE_F_GIFT)

ssize_t aco_rt_splice(int fd_in, int64_t* off_in, int fd_out, int64_t* off_out, size_t len,
                      unsigned flags, int64_t deadline) {
    CO_OR_EPERM(co);
    if (flags & SPLICE_F_NONBLOCK) return -EINVAL;
    if (rt_passed(deadline)) return -ETIMEDOUT;
    if (len == 0) return 0;                     /* (splice(2) says 0 first) */
    if (flags & ~SPLICE_OK) return -EINVAL;
    int64_t a = off_in ? *off_in : 0, b = off_out ? *off_out : 0;
    if ((off_in && a < 0) || (off_out && b < 0)) return -EINVAL;
    if (len > (1u << 30)) len = 1u << 30;
    ssize_t r = RT_UR_AGAIN;
    if (way(co->s, RT_F_SPLICE) == WAY_URING)
        r = uring_move(co, RT_F_SPLICE, fd_in, off_in ? a : -1, fd_out, off_out ? b : -1, len,
                       flags, deadline);
    if (r == RT_UR_AGAIN) {
        int err = 0;
        int kin = fd_type(fd_in, &err), kout = fd_type(fd_out, &err);
        if (err) return err;
        if (kin != K_PIPE && kout != K_PIPE) {
            /* splice(2)'s own answer, which waits for nothing without a
             * pipe: EBADF first for an end not open for its direction,
             * then EINVAL (io_uring's way gives the same); a count only
             * if a pipe came under a number since fd_type looked */
            loff_t a2 = a, b2 = b;
            rt_sigpipe_t h;
            rt_sigpipe_hold(&h);
            r = SC(SYS_splice, fd_in, off_in ? &a2 : NULL, fd_out, off_out ? &b2 : NULL, len,
                   flags | SPLICE_F_NONBLOCK);
            r = r < 0 ? -errno : r;
            rt_sigpipe_release(&h, r == -EPIPE);
            if (r < 0) return r;
        } else {
            if ((err = nonblock_ends(kin, fd_in)) || (err = nonblock_ends(kout, fd_out)))
                return err;
            r = move_way(co, RT_F_SPLICE, fd_in, kin, off_in ? &a : NULL, fd_out, kout,
                         off_out ? &b : NULL, len, flags, deadline);
        }
    }
    if (r > 0) {
        if (off_in) *off_in = a + r;
        if (off_out) *off_out = b + r;
    }
    return r;
}

ssize_t aco_rt_tee(int fd_in, int fd_out, size_t len, unsigned flags, int64_t deadline) {
    CO_OR_EPERM(co);
    if (flags & ~SPLICE_OK) return -EINVAL;
    if (rt_passed(deadline)) return -ETIMEDOUT;
    if (len == 0) return 0;
    if (len > (1u << 30)) len = 1u << 30;
    if (way(co->s, RT_F_TEE) == WAY_URING) {
        ssize_t r = uring_move(co, RT_F_TEE, fd_in, -1, fd_out, -1, len, flags, deadline);
        if (r != RT_UR_AGAIN) return r;
    }
    int err = 0;
    int kin = fd_type(fd_in, &err), kout = fd_type(fd_out, &err);
    if (err) return err;
    if (kin != K_PIPE || kout != K_PIPE) {
        /* tee(2)'s own answer (EBADF, then EINVAL), as splice's above */
        rt_sigpipe_t h;
        rt_sigpipe_hold(&h);
        long r = SC(SYS_tee, fd_in, fd_out, len, flags | SPLICE_F_NONBLOCK, 0, 0);
        r = r < 0 ? -errno : r;
        rt_sigpipe_release(&h, r == -EPIPE);
        return r;
    }
    if ((err = rt_fd_nonblock(fd_in)) || (err = rt_fd_nonblock(fd_out))) return err;
    return move_way(co, RT_F_TEE, fd_in, kin, NULL, fd_out, kout, NULL, len, flags, deadline);
}

ssize_t aco_rt_sendfile(int out_fd, int in_fd, int64_t* offset, size_t count, int64_t deadline) {
    CO_OR_EPERM(co);
    if (count > SSIZE_MAX) count = SSIZE_MAX;   /* (a count that fits the result) */
    if (count == 0) {               /* sendfile(2)'s own answer, at once */
        rt_sf_off_t o = offset ? (rt_sf_off_t)*offset : 0;
        long r = SYS_SENDFILE(out_fd, in_fd, offset ? &o : NULL, 0);
        return r < 0 ? -errno : r;
    }
    if (rt_passed(deadline)) return -ETIMEDOUT;
    int err = 0;
    /* (a socket the table knows costs no look) */
    rt_fd_t* e = rt_fd_get(&co->s->fds, out_fd);
    int kout = e && rt_fd_kind(e, out_fd) == RT_FD_SOCK ? K_SOCK : fd_type(out_fd, &err);
    if (err) return err;
    if ((err = nonblock_ends(kout, out_fd))) return err;
    int64_t o = offset ? *offset : -1;
    if (o < -1 || (offset && o < 0)) return -EINVAL;
    /* (in_fd at its position: one that has none, a pipe or socket, is
     * sendfile(2)'s EINVAL, not lseek's ESPIPE; but first, as there, its
     * EBADF for one not open for reading: a pipe's write end) */
    if (o == -1 && (o = lseek(in_fd, 0, SEEK_CUR)) < 0) {
        if (errno != ESPIPE) return -errno;
        int fl = fcntl(in_fd, F_GETFL);
        return fl >= 0 && (fl & O_ACCMODE) == O_WRONLY ? -EBADF : -EINVAL;
    }
    size_t done = 0;
    ssize_t r = 0;
    /* The whole range cached at the start: sent from the thread to its end
     * (each wait for the socket asks no more), else chunk by chunk */
    int hot = kout != K_FILE && cached(in_fd, o, count);
    while (done < count) {
        size_t chunk = count - done > (8u << 20) ? (8u << 20) : count - done;
        if ((r = rt_may_block(co, deadline)) != 0) break;
        if (hot || (kout != K_FILE && cached(in_fd, o, chunk))) {
            rt_sf_off_t x = (rt_sf_off_t)o;
            rt_sigpipe_t h;             /* (out: a pipe, or a socket) */
            rt_sigpipe_hold(&h);
            r = SYS_SENDFILE(out_fd, in_fd, &x, chunk);
            r = r < 0 ? -errno : r;
            rt_sigpipe_release(&h, r == -EPIPE);
            if (r >= 0) co->s->st.file_nowait++;
        } else {
            fop_t* f = fop_new(RT_F_SENDFILE, 0);
            if (f == NULL) { r = -ENOMEM; break; }
            f->fd = in_fd;
            f->fd2 = out_fd;
            f->has_off = 1;
            f->off = o;
            f->len = (int64_t)chunk;
            f->no_uring = 1;
            int gone;
            r = fop_run(co, f, 0, deadline, &gone);
            if (!gone) {
                int refused = r == -EAGAIN && f->res == NOT_RUN;   /* (no helper) */
                fop_free(f);
                if (refused) break;
            }
        }
        if (r > 0) {
            done += (size_t)r;
            o += r;
            continue;
        }
        if (r == 0) break;                          /* the end of in_fd */
        if (r != -EAGAIN || kout == K_FILE) break;
        if ((r = co->s->backend.ops->wait_fd(co, out_fd, POLLOUT, deadline)) < 0) break;
    }
    if (offset) *offset = o;
    else if (done) lseek(in_fd, o, SEEK_SET);
    return done ? (ssize_t)done : r;
}

int aco_rt_shutdown(int fd, int how, int64_t deadline) {
    (void)deadline;
    CO_OR_EPERM(co);
    (void)co;
    return SC(SYS_shutdown, fd, how, 0, 0, 0, 0) < 0 ? -errno : 0;
}
