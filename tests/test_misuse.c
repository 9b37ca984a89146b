/*
 * test_misuse.c - every misuse of the API aborts with a message that names
 * the function and the rule broken (aco.h: "aco: <function>: <rule>").
 *
 * Each misuse runs in a forked child, which must die by SIGABRT with a
 * message containing "aco: <function>: ", words of the rule, and, where the
 * message names objects, their addresses.  The objects are created here
 * before forking, so their addresses are known; children that need another
 * thread start one (a process dies of an abort in any of its threads).
 */
#include "aco_test.h"

#include <pthread.h>
#include <sys/resource.h>

static aco_t* main_co;
static aco_share_stack_t* sstk;

/* Cos that misuse the API from inside. */
static void co_exit_now(void) {
    aco_exit();
}

static void co_resume_other(void) {
    aco_resume(aco_get_arg());           /* only a main co may resume */
    aco_exit();
}

static void co_destroy_self(void) {
    aco_destroy(aco_get_co());
    aco_exit();
}

static void co_destroy_main(void) {
    aco_destroy(aco_get_co()->main_co);
    aco_exit();
}

static void co_create_main(void) {
    aco_create(NULL, NULL, 0, NULL, NULL);
    aco_exit();
}

static aco_t *co_end, *co_nest, *co_victim, *co_self, *co_dmain, *co_cmain;

/* ------------------------------------------------------------------------ */
/* The children: each does one thing wrong.                                 */
/* ------------------------------------------------------------------------ */

static void resume_ended(void* arg) {
    (void)arg;
    aco_resume(co_end);
    CHECK(co_end->is_end);
    aco_resume(co_end);
}

static void resume_from_non_main(void* arg) {
    (void)arg;
    aco_resume(co_nest);
}

static void resume_main_co(void* arg) {
    (void)arg;
    aco_resume(main_co);
}

static void resume_null(void* arg) {
    (void)arg;
    aco_resume(NULL);
}

static void yield_in_main(void* arg) {
    (void)arg;
    aco_yield();
}

static void exit_in_main(void* arg) {
    (void)arg;
    aco_exit();
}

static void destroy_running(void* arg) {
    (void)arg;
    aco_resume(co_self);
}

static void destroy_null(void* arg) {
    (void)arg;
    aco_destroy(NULL);
}

static void destroy_main_from_co(void* arg) {
    (void)arg;
    aco_resume(co_dmain);
}

static void create_null_stack(void* arg) {
    (void)arg;
    aco_create(main_co, NULL, 0, co_exit_now, NULL);
}

static void create_null_fp(void* arg) {
    (void)arg;
    aco_create(main_co, sstk, 0, NULL, NULL);
}

static void create_non_main_as_main(void* arg) {
    (void)arg;
    aco_create(co_victim, sstk, 0, co_exit_now, NULL);
}

static void create_main_with_stack(void* arg) {
    (void)arg;
    aco_create(NULL, sstk, 0, NULL, NULL);
}

static void create_main_with_fp(void* arg) {
    (void)arg;
    aco_create(NULL, NULL, 0, co_exit_now, NULL);
}

static void create_main_in_co(void* arg) {
    (void)arg;
    aco_resume(co_cmain);
}

static void share_stack_destroy_null(void* arg) {
    (void)arg;
    aco_share_stack_destroy(NULL);
}

static void share_stack_destroy_used(void* arg) {
    (void)arg;
    aco_share_stack_destroy(sstk);
}

/* Thread bodies, run by run_in_thread(): one misuse each. */
static void* thread_create_without_init(void* arg) {
    (void)arg;
    aco_create(NULL, NULL, 0, NULL, NULL);
    return NULL;
}

static void* thread_create_co_without_init(void* arg) {
    (void)arg;
    aco_create(main_co, sstk, 0, co_exit_now, NULL);
    return NULL;
}

