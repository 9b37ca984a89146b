/* hook.c - libaco_hook.so: blocking calls that yield inside runtime cos.
 *
 * Loaded by LD_PRELOAD or linked ahead of libc, this file defines read,
 * write, readv, writev, recv, send, recvfrom, sendto, accept, accept4,
 * connect, poll, sleep, usleep, nanosleep and getaddrinfo (and, to stay invisible,
 * socket, close, fcntl, ioctl and setsockopt).  Called in a co of a
 * running aco_rt scheduler, a call that would block parks the co in the
 * runtime (aco_rt_read and the rest) and the thread runs other cos; called
 * anywhere else it is libc's, found with dlsym(RTLD_NEXT).  The runtime
 * itself reaches the kernel past these names (rt_sys.h).
 *
 * Transparency.  The runtime makes a descriptor O_NONBLOCK the first time
 * a co waits on it.  The program does not see that: a table per descriptor
 * remembers whether the program itself asked for O_NONBLOCK (fcntl F_SETFL,
 * ioctl FIONBIO, SOCK_NONBLOCK at socket/accept4, or found set the first
 * time we looked) and whether the runtime made it so.  Then:
 *   - a descriptor the program made non-blocking behaves non-blocking in
 *     cos too (EAGAIN, no parking);
 *   - F_GETFL does not show the O_NONBLOCK the runtime set, F_SETFL and
 *     FIONBIO keep it set underneath while recording what the program
 *     wants;
 *   - outside cos, a call on a descriptor the runtime made non-blocking
 *     (and the program did not) blocks as the program expects (poll, then
 *     the call again).
 * SO_RCVTIMEO and SO_SNDTIMEO become the deadlines of the calls in cos,
 * which then fail with EAGAIN as libc's would.  A co that is cancelled
 * (aco_rt_cancel) gets ECANCELED from a call that would block; sleeps and
 * poll say EINTR.
 *
 * dup2 and dup3 are hooked only to forget what was known of the number
 * they overwrite.  Not hooked: dup (the copy starts with a fresh entry),
 * select, epoll and signals.  In a co, a write, writev or send whose reader
 * is gone says EPIPE without SIGPIPE (the runtime's calls never raise it);
 * outside cos they are libc's, SIGPIPE included.  poll on more
 * than one descriptor in a co looks again after sleeps of 50 us growing to
 * 5 ms until one is ready or its timeout passes (one descriptor: the
 * runtime's readiness wait, no polling).
 *
 * Checked mode (aco.h).  The memory every hooked call hands to the kernel
 * (buffers, I/O vectors, addresses and their lengths, poll's array, a
 * socket option's value, nanosleep's times) is checked first, in cos and
 * outside: one in a suspended co's frames is reported as the caller's
 * escape.  fcntl's and ioctl's pointer arguments are not.
 *
 * getaddrinfo.  glibc reaches the name server through its own internal
 * calls, which no hook sees: in a co the whole lookup goes to a helper
 * thread (aco_rt_offload) and the co parks.  A cancelled co gets
 * EAI_SYSTEM with errno ECANCELED (the lookup ends on its thread and its
 * result is freed there); a full helper queue EAI_AGAIN; no memory
 * EAI_MEMORY.
 */
#define _GNU_SOURCE
#include "aco_rt.h"
#include "rt_sys.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

/* ------------------------------------------------------------------------ */
/* libc's definitions                                                       */
/* ------------------------------------------------------------------------ */

