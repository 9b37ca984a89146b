/*
 * test_protector.c - a co function that returns instead of calling
 * aco_exit() is caught: the process aborts loudly.
 *
 * Every co starts with the protector's address as its return address, so
 * returning from the co function lands in the library, which calls the
 * thread's last-word function (if aco_thread_init() got one) on the
 * offending co, prints a message naming the co, and aborts.  Checked in
 * forked children (by signal and captured stderr) for a co returning on its
 * first run, after a yield, and after its frames were evicted from a shared
 * stack and restored; once with no last word (this thread) and once with one
 * (a second thread, which has its own aco_thread_init()).  The cos are
 * created before the fork, so the parent knows the pointers the messages
 * must name.  A last word that calls aco_exit() ends the co, no abort (a
 * third thread, which also evicts cos that yielded by a tail jump from
 * the protector's frame, nothing live); one that yields returns to the
 * resumer, and the next resume aborts (a fourth).
 */
#include "aco_test.h"

#include <pthread.h>
#include <sys/resource.h>

/* The bugs on purpose: co functions that return. */
static void co_returns_at_once(void) {
}

static void co_returns_after_yield(void) {
    volatile char frame[512];
    memset((char*)frame, 0x5a, sizeof(frame));
    aco_yield();
    CHECK(frame[0] == 0x5a && frame[511] == 0x5a);
}

static void co_yields_forever(void) {
    volatile char frame[1024];
    memset((char*)frame, 1, sizeof(frame));
    for (;;) {
        aco_yield();
        CHECK(frame[0] == 1);
    }
}

/* Its last statement a yield, which gcc and clang at -O2 make a tail
 * jump: the co yields from the protector's frame (sp above the return
 * address slot), and its eviction from the share stack once took that for
 * an overflow. */
static void co_ends_in_yield(void) {
    aco_yield();
}

enum kind { FIRST_RUN, AFTER_YIELD, AFTER_RESTORE };

struct scenario {
    const char* name;
    enum kind kind;
    aco_t* co;            /* returns from its co function */
    aco_t* other;         /* AFTER_RESTORE: evicts co from the shared stack */
};

/* Child: drive the scenario's co until it returns (then it never comes
 * back here). */
static void child_run(void* arg) {
    struct scenario* s = arg;
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);     /* the abort is expected */
    switch (s->kind) {
    case FIRST_RUN:
        aco_resume(s->co);
        break;
    case AFTER_YIELD:
        aco_resume(s->co);
        aco_resume(s->co);
        break;
    case AFTER_RESTORE:
        aco_resume(s->co);
        aco_resume(s->other);
        CHECK(s->co->save_stack.ct_save == 1);
        aco_resume(s->co);            /* restored, then returns */
        break;
    }
    fprintf(stderr, "%s: the co returned and the process went on\n", s->name);
}

/* The last word: prints who it runs on, in one line the parent looks for
 * right before the library's message. */
static int last_word_calls;

static void last_word(void) {
    aco_t* co = aco_get_co();
    uintptr_t here = aco_test_sp();
    aco_share_stack_t* s = co->share_stack;
    int on_stack = s != NULL && here >= (uintptr_t)s->ptr &&
                   here < (uintptr_t)s->ptr + s->sz;
    last_word_calls++;
    fprintf(stderr, "last word #%d: co=%p, arg=%p, %s its share stack\n",
            last_word_calls, (void*)co, aco_get_arg(), on_stack ? "on" : "NOT on");
}

/* Runs the three scenarios in this thread (aco_thread_init already done);
 * with_last_word says whether it was given last_word. */
static int run_scenarios(int with_last_word) {
    int fails = 0;
    aco_t* main_co = aco_create(NULL, NULL, 0, NULL, NULL);
    aco_share_stack_t* sstk = aco_share_stack_new(64 * 1024);
    static int arg_a, arg_b, arg_c;
    struct scenario sc[3] = {
        {"first run", FIRST_RUN,
         aco_create(main_co, sstk, 0, co_returns_at_once, &arg_a), NULL},
        {"after a yield", AFTER_YIELD,
         aco_create(main_co, sstk, 0, co_returns_after_yield, &arg_b), NULL},
        {"after a restore", AFTER_RESTORE,
         aco_create(main_co, sstk, 0, co_returns_after_yield, &arg_c),
         aco_create(main_co, sstk, 0, co_yields_forever, NULL)},
    };
    for (int i = 0; i < 3; i++) {
        char what[128], needle[512];
        aco_t* co = sc[i].co;
        snprintf(what, sizeof(what), "%s last word, co returns %s",
                 with_last_word ? "with" : "without", sc[i].name);
        if (with_last_word) {
            /* The last word ran first, once, on the offending co and its
             * stack; the library's message follows right after it, names
             * the co and its function, and says what to do instead. */
            snprintf(needle, sizeof(needle),
                     "last word #1: co=%p, arg=%p, on its share stack\naco: "
                     "|co %p|%p|aco_exit",
                     (void*)co, co->arg, (void*)co, (void*)co->fp);
        } else {
            snprintf(needle, sizeof(needle), "aco: |co %p|%p|aco_exit",
                     (void*)co, (void*)co->fp);
        }
        fails += aco_test_expect_signal(what, child_run, &sc[i], SIGABRT, needle);
    }
    for (int i = 0; i < 3; i++) {
        aco_destroy(sc[i].co);
        if (sc[i].other != NULL) aco_destroy(sc[i].other);
    }
    aco_share_stack_destroy(sstk);
    aco_destroy(main_co);
    return fails;
}

