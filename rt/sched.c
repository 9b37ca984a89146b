/* sched.c - the scheduler: its loop, cos, parking and waking, counters.
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
 * result of its call.  A deadline or a cancel calls co->abort, which takes
 * the co out of where it waits and wakes it, at once or (io_uring) when the
 * kernel has let go of the operation.
 *
 * Records.  A finished co's record keeps its libaco co and goes to a free
 * list: the next spawn resets that co (aco_reset2) instead of creating one.
 */
#define _GNU_SOURCE
#include "rt_impl.h"
#include "rt_sys.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

__thread aco_rt_sched_t* rt_tls_sched;
uint32_t rt_nsched;
void (*rt_co_dropped)(aco_rt_co_t* co);

#define FREE_RECS_MAX 16384

/* The save stack in a new record (rt_impl.h) is a guess: what the last co
 * of the same function that was ever copied out needed, from a small table
 * a scheduler keeps (RT_GUESSES slots by the function's address; a slot
 * holds one function).  A function not in it, or whose cos needed more than
 * RT_GUESS_MAX, gets none: libaco allocates a save stack of the exact size
 * when the co's frames are first copied out, if they ever are (most cos of
 * a program with a few cos never are). */
#define RT_GUESS_MAX (64 * 1024)
#define SOLO_MAX 64             /* finished standalone cos kept with their stacks */
#define POLL_EVERY 64

int64_t rt_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t aco_rt_now(void) { return rt_now(); }

/* ------------------------------------------------------------------------ */
/* Ready queue, park, wake (the inline halves are in rt_impl.h)             */
/* ------------------------------------------------------------------------ */

static inline aco_rt_co_t* rq_pop(aco_rt_sched_t* s) {
    aco_rt_co_t* co = s->rq_head;
    if (co) {
        s->rq_head = co->next;
        if (s->rq_head == NULL) s->rq_tail = NULL;
        s->st.cos_ready--;
    }
    return co;
}

static void join_abort(aco_rt_co_t* me, int err);
static void sleep_abort(aco_rt_co_t* co, int err);

const rt_wait_kind_t rt_waits[RT_W_N] = {
    [RT_W_CHAN_SEND] = {"chan_send", RT_AB_SHARED}, [RT_W_CHAN_RECV] = {"chan_recv", RT_AB_SHARED},
    [RT_W_SELECT] = {"select", RT_AB_SELECT},
    [RT_W_FD_IN] = {"fd_in", RT_AB_EPOLL},          [RT_W_FD_OUT] = {"fd_out", RT_AB_EPOLL},
    [RT_W_JOIN] = {"join", RT_AB_JOIN},             [RT_W_SLEEP] = {"sleep", RT_AB_SLEEP},
    [RT_W_MUTEX] = {"mutex", RT_AB_SHARED},         [RT_W_COND] = {"cond", RT_AB_SHARED},
    [RT_W_SEM] = {"sem", RT_AB_SHARED},             [RT_W_WG] = {"waitgroup", RT_AB_SHARED},
    [RT_W_GROUP] = {"group", RT_AB_SHARED},
    [RT_W_UR_OP + RT_OP_READ] = {"read", RT_AB_URING},
    [RT_W_UR_OP + RT_OP_WRITE] = {"write", RT_AB_URING},
    [RT_W_UR_OP + RT_OP_READV] = {"readv", RT_AB_URING},
    [RT_W_UR_OP + RT_OP_WRITEV] = {"writev", RT_AB_URING},
    [RT_W_UR_OP + RT_OP_RECV] = {"recv", RT_AB_URING},
    [RT_W_UR_OP + RT_OP_SEND] = {"send", RT_AB_URING},
    [RT_W_UR_OP + RT_OP_POLL] = {"poll", RT_AB_URING},
    [RT_W_UR_OP + RT_OP_SENDMSG] = {"sendmsg", RT_AB_URING},
    [RT_W_UR_ACCEPT] = {"accept", RT_AB_URING},
};
_Static_assert(RT_OP_SENDMSG < 8, "the io_uring operations fit before RT_W_UR_ACCEPT");

void rt_abort(aco_rt_co_t* co, int err) {
    switch (rt_waits[co->wait].abort) {
    case RT_AB_SHARED: rt_abort_shared(co, err); break;
    case RT_AB_SELECT: rt_select_abort(co, err); break;
    case RT_AB_EPOLL:  rt_ep_abort(co, err); break;
    case RT_AB_URING:  rt_ur_abort(co, err); break;
    case RT_AB_JOIN:   join_abort(co, err); break;
    default:           sleep_abort(co, err); break;
    }
}

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
    uint32_t* lock = co->w.lock;
    rt_lock(lock);
    int won = rt_claim(co);
    if (won && co->w.q) rt_wq_remove(&co->w);
    rt_unlock(lock);
    if (won) rt_wake(co, err);
    /* else a waker took it: its wake is on the way (maybe via the inbox) */
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
    if (__atomic_load_n(&s->sleeping, __ATOMIC_SEQ_CST) &&
        __atomic_exchange_n(&s->sleeping, 0, __ATOMIC_SEQ_CST)) {
        uint64_t one = 1;
        ssize_t r;
        do r = rt_sys_write(s->evfd, &one, sizeof(one)); while (r < 0 && errno == EINTR);
    }
}

/* m is co->msg (kind: what it says) or co->cmsg (RT_MSG_CANCEL). */
static void rt_send(aco_rt_sched_t* s, rt_msg_t* m, int kind) {
    if (kind != RT_MSG_CANCEL) rt_container_of(m, aco_rt_co_t, msg)->msg_kind = (uint8_t)kind;
    inbox_push(&s->inbox, m);
    rt_notify(s);
}

void rt_sched_close(aco_rt_sched_t* s, rt_close_msg_t* c) {
    /* seq_cst: ordered before the sleeping flag's load in rt_notify */
    c->next = __atomic_load_n(&s->closes, __ATOMIC_RELAXED);
    while (!__atomic_compare_exchange_n(&s->closes, &c->next, c, 1, __ATOMIC_SEQ_CST,
                                        __ATOMIC_RELAXED)) {}
    rt_notify(s);
}

/* The closes other threads sent: non-zero if there were some. */
static int closes_drain(aco_rt_sched_t* s) {
    if (__atomic_load_n(&s->closes, __ATOMIC_RELAXED) == NULL) return 0;
    rt_close_msg_t* c = __atomic_exchange_n(&s->closes, NULL, __ATOMIC_ACQUIRE);
    while (c) {
        rt_close_msg_t* next = c->next;
        rt_fd_closed_remote(s, c->fd, c->gen);
        free(c);
        c = next;
    }
    return 1;
}

/* Spawns from one pool thread to another go out in batches: kept in the
 * sender's outbox for the target until the spawning co parks or yields (the
 * loop flushes after each co) or RT_OUTBOX_MAX are waiting, then pushed as
 * one chain: one swap of the target's inbox tail, one wake, instead of one
 * per co (each moves the inbox's cache line between the CPUs). */
#define RT_OUTBOX_MAX 32

static void outbox_flush(aco_rt_sched_t* me, unsigned t) {
    rt_outbox_t* o = &me->outbox[t];
    aco_rt_sched_t* s = o->to;
    __atomic_store_n(&o->last->next, NULL, __ATOMIC_RELAXED);
    rt_msg_t* prev = __atomic_exchange_n(&s->inbox.tail, o->last, __ATOMIC_SEQ_CST);
    __atomic_store_n(&prev->next, o->first, __ATOMIC_RELEASE);
    o->first = o->last = NULL;
    o->n = 0;
    rt_notify(s);
}

