/*
 * test_resp.c - self-checking tests of apps/resp.c (buffer, replies, integer
 * helpers, request parser).  Exit status 0 means every check passed; the
 * first failed check prints both values and its file:line and exits 1.
 *
 *   gcc -std=gnu11 -O2 -g -Wall -Wextra -Werror -Iapps \
 *       apps/resp.c apps/tests/test_resp.c -o /tmp/test_resp && /tmp/test_resp
 *
 * RESP_TEST_SEED=n picks another seed for the random parts; RESP_FUZZ_MS=n
 * changes the fuzzing time budget (default 500 ms).
 */
#define _DEFAULT_SOURCE /* clock_gettime under -std=c11 too */
#include "resp.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RESP_CHECK_SEED 0x9d2c5680u
#include "resp_check.h"

#define CHECK_STR(s, lit) CHECK_MEM((s), strlen(s), (lit), strlen(lit))
/* The buffer's contents equal a string literal (which may hold NULs). */
#define CHECK_BUF(b, lit) CHECK_MEM((b)->ptr, (b)->len, (lit), sizeof(lit) - 1)

/* ---- small helpers ------------------------------------------------------ */


/* Append a multibulk command built from NUL-terminated strings. */
static void mb(resp_buf_t *b, int argc, const char *const *argv)
{
    int i;

    CHECK_INT(resp_add_array(b, argc), 0);
    for (i = 0; i < argc; i++)
        CHECK_INT(resp_add_bulk(b, argv[i], strlen(argv[i])), 0);
}

/* ---- buffer -------------------------------------------------------------- */

static void test_buf(void)
{
    resp_buf_t b = RESP_BUF_INIT;
    int i;

    CHECK_INT(resp_buf_append(&b, "", 0), 0);
    CHECK_INT(b.len, 0);
    CHECK_INT(resp_buf_append(&b, "hello", 5), 0);
    CHECK_BUF(&b, "hello");
    for (i = 0; i < 10000; i++)
        CHECK_INT(resp_buf_append(&b, "0123456789", 10), 0);
    CHECK_INT(b.len, 100005);
    CHECK(b.cap >= b.len);
    resp_buf_consume(&b, 100000);
    CHECK_BUF(&b, "56789");
    resp_buf_consume(&b, 3);
    CHECK_BUF(&b, "89");
    resp_buf_consume(&b, 99);
    CHECK_INT(b.len, 0);

    /* A reservation no allocator can meet fails without asking malloc, and
     * the failure sticks until resp_buf_clear(). */
    CHECK_INT(resp_buf_append(&b, "ab", 2), 0);
    CHECK_INT(resp_buf_reserve(&b, (size_t)PTRDIFF_MAX), -ENOMEM);
    CHECK_INT(b.oom, 1);
    CHECK_INT(resp_buf_append(&b, "c", 1), -ENOMEM);
    CHECK_INT(resp_add_ok(&b), -ENOMEM);
    CHECK_INT(resp_add_int(&b, 1), -ENOMEM);
    CHECK_INT(resp_add_bulk(&b, "x", 1), -ENOMEM);
    CHECK_INT(resp_add_null(&b), -ENOMEM);
    CHECK_INT(resp_add_array(&b, 1), -ENOMEM);
    CHECK_INT(resp_add_error(&b, "ERR", 3), -ENOMEM);
    CHECK_INT(resp_add_simple(&b, "OK", 2), -ENOMEM);
    CHECK_INT(resp_buf_reserve(&b, 0), -ENOMEM);
    CHECK_BUF(&b, "ab");
    resp_buf_clear(&b);
    CHECK_INT(b.oom, 0);
    CHECK_INT(resp_buf_append(&b, "c", 1), 0);
    CHECK_BUF(&b, "c");

    /* A payload so long that its framing would wrap size_t. */
    resp_buf_clear(&b);
    CHECK_INT(resp_add_bulk(&b, "x", SIZE_MAX - 3), -ENOMEM);
    CHECK_INT(b.len, 0);
    CHECK_INT(b.oom, 1);
    resp_buf_clear(&b);
    CHECK_INT(resp_add_simple(&b, "x", SIZE_MAX - 1), -ENOMEM);
    resp_buf_clear(&b);

    /* shrink frees only an empty buffer bigger than asked. */
    CHECK_INT(resp_buf_append(&b, "x", 1), 0);
    resp_buf_shrink(&b, 0);
    CHECK(b.ptr != NULL);
    resp_buf_consume(&b, 1);
    resp_buf_shrink(&b, 1 << 20);
    CHECK(b.ptr != NULL);
    resp_buf_shrink(&b, 16);
    CHECK(b.ptr == NULL && b.cap == 0);
    CHECK_INT(resp_buf_append(&b, "again", 5), 0);
    CHECK_BUF(&b, "again");
    resp_buf_free(&b);
    CHECK(b.ptr == NULL && b.len == 0 && b.cap == 0 && b.oom == 0);
}

/* ---- replies ------------------------------------------------------------- */

static void test_replies(void)
{
    resp_buf_t b = RESP_BUF_INIT;

    CHECK_INT(resp_add_ok(&b), 0);
    CHECK_BUF(&b, "+OK\r\n");
    resp_buf_clear(&b);
    CHECK_INT(resp_add_simple(&b, "PONG", 4), 0);
    CHECK_BUF(&b, "+PONG\r\n");
    resp_buf_clear(&b);
    CHECK_INT(resp_add_error(&b, "ERR bad\r\nthing\n", 15), 0);
    CHECK_BUF(&b, "-ERR bad  thing \r\n");
    resp_buf_clear(&b);
    CHECK_INT(resp_add_int(&b, 0), 0);
    CHECK_INT(resp_add_int(&b, -1), 0);
    CHECK_INT(resp_add_int(&b, LLONG_MAX), 0);
    CHECK_INT(resp_add_int(&b, LLONG_MIN), 0);
    CHECK_BUF(&b, ":0\r\n:-1\r\n:9223372036854775807\r\n"
                  ":-9223372036854775808\r\n");
    resp_buf_clear(&b);
    CHECK_INT(resp_add_bulk(&b, "a\0\r\nb", 5), 0);
    CHECK_INT(resp_add_bulk(&b, "", 0), 0);
    CHECK_INT(resp_add_bulk(&b, NULL, 0), 0);
    CHECK_BUF(&b, "$5\r\na\0\r\nb\r\n$0\r\n\r\n$0\r\n\r\n");
    resp_buf_clear(&b);
    CHECK_INT(resp_add_null(&b), 0);
    CHECK_INT(resp_add_array(&b, 3), 0);
    CHECK_INT(resp_add_array(&b, 0), 0);
    CHECK_INT(resp_add_array(&b, -7), 0);
    CHECK_BUF(&b, "$-1\r\n*3\r\n*0\r\n*-1\r\n");
    resp_buf_free(&b);
}

/* ---- integers ------------------------------------------------------------ */

/* redis's string2ll() accepts exactly the canonical decimal spelling of a
 * long long: what printf("%lld") prints back. */
