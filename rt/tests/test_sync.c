/* test_sync: mutex, condition variable, semaphore, wait group.
 *
 *  - mutex: FIFO handoff to N waiters (no overtaking by a co that comes
 *    later: the unlocker hands over), trylock -EBUSY, -EDEADLK when the
 *    owner locks again, -EPERM unlock by a non-owner / of a free mutex, a
 *    lock deadline (-ETIMEDOUT not before it) and a cancel at the head, in
 *    the middle and at the tail of the queue leave it intact for the
 *    others; zero-initialised objects work; a co that ends holding a mutex
 *    (by returning, by aco_rt_exit, or destroyed with its scheduler, also
 *    one that was handed the mutex and never ran) leaves it held: the cos
 *    that come after, whatever record they get, are not its holder (unlock
 *    -EPERM, lock -ETIMEDOUT, trylock -EBUSY);
 *  - cond: signal wakes one in FIFO order, broadcast all; a wait's deadline
 *    gives -ETIMEDOUT with the mutex held again (also when another co held
 *    it meanwhile), a cancel gives -ECANCELED with the mutex held; -EPERM
 *    without the mutex; signals are not remembered;
 *  - semaphore: counts (a negative one a debt, paid before a waiter gets a
 *    unit; a post at INT64_MAX keeps it), FIFO, the posted unit goes
 *    to the first waiter (no overtaking), trywait -EAGAIN, a deadline or
 *    cancel takes no unit;
 *  - a cancelled co: -EDEADLK and cond_wait's -EPERM before -ECANCELED,
 *    mutex trylock and unlock and the calls that never wait still work;
 *  - wait group: wait returns when the counter reaches 0 (several waiters),
 *    add below zero -EINVAL changes nothing, deadline, reuse;
 *  - stress: 1000 cos lock/yield/unlock around a shared counter, with random
 *    lock deadlines (0 means owner, -ETIMEDOUT means not); a bounded buffer
 *    with mutex and two conds, 20 producers and 20 consumers.
 */
#include "rt_test.h"

#include <stdint.h>

static int log_[4096];
static int nlog;

/* ------------------------------------------------------------------------ */
/* Mutex                                                                    */
/* ------------------------------------------------------------------------ */

static aco_rt_mutex_t M;            /* zero-initialised: ready */

static void m_waiter(void* arg) {
    int id = (int)(intptr_t)arg;
    CHECK_EQ(aco_rt_mutex_lock(&M, -1), 0);
    log_[nlog++] = id;
    CHECK_EQ(aco_rt_mutex_lock(&M, -1), -EDEADLK);
    CHECK_EQ(aco_rt_mutex_trylock(&M), -EBUSY);
    CHECK_EQ(aco_rt_yield(), 0);        /* still ours while others run */
    CHECK_EQ(aco_rt_mutex_unlock(&M), 0);
    CHECK_EQ(aco_rt_mutex_unlock(&M), -EPERM);
}

static int late_rc = 1;
static void late_comer(void* arg) {
    (void)arg;
    /* the mutex was handed to the first waiter: a try now must fail */
    late_rc = aco_rt_mutex_trylock(&M);
    CHECK_EQ(aco_rt_mutex_lock(&M, -1), 0);
    log_[nlog++] = 999;
    CHECK_EQ(aco_rt_mutex_unlock(&M), 0);
}

static void mutex_fifo(void* arg) {
    (void)arg;
    nlog = 0;
    CHECK_EQ(aco_rt_mutex_unlock(&M), -EPERM);          /* free */
    CHECK_EQ(aco_rt_mutex_trylock(&M), 0);
    CHECK_EQ(aco_rt_mutex_trylock(&M), -EBUSY);
    CHECK_EQ(aco_rt_mutex_lock(&M, -1), -EDEADLK);
    CHECK_EQ(aco_rt_mutex_lock(&M, 0), -EDEADLK);
    aco_rt_co_t* c[50];
    for (int i = 0; i < 50; i++) c[i] = aco_rt_spawn(NULL, m_waiter, (void*)(intptr_t)i);
    CHECK_EQ(aco_rt_yield(), 0);        /* all 50 wait, in order */
    aco_rt_stats_t st;
    aco_rt_stats(NULL, &st);
    CHECK_EQ(st.cos_parked, 50);
    aco_rt_co_t* late = aco_rt_spawn(NULL, late_comer, NULL);
    CHECK_EQ(aco_rt_mutex_unlock(&M), 0);       /* hands to waiter 0 */
    CHECK_EQ(aco_rt_mutex_unlock(&M), -EPERM);
    CHECK_EQ(aco_rt_mutex_trylock(&M), -EBUSY); /* waiter 0 owns it already */
    CHECK_EQ(aco_rt_join(late, -1), 0);
    for (int i = 0; i < 50; i++) CHECK_EQ(aco_rt_join(c[i], -1), 0);
    CHECK_EQ(late_rc, -EBUSY);
    CHECK_EQ(nlog, 51);
    for (int i = 0; i < 50; i++) CHECK_EQ(log_[i], i);
    CHECK_EQ(log_[50], 999);
    /* free again */
    CHECK_EQ(aco_rt_mutex_lock(&M, 0), 0);
    CHECK_EQ(aco_rt_mutex_unlock(&M), 0);
}

