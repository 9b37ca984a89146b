/*
 * test_aco_bb_threads.c - black-box: threads and last words, from aco.h and
 * upstream's README (tutorial 3: "use libaco in each thread as in one").
 *
 *   - Threads run their own cos at once (on CPU 1 alone or not): each its
 *     own main co, share stacks and FP control state captured by its own
 *     aco_thread_init (with ACO_CONFIG_SHARE_FPU_MXCSR_ENV: the thread's
 *     own, shared); aco_get_co() names each thread's own running co.
 *   - A share stack belongs to the thread whose co was first created on
 *     it; once every co on it is destroyed, the next aco_create on it,
 *     from any thread, claims it; the old thread's aco_create then aborts.
 *     A share stack no co uses may be destroyed by another thread.
 *   - aco_overflow_report_install from the main thread before the threads:
 *     a thread calling aco_thread_init afterwards gets its report too.
 *   - A last word that yields returns to the resumer; the abort comes when
 *     the co is resumed.
 */
#include "aco_test.h"

#include <fenv.h>
#include <pthread.h>

#define NT 4

#ifdef ACO_CONFIG_SHARE_FPU_MXCSR_ENV
#define SHARED 1    /* one FP control state for every co: the thread's */
#else
#define SHARED 0
#endif

struct tw {
    int idx;
    int rounding;       /* what its cos run with */
    int bad;
    long steps;
};

static void co_count(void) {
    struct tw* t = aco_get_arg();
    aco_t* me = aco_get_co();
    volatile unsigned char f[aco_test_vla(500 + 100 * (size_t)t->idx)];
    aco_test_fill(f, sizeof(f), (uint32_t)t->idx);
    if (fegetround() != t->rounding) t->bad++;
    for (int i = 0; i < 200; i++) {
        aco_yield();
        if (aco_get_co() != me || aco_get_arg() != t) t->bad++;
        if (!aco_test_intact(f, sizeof(f), (uint32_t)t->idx)) t->bad++;
        if (fegetround() != t->rounding) t->bad++;
        t->steps++;
    }
    aco_exit();
}

static void* thread_world(void* arg) {
    struct tw* t = arg;
    static const int modes[] = {FE_TONEAREST, FE_UPWARD, FE_DOWNWARD, FE_TOWARDZERO};
    fesetround(modes[t->idx % 4]);
    aco_thread_init(NULL);
    fesetround(FE_TONEAREST);
    t->rounding = SHARED ? FE_TONEAREST : modes[t->idx % 4];
    aco_t* m = aco_create(NULL, NULL, 0, NULL, NULL);
    aco_share_stack_t* s = aco_share_stack_new(0);
    aco_t* cos[3];
    for (int i = 0; i < 3; i++) cos[i] = aco_create(m, s, 0, co_count, t);
    for (int live = 3; live;) {
        live = 0;
        for (int i = 0; i < 3; i++) {
            if (cos[i]->is_end) continue;
            live++;
            aco_resume(cos[i]);
            if (fegetround() != FE_TONEAREST) t->bad++;
            sched_yield();
        }
    }
    for (int i = 0; i < 3; i++) aco_destroy(cos[i]);
    aco_share_stack_destroy(s);
    aco_destroy(m);
    return NULL;
}

static void worlds(void) {
    pthread_t th[NT];
    struct tw t[NT];
    for (int i = 0; i < NT; i++) {
        memset(&t[i], 0, sizeof(t[i]));
        t[i].idx = i;
        CHECK(pthread_create(&th[i], NULL, thread_world, &t[i]) == 0);
    }
    for (int i = 0; i < NT; i++) {
        pthread_join(th[i], NULL);
        ASSERT_EQ(t[i].bad, 0);
        ASSERT_EQ(t[i].steps, 600);
    }
}

/* ------------------------------------------------------------------------ */
/* A share stack passes between threads.                                    */
/* ------------------------------------------------------------------------ */

static aco_share_stack_t* passed;
static aco_t* main_co;

static void co_exit_now(void) { aco_exit(); }
static void co_yield_once(void) {
    aco_yield();
    aco_exit();
}

static pthread_barrier_t bar;
static void* thread_claims(void* arg) {
    (void)arg;
    aco_thread_init(NULL);
    aco_t* m = aco_create(NULL, NULL, 0, NULL, NULL);
    aco_t* co = aco_create(m, passed, 0, co_yield_once, NULL);
    aco_resume(co);
    pthread_barrier_wait(&bar);          /* main checks its aco_create */
    pthread_barrier_wait(&bar);
    aco_resume(co);
    CHECK(co->is_end);
    aco_destroy(co);
    aco_destroy(m);
    return NULL;
}

static void child_old_thread_creates(void* arg) {
    (void)arg;
    aco_create(main_co, passed, 0, co_exit_now, NULL);
}

