/* offload.c - blocking work on helper threads while the calling co parks
 * (aco_rt_offload), and the process-wide pool of those threads.
 *
 * One mutex (mu) guards everything here: the FIFO of queued jobs, the
 * thread counts, and each job's co pointer.  job->co is the whole protocol
 * between a helper and the waiting co: non-NULL while the co waits and no
 * one has ended its wait.  Whoever clears it, under mu, decides:
 *   - the helper, after fn (job->woke says so): the co owns the job.  The
 *     helper wakes it (rt_wake_remote, still under mu, holding the co's
 *     scheduler: rt_hold_try) and never touches the job again; a
 *     scheduler already freeing is not woken: its free finds the job
 *     woken and drops the result (offload_forsake);
 *   - the co's deadline or cancel (offload_abort, on the co's thread)
 *     or aco_rt_sched_free (offload_forsake): the helper finds NULL and
 *     owns the job: drop, then free.  The abort takes RT_OFFLOADING off
 *     the co, so that a free before it runs again leaves the job alone.
 * mu is never held while fn or drop runs.
 *
 * The job is a heap record, never on the co's stack (the share-stack rule:
 * a helper writes it while the co's stack may belong to another co); the
 * co finds it again after the wait in co->w.slot (RT_OFFLOADING says it is
 * there), which aco_rt_sched_free reads too (a co destroyed before it took
 * its result).
 */
#define _GNU_SOURCE
#include "rt_impl.h"

#include <stdlib.h>

#ifdef ACO_RT_NO_THREADS

int aco_rt_offload(void* (*fn)(void*), void* arg, void (*drop)(void*, void*),
                   void** result, int64_t deadline) {
    (void)fn; (void)arg; (void)drop; (void)result; (void)deadline;
    return -ENOSYS;
}
int rt_offload_call(aco_rt_co_t* co, void* (*fn)(void*), void* arg, void (*drop)(void*, void*),
                    void** result, int64_t deadline, int waitout) {
    (void)co; (void)fn; (void)arg; (void)drop; (void)result; (void)deadline; (void)waitout;
    return -ENOSYS;
}
int aco_rt_offload_limits(unsigned threads, unsigned queue) {
    (void)threads; (void)queue;
    return -ENOSYS;
}
void rt_offload_quiesce(void) {}
unsigned rt_offload_max_threads(void) { return 0; }

#else

#include <pthread.h>
#include <signal.h>
#include <time.h>

#define DEF_THREADS 8
#define DEF_QUEUE   1024
#define MAX_THREADS 1024
#define MAX_QUEUE   (1u << 20)
#define IDLE_NS     (10 * 1000000000LL)     /* an idle helper ends after this */

typedef struct rt_job {
    struct rt_job* next;
    void* (*fn)(void*);
    void*  arg;
    void (*drop)(void*, void*);
    void*  result;
    aco_rt_co_t* co;            /* under mu: the waiting co, NULL once its
                                   wait was ended (see the top) */
    uint8_t waitout;            /* file.c's [data] work: once fn began,
                                   a deadline or cancel does not end the
                                   wait (rt_offload_call) */
    uint8_t started;            /* under mu: a helper took it */
    uint8_t held;               /* under mu: aco_rt_sched_free waits for
                                   its end (a [data] job under way writes
                                   memory of the co it destroys) */
    uint8_t ended;              /* under mu: drop done, j is held's to free */
    uint8_t woke;               /* under mu: the helper ended the wait (the
                                   co owns j), not a deadline or cancel */
} rt_job_t;

static struct {
    pthread_mutex_t mu;
    pthread_cond_t  cv;         /* work was queued (CLOCK_MONOTONIC) */
    rt_job_t* head;
    rt_job_t* tail;
    unsigned  queued;           /* jobs in the FIFO */
    unsigned  threads;          /* helper threads alive */
    unsigned  idle;             /* of them, waiting for work */
    unsigned  max_threads, max_queue;
} pool = {
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .max_threads = DEF_THREADS, .max_queue = DEF_QUEUE,
};

static pthread_once_t pool_once = PTHREAD_ONCE_INIT;
static int pool_used;                   /* atomic: the pool was ever set up */

static void cv_init(void) {
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&pool.cv, &a);
    pthread_condattr_destroy(&a);
}

/* fork: the child has none of the helper threads, and mu must not be
 * caught held by one of them.  Nor may cv count the parent's idle helpers
 * as its waiters (a signal would wait for them): the child's is new.  The
 * queued work is the parent's, for cos of its schedulers, which do not
 * cross a fork: the child forgets it (its fn must not run twice). */
