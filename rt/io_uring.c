/* io_uring.c - the io_uring backend.
 *
 * One ring per scheduler, set up SINGLE_ISSUER | DEFER_TASKRUN where the
 * kernel has them (completions are then run in our io_uring_enter, never
 * interrupting the thread).  A co's operation is an SQE whose user_data is
 * the co: one operation per co at a time, its record (in the heap) is the
 * per-operation state.  SQEs wait in the ring until the scheduler's next
 * poll, which submits them all and reaps completions in one system call.
 *
 * Deadlines and cancels ask the kernel to cancel the operation
 * (ASYNC_CANCEL by user_data) and keep the co parked until the operation's
 * own completion arrives: the kernel may still write the buffer until then.
 * If the operation completed anyway, its result stands (no data is lost).
 *
 * A multishot receive of a lending descriptor (lend.c) has its rx record,
 * tagged with the low bit, as user_data: complete() hands its completions
 * to lend.c.
 *
 * Buffers on a share stack never get here (io.c): SQEs are submitted later,
 * when another co may own that stack.  For those, and for descriptors
 * somebody made non-blocking (the operation then fails with EAGAIN),
 * RT_OP_POLL waits for readiness.
 */
#define _GNU_SOURCE
#include "rt_impl.h"
#include "rt_io.h"
#include "rt_sys.h"

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>

const char* const rt_f_names[RT_F_N] = {
    "read", "write", "fsync", "sync_file_range", "fallocate", "ftruncate", "openat", "openat2",
    "statx", "unlinkat", "renameat", "mkdirat", "symlinkat", "linkat", "splice", "tee",
    "sendfile", "sendmsg", "recvmsg", "shutdown",
};

#ifdef ACO_RT_HAVE_URING
#include <liburing.h>

typedef struct rt_ur_pblk rt_ur_pblk_t;

typedef struct {
    struct io_uring ring;
    uint64_t        evbuf;      /* the eventfd's count, read by the kernel */
    int             cqe_skip;   /* IORING_FEAT_CQE_SKIP: a cancel that
                                   works posts no completion of its own */
    rt_ur_pblk_t*   blocks;     /* aco_rt_poll's blocks: of cos that wait,
                                   and of cos gone with operations still in
                                   the kernel (freed by the last one's
                                   completion), or of a co woken and then
                                   destroyed (aco_rt_sched_free): ur_fini */
    uint32_t        f_on;       /* the file calls' operations (RT_F_*) the
                                   kernel has and $ACO_RT_URING_OFF leaves */
    rt_ur_meta_t*   metas;      /* [meta] file operations in the kernel
                                   (file.c), of cos or orphans */
    uint32_t        files;      /* [data] file operations in the kernel
                                   (and reads and writes of what is not
                                   a socket: op_wait):
                                   ur_fini waits for them (they write the
                                   buffers of cos that may be gone) */
    int             rsrc_tags;  /* IORING_FEAT_RSRC_TAGS (5.13): buffers
                                   register without waiting for the ring
                                   to go quiet */
    int             cancel_keys; /* ASYNC_CANCEL by file, all matches, any
                                   (5.19); before, one operation by its
                                   user_data, and any flag says EINVAL */
    int             reaping;    /* in reap(): completions being handed on */
} ur_t;

/* user_data of a [data] file operation: its co (16-aligned), tagged, so
 * that ur_fini can count their ends after the cos are gone. */
#define FILE_TAG 8
static inline void* op_data(const aco_rt_co_t* co) {
    return (void*)((uintptr_t)co | (co->wait == RT_W_UR_FILE ? FILE_TAG : 0));
}

/* user_data of a [meta] file operation: its record, tagged. */
#define META_TAG 4

/* aco_rt_poll: a POLL_ADD per descriptor, all of one heap block (the
 * co's wait_obj), each with its entry's address, tagged PENT_TAG, as
 * user_data.  The first completion wakes the co; the co cancels the
 * others and goes (the block is an orphan until the last of them
 * completes: a poll writes no memory of ours, so nobody waits for that). */
#define PENT_TAG 2
typedef struct {
    rt_ur_pblk_t* b;
    int           fd;
    uint32_t      gen;          /* fd's table generation */
    uint8_t       live;         /* its POLL_ADD is in the kernel */
    uint8_t       cancelled;    /* and a cancel of it was asked */
    uint8_t       lent;         /* counted in its entry's pollers (lend.c) */
    uint8_t       closed;       /* ended by a close of its descriptor */
    unsigned      idx;          /* its entry in the caller's array */
} ur_pent_t;
struct rt_ur_pblk {
    aco_rt_co_t*  co;           /* NULL once the co went */
    rt_ur_pblk_t* next;         /* ur_t's blocks */
    rt_ur_pblk_t* prev;
    unsigned      n;
    unsigned      live;         /* entries live */
    ur_pent_t     e[];
};

/* user_data of the read on the scheduler's eventfd (other threads'
 * messages): a read, re-armed when it completes.  Its buffer is in the
 * heap (ur_t). */
#define EV_DATA ((void*)&rt_backend_uring)

static void arm_evfd(aco_rt_sched_t* s, ur_t* u) {
    struct io_uring_sqe* sqe = io_uring_get_sqe(&u->ring);
    if (sqe == NULL) { io_uring_submit(&u->ring); sqe = io_uring_get_sqe(&u->ring); }
    io_uring_prep_read(sqe, s->run.evfd, &u->evbuf, sizeof(u->evbuf), 0);
    io_uring_sqe_set_data(sqe, EV_DATA);
}

/* The file calls' operations (file.c): the opcode of each RT_F_* (0:
 * none; FTRUNCATE, 6.9, is newer than Debian's liburing 2.3, which lacks
 * its name and helper: the number is the kernel's ABI). */
