/* test_timer: aco_rt_timer_start/stop.
 *
 *  - 100k timers with random deadlines from now to 100 ms and from 1 h to
 *    10 h, a quarter stopped at random (at once, or later from other
 *    timers' callbacks): every near timer not stopped fires exactly once,
 *    never before its deadline, in deadline order (the 2^14 ns ticks of the
 *    fired timers' deadlines never go down); no stopped or far timer fires;
 *    stop says 1 exactly for the armed ones; the armed count in
 *    aco_rt_stats follows.
 *  - callbacks that start and stop timers: a chain of timers each starting
 *    the next, a timer restarting itself, two timers due at the same tick
 *    each stopping the other (exactly one fires).
 *  - -EINVAL: start of an armed timer, a timer on a co's share stack (by
 *    that co, by a co of another share stack, by a timer callback), NULL;
 *    -EPERM without a scheduler.
 *  - far deadlines (1 year, 100 years, 200 years, INT64_MAX) never fire,
 *    stay stoppable, and leave the wheel working for near timers.
 *  - callbacks that cancel a co and post a semaphore whose waiters' deadlines
 *    fall in the same tick: each co gets one result, nothing lost;
 *  - timers still armed when their scheduler is freed are not armed after:
 *    stop says 0, a new scheduler starts them (run last);
 *  - a deadline in the past (0, a second ago) fires in the next round,
 *    before a later near deadline; timers fire while cos keep yielding.
 */
#include "rt_test.h"
#include "../../aco.h"

#include <stdint.h>

#define TICK_NS (1LL << 14)
static int64_t tick_ceil(int64_t ns) { return ns <= 0 ? 0 : (ns + TICK_NS - 1) / TICK_NS; }

/* ------------------------------------------------------------------------ */
/* Random timers                                                            */
/* ------------------------------------------------------------------------ */

#define NT 100000

typedef struct {
    aco_rt_timer_t t;
    int64_t deadline;
    int near;
    int stopped;        /* stop said 1 */
    int fired;
    int victim;         /* index of a timer this one's callback stops, -1 */
} rtimer_t;

static rtimer_t* T;
static int* order;          /* indices, in firing order */
static int nfired;
static int near_expected;   /* near timers that must fire */
static int near_done;       /* fired + stopped near timers */
static int stops_in_cb;

static void rfire(aco_rt_timer_t* t) {
    rtimer_t* r = (rtimer_t*)t;     /* t is the first field */
    int64_t now = aco_rt_now();
    CHECK_GE(now, r->deadline);                 /* never early */
    CHECK_EQ(r->fired, 0);                      /* exactly once */
    CHECK_EQ(r->stopped, 0);
    CHECK(r->near);
    r->fired = 1;
    order[nfired++] = (int)(r - T);
    near_done++;
    if (r->victim >= 0) {
        rtimer_t* v = &T[r->victim];
        int was_armed = !v->fired && !v->stopped;
        int st = aco_rt_timer_stop(&v->t);
        CHECK_EQ(st, was_armed);
        if (st) {
            v->stopped = 1;
            if (v->near) near_done++;
            stops_in_cb++;
        }
    }
}

