/* chan.c - bounded channels of fixed-size elements, and select.
 *
 * A channel is a ring of cap elements plus two wait queues.  At most one of
 * them is non-empty: senders wait only while the ring is full, receivers
 * only while it is empty.  An element never moves through a co's stack
 * while that co is blocked: a blocked sender's element waits in its waiter
 * (up to 8 bytes) or its heap block (rt_extra), and a sender that finds a
 * receiver waiting writes where the receiver copies it from once it runs
 * (the share-stack rule).
 *
 * The direct waiter.  A co that waits in a plain send or receive of an
 * element of up to 8 bytes, when nobody waits on its side yet, waits in
 * the channel's first cache line instead of on the queue: ch->direct (a
 * sender's element in ch->dval).  Whoever takes it reads and writes none of
 * its record, and a co of another thread of its pool wakes it through the
 * mailbox, the element inside (rt_wake_remote_box), unless its line is
 * watched (below): across threads a hand-over moves the channel's line
 * and at most the mailbox's, not the record's too.  It came first, so it is taken before the queue's waiters; it is
 * taken under the lock, by one party (no claim): a waker, or its own
 * deadline or cancel (rt_chan_abort), which finds it gone when a waker was
 * first (the wake is then on its way).
 *
 * Watched lines.  A mailbox wake still moves a second line, the mailbox
 * slot's, after the channel's.  So a direct waiter that came in by the
 * lock (a channel that other threads use: not owned) asks its scheduler to
 * watch the channel's first line (rt_watch_set, one line per scheduler):
 * dstate D_WATCHED.  A co of another thread that would take it leaves it
 * where it is instead: it gives or takes the element in dval and sets
 * D_HANDED there (direct_far, handed), in the line it holds anyway, and
 * touches nothing of the waiter's (rt_notify then reads whether that
 * scheduler sleeps; a waker outside its pool holds it too, rt_hold).
 * The scheduler, which looks at the line whenever it looks for messages,
 * wakes its co from the line without the lock (watch_pick), and puts the
 * channel in order later, under the lock, off the hand-over's way: on its
 * next locked entry into the channel (the woken co's next call on it,
 * usually) or its loop's next drain (watch_end).  Until then the handed
 * waiter is no waiter (taken by nobody, passed over by close), and
 * aco_rt_chan_free leaves the freeing to that end (D_FREE): the watcher
 * reads the line until then.  A close gives a watched waiter its -EPIPE
 * the same way (D_ERR).  No owner is made while dstate is set, so the
 * owner's way in never meets a watched waiter.
 *
 * Select puts one waiter per case on the channels' queues (the waiters are
 * in the co's rt_extra, allocated once and kept); the first case to go on
 * claims the co and wakes it with its index; the co then takes its other
 * waiters off their queues.
 *
 * Threads.  A spin lock guards each channel.  A send or receive holds its
 * channel's; select holds those of all its channels at once, taken in
 * address order (nothing else holds two), so that no case can become ready
 * between its check and its waiter going on the queue.
 *
 * The owner.  Most channels are only ever used by the cos of one thread,
 * and an exchange on the lock costs more than the rest of a hand-off's
 * bookkeeping.  So the first scheduler whose cos make OWN_AFTER calls on
 * a channel in a row (nobody else's between) owns it: its cos enter by
 * raising ch->busy with a plain store and then finding the lock free and
 * the owner still theirs (chan_enter), no locked instruction.  A channel
 * that goes to another thread after a call or two (a reply channel) is
 * never owned, so never revoked; one whose calls change hands between
 * schedulers SHARED_AFTER times without a run of OWN_AFTER between is
 * marked never to be (its candidate's count, written at each call until
 * then, is in the line every call reads, on LP64).  Anyone else takes
 * the lock and, while there is an owner, revokes it for good:
 * membarrier(2) makes every thread of the process pass a full barrier, so
 * that either the owner's busy is seen now (and waited out) or the owner
 * sees the lock taken and takes it too (the asymmetric Dekker of
 * userspace RCU).  From then on
 * everyone takes the lock: an owned channel pays one membarrier when
 * another thread comes.  Without membarrier (or under TSan, which does not
 * know it) no channel has an owner.  A co waits on a channel only while the channel
 * is its scheduler's or no one's (a scheduler becomes the owner only while
 * no other's co waits in it), and its scheduler's cos are never inside
 * while that scheduler unlinks it (rt_abort_shared, aco_rt_sched_free):
 * there the plain lock is enough.
 */
#include "rt_impl.h"

#include <stdlib.h>

/* What a send or receive of an unbuffered channel writes is in the first
 * 64 bytes (the one cache line that moves between threads), what it only
 * reads after them. */
struct aco_rt_chan {
    uint32_t       lock;
    uint8_t        closed;
    uint8_t        dsend;       /* direct is a sender (else a receiver) */
    uint8_t        busy;        /* the owner is inside without the lock */
    uint8_t        dstate;      /* atomic: the direct waiter's line
                                   watch (D_*, "Watched lines" above) */
    aco_rt_waitq_t sendq;
    aco_rt_waitq_t recvq;
    aco_rt_co_t*   direct;      /* the direct waiter, or NULL */
    aco_rt_sched_t* direct_s;   /* its scheduler (its record's line stays
                                   where it is) */
    uint64_t       dval;        /* a direct sender's element */
    size_t         len;         /* (a buffered channel's len and head: */
    size_t         head;        /* index of the oldest element) */
    size_t         elem_size;
    size_t         cap;
    char*          ring;
    aco_rt_sched_t* owner;      /* or OWNER_FREE, OWNER_NONE; read-mostly */
    aco_rt_sched_t* cand;       /* while free: whose call came last, */
    uint32_t       cand_n;      /* and how many of its calls in a row */
    uint32_t       flips;       /* times cand changed from a scheduler
                                   since the last run of OWN_AFTER */
};
_Static_assert(offsetof(struct aco_rt_chan, dval) + sizeof(uint64_t) <= 64,
               "a channel's written fields share a cache line");

/* dstate: the direct waiter's scheduler watches this line (D_WATCHED);
 * its wake is in it (D_HANDED: a receiver's element in dval, or -errno
 * with D_ERR), until that scheduler's end; D_FREE: freed meanwhile, the
 * end frees it. */