#define OP_FTRUNCATE 55
static const uint8_t f_opcode[RT_F_N] = {
    [RT_F_READ] = IORING_OP_READ,         [RT_F_WRITE] = IORING_OP_WRITE,
    [RT_F_FSYNC] = IORING_OP_FSYNC,       [RT_F_SFR] = IORING_OP_SYNC_FILE_RANGE,
    [RT_F_FALLOC] = IORING_OP_FALLOCATE,  [RT_F_FTRUNC] = OP_FTRUNCATE,
    [RT_F_OPENAT] = IORING_OP_OPENAT,     [RT_F_OPENAT2] = IORING_OP_OPENAT2,
    [RT_F_STATX] = IORING_OP_STATX,       [RT_F_UNLINK] = IORING_OP_UNLINKAT,
    [RT_F_RENAME] = IORING_OP_RENAMEAT,   [RT_F_MKDIR] = IORING_OP_MKDIRAT,
    [RT_F_SYMLINK] = IORING_OP_SYMLINKAT, [RT_F_LINK] = IORING_OP_LINKAT,
    [RT_F_SPLICE] = IORING_OP_SPLICE,     [RT_F_TEE] = IORING_OP_TEE,
    [RT_F_SENDMSG] = IORING_OP_SENDMSG,   [RT_F_RECVMSG] = IORING_OP_RECVMSG,
};

/* Which of them the kernel has, less those $ACO_RT_URING_OFF names; and
 * *keys, whether its cancels take keys (IORING_ASYNC_CANCEL_FD, _ALL,
 * _ANY): they came in 5.19 with the SOCKET operation, which says so (no
 * feature bit does). */
static uint32_t probe_ops(struct io_uring* ring, int* keys) {
    uint32_t on = 0;
    struct io_uring_probe* p = io_uring_get_probe_ring(ring);
    for (unsigned w = 0; p && w < RT_F_N; w++)
        if (f_opcode[w] && io_uring_opcode_supported(p, f_opcode[w])) on |= 1u << w;
    *keys = p && io_uring_opcode_supported(p, IORING_OP_SOCKET);
    if (p) io_uring_free_probe(p);
    const char* off = getenv("ACO_RT_URING_OFF");
    if (off == NULL) return on;
    for (unsigned w = 0; w < RT_F_N; w++) {
        size_t k = strlen(rt_f_names[w]);
        for (const char* q = off; *q; q += strcspn(q, ","), q += *q == ',') {
            size_t len = strcspn(q, ",");
            if ((len == 3 && memcmp(q, "all", 3) == 0) ||
                (len == k && memcmp(q, rt_f_names[w], k) == 0))
                on &= ~(1u << w);
        }
    }
    return on;
}

int rt_ur_f_on(aco_rt_sched_t* s, unsigned w) {
    return s->backend.ops == &rt_backend_uring && (((ur_t*)s->backend.data)->f_on >> w & 1);
}

/* Rings come and go under one lock.  liburing maps and unmaps them with
 * raw system calls that ThreadSanitizer does not see, so when one thread's
 * new ring lands where another thread's old one was, the old thread's
 * writes and the new thread's look unordered (a false race); the lock
 * orders them, at the cost of one lock per scheduler made or freed. */
static pthread_mutex_t rings_lock = PTHREAD_MUTEX_INITIALIZER;

static int ur_init_locked(aco_rt_sched_t* s, const aco_rt_opts_t* o);

static int ur_init(aco_rt_sched_t* s, const aco_rt_opts_t* o) {
    pthread_mutex_lock(&rings_lock);
    int r = ur_init_locked(s, o);
    pthread_mutex_unlock(&rings_lock);
    return r;
}

static int ur_init_locked(aco_rt_sched_t* s, const aco_rt_opts_t* o) {
    s->backend.ops = &rt_backend_uring;
    ur_t* u = calloc(1, sizeof(*u));
    if (u == NULL) return -ENOMEM;
    struct io_uring_params p;
    unsigned flags[] = {
        IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_CQSIZE |
            IORING_SETUP_SUBMIT_ALL,
        IORING_SETUP_CQSIZE,
    };
    int r = -EINVAL;
    for (unsigned i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
        memset(&p, 0, sizeof(p));
        p.flags = flags[i];
        /* four completions a submission, up to the kernel's most (65536;
         * a submission queue above 32768 is the kernel's EINVAL) */
        p.cq_entries = o->uring_entries <= 16384 ? o->uring_entries * 4 : 65536;
        r = io_uring_queue_init_params(o->uring_entries, &u->ring, &p);
        if (r != -EINVAL) break;
    }
    if (r < 0) { free(u); return r; }
    if (!(p.features & IORING_FEAT_EXT_ARG) || !(p.features & IORING_FEAT_NODROP)) {
        io_uring_queue_exit(&u->ring);
        free(u);
        return -ENOSYS;     /* kernel older than 5.11: use epoll */
    }
    /* The ring's own descriptor registered (5.18 and later; older kernels
     * say EINVAL and it stays a plain one): io_uring_enter then skips the
     * descriptor lookup.  Only this thread enters this ring. */
    io_uring_register_ring_fd(&u->ring);
    /* The ring's workers for operations that may wait (file reads and
     * writes, opens, syncs: io-wq's "bounded" work) are at most 4 per CPU
     * by default: at least as many as the helper threads may be
     * (aco_rt_offload_limits), so that a slow disk is waited on as many
     * times at once on either backend. */
    unsigned maxw[2] = {0, 0};
    if (io_uring_register_iowq_max_workers(&u->ring, maxw) == 0 &&
        maxw[0] < rt_offload_max_threads()) {
        maxw[0] = rt_offload_max_threads();
        maxw[1] = 0;
        io_uring_register_iowq_max_workers(&u->ring, maxw);
    }
    u->cqe_skip = (p.features & IORING_FEAT_CQE_SKIP) != 0;
    u->rsrc_tags = (p.features & IORING_FEAT_RSRC_TAGS) != 0;
    u->f_on = probe_ops(&u->ring, &u->cancel_keys);
    s->backend.data = u;
    arm_evfd(s, u);
    /* A ring the kernel made but will not enter (a seccomp filter that
     * refuses io_uring_enter alone) is no backend: said here, where auto
     * still falls back to epoll, not at the run's first wait. */
    int e = io_uring_submit(&u->ring);
    if (e < 0) {
        io_uring_queue_exit(&u->ring);
        free(u);
        s->backend.data = NULL;
        return e;
    }
    return 0;
}

