/* rt_impl.h - the runtime's internals, shared by its sources (not installed).
 *
 * Map of the sources, in layers: each calls only the files above it in
 * this list, or the one it is paired with (tests/check_imports.sh):
 *   timer.c     the timing wheel                          } leaves: they
 *   fd.c        the descriptor table (rt_fd.h)            } call nothing
 *   loop.c      the scheduler's loop, park/wake and the   } the kernel:
 *               wait kinds, inbox and mailboxes, hand-    } knows no
 *               offs, sleep/yield, timers, stats          } service
 *   co.c        cos and their records: spawn, start and   }
 *               end, join, detach, cancel; what pool
 *               threads exchange (batched spawns, stealing)
 *   sync.c      mutex, condition variable, semaphore, wait group
 *   chan.c      channels and select, a channel's direct waiter
 *   keys.c      co-local keys, aco_rt_exit
 *   offload.c   blocking work on helper threads (aco_rt_offload)
 *   io_epoll.c  epoll backend: readiness
 *   io_uring.c  io_uring backend: operations, and readiness for buffers
 *               that lie on a share stack; with
 *   lend.c      lent receives: io_uring's provided buffer ring and a
 *               multishot receive per descriptor, heap buffers elsewhere
 *   ready.c     the readiness way: a non-blocking try, then a wait
 *   io.c        the I/O calls, closes across threads
 *   sched.c     a scheduler made and freed: each part's init and fini
 *   pool.c      pools of scheduler threads, groups
 *   bufio.c     buffered I/O (aco_rt.h) over the I/O calls
 *   net.c       listen and dial "host:port" (names through offload.c)
 *   pthread.c   the pthread-like face (aco_rt_pthread.h) over the above
 *   rt_sys.h    the system calls on descriptors, past any hooks
 *
 * Threads.  Everything of a scheduler (its ready queue, wheel, descriptor
 * table, backend, records) is touched by its own thread only.  Another
 * thread reaches it through its inbox (an intrusive MPSC queue of rt_msg_t,
 * below), a sibling of its pool through a mailbox too (loop.c), and its
 * eventfd.  The objects that cos of several threads may share (mutex,
 * cond, sem, wait group, channel) have a spin lock over their wait queues;
 * a waiter is taken by exactly one party, whoever first flips its co's
 * claim word (rt_claim): a waker of any thread, or the co's own deadline or
 * cancel (under that lock, for a co's own waiter: rt_wq_take).  A
 * channel's direct waiter is on no queue and has no claim: it is taken out
 * of the channel under its lock (chan.c).
 */
#ifndef ACO_RT_IMPL_H
#define ACO_RT_IMPL_H

#include "aco_rt.h"
#include "../aco.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "rt_base.h"
#include "rt_wheel.h"
#include "rt_fd.h"

#pragma GCC visibility push(hidden)     /* (see rt_base.h) */

/* A message to a scheduler's inbox: a node inside a co's record. */
struct aco_rt_sched;
typedef struct rt_msg {
    struct rt_msg* next;
} rt_msg_t;
enum { RT_MSG_WAKE = 1, RT_MSG_SPAWN, RT_MSG_CANCEL, RT_MSG_FREE };

/* A co or thread elsewhere closed fd, on which cos of the receiver were
 * waiting (io.c).  In the heap, on the receiver's stack of closes (not in
 * its inbox: that tells its messages apart by their place in a co's
 * record); the receiver frees it. */
typedef struct rt_close_msg {
    struct rt_close_msg* next;
    int      fd;
    uint32_t gen;               /* the receiver's entry generation then */
} rt_close_msg_t;

/* Intrusive MPSC queue (Vyukov's): producers swap the tail, the owner pops
 * at the head.  Push is wait-free; pop may see a push half done (the tail
 * swapped, the link not yet written) and then says RT_INBOX_BUSY. */
typedef struct rt_inbox {
    rt_msg_t* head;             /* the owner's */
    char      pad_[64 - sizeof(rt_msg_t*)];
    rt_msg_t* tail;             /* the producers' */
    rt_msg_t  stub;
} rt_inbox_t;
#define RT_INBOX_BUSY ((rt_msg_t*)1)

/* What a pool thread keeps for one sibling: the records owed to it (co.c)
 * and the mailbox of its wakes there (loop.c). */
typedef struct rt_outbox {
    uint32_t  owed;
    struct rt_mbox* mb;         /* wakes to it (loop.c), made at the first */
    uint32_t  mb_next;          /* the next index to write in mb */
    uint32_t  mb_free;          /* slots of mb known free from there */
} rt_outbox_t;

/* A pool's idle signal (pool.c waits on it, in aco_rt_pool_wait): a
 * scheduler of the pool tells it when its last co ended.  (A leaf type,
 * so that the kernel tells it without calling up into pool.c.) */
typedef struct rt_idle {
    pthread_mutex_t mu;
    pthread_cond_t  cv;
    uint32_t        waiters;    /* atomic: threads in aco_rt_pool_wait */
} rt_idle_t;
static inline void rt_idle_tell(rt_idle_t* i) {
    /* (Dekker with aco_rt_pool_wait: it counts itself in, then looks at
     * the loads; the thread stored its load, then looks here) */
    if (__atomic_load_n(&i->waiters, __ATOMIC_SEQ_CST) == 0) return;
    pthread_mutex_lock(&i->mu);
    pthread_cond_broadcast(&i->cv);
    pthread_mutex_unlock(&i->mu);
}

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
    uint32_t*         lock;     /* the lock of the object whose queue it is on */
    void*             slot;     /* channels: the element (heap), see chan.c */
    union {
        struct {
            int       idx;      /* select's waiters: the case index */
            int       events;   /* epoll readiness: the events it waits for */
        };
        uint64_t      box;      /* a co's own waiter on a channel: the
                                   element, up to 8 bytes (chan.c) */
        struct {                /* a co's own waiter while an io_uring
                                   operation of its is in the kernel (it
                                   waits on no queue then): */
            int32_t   fd;       /* the operation's descriptor, */
            uint32_t  gen;      /* and its table generation */
        } io;
    };
} rt_waiter_t;

/* Wait queues: doubly linked FIFOs of waiters. */
static inline int rt_wq_empty(const aco_rt_waitq_t* q) { return q->head_ == NULL; }
static inline rt_waiter_t* rt_wq_first(const aco_rt_waitq_t* q) { return (rt_waiter_t*)q->head_; }

static inline void rt_wq_push(aco_rt_waitq_t* q, rt_waiter_t* w) {
    rt_waiter_t* tail = (rt_waiter_t*)q->tail_;
    w->next = NULL;
    w->prev = tail;
    w->q = q;
    w->lock = NULL;
    if (tail) tail->next = w; else q->head_ = w;
    q->tail_ = w;
}

static inline void rt_wq_remove(rt_waiter_t* w) {   /* w is on a queue */
    aco_rt_waitq_t* q = w->q;
    if (w->prev) w->prev->next = w->next; else q->head_ = w->next;
    if (w->next) w->next->prev = w->prev; else q->tail_ = w->prev;
    w->next = w->prev = NULL;
    /* (release: aco_rt_sched_free's look at q without the lock then sees
     * the taker's hold on the co's scheduler, rt_wq_take) */
    __atomic_store_n(&w->q, NULL, __ATOMIC_RELEASE);
}

static inline rt_waiter_t* rt_wq_head(aco_rt_waitq_t* q) {  /* NULL if empty */
    return (rt_waiter_t*)q->head_;
}

static inline rt_waiter_t* rt_wq_pop(aco_rt_waitq_t* q) {  /* NULL if empty */
    rt_waiter_t* w = (rt_waiter_t*)q->head_;
    if (w) rt_wq_remove(w);
    return w;
}