/* waiters 0..4; one of them leaves (deadline or cancel) */
typedef struct {
    int id;
    int64_t deadline;
    int rc;
    int64_t end;
} mw_t;

static void m_waiter2(void* arg) {
    mw_t* w = (mw_t*)arg;
    w->rc = aco_rt_mutex_lock(&M, w->deadline);
    w->end = aco_rt_now();
    if (w->rc == 0) {
        log_[nlog++] = w->id;
        CHECK_EQ(aco_rt_yield(), 0);
        CHECK_EQ(aco_rt_mutex_unlock(&M), 0);
    } else {
        CHECK_EQ(aco_rt_mutex_unlock(&M), -EPERM);
    }
}

static void mutex_leave(void* arg) {
    (void)arg;
    for (int how = 0; how < 2; how++) {         /* 0: deadline, 1: cancel */
        for (int who = 0; who < 5; who++) {     /* the one that leaves */
            nlog = 0;
            mw_t w[5];
            aco_rt_co_t* c[5];
            CHECK_EQ(aco_rt_mutex_lock(&M, -1), 0);
            int64_t d = aco_rt_now() + 2 * MS;
            for (int i = 0; i < 5; i++) {
                w[i] = (mw_t){i, (how == 0 && i == who) ? d : -1, 1, 0};
                c[i] = aco_rt_spawn(NULL, m_waiter2, &w[i]);
            }
            CHECK_EQ(aco_rt_yield(), 0);
            if (how == 0) {
                while (w[who].rc == 1) CHECK_EQ(aco_rt_sleep(MS), 0);
                CHECK_EQ(w[who].rc, -ETIMEDOUT);
                CHECK_GE(w[who].end, d);
            } else {
                CHECK_EQ(aco_rt_cancel(c[who]), 0);
                CHECK_EQ(aco_rt_yield(), 0);
                CHECK_EQ(w[who].rc, -ECANCELED);
            }
            CHECK_EQ(aco_rt_mutex_unlock(&M), 0);
            for (int i = 0; i < 5; i++) CHECK_EQ(aco_rt_join(c[i], -1), 0);
            CHECK_EQ(nlog, 4);
            for (int i = 0, k = 0; i < 5; i++) {
                if (i == who) continue;
                CHECK_EQ(w[i].rc, 0);
                CHECK_EQ(log_[k++], i);
            }
        }
    }
    /* deadline in the past on a held mutex: at once */
    CHECK_EQ(aco_rt_mutex_lock(&M, -1), 0);
    mw_t w = {7, 0, 1, 0};
    aco_rt_co_t* c = aco_rt_spawn(NULL, m_waiter2, &w);
    CHECK_EQ(aco_rt_yield(), 0);
    CHECK_EQ(w.rc, -ETIMEDOUT);
    w = (mw_t){8, aco_rt_now() - 1, 1, 0};
    CHECK_EQ(aco_rt_join(c, -1), 0);
    c = aco_rt_spawn(NULL, m_waiter2, &w);
    CHECK_EQ(aco_rt_yield(), 0);
    CHECK_EQ(w.rc, -ETIMEDOUT);
    CHECK_EQ(aco_rt_join(c, -1), 0);
    CHECK_EQ(aco_rt_mutex_unlock(&M), 0);
}

/* ------------------------------------------------------------------------ */
/* Condition variable                                                       */
/* ------------------------------------------------------------------------ */

static aco_rt_cond_t CV;

static void cv_waiter(void* arg) {
    int id = (int)(intptr_t)arg;
    CHECK_EQ(aco_rt_mutex_lock(&M, -1), 0);
    CHECK_EQ(aco_rt_cond_wait(&CV, &M, -1), 0);
    /* the mutex is ours again */
    CHECK_EQ(aco_rt_mutex_trylock(&M), -EBUSY);
    CHECK_EQ(aco_rt_mutex_lock(&M, 0), -EDEADLK);
    log_[nlog++] = id;
    CHECK_EQ(aco_rt_mutex_unlock(&M), 0);
}

