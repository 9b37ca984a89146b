/* test_sched: the scheduler and cos.
 *
 *  - spawn/run/join: values the cos compute; spawn from the thread and from
 *    cos (a tree of cos); aco_rt_self, aco_rt_sched_current, backend name;
 *  - FIFO: ready cos start in spawn order, aco_rt_yield goes round robin,
 *    a spawning co that yields comes after the cos it spawned;
 *  - detach: detached cos are freed (cos_alive), detach of a finished co;
 *  - join with a deadline: -ETIMEDOUT not before it, the handle stays valid
 *    and a later join gives 0; join misuse (-EINVAL: self, second joiner,
 *    detached; -EPERM outside a co);
 *  - cancel: a sleeping co (sleep returns -ECANCELED at once), a co blocked
 *    in join (the target goes on and can be joined later), a co cancelled
 *    before it started, sticky (every later blocking call -ECANCELED at
 *    once), cancel twice / of a finished co: 0; a cancelled co's yields
 *    still let the others run;
 *  - aco_rt_sleep / sleep_until never return early; past deadlines return
 *    at once; -EPERM for blocking calls outside a co;
 *  - aco_rt_sched_run: -EDEADLK when every co waits for another forever,
 *    and a later run goes on once something changed; with another
 *    scheduler alive it waits, and says -EDEADLK once that one is freed,
 *    but not when the freed one woke a co of it on its way out (3000
 *    rounds);
 *    aco_rt_sched_stop;
 *    aco_rt_sched_free of a scheduler with parked cos (none runs on);
 *  - 10000 cos spawned and joined; standalone cos with deep recursion on a
 *    big stack of their own;
 *  - aco_rt_stats consistent; aco_rt_dump: a line per co with names,
 *    states and wait reasons;
 *  - aco_rt_sched_new twice on a thread: EBUSY; bad opts / $ACO_RT_BACKEND:
 *    EINVAL; AUTO follows $ACO_RT_BACKEND; a scheduler per thread in two
 *    threads at once; a thread whose program made its own libaco main co
 *    (the scheduler uses it and leaves it working for plain cos);
 *    aco_rt_sched_run from a co is refused.
 *  - last (the checks that found runtime bugs run after the others):
 *    sleeping without limit (sleep_until(-1), sleep(INT64_MAX)) and being
 *    cancelled; a
 *    cancelled co's later blocking calls fail with -ECANCELED even when they
 *    would not have to wait (contract of aco_rt_cancel); aco_rt_sched_free
 *    of a scheduler with parked cos leaves the objects they waited on free
 *    of them; a standalone or share stack that cannot be mapped: NULL with
 *    ENOMEM, no abort; older kernels (seccomp makes a system call ENOSYS): no
 *    io_uring (or io_uring_enter refused) -> AUTO runs on epoll, no epoll_pwait2 (before 5.11) -> epoll
 *    still works; pipes refuse RWF_NOWAIT (before 6.4) -> bytes go
 *    through, the refused try made once; valgrind's preload in LD_PRELOAD -> AUTO runs on epoll
 *    (a forced uring stays uring); a co's errno survives its wait while
 *    signals end the idle loop's epoll_wait.
 */
#define _GNU_SOURCE             /* (REG_RAX, RWF_NOWAIT) */
#include "rt_test.h"
#include "../../aco.h"

#include <fcntl.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>

static aco_rt_sched_t* S;

/* ------------------------------------------------------------------------ */
/* spawn / run / join, FIFO                                                 */
/* ------------------------------------------------------------------------ */

typedef struct {
    uint64_t from, to, sum;
    int yields;
} work_t;

static void worker(void* arg) {
    work_t* w = (work_t*)arg;
    uint64_t s = 0;
    for (uint64_t i = w->from; i < w->to; i++) {
        s += i * i;
        if (w->yields && i % 100 == 0) CHECK_EQ(aco_rt_yield(), 0);
    }
    w->sum = s;
}

static uint64_t sumsq(uint64_t from, uint64_t to) {
    uint64_t s = 0;
    for (uint64_t i = from; i < to; i++) s += i * i;
    return s;
}

#define NW 16
static work_t W[NW];
static aco_rt_co_t* WC[NW];

static void join_workers(void* arg) {
    (void)arg;
    CHECK(aco_rt_self() != NULL);
    CHECK(aco_rt_sched_current() == S);
    for (int i = 0; i < NW; i++) {
        CHECK_EQ(aco_rt_join(WC[i], -1), 0);
        CHECK_EQ(W[i].sum, sumsq(W[i].from, W[i].to));
    }
}

static void spawn_join(void) {
    /* from the thread, before run */
    for (int i = 0; i < NW; i++) {
        W[i] = (work_t){(uint64_t)i * 1000, (uint64_t)i * 1000 + 777 + (uint64_t)i, 0, i & 1};
        WC[i] = aco_rt_spawn(S, worker, &W[i]);
        CHECK(WC[i] != NULL);
    }
    test_go(S, join_workers, NULL);
    aco_rt_stats_t st;
    aco_rt_stats(S, &st);
    CHECK_EQ(st.cos_alive, 0);
}

/* a tree of cos: each spawns two children (from inside a co) and joins */
static void tree(void* arg) {
    intptr_t depth = (intptr_t)arg;
    if (depth == 0) return;
    aco_rt_co_t* a = aco_rt_spawn(NULL, tree, (void*)(depth - 1));
    aco_rt_co_t* b = aco_rt_spawn2(NULL, tree, (void*)(depth - 1), NULL);
    CHECK(a != NULL && b != NULL);
    CHECK_EQ(aco_rt_join(b, -1), 0);
    CHECK_EQ(aco_rt_join(a, -1), 0);
}

static void tree_root(void* arg) {
    (void)arg;
    aco_rt_stats_t st0, st;
    aco_rt_stats(NULL, &st0);
    aco_rt_co_t* c = aco_rt_spawn(NULL, tree, (void*)(intptr_t)8);
    CHECK(c != NULL);
    CHECK_EQ(aco_rt_join(c, -1), 0);
    aco_rt_stats(NULL, &st);
    CHECK_EQ(st.spawned - st0.spawned, 511);    /* 2^9 - 1 */
    CHECK_EQ(st.cos_alive, 1);
}

static int fifo_log[256];
static int fifo_n;

static void fifo_co(void* arg) {
    int id = (int)(intptr_t)arg;
    for (int r = 0; r < 3; r++) {
        fifo_log[fifo_n++] = id;
        CHECK_EQ(aco_rt_yield(), 0);
    }
}

static void fifo_spawner(void* arg) {
    (void)arg;
    fifo_log[fifo_n++] = 100;
    for (int i = 0; i < 3; i++) {
        aco_rt_co_t* c = aco_rt_spawn(NULL, fifo_co, (void*)(intptr_t)(10 + i));
        CHECK(c != NULL);
        CHECK_EQ(aco_rt_detach(c), 0);
    }
    CHECK_EQ(aco_rt_yield(), 0);
    fifo_log[fifo_n++] = 101;
}

static void fifo(void) {
    fifo_n = 0;
    aco_rt_co_t* c[8];
    for (int i = 0; i < 8; i++) {
        c[i] = aco_rt_spawn(S, fifo_co, (void*)(intptr_t)i);
        CHECK(c[i] != NULL);
        CHECK_EQ(aco_rt_detach(c[i]), 0);
    }
    test_run(S);
    CHECK_EQ(fifo_n, 24);
    for (int r = 0; r < 3; r++)
        for (int i = 0; i < 8; i++) CHECK_EQ(fifo_log[r * 8 + i], i);

    /* spawned cos run before their spawner comes back from its yield */
    fifo_n = 0;
    test_go(S, fifo_spawner, NULL);
    int want[] = {100, 10, 11, 12, 101, 10, 11, 12, 10, 11, 12};
    CHECK_EQ(fifo_n, (int)(sizeof(want) / sizeof(want[0])));
    for (int i = 0; i < fifo_n; i++) CHECK_EQ(fifo_log[i], want[i]);
}

/* ------------------------------------------------------------------------ */
/* detach, join deadlines, misuse                                           */
/* ------------------------------------------------------------------------ */

static int done_count;
static void short_co(void* arg) {
    int64_t ns = (int64_t)(intptr_t)arg;
    if (ns) CHECK_EQ(aco_rt_sleep(ns), 0);
    done_count++;
}

static aco_rt_wg_t dwg;
static void detached_co(void* arg) {
    short_co(arg);
    CHECK_EQ(aco_rt_wg_done(&dwg), 0);
}

static void self_detacher(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_detach(aco_rt_self()), 0);
    CHECK_EQ(aco_rt_sleep(1000), 0);
    done_count++;
}

static void detach_main(void* arg) {
    (void)arg;
    done_count = 0;
    aco_rt_stats_t st;
    aco_rt_wg_init(&dwg);
    CHECK_EQ(aco_rt_wg_add(&dwg, 100), 0);
    for (int i = 0; i < 100; i++) {
        aco_rt_co_t* c = aco_rt_spawn(NULL, detached_co, (void*)(intptr_t)(i % 3 ? MS / 10 : 0));
        CHECK(c != NULL);
        CHECK_EQ(aco_rt_detach(c), 0);
    }
    aco_rt_stats(NULL, &st);
    CHECK_EQ(st.cos_alive, 101);
    CHECK_EQ(aco_rt_wg_wait(&dwg, -1), 0);
    CHECK_EQ(aco_rt_yield(), 0);        /* the last one ends */
    CHECK_EQ(done_count, 100);
    aco_rt_stats(NULL, &st);
    CHECK_EQ(st.cos_alive, 1);
    CHECK_EQ(st.cos_parked, 0);
    CHECK_EQ(st.cos_ready, 0);
    /* detach of a finished co frees it */
    aco_rt_co_t* c = aco_rt_spawn(NULL, short_co, NULL);
    CHECK(c != NULL);
    CHECK_EQ(aco_rt_yield(), 0);
    CHECK_EQ(done_count, 101);
    CHECK_EQ(aco_rt_detach(c), 0);
    /* a co that detaches itself */
    CHECK(aco_rt_spawn(NULL, self_detacher, NULL) != NULL);
    while (done_count < 102) CHECK_EQ(aco_rt_sleep(1000), 0);
    CHECK_EQ(aco_rt_yield(), 0);
    aco_rt_stats(NULL, &st);
    CHECK_EQ(st.cos_alive, 1);
}

