/* test_keys_bb_end.c - a co's end and co-local keys, from aco_rt.h alone:
 * key_create/delete/set/get refusals (-EINVAL for NULL, a deleted key or
 * no key, -EAGAIN once ACO_RT_KEYS_MAX are alive); a value per co and per
 * thread outside cos, keys made on another thread; at a co's end the
 * destructors run in the co, in creation order, each value set to NULL
 * before its destructor gets it, a destructor may block (its joiner waits:
 * -ETIMEDOUT until they are done), rounds while destructors set values
 * again (at most ACO_RT_KEY_DTOR_ROUNDS), none for NULL values, NULL
 * destructors or deleted keys (also one a destructor deletes), a deleted
 * key's slot seeing no old value and its number refused, keys made and
 * set by a destructor getting theirs;
 * a reused record starting with NULLs; aco_rt_exit from nested frames
 * (destructors run, the rest not, a held mutex stays held; outside a co:
 * abort); a cancelled co's destructors run, their blocking calls
 * -ECANCELED; a co destroyed by sched_free runs none; a pthread's values
 * get their destructors at its exit; all 1024 keys set in one co; a key
 * deleted on another thread while pool cos hold values (none destructed,
 * the slot's new key NULL there). */
#define _GNU_SOURCE
#include "rt_test.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>

static int64_t in_ms(int ms) { return aco_rt_now() + ms * MS; }

/* a log of destructor calls: key index and value */
#define LOGMAX 4096
static int log_key[LOGMAX];
static void* log_val[LOGMAX];
static int log_n;
static aco_rt_co_t* log_co[LOGMAX];
static aco_rt_key_t ks[8];
static int never_deleted = 1;       /* slot order == creation order */

static void log_dtor_i(int i, void* v) {
    CHECK_LT(log_n, LOGMAX);
    /* set to NULL before it is passed on */
    CHECK(aco_rt_getspecific(ks[i]) == NULL);
    log_key[log_n] = i;
    log_val[log_n] = v;
    log_co[log_n] = aco_rt_self();
    log_n++;
}
static void d0(void* v) { log_dtor_i(0, v); }
static void d1(void* v) { log_dtor_i(1, v); }
static void d2(void* v) { log_dtor_i(2, v); }
static void d3(void* v) { log_dtor_i(3, v); }
static void d4(void* v) { log_dtor_i(4, v); }
static void (*const dtors[5])(void*) = {d0, d1, d2, d3, d4};

static int tag[16];

/* ---- refusals, values per co and per thread ---- */
static void* thread_key_maker(void* arg) {
    aco_rt_key_t* k = arg;
    CHECK_EQ(aco_rt_key_create(k, NULL), 0);
    CHECK(aco_rt_getspecific(*k) == NULL);
    CHECK_EQ(aco_rt_setspecific(*k, &tag[9]), 0);
    return NULL;
}

static aco_rt_key_t pk;
static void value_co(void* arg) {
    int i = (int)(intptr_t)arg;
    CHECK(aco_rt_getspecific(pk) == NULL);
    CHECK_EQ(aco_rt_setspecific(pk, &tag[i]), 0);
    for (int r = 0; r < 3; r++) {
        CHECK_EQ(aco_rt_yield(), 0);
        CHECK(aco_rt_getspecific(pk) == &tag[i]);
    }
    CHECK_EQ(aco_rt_sleep(1 * MS), 0);
    CHECK(aco_rt_getspecific(pk) == &tag[i]);
}

static aco_rt_key_t mk[3];
static char mvals[300 * 3];
static void multi_co(void* arg) {
    int i = (int)(intptr_t)arg;
    for (int k = 0; k < 3; k++) CHECK(aco_rt_getspecific(mk[k]) == NULL);
    for (int r = 0; r < 3; r++) {
        CHECK_EQ(aco_rt_setspecific(mk[r], &mvals[i * 3 + r]), 0);
        CHECK_EQ(aco_rt_yield(), 0);
        for (int k = 0; k <= r; k++) CHECK(aco_rt_getspecific(mk[k]) == &mvals[i * 3 + k]);
    }
}