static void cond_signal(void* arg) {
    (void)arg;
    nlog = 0;
    aco_rt_co_t* c[20];
    for (int i = 0; i < 20; i++) c[i] = aco_rt_spawn(NULL, cv_waiter, (void*)(intptr_t)i);
    CHECK_EQ(aco_rt_yield(), 0);
    /* one at a time, in order; half signalled with the mutex held */
    for (int i = 0; i < 20; i++) {
        if (i & 1) CHECK_EQ(aco_rt_mutex_lock(&M, -1), 0);
        aco_rt_cond_signal(&CV);
        if (i & 1) CHECK_EQ(aco_rt_mutex_unlock(&M), 0);
        CHECK_EQ(aco_rt_yield(), 0);
        CHECK_EQ(aco_rt_yield(), 0);
        CHECK_EQ(nlog, i + 1);
        CHECK_EQ(log_[i], i);
    }
    for (int i = 0; i < 20; i++) CHECK_EQ(aco_rt_join(c[i], -1), 0);
    /* nothing waits: signals are lost, not remembered */
    aco_rt_cond_signal(&CV);
    aco_rt_cond_broadcast(&CV);
    CHECK_EQ(aco_rt_mutex_lock(&M, -1), 0);
    int64_t d = aco_rt_now() + 2 * MS;
    CHECK_EQ(aco_rt_cond_wait(&CV, &M, d), -ETIMEDOUT);
    CHECK_GE(aco_rt_now(), d);
    CHECK_EQ(aco_rt_mutex_unlock(&M), 0);
    /* broadcast */
    nlog = 0;
    for (int i = 0; i < 20; i++) c[i] = aco_rt_spawn(NULL, cv_waiter, (void*)(intptr_t)i);
    CHECK_EQ(aco_rt_yield(), 0);
    CHECK_EQ(aco_rt_mutex_lock(&M, -1), 0);
    aco_rt_cond_broadcast(&CV);
    CHECK_EQ(nlog, 0);
    CHECK_EQ(aco_rt_mutex_unlock(&M), 0);
    for (int i = 0; i < 20; i++) CHECK_EQ(aco_rt_join(c[i], -1), 0);
    CHECK_EQ(nlog, 20);
    for (int i = 0; i < 20; i++) CHECK_EQ(log_[i], i);
}

static int cvt_rc;
static int64_t cvt_end;
static void cv_timed(void* arg) {
    int64_t d = *(int64_t*)arg;
    CHECK_EQ(aco_rt_mutex_lock(&M, -1), 0);
    cvt_rc = aco_rt_cond_wait(&CV, &M, d);
    cvt_end = aco_rt_now();
    /* held again, whatever the result */
    CHECK_EQ(aco_rt_mutex_trylock(&M), -EBUSY);
    CHECK_EQ(aco_rt_mutex_lock(&M, -1), -EDEADLK);
    CHECK_EQ(aco_rt_mutex_unlock(&M), 0);
}

static void cond_fail(void* arg) {
    (void)arg;
    /* -EPERM: mutex free, or held by another co */
    CHECK_EQ(aco_rt_cond_wait(&CV, &M, -1), -EPERM);
    /* past deadline: -ETIMEDOUT at once, mutex still held */
    CHECK_EQ(aco_rt_mutex_lock(&M, -1), 0);
    CHECK_EQ(aco_rt_cond_wait(&CV, &M, 0), -ETIMEDOUT);
    CHECK_EQ(aco_rt_cond_wait(&CV, &M, aco_rt_now() - 1), -ETIMEDOUT);
    CHECK_EQ(aco_rt_mutex_unlock(&M), 0);

    /* deadline while another co holds the mutex: it returns once it has
     * the mutex again */
    static int64_t d;
    /* (50 ms: under valgrind, whose first run of code is slow, 2 ms could
     * pass before the co even waits, and it would time out at once; a
     * loaded machine may stop it longer than any margin: then it did not
     * wait, which is checked, and a new co tries again) */
    aco_rt_co_t* c;
    for (int tries = 0;; tries++) {
        d = aco_rt_now() + 50 * MS;
        cvt_rc = 1;
        c = aco_rt_spawn(NULL, cv_timed, &d);
        CHECK_EQ(aco_rt_yield(), 0);
        if (cvt_rc == 1) break;             /* it waits in the cond */
        CHECK_EQ(cvt_rc, -ETIMEDOUT);       /* d passed first: no wait */
        CHECK_GE(cvt_end, d);
        CHECK_EQ(aco_rt_join(c, -1), 0);
        CHECK_LT(tries, 20);
    }
    CHECK_EQ(aco_rt_cond_wait(&CV, &M, -1), -EPERM);   /* not ours */
    CHECK_EQ(aco_rt_mutex_lock(&M, -1), 0);
    CHECK_EQ(aco_rt_sleep(100 * MS), 0);    /* its deadline passes */
    CHECK_EQ(cvt_rc, 1);                    /* still waits for the mutex */
    CHECK_EQ(aco_rt_mutex_unlock(&M), 0);
    CHECK_EQ(aco_rt_join(c, -1), 0);
    CHECK_EQ(cvt_rc, -ETIMEDOUT);
    CHECK_GE(cvt_end, d);

    /* cancel */
    d = -1;
    cvt_rc = 1;
    c = aco_rt_spawn(NULL, cv_timed, &d);
    CHECK_EQ(aco_rt_yield(), 0);
    CHECK_EQ(aco_rt_mutex_lock(&M, -1), 0);
    CHECK_EQ(aco_rt_cancel(c), 0);
    CHECK_EQ(aco_rt_yield(), 0);
    CHECK_EQ(cvt_rc, 1);                    /* needs the mutex first */
    CHECK_EQ(aco_rt_mutex_unlock(&M), 0);
    CHECK_EQ(aco_rt_join(c, -1), 0);
    CHECK_EQ(cvt_rc, -ECANCELED);
    /* cancel with the mutex free */
    cvt_rc = 1;
    c = aco_rt_spawn(NULL, cv_timed, &d);
    CHECK_EQ(aco_rt_yield(), 0);
    CHECK_EQ(aco_rt_cancel(c), 0);
    CHECK_EQ(aco_rt_join(c, -1), 0);
    CHECK_EQ(cvt_rc, -ECANCELED);
    /* a timed-out waiter left the queue: a signal goes to the next one */
    nlog = 0;
    d = aco_rt_now() + MS;
    c = aco_rt_spawn(NULL, cv_timed, &d);
    aco_rt_co_t* c2 = aco_rt_spawn(NULL, cv_waiter, (void*)(intptr_t)5);
    CHECK_EQ(aco_rt_join(c, -1), 0);
    CHECK_EQ(cvt_rc, -ETIMEDOUT);
    aco_rt_cond_signal(&CV);
    CHECK_EQ(aco_rt_join(c2, -1), 0);
    CHECK_EQ(nlog, 1);
    CHECK_EQ(log_[0], 5);
}

