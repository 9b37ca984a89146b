/*
 * test_overflow_report.c - aco_overflow_report_install(): a co that
 * overflows its share stack into the guard page dies by SIGSEGV (the signal
 * re-raised, not an abort) after one "aco: ..." line on stderr naming the
 * overflow, the co and the share stack (their addresses as %p prints them):
 * in the thread that installed it (before or after its aco_thread_init) and
 * in a thread initialised after the install.  Without the install the same
 * overflow dies by SIGSEGV with no "aco:" line; with it, a SIGSEGV that is
 * not in a guard page (a write to the zero page or to a PROT_NONE page of
 * the program's, in a co or in the main co) dies by SIGSEGV without any
 * overflow report.  A single frame that jumps past the stack's end (64 KiB
 * and 1 MiB, no probes; 3 MiB with -fstack-clash-protection's probes) gets
 * the report too: the guard reaches 1 MiB below the stack.
 *
 * Each case runs in a forked child; before resuming the co, the child
 * writes the addresses it expects to see to a second pipe.  ASan and TSan
 * builds run the children only with handle_segv=0 in their options (else
 * they only check that the install returns, and say so); clang's UBSan
 * needs handle_segv=0 too (the report hands every SIGSEGV on to the handler
 * installed before it: the sanitizer's would report it and exit 1).
 */
#include "aco_test.h"

#include <pthread.h>
#include <sys/resource.h>

static volatile long depth_limit = -1;  /* never reached */
static int info_fd = -1;                /* the child's end of the info pipe */

__attribute__((noinline)) static long recurse(long depth) {
    volatile unsigned char buf[aco_test_vla(256)];
    buf[0] = (unsigned char)depth;
    buf[255] = (unsigned char)(depth >> 8);
    if (depth == depth_limit) return buf[0];
    return recurse(depth + 1) + buf[0] + buf[255];
}

static void co_unbounded(void) {
    recurse(0);
    aco_exit();
}

/* ---- Frames that jump past the end of the stack ------------------------ */
/* A co first recurses until its stack has about 2 KiB left, then calls a
 * function with one large frame (a VLA: ASan's fake stack never takes one;
 * 64 KiB, 1 MiB: built with the default
 * flags, no probes, so the frame's first touch is its lowest byte, about
 * 62 KiB or 1 MiB - 2 KiB below the stack: a page-sized guard would be
 * stepped over); 3 MiB: built with -fstack-clash-protection's probes
 * (gcc's optimize attribute where gcc 12 probes: x86-64, i386, aarch64;
 * elsewhere the same probes by hand: a touch every 4 KiB from the top,
 * except under clang's ASan and TSan, whose calls in the frame, before any
 * touch of ours, push at its bottom: no probe by hand can come first). */
static uintptr_t near_end;              /* sp below this: stop recursing */
static void (*big_frame)(void);

__attribute__((noinline)) static void frame_64k(void) {
    volatile unsigned char buf[aco_test_vla(64 << 10)];
    buf[0] = 1;
    (void)buf[0];
}

__attribute__((noinline)) static void frame_1m(void) {
    volatile unsigned char buf[aco_test_vla(1 << 20)];
    buf[0] = 1;
    (void)buf[0];
}

#if defined(__GNUC__) && !defined(__clang__) && \
    (defined(__x86_64__) || defined(__i386__) || defined(__aarch64__))
__attribute__((noinline, optimize("stack-clash-protection"))) static void frame_3m(void) {
    volatile unsigned char buf[aco_test_vla(3 << 20)];
    buf[0] = 1;
    (void)buf[0];
}
#else
__attribute__((noinline)) static void frame_3m(void) {
    volatile unsigned char buf[aco_test_vla(3 << 20)];
    for (long i = (3L << 20) - 1; i >= 0; i -= 4096) buf[i] = 1;
    (void)buf[0];
}
#endif

__attribute__((noinline)) static long descend(long depth) {
    volatile unsigned char buf[128];
    buf[0] = (unsigned char)depth;
    if (aco_test_sp() < near_end) {
        big_frame();
        return buf[0];
    }
    return descend(depth + 1) + buf[0];
}

static void co_big_frame(void) {
    near_end = (uintptr_t)aco_get_co()->share_stack->ptr + 2048;
    descend(0);
    aco_exit();
}

/* Where co_write_bad writes: the zero page (not NULL itself, which
 * -fsanitize=null would catch first) or a PROT_NONE page of our own. */
static int* volatile bad_addr;

static void co_write_bad(void) {
    *bad_addr = 42;
    aco_exit();
}

