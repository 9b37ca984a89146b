/*
 * test_yield_to.c - aco_yield_to(co): a non-main co hands off straight to
 * another co of its thread, with libaco's share-stack rules kept.
 *
 * The rules checked (aco.h):
 *   - Two cos on two stacks and two cos on one stack play ping-pong by
 *     hand-offs alone: each sees its own frames intact (patterned VLAs of
 *     several sizes) after every return, the order is strict, and the copy
 *     counts are what aco_resume would have made (none apart; one save and
 *     one restore per hand-off on one stack).
 *   - aco_resume returns when the last co of a chain of hand-offs yields or
 *     exits; aco_resume_last names it.  A hand-off may start a co that has
 *     not run; aco_yield_to(main co) is aco_yield.
 *   - The FP control state is per co across hand-offs (fesetround), unless
 *     ACO_CONFIG_SHARE_FPU_MXCSR_ENV.
 *   - A random mix of resumes, yields, hand-offs and exits over cos of two
 *     stacks against a model: every co's frames intact, aco_resume_last
 *     right at every step.
 *   - aco_resume_reserve before a hand-off on one stack (the caller owns
 *     it): afterwards the hand-off allocates nothing (forked child with a
 *     counting allocator); a destroyed main co takes its hand-off co along
 *     and a new main co hands off again.
 *   - Misuse aborts naming aco_yield_to: from the main co, to itself, to
 *     NULL, to an ended co, to another thread's co; aco_resume_last's names
 *     aco_resume_last; aco_resume_reserve of a main co, or of another
 *     thread's co, says so.
 */
#include "aco_test.h"

#include <fenv.h>
#include <pthread.h>

static aco_t* main_co;

/* ------------------------------------------------------------------------ */
/* Ping-pong by hand-offs                                                   */
/* ------------------------------------------------------------------------ */

struct player {
    aco_t* self;
    aco_t* peer;
    int id;
    int rounds;
    size_t frame;           /* bytes of patterned frame kept live */
    int bad;                /* frames found changed */
};

static int trace[4096];
static int ntrace;

static void co_player(void) {
    struct player* p = aco_get_arg();
    volatile unsigned char buf[aco_test_vla(p->frame)];
    aco_test_fill(buf, p->frame, (uint32_t)p->id + 7);
    for (int i = 0; i < p->rounds; i++) {
        trace[ntrace++] = p->id;
        if (!aco_test_intact(buf, p->frame, (uint32_t)p->id + 7)) p->bad++;
        CHECK(aco_get_co() == p->self);
        aco_yield_to(p->peer);
        if (!aco_test_intact(buf, p->frame, (uint32_t)p->id + 7)) p->bad++;
    }
    aco_exit();
}

static void ping_pong(int same_stack, size_t frame) {
    aco_share_stack_t* s1 = aco_share_stack_new(0);
    aco_share_stack_t* s2 = same_stack ? s1 : aco_share_stack_new(0);
    struct player a = {.id = 1, .rounds = 200, .frame = frame};
    struct player b = {.id = 2, .rounds = 200, .frame = frame + 40};
    a.self = aco_create(main_co, s1, 0, co_player, &a);
    b.self = aco_create(main_co, s2, 0, co_player, &b);
    a.peer = b.self;
    b.peer = a.self;
    ntrace = 0;
    /* a hands off to b 200 times, b to a 200 times: b's last hand-off
     * continues a, which exits after its 200th round. */
    aco_t* last = aco_resume_last(a.self);
    ASSERT_PTR_EQ(last, a.self);
    CHECK(a.self->is_end && !b.self->is_end);
    last = aco_resume_last(b.self);         /* b's last round ends it */
    ASSERT_PTR_EQ(last, b.self);
    CHECK(b.self->is_end);
    ASSERT_EQ(ntrace, 400);
    for (int i = 0; i < ntrace; i++) ASSERT_EQ(trace[i], 1 + (i & 1));
    ASSERT_EQ(a.bad, 0);
    ASSERT_EQ(b.bad, 0);
    if (same_stack) {
        /* Each is saved at each of its 200 hand-offs and restored each
         * time it comes back: a 200 times by b's hand-offs, b 199 times by
         * a's (its first start restores nothing) and once by main. */
        ASSERT_EQ(a.self->save_stack.ct_save, 200);
        ASSERT_EQ(b.self->save_stack.ct_save, 200);
        ASSERT_EQ(a.self->save_stack.ct_restore, 200);
        ASSERT_EQ(b.self->save_stack.ct_restore, 200);
        CHECK(a.self->save_stack.max_cpsz >= frame);
    } else {
        ASSERT_EQ(a.self->save_stack.ct_save + b.self->save_stack.ct_save, 0);
        ASSERT_EQ(a.self->save_stack.ct_restore + b.self->save_stack.ct_restore, 0);
    }
    aco_destroy(a.self);
    aco_destroy(b.self);
    aco_share_stack_destroy(s1);
    if (!same_stack) aco_share_stack_destroy(s2);
}

