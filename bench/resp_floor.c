/* resp_floor - the kernel's floor under a RESP server: a bare epoll loop that
 * makes the system calls any server must make for redis-benchmark's traffic
 * and nothing else.
 *
 *   resp_floor [--port P]        (127.0.0.1:P, default 6379; exits 0 on
 *                                 SIGTERM or SIGINT, saying how many
 *                                 requests it answered on stderr)
 *
 * One thread, level-triggered epoll.  For a readable connection: one recv()
 * into its 16 KiB input buffer (a partial request is kept for the next),
 * the complete requests in it counted by a minimal RESP parser (inline:
 * "PING\r\n"; multibulk: "*<n>\r\n" then n times "$<len>\r\n<bytes>\r\n"),
 * and all of them answered by ONE send() of canned replies chosen by the
 * command's name: PING +PONG, SET +OK, GET "$3\r\nxxx\r\n" (as long as
 * redis-benchmark's 3-byte value), CONFIG GET save / appendonly as redis
 * answers them (redis-benchmark asks at start and warns without them),
 * anything else -ERR.  Unsent replies wait for EPOLLOUT (the connection is
 * not read meanwhile).
 *
 * What it measures: its CPU per request (utime+stime of /proc/PID/stat over
 * the requests) is epoll_wait + recv + send per batch, the cost bench/
 * bench_rt.sh section a's servers cannot go below; theirs less this one's
 * is what they spend themselves.  It deliberately skips everything else: it
 * stores nothing (GET never misses, SET keeps nothing), checks no
 * arguments, answers no other command, and closes a connection on a
 * protocol error or a request over 16 KiB instead of replying.
 *
 *   taskset -c 1 output/resp_floor --port P &
 *   taskset -c 0 redis-benchmark -h 127.0.0.1 -p P -t TEST -c 50 -n N -P {1,16} --csv
 *   (TEST: ping_inline, set or get; as for redis-server and aco_resp)
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#define IN_SIZE 16384
#define OUT_SIZE (2 * IN_SIZE) /* a full read of PINGs, GETs or SETs: one send */
#define MAX_REPLY 64            /* the longest canned reply, and more */

struct conn {
    int fd;
    unsigned events;            /* what epoll waits for: EPOLLIN or EPOLLOUT */
    size_t in_len, out_off, out_len;
    char in[IN_SIZE], out[OUT_SIZE];
};

#include "floor_loop.h"     /* the listener, the epoll loop, recv */

#define LIT(s) s, sizeof(s) - 1
static int is(const char* p, size_t n, const char* s, size_t sn) {
    return n == sn && strncasecmp(p, s, n) == 0;
}

/* A number ending in \r\n at p (n bytes there): its value and where the line
 * ends, 0 when the line is not complete, -1 when it is no number. */
static int number(const char* p, size_t n, long* v, size_t* end) {
    const char* nl = memchr(p, '\n', n);
    size_t i = 0;
    long x = 0;
    int neg = n > 0 && p[0] == '-';
    if (!nl) return n > 20 ? -1 : 0;
    if (nl == p) return -1;
    for (i = (size_t)neg; p + i < nl - 1 && p[i] >= '0' && p[i] <= '9' && x < IN_SIZE; i++)
        x = x * 10 + (p[i] - '0');
    if (p + i != nl - 1 || p[i] != '\r' || i == (size_t)neg) return -1;
    *v = neg ? -x : x;
    *end = (size_t)(nl - p) + 1;
    return 1;
}

/* One request at p: 1 and its length in *len, its name and last argument,
 * 0 when it is not complete yet, -1 on a protocol error. */
static int request(const char* p, size_t n, size_t* len, const char** name, size_t* nl,
                   const char** arg, size_t* al) {
    size_t at, e;
    long count, k, i;
    *name = *arg = NULL; *nl = *al = 0;
    if (p[0] != '*') {                      /* inline: a line, words by spaces */
        const char* end = memchr(p, '\n', n);
        if (!end) return 0;
        *len = (size_t)(end - p) + 1;
        if (end > p && end[-1] == '\r') end--;
        *name = p;
        while (p < end && *p != ' ') p++;
        *nl = (size_t)(p - *name);
        return 1;
    }
    int r = number(p + 1, n - 1, &count, &e);
    if (r <= 0) return r;
    at = 1 + e;
    for (i = 0; i < count; i++) {
        if (at >= n) return 0;
        if (p[at] != '$') return -1;
        if ((r = number(p + at + 1, n - at - 1, &k, &e)) <= 0) return r;
        if (k < 0) return -1;
        at += 1 + e;
        if (n - at < (size_t)k + 2) return 0;
        if (p[at + (size_t)k] != '\r' || p[at + (size_t)k + 1] != '\n') return -1;
        if (i == 0) { *name = p + at; *nl = (size_t)k; }
        *arg = p + at; *al = (size_t)k;
        at += (size_t)k + 2;
    }
    *len = at;
    return 1;
}

/* The replies to the complete requests buffered, while they fit: 1, or -1
 * on a protocol error. */
static int answer(struct conn* c) {
    size_t at = 0, len, nl, al;
    const char *name, *arg;
    int r = 1;
    while (at < c->in_len && OUT_SIZE - c->out_len >= MAX_REPLY &&
           (r = request(c->in + at, c->in_len - at, &len, &name, &nl, &arg, &al)) == 1) {
        const char* rep = "-ERR unknown command\r\n";
        at += len;
        if (nl == 0) continue;              /* an empty line: nothing */
        requests++;
        if (is(name, nl, LIT("PING"))) rep = "+PONG\r\n";
        else if (is(name, nl, LIT("SET"))) rep = "+OK\r\n";
        else if (is(name, nl, LIT("GET"))) rep = "$3\r\nxxx\r\n";
        else if (is(name, nl, LIT("CONFIG")) && is(arg, al, LIT("save")))
            rep = "*2\r\n$4\r\nsave\r\n$0\r\n\r\n";
        else if (is(name, nl, LIT("CONFIG")) && is(arg, al, LIT("appendonly")))
            rep = "*2\r\n$10\r\nappendonly\r\n$2\r\nno\r\n";
        memcpy(c->out + c->out_len, rep, strlen(rep));
        c->out_len += strlen(rep);
    }
    memmove(c->in, c->in + at, c->in_len - at);
    c->in_len -= at;
    if (r == 0 && c->in_len == IN_SIZE) return -1;  /* a request over 16 KiB */
    return r < 0 ? -1 : 1;
}

/* Send what is pending, answer what is buffered, until neither is left:
 * 0, or -1 when the connection is to be closed. */
static int serve(struct conn* c) {
    for (;;) {
        while (c->out_off < c->out_len) {
            ssize_t k = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
            if (k < 0 && errno == EINTR) continue;
            if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return wait_for(c, EPOLLOUT);
            if (k < 0) return -1;
            c->out_off += (size_t)k;
        }
        c->out_off = c->out_len = 0;
        size_t before = c->in_len;
        if (answer(c) < 0) return -1;
        if (c->out_len == 0 && c->in_len == before) return wait_for(c, EPOLLIN);
    }
}

static struct conn* conn_new(int fd) {
    struct conn* c = malloc(sizeof *c);
    if (c) {
        c->fd = fd; c->events = EPOLLIN;
        c->in_len = c->out_off = c->out_len = 0;
    }
    return c;
}

int main(int argc, char** argv) {
    int port = 6379;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--port") == 0 && i + 1 < argc) port = atoi(argv[++i]);
        else { fprintf(stderr, "usage: resp_floor [--port P]\n"); return 2; }
    }
    return floor_run("resp_floor", port);
}
