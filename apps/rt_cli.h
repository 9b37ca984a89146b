/* rt_cli.h - the command line, listening sockets, accept loops, threads and
 * the descriptor table grown at start that aco_echo, aco_resp and aco_http
 * share: --port N, --backend uring|epoll,
 * --bind ADDR, --threads T, --accept reuseport|handoff.
 *
 * Threads.  --threads 1 (the default) runs one scheduler in the main
 * thread.  --threads T > 1 starts a pool of T scheduler threads, and
 * connections reach them one of two ways (--accept):
 *   reuseport  every thread has a listening socket of its own on the port
 *              (SO_REUSEPORT: the kernel spreads connections by hash) and
 *              serves what it accepts; nothing crosses threads.
 *   handoff    one listening socket, one accepting co (thread 0), and
 *              each connection goes to the thread with the fewest cos
 *              (aco_rt_pool_spawn).
 * reuseport is the default: the two measure equal within noise and it needs
 * no cross-thread message per connection (docs/benchmarks.md, "Both CPUs").
 *
 * SIGTERM and SIGINT stop the program (exit status 0) once its listening
 * sockets are shut and closed.  A death by the signal's default action
 * would leave, on io_uring, an accept in flight that keeps the socket
 * listening until the kernel has torn the ring down, after the process is
 * gone: a restart at once found its port in use. */
#ifndef RT_CLI_H
#define RT_CLI_H

#include "aco_rt.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

enum { RT_CLI_REUSEPORT, RT_CLI_HANDOFF };

typedef struct {
    int port;
    int backend;
    const char* bind;
    unsigned threads;
    int accept;                 /* RT_CLI_REUSEPORT or RT_CLI_HANDOFF */
} rt_cli_t;

/* Descriptors 0, 1 and 2 that the program was started without (a daemon's
 * `<&- >&- 2>&-`) are opened on /dev/null first: else the first sockets,
 * eventfds and rings would take those numbers, and a message meant for
 * stderr would go to a client (or kill the process with SIGPIPE), a
 * splice meant for stdout into an eventfd. */
static inline void rt_cli_std_fds(void) {
    for (int fd = 0; fd <= 2; fd++) {
        if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF) continue;
        int n = open("/dev/null", O_RDWR);
        if (n >= 0 && n != fd) {        /* (the lowest free number is fd) */
            dup2(n, fd);
            close(n);
        }
    }
}

/* An option of milliseconds (1 to a day) as ns in *out: 0, or -1 (said). */
static inline int rt_cli_ms(const char* prog, const char* name, const char* v, int64_t* out) {
    char* end;
    long long ms = v ? strtoll(v, &end, 10) : -1;
    if (v == NULL || *end || ms < 1 || ms > 86400000LL) {
        fprintf(stderr, "%s: %s takes milliseconds (1 to 86400000)\n", prog, name);
        return -1;
    }
    *out = ms * 1000000;
    return 0;
}

/* The pool with --threads > 1 and --accept handoff, else NULL. */
static aco_rt_pool_t* rt_cli_pool;

/* A detached co for a new connection: on this thread, or (handoff) on the
 * pool's least loaded one.  0, or -1 (errno). */
static inline int rt_cli_spawn(aco_rt_fn_t fn, void* arg) {
    aco_rt_co_t* co = rt_cli_pool ? aco_rt_pool_spawn(rt_cli_pool, fn, arg, NULL)
                                  : aco_rt_spawn(NULL, fn, arg);
    if (co == NULL) return -1;
    aco_rt_detach(co);
    return 0;
}

static inline int rt_cli_parse(rt_cli_t* c, const char* prog, int argc, char** argv) {
    rt_cli_std_fds();
    c->port = 6379;
    c->backend = ACO_RT_BACKEND_AUTO;
    c->bind = "127.0.0.1";
    c->threads = 1;
    c->accept = RT_CLI_REUSEPORT;
    for (int i = 1; i < argc; i++) {
        const char* a = argv[i];
        const char* v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--port") == 0 && v) {
            char* end;
            long p = strtol(v, &end, 10);
            if (*end || p < 0 || p > 65535) {
                fprintf(stderr, "%s: bad port '%s'\n", prog, v);
                return -1;
            }
            c->port = (int)p;
            i++;
        } else if (strcmp(a, "--backend") == 0 && v) {
            if (strcmp(v, "uring") == 0) c->backend = ACO_RT_BACKEND_URING;
            else if (strcmp(v, "epoll") == 0) c->backend = ACO_RT_BACKEND_EPOLL;
            else {
                fprintf(stderr, "%s: --backend takes uring or epoll, not '%s'\n", prog, v);
                return -1;
            }
            i++;
        } else if (strcmp(a, "--bind") == 0 && v) {
            c->bind = v;
            i++;
        } else if (strcmp(a, "--threads") == 0 && v) {
            char* end;
            long t = strtol(v, &end, 10);
            if (*end || t < 1 || t > 1024) {
                fprintf(stderr, "%s: --threads takes 1 to 1024, not '%s'\n", prog, v);
                return -1;
            }
            c->threads = (unsigned)t;
            i++;
        } else if (strcmp(a, "--accept") == 0 && v) {
            if (strcmp(v, "reuseport") == 0) c->accept = RT_CLI_REUSEPORT;
            else if (strcmp(v, "handoff") == 0) c->accept = RT_CLI_HANDOFF;
            else {
                fprintf(stderr, "%s: --accept takes reuseport or handoff, not '%s'\n", prog, v);
                return -1;
            }
            i++;
        } else {
            fprintf(stderr, "usage: %s [--port N] [--backend uring|epoll] [--bind ADDR]"
                    " [--threads T] [--accept reuseport|handoff]\n", prog);
            return -1;
        }
    }
    return 0;
}