static int ref_str2ll(const char *s, size_t n, long long *v)
{
    char tmp[64], back[32], *end;
    long long x;

    if (n == 0 || n >= sizeof(tmp))
        return 0;
    memcpy(tmp, s, n);
    tmp[n] = '\0';
    errno = 0;
    x = strtoll(tmp, &end, 10);
    if (errno || end != tmp + n)
        return 0;
    snprintf(back, sizeof(back), "%lld", x);
    if (strcmp(back, tmp) != 0)
        return 0;
    *v = x;
    return 1;
}

static void check_ll2str(long long v)
{
    char got[RESP_LLSTR_SIZE + 1], want[32];
    size_t n = resp_ll2str(got, v);
    long long back = 0;

    snprintf(want, sizeof(want), "%lld", v);
    CHECK_MEM(got, n, want, strlen(want));
    CHECK_INT(resp_str2ll(got, n, &back), 1);
    CHECK_INT(back, v);
}

static void test_integers(void)
{
    static const char *const cases[] = {
        "0", "1", "-1", "9", "10", "99", "100", "007", "00", "-0", "+1",
        " 1", "1 ", "-", "", "1a", "a1", "9223372036854775807",
        "9223372036854775808", "-9223372036854775808",
        "-9223372036854775809", "18446744073709551615",
        "18446744073709551616", "99999999999999999999",
        "-99999999999999999999", "123456789012345678901", ("12\0" "3"),
        "1.5", "0x10", "1e3", "--1", "-01"};
    static const char alphabet[] = "-0123456789+ x";
    long long v, w;
    size_t i, j, n;
    char s[24];
    int bits;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        n = (i == 26) ? 4 : strlen(cases[i]);
        v = w = 12345;
        CHECK_INT(resp_str2ll(cases[i], n, &v), ref_str2ll(cases[i], n, &w));
        CHECK_INT(v, w);
    }
    for (i = 0; i < 200000; i++) {
        n = rnd_below(22);
        for (j = 0; j < n; j++)
            s[j] = (rnd() & 3) ? alphabet[1 + rnd_below(10)]
                               : alphabet[rnd_below(sizeof(alphabet) - 1)];
        v = w = 777;
        CHECK_INT(resp_str2ll(s, n, &v), ref_str2ll(s, n, &w));
        CHECK_INT(v, w);
    }

    check_ll2str(0);
    check_ll2str(LLONG_MAX);
    check_ll2str(LLONG_MIN);
    check_ll2str(LLONG_MIN + 1);
    for (v = 1; v > 0 && v <= LLONG_MAX / 10; v *= 10) {
        check_ll2str(v);
        check_ll2str(v - 1);
        check_ll2str(v + 1);
        check_ll2str(-v);
        check_ll2str(-v + 1);
    }
    for (i = 0; i < 200000; i++) {
        bits = (int)rnd_below(64);
        v = (long long)(rnd() >> (63 - bits));
        check_ll2str(v);
        check_ll2str(-v);
    }
}

/* ---- parser: single calls ----------------------------------------------- */

typedef struct {
    const char *s;
    size_t n;
} want_arg;

/* Parse exactly one command that fills all of in[0..n) in one call. */
#define PARSE_ONE(p, lit, ...)                                               \
    do {                                                                     \
        static const want_arg w_[] = {__VA_ARGS__};                          \
        check_one((p), (lit), sizeof(lit) - 1, w_,                           \
                  (int)(sizeof(w_) / sizeof(w_[0])), __LINE__);              \
    } while (0)

#define A(lit) {lit, sizeof(lit) - 1}

static void check_one(resp_parser_t *p, const char *in, size_t n,
                      const want_arg *w, int wn, int line)
{
    size_t used = 12345;
    int r = resp_parse(p, in, n, &used), i;

    if (r != RESP_OK || used != n || p->argc != wn) {
        fprintf(stderr, "line %d: r=%d used=%zu/%zu argc=%d/%d err=%s\n",
                line, r, used, n, r == RESP_OK ? p->argc : -1, wn,
                resp_parser_error(p));
        dump("input", in, n);
    }
    CHECK_INT(r, RESP_OK);
    CHECK_INT(used, n);
    CHECK_INT(p->argc, wn);
    for (i = 0; i < wn; i++)
        CHECK_MEM(p->argv[i].ptr, p->argv[i].len, w[i].s, w[i].n);
}

/* One call on in[0..n) must fail with exactly msg. */
#define PARSE_ERR(p, lit, msg)                                               \
    check_err((p), (lit), sizeof(lit) - 1, (msg), __LINE__)

static void check_err(resp_parser_t *p, const char *in, size_t n,
                      const char *msg, int line)
{
    size_t used = 12345;
    int r = resp_parse(p, in, n, &used);

    if (r != RESP_EPROTO) {
        fprintf(stderr, "line %d: r=%d, wanted an error\n", line, r);
        dump("input", in, n);
    }
    CHECK_INT(r, RESP_EPROTO);
    CHECK_INT(used, 0);
    CHECK_STR(resp_parser_error(p), msg);
}

/* One call must say "need more", having consumed `skip` bytes. */
static void check_again(resp_parser_t *p, const char *in, size_t n,
                        size_t skip)
{
    size_t used = 12345;

    CHECK_INT(resp_parse(p, in, n, &used), RESP_AGAIN);
    CHECK_INT(used, skip);
    CHECK(resp_parser_need(p) > n - skip);
}