static inline void rt_wq_push_locked(aco_rt_waitq_t* q, rt_waiter_t* w, uint32_t* lock) {
    rt_wq_push(q, w);
    w->lock = lock;
}

/* Co states (2 bits: a zeroed record reads as ready, never looked at
 * before its spawn sets it). */
enum { RT_READY, RT_RUNNING, RT_PARKED, RT_DONE };
/* Co flags. */
enum {
    RT_CANCELLED  = 1 << 0,
    RT_DETACHED   = 1 << 1,
    RT_STANDALONE = 1 << 2,
    RT_IO_OP      = 1 << 3,     /* an io_uring operation is in the kernel */
    RT_REMOTE     = 1 << 4,     /* spawned by another thread: no aco yet */
    RT_FREE_LATER = 1 << 5,     /* free it when its cancel message came */
    RT_NO_START   = 1 << 6,     /* a remote spawn that found no memory */
    RT_OFFLOADING = 1 << 7,     /* a job of aco_rt_offload is in w.slot */
};
/* co->cancel_req of a started co that a thief took from a sibling whose
 * pool cancel was done when its own was not: spawned after the cancel
 * where it was spawned, so the thief's cancel_all of that request leaves
 * it (rt_take_new, rt_cancel_all). */
#define RT_SPARED 2
/* co->joiner besides a joiner co: */
#define RT_JOIN_DONE   ((aco_rt_co_t*)1)    /* finished (set by the co) */
#define RT_JOIN_DETACH ((aco_rt_co_t*)2)    /* detached */
#define RT_JOIN_TAKEN  ((aco_rt_co_t*)3)    /* finished, and the handle is
                                               its joiner's or (detached) the
                                               scheduler's to free */
/* co ended (co.c): its joiner's wake, or the mark of a finished co.  Returns
 * what the mark was (RT_JOIN_DETACH: nobody will join co, free it). */
aco_rt_co_t* rt_join_end(aco_rt_co_t* co);

/* What a co has only once it needs it (select, bigger channel elements,
 * an iovec copy): allocated once per record, kept while the record lives. */
typedef struct rt_extra {
    rt_waiter_t*  selw;         /* select's waiters */
    uint32_t**    sellocks;     /* select: its channels' locks, sorted */
    int           selw_cap;     /* of both */
    int           seln;         /* select: cases waited on, */
    int           selk;         /* and distinct locks */
    int           sel_err;      /* select: the fired case's error */
    void*         buf;          /* channel mailbox / select slots / iovecs */
    size_t        buf_cap;
    struct msghdr mh;           /* io_uring sendmsg (writev on a socket) */
    /* What few cos use, kept out of the record (memory per parked co). */
    void*         keys;         /* its co-local key values (keys.c), NULL
                                   until it sets one; freed when it ends */
    const char*   name;
    size_t        stack_req;    /* remote spawn: the stack asked for */
    struct aco_rt_group* group; /* the group it belongs to, or NULL */
    uint8_t       shield;       /* aco_rt_cancel_shield is on */
    uint8_t       kept;         /* a cancel came while it was: taken up
                                   when it goes off (co.c) */
    aco_rt_co_t*  gnext;        /* the group's list (under its lock) */
    aco_rt_co_t*  gprev;
    void*         held;         /* heap memory of a call parked now that
                                   the kernel may write (a heap lend's
                                   buffer, a bounce buffer): a co destroyed
                                   there leaves it to rt_cos_free_held */
    int           own_fd;       /* + 1, 0: none: a descriptor that the call
                                   parked now opened and closes (signal.c's
                                   signalfd): closed with a co destroyed
                                   there (rt_cos_free_all) */
} rt_extra_t;

/* A co's record.  A million parked cos each have one: what few use is in
 * the extra block (x), the small fields are packed, and the wake and cancel
 * messages tell themselves apart by address (RT_MSG_IS_CANCEL).  What a
 * waker of another thread reads and writes (the waiter, s, the claim, the
 * result, the message) comes first, together: two cache lines move between
 * the threads per wake, not three (cmsg stays right after w: see
 * RT_MSG_IS_CANCEL). */
struct aco_rt_co {
    union {
        rt_waiter_t  w;         /* its place in a wait queue */
        rt_msg_t     msg;       /* wake / spawn / free message: sent only
                                   while w is on no queue (before it starts,
                                   once a waker took it off, after its end) */
    };
#if UINTPTR_MAX == 0xffffffffu
    void*            pad_;      /* 32 bits: the waiter is 32 bytes, cmsg
                                   must be at an odd multiple of 4 */
#endif
    rt_msg_t         cmsg;      /* cancel message */
    aco_rt_sched_t*  s;
    uint8_t          claim;     /* 0 while its waiters may be taken, 1 once
                                   one was (atomic; see rt_claim) */
    uint8_t          msg_kind;  /* what msg says (RT_MSG_*) */
    uint8_t          state : 2; /* RT_READY ... RT_DONE */
    uint8_t          wait : 6;  /* parked: in what (RT_W_*: its kind in
                                   rt_wait_kinds, registered by its owner) */
    uint8_t          held;      /* mutexes it holds (sync.c; 255: that many
                                   or more, for good): a co that ends holding
                                   one keeps its record (rt_record_free), so
                                   that no later co at its address passes for
                                   the holder */
    union {
        int32_t      res;       /* what the waker says: the parked call's result */
        int32_t      io_abort;  /* io_uring, while the op is in the kernel:
                                   why it was cancelled (0: it was not) */
    };
    aco_rt_fn_t      fn;        /* (its arg is its libaco co's: aco_get_arg;
                                   w.slot holds it until that co is made) */
    union {
        aco_rt_co_t* next;      /* ready queue / free list: not parked */
        const void*  wait_obj;  /* parked: what it waits on (aco_rt_dump,
                                   join: the co) */
    };
    aco_rt_co_t*     joiner;    /* atomic: NULL, a co, RT_JOIN_DONE/DETACH/TAKEN */
    rt_extra_t*      x;
    aco_rt_timer_t   tmo;       /* the deadline of the current wait */
    union {
        struct {
            uint8_t  flags;
            uint8_t  cancel_sent;   /* atomic: RT_CANCEL_* (rt_co_cancelled) */
        };
        uint16_t     flags_cancel;  /* both, for rt_co_cancelled's one load */
    };
    uint8_t          started;   /* atomic: 0 while it waits in a pool
                                   thread's newq (others may take it) */
    uint8_t          cancel_req;    /* atomic: cancelled before it started
                                       (1); once started, RT_SPARED or 0 */
    uint32_t         slot;      /* index in s->cos */
    uint32_t         priv_cap;  /* the private buffer after the record: room
                                   (what the co asked for is in its last 4
                                   bytes: rt_priv_size) */
    uint32_t         rec_sz;    /* bytes of the whole allocation */
};
/* A record is 16-aligned (aco_create_in): msg is at an even multiple of
 * its size, cmsg at an odd one. */
#define RT_MSG_IS_CANCEL(m) (((uintptr_t)(m) & sizeof(rt_msg_t)) != 0)
_Static_assert(offsetof(aco_rt_co_t, msg) % (2 * sizeof(rt_msg_t)) == 0 &&
               offsetof(aco_rt_co_t, cmsg) % (2 * sizeof(rt_msg_t)) == sizeof(rt_msg_t),
               "drain tells msg from cmsg by the address");

/* One allocation (aco_alloc) per co: the record, its private buffer
 * (aco_rt_spawn_opts_t.private_size), then its libaco co with a save stack
 * of its own in the rest (aco_create_in). */
