/*
 * test_share_owner.c - a share stack belongs to the thread whose cos use
 * it.  Another thread that creates a co on it (whether thread A's co there
 * is new, suspended or ended but not destroyed), destroys thread A's co,
 * creates a co under thread A's main co, or destroys the stack while a co
 * uses it, aborts with a message naming the function.  Once every co on a
 * stack has been destroyed the stack is free: another thread may then run
 * its own cos on it (the hand-over), and so on, back and forth.
 *
 * Misuses run in forked children, which start thread A (sets up) and then
 * thread B (misuses); the child must die by SIGABRT.  The hand-over runs in
 * this process, after every fork.
 */
#include "aco_test.h"

#include <pthread.h>
#include <sys/resource.h>

static void co_yield_then_exit(void) {
    int* count = aco_get_arg();
    if (count != NULL) (*count)++;
    aco_yield();
    if (count != NULL) (*count)++;
    aco_exit();
}

/* ---- the children ------------------------------------------------------ */
enum misuse {
    CREATE_ON_A_STACK,      /* B: aco_create(B_main, A's stack, ...) */
    DESTROY_A_CO,           /* B: aco_destroy(A's suspended co) */
    CREATE_UNDER_A_MAIN,    /* B: aco_create(A_main, B's stack, ...) */
    DESTROY_A_STACK,        /* B: aco_share_stack_destroy(A's stack) */
    A_DESTROYS_OWN_STACK    /* A: aco_share_stack_destroy(its stack in use) */
};

struct scenario {
    enum misuse what;
    int a_state;            /* A's co: 0 init, 1 suspended, 2 ended */
};

static const struct scenario* sc;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int a_ready;
static aco_t *a_main, *a_co;
static aco_share_stack_t* a_stack;

static void* thread_a(void* arg) {
    (void)arg;
    aco_thread_init(NULL);
    a_main = aco_create(NULL, NULL, 0, NULL, NULL);
    a_stack = aco_share_stack_new(64 * 1024);
    a_co = aco_create(a_main, a_stack, 0, co_yield_then_exit, NULL);
    for (int i = 0; i < sc->a_state; i++) aco_resume(a_co);
    if (sc->what == A_DESTROYS_OWN_STACK) aco_share_stack_destroy(a_stack);
    pthread_mutex_lock(&mu);
    a_ready = 1;
    pthread_cond_broadcast(&cv);
    for (;;) pthread_cond_wait(&cv, &mu);     /* until B ends the process */
    return NULL;
}

static void* thread_b(void* arg) {
    (void)arg;
    aco_thread_init(NULL);
    aco_t* b_main = aco_create(NULL, NULL, 0, NULL, NULL);
    aco_share_stack_t* b_stack = aco_share_stack_new(64 * 1024);
    switch (sc->what) {
    case CREATE_ON_A_STACK:
        aco_create(b_main, a_stack, 0, co_yield_then_exit, NULL);
        break;
    case DESTROY_A_CO:
        aco_destroy(a_co);
        break;
    case CREATE_UNDER_A_MAIN:
        aco_create(a_main, b_stack, 0, co_yield_then_exit, NULL);
        break;
    case DESTROY_A_STACK:
        aco_share_stack_destroy(a_stack);
        break;
    case A_DESTROYS_OWN_STACK:
        break;
    }
    fprintf(stderr, "thread B: the misuse returned\n");
    return NULL;
}

static void child(void* arg) {
    struct rlimit rl = {0, 0};
    setrlimit(RLIMIT_CORE, &rl);
    sc = arg;
    pthread_t a, b;
    CHECK(pthread_create(&a, NULL, thread_a, NULL) == 0);
    pthread_mutex_lock(&mu);
    while (!a_ready) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    CHECK(pthread_create(&b, NULL, thread_b, NULL) == 0);
    CHECK(pthread_join(b, NULL) == 0);
}   /* returning: the child exits 0, which the parent reports */

/* ---- the hand-over ----------------------------------------------------- */
static aco_share_stack_t* shared;
static int round_no;

/* One thread's turn: two cos on the shared stack (so frames are copied
 * out and back), one left suspended and destroyed so, one run to its end;
 * then the stack is free again. */
