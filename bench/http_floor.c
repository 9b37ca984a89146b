/* http_floor - the kernel's floor under an HTTP/1.1 static-file server: a
 * bare epoll loop that makes the system calls any such server must make for
 * wrk's traffic and nothing else.
 *
 *   http_floor --port P --root DIR   (127.0.0.1:P; exits 0 on SIGTERM or
 *                                     SIGINT, saying how many requests it
 *                                     answered on stderr)
 *
 * At start it opens every regular file directly in DIR (not in its
 * subdirectories) and keeps its fd and size; a file up to 64 KiB is also
 * read into memory behind its response header, "HTTP/1.1 200 OK\r\n
 * Content-Length: N\r\n\r\n" (what wrk and curl need: no Date, no Server,
 * no Content-Type).  Then one thread, level-triggered epoll, keep-alive.
 * For a readable connection: one recv() into its 16 KiB input buffer (a
 * partial request is kept for the next), and for each complete request in
 * it (headers up to "\r\n\r\n", request line "GET /NAME HTTP/1.1", no
 * body) an answer: a small file's header and bytes as they lie in memory,
 * all the small answers of one read in ONE send (sendmsg of their iovecs);
 * a large file's header sent with MSG_MORE (with the answers before it)
 * and its bytes by sendfile() from the kept fd, looping while it sends
 * part; an unknown NAME "404 Not Found" with Content-Length: 0.  What the
 * socket does not take waits for EPOLLOUT (the connection is not read
 * meanwhile).  "Connection: close" closes after the answer; a request it
 * cannot parse or over 16 KiB closes at once.  Accepted sockets have
 * TCP_NODELAY, as nginx's tcp_nodelay on.
 *
 * What it measures: its CPU per request (utime+stime of /proc/PID/stat over
 * the requests) is epoll_wait + recv + one send (small file) or send +
 * sendfile (large file) per request or batch, what nginx, h2o and aco_http
 * in bench/bench_http.sh cannot go below: whatever a server does, the
 * request has to come in and the bytes have to go out through the same
 * socket calls.  Theirs less this one's is what they spend themselves.  It
 * deliberately skips everything else: it parses no header (but looks for
 * "Connection: close"), sends no Date, no Server, no MIME type, logs
 * nothing, never opens or stats a file per request, knows no HEAD, range,
 * conditional request, URL decoding, directory or HTTP/1.0, and closes on
 * anything it does not understand instead of answering 400.
 *
 *   taskset -c 1 output/http_floor --port P --root ROOT &
 *   taskset -c 0 wrk -t1 -c100 -d6s --latency http://127.0.0.1:P/4k.bin
 *   (and /1m.bin; as for aco_http, nginx and h2o)
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>

#define IN_SIZE 16384
#define SMALL (64 * 1024)       /* files up to this size are answered from memory */
#define MAX_IOV 256             /* answers batched in one send, at most */
#define HDR_SIZE 64             /* the longest response header, and more */

struct file {
    char* name;
    size_t name_len;
    int fd;
    off_t size;
    char* resp;                 /* header, then for a small file its bytes */
    size_t resp_len;            /* header and bytes (small), the header (large) */
};

struct conn {
    int fd;
    unsigned events;            /* what epoll waits for: EPOLLIN or EPOLLOUT */
    int closing;                /* "Connection: close": close once answered */
    size_t in_len;
    unsigned iov_at, iov_n;     /* the answers in memory not yet sent */
    int file_fd;                /* a large file's bytes not yet sent */
    off_t file_off;
    size_t file_left;
    struct iovec iov[MAX_IOV];
    char in[IN_SIZE];
};

static const char not_found[] = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";
static struct file* files;
static size_t nfiles;

#include "floor_loop.h"     /* the listener, the epoll loop, recv */

/* Every regular file directly in dir, opened and, when small, read: 0, or
 * -1 with the reason said. */
static int load(const char* dir) {
    DIR* d = opendir(dir);
    struct dirent* e;
    size_t cap = 0;
    if (!d) { perror(dir); return -1; }
    while ((e = readdir(d))) {
        struct stat st;
        struct file f = {0};
        int fd = openat(dirfd(d), e->d_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0) continue;               /* a symlink, or unreadable */
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) { close(fd); continue; }
        f.fd = fd;
        f.size = st.st_size;
        f.name_len = strlen(e->d_name);
        f.name = strdup(e->d_name);
        f.resp = malloc(HDR_SIZE + (f.size <= SMALL ? (size_t)f.size : 0));
        if (!f.name || !f.resp) { fprintf(stderr, "http_floor: out of memory\n"); return -1; }
        f.resp_len = (size_t)snprintf(f.resp, HDR_SIZE,
                                      "HTTP/1.1 200 OK\r\nContent-Length: %lld\r\n\r\n",
                                      (long long)f.size);
        if (f.size <= SMALL) {
            size_t got = 0;
            while (got < (size_t)f.size) {
                ssize_t k = pread(fd, f.resp + f.resp_len + got, (size_t)f.size - got, (off_t)got);
                if (k <= 0) {
                    fprintf(stderr, "http_floor: cannot read %s\n", e->d_name);
                    return -1;
                }
                got += (size_t)k;
            }
            f.resp_len += got;
        }
        if (nfiles == cap &&
            !(files = realloc(files, (cap = cap ? 2 * cap : 16) * sizeof *files))) {
            fprintf(stderr, "http_floor: out of memory\n");
            return -1;
        }
        files[nfiles++] = f;
    }
    closedir(d);
    return 0;
}

