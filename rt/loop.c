/* loop.c - the scheduler's loop, with co.c the runtime's kernel: parking
 * and waking, the wait kinds, the inbox that other threads send to and the
 * mailboxes of a pool's threads, hand-offs, sleep and yield, the program's
 * timers, counters.  A scheduler is made and freed in sched.c.
 *
 * The loop runs in the thread's libaco main co.  It resumes ready cos in
 * FIFO order; a co comes back to it when it parks (blocks in a call), yields
 * or ends.  When nothing is ready it asks the backend to wait for I/O until
 * the first timer is due.  Every 64 resumes it also looks for I/O and timers
 * without waiting, so busy cos cannot starve them.
 *
 * Parking.  A co that blocks has first put its waiter (co->w, in its heap
 * record) where the waker will find it, then calls rt_park(), which arms
 * the deadline and yields.  rt_wake(co, res) makes it ready with res as the
 * result of its call.  A deadline or a cancel calls rt_abort, which takes
 * the co out of where it waits and wakes it, at once or (io_uring) when the
 * kernel has let go of the operation.
 *
 * Cos themselves (spawn, join, detach, cancel, their records) are in co.c,
 * and what pool threads exchange (batched spawns, stealing) too.
 */
#define _GNU_SOURCE
#include "rt_impl.h"
#include "rt_sys.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

RT_TLS aco_rt_sched_t* rt_tls_sched;
uint32_t rt_nsched;

#define POLL_EVERY RT_POLL_EVERY
#define SPIN_MAX_NS 50000          /* an idle thread's spin: idle() */
#define SPIN_MIN_NS 2000

int64_t aco_rt_now(void) { return rt_now(); }

/* ------------------------------------------------------------------------ */
/* Ready queue, park, wake (the inline halves are in rt_impl.h)             */
/* ------------------------------------------------------------------------ */

#define rq_pop rt_rq_pop

static void sleep_abort(aco_rt_co_t* co, int err);

/* Every wait kind, registered by its owner (rt_impl.h); the kernel's own
 * two are here from the start. */
static const rt_wait_kind_t join_kind = {"join", rt_join_abort, NULL};
static const rt_wait_kind_t sleep_kind = {"sleep", sleep_abort, NULL};
const rt_wait_kind_t* rt_wait_kinds[RT_W_MAX] = {[RT_W_JOIN] = &join_kind,
                                                 [RT_W_SLEEP] = &sleep_kind};

void rt_wait_kind(unsigned id, const rt_wait_kind_t* k) { rt_wait_kinds[id] = k; }

void rt_abort(aco_rt_co_t* co, int err) { rt_wait_kinds[co->wait]->abort(co, err); }

void rt_tmo_fire(aco_rt_timer_t* t) {
    aco_rt_co_t* co = rt_container_of(t, aco_rt_co_t, tmo);
    co->s->st.timers--;
    if (co->state == RT_PARKED) rt_abort(co, -ETIMEDOUT);
}

void rt_abort_waitq(aco_rt_co_t* co, int err) {
    if (co->w.q) rt_wq_remove(&co->w);
    rt_wake(co, err);
}

void rt_abort_shared(aco_rt_co_t* co, int err) {
    /* The claim first, without the object: a waker that won it may be of
     * another thread, back in the program, which may have freed the
     * object since (its wake is on the way, maybe via the inbox). */
    if (!rt_claim(co)) return;
    uint32_t* lock = co->w.lock;
    rt_lock(lock);
    if (co->w.q) rt_wq_remove(&co->w);     /* (a taker that lost left it) */
    rt_unlock(lock);
    rt_wake(co, err);
}

/* (rt_wq_take's loop: see rt_impl.h) */
rt_waiter_t* rt_wq_take_from(rt_waiter_t* w) {
    while (w != NULL) {
        /* The claim is a cache line past w's first (its co's, if it is
         * the co's own waiter): ask for both at once, not one after the
         * other (a prefetch never faults, should w be a select's). */
        rt_prefetch_w((void*)((uintptr_t)w + offsetof(aco_rt_co_t, claim)));
        aco_rt_co_t* co = w->co;
        rt_waiter_t* next = w->next;
        if (rt_likely(w == &co->w) && rt_likely(co->s == rt_tls_sched)) {
            rt_wq_remove(w);
            if (rt_load(&co->claim) == 0) {
                rt_store(&co->claim, (uint8_t)1);
                return w;
            }
        } else {
            /* (held before w leaves the queue: see rt_wq_remove) */
            aco_rt_sched_t* far = co->s != rt_tls_sched ? co->s : NULL;
            if (far) rt_hold(far);
            if (rt_claim(co)) {
                rt_wq_remove(w);
                return w;
            }
            if (far) rt_hold_end(far);
        }
        w = next;
    }
    return NULL;
}
/* ------------------------------------------------------------------------ */
/* Inbox: what other threads send                                           */
/* ------------------------------------------------------------------------ */

static void inbox_init(rt_inbox_t* q) {
    q->stub.next = NULL;
    q->head = q->tail = &q->stub;
}

static void inbox_push(rt_inbox_t* q, rt_msg_t* m) {
    __atomic_store_n(&m->next, NULL, __ATOMIC_RELAXED);
    /* seq_cst: ordered before the sleeping flag's load in rt_sched_send */
    rt_msg_t* prev = __atomic_exchange_n(&q->tail, m, __ATOMIC_SEQ_CST);
    __atomic_store_n(&prev->next, m, __ATOMIC_RELEASE);
}

