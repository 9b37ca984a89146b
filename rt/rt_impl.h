/* rt_impl.h - the runtime's internals, shared by its sources (not installed).
 *
 * Map of the sources:
 *   sched.c     scheduler loop, cos (spawn, join, cancel, park/wake), stats
 *   timer.c     the timing wheel
 *   sync.c      mutex, condition variable, semaphore, wait group
 *   keys.c      co-local keys, aco_rt_exit
 *   pthread.c   the pthread-like face (aco_rt_pthread.h) over the above
 *   chan.c      channels and select
 *   io.c        the I/O calls, the share-stack check, the descriptor table
 *   io_epoll.c  epoll backend: readiness
 *   io_uring.c  io_uring backend: operations, and readiness for buffers
 *               that lie on a share stack
 */
#ifndef ACO_RT_IMPL_H
#define ACO_RT_IMPL_H

#include "aco_rt.h"
#include "../aco.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#define rt_likely(x)   __builtin_expect(!!(x), 1)
#define rt_unlikely(x) __builtin_expect(!!(x), 0)
#define rt_container_of(p, type, field) \
    ((type*)(void*)((char*)(p) - offsetof(type, field)))

/* ------------------------------------------------------------------------ */
/* Waiting                                                                  */
/* ------------------------------------------------------------------------ */

/* A co's place in a wait queue.  Lives in the co's heap record (the share-
 * stack rule), one per co, plus one per case in a select. */
typedef struct rt_waiter {
    struct rt_waiter* next;
    struct rt_waiter* prev;
    aco_rt_co_t*      co;
    aco_rt_waitq_t*   q;        /* the queue it is on, NULL if none */
    void*             slot;     /* channels: the element (heap), see chan.c */
    int               idx;      /* select: the case index; else -1 */
    int               events;   /* epoll readiness: the events it waits for */
} rt_waiter_t;

/* Wait queues: doubly linked FIFOs of waiters. */
static inline int rt_wq_empty(const aco_rt_waitq_t* q) { return q->head_ == NULL; }
static inline rt_waiter_t* rt_wq_first(const aco_rt_waitq_t* q) { return (rt_waiter_t*)q->head_; }

static inline void rt_wq_push(aco_rt_waitq_t* q, rt_waiter_t* w) {
    rt_waiter_t* tail = (rt_waiter_t*)q->tail_;
    w->next = NULL;
    w->prev = tail;
    w->q = q;
    if (tail) tail->next = w; else q->head_ = w;
    q->tail_ = w;
}

static inline void rt_wq_remove(rt_waiter_t* w) {   /* w is on a queue */
    aco_rt_waitq_t* q = w->q;
    if (w->prev) w->prev->next = w->next; else q->head_ = w->next;
    if (w->next) w->next->prev = w->prev; else q->tail_ = w->prev;
    w->next = w->prev = NULL;
    w->q = NULL;
}

static inline rt_waiter_t* rt_wq_pop(aco_rt_waitq_t* q) {  /* NULL if empty */
    rt_waiter_t* w = (rt_waiter_t*)q->head_;
    if (w) rt_wq_remove(w);
    return w;
}

/* Co states. */
enum { RT_READY = 1, RT_RUNNING, RT_PARKED, RT_DONE };
/* Co flags. */
enum {
    RT_CANCELLED  = 1 << 0,
    RT_DETACHED   = 1 << 1,
    RT_STANDALONE = 1 << 2,
    RT_IO_OP      = 1 << 3,     /* an io_uring operation is in the kernel */
};

/* What a co has only once it needs it (select, bigger channel elements,
 * an iovec copy): allocated once per record, kept while the record lives. */
typedef struct rt_extra {
    rt_waiter_t*  selw;         /* select's waiters */
    int           selw_cap;
    int           sel_err;      /* select: the fired case's error */
    void*         buf;          /* channel mailbox / select slots / iovecs */
    size_t        buf_cap;
} rt_extra_t;

struct aco_rt_co {
    aco_t*           aco;
    aco_rt_sched_t*  s;
    aco_rt_fn_t      fn;
    void*            arg;
    void*            keys;      /* its co-local key values (keys.c), NULL
                                   until it sets one; freed when it ends */
    aco_rt_co_t*     next;      /* ready queue / free list */
    uint8_t          state;
    uint8_t          flags;
    uint16_t         pad_;
    int32_t          res;       /* what the waker says: the parked call's result */
    aco_rt_timer_t   tmo;       /* the deadline of the current wait */
    rt_waiter_t      w;
    /* Leave the current wait early (deadline or cancel, with that error). */
    void           (*abort)(aco_rt_co_t* co, int err);
    const void*      wait_obj;  /* what it waits on, for aco_rt_dump */
    const char*      wait_what;
    aco_rt_co_t*     joiner;
    rt_extra_t*      x;
    const char*      name;
    uint64_t         id;
    uint32_t         slot;      /* index in s->cos */
    int32_t          io_abort;  /* io_uring: why the op was cancelled */
    int32_t          io_fd;     /* io_uring: the op's descriptor, */
    uint32_t         io_gen;    /* and its table generation */
};

