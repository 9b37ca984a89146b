/* rt_fd.h - the descriptor table (fd.c): a scheduler's entry per
 * descriptor number.  A leaf: under the backends (io_epoll.c, io_uring.c),
 * the readiness way (ready.c), lent receives (lend.c) and the I/O calls
 * (io.c), whose own declarations are in rt_io.h.  Internal, like rt_impl.h.
 */
#ifndef ACO_RT_FD_H
#define ACO_RT_FD_H

#include "aco_rt.h"
#include "rt_base.h"

#pragma GCC visibility push(hidden)     /* (see rt_base.h) */

typedef struct rt_fd rt_fd_t;

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
enum { RT_TTY_UNKNOWN = 0, RT_TTY_YES, RT_TTY_NO };     /* a terminal? */
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
    uint8_t        fmode;       /* file.c: O_DIRECT and such, as last seen */
    uint8_t        fage;        /* file.c: calls since fmode was looked up */
    uint32_t       busy;        /* atomic store: cos waiting on it (epoll)
                                   or operations in the kernel (io_uring) */
    uint32_t       gen;         /* atomic store: bumped when the number is
                                   known to hold a new file */
    aco_rt_waitq_t q;           /* epoll: cos waiting for readiness
                                   (w.events says for what) */
    struct rt_rx*  rx;          /* lend.c: its multishot receive, or NULL */
    uint32_t       pollers;     /* cos in aco_rt_wait(POLLIN) on it */
    uint8_t        tty;         /* io.c: RT_TTY_*, as last seen */
    uint8_t        closes;      /* io.c: aco_rt_closes of the number seen
                                   here (wraps): a co woken and not yet run
                                   whose file was closed meanwhile learns it
                                   (ready.c); gen moves for more than that */
    uint8_t        pend_err;    /* io.c: a socket's error that ended a
                                   transfer after part of it (the part was
                                   returned): the next I/O call says it, as
                                   the kernel keeps such an error pending */
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
typedef struct rt_fdtab {
    rt_fd_t**      top;         /* RT_FD_CHUNKS chunk pointers (atomic:
                                   other threads' closes read it) */
} rt_fdtab_t;
rt_fd_t* rt_fd_get(rt_fdtab_t* t, int fd);      /* NULL: ENOMEM (or fd too big) */
/* A number the table has no room for (aco_rt.h: -ENOMEM, open or not). */
static inline int rt_fd_too_big(int fd) { return fd / RT_FD_CHUNK >= RT_FD_CHUNKS; }
/* The entry of fd if the table has one, else NULL (never allocates). */
static inline rt_fd_t* rt_fd_peek(rt_fdtab_t* t, int fd) {
    rt_fd_t** top = t->top;
    if (fd < 0 || top == NULL || rt_fd_too_big(fd)) return NULL;
    rt_fd_t* c = top[fd / RT_FD_CHUNK];
    return c ? &c[fd % RT_FD_CHUNK] : NULL;
}
/* The same, of another thread's scheduler's table, read from here. */
static inline rt_fd_t* rt_fd_peek_remote(rt_fdtab_t* t, int fd) {
    rt_fd_t** top = __atomic_load_n(&t->top, __ATOMIC_ACQUIRE);
    if (top == NULL || fd < 0 || rt_fd_too_big(fd)) return NULL;
    rt_fd_t* c = __atomic_load_n(&top[fd / RT_FD_CHUNK], __ATOMIC_ACQUIRE);
    return c ? &c[fd % RT_FD_CHUNK] : NULL;
}
/* The entry's guess of whether fd is a socket (RT_FD_*), made if none. */
int      rt_fd_kind(rt_fd_t* e, int fd);

/* Forget what entry e says of the file under its number (a new file). */
void     rt_fd_forget(rt_fd_t* e);
void     rt_fd_free_all(rt_fdtab_t* t);

#pragma GCC visibility pop

#endif /* ACO_RT_FD_H */
