/*
 * test_reset.c - every misuse of aco_reset()/aco_reset2() aborts with
 * "aco: aco_reset: <rule>" (or aco_reset2) and leaves the co alone, and
 * aco_new() assigns and returns its allocation or, when malloc fails, aborts
 * naming the pointer, the size, the file and the line.
 *
 * The misuses: NULL, a main co (either function), the running co resetting
 * itself, a co of another thread (the child starts a thread), aco_reset2
 * with a NULL fp; and aco_new of a size no allocator has.  Each runs in a
 * forked child that must die by SIGABRT with the message; afterwards the co
 * they aimed at still runs normally in this process.  (What a reset does is
 * test_reset_reuse's.)  test.sh runs this program with ASan/TSan's
 * allocator_may_return_null=1 (the failing aco_new) and TSan's
 * die_after_fork=0 (the child's thread).
 */
#include "aco_test.h"

#include <pthread.h>
#include <sys/resource.h>

static aco_t* main_co;

/* ------------------------------------------------------------------------ */
/* aco_new                                                                  */
/* ------------------------------------------------------------------------ */

static void test_aco_new(void) {
    uint64_t* v;
    uint64_t* same = aco_new(v, 16 * sizeof(*v));   /* an expression too */
    ASSERT_PTR_EQ(same, v);
    for (int i = 0; i < 16; i++) v[i] = (uint64_t)i * 3;
    ASSERT_EQ(v[15], 45);
    free(v);
    struct { aco_t* co; } holder;
    aco_new(holder.co, sizeof(*holder.co));          /* any lvalue */
    CHECK(holder.co != NULL);
    free(holder.co);
}

/* ------------------------------------------------------------------------ */
/* Misuse: each in a forked child that must die by SIGABRT with a message.  */
/* ------------------------------------------------------------------------ */

static aco_share_stack_t* misuse_stack;
static aco_t* misuse_co;

/* The target of the misuses: yields once, then exits. */
static void co_once(void) {
    aco_yield();
    aco_exit();
}

static void co_reset_self(void) {
    aco_reset(aco_get_co());
    aco_exit();
}

static void reset_null(void* arg) {
    (void)arg;
    aco_reset(NULL);
}

static void reset_main(void* arg) {
    (void)arg;
    aco_reset(main_co);
}

static void reset2_main(void* arg) {
    (void)arg;
    aco_reset2(main_co, co_once, NULL);
}

static void reset_self(void* arg) {
    (void)arg;
    aco_t* co = aco_create(main_co, misuse_stack, 0, co_reset_self, NULL);
    aco_resume(co);
}

static void reset2_null_fp(void* arg) {
    (void)arg;
    aco_reset2(misuse_co, NULL, NULL);
}

static void* thread_reset_foreign(void* arg) {
    (void)arg;
    aco_thread_init(NULL);
    aco_t* my_main = aco_create(NULL, NULL, 0, NULL, NULL);
    (void)my_main;
    aco_reset(misuse_co);         /* its main co is another thread's */
    return NULL;
}

static void reset_from_thread(void* arg) {
    (void)arg;
    pthread_t t;
    CHECK(pthread_create(&t, NULL, thread_reset_foreign, NULL) == 0);
    CHECK(pthread_join(t, NULL) == 0);
}

static void new_too_big(void* arg) {
    (void)arg;
    static volatile size_t huge = SIZE_MAX - 4095;   /* no allocator has it */
    char* p;
    aco_new(p, huge);
    __asm__ volatile("" : : "r"(p) : "memory");   /* p escapes: no elision */
}

static void no_core(void* arg) {
    struct rlimit none = {0, 0};
    setrlimit(RLIMIT_CORE, &none);
    (*(void (**)(void*))arg)(NULL);
}

static int expect_abort(const char* what, void (*fn)(void*),
                        const char* needle) {
    return aco_test_expect_signal(what, no_core, &fn, SIGABRT, needle);
}

static void test_misuse(void) {
    char needle[256];
    int fails = 0;
    misuse_stack = aco_share_stack_new(64 * 1024);
    misuse_co = aco_create(main_co, misuse_stack, 0, co_once, NULL);

    fails += expect_abort("reset(NULL)", reset_null,
                          "aco: aco_reset: |co must not be NULL");
    snprintf(needle, sizeof(needle),
             "aco: aco_reset: |co %p is a main co|only non-main cos can be reset",
             (void*)main_co);
    fails += expect_abort("reset of a main co", reset_main, needle);
    snprintf(needle, sizeof(needle), "aco: aco_reset2: |co %p is a main co",
             (void*)main_co);
    fails += expect_abort("reset2 of a main co", reset2_main, needle);
    fails += expect_abort("reset of the running co", reset_self,
                          "aco: aco_reset: |is running|cannot reset itself");
    fails += expect_abort("reset2 with a NULL fp", reset2_null_fp,
                          "aco: aco_reset2: |fp must not be NULL");
    snprintf(needle, sizeof(needle),
             "aco: aco_reset: |co %p belongs to main co %p|not to this thread",
             (void*)misuse_co, (void*)main_co);
    fails += expect_abort("reset from another thread", reset_from_thread,
                          needle);
    fails += expect_abort("aco_new of an impossible size", new_too_big,
                          "aco: out of memory: aco_new(p, |test_reset.c:");
    ASSERT_EQ(fails, 0);

    /* This process is untouched: the co still runs normally. */
    int resumes = 0;
    while (!misuse_co->is_end) {
        aco_resume(misuse_co);
        resumes++;
    }
    ASSERT_EQ(resumes, 2);
    aco_destroy(misuse_co);
    aco_share_stack_destroy(misuse_stack);
}

int main(void) {
    aco_thread_init(NULL);
    main_co = aco_create(NULL, NULL, 0, NULL, NULL);

    test_aco_new();
    test_misuse();

    aco_destroy(main_co);
    printf("test_reset: OK\n");
    return 0;
}