static void* prot_none_page(void) {
    long pg = sysconf(_SC_PAGESIZE);
    void* p = mmap(NULL, (size_t)pg, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(p != MAP_FAILED);
    return p;
}

static void co_yield_then_exit(void) {
    aco_yield();
    aco_exit();
}

/* Tell the parent which co and share stack the report must name. */
static void announce(const aco_t* co, const aco_share_stack_t* s) {
    char line[128];
    int n = snprintf(line, sizeof(line), "%p %p\n", (const void*)co,
                     (const void*)s);
    CHECK(write(info_fd, line, (size_t)n) == n);
}

/* A world in the calling thread: a decoy co suspended on its own guarded
 * stack, then the co that runs fp on a 64 KiB guarded stack. */
static void run_in_new_world(aco_cofuncp_t fp, int init) {
    if (init) aco_thread_init(NULL);
    aco_t* m = aco_create(NULL, NULL, 0, NULL, NULL);
    aco_share_stack_t* decoy_stack = aco_share_stack_new(64 * 1024);
    aco_t* decoy = aco_create(m, decoy_stack, 0, co_yield_then_exit, NULL);
    aco_resume(decoy);
    aco_share_stack_t* s = aco_share_stack_new(64 * 1024);
    aco_t* co = aco_create(m, s, 0, fp, NULL);
    announce(co, s);
    aco_resume(co);
    fprintf(stderr, "the co came back\n");
}

enum kind {
    OVERFLOW_INSTALL_FIRST,     /* install, then aco_thread_init */
    OVERFLOW_INSTALL_LATER,     /* aco_thread_init, install, overflow */
    OVERFLOW_OTHER_THREAD,      /* install; a new thread overflows */
    OVERFLOW_NOT_INSTALLED,
    ZERO_PAGE_WRITE_IN_CO,      /* installed */
    PROT_NONE_WRITE_IN_CO,      /* installed: a page like a guard page */
    ZERO_PAGE_WRITE_IN_MAIN,    /* installed */
    FRAME_64K,                  /* installed, frames that jump the end */
    FRAME_1M,
    FRAME_3M_PROBED
};

static void* thread_overflow(void* arg) {
    (void)arg;
    run_in_new_world(co_unbounded, 1);
    return NULL;
}

static void child(enum kind k) {
    struct rlimit rl = {0, 0};
    setrlimit(RLIMIT_CORE, &rl);
    alarm(30);                  /* a hang is a failure, not a stuck test */
    switch (k) {
    case OVERFLOW_INSTALL_FIRST:
        aco_overflow_report_install();
        run_in_new_world(co_unbounded, 1);
        break;
    case OVERFLOW_INSTALL_LATER:
        aco_thread_init(NULL);
        aco_overflow_report_install();
        run_in_new_world(co_unbounded, 0);
        break;
    case OVERFLOW_OTHER_THREAD: {
        aco_overflow_report_install();
        pthread_t t;
        CHECK(pthread_create(&t, NULL, thread_overflow, NULL) == 0);
        pthread_join(t, NULL);
        break;
    }
    case OVERFLOW_NOT_INSTALLED:
        run_in_new_world(co_unbounded, 1);
        break;
    case ZERO_PAGE_WRITE_IN_CO:
        aco_overflow_report_install();
        bad_addr = (int*)(uintptr_t)64;
        run_in_new_world(co_write_bad, 1);
        break;
    case PROT_NONE_WRITE_IN_CO:
        aco_overflow_report_install();
        bad_addr = (int*)prot_none_page() + 8;
        run_in_new_world(co_write_bad, 1);
        break;
    case FRAME_64K:
    case FRAME_1M:
    case FRAME_3M_PROBED:
        aco_overflow_report_install();
        big_frame = k == FRAME_64K ? frame_64k : k == FRAME_1M ? frame_1m : frame_3m;
        run_in_new_world(co_big_frame, 1);
        break;
    case ZERO_PAGE_WRITE_IN_MAIN: {
        aco_overflow_report_install();
        aco_thread_init(NULL);
        aco_t* m = aco_create(NULL, NULL, 0, NULL, NULL);
        (void)m;
        bad_addr = (int*)(uintptr_t)64;
        *bad_addr = 7;
        break;
    }
    }
}

/* Run child(k); collect its stderr and info lines and its wait status. */
static int run(enum kind k, char* err, size_t errcap, char* info, size_t infocap) {
    int efd[2], ifd[2];
    CHECK(pipe(efd) == 0 && pipe(ifd) == 0);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        close(efd[0]);
        close(ifd[0]);
        dup2(efd[1], 2);
        close(efd[1]);
        info_fd = ifd[1];
        child(k);
        _exit(0);
    }
    close(efd[1]);
    close(ifd[1]);
    int fds[2] = {efd[0], ifd[0]};
    char* bufs[2] = {err, info};
    size_t caps[2] = {errcap, infocap};
    for (int i = 0; i < 2; i++) {   /* info is small: one after the other */
        size_t len = 0;
        char chunk[4096];
        ssize_t r;
        /* to the end: what does not fit is dropped, the child never blocks */
        while ((r = read(fds[i], chunk, sizeof(chunk))) != 0) {
            if (r < 0 && errno == EINTR) continue;
            if (r < 0) break;
            size_t n = (size_t)r < caps[i] - 1 - len ? (size_t)r : caps[i] - 1 - len;
            memcpy(bufs[i] + len, chunk, n);
            len += n;
        }
        bufs[i][len] = 0;
        close(fds[i]);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0) CHECK(errno == EINTR);
    return st;
}