static void test_parse_basic(void)
{
    resp_parser_t p;
    size_t used, off;
    const char *in;
    int i;

    resp_parser_init(&p);
    PARSE_ONE(&p, "*1\r\n$4\r\nPING\r\n", A("PING"));
    PARSE_ONE(&p, "PING\r\n", A("PING"));
    PARSE_ONE(&p, "PING\n", A("PING"));
    PARSE_ONE(&p, "*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n", A("SET"),
              A("key"), A("value"));
    PARSE_ONE(&p, "*2\r\n$3\r\nGET\r\n$0\r\n\r\n", A("GET"), A(""));
    /* Binary safe: NUL, CR, LF inside bulk data. */
    PARSE_ONE(&p, "*3\r\n$3\r\nSET\r\n$5\r\na\0\r\nb\r\n$4\r\n\r\n\r\n\r\n",
              A("SET"), A("a\0\r\nb"), A("\r\n\r\n"));
    /* Empty commands before a command are consumed with it. */
    PARSE_ONE(&p, "\r\n\n   \r\n*0\r\n*-1\r\n*-9223372036854775808\r\nPING\r\n",
              A("PING"));
    /* Inline words and blanks: \v and \f are skipped between words, but
     * end none (redis 7.0 stores "v\f" here). */
    PARSE_ONE(&p, "  SET\tk \x0b v\x0c \r\n", A("SET"), A("k"), A("v\x0c"));
    PARSE_ONE(&p, "a\x0bb\r\n", A("a\x0bb"));
    PARSE_ONE(&p, "ECHO a\rb\r\n", A("ECHO"), A("a"), A("b"));
    PARSE_ONE(&p, "x\0y z\r\n", A("x\0y"), A("z"));

    /* Pointers into the caller's buffer, not copies. */
    in = "*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\n";
    CHECK_INT(resp_parse(&p, in, strlen(in), &used), RESP_OK);
    CHECK(p.argv[0].ptr == in + 8 && p.argv[1].ptr == in + 18);
    in = "GET key\r\n";
    CHECK_INT(resp_parse(&p, in, strlen(in), &used), RESP_OK);
    CHECK(p.argv[0].ptr == in && p.argv[1].ptr == in + 4);

    /* Pipelined: one command per call, in order. */
    in = "*1\r\n$4\r\nPING\r\nECHO x\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"
         "PING\r\n*1\r\n$4\r\nQU";
    off = 0;
    CHECK_INT(resp_parse(&p, in + off, strlen(in) - off, &used), RESP_OK);
    CHECK_INT(used, 14);
    CHECK_MEM(p.argv[0].ptr, p.argv[0].len, "PING", 4);
    off += used;
    CHECK_INT(resp_parse(&p, in + off, strlen(in) - off, &used), RESP_OK);
    CHECK_INT(p.argc, 2);
    CHECK_MEM(p.argv[1].ptr, p.argv[1].len, "x", 1);
    off += used;
    CHECK_INT(resp_parse(&p, in + off, strlen(in) - off, &used), RESP_OK);
    CHECK_MEM(p.argv[1].ptr, p.argv[1].len, "k", 1);
    off += used;
    CHECK_INT(resp_parse(&p, in + off, strlen(in) - off, &used), RESP_OK);
    CHECK_INT(p.argc, 1);
    off += used;
    CHECK_INT(resp_parse(&p, in + off, strlen(in) - off, &used), RESP_AGAIN);
    CHECK_INT(used, 0);
    resp_parser_reset(&p);

    /* Empty input (even a NULL buffer), and only empty commands. */
    check_again(&p, "", 0, 0);
    check_again(&p, NULL, 0, 0);
    check_again(&p, "\r\n*0\r\n", 6, 6);
    check_again(&p, "*0\r\n*1\r\n$4\r\nPI", 14, 4);
    /* ... whose progress is then kept relative to the pending command. */
    in = "*1\r\n$4\r\nPING\r\n";
    CHECK_INT(resp_parse(&p, in, strlen(in), &used), RESP_OK);
    CHECK_INT(used, strlen(in));

    /* The need hint: a bulk header tells the whole size. */
    in = "*2\r\n$4\r\nECHO\r\n$100\r\nabc";
    CHECK_INT(resp_parse(&p, in, strlen(in), &used), RESP_AGAIN);
    CHECK_INT(resp_parser_need(&p), 20 + 100 + 2);
    CHECK_INT(resp_parse(&p, in, 5, &used), RESP_AGAIN); /* fewer bytes */
    CHECK_INT(resp_parser_need(&p), 6);
    resp_parser_reset(&p);
    CHECK_INT(resp_parse(&p, "PIN", 3, &used), RESP_AGAIN);
    CHECK_INT(resp_parser_need(&p), 4);

    /* Many arguments: argv moves to the heap and back. */
    for (i = 0; i < 3; i++) {
        resp_buf_t b = RESP_BUF_INIT;
        const char *words[1000];
        char tmp[1000][16];
        int j, n = i == 1 ? 3 : 1000 - i * 100;

        for (j = 0; j < n; j++) {
            snprintf(tmp[j], sizeof(tmp[j]), "w%d", j & 0xffff);
            words[j] = tmp[j];
        }
        mb(&b, n, words);
        CHECK_INT(resp_parse(&p, b.ptr, b.len, &used), RESP_OK);
        CHECK_INT(p.argc, n);
        for (j = 0; j < n; j++)
            CHECK_MEM(p.argv[j].ptr, p.argv[j].len, tmp[j], strlen(tmp[j]));
        /* Same words inline. */
        resp_buf_clear(&b);
        for (j = 0; j < n; j++) {
            CHECK_INT(resp_buf_append(&b, tmp[j], strlen(tmp[j])), 0);
            CHECK_INT(resp_buf_append(&b, " ", 1), 0);
        }
        CHECK_INT(resp_buf_append(&b, "\r\n", 2), 0);
        CHECK_INT(resp_parse(&p, b.ptr, b.len, &used), RESP_OK);
        CHECK_INT(p.argc, n);
        for (j = 0; j < n; j++)
            CHECK_MEM(p.argv[j].ptr, p.argv[j].len, tmp[j], strlen(tmp[j]));
        resp_buf_free(&b);
    }
    resp_parser_free(&p);
}

static void test_parse_inline_quotes(void)
{
    resp_parser_t p;

    resp_parser_init(&p);
    PARSE_ONE(&p, "SET \"a b\" 'c d'\r\n", A("SET"), A("a b"), A("c d"));
    PARSE_ONE(&p, "ECHO \"\\x41\\x4a\\x4A\\n\\r\\t\\b\\a\\\"\\\\\\q\"\r\n",
              A("ECHO"), A("AJJ\n\r\t\b\a\"\\q"));
    PARSE_ONE(&p, "ECHO \"\\x00\\xff\"\r\n", A("ECHO"), A("\0\xff"));
    PARSE_ONE(&p, "ECHO \"a\\x4\"\r\n", A("ECHO"), A("ax4"));
    PARSE_ONE(&p, "ECHO \"\\xZZ\"\r\n", A("ECHO"), A("xZZ"));
    PARSE_ONE(&p, "ECHO 'a\\nb'\r\n", A("ECHO"), A("a\\nb"));
    PARSE_ONE(&p, "ECHO 'it\\'s' \"\"\r\n", A("ECHO"), A("it's"), A(""));
    PARSE_ONE(&p, "ECHO '' x\r\n", A("ECHO"), A(""), A("x"));
    /* A quote inside a word opens a quoted part of the same word. */
    PARSE_ONE(&p, "ECHO foo\"bar baz\" q'x y'\r\n", A("ECHO"),
              A("foobar baz"), A("qx y"));
    PARSE_ONE(&p, "\"a\"\t'b'\r\n", A("a"), A("b"));
    PARSE_ONE(&p, "ECHO \"a\\\"\"\n", A("ECHO"), A("a\""));
    /* Several quoted words keep distinct scratch contents. */
    PARSE_ONE(&p, "\"1\" \"22\" plain \"333\" '4444'\r\n", A("1"), A("22"),
              A("plain"), A("333"), A("4444"));
    /* A '\r' not before the '\n' is a blank, even inside quotes it is data. */
    PARSE_ONE(&p, "ECHO \"a\rb\"\r\n", A("ECHO"), A("a\rb"));

    PARSE_ERR(&p, "ECHO \"abc\r\n", "Protocol error: unbalanced quotes in request");
    PARSE_ERR(&p, "ECHO \"a\"b\r\n", "Protocol error: unbalanced quotes in request");
    PARSE_ERR(&p, "ECHO a\"b c\"d\r\n", "Protocol error: unbalanced quotes in request");
    PARSE_ERR(&p, "ECHO 'abc\r\n", "Protocol error: unbalanced quotes in request");
    PARSE_ERR(&p, "ECHO 'a'b\r\n", "Protocol error: unbalanced quotes in request");
    PARSE_ERR(&p, "ECHO \"ab\\\"\r\n", "Protocol error: unbalanced quotes in request");
    PARSE_ERR(&p, "ECHO \"ab\\\r\n", "Protocol error: unbalanced quotes in request");
    PARSE_ERR(&p, "ECHO 'ab\\'\r\n", "Protocol error: unbalanced quotes in request");
    PARSE_ERR(&p, "\"\n", "Protocol error: unbalanced quotes in request");
    /* The parser is usable again after an error. */
    PARSE_ONE(&p, "PING\r\n", A("PING"));
    resp_parser_free(&p);
}

