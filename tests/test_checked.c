/*
 * test_checked.c - checked mode (aco.h, "Checked mode"): a pointer into a
 * suspended co's frames faults at once, with a report naming both cos and
 * their frames; a correct program runs as without it.
 *
 * The program turns the mode on itself (ACO_CHECKED=1 before its first
 * libaco call), so it runs in every target.  Builds that ignore the mode
 * (ASan, ACO_USE_VALGRIND) check that it says so and stays off.
 *
 * Escapes, each in a forked child that must die of SIGSEGV with the report:
 *   a global pointer read, and written, by another co of the same stack;
 *   a heap object's pointer written by another co; a pointer read by the
 *   main co; a co evicted to its save stack; another thread; a co that
 *   ended; a waiter node on a co's stack in a list another co walks to wake
 *   it; a timer node on a co's stack in a list the main co's timer loop
 *   fires; aco_checked_access (memory handed on, as to the kernel), also
 *   from a guard page into a stack; a report runs none of the program's
 *   atfork handlers; and a report into a full, non-blocking stderr arrives
 *   whole (the handler waits for the reader).
 * Correct uses, checked in the parent: a co's own locals, a main co's locals
 * used by cos, a standalone co's locals read while it is suspended, the copy
 * statistics of two cos alternating on one stack, aco_on_share_stack, and
 * the kernel's write into a suspended co's window failing with EFAULT
 * (never reaching the frames of the co that holds the stack).
 */
#include "aco_test.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/uio.h>

static aco_t* main_co;
static volatile int* volatile escaped;      /* the pointer that escapes */
static int* volatile* heap_box;             /* a heap object holding it */

/* Function names the report must show (noinline: their own frames). */
__attribute__((noinline)) static void owner_frame_fn(void) {
    volatile int local = 1234;
    escaped = (volatile int*)&local;
    if (heap_box) *heap_box = (int*)&local;
    aco_yield();
    CHECK(local == 1234);
}

static void co_owner(void) {
    owner_frame_fn();
    aco_exit();
}

__attribute__((noinline)) static void reader_fn(void) {
    int v = *escaped;
    (void)v;
}

__attribute__((noinline)) static void writer_fn(void) {
    *escaped = 99;
}

static void co_reader(void) {
    reader_fn();
    aco_exit();
}

static void co_writer(void) {
    writer_fn();
    aco_exit();
}

static void co_heap_writer(void) {
    **heap_box = 7;
    aco_exit();
}

static void co_yield_exit(void) {
    volatile char pad[300];
    pad[0] = 1;
    aco_yield();
    CHECK(pad[0] == 1);
    aco_exit();
}

/* A waiter node and a timer node on a co's stack, registered in lists that
 * another co (the waker) and the main co (the timer loop) walk later. */
struct node {
    struct node* next;
    int fired;
    long deadline;
};
static struct node* waiters;
static struct node* timers;

/* Out of line: gcc would see the escape (-Wdangling-pointer) otherwise. */
__attribute__((noinline)) static void push(struct node** list, struct node* n) {
    n->next = *list;
    *list = n;
}

__attribute__((noinline)) static void wait_on_node(void) {
    struct node w = {NULL, 0, 0};
    push(&waiters, &w);                 /* the escape: a node on our stack */
    while (!w.fired) aco_yield();
}

static void co_waiter(void) {
    wait_on_node();
    aco_exit();
}

__attribute__((noinline)) static void wake_all(void) {
    for (struct node* n = waiters; n != NULL; n = n->next) n->fired = 1;
}

static void co_waker(void) {
    wake_all();
    aco_exit();
}

static void child_waiter_node(void* arg) {
    (void)arg;
    aco_thread_init(NULL);
    main_co = aco_create(NULL, NULL, 0, NULL, NULL);
    aco_share_stack_t* s = aco_share_stack_new(64 * 1024);
    aco_t* w = aco_create(main_co, s, 0, co_waiter, NULL);
    aco_t* k = aco_create(main_co, s, 0, co_waker, NULL);
    aco_resume(w);
    aco_resume(k);
}

