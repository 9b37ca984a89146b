/* test_hook.c - the syscall hooks (rt/hook.c, linked into this program as
 * a user would link libaco_hook ahead of libc): outside cos every call is
 * libc's; in cos a call that would block parks the co and the others run;
 * the program never sees the O_NONBLOCK the runtime sets, and its own
 * O_NONBLOCK still means EAGAIN; SO_RCVTIMEO, poll and the sleeps time
 * out, never early; accept/connect through the hooks; a cancelled co's
 * blocking call fails; getaddrinfo in a co parks it (the lookup runs on a
 * helper thread); poll, ppoll, select, pselect and epoll_wait park once on
 * all their descriptors; a cancelled co's waits fail with ECANCELED at
 * once, a sleep it begins sleeps its time (no spin), a sleep a cancel ends
 * says EINTR with nothing left; the fortified names (__read_chk ...) keep
 * their size check; a number closed where close does not see it
 * (fclose, pclose, closedir, freopen, close_range, closefrom) keeps
 * nothing for its next file; memory the kernel would refuse where a hook
 * reads or writes it itself (times, masks, select's sets, offsets) is
 * EFAULT, as the system call's, never a fault.  The blocking calls here
 * are plain libc names.
 */
#define _GNU_SOURCE
#include "rt_test.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <time.h>

static int64_t now(void) { return aco_rt_now(); }
static void late_byte(void* arg);

/* ------------------------------------------------------------------------ */
/* Outside cos: libc                                                        */
/* ------------------------------------------------------------------------ */

static void outside(void) {
    int p[2];
    CHECK_EQ(pipe(p), 0);
    CHECK_EQ(write(p[1], "abc", 3), 3);
    char b[8];
    CHECK_EQ(read(p[0], b, sizeof(b)), 3);
    CHECK_EQ(fcntl(p[0], F_GETFL) & O_NONBLOCK, 0);
    struct pollfd pf = {p[0], POLLIN, 0};
    int64_t t0 = now();
    CHECK_EQ(poll(&pf, 1, 20), 0);
    CHECK_GE(now() - t0, 20 * MS);
    t0 = now();
    CHECK_EQ(usleep(10000), 0);
    CHECK_GE(now() - t0, 10 * MS);
    struct timespec ts = {0, 5000000};
    CHECK_EQ(nanosleep(&ts, NULL), 0);
    CHECK_EQ(fcntl(p[0], F_SETFL, O_NONBLOCK), 0);
    errno = 0;
    CHECK_EQ(read(p[0], b, sizeof(b)), -1);
    CHECK_EQ(errno, EAGAIN);
    close(p[0]);
    close(p[1]);
}

/* ------------------------------------------------------------------------ */
/* In cos                                                                   */
/* ------------------------------------------------------------------------ */

#define SLEEPERS 100
static int64_t sleep_t0;
static int slept_ok;

static void sleeper(void* arg) {
    int kind = (int)(intptr_t)arg % 3;
    int64_t t0 = now();
    if (kind == 0) CHECK_EQ(usleep(50000), 0);
    else if (kind == 1) { struct timespec ts = {0, 50000000}; CHECK_EQ(nanosleep(&ts, NULL), 0); }
    else CHECK_EQ(poll(NULL, 0, 50), 0);
    CHECK_GE(now() - t0, 50 * MS);      /* never early */
    slept_ok++;
}

static int pipe_fd[2];
static int reader_done, writer_saw_parked;

static void reader(void* arg) {
    (void)arg;
    char b[16];
    CHECK_EQ(read(pipe_fd[0], b, sizeof(b)), 5);   /* parks: the writer runs */
    CHECK_EQ(memcmp(b, "hello", 5), 0);
    reader_done = 1;
}

static void writer(void* arg) {
    (void)arg;
    aco_rt_stats_t st;
    aco_rt_stats(NULL, &st);
    writer_saw_parked = st.cos_parked > 0 && !reader_done;
    CHECK_EQ(write(pipe_fd[1], "hello", 5), 5);
}

static void flags_co(void* arg) {
    (void)arg;
    int p[2];
    CHECK_EQ(pipe(p), 0);
    /* a read that waits: the program sees no O_NONBLOCK */
    aco_rt_co_t* w = aco_rt_spawn(NULL, writer, NULL);
    pipe_fd[0] = p[0];
    pipe_fd[1] = p[1];
    char b[16];
    CHECK_EQ(aco_rt_detach(w), 0);
    CHECK_EQ(read(p[0], b, sizeof(b)), 5);
    CHECK_EQ(fcntl(p[0], F_GETFL) & O_NONBLOCK, 0);
    /* nor does the file: a pipe's tries take RWF_NOWAIT, each alone (the
     * open file is shared: stdio's own writes, a child's stdin) */
    CHECK_EQ((int)syscall(SYS_fcntl, p[0], F_GETFL, 0) & O_NONBLOCK, 0);
    /* the program's own O_NONBLOCK: EAGAIN, no parking */
    CHECK_EQ(fcntl(p[0], F_SETFL, O_NONBLOCK), 0);
    CHECK(fcntl(p[0], F_GETFL) & O_NONBLOCK);
    errno = 0;
    CHECK_EQ(read(p[0], b, sizeof(b)), -1);
    CHECK_EQ(errno, EAGAIN);
    CHECK_EQ(fcntl(p[0], F_SETFL, 0), 0);           /* blocking again */
    CHECK_EQ(fcntl(p[0], F_GETFL) & O_NONBLOCK, 0);
    int on = 1;
    CHECK_EQ(ioctl(p[0], FIONBIO, &on), 0);
    errno = 0;
    CHECK_EQ(read(p[0], b, sizeof(b)), -1);
    CHECK_EQ(errno, EAGAIN);
    on = 0;
    CHECK_EQ(ioctl(p[0], FIONBIO, &on), 0);
    CHECK_EQ(fcntl(p[0], F_GETFL) & O_NONBLOCK, 0);
    close(p[0]);
    close(p[1]);
}

/* ioctl(FIONBIO) with an int the kernel cannot read (a page no one may
 * read, or half of one): the kernel's EFAULT (its EBADF first, for a
 * number not open), and the flag left as it was, for the program and in
 * the kernel: a read in a co still parks.  (The hook once read the int
 * itself, before the kernel, and faulted.)  In a co and outside cos.
 * Not under memcheck, which reports the pointer handed to the kernel. */
#ifdef ACO_USE_VALGRIND
#define MEMCHECK 1
#else
#define MEMCHECK 0
#endif
static int fb_wfd;
static void fionbio_fault(void) {
    if (MEMCHECK) return;
    long pg = sysconf(_SC_PAGESIZE);
    char* m = mmap(NULL, 2 * (size_t)pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(m != MAP_FAILED);
    CHECK_EQ(mprotect(m + pg, (size_t)pg, PROT_NONE), 0);
    int sv[2];
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    char* bad[] = {m + pg, m + pg - 2};
    for (int i = 0; i < 2; i++) {
        errno = 0;
        CHECK_EQ(ioctl(sv[0], FIONBIO, bad[i]), -1);
        CHECK_EQ(errno, EFAULT);
    }
    int dead = dup(sv[0]);
    CHECK_GE(dead, 0);
    CHECK_EQ(close(dead), 0);
    errno = 0;
    CHECK_EQ(ioctl(dead, FIONBIO, bad[0]), -1);
    CHECK_EQ(errno, EBADF);
    CHECK_EQ(fcntl(sv[0], F_GETFL) & O_NONBLOCK, 0);
    CHECK_EQ((int)syscall(SYS_fcntl, sv[0], F_GETFL, 0) & O_NONBLOCK, 0);
    if (aco_rt_self()) {
        fb_wfd = sv[1];                 /* (not on this co's stack: checked mode) */
        aco_rt_co_t* w = aco_rt_spawn(NULL, late_byte, &fb_wfd);
        CHECK(w != NULL);
        char c;
        CHECK_EQ(read(sv[0], &c, 1), 1);
        CHECK_EQ(aco_rt_join(w, -1), 0);
    }
    close(sv[0]);
    close(sv[1]);
    CHECK_EQ(munmap(m, 2 * (size_t)pg), 0);
}
static void fionbio_fault_co(void* arg) {
    (void)arg;
    fionbio_fault();
}

static void timeouts_co(void* arg) {
    (void)arg;
    int sv[2];
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    struct timeval tv = {0, 30000};
    CHECK_EQ(setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
    char b[4];
    int64_t t0 = now();
    errno = 0;
    CHECK_EQ(recv(sv[0], b, sizeof(b), 0), -1);
    CHECK_EQ(errno, EAGAIN);
    CHECK_GE(now() - t0, 30 * MS);
    /* poll with a timeout, then with data */
    struct pollfd pf = {sv[0], POLLIN, 0};
    t0 = now();
    CHECK_EQ(poll(&pf, 1, 20), 0);
    CHECK_GE(now() - t0, 20 * MS);
    CHECK_EQ(send(sv[1], "x", 1, 0), 1);
    CHECK_EQ(poll(&pf, 1, 1000), 1);
    CHECK(pf.revents & POLLIN);
    CHECK_EQ(recv(sv[0], b, sizeof(b), 0), 1);
    /* two descriptors: the polling loop */
    struct pollfd two[2] = {{sv[0], POLLIN, 0}, {sv[1], POLLIN, 0}};
    t0 = now();
    CHECK_EQ(poll(two, 2, 15), 0);
    CHECK_GE(now() - t0, 15 * MS);
    close(sv[0]);
    close(sv[1]);
}

/* accept and connect through the hooks, a co each side */
static int lfd, port;

/* A blocking TCP socket listening on the loopback, its port in *port_out. */
static int listen_loopback(int* port_out) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK_GE(fd, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    CHECK_EQ(bind(fd, (struct sockaddr*)&a, sizeof(a)), 0);
    CHECK_EQ(listen(fd, 16), 0);
    CHECK_EQ(getsockname(fd, (struct sockaddr*)&a, &len), 0);
    *port_out = ntohs(a.sin_port);
    return fd;
}

static void server_co(void* arg) {
    (void)arg;
    int c = accept(lfd, NULL, NULL);
    CHECK_GE(c, 0);
    CHECK_EQ(fcntl(c, F_GETFL) & O_NONBLOCK, 0);
    char b[64];
    ssize_t n = read(c, b, sizeof(b));
    CHECK_EQ(n, 4);
    CHECK_EQ(write(c, b, (size_t)n), 4);
    close(c);
}

static void client_co(void* arg) {
    (void)arg;
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK_EQ(connect(s, (struct sockaddr*)&a, sizeof(a)), 0);
    /* blocking in the kernel too: calls the hooks do not take (recvmmsg,
     * stdio on fdopen) block as the program expects (it stayed O_NONBLOCK) */
    CHECK_EQ((int)syscall(SYS_fcntl, s, F_GETFL, 0) & O_NONBLOCK, 0);
    CHECK_EQ(write(s, "ping", 4), 4);
    char b[8];
    CHECK_EQ(read(s, b, sizeof(b)), 4);
    CHECK_EQ(memcmp(b, "ping", 4), 0);
    CHECK_EQ(read(s, b, sizeof(b)), 0);            /* the server closed */
    close(s);
}

/* connect(2)'s states as a blocking connect leaves them: refused, then a
 * try again on the same socket once the server is up connects (an
 * emulation that reads the error with SO_ERROR left the socket connecting:
 * ECONNABORTED every other try); a second connect says EISCONN (it said
 * 0); SO_SNDTIMEO passing says EINPROGRESS (it said EAGAIN). */
static int cs_sock;
static void cs_shutter(void* arg) {
    (void)arg;
    usleep(50000);
    CHECK_EQ(shutdown(cs_sock, SHUT_RDWR), 0);
}
static void connect_states_co(void* arg) {
    (void)arg;
    int p0, l0 = listen_loopback(&p0);
    close(l0);                          /* nobody there now */
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)p0)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK_GE(s, 0);
    errno = 0;
    CHECK_EQ(connect(s, (struct sockaddr*)&a, sizeof(a)), -1);
    CHECK_EQ(errno, ECONNREFUSED);
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    CHECK_EQ(setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)), 0);
    CHECK_EQ(bind(l, (struct sockaddr*)&a, sizeof(a)), 0);
    CHECK_EQ(listen(l, 4), 0);
    CHECK_EQ(connect(s, (struct sockaddr*)&a, sizeof(a)), 0);
    errno = 0;
    CHECK_EQ(connect(s, (struct sockaddr*)&a, sizeof(a)), -1);
    CHECK_EQ(errno, EISCONN);
    close(s);
    close(l);
    /* a listener whose queue is full drops SYNs: the connect waits */
    l = listen_loopback(&p0);
    CHECK_EQ(listen(l, 0), 0);
    a.sin_port = htons((uint16_t)p0);
    int fill[2];
    for (int i = 0; i < 2; i++) {
        fill[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        connect(fill[i], (struct sockaddr*)&a, sizeof(a));
    }
    usleep(20000);
    s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct timeval tv = {0, 100000};
    CHECK_EQ(setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)), 0);
    int64_t t0 = now();
    errno = 0;
    CHECK_EQ(connect(s, (struct sockaddr*)&a, sizeof(a)), -1);
    CHECK_EQ(errno, EINPROGRESS);
    CHECK_GE(now() - t0, 90 * MS);
    close(s);
    /* a connect another co aborts (shutdown) ends with the kernel's
     * ECONNRESET, not with a new attempt that waits on */
    cs_sock = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    aco_rt_co_t* sh = aco_rt_spawn(NULL, cs_shutter, NULL);
    CHECK(sh != NULL);
    t0 = now();
    errno = 0;
    CHECK_EQ(connect(cs_sock, (struct sockaddr*)&a, sizeof(a)), -1);
    CHECK_EQ(errno, ECONNRESET);
    CHECK_LT(now() - t0, 1000 * MS);
    CHECK_EQ(aco_rt_join(sh, -1), 0);
    close(cs_sock);
    close(fill[0]);
    close(fill[1]);
    close(l);
}

/* O_NONBLOCK set through one number and cleared through its dup: the open
 * file is blocking again, and a read on the first number waits for data,
 * its co parked (it went to libc, which blocked the thread: the writer, a
 * co of the same thread, never ran). */
