/* test_offload_bb_api.c - blocking work from aco_rt.h alone ("Blocking
 * work: functions run on helper threads while the co waits"), both
 * backends (test_file_bb_offload checks drop's three places, fn NULL, an
 * arg on the share stack, a queue of one and the limits' bounds):
 *  - -EPERM outside cos (no scheduler, the scheduler's thread outside cos,
 *    a plain thread, a pool thread's timer callback): fn not run, no drop;
 *  - arg NULL is fn's; a cancelled co with a passed deadline: -ECANCELED;
 *  - the co parks, its thread runs other cos while fn blocks;
 *  - FIFO: with one helper, jobs run in the order they were called;
 *  - the queue's bound exactly (3 queued, the fourth -EAGAIN at once, fn
 *    not run, no drop), the default 1024, the thread bound reached exactly
 *    and never passed (3, the default 8), a lowered thread count holding
 *    for work queued before it (calls queued stay queued);
 *  - a cancel from another co while fn runs: fn's result to drop, once, on
 *    the helper; later calls -ECANCELED;
 *  - helper threads block every signal;
 *  - results and heap arguments of 16 cos on one 64 KiB share stack, their
 *    frames intact; 48 cos of two pools at once beyond the helper count;
 *  - a queued call's deadline: never early, drop(arg, NULL) on the helper
 *    when the queue comes to it, fn never run;
 *  - aco_rt_pool_free of cos waiting (fn running: drop after it with its
 *    result; queued: drop(arg, NULL), fn never run; fn ended while the
 *    co's thread was held: drop with the result before pool_free returns,
 *    on the thread that frees the co's scheduler, or none if the co took
 *    the result first);
 *  - in children: exit(3) abandons running and queued work (no drop, no
 *    hang); a fork's child never runs the parent's queued work and its own
 *    calls start helpers of its own; no helper can be made (RLIMIT_NPROC):
 *    -EAGAIN, nothing queued;
 *  - the single-thread build: -ENOSYS (offload, limits; pool_new ENOSYS). */
#define _GNU_SOURCE
#include "rt_test.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

static int64_t in_ms(int ms) { return aco_rt_now() + ms * MS; }

static _Atomic int ran, dropped, drop_null;
static void* _Atomic drop_last_result;
static void* _Atomic drop_last_arg;
static pthread_t co_thread;
static _Atomic int drop_on_co_thread;
static pthread_t drop_thread;         /* the last drop's (read once it counted) */

static void* fn_id(void* a) {
    atomic_fetch_add(&ran, 1);
    return a;
}
static void drop_fn(void* a, void* r) {
    atomic_store(&drop_last_arg, a);
    atomic_store(&drop_last_result, r);
    if (r == NULL) atomic_fetch_add(&drop_null, 1);
    if (pthread_equal(pthread_self(), co_thread)) atomic_fetch_add(&drop_on_co_thread, 1);
    drop_thread = pthread_self();
    atomic_fetch_add(&dropped, 1);
}
static void reset(void) {
    atomic_store(&ran, 0);
    atomic_store(&dropped, 0);
    atomic_store(&drop_null, 0);
    atomic_store(&drop_on_co_thread, 0);
    atomic_store(&drop_last_result, NULL);
    atomic_store(&drop_last_arg, NULL);
}
/* wait in a co (1 ms sleeps) or a thread (usleep), at most 10 s, for *v >= want */
static int settle(_Atomic int* v, int want) {
    int64_t end = in_ms(10000);
    while (atomic_load(v) < want && aco_rt_now() < end) {
        if (aco_rt_self()) aco_rt_sleep(1 * MS);
        else usleep(1000);
    }
    return atomic_load(v);
}

/* a gate: fn_gated blocks until gate_open */
static _Atomic int gate_open;
static void* fn_gated(void* a) {
    atomic_fetch_add(&ran, 1);
    int64_t end = in_ms(20000);
    while (!atomic_load(&gate_open) && aco_rt_now() < end) usleep(500);
    CHECK(atomic_load(&gate_open));
    return a;
}

#ifndef ACO_RT_NO_THREADS

static int heap_a, heap_b, heap_c;

