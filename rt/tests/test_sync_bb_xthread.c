/* test_sync_bb_xthread.c - mutex, condition variable, semaphore and wait
 * group shared by cos of two pool threads and plain threads, from aco_rt.h
 * alone: mutual exclusion under lock deadlines that race unlocks; every
 * signal taken by a waiter (none lost, none doubled); a cond_wait ended by
 * a deadline or a cancel from another thread holds the mutex again;
 * semaphore units conserved under deadlines and cancels racing posts; a
 * negative count as a debt; a wait group reused at once after its wait
 * and freed by its waiter while the last done may still be returning. */
#include "rt_test.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

static aco_rt_pool_t* pool;
static aco_rt_sched_t* S(int i) { return aco_rt_pool_sched(pool, (unsigned)i & 1); }
static int64_t in_ms(int ms) { return aco_rt_now() + ms * MS; }
static void drain(void) { CHECK_EQ(aco_rt_pool_wait(pool, ACO_RT_POOL_DRAIN, in_ms(60000)), 0); }
static int64_t jitter(uint64_t* st) {
    uint64_t r = test_rand(st);
    if ((r & 15) == 0) return 0;
    return aco_rt_now() + (int64_t)(r % 40000);
}

/* ---- mutex: exclusion with lock deadlines racing unlocks ---- */
#define MCOS 8
#define MITER (FEW ? 300 : 3000)
static aco_rt_mutex_t mx;     /* static: all-zero is unlocked */
static _Atomic int mx_inside;
static long mx_counter;
static _Atomic long mx_ok;
static void mx_co(void* arg) {
    int me = (int)(intptr_t)arg;
    uint64_t st = 0x9999ULL + (uint64_t)me;
    for (int i = 0; i < MITER; i++) {
        int r;
        int how = (int)(test_rand(&st) % 4);
        if (how == 0) r = aco_rt_mutex_trylock(&mx);
        else if (how == 1) r = aco_rt_mutex_lock(&mx, -1);
        else r = aco_rt_mutex_lock(&mx, jitter(&st));
        if (r != 0) {
            CHECK(r == -ETIMEDOUT || r == -EBUSY);
            CHECK_EQ(aco_rt_mutex_unlock(&mx), -EPERM);     /* not ours */
            continue;
        }
        CHECK_EQ(atomic_exchange(&mx_inside, 1), 0);
        CHECK_EQ(aco_rt_mutex_lock(&mx, -1), -EDEADLK);
        CHECK_EQ(aco_rt_mutex_trylock(&mx), -EBUSY);
        mx_counter++;
        if ((i & 7) == 0) CHECK_EQ(aco_rt_yield(), 0);
        CHECK_EQ(atomic_exchange(&mx_inside, 0), 1);
        atomic_fetch_add(&mx_ok, 1);
        CHECK_EQ(aco_rt_mutex_unlock(&mx), 0);
    }
}
static void mutex_xthread(void) {
    mx_counter = 0;
    atomic_store(&mx_ok, 0);
    for (int i = 0; i < MCOS; i++) CHECK_EQ(aco_rt_detach(aco_rt_spawn(S(i), mx_co, (void*)(intptr_t)i)), 0);
    drain();
    CHECK_EQ(mx_counter, atomic_load(&mx_ok));
    CHECK_GT(mx_counter, 0);
}

/* ---- cond: N waiters without deadline on both threads; a signaller that
 * signals only while one is queued: each signal wakes exactly one ---- */
