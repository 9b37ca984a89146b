/* resp_check.h - the checks test_resp.c and test_kv.c share: each counts
 * itself in `checks`, and the first that fails prints both sides (byte
 * strings escaped, the first 400 bytes) with its file:line and exits 1. */
#ifndef RESP_CHECK_H
#define RESP_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

static unsigned long checks;

static void dump(const char *what, const void *p, size_t n)
{
    const unsigned char *s = p;
    size_t i, show = n > 400 ? 400 : n;

    fprintf(stderr, "  %s (%zu bytes): \"", what, n);
    for (i = 0; i < show; i++) {
        if (s[i] == '\r')
            fputs("\\r", stderr);
        else if (s[i] == '\n')
            fputs("\\n", stderr);
        else if (s[i] == '\\' || s[i] == '"')
            fprintf(stderr, "\\%c", s[i]);
        else if (s[i] < 32 || s[i] >= 127)
            fprintf(stderr, "\\x%02x", s[i]);
        else
            fputc(s[i], stderr);
    }
    fprintf(stderr, "\"%s\n", show < n ? "..." : "");
}

#define FAIL_AT() fprintf(stderr, "%s:%d: ", __FILE__, __LINE__)

#define CHECK(cond)                                                          \
    do {                                                                     \
        checks++;                                                            \
        if (!(cond)) {                                                       \
            FAIL_AT();                                                       \
            fprintf(stderr, "CHECK(%s) failed\n", #cond);                    \
            exit(1);                                                         \
        }                                                                    \
    } while (0)

#define CHECK_INT(a, b)                                                      \
    do {                                                                     \
        long long a_ = (long long)(a), b_ = (long long)(b);                  \
        checks++;                                                            \
        if (a_ != b_) {                                                      \
            FAIL_AT();                                                       \
            fprintf(stderr, "%s == %s failed: %lld != %lld\n", #a, #b, a_,   \
                    b_);                                                     \
            exit(1);                                                         \
        }                                                                    \
    } while (0)

#define CHECK_MEM(p, n, q, m)                                                \
    do {                                                                     \
        const void *p_ = (p), *q_ = (q);                                     \
        size_t n_ = (n), m_ = (m);                                           \
        checks++;                                                            \
        if (n_ != m_ || (n_ && memcmp(p_, q_, n_) != 0)) {                   \
            FAIL_AT();                                                       \
            fprintf(stderr, "%s == %s failed\n", #p, #q);                    \
            dump("got", p_, n_);                                             \
            dump("want", q_, m_);                                            \
            exit(1);                                                         \
        }                                                                    \
    } while (0)

/* The random parts: a test defines RESP_CHECK_SEED (its default seed)
 * before including this; rng_state may be reseeded. */
static uint64_t rng_state = RESP_CHECK_SEED;

static uint64_t rnd(void)
{
    /* xorshift64* */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dULL;
}

static size_t rnd_below(size_t n)
{
    return n ? (size_t)(rnd() % n) : 0;
}

static double now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

#endif