#define RT_PRIV_OFF ((sizeof(aco_rt_co_t) + 15) & ~(size_t)15)
static inline void* rt_priv(aco_rt_co_t* co) { return (char*)co + RT_PRIV_OFF; }
static inline size_t rt_aco_off(const aco_rt_co_t* co) { return RT_PRIV_OFF + co->priv_cap; }
static inline aco_t* rt_aco(const aco_rt_co_t* co) { return (aco_t*)((char*)co + rt_aco_off(co)); }
/* The private buffer's size as asked (private_size) sits in its room's
 * last 4 bytes, past what the co may touch (memory per parked co): room
 * for n bytes is rt_priv_room(n). */
static inline size_t rt_priv_room(size_t n) { return n ? n + sizeof(uint32_t) : 0; }
static inline uint32_t rt_priv_size(aco_rt_co_t* co) {
    uint32_t n = 0;
    if (co->priv_cap) memcpy(&n, (char*)rt_priv(co) + co->priv_cap - sizeof(n), sizeof(n));
    return n;
}
static inline void rt_priv_set_size(aco_rt_co_t* co, size_t n) {
    uint32_t v = (uint32_t)n;
    if (co->priv_cap) memcpy((char*)rt_priv(co) + co->priv_cap - sizeof(v), &v, sizeof(v));
}

/* ------------------------------------------------------------------------ */
/* Backends                                                                 */
/* ------------------------------------------------------------------------ */

struct pollfd;
typedef struct rt_backend {
    const char* name;
    int  (*init)(aco_rt_sched_t* s, const aco_rt_opts_t* o);
    void (*fini)(aco_rt_sched_t* s);
    /* Wait up to timeout ns (0: don't wait, -1: no limit) and wake the cos
     * whose I/O finished.  0 or -errno. */
    int  (*poll)(aco_rt_sched_t* s, int64_t timeout);
    /* Wait for fd's readiness (poll events): revents or -errno. */
    int  (*wait_fd)(aco_rt_co_t* co, int fd, int events, int64_t deadline);
    /* Wait until one of p[0..n) may be ready (aco_rt_poll: n >= 1, none
     * of them found ready just now; fd < 0 is skipped; p may lie on the
     * co's share stack: read before the co parks, written only once it
     * runs again; every revents is 0, from the look that found none
     * ready).  0: look again; k > 0: k entries' descriptors were closed
     * while it waited (aco_rt_close), their revents now POLLNVAL; or -errno (-ETIMEDOUT, -ECANCELED, -ENOMEM,
     * or the backend's error registering a descriptor). */
    int  (*wait_many)(aco_rt_co_t* co, struct pollfd* p, unsigned n, int64_t deadline);
    /* The k-th descriptor co waits on, parked in wait_many, or -1 past
     * the last (a close on another thread has it looked at: io.c). */
    int  (*poll_fd)(const aco_rt_co_t* co, unsigned k);
    /* fd is being closed: wake its waiters with -EBADF, forget it.  gone:
     * it may be closed already (by another thread), and its number taken
     * by another file. */
    void (*closing)(aco_rt_sched_t* s, int fd, int gone);
    /* Another thread closed fd (or is closing it) and may have missed our
     * waiters: 1 if what they wait on is no longer the file under the
     * number (closed, or another file now), 0 if it still is or it cannot
     * tell (never a false 1: that would fail a wait on a new file). */
    int  (*stale)(aco_rt_sched_t* s, int fd);
} rt_backend_t;

extern const rt_backend_t rt_backend_epoll;
extern const rt_backend_t rt_backend_uring;     /* name NULL: not built */



#define RT_GUESSES 64      /* save stack guesses a scheduler keeps (power of 2) */

/* A batch of new cos in a pool thread's newq (a chain through co->next):
 * taken whole, so that a thief moves a batch under the lock without
 * touching the records (co.c). */
#define RT_NQ_BATCHES 64
typedef struct rt_nq_batch {
    aco_rt_co_t* head;
    aco_rt_co_t* tail;
    uint32_t     n;
} rt_nq_batch_t;

/* A watched line (rt_watch_set): a co parked in an object of a kind's
 * (a channel) whose wake a thread of another scheduler writes into the
 * object's own first cache line, the one it took the lock in, instead of
 * sending it in a mailbox: across threads a wake then moves that one line
 * and no other.  The co's scheduler looks at the line's state byte
 * whenever it looks for messages (its spin, drain, the look before it
 * sleeps): once the waker has set RT_WATCH_HANDED there (seq_cst, then
 * rt_notify), the kind's pick wakes the co from the line, without its
 * lock; its end puts the object back in order later, off the hand-over's
 * way, under the lock (the kind's next locked entry on this scheduler, or
 * the loop's next drain).  One line per scheduler: a co that parks while
 * another's line is watched is woken the usual way. */
#define RT_WATCH_HANDED 2
struct aco_rt_sched;
typedef struct rt_watch_ops {
    void (*pick)(struct aco_rt_sched* s);   /* wake the co from the line */
    void (*end)(struct aco_rt_sched* s);    /* after pick: tidy (lock) */
} rt_watch_ops_t;
typedef struct rt_watch {
    const uint8_t*        state;            /* the line's state byte, or NULL */
    void*                 obj;              /* the object (a channel) */
    struct aco_rt_co*     co;               /* the co it is for */
    const rt_watch_ops_t* ops;
    uint8_t               picked;           /* pick ran, end has not */
} rt_watch_t;

/* A scheduler: one sub-struct per part, each written by its owner alone
 * (the files named; tests/check_imports.sh holds the table and checks
 * it), read by the others where they must.  What other threads reach is
 * apart, in cache lines of its own (a shared line would move at every
 * switch). */
typedef struct rt_run {                 /* loop.c: the loop and its co */
    aco_t*              main_co;
    aco_rt_co_t*        cur;            /* running co, NULL in the loop */
    aco_rt_co_t*        rq_head;        /* ready queue */
    aco_rt_co_t*        rq_tail;
    unsigned            since_poll;     /* cos run (resumed by the loop or
                                           handed off to) since the loop
                                           last looked for I/O, timers and
                                           other threads (loop.c) */
    int                 checked;        /* libaco's checked mode is on */
    int                 own_main;       /* main_co is ours to destroy */
    int                 running;
    int                 evfd;           /* eventfd: wakes the thread asleep */
    int                 spin_ns;        /* how long an idle loop spins
                                           next (loop.c's idle: it adapts) */
    unsigned            spin_skips;     /* idles at the least spin */
    int                 others_only;    /* it sleeps with every co waiting on
                                           another co: only another
                                           scheduler can end that (its
                                           cos, or its going: -EDEADLK) */
    aco_rt_co_t*        starved_head;   /* ready cos that found no memory to
                                           save the frames on their share
                                           stack: retried now and then */
    aco_rt_co_t*        starved_tail;
    unsigned            starved_rounds; /* pauses in a row that ran no co */
    uint64_t            starved_seen;   /* st.switches at the last retry */
    rt_watch_t          watch;          /* the one line it watches */
} rt_run_t;

typedef struct rt_recs {                /* co.c: records and stacks */
    aco_share_stack_t** stacks;
    unsigned            nstacks;
    unsigned            next_stack;
    size_t              stack_size;
    aco_rt_co_t**       cos;            /* every live record, for dump/free */
    uint32_t            ncos, cos_cap;
    aco_rt_co_t*        free_recs;      /* finished records with their aco */
    uint32_t            nfree;
    aco_rt_co_t*        free_solo;      /* the same, standalone: a stack pool */
    uint32_t            nsolo;
    struct {                            /* the save stack a new record gets: */
        uintptr_t       fn;             /* what the last co of this function */
        uint32_t        need;           /* needed (co.c, rt_save_size) */
    }                   guess[RT_GUESSES];
    aco_rt_co_t*        bare;           /* records without a co, for
                                           stealable spawns */
    void**              held;           /* what destroyed cos' parked calls
                                           held (rt_extra_t.held), freed
                                           after the backend went */
    uint32_t            nheld;
} rt_recs_t;

