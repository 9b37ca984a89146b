/* aco_nc - netcat-style stream transfer on the runtime.
 *
 *   aco_nc [--backend uring|epoll] HOST PORT     connect; stdin to the
 *                                                socket, the socket to stdout
 *   aco_nc [--backend ...] -l [-p] PORT [ADDR]   listen (ADDR: 0.0.0.0; an
 *                                                IPv6 address or a name too),
 *                                                take one connection, the same
 *   aco_nc --tls [--tls-ca PEM | --tls-insecure] [--tls-name NAME] HOST PORT
 *                                                connect over TLS (built
 *                                                with libaco_rt_tls), the
 *                                                server verified as NAME
 *                                                (HOST) against the system's
 *                                                store or PEM
 *
 * Two cos, one per direction.  At the end of stdin the socket's sending
 * side is shut down (what OpenBSD nc does with -N); the program ends when
 * both directions have ended: stdin's and the peer's.  An error receiving
 * from the peer (a reset) ends both at once: nothing more can go either
 * way; stdout's own error (a reader gone) ends that direction alone.
 * Exit status 0, or 1 after an error said on stderr (2: usage).
 * Each direction takes the cheapest way the descriptors allow:
 *   stdin a regular file   sendfile(2) to the socket (no copy through us);
 *   stdout a pipe or file  splice(2) socket -> pipe -> stdout (no copy; not
 *                          a file opened for appending, which splice refuses;
 *                          a device without splice, /dev/full or a printer,
 *                          goes on by write);
 *   otherwise              read/write through a 256 KiB heap buffer.
 * Over TLS (aco_rt_tls.h) both directions go through the connection, one
 * co reading it while the other writes; the end of stdin sends close_notify
 * then shuts the socket's sending side down, and the peer's close_notify
 * ends the other direction (a stream cut without it is an error, said).
 * sendfile and splice are plain system calls, not the runtime's: the socket
 * is non-blocking (accepted so; aco_rt_connect makes it so) and SIGPIPE is
 * ignored, so that a peer or a reader that left is an EPIPE, not a death
 * (the runtime's own calls never raise it).
 */
#define _GNU_SOURCE
#include "aco_rt.h"
#ifdef ACO_NC_TLS
#include "aco_rt_tls.h"
#endif

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rt_cli.h"

#define BUF (256 * 1024)

static int sock = -1;
static int failed;
#ifdef ACO_NC_TLS
static aco_rt_tls_t* tls;               /* --tls: the connection, or NULL */
#endif

static void fail(const char* what, int err) {
    fprintf(stderr, "aco_nc: %s: %s\n", what, strerror(err));
    failed = 1;
}

static int sock_failed;         /* receiving from the peer failed (a reset):
                                   nothing more can go either way */

/* All n bytes at buf to out: 0 or -errno (a short count comes only when an
 * error came after some bytes: the next call says it). */
static int put_all(int out, const char* buf, ssize_t n) {
    while (n > 0) {
        ssize_t w = aco_rt_write(out, buf, (size_t)n, -1);
        if (w <= 0) return w < 0 ? (int)w : -EIO;
        buf += w;
        n -= w;
    }
    return 0;
}

/* Copy in to out through a heap buffer until in's end: 0 or -errno. */
static int copy_rw(int in, int out, int in_is_sock) {
    char* buf = malloc(BUF);
    if (buf == NULL) return -ENOMEM;
    int r = 0;
    for (;;) {
        ssize_t n = in_is_sock ? aco_rt_recv(in, buf, BUF, 0, -1) : aco_rt_read(in, buf, BUF, -1);
        if (n <= 0) {
            r = (int)n;
            if (n < 0 && in_is_sock) sock_failed = 1;
            break;
        }
        if ((r = put_all(out, buf, n)) < 0) break;
    }
    free(buf);
    return r;
}