/* The oldest message, NULL if none, RT_INBOX_BUSY if a push is half done. */
static rt_msg_t* inbox_pop(rt_inbox_t* q) {
    rt_msg_t* head = q->head;
    rt_msg_t* next = __atomic_load_n(&head->next, __ATOMIC_ACQUIRE);
    if (head == &q->stub) {
        if (next == NULL)
            return __atomic_load_n(&q->tail, __ATOMIC_ACQUIRE) == head ? NULL : RT_INBOX_BUSY;
        /* The record's fields drain reads next (its state, its result) are
         * a cache line past the node, another thread's write: ask now. */
        rt_prefetch_w((void*)((uintptr_t)next + offsetof(aco_rt_co_t, res)));
        q->head = head = next;
        next = __atomic_load_n(&next->next, __ATOMIC_ACQUIRE);
    }
    if (next) { q->head = next; return head; }
    if (__atomic_load_n(&q->tail, __ATOMIC_ACQUIRE) != head) return RT_INBOX_BUSY;
    inbox_push(q, &q->stub);            /* head is the last: put the stub behind */
    next = __atomic_load_n(&head->next, __ATOMIC_ACQUIRE);
    if (next) { q->head = next; return head; }
    return RT_INBOX_BUSY;
}

static inline int inbox_empty(rt_inbox_t* q) {
    return q->head == &q->stub &&
           __atomic_load_n(&q->tail, __ATOMIC_SEQ_CST) == &q->stub;
}

/* Wake s's thread if it sleeps (or is about to). */
void rt_notify(aco_rt_sched_t* s) {
    /* Dekker: what was asked (the inbox's tail, stop, cancel_gen) is
     * stored seq_cst before the flag is read; idle() stores the flag before
     * it looks at them, seq_cst too: one of the two sees the other. */
    if (__atomic_load_n(&s->mail.sleeping, __ATOMIC_SEQ_CST) &&
        __atomic_exchange_n(&s->mail.sleeping, 0, __ATOMIC_SEQ_CST)) {
        uint64_t one = 1;
        ssize_t r;
        do r = rt_sys_write(s->run.evfd, &one, sizeof(one)); while (r < 0 && errno == EINTR);
    }
}

/* m is co->msg (kind: what it says) or co->cmsg (RT_MSG_CANCEL).  s's
 * thread may take m, finish its run and free s before rt_notify has read
 * s's flag: senders counts the sends under way (the push's release puts
 * the count before m), and rt_sched_quiesce waits for them. */
void rt_send(aco_rt_sched_t* s, rt_msg_t* m, int kind) {
    if (kind != RT_MSG_CANCEL) rt_container_of(m, aco_rt_co_t, msg)->msg_kind = (uint8_t)kind;
    __atomic_fetch_add(&s->mail.senders, 1u, __ATOMIC_RELAXED);
    inbox_push(&s->mail.inbox, m);
    rt_notify(s);
    __atomic_fetch_sub(&s->mail.senders, 1u, __ATOMIC_RELEASE);
}

/* Wait until no other thread is in rt_send to s or holds s. */
void rt_sched_quiesce(aco_rt_sched_t* s) {
    while (__atomic_load_n(&s->mail.senders, __ATOMIC_ACQUIRE) & ~RT_FREEING) sched_yield();
}

void rt_hold_far(aco_rt_sched_t* s) {
    __atomic_fetch_add(&s->mail.senders, 1u, __ATOMIC_ACQUIRE);
}

/* The hold and the look at RT_FREEING are one read-modify-write of the
 * word that rt_kernel_drop_cos sets RT_FREEING in: either the free's
 * quiesce counts this hold, or this hold sees the bit (a second load of
 * a flag beside it cost a cross-thread hand-off 40 ns: xpingpong). */
int rt_hold_try_far(aco_rt_sched_t* s) {
    if (rt_likely(!(__atomic_fetch_add(&s->mail.senders, 1u, __ATOMIC_ACQUIRE) & RT_FREEING)))
        return 1;
    rt_hold_end_far(s);
    return 0;
}

void rt_hold_end_far(aco_rt_sched_t* s) {
    __atomic_fetch_sub(&s->mail.senders, 1u, __ATOMIC_RELEASE);
}

/* ------------------------------------------------------------------------ */
/* Mailboxes: wakes between the threads of a pool                           */
/* ------------------------------------------------------------------------ */

/* A wake through the inbox costs the receiving thread the woken record's
 * cache lines, written by the waker (the message node is in it), besides
 * the inbox's.  Between two threads of a pool a wake goes instead in a
 * slot of a ring that one thread writes and the other reads: the co, the
 * result, and for a channel receive the element, in one line that the
 * receiver reads.  A ring is made at a thread's first wake of a co of that
 * sibling, put on the sibling's list (mb_in), and freed with the sibling's
 * scheduler (aco_rt_sched_free: past the pool's barrier nobody sends).  A
 * full ring, a ring the heap refused, and a waker outside the pool use the
 * inbox, and so do pools of more than RT_MB_POOL_MAX threads (a thread
 * scans its mailboxes whenever it looks for messages, and a pool that wakes
 * all to all would have a mailbox per pair of threads).  A co has one wake
 * at most on its way (it was claimed, or taken off a channel, once): the
 * two paths need no order between them. */
#define RT_MB_SLOTS 16      /* a power of 2 */
#define RT_MB_POOL_MAX 64
typedef struct rt_mslot {
    _Alignas(32) uintptr_t co;  /* the co, | 1 if val is for its w.box */
    uint64_t       val;
    int32_t        res;
    uint32_t       seq;         /* atomic: i + 1 once message i is in */
} rt_mslot_t;
/* The sender alone writes the slots, the receiver alone next: a message
 * moves one cache line, once.  The sender reads next only when the slots
 * it knows free are used up (rt_outbox_t.mb_free). */