static int target_done;
static void target_co(void* arg) {
    int64_t ns = (int64_t)(intptr_t)arg;
    CHECK_EQ(aco_rt_sleep(ns), 0);
    target_done = 1;
}

/* a target that ends when told (no timing) */
static aco_rt_sem_t tsem;
static void sem_target(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_sem_wait(&tsem, -1), 0);
    target_done = 1;
}

static aco_rt_co_t* jt;
static int second_joiner_rc;
static void second_joiner(void* arg) {
    (void)arg;
    second_joiner_rc = aco_rt_join(jt, -1);
}

static void join_main(void* arg) {
    (void)arg;
    target_done = 0;
    aco_rt_sem_init(&tsem, 0);
    jt = aco_rt_spawn(NULL, sem_target, NULL);
    CHECK(jt != NULL);
    CHECK_EQ(aco_rt_join(aco_rt_self(), -1), -EINVAL);
    CHECK_EQ(aco_rt_join(NULL, -1), -EINVAL);
    /* deadline: not before it, the handle stays valid */
    int64_t t0 = aco_rt_now();
    int64_t d = t0 + 3 * MS;
    CHECK_EQ(aco_rt_join(jt, d), -ETIMEDOUT);
    CHECK_GE(aco_rt_now(), d);
    CHECK_EQ(target_done, 0);
    CHECK_EQ(aco_rt_join(jt, 0), -ETIMEDOUT);           /* past: no wait */
    CHECK_EQ(aco_rt_join(jt, aco_rt_now() - 1), -ETIMEDOUT);
    /* a second joiner while we wait: -EINVAL */
    aco_rt_co_t* sj = NULL;
    second_joiner_rc = 1;
    sj = aco_rt_spawn(NULL, second_joiner, NULL);
    CHECK(sj != NULL);
    aco_rt_sem_post(&tsem);
    CHECK_EQ(aco_rt_join(jt, -1), 0);
    CHECK_EQ(target_done, 1);
    CHECK_EQ(aco_rt_join(sj, -1), 0);
    CHECK_EQ(second_joiner_rc, -EINVAL);

    /* a second joiner after the target ended, before the first joiner's
     * join returned: still -EINVAL (the handle is the first joiner's to
     * free, and is freed once) */
    jt = aco_rt_spawn(NULL, short_co, NULL);
    sj = aco_rt_spawn(NULL, second_joiner, NULL);
    CHECK(jt && sj);
    second_joiner_rc = 1;
    int before = done_count;
    CHECK_EQ(aco_rt_join(jt, -1), 0);   /* jt ends, then sj joins, then we go on */
    CHECK_EQ(done_count, before + 1);
    CHECK_EQ(second_joiner_rc, -EINVAL);
    CHECK_EQ(aco_rt_join(sj, -1), 0);

    /* the other way round: the other co waits, we are the second joiner */
    jt = aco_rt_spawn(NULL, target_co, (void*)(intptr_t)(5 * MS));
    sj = aco_rt_spawn(NULL, second_joiner, NULL);
    CHECK(jt && sj);
    CHECK_EQ(aco_rt_yield(), 0);        /* both start: sj joins jt */
    CHECK_EQ(aco_rt_join(jt, -1), -EINVAL);
    CHECK_EQ(aco_rt_detach(jt), -EINVAL);       /* has a joiner */
    CHECK_EQ(aco_rt_join(sj, -1), 0);
    CHECK_EQ(second_joiner_rc, 0);

    /* detached: -EINVAL while it still runs */
    target_done = 0;
    jt = aco_rt_spawn(NULL, sem_target, NULL);
    CHECK(jt != NULL);
    CHECK_EQ(aco_rt_detach(jt), 0);
    CHECK_EQ(aco_rt_join(jt, -1), -EINVAL);
    CHECK_EQ(aco_rt_yield(), 0);        /* it waits */
    CHECK_EQ(aco_rt_join(jt, -1), -EINVAL);
    aco_rt_sem_post(&tsem);
    CHECK_EQ(aco_rt_yield(), 0);        /* it ends, and is freed */
    CHECK_EQ(target_done, 1);

    /* join of a finished co: 0 at once, also with a past deadline */
    jt = aco_rt_spawn(NULL, short_co, NULL);
    CHECK_EQ(aco_rt_yield(), 0);
    CHECK_EQ(aco_rt_join(jt, 0), 0);
}

/* ------------------------------------------------------------------------ */
/* cancel                                                                   */
/* ------------------------------------------------------------------------ */

static int sleeper_rc;
static int64_t sleeper_end;
static void sleeper(void* arg) {
    (void)arg;
    sleeper_rc = aco_rt_sleep(10000 * MS);
    sleeper_end = aco_rt_now();
    CHECK(aco_rt_cancelled());
}

static int joiner_rc;
static aco_rt_co_t* joiner_target;
static void joiner(void* arg) {
    (void)arg;
    joiner_rc = aco_rt_join(joiner_target, -1);
}

static aco_rt_chan_t* sticky_ch;
static aco_rt_co_t* sticky_child;
static aco_rt_mutex_t sticky_m;
static int sticky_phase;
static void sticky(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_sleep(10000 * MS), -ECANCELED);
    sticky_phase = 1;
    /* every later blocking call that would wait: -ECANCELED at once */
    int64_t t0 = aco_rt_now();
    CHECK(aco_rt_cancelled());
    CHECK_EQ(aco_rt_sleep(10000 * MS), -ECANCELED);
    CHECK_EQ(aco_rt_sleep_until(-1), -ECANCELED);
    CHECK_EQ(aco_rt_yield(), -ECANCELED);
    int v;
    CHECK_EQ(aco_rt_chan_recv(sticky_ch, &v, -1), -ECANCELED);
    CHECK_EQ(aco_rt_chan_recv(sticky_ch, &v, aco_rt_now() + 10000 * MS), -ECANCELED);
    CHECK_EQ(aco_rt_mutex_lock(&sticky_m, -1), -ECANCELED);     /* held by main */
    aco_rt_sem_t sem;
    aco_rt_sem_init(&sem, 0);
    CHECK_EQ(aco_rt_sem_wait(&sem, -1), -ECANCELED);
    sticky_child = aco_rt_spawn(NULL, short_co, (void*)(intptr_t)MS);
    CHECK(sticky_child != NULL);
    CHECK_EQ(aco_rt_join(sticky_child, -1), -ECANCELED);
    CHECK_LT(aco_rt_now() - t0, 5000 * MS);
    CHECK_EQ(aco_rt_cancel(aco_rt_self()), 0);          /* twice: nothing */
    sticky_phase = 2;
}

/* A cancelled co that waits for another by yielding: its yields still let
 * the other run (each says -ECANCELED). */
static int yflag;
static void yield_looper(void* arg) {
    (void)arg;
    long n = 0;
    while (!yflag) {
        CHECK_EQ(aco_rt_yield(), -ECANCELED);
        CHECK_LT(++n, 100000);
    }
}
static void flag_setter(void* arg) {
    (void)arg;
    yflag = 1;
}

static int early_rc = 1, early_flag = -1;
static void cancelled_early(void* arg) {
    (void)arg;
    early_flag = aco_rt_cancelled();
    early_rc = aco_rt_sleep(MS);
}

