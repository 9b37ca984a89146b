/* test_alloc: one allocation per co, from the program's allocator.
 *
 * The program's allocator (aco_set_allocator, counting) is set before
 * anything; every scheduler has one share stack, so each co's frames are
 * copied out at every switch.  Then:
 *  - 1000 cos with a private buffer and an explicit save_size: exactly one
 *    allocation each; inside, the private buffer, the libaco co and its
 *    save stack are one block (the buffer right before the co, the save
 *    stack right after it); 300 patterned stack bytes survive 10 yields;
 *  - the same again: the kept records are reused, not one allocation;
 *  - 2000 at once with no save_size: 1000 reused, 1000 new of the size
 *    the last finished co needed: still one allocation each;
 *  - 100 cos whose frames (8 KiB) outgrow save_size 256: two allocations
 *    each (the record, a save stack of libaco's);
 *  - 50 cos asking save_size 32 KiB, which no kept record holds: new
 *    records, the save stack in the block; then those are reused; a
 *    save_size over 1 GiB is ENOMEM;
 *  - standalone cos: their record and their stack's, then (the stack
 *    pool) the record alone;
 *  - spawn-to-pool rounds (a 2-thread pool, the idle thread takes half of
 *    each batch): records go round between the threads, a warm round
 *    allocates (almost) nothing; private buffers come zeroed;
 *  - 1000 cos parked in a sleep, then 1000 in a receive of an int: two
 *    allocations each (the record, the save stack of its frames), no extra
 *    block, a record of at most 160 bytes, and (optimised builds) few bytes
 *    of frames saved: at most 352 / 384 bytes a co in all;
 *  - after aco_rt_sched_free and aco_rt_pool_free everything went back to
 *    the allocator.
 */
#include "rt_test.h"

#include "../../aco.h"
#include "rt_impl.h"        /* a parked co's record */

#include <alloca.h>
#include <stdatomic.h>

static struct {
    long allocs, frees;
    long long bytes;
} counts;

static void* count_alloc(void* cookie, size_t sz) {
    CHECK(cookie == &counts);
    char* p = aligned_alloc(16, 16 + ((sz + 15) & ~(size_t)15));
    if (p == NULL) return NULL;
    *(size_t*)p = sz;
    __atomic_fetch_add(&counts.allocs, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&counts.bytes, (long long)sz, __ATOMIC_RELAXED);
    return p + 16;
}

static void count_free(void* cookie, void* p, size_t sz) {
    CHECK(cookie == &counts);
    char* b = (char*)p - 16;
    CHECK_EQ(*(size_t*)b, sz);          /* the size that was asked for */
    __atomic_fetch_add(&counts.frees, 1, __ATOMIC_RELAXED);
    __atomic_fetch_sub(&counts.bytes, (long long)sz, __ATOMIC_RELAXED);
    free(b);
}

static long allocs(void) { return __atomic_load_n(&counts.allocs, __ATOMIC_RELAXED); }
static long frees(void) { return __atomic_load_n(&counts.frees, __ATOMIC_RELAXED); }

typedef struct {
    size_t   bytes;         /* stack bytes kept live */
    size_t   priv;          /* private_size asked for */
    int      embedded;      /* the save stack must be in the block */
    uint32_t seed;
} job_t;

static unsigned char pat(uint32_t seed, size_t i) {
    return (unsigned char)((seed * 2654435761u + (uint32_t)i * 40503u) >> 13);
}

static void worker(void* arg) {
    job_t* j = arg;
    aco_t* me = aco_get_co();
    size_t got = 0;
    unsigned char* p = aco_rt_private(&got);
    CHECK_EQ(got, j->priv);
    if (j->priv) {
        /* the buffer, then the co, in one block */
        CHECK(p != NULL);
        CHECK((char*)p + ((j->priv + 15) & ~(size_t)15) == (char*)me);
        memset(p, 0x5c, j->priv);
    }
    volatile unsigned char* buf = alloca(j->bytes);
    for (size_t i = 0; i < j->bytes; i++) buf[i] = pat(j->seed, i);
    for (int r = 0; r < 10; r++) {
        CHECK_EQ(aco_rt_yield(), 0);
        for (size_t i = 0; i < j->bytes; i++)
            if (buf[i] != pat(j->seed, i)) TEST_FAIL_AT(__FILE__, __LINE__, "byte %zu lost", i);
        CHECK(me->save_stack.ct_save > 0);  /* its frames went out and back */
        /* the save stack in the block, or (outgrown) one of libaco's */
        int in_block = me->save_stack.ptr == (char*)me + aco_co_size(0);
        if (in_block != j->embedded)
            TEST_FAIL_AT(__FILE__, __LINE__, "save stack %p %s the block (co %p), %zu bytes saved",
                         me->save_stack.ptr, in_block ? "in" : "not in", (void*)me,
                         (size_t)me->save_stack.max_cpsz);
    }
}

