/* aco_http - an HTTP/1.1 static-file server on the runtime: GET and HEAD
 * of the files under --root, keep-alive, pipelining, byte ranges,
 * If-Modified-Since; small bodies sent with their head, large ones by
 * sendfile(2); open files cached.
 *
 *   aco_http [--root DIR] [--port N] [--backend uring|epoll] [--bind ADDR]
 *            [--threads T] [--accept reuseport|handoff]
 *            [--idle-timeout-ms MS] [--header-timeout-ms MS]
 *            [--tls-cert PEM --tls-key PEM [--tls-handshake-timeout-ms MS]]
 *
 * One co per connection, with a bufio (aco_rt.h, "Buffered I/O"): the
 * request head is found in the read buffer without copying (peek, parse,
 * consume), and the responses' heads gather in the write buffer, sent when
 * no complete request is left to answer (pipelined requests get their
 * responses in one write).  A body up to 16 KiB (SMALL_BODY) is read by
 * aco_rt_pread into the write buffer after its head; a larger one follows
 * its head (sent with MSG_MORE) by aco_rt_sendfile on the non-blocking
 * socket, which waits for writability when the socket is full, so the
 * thread never blocks on a client.  Every file operation (open, stat, read,
 * the body's send) is the runtime's file call: a page-cache hit costs what
 * the plain system call does, and a file on a slow disk parks only its own
 * request's co while the thread serves the others.  Each thread keeps up
 * to 1024 files open (as nginx's open_file_cache; the threads at most a
 * quarter of the descriptor limit), and the bytes of those
 * up to 16 KiB once read whole (8 MiB a thread: nginx has no such cache),
 * trusted for a second, then opened anew through the same check: a 4 KiB
 * keep-alive request costs a read and a send.  No allocation per request:
 * the connection's object holds its buffers.  What each request gets is in docs/runtime.md
 * ("aco_http"); in short:
 *   GET/HEAD of a regular file   200, 206 (one range), 304, 412, 416
 *   a directory                  its index.html, else 404
 *   other methods                405 with Allow: GET, HEAD
 *   a malformed head             400 (http.h says which), 414, 431, 501,
 *                                505, then close
 *   a body over 64 KiB           413 and close (smaller ones are dropped)
 *   "..", %2e%2e, "..%2f"        403; a symlink out of the root: 403
 *   a head not whole in --header-timeout-ms (10 s) from its first byte, or
 *   no request for --idle-timeout-ms (60 s): the connection is closed.
 * Files are opened with openat2(RESOLVE_BENEATH) where the kernel has it
 * (5.6+); elsewhere with openat and a check of the opened file's path
 * (/proc/self/fd) against the root's real path.
 *
 * HTTPS (--tls-cert and --tls-key, where make.sh found OpenSSL 3: built
 * with ACO_HTTP_TLS and libaco_rt_tls): every connection speaks TLS 1.2
 * or 1.3 (ALPN http/1.1, session tickets), its handshake done within
 * --tls-handshake-timeout-ms (10 s) or the connection closed; the bufio
 * runs over the TLS connection (aco_rt_tls_bufio_new), so the HTTP code
 * is the same; a large body is read by aco_rt_pread into the connection's
 * 64 KiB buffer and written as TLS records instead of sendfile (user-space
 * TLS: the kernel cannot encrypt; docs/runtime.md, "TLS").  Between
 * requests an HTTPS connection gives its bufio and body buffers back and
 * waits for the socket with none (OpenSSL frees its record buffers too):
 * an idle one keeps OpenSSL's state, its co and a 40-byte record (a
 * request's path and answer head come back with the bufio).  On
 * io_uring its socket lends (ACO_RT_TLS_LEND): the kernel receives into
 * the scheduler's buffer ring, and a request costs no receive of its own.
 */
#define _GNU_SOURCE
#include "aco_rt.h"
#include "http.h"
#include "rt_cli.h"
#ifdef ACO_HTTP_TLS
#include "aco_rt_tls.h"
#endif

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define HEAD_LIMIT (8 * 1024)          /* 431 past it */
#define BODY_LIMIT (64 * 1024)         /* 413 past it */
#define RBUF (16 * 1024)               /* > HEAD_LIMIT: a head always fits */
#define WBUF (16 * 1024)
#define PATH_CAP 4096
#define SENDFILE_CHUNK (512 * 1024)    /* then let other cos run */
#ifndef SMALL_BODY
#define SMALL_BODY (16 * 1024)         /* up to it: pread, with the head in one send */
#endif

static int root_fd = -1;
static char root_real[PATH_MAX];
static int have_openat2;
static int64_t idle_ns = 60000LL * 1000000;
static int64_t header_ns = 10000LL * 1000000;
static int64_t handshake_ns = 10000LL * 1000000;

#ifdef ACO_HTTP_TLS
static aco_rt_tls_ctx_t* tls_ctx;       /* --tls-cert: every connection's */
#endif

typedef struct {
    int fd;
    aco_rt_bufio_t* b;
#ifdef ACO_HTTP_TLS
    aco_rt_tls_t* tls;                  /* HTTPS, or NULL */
#endif
    struct req_buf* rb;                 /* made at its first request */
    char* body;                         /* body_cap(c) bytes, made at first use: a
                                           small file's bytes on their way to b
                                           (HTTPS: a large one's chunks) */
} conn_t;

/* What a request works in: the path it asks for and the head of its
 * answer; an idle HTTPS connection gives it back (idle_tls). */
typedef struct req_buf {
    char path[PATH_CAP + 16];          /* + "/index.html" */
    char head[768];
} req_buf_t;

