/* hook.c - libaco_hook.so: blocking calls that yield inside runtime cos.
 *
 * Loaded by LD_PRELOAD or linked ahead of libc, this file defines read,
 * write, readv, writev, recv, send, recvfrom, sendto, accept, accept4,
 * connect, poll, ppoll, select, pselect, epoll_wait, epoll_pwait,
 * epoll_pwait2, sleep, usleep, nanosleep, clock_nanosleep and getaddrinfo,
 * the fortified names glibc's headers call instead (__poll_chk,
 * __ppoll_chk, __read_chk, __recv_chk, __recvfrom_chk), and, to stay
 * invisible, socket, close, fcntl, ioctl, setsockopt, dup2 and dup3.
 * Called in a co of a running aco_rt scheduler, a call that would block
 * parks the co in the runtime (aco_rt_read, aco_rt_poll and the rest) and
 * the thread runs other cos; called anywhere else it is libc's, found with
 * dlsym(RTLD_NEXT).  The runtime itself reaches the kernel past these
 * names (rt_sys.h).
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
 * which then fail with EAGAIN as the kernel's would (a retry waits the
 * whole timeout again).
 *
 * Cancel.  A cancelled co (aco_rt_cancel) gets ECANCELED from every call
 * that would wait, poll and select included: an error no library retries,
 * where EINTR would make libpq, libcurl or MariaDB's client poll again at
 * once, for good.  Sleeps have no such error: one that a cancel ends says
 * EINTR with nothing left to sleep (nanosleep's *rem zeroed, sleep 0);
 * one begun in a co already cancelled sleeps its whole time under
 * aco_rt_cancel_shield, so a library's loop of sleeps goes at its own
 * pace and never spins.
 *
 * Waits on many descriptors.  poll, ppoll, select and pselect in a co are
 * one aco_rt_poll: the co parks once on all of them.  select's sets are
 * filled as Linux's select fills them.  epoll_wait and its siblings wait
 * for the epoll descriptor's readiness through the runtime, then call
 * epoll_wait without waiting.  A signal mask given to ppoll, pselect or
 * epoll_pwait is not applied in a co (signals are the thread's, shared by
 * all its cos).
 *
 * dup2 and dup3 are hooked only to forget what was known of the number
 * they overwrite.  Not hooked: dup (the copy starts with a fresh entry),
 * sendmsg, recvmsg, shutdown, files (open, pread, fsync ...) and signals.
 * In a co, a write, writev or send whose reader is gone says EPIPE without
 * SIGPIPE (the runtime's calls never raise it); outside cos they are
 * libc's, SIGPIPE included.
 *
 * Checked mode (aco.h).  The memory every hooked call hands to the kernel
 * (buffers, I/O vectors, addresses and their lengths, poll's array, a
 * socket option's value, the sleeps' times) is checked first, in cos and
 * outside: one in a suspended co's frames is reported as the caller's
 * escape.  fcntl's and ioctl's pointer arguments are not, nor select's sets
 * and the signal masks.
 *
 * getaddrinfo.  glibc reaches the name server through its own internal
 * calls, which no hook sees: in a co the whole lookup goes to a helper
 * thread (aco_rt_offload) and the co parks.  A cancelled co gets
 * EAI_SYSTEM with errno ECANCELED (the lookup ends on its thread and its
 * result is freed there); a full helper queue EAI_AGAIN; no memory
 * EAI_MEMORY.
 *
 * aco_rt_hooks_active (the runtime's) asks aco_rt_hook_binding_ and
 * aco_rt_hook_owns_ below whether these hooks call its own copy of the
 * runtime, and whether the program's calls reach them.
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
#include <signal.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/select.h>
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
    int (*ppoll)(struct pollfd*, nfds_t, const struct timespec*, const sigset_t*);
    int (*select)(int, fd_set*, fd_set*, fd_set*, struct timeval*);
    int (*pselect)(int, fd_set*, fd_set*, fd_set*, const struct timespec*, const sigset_t*);
    int (*epoll_wait)(int, struct epoll_event*, int, int);
    int (*epoll_pwait)(int, struct epoll_event*, int, int, const sigset_t*);
    int (*epoll_pwait2)(int, struct epoll_event*, int, const struct timespec*, const sigset_t*);
    int (*clock_nanosleep)(clockid_t, int, const struct timespec*, struct timespec*);
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
    *(void**)&libc.ppoll = next("ppoll");
    *(void**)&libc.select = next("select");
    *(void**)&libc.pselect = next("pselect");
    *(void**)&libc.epoll_wait = next("epoll_wait");
    *(void**)&libc.epoll_pwait = next("epoll_pwait");
    *(void**)&libc.epoll_pwait2 = next("epoll_pwait2");
    *(void**)&libc.clock_nanosleep = next("clock_nanosleep");
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

HK_INLINE ssize_t hk_read(int fd, void* buf, size_t n) {
    if (HK_CHECKED()) hk_mem(buf, n, 1);
    if (in_co()) {
        hk_fd_t* e = co_entry(fd);
        if (e) return ret(aco_rt_read(fd, buf, n, deadline_of(rcv_of(fd))));
    }
    ssize_t r;
    while ((r = LIBC(read)(fd, buf, n)) < 0 && errno == EAGAIN && block_outside(fd, POLLIN, rcv_of(fd))) {}
    return r;
}

EXPORT ssize_t read(int fd, void* buf, size_t n) { return hk_read(fd, buf, n); }

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

HK_INLINE ssize_t hk_recv(int fd, void* buf, size_t n, int flags) {
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

EXPORT ssize_t recv(int fd, void* buf, size_t n, int flags) { return hk_recv(fd, buf, n, flags); }

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
HK_INLINE ssize_t hk_recvfrom(int fd, void* buf, size_t n, int flags, struct sockaddr* a,
                              socklen_t* l) {
    if (a == NULL) return hk_recv(fd, buf, n, flags);
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

EXPORT ssize_t recvfrom(int fd, void* buf, size_t n, int flags, struct sockaddr* a, socklen_t* l) {
    return hk_recvfrom(fd, buf, n, flags, a, l);
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
/* Waits on many descriptors                                                */
/* ------------------------------------------------------------------------ */