static void hand_over(void) {
    passed = aco_share_stack_new(0);
    aco_t* mine = aco_create(main_co, passed, 0, co_yield_once, NULL);
    aco_resume(mine);
    aco_destroy(mine);                    /* no co uses it now */
    pthread_t t;
    CHECK(pthread_barrier_init(&bar, NULL, 2) == 0);
    CHECK(pthread_create(&t, NULL, thread_claims, NULL) == 0);
    pthread_barrier_wait(&bar);
    /* The other thread's co exists: the stack is that thread's. */
    if (aco_test_expect_signal("aco_create on a stack another thread claimed",
                               child_old_thread_creates, NULL, SIGABRT,
                               "aco: aco_create: "))
        exit(1);
    pthread_barrier_wait(&bar);
    pthread_join(t, NULL);
    pthread_barrier_destroy(&bar);
    /* its co is gone: this thread claims it back */
    aco_t* again = aco_create(main_co, passed, 0, co_exit_now, NULL);
    aco_resume(again);
    CHECK(again->is_end);
    aco_destroy(again);
    aco_share_stack_destroy(passed);
}

/* Once no co is left, the old thread claims it again. */
static aco_share_stack_t* free_again;
static void* thread_uses_and_leaves(void* arg) {
    (void)arg;
    aco_thread_init(NULL);
    aco_t* m = aco_create(NULL, NULL, 0, NULL, NULL);
    aco_t* co = aco_create(m, free_again, 0, co_yield_once, NULL);
    aco_resume(co);
    aco_destroy(co);                      /* suspended, destroyed: unused */
    aco_destroy(m);
    return NULL;
}

static void* thread_destroys_stack(void* arg) {
    aco_share_stack_destroy(arg);
    return NULL;
}

static void round_trip(void) {
    free_again = aco_share_stack_new(0);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, thread_uses_and_leaves, NULL) == 0);
    pthread_join(t, NULL);
    aco_t* co = aco_create(main_co, free_again, 0, co_yield_once, NULL);
    aco_resume(co);
    aco_resume(co);
    CHECK(co->is_end);
    aco_destroy(co);
    /* another thread destroys it: no co uses it */
    CHECK(pthread_create(&t, NULL, thread_destroys_stack, free_again) == 0);
    pthread_join(t, NULL);
}

/* ------------------------------------------------------------------------ */
/* The overflow report in a thread made after the install.                  */
/* ------------------------------------------------------------------------ */

static void co_recurse(void);
__attribute__((noinline)) static int recurse(volatile int d) {
    volatile char pad[512];
    pad[0] = (char)d;
    if (d > 100000000) return pad[0];     /* never: the guard comes first */
    return recurse(d + 1) + pad[0];
}
static void co_recurse(void) {
    recurse(0);
    aco_exit();
}

static aco_share_stack_t* small;
static void* thread_overflows(void* arg) {
    (void)arg;
    aco_thread_init(NULL);
    aco_t* m = aco_create(NULL, NULL, 0, NULL, NULL);
    small = aco_share_stack_new(16 * 1024);
    aco_t* co = aco_create(m, small, 0, co_recurse, NULL);
    fprintf(stderr, "co %p stack %p\n", (void*)co, (void*)small);
    aco_resume(co);
    return NULL;
}

static void child_thread_overflow(void* arg) {
    (void)arg;
    aco_overflow_report_install();
    pthread_t t;
    CHECK(pthread_create(&t, NULL, thread_overflows, NULL) == 0);
    pthread_join(t, NULL);
}

/* ------------------------------------------------------------------------ */
/* A last word that yields.                                                 */
/* ------------------------------------------------------------------------ */

static void last_word_yields(void) {
    fprintf(stderr, "last word %p\n", (void*)aco_get_co());
    aco_yield();
    fprintf(stderr, "after the last word's yield: never\n");
}

static void co_returns(void) {}

static void child_last_word_yields(void* arg) {
    (void)arg;
    aco_thread_init(last_word_yields);
    aco_t* m = aco_create(NULL, NULL, 0, NULL, NULL);
    aco_share_stack_t* s = aco_share_stack_new(0);
    aco_t* co = aco_create(m, s, 0, co_returns, NULL);
    aco_resume(co);
    fprintf(stderr, "back in main, is_end %d\n", co->is_end);
    aco_resume(co);
    fprintf(stderr, "second resume returned\n");
}

int main(void) {
    aco_thread_init(NULL);
    main_co = aco_create(NULL, NULL, 0, NULL, NULL);
    worlds();
    hand_over();
    round_trip();
    int fails = 0;
    if (!aco_checked())
        fails += aco_test_expect_signal("overflow in a later thread", child_thread_overflow,
                                        NULL, SIGSEGV, "overflowed its share stack");
    fails += aco_test_expect_signal("last word that yields", child_last_word_yields,
                                    NULL, SIGABRT,
                                    "last word 0x|back in main, is_end 0|aco: ");
    aco_destroy(main_co);
    if (fails) return 1;
    printf("ok\n");
    return 0;
}
