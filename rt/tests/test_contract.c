/* test_contract.c - small promises of aco_rt.h that were once broken:
 *   - every negative deadline but -1 is a time in the past: a blocking call
 *     with -2, -1000 or INT64_MIN that would have to wait returns at once
 *     (-ETIMEDOUT; aco_rt_sleep_until: 0), for each kind of wait, and
 *     aco_rt_pool_wait too;
 *   - aco_rt_getspecific after aco_rt_key_delete is NULL, in a co and
 *     outside cos;
 *   - cos of the pthread-like face destroyed unfinished by
 *     aco_rt_sched_free free their records (the ASan target's leak check
 *     fails otherwise); joinable ones that ended and were never joined too.
 * Both backends.
 */
#define _GNU_SOURCE
#include "rt_test.h"
#include "../aco_rt_pthread.h"

#include <poll.h>
#include <sys/socket.h>

static const int64_t past[] = {-2, -1000, INT64_MIN, 0};
#define NPAST ((int)(sizeof(past) / sizeof(past[0])))

static aco_rt_mutex_t mu;
static aco_rt_cond_t cv;
static aco_rt_sem_t sem;
static aco_rt_wg_t wg;
static aco_rt_chan_t* ch;
static int sv[2];
static int lfd;

/* The holder keeps the mutex, and the blocker lives, until the deadlines
 * are done (released, not a sleep: a slow machine would outlast a sleep). */
static aco_rt_sem_t released;
static void holder(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_mutex_lock(&mu, -1), 0);
    CHECK_EQ(aco_rt_sem_wait(&released, -1), 0);
    CHECK_EQ(aco_rt_mutex_unlock(&mu), 0);
}

static void blocker(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_sem_wait(&released, -1), 0);
}

static void past_co(void* arg) {
    (void)arg;
    char buf[8];
    aco_rt_co_t* h = aco_rt_spawn(NULL, holder, NULL);
    aco_rt_co_t* b = aco_rt_spawn(NULL, blocker, NULL);
    CHECK(h != NULL && b != NULL);
    aco_rt_yield();                     /* the holder has the mutex */
    for (int i = 0; i < NPAST; i++) {
        int64_t d = past[i], t0 = aco_rt_now();
        CHECK_EQ(aco_rt_read(sv[0], buf, sizeof(buf), d), -ETIMEDOUT);
        CHECK_EQ(aco_rt_recv(sv[0], buf, sizeof(buf), 0, d), -ETIMEDOUT);
        CHECK_EQ(aco_rt_wait(sv[0], POLLIN, d), -ETIMEDOUT);
        CHECK_EQ(aco_rt_accept(lfd, NULL, NULL, 0, d), -ETIMEDOUT);
        CHECK_EQ(aco_rt_mutex_lock(&mu, d), -ETIMEDOUT);
        CHECK_EQ(aco_rt_sem_wait(&sem, d), -ETIMEDOUT);
        CHECK_EQ(aco_rt_wg_wait(&wg, d), -ETIMEDOUT);
        CHECK_EQ(aco_rt_chan_recv(ch, buf, d), -ETIMEDOUT);
        aco_rt_case_t c = {ch, ACO_RT_RECV, buf};
        CHECK_EQ(aco_rt_chan_select(&c, 1, NULL, d), -ETIMEDOUT);
        CHECK_EQ(aco_rt_join(b, d), -ETIMEDOUT);
        aco_rt_mutex_t m2 = {0};
        CHECK_EQ(aco_rt_mutex_lock(&m2, -1), 0);
        CHECK_EQ(aco_rt_cond_wait(&cv, &m2, d), -ETIMEDOUT);
        CHECK_EQ(aco_rt_mutex_unlock(&m2), 0);
        CHECK_EQ(aco_rt_sleep_until(d), 0);
        int64_t took = aco_rt_now() - t0;
        if (took > (SLOW ? 200 : 40) * MS)     /* memcheck on a busy machine: slower */
            TEST_FAIL_AT(__FILE__, __LINE__, "deadline %lld waited %lld ms", (long long)d,
                         (long long)(took / MS));
    }
    aco_rt_sem_post(&released);
    aco_rt_sem_post(&released);
    CHECK_EQ(aco_rt_join(h, -1), 0);
    CHECK_EQ(aco_rt_join(b, -1), 0);
}