static int dn_sv[2];
static void dn_writer(void* arg) {
    (void)arg;
    usleep(50000);
    CHECK_EQ(write(dn_sv[1], "x", 1), 1);
}
static void dup_cleared_nb_co(void* arg) {
    (void)arg;
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, dn_sv), 0);
    CHECK_EQ(fcntl(dn_sv[0], F_SETFL, O_NONBLOCK), 0);
    char c;
    errno = 0;
    CHECK_EQ(read(dn_sv[0], &c, 1), -1);         /* the program's flag */
    CHECK_EQ(errno, EAGAIN);
    int d = dup(dn_sv[0]);
    CHECK_GE(d, 0);
    CHECK_EQ(fcntl(d, F_SETFL, 0), 0);
    CHECK_EQ(fcntl(dn_sv[0], F_GETFL) & O_NONBLOCK, 0);
    aco_rt_co_t* w = aco_rt_spawn(NULL, dn_writer, NULL);
    CHECK(w != NULL);
    int64_t t0 = now();
    CHECK_EQ(read(dn_sv[0], &c, 1), 1);
    CHECK_GE(now() - t0, 40 * MS);
    CHECK_EQ(aco_rt_join(w, -1), 0);
    /* and set again through the dup: the first number says EAGAIN again */
    CHECK_EQ(fcntl(d, F_SETFL, O_NONBLOCK), 0);
    CHECK(fcntl(dn_sv[0], F_GETFL) & O_NONBLOCK);
    t0 = now();
    errno = 0;
    CHECK_EQ(read(dn_sv[0], &c, 1), -1);
    CHECK_EQ(errno, EAGAIN);
    CHECK_LT(now() - t0, 40 * MS);
    close(d);
    close(dn_sv[0]);
    close(dn_sv[1]);
}

/* A socket a co read from (the runtime's calls on it are non-blocking one
 * by one: no O_NONBLOCK set), made non-blocking by the program and then
 * blocking again, through F_SETFL or FIONBIO: the open file is blocking
 * again, for the calls the hooks do not take (recvmmsg waits its
 * SO_RCVTIMEO), stdio and a child after exec.  (The hooks once kept the
 * flag set underneath, as if the runtime had set it.) */
static void toggled_nb_co(void* arg) {
    (void)arg;
    for (int way = 0; way < 2; way++) {
        int sv[2];
        CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
        CHECK_EQ(write(sv[1], "x", 1), 1);
        char c;
        CHECK_EQ(read(sv[0], &c, 1), 1);
        if (way == 0) {
            CHECK_EQ(fcntl(sv[0], F_SETFL, O_NONBLOCK), 0);
            CHECK_EQ(fcntl(sv[0], F_SETFL, 0), 0);
        } else {
            int on = 1, off = 0;
            CHECK_EQ(ioctl(sv[0], FIONBIO, &on), 0);
            CHECK_EQ(ioctl(sv[0], FIONBIO, &off), 0);
        }
        CHECK_EQ(fcntl(sv[0], F_GETFL) & O_NONBLOCK, 0);
        CHECK_EQ((int)syscall(SYS_fcntl, sv[0], F_GETFL, 0) & O_NONBLOCK, 0);
        struct timeval tv = {0, 30000};
        CHECK_EQ(setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
        struct iovec v = {&c, 1};
        struct mmsghdr mm = {.msg_hdr = {.msg_iov = &v, .msg_iovlen = 1}};
        int64_t t0 = now();
        errno = 0;
        CHECK_EQ(recvmmsg(sv[0], &mm, 1, 0, NULL), -1);     /* not hooked: the kernel's */
        CHECK_EQ(errno, EAGAIN);
        CHECK_GE(now() - t0, 25 * MS);
        close(sv[0]);
        close(sv[1]);
    }
}

/* SO_RCVTIMEO is the socket's, not the number's: (a) set through one
 * number, it times out a read through a dup; (b) a socket passed in
 * (SCM_RIGHTS) brings its own; (c) a closed socket's does not stay with
 * its number for the next file there, made by a call the hooks do not
 * see (popen's pipe, here the system call).  Each read would wait for the
 * late byte (300 ms) where the kernel's says EAGAIN at 50 ms, or (c) the
 * other way round.  (The hooks once kept the timeouts per number, set
 * only by their own setsockopt, and close left them.)  Every such read
 * parks the co: the writer's co begins meanwhile. */
static int st_wfd, st_began;
static void st_late_byte(void* arg) {
    (void)arg;
    st_began = 1;
    usleep(300000);
    CHECK_EQ(write(st_wfd, "x", 1), 1);
}
static void st_read(int fd, int wfd, int want_timeout) {
    st_wfd = wfd;
    st_began = 0;
    aco_rt_co_t* w = aco_rt_spawn(NULL, st_late_byte, NULL);
    CHECK(w != NULL);
    char c;
    int64_t t0 = now();
    errno = 0;
    ssize_t r = read(fd, &c, 1);
    int64_t took = now() - t0;
    CHECK(st_began);                    /* (parked, not the thread asleep) */
    if (want_timeout) {
        CHECK_EQ(r, -1);
        CHECK_EQ(errno, EAGAIN);
        CHECK_GE(took, 45 * MS);
        CHECK_LT(took, 250 * MS);
    } else {
        CHECK_EQ(r, 1);
        CHECK_GE(took, 250 * MS);
    }
    CHECK_EQ(aco_rt_join(w, -1), 0);
    if (want_timeout) CHECK_EQ(read(fd, &c, 1), 1);        /* the late byte */
}
/* A non-blocking read: EAGAIN at once, though the late byte comes. */
static void st_nowait(int fd, int wfd) {
    st_wfd = wfd;
    aco_rt_co_t* w = aco_rt_spawn(NULL, st_late_byte, NULL);
    CHECK(w != NULL);
    char c;
    int64_t t0 = now();
    errno = 0;
    CHECK_EQ(read(fd, &c, 1), -1);
    CHECK_EQ(errno, EAGAIN);
    CHECK_LT(now() - t0, 250 * MS);
    CHECK_EQ(aco_rt_join(w, -1), 0);
}
static void shared_timeo_co(void* arg) {
    (void)arg;
    struct timeval tv = {0, 50000};
    int sv[2];
    /* (a) */
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    int d = dup(sv[0]);
    CHECK_GE(d, 0);
    CHECK_EQ(setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
    st_read(d, sv[1], 1);
    struct timeval none = {0, 0};
    CHECK_EQ(setsockopt(d, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof(none)), 0);
    st_read(sv[0], sv[1], 0);
    close(d);
    /* (b): sv[0] (its timeout set again) passed over another pair */
    CHECK_EQ(setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
    int carrier[2];
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, carrier), 0);
    union { char b[CMSG_SPACE(sizeof(int))]; struct cmsghdr align; } ctl;
    memset(&ctl, 0, sizeof(ctl));
    char one = 'f';
    struct iovec v = {&one, 1};
    struct msghdr m = {.msg_iov = &v, .msg_iovlen = 1, .msg_control = ctl.b,
                       .msg_controllen = sizeof(ctl.b)};
    struct cmsghdr* cm = CMSG_FIRSTHDR(&m);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &sv[0], sizeof(int));
    CHECK_EQ(sendmsg(carrier[0], &m, 0), 1);
    memset(&ctl, 0, sizeof(ctl));
    m.msg_controllen = sizeof(ctl.b);
    CHECK_EQ(recvmsg(carrier[1], &m, MSG_CMSG_CLOEXEC), 1);
    close(sv[0]);           /* (after: the number passed in is a new one) */
    cm = CMSG_FIRSTHDR(&m);
    CHECK(cm != NULL && cm->cmsg_type == SCM_RIGHTS);
    int got;
    memcpy(&got, CMSG_DATA(cm), sizeof(int));
    st_read(got, sv[1], 1);
    close(got);
    close(sv[1]);
    close(carrier[0]);
    close(carrier[1]);
    /* (c) */
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK_GE(s, 0);
    CHECK_EQ(setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
    CHECK_EQ(close(s), 0);
    int p[2];
    CHECK_EQ((int)syscall(SYS_pipe2, p, O_CLOEXEC), 0);
    CHECK_EQ(p[0], s);
    st_read(p[0], p[1], 0);
    close(p[0]);
    close(p[1]);
    /* (d) a timeout set through a dup, then the first number dup2'd over
     * a number whose kept values were fresh: the copy is read from the
     * kernel, not taken as it was kept for the first number (0) */
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    d = dup(sv[0]);
    CHECK_GE(d, 0);
    int o[2];
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, o), 0);
    int od = dup(o[0]);
    CHECK_GE(od, 0);
    CHECK_EQ(setsockopt(d, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
    CHECK_EQ(write(o[1], "y", 1), 1);
    char y;
    CHECK_EQ(read(o[0], &y, 1), 1);         /* (o[0]'s kept values fresh) */
    CHECK_EQ(dup2(sv[0], o[0]), o[0]);
    st_read(o[0], sv[1], 1);
    close(d);
    close(od);
    close(o[0]);
    close(o[1]);
    close(sv[0]);
    close(sv[1]);
}

/* fclose closes its number inside glibc (its own close, not the hooked
 * one): what the hooks kept of the number must not stay for the next
 * file there made by a call they do not see either, here a socket passed
 * in (SCM_RIGHTS).  (a) The old socket's SO_RCVTIMEO (50 ms): the new one
 * has none, and a read waits for the late byte (300 ms).  (b) The old
 * socket read in a co (so the runtime's to make non-blocking): the new
 * one the program made non-blocking shows O_NONBLOCK, and a read says
 * EAGAIN at once.  (The record stayed: EAGAIN at 50 ms; the flag hidden,
 * the read parked.) */
/* fd sent over carrier[0] and received from carrier[1]: the new number
 * (the lowest free one).  Received by the system call itself, past the
 * hooked recvmsg, which forgets what was kept of the numbers it brings
 * (recvmsg_stale_co): the number's record is what the close left. */
static int pass_fd(int fd, const int carrier[2]) {
    union { char b[CMSG_SPACE(sizeof(int))]; struct cmsghdr align; } ctl;
    memset(&ctl, 0, sizeof(ctl));
    char one = 'f';
    struct iovec v = {&one, 1};
    struct msghdr m = {.msg_iov = &v, .msg_iovlen = 1, .msg_control = ctl.b,
                       .msg_controllen = sizeof(ctl.b)};
    struct cmsghdr* cm = CMSG_FIRSTHDR(&m);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &fd, sizeof(int));
    CHECK_EQ(sendmsg(carrier[0], &m, 0), 1);
    memset(&ctl, 0, sizeof(ctl));
    m.msg_controllen = sizeof(ctl.b);
    CHECK_EQ(syscall(SYS_recvmsg, carrier[1], &m, MSG_CMSG_CLOEXEC), 1);
    cm = CMSG_FIRSTHDR(&m);
    CHECK(cm != NULL && cm->cmsg_type == SCM_RIGHTS);
    int got;
    memcpy(&got, CMSG_DATA(cm), sizeof(int));
    return got;
}
static void fclose_stale_co(void* arg) {
    (void)arg;
    for (int k = 0; k < 2; k++) {
        int nsv[2], carrier[2], old[2];
        CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | (k ? SOCK_NONBLOCK : 0), 0, nsv), 0);
        CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, carrier), 0);
        CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, old), 0);
        if (k == 0) {
            struct timeval tv = {0, 50000};
            CHECK_EQ(setsockopt(old[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
        } else {
            char c;
            CHECK_EQ(write(old[1], "o", 1), 1);
            CHECK_EQ(read(old[0], &c, 1), 1);
        }
        int n = old[0];
        FILE* f = fdopen(old[0], "r");
        CHECK(f != NULL);
        CHECK_EQ(fclose(f), 0);
        close(old[1]);
        int got = pass_fd(nsv[0], carrier);
        CHECK_EQ(got, n);               /* (the lowest free number) */
        close(nsv[0]);
        close(carrier[0]);
        close(carrier[1]);
        if (k == 0) {
            st_read(got, nsv[1], 0);
        } else {
            CHECK(fcntl(got, F_GETFL) & O_NONBLOCK);
            st_nowait(got, nsv[1]);
        }
        close(got);
        close(nsv[1]);
    }
}

/* A close no hook sees (syscall(2) here; a close inside another library)
 * leaves the number's record; a descriptor the hooked recvmsg brings in
 * (SCM_RIGHTS) lands there next and must be taken as new, in a co and
 * outside cos: (a) the old socket's SO_RCVTIMEO (50 ms) does not end the
 * new one's read, which waits for the late byte (300 ms); (b) the old
 * one a co read (the runtime's O_NONBLOCK), the new one the program made
 * non-blocking shows O_NONBLOCK and says EAGAIN at once.  Also under
 * MSG_CTRUNC (two sent, room for one: the one that came), and two behind
 * SO_PASSCRED's header.  A control buffer the kernel wrote nothing into
 * (length 0, or an fd it could not write there and dropped: a page no
 * one may touch) is not read: the count, no fault.  (The record stayed:
 * EAGAIN at 50 ms; the flag hidden, the read parked.) */
static int rs_carrier[2], rs_got[2], rs_ctl_len;
static void* rs_ctl;
static ssize_t rs_ret;
/* Receive what was sent on rs_carrier[1] with rs_ctl_len bytes of
 * control at rs_ctl (NULL: a buffer of its own), the fds into rs_got
 * (-1: none). */
static void* rs_recv(void* arg) {
    (void)arg;
    union { char b[256]; struct cmsghdr align; } ctl;
    memset(&ctl, 0, sizeof(ctl));
    char one;
    struct iovec v = {&one, 1};
    struct msghdr m = {.msg_iov = &v, .msg_iovlen = 1, .msg_control = rs_ctl ? rs_ctl : ctl.b,
                       .msg_controllen = (size_t)rs_ctl_len};
    rs_got[0] = rs_got[1] = -1;
    rs_ret = recvmsg(rs_carrier[1], &m, MSG_CMSG_CLOEXEC);
    if (rs_ctl) return NULL;
    int k = 0;
    for (struct cmsghdr* cm = CMSG_FIRSTHDR(&m); cm; cm = CMSG_NXTHDR(&m, cm)) {
        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
        for (size_t i = 0; k < 2 && CMSG_LEN((i + 1) * sizeof(int)) <= cm->cmsg_len; i++)
            memcpy(&rs_got[k++], CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
    }
    return NULL;
}
/* Send the n fds, receive them in this co or on a plain thread. */
static void rs_pass(const int* fds, int n, int thread) {
    union { char b[CMSG_SPACE(2 * sizeof(int))]; struct cmsghdr align; } ctl;
    memset(&ctl, 0, sizeof(ctl));
    char one = 'f';
    struct iovec v = {&one, 1};
    struct msghdr m = {.msg_iov = &v, .msg_iovlen = 1, .msg_control = ctl.b,
                       .msg_controllen = CMSG_SPACE((size_t)n * sizeof(int))};
    struct cmsghdr* cm = CMSG_FIRSTHDR(&m);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN((size_t)n * sizeof(int));
    memcpy(CMSG_DATA(cm), fds, (size_t)n * sizeof(int));
    CHECK_EQ(sendmsg(rs_carrier[0], &m, 0), 1);
    if (thread) {
        pthread_t t;
        CHECK_EQ(pthread_create(&t, NULL, rs_recv, NULL), 0);
        CHECK_EQ(pthread_join(t, NULL), 0);
    } else {
        rs_recv(NULL);
    }
    CHECK_EQ(rs_ret, 1);
}
/* Two numbers with stale records (k 0: a 50 ms SO_RCVTIMEO; 1: a co's
 * read, the runtime's O_NONBLOCK), closed by the system call; their
 * peers still open. */
static void rs_stale(int k, int n[2], int peer[2]) {
    for (int i = 0; i < 2; i++) {
        int old[2];
        CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, old), 0);
        if (k == 0) {
            struct timeval tv = {0, 50000};
            CHECK_EQ(setsockopt(old[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
        } else {
            char c;
            CHECK_EQ(write(old[1], "o", 1), 1);
            CHECK_EQ(read(old[0], &c, 1), 1);
        }
        n[i] = old[0];
        peer[i] = old[1];
    }
    CHECK_EQ(syscall(SYS_close, n[0]), 0);
    CHECK_EQ(syscall(SYS_close, n[1]), 0);
}
static void rs_check(int k, int fd, int peer) {
    if (k == 0) {
        st_read(fd, peer, 0);
    } else {
        CHECK(fcntl(fd, F_GETFL) & O_NONBLOCK);
        st_nowait(fd, peer);
        char c;
        CHECK_EQ(read(fd, &c, 1), 1);           /* (the late byte) */
    }
}
static void recvmsg_stale_co(void* arg) {
    (void)arg;
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, rs_carrier), 0);
    /* way 0: one fd, in this co and on a plain thread; 1: two, room for
     * one (MSG_CTRUNC); 2: two, after the credentials' header (the
     * second looked at) */
    static const int ways[][2] = {{0, 0}, {0, 1}, {1, 1}, {2, 0}};
    for (int w = 0; w < 4; w++)
        for (int k = 0; k < 2; k++) {
            int way = ways[w][0], thread = ways[w][1], nsv[2], d, n[2], peer[2], on = way == 2;
            CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | (k ? SOCK_NONBLOCK : 0), 0, nsv), 0);
            d = dup(nsv[0]);
            CHECK_GE(d, 0);
            CHECK_EQ(setsockopt(rs_carrier[1], SOL_SOCKET, SO_PASSCRED, &on, sizeof(on)), 0);
            rs_stale(k, n, peer);
            int fds[2] = {nsv[0], d};
            rs_ctl = NULL;
            rs_ctl_len = way == 1 ? (int)CMSG_LEN(sizeof(int)) : 256;
            rs_pass(fds, way ? 2 : 1, thread);
            CHECK_EQ(rs_got[0], n[0]);      /* (the lowest free numbers) */
            CHECK_EQ(rs_got[1], way == 2 ? n[1] : -1);
            close(nsv[0]);
            close(d);
            rs_check(k, rs_got[way == 2], nsv[1]);
            close(rs_got[0]);
            if (way == 2) close(rs_got[1]);
            close(peer[0]);
            close(peer[1]);
            close(nsv[1]);
        }