static void newq_publish(aco_rt_sched_t* s);

static void outbox_flush_all(aco_rt_sched_t* me) {
    for (unsigned t = 0; t < me->noutbox; t++)
        if (me->outbox[t].n) outbox_flush(me, t);
    if (me->nq_priv_n) newq_publish(me);
    me->out_pending = 0;
}

#ifndef ACO_RT_NO_THREADS
static void send_spawn(aco_rt_sched_t* s, rt_msg_t* m) {
    aco_rt_sched_t* me = rt_tls_sched;
    if (me == NULL || me->outbox == NULL || s->pool != me->pool || s->pool_idx >= me->noutbox) {
        rt_send(s, m, RT_MSG_SPAWN);
        return;
    }
    rt_outbox_t* o = &me->outbox[s->pool_idx];
    rt_container_of(m, aco_rt_co_t, msg)->msg_kind = RT_MSG_SPAWN;
    __atomic_store_n(&m->next, NULL, __ATOMIC_RELAXED);
    o->to = s;
    if (o->last) o->last->next = m; else o->first = m;
    o->last = m;
    me->out_pending = 1;
    if (++o->n >= RT_OUTBOX_MAX) outbox_flush(me, s->pool_idx);
}
#endif

void rt_wake_remote(aco_rt_co_t* co, int res) {
    co->res = res;
    rt_send(co->s, &co->msg, RT_MSG_WAKE);
}

/* ------------------------------------------------------------------------ */
/* Scheduler                                                                */
/* ------------------------------------------------------------------------ */

aco_rt_sched_t* aco_rt_sched_current(void) { return rt_tls_sched; }

const char* aco_rt_backend_name(const aco_rt_sched_t* s) {
    return s ? s->be->name : NULL;
}

/* libaco aborts when a share stack cannot be mapped; the runtime says
 * ENOMEM instead: can the address space take sz bytes (and a guard page)? */
