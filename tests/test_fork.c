/*
 * test_fork.c - libaco is fork-safe: while 4 threads create, run and
 * destroy cos (and share stacks) in a loop, the main thread forks 60 times;
 * every child at once initialises libaco, creates a main co, a share stack
 * and cos, runs them to their end, destroys everything and exits 0.  A child
 * that hangs (a lock of libaco's allocator held by another thread at the
 * fork) is killed by its alarm and fails the test.  Cos of the forking
 * thread created and suspended before the fork stay usable in the child:
 * every other child first resumes two of them to their end (one was copied
 * out of the share stack, the other is copied out by that).  TSan builds
 * narrow this down, and say how (see gate_enter and main).
 */
#include "aco_test.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/resource.h>

#define NTHREADS 4
#define MAX_OUTSTANDING 8

static atomic_int stop;
static atomic_long churned[NTHREADS];

/* ASan and TSan builds only: forks happen between the threads' libaco
 * calls.  A co's TSan fiber lives in TSan's internal allocator, which GCC
 * 12's libtsan does not lock across fork, and clang 14's ASan allocator
 * (share stacks' structs, save stacks) is not locked across fork either: a
 * fork while another thread allocates could hang the child inside the
 * sanitizer's runtime, not inside libaco (seen: 1 child in ~300, i386). */
static atomic_int fork_pending;
static atomic_int inside[NTHREADS];

static void gate_enter(int id) {
    if (!aco__san_switch) return;
    atomic_store(&inside[id], 1);
    while (atomic_load(&fork_pending)) {
        atomic_store(&inside[id], 0);
        while (atomic_load(&fork_pending)) sched_yield();
        atomic_store(&inside[id], 1);
    }
}

static void gate_leave(int id) {
    if (aco__san_switch) atomic_store(&inside[id], 0);
}

static void gate_close(void) {
    if (!aco__san_switch) return;
    atomic_store(&fork_pending, 1);
    for (int i = 0; i < NTHREADS; i++)
        while (atomic_load(&inside[i])) sched_yield();
}

static void gate_open(void) {
    if (aco__san_switch) atomic_store(&fork_pending, 0);
}

/* Counts its runs in *arg; a local checks that its frame survived. */
static void co_count(void) {
    long* n = aco_get_arg();
    long mine = *n;
    volatile long check = mine * 7 + 3;
    (*n)++;
    aco_yield();
    CHECK(check == mine * 7 + 3);
    (*n)++;
    aco_exit();
}

/* One world: cos on s under m, each resumed twice (copied out and back by
 * turns), destroyed. */
static void run_world(aco_t* m, aco_share_stack_t* s, int nco) {
    aco_t* cos[8];
    long n = 0;
    CHECK(nco <= 8);
    for (int i = 0; i < nco; i++) cos[i] = aco_create(m, s, 0, co_count, &n);
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < nco; i++) aco_resume(cos[i]);
    ASSERT_EQ(n, 2 * nco);
    for (int i = 0; i < nco; i++) {
        ASSERT_EQ(cos[i]->is_end, 1);
        aco_destroy(cos[i]);
    }
}

static void* churn(void* arg) {
    int id = (int)(intptr_t)arg;
    aco_thread_init(NULL);
    aco_t* m = aco_create(NULL, NULL, 0, NULL, NULL);
    aco_share_stack_t* s = aco_share_stack_new(32 * 1024);
    for (long it = 0; !atomic_load(&stop); it++) {
        gate_enter(id);
        run_world(m, s, 8);
        if (it % 16 == 15) {        /* share stacks come and go too */
            aco_share_stack_destroy(s);
            s = aco_share_stack_new2(32 * 1024, (char)(it % 32 == 15));
        }
        gate_leave(id);
        atomic_fetch_add(&churned[id], 1);
    }
    aco_share_stack_destroy(s);
    aco_destroy(m);
    return NULL;
}

/* The forking thread's objects, suspended before every fork. */
static aco_t *main_co, *pre1, *pre2;
static aco_share_stack_t* pre_stack;
static long pre_n;

static void child(int with_pre_fork_cos, unsigned timeout) {
    alarm(timeout);
    aco_thread_init(NULL);
    if (with_pre_fork_cos) {
        aco_resume(pre1);           /* restored; pre2 copied out */
        aco_resume(pre2);
        ASSERT_EQ(pre_n, 4);
        CHECK(pre1->is_end && pre2->is_end);
        aco_destroy(pre1);
        aco_destroy(pre2);
        aco_share_stack_destroy(pre_stack);
        aco_destroy(main_co);       /* the thread's current main co */
    }
    aco_t* m = aco_create(NULL, NULL, 0, NULL, NULL);
    aco_share_stack_t* s = aco_share_stack_new(0);
    run_world(m, s, 3);
    aco_share_stack_destroy(s);
    aco_destroy(m);
    /* Under memcheck the child's exit runs a leak check, which counts the
     * other threads' cos (dead memory in the child, by design) as lost:
     * replace the process instead (valgrind does not follow the exec). */
    if (aco_test_on_valgrind()) execlp("true", "true", (char*)NULL);
    _exit(0);
}