#ifdef ACO_NC_TLS
/* stdin to the TLS connection, or the connection to stdout: 0 or -errno. */
static int copy_tls(int to_tls) {
    char* buf = malloc(BUF);
    if (buf == NULL) return -ENOMEM;
    int r = 0;
    for (;;) {
        ssize_t n = to_tls ? aco_rt_read(0, buf, BUF, -1) : aco_rt_tls_read(tls, buf, BUF, -1);
        if (n <= 0) {
            r = (int)n;
            if (n < 0 && !to_tls) sock_failed = 1;
            break;
        }
        if (!to_tls) {
            if ((r = put_all(1, buf, n)) < 0) break;
            continue;
        }
        for (ssize_t off = 0; off < n && r == 0;) {
            ssize_t w = aco_rt_tls_write(tls, buf + off, (size_t)(n - off), -1);
            if (w <= 0) r = w < 0 ? (int)w : -EIO;
            else off += w;
        }
        if (r < 0) break;
    }
    if (r < 0 && !to_tls && aco_rt_tls_error(tls)[0])
        fprintf(stderr, "aco_nc: TLS: %s\n", aco_rt_tls_error(tls));
    free(buf);
    return r;
}
#endif

/* stdin (a regular file) to the socket by sendfile: 0, -errno, or 1 if
 * sendfile cannot do it (then nothing was sent). */
static int send_file(int in) {
    int sent_any = 0;
    for (;;) {
        ssize_t n = sendfile(sock, in, NULL, 1 << 30);
        if (n > 0) { sent_any = 1; continue; }
        if (n == 0) return 0;
        if (errno == EINTR) continue;
        if (errno == EAGAIN) {
            int r = aco_rt_wait(sock, POLLOUT, -1);
            if (r < 0) return r;
            continue;
        }
        if (!sent_any && (errno == EINVAL || errno == ENOSYS)) return 1;
        return -errno;
    }
}

/* Move n bytes from the pipe p0 to out, the co (not the thread) waiting
 * while out is a full pipe: 0 or -errno (-EINVAL from the first splice
 * into out: out takes no splice; the bytes are still in the pipe). */
static int drain_pipe(int p0, int out, ssize_t n) {
    while (n > 0) {
        ssize_t m = splice(p0, NULL, out, NULL, (size_t)n, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        if (m > 0) { n -= m; continue; }
        if (m < 0 && errno == EINTR) continue;
        if (m < 0 && errno == EAGAIN) {
            int r = aco_rt_wait(out, POLLOUT, -1);
            if (r < 0) return r;
            continue;
        }
        return m < 0 ? -errno : -EIO;
    }
    return 0;
}

/* The pipe's n bytes to out by write (out took no splice): 0 or -errno. */
static int pipe_write(int p0, int out, ssize_t n) {
    char* buf = malloc(BUF);
    if (buf == NULL) return -ENOMEM;
    int r = 0;
    while (n > 0 && r == 0) {
        ssize_t k = read(p0, buf, (size_t)n < BUF ? (size_t)n : BUF);
        if (k <= 0) { r = k < 0 ? -errno : -EIO; break; }
        r = put_all(out, buf, k);
        n -= k;
    }
    free(buf);
    return r;
}

/* The socket to out (a pipe or file) by splice: 0, -errno, or 1 if splice
 * cannot do it (no byte taken off the socket, or none written to out and
 * those taken written by write: copy_rw goes on). */
static int recv_splice(int out) {
    int p[2];
    if (pipe2(p, O_NONBLOCK | O_CLOEXEC) < 0) return 1;
    fcntl(p[1], F_SETPIPE_SZ, 1 << 20);
    int r = 0, moved = 0, written = 0;
    for (;;) {
        ssize_t n = splice(sock, NULL, p[1], NULL, 1 << 20, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        if (n == 0) break;
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN) {
                if ((r = aco_rt_wait(sock, POLLIN, -1)) < 0) { sock_failed = 1; break; }
                r = 0;
                continue;
            }
            r = (!moved && errno == EINVAL) ? 1 : -errno;
            if (r < 0) sock_failed = 1;
            break;
        }
        moved = 1;
        if ((r = drain_pipe(p[0], out, n)) == -EINVAL && !written) {
            if ((r = pipe_write(p[0], out, n)) == 0) r = 1;
            break;
        }
        if (r < 0) break;
        written = 1;
    }
    close(p[0]);
    close(p[1]);
    return r;
}

static void send_co(void* arg) {
    (void)arg;
    struct stat st;
    int r = 1;
#ifdef ACO_NC_TLS
    if (tls) {
        if (((r = copy_tls(1)) < 0 || (r = aco_rt_tls_shutdown(tls, -1)) < 0) && r != -ECANCELED)
            fail("sending", -r);
        shutdown(sock, SHUT_WR);
        return;
    }
#endif
    if (fstat(0, &st) == 0 && S_ISREG(st.st_mode)) r = send_file(0);
    if (r == 1) r = copy_rw(0, sock, 0);
    if (r < 0 && r != -ECANCELED) fail("sending", -r);   /* (cancelled: recv_co said why) */
    shutdown(sock, SHUT_WR);
}

