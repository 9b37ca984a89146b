/* test_pthread_threads.c - the pthread-like face across the threads of a
 * pool: 40 cos on 2 threads share a recursive mutex, condition variables
 * (a bounded buffer), once (a blocking init), a key with a destructor, an
 * rwlock and a barrier; create/join between them.  Every count checked.
 * Then a condition variable destroyed and unmapped by a co of one thread
 * right after its broadcast, while the waiter of the other thread has a
 * deadline due about then (POSIX lets the destroy: no co is blocked on it
 * once the broadcast took it, or its deadline did and it left): the
 * deadline's end of the wait once touched the memory after the broadcast
 * had taken the waiter (SIGSEGV).
 */
#include "rt_test.h"
#include "../aco_rt_pthread.h"
#include <sched.h>
#include <stdint.h>
#include <sys/mman.h>

#define N 40
static aco_rt_pthread_mutex_t M = ACO_RT_PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static aco_rt_pthread_cond_t not_full = ACO_RT_PTHREAD_COND_INITIALIZER;
static aco_rt_pthread_cond_t not_empty = ACO_RT_PTHREAD_COND_INITIALIZER;
static aco_rt_pthread_once_t O = ACO_RT_PTHREAD_ONCE_INIT;
static aco_rt_pthread_rwlock_t RW = ACO_RT_PTHREAD_RWLOCK_INITIALIZER;
static aco_rt_pthread_barrier_t B;
static aco_rt_pthread_key_t K;
static long counter, shared_rw;
static int buf[16], head, count, done_producers, once_runs;
static long consumed, dtors;

static void init(void) { once_runs++; aco_rt_sleep(2 * MS); }
static void dt(void* v) { (void)v; __atomic_fetch_add(&dtors, 1, __ATOMIC_RELAXED); }

static void* child(void* arg) { return (void*)((intptr_t)arg * 2); }

static void co(void* arg) {
    int id = (int)(intptr_t)arg;
    CHECK_EQ(aco_rt_pthread_once(&O, init), 0);
    CHECK_EQ(once_runs, 1);
    CHECK_EQ(aco_rt_pthread_setspecific(K, &buf[0]), 0);
    for (int i = 0; i < 500; i++) {
        CHECK_EQ(aco_rt_pthread_mutex_lock(&M), 0);
        CHECK_EQ(aco_rt_pthread_mutex_lock(&M), 0);
        counter++;
        if (i % 50 == 0) aco_rt_yield();
        CHECK_EQ(aco_rt_pthread_mutex_unlock(&M), 0);
        CHECK_EQ(aco_rt_pthread_mutex_unlock(&M), 0);
    }
    int r = aco_rt_pthread_barrier_wait(&B);
    CHECK(r == 0 || r == ACO_RT_PTHREAD_BARRIER_SERIAL_THREAD);
    for (int i = 0; i < 100; i++) {
        if (id % 4 == 0) {
            CHECK_EQ(aco_rt_pthread_rwlock_wrlock(&RW), 0);
            shared_rw++;
            CHECK_EQ(aco_rt_pthread_rwlock_unlock(&RW), 0);
        } else {
            CHECK_EQ(aco_rt_pthread_rwlock_rdlock(&RW), 0);
            (void)__atomic_load_n(&shared_rw, __ATOMIC_RELAXED);
            CHECK_EQ(aco_rt_pthread_rwlock_unlock(&RW), 0);
        }
    }
    if (id % 2 == 0) {              /* producer */
        for (int i = 0; i < 200; i++) {
            CHECK_EQ(aco_rt_pthread_mutex_lock(&M), 0);
            while (count == 16) CHECK_EQ(aco_rt_pthread_cond_wait(&not_full, &M), 0);
            buf[(head + count++) % 16] = 1;
            aco_rt_pthread_cond_signal(&not_empty);
            CHECK_EQ(aco_rt_pthread_mutex_unlock(&M), 0);
        }
        CHECK_EQ(aco_rt_pthread_mutex_lock(&M), 0);
        if (++done_producers == N / 2) aco_rt_pthread_cond_broadcast(&not_empty);
        CHECK_EQ(aco_rt_pthread_mutex_unlock(&M), 0);
    } else {
        for (;;) {
            CHECK_EQ(aco_rt_pthread_mutex_lock(&M), 0);
            while (count == 0 && done_producers < N / 2) {
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                ts.tv_nsec += 1000000;
                if (ts.tv_nsec >= 1000000000) { ts.tv_sec++; ts.tv_nsec -= 1000000000; }
                int e = aco_rt_pthread_cond_timedwait(&not_empty, &M, &ts);
                CHECK(e == 0 || e == ETIMEDOUT);
            }
            if (count == 0) { CHECK_EQ(aco_rt_pthread_mutex_unlock(&M), 0); break; }
            head = (head + 1) % 16; count--; consumed++;
            aco_rt_pthread_cond_signal(&not_full);
            CHECK_EQ(aco_rt_pthread_mutex_unlock(&M), 0);
        }
    }
    aco_rt_pthread_t t; void* rv;
    CHECK_EQ(aco_rt_pthread_create(&t, NULL, child, (void*)(intptr_t)id), 0);
    CHECK_EQ(aco_rt_pthread_join(t, &rv), 0);
    CHECK_EQ((intptr_t)rv, id * 2);
}