#define CW 6
#define CROUNDS (FEW ? 100 : 1000)
static aco_rt_mutex_t cm;
static aco_rt_cond_t cc;
static int c_waiting, c_pending, c_woken, c_done_waiters;
static void cw_co(void* arg) {
    (void)arg;
    for (int k = 0; k < CROUNDS; k++) {
        CHECK_EQ(aco_rt_mutex_lock(&cm, -1), 0);
        c_waiting++;
        int r = aco_rt_cond_wait(&cc, &cm, in_ms(20000));
        CHECK_EQ(r, 0);
        c_waiting--;
        CHECK_GT(c_pending, 0);
        c_pending--;
        c_woken++;
        CHECK_EQ(aco_rt_mutex_unlock(&cm), 0);
    }
    CHECK_EQ(aco_rt_mutex_lock(&cm, -1), 0);
    c_done_waiters++;
    CHECK_EQ(aco_rt_mutex_unlock(&cm), 0);
}
static void cs_co(void* arg) {
    (void)arg;
    long sent = 0;
    uint64_t st = 5;
    while (sent < (long)CW * CROUNDS) {
        CHECK_EQ(aco_rt_mutex_lock(&cm, -1), 0);
        int queued = c_waiting - c_pending;
        CHECK_GE(queued, 0);
        if (queued > 0) {
            if (queued > 1 && (test_rand(&st) & 7) == 0 && sent + queued <= (long)CW * CROUNDS) {
                aco_rt_cond_broadcast(&cc);
                c_pending += queued;
                sent += queued;
            } else {
                aco_rt_cond_signal(&cc);
                c_pending++;
                sent++;
            }
        }
        CHECK_EQ(aco_rt_mutex_unlock(&cm), 0);
        if (queued == 0 || (test_rand(&st) & 3) == 0) CHECK_EQ(aco_rt_yield(), 0);
    }
}
static void cond_xthread(void) {
    c_waiting = c_pending = c_woken = c_done_waiters = 0;
    for (int i = 0; i < CW; i++) CHECK_EQ(aco_rt_detach(aco_rt_spawn(S(i), cw_co, NULL)), 0);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(S(1), cs_co, NULL)), 0);
    drain();
    CHECK_EQ(c_woken, CW * CROUNDS);
    CHECK_EQ(c_done_waiters, CW);
    CHECK_EQ(c_pending, 0);
}

/* ---- cond: cancels from a plain thread racing signals.  The signaller
 * signals only while more waiters that are never cancelled wait than
 * signals are outstanding, so some waiter is always queued: each signal
 * ends exactly one wait with 0, cancelled waiter or not ---- */
#define CCN 4                /* never cancelled */
#define CCC 6                /* cancelled from the main thread */
static int cc_nc_waiting, cc_pending, cc_zero, cc_nc_done;
static long cc_signals;
static aco_rt_co_t* cc_cos[CCC];
static void ccw_co(void* arg) {
    int cancellable = (int)(intptr_t)arg;
    for (int k = 0; cancellable || k < (FEW ? 100 : 1000); k++) {
        int r = aco_rt_mutex_lock(&cm, -1);
        if (r == -ECANCELED) { CHECK(cancellable); return; }
        CHECK_EQ(r, 0);
        if (!cancellable) cc_nc_waiting++;
        r = aco_rt_cond_wait(&cc, &cm, -1);
        if (!cancellable) cc_nc_waiting--;
        if (r == 0) { CHECK_GT(cc_pending, 0); cc_pending--; cc_zero++; }
        else { CHECK(cancellable); CHECK_EQ(r, -ECANCELED); }
        CHECK_EQ(aco_rt_mutex_unlock(&cm), 0);      /* held again, cancelled or not */
        if (r != 0) return;
    }
    CHECK_EQ(aco_rt_mutex_lock(&cm, -1), 0);
    cc_nc_done++;
    CHECK_EQ(aco_rt_mutex_unlock(&cm), 0);
}
static void ccs_co(void* arg) {
    (void)arg;
    for (;;) {
        CHECK_EQ(aco_rt_mutex_lock(&cm, -1), 0);
        if (cc_nc_done == CCN) { CHECK_EQ(aco_rt_mutex_unlock(&cm), 0); return; }
        if (cc_nc_waiting - cc_pending > 0) { aco_rt_cond_signal(&cc); cc_pending++; cc_signals++; }
        CHECK_EQ(aco_rt_mutex_unlock(&cm), 0);
        CHECK_EQ(aco_rt_yield(), 0);
    }
}
static void cond_cancels(void) {
    cc_nc_waiting = cc_pending = cc_zero = cc_nc_done = 0;
    cc_signals = 0;
    aco_rt_cond_init(&cc);
    for (int i = 0; i < CCC; i++) { cc_cos[i] = aco_rt_spawn(S(i), ccw_co, (void*)1); CHECK(cc_cos[i]); }
    for (int i = 0; i < CCN; i++) CHECK_EQ(aco_rt_detach(aco_rt_spawn(S(i + 1), ccw_co, (void*)0)), 0);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(S(1), ccs_co, NULL)), 0);
    uint64_t st = 3;
    for (int i = 0; i < CCC; i++) {
        int spins = (int)(test_rand(&st) % 20000);
        for (int k = 0; k < spins; k++) __asm__ volatile("" ::: "memory");
        sched_yield();
        CHECK_EQ(aco_rt_cancel(cc_cos[i]), 0);
        CHECK_EQ(aco_rt_detach(cc_cos[i]), 0);
    }
    drain();
    CHECK_EQ(cc_zero, cc_signals);
    CHECK_EQ(cc_pending, 0);
    CHECK_EQ(cc_nc_done, CCN);
}

