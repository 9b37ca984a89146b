/* io.c - the I/O calls, on either backend.
 *
 * Two ways to do an operation:
 *   readiness  the plain system call, non-blocking for this call only; on
 *              EAGAIN wait for readiness (epoll, or io_uring POLL_ADD) and
 *              try again.  The buffer is touched only while the co runs,
 *              so it may lie on the co's share stack.
 *   operation  (io_uring) the kernel does the whole operation and writes or
 *              reads the buffer whenever it gets to it, the co parked
 *              meanwhile: only for buffers that are not on a share stack.
 * The epoll backend always takes the first way; io_uring takes the second
 * unless a buffer (or an address out-parameter) lies on the co's share
 * stack, the deadline has already passed (then one non-blocking try), or it
 * is a write to something other than a socket (below).
 *
 * A descriptor is the file, not the number.  The program (or a library, or
 * another thread) may close a number behind the runtime's back and get it
 * again for another file, dup2 over it, or clear O_NONBLOCK.  So nothing
 * cached per number is trusted where a stale value would block the thread
 * or lose a readiness:
 *   - sockets are never made non-blocking: every call on one passes
 *     MSG_DONTWAIT (read, write, readv and writev become recv, send,
 *     recvmsg and sendmsg), and every send MSG_NOSIGNAL;
 *   - other descriptors (pipes, FIFOs, terminals, ...) are checked for
 *     O_NONBLOCK at every call (one fcntl, setting it when it is gone), and
 *     a write to them blocks SIGPIPE in the thread for the call, takes back
 *     the SIGPIPE it raised, and gives -EPIPE;
 *   - whether a number holds a socket is remembered as a guess: a call that
 *     treats a non-socket as a socket fails with ENOTSOCK and goes again;
 *     one that treats a socket as something else finds it out before it
 *     would set O_NONBLOCK (a getsockopt, then the socket's way), and is
 *     merely slower when the program made the socket O_NONBLOCK itself;
 *   - epoll: a wait re-adds the descriptor (EEXIST when it is still the same
 *     file: one cheap system call per wait, none per operation).
 */
#define _GNU_SOURCE
#include "rt_impl.h"
#include "rt_io.h"

#include <fcntl.h>
#include "rt_sys.h"
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* Descriptors (the table itself: fd.c)                                     */
/* ------------------------------------------------------------------------ */

/* A new socket under number fd (accept, connect): cos here that waited on
 * the file the number had are told -EBADF. */
static void fd_fresh(aco_rt_sched_t* s, int fd) {
    rt_fd_t* e = rt_fd_get(&s->fds, fd);
    if (e == NULL) return;
    if (e->registered || e->busy || e->rx) s->backend.ops->closing(s, fd, 1);
    rt_fd_forget(e);
    rt_fd_kind(e, fd);
}

/* aco_rt_close on another thread: cos here that waited on that file are
 * told -EBADF.  A gen that moved since the closer read it is a new file
 * under the number, or the file the closer closed, taken by a wait here
 * as the closer looked (a registration found gone, close_shared): the
 * backend tells which, by whether our waits' file is still there. */
static void fd_closed_remote(aco_rt_sched_t* s, int fd, uint32_t gen) {
    rt_fd_t* e = rt_fd_peek(&s->fds, fd);
    if (e == NULL || (e->gen != gen && !s->backend.ops->stale(s, fd))) return;
    s->backend.ops->closing(s, fd, 1);
    rt_fd_forget(e);
    e->closes++;
}

/* (Inlined even at -O0, as read_plain: checked mode's report shows a few
 * frames up from the access, down to the program's.) */
static inline __attribute__((always_inline)) int use_uring(const aco_rt_co_t* co, const void* buf,
                                                           size_t n, int wr, int64_t deadline) {
    return co->s->backend.ops == &rt_backend_uring && !rt_on_share_stack(co, buf, n, wr) &&
           !rt_passed(deadline);
}

/* ------------------------------------------------------------------------ */
/* The calls                                                                */
/* ------------------------------------------------------------------------ */

/* The running co, or return -EPERM; a cancelled co's calls fail at once. */
#define CO_OR_EPERM(co)                                         \
    aco_rt_co_t* co = rt_self();                                \
    if (rt_unlikely(co == NULL)) return -EPERM;                 \
    if (rt_unlikely(rt_co_cancelled(co))) return -ECANCELED
/* ... and a number the table has room for (aco_rt.h: -ENOMEM past
 * 2^24, open or not, whichever way the call goes). */
#define CO_FD_OR_EPERM(co, fd)                                  \
    CO_OR_EPERM(co);                                            \
    if (rt_unlikely(rt_fd_too_big(fd))) return -ENOMEM

/* A transfer that met an error after part of its bytes returns the part;
 * on a socket the kernel then keeps the error for the next call (a reset:
 * ECONNRESET, where the socket itself would say 0 or EPIPE after it), and
 * so does the runtime: the next read, write, send or receive on fd says
 * it.  Not the call's own ends (its deadline, a cancel, no memory). */
static void keep_err(aco_rt_co_t* co, int fd, ssize_t r) {
    if (r >= 0 || r == -ETIMEDOUT || r == -ECANCELED || r == -ENOMEM || r == -EAGAIN ||
        r == -EINTR || r < -255)
        return;
    rt_fd_t* e = rt_fd_get(&co->s->fds, fd);
    if (e && rt_fd_kind(e, fd) == RT_FD_SOCK) e->pend_err = (uint8_t)-r;
}
#define PENDING_ERR(co, fd)                                             \
    do {                                                                \
        int err_ = rt_pend_err(co, fd);                                 \
        if (rt_unlikely(err_ != 0)) return err_;                        \
    } while (0)
#define RD_PENDING_ERR(co, fd)                                          \
    do {                                                                \
        int err_ = rt_pend_err_rd(co, fd);                              \
        if (rt_unlikely(err_ != 0)) return err_;                        \
    } while (0)

/* A NULL buffer of a non-zero size gets the kernel's answer, -EFAULT, at
 * once (aco_rt.h, "NULL"): not after a wait for bytes or room, and never
 * a lent receive's copy to NULL. */
#define NULL_BUF_OR_EFAULT(buf, n) \
    if (rt_unlikely((buf) == NULL) && (n) != 0) return -EFAULT
/* read and write: the same for a size over SSIZE_MAX, which no buffer has
 * (read(2) and write(2) check the whole range on 64-bit Linux; io_uring,
 * which takes at most 1 GiB a call, and the readiness way's send would
 * move bytes past the buffer).  recv and send cut it, as recv(2) and
 * send(2) do. */
#define RW_BUF_OR_EFAULT(buf, n) \
    if (rt_unlikely(((buf) == NULL && (n) != 0) || (n) > (size_t)SSIZE_MAX)) return -EFAULT

static int closes_drain(aco_rt_sched_t* s);
/* fd's entry (or NULL), for a look at its lend: one that lends hears the
 * closes other threads sent first (one of fd makes the rx go: the number
 * may hold a new file by now, which must not get the old one's bytes). */
static inline rt_fd_t* lend_entry(aco_rt_sched_t* s, int fd) {
    rt_fd_t* e = rt_fd_peek(&s->fds, fd);
    if (rt_unlikely(e && e->rx) && __atomic_load_n(&s->cl.list, __ATOMIC_ACQUIRE)) {
        closes_drain(s);
        e = rt_fd_peek(&s->fds, fd);
    }
    return e;
}