static struct {
    ssize_t (*read)(int, void*, size_t);
    ssize_t (*write)(int, const void*, size_t);
    ssize_t (*readv)(int, const struct iovec*, int);
    ssize_t (*writev)(int, const struct iovec*, int);
    ssize_t (*recv)(int, void*, size_t, int);
    ssize_t (*send)(int, const void*, size_t, int);
    ssize_t (*recvfrom)(int, void*, size_t, int, struct sockaddr*, socklen_t*);
    ssize_t (*sendto)(int, const void*, size_t, int, const struct sockaddr*, socklen_t);
    int (*accept)(int, struct sockaddr*, socklen_t*);
    int (*accept4)(int, struct sockaddr*, socklen_t*, int);
    int (*connect)(int, const struct sockaddr*, socklen_t);
    int (*poll)(struct pollfd*, nfds_t, int);
    unsigned (*sleep)(unsigned);
    int (*usleep)(useconds_t);
    int (*nanosleep)(const struct timespec*, struct timespec*);
    int (*socket)(int, int, int);
    int (*close)(int);
    int (*fcntl)(int, int, ...);
    int (*ioctl)(int, unsigned long, ...);
    int (*setsockopt)(int, int, int, const void*, socklen_t);
    int (*dup2)(int, int);
    int (*dup3)(int, int, int);
    int (*getaddrinfo)(const char*, const char*, const struct addrinfo*, struct addrinfo**);
} libc;

static pthread_once_t libc_once = PTHREAD_ONCE_INIT;
static int libc_ready;

static void* next(const char* name) {
    void* f = dlsym(RTLD_NEXT, name);
    if (f == NULL) {
        static const char m[] = "libaco_hook: dlsym(RTLD_NEXT) found no libc function\n";
        rt_sys_write(2, m, sizeof(m) - 1);
        abort();
    }
    return f;
}

static void libc_init(void) {
    *(void**)&libc.read = next("read");
    *(void**)&libc.write = next("write");
    *(void**)&libc.readv = next("readv");
    *(void**)&libc.writev = next("writev");
    *(void**)&libc.recv = next("recv");
    *(void**)&libc.send = next("send");
    *(void**)&libc.recvfrom = next("recvfrom");
    *(void**)&libc.sendto = next("sendto");
    *(void**)&libc.accept = next("accept");
    *(void**)&libc.accept4 = next("accept4");
    *(void**)&libc.connect = next("connect");
    *(void**)&libc.poll = next("poll");
    *(void**)&libc.sleep = next("sleep");
    *(void**)&libc.usleep = next("usleep");
    *(void**)&libc.nanosleep = next("nanosleep");
    *(void**)&libc.socket = next("socket");
    *(void**)&libc.close = next("close");
    *(void**)&libc.fcntl = next("fcntl");
    *(void**)&libc.ioctl = next("ioctl");
    *(void**)&libc.setsockopt = next("setsockopt");
    *(void**)&libc.dup2 = next("dup2");
    *(void**)&libc.dup3 = next("dup3");
    *(void**)&libc.getaddrinfo = next("getaddrinfo");
    __atomic_store_n(&libc_ready, 1, __ATOMIC_RELEASE);
}

#define LIBC(f) (__builtin_expect(__atomic_load_n(&libc_ready, __ATOMIC_ACQUIRE), 1) \
                 ? libc.f : (pthread_once(&libc_once, libc_init), libc.f))

/* ------------------------------------------------------------------------ */
/* Descriptor table                                                         */
/* ------------------------------------------------------------------------ */

enum {
    F_SEEN = 1,         /* we looked at its flags once */
    F_USER_NB = 2,      /* the program wants O_NONBLOCK */
    F_MADE_NB = 4,      /* the runtime may have set O_NONBLOCK */
};

typedef struct {
    uint32_t flags;     /* atomic */
    int64_t  rcv_ns;    /* SO_RCVTIMEO, 0: none (atomic) */
    int64_t  snd_ns;    /* SO_SNDTIMEO */
} hk_fd_t;

#define CHUNK 1024
#define NCHUNKS 65536               /* descriptors below 64M */
static hk_fd_t* chunks[NCHUNKS];

