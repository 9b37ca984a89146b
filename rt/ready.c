/* ready.c - the readiness way of the I/O calls (io.c, lend.c): the plain
 * system call, non-blocking for this call only; on EAGAIN, wait for
 * readiness through the backend (epoll, or io_uring's POLL_ADD) and try
 * again.  The buffer is touched only while the co runs, so it may lie on
 * the co's share stack.  Below io.c and lend.c, above the backends and the
 * descriptor table.
 */
#define _GNU_SOURCE
#include "rt_impl.h"
#include "rt_io.h"
#include "rt_sys.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>

/* Standard input, output and error came from the parent and are shared
 * with it (a shell's terminal, a pipeline's pipe): O_NONBLOCK set there
 * would outlive the program and make the next reader see EAGAIN (`prog;
 * cat`).  So when the runtime sets it on one of them it keeps which file
 * that was, and at exit clears the flag from that file if it still has it
 * under the same number (not what the program set first: that is its
 * own).  Written once per number (the first setter wins), read at exit. */
static struct {
    int          set;           /* atomic: 0, 1 being written, 2 kept */
    rt_sys_fid_t id;            /* (past the hooks' fstat: rt_sys.h) */
} stdio_nb[3];

static void stdio_nb_undo(void) {
    for (int fd = 0; fd < 3; fd++) {
        rt_sys_fid_t id;
        if (__atomic_load_n(&stdio_nb[fd].set, __ATOMIC_ACQUIRE) != 2 || rt_sys_fid(fd, &id) < 0 ||
            id.dev != stdio_nb[fd].id.dev || id.ino != stdio_nb[fd].id.ino)
            continue;
        int fl = rt_sys_fcntl(fd, F_GETFL, 0);
        if (fl >= 0 && (fl & O_NONBLOCK)) rt_sys_fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    }
}

static pthread_once_t stdio_nb_once = PTHREAD_ONCE_INIT;
static void stdio_nb_init(void) {
    if (atexit(stdio_nb_undo) != 0) { /* no undo: as before */ }
}

/* fd (0, 1 or 2) was made O_NONBLOCK by us just now. */
static void stdio_nb_keep(int fd) {
    rt_sys_fid_t id;
    int zero = 0;
    if (rt_sys_fid(fd, &id) < 0 ||
        !__atomic_compare_exchange_n(&stdio_nb[fd].set, &zero, 1, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_RELAXED))
        return;
    pthread_once(&stdio_nb_once, stdio_nb_init);
    stdio_nb[fd].id = id;
    __atomic_store_n(&stdio_nb[fd].set, 2, __ATOMIC_RELEASE);
}

/* The syscall hooks (libaco_hook: docs/hooks.md) hide the O_NONBLOCK the
 * runtime sets, from fcntl(F_GETFL) and from the blocking calls outside
 * cos; they know of what their own calls set, and are told here of what
 * the runtime's calls set (aco_rt_accept's listening socket on epoll,
 * aco_rt_connect's socket, the pipes of splice), or a program that mixes
 * the two would find the flag.  Linked in (a weak reference) or loaded
 * (found by name), looked up once. */
extern void aco_rt_hook_made_nonblock_(int fd) __attribute__((weak));
static void (*hooks_told)(int fd);
static pthread_once_t hooks_told_once = PTHREAD_ONCE_INIT;
static void hooks_told_init(void) {
    hooks_told = aco_rt_hook_made_nonblock_;
    if (hooks_told == NULL) {
        *(void**)&hooks_told = dlsym(RTLD_DEFAULT, "aco_rt_hook_made_nonblock_");
        if (hooks_told == NULL) dlerror();
    }
}

/* Set O_NONBLOCK on fd, whose flags are fl: 0 or -errno. */
static int set_nonblock(int fd, int fl) {
    if (rt_sys_fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) return -errno;
    if (rt_unlikely(fd >= 0 && fd < 3)) stdio_nb_keep(fd);
    pthread_once(&hooks_told_once, hooks_told_init);
    if (hooks_told) hooks_told(fd);
    return 0;
}

/* The flag that a call sets for its own moment (fd_nonblock_other) is
 * set, used and taken off again under this lock, and the flag set for
 * good is looked at under it too: no thread takes another's passing flag
 * for one that stays (its call would then find the file blocking). */
static pthread_mutex_t nb_lock = PTHREAD_MUTEX_INITIALIZER;

