/*
 * test_pool_reuse.c - libaco's pools hand memory round: a slab emptied by
 * destroyed cos is kept for the next slab any pool needs (co objects or
 * save stacks of another size), and the kept ones go back to the system a
 * batch at a time, so that a destroy-all returns the memory (within a few
 * slabs) however many cos there were.
 *
 * Three waves of cos on one share stack, each co with its own number of
 * live bytes (a save stack of its own size class), all suspended at once
 * with their bytes checked after every switch: the first wave fills slabs,
 * is destroyed, and the second (other sizes) must run in recycled slabs
 * (a save stack made right after a destroy-all lies in the slab emptied
 * last);
 * the third churns (every other co destroyed and made again) before all
 * end.  After each destroy-all the resident memory is back within 4 MiB of
 * what it was before the first wave (plain native builds with the full
 * count: sanitizers, valgrind and qemu keep their own accounts of memory;
 * libaco keeps 1 MiB of empty slabs).
 */
#include "aco_test.h"

#include <stdint.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TOOL_BUILD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define TOOL_BUILD 1
#endif
#endif
#ifndef TOOL_BUILD
#define TOOL_BUILD 0
#endif

static aco_t* main_co;

/* A co's argument: its live bytes and the seed of their pattern. */
typedef struct {
    uint32_t words;     /* live words on its stack */
    uint32_t seed;
    long yields;        /* times it saw its bytes intact after a switch */
} job_t;

static void body(void) {
    job_t* j = aco_get_arg();
    uint32_t live[aco_test_vla(j->words)];
    uint32_t s = j->seed;
    for (uint32_t i = 0; i < j->words; i++) live[i] = aco_test_rand(&s);
    for (;;) {
        aco_yield();
        if (j->seed == 0) break;        /* told to end */
        s = j->seed;
        for (uint32_t i = 0; i < j->words; i++) CHECK(live[i] == aco_test_rand(&s));
        j->yields++;
    }
    aco_exit();
}

static long rss_kib(void) {
    FILE* f = fopen("/proc/self/statm", "r");
    CHECK(f != NULL);
    long pages_total, pages_rss;
    CHECK(fscanf(f, "%ld %ld", &pages_total, &pages_rss) == 2);
    fclose(f);
    return pages_rss * (sysconf(_SC_PAGESIZE) / 1024);
}

/* Make co i of a wave: words from the wave's size pattern. */
static aco_t* make(aco_share_stack_t* sstk, job_t* j, long i, int wave, uint32_t* seed) {
    j->words = (uint32_t)(1 + (i * (wave + 3)) % (40 + 30 * wave));
    j->seed = aco_test_rand(seed) | 1;
    j->yields = 0;
    aco_t* co = aco_create(main_co, sstk, 0, body, j);
    aco_resume(co);     /* writes its bytes, yields: suspended */
    return co;
}

/* Resume every co once (each takes the stack: the one before is saved). */
static void round_all(aco_t** cos, job_t* jobs, long n, long want_yields) {
    for (long i = 0; i < n; i++) {
        aco_resume(cos[i]);
        ASSERT_EQ(jobs[i].yields, want_yields);
    }
}

static void end_one(aco_t* co, job_t* j) {
    j->seed = 0;
    aco_resume(co);
    CHECK(co->is_end);
    aco_destroy(co);
}

int main(void) {
    aco_thread_init(NULL);
    main_co = aco_create(NULL, NULL, 0, NULL, NULL);
    aco_share_stack_t* sstk = aco_share_stack_new(0);
    /* ACO_TEST_POOL_COS: fewer (tests.list: where each co costs a tool's
     * thread slot or a mapping of its own) */
    const char* env = getenv("ACO_TEST_POOL_COS");
    long n = aco_test_scale(env ? atol(env) : 120000, 100);
    CHECK(n > 0);
    aco_t** cos = calloc((size_t)n, sizeof(*cos));
    job_t* jobs = calloc((size_t)n, sizeof(*jobs));
    CHECK(cos != NULL && jobs != NULL);
    memset(cos, 1, (size_t)n * sizeof(*cos));       /* resident before base */
    memset(jobs, 1, (size_t)n * sizeof(*jobs));
    uint32_t seed = 2463534242u;
    long base = rss_kib();

    for (int wave = 0; wave < 3; wave++) {
        for (long i = 0; i < n; i++) cos[i] = make(sstk, &jobs[i], i, wave, &seed);
        round_all(cos, jobs, n, 1);
        if (wave == 2) {        /* churn: every other co made again */
            for (long i = 0; i < n; i += 2) {
                end_one(cos[i], &jobs[i]);
                cos[i] = make(sstk, &jobs[i], i + 1, wave + 1, &seed);
                jobs[i].yields = 1;
            }
            round_all(cos, jobs, n, 2);
        }
        long peak = rss_kib();
        /* (white-box) the co destroyed last empties the last slab (of 64
         * KiB) when they go in the order they were made; a save stack of a
         * size no wave uses (8 bytes: no frame is that small) needs a new
         * slab right after, and must get that one */
        uintptr_t last_slab = (uintptr_t)cos[n - 1] & ~(uintptr_t)0xffff;
        for (long i = 0; i < n; i++) end_one(cos[i], &jobs[i]);
        if (wave < 2 && !TOOL_BUILD) {     /* (sanitizers: save stacks on the heap) */
            job_t j = {1, 1, 0};
            aco_t* probe = aco_create(main_co, sstk, 8, body, &j);
            uintptr_t got = (uintptr_t)probe->save_stack.ptr & ~(uintptr_t)0xffff;
            if (got != last_slab) {
                fprintf(stderr, "wave %d: a save stack made after the destroy-all is at "
                        "%p, not in the slab emptied last (%p)\n", wave,
                        probe->save_stack.ptr, (void*)last_slab);
                CHECK(!"an emptied slab was reused");
            }
            aco_destroy(probe);
        }
        long after = rss_kib();
        if (!TOOL_BUILD && !aco_test_on_valgrind() && env == NULL &&
            getenv("ACO_TEST_EMULATOR") == NULL) {
            /* the cos took tens of MiB; a destroy-all gives them back */
            CHECK(peak - base > 16 * 1024);
            if (after - base > 4 * 1024) {
                fprintf(stderr, "wave %d: RSS %ld KiB before the cos, %ld with them, "
                        "%ld after they were destroyed\n", wave, base, peak, after);
                CHECK(after - base <= 4 * 1024);
            }
        }
    }
    aco_share_stack_destroy(sstk);
    aco_destroy(main_co);
    free(cos);
    free(jobs);
    printf("test_pool_reuse: %ld cos a wave, 3 waves: bytes intact, memory returned\n", n);
    return 0;
}