/* ---- cond: a deadline racing a signal from another thread; and a cancel
 * from a plain thread: either way the mutex is held again ---- */
static aco_rt_mutex_t rm;
static aco_rt_cond_t rc;
static int r_flag;           /* 1: waiting, not yet signalled */
static _Atomic int r_stop;
static long r_zero, r_signals, r_timeouts;
static void rw_co(void* arg) {
    (void)arg;
    uint64_t st = 77;
    for (int k = 0; k < (FEW ? 300 : 3000); k++) {
        CHECK_EQ(aco_rt_mutex_lock(&rm, -1), 0);
        r_flag = 1;
        int r = aco_rt_cond_wait(&rc, &rm, jitter(&st));
        CHECK(r == 0 || r == -ETIMEDOUT);
        if (r == 0) { CHECK_EQ(r_flag, 2); r_zero++; }
        else r_timeouts++;
        r_flag = 0;
        /* held again, whatever the result */
        CHECK_EQ(aco_rt_mutex_trylock(&rm), -EBUSY);
        CHECK_EQ(aco_rt_mutex_unlock(&rm), 0);
    }
    atomic_store(&r_stop, 1);
}
static void rs_co(void* arg) {
    (void)arg;
    while (!atomic_load(&r_stop)) {
        CHECK_EQ(aco_rt_mutex_lock(&rm, -1), 0);
        if (r_flag == 1) { aco_rt_cond_signal(&rc); r_flag = 2; r_signals++; }
        CHECK_EQ(aco_rt_mutex_unlock(&rm), 0);
        CHECK_EQ(aco_rt_yield(), 0);
    }
}
static aco_rt_co_t* cx_co;
static _Atomic int cx_parked;
static void cx_waiter(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_mutex_lock(&rm, -1), 0);
    atomic_store(&cx_parked, 1);
    CHECK_EQ(aco_rt_cond_wait(&rc, &rm, in_ms(20000)), -ECANCELED);
    CHECK_EQ(aco_rt_mutex_trylock(&rm), -EBUSY);
    CHECK_EQ(aco_rt_cond_wait(&rc, &rm, -1), -ECANCELED);   /* at once */
    CHECK_EQ(aco_rt_mutex_unlock(&rm), 0);                 /* works cancelled */
    CHECK_EQ(aco_rt_mutex_trylock(&rm), 0);                /* so does trylock */
    CHECK_EQ(aco_rt_mutex_lock(&rm, -1), -EDEADLK);        /* before -ECANCELED */
    CHECK_EQ(aco_rt_mutex_unlock(&rm), 0);
    CHECK_EQ(aco_rt_mutex_unlock(&rm), -EPERM);
    CHECK_EQ(aco_rt_mutex_lock(&rm, -1), -ECANCELED);
    CHECK_EQ(aco_rt_cond_wait(&rc, &rm, -1), -EPERM);      /* not held: before -ECANCELED */
    CHECK_EQ(aco_rt_cond_wait(NULL, &rm, -1), -EINVAL);
    CHECK_EQ(aco_rt_mutex_lock(NULL, -1), -EINVAL);
}
static void cond_races(void) {
    r_flag = 0;
    r_zero = r_signals = r_timeouts = 0;
    atomic_store(&r_stop, 0);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(S(0), rw_co, NULL)), 0);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(S(1), rs_co, NULL)), 0);
    drain();
    CHECK_LE(r_zero, r_signals);
    /* a signal is lost only to a wait whose deadline came first */
    CHECK_LE(r_signals - r_zero, r_timeouts);
    /* a cancel from a plain thread ends a cond_wait with the mutex held */
    atomic_store(&cx_parked, 0);
    cx_co = aco_rt_spawn(S(1), cx_waiter, NULL);
    CHECK(cx_co != NULL);
    while (!atomic_load(&cx_parked)) sched_yield();
    CHECK_EQ(aco_rt_cancel(cx_co), 0);
    CHECK_EQ(aco_rt_cancel(cx_co), 0);
    CHECK_EQ(aco_rt_detach(cx_co), 0);
    drain();
}