/* The deadline of a timespec timeout (NULL: none), or -2: EINVAL. */
static int64_t ts_deadline(const struct timespec* t) {
    if (t == NULL) return -1;
    if (t->tv_sec < 0 || t->tv_nsec < 0 || t->tv_nsec >= 1000000000) return -2;
    if (t->tv_sec == 0 && t->tv_nsec == 0) return 0;
    if (t->tv_sec > INT64_MAX / 1000000000 - 1) return INT64_MAX;
    return aco_rt_in_ns((int64_t)t->tv_sec * 1000000000 + t->tv_nsec);
}

static int64_t ms_deadline(int ms) {
    return ms < 0 ? -1 : ms == 0 ? 0 : aco_rt_in_ms(ms);
}

/* aco_rt_poll's result as poll(2) says it (a timeout is 0; a cancelled co
 * gets ECANCELED, which no library retries, where EINTR would be). */
static int poll_ret(int r) {
    if (r >= 0) return r;
    if (r == -ETIMEDOUT) return 0;
    errno = -r;
    return -1;
}

HK_INLINE int hk_poll(struct pollfd* fds, nfds_t n, int timeout) {
    if (HK_CHECKED()) hk_mem(fds, n * sizeof(*fds), 1);
    if (!in_co()) return LIBC(poll)(fds, n, timeout);
    return poll_ret(aco_rt_poll(fds, n, ms_deadline(timeout)));
}

EXPORT int poll(struct pollfd* fds, nfds_t n, int timeout) { return hk_poll(fds, n, timeout); }

/* ppoll's signal mask is the thread's, shared by every co of it: in a co
 * it is not applied (the wait is the runtime's, not a system call). */
HK_INLINE int hk_ppoll(struct pollfd* fds, nfds_t n, const struct timespec* t, const sigset_t* m) {
    if (HK_CHECKED()) {
        hk_mem(fds, n * sizeof(*fds), 1);
        if (t) hk_mem(t, sizeof(*t), 0);
    }
    if (!in_co()) return LIBC(ppoll)(fds, n, t, m);
    int64_t dl = ts_deadline(t);
    if (dl == -2) { errno = EINVAL; return -1; }
    return poll_ret(aco_rt_poll(fds, n, dl));
}

EXPORT int ppoll(struct pollfd* fds, nfds_t n, const struct timespec* t, const sigset_t* m) {
    return hk_ppoll(fds, n, t, m);
}