static void cancel_main(void* arg) {
    (void)arg;
    /* a sleeping co */
    sleeper_rc = 1;
    aco_rt_co_t* c = aco_rt_spawn(NULL, sleeper, NULL);
    CHECK(c != NULL);
    CHECK_EQ(aco_rt_sleep(MS), 0);
    int64_t t0 = aco_rt_now();
    CHECK_EQ(aco_rt_cancel(c), 0);
    CHECK_EQ(aco_rt_cancel(c), 0);
    CHECK_EQ(aco_rt_join(c, -1), 0);
    CHECK_EQ(sleeper_rc, -ECANCELED);
    CHECK_LT(sleeper_end - t0, 5000 * MS);      /* not the 10 s */

    /* a co blocked in join: it gets -ECANCELED, its target goes on */
    target_done = 0;
    aco_rt_sem_init(&tsem, 0);
    joiner_target = aco_rt_spawn(NULL, sem_target, NULL);
    aco_rt_co_t* j = aco_rt_spawn(NULL, joiner, NULL);
    CHECK(joiner_target && j);
    joiner_rc = 1;
    CHECK_EQ(aco_rt_yield(), 0);
    CHECK_EQ(joiner_rc, 1);
    CHECK_EQ(aco_rt_cancel(j), 0);
    CHECK_EQ(aco_rt_join(j, -1), 0);
    CHECK_EQ(joiner_rc, -ECANCELED);
    CHECK_EQ(target_done, 0);
    aco_rt_sem_post(&tsem);
    CHECK_EQ(aco_rt_join(joiner_target, -1), 0);        /* handle still valid */
    CHECK_EQ(target_done, 1);

    /* sticky */
    sticky_phase = 0;
    sticky_ch = aco_rt_chan_new(sizeof(int), 1);
    CHECK(sticky_ch != NULL);
    aco_rt_mutex_init(&sticky_m);
    CHECK_EQ(aco_rt_mutex_lock(&sticky_m, -1), 0);
    c = aco_rt_spawn(NULL, sticky, NULL);
    CHECK_EQ(aco_rt_yield(), 0);
    CHECK_EQ(sticky_phase, 0);
    CHECK_EQ(aco_rt_cancel(c), 0);
    CHECK_EQ(aco_rt_join(c, -1), 0);
    CHECK_EQ(sticky_phase, 2);
    CHECK_EQ(aco_rt_mutex_unlock(&sticky_m), 0);
    CHECK_EQ(aco_rt_join(sticky_child, -1), 0);      /* still valid */
    CHECK_EQ(aco_rt_chan_free(sticky_ch), 0);

    /* a cancelled co's yields let the others run */
    yflag = 0;
    c = aco_rt_spawn(NULL, yield_looper, NULL);
    aco_rt_co_t* c2 = aco_rt_spawn(NULL, flag_setter, NULL);
    CHECK(c && c2);
    CHECK_EQ(aco_rt_cancel(c), 0);
    CHECK_EQ(aco_rt_join(c, -1), 0);
    CHECK_EQ(aco_rt_join(c2, -1), 0);
    CHECK_EQ(yflag, 1);

    /* cancelled before it started */
    c = aco_rt_spawn(NULL, cancelled_early, NULL);
    CHECK_EQ(aco_rt_cancel(c), 0);
    CHECK_EQ(aco_rt_join(c, -1), 0);
    CHECK_EQ(early_flag, 1);
    CHECK_EQ(early_rc, -ECANCELED);

    /* cancel of a finished co: 0 */
    c = aco_rt_spawn(NULL, short_co, NULL);
    CHECK_EQ(aco_rt_yield(), 0);
    CHECK_EQ(aco_rt_cancel(c), 0);
    CHECK_EQ(aco_rt_join(c, 0), 0);
    CHECK_EQ(aco_rt_cancelled(), 0);
}

/* ------------------------------------------------------------------------ */
/* sleep                                                                    */
/* ------------------------------------------------------------------------ */

static void sleep_main(void* arg) {
    (void)arg;
    int64_t ds[] = {0, 1, 1000, 20000, 100000, MS / 2, MS, 3 * MS, 10 * MS, 7777777};
    for (size_t i = 0; i < sizeof(ds) / sizeof(ds[0]); i++) {
        int64_t t0 = aco_rt_now();
        CHECK_EQ(aco_rt_sleep(ds[i]), 0);
        int64_t t1 = aco_rt_now();
        CHECK_GE(t1 - t0, ds[i]);
        int64_t d = aco_rt_now() + ds[i];
        CHECK_EQ(aco_rt_sleep_until(d), 0);
        CHECK_GE(aco_rt_now(), d);
    }
    /* past deadlines and negative sleeps: at once */
    int64_t t0 = aco_rt_now();
    CHECK_EQ(aco_rt_sleep_until(0), 0);
    CHECK_EQ(aco_rt_sleep_until(t0 - 1000 * MS), 0);
    CHECK_EQ(aco_rt_sleep(-5), 0);
    CHECK_LT(aco_rt_now() - t0, 1000 * MS);
}

static void sleepers_co(void* arg) {
    int64_t d = *(int64_t*)arg;
    CHECK_EQ(aco_rt_sleep_until(d), 0);
    CHECK_GE(aco_rt_now(), d);
    done_count++;
}

static void many_sleepers(void* arg) {
    (void)arg;
    static int64_t ds[500];
    uint64_t rng = 777;
    int64_t now = aco_rt_now();
    done_count = 0;
    aco_rt_co_t* c[500];
    for (int i = 0; i < 500; i++) {
        ds[i] = now + (int64_t)(test_rand(&rng) % (20 * MS));
        c[i] = aco_rt_spawn(NULL, sleepers_co, &ds[i]);
        CHECK(c[i] != NULL);
    }
    for (int i = 0; i < 500; i++) CHECK_EQ(aco_rt_join(c[i], -1), 0);
    CHECK_EQ(done_count, 500);
}

/* ------------------------------------------------------------------------ */
/* outside a co                                                             */
/* ------------------------------------------------------------------------ */

static void dummy(void* arg) { (void)arg; }

static void outside_calls(int have_sched) {
    aco_rt_mutex_t m;
    aco_rt_mutex_init(&m);
    aco_rt_cond_t cv;
    aco_rt_cond_init(&cv);
    aco_rt_sem_t sem;
    aco_rt_sem_init(&sem, 0);
    aco_rt_wg_t wg;
    aco_rt_wg_init(&wg);
    CHECK_EQ(aco_rt_wg_add(&wg, 1), 0);
    CHECK(aco_rt_self() == NULL);
    CHECK_EQ(aco_rt_cancelled(), 0);
    CHECK_EQ(aco_rt_sleep(MS), -EPERM);
    CHECK_EQ(aco_rt_sleep_until(0), -EPERM);
    CHECK_EQ(aco_rt_yield(), -EPERM);
    CHECK_EQ(aco_rt_mutex_lock(&m, -1), -EPERM);
    CHECK_EQ(aco_rt_mutex_lock(&m, 0), -EPERM);
    CHECK_EQ(aco_rt_cond_wait(&cv, &m, -1), -EPERM);
    CHECK_EQ(aco_rt_sem_wait(&sem, -1), -EPERM);
    CHECK_EQ(aco_rt_wg_wait(&wg, -1), -EPERM);
    aco_rt_chan_t* ch = aco_rt_chan_new(4, 1);
    CHECK(ch != NULL);
    int v = 1;
    CHECK_EQ(aco_rt_chan_send(ch, &v, -1), -EPERM);
    CHECK_EQ(aco_rt_chan_recv(ch, &v, -1), -EPERM);
    aco_rt_case_t cs = {ch, ACO_RT_RECV, &v};
    CHECK_EQ(aco_rt_chan_select(&cs, 1, NULL, -1), -EPERM);
    CHECK_EQ(aco_rt_chan_free(ch), 0);
    int p[2];
    CHECK_EQ(pipe(p), 0);
    char b[4];
    CHECK_EQ(aco_rt_read(p[0], b, 1, -1), -EPERM);
    CHECK_EQ(aco_rt_write(p[1], b, 1, -1), -EPERM);
    CHECK_EQ(aco_rt_wait(p[0], POLLIN, -1), -EPERM);
    CHECK_EQ(aco_rt_recv(p[0], b, 1, 0, -1), -EPERM);
    CHECK_EQ(aco_rt_send(p[1], b, 1, 0, -1), -EPERM);
    CHECK_EQ(aco_rt_accept(p[0], NULL, NULL, 0, -1), -EPERM);
    close(p[0]);
    close(p[1]);
    if (!have_sched) {
        errno = 0;
        CHECK(aco_rt_spawn(NULL, dummy, NULL) == NULL);
        CHECK_EQ(errno, EPERM);
        CHECK(aco_rt_sched_current() == NULL);
    }
}

/* ------------------------------------------------------------------------ */
/* -EDEADLK, stop, free with parked cos                                     */
/* ------------------------------------------------------------------------ */

static aco_rt_chan_t *dl_a, *dl_b;
static int dl_rc[2] = {1, 1};
static void dl_co(void* arg) {
    int i = (int)(intptr_t)arg;
    int v;
    dl_rc[i] = aco_rt_chan_recv(i ? dl_b : dl_a, &v, -1);
    if (dl_rc[i] == 0) CHECK_EQ(v, 42);
    /* tell the other */
    if (i == 0) {
        int w = 42;
        CHECK_EQ(aco_rt_chan_send(dl_b, &w, -1), 0);
    }
}

static void deadlock(void) {
    dl_a = aco_rt_chan_new(sizeof(int), 0);
    dl_b = aco_rt_chan_new(sizeof(int), 0);
    dl_rc[0] = dl_rc[1] = 1;
    aco_rt_co_t* a = aco_rt_spawn(S, dl_co, (void*)0);
    aco_rt_co_t* b = aco_rt_spawn(S, dl_co, (void*)1);
    CHECK(a && b);
    CHECK_EQ(aco_rt_detach(a), 0);
    CHECK_EQ(aco_rt_detach(b), 0);
    CHECK_EQ(aco_rt_sched_run(S), -EDEADLK);
    aco_rt_stats_t st;
    aco_rt_stats(S, &st);
    CHECK_EQ(st.cos_alive, 2);
    CHECK_EQ(st.cos_parked, 2);
    CHECK_EQ(dl_rc[0], 1);
    CHECK_EQ(aco_rt_sched_run(S), -EDEADLK);        /* nothing changed */
    /* something changes: a is woken (closed channel), then wakes b */
    CHECK_EQ(aco_rt_chan_close(dl_a), 0);
    test_run(S);
    CHECK_EQ(dl_rc[0], -EPIPE);
    CHECK_EQ(dl_rc[1], 0);
    aco_rt_stats(S, &st);
    CHECK_EQ(st.cos_alive, 0);
    CHECK_EQ(aco_rt_chan_free(dl_a), 0);
    CHECK_EQ(aco_rt_chan_free(dl_b), 0);
}

/* Another scheduler alive: a run whose cos all wait on cos waits, since a
 * co of the other may wake one; once the other is freed, the run must
 * stop with -EDEADLK (it is told: it was asleep with nothing else to
 * wake it). */
