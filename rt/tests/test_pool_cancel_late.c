/* test_pool_cancel_late.c - aco_rt_pool_wait(CANCEL) cancels the cos there
 * are, never one spawned after the cancel where it was spawned, even when
 * a sibling thread whose own cancel has not run yet steals it.
 *
 * The race, made to happen each round: thread 0 has cos parked, thread 1
 * a co that spins without parking.  The pool's cancel reaches thread 0
 * first, whose cancelled cos each spawn new cos (aco_rt_pool_spawn: into
 * thread 0's queue, which siblings steal from).  The first of them ends
 * at once (its spawns are then published), the next spins until thread 1
 * has run one of its new cos, so that thread 0 does not start them all
 * itself.  Thread 1's spinner ends once the first is out; idle, thread 1
 * steals before it looks at its own cancel.  Each new co must run
 * uncancelled. */
#include "rt_test.h"

#include <sched.h>
#include <stdatomic.h>

enum { PARKED = 4, LATE = 8, ROUNDS = 40 };

static aco_rt_pool_t* pool;
static aco_rt_sem_t never;
static _Atomic int parked, cancelled, out, late_ok, late_bad, late_on[2], spinning;

static void spin_ns(int64_t ns) {
    int64_t end = aco_rt_now() + ns;
    while (aco_rt_now() < end) {}
}

static void late_fn(void* arg) {
    (void)arg;
    int ok = aco_rt_cancel_check() == 0 && aco_rt_yield() == 0 && aco_rt_sleep(0) == 0 &&
             aco_rt_cancel_check() == 0;
    atomic_fetch_add(ok ? &late_ok : &late_bad, 1);
    atomic_fetch_add(&late_on[aco_rt_sched_current() == aco_rt_pool_sched(pool, 1)], 1);
}

static void parked_fn(void* arg) {
    (void)arg;
    atomic_fetch_add(&parked, 1);
    CHECK_EQ(aco_rt_sem_wait(&never, -1), -ECANCELED);
    atomic_fetch_add(&cancelled, 1);
    for (int i = 0; i < LATE; i++)
        CHECK_EQ(aco_rt_detach(aco_rt_pool_spawn(pool, late_fn, NULL, NULL)), 0);
    /* Its spawns are published when it ends: the first ends at once, the
     * next keeps thread 0 busy until thread 1 has run one of them (at
     * most 100 ms: a thread 1 kept off its CPU that long finds them
     * started, and the round tests nothing). */
    if (atomic_fetch_add(&out, 1) == 0) return;
    int64_t end = aco_rt_now() + 100 * MS;
    while (atomic_load(&late_on[1]) == 0 && aco_rt_now() < end) {}
}

/* On thread 1: busy until thread 0's first cancelled co is out (at most
 * a second: the round then tests nothing, and says so). */
static void spinner_fn(void* arg) {
    (void)arg;
    atomic_store(&spinning, 1);
    int64_t end = aco_rt_now() + 1000 * MS;
    while (atomic_load(&out) == 0 && aco_rt_now() < end) {}
    spin_ns(50 * 1000);
}

static void body(aco_rt_pool_t* p) {
    pool = p;
    aco_rt_sem_init(&never, 0);
    int stolen_rounds = 0;
    for (int round = 0; round < ROUNDS; round++) {
        atomic_store(&parked, 0);
        atomic_store(&cancelled, 0);
        atomic_store(&out, 0);
        atomic_store(&late_ok, 0);
        atomic_store(&late_bad, 0);
        atomic_store(&late_on[0], 0);
        atomic_store(&late_on[1], 0);
        atomic_store(&spinning, 0);
        for (int i = 0; i < PARKED; i++)
            CHECK_EQ(aco_rt_detach(aco_rt_spawn(aco_rt_pool_sched(p, 0), parked_fn, NULL)), 0);
        while (atomic_load(&parked) < PARKED) sched_yield();
        CHECK_EQ(aco_rt_detach(aco_rt_spawn(aco_rt_pool_sched(p, 1), spinner_fn, NULL)), 0);
        while (!atomic_load(&spinning)) sched_yield();
        CHECK_EQ(aco_rt_pool_wait(p, ACO_RT_POOL_CANCEL, aco_rt_in_ms(20000)), 0);
        int c = atomic_load(&cancelled), bad = atomic_load(&late_bad), ok = atomic_load(&late_ok);
        CHECK_EQ(c, PARKED);
        CHECK_EQ(bad, 0);
        CHECK_EQ(ok, PARKED * LATE);
        if (atomic_load(&late_on[1])) stolen_rounds++;
    }
    /* The test tests something only if thread 1 took new cos: it must in
     * most rounds (not in all: a slow thread 1 may find them started). */
    printf("test_pool_cancel_late: [%s] %d of %d rounds had cos stolen\n", test_backend_label,
           stolen_rounds, ROUNDS);
    CHECK_GE(stolen_rounds, 1);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    test_on_pools(2, body, NULL);
    printf("test_pool_cancel_late: ok\n");
    return 0;
}
