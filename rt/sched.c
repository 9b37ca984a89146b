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

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

__thread aco_rt_sched_t* rt_tls_sched;

#define FREE_RECS_MAX 4096
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

void rt_tmo_fire(aco_rt_timer_t* t) {
    aco_rt_co_t* co = rt_container_of(t, aco_rt_co_t, tmo);
    co->s->st.timers--;
    if (co->state == RT_PARKED) co->abort(co, -ETIMEDOUT);
}

void rt_abort_waitq(aco_rt_co_t* co, int err) {
    if (co->w.q) rt_wq_remove(&co->w);
    rt_wake(co, err);
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

    aco_rt_sched_t* s = calloc(1, sizeof(*s));
    if (s == NULL) return NULL;
    if (!rt_thread_inited && aco_gtls_co == NULL) {
        aco_thread_init(NULL);
        rt_thread_inited = 1;
    }
    s->stack_size = o.stack_size;
    s->nstacks = o.share_stacks;
    s->stacks = calloc(s->nstacks, sizeof(*s->stacks));
    if (s->stacks == NULL) { free(s); errno = ENOMEM; return NULL; }
    /* The share stacks are mapped lazily, when a co first needs one
     * (next_share_stack).  The thread's main co if the program made one,
     * else our own. */
    if (aco_gtls_co != NULL && aco_is_main_co(aco_gtls_co)) {
        s->main_co = aco_gtls_co;
    } else {
        s->main_co = aco_create(NULL, NULL, 0, NULL, NULL);
        s->own_main = 1;
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
        if (s->own_main) aco_destroy(s->main_co);
        free(s->stacks);
        free(s);
        errno = -r;
        return NULL;
    }
    rt_tls_sched = s;
    return s;
}

static aco_share_stack_t* next_share_stack(aco_rt_sched_t* s) {
    unsigned i = s->next_stack++ % s->nstacks;
    /* Avoid the stack the spawning co runs on: two cos that take turns on
     * one stack copy each other's frames out and in at every switch. */
    if (s->cur && s->nstacks > 1 && s->cur->aco->share_stack == s->stacks[i] &&
        !(s->cur->flags & RT_STANDALONE))
        i = s->next_stack++ % s->nstacks;
    if (s->stacks[i] == NULL && stack_possible(s->stack_size))
        s->stacks[i] = aco_share_stack_new2(s->stack_size, 1);
    return s->stacks[i];        /* NULL: ENOMEM */
}

static void co_main(void) {
    aco_rt_co_t* co = (aco_rt_co_t*)aco_get_arg();
    co->fn(co->arg);
    rt_co_exit(co);
}

