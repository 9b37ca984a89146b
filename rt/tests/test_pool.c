/* test_pool.c - the runtime across threads: pools, cross-thread spawn, join,
 * detach and cancel, channels, select, mutex, cond, semaphore and wait group
 * between cos of different threads, groups, stopping a busy pool, fork with
 * a running pool (and from a thread with a scheduler: the child's thread
 * has none, and makes one), a thread's scheduler freed right after its
 * join of a pool co returned (and one whose group a co elsewhere joins),
 * aco_rt_pool_free from a pool co (-EDEADLK), aco_rt_spawn on a sibling
 * from a co that keeps running (ready at once, cancelled by pool_wait),
 * a spawn from a timer callback (counted by pool_wait, freed by pool_free),
 * a pool freed while its threads' groups and joiners wake each other,
 * and a stress of 2 million cross-thread hand-offs (fewer
 * under valgrind, the sanitizers and -O0).  Every figure is checked: nothing
 * lost, nothing twice, nothing early.
 */
#define _GNU_SOURCE
#include "rt_test.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>

static aco_rt_pool_t* pool;

/* fn(arg) as the one co of a scheduler of the calling thread's own, made,
 * run to its end and freed. */
static void run_alone(aco_rt_fn_t fn, void* arg) {
    aco_rt_sched_t* s = aco_rt_sched_new(NULL);
    CHECK(s != NULL);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, fn, arg)), 0);
    CHECK_EQ(aco_rt_sched_run(s), 0);
    aco_rt_sched_free(s);
}

static aco_rt_pool_t* new_pool(unsigned n) {
    aco_rt_pool_opts_t o = {0};
    o.threads = n;
    const char* b = getenv("ACO_RT_TEST_BACKENDS");
    if (b && strstr(b, "uring") == NULL) o.sched.backend = ACO_RT_BACKEND_EPOLL;
    aco_rt_pool_t* p = aco_rt_pool_new(&o);
    if (p == NULL) {
        fprintf(stderr, "aco_rt_pool_new: %s\n", strerror(errno));
        abort();
    }
    CHECK_EQ(aco_rt_pool_threads(p), n);
    return p;
}

static aco_rt_sched_t* T(unsigned i) { return aco_rt_pool_sched(pool, i); }

/* Run fn(arg) as a co of pool thread i and wait (from main) until every
 * co of the pool finished. */
static void run_on(unsigned i, aco_rt_fn_t fn, void* arg) {
    aco_rt_co_t* co = aco_rt_spawn(T(i), fn, arg);
    CHECK(co != NULL);
    CHECK_EQ(aco_rt_detach(co), 0);
    CHECK_EQ(aco_rt_pool_wait(pool, ACO_RT_POOL_DRAIN, aco_rt_now() + 120000 * MS), 0);
}

/* ------------------------------------------------------------------------ */
/* A deep queue of new cos: thread 1 is kept busy while a co of thread 0   */
/* spawns 5000 (more batches than the queue's ring holds: its last batch */
/* grows), cancelling some; then thread 1 goes idle and takes half, in    */
/* whole batches, before thread 0 starts the rest.  Each runs once.       */
/* ------------------------------------------------------------------------ */

#define DEEP_N CO_MANY(5000)
static unsigned char deep_ran[DEEP_N], deep_cancelled[DEEP_N], deep_saw[DEEP_N];
static atomic_long deep_on1;
static atomic_int deep_busy;
static aco_rt_wg_t deep_wg;

static void deep_busy_co(void* arg) {
    (void)arg;
    /* holds thread 1 (no co switch) until the spawner is done */
    atomic_store(&deep_busy, 2);
    while (atomic_load(&deep_busy) == 2) sched_yield();
}

static void deep_co(void* arg) {
    long i = (long)(uintptr_t)arg;
    deep_ran[i]++;
    deep_saw[i] = (unsigned char)aco_rt_cancelled();
    if (aco_rt_sched_current() == aco_rt_pool_sched(pool, 1)) atomic_fetch_add(&deep_on1, 1);
    aco_rt_wg_done(&deep_wg);
}

static void deep_main(void* arg) {
    (void)arg;
    atomic_store(&deep_busy, 1);
    aco_rt_co_t* b = aco_rt_spawn(aco_rt_pool_sched(pool, 1), deep_busy_co, NULL);
    CHECK(b != NULL);
    CHECK_EQ(aco_rt_detach(b), 0);
    /* (the spawn leaves when this co stops running: yield until it runs) */
    while (atomic_load(&deep_busy) != 2) CHECK_EQ(aco_rt_yield(), 0);
    CHECK_EQ(aco_rt_wg_add(&deep_wg, DEEP_N), 0);
    for (long i = 0; i < DEEP_N; i++) {
        aco_rt_co_t* c = aco_rt_pool_spawn(pool, deep_co, (void*)(uintptr_t)i, NULL);
        CHECK(c != NULL);
        if (i % 13 == 5) {
            deep_cancelled[i] = 1;
            CHECK_EQ(aco_rt_cancel(c), 0);
        }
        CHECK_EQ(aco_rt_detach(c), 0);
    }
    /* None started yet (this co has not stopped), none taken (thread 1 is
     * busy), 156 batches queued: more than the ring holds.  Release thread
     * 1 and hold this thread (no co switch) until it took and ran some. */
    CHECK_EQ(atomic_load(&deep_on1), 0);
    atomic_store(&deep_busy, 0);
    int64_t end = aco_rt_now() + 60000 * MS;
    while (atomic_load(&deep_on1) == 0 && aco_rt_now() < end) sched_yield();
    CHECK_GT(atomic_load(&deep_on1), 0);
    CHECK_EQ(aco_rt_wg_wait(&deep_wg, -1), 0);
}

static void test_steal_deep(void) {
    run_on(0, deep_main, NULL);
    long saw = 0;
    for (long i = 0; i < DEEP_N; i++) {
        CHECK_EQ(deep_ran[i], 1);
        CHECK(deep_saw[i] <= deep_cancelled[i]);
        saw += deep_saw[i];
    }
    CHECK_GT(saw, 0);       /* cancelled before they started: they see it */
    printf("steal_deep: %ld of %d ran on the other thread\n", (long)atomic_load(&deep_on1), DEEP_N);
}

/* ------------------------------------------------------------------------ */
/* aco_rt_pool_wait(DRAIN) while cos hop: each co spawns the next on the   */
/* other thread and ends at once, so at every moment the chain's one co  */
/* may be between the two threads' counts.  The wait must not end early. */
/* ------------------------------------------------------------------------ */

#define HOPS 6
static atomic_int hops_done;

static void hop_co(void* arg) {
    long left = (long)(uintptr_t)arg;
    if (left > 0) {
        aco_rt_sched_t* other = aco_rt_sched_current() == T(0) ? T(1) : T(0);
        aco_rt_co_t* c = aco_rt_spawn(other, hop_co, (void*)(uintptr_t)(left - 1));
        CHECK(c != NULL);
        CHECK_EQ(aco_rt_detach(c), 0);
    }
    atomic_fetch_add(&hops_done, 1);
}

static void test_wait_hops(void) {
    int rounds = SLOW ? 50 : 1000;
    for (int r = 0; r < rounds; r++) {
        atomic_store(&hops_done, 0);
        aco_rt_co_t* c = aco_rt_spawn(T(r & 1), hop_co, (void*)(uintptr_t)HOPS);
        CHECK(c != NULL);
        CHECK_EQ(aco_rt_detach(c), 0);
        CHECK_EQ(aco_rt_pool_wait(pool, ACO_RT_POOL_DRAIN, aco_rt_now() + 60000 * MS), 0);
        CHECK_EQ(atomic_load(&hops_done), HOPS + 1);   /* the whole chain ran */
    }
}

/* ------------------------------------------------------------------------ */
/* Spawning into the pool from outside                                      */
/* ------------------------------------------------------------------------ */

static atomic_long spawned_ran;
static atomic_long on_thread[2];

static void count_fn(void* arg) {
    (void)arg;
    atomic_fetch_add(&spawned_ran, 1);
    atomic_fetch_add(&on_thread[aco_rt_sched_current() == T(1)], 1);
    aco_rt_yield();
}