static void ops_drain(ur_t* u);

static void ur_fini(aco_rt_sched_t* s) {
    ur_t* u = (ur_t*)s->backend.data;
    if (u->metas || u->files) ops_drain(u);
    s->backend.left_ops = u->metas || u->files;       /* (the drain gave up) */
    while (u->blocks) {
        rt_ur_pblk_t* b = u->blocks;
        u->blocks = b->next;
        free(b);
    }
    pthread_mutex_lock(&rings_lock);
    io_uring_queue_exit(&u->ring);
    pthread_mutex_unlock(&rings_lock);
    free(u);
}

static struct io_uring_sqe* get_sqe(aco_rt_sched_t* s) {
    ur_t* u = (ur_t*)s->backend.data;
    struct io_uring_sqe* sqe = io_uring_get_sqe(&u->ring);
    while (sqe == NULL) {       /* the ring is full: hand it to the kernel */
        io_uring_submit(&u->ring);
        sqe = io_uring_get_sqe(&u->ring);
    }
    return sqe;
}

struct io_uring* rt_ur_ring(aco_rt_sched_t* s) { return &((ur_t*)s->backend.data)->ring; }
struct io_uring_sqe* rt_ur_sqe(aco_rt_sched_t* s) { return get_sqe(s); }

/* An operation the kernel cancelled without us (no io-wq worker could
 * start) or a close of another number of its file did: made again (not an
 * errno: complete() to rt_uring_io and rt_uring_accept; the file calls'
 * RT_UR_AGAIN, rt_io.h). */
#define UR_AGAIN RT_UR_AGAIN

/* Cancel pe's poll (its completion comes later, -ECANCELED or its
 * readiness: either ends it).  The cancel's own completion only where it
 * failed, if the kernel can skip it: a wait on 10,000 descriptors ends
 * with 10,000 completions, not 20,000 (the ring's overflow list holds
 * what its completion queue cannot). */
static void pent_cancel(aco_rt_sched_t* s, ur_pent_t* pe) {
    pe->cancelled = 1;
    struct io_uring_sqe* sqe = get_sqe(s);
    io_uring_prep_cancel(sqe, (void*)((uintptr_t)pe | PENT_TAG), 0);
    io_uring_sqe_set_data(sqe, NULL);
    if (((ur_t*)s->backend.data)->cqe_skip) io_uring_sqe_set_flags(sqe, IOSQE_CQE_SKIP_SUCCESS);
}

/* Cancel each entry of b still in the kernel. */
static void pblk_cancel(aco_rt_sched_t* s, rt_ur_pblk_t* b) {
    for (unsigned i = 0; i < b->n; i++)
        if (b->e[i].live && !b->e[i].cancelled) pent_cancel(s, &b->e[i]);
}

static void block_unlink(ur_t* u, rt_ur_pblk_t* b) {
    if (b->prev) b->prev->next = b->next; else u->blocks = b->next;
    if (b->next) b->next->prev = b->prev;
}

/* The co is done with b: freed now, or by its last completion. */
static void pblk_leave(aco_rt_sched_t* s, rt_ur_pblk_t* b) {
    b->co = NULL;
    if (b->live == 0) {
        block_unlink((ur_t*)s->backend.data, b);
        free(b);
        return;
    }
    pblk_cancel(s, b);
}

static void pent_done(aco_rt_sched_t* s, ur_pent_t* pe) {
    rt_ur_pblk_t* b = pe->b;
    pe->live = 0;
    b->live--;
    s->st.io_inflight--;
    rt_fd_t* f = rt_fd_peek(&s->fds, pe->fd);
    if (f && f->gen == pe->gen && f->busy) rt_fd_busy_add(f, -1);
    if (b->co) {
        rt_wake(b->co, 1);      /* (parked in it still, or woken already) */
    } else if (b->live == 0) {
        block_unlink((ur_t*)s->backend.data, b);
        free(b);
    }
}

static void meta_unlink(ur_t* u, rt_ur_meta_t* m) {
    if (m->prev) m->prev->next = m->next; else u->metas = m->next;
    if (m->next) m->next->prev = m->prev;
}

/* A [meta] operation ended: its co takes the result, or, if the co left
 * (deadline, cancel, destroyed), the record's orphan function does. */
static void meta_done(aco_rt_sched_t* s, rt_ur_meta_t* m, int res) {
    meta_unlink((ur_t*)s->backend.data, m);
    s->st.io_inflight--;
    if (m->co == NULL) {
        m->orphan(m, res);
        return;
    }
    /* Cancelled while its co waits: by an aco_rt_close of its descriptor
     * (the number's generation moved), else by the kernel, which could
     * start no io-wq worker for it, or by a close of another number of
     * its file: the caller makes it again (a helper's) */
    if (res == -ECANCELED) {
        rt_fd_t* f = m->fd >= 0 ? rt_fd_peek(&s->fds, m->fd) : NULL;
        res = f && f->gen != m->gen ? -EBADF : UR_AGAIN;
    }
    rt_wake(m->co, res);
}