typedef struct rt_mbox {
    rt_mslot_t      slot[RT_MB_SLOTS];
    _Alignas(64) uint32_t next; /* atomic: the next index the receiver reads */
    struct rt_mbox* next_in;    /* the receiver's list (mb_in) */
} rt_mbox_t;

__attribute__((noinline))
static rt_mbox_t* mbox_new(aco_rt_sched_t* to, rt_outbox_t* o) {
    rt_mbox_t* mb = aligned_alloc(64, sizeof(*mb));
    if (mb == NULL) return NULL;
    memset(mb, 0, sizeof(*mb));
    mb->next_in = __atomic_load_n(&to->mail.mb_in, __ATOMIC_RELAXED);
    /* seq_cst, as the load in mbox_ready: a thread going to sleep stores
     * its flag, then looks (idle); the first message of a new mailbox must
     * not be missed by a load ordered before that store */
    while (!__atomic_compare_exchange_n(&to->mail.mb_in, &mb->next_in, mb, 1, __ATOMIC_SEQ_CST,
                                        __ATOMIC_RELAXED)) {}
    o->mb = mb;
    o->mb_free = RT_MB_SLOTS;
    return mb;
}

/* Send co's wake (res; the element at elem, n bytes, for its w.box if elem
 * is not NULL) in the mailbox from this thread to co's: 0 if it cannot. */
static int mbox_send(aco_rt_co_t* co, aco_rt_sched_t* to, int res, const void* elem, size_t n) {
    aco_rt_sched_t* me = rt_tls_sched;
    if (me == NULL || me->pooled.pool == NULL ||
        __atomic_load_n(&to->pooled.pool, __ATOMIC_RELAXED) != me->pooled.pool || to->pooled.idx >= me->pooled.noutbox ||
        me->pooled.noutbox > RT_MB_POOL_MAX)
        return 0;
    rt_outbox_t* o = &me->pooled.outbox[to->pooled.idx];
    rt_mbox_t* mb = o->mb;
    if (rt_unlikely(mb == NULL) && (mb = mbox_new(to, o)) == NULL) return 0;
    uint32_t i = o->mb_next;
    if (rt_unlikely(o->mb_free == 0)) {
        /* acquire: the receiver is done with the slots it passed */
        o->mb_free = RT_MB_SLOTS - (i - __atomic_load_n(&mb->next, __ATOMIC_ACQUIRE));
        if (o->mb_free == 0) return 0;      /* full */
    }
    o->mb_free--;
    rt_mslot_t* sl = &mb->slot[i & (RT_MB_SLOTS - 1)];
    sl->co = (uintptr_t)co | (elem != NULL);
    sl->res = res;
    if (elem) memcpy(&sl->val, elem, n);
    /* seq_cst: ordered before the sleeping flag's load in rt_notify */
    __atomic_store_n(&sl->seq, i + 1, __ATOMIC_SEQ_CST);
    o->mb_next = i + 1;
    rt_notify(to);
    return 1;
}

/* Is a wake waiting in one of s's mailboxes? */
static inline int mbox_ready(aco_rt_sched_t* s) {
    for (rt_mbox_t* mb = __atomic_load_n(&s->mail.mb_in, __ATOMIC_SEQ_CST); mb; mb = mb->next_in) {
        uint32_t i = mb->next;
        if (__atomic_load_n(&mb->slot[i & (RT_MB_SLOTS - 1)].seq, __ATOMIC_SEQ_CST) == i + 1)
            return 1;
    }
    return 0;
}

/* Wake the cos of s's mailboxes' messages: non-zero if there were some. */
static int mbox_drain(aco_rt_sched_t* s) {
    int got = 0;
    for (rt_mbox_t* mb = __atomic_load_n(&s->mail.mb_in, __ATOMIC_ACQUIRE); mb; mb = mb->next_in) {
        for (;;) {
            uint32_t i = mb->next;
            rt_mslot_t* sl = &mb->slot[i & (RT_MB_SLOTS - 1)];
            if (__atomic_load_n(&sl->seq, __ATOMIC_ACQUIRE) != i + 1) break;
            uintptr_t c = sl->co;
            int res = sl->res;
            uint64_t val = sl->val;
            __atomic_store_n(&mb->next, i + 1, __ATOMIC_RELEASE);   /* the slot is free */
            aco_rt_co_t* co = (aco_rt_co_t*)(c & ~(uintptr_t)1);
            if (c & 1) memcpy(&co->w.box, &val, sizeof(val));
            rt_wake(co, res);
            got = 1;
        }
    }
    return got;
}

static void mbox_free_all(aco_rt_sched_t* s) {
    rt_mbox_t* mb = s->mail.mb_in;
    s->mail.mb_in = NULL;
    while (mb) {
        rt_mbox_t* next = mb->next_in;
        free(mb);
        mb = next;
    }
}

/* The inbox's wake: through co's record. */
static void inbox_wake(aco_rt_co_t* co, aco_rt_sched_t* to, int res) {
    co->res = res;
    rt_send(to, &co->msg, RT_MSG_WAKE);
}

void rt_wake_remote_to(aco_rt_co_t* co, aco_rt_sched_t* to, int res) {
    if (!mbox_send(co, to, res, NULL, 0)) inbox_wake(co, to, res);
    rt_hold_end(to);
}

