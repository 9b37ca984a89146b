/*
 * test_aco_bb_misuse.c - black-box: every misuse aco.h says aborts does, by
 * SIGABRT, with "aco: <function>: <rule>" on stderr naming the function the
 * program called; and what aco.h says is fine runs.
 *
 * Written from aco.h, docs/core.md ("What is misuse") and upstream libaco
 * 1.2.4's README alone.  Each misuse runs in a forked child (objects made
 * before the fork, so the child finds them as the parent left them); the
 * child must die by SIGABRT and its stderr must hold "aco: FN: " followed
 * by a rule (some words), plus any words of the rule aco.h itself uses.
 */
#include "aco_test.h"

#include <pthread.h>

static aco_t* main_co;
static aco_share_stack_t* sstk;
static aco_share_stack_t* sstk2;
static int fails;

/* ------------------------------------------------------------------------ */
/* Co functions.                                                            */
/* ------------------------------------------------------------------------ */

static void co_exit_now(void) { aco_exit(); }

static void co_yield_forever(void) {
    for (;;) aco_yield();
}

/* A co that runs what main put in its arg: one misuse from inside a co. */
typedef void (*inside_fn)(void);
static void co_run_arg(void) {
    inside_fn f = (inside_fn)aco_get_arg();
    f();
    aco_exit();
}

static aco_t *co_ended, *co_suspended, *co_other;

static void in_resume_sibling(void) { aco_resume(co_suspended); }
static void in_destroy_self(void) { aco_destroy(aco_get_co()); }
static void in_destroy_main(void) { aco_destroy(aco_get_co()->main_co); }
static void in_create_main(void) { aco_create(NULL, NULL, 0, NULL, NULL); }
static void in_yield1_other(void) { aco_yield1(co_suspended); }
static void in_exit1_other(void) { aco_exit1(co_suspended); }
static void in_yield_to_self(void) { aco_yield_to(aco_get_co()); }
static void in_yield_to_ended(void) { aco_yield_to(co_ended); }
static void in_yield_to_null(void) { aco_yield_to(NULL); }
static void in_reset_self(void) { aco_reset(aco_get_co()); }
static void in_reset_main(void) { aco_reset(aco_get_co()->main_co); }
static void in_share_stack_destroy_own(void) {
    aco_share_stack_destroy(aco_get_co()->share_stack);
}

/* A co function that returns instead of calling aco_exit(). */
static void co_returns(void) {}

/* ------------------------------------------------------------------------ */
/* The children.                                                            */
/* ------------------------------------------------------------------------ */

/* Run `f` inside a fresh co on sstk2. */
static void child_inside(void* arg) {
    aco_t* co = aco_create(main_co, sstk2, 0, co_run_arg, arg);
    aco_resume(co);
}