static void test_spawn_from_outside(void) {
    for (int i = 0; i < 1000; i++) {
        aco_rt_co_t* co = aco_rt_pool_spawn(pool, count_fn, NULL, NULL);
        CHECK(co != NULL);
        CHECK_EQ(aco_rt_detach(co), 0);
    }
    CHECK_EQ(aco_rt_pool_wait(pool, ACO_RT_POOL_DRAIN, aco_rt_now() + 60000 * MS), 0);
    CHECK_EQ(atomic_load(&spawned_ran), 1000);
    /* both threads were given cos (least loaded first) */
    CHECK_GT(atomic_load(&on_thread[0]), 0);
    CHECK_GT(atomic_load(&on_thread[1]), 0);
    CHECK(aco_rt_pool_spawn(pool, NULL, NULL, NULL) == NULL && errno == EINVAL);
    CHECK_EQ(aco_rt_pool_wait(pool, 7, -1), -EINVAL);
}

/* ------------------------------------------------------------------------ */
/* Spawning from inside: new cos wait on the spawner's thread, an idle      */
/* sibling takes some before they start                                     */
/* ------------------------------------------------------------------------ */

#define STEAL_N CO_MANY(SLOW ? 3000 : 20000)
static unsigned char steal_cancelled[STEAL_N], steal_saw_cancel[STEAL_N], steal_ran[STEAL_N];
static atomic_long steal_thread[2];
static aco_rt_wg_t steal_wg;

static void steal_co(void* arg) {
    long i = (long)(uintptr_t)arg;
    steal_ran[i]++;
    steal_saw_cancel[i] = (unsigned char)aco_rt_cancelled();
    atomic_fetch_add(&steal_thread[aco_rt_sched_current() == T(1)], 1);
    aco_rt_wg_done(&steal_wg);
}

static void steal_main(void* arg) {
    (void)arg;
    aco_rt_co_t* keep[STEAL_N / 10 + 1];
    int nkeep = 0;
    CHECK_EQ(aco_rt_wg_add(&steal_wg, STEAL_N), 0);
    for (long i = 0; i < STEAL_N; i++) {
        aco_rt_co_t* c = aco_rt_pool_spawn(pool, steal_co, (void*)(uintptr_t)i, NULL);
        CHECK(c != NULL);
        if (i % 7 == 3) {           /* cancelled at once: before it starts, mostly */
            steal_cancelled[i] = 1;
            CHECK_EQ(aco_rt_cancel(c), 0);
        }
        if (i % 10 == 0) keep[nkeep++] = c;
        else CHECK_EQ(aco_rt_detach(c), 0);
        if (i % 1000 == 999 && i + 1 < STEAL_N) aco_rt_yield();    /* a chance to start some */
    }
    /* The last thousand wait in this thread's queue.  Hold the thread (no
     * co switch) until the idle sibling, woken for them, took some: on a
     * busy machine it may get a CPU only after this thread would have
     * started them all itself. */
    int64_t until = aco_rt_now() + 30000 * MS;
    while (!SLOW && atomic_load(&steal_thread[1]) == 0 && aco_rt_now() < until) sched_yield();
    CHECK_EQ(aco_rt_wg_wait(&steal_wg, -1), 0);
    for (int k = 0; k < nkeep; k++) CHECK_EQ(aco_rt_join(keep[k], -1), 0);
}

static void test_steal(void) {
    run_on(0, steal_main, NULL);
    for (long i = 0; i < STEAL_N; i++) {
        CHECK_EQ(steal_ran[i], 1);
        /* a co sees a cancel only if it was cancelled; one that was may
         * have run before the cancel came */
        CHECK(steal_saw_cancel[i] <= steal_cancelled[i]);
    }
    long cancelled_seen = 0;
    for (long i = 0; i < STEAL_N; i++) cancelled_seen += steal_saw_cancel[i];
    CHECK_GT(cancelled_seen, 0);
    if (!SLOW) CHECK_GT(atomic_load(&steal_thread[1]), 0);     /* the idle thread took some */
    printf("steal: %ld of %d ran on the other thread, %ld saw their cancel\n",
           (long)atomic_load(&steal_thread[1]), STEAL_N, cancelled_seen);
}

/* ------------------------------------------------------------------------ */
/* Channels between threads                                                 */
/* ------------------------------------------------------------------------ */

typedef struct {
    aco_rt_chan_t* ping;
    aco_rt_chan_t* pong;
    long n;
} pp_t;

static void pong_fn(void* arg) {
    pp_t* p = arg;
    CHECK(aco_rt_sched_current() == T(1));
    for (long i = 0; i < p->n; i++) {
        long v = -1;
        CHECK_EQ(aco_rt_chan_recv(p->ping, &v, -1), 0);
        CHECK_EQ(v, i);
        v = -v;
        CHECK_EQ(aco_rt_chan_send(p->pong, &v, -1), 0);
    }
}

static void ping_fn(void* arg) {
    pp_t* p = arg;
    aco_rt_co_t* other = aco_rt_spawn(T(1), pong_fn, p);
    CHECK(other != NULL);
    for (long i = 0; i < p->n; i++) {
        CHECK_EQ(aco_rt_chan_send(p->ping, &i, -1), 0);
        long v = 0;
        CHECK_EQ(aco_rt_chan_recv(p->pong, &v, -1), 0);
        CHECK_EQ(v, -i);
    }
    CHECK_EQ(aco_rt_join(other, -1), 0);        /* a co of the other thread */
}

static void stream_fn(void* arg) {      /* t1: receives 0..n-1 in order */
    pp_t* p = arg;
    for (long i = 0; i < p->n; i++) {
        long v = -1;
        CHECK_EQ(aco_rt_chan_recv(p->ping, &v, -1), 0);
        CHECK_EQ(v, i);
    }
    long v;
    CHECK_EQ(aco_rt_chan_recv(p->ping, &v, -1), -EPIPE);
}

static void stream_src(void* arg) {
    pp_t* p = arg;
    aco_rt_co_t* c = aco_rt_spawn(T(1), stream_fn, p);
    for (long i = 0; i < p->n; i++) CHECK_EQ(aco_rt_chan_send(p->ping, &i, -1), 0);
    CHECK_EQ(aco_rt_chan_close(p->ping), 0);
    CHECK_EQ(aco_rt_join(c, -1), 0);
}

static void test_channels(void) {
    for (size_t cap = 0; cap <= 1; cap++) {
        pp_t p = {aco_rt_chan_new(sizeof(long), cap), aco_rt_chan_new(sizeof(long), cap),
                  SLOW ? 2000 : 20000};
        run_on(0, ping_fn, &p);
        CHECK_EQ(aco_rt_chan_free(p.ping), 0);
        CHECK_EQ(aco_rt_chan_free(p.pong), 0);
    }
    pp_t s = {aco_rt_chan_new(sizeof(long), 16), NULL, SLOW ? 5000 : 50000};
    run_on(0, stream_src, &s);
    CHECK_EQ(aco_rt_chan_free(s.ping), 0);
}

/* ------------------------------------------------------------------------ */
/* Exactly once, with deadlines racing the other thread                     */
/* ------------------------------------------------------------------------ */

#define EO_N (SLOW ? 3000 : 60000)
static aco_rt_chan_t* eo_ch[2];
static unsigned char eo_sent[EO_N], eo_got[EO_N];
static atomic_int eo_senders;

static int64_t short_deadline(unsigned* seed) {
    return aco_rt_now() + (int64_t)(rand_r(seed) % 200) * 1000;     /* 0-200 us */
}

static void eo_sender(void* arg) {
    unsigned seed = (unsigned)(uintptr_t)arg;
    for (long v = (long)(uintptr_t)arg; v < EO_N; v += 4) {
        int r;
        do r = aco_rt_chan_send(eo_ch[v & 1], &v, short_deadline(&seed));
        while (r == -ETIMEDOUT);
        CHECK_EQ(r, 0);
        eo_sent[v]++;
    }
    if (atomic_fetch_sub(&eo_senders, 1) == 1) {
        aco_rt_chan_close(eo_ch[0]);
        aco_rt_chan_close(eo_ch[1]);
    }
}

static void eo_receiver(void* arg) {
    unsigned seed = (unsigned)(uintptr_t)arg;
    aco_rt_chan_t* open[2] = {eo_ch[0], eo_ch[1]};
    int nopen = 2;
    long got[2];
    while (nopen) {
        aco_rt_case_t cs[2];
        for (int i = 0; i < nopen; i++) cs[i] = (aco_rt_case_t){open[i], ACO_RT_RECV, &got[i]};
        int err = 0;
        int i = aco_rt_chan_select(cs, nopen, &err, short_deadline(&seed));
        if (i == -ETIMEDOUT) continue;
        CHECK_GE(i, 0);
        CHECK_LT(i, nopen);
        if (err == -EPIPE) {                /* closed and empty */
            open[i] = open[--nopen];
            continue;
        }
        CHECK_EQ(err, 0);
        CHECK(got[i] >= 0 && got[i] < EO_N);
        eo_got[got[i]]++;
    }
}