static void random_timers(void* arg) {
    (void)arg;
    uint64_t rng = 0x9e3779b97f4a7c15ULL ^ (uint64_t)test_backend_id;
    aco_rt_stats_t st0, st;
    aco_rt_stats(NULL, &st0);
    int64_t now = aco_rt_now();
    nfired = near_done = stops_in_cb = 0;
    int nnear = 0;
    for (int i = 0; i < NT; i++) {
        rtimer_t* r = &T[i];
        memset(r, 0, sizeof(*r));
        r->victim = -1;
        uint64_t x = test_rand(&rng);
        if (x % 4 != 0) {       /* near: now .. now + 100 ms */
            r->near = 1;
            r->deadline = now + (int64_t)(test_rand(&rng) % (100 * MS));
            nnear++;
        } else {                /* far: 1 h .. 10 h */
            r->deadline = now + 3600LL * 1000 * MS +
                          (int64_t)(test_rand(&rng) % (9 * 3600ULL * 1000 * MS));
        }
        CHECK_EQ(aco_rt_timer_start(&r->t, r->deadline, rfire), 0);
    }
    aco_rt_stats(NULL, &st);
    CHECK_EQ(st.timers, st0.timers + NT);
    /* a tenth of the callbacks stop another timer, at random */
    for (int i = 0; i < NT / 10; i++) {
        int a = (int)(test_rand(&rng) % NT), b = (int)(test_rand(&rng) % NT);
        if (a != b) T[a].victim = b;
    }
    /* stop a sixth now */
    int stopped_now = 0;
    for (int i = 0; i < NT / 6; i++) {
        rtimer_t* r = &T[test_rand(&rng) % NT];
        int st1 = aco_rt_timer_stop(&r->t);
        CHECK_EQ(st1, !r->stopped);
        if (st1) {
            r->stopped = 1;
            stopped_now++;
            if (r->near) near_done++;
        }
        CHECK_EQ(aco_rt_timer_stop(&r->t), 0);   /* stopping again: 0 */
    }
    aco_rt_stats(NULL, &st);
    CHECK_EQ(st.timers, st0.timers + NT - stopped_now);
    near_expected = nnear;
    int64_t limit = aco_rt_now() + 20000 * MS;
    while (near_done < near_expected) {
        CHECK_EQ(aco_rt_sleep(MS), 0);
        CHECK_LT(aco_rt_now(), limit);          /* the near ones fire */
    }
    /* every near timer fired or was stopped; order by deadline tick */
    for (int i = 1; i < nfired; i++) {
        int64_t a = tick_ceil(T[order[i - 1]].deadline), b = tick_ceil(T[order[i]].deadline);
        if (b < a)
            TEST_FAIL_AT(__FILE__, __LINE__, "timer %d (deadline tick %lld) fired after "
                         "timer %d (deadline tick %lld)", order[i], (long long)b,
                         order[i - 1], (long long)a);
    }
    int far_armed = 0, fired_count = 0;
    for (int i = 0; i < NT; i++) {
        rtimer_t* r = &T[i];
        if (r->near) CHECK_EQ(r->fired + r->stopped, 1);
        else CHECK_EQ(r->fired, 0);
        fired_count += r->fired;
        if (!r->near && !r->stopped) far_armed++;
    }
    CHECK_EQ(fired_count, nfired);
    aco_rt_stats(NULL, &st);
    CHECK_EQ(st.timers, st0.timers + far_armed);
    /* the far ones are still armed: stop says 1 once */
    for (int i = 0; i < NT; i++) {
        rtimer_t* r = &T[i];
        CHECK_EQ(aco_rt_timer_stop(&r->t), !r->near && !r->stopped);
        CHECK_EQ(aco_rt_timer_stop(&r->t), 0);
    }
    aco_rt_stats(NULL, &st);
    CHECK_EQ(st.timers, st0.timers);
    CHECK_GT(stops_in_cb, 0);       /* callbacks did stop armed timers */
}

/* ------------------------------------------------------------------------ */
/* Callbacks that start and stop timers                                     */
/* ------------------------------------------------------------------------ */

#define CHAIN 500
static aco_rt_timer_t chain_t[2];
static int chain_n;
static int64_t chain_deadline;
static uint64_t chain_rng;

static void chain_fire(aco_rt_timer_t* t) {
    CHECK_GE(aco_rt_now(), chain_deadline);
    chain_n++;
    if (chain_n == CHAIN) return;
    /* start the other one (this one is no longer armed: restart works too) */
    aco_rt_timer_t* next = &chain_t[chain_n & 1];
    (void)t;
    CHECK_EQ(aco_rt_timer_stop(next), 0);
    chain_deadline = aco_rt_now() + (int64_t)(test_rand(&chain_rng) % (200 * 1000));
    CHECK_EQ(aco_rt_timer_start(next, chain_deadline, chain_fire), 0);
    /* starting it again while armed: -EINVAL */
    CHECK_EQ(aco_rt_timer_start(next, chain_deadline, chain_fire), -EINVAL);
}

static aco_rt_timer_t pair_t[2];
static int pair_fired[2];
static void pair_fire(aco_rt_timer_t* t) {
    int me = (int)(t - pair_t);
    pair_fired[me]++;
    CHECK_EQ(aco_rt_timer_stop(&pair_t[1 - me]), 1);    /* same tick: still armed */
}