/* Is there a line starting with "aco:" (containing word, if not NULL)?
 * (A sanitizer's report may name this file, test_overflow_report.c.) */
static int aco_line(const char* err, const char* word) {
    for (const char* p = err; p != NULL && *p; p = strchr(p, '\n')) {
        if (*p == '\n') p++;
        if (strncmp(p, "aco:", 4) != 0) continue;
        const char* end = strchr(p, '\n');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (word == NULL) return 1;
        for (size_t i = 0; i + strlen(word) <= n; i++)
            if (strncmp(p + i, word, strlen(word)) == 0) return 1;
    }
    return 0;
}

static int judge(const char* what, enum kind k, int want_report) {
    static char err[16384], info[256];
    int st = run(k, err, sizeof(err), info, sizeof(info));
    int ok = 1;
    if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGSEGV) {
        if (WIFSIGNALED(st))
            fprintf(stderr, "%s: killed by signal %d, expected SIGSEGV\n", what,
                    WTERMSIG(st));
        else
            fprintf(stderr, "%s: exited with %d, expected SIGSEGV\n", what,
                    WEXITSTATUS(st));
        ok = 0;
    }
    if (want_report) {
        char co[64], stk[64];
        CHECK(sscanf(info, "%63s %63s", co, stk) == 2);
        const char* need[3] = {"overflow", co, stk};
        for (int i = 0; i < 3; i++) {
            if (!aco_line(err, need[i])) {
                fprintf(stderr, "%s: no \"aco:\" line with \"%s\"\n", what,
                        need[i]);
                ok = 0;
            }
        }
    } else if (k == OVERFLOW_NOT_INSTALLED) {
        if (aco_line(err, NULL)) {
            fprintf(stderr, "%s: an \"aco:\" line without the install\n", what);
            ok = 0;
        }
    } else if (aco_line(err, "overflow")) {
        fprintf(stderr, "%s: a false overflow report\n", what);
        ok = 0;
    }
    if (!ok) fprintf(stderr, "%s: child's stderr:\n%s\n", what, err);
    return ok ? 0 : 1;
}

/* ASan and TSan handle SIGSEGV themselves unless told handle_segv=0. */
static int sanitizer_keeps_segv(void) {
    if (!aco__san_switch) return 0;
    const char* o = getenv(aco__asan ? "ASAN_OPTIONS" : "TSAN_OPTIONS");
    return o == NULL || strstr(o, "handle_segv=0") == NULL;
}

int main(void) {
    if (sanitizer_keeps_segv()) {
        /* The install must still be callable and harmless (in a child). */
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            aco_overflow_report_install();
            _exit(0);
        }
        int st;
        CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
        printf("test_overflow_report: ASan/TSan build without handle_segv=0 "
               "in %s: the SIGSEGV children are skipped (the sanitizer's "
               "handler would report them)\n",
               aco__asan ? "ASAN_OPTIONS" : "TSAN_OPTIONS");
        printf("test_overflow_report: OK (install only)\n");
        return 0;
    }
    int fails = 0;
    fails += judge("overflow, installed first", OVERFLOW_INSTALL_FIRST, 1);
    fails += judge("overflow, installed after aco_thread_init",
                   OVERFLOW_INSTALL_LATER, 1);
    fails += judge("overflow in a thread initialised after the install",
                   OVERFLOW_OTHER_THREAD, 1);
    fails += judge("overflow without the install", OVERFLOW_NOT_INSTALLED, 0);
    fails += judge("zero-page write in a co, installed", ZERO_PAGE_WRITE_IN_CO, 0);
    fails += judge("PROT_NONE page write in a co, installed",
                   PROT_NONE_WRITE_IN_CO, 0);
    fails += judge("zero-page write in the main co, installed",
                   ZERO_PAGE_WRITE_IN_MAIN, 0);
    fails += judge("a 64 KiB frame near the end of the stack", FRAME_64K, 1);
    fails += judge("a 1 MiB frame near the end of the stack", FRAME_1M, 1);
#if defined(__clang__) && aco__san_switch
    printf("test_overflow_report: the 3 MiB probed frame is left out under clang's "
           "ASan/TSan (clang has no per-function -fstack-clash-protection, and the "
           "sanitizer's calls touch the frame's bottom before any probe by hand)\n");
#else
    fails += judge("a 3 MiB frame, probed, near the end of the stack", FRAME_3M_PROBED, 1);
#endif
    ASSERT_EQ(fails, 0);
    printf("test_overflow_report: OK\n");
    return 0;
}