static void eo_main(void* arg) {
    (void)arg;
    atomic_store(&eo_senders, 4);
    aco_rt_co_t* cos[6];
    for (int i = 0; i < 4; i++) cos[i] = aco_rt_spawn(T(1), eo_sender, (void*)(uintptr_t)i);
    for (int i = 4; i < 6; i++) cos[i] = aco_rt_spawn(T(i & 1), eo_receiver, (void*)(uintptr_t)i);
    for (int i = 0; i < 6; i++) CHECK_EQ(aco_rt_join(cos[i], -1), 0);
}

static void test_exactly_once(void) {
    eo_ch[0] = aco_rt_chan_new(sizeof(long), 0);
    eo_ch[1] = aco_rt_chan_new(sizeof(long), 3);
    run_on(0, eo_main, NULL);
    for (long v = 0; v < EO_N; v++) {
        CHECK_EQ(eo_sent[v], 1);
        CHECK_EQ(eo_got[v], 1);
    }
    CHECK_EQ(aco_rt_chan_free(eo_ch[0]), 0);
    CHECK_EQ(aco_rt_chan_free(eo_ch[1]), 0);
}

/* ------------------------------------------------------------------------ */
/* Mutex, cond, semaphore, wait group between threads                       */
/* ------------------------------------------------------------------------ */

static aco_rt_mutex_t mu;
static aco_rt_cond_t not_empty, not_full;
static long buf[8], head, len, counter;
static aco_rt_sem_t sem;
static aco_rt_wg_t wg;
#define SYNC_N (SLOW ? 2000 : 100000)

static void bb_producer(void* arg) {
    (void)arg;
    for (long i = 0; i < SYNC_N; i++) {
        CHECK_EQ(aco_rt_mutex_lock(&mu, -1), 0);
        while (len == 8) CHECK_EQ(aco_rt_cond_wait(&not_full, &mu, -1), 0);
        buf[(head + len++) % 8] = i;
        aco_rt_cond_signal(&not_empty);
        CHECK_EQ(aco_rt_mutex_unlock(&mu), 0);
    }
}

static void bb_consumer(void* arg) {
    (void)arg;
    for (long i = 0; i < SYNC_N; i++) {
        CHECK_EQ(aco_rt_mutex_lock(&mu, -1), 0);
        while (len == 0) CHECK_EQ(aco_rt_cond_wait(&not_empty, &mu, -1), 0);
        CHECK_EQ(buf[head], i);
        head = (head + 1) % 8;
        len--;
        aco_rt_cond_signal(&not_full);
        CHECK_EQ(aco_rt_mutex_unlock(&mu), 0);
    }
}

static void lock_adder(void* arg) {
    (void)arg;
    for (int i = 0; i < SYNC_N / 10; i++) {
        CHECK_EQ(aco_rt_mutex_lock(&mu, -1), 0);
        counter++;
        if (i % 7 == 0) aco_rt_yield();     /* held across a switch */
        CHECK_EQ(aco_rt_mutex_unlock(&mu), 0);
    }
    aco_rt_wg_done(&wg);
}

static void sem_poster(void* arg) {
    (void)arg;
    for (int i = 0; i < SYNC_N; i++) {
        aco_rt_sem_post(&sem);
        if (i % 16 == 0) aco_rt_yield();
    }
}

static void sem_waiter(void* arg) {
    (void)arg;
    for (int i = 0; i < SYNC_N; i++) CHECK_EQ(aco_rt_sem_wait(&sem, -1), 0);
    CHECK_EQ(aco_rt_sem_trywait(&sem), -EAGAIN);
}

static void timed_waiter(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_mutex_lock(&mu, -1), 0);
    int64_t t0 = aco_rt_now();
    CHECK_EQ(aco_rt_cond_wait(&not_empty, &mu, t0 + 20 * MS), -ETIMEDOUT);
    CHECK_GE(aco_rt_now() - t0, 20 * MS);
    CHECK(aco_rt_mutex_trylock(&mu) == -EBUSY);     /* relocked: ours */
    CHECK_EQ(aco_rt_mutex_unlock(&mu), 0);
}

static void sync_main(void* arg) {
    (void)arg;
    aco_rt_co_t* c[2];
    c[0] = aco_rt_spawn(T(0), bb_producer, NULL);
    c[1] = aco_rt_spawn(T(1), bb_consumer, NULL);
    for (int i = 0; i < 2; i++) CHECK_EQ(aco_rt_join(c[i], -1), 0);
    CHECK_EQ(len, 0);
    /* 40 adders on both threads, a wait group over them */
    CHECK_EQ(aco_rt_wg_add(&wg, 40), 0);
    for (int i = 0; i < 40; i++) CHECK(aco_rt_spawn(T(i & 1), lock_adder, NULL) != NULL);
    CHECK_EQ(aco_rt_wg_wait(&wg, -1), 0);
    CHECK_EQ(counter, 40L * (SYNC_N / 10));
    c[0] = aco_rt_spawn(T(1), sem_poster, NULL);
    c[1] = aco_rt_spawn(T(0), sem_waiter, NULL);
    for (int i = 0; i < 2; i++) CHECK_EQ(aco_rt_join(c[i], -1), 0);
    c[0] = aco_rt_spawn(T(1), timed_waiter, NULL);
    CHECK_EQ(aco_rt_join(c[0], -1), 0);
}

static void test_sync(void) {
    run_on(0, sync_main, NULL);
}

/* ------------------------------------------------------------------------ */
/* Join, detach, cancel across threads                                      */
/* ------------------------------------------------------------------------ */

static aco_rt_chan_t* never;
static atomic_int cancel_seen;

static void sleeper(void* arg) { aco_rt_sleep((int64_t)(uintptr_t)arg * MS); }

/* Waits until let go (not a time the other thread's timed join must beat:
 * a loaded machine may run this thread late). */
static aco_rt_sem_t held_release;
static void held(void* arg) { (void)arg; CHECK_EQ(aco_rt_sem_wait(&held_release, -1), 0); }

static void blocked(void* arg) {
    (void)arg;
    long v;
    int r = aco_rt_chan_recv(never, &v, -1);
    CHECK_EQ(r, -ECANCELED);
    CHECK_EQ(aco_rt_yield(), -ECANCELED);   /* sticky */
    atomic_fetch_add(&cancel_seen, 1);
}

static void xjoin_main(void* arg) {
    (void)arg;
    aco_rt_sem_init(&held_release, 0);
    aco_rt_co_t* c = aco_rt_spawn(T(1), held, NULL);
    CHECK(c != NULL);
    CHECK_EQ(aco_rt_join(c, aco_rt_now() + 5 * MS), -ETIMEDOUT);
    aco_rt_sem_post(&held_release);
    CHECK_EQ(aco_rt_join(c, -1), 0);
    /* detach before and after it ends */
    c = aco_rt_spawn(T(1), sleeper, (void*)5);
    CHECK_EQ(aco_rt_detach(c), 0);
    c = aco_rt_spawn(T(1), sleeper, (void*)0);
    aco_rt_sleep(20 * MS);
    CHECK_EQ(aco_rt_detach(c), 0);
    /* cancel a co of the other thread that waits without limit */
    never = aco_rt_chan_new(sizeof(long), 0);
    aco_rt_co_t* b[50];
    for (int i = 0; i < 50; i++) b[i] = aco_rt_spawn(T(1 - (i & 1)), blocked, NULL);
    aco_rt_sleep(5 * MS);
    for (int i = 0; i < 50; i++) CHECK_EQ(aco_rt_cancel(b[i]), 0);
    for (int i = 0; i < 50; i++) CHECK_EQ(aco_rt_join(b[i], -1), 0);
    CHECK_EQ(atomic_load(&cancel_seen), 50);
    /* a cancel that races the co's end, and a join that races both */
    for (int i = 0; i < 2000; i++) {
        c = aco_rt_spawn(T(1), sleeper, (void*)0);
        if (i & 1) aco_rt_yield();
        CHECK_EQ(aco_rt_cancel(c), 0);
        CHECK_EQ(aco_rt_join(c, -1), 0);
    }
    CHECK_EQ(aco_rt_chan_free(never), 0);
}