#define D_WATCHED 1
#define D_HANDED  RT_WATCH_HANDED
#define D_ERR     4
#define D_FREE    8
_Static_assert(D_HANDED != D_WATCHED && D_HANDED != D_ERR && D_HANDED != D_FREE, "D_* bits");
static inline uint8_t dstate(const aco_rt_chan_t* ch) {
    return __atomic_load_n(&ch->dstate, __ATOMIC_RELAXED);
}
static inline void dstate_set(aco_rt_chan_t* ch, uint8_t v) {
    __atomic_store_n(&ch->dstate, v, __ATOMIC_RELAXED);
}

/* ch->owner until a scheduler made OWN_AFTER calls in a row, and once
 * revoked (or never to be: no membarrier, or shared: SHARED_AFTER). */
#define OWNER_FREE ((aco_rt_sched_t*)1)
#define OWNER_NONE ((aco_rt_sched_t*)2)
#define OWN_AFTER 64
/* A channel whose candidate changed from a scheduler this many times, with
 * no run of OWN_AFTER calls by one between, is never owned. */
#define SHARED_AFTER 8

#if defined(ACO_RT_NO_THREADS)
static inline int chan_try_fast(aco_rt_chan_t* ch, aco_rt_sched_t* s) { (void)ch; (void)s; return 1; }
static inline int chan_enter_as(aco_rt_chan_t* ch, aco_rt_sched_t* s) { (void)ch; (void)s; return 0; }
static inline int chan_enter(aco_rt_chan_t* ch) { (void)ch; return 0; }
static inline void chan_leave(aco_rt_chan_t* ch, int fast) { (void)ch; (void)fast; }
static inline void chan_leave_any(aco_rt_chan_t* ch) { (void)ch; }
static aco_rt_sched_t* owner_at_start(void) { return OWNER_NONE; }
#else
#if defined(__SANITIZE_THREAD__)
#define CHAN_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CHAN_TSAN 1
#endif
#endif

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

static int membarrier(int cmd) { return (int)syscall(__NR_membarrier, cmd, 0, 0); }

static pthread_once_t owner_once = PTHREAD_ONCE_INIT;
static int owners_ok;           /* the process is registered for membarrier */
static void owner_init(void) {
#ifndef CHAN_TSAN
    owners_ok = membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
#endif
}
static aco_rt_sched_t* owner_at_start(void) {
    pthread_once(&owner_once, owner_init);
    return owners_ok ? OWNER_FREE : OWNER_NONE;
}

static uint8_t watch_end_locked(aco_rt_chan_t* ch, aco_rt_sched_t* s);

/* The lock's way in: take it, then claim a free channel for this thread's
 * scheduler or revoke another's ownership (see the top). */
__attribute__((noinline))
static void chan_enter_locked(aco_rt_chan_t* ch, aco_rt_sched_t* s) {
    rt_lock(&ch->lock);
    /* (this scheduler's hand-over from the line, picked: tidied first;
     * one freed meanwhile is left to the drain's end, which frees it) */
    if (rt_unlikely(s != NULL && s->run.watch.obj == ch && s->run.watch.picked) &&
        !(dstate(ch) & D_FREE))
        watch_end_locked(ch, s);
    aco_rt_sched_t* o = __atomic_load_n(&ch->owner, __ATOMIC_RELAXED);
    if (rt_likely(o == OWNER_NONE || o == s)) return;
    if (o == OWNER_FREE) {
        /* (cand_n counts this scheduler's calls in a row)  Not while a co
         * of another thread may wait in it: its deadline, cancel or
         * scheduler's free takes its waiter off with the plain lock
         * (rt_abort_shared, aco_rt_sched_free), which the owner's cos do
         * not see.  A co that comes later revokes first. */
        if (s != ch->cand) {
            /* (a channel that keeps changing hands is shared: no owner
             * ever, and these words are written no more; on LP64 they
             * share a line with what every call reads, which would
             * otherwise move between the threads at each entry, inside
             * the lock) */
            if (ch->cand != NULL && ++ch->flips >= SHARED_AFTER) {
                __atomic_store_n(&ch->owner, OWNER_NONE, __ATOMIC_RELAXED);
                return;
            }
            ch->cand = s, ch->cand_n = 0;
        }
        if (s && ++ch->cand_n >= OWN_AFTER) {
            if (ch->cand_n == OWN_AFTER) ch->flips = 0;     /* (a long run: one hand) */
            if (rt_wq_empty(&ch->sendq) && rt_wq_empty(&ch->recvq) &&
                (ch->direct == NULL || ch->direct_s == s) && dstate(ch) == 0)
                __atomic_store_n(&ch->owner, s, __ATOMIC_RELAXED);
        }
        return;
    }
    /* The owner's busy store is visible after it, or its load of the lock
     * comes after it and sees it held.  A child of fork(2) is not
     * registered (the parent was): register it, or take the slow global
     * barrier, which needs no registration. */
    if (membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0 &&
        (membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) != 0 ||
         membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0) &&
        membarrier(MEMBARRIER_CMD_GLOBAL) != 0) {
        /* (the kernel took back what it gave: no safe way on) */
        static const char m[] = "aco_rt channel: membarrier(2) failed after it had worked\n";
        if (write(2, m, sizeof(m) - 1) < 0) { /* aborting anyway */ }
        abort();
    }
    for (unsigned i = 0; __atomic_load_n(&ch->busy, __ATOMIC_ACQUIRE); i++) {
        if (i < 64) rt_pause(); else sched_yield();
    }
    __atomic_store_n(&ch->owner, OWNER_NONE, __ATOMIC_RELAXED);
}

/* The owner's way in alone: 1 if s's co came in without the lock
 * (chan_leave(ch, 1) lets go), 0 if it did not and holds nothing. */
