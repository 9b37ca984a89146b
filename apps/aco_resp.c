/* aco_resp - a RESP (redis protocol) server on the runtime: PING, ECHO, SET,
 * GET, DEL, INCR (and what clients send when they connect: CONFIG GET,
 * COMMAND, SELECT 0, QUIT) over an in-memory store without expiry.
 *
 *   aco_resp [--port N] [--backend uring|epoll] [--bind ADDR] [--threads T]
 *            [--accept reuseport|handoff]
 *
 * One co per connection.  It receives into buffers the runtime lends
 * (aco_rt_recv_lend: with io_uring, one multishot receive per connection
 * into the provided buffer ring, so a request that came while the co was
 * busy costs no system call), executes the complete commands where they
 * lie (pipelining) appending the replies to the connection's output
 * buffer, up to 256 KiB of them, sends that, and goes on; a command split
 * between receives is gathered in the connection's input buffer.  While
 * the peer does not take the replies, its requests are still read (into
 * the input buffer, executed once the replies are out): a client may write
 * its whole pipeline before reading; a backlog of it is executed 256 KiB
 * of replies at a time, the thread's other cos run in between.  A protocol error
 * gets "-ERR <what>" and the connection closed, as redis does; so does an
 * input buffer over 1 GiB (redis' client-query-buffer-limit) and running
 * out of memory for a reply.  A SET is in the store before its +OK is
 * sent.
 *
 * With --threads T > 1 the connections are served by T threads (rt_cli.h)
 * over one store: a spin lock is held while the commands of one batch are
 * executed (never across a wait: they do no I/O), so each command is
 * atomic, as in redis.
 */
#define _GNU_SOURCE
#include "aco_rt.h"
#include "kv.h"
#include "resp.h"
#include "rt_cli.h"

#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define READ_CHUNK (16 * 1024)
#define QUERY_LIMIT ((size_t)1 << 30)
#define OUT_BATCH (256 * 1024)

static kv_t* store;
static int store_shared;            /* --threads > 1: lock it */
static atomic_flag store_lock = ATOMIC_FLAG_INIT;

static void store_enter(void) {
    if (!store_shared) return;
    for (unsigned i = 0; atomic_flag_test_and_set_explicit(&store_lock, memory_order_acquire); i++)
        if (i >= 64) sched_yield();     /* its holder lost its CPU */
}

static void store_leave(void) {
    if (store_shared) atomic_flag_clear_explicit(&store_lock, memory_order_release);
}

typedef struct {
    int fd;
    int eof;                        /* the peer is done sending */
    int pending;                    /* c->in may hold commands to execute:
                                       read while a reply waited, or left
                                       by a full batch */
    resp_buf_t in;                  /* c->in.ptr[in_off, len): not yet executed */
    size_t in_off;
    resp_buf_t out;
    resp_parser_t p;
} conn_t;

/* Read what has come into c->in, without waiting: 0, or -1 if the
 * connection is done for (also when the input outgrows the query limit
 * or memory: the peer that sent it does not read our replies either). */
static int read_more(conn_t* c) {
    if (c->in.len - c->in_off + READ_CHUNK > QUERY_LIMIT || resp_buf_reserve(&c->in, READ_CHUNK) < 0)
        return -1;
    ssize_t n = aco_rt_recv(c->fd, c->in.ptr + c->in.len, c->in.cap - c->in.len, 0, 0);
    if (n == -ETIMEDOUT || n == -EAGAIN) return 0;     /* a spurious wake-up */
    if (n < 0) return -1;
    if (n == 0) c->eof = 1;
    c->in.len += (size_t)n;
    c->pending = 1;
    return 0;
}

/* Send what is in c->out: 0, or -1 if the connection is done for.  While
 * the peer does not take the replies, its requests are still read (not
 * executed: the input buffer grows, the output does not): a client that
 * writes its whole pipeline before reading a reply (hiredis' blocking API
 * does) would otherwise wait for us as we wait for it. */
static int flush_out(conn_t* c) {
    if (c->out.oom) return -1;
    size_t off = 0;
    while (off < c->out.len) {
        /* one try, then wait for either way (after the peer's end: send) */
        ssize_t w = aco_rt_send(c->fd, c->out.ptr + off, c->out.len - off, 0, c->eof ? -1 : 0);
        if (w > 0) {
            off += (size_t)w;
            continue;
        }
        if (w != -ETIMEDOUT && w != -EAGAIN) return -1;
        int ev = aco_rt_wait(c->fd, POLLIN | POLLOUT, -1);
        if (ev < 0) return -1;
        if ((ev & POLLIN) && !(ev & POLLOUT) && read_more(c) < 0) return -1;
    }
    c->out.len = 0;
    resp_buf_shrink(&c->out, 1 << 20);
    return 0;
}

/* Execute the complete commands in in[0, len) (c->in, or a lent buffer),
 * until their replies fill OUT_BATCH (the rest is left for after they are
 * sent: a pipeline of GETs must not build all its replies at once): 0 to
 * go on, -1 to close (after flushing what the replies say).  *done: the
 * bytes executed. */