/* ---------------- -EPERM outside cos ---------------- */
static void* perm_thread(void* arg) {
    (void)arg;
    void* r = &heap_c;
    CHECK_EQ(aco_rt_offload(fn_id, &heap_a, drop_fn, &r, -1), -EPERM);
    CHECK(r == &heap_c);
    CHECK_EQ(aco_rt_offload_limits(0, 0), 0);       /* from any thread */
    return NULL;
}
static aco_rt_timer_t cb_timer;
static _Atomic int cb_rc = 1;
static void cb_fn(aco_rt_timer_t* t) {
    (void)t;
    atomic_store(&cb_rc, aco_rt_offload(fn_id, &heap_a, drop_fn, NULL, -1));
}
static void cb_starter(void* arg) {
    (void)arg;
    aco_rt_timer_init(&cb_timer);
    CHECK_EQ(aco_rt_timer_start(&cb_timer, 0, cb_fn), 0);
    while (atomic_load(&cb_rc) == 1) CHECK_EQ(aco_rt_sleep(1 * MS), 0);
}
static void outside_cases(int b) {
    reset();
    CHECK_EQ(aco_rt_offload(fn_id, &heap_a, drop_fn, NULL, -1), -EPERM);
    aco_rt_sched_t* s = test_sched_on(b, NULL);
    CHECK_EQ(aco_rt_offload(fn_id, &heap_a, drop_fn, NULL, 0), -EPERM);
    CHECK_EQ(aco_rt_offload(fn_id, &heap_a, drop_fn, NULL, -1), -EPERM);
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, perm_thread, NULL), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
    aco_rt_sched_free(s);
    aco_rt_pool_opts_t o;
    memset(&o, 0, sizeof(o));
    o.threads = 1;
    o.sched.backend = b;
    aco_rt_pool_t* p = aco_rt_pool_new(&o);
    CHECK(p != NULL);
    atomic_store(&cb_rc, 1);
    CHECK_EQ(aco_rt_detach(aco_rt_pool_spawn(p, cb_starter, NULL, NULL)), 0);
    CHECK_EQ(aco_rt_pool_wait(p, ACO_RT_POOL_DRAIN, in_ms(10000)), 0);
    CHECK_EQ(aco_rt_pool_free(p), 0);
    CHECK_EQ(atomic_load(&cb_rc), -EPERM);
    usleep(20 * 1000);
    CHECK_EQ(atomic_load(&ran), 0);
    CHECK_EQ(atomic_load(&dropped), 0);
}

/* ---------------- in a co ---------------- */

static void* fn_null_arg(void* a) {
    CHECK(a == NULL);
    return &heap_b;
}

/* the thread runs other cos while fn blocks: fn waits for them */
static _Atomic int ticks, tick_stop;
static void ticker(void* arg) {
    (void)arg;
    while (!atomic_load(&tick_stop)) {
        atomic_fetch_add(&ticks, 1);
        CHECK_EQ(aco_rt_sleep(1 * MS), 0);
    }
}
static void* fn_waits_ticks(void* a) {
    int t0 = atomic_load(&ticks);
    int64_t end = in_ms(10000);
    while (atomic_load(&ticks) < t0 + 5 && aco_rt_now() < end) usleep(500);
    return atomic_load(&ticks) >= t0 + 5 ? a : NULL;
}

/* FIFO: the order of the calls, the order fn ran in */
#define NFIFO 20
static int fifo_called[NFIFO], fifo_ran[NFIFO];
static _Atomic int fifo_nc, fifo_nr;
static int fifo_ids[NFIFO];
static void* fn_fifo(void* a) {
    fifo_ran[atomic_fetch_add(&fifo_nr, 1)] = *(int*)a;
    return a;
}
static void fifo_co(void* arg) {
    int* id = arg;
    fifo_called[atomic_fetch_add(&fifo_nc, 1)] = *id;
    void* r = NULL;
    CHECK_EQ(aco_rt_offload(fn_fifo, id, NULL, &r, in_ms(20000)), 0);
    CHECK(r == id);
}
static void gated_co(void* arg) {
    void* r = NULL;
    CHECK_EQ(aco_rt_offload(fn_gated, arg, NULL, &r, in_ms(20000)), 0);
    CHECK(r == arg);
}
static int queued_rc[8];
static void queued_co(void* arg) {
    int i = (int)(intptr_t)arg;
    void* r = NULL;
    queued_rc[i] = aco_rt_offload(fn_id, &heap_b, drop_fn, &r, in_ms(20000));
    if (queued_rc[i] == 0) CHECK(r == &heap_b);
}

/* concurrency: each job waits (at most 5 s) for the limit to be reached
 * once, so the count of jobs at once must reach it exactly */
static _Atomic int conc_cur, conc_max, conc_full, conc_limit;
static void* fn_conc(void* a) {
    int c = atomic_fetch_add(&conc_cur, 1) + 1;
    int m = atomic_load(&conc_max);
    while (c > m && !atomic_compare_exchange_weak(&conc_max, &m, c)) {}
    if (c >= atomic_load(&conc_limit)) atomic_store(&conc_full, 1);
    int64_t end = in_ms(5000);
    while (!atomic_load(&conc_full) && aco_rt_now() < end) usleep(200);
    usleep(2000);
    atomic_fetch_sub(&conc_cur, 1);
    return a;
}
static void conc_reset(int limit) {
    atomic_store(&conc_cur, 0);
    atomic_store(&conc_max, 0);
    atomic_store(&conc_full, 0);
    atomic_store(&conc_limit, limit);
}
static int conc_args[64];
static void conc_co(void* arg) {
    int* a = arg;
    void* r = NULL;
    CHECK_EQ(aco_rt_offload(fn_conc, a, NULL, &r, in_ms(30000)), 0);
    CHECK(r == a);
}
static void conc_round(int limit, int jobs) {
    conc_reset(limit);
    aco_rt_co_t* c[64];
    for (int i = 0; i < jobs; i++) {
        c[i] = aco_rt_spawn(NULL, conc_co, &conc_args[i]);
        CHECK(c[i] != NULL);
    }
    for (int i = 0; i < jobs; i++) CHECK_EQ(aco_rt_join(c[i], in_ms(30000)), 0);
    CHECK_EQ(atomic_load(&conc_max), limit);
}

