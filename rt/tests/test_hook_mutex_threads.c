/* test_hook_mutex_threads.c - the hooks' pthread mutexes (rt/hook.c linked
 * in, as test_hook) shared by cos, plain threads and the runtime's helper
 * threads, and what they pass their calls on to.
 *
 * A counter and a ledger guarded by one pthread mutex are updated by two
 * cos (the hook's pthread_mutex_lock: a co that finds it held waits in a
 * sleep, its thread runs on), by two plain threads and by functions run
 * on helper threads through aco_rt_offload, with plain loads and stores
 * under the lock: every update is counted once and the ledger adds up.
 * Under TSan the run must report nothing: the hook passes a call on to the
 * sanitizer's interceptor where the program has one (clang links its
 * runtime into the program, and RTLD_NEXT from there skipped it: TSan
 * reported a race on data each side held the mutex for).  The name's
 * parity puts this program's TSan run under clang (test.sh).  An
 * error-checking mutex still says EDEADLK to a plain thread that locks it
 * twice (libc's check, through whatever the hook called).
 */
#define _GNU_SOURCE
#include "rt_test.h"

#include <pthread.h>

enum { COS = 2, THREADS = 2, OFFLOADS = 40, ROUNDS = 300 };

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static long counter;                    /* under mu */
static long ledger[4];                  /* under mu: by kind of updater */

static void add(int kind) {
    CHECK_EQ(pthread_mutex_lock(&mu), 0);
    long c = counter;                   /* plain: the mutex orders them */
    counter = c + 1;
    ledger[kind]++;
    CHECK_EQ(pthread_mutex_unlock(&mu), 0);
}

static void* thread_main(void* arg) {
    (void)arg;
    for (int i = 0; i < ROUNDS; i++) add(1);
    return NULL;
}

static void* offload_fn(void* arg) {
    for (int i = 0; i < 10; i++) add(2);
    return arg;
}

static void co_adder(void* arg) {
    (void)arg;
    for (int i = 0; i < ROUNDS; i++) {
        add(0);
        if (i % 16 == 0) CHECK_EQ(aco_rt_yield(), 0);
    }
}

static void co_offloader(void* arg) {
    (void)arg;
    static int token;
    for (int i = 0; i < OFFLOADS; i++) {
        void* r = NULL;
        CHECK_EQ(aco_rt_offload(offload_fn, &token, NULL, &r, -1), 0);
        CHECK(r == &token);
        add(3);
    }
}

static void body(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    counter = 0;
    memset(ledger, 0, sizeof(ledger));
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) CHECK_EQ(pthread_create(&t[i], NULL, thread_main, NULL), 0);
    aco_rt_co_t* c[COS + 1];
    for (int i = 0; i < COS; i++) CHECK((c[i] = aco_rt_spawn(s, co_adder, NULL)) != NULL);
    CHECK((c[COS] = aco_rt_spawn(s, co_offloader, NULL)) != NULL);
    for (int i = 0; i <= COS; i++) CHECK_EQ(aco_rt_detach(c[i]), 0);
    int r = aco_rt_sched_run(s);
    CHECK_EQ(r, 0);
    for (int i = 0; i < THREADS; i++) CHECK_EQ(pthread_join(t[i], NULL), 0);
    CHECK_EQ(pthread_mutex_lock(&mu), 0);
    CHECK_EQ(ledger[0], (long)COS * ROUNDS);
    CHECK_EQ(ledger[1], (long)THREADS * ROUNDS);
    CHECK_EQ(ledger[2], (long)OFFLOADS * 10);
    CHECK_EQ(ledger[3], (long)OFFLOADS);
    CHECK_EQ(counter, ledger[0] + ledger[1] + ledger[2] + ledger[3]);
    CHECK_EQ(pthread_mutex_unlock(&mu), 0);
}

static void* twice(void* arg) {
    pthread_mutex_t* m = arg;
    CHECK_EQ(pthread_mutex_lock(m), 0);
    CHECK_EQ(pthread_mutex_lock(m), EDEADLK);
    CHECK_EQ(pthread_mutex_trylock(m), EBUSY);
    CHECK_EQ(pthread_mutex_unlock(m), 0);
    return NULL;
}

int main(void) {
    test_on_backends(NULL, body, NULL);
    pthread_mutexattr_t a;
    pthread_mutex_t ec;
    CHECK_EQ(pthread_mutexattr_init(&a), 0);
    CHECK_EQ(pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ERRORCHECK), 0);
    CHECK_EQ(pthread_mutex_init(&ec, &a), 0);
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, twice, &ec), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
    CHECK_EQ(pthread_mutex_destroy(&ec), 0);
    CHECK_EQ(pthread_mutexattr_destroy(&a), 0);
    printf("hook mutex threads: cos, threads and helpers under one mutex; EDEADLK: ok\n");
    return 0;
}
