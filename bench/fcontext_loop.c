/*
 * bench/fcontext_loop.c - an independent check of the benchmark's fcontext
 * figure: the plainest resume/yield loop of Boost.Context's fcontext, with
 * nothing of the benchmark's (no placements, no shared code), so that a
 * harness effect on the peer shows as a disagreement.  make.sh bench runs
 * it right after the benchmark and compares.
 *
 * Copyright 2026 the libaco authors.  Apache License 2.0 (see LICENSE).
 *
 *   fcontext_loop [CPU]   pinned to CPU (default: the last one allowed);
 *                         prints "fcontext_loop: <ns> ns per round trip"
 *                         (median of 9 runs of 2,000,000 round trips)
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fenv.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* Boost.Context's C-linkage entry points (libboost_context.a). */
typedef void* fctx_t;
typedef struct {
    fctx_t fctx;
    void* data;
} fctx_transfer_t;
fctx_transfer_t jump_fcontext(fctx_t to, void* vp);
fctx_t make_fcontext(void* sp, size_t size, void (*fn)(fctx_transfer_t));

#define STACK_SZ (128u << 10)   /* Boost's fixedsize_stack default */
#define ITERS 2000000
#define RUNS 9

static void body(fctx_transfer_t t) {
    for (;;) t = jump_fcontext(t.fctx, NULL);
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp(const void* a, const void* b) {
    uint64_t x = *(const uint64_t*)a, y = *(const uint64_t*)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char** argv) {
    cpu_set_t set;
    int cpu = -1;
    if (sched_getaffinity(0, sizeof(set), &set) == 0)
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &set)) cpu = c;
    if (argc > 1) cpu = atoi(argv[1]);
    if (cpu >= 0) {
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        if (sched_setaffinity(0, sizeof(set), &set) != 0) cpu = -1;
    }
    char* stack = malloc(STACK_SZ);     /* as Boost's fixedsize_stack */
    if (stack == NULL) {
        fprintf(stderr, "fcontext_loop: out of memory\n");
        return 1;
    }
    fctx_t c = make_fcontext(stack + STACK_SZ, STACK_SZ, body);
    c = jump_fcontext(c, NULL).fctx;
    uint64_t t[RUNS];
    for (int r = 0; r <= RUNS; r++) {
        /* both sides carry the whole MXCSR: start from equal flags */
        feclearexcept(FE_ALL_EXCEPT);
        uint64_t t0 = now_ns();
        for (int i = 0; i < ITERS; i++) c = jump_fcontext(c, NULL).fctx;
        if (r > 0) t[r - 1] = now_ns() - t0;    /* run 0 warms up */
    }
    qsort(t, RUNS, sizeof(t[0]), cmp);
    printf("fcontext_loop: %.2f ns per round trip (median of %d x %d, CPU %d)\n",
           (double)t[RUNS / 2] / ITERS, RUNS, ITERS, cpu);
    free(stack);
    return 0;
}