/* A descriptor that lent receives (lend.c) has bytes queued in runtime
 * buffers, or coming there: the receive calls take those first.  If
 * another scheduler's lend has them, they would wait for bytes that never
 * come here: -EBUSY. */
#define FROM_LEND(co, fd, iov, cnt, flags, deadline)                         \
    do {                                                                     \
        rt_fd_t* e_ = lend_entry((co)->s, (fd));                             \
        if (rt_unlikely(e_ && e_->rx)) {                                     \
            ssize_t r_ = rt_lend_read((co), e_, (iov), (cnt), (flags), (deadline)); \
            if (r_ != RT_LEND_NONE) return r_;                               \
        } else if (rt_unlikely(__atomic_load_n(&rt_rx_alive, __ATOMIC_RELAXED)) && \
                   rt_lend_elsewhere(e_, (fd))) {                            \
            return -EBUSY;      /* its bytes are another scheduler's */      \
        }                                                                    \
    } while (0)

/* (Inlined even at -O0: checked mode's report names the program's frame
 * that called aco_rt_read, a few frames up from the access.) */
static inline __attribute__((always_inline)) ssize_t read_plain(aco_rt_co_t* co, int fd, void* buf,
                                                                size_t n, int64_t deadline) {
    if (use_uring(co, buf, n, 1, deadline))
        return rt_uring_io(co, RT_OP_READ, fd, buf, n, 0, deadline);
    rq_t q = {K_READ, fd, buf, n, 0};
    return rt_ready_io(co, &q, deadline);
}

/* A terminal in non-canonical mode (termios(3)) but for VMIN 1 without
 * VTIME (cfmakeraw's): its read(2) waits for VMIN bytes (n at most), with
 * VTIME an inter-byte timer once one has come, or with VMIN 0 for one byte
 * at most VTIME (then 0; without VTIME it does not wait).  A read here
 * returns what has come once something has (the readiness way's one read,
 * io_uring's), so for such a terminal the call goes on as the kernel's
 * would.  Whether fd is a terminal is kept in its entry (one
 * statx the first time; a terminal's settings are read at each call, as
 * the kernel reads them: one tcgetattr); a stale guess that it is none
 * (the number reused behind our back) loses nothing, the read returns
 * what came.  1 with *t filled: tty_read's. */
static int tty_timed(aco_rt_co_t* co, int fd, struct termios* t) {
    rt_fd_t* e = rt_fd_peek(&co->s->fds, fd);
    if (rt_likely(e != NULL && (e->tty == RT_TTY_NO || e->kind == RT_FD_SOCK))) return 0;
    if (e == NULL || e->tty == RT_TTY_UNKNOWN) {
        rt_sys_fid_t id;
        int chr = rt_sys_fid(fd, &id) == 0 && id.mode == S_IFCHR;
        unsigned ptn;           /* (a pty's master reads as VMIN 1, whatever its
                                   TCGETS says: the slave's settings) */
        if (!chr || tcgetattr(fd, t) != 0 || ioctl(fd, TIOCGPTN, &ptn) == 0) {
            if (e) e->tty = RT_TTY_NO;
            return 0;
        }
        if (e) e->tty = RT_TTY_YES;
    } else if (tcgetattr(fd, t) != 0) {
        e->tty = RT_TTY_NO;
        return 0;
    }
    return !(t->c_lflag & ICANON) && (t->c_cc[VMIN] != 1 || t->c_cc[VTIME] > 0);
}

/* The earlier of deadline and at. */
static int64_t dl_min(int64_t deadline, int64_t at) {
    return deadline == -1 || at < deadline ? at : deadline;
}

static ssize_t tty_read(aco_rt_co_t* co, int fd, char* buf, size_t n, int64_t deadline,
                        const struct termios* t) {
    unsigned vmin = t->c_cc[VMIN];
    int64_t gap = (int64_t)t->c_cc[VTIME] * 100000000;     /* tenths of a second */
    if (vmin == 0 && gap == 0) {        /* what is there, 0 if nothing: one try */
        ssize_t r = read_plain(co, fd, buf, n, 0);
        return r == -ETIMEDOUT ? 0 : r;
    }
    if (vmin == 0) {                    /* a byte within VTIME, or 0 */
        int64_t at = aco_rt_now() + gap;
        ssize_t r = read_plain(co, fd, buf, n, dl_min(deadline, at));
        return r == -ETIMEDOUT && dl_min(deadline, at) == at && at != deadline ? 0 : r;
    }
    size_t want = vmin < n ? vmin : n, got = 0;
    for (;;) {
        /* the first byte: the caller's deadline alone; then VTIME's gap */
        int64_t dl = got && gap ? dl_min(deadline, aco_rt_now() + gap) : deadline;
        ssize_t r = read_plain(co, fd, buf + got, n - got, dl);
        if (r > 0 && (got += (size_t)r) < want && gap == 0) break;
        if (r > 0 && got < want) continue;
        return got ? (ssize_t)got : r;  /* enough; the end; VTIME; an error */
    }
    /* Part of VMIN without VTIME: poll(2) says the terminal is readable
     * only once VMIN bytes wait, not the rest of them: tries in steps
     * (1 ms, doubling to 64 ms) until VMIN came, the deadline, a cancel. */
    for (int64_t step = 1000000;; step = step < 64000000 ? step * 2 : step) {
        int64_t at = dl_min(deadline, aco_rt_now() + step);
        if (aco_rt_sleep(at - aco_rt_now()) < 0 || rt_passed(deadline)) return (ssize_t)got;
        ssize_t r = read_plain(co, fd, buf + got, n - got, 0);
        if (r > 0 && (got += (size_t)r) >= want) return (ssize_t)got;
        if (r == 0 || (r < 0 && r != -ETIMEDOUT)) return (ssize_t)got;
    }
}

ssize_t aco_rt_read(int fd, void* buf, size_t n, int64_t deadline) {
    CO_FD_OR_EPERM(co, fd);
    RW_BUF_OR_EFAULT(buf, n);
    if (rt_unlikely(n == 0)) {          /* (a kept error stays kept) */
        rq_t q = {K_READ, fd, buf, 0, 0};
        return rt_read_nothing(co, &q);
    }
    RD_PENDING_ERR(co, fd);
    struct iovec v = {buf, n};
    FROM_LEND(co, fd, &v, 1, 0, deadline);
    struct termios t;
    if (rt_unlikely(tty_timed(co, fd, &t))) return tty_read(co, fd, buf, n, deadline, &t);
    return read_plain(co, fd, buf, n, deadline);
}

/* The caller's MSG_DONTWAIT: recv(2) or send(2) once, never a wait
 * (-EAGAIN), as the kernel does. */
static ssize_t dontwait(aco_rt_co_t* co, int kind, int fd, void* buf, size_t n, int flags) {
    if (aco_unlikely(aco_checked()) && n) aco_checked_access(buf, n, kind == K_RECV);
    (void)co;
    ssize_t r;
    do {
        r = kind == K_RECV ? rt_sys_recv(fd, buf, n, flags)
                           : rt_sys_send(fd, buf, n, flags | MSG_NOSIGNAL);
    } while (r < 0 && errno == EINTR);
    return r < 0 ? -errno : r;
}

