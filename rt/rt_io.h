/* rt_io.h - the I/O layer's internals, above the descriptor table
 * (rt_fd.h) and the kernel (rt_impl.h): the readiness way (ready.c), the
 * io_uring operations (io_uring.c) and lent receives (lend.c), for the
 * I/O calls (io.c) and the top (sched.c).  Not for the kernel or the
 * services beside the I/O layer (tests/check_imports.sh).
 */
#ifndef ACO_RT_IO_H
#define ACO_RT_IO_H

#include "rt_impl.h"
#include "rt_sys.h"

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>

#pragma GCC visibility push(hidden)     /* (as in rt_impl.h) */

/* What a vector (cnt elements, cnt > 0 means iov is not NULL) is refused
 * for before a byte moves, which the I/O calls say at once: -EINVAL for a
 * length over SSIZE_MAX, or lengths whose total is (readv(2)'s and
 * POSIX's EINVAL; Linux cuts such a total, but a call that moves it all,
 * as writev does, could not return the count), -EFAULT for a NULL buffer
 * of a non-zero length (aco_rt.h, "NULL"), else 0. */
static inline int rt_iov_bad(const struct iovec* iov, int cnt) {
    int fault = 0;
    size_t total = 0;
    for (int i = 0; i < cnt; i++) {
        if (rt_unlikely(iov[i].iov_len > (size_t)SSIZE_MAX - total)) return -EINVAL;
        total += iov[i].iov_len;
        if (rt_unlikely(iov[i].iov_base == NULL) && iov[i].iov_len) fault = -EFAULT;
    }
    return fault;
}

/* The bytes of a vector rt_iov_bad passed (at most SSIZE_MAX). */
static inline size_t rt_iov_total(const struct iovec* iov, size_t cnt) {
    size_t total = 0;
    for (size_t i = 0; i < cnt; i++) total += iov[i].iov_len;
    return total;
}

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
/* Make fd O_NONBLOCK if it is not (now): for what has no per-call flag
 * (rt_sock_nonblock: fd is a socket, which never gets a passing flag). */
int      rt_fd_nonblock(int fd);
int      rt_sock_nonblock(int fd);
/* preadv2(2)/pwritev2(2) that never blocks on what refuses RWF_NOWAIT:
 * O_NONBLOCK for the call alone (SIGPIPE held for a write).  The result,
 * errno set. */
long     rt_prw_once(int write, int fd, const struct iovec* v, int cnt, int64_t off, int flags);
/* SIGPIPE held off around a call on the co's thread that may raise it (a
 * write, sendfile or splice into a pipe or socket whose reader is gone:
 * those have no MSG_NOSIGNAL), and the one the call raised taken back
 * (epipe: it failed with EPIPE).  errno is kept. */
typedef struct { sigset_t old; int take; } rt_sigpipe_t;
void     rt_sigpipe_hold(rt_sigpipe_t* h);
void     rt_sigpipe_release(const rt_sigpipe_t* h, int epipe);
/* A deadline that has passed means one non-blocking try: the readiness way.
 * (Every negative deadline but -1 is a time long past.) */
static inline int rt_passed(int64_t deadline) {
    return deadline != -1 && (deadline <= 0 || deadline <= rt_now());
}

/* lend.c.  rt_lend_read's "no rx here: receive the plain way". */
#define RT_LEND_NONE ((ssize_t)INT32_MIN)

/* A socket error kept after part of a transfer (io.c's keep_err): taken
 * and said (-errno) by the next read, write, send or receive on fd, only
 * while the socket still shows its end (POLLHUP: a number closed behind
 * the runtime's back and given to a new file since must not inherit the
 * old one's error); 0 if none. */
static inline int rt_pend_err(aco_rt_co_t* co, int fd) {
    rt_fd_t* e = rt_fd_peek(&co->s->fds, fd);
    if (rt_likely(e == NULL || e->pend_err == 0)) return 0;
    int err = e->pend_err;
    e->pend_err = 0;
    struct pollfd p = {fd, 0, 0};
    return rt_sys_poll0(&p, 1) == 1 && (p.revents & POLLHUP) ? -err : 0;
}
/* The same for a receive: bytes the kernel (or a lend) holds come
 * before the error, as from recv(2), which gives its queue first and then
 * the socket's error; so the error stays kept while there are some. */
int      rt_lend_state(rt_fd_t* e);
static inline int rt_pend_err_rd(aco_rt_co_t* co, int fd) {
    rt_fd_t* e = rt_fd_peek(&co->s->fds, fd);
    if (rt_likely(e == NULL || e->pend_err == 0)) return 0;
    char c;
    if ((e->rx && rt_lend_state(e) == 1) || rt_sys_recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) > 0)
        return 0;
    return rt_pend_err(co, fd);
}
/* In wait_fd's events on io_uring: a wait for POLLIN on a lending
 * descriptor (aco_rt_wait: POLLIN itself taken out, the lend's arrivals
 * wake it, lend.c's rx_wake_pollers); never given to the kernel. */
#define RT_POLL_LENT 0x40000000
ssize_t  rt_lend_read(aco_rt_co_t* co, rt_fd_t* e, const struct iovec* iov, int cnt,
                      int flags, int64_t deadline);
/* Has another scheduler an rx on fd (e: fd's entry here, or NULL)?  Only
 * when rt_rx_alive (the process has rxs at all). */