static aco_rt_sem_t dl_never;
static pthread_barrier_t dl_up;
static volatile int dl_other_freed;
static void dl_waiter(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_sem_wait(&dl_never, -1), -ECANCELED);
}
static void* dl_other(void* arg) {
    (void)arg;
    aco_rt_sched_t* o = aco_rt_sched_new(NULL);
    CHECK(o != NULL);
    pthread_barrier_wait(&dl_up);
    usleep(100 * 1000);             /* S's run is asleep by now */
    __atomic_store_n(&dl_other_freed, 1, __ATOMIC_SEQ_CST);
    aco_rt_sched_free(o);
    return NULL;
}
static __attribute__((unused)) void deadlock_other_goes(void) {
    aco_rt_sem_init(&dl_never, 0);
    CHECK_EQ(pthread_barrier_init(&dl_up, NULL, 2), 0);
    aco_rt_co_t* w = aco_rt_spawn(S, dl_waiter, NULL);
    CHECK(w != NULL);
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, dl_other, NULL), 0);
    pthread_barrier_wait(&dl_up);
    CHECK_EQ(aco_rt_sched_run(S), -EDEADLK);
    CHECK_EQ(__atomic_load_n(&dl_other_freed, __ATOMIC_SEQ_CST), 1);
    CHECK_EQ(pthread_join(t, NULL), 0);
    CHECK_EQ(aco_rt_cancel(w), 0);
    CHECK_EQ(aco_rt_detach(w), 0);
    test_run(S);
    CHECK_EQ(pthread_barrier_destroy(&dl_up), 0);
}

/* The other scheduler's co wakes one of S's (a semaphore post) and ends,
 * and the other is freed: S's run must end with 0 and its co done.  S's
 * run could look at the inbox just before the wake came and at the count
 * of schedulers just after the free, and said -EDEADLK with the wake
 * pending (1 round in about 10^5: a stress, not a proof). */
static aco_rt_sem_t wf_sem;
static int wf_posted, wf_done;
static void wf_waiter(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_sem_wait(&wf_sem, -1), 0);
    wf_done = 1;
}
static void wf_poster(void* arg) {
    (void)arg;
    aco_rt_sem_post(&wf_sem);
    __atomic_store_n(&wf_posted, 1, __ATOMIC_SEQ_CST);
}
static void* wf_other(void* arg) {
    aco_rt_sched_t* o = aco_rt_sched_new(NULL);
    CHECK(o != NULL);
    pthread_barrier_wait(&dl_up);       /* S runs with two schedulers */
    /* after S's co waits (or nearly): a spin, no sleep, to hit the window */
    for (volatile int i = 0; i < (int)(uintptr_t)arg; i++) {}
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(o, wf_poster, NULL)), 0);
    CHECK_EQ(aco_rt_sched_run(o), 0);
    aco_rt_sched_free(o);
    return NULL;
}
static __attribute__((unused)) void deadlock_woken_then_freed(void) {
    CHECK_EQ(pthread_barrier_init(&dl_up, NULL, 2), 0);
    for (int round = 0; round < (SLOW ? 200 : 3000); round++) {
        aco_rt_sem_init(&wf_sem, 0);
        wf_posted = wf_done = 0;
        CHECK_EQ(aco_rt_detach(aco_rt_spawn(S, wf_waiter, NULL)), 0);
        pthread_t t;
        CHECK_EQ(pthread_create(&t, NULL, wf_other, (void*)(uintptr_t)(round % 64 * 50)), 0);
        pthread_barrier_wait(&dl_up);
        CHECK_EQ(aco_rt_sched_run(S), 0);
        CHECK_EQ(wf_done, 1);
        CHECK_EQ(pthread_join(t, NULL), 0);
        CHECK_EQ(wf_posted, 1);
    }
    CHECK_EQ(pthread_barrier_destroy(&dl_up), 0);
}

static long stop_count;
static int stop_done;
static void counter_co(void* arg) {
    (void)arg;
    for (int i = 0; i < 1000; i++) {
        stop_count++;
        CHECK_EQ(aco_rt_yield(), 0);
    }
    stop_done = 1;
}
static void stopper(void* arg) {
    (void)arg;
    for (int i = 0; i < 10; i++) CHECK_EQ(aco_rt_yield(), 0);
    aco_rt_sched_stop(aco_rt_sched_current());
}

static void stop_test(void) {
    stop_count = 0;
    stop_done = 0;
    aco_rt_co_t* c = aco_rt_spawn(S, counter_co, NULL);
    aco_rt_co_t* st = aco_rt_spawn(S, stopper, NULL);
    CHECK(c && st);
    CHECK_EQ(aco_rt_detach(st), 0);
    CHECK_EQ(aco_rt_sched_run(S), 0);       /* stopped */
    long at_stop = stop_count;
    CHECK_GE(at_stop, 10);
    CHECK_LE(at_stop, 12);
    CHECK_EQ(stop_done, 0);
    aco_rt_stats_t s1;
    aco_rt_stats(S, &s1);
    CHECK_EQ(s1.cos_alive, 1);
    CHECK_EQ(stop_count, at_stop);      /* nothing ran in between */
    /* A stop asked between runs ends the next run at once, and only it. */
    aco_rt_sched_stop(S);
    CHECK_EQ(aco_rt_sched_run(S), 0);
    CHECK_EQ(stop_count, at_stop);
    test_run(S);                        /* goes on */
    CHECK_EQ(stop_done, 1);
    CHECK_EQ(stop_count, 1000);
    aco_rt_stats(S, &s1);
    CHECK_EQ(s1.cos_alive, 0);
    /* finished, not joined: the handle is still valid, join from a co */
    joiner_target = c;
    joiner_rc = 1;
    test_go(S, joiner, NULL);
    CHECK_EQ(joiner_rc, 0);
}

static int never_flag;
static aco_rt_chan_t* fr_ch;
static aco_rt_mutex_t fr_m;
static aco_rt_sem_t fr_sem;
static void parks_forever(void* arg) {
    int kind = (int)(intptr_t)arg;
    int v;
    char buf[64];
    memset(buf, kind, sizeof(buf));
    switch (kind) {
    case 0: aco_rt_sleep(100000 * MS); break;
    case 1: aco_rt_chan_recv(fr_ch, &v, -1); break;
    case 2: aco_rt_sem_wait(&fr_sem, -1); break;
    case 3: aco_rt_sleep_until(aco_rt_now() + 3600000 * MS); break;
    default: aco_rt_mutex_lock(&fr_m, aco_rt_now() + 100000 * MS); break;
    }
    never_flag = 1;
}
static void holder(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_mutex_lock(&fr_m, -1), 0);
    CHECK_EQ(aco_rt_yield(), 0);            /* the others park */
    aco_rt_sched_stop(aco_rt_sched_current());
}

static void after_free(void* arg) {
    (void)arg;
    int v = 7;
    /* nobody waits on fr_ch now: a rendezvous send cannot go through */
    CHECK_EQ(aco_rt_chan_send(fr_ch, &v, 0), -ETIMEDOUT);
    /* nobody waits on fr_sem: the unit posted stays there */
    aco_rt_sem_post(&fr_sem);
    CHECK_EQ(aco_rt_sem_trywait(&fr_sem), 0);
}

/* aco_rt_sched_free of a scheduler with parked cos: none of them runs on,
 * and the objects they waited on are free of them (the program may use
 * them again, or free them) */
static void free_with_parked(int b) {
    aco_rt_sched_t* s = test_sched_on(b, NULL);
    fr_ch = aco_rt_chan_new(sizeof(int), 0);
    aco_rt_mutex_init(&fr_m);
    aco_rt_sem_init(&fr_sem, 0);
    never_flag = 0;
    CHECK(aco_rt_spawn(s, holder, NULL) != NULL);
    for (int i = 0; i < 40; i++) {
        aco_rt_co_t* c = aco_rt_spawn(s, parks_forever, (void*)(intptr_t)(i % 5));
        CHECK(c != NULL);
        if (i & 1) CHECK_EQ(aco_rt_detach(c), 0);
    }
    CHECK_EQ(aco_rt_sched_run(s), 0);       /* stopped by holder */
    aco_rt_stats_t st;
    aco_rt_stats(s, &st);
    CHECK_EQ(st.cos_parked, 40);
    aco_rt_sched_free(s);
    CHECK_EQ(never_flag, 0);
    s = test_sched_on(b, NULL);
    test_go(s, after_free, NULL);
    aco_rt_sched_free(s);
    CHECK_EQ(never_flag, 0);
    CHECK_EQ(aco_rt_chan_free(fr_ch), 0);   /* no co waits on it */
}

/* ------------------------------------------------------------------------ */
/* many cos, standalone cos                                                 */
/* ------------------------------------------------------------------------ */

#define NMANY CO_MANY(10000)
static uint64_t many_val[NMANY];
static void many_co(void* arg) {
    uint64_t i = (uint64_t)(uintptr_t)arg;
    volatile char pad[200];
    pad[0] = (char)i;
    if (i % 3 == 0) CHECK_EQ(aco_rt_yield(), 0);
    if (i % 7 == 0) CHECK_EQ(aco_rt_sleep(1000), 0);
    many_val[i] = i * 2654435761u + (uint64_t)pad[0];
}

static void many_main(void* arg) {
    (void)arg;
    static aco_rt_co_t* c[NMANY];
    memset(many_val, 0, sizeof(many_val));
    for (uintptr_t i = 0; i < NMANY; i++) {
        c[i] = aco_rt_spawn(NULL, many_co, (void*)i);
        CHECK(c[i] != NULL);
    }
    aco_rt_stats_t st;
    aco_rt_stats(NULL, &st);
    CHECK_EQ(st.cos_alive, NMANY + 1);
    CHECK_EQ(st.cos_ready, NMANY);
    for (uintptr_t i = 0; i < NMANY; i++) {
        CHECK_EQ(aco_rt_join(c[i], -1), 0);
        CHECK_EQ(many_val[i], (uint64_t)i * 2654435761u + (uint64_t)(char)i);
    }
    aco_rt_stats(NULL, &st);
    CHECK_EQ(st.cos_alive, 1);
}

