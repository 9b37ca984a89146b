/* io.c - the I/O calls, on either backend.
 *
 * Two ways to do an operation:
 *   readiness  the plain system call on a non-blocking descriptor; on EAGAIN
 *              wait for readiness (epoll, or io_uring POLL_ADD) and try
 *              again.  The buffer is touched only while the co runs, so it
 *              may lie on the co's share stack.
 *   operation  (io_uring) the kernel does the whole operation and writes or
 *              reads the buffer whenever it gets to it, the co parked
 *              meanwhile: only for buffers that are not on a share stack.
 * The epoll backend always takes the first way; io_uring takes the second
 * unless a buffer (or an address out-parameter) lies on the co's share
 * stack, or the deadline has already passed (then one non-blocking try).
 *
 * The descriptor table remembers, per descriptor number, whether we made it
 * non-blocking and (epoll) whether it is registered, with its waiters.  A
 * number is reset when aco_rt_accept or aco_rt_connect hands out a new
 * socket under it, and by aco_rt_close: close descriptors used here with
 * aco_rt_close, or the table may describe a dead file.
 */
#define _GNU_SOURCE
#include "rt_impl.h"

#include <fcntl.h>
#include "rt_sys.h"
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

/* The table is chunks of RT_FD_CHUNK entries that never move: waiters
 * point at their entry's queue. */
rt_fd_t* rt_fd_get(aco_rt_sched_t* s, int fd) {
    if (fd < 0) return NULL;
    int c = fd / RT_FD_CHUNK;
    if (c >= s->nfdc) {
        int n = s->nfdc ? s->nfdc : 16;
        while (n <= c) n *= 2;
        rt_fd_t** t = realloc(s->fdc, (size_t)n * sizeof(*t));
        if (t == NULL) return NULL;
        memset(t + s->nfdc, 0, (size_t)(n - s->nfdc) * sizeof(*t));
        s->fdc = t;
        s->nfdc = n;
    }
    if (s->fdc[c] == NULL && (s->fdc[c] = calloc(RT_FD_CHUNK, sizeof(rt_fd_t))) == NULL)
        return NULL;
    return &s->fdc[c][fd % RT_FD_CHUNK];
}

void rt_fd_free_all(aco_rt_sched_t* s) {
    for (int i = 0; i < s->nfdc; i++) free(s->fdc[i]);
    free(s->fdc);
    s->fdc = NULL;
    s->nfdc = 0;
}

/* A new file under number fd: forget what the table says of the old one. */
static void fd_fresh(aco_rt_sched_t* s, int fd, int nonblock) {
    rt_fd_t* e = rt_fd_get(s, fd);
    if (e == NULL) return;
    if (e->registered || !rt_wq_empty(&e->q)) s->be->closing(s, fd);
    uint32_t gen = e->gen + 1;
    memset(e, 0, sizeof(*e));
    e->gen = gen;
    e->nonblock = (uint8_t)nonblock;
    int type = 0;
    socklen_t len = sizeof(type);
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type == SOCK_STREAM)
        e->stream = 1;
}

int rt_fd_nonblock(aco_rt_sched_t* s, int fd) {
    rt_fd_t* e = rt_fd_get(s, fd);
    if (e == NULL) return fd < 0 ? -EBADF : -ENOMEM;
    if (rt_likely(e->nonblock)) return 0;
    int fl = rt_sys_fcntl(fd, F_GETFL, 0);
    if (fl < 0) return -errno;
    if (!(fl & O_NONBLOCK) && rt_sys_fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) return -errno;
    e->nonblock = 1;
    return 0;
}

int rt_on_share_stack(const aco_rt_co_t* co, const void* p, size_t n) {
    if (co->flags & RT_STANDALONE) return 0;    /* its stack is its own */
    const aco_share_stack_t* ss = rt_aco(co)->share_stack;
    uintptr_t lo = (uintptr_t)ss->ptr, hi = lo + ss->sz, a = (uintptr_t)p;
    return p != NULL && a < hi && a + n > lo;
}