static void fork_prepare(void) { pthread_mutex_lock(&pool.mu); }
static void fork_parent(void) { pthread_mutex_unlock(&pool.mu); }
static void fork_child(void) {
    pool.threads = pool.idle = 0;
    pool.head = pool.tail = NULL;
    pool.queued = 0;
    memset(&pool.cv, 0, sizeof(pool.cv));
    cv_init();
    pthread_mutex_unlock(&pool.mu);
}

static void pool_init(void) {
    cv_init();
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    __atomic_store_n(&pool_used, 1, __ATOMIC_RELEASE);
}

static rt_job_t* pop_job(void) {           /* mu held, FIFO not empty */
    rt_job_t* j = pool.head;
    pool.head = j->next;
    if (pool.head == NULL) pool.tail = NULL;
    pool.queued--;
    return j;
}

/* Wait for a job (mu held): NULL when this thread should end (idle too
 * long, or more threads than the limit). */
static rt_job_t* next_job(void) {
    for (;;) {
        if (pool.threads > pool.max_threads) return NULL;
        if (pool.head) return pop_job();
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        int64_t t = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec + IDLE_NS;
        ts.tv_sec = t / 1000000000;
        ts.tv_nsec = t % 1000000000;
        pool.idle++;
        int r = pthread_cond_timedwait(&pool.cv, &pool.mu, &ts);
        pool.idle--;
        if (r == ETIMEDOUT && pool.head == NULL) return NULL;
    }
}

static void* helper_main(void* unused) {
    (void)unused;
    pthread_mutex_lock(&pool.mu);
    rt_job_t* j;
    while ((j = next_job()) != NULL) {
        if (j->co == NULL) {            /* its co stopped waiting: never run */
            pthread_mutex_unlock(&pool.mu);
            if (j->drop) j->drop(j->arg, NULL);
            free(j);
            pthread_mutex_lock(&pool.mu);
            continue;
        }
        j->started = 1;
        pthread_mutex_unlock(&pool.mu);
        void* r = j->fn(j->arg);
        pthread_mutex_lock(&pool.mu);
        aco_rt_co_t* co = j->co;
        if (co) {
            j->result = r;
            j->co = NULL;
            j->woke = 1;                /* the co frees j from here on */
            /* Not into a scheduler that frees (past its drain, it would
             * never take the wake): its free finds j woken and drops the
             * result (offload_forsake, which waits for mu). */
            if (rt_hold_try(co->s)) rt_wake_remote(co, 0);
        } else {
            int held = j->held;
            pthread_mutex_unlock(&pool.mu);
            if (j->drop) j->drop(j->arg, r);
            pthread_mutex_lock(&pool.mu);
            if (held) j->ended = 1;     /* (offload_forsake frees it) */
            else free(j);
        }
    }
    pool.threads--;
    pthread_mutex_unlock(&pool.mu);
    return NULL;
}

/* A helper thread more, if work would wait for one (mu held).  Signals
 * go to the program's threads, not to ours. */
static void maybe_start(void) {
    if (pool.idle > pool.queued || pool.threads >= pool.max_threads) return;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t t;
    if (pthread_create(&t, &a, helper_main, NULL) == 0) pool.threads++;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&a);
}

/* Queue j (nothing else holds it yet): 0, -EAGAIN. */
static int submit(rt_job_t* j) {
    pthread_mutex_lock(&pool.mu);
    if (pool.queued >= pool.max_queue) {
        pthread_mutex_unlock(&pool.mu);
        return -EAGAIN;
    }
    maybe_start();
    if (pool.threads == 0) {            /* nothing would ever run it */
        pthread_mutex_unlock(&pool.mu);
        return -EAGAIN;
    }
    j->next = NULL;
    if (pool.tail) pool.tail->next = j; else pool.head = j;
    pool.tail = j;
    pool.queued++;
    pthread_cond_signal(&pool.cv);
    pthread_mutex_unlock(&pool.mu);
    return 0;
}

int aco_rt_offload(void* (*fn)(void*), void* arg, void (*drop)(void*, void*),
                   void** result, int64_t deadline) {
    aco_rt_co_t* co = rt_self();
    if (co == NULL) return -EPERM;
    if (fn == NULL || (arg && rt_on_share_stack(co, arg, 1, 1))) return -EINVAL;
    return rt_offload_call(co, fn, arg, drop, result, deadline, 0);
}