#if !MEMCHECK
    /* control the kernel wrote nothing into: not read */
    long pg = sysconf(_SC_PAGESIZE);
    void* none = mmap(NULL, (size_t)pg, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(none != MAP_FAILED);
    for (int thread = 0; thread < 2; thread++)
        for (int len = 0; len < 2; len++) {
            int p[2];
            CHECK_EQ(pipe(p), 0);
            rs_ctl = none;
            rs_ctl_len = len ? 64 : 0;
            rs_pass(p, 1, thread);
            close(p[0]);
            close(p[1]);
        }
    CHECK_EQ(munmap(none, (size_t)pg), 0);
#endif
    close(rs_carrier[0]);
    close(rs_carrier[1]);
}

/* The other closes past close: pclose (popen's pipe) and closedir (the
 * directory's number) close inside glibc, close_range and closefrom in
 * the kernel, a range at once.  Each number held a pipe or a directory a
 * co read (the runtime's to make non-blocking; no socket: no timeouts to
 * read); the socket that comes there next by calls the hooks do not see
 * (passed in; for the ranges, numbers made high for them, moved up by
 * the system call dup3) must be its own, as after fclose: (a) its
 * SO_RCVTIMEO of 50 ms, set before it came, ends a read with EAGAIN; (b)
 * the O_NONBLOCK it came with shows, and a read says EAGAIN at once.
 * (The record stayed: the read waited for the late byte at 300 ms, or
 * after closedir, whose directory glibc opens O_NONBLOCK, it took the
 * socket for the program's non-blocking one and slept in the kernel for
 * the thread; the flag hidden, the read parked.)  close_range with
 * CLOSE_RANGE_CLOEXEC
 * closes nothing, and what is kept stays: a negative SO_RCVTIMEO, which
 * the kernel's getsockopt cannot tell from none, still says EAGAIN at
 * once.  freopen puts its new file on the old number inside glibc (a
 * dup3 of its own) and lets the old one go: a socket the program had
 * made non-blocking, reopened as a pipe (through /proc/self/fd), is a
 * blocking pipe, whose read in a co parks until a thread's late byte
 * (it was taken for the program's non-blocking socket and slept in the
 * kernel for the thread).  (A close by syscall(2) is seen by nothing:
 * not tried.) */
enum { UC_PCLOSE, UC_CLOSEDIR, UC_RANGE_ONE, UC_RANGE_HIGH, UC_CLOSEFROM, UC_N };
#define UC_HIGH 200                     /* above every other number here */
/* A number holding a file a co read, closed the way w: the number. */
static int uc_closed(int w) {
    char c;
    int n, p[2];
    if (w == UC_PCLOSE) {
        FILE* f = popen("echo x", "r");
        CHECK(f != NULL);
        n = fileno(f);
        CHECK_EQ(read(n, &c, 1), 1);
        CHECK_EQ(pclose(f), 0);
        return n;
    }
    if (w == UC_CLOSEDIR) {
        DIR* d = opendir("/");
        CHECK(d != NULL);
        n = dirfd(d);
        errno = 0;
        CHECK_EQ(read(n, &c, 1), -1);
        CHECK_EQ(errno, EISDIR);
        CHECK_EQ(closedir(d), 0);
        return n;
    }
    CHECK_EQ(pipe(p), 0);
    n = p[0];
    if (w != UC_RANGE_ONE) {
        n = UC_HIGH + 1;
        CHECK_EQ(dup2(p[0], n), n);
        close(p[0]);
    }
    CHECK_EQ(write(p[1], "p", 1), 1);
    CHECK_EQ(read(n, &c, 1), 1);
    close(p[1]);
    if (w == UC_RANGE_ONE) CHECK_EQ(close_range((unsigned)n, (unsigned)n, 0), 0);
    if (w == UC_RANGE_HIGH) CHECK_EQ(close_range(UC_HIGH, ~0U, 0), 0);
    if (w == UC_CLOSEFROM) closefrom(UC_HIGH);
    CHECK_EQ(fcntl(n, F_GETFD), -1);
    return n;
}
static int uc_began, uc_wfd;
static void uc_begin(void* arg) {
    (void)arg;
    uc_began = 1;
}
static void* uc_late_thread(void* arg) {
    (void)arg;
    struct timespec ts = {0, 200000000};
    nanosleep(&ts, NULL);
    CHECK_EQ(write(uc_wfd, "y", 1), 1);
    return NULL;
}
/* A vfork child's closefrom or close_range closes its own table's numbers
 * (our memory, its own table), and a thread's close_range with
 * CLOSE_RANGE_UNSHARE those of its private copy: the records of ours stay.
 * They once went: the O_NONBLOCK the runtime set on a socket (epoll) was
 * taken for the program's, F_GETFL showed it and a read said EAGAIN where
 * it should wait. */
__attribute__((noinline)) static pid_t vfork_closing(int how) {
    pid_t p = vfork();
    if (p == 0) {
        if (how == 0) closefrom(3);
        else close_range(3, ~0U, 0);
        _exit(0);
    }
    return p;
}
static void* unshare_closing(void* arg) {
    (void)arg;
    CHECK_EQ(close_range(3, ~0U, CLOSE_RANGE_UNSHARE), 0);
    return NULL;
}
static struct sockaddr_in ot_addr;
static void ot_connect_soon(void* arg) {
    (void)arg;
    aco_rt_sleep(20 * MS);
    int c = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(c >= 0);
    CHECK_EQ(connect(c, (struct sockaddr*)&ot_addr, sizeof(ot_addr)), 0);
    close(c);
}
/* accept's wait: the runtime's O_NONBLOCK on the listener (epoll) */
static void ot_accept(int l) {
    aco_rt_co_t* w = aco_rt_spawn(NULL, ot_connect_soon, NULL);
    CHECK(w != NULL);
    int a = accept(l, NULL, NULL);
    CHECK(a >= 0);
    close(a);
    CHECK_EQ(aco_rt_join(w, -1), 0);
}
static void other_table_close_co(void* arg) {
    (void)arg;
    for (int how = 0; how < 3; how++) {
        int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), st;
        CHECK(l >= 0);
        ot_addr = (struct sockaddr_in){.sin_family = AF_INET};
        ot_addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t n = sizeof(ot_addr);
        CHECK_EQ(bind(l, (struct sockaddr*)&ot_addr, n), 0);
        CHECK_EQ(getsockname(l, (struct sockaddr*)&ot_addr, &n), 0);
        CHECK_EQ(listen(l, 8), 0);
        ot_accept(l);
        if (how < 2) {
            pid_t p = vfork_closing(how);
            CHECK(p > 0);
            CHECK_EQ(waitpid(p, &st, 0), p);
            CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        } else {
            pthread_t t;
            CHECK_EQ(pthread_create(&t, NULL, unshare_closing, NULL), 0);
            CHECK_EQ(pthread_join(t, NULL), 0);
        }
        CHECK_EQ(fcntl(l, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);     /* still open here */
        CHECK_EQ(fcntl(l, F_GETFL) & O_NONBLOCK, 0);
        ot_accept(l);                   /* waits again, not EAGAIN */
        close(l);
    }
}

static void unseen_close_co(void* arg) {
    (void)arg;
    for (int w = 0; w < UC_N; w++)
        for (int k = 0; k < 2; k++) {
            int nsv[2], carrier[2];
            CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | (k ? SOCK_NONBLOCK : 0), 0, nsv), 0);
            CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, carrier), 0);
            struct timeval tv = {0, 50000};
            if (k == 0) CHECK_EQ(setsockopt(nsv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
            int n = uc_closed(w);
            int got = pass_fd(nsv[0], carrier);
            if (n > UC_HIGH) {
                CHECK_EQ(syscall(SYS_dup3, got, n, O_CLOEXEC), n);
                close(got);
                got = n;
            }
            CHECK_EQ(got, n);           /* (the lowest free number) */
            close(nsv[0]);
            close(carrier[0]);
            close(carrier[1]);
            if (k == 0) {
                st_read(got, nsv[1], 1);
            } else {
                CHECK(fcntl(got, F_GETFL) & O_NONBLOCK);
                st_nowait(got, nsv[1]);
            }
            close(got);
            close(nsv[1]);
        }
    /* CLOSE_RANGE_CLOEXEC: nothing closed, nothing forgotten */
    int sv[2];
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    struct timeval nowait = {-1, 0};
    CHECK_EQ(setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &nowait, sizeof(nowait)), 0);
    CHECK_EQ(close_range((unsigned)sv[0], (unsigned)sv[0], CLOSE_RANGE_CLOEXEC), 0);
    CHECK(fcntl(sv[0], F_GETFD) & FD_CLOEXEC);
    st_nowait(sv[0], sv[1]);
    close(sv[0]);
    close(sv[1]);
    /* freopen */
    int q[2];
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    CHECK_EQ(fcntl(sv[0], F_SETFL, O_NONBLOCK), 0);
    CHECK_EQ(pipe(q), 0);
    FILE* f = fdopen(sv[0], "r");
    CHECK(f != NULL);
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", q[0]);
    CHECK(freopen(path, "r", f) == f);
    CHECK_EQ(fileno(f), sv[0]);
    uc_began = 0;
    uc_wfd = q[1];
    aco_rt_co_t* b = aco_rt_spawn(NULL, uc_begin, NULL);
    CHECK(b != NULL);
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, uc_late_thread, NULL), 0);
    char c;
    CHECK_EQ(read(sv[0], &c, 1), 1);
    CHECK(uc_began);                    /* (parked) */
    CHECK_EQ(pthread_join(t, NULL), 0);
    CHECK_EQ(aco_rt_join(b, -1), 0);
    CHECK_EQ(fclose(f), 0);
    close(sv[1]);
    close(q[0]);
    close(q[1]);
}

/* recv(MSG_OOB) takes TCP's urgent byte, short of the buffer: the normal
 * bytes still queued are read at once after it.  (On epoll a short read
 * once marked the socket drained, and the next read waited for an edge:
 * for good, or here for the late bytes at 300 ms.) */
static int oob_cl;
static void oob_first(void* arg) {
    (void)arg;
    usleep(20000);
    CHECK_EQ(send(oob_cl, "a", 1, 0), 1);
}
static void oob_late(void* arg) {
    (void)arg;
    usleep(300000);
    CHECK_EQ(send(oob_cl, "late", 4, 0), 4);
}
static void oob_co(void* arg) {
    (void)arg;
    int p0, l = listen_loopback(&p0);
    oob_cl = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK_GE(oob_cl, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)p0)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK_EQ(connect(oob_cl, (struct sockaddr*)&a, sizeof(a)), 0);
    int sv = accept4(l, NULL, NULL, SOCK_CLOEXEC);
    CHECK_GE(sv, 0);
    char b[64];
    aco_rt_co_t* w = aco_rt_spawn(NULL, oob_first, NULL);
    CHECK_EQ(recv(sv, b, sizeof(b), 0), 1);      /* waited: on epoll's set now */
    CHECK_EQ(aco_rt_join(w, -1), 0);
    CHECK_EQ(send(oob_cl, "hello", 5, 0), 5);
    CHECK_EQ(send(oob_cl, "!", 1, MSG_OOB), 1);
    usleep(20000);
    CHECK_EQ(recv(sv, b, sizeof(b), MSG_OOB), 1);
    CHECK_EQ(b[0], '!');
    w = aco_rt_spawn(NULL, oob_late, NULL);
    int64_t t0 = now();
    CHECK_EQ(recv(sv, b, sizeof(b), 0), 5);
    CHECK_EQ(memcmp(b, "hello", 5), 0);
    CHECK_LT(now() - t0, 200 * MS);
    CHECK_EQ(aco_rt_join(w, -1), 0);
    close(sv);
    close(oob_cl);
    close(l);
}