static inline int chan_try_fast(aco_rt_chan_t* ch, aco_rt_sched_t* s) {
    if (rt_likely(__atomic_load_n(&ch->owner, __ATOMIC_RELAXED) == s)) {
        __atomic_store_n(&ch->busy, 1, __ATOMIC_RELAXED);
        __atomic_signal_fence(__ATOMIC_SEQ_CST);       /* (membarrier's
                                                           other half) */
        /* The owner again, after the lock: a revoker may have come and
         * gone between the first look and busy (the lock seen free then
         * is its release, after its store of OWNER_NONE). */
        if (rt_likely(__atomic_load_n(&ch->lock, __ATOMIC_ACQUIRE) == 0 &&
                      __atomic_load_n(&ch->owner, __ATOMIC_RELAXED) == s))
            return 1;
        __atomic_store_n(&ch->busy, 0, __ATOMIC_RELAXED);
    }
    return 0;
}

/* 1 if the owner came in without the lock, 0 if the lock is held: what
 * chan_leave must be told. */
static inline int chan_enter_as(aco_rt_chan_t* ch, aco_rt_sched_t* s) {
    if (chan_try_fast(ch, s)) return 1;
    chan_enter_locked(ch, s);
    return 0;
}
/* The same for the calling thread's scheduler (s: a co's own, known
 * already to the calls that have it). */
static inline int chan_enter(aco_rt_chan_t* ch) { return chan_enter_as(ch, rt_tls_sched); }

static inline void chan_leave(aco_rt_chan_t* ch, int fast) {
    if (fast) __atomic_store_n(&ch->busy, 0, __ATOMIC_RELEASE);
    else rt_unlock(&ch->lock);
}

/* The same without being told: the owner inside without the lock has busy
 * up, and nobody changes the owner while it is; anyone else holds the
 * lock. */
static inline void chan_leave_any(aco_rt_chan_t* ch) {
    chan_leave(ch, __atomic_load_n(&ch->owner, __ATOMIC_RELAXED) == rt_tls_sched &&
                   __atomic_load_n(&ch->busy, __ATOMIC_RELAXED));
}
#endif

aco_rt_chan_t* aco_rt_chan_new(size_t elem_size, size_t cap) {
    if (elem_size == 0 || (cap && elem_size > SIZE_MAX / cap)) { errno = EINVAL; return NULL; }
    /* Lines of its own: cos of two threads write the first all the time. */
    aco_rt_chan_t* ch = aligned_alloc(64, (sizeof(*ch) + 63) & ~(size_t)63);
    if (ch == NULL) return NULL;
    memset(ch, 0, sizeof(*ch));
    ch->owner = owner_at_start();
    ch->elem_size = elem_size;
    ch->cap = cap;
    if (cap && (ch->ring = malloc(elem_size * cap)) == NULL) { free(ch); return NULL; }
    return ch;
}

static void chan_destroy(aco_rt_chan_t* ch) {
    free(ch->ring);
    free(ch);
}

int aco_rt_chan_free(aco_rt_chan_t* ch) {
    if (ch == NULL) return 0;
    int fast = chan_enter(ch);
    int busy = !rt_wq_empty(&ch->sendq) || !rt_wq_empty(&ch->recvq);
    if (!busy && ch->direct && (dstate(ch) & D_HANDED)) {
        /* The direct waiter's wake waits in the line for its scheduler,
         * which reads the line until its end: that end frees it (release:
         * the watcher reads dval after this value too). */
        __atomic_fetch_or(&ch->dstate, (uint8_t)D_FREE, __ATOMIC_RELEASE);
        chan_leave(ch, fast);
        return 0;
    }
    busy |= ch->direct != NULL;
    chan_leave(ch, fast);
    if (busy) return -EBUSY;
    chan_destroy(ch);
    return 0;
}

size_t aco_rt_chan_len(const aco_rt_chan_t* ch) {
    if (ch == NULL) return 0;
    aco_rt_chan_t* c = (aco_rt_chan_t*)(uintptr_t)ch;
    int fast = chan_enter(c);
    size_t n = c->len;
    chan_leave(c, fast);
    return n;
}

static inline void* ring_at(aco_rt_chan_t* ch, size_t i) {
    size_t k = ch->head + i;
    if (k >= ch->cap) k -= ch->cap;
    return ch->ring + k * ch->elem_size;
}

/* The waiters taken off a channel, to wake after the unlock, are their
 * waiter (rt_waiter_t*), a direct waiter's co tagged with DIRECT (a
 * record is 16-aligned; RECV_NOBODY, below, is 1), or the scheduler of a
 * watched receiver whose wake is in the line, tagged with NOTIFY, to be
 * woken if it sleeps (handed). */
#define DIRECT ((uintptr_t)2)
#define NOTIFY ((uintptr_t)6)     /* bits 1 and 2: no waiter (4-aligned) or
                                     tagged co (bit 2 clear) has both */
_Static_assert(_Alignof(aco_rt_sched_t) >= 8 && _Alignof(rt_waiter_t) >= 4,
               "NOTIFY's tag bits");
static inline rt_waiter_t* direct_tag(aco_rt_co_t* co) {
    return (rt_waiter_t*)((uintptr_t)co | DIRECT);
}
static inline aco_rt_co_t* direct_co(rt_waiter_t* w) {
    return ((uintptr_t)w & DIRECT) ? (aco_rt_co_t*)((uintptr_t)w & ~DIRECT) : NULL;
}

/* With ch locked: the direct waiter if it is a sender (1) or a receiver
 * (0) as asked, taken (held if another thread's: rt_hold_try); else
 * NULL. */
/* co (of s, the calling thread's) no longer waits in a watched line. */
static inline void watch_drop(aco_rt_sched_t* s, aco_rt_co_t* co) {
    if (s->run.watch.co == co) rt_watch_clear(s);
}

static inline aco_rt_co_t* direct_take(aco_rt_chan_t* ch, int sender) {
    aco_rt_co_t* co = ch->direct;
    if (co == NULL || ch->dsend != sender) return NULL;
    uint8_t st = dstate(ch);
    if (rt_unlikely(st != 0)) {
        /* watched: taken here by a co of its own thread only (another's
         * hands over: direct_far); handed: woken already */
        if ((st & D_HANDED) || ch->direct_s != rt_tls_sched) return NULL;
        dstate_set(ch, 0);
        watch_drop(ch->direct_s, co);
        ch->direct = NULL;
        return co;
    }
    /* (its wake lets go: fire; a scheduler that frees keeps its own) */
    if (ch->direct_s != rt_tls_sched && !rt_hold_try(ch->direct_s)) return NULL;
    ch->direct = NULL;
    return co;
}