static void complete(aco_rt_sched_t* s, struct io_uring_cqe* cqe) {
    void* data = io_uring_cqe_get_data(cqe);
    if (data == NULL) return;                   /* a cancel's own completion */
    if ((uintptr_t)data & 1) {                  /* a multishot receive's (lend.c) */
        rt_lend_cqe(s, data, cqe->res, cqe->flags);
        return;
    }
    if (data == EV_DATA) {                      /* a message came: read again */
        if (cqe->res != -ECANCELED) arm_evfd(s, (ur_t*)s->backend.data);
        return;
    }
    if ((uintptr_t)data & PENT_TAG) {           /* an aco_rt_poll's */
        pent_done(s, (ur_pent_t*)((uintptr_t)data & ~(uintptr_t)PENT_TAG));
        return;
    }
    if ((uintptr_t)data & META_TAG) {           /* a [meta] file operation's */
        meta_done(s, (rt_ur_meta_t*)((uintptr_t)data & ~(uintptr_t)META_TAG), cqe->res);
        return;
    }
    if ((uintptr_t)data & FILE_TAG) {
        ((ur_t*)s->backend.data)->files--;
        data = (void*)((uintptr_t)data & ~(uintptr_t)FILE_TAG);
    }
    aco_rt_co_t* co = (aco_rt_co_t*)data;
    int res = cqe->res;
    co->flags &= (uint8_t)~RT_IO_OP;
    s->st.io_inflight--;
    if (co->w.q) rt_wq_remove(&co->w);
    rt_fd_t* f = rt_fd_peek(&s->fds, co->w.io.fd);
    if (f && f->gen == co->w.io.gen && f->busy) rt_fd_busy_add(f, -1);
    /* Cancelled: by us (deadline, cancel, a close: io_abort), else by the
     * kernel (an entry of another generation: its number was closed, or
     * what it was is gone). */
    /* An operation that waited in an io-wq worker (a splice on a pipe)
     * and was cancelled there ends with the worker's interrupted wait:
     * -EINTR, or the kernel's own -ERESTARTSYS (512) and kin, never a
     * user's errno. */
    if (res <= -512 && res >= -516) res = co->io_abort ? -ECANCELED : -EINTR;
    if (res == -EINTR && co->io_abort) res = -ECANCELED;
    if (res == -ECANCELED)
        res = co->io_abort ? co->io_abort : f && f->gen == co->w.io.gen ? UR_AGAIN : -EBADF;
    co->io_abort = 0;
    rt_wake(co, res);
}

/* The completions there are, each handed on. */
static void reap(aco_rt_sched_t* s, ur_t* u) {
    unsigned head, n = 0;
    struct io_uring_cqe* cqe;
    u->reaping = 1;
    io_uring_for_each_cqe(&u->ring, head, cqe) {
        complete(s, cqe);
        n++;
    }
    io_uring_cq_advance(&u->ring, n);
    u->reaping = 0;
}

static int ur_poll(aco_rt_sched_t* s, int64_t timeout) {
    ur_t* u = (ur_t*)s->backend.data;
    int r;
    if (timeout == 0) {
        r = io_uring_submit_and_get_events(&u->ring);
    } else {
        struct io_uring_cqe* cqe;
        struct __kernel_timespec ts, *tsp = NULL;
        if (timeout > 0) {
            ts.tv_sec = timeout / 1000000000;
            ts.tv_nsec = timeout % 1000000000;
            tsp = &ts;
        }
        s->st.polls++;
        r = io_uring_submit_and_wait_timeout(&u->ring, &cqe, 1, tsp, NULL);
    }
    if (r < 0 && r != -ETIME && r != -EINTR && r != -EAGAIN && r != -EBUSY) return r;
    reap(s, u);
    return 0;
}

void rt_ur_abort(aco_rt_co_t* co, int err) {
    if (co->io_abort) return;                   /* already asked */
    co->io_abort = err;
    rt_tmo_stop(co);
    struct io_uring_sqe* sqe = get_sqe(co->s);
    io_uring_prep_cancel(sqe, op_data(co), 0);
    io_uring_sqe_set_data(sqe, NULL);
}

_Static_assert(RT_OP_RECVMSG < RT_W_UR_ACCEPT - RT_W_UR_OP, "the io_uring operations fit before RT_W_UR_ACCEPT");
RT_WAIT_KINDS(ur, {RT_W_UR_OP + RT_OP_READ, {"read", rt_ur_abort, NULL}},
              {RT_W_UR_OP + RT_OP_WRITE, {"write", rt_ur_abort, NULL}},
              {RT_W_UR_OP + RT_OP_READV, {"readv", rt_ur_abort, NULL}},
              {RT_W_UR_OP + RT_OP_WRITEV, {"writev", rt_ur_abort, NULL}},
              {RT_W_UR_OP + RT_OP_RECV, {"recv", rt_ur_abort, NULL}},
              {RT_W_UR_OP + RT_OP_SEND, {"send", rt_ur_abort, NULL}},
              {RT_W_UR_OP + RT_OP_POLL, {"poll", rt_ur_abort, NULL}},
              {RT_W_UR_OP + RT_OP_SENDMSG, {"sendmsg", rt_ur_abort, NULL}},
              {RT_W_UR_OP + RT_OP_RECVMSG, {"recvmsg", rt_ur_abort, NULL}},
              {RT_W_UR_ACCEPT, {"accept", rt_ur_abort, NULL}})

/* A disk wants a steady stream of requests: file operations go to the
 * kernel in fours as their cos park, not all at the loop's next look (a
 * handful of woken cos each queueing one made bursts of a dozen, which
 * a virtio disk served at 0.7x the IOPS at a queue depth of 32; fours
 * cost one io_uring_enter per four operations). */
#define FILE_BATCH 4
static void file_push(aco_rt_sched_t* s) {
    struct io_uring* ring = &((ur_t*)s->backend.data)->ring;
    if (io_uring_sq_ready(ring) >= FILE_BATCH) io_uring_submit(ring);
}