void rt_wake_remote(aco_rt_co_t* co, int res) {
    rt_wake_remote_to(co, co->s, res);
}

void rt_wake_remote_box(aco_rt_co_t* co, aco_rt_sched_t* to, const void* elem, size_t n) {
    if (!mbox_send(co, to, 0, elem, n)) {
        rt_copy(&co->w.box, elem, n);
        inbox_wake(co, to, 0);
    }
    rt_hold_end(to);
}

/* ------------------------------------------------------------------------ */
/* Scheduler                                                                */
/* ------------------------------------------------------------------------ */

aco_rt_sched_t* aco_rt_sched_current(void) { return rt_tls_sched; }

const char* aco_rt_backend_name(const aco_rt_sched_t* s) {
    return s ? s->backend.ops->name : NULL;
}

static RT_TLS int rt_thread_inited;

/* Destroy our own main co, and free its memory. */
static void main_free(aco_t* m) {
    aco_destroy(m);
    aco_free(m, aco_co_size(0));
}

/* The kernel's part of a new scheduler s (zeroed, its options in o): its
 * eventfd, inbox, share stacks (made lazily) and main co.  0 or -errno;
 * rt_kernel_fini undoes it. */
int rt_kernel_init(aco_rt_sched_t* s, const aco_rt_opts_t* o) {
    s->run.evfd = eventfd(0, EFD_CLOEXEC);    /* blocking: io_uring reads it asynchronously */
    if (s->run.evfd < 0) return -errno;
    inbox_init(&s->mail.inbox);
    s->run.spin_ns = SPIN_MAX_NS;
    s->run.checked = aco_checked() != 0;
    if (!rt_thread_inited && aco_gtls_co == NULL) {
        aco_thread_init(NULL);
        rt_thread_inited = 1;
    }
    /* The thread's main co if the program made one, else our own, in
     * memory of ours (aco_create aborts without). */
    int ok = rt_recs_init(s, o) == 0;
    if (ok && aco_gtls_co != NULL && aco_is_main_co(aco_gtls_co)) {
        s->run.main_co = aco_gtls_co;
    } else if (ok) {
        void* m = aco_alloc(aco_co_size(0));
        if (m) s->run.main_co = aco_create_main_in(m, aco_co_size(0), NULL);
        s->run.own_main = 1;
    }
    if (s->run.main_co == NULL) {
        rt_sys_close(s->run.evfd);
        rt_recs_fini(s);
        return -ENOMEM;
    }
    return 0;
}

void rt_kernel_fini(aco_rt_sched_t* s) {
    rt_recs_fini(s);
    if (s->run.own_main) main_free(s->run.main_co);
    rt_sys_close(s->run.evfd);
}

/* ------------------------------------------------------------------------ */
/* The loop                                                                 */
/* ------------------------------------------------------------------------ */

/* A co ended: count it, learn its save stack's size, free its record if
 * nobody will join it. */
static void co_ended(aco_rt_sched_t* s, aco_rt_co_t* co) {
    s->st.cos_alive--;
    if (s->st.cos_alive == 0 && s->pooled.pool) {
        /* seq_cst: aco_rt_pool_wait counts itself in, then looks at load */
        __atomic_exchange_n(&s->ld.load, 0u, __ATOMIC_SEQ_CST);
        rt_idle_tell(s->pooled.idle);
    } else {
        rt_publish_load(s);
    }
    co->state = RT_DONE;
    rt_guess_learn(s, co);
    if (co->flags & RT_DETACHED) rt_record_free(s, co);
}

/* The watched line (rt_watch_t): a hand-over picked up (1), or the last
 * one's end done. */
static int watch_drain(aco_rt_sched_t* s) {
    if (s->run.watch.picked) {
        s->run.watch.ops->end(s);
        return 0;
    }
    if (!rt_watch_due(s)) return 0;
    s->run.watch.ops->pick(s);
    return 1;
}

/* Everything other threads sent.  Non-zero if there was something. */
static int drain(aco_rt_sched_t* s) {
    int got = 0;
    if (__atomic_load_n(&s->cl.list, __ATOMIC_RELAXED)) got = rt_hook_closes(s);
    if (__atomic_load_n(&s->mail.mb_in, __ATOMIC_RELAXED)) got |= mbox_drain(s);
    if (s->run.watch.state) got |= watch_drain(s);
    for (;;) {
        rt_msg_t* m = inbox_pop(&s->mail.inbox);
        if (m == NULL) return got;
        if (m == RT_INBOX_BUSY) {       /* a sender between its two steps */
            sched_yield();
            continue;
        }
        got = 1;
        int cancel = RT_MSG_IS_CANCEL(m);
        aco_rt_co_t* co = cancel ? rt_container_of(m, aco_rt_co_t, cmsg)
                                 : rt_container_of(m, aco_rt_co_t, msg);
        int kind = cancel ? RT_MSG_CANCEL : co->msg_kind;
        switch (kind) {
        case RT_MSG_WAKE:   rt_wake(co, co->res); break;
        case RT_MSG_SPAWN:  rt_spawn_arrived(s, co); break;
        case RT_MSG_FREE:   rt_record_free(s, co); break;
        case RT_MSG_CANCEL:
            if (rt_load(&co->cancel_sent) != RT_CANCEL_TAKEN) rt_cancel_local(co);
            rt_store(&co->cancel_sent, (uint8_t)RT_CANCEL_DONE);
            if (co->flags & RT_FREE_LATER) rt_record_free(s, co);
            break;
        }
    }
}