/* a lowered thread count: the new jobs run one at a time */
static _Atomic int low_cur, low_max, low_ran;
static void* fn_low(void* a) {
    int c = atomic_fetch_add(&low_cur, 1) + 1;
    int m = atomic_load(&low_max);
    while (c > m && !atomic_compare_exchange_weak(&low_max, &m, c)) {}
    usleep(5000);
    atomic_fetch_sub(&low_cur, 1);
    atomic_fetch_add(&low_ran, 1);
    return a;
}
static void low_co(void* arg) {
    void* r = NULL;
    CHECK_EQ(aco_rt_offload(fn_low, arg, NULL, &r, in_ms(30000)), 0);
    CHECK(r == arg);
}

/* a cancel from another co while fn runs */
static int cancel_rc = 1;
static void cancelled_waiter(void* arg) {
    (void)arg;
    void* r = &heap_c;
    cancel_rc = aco_rt_offload(fn_gated, &heap_a, drop_fn, &r, -1);
    CHECK(r == &heap_c || r == &heap_a);
    CHECK_EQ(aco_rt_sleep(0), -ECANCELED);
    CHECK_EQ(aco_rt_offload(fn_id, &heap_b, NULL, NULL, -1), -ECANCELED);
}

/* helper threads block every signal */
static void* fn_mask(void* a) {
    (void)a;
    sigset_t m;
    CHECK_EQ(pthread_sigmask(SIG_BLOCK, NULL, &m), 0);
    for (int sig = 1; sig < SIGRTMIN; sig++) {
        if (sig == SIGKILL || sig == SIGSTOP || sig == 32 || sig == 33) continue;
        if (!sigismember(&m, sig)) return (void*)(intptr_t)sig;
    }
    for (int sig = SIGRTMIN; sig <= SIGRTMAX; sig++)
        if (!sigismember(&m, sig)) return (void*)(intptr_t)sig;
    return NULL;
}