/* A deadline that has passed means one non-blocking try: the readiness way. */
static inline int passed(int64_t deadline) {
    return deadline == 0 || (deadline > 0 && deadline <= rt_now());
}

static inline int use_uring(const aco_rt_co_t* co, const void* buf, size_t n, int64_t deadline) {
    return co->s->be == &rt_backend_uring && !rt_on_share_stack(co, buf, n) &&
           !passed(deadline);
}

/* ------------------------------------------------------------------------ */
/* The readiness way                                                        */
/* ------------------------------------------------------------------------ */

enum { K_READ, K_WRITE, K_READV, K_WRITEV, K_RECV, K_SEND };

typedef struct {
    int kind;
    int fd;
    void* buf;
    size_t n;
    int flags;
} rq_t;

static ssize_t sys_once(const rq_t* q) {
    switch (q->kind) {
    case K_READ:   return rt_sys_read(q->fd, q->buf, q->n);
    case K_WRITE:  return rt_sys_write(q->fd, q->buf, q->n);
    case K_READV:  return rt_sys_readv(q->fd, (const struct iovec*)q->buf, (int)q->n);
    case K_WRITEV: return rt_sys_writev(q->fd, (const struct iovec*)q->buf, (int)q->n);
    case K_RECV:   return rt_sys_recv(q->fd, q->buf, q->n, q->flags | MSG_DONTWAIT);
    default:       return rt_sys_send(q->fd, q->buf, q->n, q->flags | MSG_DONTWAIT | MSG_NOSIGNAL);
    }
}

static ssize_t ready_io(aco_rt_co_t* co, const rq_t* q, int64_t deadline) {
    aco_rt_sched_t* s = co->s;
    int rd = q->kind == K_READ || q->kind == K_READV || q->kind == K_RECV;
    int r, events = rd ? POLLIN : POLLOUT;
    if (q->kind != K_RECV && q->kind != K_SEND && (r = rt_fd_nonblock(s, q->fd)) < 0)
        return r;
    /* epoll: a stream socket that a short read drained has nothing until
     * its next edge, which wakes us: wait first, skip the EAGAIN. */
    rt_fd_t* e = (rd && s->be == &rt_backend_epoll && q->kind != K_READV &&
                  !(q->flags & MSG_PEEK)) ? rt_fd_peek(s, q->fd) : NULL;
    if (e && (!e->stream || e->rd_hup)) e = NULL;

    if (e && e->rd_empty && !passed(deadline)) goto wait;
    for (;;) {
        ssize_t n = sys_once(q);
        if (n >= 0) {
            if (e && n > 0 && (size_t)n < q->n) e->rd_empty = 1;
            return n;
        }
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) return -errno;
    wait:
        if ((r = rt_may_block(co, deadline)) != 0) return r;
        if ((r = s->be->wait_fd(co, q->fd, events, deadline)) < 0) return r;
        if (e) e->rd_empty = 0;
    }
}

/* ------------------------------------------------------------------------ */
/* The calls                                                                */
/* ------------------------------------------------------------------------ */

/* The running co, or return -EPERM; a cancelled co's calls fail at once. */
#define CO_OR_EPERM(co)                                         \
    aco_rt_co_t* co = rt_self();                                \
    if (rt_unlikely(co == NULL)) return -EPERM;                 \
    if (rt_unlikely(co->flags & RT_CANCELLED)) return -ECANCELED

ssize_t aco_rt_read(int fd, void* buf, size_t n, int64_t deadline) {
    CO_OR_EPERM(co);
    if (use_uring(co, buf, n, deadline))
        return rt_uring_io(co, RT_OP_READ, fd, buf, n, 0, deadline);
    rq_t q = {K_READ, fd, buf, n, 0};
    return ready_io(co, &q, deadline);
}