static aco_rt_timer_t self_t;
static int self_n;
static int64_t self_deadline;
static void self_fire(aco_rt_timer_t* t) {
    CHECK_GE(aco_rt_now(), self_deadline);
    if (++self_n < 50) {
        self_deadline = aco_rt_now() + 100 * 1000;
        CHECK_EQ(aco_rt_timer_start(t, self_deadline, self_fire), 0);
    }
}

static void callbacks(void* arg) {
    (void)arg;
    chain_rng = 12345;
    chain_n = 0;
    memset(chain_t, 0, sizeof(chain_t));
    chain_deadline = aco_rt_now() + 100 * 1000;
    CHECK_EQ(aco_rt_timer_start(&chain_t[0], chain_deadline, chain_fire), 0);

    memset(pair_t, 0, sizeof(pair_t));
    pair_fired[0] = pair_fired[1] = 0;
    int64_t d = aco_rt_now() + 2 * MS;
    CHECK_EQ(aco_rt_timer_start(&pair_t[0], d, pair_fire), 0);
    CHECK_EQ(aco_rt_timer_start(&pair_t[1], d, pair_fire), 0);

    memset(&self_t, 0, sizeof(self_t));
    self_n = 0;
    self_deadline = aco_rt_now() + 100 * 1000;
    CHECK_EQ(aco_rt_timer_start(&self_t, self_deadline, self_fire), 0);

    int64_t limit = aco_rt_now() + 20000 * MS;
    while (chain_n < CHAIN || self_n < 50 || pair_fired[0] + pair_fired[1] == 0) {
        CHECK_EQ(aco_rt_sleep(MS / 2), 0);
        CHECK_LT(aco_rt_now(), limit);
    }
    CHECK_EQ(chain_n, CHAIN);
    CHECK_EQ(pair_fired[0] + pair_fired[1], 1);
    CHECK_EQ(aco_rt_timer_stop(&pair_t[0]), 0);
    CHECK_EQ(aco_rt_timer_stop(&pair_t[1]), 0);
    CHECK_EQ(aco_rt_timer_stop(&chain_t[0]), 0);
    CHECK_EQ(aco_rt_timer_stop(&chain_t[1]), 0);
    CHECK_EQ(aco_rt_timer_stop(&self_t), 0);
}

/* ------------------------------------------------------------------------ */
/* Misuse                                                                   */
/* ------------------------------------------------------------------------ */

static int nop_fired;
static void nop_fire(aco_rt_timer_t* t) { (void)t; nop_fired++; }

static void misuse(void* arg) {
    (void)arg;
    static aco_rt_timer_t t;
    memset(&t, 0, sizeof(t));
    CHECK_EQ(aco_rt_timer_stop(&t), 0);                 /* never started */
    CHECK_EQ(aco_rt_timer_start(&t, aco_rt_now() + 3600000 * MS, nop_fire), 0);
    CHECK_EQ(aco_rt_timer_start(&t, aco_rt_now() + MS, nop_fire), -EINVAL);  /* armed */
    CHECK_EQ(aco_rt_timer_stop(&t), 1);
    CHECK_EQ(aco_rt_timer_start(NULL, 0, nop_fire), -EINVAL);
    /* on this co's stack, which is a share stack (unless ASan's
     * detect_stack_use_after_return moved the local to its fake stack, off
     * the share stack: then nothing forbids it, and it is started) */
    aco_rt_timer_t local;
    memset(&local, 0, sizeof(local));
    const aco_share_stack_t* ss = aco_get_co()->share_stack;
    int on_stack = (char*)&local >= (char*)ss->ptr && (char*)&local < (char*)ss->ptr + ss->sz;
    CHECK_EQ(aco_rt_timer_start(&local, aco_rt_now() + MS, nop_fire), on_stack ? -EINVAL : 0);
    CHECK_EQ(aco_rt_timer_stop(&local), on_stack ? 0 : 1);
    aco_rt_stats_t st;
    aco_rt_stats(NULL, &st);
    CHECK_EQ(st.timers, 0);
    CHECK_EQ(aco_rt_sleep(3 * MS), 0);
    CHECK_EQ(nop_fired, 0);
}