static void main_co(void* arg) {
    (void)arg;
    co_thread = pthread_self();
    void* r;

    /* arg NULL is fn's (a pointer the runtime never reads) */
    r = NULL;
    CHECK_EQ(aco_rt_offload(fn_null_arg, NULL, NULL, &r, -1), 0);
    CHECK(r == &heap_b);
    /* a deadline ahead, fn quick: 0 */
    reset();
    CHECK_EQ(aco_rt_offload(fn_id, &heap_a, drop_fn, &r, in_ms(10000)), 0);
    CHECK(r == &heap_a);
    CHECK_EQ(atomic_load(&dropped), 0);

    /* signals */
    r = &heap_a;
    CHECK_EQ(aco_rt_offload(fn_mask, &heap_a, NULL, &r, in_ms(10000)), 0);
    CHECK_EQ((intptr_t)r, 0);

    /* the co parks: its thread's ticker runs while fn waits for it */
    atomic_store(&ticks, 0);
    atomic_store(&tick_stop, 0);
    aco_rt_co_t* tk = aco_rt_spawn(NULL, ticker, NULL);
    CHECK(tk != NULL);
    r = NULL;
    CHECK_EQ(aco_rt_offload(fn_waits_ticks, &heap_a, NULL, &r, in_ms(20000)), 0);
    CHECK(r == &heap_a);
    atomic_store(&tick_stop, 1);
    CHECK_EQ(aco_rt_join(tk, in_ms(5000)), 0);

    /* FIFO with one helper: a gated job first, then 20 calls */
    CHECK_EQ(aco_rt_offload_limits(1, 0), 0);
    reset();
    atomic_store(&gate_open, 0);
    aco_rt_co_t* g = aco_rt_spawn(NULL, gated_co, &heap_c);
    CHECK_EQ(settle(&ran, 1), 1);
    atomic_store(&fifo_nc, 0);
    atomic_store(&fifo_nr, 0);
    aco_rt_co_t* fc[NFIFO];
    for (int i = 0; i < NFIFO; i++) {
        /* spawned in an order of their own: 7 * i mod 20 */
        fifo_ids[i] = (7 * i) % NFIFO;
        fc[i] = aco_rt_spawn(NULL, fifo_co, &fifo_ids[i]);
        CHECK(fc[i] != NULL);
    }
    CHECK_EQ(settle(&fifo_nc, NFIFO), NFIFO);
    atomic_store(&gate_open, 1);
    CHECK_EQ(aco_rt_join(g, in_ms(20000)), 0);
    for (int i = 0; i < NFIFO; i++) CHECK_EQ(aco_rt_join(fc[i], in_ms(20000)), 0);
    CHECK_EQ(atomic_load(&fifo_nr), NFIFO);
    for (int i = 0; i < NFIFO; i++) CHECK_EQ(fifo_ran[i], fifo_called[i]);

    /* the queue's bound: one helper busy, 3 queued, the fourth -EAGAIN */
    CHECK_EQ(aco_rt_offload_limits(1, 3), 0);
    reset();
    atomic_store(&gate_open, 0);
    g = aco_rt_spawn(NULL, gated_co, &heap_c);
    CHECK_EQ(settle(&ran, 1), 1);       /* the helper has taken it */
    aco_rt_co_t* q[3];
    for (int i = 0; i < 3; i++) {
        queued_rc[i] = 1;
        q[i] = aco_rt_spawn(NULL, queued_co, (void*)(intptr_t)i);
        CHECK(q[i] != NULL);
    }
    for (int i = 0; i < 3; i++) CHECK_EQ(aco_rt_yield(), 0);
    for (int i = 0; i < 3; i++) CHECK_EQ(queued_rc[i], 1);      /* waiting */
    r = &heap_c;
    int64_t t0 = aco_rt_now();
    CHECK_EQ(aco_rt_offload(fn_id, &heap_a, drop_fn, &r, in_ms(20000)), -EAGAIN);
    CHECK_LT(aco_rt_now() - t0, 5000 * MS);     /* at once, not at the deadline */
    CHECK(r == &heap_c);
    CHECK_EQ(atomic_load(&ran), 1);
    CHECK_EQ(atomic_load(&dropped), 0);
    atomic_store(&gate_open, 1);
    CHECK_EQ(aco_rt_join(g, in_ms(20000)), 0);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(aco_rt_join(q[i], in_ms(20000)), 0);
        CHECK_EQ(queued_rc[i], 0);      /* queued calls stay queued, and run */
    }
    CHECK_EQ(atomic_load(&ran), 4);
    CHECK_EQ(atomic_load(&dropped), 0);

    /* a queued call's deadline: -ETIMEDOUT never early; fn never runs,
     * drop(arg, NULL) on the helper once the queue comes to it */
    CHECK_EQ(aco_rt_offload_limits(1, 0), 0);
    reset();
    atomic_store(&gate_open, 0);
    g = aco_rt_spawn(NULL, gated_co, &heap_c);
    CHECK_EQ(settle(&ran, 1), 1);
    int64_t qd = in_ms(30);
    CHECK_EQ(aco_rt_offload(fn_id, &heap_b, drop_fn, &r, qd), -ETIMEDOUT);
    CHECK_GE(aco_rt_now(), qd);
    CHECK_EQ(aco_rt_sleep(10 * MS), 0);
    CHECK_EQ(atomic_load(&dropped), 0);         /* still queued */
    atomic_store(&gate_open, 1);
    CHECK_EQ(aco_rt_join(g, in_ms(20000)), 0);
    CHECK_EQ(settle(&dropped, 1), 1);
    CHECK_EQ(atomic_load(&drop_null), 1);
    CHECK(atomic_load(&drop_last_arg) == &heap_b);
    CHECK_EQ(atomic_load(&drop_on_co_thread), 0);
    CHECK_EQ(aco_rt_sleep(20 * MS), 0);
    CHECK_EQ(atomic_load(&ran), 1);
    CHECK_EQ(atomic_load(&dropped), 1);

    /* the default queue: 1024 */
    if (!FEW) {
        CHECK_EQ(aco_rt_offload_limits(1, 0), 0);
        reset();
        atomic_store(&gate_open, 0);
        g = aco_rt_spawn(NULL, gated_co, &heap_c);
        CHECK_EQ(settle(&ran, 1), 1);
        static aco_rt_co_t* many[1024];
        for (int i = 0; i < 1024; i++) {
            many[i] = aco_rt_spawn(NULL, queued_co, (void*)(intptr_t)7);
            CHECK(many[i] != NULL);
        }
        /* each has queued once it ran: let them all run once */
        CHECK_EQ(aco_rt_yield(), 0);
        CHECK_EQ(aco_rt_offload(fn_id, &heap_a, drop_fn, &r, in_ms(20000)), -EAGAIN);
        atomic_store(&gate_open, 1);
        CHECK_EQ(aco_rt_join(g, in_ms(20000)), 0);
        for (int i = 0; i < 1024; i++) CHECK_EQ(aco_rt_join(many[i], in_ms(20000)), 0);
        CHECK_EQ(queued_rc[7], 0);
        CHECK_EQ(atomic_load(&ran), 1025);
    }

    /* the thread bound, reached exactly: 3, then the default 8 */
    CHECK_EQ(aco_rt_offload_limits(3, 0), 0);
    conc_round(3, 10);
    CHECK_EQ(aco_rt_offload_limits(0, 0), 0);
    conc_round(8, 12);

    /* a lowered thread count: 4 busy helpers, the limit lowered to 1, 4
     * jobs queued: once the 4 are done, the queued run one at a time */
    CHECK_EQ(aco_rt_offload_limits(4, 0), 0);
    reset();
    atomic_store(&gate_open, 0);
    aco_rt_co_t* hold[4];
    for (int i = 0; i < 4; i++) hold[i] = aco_rt_spawn(NULL, gated_co, &heap_c);
    CHECK_EQ(settle(&ran, 4), 4);
    CHECK_EQ(aco_rt_offload_limits(1, 0), 0);
    atomic_store(&low_cur, 0);
    atomic_store(&low_max, 0);
    atomic_store(&low_ran, 0);
    aco_rt_co_t* low[4];
    for (int i = 0; i < 4; i++) low[i] = aco_rt_spawn(NULL, low_co, &conc_args[i]);
    for (int i = 0; i < 4; i++) CHECK_EQ(aco_rt_yield(), 0);
    CHECK_EQ(atomic_load(&low_ran), 0);
    atomic_store(&gate_open, 1);
    for (int i = 0; i < 4; i++) CHECK_EQ(aco_rt_join(hold[i], in_ms(20000)), 0);
    for (int i = 0; i < 4; i++) CHECK_EQ(aco_rt_join(low[i], in_ms(20000)), 0);
    CHECK_EQ(atomic_load(&low_ran), 4);
    CHECK_EQ(atomic_load(&low_max), 1);
    CHECK_EQ(aco_rt_offload_limits(0, 0), 0);

    /* a cancel from another co while fn runs: drop once, on the helper,
     * with fn's result */
    reset();
    atomic_store(&gate_open, 0);
    cancel_rc = 1;
    aco_rt_co_t* cw = aco_rt_spawn(NULL, cancelled_waiter, NULL);
    CHECK_EQ(settle(&ran, 1), 1);
    CHECK_EQ(aco_rt_cancel(cw), 0);
    CHECK_EQ(aco_rt_join(cw, in_ms(10000)), 0);
    CHECK_EQ(cancel_rc, -ECANCELED);
    CHECK_EQ(atomic_load(&dropped), 0);         /* fn still runs */
    atomic_store(&gate_open, 1);
    CHECK_EQ(settle(&dropped, 1), 1);
    CHECK(atomic_load(&drop_last_arg) == &heap_a);
    CHECK(atomic_load(&drop_last_result) == &heap_a);
    CHECK_EQ(atomic_load(&drop_on_co_thread), 0);
    CHECK_EQ(aco_rt_sleep(20 * MS), 0);
    CHECK_EQ(atomic_load(&dropped), 1);         /* exactly once */

    /* cancelled, deadline passed too: -ECANCELED, drop here */
    reset();
    CHECK_EQ(aco_rt_cancel(aco_rt_self()), 0);
    CHECK_EQ(aco_rt_offload(fn_id, &heap_a, drop_fn, &r, 0), -ECANCELED);
    CHECK_EQ(atomic_load(&dropped), 1);
    CHECK_EQ(atomic_load(&drop_on_co_thread), 1);
    CHECK_EQ(atomic_load(&ran), 0);
}