static void test_parse_errors(void)
{
    resp_parser_t p;
    size_t used;

    resp_parser_init(&p);
    PARSE_ERR(&p, "*x\r\n", "Protocol error: invalid multibulk length");
    PARSE_ERR(&p, "*\r\n", "Protocol error: invalid multibulk length");
    PARSE_ERR(&p, "*-\r\n", "Protocol error: invalid multibulk length");
    PARSE_ERR(&p, "*-0\r\n", "Protocol error: invalid multibulk length");
    PARSE_ERR(&p, "*00\r\n", "Protocol error: invalid multibulk length");
    PARSE_ERR(&p, "*01\r\n", "Protocol error: invalid multibulk length");
    PARSE_ERR(&p, "*+1\r\n", "Protocol error: invalid multibulk length");
    PARSE_ERR(&p, "* 1\r\n", "Protocol error: invalid multibulk length");
    PARSE_ERR(&p, "*1 \r\n", "Protocol error: invalid multibulk length");
    PARSE_ERR(&p, "*1\rx", "Protocol error: invalid multibulk length");
    PARSE_ERR(&p, "*1\n", "Protocol error: invalid multibulk length");
    PARSE_ERR(&p, "*9223372036854775807\r\n",
              "Protocol error: invalid multibulk length");
    PARSE_ERR(&p, "*9223372036854775808\r\n",
              "Protocol error: invalid multibulk length");
    PARSE_ERR(&p, "*-9223372036854775809\r\n",
              "Protocol error: invalid multibulk length");
    /* 20 digits are rejected before any '\r' shows up. */
    PARSE_ERR(&p, "*11111111111111111111",
              "Protocol error: invalid multibulk length");
    PARSE_ERR(&p, "*1\r\n$-1\r\n", "Protocol error: invalid bulk length");
    PARSE_ERR(&p, "*1\r\n$-0\r\n", "Protocol error: invalid bulk length");
    PARSE_ERR(&p, "*1\r\n$04\r\nPING\r\n", "Protocol error: invalid bulk length");
    PARSE_ERR(&p, "*1\r\n$+4\r\nPING\r\n", "Protocol error: invalid bulk length");
    PARSE_ERR(&p, "*1\r\n$\r\n", "Protocol error: invalid bulk length");
    PARSE_ERR(&p, "*1\r\n$4x\r\n", "Protocol error: invalid bulk length");
    PARSE_ERR(&p, "*1\r\n$4\r\r", "Protocol error: invalid bulk length");
    PARSE_ERR(&p, "*1\r\n$9999999999999999999\r\n",
              "Protocol error: invalid bulk length");
    PARSE_ERR(&p, "*1\r\nx3\r\n", "Protocol error: expected '$', got 'x'");
    PARSE_ERR(&p, "*2\r\n$1\r\na\r\n:3\r\n", "Protocol error: expected '$', got ':'");
    PARSE_ERR(&p, "*1\r\n\r3\r\n", "Protocol error: expected '$', got ' '");
    PARSE_ERR(&p, "*1\r\n\n", "Protocol error: expected '$', got ' '");
    PARSE_ERR(&p, "*1\r\n\0", "Protocol error: expected '$', got ' '");
    PARSE_ERR(&p, "*1\r\n\xff", "Protocol error: expected '$', got '\xff'");
    PARSE_ERR(&p, "*1\r\n$4\r\nPINGxx",
              "Protocol error: bulk data not terminated by CRLF");
    PARSE_ERR(&p, "*1\r\n$4\r\nPING\rx",
              "Protocol error: bulk data not terminated by CRLF");
    PARSE_ERR(&p, "*1\r\n$4\r\nPING\n\r",
              "Protocol error: bulk data not terminated by CRLF");
    /* An error in a later pipelined command: earlier ones come out first. */
    CHECK_INT(resp_parse(&p, "PING\r\n*1\r\n$x\r\n", 15, &used), RESP_OK);
    CHECK_INT(used, 6);
    PARSE_ERR(&p, "*1\r\n$x\r\n", "Protocol error: invalid bulk length");
    /* Errors forget the partial command; the parser starts afresh. */
    CHECK_INT(resp_parse(&p, "*2\r\n$1\r\na\r\n", 11, &used), RESP_AGAIN);
    PARSE_ERR(&p, "*2\r\n$1\r\na\r\n!", "Protocol error: expected '$', got '!'");
    PARSE_ONE(&p, "*1\r\n$1\r\nb\r\n", A("b"));
    /* resp_parser_reset forgets a partial command too. */
    CHECK_INT(resp_parse(&p, "*2\r\n$1\r\na\r\n", 11, &used), RESP_AGAIN);
    resp_parser_reset(&p);
    PARSE_ONE(&p, "PING\r\n", A("PING"));
    resp_parser_free(&p);
}

/* ---- parser out of memory -------------------------------------------------- */

typedef struct {
    long budget;        /* allocations that may still succeed; < 0: any */
    long live;
} fail_alloc_t;

static void *fail_alloc(void *ud, void *ptr, size_t size)
{
    fail_alloc_t *f = ud;
    void *q;

    if (size == 0) {
        f->live -= ptr != NULL;
        free(ptr);
        return NULL;
    }
    if (f->budget == 0)
        return NULL;
    if (f->budget > 0)
        f->budget--;
    q = realloc(ptr, size);
    f->live += q && !ptr;
    return q;
}

