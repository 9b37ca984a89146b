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
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

/* The ticker: a co that sleeps 1 ms at a time (the runtime's sleep, which
 * no hook sees) until hk_ticker_stop, keeping the longest time it waited
 * past its wake-up: how long the thread's other cos were kept from
 * running. */
typedef struct {
    volatile int stop;
    int64_t max_late;           /* ns */
    int64_t ticks;
} hk_ticker_t;

static inline void hk_ticker_co(void* arg) {
    hk_ticker_t* t = (hk_ticker_t*)arg;
    while (!t->stop) {
        int64_t due = aco_rt_now() + HK_MS;
        if (aco_rt_sleep_until(due) < 0) break;
        int64_t late = aco_rt_now() - due;
        if (late > t->max_late) t->max_late = late;
        t->ticks++;
    }
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