/* Make fd O_NONBLOCK if it is not (now): for what has no per-call flag. */
int rt_sock_nonblock(int fd) {      /* (no call sets a passing flag on a socket: no lock) */
    int fl = rt_sys_fcntl(fd, F_GETFL, 0);
    return fl < 0 ? -errno : fl & O_NONBLOCK ? 0 : set_nonblock(fd, fl);
}
int rt_fd_nonblock(int fd) {
    pthread_mutex_lock(&nb_lock);
    int r = rt_sock_nonblock(fd);
    pthread_mutex_unlock(&nb_lock);
    return r;
}

/* The same for a descriptor guessed not to be a socket, for one call:
 * 1 (nothing set) if it is one after all (the number held a pipe, and
 * holds a socket now: close(2), dup2), since sockets are left as they
 * are; 2 and *fl its flags if it set the flag now (the caller puts them
 * back after its call); 0 if the flag was there. */
static int fd_nonblock_other(int fd, int* fl) {
    *fl = rt_sys_fcntl(fd, F_GETFL, 0);
    if (*fl < 0) return -errno;
    if (*fl & O_NONBLOCK) return 0;
    int type;
    socklen_t len = sizeof(type);
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0) return 1;
    return rt_sys_fcntl(fd, F_SETFL, *fl | O_NONBLOCK) < 0 ? -errno : 2;
}

/* preadv2(2) or pwritev2(2) at off with flags that never blocks, on a
 * descriptor that refuses RWF_NOWAIT (a device, a terminal): O_NONBLOCK
 * for this call alone, under nb_lock, then the file's own flags again; a
 * socket keeps it, as ever.  SIGPIPE held for a write.  The result, errno
 * set. */
long rt_prw_once(int write, int fd, const struct iovec* v, int cnt, int64_t off, int flags) {
    int fl = 0, err;
    pthread_mutex_lock(&nb_lock);
    int how = fd_nonblock_other(fd, &fl);
    if (how < 0 || how == 1) pthread_mutex_unlock(&nb_lock);
    if (how < 0 || (how == 1 && (err = rt_sock_nonblock(fd)) < 0)) {
        errno = how < 0 ? -how : -err;
        return -1;
    }
    rt_sigpipe_t h;
    if (write) rt_sigpipe_hold(&h);
    long r = rt_sys_prw(write, fd, v, cnt, off, flags);
    if (write) rt_sigpipe_release(&h, r < 0 && errno == EPIPE);
    if (how != 1) {
        err = errno;
        if (how == 2) rt_sys_fcntl(fd, F_SETFL, fl);
        pthread_mutex_unlock(&nb_lock);
        errno = err;
    }
    return r;
}

/* ------------------------------------------------------------------------ */
/* SIGPIPE                                                                  */
/* ------------------------------------------------------------------------ */

/* A reader gone raises SIGPIPE in the calling thread: block it for the
 * call and take back the one the call raised.  If the program blocks
 * SIGPIPE itself, one already pending is its own (the call adds none: a
 * second is not queued), so only one that was not is taken. */
void rt_sigpipe_hold(rt_sigpipe_t* h) {
    sigset_t pipe_set, pend;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &h->old);
    h->take = !sigismember(&h->old, SIGPIPE) ||
              (sigpending(&pend) == 0 && !sigismember(&pend, SIGPIPE));
}

void rt_sigpipe_release(const rt_sigpipe_t* h, int epipe) {
    int err = errno;
    if (epipe && h->take) {
        sigset_t pipe_set;
        sigemptyset(&pipe_set);
        sigaddset(&pipe_set, SIGPIPE);
        struct timespec zero = {0, 0};
        while (sigtimedwait(&pipe_set, NULL, &zero) < 0 && errno == EINTR) {}
    }
    pthread_sigmask(SIG_SETMASK, &h->old, NULL);
    errno = err;
}

/* write(2) or writev(2) to something that is not a socket (no
 * MSG_NOSIGNAL there). */
static ssize_t write_nosigpipe(int fd, const void* buf, size_t n, int vec) {
    rt_sigpipe_t h;
    rt_sigpipe_hold(&h);
    ssize_t r = vec ? rt_sys_writev(fd, (const struct iovec*)buf, (int)n)
                    : rt_sys_write(fd, buf, n);
    rt_sigpipe_release(&h, r < 0 && errno == EPIPE);
    return r;
}

/* ------------------------------------------------------------------------ */
/* The readiness way                                                        */
/* ------------------------------------------------------------------------ */