static void refusals(aco_rt_sched_t* s) {
    CHECK_EQ(aco_rt_key_create(NULL, NULL), -EINVAL);
    CHECK_EQ(aco_rt_key_create(NULL, d0), -EINVAL);
    aco_rt_key_t k;
    CHECK_EQ(aco_rt_key_create(&k, NULL), 0);
    CHECK_EQ(aco_rt_setspecific(k, &tag[1]), 0);
    CHECK(aco_rt_getspecific(k) == &tag[1]);
    CHECK_EQ(aco_rt_key_delete(k), 0);
    never_deleted = 0;
    CHECK(aco_rt_getspecific(k) == NULL);
    CHECK_EQ(aco_rt_setspecific(k, &tag[1]), -EINVAL);
    CHECK_EQ(aco_rt_key_delete(k), -EINVAL);
    CHECK_EQ(aco_rt_key_delete(0xfffffff0u), -EINVAL);
    CHECK_EQ(aco_rt_setspecific(0xfffffff0u, &tag[1]), -EINVAL);
    CHECK(aco_rt_getspecific(0xfffffff0u) == NULL);

    /* a deleted key's number stays refused while its slot is used again */
    aco_rt_key_t k2[8];
    for (int i = 0; i < 8; i++) {
        CHECK_EQ(aco_rt_key_create(&k2[i], NULL), 0);
        CHECK(k2[i] != k);
        CHECK_EQ(aco_rt_setspecific(k, &tag[1]), -EINVAL);
        CHECK(aco_rt_getspecific(k) == NULL);
        CHECK_EQ(aco_rt_key_delete(k), -EINVAL);
        CHECK(aco_rt_getspecific(k2[i]) == NULL);
        CHECK_EQ(aco_rt_key_delete(k2[i]), 0);
        CHECK_EQ(aco_rt_key_delete(k2[i]), -EINVAL);
        for (int j = 0; j <= i; j++) CHECK_EQ(aco_rt_setspecific(k2[j], &tag[1]), -EINVAL);
    }

    /* a value per co, the thread's own outside cos kept apart */
    CHECK_EQ(aco_rt_key_create(&pk, NULL), 0);
    CHECK_EQ(aco_rt_setspecific(pk, &tag[0]), 0);
    for (int i = 1; i <= 4; i++)
        CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, value_co, (void*)(intptr_t)i)), 0);
    test_run(s);
    CHECK(aco_rt_getspecific(pk) == &tag[0]);
    /* 300 cos, three keys each, set and read across yields */
    for (int i = 0; i < 3; i++) CHECK_EQ(aco_rt_key_create(&mk[i], NULL), 0);
    for (int i = 0; i < 300; i++)
        CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, multi_co, (void*)(intptr_t)i)), 0);
    test_run(s);
    for (int i = 0; i < 3; i++) {
        CHECK(aco_rt_getspecific(mk[i]) == NULL);
        CHECK_EQ(aco_rt_key_delete(mk[i]), 0);
    }
    /* a key made on another thread: that thread's value is its own */
    aco_rt_key_t tk;
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, thread_key_maker, &tk), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
    CHECK(aco_rt_getspecific(tk) == NULL);
    CHECK_EQ(aco_rt_setspecific(tk, &tag[2]), 0);
    CHECK(aco_rt_getspecific(tk) == &tag[2]);
    CHECK_EQ(aco_rt_setspecific(tk, NULL), 0);
    CHECK_EQ(aco_rt_key_delete(tk), 0);
    CHECK_EQ(aco_rt_setspecific(pk, NULL), 0);
    CHECK_EQ(aco_rt_key_delete(pk), 0);
}

/* ---- destructors at a co's end ---- */
static aco_rt_co_t* ender;
static void order_co(void* arg) {
    (void)arg;
    /* set in reverse order; key 2 left NULL, key 4 has a NULL value set */
    CHECK_EQ(aco_rt_setspecific(ks[4], NULL), 0);
    CHECK_EQ(aco_rt_setspecific(ks[3], &tag[3]), 0);
    CHECK_EQ(aco_rt_setspecific(ks[1], &tag[1]), 0);
    CHECK_EQ(aco_rt_setspecific(ks[0], &tag[0]), 0);
    CHECK_EQ(aco_rt_setspecific(ks[5], &tag[5]), 0);  /* NULL destructor */
    ender = aco_rt_self();
}

