/* hook.c - libaco_hook.so: blocking calls that yield inside runtime cos.
 *
 * Loaded by LD_PRELOAD or linked ahead of libc, this file defines read,
 * write, readv, writev, recv, send, recvfrom, sendto, recvmsg, sendmsg,
 * accept, accept4, connect, shutdown, poll, ppoll, select, pselect,
 * epoll_wait, epoll_pwait, epoll_pwait2, sleep, usleep, nanosleep,
 * clock_nanosleep and getaddrinfo; the file calls open, openat, creat,
 * pread, pwrite, preadv, pwritev, preadv2, pwritev2, fsync, fdatasync,
 * ftruncate, fallocate, stat, lstat, fstat, fstatat, statx, unlink,
 * unlinkat, rmdir, rename, renameat, renameat2, mkdir, mkdirat, sendfile,
 * splice and tee, with their 64-bit names (open64, pread64, fstat64, ...,
 * and glibc's older __xstat family); fcntl's F_SETLKW (fcntl64 too); the
 * fortified names glibc's headers call instead (__poll_chk, __ppoll_chk,
 * __read_chk, __recv_chk, __recvfrom_chk, __pread_chk, __pread64_chk,
 * __open_2, __open64_2, __openat_2, __openat64_2); and, to stay
 * invisible, socket, close, fclose, pclose, freopen (freopen64),
 * closedir, close_range, closefrom, fcntl, ioctl, setsockopt, dup, dup2,
 * dup3, pipe, pipe2, socketpair, eventfd, epoll_create and epoll_create1;
 * and pthread_mutex_lock, trylock and unlock (Mutexes, below).
 * Called in a co of a running aco_rt scheduler, a call that would block
 * parks the co in the runtime (aco_rt_read, aco_rt_poll, aco_rt_pread,
 * aco_rt_openat and the rest) and the thread runs other cos; called
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
 *     the call again; a write goes on to its last byte; a timeout ends the
 *     wait once; a signal without SA_RESTART ends it with EINTR).
 * SO_RCVTIMEO and SO_SNDTIMEO become the deadlines of the calls in cos,
 * which then fail with EAGAIN as the kernel's would (a retry waits the
 * whole timeout again); a negative one is no wait, as the kernel reads it.
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
 * Memory the kernel would refuse.  What a hook reads or writes itself in
 * a co, where the system call would find memory it may not read or write,
 * is the system call's EFAULT, never a fault: select's time and sets
 * (a time it may only read is not written back, the answer kept, as
 * Linux's), the times of pselect, ppoll, epoll_pwait2 and the sleeps,
 * nanosleep's *rem after a cancel, the signal masks of ppoll, pselect and
 * the epoll_pwaits (read as the kernel reads them, not applied), and
 * sendfile's and splice's offsets (one it cannot read goes to the kernel
 * as it is: its error at once, before any wait).  Memory on the running
 * co's stack, where programs keep these, costs nothing to look at;
 * anywhere else the kernel is asked (hk_can: a system call a page) before
 * a read, and again before a write back (a select with its sets and time
 * in the heap, the read set ready: four calls more).  poll's array goes to
 * the kernel first (the runtime's look is ppoll(2) with it): its EFAULT,
 * at once where poll(2) would wait out its time before failing to write
 * into an array it may only read.  Left: an array taken away while its
 * poll waits (the runtime writes POLLNVAL into it itself when a close
 * ends the wait; only a probe at every wait would catch that), and
 * outside cos the calls are libc's: glibc 2.36 reads select's, pselect's
 * and ppoll's times itself, and faults on one the kernel would refuse,
 * hooks or not.
 *
 * dup, dup2 and dup3 are hooked only to carry what is known of the file
 * (the O_NONBLOCK the runtime set) to the number they fill, and pipe,
 * pipe2, socketpair, eventfd, epoll_create and epoll_create1 to know
 * theirs for no file (a number glibc closed inside itself may come back
 * as one).  fclose, pclose, freopen and closedir are hooked only to
 * forget what was known of their number (glibc closes it inside itself,
 * past close; freopen puts its new file there), and close_range and
 * closefrom of each number in their range that had a record (the kernel
 * closes it; CLOSE_RANGE_CLOEXEC closes nothing, and nothing is
 * forgotten): a file the hooks do not see made (passed in, opened
 * inside glibc) that comes to the number next must not take the old
 * one's timeouts and O_NONBLOCK.  Cos waiting on such a number are not
 * told (as with any close behind the runtime's back).  fcloseall needs
 * no hook: glibc's flushes its streams and closes no descriptor.  Not
 * seen: a close by syscall(2) or an inline system call (syscall() is
 * the runtime's own way past the hooks, hooked it would tax every raw
 * call; an inline one no interposed name can see), or inside another
 * library's own system calls: such a number keeps its record for its
 * next file, which then looks set as the old one was, unless that file
 * came in through recvmsg (SCM_RIGHTS: fds_received forgets the records
 * of the numbers it brings; recvmmsg is not hooked).  Not hooked:
 * signals, and the file calls not named above (access, chmod, link,
 * readlink, getdents, ...: each a short wait for a disk or a server at
 * most, with no runtime call to take it).  In a co, a write, writev,
 * send or sendmsg whose reader is gone says EPIPE without SIGPIPE (the
 * runtime's calls never raise it); outside cos they are libc's, SIGPIPE
 * included.
 *
 * Files.  A regular file or block device has no readiness: in a co,
 * read, write, readv and writev of one are the runtime's positioned calls
 * at the file position (aco_rt_preadv, aco_rt_pwritev with offset -1),
 * and so are pread and its siblings (on a pipe or socket those are the
 * readiness way, as read is); open, the stat family, fsync and the rest
 * are aco_rt_openat, aco_rt_statx, aco_rt_fsync ...  A page-cache hit
 * costs one system call on the thread (RWF_NOWAIT); a miss, an open, a
 * stat or a sync parks the co while io_uring or a helper thread does it.
 * What the hooks know of a descriptor (file or not) comes from the
 * kernel's cached inode (AT_STATX_DONT_SYNC), never from a FUSE or NFS
 * server; fstat of a socket, pipe or terminal stays on the thread.  Where
 * the runtime cannot take a call (no memory for its record, the helper
 * queue full) the call is libc's, on the thread, as without the hooks.  A
 * file call has no deadline, and a cancelled co's file calls fail with
 * ECANCELED (the cancel rule below); one cancelled while parked may still
 * take effect (aco_rt.h, "[meta]": a file created, a sync done).
 * F_SETLKW (F_OFD_SETLKW, F_SETLKW64) in a co takes the lock with F_SETLK,
 * sleeping 1 to 16 ms between tries while another holds it (no EDEADLK).
 * On 32-bit ABIs ftruncate, fallocate and sendfile64 are not hooked (the
 * runtime calls them itself there).
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
 * runtime, and whether the program's calls reach them; where another
 * definition comes first, it probes (aco_rt_hook_probes_).
 */
#define _GNU_SOURCE
#include "aco_rt.h"
#include "rt_sys.h"

#include <dirent.h>
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
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
/* initial-exec, as the runtime's (rt_base.h): one instruction an access */
#define HK_TLS __thread __attribute__((tls_model("initial-exec")))

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
    ssize_t (*pread64)(int, void*, size_t, off64_t);
    ssize_t (*pwrite64)(int, const void*, size_t, off64_t);
    ssize_t (*preadv2)(int, const struct iovec*, int, off_t, int);
    ssize_t (*pwritev2)(int, const struct iovec*, int, off_t, int);
    int (*openat)(int, const char*, int, ...);
    int (*fsync)(int);
    int (*fdatasync)(int);
    int (*ftruncate64)(int, off64_t);
    int (*fallocate64)(int, int, off64_t, off64_t);
    int (*unlinkat)(int, const char*, int);
    int (*renameat2)(int, const char*, int, const char*, unsigned);
    int (*mkdirat)(int, const char*, mode_t);
    ssize_t (*sendfile)(int, int, off_t*, size_t);
    ssize_t (*splice)(int, loff_t*, int, loff_t*, size_t, unsigned);
    ssize_t (*tee)(int, int, size_t, unsigned);
    ssize_t (*sendmsg)(int, const struct msghdr*, int);
    ssize_t (*recvmsg)(int, struct msghdr*, int);
    int (*shutdown)(int, int);
    /* (these may be missing: NULL, and the hooks make the system call) */
    int (*stat)(const char*, struct stat*);
    int (*stat64)(const char*, struct stat64*);
    int (*lstat)(const char*, struct stat*);
    int (*lstat64)(const char*, struct stat64*);
    int (*fstat)(int, struct stat*);
    int (*fstat64)(int, struct stat64*);
    int (*fstatat)(int, const char*, struct stat*, int);
    int (*fstatat64)(int, const char*, struct stat64*, int);
    int (*statx)(int, const char*, int, unsigned, struct statx*);
    int (*pipe2)(int*, int);
    int (*socketpair)(int, int, int, int*);
    int (*dup)(int);
    int (*eventfd)(unsigned, int);
    int (*epoll_create1)(int);
    int (*mutex_lock)(pthread_mutex_t*);
    int (*mutex_trylock)(pthread_mutex_t*);
    int (*mutex_unlock)(pthread_mutex_t*);
    int (*fclose)(FILE*);
    int (*pclose)(FILE*);
    FILE* (*freopen)(const char*, const char*, FILE*);
    FILE* (*freopen64)(const char*, const char*, FILE*);
    int (*closedir)(DIR*);
    int (*close_range)(unsigned, unsigned, int);   /* (glibc 2.34: may be NULL) */
    void (*closefrom)(int);
} libc;

static pid_t hk_pid;                    /* (close_range, below) */
static pthread_once_t libc_once = PTHREAD_ONCE_INIT;
static void mx_forked(void);
static int libc_ready;

/* Is p in the object this file is in (the program, or libaco_hook.so)? */
static int ours(void* p) {
    Dl_info a, b;
    return p && dladdr(p, &a) && dladdr((void*)&ours, &b) && a.dli_fbase == b.dli_fbase;
}

/* The function a hook passes its call on to: libc's, found past this
 * object (RTLD_NEXT), or a sanitizer's interceptor of it where the hook
 * hides it.  A sanitizer's runtime linked into the program (clang's) has
 * its interceptors there, and a hook linked in too is the definition the
 * program reaches (the interceptor's name is weak): RTLD_NEXT then gave
 * libc's, past the interceptor, and TSan never saw a hooked
 * pthread_mutex_lock of a helper thread and reported races on what it
 * guards.  So when the name's first definition is this object's and an
 * interceptor exists (LLVM 17 on: three underscores), the hook calls the
 * interceptor, which hands the call to libc.  When the interceptor comes
 * first (a sanitized program that loads libaco_hook.so: it hands its
 * calls to the hooks), RTLD_NEXT is right, and the interceptor would
 * loop back here. */
