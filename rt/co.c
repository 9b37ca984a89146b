/* co.c - cos and their records: spawn (here, on another thread), the
 * co's start and end, join, detach, cancel; the records' memory.
 *
 * Records.  One allocation per co (rt_impl.h): the record, its private
 * buffer, its libaco co with a save stack.  A finished co's record keeps
 * its libaco co and goes to a free list: the next spawn resets that co
 * (aco_reset2) instead of creating one.  A finished standalone co is kept
 * with its stack (a stack pool).
 *
 * A co spawned on another thread's scheduler is a bare record (no libaco
 * co) sent to that thread's inbox; its thread makes the co when the
 * message comes (rt_spawn_arrived).  Then what pool threads exchange
 * (batched spawns, stealing, records given back).  The loop that runs cos,
 * and parking, are loop.c's: the two files are the runtime's kernel.
 */
#define _GNU_SOURCE
#include "rt_impl.h"
#include "rt_sys.h"

#include <stdio.h>
#include <stdlib.h>

void (*rt_co_dropped)(aco_rt_co_t* co);
void (*rt_hook_keys_exit)(aco_rt_co_t* co);
void (*rt_hook_group_leave)(aco_rt_co_t* co);
void (*rt_hook_offload_forsake)(aco_rt_co_t* co);
int (*rt_hook_closes)(aco_rt_sched_t* s);

#define FREE_RECS_MAX 16384   /* finished records kept with their cos */
#define SOLO_MAX 64             /* finished standalone cos kept with their stacks */

/* ------------------------------------------------------------------------ */
/* Records                                                                  */
/* ------------------------------------------------------------------------ */

static aco_share_stack_t* next_share_stack(aco_rt_sched_t* s) {
    unsigned i = s->recs.next_stack++ % s->recs.nstacks;
    /* Avoid the stack the spawning co runs on: two cos that take turns on
     * one stack copy each other's frames out and in at every switch. */
    if (s->run.cur && s->recs.nstacks > 1 && rt_aco(s->run.cur)->share_stack == s->recs.stacks[i] &&
        !(s->run.cur->flags & RT_STANDALONE))
        i = s->recs.next_stack++ % s->recs.nstacks;
    if (s->recs.stacks[i] == NULL) s->recs.stacks[i] = aco_share_stack_try_new2(s->recs.stack_size, 1);
    return s->recs.stacks[i];        /* NULL: ENOMEM */
}

static void extra_free(rt_extra_t* x) {
    if (x == NULL) return;
    free(x->keys);              /* (a co destroyed unended: no destructor runs) */
    free(x->selw);
    free(x->sellocks);
    free(x->buf);
    free(x);
}

rt_extra_t* rt_extra_grow(aco_rt_co_t* co, size_t buf_min) {
    rt_extra_t* x = co->x;
    if (x == NULL) {
        x = calloc(1, sizeof(*x));
        if (x == NULL) return NULL;
        co->x = x;
    }
    if (x->buf_cap < buf_min) {
        /* The buffer is a power of 2 of bytes, and no allocation passes
         * PTRDIFF_MAX (malloc(3)): a request past half of it has no such
         * power (past SIZE_MAX / 2 the doubling wrapped round to 0, and
         * looped for good). */
        if (buf_min > (size_t)PTRDIFF_MAX / 2 + 1) return NULL;
        size_t cap = x->buf_cap ? x->buf_cap : 64;
        while (cap < buf_min) cap *= 2;
        void* b = realloc(x->buf, cap);
        if (b == NULL) return NULL;
        x->buf = b;
        x->buf_cap = cap;
    }
    return x;
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
    if (co->x && co->x->keys) rt_hook_keys_exit(co);    /* in the co: they may block */
    co->state = RT_DONE;
    if (co->x) co->x->shield = co->x->kept = 0;     /* (the record is reused) */
    if (co->x && co->x->group) rt_hook_group_leave(co);
    if (rt_join_end(co) == RT_JOIN_DETACH) co->flags |= RT_DETACHED;
    aco_exit();
    __builtin_unreachable();    /* an ended co is never resumed */
}

static int cos_add(aco_rt_sched_t* s, aco_rt_co_t* co) {
    if (s->recs.ncos == s->recs.cos_cap) {
        uint32_t cap = s->recs.cos_cap ? s->recs.cos_cap * 2 : 64;
        aco_rt_co_t** n = realloc(s->recs.cos, cap * sizeof(*n));
        if (n == NULL) return -ENOMEM;
        s->recs.cos = n;
        s->recs.cos_cap = cap;
    }
    co->slot = s->recs.ncos;
    s->recs.cos[s->recs.ncos++] = co;
    return 0;
}

static void cos_del(aco_rt_sched_t* s, aco_rt_co_t* co) {
    aco_rt_co_t* last = s->recs.cos[--s->recs.ncos];
    s->recs.cos[co->slot] = last;
    last->slot = co->slot;
}

/* Free a record without a libaco co (or whose co is gone), with its extra
 * block. */
void rt_rec_free(aco_rt_co_t* co) {
    extra_free(co->x);
    aco_free(co, co->rec_sz);
}

/* Free a kept record: its libaco co (in it), extra block and itself. */
static void rec_drop(aco_rt_co_t* co) {
    aco_destroy(rt_aco(co));
    rt_rec_free(co);
}

/* Give record co (state, fn and arg set) its libaco co, on this thread, in
 * the record's own memory: on a share stack, or on a stack of its own (a
 * pooled one when one is kept of this size, up to twice as big).  0 or
 * -ENOMEM. */
