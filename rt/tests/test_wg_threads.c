/* test_wg_threads.c - a wait group between a plain thread's done and the
 * cos of a pool thread, each waiter free to drop the group the moment its
 * wait returns 0:
 *  - freed: the one waiter unmaps the group's page as soon as it is woken;
 *  - added to again: the first of 8 waiters woken starts a new round (add
 *    1); the other 7, queued when the count reached 0, still go on (0, not
 *    their deadline's -ETIMEDOUT).
 * The done's thread runs on the pool thread's CPU under SCHED_IDLE: the
 * wake it sends preempts it at once, so the woken co runs (and frees, or
 * adds) while the done is still in its call.  The done once took the
 * waiters one at a time, taking the group's lock again after each wake:
 * it locked the unmapped page (SIGSEGV), or found the new round's count
 * and left the other waiters asleep.
 */
#define _GNU_SOURCE
#include "rt_test.h"

#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <sys/mman.h>

#define WAITERS 8

static aco_rt_wg_t* wg;                 /* on a page of its own */
static int queued_want;                 /* waiters the done waits to see queued */
static int rc[WAITERS], returned;

/* Waiters queued on wg now (the lock taken as the runtime takes it: a
 * look for the test, not the program's business). */
static int queued(void) {
    while (__atomic_exchange_n(&wg->lock_, 1, __ATOMIC_ACQUIRE)) sched_yield();
    int n = 0;
    for (void** w = wg->q_.head_; w; w = *w) n++;   /* (next: a waiter's first word) */
    __atomic_store_n(&wg->lock_, 0, __ATOMIC_RELEASE);
    return n;
}

static void* doner(void* arg) {
    (void)arg;
    struct sched_param sp = {0};
    (void)sched_setscheduler(0, SCHED_IDLE, &sp);   /* (refused: a weaker test) */
    while (queued() < queued_want) sched_yield();
    CHECK_EQ(aco_rt_wg_done(wg), 0);
    return NULL;
}

static void new_round(int waiters) {
    wg = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(wg != MAP_FAILED);
    aco_rt_wg_init(wg);
    CHECK_EQ(aco_rt_wg_add(wg, 1), 0);
    queued_want = waiters;
    returned = 0;
}

static void run_doner(aco_rt_pool_t* p) {
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, doner, NULL), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
    CHECK_EQ(aco_rt_pool_wait(p, ACO_RT_POOL_DRAIN, aco_rt_now() + 60000 * MS), 0);
}

static void freeing_waiter(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_wg_wait(wg, -1), 0);
    CHECK_EQ(munmap(wg, 4096), 0);
    returned++;
}

static void reusing_waiter(void* arg) {
    int i = (int)(intptr_t)arg;
    rc[i] = aco_rt_wg_wait(wg, aco_rt_now() + 2000 * MS);
    if (returned++ == 0) CHECK_EQ(aco_rt_wg_add(wg, 1), 0);   /* the next round */
}

static void rounds(int backend) {
    aco_rt_pool_opts_t o = {.threads = 1};
    o.sched.backend = backend;
    aco_rt_pool_t* p = aco_rt_pool_new(&o);
    CHECK(p != NULL);
    aco_rt_sched_t* s = aco_rt_pool_sched(p, 0);
    int n = FEW ? 20 : 100;
    for (int r = 0; r < n; r++) {
        new_round(1);
        aco_rt_co_t* c = aco_rt_spawn(s, freeing_waiter, NULL);
        CHECK(c != NULL);
        CHECK_EQ(aco_rt_detach(c), 0);
        run_doner(p);
        CHECK_EQ(returned, 1);
    }
    for (int r = 0; r < n; r++) {
        new_round(WAITERS);
        for (int i = 0; i < WAITERS; i++) {
            rc[i] = 1;
            aco_rt_co_t* c = aco_rt_spawn(s, reusing_waiter, (void*)(intptr_t)i);
            CHECK(c != NULL);
            CHECK_EQ(aco_rt_detach(c), 0);
        }
        run_doner(p);
        CHECK_EQ(returned, WAITERS);
        for (int i = 0; i < WAITERS; i++) CHECK_EQ(rc[i], 0);
        CHECK_EQ(aco_rt_wg_done(wg), 0);            /* (the new round's 1) */
        CHECK_EQ(munmap(wg, 4096), 0);
    }
    CHECK_EQ(aco_rt_pool_free(p), 0);
}

int main(void) {
    test_watchdog();
    /* every thread (the pool's, the done's) on one CPU of ours */
    cpu_set_t set, one;
    CHECK_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
    CPU_ZERO(&one);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set)) { CPU_SET(c, &one); break; }
    CHECK_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
    int b[2], nb = test_backends(b, 2);
    for (int i = 0; i < nb; i++) {
        test_backend_label = test_backend_str(b[i]);
        rounds(b[i]);
    }
    test_backend_label = "";
    printf("ok\n");
    return 0;
}