/* ------------------------------------------------------------------------ */
/* Semaphore                                                                */
/* ------------------------------------------------------------------------ */

static aco_rt_sem_t SEM;

typedef struct {
    int id;
    int64_t deadline;
    int rc;
} sw_t;

static void sem_waiter(void* arg) {
    sw_t* w = (sw_t*)arg;
    w->rc = aco_rt_sem_wait(&SEM, w->deadline);
    if (w->rc == 0) log_[nlog++] = w->id;
    if (w->rc == -ETIMEDOUT && w->deadline > 0) CHECK_GE(aco_rt_now(), w->deadline);
}

/* A cancelled co: errors about the arguments come first (aco_rt.h, the
 * Sync section); mutex_trylock and mutex_unlock work, and the calls that
 * never wait. */
static void cancelled_sync(void* arg) {
    (void)arg;
    aco_rt_mutex_t m, other;
    aco_rt_cond_t cv;
    aco_rt_sem_t sm;
    aco_rt_mutex_init(&m);
    aco_rt_mutex_init(&other);
    aco_rt_cond_init(&cv);
    aco_rt_sem_init(&sm, 1);
    CHECK_EQ(aco_rt_mutex_lock(&m, -1), 0);
    CHECK_EQ(aco_rt_cancel(aco_rt_self()), 0);
    CHECK_EQ(aco_rt_mutex_lock(&m, -1), -EDEADLK);
    CHECK_EQ(aco_rt_cond_wait(&cv, &other, -1), -EPERM);
    CHECK_EQ(aco_rt_cond_wait(&cv, &m, -1), -ECANCELED);    /* m held again */
    CHECK_EQ(aco_rt_mutex_trylock(&m), -EBUSY);
    CHECK_EQ(aco_rt_mutex_unlock(&m), 0);
    CHECK_EQ(aco_rt_mutex_lock(&m, -1), -ECANCELED);
    CHECK_EQ(aco_rt_mutex_trylock(&m), 0);
    CHECK_EQ(aco_rt_mutex_unlock(&m), 0);
    CHECK_EQ(aco_rt_sem_trywait(&sm), 0);
    aco_rt_sem_post(&sm);
    CHECK_EQ(aco_rt_sem_wait(&sm, -1), -ECANCELED);
}