/* Two threads take one handle at once: two joins, or a join and a detach,
 * of a co that has mostly ended by then.  Exactly one gets it (0), the
 * other -EINVAL (a joiner or a detach came first); never both, which
 * would free the handle twice. */
#ifdef ACO_USE_VALGRIND
#define JR_N 0          /* (memcheck runs one thread at a time: no race) */
#else
#define JR_N (SLOW ? 200 : 3000)
#endif
static aco_rt_co_t* jr_target;
static atomic_int jr_start, jr_ready;
static int jr_rc[2];
static void jr_racer(void* arg) {
    int how = (int)(intptr_t)arg;       /* 0, 1: join; 2: detach */
    atomic_fetch_add(&jr_ready, 1);
    while (!atomic_load(&jr_start)) aco_rt_yield();
    jr_rc[how != 0] = how == 2 ? aco_rt_detach(jr_target) : aco_rt_join(jr_target, -1);
}
static void jr_main(void* arg) {
    (void)arg;
    for (int r = 0; r < JR_N; r++) {
        atomic_store(&jr_start, 0);
        atomic_store(&jr_ready, 0);
        jr_rc[0] = jr_rc[1] = 1;
        jr_target = aco_rt_spawn(T(1), sleeper, (void*)0);
        CHECK(jr_target != NULL);
        aco_rt_co_t* a = aco_rt_spawn(T(0), jr_racer, (void*)0);
        aco_rt_co_t* b = aco_rt_spawn(T(1), jr_racer, (void*)(intptr_t)(r & 1 ? 2 : 1));
        CHECK(a && b);
        while (atomic_load(&jr_ready) < 2) aco_rt_yield();
        atomic_store(&jr_start, 1);
        CHECK_EQ(aco_rt_join(a, -1), 0);
        CHECK_EQ(aco_rt_join(b, -1), 0);
        for (int i = 0; i < 2; i++) CHECK(jr_rc[i] == 0 || jr_rc[i] == -EINVAL);
        CHECK((jr_rc[0] == 0) != (jr_rc[1] == 0));
    }
}

static void test_join_cancel(void) {
    run_on(0, xjoin_main, NULL);
    run_on(0, jr_main, NULL);
}

/* ------------------------------------------------------------------------ */
/* Groups                                                                   */
/* ------------------------------------------------------------------------ */

static aco_rt_group_t* grp;
static atomic_int grp_done;

static void member(void* arg) {
    unsigned seed = (unsigned)(uintptr_t)arg;
    CHECK(aco_rt_sched_current() == aco_rt_group_sched(grp));
    aco_rt_sleep((int64_t)(rand_r(&seed) % 5000) * 1000);
    atomic_fetch_add(&grp_done, 1);
}

static void self_join(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_group_join(grp, 0), -EDEADLK);
    CHECK_EQ(aco_rt_group_cancel(grp, 0), -EDEADLK);
}

static void group_main(void* arg) {
    (void)arg;
    grp = aco_rt_group_new(T(1));           /* bound to the other thread */
    CHECK(grp != NULL);
    for (int i = 0; i < 100; i++) CHECK_EQ(aco_rt_group_spawn(grp, member, (void*)(uintptr_t)i, NULL), 0);
    CHECK_EQ(aco_rt_group_spawn(grp, self_join, NULL, NULL), 0);
    CHECK_EQ(aco_rt_group_join(grp, -1), 0);
    CHECK_EQ(atomic_load(&grp_done), 100);
    CHECK_EQ(aco_rt_group_size(grp), 0);
    never = aco_rt_chan_new(sizeof(long), 0);
    atomic_store(&cancel_seen, 0);
    for (int i = 0; i < 100; i++) CHECK_EQ(aco_rt_group_spawn(grp, blocked, NULL, NULL), 0);
    int64_t t0 = aco_rt_now();
    CHECK_EQ(aco_rt_group_join(grp, t0 + 10 * MS), -ETIMEDOUT);
    CHECK_GE(aco_rt_now() - t0, 10 * MS);
    CHECK_EQ(aco_rt_group_size(grp), 100);
    CHECK_EQ(aco_rt_group_free(grp), -EBUSY);
    CHECK_EQ(aco_rt_group_cancel(grp, -1), 0);
    CHECK_EQ(atomic_load(&cancel_seen), 100);
    CHECK_EQ(aco_rt_group_free(grp), 0);
    CHECK_EQ(aco_rt_chan_free(never), 0);
    /* a group of this thread, cancelled while its members are busy */
    aco_rt_group_t* g = aco_rt_group_new(NULL);
    for (int i = 0; i < 10; i++) CHECK_EQ(aco_rt_group_spawn(g, sleeper, (void*)10000, NULL), 0);
    CHECK_EQ(aco_rt_group_cancel(g, -1), 0);
    CHECK_EQ(aco_rt_group_free(g), 0);
}

/* aco_rt_group_cancel that does not wait (deadline 0), on the group's own
 * thread: the members are cancelled at once, as by aco_rt_cancel, so a
 * post that comes right after does not end a member's wait with success
 * (it did: the cancel went through the inbox and came after the post). */
static aco_rt_sem_t gc_sem;
static int gc_wait_r;
static void gc_member(void* arg) {
    (void)arg;
    gc_wait_r = aco_rt_sem_wait(&gc_sem, aco_rt_now() + 5000 * MS);
}
static void group_cancel_now(void* arg) {
    (void)arg;
    for (int round = 0; round < 2; round++) {
        aco_rt_group_t* g = aco_rt_group_new(NULL);
        gc_wait_r = 1;
        CHECK_EQ(aco_rt_group_spawn(g, gc_member, NULL, NULL), 0);
        aco_rt_yield();                     /* the member waits */
        CHECK_EQ(gc_wait_r, 1);
        if (round == 1) aco_rt_cancel(aco_rt_self());   /* a cancelled caller: */
        CHECK_EQ(aco_rt_group_cancel(g, 0), round ? -ECANCELED : -ETIMEDOUT);
        aco_rt_sem_post(&gc_sem);
        aco_rt_cancel_shield(1);
        CHECK_EQ(aco_rt_group_join(g, -1), 0);
        aco_rt_cancel_shield(0);
        CHECK_EQ(gc_wait_r, -ECANCELED);
        CHECK_EQ(aco_rt_sem_trywait(&gc_sem), 0);   /* the post is still there */
        CHECK_EQ(aco_rt_group_free(g), 0);
    }
}

/* A spawn from another thread into a group being cancelled, and a cancel
 * on the group's thread that lists the new member before its spawn
 * message came (the thread is busy in the canceller): the member comes
 * cancelled, and the spawner wrote its flags before it was listed, under
 * the group's lock.  (It wrote them after: ThreadSanitizer saw that write
 * race with the cancel's read.  The flag between the two threads is
 * relaxed, so that it orders nothing for TSan.) */
static aco_rt_group_t* gx;
static aco_rt_sem_t gx_sem;
static int gx_held_r = 1, gx_new_r = 1, gx_spawned;
static void gx_held(void* arg) {       /* keeps the group cancelling */
    (void)arg;
    aco_rt_cancel_shield(1);
    gx_held_r = aco_rt_sem_wait(&gx_sem, -1);
    aco_rt_cancel_shield(0);
}
static void gx_new(void* arg) { (void)arg; gx_new_r = aco_rt_sleep(10000 * MS); }
static void gx_spawner(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_group_spawn(gx, gx_new, NULL, NULL), 0);
    __atomic_store_n(&gx_spawned, 1, __ATOMIC_RELAXED);
}
static void group_spawn_cancelling(void* arg) {
    (void)arg;
    gx = aco_rt_group_new(NULL);
    CHECK(gx != NULL);
    CHECK_EQ(aco_rt_group_spawn(gx, gx_held, NULL, NULL), 0);
    aco_rt_yield();                         /* it waits, shielded */
    CHECK_EQ(aco_rt_group_cancel(gx, 0), -ETIMEDOUT);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(T(1), gx_spawner, NULL)), 0);
    int64_t end = aco_rt_now() + 10000 * MS;
    while (!__atomic_load_n(&gx_spawned, __ATOMIC_RELAXED)) CHECK_LT(aco_rt_now(), end);
    CHECK_EQ(aco_rt_group_cancel(gx, 0), -ETIMEDOUT);
    aco_rt_sem_post(&gx_sem);
    CHECK_EQ(aco_rt_group_join(gx, -1), 0);
    CHECK_EQ(gx_held_r, 0);
    CHECK_EQ(gx_new_r, -ECANCELED);
    CHECK_EQ(aco_rt_group_free(gx), 0);
}

