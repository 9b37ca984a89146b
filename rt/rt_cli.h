/* rt_cli.h - the command line, listening socket and accept loop that
 * aco_echo and aco_resp share: --port N, --backend uring|epoll, --bind ADDR. */
#ifndef RT_CLI_H
#define RT_CLI_H

#include "aco_rt.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

typedef struct {
    int port;
    int backend;
    const char* bind;
} rt_cli_t;

static inline int rt_cli_parse(rt_cli_t* c, const char* prog, int argc, char** argv) {
    c->port = 6379;
    c->backend = ACO_RT_BACKEND_AUTO;
    c->bind = "127.0.0.1";
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
        } else {
            fprintf(stderr, "usage: %s [--port N] [--backend uring|epoll] [--bind ADDR]\n", prog);
            return -1;
        }
    }
    return 0;
}

/* The accepting co's loop (its arg: a rt_cli_serve_t): for each connection
 * (TCP_NODELAY set), start(fd) spawns what serves it, or returns -1 and the
 * connection is closed.  Out of descriptors or memory: wait 10 ms for
 * connections to end and go on serving the others. */
typedef struct {
    int lfd;
    const char* prog;
    int (*start)(int fd);
} rt_cli_serve_t;

static inline void rt_cli_accept_co(void* arg) {
    const rt_cli_serve_t* sv = (const rt_cli_serve_t*)arg;
    for (;;) {
        int fd = aco_rt_accept(sv->lfd, NULL, NULL, SOCK_CLOEXEC, -1);
        if (fd < 0) {
            if (fd == -EMFILE || fd == -ENFILE || fd == -ENOBUFS || fd == -ENOMEM) {
                aco_rt_sleep(10 * 1000000);
                continue;
            }
            if (fd == -ECANCELED) break;
            fprintf(stderr, "%s: accept: %s\n", sv->prog, strerror(-fd));
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (sv->start(fd) < 0) aco_rt_close(fd);
    }
}

/* A listening TCP socket (IPv4) as the options say, or -1 (said why). */
static inline int rt_cli_listen(const rt_cli_t* c, const char* prog) {
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)c->port);
    if (inet_pton(AF_INET, c->bind, &sa.sin_addr) != 1) {
        fprintf(stderr, "%s: bad address '%s'\n", prog, c->bind);
        return -1;
    }
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
        bind(fd, (struct sockaddr*)&sa, sizeof(sa)) < 0 || listen(fd, 4096) < 0) {
        fprintf(stderr, "%s: cannot listen on %s:%d: %s\n", prog, c->bind, c->port, strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    return fd;
}

#endif