static void test_parse_oom(void)
{
    fail_alloc_t f = {0, 0};
    resp_buf_t mbk = RESP_BUF_INIT, inl = RESP_BUF_INIT;
    static const char quoted[] = "ECHO \"a b\"\r\n";
    resp_parser_t p;
    size_t used;
    int i;

    CHECK_INT(resp_add_array(&mbk, 40), 0);
    for (i = 0; i < 40; i++) {
        CHECK_INT(resp_add_bulk(&mbk, "w", 1), 0);
        CHECK_INT(resp_buf_append(&inl, "w ", 2), 0);
    }
    CHECK_INT(resp_buf_append(&inl, "\r\n", 2), 0);

    resp_parser_init(&p);
    resp_parser_set_alloc(&p, fail_alloc, &f);
    /* 16 arguments need no memory. */
    PARSE_ONE(&p, "a b c d e f g h i j k l m n o p\r\n", A("a"), A("b"), A("c"),
              A("d"), A("e"), A("f"), A("g"), A("h"), A("i"), A("j"), A("k"),
              A("l"), A("m"), A("n"), A("o"), A("p"));
    CHECK_INT(resp_parse(&p, mbk.ptr, mbk.len, &used), RESP_ENOMEM);
    CHECK_STR(resp_parser_error(&p), "out of memory");
    CHECK_INT(used, 0);
    CHECK_INT(resp_parse(&p, inl.ptr, inl.len, &used), RESP_ENOMEM);
    CHECK_INT(resp_parse(&p, quoted, sizeof(quoted) - 1, &used), RESP_ENOMEM);
    /* Growth that fails half way (the second doubling). */
    f.budget = 1;
    CHECK_INT(resp_parse(&p, mbk.ptr, mbk.len, &used), RESP_ENOMEM);
    /* The scratch area is granted but argv cannot grow for quoted words. */
    resp_parser_free(&p);
    resp_parser_init(&p);
    resp_parser_set_alloc(&p, fail_alloc, &f);
    f.budget = 1;
    {
        static const char many[] = "'1' '2' '3' '4' '5' '6' '7' '8' '9' '10' "
                                   "'11' '12' '13' '14' '15' '16' '17'\n";

        CHECK_INT(resp_parse(&p, many, sizeof(many) - 1, &used), RESP_ENOMEM);
    }
    /* With memory, the same inputs parse, and memory is kept for reuse. */
    f.budget = -1;
    CHECK_INT(resp_parse(&p, mbk.ptr, mbk.len, &used), RESP_OK);
    CHECK_INT(p.argc, 40);
    CHECK_INT(resp_parse(&p, inl.ptr, inl.len, &used), RESP_OK);
    CHECK_INT(p.argc, 40);
    PARSE_ONE(&p, "ECHO \"a b\"\r\n", A("ECHO"), A("a b"));
    f.budget = 0;
    CHECK_INT(resp_parse(&p, mbk.ptr, mbk.len, &used), RESP_OK);
    PARSE_ONE(&p, "ECHO \"a b\"\r\n", A("ECHO"), A("a b"));
    CHECK(f.live > 0);
    resp_parser_free(&p);
    CHECK_INT(f.live, 0);
    resp_buf_free(&mbk);
    resp_buf_free(&inl);
}

/* resp_parser_shrink: between commands the argv and scratch memory of a big
 * command go (aco_resp's idle connections once kept 16 MiB each after a
 * million arguments); in the middle of one, nothing does. */
static void test_parse_shrink(void)
{
    fail_alloc_t f = {-1, 0};
    resp_buf_t mbk = RESP_BUF_INIT;
    resp_parser_t p;
    size_t used;
    int i;

    CHECK_INT(resp_add_array(&mbk, 40), 0);
    for (i = 0; i < 40; i++)
        CHECK_INT(resp_add_bulk(&mbk, "w", 1), 0);
    resp_parser_init(&p);
    resp_parser_set_alloc(&p, fail_alloc, &f);
    CHECK_INT(resp_parse(&p, mbk.ptr, mbk.len, &used), RESP_OK);
    PARSE_ONE(&p, "ECHO \"a b\"\r\n", A("ECHO"), A("a b"));
    CHECK_INT(f.live, 2);
    resp_parser_shrink(&p, 40 * sizeof(resp_arg_t));  /* within keep: kept */
    CHECK_INT(f.live, 2);
    /* Half a big command: its argv stays, and the rest completes it. */
    CHECK_INT(resp_parse(&p, mbk.ptr, mbk.len - 5, &used), RESP_AGAIN);
    resp_parser_shrink(&p, 0);
    CHECK_INT(f.live, 2);
    CHECK_INT(resp_parse(&p, mbk.ptr, mbk.len, &used), RESP_OK);
    CHECK_INT(p.argc, 40);
    CHECK_MEM(p.argv[39].ptr, p.argv[39].len, "w", 1);
    resp_parser_shrink(&p, 0);
    CHECK_INT(f.live, 0);
    /* and the parser goes on, growing again */
    CHECK_INT(resp_parse(&p, mbk.ptr, mbk.len, &used), RESP_OK);
    CHECK_INT(p.argc, 40);
    PARSE_ONE(&p, "ECHO \"a b\"\r\n", A("ECHO"), A("a b"));
    resp_parser_free(&p);
    CHECK_INT(f.live, 0);
    resp_buf_free(&mbk);
}

/* ---- limits --------------------------------------------------------------- */

static void test_limits(void)
{
    resp_parser_t p;
    resp_buf_t b = RESP_BUF_INIT;
    size_t used, off, i, total;
    char hdr[64];
    int n;

    resp_parser_init(&p);

    /* Multibulk count: at the limit (a real command of 1048576 empty
     * arguments), and one past. */
    n = snprintf(hdr, sizeof(hdr), "*%ld\r\n", RESP_MAX_MULTIBULK);
    CHECK_INT(resp_buf_append(&b, hdr, (size_t)n), 0);
    for (i = 0; i < (size_t)RESP_MAX_MULTIBULK; i++)
        CHECK_INT(resp_buf_append(&b, "$0\r\n\r\n", 6), 0);
    CHECK_INT(resp_parse(&p, b.ptr, b.len, &used), RESP_OK);
    CHECK_INT(used, b.len);
    CHECK_INT(p.argc, RESP_MAX_MULTIBULK);
    CHECK(p.argv[RESP_MAX_MULTIBULK - 1].len == 0);
    /* The same in 1 MiB pieces, resuming each time. */
    total = b.len;
    for (off = 1 << 20;; off += 1 << 20) {
        if (off > total)
            off = total;
        n = resp_parse(&p, b.ptr, off, &used);
        if (off == total)
            break;
        CHECK_INT(n, RESP_AGAIN);
        CHECK_INT(used, 0);
    }
    CHECK_INT(n, RESP_OK);
    CHECK_INT(p.argc, RESP_MAX_MULTIBULK);
    CHECK(p.argv[0].ptr == b.ptr + (size_t)snprintf(hdr, sizeof(hdr), "*%ld\r\n$0\r\n", RESP_MAX_MULTIBULK));
    n = snprintf(hdr, sizeof(hdr), "*%ld\r\n", RESP_MAX_MULTIBULK + 1);
    check_err(&p, hdr, (size_t)n, "Protocol error: invalid multibulk length",
              __LINE__);

    /* Bulk length: the limit is accepted (and announced through need), one
     * more is not. */
    n = snprintf(hdr, sizeof(hdr), "*1\r\n$%ld\r\n", RESP_MAX_BULK);
    CHECK_INT(resp_parse(&p, hdr, (size_t)n, &used), RESP_AGAIN);
    CHECK_INT(resp_parser_need(&p), (size_t)n + RESP_MAX_BULK + 2);
    resp_parser_reset(&p);
    n = snprintf(hdr, sizeof(hdr), "*1\r\n$%ld\r\n", RESP_MAX_BULK + 1);
    check_err(&p, hdr, (size_t)n, "Protocol error: invalid bulk length",
              __LINE__);

    /* Inline line: exactly the limit, with "\r\n" or "\n"; one more byte. */
    resp_buf_clear(&b);
    CHECK_INT(resp_buf_append(&b, "ECHO ", 5), 0);
    while (b.len < (size_t)RESP_MAX_INLINE)
        CHECK_INT(resp_buf_append(&b, "a", 1), 0);
    CHECK_INT(resp_buf_append(&b, "\r\n", 2), 0);
    CHECK_INT(resp_parse(&p, b.ptr, b.len, &used), RESP_OK);
    CHECK_INT(used, RESP_MAX_INLINE + 2);
    CHECK_INT(p.argv[1].len, RESP_MAX_INLINE - 5);
    /* Without the '\n' yet: the '\r' may still end the line. */
    CHECK_INT(resp_parse(&p, b.ptr, b.len - 1, &used), RESP_AGAIN);
    CHECK_INT(resp_parse(&p, b.ptr, b.len, &used), RESP_OK);
    b.ptr[b.len - 2] = '\n';
    CHECK_INT(resp_parse(&p, b.ptr, b.len - 1, &used), RESP_OK);
    CHECK_INT(used, RESP_MAX_INLINE + 1);
    /* One byte more. */
    b.ptr[b.len - 2] = 'a';
    b.ptr[b.len - 1] = '\n';
    check_err(&p, b.ptr, b.len, "Protocol error: too big inline request",
              __LINE__);
    /* ... noticed as soon as no ending can save it. */
    check_err(&p, b.ptr, b.len - 1, "Protocol error: too big inline request",
              __LINE__);
    CHECK_INT(resp_parse(&p, b.ptr, b.len - 2, &used), RESP_AGAIN);
    b.ptr[b.len - 2] = '\r';
    b.ptr[b.len - 1] = '\r';
    check_err(&p, b.ptr, b.len, "Protocol error: too big inline request",
              __LINE__);
    /* A huge garbage stream without newline is refused after 64 KiB. */
    resp_buf_clear(&b);
    for (i = 0; i < 200000; i++)
        CHECK_INT(resp_buf_append(&b, "x", 1), 0);
    check_err(&p, b.ptr, b.len, "Protocol error: too big inline request",
              __LINE__);

    resp_buf_free(&b);
    resp_parser_free(&p);
}