typedef struct rt_pooled {              /* co.c: a pool thread's exchange */
    struct aco_rt_pool* pool;           /* its pool, or NULL */
    rt_idle_t*          idle;           /* its pool's idle signal */
    aco_rt_sched_t**    sibs;           /* its pool's schedulers, idx its
                                           own place among them */
    unsigned            idx;
    struct rt_outbox*   outbox;         /* one for each sibling */
    unsigned            noutbox;
    int                 out_pending;    /* nq_priv has some */
    uint32_t            owed;           /* records it owes its siblings in
                                           all (stolen, not yet given back;
                                           each one's in outbox[].owed) */
    aco_rt_co_t*        nq_priv_head;   /* new cos not yet in the newq */
    aco_rt_co_t*        nq_priv_tail;
    uint32_t            nq_priv_n;
    uint32_t            cancel_seen;    /* ask.cancel_gen done (atomic for
                                           others) */
} rt_pooled_t;

typedef struct rt_be {                  /* io_epoll.c, io_uring.c: the backend */
    const rt_backend_t* ops;            /* (set by its init) */
    void*               data;
    uint8_t             left_ops;       /* its fini left operations in the
                                           kernel (a hung file system's):
                                           memory they write is never freed */
} rt_be_t;

typedef struct rt_reg {                 /* io.c */
    struct aco_rt_sched* reg_next;      /* every scheduler of the process */
    struct aco_rt_sched* reg_prev;      /* (rt_sched_reg, under its lock) */
} rt_reg_t;

typedef struct rt_lend_s {              /* lend.c */
    struct rt_lend_pool* pool;          /* its buffer ring, or NULL */
    uint8_t             tried;          /* the ring was tried (it has one if
                                           pool is set) */
} rt_lend_t;

/* Reached from other threads: */
typedef struct rt_msgs {                /* loop.c and co.c (the kernel) */
    _Alignas(64) rt_inbox_t inbox;      /* wakes, spawns, cancels, frees
                                           (head and tail 64 bytes apart) */
    uint32_t            senders;        /* atomic: rt_sends and holds under
                                           way (in the tail's line, which
                                           they write anyway), and
                                           RT_FREEING once
                                           aco_rt_sched_free began */
    _Alignas(64) uint32_t sleeping;     /* atomic: 1 while it may sleep */
    struct rt_mbox*     mb_in;          /* atomic: the mailboxes of the
                                           siblings that wake cos here */
} rt_msgs_t;
#define RT_FREEING (1u << 31)

typedef struct rt_load_s {              /* co.c (loop.c: load) */
    _Alignas(64) uint32_t load;         /* atomic: cos alive (written by its
                                           thread only) */
    uint32_t            sent;           /* atomic: spawns on their way here */
    uint64_t            mv_begun;       /* atomic: moves of cos into sent */
    uint64_t            mv_ended;       /* (from other threads) begun and
                                           ended: aco_rt_pool_wait looks
                                           for a quiet moment (pool.c) */
} rt_load_t;

typedef struct rt_closes {              /* io.c */
    rt_close_msg_t*     list;           /* atomic: closes from other threads
                                           (a stack: io.c) */
    rt_close_msg_t      recheck;        /* on list when recheck_on (fd -1):
                                           check the waits (io.c) */
    uint32_t            recheck_on;     /* atomic */
} rt_closes_t;

typedef struct rt_newq {                /* co.c: cos spawned here, not yet
                                           started, that idle siblings may
                                           take: ring[] under lock */
    _Alignas(64) uint32_t lock;
    uint32_t            n;              /* atomic: cos in ring[] */
    uint32_t            first;          /* ring[]: batches, */
    uint32_t            count;          /* oldest first */
    rt_nq_batch_t       ring[RT_NQ_BATCHES];
    aco_rt_co_t*        gifts;          /* atomic: records without a co
                                           that thieves gave back */
} rt_newq_t;

typedef struct rt_fbufs {               /* file.c: registered buffers */
    struct rt_fbuf*     r;              /* by address, none overlapping */
    unsigned            n;
    int                 pinned;         /* the ring has them (else kept
                                           for the errors only) */
    uint32_t            inflight;       /* transfers into them in the ring */
} rt_fbufs_t;

typedef struct rt_asks {                /* loop.c, co.c: what others ask */
    _Alignas(64) int    stop;           /* atomic */
    uint32_t            cancel_gen;     /* atomic: bumped to cancel every co */
} rt_asks_t;

struct aco_rt_sched {
    /* This thread's alone: what every switch writes first, together. */
    rt_run_t            run;
    aco_rt_stats_t      st;             /* counters: each its owner's
                                           (check_imports.sh) */
    rt_recs_t           recs;
    rt_pooled_t         pooled;         /* (cancel_seen: read by siblings) */
    rt_be_t             backend;
    rt_lend_t           lend;
    rt_fbufs_t          fbuf;
    uint32_t            offloads;       /* offload.c: cos waiting for a
                                           helper thread: not a deadlock */
    /* The wheel's first line is written at every timer armed: apart from
     * cancel_seen above.  After it, what other threads' closes read. */
    _Alignas(64) rt_wheel_t wheel;      /* timer.c */
    rt_fdtab_t          fds;            /* fd.c */
    rt_reg_t            reg;
    rt_msgs_t           mail;
    rt_load_t           ld;
    rt_closes_t         cl;
    rt_newq_t           newq;
    rt_asks_t           ask;
};

/* Schedulers alive in the process (atomic): with one, a co that waits on
 * another co while nothing else can wake it is a deadlock (-EDEADLK). */
extern uint32_t rt_nsched;

extern RT_TLS aco_rt_sched_t* rt_tls_sched;

static inline aco_rt_co_t* rt_self(void) {
    aco_rt_sched_t* s = rt_tls_sched;
    return s ? s->run.cur : NULL;
}

static inline int64_t rt_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* A cancel from another thread travels as a message to the co's
 * scheduler (cancel_sent RT_CANCEL_SENT), which takes it when its loop
 * runs.  A co that never waits never lets its loop run: so its calls take
 * a cancel on its way themselves (RT_CANCEL_TAKEN; the message, when it
 * comes, then does nothing but say it came: RT_CANCEL_DONE). */
enum { RT_CANCEL_NONE, RT_CANCEL_SENT, RT_CANCEL_DONE, RT_CANCEL_TAKEN };
#define RT_CANCEL_ON_WAY(v) ((v) & 1)      /* SENT, TAKEN: the message is */
int rt_cancel_take(aco_rt_co_t* co);        /* co.c */

/* Non-zero if the running co is cancelled: what every call looks at.  One
 * load of flags and cancel_sent together (atomic: another thread may be
 * setting cancel_sent): neither RT_CANCELLED nor a message on its way is
 * the common case; the rest is rt_cancel_take's. */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define RT_CANCEL_MASK ((uint16_t)(RT_CANCELLED | 1 << 8))
#else
#define RT_CANCEL_MASK ((uint16_t)(RT_CANCELLED << 8 | 1))
#endif
static inline int rt_co_cancel_maybe(aco_rt_co_t* co) {     /* (that load alone) */
    return __atomic_load_n(&co->flags_cancel, __ATOMIC_RELAXED) & RT_CANCEL_MASK;
}
static inline int rt_co_cancelled(aco_rt_co_t* co) {
    if (rt_likely(!rt_co_cancel_maybe(co))) return 0;
    return rt_cancel_take(co);
}

/* May the running co block now?  0, or the error to return at once:
 * -ECANCELED (cancelled), -ETIMEDOUT (deadline passed: -1 is no deadline,
 * every other negative one is long past). */
