/* hook_bb.h - what the black-box hook tests (test_hook_bb_*.c) share: a
 * call's result and errno as one value, checked against the raw system
 * call's (SAME) or a wanted one (IS), and whether a co runs now. */
#ifndef HOOK_BB_H
#define HOOK_BB_H

#include "rt_test.h"

typedef struct { long rc; int err; } res_t;
#define RES(expr) ({ errno = 0; long rc_ = (long)(expr); res_t r_ = {rc_, rc_ < 0 ? errno : 0}; r_; })
#define SAME(hooked, raw)                                                               \
    do {                                                                                \
        res_t h_ = (hooked), k_ = (raw);                                                \
        if (h_.rc != k_.rc || h_.err != k_.err)                                         \
            TEST_FAIL_AT(__FILE__, __LINE__, "%s: hooked %ld (%s) vs kernel %ld (%s)",  \
                         #hooked, h_.rc, strerror(h_.err), k_.rc, strerror(k_.err));    \
    } while (0)
#define IS(hooked, want_, err_)                                                         \
    do {                                                                                \
        res_t h_ = (hooked);                                                            \
        if (h_.rc != (long)(want_) || h_.err != (err_))                                 \
            TEST_FAIL_AT(__FILE__, __LINE__, "%s: %ld (%s), want %ld (%s)", #hooked,     \
                         h_.rc, strerror(h_.err), (long)(want_), strerror(err_));       \
    } while (0)

static inline int in_co(void) { return aco_rt_self() != NULL; }

#endif
