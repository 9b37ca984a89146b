/*
 * test_property.c - under seeded random schedules of hundreds of cos on
 * shared stacks, every co's locals survive every switch, and the stacks'
 * owners, the copy counts and is_end always agree with a model of the
 * rules.
 *
 *   test_property [seed [steps]]     seed: from the clock if absent
 *
 * Hundreds of cos live on a few share stacks of mixed sizes, with and without
 * guard pages.  Each co loops: per step it recurses to a random depth, every
 * frame holding a local array of random size whose contents derive from (co
 * id, depth, step, index); it yields at the bottom and, at random, again in
 * frames on the way back up, and checks every frame's array after each
 * resume and before leaving it.  Main resumes random cos, destroys ended and
 * (at random) suspended cos and creates replacements on random stacks.
 *
 * Invariants checked against a model that main keeps:
 *   - a stack's owner is the co that ran on it last, NULL after that co
 *     exited or was destroyed, and never changes for the other stacks;
 *   - copies happen only when a stack changes hands: resuming the owner
 *     copies nothing; resuming another co saves the old owner exactly once
 *     and restores the new one exactly once if it has frames to restore;
 *     the running totals over every co ever created match the model's;
 *   - an evicted co's save covers at least its frames (from its deepest
 *     local up to the top of the stack);
 *   - is_end is set exactly for the cos that called aco_exit();
 *   - inside a co: aco_get_co(), aco_get_arg() and the owner are itself.
 *
 * The run is a pure function of the seed (all randomness is drawn from it,
 * in an order independent of addresses and timing), so a failure prints the
 * seed and the step and is replayed by passing that seed.
 */
#define _GNU_SOURCE     /* clock_gettime, even under -std=c11 */
#include "aco_test.h"

#include <time.h>

#define N_STACKS 5
#define N_COS 300
#define MAX_DEPTH 14
#define MAX_FRAME_WORDS 512         /* 2 KiB per frame at most */
#define STEPS 800000L               /* ~1 s natively at -O2 */
#define TIME_CAP_SEC 1.5            /* a slow build stops early */
#define SWEEP_EVERY 1009            /* full invariant sweep period */

static const struct {
    size_t sz;
    char guard;
} stack_kinds[N_STACKS] = {
    {16 * 1024, 1}, {24 * 1024 + 8, 0}, {64 * 1024, 1}, {100000, 0},
    {256 * 1024, 1},
};

static unsigned long g_seed;
static long g_step = -1;    /* main-loop step, for failure reports */