/* libaco aborts if it finds no memory to copy out the frames of the co
 * on a's share stack: get it now (0), or a waits aside (below).
 * While cos wait so, the memory is not looked for again until they are
 * retried: one malloc that fails per retry, not one per ready co. */
static inline int may_take(aco_rt_sched_t* s, aco_t* a) {
    aco_t* owner = a->share_stack->owner;
    if (rt_likely(owner == a || owner == NULL)) return 0;
    return rt_unlikely(s->run.starved_head != NULL) ? -ENOMEM : aco_resume_reserve(a);
}

/* A pool's cancel request (aco_rt_pool_wait(CANCEL)): its generation
 * first, then the inbox, then every co.  A spawn another thread sent
 * before the request was pushed before the generation grew (both seq_cst),
 * so the drain after seeing the generation finds it; a drain before could
 * miss it, and it would then start uncancelled after the pool's cancel. */
static void cancel_all(aco_rt_sched_t* s) {
    uint32_t gen = __atomic_load_n(&s->ask.cancel_gen, __ATOMIC_SEQ_CST);
    drain(s);
    rt_cancel_all(s, gen);
}

/* Out of memory for the frames of the co on co's share stack (run_co):
 * co waits aside (rt_rq_aside: still ready) and is tried again after
 * every POLL_EVERY resumes that ran a co, and when the loop would sleep,
 * after a pause (never in a spin: a try is a malloc).  unstarve: the
 * starved cos back on the ready queue, first to last. */
static void unstarve(aco_rt_sched_t* s) {
    s->run.starved_seen = s->st.switches;
    rt_rq_unaside(s);
}

/* Pauses before a retry of starved cos while nothing else is due: 1 ms,
 * doubling to 128; after STARVED_ROUNDS of them in a row in which no co
 * ran, with nothing else that could free memory (no I/O, timer, or other
 * scheduler: as for -EDEADLK), the run gives up with -ENOMEM. */
#define STARVED_PAUSE_MAX 7
#define STARVED_ROUNDS 10

static void run_co(aco_rt_sched_t* s, aco_rt_co_t* co) {
    if (may_take(s, rt_aco(co)) < 0) {
        rt_rq_aside(s, co);
        return;
    }
    s->run.cur = co;
    co->state = RT_RUNNING;
    s->st.switches++;
    aco_resume(rt_aco(co));
    /* Back: co, or the co the last hand-off ran (rt_handoff_next). */
    co = s->run.cur;
    s->run.cur = NULL;
    /* What it spawned is published before it may count as ended (pool_wait). */
    if (s->pooled.out_pending) rt_newq_flush(s);
    if (rt_aco(co)->is_end) co_ended(s, co);
}

/* Timers already due fire before the poll reaps I/O (as libuv's loop
 * does): a co whose deadline or sleep ended then runs ahead of a burst of
 * cos that completions wake, not behind it.  errno is kept: it is the
 * thread's, which its cos share, and the backend's calls (an epoll_wait
 * that a signal ended with EINTR) must not show up in the errno of a co
 * that parked with another value and set none since. */
static int poll_once(aco_rt_sched_t* s, int64_t timeout) {
    int e = errno;
    if (timeout == 0 && s->wheel.armed) rt_wheel_advance(&s->wheel, rt_now());
    int r = s->backend.ops->poll(s, timeout);
    if (s->wheel.armed) rt_wheel_advance(&s->wheel, rt_now());
    errno = e;
    return r;
}

/* Nothing is ready: spin a little if other threads have been sending (the
 * next message is likely soon, and a sleep and a wake cost microseconds);
 * then sleep in the backend until I/O, a timer or an eventfd write from a
 * sender (notify) comes.  The spin adapts: one that found nothing makes
 * the next a quarter shorter, down to SPIN_MIN_NS, and one that found a
 * message doubles it, up to SPIN_MAX_NS; at the least, only one idle in 8
 * spins (a probe: the spin grows again once one pays), the others sleep at
 * once.  Where the thread a spinner waits for cannot run while it spins
 * (both on one CPU: a busy machine, a CPU quota, a pool larger than the
 * CPUs it may use), every spin is in vain, and a fixed 50 us one was paid
 * per message: aco_rt_bench xpingpong_1cpu, 121 us a round trip with it,
 * 17 us now (a futex hand-over between two plain threads there: 6.4 us; Zen 3,
 * docs/benchmarks.md).
 * A sched_yield after a spin in vain measured worse: it gives the CPU to a
 * busy-waiting thread for its whole slice (rt_test_fd_identity, whose main
 * thread spins for a co to start: 10 s and 12 CPU s, against 4.5 and 0.5). */
/* Has another thread asked something of s? */
static inline int asked(aco_rt_sched_t* s) {
    return !inbox_empty(&s->mail.inbox) || mbox_ready(s) || rt_watch_due(s) || __atomic_load_n(&s->ask.stop, __ATOMIC_SEQ_CST) ||
           __atomic_load_n(&s->cl.list, __ATOMIC_SEQ_CST) != NULL ||
           __atomic_load_n(&s->ask.cancel_gen, __ATOMIC_SEQ_CST) != s->pooled.cancel_seen ||
           (s->pooled.noutbox && rt_sibling_work(s)) ||
           (s->run.others_only && __atomic_load_n(&rt_nsched, __ATOMIC_SEQ_CST) == 1);
}