/* a destructor that blocks: its joiner waits for it */
static aco_rt_key_t slow_k;
static int slow_done;
static void slow_dtor(void* v) {
    CHECK(v == &tag[7]);
    CHECK(aco_rt_self() != NULL);
    CHECK_EQ(aco_rt_sleep(60 * MS), 0);
    slow_done = 1;
}
static void slow_co(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_setspecific(slow_k, &tag[7]), 0);
}

/* rounds, whatever the slots' order: key 0's destructor sets its own
 * value once more (two calls), key 2's sets key 1, NULL until then (one
 * call, in this round or the next) */
static aco_rt_key_t rk[3];
static int rounds_calls[3];
static void r0(void* v) {
    rounds_calls[0]++;
    CHECK(v == (rounds_calls[0] == 1 ? &tag[0] : &tag[10]));
    if (rounds_calls[0] == 1) CHECK_EQ(aco_rt_setspecific(rk[0], &tag[10]), 0);
}
static void r1(void* v) {
    CHECK(v == &tag[11]);
    rounds_calls[1]++;
}
static void r2(void* v) {
    CHECK(v == &tag[2]);
    rounds_calls[2]++;
    CHECK_EQ(aco_rt_setspecific(rk[1], &tag[11]), 0);
}
static void rounds_co(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_setspecific(rk[0], &tag[0]), 0);
    CHECK_EQ(aco_rt_setspecific(rk[2], &tag[2]), 0);
}
/* a destructor that sets its own value every time: ROUNDS calls, no more */
static aco_rt_key_t forever_k;
static int forever_calls;
static void forever_dtor(void* v) {
    CHECK(v == &tag[12]);
    forever_calls++;
    CHECK_EQ(aco_rt_setspecific(forever_k, &tag[12]), 0);
}
static void forever_co(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_setspecific(forever_k, &tag[12]), 0);
}
/* after its end, a new co (a reused record) sees NULLs */
static void fresh_co(void* arg) {
    (void)arg;
    for (int i = 0; i < 6; i++) CHECK(aco_rt_getspecific(ks[i]) == NULL);
    CHECK(aco_rt_getspecific(forever_k) == NULL);
}

/* aco_rt_exit from nested frames */
static aco_rt_mutex_t exit_mx;
static int exit_after;
__attribute__((noinline)) static void exit_deep(int n) {
    if (n <= 0) {
        CHECK_EQ(aco_rt_mutex_lock(&exit_mx, -1), 0);
        aco_rt_exit();
    }
    if (n < 100) exit_deep(n - 1);
    exit_after++;
}
static void exit_co(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_setspecific(ks[0], &tag[0]), 0);
    CHECK_EQ(aco_rt_setspecific(ks[3], &tag[3]), 0);
    exit_deep(5);
    exit_after++;
}

/* a cancelled co: its destructors run, their blocking calls fail */
static aco_rt_key_t cancel_k;
static int cancel_dtor_rc = 1, cancel_dtor_ran;
static void cancel_dtor(void* v) {
    CHECK(v == &tag[13]);
    cancel_dtor_ran++;
    cancel_dtor_rc = aco_rt_sleep(1 * MS);
}
static void cancelled_co(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_setspecific(cancel_k, &tag[13]), 0);
    CHECK_EQ(aco_rt_sleep_until(-1), -ECANCELED);
}

/* a deleted key: no destructor; its slot's next key sees no old value */
static aco_rt_key_t del_k, new_k;
static int del_calls;
static void del_dtor(void* v) { (void)v; del_calls++; }
static aco_rt_sem_t del_sem;
static void del_co(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_setspecific(del_k, &tag[14]), 0);
    CHECK_EQ(aco_rt_sem_wait(&del_sem, in_ms(5000)), 0);
    /* the key was deleted meanwhile and a new one made */
    CHECK(aco_rt_getspecific(del_k) == NULL);
    CHECK(aco_rt_getspecific(new_k) == NULL);
}
static void del_main(void* arg) {
    (void)arg;
    aco_rt_sem_init(&del_sem, 0);
    CHECK_EQ(aco_rt_key_create(&del_k, del_dtor), 0);
    aco_rt_co_t* c = aco_rt_spawn(NULL, del_co, NULL);
    CHECK(c != NULL);
    CHECK_EQ(aco_rt_sleep(1 * MS), 0);
    CHECK_EQ(aco_rt_key_delete(del_k), 0);
    never_deleted = 0;
    CHECK_EQ(aco_rt_key_create(&new_k, del_dtor), 0);
    aco_rt_sem_post(&del_sem);
    CHECK_EQ(aco_rt_join(c, in_ms(5000)), 0);
    CHECK_EQ(del_calls, 0);
    CHECK_EQ(aco_rt_key_delete(new_k), 0);
}