static void test_groups(void) {
    run_on(0, group_main, NULL);
    run_on(0, group_cancel_now, NULL);
    run_on(0, group_spawn_cancelling, NULL);
    CHECK(aco_rt_group_new(NULL) == NULL && errno == EPERM);    /* main: no scheduler */
}

/* ------------------------------------------------------------------------ */
/* 2 million hand-offs between threads, through channels and mutexes       */
/* ------------------------------------------------------------------------ */

#define RING CO_MANY(2000)              /* cos, alternately on each thread */
#define TOKENS 64
#define LOCKS 8
static aco_rt_chan_t* ring[RING];
static aco_rt_chan_t* finished;
static aco_rt_mutex_t locks[LOCKS];
static long locked_count[LOCKS];
static long hops_per_token;

typedef struct { long id, hops; } token_t;

static void ring_co(void* arg) {
    long i = (long)(uintptr_t)arg;
    token_t t;
    while (aco_rt_chan_recv(ring[i], &t, -1) == 0) {
        aco_rt_mutex_t* m = &locks[(i + t.hops) % LOCKS];
        CHECK_EQ(aco_rt_mutex_lock(m, -1), 0);
        locked_count[(i + t.hops) % LOCKS]++;
        CHECK_EQ(aco_rt_mutex_unlock(m), 0);
        if (++t.hops == hops_per_token) CHECK_EQ(aco_rt_chan_send(finished, &t, -1), 0);
        else CHECK_EQ(aco_rt_chan_send(ring[(i + 1) % RING], &t, -1), 0);
    }
}

static void stress_main(void* arg) {
    (void)arg;
    aco_rt_co_t* cos[RING];
    for (long i = 0; i < RING; i++) cos[i] = aco_rt_spawn(T(i & 1), ring_co, (void*)(uintptr_t)i);
    for (long k = 0; k < TOKENS; k++) {
        token_t t = {k, 0};
        CHECK_EQ(aco_rt_chan_send(ring[(k * (RING / TOKENS)) % RING], &t, -1), 0);
    }
    unsigned char seen[TOKENS] = {0};
    for (int k = 0; k < TOKENS; k++) {
        token_t t;
        CHECK_EQ(aco_rt_chan_recv(finished, &t, -1), 0);
        CHECK(t.id >= 0 && t.id < TOKENS && !seen[t.id]);
        CHECK_EQ(t.hops, hops_per_token);
        seen[t.id] = 1;
    }
    for (int i = 0; i < RING; i++) aco_rt_chan_close(ring[i]);
    for (int i = 0; i < RING; i++) CHECK_EQ(aco_rt_join(cos[i], -1), 0);
}

static void test_stress(void) {
    long total = FEW ? 200000 : 2000000;
    hops_per_token = total / TOKENS;
    for (int i = 0; i < RING; i++) ring[i] = aco_rt_chan_new(sizeof(token_t), 1);
    finished = aco_rt_chan_new(sizeof(token_t), TOKENS);
    int64_t t0 = aco_rt_now();
    run_on(0, stress_main, NULL);
    long sum = 0;
    for (int i = 0; i < LOCKS; i++) sum += locked_count[i];
    CHECK_EQ(sum, hops_per_token * TOKENS);
    printf("stress: %ld hand-offs between %d cos on 2 threads in %.2f s\n",
           sum, RING, (double)(aco_rt_now() - t0) / 1e9);
    for (int i = 0; i < RING; i++) CHECK_EQ(aco_rt_chan_free(ring[i]), 0);
    CHECK_EQ(aco_rt_chan_free(finished), 0);
}

/* ------------------------------------------------------------------------ */
/* Stopping a busy pool; fork with a running pool                           */
/* ------------------------------------------------------------------------ */

/* (under valgrind, whose threads take turns, cos that only yield keep the
 * thread that would cancel them waiting: fewer of them) */
#define BUSY_N (SLOW ? 20 : 200)
static atomic_int stopped_ok;

static void spinner(void* arg) {
    (void)arg;
    while (aco_rt_yield() == 0) {}
    atomic_fetch_add(&stopped_ok, 1);
}

static void parked(void* arg) {
    (void)arg;
    long v;
    if (aco_rt_chan_recv(never, &v, -1) == -ECANCELED) atomic_fetch_add(&stopped_ok, 1);
}

static void test_cancel_busy(void) {
    never = aco_rt_chan_new(sizeof(long), 0);
    for (int i = 0; i < BUSY_N; i++) {
        aco_rt_co_t* c = aco_rt_pool_spawn(pool, i & 1 ? spinner : parked, NULL, NULL);
        CHECK(c != NULL);
        CHECK_EQ(aco_rt_detach(c), 0);
    }
    /* the spinners never end by themselves */
    CHECK_EQ(aco_rt_pool_wait(pool, ACO_RT_POOL_DRAIN, aco_rt_now() + 20 * MS), -ETIMEDOUT);
    CHECK_EQ(aco_rt_pool_wait(pool, ACO_RT_POOL_CANCEL, aco_rt_now() + 60000 * MS), 0);
    CHECK_EQ(atomic_load(&stopped_ok), BUSY_N);
    CHECK_EQ(aco_rt_chan_free(never), 0);
}

/* aco_rt_spawn on a sibling's scheduler from a co that then keeps
 * running: the new cos are ready at once there (they start while the
 * spawner still runs), and aco_rt_pool_wait's cancel reaches them.  Such
 * spawns once waited in an outbox until the spawner stopped running: none
 * of 10 started in 10 s, and the cancel missed all 10 (its wait timed
 * out). */
#define SIB_N 10
static atomic_int sib_started, sib_cancelled, sib_seen;
static void sib_sleeper(void* arg) {
    (void)arg;
    atomic_fetch_add(&sib_started, 1);
    if (aco_rt_sleep_until(-1) == -ECANCELED) atomic_fetch_add(&sib_cancelled, 1);
}
static void sib_spawner(void* arg) {
    (void)arg;
    aco_rt_sched_t* to = aco_rt_pool_sched(pool, 0);
    CHECK(to != aco_rt_sched_current());
    for (int i = 0; i < SIB_N; i++) CHECK_EQ(aco_rt_detach(aco_rt_spawn(to, sib_sleeper, NULL)), 0);
    int64_t end = aco_rt_now() + 10000 * MS;       /* running, never parking */
    while (atomic_load(&sib_started) < SIB_N && aco_rt_now() < end) {}
    atomic_store(&sib_seen, atomic_load(&sib_started) + 1);
}
static void test_spawn_sibling_at_once(void) {
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(aco_rt_pool_sched(pool, 1), sib_spawner, NULL)), 0);
    while (atomic_load(&sib_seen) == 0) sched_yield();     /* (the spawner is done) */
    CHECK_EQ(atomic_load(&sib_seen), SIB_N + 1);
    CHECK_EQ(aco_rt_pool_wait(pool, ACO_RT_POOL_CANCEL, aco_rt_now() + 20000 * MS), 0);
    CHECK_EQ(atomic_load(&sib_cancelled), SIB_N);
}

static void child_co(void* arg) {
    int* ok = arg;
    aco_rt_chan_t* ch = aco_rt_chan_new(sizeof(int), 1);
    int v = 42, w = 0;
    CHECK_EQ(aco_rt_sleep(MS), 0);
    CHECK_EQ(aco_rt_chan_send(ch, &v, -1), 0);
    CHECK_EQ(aco_rt_chan_recv(ch, &w, -1), 0);
    *ok = w == 42;
    aco_rt_chan_free(ch);
}

static void stuck_co(void* arg) {
    aco_rt_sem_t* never = arg;
    CHECK_EQ(aco_rt_sem_wait(never, -1), -ECANCELED);
}

static void fork_child(void* arg) {
    (void)arg;
    /* Only this thread exists here: the pool's are gone.  A scheduler of
     * its own works, and is the only one: the parent's do not count for
     * -EDEADLK (they do not cross a fork). */
    alarm(60);                  /* a hang dies of SIGALRM: the case fails */
    aco_rt_sched_t* s = aco_rt_sched_new(NULL);
    CHECK(s != NULL);
    int ok = 0;
    aco_rt_co_t* c = aco_rt_spawn(s, child_co, &ok);
    CHECK(c != NULL);
    CHECK_EQ(aco_rt_detach(c), 0);
    CHECK_EQ(aco_rt_sched_run(s), 0);
    aco_rt_sem_t never;
    aco_rt_sem_init(&never, 0);
    c = aco_rt_spawn(s, stuck_co, &never);
    CHECK(c != NULL);
    CHECK_EQ(aco_rt_sched_run(s), -EDEADLK);
    CHECK_EQ(aco_rt_cancel(c), 0);
    CHECK_EQ(aco_rt_detach(c), 0);
    CHECK_EQ(aco_rt_sched_run(s), 0);
    aco_rt_sched_free(s);
    _exit(ok ? 0 : 3);
}