static uint64_t deep(int n, uint64_t seed) {
    volatile uint64_t frame[128];       /* 1 KiB a level */
    for (int i = 0; i < 128; i++) frame[i] = seed * 31 + (uint64_t)i;
    uint64_t r = 0;
    if (n > 0) {
        if (n % 500 == 0) CHECK_EQ(aco_rt_yield(), 0);
        r = deep(n - 1, seed + 1);
    }
    for (int i = 0; i < 128; i++) CHECK_EQ(frame[i], seed * 31 + (uint64_t)i);
    return r + frame[n % 128];
}

static uint64_t deep_expect(int n, uint64_t seed) {
    uint64_t r = 0;
    for (int k = 0; k <= n; k++) {
        int lvl = n - k;                /* level lvl has seed + k */
        r += (seed + (uint64_t)k) * 31 + (uint64_t)(lvl % 128);
    }
    return r;
}

static uint64_t deep_res[3];
static void deep_co(void* arg) {
    int i = (int)(intptr_t)arg;
    deep_res[i] = deep(3000, (uint64_t)i * 100000);    /* ~3.5 MiB of stack */
}

static void standalone_main(void* arg) {
    (void)arg;
    aco_rt_spawn_opts_t o = {.stack_size = 8u << 20, .standalone = 1, .name = "standalone"};
    aco_rt_co_t* c[3];
    for (int i = 0; i < 3; i++) {
        c[i] = aco_rt_spawn2(NULL, deep_co, (void*)(intptr_t)i, &o);
        CHECK(c[i] != NULL);
    }
    /* share-stack cos in between */
    for (int i = 0; i < 20; i++) CHECK_EQ(aco_rt_yield(), 0);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(aco_rt_join(c[i], -1), 0);
        CHECK_EQ(deep_res[i], deep_expect(3000, (uint64_t)i * 100000));
    }
    /* a stack size beyond the share stacks' (256 KiB by default), without
     * asking for standalone: the co gets a stack of its own that big */
    aco_rt_spawn_opts_t big = {.stack_size = 8u << 20, .name = "big"};
    for (int i = 0; i < 2; i++) {
        c[i] = aco_rt_spawn2(NULL, deep_co, (void*)(intptr_t)i, &big);
        CHECK(c[i] != NULL);
    }
    for (int i = 0; i < 2; i++) {
        CHECK_EQ(aco_rt_join(c[i], -1), 0);
        CHECK_EQ(deep_res[i], deep_expect(3000, (uint64_t)i * 100000));
    }
}

/* ------------------------------------------------------------------------ */
/* stats, dump                                                              */
/* ------------------------------------------------------------------------ */

static void check_stats_in_co(void) {
    aco_rt_stats_t st;
    aco_rt_stats(NULL, &st);
    CHECK_EQ(st.cos_alive, st.cos_parked + st.cos_ready + 1);   /* +1: us */
    aco_rt_stats_t st2;
    aco_rt_stats(aco_rt_sched_current(), &st2);
    CHECK_EQ(st2.cos_alive, st.cos_alive);
}

static aco_rt_mutex_t dm;
static aco_rt_chan_t* dch;
static aco_rt_co_t* d_sleeper;
static void d_sleep(void* a) { (void)a; check_stats_in_co(); aco_rt_sleep(10000 * MS); }
static void d_recv(void* a) { (void)a; int v; check_stats_in_co(); aco_rt_chan_recv(dch, &v, aco_rt_now() + 10000 * MS); }
static void d_lock(void* a) { (void)a; check_stats_in_co(); aco_rt_mutex_lock(&dm, -1); aco_rt_mutex_unlock(&dm); }
static void d_join(void* a) { (void)a; check_stats_in_co(); aco_rt_join(d_sleeper, -1); }
static void d_ready(void* a) { (void)a; }

static void dump_main(void* arg) {
    (void)arg;
    aco_rt_stats_t st0, st;
    aco_rt_stats(NULL, &st0);
    CHECK_EQ(st0.cos_alive, 1);
    CHECK_EQ(st0.cos_ready, 0);
    CHECK_EQ(st0.cos_parked, 0);
    aco_rt_mutex_init(&dm);
    CHECK_EQ(aco_rt_mutex_lock(&dm, -1), 0);
    dch = aco_rt_chan_new(sizeof(int), 0);
    aco_rt_spawn_opts_t o = {.name = "dsleeper"};
    d_sleeper = aco_rt_spawn2(NULL, d_sleep, NULL, &o);
    o.name = "drecv";
    aco_rt_co_t* r = aco_rt_spawn2(NULL, d_recv, NULL, &o);
    o.name = "dlock";
    aco_rt_co_t* l = aco_rt_spawn2(NULL, d_lock, NULL, &o);
    o.name = "djoin";
    aco_rt_co_t* j = aco_rt_spawn2(NULL, d_join, NULL, &o);
    CHECK(d_sleeper && r && l && j);
    aco_rt_stats(NULL, &st);
    CHECK_EQ(st.spawned - st0.spawned, 4);
    CHECK_EQ(st.cos_ready, 4);
    CHECK_EQ(st.cos_alive, 5);
    CHECK_EQ(aco_rt_yield(), 0);            /* they all park */
    o.name = "dready";
    aco_rt_co_t* rd = aco_rt_spawn2(NULL, d_ready, NULL, &o);
    CHECK(rd != NULL);
    aco_rt_stats(NULL, &st);
    CHECK_EQ(st.cos_alive, 6);
    CHECK_EQ(st.cos_parked, 4);
    CHECK_EQ(st.cos_ready, 1);
    CHECK_EQ(st.timers, 2);                 /* the sleep and the recv deadline */
    CHECK_GE(st.switches - st0.switches, 4);
    CHECK_EQ(st.io_inflight, 0);

    int p[2];
    CHECK_EQ(pipe(p), 0);
    aco_rt_dump(NULL, p[1]);
    close(p[1]);
    static char buf[65536];
    size_t n = 0;
    ssize_t k;
    while ((k = read(p[0], buf + n, sizeof(buf) - 1 - n)) > 0) n += (size_t)k;
    close(p[0]);
    buf[n] = 0;
    int lines = 0;
    for (char* q = buf; (q = strstr(q, "\n  co ")) != NULL; q++) lines++;
    if (strncmp(buf, "  co ", 5) == 0) lines++;
    if (lines != 6 || !strstr(buf, "dsleeper") || !strstr(buf, "drecv") || !strstr(buf, "dlock") ||
        !strstr(buf, "djoin") || !strstr(buf, "dready") || !strstr(buf, "parked") ||
        !strstr(buf, "ready") || !strstr(buf, "running") || !strstr(buf, "sleep") ||
        !strstr(buf, "chan_recv") || !strstr(buf, "mutex") || !strstr(buf, "join") ||
        !strstr(buf, "deadline")) {
        fprintf(stderr, "aco_rt_dump gave %d co lines:\n%s", lines, buf);
        CHECK(0);
    }
    /* each named co's line has its state and wait */
    struct { const char* name; const char* what; } want[] = {
        {"\"dsleeper\" parked", "sleep"}, {"\"drecv\" parked", "chan_recv"},
        {"\"dlock\" parked", "mutex"}, {"\"djoin\" parked", "join"}, {"\"dready\" ready", ""},
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        char* line = strstr(buf, want[i].name);
        CHECK(line != NULL);
        char* eol = strchr(line, '\n');
        CHECK(eol != NULL);
        *eol = 0;
        CHECK(strstr(line, want[i].what) != NULL);
        *eol = '\n';
    }
    /* wind down */
    CHECK_EQ(aco_rt_mutex_unlock(&dm), 0);
    CHECK_EQ(aco_rt_cancel(r), 0);
    CHECK_EQ(aco_rt_cancel(d_sleeper), 0);
    CHECK_EQ(aco_rt_join(j, -1), 0);
    CHECK_EQ(aco_rt_join(r, -1), 0);
    CHECK_EQ(aco_rt_join(l, -1), 0);
    CHECK_EQ(aco_rt_join(rd, -1), 0);
    aco_rt_stats(NULL, &st);
    CHECK_EQ(st.cos_alive, 1);
    CHECK_EQ(st.cos_parked, 0);
    CHECK_EQ(st.timers, 0);
    CHECK_EQ(st.io_inflight, 0);
    CHECK_EQ(aco_rt_chan_free(dch), 0);
}

static int inner_run_rc = 1;
static void runs_inside(void* arg) {
    aco_rt_sched_t* s = (aco_rt_sched_t*)arg;
    inner_run_rc = aco_rt_sched_run(s);     /* from a co: refused */
}

/* ------------------------------------------------------------------------ */
/* threads                                                                  */
/* ------------------------------------------------------------------------ */

typedef struct {
    int backend;
    aco_rt_chan_t* ping;
    aco_rt_chan_t* pong;
    long sum;
    int ok;
} thr_t;

static __thread thr_t* my_thr;

static void thr_ponger(void* arg) {
    thr_t* t = (thr_t*)arg;
    long v;
    while (aco_rt_chan_recv(t->ping, &v, -1) == 0) {
        v = v * 2;
        CHECK_EQ(aco_rt_chan_send(t->pong, &v, -1), 0);
    }
}