static void recv_co(void* arg) {
    (void)arg;
    struct stat st;
    int r = 1;
#ifdef ACO_NC_TLS
    if (tls) {
        if ((r = copy_tls(0)) < 0) fail("receiving", -r);
        return;
    }
#endif
    /* (splice(2) cannot write a file opened for appending: >> out) */
    int fl = fcntl(1, F_GETFL);
    if (fstat(1, &st) == 0 && fl >= 0 && !(fl & O_APPEND) &&
        (S_ISFIFO(st.st_mode) || S_ISREG(st.st_mode) || S_ISCHR(st.st_mode)))
        r = recv_splice(1);
    if (r == 1) r = copy_rw(sock, 1, 1);
    if (r < 0) fail("receiving", -r);
}

static int listen_port = -1;
static const char* listen_addr = "0.0.0.0";
static const char* host;
static const char* port;
static int use_tls, tls_insecure;
static const char* tls_ca;
static const char* tls_name;

static void main_co(void* arg) {
    (void)arg;
    if (listen_port >= 0) {
        /* ADDR as aco_rt_listen takes it: an IPv6 address in brackets */
        char addr[300];
        const char* fmt = strchr(listen_addr, ':') && listen_addr[0] != '[' ? "[%s]:%d" : "%s:%d";
        snprintf(addr, sizeof(addr), fmt, listen_addr, listen_port);
        aco_rt_net_opts_t lo = {.backlog = 1};
        int l = aco_rt_listen(addr, &lo, -1);
        if (l < 0) { fail(addr, -l); return; }
        if (listen_port == 0) {         /* the kernel's pick: say which */
            snprintf(addr, sizeof(addr), fmt, listen_addr, aco_rt_net_port(l));
            fprintf(stderr, "aco_nc: listening on %s\n", addr);
        }
        sock = aco_rt_accept(l, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK, -1);
        aco_rt_close(l);
        if (sock < 0) { fail("accept", -sock); return; }
    } else {
        struct addrinfo hints = {0}, *ai;
        hints.ai_socktype = SOCK_STREAM;
        int e = getaddrinfo(host, port, &hints, &ai);
        if (e) { fprintf(stderr, "aco_nc: %s: %s\n", host, gai_strerror(e)); failed = 1; return; }
        int r = -ECONNREFUSED;
        for (struct addrinfo* a = ai; a; a = a->ai_next) {
            sock = socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
            if (sock < 0) continue;
            if ((r = aco_rt_connect(sock, a->ai_addr, a->ai_addrlen, -1)) == 0) break;
            aco_rt_close(sock);
            sock = -1;
        }
        freeaddrinfo(ai);
        if (sock < 0) { fail("connect", -r); return; }
    }
#ifdef ACO_NC_TLS
    if (use_tls) {
        char err[256];
        aco_rt_tls_opts_t o = {.ca_file = tls_ca, .flags = tls_insecure ? ACO_RT_TLS_NO_VERIFY : 0};
        aco_rt_tls_ctx_t* ctx = aco_rt_tls_ctx_new(&o, err, sizeof err);
        if (ctx == NULL) { fprintf(stderr, "aco_nc: %s\n", err); failed = 1; return; }
        tls = aco_rt_tls_new(ctx, sock, tls_name ? tls_name : host);
        int r = tls ? 0 : -errno;
        aco_rt_tls_ctx_free(ctx);       /* (the connection holds it) */
        if (tls) r = aco_rt_tls_handshake(tls, -1);
        if (r < 0) {
            fprintf(stderr, "aco_nc: TLS handshake: %s\n", tls ? aco_rt_tls_error(tls) : strerror(-r));
            failed = 1;
            return;
        }
    }
#endif
    aco_rt_co_t* s = aco_rt_spawn(NULL, send_co, NULL);
    aco_rt_co_t* rcv = aco_rt_spawn(NULL, recv_co, NULL);
    if (s == NULL || rcv == NULL) { fail("spawn", ENOMEM); return; }
    /* Both directions to their ends: the peer shutting its side down does
     * not end ours (it may still be reading). */
    aco_rt_join(rcv, -1);
    if (sock_failed) aco_rt_cancel(s);  /* (stdout's error alone: stdin still goes) */
    aco_rt_join(s, -1);
    /* stdout failed: the peer's bytes left unread make the close a reset,
     * which drops what the send queue still holds; let that go out first
     * (at most 10 s) */
    for (int i = 0; i < 10000 && failed && !sock_failed; i++) {
        int q = 0;
        if (ioctl(sock, SIOCOUTQ, &q) < 0 || q == 0) break;
        aco_rt_sleep(1000000);
    }
#ifdef ACO_NC_TLS
    aco_rt_tls_free(tls);
#endif
    aco_rt_close(sock);
}