int rt_offload_call(aco_rt_co_t* co, void* (*fn)(void*), void* arg, void (*drop)(void*, void*),
                    void** result, int64_t deadline, int waitout) {
    int r = rt_may_block(co, deadline);
    if (r) {
        if (drop) drop(arg, NULL);
        return r;
    }
    pthread_once(&pool_once, pool_init);
    rt_job_t* j = malloc(sizeof(*j));
    if (j == NULL) return -ENOMEM;
    *j = (rt_job_t){.fn = fn, .arg = arg, .drop = drop, .co = co, .waitout = (uint8_t)waitout};
    co->w.slot = j;                     /* before a helper can see j */
    co->flags |= RT_OFFLOADING;
    r = submit(j);
    if (r) {
        co->flags &= (uint8_t)~RT_OFFLOADING;
        free(j);
        return r;
    }
    co->s->offloads++;
    r = rt_park(co, waitout ? RT_W_OFFLOAD_FILE : RT_W_OFFLOAD, j, deadline);
    co->s->offloads--;
    co->flags &= (uint8_t)~RT_OFFLOADING;
    if (r == 0) {                       /* the helper ended the wait: j is ours */
        /* Take mu once: the helper wrote j (and what fn made) before it
         * let mu go, so this orders the co's reads and frees after them
         * whatever path the wake took (TSan sees a lock, not every path). */
        pthread_mutex_lock(&pool.mu);
        pthread_mutex_unlock(&pool.mu);
        if (result) *result = j->result;
        free(j);
    }
    return r;
}

static void offload_abort(aco_rt_co_t* co, int err) {
    rt_job_t* j = co->w.slot;
    pthread_mutex_lock(&pool.mu);
    if (j->waitout && j->started && j->co) {    /* wait for fn's end */
        pthread_mutex_unlock(&pool.mu);
        rt_tmo_stop(co);
        return;
    }
    int mine = j->co != NULL;
    j->co = NULL;                       /* (the helper drops and frees it) */
    pthread_mutex_unlock(&pool.mu);
    if (mine) {
        /* j is the helper's now: a free of this co before it runs again
         * must leave j alone (offload_forsake) */
        co->flags &= (uint8_t)~RT_OFFLOADING;
        rt_wake(co, err);
    }
    /* else the helper's wake is on its way through the inbox */
}

/* co is destroyed (aco_rt_sched_free) waiting for a helper thread, or
 * woken by it and not yet run: the job's drop is called once, by whoever
 * ends up with it. */
static void offload_forsake(aco_rt_co_t* co) {
    rt_job_t* j = co->w.slot;
    co->flags &= (uint8_t)~RT_OFFLOADING;
    pthread_mutex_lock(&pool.mu);
    int helpers = j->co != NULL;
    j->co = NULL;
    if (helpers && j->waitout && j->started) {
        /* a file call's transfer under way writes into the co's memory
         * (its private buffer, its stack), which goes with it: wait for
         * its end, a disk's time */
        j->held = 1;
        while (!j->ended) {
            pthread_mutex_unlock(&pool.mu);
            nanosleep(&(struct timespec){0, 200000}, NULL);
            pthread_mutex_lock(&pool.mu);
        }
        pthread_mutex_unlock(&pool.mu);
        free(j);
        return;
    }
    int woke = j->woke;
    pthread_mutex_unlock(&pool.mu);
    if (helpers || !woke) return;       /* the helper drops and frees it */
    /* fn ended and the wait with it, but the co will never take j */
    if (j->drop) j->drop(j->arg, j->result);
    free(j);
}

RT_WAIT_KINDS(offload, {RT_W_OFFLOAD, {"offload", offload_abort, NULL}},
              {RT_W_OFFLOAD_FILE, {"file", offload_abort, NULL}})
RT_HOOK(rt_hook_offload_forsake, offload_forsake)

void rt_offload_quiesce(void) {
    if (!__atomic_load_n(&pool_used, __ATOMIC_ACQUIRE)) return;
    pthread_mutex_lock(&pool.mu);       /* no helper is in a send now */
    pthread_mutex_unlock(&pool.mu);
}

unsigned rt_offload_max_threads(void) {
    pthread_once(&pool_once, pool_init);
    return __atomic_load_n(&pool.max_threads, __ATOMIC_RELAXED);
}

int aco_rt_offload_limits(unsigned threads, unsigned queue) {
    if (threads > MAX_THREADS || queue > MAX_QUEUE) return -EINVAL;
    pthread_once(&pool_once, pool_init);
    pthread_mutex_lock(&pool.mu);
    __atomic_store_n(&pool.max_threads, threads ? threads : DEF_THREADS, __ATOMIC_RELAXED);
    pool.max_queue = queue ? queue : DEF_QUEUE;
    pthread_cond_broadcast(&pool.cv);   /* extra threads: look and end */
    pthread_mutex_unlock(&pool.mu);
    return 0;
}

#endif