static int stack_possible(size_t sz) {
    if (sz > SIZE_MAX / 2) return 0;
    void* p = mmap(NULL, sz + 2 * 65536, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return 0;
    munmap(p, sz + 2 * 65536);
    return 1;
}

static const rt_backend_t* pick_backend(int want) {
    if (want == ACO_RT_BACKEND_AUTO) {
        const char* e = getenv("ACO_RT_BACKEND");
        if (e && *e) {
            if (strcmp(e, "uring") == 0) want = ACO_RT_BACKEND_URING;
            else if (strcmp(e, "epoll") == 0) want = ACO_RT_BACKEND_EPOLL;
            else { errno = EINVAL; return NULL; }
        }
    }
    if (want == ACO_RT_BACKEND_URING) {
        if (rt_backend_uring.name == NULL) { errno = ENOSYS; return NULL; }
        return &rt_backend_uring;
    }
    if (want == ACO_RT_BACKEND_EPOLL) return &rt_backend_epoll;
    if (want != ACO_RT_BACKEND_AUTO) { errno = EINVAL; return NULL; }
    return rt_backend_uring.name ? &rt_backend_uring : &rt_backend_epoll;
}

static __thread int rt_thread_inited;

/* Destroy our own main co, and free its memory. */
static void main_free(aco_t* m) {
    aco_destroy(m);
    aco_free(m, aco_co_size(0));
}

aco_rt_sched_t* aco_rt_sched_new(const aco_rt_opts_t* opts) {
    aco_rt_opts_t o = {0};
    if (opts) o = *opts;
    if (rt_tls_sched) { errno = EBUSY; return NULL; }
    const rt_backend_t* be = pick_backend(o.backend);
    if (be == NULL) return NULL;
    if (o.share_stacks == 0) o.share_stacks = 4;
    if (o.stack_size == 0) o.stack_size = 256 * 1024;
    if (o.uring_entries == 0) o.uring_entries = 512;
    if (o.share_stacks > 1024) { errno = EINVAL; return NULL; }
    if (!stack_possible(o.stack_size)) { errno = ENOMEM; return NULL; }

    aco_rt_sched_t* s = aligned_alloc(64, (sizeof(*s) + 63) & ~(size_t)63);
    if (s == NULL) return NULL;
    memset(s, 0, sizeof(*s));
    s->evfd = eventfd(0, EFD_CLOEXEC);    /* blocking: io_uring reads it asynchronously */
    if (s->evfd < 0) { int e = errno; free(s); errno = e; return NULL; }
    inbox_init(&s->inbox);
    s->spin_ns = 50000;
    if (!rt_thread_inited && aco_gtls_co == NULL) {
        aco_thread_init(NULL);
        rt_thread_inited = 1;
    }
    s->stack_size = o.stack_size;
    s->nstacks = o.share_stacks;
    s->stacks = calloc(s->nstacks, sizeof(*s->stacks));
    /* The share stacks are mapped lazily, when a co first needs one
     * (next_share_stack).  The thread's main co if the program made one,
     * else our own, in memory of ours (aco_create aborts without). */
    if (s->stacks != NULL && aco_gtls_co != NULL && aco_is_main_co(aco_gtls_co)) {
        s->main_co = aco_gtls_co;
    } else if (s->stacks != NULL) {
        void* m = aco_alloc(aco_co_size(0));
        if (m) s->main_co = aco_create_main_in(m, aco_co_size(0), NULL);
        s->own_main = 1;
    }
    if (s->main_co == NULL) {
        rt_sys_close(s->evfd);
        free(s->stacks);
        free(s);
        errno = ENOMEM;
        return NULL;
    }
    rt_wheel_init(&s->wheel, rt_now());
    s->be = be;
    int r;
    if (be == &rt_backend_uring && o.backend == ACO_RT_BACKEND_AUTO &&
        getenv("ACO_RT_BACKEND") == NULL) {
        /* auto: fall back to epoll where the kernel refuses io_uring */
        if ((r = be->init(s, &o)) < 0) {
            s->be = be = &rt_backend_epoll;
            r = be->init(s, &o);
        }
    } else {
        r = be->init(s, &o);
    }
    if (r < 0) {
        if (s->own_main) main_free(s->main_co);
        rt_sys_close(s->evfd);
        free(s->stacks);
        free(s);
        errno = -r;
        return NULL;
    }
    rt_tls_sched = s;
    rt_sched_reg(s, 1);
    __atomic_fetch_add(&rt_nsched, 1u, __ATOMIC_ACQ_REL);   /* atomic in every build */
    return s;
}

static aco_share_stack_t* next_share_stack(aco_rt_sched_t* s) {
    unsigned i = s->next_stack++ % s->nstacks;
    /* Avoid the stack the spawning co runs on: two cos that take turns on
     * one stack copy each other's frames out and in at every switch. */
    if (s->cur && s->nstacks > 1 && rt_aco(s->cur)->share_stack == s->stacks[i] &&
        !(s->cur->flags & RT_STANDALONE))
        i = s->next_stack++ % s->nstacks;
    if (s->stacks[i] == NULL) s->stacks[i] = aco_share_stack_try_new2(s->stack_size, 1);
    return s->stacks[i];        /* NULL: ENOMEM */
}


static void extra_free(rt_extra_t* x) {
    if (x == NULL) return;
    free(x->selw);
    free(x->sellocks);
    free(x->buf);
    free(x);
}

/* The co's function, tail-called. */
__attribute__((noinline))
static void co_call(void) {
    aco_rt_co_t* co = rt_self();
    co->fn(rt_aco(co)->arg);
}

/* Nothing of its own lives across the co's function: its frame, under
 * every parked co's, is the least (memory per parked co). */
static void co_main(void) {
    co_call();
    rt_co_exit(rt_self());
}

void rt_co_exit(aco_rt_co_t* co) {
    if (co->x && co->x->keys) rt_keys_exit(co);     /* in the co: they may block */
    co->state = RT_DONE;
    if (co->x && co->x->group) rt_group_leave(co);
    aco_rt_co_t* j = rt_xchg(&co->joiner, RT_JOIN_DONE);
    if (j != NULL && j != RT_JOIN_DETACH && rt_claim(j)) rt_wake_any(j, 0);
    if (j == RT_JOIN_DETACH) co->flags |= RT_DETACHED;
    aco_exit();
    __builtin_unreachable();    /* an ended co is never resumed */
}

static int cos_add(aco_rt_sched_t* s, aco_rt_co_t* co) {
    if (s->ncos == s->cos_cap) {
        uint32_t cap = s->cos_cap ? s->cos_cap * 2 : 64;
        aco_rt_co_t** n = realloc(s->cos, cap * sizeof(*n));
        if (n == NULL) return -ENOMEM;
        s->cos = n;
        s->cos_cap = cap;
    }
    co->slot = s->ncos;
    s->cos[s->ncos++] = co;
    return 0;
}

static void cos_del(aco_rt_sched_t* s, aco_rt_co_t* co) {
    aco_rt_co_t* last = s->cos[--s->ncos];
    s->cos[co->slot] = last;
    last->slot = co->slot;
}

/* Free a record without a libaco co (or whose co is gone), with its extra
 * block. */
static void rec_free(aco_rt_co_t* co) {
    extra_free(co->x);
    aco_free(co, co->rec_sz);
}

/* Free a kept record: its libaco co (in it), extra block and itself. */
static void rec_drop(aco_rt_co_t* co) {
    aco_destroy(rt_aco(co));
    rec_free(co);
}

/* Give record co (state, fn and arg set) its libaco co, on this thread, in
 * the record's own memory: on a share stack, or on a stack of its own (a
 * pooled one when one is kept of this size, up to twice as big).  0 or
 * -ENOMEM. */
static int attach_aco(aco_rt_sched_t* s, aco_rt_co_t* co, int standalone, size_t stack,
                      void* arg) {
    aco_share_stack_t* st = NULL;
    if (standalone) {
        size_t sz = stack ? stack : s->stack_size;
        co->flags |= RT_STANDALONE;
        for (aco_rt_co_t** pp = &s->free_solo; *pp; pp = &(*pp)->next) {
            aco_rt_co_t* old = *pp;
            size_t have = rt_aco(old)->share_stack->sz;
            if (have < sz || have / 2 > sz) continue;
            *pp = old->next;
            s->nsolo--;
            st = rt_aco(old)->share_stack;
            rec_drop(old);              /* the stack is free for co */
            break;
        }
        if (st == NULL) st = aco_share_stack_try_new2(sz, 1);
    } else {
        st = next_share_stack(s);
    }
    if (st == NULL) return -ENOMEM;
    aco_create_in(rt_aco(co), co->rec_sz - rt_aco_off(co), s->main_co, st, co_main, arg);
    return 0;
}

/* cos_alive for other threads (a plain store: only this thread writes). */
static inline void publish_load(aco_rt_sched_t* s) {
#ifdef ACO_RT_NO_THREADS
    s->load = (uint32_t)s->st.cos_alive;
#else
    __atomic_store_n(&s->load, (uint32_t)s->st.cos_alive, __ATOMIC_RELEASE);
#endif
}

static inline unsigned guess_slot(aco_rt_fn_t fn) {
    uintptr_t a = (uintptr_t)fn;
    return (unsigned)(a ^ a >> 6 ^ a >> 12) & (RT_GUESSES - 1);
}

/* The save stack a new record of s for fn gets: what opts ask for, none for
 * a stack of its own (nothing is ever copied), else s's guess.  s may be
 * another thread's: a slot's two words may then disagree, which costs at
 * most a save stack of the wrong size. */
static size_t save_size(aco_rt_sched_t* s, aco_rt_fn_t fn, const aco_rt_spawn_opts_t* opts) {
    if (opts && (opts->standalone || opts->stack_size > s->stack_size)) return 0;
    if (opts && opts->save_size) return opts->save_size;
    unsigned i = guess_slot(fn);
    if (rt_load(&s->guess[i].fn) != (uintptr_t)fn) return 0;
    return rt_load(&s->guess[i].need);
}

/* Co ended: what it needed is the guess for its function's next cos. */
static void guess_learn(aco_rt_sched_t* s, const aco_rt_co_t* co) {
    size_t need = rt_aco(co)->save_stack.max_cpsz;
    if (need == 0 || (co->flags & RT_STANDALONE)) return;   /* never copied */
    need = need > RT_GUESS_MAX ? 0 : (need + 7) & ~(size_t)7;     /* libaco's step */
    unsigned i = guess_slot(co->fn);
    if (s->guess[i].fn != (uintptr_t)co->fn) rt_store(&s->guess[i].fn, (uintptr_t)co->fn);
    if (s->guess[i].need != need) rt_store(&s->guess[i].need, (uint32_t)need);
}

/* A record, zeroed up to its libaco co, with room for a private buffer of
 * priv bytes and a co with a save stack of save bytes: one allocation, from
 * libaco's allocator (the program's, when it set one). */
static aco_rt_co_t* rec_new(size_t priv, size_t save) {
    if (save > ((size_t)1 << 30)) save = 0;     /* libaco's save stack, later */
    size_t cosz = aco_co_size(save);
    /* (sizes in 32 bits: a record of 4 GiB is no co's) */
    if (priv > UINT32_MAX - RT_PRIV_OFF - cosz - 31) { errno = ENOMEM; return NULL; }
    priv = (rt_priv_room(priv) + 15) & ~(size_t)15;
    size_t sz = RT_PRIV_OFF + priv + cosz;
    aco_rt_co_t* co = aco_alloc(sz);
    if (co == NULL) { errno = ENOMEM; return NULL; }
    memset(co, 0, RT_PRIV_OFF + priv);
    co->priv_cap = (uint32_t)priv;
    co->rec_sz = (uint32_t)sz;
    return co;
}

void* aco_rt_private(size_t* size) {
    aco_rt_co_t* co = rt_self();
    uint32_t n = co ? rt_priv_size(co) : 0;
    if (n == 0) {
        if (size) *size = 0;
        return NULL;
    }
    if (size) *size = n;
    return rt_priv(co);
}

static void rec_init(aco_rt_sched_t* s, aco_rt_co_t* co) {
    co->s = s;
    co->w.co = co;
    co->tmo.fn_ = rt_tmo_fire;      /* its deadlines, set once */
}

/* What a spawn asks that the record keeps in its extra block (made when
 * needed): its name, the stack of a remote spawn (req), its group's links.
 * 0 or -ENOMEM. */
__attribute__((noinline))
static int rec_opts_x(aco_rt_co_t* co, const char* name, size_t req) {
    rt_extra_t* x = rt_extra(co, 0);
    if (x == NULL) return -ENOMEM;
    x->name = name;
    x->stack_req = req;
    return 0;
}
static inline int rec_opts(aco_rt_co_t* co, const aco_rt_spawn_opts_t* opts, size_t req,
                           struct aco_rt_group* g) {
    const char* name = opts ? opts->name : NULL;
    if (rt_likely(co->x == NULL && name == NULL && req == 0 && g == NULL)) return 0;
    return rec_opts_x(co, name, req);
}

/* A new co of this thread's scheduler s, ready. */
static aco_rt_co_t* spawn_local(aco_rt_sched_t* s, aco_rt_fn_t fn, void* arg,
                                const aco_rt_spawn_opts_t* opts, struct aco_rt_group* g) {
    /* A co that needs more stack than the share stacks have gets its own. */
    int standalone = opts && (opts->standalone || opts->stack_size > s->stack_size);
    size_t priv = opts ? opts->private_size : 0;
    aco_rt_co_t* co = NULL;
    if (!standalone && s->free_recs && s->free_recs->priv_cap >= rt_priv_room(priv)) {
        co = s->free_recs;
        s->free_recs = co->next;
        s->nfree--;
        aco_reset2(rt_aco(co), co_main, arg);
        co->res = 0;
        co->io_abort = 0;
        co->wait_obj = NULL;
    } else {
        if ((co = rec_new(priv, save_size(s, fn, opts))) == NULL) return NULL;
        rec_init(s, co);
        if (attach_aco(s, co, standalone, opts ? opts->stack_size : 0, arg) < 0) {
            rec_free(co);
            errno = ENOMEM;
            return NULL;
        }
    }
    if (rec_opts(co, opts, 0, g) < 0 || cos_add(s, co) < 0) {
        if (co->flags & RT_STANDALONE) {
            /* not for free_recs: its stack would go with rec_drop's co */
            aco_share_stack_t* st = rt_aco(co)->share_stack;
            rec_drop(co);
            aco_share_stack_destroy(st);
        } else {
            co->next = s->free_recs;    /* keep it for later */
            s->free_recs = co;
            s->nfree++;
        }
        errno = ENOMEM;
        return NULL;
    }
    co->fn = fn;
    co->flags &= RT_STANDALONE;
    co->cancel_sent = 0;
    co->joiner = NULL;
    if (priv) memset(rt_priv(co), 0, priv);
    rt_priv_set_size(co, priv);
    rt_store(&co->started, (uint8_t)1);
    co->cancel_req = 0;
    co->state = RT_READY;
    s->st.cos_alive++;
    s->st.spawned++;
    publish_load(s);
    if (g && rt_group_join_new(g, co) < 0) co->flags |= RT_CANCELLED;
    rt_rq_push(s, co);
    return co;
}

#ifndef ACO_RT_NO_THREADS
/* A new co of another thread's scheduler s: a bare record now, its libaco
 * co made by s's thread when the message comes (share stacks are its). */
static aco_rt_co_t* spawn_remote(aco_rt_sched_t* s, aco_rt_fn_t fn, void* arg,
                                 const aco_rt_spawn_opts_t* opts, struct aco_rt_group* g) {
    size_t priv = opts ? opts->private_size : 0;
    aco_rt_co_t* co = rec_new(priv, save_size(s, fn, opts));
    if (co == NULL) return NULL;
    rt_priv_set_size(co, priv);
    rec_init(s, co);
    if (rec_opts(co, opts, opts ? opts->stack_size : 0, g) < 0) {
        rec_free(co);
        errno = ENOMEM;
        return NULL;
    }
    co->started = 1;                    /* (published by the send) */
    co->fn = fn;
    co->w.slot = arg;                   /* until its libaco co is made */
    co->flags = RT_REMOTE;
    if (opts && (opts->standalone || opts->stack_size > s->stack_size)) co->flags |= RT_STANDALONE;
    co->state = RT_READY;
    /* a move into sent from another thread (see pool_busy in pool.c) */
    if (s->pool) __atomic_fetch_add(&s->mv_begun, 1u, __ATOMIC_SEQ_CST);
    __atomic_fetch_add(&s->sent, 1u, __ATOMIC_SEQ_CST);
    if (s->pool) __atomic_fetch_add(&s->mv_ended, 1u, __ATOMIC_SEQ_CST);
    if (g && rt_group_join_new(g, co) < 0) co->flags |= RT_CANCELLED;
    send_spawn(s, &co->msg);
    return co;
}
#endif

/* The message of spawn_remote came: make the co and queue it. */
static void spawn_arrived(aco_rt_sched_t* s, aco_rt_co_t* co) {
    int standalone = (co->flags & RT_STANDALONE) != 0;
    if (!co->started) {
        /* From a newq: it is this thread's now.  Dekker with aco_rt_cancel:
         * started is stored, then cancel_req looked at; the canceller the
         * other way round. */
        __atomic_store_n(&co->started, (uint8_t)1, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(&co->cancel_req, __ATOMIC_SEQ_CST)) co->flags |= RT_CANCELLED;
    } else if (!standalone && s->free_recs) {
        /* A record a remote spawn made brings its own memory: one kept
         * here goes instead, so that no more are kept than this thread's
         * own spawns take back.  (One from a newq is the spawner's own
         * kept record, or given back by a thief: take_new.) */
        aco_rt_co_t* old = s->free_recs;
        s->free_recs = old->next;
        s->nfree--;
        rec_drop(old);
    }
    co->flags &= (uint8_t)~(RT_REMOTE | RT_STANDALONE);
    if (attach_aco(s, co, standalone, standalone ? co->x->stack_req : 0, co->w.slot) == 0) {
        if (cos_add(s, co) == 0) {
            s->st.cos_alive++;
            s->st.spawned++;
            publish_load(s);
            __atomic_fetch_sub(&s->sent, 1u, __ATOMIC_SEQ_CST);   /* after: never both 0 */
            rt_rq_push(s, co);
            return;
        }
        aco_share_stack_t* st = rt_aco(co)->share_stack;
        aco_destroy(rt_aco(co));
        if (co->flags & RT_STANDALONE) aco_share_stack_destroy(st);
        co->flags &= (uint8_t)~RT_STANDALONE;
    }
    /* Nobody to tell but its joiner: it ends at once, never started. */
    fprintf(stderr, "aco_rt_spawn: out of memory making a co sent from another "
            "thread: it ends without running (aco_rt_join says -ENOMEM)\n");
    co->flags |= RT_NO_START;
    co->state = RT_DONE;
    if (__atomic_fetch_sub(&s->sent, 1u, __ATOMIC_SEQ_CST) == 1 && s->st.cos_alive == 0 && s->pool)
        rt_pool_idle(s->pool);
    if (co->x && co->x->group) rt_group_leave(co);
    aco_rt_co_t* j = rt_xchg(&co->joiner, RT_JOIN_DONE);
    if (j == RT_JOIN_DETACH) rec_free(co);
    else if (j != NULL && rt_claim(j)) rt_wake_any(j, 0);
}

#ifndef ACO_RT_NO_THREADS
/* ---- Stealing: a pool thread's new cos wait in its newq, unstarted; the
 * thread starts them when it has nothing else, an idle sibling takes half.
 * While in a newq a co is counted in newq_n, then in its taker's sent
 * until it is started (load): aco_rt_pool_wait reads them in that order. */

/* Ask for the lines of record co that a spawn writes (NULL: nothing). */
static inline void rec_prefetch(const aco_rt_co_t* co) {
    if (co == NULL) return;
    for (size_t off = 0; off < sizeof(*co); off += 64) __builtin_prefetch((const char*)co + off, 1);
}

/* A record without a libaco co (whoever starts it makes one on its own
 * share stacks), with room for priv bytes: one that a thief gave back, or
 * one of the finished records kept here, its co destroyed in place (cheap:
 * nothing to free), else a new one.  Recycling matters: a record made here
 * and freed by the thief, at every spawn, made both threads wait on
 * malloc's arena lock. */
static aco_rt_co_t* rec_bare(aco_rt_sched_t* s, aco_rt_fn_t fn, size_t priv,
                             const aco_rt_spawn_opts_t* opts) {
    aco_rt_co_t* co;
    if (opts && (opts->standalone || opts->stack_size > s->stack_size)) goto fresh;
    if (s->bare == NULL && __atomic_load_n(&s->gifts, __ATOMIC_RELAXED))
        s->bare = __atomic_exchange_n(&s->gifts, NULL, __ATOMIC_ACQUIRE);
    if ((co = s->bare) != NULL) {
        s->bare = co->next;
        rec_prefetch(co->next);     /* given back by another thread: cold */
        if (co->priv_cap < rt_priv_room(priv)) {
            /* Too small for this spawn: it goes (the list must move on,
             * or what thieves give back would pile up behind it). */
            rec_free(co);
            goto fresh;
        }
    } else if ((co = s->free_recs) != NULL && co->priv_cap >= rt_priv_room(priv)) {
        s->free_recs = co->next;
        s->nfree--;
        aco_destroy(rt_aco(co));
    } else {
        goto fresh;
    }
    co->res = 0;
    co->io_abort = 0;
    co->wait_obj = NULL;
    co->cancel_sent = 0;
    co->joiner = NULL;
    co->started = 0;
    co->cancel_req = 0;
    if (priv) memset(rt_priv(co), 0, priv);
    return co;
fresh:
    if ((co = rec_new(priv, save_size(s, fn, opts))) != NULL) rec_init(s, co);
    return co;
}

/* Thief s took n records of victim's: it owes victim as many, and pays
 * them back out of its own kept records (their cos destroyed, one swap of a
 * chain) now and, for what it lacks now, before it next goes idle.  The
 * records go round, and neither thread keeps allocating what the other
 * frees; a thread's stock stays what it made (one that only takes gives all
 * back, one that only spawns gets all back).  What is owed to each
 * sibling is kept beside the outbox for it (a thread steals only with
 * outboxes). */
static void rec_pay(aco_rt_sched_t* s, aco_rt_sched_t* victim, uint32_t n) {
    rt_outbox_t* o = &s->outbox[victim->pool_idx];
    aco_rt_co_t *first = NULL, *last = NULL;
    o->owed += n;
    s->owed += n;
    while (o->owed && s->free_recs) {
        o->owed--;
        s->owed--;
        aco_rt_co_t* co = s->free_recs;
        s->free_recs = co->next;
        s->nfree--;
        aco_destroy(rt_aco(co));
        co->s = victim;
        co->next = first;
        first = co;
        if (last == NULL) last = co;
    }
    if (first == NULL) return;
    aco_rt_co_t* head = __atomic_load_n(&victim->gifts, __ATOMIC_RELAXED);
    do last->next = head;
    while (!__atomic_compare_exchange_n(&victim->gifts, &head, first, 1,
                                        __ATOMIC_RELEASE, __ATOMIC_RELAXED));
}

/* Before going idle: pay every sibling what is owed to it, as far as the
 * kept records go. */
static void rec_pay_all(aco_rt_sched_t* s) {
    for (unsigned i = 0; i < s->noutbox && s->owed && s->free_recs; i++)
        if (s->outbox[i].owed) rec_pay(s, aco_rt_pool_sched(s->pool, i), 0);
}

aco_rt_co_t* rt_spawn_stealable(aco_rt_fn_t fn, void* arg, const aco_rt_spawn_opts_t* opts) {
    aco_rt_sched_t* s = rt_tls_sched;
    size_t priv = opts ? opts->private_size : 0;
    aco_rt_co_t* co = rec_bare(s, fn, priv, opts);
    if (co == NULL) return NULL;
    if (rec_opts(co, opts, opts ? opts->stack_size : 0, NULL) < 0) {
        rec_free(co);
        errno = ENOMEM;
        return NULL;
    }
    rt_priv_set_size(co, priv);
    co->fn = fn;
    co->w.slot = arg;                   /* until its libaco co is made */
    co->flags = RT_REMOTE;
    if (opts && (opts->standalone || opts->stack_size > s->stack_size)) co->flags |= RT_STANDALONE;
    co->state = RT_READY;
    /* Kept to this thread first, published by 32 or when the spawning co
     * stops running (run_co): a thief sees batches, and the newq's cache
     * line does not move at every spawn. */
    co->next = NULL;
    if (s->nq_priv_tail) s->nq_priv_tail->next = co; else s->nq_priv_head = co;
    s->nq_priv_tail = co;
    s->out_pending = 1;
    if (++s->nq_priv_n >= 32) newq_publish(s);
    return co;
}

static void newq_publish(aco_rt_sched_t* s) {
    rt_lock(&s->newq_lock);
    int was_empty = s->nq_count == 0;
    if (s->nq_count < RT_NQ_BATCHES) {
        rt_nq_batch_t* b = &s->nq[(s->nq_first + s->nq_count++) % RT_NQ_BATCHES];
        b->head = s->nq_priv_head;
        b->tail = s->nq_priv_tail;
        b->n = s->nq_priv_n;
    } else {                    /* the ring is full: the last batch grows */
        rt_nq_batch_t* b = &s->nq[(s->nq_first + s->nq_count - 1) % RT_NQ_BATCHES];
        b->tail->next = s->nq_priv_head;
        b->tail = s->nq_priv_tail;
        b->n += s->nq_priv_n;
    }
    __atomic_store_n(&s->newq_n, s->newq_n + s->nq_priv_n, __ATOMIC_SEQ_CST);
    rt_unlock(&s->newq_lock);
    s->nq_priv_head = s->nq_priv_tail = NULL;
    s->nq_priv_n = 0;
    if (was_empty) {
        /* work for a sleeping sibling (it looks at newq_n before it sleeps) */
        aco_rt_pool_t* p = s->pool;
        unsigned n = s->noutbox;
        for (unsigned i = 1; i < n; i++) {
            aco_rt_sched_t* t = aco_rt_pool_sched(p, (s->pool_idx + i) % n);
            if (t && __atomic_load_n(&t->sleeping, __ATOMIC_SEQ_CST)) { rt_notify(t); break; }
        }
    }
}

/* Take cos from victim's newq, oldest first, and start them here: all of
 * them (the owner), or about half (a thief): half of the batches, whole,
 * so that under the lock only the ring moves and no record is touched; of
 * a lone batch, its first half (up to 32 records walked under the lock). */
static unsigned take_new(aco_rt_sched_t* s, aco_rt_sched_t* victim, int all) {
    rt_nq_batch_t got[RT_NQ_BATCHES];
    uint32_t nb = 0, n = 0;
    rt_lock(&victim->newq_lock);
    uint32_t want = all ? victim->nq_count : victim->nq_count / 2;
    while (nb < want) {
        got[nb] = victim->nq[victim->nq_first];
        n += got[nb++].n;
        victim->nq_first = (victim->nq_first + 1) % RT_NQ_BATCHES;
        victim->nq_count--;
    }
    if (nb == 0 && victim->nq_count == 1) {
        rt_nq_batch_t* b = &victim->nq[victim->nq_first];
        uint32_t k = (b->n + 1) / 2 < 32 ? (b->n + 1) / 2 : 32;
        aco_rt_co_t* last = b->head;
        for (uint32_t i = 1; i < k; i++) last = last->next;
        got[0] = (rt_nq_batch_t){b->head, last, k};
        nb = 1;
        n = k;
        if ((b->n -= k) == 0) {
            victim->nq_first = (victim->nq_first + 1) % RT_NQ_BATCHES;
            victim->nq_count--;
        } else {
            b->head = last->next;
        }
    }
    if (n) {
        if (victim != s) __atomic_fetch_add(&s->mv_begun, 1u, __ATOMIC_SEQ_CST);
        __atomic_fetch_add(&s->sent, n, __ATOMIC_SEQ_CST);
        __atomic_store_n(&victim->newq_n, victim->newq_n - n, __ATOMIC_SEQ_CST);
        if (victim != s) __atomic_fetch_add(&s->mv_ended, 1u, __ATOMIC_SEQ_CST);
    }
    rt_unlock(&victim->newq_lock);
    for (uint32_t b = 0; b < nb; b++) {
        aco_rt_co_t* c = got[b].head;
        for (uint32_t i = got[b].n; i--; ) {
            aco_rt_co_t* next = c->next;
            if (victim != s && i) rec_prefetch(next);
            c->s = s;           /* published to others by started (spawn_arrived) */
            spawn_arrived(s, c);
            c = next;
        }
    }
    if (n && victim != s) rec_pay(s, victim, n);
    return n;
}

/* Is there work in a sibling's newq? */
static int sibling_work(aco_rt_sched_t* s) {
    for (unsigned i = 1; i < s->noutbox; i++) {
        aco_rt_sched_t* t = aco_rt_pool_sched(s->pool, (s->pool_idx + i) % s->noutbox);
        if (t && __atomic_load_n(&t->newq_n, __ATOMIC_SEQ_CST)) return 1;
    }
    return 0;
}

/* Idle: take half of the first sibling's newq that has some. */
static unsigned steal(aco_rt_sched_t* s) {
    for (unsigned i = 1; i < s->noutbox; i++) {
        aco_rt_sched_t* t = aco_rt_pool_sched(s->pool, (s->pool_idx + i) % s->noutbox);
        uint32_t n = t ? __atomic_load_n(&t->newq_n, __ATOMIC_SEQ_CST) : 0;
        if (n) return take_new(s, t, 0);
    }
    return 0;
}
#else
static void newq_publish(aco_rt_sched_t* s) { (void)s; }
static void rec_pay_all(aco_rt_sched_t* s) { (void)s; }
static unsigned take_new(aco_rt_sched_t* s, aco_rt_sched_t* v, int all) { (void)s; (void)v; (void)all; return 0; }
static int sibling_work(aco_rt_sched_t* s) { (void)s; return 0; }
static unsigned steal(aco_rt_sched_t* s) { (void)s; return 0; }
#endif

aco_rt_co_t* rt_spawn(aco_rt_sched_t* s, aco_rt_fn_t fn, void* arg,
                      const aco_rt_spawn_opts_t* opts, struct aco_rt_group* g) {
    if (s == NULL) s = rt_tls_sched;
    if (s == NULL) { errno = EPERM; return NULL; }
    if (fn == NULL) { errno = EINVAL; return NULL; }
#ifdef ACO_RT_NO_THREADS
    if (s != rt_tls_sched) { errno = EPERM; return NULL; }
#else
    if (s != rt_tls_sched) return spawn_remote(s, fn, arg, opts, g);
#endif
    return spawn_local(s, fn, arg, opts, g);
}

aco_rt_co_t* aco_rt_spawn2(aco_rt_sched_t* s, aco_rt_fn_t fn, void* arg,
                           const aco_rt_spawn_opts_t* opts) {
    return rt_spawn(s, fn, arg, opts, NULL);
}

aco_rt_co_t* aco_rt_spawn(aco_rt_sched_t* s, aco_rt_fn_t fn, void* arg) {
    return aco_rt_spawn2(s, fn, arg, NULL);
}

static void record_free(aco_rt_sched_t* s, aco_rt_co_t* co) {
    if (co->flags & RT_NO_START) { rec_free(co); return; } /* no aco, not listed */
    if (rt_load(&co->cancel_sent) == 1) {
        co->flags |= RT_FREE_LATER;     /* its cancel message is on the way */
        return;
    }
    cos_del(s, co);
    rt_keys_free(co);                   /* a co destroyed before its end */
    if (!(co->flags & RT_STANDALONE) && s->nfree < FREE_RECS_MAX) {
        co->next = s->free_recs;
        s->free_recs = co;
        s->nfree++;
        return;
    }
    if ((co->flags & RT_STANDALONE) && s->nsolo < SOLO_MAX) {
        co->next = s->free_solo;        /* the stack pool */
        s->free_solo = co;
        s->nsolo++;
        return;
    }
    aco_share_stack_t* st = (co->flags & RT_STANDALONE) ? rt_aco(co)->share_stack : NULL;
    rec_drop(co);
    if (st) aco_share_stack_destroy(st);
}

/* Free a finished record of any thread's scheduler. */
static void record_free_any(aco_rt_co_t* co) {
    if (co->s == rt_tls_sched) record_free(co->s, co);
    else rt_send(co->s, &co->msg, RT_MSG_FREE);
}

/* A co ended: free it if nobody will join it. */
static void co_ended(aco_rt_sched_t* s, aco_rt_co_t* co) {
    s->st.cos_alive--;
    if (s->st.cos_alive == 0 && s->pool) {
        /* seq_cst: aco_rt_pool_wait counts itself in, then looks at load */
        __atomic_exchange_n(&s->load, 0u, __ATOMIC_SEQ_CST);
        rt_pool_idle(s->pool);
    } else {
        publish_load(s);
    }
    co->state = RT_DONE;
    guess_learn(s, co);
    if (co->flags & RT_DETACHED) record_free(s, co);
}

static void cancel_local(aco_rt_co_t* co);
static void cancel_all(aco_rt_sched_t* s);

/* Everything other threads sent.  Non-zero if there was something. */
static int drain(aco_rt_sched_t* s) {
    int got = closes_drain(s);
    for (;;) {
        rt_msg_t* m = inbox_pop(&s->inbox);
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
        case RT_MSG_SPAWN:  spawn_arrived(s, co); break;
        case RT_MSG_FREE:   record_free(s, co); break;
        case RT_MSG_CANCEL:
            cancel_local(co);
            rt_store(&co->cancel_sent, (uint8_t)2);
            if (co->flags & RT_FREE_LATER) record_free(s, co);
            break;
        }
    }
}