static int reap(pid_t pid, int idx) {
    int st;
    while (waitpid(pid, &st, 0) < 0) CHECK(errno == EINTR);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return 0;
    if (WIFSIGNALED(st))
        fprintf(stderr, "child %d: killed by signal %d%s\n", idx, WTERMSIG(st),
                WTERMSIG(st) == SIGALRM ? " (hung: a lock held at the fork?)" : "");
    else
        fprintf(stderr, "child %d: exited with %d\n", idx, WEXITSTATUS(st));
    return 1;
}

int main(void) {
    unsigned timeout = 10;
    if (aco_test_on_valgrind()) timeout = 120;
    else if (getenv("ACO_TEST_EMULATOR") != NULL) timeout = 60;
    int nfork = (int)aco_test_scale(60, 6);
    if (aco__asan)
        printf("test_fork: ASan build: forks only between the threads' libaco "
               "calls (the sanitizer's allocator is not locked across fork)\n");
    if (aco__tsan)
        printf("test_fork: TSan build: forks only between the threads' libaco "
               "calls (GCC 12's libtsan leaves its internal allocator, which "
               "holds the cos' fibers, unlocked across fork), and the children "
               "do not resume the cos suspended before the fork (TSan ignores "
               "synchronization in the child of a multi-threaded fork: their "
               "switches would be reported as races)\n");

    aco_thread_init(NULL);
    main_co = aco_create(NULL, NULL, 0, NULL, NULL);
    pre_stack = aco_share_stack_new(64 * 1024);
    pre1 = aco_create(main_co, pre_stack, 0, co_count, &pre_n);
    pre2 = aco_create(main_co, pre_stack, 0, co_count, &pre_n);
    aco_resume(pre1);
    aco_resume(pre2);               /* pre1 copied out, pre2 owns the stack */
    ASSERT_EQ(pre_n, 2);

    pthread_t t[NTHREADS];
    for (int i = 0; i < NTHREADS; i++)
        CHECK(pthread_create(&t[i], NULL, churn, (void*)(intptr_t)i) == 0);
    for (int i = 0; i < NTHREADS; i++)
        while (atomic_load(&churned[i]) == 0) usleep(1000);

    pid_t pids[MAX_OUTSTANDING];
    int idx[MAX_OUTSTANDING];
    int out = 0, fails = 0;
    for (int f = 0; f < nfork; f++) {
        if (out == MAX_OUTSTANDING) {
            fails += reap(pids[0], idx[0]);
            memmove(pids, pids + 1, sizeof(pids[0]) * (MAX_OUTSTANDING - 1));
            memmove(idx, idx + 1, sizeof(idx[0]) * (MAX_OUTSTANDING - 1));
            out--;
        }
        fflush(stdout);
        fflush(stderr);
        gate_close();
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) child(f % 2 == 0 && !aco__tsan, timeout);
        gate_open();
        pids[out] = pid;
        idx[out++] = f;
        usleep(500 + (unsigned)(f % 5) * 300);
    }
    while (out > 0) {
        fails += reap(pids[0], idx[0]);
        memmove(pids, pids + 1, sizeof(pids[0]) * (MAX_OUTSTANDING - 1));
        memmove(idx, idx + 1, sizeof(idx[0]) * (MAX_OUTSTANDING - 1));
        out--;
    }

    atomic_store(&stop, 1);
    long total = 0;
    for (int i = 0; i < NTHREADS; i++) {
        CHECK(pthread_join(t[i], NULL) == 0);
        total += atomic_load(&churned[i]);
    }
    ASSERT_EQ(fails, 0);

    /* the parent's own cos were not disturbed by the children */
    aco_resume(pre1);
    aco_resume(pre2);
    ASSERT_EQ(pre_n, 4);
    aco_destroy(pre1);
    aco_destroy(pre2);
    aco_share_stack_destroy(pre_stack);
    aco_destroy(main_co);
    printf("test_fork: OK (%d forks, every child done; %ld worlds churned by "
           "%d threads meanwhile)\n", nfork, total, NTHREADS);
    return 0;
}