static ssize_t recv_some(int fd, void* buf, size_t n, int flags, int64_t deadline) {
    CO_FD_OR_EPERM(co, fd);
    NULL_BUF_OR_EFAULT(buf, n);
    /* (the error queue: not the stream's bytes, nor a kept error of its) */
    if (rt_unlikely(flags & MSG_ERRQUEUE)) return dontwait(co, K_RECV, fd, buf, n, flags);
    RD_PENDING_ERR(co, fd);
    struct iovec v = {buf, n};
    FROM_LEND(co, fd, &v, 1, flags, deadline);
    if (rt_unlikely(flags & MSG_DONTWAIT)) return dontwait(co, K_RECV, fd, buf, n, flags);
    /* (one receive: io_uring's MSG_WAITALL would go on, across a
     * SOCK_SEQPACKET's records or peeking the same bytes again) */
    if (use_uring(co, buf, n, 1, deadline))
        return rt_uring_io(co, RT_OP_RECV, fd, buf, n, flags & ~MSG_WAITALL, deadline);
    rq_t q = {K_RECV, fd, buf, n, flags};
    return rt_ready_io(co, &q, deadline);
}

/* MSG_WAITALL (without MSG_PEEK or MSG_DONTWAIT) on a stream socket:
 * receive until n bytes came, or the end, an error or the deadline: then
 * what came, if any.  (A datagram is one message whatever the flag.) */
ssize_t aco_rt_recv(int fd, void* buf, size_t n, int flags, int64_t deadline) {
    if (rt_likely((flags & (MSG_WAITALL | MSG_PEEK | MSG_DONTWAIT)) != MSG_WAITALL) ||
        rt_unlikely(buf == NULL))       /* (its answer) */
        return recv_some(fd, buf, n, flags, deadline);
    int type = 0;
    socklen_t tl = sizeof(type);
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) < 0 || type != SOCK_STREAM)
        return recv_some(fd, buf, n, flags, deadline);
    size_t got = 0;
    do {
        ssize_t r = recv_some(fd, (char*)buf + got, n - got, flags & ~MSG_WAITALL, deadline);
        if (r < 0 && got) keep_err(rt_self(), fd, r);
        if (r <= 0) return got ? (ssize_t)got : r;
        got += (size_t)r;
    } while (got < n);
    return (ssize_t)got;
}

/* io_uring may write to fd for us only if it is a socket (MSG_NOSIGNAL:
 * a pipe's SIGPIPE would hit this thread), and a stream one: a datagram
 * to a Unix peer whose queue is full came back as a send of nothing (the
 * kernel's first try had used up the vector), or its room was never
 * told (Linux 6.18). */
static int uring_may_write(aco_rt_co_t* co, int fd) {
    rt_fd_t* e = rt_fd_get(&co->s->fds, fd);
    return e && rt_fd_kind(e, fd) == RT_FD_SOCK && e->stream;
}

/* Write all n bytes: the count, or -errno if nothing was written. */
static ssize_t write_all(aco_rt_co_t* co, int op, int fd, const void* buf, size_t n,
                         int flags, int64_t deadline) {
    if (rt_unlikely(n == 0)) {          /* one try: write(2)'s 0 (never io_uring's wait) */
        rq_t q = {op, fd, (void*)buf, 0, flags};
        return rt_ready_io(co, &q, deadline);
    }
    if (rt_unlikely(flags & MSG_DONTWAIT)) return dontwait(co, K_SEND, fd, (void*)buf, n, flags);
    size_t done = 0;
    do {
        const char* p = (const char*)buf + done;
        ssize_t r;
        if (use_uring(co, p, n - done, 0, deadline) && uring_may_write(co, fd)) {
            r = rt_uring_io(co, RT_OP_SEND, fd, (void*)p, n - done, flags, deadline);
            if (r == -ENOTSOCK && op == K_WRITE) {      /* a new file: guess again */
                rt_fd_t* e = rt_fd_peek(&co->s->fds, fd);
                if (e) e->kind = RT_FD_OTHER;
                continue;
            }
        } else {
            rq_t q = {op, fd, (void*)p, n - done, flags};
            r = rt_ready_io(co, &q, deadline);
        }
        if (r < 0) {
            if (done) keep_err(co, fd, r);
            return done ? (ssize_t)done : r;
        }
        done += (size_t)r;
    } while (done < n);
    return (ssize_t)done;
}

ssize_t aco_rt_write(int fd, const void* buf, size_t n, int64_t deadline) {
    CO_FD_OR_EPERM(co, fd);
    RW_BUF_OR_EFAULT(buf, n);
    PENDING_ERR(co, fd);
    return write_all(co, K_WRITE, fd, buf, n, 0, deadline);
}

ssize_t aco_rt_send(int fd, const void* buf, size_t n, int flags, int64_t deadline) {
    CO_FD_OR_EPERM(co, fd);
    NULL_BUF_OR_EFAULT(buf, n);
    PENDING_ERR(co, fd);
    return write_all(co, K_SEND, fd, buf, n, flags, deadline);
}

/* May io_uring take this iovec array?  It gets a heap copy of the array
 * (the array itself may be on the stack); no buffer may be on it. */
static struct iovec* iov_for_uring(aco_rt_co_t* co, const struct iovec* iov, int cnt,
                                   int64_t deadline) {
    if (co->s->backend.ops != &rt_backend_uring || rt_passed(deadline) || cnt <= 0 || cnt > IOV_MAX)
        return NULL;
    for (int i = 0; i < cnt; i++)
        if (rt_on_share_stack(co, iov[i].iov_base, iov[i].iov_len, 1)) return NULL;
    rt_extra_t* x = rt_extra(co, (size_t)cnt * sizeof(*iov));
    if (x == NULL) return NULL;
    memcpy(x->buf, iov, (size_t)cnt * sizeof(*iov));
    return (struct iovec*)x->buf;
}

ssize_t aco_rt_readv(int fd, const struct iovec* iov, int iovcnt, int64_t deadline) {
    CO_FD_OR_EPERM(co, fd);
    if (iovcnt < 0 || iovcnt > IOV_MAX) return -EINVAL;     /* readv(2)'s answer */
    if (iov == NULL && iovcnt) return -EFAULT;              /* (and this) */
    int bad = rt_iov_bad(iov, iovcnt);
    if (bad) return bad;
    size_t total = 0;
    for (int i = 0; i < iovcnt && total == 0; i++) total = iov[i].iov_len;
    if (rt_unlikely(total == 0)) {
        rq_t q = {K_READV, fd, (void*)iov, (size_t)iovcnt, 0};
        return rt_read_nothing(co, &q);
    }
    RD_PENDING_ERR(co, fd);
    FROM_LEND(co, fd, iov, iovcnt, 0, deadline);
    struct iovec* h = iov_for_uring(co, iov, iovcnt, deadline);
    if (h) return rt_uring_io(co, RT_OP_READV, fd, h, (size_t)iovcnt, 0, deadline);
    rq_t q = {K_READV, fd, (void*)iov, (size_t)iovcnt, 0};
    return rt_ready_io(co, &q, deadline);
}