__attribute__((noinline)) static void sleep_on_timer(void) {
    struct node t = {NULL, 0, 3};
    push(&timers, &t);                  /* the escape */
    while (!t.fired) aco_yield();
}

static void co_sleeper(void) {
    sleep_on_timer();
    aco_exit();
}

__attribute__((noinline)) static void timer_loop(long now) {
    for (struct node* n = timers; n != NULL; n = n->next)
        if (n->deadline <= now) n->fired = 1;
}

static void child_timer_node(void* arg) {
    (void)arg;
    aco_thread_init(NULL);
    main_co = aco_create(NULL, NULL, 0, NULL, NULL);
    aco_share_stack_t* s = aco_share_stack_new(64 * 1024);
    aco_t* sl = aco_create(main_co, s, 0, co_sleeper, NULL);
    aco_create(main_co, s, 0, co_yield_exit, NULL);     /* the stack is shared */
    aco_resume(sl);
    timer_loop(5);
}

static void co_hand_on(void) {
    aco_checked_access((const void*)escaped, sizeof(int), 1);
    aco_exit();
}

/* A range from the guard page below the owner's stack into it: the bytes
 * on the stack are reported, the guard page's are not stack bytes. */
static void co_hand_on_low(void) {
    aco_t* owner = aco_get_arg();
    long pg = sysconf(_SC_PAGESIZE);
    const char* their_lo = (const char*)((uintptr_t)escaped & ~(uintptr_t)(pg - 1));
    while (aco_on_share_stack(owner, their_lo - pg, 1)) their_lo -= pg;
    aco_checked_access(their_lo - 2, 4, 0);
    aco_exit();
}


/* A world: main co, one share stack, the owner suspended on it. */
static aco_share_stack_t* world(aco_t** owner) {
    aco_thread_init(NULL);
    main_co = aco_create(NULL, NULL, 0, NULL, NULL);
    aco_share_stack_t* s = aco_share_stack_new(64 * 1024);
    *owner = aco_create(main_co, s, 0, co_owner, NULL);
    aco_resume(*owner);
    return s;
}

static void child_hand_on_low(void* arg) {
    (void)arg;
    aco_t* owner;
    aco_share_stack_t* s = world(&owner);
    aco_t* co = aco_create(main_co, s, 0, co_hand_on_low, owner);
    aco_resume(co);
}

static char expect[512];    /* the needles, filled by the child's parent */

static void child_other_co(void* arg) {
    aco_t* owner;
    aco_share_stack_t* s = world(&owner);
    aco_t* co = aco_create(main_co, s, 0, (aco_cofuncp_t)arg, NULL);
    aco_resume(co);
}

static void child_main_reads(void* arg) {
    (void)arg;
    aco_t* owner;
    aco_share_stack_t* s = world(&owner);
    aco_create(main_co, s, 0, co_yield_exit, NULL);     /* the stack is shared */
    int v = *escaped;
    (void)v;
}

static void child_evicted(void* arg) {
    (void)arg;
    aco_t* owner;
    aco_share_stack_t* s = world(&owner);
    aco_t* other = aco_create(main_co, s, 0, co_yield_exit, NULL);
    aco_resume(other);      /* takes the stack: owner's frames are saved */
    *escaped = 5;
}

static void* thread_reads(void* arg) {
    (void)arg;
    int v = *escaped;
    return (void*)(intptr_t)v;
}

static void child_thread(void* arg) {
    (void)arg;
    aco_t* owner;
    aco_share_stack_t* s = world(&owner);
    aco_create(main_co, s, 0, co_yield_exit, NULL);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, thread_reads, NULL) == 0);
    pthread_join(t, NULL);
}

static void co_ends(void) {
    volatile int local = 3;
    escaped = (volatile int*)&local;
    aco_exit();
}