int rt_ur_buffers(aco_rt_sched_t* s, const struct iovec* iov, unsigned n) {
    ur_t* u = (ur_t*)s->backend.data;
    /* 5.11 and 5.12 register buffers only on a quiet ring: they wait for
     * every operation in flight, polls on idle sockets too */
    if (!u->rsrc_tags) return -ENOSYS;
    return n ? io_uring_register_buffers(&u->ring, iov, n) : io_uring_unregister_buffers(&u->ring);
}

/* Submit sqe for co (prepared by the caller) and park until it completes. */
static int op_wait(aco_rt_co_t* co, struct io_uring_sqe* sqe, int wait, int fd,
                   int64_t deadline) {
    rt_fd_t* f = rt_fd_get(&co->s->fds, fd);
    /* a read or write of what is not a socket (a regular file that io-wq
     * reads blocking: FUSE, NFS) may be writing the caller's buffer long
     * after a cancel: counted as the file calls' are, for ur_fini to wait
     * (where its cancel takes them all at once, 5.19: before, a pipe's
     * read left in flight would cost every free the drain's whole second) */
    if (wait >= RT_W_UR_OP && wait <= RT_W_UR_OP + RT_OP_WRITEV && f &&
        rt_fd_kind(f, fd) == RT_FD_OTHER && ((ur_t*)co->s->backend.data)->cancel_keys)
        wait = RT_W_UR_FILE;
    if (wait == RT_W_UR_FILE) {
        io_uring_sqe_set_data(sqe, (void*)((uintptr_t)co | FILE_TAG));
        ((ur_t*)co->s->backend.data)->files++;
    } else {
        io_uring_sqe_set_data(sqe, co);
    }
    co->flags |= RT_IO_OP;
    co->io_abort = 0;
    co->s->st.io_inflight++;
    /* per descriptor, so that closing one without operations costs no
     * cancel; the co's waiter (on no queue while its operation is in the
     * kernel) goes on the descriptor's queue, so that a close finds its
     * operations without a look at every co or the kernel's at every
     * operation in flight (ur_closing) */
    co->w.io.fd = fd;
    co->w.io.gen = f ? f->gen : 0;
    if (f) {
        rt_wq_push(&f->q, &co->w);
        rt_fd_busy_inc_fenced(f);       /* before the kernel takes the file */
    }
    if (wait == RT_W_UR_FILE) file_push(co->s);
    return rt_park(co, wait, (void*)(intptr_t)fd, deadline);
}

/* The wait between a non-blocking descriptor's tries: its readiness, then
 * 0 if the number still holds the file.  An aco_rt_close while the co
 * was ready and not yet run (the number may hold a new file by then,
 * whose bytes are not ours) is -EBADF, as on the readiness way (ready.c);
 * a close another thread sent first is heard. */
static int ready_again(aco_rt_co_t* co, int fd, int ev, int64_t deadline) {
    rt_fd_t* f = rt_fd_get(&co->s->fds, fd);
    uint8_t closes = f ? f->closes : 0;
    int r = (int)rt_uring_io(co, RT_OP_POLL, fd, NULL, 0, ev, deadline);
    if (r < 0) return r;
    if (__atomic_load_n(&co->s->cl.list, __ATOMIC_ACQUIRE)) rt_hook_closes(co->s);
    return f && f->closes != closes ? -EBADF : 0;
}

ssize_t rt_uring_io(aco_rt_co_t* co, int op, int fd, void* buf, size_t n, int flags,
                    int64_t deadline) {
    for (;;) {
        int r = rt_may_block(co, deadline);
        if (r) return r;
        struct io_uring_sqe* sqe = get_sqe(co->s);
        unsigned len = n > (1u << 30) ? (1u << 30) : (unsigned)n;
        switch (op) {
        case RT_OP_READ:   io_uring_prep_read(sqe, fd, buf, len, (uint64_t)-1); break;
        case RT_OP_WRITE:  io_uring_prep_write(sqe, fd, buf, len, (uint64_t)-1); break;
        case RT_OP_READV:  io_uring_prep_readv(sqe, fd, buf, len, (uint64_t)-1); break;
        case RT_OP_WRITEV: io_uring_prep_writev(sqe, fd, buf, len, (uint64_t)-1); break;
        case RT_OP_RECV:   io_uring_prep_recv(sqe, fd, buf, len, flags); break;
        case RT_OP_SEND:   io_uring_prep_send(sqe, fd, buf, len, flags | MSG_NOSIGNAL); break;
        case RT_OP_SENDMSG:
            io_uring_prep_sendmsg(sqe, fd, (const struct msghdr*)buf, (unsigned)flags | MSG_NOSIGNAL);
            break;
        case RT_OP_RECVMSG:
            io_uring_prep_recvmsg(sqe, fd, (struct msghdr*)buf, (unsigned)flags);
            break;
        default:
            io_uring_prep_poll_add(sqe, fd, (unsigned)flags & ~(unsigned)RT_POLL_LENT);
            co->w.slot = (void*)(uintptr_t)(flags & RT_POLL_LENT);  /* rx_wake_pollers' */
            break;
        }
        r = op_wait(co, sqe, RT_W_UR_OP + op, fd, deadline);
        if (r == UR_AGAIN) continue;
        if (r != -EAGAIN || op == RT_OP_POLL) return r;
        /* A non-blocking descriptor had nothing: wait for it, go again. */
        int ev = (op == RT_OP_READ || op == RT_OP_READV || op == RT_OP_RECV || op == RT_OP_RECVMSG)
                     ? POLLIN : POLLOUT;
        if ((r = ready_again(co, fd, ev, deadline)) < 0) return r;
    }
}

