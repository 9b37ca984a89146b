/*
 * main.c - tests/cmake_consumer's program: a main co, one share stack and a
 * co that yields a few values; exit status 0 iff every value arrives in
 * order, the co ends and everything is freed.  It prints how aco.h was
 * configured for it (the macros aco::aco or libaco.pc passed on).
 *
 * ACO_CONSUMER_EXPECT_SHARE_FPU (0 or 1), when defined, makes the build fail
 * unless ACO_CONFIG_SHARE_FPU_MXCSR_ENV is defined exactly when it is 1.
 */
#include "aco.h"

#include <stdio.h>
#include <stdlib.h>

#ifdef ACO_CONSUMER_EXPECT_SHARE_FPU
#if ACO_CONSUMER_EXPECT_SHARE_FPU && !defined(ACO_CONFIG_SHARE_FPU_MXCSR_ENV)
#error "libaco was built with ACO_CONFIG_SHARE_FPU_MXCSR_ENV, but it did not reach this program"
#elif !ACO_CONSUMER_EXPECT_SHARE_FPU && defined(ACO_CONFIG_SHARE_FPU_MXCSR_ENV)
#error "ACO_CONFIG_SHARE_FPU_MXCSR_ENV reached this program, but libaco was built without it"
#endif
#endif

enum { COUNT = 5 };

static int failures;

static void expect(int ok, const char* what) {
    if (!ok) {
        fprintf(stderr, "aco_consumer: FAIL: %s\n", what);
        failures++;
    }
}

/* Yields COUNT values through the int its argument points to: 1, 4, 9, ... */
static void squares(void) {
    int* out = aco_get_arg();
    for (int i = 1; i <= COUNT; i++) {
        *out = i * i;
        aco_yield();
        /* main wrote -i while this co was away: its frame survived */
        expect(*out == -i, "main's answer reaches the co");
    }
    *out = 0;
    aco_exit();
}

int main(void) {
#ifdef ACO_CONFIG_SHARE_FPU_MXCSR_ENV
    const char* fpu = "shared";
#else
    const char* fpu = "per co";
#endif
#ifdef ACO_USE_VALGRIND
    const char* vg = "on";
#else
    const char* vg = "off";
#endif
    printf("aco_consumer: libaco %d.%d.%d, FP control state %s, valgrind support %s\n",
           ACO_VERSION_MAJOR, ACO_VERSION_MINOR, ACO_VERSION_PATCH, fpu, vg);

    aco_thread_init(NULL);
    aco_t* main_co = aco_create(NULL, NULL, 0, NULL, NULL);
    aco_share_stack_t* sstk = aco_share_stack_new(0);
    int value = -1;
    aco_t* co = aco_create(main_co, sstk, 0, squares, &value);
    expect(co != NULL && !co->is_end, "a new co");

    for (int i = 1; i <= COUNT; i++) {
        aco_resume(co);
        expect(value == i * i, "the co yields the next square");
        expect(!co->is_end, "the co is suspended, not ended");
        value = -i;
    }
    aco_resume(co);
    expect(value == 0 && co->is_end, "the co ends after its last value");

    aco_destroy(co);
    aco_share_stack_destroy(sstk);
    aco_destroy(main_co);
    if (failures) return 1;
    printf("aco_consumer: ok\n");
    return 0;
}