static void child_resume_null(void* a) { (void)a; aco_resume(NULL); }
static void child_resume_ended(void* a) { (void)a; aco_resume(co_ended); }
static void child_resume_main(void* a) { (void)a; aco_resume(main_co); }
static void child_resume_last_ended(void* a) { (void)a; aco_resume_last(co_ended); }
static void child_resume_last_null(void* a) { (void)a; aco_resume_last(NULL); }
static void child_yield_main(void* a) { (void)a; aco_yield(); }
static void child_exit_main(void* a) { (void)a; aco_exit(); }
static void child_yield1_main(void* a) { (void)a; aco_yield1(main_co); }
static void child_exit1_main(void* a) { (void)a; aco_exit1(main_co); }
static void child_yield_to_main(void* a) { (void)a; aco_yield_to(co_suspended); }
static void child_destroy_null(void* a) { (void)a; aco_destroy(NULL); }
static void child_destroy_twice(void* a) {
    (void)a;
    aco_t* co = aco_create(main_co, sstk2, 0, co_exit_now, NULL);
    aco_destroy(co);
    aco_destroy(co);
}
static void child_sstk_destroy_used(void* a) { (void)a; aco_share_stack_destroy(sstk); }
static void child_sstk_destroy_null(void* a) { (void)a; aco_share_stack_destroy(NULL); }
static void child_create_null_stack(void* a) {
    (void)a;
    aco_create(main_co, NULL, 0, co_exit_now, NULL);
}
static void child_create_null_fp(void* a) {
    (void)a;
    aco_create(main_co, sstk, 0, NULL, NULL);
}
static void child_create_non_main_as_main(void* a) {
    (void)a;
    aco_create(co_suspended, sstk, 0, co_exit_now, NULL);
}
static void child_create_huge_save(void* a) {
    (void)a;
    volatile size_t n = (size_t)UINT32_MAX - 6;   /* 4 GiB - 7 */
    aco_create(main_co, sstk, n, co_exit_now, NULL);
}
static void child_co_size_huge(void* a) {
    (void)a;
    volatile size_t n = (size_t)UINT32_MAX - 6;   /* 4 GiB - 7 */
    size_t r = aco_co_size(n);
    fprintf(stderr, "aco_co_size(4 GiB - 7) returned %zu\n", r);
}
static void child_reset_null(void* a) { (void)a; aco_reset(NULL); }
static void child_reset_main(void* a) { (void)a; aco_reset(main_co); }
static void child_reset2_null_fp(void* a) { (void)a; aco_reset2(co_suspended, NULL, NULL); }
static void child_reserve_main(void* a) { (void)a; aco_resume_reserve(main_co); }
static void child_reserve_null(void* a) { (void)a; aco_resume_reserve(NULL); }
static void child_is_main_null(void* a) {
    (void)a;
    volatile aco_t* volatile p = NULL;
    int r = aco_is_main_co((aco_t*)p);
    fprintf(stderr, "aco_is_main_co(NULL) returned %d\n", r);
}
static void child_co_returns(void* a) {
    (void)a;
    aco_t* co = aco_create(main_co, sstk2, 0, co_returns, NULL);
    aco_resume(co);
}
static _Alignas(16) unsigned char mem_buf[8192];
static void child_create_in_misaligned(void* a) {
    (void)a;
    aco_create_in(mem_buf + 8, aco_co_size(0), main_co, sstk2, co_exit_now, NULL);
}
static void child_create_in_small(void* a) {
    (void)a;
    aco_create_in(mem_buf, aco_co_size(0) - 16, main_co, sstk2, co_exit_now, NULL);
}
static void child_create_in_null(void* a) {
    (void)a;
    aco_create_in(NULL, aco_co_size(0), main_co, sstk2, co_exit_now, NULL);
}
static void child_create_main_in_small(void* a) {
    (void)a;
    aco_destroy(main_co);
    aco_create_main_in(mem_buf, aco_co_size(0) - 16, NULL);
}
static void child_set_allocator_late(void* a) {
    (void)a;
    aco_set_allocator(NULL, NULL, NULL);  /* both NULL: no change, fine */
    fprintf(stderr, "both NULL: returned\n");
    aco_set_allocator((void* (*)(void*, size_t))0x1, (void (*)(void*, void*, size_t))0x1, NULL);
}

/* A main co made while another exists replaces it: the old one's cos can
 * no longer run, nor can the old one be destroyed (aco.h, aco_create). */
static void child_old_main_destroy(void* a) {
    (void)a;
    aco_t* m2 = aco_create(NULL, NULL, 0, NULL, NULL);
    (void)m2;
    aco_destroy(main_co);
}
static void child_old_main_co_resume(void* a) {
    (void)a;
    aco_t* m2 = aco_create(NULL, NULL, 0, NULL, NULL);
    (void)m2;
    aco_resume(co_suspended);
}

/* Threads.  A child that needs one starts it and joins it: an abort in any
 * thread ends the process. */
static void* th_create_main_no_init(void* a) {
    (void)a;
    aco_create(NULL, NULL, 0, NULL, NULL);
    return NULL;
}
static _Alignas(16) unsigned char main_mem[4096];
static void* th_create_main_in_no_init(void* a) {
    (void)a;
    aco_t* m = aco_create_main_in(main_mem, sizeof(main_mem), NULL);
    fprintf(stderr, "aco_create_main_in without aco_thread_init returned %p\n",
            (void*)m);
    return NULL;
}
static void* th_create_co_no_init(void* a) {
    (void)a;
    aco_create(main_co, sstk, 0, co_exit_now, NULL);
    return NULL;
}
static void* th_resume_foreign(void* a) {
    (void)a;
    aco_thread_init(NULL);
    aco_create(NULL, NULL, 0, NULL, NULL);
    aco_resume(co_suspended);
    return NULL;
}
static void* th_destroy_foreign(void* a) {
    (void)a;
    aco_thread_init(NULL);
    aco_create(NULL, NULL, 0, NULL, NULL);
    aco_destroy(co_suspended);
    return NULL;
}
static void* th_reset_foreign(void* a) {
    (void)a;
    aco_thread_init(NULL);
    aco_create(NULL, NULL, 0, NULL, NULL);
    aco_reset(co_suspended);
    return NULL;
}
static void* th_create_on_foreign_stack(void* a) {
    (void)a;
    aco_thread_init(NULL);
    aco_t* m = aco_create(NULL, NULL, 0, NULL, NULL);
    aco_create(m, sstk, 0, co_exit_now, NULL);
    return NULL;
}
static void* th_reserve_foreign(void* a) {
    (void)a;
    aco_thread_init(NULL);
    aco_create(NULL, NULL, 0, NULL, NULL);
    aco_resume_reserve(co_suspended);
    return NULL;
}
static void child_thread(void* arg) {
    pthread_t t;
    CHECK(pthread_create(&t, NULL, (void* (*)(void*))arg, NULL) == 0);
    pthread_join(t, NULL);
}