static void thr_pinger(void* arg) {
    thr_t* t = (thr_t*)arg;
    CHECK(my_thr == t);
    for (long i = 0; i < 3000; i++) {
        CHECK_EQ(aco_rt_chan_send(t->ping, &i, -1), 0);
        long v;
        CHECK_EQ(aco_rt_chan_recv(t->pong, &v, -1), 0);
        CHECK_EQ(v, 2 * i);
        t->sum += v;
        if (i % 500 == 0) CHECK_EQ(aco_rt_sleep(100000), 0);
    }
    CHECK_EQ(aco_rt_chan_close(t->ping), 0);
}

static void* thr_main(void* arg) {
    thr_t* t = (thr_t*)arg;
    my_thr = t;
    CHECK(aco_rt_sched_current() == NULL);
    aco_rt_sched_t* s = test_sched_on(t->backend, NULL);
    CHECK(aco_rt_sched_current() == s);
    t->ping = aco_rt_chan_new(sizeof(long), 0);
    t->pong = aco_rt_chan_new(sizeof(long), 2);
    for (int i = 0; i < 4; i++) CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, thr_ponger, t)), 0);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, thr_pinger, t)), 0);
    test_run(s);
    CHECK_EQ(t->sum, 2L * 2999 * 3000 / 2);
    aco_rt_chan_free(t->ping);
    aco_rt_chan_free(t->pong);
    aco_rt_sched_free(s);
    CHECK(aco_rt_sched_current() == NULL);
    t->ok = 1;
    return NULL;
}

/* a thread whose program made its libaco main co first: the scheduler runs
 * on it, and leaves it usable for plain libaco cos after */
static int plain_steps;
static void plain_co(void) {
    int* p = (int*)aco_get_arg();
    (*p)++;
    aco_yield();
    (*p)++;
    aco_exit();
}

static void* thr_own_main(void* arg) {
    thr_t* t = (thr_t*)arg;
    my_thr = t;
    aco_thread_init(NULL);
    aco_t* main_co = aco_create(NULL, NULL, 0, NULL, NULL);
    aco_rt_sched_t* s = test_sched_on(t->backend, NULL);
    t->ping = aco_rt_chan_new(sizeof(long), 0);
    t->pong = aco_rt_chan_new(sizeof(long), 2);
    for (int i = 0; i < 2; i++) CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, thr_ponger, t)), 0);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, thr_pinger, t)), 0);
    test_run(s);
    CHECK_EQ(t->sum, 2L * 2999 * 3000 / 2);
    aco_rt_chan_free(t->ping);
    aco_rt_chan_free(t->pong);
    aco_rt_sched_free(s);
    /* the program's main co still works */
    aco_share_stack_t* ss = aco_share_stack_new(0);
    plain_steps = 0;
    aco_t* co = aco_create(main_co, ss, 0, plain_co, &plain_steps);
    aco_resume(co);
    CHECK_EQ(plain_steps, 1);
    aco_resume(co);
    CHECK_EQ(plain_steps, 2);
    CHECK(co->is_end);
    aco_destroy(co);
    aco_share_stack_destroy(ss);
    /* and a second scheduler takes it again */
    s = test_sched_on(t->backend, NULL);
    t->sum = 0;
    t->ping = aco_rt_chan_new(sizeof(long), 0);
    t->pong = aco_rt_chan_new(sizeof(long), 0);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, thr_ponger, t)), 0);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, thr_pinger, t)), 0);
    test_run(s);
    CHECK_EQ(t->sum, 2L * 2999 * 3000 / 2);
    aco_rt_chan_free(t->ping);
    aco_rt_chan_free(t->pong);
    aco_rt_sched_free(s);
    aco_destroy(main_co);
    t->ok = 1;
    return NULL;
}

static void threads(int b) {
    pthread_t th[2];
    thr_t t[2];
    memset(t, 0, sizeof(t));
    for (int i = 0; i < 2; i++) {
        t[i].backend = b;
        CHECK_EQ(pthread_create(&th[i], NULL, thr_main, &t[i]), 0);
    }
    for (int i = 0; i < 2; i++) {
        CHECK_EQ(pthread_join(th[i], NULL), 0);
        CHECK_EQ(t[i].ok, 1);
    }
    /* one with its own main co, next to one without */
    memset(t, 0, sizeof(t));
    for (int i = 0; i < 2; i++) {
        t[i].backend = b;
        CHECK_EQ(pthread_create(&th[i], NULL, i ? thr_own_main : thr_main, &t[i]), 0);
    }
    for (int i = 0; i < 2; i++) {
        CHECK_EQ(pthread_join(th[i], NULL), 0);
        CHECK_EQ(t[i].ok, 1);
    }
}

/* ------------------------------------------------------------------------ */
/* cancel: calls that would not wait (the contract of aco_rt_cancel)        */
/* ------------------------------------------------------------------------ */

static aco_rt_chan_t* fp_ch;
static aco_rt_mutex_t fp_m;
static int fp_stage;
static void fast_path_cancelled(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_sleep(10000 * MS), -ECANCELED);
    /* "this call and every later blocking call of the co fail so, at once":
     * also those that would not have to wait */
    fp_stage = 1;
    int v = 5;
    CHECK_EQ(aco_rt_chan_send(fp_ch, &v, -1), -ECANCELED);     /* room */
    CHECK_EQ(aco_rt_chan_len(fp_ch), 1);
    fp_stage = 2;
    aco_rt_sem_t sem;
    aco_rt_sem_init(&sem, 1);
    CHECK_EQ(aco_rt_sem_wait(&sem, -1), -ECANCELED);           /* a unit free */
    fp_stage = 3;
    CHECK_EQ(aco_rt_mutex_lock(&fp_m, -1), -ECANCELED);        /* free */
    fp_stage = 4;
    CHECK_EQ(aco_rt_chan_recv(fp_ch, &v, -1), -ECANCELED);     /* an element there */
    CHECK_EQ(aco_rt_chan_len(fp_ch), 1);
    aco_rt_case_t cs = {fp_ch, ACO_RT_RECV, &v};
    CHECK_EQ(aco_rt_chan_select(&cs, 1, NULL, -1), -ECANCELED);
    CHECK_EQ(aco_rt_chan_len(fp_ch), 1);
    aco_rt_wg_t wg;
    aco_rt_wg_init(&wg);
    CHECK_EQ(aco_rt_wg_wait(&wg, -1), -ECANCELED);             /* zero already */
    CHECK_EQ(aco_rt_sleep(0), -ECANCELED);
    CHECK_EQ(aco_rt_yield(), -ECANCELED);
    int p[2];
    CHECK_EQ(pipe(p), 0);
    CHECK_EQ(aco_rt_wait(p[1], POLLOUT, -1), -ECANCELED);      /* ready */
    CHECK_EQ(aco_rt_close(p[0]), 0);
    CHECK_EQ(aco_rt_close(p[1]), 0);
    fp_stage = 5;
}

static void fast_path_main(void* arg) {
    (void)arg;
    fp_ch = aco_rt_chan_new(sizeof(int), 4);
    aco_rt_mutex_init(&fp_m);
    fp_stage = 0;
    int one = 1;
    CHECK_EQ(aco_rt_chan_send(fp_ch, &one, 0), 0);
    aco_rt_co_t* c = aco_rt_spawn(NULL, fast_path_cancelled, NULL);
    CHECK_EQ(aco_rt_yield(), 0);
    CHECK_EQ(aco_rt_cancel(c), 0);
    CHECK_EQ(aco_rt_join(c, -1), 0);
    CHECK_EQ(fp_stage, 5);
    aco_rt_chan_free(fp_ch);
}

/* ------------------------------------------------------------------------ */

/* ------------------------------------------------------------------------ */
/* Private buffers: one allocation with the record, zeroed, the co's own    */
/* ------------------------------------------------------------------------ */

#define PRIV_N 600

static void priv_co(void* arg) {
    size_t want = (size_t)(uintptr_t)arg, got = 7;
    unsigned char* p = aco_rt_private(&got);
    CHECK_EQ(got, want);
    if (want == 0) { CHECK(p == NULL); return; }
    CHECK(p != NULL);
    CHECK_EQ((uintptr_t)p % 16, 0);
    volatile char here = 0;             /* not on the co's (share) stack */
    CHECK((uintptr_t)p + want <= (uintptr_t)&here - 4096 || (uintptr_t)p > (uintptr_t)&here + 4096);
    for (size_t i = 0; i < want; i++) CHECK_EQ(p[i], 0);
    memset(p, (int)(want & 0xff), want);
    for (int r = 0; r < 3; r++) {
        CHECK_EQ(aco_rt_yield(), 0);    /* the others write theirs meanwhile */
        for (size_t i = 0; i < want; i++) CHECK_EQ(p[i], (unsigned char)(want & 0xff));
        CHECK(aco_rt_private(NULL) == p);
    }
    /* the kernel may fill it (io_uring where the backend is uring) */
    int fds[2];
    CHECK_EQ(pipe(fds), 0);
    CHECK_EQ(write(fds[1], "private", 7), 7);
    if (want >= 7) {
        CHECK_EQ(aco_rt_read(fds[0], p, 7, -1), 7);
        CHECK_EQ(memcmp(p, "private", 7), 0);
    }
    close(fds[0]);
    close(fds[1]);
}

static uintptr_t solo_sp[3];
static void solo_co(void* arg) {
    /* (the frame, not a local's address: ASan may put locals elsewhere) */
    solo_sp[(uintptr_t)arg] = (uintptr_t)__builtin_frame_address(0);
}

/* A finished standalone co's stack serves the next standalone co of a
 * size it fits (the stack pool): the same addresses again. */