/* n cos of job j at once (opts o), joined; the allocations it took. */
static long wave(int n, const job_t* j, const aco_rt_spawn_opts_t* o) {
    aco_rt_co_t** cos = calloc((size_t)n, sizeof(*cos));
    job_t* jobs = calloc((size_t)n, sizeof(*jobs));
    CHECK(cos != NULL && jobs != NULL);
    long a0 = allocs(), f0 = frees();
    for (int i = 0; i < n; i++) {
        jobs[i] = *j;
        jobs[i].seed = (uint32_t)i;
        cos[i] = aco_rt_spawn2(NULL, worker, &jobs[i], o);
        CHECK(cos[i] != NULL);
    }
    for (int i = 0; i < n; i++) CHECK_EQ(aco_rt_join(cos[i], -1), 0);
    long got = allocs() - a0;
    /* joined records are kept for later spawns: nothing freed but what a
     * standalone co or an outgrown save stack had */
    if (j->embedded && !(o && o->standalone)) CHECK_EQ(frees() - f0, 0);
    free(cos);
    free(jobs);
    return got;
}

static void body_co(void* arg) {
    (void)arg;
    /* first the allocations of the spawner: this co's save stack (its
     * function has no guess yet: libaco allocates one, exactly its size,
     * when it is first copied out, here); in checked mode maybe also
     * libaco's hand-off co (its object and its stack's record, once per
     * thread: the first hand-off between cos, here or before) */
    job_t warm = {.bytes = 16, .embedded = 1};
    aco_rt_spawn_opts_t w = {.save_size = 4096};
    long got = wave(2, &warm, &w);
    if (!aco_checked() || got != 2 + 1 + 2) CHECK_EQ(got, 2 + 1);

    job_t a = {.bytes = 300, .priv = 100, .embedded = 1};
    aco_rt_spawn_opts_t oa = {.private_size = 100, .save_size = 4096};
    CHECK_EQ(wave(1000, &a, &oa), 1000);        /* one allocation a co */
    CHECK_EQ(wave(1000, &a, &oa), 0);           /* kept records reused */

    /* no save_size: the scheduler's guess, from the cos that finished */
    job_t b = {.bytes = 300, .priv = 100, .embedded = 1};
    aco_rt_spawn_opts_t ob = {.private_size = 100};
    CHECK_EQ(wave(2000, &b, &ob), 1000);        /* 1000 kept + 1000 new */

    /* frames that outgrow the save stack in the block: one more each */
    job_t c = {.bytes = 8192, .priv = 0, .embedded = 0};
    aco_rt_spawn_opts_t oc = {.private_size = 200, .save_size = 256};
    c.priv = 200;
    long f0 = frees();
    CHECK_EQ(wave(100, &c, &oc), 200);
    CHECK_EQ(frees() - f0, 0);

    /* a save_size that the kept records (8 KiB of frames at most) cannot
     * hold: new records, the save stack in the block as asked */
    job_t d = {.bytes = 20000, .priv = 0, .embedded = 1};
    aco_rt_spawn_opts_t od = {.save_size = 32768};
    CHECK_EQ(wave(50, &d, &od), 50);
    CHECK_EQ(wave(50, &d, &od), 0);             /* and those are kept */

    /* over 1 GiB: ENOMEM, nothing allocated */
    aco_rt_spawn_opts_t huge = {.save_size = ((size_t)1 << 30) + 1};
    long a0 = allocs();
    errno = 0;
    CHECK(aco_rt_spawn2(NULL, worker, &d, &huge) == NULL);
    CHECK_EQ(errno, ENOMEM);
    CHECK_EQ(allocs() - a0, 0);
}

static void solo_worker(void* arg) {
    (void)arg;
    CHECK_EQ(aco_get_co()->save_stack.ct_save, 0);
    CHECK_EQ(aco_rt_yield(), 0);
    CHECK_EQ(aco_get_co()->save_stack.ct_save, 0);   /* its stack is its own */
}