/* ------------------------------------------------------------------------ */
/* Backends                                                                 */
/* ------------------------------------------------------------------------ */

typedef struct rt_backend {
    const char* name;
    int  (*init)(aco_rt_sched_t* s, const aco_rt_opts_t* o);
    void (*fini)(aco_rt_sched_t* s);
    /* Wait up to timeout ns (0: don't wait, -1: no limit) and wake the cos
     * whose I/O finished.  0 or -errno. */
    int  (*poll)(aco_rt_sched_t* s, int64_t timeout);
    /* Wait for fd's readiness (poll events): revents or -errno. */
    int  (*wait_fd)(aco_rt_co_t* co, int fd, int events, int64_t deadline);
    /* fd is being closed: wake its waiters with -EBADF, forget it. */
    void (*closing)(aco_rt_sched_t* s, int fd);
} rt_backend_t;

extern const rt_backend_t rt_backend_epoll;
extern const rt_backend_t rt_backend_uring;     /* name NULL: not built */

/* Descriptor table entry (io.c; epoll uses the queues). */
typedef struct rt_fd {
    uint8_t        nonblock;    /* O_NONBLOCK set by us (or found set) */
    uint8_t        registered;  /* epoll: added */
    uint8_t        unpollable;  /* epoll: EPERM (a regular file): always ready */
    uint8_t        stream;      /* a SOCK_STREAM socket (accept, connect) */
    uint8_t        rd_empty;    /* epoll, stream: a read came back short, so
                                   the socket was drained: wait for the next
                                   edge before reading again (saves the
                                   read that would say EAGAIN) */
    uint32_t       ops;         /* io_uring: operations in the kernel */
    uint32_t       gen;         /* bumped when the number gets a new file */
    uint8_t        rd_hup;      /* epoll: the peer's end (or an error) was
                                   seen: a short read does not mean drained
                                   then, the end may still be pending, its
                                   edge gone */
    aco_rt_waitq_t q;           /* epoll: cos waiting for readiness
                                   (w.events says for what) */
} rt_fd_t;

/* The timing wheel: 9 levels of 64 slots, 2^14 ns ticks (timer.c). */
#define RT_TICK_SHIFT 14
#define RT_WHEEL_LEVELS 9
_Static_assert(6 * RT_WHEEL_LEVELS + RT_TICK_SHIFT > 63, "every int64_t deadline has a level");
typedef struct rt_wheel {
    int64_t         now;        /* current tick: every armed timer is later */
    uint64_t        armed;
    uint64_t        bits[RT_WHEEL_LEVELS];
    aco_rt_timer_t  slot[RT_WHEEL_LEVELS][64];  /* list heads */
} rt_wheel_t;

struct aco_rt_sched {
    aco_t*              main_co;
    aco_rt_co_t*        cur;            /* running co, NULL in the loop */
    aco_rt_co_t*        rq_head;        /* ready queue */
    aco_rt_co_t*        rq_tail;
    const rt_backend_t* be;
    void*               be_data;
    aco_share_stack_t** stacks;
    unsigned            nstacks;
    unsigned            next_stack;
    size_t              stack_size;
    int                 own_main;       /* main_co is ours to destroy */
    int                 stop;
    int                 running;
    aco_rt_co_t**       cos;            /* every live record, for dump/free */
    uint32_t            ncos, cos_cap;
    aco_rt_co_t*        free_recs;      /* finished records with their aco */
    uint32_t            nfree;
    aco_rt_stats_t      st;
    uint64_t            next_id;
    rt_wheel_t          wheel;
    rt_fd_t**           fdc;            /* descriptor table chunks (io.c) */
    int                 nfdc;
};

extern __thread aco_rt_sched_t* rt_tls_sched;

static inline aco_rt_co_t* rt_self(void) {
    aco_rt_sched_t* s = rt_tls_sched;
    return s ? s->cur : NULL;
}

int64_t rt_now(void);

/* May the running co block now?  0, or the error to return at once:
 * -ECANCELED (cancelled), -ETIMEDOUT (deadline passed). */
static inline int rt_may_block(aco_rt_co_t* co, int64_t deadline) {
    if (rt_unlikely(co->flags & RT_CANCELLED)) return -ECANCELED;
    if (deadline >= 0 && (deadline == 0 || deadline <= rt_now())) return -ETIMEDOUT;
    return 0;
}

/* Park the running co until rt_wake(co, res): returns res.  The caller has
 * put it where a waker finds it; abort undoes that when the deadline
 * passes or the co is cancelled (and then wakes it, now or later). */
static inline int rt_park(aco_rt_co_t* co, const char* what, const void* obj,
                          int64_t deadline, void (*abort)(aco_rt_co_t*, int));
static inline void rt_wake(aco_rt_co_t* co, int res);
void rt_tmo_fire(aco_rt_timer_t* t);        /* a co's deadline passed */
/* abort for cos on a wait queue (co->w): unlink and wake with err. */
void rt_abort_waitq(aco_rt_co_t* co, int err);