static void child_ended(void* arg) {
    (void)arg;
    aco_thread_init(NULL);
    main_co = aco_create(NULL, NULL, 0, NULL, NULL);
    aco_share_stack_t* s = aco_share_stack_new(64 * 1024);
    aco_t* co = aco_create(main_co, s, 0, co_ends, NULL);
    aco_resume(co);
    int v = *escaped;
    (void)v;
}

/* The report runs addr2line in a child of its own, without fork(): the
 * program's atfork handlers must not run inside the SIGSEGV handler (one
 * may take a lock the faulting thread holds).  This one ends the process
 * with 42 instead of the signal, and its report names no frame. */
static void atfork_ran(void) {
    static const char m[] = "test_checked: an atfork handler ran in the report\n";
    ssize_t w = write(2, m, sizeof(m) - 1);
    (void)w;
    _exit(42);
}

static void child_atfork(void* arg) {
    CHECK(pthread_atfork(atfork_ran, NULL, NULL) == 0);
    child_other_co(arg);
}

/* A report into a full, non-blocking stderr (the runtime's hooks leave a
 * descriptor so once a co has waited on it): the handler waits for the
 * reader, and the whole report arrives.  The child fills its stderr pipe
 * (nobody reads yet), says so on a second pipe, then makes the escape; the
 * parent drains only after that, and finds the report's last line. */
static int full_report(void) {
    int out[2], ready[2];
    CHECK(pipe(out) == 0 && pipe(ready) == 0);
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        close(out[0]);
        close(ready[0]);
        dup2(out[1], 2);
        close(out[1]);
        CHECK(fcntl(2, F_SETFL, fcntl(2, F_GETFL) | O_NONBLOCK) == 0);
        static char fill[4096];
        memset(fill, '.', sizeof(fill));
        while (write(2, fill, sizeof(fill)) > 0) {}
        CHECK(errno == EAGAIN);
        CHECK(write(ready[1], "f", 1) == 1);
        child_other_co((void*)co_writer);
        _exit(0);
    }
    close(out[1]);
    close(ready[1]);
    char c;
    int filled = read(ready[0], &c, 1) == 1;
    close(ready[0]);
    usleep(100 * 1000);     /* the handler meets the full pipe meanwhile */
    static char buf[256 * 1024];
    size_t len = 0;
    ssize_t r;
    while (len < sizeof(buf) - 1 &&
           ((r = read(out[0], buf + len, sizeof(buf) - 1 - len)) > 0 || (r < 0 && errno == EINTR)))
        if (r > 0) len += (size_t)r;
    buf[len] = '\0';
    close(out[0]);
    int st;
    while (waitpid(pid, &st, 0) < 0) CHECK(errno == EINTR);
    int ok = filled && WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV &&
             strstr(buf, "writer_fn") != NULL && strstr(buf, "the co whose stack it is, co ") != NULL &&
             strstr(buf, "owner_frame_fn") != NULL;
    if (!ok) {
        const char* rep = strstr(buf, "aco: ");
        fprintf(stderr, "a report into a full non-blocking stderr: filled %d, status %#x, "
                "report:\n%s\n", filled, st, rep ? rep : "(none)");
    }
    return !ok;
}

/* ---- correct programs --------------------------------------------------- */

static int main_local_seen;

static void co_uses_main_local(void) {
    int* p = aco_get_arg();
    *p += 1;
    aco_yield();
    *p += 1;
    aco_exit();
}

static void co_standalone(void) {
    volatile int local = 77;
    escaped = (volatile int*)&local;
    aco_yield();
    CHECK(local == 78);
    aco_exit();
}

static volatile int pipe_target_ok;
static void co_pipe_owner(void) {
    volatile unsigned char buf[64];
    memset((void*)buf, 0xab, sizeof(buf));
    escaped = (volatile int*)(void*)buf;
    aco_yield();
    for (size_t i = 0; i < sizeof(buf); i++) CHECK(buf[i] == 0xab);
    pipe_target_ok = 1;
    aco_exit();
}