static int idle(aco_rt_sched_t* s, int64_t timeout, int* hot) {
    if (*hot && timeout != 0) {
        *hot = 0;
        /* (at the least spin, one idle in 8 spins: the probe) */
        if (s->run.spin_ns <= SPIN_MIN_NS && (++s->run.spin_skips & 7) != 0) goto sleep_now;
        int bounded = timeout > 0 && timeout < s->run.spin_ns;
        /* (no longer than the first timer is away: the spin's time comes
         * off the wait after it, so a timer due meanwhile is not late) */
        /* The clock is read from the 64th pause on (a read costs as much as
         * a cross-thread message here: aco_rt_bench wake's clock_ns), or
         * at once when a timer bounds the spin. */
        int64_t t0 = 0, end = 0, spin = s->run.spin_ns;
        if (timeout > 0) {
            if (timeout < spin) spin = timeout;
            t0 = rt_now();
            end = t0 + spin;
        }
        for (unsigned i = 1;; i++) {
            if (!inbox_empty(&s->mail.inbox) || mbox_ready(s) || rt_watch_due(s)) goto found;
            rt_pause();     /* (one: more make a VM deschedule the vCPU) */
            if ((i & 63) == 0) {
                if (asked(s)) goto found;
                int64_t now = rt_now();
                if (t0 == 0) t0 = now, end = now + spin;
                else if (now >= end) break;
            }
        }
        if (asked(s)) goto found;
        /* in vain: the next spin is a quarter shorter (not when a timer cut
         * this one short) */
        if (!bounded) s->run.spin_ns = s->run.spin_ns / 4 * 3 > SPIN_MIN_NS ? s->run.spin_ns / 4 * 3 : SPIN_MIN_NS;
        if (timeout > 0) {
            int64_t spent = rt_now() - t0;
            timeout = timeout > spent ? timeout - spent : 0;
        }
    }
sleep_now:
    __atomic_store_n(&s->mail.sleeping, 1, __ATOMIC_SEQ_CST);
    if (asked(s)) {
        __atomic_store_n(&s->mail.sleeping, 0, __ATOMIC_RELAXED);
        return 0;
    }
    int r = poll_once(s, timeout);
    __atomic_store_n(&s->mail.sleeping, 0, __ATOMIC_RELAXED);
    return r;
found:
    /* it paid: the next one is twice as long, up to SPIN_MAX_NS */
    s->run.spin_ns = s->run.spin_ns < SPIN_MAX_NS / 2 ? s->run.spin_ns * 2 : SPIN_MAX_NS;
    return 0;
}

/* rt_handoff_next (rt_impl.h) when co's share stack is not its own (or in
 * checked mode): what run_co does before aco_resume, from the running co. */
aco_rt_co_t* rt_handoff_take(aco_rt_sched_t* s, aco_rt_co_t* co) {
    aco_t* a = rt_aco(co);
    if (a->share_stack == rt_aco(s->run.cur)->share_stack) return NULL;
    if (s->run.checked ? aco_resume_reserve(a) < 0 : may_take(s, a) < 0)
        return NULL;    /* the loop retries */
    return rt_handoff_go(s, co);
}

int aco_rt_sched_run(aco_rt_sched_t* s) {
    if (s == NULL) return -EINVAL;      /* (aco_rt.h's rule for NULL) */
    if (s != rt_tls_sched || s->run.running || aco_gtls_co != s->run.main_co) return -EPERM;
    s->run.running = 1;
    int r = 0, hot = 0;
    s->run.since_poll = 0;
    while (!rt_load(&s->ask.stop)) {
        aco_rt_co_t* co;
        while ((co = rq_pop(s)) != NULL) {
            run_co(s, co);
            /* I/O, timers and other threads get their turn among busy cos. */
            if (++s->run.since_poll >= POLL_EVERY) {
                s->run.since_poll = 0;
                if ((s->st.io_inflight || s->wheel.armed) && (r = poll_once(s, 0)) < 0) goto out;
                drain(s);
                if (rt_unlikely(s->run.starved_head != NULL) && s->st.switches != s->run.starved_seen)
                    unstarve(s);
                if (rt_unlikely(rt_load(&s->ask.cancel_gen) != s->pooled.cancel_seen)) cancel_all(s);
                /* (a spawner that never blocks: its new cos get a turn) */
                if (__atomic_load_n(&s->newq.n, __ATOMIC_RELAXED)) rt_take_new(s, s, 1);
            }
            if (rt_load(&s->ask.stop)) goto out;
        }
        if (drain(s)) { hot = 1; continue; }
        if (__atomic_load_n(&s->newq.n, __ATOMIC_RELAXED) && rt_take_new(s, s, 1)) continue;
        if (s->pooled.noutbox && rt_steal(s)) { hot = 1; continue; }
        if (rt_unlikely(rt_load(&s->ask.cancel_gen) != s->pooled.cancel_seen)) { cancel_all(s); continue; }
        if (s->st.cos_alive == 0 && s->pooled.pool == NULL) break;
        int64_t timeout = s->wheel.armed ? rt_wheel_timeout(&s->wheel, rt_now()) : -1;
        s->run.others_only = timeout < 0 && s->st.io_inflight == 0 && s->offloads == 0 &&
                         s->pooled.pool == NULL;
        if (rt_unlikely(s->run.starved_head != NULL)) {
            /* rounds: pauses in a row in which no co ran at all */
            unsigned k = s->st.switches == s->run.starved_seen ? ++s->run.starved_rounds
                                                               : (s->run.starved_rounds = 0);
            if (k >= STARVED_ROUNDS && s->run.others_only &&
                __atomic_load_n(&rt_nsched, __ATOMIC_SEQ_CST) == 1) {
                r = -ENOMEM;
                break;
            }
            int64_t pause = (int64_t)1000000 << (k < STARVED_PAUSE_MAX ? k : STARVED_PAUSE_MAX);
            hot = 0;
            s->run.others_only = 0;
            if ((r = idle(s, timeout < 0 || timeout > pause ? pause : timeout, &hot)) < 0) break;
            unstarve(s);
            continue;
        }
        if (s->run.others_only && __atomic_load_n(&rt_nsched, __ATOMIC_SEQ_CST) == 1) {
            /* Every co waits on another co, and nothing else can wake one:
             * but a scheduler freed since the drain above may have woken or
             * spawned one, or stopped this run, before it went (its send
             * came before its count went down, both seq_cst): look once
             * more. */
            if (drain(s) || rt_load(&s->ask.stop) ||
                (__atomic_load_n(&s->newq.n, __ATOMIC_SEQ_CST) && rt_take_new(s, s, 1)))
                continue;
            r = -EDEADLK;
            break;
        }
        /* a thief pays back the records it owes before it waits */
        if (s->pooled.owed && s->recs.free_recs) rt_rec_pay_all(s);
        /* Cos that wait on helper threads (offload, the file calls on
         * epoll) are not worth a spin: their work takes a disk's time, and
         * on a busy machine the spin takes the CPU a helper needs (measured:
         * O_DIRECT reads on epoll at 3.4x fio's CPU per read with it) */
        if (s->offloads) hot = 0;
        if ((r = idle(s, timeout, &hot)) < 0) break;
    }
out:
    if (s->run.starved_head) unstarve(s);      /* (as they were: ready) */
    /* A stop is used up by the run it ends; one asked before the run began
     * ends it at once (another thread's stop may come just before). */
    if (rt_load(&s->ask.stop)) __atomic_exchange_n(&s->ask.stop, 0, __ATOMIC_SEQ_CST);
    s->run.running = 0;
    return r;
}