static inline int rt_may_block(aco_rt_co_t* co, int64_t deadline) {
    if (rt_unlikely(rt_co_cancelled(co))) return -ECANCELED;
    if (deadline != -1 && (deadline <= 0 || deadline <= rt_now())) return -ETIMEDOUT;
    return 0;
}

/* Park the running co until rt_wake(co, res): returns res.  The caller has
 * put it where a waker finds it; abort undoes that when the deadline
 * passes or the co is cancelled (and then wakes it, now or later). */
static inline int rt_park(aco_rt_co_t* co, int wait, const void* obj, int64_t deadline);
static inline void rt_wake(aco_rt_co_t* co, int res);
void rt_tmo_fire(aco_rt_timer_t* t);        /* a co's deadline passed */
/* What a parked co waits in: 6 bits of its record (memory per parked co),
 * an index in rt_wait_kinds.  A kind's owner registers it (rt_wait_kind,
 * from a constructor of its file: no co can wait in a kind whose file is
 * not linked): its name for aco_rt_dump, how a co leaves it early (abort,
 * with err: deadline, cancel), and, if the co is destroyed there by
 * aco_rt_sched_free, what must be undone besides taking its waiter off a
 * queue (forget).  So the kernel knows no kind but its own (join, sleep). */
enum {
    RT_W_JOIN, RT_W_SLEEP,                  /* the kernel's */
    RT_W_CHAN_SEND, RT_W_CHAN_RECV, RT_W_SELECT,
    RT_W_CHAN_SEND_D, RT_W_CHAN_RECV_D,     /* a channel's direct waiter (chan.c) */
    RT_W_MUTEX, RT_W_COND, RT_W_SEM, RT_W_WG, RT_W_GROUP,
    RT_W_FD_IN, RT_W_FD_OUT, RT_W_OFFLOAD, RT_W_LEND,
    RT_W_UR_OP,     /* + RT_OP_*: an io_uring operation */
    RT_W_UR_ACCEPT = RT_W_UR_OP + 9,
    RT_W_POLLN,                             /* aco_rt_poll: epoll, */
    RT_W_UR_POLLN,                          /* io_uring */
    RT_W_UR_FILE, RT_W_UR_META,             /* file.c's io_uring operations */
    RT_W_OFFLOAD_FILE,                      /* file.c's helper thread work */
    RT_W_N
};
#define RT_W_MAX 64
_Static_assert(RT_W_N <= RT_W_MAX, "co->wait has 6 bits");
typedef struct rt_wait_kind {
    const char* name;
    void (*abort)(aco_rt_co_t* co, int err);
    void (*forget)(aco_rt_co_t* co);            /* NULL: nothing to undo */
} rt_wait_kind_t;
extern const rt_wait_kind_t* rt_wait_kinds[RT_W_MAX];
void rt_wait_kind(unsigned id, const rt_wait_kind_t* k);
/* Registers kinds ids[0..n) as k[0..n) when the program starts (priority
 * 101: before the program's own constructors, which may use the runtime
 * already, in a static link too). */
#define RT_WAIT_KINDS(tag, ...)                                                 \
    __attribute__((constructor(101))) static void tag##_wait_kinds(void) {     \
        static const struct { unsigned id; rt_wait_kind_t k; } t_[] = {__VA_ARGS__}; \
        for (size_t i_ = 0; i_ < sizeof(t_) / sizeof(t_[0]); i_++)             \
            rt_wait_kind(t_[i_].id, &t_[i_].k);                                 \
    }
void rt_abort(aco_rt_co_t* co, int err);
/* abort for cos on a wait queue of their own scheduler (co->w): unlink
 * and wake with err. */
void rt_abort_waitq(aco_rt_co_t* co, int err);
/* abort for cos on the queue of a shared object (co->w, under w.lock):
 * claim, unlink, wake with err; nothing if a waker claimed it first. */
void rt_abort_shared(aco_rt_co_t* co, int err);
/* Push co's waiter w on q of the object locked by lock (held). */
static inline void rt_wq_push_locked(aco_rt_waitq_t* q, rt_waiter_t* w, uint32_t* lock);


static inline void rt_rq_push(aco_rt_sched_t* s, aco_rt_co_t* co) {
    co->next = NULL;
    if (s->run.rq_tail) s->run.rq_tail->next = co; else s->run.rq_head = co;
    s->run.rq_tail = co;
    s->st.cos_ready++;
}

/* A ready co set aside, off the queue but still counted ready (loop.c: no
 * memory for the frames on its share stack), and all of them back on the
 * queue's tail, in order. */
static inline void rt_rq_aside(aco_rt_sched_t* s, aco_rt_co_t* co) {
    co->next = NULL;
    if (s->run.starved_tail) s->run.starved_tail->next = co; else s->run.starved_head = co;
    s->run.starved_tail = co;
    s->st.cos_ready++;
}
static inline void rt_rq_unaside(aco_rt_sched_t* s) {
    aco_rt_co_t* co = s->run.starved_head;
    s->run.starved_head = s->run.starved_tail = NULL;
    while (co) {
        aco_rt_co_t* next = co->next;
        s->st.cos_ready--;
        rt_rq_push(s, co);
        co = next;
    }
}

/* Take co's current wait: 1 if the caller won it (and must wake co), 0 if
 * someone else did.  The winner wakes it; the others leave it alone. */
static inline int rt_claim(aco_rt_co_t* co) {
    return rt_xchg(&co->claim, (uint8_t)1) == 0;
}
/* Before a co puts its waiter(s) where other threads can take them. */
static inline void rt_claim_reset(aco_rt_co_t* co) {
#ifdef ACO_RT_NO_THREADS
    co->claim = 0;
#else
    __atomic_store_n(&co->claim, (uint8_t)0, __ATOMIC_RELAXED);
#endif
}

/* A waker of a co of another thread's scheduler s holds s from taking the
 * co (under the object's lock) to the end of its wake (rt_wake_remote_to,
 * rt_wake_remote_box let go): aco_rt_sched_free waits for every hold and
 * send before it frees a co's record (loop.c).  rt_hold_try refuses once
 * s frees (0): a channel's direct waiter is then left where it is, for
 * s's free to take off (the channel outlives it then: chan_free says
 * -EBUSY).  The count is s's (a word other threads write, in a line
 * that s's idle loop reads): a waker of s's own pool holds nothing, as
 * a pool's schedulers are freed only once all its threads have passed
 * its barrier (pool.c): the two locked instructions on a line the other
 * thread reads were a third of a cross-thread hand-off (xpingpong).
 * Past the barrier the threads free their schedulers at once, and a
 * free wakes too (a destroyed group member's leave wakes the group's
 * joiners, on a sibling that frees its own cos meanwhile): so each
 * thread leaves its pool first (rt_pooled_leave: pool NULL), and holds
 * as a stranger does from then on.  (pool is read by other threads:
 * atomic, relaxed: a stranger's answer is no either way.) */
void rt_hold_far(aco_rt_sched_t* s);
int rt_hold_try_far(aco_rt_sched_t* s);
void rt_hold_end_far(aco_rt_sched_t* s);
static inline int rt_hold_sibling(const aco_rt_sched_t* s) {
    const aco_rt_sched_t* me = rt_tls_sched;
    return me != NULL && me->pooled.pool != NULL &&
           me->pooled.pool == __atomic_load_n(&s->pooled.pool, __ATOMIC_RELAXED);
}
static inline void rt_hold(aco_rt_sched_t* s) {
    if (!rt_hold_sibling(s)) rt_hold_far(s);
}
static inline int rt_hold_try(aco_rt_sched_t* s) {
    return rt_hold_sibling(s) || rt_hold_try_far(s);
}
static inline void rt_hold_end(aco_rt_sched_t* s) {
    if (!rt_hold_sibling(s)) rt_hold_end_far(s);
}
static inline void rt_hold_if_remote(aco_rt_sched_t* s) {
    if (s != rt_tls_sched) rt_hold(s);
}