/* ---- streams: every way of splitting gives the same result --------------- */

/* How many bytes the next read delivers, 1..remaining. */
typedef size_t (*chunk_fn)(size_t remaining, size_t arg);

static size_t chunk_all(size_t rem, size_t arg)
{
    (void)arg;
    return rem;
}

static size_t chunk_fixed(size_t rem, size_t arg)
{
    return arg < rem ? arg : rem;
}

static size_t chunk_random(size_t rem, size_t arg)
{
    size_t c = 1 + rnd_below(arg);

    return c < rem ? c : rem;
}

/* Feed modes. */
#define FEED_MOVE 1     /* fresh exact-size buffer per read: moved input, and
                           ASan catches any read past the end */
#define FEED_NEED 2     /* skip calls while fewer bytes than the need hint;
                           and check that the hint was right */

/*
 * Feed in[0..n) as a server would, in reads sized by next(), and write into
 * res a description of what came out: each command as "argc:" then
 * "len=bytes|" per argument and a newline, then "ERR:<msg>" or
 * "MORE:<bytes left>".  *calls counts resp_parse() calls.
 */
static void run_stream(const char *in, size_t n, chunk_fn next, size_t arg,
                       int mode, resp_buf_t *res, size_t *calls)
{
    resp_parser_t p;
    char *buf = NULL, *nb, num[32];
    size_t len = 0, cap = 0, fed = 0, off, used, c;
    int r, i;

    resp_parser_init(&p);
    resp_buf_clear(res);
    if (calls)
        *calls = 0;
    while (fed < n) {
        c = next(n - fed, arg);
        CHECK(c >= 1 && c <= n - fed);
        if ((mode & FEED_MOVE) || len + c > cap) {
            cap = (mode & FEED_MOVE) ? len + c : 2 * (len + c);
            nb = malloc(cap);
            CHECK(nb != NULL);
            if (len)
                memcpy(nb, buf, len);
            free(buf);
            buf = nb;
        }
        memcpy(buf + len, in + fed, c);
        len += c;
        fed += c;
        if ((mode & FEED_NEED) && len < resp_parser_need(&p)) {
            /* The hint promises that a call now makes no progress:
             * sometimes call anyway, it must say AGAIN and consume
             * nothing. */
            if (rnd_below(8) == 0) {
                CHECK_INT(resp_parse(&p, buf, len, &used), RESP_AGAIN);
                CHECK_INT(used, 0);
            }
            continue;
        }
        off = 0;
        for (;;) {
            r = resp_parse(&p, buf + off, len - off, &used);
            if (calls)
                ++*calls;
            if (r != RESP_OK)
                break;
            CHECK(used > 0 && used <= len - off);
            CHECK(p.argc >= 1);
            resp_buf_append(res, num, (size_t)snprintf(num, sizeof(num), "%d:", p.argc));
            for (i = 0; i < p.argc; i++) {
                /* Arguments point into this command's bytes, or (quoted
                 * inline words, unescaped) into the parser's scratch. */
                CHECK((p.argv[i].ptr >= buf + off &&
                       p.argv[i].ptr + p.argv[i].len <= buf + off + used) ||
                      (p.scratch && p.argv[i].ptr >= p.scratch &&
                       p.argv[i].ptr + p.argv[i].len <= p.scratch + p.scratch_cap));
                resp_buf_append(res, num, (size_t)snprintf(num, sizeof(num), "%zu=", p.argv[i].len));
                resp_buf_append(res, p.argv[i].ptr, p.argv[i].len);
                resp_buf_append(res, "|", 1);
            }
            resp_buf_append(res, "\n", 1);
            off += used;
        }
        if (r < 0) {
            CHECK_INT(used, 0);
            resp_buf_append(res, "ERR:", 4);
            resp_buf_append(res, resp_parser_error(&p), strlen(resp_parser_error(&p)));
            goto out;
        }
        CHECK_INT(r, RESP_AGAIN);
        off += used;
        memmove(buf, buf + off, len - off);
        len -= off;
        CHECK(resp_parser_need(&p) > len);
    }
    resp_buf_append(res, num, (size_t)snprintf(num, sizeof(num), "MORE:%zu", len));
out:
    CHECK_INT(res->oom, 0);
    free(buf);
    resp_parser_free(&p);
}

/* Every split of in[] must give what one read gives.  Returns nothing; the
 * reference result is left in ref. */
static void check_splits(const char *in, size_t n, resp_buf_t *ref, int every_split)
{
    resp_buf_t got = RESP_BUF_INIT;
    size_t k, cut;
    int mode;

    run_stream(in, n, chunk_all, 0, FEED_MOVE, ref, NULL);
    for (mode = 0; mode < 4; mode++) {
        /* byte by byte */
        run_stream(in, n, chunk_fixed, 1, mode, &got, NULL);
        CHECK_MEM(got.ptr, got.len, ref->ptr, ref->len);
        for (k = 0; k < 4; k++) {
            run_stream(in, n, chunk_random, 1 + k * 7, mode, &got, NULL);
            CHECK_MEM(got.ptr, got.len, ref->ptr, ref->len);
        }
    }
    /* Two reads, cut at every position. */
    if (every_split) {
        for (cut = 1; cut < n; cut++) {
            run_stream(in, n, chunk_fixed, cut, FEED_MOVE | FEED_NEED, &got, NULL);
            CHECK_MEM(got.ptr, got.len, ref->ptr, ref->len);
        }
    }
    resp_buf_free(&got);
}

