/*
 * test_guard_page.c - a co that overflows a guarded share stack dies by
 * SIGSEGV in the guard page instead of corrupting memory.
 *
 * In forked children, a co recurses without bound on share stacks with a
 * guard page (several sizes): the child must die by SIGSEGV.  One child
 * also installs a SIGSEGV handler on an alternate signal stack that reports
 * whether the faulting address lies in the guard page (the page right below
 * the stack's ptr), then lets the signal kill the child.  Finally, in this
 * process, the same kind of co using a little less than its stack runs,
 * yields and exits normally.
 */
#include "aco_test.h"

#include <sys/resource.h>

static aco_share_stack_t* child_stack;
static uintptr_t guard_lo, guard_hi;   /* the guard page: [lo, hi) */
static volatile long depth_limit = -1; /* never reached; defeats
                                          -Winfinite-recursion */
static uintptr_t lowest_sp;            /* lowest sp recurse() has seen */

/* The stack pointer of the caller (aco_test.h). */
#define current_sp() aco_test_sp()

/* Not a tail call: the frame stays live until the callee returns. */
__attribute__((noinline)) static long recurse(long depth, uintptr_t stop_sp) {
    volatile unsigned char buf[128];
    buf[0] = (unsigned char)depth;
    buf[127] = (unsigned char)(depth >> 8);
    uintptr_t sp = current_sp();
    if (sp < lowest_sp) lowest_sp = sp;
    if (depth == depth_limit || sp < stop_sp) {
        aco_yield();
        return buf[0];
    }
    return recurse(depth + 1, stop_sp) + buf[0] + buf[127];
}

static void co_unbounded(void) {
    lowest_sp = UINTPTR_MAX;
    recurse(0, 0);          /* no sp is below 0: never stops */
    aco_exit();
}

/* Async-signal-safe: formats v in hex into buf, returns the length. */
static size_t hex(char* buf, uintptr_t v) {
    char tmp[2 * sizeof(v)];
    size_t n = 0, len = 0;
    do {
        tmp[n++] = "0123456789abcdef"[v & 15];
        v >>= 4;
    } while (v != 0);
    buf[len++] = '0';
    buf[len++] = 'x';
    while (n > 0) buf[len++] = tmp[--n];
    return len;
}

static void on_segv(int sig, siginfo_t* si, void* uc) {
    (void)sig;
    (void)uc;
    uintptr_t a = (uintptr_t)si->si_addr;
    char msg[160];
    size_t len = 0;
    const char* verdict = a >= guard_lo && a < guard_hi
                              ? "fault in the guard page at "
                              : "fault outside the guard page at ";
    memcpy(msg, verdict, strlen(verdict));
    len += strlen(verdict);
    len += hex(msg + len, a);
    msg[len++] = '\n';
    ssize_t r = write(2, msg, len);
    (void)r;
    /* SA_RESETHAND restored the default action: returning re-executes the
     * faulting access, which now kills the process with SIGSEGV. */
}

/* In a child: the crash is expected, a core file is not wanted. */
static void no_core_file(void) {
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
}

/* Child: overflow a guarded stack of *arg bytes. */
static void overflow_child(void* arg) {
    size_t sz = *(const size_t*)arg;
    no_core_file();
    aco_thread_init(NULL);
    aco_t* main_co = aco_create(NULL, NULL, 0, NULL, NULL);
    child_stack = aco_share_stack_new2(sz, 1);
    aco_t* co = aco_create(main_co, child_stack, 0, co_unbounded, NULL);
    aco_resume(co);
    fprintf(stderr, "the co overflowed its stack and came back\n");
}

/* Child: the same, with a handler that reports where the fault was. */
static void overflow_child_with_handler(void* arg) {
    static unsigned char altstack[64 * 1024];
    size_t sz = *(const size_t*)arg;
    long pg = sysconf(_SC_PAGESIZE);
    no_core_file();

    aco_thread_init(NULL);
    aco_t* main_co = aco_create(NULL, NULL, 0, NULL, NULL);
    child_stack = aco_share_stack_new2(sz, 1);
    guard_hi = (uintptr_t)child_stack->ptr;
    guard_lo = guard_hi - (uintptr_t)pg;

    stack_t ss = {.ss_sp = altstack, .ss_size = sizeof(altstack), .ss_flags = 0};
    if (sigaltstack(&ss, NULL) != 0) { perror("sigaltstack"); return; }
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSEGV, &sa, NULL) != 0) { perror("sigaction"); return; }

    aco_t* co = aco_create(main_co, child_stack, 0, co_unbounded, NULL);
    aco_resume(co);
    fprintf(stderr, "the co overflowed its stack and came back\n");
}

/* A co that recurses until it is `margin` bytes above the bottom of its
 * stack, yields there and unwinds. */
static void co_near_full(void) {
    const uintptr_t* stop_sp = aco_get_arg();
    recurse(0, *stop_sp);
    aco_exit();
}

static void test_near_full(aco_t* main_co, size_t sz, size_t margin) {
    aco_share_stack_t* s = aco_share_stack_new2(sz, 1);
    uintptr_t stop_sp = (uintptr_t)s->ptr + margin;
    aco_t* co = aco_create(main_co, s, 0, co_near_full, &stop_sp);
    lowest_sp = UINTPTR_MAX;
    aco_resume(co);                   /* yields at the bottom */
    ASSERT_EQ(co->is_end, 0);
    CHECK(lowest_sp < stop_sp);       /* it got there ... */
    CHECK(lowest_sp >= (uintptr_t)s->ptr);   /* ... and stayed inside */
    CHECK(co->save_stack.max_cpsz == 0);
    aco_resume(co);
    ASSERT_EQ(co->is_end, 1);
    aco_destroy(co);
    aco_share_stack_destroy(s);
}

int main(void) {
    int fails = 0;
    const size_t sizes[] = {16 * 1024, 64 * 1024 + 1, 0 /* 2 MiB */};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        char what[64];
        snprintf(what, sizeof(what), "overflow of a %zu-byte stack", sizes[i]);
        fails += aco_test_expect_signal(what, overflow_child, (void*)&sizes[i],
                                        SIGSEGV, NULL);
    }
    fails += aco_test_expect_signal("overflow, fault address",
                                    overflow_child_with_handler,
                                    (void*)&sizes[1], SIGSEGV,
                                    "fault in the guard page at 0x");
    ASSERT_EQ(fails, 0);

    /* A little less than the whole stack is fine. */
    aco_thread_init(NULL);
    aco_t* main_co = aco_create(NULL, NULL, 0, NULL, NULL);
    test_near_full(main_co, 16 * 1024, 1024);
    test_near_full(main_co, 64 * 1024, 1024);
    test_near_full(main_co, 0, 2048);
    aco_destroy(main_co);
    printf("test_guard_page: OK\n");
    return 0;
}