/* With ch locked: the scheduler of another thread that watches the line
 * for the direct waiter, a sender (1) or a receiver (0) as asked, held
 * (handed's wake lets go); NULL if there is none, or it is being freed.
 * The waiter's wake then goes in the line: the caller gives or takes the
 * element in dval, then handed. */
static inline aco_rt_sched_t* direct_far(aco_rt_chan_t* ch, int sender) {
    if (rt_likely(dstate(ch) != D_WATCHED) || ch->direct == NULL || ch->dsend != sender)
        return NULL;
    aco_rt_sched_t* ds = ch->direct_s;
    if (ds == rt_tls_sched || !rt_hold_try(ds)) return NULL;
    return ds;
}

/* The direct waiter's wake is in the line (err: D_ERR, dval -errno): the
 * waker's to wake after the unlock, ds tagged NOTIFY.  seq_cst: ordered
 * before rt_notify's load of the sleeping flag (the watcher stores that,
 * then looks here: rt_watch_due). */
static inline rt_waiter_t* handed(aco_rt_chan_t* ch, aco_rt_sched_t* ds, uint8_t err) {
    __atomic_store_n(&ch->dstate, (uint8_t)(D_WATCHED | D_HANDED | err), __ATOMIC_SEQ_CST);
    return (rt_waiter_t*)((uintptr_t)ds | NOTIFY);
}

/* A hand-over's wake: its scheduler's, if it sleeps. */
static void notify_handed(rt_waiter_t* w) {
    aco_rt_sched_t* ds = (aco_rt_sched_t*)((uintptr_t)w & ~NOTIFY);
    rt_notify(ds);
    rt_hold_end(ds);
}

/* Wake the co of waiter w, taken, with result err: a select's co learns
 * the index (and takes its other waiters off their queues itself).  ds:
 * the channel's direct_s, read under the lock (a direct waiter's). */
static inline void fire(rt_waiter_t* w, int err, aco_rt_sched_t* ds) {
    if (rt_unlikely(((uintptr_t)w & NOTIFY) == NOTIFY)) { notify_handed(w); return; }
    aco_rt_co_t* co = direct_co(w);
    if (co) {
        if (ds == rt_tls_sched) rt_wake(co, err);
        else rt_wake_remote_to(co, ds, err);
        return;
    }
    co = w->co;
    if (w == &co->w) { rt_wake_any(co, err); return; }
    co->x->sel_err = err;
    rt_wake_any(co, w->idx);
}

/* fire for send_now's receiver: a direct one gets elem (n bytes) now, in
 * its w.box, from its own thread when it is another's (here: the calling
 * thread's scheduler). */
static inline void fire_recv(rt_waiter_t* w, const void* elem, size_t n, aco_rt_sched_t* ds,
                             aco_rt_sched_t* here) {
    if (rt_unlikely(((uintptr_t)w & NOTIFY) == NOTIFY)) { notify_handed(w); return; }
    aco_rt_co_t* co = direct_co(w);
    if (co == NULL) { fire(w, 0, ds); return; }
    if (ds == here) {
        rt_copy(&co->w.box, elem, n);
        rt_wake(co, 0);
    } else {
        rt_wake_remote_box(co, ds, elem, n);
    }
}

/* With ch locked: a waiting receiver gets elem, or the ring takes it;
 * a waiting sender gives its element, or the ring does.  Return 1 if it
 * happened.  The woken co is woken after the unlock: *wk (fire_recv). */
static inline int send_now(aco_rt_chan_t* ch, const void* elem, rt_waiter_t** wk) {
    aco_rt_sched_t* far = direct_far(ch, 0);
    if (rt_unlikely(far != NULL)) {
        rt_copy(&ch->dval, elem, ch->elem_size);
        *wk = handed(ch, far, 0);
        return 1;
    }
    aco_rt_co_t* d = direct_take(ch, 0);
    if (d) {                    /* (its element is given by fire_recv) */
        *wk = direct_tag(d);
        return 1;
    }
    rt_waiter_t* w = rt_wq_take(&ch->recvq);
    if (w) {
        rt_copy(w->slot, elem, ch->elem_size);
        *wk = w;
        return 1;
    }
    if (ch->len < ch->cap) {
        rt_copy(ring_at(ch, ch->len), elem, ch->elem_size);
        ch->len++;
        return 1;
    }
    return 0;
}

/* recv_now's "done, nobody to wake": it returns the waiter to wake, that,
 * or NULL when it cannot receive now (no out-parameter: a caller whose
 * locals' addresses never escape can tail-call, clang included). */
#define RECV_NOBODY ((rt_waiter_t*)1)

static inline __attribute__((always_inline)) rt_waiter_t* recv_now(aco_rt_chan_t* ch, void* elem) {
    if (ch->len) {
        rt_copy(elem, ring_at(ch, 0), ch->elem_size);
        ch->head = ch->head + 1 == ch->cap ? 0 : ch->head + 1;
        ch->len--;
        /* room now: the first waiting sender's element joins the ring */
        aco_rt_sched_t* far = direct_far(ch, 1);
        if (rt_unlikely(far != NULL)) {
            rt_copy(ring_at(ch, ch->len), &ch->dval, ch->elem_size);
            ch->len++;
            return handed(ch, far, 0);
        }
        aco_rt_co_t* d = direct_take(ch, 1);
        if (d) {
            rt_copy(ring_at(ch, ch->len), &ch->dval, ch->elem_size);
            ch->len++;
            return direct_tag(d);
        }
        rt_waiter_t* w = rt_wq_take(&ch->sendq);
        if (w == NULL) return RECV_NOBODY;
        rt_copy(ring_at(ch, ch->len), w->slot, ch->elem_size);
        ch->len++;
        return w;
    }
    aco_rt_sched_t* far = direct_far(ch, 1);     /* rendezvous */
    if (rt_unlikely(far != NULL)) {
        rt_copy(elem, &ch->dval, ch->elem_size);
        return handed(ch, far, 0);
    }
    aco_rt_co_t* d = direct_take(ch, 1);
    if (d) {
        rt_copy(elem, &ch->dval, ch->elem_size);
        return direct_tag(d);
    }
    rt_waiter_t* w = rt_wq_take(&ch->sendq);
    if (w) rt_copy(elem, w->slot, ch->elem_size);
    return w;
}