extern uint32_t rt_rx_alive;
int      rt_lend_elsewhere(rt_fd_t* e, int fd);
/* A completion of a multishot receive (user_data tagged: io_uring.c). */
void     rt_lend_cqe(aco_rt_sched_t* s, void* data, int res, unsigned flags);
/* e (with an rx) is being closed; by_op: its multishot is cancelled by
 * its own record (the caller cancels nothing by the file).  The rx if its
 * multishot is still in the kernel (it holds the file), else NULL. */
struct rt_rx* rt_lend_closing(aco_rt_sched_t* s, rt_fd_t* e, int by_op);
/* (io_uring: aco_rt_close waits for that multishot's end, rx kept from
 * rt_lend_hold to rt_lend_release) */
void     rt_lend_hold(struct rt_rx* rx);
int      rt_lend_armed(const struct rt_rx* rx);
void     rt_lend_release(aco_rt_sched_t* s, struct rt_rx* rx);
/* Before the backend's fini. */
void     rt_lend_fini(aco_rt_sched_t* s);
#ifdef ACO_RT_HAVE_URING
struct io_uring;
struct io_uring* rt_ur_ring(aco_rt_sched_t* s);                  /* io_uring.c */
struct io_uring_sqe* rt_ur_sqe(aco_rt_sched_t* s);
#endif

/* io_uring operations (io_uring.c): the result, or -errno.  rt_ur_abort:
 * co's operation is to end early with err (its wait kind's abort; lend.c
 * too). */

enum { RT_OP_READ, RT_OP_WRITE, RT_OP_READV, RT_OP_WRITEV, RT_OP_RECV,
       RT_OP_SEND, RT_OP_POLL, RT_OP_SENDMSG, RT_OP_RECVMSG };
ssize_t rt_uring_io(aco_rt_co_t* co, int op, int fd, void* buf, size_t n,
                    int flags, int64_t deadline);
int     rt_uring_accept(aco_rt_co_t* co, int fd, struct sockaddr* addr,
                        socklen_t* addrlen, int flags, int64_t deadline);
void    rt_ur_abort(aco_rt_co_t* co, int err);
/* co waits in aco_rt_poll with fd among its descriptors: wake it (its
 * lend brought input), 1; else 0. */
int     rt_ur_poll_lent(aco_rt_co_t* co, int fd);

/* The calls of file.c (aco_rt.h, "Files, directories, ..."), by the way
 * they go: rt_f_names[] are aco_rt_file_way's names (io_uring.c). */
enum { RT_F_READ, RT_F_WRITE, RT_F_FSYNC, RT_F_SFR, RT_F_FALLOC, RT_F_FTRUNC,
       RT_F_OPENAT, RT_F_OPENAT2, RT_F_STATX, RT_F_UNLINK, RT_F_RENAME, RT_F_MKDIR,
       RT_F_SYMLINK, RT_F_LINK, RT_F_SPLICE, RT_F_TEE, RT_F_SENDFILE, RT_F_SENDMSG,
       RT_F_RECVMSG, RT_F_SHUTDOWN, RT_F_N };
extern const char* const rt_f_names[RT_F_N];
/* Does s do call w as an io_uring operation (its kernel has it, and
 * $ACO_RT_URING_OFF did not turn it off)?  0 on epoll. */
int     rt_ur_f_on(aco_rt_sched_t* s, unsigned w);
/* RT_UR_AGAIN (rt_ur_data_op, rt_ur_meta_op): the ring did not run the
 * operation, and the caller makes it again another way (a helper's): the
 * kernel cancelled it because no io-wq worker could start (RLIMIT_NPROC),
 * or a close of another number of its file did.  Not an errno. */
#define RT_UR_AGAIN (INT32_MIN + 1)
#ifdef ACO_RT_HAVE_URING
/* A [data] file operation (sqe prepared by the caller, on fd): as
 * rt_uring_io's, its result; the co waits for what the kernel began. */
ssize_t rt_ur_data_op(aco_rt_co_t* co, struct io_uring_sqe* sqe, int fd, int64_t deadline);
/* Register iov[0..n) as the ring's fixed buffers (n 0: unregister them):
 * 0 or -errno, io_uring_register(2)'s; -ENOSYS: the kernel cannot without
 * waiting for the whole ring (before 5.13). */
int     rt_ur_buffers(aco_rt_sched_t* s, const struct iovec* iov, unsigned n);
/* A [meta] file operation whose memory is all in the heap record that
 * starts with m: its result (a close of its descriptor: -EBADF), or
 * -ETIMEDOUT / -ECANCELED when the co left first (*left 1): then the
 * operation goes on, and its completion calls m->orphan(m, res), which frees the record
 * (on the scheduler's thread, or in aco_rt_sched_free). */
typedef struct rt_ur_meta {
    aco_rt_co_t*        co;             /* NULL once the co left */
    void              (*orphan)(struct rt_ur_meta* m, int res);
    struct rt_ur_meta*  next;           /* the ring's list (io_uring.c) */
    struct rt_ur_meta*  prev;
    int32_t             fd;             /* (io_uring.c: the operation's */
    uint32_t            gen;            /* descriptor and its generation) */
} rt_ur_meta_t;
int     rt_ur_meta_op(aco_rt_co_t* co, struct io_uring_sqe* sqe, rt_ur_meta_t* m,
                      int64_t deadline, int* left);
#endif
/* file.c's part of a scheduler freed (sched.c) */
void    rt_file_fini(aco_rt_sched_t* s);


#pragma GCC visibility pop

#endif /* ACO_RT_IO_H */