int rt_uring_accept(aco_rt_co_t* co, int fd, struct sockaddr* addr, socklen_t* addrlen,
                    int flags, int64_t deadline) {
    for (;;) {
        int r = rt_may_block(co, deadline);
        if (r) return r;
        struct io_uring_sqe* sqe = get_sqe(co->s);
        io_uring_prep_accept(sqe, fd, addr, addrlen, flags);
        r = op_wait(co, sqe, RT_W_UR_ACCEPT, fd, deadline);
        if (r == UR_AGAIN) continue;
        if (r != -EAGAIN && r != -ECONNABORTED && r != -EINTR) return r;
        if (r == -EAGAIN && (r = ready_again(co, fd, POLLIN, deadline)) < 0) return r;
    }
}

/* [data] file operations: as rt_uring_io's (the co waits for the end of
 * what the kernel began; the buffer is the caller's). */
ssize_t rt_ur_data_op(aco_rt_co_t* co, struct io_uring_sqe* sqe, int fd, int64_t deadline) {
    return op_wait(co, sqe, RT_W_UR_FILE, fd, deadline);
}

/* [meta] file operations: the co leaves at its deadline or cancel, the
 * operation goes on with m (co->io_abort says so to rt_ur_meta_op). */
int rt_ur_meta_op(aco_rt_co_t* co, struct io_uring_sqe* sqe, rt_ur_meta_t* m, int64_t deadline,
                  int* left) {
    ur_t* u = (ur_t*)co->s->backend.data;
    rt_fd_t* f = sqe->fd >= 0 ? rt_fd_peek(&co->s->fds, sqe->fd) : NULL;
    m->co = co;
    m->fd = sqe->fd;
    m->gen = f ? f->gen : 0;
    m->prev = NULL;
    m->next = u->metas;
    if (m->next) m->next->prev = m;
    u->metas = m;
    io_uring_sqe_set_data(sqe, (void*)((uintptr_t)m | META_TAG));
    file_push(co->s);
    co->s->st.io_inflight++;
    co->w.io.gen = 0;               /* meta_abort's mark: the co left (the
                                       result shares io_abort's word) */
    int r = rt_park(co, RT_W_UR_META, m, deadline);
    *left = co->w.io.gen != 0;      /* (m is the orphan's then) */
    return r;
}

static void meta_abort(aco_rt_co_t* co, int err) {
    rt_ur_meta_t* m = (rt_ur_meta_t*)co->wait_obj;
    m->co = NULL;
    co->w.io.gen = 1;
    rt_tmo_stop(co);
    struct io_uring_sqe* sqe = get_sqe(co->s);  /* (it may not have begun) */
    io_uring_prep_cancel(sqe, (void*)((uintptr_t)m | META_TAG), 0);
    io_uring_sqe_set_data(sqe, NULL);
    if (((ur_t*)co->s->backend.data)->cqe_skip) io_uring_sqe_set_flags(sqe, IOSQE_CQE_SKIP_SUCCESS);
    rt_wake(co, err);
}

static void meta_forget(aco_rt_co_t* co) {
    ((rt_ur_meta_t*)co->wait_obj)->co = NULL;
}

RT_WAIT_KINDS(ur_file, {RT_W_UR_FILE, {"file", rt_ur_abort, NULL}},
              {RT_W_UR_META, {"file", meta_abort, meta_forget}})

/* aco_rt_sched_free with file operations still in the kernel: [meta]
 * records and the buffers of [data] ones (a destroyed co's private buffer
 * or stack) may be written until they complete, so the ring is asked to
 * cancel everything (where cancels take keys: before 5.19 they are only
 * waited for) and their completions are awaited (up to 1 s: one
 * that never ends, a hung network file system's, keeps its record, which
 * is then never freed).  Nothing else is touched: the cos are gone. */
static void ops_drain(ur_t* u) {
    struct io_uring_sqe* sqe = NULL;
    if (u->cancel_keys && (sqe = io_uring_get_sqe(&u->ring)) == NULL) {
        io_uring_submit(&u->ring);
        sqe = io_uring_get_sqe(&u->ring);
    }
    if (sqe) {
        io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY | IORING_ASYNC_CANCEL_ALL);
        io_uring_sqe_set_data(sqe, NULL);
    }
    int64_t end = rt_now() + 1000000000;
    while ((u->metas || u->files) && rt_now() < end) {
        struct __kernel_timespec ts = {0, 10000000};
        struct io_uring_cqe* cqe;
        io_uring_submit_and_wait_timeout(&u->ring, &cqe, 1, &ts, NULL);
        unsigned head, n = 0;
        io_uring_for_each_cqe(&u->ring, head, cqe) {
            uintptr_t d = (uintptr_t)io_uring_cqe_get_data(cqe);
            if (d == (uintptr_t)EV_DATA) {
                /* (not a tagged record: its alignment is the linker's) */
            } else if ((d & 15) == FILE_TAG) {
                u->files--;
            } else if ((d & 7) == META_TAG) {
                rt_ur_meta_t* m = (rt_ur_meta_t*)(d & ~(uintptr_t)META_TAG);
                meta_unlink(u, m);
                m->orphan(m, cqe->res);
            }
            n++;
        }
        io_uring_cq_advance(&u->ring, n);
    }
}

static int ur_wait_fd(aco_rt_co_t* co, int fd, int events, int64_t deadline) {
    return (int)rt_uring_io(co, RT_OP_POLL, fd, NULL, 0, events, deadline);
}

static void ur_pabort(aco_rt_co_t* co, int err) {
    pblk_cancel(co->s, (rt_ur_pblk_t*)co->wait_obj);
    rt_wake(co, err);
}

/* aco_rt_sched_free: the ring goes next, with what is in it. */
static void ur_pforget(aco_rt_co_t* co) {
    rt_ur_pblk_t* b = (rt_ur_pblk_t*)co->wait_obj;
    ur_t* u = (ur_t*)co->s->backend.data;
    for (unsigned i = 0; i < b->n; i++) if (b->e[i].live) co->s->st.io_inflight--;
    block_unlink(u, b);
    free(b);
}

RT_WAIT_KINDS(ur_poll, {RT_W_UR_POLLN, {"poll", ur_pabort, ur_pforget}})