/* The accepting co's loop (its arg: a rt_cli_serve_t): for each connection
 * (TCP_NODELAY: inherited from the listening socket), start(fd) spawns what serves it, or returns -1 and the
 * connection is closed.  Out of descriptors or memory: say so on stderr
 * (at most a line in 10 s per accepting co, with the retries since the
 * last: one each 10 ms, not a count of clients), wait 10 ms
 * for connections to end and go on serving the others. */
typedef struct {
    int lfd;
    const char* prog;
    int (*start)(int fd);
} rt_cli_serve_t;

#ifndef RT_CLI_ACCEPT_BURST
#define RT_CLI_ACCEPT_BURST 4
#endif
static inline void rt_cli_accept_co(void* arg) {
    const rt_cli_serve_t* sv = (const rt_cli_serve_t*)arg;
    unsigned burst = 0, retries = 0;
    int64_t told = -1;          /* when the last such line went out */
    for (;;) {
        int fd = aco_rt_accept(sv->lfd, NULL, NULL, SOCK_CLOEXEC, -1);
        if (fd < 0) {
            if (fd == -EMFILE || fd == -ENFILE || fd == -ENOBUFS || fd == -ENOMEM) {
                int64_t now = aco_rt_now();
                if (told < 0 || now - told >= 10 * 1000000000LL) {
                    /* one fprintf: with --threads each acceptor says it */
                    char more[64] = "";
                    if (retries)
                        snprintf(more, sizeof more, " (accept retried %u times since the last line)",
                                 retries);
                    fprintf(stderr, "%s: accept: %s: new connections wait for some to end%s\n",
                            sv->prog, strerror(-fd), more);
                    told = now;
                    retries = 0;
                } else {
                    retries++;
                }
                aco_rt_sleep(10 * 1000000LL);
                continue;
            }
            /* the stop shut the socket (EINVAL: no longer listening) or
             * closed it */
            if (fd == -ECANCELED || fd == -EBADF || fd == -EINVAL) break;
            fprintf(stderr, "%s: accept: %s\n", sv->prog, strerror(-fd));
            continue;
        }
        if (sv->start(fd) < 0) aco_rt_close(fd);
        /* At most RT_CLI_ACCEPT_BURST connections per look of the loop at
         * I/O: a burst of new connections, each a TLS handshake (a quarter
         * millisecond), does not run ahead of the requests of connections
         * already open, which that look finds ready.  (wrk -c100 with a
         * handshake a request, epoll: p50 10.2-10.8 -> 3.7 ms; 1, a look
         * per connection, cost plain HTTP's new connections 0.9 -> 2.5 ms;
         * 8 and 16 left TLS's p99 at 10-19 ms.) */
        if (++burst == RT_CLI_ACCEPT_BURST) {
            burst = 0;
            aco_rt_sleep(0);
        }
    }
}

/* The listening sockets, for the stop. */
static rt_cli_serve_t* rt_cli_svs;
static unsigned rt_cli_nsv;

/* Wait for SIGTERM or SIGINT (blocked in every thread: rt_cli_run), then
 * shut the listening sockets (out of LISTEN at once, whatever still holds
 * them), close them and exit.  Open connections end with the process. */
static inline void rt_cli_stop_co(void* arg) {
    (void)arg;
    sigset_t set;
    siginfo_t si;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    int r = aco_rt_signal_wait(&set, &si, -1);
    for (unsigned i = 0; i < rt_cli_nsv; i++) {
        shutdown(rt_cli_svs[i].lfd, SHUT_RDWR);
        aco_rt_close(rt_cli_svs[i].lfd);
    }
    if (rt_cli_nsv) fprintf(stderr, "%s: %s: stopped\n", rt_cli_svs[0].prog,
                            r > 0 ? strsignal(si.si_signo) : strerror(-r));
    fflush(NULL);
    _exit(r > 0 ? 0 : 1);       /* (no atexit: pool threads still run) */
}

/* Block SIGTERM and SIGINT in this thread, before any other is made (they
 * inherit it): rt_cli_stop_co takes them. */
static inline void rt_cli_block_stop(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
}

/* A listening TCP socket as the options say (--bind: an IPv4 or IPv6
 * address or a name), or -1 (said why).  TCP_NODELAY on it: accepted
 * sockets inherit it (Linux). */