ssize_t aco_rt_recv(int fd, void* buf, size_t n, int flags, int64_t deadline) {
    CO_OR_EPERM(co);
    if (use_uring(co, buf, n, deadline))
        return rt_uring_io(co, RT_OP_RECV, fd, buf, n, flags, deadline);
    rq_t q = {K_RECV, fd, buf, n, flags};
    return ready_io(co, &q, deadline);
}

/* Write all n bytes: the count, or -errno if nothing was written. */
static ssize_t write_all(aco_rt_co_t* co, int op, int fd, const void* buf, size_t n,
                         int flags, int64_t deadline) {
    size_t done = 0;
    do {
        const char* p = (const char*)buf + done;
        ssize_t r;
        if (use_uring(co, p, n - done, deadline)) {
            r = rt_uring_io(co, op == K_WRITE ? RT_OP_WRITE : RT_OP_SEND, fd,
                            (void*)p, n - done, flags, deadline);
        } else {
            rq_t q = {op, fd, (void*)p, n - done, flags};
            r = ready_io(co, &q, deadline);
        }
        if (r < 0) return done ? (ssize_t)done : r;
        done += (size_t)r;
    } while (done < n);
    return (ssize_t)done;
}

ssize_t aco_rt_write(int fd, const void* buf, size_t n, int64_t deadline) {
    CO_OR_EPERM(co);
    return write_all(co, K_WRITE, fd, buf, n, 0, deadline);
}

ssize_t aco_rt_send(int fd, const void* buf, size_t n, int flags, int64_t deadline) {
    CO_OR_EPERM(co);
    return write_all(co, K_SEND, fd, buf, n, flags, deadline);
}

/* May io_uring take this iovec array?  It gets a heap copy of the array
 * (the array itself may be on the stack); no buffer may be on it. */
static struct iovec* iov_for_uring(aco_rt_co_t* co, const struct iovec* iov, int cnt,
                                   int64_t deadline) {
    if (co->s->be != &rt_backend_uring || passed(deadline) || cnt <= 0 || cnt > IOV_MAX)
        return NULL;
    for (int i = 0; i < cnt; i++)
        if (rt_on_share_stack(co, iov[i].iov_base, iov[i].iov_len)) return NULL;
    rt_extra_t* x = rt_extra(co, (size_t)cnt * sizeof(*iov));
    if (x == NULL) return NULL;
    memcpy(x->buf, iov, (size_t)cnt * sizeof(*iov));
    return (struct iovec*)x->buf;
}

ssize_t aco_rt_readv(int fd, const struct iovec* iov, int iovcnt, int64_t deadline) {
    CO_OR_EPERM(co);
    struct iovec* h = iov_for_uring(co, iov, iovcnt, deadline);
    if (h) return rt_uring_io(co, RT_OP_READV, fd, h, (size_t)iovcnt, 0, deadline);
    rq_t q = {K_READV, fd, (void*)iov, (size_t)iovcnt, 0};
    return ready_io(co, &q, deadline);
}

ssize_t aco_rt_writev(int fd, const struct iovec* iov, int iovcnt, int64_t deadline) {
    CO_OR_EPERM(co);
    if (iovcnt < 0 || iovcnt > IOV_MAX) return -EINVAL;
    size_t total = 0, done = 0;
    for (int i = 0; i < iovcnt; i++) total += iov[i].iov_len;
    /* Short writes: go on from where the kernel stopped, on a copy of the
     * array that we may trim (in the heap: rt_extra). */
    rt_extra_t* x = rt_extra(co, (size_t)(iovcnt ? iovcnt : 1) * sizeof(*iov));
    if (x == NULL) return -ENOMEM;
    struct iovec* v = (struct iovec*)x->buf;
    memcpy(v, iov, (size_t)iovcnt * sizeof(*iov));
    int cnt = iovcnt;
    while (done < total || total == 0) {
        ssize_t r;
        int heap = co->s->be == &rt_backend_uring && !passed(deadline);
        for (int i = 0; heap && i < cnt; i++)
            if (rt_on_share_stack(co, v[i].iov_base, v[i].iov_len)) heap = 0;
        if (heap) {
            r = rt_uring_io(co, RT_OP_WRITEV, fd, v, (size_t)cnt, 0, deadline);
        } else {
            rq_t q = {K_WRITEV, fd, v, (size_t)cnt, 0};
            r = ready_io(co, &q, deadline);
        }
        if (r < 0) return done ? (ssize_t)done : r;
        if (total == 0) return 0;
        done += (size_t)r;
        while (cnt && (size_t)r >= v->iov_len) { r -= (ssize_t)v->iov_len; v++; cnt--; }
        if (cnt) { v->iov_base = (char*)v->iov_base + r; v->iov_len -= (size_t)r; }
    }
    return (ssize_t)done;
}

