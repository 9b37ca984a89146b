/* rt_test.h - what the runtime's tests share: checks that print both sides
 * and abort, the backends a test runs on, and small helpers.
 *
 * Backends.  A test runs its checks on every backend named in
 * $ACO_RT_TEST_BACKENDS (space-separated: uring, epoll; default
 * "uring epoll"), one after the other: test_on_backends() creates the
 * scheduler on each (opts.backend forced), runs the body and frees it
 * (test_backends_apart(): all at once, a process each).  A
 * named backend that cannot start is a failure, never a skip.  test_sched()
 * (the old way) makes a scheduler with the given opts as they are (AUTO:
 * $ACO_RT_BACKEND, else io_uring where it works).
 *
 * A watchdog (SIGALRM, $ACO_RT_TEST_WATCHDOG s, default 300) turns a hang
 * into a failure with aco_rt_dump's report.
 *
 * Checks.  CHECK(cond), CHECK_EQ/NE/LT/LE/GT/GE(a, b) (integers: both values
 * printed) abort with file:line and, inside test_on_backends, the backend.
 */
#ifndef RT_TEST_H
#define RT_TEST_H

#include "../aco_rt.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The backend being tested ("" outside test_on_backends). */
static const char* test_backend_label __attribute__((unused)) = "";
static int test_backend_id __attribute__((unused));

#define TEST_FAIL_AT(file, line, ...)                                         \
    do {                                                                      \
        fprintf(stderr, "%s:%d: %s%s%s", file, line,                          \
                test_backend_label[0] ? "[" : "", test_backend_label,         \
                test_backend_label[0] ? "] " : "");                           \
        fprintf(stderr, __VA_ARGS__);                                         \
        fputc('\n', stderr);                                                  \
        abort();                                                              \
    } while (0)