/* ------------------------------------------------------------------------ */
/* Chains, new cos, the main co as target, FP control state                 */
/* ------------------------------------------------------------------------ */

static aco_t* chain[3];
static int steps[3];

static void co_chain(void) {
    int i = (int)(intptr_t)aco_get_arg();
    steps[i]++;
    if (i < 2) aco_yield_to(chain[i + 1]);      /* c starts here */
    else aco_yield();
    steps[i]++;
    if (i == 1) aco_yield_to(main_co);          /* is aco_yield */
    else aco_yield();
    steps[i]++;
    aco_exit();
}

static void chains(void) {
    aco_share_stack_t* s = aco_share_stack_new(0);
    aco_share_stack_t* t = aco_share_stack_new(0);
    for (int i = 0; i < 3; i++) {
        chain[i] = aco_create(main_co, i == 1 ? t : s, 0, co_chain, (void*)(intptr_t)i);
        steps[i] = 0;
    }
    ASSERT_PTR_EQ(aco_resume_last(chain[0]), chain[2]);     /* a -> b -> c yields */
    CHECK(steps[0] == 1 && steps[1] == 1 && steps[2] == 1);
    ASSERT_PTR_EQ(aco_get_co(), main_co);
    ASSERT_PTR_EQ(aco_resume_last(chain[1]), chain[1]);     /* b's yield_to(main) */
    ASSERT_PTR_EQ(aco_resume_last(chain[0]), chain[0]);     /* a yields */
    ASSERT_PTR_EQ(aco_resume_last(chain[2]), chain[2]);
    for (int i = 0; i < 3; i++) aco_resume(chain[i]);
    for (int i = 0; i < 3; i++) {
        ASSERT_EQ(steps[i], 3);
        CHECK(chain[i]->is_end);
        aco_destroy(chain[i]);
    }
    aco_share_stack_destroy(s);
    aco_share_stack_destroy(t);
}

#ifndef ACO_CONFIG_SHARE_FPU_MXCSR_ENV
static aco_t* fp_co[2];
static int fp_bad;

static void co_fp(void) {
    int i = (int)(intptr_t)aco_get_arg();
    int mode = i ? FE_UPWARD : FE_DOWNWARD;
    fesetround(mode);
    for (int r = 0; r < 10; r++) {
        aco_yield_to(fp_co[!i]);
        if (fegetround() != mode) fp_bad++;
    }
    aco_exit();
}

static void fp_state(int same_stack) {
    aco_share_stack_t* s = aco_share_stack_new(0);
    aco_share_stack_t* t = same_stack ? s : aco_share_stack_new(0);
    fp_bad = 0;
    for (int i = 0; i < 2; i++)
        fp_co[i] = aco_create(main_co, i ? t : s, 0, co_fp, (void*)(intptr_t)i);
    aco_resume(fp_co[0]);
    ASSERT_EQ(fegetround(), FE_TONEAREST);      /* main's own */
    while (!fp_co[1]->is_end) aco_resume(fp_co[1]);
    ASSERT_EQ(fp_bad, 0);
    for (int i = 0; i < 2; i++) aco_destroy(fp_co[i]);
    aco_share_stack_destroy(s);
    if (!same_stack) aco_share_stack_destroy(t);
}
#endif

/* ------------------------------------------------------------------------ */
/* A random mix against a model                                             */
/* ------------------------------------------------------------------------ */

#define NMIX 6
static aco_t* mix[NMIX];
static int mix_next[NMIX];          /* what co i does next: -1 yield, -2 exit, else hand off */
static int mix_ran;                 /* the co that ran last */
static int mix_bad;
static uint32_t mix_seed = 12345;

static void co_mix(void) {
    int i = (int)(intptr_t)aco_get_arg();
    size_t n = 64 + 300 * (size_t)i;
    volatile unsigned char buf[aco_test_vla(n)];
    aco_test_fill(buf, n, (uint32_t)i * 31 + 1);
    for (;;) {
        mix_ran = i;
        if (!aco_test_intact(buf, n, (uint32_t)i * 31 + 1)) mix_bad++;
        int what = mix_next[i];
        if (what == -2) break;
        if (what == -1) aco_yield();
        else aco_yield_to(mix[what]);
    }
    aco_exit();
}

