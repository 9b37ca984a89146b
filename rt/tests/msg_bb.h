/* msg_bb.h - what the black-box tests of aco_rt_sendmsg and aco_rt_recvmsg
 * share (test_msg_bb_api, test_msg_bb_ends, test_msg_bb_share): datagram
 * sockets of each kind on loopback, descriptors counted in /proc/self/fd,
 * one message sent and received through a msghdr built from arguments,
 * with or without descriptors (SCM_RIGHTS). */
#ifndef MSG_BB_H
#define MSG_BB_H

#include "io_bb.h"

#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <sys/un.h>

enum { K_UDP4, K_UDP6, K_UNIX_PAIR, K_UNIX_NAMED, K_SEQPACKET, K_STREAM, K_TCP, NKINDS };
static const char* const kind_name[NKINDS] __attribute__((unused)) = {
    "udp4", "udp6", "unix dgram pair", "unix dgram named", "seqpacket", "unix stream", "tcp"};

/* a datagram socket of family fam bound on loopback, port 0: its address in
 * *a, *al */
static __attribute__((unused)) int udp_bound(int fam, struct sockaddr_storage* a, socklen_t* al) {
    int u = socket(fam, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    CHECK_GE(u, 0);
    memset(a, 0, sizeof(*a));
    if (fam == AF_INET) {
        struct sockaddr_in* s4 = (struct sockaddr_in*)a;
        s4->sin_family = AF_INET;
        s4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        *al = sizeof(*s4);
    } else {
        struct sockaddr_in6* s6 = (struct sockaddr_in6*)a;
        s6->sin6_family = AF_INET6;
        s6->sin6_addr = in6addr_loopback;
        *al = sizeof(*s6);
    }
    CHECK_EQ(bind(u, (struct sockaddr*)a, *al), 0);
    CHECK_EQ(getsockname(u, (struct sockaddr*)a, al), 0);
    return u;
}

/* a Unix datagram socket bound to a fresh abstract name: its address */
static unsigned abstract_seq;
static __attribute__((unused)) int unix_bound(int type, struct sockaddr_storage* a, socklen_t* al) {
    int u = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
    CHECK_GE(u, 0);
    memset(a, 0, sizeof(*a));
    struct sockaddr_un* su = (struct sockaddr_un*)a;
    su->sun_family = AF_UNIX;
    int n = snprintf(su->sun_path + 1, sizeof(su->sun_path) - 1, "msg_bb.%08d.%06u", (int)getpid(),
                     __atomic_fetch_add(&abstract_seq, 1, __ATOMIC_RELAXED));
    *al = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
    CHECK_EQ(bind(u, (struct sockaddr*)a, *al), 0);
    return u;
}

/* a sender and a receiver of kind k (fd[0] sends to fd[1]; the datagram
 * kinds' sender is connected to the receiver, and bound: its address in
 * *sa, *sal if not NULL) */
static __attribute__((unused)) void mk_pair(int k, int fd[2], struct sockaddr_storage* sa,
                                            socklen_t* sal) {
    struct sockaddr_storage ra, ta;
    socklen_t ral, tal;
    if (sa == NULL) sa = &ta;
    if (sal == NULL) sal = &tal;
    *sal = 0;
    switch (k) {
    case K_UDP4:
    case K_UDP6: {
        int fam = k == K_UDP4 ? AF_INET : AF_INET6;
        fd[1] = udp_bound(fam, &ra, &ral);
        fd[0] = udp_bound(fam, sa, sal);
        CHECK_EQ(connect(fd[0], (struct sockaddr*)&ra, ral), 0);
        break;
    }
    case K_UNIX_PAIR:
        CHECK_EQ(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, fd), 0);
        *sal = sizeof(sa_family_t);
        memset(sa, 0, sizeof(*sa));
        sa->ss_family = AF_UNIX;
        break;
    case K_UNIX_NAMED:
        fd[1] = unix_bound(SOCK_DGRAM, &ra, &ral);
        fd[0] = unix_bound(SOCK_DGRAM, sa, sal);
        CHECK_EQ(connect(fd[0], (struct sockaddr*)&ra, ral), 0);
        break;
    case K_SEQPACKET:
    case K_STREAM:
        CHECK_EQ(socketpair(AF_UNIX, (k == K_SEQPACKET ? SOCK_SEQPACKET : SOCK_STREAM) | SOCK_CLOEXEC,
                            0, fd),
                 0);
        break;
    case K_TCP: {
        struct sockaddr_in a;
        int l = loopback_listener(&a, 4);
        fd[0] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        CHECK_GE(fd[0], 0);
        CHECK_EQ(connect(fd[0], (struct sockaddr*)&a, sizeof(a)), 0);
        fd[1] = accept4(l, NULL, NULL, SOCK_CLOEXEC);
        CHECK_GE(fd[1], 0);
        aco_rt_close(l);
        break;
    }
    default:
        CHECK(0);
    }
}

static __attribute__((unused)) unsigned char pat(unsigned seed, size_t i) {
    return (unsigned char)(seed * 31u + i * 7u + (i >> 8));
}

/* a control buffer for up to 8 descriptors, aligned for cmsghdr */
typedef union {
    char buf[CMSG_SPACE(8 * sizeof(int))];
    struct cmsghdr align;
} ctl8_t;

/* fill m to send n bytes of buf (to name, if not NULL) with nfds
 * descriptors of fds in ctl */
static __attribute__((unused)) void fill_send(struct msghdr* m, struct iovec* v, const void* buf,
                                              size_t n, const void* name, socklen_t nl,
                                              const int* fds, int nfds, ctl8_t* ctl) {
    memset(m, 0, sizeof(*m));
    v->iov_base = (void*)buf;
    v->iov_len = n;
    m->msg_iov = v;
    m->msg_iovlen = 1;
    m->msg_name = (void*)name;
    m->msg_namelen = name ? nl : 0;
    if (nfds > 0) {
        memset(ctl, 0, sizeof(*ctl));
        m->msg_control = ctl->buf;
        m->msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
        struct cmsghdr* c = CMSG_FIRSTHDR(m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
        memcpy(CMSG_DATA(c), fds, (size_t)nfds * sizeof(int));
    }
}

/* fill m to receive into the one buffer of v, with ctl's room for 8
 * descriptors, no name */
static __attribute__((unused)) void fill_recv(struct msghdr* m, struct iovec* v, ctl8_t* ctl) {
    memset(m, 0, sizeof(*m));
    m->msg_iov = v;
    m->msg_iovlen = 1;
    m->msg_control = ctl->buf;
    m->msg_controllen = sizeof(ctl->buf);
}

/* the descriptors of m's SCM_RIGHTS messages into out[] (up to max): their
 * number */
static __attribute__((unused)) int got_fds(struct msghdr* m, int* out, int max) {
    int n = 0;
    if (m->msg_control == NULL) return 0;
    for (struct cmsghdr* c = CMSG_FIRSTHDR(m); c != NULL; c = CMSG_NXTHDR(m, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; i++) {
            int f;
            memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
            if (n < max) out[n] = f;
            n++;
        }
    }
    return n;
}

/* the inode of fd (a pipe's end: which pipe) */
static __attribute__((unused)) uint64_t ino_of(int fd) {
    struct stat st;
    CHECK_EQ(fstat(fd, &st), 0);
    return (uint64_t)st.st_ino;
}

#endif