/* Pop the first waiter of q that the caller can claim (lock held): the
 * others were taken by their deadline or another case of their select.
 * A co of another thread's scheduler comes held (rt_hold).
 *
 * A co's own waiter (not a select's) is on this queue alone, and its
 * deadline and cancel run on its thread (rt_abort_shared): on this one, a
 * plain load and store of the claim; on another, they race this take,
 * and claim first, without the object (once a waker of another thread
 * has won, the program may free it before the co runs: a condition
 * variable destroyed after its broadcast), then take the lock to take the
 * waiter off: an exchange here, and a waiter whose claim is lost stays
 * for its abort to take off.  A select's waiters, one per case, are
 * claimed with an exchange too, and one whose claim is lost (another
 * case won) stays queued for its co to take off: until then the channel
 * is not free to free (aco_rt_chan_free says -EBUSY), so the co never
 * enters a freed one. */
rt_waiter_t* rt_wq_take_from(rt_waiter_t* w);    /* (loop.c) */
/* (an empty queue, the common case of a rendezvous's receive, and a
 * first waiter that is a co of this thread's, a wake's, are a few loads
 * and stores here, in the caller: the loop is out of line, so that no
 * compiler makes one function of both, which saved five registers on
 * every take: a mutex's hand-off called it so) */
static inline __attribute__((always_inline)) rt_waiter_t* rt_wq_take(aco_rt_waitq_t* q) {
    rt_waiter_t* w = rt_wq_head(q);
    if (w == NULL) return NULL;
    aco_rt_co_t* co = w->co;
    if (rt_likely(w == &co->w && co->s == rt_tls_sched && rt_load(&co->claim) == 0)) {
        rt_wq_remove(w);
        rt_store(&co->claim, (uint8_t)1);
        return w;
    }
    return rt_wq_take_from(w);
}

/* Wake co of another thread's scheduler, held by the caller (rt_hold: a
 * take did it), which the wake lets go. */
void rt_wake_remote(aco_rt_co_t* co, int res);
/* The same, to (co->s, which the caller knew without reading the record:
 * through a mailbox, the waker touches none of it). */
void rt_wake_remote_to(aco_rt_co_t* co, aco_rt_sched_t* to, int res);
/* rt_wake_remote_to for a co parked in a channel receive whose element (n
 * bytes, up to 8) goes to its w.box: written there by co's thread when the
 * wake travels in a mailbox. */
void rt_wake_remote_box(aco_rt_co_t* co, aco_rt_sched_t* to, const void* elem, size_t n);

/* Disarm the deadline of co's wait, if armed (its wait goes on without). */
static inline void rt_tmo_stop(aco_rt_co_t* co) {
    if (rt_wheel_del(&co->s->wheel, &co->tmo)) co->s->st.timers--;
}

/* rt_wake of a co known parked without a deadline armed: no call. */
static inline void rt_wake_untimed(aco_rt_co_t* co, int res) {
    aco_rt_sched_t* s = co->s;
    co->res = res;
    co->state = RT_READY;
    co->wait_obj = NULL;
    s->st.cos_parked--;
    rt_rq_push(s, co);
}

/* Make a parked co ready, res the result of its call.  From co's own
 * thread only (rt_wake_any from any). */
static inline void rt_wake(aco_rt_co_t* co, int res) {
    aco_rt_sched_t* s = co->s;
    if (rt_unlikely(co->state != RT_PARKED)) return;
    if (rt_timer_armed(&co->tmo)) {
        rt_wheel_del(&s->wheel, &co->tmo);
        s->st.timers--;
    }
    rt_wake_untimed(co, res);
}

/* Wake co, which the caller claimed, from any thread (held if it is
 * another thread's: rt_hold_if_remote, or the take). */
static inline void rt_wake_any(aco_rt_co_t* co, int res) {
    if (rt_likely(co->s == rt_tls_sched)) rt_wake(co, res);
    else rt_wake_remote(co, res);
}

/* rt_park in two: all but the switch, then the switch (rt_switch_out(co);
 * co->res), for a caller whose frames must stay small while it waits. */
static inline void rt_park_begin(aco_rt_co_t* co, int wait, const void* obj,
                                 int64_t deadline) {
    aco_rt_sched_t* s = co->s;
    co->state = RT_PARKED;
    co->wait = (uint8_t)wait;
    co->wait_obj = obj;
    s->st.cos_parked++;
    if (deadline != -1) {            /* co->tmo.fn_ is rt_tmo_fire */
        rt_wheel_add(&s->wheel, &co->tmo, deadline);
        s->st.timers++;
    }
}

static inline aco_rt_co_t* rt_rq_pop(aco_rt_sched_t* s) {
    aco_rt_co_t* co = s->run.rq_head;
    if (co) {
        s->run.rq_head = co->next;
        if (s->run.rq_head == NULL) s->run.rq_tail = NULL;
        s->st.cos_ready--;
    }
    return co;
}

/* The loop looks for I/O, timers and other threads' messages after every
 * RT_POLL_EVERY cos it ran (resumed, or handed off to). */
#define RT_POLL_EVERY 64

/* co, the ready queue's head, runs next, handed off to: off the queue and
 * counted as running. */
static inline aco_rt_co_t* rt_handoff_go(aco_rt_sched_t* s, aco_rt_co_t* co) {
    rt_rq_pop(s);
    s->run.since_poll++;
    s->run.cur = co;
    co->state = RT_RUNNING;
    s->st.switches++;
    s->st.handoffs++;
    return co;
}

aco_rt_co_t* rt_handoff_take(aco_rt_sched_t* s, aco_rt_co_t* co);     /* loop.c */

/* Hand-offs.  A co that parks or yields runs the next ready co itself
 * (aco_yield_to) instead of going back to the loop, which would only
 * resume that same co: one switch instead of two, and no pass through the
 * loop.  The order is the loop's (the ready queue's head, FIFO: a hand-off
 * never jumps the queue), and hand-offs count among the loop's resumes:
 * after RT_POLL_EVERY cos run, hand-offs or not, the co goes back to the
 * loop.  None while new cos wait to be published to the thread's newq
 * for thieves (the loop does it after each resume) or a stop is asked.
 * Nor to a co of the caller's own share stack: the frames are copied
 * either way, and only the loop knows the caller's live bytes exactly
 * (aco_resume_reserve would measure them from here, with room to spare:
 * a save stack of the guessed size would be outgrown).  In checked mode
 * every hand-off goes through libaco's hand-off co: aco_resume_reserve
 * makes it, or says ENOMEM (the loop then resumes the co, which needs
 * none).
 * Returns the co to hand off to, or NULL: the loop's turn. */
static inline aco_rt_co_t* rt_handoff_next(aco_rt_sched_t* s) {
    aco_rt_co_t* co = s->run.rq_head;
    if (rt_unlikely(co == NULL || co == s->run.cur || s->run.since_poll >= RT_POLL_EVERY - 1 ||
                    s->pooled.out_pending || rt_load(&s->ask.stop)))
        return NULL;
    aco_t* a = rt_aco(co);
    /* It holds its stack (another stack than the caller's): nothing to
     * copy, no memory needed. */
    if (rt_likely(a->share_stack->owner == a && !s->run.checked)) return rt_handoff_go(s, co);
    return rt_handoff_take(s, co);
}

/* The running co stops (parked, or queued again): the next ready co runs,
 * straight from here when it may (aco_yield_to: one switch, not two
 * through the loop), else the loop picks.  Inline (as aco_yield is): the
 * co continues right here when resumed, from either. */
static inline void rt_switch_out(aco_rt_co_t* me) {
    aco_rt_co_t* next = rt_handoff_next(me->s);
    if (next) aco_yield_to(rt_aco(next));
    else aco_yield();
}