static aco_rt_pthread_cond_t* fc;
static aco_rt_pthread_mutex_t fm = ACO_RT_PTHREAD_MUTEX_INITIALIZER;
static struct timespec f_abs;
static int64_t f_due, f_off;
static int f_waiting, f_timedout, f_woken;

static void f_waiter(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_pthread_mutex_lock(&fm), 0);
    __atomic_store_n(&f_waiting, 1, __ATOMIC_RELEASE);
    int r = aco_rt_pthread_cond_clockwait(fc, &fm, CLOCK_MONOTONIC, &f_abs);
    CHECK(r == 0 || r == ETIMEDOUT);
    if (r) f_timedout++;
    else f_woken++;
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&fm), 0);
}
static void f_broadcaster(void* arg) {
    (void)arg;
    while (!__atomic_load_n(&f_waiting, __ATOMIC_ACQUIRE)) {}
    while (aco_rt_now() < f_due + f_off) {}
    /* (the mutex: the waiter is on the queue by then, not about to be) */
    CHECK_EQ(aco_rt_pthread_mutex_lock(&fm), 0);
    CHECK_EQ(aco_rt_pthread_cond_broadcast(fc), 0);
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&fm), 0);
    int r;
    /* (EBUSY: a waiter whose deadline came first is still leaving) */
    while ((r = aco_rt_pthread_cond_destroy(fc)) == EBUSY) sched_yield();
    CHECK_EQ(r, 0);
    CHECK_EQ(munmap(fc, 4096), 0);
}
static void freed_after_broadcast(aco_rt_pool_t* p) {
    int rounds = FEW ? 300 : 2000;
    for (int i = 0; i < rounds; i++) {
        fc = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        CHECK(fc != MAP_FAILED);
        aco_rt_pthread_condattr_t ca;
        CHECK_EQ(aco_rt_pthread_condattr_init(&ca), 0);
        CHECK_EQ(aco_rt_pthread_condattr_setclock(&ca, CLOCK_MONOTONIC), 0);
        CHECK_EQ(aco_rt_pthread_cond_init(fc, &ca), 0);
        f_waiting = 0;
        f_due = aco_rt_now() + 300 * 1000;
        f_abs.tv_sec = f_due / 1000000000;
        f_abs.tv_nsec = f_due % 1000000000;
        f_off = -40 * 1000 + (i % 60) * 1000;   /* -40 us .. +19 us */
        aco_rt_co_t* w = aco_rt_spawn(aco_rt_pool_sched(p, 0), f_waiter, NULL);
        aco_rt_co_t* b = aco_rt_spawn(aco_rt_pool_sched(p, 1), f_broadcaster, NULL);
        CHECK(w && b);
        CHECK_EQ(aco_rt_detach(w), 0);
        CHECK_EQ(aco_rt_detach(b), 0);
        CHECK_EQ(aco_rt_pool_wait(p, ACO_RT_POOL_DRAIN, -1), 0);
    }
    CHECK_EQ(f_timedout + f_woken, rounds);
}

int main(void) {
    test_watchdog();
    CHECK_EQ(aco_rt_pthread_key_create(&K, dt), 0);
    CHECK_EQ(aco_rt_pthread_barrier_init(&B, NULL, N), 0);
    aco_rt_pool_opts_t o = {.threads = 2};
    /* memcheck runs with epoll only (ACO_RT_TEST_BACKENDS=epoll) */
    const char* b = getenv("ACO_RT_TEST_BACKENDS");
    if (b && strstr(b, "uring") == NULL) o.sched.backend = ACO_RT_BACKEND_EPOLL;
    aco_rt_pool_t* p = aco_rt_pool_new(&o);
    CHECK(p != NULL);
    for (int i = 0; i < N; i++) {
        aco_rt_co_t* c = aco_rt_pool_spawn(p, co, (void*)(intptr_t)i, NULL);
        CHECK(c != NULL);
        CHECK_EQ(aco_rt_detach(c), 0);
    }
    CHECK_EQ(aco_rt_pool_wait(p, ACO_RT_POOL_DRAIN, -1), 0);
    freed_after_broadcast(p);
    aco_rt_pool_free(p);
    CHECK_EQ(counter, N * 500);
    CHECK_EQ(consumed, N / 2 * 200);
    CHECK_EQ(dtors, N);
    CHECK_EQ(once_runs, 1);
    printf("ok: counter %ld consumed %ld dtors %ld; freed after a broadcast: "
           "%d woken, %d timed out\n", counter, consumed, dtors, f_woken, f_timedout);
    return 0;
}