/* recv and recvfrom with MSG_ERRQUEUE never wait, as recvmsg's: an
 * empty error queue says EAGAIN at once (they once waited for POLLIN: for
 * good, here until the canceller at 300 ms). */
static void eq_canceller(void* arg) {
    if (aco_rt_sleep(300 * MS) == 0) aco_rt_cancel(arg);
}
static void errqueue_co(void* arg) {
    (void)arg;
    int u = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    CHECK_GE(u, 0);
    aco_rt_co_t* k = aco_rt_spawn(NULL, eq_canceller, aco_rt_self());
    CHECK(k != NULL);
    char b[64];
    struct sockaddr_in a;
    socklen_t al = sizeof(a);
    int64_t t0 = now();
    errno = 0;
    CHECK_EQ(recv(u, b, sizeof(b), MSG_ERRQUEUE), -1);
    CHECK_EQ(errno, EAGAIN);
    errno = 0;
    CHECK_EQ(recvfrom(u, b, sizeof(b), MSG_ERRQUEUE, (struct sockaddr*)&a, &al), -1);
    CHECK_EQ(errno, EAGAIN);
    CHECK_LT(now() - t0, 200 * MS);
    CHECK_EQ(aco_rt_cancel(k), 0);
    CHECK_EQ(aco_rt_join(k, -1), 0);
    close(u);
}

/* A cancelled co's recvfrom with an address, and sendto with an address
 * length sendmsg does not take, fail with ECANCELED at once, bytes ready
 * or not (docs/hooks.md's table: the runtime's rule, as recv's and
 * send's; they once moved the datagram). */
static void cancelled_addr_co(void* arg) {
    (void)arg;
    int sv[2];
    CHECK_EQ(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv), 0);
    CHECK_EQ(send(sv[1], "ab", 2, 0), 2);
    CHECK_EQ(aco_rt_cancel(aco_rt_self()), 0);
    char b[8];
    errno = 0;
    CHECK_EQ(recv(sv[0], b, sizeof(b), 0), -1);
    CHECK_EQ(errno, ECANCELED);
    struct sockaddr_un a;
    socklen_t al = sizeof(a);
    errno = 0;
    CHECK_EQ(recvfrom(sv[0], b, sizeof(b), 0, (struct sockaddr*)&a, &al), -1);
    CHECK_EQ(errno, ECANCELED);
    errno = 0;
    CHECK_EQ(sendto(sv[1], "cd", 2, 0, (struct sockaddr*)&a, 0), -1);
    CHECK_EQ(errno, ECANCELED);
    CHECK_EQ(recv(sv[0], b, sizeof(b), MSG_DONTWAIT), 2);  /* (libc's: no wait) */
    CHECK_EQ(recv(sv[0], b, sizeof(b), MSG_DONTWAIT), -1);  /* nothing was sent */
    close(sv[0]);
    close(sv[1]);
}

/* A Unix listener's queue full: a blocking connect waits for room (it
 * said EAGAIN at once), and SO_SNDTIMEO ends the wait with EAGAIN. */
static int ux_l;
static void ux_acceptor(void* arg) {
    (void)arg;
    usleep(50000);
    int c = accept(ux_l, NULL, NULL);
    CHECK_GE(c, 0);
    close(c);
}
static void unix_full_co(void* arg) {
    (void)arg;
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path + 1, sizeof(a.sun_path) - 1, "aco-hook-%d", (int)getpid());
    socklen_t al = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(a.sun_path + 1));
    ux_l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK_EQ(bind(ux_l, (struct sockaddr*)&a, al), 0);
    CHECK_EQ(listen(ux_l, 0), 0);
    int c1 = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK_EQ(connect(c1, (struct sockaddr*)&a, al), 0);     /* the queue's one */
    int c2 = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct timeval tv = {0, 50000};
    CHECK_EQ(setsockopt(c2, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)), 0);
    int64_t t0 = now();
    errno = 0;
    CHECK_EQ(connect(c2, (struct sockaddr*)&a, al), -1);
    CHECK_EQ(errno, EAGAIN);
    CHECK_GE(now() - t0, 40 * MS);
    close(c2);
    c2 = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    aco_rt_co_t* acc = aco_rt_spawn(NULL, ux_acceptor, NULL);
    CHECK(acc != NULL);
    t0 = now();
    CHECK_EQ(connect(c2, (struct sockaddr*)&a, al), 0);     /* room once one is taken */
    CHECK_GE(now() - t0, 40 * MS);
    CHECK_EQ(aco_rt_join(acc, -1), 0);
    close(c1);
    close(c2);
    close(ux_l);
}

static int cancelled_errno;

static void victim(void* arg) {
    (void)arg;
    int p[2];
    CHECK_EQ(pipe(p), 0);
    char b[4];
    errno = 0;
    CHECK_EQ(read(p[0], b, sizeof(b)), -1);
    cancelled_errno = errno;
    close(p[0]);
    close(p[1]);
}

static aco_rt_co_t* victim_co;

static void canceller(void* arg) {
    (void)arg;
    aco_rt_yield();                     /* the victim parks in its read */
    aco_rt_yield();
    CHECK_EQ(aco_rt_cancel(victim_co), 0);
}

static void body(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    /* 100 cos sleep 50 ms each through usleep, nanosleep and poll: at
     * once, so in far less than the 5 s one after the other takes */
    slept_ok = 0;
    sleep_t0 = now();
    for (int i = 0; i < SLEEPERS; i++) CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, sleeper, (void*)(intptr_t)i)), 0);
    test_run(s);
    CHECK_EQ(slept_ok, SLEEPERS);
    CHECK_LT(now() - sleep_t0, SLEEPERS * 50 * MS / 2);
    /* a read on an empty pipe parks its co, the writer runs */
    CHECK_EQ(pipe(pipe_fd), 0);
    reader_done = writer_saw_parked = 0;
    aco_rt_detach(aco_rt_spawn(s, reader, NULL));
    aco_rt_detach(aco_rt_spawn(s, writer, NULL));
    test_run(s);
    CHECK(reader_done && writer_saw_parked);
    close(pipe_fd[0]);
    close(pipe_fd[1]);
    test_go(s, flags_co, NULL);
    test_go(s, fionbio_fault_co, NULL);
    test_go(s, timeouts_co, NULL);
    test_go(s, connect_states_co, NULL);
    test_go(s, dup_cleared_nb_co, NULL);
    test_go(s, toggled_nb_co, NULL);
    test_go(s, shared_timeo_co, NULL);
    test_go(s, fclose_stale_co, NULL);
    test_go(s, recvmsg_stale_co, NULL);
    test_go(s, unseen_close_co, NULL);
    test_go(s, other_table_close_co, NULL);
    test_go(s, oob_co, NULL);
    test_go(s, errqueue_co, NULL);
    test_go(s, cancelled_addr_co, NULL);
    test_go(s, unix_full_co, NULL);
    /* TCP */
    lfd = listen_loopback(&port);
    aco_rt_detach(aco_rt_spawn(s, server_co, NULL));
    aco_rt_detach(aco_rt_spawn(s, client_co, NULL));
    test_run(s);
    close(lfd);
    /* a cancelled co's blocking read fails with ECANCELED */
    victim_co = aco_rt_spawn(s, victim, NULL);
    aco_rt_detach(victim_co);
    aco_rt_detach(aco_rt_spawn(s, canceller, NULL));
    test_run(s);
    CHECK_EQ(cancelled_errno, ECANCELED);
}

/* ------------------------------------------------------------------------ */
/* Waits on many descriptors, cancel, sleeps, fortified names               */
/* ------------------------------------------------------------------------ */

/* glibc's fortified entry points (what _FORTIFY_SOURCE makes a program
 * call where it knows the buffer's size). */
extern int __poll_chk(struct pollfd* fds, nfds_t n, int timeout, size_t fdslen);
extern ssize_t __read_chk(int fd, void* buf, size_t n, size_t buflen);
extern ssize_t __recv_chk(int fd, void* buf, size_t n, size_t buflen, int flags);

static int mp[2], mq[2];            /* two pipes */
static int64_t mwrote;

static void late_write_co(void* arg) {
    aco_rt_sleep((int64_t)(intptr_t)arg * MS);
    mwrote = now();
    CHECK_EQ(write(mq[1], "w", 1), 1);
}

/* poll on two descriptors parks once, on both: no looking again in steps
 * (the co is resumed once in a 60 ms wait), and it wakes when the second
 * becomes ready. */
static void many_co(void* arg) {
    (void)arg;
    CHECK_EQ(pipe(mp), 0);
    CHECK_EQ(pipe(mq), 0);
    aco_rt_detach(aco_rt_spawn(NULL, late_write_co, (void*)(intptr_t)60));
    struct pollfd two[2] = {{mp[0], POLLIN, 0}, {mq[0], POLLIN, 0}};
    aco_rt_stats_t a, b;
    aco_rt_yield();                     /* the writer is asleep */
    aco_rt_stats(NULL, &a);
    CHECK_EQ(poll(two, 2, 5000), 1);
    aco_rt_stats(NULL, &b);
    CHECK_EQ(two[0].revents, 0);
    CHECK_EQ(two[1].revents, POLLIN);
    CHECK_GE(now(), mwrote);
    CHECK_LE(b.switches - a.switches, 3);   /* the writer, then us: once */
    char c;
    CHECK_EQ(read(mq[0], &c, 1), 1);
    /* the fortified poll and read */
    aco_rt_detach(aco_rt_spawn(NULL, late_write_co, (void*)(intptr_t)5));
    CHECK_EQ(__poll_chk(two, 2, 5000, sizeof(two)), 1);
    CHECK_EQ(__read_chk(mq[0], &c, 1, 1), 1);
    aco_rt_detach(aco_rt_spawn(NULL, late_write_co, (void*)(intptr_t)5));
    CHECK_EQ(__read_chk(mq[0], &c, 1, sizeof(c)), 1);      /* parks, then reads */
    /* ppoll, with a timeout and none ready */
    struct timespec ts = {0, 15 * MS};
    int64_t t0 = now();
    CHECK_EQ(ppoll(two, 2, &ts, NULL), 0);
    CHECK_GE(now() - t0, 15 * MS);
    ts.tv_nsec = -1;
    errno = 0;
    CHECK_EQ(ppoll(two, 2, &ts, NULL), -1);
    CHECK_EQ(errno, EINVAL);
    /* the normal band by name: woken as by POLLIN (epoll says IN) */
    struct pollfd rd = {mq[0], POLLRDNORM, 0};
    aco_rt_detach(aco_rt_spawn(NULL, late_write_co, (void*)(intptr_t)5));
    CHECK_EQ(poll(&rd, 1, 5000), 1);
    CHECK_EQ(rd.revents, POLLRDNORM);
    CHECK_EQ(read(mq[0], &c, 1), 1);
    /* a closed number: POLLNVAL */
    int dead = dup(mp[0]);
    close(dead);
    struct pollfd pd[2] = {{mp[0], POLLIN, 0}, {dead, POLLIN, 0}};
    CHECK_EQ(poll(pd, 2, 1000), 1);
    CHECK_EQ(pd[1].revents, POLLNVAL);
}

/* select and pselect: the sets as Linux's select fills them. */
/* The kernel's descriptor table's size (/proc/self/status's FDSize), or
 * INT_MAX if not known. */
static int fd_table_size(void) {
    FILE* f = fopen("/proc/self/status", "r");
    char line[256];
    int n = INT_MAX;
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "FDSize: %d", &n) == 1) break;
    if (f) fclose(f);
    return n;
}