/* select and pselect in a co: poll's array of the sets' descriptors (on the
 * co's stack when small: aco_rt_poll never writes it while the co waits),
 * and the sets as Linux's select fills them: readable on POLLIN, POLLHUP or
 * POLLERR, writable on POLLOUT or POLLERR, an exception on POLLPRI.  An
 * entry that fired with none of those for what it was asked (POLLHUP on a
 * descriptor only in the write set) leaves the wait, which goes on. */
#define SEL_IN (POLLIN | POLLRDNORM | POLLRDBAND | POLLHUP | POLLERR)
#define SEL_OUT (POLLOUT | POLLWRNORM | POLLWRBAND | POLLERR)
#define SEL_EX POLLPRI

static int fdset_has(const fd_set* s, int fd) {
    return s && (((const unsigned long*)(const void*)s)[fd / (8 * sizeof(long))] >>
                 (fd % (8 * sizeof(long)))) & 1;
}
static void fdset_put(fd_set* s, int fd) {
    ((unsigned long*)(void*)s)[fd / (8 * sizeof(long))] |= 1UL << (fd % (8 * sizeof(long)));
}
static void fdset_zero(fd_set* s, int nfds) {
    if (s) memset(s, 0, ((size_t)nfds + 8 * sizeof(long) - 1) / (8 * sizeof(long)) * sizeof(long));
}

static int co_select(int nfds, fd_set* rd, fd_set* wr, fd_set* ex, int64_t dl) {
    if (nfds < 0) { errno = EINVAL; return -1; }
    enum { SMALL = 32 };
    struct pollfd small[SMALL], *p = small;
    int n = 0;
    for (int fd = 0; fd < nfds; fd++)
        n += fdset_has(rd, fd) || fdset_has(wr, fd) || fdset_has(ex, fd);
    if (n > SMALL && (p = malloc((size_t)n * sizeof(*p))) == NULL) { errno = ENOMEM; return -1; }
    n = 0;
    for (int fd = 0; fd < nfds; fd++) {
        short ev = (short)((fdset_has(rd, fd) ? POLLIN : 0) | (fdset_has(wr, fd) ? POLLOUT : 0) |
                           (fdset_has(ex, fd) ? POLLPRI : 0));
        if (ev) p[n++] = (struct pollfd){fd, ev, 0};
    }
    int r;
    for (;;) {
        r = aco_rt_poll(p, (nfds_t)n, dl);
        if (r <= 0) break;
        int bad = 0, got = 0;
        for (int i = 0; i < n; i++) {
            short re = p[i].revents, ev = p[i].events;
            if (re & POLLNVAL) bad = 1;
            else if (re && !(((ev & POLLIN) && (re & SEL_IN)) || ((ev & POLLOUT) && (re & SEL_OUT)) ||
                             ((ev & POLLPRI) && (re & SEL_EX))))
                p[i].fd = -1;           /* nothing select says: not again */
            else if (re)
                got = 1;
        }
        if (bad) { r = -EBADF; break; }
        if (got) break;
    }
    if (r >= 0 || r == -ETIMEDOUT) {
        int cnt = 0;
        fdset_zero(rd, nfds);
        fdset_zero(wr, nfds);
        fdset_zero(ex, nfds);
        for (int i = 0; r > 0 && i < n; i++) {
            short re = p[i].revents, ev = p[i].events;
            if (p[i].fd < 0 || re == 0) continue;
            if ((ev & POLLIN) && (re & SEL_IN)) { fdset_put(rd, p[i].fd); cnt++; }
            if ((ev & POLLOUT) && (re & SEL_OUT)) { fdset_put(wr, p[i].fd); cnt++; }
            if ((ev & POLLPRI) && (re & SEL_EX)) { fdset_put(ex, p[i].fd); cnt++; }
        }
        r = cnt;
    }
    if (p != small) free(p);
    return poll_ret(r);
}

EXPORT int select(int nfds, fd_set* rd, fd_set* wr, fd_set* ex, struct timeval* tv) {
    if (HK_CHECKED() && tv) hk_mem(tv, sizeof(*tv), 1);
    if (!in_co()) return LIBC(select)(nfds, rd, wr, ex, tv);
    int64_t dl = -1;
    if (tv) {
        /* (Linux takes tv_usec past a second: it carries into seconds) */
        if (tv->tv_sec < 0 || tv->tv_usec < 0) { errno = EINVAL; return -1; }
        struct timespec t = {tv->tv_sec + tv->tv_usec / 1000000, tv->tv_usec % 1000000 * 1000};
        dl = t.tv_sec < tv->tv_sec ? -1 : ts_deadline(&t);
    }
    int r = co_select(nfds, rd, wr, ex, dl);
    if (tv && dl > 0) {                 /* Linux leaves the time not slept */
        int64_t left = dl - aco_rt_now();
        if (left < 0 || r == 0) left = 0;
        tv->tv_sec = (time_t)(left / 1000000000);
        tv->tv_usec = (suseconds_t)(left % 1000000000 / 1000);
    }
    return r;
}