static const rt_watch_ops_t chan_watch_ops;

/* With ch locked: may the running co wait as the direct waiter, a sender
 * (1) or a receiver (0)?  Then it is (the lock is w.lock, as for a queued
 * waiter: recv_done finds the channel there).  A receiver that came in by
 * the lock (fast 0: a channel other threads use) has its line watched, if
 * its scheduler watches none yet. */
static inline int direct_park(aco_rt_co_t* me, aco_rt_chan_t* ch, int sender, int fast) {
    if (ch->direct || ch->elem_size > sizeof(me->w.box) ||
        !rt_wq_empty(sender ? &ch->sendq : &ch->recvq))
        return 0;
    ch->direct = me;
    ch->direct_s = me->s;
    ch->dsend = (uint8_t)sender;
    me->w.lock = &ch->lock;
    me->w.slot = &me->w.box;
    /* Not on a channel this scheduler owns (its co came in by the lock
     * all the same when chan_try_fast met a revoker): the owner's way in
     * takes a direct waiter without looking at dstate.  None is made the
     * owner while dstate is set, so an owned channel's dstate is 0 (fast:
     * nothing to write). */
    if (!fast)
        dstate_set(ch, __atomic_load_n(&ch->owner, __ATOMIC_RELAXED) != me->s &&
                               rt_watch_set(me->s, ch, &ch->dstate, me, &chan_watch_ops)
                           ? D_WATCHED : 0);
    return 1;
}

/* (On co's thread: its deadline or cancel.) */
static void chan_abort(aco_rt_co_t* co, int err) {
    aco_rt_chan_t* ch = rt_container_of(co->w.lock, aco_rt_chan_t, lock);
    int fast = chan_enter(ch);
    uint8_t st = dstate(ch);
    int won = ch->direct == co && !(st & D_HANDED);
    if (won) {
        ch->direct = NULL;
        if (st) {
            dstate_set(ch, 0);
            watch_drop(co->s, co);
        }
    }
    chan_leave(ch, fast);
    if (won) rt_wake(co, err);
    /* else a waker took it: its wake is on the way (maybe via a mailbox,
     * or in the line, which this thread looks at) */
}

/* The same without the wake: co is freed where it waits (aco_rt_sched_free,
 * on co's thread or after it). */
static void chan_forget(aco_rt_co_t* co) {
    aco_rt_chan_t* ch = rt_container_of(co->w.lock, aco_rt_chan_t, lock);
    int fast = chan_enter(ch);
    uint8_t st = 0;
    if (ch->direct == co) {
        st = dstate(ch);
        ch->direct = NULL;
        if (st) {
            dstate_set(ch, 0);
            watch_drop(co->s, co);
        }
    }
    chan_leave(ch, fast);
    if (st & D_FREE) chan_destroy(ch);
}

/* Where a waiting co keeps the element it sends or receives (not on its
 * stack: that is copied away while it waits): in its waiter up to 8 bytes,
 * else in its extra block.  NULL on ENOMEM. */
static inline void* mailbox(aco_rt_co_t* me, size_t n) {
    if (n <= sizeof(me->w.box)) return &me->w.box;
    rt_extra_t* x = rt_extra(me, n);
    return x ? x->buf : NULL;
}

/* aco_rt_chan_send that waits (ch locked), tail-called: out of line, so
 * that the send that goes through at once saves no registers. */
__attribute__((noinline))
static int send_wait(aco_rt_co_t* me, aco_rt_chan_t* ch, const void* elem, int64_t deadline, int fast) {
    int r = rt_may_block(me, deadline);
    void* box = r ? NULL : mailbox(me, ch->elem_size);
    if (r == 0 && box == NULL) r = -ENOMEM;
    if (r) { chan_leave(ch, fast); return r; }
    if (direct_park(me, ch, 1, fast)) {
        rt_copy(&ch->dval, elem, ch->elem_size);
        chan_leave(ch, fast);
        return rt_park(me, RT_W_CHAN_SEND_D, ch, deadline);
    }
    rt_copy(box, elem, ch->elem_size);
    me->w.slot = box;
    rt_claim_reset(me);
    rt_wq_push_locked(&ch->sendq, &me->w, &ch->lock);
    chan_leave(ch, fast);
    return rt_park(me, RT_W_CHAN_SEND, ch, deadline);
}

/* aco_rt_chan_send from the channel entered on (chan_enter_as's fast). */
__attribute__((noinline))
static int send_entered(aco_rt_sched_t* s, aco_rt_co_t* me, aco_rt_chan_t* ch, const void* elem,
                        int64_t deadline, int fast) {
    rt_waiter_t* wk = NULL;
    if (rt_unlikely(elem == NULL)) { chan_leave(ch, fast); return -EINVAL; }
    if (ch->closed) { chan_leave(ch, fast); return -EPIPE; }
    if (send_now(ch, elem, &wk)) {
        size_t n = ch->elem_size;
        aco_rt_sched_t* ds = ch->direct_s;
        chan_leave(ch, fast);
        if (wk) fire_recv(wk, elem, n, ds, s);
        return 0;
    }
    return send_wait(me, ch, elem, deadline, fast);
}

/* aco_rt_chan_send, every case. */
__attribute__((noinline))
static int send_any(aco_rt_chan_t* ch, const void* elem, int64_t deadline) {
    aco_rt_sched_t* s = rt_tls_sched;
    aco_rt_co_t* me = s ? s->run.cur : NULL;    /* (rt_self, s kept) */
    if (rt_unlikely(ch == NULL || elem == NULL)) return -EINVAL;
    if (rt_unlikely(me == NULL)) return -EPERM;
    if (rt_unlikely(rt_co_cancelled(me))) return -ECANCELED;
    int fast = chan_enter_as(ch, s);
    return send_entered(s, me, ch, elem, deadline, fast);
}

/* The hand-off of a ping-pong first, in a function that calls nothing on
 * its way (so it saves no register): the owner's way in, a direct receiver
 * of this thread waiting; the rest tail-calls. */