ssize_t aco_rt_writev(int fd, const struct iovec* iov, int iovcnt, int64_t deadline) {
    CO_FD_OR_EPERM(co, fd);
    if (iovcnt < 0 || iovcnt > IOV_MAX) return -EINVAL;
    if (iov == NULL && iovcnt) return -EFAULT;
    int bad = rt_iov_bad(iov, iovcnt);
    if (bad) return bad;
    size_t total = rt_iov_total(iov, (size_t)iovcnt), done = 0;
    if (total) PENDING_ERR(co, fd);
    if (rt_unlikely(total == 0)) {
        /* writev(2) itself: 0 for any file, before it looks at the file
         * (a socket's sendmsg would say EPIPE, or send an empty datagram) */
        if (aco_unlikely(aco_checked())) aco_checked_access(iov, (size_t)iovcnt * sizeof(*iov), 0);
        ssize_t r = rt_sys_writev(fd, iov, iovcnt);
        return r < 0 ? -errno : r;
    }
    /* Short writes: go on from where the kernel stopped, on a copy of the
     * array that we may trim (in the heap: rt_extra). */
    rt_extra_t* x = rt_extra(co, (size_t)iovcnt * sizeof(*iov));
    if (x == NULL) return -ENOMEM;
    struct iovec* v = (struct iovec*)x->buf;
    memcpy(v, iov, (size_t)iovcnt * sizeof(*iov));
    int cnt = iovcnt;
    while (done < total) {
        ssize_t r;
        int heap = co->s->backend.ops == &rt_backend_uring && !rt_passed(deadline) && uring_may_write(co, fd);
        for (int i = 0; heap && i < cnt; i++)
            if (rt_on_share_stack(co, v[i].iov_base, v[i].iov_len, 0)) heap = 0;
        if (heap) {
            memset(&x->mh, 0, sizeof(x->mh));
            x->mh.msg_iov = v;
            x->mh.msg_iovlen = (size_t)cnt;
            r = rt_uring_io(co, RT_OP_SENDMSG, fd, &x->mh, 0, 0, deadline);
            if (r == -ENOTSOCK) {
                rt_fd_t* e = rt_fd_peek(&co->s->fds, fd);
                if (e) e->kind = RT_FD_OTHER;
                continue;
            }
        } else {
            rq_t q = {K_WRITEV, fd, v, (size_t)cnt, 0};
            r = rt_ready_io(co, &q, deadline);
        }
        if (r < 0) {
            if (done) keep_err(co, fd, r);
            return done ? (ssize_t)done : r;
        }
        done += (size_t)r;
        while (cnt && (size_t)r >= v->iov_len) { r -= (ssize_t)v->iov_len; v++; cnt--; }
        if (cnt) { v->iov_base = (char*)v->iov_base + r; v->iov_len -= (size_t)r; }
    }
    return (ssize_t)done;
}

int aco_rt_accept(int fd, struct sockaddr* addr, socklen_t* addrlen, int flags,
                  int64_t deadline) {
    CO_FD_OR_EPERM(co, fd);
    /* (accept4(2) would say so only after taking a connection, and drop it) */
    if (rt_unlikely(addr != NULL && addrlen == NULL)) return -EFAULT;
    aco_rt_sched_t* s = co->s;
    int r;
    if (s->backend.ops == &rt_backend_uring && !rt_passed(deadline)) {
        size_t n = addr ? (size_t)*addrlen : 0;
        if (addr == NULL || (!rt_on_share_stack(co, addr, n, 1) &&
                             !rt_on_share_stack(co, addrlen, sizeof(*addrlen), 1))) {
            /* addr and addrlen go to the kernel as they are (without an
             * address the kernel looks at no length) */
            r = rt_uring_accept(co, fd, addr, addr ? addrlen : NULL, flags, deadline);
        } else if ((int)*addrlen < 0) {
            return -EINVAL;     /* (accept4(2)'s, which would take a connection first) */
        } else {
            /* On a share stack (a server's usual locals): the kernel
             * writes a heap copy, held while the co waits (a co destroyed
             * there leaves it to the scheduler's free), which is copied
             * back as accept4(2) would: the address cut to *addrlen, the
             * length its own.  (The readiness way below would leave the
             * listening socket O_NONBLOCK for every process sharing it.) */
            struct bounce { struct sockaddr_storage a; socklen_t len; }* b;
            rt_extra_t* x = rt_extra(co, 0);
            if (x == NULL || (b = malloc(sizeof(*b))) == NULL) return -ENOMEM;
            b->len = n < sizeof(b->a) ? (socklen_t)n : (socklen_t)sizeof(b->a);
            x->held = b;
            r = rt_uring_accept(co, fd, addr ? (struct sockaddr*)&b->a : NULL,
                                addr ? &b->len : NULL, flags, deadline);
            x->held = NULL;
            if (r >= 0 && addr) {
                memcpy(addr, &b->a, n < b->len ? n : b->len);
                *addrlen = b->len;
            }
            free(b);
        }
        if (r >= 0) fd_fresh(s, r);
        return r;
    }
    for (;;) {
        /* accept4 has no per-call flag: the listening socket must be
         * O_NONBLOCK now (another thread may accept the one we saw). */
        if ((r = rt_sock_nonblock(fd)) < 0) return r;
        if (aco_unlikely(aco_checked()) && addrlen) {       /* as rq_check */
            aco_checked_access(addrlen, sizeof(*addrlen), 1);
            if (addr && *addrlen) aco_checked_access(addr, *addrlen, 1);
        }
        int nfd = rt_sys_accept4(fd, addr, addrlen, flags);
        if (nfd >= 0) {
            fd_fresh(s, nfd);
            return nfd;
        }
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) return -errno;
        if ((r = rt_may_block(co, deadline)) != 0) return r;
        if ((r = s->backend.ops->wait_fd(co, fd, POLLIN, deadline)) < 0) return r;
    }
}

/* A Unix stream listener whose queue is full: a non-blocking connect(2)
 * says EAGAIN where a blocking one waits for room, and no readiness tells
 * when there is some: try again after a sleep, 1 ms doubling to 64 ms,
 * until the deadline. */
static int unix_connect_wait(aco_rt_co_t* co, int fd, const struct sockaddr* addr,
                             socklen_t addrlen, int64_t deadline) {
    for (int64_t ms = 1;; ms = ms < 64 ? 2 * ms : 64) {
        int r = rt_may_block(co, deadline);
        if (r) return r;
        int64_t ns = ms * 1000000;
        if (deadline != -1 && deadline - rt_now() < ns) ns = deadline - rt_now();
        if (ns > 0 && (r = aco_rt_sleep(ns)) < 0) return r;
        if (rt_sys_connect(fd, addr, addrlen) == 0) return 0;
        if (errno != EAGAIN) return -errno;
    }
}

