/* rt_sys.h - the system calls the runtime makes on descriptors, made
 * directly (syscall(2)) rather than through libc's functions of the same
 * names: libaco_hook.so replaces those names (read, write, poll, fcntl,
 * close, ...) in the process, and its replacements call the runtime, which
 * must then reach the kernel, not the hooks again.  Same arguments and
 * results as the libc functions (-1 and errno on failure). */
#ifndef RT_SYS_H
#define RT_SYS_H

#include <poll.h>
#include <stdarg.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

static inline ssize_t rt_sys_read(int fd, void* b, size_t n) {
    return syscall(SYS_read, fd, b, n);
}
static inline ssize_t rt_sys_write(int fd, const void* b, size_t n) {
    return syscall(SYS_write, fd, b, n);
}
static inline ssize_t rt_sys_readv(int fd, const struct iovec* v, int n) {
    return syscall(SYS_readv, fd, v, n);
}
static inline ssize_t rt_sys_writev(int fd, const struct iovec* v, int n) {
    return syscall(SYS_writev, fd, v, n);
}
static inline ssize_t rt_sys_recv(int fd, void* b, size_t n, int flags) {
    return syscall(SYS_recvfrom, fd, b, n, flags, NULL, NULL);
}
static inline ssize_t rt_sys_send(int fd, const void* b, size_t n, int flags) {
    return syscall(SYS_sendto, fd, b, n, flags, NULL, 0);
}
static inline ssize_t rt_sys_recvmsg(int fd, struct msghdr* m, int flags) {
    return syscall(SYS_recvmsg, fd, m, flags);
}
static inline ssize_t rt_sys_sendmsg(int fd, const struct msghdr* m, int flags) {
    return syscall(SYS_sendmsg, fd, m, flags);
}
static inline int rt_sys_accept4(int fd, struct sockaddr* a, socklen_t* l, int flags) {
    return (int)syscall(SYS_accept4, fd, a, l, flags);
}
static inline int rt_sys_connect(int fd, const struct sockaddr* a, socklen_t l) {
    return (int)syscall(SYS_connect, fd, a, l);
}
static inline int rt_sys_poll0(struct pollfd* p, nfds_t n) {     /* no wait */
    struct timespec zero = {0, 0};
    return (int)syscall(SYS_ppoll, p, n, &zero, NULL, (size_t)8);
}
/* close through glibc's __close: past the hooks too (they define close),
 * and seen by ThreadSanitizer, which tracks a descriptor's life (a raw
 * close would make the next eventfd with the same number look racy). */
extern int __close(int fd);
static inline int rt_sys_close(int fd) { return __close(fd); }
static inline int rt_sys_fcntl(int fd, int cmd, long arg) {
    return (int)syscall(SYS_fcntl, fd, cmd, arg);
}

#endif