static int serve(conn_t* c, const char* in, size_t len, size_t* done) {
    size_t off = 0, used = 0;
    int r = RESP_OK;
    store_enter();
    while (c->out.len < OUT_BATCH &&
           (r = resp_parse(&c->p, in + off, len - off, &used)) == RESP_OK) {
        off += used;
        int e = kv_exec(store, c->p.argc, c->p.argv, &c->out);
        if (e == KV_CLOSE || e < 0) {   /* QUIT, or no memory for the reply */
            store_leave();
            *done = off;
            return -1;
        }
    }
    store_leave();
    if (r < 0) {
        const char* e = resp_parser_error(&c->p);
        char msg[128];
        int n = snprintf(msg, sizeof(msg), "ERR %s", e);
        resp_add_error(&c->out, msg, (size_t)n);
        *done = off;
        return -1;
    }
    if (r == RESP_OK) {
        c->pending = 1;                 /* a full batch: more may follow */
        used = 0;
    }
    *done = off + used;
    return 0;
}

/* c->in's commands.  What they leave is moved to the buffer's front only
 * once it is no longer than what they consumed (each byte moves O(1)
 * times): a backlog of 200 MB, executed 256 KiB of replies at a time,
 * once cost a move of all the rest per batch (9 s of CPU). */
static int serve_input(conn_t* c) {
    size_t done;
    int r = serve(c, c->in.ptr + c->in_off, c->in.len - c->in_off, &done);
    c->in_off += done;
    if (c->in_off >= c->in.len - c->in_off) {
        resp_buf_consume(&c->in, c->in_off);
        c->in_off = 0;
    }
    return r;
}

/* Receive what comes next, in a buffer the runtime lends, and execute what
 * is complete: 0 to go on, 1 to close after the replies, -1 to close now.
 * The lent buffer is parsed where it lies when c->in is empty (no copy);
 * a part command, or a full batch's rest, is copied to c->in. */
static int receive_and_serve(conn_t* c) {
    const char* p;
    ssize_t n = aco_rt_recv_lend(c->fd, &p, -1);
    if (n <= 0) return -1;              /* peer closed or reset */
    size_t done = 0;
    int stop = 0;
    if (c->in.len == c->in_off && resp_parser_need(&c->p) <= (size_t)n)
        stop = serve(c, p, (size_t)n, &done) < 0;
    if (!stop && done < (size_t)n) {
        if (c->in.len - c->in_off + ((size_t)n - done) > QUERY_LIMIT) {
            resp_add_error(&c->out, "ERR query buffer limit exceeded", 31);
            stop = 1;
        } else if (resp_buf_append(&c->in, p + done, (size_t)n - done) < 0) {
            resp_add_error(&c->out, "ERR out of memory", 17);
            stop = 1;
        } else if (done == 0) {
            c->pending = 1;             /* (not parsed yet) */
        }
    }
    aco_rt_lend_return(p);
    return stop;
}

/* We close first (an error, QUIT): the client may still be sending.
 * Closing with unread input would reset the connection, and a reset makes
 * the client's kernel drop the reply it has not read yet: so say we are
 * done and read what comes, for up to a second.  Out of line: its sink
 * would make every frame of conn_co 4 KiB bigger, which the co's share
 * stack copies at every switch. */
static __attribute__((noinline)) void linger(int fd) {
    shutdown(fd, SHUT_WR);
    int64_t until = aco_rt_in_ms(1000);
    size_t left = 16 << 20;
    char sink[4096];
    ssize_t n;
    while (left && (n = aco_rt_recv(fd, sink, sizeof(sink), 0, until)) > 0)
        left -= (size_t)n < left ? (size_t)n : left;
}

static void conn_co(void* arg) {
    conn_t* c = (conn_t*)arg;
    for (;;) {
        int stop;
        if (!c->pending) {
            if (c->eof) goto done;
            if ((stop = receive_and_serve(c)) < 0) goto done;
        } else {                        /* execute what c->in holds */
            c->pending = 0;
            /* (a big argument still arriving: receive first) */
            if (c->in.len - c->in_off < resp_parser_need(&c->p)) continue;
            stop = serve_input(c);
        }
        if (flush_out(c) < 0) goto done;
        if (stop) goto linger;
        /* a full batch, more waiting: the thread's other cos (and the
         * stop) get their turn between batches of a long pipeline */
        if (c->pending) aco_rt_yield();
        resp_buf_shrink(&c->in, 1 << 20);
        resp_parser_shrink(&c->p, 64 << 10);
    }
linger:
    linger(c->fd);
done:
    aco_rt_close(c->fd);
    resp_buf_free(&c->in);
    resp_buf_free(&c->out);
    resp_parser_free(&c->p);
    free(c);
}

static int start_conn(int fd) {
    conn_t* c = calloc(1, sizeof(*c));
    if (c == NULL) return -1;
    c->fd = fd;
    resp_parser_init(&c->p);
    if (rt_cli_spawn(conn_co, c) < 0) {
        resp_parser_free(&c->p);
        free(c);
        return -1;
    }
    return 0;
}

int main(int argc, char** argv) {
    rt_cli_t cli;
    if (rt_cli_parse(&cli, "aco_resp", argc, argv) < 0) return 2;
    if ((store = kv_new(NULL)) == NULL) {
        fprintf(stderr, "aco_resp: out of memory\n");
        return 1;
    }
    store_shared = cli.threads > 1;
    return rt_cli_run(&cli, "aco_resp", start_conn);
}