/* HTTPS reads a large body in chunks of TLS_CHUNK (4 records), as nginx's
 * output_buffers (2 x 32 KiB): 16 preads a MiB instead of 64. */
#define TLS_CHUNK (64 * 1024)

static size_t body_cap(const conn_t* c) {
#ifdef ACO_HTTP_TLS
    if (c->tls) return TLS_CHUNK > SMALL_BODY ? TLS_CHUNK : SMALL_BODY;
#endif
    (void)c;
    return SMALL_BODY;
}

/* What idle HTTPS connections gave back (idle_tls): their bodies and
 * request buffers, kept for the next requests.  Freed, a 64 KiB body went
 * back to the system with the heap's top, and the next pread into a new
 * one faulted its 16 pages in again (14.6 faults a MiB served; nginx keeps
 * its output buffers in its connections' pools); a request buffer (5 KiB)
 * cost a malloc and a free from glibc's bins each request.  At most KEEP
 * of each, whatever the threads and connections: what an idle server
 * keeps is bounded (552 KiB).  Slots taken and filled with an exchange
 * each, by any thread; static, so a leak checker sees what they hold. */
#define KEEP 8
static void* body_kept[KEEP];
static void* rb_kept[KEEP];

static void* kept_take(void** slot) {
    for (int i = 0; i < KEEP; i++) {
        void* p;
        if (__atomic_load_n(&slot[i], __ATOMIC_RELAXED) &&
            (p = __atomic_exchange_n(&slot[i], NULL, __ATOMIC_ACQUIRE)) != NULL)
            return p;
    }
    return NULL;
}

/* p into a free slot, or freed. */
static void kept_put(void** slot, void* p) {
    for (int i = 0; p && i < KEEP; i++) {
        void* none = NULL;
        if (__atomic_load_n(&slot[i], __ATOMIC_RELAXED) == NULL &&
            __atomic_compare_exchange_n(&slot[i], &none, p, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED))
            return;
    }
    free(p);
}

/* c->rb, made if it is not yet: 0, or -1 (no memory). */
static int req_buf(conn_t* c) {
    if (c->rb != NULL) return 0;
#ifdef ACO_HTTP_TLS
    if (c->tls && (c->rb = kept_take(rb_kept)) != NULL) return 0;
#endif
    return (c->rb = malloc(sizeof(req_buf_t))) != NULL ? 0 : -1;
}

/* c->body, made if it is not yet: 0, or -1 (no memory). */
static int body_buf(conn_t* c) {
    if (c->body != NULL) return 0;
#ifdef ACO_HTTP_TLS
    if (c->tls && (c->body = kept_take(body_kept)) != NULL) return 0;
#endif
    return (c->body = malloc(body_cap(c))) != NULL ? 0 : -1;
}

/* c gives its body and request buffer back (HTTPS, idle): kept for
 * another if a slot is free. */
static void bufs_put(conn_t* c) {
#ifdef ACO_HTTP_TLS
    if (c->tls) {
        kept_put(body_kept, c->body);
        kept_put(rb_kept, c->rb);
        c->body = NULL;
        c->rb = NULL;
        return;
    }
#endif
    free(c->body);
    free(c->rb);
    c->body = NULL;
    c->rb = NULL;
}

/* What a request gets. */
typedef struct {
    int status;
    int file;                           /* the open file, or -1 */
    struct ofile* of;                   /* its cache entry, or NULL: file is ours to close */
    int64_t size, off, len;             /* the file's size; the body's part */
    int64_t mtime;
    const char* type;
} resp_t;

/* ------------------------------------------------------------------------ */
/* Dates, cached per thread: the current second's and the last mtime's      */
/* ------------------------------------------------------------------------ */

static __thread int64_t date_sec = -1;
static __thread char date_str[32];
static __thread int64_t lm_sec = -1;
static __thread char lm_str[32];

static const char* now_date(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME_COARSE, &ts);
    if (ts.tv_sec != date_sec) {
        date_sec = ts.tv_sec;
        http_date_format(date_sec, date_str);
    }
    return date_str;
}

static const char* mtime_date(int64_t t) {
    if (t != lm_sec) {
        lm_sec = t;
        http_date_format(t, lm_str);
    }
    return lm_str;
}

/* ------------------------------------------------------------------------ */
/* Files                                                                    */
/* ------------------------------------------------------------------------ */

static int errno_status(int e) {
    switch (e) {
    case ENOENT: case ENOTDIR: return 404;
    case EXDEV: case EACCES: case EPERM: case ELOOP:
    case ENXIO:                         /* (a socket file: no file to serve) */
        return 403;
    case ENAMETOOLONG: return 414;
    default: return 500;
    }
}

/* The opened file lies under the root: its path, read back, says so. */
static int beneath_root(int fd) {
    char link[64], real[PATH_MAX];
    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, real, sizeof(real) - 1);
    if (n < 0) return 0;
    real[n] = '\0';
    size_t rl = strlen(root_real);
    if (strcmp(root_real, "/") == 0) return 1;
    return strncmp(real, root_real, rl) == 0 && (real[rl] == '\0' || real[rl] == '/');
}

/* Open rel (relative to the root, "" for it) for reading: 0 with the
 * descriptor, or a status (> 0).  Through the runtime's calls (aco_rt.h,
 * "Files"): an open that waits for a slow disk parks this co only. */
