/*
 * aco_assert_override.h - short names for aco.h's hints and asserts.
 *
 * Copyright 2026 the libaco authors.  Apache License 2.0 (see LICENSE).
 *
 * Include it last, after every system header: it replaces the standard
 * assert() with aco_assert(), which is never compiled out (NDEBUG has no
 * effect) and prints the failed expression with file:line before aborting.
 * Leave it out of files that want the standard assert.
 */
#ifndef ACO_ASSERT_OVERRIDE_H
#define ACO_ASSERT_OVERRIDE_H

#include "aco.h"

/* Branch-prediction hints. */
#define likely(x)               aco_likely(x)
#define unlikely(x)             aco_unlikely(x)

/* assert(EX): abort with "aco: assertion failed: EX at file:line". */
#undef assert
#define assert(EX)              aco_assert(EX)

/* assert((ptr) != NULL). */
#define assertptr(ptr)          aco_assertptr(ptr)

/* Abort with "aco: out of memory: ..." unless the allocation succeeded. */
#define assertalloc_bool(b)     aco_assertalloc_bool(b)
#define assertalloc_ptr(ptr)    aco_assertalloc_ptr(ptr)

#endif /* ACO_ASSERT_OVERRIDE_H */