__attribute__((noreturn, format(printf, 1, 2)))
static void fail(const char* fmt, ...) {
    va_list ap;
    fprintf(stderr, "test_property: FAILED at step %ld (replay: test_property "
            "%lu): ", g_step, g_seed);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

#define PCHECK(cond)                                                          \
    do {                                                                      \
        if (!(cond)) fail("%s:%d: %s", __FILE__, __LINE__, #cond);            \
    } while (0)

#define PCHECK_EQ(a, b)                                                       \
    do {                                                                      \
        uintmax_t a_ = (uintmax_t)(a), b_ = (uintmax_t)(b);                   \
        if (a_ != b_)                                                         \
            fail("%s:%d: %s == %ju, expected %s == %ju", __FILE__, __LINE__,  \
                 #a, a_, #b, b_);                                             \
    } while (0)

/* splitmix-style mixing: seeds the generators and makes the patterns. */
static uint32_t mix32(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return (uint32_t)(x ^ (x >> 31));
}

/* 32-bit arithmetic only: it runs for every word, on i386 too. */
static uint32_t pattern(uint32_t id, uint32_t depth, uint32_t step,
                        uint32_t i) {
    uint32_t x = id * 0x9e3779b1u ^ depth * 0x85ebca77u ^ step * 0xc2b2ae3du;
    x ^= i * 0x27d4eb2fu;
    x ^= x >> 15;
    x *= 0x2c1b3c6du;
    x ^= x >> 12;
    return x;
}

/* ------------------------------------------------------------------------ */

struct co_state {
    aco_t* co;          /* NULL: free slot */
    uint32_t id;        /* creation serial */
    uint32_t rng;       /* the co's own generator */
    int stack;
    uint32_t steps;     /* steps before aco_exit */
    uint32_t step;
    size_t budget;      /* bytes of arrays it may hold on its stack */
    int ran;            /* has run (so has frames once suspended) */
    int exiting;        /* is calling aco_exit */
    char* deepest;      /* lowest array address at its last yield */
    long yields;
};

static aco_t* main_co;
static aco_share_stack_t* stacks[N_STACKS];
static struct co_state cos[N_COS];
static uint32_t g_rng;
static uint32_t next_id;

/* The model. */
static aco_t* model_owner[N_STACKS];
static size_t model_saves, model_restores;
static size_t retired_saves, retired_restores;
static long n_resumes, n_yields, n_exits, n_killed, n_created, n_handovers;

static char* stack_top(const aco_share_stack_t* s) {
    return (char*)s->ptr + s->sz;
}

/* After coming back from a yield: who am I, and do I own my stack? */
static void check_self(struct co_state* st, aco_t* self) {
    PCHECK(aco_get_co() == self);
    PCHECK(aco_get_arg() == st);
    PCHECK(self->share_stack->owner == self);
    PCHECK(!self->is_end);
}

static void co_yield(struct co_state* st, aco_t* self, char* deepest) {
    st->deepest = deepest;
    st->yields++;
    aco_yield();
    check_self(st, self);
}

static void verify(const uint32_t* buf, uint32_t n, struct co_state* st,
                   uint32_t depth, const char* when) {
    __asm__ volatile("" : : "r"(buf) : "memory");
    for (uint32_t i = 0; i < n; i++) {
        uint32_t want = pattern(st->id, depth, st->step, i);
        if (buf[i] != want)
            fail("co %u (stack %d) step %u depth %u word %u/%u %s: 0x%08x, "
                 "expected 0x%08x", st->id, st->stack, st->step, depth, i, n,
                 when, buf[i], want);
    }
}

/* One frame of a step: an array of random size, a deeper frame or a yield,
 * maybe one more yield on the way up, and the checks. */
__attribute__((noinline)) static void frame(struct co_state* st, aco_t* self,
                                            uint32_t depth, size_t per_frame) {
    uint32_t max_words = (uint32_t)(per_frame / sizeof(uint32_t));
    if (max_words > MAX_FRAME_WORDS) max_words = MAX_FRAME_WORDS;
    uint32_t n = 1 + aco_test_rand(&st->rng) % max_words;
    uint32_t buf[n];
    for (uint32_t i = 0; i < n; i++) buf[i] = pattern(st->id, depth, st->step, i);
    __asm__ volatile("" : : "r"(buf) : "memory");
    if (depth == 0) {
        /* A test bug, not a library one: the co outgrew its budget. */
        PCHECK((char*)buf - (char*)self->share_stack->ptr > 2048);
        co_yield(st, self, (char*)buf);
        verify(buf, n, st, depth, "after a yield at the bottom");
    } else {
        frame(st, self, depth - 1, per_frame);
        verify(buf, n, st, depth, "after the deeper frames returned");
        if (aco_test_rand(&st->rng) % 4 == 0) {
            co_yield(st, self, (char*)buf);
            verify(buf, n, st, depth, "after a yield on the way up");
        }
    }
}

static void prop_co(void) {
    struct co_state* st = aco_get_arg();
    aco_t* self = aco_get_co();
    check_self(st, self);
    st->ran = 1;
    for (st->step = 0; st->step < st->steps; st->step++) {
        uint32_t depth = aco_test_rand(&st->rng) % (MAX_DEPTH + 1);
        frame(st, self, depth, st->budget / (depth + 1));
    }
    st->exiting = 1;
    aco_exit();
}

/* ------------------------------------------------------------------------ */

static void create_in(int slot) {
    static const size_t save_sizes[4] = {0, 64, 1000, 16384};
    struct co_state* st = &cos[slot];
    memset(st, 0, sizeof(*st));
    st->id = ++next_id;
    st->rng = mix32(g_seed * 0x100000001b3ull ^ st->id) | 1;
    st->stack = (int)(aco_test_rand(&g_rng) % N_STACKS);
    st->steps = 1 + aco_test_rand(&g_rng) % 40;
    /* Half the stack, less room for the frames' own overhead (and for
     * fprintf should a check fail deep down). */
    st->budget = stacks[st->stack]->sz / 2 - 3072;
    st->co = aco_create(main_co, stacks[st->stack],
                        save_sizes[aco_test_rand(&g_rng) % 4], prop_co, st);
    PCHECK(st->co->is_end == 0);
    PCHECK_EQ(st->co->save_stack.ct_save, 0);
    PCHECK_EQ(st->co->save_stack.ct_restore, 0);
    n_created++;
}

static void destroy_in(int slot) {
    struct co_state* st = &cos[slot];
    aco_share_stack_t* s = stacks[st->stack];
    aco_t* other = s->owner == st->co ? NULL : s->owner;
    PCHECK(s->owner == model_owner[st->stack]);
    retired_saves += st->co->save_stack.ct_save;
    retired_restores += st->co->save_stack.ct_restore;
    aco_destroy(st->co);
    /* Destroying the owner frees the stack; destroying another co must not
     * touch it. */
    PCHECK(s->owner == other);
    model_owner[st->stack] = other;
    st->co = NULL;
}

static void resume_checked(struct co_state* st) {
    aco_t* c = st->co;
    aco_share_stack_t* s = stacks[st->stack];
    aco_t* before = s->owner;
    PCHECK(before == model_owner[st->stack]);
    size_t c_saves = c->save_stack.ct_save, c_restores = c->save_stack.ct_restore;
    size_t b_saves = before != NULL ? before->save_stack.ct_save : 0;
    int had_frames = st->ran;
    aco_resume(c);
    n_resumes++;

    PCHECK(aco_get_co() == main_co);
    if (before == c) {
        /* Still its stack: nothing to copy either way. */
        PCHECK_EQ(c->save_stack.ct_save, c_saves);
        PCHECK_EQ(c->save_stack.ct_restore, c_restores);
    } else {
        n_handovers++;
        if (before != NULL) {
            PCHECK_EQ(before->save_stack.ct_save, b_saves + 1);
            model_saves++;
        }
        PCHECK_EQ(c->save_stack.ct_restore, c_restores + (had_frames ? 1 : 0));
        model_restores += had_frames ? 1 : 0;
        PCHECK_EQ(c->save_stack.ct_save, c_saves);
    }
    if (st->exiting) {
        PCHECK(c->is_end == 1);
        PCHECK(s->owner == NULL);
        model_owner[st->stack] = NULL;
        n_exits++;
    } else {
        PCHECK(c->is_end == 0);
        PCHECK(s->owner == c);
        model_owner[st->stack] = c;
        n_yields++;
    }
}

/* Everything the model knows, over every co and stack. */
static void sweep(void) {
    size_t saves = retired_saves, restores = retired_restores;
    size_t per_stack[N_STACKS] = {0};
    for (int i = 0; i < N_COS; i++) {
        struct co_state* st = &cos[i];
        if (st->co == NULL) continue;
        aco_t* c = st->co;
        saves += c->save_stack.ct_save;
        restores += c->save_stack.ct_restore;
        per_stack[st->stack]++;
        PCHECK_EQ(c->is_end, st->exiting);
        PCHECK(c->share_stack == stacks[st->stack]);
        PCHECK(c->save_stack.max_cpsz >= c->save_stack.valid_sz);
        if (st->ran && !st->exiting && stacks[st->stack]->owner != c) {
            /* Evicted: its save holds every frame down to its deepest
             * array (the stack top is at most 16 bytes above the area
             * saved, for the alignment and the protector slot). */
            size_t frames = (size_t)(stack_top(c->share_stack) - st->deepest);
            PCHECK(c->save_stack.valid_sz + 16 >= frames);
            PCHECK(c->save_stack.valid_sz <= c->share_stack->sz);
            PCHECK(c->save_stack.sz >= c->save_stack.valid_sz);
        }
    }
    PCHECK_EQ(saves, model_saves);
    PCHECK_EQ(restores, model_restores);
    for (int k = 0; k < N_STACKS; k++) {
        PCHECK_EQ(stacks[k]->co_ct, per_stack[k]);
        PCHECK(stacks[k]->owner == model_owner[k]);
    }
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char** argv) {
    g_seed = argc > 1 ? strtoul(argv[1], NULL, 0)
                      : (unsigned long)time(NULL) ^ (unsigned long)getpid();
    long steps = argc > 2 ? strtol(argv[2], NULL, 0) : aco_test_scale(STEPS, 20);
    printf("test_property: seed %lu, %ld steps\n", g_seed, steps);
    fflush(stdout);
    g_rng = mix32(g_seed) | 1;

    aco_thread_init(NULL);
    main_co = aco_create(NULL, NULL, 0, NULL, NULL);
    for (int k = 0; k < N_STACKS; k++)
        stacks[k] = aco_share_stack_new2(stack_kinds[k].sz, stack_kinds[k].guard);
    for (int i = 0; i < N_COS; i++) create_in(i);

    double start = now(), cap = aco_test_on_valgrind() ? 25.0 : TIME_CAP_SEC;
    for (g_step = 0; g_step < steps; g_step++) {
        int slot = (int)(aco_test_rand(&g_rng) % N_COS);
        uint32_t action = aco_test_rand(&g_rng) % 100;
        if (action >= 80) {
            /* Resume a stack's owner again now and then: the case where
             * nothing may be copied. */
            aco_t* owner = stacks[slot % N_STACKS]->owner;
            if (owner != NULL) slot = (int)((struct co_state*)owner->arg - cos);
        }
        struct co_state* st = &cos[slot];
        if (st->co->is_end) {
            /* Ended cos linger a while: ending must not disturb anything. */
            if (action < 50) {
                destroy_in(slot);
                create_in(slot);
            }
        } else if (action < 1) {
            destroy_in(slot);   /* suspended, maybe owning its stack */
            n_killed++;
            create_in(slot);
        } else {
            resume_checked(st);
        }
        if (g_step % SWEEP_EVERY == 0) {
            sweep();
            if (now() - start > cap) {
                printf("test_property: time cap of %.1f s reached\n", cap);
                break;
            }
        }
    }
    sweep();
    long done = g_step < steps ? g_step + 1 : steps;
    g_step = -1;

    for (int i = 0; i < N_COS; i++) destroy_in(i);
    for (int k = 0; k < N_STACKS; k++) {
        PCHECK(stacks[k]->owner == NULL);
        aco_share_stack_destroy(stacks[k]);
    }
    aco_destroy(main_co);

    printf("test_property: %ld steps in %.2f s: %ld resumes (%ld yields, "
           "%ld exits), %ld stack handovers, %zu saves, %zu restores, %ld cos "
           "created, %ld destroyed while suspended\n", done, now() - start,
           n_resumes, n_yields, n_exits, n_handovers, model_saves,
           model_restores, n_created, n_killed);
    /* The schedule must have exercised what it claims to. */
    PCHECK(n_exits > 0 && n_killed > 0 && model_saves > 0 &&
           model_restores > 0 && n_handovers > 0);
    printf("test_property: ok (seed %lu)\n", g_seed);
    return 0;
}