static void body(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    test_go(s, main_co, NULL);
}

/* ---------------- the share stack ---------------- */
struct job { int id; unsigned char out[256]; };
static void* fn_fill(void* a) {
    struct job* j = a;
    memset(j->out, (unsigned char)j->id, sizeof(j->out));
    usleep(3000);
    return (void*)(intptr_t)(j->id * 3 + 1);
}
static _Atomic int share_ok;
__attribute__((noinline)) static void share_co(void* arg) {
    int id = (int)(intptr_t)arg;
    volatile unsigned char canary[2048];
    for (size_t i = 0; i < sizeof(canary); i++) canary[i] = (unsigned char)(i * 13 + id);
    struct job* j = malloc(sizeof(*j));
    CHECK(j != NULL);
    j->id = id;
    void* r = NULL;                              /* on the share stack */
    CHECK_EQ(aco_rt_offload(fn_fill, j, NULL, &r, in_ms(20000)), 0);
    CHECK_EQ((intptr_t)r, id * 3 + 1);
    for (size_t i = 0; i < sizeof(j->out); i++) CHECK_EQ(j->out[i], (unsigned char)id);
    for (size_t i = 0; i < sizeof(canary); i++) CHECK_EQ(canary[i], (unsigned char)(i * 13 + id));
    free(j);
    atomic_fetch_add(&share_ok, 1);
}
static void share_body(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_offload_limits(4, 0), 0);
    atomic_store(&share_ok, 0);
    for (int i = 0; i < 16; i++) CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, share_co, (void*)(intptr_t)(i + 1))), 0);
    test_run(s);
    CHECK_EQ(atomic_load(&share_ok), 16);
    CHECK_EQ(aco_rt_offload_limits(0, 0), 0);
}