static int attach_aco(aco_rt_sched_t* s, aco_rt_co_t* co, int standalone, size_t stack,
                      void* arg) {
    aco_share_stack_t* st = NULL;
    if (standalone) {
        size_t sz = stack ? stack : s->recs.stack_size;
        co->flags |= RT_STANDALONE;
        for (aco_rt_co_t** pp = &s->recs.free_solo; *pp; pp = &(*pp)->next) {
            aco_rt_co_t* old = *pp;
            size_t have = rt_aco(old)->share_stack->sz;
            if (have < sz || have / 2 > sz) continue;
            *pp = old->next;
            s->recs.nsolo--;
            st = rt_aco(old)->share_stack;
            rec_drop(old);              /* the stack is free for co */
            break;
        }
        if (st == NULL) st = aco_share_stack_try_new2(sz, 1);
    } else {
        st = next_share_stack(s);
    }
    if (st == NULL) return -ENOMEM;
    aco_create_in(rt_aco(co), co->rec_sz - rt_aco_off(co), s->run.main_co, st, co_main, arg);
    return 0;
}

/* The save stack a new record of s for fn gets: what opts ask for, none for
 * a stack of its own (nothing is ever copied), else s's guess.  s may be
 * another thread's: a slot's two words may then disagree, which costs at
 * most a save stack of the wrong size. */
size_t rt_save_size(aco_rt_sched_t* s, aco_rt_fn_t fn, const aco_rt_spawn_opts_t* opts) {
    if (opts && (opts->standalone || opts->stack_size > s->recs.stack_size)) return 0;
    if (opts && opts->save_size) return opts->save_size;
    unsigned i = rt_guess_slot(fn);
    if (rt_load(&s->recs.guess[i].fn) != (uintptr_t)fn) return 0;
    return rt_load(&s->recs.guess[i].need);
}

/* A record, zeroed up to its libaco co, with room for a private buffer of
 * priv bytes and a co with a save stack of save bytes: one allocation, from
 * libaco's allocator (the program's, when it set one). */
