/*
 * test_aco_bb_upstream.c - black-box: a program written for upstream libaco
 * 1.2.4, from its README alone, builds and runs against this aco.h.
 *
 *   - The README's synopsis, its statements as written there (with
 *     aco_assert_override.h's assert), and the README's "best practice"
 *     example of a heap pointer shared by two cos of one stack.
 *   - The README's API: aco_thread_init with a last word (aco_get_co()
 *     works there; the process aborts after it), aco_share_stack_new(0)
 *     (2 MiB), new2's three conditions, aco_create's fields, aco_resume /
 *     aco_yield / aco_exit / is_end, aco_get_co / aco_get_arg, aco_destroy,
 *     aco_share_stack_destroy; the statistics co->save_stack.max_cpsz,
 *     ct_save, ct_restore (size_t); aco_is_main_co; aco_yield1 /
 *     aco_exit1 / aco_co; the version macros; aco_assert_override.h's six
 *     macros, its assert never compiled out (NDEBUG defined here).
 */
#define NDEBUG 1
#include "aco_test.h"
#include "aco.h"
#include <stdio.h>

/* this header would override the default C `assert`; (upstream's words) */
#include "aco_assert_override.h"

#if ACO_VERSION_MAJOR != 1 || ACO_VERSION_MINOR != 2 || ACO_VERSION_PATCH != 4
#error "libaco 1.2.4's version macros"
#endif

static int synopsis_quiet = 1;
#define say(...) do { if (!synopsis_quiet) printf(__VA_ARGS__); } while (0)

/* --- The synopsis, as upstream's README has it (printf -> say). --- */
void foo(int ct) {
    say("co: %p: yield to main_co: %d\n", aco_get_co(), *((int*)(aco_get_arg())));
    aco_yield();
    *((int*)(aco_get_arg())) = ct + 1;
}

void co_fp0() {
    say("co: %p: entry: %d\n", aco_get_co(), *((int*)(aco_get_arg())));
    int ct = 0;
    while(ct < 6){
        foo(ct);
        ct++;
    }
    say("co: %p:  exit to main_co: %d\n", aco_get_co(), *((int*)(aco_get_arg())));
    aco_exit();
}

static int synopsis_main() {
    aco_thread_init(NULL);

    aco_t* main_co = aco_create(NULL, NULL, 0, NULL, NULL);
    aco_share_stack_t* sstk = aco_share_stack_new(0);

    int co_ct_arg_point_to_me = 0;
    aco_t* co = aco_create(main_co, sstk, 0, co_fp0, &co_ct_arg_point_to_me);

    int ct = 0;
    while(ct < 6){
        assert(co->is_end == 0);
        say("main_co: yield to co: %p: %d\n", co, ct);
        aco_resume(co);
        assert(co_ct_arg_point_to_me == ct);
        ct++;
    }
    say("main_co: yield to co: %p: %d\n", co, ct);
    aco_resume(co);
    assert(co_ct_arg_point_to_me == ct);
    assert(co->is_end);

    say("main_co: destroy and exit\n");
    aco_destroy(co);
    co = NULL;
    aco_share_stack_destroy(sstk);
    sstk = NULL;
    aco_destroy(main_co);
    main_co = NULL;

    return 0;
}

/* --- The README's "best practice": memory two cos of one stack share
 *     comes from the heap. --- */
static int* gl_ptr;
static int checked_value;
static void inc_p(int* p) { (*p)++; }
static void check(int v) { checked_value = v; }
static void do_sth(int* p) { *p += 10; }

static void bp_co_fp0() {
    int* ct_ptr = malloc(sizeof(int));
    assert(ct_ptr != NULL);
    *ct_ptr = 0;
    gl_ptr = ct_ptr;
    aco_yield();
    check(*ct_ptr);
    int* ptr = ct_ptr;
    inc_p(ptr);
    assert(*ptr == 11);
    free(ct_ptr);
    gl_ptr = NULL;
    aco_exit();
}

static void bp_co_fp1() {
    do_sth(gl_ptr);
    aco_exit();
}

static void best_practice(aco_t* main_co) {
    aco_share_stack_t* sstk = aco_share_stack_new(0);
    aco_t* co0 = aco_create(main_co, sstk, 0, bp_co_fp0, NULL);
    aco_t* co1 = aco_create(main_co, sstk, 0, bp_co_fp1, NULL);
    aco_resume(co0);
    aco_resume(co1);
    aco_resume(co0);
    assert(co0->is_end && co1->is_end);
    assert(checked_value == 10);
    assert(gl_ptr == NULL);
    aco_destroy(co0);
    aco_destroy(co1);
    aco_share_stack_destroy(sstk);
}

/* --- The API section. --- */
static aco_t* lw_expected;
static void last_word(void) {
    /* "In such a last word function, call aco_get_co to get the co." */
    aco_t* co = aco_get_co();
    fprintf(stderr, "last word of co %p (expected %p) arg %p\n", (void*)co,
            (void*)lw_expected, aco_get_arg());
    if (co != lw_expected) _exit(3);
}