/* a destructor that deletes another key with a value: no call for it */
static aco_rt_key_t kd_a, kd_b;
static int kd_a_calls, kd_b_calls;
static void kd_a_dtor(void* v) {
    CHECK(v == &tag[4]);
    kd_a_calls++;
    CHECK_EQ(aco_rt_key_delete(kd_b), 0);
}
static void kd_b_dtor(void* v) { (void)v; kd_b_calls++; }
static void kd_co(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_setspecific(kd_b, &tag[5]), 0);
    CHECK_EQ(aco_rt_setspecific(kd_a, &tag[4]), 0);
}

/* a destructor that makes new keys (the co's array grows while its
 * destructors run) and sets them: each new one's destructor runs once */
#define GROW_N 64
static aco_rt_key_t grow_first, grow_k[GROW_N];
static int grow_calls[GROW_N];
static int grow_first_calls;
static void grow_dtor(void* v) {
    int i = (int)((int*)v - grow_calls);
    CHECK_GE(i, 0);
    CHECK_LT(i, GROW_N);
    grow_calls[i]++;
}
static void grow_first_dtor(void* v) {
    CHECK(v == &tag[6]);
    grow_first_calls++;
    for (int i = 0; i < GROW_N; i++) {
        CHECK_EQ(aco_rt_key_create(&grow_k[i], grow_dtor), 0);
        CHECK(aco_rt_getspecific(grow_k[i]) == NULL);
        CHECK_EQ(aco_rt_setspecific(grow_k[i], &grow_calls[i]), 0);
    }
}
static void grow_co(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_setspecific(grow_first, &tag[6]), 0);
}