/* A timer on another co's share stack, started by a co of another share
 * stack or by a timer callback: -EINVAL as well (only the calling co's
 * own stack was looked at: the wheel then kept a timer that the owner's
 * stack mates overwrite).  Not in checked mode: there the touch of a
 * suspended co's window is reported as an escape, and the process dies. */
static aco_rt_timer_t* other_t;
static int other_on_stack, other_from_co = 1, other_from_cb = 1;
static void other_restart(aco_rt_timer_t* t) {
    (void)t;
    other_from_cb = aco_rt_timer_start(other_t, aco_rt_now() + 3600000 * MS, nop_fire);
    aco_rt_timer_stop(other_t);
}
static void other_starter(void* arg) {
    CHECK(aco_get_co()->share_stack != arg);
    other_from_co = aco_rt_timer_start(other_t, aco_rt_now() + 3600000 * MS, nop_fire);
    aco_rt_timer_stop(other_t);
}
static void other_stack(void* arg) {
    (void)arg;
    if (aco_checked()) return;
    aco_rt_timer_t local;
    memset(&local, 0, sizeof(local));
    other_t = &local;
    /* (as in misuse: ASan's fake stack may hold the local instead) */
    const aco_share_stack_t* ss = aco_get_co()->share_stack;
    other_on_stack = (char*)&local >= (char*)ss->ptr && (char*)&local < (char*)ss->ptr + ss->sz;
    aco_rt_co_t* c = aco_rt_spawn(NULL, other_starter, (void*)ss);
    CHECK(c != NULL);
    CHECK_EQ(aco_rt_join(c, -1), 0);
    CHECK_EQ(other_from_co, other_on_stack ? -EINVAL : 0);
    static aco_rt_timer_t cb_t;
    memset(&cb_t, 0, sizeof(cb_t));
    CHECK_EQ(aco_rt_timer_start(&cb_t, 0, other_restart), 0);
    CHECK_EQ(aco_rt_sleep(3 * MS), 0);
    CHECK_EQ(other_from_cb, other_on_stack ? -EINVAL : 0);
    CHECK_EQ(nop_fired, 0);
}

/* ------------------------------------------------------------------------ */
/* Far deadlines, past deadlines, busy cos                                  */
/* ------------------------------------------------------------------------ */

#define NFAR 6
static aco_rt_timer_t far_t[NFAR];
static int far_fired;
static void far_fire(aco_rt_timer_t* t) { (void)t; far_fired++; }

static aco_rt_timer_t near_t;
static int near_fired;
static int64_t near_deadline;
static void near_fire(aco_rt_timer_t* t) {
    (void)t;
    CHECK_GE(aco_rt_now(), near_deadline);
    near_fired++;
}

static void far_deadlines(void* arg) {
    (void)arg;
    const int64_t YEAR = 365LL * 24 * 3600 * 1000 * MS;
    int64_t now = aco_rt_now();
    int64_t d[NFAR] = {now + YEAR, now + 100 * YEAR, now + 140 * YEAR,
                       now + 200 * YEAR, INT64_MAX - 1, INT64_MAX};
    memset(far_t, 0, sizeof(far_t));
    far_fired = 0;
    for (int i = 0; i < NFAR; i++)
        CHECK_EQ(aco_rt_timer_start(&far_t[i], d[i], far_fire), 0);
    aco_rt_stats_t st;
    aco_rt_stats(NULL, &st);
    CHECK_EQ(st.timers, NFAR);
    /* near timers still fire, in order, the far ones do not */
    for (int k = 0; k < 20; k++) {
        memset(&near_t, 0, sizeof(near_t));
        near_fired = 0;
        near_deadline = aco_rt_now() + (k % 5) * MS / 4;
        CHECK_EQ(aco_rt_timer_start(&near_t, near_deadline, near_fire), 0);
        CHECK_EQ(aco_rt_sleep(2 * MS), 0);
        CHECK_EQ(near_fired, 1);
        CHECK_EQ(far_fired, 0);
    }
    for (int i = 0; i < NFAR; i++) CHECK_EQ(aco_rt_timer_stop(&far_t[i]), 1);
    aco_rt_stats(NULL, &st);
    CHECK_EQ(st.timers, 0);
    CHECK_EQ(far_fired, 0);
}