static void* thread_resume_foreign(void* arg) {
    (void)arg;
    aco_thread_init(NULL);
    aco_t* my_main = aco_create(NULL, NULL, 0, NULL, NULL);
    (void)my_main;
    aco_resume(co_victim);           /* its main co is another thread's */
    return NULL;
}

static void* thread_resume_foreign_no_main(void* arg) {
    (void)arg;
    aco_thread_init(NULL);
    aco_resume(co_victim);
    return NULL;
}

static void* thread_resume_main_no_main(void* arg) {
    (void)arg;
    aco_thread_init(NULL);
    aco_resume(main_co);    /* no co in this thread: cur == NULL == its main_co */
    return NULL;
}

static void* thread_get_arg_no_co(void* arg) {
    (void)arg;
    aco_thread_init(NULL);
    aco_get_arg();
    return NULL;
}

static void* thread_get_arg_no_init(void* arg) {
    (void)arg;
    aco_get_arg();
    return NULL;
}

static void* thread_yield_no_co(void* arg) {
    (void)arg;
    aco_thread_init(NULL);
    aco_yield();
    return NULL;
}

static void* thread_exit_no_co(void* arg) {
    (void)arg;
    aco_thread_init(NULL);
    aco_exit();
    return NULL;
}

/* Child: run the thread body given as arg in a new thread, wait for it. */
static void run_in_thread(void* arg) {
    void* (*body)(void*) = *(void* (**)(void*))arg;
    pthread_t t;
    CHECK(pthread_create(&t, NULL, body, NULL) == 0);
    CHECK(pthread_join(t, NULL) == 0);
}

/* ------------------------------------------------------------------------ */

static int fails, ran;

/* The child: no core file for the expected abort, then the misuse. */
struct child {
    void (*fn)(void*);
    void* arg;
};

static void child_main(void* arg) {
    const struct child* c = arg;
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    c->fn(c->arg);
}