#define SPLITS_WANT(lit, want)                                               \
    do {                                                                     \
        check_splits((lit), sizeof(lit) - 1, &ref, 1);                       \
        CHECK_MEM(ref.ptr, ref.len, (want), sizeof(want) - 1);               \
    } while (0)

static void test_splits(void)
{
    resp_buf_t ref = RESP_BUF_INIT, in = RESP_BUF_INIT;
    static const char *const set[] = {"SET", "key:000000001234", "xxx"};
    static const char *const get[] = {"GET", "key:000000001234"};
    int i;

    SPLITS_WANT("PING\r\n", "1:4=PING|\nMORE:0");
    SPLITS_WANT("*1\r\n$4\r\nPING\r\n", "1:4=PING|\nMORE:0");
    SPLITS_WANT("*3\r\n$3\r\nSET\r\n$5\r\na\0\r\nb\r\n$4\r\n\r\n\r\n\r\n",
                "3:3=SET|5=a\0\r\nb|4=\r\n\r\n|\nMORE:0");
    SPLITS_WANT("\r\n*0\r\n*-1\r\nPING\r\n  \n*1\r\n$4\r\nPING\r\n"
                "ECHO \"a b\" 'c d' e\r\n*-5\r\n",
                "1:4=PING|\n1:4=PING|\n4:4=ECHO|3=a b|3=c d|1=e|\nMORE:0");
    SPLITS_WANT("SET \"k\\x00ey\" 'v\\'x' \"\\r\\n\\t\\\\\"\n",
                "4:3=SET|4=k\0ey|3=v'x|4=\r\n\t\\|\nMORE:0");
    SPLITS_WANT("PING\r\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\nva",
                "1:4=PING|\nMORE:26");
    SPLITS_WANT("PING\r\n*2\r\n$3\r\nGET\r\n$1\r\nkXX", "1:4=PING|\n"
                "ERR:Protocol error: bulk data not terminated by CRLF");
    SPLITS_WANT("PING\r\n*2\r\n$3\r\nGET\r\n$1x", "1:4=PING|\n"
                "ERR:Protocol error: invalid bulk length");
    SPLITS_WANT("PING\r\n*2\r\n$3\r\nGET\r\n?1\r\nk\r\n", "1:4=PING|\n"
                "ERR:Protocol error: expected '$', got '?'");
    SPLITS_WANT("ECHO \"x\r\nPING\r\n",
                "ERR:Protocol error: unbalanced quotes in request");
    SPLITS_WANT("*1\r\n$4\r\nPING\r\n*2000000\r\n",
                "1:4=PING|\nERR:Protocol error: invalid multibulk length");
    SPLITS_WANT("*-0\r\n", "ERR:Protocol error: invalid multibulk length");
    SPLITS_WANT("*12345678901234567890",
                "ERR:Protocol error: invalid multibulk length");

    /* A pipeline like redis-benchmark -P 16 sends. */
    for (i = 0; i < 16; i++)
        mb(&in, 3, set);
    for (i = 0; i < 16; i++)
        mb(&in, 2, get);
    CHECK_INT(resp_buf_append(&in, "PING\r\n", 6), 0);
    check_splits(in.ptr, in.len, &ref, 1);
    CHECK_INT(ref.len, 16 * 35 + 16 * 29 + 10 + 6);

    /* More arguments than the inline argv holds. */
    resp_buf_clear(&in);
    CHECK_INT(resp_add_array(&in, 40), 0);
    for (i = 0; i < 40; i++)
        CHECK_INT(resp_add_bulk(&in, "ab\r\n", (size_t)(i % 5)), 0);
    CHECK_INT(resp_buf_append(&in, "a b c d e f g h i j k l m n o p q r s t u\r\n", 43), 0);
    check_splits(in.ptr, in.len, &ref, 1);
    CHECK(ref.len > 0 && ref.ptr[0] == '4' && ref.ptr[1] == '0');

    /* The inline limit gives the same verdict however it is split. */
    for (i = 0; i < 4; i++) {
        size_t want = (size_t)RESP_MAX_INLINE + (i >= 2);
        resp_buf_clear(&in);
        while (in.len < want)
            CHECK_INT(resp_buf_append(&in, "x", 1), 0);
        CHECK_INT(resp_buf_append(&in, (i & 1) ? "\n" : "\r\n", (i & 1) ? 1 : 2), 0);
        run_stream(in.ptr, in.len, chunk_all, 0, 0, &ref, NULL);
        if (i < 2)
            CHECK(ref.len > 8 && memcmp(ref.ptr, "1:65536=", 8) == 0);
        {
            resp_buf_t got = RESP_BUF_INIT;

            run_stream(in.ptr, in.len, chunk_fixed, 1, 0, &got, NULL);
            CHECK_MEM(got.ptr, got.len, ref.ptr, ref.len);
            run_stream(in.ptr, in.len, chunk_random, 3000, FEED_MOVE, &got, NULL);
            CHECK_MEM(got.ptr, got.len, ref.ptr, ref.len);
            run_stream(in.ptr, in.len, chunk_fixed, in.len - 1, FEED_MOVE, &got, NULL);
            CHECK_MEM(got.ptr, got.len, ref.ptr, ref.len);
            run_stream(in.ptr, in.len, chunk_fixed, in.len - 2, FEED_MOVE, &got, NULL);
            CHECK_MEM(got.ptr, got.len, ref.ptr, ref.len);
            resp_buf_free(&got);
        }
        if (i >= 2)
            CHECK_MEM(ref.ptr, ref.len, "ERR:Protocol error: too big inline request", 42);
    }
    resp_buf_free(&in);
    resp_buf_free(&ref);
}

/* A big argument arriving in small reads costs linear time; with the need
 * hint the caller parses only twice. */
static void test_big_bulk(void)
{
    enum { BIG = 16 << 20, STEP = 4096 };
    resp_buf_t in = RESP_BUF_INIT, res = RESP_BUF_INIT;
    size_t calls, hdr;
    char *data = malloc(BIG);
    double t0;
    int i;

    CHECK(data != NULL);
    for (i = 0; i < BIG; i++)
        data[i] = (char)(i * 7 + 1);
    CHECK_INT(resp_add_array(&in, 2), 0);
    CHECK_INT(resp_add_bulk(&in, "ECHO", 4), 0);
    CHECK_INT(resp_add_bulk(&in, data, BIG), 0);
    hdr = in.len - BIG - 2;

    t0 = now_ms();
    run_stream(in.ptr, in.len, chunk_fixed, STEP, FEED_NEED, &res, &calls);
    CHECK(calls <= 4);
    CHECK_INT(res.len, 18 + BIG + 2 + 6);
    CHECK_MEM(res.ptr, 18, "2:4=ECHO|16777216=", 18);
    CHECK_MEM(res.ptr + 18, BIG, data, BIG);
    CHECK_MEM(res.ptr + 18 + BIG, 8, "|\nMORE:0", 8);
    run_stream(in.ptr, in.len, chunk_fixed, STEP, 0, &res, &calls);
    CHECK(calls >= in.len / STEP);
    CHECK_INT(res.len, 18 + BIG + 2 + 6);
    CHECK_MEM(res.ptr + 18, BIG, data, BIG);
    CHECK_INT(hdr, 25);
    /* 4096 calls over 16 MiB: a quadratic parser would take minutes (and
     * test.sh's time limit fails it); no wall-clock bound here, which
     * sanitizers and a busy machine would break. */
    (void)t0;

    /* Many small arguments trickling in: resumes argument by argument. */
    resp_buf_clear(&in);
    CHECK_INT(resp_add_array(&in, 100000), 0);
    for (i = 0; i < 100000; i++)
        CHECK_INT(resp_add_bulk(&in, "a", 1), 0);
    run_stream(in.ptr, in.len, chunk_fixed, 7, 0, &res, &calls);
    CHECK(calls >= in.len / 7);
    CHECK_MEM(res.ptr, 9, "100000:1=", 9);
    CHECK_MEM(res.ptr + res.len - 6, 6, "MORE:0", 6);

    free(data);
    resp_buf_free(&in);
    resp_buf_free(&res);
}