static aco_rt_timer_t past_t[3];
static int past_fired[3];
static int past_seq;
static void past_fire(aco_rt_timer_t* t) {
    int i = (int)(t - past_t);
    past_fired[i] = ++past_seq;
}

static void past_deadlines(void* arg) {
    (void)arg;
    memset(past_t, 0, sizeof(past_t));
    memset(past_fired, 0, sizeof(past_fired));
    past_seq = 0;
    int64_t now = aco_rt_now();
    CHECK_EQ(aco_rt_timer_start(&past_t[2], now + 5 * MS, past_fire), 0);
    CHECK_EQ(aco_rt_timer_start(&past_t[0], 0, past_fire), 0);
    CHECK_EQ(aco_rt_timer_start(&past_t[1], now - 1000 * MS, past_fire), 0);
    CHECK_EQ(past_fired[0] + past_fired[1], 0);         /* not from start */
    /* the next round fires them: before a 1 ms sleep ends */
    CHECK_EQ(aco_rt_sleep(MS), 0);
    CHECK(past_fired[0] > 0 && past_fired[1] > 0);
    CHECK_LE(past_fired[0], 2);
    CHECK_LE(past_fired[1], 2);
    CHECK_EQ(aco_rt_sleep(10 * MS), 0);
    CHECK_EQ(past_fired[2], 3);
}

/* a co that only yields: timers must still fire */
static volatile int spin_stop;
static void spinner(void* arg) {
    (void)arg;
    while (!spin_stop) CHECK_EQ(aco_rt_yield(), 0);
}

static void busy(void* arg) {
    (void)arg;
    spin_stop = 0;
    for (int i = 0; i < 3; i++) CHECK(aco_rt_spawn(NULL, spinner, NULL) != NULL);
    memset(&near_t, 0, sizeof(near_t));
    near_fired = 0;
    near_deadline = aco_rt_now() + 3 * MS;
    CHECK_EQ(aco_rt_timer_start(&near_t, near_deadline, near_fire), 0);
    int64_t limit = aco_rt_now() + 20000 * MS;
    while (!near_fired) {
        CHECK_EQ(aco_rt_yield(), 0);
        CHECK_LT(aco_rt_now(), limit);
    }
    spin_stop = 1;
}

/* callbacks that wake cos: cancel one sleeping until the same tick, post a
 * semaphore another waits on with a deadline in that tick */
static aco_rt_timer_t wk_t[2];
static aco_rt_co_t* wk_target;
static aco_rt_sem_t wk_sem;
static int wk_fired;
static void wk_cancel(aco_rt_timer_t* t) {
    (void)t;
    CHECK_EQ(aco_rt_cancel(wk_target), 0);
    wk_fired++;
}
static void wk_post(aco_rt_timer_t* t) {
    (void)t;
    aco_rt_sem_post(&wk_sem);
    wk_fired++;
}
static int wk_sleep_rc, wk_sem_rc;
static void wk_sleeper(void* arg) {
    int64_t d = *(int64_t*)arg;
    wk_sleep_rc = aco_rt_sleep_until(d);
}
static void wk_waiter(void* arg) {
    int64_t d = *(int64_t*)arg;
    wk_sem_rc = aco_rt_sem_wait(&wk_sem, d);
}