/* The thread that forks has a scheduler: in the child it has none (the
 * parent's does not cross), and makes one of its own that works. */
static void fork_had_one(void* arg) {
    (void)arg;
    alarm(60);
    CHECK(aco_rt_sched_current() == NULL);
    fork_child(NULL);
}

/* A fork inside a co: the child is still in that co (its main co is the
 * parent's loop).  There no scheduler can be made (EPERM, never libaco's
 * abort) nor the runtime's calls made (-EPERM: no scheduler); another
 * thread of the child makes one that works. */
static void* fork_child_thread(void* arg) {
    fork_child(arg);            /* (its _exit ends the child, status and all) */
    return NULL;
}
static void fork_in_co_child(void* arg) {
    (void)arg;
    alarm(60);
    CHECK(aco_rt_sched_current() == NULL);
    errno = 0;
    CHECK(aco_rt_sched_new(NULL) == NULL);
    CHECK_EQ(errno, EPERM);
    CHECK_EQ(aco_rt_sleep(MS), -EPERM);
    CHECK_EQ(aco_rt_yield(), -EPERM);
    if (TEST_TSAN) _exit(0);         /* TSan starts no thread after such a fork */
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, fork_child_thread, NULL), 0);
    pthread_join(t, NULL);
    _exit(4);                   /* (not reached: the thread's _exit) */
}
static void fork_in_co(void* arg) {
    int st = -1;
    CHECK_EQ(test_in_child(fork_in_co_child, NULL, &st), 0);
    CHECK_EQ(st, 0);
    ++*(int*)arg;
}

static void free_from_inside(void* arg) {
    /* "outside the pool's threads": from one of them, -EDEADLK, nothing
     * done (its threads would wait for this one for good) */
    CHECK_EQ(aco_rt_pool_free((aco_rt_pool_t*)arg), -EDEADLK);
}

static void test_fork(void) {
    aco_rt_sched_t* mine = aco_rt_sched_new(NULL);
    CHECK(mine != NULL);
    for (int i = 0; i < 3; i++) {
        int st = -1;
        CHECK_EQ(test_in_child(fork_had_one, NULL, &st), 0);
        CHECK_EQ(st, 0);
    }
    int forked = 0;
    aco_rt_co_t* fc = aco_rt_spawn(mine, fork_in_co, &forked);
    CHECK(fc != NULL);
    CHECK_EQ(aco_rt_detach(fc), 0);
    CHECK_EQ(aco_rt_sched_run(mine), 0);
    CHECK_EQ(forked, 1);
    aco_rt_sched_free(mine);
    aco_rt_co_t* fi = aco_rt_pool_spawn(pool, free_from_inside, pool, NULL);
    CHECK(fi != NULL);
    CHECK_EQ(aco_rt_detach(fi), 0);
    CHECK_EQ(aco_rt_pool_wait(pool, ACO_RT_POOL_DRAIN, aco_rt_now() + 60000 * MS), 0);
    pp_t p = {aco_rt_chan_new(sizeof(long), 0), aco_rt_chan_new(sizeof(long), 0),
              SLOW ? 3000 : 200000};
    aco_rt_co_t* c = aco_rt_spawn(T(0), ping_fn, &p);
    CHECK_EQ(aco_rt_detach(c), 0);
    for (int i = 0; i < 20; i++) {          /* forks while the pool runs */
        int st = -1;
        CHECK_EQ(test_in_child(fork_child, NULL, &st), 0);
        CHECK_EQ(st, 0);
    }
    CHECK_EQ(aco_rt_pool_wait(pool, ACO_RT_POOL_DRAIN, aco_rt_now() + 60000 * MS), 0);
    aco_rt_chan_free(p.ping);
    aco_rt_chan_free(p.pong);
}

/* Freeing a pool whose cos are still parked destroys them. */
static void test_free_busy(void) {
    aco_rt_pool_t* p = new_pool(2);
    aco_rt_chan_t* ch = aco_rt_chan_new(sizeof(long), 0);
    never = ch;
    for (int i = 0; i < 100; i++) CHECK(aco_rt_pool_spawn(p, parked, NULL, NULL) != NULL);
    CHECK_EQ(aco_rt_pool_wait(p, ACO_RT_POOL_DRAIN, aco_rt_now() + 10 * MS), -ETIMEDOUT);
    aco_rt_pool_free(p);
    CHECK_EQ(aco_rt_chan_free(ch), 0);      /* its waiters left with their cos */
}

/* A pool freed at once, its threads maybe not yet in their loops (their
 * stop must not be lost: it hung once in 20 runs), or after one co. */
/* A thread's scheduler freed as soon as its join of a pool co returned:
 * the finishing co's wake may still be in the pool thread's send to it
 * (ThreadSanitizer saw that send read the freed scheduler; the free now
 * waits for sends under way). */
static atomic_int leaves;
static void leaf(void* arg) { (void)arg; atomic_fetch_add(&leaves, 1); }
static void joiner(void* arg) {
    (void)arg;
    aco_rt_co_t* c = aco_rt_spawn(T(0), leaf, NULL);
    CHECK(c != NULL);
    CHECK_EQ(aco_rt_join(c, -1), 0);
}
static void* joiner_thread(void* arg) {
    (void)arg;
    aco_rt_opts_t o = {0};
    const char* b = getenv("ACO_RT_TEST_BACKENDS");
    if (b && strstr(b, "uring") == NULL) o.backend = ACO_RT_BACKEND_EPOLL;
    aco_rt_sched_t* s = aco_rt_sched_new(&o);
    CHECK(s != NULL);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, joiner, NULL)), 0);
    CHECK_EQ(aco_rt_sched_run(s), 0);
    aco_rt_sched_free(s);
    return NULL;
}
static void test_free_after_join(void) {
    int rounds = SLOW ? 100 : 1000;
    for (int i = 0; i < rounds; i++) {
        pthread_t t;
        CHECK_EQ(pthread_create(&t, NULL, joiner_thread, NULL), 0);
        CHECK_EQ(pthread_join(t, NULL), 0);
    }
    CHECK_EQ(atomic_load(&leaves), rounds);
}

static atomic_int quick_ran;
static void quick(void* arg) { (void)arg; atomic_fetch_add(&quick_ran, 1); }

static void test_free_at_once(void) {
    int rounds = SLOW ? 20 : 200;
    for (int i = 0; i < rounds; i++) {
        aco_rt_pool_t* p = new_pool(2);
        if (i & 1) {
            CHECK_EQ(aco_rt_detach(aco_rt_pool_spawn(p, quick, NULL, NULL)), 0);
            CHECK_EQ(aco_rt_pool_wait(p, ACO_RT_POOL_DRAIN, aco_rt_now() + 10000 * MS), 0);
        }
        aco_rt_pool_free(p);
    }
    CHECK_EQ(atomic_load(&quick_ran), rounds / 2);
}

/* aco_rt_sched_free of a co whose select a send completed, before it ran
 * again: its other case stayed on the other channel's queue (in freed
 * memory: aco_rt_chan_free said -EBUSY for good, and the next send there
 * took the freed waiter: ASan's heap-use-after-free, SIGSEGV without). */
static aco_rt_chan_t *sf_ch1, *sf_ch2;
static aco_rt_sched_t* sf_s;
static void sf_selector(void* arg) {
    (void)arg;
    long e1, e2;
    aco_rt_case_t cs[2] = {{sf_ch1, ACO_RT_RECV, &e1}, {sf_ch2, ACO_RT_RECV, &e2}};
    aco_rt_chan_select(cs, 2, NULL, -1);
}
static void sf_sender(void* arg) {
    (void)arg;
    long e = 1;
    aco_rt_yield();                         /* the selector waits on both */
    CHECK_EQ(aco_rt_chan_send(sf_ch1, &e, 0), 0);
    aco_rt_sched_stop(sf_s);                /* the run ends before it runs */
    aco_rt_sleep(1000 * MS);
}
static int sf_late = 1;
static void sf_late_sender(void* arg) {
    (void)arg;
    long e = 2;
    sf_late = aco_rt_chan_send(sf_ch2, &e, 0);
}
static void* sf_select_thread(void* arg) {
    (void)arg;
    sf_ch1 = aco_rt_chan_new(sizeof(long), 0);
    sf_ch2 = aco_rt_chan_new(sizeof(long), 0);
    sf_s = aco_rt_sched_new(NULL);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(sf_s, sf_selector, NULL)), 0);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(sf_s, sf_sender, NULL)), 0);
    CHECK_EQ(aco_rt_sched_run(sf_s), 0);
    aco_rt_sched_free(sf_s);
    run_alone(sf_late_sender, NULL);
    CHECK_EQ(sf_late, -ETIMEDOUT);          /* nobody waits on ch2 */
    CHECK_EQ(aco_rt_chan_free(sf_ch2), 0);
    CHECK_EQ(aco_rt_chan_free(sf_ch1), 0);
    return NULL;
}