int aco_rt_chan_send(aco_rt_chan_t* ch, const void* elem, int64_t deadline) {
    aco_rt_sched_t* s = rt_tls_sched;
    aco_rt_co_t* me = s ? s->run.cur : NULL;    /* (rt_self, s kept) */
    if (rt_unlikely(me == NULL || rt_co_cancel_maybe(me) || ch == NULL || !chan_try_fast(ch, s)))
        return send_any(ch, elem, deadline);
    aco_rt_co_t* d = ch->direct;
    size_t n = ch->elem_size;
    if (d && !ch->dsend && ch->direct_s == s && (n == 4 || n == 8) &&  /* (not closed then) */
        d->state == RT_PARKED && !rt_timer_armed(&d->tmo) && elem) {
        ch->direct = NULL;
        chan_leave(ch, 1);
        if (n == 4) memcpy(&d->w.box, elem, 4);
        else memcpy(&d->w.box, elem, 8);
        rt_wake_untimed(d, 0);
        return 0;
    }
    return send_entered(s, me, ch, elem, deadline, 1);
}

/* aco_rt_chan_recv that waits (ch locked), up to the switch: 0 or -errno
 * (ch unlocked). */
__attribute__((noinline))
static int recv_queue(aco_rt_co_t* me, aco_rt_chan_t* ch, int64_t deadline, int fast) {
    int r = ch->closed ? -EPIPE : rt_may_block(me, deadline);
    void* box = r ? NULL : mailbox(me, ch->elem_size);
    if (r == 0 && box == NULL) r = -ENOMEM;
    if (r) { chan_leave(ch, fast); return r; }
    if (direct_park(me, ch, 0, fast)) {
        chan_leave(ch, fast);
        rt_park_begin(me, RT_W_CHAN_RECV_D, ch, deadline);
        return 0;
    }
    me->w.slot = box;
    rt_claim_reset(me);
    rt_wq_push_locked(&ch->recvq, &me->w, &ch->lock);
    chan_leave(ch, fast);
    rt_park_begin(me, RT_W_CHAN_RECV, ch, deadline);
    return 0;
}

/* ... woken: what the waker said, the element taken out of the mailbox
 * (the channel is the one whose lock the waiter kept). */
__attribute__((noinline))
static int recv_done(void* elem) {
    aco_rt_co_t* me = rt_self();
    int r = me->res;
    if (r == 0) {
        aco_rt_chan_t* ch = rt_container_of(me->w.lock, aco_rt_chan_t, lock);
        rt_copy(elem, me->w.slot, ch->elem_size);
    }
    return r;
}

/* recv_done for recv_wait's waits: the size is in tmo.expiry_. */
__attribute__((noinline))
static int recv_box_done(void* elem) {
    aco_rt_co_t* me = rt_self();
    if (rt_unlikely(me->res)) return me->res;
    /* (up to 8 bytes: no memcpy call, so no register saved for one) */
    size_t n = (size_t)me->tmo.expiry_;
    if (n == 4) memcpy(elem, &me->w.box, 4);
    else if (n == 8) memcpy(elem, &me->w.box, 8);
    else for (size_t i = 0; i < n; i++) ((char*)elem)[i] = ((const char*)&me->w.box)[i];
    return 0;
}

/* The three: only elem lives across the switch, so that a parked
 * receiver's saved frames stay small (memory per parked co). */
__attribute__((noinline))
static int recv_wait_any(aco_rt_co_t* me, aco_rt_chan_t* ch, void* elem, int64_t deadline, int fast) {
    int r = recv_queue(me, ch, deadline, fast);
    if (r) return r;
    rt_switch_out(me);
    return recv_done(elem);
}

/* aco_rt_chan_recv that waits (ch locked), tail-called: without a
 * deadline, for an element of up to 8 bytes, on an open channel (the
 * common case: no call but the switch), else recv_wait_any. */
__attribute__((noinline))
static int recv_wait(aco_rt_co_t* me, aco_rt_chan_t* ch, void* elem, int64_t deadline, int fast) {
    if (rt_unlikely(deadline != -1 || ch->closed || ch->elem_size > sizeof(me->w.box)))
        return recv_wait_any(me, ch, elem, deadline, fast);
    /* The element's size, kept in the record where the waker does not
     * write: after the wake the channel's cache line is likely the
     * waker's, of another thread (recv_done would wait for it).  The
     * deadline timer is not armed (no deadline): its expiry is free.  Read
     * under the lock: once it is dropped, a waker may take this co and the
     * program free the channel. */
    me->tmo.expiry_ = (int64_t)ch->elem_size;
    int wait = RT_W_CHAN_RECV_D;
    if (!direct_park(me, ch, 0, fast)) {
        me->w.slot = &me->w.box;
        rt_claim_reset(me);
        rt_wq_push_locked(&ch->recvq, &me->w, &ch->lock);
        wait = RT_W_CHAN_RECV;
    }
    chan_leave(ch, fast);
    rt_park_begin(me, wait, ch, -1);
    rt_switch_out(me);
    return recv_box_done(elem);
}

/* A NULL channel or element (out of line: the checks stay two tests). */
__attribute__((noinline, cold))
static int refused(void) { return -EINVAL; }

/* aco_rt_chan_recv from the channel entered on (chan_enter_as's fast). */
__attribute__((noinline))
static int recv_entered(aco_rt_co_t* me, aco_rt_chan_t* ch, void* elem, int64_t deadline, int fast) {
    rt_waiter_t* wk = recv_now(ch, elem);
    if (wk == NULL) return recv_wait(me, ch, elem, deadline, fast);
    aco_rt_sched_t* ds = ch->direct_s;
    chan_leave(ch, fast);
    if (wk != RECV_NOBODY) fire(wk, 0, ds);
    return 0;
}

/* aco_rt_chan_recv, every case.  Not static: on i386 a static function
 * may take arguments in registers, and then it has fewer on the stack
 * than recv_entered takes, which it could not tail-call (a frame would
 * stay under every parked co: 64 bytes more to save). */
