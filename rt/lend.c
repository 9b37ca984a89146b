/* lend.c - lent receives (aco_rt.h, "Lent receives"): the kernel fills a
 * buffer of the runtime's, the co reads it where it lies and gives it
 * back.
 *
 * Every lent buffer is ACO_RT_LEND_SIZE bytes after a header of its own
 * (lend_hdr_t, RT_LEND_HDR bytes before the data): aco_rt_lend_return
 * finds everything from the data pointer.  Two kinds:
 *
 *   ring  io_uring only: a pool of RT_LEND_BUFS buffers per scheduler,
 *         made at its first lend, given to the kernel as a provided buffer
 *         ring.  Each descriptor that lends gets one multishot receive
 *         (its rx record, hung on its descriptor entry): the kernel picks a
 *         buffer for whatever comes, whether or not a co waits, and the
 *         completions queue the filled buffers on the rx, in order.  A lend
 *         takes the first; when none is there it parks on the rx.  The
 *         multishot stays armed until the peer's end, an error, the ring
 *         running dry, or the descriptor's close.
 *   heap  everywhere else (epoll, a kernel without buffer rings or
 *         multishot receive, a socket that is not a stream, and whenever
 *         the ring has no buffer left): a malloc'd buffer and one plain
 *         receive into it.  So a lend never waits for a buffer: cos that
 *         hold every ring buffer cannot starve another.
 *
 * A ring buffer is in one of three places: the kernel's ring, an rx's
 * queue, or lent.  The pool outlives its scheduler while buffers are lent
 * (refs: one per lent buffer, one for the scheduler).  A buffer returned on
 * another thread than the pool's goes on the pool's return stack (atomic
 * push, the owner takes the whole stack: no ABA), which the owner drains
 * at its next lend; the returner drops its buffer's ref after the push, so
 * the stack holds no refs (after the owner is gone nobody reads it).
 *
 * The other receive calls on a descriptor with an rx take the queued bytes
 * first (rt_lend_read), so that mixing them with lends keeps the stream's
 * order; aco_rt_wait for POLLIN sees them too.
 */
#define _GNU_SOURCE
#include "rt_impl.h"
#include "rt_io.h"
#include "rt_sys.h"

#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#ifdef ACO_RT_HAVE_URING
#include <liburing.h>
#endif

#define RT_LEND_BUFS 128        /* a power of 2 (the ring's size) */
#define RT_LEND_HDR 64
#define LEND_MAGIC 0x6c656e64u  /* "lend" */

enum { B_FREE, B_RING, B_QUEUED, B_LENT };

typedef struct lend_hdr {
    uint32_t         magic;
    uint8_t          state;     /* B_* (atomic exchange at return) */
    uint16_t         bid;       /* ring: its buffer id */
    uint32_t         len;       /* queued: bytes in it, */
    uint32_t         off;       /* from off (a plain receive took some) */
    struct rt_lend_pool* pool;  /* NULL: a heap buffer */
    struct lend_hdr* next;      /* rx queue / return stack */
} lend_hdr_t;
_Static_assert(sizeof(lend_hdr_t) <= RT_LEND_HDR, "the header fits before the data");

typedef struct rt_lend_pool {
    aco_rt_sched_t*  owner;     /* atomic: NULL once the scheduler is gone */
    struct rt_rx*    rxs;       /* the owner's rx records */
    uint32_t         refs;      /* atomic: lent buffers + 1 for the owner */
    unsigned         in_ring;   /* buffers the kernel may pick (owner's) */
    uint8_t          no_multishot;  /* the kernel said EINVAL to one (5.19) */
    struct io_uring_buf_ring* br;
    char*            mem;       /* RT_LEND_BUFS slots of RT_LEND_SLOT */
    size_t           mem_len;
    lend_hdr_t*      returns;   /* atomic: returned on other threads */
} rt_lend_pool_t;

#define RT_LEND_SLOT (RT_LEND_HDR + ACO_RT_LEND_SIZE)

/* A descriptor's multishot receive and what it brought. */
struct rt_rx {
    int           fd;
    uint32_t      gen;          /* of the descriptor entry when made */
    uint8_t       armed;        /* the multishot is in the kernel */
    uint8_t       dead;         /* the descriptor was closed: free at the
                                   multishot's last completion */
    uint8_t       held;         /* dead, and its aco_rt_close waits for that
                                   completion: it frees it (rt_lend_release) */
    uint8_t       eof;          /* the peer's end came (after the queue) */
    int32_t       err;          /* an error came (after the queue), or 0 */
    uint64_t      dev;          /* the socket's identity when made: a */
    uint64_t      ino;          /* look finds a close(2) and reuse */
    lend_hdr_t*   head;         /* filled buffers, oldest first */
    lend_hdr_t*   tail;
    aco_rt_co_t*  waiter;       /* the co parked on it, or NULL */
    struct rt_rx* prev;         /* the pool's every rx, closed ones too */
    struct rt_rx* next;         /* until their multishot ended */
};