static void run_co(aco_rt_sched_t* s, aco_rt_co_t* co) {
    /* libaco aborts if it finds no memory to copy out the frames of the
     * co on co's share stack: get it now, or co waits for its next turn. */
    aco_t* a = rt_aco(co);
    aco_t* owner = a->share_stack->owner;
    if (rt_unlikely(owner != a && owner != NULL) && aco_resume_reserve(a) < 0) {
        rt_rq_push(s, co);
        return;
    }
    s->cur = co;
    co->state = RT_RUNNING;
    s->st.switches++;
    aco_resume(rt_aco(co));
    s->cur = NULL;
    /* What it spawned goes out before it may count as ended (pool_wait). */
    if (s->out_pending) outbox_flush_all(s);
    if (rt_aco(co)->is_end) co_ended(s, co);
}

static int poll_once(aco_rt_sched_t* s, int64_t timeout) {
    int r = s->be->poll(s, timeout);
    if (s->wheel.armed) rt_wheel_advance(&s->wheel, rt_now());
    return r;
}

/* Nothing is ready: spin a little if other threads have been sending (the
 * next message is likely soon, and a sleep and a wake cost microseconds);
 * then sleep in the backend until I/O, a timer or an eventfd write from a
 * sender (notify) comes. */
/* Has another thread asked something of s? */
static inline int asked(aco_rt_sched_t* s) {
    return !inbox_empty(&s->inbox) || __atomic_load_n(&s->stop, __ATOMIC_SEQ_CST) ||
           __atomic_load_n(&s->closes, __ATOMIC_SEQ_CST) != NULL ||
           __atomic_load_n(&s->cancel_gen, __ATOMIC_SEQ_CST) != s->cancel_seen ||
           (s->noutbox && sibling_work(s));
}

