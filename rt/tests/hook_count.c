/* hook_count.c - output/libhook_count.so, the real-library tests'
 * instrument: preloaded ahead of the syscall hooks (LD_PRELOAD=
 * "libhook_count.so libaco_hook.so", or alone when the program links
 * libaco_hook.so), it counts the calls the program and its libraries make
 * to the hooked names, per thread, and hands each on (dlsym RTLD_NEXT).
 * A test reads its thread's count through hook_count_calls(), found with
 * dlsym(RTLD_DEFAULT): "the cancelled co made at most 10 hooked calls".
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

static __thread int64_t calls;

/* The count of this thread's calls so far. */
EXPORT int64_t hook_count_calls(void) { return calls; }

/* Where this library's calls go: aco_rt_hooks_active() follows it, so
 * that the hooks behind the counter still count as live.  (Not a tail
 * call: RTLD_NEXT is relative to the caller's object, which must be this
 * one.) */
EXPORT const void* aco_rt_hook_forwards_(const char* name) {
    void* f = dlsym(RTLD_NEXT, name);
    __asm__ volatile("" : : "r"(f) : "memory");
    return f;
}

static void* next(const char* name) {
    void* f = dlsym(RTLD_NEXT, name);
    if (f == NULL) {
        fprintf(stderr, "hook_count: no next %s\n", name);
        abort();
    }
    return f;
}

/* One forwarder: counts, finds the next definition once, calls it. */
#define FWD(ret, name, params, args)                                    \
    EXPORT ret name params {                                            \
        static ret (*f_) params;                                        \
        calls++;                                                        \
        if (f_ == NULL) *(void**)&f_ = next(#name);                     \
        return f_ args;                                                 \
    }

FWD(ssize_t, read, (int fd, void* b, size_t n), (fd, b, n))
FWD(ssize_t, write, (int fd, const void* b, size_t n), (fd, b, n))
FWD(ssize_t, readv, (int fd, const struct iovec* v, int c), (fd, v, c))
FWD(ssize_t, writev, (int fd, const struct iovec* v, int c), (fd, v, c))
FWD(ssize_t, recv, (int fd, void* b, size_t n, int fl), (fd, b, n, fl))
FWD(ssize_t, send, (int fd, const void* b, size_t n, int fl), (fd, b, n, fl))
FWD(ssize_t, recvfrom, (int fd, void* b, size_t n, int fl, struct sockaddr* a, socklen_t* l),
    (fd, b, n, fl, a, l))
FWD(ssize_t, sendto, (int fd, const void* b, size_t n, int fl, const struct sockaddr* a, socklen_t l),
    (fd, b, n, fl, a, l))
FWD(ssize_t, recvmsg, (int fd, struct msghdr* m, int fl), (fd, m, fl))
FWD(ssize_t, sendmsg, (int fd, const struct msghdr* m, int fl), (fd, m, fl))
FWD(int, accept, (int fd, struct sockaddr* a, socklen_t* l), (fd, a, l))
FWD(int, accept4, (int fd, struct sockaddr* a, socklen_t* l, int fl), (fd, a, l, fl))
FWD(int, connect, (int fd, const struct sockaddr* a, socklen_t l), (fd, a, l))
FWD(int, poll, (struct pollfd* p, nfds_t n, int t), (p, n, t))
FWD(int, ppoll, (struct pollfd* p, nfds_t n, const struct timespec* t, const sigset_t* m),
    (p, n, t, m))
FWD(int, select, (int n, fd_set* r, fd_set* w, fd_set* e, struct timeval* t), (n, r, w, e, t))
FWD(int, pselect, (int n, fd_set* r, fd_set* w, fd_set* e, const struct timespec* t,
                   const sigset_t* m), (n, r, w, e, t, m))
FWD(int, epoll_wait, (int ep, struct epoll_event* e, int m, int t), (ep, e, m, t))
FWD(int, epoll_pwait, (int ep, struct epoll_event* e, int m, int t, const sigset_t* s),
    (ep, e, m, t, s))
FWD(int, nanosleep, (const struct timespec* r, struct timespec* rem), (r, rem))
FWD(int, clock_nanosleep, (clockid_t c, int fl, const struct timespec* r, struct timespec* rem),
    (c, fl, r, rem))
FWD(int, usleep, (useconds_t us), (us))
FWD(unsigned, sleep, (unsigned s), (s))
FWD(int, __poll_chk, (struct pollfd* p, nfds_t n, int t, size_t l), (p, n, t, l))
FWD(ssize_t, __read_chk, (int fd, void* b, size_t n, size_t l), (fd, b, n, l))
FWD(ssize_t, __recv_chk, (int fd, void* b, size_t n, size_t l, int fl), (fd, b, n, l, fl))
FWD(ssize_t, __recvfrom_chk, (int fd, void* b, size_t n, size_t l, int fl, struct sockaddr* a,
                              socklen_t* al), (fd, b, n, l, fl, a, al))
