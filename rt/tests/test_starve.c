/* test_starve.c - ready cos that find no memory to save the frames of the
 * co on their share stack (aco_rt_sched_run): they wait aside and are tried
 * again after pauses, never in a spin; the run gives up with -ENOMEM when
 * nothing else can happen, and goes on once memory comes back.
 *
 * libaco's allocator (aco_set_allocator) fails every save stack of BIG
 * bytes or more while `short_of_memory` is set, and counts those failures:
 * a spin would make thousands a second, a retry after a pause one. */
#define _GNU_SOURCE
#include "rt_test.h"
#include "../../aco.h"

#include <sys/resource.h>
#include <time.h>

#define COS 40
#define BIG (64 * 1024)

static int short_of_memory;
static long refused;            /* allocations failed */

static void* mem(void* cookie, size_t sz) {
    (void)cookie;
    if (short_of_memory && sz >= BIG) {
        refused++;
        return NULL;
    }
    return aligned_alloc(16, (sz + 15) & ~(size_t)15);
}
static void mem_free(void* cookie, void* p, size_t sz) {
    (void)cookie, (void)sz;
    free(p);
}

static aco_rt_sem_t sem;
static int done;

/* frame bytes of frame (arg), then a wait for the poster. */
static void waiter(void* arg) {
    size_t frame = (size_t)arg;
    volatile char* buf = __builtin_alloca(frame);
    for (size_t i = 0; i < frame; i += 512) buf[i] = (char)(i >> 9);
    CHECK_EQ(aco_rt_sem_wait(&sem, -1), 0);
    /* its frames came back whole, however long it waited aside */
    for (size_t i = 0; i < frame; i += 512) CHECK_EQ(buf[i], (char)(i >> 9));
    done++;
}
static void poster(void* arg) {
    (void)arg;
    for (int i = 0; i < COS; i++) aco_rt_sem_post(&sem);
    done++;
}

static double cpu_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* The waiters with frames of frame bytes (each round larger than the
 * last: a record kept from an earlier round keeps its save stack, which
 * must not be big enough), and the poster last. */
static void spawn_all(aco_rt_sched_t* s, size_t frame) {
    aco_rt_sem_init(&sem, 0);
    done = 0;
    for (int i = 0; i < COS; i++)
        CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, waiter, (void*)frame)), 0);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, poster, NULL)), 0);
}

static void memory_back(aco_rt_timer_t* t) {
    (void)t;
    short_of_memory = 0;
}

static void body(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    /* Nothing else can happen (no I/O, timer or other scheduler): the
     * first waiter runs, the others and the poster cannot: -ENOMEM, after
     * pauses (a few failed allocations, little CPU), the cos left ready. */
    spawn_all(s, 96 * 1024);
    short_of_memory = 1;
    refused = 0;
    int64_t t0 = aco_rt_now();
    double c0 = cpu_s();
    CHECK_EQ(aco_rt_sched_run(s), -ENOMEM);
    double wall = (double)(aco_rt_now() - t0) / 1e9, cpu = cpu_s() - c0;
    CHECK_EQ(done, 0);
    CHECK_GT(refused, 0);
    CHECK_LT(refused, 100);
    CHECK(cpu < 0.5 * wall);
    aco_rt_stats_t st;
    aco_rt_stats(s, &st);
    CHECK_EQ(st.cos_ready, COS);        /* the starved: ready, left so */
    /* Memory back: a later run goes on with them. */
    short_of_memory = 0;
    CHECK_EQ(aco_rt_sched_run(s), 0);
    CHECK_EQ(done, COS + 1);

    /* With a timer armed the run waits instead (memory may come back: here
     * the timer brings it), retrying after pauses, and ends well. */
    spawn_all(s, 192 * 1024);
    short_of_memory = 1;
    refused = 0;
    static aco_rt_timer_t tm;
    aco_rt_timer_init(&tm);
    CHECK_EQ(aco_rt_timer_start(&tm, aco_rt_now() + 300 * 1000000LL, memory_back), 0);
    t0 = aco_rt_now();
    c0 = cpu_s();
    CHECK_EQ(aco_rt_sched_run(s), 0);
    wall = (double)(aco_rt_now() - t0) / 1e9, cpu = cpu_s() - c0;
    CHECK_EQ(done, COS + 1);
    CHECK_GE(wall, 0.29);
    CHECK_GT(refused, 0);
    CHECK_LT(refused, 100);
    CHECK(cpu < 0.5 * wall);
}

int main(void) {
    aco_set_allocator(mem, mem_free, NULL);
    aco_rt_opts_t one = {0};
    one.share_stacks = 1;
    one.stack_size = 1 << 20;
    test_on_backends(&one, body, NULL);
    printf("test_starve: ok\n");
    return 0;
}