static inline char* data_of(lend_hdr_t* h) { return (char*)h + RT_LEND_HDR; }
static inline lend_hdr_t* hdr_of(const char* data) {
    return (lend_hdr_t*)(void*)(data - RT_LEND_HDR);
}

static void pool_unref(rt_lend_pool_t* p) {
    if (__atomic_sub_fetch(&p->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
    munmap(p->mem, p->mem_len);
#ifdef ACO_RT_HAVE_URING
    if (p->br) munmap(p->br, (size_t)RT_LEND_BUFS * sizeof(struct io_uring_buf));
#endif
    free(p);
}

/* ------------------------------------------------------------------------ */
/* Heap buffers                                                             */
/* ------------------------------------------------------------------------ */

static lend_hdr_t* heap_buf(void) {
    lend_hdr_t* h = malloc(RT_LEND_SLOT);
    if (h == NULL) return NULL;
    memset(h, 0, sizeof(*h));
    h->magic = LEND_MAGIC;
    h->state = B_LENT;
    return h;
}

/* ------------------------------------------------------------------------ */
/* Marks: which descriptors have an rx, on any scheduler                    */
/* ------------------------------------------------------------------------ */

/* The bytes an rx took are its scheduler's alone, so a receive on another
 * scheduler would wait for what it never gets: it fails with -EBUSY
 * instead (aco_rt.h).  To know, without a lock, a count per descriptor
 * number of the schedulers whose entry has an rx (two schedulers' lends
 * may each have one), in chunks made at first use and kept (other threads
 * read them).  rt_rx_alive (all the counts' sum) lets the receives of a
 * process without rxs skip the look. */
uint32_t rt_rx_alive;
typedef struct {
    uint32_t n;                         /* atomic: schedulers with an rx on it */
    uint64_t dev, ino;                  /* atomic: the file the last one lent
                                           on (ino 0: not known) */
} rx_mark_t;
static rx_mark_t** rx_marks;            /* RT_FD_CHUNKS chunks, made lazily */

static void marks_child(void) {         /* (a fork's child has no rx) */
    __atomic_store_n(&rx_marks, NULL, __ATOMIC_RELAXED);
    __atomic_store_n(&rt_rx_alive, 0u, __ATOMIC_RELAXED);
}
static void marks_atfork(void) { pthread_atfork(NULL, NULL, marks_child); }

/* fd's mark, made if need be: NULL without memory. */
static rx_mark_t* mark_of(int fd) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, marks_atfork);
    rx_mark_t** top = __atomic_load_n(&rx_marks, __ATOMIC_ACQUIRE);
    if (top == NULL) {
        rx_mark_t** t = calloc(RT_FD_CHUNKS, sizeof(*t));
        if (t == NULL) return NULL;
        if (!__atomic_compare_exchange_n(&rx_marks, &top, t, 0, __ATOMIC_ACQ_REL,
                                         __ATOMIC_ACQUIRE))
            free(t);
        else
            top = t;
    }
    rx_mark_t* c = __atomic_load_n(&top[fd / RT_FD_CHUNK], __ATOMIC_ACQUIRE);
    if (c == NULL) {
        rx_mark_t* n = calloc(RT_FD_CHUNK, sizeof(*n));
        if (n == NULL) return NULL;
        if (!__atomic_compare_exchange_n(&top[fd / RT_FD_CHUNK], &c, n, 0, __ATOMIC_ACQ_REL,
                                         __ATOMIC_ACQUIRE))
            free(n);
        else
            c = n;
    }
    return &c[fd % RT_FD_CHUNK];
}

/* e gets rx (its count made first: 0), or loses it. */
static int rx_hang(rt_fd_t* e, int fd, struct rt_rx* rx) {
    rx_mark_t* m = mark_of(fd);
    if (m == NULL) return -ENOMEM;
    rt_sys_fid_t id;
    int known = rt_sys_fid(fd, &id) == 0;
    __atomic_store_n(&m->dev, known ? id.dev : 0, __ATOMIC_RELAXED);
    __atomic_store_n(&m->ino, known ? id.ino : 0, __ATOMIC_RELEASE);
    __atomic_add_fetch(&m->n, 1u, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&rt_rx_alive, 1u, __ATOMIC_SEQ_CST);
    __atomic_store_n(&e->rx, rx, __ATOMIC_RELEASE);
    return 0;
}
static void rx_unhang(rt_fd_t* e, int fd) {
    __atomic_store_n(&e->rx, NULL, __ATOMIC_RELEASE);
    rx_mark_t** top = __atomic_load_n(&rx_marks, __ATOMIC_ACQUIRE);
    if (top == NULL) return;            /* (made before a fork: the child's) */
    rx_mark_t* c = __atomic_load_n(&top[fd / RT_FD_CHUNK], __ATOMIC_ACQUIRE);
    if (c == NULL || __atomic_load_n(&c[fd % RT_FD_CHUNK].n, __ATOMIC_RELAXED) == 0) return;
    __atomic_sub_fetch(&c[fd % RT_FD_CHUNK].n, 1u, __ATOMIC_SEQ_CST);
    __atomic_sub_fetch(&rt_rx_alive, 1u, __ATOMIC_SEQ_CST);
}