/* Timers (timer.c). */
void    rt_wheel_init(rt_wheel_t* w, int64_t now_ns);
void    rt_wheel_add(rt_wheel_t* w, aco_rt_timer_t* t, int64_t deadline_ns);
int     rt_wheel_del(rt_wheel_t* w, aco_rt_timer_t* t);
/* Disarm every timer (the program's may outlive the scheduler). */
void    rt_wheel_clear(rt_wheel_t* w);
/* ns until the first timer can fire (from now_ns), -1 if none armed. */
int64_t rt_wheel_timeout(const rt_wheel_t* w, int64_t now_ns);
/* Fire every timer due at now_ns. */
void    rt_wheel_advance(rt_wheel_t* w, int64_t now_ns);
static inline int rt_timer_armed(const aco_rt_timer_t* t) { return t->next_ != NULL; }

static inline void rt_rq_push(aco_rt_sched_t* s, aco_rt_co_t* co) {
    co->next = NULL;
    if (s->rq_tail) s->rq_tail->next = co; else s->rq_head = co;
    s->rq_tail = co;
    s->st.cos_ready++;
}

/* Make a parked co ready, res the result of its call. */
static inline void rt_wake(aco_rt_co_t* co, int res) {
    aco_rt_sched_t* s = co->s;
    if (rt_unlikely(co->state != RT_PARKED)) return;
    if (rt_timer_armed(&co->tmo)) {
        rt_wheel_del(&s->wheel, &co->tmo);
        s->st.timers--;
    }
    co->res = res;
    co->state = RT_READY;
    co->wait_obj = NULL;
    co->wait_what = NULL;
    s->st.cos_parked--;
    rt_rq_push(s, co);
}

/* Inline (as aco_yield is): the co continues right here when resumed, one
 * return fewer to mispredict after the switch. */
static inline int rt_park(aco_rt_co_t* co, const char* what, const void* obj,
                          int64_t deadline, void (*abort)(aco_rt_co_t*, int)) {
    aco_rt_sched_t* s = co->s;
    co->state = RT_PARKED;
    co->abort = abort;
    co->wait_obj = obj;
    co->wait_what = what;
    s->st.cos_parked++;
    if (deadline >= 0) {             /* co->tmo.fn_ is rt_tmo_fire */
        rt_wheel_add(&s->wheel, &co->tmo, deadline);
        s->st.timers++;
    }
    aco_yield();
    return co->res;
}

/* Copy a channel element: direct branches for the common sizes (a jump
 * table's indirect branch mispredicts after every switch). */
static inline void rt_copy(void* d, const void* src, size_t n) {
    if (n == 4) memcpy(d, src, 4);
    else if (n == 8) memcpy(d, src, 8);
    else if (n == 16) memcpy(d, src, 16);
    else memcpy(d, src, n);
}

/* io.c */
#define RT_FD_CHUNK 256
rt_fd_t* rt_fd_get(aco_rt_sched_t* s, int fd);   /* NULL: ENOMEM */
/* The entry of fd if the table has one, else NULL (never allocates). */
static inline rt_fd_t* rt_fd_peek(aco_rt_sched_t* s, int fd) {
    if (fd < 0 || fd / RT_FD_CHUNK >= s->nfdc || s->fdc[fd / RT_FD_CHUNK] == NULL) return NULL;
    return &s->fdc[fd / RT_FD_CHUNK][fd % RT_FD_CHUNK];
}
int      rt_fd_nonblock(aco_rt_sched_t* s, int fd);
int      rt_on_share_stack(const aco_rt_co_t* co, const void* p, size_t n);
void     rt_fd_free_all(aco_rt_sched_t* s);

/* io_uring operations (io_uring.c): the result, or -errno. */
enum { RT_OP_READ, RT_OP_WRITE, RT_OP_READV, RT_OP_WRITEV, RT_OP_RECV,
       RT_OP_SEND, RT_OP_POLL };
ssize_t rt_uring_io(aco_rt_co_t* co, int op, int fd, void* buf, size_t n,
                    int flags, int64_t deadline);
int     rt_uring_accept(aco_rt_co_t* co, int fd, struct sockaddr* addr,
                        socklen_t* addrlen, int flags, int64_t deadline);

/* A co's extra block, at least buf_min bytes of buffer: NULL on ENOMEM. */
rt_extra_t* rt_extra_grow(aco_rt_co_t* co, size_t buf_min);
static inline rt_extra_t* rt_extra(aco_rt_co_t* co, size_t buf_min) {
    if (rt_likely(co->x != NULL && co->x->buf_cap >= buf_min)) return co->x;
    return rt_extra_grow(co, buf_min);
}

/* Co-local keys (keys.c).  rt_keys_exit: the running co's key destructors,
 * as it ends; then its values go.  rt_keys_free: the values of a record
 * freed without ending (no destructor runs). */
void rt_keys_exit(aco_rt_co_t* co);
void rt_keys_free(aco_rt_co_t* co);
/* sched.c: the running co ends here: its function returned, or it called
 * aco_rt_exit (its frames above are dropped, never unwound). */
__attribute__((noreturn)) void rt_co_exit(aco_rt_co_t* co);

#endif /* ACO_RT_IMPL_H */