/* aco_rt_sched_free on one thread while cos of another hand elements to
 * its parked receivers: a sender that took a receiver off the channel
 * before the free did was still waking it when its record went (ASan: a
 * write to the freed record in the send to its inbox; "corrupted
 * double-linked list" without).  The free now waits for such wakes. */
#define SFX_CH 4
static aco_rt_chan_t* sfx_ch[SFX_CH];
static atomic_int sfx_done;
static aco_rt_sched_t* sfx_s;
static void sfx_receiver(void* arg) {
    long e;
    for (;;) aco_rt_chan_recv(arg, &e, -1);
}
static void sfx_stopper(void* arg) {
    (void)arg;
    aco_rt_sleep(200 * 1000);
    aco_rt_sched_stop(sfx_s);
}
static void* sfx_free_thread(void* arg) {
    int rounds = (int)(intptr_t)arg;
    for (int r = 0; r < rounds; r++) {
        sfx_s = aco_rt_sched_new(NULL);
        CHECK(sfx_s != NULL);
        for (int i = 0; i < 16; i++)
            CHECK_EQ(aco_rt_detach(aco_rt_spawn(sfx_s, sfx_receiver, sfx_ch[i % SFX_CH])), 0);
        CHECK_EQ(aco_rt_detach(aco_rt_spawn(sfx_s, sfx_stopper, NULL)), 0);
        CHECK_EQ(aco_rt_sched_run(sfx_s), 0);
        aco_rt_sched_free(sfx_s);
    }
    atomic_store(&sfx_done, 1);
    return NULL;
}
static void sfx_sender(void* arg) {
    long e = 7;
    while (!atomic_load(&sfx_done)) {
        int r = aco_rt_chan_send(arg, &e, aco_rt_now() + 5000);
        CHECK(r == 0 || r == -ETIMEDOUT);
    }
}
static void* sfx_send_thread(void* arg) {
    (void)arg;
    aco_rt_sched_t* s = aco_rt_sched_new(NULL);
    for (int i = 0; i < 4; i++) CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, sfx_sender, sfx_ch[i])), 0);
    CHECK_EQ(aco_rt_sched_run(s), 0);
    aco_rt_sched_free(s);
    return NULL;
}

/* A co parked as a channel's first receiver, handed an element by a co of
 * another thread while its scheduler did not run; that thread then frees
 * the channel (its call has returned, so it may), and the scheduler is
 * freed: it must not take the co's wait off the freed channel (ASan would
 * see chan_forget read and write freed memory).  The free lets the wakes
 * that came in first (the co is ready then, its wait over), and refuses
 * such takes once it began (rt_hold_try): this is the order in which it
 * cannot race; a take while the free runs is what the refusal is for. */
static aco_rt_chan_t* fd_ch;
static aco_rt_sched_t* fd_s;
static void fd_receiver(void* arg) {
    (void)arg;
    long e;
    aco_rt_chan_recv(fd_ch, &e, -1);
}
static void fd_stopper(void* arg) {
    (void)arg;
    aco_rt_yield();                         /* the receiver waits */
    aco_rt_sched_stop(fd_s);
}
static void fd_sender(void* arg) {
    (void)arg;
    long e = 3;
    CHECK_EQ(aco_rt_chan_send(fd_ch, &e, 0), 0);
    CHECK_EQ(aco_rt_chan_free(fd_ch), 0);
}
static void* fd_send_thread(void* arg) {
    run_alone(fd_sender, arg);
    return NULL;
}
static void* fd_thread(void* arg) {
    (void)arg;
    fd_ch = aco_rt_chan_new(sizeof(long), 0);
    fd_s = aco_rt_sched_new(NULL);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(fd_s, fd_receiver, NULL)), 0);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(fd_s, fd_stopper, NULL)), 0);
    CHECK_EQ(aco_rt_sched_run(fd_s), 0);
    pthread_t b;
    CHECK_EQ(pthread_create(&b, NULL, fd_send_thread, NULL), 0);
    CHECK_EQ(pthread_join(b, NULL), 0);
    aco_rt_sched_free(fd_s);
    return NULL;
}

static void test_free_while_woken(void) {
    pthread_t a, b;
    CHECK_EQ(pthread_create(&a, NULL, sf_select_thread, NULL), 0);
    CHECK_EQ(pthread_join(a, NULL), 0);
    CHECK_EQ(pthread_create(&a, NULL, fd_thread, NULL), 0);
    CHECK_EQ(pthread_join(a, NULL), 0);
    for (int k = 0; k < SFX_CH; k++) sfx_ch[k] = aco_rt_chan_new(sizeof(long), 0);
    CHECK_EQ(pthread_create(&b, NULL, sfx_send_thread, NULL), 0);
    CHECK_EQ(pthread_create(&a, NULL, sfx_free_thread, (void*)(intptr_t)(SLOW ? 30 : 300)), 0);
    CHECK_EQ(pthread_join(a, NULL), 0);
    CHECK_EQ(pthread_join(b, NULL), 0);
    for (int k = 0; k < SFX_CH; k++) CHECK_EQ(aco_rt_chan_free(sfx_ch[k]), 0);
}

/* A group whose scheduler is freed with its members parked: they leave it
 * as ended members do.  A co of another thread waiting in its join returns
 * 0 at once (it waited to its deadline, the size stayed 3 and group_free
 * said -EBUSY for good). */
static aco_rt_group_t* gf_g;
static int gf_join_rc = 1, gf_joining;
static int64_t gf_join_ns;
static void gf_member(void* arg) {
    (void)arg;
    aco_rt_sleep_until(-1);
}
static void gf_stopper(void* arg) {
    for (int i = 0; i < 5000 && !__atomic_load_n(&gf_joining, __ATOMIC_SEQ_CST); i++)
        aco_rt_sleep(MS);
    aco_rt_sleep(10 * MS);                  /* the join waits by now */
    aco_rt_sched_stop(arg);
}
static void gf_joiner(void* arg) {
    (void)arg;
    int64_t t0 = aco_rt_now();
    __atomic_store_n(&gf_joining, 1, __ATOMIC_SEQ_CST);
    __atomic_store_n(&gf_join_rc, aco_rt_group_join(gf_g, aco_rt_in_ms(20000)), __ATOMIC_SEQ_CST);
    gf_join_ns = aco_rt_now() - t0;
}
static void* gf_join_thread(void* arg) {
    run_alone(gf_joiner, arg);
    return NULL;
}
static void* gf_thread(void* arg) {
    (void)arg;
    aco_rt_sched_t* s = aco_rt_sched_new(NULL);
    gf_g = aco_rt_group_new(s);
    CHECK(gf_g != NULL);
    for (int i = 0; i < 3; i++) CHECK_EQ(aco_rt_group_spawn(gf_g, gf_member, NULL, NULL), 0);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, gf_stopper, s)), 0);
    pthread_t j;
    CHECK_EQ(pthread_create(&j, NULL, gf_join_thread, NULL), 0);
    CHECK_EQ(aco_rt_sched_run(s), 0);       /* stopped: the members parked */
    CHECK_EQ(aco_rt_group_size(gf_g), 3);
    aco_rt_sched_free(s);
    CHECK_EQ(aco_rt_group_size(gf_g), 0);
    CHECK_EQ(pthread_join(j, NULL), 0);
    CHECK_EQ(gf_join_rc, 0);
    CHECK_LT(gf_join_ns, 10000 * MS);
    CHECK_EQ(aco_rt_group_free(gf_g), 0);
    return NULL;
}

/* group_cancel from another thread while the groups' scheduler is freed:
 * its cancels must not go into the freeing scheduler's inbox past its
 * drain (ASan saw one written through a member's freed record).  A
 * stress: the cancels race the free, 40 rounds. */