int rt_lend_elsewhere(rt_fd_t* e, int fd) {
    rx_mark_t** top = __atomic_load_n(&rx_marks, __ATOMIC_ACQUIRE);
    if (top == NULL || fd < 0 || rt_fd_too_big(fd)) return 0;
    rx_mark_t* c = __atomic_load_n(&top[fd / RT_FD_CHUNK], __ATOMIC_ACQUIRE);
    if (c == NULL) return 0;
    rx_mark_t* m = &c[fd % RT_FD_CHUNK];
    uint32_t mine = e && __atomic_load_n(&e->rx, __ATOMIC_RELAXED) ? 1u : 0u;
    if (__atomic_load_n(&m->n, __ATOMIC_SEQ_CST) <= mine) return 0;
    /* Another scheduler lends on this number: on this file?  An
     * aco_rt_close on another thread ends that lend only when its thread
     * hears of it, and the number may hold a new file by then, which is
     * nobody's (a look at the file, on this rare way only). */
    rt_sys_fid_t id;
    uint64_t ino = __atomic_load_n(&m->ino, __ATOMIC_ACQUIRE);
    return ino == 0 || rt_sys_fid(fd, &id) != 0 ||
           (id.ino == ino && id.dev == __atomic_load_n(&m->dev, __ATOMIC_RELAXED));
}

/* ------------------------------------------------------------------------ */
/* The ring (io_uring)                                                      */
/* ------------------------------------------------------------------------ */

#ifdef ACO_RT_HAVE_URING

static inline lend_hdr_t* slot(rt_lend_pool_t* p, unsigned bid) {
    return (lend_hdr_t*)(void*)(p->mem + (size_t)bid * RT_LEND_SLOT);
}

#define RX_TAG 1u   /* user_data of a multishot: its rx | RX_TAG (a co's
                       record is 16-aligned) */

/* Give buffer h back to the kernel (owner's thread). */
static void ring_put(rt_lend_pool_t* p, lend_hdr_t* h) {
    h->state = B_RING;
    io_uring_buf_ring_add(p->br, data_of(h), ACO_RT_LEND_SIZE, h->bid,
                          io_uring_buf_ring_mask(RT_LEND_BUFS), 0);
    io_uring_buf_ring_advance(p->br, 1);
    p->in_ring++;
}

/* Buffers returned on other threads: back to the kernel. */
static void drain_returns(rt_lend_pool_t* p) {
    if (__atomic_load_n(&p->returns, __ATOMIC_RELAXED) == NULL) return;
    lend_hdr_t* h = __atomic_exchange_n(&p->returns, NULL, __ATOMIC_ACQUIRE);
    while (h) {
        lend_hdr_t* next = h->next;
        ring_put(p, h);
        h = next;
    }
}

/* The scheduler's pool, made at the first lend: NULL where the kernel has
 * no buffer rings (s->lend_tried says so from then on). */