static void sem_main(void* arg) {
    (void)arg;
    aco_rt_co_t* cc = aco_rt_spawn(NULL, cancelled_sync, NULL);
    CHECK(cc != NULL);
    CHECK_EQ(aco_rt_join(cc, -1), 0);
    /* a negative count is a debt: posts pay it off first */
    aco_rt_sem_init(&SEM, -2);
    aco_rt_sem_post(&SEM);
    aco_rt_sem_post(&SEM);
    CHECK_EQ(aco_rt_sem_trywait(&SEM), -EAGAIN);
    aco_rt_sem_post(&SEM);
    CHECK_EQ(aco_rt_sem_trywait(&SEM), 0);
    CHECK_EQ(aco_rt_sem_trywait(&SEM), -EAGAIN);
    /* ... also while a co waits: the posts that pay it wake nobody */
    aco_rt_sem_init(&SEM, -2);
    nlog = 0;
    sw_t dw = {7, -1, 1};
    aco_rt_co_t* dc = aco_rt_spawn(NULL, sem_waiter, &dw);
    CHECK_EQ(aco_rt_yield(), 0);
    for (int i = 0; i < 2; i++) {
        aco_rt_sem_post(&SEM);
        CHECK_EQ(aco_rt_yield(), 0);
        CHECK_EQ(nlog, 0);
    }
    aco_rt_sem_post(&SEM);
    CHECK_EQ(aco_rt_join(dc, -1), 0);
    CHECK_EQ(dw.rc, 0);
    CHECK_EQ(nlog, 1);
    CHECK_EQ(aco_rt_sem_trywait(&SEM), -EAGAIN);
    /* a post to a count of INT64_MAX leaves it so (no wrap to a debt) */
    aco_rt_sem_init(&SEM, INT64_MAX);
    aco_rt_sem_post(&SEM);
    CHECK_EQ(aco_rt_sem_trywait(&SEM), 0);
    CHECK(SEM.count_ == INT64_MAX - 1);
    aco_rt_sem_init(&SEM, 3);
    for (int i = 0; i < 3; i++) CHECK_EQ(aco_rt_sem_trywait(&SEM), 0);
    CHECK_EQ(aco_rt_sem_trywait(&SEM), -EAGAIN);
    aco_rt_sem_post(&SEM);
    aco_rt_sem_post(&SEM);
    CHECK_EQ(aco_rt_sem_wait(&SEM, 0), 0);
    CHECK_EQ(aco_rt_sem_wait(&SEM, -1), 0);
    CHECK_EQ(aco_rt_sem_wait(&SEM, 0), -ETIMEDOUT);
    int64_t d = aco_rt_now() + 2 * MS;
    CHECK_EQ(aco_rt_sem_wait(&SEM, d), -ETIMEDOUT);
    CHECK_GE(aco_rt_now(), d);

    /* FIFO, and the unit goes to the first waiter */
    nlog = 0;
    sw_t w[30];
    aco_rt_co_t* c[30];
    for (int i = 0; i < 30; i++) {
        w[i] = (sw_t){i, -1, 1};
        c[i] = aco_rt_spawn(NULL, sem_waiter, &w[i]);
    }
    CHECK_EQ(aco_rt_yield(), 0);
    for (int i = 0; i < 30; i++) {
        aco_rt_sem_post(&SEM);
        CHECK_EQ(aco_rt_sem_trywait(&SEM), -EAGAIN);    /* given away */
        if (i % 3 == 0) {
            aco_rt_sem_post(&SEM);
            i++;
        }
        CHECK_EQ(aco_rt_yield(), 0);
        CHECK_EQ(nlog, i + 1);
    }
    for (int i = 0; i < 30; i++) {
        CHECK_EQ(aco_rt_join(c[i], -1), 0);
        CHECK_EQ(w[i].rc, 0);
        CHECK_EQ(log_[i], i);
    }
    CHECK_EQ(aco_rt_sem_trywait(&SEM), -EAGAIN);

    /* a deadline and a cancel take no unit and leave the queue intact */
    nlog = 0;
    d = aco_rt_now() + MS;
    w[0] = (sw_t){0, -1, 1};
    w[1] = (sw_t){1, d, 1};
    w[2] = (sw_t){2, -1, 1};
    w[3] = (sw_t){3, -1, 1};
    for (int i = 0; i < 4; i++) c[i] = aco_rt_spawn(NULL, sem_waiter, &w[i]);
    CHECK_EQ(aco_rt_yield(), 0);
    CHECK_EQ(aco_rt_cancel(c[2]), 0);
    CHECK_EQ(aco_rt_yield(), 0);        /* it leaves */
    while (w[1].rc == 1) CHECK_EQ(aco_rt_sleep(MS), 0);
    CHECK_EQ(w[1].rc, -ETIMEDOUT);
    CHECK_EQ(w[2].rc, -ECANCELED);
    aco_rt_sem_post(&SEM);
    aco_rt_sem_post(&SEM);
    aco_rt_sem_post(&SEM);
    for (int i = 0; i < 4; i++) CHECK_EQ(aco_rt_join(c[i], -1), 0);
    CHECK_EQ(nlog, 2);
    CHECK_EQ(log_[0], 0);
    CHECK_EQ(log_[1], 3);
    CHECK_EQ(aco_rt_sem_trywait(&SEM), 0);          /* the third unit */
    CHECK_EQ(aco_rt_sem_trywait(&SEM), -EAGAIN);
}

/* ------------------------------------------------------------------------ */
/* Wait group                                                               */
/* ------------------------------------------------------------------------ */

static aco_rt_wg_t WG;
static int wg_done_n;