static void co_returns(void) {}

static void child_last_word(void* arg) {
    (void)arg;
    aco_thread_init(last_word);
    aco_t* m = aco_create(NULL, NULL, 0, NULL, NULL);
    aco_share_stack_t* s = aco_share_stack_new(0);
    lw_expected = aco_create(m, s, 0, co_returns, (void*)0x1234);
    aco_resume(lw_expected);
}

static void child_assert_ndebug(void* arg) {
    volatile int zero = (int)(intptr_t)arg;
    assert(zero == 1);
}

static void child_assertptr(void* arg) { assertptr(arg); }
static void child_assertalloc_ptr(void* arg) { assertalloc_ptr(arg); }
static void child_assertalloc_bool(void* arg) { assertalloc_bool(arg != NULL); }

static size_t stat_ct;
static void co_stats(void) {
    volatile unsigned char big[aco_test_vla(1000)];
    aco_test_fill(big, sizeof(big), 5);
    aco_yield();
    assert(aco_test_intact(big, sizeof(big), 5));
    aco_yield1(aco_co());
    stat_ct++;
    aco_exit1(aco_get_co());
}

static void co_yield_once(void) {
    aco_yield();
    aco_exit();
}

static void api(void) {
    aco_runtime_test();
    aco_thread_init(NULL);
    aco_t* main_co = aco_create(NULL, NULL, 0, NULL, (void*)0x77);
    assert(aco_is_main_co(main_co));
    assert(main_co->main_co == NULL && main_co->share_stack == NULL);
    assert(main_co->arg == (void*)0x77);

    /* aco_share_stack_new(0): 2 MiB, with a guard page */
    aco_share_stack_t* s = aco_share_stack_new(0);
    assert(s->sz == 2u << 20);
    assert(s->guard_page_enabled);
    aco_share_stack_t* s2 = aco_share_stack_new2(100, 0);
    assert(s2->sz >= 4096 && s2->sz >= 100 && !s2->guard_page_enabled);

    /* aco_create with an initial save stack, upstream's 64 and others */
    aco_t* a = aco_create(main_co, s, 64, co_stats, NULL);
    aco_t* b = aco_create(main_co, s, 0, co_yield_once, NULL);
    assert(!aco_is_main_co(a));
    assert(a->main_co == main_co && a->share_stack == s && a->fp == co_stats);
    assert(a->arg == NULL && a->is_end == 0);
    size_t cp = a->save_stack.max_cpsz, sv = a->save_stack.ct_save,
           rs = a->save_stack.ct_restore;
    assert(cp == 0 && sv == 0 && rs == 0);
    aco_resume(a);
    aco_resume(b);
    aco_resume(a);
    aco_resume(b);
    aco_resume(a);
    assert(a->is_end && b->is_end && stat_ct == 1);
    /* tutorial 1 prints these with %zu; they are size_t */
    char line[128];
    snprintf(line, sizeof(line), "%zu %zu %zu", a->save_stack.max_cpsz,
             a->save_stack.ct_save, a->save_stack.ct_restore);
    assert(a->save_stack.max_cpsz >= 1000);
    assert(a->save_stack.ct_save == 2 && a->save_stack.ct_restore == 2);

    best_practice(main_co);

    aco_destroy(a);
    aco_destroy(b);
    aco_share_stack_destroy(s);
    aco_share_stack_destroy(s2);
    aco_destroy(main_co);

    /* aco_new: p = malloc(sz), p evaluated once */
    int* arr[2] = {NULL, NULL};
    int i = 0;
    size_t n = 4;
    int* got = aco_new(arr[i++], n++ * sizeof(int));
    assert(i == 1 && n == 5 && got == arr[0] && arr[0] != NULL && arr[1] == NULL);
    free(arr[0]);

    /* likely/unlikely */
    if (unlikely(i == 2) || !likely(i == 1)) abort();
}

int main(void) {
    if (synopsis_main() != 0) return 1;
    api();
    int fails = 0;
    fails += aco_test_expect_signal("last word", child_last_word, NULL, SIGABRT,
                                    "last word of co");
    fails += aco_test_expect_signal("assert under NDEBUG", child_assert_ndebug, NULL,
                                    SIGABRT, "aco: assertion failed|zero == 1|"
                                    "test_aco_bb_upstream.c");
    fails += aco_test_expect_signal("assertptr(NULL)", child_assertptr, NULL, SIGABRT,
                                    "aco: assertion failed");
    fails += aco_test_expect_signal("assertalloc_ptr(NULL)", child_assertalloc_ptr,
                                    NULL, SIGABRT, "aco: out of memory");
    fails += aco_test_expect_signal("assertalloc_bool(0)", child_assertalloc_bool,
                                    NULL, SIGABRT, "aco: out of memory");
    if (fails) return 1;
    printf("ok\n");
    return 0;
}
