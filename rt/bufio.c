/* bufio.c - buffered reader and writer per descriptor (aco_rt.h, "Buffered
 * I/O"): exact reads, reads up to a delimiter, peek/consume for parsers,
 * gathered writes.
 *
 * Layout: one allocation, the object then the read buffer then the write
 * buffer, all heap (the kernel may fill the read buffer through io_uring
 * while the co is parked: it must not lie on a share stack).  The read
 * buffer holds its bytes at r[roff, roff + rlen); a view handed out stays
 * put until a later call reads (which may move the bytes to the start) or
 * consumes.  It has one byte more than rcap, which only read_until uses:
 * with exactly limit bytes buffered and no delim among them, it must read
 * once more to tell a tail at end of file (returned) from a longer record
 * (-EMSGSIZE), even when limit is rcap.  The write buffer holds w[0, wlen).
 */
#define _GNU_SOURCE
#include "aco_rt.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define BUFIO_DEFAULT (16 * 1024)
#define BUFIO_MAX ((size_t)1 << 30)

struct aco_rt_bufio {
    int fd;
    int werr;                   /* the writer's kept error, or 0 */
    int rerr;                   /* an error read_full met after part of its
                                   count, for the next read call, or 0 */
    const aco_rt_bufio_io_t* io;    /* a transport of the program's, or NULL: fd */
    void* ctx;
    char* r;
    size_t rcap, roff, rlen;
    char* w;
    size_t wcap, wlen;
};

/* Blocks of freed bufios, kept for the next bufios of the same sizes: a
 * server that frees an idle connection's bufio and makes one again at its
 * next request (aco_http over TLS) pays a slot's exchange instead of
 * malloc and free of tens of KiB (which glibc serves from its unsorted
 * and large bins, merging and splitting: 1-2% of a 4 KiB HTTPS request's
 * CPU).  At most BUFIO_KEEP blocks of up to BUFIO_KEEP_MAX bytes, across
 * threads (what an idle program keeps is bounded); static, so a leak
 * checker sees them.  Not in ASan builds, nor under valgrind (its preload
 * in LD_PRELOAD: the runtime's objects are the same in its builds): a
 * freed bufio's use must stay theirs to find. */
#if aco__asan
#define BUFIO_KEEP 1            /* (a slot never used) */
#define BUFIO_KEEP_ON 0
#else
#define BUFIO_KEEP 8
#define BUFIO_KEEP_ON keep_on()
#endif
#define BUFIO_KEEP_MAX ((size_t)256 * 1024)
static aco_rt_bufio_t* kept[BUFIO_KEEP];

static __attribute__((unused)) int keep_on(void) {
    static int on = -1;         /* (a race computes it twice, alike) */
    int v = __atomic_load_n(&on, __ATOMIC_RELAXED);
    if (aco_unlikely(v < 0)) {
        const char* p = getenv("LD_PRELOAD");
        v = !(p && strstr(p, "/vgpreload_"));
        __atomic_store_n(&on, v, __ATOMIC_RELAXED);
    }
    return v;
}

static aco_rt_bufio_t* kept_take(size_t rsize, size_t wsize) {
    for (int i = 0; BUFIO_KEEP_ON && i < BUFIO_KEEP; i++) {
        if (__atomic_load_n(&kept[i], __ATOMIC_RELAXED) == NULL) continue;
        aco_rt_bufio_t* b = __atomic_exchange_n(&kept[i], NULL, __ATOMIC_ACQUIRE);
        if (b == NULL) continue;
        if (b->rcap == rsize && b->wcap == wsize) return b;
        aco_rt_bufio_t* none = NULL;    /* another size's: back, or gone */
        if (!__atomic_compare_exchange_n(&kept[i], &none, b, 0, __ATOMIC_RELEASE,
                                         __ATOMIC_RELAXED))
            free(b);
    }
    return NULL;
}