static int usage(void) {
    fprintf(stderr, "usage: aco_nc [--backend uring|epoll] HOST PORT\n"
                    "       aco_nc [--backend uring|epoll] -l [-p] PORT [ADDR]\n"
                    "       aco_nc [--backend uring|epoll] --tls [--tls-ca PEM | --tls-insecure]"
                    " [--tls-name NAME] HOST PORT\n");
    return 2;
}

/* PORT as a number 0-65535, or -1 (anything else). */
static int port_number(const char* v) {
    char* end;
    errno = 0;
    long p = strtol(v, &end, 10);
    return *v >= '0' && *v <= '9' && *end == 0 && errno == 0 && p <= 65535 ? (int)p : -1;
}

static int bad_port(const char* v) {
    fprintf(stderr, "aco_nc: bad port '%s' (0-65535)\n", v);
    return 2;
}

int main(int argc, char** argv) {
    rt_cli_std_fds();
    signal(SIGPIPE, SIG_IGN);           /* sendfile, splice: see above */
    aco_rt_opts_t o = {0};
    int listen = 0, i = 1;
    const char* pos[2] = {NULL, NULL};
    int npos = 0;
    for (; i < argc; i++) {
        if (strcmp(argv[i], "--backend") == 0 && i + 1 < argc) {
            const char* b = argv[++i];
            if (strcmp(b, "uring") == 0) o.backend = ACO_RT_BACKEND_URING;
            else if (strcmp(b, "epoll") == 0) o.backend = ACO_RT_BACKEND_EPOLL;
            else return usage();
        } else if (strcmp(argv[i], "--tls") == 0) {
            use_tls = 1;
        } else if (strcmp(argv[i], "--tls-insecure") == 0) {
            tls_insecure = 1;
        } else if (strcmp(argv[i], "--tls-ca") == 0 && i + 1 < argc) {
            tls_ca = argv[++i];
        } else if (strcmp(argv[i], "--tls-name") == 0 && i + 1 < argc) {
            tls_name = argv[++i];
        } else if (strcmp(argv[i], "-l") == 0) {
            listen = 1;
        } else if (strcmp(argv[i], "-p") == 0 || strcmp(argv[i], "-N") == 0) {
            /* -p: the port follows anyway; -N: what we always do */
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return usage();
        } else if (npos < 2) {
            pos[npos++] = argv[i];
        } else {
            return usage();
        }
    }
    if ((tls_ca || tls_insecure || tls_name) && !use_tls) return usage();
    if (use_tls && listen) {
        fprintf(stderr, "aco_nc: --tls connects; it does not listen\n");
        return 2;
    }
#ifndef ACO_NC_TLS
    if (use_tls) {
        fprintf(stderr, "aco_nc: built without TLS (make.sh found no OpenSSL 3: install "
                        "libssl-dev and build again)\n");
        return 2;
    }
#endif
    if (listen) {
        if (npos < 1) return usage();
        if ((listen_port = port_number(pos[0])) < 0) return bad_port(pos[0]);
        if (npos == 2) listen_addr = pos[1];
    } else {
        if (npos != 2) return usage();
        host = pos[0];
        port = pos[1];
        /* a number must be a port (getaddrinfo would take 89046 as 23510);
         * else a service name ("http") */
        if (port[strspn(port, "0123456789")] == 0 && port_number(port) < 0) return bad_port(port);
    }
    aco_rt_sched_t* s = aco_rt_sched_new(&o);
    if (s == NULL) { fprintf(stderr, "aco_nc: scheduler: %s\n", strerror(errno)); return 1; }
    aco_rt_detach(aco_rt_spawn(s, main_co, NULL));
    int r = aco_rt_sched_run(s);
    if (r < 0) { fprintf(stderr, "aco_nc: scheduler: %s\n", strerror(-r)); return 1; }
    aco_rt_sched_free(s);
    return failed;
}