static void past_body(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    aco_rt_mutex_init(&mu);
    aco_rt_cond_init(&cv);
    aco_rt_sem_init(&sem, 0);
    aco_rt_sem_init(&released, 0);
    aco_rt_wg_init(&wg);
    CHECK_EQ(aco_rt_wg_add(&wg, 1), 0);
    CHECK((ch = aco_rt_chan_new(8, 1)) != NULL);
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    CHECK((lfd = socket(AF_INET, SOCK_STREAM, 0)) >= 0);
    CHECK_EQ(listen(lfd, 4), 0);
    test_go(s, past_co, NULL);
    CHECK_EQ(aco_rt_chan_free(ch), 0);
    close(sv[0]);
    close(sv[1]);
    close(lfd);
}

static void forever(void* arg) {
    (void)arg;
    aco_rt_sleep(-1);
    aco_rt_sleep_until(-1);
}

static void pool_past(void) {
    aco_rt_pool_opts_t po = {0};
    po.threads = 1;
    aco_rt_pool_t* p = aco_rt_pool_new(&po);
    CHECK(p != NULL);
    CHECK(aco_rt_pool_spawn(p, forever, NULL, NULL) != NULL);
    for (int i = 0; i < NPAST; i++) {
        int64_t t0 = aco_rt_now();
        CHECK_EQ(aco_rt_pool_wait(p, ACO_RT_POOL_DRAIN, past[i]), -ETIMEDOUT);
        CHECK_LT(aco_rt_now() - t0, 1000 * MS);
    }
    CHECK_EQ(aco_rt_pool_wait(p, ACO_RT_POOL_CANCEL, aco_rt_now() + 5000 * MS), 0);
    aco_rt_pool_free(p);
}

/* ------------------------------------------------------------------------ */

static aco_rt_key_t key;
static int dummy;

static void key_co(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_setspecific(key, &dummy), 0);
    CHECK(aco_rt_getspecific(key) == &dummy);
    CHECK_EQ(aco_rt_key_delete(key), 0);
    CHECK(aco_rt_getspecific(key) == NULL);
    CHECK_EQ(aco_rt_setspecific(key, &dummy), -EINVAL);
    CHECK(aco_rt_getspecific(key) == NULL);
}

static void key_body(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    /* outside cos */
    CHECK_EQ(aco_rt_key_create(&key, NULL), 0);
    CHECK_EQ(aco_rt_setspecific(key, &dummy), 0);
    CHECK_EQ(aco_rt_key_delete(key), 0);
    CHECK(aco_rt_getspecific(key) == NULL);
    /* in a co */
    CHECK_EQ(aco_rt_key_create(&key, NULL), 0);
    test_go(s, key_co, NULL);
}

/* ------------------------------------------------------------------------ */

static void* pt_forever(void* arg) {
    (void)arg;
    aco_rt_sleep(-1);
    return NULL;
}

static void* pt_quick(void* arg) { return arg; }

static void stopper(void* arg) {
    for (int i = 0; i < 4; i++) aco_rt_yield();
    aco_rt_sched_stop((aco_rt_sched_t*)arg);
}

static void pt_body(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    aco_rt_pthread_attr_t a;
    aco_rt_pthread_attr_init(&a);
    aco_rt_pthread_t t;
    for (int i = 0; i < 8; i++) {
        aco_rt_pthread_attr_setdetachstate(&a, i & 1 ? ACO_RT_PTHREAD_CREATE_DETACHED
                                                     : ACO_RT_PTHREAD_CREATE_JOINABLE);
        CHECK_EQ(aco_rt_pthread_create(&t, &a, i < 4 ? pt_forever : pt_quick, NULL), 0);
    }
    /* run until only the sleepers are left, then stop */
    aco_rt_co_t* st = aco_rt_spawn(s, stopper, s);
    CHECK(st != NULL);
    CHECK_EQ(aco_rt_detach(st), 0);
    CHECK_EQ(aco_rt_sched_run(s), 0);
    /* aco_rt_sched_free (by test_on_backends) destroys them: no leak */
}

int main(void) {
    test_on_backends(NULL, past_body, NULL);
    pool_past();
    test_on_backends(NULL, key_body, NULL);
    test_on_backends(NULL, pt_body, NULL);
    printf("test_contract: ok\n");
    return 0;
}