static void co_frames_check(void) {
    volatile unsigned char mine[256];
    memset((void*)mine, 0x5c, sizeof(mine));
    aco_yield();
    for (size_t i = 0; i < sizeof(mine); i++) CHECK(mine[i] == 0x5c);
    aco_exit();
}

static void correct_programs(void) {
    aco_thread_init(NULL);
    main_co = aco_create(NULL, NULL, 0, NULL, NULL);
    CHECK(aco_checked());

    /* A main co's local, used by a co: fine. */
    aco_share_stack_t* s = aco_share_stack_new(64 * 1024);
    int shared = 0;
    aco_t* a = aco_create(main_co, s, 0, co_uses_main_local, &shared);
    aco_t* b = aco_create(main_co, s, 0, co_yield_exit, NULL);
    aco_resume(a);
    aco_resume(b);
    aco_resume(a);
    aco_resume(b);
    ASSERT_EQ(shared, 2);
    CHECK(a->is_end && b->is_end);
    /* Copy statistics as without checked mode: a saved once (b took the
     * stack), restored once; b never saved (it ran last, then ended). */
    EXPECT_COUNTS(a, 1, 1);
    EXPECT_COUNTS(b, 1, 1);
    aco_destroy(a);
    aco_destroy(b);
    main_local_seen = shared;

    /* A standalone co's local, touched while it is suspended: fine. */
    aco_share_stack_t* alone = aco_share_stack_new(0);
    aco_t* st = aco_create(main_co, alone, 0, co_standalone, NULL);
    aco_resume(st);
    CHECK(aco_on_share_stack(st, (const void*)escaped, sizeof(int)));
    *escaped += 1;
    aco_resume(st);
    CHECK(st->is_end);
    aco_destroy(st);
    aco_share_stack_destroy(alone);

    /* A co alone again (the other destroyed before it ran) gets its window
     * back while suspended. */
    aco_share_stack_t* s2 = aco_share_stack_new(64 * 1024);
    aco_t* lone = aco_create(main_co, s2, 0, co_standalone, NULL);
    aco_t* gone = aco_create(main_co, s2, 0, co_yield_exit, NULL);
    aco_resume(lone);
    aco_destroy(gone);
    *escaped += 1;
    aco_resume(lone);
    CHECK(lone->is_end);
    aco_destroy(lone);
    aco_share_stack_destroy(s2);

    /* aco_on_share_stack: a co's own window, not another's (both on s). */
    aco_t* o = aco_create(main_co, s, 0, co_pipe_owner, NULL);
    aco_t* c = aco_create(main_co, s, 0, co_frames_check, NULL);
    aco_resume(o);
    CHECK(aco_on_share_stack(o, (const void*)escaped, 1));
    CHECK(!aco_on_share_stack(c, (const void*)escaped, 1));
    CHECK(!aco_on_share_stack(main_co, (const void*)escaped, 1));
    CHECK(!aco_on_share_stack(o, &shared, sizeof(shared)));

    /* The kernel writing into o's frames while c holds the stack: EFAULT,
     * and neither o's saved frames nor c's live ones change. */
    aco_resume(c);
    int fds[2];
    CHECK(pipe(fds) == 0);
    char junk[64];
    memset(junk, 0x11, sizeof(junk));
    CHECK(write(fds[1], junk, sizeof(junk)) == (ssize_t)sizeof(junk));
    errno = 0;
    CHECK(read(fds[0], (void*)escaped, sizeof(junk)) == -1 && errno == EFAULT);
    aco_resume(c);
    aco_resume(o);
    CHECK(pipe_target_ok && o->is_end && c->is_end);
    close(fds[0]);
    close(fds[1]);
    aco_destroy(o);
    aco_destroy(c);
    aco_share_stack_destroy(s);
    aco_destroy(main_co);
}

static void needles(const char* kind, const char* fn_accessor, const char* fn_owner,
                    int names) {
    snprintf(expect, sizeof(expect), "aco: checked: |%s|%s%s%s%s", kind,
             names ? fn_accessor : "", names ? "|" : "", names ? fn_owner : "",
             "|the co whose stack it is, co ");
    /* drop an empty part left by names == 0 */
    char* p;
    while ((p = strstr(expect, "||")) != NULL) memmove(p, p + 1, strlen(p));
}