static void waking_callbacks(void* arg) {
    (void)arg;
    for (int round = 0; round < 40; round++) {
        static int64_t d;
        d = aco_rt_now() + 2 * MS;
        memset(wk_t, 0, sizeof(wk_t));
        aco_rt_sem_init(&wk_sem, 0);
        wk_fired = 0;
        wk_sleep_rc = wk_sem_rc = 1;
        /* the timers first or last in their slot, by round */
        if (round & 1) {
            CHECK_EQ(aco_rt_timer_start(&wk_t[0], d, wk_cancel), 0);
            CHECK_EQ(aco_rt_timer_start(&wk_t[1], d, wk_post), 0);
        }
        wk_target = aco_rt_spawn(NULL, wk_sleeper, &d);
        aco_rt_co_t* w = aco_rt_spawn(NULL, wk_waiter, &d);
        CHECK_EQ(aco_rt_yield(), 0);
        /* Last in their slot: only while the deadline is ahead, so that the
         * cos wait on it too.  A yield that outlasted it (a loaded machine)
         * leaves the round without these timers: the cos may have ended,
         * and a callback would then cancel a handle its join freed. */
        int armed = 1;
        if (!(round & 1)) {
            armed = aco_rt_now() < d;
            if (armed) {
                CHECK_EQ(aco_rt_timer_start(&wk_t[0], d, wk_cancel), 0);
                CHECK_EQ(aco_rt_timer_start(&wk_t[1], d, wk_post), 0);
            }
        }
        CHECK_EQ(aco_rt_join(wk_target, -1), 0);
        CHECK_EQ(aco_rt_join(w, -1), 0);
        if (!armed) {
            CHECK_EQ(wk_fired, 0);
            CHECK_EQ(wk_sleep_rc, 0);
            CHECK_EQ(wk_sem_rc, -ETIMEDOUT);
        } else {
            CHECK_EQ(wk_fired, 2);
            CHECK(wk_sleep_rc == 0 || wk_sleep_rc == -ECANCELED);
            CHECK(wk_sem_rc == 0 || wk_sem_rc == -ETIMEDOUT);
            if (wk_sem_rc == -ETIMEDOUT) CHECK_EQ(aco_rt_sem_trywait(&wk_sem), 0);   /* not lost */
        }
        CHECK_EQ(aco_rt_sem_trywait(&wk_sem), -EAGAIN);
        aco_rt_stats_t st;
        aco_rt_stats(NULL, &st);
        CHECK_EQ(st.timers, 0);
    }
}

#if !defined(ACO_RT_NO_THREADS)
/* A timer due while the loop spins after another thread's message is not
 * late for the spin: the spin (50 us) ends at the first timer, and the
 * wait after it is shortened by what the spin took.  Each round a co of
 * another thread wakes ours (the loop is "hot" after that message: it
 * spins before it sleeps), which sleeps HOT_T at once, then HOT_T again
 * (the loop cold: a timer woke it).  The two sleeps' lateness, medians:
 * before, the hot one was late by the whole spin more than the cold one. */
#include <pthread.h>
#define HOT_T (30 * 1000LL)
#define HOT_ROUNDS 41
static aco_rt_chan_t *hot_to_x, *hot_to_y;
static int64_t hot_late[HOT_ROUNDS], cold_late[HOT_ROUNDS];

static void hot_y(void* arg) {
    (void)arg;
    for (int i = 0; i < HOT_ROUNDS; i++) {
        CHECK_EQ(aco_rt_sleep(200 * 1000), 0);  /* (ours parked by then) */
        CHECK_EQ(aco_rt_chan_send(hot_to_x, &i, -1), 0);
        int v;
        CHECK_EQ(aco_rt_chan_recv(hot_to_y, &v, -1), 0);
        CHECK_EQ(v, i);
    }
}
static int hot_ready;
static void* hot_thread(void* arg) {
    aco_rt_sched_t* s = test_sched_on(test_backend_id, NULL);
    (void)arg;
    /* (ours runs after this: with no other scheduler its wait would be
     * a deadlock) */
    __atomic_store_n(&hot_ready, 1, __ATOMIC_RELEASE);
    test_go(s, hot_y, NULL);
    aco_rt_sched_free(s);
    return NULL;
}
static int cmp64(const void* a, const void* b) {
    int64_t x = *(const int64_t*)a, y = *(const int64_t*)b;
    return (x > y) - (x < y);
}
static void hot_x(void* arg) {
    (void)arg;
    for (int i = 0; i < HOT_ROUNDS; i++) {
        int v;
        CHECK_EQ(aco_rt_chan_recv(hot_to_x, &v, -1), 0);
        int64_t t0 = aco_rt_now();
        CHECK_EQ(aco_rt_sleep(HOT_T), 0);
        int64_t t1 = aco_rt_now();
        CHECK_EQ(aco_rt_sleep(HOT_T), 0);
        int64_t t2 = aco_rt_now();
        hot_late[i] = t1 - t0 - HOT_T;
        cold_late[i] = t2 - t1 - HOT_T;
        CHECK_EQ(aco_rt_chan_send(hot_to_y, &v, -1), 0);
    }
}
static void spin_before_timer(aco_rt_sched_t* s) {
    CHECK((hot_to_x = aco_rt_chan_new(sizeof(int), 0)) != NULL);
    CHECK((hot_to_y = aco_rt_chan_new(sizeof(int), 0)) != NULL);
    pthread_t th;
    hot_ready = 0;
    CHECK_EQ(pthread_create(&th, NULL, hot_thread, NULL), 0);
    while (!__atomic_load_n(&hot_ready, __ATOMIC_ACQUIRE)) sched_yield();
    test_go(s, hot_x, NULL);
    CHECK_EQ(pthread_join(th, NULL), 0);
    qsort(hot_late, HOT_ROUNDS, sizeof(int64_t), cmp64);
    qsort(cold_late, HOT_ROUNDS, sizeof(int64_t), cmp64);
    int64_t h = hot_late[HOT_ROUNDS / 2], c = cold_late[HOT_ROUNDS / 2];
    /* (a sleep is late by the wheel's tick, up to 16.4 us, and the
     * kernel's timer slack, up to 50 us on epoll: the hot sleep may be as
     * late as the cold one, not a spin later) */
    if (h > c + 25 * 1000) {
        fprintf(stderr, "[%s] a sleep after a message: median %lld ns late; the next: %lld ns\n",
                test_backend_label, (long long)h, (long long)c);
        CHECK(!"a timer due in the idle spin fired after the spin");
    }
    aco_rt_chan_free(hot_to_x);
    aco_rt_chan_free(hot_to_y);
}
#endif