static void solo_main(void* arg) {
    (void)arg;
    aco_rt_spawn_opts_t o = {.stack_size = 1 << 20, .standalone = 1};
    for (uintptr_t i = 0; i < 2; i++) CHECK_EQ(aco_rt_join(aco_rt_spawn2(NULL, solo_co, (void*)i, &o), -1), 0);
    CHECK_EQ(solo_sp[0], solo_sp[1]);
    o.stack_size = 8 << 20;                     /* too big for it: a new one */
    CHECK_EQ(aco_rt_join(aco_rt_spawn2(NULL, solo_co, (void*)2, &o), -1), 0);
    CHECK_NE(solo_sp[2], solo_sp[0]);
}

static void priv_main(void* arg) {
    (void)arg;
    aco_rt_co_t* cos[PRIV_N];
    for (int round = 0; round < 2; round++) {   /* the second reuses records */
        for (int i = 0; i < PRIV_N; i++) {
            aco_rt_spawn_opts_t o = {.private_size = (size_t)(i % 7 == 0 ? 0 : (i * 37) % 5000 + 1)};
            cos[i] = aco_rt_spawn2(NULL, priv_co, (void*)(uintptr_t)o.private_size, &o);
            CHECK(cos[i] != NULL);
        }
        for (int i = 0; i < PRIV_N; i++) CHECK_EQ(aco_rt_join(cos[i], -1), 0);
    }
    size_t sz = 1;
    CHECK(aco_rt_private(&sz) == NULL);         /* this co asked for none */
    CHECK_EQ(sz, 0);
    aco_rt_spawn_opts_t huge = {.private_size = SIZE_MAX - 8};
    errno = 0;
    CHECK(aco_rt_spawn2(NULL, priv_co, NULL, &huge) == NULL);
    CHECK_EQ(errno, ENOMEM);
}

static void body(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    S = s;
    CHECK(aco_rt_sched_current() == s);
    CHECK_EQ(strcmp(aco_rt_backend_name(s), test_backend_label), 0);
    errno = 0;
    CHECK(aco_rt_sched_new(NULL) == NULL);
    CHECK_EQ(errno, EBUSY);
    outside_calls(1);
    spawn_join();
    test_go(S, tree_root, NULL);
    fifo();
    test_go(S, detach_main, NULL);
    test_go(S, join_main, NULL);
    test_go(S, cancel_main, NULL);
    test_go(S, sleep_main, NULL);
    test_go(S, many_sleepers, NULL);
    deadlock();
#ifndef ACO_RT_NO_THREADS
    deadlock_other_goes();      /* (two schedulers: not the single-thread build's) */
    deadlock_woken_then_freed();
#endif
    stop_test();
    test_go(S, many_main, NULL);
    test_go(S, standalone_main, NULL);
    test_go(S, dump_main, NULL);
    test_go(S, priv_main, NULL);
    test_go(S, solo_main, NULL);
    CHECK(aco_rt_private(NULL) == NULL);        /* outside cos */
    inner_run_rc = 1;
    test_go(S, runs_inside, S);
    CHECK_NE(inner_run_rc, 0);
    CHECK_LT(inner_run_rc, 0);
    threads(test_backend_id);
    *(aco_rt_sched_t**)arg = S;
}

/* ------------------------------------------------------------------------ */
/* Older kernels: a system call missing (ENOSYS), faked with seccomp        */
/* ------------------------------------------------------------------------ */

static void deny_syscall_err(int nr, int err) { CHECK_EQ(test_deny_syscall(nr, err), 0); }
static void deny_syscall(int nr) { deny_syscall_err(nr, ENOSYS); }

static void old_kernel_co(void* arg) {
    (void)arg;
    int64_t t0 = aco_rt_now();
    CHECK_EQ(aco_rt_sleep(2 * MS), 0);
    CHECK_GE(aco_rt_now() - t0, 2 * MS);
    int p[2];
    CHECK_EQ(pipe(p), 0);
    char c = 0;
    CHECK_EQ(aco_rt_read(p[0], &c, 1, aco_rt_now() + 2 * MS), -ETIMEDOUT);
    CHECK_EQ(aco_rt_close(p[0]), 0);
    CHECK_EQ(aco_rt_close(p[1]), 0);
}

/* arg: the backend asked for */
static void old_kernel_child(void* arg) {
    int b = (int)(intptr_t)arg;
    aco_rt_sched_t* s = aco_rt_sched_new(&(aco_rt_opts_t){.backend = b});
    if (s == NULL) {
        fprintf(stderr, "old kernel: aco_rt_sched_new: %s\n", strerror(errno));
        _exit(3);
    }
    if (b == ACO_RT_BACKEND_AUTO && strcmp(aco_rt_backend_name(s), "epoll") != 0) _exit(4);
    CHECK(aco_rt_spawn(s, old_kernel_co, NULL) != NULL);
    int r = aco_rt_sched_run(s);
    if (r != 0) {
        fprintf(stderr, "old kernel (%s): aco_rt_sched_run: %d (%s)\n",
                aco_rt_backend_name(s), r, strerror(-r));
        _exit(5);
    }
    aco_rt_sched_free(s);
}

static void no_io_uring(void* arg) {
    unsetenv("ACO_RT_BACKEND");
    deny_syscall(__NR_io_uring_setup);
    /* forced: fails with the kernel's error */
    errno = 0;
    aco_rt_sched_t* s = aco_rt_sched_new(&(aco_rt_opts_t){.backend = ACO_RT_BACKEND_URING});
    if (s != NULL || errno != ENOSYS) {
        fprintf(stderr, "no io_uring: forced uring gave %p, errno %d\n", (void*)s, errno);
        _exit(6);
    }
    old_kernel_child(arg);
}

/* A ring the kernel makes but will not enter (a seccomp filter that
 * refuses io_uring_enter alone): no backend, so AUTO takes epoll (it once
 * took the ring, and the run failed at its first wait; a pool's threads
 * said "backend error" a thousand times a second). */
static void no_uring_enter(void* arg) {
    unsetenv("ACO_RT_BACKEND");
    deny_syscall_err(__NR_io_uring_enter, EPERM);
    errno = 0;
    aco_rt_sched_t* s = aco_rt_sched_new(&(aco_rt_opts_t){.backend = ACO_RT_BACKEND_URING});
    if (s != NULL || (errno != EPERM && errno != ENOSYS)) {  /* (ENOSYS: no io_uring here) */
        fprintf(stderr, "no io_uring_enter: forced uring gave %p, errno %d\n", (void*)s, errno);
        _exit(6);
    }
    old_kernel_child(arg);
}

static void no_epoll_pwait2(void* arg) {
    deny_syscall(441 /* __NR_epoll_pwait2, Linux 5.11 */);
    old_kernel_child(arg);
}

/* Pipes before Linux 6.4: preadv2/pwritev2 with RWF_NOWAIT say
 * EOPNOTSUPP (faked: seccomp traps the call, SIGSYS, and the handler sets
 * the result).  The bytes go through as ever (O_NONBLOCK for each call),
 * and the refused try is made once in the process, not again on every
 * read and write (it was, 400 times here).  x86-64, not under valgrind
 * (the handler sets rax). */
#if defined(__x86_64__) && !defined(ACO_USE_VALGRIND)
#include <sys/uio.h>
#include <ucontext.h>
static volatile sig_atomic_t nowait_tries;
static void nowait_refuse(int sig, siginfo_t* si, void* uc) {
    (void)sig;
    (void)si;
    nowait_tries++;
    ((ucontext_t*)uc)->uc_mcontext.gregs[REG_RAX] = -EOPNOTSUPP;
}
enum { OLD_PIPE_N = 200 };
static void old_pipe_writer(void* arg) {
    int fd = *(int*)arg;
    for (int i = 0; i < OLD_PIPE_N; i++) {
        unsigned char c = (unsigned char)i;
        CHECK_EQ(aco_rt_write(fd, &c, 1, aco_rt_in_ms(5000)), 1);
        if (i % 16 == 0) CHECK_EQ(aco_rt_yield(), 0);   /* (the reader finds it empty) */
    }
    CHECK_EQ(aco_rt_close(fd), 0);
}
static void old_pipe_reader(void* arg) {
    int fd = *(int*)arg;
    unsigned char c;
    for (int i = 0; i < OLD_PIPE_N; i++) {
        CHECK_EQ(aco_rt_read(fd, &c, 1, aco_rt_in_ms(5000)), 1);
        CHECK_EQ(c, (unsigned char)i);
    }
    CHECK_EQ(aco_rt_read(fd, &c, 1, aco_rt_in_ms(5000)), 0);
    CHECK_EQ(aco_rt_close(fd), 0);
}
static void pipes_before_6_4(void* arg) {
    struct sigaction sa = {.sa_sigaction = nowait_refuse, .sa_flags = SA_SIGINFO};
    CHECK_EQ(sigaction(SIGSYS, &sa, NULL), 0);
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_preadv2, 1, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_pwritev2, 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[5])),
        BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, RWF_NOWAIT, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {(unsigned short)(sizeof(f) / sizeof(f[0])), f};
    CHECK_EQ(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
    CHECK_EQ(prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog), 0);
    int p[2];
    CHECK_EQ(pipe(p), 0);
    aco_rt_sched_t* s = test_sched_on((int)(intptr_t)arg, NULL);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, old_pipe_reader, &p[0])), 0);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, old_pipe_writer, &p[1])), 0);
    test_run(s);
    aco_rt_sched_free(s);
    if (nowait_tries < 1 || nowait_tries > 2) {     /* (0: the path was not taken) */
        fprintf(stderr, "pipes before 6.4: %d refused RWF_NOWAIT tries\n", (int)nowait_tries);
        _exit(7);
    }
}
#endif