/* A pipe's try with RWF_NOWAIT, for this call alone: -1 and EOPNOTSUPP
 * where the kernel refuses the flag on pipes (before Linux 6.4: then
 * O_NONBLOCK, as for a terminal, and pipe_nowait_refused says so from
 * then on, which saves each later call the try). */
static int pipe_nowait_refused;     /* (atomic) */
static ssize_t once_nowait(const rq_t* q) {
    int vec = q->kind == K_READV || q->kind == K_WRITEV;
    struct iovec one = {q->buf, q->n};
    const struct iovec* v = vec ? (const struct iovec*)q->buf : &one;
    int cnt = vec ? (int)q->n : 1;
    if (q->kind == K_READ || q->kind == K_READV) return rt_sys_prw(0, q->fd, v, cnt, -1, RWF_NOWAIT);
    rt_sigpipe_t h;
    rt_sigpipe_hold(&h);
    ssize_t r = rt_sys_prw(1, q->fd, v, cnt, -1, RWF_NOWAIT);
    rt_sigpipe_release(&h, r < 0 && errno == EPIPE);
    return r;
}

/* One try that never blocks, whatever O_NONBLOCK says now. */
static ssize_t sys_once(rt_fd_t* e, const rq_t* q) {
    if (q->kind == K_RECV)
        return rt_sys_recv(q->fd, q->buf, q->n, q->flags | MSG_DONTWAIT);
    if (q->kind == K_SEND)
        return rt_sys_send(q->fd, q->buf, q->n, q->flags | MSG_DONTWAIT | MSG_NOSIGNAL);
    int sock = rt_fd_kind(e, q->fd) == RT_FD_SOCK, looked = 0;
    struct msghdr mh = {0};
    ssize_t r;
again:
    switch (q->kind) {
    case K_READ:
        if (sock && ((r = rt_sys_recv(q->fd, q->buf, q->n, MSG_DONTWAIT)) >= 0 || errno != ENOTSOCK))
            return r;
        break;
    case K_WRITE:
        if (sock && ((r = rt_sys_send(q->fd, q->buf, q->n, MSG_DONTWAIT | MSG_NOSIGNAL)) >= 0 ||
                     errno != ENOTSOCK))
            return r;
        break;
    case K_READV:
    case K_WRITEV:
        mh.msg_iov = (struct iovec*)q->buf;
        mh.msg_iovlen = q->n;
        if (sock && ((r = q->kind == K_READV ? rt_sys_recvmsg(q->fd, &mh, MSG_DONTWAIT)
                                             : rt_sys_sendmsg(q->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL)) >= 0 ||
                     errno != ENOTSOCK))
            return r;
        break;
    }
    /* Not a socket (or no longer one).  O_NONBLOCK left on the open file
     * would be seen by all who share it: stdio's own calls on a terminal
     * or a pipeline's stdout, a child's inherited stdin, would say EAGAIN.
     * A pipe or FIFO: RWF_NOWAIT, for this call alone (the look at its
     * type replaces a look at its flags).  A regular file keeps the flag,
     * as ever (a disk's file never says EAGAIN; a file of /proc that waits
     * needs it).  The rest (a terminal, which refuses RWF_NOWAIT): the flag
     * for the call, then the file's own flags again, under nb_lock
     * (another thread's blocking call of its own on the file would see it,
     * for that moment). */
    e->kind = RT_FD_OTHER;
    rt_sys_fid_t id;
    int known = rt_sys_fid(q->fd, &id) == 0;
    if (known && id.mode == S_IFIFO && !__atomic_load_n(&pipe_nowait_refused, __ATOMIC_RELAXED)) {
        if ((r = once_nowait(q)) >= 0 || (errno != EOPNOTSUPP && errno != ENOSYS)) return r;
        __atomic_store_n(&pipe_nowait_refused, 1, __ATOMIC_RELAXED);
    }
    int reg = known && id.mode == S_IFREG, fl = 0, how;
    if (reg) {
        how = rt_fd_nonblock(q->fd);
    } else {
        pthread_mutex_lock(&nb_lock);
        how = fd_nonblock_other(q->fd, &fl);
        if (how < 0 || how == 1) pthread_mutex_unlock(&nb_lock);
    }
    if (how < 0) { errno = -how; return -1; }
    if (how == 1) {                             /* a socket now: its own way */
        if (looked++) { errno = EAGAIN; return -1; }    /* (changing still) */
        e->kind = RT_FD_UNKNOWN;
        sock = rt_fd_kind(e, q->fd) == RT_FD_SOCK;
        goto again;
    }
    switch (q->kind) {
    case K_READ:  r = rt_sys_read(q->fd, q->buf, q->n); break;
    case K_READV: r = rt_sys_readv(q->fd, (const struct iovec*)q->buf, (int)q->n); break;
    case K_WRITE: r = write_nosigpipe(q->fd, q->buf, q->n, 0); break;
    default:      r = write_nosigpipe(q->fd, q->buf, q->n, 1); break;
    }
    if (!reg) {
        if (how == 2) {
            int err = errno;
            rt_sys_fcntl(q->fd, F_SETFL, fl);
            errno = err;
        }
        pthread_mutex_unlock(&nb_lock);
    }
    return r;
}

