/* floor_loop.h - the bare server loop of bench/resp_floor.c and
 * bench/http_floor.c: a listener on 127.0.0.1, one thread, level-triggered
 * epoll, signals taken only inside epoll_pwait, and per connection one
 * recv() into its input buffer and the including file's serve().
 *
 * The including file defines, before including this: IN_SIZE, struct conn
 * with at least `int fd; unsigned events; size_t in_len; char in[IN_SIZE];`;
 * and after it: serve(c) (send what is pending, answer what is buffered: 0,
 * or -1 to close; wait_for(c, EPOLLOUT) while the socket is full) and
 * conn_new(fd) (a connection with fd, events EPOLLIN and nothing buffered;
 * NULL without memory).  It counts what it answers in `requests`.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

static volatile sig_atomic_t stop;
static unsigned long long requests;
static int ep;

static int serve(struct conn* c);
static struct conn* conn_new(int fd);

static void on_signal(int sig) { (void)sig; stop = 1; }

static int wait_for(struct conn* c, unsigned events) {
    struct epoll_event ev = {.events = events, .data.ptr = c};
    if (c->events == events) return 0;
    c->events = events;
    return epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
}

static int readable(struct conn* c) {
    ssize_t k = recv(c->fd, c->in + c->in_len, IN_SIZE - c->in_len, 0);
    if (k < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
    if (k == 0) return -1;                  /* the peer closed */
    c->in_len += (size_t)k;
    return serve(c);
}

/* Serve 127.0.0.1:port until SIGTERM or SIGINT (0), or 1 when it cannot
 * listen; name starts its lines on stderr. */
static int floor_run(const char* name, int port) {
    int one = 1, lfd, i, n;
    unsigned long long conns = 0;
    /* the signals come only inside epoll_pwait, so none is missed */
    struct sigaction sa = {.sa_handler = on_signal};
    sigset_t block, run;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);               /* sendfile has no MSG_NOSIGNAL */
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    sigprocmask(SIG_BLOCK, &block, &run);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    /* TCP_NODELAY, as redis-server, nginx (tcp_nodelay on) and ours have:
     * accepted sockets inherit it */
    if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        setsockopt(lfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) < 0 ||
        bind(lfd, (struct sockaddr*)&a, sizeof a) < 0 || listen(lfd, 4096) < 0 ||
        (ep = epoll_create1(EPOLL_CLOEXEC)) < 0 ||
        epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &(struct epoll_event){.events = EPOLLIN}) < 0) {
        fprintf(stderr, "%s: listen: %s\n", name, strerror(errno));
        return 1;
    }
    struct epoll_event evs[256];
    while (!stop) {
        if ((n = epoll_pwait(ep, evs, 256, -1, &run)) < 0) {
            if (errno == EINTR) continue;
            fprintf(stderr, "%s: epoll_pwait: %s\n", name, strerror(errno));
            return 1;
        }
        for (i = 0; i < n; i++) {
            struct conn* c = evs[i].data.ptr;
            if (!c) {                       /* the listener: take them all */
                int fd;
                while ((fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
                    struct epoll_event ev = {.events = EPOLLIN};
                    if (!(c = conn_new(fd))) { close(fd); continue; }
                    ev.data.ptr = c;
                    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0) { close(fd); free(c); continue; }
                    conns++;
                }
                continue;
            }
            if ((c->events == EPOLLIN ? readable(c) : serve(c)) < 0) {
                close(c->fd);               /* leaves the epoll set too */
                free(c);
            }
        }
    }
    fprintf(stderr, "%s: %llu requests on %llu connections\n", name, requests, conns);
    return 0;
}