static int idle(aco_rt_sched_t* s, int64_t timeout, int* hot) {
    if (*hot && timeout != 0 && s->spin_ns > 0) {
        *hot = 0;
        int64_t end = rt_now() + s->spin_ns;
        for (unsigned i = 1; inbox_empty(&s->inbox); i++) {
            rt_pause();     /* (one: more make a VM deschedule the vCPU) */
            if ((i & 63) == 0 && (asked(s) || rt_now() > end)) break;
        }
        if (asked(s)) return 0;
    }
    __atomic_store_n(&s->sleeping, 1, __ATOMIC_SEQ_CST);
    if (asked(s)) {
        __atomic_store_n(&s->sleeping, 0, __ATOMIC_RELAXED);
        return 0;
    }
    int r = poll_once(s, timeout);
    __atomic_store_n(&s->sleeping, 0, __ATOMIC_RELAXED);
    return r;
}

int aco_rt_sched_run(aco_rt_sched_t* s) {
    if (s == NULL || s != rt_tls_sched || s->running || aco_gtls_co != s->main_co)
        return -EPERM;
    s->running = 1;
    int r = 0, hot = 0;
    unsigned n = 0;
    while (!rt_load(&s->stop)) {
        aco_rt_co_t* co;
        while ((co = rq_pop(s)) != NULL) {
            run_co(s, co);
            /* I/O, timers and other threads get their turn among busy cos. */
            if (++n >= POLL_EVERY) {
                n = 0;
                if ((s->st.io_inflight || s->wheel.armed) && (r = poll_once(s, 0)) < 0) goto out;
                drain(s);
                if (rt_unlikely(rt_load(&s->cancel_gen) != s->cancel_seen)) cancel_all(s);
                /* (a spawner that never blocks: its new cos get a turn) */
                if (__atomic_load_n(&s->newq_n, __ATOMIC_RELAXED)) take_new(s, s, 1);
            }
            if (rt_load(&s->stop)) goto out;
        }
        if (s->out_pending) outbox_flush_all(s);  /* (spawns from a timer callback) */
        if (drain(s)) { hot = 1; continue; }
        if (__atomic_load_n(&s->newq_n, __ATOMIC_RELAXED) && take_new(s, s, 1)) continue;
        if (s->noutbox && steal(s)) { hot = 1; continue; }
        if (rt_unlikely(rt_load(&s->cancel_gen) != s->cancel_seen)) { cancel_all(s); continue; }
        if (s->st.cos_alive == 0 && s->pool == NULL) break;
        int64_t timeout = rt_wheel_timeout(&s->wheel, rt_now());
        if (timeout < 0 && s->st.io_inflight == 0 && s->pool == NULL &&
            __atomic_load_n(&rt_nsched, __ATOMIC_ACQUIRE) == 1) {
            /* Every co waits on another co, and nothing else can wake one. */
            r = -EDEADLK;
            break;
        }
        /* a thief pays back the records it owes before it waits */
        if (s->owed && s->free_recs) rec_pay_all(s);
        if ((r = idle(s, timeout, &hot)) < 0) break;
    }
out:
    /* A stop is used up by the run it ends; one asked before the run began
     * ends it at once (another thread's stop may come just before). */
    if (rt_load(&s->stop)) __atomic_exchange_n(&s->stop, 0, __ATOMIC_SEQ_CST);
    s->running = 0;
    return r;
}