int aco_rt_connect(int fd, const struct sockaddr* addr, socklen_t addrlen,
                   int64_t deadline) {
    CO_FD_OR_EPERM(co, fd);
    aco_rt_sched_t* s = co->s;
    fd_fresh(s, fd);
    int r = rt_sock_nonblock(fd);  /* connect has no per-call flag either */
    if (r < 0) return r;
    /* A plain connect: the address is read at once, so it may be on the
     * caller's stack (not on a suspended co's: checked mode says so). */
    if (aco_unlikely(aco_checked()) && addr && addrlen) aco_checked_access(addr, addrlen, 0);
    if (rt_sys_connect(fd, addr, addrlen) == 0) return 0;
    if (errno == EAGAIN && addr && addrlen >= sizeof(sa_family_t) && addr->sa_family == AF_UNIX)
        return unix_connect_wait(co, fd, addr, addrlen, deadline);
    /* (EALREADY: an attempt of before goes on: waited for, as a blocking
     * connect(2) waits for it) */
    if (errno != EINPROGRESS && errno != EALREADY && errno != EINTR) return -errno;
    /* In progress: once the socket is writable (or failed), the attempt
     * ends as a blocking connect(2) ends it: its error taken (SO_ERROR)
     * and the socket unconnected (connect with AF_UNSPEC: else the kernel
     * keeps it "connecting" and a connect tried again says ECONNABORTED),
     * or, none, connect(2) once more: 0 and the socket connected (another
     * connect says EISCONN), EALREADY: not yet; EINPROGRESS: the attempt
     * ended behind our back (a shutdown) and this began another, which is
     * undone. */
    for (;;) {
        if ((r = rt_may_block(co, deadline)) != 0) return r;
        if ((r = s->backend.ops->wait_fd(co, fd, POLLOUT, deadline)) < 0) return r;
        int err = 0;
        socklen_t len = sizeof(err);
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0) return -errno;
        if (err == 0) {
            if (rt_sys_connect(fd, addr, addrlen) == 0 || errno == EISCONN) return 0;
            if (errno == EALREADY || errno == EINTR) continue;
            err = errno == EINPROGRESS ? ECONNABORTED : errno;
        }
        struct sockaddr unspec = {.sa_family = AF_UNSPEC};
        rt_sys_connect(fd, &unspec, sizeof(unspec));
        return -err;
    }
}

/* Has fd's table entry (made if none) seen a socket?  ACO_RT_WAIT_AFTER_EAGAIN
 * skips the first look on sockets only: epoll cannot wait on a regular
 * file, which the look finds ready. */
static int wait_on_socket(aco_rt_sched_t* s, int fd) {
    rt_fd_t* f = rt_fd_get(&s->fds, fd);
    return f && rt_fd_kind(f, fd) == RT_FD_SOCK;
}

/* Is fd a regular file or a directory (poll(2) says them ready for
 * reading and writing, never for anything else)? */
static int never_ready(int fd) {
    rt_sys_fid_t id;
    return rt_sys_fid(fd, &id) == 0 && (S_ISREG(id.mode) || S_ISDIR(id.mode));
}

int aco_rt_wait(int fd, int events, int64_t deadline) {
    CO_FD_OR_EPERM(co, fd);
    if (rt_unlikely(fd < 0)) return -EBADF;     /* (poll(2) would skip it) */
    int after_eagain = events & ACO_RT_WAIT_AFTER_EAGAIN;
    events &= ~ACO_RT_WAIT_AFTER_EAGAIN;
    struct pollfd p = {fd, (short)events, 0};
    int n = 0;
    if (!after_eagain || !wait_on_socket(co->s, fd)) {
        n = rt_sys_poll0(&p, 1);
        if (n < 0) return -errno;
    }
    /* A descriptor that lends: bytes its multishot took off the socket are
     * readable too; while the multishot is armed, what comes to the socket
     * is its own (the socket's POLLIN is not ours to see), and its arrival
     * wakes this wait (lend.c, through e->pollers). */
    rt_fd_t* e = lend_entry(co->s, fd);
    int lend = e && e->rx && (events & POLLIN) ? rt_lend_state(e) : -1;
    if (lend < 0 && (events & POLLIN) &&
        rt_unlikely(__atomic_load_n(&rt_rx_alive, __ATOMIC_RELAXED)) && rt_lend_elsewhere(e, fd))
        return -EBUSY;          /* what comes is another scheduler's */
    if (lend == 1) {
        if (n == 1 && (p.revents & POLLNVAL)) return -EBADF;
        return (n == 1 ? p.revents : 0) | POLLIN;
    }
    if (lend == 0) {
        short rev = n == 1 ? (short)(p.revents & ~POLLIN) : 0;
        if (rev) return rev & POLLNVAL ? -EBADF : rev;
        int r = rt_may_block(co, deadline);
        if (r == -ETIMEDOUT) {
            /* the one try of a passed deadline: what the multishot has
             * brought and the loop not yet reaped counts (as for a read);
             * a multishot that ended so leaves the socket's own state */
            co->s->backend.ops->poll(co->s, 0);
            int now = rt_lend_state(e);
            if (now == 1) return POLLIN;
            if (now < 0 && rt_sys_poll0(&p, 1) == 1)
                return p.revents & POLLNVAL ? -EBADF : p.revents;
            return r;
        }
        if (r) return r;
        e->pollers++;
        r = co->s->backend.ops->wait_fd(co, fd, (events & ~POLLIN) | RT_POLL_LENT, deadline);
        e->pollers--;
        return r;
    }
    if (n == 1) return p.revents & POLLNVAL ? -EBADF : p.revents;
    int r = rt_may_block(co, deadline);
    if (r) return r;
    /* A regular file or a directory is ready for reading and writing at
     * once (the look above), and never for anything else: neither epoll
     * nor io_uring can wait on one (epoll_ctl's EPERM, the ring's
     * -EINVAL), so a wait for other events is a sleep to the deadline.
     * (Only a wait without POLLIN and POLLOUT looks at the file's type.) */
    if (!(events & (POLLIN | POLLOUT | POLLRDNORM | POLLWRNORM)) && never_ready(fd))
        return (r = aco_rt_sleep_until(deadline)) != 0 ? r : -ETIMEDOUT;
    return co->s->backend.ops->wait_fd(co, fd, events, deadline);
}

/* aco_rt_poll's look: poll(2) without waiting, a lending descriptor's
 * input as its lend holds it (as aco_rt_wait).  The count of entries with
 * revents, or -errno. */
static int poll_look(aco_rt_co_t* co, struct pollfd* p, nfds_t n) {
    int r = rt_sys_poll0(p, n);
    if (r < 0) return -errno;
    if (rt_likely(!__atomic_load_n(&rt_rx_alive, __ATOMIC_RELAXED))) return r;
    r = 0;
    for (nfds_t i = 0; i < n; i++) {
        if (p[i].fd >= 0 && (p[i].events & POLLIN) && !(p[i].revents & POLLNVAL)) {
            rt_fd_t* e = lend_entry(co->s, p[i].fd);
            int lend = e && e->rx ? rt_lend_state(e) : -1;
            if (lend < 0 && rt_lend_elsewhere(e, p[i].fd)) return -EBUSY;
            if (lend == 1) p[i].revents |= POLLIN;
            else if (lend == 0) p[i].revents &= ~POLLIN;
        }
        r += p[i].revents != 0;
    }
    return r;
}

/* After a wait that closes ended (the k entries that say POLLNVAL): the
 * others looked at (a heap copy without the closed ones), the count.  No
 * memory for the copy: the closed ones alone (the others' readiness is
 * there for the next call). */