__attribute__((visibility("hidden")))
int rt_chan_recv_any(aco_rt_chan_t* ch, void* elem, int64_t deadline);
__attribute__((noinline))
int rt_chan_recv_any(aco_rt_chan_t* ch, void* elem, int64_t deadline) {
    aco_rt_sched_t* s = rt_tls_sched;
    aco_rt_co_t* me = s ? s->run.cur : NULL;    /* (rt_self, s kept) */
    if (rt_unlikely(ch == NULL)) return refused();
    if (rt_unlikely(elem == NULL)) return refused();
    if (rt_unlikely(me == NULL)) return -EPERM;
    if (rt_unlikely(rt_co_cancelled(me))) return -ECANCELED;
    return recv_entered(me, ch, elem, deadline, chan_enter_as(ch, s));
}

/* A ping-pong's receive first, in a function that calls nothing on its
 * way (so it saves no register): the owner's way in, nothing to take (no
 * sender, an empty ring): straight to the wait; the rest tail-calls. */
int aco_rt_chan_recv(aco_rt_chan_t* ch, void* elem, int64_t deadline) {
    aco_rt_sched_t* s = rt_tls_sched;
    aco_rt_co_t* me = s ? s->run.cur : NULL;    /* (rt_self, s kept) */
    if (rt_unlikely(me == NULL || rt_co_cancel_maybe(me) || ch == NULL || elem == NULL ||
                    !chan_try_fast(ch, s)))
        return rt_chan_recv_any(ch, elem, deadline);
    if (ch->len == 0 && ch->direct == NULL && rt_wq_empty(&ch->sendq))
        return recv_wait(me, ch, elem, deadline, 1);
    return recv_entered(me, ch, elem, deadline, 1);
}

/* Watched lines: the kind's two steps (rt_watch_t). */

/* Wake the co from the line, without the lock: direct and dval were
 * written before D_HANDED (seq_cst, seen by rt_watch_due), and nobody
 * writes them again before the end (a handed waiter is no waiter:
 * direct_take, direct_park and close pass it by, free leaves it). */
static void watch_pick(aco_rt_sched_t* s) {
    aco_rt_chan_t* ch = s->run.watch.obj;
    aco_rt_co_t* co = s->run.watch.co;
    uint8_t st = __atomic_load_n(&ch->dstate, __ATOMIC_ACQUIRE);
    uint64_t v = ch->dval;
    rt_watch_picked(s);
    if (st & D_ERR) {
        int64_t e;
        memcpy(&e, &v, sizeof(e));
        rt_wake(co, (int)e);
        return;
    }
    co->w.box = v;
    rt_wake(co, 0);
}

/* With ch locked: s's picked hand-over is over: the line is as no one
 * waited.  Its state before (D_FREE: to free). */
static uint8_t watch_end_locked(aco_rt_chan_t* ch, aco_rt_sched_t* s) {
    uint8_t st = dstate(ch);
    ch->direct = NULL;
    dstate_set(ch, 0);
    rt_watch_clear(s);
    return st;
}

/* The end from the loop (drain, or the scheduler's free): the plain lock,
 * as chan_enter_locked takes it: a watched channel has no owner (none is
 * made while dstate is set, and a co that came in by the lock revoked one
 * before it was watched). */
static void watch_end(aco_rt_sched_t* s) {
    aco_rt_chan_t* ch = s->run.watch.obj;
    rt_lock(&ch->lock);
    uint8_t st = watch_end_locked(ch, s);
    rt_unlock(&ch->lock);
    if (st & D_FREE) chan_destroy(ch);
}

static const rt_watch_ops_t chan_watch_ops = {watch_pick, watch_end};

