/* aco_echo - a TCP echo server on the runtime: one co per connection.
 *
 *   aco_echo [--port N] [--backend uring|epoll] [--bind ADDR] [--threads T]
 *            [--accept reuseport|handoff]
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

static int start_conn(int fd) { return rt_cli_spawn(conn_co, (void*)(intptr_t)fd); }

int main(int argc, char** argv) {
    rt_cli_t cli;
    if (rt_cli_parse(&cli, "aco_echo", argc, argv) < 0) return 2;
    return rt_cli_run(&cli, "aco_echo", start_conn);
}