int main(void) {
    setenv("ACO_CHECKED", "1", 1);
    if (!aco_checked()) {
        printf("test_checked: this build ignores ACO_CHECKED (ASan or valgrind): "
               "checked that it is off\n");
        return 0;
    }
    /* Function and file names need addr2line, which reads the program's
     * debug information whatever its architecture: everywhere. */
    int names = 1;
    int fails = 0;

    /* Read or write: the x86 page fault's error code tells; elsewhere the
     * kernel (and qemu) may not, and the report says "accessed". */
#if defined(__x86_64__) || defined(__i386__)
    const char* kind_read = " read 0x", * kind_write = " wrote 0x";
#else
    const char* kind_read = " 0x", * kind_write = " 0x";
#endif
    needles(kind_read, "reader_fn at", "owner_frame_fn at", names);
    fails += aco_test_expect_signal("another co reads", child_other_co, (void*)co_reader,
                                    SIGSEGV, expect);
    needles(kind_write, "writer_fn at", "owner_frame_fn at", names);
    fails += aco_test_expect_signal("another co writes", child_other_co, (void*)co_writer,
                                    SIGSEGV, expect);

    static int* box;
    heap_box = &box;
    needles("which is suspended", "co_heap_writer at", "owner_frame_fn at", names);
    fails += aco_test_expect_signal("through a heap object", child_other_co,
                                    (void*)co_heap_writer, SIGSEGV, expect);
    heap_box = NULL;

    needles("main co 0x", "child_main_reads at", "owner_frame_fn at", names);
    fails += aco_test_expect_signal("the main co reads", child_main_reads, NULL, SIGSEGV,
                                    expect);
    needles("(its frames evicted to its save stack)", "child_evicted at",
            "owner_frame_fn at", names);
    fails += aco_test_expect_signal("evicted", child_evicted, NULL, SIGSEGV, expect);
    needles("a thread with no co", "thread_reads at", "owner_frame_fn at", names);
    fails += aco_test_expect_signal("another thread", child_thread, NULL, SIGSEGV, expect);
    snprintf(expect, sizeof(expect), "aco: checked: main co 0x|which has ended|its frames "
             "are dead");
    fails += aco_test_expect_signal("an ended co", child_ended, NULL, SIGSEGV, expect);
    needles("handed on for writing ", "co_hand_on at", "owner_frame_fn at", names);
    fails += aco_test_expect_signal("aco_checked_access", child_other_co, (void*)co_hand_on,
                                    SIGSEGV, expect);
    needles("which is suspended", "wake_all at", "wait_on_node at", names);
    fails += aco_test_expect_signal("a waiter node", child_waiter_node, NULL, SIGSEGV, expect);
    /* (no " at": built without -g, gcc's constant-propagated clone is
     * named timer_loop.constprop.0) */
    needles("main co 0x", "timer_loop", "sleep_on_timer at", names);
    fails += aco_test_expect_signal("a timer node", child_timer_node, NULL, SIGSEGV, expect);
    needles("handed on for reading ", "co_hand_on_low at", "the address is below its stack "
            "pointer", names);
    fails += aco_test_expect_signal("aco_checked_access from the guard page", child_hand_on_low,
                                    NULL, SIGSEGV, expect);

    needles(kind_write, "writer_fn at", "owner_frame_fn at", names);
    fails += aco_test_expect_signal("no atfork handler runs", child_atfork, (void*)co_writer,
                                    SIGSEGV, expect);
    fails += full_report();

    correct_programs();
    ASSERT_EQ(main_local_seen, 2);
    if (fails) {
        fprintf(stderr, "test_checked: %d case(s) failed\n", fails);
        return 1;
    }
    printf("test_checked: every escape faulted with its report; correct uses ran\n");
    return 0;
}