EXPORT int pselect(int nfds, fd_set* rd, fd_set* wr, fd_set* ex, const struct timespec* t,
                   const sigset_t* m) {
    if (HK_CHECKED() && t) hk_mem(t, sizeof(*t), 0);
    if (!in_co()) return LIBC(pselect)(nfds, rd, wr, ex, t, m);
    int64_t dl = ts_deadline(t);
    if (dl == -2) { errno = EINVAL; return -1; }
    return co_select(nfds, rd, wr, ex, dl);
}

/* epoll_wait in a co: the epoll descriptor's readiness through the
 * runtime, then the call itself without waiting. */
static int co_epoll_wait(int epfd, struct epoll_event* ev, int max, int64_t dl) {
    for (;;) {
        int r = LIBC(epoll_wait)(epfd, ev, max, 0);
        if (r != 0 || dl == 0) return r;
        int w = aco_rt_wait(epfd, POLLIN, dl);
        if (w == -ETIMEDOUT) return 0;
        if (w < 0) { errno = -w; return -1; }
    }
}

EXPORT int epoll_wait(int epfd, struct epoll_event* ev, int max, int timeout) {
    if (HK_CHECKED() && max > 0) hk_mem(ev, (size_t)max * sizeof(*ev), 1);
    if (!in_co()) return LIBC(epoll_wait)(epfd, ev, max, timeout);
    return co_epoll_wait(epfd, ev, max, ms_deadline(timeout));
}

EXPORT int epoll_pwait(int epfd, struct epoll_event* ev, int max, int timeout, const sigset_t* m) {
    if (HK_CHECKED() && max > 0) hk_mem(ev, (size_t)max * sizeof(*ev), 1);
    if (!in_co()) return LIBC(epoll_pwait)(epfd, ev, max, timeout, m);
    return co_epoll_wait(epfd, ev, max, ms_deadline(timeout));
}

EXPORT int epoll_pwait2(int epfd, struct epoll_event* ev, int max, const struct timespec* t,
                        const sigset_t* m) {
    if (HK_CHECKED()) {
        if (max > 0) hk_mem(ev, (size_t)max * sizeof(*ev), 1);
        if (t) hk_mem(t, sizeof(*t), 0);
    }
    if (!in_co()) return LIBC(epoll_pwait2)(epfd, ev, max, t, m);
    int64_t dl = ts_deadline(t);
    if (dl == -2) { errno = EINVAL; return -1; }
    return co_epoll_wait(epfd, ev, max, dl);
}

/* ------------------------------------------------------------------------ */
/* Sleeps                                                                   */
/* ------------------------------------------------------------------------ */

/* A sleep in a co until dl: 0 when the time passed, 1 when a cancel ended
 * it.  A sleep has no error a library takes for fatal, and one that came
 * back at once in a cancelled co would turn the library's loop of sleeps
 * into a spin: so a sleep begun in a co already cancelled sleeps its whole
 * time, under aco_rt_cancel_shield (the other cos run meanwhile), and only
 * a cancel that comes while a sleep runs ends it early. */
static int co_sleep_until(int64_t dl) {
    if (aco_rt_cancelled()) {
        int was = aco_rt_cancel_shield(1);
        if (was >= 0) {
            aco_rt_sleep_until(dl);
            aco_rt_cancel_shield(was);
            return 0;
        }
        return 1;                       /* no memory for the shield */
    }
    return aco_rt_sleep_until(dl) < 0;
}

/* A sleep a cancel ended says EINTR (as a signal would) with nothing left
 * to sleep: a loop that sleeps the rest again ends at once. */