static void* next(const char* name) {
    void* first = dlsym(RTLD_DEFAULT, name);
    if (ours(first)) {
        static const char* const pre[] = {"___interceptor_", "__interceptor_"};
        for (int i = 0; i < 2; i++) {
            char in[64];
            if ((size_t)snprintf(in, sizeof(in), "%s%s", pre[i], name) >= sizeof(in)) continue;
            void* g = dlsym(RTLD_DEFAULT, in);
            if (g && g != first) return g;
        }
    }
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
    *(void**)&libc.pread64 = next("pread64");
    *(void**)&libc.pwrite64 = next("pwrite64");
    *(void**)&libc.preadv2 = next("preadv2");
    *(void**)&libc.pwritev2 = next("pwritev2");
    *(void**)&libc.openat = next("openat");
    *(void**)&libc.fsync = next("fsync");
    *(void**)&libc.fdatasync = next("fdatasync");
    *(void**)&libc.ftruncate64 = next("ftruncate64");
    *(void**)&libc.fallocate64 = next("fallocate64");
    *(void**)&libc.unlinkat = next("unlinkat");
    *(void**)&libc.renameat2 = next("renameat2");
    *(void**)&libc.mkdirat = next("mkdirat");
    *(void**)&libc.sendfile = next("sendfile");
    *(void**)&libc.splice = next("splice");
    *(void**)&libc.tee = next("tee");
    *(void**)&libc.sendmsg = next("sendmsg");
    *(void**)&libc.recvmsg = next("recvmsg");
    *(void**)&libc.shutdown = next("shutdown");
    *(void**)&libc.stat = dlsym(RTLD_NEXT, "stat");
    *(void**)&libc.stat64 = dlsym(RTLD_NEXT, "stat64");
    *(void**)&libc.lstat = dlsym(RTLD_NEXT, "lstat");
    *(void**)&libc.lstat64 = dlsym(RTLD_NEXT, "lstat64");
    *(void**)&libc.fstat = dlsym(RTLD_NEXT, "fstat");
    *(void**)&libc.fstat64 = dlsym(RTLD_NEXT, "fstat64");
    *(void**)&libc.fstatat = dlsym(RTLD_NEXT, "fstatat");
    *(void**)&libc.fstatat64 = dlsym(RTLD_NEXT, "fstatat64");
    *(void**)&libc.statx = dlsym(RTLD_NEXT, "statx");
    *(void**)&libc.pipe2 = next("pipe2");
    *(void**)&libc.socketpair = next("socketpair");
    *(void**)&libc.dup = next("dup");
    *(void**)&libc.eventfd = next("eventfd");
    *(void**)&libc.epoll_create1 = next("epoll_create1");
    *(void**)&libc.mutex_lock = next("pthread_mutex_lock");
    *(void**)&libc.mutex_trylock = next("pthread_mutex_trylock");
    *(void**)&libc.mutex_unlock = next("pthread_mutex_unlock");
    *(void**)&libc.fclose = next("fclose");
    *(void**)&libc.pclose = next("pclose");
    *(void**)&libc.freopen = next("freopen");
    *(void**)&libc.freopen64 = next("freopen64");
    *(void**)&libc.closedir = next("closedir");
    *(void**)&libc.close_range = dlsym(RTLD_NEXT, "close_range");
    *(void**)&libc.closefrom = dlsym(RTLD_NEXT, "closefrom");
    hk_pid = (pid_t)syscall(SYS_getpid);
    pthread_atfork(NULL, NULL, mx_forked);
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
    F_KIND = 8,         /* we know whether it is a file (F_FILE) */
    F_FILE = 16,        /* a regular file or a block device */
    F_DISK = 32,        /* that, or a directory */
    F_SHARED = 64,      /* dup'd: another number shares its open file */
    F_RT_NB = 128,      /* the runtime did set O_NONBLOCK (F_MADE_NB says
                           only that a co used it: a socket's and a pipe's
                           calls are non-blocking one by one) */
    F_TMO = 256,        /* rcv_ns and snd_ns are known (else: the kernel's,
                           read at the next use; a file made by a call
                           not hooked, a socket passed in) */
    F_NOSOCK = 512,     /* no socket: it has no timeouts to read */
};

typedef struct {
    uint32_t flags;     /* atomic */
    uint32_t tmo_gen;   /* tmo_gen's value when a shared socket's timeouts
                           were read from the kernel (atomic) */
    int64_t  rcv_ns;    /* SO_RCVTIMEO, 0: none, -1: no wait (atomic) */
    int64_t  snd_ns;    /* SO_SNDTIMEO */
} hk_fd_t;

/* Counts the hooked setsockopt calls that set a timeout on a socket that
 * another number shares: a shared socket's kept timeouts are read again
 * from the kernel only after one (and after a dup: fd_dup), never at
 * every call (a timeout set past the hooks, by syscall(2) or by another
 * process sharing the socket, is not seen on its other numbers). */
static uint32_t tmo_gen = 1;
/* An entry's tmo_gen that makes tmo_of read the kernel's timeouts again. */
static inline void tmo_stale(hk_fd_t* e) {
    __atomic_store_n(&e->tmo_gen, __atomic_load_n(&tmo_gen, __ATOMIC_RELAXED) - 1,
                     __ATOMIC_RELAXED);
}

#define CHUNK 1024
#define NCHUNKS 65536               /* descriptors below 64M */
static hk_fd_t* chunks[NCHUNKS];
static unsigned chunks_top;         /* (atomic) 1 + the highest chunk made */

