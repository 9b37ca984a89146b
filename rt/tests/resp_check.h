/* resp_check.h - the checks test_resp.c and test_kv.c share: each counts
 * itself in `checks`, and the first that fails prints both sides (byte
 * strings escaped, the first 400 bytes) with its file:line and exits 1. */
#ifndef RESP_CHECK_H
#define RESP_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

#endif