/* ---------------- pools ---------------- */
static _Atomic int pool_ok;
static void pool_co(void* arg) {
    int i = (int)(intptr_t)arg;
    int* a = malloc(sizeof(int));
    CHECK(a != NULL);
    *a = i;
    void* r = NULL;
    CHECK_EQ(aco_rt_offload(fn_conc, a, NULL, &r, in_ms(30000)), 0);
    CHECK(r == a);
    CHECK_EQ(*(int*)r, i);
    free(a);
    atomic_fetch_add(&pool_ok, 1);
}
static void pools_case(int b) {
    aco_rt_pool_opts_t o;
    memset(&o, 0, sizeof(o));
    o.sched.backend = b;
    o.threads = 2;
    aco_rt_pool_t* p1 = aco_rt_pool_new(&o);
    o.threads = 1;
    aco_rt_pool_t* p2 = aco_rt_pool_new(&o);
    CHECK(p1 != NULL && p2 != NULL);
    CHECK_EQ(aco_rt_offload_limits(4, 0), 0);
    conc_reset(4);
    atomic_store(&pool_ok, 0);
    int n = FEW ? 16 : 48;
    for (int i = 0; i < n; i++)
        CHECK_EQ(aco_rt_detach(aco_rt_pool_spawn(i % 3 ? p1 : p2, pool_co, (void*)(intptr_t)i, NULL)), 0);
    CHECK_EQ(aco_rt_pool_wait(p1, ACO_RT_POOL_DRAIN, in_ms(30000)), 0);
    CHECK_EQ(aco_rt_pool_wait(p2, ACO_RT_POOL_DRAIN, in_ms(30000)), 0);
    CHECK_EQ(atomic_load(&pool_ok), n);
    CHECK_EQ(atomic_load(&conc_max), 4);

    /* pool_free of cos waiting: fn running, and one queued behind it */
    CHECK_EQ(aco_rt_offload_limits(1, 0), 0);
    reset();
    co_thread = pthread_self();
    atomic_store(&gate_open, 0);
    CHECK_EQ(aco_rt_detach(aco_rt_pool_spawn(p2, cancelled_waiter, NULL, NULL)), 0);
    CHECK_EQ(settle(&ran, 1), 1);
    queued_rc[5] = 1;
    CHECK_EQ(aco_rt_detach(aco_rt_pool_spawn(p2, queued_co, (void*)(intptr_t)5, NULL)), 0);
    usleep(30 * 1000);
    CHECK_EQ(aco_rt_pool_free(p2), 0);
    CHECK_EQ(queued_rc[5], 1);                  /* it never returned */
    CHECK_EQ(atomic_load(&dropped), 0);         /* fn runs on */
    atomic_store(&gate_open, 1);
    CHECK_EQ(settle(&dropped, 2), 2);
    CHECK_EQ(atomic_load(&drop_null), 1);       /* the queued one: never run */
    CHECK_EQ(atomic_load(&ran), 1);
    CHECK_EQ(atomic_load(&drop_on_co_thread), 0);
    usleep(20 * 1000);
    CHECK_EQ(atomic_load(&dropped), 2);
    CHECK_EQ(aco_rt_offload_limits(0, 0), 0);
    CHECK_EQ(aco_rt_pool_free(p1), 0);
}

/* pool_free of a co whose fn has ended but who has not run since (its
 * thread held by a co that spins): drop in the freeing call, with fn's
 * result, unless the co took the result first (then no drop) */
static _Atomic int fn_done, y_seen, freeing, x_rc = 1;
static void* fn_flag(void* a) {
    atomic_fetch_add(&ran, 1);
    atomic_store(&fn_done, 1);
    return a;
}
static pthread_t x_thread;
static void x_co(void* arg) {
    (void)arg;
    x_thread = pthread_self();
    void* r = NULL;
    int rc = aco_rt_offload(fn_flag, &heap_a, drop_fn, &r, -1);
    if (rc == 0) CHECK(r == &heap_a);
    atomic_store(&x_rc, rc);
}
static void y_co(void* arg) {
    (void)arg;
    while (!atomic_load(&fn_done)) {}
    atomic_store(&y_seen, 1);
    while (!atomic_load(&freeing)) {}
    for (;;) aco_rt_yield();
}
static void ended_case(int b) {
    aco_rt_pool_opts_t o;
    memset(&o, 0, sizeof(o));
    o.sched.backend = b;
    o.threads = 1;
    aco_rt_pool_t* p = aco_rt_pool_new(&o);
    CHECK(p != NULL);
    reset();
    co_thread = pthread_self();
    atomic_store(&fn_done, 0);
    atomic_store(&y_seen, 0);
    atomic_store(&freeing, 0);
    atomic_store(&x_rc, 1);
    CHECK_EQ(aco_rt_detach(aco_rt_pool_spawn(p, x_co, NULL, NULL)), 0);
    CHECK_EQ(aco_rt_detach(aco_rt_pool_spawn(p, y_co, NULL, NULL)), 0);
    int64_t end = in_ms(10000);
    while (!atomic_load(&y_seen)) {
        CHECK_LT(aco_rt_now(), end);
        usleep(200);
    }
    usleep(10 * 1000);
    atomic_store(&freeing, 1);
    CHECK_EQ(aco_rt_pool_free(p), 0);
    int rc = atomic_load(&x_rc), d = atomic_load(&dropped);
    usleep(20 * 1000);
    if (rc == 1) {          /* destroyed waiting: drop once, in the freeing call */
        CHECK_EQ(d, 1);     /* (before it returned) */
        CHECK_EQ(atomic_load(&dropped), 1);
        /* on the thread that freed the co's scheduler: this one, or
         * (aco_rt_sched_free being a scheduler's own call) the pool's */
        CHECK(pthread_equal(drop_thread, pthread_self()) || pthread_equal(drop_thread, x_thread));
        CHECK(atomic_load(&drop_last_result) == &heap_a);
    } else {                /* it took the result first */
        CHECK_EQ(rc, 0);
        CHECK_EQ(atomic_load(&dropped), 0);
    }
    CHECK_EQ(atomic_load(&ran), 1);
}