static inline int rt_park(aco_rt_co_t* co, int wait, const void* obj, int64_t deadline) {
    rt_park_begin(co, wait, obj, deadline);
    rt_switch_out(co);
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

/* co.c: spawn on s (NULL: the calling thread's), any thread's.  hold: the
 * co is made, with its extra block, but neither queued nor sent until
 * rt_spawn_go (a group links it in between: nothing of it may run first). */
aco_rt_co_t* rt_spawn(aco_rt_sched_t* s, aco_rt_fn_t fn, void* arg,
                      const aco_rt_spawn_opts_t* opts, int hold);
void rt_spawn_go(aco_rt_co_t* co);
/* co.c: a co of the calling pool thread's scheduler that an idle
 * sibling may take before it starts (aco_rt_pool_spawn from the pool). */
aco_rt_co_t* rt_spawn_stealable(aco_rt_fn_t fn, void* arg, const aco_rt_spawn_opts_t* opts);
/* co.c: send co a cancel through its scheduler's inbox (any thread). */
void rt_cancel_async(aco_rt_co_t* co);
/* Called by aco_rt_sched_free (rt_cos_free_all) for each co it destroys,
 * finished or not (atomic; pthread.c sets it: a co's pt_t goes with it). */
extern void (*rt_co_dropped)(aco_rt_co_t* co);
/* What services hang on a co and the kernel must undo when it ends or is
 * destroyed: each set by its service's constructor (RT_HOOK: set whenever
 * a co can have such a thing), called only for cos that have it. */
extern void (*rt_hook_keys_exit)(aco_rt_co_t* co);      /* co->x->keys: its destructors,
                                                           in the co as it ends (keys.c) */
extern void (*rt_hook_group_leave)(aco_rt_co_t* co);    /* co->x->group (pool.c) */
extern void (*rt_hook_offload_forsake)(aco_rt_co_t* co); /* RT_OFFLOADING, the co
                                                           destroyed (offload.c) */
#define RT_HOOK(hook, fn) \
    __attribute__((constructor(101))) static void hook##_set(void) { hook = fn; }  /* (as above) */
/* The kernel's part of a scheduler (loop.c): made (0 or -errno), its cos
 * dropped before the backend goes, then the rest freed (sched.c calls
 * them in order). */
int  rt_kernel_init(aco_rt_sched_t* s, const aco_rt_opts_t* o);
void rt_kernel_drop_cos(aco_rt_sched_t* s);
void rt_kernel_fini(aco_rt_sched_t* s);
/* loop.c: ask s to cancel every co it has (from any thread: a pool's
 * aco_rt_pool_wait(CANCEL)). */
void rt_cancel_ask(aco_rt_sched_t* s);
/* co.c: the records' part of a scheduler (rt_kernel_init's, _fini's). */
int  rt_recs_init(aco_rt_sched_t* s, const aco_rt_opts_t* o);
void rt_recs_fini(aco_rt_sched_t* s);
/* co.c: s becomes thread idx of pool p (pool.c, as the thread starts):
 * its siblings sibs[0..n), the pool's idle signal, an outbox for each
 * sibling (none without memory: spawns to them then go one by one);
 * leave: before s is freed, the outboxes go. */
void rt_pooled_join(aco_rt_sched_t* s, struct aco_rt_pool* p, rt_idle_t* idle,
                    aco_rt_sched_t** sibs, unsigned idx, unsigned n);
void rt_pooled_leave(aco_rt_sched_t* s);
/* loop.c: wake s's thread if it sleeps (after something was sent). */
void rt_notify(aco_rt_sched_t* s);

/* Watch obj's line for co, parked (or about to) on s, its own scheduler:
 * 1, or 0 if s watches another line already. */
static inline int rt_watch_set(aco_rt_sched_t* s, void* obj, const uint8_t* state,
                               aco_rt_co_t* co, const rt_watch_ops_t* ops) {
    if (s->run.watch.state) return 0;
    s->run.watch.obj = obj;
    s->run.watch.co = co;
    s->run.watch.ops = ops;
    s->run.watch.picked = 0;
    s->run.watch.state = state;
    return 1;
}
/* The line is no longer watched (the kind's end, or its co left another
 * way: its deadline, a waker of its own thread). */
static inline void rt_watch_clear(aco_rt_sched_t* s) {
    s->run.watch.state = NULL;
    s->run.watch.obj = NULL;
    s->run.watch.co = NULL;
    s->run.watch.picked = 0;
}
/* The kind's pick has woken the co: end is still to come. */
static inline void rt_watch_picked(aco_rt_sched_t* s) { s->run.watch.picked = 1; }
/* Is a hand-over waiting in the watched line? (seq_cst: the look before
 * a sleep, after the sleeping flag's store) */
static inline int rt_watch_due(const aco_rt_sched_t* s) {
    const uint8_t* st = s->run.watch.state;
    return st && !s->run.watch.picked &&
           (__atomic_load_n(st, __ATOMIC_SEQ_CST) & RT_WATCH_HANDED);
}
/* loop.c: put m, co->msg (kind: RT_MSG_*) or co->cmsg (RT_MSG_CANCEL),
 * in s's inbox and wake s's thread (from any thread). */
void rt_send(aco_rt_sched_t* s, rt_msg_t* m, int kind);
void rt_sched_quiesce(aco_rt_sched_t* s);

/* Records (co.c).  A new record, zeroed up to its libaco co, with room
 * for a private buffer of priv bytes and a save stack of save (NULL:
 * ENOMEM); rt_rec_init ties it to s; rt_rec_free frees one without a
 * libaco co (or whose co is gone). */
aco_rt_co_t* rt_rec_new(size_t priv, size_t save);
static inline void rt_rec_init(aco_rt_sched_t* s, aco_rt_co_t* co) {
    co->s = s;
    co->w.co = co;
    co->tmo.fn_ = rt_tmo_fire;      /* its deadlines, set once */
}
void rt_rec_free(aco_rt_co_t* co);
/* Records above this save stack are not made (aco_rt.h: ENOMEM). */
#define RT_SAVE_MAX ((size_t)1 << 30)
/* May a kept record serve a spawn with opts?  Its save stack must hold the
 * save_size opts ask for, if any (a guessed size is only a guess: any kept
 * record does).  It has what its memory holds past the co object, and
 * (kept: its co is reset, not made again) what its co's frames already
 * made libaco allocate, at least their largest copy. */
static inline int rt_rec_save_ok(const aco_rt_co_t* co, const aco_rt_spawn_opts_t* opts,
                                 int kept) {
    if (opts == NULL || opts->save_size == 0) return 1;
    size_t in = co->rec_sz - rt_aco_off(co) - aco_co_size(0);
    if (kept && rt_aco(co)->save_stack.max_cpsz > in) in = rt_aco(co)->save_stack.max_cpsz;
    return in >= opts->save_size;
}
/* The save stack in a new record is a guess: what the last co of the
 * same function that was ever copied out needed, from a small table a
 * scheduler keeps (RT_GUESSES slots by the function's address; a slot
 * holds one function).  A function not in it, or whose cos needed more than
 * RT_GUESS_MAX, gets none: libaco allocates a save stack of the exact size
 * when the co's frames are first copied out, if they ever are (most cos of
 * a program with a few cos never are). */
#define RT_GUESS_MAX (64 * 1024)
static inline unsigned rt_guess_slot(aco_rt_fn_t fn) {
    uintptr_t a = (uintptr_t)fn;
    return (unsigned)(a ^ a >> 6 ^ a >> 12) & (RT_GUESSES - 1);
}
/* The save stack a new record of s for fn gets (co.c). */
size_t rt_save_size(aco_rt_sched_t* s, aco_rt_fn_t fn, const aco_rt_spawn_opts_t* opts);
/* Co ended (loop.c): what it needed is the guess for its function's next
 * cos. */
static inline void rt_guess_learn(aco_rt_sched_t* s, const aco_rt_co_t* co) {
    size_t need = rt_aco(co)->save_stack.max_cpsz;
    if (need == 0 || (co->flags & RT_STANDALONE)) return;   /* never copied */
    need = need > RT_GUESS_MAX ? 0 : (need + 7) & ~(size_t)7;     /* libaco's step */
    unsigned i = rt_guess_slot(co->fn);
    if (s->recs.guess[i].fn != (uintptr_t)co->fn) rt_store(&s->recs.guess[i].fn, (uintptr_t)co->fn);
    if (s->recs.guess[i].need != need) rt_store(&s->recs.guess[i].need, (uint32_t)need);
}

/* cos_alive for other threads (a plain store: only this thread writes). */
static inline void rt_publish_load(aco_rt_sched_t* s) {
#ifdef ACO_RT_NO_THREADS
    s->ld.load = (uint32_t)s->st.cos_alive;
#else
    __atomic_store_n(&s->ld.load, (uint32_t)s->st.cos_alive, __ATOMIC_RELEASE);
#endif
}
/* What a spawn asks that the record keeps in its extra block (made when
 * needed): its name, the stack of a remote spawn (req); x: make the block
 * anyway (a group's links go there).  0 or -ENOMEM.  Inline: most spawns
 * ask none of it. */
int rt_rec_opts_x(aco_rt_co_t* co, const char* name, size_t req);
static inline int rt_rec_opts(aco_rt_co_t* co, const aco_rt_spawn_opts_t* opts, size_t req,
                              int x) {
    const char* name = opts ? opts->name : NULL;
    if (rt_likely(co->x == NULL && name == NULL && req == 0 && !x)) return 0;
    return rt_rec_opts_x(co, name, req);
}
/* co.c, for the loop (loop.c) and stealing: a spawn from
 * another thread, or taken from a newq, arrived: make its co and queue it;
 * free a finished record of s; cancel co (s's), every co of s (a pool's
 * request); destroy every co and kept record of s (aco_rt_sched_free); the
 * abort of a join. */
void rt_spawn_arrived(aco_rt_sched_t* s, aco_rt_co_t* co);
void rt_record_free(aco_rt_sched_t* s, aco_rt_co_t* co);
void rt_cancel_local(aco_rt_co_t* co);
void rt_cancel_all(aco_rt_sched_t* s, uint32_t gen);
void rt_cos_free_all(aco_rt_sched_t* s);
/* After the backend's fini: freed, or only let go if it left operations
 * in the kernel (keep: they may write them yet). */
void rt_cos_free_held(aco_rt_sched_t* s, int keep);
void rt_join_abort(aco_rt_co_t* me, int err);

/* Pool threads' exchange (co.c).  rt_newq_flush: the new cos kept to
 * this thread are published to its newq, for thieves (after each co
 * runs). */
void rt_newq_flush(aco_rt_sched_t* me);
#ifndef ACO_RT_NO_THREADS
/* Take new cos from victim's newq and start them on s: all (victim == s),
 * or about half (a thief); how many. */
unsigned rt_take_new(aco_rt_sched_t* s, aco_rt_sched_t* victim, int all);
/* Idle: take half of the first sibling's newq that has some; how many. */
unsigned rt_steal(aco_rt_sched_t* s);
/* Is there work in a sibling's newq? */
int  rt_sibling_work(aco_rt_sched_t* s);
/* Before going idle: pay siblings the records taken from them. */
void rt_rec_pay_all(aco_rt_sched_t* s);
#else
static inline unsigned rt_take_new(aco_rt_sched_t* s, aco_rt_sched_t* v, int all) {
    (void)s; (void)v; (void)all; return 0;
}
static inline unsigned rt_steal(aco_rt_sched_t* s) { (void)s; return 0; }
static inline int rt_sibling_work(aco_rt_sched_t* s) { (void)s; return 0; }
static inline void rt_rec_pay_all(aco_rt_sched_t* s) { (void)s; }
#endif

/* io.c: the closes of descriptors that other threads sent (s->closes:
 * io.c): cos here that waited on them are told -EBADF.
 * Non-zero if there were some.  Set by io.c's constructor: closes are
 * sent only by io.c. */
extern int (*rt_hook_closes)(aco_rt_sched_t* s);
/* io.c: every scheduler of the process, for closes from other threads. */
void     rt_sched_reg(aco_rt_sched_t* s, int add);
/* Wake every scheduler asleep in its thread (it looks again at its cos). */
void     rt_sched_notify_all(void);
/* Every buffer the runtime hands on passes here: in checked mode (aco.h)
 * one on the stack of a suspended co is reported, as the co's escape,
 * before the kernel would fail it with EFAULT.  wr: the kernel (or whoever
 * gets p) writes there, not only reads. */
static inline int rt_on_share_stack(const aco_rt_co_t* co, const void* p, size_t n, int wr) {
    if (aco_unlikely(aco_checked())) aco_checked_access(p, n, wr);
    if (co->flags & RT_STANDALONE) return 0;    /* its stack is its own */
    return aco_on_share_stack(rt_aco(co), p, n);
}

/* Do the n bytes at p meet one of s's share stacks, where the frames of
 * whichever co runs come and go (any co's, the caller a co or not)?  The
 * running co's own stack counts as rt_on_share_stack says (checked mode:
 * its window); bytes on a suspended co's window in checked mode are
 * reported as an escape (aco_checked_access).  A range check per stack. */
static inline int rt_on_any_share_stack(const aco_rt_sched_t* s, const void* p, size_t n, int wr) {
    if (s->run.cur) {
        if (rt_on_share_stack(s->run.cur, p, n, wr)) return 1;
    } else if (aco_unlikely(aco_checked())) {
        aco_checked_access(p, n, wr);
    }
    uintptr_t a = (uintptr_t)p;
    for (unsigned k = 0; k < s->recs.nstacks; k++) {
        const aco_share_stack_t* st = s->recs.stacks[k];
        if (st && a < (uintptr_t)st->real_ptr + st->real_sz && (uintptr_t)st->real_ptr < a + n)
            return 1;
    }
    return 0;
}

/* offload.c: no helper thread is sending a wake now (before a scheduler
 * is freed). */
void rt_offload_quiesce(void);

/* offload.c's helper threads for file.c: fn(arg) while the co parks,
 * its result in *result.  waitout 0: as aco_rt_offload (drop for a co
 * that left); waitout 1: a deadline or cancel ends the wait only while fn
 * has not started (drop(arg, NULL) then, on a helper thread); once it has,
 * the co waits for its end and gets 0.  -ENOSYS in the single-thread
 * build. */
int rt_offload_call(aco_rt_co_t* co, void* (*fn)(void*), void* arg,
                    void (*drop)(void*, void*), void** result, int64_t deadline,
                    int waitout);

/* The helper threads' bound now (aco_rt_offload_limits), 0 in the
 * single-thread build. */
unsigned rt_offload_max_threads(void);


/* A co's extra block, at least buf_min bytes of buffer: NULL on ENOMEM. */
rt_extra_t* rt_extra_grow(aco_rt_co_t* co, size_t buf_min);
static inline rt_extra_t* rt_extra(aco_rt_co_t* co, size_t buf_min) {
    if (rt_likely(co->x != NULL && co->x->buf_cap >= buf_min)) return co->x;
    return rt_extra_grow(co, buf_min);
}

/* co.c: the running co ends here: its function returned, or it called
 * aco_rt_exit (its frames above are dropped, never unwound). */
__attribute__((noreturn)) void rt_co_exit(aco_rt_co_t* co);

#pragma GCC visibility pop

#endif /* ACO_RT_IMPL_H */