static void select_co(void* arg) {
    (void)arg;
    fd_set r, w;
    FD_ZERO(&r);
    FD_ZERO(&w);
    FD_SET(mp[0], &r);
    FD_SET(mq[0], &r);
    struct timeval tv = {0, 20000};
    int64_t t0 = now();
    CHECK_EQ(select(FD_SETSIZE > mq[0] ? mq[0] + 1 : 0, &r, NULL, NULL, &tv), 0);
    CHECK_GE(now() - t0, 20 * MS);
    CHECK(!FD_ISSET(mp[0], &r) && !FD_ISSET(mq[0], &r));   /* cleared */
    CHECK_EQ(tv.tv_sec, 0);
    CHECK_EQ(tv.tv_usec, 0);
    FD_SET(mp[0], &r);
    FD_SET(mq[0], &r);
    FD_SET(mp[1], &w);                  /* a pipe's write end: writable */
    aco_rt_detach(aco_rt_spawn(NULL, late_write_co, (void*)(intptr_t)5));
    int nfds = (mq[1] > mq[0] ? mq[1] : mq[0]) + 1;
    CHECK_EQ(select(nfds, &r, &w, NULL, NULL), 1);          /* w at once */
    CHECK(FD_ISSET(mp[1], &w) && !FD_ISSET(mp[0], &r) && !FD_ISSET(mq[0], &r));
    FD_ZERO(&r);
    FD_SET(mp[0], &r);
    FD_SET(mq[0], &r);
    tv = (struct timeval){5, 0};
    CHECK_EQ(select(nfds, &r, NULL, NULL, &tv), 1);         /* the late write */
    CHECK(FD_ISSET(mq[0], &r) && !FD_ISSET(mp[0], &r));
    CHECK(tv.tv_sec < 5 || tv.tv_usec < 1000000);            /* the time left */
    char c;
    CHECK_EQ(read(mq[0], &c, 1), 1);
    /* microseconds past a second carry into seconds, as Linux's */
    FD_ZERO(&r);
    FD_SET(mq[0], &r);
    tv = (struct timeval){0, 1500000};
    aco_rt_detach(aco_rt_spawn(NULL, late_write_co, (void*)(intptr_t)5));
    CHECK_EQ(select(nfds, &r, NULL, NULL, &tv), 1);
    CHECK(FD_ISSET(mq[0], &r));
    CHECK_EQ(read(mq[0], &c, 1), 1);
    FD_ZERO(&r);
    FD_SET(mp[0], &r);
    FD_SET(mq[0], &r);
    aco_rt_detach(aco_rt_spawn(NULL, late_write_co, (void*)(intptr_t)5));
    struct timespec ts = {5, 0};
    CHECK_EQ(pselect(nfds, &r, NULL, NULL, &ts, NULL), 1);
    CHECK(FD_ISSET(mq[0], &r));
    CHECK_EQ(ts.tv_sec, 5);                                  /* pselect's stays */
    CHECK_EQ(read(mq[0], &c, 1), 1);
    /* a number not open: EBADF */
    int dead = dup(mp[0]);
    close(dead);
    FD_ZERO(&r);
    FD_SET(dead, &r);
    errno = 0;
    CHECK_EQ(select(dead + 1, &r, NULL, NULL, NULL), -1);
    CHECK_EQ(errno, EBADF);
    /* a bit past the kernel's table, nfds up to FD_SETSIZE: Linux cuts
     * nfds to its table, so the bit is no descriptor (no EBADF) and stays
     * as it was; one inside the table but not open is EBADF (the hooks
     * said EBADF for both, and cleared the bit): the system call's answer
     * and sets beside the hook's */
    CHECK_EQ(write(mq[1], "t", 1), 1);
    int tab = fd_table_size();
    int past[] = {tab, FD_SETSIZE - 1, dead};
    for (int i = 0; i < 3; i++) {
        if (past[i] >= FD_SETSIZE) continue;
        for (int nf = past[i] + 1; nf <= FD_SETSIZE; nf += FD_SETSIZE - past[i] - 1) {
            fd_set raw_r, hk_r;
            FD_ZERO(&raw_r);
            FD_SET(mq[0], &raw_r);
            FD_SET(past[i], &raw_r);
            hk_r = raw_r;
            struct timeval t0 = {0, 0}, t1 = {0, 0};
            errno = 0;
            long want = syscall(SYS_select, nf, &raw_r, NULL, NULL, &t0);
            int want_err = errno;
            errno = 0;
            CHECK_EQ(select(nf, &hk_r, NULL, NULL, &t1), want);
            CHECK_EQ(errno, want_err);
            CHECK_EQ(memcmp(&raw_r, &hk_r, sizeof(fd_set)), 0);
            /* (memcheck's own descriptors sit past the table /proc shows
             * the program: the kernel's is larger there) */
            if (!MEMCHECK) CHECK_EQ(want, past[i] == dead ? -1 : 1);
            if (nf == FD_SETSIZE) break;
        }
    }
    CHECK_EQ(read(mq[0], &c, 1), 1);
    /* nfds past the sets (FD_SETSIZE's end here, a page no one may read
     * after it): Linux reads no bit past its descriptor table, and nor do
     * the hooks (they once read nfds bits, and faulted).  Where the table
     * is larger than the sets (memcheck's own descriptors sit high), the
     * kernel's select says EFAULT: select_big_co. */
    if (fd_table_size() > FD_SETSIZE) return;
    long pg = sysconf(_SC_PAGESIZE);
    char* m = mmap(NULL, 2 * (size_t)pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(m != MAP_FAILED);
    CHECK_EQ(mprotect(m + pg, (size_t)pg, PROT_NONE), 0);
    fd_set* edge = (fd_set*)(m + pg - sizeof(fd_set));
    CHECK_EQ(write(mq[1], "e", 1), 1);
    int big[] = {1 << 16, INT_MAX};
    for (int i = 0; i < 2; i++) {
        FD_ZERO(edge);
        FD_SET(mq[0], edge);
        tv = (struct timeval){0, 0};
        CHECK_EQ(select(big[i], edge, NULL, NULL, &tv), 1);
        CHECK(FD_ISSET(mq[0], edge));
    }
    CHECK_EQ(read(mq[0], &c, 1), 1);
    CHECK_EQ(munmap(m, 2 * (size_t)pg), 0);
}

/* select with nfds past FD_SETSIZE, the descriptor table larger than that
 * (a number past it open, as in a server with many connections; or
 * memcheck's own): Linux reads ceil(nfds/64) longs of each set, nfds cut
 * to its table, and writes as many back.  (1) An fd_set at a page's end,
 * nothing readable after it, as the read or the write set: EFAULT, the
 * kernel's answer, for nfds the table's size or INT_MAX.  (2) Sets of the
 * table's size there: every bit seen, none past them.  (3) Those in
 * memory that may only be read: the kernel reads them and cannot write
 * the answer: EFAULT.  (The hooks read and wrote the bits up to the
 * table's size, and faulted in (1) and (3).)  The EFAULTs not under
 * memcheck, which reports the memory handed to the kernel. */
static void fdbits_put(unsigned long* s, int fd) {
    s[fd / (8 * sizeof(long))] |= 1UL << (fd % (8 * sizeof(long)));
}
static int fdbits_has(const unsigned long* s, int fd) {
    return (s[fd / (8 * sizeof(long))] >> (fd % (8 * sizeof(long)))) & 1;
}
static void select_big_co(void* arg) {
    (void)arg;
    int tab = fd_table_size();
    CHECK(tab > FD_SETSIZE && tab < INT_MAX);
    int p[2];
    CHECK_EQ(pipe(p), 0);
    CHECK_EQ(write(p[1], "b", 1), 1);
    int hi = dup2(p[0], tab - 1);       /* (memcheck keeps the top for itself) */
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    size_t bytes = ((size_t)tab + 8 * sizeof(long) - 1) / (8 * sizeof(long)) * sizeof(long);
    size_t span = (bytes + pg - 1) / pg * pg;
    char* m = mmap(NULL, span + pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(m != MAP_FAILED);
    CHECK_EQ(mprotect(m + span, pg, PROT_NONE), 0);
    int nfds[] = {tab, INT_MAX};
    struct timeval tv;
    struct timespec ts;
    /* (1) */
    fd_set* edge = (fd_set*)(m + span - sizeof(fd_set));
    for (int i = 0; !MEMCHECK && i < 4; i++) {
        int w = i & 1;
        fd_set* rd = w ? NULL : edge;
        fd_set* wr = w ? edge : NULL;
        FD_ZERO(edge);
        FD_SET(p[w], edge);
        tv = (struct timeval){0, 0};
        errno = 0;
        CHECK_EQ(select(nfds[i / 2], rd, wr, NULL, &tv), -1);
        CHECK_EQ(errno, EFAULT);
        CHECK(FD_ISSET(p[w], edge));
        ts = (struct timespec){0, 0};
        errno = 0;
        CHECK_EQ(syscall(SYS_pselect6, nfds[i / 2], rd, wr, NULL, &ts, NULL), -1);
        CHECK_EQ(errno, EFAULT);
    }
    /* (2) */
    unsigned long* set = (unsigned long*)(void*)(m + span - bytes);
    for (int i = 0; i < 2; i++) {
        memset(set, 0, bytes);
        fdbits_put(set, p[0]);
        if (hi >= 0) fdbits_put(set, hi);
        tv = (struct timeval){0, 0};
        CHECK_EQ(select(nfds[i], (fd_set*)(void*)set, NULL, NULL, &tv), hi >= 0 ? 2 : 1);
        CHECK(fdbits_has(set, p[0]));
        CHECK(hi < 0 || fdbits_has(set, hi));
    }
    /* (3) */
    CHECK_EQ(mprotect(m, span, PROT_READ), 0);
    for (int i = 0; !MEMCHECK && i < 2; i++) {
        tv = (struct timeval){0, 0};
        errno = 0;
        CHECK_EQ(select(nfds[i], (fd_set*)(void*)set, NULL, NULL, &tv), -1);
        CHECK_EQ(errno, EFAULT);
        ts = (struct timespec){0, 0};
        errno = 0;
        CHECK_EQ(syscall(SYS_pselect6, nfds[i], set, NULL, NULL, &ts, NULL), -1);
        CHECK_EQ(errno, EFAULT);
    }
    CHECK_EQ(munmap(m, span + pg), 0);
    if (hi >= 0) close(hi);
    close(p[0]);
    close(p[1]);
}
static void select_big_body(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    test_go(s, select_big_co, NULL);
}
/* The table made larger than FD_SETSIZE (it never shrinks: the program's
 * last check). */
static void select_big_table(void) {
    if (fd_table_size() <= FD_SETSIZE) {
        struct rlimit rl;
        CHECK_EQ(getrlimit(RLIMIT_NOFILE, &rl), 0);
        if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < 2 * FD_SETSIZE) {
            printf("test_hook: select past FD_SETSIZE not tried (RLIMIT_NOFILE's hard limit %llu)\n",
                   (unsigned long long)rl.rlim_max);
            return;
        }
        if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < 2 * FD_SETSIZE) {
            rl.rlim_cur = 2 * FD_SETSIZE;
            CHECK_EQ(setrlimit(RLIMIT_NOFILE, &rl), 0);
        }
        int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        CHECK_GE(fd, 0);
        CHECK_EQ(dup2(fd, 2 * FD_SETSIZE - 1), 2 * FD_SETSIZE - 1);
        close(2 * FD_SETSIZE - 1);
        close(fd);
    }
    test_on_backends(NULL, select_big_body, NULL);
}

/* ------------------------------------------------------------------------ */
/* Memory the kernel refuses                                                */
/* ------------------------------------------------------------------------ */

/* What the hooks read or write themselves in a co, where the system call
 * would find memory it may not read or write and say EFAULT: select's
 * time (read, and the time left written back), its sets (up to
 * FD_SETSIZE too); pselect's, ppoll's and epoll_pwait2's times and the
 * signal masks of those and epoll_pwait (the kernel reads a mask the
 * hooks never apply in a co); the sleeps' times, and nanosleep's *rem
 * that a cancel fills; sendfile's and splice's offsets.  Each answer is
 * the system call's own (syscall(2) beside it): EFAULT, or for memory
 * the kernel may read but not write: select's time left not written,
 * the answer kept; sets, *rem and offsets: EFAULT after the wait or the
 * copy (the bytes moved).  poll's array too, which the runtime's look
 * hands the kernel first.  A set the kernel's table makes short (nfds
 * FD_SETSIZE, the table smaller, the set at a page's end) is read no
 * further than the kernel reads.  Each case in a child of its own, in a
 * co on each backend: the hooks once faulted (SIGSEGV) in each but
 * poll's, and took a mask the kernel cannot read.  Not under memcheck
 * (it reports the memory handed to the kernel); (void*)1 not under the
 * sanitizers (their interceptors look at its shadow, which it has not). */
enum { EF_SELECT_TIME, EF_SELECT_SETS, EF_PSELECT, EF_PPOLL, EF_POLL, EF_EPOLL, EF_SLEEP,
       EF_SENDFILE, EF_SPLICE, EF_N };
static const char* const ef_names[EF_N] = {"select's time", "select's sets", "pselect",
                                           "ppoll", "poll", "epoll_pwait", "the sleeps",
                                           "sendfile", "splice"};