static void random_mix(void) {
    aco_share_stack_t* st[2] = {aco_share_stack_new(0), aco_share_stack_new(0)};
    int live = NMIX;
    for (int i = 0; i < NMIX; i++)
        mix[i] = aco_create(main_co, st[i & 1], 0, co_mix, (void*)(intptr_t)i);
    long steps = aco_test_scale(3000, 10);
    for (long k = 0; k < steps && live > 0; k++) {
        int start;
        do start = (int)(aco_test_rand(&mix_seed) % NMIX); while (mix[start]->is_end);
        /* A chain of up to 4 hand-offs among live cos, then a yield or an
         * exit (exits only late, so that chains stay long). */
        int cur = start, len = (int)(aco_test_rand(&mix_seed) % 5);
        for (int j = 0; j < len && live > 1; j++) {
            int to;
            do to = (int)(aco_test_rand(&mix_seed) % NMIX); while (to == cur || mix[to]->is_end);
            mix_next[cur] = to;
            cur = to;
        }
        mix_next[cur] = (k > steps / 2 && aco_test_rand(&mix_seed) % 8 == 0) ? -2 : -1;
        aco_t* last = aco_resume_last(mix[start]);
        ASSERT_PTR_EQ(last, mix[cur]);
        ASSERT_EQ(mix_ran, cur);
        if (mix_next[cur] == -2) {
            CHECK(mix[cur]->is_end);
            live--;
        }
    }
    ASSERT_EQ(mix_bad, 0);
    for (int i = 0; i < NMIX; i++) aco_destroy(mix[i]);
    aco_share_stack_destroy(st[0]);
    aco_share_stack_destroy(st[1]);
}

/* ------------------------------------------------------------------------ */
/* aco_resume_reserve first: the hand-off allocates nothing                 */
/* ------------------------------------------------------------------------ */

static long allocs;

static void* count_alloc(void* cookie, size_t sz) {
    (void)cookie;
    allocs++;
    return malloc(sz);
}

static void count_free(void* cookie, void* p, size_t sz) {
    (void)cookie, (void)sz;
    free(p);
}

static aco_t* rv[2];
static long allocs_at_reserve;
static int reserve_ret;

static void co_reserver(void) {
    volatile unsigned char buf[aco_test_vla(6000)];
    aco_test_fill(buf, 6000, 3);
    reserve_ret = aco_resume_reserve(rv[1]);
    allocs_at_reserve = allocs;
    aco_yield_to(rv[1]);
    CHECK(aco_test_intact(buf, 6000, 3));
    aco_exit();
}

static void co_other(void) {
    aco_yield();
    aco_exit();
}

static void reserve_child(void* unused) {
    (void)unused;
    aco_set_allocator(count_alloc, count_free, NULL);
    aco_thread_init(NULL);
    aco_t* m = aco_create(NULL, NULL, 0, NULL, NULL);
    aco_share_stack_t* s = aco_share_stack_new2(0, 0);      /* from the allocator */
    rv[0] = aco_create(m, s, 0, co_reserver, NULL);
    rv[1] = aco_create(m, s, 0, co_other, NULL);
    aco_resume(rv[0]);          /* rv[0] hands off to rv[1], which yields */
    if (reserve_ret != 0) _exit(10);
    if (allocs != allocs_at_reserve) _exit(11);     /* the hand-off allocated */
    if (rv[0]->save_stack.valid_sz < 6000) _exit(12);
    aco_resume(rv[1]);
    aco_resume(rv[0]);
    if (!rv[0]->is_end || !rv[1]->is_end) _exit(13);
    aco_destroy(rv[0]);
    aco_destroy(rv[1]);
    aco_share_stack_destroy(s);
    aco_destroy(m);     /* the hand-off co goes with it */
    _exit(0);
}

static void reserve_then_handoff(void) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) reserve_child(NULL);
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fprintf(stderr, "reserve child: status 0x%x\n", st);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* A new main co after the old one (and its hand-off co) went. */
static void main_again(void) {
    aco_destroy(main_co);
    main_co = aco_create(NULL, NULL, 0, NULL, NULL);
    ping_pong(1, 100);
}

/* ------------------------------------------------------------------------ */
/* Misuse                                                                   */
/* ------------------------------------------------------------------------ */