/* ---------------- children ---------------- */
static int drop_pipe[2];
static void drop_to_pipe(void* a, void* r) {
    (void)a;
    (void)r;
    CHECK_EQ(write(drop_pipe[1], "D", 1), 1);
}
static void exit_co(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_offload_limits(1, 0), 0);
    /* running, then queued behind it: both given up by their callers */
    CHECK_EQ(aco_rt_offload(fn_gated, &heap_a, drop_to_pipe, NULL, in_ms(30)), -ETIMEDOUT);
    CHECK_EQ(aco_rt_offload(fn_id, &heap_b, drop_to_pipe, NULL, in_ms(30)), -ETIMEDOUT);
}
static void exit_child(void* arg) {
    (void)arg;
    alarm(30);
    atomic_store(&gate_open, 0);
    aco_rt_sched_t* s = test_sched_on(test_backend_id, NULL);
    test_go(s, exit_co, NULL);
    alarm(5);       /* an exit that waited for fn (20 s) dies of SIGALRM */
    exit(0);        /* not freed: the helpers end with the process */
}
static void exit_case(void) {
    CHECK_EQ(pipe2(drop_pipe, O_CLOEXEC), 0);
    int st = -1;
    CHECK_EQ(test_in_child(exit_child, NULL, &st), 0);
    CHECK_EQ(st, 0);
    close(drop_pipe[1]);
    char c;
    CHECK_EQ(read(drop_pipe[0], &c, 1), 0);     /* no drop was called */
    close(drop_pipe[0]);
}

/* fork while a co waits (fn running) and another is queued */
static int pid_pipe[2];
static void* fn_pid(void* a) {
    pid_t me = getpid();
    CHECK_EQ(write(pid_pipe[1], &me, sizeof(me)), (ssize_t)sizeof(me));
    atomic_fetch_add(&ran, 1);
    return a;
}
static void* fn_42(void* a) {
    (void)a;
    return (void*)(intptr_t)42;
}
static void fork_child_co(void* arg) {
    (void)arg;
    void* r = NULL;
    CHECK_EQ(aco_rt_offload(fn_42, NULL, NULL, &r, in_ms(10000)), 0);
    CHECK_EQ((intptr_t)r, 42);
    CHECK_EQ(aco_rt_sleep(50 * MS), 0);
}
static void* forker(void* arg) {
    (void)arg;
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        alarm(30);
        aco_rt_sched_t* s = aco_rt_sched_new(NULL);
        if (s == NULL) _exit(2);
        aco_rt_co_t* c = aco_rt_spawn(s, fork_child_co, NULL);
        if (c == NULL || aco_rt_detach(c) != 0) _exit(3);
        if (aco_rt_sched_run(s) != 0) _exit(4);
        aco_rt_sched_free(s);
        _exit(0);
    }
    int st;
    CHECK_EQ(waitpid(pid, &st, 0), pid);
    return (void*)(intptr_t)st;
}
static int fork_queued_rc = 1;
static void fork_queued(void* arg) {
    (void)arg;
    void* r = NULL;
    fork_queued_rc = aco_rt_offload(fn_pid, &heap_b, NULL, &r, in_ms(20000));
}
static void fork_co(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_offload_limits(1, 0), 0);
    reset();
    atomic_store(&gate_open, 0);
    aco_rt_co_t* g = aco_rt_spawn(NULL, gated_co, &heap_c);
    CHECK_EQ(settle(&ran, 1), 1);
    aco_rt_co_t* q = aco_rt_spawn(NULL, fork_queued, NULL);
    CHECK_EQ(aco_rt_sleep(5 * MS), 0);
    /* fork from a plain thread while both wait */
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, forker, NULL), 0);
    void* st;
    CHECK_EQ(aco_rt_sleep(100 * MS), 0);
    atomic_store(&gate_open, 1);
    CHECK_EQ(aco_rt_join(g, in_ms(20000)), 0);
    CHECK_EQ(aco_rt_join(q, in_ms(20000)), 0);
    CHECK_EQ(fork_queued_rc, 0);
    CHECK_EQ(pthread_join(t, &st), 0);
    CHECK_EQ((intptr_t)st, 0);                   /* the child's own offload worked */
    close(pid_pipe[1]);
    pid_t who;
    int n = 0;
    while (read(pid_pipe[0], &who, sizeof(who)) == (ssize_t)sizeof(who)) {
        CHECK_EQ(who, getpid());                 /* never in the child */
        n++;
    }
    CHECK_EQ(n, 1);
    close(pid_pipe[0]);
    CHECK_EQ(aco_rt_offload_limits(0, 0), 0);
}
static void fork_body(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    CHECK_EQ(pipe2(pid_pipe, O_CLOEXEC), 0);
    test_go(s, fork_co, NULL);
}