static rt_lend_pool_t* pool_get(aco_rt_sched_t* s) {
    if (rt_likely(s->lend.pool != NULL)) return s->lend.pool;
    if (s->lend.tried) return NULL;
    s->lend.tried = 1;
    if (s->backend.ops != &rt_backend_uring) return NULL;
    rt_lend_pool_t* p = calloc(1, sizeof(*p));
    if (p == NULL) return NULL;
    size_t brlen = (size_t)RT_LEND_BUFS * sizeof(struct io_uring_buf);
    p->mem_len = (size_t)RT_LEND_BUFS * RT_LEND_SLOT;
    p->br = mmap(NULL, brlen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    p->mem = mmap(NULL, p->mem_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p->br == MAP_FAILED || p->mem == MAP_FAILED) {
        if (p->br != MAP_FAILED) munmap(p->br, brlen);
        if (p->mem != MAP_FAILED) munmap(p->mem, p->mem_len);
        free(p);
        s->lend.tried = 0;                  /* memory: try again later */
        return NULL;
    }
    io_uring_buf_ring_init(p->br);
    struct io_uring_buf_reg reg;
    memset(&reg, 0, sizeof(reg));
    reg.ring_addr = (uint64_t)(uintptr_t)p->br;
    reg.ring_entries = RT_LEND_BUFS;
    reg.bgid = 0;
    if (io_uring_register_buf_ring(rt_ur_ring(s), &reg, 0) != 0) {     /* before 5.19 */
        munmap(p->br, brlen);
        munmap(p->mem, p->mem_len);
        free(p);
        return NULL;
    }
    p->owner = s;
    p->refs = 1;
    for (unsigned i = 0; i < RT_LEND_BUFS; i++) {
        lend_hdr_t* h = slot(p, i);
        h->magic = LEND_MAGIC;
        h->bid = (uint16_t)i;
        h->pool = p;
        ring_put(p, h);
    }
    s->lend.pool = p;
    s->st.lend_ring = 1;
    return p;
}

/* Arm rx's multishot receive. */
static void rx_arm(aco_rt_sched_t* s, struct rt_rx* rx) {
    struct io_uring_sqe* sqe = rt_ur_sqe(s);
    io_uring_prep_recv_multishot(sqe, rx->fd, NULL, 0, 0);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = 0;
    io_uring_sqe_set_data(sqe, (void*)((uintptr_t)rx | RX_TAG));
    rx->armed = 1;
    s->st.io_inflight++;
}

static void rx_wake(struct rt_rx* rx) {
    aco_rt_co_t* co = rx->waiter;
    if (co) {
        rx->waiter = NULL;
        rt_wake(co, 0);
    }
}

static void rx_free(aco_rt_sched_t* s, struct rt_rx* rx) {
    rt_lend_pool_t* p = s->lend.pool;
    for (lend_hdr_t* h = rx->head; h; ) {
        lend_hdr_t* next = h->next;
        ring_put(p, h);
        h = next;
    }
    if (rx->prev) rx->prev->next = rx->next; else p->rxs = rx->next;
    if (rx->next) rx->next->prev = rx->prev;
    free(rx);
}

/* cos in aco_rt_wait(POLLIN) on rx's descriptor: what the multishot took
 * from the socket will not wake their poll, so end their waits with
 * POLLIN (the result of an io_uring poll that is cancelled: io_abort).
 * A wait for anything else is left to its poll (w.slot: RT_POLL_LENT). */
static void rx_wake_pollers(aco_rt_sched_t* s, struct rt_rx* rx) {
    for (uint32_t i = 0; i < s->recs.ncos; i++) {
        aco_rt_co_t* co = s->recs.cos[i];
        if (co->state == RT_PARKED && co->wait == RT_W_UR_OP + RT_OP_POLL &&
            (co->flags & RT_IO_OP) && co->w.io.fd == rx->fd && co->w.io.gen == rx->gen &&
            co->w.slot != NULL)
            rt_ur_abort(co, POLLIN);
        else
            rt_ur_poll_lent(co, rx->fd);        /* aco_rt_poll: it looks again */
    }
}

/* Does fd's own receive say EINVAL (not the multishot's flag)? */
static int sock_einval(int fd) {
    char c;
    return rt_sys_recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) < 0 && errno == EINVAL;
}

void rt_lend_cqe(aco_rt_sched_t* s, void* data, int res, unsigned flags) {
    struct rt_rx* rx = (struct rt_rx*)((uintptr_t)data & ~(uintptr_t)RX_TAG);
    rt_lend_pool_t* p = s->lend.pool;
    if (flags & IORING_CQE_F_BUFFER) {
        lend_hdr_t* h = slot(p, flags >> IORING_CQE_BUFFER_SHIFT);
        p->in_ring--;
        if (res > 0 && !rx->dead) {
            h->state = B_QUEUED;
            h->len = (uint32_t)res;
            h->off = 0;
            h->next = NULL;
            if (rx->tail) rx->tail->next = h; else rx->head = h;
            rx->tail = h;
        } else {
            ring_put(p, h);
        }
    } else if (res == 0) {
        rx->eof = 1;
    } else if (res == -EINVAL && !(flags & IORING_CQE_F_MORE) && rx->armed == 1 &&
               !p->no_multishot && s->st.lends == s->st.lend_heap && !sock_einval(rx->fd)) {
        /* the ring is there (5.19), multishot receive not (6.0): lend
         * from the heap from now on (the socket's own EINVAL, a Unix
         * stream socket not connected, is only its error) */
        p->no_multishot = 1;
        s->st.lend_ring = 0;
    } else if (res < 0 && res != -ENOBUFS && res != -ECANCELED) {
        rx->err = res;
    }
    rt_fd_t* e = rt_fd_peek(&s->fds, rx->fd);
    if (e && e->gen != rx->gen) e = NULL;       /* (a new file: not ours) */
    if (!(flags & IORING_CQE_F_MORE)) {         /* it ended */
        rx->armed = 0;
        s->st.io_inflight--;
        if (rx->dead) {
            if (!rx->held) rx_free(s, rx);
            return;
        }
    }
    if (rx->dead) return;
    rx_wake(rx);
    if (e && e->pollers) rx_wake_pollers(s, rx);
}