static aco_t* victim;
static aco_t* other_thread_co;

static void co_self(void) {
    aco_yield_to(aco_get_co());
    aco_exit();
}

static void co_to_victim(void) {
    aco_yield_to(victim);
    aco_exit();
}

static void co_to_null(void) {
    aco_yield_to(NULL);
    aco_exit();
}

static void co_ends(void) {
    aco_exit();
}

static void co_idle(void) {
    for (;;) aco_yield();
}

static void misuse_from_main(void* arg) {
    (void)arg;
    aco_share_stack_t* s = aco_share_stack_new(0);
    aco_t* c = aco_create(main_co, s, 0, co_ends, NULL);
    aco_yield_to(c);
}

static void misuse_run(void* fp) {
    aco_share_stack_t* s = aco_share_stack_new(0);
    aco_t* c = aco_create(main_co, s, 0, (aco_cofuncp_t)fp, NULL);
    aco_resume(c);
}

static void misuse_ended(void* arg) {
    (void)arg;
    aco_share_stack_t* s = aco_share_stack_new(0);
    victim = aco_create(main_co, s, 0, co_ends, NULL);
    aco_resume(victim);
    misuse_run((void*)co_to_victim);
}

static void* thread_fn(void* arg) {
    (void)arg;
    aco_thread_init(NULL);
    aco_t* m = aco_create(NULL, NULL, 0, NULL, NULL);
    other_thread_co = aco_create(m, aco_share_stack_new(0), 0, co_idle, NULL);
    return NULL;
}

static void misuse_other_thread(void* arg) {
    (void)arg;
    victim = other_thread_co;
    misuse_run((void*)co_to_victim);
}

static void misuse_last_ended(void* arg) {
    (void)arg;
    aco_share_stack_t* s = aco_share_stack_new(0);
    aco_t* c = aco_create(main_co, s, 0, co_ends, NULL);
    aco_resume(c);
    aco_resume_last(c);
}

static void misuse_reserve_main(void* arg) {
    (void)arg;
    aco_resume_reserve(main_co);
}

static void misuse_reserve_other_thread(void* arg) {
    (void)arg;
    aco_resume_reserve(other_thread_co);
}

static void misuse(void) {
    /* The other thread's co is made before the forks (TSan refuses new
     * threads in the child of a process with threads). */
    pthread_t th;
    CHECK(pthread_create(&th, NULL, thread_fn, NULL) == 0);
    CHECK(pthread_join(th, NULL) == 0);
    int fails = 0;
    fails += aco_test_expect_signal("from main", misuse_from_main, NULL, SIGABRT,
                                    "aco_yield_to|non-main co");
    fails += aco_test_expect_signal("to itself", misuse_run, (void*)co_self, SIGABRT,
                                    "aco_yield_to|cannot hand off to itself");
    fails += aco_test_expect_signal("to NULL", misuse_run, (void*)co_to_null, SIGABRT,
                                    "aco_yield_to|must not be NULL");
    fails += aco_test_expect_signal("to ended", misuse_ended, NULL, SIGABRT,
                                    "aco_yield_to|has ended");
    fails += aco_test_expect_signal("other thread", misuse_other_thread, NULL, SIGABRT,
                                    "aco_yield_to|not to the caller's");
    fails += aco_test_expect_signal("resume_last of an ended co", misuse_last_ended, NULL,
                                    SIGABRT, "aco: aco_resume_last: |has ended");
    fails += aco_test_expect_signal("reserve of a main co", misuse_reserve_main, NULL,
                                    SIGABRT, "aco: aco_resume_reserve: |is a main co");
    fails += aco_test_expect_signal("reserve of another thread's co",
                                    misuse_reserve_other_thread, NULL, SIGABRT,
                                    "aco: aco_resume_reserve: |the caller must be that main co");
    ASSERT_EQ(fails, 0);
}

int main(void) {
    reserve_then_handoff();     /* first: its child sets an allocator */
    aco_thread_init(NULL);
    main_co = aco_create(NULL, NULL, 0, NULL, NULL);
    ping_pong(0, 100);
    ping_pong(1, 100);
    ping_pong(1, 5000);
    ping_pong(0, 5000);
    chains();
#ifndef ACO_CONFIG_SHARE_FPU_MXCSR_ENV
    fp_state(0);        /* (shared by every co in that build: nothing to check) */
    fp_state(1);
#endif
    random_mix();
    misuse();
    main_again();
    aco_destroy(main_co);
    puts("test_yield_to: ok");
    return 0;
}