#define CHECK(cond)                                                           \
    do {                                                                      \
        if (!(cond)) TEST_FAIL_AT(__FILE__, __LINE__, "CHECK(%s) failed", #cond); \
    } while (0)

#define CHECK_OP_(a, op, b)                                                   \
    do {                                                                      \
        long long a_ = (long long)(a), b_ = (long long)(b);                   \
        if (!(a_ op b_))                                                      \
            TEST_FAIL_AT(__FILE__, __LINE__, "%s %s %s failed: %lld vs %lld", \
                         #a, #op, #b, a_, b_);                                \
    } while (0)

#define CHECK_EQ(a, b) CHECK_OP_(a, ==, b)
#define CHECK_NE(a, b) CHECK_OP_(a, !=, b)
#define CHECK_LT(a, b) CHECK_OP_(a, <, b)
#define CHECK_LE(a, b) CHECK_OP_(a, <=, b)
#define CHECK_GT(a, b) CHECK_OP_(a, >, b)
#define CHECK_GE(a, b) CHECK_OP_(a, >=, b)

#define MS (1000000LL)

/* SLOW: under memcheck or a sanitizer (stress loops run fewer rounds). */
#if defined(ACO_USE_VALGRIND) || defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SLOW 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define SLOW 1
#endif
#endif
#ifndef SLOW
#define SLOW 0
#endif
/* TEST_TSAN: 1 under TSan (gcc's and clang's), else 0. */
#if defined(__SANITIZE_THREAD__)
#define TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TEST_TSAN 1
#endif
#endif
#ifndef TEST_TSAN
#define TEST_TSAN 0
#endif
/* CO_MANY(n): n cos, a tenth of them under gcc's TSan.  Its runtime (gcc
 * 12's libtsan) zeroes half a MiB for each co's fiber as it makes it, about
 * 300 us (clang's: 3 us), and keeps it while the co lives: a test that
 * makes thousands of cos ran ten times as long there as under clang's. */
#if defined(__SANITIZE_THREAD__) && !defined(__clang__)
#define CO_MANY(n) ((n) / 10)
#else
#define CO_MANY(n) (n)
#endif
/* FEW: stress loops run fewer rounds: SLOW, an unoptimised build (-O0),
 * whose loops take several times as long and reach no path the -O2 builds'
 * do not, or ACO_RT_TEST_FEW defined (tests/check_rt_m32.sh). */
#if SLOW || !defined(__OPTIMIZE__) || defined(ACO_RT_TEST_FEW)
#define FEW 1
#else
#define FEW 0
#endif

/* A scheduler for the test with opts as given. */
static inline aco_rt_sched_t* test_sched(const aco_rt_opts_t* o) {
    aco_rt_sched_t* s = aco_rt_sched_new(o);
    if (s == NULL) {
        fprintf(stderr, "aco_rt_sched_new: %s\n", strerror(errno));
        exit(1);
    }
    return s;
}

/* Run s; a non-zero result is a failure (with the dump). */
static inline void test_run(aco_rt_sched_t* s) {
    int r = aco_rt_sched_run(s);
    if (r != 0) {
        fprintf(stderr, "%s%s%saco_rt_sched_run: %d (%s)\n",
                test_backend_label[0] ? "[" : "", test_backend_label,
                test_backend_label[0] ? "] " : "", r, strerror(-r));
        aco_rt_dump(s, 2);
        abort();
    }
}

/* The backends of $ACO_RT_TEST_BACKENDS into out[] (ACO_RT_BACKEND_*):
 * their number.  An unknown name fails the test. */
static inline int test_backends(int* out, int max) {
    const char* e = getenv("ACO_RT_TEST_BACKENDS");
    if (e == NULL || *e == '\0') e = "uring epoll";
    int n = 0;
    while (*e) {
        while (*e == ' ' || *e == '\t' || *e == ',') e++;
        if (!*e) break;
        size_t len = strcspn(e, " \t,");
        int b;
        if (len == 5 && strncmp(e, "uring", 5) == 0) b = ACO_RT_BACKEND_URING;
        else if (len == 5 && strncmp(e, "epoll", 5) == 0) b = ACO_RT_BACKEND_EPOLL;
        else {
            fprintf(stderr, "ACO_RT_TEST_BACKENDS: unknown backend '%.*s'\n", (int)len, e);
            abort();
        }
        if (n < max) out[n++] = b;
        e += len;
    }
    if (n == 0) {
        fprintf(stderr, "ACO_RT_TEST_BACKENDS names no backend\n");
        abort();
    }
    return n;
}

static inline const char* test_backend_str(int b) {
    return b == ACO_RT_BACKEND_URING ? "uring" : b == ACO_RT_BACKEND_EPOLL ? "epoll" : "auto";
}

/* A scheduler on backend b (opts from base, NULL: defaults): a backend that
 * cannot start fails the test. */
static inline aco_rt_sched_t* test_sched_on(int b, const aco_rt_opts_t* base) {
    aco_rt_opts_t o = {0};
    if (base) o = *base;
    o.backend = b;
    aco_rt_sched_t* s = aco_rt_sched_new(&o);
    if (s == NULL) {
        fprintf(stderr, "FAIL: backend %s cannot start: %s\n", test_backend_str(b),
                strerror(errno));
        abort();
    }
    if (strcmp(aco_rt_backend_name(s), test_backend_str(b)) != 0) {
        fprintf(stderr, "FAIL: asked for backend %s, got %s\n", test_backend_str(b),
                aco_rt_backend_name(s));
        abort();
    }
    return s;
}

/* A test that hangs (a lost wakeup) fails after a while, with the dump of
 * the thread's scheduler: $ACO_RT_TEST_WATCHDOG seconds (default 300). */
static inline void test_watchdog_fire(int sig) {
    (void)sig;
    static const char m[] = "test watchdog: no end in sight (a lost wakeup?); the scheduler:\n";
    ssize_t r = write(2, m, sizeof(m) - 1);
    (void)r;
    aco_rt_dump(NULL, 2);
    abort();
}
static inline void test_watchdog(void) {
    const char* e = getenv("ACO_RT_TEST_WATCHDOG");
    unsigned sec = e && *e ? (unsigned)atoi(e) : 300;
    signal(SIGALRM, test_watchdog_fire);
    alarm(sec);
}

/* A handler of the test's own, fn, run every us microseconds (no
 * SA_RESTART) on SIGURG from a POSIX timer aimed at the calling thread,
 * until test_ticks_off deletes the timer and puts back the handler it
 * found.  Not SIGALRM: the watchdog's alarm stays as it was, and a tick
 * still in flight at the end (valgrind and TSan hand a signal over at
 * points of their own) meets SIGURG's default, which ignores it, where
 * one of SIGALRM's once ran the watchdog's handler, its dump and abort
 * (CI, rt_test_signal_wait under memcheck). */
static struct sigaction test_ticks_sa;
static timer_t test_ticks_timer;
static inline void test_ticks_on(void (*fn)(int), long us) {
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = fn;
    sigemptyset(&sa.sa_mask);
    CHECK_EQ(sigaction(SIGURG, &sa, &test_ticks_sa), 0);
    struct sigevent ev;
    memset(&ev, 0, sizeof(ev));
    ev.sigev_signo = SIGURG;
#ifdef sigev_notify_thread_id
    ev.sigev_notify = SIGEV_THREAD_ID;
    ev.sigev_notify_thread_id = (pid_t)syscall(SYS_gettid);
#else
    ev.sigev_notify = SIGEV_SIGNAL;
#endif
    CHECK_EQ(timer_create(CLOCK_MONOTONIC, &ev, &test_ticks_timer), 0);
    struct timespec t = {us / 1000000, us % 1000000 * 1000};
    struct itimerspec it = {t, t};
    CHECK_EQ(timer_settime(test_ticks_timer, 0, &it, NULL), 0);
}
static inline void test_ticks_off(void) {
    CHECK_EQ(timer_delete(test_ticks_timer), 0);
    CHECK_EQ(sigaction(SIGURG, &test_ticks_sa, NULL), 0);
}

/* fn(backend) for each backend of $ACO_RT_TEST_BACKENDS, all at once, each
 * in a child process of its own: for tests whose time goes to waiting
 * (deadlines, pauses), not computing.  fn returns 0, or non-zero for a
 * failure it counted.  With one backend fn runs in this process (the suite
 * gives valgrind one backend: it would not follow a child).  Any child that
 * fails (a status other than 0, or a signal) fails the test once all have
 * ended; a child dies with this process, and has the watchdog (this
 * process's is off while it waits). */
static inline void test_backends_apart(int (*fn)(int backend)) {
    int bs[8];
    int n = test_backends(bs, 8);
    if (n == 1) {
        test_backend_id = bs[0];
        test_backend_label = test_backend_str(bs[0]);
        int r = fn(bs[0]);
        test_backend_label = "";
        if (r != 0) exit(1);
        return;
    }
    pid_t pids[8], parent = getpid();
    fflush(stdout);
    fflush(stderr);
    for (int i = 0; i < n; i++) {
        pids[i] = fork();
        if (pids[i] < 0) {
            fprintf(stderr, "FAIL: fork: %s\n", strerror(errno));
            abort();
        }
        if (pids[i] == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != parent) _exit(1);      /* it died before prctl */
            test_watchdog();
            test_backend_id = bs[i];
            test_backend_label = test_backend_str(bs[i]);
            /* exit, not _exit: LeakSanitizer checks at exit */
            exit(fn(bs[i]) != 0);
        }
    }
    /* The children's watchdogs report a hang (with their schedulers' dump);
     * this process's would fire first and kill them. */
    alarm(0);
    int bad = 0;
    for (int i = 0; i < n; i++) {
        int st;
        while (waitpid(pids[i], &st, 0) < 0)
            if (errno != EINTR) {
                fprintf(stderr, "FAIL: waitpid: %s\n", strerror(errno));
                abort();
            }
        if (WIFSIGNALED(st)) {
            fprintf(stderr, "FAIL [%s]: its process died of signal %d\n",
                    test_backend_str(bs[i]), WTERMSIG(st));
            bad++;
        } else if (WEXITSTATUS(st) != 0) {
            fprintf(stderr, "FAIL [%s]: its process exited with %d\n",
                    test_backend_str(bs[i]), WEXITSTATUS(st));
            bad++;
        }
    }
    if (bad) exit(1);
}

/* The scheduler test_on_backends made (a global: a child forked from the
 * body, whose exit memcheck checks for leaks, sees it held, whatever the
 * stack it copied happens to keep). */
static aco_rt_sched_t* test_cur_sched __attribute__((unused));

/* fn(b) for each backend b of $ACO_RT_TEST_BACKENDS, with
 * test_backend_id and test_backend_label set meanwhile: for bodies that
 * make their own schedulers or pools. */
static inline void test_each_backend(void (*fn)(int b)) {
    test_watchdog();
    int bs[8];
    int n = test_backends(bs, 8);
    for (int i = 0; i < n; i++) {
        test_backend_id = bs[i];
        test_backend_label = test_backend_str(bs[i]);
        fn(bs[i]);
        test_backend_label = "";
    }
}

/* body(s, arg) on each backend of $ACO_RT_TEST_BACKENDS, each on a fresh
 * scheduler made with base (NULL: defaults), freed after. */
static inline void test_on_backends(const aco_rt_opts_t* base,
                                    void (*body)(aco_rt_sched_t* s, void* arg), void* arg) {
    test_watchdog();
    int bs[8];
    int n = test_backends(bs, 8);
    for (int i = 0; i < n; i++) {
        test_backend_id = bs[i];
        test_backend_label = test_backend_str(bs[i]);
        aco_rt_sched_t* s = test_sched_on(bs[i], base);
        test_cur_sched = s;
        body(s, arg);
        test_cur_sched = NULL;
        aco_rt_sched_free(s);
        test_backend_label = "";
    }
}

/* body(p) on each backend of $ACO_RT_TEST_BACKENDS, p a fresh pool of
 * `threads` threads on it (every other option 0), freed after (0
 * required); then after() if not NULL, for what must outlive the pool. */
static inline void test_on_pools(unsigned threads, void (*body)(aco_rt_pool_t* p),
                                 void (*after)(void)) {
    test_watchdog();
    int bs[8];
    int n = test_backends(bs, 8);
    for (int i = 0; i < n; i++) {
        test_backend_id = bs[i];
        test_backend_label = test_backend_str(bs[i]);
        aco_rt_pool_opts_t o;
        memset(&o, 0, sizeof(o));
        o.threads = threads;
        o.sched.backend = bs[i];
        aco_rt_pool_t* p = aco_rt_pool_new(&o);
        CHECK(p != NULL);
        body(p);
        CHECK_EQ(aco_rt_pool_free(p), 0);
        if (after) after();
        test_backend_label = "";
    }
}

/* Spawn fn(arg) as a detached co of s, run s to the end (0 required). */
static inline void test_go(aco_rt_sched_t* s, aco_rt_fn_t fn, void* arg) {
    aco_rt_co_t* co = aco_rt_spawn(s, fn, arg);
    CHECK(co != NULL);
    CHECK_EQ(aco_rt_detach(co), 0);
    test_run(s);
}

/* Run fn(arg) in a child process: the signal that ended it (0 if it
 * exited; exit status in *status if status). */
static inline int test_in_child(void (*fn)(void*), void* arg, int* status) {
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        /* the expected crash needs no core file */
        struct rlimit rl = {0, 0};
        setrlimit(RLIMIT_CORE, &rl);
        fn(arg);
        _exit(0);
    }
    int st = 0;
    CHECK_EQ(waitpid(pid, &st, 0), pid);
    if (WIFSIGNALED(st)) return WTERMSIG(st);
    if (status) *status = WEXITSTATUS(st);
    return 0;
}