int aco_rt_chan_close(aco_rt_chan_t* ch) {
    if (ch == NULL) return -EINVAL;
    int fast = chan_enter(ch);
    if (ch->closed) { chan_leave(ch, fast); return -EPIPE; }
    ch->closed = 1;
    uint8_t st = dstate(ch);
    if (ch->direct && !(st & D_HANDED) &&
        (ch->direct_s == rt_tls_sched || rt_hold_try(ch->direct_s))) {
        aco_rt_co_t* d = ch->direct;
        if (st & D_WATCHED && ch->direct_s != rt_tls_sched) {
            /* its wake goes in the line too: the watcher reads it there
             * (its co is woken from the line only) */
            int64_t e = -EPIPE;
            memcpy(&ch->dval, &e, sizeof(e));
            notify_handed(handed(ch, ch->direct_s, D_ERR));
        } else {
            ch->direct = NULL;
            if (st) {
                dstate_set(ch, 0);
                watch_drop(ch->direct_s, d);
            }
            fire(direct_tag(d), -EPIPE, ch->direct_s);
        }
    }
    for (;;) {
        rt_waiter_t* w = rt_wq_take(&ch->sendq);
        if (w == NULL) w = rt_wq_take(&ch->recvq);
        if (w == NULL) break;
        /* fire after the unlock would need a list: the wake of another
         * thread's co only queues a message, so do it here */
        fire(w, -EPIPE, NULL);
    }
    chan_leave(ch, fast);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Select                                                                   */
/* ------------------------------------------------------------------------ */

/* The distinct locks of a select's channels, sorted (at most n). */
static int select_locks(aco_rt_case_t* cases, int n, uint32_t** out) {
    int k = 0;
    for (int i = 0; i < n; i++) {
        uint32_t* l = &cases[i].ch->lock;
        int j = k;
        while (j > 0 && out[j - 1] > l) j--;
        if (j > 0 && out[j - 1] == l) continue;     /* already there */
        memmove(&out[j + 1], &out[j], (size_t)(k - j) * sizeof(*out));
        out[j] = l;
        k++;
    }
    return k;
}

static inline aco_rt_chan_t* chan_of(uint32_t* lock) {
    return rt_container_of(lock, aco_rt_chan_t, lock);
}
static void lock_all(uint32_t** l, int k) { for (int i = 0; i < k; i++) chan_enter(chan_of(l[i])); }
static void unlock_all(uint32_t** l, int k) { for (int i = k; i-- > 0; ) chan_leave_any(chan_of(l[i])); }

/* Once the select is claimed: take its waiters that are still queued off
 * their queues, one channel at a time.  Only the case that fired is off
 * its queue already (a taker that lost the claim leaves a waiter where it
 * is: rt_wq_take): its channel is not entered, for its queues may have
 * been empty since and the program may have freed it (chan_free said 0),
 * as after a plain receive's wake; the others' channels say -EBUSY to a
 * free until their waiter is off. */
static void unqueue(rt_extra_t* x) {
    for (int i = 0; i < x->seln; i++) {
        rt_waiter_t* w = &x->selw[i];
        if (__atomic_load_n(&w->q, __ATOMIC_ACQUIRE) == NULL) continue;
        aco_rt_chan_t* ch = chan_of(w->lock);
        int fast = chan_enter(ch);
        if (w->q) rt_wq_remove(w);
        chan_leave(ch, fast);
    }
}

/* (No channel is entered to claim: a taker claims under its channel's
 * lock, and whoever loses leaves the co alone.) */
static void select_abort(aco_rt_co_t* co, int err) {
    if (!rt_claim(co)) return;          /* a case fired: its wake is on the way */
    unqueue(co->x);
    rt_wake(co, err);
}

RT_WAIT_KINDS(chan,
              {RT_W_CHAN_SEND, {"chan_send", rt_abort_shared, NULL}},
              {RT_W_CHAN_RECV, {"chan_recv", rt_abort_shared, NULL}},
              {RT_W_CHAN_SEND_D, {"chan_send", chan_abort, chan_forget}},
              {RT_W_CHAN_RECV_D, {"chan_recv", chan_abort, chan_forget}},
              {RT_W_SELECT, {"select", select_abort, NULL}})

int aco_rt_chan_select(aco_rt_case_t* cases, int n, int* err, int64_t deadline) {
    aco_rt_co_t* me = rt_self();
    if (me == NULL) return -EPERM;
    if (cases == NULL || n < 1) return -EINVAL;
    if (rt_co_cancelled(me)) return -ECANCELED;
    size_t send_bytes = 0, recv_max = 0;
    int huge = 0;
    for (int i = 0; i < n; i++) {
        aco_rt_case_t* c = &cases[i];
        if (c->ch == NULL || c->elem == NULL || (c->op != ACO_RT_SEND && c->op != ACO_RT_RECV))
            return -EINVAL;
        if (c->op == ACO_RT_SEND)
            huge |= __builtin_add_overflow(send_bytes, c->ch->elem_size, &send_bytes);
        else if (c->ch->elem_size > recv_max) recv_max = c->ch->elem_size;
    }
    /* Room for the waiters, the locks, the cases' element sizes, the send
     * elements and the receive slot, in the co's heap block (kept: no
     * allocation next time).  Sizes whose sum passes SIZE_MAX fit in no
     * memory: -ENOMEM, not the small block the sum wraps round to, which
     * the wait would copy the elements into (n waiters too, on i386). */
    size_t sizes_bytes = (size_t)n * sizeof(size_t), room;
    if (huge || (size_t)n > SIZE_MAX / sizeof(rt_waiter_t) ||
        __builtin_add_overflow(sizes_bytes, send_bytes, &room) ||
        __builtin_add_overflow(room, recv_max, &room))
        return -ENOMEM;
    rt_extra_t* x = rt_extra(me, room);
    if (x == NULL) return -ENOMEM;
    if (x->selw_cap < n) {
        rt_waiter_t* ws = realloc(x->selw, (size_t)n * sizeof(*ws));
        if (ws == NULL) return -ENOMEM;
        x->selw = ws;
        uint32_t** ls = realloc(x->sellocks, (size_t)n * sizeof(*ls));
        if (ls == NULL) return -ENOMEM;
        x->sellocks = ls;
        x->selw_cap = n;
    }
    int k = select_locks(cases, n, x->sellocks);
    lock_all(x->sellocks, k);
    /* A case that can go on now, in order. */
    rt_waiter_t* wk = NULL;
    int got = -1, e = 0;
    for (int i = 0; i < n && got < 0; i++) {
        aco_rt_case_t* c = &cases[i];
        if (c->op == ACO_RT_SEND) {
            if (c->ch->closed) { got = i; e = -EPIPE; }
            else if (send_now(c->ch, c->elem, &wk)) got = i;
        } else {
            rt_waiter_t* w = recv_now(c->ch, c->elem);
            if (w) {
                got = i;
                if (w != RECV_NOBODY) wk = w;
            } else if (c->ch->closed) {
                got = i;
                e = -EPIPE;
            }
        }
    }
    int r = got >= 0 ? got : rt_may_block(me, deadline);
    if (r != 0 || got == 0) {
        size_t wn = got >= 0 ? cases[got].ch->elem_size : 0;
        aco_rt_sched_t* ds = got >= 0 ? cases[got].ch->direct_s : NULL;
        unlock_all(x->sellocks, k);
        if (wk && cases[got].op == ACO_RT_SEND) fire_recv(wk, cases[got].elem, wn, ds, rt_tls_sched);
        else if (wk) fire(wk, 0, ds);
        if (got >= 0 && err) *err = e;
        return r;
    }
    /* Wait on every case: send elements and the receive slot in the heap,
     * and each case's element size (no channel is read after the wake). */
    memset(x->selw, 0, (size_t)n * sizeof(*x->selw));
    x->seln = n;
    x->selk = k;
    size_t* sizes = (size_t*)x->buf;
    char* p = (char*)x->buf + sizes_bytes;
    char* rslot = p + send_bytes;
    rt_claim_reset(me);
    for (int i = 0; i < n; i++) {
        aco_rt_case_t* c = &cases[i];
        rt_waiter_t* w = &x->selw[i];
        w->co = me;
        w->idx = i;
        sizes[i] = c->ch->elem_size;
        if (c->op == ACO_RT_SEND) {
            rt_copy(p, c->elem, c->ch->elem_size);
            w->slot = p;
            p += c->ch->elem_size;
            rt_wq_push_locked(&c->ch->sendq, w, &c->ch->lock);
        } else {
            w->slot = rslot;
            rt_wq_push_locked(&c->ch->recvq, w, &c->ch->lock);
        }
    }
    unlock_all(x->sellocks, k);
    r = rt_park(me, RT_W_SELECT, cases, deadline);
    /* The case that fired took its waiter; the others go now. */
    unqueue(x);
    if (r < 0) return r;
    if (err) *err = x->sel_err;
    if (cases[r].op == ACO_RT_RECV && x->sel_err == 0)
        rt_copy(cases[r].elem, rslot, sizes[r]);
    return r;
}