static inline int rt_cli_listen(rt_cli_t* c, const char* prog) {
    char addr[300];
    const char* fmt = strchr(c->bind, ':') != NULL ? "[%s]:%d" : "%s:%d";
    snprintf(addr, sizeof(addr), fmt, c->bind, c->port);
    aco_rt_net_opts_t o = {.flags = ACO_RT_NET_NODELAY};
    if (c->threads > 1 && c->accept == RT_CLI_REUSEPORT) o.flags |= ACO_RT_NET_REUSEPORT;
    int fd = aco_rt_listen(addr, &o, -1);
    if (fd < 0) {
        fprintf(stderr, "%s: cannot listen on %s: %s\n", prog, addr, strerror(-fd));
        return -1;
    }
    /* port 0: the kernel's pick, said and shared by the next listens
     * (reuseport) */
    if (c->port == 0 && (c->port = aco_rt_net_port(fd)) < 0) c->port = 0;
    return fd;
}

/* Grow the descriptor table now, while the process has one thread, to
 * what it may open (at most RT_CLI_FDS): Linux doubles the table as it
 * fills, and in a process of more than one thread (the runtime's helpers
 * and io_uring's workers share it) each doubling waits an RCU grace
 * period inside the accept that needed it, every connection of that
 * thread waiting too (docs/threads.md). */
#define RT_CLI_FDS 65536
static inline void rt_cli_grow_fds(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
    rlim_t n = rl.rlim_cur < RT_CLI_FDS ? rl.rlim_cur : RT_CLI_FDS;
    int fd = n > 64 ? open("/dev/null", O_RDONLY | O_CLOEXEC) : -1;
    if (fd < 0) return;
    int top = fcntl(fd, F_DUPFD_CLOEXEC, (int)(n - 1));
    if (top >= 0) close(top);
    close(fd);
}

/* Listen and serve with start(fd) for each connection, as the options say;
 * returns only on failure (the exit status).  start is called in the
 * accepting co. */
static inline int rt_cli_run(const rt_cli_t* cli, const char* prog, int (*start)(int fd)) {
    rt_cli_t cc = *cli, *c = &cc;
    aco_rt_opts_t o = {.backend = c->backend};
    rt_cli_grow_fds();
    rt_cli_block_stop();
    if (c->threads == 1) {
        aco_rt_sched_t* s = aco_rt_sched_new(&o);
        if (s == NULL) {
            fprintf(stderr, "%s: cannot start the scheduler: %s\n", prog, strerror(errno));
            return 1;
        }
        static rt_cli_serve_t sv;
        sv.prog = prog;
        sv.start = start;
        if ((sv.lfd = rt_cli_listen(c, prog)) < 0) return 1;
        fprintf(stderr, "%s: listening on %s:%d (%s)\n", prog, c->bind, c->port,
                aco_rt_backend_name(s));
        rt_cli_svs = &sv;
        rt_cli_nsv = 1;
        aco_rt_detach(aco_rt_spawn(s, rt_cli_accept_co, &sv));
        aco_rt_detach(aco_rt_spawn(s, rt_cli_stop_co, NULL));
        int r = aco_rt_sched_run(s);
        fprintf(stderr, "%s: scheduler stopped: %s\n", prog, strerror(-r));
        return 1;
    }
    aco_rt_pool_opts_t po = {.threads = c->threads, .sched = o};
    aco_rt_pool_t* p = aco_rt_pool_new(&po);
    if (p == NULL) {
        fprintf(stderr, "%s: cannot start %u threads: %s\n", prog, c->threads, strerror(errno));
        return 1;
    }
    unsigned nl = c->accept == RT_CLI_REUSEPORT ? c->threads : 1;
    rt_cli_serve_t* sv = calloc(nl, sizeof(*sv));
    if (sv == NULL) return 1;
    if (c->accept == RT_CLI_HANDOFF) rt_cli_pool = p;
    for (unsigned i = 0; i < nl; i++) {
        sv[i].prog = prog;
        sv[i].start = start;
        if ((sv[i].lfd = rt_cli_listen(c, prog)) < 0) return 1;
        aco_rt_co_t* co = aco_rt_spawn(aco_rt_pool_sched(p, i), rt_cli_accept_co, &sv[i]);
        if (co == NULL) return 1;
        aco_rt_detach(co);
        rt_cli_svs = sv;
        rt_cli_nsv = i + 1;
    }
    aco_rt_co_t* stop = aco_rt_spawn(aco_rt_pool_sched(p, 0), rt_cli_stop_co, NULL);
    if (stop == NULL) return 1;
    aco_rt_detach(stop);
    fprintf(stderr, "%s: listening on %s:%d (%s, %u threads, %s)\n", prog, c->bind, c->port,
            aco_rt_backend_name(aco_rt_pool_sched(p, 0)), c->threads,
            c->accept == RT_CLI_REUSEPORT ? "reuseport" : "handoff");
    aco_rt_pool_wait(p, ACO_RT_POOL_DRAIN, -1);     /* the accept cos never end */
    fprintf(stderr, "%s: the pool stopped\n", prog);
    return 1;
}

#endif