static hk_fd_t* fd_entry(int fd) {
    if (fd < 0 || fd / CHUNK >= NCHUNKS) return NULL;
    hk_fd_t** slot = &chunks[fd / CHUNK];
    hk_fd_t* c = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (c == NULL) {
        hk_fd_t* n = calloc(CHUNK, sizeof(*n));
        if (n == NULL) return NULL;     /* then the hooks pass calls on */
        if (!__atomic_compare_exchange_n(slot, &c, n, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            free(n);                    /* another thread's is there */
        else
            c = n;
    }
    return &c[fd % CHUNK];
}

static uint32_t fd_flags(hk_fd_t* e) { return __atomic_load_n(&e->flags, __ATOMIC_RELAXED); }
static void fd_on(hk_fd_t* e, uint32_t f) { __atomic_fetch_or(&e->flags, f, __ATOMIC_RELAXED); }
static void fd_off(hk_fd_t* e, uint32_t f) { __atomic_fetch_and(&e->flags, ~f, __ATOMIC_RELAXED); }

/* A descriptor the program got anew: forget the old one's. */
static void fd_fresh(int fd, int user_nb) {
    hk_fd_t* e = fd_entry(fd);
    if (e == NULL) return;
    __atomic_store_n(&e->flags, F_SEEN | (user_nb ? F_USER_NB : 0), __ATOMIC_RELAXED);
    __atomic_store_n(&e->rcv_ns, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&e->snd_ns, 0, __ATOMIC_RELAXED);
}

/* dup2/dup3 put from's file under the number to: its socket timeouts go
 * with it; its flags are looked at again at the next call. */
static void fd_dup(int from, int to) {
    hk_fd_t* f = fd_entry(from);
    hk_fd_t* t = fd_entry(to);
    if (t == NULL) return;
    __atomic_store_n(&t->flags, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&t->rcv_ns, f ? __atomic_load_n(&f->rcv_ns, __ATOMIC_RELAXED) : 0, __ATOMIC_RELAXED);
    __atomic_store_n(&t->snd_ns, f ? __atomic_load_n(&f->snd_ns, __ATOMIC_RELAXED) : 0, __ATOMIC_RELAXED);
}

/* The entry of fd for a call in a co: NULL when the call should simply go
 * to libc (no memory for the table, or the program made it non-blocking). */
static hk_fd_t* co_entry(int fd) {
    hk_fd_t* e = fd_entry(fd);
    if (e == NULL) return NULL;
    uint32_t f = fd_flags(e);
    if (!(f & F_SEEN)) {
        /* First look: an O_NONBLOCK already there is the program's. */
        int fl = rt_sys_fcntl(fd, F_GETFL, 0);
        fd_on(e, F_SEEN | (fl >= 0 && (fl & O_NONBLOCK) && !(f & F_MADE_NB) ? F_USER_NB : 0));
        f = fd_flags(e);
    }
    if (f & F_USER_NB) return NULL;
    fd_on(e, F_MADE_NB);
    return e;
}

static int in_co(void) { return aco_rt_self() != NULL; }

static int64_t deadline_of(int64_t tmo_ns) {
    return tmo_ns > 0 ? aco_rt_now() + tmo_ns : -1;
}

/* A runtime result as libc says it: -ETIMEDOUT from a socket timeout is
 * EAGAIN (SO_RCVTIMEO's error). */
static ssize_t ret(ssize_t r) {
    if (r >= 0) return r;
    errno = r == -ETIMEDOUT ? EAGAIN : (int)-r;
    return -1;
}

/* Outside cos, on a descriptor the runtime made non-blocking behind the
 * program's back: wait as a blocking call would (tmo_ns: the socket's
 * timeout, 0: none).  1: try again; 0: give the EAGAIN to the caller. */
static int block_outside(int fd, int events, int64_t tmo_ns) {
    hk_fd_t* e = fd_entry(fd);
    if (e == NULL || (fd_flags(e) & (F_MADE_NB | F_USER_NB)) != F_MADE_NB) return 0;
    struct pollfd p = {fd, (short)events, 0};
    int ms = tmo_ns > 0 ? (int)((tmo_ns + 999999) / 1000000) : -1;
    int n;
    do n = LIBC(poll)(&p, 1, ms); while (n < 0 && errno == EINTR);
    if (n == 0) errno = EAGAIN;
    return n > 0;
}

static int64_t rcv_of(int fd) {
    hk_fd_t* e = fd_entry(fd);
    return e ? __atomic_load_n(&e->rcv_ns, __ATOMIC_RELAXED) : 0;
}

static int64_t snd_of(int fd) {
    hk_fd_t* e = fd_entry(fd);
    return e ? __atomic_load_n(&e->snd_ns, __ATOMIC_RELAXED) : 0;
}

/* Checked mode (aco.h): memory a hooked call hands to the kernel that lies
 * in a suspended co's frames is reported as the caller's escape (a co's,
 * or the main co's outside cos) before the kernel would fail the call with
 * EFAULT.  The runtime's calls check what they hand on themselves; the
 * hooks check first, for the calls that go to libc too.  Inlined: the
 * report names the program's frame, a few up from the access. */
#define HK_CHECKED() aco_unlikely(aco_checked())
#define HK_INLINE static inline __attribute__((always_inline))

HK_INLINE void hk_mem(const void* p, size_t n, int wr) {
    if (n) aco_checked_access(p, n, wr);
}
HK_INLINE void hk_iov(const struct iovec* v, int cnt, int wr) {
    if (cnt <= 0 || cnt > IOV_MAX) return;      /* the kernel's EINVAL */
    hk_mem(v, (size_t)cnt * sizeof(*v), 0);
    for (int i = 0; i < cnt; i++) hk_mem(v[i].iov_base, v[i].iov_len, wr);
}
/* An address the kernel fills, *l bytes of it (l itself read and written). */
HK_INLINE void hk_addr_out(const struct sockaddr* a, const socklen_t* l) {
    if (l == NULL) return;
    hk_mem(l, sizeof(*l), 1);       /* before *l is read */
    if (a) hk_mem(a, *l, 1);
}

/* ------------------------------------------------------------------------ */
/* Reads and writes                                                         */
/* ------------------------------------------------------------------------ */

EXPORT ssize_t read(int fd, void* buf, size_t n) {
    if (HK_CHECKED()) hk_mem(buf, n, 1);
    if (in_co()) {
        hk_fd_t* e = co_entry(fd);
        if (e) return ret(aco_rt_read(fd, buf, n, deadline_of(rcv_of(fd))));
    }
    ssize_t r;
    while ((r = LIBC(read)(fd, buf, n)) < 0 && errno == EAGAIN && block_outside(fd, POLLIN, rcv_of(fd))) {}
    return r;
}

EXPORT ssize_t write(int fd, const void* buf, size_t n) {
    if (HK_CHECKED()) hk_mem(buf, n, 0);
    if (in_co()) {
        hk_fd_t* e = co_entry(fd);
        if (e) return ret(aco_rt_write(fd, buf, n, deadline_of(snd_of(fd))));
    }
    ssize_t r;
    while ((r = LIBC(write)(fd, buf, n)) < 0 && errno == EAGAIN && block_outside(fd, POLLOUT, snd_of(fd))) {}
    return r;
}

EXPORT ssize_t readv(int fd, const struct iovec* iov, int cnt) {
    if (HK_CHECKED()) hk_iov(iov, cnt, 1);
    if (in_co()) {
        hk_fd_t* e = co_entry(fd);
        if (e) return ret(aco_rt_readv(fd, iov, cnt, deadline_of(rcv_of(fd))));
    }
    ssize_t r;
    while ((r = LIBC(readv)(fd, iov, cnt)) < 0 && errno == EAGAIN && block_outside(fd, POLLIN, rcv_of(fd))) {}
    return r;
}

EXPORT ssize_t writev(int fd, const struct iovec* iov, int cnt) {
    if (HK_CHECKED()) hk_iov(iov, cnt, 0);
    if (in_co()) {
        hk_fd_t* e = co_entry(fd);
        if (e) return ret(aco_rt_writev(fd, iov, cnt, deadline_of(snd_of(fd))));
    }
    ssize_t r;
    while ((r = LIBC(writev)(fd, iov, cnt)) < 0 && errno == EAGAIN && block_outside(fd, POLLOUT, snd_of(fd))) {}
    return r;
}

EXPORT ssize_t recv(int fd, void* buf, size_t n, int flags) {
    if (HK_CHECKED()) hk_mem(buf, n, 1);
    if (in_co() && !(flags & MSG_DONTWAIT)) {
        hk_fd_t* e = co_entry(fd);
        if (e) return ret(aco_rt_recv(fd, buf, n, flags, deadline_of(rcv_of(fd))));
    }
    ssize_t r;
    while ((r = LIBC(recv)(fd, buf, n, flags)) < 0 && errno == EAGAIN && !(flags & MSG_DONTWAIT) &&
           block_outside(fd, POLLIN, rcv_of(fd))) {}
    return r;
}

EXPORT ssize_t send(int fd, const void* buf, size_t n, int flags) {
    if (HK_CHECKED()) hk_mem(buf, n, 0);
    if (in_co() && !(flags & MSG_DONTWAIT)) {
        hk_fd_t* e = co_entry(fd);
        if (e) return ret(aco_rt_send(fd, buf, n, flags, deadline_of(snd_of(fd))));
    }
    ssize_t r;
    while ((r = LIBC(send)(fd, buf, n, flags)) < 0 && errno == EAGAIN && !(flags & MSG_DONTWAIT) &&
           block_outside(fd, POLLOUT, snd_of(fd))) {}
    return r;
}

/* With an address: the call itself, non-blocking, and the runtime's
 * readiness wait between tries. */
EXPORT ssize_t recvfrom(int fd, void* buf, size_t n, int flags, struct sockaddr* a, socklen_t* l) {
    if (a == NULL) return recv(fd, buf, n, flags);
    if (HK_CHECKED()) {
        hk_mem(buf, n, 1);
        hk_addr_out(a, l);
    }
    if (in_co() && !(flags & MSG_DONTWAIT) && co_entry(fd)) {
        int64_t dl = deadline_of(rcv_of(fd));
        for (;;) {
            ssize_t r = LIBC(recvfrom)(fd, buf, n, flags | MSG_DONTWAIT, a, l);
            if (r >= 0 || errno != EAGAIN) return r;
            int w = aco_rt_wait(fd, POLLIN, dl);
            if (w < 0) return ret(w);
        }
    }
    ssize_t r;
    while ((r = LIBC(recvfrom)(fd, buf, n, flags, a, l)) < 0 && errno == EAGAIN &&
           !(flags & MSG_DONTWAIT) && block_outside(fd, POLLIN, rcv_of(fd))) {}
    return r;
}

EXPORT ssize_t sendto(int fd, const void* buf, size_t n, int flags, const struct sockaddr* a,
                      socklen_t l) {
    if (a == NULL) return send(fd, buf, n, flags);
    if (HK_CHECKED()) {
        hk_mem(buf, n, 0);
        hk_mem(a, l, 0);
    }
    if (in_co() && !(flags & MSG_DONTWAIT) && co_entry(fd)) {
        int64_t dl = deadline_of(snd_of(fd));
        for (;;) {
            ssize_t r = LIBC(sendto)(fd, buf, n, flags | MSG_DONTWAIT | MSG_NOSIGNAL, a, l);
            if (r >= 0 || errno != EAGAIN) return r;
            int w = aco_rt_wait(fd, POLLOUT, dl);
            if (w < 0) return ret(w);
        }
    }
    ssize_t r;
    while ((r = LIBC(sendto)(fd, buf, n, flags, a, l)) < 0 && errno == EAGAIN &&
           !(flags & MSG_DONTWAIT) && block_outside(fd, POLLOUT, snd_of(fd))) {}
    return r;
}

/* ------------------------------------------------------------------------ */
/* Connections                                                              */
/* ------------------------------------------------------------------------ */

EXPORT int accept4(int fd, struct sockaddr* a, socklen_t* l, int flags) {
    int r;
    if (HK_CHECKED()) hk_addr_out(a, l);
    if (in_co() && co_entry(fd)) {
        r = (int)ret(aco_rt_accept(fd, a, l, flags, deadline_of(rcv_of(fd))));
        if (r >= 0) {
            fd_fresh(r, flags & SOCK_NONBLOCK);
            hk_fd_t* e = fd_entry(r);
            if (e && !(flags & SOCK_NONBLOCK)) fd_on(e, F_MADE_NB);   /* it may be */
        }
        return r;
    }
    while ((r = LIBC(accept4)(fd, a, l, flags)) < 0 && errno == EAGAIN &&
           block_outside(fd, POLLIN, rcv_of(fd))) {}
    if (r >= 0) fd_fresh(r, flags & SOCK_NONBLOCK);
    return r;
}

EXPORT int accept(int fd, struct sockaddr* a, socklen_t* l) { return accept4(fd, a, l, 0); }

EXPORT int connect(int fd, const struct sockaddr* a, socklen_t l) {
    if (HK_CHECKED()) hk_mem(a, l, 0);
    if (in_co() && co_entry(fd)) return (int)ret(aco_rt_connect(fd, a, l, deadline_of(snd_of(fd))));
    int r = LIBC(connect)(fd, a, l);
    if (r < 0 && errno == EINPROGRESS && block_outside(fd, POLLOUT, snd_of(fd))) {
        int err = 0;
        socklen_t len = sizeof(err);
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0) return -1;
        if (err) { errno = err; return -1; }
        return 0;
    }
    return r;
}

EXPORT int socket(int domain, int type, int proto) {
    int r = LIBC(socket)(domain, type, proto);
    if (r >= 0) fd_fresh(r, type & SOCK_NONBLOCK);
    return r;
}

EXPORT int close(int fd) {
    hk_fd_t* e = fd_entry(fd);
    if (e) __atomic_store_n(&e->flags, 0, __ATOMIC_RELAXED);
    /* Cos waiting on fd, in any thread's scheduler, are told EBADF (with
     * no scheduler in the process this is close(2) itself). */
    return (int)ret(aco_rt_close(fd));
}

/* A new file under the number: what we knew of the old one goes. */
EXPORT int dup2(int fd, int nfd) {
    int r = LIBC(dup2)(fd, nfd);
    if (r >= 0 && r != fd) fd_dup(fd, r);
    return r;
}

EXPORT int dup3(int fd, int nfd, int flags) {
    int r = LIBC(dup3)(fd, nfd, flags);
    if (r >= 0) fd_dup(fd, r);
    return r;
}

EXPORT int setsockopt(int fd, int level, int name, const void* v, socklen_t l) {
    if (HK_CHECKED()) hk_mem(v, l, 0);
    int r = LIBC(setsockopt)(fd, level, name, v, l);
    if (r == 0 && level == SOL_SOCKET && (name == SO_RCVTIMEO || name == SO_SNDTIMEO) &&
        l >= sizeof(struct timeval)) {
        const struct timeval* tv = v;
        hk_fd_t* e = fd_entry(fd);
        int64_t ns = (int64_t)tv->tv_sec * 1000000000 + (int64_t)tv->tv_usec * 1000;
        if (e) __atomic_store_n(name == SO_RCVTIMEO ? &e->rcv_ns : &e->snd_ns, ns, __ATOMIC_RELAXED);
    }
    return r;
}

/* ------------------------------------------------------------------------ */
/* Flags                                                                    */
/* ------------------------------------------------------------------------ */

static int hook_fcntl(int fd, int cmd, void* arg) {
    hk_fd_t* e = fd_entry(fd);
    if (cmd == F_GETFL) {
        int r = LIBC(fcntl)(fd, F_GETFL);
        if (r >= 0 && e && (fd_flags(e) & (F_MADE_NB | F_USER_NB)) == F_MADE_NB) r &= ~O_NONBLOCK;
        return r;
    }
    if (cmd == F_SETFL) {
        int fl = (int)(intptr_t)arg;
        if (e) {
            if (fl & O_NONBLOCK) fd_on(e, F_SEEN | F_USER_NB);
            else { fd_on(e, F_SEEN); fd_off(e, F_USER_NB); }
            if (fd_flags(e) & F_MADE_NB) fl |= O_NONBLOCK;      /* keep ours */
        }
        return LIBC(fcntl)(fd, F_SETFL, fl);
    }
    int r = LIBC(fcntl)(fd, cmd, arg);
    if (r >= 0 && (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC)) fd_fresh(r, 0);
    return r;
}

EXPORT int fcntl(int fd, int cmd, ...) {
    va_list ap;
    va_start(ap, cmd);
    void* arg = va_arg(ap, void*);
    va_end(ap);
    return hook_fcntl(fd, cmd, arg);
}

EXPORT int fcntl64(int fd, int cmd, ...) {
    va_list ap;
    va_start(ap, cmd);
    void* arg = va_arg(ap, void*);
    va_end(ap);
    return hook_fcntl(fd, cmd, arg);
}

EXPORT int ioctl(int fd, unsigned long req, ...) {
    va_list ap;
    va_start(ap, req);
    void* arg = va_arg(ap, void*);
    va_end(ap);
    if (req == FIONBIO && arg) {
        hk_fd_t* e = fd_entry(fd);
        int on = *(const int*)arg;
        if (e) {
            if (on) fd_on(e, F_SEEN | F_USER_NB);
            else { fd_on(e, F_SEEN); fd_off(e, F_USER_NB); }
            if (!on && (fd_flags(e) & F_MADE_NB)) return 0;     /* keep ours */
        }
    }
    return LIBC(ioctl)(fd, req, arg);
}

/* ------------------------------------------------------------------------ */
/* poll and sleeps                                                          */
/* ------------------------------------------------------------------------ */

EXPORT int poll(struct pollfd* fds, nfds_t n, int timeout) {
    if (HK_CHECKED()) hk_mem(fds, n * sizeof(*fds), 1);
    if (!in_co()) return LIBC(poll)(fds, n, timeout);
    int r = rt_sys_poll0(fds, n);
    if (r != 0 || timeout == 0) return r;
    int64_t dl = timeout < 0 ? -1 : aco_rt_now() + (int64_t)timeout * 1000000;
    if (n == 0) {
        if (aco_rt_sleep_until(dl) < 0) { errno = EINTR; return -1; }
        return 0;
    }
    if (n == 1 && fds[0].fd >= 0) {
        int w = aco_rt_wait(fds[0].fd, fds[0].events, dl);
        if (w == -ETIMEDOUT) return 0;
        if (w == -EBADF) { fds[0].revents = POLLNVAL; return 1; }
        if (w < 0) { errno = w == -ECANCELED ? EINTR : -w; return -1; }
        fds[0].revents = (short)(w & (fds[0].events | POLLERR | POLLHUP));
        return fds[0].revents ? 1 : 0;
    }
    for (int64_t nap = 50000;; nap = nap < 5000000 ? nap * 2 : nap) {
        int64_t now = aco_rt_now();
        if (dl >= 0 && now >= dl) return 0;
        int64_t until = dl >= 0 && now + nap > dl ? dl : now + nap;
        if (aco_rt_sleep_until(until) < 0) { errno = EINTR; return -1; }
        if ((r = rt_sys_poll0(fds, n)) != 0) return r;
    }
}

EXPORT int nanosleep(const struct timespec* req, struct timespec* rem) {
    if (HK_CHECKED()) {
        hk_mem(req, sizeof(*req), 0);
        if (rem) hk_mem(rem, sizeof(*rem), 1);
    }
    if (!in_co()) return LIBC(nanosleep)(req, rem);
    if (req == NULL || req->tv_nsec < 0 || req->tv_nsec >= 1000000000 || req->tv_sec < 0) {
        errno = EINVAL;
        return -1;
    }
    int64_t dl = aco_rt_now() + (int64_t)req->tv_sec * 1000000000 + req->tv_nsec;
    if (aco_rt_sleep_until(dl) == 0) return 0;
    if (rem) {                              /* cancelled: EINTR, as a signal */
        int64_t left = dl - aco_rt_now();
        if (left < 0) left = 0;
        rem->tv_sec = (time_t)(left / 1000000000);
        rem->tv_nsec = (long)(left % 1000000000);
    }
    errno = EINTR;
    return -1;
}

EXPORT int usleep(useconds_t us) {
    if (!in_co()) return LIBC(usleep)(us);
    if (aco_rt_sleep((int64_t)us * 1000) < 0) { errno = EINTR; return -1; }
    return 0;
}

EXPORT unsigned sleep(unsigned s) {
    if (!in_co()) return LIBC(sleep)(s);
    int64_t dl = aco_rt_now() + (int64_t)s * 1000000000;
    if (aco_rt_sleep_until(dl) == 0) return 0;
    int64_t left = dl - aco_rt_now();
    return left > 0 ? (unsigned)((left + 999999999) / 1000000000) : 0;
}

/* ------------------------------------------------------------------------ */
/* Names                                                                    */
/* ------------------------------------------------------------------------ */

/* A lookup on a helper thread: in the heap, with copies of its arguments
 * (they may lie on the co's share stack, which other cos take over while
 * it waits). */
typedef struct {
    const char* node;           /* into str[] or NULL */
    const char* service;
    struct addrinfo hints;
    int has_hints;
    int rc;
    int err;
    struct addrinfo* res;
    char str[];
} hk_gai_t;

static void* gai_run(void* arg) {
    hk_gai_t* g = arg;
    errno = 0;
    g->rc = LIBC(getaddrinfo)(g->node, g->service, g->has_hints ? &g->hints : NULL, &g->res);
    g->err = errno;
    return NULL;
}

static void gai_drop(void* arg, void* result) {    /* the co left */
    (void)result;
    hk_gai_t* g = arg;
    if (g->rc == 0 && g->res) freeaddrinfo(g->res);
    free(g);
}

EXPORT int getaddrinfo(const char* node, const char* service, const struct addrinfo* hints,
                       struct addrinfo** res) {
    if (!in_co()) return LIBC(getaddrinfo)(node, service, hints, res);
    size_t nl = node ? strlen(node) + 1 : 0, sl = service ? strlen(service) + 1 : 0;
    hk_gai_t* g = calloc(1, sizeof(*g) + nl + sl);
    if (g == NULL) return EAI_MEMORY;
    if (node) g->node = memcpy(g->str, node, nl);
    if (service) g->service = memcpy(g->str + nl, service, sl);
    if (hints) {                /* (its pointers must be NULL: getaddrinfo(3)) */
        g->hints = *hints;
        g->has_hints = 1;
    }
    int r = aco_rt_offload(gai_run, g, gai_drop, NULL, -1);
    if (r == -ENOSYS) {         /* no helper threads: nothing else can run it */
        free(g);
        return LIBC(getaddrinfo)(node, service, hints, res);
    }
    if (r == -ECANCELED) {      /* g is gai_drop's */
        errno = ECANCELED;
        return EAI_SYSTEM;
    }
    if (r < 0) {
        free(g);
        return r == -ENOMEM ? EAI_MEMORY : EAI_AGAIN;
    }
    r = g->rc;
    if (r == 0) *res = g->res;
    if (r == EAI_SYSTEM) errno = g->err;
    free(g);
    return r;
}