/* Checked mode's escapes (aco.h): fork; the child runs fn with its stderr
 * into a pipe and must die of SIGSEGV with every '|'-separated part of
 * needles in what it wrote.  0 if so, else 1 (and the child's stderr is
 * shown). */
static inline int test_expect_fault(const char* what, void (*fn)(void), const char* needles) {
    int p[2];
    CHECK(pipe(p) == 0);
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        struct rlimit rl = {0, 0};
        setrlimit(RLIMIT_CORE, &rl);
        alarm(60);          /* a hang dies of SIGALRM: the case fails */
        dup2(p[1], 2);
        close(p[0]);
        fn();
        _exit(0);
    }
    close(p[1]);
    static char buf[16384];
    size_t len = 0;
    ssize_t r;
    while (len < sizeof(buf) - 1 && (r = read(p[0], buf + len, sizeof(buf) - 1 - len)) != 0)
        if (r > 0) len += (size_t)r; else if (errno != EINTR) break;
    buf[len] = 0;
    close(p[0]);
    int st;
    while (waitpid(pid, &st, 0) < 0) CHECK(errno == EINTR);
    int ok = WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV;
    if (!ok) fprintf(stderr, "%s: child did not die of SIGSEGV (status %#x)\n", what, st);
    for (const char* n = needles; ok && *n;) {
        const char* bar = strchr(n, '|');
        size_t k = bar ? (size_t)(bar - n) : strlen(n);
        char part[128];
        snprintf(part, sizeof(part), "%.*s", (int)k, n);
        if (strstr(buf, part) == NULL) {
            fprintf(stderr, "%s: the report lacks \"%s\"\n", what, part);
            ok = 0;
        }
        n += k + (bar != NULL);
    }
    if (!ok) fprintf(stderr, "%s: child's stderr:\n%s\n", what, buf);
    return !ok;
}

