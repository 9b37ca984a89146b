/*
 * test_destroy_order.c - aco_destroy takes a non-main co "from its own
 * thread" (aco.h), whatever became of its main co: a thread may destroy
 * its main co first (no co of it runs) and its other cos after, in every
 * state (init, suspended, ended, its share stack's owner or evicted), also
 * after it made a new main co, at the old address (aco_create reuses it)
 * or at another (aco_create_main_in).  Then the share stacks go too.
 * Destroying a co from another thread, or the running co itself, still
 * aborts naming aco_destroy (forked children).
 */
#include "aco_test.h"

#include <pthread.h>

static void co_yield_then_exit(void) {
    aco_yield();
    aco_exit();
}

/* Main co first, then its cos: each in a state of its own. */
static void orphans(int new_main) {
    aco_thread_init(NULL);
    aco_t* m = aco_create(NULL, NULL, 0, NULL, NULL);
    aco_share_stack_t* s = aco_share_stack_new(0);
    aco_share_stack_t* s2 = aco_share_stack_new(0);
    aco_t* init = aco_create(m, s, 0, co_yield_then_exit, NULL);
    aco_t* evicted = aco_create(m, s, 0, co_yield_then_exit, NULL);
    aco_t* owner = aco_create(m, s, 0, co_yield_then_exit, NULL);
    aco_t* ended = aco_create(m, s2, 0, co_yield_then_exit, NULL);
    aco_resume(evicted);
    aco_resume(owner);              /* evicted is on its save stack now */
    aco_resume(ended);
    aco_resume(ended);
    CHECK(ended->is_end);
    CHECK(s->owner == owner);
    aco_destroy(m);

    aco_t* m2 = NULL;
    static _Alignas(64) char mem[4096];
    if (new_main == 1) m2 = aco_create(NULL, NULL, 0, NULL, NULL);
    if (new_main == 2) m2 = aco_create_main_in(mem, sizeof(mem), NULL);

    aco_destroy(init);
    aco_destroy(evicted);
    aco_destroy(owner);
    aco_destroy(ended);
    aco_share_stack_destroy(s);
    aco_share_stack_destroy(s2);

    /* The thread goes on: a new world works as before. */
    if (m2 == NULL) m2 = aco_create(NULL, NULL, 0, NULL, NULL);
    aco_share_stack_t* s3 = aco_share_stack_new(0);
    aco_t* c = aco_create(m2, s3, 0, co_yield_then_exit, NULL);
    aco_resume(c);
    aco_resume(c);
    CHECK(c->is_end);
    aco_destroy(c);
    aco_share_stack_destroy(s3);
    aco_destroy(m2);
}

/* ---- misuse, in forked children ---------------------------------------- */
static aco_t* foreign;

static void* make_foreign(void* arg) {
    (void)arg;
    aco_thread_init(NULL);
    aco_t* m = aco_create(NULL, NULL, 0, NULL, NULL);
    foreign = aco_create(m, aco_share_stack_new(0), 0, co_yield_then_exit, NULL);
    aco_resume(foreign);
    return NULL;    /* (its thread ends; the co stays that thread's) */
}

static void destroy_foreign(void* arg) {
    (void)arg;
    pthread_t t;
    if (pthread_create(&t, NULL, make_foreign, NULL) != 0) _exit(3);
    pthread_join(t, NULL);
    aco_thread_init(NULL);
    (void)aco_create(NULL, NULL, 0, NULL, NULL);
    aco_destroy(foreign);
}

static void destroy_foreign_no_main(void* arg) {
    (void)arg;
    pthread_t t;
    if (pthread_create(&t, NULL, make_foreign, NULL) != 0) _exit(3);
    pthread_join(t, NULL);
    aco_destroy(foreign);       /* this thread never made a main co */
}

static void co_destroy_self(void) {
    aco_destroy(aco_get_co());
    aco_exit();
}

static void destroy_self(void* arg) {
    (void)arg;
    aco_thread_init(NULL);
    aco_t* m = aco_create(NULL, NULL, 0, NULL, NULL);
    aco_t* c = aco_create(m, aco_share_stack_new(0), 0, co_destroy_self, NULL);
    aco_resume(c);
}

int main(void) {
    orphans(0);
    orphans(1);
    orphans(2);
    int fails = 0;
    fails += aco_test_expect_signal("destroy another thread's co", destroy_foreign, NULL,
                                    SIGABRT,
                                    "aco: aco_destroy: |not to this thread's|another thread's co");
    fails += aco_test_expect_signal("destroy another thread's co, no main co here",
                                    destroy_foreign_no_main, NULL, SIGABRT,
                                    "aco: aco_destroy: |not to this thread's|another thread's co");
    fails += aco_test_expect_signal("destroy the running co", destroy_self, NULL, SIGABRT,
                                    "aco: aco_destroy: |cannot destroy itself");
    CHECK(fails == 0);
    puts("test_destroy_order: ok");
    return 0;
}