static void dtor_main(void* arg) {
    (void)arg;
    int was_fresh = never_deleted;
    for (int i = 0; i < 5; i++) CHECK_EQ(aco_rt_key_create(&ks[i], dtors[i]), 0);
    CHECK_EQ(aco_rt_key_create(&ks[5], NULL), 0);
    log_n = 0;
    aco_rt_co_t* c = aco_rt_spawn(NULL, order_co, NULL);
    CHECK(c != NULL);
    CHECK_EQ(aco_rt_join(c, in_ms(5000)), 0);
    /* keys 0, 1, 3, in the co, with their values */
    CHECK_EQ(log_n, 3);
    if (was_fresh) {
        CHECK_EQ(log_key[0], 0);
        CHECK_EQ(log_key[1], 1);
        CHECK_EQ(log_key[2], 3);
    }
    for (int i = 0; i < 3; i++) {
        CHECK(log_val[i] == &tag[log_key[i]]);
        CHECK(log_co[i] == ender);
    }
    c = aco_rt_spawn(NULL, fresh_co, NULL);
    CHECK_EQ(aco_rt_join(c, in_ms(5000)), 0);

    /* a blocking destructor: the joiner goes on after it */
    CHECK_EQ(aco_rt_key_create(&slow_k, slow_dtor), 0);
    slow_done = 0;
    c = aco_rt_spawn(NULL, slow_co, NULL);
    int64_t d = in_ms(20);
    CHECK_EQ(aco_rt_join(c, d), -ETIMEDOUT);
    CHECK_GE(aco_rt_now(), d);
    CHECK_EQ(slow_done, 0);
    CHECK_EQ(aco_rt_join(c, in_ms(5000)), 0);
    CHECK_EQ(slow_done, 1);
    CHECK_EQ(aco_rt_key_delete(slow_k), 0);

    /* rounds */
    static void (*const rd[3])(void*) = {r0, r1, r2};
    for (int i = 0; i < 3; i++) CHECK_EQ(aco_rt_key_create(&rk[i], rd[i]), 0);
    memset(rounds_calls, 0, sizeof(rounds_calls));
    c = aco_rt_spawn(NULL, rounds_co, NULL);
    CHECK_EQ(aco_rt_join(c, in_ms(5000)), 0);
    CHECK_EQ(rounds_calls[0], 2);
    CHECK_EQ(rounds_calls[1], 1);
    CHECK_EQ(rounds_calls[2], 1);
    CHECK_EQ(aco_rt_key_create(&forever_k, forever_dtor), 0);
    forever_calls = 0;
    c = aco_rt_spawn(NULL, forever_co, NULL);
    CHECK_EQ(aco_rt_join(c, in_ms(5000)), 0);
    CHECK_EQ(forever_calls, ACO_RT_KEY_DTOR_ROUNDS);
    c = aco_rt_spawn(NULL, fresh_co, NULL);
    CHECK_EQ(aco_rt_join(c, in_ms(5000)), 0);

    /* aco_rt_exit */
    log_n = 0;
    exit_after = 0;
    aco_rt_mutex_init(&exit_mx);
    c = aco_rt_spawn(NULL, exit_co, NULL);
    CHECK_EQ(aco_rt_join(c, in_ms(5000)), 0);
    CHECK_EQ(exit_after, 0);
    CHECK_EQ(log_n, 2);
    CHECK(log_val[0] == &tag[log_key[0]]);
    CHECK(log_val[1] == &tag[log_key[1]]);
    CHECK_EQ(log_key[0] + log_key[1], 3);
    CHECK_EQ(aco_rt_mutex_trylock(&exit_mx), -EBUSY);

    /* cancelled */
    CHECK_EQ(aco_rt_key_create(&cancel_k, cancel_dtor), 0);
    cancel_dtor_ran = 0;
    cancel_dtor_rc = 1;
    c = aco_rt_spawn(NULL, cancelled_co, NULL);
    CHECK_EQ(aco_rt_sleep(1 * MS), 0);
    CHECK_EQ(aco_rt_cancel(c), 0);
    CHECK_EQ(aco_rt_join(c, in_ms(5000)), 0);
    CHECK_EQ(cancel_dtor_ran, 1);
    CHECK_EQ(cancel_dtor_rc, -ECANCELED);
    CHECK_EQ(aco_rt_key_delete(cancel_k), 0);

    /* whichever slot comes first: if b's comes first its destructor runs
     * before a's deletes it, else never */
    CHECK_EQ(aco_rt_key_create(&kd_a, kd_a_dtor), 0);
    CHECK_EQ(aco_rt_key_create(&kd_b, kd_b_dtor), 0);
    kd_a_calls = kd_b_calls = 0;
    c = aco_rt_spawn(NULL, kd_co, NULL);
    CHECK_EQ(aco_rt_join(c, in_ms(5000)), 0);
    CHECK_EQ(kd_a_calls, 1);
    CHECK_LE(kd_b_calls, 1);
    if (was_fresh) CHECK_EQ(kd_b_calls, 0);       /* a's slot first */
    CHECK_EQ(aco_rt_key_delete(kd_a), 0);
    CHECK_EQ(aco_rt_key_delete(kd_b), -EINVAL);

    /* keys made and set by a destructor */
    CHECK_EQ(aco_rt_key_create(&grow_first, grow_first_dtor), 0);
    memset(grow_calls, 0, sizeof(grow_calls));
    grow_first_calls = 0;
    c = aco_rt_spawn(NULL, grow_co, NULL);
    CHECK_EQ(aco_rt_join(c, in_ms(5000)), 0);
    CHECK_EQ(grow_first_calls, 1);
    for (int i = 0; i < GROW_N; i++) CHECK_EQ(grow_calls[i], 1);
    for (int i = 0; i < GROW_N; i++) CHECK_EQ(aco_rt_key_delete(grow_k[i]), 0);
    CHECK_EQ(aco_rt_key_delete(grow_first), 0);

    for (int i = 0; i < 6; i++) CHECK_EQ(aco_rt_key_delete(ks[i]), 0);
    for (int i = 0; i < 3; i++) CHECK_EQ(aco_rt_key_delete(rk[i]), 0);
    CHECK_EQ(aco_rt_key_delete(forever_k), 0);
    never_deleted = 0;
}

/* ---- a co destroyed by sched_free runs no destructor ---- */
static aco_rt_key_t free_k;
static int free_calls;
static char* free_val;
static void free_dtor(void* v) { (void)v; free_calls++; }
static aco_rt_sched_t* free_s;
static void free_co(void* arg) {
    (void)arg;
    free_val = calloc(1, 32);
    CHECK(free_val != NULL);
    CHECK_EQ(aco_rt_setspecific(free_k, free_val), 0);
    aco_rt_sched_stop(free_s);
    aco_rt_sleep_until(-1);
    CHECK(0);
}
static void* free_thread(void* arg) {
    int b = *(int*)arg;
    free_s = test_sched_on(b, NULL);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(free_s, free_co, NULL)), 0);
    CHECK_EQ(aco_rt_sched_run(free_s), 0);
    aco_rt_sched_free(free_s);
    return NULL;
}