static void body(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    test_go(s, misuse, NULL);
    test_go(s, other_stack, NULL);
    test_go(s, past_deadlines, NULL);
    test_go(s, callbacks, NULL);
    test_go(s, busy, NULL);
    test_go(s, waking_callbacks, NULL);
    test_go(s, random_timers, NULL);
    test_go(s, far_deadlines, NULL);
#if !defined(ACO_RT_NO_THREADS)
    if (!SLOW) spin_before_timer(s);
#endif
}

/* timers still armed when their scheduler is freed: afterwards they are
 * not armed (stop says 0) and a new scheduler can start them */
static aco_rt_timer_t left_t[3];
static int left_fired;
static void left_fire(aco_rt_timer_t* t) { (void)t; left_fired++; }

static void restart_left(void* arg) {
    (void)arg;
    left_fired = 0;
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(aco_rt_timer_stop(&left_t[i]), 0);
        CHECK_EQ(aco_rt_timer_start(&left_t[i], aco_rt_now() + MS / 2, left_fire), 0);
    }
    CHECK_EQ(aco_rt_sleep(2 * MS), 0);
    CHECK_EQ(left_fired, 3);
}

static void timers_left_armed(void) {
    int bs[8];
    int n = test_backends(bs, 8);
    for (int i = 0; i < n; i++) {
        test_backend_label = test_backend_str(bs[i]);
        aco_rt_sched_t* s = test_sched_on(bs[i], NULL);
        memset(left_t, 0, sizeof(left_t));
        int64_t now = aco_rt_now();
        CHECK_EQ(aco_rt_timer_start(&left_t[0], now + 3600000 * MS, left_fire), 0);
        CHECK_EQ(aco_rt_timer_start(&left_t[1], now + MS, left_fire), 0);
        CHECK_EQ(aco_rt_timer_start(&left_t[2], INT64_MAX, left_fire), 0);
        aco_rt_sched_free(s);           /* never ran: all three armed */
        s = test_sched_on(bs[i], NULL);
        test_go(s, restart_left, NULL);
        aco_rt_sched_free(s);
        test_backend_label = "";
    }
}

int main(void) {
    static aco_rt_timer_t t;
    CHECK_EQ(aco_rt_timer_start(&t, 0, nop_fire), -EPERM);     /* no scheduler */
    CHECK_EQ(aco_rt_timer_stop(&t), 0);
    T = calloc(NT, sizeof(*T));
    order = calloc(NT, sizeof(*order));
    CHECK(T && order);
    test_on_backends(NULL, body, NULL);
    CHECK_EQ(aco_rt_timer_start(&t, 0, nop_fire), -EPERM);
    timers_left_armed();
    free(T);
    free(order);
    return 0;
}