static void wg_worker(void* arg) {
    int n = (int)(intptr_t)arg;
    for (int i = 0; i < n; i++) CHECK_EQ(aco_rt_yield(), 0);
    if (n % 3 == 0) CHECK_EQ(aco_rt_sleep(100000), 0);
    wg_done_n++;
    CHECK_EQ(aco_rt_wg_done(&WG), 0);
}

static int wgw_rc[4];
static void wg_waiter(void* arg) {
    int i = (int)(intptr_t)arg;
    wgw_rc[i] = aco_rt_wg_wait(&WG, -1);
    CHECK_EQ(wg_done_n, 10);
}

static void wg_main(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_wg_wait(&WG, -1), 0);       /* zero: at once */
    CHECK_EQ(aco_rt_wg_wait(&WG, 0), 0);
    CHECK_EQ(aco_rt_wg_done(&WG), -EINVAL);     /* below zero */
    CHECK_EQ(aco_rt_wg_add(&WG, -5), -EINVAL);
    CHECK_EQ(aco_rt_wg_wait(&WG, 0), 0);        /* nothing changed */
    for (int round = 0; round < 2; round++) {
        wg_done_n = 0;
        CHECK_EQ(aco_rt_wg_add(&WG, 7), 0);
        CHECK_EQ(aco_rt_wg_add(&WG, 3), 0);
        CHECK_EQ(aco_rt_wg_add(&WG, -11), -EINVAL);
        aco_rt_co_t* wc[4];
        for (int i = 0; i < 4; i++) {
            wgw_rc[i] = 1;
            wc[i] = aco_rt_spawn(NULL, wg_waiter, (void*)(intptr_t)i);
        }
        for (int i = 0; i < 10; i++)
            CHECK_EQ(aco_rt_detach(aco_rt_spawn(NULL, wg_worker, (void*)(intptr_t)(i * 2))), 0);
        int64_t d = aco_rt_now() + MS / 10;
        int r = aco_rt_wg_wait(&WG, d);
        if (r == -ETIMEDOUT) CHECK_GE(aco_rt_now(), d);
        else CHECK_EQ(r, 0);
        CHECK_EQ(aco_rt_wg_wait(&WG, -1), 0);
        CHECK_EQ(wg_done_n, 10);
        for (int i = 0; i < 4; i++) {
            CHECK_EQ(aco_rt_join(wc[i], -1), 0);
            CHECK_EQ(wgw_rc[i], 0);
        }
    }
    /* a deadline while the counter stays above zero */
    CHECK_EQ(aco_rt_wg_add(&WG, 1), 0);
    int64_t d = aco_rt_now() + 2 * MS;
    CHECK_EQ(aco_rt_wg_wait(&WG, d), -ETIMEDOUT);
    CHECK_GE(aco_rt_now(), d);
    CHECK_EQ(aco_rt_wg_wait(&WG, 0), -ETIMEDOUT);
    CHECK_EQ(aco_rt_wg_add(&WG, -2), -EINVAL);
    CHECK_EQ(aco_rt_wg_add(&WG, -1), 0);
    CHECK_EQ(aco_rt_wg_wait(&WG, 0), 0);
}

/* ------------------------------------------------------------------------ */
/* Stress                                                                   */
/* ------------------------------------------------------------------------ */

#define NSTRESS 1000
#define ROUNDS 10
static long counter;
static aco_rt_co_t* holder_co;
static long locked_ok, timed_out;

static void stress_co(void* arg) {
    uint64_t rng = (uint64_t)(uintptr_t)arg * 7919 + 1;
    aco_rt_co_t* me = aco_rt_self();
    for (int r = 0; r < ROUNDS; r++) {
        int64_t d = -1;
        if (test_rand(&rng) % 4 == 0) d = aco_rt_now() + (int64_t)(test_rand(&rng) % (MS / 2));
        int rc = aco_rt_mutex_lock(&M, d);
        if (rc == -ETIMEDOUT) {
            CHECK_GE(aco_rt_now(), d);
            CHECK(holder_co != me);
            CHECK_EQ(aco_rt_mutex_unlock(&M), -EPERM);
            timed_out++;
            continue;
        }
        CHECK_EQ(rc, 0);
        CHECK(holder_co == NULL);
        holder_co = me;
        long v = counter;
        CHECK_EQ(aco_rt_yield(), 0);
        CHECK(holder_co == me);
        counter = v + 1;
        holder_co = NULL;
        locked_ok++;
        CHECK_EQ(aco_rt_mutex_unlock(&M), 0);
        if (test_rand(&rng) % 2) CHECK_EQ(aco_rt_yield(), 0);
    }
}