/* ---- a pthread's values outside cos ---- */
static aco_rt_key_t th_k;
static atomic_int th_calls;
static void* th_val;
static void th_dtor(void* v) { th_val = v; atomic_fetch_add(&th_calls, 1); }
static void* th_fn(void* arg) {
    CHECK(aco_rt_getspecific(th_k) == NULL);
    CHECK_EQ(aco_rt_setspecific(th_k, arg), 0);
    CHECK(aco_rt_getspecific(th_k) == arg);
    return NULL;
}

/* ---- many keys ---- */
static aco_rt_key_t many[ACO_RT_KEYS_MAX + 1];
static int many_n;
static int many_seen[ACO_RT_KEYS_MAX];
static int many_order_ok;
static int many_last = -1;
static aco_rt_key_t* many_cur_key;
static void many_dtor(void* v) {
    int i = (int)((int*)v - many_seen);
    CHECK_GE(i, 0);
    CHECK_LT(i, many_n);
    CHECK(aco_rt_getspecific(many[i]) == NULL);
    many_seen[i]++;
    if (i < many_last) many_order_ok = 0;
    many_last = i;
}
static void many_co(void* arg) {
    (void)arg;
    for (int i = many_n - 1; i >= 0; i--) CHECK_EQ(aco_rt_setspecific(many[i], &many_seen[i]), 0);
    for (int i = 0; i < many_n; i++) CHECK(aco_rt_getspecific(many[i]) == &many_seen[i]);
}
static void many_fresh_co(void* arg) {
    (void)arg;
    for (int i = 0; i < many_n; i++) CHECK(aco_rt_getspecific(many[i]) == NULL);
}
static void many_keys(aco_rt_sched_t* s, int fresh) {
    (void)many_cur_key;
    many_n = 0;
    int r;
    while ((r = aco_rt_key_create(&many[many_n], many_dtor)) == 0) {
        many_n++;
        CHECK_LE(many_n, ACO_RT_KEYS_MAX);
    }
    CHECK_EQ(r, -EAGAIN);
    /* no other key of the test is alive here */
    CHECK_EQ(many_n, ACO_RT_KEYS_MAX);
    memset(many_seen, 0, sizeof(many_seen));
    many_order_ok = 1;
    many_last = -1;
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, many_co, NULL)), 0);
    test_run(s);
    for (int i = 0; i < many_n; i++) CHECK_EQ(many_seen[i], 1);
    if (fresh) CHECK(many_order_ok);
    /* the next cos (a reused record among them) start with NULLs */
    for (int i = 0; i < 3; i++) CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, many_fresh_co, NULL)), 0);
    test_run(s);
    for (int i = 0; i < many_n; i++) CHECK_EQ(aco_rt_key_delete(many[i]), 0);
    CHECK_EQ(aco_rt_key_create(&many[0], NULL), 0);
    CHECK_EQ(aco_rt_key_delete(many[0]), 0);
}

