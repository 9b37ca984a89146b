/* rt_sys.h - the system calls the runtime makes on descriptors, made
 * directly (syscall(2)) rather than through libc's functions of the same
 * names: libaco_hook.so replaces those names (read, write, poll, fcntl,
 * close, ...) in the process, and its replacements call the runtime, which
 * must then reach the kernel, not the hooks again.  Same arguments and
 * results as the libc functions (-1 and errno on failure). */
#ifndef RT_SYS_H
#define RT_SYS_H

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/stat.h>
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
/* preadv2(2) and pwritev2(2) take the offset as two longs, low and high
 * (on 64 bits the kernel shifts the high one out: the whole offset is the
 * low), whatever the ABI. */
static inline long rt_sys_prw(int write, int fd, const struct iovec* v, int cnt, int64_t off,
                              int flags) {
    return syscall(write ? SYS_pwritev2 : SYS_preadv2, (long)fd, (long)v, (long)cnt,
                   (long)(unsigned long)(uint64_t)off, (long)(unsigned long)((uint64_t)off >> 32),
                   (long)flags);
}
/* pread(2) or pwrite(2) itself (not the vectored call: a transfer of no
 * bytes is the driver's to answer there).  i386 passes the offset as two
 * longs, low first; an ABI not known here gets the vectored call. */
static inline long rt_sys_pio(int write, int fd, const void* b, size_t n, int64_t off) {
#if __SIZEOF_LONG__ == 8
    return syscall(write ? SYS_pwrite64 : SYS_pread64, fd, b, n, (long)off);
#elif defined(__i386__)
    return syscall(write ? SYS_pwrite64 : SYS_pread64, fd, b, n,
                   (long)(uint32_t)(uint64_t)off, (long)(uint32_t)((uint64_t)off >> 32));
#else
    struct iovec v = {(void*)b, n};
    return rt_sys_prw(write, fd, &v, 1, off, 0);
#endif
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
/* (ppoll says EINTR for a signal that came in the call, even with no wait:
 * a look is never interrupted for the caller) */
static inline int rt_sys_poll0(struct pollfd* p, nfds_t n) {     /* no wait */
    struct timespec zero = {0, 0};
    int r;
    do r = (int)syscall(SYS_ppoll, p, n, &zero, NULL, (size_t)8); while (r < 0 && errno == EINTR);
    return r;
}
/* close through glibc's __close: past the hooks too (they define close),
 * and seen by ThreadSanitizer, which tracks a descriptor's life (a raw
 * close would make the next eventfd with the same number look racy). */
extern int __close(int fd);
static inline int rt_sys_close(int fd) { return __close(fd); }
static inline int rt_sys_fcntl(int fd, int cmd, long arg) {
    return (int)syscall(SYS_fcntl, fd, cmd, arg);
}

/* A descriptor's type (S_IFMT bits of st_mode) and identity, from the
 * kernel's cached inode (statx(2) with AT_STATX_DONT_SYNC): a FUSE, NFS or
 * other remote file system is not asked, so a busy or slow server never
 * stops the calling thread here (its fstat(2) may ask the server).  The
 * type and identity of an open file never change.  0, or -1 and errno. */
typedef struct {
    unsigned mode;
    uint64_t dev, ino;
} rt_sys_fid_t;
static inline int rt_sys_fid(int fd, rt_sys_fid_t* id) {
#if defined(SYS_statx) && defined(STATX_TYPE)
    struct statx x;
    if (syscall(SYS_statx, fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_TYPE | STATX_INO,
                &x) == 0) {
        id->mode = x.stx_mode & S_IFMT;
        id->dev = (uint64_t)x.stx_dev_major << 32 | x.stx_dev_minor;
        id->ino = x.stx_ino;
        return 0;
    }
    if (errno != ENOSYS) return -1;
#endif
    /* (kernels before 4.11: no statx) */
#if defined(SYS_fstat64)
    struct stat64 st;
    if (syscall(SYS_fstat64, fd, &st) != 0) return -1;
#else
    struct stat st;
    if (syscall(SYS_fstat, fd, &st) != 0) return -1;
#endif
    id->mode = st.st_mode & S_IFMT;
    id->dev = (uint64_t)st.st_dev;
    id->ino = (uint64_t)st.st_ino;
    return 0;
}

#endif
