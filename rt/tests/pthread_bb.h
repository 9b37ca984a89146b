/* pthread_bb.h - what the black-box tests of the pthread-like face share
 * (test_pthread_bb_*.c), written from rt/aco_rt_pthread.h and aco_rt.h
 * alone: abstimes, a body run as a co on each backend, a body run by the
 * cos of a 2-thread pool, and a plain pthreads twin's helpers for the
 * comparisons with glibc. */
#ifndef PTHREAD_BB_H
#define PTHREAD_BB_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE     /* glibc's _np and clock calls, for the comparisons */
#endif

#include "rt_test.h"
#include "../aco_rt_pthread.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#if defined(__SANITIZE_ADDRESS__)
#define BB_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BB_ASAN 1
#endif
#endif
#ifndef BB_ASAN
#define BB_ASAN 0
#endif
#if BB_ASAN
#include <sanitizer/asan_interface.h>
#endif

/* Non-zero where a co's locals lie on a share stack: not in ASan's
 * use-after-return lane (its locals are on ASan's fake stack, the heap). */
static inline int bb_locals_on_share_stack(void) {
#if BB_ASAN
    return __asan_get_current_fake_stack() == NULL;
#else
    return 1;
#endif
}

/* An abstime ms milliseconds from now (negative: in the past) on clk. */
static inline struct timespec bb_abs(clockid_t clk, int64_t ms) {
    struct timespec t;
    clock_gettime(clk, &t);
    int64_t ns = (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec + ms * 1000000LL;
    t.tv_sec = ns / 1000000000LL;
    t.tv_nsec = ns % 1000000000LL;
    return t;
}

/* Bad abstimes: a tv_nsec out of [0, 1e9). */
static const struct timespec bb_bad_ns_hi = {0, 1000000000L};
static const struct timespec bb_bad_ns_lo = {0, -1};

static inline int64_t bb_mono_ns(void) { return aco_rt_now(); }
static inline int64_t bb_real_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* body() as a detached co on each backend's fresh scheduler, run to its end. */
static void (*bb_body_)(void);
static inline void bb_body_co_(void* arg) { (void)arg; bb_body_(); }
static inline void bb_body_on_(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    test_go(s, bb_body_co_, NULL);
}
static inline void bb_on_backends(void (*body)(void)) {
    bb_body_ = body;
    test_on_backends(NULL, bb_body_on_, NULL);
}

/* n cos of a 2-thread pool running fn(i) (i = 0..n-1, as (void*)(intptr_t)),
 * cos i even on thread 0, odd on thread 1; drained, then the pool freed. */
static inline void bb_on_pool(int n, void (*fn)(void*)) {
    aco_rt_pool_opts_t po;
    memset(&po, 0, sizeof(po));
    po.threads = 2;
    aco_rt_pool_t* p = aco_rt_pool_new(&po);
    CHECK(p != NULL);
    for (int i = 0; i < n; i++) {
        aco_rt_co_t* co = aco_rt_spawn(aco_rt_pool_sched(p, (unsigned)(i & 1)), fn,
                                       (void*)(intptr_t)i);
        CHECK(co != NULL);
        CHECK_EQ(aco_rt_detach(co), 0);
    }
    CHECK_EQ(aco_rt_pool_wait(p, ACO_RT_POOL_DRAIN, aco_rt_in_ms(60000)), 0);
    CHECK_EQ(aco_rt_pool_free(p), 0);
}

/* Wait (no sleep as synchronisation) until the plain thread tid is asleep
 * in the kernel: /proc/self/task/<tid>/stat says S. */
#include <sys/syscall.h>
static inline int bb_tid(void) { return (int)syscall(SYS_gettid); }
static inline void bb_wait_asleep(int tid) {
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
    for (;;) {
        FILE* f = fopen(path, "r");
        CHECK(f != NULL);
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = 0;
        char* rp = strrchr(buf, ')');
        CHECK(rp != NULL);
        if (rp[2] == 'S') return;
        sched_yield();
    }
}

#endif