/* ------------------------------------------------------------------------ */
/* Harness.                                                                 */
/* ------------------------------------------------------------------------ */

/* Expect SIGABRT with "aco: FN: " followed by at least a word of rule on the
 * same line, and every '|'-separated part of `words`. */
static void expect(const char* what, void (*fn)(void*), void* arg,
                   const char* fname, const char* words) {
    char needle[512];
    snprintf(needle, sizeof(needle), "aco: %s: %s%s", fname,
             words ? "|" : "", words ? words : "");
    if (aco_test_expect_signal(what, fn, arg, SIGABRT, needle) != 0) {
        fails++;
        return;
    }
}

static void expect_inside(const char* what, inside_fn f, const char* fname,
                          const char* words) {
    expect(what, child_inside, (void*)f, fname, words);
}

static void expect_thread(const char* what, void* (*body)(void*),
                          const char* fname, const char* words) {
    expect(what, child_thread, (void*)body, fname, words);
}

/* ------------------------------------------------------------------------ */
/* What is fine.                                                            */
/* ------------------------------------------------------------------------ */

static int last_word_ran;
static void last_word_exits(void) {
    last_word_ran++;
    aco_exit();
}

static aco_t* yt_target;
static int yt_trace[8];
static int yt_n;
static void co_yield_to_main_then_exit(void) {
    yt_trace[yt_n++] = 1;
    aco_yield_to(aco_get_co()->main_co);   /* == aco_yield() */
    yt_trace[yt_n++] = 3;
    ASSERT_EQ(aco_resume_reserve(aco_get_co()), 0);   /* the caller itself */
    ASSERT_EQ(aco_resume_reserve(co_ended), 0);       /* an ended co */
    aco_exit();
}

static void fine(void) {
    /* A second aco_thread_init: fine. */
    aco_thread_init(NULL);

    /* aco_yield_to(main co) is aco_yield(). */
    yt_target = aco_create(main_co, sstk2, 0, co_yield_to_main_then_exit, NULL);
    aco_t* back = aco_resume_last(yt_target);
    ASSERT_PTR_EQ(back, yt_target);
    yt_trace[yt_n++] = 2;
    CHECK(!yt_target->is_end);
    aco_resume(yt_target);
    CHECK(yt_target->is_end);
    ASSERT_EQ(yt_n, 3);
    for (int i = 0; i < 3; i++) ASSERT_EQ(yt_trace[i], i + 1);
    aco_destroy(yt_target);

    /* Destroy a co in each state but running: init, suspended, ended. */
    aco_t* a = aco_create(main_co, sstk2, 0, co_yield_forever, NULL);
    aco_t* b = aco_create(main_co, sstk2, 0, co_yield_forever, NULL);
    aco_t* c = aco_create(main_co, sstk2, 0, co_exit_now, NULL);
    aco_resume(b);
    aco_resume(c);
    CHECK(c->is_end);
    aco_destroy(a);
    aco_destroy(b);
    aco_destroy(c);

    /* aco_reset of an init co changes nothing; of an ended one restarts it. */
    aco_t* d = aco_create(main_co, sstk2, 0, co_exit_now, NULL);
    aco_reset(d);
    CHECK(!d->is_end);
    aco_resume(d);
    CHECK(d->is_end);
    aco_reset(d);
    CHECK(!d->is_end);
    aco_resume(d);
    CHECK(d->is_end);
    aco_destroy(d);

    /* aco_on_share_stack: 0 for NULL co, NULL p, a main co. */
    int x = 0;
    ASSERT_EQ(aco_on_share_stack(NULL, &x, sizeof(x)), 0);
    ASSERT_EQ(aco_on_share_stack(main_co, &x, sizeof(x)), 0);
    ASSERT_EQ(aco_on_share_stack(co_suspended, NULL, 4), 0);
    CHECK(aco_on_share_stack(co_suspended, sstk->ptr, 0));
    CHECK(aco_on_share_stack(co_suspended, (char*)sstk->ptr + sstk->sz - 1, 1));
    CHECK(!aco_on_share_stack(co_suspended, (char*)sstk->ptr + sstk->sz, 1));
    CHECK(aco_on_share_stack(co_suspended, (char*)sstk->ptr - 1, 2));

    /* aco_resume_reserve before resume: 0, for init, suspended, ended. */
    ASSERT_EQ(aco_resume_reserve(co_suspended), 0);
    ASSERT_EQ(aco_resume_reserve(co_ended), 0);
    ASSERT_EQ(aco_resume_reserve(co_other), 0);

    /* A share stack with no co left may go; and a main co's cos outlive it. */
    aco_share_stack_t* s = aco_share_stack_new(0);
    aco_t* e = aco_create(main_co, s, 0, co_exit_now, NULL);
    aco_destroy(e);
    aco_share_stack_destroy(s);
}

