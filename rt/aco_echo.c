/* aco_echo - a TCP echo server on the runtime: one co per connection.
 *
 *   aco_echo [--port N] [--backend uring|epoll] [--bind ADDR]
 *
 * Each connection's co reads into a buffer on its own stack (a share stack:
 * the runtime keeps the kernel off it) and writes back what it read until
 * the peer closes its side, then closes.  EMFILE/ENFILE at accept: the
 * server sleeps a moment and goes on serving the connections it has.
 */
#define _GNU_SOURCE
#include "aco_rt.h"
#include "rt_cli.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void conn_co(void* arg) {
    int fd = (int)(intptr_t)arg;
    char buf[16384];
    for (;;) {
        ssize_t n = aco_rt_read(fd, buf, sizeof(buf), -1);
        if (n <= 0) break;
        if (aco_rt_write(fd, buf, (size_t)n, -1) != n) break;
    }
    aco_rt_close(fd);
}

static int start_conn(int fd) {
    aco_rt_co_t* co = aco_rt_spawn(NULL, conn_co, (void*)(intptr_t)fd);
    if (co == NULL) return -1;
    aco_rt_detach(co);
    return 0;
}

int main(int argc, char** argv) {
    rt_cli_t cli;
    if (rt_cli_parse(&cli, "aco_echo", argc, argv) < 0) return 2;
    aco_rt_opts_t o = {.backend = cli.backend};
    aco_rt_sched_t* s = aco_rt_sched_new(&o);
    if (s == NULL) {
        fprintf(stderr, "aco_echo: cannot start the scheduler: %s\n", strerror(errno));
        return 1;
    }
    static rt_cli_serve_t sv = {-1, "aco_echo", start_conn};
    if ((sv.lfd = rt_cli_listen(&cli, "aco_echo")) < 0) return 1;
    fprintf(stderr, "aco_echo: listening on %s:%d (%s)\n", cli.bind, cli.port,
            aco_rt_backend_name(s));
    aco_rt_detach(aco_rt_spawn(s, rt_cli_accept_co, &sv));
    int r = aco_rt_sched_run(s);
    fprintf(stderr, "aco_echo: scheduler stopped: %s\n", strerror(-r));
    return 1;
}