/* Expect fn(arg) to abort; the needle is built from fmt. */
__attribute__((format(printf, 4, 5)))
static void expect_abort(const char* what, void (*fn)(void*), void* arg,
                         const char* fmt, ...) {
    char needle[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(needle, sizeof(needle), fmt, ap);
    va_end(ap);
    ran++;
    struct child c = {fn, arg};
    if (aco_test_expect_signal(what, child_main, &c, SIGABRT, needle) != 0)
        fails++;
}

static void expect_abort_in_thread(const char* what, void* (*body)(void*),
                                   const char* needle) {
    expect_abort(what, run_in_thread, &body, "%s", needle);
}

int main(void) {
    aco_thread_init(NULL);
    main_co = aco_create(NULL, NULL, 0, NULL, NULL);
    sstk = aco_share_stack_new(64 * 1024);
    co_end = aco_create(main_co, sstk, 0, co_exit_now, NULL);
    co_victim = aco_create(main_co, sstk, 0, co_exit_now, NULL);
    co_nest = aco_create(main_co, sstk, 0, co_resume_other, co_victim);
    co_self = aco_create(main_co, sstk, 0, co_destroy_self, NULL);
    co_dmain = aco_create(main_co, sstk, 0, co_destroy_main, NULL);
    co_cmain = aco_create(main_co, sstk, 0, co_create_main, NULL);
    void* m = main_co;

    /* aco_resume */
    expect_abort("resume of an ended co", resume_ended, NULL,
                 "aco: aco_resume: |co %p has ended", (void*)co_end);
    expect_abort("resume from a non-main co", resume_from_non_main, NULL,
                 "aco: aco_resume: |co %p's main co %p|not from co %p",
                 (void*)co_victim, m, (void*)co_nest);
    expect_abort("resume of a main co", resume_main_co, NULL,
                 "aco: aco_resume: |co %p is a main co", m);
    expect_abort("resume(NULL)", resume_null, NULL,
                 "aco: aco_resume: |must not be NULL");
    expect_abort_in_thread("resume from another thread", thread_resume_foreign,
                           "aco: aco_resume: |must be called from co");
    expect_abort_in_thread("resume from a thread without a main co",
                           thread_resume_foreign_no_main,
                           "aco: aco_resume: |must be called from co");
    expect_abort_in_thread("resume of a main co from a thread without one",
                           thread_resume_main_no_main,
                           "aco: aco_resume: |is a main co");

    /* aco_yield / aco_exit outside a non-main co */
    expect_abort("yield in the main co", yield_in_main, NULL,
                 "aco: aco_yield: |non-main co|main co %p", m);
    expect_abort("exit in the main co", exit_in_main, NULL,
                 "aco: aco_exit: |non-main co|main co %p", m);
    expect_abort_in_thread("yield in a thread without cos", thread_yield_no_co,
                           "aco: aco_yield: |non-main co|no co");
    expect_abort_in_thread("exit in a thread without cos", thread_exit_no_co,
                           "aco: aco_exit: |non-main co|no co");

    /* aco_destroy */
    expect_abort("destroy of the running co", destroy_running, NULL,
                 "aco: aco_destroy: |co %p is running", (void*)co_self);
    expect_abort("destroy(NULL)", destroy_null, NULL,
                 "aco: aco_destroy: |must not be NULL");
    expect_abort("destroy of the main co while a co runs", destroy_main_from_co,
                 NULL, "aco: aco_destroy: |main co %p|co %p runs", m,
                 (void*)co_dmain);

    /* aco_create */
    expect_abort("create with a NULL share stack", create_null_stack, NULL,
                 "aco: aco_create: |share_stack must not be NULL");
    expect_abort("create with a NULL fp", create_null_fp, NULL,
                 "aco: aco_create: |fp must not be NULL");
    expect_abort("create with a non-main co as main_co", create_non_main_as_main,
                 NULL, "aco: aco_create: |main_co %p is not a main co",
                 (void*)co_victim);
    expect_abort("create of a main co with a share stack",
                 create_main_with_stack, NULL,
                 "aco: aco_create: |main co|share stack");
    expect_abort("create of a main co with a co function", create_main_with_fp,
                 NULL, "aco: aco_create: |main co|co function");
    expect_abort("create of a main co inside a running co", create_main_in_co,
                 NULL, "aco: aco_create: |outside any running co|%p",
                 (void*)co_cmain);
    expect_abort_in_thread("create of a main co without aco_thread_init",
                           thread_create_without_init,
                           "aco: aco_create: |aco_thread_init");
    expect_abort_in_thread("create of a co without aco_thread_init",
                           thread_create_co_without_init,
                           "aco: aco_create: |aco_thread_init");

    /* aco_share_stack_destroy */
    expect_abort("share stack destroy(NULL)", share_stack_destroy_null, NULL,
                 "aco: aco_share_stack_destroy: |must not be NULL");
    expect_abort("destroy of a share stack still in use",
                 share_stack_destroy_used, NULL,
                 "aco: aco_share_stack_destroy: |share stack %p|still used by 6",
                 (void*)sstk);

    /* aco_get_arg without a co */
    expect_abort_in_thread("get_arg in a thread without cos",
                           thread_get_arg_no_co, "aco: aco_get_arg: |no co");
    expect_abort_in_thread("get_arg in a thread never initialised",
                           thread_get_arg_no_init, "aco: aco_get_arg: |no co");

    ASSERT_EQ(fails, 0);

    /* None of that touched this process: everything is still usable. */
    aco_resume(co_end);
    ASSERT_EQ(co_end->is_end, 1);
    aco_destroy(co_end);
    aco_destroy(co_victim);
    aco_destroy(co_nest);
    aco_destroy(co_self);
    aco_destroy(co_dmain);
    aco_destroy(co_cmain);
    aco_share_stack_destroy(sstk);
    aco_destroy(main_co);
    printf("test_misuse: OK (%d misuses, each aborted with its message)\n", ran);
    return 0;
}