void rt_cancel_ask(aco_rt_sched_t* s) {
    __atomic_fetch_add(&s->mail.senders, 1u, __ATOMIC_RELAXED);     /* (rt_send's) */
    __atomic_fetch_add(&s->ask.cancel_gen, 1u, __ATOMIC_SEQ_CST);
    rt_notify(s);
    __atomic_fetch_sub(&s->mail.senders, 1u, __ATOMIC_RELEASE);
}

/* (Async-signal-safe: a handler on s's thread that interrupted the loop
 * between its last look at stop and its wait must wake that wait; only a
 * co of s, which the loop looks after, needs no wake.) */
void aco_rt_sched_stop(aco_rt_sched_t* s) {
    if (s == NULL) return;
    int e = errno;
    /* (counted as rt_send counts: the run this ends may free s at once) */
    __atomic_fetch_add(&s->mail.senders, 1u, __ATOMIC_RELAXED);
    __atomic_store_n(&s->ask.stop, 1, __ATOMIC_SEQ_CST);
    aco_rt_co_t* co = rt_self();
    if (co == NULL || co->s != s) rt_notify(s);
    __atomic_fetch_sub(&s->mail.senders, 1u, __ATOMIC_RELEASE);
    errno = e;
}

/* The kernel's part of freeing s, before the backend goes: every message
 * taken, every co and kept record destroyed, the mailboxes freed (the
 * wheel is cleared first: the parked cos' deadline timers are in their
 * records). */
void rt_kernel_drop_cos(aco_rt_sched_t* s) {
    /* No direct take of a co here from now on (rt_hold_try), and the wakes
     * of those taken before are done and drained below: a co such a wake
     * is for is ready then, not parked, so its wait (whose channel the
     * waker may have freed since) is not looked at again. */
    __atomic_fetch_or(&s->mail.senders, RT_FREEING, __ATOMIC_RELAXED);
    rt_sched_quiesce(s);
    drain(s);       /* spawns become cos (freed below), frees are done */
    rt_newq_flush(s);         /* (a run leaves none unpublished: to be sure) */
    rt_take_new(s, s, 1);     /* and so do the unstarted ones */
    rt_cos_free_all(s);    /* (their timers went with the wheel) */
    /* a co picked from a watched line had its wake: the line's end is
     * left (a parked one's went with its forget) */
    if (s->run.watch.picked) s->run.watch.ops->end(s);
    mbox_free_all(s);       /* (drained above: nobody sends now) */
}

/* ------------------------------------------------------------------------ */
/* The program's timers, on the scheduler's wheel (timer.c)                 */
/* ------------------------------------------------------------------------ */

void aco_rt_timer_init(aco_rt_timer_t* t) {
    if (t) memset(t, 0, sizeof(*t));
}

int aco_rt_timer_start(aco_rt_timer_t* t, int64_t deadline,
                       void (*fn)(aco_rt_timer_t*)) {
    aco_rt_sched_t* s = rt_tls_sched;
    if (s == NULL) return -EPERM;
    if (t == NULL || fn == NULL || t->next_ != NULL) return -EINVAL;
    /* (on any of them: the wheel keeps t past this co's switch, and a
     * co that shares that stack overwrites it) */
    if (rt_on_any_share_stack(s, t, sizeof(*t), 1)) return -EINVAL;
    t->fn_ = fn;
    rt_wheel_add(&s->wheel, t, deadline);
    return 0;
}

int aco_rt_timer_stop(aco_rt_timer_t* t) {
    aco_rt_sched_t* s = rt_tls_sched;
    if (s == NULL || t == NULL) return 0;
    return rt_wheel_del(&s->wheel, t);
}

/* ------------------------------------------------------------------------ */
/* Yield, sleep                                                             */
/* ------------------------------------------------------------------------ */