static char* ef_none;           /* a page nothing may touch, after one that may */
/* n bytes of v in a page of their own that may only be read */
static void* ef_ro(const void* v, size_t n) {
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    char* m = mmap(NULL, pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(m != MAP_FAILED);
    memcpy(m, v, n);
    CHECK_EQ(mprotect(m, pg, PROT_READ), 0);
    return m;
}
#define EF_ONE (!SLOW)          /* (void*)1 tried */
#define EF_FAULT(call)                                                        \
    do {                                                                      \
        errno = 0;                                                            \
        CHECK_EQ((call), -1);                                                 \
        CHECK_EQ(errno, EFAULT);                                              \
    } while (0)
/* the raw system call's and the hook's, both */
#define EF_BOTH(raw, hooked)                                                  \
    do {                                                                      \
        EF_FAULT(raw);                                                        \
        EF_FAULT(hooked);                                                     \
    } while (0)

static void ef_select_time(void) {
    int p[2];
    CHECK_EQ(pipe(p), 0);
    fd_set r;
    FD_ZERO(&r);
    FD_SET(p[0], &r);
    void* bad[] = {ef_none, ef_none - 8, (void*)1};
    for (int i = 0; i < 2 + EF_ONE; i++)
        EF_BOTH(syscall(SYS_select, p[0] + 1, &r, NULL, NULL, bad[i]),
                select(p[0] + 1, &r, NULL, NULL, (struct timeval*)bad[i]));
    /* read-only: the wait, the time left not written, the answer kept
     * (the system call's says EINTR where it would have restarted, as a
     * time it cannot write back cannot be restarted: io_uring's work for
     * the task, a ring freed just before, wakes it so; tried again) */
    struct timeval* tv = ef_ro(&(struct timeval){0, 20000}, sizeof(*tv));
    for (int raw = 0; raw < 2; raw++) {
        FD_ZERO(&r);
        FD_SET(p[0], &r);
        int64_t t0 = now();
        long got;
        while ((got = raw ? syscall(SYS_select, p[0] + 1, &r, NULL, NULL, tv)
                          : select(p[0] + 1, &r, NULL, NULL, tv)) == -1 && raw && errno == EINTR) {}
        CHECK_EQ(got, 0);
        CHECK_GE(now() - t0, 20 * MS);
        CHECK(!FD_ISSET(p[0], &r));
        CHECK_EQ(tv->tv_usec, 20000);
    }
    CHECK_EQ(write(p[1], "x", 1), 1);
    FD_SET(p[0], &r);
    CHECK_EQ(select(p[0] + 1, &r, NULL, NULL, tv), 1);
    CHECK(FD_ISSET(p[0], &r));
    close(p[0]);
    close(p[1]);
}

static void ef_select_sets(void) {
    int p[2], q[2];
    CHECK_EQ(pipe(p), 0);               /* p[0] readable, p[1] writable */
    CHECK_EQ(pipe(q), 0);               /* q[0] never readable */
    CHECK_EQ(write(p[1], "x", 1), 1);
    int n = (q[1] > p[1] ? q[1] : p[1]) + 1;
    struct timeval tv = {0, 0};
    struct timespec ts = {0, 0};
    /* sets the kernel cannot read (4 bytes short of the long it copies) */
    void* bad[] = {ef_none, ef_none - 4, (void*)1};
    for (int i = 0; i < 2 + EF_ONE; i++)
        for (int k = 0; k < 3; k++) {
            fd_set* s[3] = {NULL, NULL, NULL};
            s[k] = bad[i];
            EF_BOTH(syscall(SYS_select, n, s[0], s[1], s[2], &tv), select(n, s[0], s[1], s[2], &tv));
            EF_BOTH(syscall(SYS_pselect6, n, s[0], s[1], s[2], &ts, NULL),
                    pselect(n, s[0], s[1], s[2], &ts, NULL));
        }
    /* sets it may read and not write: the wait, then EFAULT */
    fd_set w;
    FD_ZERO(&w);
    FD_SET(p[1], &w);
    fd_set* ro = ef_ro(&w, sizeof(w));
    EF_BOTH(syscall(SYS_select, n, NULL, ro, NULL, &tv), select(n, NULL, ro, NULL, &tv));
    FD_ZERO(&w);
    FD_SET(q[0], &w);
    ro = ef_ro(&w, sizeof(w));
    for (int raw = 0; raw < 2; raw++) {
        tv = (struct timeval){0, 20000};
        int64_t t0 = now();
        EF_FAULT(raw ? syscall(SYS_select, n, ro, NULL, NULL, &tv) : select(n, ro, NULL, NULL, &tv));
        CHECK_GE(now() - t0, 20 * MS);
    }
    /* nfds FD_SETSIZE, a set of the table's length (when smaller) ending
     * where nothing may be read: the kernel reads no bit past its table */
    int tab = fd_table_size();
    size_t len = (size_t)(tab < FD_SETSIZE ? tab : FD_SETSIZE) / 8;
    unsigned long* e = (unsigned long*)(void*)(ef_none - len);
    for (int raw = 0; raw < 2; raw++) {
        memset(e, 0, len);
        fdbits_put(e, p[0]);
        tv = (struct timeval){0, 0};
        CHECK_EQ(raw ? syscall(SYS_select, FD_SETSIZE, e, NULL, NULL, &tv)
                     : select(FD_SETSIZE, (fd_set*)(void*)e, NULL, NULL, &tv), 1);
        CHECK(fdbits_has(e, p[0]));
    }
    close(p[0]);
    close(p[1]);
    close(q[0]);
    close(q[1]);
}

static void ef_pselect(void) {
    int p[2];
    CHECK_EQ(pipe(p), 0);
    CHECK_EQ(write(p[1], "x", 1), 1);
    fd_set r;
    struct timespec ts = {0, 0};
    void* bad[] = {ef_none, ef_none - 8, (void*)1};
    for (int i = 0; i < 2 + EF_ONE; i++) {
        FD_ZERO(&r);
        FD_SET(p[0], &r);
        EF_BOTH(syscall(SYS_pselect6, p[0] + 1, &r, NULL, NULL, bad[i], NULL),
                pselect(p[0] + 1, &r, NULL, NULL, bad[i], NULL));
        /* (pselect6's sixth argument: the mask's address and size) */
        struct { const void* m; size_t n; } sm = {i == 1 ? ef_none - 4 : bad[i], 8};
        EF_BOTH(syscall(SYS_pselect6, p[0] + 1, &r, NULL, NULL, &ts, &sm),
                pselect(p[0] + 1, &r, NULL, NULL, &ts, sm.m));
    }
    close(p[0]);
    close(p[1]);
}

static void ef_ppoll(void) {
    int p[2];
    CHECK_EQ(pipe(p), 0);
    CHECK_EQ(write(p[1], "x", 1), 1);
    struct pollfd pf = {p[0], POLLIN, 0};
    struct timespec ts = {0, 0};
    void* bad[] = {ef_none, ef_none - 8, (void*)1};
    for (int i = 0; i < 2 + EF_ONE; i++) {
        EF_BOTH(syscall(SYS_ppoll, &pf, 1, bad[i], NULL, 8), ppoll(&pf, 1, bad[i], NULL));
        const void* m = i == 1 ? ef_none - 4 : bad[i];
        EF_BOTH(syscall(SYS_ppoll, &pf, 1, &ts, m, 8), ppoll(&pf, 1, &ts, m));
    }
    close(p[0]);
    close(p[1]);
}

static void ef_poll(void) {
    int p[2];
    CHECK_EQ(pipe(p), 0);
    void* bad[] = {ef_none, ef_none - 4, (void*)1};
    for (int i = 0; i < 2 + EF_ONE; i++)
        EF_BOTH(syscall(SYS_poll, bad[i], 1, 0), poll(bad[i], 1, 0));
    /* may be read, not written: the kernel waits, then cannot write the
     * answer (the hooks' look says so at once) */
    struct pollfd* ro = ef_ro(&(struct pollfd){p[0], POLLIN, 0}, sizeof(struct pollfd));
    EF_BOTH(syscall(SYS_poll, ro, 1, 20), poll(ro, 1, 20));
    CHECK_EQ(write(p[1], "x", 1), 1);
    EF_BOTH(syscall(SYS_poll, ro, 1, 20), poll(ro, 1, 20));
    close(p[0]);
    close(p[1]);
}

static void ef_epoll(void) {
    int ep = epoll_create1(EPOLL_CLOEXEC);
    CHECK_GE(ep, 0);
    struct epoll_event ev;
    struct timespec ts = {0, 0};
    void* bad[] = {ef_none, ef_none - 8, (void*)1};
    for (int i = 0; i < 2 + EF_ONE; i++) {
        EF_BOTH(syscall(SYS_epoll_pwait2, ep, &ev, 1, bad[i], NULL, 8),
                epoll_pwait2(ep, &ev, 1, bad[i], NULL));
        const void* m = i == 1 ? ef_none - 4 : bad[i];
        EF_BOTH(syscall(SYS_epoll_pwait2, ep, &ev, 1, &ts, m, 8), epoll_pwait2(ep, &ev, 1, &ts, m));
        EF_BOTH(syscall(SYS_epoll_pwait, ep, &ev, 1, 0, m, 8), epoll_pwait(ep, &ev, 1, 0, m));
    }
    close(ep);
}

/* a raw nanosleep a signal ends: its *rem */
static void ef_on_alarm(int sig) { (void)sig; }
static aco_rt_co_t* ef_sleeper_co;
static void ef_canceller(void* arg) {
    (void)arg;
    aco_rt_sleep(10 * MS);
    CHECK_EQ(aco_rt_cancel(ef_sleeper_co), 0);
}
static void ef_sleeper(void* arg) {
    struct timespec ts = {5, 0};
    int64_t t0 = now();
    errno = 0;
    CHECK_EQ(nanosleep(&ts, arg), -1);
    CHECK_EQ(errno, EFAULT);
    CHECK_LT(now() - t0, 2000 * MS);
}
static void ef_sleep(void) {
    void* bad[] = {ef_none, ef_none - 8, (void*)1};
    for (int i = 0; i < 2 + EF_ONE; i++) {
        EF_BOTH(syscall(SYS_nanosleep, bad[i], NULL), nanosleep(bad[i], NULL));
        for (int abs = 0; abs < 2; abs++) {
            int fl = abs ? TIMER_ABSTIME : 0;
            EF_FAULT(syscall(SYS_clock_nanosleep, CLOCK_MONOTONIC, fl, bad[i], NULL));
            CHECK_EQ(clock_nanosleep(CLOCK_MONOTONIC, fl, bad[i], NULL), EFAULT);
        }
    }
    /* *rem it may not write, the sleep ended early: EFAULT (a signal ends
     * the system call's, a cancel the hook's; not under TSan, which holds
     * a signal back until its next interceptor, past the handler here) */
    struct timespec* rem = ef_ro(&(struct timespec){0, 0}, sizeof(*rem));
    if (!TEST_TSAN) {
        struct sigaction sa = {.sa_handler = ef_on_alarm};
        CHECK_EQ(sigaction(SIGALRM, &sa, NULL), 0);
        ualarm(20000, 0);
        EF_FAULT(syscall(SYS_nanosleep, &(struct timespec){5, 0}, rem));
        test_watchdog();                /* (its handler and alarm again) */
    }
    for (int i = 0; i < 2; i++) {
        ef_sleeper_co = aco_rt_spawn(NULL, ef_sleeper, i ? (void*)rem : ef_none - 8);
        CHECK(ef_sleeper_co != NULL);
        aco_rt_co_t* c = aco_rt_spawn(NULL, ef_canceller, NULL);
        CHECK(c != NULL);
        CHECK_EQ(aco_rt_join(ef_sleeper_co, -1), 0);
        CHECK_EQ(aco_rt_join(c, -1), 0);
    }
}

/* a file of "0123456789" (unlinked) */
static int ef_file(void) {
    char name[] = "/tmp/test_hook_efXXXXXX";
    int f = mkstemp(name);
    CHECK_GE(f, 0);
    CHECK_EQ(unlink(name), 0);
    CHECK_EQ(write(f, "0123456789", 10), 10);
    return f;
}
static void ef_sendfile(void) {
    int f = ef_file(), sv[2];
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    char b[16];
    void* bad[] = {ef_none, ef_none - 4, (void*)1};
    for (int i = 0; i < 2 + EF_ONE; i++) {
        EF_BOTH(syscall(SYS_sendfile, sv[0], f, bad[i], 5), sendfile(sv[0], f, bad[i], 5));
        CHECK_EQ(recv(sv[1], b, sizeof(b), MSG_DONTWAIT), -1);     /* nothing sent */
    }
    /* read-only: the bytes go, then EFAULT */
    off_t* ro = ef_ro(&(off_t){2}, sizeof(off_t));
    for (int raw = 0; raw < 2; raw++) {
        EF_FAULT(raw ? syscall(SYS_sendfile, sv[0], f, ro, 5) : sendfile(sv[0], f, ro, 5));
        CHECK_EQ(recv(sv[1], b, sizeof(b), 0), 5);
        CHECK_EQ(memcmp(b, "23456", 5), 0);
        CHECK_EQ(*ro, 2);
    }
    close(f);
    close(sv[0]);
    close(sv[1]);
}
static void ef_splice(void) {
    int f = ef_file(), pp[2];
    CHECK_EQ(pipe(pp), 0);
    char b[16];
    void* bad[] = {ef_none, ef_none - 4, (void*)1};
    for (int i = 0; i < 2 + EF_ONE; i++) {
        EF_BOTH(syscall(SYS_splice, f, bad[i], pp[1], NULL, 5, 0), splice(f, bad[i], pp[1], NULL, 5, 0));
        CHECK_EQ(write(pp[1], "ab", 2), 2);
        EF_BOTH(syscall(SYS_splice, pp[0], NULL, f, bad[i], 2, 0), splice(pp[0], NULL, f, bad[i], 2, 0));
        CHECK_EQ(read(pp[0], b, sizeof(b)), 2);                      /* nothing moved */
        CHECK_EQ(memcmp(b, "ab", 2), 0);
    }
    loff_t* ro = ef_ro(&(loff_t){2}, sizeof(loff_t));
    for (int raw = 0; raw < 2; raw++) {
        EF_FAULT(raw ? syscall(SYS_splice, f, ro, pp[1], NULL, 5, 0) : splice(f, ro, pp[1], NULL, 5, 0));
        CHECK_EQ(read(pp[0], b, sizeof(b)), 5);
        CHECK_EQ(memcmp(b, "23456", 5), 0);
        CHECK_EQ(*ro, 2);
    }
    close(f);
    close(pp[0]);
    close(pp[1]);
}

static void ef_case_co(void* arg) {
    switch ((int)(intptr_t)arg) {
    case EF_SELECT_TIME: ef_select_time(); break;
    case EF_SELECT_SETS: ef_select_sets(); break;
    case EF_PSELECT: ef_pselect(); break;
    case EF_PPOLL: ef_ppoll(); break;
    case EF_POLL: ef_poll(); break;
    case EF_EPOLL: ef_epoll(); break;
    case EF_SLEEP: ef_sleep(); break;
    case EF_SENDFILE: ef_sendfile(); break;
    case EF_SPLICE: ef_splice(); break;
    }
}
static void ef_child(void* arg) {
    test_watchdog();
    int bs[8], nb = test_backends(bs, 8);
    for (int i = 0; i < nb; i++) {
        test_backend_label = test_backend_str(bs[i]);
        aco_rt_sched_t* s = test_sched_on(bs[i], NULL);
        test_go(s, ef_case_co, arg);
        aco_rt_sched_free(s);
    }
}
static void fault_cases(void) {
    if (MEMCHECK) return;
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    char* m = mmap(NULL, 2 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(m != MAP_FAILED);
    CHECK_EQ(mprotect(m + pg, pg, PROT_NONE), 0);
    ef_none = m + pg;
    int bad = 0;
    for (int c = 0; c < EF_N; c++) {
        int st = 0, sig = test_in_child(ef_child, (void*)(intptr_t)c, &st);
        if (sig || st) {
            fprintf(stderr, "FAIL: %s in a co: %s %d\n", ef_names[c],
                    sig ? "died of signal" : "exited with", sig ? sig : st);
            bad++;
        }
    }
    CHECK_EQ(munmap(m, 2 * pg), 0);
    CHECK_EQ(bad, 0);
}

/* epoll_wait in a co: parks on the epoll descriptor. */
static void epoll_co(void* arg) {
    (void)arg;
    int ep = epoll_create1(EPOLL_CLOEXEC);
    CHECK_GE(ep, 0);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = mq[0]}, out[4];
    CHECK_EQ(epoll_ctl(ep, EPOLL_CTL_ADD, mq[0], &ev), 0);
    int64_t t0 = now();
    CHECK_EQ(epoll_wait(ep, out, 4, 15), 0);
    CHECK_GE(now() - t0, 15 * MS);
    aco_rt_detach(aco_rt_spawn(NULL, late_write_co, (void*)(intptr_t)5));
    aco_rt_stats_t a, b;
    aco_rt_stats(NULL, &a);
    CHECK_EQ(epoll_wait(ep, out, 4, -1), 1);
    aco_rt_stats(NULL, &b);
    CHECK_EQ(out[0].data.fd, mq[0]);
    CHECK_LE(b.switches - a.switches, 3);
    char c;
    CHECK_EQ(read(mq[0], &c, 1), 1);
    aco_rt_detach(aco_rt_spawn(NULL, late_write_co, (void*)(intptr_t)5));
    struct timespec ts = {5, 0};
    CHECK_EQ(epoll_pwait2(ep, out, 4, &ts, NULL), 1);
    CHECK_EQ(read(mq[0], &c, 1), 1);
    errno = 0;
    CHECK_EQ(epoll_wait(ep, out, 0, 10), -1);               /* the kernel's EINVAL */
    CHECK_EQ(errno, EINVAL);
    close(ep);
}

/* A cancelled co: every hooked wait fails at once with ECANCELED (which
 * libraries do not retry); a sleep begun then sleeps its whole time (a
 * library's loop of sleeps cannot spin), while one that a cancel ends
 * says EINTR with nothing left. */
static int64_t ticks, tick_late;
static volatile int ticking;

static void ticker_co(void* arg) {
    (void)arg;
    while (ticking) {
        int64_t due = now() + MS;
        aco_rt_sleep_until(due);
        if (now() - due > tick_late) tick_late = now() - due;
        ticks++;
    }
}

static void sleep_victim(void* arg) {
    (void)arg;
    struct timespec ts = {10, 0}, rem = {1, 1};
    int64_t t0 = now();
    errno = 0;
    CHECK_EQ(nanosleep(&ts, &rem), -1);                     /* the cancel ends it */
    CHECK_EQ(errno, EINTR);
    CHECK_EQ(rem.tv_sec, 0);
    CHECK_EQ(rem.tv_nsec, 0);
    CHECK_LT(now() - t0, 5 * 1000 * MS);
    CHECK(aco_rt_cancelled());
    /* now cancelled: waits fail at once */
    struct pollfd two[2] = {{mp[0], POLLIN, 0}, {mq[0], POLLIN, 0}};
    t0 = now();
    errno = 0;
    CHECK_EQ(poll(two, 2, 1000), -1);
    CHECK_EQ(errno, ECANCELED);
    errno = 0;
    CHECK_EQ(poll(two, 1, 1000), -1);
    CHECK_EQ(errno, ECANCELED);
    fd_set r;
    FD_ZERO(&r);
    FD_SET(mp[0], &r);
    errno = 0;
    CHECK_EQ(select(mp[0] + 1, &r, NULL, NULL, NULL), -1);
    CHECK_EQ(errno, ECANCELED);
    char c;
    errno = 0;
    CHECK_EQ(read(mp[0], &c, 1), -1);
    CHECK_EQ(errno, ECANCELED);
    CHECK_LT(now() - t0, 100 * MS);
    /* sleeps begun cancelled: their whole time, the other cos running */
    int64_t ticks0 = ticks, cpu0 = 0;
    struct timespec c0;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
    cpu0 = (int64_t)c0.tv_sec * 1000000000 + c0.tv_nsec;
    t0 = now();
    for (int i = 0; i < 10; i++) CHECK_EQ(usleep(2000), 0);
    ts = (struct timespec){0, 5 * MS};
    CHECK_EQ(nanosleep(&ts, NULL), 0);
    CHECK_EQ(clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL), 0);
    CHECK_EQ(sleep(0), 0u);
    int64_t wall = now() - t0;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
    int64_t cpu = (int64_t)c0.tv_sec * 1000000000 + c0.tv_nsec - cpu0;
    CHECK_GE(wall, 30 * MS);
    CHECK_GT(ticks - ticks0, 5);                            /* the ticker ran */
    if (!SLOW) CHECK_LT(cpu, wall / 2);                     /* no spin */
    CHECK(aco_rt_cancelled());                              /* still cancelled */
    errno = 0;
    CHECK_EQ(read(mp[0], &c, 1), -1);
    CHECK_EQ(errno, ECANCELED);
    ticking = 0;
}