static void* take_turn(void* arg) {
    (void)arg;
    aco_thread_init(NULL);
    aco_t* m = aco_create(NULL, NULL, 0, NULL, NULL);
    int n1 = 0, n2 = 0;
    aco_t* c1 = aco_create(m, shared, 0, co_yield_then_exit, &n1);
    aco_t* c2 = aco_create(m, shared, 0, co_yield_then_exit, &n2);
    aco_resume(c1);
    aco_resume(c2);                 /* takes the stack: c1 saved */
    aco_resume(c1);                 /* c1 back, c2 saved; c1 ends */
    ASSERT_EQ(c1->is_end, 1);
    ASSERT_EQ(n1, 2);
    ASSERT_EQ(n2, 1);
    if (round_no % 2 == 0) aco_resume(c2);     /* else destroyed suspended */
    aco_destroy(c1);
    aco_destroy(c2);                /* no co uses the stack any more */
    aco_destroy(m);
    return NULL;
}

static void test_hand_over(void) {
    shared = aco_share_stack_new(64 * 1024);
    int rounds = (int)aco_test_scale(20, 4);
    for (round_no = 0; round_no < rounds; round_no++) {
        pthread_t t;
        CHECK(pthread_create(&t, NULL, take_turn, NULL) == 0);
        CHECK(pthread_join(t, NULL) == 0);
    }
    /* and this thread, last */
    take_turn(NULL);
    aco_share_stack_destroy(shared);
}

/* The spec's plain case: A runs a co to its end, destroys it, is joined;
 * B then runs its own co on A's stack. */
static int plain_count;

static void* plain_a(void* arg) {
    (void)arg;
    aco_thread_init(NULL);
    aco_t* m = aco_create(NULL, NULL, 0, NULL, NULL);
    shared = aco_share_stack_new(0);
    aco_t* co = aco_create(m, shared, 0, co_yield_then_exit, &plain_count);
    aco_resume(co);
    aco_resume(co);
    ASSERT_EQ(co->is_end, 1);
    aco_destroy(co);
    aco_destroy(m);
    return NULL;
}

static void* plain_b(void* arg) {
    (void)arg;
    aco_thread_init(NULL);
    aco_t* m = aco_create(NULL, NULL, 0, NULL, NULL);
    aco_t* co = aco_create(m, shared, 0, co_yield_then_exit, &plain_count);
    aco_resume(co);
    aco_resume(co);
    ASSERT_EQ(co->is_end, 1);
    aco_destroy(co);
    aco_share_stack_destroy(shared);
    aco_destroy(m);
    return NULL;
}

static void test_plain_hand_over(void) {
    pthread_t t;
    CHECK(pthread_create(&t, NULL, plain_a, NULL) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    CHECK(pthread_create(&t, NULL, plain_b, NULL) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    ASSERT_EQ(plain_count, 4);
}

int main(void) {
    static const struct scenario cases[] = {
        {CREATE_ON_A_STACK, 0}, {CREATE_ON_A_STACK, 1}, {CREATE_ON_A_STACK, 2},
        {DESTROY_A_CO, 1},      {CREATE_UNDER_A_MAIN, 1},
        {DESTROY_A_STACK, 1},   {A_DESTROYS_OWN_STACK, 1},
    };
    static const char* const state[] = {"new", "suspended", "ended"};
    int fails = 0;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct scenario* c = &cases[i];
        const char* needle = "aco_create";
        const char* what = "create on another thread's share stack";
        if (c->what == DESTROY_A_CO) {
            needle = "aco_destroy";
            what = "destroy of another thread's co";
        } else if (c->what == CREATE_UNDER_A_MAIN) {
            what = "create under another thread's main co";
        } else if (c->what == DESTROY_A_STACK) {
            needle = "aco_share_stack_destroy";
            what = "destroy of another thread's share stack in use";
        } else if (c->what == A_DESTROYS_OWN_STACK) {
            needle = "aco_share_stack_destroy";
            what = "destroy of the own share stack in use";
        }
        char name[160];
        snprintf(name, sizeof(name), "%s (A's co %s)", what, state[c->a_state]);
        fails += aco_test_expect_signal(name, child, (void*)c, SIGABRT, needle);
    }
    ASSERT_EQ(fails, 0);

    test_plain_hand_over();
    test_hand_over();
    printf("test_share_owner: OK\n");
    return 0;
}