static hk_fd_t* fd_entry(int fd) {
    if (fd < 0 || fd / CHUNK >= NCHUNKS) return NULL;
    hk_fd_t** slot = &chunks[fd / CHUNK];
    hk_fd_t* c = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (c == NULL) {
        hk_fd_t* n = calloc(CHUNK, sizeof(*n));
        if (n == NULL) return NULL;     /* then the hooks pass calls on */
        if (!__atomic_compare_exchange_n(slot, &c, n, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            free(n);                    /* another thread's is there */
        } else {
            c = n;
            /* (fd_gone_range looks no further than chunks_top) */
            unsigned i = (unsigned)(fd / CHUNK);
            unsigned top = __atomic_load_n(&chunks_top, __ATOMIC_RELAXED);
            while (top <= i && !__atomic_compare_exchange_n(&chunks_top, &top, i + 1, 1,
                                                            __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {}
        }
    }
    return &c[fd % CHUNK];
}

static uint32_t fd_flags(hk_fd_t* e) { return __atomic_load_n(&e->flags, __ATOMIC_RELAXED); }
static void fd_on(hk_fd_t* e, uint32_t f) { __atomic_fetch_or(&e->flags, f, __ATOMIC_RELAXED); }
static void fd_off(hk_fd_t* e, uint32_t f) { __atomic_fetch_and(&e->flags, ~f, __ATOMIC_RELAXED); }

/* A descriptor the program got anew: forget the old one's (notfile: it is
 * a socket, pipe or the like, no file). */
static void fd_fresh(int fd, int user_nb, int notfile) {
    hk_fd_t* e = fd_entry(fd);
    if (e == NULL) return;
    __atomic_store_n(&e->flags, F_SEEN | F_TMO | (user_nb ? F_USER_NB : 0) | (notfile ? F_KIND : 0),
                     __ATOMIC_RELAXED);
    __atomic_store_n(&e->rcv_ns, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&e->snd_ns, 0, __ATOMIC_RELAXED);
}

/* dup, dup2, dup3 and F_DUPFD put from's file under the number to: what
 * we know of it goes with it, the O_NONBLOCK we set (the copy shares it:
 * looked at anew, it would pass for the program's) and the socket
 * timeouts (the socket's, which either number may set: read from the
 * kernel while shared, tmo_of); only the kind is looked at again (a
 * number closed behind glibc's back may have held another file). */
static void fd_dup(int from, int to) {
    hk_fd_t* f = fd_entry(from);
    hk_fd_t* t = fd_entry(to);
    if (t == NULL) return;
    uint32_t fl = f ? fd_flags(f) & (F_SEEN | F_USER_NB | F_MADE_NB | F_RT_NB | F_TMO) : 0;
    __atomic_store_n(&t->flags, fl | F_SHARED, __ATOMIC_RELAXED);
    if (f) fd_on(f, F_SHARED);
    __atomic_store_n(&t->rcv_ns, f ? __atomic_load_n(&f->rcv_ns, __ATOMIC_RELAXED) : 0, __ATOMIC_RELAXED);
    __atomic_store_n(&t->snd_ns, f ? __atomic_load_n(&f->snd_ns, __ATOMIC_RELAXED) : 0, __ATOMIC_RELAXED);
    /* (both read the kernel's at their next use: what was kept for from
     * may be older than the socket's, set through another number) */
    tmo_stale(t);
    if (f) tmo_stale(f);
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
    if (f & F_USER_NB) {
        /* The program's O_NONBLOCK is the open file's, which another
         * number of it (a dup) may have cleared since: libc's call would
         * then block the thread.  Looked at again (one F_GETFL, only for
         * files that were dup'd): blocking now, this call is the runtime's
         * (the co waits); the record stays the program's. */
        if (!(f & F_SHARED)) return NULL;
        int fl = rt_sys_fcntl(fd, F_GETFL, 0);
        if (fl < 0 || (fl & O_NONBLOCK)) return NULL;
        return e;
    }
    fd_on(e, F_MADE_NB);
    return e;
}

/* What fd is (looked up once per entry, from the kernel's cached inode:
 * rt_sys_fid, which asks no FUSE or NFS server): F_FILE, a regular file or
 * a block device, which has no readiness, so a co's reads and writes of
 * it go through the runtime's file calls whatever O_NONBLOCK says (the
 * kernel ignores it there); F_DISK, that or a directory, whose fstat may
 * wait for a disk or a server.  0 for anything else, or a bad number. */
static uint32_t fd_kind(int fd) {
    hk_fd_t* e = fd_entry(fd);
    if (e == NULL) return 0;
    uint32_t f = fd_flags(e);
    if (!(f & F_KIND)) {
        rt_sys_fid_t id;
        if (rt_sys_fid(fd, &id) < 0) return 0;     /* (the call says EBADF) */
        fd_on(e, F_KIND | (S_ISREG(id.mode) || S_ISBLK(id.mode) ? F_FILE | F_DISK : 0) |
                     (S_ISDIR(id.mode) ? F_DISK : 0));
        f = fd_flags(e);
    }
    return f & (F_FILE | F_DISK);
}
static int fd_is_file(int fd) { return (fd_kind(fd) & F_FILE) != 0; }

static ssize_t file_rw(int write, int fd, const struct iovec* iov, int cnt, int64_t off,
                       int flags);

/* In a co, and the hooks not paused (aco_rt_hooks_pause) on this thread. */
static int in_co(void) { return aco_rt_self() != NULL && !aco_rt_hooks_paused(); }

/* A socket timeout (rcv_ns, snd_ns: 0 none, -1 no wait) as a deadline. */
static int64_t deadline_of(int64_t tmo_ns) {
    return tmo_ns > 0 ? aco_rt_now() + tmo_ns : tmo_ns < 0 ? aco_rt_now() : -1;
}

/* A runtime result as libc says it. */
static ssize_t ret(ssize_t r) {
    if (r >= 0) return r;
    errno = (int)-r;
    return -1;
}

/* The same for a call made with deadline dl (deadline_of: a socket
 * timeout's, or -1): the deadline's -ETIMEDOUT is EAGAIN (SO_RCVTIMEO's
 * and SO_SNDTIMEO's error); any other is the kernel's own (a TCP
 * connection that timed out) and stays ETIMEDOUT. */
static ssize_t ret_dl(ssize_t r, int64_t dl) {
    if (r == -ETIMEDOUT && dl != -1 && aco_rt_now() >= dl) r = -EAGAIN;
    return ret(r);
}

/* Outside cos: is fd non-blocking by the runtime's doing alone, in the
 * kernel now (the table says only that the runtime may have made it so:
 * an EAGAIN from a blocking descriptor is the kernel's own timeout)? */
static int made_nb_now(int fd) {
    hk_fd_t* e = fd_entry(fd);
    if (e == NULL || (fd_flags(e) & (F_MADE_NB | F_USER_NB)) != F_MADE_NB) return 0;
    int fl = rt_sys_fcntl(fd, F_GETFL, 0);
    return fl >= 0 && (fl & O_NONBLOCK);
}

/* A signal's handler ended a poll that stands for a blocking call: would
 * the kernel have failed that call with EINTR?  A socket call with a
 * timeout always (signal(7)); else unless the handler asked SA_RESTART.
 * Which signal came is not known here: any handler without SA_RESTART
 * says EINTR (a program that mixes the two may see an EINTR the kernel
 * would have restarted, as its other calls may), but the handlers of the
 * faults (SIGSEGV and kin: a sanitizer's, checked mode's), which a wait
 * never meets. */
static int interrupted(int64_t tmo_ns) {
    if (tmo_ns != 0) return 1;
    for (int s = 1; s < NSIG; s++) {
        struct sigaction a;
        if (s == SIGKILL || s == SIGSTOP || s == SIGSEGV || s == SIGBUS || s == SIGILL ||
            s == SIGFPE || s == SIGTRAP || s == SIGSYS)
            continue;
        if (sigaction(s, NULL, &a) == 0 && a.sa_handler != SIG_DFL && a.sa_handler != SIG_IGN &&
            !(a.sa_flags & SA_RESTART))
            return 1;
    }
    return 0;
}

/* Outside cos, on a descriptor the runtime made non-blocking behind the
 * program's back: wait as a blocking call would (tmo_ns: the socket's
 * timeout, 0: none).  1: try again; 0: give the caller the EAGAIN (the
 * timeout), or EINTR (a signal the call would not have outlived). */
static int block_outside(int fd, int events, int64_t tmo_ns) {
    if (!made_nb_now(fd)) return 0;
    struct pollfd p = {fd, (short)events, 0};
    int64_t ms64 = tmo_ns > 0 ? (tmo_ns + 999999) / 1000000 : tmo_ns < 0 ? 0 : -1;
    int ms = ms64 > INT_MAX ? INT_MAX : (int)ms64;
    int n;
    while ((n = LIBC(poll)(&p, 1, ms)) < 0 && errno == EINTR && !interrupted(tmo_ns)) {}
    if (n == 0) errno = EAGAIN;
    return n > 0;
}

/* The same for a write cut short: a blocking write(2) to a pipe or a
 * stream socket moves every byte (a signal or a timeout after some ends
 * it with the count).  1: write the rest. */
static int more_outside(int fd) { return made_nb_now(fd); }

/* A socket timeout as the kernel has it now (0: none, or not a socket).
 * getsockopt says 0 for a negative one (no wait) too: prev, what was
 * kept, tells that one where it said so. */
static int64_t tmo_kernel(int fd, hk_fd_t* e, int name, int64_t prev) {
    struct timeval tv;
    socklen_t l = sizeof(tv);
    if (getsockopt(fd, SOL_SOCKET, name, &tv, &l) != 0 || l != sizeof(tv)) {
        if (errno == ENOTSOCK) fd_on(e, F_NOSOCK);
        return 0;
    }
    if (tv.tv_sec == 0 && tv.tv_usec == 0) return prev < 0 ? prev : 0;
    return (int64_t)tv.tv_sec * 1000000000 + (int64_t)tv.tv_usec * 1000;
}

/* Both of fd's timeouts from the kernel, into e: for a number the hooks
 * did not see made (popen's pipe, a socket passed in or inherited). */
static void tmo_load(int fd, hk_fd_t* e) {
    int err = errno;
    __atomic_store_n(&e->rcv_ns, tmo_kernel(fd, e, SO_RCVTIMEO, 0), __ATOMIC_RELAXED);
    __atomic_store_n(&e->snd_ns, fd_flags(e) & F_NOSOCK ? 0 : tmo_kernel(fd, e, SO_SNDTIMEO, 0),
                     __ATOMIC_RELAXED);
    fd_on(e, F_TMO);
    errno = err;
}

/* fd's SO_RCVTIMEO (rcv) or SO_SNDTIMEO: kept, but the kernel's where
 * another number shares the socket (its setsockopt sets the socket's) and
 * a timeout was set since the last look, or where none is kept. */
static int64_t tmo_of(int fd, int rcv) {
    hk_fd_t* e = fd_entry(fd);
    if (e == NULL) return 0;
    uint32_t f = fd_flags(e);
    int64_t* v = rcv ? &e->rcv_ns : &e->snd_ns;
    if (!(f & F_TMO)) {
        tmo_load(fd, e);
    } else if ((f & (F_SHARED | F_NOSOCK)) == F_SHARED &&
               __atomic_load_n(&e->tmo_gen, __ATOMIC_ACQUIRE) !=
                   __atomic_load_n(&tmo_gen, __ATOMIC_ACQUIRE)) {
        /* One reader at a time (two could store their readings crosswise
         * and the later count over the older values); the count taken
         * before the reading, so a set meanwhile is read again next time. */
        static uint32_t lock;
        int err = errno;
        while (__atomic_exchange_n(&lock, 1, __ATOMIC_ACQUIRE)) sched_yield();
        uint32_t g = __atomic_load_n(&tmo_gen, __ATOMIC_ACQUIRE);
        if (__atomic_load_n(&e->tmo_gen, __ATOMIC_RELAXED) != g) {
            int64_t r = __atomic_load_n(&e->rcv_ns, __ATOMIC_RELAXED);
            int64_t w = __atomic_load_n(&e->snd_ns, __ATOMIC_RELAXED);
            __atomic_store_n(&e->rcv_ns, tmo_kernel(fd, e, SO_RCVTIMEO, r), __ATOMIC_RELAXED);
            __atomic_store_n(&e->snd_ns, tmo_kernel(fd, e, SO_SNDTIMEO, w), __ATOMIC_RELAXED);
            __atomic_store_n(&e->tmo_gen, g, __ATOMIC_RELEASE);
        }
        __atomic_store_n(&lock, 0, __ATOMIC_RELEASE);
        errno = err;
    }
    return __atomic_load_n(v, __ATOMIC_RELAXED);
}
static int64_t rcv_of(int fd) { return tmo_of(fd, 1); }
static int64_t snd_of(int fd) { return tmo_of(fd, 0); }

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

/* aco_rt_hooks_active's probe: whether a definition ahead of these hooks
 * (a sanitizer's interceptor, a tracer) hands the program's calls on to
 * them.  A read, recv, poll or connect whose buffer, array or address is
 * the token (on descriptor -1, nothing to move) is counted here, per
 * thread, and fails as the kernel would have it. */
static const char hk_token[1];
static HK_TLS unsigned hk_probes;
#define HK_PROBE(p) (aco_unlikely((const void*)(p) == hk_token) && (hk_probes++, 1))

/* ------------------------------------------------------------------------ */
/* Reads and writes                                                         */
/* ------------------------------------------------------------------------ */

HK_INLINE ssize_t hk_read(int fd, void* buf, size_t n) {
    if (HK_PROBE(buf)) { errno = EBADF; return -1; }
    if (HK_CHECKED()) hk_mem(buf, n, 1);
    if (in_co()) {
        /* (a size over SSIZE_MAX: aco_rt_read's -EFAULT, as read(2)'s) */
        if (n <= SSIZE_MAX && fd_is_file(fd)) return file_rw(0, fd, &(struct iovec){buf, n}, 1, -1, 0);
        hk_fd_t* e = co_entry(fd);
        if (e) {
            int64_t dl = deadline_of(rcv_of(fd));
            return ret_dl(aco_rt_read(fd, buf, n, dl), dl);
        }
    }
    ssize_t r;
    while ((r = LIBC(read)(fd, buf, n)) < 0 && errno == EAGAIN && block_outside(fd, POLLIN, rcv_of(fd))) {}
    return r;
}

EXPORT ssize_t read(int fd, void* buf, size_t n) { return hk_read(fd, buf, n); }

EXPORT ssize_t write(int fd, const void* buf, size_t n) {
    if (HK_CHECKED()) hk_mem(buf, n, 0);
    if (in_co()) {
        if (n <= SSIZE_MAX && fd_is_file(fd))
            return file_rw(1, fd, &(struct iovec){(void*)buf, n}, 1, -1, 0);
        hk_fd_t* e = co_entry(fd);
        if (e) {
            int64_t dl = deadline_of(snd_of(fd));
            return ret_dl(aco_rt_write(fd, buf, n, dl), dl);
        }
    }
    ssize_t r, done = 0;
    for (;;) {
        while ((r = LIBC(write)(fd, (const char*)buf + done, n - (size_t)done)) < 0 &&
               errno == EAGAIN && block_outside(fd, POLLOUT, snd_of(fd))) {}
        if (r <= 0) return done ? done : r;
        done += r;
        if ((size_t)done == n || !more_outside(fd)) return done;
    }
}

EXPORT ssize_t readv(int fd, const struct iovec* iov, int cnt) {
    if (HK_CHECKED()) hk_iov(iov, cnt, 1);
    if (in_co()) {
        if (fd_is_file(fd)) return file_rw(0, fd, iov, cnt, -1, 0);
        hk_fd_t* e = co_entry(fd);
        if (e) {
            int64_t dl = deadline_of(rcv_of(fd));
            return ret_dl(aco_rt_readv(fd, iov, cnt, dl), dl);
        }
    }
    ssize_t r;
    while ((r = LIBC(readv)(fd, iov, cnt)) < 0 && errno == EAGAIN && block_outside(fd, POLLIN, rcv_of(fd))) {}
    return r;
}

EXPORT ssize_t writev(int fd, const struct iovec* iov, int cnt) {
    if (HK_CHECKED()) hk_iov(iov, cnt, 0);
    if (in_co()) {
        if (fd_is_file(fd)) return file_rw(1, fd, iov, cnt, -1, 0);
        hk_fd_t* e = co_entry(fd);
        if (e) {
            int64_t dl = deadline_of(snd_of(fd));
            return ret_dl(aco_rt_writev(fd, iov, cnt, dl), dl);
        }
    }
    ssize_t r;
    while ((r = LIBC(writev)(fd, iov, cnt)) < 0 && errno == EAGAIN && block_outside(fd, POLLOUT, snd_of(fd))) {}
    if (r <= 0 || cnt <= 0 || cnt > IOV_MAX) return r;
    /* cut short: the rest piece by piece, as write's */
    size_t skip = (size_t)r;
    for (int i = 0; i < cnt; i++) {
        if (skip >= iov[i].iov_len) { skip -= iov[i].iov_len; continue; }
        if (!more_outside(fd)) return r;
        size_t left = iov[i].iov_len - skip;
        ssize_t k = write(fd, (const char*)iov[i].iov_base + skip, left);
        if (k > 0) r += k;
        if (k != (ssize_t)left) return r;
        skip = 0;
    }
    return r;
}

/* (MSG_ERRQUEUE never waits: an empty error queue is EAGAIN at once) */
#define RECV_NOWAIT (MSG_DONTWAIT | MSG_ERRQUEUE)

HK_INLINE ssize_t hk_recv(int fd, void* buf, size_t n, int flags) {
    if (HK_PROBE(buf)) { errno = EBADF; return -1; }
    if (HK_CHECKED()) hk_mem(buf, n, 1);
    if (in_co() && !(flags & RECV_NOWAIT)) {
        hk_fd_t* e = co_entry(fd);
        if (e) {
            int64_t dl = deadline_of(rcv_of(fd));
            return ret_dl(aco_rt_recv(fd, buf, n, flags, dl), dl);
        }
    }
    ssize_t r;
    while ((r = LIBC(recv)(fd, buf, n, flags)) < 0 && errno == EAGAIN && !(flags & RECV_NOWAIT) &&
           block_outside(fd, POLLIN, rcv_of(fd))) {}
    return r;
}

EXPORT ssize_t recv(int fd, void* buf, size_t n, int flags) { return hk_recv(fd, buf, n, flags); }

EXPORT ssize_t send(int fd, const void* buf, size_t n, int flags) {
    if (HK_CHECKED()) hk_mem(buf, n, 0);
    if (in_co() && !(flags & MSG_DONTWAIT)) {
        hk_fd_t* e = co_entry(fd);
        if (e) {
            int64_t dl = deadline_of(snd_of(fd));
            return ret_dl(aco_rt_send(fd, buf, n, flags, dl), dl);
        }
    }
    ssize_t r, done = 0;
    for (;;) {
        while ((r = LIBC(send)(fd, (const char*)buf + done, n - (size_t)done, flags)) < 0 &&
               errno == EAGAIN && !(flags & MSG_DONTWAIT) && block_outside(fd, POLLOUT, snd_of(fd))) {}
        if (r <= 0) return done ? done : r;
        done += r;
        if ((size_t)done == n || (flags & MSG_DONTWAIT) || !more_outside(fd)) return done;
    }
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
    if (in_co() && !(flags & RECV_NOWAIT) && co_entry(fd)) {
        int64_t dl = deadline_of(rcv_of(fd));
        int c = aco_rt_cancel_check();          /* (the runtime's rule: at once) */
        if (c < 0) return ret(c);
        for (;;) {
            ssize_t r = LIBC(recvfrom)(fd, buf, n, flags | MSG_DONTWAIT, a, l);
            if (r >= 0 || errno != EAGAIN) return r;
            int w = aco_rt_wait(fd, POLLIN, dl);
            if (w < 0) return ret_dl(w, dl);
        }
    }
    ssize_t r;
    while ((r = LIBC(recvfrom)(fd, buf, n, flags, a, l)) < 0 && errno == EAGAIN &&
           !(flags & RECV_NOWAIT) && block_outside(fd, POLLIN, rcv_of(fd))) {}
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
    /* (as sendmsg: a wait for POLLOUT alone would spin where readiness
     * knows no peer, a Unix datagram to a full queue by address; but a
     * length sendmsg(2) would take otherwise, none or above the largest
     * address, which sendto(2) gives the protocol or refuses, goes as
     * sendto) */
    if (in_co() && !(flags & MSG_DONTWAIT) && co_entry(fd)) {
        int64_t dl = deadline_of(snd_of(fd));
        if (l > 0 && l <= sizeof(struct sockaddr_storage)) {
            struct iovec v = {(void*)buf, n};
            struct msghdr m = {.msg_name = (void*)a, .msg_namelen = l, .msg_iov = &v, .msg_iovlen = 1};
            return ret_dl(aco_rt_sendmsg(fd, &m, flags, dl), dl);
        }
        int c = aco_rt_cancel_check();
        if (c < 0) return ret(c);
        for (;;) {
            ssize_t r = LIBC(sendto)(fd, buf, n, flags | MSG_DONTWAIT | MSG_NOSIGNAL, a, l);
            if (r >= 0 || errno != EAGAIN) return r;
            int w = aco_rt_wait(fd, POLLOUT, dl);
            if (w < 0) return ret_dl(w, dl);
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
        int64_t dl = deadline_of(rcv_of(fd));
        r = (int)ret_dl(aco_rt_accept(fd, a, l, flags, dl), dl);
        if (r >= 0) {
            fd_fresh(r, flags & SOCK_NONBLOCK, 1);
            hk_fd_t* e = fd_entry(r);
            if (e && !(flags & SOCK_NONBLOCK)) fd_on(e, F_MADE_NB);   /* it may be */
        }
        return r;
    }
    while ((r = LIBC(accept4)(fd, a, l, flags)) < 0 && errno == EAGAIN &&
           block_outside(fd, POLLIN, rcv_of(fd))) {}
    if (r >= 0) fd_fresh(r, flags & SOCK_NONBLOCK, 1);
    return r;
}

EXPORT int accept(int fd, struct sockaddr* a, socklen_t* l) { return accept4(fd, a, l, 0); }

EXPORT int connect(int fd, const struct sockaddr* a, socklen_t l) {
    if (HK_PROBE(a)) { errno = EBADF; return -1; }
    if (HK_CHECKED()) hk_mem(a, l, 0);
    if (in_co() && co_entry(fd)) {
        /* aco_rt_connect leaves the socket O_NONBLOCK (it has no per-call
         * flag); the program's socket was blocking, and the calls the
         * hooks do not take (recvmmsg, stdio on fdopen) must find it so:
         * the runtime's own calls on a socket need no flag (MSG_DONTWAIT) */
        int fl = rt_sys_fcntl(fd, F_GETFL, 0);
        int64_t dl = deadline_of(snd_of(fd));
        int r = (int)aco_rt_connect(fd, a, l, dl);
        /* SO_SNDTIMEO passed: connect(2) says EINPROGRESS (TCP: it goes
         * on), or EAGAIN (a Unix listener's queue stayed full) */
        if (r == -ETIMEDOUT && dl != -1 && aco_rt_now() >= dl)
            r = a && a->sa_family == AF_UNIX ? -EAGAIN : -EINPROGRESS;
        r = (int)ret(r);
        if (fl >= 0 && !(fl & O_NONBLOCK)) {
            int e = errno;
            rt_sys_fcntl(fd, F_SETFL, fl);
            hk_fd_t* h = fd_entry(fd);
            if (h) fd_off(h, F_RT_NB);
            errno = e;
        }
        return r;
    }
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
    if (r >= 0) fd_fresh(r, type & SOCK_NONBLOCK, 1);
    return r;
}

/* fd is closed: what was known of it goes (the next file under the
 * number may come from a call not hooked: its flags and timeouts are not
 * these). */
static void fd_forget(hk_fd_t* e) {
    __atomic_store_n(&e->flags, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&e->rcv_ns, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&e->snd_ns, 0, __ATOMIC_RELAXED);
}
static void fd_gone(int fd) {
    hk_fd_t* e = fd_entry(fd);
    if (e) fd_forget(e);
}
/* The same for every number from first to last that has a record: the
 * chunks made, no more (close_range(3, ~0U) looks at as many entries as
 * the program ever had numbers). */
static void fd_gone_range(unsigned first, unsigned last) {
    unsigned top = __atomic_load_n(&chunks_top, __ATOMIC_ACQUIRE);
    for (unsigned c = first / CHUNK; c < top && c <= last / CHUNK; c++) {
        hk_fd_t* ch = __atomic_load_n(&chunks[c], __ATOMIC_ACQUIRE);
        unsigned lo = c == first / CHUNK ? first % CHUNK : 0;
        unsigned hi = c == last / CHUNK ? last % CHUNK : CHUNK - 1;
        for (unsigned i = lo; ch && i <= hi; i++) fd_forget(&ch[i]);
    }
}

EXPORT int close(int fd) {
    fd_gone(fd);
    /* Cos waiting on fd, in any thread's scheduler, are told EBADF (with
     * no scheduler in the process this is close(2) itself). */
    return (int)ret(aco_rt_close(fd));
}

/* fclose closes its number inside glibc, past close above: forgotten
 * here first (fdopen of a socket, a pipe: the number's next file, passed
 * in or made by a call not hooked, would take its timeouts and flags). */
static void file_gone(FILE* f) {
    if (f) {
        int err = errno, fd = fileno(f);       /* (-1: no descriptor) */
        if (fd >= 0) fd_gone(fd);
        errno = err;
    }
}
EXPORT int fclose(FILE* f) {
    file_gone(f);
    return LIBC(fclose)(f);
}

/* So do pclose (popen's pipe) and closedir (the directory's number; a
 * glibc opendir's is O_NONBLOCK, which a socket passed in there next
 * would be taken to have from the program). */
EXPORT int pclose(FILE* f) {
    file_gone(f);
    return LIBC(pclose)(f);
}
EXPORT int closedir(DIR* d) {
    DIR* any = d;
    __asm__("" : "+r"(any));    /* (NULL, which glibc's header calls no
                                   argument, is its EINVAL all the same) */
    if (any) {
        int err = errno, fd = dirfd(any);
        if (fd >= 0) fd_gone(fd);
        errno = err;
    }
    return LIBC(closedir)(d);
}

/* freopen opens its new file and puts it on the old number inside glibc
 * (a dup3 of its own; the old file goes whether or not the open worked):
 * the number's next file is that one. */
EXPORT FILE* freopen(const char* path, const char* mode, FILE* f) {
    file_gone(f);
    return LIBC(freopen)(path, mode, f);
}
EXPORT FILE* freopen64(const char* path, const char* mode, FILE* f) {
    file_gone(f);
    return LIBC(freopen64)(path, mode, f);
}

/* close_range and closefrom close a range in the kernel: each number of
 * it forgets first, as close does (a number given out again once the
 * kernel closed it keeps its new record).  Not in a call the kernel will
 * refuse (a bad range or flag), nor for CLOSE_RANGE_CLOEXEC (it closes
 * nothing), nor where the table closed from is not the one the records
 * describe: CLOSE_RANGE_UNSHARE's copy, or a vfork child's (our memory,
 * its own table: the usual vfork, closefrom(3), exec would wipe the
 * parent's records; the pid tells it, kept at init and in a fork's
 * child).  A plain close in a vfork child still forgets its number. */
static int table_ours(unsigned flags) {
    return !(flags & CLOSE_RANGE_UNSHARE) &&
           (pid_t)syscall(SYS_getpid) == __atomic_load_n(&hk_pid, __ATOMIC_RELAXED);
}
EXPORT int close_range(unsigned first, unsigned last, int flags) {
    int (*f)(unsigned, unsigned, int) = LIBC(close_range);
    unsigned known = CLOSE_RANGE_UNSHARE | CLOSE_RANGE_CLOEXEC;
    if (first <= last && !((unsigned)flags & ~known) && !(flags & CLOSE_RANGE_CLOEXEC) &&
        table_ours((unsigned)flags))
        fd_gone_range(first, last);
    return f ? f(first, last, flags) : (int)syscall(SYS_close_range, first, last, flags);
}
EXPORT void closefrom(int low) {
    unsigned lo = low < 0 ? 0 : (unsigned)low;
    void (*f)(int) = LIBC(closefrom);
    if (table_ours(0)) fd_gone_range(lo, ~0U);
    if (f) f(low);                                  /* (closes them all, or aborts) */
    else syscall(SYS_close_range, lo, ~0U, 0);
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

/* New descriptors of kinds that are no file: what was known of a number
 * glibc closed inside itself (fclose, ...) must not outlive it. */
EXPORT int pipe2(int fds[2], int flags) {
    int r = LIBC(pipe2)(fds, flags);
    if (r == 0) fd_fresh(fds[0], flags & O_NONBLOCK, 1), fd_fresh(fds[1], flags & O_NONBLOCK, 1);
    return r;
}
EXPORT int pipe(int fds[2]) { return pipe2(fds, 0); }
EXPORT int socketpair(int domain, int type, int proto, int sv[2]) {
    int r = LIBC(socketpair)(domain, type, proto, sv);
    if (r == 0) fd_fresh(sv[0], type & SOCK_NONBLOCK, 1), fd_fresh(sv[1], type & SOCK_NONBLOCK, 1);
    return r;
}
EXPORT int eventfd(unsigned v, int flags) {
    int r = LIBC(eventfd)(v, flags);
    if (r >= 0) fd_fresh(r, flags & O_NONBLOCK, 1);
    return r;
}
EXPORT int epoll_create1(int flags) {
    int r = LIBC(epoll_create1)(flags);
    if (r >= 0) fd_fresh(r, 0, 1);
    return r;
}
EXPORT int epoll_create(int size) {
    if (size <= 0) { errno = EINVAL; return -1; }
    return epoll_create1(0);
}
/* (the copy shares the file and its O_NONBLOCK: fd_dup) */
EXPORT int dup(int fd) {
    int r = LIBC(dup)(fd);
    if (r >= 0) fd_dup(fd, r);
    return r;
}

EXPORT int setsockopt(int fd, int level, int name, const void* v, socklen_t l) {
    if (HK_CHECKED()) hk_mem(v, l, 0);
    int r = LIBC(setsockopt)(fd, level, name, v, l);
    hk_fd_t* e;
    if (r != 0 || level != SOL_SOCKET || (e = fd_entry(fd)) == NULL) return r;
    int64_t sec, usec;          /* as the kernel took them (it checked usec) */
    if ((name == SO_RCVTIMEO_OLD || name == SO_SNDTIMEO_OLD) && l >= sizeof(struct timeval)) {
        const struct timeval* tv = v;
        sec = tv->tv_sec, usec = tv->tv_usec;
    } else if ((name == SO_RCVTIMEO_NEW || name == SO_SNDTIMEO_NEW) && l >= 2 * sizeof(int64_t)) {
        memcpy(&sec, v, sizeof sec);            /* struct __kernel_sock_timeval */
        memcpy(&usec, (const char*)v + sizeof sec, sizeof usec);
    } else {
        return r;
    }
    if (!(fd_flags(e) & F_TMO)) tmo_load(fd, e);    /* (the other one) */
    /* the kernel's reading: a negative time is no wait at all (a
     * non-blocking call's EAGAIN), 0 is none, and so is one of more than
     * a century here (the kernel's bound is further: jiffies) */
    int64_t ns = sec < 0                                      ? -1
                 : sec >= ((int64_t)1 << 62) / 1000000000     ? 0
                                                              : sec * 1000000000 + usec * 1000;
    int rcv = name == SO_RCVTIMEO_OLD || name == SO_RCVTIMEO_NEW;
    __atomic_store_n(rcv ? &e->rcv_ns : &e->snd_ns, ns, __ATOMIC_RELAXED);
    if (fd_flags(e) & F_SHARED)                             /* (the other numbers) */
        __atomic_fetch_add(&tmo_gen, 1, __ATOMIC_RELEASE);
    return r;
}

/* ------------------------------------------------------------------------ */
/* Flags                                                                    */
/* ------------------------------------------------------------------------ */

/* F_SETLKW and its siblings in a co: the lock taken without waiting
 * (F_SETLK), and while another holds it, tried again after a sleep of 1
 * ms, doubled up to 16 ms: the co parks, the thread runs the others.  (So
 * the kernel's deadlock check, EDEADLK, is not made; a cancel ends the
 * wait with ECANCELED.) */
static int co_lock_wait(int fd, int cmd, void* arg) {
    int64_t nap = 1000000;
    for (;;) {
        int r = LIBC(fcntl)(fd, cmd, arg);
        if (r != -1 || (errno != EAGAIN && errno != EACCES)) return r;
        int s = aco_rt_sleep(nap);
        if (s < 0) {
            errno = -s;
            return -1;
        }
        if (nap < 16000000) nap *= 2;
    }
}

static int hook_fcntl(int fd, int cmd, void* arg) {
    if (in_co()) {
        if (cmd == F_SETLKW) return co_lock_wait(fd, F_SETLK, arg);
        if (cmd == F_OFD_SETLKW) return co_lock_wait(fd, F_OFD_SETLK, arg);
#if F_SETLKW64 != F_SETLKW
        if (cmd == F_SETLKW64) return co_lock_wait(fd, F_SETLK64, arg);
#endif
    }
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
            /* keep ours, where the runtime set it (a flag a co's calls
             * never set would stay on the file: unhooked calls, stdio and
             * a child after exec would find it non-blocking) */
            if (fd_flags(e) & F_RT_NB) fl |= O_NONBLOCK;
        }
        return LIBC(fcntl)(fd, F_SETFL, fl);
    }
    int r = LIBC(fcntl)(fd, cmd, arg);
    if (r >= 0 && (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC)) fd_dup(fd, r);
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

/* Could the kernel read (wr 0) or write the n bytes (n >= 4) at p?
 * Memory a call's argument points to that the kernel would refuse
 * (EFAULT) must not fault in the hook that looks at it first.  Asked of
 * the kernel, once a page (a page is readable or writable whole or not at
 * all): sched_setparam(2) of no process copies its 4 bytes in first, and
 * then says ESRCH; sched_getparam(2) of the caller writes its priority
 * there (so only for memory the hook then writes whole). */
static int hk_can(const void* p, size_t n, int wr) {
    if (p == NULL) return 0;    /* (the calls say EINVAL there, not EFAULT) */
    int err = errno, ok = 1;
    uintptr_t q = (uintptr_t)p, last = q + n - 4;
    for (;;) {
        long r = wr ? syscall(SYS_sched_getparam, 0L, q) : syscall(SYS_sched_setparam, (long)INT_MAX, q);
        if (r < 0 && errno == EFAULT) { ok = 0; break; }
        uintptr_t next = (q | 4095) + 1;        /* (pages: 4 KiB or a multiple) */
        if (q == last || next >= last + 4) break;
        q = next < last ? next : last;
    }
    errno = err;
    return ok;
}
static int hk_readable(const void* p, size_t n) { return hk_can(p, n, 0); }

/* hk_can for memory a hook reads or writes itself in a co (a time, a
 * mask, select's sets, an offset), on a path taken at every call: the
 * running co's stack, where a program keeps those, may be read and
 * written whole while the co runs (its share stack is mapped so, and in
 * checked mode its window is open), so there no system call is made. */
static int hk_ok(const void* p, size_t n, int wr) {
    if (n == 0) return 1;
    const aco_t* co = aco_gtls_co;
    const aco_share_stack_t* st = co ? co->share_stack : NULL;
    uintptr_t a = (uintptr_t)p, lo = st ? (uintptr_t)st->ptr : 0;
    if (st && a >= lo && n <= st->sz && a - lo <= st->sz - n) return 1;
    return hk_can(p, n, wr);
}
/* The bytes of a signal mask the kernel reads (glibc's __NSIG_BYTES). */
#define HK_SIGSET_BYTES ((_NSIG - 1) / 8)

EXPORT int ioctl(int fd, unsigned long req, ...) {
    va_list ap;
    va_start(ap, req);
    void* arg = va_arg(ap, void*);
    va_end(ap);
    /* FIONBIO's int is read once the kernel could read it (one it cannot:
     * its EFAULT, or EBADF, and nothing kept); where the runtime set
     * O_NONBLOCK, a clear must not reach the kernel, so it is asked first */
    if (req == FIONBIO && arg) {
        hk_fd_t* e = fd_entry(fd);
        if (e && (fd_flags(e) & F_RT_NB) && hk_readable(arg, sizeof(int)) && !*(const int*)arg) {
            fd_on(e, F_SEEN);
            fd_off(e, F_USER_NB);
            return 0;                   /* keep ours (F_SETFL's) */
        }
        int r = LIBC(ioctl)(fd, req, arg);
        if (r == 0 && e) {
            if (*(const int*)arg) fd_on(e, F_SEEN | F_USER_NB);
            else { fd_on(e, F_SEEN); fd_off(e, F_USER_NB); }
        }
        return r;
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

/* A wait's time and signal mask in a co, as the kernel takes them first:
 * one it cannot read is EFAULT, a time out of range EINVAL (the mask is
 * read, never applied: Waits on many descriptors, above).  The deadline,
 * or -2 with errno. */
static int64_t wait_args(const struct timespec* t, const sigset_t* m) {
    if (t && !hk_ok(t, sizeof(*t), 0)) { errno = EFAULT; return -2; }
    int64_t dl = ts_deadline(t);
    if (dl == -2) { errno = EINVAL; return -2; }
    if (m && !hk_ok(m, HK_SIGSET_BYTES, 0)) { errno = EFAULT; return -2; }
    return dl;
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
    if (HK_PROBE(fds)) return 0;
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
    int64_t dl = wait_args(t, m);
    if (dl == -2) return -1;
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
static void fdset_zero(fd_set* s, size_t len) {
    if (s) memset(s, 0, len);
}

/* Linux's select reads and writes no bit past its descriptor table
 * (max_fds, /proc/self/status's FDSize): a program may pass nfds past
 * its sets (FD_SETSIZE, INT_MAX) where its table is smaller.  So nfds
 * past FD_SETSIZE is cut to the table's size (and one below it where a
 * bit lies past the table: co_select), looked up again only when a
 * larger nfds comes (a table never shrinks; a fork's child's may be
 * smaller: sel_forked).  No /proc: nfds as it is.  Where the table is
 * larger than the sets, the kernel's copy of them fails: so each set is
 * first looked at as the kernel would copy it (co_select). */
static int sel_table;       /* (atomic) the size last seen, 0: not yet */
static void sel_forked(void) { __atomic_store_n(&sel_table, 0, __ATOMIC_RELAXED); }
/* The table's size now (kept in sel_table), or 0: not known. */
static int sel_table_now(void) {
    int fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/status", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    char b[1024];       /* (FDSize is the tenth line or so) */
    ssize_t n, got = 0;
    while (got < (ssize_t)sizeof(b) - 1 && (n = rt_sys_read(fd, b + got, sizeof(b) - 1 - (size_t)got)) > 0)
        got += n;
    rt_sys_close(fd);
    b[got > 0 ? got : 0] = '\0';
    const char* f = strstr(b, "\nFDSize:");
    if (f == NULL) return 0;
    long v = strtol(f + 8, NULL, 10);
    if (v <= 0 || v > INT_MAX) return 0;
    __atomic_store_n(&sel_table, (int)v, __ATOMIC_RELAXED);
    return (int)v;
}
static int sel_clamp(int nfds) {
    int t = __atomic_load_n(&sel_table, __ATOMIC_RELAXED);
    if (nfds <= FD_SETSIZE || (t && nfds <= t)) return nfds;
    t = sel_table_now();
    return t && nfds > t ? t : nfds;
}

/* The bytes of select's sets the kernel copies for nfds (whole longs). */
static size_t sel_bytes(int nfds) {
    return ((size_t)nfds + 8 * sizeof(long) - 1) / (8 * sizeof(long)) * sizeof(long);
}
/* Could the kernel read (wr 0) or write len bytes of each set given? */
static int sel_sets_ok(fd_set* rd, fd_set* wr, fd_set* ex, size_t len, int w) {
    return (!rd || hk_ok(rd, len, w)) && (!wr || hk_ok(wr, len, w)) && (!ex || hk_ok(ex, len, w));
}

static int co_select(int nfds, fd_set* rd, fd_set* wr, fd_set* ex, int64_t dl) {
    if (nfds < 0) { errno = EINVAL; return -1; }
    nfds = sel_clamp(nfds);
    /* The kernel copies whole longs of each set in, and out after the
     * wait: EFAULT where it cannot.  It copies no bit past its table, up
     * to FD_SETSIZE too: a set that cannot be read whole is looked at
     * again for the table's size (/proc, on this path alone). */
    size_t len = sel_bytes(nfds);
    if (!sel_sets_ok(rd, wr, ex, len, 0)) {
        int t = sel_table_now();
        if (t && nfds > t) nfds = t, len = sel_bytes(nfds);
        if (!sel_sets_ok(rd, wr, ex, len, 0)) { errno = EFAULT; return -1; }
    }
    enum { SMALL = 32 };
    struct pollfd small[SMALL], *p = small;
    int n = 0, top = -1;
    for (int fd = 0; fd < nfds; fd++)
        if (fdset_has(rd, fd) || fdset_has(wr, fd) || fdset_has(ex, fd)) n++, top = fd;
    /* Below FD_SETSIZE too, the kernel cuts nfds to its table: a bit past
     * it is no descriptor (no EBADF), and is neither read nor written
     * back.  Looked up (/proc) only for a bit at or past the size last
     * seen: a number that is open lies below the table's end. */
    int t = __atomic_load_n(&sel_table, __ATOMIC_RELAXED);
    if (top >= 0 && (t == 0 || top >= t) && (t = sel_table_now()) != 0 && nfds > t) {
        nfds = t;
        len = sel_bytes(nfds);
        n = 0;
        for (int fd = 0; fd < nfds; fd++)
            n += fdset_has(rd, fd) || fdset_has(wr, fd) || fdset_has(ex, fd);
    }
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
    if ((r >= 0 || r == -ETIMEDOUT) && !sel_sets_ok(rd, wr, ex, len, 1)) r = -EFAULT;
    if (r >= 0 || r == -ETIMEDOUT) {
        int cnt = 0;
        fdset_zero(rd, len);
        fdset_zero(wr, len);
        fdset_zero(ex, len);
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
        if (!hk_ok(tv, sizeof(*tv), 0)) { errno = EFAULT; return -1; }
        /* (Linux takes tv_usec past a second: it carries into seconds) */
        if (tv->tv_sec < 0 || tv->tv_usec < 0) { errno = EINVAL; return -1; }
        struct timespec t = {tv->tv_sec + tv->tv_usec / 1000000, tv->tv_usec % 1000000 * 1000};
        dl = t.tv_sec < tv->tv_sec ? -1 : ts_deadline(&t);
    }
    int r = co_select(nfds, rd, wr, ex, dl);
    /* Linux leaves the time not slept, where it can write it (a time it
     * may only read stays as it was: the answer stands) */
    if (tv && dl > 0 && hk_ok(tv, sizeof(*tv), 1)) {
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
    int64_t dl = wait_args(t, m);
    if (dl == -2) return -1;
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
    if (wait_args(NULL, m) == -2) return -1;
    return co_epoll_wait(epfd, ev, max, ms_deadline(timeout));
}

EXPORT int epoll_pwait2(int epfd, struct epoll_event* ev, int max, const struct timespec* t,
                        const sigset_t* m) {
    if (HK_CHECKED()) {
        if (max > 0) hk_mem(ev, (size_t)max * sizeof(*ev), 1);
        if (t) hk_mem(t, sizeof(*t), 0);
    }
    if (!in_co()) return LIBC(epoll_pwait2)(epfd, ev, max, t, m);
    int64_t dl = wait_args(t, m);
    if (dl == -2) return -1;
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
 * to sleep: a loop that sleeps the rest again ends at once.  A time the
 * kernel cannot read (NULL too) is its EFAULT, and so is a *rem it
 * cannot write once the sleep ended early (the kernel writes it then
 * alone). */
EXPORT int nanosleep(const struct timespec* req, struct timespec* rem) {
    if (HK_CHECKED()) {
        hk_mem(req, sizeof(*req), 0);
        if (rem) hk_mem(rem, sizeof(*rem), 1);
    }
    if (!in_co()) return LIBC(nanosleep)(req, rem);
    if (!hk_ok(req, sizeof(*req), 0)) { errno = EFAULT; return -1; }
    int64_t dl = ts_deadline(req);
    if (dl == -2) { errno = EINVAL; return -1; }
    if (co_sleep_until(dl) == 0) return 0;
    if (rem && !hk_ok(rem, sizeof(*rem), 1)) { errno = EFAULT; return -1; }
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
    if (!hk_ok(req, sizeof(*req), 0)) return EFAULT;
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
    if (rem && !(flags & TIMER_ABSTIME)) {
        if (!hk_ok(rem, sizeof(*rem), 1)) return EFAULT;
        rem->tv_sec = 0, rem->tv_nsec = 0;
    }
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
/* Files and the rest of the Linux calls                                    */
/* ------------------------------------------------------------------------ */

/* In a co, a file call is the runtime's (aco_rt.h, "Files, directories,
 * and the rest of the Linux calls"): the co parks while io_uring or a
 * helper thread does it.  Where the runtime cannot take the call (no
 * memory for its record, or the helper queue full: -ENOMEM, -EAGAIN, an
 * error the calls below never give otherwise) it is done here, on the
 * thread, as without the hooks.  No deadline: a file call has no socket
 * timeout. */
static int runtime_declined(long r) { return r == -ENOMEM || r == -EAGAIN; }

/* pread(2)/pwrite(2)/preadv2(2)/pwritev2(2) of a file in a co (off -1:
 * the file position; flags RWF_*). */
static ssize_t file_rw(int write, int fd, const struct iovec* iov, int cnt, int64_t off,
                       int flags) {
    ssize_t r = write ? aco_rt_pwritev(fd, iov, cnt, off, flags, -1)
                      : aco_rt_preadv(fd, iov, cnt, off, flags, -1);
    if (runtime_declined(r) && !(r == -EAGAIN && (flags & RWF_NOWAIT)))
        return write ? LIBC(pwritev2)(fd, iov, cnt, (off_t)off, flags)
                     : LIBC(preadv2)(fd, iov, cnt, (off_t)off, flags);
    return ret(r);
}

/* A positioned call on fd in a co: the runtime's on a file, and on
 * anything else that the program has not made non-blocking (the runtime's
 * readiness way there); else 0: libc's. */
static int co_positioned(int fd) {
    return in_co() && (fd_is_file(fd) || co_entry(fd) != NULL);
}

HK_INLINE ssize_t hk_pread(int fd, void* buf, size_t n, int64_t off) {
    if (HK_CHECKED()) hk_mem(buf, n, 1);
    if (co_positioned(fd)) {
        if (off < 0) { errno = EINVAL; return -1; }     /* (-1 is preadv2's) */
        return file_rw(0, fd, &(struct iovec){buf, n}, 1, off, 0);
    }
    return LIBC(pread64)(fd, buf, n, (off64_t)off);
}

HK_INLINE ssize_t hk_pwrite(int fd, const void* buf, size_t n, int64_t off) {
    if (HK_CHECKED()) hk_mem(buf, n, 0);
    if (co_positioned(fd)) {
        if (off < 0) { errno = EINVAL; return -1; }
        return file_rw(1, fd, &(struct iovec){(void*)buf, n}, 1, off, 0);
    }
    return LIBC(pwrite64)(fd, buf, n, (off64_t)off);
}

HK_INLINE ssize_t hk_preadv(int fd, const struct iovec* iov, int cnt, int64_t off, int flags,
                            int v2) {
    if (HK_CHECKED()) hk_iov(iov, cnt, 1);
    if (co_positioned(fd)) {
        if (off < (v2 ? -1 : 0)) { errno = EINVAL; return -1; }
        return file_rw(0, fd, iov, cnt, off, flags);
    }
    if (off < (v2 ? -1 : 0)) { errno = EINVAL; return -1; }   /* (preadv's own -1: EINVAL) */
    return LIBC(preadv2)(fd, iov, cnt, (off_t)off, flags);
}

HK_INLINE ssize_t hk_pwritev(int fd, const struct iovec* iov, int cnt, int64_t off, int flags,
                             int v2) {
    if (HK_CHECKED()) hk_iov(iov, cnt, 0);
    if (co_positioned(fd)) {
        if (off < (v2 ? -1 : 0)) { errno = EINVAL; return -1; }
        return file_rw(1, fd, iov, cnt, off, flags);
    }
    if (off < (v2 ? -1 : 0)) { errno = EINVAL; return -1; }
    return LIBC(pwritev2)(fd, iov, cnt, (off_t)off, flags);
}

EXPORT ssize_t pread(int fd, void* buf, size_t n, off_t off) { return hk_pread(fd, buf, n, off); }
EXPORT ssize_t pread64(int fd, void* buf, size_t n, off64_t off) { return hk_pread(fd, buf, n, off); }
EXPORT ssize_t pwrite(int fd, const void* buf, size_t n, off_t off) {
    return hk_pwrite(fd, buf, n, off);
}
EXPORT ssize_t pwrite64(int fd, const void* buf, size_t n, off64_t off) {
    return hk_pwrite(fd, buf, n, off);
}
EXPORT ssize_t preadv(int fd, const struct iovec* iov, int cnt, off_t off) {
    return hk_preadv(fd, iov, cnt, off, 0, 0);
}
EXPORT ssize_t preadv64(int fd, const struct iovec* iov, int cnt, off64_t off) {
    return hk_preadv(fd, iov, cnt, off, 0, 0);
}
EXPORT ssize_t preadv2(int fd, const struct iovec* iov, int cnt, off_t off, int flags) {
    return hk_preadv(fd, iov, cnt, off, flags, 1);
}
EXPORT ssize_t preadv64v2(int fd, const struct iovec* iov, int cnt, off64_t off, int flags) {
    return hk_preadv(fd, iov, cnt, off, flags, 1);
}
EXPORT ssize_t pwritev(int fd, const struct iovec* iov, int cnt, off_t off) {
    return hk_pwritev(fd, iov, cnt, off, 0, 0);
}
EXPORT ssize_t pwritev64(int fd, const struct iovec* iov, int cnt, off64_t off) {
    return hk_pwritev(fd, iov, cnt, off, 0, 0);
}
EXPORT ssize_t pwritev2(int fd, const struct iovec* iov, int cnt, off_t off, int flags) {
    return hk_pwritev(fd, iov, cnt, off, flags, 1);
}
EXPORT ssize_t pwritev64v2(int fd, const struct iovec* iov, int cnt, off64_t off, int flags) {
    return hk_pwritev(fd, iov, cnt, off, flags, 1);
}

/* open and its names.  The mode is read only where open(2) reads it. */
static int hk_openat(int dirfd, const char* path, int flags, mode_t mode) {
    if (HK_CHECKED() && path) hk_mem(path, strnlen(path, PATH_MAX) + 1, 0);
    int r;
    if (in_co() && path) {
        r = aco_rt_openat(dirfd, path, flags, mode, -1);
        if (runtime_declined(r)) r = LIBC(openat)(dirfd, path, flags, mode);
        else r = (int)ret(r);
    } else {
        r = LIBC(openat)(dirfd, path, flags, mode);
    }
    if (r >= 0) fd_fresh(r, flags & O_NONBLOCK, 0);
    return r;
}

#define NEEDS_MODE(flags) (((flags) & O_CREAT) || ((flags) & O_TMPFILE) == O_TMPFILE)
#define OPEN_MODE(flags, last)                                              \
    mode_t mode = 0;                                                        \
    if (NEEDS_MODE(flags)) {                                                \
        va_list ap;                                                         \
        va_start(ap, last);                                                 \
        mode = (mode_t)va_arg(ap, int);                                     \
        va_end(ap);                                                         \
    }

EXPORT int open(const char* path, int flags, ...) {
    OPEN_MODE(flags, flags);
    return hk_openat(AT_FDCWD, path, flags, mode);
}
EXPORT int open64(const char* path, int flags, ...) {
    OPEN_MODE(flags, flags);
    return hk_openat(AT_FDCWD, path, flags | O_LARGEFILE, mode);
}
EXPORT int openat(int dirfd, const char* path, int flags, ...) {
    OPEN_MODE(flags, flags);
    return hk_openat(dirfd, path, flags, mode);
}
EXPORT int openat64(int dirfd, const char* path, int flags, ...) {
    OPEN_MODE(flags, flags);
    return hk_openat(dirfd, path, flags | O_LARGEFILE, mode);
}
EXPORT int creat(const char* path, mode_t mode) {
    return hk_openat(AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC, mode);
}
EXPORT int creat64(const char* path, mode_t mode) {
    return hk_openat(AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC | O_LARGEFILE, mode);
}

/* fsync and the others: in a co (and when ok), the runtime's call, or
 * libc's where it declined. */
#define FILE_CALL(ok, rt_call, libc_call)                                   \
    do {                                                                    \
        if (in_co() && (ok)) {                                              \
            long r_ = (rt_call);                                            \
            if (!runtime_declined(r_)) return (int)ret(r_);                 \
        }                                                                   \
        return (libc_call);                                                 \
    } while (0)

EXPORT int fsync(int fd) { FILE_CALL(1, aco_rt_fsync(fd, -1), LIBC(fsync)(fd)); }
EXPORT int fdatasync(int fd) { FILE_CALL(1, aco_rt_fdatasync(fd, -1), LIBC(fdatasync)(fd)); }

#if UINTPTR_MAX > 0xffffffffu
/* (On 32-bit ABIs the runtime reaches ftruncate64, fallocate64 and
 * sendfile64 through libc itself: those three are not hooked there.) */
EXPORT int ftruncate(int fd, off_t len) {
    FILE_CALL(1, aco_rt_ftruncate(fd, len, -1), LIBC(ftruncate64)(fd, len));
}
EXPORT int ftruncate64(int fd, off64_t len) {
    FILE_CALL(1, aco_rt_ftruncate(fd, len, -1), LIBC(ftruncate64)(fd, len));
}
EXPORT int fallocate(int fd, int mode, off_t off, off_t len) {
    FILE_CALL(1, aco_rt_fallocate(fd, mode, off, len, -1), LIBC(fallocate64)(fd, mode, off, len));
}
EXPORT int fallocate64(int fd, int mode, off64_t off, off64_t len) {
    FILE_CALL(1, aco_rt_fallocate(fd, mode, off, len, -1), LIBC(fallocate64)(fd, mode, off, len));
}
#endif

HK_INLINE void hk_path(const char* p) {
    if (p) hk_mem(p, strnlen(p, PATH_MAX) + 1, 0);
}

EXPORT int unlinkat(int dirfd, const char* path, int flags) {
    if (HK_CHECKED()) hk_path(path);
    FILE_CALL(1, aco_rt_unlinkat(dirfd, path, flags, -1), LIBC(unlinkat)(dirfd, path, flags));
}
EXPORT int unlink(const char* path) { return unlinkat(AT_FDCWD, path, 0); }
EXPORT int rmdir(const char* path) { return unlinkat(AT_FDCWD, path, AT_REMOVEDIR); }

EXPORT int renameat2(int od, const char* a, int nd, const char* b, unsigned flags) {
    if (HK_CHECKED()) hk_path(a), hk_path(b);
    FILE_CALL(1, aco_rt_renameat2(od, a, nd, b, flags, -1), LIBC(renameat2)(od, a, nd, b, flags));
}
EXPORT int renameat(int od, const char* a, int nd, const char* b) {
    return renameat2(od, a, nd, b, 0);
}
EXPORT int rename(const char* a, const char* b) { return renameat2(AT_FDCWD, a, AT_FDCWD, b, 0); }

EXPORT int mkdirat(int dirfd, const char* path, mode_t mode) {
    if (HK_CHECKED()) hk_path(path);
    FILE_CALL(1, aco_rt_mkdirat(dirfd, path, mode, -1), LIBC(mkdirat)(dirfd, path, mode));
}
EXPORT int mkdir(const char* path, mode_t mode) { return mkdirat(AT_FDCWD, path, mode); }

/* The stat family.  In a co: statx(2) through the runtime, its answer
 * turned into the caller's struct (a field that does not fit: EOVERFLOW,
 * as fstatat(2) says on 32-bit ABIs).  fstat of a socket, pipe or terminal
 * is libc's, on the thread: no disk or server holds it up.  Outside cos,
 * libc's, or statx(2) the same way where this libc lacks the name (before
 * glibc 2.33, stat, fstat and lstat were __xstat and its siblings, hooked
 * below too). */
#define STAT_FROM_STATX(st, x)                                                      \
    do {                                                                            \
        memset((st), 0, sizeof(*(st)));                                             \
        (st)->st_dev = makedev((x)->stx_dev_major, (x)->stx_dev_minor);             \
        (st)->st_ino = (x)->stx_ino;                                                \
        (st)->st_mode = (x)->stx_mode;                                              \
        (st)->st_nlink = (x)->stx_nlink;                                            \
        (st)->st_uid = (x)->stx_uid;                                                \
        (st)->st_gid = (x)->stx_gid;                                                \
        (st)->st_rdev = makedev((x)->stx_rdev_major, (x)->stx_rdev_minor);          \
        (st)->st_size = (x)->stx_size;                                              \
        (st)->st_blksize = (x)->stx_blksize;                                        \
        (st)->st_blocks = (x)->stx_blocks;                                          \
        (st)->st_atim.tv_sec = (x)->stx_atime.tv_sec;                               \
        (st)->st_atim.tv_nsec = (x)->stx_atime.tv_nsec;                             \
        (st)->st_mtim.tv_sec = (x)->stx_mtime.tv_sec;                               \
        (st)->st_mtim.tv_nsec = (x)->stx_mtime.tv_nsec;                             \
        (st)->st_ctim.tv_sec = (x)->stx_ctime.tv_sec;                               \
        (st)->st_ctim.tv_nsec = (x)->stx_ctime.tv_nsec;                             \
        if ((uint64_t)(st)->st_ino != (x)->stx_ino ||                               \
            (uint64_t)(st)->st_size != (x)->stx_size ||                             \
            (uint64_t)(st)->st_blocks != (x)->stx_blocks ||                         \
            (int64_t)(st)->st_mtim.tv_sec != (x)->stx_mtime.tv_sec) {               \
            errno = EOVERFLOW;                                                      \
            return -1;                                                              \
        }                                                                           \
        return 0;                                                                   \
    } while (0)

static int stat_from(struct stat* st, const struct statx* x) { STAT_FROM_STATX(st, x); }
static int stat64_from(struct stat64* st, const struct statx* x) { STAT_FROM_STATX(st, x); }

/* statx(dirfd, path, flags) for the stat family in a co: 0 with *x, -1
 * and errno, or 1: libc's (outside cos, no path, a descriptor no disk
 * holds up, the runtime declined). */
static int co_statx(int dirfd, const char* path, int flags, unsigned mask, struct statx* x) {
    if (!in_co() || path == NULL) return 1;
    if ((flags & AT_EMPTY_PATH) && *path == '\0' && !(fd_kind(dirfd) & F_DISK)) return 1;
    int r = aco_rt_statx(dirfd, path, flags, mask, x, -1);
    if (runtime_declined(r)) return 1;
    return r < 0 ? (int)ret(r) : 0;
}

/* The body of a stat hook: buf is the caller's struct, from(buf, &x) its
 * conversion, libc_call libc's own (NULL fn: the system call instead). */
/* (fstatat(2) never triggers an automount: nor does statx(2) with
 * AT_NO_AUTOMOUNT, which glibc's own stat functions add too) */
#define STAT_BODY(from, fn, libc_args, dirfd, path, flags)                         \
    if (HK_CHECKED()) hk_mem(buf, sizeof(*buf), 1);                                 \
    struct statx x;                                                                 \
    int fl_ = (flags) | AT_NO_AUTOMOUNT;                                            \
    int r = co_statx((dirfd), (path), fl_, STATX_BASIC_STATS, &x);                  \
    if (r == 1) {                                                                   \
        if (LIBC(fn) != NULL) return LIBC(fn) libc_args;                            \
        r = (int)syscall(SYS_statx, (dirfd), (path), fl_, STATX_BASIC_STATS, &x);   \
    }                                                                               \
    return r < 0 ? r : from(buf, &x)

static int hk_stat(const char* p, struct stat* buf) {
    STAT_BODY(stat_from, stat, (p, buf), AT_FDCWD, p, 0);
}
static int hk_stat64(const char* p, struct stat64* buf) {
    STAT_BODY(stat64_from, stat64, (p, buf), AT_FDCWD, p, 0);
}
static int hk_lstat(const char* p, struct stat* buf) {
    STAT_BODY(stat_from, lstat, (p, buf), AT_FDCWD, p, AT_SYMLINK_NOFOLLOW);
}
static int hk_lstat64(const char* p, struct stat64* buf) {
    STAT_BODY(stat64_from, lstat64, (p, buf), AT_FDCWD, p, AT_SYMLINK_NOFOLLOW);
}
static int hk_fstat(int fd, struct stat* buf) {
    STAT_BODY(stat_from, fstat, (fd, buf), fd, "", AT_EMPTY_PATH);
}
static int hk_fstat64(int fd, struct stat64* buf) {
    STAT_BODY(stat64_from, fstat64, (fd, buf), fd, "", AT_EMPTY_PATH);
}
static int hk_fstatat(int dirfd, const char* p, struct stat* buf, int flags) {
    STAT_BODY(stat_from, fstatat, (dirfd, p, buf, flags), dirfd, p, flags);
}
static int hk_fstatat64(int dirfd, const char* p, struct stat64* buf, int flags) {
    STAT_BODY(stat64_from, fstatat64, (dirfd, p, buf, flags), dirfd, p, flags);
}

EXPORT int stat(const char* p, struct stat* b) { return hk_stat(p, b); }
EXPORT int stat64(const char* p, struct stat64* b) { return hk_stat64(p, b); }
EXPORT int lstat(const char* p, struct stat* b) { return hk_lstat(p, b); }
EXPORT int lstat64(const char* p, struct stat64* b) { return hk_lstat64(p, b); }
EXPORT int fstat(int fd, struct stat* b) { return hk_fstat(fd, b); }
EXPORT int fstat64(int fd, struct stat64* b) { return hk_fstat64(fd, b); }
EXPORT int fstatat(int d, const char* p, struct stat* b, int fl) { return hk_fstatat(d, p, b, fl); }
EXPORT int fstatat64(int d, const char* p, struct stat64* b, int fl) {
    return hk_fstatat64(d, p, b, fl);
}
/* (glibc before 2.33: its headers called these; ver is the struct's
 * version, the one struct stat of this ABI) */
EXPORT int __xstat(int ver, const char* p, struct stat* b) { (void)ver; return hk_stat(p, b); }
EXPORT int __xstat64(int ver, const char* p, struct stat64* b) { (void)ver; return hk_stat64(p, b); }
EXPORT int __lxstat(int ver, const char* p, struct stat* b) { (void)ver; return hk_lstat(p, b); }
EXPORT int __lxstat64(int ver, const char* p, struct stat64* b) { (void)ver; return hk_lstat64(p, b); }
EXPORT int __fxstat(int ver, int fd, struct stat* b) { (void)ver; return hk_fstat(fd, b); }
EXPORT int __fxstat64(int ver, int fd, struct stat64* b) { (void)ver; return hk_fstat64(fd, b); }
EXPORT int __fxstatat(int ver, int d, const char* p, struct stat* b, int fl) {
    (void)ver;
    return hk_fstatat(d, p, b, fl);
}
EXPORT int __fxstatat64(int ver, int d, const char* p, struct stat64* b, int fl) {
    (void)ver;
    return hk_fstatat64(d, p, b, fl);
}

EXPORT int statx(int dirfd, const char* path, int flags, unsigned mask, struct statx* buf) {
    if (HK_CHECKED()) {
        hk_path(path);
        hk_mem(buf, sizeof(*buf), 1);
    }
    int r = co_statx(dirfd, path, flags, mask, buf);
    if (r != 1) return r;
    if (LIBC(statx) != NULL) return LIBC(statx)(dirfd, path, flags, mask, buf);
    return (int)syscall(SYS_statx, dirfd, path, flags, mask, buf);
}

/* sendfile, splice, tee: the runtime's where it would wait for a socket,
 * a pipe or the disk; libc's for a descriptor the program made
 * non-blocking, or with SPLICE_F_NONBLOCK.  An offset the kernel cannot
 * read goes to it as it is: its error at once (it reads the offsets
 * before it moves a byte, or waits); one it cannot write back is EFAULT
 * after the copy, as the kernel's. */
EXPORT ssize_t sendfile(int out, int in, off_t* off, size_t n) {
    if (HK_CHECKED() && off) hk_mem(off, sizeof(*off), 1);
    if (fd_is_file(in) && co_positioned(out) &&     /* (a pipe's input: libc's) */
        (!off || hk_ok(off, sizeof(*off), 0))) {
        int64_t o = off ? *off : 0, dl = deadline_of(snd_of(out));
        ssize_t r = aco_rt_sendfile(out, in, off ? &o : NULL, n, dl);
        if (!runtime_declined(r)) {
            if (off && !hk_ok(off, sizeof(*off), 1)) { errno = EFAULT; return -1; }
            if (off) *off = (off_t)o;
            return ret_dl(r, dl);
        }
    }
    return LIBC(sendfile)(out, in, off, n);
}

#if UINTPTR_MAX > 0xffffffffu
EXPORT ssize_t sendfile64(int out, int in, off64_t* off, size_t n) {
    return sendfile(out, in, (off_t*)off, n);
}
#endif

EXPORT ssize_t splice(int in, loff_t* oin, int out, loff_t* oout, size_t len, unsigned flags) {
    if (HK_CHECKED()) {
        if (oin) hk_mem(oin, sizeof(*oin), 1);
        if (oout) hk_mem(oout, sizeof(*oout), 1);
    }
    if (!(flags & SPLICE_F_NONBLOCK) && co_positioned(in) && co_positioned(out) &&
        (!oin || hk_ok(oin, sizeof(*oin), 0)) && (!oout || hk_ok(oout, sizeof(*oout), 0))) {
        int64_t a = oin ? *oin : 0, b = oout ? *oout : 0;
        ssize_t r = aco_rt_splice(in, oin ? &a : NULL, out, oout ? &b : NULL, len, flags, -1);
        if (!runtime_declined(r)) {
            if (r >= 0 && ((oin && !hk_ok(oin, sizeof(*oin), 1)) || (oout && !hk_ok(oout, sizeof(*oout), 1)))) {
                errno = EFAULT;
                return -1;
            }
            if (r >= 0 && oin) *oin = a;
            if (r >= 0 && oout) *oout = b;
            return ret(r);
        }
    }
    return LIBC(splice)(in, oin, out, oout, len, flags);
}

EXPORT ssize_t tee(int in, int out, size_t len, unsigned flags) {
    if (!(flags & SPLICE_F_NONBLOCK) && co_positioned(in) && co_positioned(out)) {
        ssize_t r = aco_rt_tee(in, out, len, flags, -1);
        if (!runtime_declined(r)) return ret(r);
    }
    return LIBC(tee)(in, out, len, flags);
}

/* sendmsg and recvmsg: as send and recv (the socket timeouts, the
 * program's O_NONBLOCK, MSG_DONTWAIT). */
HK_INLINE void hk_msg(const struct msghdr* m, int wr) {
    if (m == NULL) return;
    hk_mem(m, sizeof(*m), wr);
    if (m->msg_name) hk_mem(m->msg_name, m->msg_namelen, wr);
    if (m->msg_control) hk_mem(m->msg_control, m->msg_controllen, wr);
    if (m->msg_iovlen <= IOV_MAX) hk_iov(m->msg_iov, (int)m->msg_iovlen, wr);
}

EXPORT ssize_t sendmsg(int fd, const struct msghdr* m, int flags) {
    if (HK_CHECKED()) hk_msg(m, 0);
    if (in_co() && m && !(flags & MSG_DONTWAIT) && co_entry(fd)) {
        int64_t dl = deadline_of(snd_of(fd));
        return ret_dl(aco_rt_sendmsg(fd, m, flags, dl), dl);
    }
    ssize_t r;
    while ((r = LIBC(sendmsg)(fd, m, flags)) < 0 && errno == EAGAIN && !(flags & MSG_DONTWAIT) &&
           block_outside(fd, POLLOUT, snd_of(fd))) {}
    return r;
}

/* The descriptors a recvmsg brought in (SCM_RIGHTS) are numbers the
 * kernel gave out anew: what was kept of each number (a file closed where
 * no hook saw it: syscall(2), inside glibc) is forgotten, as for a number
 * the hooks never saw made.  Read after a call that worked, as the kernel
 * wrote it back: msg_controllen is then the bytes it filled (all it wrote
 * there; none when it had nothing or no room), each header's cmsg_len
 * says its descriptors (fewer than sent under MSG_CTRUNC), none read past
 * the bytes filled. */
static void fds_received(const struct msghdr* m) {
    if (m->msg_control == NULL || m->msg_controllen < sizeof(struct cmsghdr)) return;
    const char* end = (const char*)m->msg_control + m->msg_controllen;
    for (struct cmsghdr* c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR((struct msghdr*)m, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS || c->cmsg_len < CMSG_LEN(0))
            continue;
        const unsigned char* d = CMSG_DATA(c);
        size_t len = c->cmsg_len - CMSG_LEN(0);
        if ((const char*)d > end) break;
        if (len > (size_t)(end - (const char*)d)) len = (size_t)(end - (const char*)d);
        for (size_t i = 0; i + sizeof(int) <= len; i += sizeof(int)) {
            int fd;
            memcpy(&fd, d + i, sizeof(fd));
            fd_gone(fd);
        }
    }
}

EXPORT ssize_t recvmsg(int fd, struct msghdr* m, int flags) {
    if (HK_CHECKED()) hk_msg(m, 1);
    ssize_t r;
    if (in_co() && m && !(flags & RECV_NOWAIT) && co_entry(fd)) {
        int64_t dl = deadline_of(rcv_of(fd));
        r = ret_dl(aco_rt_recvmsg(fd, m, flags, dl), dl);
    } else {
        while ((r = LIBC(recvmsg)(fd, m, flags)) < 0 && errno == EAGAIN &&
               !(flags & RECV_NOWAIT) && block_outside(fd, POLLIN, rcv_of(fd))) {}
    }
    if (r >= 0) fds_received(m);
    return r;
}

/* shutdown never waits; the runtime's also ends the reads its cos wait
 * for (SHUT_RD).  A cancelled co's is libc's (it is no wait). */
EXPORT int shutdown(int fd, int how) {
    if (in_co()) {
        int r = aco_rt_shutdown(fd, how, -1);
        if (r != -ECANCELED) return (int)ret(r);
    }
    return LIBC(shutdown)(fd, how);
}

/* ------------------------------------------------------------------------ */
/* Mutexes                                                                  */
/* ------------------------------------------------------------------------ */

/* A library that holds a pthread mutex across a call that now parks
 * (SQLite stats a file under the lock of its VFS) would stop the thread
 * for good when another co of the thread then locks it: the thread would
 * sleep in the kernel for a holder that can run only on it.  So in a co:
 * a mutex held by this thread (glibc's owner field says its id) is held
 * by another of its cos, and the co sleeps, 1 us doubled up to 1 ms, and
 * tries again while the others run (under aco_rt_cancel_shield: a lock
 * has no error to give a cancelled co); a mutex held by another thread is
 * waited for as libc waits (that thread goes on).  Which co holds a
 * recursive or error-checking mutex is kept per thread (a table that
 * grows), so that its holder may lock a recursive one again, and gets
 * EDEADLK for an error-checking one, while another co waits.  Not hooked:
 * pthread_mutex_timedlock and clocklock, pthread_cond_wait's relock, and
 * rwlocks and spinlocks (a co holding one across a park still stops the
 * thread for a co of it that wants it).  Outside cos: libc's. */
typedef struct {
    pthread_mutex_t* m;
    const aco_rt_co_t* co;
} mx_holder_t;
static HK_TLS mx_holder_t* mx_held;
static HK_TLS unsigned mx_cap;
static HK_TLS pid_t mx_tid;

/* (the child of a fork is another thread: its id is looked up anew) */
static void mx_forked(void) {
    __atomic_store_n(&hk_pid, (pid_t)syscall(SYS_getpid), __ATOMIC_RELAXED);
    mx_tid = 0;
    sel_forked();
}

static int mx_owned_here(const pthread_mutex_t* m) {
    if (mx_tid == 0) mx_tid = (pid_t)syscall(SYS_gettid);
    return __atomic_load_n(&m->__data.__owner, __ATOMIC_RELAXED) == mx_tid;
}
/* Recursive or error-checking: their holder is kept. */
static int mx_kept(const pthread_mutex_t* m) {
    int k = m->__data.__kind & 3;
    return k == PTHREAD_MUTEX_RECURSIVE_NP || k == PTHREAD_MUTEX_ERRORCHECK_NP;
}
static mx_holder_t* mx_find(const pthread_mutex_t* m) {
    for (unsigned i = 0; i < mx_cap; i++)
        if (mx_held[i].m == m) return &mx_held[i];
    return NULL;
}
/* Who holds m, this thread holding it: 0 nobody of this thread, 1 the
 * calling co, 2 another co. */
static int mx_who(pthread_mutex_t* m, const aco_rt_co_t* me) {
    if (!mx_owned_here(m)) return 0;
    if (!mx_kept(m)) return 2;
    mx_holder_t* h = mx_find(m);
    return h == NULL || h->co == me ? 1 : 2;   /* (not kept: no memory, taken as ours) */
}
static void mx_took(pthread_mutex_t* m, const aco_rt_co_t* me) {
    if (!mx_kept(m) || mx_find(m)) return;
    mx_holder_t* h = mx_find(NULL);
    if (h == NULL) {
        unsigned cap = mx_cap ? mx_cap * 2 : 16;
        mx_holder_t* n = realloc(mx_held, cap * sizeof(*n));
        if (n == NULL) return;
        memset(n + mx_cap, 0, (cap - mx_cap) * sizeof(*n));
        h = n + mx_cap;
        mx_held = n;
        mx_cap = cap;
    }
    h->m = m;
    h->co = me;
}

EXPORT int pthread_mutex_lock(pthread_mutex_t* m) {
    const aco_rt_co_t* me = aco_rt_self();
    if (me == NULL) return LIBC(mutex_lock)(m);
    int who = mx_who(m, me);
    if (who == 1 && (m->__data.__kind & 3) == PTHREAD_MUTEX_ERRORCHECK_NP) return EDEADLK;
    if (who == 2) {
        int was = aco_rt_cancel_shield(1);
        int64_t nap = 1000;
        do {
            if (aco_rt_sleep(nap) < 0) aco_rt_yield();     /* (no shield: no memory) */
            if (nap < 1000000) nap *= 2;
        } while (mx_who(m, me) == 2);
        if (was >= 0) aco_rt_cancel_shield(was);
    }
    int r = LIBC(mutex_lock)(m);
    if (r == 0) mx_took(m, me);
    return r;
}

EXPORT int pthread_mutex_trylock(pthread_mutex_t* m) {
    const aco_rt_co_t* me = aco_rt_self();
    if (me == NULL) return LIBC(mutex_trylock)(m);
    if (mx_who(m, me) == 2) return EBUSY;
    int r = LIBC(mutex_trylock)(m);
    if (r == 0) mx_took(m, me);
    return r;
}

/* A recursive or error-checking mutex that another co of this thread
 * holds is not the caller's to unlock: EPERM, as glibc says to another
 * thread. */
EXPORT int pthread_mutex_unlock(pthread_mutex_t* m) {
    if (mx_cap && mx_owned_here(m) && mx_kept(m)) {
        mx_holder_t* h = mx_find(m);
        if (h && h->co != aco_rt_self()) return EPERM;
        if (h && ((m->__data.__kind & 3) == PTHREAD_MUTEX_ERRORCHECK_NP || m->__data.__count == 1))
            h->m = NULL;
    }
    return LIBC(mutex_unlock)(m);
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

EXPORT ssize_t __pread_chk(int fd, void* buf, size_t n, off_t off, size_t buflen) {
    if (n > buflen) __chk_fail();
    return hk_pread(fd, buf, n, off);
}

EXPORT ssize_t __pread64_chk(int fd, void* buf, size_t n, off64_t off, size_t buflen) {
    if (n > buflen) __chk_fail();
    return hk_pread(fd, buf, n, off);
}

/* (open without a mode where O_CREAT or O_TMPFILE needs one: glibc's
 * message and abort, as its own __open_2) */
static int open_chk(int flags) {
    if (NEEDS_MODE(flags)) {
        static const char m[] = "*** invalid open call: O_CREAT or O_TMPFILE without mode ***: terminated\n";
        rt_sys_write(2, m, sizeof(m) - 1);
        abort();
    }
    return flags;
}
EXPORT int __open_2(const char* p, int flags) { return hk_openat(AT_FDCWD, p, open_chk(flags), 0); }
EXPORT int __open64_2(const char* p, int flags) {
    return hk_openat(AT_FDCWD, p, open_chk(flags) | O_LARGEFILE, 0);
}
EXPORT int __openat_2(int d, const char* p, int flags) { return hk_openat(d, p, open_chk(flags), 0); }
EXPORT int __openat64_2(int d, const char* p, int flags) {
    return hk_openat(d, p, open_chk(flags) | O_LARGEFILE, 0);
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

/* The probe's token, and how many probes reached these hooks on the
 * calling thread. */
EXPORT unsigned aco_rt_hook_probes_(const void** token) {
    *token = hk_token;
    return hk_probes;
}

/* The runtime's own call (not one of these hooks) made fd O_NONBLOCK
 * (ready.c): hidden as the hooks' own.  The flag was not set before, so
 * it is not the program's. */
EXPORT void aco_rt_hook_made_nonblock_(int fd) {
    hk_fd_t* e = fd_entry(fd);
    if (e) fd_on(e, F_SEEN | F_MADE_NB | F_RT_NB);
}

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