static aco_rt_co_t* sleep_victim_co;

static void sleep_canceller(void* arg) {
    (void)arg;
    aco_rt_sleep(10 * MS);
    CHECK_EQ(aco_rt_cancel(sleep_victim_co), 0);
}

/* SO_RCVTIMEO: EAGAIN after it, as the kernel's; each try again waits
 * the whole timeout again (no spin). */
static void rcvtimeo_co(void* arg) {
    (void)arg;
    int sv[2];
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    struct timeval tv = {0, 10000};
    CHECK_EQ(setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
    char b[4];
    int64_t t0 = now();
    for (int i = 0; i < 3; i++) {
        errno = 0;
        CHECK_EQ(recv(sv[0], b, sizeof(b), 0), -1);
        CHECK_EQ(errno, EAGAIN);
        CHECK_GE(now() - t0, (i + 1) * 10 * MS);
    }
    close(sv[0]);
    close(sv[1]);
}

/* The socket timeouts as the kernel reads them: a negative one is no wait
 * (EAGAIN at once: it waited for good), SO_RCVTIMEO_NEW's form is one too
 * (it was not seen: no timeout), and one too long to count is none (its
 * nanoseconds overflowed).  A guard cancels the co after 2 s: a wait for
 * good fails the checks instead of hanging. */
static volatile int timeo_done;

static void late_byte(void* arg) {
    aco_rt_sleep(20 * MS);
    CHECK_EQ(write(*(int*)arg, "y", 1), 1);
}

static void timeo_edges_co(void* arg) {
    (void)arg;
    int sv[2];
    char b[4];
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    struct timeval neg = {-1, 0};
    CHECK_EQ(setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &neg, sizeof(neg)), 0);
    int64_t t0 = now();
    errno = 0;
    CHECK_EQ(recv(sv[0], b, sizeof(b), 0), -1);
    CHECK_EQ(errno, EAGAIN);
    CHECK_LT(now() - t0, 500 * MS);
    /* the write side: fill it, then a send says EAGAIN at once */
    CHECK_EQ(setsockopt(sv[1], SOL_SOCKET, SO_SNDTIMEO, &neg, sizeof(neg)), 0);
    static char fill[65536];
    while (send(sv[1], fill, sizeof(fill), MSG_DONTWAIT) > 0) {}
    t0 = now();
    errno = 0;
    CHECK_EQ(send(sv[1], fill, sizeof(fill), 0), -1);
    CHECK_EQ(errno, EAGAIN);
    CHECK_LT(now() - t0, 500 * MS);
    close(sv[0]);
    close(sv[1]);

    /* accept with no wait */
    int l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    CHECK_EQ(bind(l, (struct sockaddr*)&a, sizeof(a)), 0);
    CHECK_EQ(listen(l, 4), 0);
    CHECK_EQ(setsockopt(l, SOL_SOCKET, SO_RCVTIMEO, &neg, sizeof(neg)), 0);
    t0 = now();
    errno = 0;
    CHECK_EQ(accept(l, NULL, NULL), -1);
    CHECK_EQ(errno, EAGAIN);
    CHECK_LT(now() - t0, 500 * MS);
    close(l);

    /* SO_RCVTIMEO_NEW: struct __kernel_sock_timeval, 20 ms */
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    int64_t tv64[2] = {0, 20000};
    CHECK_EQ(setsockopt(sv[0], SOL_SOCKET, 66 /* SO_RCVTIMEO_NEW */, tv64, sizeof(tv64)), 0);
    t0 = now();
    errno = 0;
    CHECK_EQ(recv(sv[0], b, sizeof(b), 0), -1);
    CHECK_EQ(errno, EAGAIN);
    CHECK_GE(now() - t0, 20 * MS);

    /* a timeout too long to count: none (the byte comes after 20 ms) */
    struct timeval huge = {LONG_MAX, 0};
    CHECK_EQ(setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &huge, sizeof(huge)), 0);
    aco_rt_detach(aco_rt_spawn(aco_rt_sched_current(), late_byte, &sv[1]));
    CHECK_EQ(recv(sv[0], b, sizeof(b), 0), 1);
    close(sv[0]);
    close(sv[1]);

    /* a datagram by address to a Unix peer whose queue is full: the
     * timeout, asleep (a wait for POLLOUT alone ended at once, for good) */
    int r = socket(AF_UNIX, SOCK_DGRAM, 0), d = socket(AF_UNIX, SOCK_DGRAM, 0);
    struct sockaddr_un ua = {.sun_family = AF_UNIX};
    snprintf(ua.sun_path, sizeof(ua.sun_path), "/tmp/test_hook_dgram.%d", (int)getpid());
    unlink(ua.sun_path);
    CHECK_EQ(bind(r, (struct sockaddr*)&ua, sizeof(ua)), 0);
    while (sendto(d, "f", 1, MSG_DONTWAIT, (struct sockaddr*)&ua, sizeof(ua)) == 1) {}
    struct timeval tv100 = {0, 100000};
    CHECK_EQ(setsockopt(d, SOL_SOCKET, SO_SNDTIMEO, &tv100, sizeof(tv100)), 0);
    t0 = now();
    errno = 0;
    CHECK_EQ(sendto(d, "x", 1, 0, (struct sockaddr*)&ua, sizeof(ua)), -1);
    CHECK_EQ(errno, EAGAIN);
    CHECK_GE(now() - t0, 100 * MS);
    close(r);
    close(d);
    unlink(ua.sun_path);
    /* MSG_WAITALL on a seqpacket socket: one record (a buffer off the
     * stack, which io_uring takes: its own MSG_WAITALL waited for more) */
    static char hb[8];
    CHECK_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
    CHECK_EQ(send(sv[1], "ab", 2, 0), 2);
    CHECK_EQ(recv(sv[0], hb, sizeof(hb), MSG_WAITALL), 2);
    close(sv[0]);
    close(sv[1]);
    timeo_done = 1;
}

static void timeo_guard(void* arg) {
    for (int i = 0; i < 200 && !timeo_done; i++) aco_rt_sleep(10 * MS);
    if (!timeo_done) CHECK_EQ(aco_rt_cancel((aco_rt_co_t*)arg), 0);
}

/* poll with nothing to wait for but no deadline is a sleep for good, not
 * a deadlock: another thread's cancel ends it. */
static void forever_co(void* arg) {
    (void)arg;
    struct pollfd none = {-1, POLLIN, 0};
    errno = 0;
    CHECK_EQ(poll(&none, 1, -1), -1);
    CHECK_EQ(errno, ECANCELED);
}

static void* cancel_later(void* arg) {
    struct timespec ts = {0, 20 * MS};
    nanosleep(&ts, NULL);
    CHECK_EQ(aco_rt_cancel((aco_rt_co_t*)arg), 0);
    return NULL;
}

static void many_body(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_hooks_active(), 1);     /* hook.c's object is linked in */
    test_go(s, many_co, NULL);
    test_go(s, select_co, NULL);
    test_go(s, epoll_co, NULL);
    test_go(s, rcvtimeo_co, NULL);
    timeo_done = 0;
    aco_rt_co_t* tc = aco_rt_spawn(s, timeo_edges_co, NULL);
    aco_rt_detach(aco_rt_spawn(s, timeo_guard, tc));
    aco_rt_detach(tc);
    test_run(s);
    CHECK(timeo_done);
    aco_rt_co_t* fc = aco_rt_spawn(s, forever_co, NULL);
    aco_rt_detach(fc);
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, cancel_later, fc), 0);
    test_run(s);                        /* not -EDEADLK */
    CHECK_EQ(pthread_join(th, NULL), 0);
    ticking = 1;
    ticks = tick_late = 0;
    aco_rt_detach(aco_rt_spawn(s, ticker_co, NULL));     /* until the victim ends */
    sleep_victim_co = aco_rt_spawn(s, sleep_victim, NULL);
    aco_rt_detach(sleep_victim_co);
    aco_rt_detach(aco_rt_spawn(s, sleep_canceller, NULL));
    test_run(s);
    /* (a thread blocked by the victim's cancelled 10 s nanosleep would
     * show as a tick 10 s late; a bound near the scheduling delay instead
     * failed under a loaded machine's, load 7-12 on 2 CPUs) */
    CHECK_LT(tick_late, 2000 * MS);
    for (int i = 0; i < 2; i++) { close(mp[i]); close(mq[i]); }
}

/* Outside cos, on a descriptor the runtime made non-blocking: a read still
 * blocks until a thread writes. */
static int late_fd;
static void* late_writer(void* arg) {
    (void)arg;
    struct timespec ts = {0, 20000000};
    nanosleep(&ts, NULL);
    CHECK_EQ(write(late_fd, "z", 1), 1);
    return NULL;
}

static int made_fd[2];
static void made_reader(void* arg) {
    (void)arg;
    char b[2];
    CHECK_EQ(read(made_fd[0], b, 1), 1);        /* waits (RWF_NOWAIT tries) */
}

static int made_dup;
static void made_dup_reader(void* arg) {
    (void)arg;
    char b[2];
    CHECK_EQ(read(made_dup, b, 1), 1);          /* waits too (once EAGAIN at once) */
}

static void make_nonblock_co(void* arg) {
    (void)arg;
    aco_rt_co_t* r = aco_rt_spawn(NULL, made_reader, NULL);
    aco_rt_yield();
    CHECK_EQ(write(made_fd[1], "y", 1), 1);
    CHECK_EQ(aco_rt_join(r, -1), 0);
    /* a copy of the number is the same file: the runtime's O_NONBLOCK
     * stays hidden on it, and a read on it waits as on the original */
    for (int k = 0; k < 2; k++) {
        made_dup = k ? fcntl(made_fd[0], F_DUPFD_CLOEXEC, 100) : dup(made_fd[0]);
        CHECK_GE(made_dup, 0);
        CHECK_EQ(fcntl(made_dup, F_GETFL) & O_NONBLOCK, 0);
        r = aco_rt_spawn(NULL, made_dup_reader, NULL);
        aco_rt_yield();
        CHECK_EQ(write(made_fd[1], "d", 1), 1);
        CHECK_EQ(aco_rt_join(r, -1), 0);
        CHECK_EQ(close(made_dup), 0);
    }
    made_dup = dup(made_fd[0]);                 /* (for blocking_after_co) */
    CHECK_GE(made_dup, 0);
}

static void blocking_after_co(void) {
    CHECK_EQ(pipe(made_fd), 0);
    aco_rt_opts_t o = {.backend = ACO_RT_BACKEND_EPOLL};     /* (readiness: O_NONBLOCK) */
    aco_rt_sched_t* s = test_sched(&o);
    test_go(s, make_nonblock_co, NULL);
    aco_rt_sched_free(s);
    CHECK_EQ((int)syscall(SYS_fcntl, made_fd[0], F_GETFL, 0) & O_NONBLOCK, 0);
    CHECK_EQ(fcntl(made_fd[0], F_GETFL) & O_NONBLOCK, 0);
    char b[2];
    late_fd = made_fd[1];
    pthread_t t;
    int64_t t0 = now();                         /* before the writer's 20 ms start */
    CHECK_EQ(pthread_create(&t, NULL, late_writer, NULL), 0);
    ssize_t n;
    n = read(made_fd[0], b, 1);                 /* blocks, as the program expects */
    CHECK_EQ(n, 1);
    CHECK_EQ(b[0], 'z');
    CHECK_GE(now() - t0, 15 * MS);
    pthread_join(t, NULL);
    /* the copy made in a co blocks outside cos too (it once said EAGAIN) */
    CHECK_EQ(fcntl(made_dup, F_GETFL) & O_NONBLOCK, 0);
    t0 = now();
    CHECK_EQ(pthread_create(&t, NULL, late_writer, NULL), 0);
    n = read(made_dup, b, 1);
    CHECK_EQ(n, 1);
    CHECK_EQ(b[0], 'z');
    CHECK_GE(now() - t0, 15 * MS);
    pthread_join(t, NULL);
    close(made_dup);
    close(made_fd[0]);
    close(made_fd[1]);
}