static int poll_closed(aco_rt_co_t* co, struct pollfd* fds, nfds_t n, int k) {
    struct pollfd* c = malloc(n * sizeof(*c));
    if (c == NULL) return k;
    for (nfds_t i = 0; i < n; i++) {
        c[i] = fds[i];
        if (fds[i].revents & POLLNVAL) c[i].fd = -1;
    }
    /* (if that look fails, the closed ones alone) */
    int ok = poll_look(co, c, n) >= 0, r = 0;
    for (nfds_t i = 0; i < n; i++) {
        if (ok && c[i].fd >= 0) fds[i].revents = c[i].revents;
        r += fds[i].revents != 0;
    }
    free(c);
    return r;
}

int aco_rt_poll(struct pollfd* fds, nfds_t n, int64_t deadline) {
    CO_OR_EPERM(co);
    struct rlimit rl;
    if (n > 1024 && (getrlimit(RLIMIT_NOFILE, &rl) < 0 || n > rl.rlim_cur)) return -EINVAL;
    if (aco_unlikely(aco_checked()) && n) aco_checked_access(fds, n * sizeof(*fds), 1);
    for (;;) {
        int r = n ? poll_look(co, fds, n) : 0;
        if (r != 0) return r;
        if ((r = rt_may_block(co, deadline)) != 0) return r;
        if (n == 0) return (r = aco_rt_sleep_until(deadline)) < 0 ? r : -ETIMEDOUT;
        /* (p is read before the co parks: it may lie on its share stack) */
        if ((r = co->s->backend.ops->wait_many(co, fds, (unsigned)n, deadline)) < 0) return r;
        if (r > 0) return poll_closed(co, fds, n, r);
    }
}

/* ------------------------------------------------------------------------ */
/* Close                                                                    */
/* ------------------------------------------------------------------------ */

/* Closes read the list (many at once), schedulers come and go. */
/* Give s a close to hear (closes_drain, in s's thread), and wake s's
 * thread (from any thread). */
static void close_send(aco_rt_sched_t* s, rt_close_msg_t* c) {
    /* seq_cst: ordered before the sleeping flag's load in rt_notify */
    c->next = __atomic_load_n(&s->cl.list, __ATOMIC_RELAXED);
    while (!__atomic_compare_exchange_n(&s->cl.list, &c->next, c, 1, __ATOMIC_SEQ_CST,
                                        __ATOMIC_RELAXED)) {}
    rt_notify(s);
}

static pthread_rwlock_t reg_lock = PTHREAD_RWLOCK_INITIALIZER;
static aco_rt_sched_t* reg_head;

/* fork: the lock is not caught held by another thread, and the child has
 * none of the parent's schedulers (they do not cross a fork: aco_rt.h), so
 * its closes tell none of them and its -EDEADLK counts its own alone. */
static pthread_once_t reg_once = PTHREAD_ONCE_INIT;
static void reg_prefork(void) { pthread_rwlock_wrlock(&reg_lock); }
static void reg_parent(void) { pthread_rwlock_unlock(&reg_lock); }
static void reg_child(void) {
    static const pthread_rwlock_t fresh = PTHREAD_RWLOCK_INITIALIZER;
    rt_tls_sched = NULL;        /* the forking thread's was the parent's */
    reg_head = NULL;
    __atomic_store_n(&rt_nsched, 0u, __ATOMIC_SEQ_CST);
    memcpy(&reg_lock, &fresh, sizeof(reg_lock));
}
static void reg_atfork(void) { pthread_atfork(reg_prefork, reg_parent, reg_child); }

void rt_sched_reg(aco_rt_sched_t* s, int add) {
    pthread_once(&reg_once, reg_atfork);
    pthread_rwlock_wrlock(&reg_lock);
    if (add) {
        s->reg.reg_prev = NULL;
        s->reg.reg_next = reg_head;
        if (reg_head) reg_head->reg.reg_prev = s;
        reg_head = s;
    } else {
        if (s->reg.reg_prev) s->reg.reg_prev->reg.reg_next = s->reg.reg_next; else reg_head = s->reg.reg_next;
        if (s->reg.reg_next) s->reg.reg_next->reg.reg_prev = s->reg.reg_prev;
    }
    pthread_rwlock_unlock(&reg_lock);
}

void rt_sched_notify_all(void) {
    pthread_rwlock_rdlock(&reg_lock);
    for (aco_rt_sched_t* s = reg_head; s; s = s->reg.reg_next) rt_notify(s);
    pthread_rwlock_unlock(&reg_lock);
}

/* fd's entry in s if cos of s wait on it, else NULL (s any thread's). */
static rt_fd_t* waited(aco_rt_sched_t* s, int fd) {
    rt_fd_t* e = rt_fd_peek_remote(&s->fds, fd);
    return e && __atomic_load_n(&e->busy, __ATOMIC_SEQ_CST) ? e : NULL;
}

/* The part of a close for the calling thread's scheduler s (if any). */
static void close_here(aco_rt_sched_t* s, int fd) {
    rt_fd_t* e = s ? rt_fd_peek(&s->fds, fd) : NULL;
    if (e) {
        if (e->registered || e->busy || e->rx) s->backend.ops->closing(s, fd, 0);
        rt_fd_forget(e);
        e->closes++;
    }
}

/* A close while other schedulers run.  Each with cos waiting on fd gets a
 * message before the close (heard in its own thread, soon: the file may be
 * gone by then, which is why what they do needs no descriptor).  A co of
 * another thread may begin to wait as we look: it counts itself first
 * (rt_fd_busy_inc_fenced), so if we missed it, it began before the close
 * and we see it when we look again after: its scheduler is asked to check
 * its waits (fd_recheck), where the backend tells a file that is gone
 * from a new one under the same number, which a message could not.  So
 * is a scheduler told whose entry's gen moved after we read it: its wait
 * found the file it had registered gone and took the new one (ours) as we
 * looked, and the message names the old (fd_closed_remote looks at the
 * backend then).  The list of schedulers is held throughout.  -ENOMEM: a
 * message could not be made (nothing was closed, nobody told). */
static int close_shared(aco_rt_sched_t* me, int fd) {
    enum { BATCH = 16 };
    rt_close_msg_t* pre[BATCH];
    struct told { aco_rt_sched_t* s; uint32_t gen; } pre_to[BATCH];
    rt_close_msg_t** m = pre;
    struct told* to = pre_to;
    int r = -ENOMEM, n = 0, got = 0, told = 0;
    pthread_rwlock_rdlock(&reg_lock);
    for (aco_rt_sched_t* s = reg_head; s; s = s->reg.reg_next)
        if (s != me && waited(s, fd)) n++;
    /* Allocate first, so that either all are told or none. */
    if (n > BATCH) {
        m = malloc((size_t)n * sizeof(*m));
        to = malloc((size_t)n * sizeof(*to));
    }
    if (m && to) for (; got < n && (m[got] = malloc(sizeof(**m))) != NULL; got++) {}
    if (m == NULL || to == NULL || got < n) {
        while (got) free(m[--got]);
        goto out;
    }
    for (aco_rt_sched_t* s = reg_head; s && told < n; s = s->reg.reg_next) {
        rt_fd_t* e = s == me ? NULL : waited(s, fd);
        if (e == NULL) continue;
        m[told]->fd = fd;
        m[told]->gen = to[told].gen = __atomic_load_n(&e->gen, __ATOMIC_ACQUIRE);
        to[told].s = s;
        close_send(s, m[told++]);
    }
    for (int i = told; i < n; i++) free(m[i]);      /* (one went idle meanwhile) */
    close_here(me, fd);
    r = rt_sys_close(fd) == 0 ? 0 : -errno;
    for (aco_rt_sched_t* s = reg_head; s; s = s->reg.reg_next) {
        rt_fd_t* e = s == me ? NULL : waited(s, fd);
        int i = 0;
        while (i < told && to[i].s != s) i++;
        if (e == NULL || (i < told && __atomic_load_n(&e->gen, __ATOMIC_ACQUIRE) == to[i].gen))
            continue;
        __atomic_store_n(&e->recheck, (uint8_t)1, __ATOMIC_SEQ_CST);
        if (__atomic_exchange_n(&s->cl.recheck_on, 1u, __ATOMIC_SEQ_CST) == 0) {
            s->cl.recheck.fd = -1;
            close_send(s, &s->cl.recheck);
        }
    }
out:
    pthread_rwlock_unlock(&reg_lock);
    if (m != pre) free(m);
    if (to != pre_to) free(to);
    return r;
}