aco_rt_co_t* rt_rec_new(size_t priv, size_t save) {
    if (save > RT_SAVE_MAX) { errno = ENOMEM; return NULL; }   /* (aco_rt.h) */
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

/* What a spawn asks that the record keeps in its extra block (made when
 * needed): its name, the stack of a remote spawn (req), its group's links.
 * 0 or -ENOMEM. */
__attribute__((noinline))
int rt_rec_opts_x(aco_rt_co_t* co, const char* name, size_t req) {
    rt_extra_t* x = rt_extra(co, 0);
    if (x == NULL) return -ENOMEM;
    x->name = name;
    x->stack_req = req;
    return 0;
}

/* The records' part of a new scheduler s: its share stacks, made lazily
 * (next_share_stack).  0 or -ENOMEM; rt_recs_fini frees them and the list
 * of records. */
int rt_recs_init(aco_rt_sched_t* s, const aco_rt_opts_t* o) {
    s->recs.stack_size = o->stack_size;
    s->recs.nstacks = o->share_stacks;
    s->recs.stacks = calloc(s->recs.nstacks, sizeof(*s->recs.stacks));
    return s->recs.stacks ? 0 : -ENOMEM;
}

void rt_recs_fini(aco_rt_sched_t* s) {
    for (unsigned i = 0; s->recs.stacks && i < s->recs.nstacks; i++)
        if (s->recs.stacks[i]) aco_share_stack_destroy(s->recs.stacks[i]);
    free(s->recs.stacks);
    free(s->recs.cos);
}

/* ------------------------------------------------------------------------ */
/* Spawn                                                                    */
/* ------------------------------------------------------------------------ */

/* A new co of this thread's scheduler s, ready. */
static aco_rt_co_t* spawn_local(aco_rt_sched_t* s, aco_rt_fn_t fn, void* arg,
                                const aco_rt_spawn_opts_t* opts, int hold) {
    /* A co that needs more stack than the share stacks have gets its own. */
    int standalone = opts && (opts->standalone || opts->stack_size > s->recs.stack_size);
    size_t priv = opts ? opts->private_size : 0;
    aco_rt_co_t* co = NULL;
    if (!standalone && s->recs.free_recs && s->recs.free_recs->priv_cap >= rt_priv_room(priv) &&
        rt_rec_save_ok(s->recs.free_recs, opts, 1)) {
        co = s->recs.free_recs;
        s->recs.free_recs = co->next;
        s->recs.nfree--;
        aco_reset2(rt_aco(co), co_main, arg);
        co->res = 0;
        co->io_abort = 0;
        co->wait_obj = NULL;
    } else {
        if ((co = rt_rec_new(priv, rt_save_size(s, fn, opts))) == NULL) return NULL;
        rt_rec_init(s, co);
        if (attach_aco(s, co, standalone, opts ? opts->stack_size : 0, arg) < 0) {
            rt_rec_free(co);
            errno = ENOMEM;
            return NULL;
        }
    }
    if (rt_rec_opts(co, opts, 0, hold) < 0 || cos_add(s, co) < 0) {
        if (co->flags & RT_STANDALONE) {
            /* not for free_recs: its stack would go with rec_drop's co */
            aco_share_stack_t* st = rt_aco(co)->share_stack;
            rec_drop(co);
            aco_share_stack_destroy(st);
        } else {
            co->next = s->recs.free_recs;    /* keep it for later */
            s->recs.free_recs = co;
            s->recs.nfree++;
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
    rt_publish_load(s);
    if (!hold) rt_rq_push(s, co);
    return co;
}

#ifndef ACO_RT_NO_THREADS
/* A new co of another thread's scheduler s: a bare record now, its libaco
 * co made by s's thread when the message comes (share stacks are its). */
static aco_rt_co_t* spawn_remote(aco_rt_sched_t* s, aco_rt_fn_t fn, void* arg,
                                 const aco_rt_spawn_opts_t* opts, int hold) {
    size_t priv = opts ? opts->private_size : 0;
    aco_rt_co_t* co = rt_rec_new(priv, rt_save_size(s, fn, opts));
    if (co == NULL) return NULL;
    rt_priv_set_size(co, priv);
    rt_rec_init(s, co);
    if (rt_rec_opts(co, opts, opts ? opts->stack_size : 0, hold) < 0) {
        rt_rec_free(co);
        errno = ENOMEM;
        return NULL;
    }
    co->started = 1;                    /* (published by the send) */
    co->fn = fn;
    co->w.slot = arg;                   /* until its libaco co is made */
    co->flags = RT_REMOTE;
    if (opts && (opts->standalone || opts->stack_size > s->recs.stack_size)) co->flags |= RT_STANDALONE;
    co->state = RT_READY;
    /* a move into sent from another thread (see pool_busy in pool.c) */
    if (s->pooled.pool) __atomic_fetch_add(&s->ld.mv_begun, 1u, __ATOMIC_SEQ_CST);
    __atomic_fetch_add(&s->ld.sent, 1u, __ATOMIC_SEQ_CST);
    if (s->pooled.pool) __atomic_fetch_add(&s->ld.mv_ended, 1u, __ATOMIC_SEQ_CST);
    if (!hold) rt_send(s, &co->msg, RT_MSG_SPAWN);
    return co;
}
#endif

/* The message of spawn_remote came: make the co and queue it. */
void rt_spawn_arrived(aco_rt_sched_t* s, aco_rt_co_t* co) {
    int standalone = (co->flags & RT_STANDALONE) != 0;
    if (!co->started) {
        /* From a newq: it is this thread's now.  Dekker with aco_rt_cancel:
         * started is stored, then cancel_req looked at; the canceller the
         * other way round. */
        __atomic_store_n(&co->started, (uint8_t)1, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(&co->cancel_req, __ATOMIC_SEQ_CST)) co->flags |= RT_CANCELLED;
    } else if (!standalone && s->recs.free_recs) {
        /* A record a remote spawn made brings its own memory: one kept
         * here goes instead, so that no more are kept than this thread's
         * own spawns take back.  (One from a newq is the spawner's own
         * kept record, or given back by a thief: take_new.) */
        aco_rt_co_t* old = s->recs.free_recs;
        s->recs.free_recs = old->next;
        s->recs.nfree--;
        rec_drop(old);
    }
    co->flags &= (uint8_t)~(RT_REMOTE | RT_STANDALONE);
    if (attach_aco(s, co, standalone, standalone ? co->x->stack_req : 0, co->w.slot) == 0) {
        if (cos_add(s, co) == 0) {
            s->st.cos_alive++;
            s->st.spawned++;
            rt_publish_load(s);
            __atomic_fetch_sub(&s->ld.sent, 1u, __ATOMIC_SEQ_CST);   /* after: never both 0 */
            rt_rq_push(s, co);
            return;
        }
        aco_share_stack_t* st = rt_aco(co)->share_stack;
        aco_destroy(rt_aco(co));
        if (co->flags & RT_STANDALONE) aco_share_stack_destroy(st);
        co->flags &= (uint8_t)~RT_STANDALONE;
    }
    /* Nobody to tell but its joiner: it ends at once, never started
     * (said once per process: a detached one has no joiner) */
    static unsigned said;
    if (__atomic_exchange_n(&said, 1u, __ATOMIC_RELAXED) == 0)
        fprintf(stderr, "aco_rt_spawn: out of memory making a co sent from another "
                "thread: it ends without running (aco_rt_join says -ENOMEM; said once)\n");
    co->flags |= RT_NO_START;
    co->state = RT_DONE;
    if (__atomic_fetch_sub(&s->ld.sent, 1u, __ATOMIC_SEQ_CST) == 1 && s->st.cos_alive == 0 && s->pooled.pool)
        rt_idle_tell(s->pooled.idle);
    if (co->x && co->x->group) rt_hook_group_leave(co);
    if (rt_join_end(co) == RT_JOIN_DETACH) rt_record_free(s, co);   /* (a cancel may be on its way) */
}


aco_rt_co_t* rt_spawn(aco_rt_sched_t* s, aco_rt_fn_t fn, void* arg,
                      const aco_rt_spawn_opts_t* opts, int hold) {
    if (s == NULL) s = rt_tls_sched;
    if (s == NULL) { errno = EPERM; return NULL; }
    if (fn == NULL) { errno = EINVAL; return NULL; }
#ifdef ACO_RT_NO_THREADS
    if (s != rt_tls_sched) { errno = EPERM; return NULL; }
#else
    if (s != rt_tls_sched) return spawn_remote(s, fn, arg, opts, hold);
#endif
    return spawn_local(s, fn, arg, opts, hold);
}

void rt_spawn_go(aco_rt_co_t* co) {
#ifndef ACO_RT_NO_THREADS
    if (co->flags & RT_REMOTE) {
        rt_send(co->s, &co->msg, RT_MSG_SPAWN);
        return;
    }
#endif
    rt_rq_push(co->s, co);
}

aco_rt_co_t* aco_rt_spawn2(aco_rt_sched_t* s, aco_rt_fn_t fn, void* arg,
                           const aco_rt_spawn_opts_t* opts) {
    return rt_spawn(s, fn, arg, opts, 0);
}

aco_rt_co_t* aco_rt_spawn(aco_rt_sched_t* s, aco_rt_fn_t fn, void* arg) {
    return aco_rt_spawn2(s, fn, arg, NULL);
}

/* ======================================================================== */
/* What the threads of a pool exchange: new cos that a sibling may take
 * (stealing), and records given back for those taken (each thread keeps
 * an rt_outbox_t per sibling: what it owes it, and loop.c's mailbox).  A
 * spawn on a sibling's scheduler (aco_rt_spawn) goes to its inbox at once,
 * as from any thread: one batched until the spawning co stopped running
 * was neither ready at once nor seen by aco_rt_pool_wait's cancel.
 *
 * Stealing.  A pool thread's new cos (aco_rt_pool_spawn from the pool)
 * wait in its newq, unstarted; the thread starts them when it has nothing
 * else, an idle sibling takes half.  While in a newq a co is counted in
 * newq_n, then in its taker's sent until it is started (load):
 * aco_rt_pool_wait reads them in that order.
 *
 * The single-thread build (ACO_RT_NO_THREADS) has no pool: no stealing
 * (rt_impl.h has the stubs), and no outboxes.
 */
static void newq_publish(aco_rt_sched_t* s);

void rt_pooled_join(aco_rt_sched_t* s, struct aco_rt_pool* p, rt_idle_t* idle,
                    aco_rt_sched_t** sibs, unsigned idx, unsigned n) {
    s->pooled.pool = p;
    s->pooled.idle = idle;
    s->pooled.sibs = sibs;
    s->pooled.idx = idx;
    /* (NULL: no stealing, and wakes go through the inbox, not mailboxes) */
    if ((s->pooled.outbox = calloc(n, sizeof(*s->pooled.outbox))) != NULL) s->pooled.noutbox = n;
}

/* Before s is freed: from now on its wakes of its former siblings' cos
 * hold them (rt_hold_sibling), as their frees wait for. */
void rt_pooled_leave(aco_rt_sched_t* s) {
    __atomic_store_n(&s->pooled.pool, NULL, __ATOMIC_RELAXED);
    free(s->pooled.outbox);
    s->pooled.outbox = NULL;
    s->pooled.noutbox = 0;
}

void rt_newq_flush(aco_rt_sched_t* me) {
    if (me->pooled.nq_priv_n) newq_publish(me);
    me->pooled.out_pending = 0;
}

#ifndef ACO_RT_NO_THREADS
/* ------------------------------------------------------------------------ */
/* Stealing                                                                 */
/* ------------------------------------------------------------------------ */

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
    if (opts && (opts->standalone || opts->stack_size > s->recs.stack_size)) goto fresh;
    if (s->recs.bare == NULL && __atomic_load_n(&s->newq.gifts, __ATOMIC_RELAXED))
        s->recs.bare = __atomic_exchange_n(&s->newq.gifts, NULL, __ATOMIC_ACQUIRE);
    if ((co = s->recs.bare) != NULL) {
        s->recs.bare = co->next;
        rec_prefetch(co->next);     /* given back by another thread: cold */
        if (co->priv_cap < rt_priv_room(priv) || !rt_rec_save_ok(co, opts, 0)) {
            /* Too small for this spawn: it goes (the list must move on,
             * or what thieves give back would pile up behind it). */
            rt_rec_free(co);
            goto fresh;
        }
    } else if ((co = s->recs.free_recs) != NULL && co->priv_cap >= rt_priv_room(priv) &&
               rt_rec_save_ok(co, opts, 0)) {
        s->recs.free_recs = co->next;
        s->recs.nfree--;
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
    if ((co = rt_rec_new(priv, rt_save_size(s, fn, opts))) != NULL) rt_rec_init(s, co);
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
    rt_outbox_t* o = &s->pooled.outbox[victim->pooled.idx];
    aco_rt_co_t *first = NULL, *last = NULL;
    o->owed += n;
    s->pooled.owed += n;
    while (o->owed && s->recs.free_recs) {
        o->owed--;
        s->pooled.owed--;
        aco_rt_co_t* co = s->recs.free_recs;
        s->recs.free_recs = co->next;
        s->recs.nfree--;
        aco_destroy(rt_aco(co));
        co->s = victim;
        co->next = first;
        first = co;
        if (last == NULL) last = co;
    }
    if (first == NULL) return;
    aco_rt_co_t* head = __atomic_load_n(&victim->newq.gifts, __ATOMIC_RELAXED);
    do last->next = head;
    while (!__atomic_compare_exchange_n(&victim->newq.gifts, &head, first, 1,
                                        __ATOMIC_RELEASE, __ATOMIC_RELAXED));
}

/* Before going idle: pay every sibling what is owed to it, as far as the
 * kept records go. */
void rt_rec_pay_all(aco_rt_sched_t* s) {
    for (unsigned i = 0; i < s->pooled.noutbox && s->pooled.owed && s->recs.free_recs; i++)
        if (s->pooled.outbox[i].owed) rec_pay(s, s->pooled.sibs[i], 0);
}

aco_rt_co_t* rt_spawn_stealable(aco_rt_fn_t fn, void* arg, const aco_rt_spawn_opts_t* opts) {
    aco_rt_sched_t* s = rt_tls_sched;
    size_t priv = opts ? opts->private_size : 0;
    aco_rt_co_t* co = rec_bare(s, fn, priv, opts);
    if (co == NULL) return NULL;
    if (rt_rec_opts(co, opts, opts ? opts->stack_size : 0, 0) < 0) {
        rt_rec_free(co);
        errno = ENOMEM;
        return NULL;
    }
    rt_priv_set_size(co, priv);
    co->fn = fn;
    co->w.slot = arg;                   /* until its libaco co is made */
    co->flags = RT_REMOTE;
    if (opts && (opts->standalone || opts->stack_size > s->recs.stack_size)) co->flags |= RT_STANDALONE;
    co->state = RT_READY;
    /* Kept to this thread first, published by 32 or when the spawning co
     * stops running (run_co): a thief sees batches, and the newq's cache
     * line does not move at every spawn.  A spawn outside any co (a timer
     * callback) is published at once: no co's stop would publish it, and
     * until then it is in no count (aco_rt_pool_wait would miss it, and a
     * run that stops first would leave it to nobody). */
    co->next = NULL;
    if (s->pooled.nq_priv_tail) s->pooled.nq_priv_tail->next = co; else s->pooled.nq_priv_head = co;
    s->pooled.nq_priv_tail = co;
    s->pooled.out_pending = 1;
    if (++s->pooled.nq_priv_n >= 32 || s->run.cur == NULL) rt_newq_flush(s);
    return co;
}

static void newq_publish(aco_rt_sched_t* s) {
    rt_lock(&s->newq.lock);
    int was_empty = s->newq.count == 0;
    if (s->newq.count < RT_NQ_BATCHES) {
        rt_nq_batch_t* b = &s->newq.ring[(s->newq.first + s->newq.count++) % RT_NQ_BATCHES];
        b->head = s->pooled.nq_priv_head;
        b->tail = s->pooled.nq_priv_tail;
        b->n = s->pooled.nq_priv_n;
    } else {                    /* the ring is full: the last batch grows */
        rt_nq_batch_t* b = &s->newq.ring[(s->newq.first + s->newq.count - 1) % RT_NQ_BATCHES];
        b->tail->next = s->pooled.nq_priv_head;
        b->tail = s->pooled.nq_priv_tail;
        b->n += s->pooled.nq_priv_n;
    }
    __atomic_store_n(&s->newq.n, s->newq.n + s->pooled.nq_priv_n, __ATOMIC_SEQ_CST);
    rt_unlock(&s->newq.lock);
    s->pooled.nq_priv_head = s->pooled.nq_priv_tail = NULL;
    s->pooled.nq_priv_n = 0;
    if (was_empty) {
        /* work for a sleeping sibling (it looks at newq_n before it sleeps) */
        unsigned n = s->pooled.noutbox;
        for (unsigned i = 1; i < n; i++) {
            aco_rt_sched_t* t = s->pooled.sibs[(s->pooled.idx + i) % n];
            if (t && __atomic_load_n(&t->mail.sleeping, __ATOMIC_SEQ_CST)) { rt_notify(t); break; }
        }
    }
}

/* Take cos from victim's newq, oldest first, and start them here: all of
 * them (the owner), or about half (a thief): half of the batches, whole,
 * so that under the lock only the ring moves and no record is touched; of
 * a lone batch, its first half (up to 32 records walked under the lock). */
unsigned rt_take_new(aco_rt_sched_t* s, aco_rt_sched_t* victim, int all) {
    rt_nq_batch_t got[RT_NQ_BATCHES];
    uint32_t nb = 0, n = 0;
    rt_lock(&victim->newq.lock);
    /* A pool's cancels (aco_rt_pool_wait(CANCEL)) are done by each thread
     * in its turn, and a co is cancelled by the one done where it was
     * spawned after it was spawned ("cos spawned later are not").  So cos
     * taken now are cancelled here when victim has a cancel asked and not
     * done (they were spawned before it, and rt_cancel_all marks only what
     * is in the newq when it looks, under this lock), or when this thread
     * has done one that victim has not yet been asked; and they are spared
     * by this thread's next cancel when victim has done one that this
     * thread has not (they were spawned after it, on victim).  The
     * requests are counted alike on every thread of a pool. */
    uint32_t v_gen = __atomic_load_n(&victim->ask.cancel_gen, __ATOMIC_SEQ_CST);
    uint32_t v_seen = __atomic_load_n(&victim->pooled.cancel_seen, __ATOMIC_SEQ_CST);
    int32_t ahead = (int32_t)(s->pooled.cancel_seen - v_seen);
    int cancel = v_gen != v_seen || ahead > 0;
    uint8_t spare = !cancel && ahead < 0 ? RT_SPARED : 0;
    uint32_t want = all ? victim->newq.count : victim->newq.count / 2;
    while (nb < want) {
        got[nb] = victim->newq.ring[victim->newq.first];
        n += got[nb++].n;
        victim->newq.first = (victim->newq.first + 1) % RT_NQ_BATCHES;
        victim->newq.count--;
    }
    if (nb == 0 && victim->newq.count == 1) {
        rt_nq_batch_t* b = &victim->newq.ring[victim->newq.first];
        uint32_t k = (b->n + 1) / 2 < 32 ? (b->n + 1) / 2 : 32;
        aco_rt_co_t* last = b->head;
        for (uint32_t i = 1; i < k; i++) last = last->next;
        got[0] = (rt_nq_batch_t){b->head, last, k};
        nb = 1;
        n = k;
        if ((b->n -= k) == 0) {
            victim->newq.first = (victim->newq.first + 1) % RT_NQ_BATCHES;
            victim->newq.count--;
        } else {
            b->head = last->next;
        }
    }
    if (n) {
        if (victim != s) __atomic_fetch_add(&s->ld.mv_begun, 1u, __ATOMIC_SEQ_CST);
        __atomic_fetch_add(&s->ld.sent, n, __ATOMIC_SEQ_CST);
        __atomic_store_n(&victim->newq.n, victim->newq.n - n, __ATOMIC_SEQ_CST);
        if (victim != s) __atomic_fetch_add(&s->ld.mv_ended, 1u, __ATOMIC_SEQ_CST);
    }
    rt_unlock(&victim->newq.lock);
    for (uint32_t b = 0; b < nb; b++) {
        aco_rt_co_t* c = got[b].head;
        for (uint32_t i = got[b].n; i--; ) {
            aco_rt_co_t* next = c->next;
            if (victim != s && i) rec_prefetch(next);
            c->s = s;           /* published to others by started (rt_spawn_arrived) */
            if (cancel) __atomic_store_n(&c->cancel_req, (uint8_t)1, __ATOMIC_SEQ_CST);
            rt_spawn_arrived(s, c);
            /* (after: a started co's cancel_req is read by no one else;
             * an aco_rt_cancel that stored 1 since cancels it anyway) */
            if (spare) __atomic_store_n(&c->cancel_req, spare, __ATOMIC_SEQ_CST);
            c = next;
        }
    }
    if (n && victim != s) rec_pay(s, victim, n);
    return n;
}

/* Is there work in a sibling's newq? */
int rt_sibling_work(aco_rt_sched_t* s) {
    for (unsigned i = 1; i < s->pooled.noutbox; i++) {
        aco_rt_sched_t* t = s->pooled.sibs[(s->pooled.idx + i) % s->pooled.noutbox];
        if (t && __atomic_load_n(&t->newq.n, __ATOMIC_SEQ_CST)) return 1;
    }
    return 0;
}

/* Idle: take half of the first sibling's newq that has some. */
unsigned rt_steal(aco_rt_sched_t* s) {
    for (unsigned i = 1; i < s->pooled.noutbox; i++) {
        aco_rt_sched_t* t = s->pooled.sibs[(s->pooled.idx + i) % s->pooled.noutbox];
        uint32_t n = t ? __atomic_load_n(&t->newq.n, __ATOMIC_SEQ_CST) : 0;
        if (n) return rt_take_new(s, t, 0);
    }
    return 0;
}
#else
static void newq_publish(aco_rt_sched_t* s) { (void)s; }
#endif

/* ------------------------------------------------------------------------ */
/* The end of a co, its record freed                                        */
/* ------------------------------------------------------------------------ */

/* Records kept for good (their co ended holding a mutex: rt_record_free),
 * listed so that they stay reachable (leak checkers) and are never used
 * again.  A stack through next (atomic: any thread's scheduler adds). */
static aco_rt_co_t* kept;

void rt_record_free(aco_rt_sched_t* s, aco_rt_co_t* co) {
    if (RT_CANCEL_ON_WAY(rt_load(&co->cancel_sent))) {
        co->flags |= RT_FREE_LATER;     /* its cancel message is on the way */
        return;
    }
    if (co->flags & RT_NO_START) { rt_rec_free(co); return; } /* no aco, not listed */
    cos_del(s, co);
    aco_share_stack_t* st = (co->flags & RT_STANDALONE) ? rt_aco(co)->share_stack : NULL;
    if (rt_unlikely(__atomic_load_n(&co->held, __ATOMIC_RELAXED))) {
        /* It ended (or was destroyed) holding a mutex, which stays held:
         * the record stays too, for good, so that no later co at this
         * address passes for the holder.  Its co and stack go. */
        aco_destroy(rt_aco(co));
        extra_free(co->x);
        co->x = NULL;
        if (st) aco_share_stack_destroy(st);
        co->next = __atomic_load_n(&kept, __ATOMIC_RELAXED);
        while (!__atomic_compare_exchange_n(&kept, &co->next, co, 1, __ATOMIC_RELEASE,
                                            __ATOMIC_RELAXED)) {}
        return;
    }
    if (!(co->flags & RT_STANDALONE) && s->recs.nfree < FREE_RECS_MAX) {
        co->next = s->recs.free_recs;
        s->recs.free_recs = co;
        s->recs.nfree++;
        return;
    }
    if ((co->flags & RT_STANDALONE) && s->recs.nsolo < SOLO_MAX) {
        co->next = s->recs.free_solo;        /* the stack pool */
        s->recs.free_solo = co;
        s->recs.nsolo++;
        return;
    }
    rec_drop(co);
    if (st) aco_share_stack_destroy(st);
}

/* Free a finished record of any thread's scheduler. */
static void record_free_any(aco_rt_co_t* co) {
    if (co->s == rt_tls_sched) rt_record_free(co->s, co);
    else rt_send(co->s, &co->msg, RT_MSG_FREE);
}

/* Take waiter w off its queue, under its object's lock if it has one. */
static void unqueue(rt_waiter_t* w) {
    /* (NULL: its lock may be long gone; acquire: a taker's hold is seen) */
    if (__atomic_load_n(&w->q, __ATOMIC_ACQUIRE) == NULL) return;
    uint32_t* lock = w->lock;
    if (lock) rt_lock(lock);
    if (w->q) rt_wq_remove(w);
    if (lock) rt_unlock(lock);
}

/* A destroyed co's call held x->held, which the kernel may still write
 * until the backend is gone: kept to be freed then (if no memory for the
 * list, left: never freed under the kernel's hands). */
static void held_keep(aco_rt_sched_t* s, rt_extra_t* x) {
    uint32_t n = s->recs.nheld;
    if (n == 0 || (n >= 4 && (n & (n - 1)) == 0)) {    /* full: 0, 4, 8, 16... */
        void** h = realloc(s->recs.held, (n ? 2 * (size_t)n : 4) * sizeof(*h));
        if (h == NULL) return;
        s->recs.held = h;
    }
    s->recs.held[s->recs.nheld++] = x->held;
    x->held = NULL;
}

void rt_cos_free_held(aco_rt_sched_t* s, int keep) {
    for (uint32_t i = 0; i < s->recs.nheld && !keep; i++) free(s->recs.held[i]);
    free(s->recs.held);
    s->recs.held = NULL;
    s->recs.nheld = 0;
}

void rt_cos_free_all(aco_rt_sched_t* s) {
    /* Unfinished cos: off the program's objects' wait queues first, which
     * outlive them (a mutex one holds stays held, and its record is kept:
     * rt_record_free): parked, or woken by a select's case and not yet
     * run (its other cases are still queued then).  A thread that took
     * one off a queue before is waking it still: it holds s (rt_hold),
     * and the records go once none does. */
    for (uint32_t i = 0; i < s->recs.ncos; i++) {
        aco_rt_co_t* co = s->recs.cos[i];
        if (co->state == RT_PARKED) {
            const rt_wait_kind_t* k = rt_wait_kinds[co->wait];
            if (k->forget) k->forget(co);
            unqueue(&co->w);
        }
        for (int j = 0; co->x && j < co->x->seln; j++) unqueue(&co->x->selw[j]);
    }
    rt_sched_quiesce(s);
    /* Then destroy them where they stand (aco_destroy drops a suspended
     * co's frames); their timers go with the wheel. */
    while (s->recs.ncos) {
        aco_rt_co_t* co = s->recs.cos[s->recs.ncos - 1];
        /* (the pthread face: the record of its routine goes too) */
        void (*dropped)(aco_rt_co_t*) = __atomic_load_n(&rt_co_dropped, __ATOMIC_ACQUIRE);
        if (dropped) dropped(co);
        /* waiting for a helper thread, or woken by it and not yet run */
        if (co->flags & RT_OFFLOADING) rt_hook_offload_forsake(co);
        /* it leaves its group as an ended member does: the joins of cos
         * elsewhere see the group empty when it is */
        if (co->x && co->x->group) rt_hook_group_leave(co);
        if (co->x && co->x->held) held_keep(s, co->x);
        /* (before the backend goes: epoll drops a closed file from its set,
         * and an io_uring poll keeps its own reference until the ring goes) */
        if (co->x && co->x->own_fd) {
            rt_sys_close(co->x->own_fd - 1);
            co->x->own_fd = 0;
        }
        co->flags &= RT_STANDALONE;
        co->cancel_sent = 0;            /* a late message would be the program's bug */
        s->recs.nfree = FREE_RECS_MAX;       /* rt_record_free frees, not keeps */
        rt_record_free(s, co);
    }
    while (s->recs.free_recs) {
        aco_rt_co_t* co = s->recs.free_recs;
        s->recs.free_recs = co->next;
        rec_drop(co);
    }
    for (int pass = 0; pass < 2; pass++) {     /* records without a co */
        aco_rt_co_t* co = pass ? __atomic_exchange_n(&s->newq.gifts, NULL, __ATOMIC_ACQUIRE) : s->recs.bare;
        for (aco_rt_co_t* next; co; co = next) {
            next = co->next;
            rt_rec_free(co);
        }
    }
    s->recs.bare = NULL;
    while (s->recs.free_solo) {
        aco_rt_co_t* co = s->recs.free_solo;
        s->recs.free_solo = co->next;
        aco_share_stack_t* st = rt_aco(co)->share_stack;
        rec_drop(co);
        aco_share_stack_destroy(st);
    }
}

/* ------------------------------------------------------------------------ */
/* Join, detach, cancel                                                     */
/* ------------------------------------------------------------------------ */

aco_rt_co_t* aco_rt_self(void) { return rt_self(); }

int aco_rt_cancelled(void) {
    aco_rt_co_t* co = rt_self();
    return co && (rt_co_cancelled(co) || (co->x && co->x->kept));
}

int aco_rt_cancel_check(void) {
    aco_rt_co_t* co = rt_self();
    if (co == NULL) return -EPERM;
    return rt_co_cancelled(co) ? -ECANCELED : 0;
}

/* A cancel that comes while the shield is on is kept in x->kept, and a
 * co already cancelled when it turns the shield on moves its cancel there:
 * RT_CANCELLED, which every call looks at, stays off meanwhile. */
int aco_rt_cancel_shield(int on) {
    aco_rt_co_t* co = rt_self();
    if (co == NULL) return -EPERM;
    rt_extra_t* x = co->x;
    int was = x && x->shield;
    if (on) {
        if (x == NULL && (x = rt_extra(co, 0)) == NULL) return -ENOMEM;
        x->shield = 1;
        if (co->flags & RT_CANCELLED) {
            co->flags &= (uint8_t)~RT_CANCELLED;
            x->kept = 1;
        }
    } else if (x) {
        x->shield = 0;
        if (x->kept) {
            x->kept = 0;
            co->flags |= RT_CANCELLED;
        }
    }
    return was;
}

/* A join's two ends race for the target's mark: the joiner's deadline or
 * cancel takes it back (me -> NULL), the target's end keeps it taken (me ->
 * RT_JOIN_TAKEN).  The one whose exchange wins wakes the joiner; the claim
 * follows, so a wake can never land on a later wait of the joiner.  The mark
 * stays taken until the handle is freed (by the joiner's join, or by the
 * scheduler if detached): a join or detach meanwhile gets -EINVAL, and a
 * handle is never freed twice.  Unjoined, the end leaves RT_JOIN_DONE: the
 * first join or detach to take it frees the handle. */
aco_rt_co_t* rt_join_end(aco_rt_co_t* co) {
    aco_rt_co_t* j = rt_load(&co->joiner);
    while (!rt_cas(&co->joiner, &j, j == NULL ? RT_JOIN_DONE : RT_JOIN_TAKEN)) {
        /* a joiner came, or left (its deadline): again */
    }
    if (j != NULL && j != RT_JOIN_DETACH && rt_claim(j)) {
        rt_hold_if_remote(j->s);
        rt_wake_any(j, 0);
    }
    return j;
}

void rt_join_abort(aco_rt_co_t* me, int err) {
    aco_rt_co_t* target = (aco_rt_co_t*)me->wait_obj;
    aco_rt_co_t* e = me;
    if (!rt_cas(&target->joiner, &e, NULL)) return;   /* it ended: its wake is coming */
    if (rt_claim(me)) rt_wake(me, err);
}

int aco_rt_join(aco_rt_co_t* co, int64_t deadline) {
    aco_rt_co_t* me = rt_self();
    if (me == NULL) return -EPERM;
    if (co == NULL || co == me) return -EINVAL;
    aco_rt_co_t* j = rt_load(&co->joiner);
    if (j != NULL && j != RT_JOIN_DONE) return -EINVAL;     /* a joiner, or detached */
    if (rt_co_cancelled(me)) return -ECANCELED;
    if (j == NULL) {
        int r = rt_may_block(me, deadline);
        if (r) return r;
        rt_claim_reset(me);
        if (rt_cas(&co->joiner, &j, me)) {
            r = rt_park(me, RT_W_JOIN, co, deadline);
            if (r) return r;
            goto take;                  /* its end left the mark taken for us */
        }
        if (j != RT_JOIN_DONE) return -EINVAL;  /* another joiner, or a detach, came first */
    }
    /* It had ended: the handle is ours if we take the mark first (another
     * join or a detach of another thread may be as far as we are). */
    if (!rt_cas(&co->joiner, &j, RT_JOIN_TAKEN)) return -EINVAL;
take:;
    int r = (co->flags & RT_NO_START) ? -ENOMEM : 0;
    record_free_any(co);
    return r;
}

int aco_rt_detach(aco_rt_co_t* co) {
    if (co == NULL) return -EINVAL;
    aco_rt_co_t* j = NULL;
    if (rt_cas(&co->joiner, &j, RT_JOIN_DETACH)) return 0;  /* freed when it ends */
    /* ended: free it, unless a join or another detach takes it first */
    if (j != RT_JOIN_DONE || !rt_cas(&co->joiner, &j, RT_JOIN_TAKEN)) return -EINVAL;
    record_free_any(co);
    return 0;
}

void rt_cancel_local(aco_rt_co_t* co) {
    if (co->state == RT_DONE || (co->flags & RT_CANCELLED)) return;
    if (rt_unlikely(co->x && co->x->shield)) {
        co->x->kept = 1;        /* for when the shield goes off */
        return;
    }
    co->flags |= RT_CANCELLED;
    if (co->state == RT_PARKED) rt_abort(co, -ECANCELED);
}

void rt_cancel_async(aco_rt_co_t* co) {
    uint8_t none = RT_CANCEL_NONE;
    if (rt_cas(&co->cancel_sent, &none, (uint8_t)RT_CANCEL_SENT))
        rt_send(co->s, &co->cmsg, RT_MSG_CANCEL);   /* its thread does it */
}

/* rt_co_cancelled's slow way: cancelled, or a cancel on its way, which
 * the running co takes here (the shield keeps it, as a local cancel). */
int rt_cancel_take(aco_rt_co_t* co) {
    if (rt_load(&co->cancel_sent) == RT_CANCEL_SENT) {
        rt_store(&co->cancel_sent, (uint8_t)RT_CANCEL_TAKEN);
        rt_cancel_local(co);
    }
    return co->flags & RT_CANCELLED;
}

int aco_rt_cancel(aco_rt_co_t* co) {
    if (co == NULL) return -EINVAL;
    if (rt_unlikely(!__atomic_load_n(&co->started, __ATOMIC_SEQ_CST))) {
        /* In a newq, maybe being taken: whoever starts it sees this (the
         * Dekker pair of rt_spawn_arrived); if it started meanwhile, on. */
        __atomic_store_n(&co->cancel_req, (uint8_t)1, __ATOMIC_SEQ_CST);
        if (!__atomic_load_n(&co->started, __ATOMIC_SEQ_CST)) return 0;
    }
    if (co->s == rt_tls_sched) rt_cancel_local(co);
    else rt_cancel_async(co);
    return 0;
}

/* Every co of s, at a pool's request gen (aco_rt_pool_wait, which waits
 * until each thread has done it: cancel_seen is stored when all are
 * cancelled).  The caller read gen, then drained the inbox: a spawn sent
 * before the request is a co of s by now. */
void rt_cancel_all(aco_rt_sched_t* s, uint32_t gen) {
    /* (a co that rt_take_new spared is spared by the next request only) */
    int next = gen == s->pooled.cancel_seen + 1;
    for (uint32_t i = 0; i < s->recs.ncos; i++) {
        aco_rt_co_t* co = s->recs.cos[i];
        if (__atomic_load_n(&co->cancel_req, __ATOMIC_RELAXED) == RT_SPARED) {
            __atomic_store_n(&co->cancel_req, (uint8_t)0, __ATOMIC_RELAXED);
            if (next) continue;
        }
        rt_cancel_local(co);
    }
    rt_lock(&s->newq.lock);
    for (uint32_t b = 0; b < s->newq.count; b++) {
        const rt_nq_batch_t* nb = &s->newq.ring[(s->newq.first + b) % RT_NQ_BATCHES];
        aco_rt_co_t* c = nb->head;
        for (uint32_t i = 0; i < nb->n; i++, c = c->next)
            __atomic_store_n(&c->cancel_req, (uint8_t)1, __ATOMIC_SEQ_CST);
    }
    rt_unlock(&s->newq.lock);
    __atomic_store_n(&s->pooled.cancel_seen, gen, __ATOMIC_SEQ_CST);
    if (s->pooled.pool) rt_idle_tell(s->pooled.idle);
}