static int open_beneath(const char* rel, int* out, int64_t deadline) {
    const char* p = *rel ? rel : ".";
    int flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY;   /* a FIFO must not block */
    int fd;
    if (have_openat2) {
        struct open_how how = {.flags = (uint64_t)flags,
                               .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS};
        fd = aco_rt_openat2(root_fd, p, &how, sizeof(how), deadline);
    } else {
        fd = aco_rt_openat(root_fd, p, flags, 0, deadline);
        if (fd >= 0 && !beneath_root(fd)) {
            close(fd);
            return 403;
        }
    }
    if (fd < 0) {
        /* (no descriptor, memory or helper to be had, or the disk kept the
         * open past the deadline: the server's trouble, not the path's) */
        if (fd == -EMFILE || fd == -ENFILE || fd == -ENOMEM || fd == -EAGAIN || fd == -ETIMEDOUT)
            return 503;
        return errno_status(-fd);
    }
    *out = fd;
    return 0;
}

/* fstat(2) of an open file through the runtime: 0, or -errno. */
static int file_stat(int fd, struct stat* st, int64_t deadline) {
    struct statx x;
    int r = aco_rt_statx(fd, "", AT_EMPTY_PATH, STATX_TYPE | STATX_SIZE | STATX_MTIME, &x,
                         deadline);
    if (r < 0) return r;
    memset(st, 0, sizeof(*st));
    st->st_mode = x.stx_mode;
    st->st_size = (off_t)x.stx_size;
    st->st_mtim.tv_sec = x.stx_mtime.tv_sec;
    st->st_mtim.tv_nsec = x.stx_mtime.tv_nsec;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Open files, cached per thread (as nginx's open_file_cache)               */
/* ------------------------------------------------------------------------ */

/* A path's answer is kept open with its size, mtime and type, so a request
 * for a known file makes no open, stat or close; a small file's bytes too
 * (up to 16 KiB a file, 8 MiB a thread), so its response makes no pread.
 * Each thread has its own cache, with no lock: a connection's co never leaves the thread it started
 * on.  An entry is trusted for a second (REVALIDATE_NS); after that the
 * path is opened anew through open_beneath (a changed, replaced or deleted
 * file, or a symlink now pointing out of the root, is seen as on a first
 * request).  A file is shared by the cache's slot and the responses using
 * it (refs): an evicted or replaced file is closed by the last of them, so
 * a response sending it never sees its descriptor closed or reused.  Paths
 * of KEY_CAP bytes or more are not cached (the response owns its
 * descriptor, as when no ofile_t is free). */
#define CACHE_SLOTS 1024
#define CACHE_BUCKETS 2048              /* a power of two */
#define CACHE_FILES (2 * CACHE_SLOTS)   /* the slots', and replaced ones still sending */
#define KEY_CAP 232
#define REVALIDATE_NS 1000000000LL
#define KEPT_CAP ((size_t)8 << 20)

/* The slots a thread's cache uses: CACHE_SLOTS, or fewer when the
 * descriptor limit is low (set in main: a quarter of it shared by the
 * threads; 0: no cache).  A cache of 1024 open files under the common soft
 * limit of 1024 once took every descriptor: new connections waited in the
 * backlog and requests for other files got 503 while a client kept asking
 * for distinct files. */
static int cache_slots = CACHE_SLOTS;

typedef struct ofile {
    int fd;
    int refs;                           /* 0: free */
    int64_t size, mtime;
    const char* type;
    int64_t checked;                    /* mono_ns() when opened */
    char* bytes;                        /* a small file's bytes, once a response
                                           read them whole; NULL: not kept */
    struct ofile* next_free;
} ofile_t;

typedef struct {
    ofile_t* f;                         /* NULL: the slot is free */
    uint32_t hash;
    int16_t next;                       /* the bucket's chain; -1 ends it */
    uint8_t used;                       /* the clock's second chance */
    uint8_t dir;
    uint16_t len;
    char key[KEY_CAP];
} slot_t;

typedef struct fcache {
    slot_t slot[CACHE_SLOTS];
    int16_t bucket[CACHE_BUCKETS];
    int hand;
    ofile_t file[CACHE_FILES];
    ofile_t* free_files;
    size_t kept_bytes;                  /* the ofiles' bytes, at most KEPT_CAP */
    struct fcache* next_cache;          /* all threads' caches: reachable, for leak checkers */
    aco_rt_timer_t sweep;               /* fcache_sweep, armed while a slot holds a file */
    int sweeping;
} fcache_t;

static __thread fcache_t* tls_cache;
static __thread int tls_cache_failed;
static fcache_t* all_caches;

static int64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* This thread's cache, made on first use; NULL without memory (then
 * nothing is cached). */
static fcache_t* fcache(void) {
    fcache_t* fc = tls_cache;
    if (fc || tls_cache_failed || cache_slots == 0) return fc;
    if ((fc = calloc(1, sizeof(*fc))) == NULL) {
        tls_cache_failed = 1;
        return NULL;
    }
    for (int i = 0; i < CACHE_SLOTS; i++) fc->slot[i].next = -1;
    for (int i = 0; i < CACHE_BUCKETS; i++) fc->bucket[i] = -1;
    for (int i = 0; i < CACHE_FILES; i++) {
        fc->file[i].fd = -1;
        fc->file[i].next_free = i + 1 < CACHE_FILES ? &fc->file[i + 1] : NULL;
    }
    fc->free_files = &fc->file[0];
    fc->next_cache = __atomic_load_n(&all_caches, __ATOMIC_RELAXED);
    while (!__atomic_compare_exchange_n(&all_caches, &fc->next_cache, fc, 1, __ATOMIC_RELEASE,
                                        __ATOMIC_RELAXED)) {}
    return tls_cache = fc;
}

static uint32_t key_hash(const char* k, size_t n, int dir) {
    uint32_t h = 2166136261u;           /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)k[i]) * 16777619u;
    return h ^ (uint32_t)dir;
}