static void body(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    int fresh = never_deleted;
    many_keys(s, fresh);
    never_deleted = 0;
    refusals(s);
    test_go(s, dtor_main, NULL);
    test_go(s, del_main, NULL);

    CHECK_EQ(aco_rt_key_create(&free_k, free_dtor), 0);
    free_calls = 0;
    pthread_t t;
    int b = test_backend_id;
    CHECK_EQ(pthread_create(&t, NULL, free_thread, &b), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
    CHECK_EQ(free_calls, 0);
    free(free_val);     /* the value is the program's: no destructor had it */
    CHECK_EQ(aco_rt_key_delete(free_k), 0);

    CHECK_EQ(aco_rt_key_create(&th_k, th_dtor), 0);
    atomic_store(&th_calls, 0);
    CHECK_EQ(pthread_create(&t, NULL, th_fn, &tag[15]), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
    CHECK_EQ(atomic_load(&th_calls), 1);
    CHECK(th_val == &tag[15]);
    CHECK_EQ(aco_rt_key_delete(th_k), 0);
}

/* ---- a key deleted on another thread while pool cos hold values ---- */
static aco_rt_key_t xk, xk_new;
static atomic_int xk_calls, xk_set;
static aco_rt_sem_t xk_go;
static int xk_vals[8];
static void xk_dtor(void* v) { (void)v; atomic_fetch_add(&xk_calls, 1); }
static void xk_co(void* arg) {
    int i = (int)(intptr_t)arg;
    CHECK_EQ(aco_rt_setspecific(xk, &xk_vals[i]), 0);
    atomic_fetch_add(&xk_set, 1);
    CHECK_EQ(aco_rt_sem_wait(&xk_go, in_ms(5000)), 0);
    CHECK(aco_rt_getspecific(xk) == NULL);
    CHECK(aco_rt_getspecific(xk_new) == NULL);
    CHECK_EQ(aco_rt_setspecific(xk, &xk_vals[i]), -EINVAL);
}
/* a pool co that ends by aco_rt_exit with a blocking destructor, joined
 * from a co of this thread's scheduler: the join waits for the destructor */
static aco_rt_key_t xe_k;
static atomic_int xe_done;
static void xe_dtor(void* v) {
    CHECK(v == &xk_vals[0]);
    CHECK_EQ(aco_rt_sleep(40 * MS), 0);
    atomic_store(&xe_done, 1);
}
static void xe_co(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_setspecific(xe_k, &xk_vals[0]), 0);
    aco_rt_exit();
}
static aco_rt_pool_t* xe_p;
static void xe_joiner(void* arg) {
    (void)arg;
    aco_rt_co_t* c = aco_rt_pool_spawn(xe_p, xe_co, NULL, NULL);
    CHECK(c != NULL);
    int64_t d = in_ms(10);
    CHECK_EQ(aco_rt_join(c, d), -ETIMEDOUT);
    CHECK_GE(aco_rt_now(), d);
    CHECK_EQ(atomic_load(&xe_done), 0);
    CHECK_EQ(aco_rt_join(c, in_ms(5000)), 0);
    CHECK_EQ(atomic_load(&xe_done), 1);
}

static void xk_pool(aco_rt_pool_t* p) {
    CHECK_EQ(aco_rt_key_create(&xe_k, xe_dtor), 0);
    atomic_store(&xe_done, 0);
    xe_p = p;
    aco_rt_sched_t* s = test_sched_on(test_backend_id, NULL);
    test_go(s, xe_joiner, NULL);
    aco_rt_sched_free(s);
    CHECK_EQ(aco_rt_key_delete(xe_k), 0);

    CHECK_EQ(aco_rt_key_create(&xk, xk_dtor), 0);
    aco_rt_sem_init(&xk_go, 0);
    atomic_store(&xk_calls, 0);
    atomic_store(&xk_set, 0);
    for (int i = 0; i < 8; i++)
        CHECK_EQ(aco_rt_detach(aco_rt_pool_spawn(p, xk_co, (void*)(intptr_t)i, NULL)), 0);
    while (atomic_load(&xk_set) < 8) usleep(1000);
    CHECK_EQ(aco_rt_key_delete(xk), 0);
    CHECK_EQ(aco_rt_key_create(&xk_new, xk_dtor), 0);
    for (int i = 0; i < 8; i++) aco_rt_sem_post(&xk_go);
    CHECK_EQ(aco_rt_pool_wait(p, ACO_RT_POOL_DRAIN, in_ms(5000)), 0);
    CHECK_EQ(atomic_load(&xk_calls), 0);
    CHECK_EQ(aco_rt_key_delete(xk_new), 0);
}

static int err_pipe[2];
static void exit_outside(void* arg) {
    (void)arg;
    dup2(err_pipe[1], 2);
    aco_rt_exit();
}

int main(void) {
    test_on_backends(NULL, body, NULL);
    test_on_pools(2, xk_pool, NULL);
    /* outside a co: an abort with a message */
    CHECK_EQ(pipe(err_pipe), 0);
    CHECK_EQ(test_in_child(exit_outside, NULL, NULL), SIGABRT);
    close(err_pipe[1]);
    char msg[512];
    ssize_t n = read(err_pipe[0], msg, sizeof(msg) - 1);
    CHECK_GT(n, 0);
    close(err_pipe[0]);
    puts("test_keys_bb_end: ok");
    return 0;
}