void aco_rt_sched_stop(aco_rt_sched_t* s) {
    if (s == NULL) return;
    __atomic_store_n(&s->stop, 1, __ATOMIC_SEQ_CST);
    if (s != rt_tls_sched) rt_notify(s);
}

/* Take waiter w off its queue, under its object's lock if it has one. */
static void unqueue(rt_waiter_t* w) {
    if (w->q == NULL) return;       /* (then its lock may be long gone) */
    uint32_t* lock = w->lock;
    if (lock) rt_lock(lock);
    if (w->q) rt_wq_remove(w);
    if (lock) rt_unlock(lock);
}

void aco_rt_sched_free(aco_rt_sched_t* s) {
    if (s == NULL || s != rt_tls_sched || s->running) return;
    rt_sched_reg(s, 0);     /* no more closes from other threads */
    drain(s);       /* spawns become cos (freed below), frees are done */
    take_new(s, s, 1);     /* and so do the unstarted ones */
    /* First the wheel: the parked cos' deadline timers are in their
     * records, freed below; the program's timers outlive us disarmed. */
    rt_wheel_clear(&s->wheel);
    /* Unfinished cos: destroy them where they stand (aco_destroy drops a
     * suspended co's frames); their timers go with the wheel. */
    while (s->ncos) {
        aco_rt_co_t* co = s->cos[s->ncos - 1];
        /* (the pthread face: the record of its routine goes too) */
        void (*dropped)(aco_rt_co_t*) = __atomic_load_n(&rt_co_dropped, __ATOMIC_ACQUIRE);
        if (dropped) dropped(co);
        /* Parked: off the program's objects' wait queues, which outlive
         * it (a mutex it holds stays held: nothing records what it holds). */
        if (co->state == RT_PARKED) {
            unqueue(&co->w);
            for (int i = 0; co->x && i < co->x->seln; i++) unqueue(&co->x->selw[i]);
        }
        co->flags &= RT_STANDALONE;
        co->cancel_sent = 0;            /* a late message would be the program's bug */
        s->nfree = FREE_RECS_MAX;       /* record_free frees, not keeps */
        record_free(s, co);
    }
    while (s->free_recs) {
        aco_rt_co_t* co = s->free_recs;
        s->free_recs = co->next;
        rec_drop(co);
    }
    for (int pass = 0; pass < 2; pass++) {     /* records without a co */
        aco_rt_co_t* co = pass ? __atomic_exchange_n(&s->gifts, NULL, __ATOMIC_ACQUIRE) : s->bare;
        for (aco_rt_co_t* next; co; co = next) {
            next = co->next;
            rec_free(co);
        }
    }
    s->bare = NULL;
    while (s->free_solo) {
        aco_rt_co_t* co = s->free_solo;
        s->free_solo = co->next;
        aco_share_stack_t* st = rt_aco(co)->share_stack;
        rec_drop(co);
        aco_share_stack_destroy(st);
    }
    s->be->fini(s);
    rt_fd_free_all(s);
    for (unsigned i = 0; i < s->nstacks; i++)
        if (s->stacks[i]) aco_share_stack_destroy(s->stacks[i]);
    free(s->stacks);
    free(s->cos);
    if (s->own_main) main_free(s->main_co);
    rt_sys_close(s->evfd);
    __atomic_fetch_sub(&rt_nsched, 1u, __ATOMIC_ACQ_REL);
    rt_tls_sched = NULL;
    free(s);
}