/* ---- semaphore: units conserved across threads ---- */
#define SW 6
static aco_rt_sem_t sm;
static _Atomic long s_taken;
static _Atomic int s_posters_done;
static aco_rt_co_t* s_cos[SW];
static void sw_co(void* arg) {
    int me = (int)(intptr_t)arg;
    uint64_t st = 0x5151ULL * (uint64_t)(me + 1);
    for (;;) {
        int r = (me % 3 == 2) ? aco_rt_sem_trywait(&sm) : aco_rt_sem_wait(&sm, jitter(&st));
        if (r == 0) { atomic_fetch_add(&s_taken, 1); continue; }
        if (r == -ECANCELED) { CHECK(me % 3 == 1); return; }
        CHECK(r == -ETIMEDOUT || r == -EAGAIN);
        if (atomic_load(&s_posters_done) == 2) return;
        if (r == -EAGAIN) CHECK_EQ(aco_rt_yield(), 0);
    }
}
static void* poster_thread(void* arg) {
    (void)arg;
    for (int i = 0; i < (FEW ? 2000 : 20000); i++) {
        aco_rt_sem_post(&sm);
        if ((i & 255) == 0) sched_yield();
    }
    atomic_fetch_add(&s_posters_done, 1);
    return NULL;
}
static void poster_co(void* arg) {
    (void)arg;
    for (int i = 0; i < (FEW ? 2000 : 20000); i++) {
        aco_rt_sem_post(&sm);
        if ((i & 63) == 0) CHECK_EQ(aco_rt_yield(), 0);
        /* cancel the waiters with me % 3 == 1 midway */
        if (i == (FEW ? 1000 : 10000))
            for (int k = 1; k < SW; k += 3) CHECK_EQ(aco_rt_cancel(s_cos[k]), 0);
    }
    atomic_fetch_add(&s_posters_done, 1);
}
static void sw_join(void* arg) {
    (void)arg;
    for (int k = 0; k < SW; k++) CHECK_EQ(aco_rt_join(s_cos[k], in_ms(20000)), 0);
}
static void sem_xthread(void) {
    aco_rt_sem_init(&sm, 3);
    atomic_store(&s_taken, 0);
    atomic_store(&s_posters_done, 0);
    for (int i = 0; i < SW; i++) { s_cos[i] = aco_rt_spawn(S(i), sw_co, (void*)(intptr_t)i); CHECK(s_cos[i]); }
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, poster_thread, NULL), 0);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(S(1), poster_co, NULL)), 0);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(S(0), sw_join, NULL)), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
    drain();
    long left = 0;
    while (aco_rt_sem_trywait(&sm) == 0) left++;
    CHECK_EQ(atomic_load(&s_taken) + left, 3 + 2L * (FEW ? 2000 : 20000));
    /* debt: -2, two posts pay it, the third gives one */
    aco_rt_sem_init(&sm, -2);
    CHECK_EQ(aco_rt_sem_trywait(&sm), -EAGAIN);
    aco_rt_sem_post(&sm);
    aco_rt_sem_post(&sm);
    CHECK_EQ(aco_rt_sem_trywait(&sm), -EAGAIN);
    aco_rt_sem_post(&sm);
    CHECK_EQ(aco_rt_sem_trywait(&sm), 0);
    CHECK_EQ(aco_rt_sem_trywait(&sm), -EAGAIN);
    /* INT64_MAX stays so */
    aco_rt_sem_init(&sm, INT64_MAX);
    aco_rt_sem_post(&sm);
    CHECK_EQ(aco_rt_sem_trywait(&sm), 0);
    CHECK_EQ(aco_rt_sem_trywait(&sm), 0);
    CHECK_EQ(aco_rt_sem_trywait(NULL), -EINVAL);
    aco_rt_sem_post(NULL);
    aco_rt_cond_signal(NULL);
    aco_rt_cond_broadcast(NULL);
    CHECK_EQ(aco_rt_sem_wait(&sm, 0), -EPERM);
}