static void old_kernels(void) {
    int st = -1;
#if defined(__x86_64__) && !defined(ACO_USE_VALGRIND)
    int bs[4], nb = test_backends(bs, 4);
    for (int i = 0; i < nb; i++) {
        st = -1;
        CHECK_EQ(test_in_child(pipes_before_6_4, (void*)(intptr_t)bs[i], &st), 0);
        CHECK_EQ(st, 0);
    }
    st = -1;
#endif
    /* no io_uring at all: AUTO takes epoll, which works */
    int sig = test_in_child(no_io_uring, (void*)(intptr_t)ACO_RT_BACKEND_AUTO, &st);
    CHECK_EQ(sig, 0);
    CHECK_EQ(st, 0);
    st = -1;
    sig = test_in_child(no_uring_enter, (void*)(intptr_t)ACO_RT_BACKEND_AUTO, &st);
    CHECK_EQ(sig, 0);
    CHECK_EQ(st, 0);
    /* before Linux 5.11 (io_uring without EXT_ARG: the runtime's own reason
     * to fall back to epoll) there is no epoll_pwait2 */
    st = -1;
    sig = test_in_child(no_epoll_pwait2, (void*)(intptr_t)ACO_RT_BACKEND_EPOLL, &st);
    CHECK_EQ(sig, 0);
    CHECK_EQ(st, 0);
}

/* sleeping without limit: sleep_until(-1), sleep(INT64_MAX) */
static int forever_rc[2];
static void sleeps_forever(void* arg) {
    int i = (int)(intptr_t)arg;
    forever_rc[i] = i ? aco_rt_sleep(INT64_MAX) : aco_rt_sleep_until(-1);
}

static void forever_main(void* arg) {
    (void)arg;
    aco_rt_co_t* c[2];
    for (int i = 0; i < 2; i++) {
        forever_rc[i] = 1;
        c[i] = aco_rt_spawn(NULL, sleeps_forever, (void*)(intptr_t)i);
    }
    CHECK_EQ(aco_rt_yield(), 0);
    /* the scheduler goes on with its other timers meanwhile */
    for (int k = 0; k < 5; k++) {
        int64_t d = aco_rt_now() + MS / 2;
        CHECK_EQ(aco_rt_sleep_until(d), 0);
        CHECK_GE(aco_rt_now(), d);
    }
    CHECK_EQ(forever_rc[0], 1);
    CHECK_EQ(forever_rc[1], 1);
    for (int i = 0; i < 2; i++) {
        CHECK_EQ(aco_rt_cancel(c[i]), 0);
        CHECK_EQ(aco_rt_join(c[i], -1), 0);
        CHECK_EQ(forever_rc[i], -ECANCELED);
    }
    aco_rt_stats_t st;
    aco_rt_stats(NULL, &st);
    CHECK_EQ(st.timers, 0);
}

/* a stack that cannot be had: NULL with ENOMEM, the process lives on */
/* 4 PiB, or on 32 bits all but 64 KiB of the address space: no mmap gives that */
#define HUGE_STACK (sizeof(size_t) == 8 ? (size_t)1 << (sizeof(size_t) * 8 - 12) : (size_t)-1 - 65535)
static void huge_stack_child(void* arg) {
    int b = (int)(intptr_t)arg;
    aco_rt_sched_t* s = test_sched_on(b, NULL);
    aco_rt_spawn_opts_t o = {.stack_size = HUGE_STACK, .standalone = 1, .name = "huge"};
    errno = 0;
    aco_rt_co_t* c = aco_rt_spawn2(s, dummy, NULL, &o);
    if (c != NULL || errno != ENOMEM) _exit(3);
    /* the scheduler goes on */
    c = aco_rt_spawn(s, dummy, NULL);
    if (c == NULL || aco_rt_sched_run(s) != 0) _exit(4);
    aco_rt_sched_free(s);
    /* share stacks of that size: sched_new or the first spawn says ENOMEM */
    aco_rt_opts_t so = {0};
    so.backend = b;
    so.stack_size = HUGE_STACK;
    errno = 0;
    s = aco_rt_sched_new(&so);
    if (s == NULL) _exit(errno == ENOMEM ? 0 : 5);
    errno = 0;
    c = aco_rt_spawn(s, dummy, NULL);
    if (c != NULL || errno != ENOMEM) _exit(6);
    aco_rt_sched_free(s);
}

static void huge_stacks(int b) {
    int st = -1;
    int sig = test_in_child(huge_stack_child, (void*)(intptr_t)b, &st);
    if (sig != 0 || st != 0)
        TEST_FAIL_AT(__FILE__, __LINE__, "a stack of 4 PiB: the child got signal %d, exit %d "
                     "(want NULL with errno ENOMEM from aco_rt_spawn2 / aco_rt_sched_new / "
                     "aco_rt_spawn, no abort)", sig, st);
}

static void body_last(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    test_go(s, forever_main, NULL);
    test_go(s, fast_path_main, NULL);
    aco_rt_sched_free(s);
    free_with_parked(test_backend_id);
    huge_stacks(test_backend_id);
    S = test_sched_on(test_backend_id, NULL);   /* for test_on_backends to free */
    *(aco_rt_sched_t**)arg = S;
}

/* body_last frees its scheduler and makes a new one: arg says which is
 * left for test_on_backends to free */
static void on_backends(void (*fn)(aco_rt_sched_t*, void*)) {
    test_watchdog();
    int bs[8];
    int n = test_backends(bs, 8);
    for (int i = 0; i < n; i++) {
        test_backend_id = bs[i];
        test_backend_label = test_backend_str(bs[i]);
        aco_rt_sched_t* s = test_sched_on(bs[i], NULL);
        aco_rt_sched_t* last = s;
        fn(s, &last);
        aco_rt_sched_free(last);
        test_backend_label = "";
    }
}

/* bad opts and $ACO_RT_BACKEND */
static void new_einval(void) {
    unsetenv("ACO_RT_BACKEND");
    aco_rt_opts_t o = {0};
    o.share_stacks = 100000;
    errno = 0;
    CHECK(aco_rt_sched_new(&o) == NULL);
    CHECK_EQ(errno, EINVAL);
    o = (aco_rt_opts_t){0};
    o.backend = 77;
    errno = 0;
    CHECK(aco_rt_sched_new(&o) == NULL);
    CHECK_EQ(errno, EINVAL);
    CHECK_EQ(setenv("ACO_RT_BACKEND", "bogus", 1), 0);
    errno = 0;
    CHECK(aco_rt_sched_new(NULL) == NULL);
    CHECK_EQ(errno, EINVAL);
    /* AUTO follows $ACO_RT_BACKEND */
    int bs[8];
    int n = test_backends(bs, 8);
    for (int i = 0; i < n; i++) {
        CHECK_EQ(setenv("ACO_RT_BACKEND", test_backend_str(bs[i]), 1), 0);
        aco_rt_sched_t* s = aco_rt_sched_new(NULL);
        CHECK(s != NULL);
        CHECK_EQ(strcmp(aco_rt_backend_name(s), test_backend_str(bs[i])), 0);
        aco_rt_sched_free(s);
    }
    unsetenv("ACO_RT_BACKEND");
    CHECK(aco_rt_sched_current() == NULL);
}

/* The loop's own system calls leave errno as the parked co left it: a
 * signal that ends the idle loop's epoll_wait with EINTR once showed up
 * in the co's errno after its sleep (io_uring's wait sets no errno). */
static void errno_tick(int sig) { (void)sig; }
static void errno_sleeper(void* arg) {
    (void)arg;
    for (int i = 0; i < 10; i++) {
        errno = 1234;
        CHECK_EQ(aco_rt_sleep(5 * MS), 0);
        CHECK_EQ(errno, 1234);
    }
}
static void loop_keeps_errno(void) {
    int bs[8], n = test_backends(bs, 8);
    for (int i = 0; i < n; i++) {
        aco_rt_sched_t* s = test_sched_on(bs[i], NULL);
        test_ticks_on(errno_tick, 1000);
        test_go(s, errno_sleeper, NULL);
        test_ticks_off();
        aco_rt_sched_free(s);
    }
}

/* Under valgrind (its preloads in LD_PRELOAD), AUTO takes epoll: valgrind
 * does not see io_uring's buffers written.  In a child: the environment is
 * changed for the look, as valgrind's launcher sets it. */
static void valgrind_auto_child(void* arg) {
    (void)arg;
    unsetenv("ACO_RT_BACKEND");
    setenv("LD_PRELOAD", "/usr/libexec/valgrind/vgpreload_core-amd64-linux.so:"
           "/usr/libexec/valgrind/vgpreload_memcheck-amd64-linux.so", 1);
    aco_rt_sched_t* s = aco_rt_sched_new(NULL);
    if (s == NULL) _exit(3);
    int auto_epoll = strcmp(aco_rt_backend_name(s), "epoll") == 0;
    aco_rt_sched_free(s);
    if (!auto_epoll) _exit(4);
    s = aco_rt_sched_new(&(aco_rt_opts_t){.backend = ACO_RT_BACKEND_URING});
    if (s != NULL && strcmp(aco_rt_backend_name(s), "uring") != 0) _exit(5);
    if (s) aco_rt_sched_free(s);
    _exit(0);
}

static void valgrind_auto(void) {
    int st = -1;
    CHECK_EQ(test_in_child(valgrind_auto_child, NULL, &st), 0);
    CHECK_EQ(st, 0);
}

int main(void) {
    new_einval();
    outside_calls(0);
    on_backends(body);
    outside_calls(0);
    /* last: the checks that found runtime bugs, after all the others */
    on_backends(body_last);
    old_kernels();
    valgrind_auto();
    loop_keeps_errno();
    return 0;
}