EXPORT int nanosleep(const struct timespec* req, struct timespec* rem) {
    if (HK_CHECKED()) {
        hk_mem(req, sizeof(*req), 0);
        if (rem) hk_mem(rem, sizeof(*rem), 1);
    }
    if (!in_co()) return LIBC(nanosleep)(req, rem);
    if (req == NULL) { errno = EFAULT; return -1; }
    int64_t dl = ts_deadline(req);
    if (dl == -2) { errno = EINVAL; return -1; }
    if (co_sleep_until(dl) == 0) return 0;
    if (rem) rem->tv_sec = 0, rem->tv_nsec = 0;
    errno = EINTR;
    return -1;
}

EXPORT int clock_nanosleep(clockid_t clk, int flags, const struct timespec* req,
                           struct timespec* rem) {
    if (HK_CHECKED()) {
        hk_mem(req, sizeof(*req), 0);
        if (rem && !(flags & TIMER_ABSTIME)) hk_mem(rem, sizeof(*rem), 1);
    }
    if (!in_co() || (clk != CLOCK_MONOTONIC && clk != CLOCK_REALTIME && clk != CLOCK_BOOTTIME))
        return LIBC(clock_nanosleep)(clk, flags, req, rem);
    if (req == NULL) return EFAULT;
    if (req->tv_sec < 0 || req->tv_nsec < 0 || req->tv_nsec >= 1000000000) return EINVAL;
    int64_t dl;
    if (flags & TIMER_ABSTIME) {        /* the time left on clk, from now */
        struct timespec now;
        clock_gettime(clk, &now);
        int64_t left = ((int64_t)req->tv_sec - now.tv_sec) * 1000000000 + (req->tv_nsec - now.tv_nsec);
        dl = left <= 0 ? 0 : aco_rt_in_ns(left);
    } else {
        dl = ts_deadline(req);
    }
    if (co_sleep_until(dl) == 0) return 0;
    if (rem && !(flags & TIMER_ABSTIME)) rem->tv_sec = 0, rem->tv_nsec = 0;
    return EINTR;
}

EXPORT int usleep(useconds_t us) {
    if (!in_co()) return LIBC(usleep)(us);
    if (co_sleep_until(aco_rt_in_ns((int64_t)us * 1000))) { errno = EINTR; return -1; }
    return 0;
}

/* (Ended by a cancel: 0, nothing left to sleep.) */
EXPORT unsigned sleep(unsigned s) {
    if (!in_co()) return LIBC(sleep)(s);
    co_sleep_until(aco_rt_in_ns((int64_t)s * 1000000000));
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Fortified names (_FORTIFY_SOURCE): the size check, then the call         */
/* ------------------------------------------------------------------------ */

extern void __chk_fail(void) __attribute__((noreturn));

EXPORT int __poll_chk(struct pollfd* fds, nfds_t n, int timeout, size_t fdslen) {
    if (fdslen / sizeof(*fds) < n) __chk_fail();
    return hk_poll(fds, n, timeout);
}

EXPORT int __ppoll_chk(struct pollfd* fds, nfds_t n, const struct timespec* t, const sigset_t* m,
                       size_t fdslen) {
    if (fdslen / sizeof(*fds) < n) __chk_fail();
    return hk_ppoll(fds, n, t, m);
}

EXPORT ssize_t __read_chk(int fd, void* buf, size_t n, size_t buflen) {
    if (n > buflen) __chk_fail();
    return hk_read(fd, buf, n);
}

EXPORT ssize_t __recv_chk(int fd, void* buf, size_t n, size_t buflen, int flags) {
    if (n > buflen) __chk_fail();
    return hk_recv(fd, buf, n, flags);
}

EXPORT ssize_t __recvfrom_chk(int fd, void* buf, size_t n, size_t buflen, int flags,
                              struct sockaddr* a, socklen_t* l) {
    if (n > buflen) __chk_fail();
    return hk_recvfrom(fd, buf, n, flags, a, l);
}

/* ------------------------------------------------------------------------ */
/* What the runtime asks (aco_rt_hooks_active)                              */
/* ------------------------------------------------------------------------ */

/* The runtime these hooks call: a copy of the runtime that finds another
 * answer here is not theirs. */
EXPORT const void* aco_rt_hook_binding_(void) { return (const void*)(uintptr_t)aco_rt_self; }

/* Is fn defined here (in this library, or the program hook.c is linked
 * into)? */
EXPORT int aco_rt_hook_owns_(const void* fn) {
    Dl_info a, b;
    if (fn == NULL || !dladdr(fn, &a) || !dladdr((const void*)(uintptr_t)libc_init, &b)) return 0;
    return a.dli_fbase == b.dli_fbase;
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