/* A socket with SO_LINGER on and a time makes close(2) wait in the kernel
 * for the peer to acknowledge what was sent, up to that time (TCP: at
 * least one round trip, FIN and all).  In a co the thread must not wait
 * so: the number is closed at once (the kernel keeps the socket while
 * another descriptor of it is open) and that other, a duplicate made
 * first, is closed on a helper thread while the co parks.  Returns the
 * duplicate, or -1 for a plain close (no co, known not to be a socket,
 * no lingering, no descriptor left for a duplicate: then the thread
 * waits, as before). */
static int linger_dup(aco_rt_sched_t* s, int fd) {
    if (rt_self() == NULL) return -1;
    rt_fd_t* e = rt_fd_peek(&s->fds, fd);
    if (e && e->kind == RT_FD_OTHER) return -1;
    struct linger l;
    socklen_t len = sizeof(l);
    if (getsockopt(fd, SOL_SOCKET, SO_LINGER, &l, &len) != 0 || !l.l_onoff || l.l_linger <= 0)
        return -1;
    return rt_sys_fcntl(fd, F_DUPFD_CLOEXEC, 0);
}

/* The helper's side: the last close, and a result that is never NULL (a
 * drop with NULL: the close never ran). */
static void* linger_close_fn(void* arg) {
    int r = rt_sys_close((int)(intptr_t)arg);
    return (void*)(intptr_t)(r == 0 ? 1 : 1 + errno);
}

static void linger_close_drop(void* arg, void* result) {
    if (result == NULL) rt_sys_close((int)(intptr_t)arg);
}

/* d closed after the number's close, whose result is r: on a helper if
 * the number is gone (r is not -ENOMEM), else here (d is not the last).
 * r, or the last close's error (a co cancelled while it waits: 0, the
 * close goes on without it). */
static int linger_close(int d, int r) {
    void* res = NULL;
    int e = r == -ENOMEM ? -ENOMEM
                         : rt_offload_call(rt_self(), linger_close_fn, (void*)(intptr_t)d,
                                           linger_close_drop, &res, -1, 0);
    if (e == 0) return r == 0 && (intptr_t)res > 1 ? -(int)((intptr_t)res - 1) : r;
    if (e == -ECANCELED || e == -ETIMEDOUT) return r;       /* (drop closes d) */
    int c = rt_sys_close(d);            /* nothing queued (-ENOSYS, -EAGAIN, ...) */
    return r == 0 && c != 0 ? -errno : r;
}

int aco_rt_close(int fd) {
    aco_rt_sched_t* s = rt_tls_sched;
    int d = linger_dup(s, fd), r;
    if (__atomic_load_n(&rt_nsched, __ATOMIC_ACQUIRE) > (s != NULL)) {
        r = close_shared(s, fd);
    } else {
        close_here(s, fd);
        r = rt_sys_close(fd) == 0 ? 0 : -errno;
    }
    return d >= 0 ? linger_close(d, r) : r;
}

/* The descriptor a parked co waits on (epoll's readiness, an io_uring
 * operation), or -1. */
static int parked_on(const aco_rt_co_t* co) {
    if (co->state != RT_PARKED) return -1;
    if (co->wait == RT_W_FD_IN || co->wait == RT_W_FD_OUT) return (int)(intptr_t)co->wait_obj;
    if (co->flags & RT_IO_OP) return co->w.io.fd;
    return -1;
}

static void fd_recheck_one(aco_rt_sched_t* s, int fd) {
    rt_fd_t* e = fd >= 0 ? rt_fd_peek(&s->fds, fd) : NULL;
    if (e == NULL || !__atomic_exchange_n(&e->recheck, (uint8_t)0, __ATOMIC_SEQ_CST)) return;
    if (s->backend.ops->stale(s, fd)) {
        s->backend.ops->closing(s, fd, 1);
        rt_fd_forget(e);
    }
}

static void fd_recheck(aco_rt_sched_t* s) {
    for (uint32_t i = 0; i < s->recs.ncos; i++) {
        aco_rt_co_t* co = s->recs.cos[i];
        int fd = parked_on(co);
        if (fd >= 0) {
            fd_recheck_one(s, fd);
            continue;
        }
        /* aco_rt_poll: each of its descriptors (a close ends the wait, so
         * the co's list is looked at up to the first that is gone) */
        for (unsigned k = 0; (fd = s->backend.ops->poll_fd(co, k)) >= 0; k++) {
            fd_recheck_one(s, fd);
            if (co->state != RT_PARKED) break;
        }
    }
}

/* The closes other threads sent: non-zero if there were some. */
static int closes_drain(aco_rt_sched_t* s) {
    if (__atomic_load_n(&s->cl.list, __ATOMIC_RELAXED) == NULL) return 0;
    rt_close_msg_t* c = __atomic_exchange_n(&s->cl.list, NULL, __ATOMIC_ACQUIRE);
    while (c) {
        rt_close_msg_t* next = c->next;
        if (c == &s->cl.recheck) {
            /* (off first: a close that sets a flag later sends it again) */
            __atomic_store_n(&s->cl.recheck_on, 0u, __ATOMIC_SEQ_CST);
            fd_recheck(s);
        } else {
            fd_closed_remote(s, c->fd, c->gen);
            free(c);
        }
        c = next;
    }
    return 1;
}
RT_HOOK(rt_hook_closes, closes_drain)

/* ------------------------------------------------------------------------ */
/* sendmsg, recvmsg                                                         */
/* ------------------------------------------------------------------------ */

/* Does any memory msg points to lie on co's share stack (so io_uring may
 * not have it)? */
static int msg_on_stack(aco_rt_co_t* co, const struct msghdr* m, int wr) {
    if (m->msg_name && m->msg_namelen && rt_on_share_stack(co, m->msg_name, m->msg_namelen, wr))
        return 1;
    if (m->msg_control && m->msg_controllen &&
        rt_on_share_stack(co, m->msg_control, m->msg_controllen, wr))
        return 1;
    for (size_t i = 0; i < m->msg_iovlen; i++)
        if (m->msg_iov[i].iov_len && rt_on_share_stack(co, m->msg_iov[i].iov_base,
                                                       m->msg_iov[i].iov_len, wr))
            return 1;
    return 0;
}

/* One sendmsg or recvmsg of m (in the heap when io_uring may take it),
 * waiting for readiness as long as it would block: the count or -errno. */