/* ------------------------------------------------------------------------ */
/* Cos                                                                      */
/* ------------------------------------------------------------------------ */

aco_rt_co_t* aco_rt_self(void) { return rt_self(); }

int aco_rt_cancelled(void) {
    aco_rt_co_t* co = rt_self();
    return co && (co->flags & RT_CANCELLED);
}

static void join_abort(aco_rt_co_t* me, int err) {
    if (!rt_claim(me)) return;          /* it ended: its wake is coming */
    aco_rt_co_t* target = (aco_rt_co_t*)me->wait_obj;
    aco_rt_co_t* e = me;
    rt_cas(&target->joiner, &e, NULL);  /* fails only if it ended meanwhile */
    rt_wake(me, err);
}

int aco_rt_join(aco_rt_co_t* co, int64_t deadline) {
    aco_rt_co_t* me = rt_self();
    if (me == NULL) return -EPERM;
    if (co == NULL || co == me) return -EINVAL;
    aco_rt_co_t* j = rt_load(&co->joiner);
    if (j != NULL && j != RT_JOIN_DONE) return -EINVAL;     /* a joiner, or detached */
    if (me->flags & RT_CANCELLED) return -ECANCELED;
    if (j == NULL) {
        int r = rt_may_block(me, deadline);
        if (r) return r;
        rt_claim_reset(me);
        if (rt_cas(&co->joiner, &j, me)) {
            r = rt_park(me, RT_W_JOIN, co, deadline);
            if (r) return r;
        } else if (j != RT_JOIN_DONE) {
            return -EINVAL;             /* another joiner, or a detach, came first */
        }
    }
    int r = (co->flags & RT_NO_START) ? -ENOMEM : 0;
    record_free_any(co);
    return r;
}