/* Checked mode (aco.h): a buffer in a suspended co's frames is reported as
 * the caller's escape, as the io_uring way's rt_on_share_stack does, before
 * the kernel would fail it with EFAULT. */
static inline __attribute__((always_inline)) void rq_check(const rq_t* q, int rd) {
    if (q->kind == K_READV || q->kind == K_WRITEV) {
        const struct iovec* v = q->buf;
        aco_checked_access(v, q->n * sizeof(*v), 0);
        for (size_t i = 0; i < q->n; i++)
            if (v[i].iov_len) aco_checked_access(v[i].iov_base, v[i].iov_len, rd);
    } else if (q->n) {
        aco_checked_access(q->buf, q->n, rd);
    }
}

ssize_t rt_ready_io(aco_rt_co_t* co, const rq_t* q, int64_t deadline) {
    aco_rt_sched_t* s = co->s;
    int rd = q->kind == K_READ || q->kind == K_READV || q->kind == K_RECV;
    int r, events = rd ? POLLIN : POLLOUT;
    if (aco_unlikely(aco_checked())) rq_check(q, rd);
    rt_fd_t* f = rt_fd_get(&s->fds, q->fd);
    if (f == NULL) return q->fd < 0 ? -EBADF : -ENOMEM;
    /* epoll: a stream socket that a short read drained has nothing until
     * its next edge, which wakes us: wait first, skip the EAGAIN.  (A stale
     * guess costs nothing: the wait re-adds the descriptor, and a new file
     * is added with its readiness of now.  MSG_OOB's read is of the urgent
     * byte alone: short, with the stream's bytes still there.) */
    rt_fd_t* e = (rd && s->backend.ops == &rt_backend_epoll && q->kind != K_READV &&
                  !(q->flags & (MSG_PEEK | MSG_OOB)) && f->stream && !f->rd_hup) ? f : NULL;

    if (e && e->rd_empty && !rt_passed(deadline)) goto wait;
    for (;;) {
        ssize_t n = sys_once(f, q);
        if (n >= 0) {
            if (e && n > 0 && (size_t)n < q->n) e->rd_empty = 1;
            return n;
        }
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) return -errno;
    wait:
        if ((r = rt_may_block(co, deadline)) != 0) return r;
        /* (an aco_rt_close while the co was ready and not yet run: the
         * number may hold a new file by then, whose bytes are not ours) */
        uint8_t closes = f->closes;
        if ((r = s->backend.ops->wait_fd(co, q->fd, events, deadline)) < 0) return r;
        if (__atomic_load_n(&s->cl.list, __ATOMIC_ACQUIRE)) rt_hook_closes(s);  /* (sent first) */
        if (f->closes != closes) return -EBADF;
        if (e) e->rd_empty = 0;
    }
}

/* read(2) or readv(2) of no bytes: 0 at once (or the descriptor's error),
 * whatever is buffered or not; one try, never a wait.  A socket gets
 * read(2) itself, which returns before it looks at the queue (recv would
 * wait for a byte, or take a datagram). */
ssize_t rt_read_nothing(aco_rt_co_t* co, const rq_t* q) {
    if (aco_unlikely(aco_checked())) rq_check(q, 1);
    rt_fd_t* f = rt_fd_get(&co->s->fds, q->fd);
    if (f == NULL) return q->fd < 0 ? -EBADF : -ENOMEM;
    ssize_t r;
    if (rt_fd_kind(f, q->fd) == RT_FD_SOCK)
        r = q->kind == K_READ ? rt_sys_read(q->fd, q->buf, 0)
                              : rt_sys_readv(q->fd, (const struct iovec*)q->buf, (int)q->n);
    else
        r = sys_once(f, q);
    if (r >= 0) return r;
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -errno;
}