/* A last word that calls aco_exit() ends the co as aco_exit() does. */
static void fine_last_word(void* arg) {
    (void)arg;
    aco_thread_init(last_word_exits);
    aco_t* m = aco_create(NULL, NULL, 0, NULL, NULL);
    aco_share_stack_t* s = aco_share_stack_new(0);
    aco_t* co = aco_create(m, s, 0, co_returns, NULL);
    aco_resume(co);
    CHECK(co->is_end);
    ASSERT_EQ(last_word_ran, 1);
    aco_destroy(co);
    aco_share_stack_destroy(s);
    aco_destroy(m);
    exit(0);
}

/* Destroy the main co first, then its cos (aco.h allows it). */
static void fine_main_first(void* arg) {
    (void)arg;
    aco_share_stack_t* s = aco_share_stack_new(0);
    aco_t* m = aco_create(NULL, NULL, 0, NULL, NULL);
    aco_t* x = aco_create(m, s, 0, co_yield_forever, NULL);
    aco_t* y = aco_create(m, s, 0, co_yield_forever, NULL);
    aco_resume(x);
    aco_resume(y);
    aco_destroy(m);
    aco_destroy(x);
    aco_destroy(y);
    aco_share_stack_destroy(s);
    exit(0);
}

static void run_fine_child(const char* what, void (*fn)(void*)) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        /* a fresh main co of this thread, as a program starts */
        aco_destroy(main_co);
        fn(NULL);
        _exit(2);
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "%s: child status %#x\n", what, st);
        fails++;
    }
}