static ssize_t msg_once(aco_rt_co_t* co, int send, int fd, struct msghdr* m, int flags,
                        int uring, int64_t deadline) {
    /* A datagram by address may meet POLLOUT and EAGAIN at once (a Unix
     * peer whose queue is full: the sender's readiness knows no peer):
     * once a wait said room that the send did not find, tries come after
     * sleeps, 1 ms doubling to 64 ms, as a blocking sendmsg(2) waits. */
    int64_t step = 0;
    int waited = 0;
    for (;;) {
        ssize_t r;
        if (uring && !rt_passed(deadline)) {
            r = rt_uring_io(co, send ? RT_OP_SENDMSG : RT_OP_RECVMSG, fd, m, 0, flags, deadline);
            if (r != -EAGAIN) return r;
        } else {
            r = send ? rt_sys_sendmsg(fd, m, flags | MSG_DONTWAIT | MSG_NOSIGNAL)
                     : rt_sys_recvmsg(fd, m, flags | MSG_DONTWAIT);
            if (r >= 0) return r;
            if (errno == EINTR) continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK) return -errno;
            if (flags & (MSG_DONTWAIT | MSG_ERRQUEUE)) return -EAGAIN;     /* (never waits) */
            if (waited && send && !step && m->msg_name) {
                rt_fd_t* e = rt_fd_get(&co->s->fds, fd);
                if (e && rt_fd_kind(e, fd) == RT_FD_SOCK && !e->stream) step = 1;
            }
        }
        int w = rt_may_block(co, deadline);
        if (w) return w;
        if (step) {
            int64_t ns = step * 1000000;
            if (deadline != -1 && deadline - rt_now() < ns) ns = deadline - rt_now();
            if (ns > 0 && (w = aco_rt_sleep(ns)) < 0) return w;
            step = step < 64 ? 2 * step : 64;
        } else if ((w = co->s->backend.ops->wait_fd(co, fd, send ? POLLOUT : POLLIN, deadline)) < 0) {
            return w;
        }
        waited = 1;
    }
}

/* Is fd a stream socket now?  Asked of the kernel, and e (if any) told:
 * its guess may be a closed file's, the number reused behind the
 * runtime's back. */
static int stream_now(rt_fd_t* e, int fd) {
    int type = 0;
    socklen_t len = sizeof(type);
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0) return 0;
    if (e) {
        e->kind = RT_FD_SOCK;
        e->stream = type == SOCK_STREAM;
    }
    return type == SOCK_STREAM;
}

static ssize_t msg_io(int send, int fd, struct msghdr* msg, int flags, int64_t deadline) {
    CO_FD_OR_EPERM(co, fd);
    if (msg == NULL) return -EFAULT;
    if (msg->msg_iovlen > IOV_MAX) return -EMSGSIZE;
    if (msg->msg_iov == NULL && msg->msg_iovlen) return -EFAULT;
    int bad = rt_iov_bad(msg->msg_iov, (int)msg->msg_iovlen);
    if (bad) return bad;
    if (send) PENDING_ERR(co, fd);
    else RD_PENDING_ERR(co, fd);
    if (!send) {
        rt_fd_t* e = lend_entry(co->s, fd);
        if (rt_unlikely(e && e->rx && rt_lend_state(e) >= 0)) return -EOPNOTSUPP;
        if (rt_unlikely(__atomic_load_n(&rt_rx_alive, __ATOMIC_RELAXED)) && rt_lend_elsewhere(e, fd))
            return -EBUSY;
    }
    size_t total = rt_iov_total(msg->msg_iov, msg->msg_iovlen);

    /* A copy of the header and of the vector to advance: in the heap, for
     * io_uring, which reads them after the co parked. */
    rt_extra_t* x = rt_extra(co, (msg->msg_iovlen ? msg->msg_iovlen : 1) * sizeof(struct iovec));
    if (x == NULL) return -ENOMEM;
    struct iovec* v = (struct iovec*)x->buf;
    if (msg->msg_iovlen) memcpy(v, msg->msg_iov, msg->msg_iovlen * sizeof(*v));
    struct msghdr* m = &x->mh;
    *m = *msg;
    m->msg_iov = v;
    if (aco_unlikely(aco_checked()) && !send) aco_checked_access(msg, sizeof(*msg), 1);
    rt_fd_t* e = rt_fd_get(&co->s->fds, fd);
    int stream = e && rt_fd_kind(e, fd) == RT_FD_SOCK && e->stream;
    /* A receive of all: the type asked now, as aco_rt_recv does (the
     * entry's may be a closed file's, and a SOCK_SEQPACKET's records must
     * not be joined) */
    if (!send && (flags & (MSG_WAITALL | MSG_DONTWAIT | MSG_PEEK)) == MSG_WAITALL)
        stream = stream_now(e, fd);
    int all = stream && (send || (flags & MSG_WAITALL)) && !(flags & (MSG_DONTWAIT | MSG_PEEK));
    /* io_uring: not for a datagram's send (uring_may_write), nor where
     * the call must not wait; its MSG_WAITALL only where the kernel's
     * going on is ours (a stream's receive of all) */
    int uring = rt_ur_f_on(co->s, send ? RT_F_SENDMSG : RT_F_RECVMSG) &&
                !msg_on_stack(co, msg, !send) && !(flags & (MSG_DONTWAIT | MSG_ERRQUEUE)) &&
                (!send || stream);
    ssize_t r = msg_once(co, send, fd, m, all ? flags : flags & ~MSG_WAITALL, uring, deadline);
    if (r < 0) return r;
    if (!send) {                    /* what recvmsg(2) writes back */
        msg->msg_namelen = m->msg_namelen;
        msg->msg_controllen = m->msg_controllen;
        msg->msg_flags = m->msg_flags;
    }
    size_t done = (size_t)r;
    /* A send cut short where the entry said "not a stream" (a datagram is
     * all or nothing): the number may hold a stream socket now; ask. */
    if (send && !all && r > 0 && done < total && !(flags & MSG_DONTWAIT)) all = stream_now(e, fd);
    /* a stream: the rest (send: everything; recv MSG_WAITALL: until the
     * end), the ancillary data with the first bytes only */
    while (all && r > 0 && done < total) {
        while (m->msg_iovlen && (size_t)r >= m->msg_iov->iov_len) {
            r -= (ssize_t)m->msg_iov->iov_len;
            m->msg_iov++;
            m->msg_iovlen--;
        }
        if (m->msg_iovlen) {
            m->msg_iov->iov_base = (char*)m->msg_iov->iov_base + r;
            m->msg_iov->iov_len -= (size_t)r;
        }
        m->msg_name = NULL;
        m->msg_namelen = 0;
        m->msg_control = NULL;
        m->msg_controllen = 0;
        r = msg_once(co, send, fd, m, flags & ~MSG_WAITALL, uring, deadline);
        if (r > 0) done += (size_t)r;
        else if (r < 0) keep_err(co, fd, r);
    }
    return (ssize_t)done;
}

ssize_t aco_rt_sendmsg(int fd, const struct msghdr* msg, int flags, int64_t deadline) {
    return msg_io(1, fd, (struct msghdr*)msg, flags, deadline);
}

ssize_t aco_rt_recvmsg(int fd, struct msghdr* msg, int flags, int64_t deadline) {
    return msg_io(0, fd, msg, flags, deadline);
}
