/* hook_lib.h - what the real-library tests of the syscall hooks share
 * (rt/tests/hook_curl.c, hook_pq.c, hook_mariadb.c): a ticker co that
 * measures how long the thread's other cos wait, the count of hooked calls
 * (output/libhook_count.so, when preloaded), the thread's CPU time, and the
 * cancel of a co inside a library call, measured.
 */
#ifndef HOOK_LIB_H
#define HOOK_LIB_H

#define _GNU_SOURCE
#include "../aco_rt.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define HK_MS 1000000LL

#define HK_CHECK(cond, ...)                                                    \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                      \
            fputc('\n', stderr);                                               \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

/* This thread's CPU time, ns. */
static inline int64_t hk_cpu_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* This thread's hooked calls so far (libhook_count.so), or -1 without it. */
static inline int64_t hk_calls(void) {
    static int64_t (*f)(void);
    static int looked;
    if (!looked) {
        *(void**)&f = dlsym(RTLD_DEFAULT, "hook_count_calls");
        looked = 1;
    }
    return f ? f() : -1;
}

/* The calling thread's time waiting for a CPU so far (the kernel's run
 * queue, ns; 0 without it): /proc's schedstat opened (-1 if none) and read
 * with raw system calls, which no hook sees. */
static inline int hk_rq_open(void) {
    return (int)syscall(SYS_openat, AT_FDCWD, "/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
}

static inline int64_t hk_rq_ns(int fd) {
    char b[96];
    unsigned long long run, wait;
    long n = fd < 0 ? -1 : syscall(SYS_pread64, fd, b, sizeof b - 1, 0);
    if (n <= 0) return 0;
    b[n] = 0;
    return sscanf(b, "%llu %llu", &run, &wait) == 2 ? (int64_t)wait : 0;
}

/* The ticker: a co that sleeps 1 ms at a time (the runtime's sleep, which
 * no hook sees) until hk_ticker_stop, keeping the longest time it waited
 * past its wake-up: how long the thread's other cos were kept from
 * running.  With win set (capacity cap, the caller's memory), each tick
 * later than 1 ms too, in order, while they fit (nwin; lost counts those
 * that did not): due and woke (aco_rt_now), and from the sleep's start to
 * woke the time its thread waited for a CPU and the CPU time it ran. */
typedef struct {
    volatile int stop;
    int64_t max_late;           /* ns */
    int64_t ticks;
    int64_t (*win)[4];
    int cap, nwin, lost;
} hk_ticker_t;

static inline void hk_ticker_co(void* arg) {
    hk_ticker_t* t = (hk_ticker_t*)arg;
    int rq = t->win ? hk_rq_open() : -1;
    while (!t->stop) {
        int64_t cpu0 = hk_cpu_ns(), rq0 = hk_rq_ns(rq), due = aco_rt_now() + HK_MS;
        if (aco_rt_sleep_until(due) < 0) break;
        int64_t woke = aco_rt_now(), late = woke - due;
        if (late > t->max_late) t->max_late = late;
        if (t->win && late > HK_MS) {
            if (t->nwin < t->cap) {
                int64_t* w = t->win[t->nwin++];
                w[0] = due, w[1] = woke, w[2] = hk_rq_ns(rq) - rq0, w[3] = hk_cpu_ns() - cpu0;
            } else {
                t->lost++;
            }
        }
        t->ticks++;
    }
    if (rq >= 0) syscall(SYS_close, rq);
}

/* A cancel measured: the canceller co fills it (cancel_at .. returned_at
 * read by the victim's side). */
typedef struct {
    int64_t t_cancel, t_return;     /* aco_rt_now() */
    int64_t calls_cancel, calls_return;
    int64_t cpu_cancel, cpu_return;
} hk_cancel_t;

static inline void hk_cancel_mark(hk_cancel_t* c) {
    c->calls_cancel = hk_calls();
    c->cpu_cancel = hk_cpu_ns();
    c->t_cancel = aco_rt_now();
}

static inline void hk_return_mark(hk_cancel_t* c) {
    c->t_return = aco_rt_now();
    c->cpu_return = hk_cpu_ns();
    c->calls_return = hk_calls();
}

/* The bounds on a cancel inside a library call: the call returns
 * its library's error within 50 ms, the thread's other cos wait at most
 * 20 ms, the cancelled co makes at most 10 hooked calls (when counted)
 * and the thread spends at most 5 ms of CPU between cancel and return. */
static inline void hk_cancel_check(const char* what, const hk_cancel_t* c, const hk_ticker_t* t) {
    int64_t took = c->t_return - c->t_cancel, cpu = c->cpu_return - c->cpu_cancel;
    int64_t calls = c->calls_cancel < 0 ? -1 : c->calls_return - c->calls_cancel;
    printf("%s: cancel to return %.2f ms, %" PRId64 " hooked calls%s, %.2f ms CPU, "
           "other cos waited at most %.2f ms\n", what, took / 1e6, calls,
           calls < 0 ? " (not counted)" : "", cpu / 1e6, t->max_late / 1e6);
    HK_CHECK(took <= 50 * HK_MS, "%s returned %.2f ms after the cancel", what, took / 1e6);
    HK_CHECK(t->max_late <= 20 * HK_MS, "the other cos waited %.2f ms", t->max_late / 1e6);
    HK_CHECK(calls <= 10, "%" PRId64 " hooked calls after the cancel", calls);
    HK_CHECK(cpu <= 5 * HK_MS, "%.2f ms of CPU after the cancel", cpu / 1e6);
}

/* The program's mode, from its arguments: --hooks (the hooks must be
 * live: aco_rt_hooks_active) or --no-hooks (they must not). */
static inline void hk_mode_check(int want_hooks) {
    int live = aco_rt_hooks_active();
    HK_CHECK(live == want_hooks, "aco_rt_hooks_active() is %d, expected %d", live, want_hooks);
}

#endif