static int ur_wait_many(aco_rt_co_t* co, struct pollfd* p, unsigned n, int64_t deadline) {
    aco_rt_sched_t* s = co->s;
    rt_ur_pblk_t* b = malloc(sizeof(*b) + n * sizeof(b->e[0]));
    if (b == NULL) return -ENOMEM;
    ur_t* u = (ur_t*)s->backend.data;
    b->co = co;
    b->n = b->live = 0;
    b->prev = NULL;
    b->next = u->blocks;
    if (b->next) b->next->prev = b;
    u->blocks = b;
    for (unsigned i = 0; i < n; i++) {
        if (p[i].fd < 0) continue;
        rt_fd_t* f = rt_fd_get(&s->fds, p[i].fd);
        ur_pent_t* pe = &b->e[b->n++];
        pe->b = b;
        pe->fd = p[i].fd;
        pe->gen = f ? f->gen : 0;
        pe->live = 1;
        pe->cancelled = 0;
        pe->lent = 0;
        pe->closed = 0;
        pe->idx = i;
        unsigned ev = (unsigned)(uint16_t)p[i].events;
        /* A lending descriptor's input, while its multishot is armed, is
         * the multishot's (lend.c wakes us when that brings some:
         * rt_ur_poll_lent); unarmed (its ring ran dry), the socket's. */
        /* TCP's urgent data wakes a poll operation with the input's key
         * only: one that waits for POLLPRI alone would never hear it.
         * Asking for input too may wake the co for input it did not ask
         * for (it looks, and waits again): only when none is there now. */
        if ((ev & POLLPRI) && !(ev & POLLIN)) {
            struct pollfd q = {p[i].fd, POLLIN, 0};
            if (rt_sys_poll0(&q, 1) == 0) ev |= POLLIN;
        }
        if (f && f->rx && (ev & POLLIN) && rt_lend_state(f) == 0) {
            ev &= ~(unsigned)POLLIN;
            f->pollers++;
            pe->lent = 1;
        }
        if (f) rt_fd_busy_inc_fenced(f);    /* before the kernel takes the file */
        struct io_uring_sqe* sqe = get_sqe(s);
        io_uring_prep_poll_add(sqe, p[i].fd, ev);
        io_uring_sqe_set_data(sqe, (void*)((uintptr_t)pe | PENT_TAG));
        b->live++;
        s->st.io_inflight++;
    }
    if (b->n == 0 && deadline == -1) deadline = INT64_MAX;     /* (as epoll's) */
    int r = rt_park(co, RT_W_UR_POLLN, b, deadline);
    if (r != -ETIMEDOUT && r != -ECANCELED) {
        /* a descriptor closed meanwhile says POLLNVAL, whatever its number
         * holds by then (the others are looked at again) */
        r = 0;
        for (unsigned k = 0; k < b->n; k++)
            if (b->e[k].closed) p[b->e[k].idx].revents = POLLNVAL, r++;
    }
    for (unsigned i = 0; i < b->n; i++) {
        rt_fd_t* f = b->e[i].lent ? rt_fd_peek(&s->fds, b->e[i].fd) : NULL;
        if (f && f->pollers) f->pollers--;
    }
    pblk_leave(s, b);
    return r;
}

static int ur_poll_fd(const aco_rt_co_t* co, unsigned k) {
    const rt_ur_pblk_t* b = (const rt_ur_pblk_t*)co->wait_obj;
    return co->state == RT_PARKED && co->wait == RT_W_UR_POLLN && k < b->n ? b->e[k].fd : -1;
}

int rt_ur_poll_lent(aco_rt_co_t* co, int fd) {
    if (co->state != RT_PARKED || co->wait != RT_W_UR_POLLN) return 0;
    rt_ur_pblk_t* b = (rt_ur_pblk_t*)co->wait_obj;
    for (unsigned i = 0; i < b->n; i++)
        if (b->e[i].fd == fd) {
            rt_wake(co, 1);
            return 1;
        }
    return 0;
}

/* fd is being closed: the aco_rt_poll entries on it (this number, this
 * file) are marked, and cancelled if cancel: their waits end with
 * POLLNVAL, those of cos woken already and not yet run too.  (A cancel
 * by the file also ends the entries of its other numbers, dup's:
 * unmarked, they only look again.) */
static void polls_closing(aco_rt_sched_t* s, rt_fd_t* f, int fd, int cancel) {
    for (rt_ur_pblk_t* b = ((ur_t*)s->backend.data)->blocks; b; b = b->next) {
        if (b->co == NULL) continue;            /* its co has left */
        for (unsigned j = 0; j < b->n; j++) {
            ur_pent_t* pe = &b->e[j];
            if (pe->fd != fd || pe->gen != f->gen || !pe->live || pe->closed) continue;
            pe->closed = 1;
            if (cancel && !pe->cancelled) pent_cancel(s, pe);
        }
    }
}

/* What of ours the kernel still has on fd's file (gen): each operation
 * on the descriptor's queue, aco_rt_poll's entries (of cos gone too), and
 * rx's multishot (the closed rx, or NULL). */
static unsigned held(aco_rt_sched_t* s, rt_fd_t* f, int fd, uint32_t gen, struct rt_rx* rx) {
    unsigned n = rx && rt_lend_armed(rx);
    for (rt_waiter_t* w = rt_wq_first(&f->q); w; w = w->next)
        n += w->co->w.io.gen == gen && (w->co->flags & RT_IO_OP);
    for (rt_ur_pblk_t* b = ((ur_t*)s->backend.data)->blocks; b; b = b->next)
        for (unsigned j = 0; j < b->n; j++)
            n += b->e[j].fd == fd && b->e[j].gen == gen && b->e[j].live;
    return n;
}

/* How long an aco_rt_close waits for an operation of ours that its cancel
 * did not end at once (one in an io-wq worker: a read of a terminal, a
 * regular file's on a slow disk), the thread stopped meanwhile. */