int main(void) {
    aco_thread_init(NULL);
    main_co = aco_create(NULL, NULL, 0, NULL, NULL);
    sstk = aco_share_stack_new(64 * 1024);
    sstk2 = aco_share_stack_new(64 * 1024);
    co_ended = aco_create(main_co, sstk, 0, co_exit_now, NULL);
    aco_resume(co_ended);
    CHECK(co_ended->is_end);
    co_suspended = aco_create(main_co, sstk, 0, co_yield_forever, NULL);
    aco_resume(co_suspended);
    co_other = aco_create(main_co, sstk, 0, co_yield_forever, NULL);

    expect("resume(NULL)", child_resume_null, NULL, "aco_resume", "NULL");
    expect("resume of an ended co", child_resume_ended, NULL, "aco_resume", "ended");
    expect("resume of the main co", child_resume_main, NULL, "aco_resume", "main co");
    expect_inside("resume from a non-main co", in_resume_sibling, "aco_resume", NULL);
    expect("resume_last of an ended co", child_resume_last_ended, NULL,
           "aco_resume_last", "ended");
    expect("resume_last(NULL)", child_resume_last_null, NULL, "aco_resume_last", "NULL");
    expect("yield in the main co", child_yield_main, NULL, "aco_yield", NULL);
    expect("exit in the main co", child_exit_main, NULL, "aco_exit", NULL);
    expect("yield1(main co)", child_yield1_main, NULL, "aco_yield1", NULL);
    expect("exit1(main co)", child_exit1_main, NULL, "aco_exit1", NULL);
    expect_inside("yield1 of another co", in_yield1_other, "aco_yield1", NULL);
    expect_inside("exit1 of another co", in_exit1_other, "aco_exit1", NULL);
    expect("yield_to from the main co", child_yield_to_main, NULL, "aco_yield_to", NULL);
    expect_inside("yield_to itself", in_yield_to_self, "aco_yield_to", NULL);
    expect_inside("yield_to an ended co", in_yield_to_ended, "aco_yield_to", "ended");
    expect_inside("yield_to(NULL)", in_yield_to_null, "aco_yield_to", "NULL");
    expect("destroy(NULL)", child_destroy_null, NULL, "aco_destroy", "NULL");
    expect("destroy twice", child_destroy_twice, NULL, "aco_destroy", NULL);
    expect_inside("destroy the running co", in_destroy_self, "aco_destroy", NULL);
    expect_inside("destroy the main co from a co", in_destroy_main, "aco_destroy", NULL);
    expect_inside("a main co made inside a co", in_create_main, "aco_create", NULL);
    expect_inside("reset of the running co", in_reset_self, "aco_reset", NULL);
    expect_inside("reset of the main co from a co", in_reset_main, "aco_reset", NULL);
    expect_inside("destroy of the running co's share stack",
                  in_share_stack_destroy_own, "aco_share_stack_destroy", NULL);
    expect("share stack destroyed while used", child_sstk_destroy_used, NULL,
           "aco_share_stack_destroy", NULL);
    expect("share_stack_destroy(NULL)", child_sstk_destroy_null, NULL,
           "aco_share_stack_destroy", "NULL");
    expect("create with a NULL share stack", child_create_null_stack, NULL,
           "aco_create", "NULL");
    expect("create with a NULL fp", child_create_null_fp, NULL, "aco_create", "NULL");
    expect("create with a non-main co as main_co", child_create_non_main_as_main,
           NULL, "aco_create", NULL);
    expect("create with a save stack of 4 GiB - 7", child_create_huge_save, NULL,
           "aco_create", NULL);
    expect("aco_co_size(4 GiB - 7)", child_co_size_huge, NULL, "aco_co_size", NULL);
    expect("reset(NULL)", child_reset_null, NULL, "aco_reset", "NULL");
    expect("reset of the main co", child_reset_main, NULL, "aco_reset", "main co");
    expect("reset2 with a NULL fp", child_reset2_null_fp, NULL, "aco_reset2", "NULL");
    expect("resume_reserve(main co)", child_reserve_main, NULL, "aco_resume_reserve",
           "main co");
    expect("resume_reserve(NULL)", child_reserve_null, NULL, "aco_resume_reserve",
           "NULL");
    expect("aco_is_main_co(NULL)", child_is_main_null, NULL, "aco_is_main_co", NULL);
    if (aco_test_expect_signal("a co function that returns", child_co_returns, NULL,
                               SIGABRT, "aco: ") != 0)
        fails++;
    expect("create_in: misaligned memory", child_create_in_misaligned, NULL,
           "aco_create_in", NULL);
    expect("create_in: too small", child_create_in_small, NULL, "aco_create_in", NULL);
    expect("create_in: NULL memory", child_create_in_null, NULL, "aco_create_in",
           "NULL");
    expect("create_main_in: too small", child_create_main_in_small, NULL,
           "aco_create_main_in", NULL);
    expect("set_allocator after allocations", child_set_allocator_late, NULL,
           "aco_set_allocator", NULL);
    expect("destroy of a replaced main co", child_old_main_destroy, NULL,
           "aco_destroy", "replaced");
    expect("resume of a replaced main co's co", child_old_main_co_resume, NULL,
           "aco_resume", NULL);

    expect_thread("main co without aco_thread_init", th_create_main_no_init,
                  "aco_create", NULL);
    expect_thread("main co in memory without aco_thread_init",
                  th_create_main_in_no_init, "aco_create_main_in", NULL);
    expect_thread("co without aco_thread_init", th_create_co_no_init, "aco_create",
                  NULL);
    expect_thread("resume from another thread", th_resume_foreign, "aco_resume", NULL);
    expect_thread("destroy from another thread", th_destroy_foreign, "aco_destroy",
                  NULL);
    expect_thread("reset from another thread", th_reset_foreign, "aco_reset", NULL);
    expect_thread("create on another thread's share stack",
                  th_create_on_foreign_stack, "aco_create", NULL);
    expect_thread("resume_reserve of another thread's co", th_reserve_foreign,
                  "aco_resume_reserve", NULL);

    fine();
    run_fine_child("last word that exits", fine_last_word);
    run_fine_child("main co destroyed before its cos", fine_main_first);

    aco_destroy(co_ended);
    aco_destroy(co_suspended);
    aco_destroy(co_other);
    aco_share_stack_destroy(sstk);
    aco_share_stack_destroy(sstk2);
    aco_destroy(main_co);
    if (fails) {
        fprintf(stderr, "%d failures\n", fails);
        return 1;
    }
    printf("ok\n");
    return 0;
}