/* fd's entry e is being closed: the rx stops; the co parked on it gets
 * -EBADF.  by_op: the multishot is cancelled here, by its record (the
 * file may be closed already, its number another file's; or the kernel
 * cancels nothing by file, before 5.19).  The rx if its multishot is still
 * in the kernel (holding the file; freed by its last completion), else
 * NULL. */
struct rt_rx* rt_lend_closing(aco_rt_sched_t* s, rt_fd_t* e, int by_op) {
    struct rt_rx* rx = e->rx;
    rx_unhang(e, rx->fd);
    rx->dead = 1;
    aco_rt_co_t* co = rx->waiter;
    if (co) {
        rx->waiter = NULL;
        rt_wake(co, -EBADF);
    }
    if (!rx->armed) {
        rx_free(s, rx);
        return NULL;
    }
    if (by_op) {    /* (else the caller cancels its operations) */
        struct io_uring_sqe* sqe = rt_ur_sqe(s);
        io_uring_prep_cancel(sqe, (void*)((uintptr_t)rx | RX_TAG), 0);
        io_uring_sqe_set_data(sqe, NULL);
    }
    return rx;
}

/* An aco_rt_close waits for the multishot of rx (rt_lend_closing's) to
 * end: rx stays until rt_lend_release, whatever comes meanwhile. */
void rt_lend_hold(struct rt_rx* rx) { rx->held = 1; }
int rt_lend_armed(const struct rt_rx* rx) { return rx->armed; }
void rt_lend_release(aco_rt_sched_t* s, struct rt_rx* rx) {
    rx->held = 0;
    if (!rx->armed) rx_free(s, rx);     /* (else its last completion frees it) */
}

void rt_lend_fini(aco_rt_sched_t* s) {
    rt_lend_pool_t* p = s->lend.pool;
    if (p == NULL) return;
    /* The kernel picks no buffer from here on; the rx records go (their
     * multishots die with the ring). */
    io_uring_unregister_buf_ring(rt_ur_ring(s), 0);
    while (p->rxs) {
        struct rt_rx* rx = p->rxs;
        rt_fd_t* e = rt_fd_peek(&s->fds, rx->fd);
        if (e && e->rx == rx) rx_unhang(e, rx->fd);
        p->rxs = rx->next;
        free(rx);
    }
    __atomic_store_n(&p->owner, NULL, __ATOMIC_RELEASE);
    s->lend.pool = NULL;
    pool_unref(p);
}

#else /* !ACO_RT_HAVE_URING */

static rt_lend_pool_t* pool_get(aco_rt_sched_t* s) { (void)s; return NULL; }
static void drain_returns(rt_lend_pool_t* p) { (void)p; }
void rt_lend_cqe(aco_rt_sched_t* s, void* data, int res, unsigned flags) {
    (void)s; (void)data; (void)res; (void)flags;
}
struct rt_rx* rt_lend_closing(aco_rt_sched_t* s, rt_fd_t* e, int by_op) {
    (void)s; (void)by_op;
    struct rt_rx* rx = e->rx;
    rx_unhang(e, rx->fd);
    free(rx);
    return NULL;
}
void rt_lend_fini(aco_rt_sched_t* s) { (void)s; }
static void rx_arm(aco_rt_sched_t* s, struct rt_rx* rx) {
    (void)s; (void)rx;
}

#endif

/* ------------------------------------------------------------------------ */
/* The calls                                                                */
/* ------------------------------------------------------------------------ */

static void lend_abort(aco_rt_co_t* co, int err) {
    struct rt_rx* rx = (struct rt_rx*)(uintptr_t)co->wait_obj;
    if (rx->waiter == co) rx->waiter = NULL;
    rt_wake(co, err);
}

RT_WAIT_KINDS(lend, {RT_W_LEND, {"recv_lend", lend_abort, NULL}})

/* Drop e's rx though the descriptor stays (it ended, or a look gave it
 * up; gone: cancel its multishot): the entry's count of what the runtime
 * has on it goes down (a close zeroes the count instead). */
static void rx_drop(aco_rt_sched_t* s, rt_fd_t* e, int gone) {
    if (e->busy) rt_fd_busy_add(e, -1);
    rt_lend_closing(s, e, gone);
}

/* fd's rx, or NULL.  (Every path that gives the number a new file, or
 * forgets it, goes through the backend's closing first, which drops the
 * rx: an entry's rx is always of its current generation.) */