/* ---- header numbers agree with "find '\r', then string2ll" -------------- */

static void test_header_numbers(void)
{
    static const char alphabet[] = "-0123456789";
    resp_parser_t p;
    char in[64];
    size_t i, j, n, used;
    long long v;
    int r, ok;

    resp_parser_init(&p);
    for (i = 0; i < 100000; i++) {
        size_t dl = rnd_below(22);

        in[0] = '*';
        for (j = 0; j < dl; j++)
            in[1 + j] = (rnd() & 7) ? alphabet[1 + rnd_below(10)]
                                    : alphabet[rnd_below(11)];
        if (rnd() & 1 && dl > 0)
            in[1] = (char)('1' + rnd_below(9));
        memcpy(in + 1 + dl, "\r\n", 2);
        n = dl + 3;
        ok = ref_str2ll(in + 1, dl, &v);
        r = resp_parse(&p, in, n, &used);
        if (!ok || v > RESP_MAX_MULTIBULK) {
            CHECK_INT(r, RESP_EPROTO);
            CHECK_STR(resp_parser_error(&p),
                      "Protocol error: invalid multibulk length");
        } else {
            CHECK_INT(r, RESP_AGAIN);
            CHECK_INT(used, v <= 0 ? n : 0);
        }
        resp_parser_reset(&p);

        /* The same digits as a bulk length. */
        memcpy(in, "*1\r\n$", 5);
        for (j = 0; j < dl; j++)
            in[5 + j] = (rnd() & 7) ? alphabet[1 + rnd_below(10)]
                                    : alphabet[rnd_below(11)];
        memcpy(in + 5 + dl, "\r\n", 2);
        n = dl + 7;
        ok = ref_str2ll(in + 5, dl, &v);
        r = resp_parse(&p, in, n, &used);
        if (!ok || v < 0 || v > RESP_MAX_BULK) {
            CHECK_INT(r, RESP_EPROTO);
            CHECK_STR(resp_parser_error(&p), "Protocol error: invalid bulk length");
        } else {
            CHECK_INT(r, RESP_AGAIN);
            CHECK_INT(resp_parser_need(&p), n + (size_t)v + 2);
        }
        resp_parser_reset(&p);
    }
    resp_parser_free(&p);
}

/* ---- fuzz -------------------------------------------------------------- */

static void mutate(char *s, size_t *n, size_t cap)
{
    static const char interesting[] = "*$\r\n-0123456789 \"'\\xa";
    size_t k, at;

    for (k = 1 + rnd_below(4); k > 0; k--) {
        at = rnd_below(*n + 1);
        switch (rnd_below(5)) {
        case 0: /* overwrite */
            if (at < *n)
                s[at] = (rnd() & 1) ? (char)rnd()
                                    : interesting[rnd_below(sizeof(interesting) - 1)];
            break;
        case 1: /* insert */
            if (*n < cap) {
                memmove(s + at + 1, s + at, *n - at);
                s[at] = interesting[rnd_below(sizeof(interesting) - 1)];
                ++*n;
            }
            break;
        case 2: /* delete */
            if (at < *n) {
                memmove(s + at, s + at + 1, *n - at - 1);
                --*n;
            }
            break;
        case 3: /* truncate */
            *n = at;
            break;
        default: /* duplicate a slice */
            if (at < *n) {
                size_t len = 1 + rnd_below(*n - at);
                if (*n + len <= cap) {
                    memmove(s + *n, s + at, len);
                    *n += len;
                }
            }
            break;
        }
    }
}

static void test_fuzz(void)
{
    static const char *const seeds[] = {
        "*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n",
        "*2\r\n$3\r\nGET\r\n$0\r\n\r\nPING\r\n",
        "ECHO \"a\\x41\\n\" 'b\\'c' d\r\n*1\r\n$4\r\nPING\r\n",
        "\r\n*0\r\n*-1\r\nPING\n",
        "*20\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n"
        "$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\n"
        "a\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1"
        "\r\na\r\n",
    };
    static const char alphabet[] = "*$\r\n-0123456789 \"'\\xaZ";
    resp_buf_t ref = RESP_BUF_INIT, got = RESP_BUF_INIT;
    char s[512];
    size_t n, i, iters = 0;
    const char *env = getenv("RESP_FUZZ_MS");
    double budget = env ? atof(env) : 500, t0 = now_ms();

    while (now_ms() - t0 < budget) {
        if (rnd() & 1) {
            const char *seed = seeds[rnd_below(sizeof(seeds) / sizeof(seeds[0]))];
            n = strlen(seed);
            memcpy(s, seed, n);
            mutate(s, &n, 256);
        } else {
            n = rnd_below(128);
            for (i = 0; i < n; i++)
                s[i] = (rnd() & 3) ? alphabet[rnd_below(sizeof(alphabet) - 1)]
                                   : (char)rnd();
        }
        run_stream(s, n, chunk_all, 0, FEED_MOVE, &ref, NULL);
        run_stream(s, n, chunk_random, 1 + rnd_below(9), FEED_MOVE | FEED_NEED,
                   &got, NULL);
        CHECK_MEM(got.ptr, got.len, ref.ptr, ref.len);
        run_stream(s, n, chunk_fixed, 1, 0, &got, NULL);
        CHECK_MEM(got.ptr, got.len, ref.ptr, ref.len);
        iters++;
    }
    CHECK(iters > 0);
    printf("test_resp: fuzz: %zu inputs in %.0f ms\n", iters, now_ms() - t0);
    resp_buf_free(&ref);
    resp_buf_free(&got);
}

int main(void)
{
    const char *seed = getenv("RESP_TEST_SEED");
    double t0 = now_ms();

    if (seed)
        rng_state = strtoull(seed, NULL, 0) | 1;
    test_buf();
    test_replies();
    test_integers();
    test_parse_basic();
    test_parse_inline_quotes();
    test_parse_errors();
    test_parse_oom();
    test_parse_shrink();
    test_limits();
    test_header_numbers();
    test_splits();
    test_big_bulk();
    test_fuzz();
    printf("test_resp: %lu checks passed in %.0f ms\n", checks, now_ms() - t0);
    return 0;
}