/* Checked mode's escapes, the owner's side: a co that publishes 64 bytes
 * of its frames in test_parked_buf, parks (200 ms) while another co of its
 * share stack hands them on, and checks they are untouched.  Its frame is
 * the "test_buf_owner at" of the reports. */
static volatile unsigned char* volatile test_parked_buf __attribute__((unused));
__attribute__((noinline, unused)) static void test_buf_owner(void* arg) {
    (void)arg;
    volatile unsigned char buf[64];
    memset((void*)buf, 0xab, sizeof(buf));
    test_parked_buf = buf;
    aco_rt_sleep(200 * MS);
    for (size_t i = 0; i < sizeof(buf); i++) CHECK(buf[i] == 0xab);
}

/* A scheduler on backend b whose cos all share one share stack of 64 KiB
 * (checked mode's cases: a parked co's frames are another co's window). */
static inline aco_rt_sched_t* test_one_stack_sched(int b) {
    aco_rt_opts_t o;
    memset(&o, 0, sizeof(o));
    o.backend = b;
    o.share_stacks = 1;
    o.stack_size = 64 * 1024;
    aco_rt_sched_t* s = aco_rt_sched_new(&o);
    CHECK(s != NULL);
    return s;
}

/* Descriptors open in this process now (the entries of /proc/self/fd,
 * the one the look itself opens not counted). */