static struct rt_rx* rx_of(rt_fd_t* e) { return e->rx; }

/* The kernel may miss a socket's end with a multishot armed (a race on
 * some kernels: the reset or the EOF comes, no completion follows), and
 * the program may close(2) the socket and get its number again for
 * another file (the multishot holds the old one).  So a wait on an rx
 * looks at the socket itself after RT_LEND_CHECK, then after twice that,
 * up to RT_LEND_CHECK_MAX apart: if poll(2) says it ended (POLLERR,
 * POLLHUP, POLLRDHUP) while the multishot says nothing, or statx(2) says
 * the number holds another file, the rx is given up (cancelled, and closed
 * as by aco_rt_close: what it still brings is dropped; none can come after
 * the end) and the calls go the plain way, which reads what the socket
 * still holds, then the end. */
#define RT_LEND_CHECK (1000 * 1000000LL)
#define RT_LEND_CHECK_MAX (8 * RT_LEND_CHECK)

/* Park co on rx until something comes: 0, -errno, or RT_LEND_NONE (the
 * rx was given up: receive the plain way).  A deadline that has passed
 * first reaps the completions there are (the one non-blocking try of the
 * other calls): 0 if that brought something. */
static int rx_wait(aco_rt_co_t* co, rt_fd_t* e, struct rt_rx* rx, int64_t deadline) {
    if (rx->waiter) return -EBUSY;
    int r = rt_may_block(co, deadline);
    if (r == -ETIMEDOUT) {
        co->s->backend.ops->poll(co->s, 0);
        return rx->head || rx->eof || rx->err || !rx->armed ? 0 : r;
    }
    if (r) return r;
    aco_rt_sched_t* s = co->s;
    for (int64_t check = RT_LEND_CHECK;; check *= 2) {
        if (check > RT_LEND_CHECK_MAX) check = RT_LEND_CHECK_MAX;
        int64_t look = (s->wheel.now << RT_TICK_SHIFT) + check;
        int mine = deadline == -1 || look < deadline;
        rx->waiter = co;
        r = rt_park(co, RT_W_LEND, rx, mine ? look : deadline);
        if (r != -ETIMEDOUT || !mine) return r;
        if (e->rx != rx) return -EBADF;     /* (closed meanwhile) */
        if (rx->head || rx->eof || rx->err || !rx->armed) return 0;
        struct pollfd p = {rx->fd, POLLIN | POLLRDHUP, 0};
        rt_sys_fid_t id;
        if ((rt_sys_poll0(&p, 1) == 1 && (p.revents & (POLLERR | POLLHUP | POLLRDHUP | POLLNVAL))) ||
            rt_sys_fid(rx->fd, &id) < 0 || id.dev != rx->dev || id.ino != rx->ino) {
            rx_drop(s, e, 1);
            return (int)RT_LEND_NONE;
        }
    }
}
/* Take the queue's first buffer off rx. */
static lend_hdr_t* rx_pop(struct rt_rx* rx) {
    lend_hdr_t* h = rx->head;
    rx->head = h->next;
    if (rx->head == NULL) rx->tail = NULL;
    return h;
}

/* What rx holds instead of bytes: 0 at the end, the error (once), or 1
 * if nothing. */
static int rx_end(struct rt_rx* rx) {
    if (rx->err) {
        int r = rx->err;
        rx->err = 0;
        return r;
    }
    return rx->eof ? 0 : 1;
}

/* rx told its end (or an error): with its multishot over and nothing
 * queued it holds nothing of the kernel's, so it goes; the next call
 * receives plainly (the end again, from the socket itself), or arms a new
 * multishot.  A socket closed by close(2) and its number reused for
 * another file is then read for what it is. */
static void rx_ended(aco_rt_sched_t* s, rt_fd_t* e, struct rt_rx* rx) {
    if (!rx->armed && rx->head == NULL && e->rx == rx) rx_drop(s, e, 0);
}

/* A lend from a heap buffer: one plain receive (an io_uring read where
 * that is the backend: the buffer is never on a share stack). */
static ssize_t lend_heap(aco_rt_sched_t* s, int fd, const char** data, int64_t deadline) {
    aco_rt_co_t* co = rt_self();
    rt_extra_t* x = rt_extra(co, 0);    /* (held there while it waits) */
    lend_hdr_t* h = x ? heap_buf() : NULL;
    if (h == NULL) return -ENOMEM;
    x->held = h;
    ssize_t n;
    if (s->backend.ops == &rt_backend_uring && !rt_passed(deadline)) {
        n = rt_uring_io(co, RT_OP_READ, fd, data_of(h), ACO_RT_LEND_SIZE, 0, deadline);
    } else {
        rq_t q = {K_READ, fd, data_of(h), ACO_RT_LEND_SIZE, 0};
        n = rt_ready_io(co, &q, deadline);
    }
    x->held = NULL;
    if (n <= 0) {
        free(h);
        return n;
    }
    s->st.lends++;
    s->st.lend_heap++;
    *data = data_of(h);
    return n;
}

