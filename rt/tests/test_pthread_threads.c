/* test_pthread_threads.c - the pthread-like face across the threads of a
 * pool: 40 cos on 2 threads share a recursive mutex, condition variables
 * (a bounded buffer), once (a blocking init), a key with a destructor, an
 * rwlock and a barrier; create/join between them.  Every count checked.
 */
#include "rt_test.h"
#include "../aco_rt_pthread.h"
#include <stdint.h>

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
    aco_rt_pool_free(p);
    CHECK_EQ(counter, N * 500);
    CHECK_EQ(consumed, N / 2 * 200);
    CHECK_EQ(dtors, N);
    CHECK_EQ(once_runs, 1);
    printf("ok: counter %ld consumed %ld dtors %ld\n", counter, consumed, dtors);
    return 0;
}