static void solo_co(void* arg) {
    (void)arg;
    aco_rt_spawn_opts_t os = {.standalone = 1, .stack_size = 64 * 1024};
    aco_rt_co_t* cos[8];
    long a0 = allocs();
    for (int i = 0; i < 8; i++) CHECK((cos[i] = aco_rt_spawn2(NULL, solo_worker, NULL, &os)) != NULL);
    CHECK_EQ(allocs() - a0, 8 * 2);             /* its record, its stack's record */
    for (int i = 0; i < 8; i++) CHECK_EQ(aco_rt_join(cos[i], -1), 0);
    /* the stack pool: the next ones take the kept stacks, one allocation each */
    a0 = allocs();
    for (int i = 0; i < 8; i++) CHECK((cos[i] = aco_rt_spawn2(NULL, solo_worker, NULL, &os)) != NULL);
    CHECK_EQ(allocs() - a0, 8);
    for (int i = 0; i < 8; i++) CHECK_EQ(aco_rt_join(cos[i], -1), 0);
}

/* Memory per parked co: what N cos parked in a sleep, or in a receive on a
 * channel, took from the allocator. */
#define NPARK CO_MANY(1000)
static aco_rt_chan_t* never;        /* nobody sends on it */

/* (as aco_rt_bench parked / parked_chan's: cancelled in the end) */
static void sleeper(void* arg) {
    (void)arg;
    aco_rt_sleep(3600LL * 1000000000);
}

static void receiver(void* arg) {
    int v;
    (void)arg;
    aco_rt_chan_recv(never, &v, -1);
}

static void park_wave(aco_rt_fn_t fn, const char* what, size_t most) {
    aco_rt_co_t** cos = calloc(NPARK, sizeof(*cos));
    CHECK(cos != NULL);
    long a0 = allocs();
    long long b0 = __atomic_load_n(&counts.bytes, __ATOMIC_RELAXED);
    for (int i = 0; i < NPARK; i++) CHECK((cos[i] = aco_rt_spawn(NULL, fn, NULL)) != NULL);
    CHECK_EQ(aco_rt_yield(), 0);    /* they all run and park (FIFO) */
    long n = allocs() - a0;
    long long per = (__atomic_load_n(&counts.bytes, __ATOMIC_RELAXED) - b0) / NPARK;
    /* the record, the save stack; and perhaps the spawner's own save stack
     * (its frames were first copied out here, or outgrew it) */
    CHECK_LE(2 * NPARK, n);
    CHECK_LE(n, 2 * NPARK + 1);
    for (int i = 0; i < NPARK; i++) CHECK(cos[i]->state == RT_PARKED && cos[i]->x == NULL);
    printf("test_alloc: a co parked in %s: %lld bytes allocated (record %zu, libaco co %zu, "
           "frames %zu)\n", what, per, sizeof(aco_rt_co_t), aco_co_size(0),
           (size_t)rt_aco(cos[0])->save_stack.max_cpsz);
#if defined(__OPTIMIZE__) && !defined(ACO_TEST_UBSAN)
    /* (sanitizers: bigger frames; UBSan has no macro of its own: make.sh
     * -s ubsan defines ACO_TEST_UBSAN) */
    if (!SLOW) CHECK_LE(per, (long long)most);
#else
    (void)most;
#endif
    for (int i = 0; i < NPARK; i++) CHECK_EQ(aco_rt_cancel(cos[i]), 0);
    for (int i = 0; i < NPARK; i++) CHECK_EQ(aco_rt_join(cos[i], -1), 0);
    free(cos);
}

static void parked_co(void* arg) {
    CHECK_LE(sizeof(aco_rt_co_t), 160);
    if (arg == NULL) {
        park_wave(sleeper, "a sleep", 352);
        return;
    }
    never = aco_rt_chan_new(sizeof(int), 0);
    CHECK(never != NULL);
    park_wave(receiver, "a channel receive", 384);
    CHECK_EQ(aco_rt_chan_free(never), 0);
}

static void body(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    test_go(s, body_co, NULL);
    test_go(s, solo_co, NULL);
}

/* (a fresh scheduler each: no kept records, no guesses) */
static void parked_body(aco_rt_sched_t* s, void* arg) {
    test_go(s, parked_co, arg);
}

/* Spawn-to-pool: rounds of POOL_N empty cos spawned from a co of a
 * 2-thread pool (an idle sibling takes half of each batch, before they
 * start); a co's record is made on the spawner's thread and freed on the
 * thief's.  Records go round (thieves give theirs back): once warm, a round
 * allocates almost nothing.  Private buffers come zeroed whatever record
 * they come in. */