static aco_rt_group_t* gc_g[2];
static int gc_go, gc_freed;
static void gc_canceller(void* arg) {
    (void)arg;
    while (!__atomic_load_n(&gc_go, __ATOMIC_SEQ_CST)) {}
    for (int k = 1; k >= 0; k--) {
        int r = aco_rt_group_cancel(gc_g[k], 0);
        CHECK(r == 0 || r == -ETIMEDOUT);
    }
    while (!__atomic_load_n(&gc_freed, __ATOMIC_SEQ_CST)) aco_rt_sleep(MS);
}
static void* gc_cancel_thread(void* arg) {
    run_alone(gc_canceller, arg);
    return NULL;
}
static void* gc_thread(void* arg) {
    (void)arg;
    for (int round = 0; round < 40; round++) {
        aco_rt_sched_t* s = aco_rt_sched_new(NULL);
        for (int k = 0; k < 2; k++) {
            gc_g[k] = aco_rt_group_new(s);
            CHECK(gc_g[k] != NULL);
            for (int i = 0; i < 8; i++) CHECK_EQ(aco_rt_group_spawn(gc_g[k], gf_member, NULL, NULL), 0);
        }
        CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, gf_stopper, s)), 0);
        gf_joining = 1;                     /* (the stopper waits for none) */
        gc_go = gc_freed = 0;
        pthread_t c;
        CHECK_EQ(pthread_create(&c, NULL, gc_cancel_thread, NULL), 0);
        CHECK_EQ(aco_rt_sched_run(s), 0);
        __atomic_store_n(&gc_go, 1, __ATOMIC_SEQ_CST);
        for (volatile int i = 0; i < round * 40; i++) {}
        aco_rt_sched_free(s);
        __atomic_store_n(&gc_freed, 1, __ATOMIC_SEQ_CST);
        CHECK_EQ(pthread_join(c, NULL), 0);
        for (int k = 0; k < 2; k++) {
            CHECK_EQ(aco_rt_group_size(gc_g[k]), 0);
            CHECK_EQ(aco_rt_group_free(gc_g[k]), 0);
        }
    }
    return NULL;
}

static void test_free_group(void) {
    pthread_t a;
    CHECK_EQ(pthread_create(&a, NULL, gf_thread, NULL), 0);
    CHECK_EQ(pthread_join(a, NULL), 0);
    CHECK_EQ(pthread_create(&a, NULL, gc_thread, NULL), 0);
    CHECK_EQ(pthread_join(a, NULL), 0);
}

/* aco_rt_pool_spawn from a timer callback on a pool thread (outside any
 * co): the new co counts for aco_rt_pool_wait at once, and a pool freed
 * before it started frees it.  It waited unpublished on its thread until
 * the loop came round: a wait returned 0 while the callback still ran,
 * the co not yet run, and a free whose stop ended that run leaked its
 * record (ASan, valgrind). */
static aco_rt_pool_t* ts_pool;
static aco_rt_timer_t ts_timer;
static atomic_int ts_spawned, ts_ran;
static void ts_child(void* arg) { (void)arg; atomic_store(&ts_ran, 1); }
static void ts_fire(aco_rt_timer_t* t) {
    (void)t;
    aco_rt_co_t* c = aco_rt_pool_spawn(ts_pool, ts_child, NULL, NULL);
    CHECK(c != NULL);
    CHECK_EQ(aco_rt_detach(c), 0);
    atomic_store(&ts_spawned, 1);
    /* a callback that computes a while: main's wait or free begins */
    int64_t end = aco_rt_now() + 50 * MS;
    while (aco_rt_now() < end) {}
}
static void ts_arm(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_timer_start(&ts_timer, aco_rt_now() + MS, ts_fire), 0);
}
static void test_spawn_from_timer(void) {
    for (unsigned threads = 2; threads >= 1; threads--) {
        ts_pool = new_pool(threads);
        atomic_store(&ts_spawned, 0);
        atomic_store(&ts_ran, 0);
        CHECK_EQ(aco_rt_detach(aco_rt_pool_spawn(ts_pool, ts_arm, NULL, NULL)), 0);
        while (!atomic_load(&ts_spawned)) sched_yield();
        if (threads == 2) {
            CHECK_EQ(aco_rt_pool_wait(ts_pool, ACO_RT_POOL_DRAIN, aco_rt_now() + 10000 * MS), 0);
            int ran = atomic_load(&ts_ran);
            CHECK_EQ(ran, 1);
        }
        aco_rt_pool_free(ts_pool);
    }
}

/* aco_rt_pool_free, groups on thread 1 with a joiner each on thread 0:
 * both threads free their schedulers at once, and thread 1's, destroying
 * a member, wakes that group's joiner (the group empties) while thread 0
 * destroys its cos.  The wake held nothing between siblings, so thread 0
 * could free the joiner's record under it (ASan: a use after free in
 * group_leave; TSan: races with the record's free).  The window is a few
 * instructions: this runs the path, its timing swept round by round (a
 * number of program timers that thread 0's free disarms first), for the
 * sanitizers to watch; it failed only with the window widened by hand. */
#define FG_GROUPS 32
static aco_rt_group_t* fg_g[FG_GROUPS];
static aco_rt_timer_t* fg_tm;
static int fg_ntm;
static atomic_int fg_parked;
static void fg_never(aco_rt_timer_t* t) { (void)t; }
static void fg_member(void* arg) { (void)arg; aco_rt_sleep_until(-1); }
static void fg_joiner(void* arg) {
    if (arg == fg_g[FG_GROUPS - 1])
        for (int i = 0; i < fg_ntm; i++) aco_rt_timer_start(&fg_tm[i], INT64_MAX - i, fg_never);
    atomic_fetch_add(&fg_parked, 1);
    aco_rt_group_join(arg, -1);
}
static void test_free_group_joined(void) {
    int rounds = SLOW ? 40 : 300, maxt = 2000;
    fg_tm = calloc((size_t)maxt, sizeof(*fg_tm));
    CHECK(fg_tm != NULL);
    unsigned seed = 1;
    for (int r = 0; r < rounds; r++) {
        aco_rt_pool_t* p = new_pool(2);
        fg_ntm = (int)(rand_r(&seed) % (unsigned)maxt);
        atomic_store(&fg_parked, 0);
        for (int k = 0; k < FG_GROUPS; k++) {
            fg_g[k] = aco_rt_group_new(aco_rt_pool_sched(p, 1));
            CHECK(fg_g[k] != NULL);
            CHECK_EQ(aco_rt_group_spawn(fg_g[k], fg_member, NULL, NULL), 0);
        }
        /* (in the order in which thread 1's free destroys the members,
         * the last first: thread 0's free looks at the joiners in the
         * order they came, and may follow thread 1's wakes closely) */
        for (int k = FG_GROUPS - 1; k >= 0; k--)
            CHECK_EQ(aco_rt_detach(aco_rt_spawn(aco_rt_pool_sched(p, 0), fg_joiner, fg_g[k])), 0);
        while (atomic_load(&fg_parked) < FG_GROUPS) sched_yield();
        aco_rt_pool_free(p);
        for (int k = 0; k < FG_GROUPS; k++) CHECK_EQ(aco_rt_group_free(fg_g[k]), 0);
    }
    free(fg_tm);
}

/* Each part, with how long it took (to stdout). */
#define PART(fn)                                                              \
    do {                                                                      \
        int64_t t0_ = aco_rt_now();                                           \
        fn();                                                                 \
        printf("%-26s %8.3f s\n", #fn, (double)(aco_rt_now() - t0_) / 1e9);  \
        fflush(stdout);                                                       \
    } while (0)

int main(void) {
    test_watchdog();
    pool = new_pool(2);
    PART(test_spawn_from_outside);
    PART(test_steal);
    PART(test_steal_deep);
    PART(test_wait_hops);
    PART(test_channels);
    PART(test_exactly_once);
    PART(test_sync);
    PART(test_join_cancel);
    PART(test_groups);
    PART(test_stress);
    PART(test_cancel_busy);
    PART(test_spawn_sibling_at_once);
    PART(test_fork);
    PART(test_free_after_join);
    CHECK_EQ(aco_rt_pool_free(pool), 0);
    PART(test_free_busy);
    PART(test_free_at_once);
    PART(test_free_while_woken);
    PART(test_free_group);
    PART(test_spawn_from_timer);
    PART(test_free_group_joined);
    printf("test_pool: all passed\n");
    return 0;
}