static int fcache_find(fcache_t* fc, const char* k, int n, int dir, uint32_t h) {
    for (int s = fc->bucket[h & (CACHE_BUCKETS - 1)]; s >= 0; s = fc->slot[s].next) {
        slot_t* e = &fc->slot[s];
        if (e->hash == h && e->len == n && e->dir == dir && memcmp(e->key, k, (size_t)n) == 0)
            return s;
    }
    return -1;
}

static void ofile_release(fcache_t* fc, ofile_t* f) {
    if (--f->refs > 0) return;
    close(f->fd);
    f->fd = -1;
    if (f->bytes) {
        free(f->bytes);
        f->bytes = NULL;
        fc->kept_bytes -= (size_t)f->size;
    }
    f->next_free = fc->free_files;
    fc->free_files = f;
}

/* A response takes f. */
static void ofile_use(ofile_t* f, resp_t* r) {
    f->refs++;
    r->of = f;
    r->status = 200;
    r->file = f->fd;
    r->size = f->size;
    r->off = 0;
    r->len = f->size;
    r->mtime = f->mtime;
    r->type = f->type;
}

/* Done with r's file: the cache's reference dropped, or the descriptor
 * closed. */
static void resp_release(resp_t* r) {
    if (r->of) ofile_release(tls_cache, r->of);
    else if (r->file >= 0) close(r->file);
    r->of = NULL;
    r->file = -1;
}

/* Empty slot s: out of its chain, its file released. */
static void fcache_drop(fcache_t* fc, int s) {
    slot_t* e = &fc->slot[s];
    int16_t* p = &fc->bucket[e->hash & (CACHE_BUCKETS - 1)];
    while (*p != s) p = &fc->slot[*p].next;
    *p = e->next;
    e->next = -1;
    ofile_release(fc, e->f);
    e->f = NULL;
}

/* Every SWEEP_NS the entries past their trust (which a request would
 * open anew anyway) are dropped: a file deleted or replaced, and never
 * asked for again, is not held open (its disk space kept) for good. */
#define SWEEP_NS (2 * REVALIDATE_NS)
static void fcache_sweep(aco_rt_timer_t* t) {
    fcache_t* fc = (fcache_t*)(void*)((char*)t - offsetof(fcache_t, sweep));
    int64_t now = mono_ns();
    int left = 0;
    for (int s = 0; s < CACHE_SLOTS; s++) {
        if (fc->slot[s].f == NULL) continue;
        if (now - fc->slot[s].f->checked >= REVALIDATE_NS) fcache_drop(fc, s);
        else left = 1;
    }
    fc->sweeping = left && aco_rt_timer_start(&fc->sweep, aco_rt_in_ns(SWEEP_NS), fcache_sweep) == 0;
}

/* A slot to fill: a free one, or the clock's victim (emptied). */
static int fcache_victim(fcache_t* fc) {
    for (;;) {
        int s = fc->hand;
        fc->hand = (fc->hand + 1) % cache_slots;
        slot_t* e = &fc->slot[s];
        if (e->f == NULL) return s;
        if (e->used) {
            e->used = 0;
            continue;
        }
        fcache_drop(fc, s);
        return s;
    }
}

/* Keep r's freshly opened file under key k; r then shares it with the
 * cache (r->of).  Nothing changes when no ofile_t is free. */
static void fcache_put(fcache_t* fc, const char* k, int n, int dir, uint32_t h, resp_t* r) {
    int s = fcache_victim(fc);          /* may free an ofile_t */
    ofile_t* f = fc->free_files;
    if (f == NULL) return;
    fc->free_files = f->next_free;
    *f = (ofile_t){.fd = r->file, .refs = 2, .size = r->size, .mtime = r->mtime,
                   .type = r->type, .checked = mono_ns()};
    slot_t* e = &fc->slot[s];
    e->f = f;
    e->hash = h;
    e->used = 0;
    e->dir = (uint8_t)dir;
    e->len = (uint16_t)n;
    memcpy(e->key, k, (size_t)n);
    int16_t* b = &fc->bucket[h & (CACHE_BUCKETS - 1)];
    e->next = *b;
    *b = (int16_t)s;
    r->of = f;
    if (!fc->sweeping)
        fc->sweeping = aco_rt_timer_start(&fc->sweep, aco_rt_in_ns(SWEEP_NS), fcache_sweep) == 0;
}

/* Find the file of rel (c->rb->path, n bytes): r->status 200 with r->file
 * open, or an error status. */
static void open_file(conn_t* c, int n, int dir, resp_t* r) {
    int fd;
    int64_t deadline = aco_rt_in_ns(idle_ns);
    int e = open_beneath(c->rb->path, &fd, deadline);
    if (e) {
        r->status = e;
        return;
    }
    struct stat st;
    if (file_stat(fd, &st, deadline) < 0) {
        close(fd);
        r->status = 500;
        return;
    }
    if (S_ISDIR(st.st_mode)) {          /* its index.html */
        close(fd);
        memcpy(c->rb->path + n, n ? "/index.html" : "index.html", n ? 12 : 11);
        n += n ? 11 : 10;
        if ((e = open_beneath(c->rb->path, &fd, deadline))) {
            r->status = e == 403 || e == 503 ? e : 404;
            return;
        }
        if (file_stat(fd, &st, deadline) < 0 || !S_ISREG(st.st_mode)) {
            close(fd);
            r->status = 404;
            return;
        }
    } else if (!S_ISREG(st.st_mode) || dir) {
        close(fd);
        r->status = dir ? 404 : 403;    /* "file/" is no directory */
        return;
    }
    /* A regular file: O_NONBLOCK (for FIFOs) off, which io_uring would
     * take as "never wait for the disk" and send a cold read back */
    fcntl(fd, F_SETFL, 0);
    r->status = 200;
    r->file = fd;
    r->size = st.st_size;
    r->off = 0;
    r->len = st.st_size;
    r->mtime = st.st_mtim.tv_sec;
    r->type = http_mime(c->rb->path, (size_t)n);
}