/* no helper can be made: -EAGAIN, nothing queued (fn not run, no drop) */
static void* idle_thread(void* arg) {
    char c;
    while (read(*(int*)arg, &c, 1) < 0 && errno == EINTR) {}
    return NULL;
}
static int threads_possible(void) {
    pthread_t t[4];
    int fds[2];
    CHECK_EQ(pipe(fds), 0);
    int k = 0;
    while (k < 4 && pthread_create(&t[k], NULL, idle_thread, &fds[0]) == 0) k++;
    close(fds[1]);
    for (int i = 0; i < k; i++) pthread_join(t[i], NULL);
    close(fds[0]);
    return k;
}
static void nohelper_co(void* arg) {
    (void)arg;
    reset();
    void* r = &heap_c;
    CHECK_EQ(aco_rt_offload(fn_id, &heap_a, drop_fn, &r, in_ms(5000)), -EAGAIN);
    CHECK(r == &heap_c);
    CHECK_EQ(atomic_load(&ran), 0);
    CHECK_EQ(atomic_load(&dropped), 0);
}
static void nohelper_child(void* arg) {
    (void)arg;
    alarm(30);
    if (getuid() == 0) {
        struct rlimit hi = {RLIM_INFINITY, RLIM_INFINITY};
        setrlimit(RLIMIT_NPROC, &hi);
        /* a user of its own: RLIMIT_NPROC counts the user's threads in
         * every process, and other runs of this test go on meanwhile */
        uid_t u = (uid_t)(30000 + getpid() % 30000);
        if (setgid(u) != 0 || setuid(u) != 0) _exit(3);
    }
    struct rlimit rl;
    CHECK_EQ(getrlimit(RLIMIT_NPROC, &rl), 0);
    rl.rlim_cur = 1;
    if (setrlimit(RLIMIT_NPROC, &rl) != 0) _exit(4);
    if (threads_possible() != 0) _exit(5);
    aco_rt_sched_t* s = test_sched_on(ACO_RT_BACKEND_EPOLL, NULL);
    test_go(s, nohelper_co, NULL);
    aco_rt_sched_free(s);
    _exit(0);
}
static void nohelper_case(void) {
    int st = -1;
    CHECK_EQ(test_in_child(nohelper_child, NULL, &st), 0);
    if (st >= 3 && st <= 5) {
        printf("test_offload_bb_api: no-helper -EAGAIN not checked: RLIMIT_NPROC cannot hold threads off here (%d)\n", st);
        return;
    }
    CHECK_EQ(st, 0);
}

static void per_backend(int b) {
    outside_cases(b);
    pools_case(b);
    ended_case(b);
    exit_case();
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    nohelper_case();                    /* before this process has helpers */
    test_on_backends(NULL, body, NULL);
    aco_rt_opts_t one;
    memset(&one, 0, sizeof(one));
    one.share_stacks = 1;
    one.stack_size = 64 * 1024;
    test_on_backends(&one, share_body, NULL);
    test_each_backend(per_backend);
    test_on_backends(NULL, fork_body, NULL);
    puts("test_offload_bb_api: ok");
    return 0;
}

#else /* the single-thread build */

static void st_co(void* arg) {
    (void)arg;
    reset();
    static int a;
    void* r = &a;
    CHECK_EQ(aco_rt_offload(fn_id, &a, drop_fn, &r, -1), -ENOSYS);
    CHECK(r == &a);
    CHECK_EQ(aco_rt_offload(fn_id, &a, drop_fn, &r, in_ms(1000)), -ENOSYS);
    CHECK_EQ(atomic_load(&ran), 0);
    CHECK_EQ(atomic_load(&dropped), 0);
}
static void body(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    test_go(s, st_co, NULL);
}
int main(void) {
    CHECK_EQ(aco_rt_offload_limits(4, 4), -ENOSYS);
    CHECK_EQ(aco_rt_offload_limits(0, 0), -ENOSYS);
    errno = 0;
    CHECK(aco_rt_pool_new(NULL) == NULL);
    CHECK_EQ(errno, ENOSYS);
    test_on_backends(NULL, body, NULL);
    (void)fn_gated;
    (void)settle;
    puts("test_offload_bb_api (single-thread build): ok");
    return 0;
}
#endif