void rt_co_exit(aco_rt_co_t* co) {
    if (co->keys) rt_keys_exit(co);     /* in the co: they may block */
    co->state = RT_DONE;
    if (co->joiner) rt_wake(co->joiner, 0);
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

aco_rt_co_t* aco_rt_spawn2(aco_rt_sched_t* s, aco_rt_fn_t fn, void* arg,
                           const aco_rt_spawn_opts_t* opts) {
    if (s == NULL) s = rt_tls_sched;
    if (s == NULL || s != rt_tls_sched) { errno = EPERM; return NULL; }
    if (fn == NULL) { errno = EINVAL; return NULL; }
    /* A co that needs more stack than the share stacks have gets its own. */
    int standalone = opts && (opts->standalone || opts->stack_size > s->stack_size);
    aco_rt_co_t* co = NULL;
    if (!standalone && s->free_recs) {
        co = s->free_recs;
        s->free_recs = co->next;
        s->nfree--;
        aco_reset2(co->aco, co_main, co);
        co->res = 0;
        co->io_abort = 0;
        co->wait_obj = NULL;
        co->wait_what = NULL;
    } else {
        co = calloc(1, sizeof(*co));
        if (co == NULL) return NULL;
        co->s = s;
        co->w.co = co;
        co->w.idx = -1;
        co->tmo.fn_ = rt_tmo_fire;      /* its deadlines, set once */
        aco_share_stack_t* st = NULL;
        if (standalone) {
            size_t sz = opts->stack_size ? opts->stack_size : s->stack_size;
            if (stack_possible(sz)) st = aco_share_stack_new2(sz, 1);
            co->flags = RT_STANDALONE;
        } else {
            st = next_share_stack(s);
        }
        if (st == NULL) {
            free(co);
            errno = ENOMEM;
            return NULL;
        }
        co->aco = aco_create(s->main_co, st, 0, co_main, co);
    }
    if (cos_add(s, co) < 0) {
        co->next = s->free_recs;        /* keep it for later */
        s->free_recs = co;
        s->nfree++;
        errno = ENOMEM;
        return NULL;
    }
    co->fn = fn;
    co->arg = arg;
    co->flags &= RT_STANDALONE;
    co->joiner = NULL;
    co->name = opts ? opts->name : NULL;
    co->id = ++s->next_id;
    co->state = RT_READY;
    s->st.cos_alive++;
    s->st.spawned++;
    rt_rq_push(s, co);
    return co;
}

aco_rt_co_t* aco_rt_spawn(aco_rt_sched_t* s, aco_rt_fn_t fn, void* arg) {
    return aco_rt_spawn2(s, fn, arg, NULL);
}

static void record_free(aco_rt_sched_t* s, aco_rt_co_t* co) {
    cos_del(s, co);
    if (!(co->flags & RT_STANDALONE) && s->nfree < FREE_RECS_MAX) {
        co->next = s->free_recs;
        s->free_recs = co;
        s->nfree++;
        return;
    }
    rt_keys_free(co);                   /* a co destroyed before its end */
    aco_share_stack_t* st = co->aco->share_stack;
    aco_destroy(co->aco);
    if (co->flags & RT_STANDALONE) aco_share_stack_destroy(st);
    if (co->x) { free(co->x->selw); free(co->x->buf); free(co->x); }
    free(co);
}

/* A co ended: free it if nobody will join it. */
static void co_ended(aco_rt_sched_t* s, aco_rt_co_t* co) {
    s->st.cos_alive--;
    co->state = RT_DONE;
    if (co->flags & RT_DETACHED) record_free(s, co);
}

static void run_co(aco_rt_sched_t* s, aco_rt_co_t* co) {
    s->cur = co;
    co->state = RT_RUNNING;
    s->st.switches++;
    aco_resume(co->aco);
    s->cur = NULL;
    if (co->aco->is_end) co_ended(s, co);
}

static int poll_once(aco_rt_sched_t* s, int64_t timeout) {
    int r = s->be->poll(s, timeout);
    if (s->wheel.armed) rt_wheel_advance(&s->wheel, rt_now());
    return r;
}

int aco_rt_sched_run(aco_rt_sched_t* s) {
    if (s == NULL || s != rt_tls_sched || s->running || aco_gtls_co != s->main_co)
        return -EPERM;
    s->running = 1;
    s->stop = 0;
    int r = 0;
    unsigned n = 0;
    while (!s->stop) {
        aco_rt_co_t* co;
        while ((co = rq_pop(s)) != NULL) {
            run_co(s, co);
            /* I/O and timers get their turn among busy cos too. */
            if (++n >= POLL_EVERY && (s->st.io_inflight || s->wheel.armed)) {
                n = 0;
                if ((r = poll_once(s, 0)) < 0) goto out;
            }
            if (s->stop) goto out;
        }
        if (s->st.cos_alive == 0) break;
        int64_t timeout = rt_wheel_timeout(&s->wheel, rt_now());
        if (timeout < 0 && s->st.io_inflight == 0) {
            /* Every co waits on another co, and nothing else can wake one. */
            r = -EDEADLK;
            break;
        }
        if ((r = poll_once(s, timeout)) < 0) break;
    }
out:
    s->running = 0;
    return r;
}

void aco_rt_sched_stop(aco_rt_sched_t* s) {
    if (s) s->stop = 1;
}

void aco_rt_sched_free(aco_rt_sched_t* s) {
    if (s == NULL || s != rt_tls_sched || s->running) return;
    /* First the wheel: the parked cos' deadline timers are in their
     * records, freed below; the program's timers outlive us disarmed. */
    rt_wheel_clear(&s->wheel);
    /* Unfinished cos: destroy them where they stand (aco_destroy drops a
     * suspended co's frames); their timers go with the wheel. */
    while (s->ncos) {
        aco_rt_co_t* co = s->cos[s->ncos - 1];
        /* Parked: off the program's objects' wait queues, which outlive
         * it (a mutex it holds stays held: nothing records what it holds). */
        if (co->state == RT_PARKED) {
            if (co->w.q) rt_wq_remove(&co->w);
            for (int i = 0; co->x && i < co->x->selw_cap; i++)
                if (co->x->selw[i].q) rt_wq_remove(&co->x->selw[i]);
        }
        co->flags &= RT_STANDALONE;
        s->nfree = FREE_RECS_MAX;       /* record_free frees, not keeps */
        record_free(s, co);
    }
    while (s->free_recs) {
        aco_rt_co_t* co = s->free_recs;
        s->free_recs = co->next;
        aco_destroy(co->aco);
        if (co->x) { free(co->x->selw); free(co->x->buf); free(co->x); }
        free(co);
    }
    s->be->fini(s);
    rt_fd_free_all(s);
    for (unsigned i = 0; i < s->nstacks; i++)
        if (s->stacks[i]) aco_share_stack_destroy(s->stacks[i]);
    free(s->stacks);
    free(s->cos);
    if (s->own_main) aco_destroy(s->main_co);
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
    aco_rt_co_t* target = (aco_rt_co_t*)me->wait_obj;
    target->joiner = NULL;
    rt_wake(me, err);
}

int aco_rt_join(aco_rt_co_t* co, int64_t deadline) {
    aco_rt_co_t* me = rt_self();
    if (me == NULL) return -EPERM;
    if (co == NULL || co == me || co->joiner || (co->flags & RT_DETACHED)) return -EINVAL;
    if (me->flags & RT_CANCELLED) return -ECANCELED;
    if (co->state != RT_DONE) {
        int r = rt_may_block(me, deadline);
        if (r) return r;
        co->joiner = me;
        r = rt_park(me, "join", co, deadline, join_abort);
        if (r) return r;
    }
    record_free(me->s, co);
    return 0;
}

int aco_rt_detach(aco_rt_co_t* co) {
    if (co == NULL || co->joiner || (co->flags & RT_DETACHED)) return -EINVAL;
    co->flags |= RT_DETACHED;
    if (co->state == RT_DONE) record_free(co->s, co);
    return 0;
}

int aco_rt_cancel(aco_rt_co_t* co) {
    if (co == NULL) return -EINVAL;
    if (co->state == RT_DONE || (co->flags & RT_CANCELLED)) return 0;
    co->flags |= RT_CANCELLED;
    if (co->state == RT_PARKED) co->abort(co, -ECANCELED);
    return 0;
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

int aco_rt_sleep_until(int64_t deadline) {
    aco_rt_co_t* co = rt_self();
    if (co == NULL) return -EPERM;
    if (co->flags & RT_CANCELLED) return -ECANCELED;
    if (deadline < 0) deadline = INT64_MAX;
    return rt_park(co, "sleep", NULL, deadline, sleep_abort);
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
        dprintf(fd, "  co %llu %s%s%s %s", (unsigned long long)co->id,
                co->name ? "\"" : "", co->name ? co->name : "", co->name ? "\"" : "",
                state_name(co->state));
        if (co->flags & RT_CANCELLED) dprintf(fd, " cancelled");
        if (co->state == RT_PARKED) {
            dprintf(fd, " in %s %p", co->wait_what ? co->wait_what : "?", co->wait_obj);
            if (rt_timer_armed(&co->tmo))
                dprintf(fd, " deadline in %.3f ms",
                        (double)((co->tmo.expiry_ << RT_TICK_SHIFT) - now) / 1e6);
        }
        dprintf(fd, " (aco %p, stack %p%s)\n", (void*)co->aco,
                co->aco->share_stack ? co->aco->share_stack->ptr : NULL,
                (co->flags & RT_STANDALONE) ? " own" : "");
    }
}