ssize_t aco_rt_recv_lend(int fd, const char** data, int64_t deadline) {
    aco_rt_co_t* co = rt_self();
    if (rt_unlikely(co == NULL)) return -EPERM;
    if (rt_unlikely(rt_co_cancelled(co))) return -ECANCELED;
    if (data == NULL) return -EINVAL;
    aco_rt_sched_t* s = co->s;
    int pe = rt_pend_err_rd(co, fd);    /* an error kept for the next call */
    if (pe) return pe;
    rt_fd_t* e = rt_fd_get(&s->fds, fd);
    if (e == NULL) return fd < 0 ? -EBADF : -ENOMEM;
    /* a close from another thread not heard yet may be this rx's: the
     * number may hold a new file, which must not get the old one's bytes */
    if (rt_unlikely(e->rx != NULL) && __atomic_load_n(&s->cl.list, __ATOMIC_ACQUIRE))
        rt_hook_closes(s);
    rt_lend_pool_t* p = pool_get(s);
    struct rt_rx* rx = rx_of(e);
    /* (an rx of before keeps its queue: served first, in order) */
    if (p == NULL || (p->no_multishot && (rx == NULL || (!rx->head && !rx->eof && !rx->err))))
        return lend_heap(s, fd, data, deadline);
    drain_returns(p);
    for (;;) {
        if (rx && rx->head) {
            lend_hdr_t* h = rx_pop(rx);
            if (h->off) memmove(data_of(h), data_of(h) + h->off, h->len);
            h->off = 0;
            h->state = B_LENT;
            __atomic_add_fetch(&p->refs, 1, __ATOMIC_RELAXED);
            s->st.lends++;
            *data = data_of(h);
            return (ssize_t)h->len;
        }
        if (rx) {
            int r = rx_end(rx);
            if (r <= 0) {
                rx_ended(s, e, rx);
                return r;
            }
        }
        if (rx == NULL || !rx->armed) {
            /* Arm the multishot: a stream socket, buffers in the ring,
             * and a deadline still to come. */
            if (p->no_multishot || p->in_ring == 0 ||
                (deadline != -1 && (deadline <= 0 || deadline <= rt_now())))
                return lend_heap(s, fd, data, deadline);
            if (rx == NULL) {
                if (rt_fd_kind(e, fd) != RT_FD_SOCK || !e->stream)
                    return lend_heap(s, fd, data, deadline);
                rt_sys_fid_t id;
                if (rt_sys_fid(fd, &id) < 0) return -errno;
                if ((rx = calloc(1, sizeof(*rx))) == NULL) return -ENOMEM;
                rx->fd = fd;
                rx->gen = e->gen;
                rx->dev = id.dev;
                rx->ino = id.ino;
                if (rx_hang(e, fd, rx) < 0) {
                    free(rx);
                    return -ENOMEM;
                }
                rx->next = p->rxs;
                if (p->rxs) p->rxs->prev = rx;
                p->rxs = rx;
                /* counted as busy while it lives: a close on any thread
                 * finds it (aco_rt_close), and the backend cancels */
                rt_fd_busy_add(e, 1);
            }
            rx_arm(s, rx);
        }
        int r = rx_wait(co, e, rx, deadline);
        if (r == (int)RT_LEND_NONE) return lend_heap(s, fd, data, deadline);
        if (r < 0) return r;
        if (e->rx != rx) return -EBADF;     /* closed meanwhile */
    }
}

int aco_rt_lend_return(const char* data) {
    if (data == NULL) return -EINVAL;
    lend_hdr_t* h = hdr_of(data);
    if (h->magic != LEND_MAGIC ||
        __atomic_exchange_n(&h->state, (uint8_t)B_FREE, __ATOMIC_ACQ_REL) != B_LENT)
        return -EINVAL;
    rt_lend_pool_t* p = h->pool;
    if (p == NULL) {
        h->magic = 0;
        free(h);
        return 0;
    }
#ifdef ACO_RT_HAVE_URING
    aco_rt_sched_t* me = rt_tls_sched;
    if (me && __atomic_load_n(&p->owner, __ATOMIC_ACQUIRE) == me) {
        ring_put(p, h);
        pool_unref(p);
        return 0;
    }
#endif
    /* Another thread's pool (or its scheduler is gone): its return stack. */
    lend_hdr_t* top = __atomic_load_n(&p->returns, __ATOMIC_RELAXED);
    do {
        h->next = top;
    } while (!__atomic_compare_exchange_n(&p->returns, &top, h, 1, __ATOMIC_RELEASE,
                                          __ATOMIC_RELAXED));
    pool_unref(p);
    return 0;
}