/* The runtime's own calls (not the hooks') made a descriptor O_NONBLOCK:
 * aco_rt_accept's listening socket on epoll.  The hooks hide it all the
 * same: F_GETFL does not show it, and accept outside cos waits for a
 * client (it once said EAGAIN at once). */
static int rc_lfd, rc_port;
static void rc_connect(void) {
    int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK_GE(c, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)rc_port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK_EQ(connect(c, (struct sockaddr*)&a, sizeof(a)), 0);
    CHECK_EQ(close(c), 0);
}
static void* rc_late_client(void* arg) {
    (void)arg;
    struct timespec ts = {0, 20000000};
    nanosleep(&ts, NULL);
    rc_connect();
    return NULL;
}
static void rc_accept_co(void* arg) {
    (void)arg;
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, rc_late_client, NULL), 0);
    int fd = aco_rt_accept(rc_lfd, NULL, NULL, SOCK_CLOEXEC, aco_rt_in_ms(5000));
    CHECK_GE(fd, 0);
    CHECK_EQ(aco_rt_close(fd), 0);
    pthread_join(t, NULL);
    CHECK((int)syscall(SYS_fcntl, rc_lfd, F_GETFL, 0) & O_NONBLOCK);    /* the runtime's */
    CHECK_EQ(fcntl(rc_lfd, F_GETFL) & O_NONBLOCK, 0);
    /* the program's F_SETFL keeps the flag the runtime set underneath */
    CHECK_EQ(fcntl(rc_lfd, F_SETFL, fcntl(rc_lfd, F_GETFL)), 0);
    CHECK((int)syscall(SYS_fcntl, rc_lfd, F_GETFL, 0) & O_NONBLOCK);
    CHECK_EQ(fcntl(rc_lfd, F_GETFL) & O_NONBLOCK, 0);
    /* and FIONBIO's clear too; one whose int the kernel cannot read says
     * its EFAULT, the flag kept (not under memcheck: fionbio_fault) */
    int off = 0;
    CHECK_EQ(ioctl(rc_lfd, FIONBIO, &off), 0);
    CHECK((int)syscall(SYS_fcntl, rc_lfd, F_GETFL, 0) & O_NONBLOCK);
    CHECK_EQ(fcntl(rc_lfd, F_GETFL) & O_NONBLOCK, 0);
#if !MEMCHECK
    long pg = sysconf(_SC_PAGESIZE);
    void* none = mmap(NULL, (size_t)pg, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(none != MAP_FAILED);
    errno = 0;
    CHECK_EQ(ioctl(rc_lfd, FIONBIO, none), -1);
    CHECK_EQ(errno, EFAULT);
    CHECK((int)syscall(SYS_fcntl, rc_lfd, F_GETFL, 0) & O_NONBLOCK);
    CHECK_EQ(fcntl(rc_lfd, F_GETFL) & O_NONBLOCK, 0);
    CHECK_EQ(munmap(none, (size_t)pg), 0);
#endif
}
static void runtime_calls_hidden(void) {
    rc_lfd = listen_loopback(&rc_port);
    aco_rt_opts_t o = {.backend = ACO_RT_BACKEND_EPOLL};     /* (readiness: O_NONBLOCK) */
    aco_rt_sched_t* s = test_sched(&o);
    test_go(s, rc_accept_co, NULL);
    aco_rt_sched_free(s);
    CHECK_EQ(fcntl(rc_lfd, F_GETFL) & O_NONBLOCK, 0);
    pthread_t t;
    int64_t t0 = now();                         /* before the client's 20 ms start */
    CHECK_EQ(pthread_create(&t, NULL, rc_late_client, NULL), 0);
    int fd = accept(rc_lfd, NULL, NULL);        /* blocks, as the program expects */
    CHECK_GE(fd, 0);
    CHECK_GE(now() - t0, 15 * MS);
    pthread_join(t, NULL);
    close(fd);
    close(rc_lfd);
}

/* ------------------------------------------------------------------------ */
/* Outside cos beside a scheduler: libc's blocking calls, as they were      */
/* ------------------------------------------------------------------------ */

/* A co used the pipe and the socket pair (the runtime's calls, which on
 * epoll make them O_NONBLOCK); the scheduler stays.  The main thread,
 * outside cos, then gets what libc's blocking calls give: a big write (or
 * writev) to the pipe moves every byte, a signal whose handler lacks SA_RESTART ends
 * a waiting read or write with EINTR (one with it does not), SO_RCVTIMEO
 * times out once (the kernel's wait on a descriptor still blocking, not
 * that and another).  Each of these broke once (short write, no EINTR, a
 * timeout twice over). */
static int pb_p[2], pb_sv[2];
static pthread_t pb_main;
static void pb_co(void* arg) {
    (void)arg;
    /* splices in a co (epoll: both ends of the pipe O_NONBLOCK from then
     * on, as splice has no flag of its own for that), a receive on the
     * socket pair (the hooks then take it for one the runtime may have
     * made non-blocking: on either backend it is still blocking) */
    char b[4096];
    CHECK_EQ(write(pb_p[1], "abcd", 4), 4);
    CHECK_EQ(splice(pb_p[0], NULL, pb_sv[1], NULL, 4, 0), 4);
    CHECK_EQ(recv(pb_sv[0], b, 4, 0), 4);
    int f = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    CHECK_GE(f, 0);
    loff_t o = 0;
    CHECK_EQ(splice(f, &o, pb_p[1], NULL, sizeof(b), 0), (ssize_t)sizeof(b));
    CHECK_EQ(read(pb_p[0], b, sizeof(b)), (ssize_t)sizeof(b));
    close(f);
}
static void pb_handler(int sig) { (void)sig; }
static void pb_on_usr1(int restart) {
    struct sigaction a;
    memset(&a, 0, sizeof(a));
    a.sa_handler = pb_handler;
    a.sa_flags = restart ? SA_RESTART : 0;
    CHECK_EQ(sigaction(SIGUSR1, &a, NULL), 0);
}
/* 50 ms: SIGUSR1 to the main thread; 100 ms later: a byte into the pipe
 * (arg 1) or 64 KiB out of it (arg 2) */
static void* pb_signaller(void* arg) {
    usleep(50000);
    pthread_kill(pb_main, SIGUSR1);
    usleep(100000);
    static char b[65536];
    if (arg == (void*)1) CHECK_EQ(syscall(SYS_write, pb_p[1], "z", 1), 1);
    else CHECK_EQ(syscall(SYS_read, pb_p[0], b, sizeof(b)), (long)sizeof(b));
    return NULL;
}
static void* pb_drainer(void* arg) {
    (void)arg;
    static char b[65536];
    size_t got = 0;
    while (got < (1u << 20)) {
        usleep(2000);
        ssize_t n = read(pb_p[0], b, sizeof(b));    /* (a plain thread: blocks) */
        CHECK_GT(n, 0);
        got += (size_t)n;
    }
    CHECK_EQ(got, 1u << 20);
    return NULL;
}
static void plain_beside_sched(int backend) {
    CHECK_EQ(pipe(pb_p), 0);
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, pb_sv), 0);
    aco_rt_opts_t o = {.backend = backend};
    aco_rt_sched_t* s = test_sched(&o);
    test_go(s, pb_co, NULL);
    pb_main = pthread_self();
    if (backend == ACO_RT_BACKEND_EPOLL) {  /* (what the checks below are about) */
        CHECK((int)syscall(SYS_fcntl, pb_p[0], F_GETFL, 0) & O_NONBLOCK);
        CHECK((int)syscall(SYS_fcntl, pb_p[1], F_GETFL, 0) & O_NONBLOCK);
    }
    /* every byte of a big write */
    char* big = calloc(1, 1u << 20);
    CHECK(big != NULL);
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, pb_drainer, NULL), 0);
    CHECK_EQ(write(pb_p[1], big, 1u << 20), 1 << 20);
    pthread_join(t, NULL);
    struct iovec halves[3] = {{big, 1u << 19}, {big, 0}, {big + (1u << 19), 1u << 19}};
    CHECK_EQ(pthread_create(&t, NULL, pb_drainer, NULL), 0);
    CHECK_EQ(writev(pb_p[1], halves, 3), 1 << 20);
    pthread_join(t, NULL);
    free(big);
    /* a signal: EINTR without SA_RESTART, for a read and a write */
    char b[65536];
    pb_on_usr1(0);
    CHECK_EQ(pthread_create(&t, NULL, pb_signaller, (void*)1), 0);
    errno = 0;
    CHECK_EQ(read(pb_p[0], b, 1), -1);
    CHECK_EQ(errno, EINTR);
    pthread_join(t, NULL);
    CHECK_EQ(read(pb_p[0], b, 1), 1);           /* the byte that came after */
    if (backend == ACO_RT_BACKEND_EPOLL) {      /* a full pipe (O_NONBLOCK underneath) */
        memset(b, 0, sizeof(b));
        size_t filled = 0;
        long k;
        while ((k = syscall(SYS_write, pb_p[1], b, sizeof(b))) > 0) filled += (size_t)k;
        CHECK_EQ(filled, sizeof(b));
        CHECK_EQ(pthread_create(&t, NULL, pb_signaller, (void*)2), 0);
        errno = 0;
        CHECK_EQ(write(pb_p[1], b, 10), -1);
        CHECK_EQ(errno, EINTR);
        pthread_join(t, NULL);
    }
    /* with SA_RESTART the read goes on to the byte (not under TSan: its
     * signal() installs the watchdog's SIGALRM handler without SA_RESTART,
     * and while any handler lacks it the hooks say EINTR: hooks.md) */
#if !TEST_TSAN
    pb_on_usr1(1);
    int64_t t0 = now();
    CHECK_EQ(pthread_create(&t, NULL, pb_signaller, (void*)1), 0);
    CHECK_EQ(read(pb_p[0], b, 1), 1);
    CHECK_EQ(b[0], 'z');
    CHECK_GE(now() - t0, 100 * MS);
    pthread_join(t, NULL);
#endif
    signal(SIGUSR1, SIG_DFL);
    /* SO_RCVTIMEO: one timeout's wait, not two */
    struct timeval tv = {0, 200000};
    CHECK_EQ(setsockopt(pb_sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
    int64_t t1 = now();
    errno = 0;
    CHECK_EQ(recv(pb_sv[0], b, 1, 0), -1);
    CHECK_EQ(errno, EAGAIN);
    CHECK_GE(now() - t1, 190 * MS);
    CHECK_LT(now() - t1, 390 * MS);
    aco_rt_sched_free(s);
    close(pb_p[0]);
    close(pb_p[1]);
    close(pb_sv[0]);
    close(pb_sv[1]);
}

/* ------------------------------------------------------------------------ */
/* getaddrinfo: on a helper thread while the co parks                       */
/* ------------------------------------------------------------------------ */

static int gai_marker;
static void gai_marker_co(void* arg) { (void)arg; gai_marker = 1; }

/* localhost:80 resolved: 127.0.0.1 (or ::1) and port 80 in the result. */
static void check_localhost(const struct addrinfo* ai) {
    CHECK(ai != NULL);
    if (ai->ai_family == AF_INET) {
        const struct sockaddr_in* s4 = (const struct sockaddr_in*)ai->ai_addr;
        CHECK_EQ(ntohl(s4->sin_addr.s_addr), INADDR_LOOPBACK);
        CHECK_EQ(ntohs(s4->sin_port), 80);
    } else {
        CHECK_EQ(ai->ai_family, AF_INET6);
        CHECK_EQ(ntohs(((const struct sockaddr_in6*)ai->ai_addr)->sin6_port), 80);
    }
}

static void gai_co(void* arg) {
    (void)arg;
    /* arguments on the co's (share) stack: the hook copies them */
    char node[] = "localhost", service[] = "80";
    struct addrinfo hints;
    memset(&hints, 0, sizeof(hints));
    hints.ai_socktype = SOCK_STREAM;
    struct addrinfo* res = NULL;
    gai_marker = 0;
    CHECK(aco_rt_spawn(NULL, gai_marker_co, NULL) != NULL);
    CHECK_EQ(getaddrinfo(node, service, &hints, &res), 0);
    CHECK_EQ(gai_marker, 1);            /* it parked: the marker ran */
    check_localhost(res);
    freeaddrinfo(res);
    CHECK_EQ(getaddrinfo("no-such-host.invalid", NULL, NULL, &res) != 0, 1);
    /* a cancelled co: EAI_SYSTEM, errno ECANCELED */
    CHECK_EQ(aco_rt_cancel(aco_rt_self()), 0);
    errno = 0;
    CHECK_EQ(getaddrinfo(node, service, &hints, &res), EAI_SYSTEM);
    CHECK_EQ(errno, ECANCELED);
}

static void gai_body(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    test_go(s, gai_co, NULL);
    struct addrinfo* res = NULL;        /* outside cos: libc's, here */
    CHECK_EQ(getaddrinfo("localhost", "80", NULL, &res), 0);
    check_localhost(res);
    freeaddrinfo(res);
}

/* The fortified read's size check holds through the hook: a read longer
 * than its buffer aborts (glibc's __chk_fail), in a child. */
static void chk_fails(void) {
    pid_t pid = fork();
    CHECK_GE(pid, 0);
    if (pid == 0) {
        int p[2], null = open("/dev/null", O_WRONLY);
        char b[4];
        if (null >= 0) dup2(null, 2);   /* (glibc's "buffer overflow detected") */
        if (pipe(p) == 0) __read_chk(p[0], b, 8, sizeof(b));
        _exit(0);
    }
    int st;
    CHECK_EQ(waitpid(pid, &st, 0), pid);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
}

int main(void) {
    outside();
    fionbio_fault();
    fault_cases();
    chk_fails();
    test_on_backends(NULL, gai_body, NULL);
    test_on_backends(NULL, body, NULL);
    test_on_backends(NULL, many_body, NULL);
    blocking_after_co();
    runtime_calls_hidden();
    int bs[8], nb = test_backends(bs, 8);
    for (int i = 0; i < nb; i++) plain_beside_sched(bs[i]);
    outside();
    select_big_table();
    printf("test_hook: all passed\n");
    return 0;
}