/* ---- wait group: reused at once; freed by its waiter ---- */
static aco_rt_wg_t* wg_heap;
static aco_rt_wg_t wgr;
static _Atomic int wg_round1_zero, wg_second_add;
static void wg_done_co(void* arg) {
    aco_rt_wg_t* w = arg;
    CHECK_EQ(aco_rt_wg_done(w), 0);
}
static void* wg_done_thread(void* arg) {
    CHECK_EQ(aco_rt_wg_done((aco_rt_wg_t*)arg), 0);
    return NULL;
}
static void wg_freer(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_wg_wait(wg_heap, in_ms(20000)), 0);
    free(wg_heap);          /* the add that made it 0 is done with it */
}
static aco_rt_sem_t wgr_marks;
static _Atomic int wgr_ready;
static void wgr_mark(void* arg) { (void)arg; aco_rt_sem_post(&wgr_marks); }
static void wgr_zero(void* arg) {
    (void)arg;
    /* each thread's waiters parked before its mark ran */
    CHECK_EQ(aco_rt_sem_wait(&wgr_marks, in_ms(20000)), 0);
    CHECK_EQ(aco_rt_sem_wait(&wgr_marks, in_ms(20000)), 0);
    atomic_store(&wgr_ready, 1);
}
static void wgr_waiter(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_wg_wait(&wgr, in_ms(20000)), 0);
    /* the first back adds for round two at once: the others of round one
     * still return 0 */
    if (atomic_fetch_add(&wg_round1_zero, 1) == 0) {
        CHECK_EQ(aco_rt_wg_add(&wgr, 1), 0);
        atomic_store(&wg_second_add, 1);
    }
}
static void wg_xthread(void) {
    for (int round = 0; round < (FEW ? 50 : 300); round++) {
        wg_heap = malloc(sizeof(*wg_heap));
        CHECK(wg_heap);
        aco_rt_wg_init(wg_heap);
        CHECK_EQ(aco_rt_wg_add(wg_heap, 3), 0);
        CHECK_EQ(aco_rt_detach(aco_rt_spawn(S(round), wg_freer, NULL)), 0);
        CHECK_EQ(aco_rt_detach(aco_rt_spawn(S(round + 1), wg_done_co, wg_heap)), 0);
        CHECK_EQ(aco_rt_detach(aco_rt_spawn(S(round), wg_done_co, wg_heap)), 0);
        pthread_t t;
        CHECK_EQ(pthread_create(&t, NULL, wg_done_thread, wg_heap), 0);
        CHECK_EQ(pthread_join(t, NULL), 0);
        drain();
    }
    /* reuse: three waiters on two threads, the counter set to 0 by a plain
     * thread; the first one back adds again before the others ran */
    aco_rt_wg_init(&wgr);
    CHECK_EQ(aco_rt_wg_add(&wgr, 1), 0);
    aco_rt_sem_init(&wgr_marks, 0);
    atomic_store(&wg_round1_zero, 0);
    atomic_store(&wg_second_add, 0);
    for (int i = 0; i < 3; i++) CHECK_EQ(aco_rt_detach(aco_rt_spawn(S(i), wgr_waiter, NULL)), 0);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(S(0), wgr_mark, NULL)), 0);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(S(1), wgr_mark, NULL)), 0);
    atomic_store(&wgr_ready, 0);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(S(1), wgr_zero, NULL)), 0);
    while (!atomic_load(&wgr_ready)) sched_yield();
    CHECK_EQ(aco_rt_wg_done(&wgr), 0);      /* from a plain thread */
    drain();
    CHECK_EQ(atomic_load(&wg_round1_zero), 3);
    CHECK_EQ(aco_rt_wg_done(&wgr), 0);
    /* limits */
    CHECK_EQ(aco_rt_wg_done(&wgr), -EINVAL);
    CHECK_EQ(aco_rt_wg_add(&wgr, INT64_MAX), 0);
    CHECK_EQ(aco_rt_wg_add(&wgr, 1), -EINVAL);
    CHECK_EQ(aco_rt_wg_add(&wgr, -INT64_MAX), 0);
    CHECK_EQ(aco_rt_wg_add(&wgr, INT64_MIN), -EINVAL);
    CHECK_EQ(aco_rt_wg_add(&wgr, 0), 0);
    CHECK_EQ(aco_rt_wg_add(NULL, 1), -EINVAL);
    CHECK_EQ(aco_rt_wg_done(NULL), -EINVAL);
    CHECK_EQ(aco_rt_wg_wait(&wgr, 0), -EPERM);
}

static void body(aco_rt_pool_t* p) {
    pool = p;
    mutex_xthread();
    cond_xthread();
    cond_cancels();
    cond_races();
    sem_xthread();
    wg_xthread();
}

int main(void) {
    test_on_pools(2, body, NULL);
    puts("test_sync_bb_xthread: ok");
    return 0;
}
