/* test_cancel_busy.c - a cancel from another thread reaches a co that never
 * waits.  aco_rt.h: after aco_rt_cancel, every later blocking call of the
 * co fails with -ECANCELED "whether or not they would have had to wait (a
 * cancelled co cannot go on looping through calls that happen not to
 * block)", and a co of another thread's scheduler "hears it soon".  A co of
 * pool thread 0 loops on calls that never block (a buffered channel's send
 * and receive, with and without a deadline; select; a semaphore's wait and
 * post; a mutex's lock and unlock; aco_rt_cancelled), never letting its
 * scheduler's loop run; a plain thread, or a co of thread 1, cancels it:
 * the loop must end with -ECANCELED within one more round than it had made
 * when aco_rt_cancel returned (a round under way may still succeed), and
 * within 10 s (else: never heard).  Under aco_rt_cancel_shield the
 * calls go on succeeding, and fail once the shield is off.
 */
#include "rt_test.h"

#include <pthread.h>
#include <stdatomic.h>

enum { K_CHAN, K_CHAN_DL0, K_SELECT, K_SEM, K_MUTEX, K_CANCELLED, K_SHIELD, K_N };
static const char* kind_name[K_N] = {"chan", "chan deadline 0", "select", "sem", "mutex",
                                     "aco_rt_cancelled", "shield"};

static aco_rt_pool_t* pool;
static aco_rt_chan_t* ch;
static aco_rt_sem_t sem;
static aco_rt_mutex_t mtx;
static aco_rt_co_t* victim;
static int kind;
static atomic_long rounds;
static atomic_int started;
static long rounds_at_end;      /* -1: still succeeding after 10 s */
static int end_rc;
static int shield_ok;           /* K_SHIELD: the shielded rounds after the cancel succeeded */
static atomic_int cancelled;    /* the canceller's aco_rt_cancel returned */

/* One round of calls that never block: 0, or the error of the one that failed. */
static int one_round(void) {
    uint64_t x = 7, y = 0;
    int rc, err;
    switch (kind) {
    case K_CHAN:
    case K_SHIELD:
        if ((rc = aco_rt_chan_send(ch, &x, -1)) != 0) return rc;
        if ((rc = aco_rt_chan_recv(ch, &y, -1)) != 0) return rc;
        CHECK_EQ(y, 7);
        return 0;
    case K_CHAN_DL0:
        if ((rc = aco_rt_chan_send(ch, &x, 0)) != 0) return rc;
        return aco_rt_chan_recv(ch, &y, 0);
    case K_SELECT: {
        aco_rt_case_t c[1] = {{ch, ACO_RT_SEND, &x}};
        if ((rc = aco_rt_chan_select(c, 1, &err, -1)) != 0) return rc < 0 ? rc : -1000;
        c[0].op = ACO_RT_RECV;
        c[0].elem = &y;
        rc = aco_rt_chan_select(c, 1, &err, -1);
        return rc < 0 ? rc : rc == 0 ? 0 : -1000;
    }
    case K_SEM:
        if ((rc = aco_rt_sem_wait(&sem, -1)) != 0) return rc;
        aco_rt_sem_post(&sem);
        return 0;
    case K_MUTEX:
        if ((rc = aco_rt_mutex_lock(&mtx, -1)) != 0) return rc;
        CHECK_EQ(aco_rt_mutex_unlock(&mtx), 0);
        return 0;
    default:
        return aco_rt_cancelled() ? -ECANCELED : 0;
    }
}

static void victim_co(void* arg) {
    (void)arg;
    int64_t give_up = aco_rt_now() + 10000 * (int64_t)1000000;
    if (kind == K_SHIELD) {
        CHECK_EQ(aco_rt_cancel_shield(1), 0);
        atomic_store(&started, 1);
        while (!atomic_load(&cancelled)) {
            CHECK_EQ(one_round(), 0);
            CHECK_LT(aco_rt_now(), give_up);
        }
        /* the cancel is on its way or taken: the shield keeps it */
        for (int i = 0; i < 1000; i++) CHECK_EQ(one_round(), 0);
        shield_ok = 1;
        CHECK_EQ(aco_rt_cancel_shield(0), 1);
    }
    atomic_store(&started, 1);
    for (;;) {
        int rc = one_round();
        if (rc != 0) {
            end_rc = rc;
            break;
        }
        atomic_fetch_add(&rounds, 1);
        if (aco_rt_now() > give_up) {
            rounds_at_end = -1;
            return;
        }
    }
    rounds_at_end = atomic_load(&rounds);
}

static long rounds_at_cancel;

static void cancel_victim(void) {
    while (!atomic_load(&started) || atomic_load(&rounds) < 1000) {
        if (aco_rt_self()) aco_rt_sleep(100000);
        else usleep(100);
        if (kind == K_SHIELD && atomic_load(&started)) break;
    }
    CHECK_EQ(aco_rt_cancel(victim), 0);
    rounds_at_cancel = atomic_load(&rounds);
    atomic_store(&cancelled, 1);
}

static void canceller_co(void* arg) {
    (void)arg;
    cancel_victim();
}

static void run(int k, int from_co) {
    kind = k;
    atomic_store(&rounds, 0);
    atomic_store(&started, 0);
    atomic_store(&cancelled, 0);
    rounds_at_end = 0;
    end_rc = 0;
    shield_ok = 0;
    CHECK((ch = aco_rt_chan_new(sizeof(uint64_t), 4)) != NULL);
    aco_rt_sem_init(&sem, 1);
    aco_rt_mutex_init(&mtx);
    CHECK((victim = aco_rt_spawn(aco_rt_pool_sched(pool, 0), victim_co, NULL)) != NULL);
    if (from_co)
        CHECK_EQ(aco_rt_detach(aco_rt_spawn(aco_rt_pool_sched(pool, 1), canceller_co, NULL)), 0);
    else
        cancel_victim();
    while (!atomic_load(&cancelled)) usleep(100);
    CHECK_EQ(aco_rt_pool_wait(pool, ACO_RT_POOL_DRAIN, aco_rt_in_ms(20000)), 0);
    CHECK_EQ(aco_rt_detach(victim), 0);        /* (it finished: freed now) */
    printf("%-16s cancelled from %s: %ld rounds when the cancel returned, %ld at -ECANCELED\n",
           kind_name[k], from_co ? "a co of thread 1" : "a plain thread", rounds_at_cancel,
           rounds_at_end);
    if (rounds_at_end < 0)
        TEST_FAIL_AT(__FILE__, __LINE__, "%s: the co never heard the cancel in 10 s", kind_name[k]);
    CHECK_EQ(end_rc, -ECANCELED);
    CHECK_LE(rounds_at_end - rounds_at_cancel, 1);
    if (k == K_SHIELD) CHECK(shield_ok);
    CHECK_EQ(aco_rt_chan_free(ch), 0);
}

int main(void) {
    aco_rt_pool_opts_t o = {0};
    o.threads = 2;
    const char* b = getenv("ACO_RT_TEST_BACKENDS");
    if (b && strstr(b, "uring") == NULL) o.sched.backend = ACO_RT_BACKEND_EPOLL;
    CHECK((pool = aco_rt_pool_new(&o)) != NULL);
    for (int k = 0; k < K_N; k++)
        for (int from_co = 0; from_co < 2; from_co++) run(k, from_co);
    aco_rt_pool_free(pool);
    return 0;
}