static const struct file* lookup(const char* name, size_t n) {
    size_t i;
    for (i = 0; i < nfiles; i++)
        if (files[i].name_len == n && memcmp(files[i].name, name, n) == 0) return &files[i];
    return NULL;
}

/* A header line "Connection: close" among the headers at p (n bytes, from
 * the line after the request line up to the blank line). */
static int wants_close(const char* p, size_t n) {
    static const char key[] = "connection:";
    const char *end = p + n, *nl;
    for (; p < end; p = nl + 1) {
        if (!(nl = memchr(p, '\n', (size_t)(end - p)))) break;
        if ((size_t)(nl - p) > sizeof key - 1 && strncasecmp(p, key, sizeof key - 1) == 0) {
            const char* v = p + sizeof key - 1;
            while (v < nl && *v == ' ') v++;
            if (nl - v >= 5 && strncasecmp(v, "close", 5) == 0) return 1;
        }
    }
    return 0;
}

static void queue(struct conn* c, const char* p, size_t n) {
    c->iov[c->iov_at + c->iov_n].iov_base = (void*)p;
    c->iov[c->iov_at + c->iov_n].iov_len = n;
    c->iov_n++;
}

/* The answers to the complete requests buffered, while they fit and up to
 * a large file's (its bytes must go after them): 1, or -1 when the
 * connection is to be closed at once. */
static int answer(struct conn* c) {
    size_t at = 0;
    static const char get[] = "GET /", version[] = " HTTP/1.1\r\n";
    c->iov_at = 0;
    while (!c->closing && c->file_left == 0 && c->iov_n < MAX_IOV && at < c->in_len) {
        const char *p = c->in + at, *end = memmem(p, c->in_len - at, "\r\n\r\n", 4);
        const char *name, *sp;
        const struct file* f;
        size_t name_len;
        if (!end) break;
        end += 4;
        if ((size_t)(end - p) < sizeof get - 1 || memcmp(p, get, sizeof get - 1) != 0) return -1;
        name = p + sizeof get - 1;
        if (!(sp = memchr(name, ' ', (size_t)(end - name))) ||
            memchr(name, '\n', (size_t)(sp - name)) ||
            (size_t)(end - sp) < sizeof version - 1 || memcmp(sp, version, sizeof version - 1) != 0)
            return -1;
        name_len = (size_t)(sp - name);
        sp += sizeof version - 1;           /* the headers after the request line */
        c->closing = wants_close(sp, (size_t)(end - sp));
        at = (size_t)(end - c->in);
        requests++;
        if (!(f = lookup(name, name_len))) {
            queue(c, not_found, sizeof not_found - 1);
            continue;
        }
        queue(c, f->resp, f->resp_len);
        if (f->size > SMALL) {
            c->file_fd = f->fd;
            c->file_off = 0;
            c->file_left = (size_t)f->size;
        }
    }
    memmove(c->in, c->in + at, c->in_len - at);
    c->in_len -= at;
    if (c->in_len == IN_SIZE) return -1;    /* a request over 16 KiB */
    return 1;
}

/* Send what is pending, answer what is buffered, until neither is left:
 * 0, or -1 when the connection is to be closed. */
static int serve(struct conn* c) {
    for (;;) {
        while (c->iov_n > 0) {
            struct msghdr m = {.msg_iov = c->iov + c->iov_at, .msg_iovlen = c->iov_n};
            ssize_t k = sendmsg(c->fd, &m, MSG_NOSIGNAL | (c->file_left ? MSG_MORE : 0));
            if (k < 0 && errno == EINTR) continue;
            if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return wait_for(c, EPOLLOUT);
            if (k < 0) return -1;
            while (c->iov_n > 0 && (size_t)k >= c->iov[c->iov_at].iov_len) {
                k -= (ssize_t)c->iov[c->iov_at].iov_len;
                c->iov_at++;
                c->iov_n--;
            }
            if (c->iov_n > 0) {
                c->iov[c->iov_at].iov_base = (char*)c->iov[c->iov_at].iov_base + k;
                c->iov[c->iov_at].iov_len -= (size_t)k;
            }
        }
        while (c->file_left > 0) {
            ssize_t k = sendfile(c->fd, c->file_fd, &c->file_off, c->file_left);
            if (k < 0 && errno == EINTR) continue;
            if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return wait_for(c, EPOLLOUT);
            if (k <= 0) return -1;          /* 0: the file shrank under us */
            c->file_left -= (size_t)k;
        }
        if (c->closing) return -1;
        size_t before = c->in_len;
        if (answer(c) < 0) return -1;
        if (c->iov_n == 0 && c->in_len == before) return wait_for(c, EPOLLIN);
    }
}

static struct conn* conn_new(int fd) {
    struct conn* c = malloc(sizeof *c);
    if (c) {
        c->fd = fd; c->events = EPOLLIN; c->closing = 0;
        c->in_len = c->file_left = 0;
        c->iov_at = c->iov_n = 0;
    }
    return c;
}

int main(int argc, char** argv) {
    const char* root = NULL;
    int port = 0, i;
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--port") == 0 && i + 1 < argc) port = atoi(argv[++i]);
        else if (strcmp(argv[i], "--root") == 0 && i + 1 < argc) root = argv[++i];
        else break;
    }
    if (i < argc || port <= 0 || port > 65535 || !root) {
        fprintf(stderr, "usage: http_floor --port P --root DIR\n");
        return 2;
    }
    if (load(root) < 0) return 1;
    return floor_run("http_floor", port);
}