int aco_rt_yield(void) {
    aco_rt_co_t* co = rt_self();
    if (co == NULL) return -EPERM;
    aco_rt_sched_t* s = co->s;
    /* A cancelled co yields too (one that loops on yields, waiting for
     * another co, must not starve it), and then hears it. */
    int r = rt_co_cancelled(co) ? -ECANCELED : 0;
    if (s->run.rq_head == NULL && s->run.since_poll + 1 < POLL_EVERY && !s->pooled.out_pending &&
        !rt_load(&s->ask.stop)) {
        /* Nobody else is ready: the loop would resume co at once. */
        s->run.since_poll++;
        return r;
    }
    co->state = RT_READY;
    rt_rq_push(s, co);
    rt_switch_out(co);
    return rt_co_cancelled(co) ? -ECANCELED : 0;
}

static void sleep_abort(aco_rt_co_t* co, int err) {
    rt_wake(co, err == -ETIMEDOUT ? 0 : err);
}

/* aco_rt_sleep_until up to the switch: 0 or -errno. */
__attribute__((noinline))
static int sleep_begin(int64_t deadline) {
    aco_rt_co_t* co = rt_self();
    if (co == NULL) return -EPERM;
    if (rt_co_cancelled(co)) return -ECANCELED;
    /* -1: no limit; every other negative deadline is long past */
    rt_park_begin(co, RT_W_SLEEP, NULL, deadline == -1 ? INT64_MAX : deadline < 0 ? 0 : deadline);
    return 0;
}

/* Nothing lives across the switch: a sleeping co's saved frames stay small
 * (memory per parked co). */
int aco_rt_sleep_until(int64_t deadline) {
    int r = sleep_begin(deadline);
    if (r) return r;
    rt_switch_out(rt_self());
    return rt_self()->res;
}

int aco_rt_sleep(int64_t ns) {
    if (ns < 0) ns = 0;
    int64_t now = rt_now();
    return aco_rt_sleep_until(ns > INT64_MAX - now ? INT64_MAX : now + ns);
}

/* ------------------------------------------------------------------------ */
/* Seeing inside                                                            */
/* ------------------------------------------------------------------------ */

void aco_rt_stats(const aco_rt_sched_t* s, aco_rt_stats_t* out) {
    if (out == NULL) return;
    if (s == NULL) s = rt_tls_sched;
    if (s == NULL) { memset(out, 0, sizeof(*out)); return; }
    *out = s->st;
    out->timers = s->wheel.armed;
}

static const char* state_name(int st) {
    switch (st) {
    case RT_READY: return "ready";
    case RT_RUNNING: return "running";
    case RT_PARKED: return "parked";
    case RT_DONE: return "done";
    default: return "?";
    }
}

/* aco_rt_dump's output: formatted on the stack and written with write(2),
 * not dprintf(3), whose glibc FILE mallocs a buffer (the lock a debugger
 * may have stopped another thread in) and, on a descriptor that is not
 * open, never frees it. */
__attribute__((format(printf, 2, 3)))
static void dump_put(int fd, const char* fmt, ...) {
    int saved = errno;          /* (a debugger's call leaves it as it was) */
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    size_t len = n < 0 ? 0 : (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1;
    for (size_t off = 0; off < len;) {
        ssize_t w = write(fd, buf + off, len - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        off += (size_t)w;
    }
    errno = saved;
}

void aco_rt_dump(const aco_rt_sched_t* s, int fd) {
    if (s == NULL) s = rt_tls_sched;
    if (s == NULL) { dump_put(fd, "aco_rt: no scheduler on this thread\n"); return; }
    dump_put(fd, "aco_rt scheduler %p backend %s: %llu cos alive, %llu parked, "
             "%llu ready, %llu timers, %llu I/O in flight, %llu switches\n",
             (const void*)s, s->backend.ops->name, (unsigned long long)s->st.cos_alive,
             (unsigned long long)s->st.cos_parked, (unsigned long long)s->st.cos_ready,
             (unsigned long long)s->wheel.armed, (unsigned long long)s->st.io_inflight,
             (unsigned long long)s->st.switches);
    int64_t now = rt_now();
    for (uint32_t i = 0; i < s->recs.ncos; i++) {
        const aco_rt_co_t* co = s->recs.cos[i];
        const char* name = co->x ? co->x->name : NULL;
        dump_put(fd, "  co %p %s%s%s %s", (const void*)co,
                 name ? "\"" : "", name ? name : "", name ? "\"" : "",
                 state_name(co->state));
        if (co->flags & RT_CANCELLED) dump_put(fd, " cancelled");
        if (co->state == RT_PARKED) {
            dump_put(fd, " in %s %p", rt_wait_kinds[co->wait] ? rt_wait_kinds[co->wait]->name : "?",
                     co->wait_obj);
            if (rt_timer_armed(&co->tmo) && co->tmo.expiry_ >= INT64_MAX >> RT_TICK_SHIFT)
                dump_put(fd, " for good");       /* (sleep_until(-1): a timer at the end of time) */
            else if (rt_timer_armed(&co->tmo))
                dump_put(fd, " deadline in %.3f ms",
                         (double)((co->tmo.expiry_ << RT_TICK_SHIFT) - now) / 1e6);
        }
        dump_put(fd, " (aco %p, stack %p%s)\n", (void*)rt_aco(co),
                 rt_aco(co)->share_stack ? rt_aco(co)->share_stack->ptr : NULL,
                 (co->flags & RT_STANDALONE) ? " own" : "");
    }
}