/* Find the file of a GET or HEAD: r->status 200 with r->file open (and
 * r->of its cache entry, or NULL when the response owns the descriptor),
 * or an error status.  A path found in the thread's cache and checked less
 * than a second ago costs no system call; an older one is opened anew,
 * through the same check as a new one. */
static void find_file(conn_t* c, const http_req_t* q, resp_t* r) {
    int dir;
    int n = http_path(q->target, q->target_len, c->rb->path, PATH_CAP, &dir);
    if (n < 0) {
        r->status = -n;
        return;
    }
    fcache_t* fc = n < KEY_CAP ? fcache() : NULL;
    uint32_t h = 0;
    if (fc) {
        h = key_hash(c->rb->path, (size_t)n, dir);
        int s = fcache_find(fc, c->rb->path, n, dir, h);
        if (s >= 0) {
            ofile_t* f = fc->slot[s].f;
            if (mono_ns() - f->checked < REVALIDATE_NS) {
                fc->slot[s].used = 1;
                ofile_use(f, r);
                return;
            }
            fcache_drop(fc, s);         /* stale: look again */
        }
    }
    open_file(c, n, dir, r);
    if (fc && r->status == 200) {
        /* (the open parks on a cold disk: another co may have opened and
         * kept the same path meanwhile; ours is the newer) */
        int s = fcache_find(fc, c->rb->path, n, dir, h);
        if (s >= 0) fcache_drop(fc, s);
        fcache_put(fc, c->rb->path, n, dir, h, r);
    }
}