#define CLOSE_WAIT_NS (50 * 1000000LL)

/* aco_rt_close of fd, whose operations were just cancelled: each holds the
 * file (the kernel took it at the operation's start), so the number's
 * close(2) would not close it, and the peer would see no end, until the
 * cancel's completion came at the scheduler's next poll.  So the cancels
 * go to the kernel now, with the ring's pending work run (GETEVENTS: with
 * DEFER_TASKRUN the cancelled operations end, and drop the file, only
 * there), and their completions are handed on, until none of ours is
 * left on the file: at once for those that waited for readiness (sockets,
 * pipes); up to CLOSE_WAIT_NS for one a worker runs (then it ends, and
 * the file goes, later).  The completions go to their cos as at a poll
 * (their -EBADF). */
static void close_release(aco_rt_sched_t* s, ur_t* u, rt_fd_t* f, int fd, struct rt_rx* rx) {
    uint32_t gen = f->gen;
    int64_t end = -1;
    if (rx) rt_lend_hold(rx);
    /* (a ring this task may not enter, SINGLE_ISSUER's EEXIST: a vfork
     * child's close, in its parent's memory: nothing of the ring is
     * touched here then, the cancels go with the parent's next enter) */
    int r = io_uring_submit_and_get_events(&u->ring);
    for (; r >= 0 || r == -EINTR || r == -EAGAIN || r == -EBUSY;) {
        reap(s, u);
        unsigned n = held(s, f, fd, gen, rx);
        if (n == 0) break;
        int64_t now = rt_now();
        if (end < 0) end = now + CLOSE_WAIT_NS;
        else if (now >= end) break;
        struct __kernel_timespec ts = {(end - now) / 1000000000, (end - now) % 1000000000};
        struct io_uring_cqe* cqe;
        r = io_uring_submit_and_wait_timeout(&u->ring, &cqe, n, &ts, NULL);
        if (r == -ETIME) r = 0;
    }
    if (rx) rt_lend_release(s, rx);
}

/* fd is being closed (or was, gone): each operation of ours on it is
 * cancelled by its own record, found on the descriptor's queue (op_wait),
 * its result -EBADF from now on, whatever comes first then (its
 * cancellation, its deadline).  (A cancel by the file, IORING_ASYNC_CANCEL_FD
 * with _ALL, would have the kernel look at every operation in flight once
 * for each one it ends: 16,000 waiters on one descriptor took seconds, in
 * the thread; and it ended a dup's operations too.)  An aco_rt_close here
 * (not gone) then waits for their ends (close_release); a file closed
 * already (another thread's close, a new file under the number) goes
 * when their completions come at the next poll. */
static void ur_closing(aco_rt_sched_t* s, int fd, int gone) {
    ur_t* u = (ur_t*)s->backend.data;
    rt_fd_t* f = rt_fd_peek(&s->fds, fd);
    struct rt_rx* rx = f && f->rx ? rt_lend_closing(s, f, 1) : NULL;  /* (by its record) */
    if (f == NULL || (f->busy == 0 && rx == NULL)) return;
    if (u->blocks) polls_closing(s, f, fd, 1);
    for (rt_waiter_t* w = rt_wq_first(&f->q); w; w = w->next) {
        aco_rt_co_t* co = w->co;
        if (co->w.io.gen != f->gen || co->io_abort) continue;
        co->io_abort = -EBADF;
        struct io_uring_sqe* sqe = get_sqe(s);
        io_uring_prep_cancel(sqe, op_data(co), 0);
        io_uring_sqe_set_data(sqe, NULL);
        if (u->cqe_skip) io_uring_sqe_set_flags(sqe, IOSQE_CQE_SKIP_SUCCESS);
    }
    /* before the number goes: an operation still in the submission queue
     * would find the file a new one may get under it */
    /* (not while completions are handed on, nor while s is being freed:
     * its cos' records go one by one then, and a completion of one gone
     * would wake freed memory; the free waits for every operation) */
    if (gone || u->reaping ||
        (__atomic_load_n(&s->mail.senders, __ATOMIC_RELAXED) & RT_FREEING)) {
        io_uring_submit(&u->ring);
        return;
    }
    close_release(s, u, f, fd, rx);
}

/* An operation holds its file, so the kernel never ends it for a close:
 * ours are orphans if the number is closed now.  Under a number that holds
 * another file now they cannot be told from that file's (0). */
static int ur_stale(aco_rt_sched_t* s, int fd) {
    (void)s;
    return rt_sys_fcntl(fd, F_GETFD, 0) < 0 && errno == EBADF;
}

const rt_backend_t rt_backend_uring = {
    "uring", ur_init, ur_fini, ur_poll, ur_wait_fd, ur_wait_many, ur_poll_fd, ur_closing, ur_stale,
};

#else /* !ACO_RT_HAVE_URING: built without liburing */

const rt_backend_t rt_backend_uring = {0};

void rt_ur_abort(aco_rt_co_t* co, int err) { (void)co; (void)err; }
int rt_ur_f_on(aco_rt_sched_t* s, unsigned w) { (void)s; (void)w; return 0; }
int rt_ur_poll_lent(aco_rt_co_t* co, int fd) { (void)co; (void)fd; return 0; }

ssize_t rt_uring_io(aco_rt_co_t* co, int op, int fd, void* buf, size_t n, int flags,
                    int64_t deadline) {
    (void)co; (void)op; (void)fd; (void)buf; (void)n; (void)flags; (void)deadline;
    return -ENOSYS;
}

int rt_uring_accept(aco_rt_co_t* co, int fd, struct sockaddr* addr, socklen_t* addrlen,
                    int flags, int64_t deadline) {
    (void)co; (void)fd; (void)addr; (void)addrlen; (void)flags; (void)deadline;
    return -ENOSYS;
}

#endif