/* A last word that leaves the co instead of returning: one that calls
 * aco_exit() ends the co (aco.h: as aco_exit() does, no abort); one that
 * yields returns to the resumer, and the abort comes at the next resume. */
static int exits_calls;
static void last_word_exits(void) {
    exits_calls++;
    aco_exit();
}
static void last_word_yields(void) {
    aco_yield();
}

static void child_resume(void* arg) {
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    aco_resume((aco_t*)arg);
}

static void* thread_last_word_exits(void* arg) {
    (void)arg;
    aco_thread_init(last_word_exits);
    aco_t* m = aco_create(NULL, NULL, 0, NULL, NULL);
    aco_share_stack_t* s = aco_share_stack_new(64 * 1024);
    aco_t* a = aco_create(m, s, 0, co_returns_at_once, NULL);
    aco_t* b = aco_create(m, s, 0, co_returns_after_yield, NULL);
    aco_resume(a);
    CHECK(a->is_end && exits_calls == 1);
    aco_resume(b);
    CHECK(!b->is_end);
    aco_resume(b);                      /* its frame intact, then returns */
    CHECK(b->is_end && exits_calls == 2);
    /* two that end in a (tail-called) yield, evicting each other: each
     * saved with nothing live, restored, returns to the protector */
    aco_t* c = aco_create(m, s, 0, co_ends_in_yield, NULL);
    aco_t* d = aco_create(m, s, 0, co_ends_in_yield, NULL);
    aco_resume(c);
    aco_resume(d);                      /* evicts c */
    aco_resume(c);                      /* evicts d; c returns */
    CHECK(c->is_end && exits_calls == 3);
    aco_resume(d);
    CHECK(d->is_end && exits_calls == 4);
    aco_destroy(c);
    aco_destroy(d);
    aco_destroy(a);
    aco_destroy(b);
    aco_share_stack_destroy(s);
    aco_destroy(m);
    return NULL;
}

static void* thread_last_word_yields(void* arg) {
    int* fails = arg;
    aco_thread_init(last_word_yields);
    aco_t* m = aco_create(NULL, NULL, 0, NULL, NULL);
    aco_share_stack_t* s = aco_share_stack_new(64 * 1024);
    aco_t* a = aco_create(m, s, 0, co_returns_at_once, NULL);
    aco_resume(a);                      /* into the last word, which yields */
    CHECK(!a->is_end);
    char needle[256];
    snprintf(needle, sizeof(needle), "aco: |co %p|%p|aco_exit", (void*)a, (void*)a->fp);
    *fails = aco_test_expect_signal("a last word that yields, resumed", child_resume, a,
                                    SIGABRT, needle);
    /* a co may be destroyed wherever it stopped, its last word included */
    aco_destroy(a);
    aco_share_stack_destroy(s);
    aco_destroy(m);
    return NULL;
}

static void* thread_with_last_word(void* arg) {
    int* fails = arg;
    aco_thread_init(last_word);
    *fails = run_scenarios(1);
    return NULL;
}

int main(void) {
    /* This thread: no last word, the library's message alone. */
    aco_thread_init(NULL);
    int fails = run_scenarios(0);

    /* Another thread, another aco_thread_init(): with a last word. */
    pthread_t t;
    int thread_fails = -1;
    CHECK(pthread_create(&t, NULL, thread_with_last_word, &thread_fails) == 0);
    CHECK(pthread_join(t, NULL) == 0);

    CHECK(pthread_create(&t, NULL, thread_last_word_exits, NULL) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    ASSERT_EQ(exits_calls, 4);
    int yield_fails = -1;
    CHECK(pthread_create(&t, NULL, thread_last_word_yields, &yield_fails) == 0);
    CHECK(pthread_join(t, NULL) == 0);

    ASSERT_EQ(fails, 0);
    ASSERT_EQ(thread_fails, 0);
    ASSERT_EQ(yield_fails, 0);
    ASSERT_EQ(last_word_calls, 0);    /* only ever called in the children */
    printf("test_protector: OK\n");
    return 0;
}