static void stress_main(void* arg) {
    (void)arg;
    counter = locked_ok = timed_out = 0;
    holder_co = NULL;
    static aco_rt_co_t* c[NSTRESS];
    for (int i = 0; i < NSTRESS; i++) c[i] = aco_rt_spawn(NULL, stress_co, (void*)(intptr_t)i);
    for (int i = 0; i < NSTRESS; i++) CHECK_EQ(aco_rt_join(c[i], -1), 0);
    CHECK_EQ(counter, locked_ok);
    CHECK_EQ(locked_ok + timed_out, NSTRESS * ROUNDS);
    CHECK_GT(locked_ok, NSTRESS * ROUNDS / 2);
    CHECK_EQ(aco_rt_mutex_trylock(&M), 0);
    CHECK_EQ(aco_rt_mutex_unlock(&M), 0);
}

/* bounded buffer: mutex + not_full / not_empty */
#define BB_CAP 8
#define BB_PROD 20
#define BB_ITEMS 500
static struct {
    aco_rt_mutex_t m;
    aco_rt_cond_t not_full, not_empty;
    uint64_t buf[BB_CAP];
    int head, len, closed;
} BB;
static uint64_t bb_sum_in, bb_sum_out;
static long bb_count_out;
static int bb_last[BB_PROD];

static void bb_producer(void* arg) {
    int id = (int)(intptr_t)arg;
    for (int i = 0; i < BB_ITEMS; i++) {
        CHECK_EQ(aco_rt_mutex_lock(&BB.m, -1), 0);
        while (BB.len == BB_CAP) CHECK_EQ(aco_rt_cond_wait(&BB.not_full, &BB.m, -1), 0);
        uint64_t v = ((uint64_t)id << 32) | (uint64_t)i;
        BB.buf[(BB.head + BB.len++) % BB_CAP] = v;
        bb_sum_in += v;
        aco_rt_cond_signal(&BB.not_empty);
        CHECK_EQ(aco_rt_mutex_unlock(&BB.m), 0);
        if (i % 7 == 0) CHECK_EQ(aco_rt_yield(), 0);
    }
}

static void bb_consumer(void* arg) {
    (void)arg;
    for (;;) {
        CHECK_EQ(aco_rt_mutex_lock(&BB.m, -1), 0);
        while (BB.len == 0 && !BB.closed) {
            int r = aco_rt_cond_wait(&BB.not_empty, &BB.m, aco_rt_now() + MS);
            CHECK(r == 0 || r == -ETIMEDOUT);
        }
        if (BB.len == 0) {
            CHECK_EQ(aco_rt_mutex_unlock(&BB.m), 0);
            return;
        }
        uint64_t v = BB.buf[BB.head];
        BB.head = (BB.head + 1) % BB_CAP;
        BB.len--;
        int id = (int)(v >> 32), seq = (int)(v & 0xffffffff);
        CHECK_EQ(seq, bb_last[id] + 1);     /* per producer, in order */
        bb_last[id] = seq;
        bb_sum_out += v;
        bb_count_out++;
        aco_rt_cond_signal(&BB.not_full);
        CHECK_EQ(aco_rt_mutex_unlock(&BB.m), 0);
    }
}

static void bb_main(void* arg) {
    (void)arg;
    memset(&BB, 0, sizeof(BB));
    bb_sum_in = bb_sum_out = 0;
    bb_count_out = 0;
    for (int i = 0; i < BB_PROD; i++) bb_last[i] = -1;
    aco_rt_co_t* p[BB_PROD];
    aco_rt_co_t* c[BB_PROD];
    for (int i = 0; i < BB_PROD; i++) {
        p[i] = aco_rt_spawn(NULL, bb_producer, (void*)(intptr_t)i);
        c[i] = aco_rt_spawn(NULL, bb_consumer, NULL);
    }
    for (int i = 0; i < BB_PROD; i++) CHECK_EQ(aco_rt_join(p[i], -1), 0);
    CHECK_EQ(aco_rt_mutex_lock(&BB.m, -1), 0);
    BB.closed = 1;
    aco_rt_cond_broadcast(&BB.not_empty);
    CHECK_EQ(aco_rt_mutex_unlock(&BB.m), 0);
    for (int i = 0; i < BB_PROD; i++) CHECK_EQ(aco_rt_join(c[i], -1), 0);
    CHECK_EQ(bb_count_out, BB_PROD * BB_ITEMS);
    CHECK_EQ(bb_sum_out, bb_sum_in);
    for (int i = 0; i < BB_PROD; i++) CHECK_EQ(bb_last[i], BB_ITEMS - 1);
}

/* ------------------------------------------------------------------------ */
/* The contract of aco_rt_wg_add at the edge                                */
/* ------------------------------------------------------------------------ */

