/* rt_fd.h - the descriptor table (fd.c): a scheduler's entry per
 * descriptor number.  Used by the I/O calls (io.c) and the backends
 * (io_epoll.c, io_uring.c); it uses neither.  Internal, like rt_impl.h.
 */
#ifndef ACO_RT_FD_H
#define ACO_RT_FD_H

#include "rt_impl.h"

#pragma GCC visibility push(hidden)     /* (as in rt_impl.h) */

/* An entry (epoll uses its queue).  What it says of
 * the file under the number is a hint, never trusted where a stale one
 * would block the thread or lose a readiness: the number may have been
 * closed and reused behind the runtime's back (close(2), dup2, another
 * thread, a library).  kind picks the calls (sockets get per-call
 * MSG_DONTWAIT and MSG_NOSIGNAL; a wrong guess fails with ENOTSOCK and is
 * corrected, or takes the slower path that suits any file); registered
 * (epoll re-adds at every wait) makes an add that succeeds tell that the
 * file we added is gone, and a close remove it; busy and gen are read by
 * other threads (aco_rt_close), written by the owner with atomic stores. */
enum { RT_FD_UNKNOWN = 0, RT_FD_SOCK, RT_FD_OTHER };
struct rt_fd {
    uint8_t        kind;        /* RT_FD_*: a socket or not, as last seen */
    uint8_t        registered;  /* epoll: added by us (the file may be gone) */
    uint8_t        stream;      /* a SOCK_STREAM socket (accept, connect) */
    uint8_t        rd_empty;    /* epoll, stream: a read came back short, so
                                   the socket was drained: wait for the next
                                   edge before reading again (saves the
                                   read that would say EAGAIN) */
    uint8_t        rd_hup;      /* epoll: the peer's end (or an error) was
                                   seen: a short read does not mean drained
                                   then, the end may still be pending, its
                                   edge gone */
    uint8_t        recheck;     /* atomic: an aco_rt_close on another thread
                                   saw busy only after it had closed: are
                                   our waiters' file still there? */
    uint32_t       busy;        /* atomic store: cos waiting on it (epoll)
                                   or operations in the kernel (io_uring) */
    uint32_t       gen;         /* atomic store: bumped when the number is
                                   known to hold a new file */
    aco_rt_waitq_t q;           /* epoll: cos waiting for readiness
                                   (w.events says for what) */
    struct rt_rx*  rx;          /* lend.c: its multishot receive, or NULL */
    uint32_t       pollers;     /* cos in aco_rt_wait(POLLIN) on it */
};

/* (release: a close on another thread that sees it comes after our use of
 * the descriptor, epoll_ctl included) */
static inline void rt_fd_busy_add(rt_fd_t* e, int d) {
    __atomic_store_n(&e->busy, e->busy + (uint32_t)d, __ATOMIC_RELEASE);
}
/* The same before a wait starts (an epoll add, an io_uring operation):
 * ordered before it (seq_cst: a full barrier), so that a close on another
 * thread that comes after the wait's start sees the count when it looks
 * again (aco_rt_close). */
static inline void rt_fd_busy_inc_fenced(rt_fd_t* e) {
    __atomic_fetch_add(&e->busy, 1u, __ATOMIC_SEQ_CST);
}

/* The table: chunks that never move (waiters point into them), under a
 * top array of fixed size that never moves either (other threads read it):
 * descriptors below RT_FD_CHUNK * RT_FD_CHUNKS. */
#define RT_FD_CHUNK 256
#define RT_FD_CHUNKS 65536
rt_fd_t* rt_fd_get(aco_rt_sched_t* s, int fd);   /* NULL: ENOMEM (or fd too big) */
/* The entry of fd if the table has one, else NULL (never allocates). */
static inline rt_fd_t* rt_fd_peek(aco_rt_sched_t* s, int fd) {
    rt_fd_t** top = s->fdc;
    if (fd < 0 || top == NULL || fd / RT_FD_CHUNK >= RT_FD_CHUNKS) return NULL;
    rt_fd_t* c = top[fd / RT_FD_CHUNK];
    return c ? &c[fd % RT_FD_CHUNK] : NULL;
}
/* The same, of another thread's scheduler s, read from here. */
static inline rt_fd_t* rt_fd_peek_remote(aco_rt_sched_t* s, int fd) {
    rt_fd_t** top = __atomic_load_n(&s->fdc, __ATOMIC_ACQUIRE);
    if (top == NULL || fd < 0 || fd / RT_FD_CHUNK >= RT_FD_CHUNKS) return NULL;
    rt_fd_t* c = __atomic_load_n(&top[fd / RT_FD_CHUNK], __ATOMIC_ACQUIRE);
    return c ? &c[fd % RT_FD_CHUNK] : NULL;
}
/* The entry's guess of whether fd is a socket (RT_FD_*), made if none. */
int      rt_fd_kind(rt_fd_t* e, int fd);

/* The readiness way (ready.c): one request, tried without blocking, then
 * waited for through the backend. */
enum { K_READ, K_WRITE, K_READV, K_WRITEV, K_RECV, K_SEND };
typedef struct {
    int kind;
    int fd;
    void* buf;          /* K_READV, K_WRITEV: the iovec array, n its count */
    size_t n;
    int flags;
} rq_t;
/* The result, or -errno (deadline: -ETIMEDOUT, cancel: -ECANCELED). */
ssize_t  rt_ready_io(aco_rt_co_t* co, const rq_t* q, int64_t deadline);
/* A read or readv of no bytes: read(2)'s 0 (or error) at once, never a wait. */
ssize_t  rt_read_nothing(aco_rt_co_t* co, const rq_t* q);
/* Make fd O_NONBLOCK if it is not (now): for what has no per-call flag. */
int      rt_fd_nonblock(int fd);
/* A deadline that has passed means one non-blocking try: the readiness way.
 * (Every negative deadline but -1 is a time long past.) */
static inline int rt_passed(int64_t deadline) {
    return deadline != -1 && (deadline <= 0 || deadline <= rt_now());
}

/* lend.c.  rt_lend_read's "no rx here: receive the plain way". */
#define RT_LEND_NONE ((ssize_t)INT32_MIN)
ssize_t  rt_lend_read(aco_rt_co_t* co, rt_fd_t* e, const struct iovec* iov, int cnt,
                      int flags, int64_t deadline);
int      rt_lend_state(rt_fd_t* e);
/* Has another scheduler an rx on fd (e: fd's entry here, or NULL)?  Only
 * when rt_rx_alive (the process has rxs at all). */
extern uint32_t rt_rx_alive;
int      rt_lend_elsewhere(rt_fd_t* e, int fd);
/* A completion of a multishot receive (user_data tagged: io_uring.c). */
void     rt_lend_cqe(aco_rt_sched_t* s, void* data, int res, unsigned flags);
/* e (with an rx) is being closed; gone as in rt_backend_t.closing. */
void     rt_lend_closing(aco_rt_sched_t* s, rt_fd_t* e, int gone);
/* Before the backend's fini. */
void     rt_lend_fini(aco_rt_sched_t* s);
#ifdef ACO_RT_HAVE_URING
struct io_uring;
struct io_uring* rt_ur_ring(aco_rt_sched_t* s);                  /* io_uring.c */
struct io_uring_sqe* rt_ur_sqe(aco_rt_sched_t* s);
#endif

/* Forget what entry e says of the file under its number (a new file). */
void     rt_fd_forget(rt_fd_t* e);
void     rt_fd_free_all(aco_rt_sched_t* s);

#pragma GCC visibility pop

#endif /* ACO_RT_FD_H */