/* Copy n bytes from src into iov[0, cnt) from byte at on: the count. */
static size_t iov_put(const struct iovec* iov, int cnt, size_t at, const char* src, size_t n) {
    size_t done = 0;
    for (int i = 0; i < cnt && done < n; i++) {
        if (at >= iov[i].iov_len) {
            at -= iov[i].iov_len;
            continue;
        }
        size_t c = iov[i].iov_len - at;
        if (c > n - done) c = n - done;
        memcpy((char*)iov[i].iov_base + at, src + done, c);
        done += c;
        at = 0;
    }
    return done;
}

/* The other receive calls on a descriptor with an rx (io.c): copy what is
 * queued (MSG_PEEK: without taking it), or wait for the multishot.  The
 * count, 0 at the end, -errno, or RT_LEND_NONE: no rx (or its multishot
 * ended with nothing queued), go the plain way. */
ssize_t rt_lend_read(aco_rt_co_t* co, rt_fd_t* e, const struct iovec* iov, int cnt,
                     int flags, int64_t deadline) {
    struct rt_rx* rx = rx_of(e);
    if (rx == NULL) return RT_LEND_NONE;
    if (flags & ~(MSG_PEEK | MSG_DONTWAIT | MSG_WAITALL | MSG_NOSIGNAL | MSG_CMSG_CLOEXEC))
        return -EOPNOTSUPP;
    /* (the caller's MSG_DONTWAIT is one try, as recv(2)'s: a wait below
     * reaps the completions there are, as for a passed deadline, then
     * says -EAGAIN if they brought nothing) */
    int dontwait = (flags & MSG_DONTWAIT) != 0;
    size_t want = 0;
    for (int i = 0; i < cnt; i++) want += iov[i].iov_len;
    if (want == 0) {
        /* recv(2) of none: waits for bytes, the end or an error, takes
         * nothing, says 0 */
        if (!rx->head && rx->err) return rx_end(rx);     /* (recv(2) says it) */
        while (!rx->head && !rx->eof && !rx->err) {
            if (!rx->armed) return RT_LEND_NONE;
            int r = rx_wait(co, e, rx, dontwait ? 0 : deadline);
            if (dontwait && r == -ETIMEDOUT) return -EAGAIN;
            if (r == (int)RT_LEND_NONE) return RT_LEND_NONE;
            if (r < 0) return r;
            if (e->rx != rx) return -EBADF;
        }
        return 0;
    }
    size_t got = 0;
    for (;;) {
        if (flags & MSG_PEEK) got = 0;      /* (nothing was taken) */
        lend_hdr_t* h = rx->head;
        while (h && got < want) {
            size_t c = iov_put(iov, cnt, got, data_of(h) + h->off, h->len);
            got += c;
            if (flags & MSG_PEEK) {
                h = h->next;
            } else if (c < h->len) {
                h->off += (uint32_t)c;
                h->len -= (uint32_t)c;
                break;
            } else {
                rx_pop(rx);
#ifdef ACO_RT_HAVE_URING
                ring_put(co->s->lend.pool, h);
#endif
                h = rx->head;
            }
        }
        /* (MSG_PEEK with MSG_WAITALL: what is there, aco_rt_recv's rule) */
        if (got == want || (got && (flags & (MSG_WAITALL | MSG_PEEK)) != MSG_WAITALL))
            return (ssize_t)got;
        if (rx->head == NULL && (rx->err || rx->eof)) {
            if (got) return (ssize_t)got;   /* the end, or the error, comes next */
            int r = rx_end(rx);
            rx_ended(co->s, e, rx);
            return r;
        }
        if (!rx->armed) return got ? (ssize_t)got : RT_LEND_NONE;
        int r = rx_wait(co, e, rx, dontwait ? 0 : deadline);
        if (dontwait && r == -ETIMEDOUT) r = -EAGAIN;
        if (r == (int)RT_LEND_NONE) return got ? (ssize_t)got : RT_LEND_NONE;
        if (r < 0) return got ? (ssize_t)got : r;
        if (e->rx != rx) return got ? (ssize_t)got : -EBADF;
    }
}

/* aco_rt_wait: 1 if bytes (or the end) wait on fd's rx, 0 if its
 * multishot is armed with nothing queued (what comes to the socket is its:
 * the socket's POLLIN says nothing), -1 if neither. */
int rt_lend_state(rt_fd_t* e) {
    struct rt_rx* rx = rx_of(e);
    if (rx == NULL) return -1;
    if (rx->head || rx->eof || rx->err) return 1;
    return rx->armed ? 0 : -1;
}