static inline int test_open_fds(void) {
    DIR* d = opendir("/proc/self/fd");
    CHECK(d != NULL);
    int n = 0;
    for (struct dirent* e; (e = readdir(d)) != NULL;) n += e->d_name[0] != '.';
    closedir(d);
    return n - 1;
}

/* Small deterministic PRNG (xorshift64*). */
static inline uint64_t test_rand(uint64_t* st) {
    uint64_t x = *st;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *st = x;
    return x * 0x2545F4914F6CDD1DULL;
}

/* A seccomp filter on this process (and what it forks): system call nr
 * fails with err from now on, as on a kernel or in a container that
 * refuses it.  0, or -1 where filters cannot be set. */
static inline int test_deny_syscall(int nr, int err) {
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nr, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (unsigned)err),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {(unsigned short)(sizeof(f) / sizeof(f[0])), f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -1;
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0 ? 0 : -1;
}

/* Raise RLIMIT_NOFILE to at least want (the hard limit too where allowed):
 * the soft limit reached. */
static inline long test_raise_nofile(long want) {
    struct rlimit rl;
    CHECK_EQ(getrlimit(RLIMIT_NOFILE, &rl), 0);
    if ((long)rl.rlim_cur >= want) return (long)rl.rlim_cur;
    if ((long)rl.rlim_max < want) {
        struct rlimit r2 = {(rlim_t)want, (rlim_t)want};
        if (setrlimit(RLIMIT_NOFILE, &r2) == 0) return want;
    }
    rl.rlim_cur = (long)rl.rlim_max < want ? rl.rlim_max : (rlim_t)want;
    CHECK_EQ(setrlimit(RLIMIT_NOFILE, &rl), 0);
    return (long)rl.rlim_cur;
}

#endif
