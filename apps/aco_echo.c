/* aco_echo - a TCP echo server on the runtime: one co per connection.
 *
 *   aco_echo [--port N (6379)] [--bind ADDR (127.0.0.1)] [--backend uring|epoll]
 *            [--threads T] [--accept reuseport|handoff] [--idle-timeout-ms MS]
 *
 * Each connection's co reads into a buffer on its own stack (a share stack:
 * the runtime keeps the kernel off it) and writes back what it read until
 * the peer closes its side, then closes; a connection that sends nothing
 * for --idle-timeout-ms (60000), or does not take its echo in that time,
 * is closed (README's server, with options and threads).  EMFILE/ENFILE at
 * accept: the server says so (a line in 10 s at most), sleeps a moment and
 * goes on serving the connections it has.
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

static int64_t idle_ns = 60000LL * 1000000;

static void conn_co(void* arg) {
    int fd = (int)(intptr_t)arg;
    char buf[16384];
    for (;;) {
        ssize_t n = aco_rt_read(fd, buf, sizeof(buf), aco_rt_in_ns(idle_ns));
        if (n <= 0) break;
        if (aco_rt_write(fd, buf, (size_t)n, aco_rt_in_ns(idle_ns)) != n) break;
    }
    aco_rt_close(fd);
}

static int start_conn(int fd) { return rt_cli_spawn(conn_co, (void*)(intptr_t)fd); }

int main(int argc, char** argv) {
    /* --idle-timeout-ms here, the rest rt_cli_parse's */
    int n = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--idle-timeout-ms") == 0) {
            if (rt_cli_ms("aco_echo", argv[i], i + 1 < argc ? argv[i + 1] : NULL, &idle_ns) < 0)
                return 2;
            i++;
        } else {
            argv[n++] = argv[i];
        }
    }
    rt_cli_t cli;
    if (rt_cli_parse(&cli, "aco_echo", n, argv) < 0) {
        fprintf(stderr, "       aco_echo also takes --idle-timeout-ms MS (60000)\n");
        return 2;
    }
    return rt_cli_run(&cli, "aco_echo", start_conn);
}