static aco_rt_bufio_t* make(int fd, const aco_rt_bufio_io_t* io, void* ctx, size_t rsize,
                            size_t wsize) {
    if (rsize == 0) rsize = BUFIO_DEFAULT;
    if (wsize == 0) wsize = BUFIO_DEFAULT;
    if ((io ? fd < -1 || io->read == NULL || io->writev == NULL : fd < 0) ||
        rsize > BUFIO_MAX || wsize > BUFIO_MAX) {
        errno = EINVAL;
        return NULL;
    }
    aco_rt_bufio_t* b = kept_take(rsize, wsize);
    if (b == NULL && (b = malloc(sizeof(*b) + rsize + 1 + wsize)) == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    memset(b, 0, sizeof(*b));
    b->fd = fd;
    b->io = io;
    b->ctx = ctx;
    b->r = (char*)(b + 1);
    b->rcap = rsize;
    b->w = b->r + rsize + 1;
    b->wcap = wsize;
    return b;
}

aco_rt_bufio_t* aco_rt_bufio_new(int fd, size_t rsize, size_t wsize) {
    return make(fd, NULL, NULL, rsize, wsize);
}

aco_rt_bufio_t* aco_rt_bufio_new_io(const aco_rt_bufio_io_t* io, void* ctx, int fd,
                                    size_t rsize, size_t wsize) {
    if (io == NULL) {
        errno = EINVAL;
        return NULL;
    }
    return make(fd, io, ctx, rsize, wsize);
}

/* The transport: the program's, or fd through the runtime's calls. */
static ssize_t xread(aco_rt_bufio_t* b, void* buf, size_t n, int64_t deadline) {
    return b->io ? b->io->read(b->ctx, buf, n, deadline) : aco_rt_read(b->fd, buf, n, deadline);
}

static ssize_t xwritev(aco_rt_bufio_t* b, const struct iovec* iov, int k, int64_t deadline) {
    return b->io ? b->io->writev(b->ctx, iov, k, deadline) : aco_rt_writev(b->fd, iov, k, deadline);
}

void aco_rt_bufio_free(aco_rt_bufio_t* b) {
    if (b == NULL) return;
    if (BUFIO_KEEP_ON && b->rcap + b->wcap <= BUFIO_KEEP_MAX)
        for (int i = 0; i < BUFIO_KEEP; i++) {
            aco_rt_bufio_t* none = NULL;
            if (__atomic_load_n(&kept[i], __ATOMIC_RELAXED) == NULL &&
                __atomic_compare_exchange_n(&kept[i], &none, b, 0, __ATOMIC_RELEASE,
                                            __ATOMIC_RELAXED))
                return;
        }
    free(b);
}

int aco_rt_bufio_fd(const aco_rt_bufio_t* b) { return b ? b->fd : -EINVAL; }

size_t aco_rt_bufio_buffered(const aco_rt_bufio_t* b) { return b ? b->rlen : 0; }

size_t aco_rt_bufio_unflushed(const aco_rt_bufio_t* b) { return b ? b->wlen : 0; }

/* What every call with a deadline checks first, as the runtime's blocking
 * calls do: even with the bytes at hand, a cancelled co gets -ECANCELED
 * (not one whose shield keeps the cancel: its goodbye goes out). */
static int gate(const aco_rt_bufio_t* b) { return b ? aco_rt_cancel_check() : -EINVAL; }

/* A read of the transport, unless an error a read_full met after part of
 * its count (it returned the count) is kept: that error instead, once (the
 * kernel told it once).  Every read goes through here, so a call that
 * reads nothing (n == 0, a refused argument, bytes at hand) leaves it. */
static ssize_t rread(aco_rt_bufio_t* b, void* buf, size_t n, int64_t deadline) {
    if (b->rerr) {
        int e = b->rerr;
        b->rerr = 0;
        return e;
    }
    return xread(b, buf, n, deadline);
}

static void take(aco_rt_bufio_t* b, size_t n) {
    b->roff += n;
    b->rlen -= n;
    if (b->rlen == 0) b->roff = 0;  /* the bytes stay in place: views hold */
}

/* One read into the free room below cap (rcap, or rcap + 1: read_until's
 * look past its limit), moving the buffered bytes to the start when there
 * is none at the end: new bytes, 0 at EOF, -ENOBUFS, -errno. */
static ssize_t rfill_to(aco_rt_bufio_t* b, size_t cap, int64_t deadline) {
    if (b->rlen >= cap) return -ENOBUFS;
    if (b->roff + b->rlen >= cap) {
        memmove(b->r, b->r + b->roff, b->rlen);
        b->roff = 0;
    }
    size_t end = b->roff + b->rlen;
    ssize_t n = rread(b, b->r + end, cap - end, deadline);
    if (n > 0) b->rlen += (size_t)n;
    return n;
}

static ssize_t rfill(aco_rt_bufio_t* b, int64_t deadline) {
    return rfill_to(b, b->rcap, deadline);
}

static size_t copy_out(aco_rt_bufio_t* b, void* buf, size_t n) {
    size_t k = n < b->rlen ? n : b->rlen;
    if (k) memcpy(buf, b->r + b->roff, k);
    take(b, k);
    return k;
}

ssize_t aco_rt_bufio_read(aco_rt_bufio_t* b, void* buf, size_t n, int64_t deadline) {
    int e = gate(b);
    if (e) return e;
    if (n == 0) return 0;
    if (buf == NULL || n > SSIZE_MAX) return -EFAULT;
    if (b->rlen) return (ssize_t)copy_out(b, buf, n);
    if (n >= b->rcap) return rread(b, buf, n, deadline);
    ssize_t r = rfill(b, deadline);
    if (r <= 0) return r;
    return (ssize_t)copy_out(b, buf, n);
}

ssize_t aco_rt_bufio_read_full(aco_rt_bufio_t* b, void* buf, size_t n, int64_t deadline) {
    int e = gate(b);
    if (e) return e;
    if ((buf == NULL && n) || n > SSIZE_MAX) return -EFAULT;   /* (aco_rt_read's) */
    if (n <= b->rcap) {             /* all or nothing: gather, then copy */
        while (b->rlen < n) {
            if (b->roff + n > b->rcap) {
                memmove(b->r, b->r + b->roff, b->rlen);
                b->roff = 0;
            }
            ssize_t r = rfill(b, deadline);
            if (r == 0) break;
            if (r < 0) return r;
        }
        return (ssize_t)copy_out(b, buf, n);
    }
    size_t got = copy_out(b, buf, n);
    while (got < n) {
        ssize_t r = rread(b, (char*)buf + got, n - got, deadline);
        if (r == 0) break;
        if (r < 0) {
            /* the count now, the error to the next call (the deadline's
             * too: bytes that came since would hide it, and a short count
             * would read as the end of file); not a cancel's, which every
             * later call says by itself */
            if (got == 0) return r;
            if (!(r == -ECANCELED && aco_rt_cancelled())) b->rerr = (int)r;
            return (ssize_t)got;
        }
        got += (size_t)r;
    }
    return (ssize_t)got;
}

ssize_t aco_rt_bufio_read_until(aco_rt_bufio_t* b, int delim, size_t limit,
                                const char** out, int64_t deadline) {
    int e = gate(b);
    if (e) return e;
    if (limit == 0) limit = b->rcap;
    if (limit > b->rcap || out == NULL) return -EINVAL;
    size_t scanned = 0;             /* bytes known to hold no delim */
    for (;;) {
        size_t upto = b->rlen < limit ? b->rlen : limit;
        const char* base = b->r + b->roff;
        const char* hit = memchr(base + scanned, delim, upto - scanned);
        if (hit) {
            size_t len = (size_t)(hit - base) + 1;
            *out = base;
            take(b, len);
            return (ssize_t)len;
        }
        /* More than limit bytes and no delim in the first limit: too long.
         * Exactly limit: a tail if the end of file comes next, so look. */
        if (b->rlen > limit) return -EMSGSIZE;
        scanned = upto;
        ssize_t r = rfill_to(b, b->rlen == limit ? b->rcap + 1 : b->rcap, deadline);
        if (r < 0) return r;
        if (r == 0) {               /* EOF: the rest, without delim */
            size_t len = b->rlen;
            *out = b->r + b->roff;
            take(b, len);
            return (ssize_t)len;
        }
    }
}

ssize_t aco_rt_bufio_peek(aco_rt_bufio_t* b, size_t n, const char** out, int64_t deadline) {
    int e = gate(b);
    if (e) return e;
    if (n > b->rcap || out == NULL) return -EINVAL;
    while (b->rlen < n) {
        if (b->roff + n > b->rcap) {
            memmove(b->r, b->r + b->roff, b->rlen);
            b->roff = 0;
        }
        ssize_t r = rfill(b, deadline);
        if (r == 0) break;
        if (r < 0) return r;
    }
    *out = b->r + b->roff;
    return (ssize_t)b->rlen;
}

ssize_t aco_rt_bufio_fill(aco_rt_bufio_t* b, int64_t deadline) {
    int e = gate(b);
    if (e) return e;
    if (b->rlen >= b->rcap) return -ENOBUFS;
    if (b->roff) {                  /* all the free room for the one read */
        memmove(b->r, b->r + b->roff, b->rlen);
        b->roff = 0;
    }
    return rfill(b, deadline);
}

int aco_rt_bufio_consume(aco_rt_bufio_t* b, size_t n) {
    if (b == NULL || n > b->rlen) return -EINVAL;
    take(b, n);
    return 0;
}

/* Send the write buffer, then data[0, n), until all is out or an error:
 * 0 or -errno.  The buffer keeps what did not go; *sent: bytes of data
 * that went.  An error but the deadline, a cancel and a lack of memory
 * (none of which sent anything: aco_rt_writev says so at once) is kept
 * (werr). */
static int send_out(aco_rt_bufio_t* b, const char* data, size_t n, int more,
                    int64_t deadline, size_t* sent) {
    size_t boff = 0, doff = 0;
    int err = 0;
    while (boff < b->wlen || doff < n) {
        ssize_t r;
        if (more && doff == n && !b->io) {  /* only the buffer: one send, MSG_MORE */
            r = aco_rt_send(b->fd, b->w + boff, b->wlen - boff, MSG_MORE, deadline);
            if (r == -ENOTSOCK) {
                more = 0;
                continue;
            }
        } else {
            struct iovec iov[2];
            int k = 0;
            if (boff < b->wlen) iov[k++] = (struct iovec){b->w + boff, b->wlen - boff};
            if (doff < n) iov[k++] = (struct iovec){(char*)data + doff, n - doff};
            r = xwritev(b, iov, k, deadline);
        }
        if (r < 0) {
            err = (int)r;
            break;
        }
        if (r == 0) {               /* no progress: not seen, but no spin */
            err = -EIO;
            break;
        }
        /* a short count: the next round gets the error (or goes on) */
        size_t got = (size_t)r, fromb = b->wlen - boff;
        if (got <= fromb) {
            boff += got;
        } else {
            boff = b->wlen;
            doff += got - fromb;
        }
    }
    memmove(b->w, b->w + boff, b->wlen - boff);
    b->wlen -= boff;
    if (sent) *sent = doff;
    if (err && err != -ETIMEDOUT && err != -ECANCELED && err != -ENOMEM) b->werr = err;
    return err;
}

ssize_t aco_rt_bufio_write(aco_rt_bufio_t* b, const void* buf, size_t n, int64_t deadline) {
    int e = gate(b);
    if (e) return e;
    if ((buf == NULL && n) || n > SSIZE_MAX) return -EFAULT;   /* (aco_rt_read's) */
    if (b->werr) return b->werr;
    if (n == 0) return 0;
    const char* p = buf;
    if (n <= b->wcap - b->wlen) {
        memcpy(b->w + b->wlen, p, n);
        b->wlen += n;
        return (ssize_t)n;
    }
    if (n < b->wcap) {              /* fill up, send the full buffer, keep the rest */
        size_t k = b->wcap - b->wlen;
        memcpy(b->w + b->wlen, p, k);
        b->wlen = b->wcap;
        int err = send_out(b, NULL, 0, 0, deadline, NULL);
        if (err) return b->werr || k == 0 ? err : (ssize_t)k;
        memcpy(b->w, p + k, n - k);
        b->wlen = n - k;
        return (ssize_t)n;
    }
    size_t sent = 0;
    int err = send_out(b, p, n, 0, deadline, &sent);
    if (err) return sent ? (ssize_t)sent : err;
    return (ssize_t)n;
}

static int flush(aco_rt_bufio_t* b, int more, int64_t deadline) {
    int e = gate(b);
    if (e) return e;
    if (b->werr) return b->werr;
    if (b->wlen == 0) return 0;
    return send_out(b, NULL, 0, more, deadline, NULL);
}

int aco_rt_bufio_flush(aco_rt_bufio_t* b, int64_t deadline) { return flush(b, 0, deadline); }

int aco_rt_bufio_flush_more(aco_rt_bufio_t* b, int64_t deadline) {
    return flush(b, 1, deadline);
}