/* 412, 304 and 206/416 on the file found. */
static void conditions(const http_req_t* q, resp_t* r) {
    int st = http_preconditions(q, r->mtime);
    if (st) {
        r->status = st;
        return;
    }
    if (q->range && q->method == HTTP_GET && http_range_applies(q, r->mtime)) {
        int64_t a, b;
        int k = http_range(q->range, q->range_len, r->size, &a, &b);
        if (k > 0) {
            r->status = 206;
            r->off = a;
            r->len = b - a + 1;
        } else if (k < 0) {
            r->status = 416;
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Responses                                                                */
/* ------------------------------------------------------------------------ */

static char* put(char* p, const char* s, size_t n) {
    memcpy(p, s, n);
    return p + n;
}
#define PUT(p, lit) put(p, lit, sizeof(lit) - 1)

static char* put_str(char* p, const char* s) { return put(p, s, strlen(s)); }

static char* put_num(char* p, int64_t v) {
    char t[24];
    int i = sizeof(t);
    uint64_t u = (uint64_t)v;
    do t[--i] = (char)('0' + u % 10); while ((u /= 10));
    return put(p, t + i, sizeof(t) - (size_t)i);
}

/* The head of r into c->rb->head: its length.  The error statuses get a short
 * text body (the head says its length; HEAD sends none). */
static size_t build_head(conn_t* c, const http_req_t* q, const resp_t* r, int keep,
                         int64_t* body_len) {
    char* p = c->rb->head;
    p = PUT(p, "HTTP/1.1 ");
    p = put_num(p, r->status);
    *p++ = ' ';
    p = put_str(p, http_reason(r->status));
    p = PUT(p, "\r\nServer: aco_http\r\nDate: ");
    p = put(p, now_date(), 29);
    p = PUT(p, "\r\n");
    int file = r->status == 200 || r->status == 206 || r->status == 304;
    if (file) {
        p = PUT(p, "Last-Modified: ");
        p = put(p, mtime_date(r->mtime), 29);
        p = PUT(p, "\r\nAccept-Ranges: bytes\r\n");
    }
    if (r->status == 200 || r->status == 206) {
        p = PUT(p, "Content-Type: ");
        p = put_str(p, r->type);
        p = PUT(p, "\r\nContent-Length: ");
        p = put_num(p, r->len);
        p = PUT(p, "\r\n");
        *body_len = r->len;
        if (r->status == 206) {
            p = PUT(p, "Content-Range: bytes ");
            p = put_num(p, r->off);
            *p++ = '-';
            p = put_num(p, r->off + r->len - 1);
            *p++ = '/';
            p = put_num(p, r->size);
            p = PUT(p, "\r\n");
        }
    } else if (r->status != 304) {
        if (r->status == 416) {
            p = PUT(p, "Content-Range: bytes */");
            p = put_num(p, r->size);
            p = PUT(p, "\r\n");
        }
        if (r->status == 405) p = PUT(p, "Allow: GET, HEAD\r\n");
        /* the body: "404 Not Found\n" */
        size_t bl = 3 + 1 + strlen(http_reason(r->status)) + 1;
        p = PUT(p, "Content-Type: text/plain; charset=utf-8\r\nContent-Length: ");
        p = put_num(p, (int64_t)bl);
        p = PUT(p, "\r\n");
        *body_len = (int64_t)bl;
    }
    if (!keep) p = PUT(p, "Connection: close\r\n");
    else if (q && q->minor == 0) p = PUT(p, "Connection: keep-alive\r\n");
    p = PUT(p, "\r\n");
    if (!file && r->status != 304 && (q == NULL || q->method != HTTP_HEAD)) {
        p = put_num(p, r->status);
        *p++ = ' ';
        p = put_str(p, http_reason(r->status));
        *p++ = '\n';
    }
    return (size_t)(p - c->rb->head);
}

/* len bytes of file from off to the socket by sendfile: 0 or -errno
 * (-EIO: the file ended early; the head promised more, so the connection
 * must close).  aco_rt_sendfile sends from the thread what the page cache
 * holds and has a helper thread read the rest, so a cold file parks only
 * this co; chunk by chunk, with a turn for the other cos between (a fast
 * client must not hog the thread).  The idle timeout runs from the last
 * bytes the client took, not from the response's start (nginx's
 * send_timeout): a download longer than it, taken steadily, once was cut
 * there. */
static int send_file(int sock, int file, int64_t off, int64_t len) {
    while (len > 0) {
        size_t want = len > SENDFILE_CHUNK ? SENDFILE_CHUNK : (size_t)len;
        int64_t deadline = aco_rt_in_ns(idle_ns);
        ssize_t n = aco_rt_sendfile(sock, file, &off, want, deadline);
        if (n < 0) return (int)n;
        len -= n;
        /* short: the file's end, or part taken by the deadline (go on) */
        if ((size_t)n < want && (n == 0 || aco_rt_now() < deadline)) return -EIO;
        if (len > 0) {
            int y = aco_rt_yield();
            if (y < 0) return y;
        }
    }
    return 0;
}

#ifdef ACO_HTTP_TLS
/* len bytes of file from off over TLS: read by aco_rt_pread into buf
 * (cap bytes, the connection's) and written as records: 0 or -errno (-EIO:
 * the file ended early), with a turn for the other cos between chunks and
 * the idle timeout from the last progress, as send_file. */
static int send_file_tls(aco_rt_tls_t* t, int file, char* buf, size_t cap, int64_t off,
                         int64_t len) {
    int64_t since_yield = 0;
    while (len > 0) {
        size_t want = len > (int64_t)cap ? cap : (size_t)len;
        ssize_t n = aco_rt_pread(file, buf, want, off, aco_rt_in_ns(idle_ns));
        if (n < 0) return (int)n;
        if (n == 0) return -EIO;
        /* a write cut short by the deadline took some: go on from there */
        for (ssize_t done = 0; done < n;) {
            ssize_t w = aco_rt_tls_write(t, buf + done, (size_t)(n - done), aco_rt_in_ns(idle_ns));
            if (w <= 0) return w < 0 ? (int)w : -EIO;
            done += w;
        }
        off += n, len -= n, since_yield += n;
        if (len > 0 && since_yield >= SENDFILE_CHUNK) {
            since_yield = 0;
            int y = aco_rt_yield();
            if (y < 0) return y;
        }
    }
    return 0;
}
#endif

/* The len bytes of file at off into buf: 0, or -1 (an error, or the file
 * ended early: the head promises more).  A page-cache hit is one pread on
 * the thread (RWF_NOWAIT); a miss parks this co. */
static int read_body(int file, char* buf, int64_t off, int64_t len, int64_t deadline) {
    return aco_rt_pread(file, buf, (size_t)len, off, deadline) == len ? 0 : -1;
}

/* A small file read whole into buf: its cache entry keeps the bytes (up to
 * KEPT_CAP a thread), so the next responses make no pread until the entry
 * is revalidated (a second: a file changed in place is served anew
 * within it, as a replaced one is). */
static void keep_bytes(resp_t* r, const char* buf) {
    ofile_t* f = r->of;
    fcache_t* fc = tls_cache;
    if (f == NULL || f->bytes || r->off != 0 || r->len != f->size ||
        fc->kept_bytes + (size_t)f->size > KEPT_CAP || (f->bytes = malloc((size_t)f->size)) == NULL)
        return;
    memcpy(f->bytes, buf, (size_t)f->size);
    fc->kept_bytes += (size_t)f->size;
}

/* Send r's head (and body): 0, or -1 if the connection is done for.  A
 * small body joins its head in the write buffer (its entry's bytes, or
 * read by pread: the response costs no system call of its own, and
 * pipelined ones go out together); a larger one follows the head (sent with MSG_MORE) by
 * sendfile. */
static int respond(conn_t* c, const http_req_t* q, resp_t* r, int keep) {
    int64_t deadline = aco_rt_in_ns(idle_ns), body = 0;
    size_t hl = build_head(c, q, r, keep, &body);
    int send_body = r->file >= 0 && (r->status == 200 || r->status == 206) &&
                    q->method == HTTP_GET && body > 0;
    int small = send_body && r->len <= SMALL_BODY;
    int rc = 0;
    const char* bytes = NULL;           /* a small body's */
    if (small && r->of && r->of->bytes) {
        bytes = r->of->bytes + r->off;
    } else if (small) {
        if (body_buf(c) < 0 || read_body(r->file, c->body, r->off, r->len, deadline) < 0) rc = -1;
        else keep_bytes(r, bytes = c->body);
    }
    if (rc == 0 && aco_rt_bufio_write(c->b, c->rb->head, hl, deadline) != (ssize_t)hl) rc = -1;
    if (rc == 0 && small) {
        if (aco_rt_bufio_write(c->b, bytes, (size_t)r->len, deadline) != (ssize_t)r->len)
            rc = -1;
    } else if (rc == 0 && send_body) {
#ifdef ACO_HTTP_TLS
        if (c->tls) {
            if (body_buf(c) < 0 || aco_rt_bufio_flush(c->b, deadline) < 0 ||
                send_file_tls(c->tls, r->file, c->body, body_cap(c), r->off, r->len) < 0)
                rc = -1;
        } else
#endif
        if (aco_rt_bufio_flush_more(c->b, deadline) < 0 ||
            send_file(c->fd, r->file, r->off, r->len) < 0)
            rc = -1;
    }
    resp_release(r);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Connections                                                              */
/* ------------------------------------------------------------------------ */

/* Drop a request body of n bytes: 0, or -1. */
static int discard(conn_t* c, int64_t n, int64_t deadline) {
    char sink[4096];
    while (n > 0) {
        ssize_t r = aco_rt_bufio_read(c->b, sink, n < (int64_t)sizeof(sink) ? (size_t)n
                                                                           : sizeof(sink), deadline);
        if (r <= 0) return -1;
        n -= r;
    }
    return 0;
}

/* We end the connection: say so and read what the client still sends, for
 * up to a second, so that a reset does not throw away the response it has
 * not read yet. */
static void linger_close(conn_t* c) {
    if (aco_rt_bufio_flush(c->b, aco_rt_in_ns(idle_ns)) == 0) {
#ifdef ACO_HTTP_TLS
        if (c->tls && aco_rt_tls_shutdown(c->tls, aco_rt_in_ns(idle_ns)) < 0) return;
#endif
        shutdown(c->fd, SHUT_WR);
        int64_t until = aco_rt_in_ms(1000);
        size_t left = 1 << 20;
        char sink[4096];
        ssize_t n;
        while (left && (n = aco_rt_bufio_read(c->b, sink, sizeof(sink), until)) > 0)
            left -= (size_t)n < left ? (size_t)n : left;
    }
}

#ifdef ACO_HTTP_TLS
/* HTTPS between requests, nothing buffered either way: unless bytes wait
 * inside the TLS connection (OpenSSL's read-ahead, a lent buffer), the
 * connection gives its buffers back while it waits (the bufio's 32 KiB,
 * the body's 64 KiB and the request's 5 KiB; OpenSSL gives its record
 * buffers back too, SSL_MODE_RELEASE_BUFFERS), so an idle one keeps
 * OpenSSL's state, this record and its co: nginx's way.  They come back
 * when bytes do.  The wait (aco_rt_tls_wait) gives no receive a buffer to
 * hold: a readiness, or on io_uring the next lend.  0, or -1: close. */
static int idle_tls(conn_t* c) {
    int64_t deadline = aco_rt_in_ns(idle_ns);       /* one idle period for both waits */
    if (!aco_rt_tls_pending(c->tls)) {
        aco_rt_bufio_free(c->b);
        c->b = NULL;
        bufs_put(c);
        if (aco_rt_tls_wait(c->tls, deadline) < 0) return -1;
        if ((c->b = aco_rt_tls_bufio_new(c->tls, RBUF, WBUF)) == NULL) return -1;
    }
    return aco_rt_bufio_fill(c->b, deadline) > 0 ? 0 : -1;
}
#endif

/* One request head and its answer: 1 to go on, 0 to close (lingering),
 * -1 to close at once. */
static int serve_one(conn_t* c) {
    const char* v;
    http_req_t q;
    int64_t head_dl = -1;
    int st;
    for (;;) {                          /* until a whole head is buffered */
        ssize_t n = aco_rt_bufio_peek(c->b, 0, &v, 0);
        if (n < 0) return -1;
        st = http_parse(v, (size_t)n, HEAD_LIMIT, &q);
        if (st != HTTP_AGAIN) break;
        /* answers to what came so far go out before we wait */
        if (aco_rt_bufio_unflushed(c->b) &&
            aco_rt_bufio_flush(c->b, aco_rt_in_ns(idle_ns)) < 0)
            return -1;
        /* the head's deadline runs from its first bytes (read: a clock
         * only when a part of a head must wait for the rest) */
        if (n > 0 && head_dl < 0) head_dl = aco_rt_in_ns(header_ns);
#ifdef ACO_HTTP_TLS
        if (n == 0 && c->tls) {
            if (idle_tls(c) < 0) return -1;
            continue;
        }
#endif
        ssize_t r = aco_rt_bufio_fill(c->b, n ? head_dl : aco_rt_in_ns(idle_ns));
        if (r <= 0) return -1;          /* EOF, a timeout, an error */
    }
    if (req_buf(c) < 0) return -1;
    resp_t r = {.file = -1};
    if (st != HTTP_DONE) {              /* a malformed head: answer, close */
        r.status = st;
        respond(c, NULL, &r, 0);
        return 0;
    }
    int keep = q.keep_alive;
    if (q.content_length > BODY_LIMIT) {
        r.status = 413;
        keep = 0;
    } else if (q.method == HTTP_OTHER) {
        r.status = 405;
    } else {
        find_file(c, &q, &r);
        if (r.status == 200) conditions(&q, &r);
        else if (r.status == 400) keep = 0;     /* a malformed path: the client is broken */
    }
    /* the views in q stay valid: consuming moves no bytes */
    aco_rt_bufio_consume(c->b, q.head_len);
    if (r.status != 413 && q.content_length > 0) {
        /* a client that waits to be asked for its body (RFC 9110 10.1.1:
         * HTTP/1.1 only) is asked at once; the body is read and dropped */
        static const char go_on[] = "HTTP/1.1 100 Continue\r\n\r\n";
        int64_t dl = aco_rt_in_ns(header_ns);
        if ((q.expect_continue && q.minor == 1 &&
             (aco_rt_bufio_write(c->b, go_on, sizeof go_on - 1, dl) < 0 ||
              aco_rt_bufio_flush(c->b, dl) < 0)) ||
            discard(c, q.content_length, dl) < 0) {
            resp_release(&r);
            return -1;
        }
    }
    if (respond(c, &q, &r, keep) < 0) return -1;
    return keep ? 1 : 0;
}

static void conn_co(void* arg) {
    conn_t* c = arg;
    int k = -1;
#ifdef ACO_HTTP_TLS
    /* HTTPS: the handshake first, within its own deadline, then the same
     * HTTP code over a bufio on the TLS connection */
    if (tls_ctx) {
        c->tls = aco_rt_tls_new(tls_ctx, c->fd, NULL);
        if (c->tls && aco_rt_tls_handshake(c->tls, aco_rt_in_ns(handshake_ns)) == 0)
            c->b = aco_rt_tls_bufio_new(c->tls, RBUF, WBUF);
    }
#endif
    if (c->b) {
        while ((k = serve_one(c)) > 0) {}
        if (k == 0) linger_close(c);
    }
    aco_rt_bufio_free(c->b);
#ifdef ACO_HTTP_TLS
    aco_rt_tls_free(c->tls);
#endif
    aco_rt_close(c->fd);
    bufs_put(c);
    free(c);
}

static int start_conn(int fd) {
    /* sendfile(2) has no MSG_DONTWAIT: the socket itself is non-blocking */
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) return -1;
    conn_t* c = malloc(sizeof(*c));
    if (c == NULL) return -1;
    c->fd = fd;
    c->b = NULL;
    c->rb = NULL;
    c->body = NULL;
    int tls = 0;                        /* HTTPS: the bufio comes after the handshake */
#ifdef ACO_HTTP_TLS
    c->tls = NULL;
    tls = tls_ctx != NULL;
#endif
    if (!tls && (c->b = aco_rt_bufio_new(fd, RBUF, WBUF)) == NULL) {
        free(c);
        return -1;
    }
    if (rt_cli_spawn(conn_co, c) < 0) {
        aco_rt_bufio_free(c->b);
        free(c);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Options                                                                  */
/* ------------------------------------------------------------------------ */

int main(int argc, char** argv) {
    const char* root = ".";
    const char* tls_cert = NULL;
    const char* tls_key = NULL;
    int port_given = 0;
    char** rest = calloc((size_t)argc + 1, sizeof(char*));
    if (rest == NULL) return 1;
    int nrest = 0;
    rest[nrest++] = argv[0];
    for (int i = 1; i < argc; i++) {
        const char* v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(argv[i], "--root") == 0 && v) {
            root = v;
            i++;
        } else if (strcmp(argv[i], "--idle-timeout-ms") == 0) {
            if (rt_cli_ms("aco_http", argv[i], v, &idle_ns) < 0) { free(rest); return 2; }
            i++;
        } else if (strcmp(argv[i], "--header-timeout-ms") == 0) {
            if (rt_cli_ms("aco_http", argv[i], v, &header_ns) < 0) { free(rest); return 2; }
            i++;
        } else if (strcmp(argv[i], "--tls-handshake-timeout-ms") == 0) {
            if (rt_cli_ms("aco_http", argv[i], v, &handshake_ns) < 0) { free(rest); return 2; }
            i++;
        } else if (strcmp(argv[i], "--tls-cert") == 0 && v) {
            tls_cert = v;
            i++;
        } else if (strcmp(argv[i], "--tls-key") == 0 && v) {
            tls_key = v;
            i++;
        } else {
            if (strcmp(argv[i], "--port") == 0) port_given = 1;
            rest[nrest++] = argv[i];
        }
    }
    rt_cli_t cli;
    int parsed = rt_cli_parse(&cli, "aco_http", nrest, rest);
    free(rest);                         /* (cli keeps argv's strings, not rest) */
    if (parsed < 0) {
        fprintf(stderr, "       aco_http also takes --root DIR (.), --idle-timeout-ms MS"
                " (60000), --header-timeout-ms MS (10000), --tls-cert PEM --tls-key PEM"
                " [--tls-handshake-timeout-ms MS (10000)]\n");
        return 2;
    }
    if ((tls_cert != NULL) != (tls_key != NULL)) {
        fprintf(stderr, "aco_http: --tls-cert and --tls-key go together\n");
        return 2;
    }
    if (tls_cert) {
#ifdef ACO_HTTP_TLS
        char err[256];
        aco_rt_tls_opts_t o = {.server = 1, .cert_file = tls_cert, .key_file = tls_key,
                               .alpn = "http/1.1", .flags = ACO_RT_TLS_LEND};
        if ((tls_ctx = aco_rt_tls_ctx_new(&o, err, sizeof err)) == NULL) {
            fprintf(stderr, "aco_http: %s\n", err);
            return 1;
        }
#else
        fprintf(stderr, "aco_http: built without TLS (make.sh found no OpenSSL 3: install "
                        "libssl-dev and build again)\n");
        return 2;
#endif
    }
    if (!port_given) cli.port = 8080;
    root_fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (root_fd < 0 || realpath(root, root_real) == NULL) {
        fprintf(stderr, "aco_http: --root %s: %s\n", root, strerror(errno));
        return 1;
    }
    struct open_how how = {.flags = O_RDONLY | O_CLOEXEC, .resolve = RESOLVE_BENEATH};
    int probe = (int)syscall(SYS_openat2, root_fd, ".", &how, sizeof(how));
    have_openat2 = probe >= 0;
    if (probe >= 0) close(probe);
    if (getenv("ACO_HTTP_NO_OPENAT2")) have_openat2 = 0;    /* tests the fallback */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        rl.rlim_cur / 4 / cli.threads < CACHE_SLOTS)
        cache_slots = (int)(rl.rlim_cur / 4 / cli.threads);
    signal(SIGPIPE, SIG_IGN);           /* sendfile(2) to a client that left */
    fprintf(stderr, "aco_http: serving %s (%s)%s\n", root_real,
            have_openat2 ? "openat2 RESOLVE_BENEATH" : "openat + path check",
            tls_cert ? " over TLS" : "");
    return rt_cli_run(&cli, "aco_http", start_conn);
}