int aco_rt_accept(int fd, struct sockaddr* addr, socklen_t* addrlen, int flags,
                  int64_t deadline) {
    CO_OR_EPERM(co);
    aco_rt_sched_t* s = co->s;
    int r;
    if (use_uring(co, addr, addr ? sizeof(struct sockaddr_storage) : 0, deadline) &&
        !(addrlen && rt_on_share_stack(co, addrlen, sizeof(*addrlen)))) {
        /* addr and addrlen go to the kernel as they are: not on the stack */
        r = rt_uring_accept(co, fd, addr, addrlen, flags, deadline);
        if (r >= 0) fd_fresh(s, r, (flags & SOCK_NONBLOCK) != 0);
        return r;
    }
    if ((r = rt_fd_nonblock(s, fd)) < 0) return r;
    for (;;) {
        int nfd = rt_sys_accept4(fd, addr, addrlen, flags | SOCK_NONBLOCK);
        if (nfd >= 0) {
            /* the caller did not ask for O_NONBLOCK: it gets it anyway, and
             * the table says so (our calls need it there) */
            fd_fresh(s, nfd, 1);
            return nfd;
        }
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) return -errno;
        if ((r = rt_may_block(co, deadline)) != 0) return r;
        if ((r = s->be->wait_fd(co, fd, POLLIN, deadline)) < 0) return r;
    }
}

int aco_rt_connect(int fd, const struct sockaddr* addr, socklen_t addrlen,
                   int64_t deadline) {
    CO_OR_EPERM(co);
    aco_rt_sched_t* s = co->s;
    fd_fresh(s, fd, 0);
    int r = rt_fd_nonblock(s, fd);
    if (r < 0) return r;
    /* A plain connect: the address is read at once, so it may be anywhere. */
    if (rt_sys_connect(fd, addr, addrlen) == 0) return 0;
    if (errno != EINPROGRESS && errno != EINTR) return -errno;
    for (;;) {
        if ((r = rt_may_block(co, deadline)) != 0) return r;
        if ((r = s->be->wait_fd(co, fd, POLLOUT, deadline)) < 0) return r;
        int err = 0;
        socklen_t len = sizeof(err);
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0) return -errno;
        if (err) return -err;
        struct pollfd p = {fd, POLLOUT, 0};
        if (rt_sys_poll0(&p, 1) == 1 && (p.revents & POLLOUT)) return 0;
    }
}

int aco_rt_wait(int fd, int events, int64_t deadline) {
    CO_OR_EPERM(co);
    struct pollfd p = {fd, (short)events, 0};
    int n = rt_sys_poll0(&p, 1);
    if (n < 0) return -errno;
    if (n == 1) return p.revents & POLLNVAL ? -EBADF : p.revents;
    int r = rt_may_block(co, deadline);
    if (r) return r;
    return co->s->be->wait_fd(co, fd, events, deadline);
}

int aco_rt_close(int fd) {
    aco_rt_sched_t* s = rt_tls_sched;
    if (s) {
        s->be->closing(s, fd);
        rt_fd_t* e = rt_fd_peek(s, fd);
        if (e) {
            uint32_t gen = e->gen + 1;
            memset(e, 0, sizeof(*e));
            e->gen = gen;
        }
    }
    return rt_sys_close(fd) == 0 ? 0 : -errno;
}