#define POOL_N CO_MANY(SLOW ? 1000 : 4000)     /* (the sanitizers and memcheck: fewer) */
#define POOL_ROUNDS 8
static aco_rt_pool_t* apool;
static aco_rt_wg_t pool_wg;
static long pool_round_allocs[POOL_ROUNDS];
static atomic_long pool_on[2];

static void pool_worker(void* arg) {
    size_t want = (size_t)(uintptr_t)arg, got = 0;
    unsigned char* p = aco_rt_private(&got);
    CHECK_EQ(got, want);
    for (size_t i = 0; i < got; i++) CHECK_EQ(p[i], 0);
    if (got) memset(p, 0xa7, got);      /* the next user must see zeros */
    atomic_fetch_add(&pool_on[aco_rt_sched_current() == aco_rt_pool_sched(apool, 1)], 1);
    aco_rt_wg_done(&pool_wg);
}

static void pool_small(void* arg) { (void)arg; }

static void pool_spawner(void* arg) {
    (void)arg;
    for (int r = 0; r < POOL_ROUNDS; r++) {
        long a0 = allocs();
        CHECK_EQ(aco_rt_wg_add(&pool_wg, POOL_N), 0);
        for (long i = 0; i < POOL_N; i++) {
            size_t priv = 40;           /* a record kept with room for it */
            aco_rt_spawn_opts_t o = {.private_size = priv};
            aco_rt_co_t* c = aco_rt_pool_spawn(apool, pool_worker, (void*)(uintptr_t)priv, &o);
            CHECK(c != NULL);
            CHECK_EQ(aco_rt_detach(c), 0);
            if (i % 500 == 499) aco_rt_yield();     /* the sibling may take some */
        }
        CHECK_EQ(aco_rt_wg_wait(&pool_wg, -1), 0);
        pool_round_allocs[r] = allocs() - a0;
    }
}

static void test_pool_records(void) {
    aco_rt_pool_opts_t po = {.threads = 2};
    /* memcheck runs with epoll only (ACO_RT_TEST_BACKENDS=epoll) */
    const char* b = getenv("ACO_RT_TEST_BACKENDS");
    if (b && strstr(b, "uring") == NULL) po.sched.backend = ACO_RT_BACKEND_EPOLL;
    CHECK((apool = aco_rt_pool_new(&po)) != NULL);
    /* Thread 1 first keeps records without a private buffer (cos sent to
     * it from here): what it gives back includes records too small for
     * the spawner's, which must not hold up the others behind them. */
    for (int i = 0; i < 64; i++)
        CHECK_EQ(aco_rt_detach(aco_rt_spawn(aco_rt_pool_sched(apool, 1), pool_small, NULL)), 0);
    CHECK_EQ(aco_rt_pool_wait(apool, ACO_RT_POOL_DRAIN, aco_rt_now() + 60000000000LL), 0);
    aco_rt_detach(aco_rt_spawn(aco_rt_pool_sched(apool, 0), pool_spawner, NULL));
    CHECK_EQ(aco_rt_pool_wait(apool, ACO_RT_POOL_DRAIN, aco_rt_now() + 60000000000LL), 0);
    aco_rt_pool_free(apool);
    long stolen = atomic_load(&pool_on[1]);
    printf("test_alloc: pool: allocations per round of %d:", POOL_N);
    for (int r = 0; r < POOL_ROUNDS; r++) printf(" %ld", pool_round_allocs[r]);
    printf("; %ld of %d cos ran on the thief\n", stolen, POOL_N * POOL_ROUNDS);
    CHECK_EQ(atomic_load(&pool_on[0]) + stolen, POOL_N * POOL_ROUNDS);
    /* A round allocates only where more cos are in flight at once than
     * ever before (at most POOL_N, plus what the thief keeps): the rounds
     * together, two rounds' worth at most (POOL_N each when each spawn
     * allocated a record and the thief freed it). */
    long all = 0;
    for (int r = 0; r < POOL_ROUNDS; r++) all += pool_round_allocs[r];
    CHECK_LE(all, 2 * POOL_N);
}

int main(void) {
    aco_set_allocator(count_alloc, count_free, &counts);
    aco_rt_opts_t o = {.share_stacks = 1};
    test_on_backends(&o, body, NULL);
    test_on_backends(&o, parked_body, NULL);            /* in a sleep */
    test_on_backends(&o, parked_body, (void*)&never);   /* in a receive */
    test_pool_records();
    /* the schedulers are freed: everything went back, their main cos too */
    CHECK_EQ(allocs(), frees());
    CHECK_EQ(counts.bytes, 0);
    printf("test_alloc: %ld allocations through the program's allocator\n", allocs());
    return 0;
}