int aco_rt_detach(aco_rt_co_t* co) {
    if (co == NULL) return -EINVAL;
    aco_rt_co_t* j = NULL;
    if (rt_cas(&co->joiner, &j, RT_JOIN_DETACH)) return 0;  /* freed when it ends */
    if (j != RT_JOIN_DONE) return -EINVAL;
    record_free_any(co);
    return 0;
}

static void cancel_local(aco_rt_co_t* co) {
    if (co->state == RT_DONE || (co->flags & RT_CANCELLED)) return;
    co->flags |= RT_CANCELLED;
    if (co->state == RT_PARKED) rt_abort(co, -ECANCELED);
}

void rt_cancel_async(aco_rt_co_t* co) {
    uint8_t none = 0;
    if (rt_cas(&co->cancel_sent, &none, (uint8_t)1))
        rt_send(co->s, &co->cmsg, RT_MSG_CANCEL);   /* its thread does it */
}

int aco_rt_cancel(aco_rt_co_t* co) {
    if (co == NULL) return -EINVAL;
    if (rt_unlikely(!__atomic_load_n(&co->started, __ATOMIC_SEQ_CST))) {
        /* In a newq, maybe being taken: whoever starts it sees this (the
         * Dekker pair of spawn_arrived); if it started meanwhile, on. */
        __atomic_store_n(&co->cancel_req, (uint8_t)1, __ATOMIC_SEQ_CST);
        if (!__atomic_load_n(&co->started, __ATOMIC_SEQ_CST)) return 0;
    }
    if (co->s == rt_tls_sched) cancel_local(co);
    else rt_cancel_async(co);
    return 0;
}

/* Every co of s, at a pool's request (aco_rt_pool_wait, which waits until
 * each thread has done it: cancel_seen is stored when all are cancelled). */
static void cancel_all(aco_rt_sched_t* s) {
    uint32_t gen = rt_load(&s->cancel_gen);
    for (uint32_t i = 0; i < s->ncos; i++) cancel_local(s->cos[i]);
    rt_lock(&s->newq_lock);
    for (uint32_t b = 0; b < s->nq_count; b++) {
        const rt_nq_batch_t* nb = &s->nq[(s->nq_first + b) % RT_NQ_BATCHES];
        aco_rt_co_t* c = nb->head;
        for (uint32_t i = 0; i < nb->n; i++, c = c->next)
            __atomic_store_n(&c->cancel_req, (uint8_t)1, __ATOMIC_SEQ_CST);
    }
    rt_unlock(&s->newq_lock);
    __atomic_store_n(&s->cancel_seen, gen, __ATOMIC_SEQ_CST);
    if (s->pool) rt_pool_idle(s->pool);
}

int aco_rt_yield(void) {
    aco_rt_co_t* co = rt_self();
    if (co == NULL) return -EPERM;
    if (co->flags & RT_CANCELLED) return -ECANCELED;
    co->state = RT_READY;
    rt_rq_push(co->s, co);
    aco_yield();
    return 0;
}

static void sleep_abort(aco_rt_co_t* co, int err) {
    rt_wake(co, err == -ETIMEDOUT ? 0 : err);
}

/* aco_rt_sleep_until up to the switch: 0 or -errno. */
__attribute__((noinline))
static int sleep_begin(int64_t deadline) {
    aco_rt_co_t* co = rt_self();
    if (co == NULL) return -EPERM;
    if (co->flags & RT_CANCELLED) return -ECANCELED;
    /* -1: no limit; every other negative deadline is long past */
    rt_park_begin(co, RT_W_SLEEP, NULL, deadline == -1 ? INT64_MAX : deadline < 0 ? 0 : deadline);
    return 0;
}

/* Nothing lives across the switch: a sleeping co's saved frames stay small
 * (memory per parked co). */
int aco_rt_sleep_until(int64_t deadline) {
    int r = sleep_begin(deadline);
    if (r) return r;
    aco_yield();
    return rt_self()->res;
}

int aco_rt_sleep(int64_t ns) {
    if (ns < 0) ns = 0;
    int64_t now = rt_now();
    return aco_rt_sleep_until(ns > INT64_MAX - now ? INT64_MAX : now + ns);
}

rt_extra_t* rt_extra_grow(aco_rt_co_t* co, size_t buf_min) {
    rt_extra_t* x = co->x;
    if (x == NULL) {
        x = calloc(1, sizeof(*x));
        if (x == NULL) return NULL;
        co->x = x;
    }
    if (x->buf_cap < buf_min) {
        size_t cap = x->buf_cap ? x->buf_cap : 64;
        while (cap < buf_min) cap *= 2;
        void* b = realloc(x->buf, cap);
        if (b == NULL) return NULL;
        x->buf = b;
        x->buf_cap = cap;
    }
    return x;
}

/* ------------------------------------------------------------------------ */
/* Seeing inside                                                            */
/* ------------------------------------------------------------------------ */

void aco_rt_stats(const aco_rt_sched_t* s, aco_rt_stats_t* out) {
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

void aco_rt_dump(const aco_rt_sched_t* s, int fd) {
    if (s == NULL) s = rt_tls_sched;
    if (s == NULL) { dprintf(fd, "aco_rt: no scheduler on this thread\n"); return; }
    dprintf(fd, "aco_rt scheduler %p backend %s: %llu cos alive, %llu parked, "
            "%llu ready, %llu timers, %llu I/O in flight, %llu switches\n",
            (const void*)s, s->be->name, (unsigned long long)s->st.cos_alive,
            (unsigned long long)s->st.cos_parked, (unsigned long long)s->st.cos_ready,
            (unsigned long long)s->wheel.armed, (unsigned long long)s->st.io_inflight,
            (unsigned long long)s->st.switches);
    int64_t now = rt_now();
    for (uint32_t i = 0; i < s->ncos; i++) {
        const aco_rt_co_t* co = s->cos[i];
        const char* name = co->x ? co->x->name : NULL;
        dprintf(fd, "  co %p %s%s%s %s", (const void*)co,
                name ? "\"" : "", name ? name : "", name ? "\"" : "",
                state_name(co->state));
        if (co->flags & RT_CANCELLED) dprintf(fd, " cancelled");
        if (co->state == RT_PARKED) {
            dprintf(fd, " in %s %p", co->wait < RT_W_N ? rt_waits[co->wait].name : "?", co->wait_obj);
            if (rt_timer_armed(&co->tmo))
                dprintf(fd, " deadline in %.3f ms",
                        (double)((co->tmo.expiry_ << RT_TICK_SHIFT) - now) / 1e6);
        }
        dprintf(fd, " (aco %p, stack %p%s)\n", (void*)rt_aco(co),
                rt_aco(co)->share_stack ? rt_aco(co)->share_stack->ptr : NULL,
                (co->flags & RT_STANDALONE) ? " own" : "");
    }
}