static void wg_edge(void* arg) {
    (void)arg;
    aco_rt_wg_t wg;
    aco_rt_wg_init(&wg);
    CHECK_EQ(aco_rt_wg_add(&wg, 1), 0);
    /* -EINVAL if it would go below 0, nothing changes */
    CHECK_EQ(aco_rt_wg_add(&wg, INT64_MIN), -EINVAL);
    CHECK_EQ(aco_rt_wg_wait(&wg, 0), -ETIMEDOUT);
    CHECK_EQ(aco_rt_wg_done(&wg), 0);
    CHECK_EQ(aco_rt_wg_wait(&wg, 0), 0);
    CHECK_EQ(aco_rt_wg_add(&wg, INT64_MIN), -EINVAL);
    CHECK_EQ(aco_rt_wg_wait(&wg, 0), 0);
}

/* A co that ends holding a mutex: it stays held, and no co that comes
 * after passes for its holder (a record is reused at once when free: the
 * next spawn would get the holder's). */
static aco_rt_mutex_t MH;
static aco_rt_co_t* mh_holder;

static void mh_lock_and_end(void* arg) {
    mh_holder = aco_rt_self();
    CHECK_EQ(aco_rt_mutex_lock(&MH, -1), 0);
    if (arg) aco_rt_exit();
}

static void mh_not_holder(void* arg) {
    (void)arg;
    CHECK(aco_rt_self() != mh_holder);      /* a record of its own */
    CHECK_EQ(aco_rt_mutex_unlock(&MH), -EPERM);
    CHECK_EQ(aco_rt_mutex_trylock(&MH), -EBUSY);
    CHECK_EQ(aco_rt_mutex_lock(&MH, aco_rt_now() + MS), -ETIMEDOUT);
}

static void mutex_holder_gone(void* arg) {
    (void)arg;
    for (int how = 0; how < 2; how++) {         /* 0: returns, 1: aco_rt_exit */
        aco_rt_mutex_init(&MH);
        CHECK_EQ(aco_rt_join(aco_rt_spawn(NULL, mh_lock_and_end, how ? &MH : NULL), -1), 0);
        for (int i = 0; i < 3; i++)
            CHECK_EQ(aco_rt_join(aco_rt_spawn(NULL, mh_not_holder, NULL), -1), 0);
    }
}

/* The same when the holder is destroyed with its scheduler: parked while
 * holding it, or handed it by an unlock and not run since (the scheduler
 * stopped first). */
static aco_rt_sched_t* mh_s;
static aco_rt_sem_t mh_never;                   /* never posted */

static void mh_hold_park(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_mutex_lock(&MH, -1), 0);
    aco_rt_sched_stop(mh_s);
    aco_rt_sem_wait(&mh_never, -1);
    CHECK(0);
}

static void mh_hand_park(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_mutex_lock(&MH, -1), 0);
    CHECK_EQ(aco_rt_yield(), 0);                /* mh_blocked queues */
    aco_rt_sched_stop(mh_s);
    CHECK_EQ(aco_rt_mutex_unlock(&MH), 0);      /* hands it over */
    aco_rt_sem_wait(&mh_never, -1);             /* the run returns */
    CHECK(0);
}

static void mh_blocked(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_mutex_lock(&MH, -1), 0);    /* never comes back */
    CHECK(0);
}

static void mutex_holder_freed(int backend) {
    for (int handed = 0; handed < 2; handed++) {
        aco_rt_mutex_init(&MH);
        aco_rt_sem_init(&mh_never, 0);
        mh_s = test_sched_on(backend, NULL);
        if (handed) {
            CHECK_EQ(aco_rt_detach(aco_rt_spawn(mh_s, mh_hand_park, NULL)), 0);
            mh_holder = aco_rt_spawn(mh_s, mh_blocked, NULL);
            CHECK_EQ(aco_rt_detach(mh_holder), 0);
        } else {
            mh_holder = aco_rt_spawn(mh_s, mh_hold_park, NULL);
            CHECK_EQ(aco_rt_detach(mh_holder), 0);
        }
        CHECK_EQ(aco_rt_sched_run(mh_s), 0);    /* stopped */
        aco_rt_sched_free(mh_s);
        aco_rt_sched_t* s = test_sched_on(backend, NULL);
        for (int i = 0; i < 3; i++) CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, mh_not_holder, NULL)), 0);
        test_run(s);
        aco_rt_sched_free(s);
    }
}

static void body(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    test_go(s, mutex_holder_gone, NULL);
    test_go(s, mutex_fifo, NULL);
    test_go(s, mutex_leave, NULL);
    test_go(s, cond_signal, NULL);
    test_go(s, cond_fail, NULL);
    test_go(s, sem_main, NULL);
    test_go(s, wg_main, NULL);
    test_go(s, stress_main, NULL);
    test_go(s, bb_main, NULL);
}

static void body_last(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    test_go(s, wg_edge, NULL);
}

int main(void) {
    test_on_backends(NULL, body, NULL);
    test_on_backends(NULL, body_last, NULL);
    int b[2], nb = test_backends(b, 2);
    for (int i = 0; i < nb; i++) mutex_holder_freed(b[i]);
    return 0;
}
