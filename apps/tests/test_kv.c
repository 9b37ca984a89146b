/*
 * test_kv.c - self-checking tests of apps/kv.c (store and commands), driven
 * through apps/resp.c like the server drives them.  Exit status 0 means every
 * check passed; the first failed check prints both values and its
 * file:line and exits 1.
 *
 *   gcc -std=gnu11 -O2 -g -Wall -Wextra -Werror -Iapps \
 *       apps/resp.c apps/kv.c apps/tests/test_kv.c -o /tmp/test_kv && /tmp/test_kv
 *
 * Expected replies were checked against redis-server 7.0.
 */
#define _DEFAULT_SOURCE /* clock_gettime under -std=c11 too */
#include "kv.h"
#include "resp.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RESP_CHECK_SEED 0x51f15eedu
#include "resp_check.h"


/* ---- driving the store through the protocol ---------------------------- */

static kv_t *kv;                /* the store T() talks to */
static resp_buf_t out;          /* replies of the last run() */

/* Execute every command in req[0..n) (inline or multibulk, pipelined),
 * replies into out (cleared first).  Returns the last kv_exec() result. */
static int run(const char *req, size_t n)
{
    resp_parser_t p;
    size_t off = 0, used;
    int r, last = 0;

    resp_parser_init(&p);
    resp_buf_clear(&out);
    while ((r = resp_parse(&p, req + off, n - off, &used)) == RESP_OK) {
        last = kv_exec(kv, p.argc, p.argv, &out);
        off += used;
    }
    if (r != RESP_AGAIN || off + used != n) {
        fprintf(stderr, "parse: r=%d %s\n", r, resp_parser_error(&p));
        dump("request", req, n);
    }
    CHECK_INT(r, RESP_AGAIN);
    CHECK_INT(off + used, n);
    resp_parser_free(&p);
    return last;
}

/* Request and the exact reply bytes, both string literals. */
#define T(req, reply)                                                        \
    do {                                                                     \
        run((req), sizeof(req) - 1);                                         \
        CHECK_MEM(out.ptr, out.len, (reply), sizeof(reply) - 1);             \
    } while (0)

#define CHECK_OUT(lit) CHECK_MEM(out.ptr, out.len, (lit), sizeof(lit) - 1)

/* Run a command given as separate (binary) arguments. */
static int exec_args(int argc, const resp_arg_t *argv)
{
    resp_buf_clear(&out);
    return kv_exec(kv, argc, argv, &out);
}

static size_t fmt_u(char *dst, const char *prefix, unsigned long v)
{
    size_t n = strlen(prefix);
    char tmp[24];
    size_t k = 0;

    memcpy(dst, prefix, n);
    do {
        tmp[k++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (k)
        dst[n++] = tmp[--k];
    return n;
}

/* ---- commands ----------------------------------------------------------- */

static void test_connection_cmds(void)
{
    T("PING\r\n", "+PONG\r\n");
    T("ping hello\r\n", "$5\r\nhello\r\n");
    T("PiNg \"\"\r\n", "$0\r\n\r\n");
    T("PING a b\r\n", "-ERR wrong number of arguments for 'ping' command\r\n");
    T("ECHO \"a\\r\\nb\"\r\n", "$4\r\na\r\nb\r\n");
    T("ECHO\r\n", "-ERR wrong number of arguments for 'echo' command\r\n");
    T("ECHO a b\r\n", "-ERR wrong number of arguments for 'echo' command\r\n");
    T("SELECT 0\r\n", "+OK\r\n");
    T("SELECT 1\r\n", "-ERR DB index is out of range\r\n");
    T("SELECT -1\r\n", "-ERR DB index is out of range\r\n");
    T("SELECT x\r\n", "-ERR value is not an integer or out of range\r\n");
    T("SELECT 00\r\n", "-ERR value is not an integer or out of range\r\n");
    T("SELECT 99999999999\r\n", "-ERR value is out of range, value must "
                                "between -2147483648 and 2147483647\r\n");
    T("SELECT\r\n", "-ERR wrong number of arguments for 'select' command\r\n");
    T("COMMAND\r\n", "*0\r\n");
    T("COMMAND DOCS\r\n", "*0\r\n");
    T("command count\r\n", ":20\r\n");
    T("CONFIG\r\n", "-ERR wrong number of arguments for 'config' command\r\n");
    T("CONFIG GET\r\n",
      "-ERR wrong number of arguments for 'config|get' command\r\n");
    T("CONFIG foo\r\n", "-ERR unknown subcommand 'foo'. Try CONFIG HELP.\r\n");
    T("CONFIG fOo bar\r\n", "-ERR unknown subcommand 'fOo'. Try CONFIG HELP.\r\n");
    T("CONFIG \"a\\r\\nb\"\r\n",
      "-ERR unknown subcommand 'a  b'. Try CONFIG HELP.\r\n");
    T("CONFIG \"a\\x00b\"\r\n", "-ERR unknown subcommand 'a'. Try CONFIG HELP.\r\n");
    T("CONFIG GET save\r\n", "*2\r\n$4\r\nsave\r\n$0\r\n\r\n");
    T("CONFIG GET appendonly\r\n", "*2\r\n$10\r\nappendonly\r\n$2\r\nno\r\n");
    T("CONFIG GET SAVE databases\r\n",
      "*4\r\n$4\r\nSAVE\r\n$0\r\n\r\n$9\r\ndatabases\r\n$1\r\n1\r\n");
    T("config get nosuch\r\n", "*0\r\n");
    T("config get maxmemory\r\n", "*2\r\n$9\r\nmaxmemory\r\n$1\r\n0\r\n");
    T("config get *ApP*\r\n", "*2\r\n$10\r\nappendonly\r\n$2\r\nno\r\n");
    T("config get s?ve sav*\r\n", "*2\r\n$4\r\nsave\r\n$0\r\n\r\n");
    T("config get ?\r\n", "*0\r\n");
    T("config get *\r\n",
      "*8\r\n$4\r\nsave\r\n$0\r\n\r\n$10\r\nappendonly\r\n$2\r\nno\r\n"
      "$9\r\ndatabases\r\n$1\r\n1\r\n$9\r\nmaxmemory\r\n$1\r\n0\r\n");
    T("config get **a*a*\r\n", "*2\r\n$9\r\ndatabases\r\n$1\r\n1\r\n");
    T("config get *e*o*\r\n",
      "*4\r\n$10\r\nappendonly\r\n$2\r\nno\r\n$9\r\nmaxmemory\r\n$1\r\n0\r\n");
    T("config get *e*o\r\n", "*0\r\n");
    T("config get save*x\r\n", "*0\r\n");
    CHECK_INT(run("QUIT\r\n", 6), KV_CLOSE);
    CHECK_MEM(out.ptr, out.len, "+OK\r\n", 5);
    CHECK_INT(run("quit now\r\n", 10), KV_CLOSE);
    CHECK_INT(run("PING\r\n", 6), 0);
}

static void test_errors(void)
{
    resp_arg_t a[8];
    char big[300];

    T("foo\r\n", "-ERR unknown command 'foo', with args beginning with: \r\n");
    T("foo a b\r\n",
      "-ERR unknown command 'foo', with args beginning with: 'a' 'b' \r\n");
    T("foo \"\" b\r\n",
      "-ERR unknown command 'foo', with args beginning with: '' 'b' \r\n");
    /* Arguments are shown while the list is under 128 bytes, each cut to
     * what is left; CR/LF shown as blanks; a NUL cuts an argument. */
    memset(big, 'x', 200);
    a[0] = (resp_arg_t){"FoO", 3};
    a[1] = (resp_arg_t){"a\r\nb", 4};
    a[2] = (resp_arg_t){big, 200};
    a[3] = (resp_arg_t){"c", 1};
    exec_args(4, a);
    {
        char want[300];
        size_t n = 0;

        memcpy(want, "-ERR unknown command 'FoO', with args beginning with: "
                     "'a  b' '", 62);
        n = 62;
        memset(want + n, 'x', 121);
        n += 121;
        memcpy(want + n, "' \r\n", 4);
        n += 4;
        CHECK_MEM(out.ptr, out.len, want, n);
    }
    a[0] = (resp_arg_t){"foo", 3};
    a[1] = (resp_arg_t){"a\0b", 3};
    a[2] = (resp_arg_t){"c", 1};
    exec_args(3, a);
    CHECK_OUT("-ERR unknown command 'foo', with args beginning with: 'a' 'c' \r\n");
    memset(big, 'y', 50);
    a[0] = (resp_arg_t){"foo", 3};
    for (int i = 1; i <= 5; i++)
        a[i] = (resp_arg_t){big, 50};
    exec_args(6, a);
    CHECK_OUT("-ERR unknown command 'foo', with args beginning with: "
              "'yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy' "
              "'yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy' "
              "'yyyyyyyyyyyyyyyyyyyyyy' \r\n");
    /* The command name is cut at 128 bytes. */
    memset(big, 'z', 300);
    a[0] = (resp_arg_t){big, 300};
    exec_args(1, a);
    CHECK_INT(out.len, 21 + 128 + 29 + 3);
    /* Near misses of real names are unknown, not mistaken for them. */
    T("GETX k\r\n", "-ERR unknown command 'GETX', with args beginning with: 'k' \r\n");
    T("GE k\r\n", "-ERR unknown command 'GE', with args beginning with: 'k' \r\n");
    T("G\x45T k\r\n", "$-1\r\n");
    T("G\x65T k\r\n", "$-1\r\n");
    T("G\x05T k\r\n",
      "-ERR unknown command 'G\x05T', with args beginning with: 'k' \r\n");
    T("DBSIZX\r\n", "-ERR unknown command 'DBSIZX', with args beginning with: \r\n");
    T("decrbx k 1\r\n",
      "-ERR unknown command 'decrbx', with args beginning with: 'k' '1' \r\n");
    T("MSGT k\r\n", "-ERR unknown command 'MSGT', with args beginning with: 'k' \r\n");
    T("flushallx\r\n",
      "-ERR unknown command 'flushallx', with args beginning with: \r\n");
    T("x\r\n", "-ERR unknown command 'x', with args beginning with: \r\n");
    /* Arity, with the lowercase name whatever the spelling. */
    T("GET\r\n", "-ERR wrong number of arguments for 'get' command\r\n");
    T("gEt a b\r\n", "-ERR wrong number of arguments for 'get' command\r\n");
    T("SET k\r\n", "-ERR wrong number of arguments for 'set' command\r\n");
    T("DEL\r\n", "-ERR wrong number of arguments for 'del' command\r\n");
    T("UNLINK\r\n", "-ERR wrong number of arguments for 'unlink' command\r\n");
    T("EXISTS\r\n", "-ERR wrong number of arguments for 'exists' command\r\n");
    T("INCR\r\n", "-ERR wrong number of arguments for 'incr' command\r\n");
    T("INCR a b\r\n", "-ERR wrong number of arguments for 'incr' command\r\n");
    T("DECR\r\n", "-ERR wrong number of arguments for 'decr' command\r\n");
    T("INCRBY a\r\n", "-ERR wrong number of arguments for 'incrby' command\r\n");
    T("DECRBY a\r\n", "-ERR wrong number of arguments for 'decrby' command\r\n");
    T("MGET\r\n", "-ERR wrong number of arguments for 'mget' command\r\n");
    T("MSET a\r\n", "-ERR wrong number of arguments for 'mset' command\r\n");
    T("MSET a b c\r\n", "-ERR wrong number of arguments for 'mset' command\r\n");
    T("DBSIZE x\r\n", "-ERR wrong number of arguments for 'dbsize' command\r\n");
    /* argc 0 does nothing. */
    resp_buf_clear(&out);
    CHECK_INT(kv_exec(kv, 0, a, &out), 0);
    CHECK_INT(out.len, 0);
}

static void test_strings(void)
{
    T("FLUSHALL\r\n", "+OK\r\n");
    T("GET k\r\n", "$-1\r\n");
    T("SET k v\r\n", "+OK\r\n");
    T("GET k\r\n", "$1\r\nv\r\n");
    T("set k \"\"\r\n", "+OK\r\n");
    T("GET k\r\n", "$0\r\n\r\n");
    {
        char req[200], want[200];
        int n, m;

        n = snprintf(req, sizeof(req), "SET k %0120d\r\n", 7);
        run(req, (size_t)n);
        CHECK_OUT("+OK\r\n");
        m = snprintf(want, sizeof(want), "$120\r\n%0120d\r\n", 7);
        run("GET k\r\n", 7);
        CHECK_MEM(out.ptr, out.len, want, (size_t)m);
    }
    T("SET k short\r\n", "+OK\r\n");
    T("GET k\r\n", "$5\r\nshort\r\n");
    /* Options. */
    T("SET k v1 NX\r\n", "$-1\r\n");
    T("GET k\r\n", "$5\r\nshort\r\n");
    T("SET k v2 XX\r\n", "+OK\r\n");
    T("SET n v NX\r\n", "+OK\r\n");
    T("SET m v XX\r\n", "$-1\r\n");
    T("EXISTS m\r\n", ":0\r\n");
    T("SET k v3 GET\r\n", "$2\r\nv2\r\n");
    T("SET m v4 get\r\n", "$-1\r\n");
    T("GET m\r\n", "$2\r\nv4\r\n");
    T("SET k v5 nx get\r\n", "$2\r\nv3\r\n");
    T("GET k\r\n", "$2\r\nv3\r\n");
    T("SET q v6 nx get\r\n", "$-1\r\n");
    T("GET q\r\n", "$2\r\nv6\r\n");
    T("SET k v7 xx GET KEEPTTL\r\n", "$2\r\nv3\r\n");
    T("SET k v8 nx nx\r\n", "$-1\r\n");
    T("SET k v keepttl\r\n", "+OK\r\n");
    T("SET k v nx xx\r\n", "-ERR syntax error\r\n");
    T("SET k v xx nx\r\n", "-ERR syntax error\r\n");
    T("SET k v EX 10\r\n", "-ERR syntax error\r\n");
    T("SET k v PX 10\r\n", "-ERR syntax error\r\n");
    T("SET k v EX\r\n", "-ERR syntax error\r\n");
    T("SET k v foo\r\n", "-ERR syntax error\r\n");
    T("SET k v nxx\r\n", "-ERR syntax error\r\n");
    /* A NUL after a valid option is not the option. */
    T("SET k v \"nx\\x00\"\r\n", "-ERR syntax error\r\n");
    /* GET of a key being replaced by a bigger value. */
    T("SET big xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx GET\r\n",
      "$-1\r\n");
    T("SET big y GET\r\n",
      "$96\r\nxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\r\n");
    T("GET big\r\n", "$1\r\ny\r\n");

    /* DEL / UNLINK / EXISTS count, repeats included. */
    T("MSET a 1 b 2 c 3\r\n", "+OK\r\n");
    T("EXISTS a b c d a\r\n", ":4\r\n");
    T("MGET a b nosuch c\r\n", "*4\r\n$1\r\n1\r\n$1\r\n2\r\n$-1\r\n$1\r\n3\r\n");
    T("DEL a a nosuch\r\n", ":1\r\n");
    T("UNLINK b c\r\n", ":2\r\n");
    T("DEL a b c\r\n", ":0\r\n");
    T("DBSIZE\r\n", ":5\r\n");
    T("FLUSHDB\r\n", "+OK\r\n");
    T("DBSIZE\r\n", ":0\r\n");
    T("MSET a 1 a 2\r\n", "+OK\r\n");
    T("GET a\r\n", "$1\r\n2\r\n");
    T("FLUSHALL ASYNC\r\n", "+OK\r\n");
    T("FLUSHALL sync\r\n", "+OK\r\n");
    T("FLUSHALL foo\r\n", "-ERR syntax error\r\n");
    T("FLUSHDB async sync\r\n", "-ERR syntax error\r\n");
    T("DBSIZE\r\n", ":0\r\n");

    /* Pipelined: replies in order. */
    T("SET p 1\r\nGET p\r\n*2\r\n$4\r\nINCR\r\n$1\r\np\r\nGET p\r\nDEL p\r\nGET p\r\n",
      "+OK\r\n$1\r\n1\r\n:2\r\n$1\r\n2\r\n:1\r\n$-1\r\n");
}

static void test_binary(void)
{
    resp_arg_t a[3];
    const char *v;
    size_t vl;

    T("SET \"a\\x00\\r\\nb\" \"v\\x00\\r\\n\"\r\n", "+OK\r\n");
    T("GET \"a\\x00\\r\\nb\"\r\n", "$4\r\nv\0\r\n\r\n");
    T("GET a\r\n", "$-1\r\n");
    T("GET \"a\\x00\"\r\n", "$-1\r\n");
    T("GET \"a\\x00\\r\\nc\"\r\n", "$-1\r\n");
    T("*3\r\n$3\r\nSET\r\n$0\r\n\r\n$3\r\n\0\0\0\r\n", "+OK\r\n");
    T("*2\r\n$3\r\nGET\r\n$0\r\n\r\n", "$3\r\n\0\0\0\r\n");
    v = kv_get(kv, "a\0\r\nb", 5, &vl);
    CHECK(v != NULL);
    CHECK_MEM(v, vl, "v\0\r\n", 4);
    CHECK(kv_get(kv, "a\0\r\nb", 4, &vl) == NULL);
    /* Keys differing in one byte anywhere, at every length up to 40. */
    {
        char k[41], val[8];
        size_t len, pos;

        for (len = 0; len <= 40; len++) {
            memset(k, 'k', len);
            CHECK_INT(kv_set(kv, k, len, "base", 4), 0);
            for (pos = 0; pos < len; pos++) {
                k[pos] ^= 1;
                CHECK_INT(kv_set(kv, k, len, val, fmt_u(val, "", pos)), 0);
                k[pos] ^= 1;
            }
        }
        for (len = 0; len <= 40; len++) {
            memset(k, 'k', len);
            v = kv_get(kv, k, len, &vl);
            CHECK(v != NULL);
            CHECK_MEM(v, vl, "base", 4);
            for (pos = 0; pos < len; pos++) {
                k[pos] ^= 1;
                v = kv_get(kv, k, len, &vl);
                CHECK(v != NULL);
                CHECK_MEM(v, vl, val, fmt_u(val, "", pos));
                k[pos] ^= 1;
            }
        }
        CHECK_INT(kv_verify(kv), 0);
    }
    /* A value may come from the store itself (same key or another). */
    CHECK_INT(kv_set(kv, "src", 3, "0123456789", 10), 0);
    v = kv_get(kv, "src", 3, &vl);
    CHECK_INT(kv_set(kv, "src", 3, v + 2, 5), 0);
    v = kv_get(kv, "src", 3, &vl);
    CHECK_MEM(v, vl, "23456", 5);
    v = kv_get(kv, "src", 3, &vl);
    CHECK_INT(kv_set(kv, "dst", 3, v, vl), 0);
    v = kv_get(kv, "dst", 3, &vl);
    CHECK_MEM(v, vl, "23456", 5);
    (void)a;
    T("FLUSHALL\r\n", "+OK\r\n");
}

static void test_incr(void)
{
    T("INCR n\r\n", ":1\r\n");
    T("INCR n\r\n", ":2\r\n");
    T("GET n\r\n", "$1\r\n2\r\n");
    T("DECR n\r\n", ":1\r\n");
    T("DECR n\r\n", ":0\r\n");
    T("DECR n\r\n", ":-1\r\n");
    T("GET n\r\n", "$2\r\n-1\r\n");
    T("INCRBY n 100\r\n", ":99\r\n");
    T("DECRBY n 200\r\n", ":-101\r\n");
    T("DECRBY m -5\r\n", ":5\r\n");
    T("INCRBY n x\r\n", "-ERR value is not an integer or out of range\r\n");
    T("INCRBY n 1.5\r\n", "-ERR value is not an integer or out of range\r\n");
    T("INCRBY n \"\"\r\n", "-ERR value is not an integer or out of range\r\n");
    T("DECRBY n 99999999999999999999\r\n",
      "-ERR value is not an integer or out of range\r\n");
    T("GET n\r\n", "$4\r\n-101\r\n");
    T("SET n 9223372036854775806\r\n", "+OK\r\n");
    T("INCR n\r\n", ":9223372036854775807\r\n");
    T("INCR n\r\n", "-ERR increment or decrement would overflow\r\n");
    T("INCRBY n 0\r\n", ":9223372036854775807\r\n");
    T("GET n\r\n", "$19\r\n9223372036854775807\r\n");
    T("DECRBY n -1\r\n", "-ERR increment or decrement would overflow\r\n");
    T("SET n -9223372036854775807\r\n", "+OK\r\n");
    T("DECR n\r\n", ":-9223372036854775808\r\n");
    T("DECR n\r\n", "-ERR increment or decrement would overflow\r\n");
    T("INCRBY n -1\r\n", "-ERR increment or decrement would overflow\r\n");
    T("INCR n\r\n", ":-9223372036854775807\r\n");
    T("SET n -9223372036854775808\r\n", "+OK\r\n");
    T("INCR n\r\n", ":-9223372036854775807\r\n");
    T("DECRBY z -9223372036854775808\r\n", "-ERR decrement would overflow\r\n");
    T("INCRBY z -9223372036854775808\r\n", ":-9223372036854775808\r\n");
    T("INCRBY z 9223372036854775807\r\n", ":-1\r\n");
    T("SET n 9223372036854775808\r\n", "+OK\r\n");
    T("INCR n\r\n", "-ERR value is not an integer or out of range\r\n");
    T("SET n 007\r\n", "+OK\r\n");
    T("INCR n\r\n", "-ERR value is not an integer or out of range\r\n");
    T("SET n \" 1\"\r\n", "+OK\r\n");
    T("INCR n\r\n", "-ERR value is not an integer or out of range\r\n");
    T("SET n -0\r\n", "+OK\r\n");
    T("INCR n\r\n", "-ERR value is not an integer or out of range\r\n");
    T("SET n +1\r\n", "+OK\r\n");
    T("INCR n\r\n", "-ERR value is not an integer or out of range\r\n");
    T("SET n \"\"\r\n", "+OK\r\n");
    T("INCR n\r\n", "-ERR value is not an integer or out of range\r\n");
    T("SET n \"1\\x00\"\r\n", "+OK\r\n");
    T("INCR n\r\n", "-ERR value is not an integer or out of range\r\n");
    T("GET n\r\n", "$2\r\n1\0\r\n");
    /* A long value shrinks to the number in place. */
    T("SET n 00000000000000000000000000000000000000000000000000000000000000000\r\n",
      "+OK\r\n");
    T("DEL n\r\nINCR n\r\nINCRBY n 41\r\n", ":1\r\n:1\r\n:42\r\n");
    T("GET n\r\n", "$2\r\n42\r\n");
    CHECK_INT(kv_verify(kv), 0);
    T("FLUSHALL\r\n", "+OK\r\n");
}

/* ---- big table ------------------------------------------------------------ */

static void test_large(void)
{
    /* a million keys; under memcheck 200000 (a fifth of its time there,
     * the same growth and rehash paths) */
#ifdef ACO_USE_VALGRIND
    enum { N = 200000 };
#else
    enum { N = 1000000 };
#endif
    kv_opts_t o = {12345, 0, NULL, NULL};
    kv_t *k = kv_new(&o);
    size_t base = kv_used_memory(k), kl, vl, gl;
    char key[32], val[32];
    const char *g;
    unsigned long i;
    double t0 = now_ms();

    CHECK(k != NULL);
    for (i = 0; i < N; i++) {
        kl = fmt_u(key, "key:", i);
        vl = fmt_u(val, "v", i * 3);
        CHECK_INT(kv_set(k, key, kl, val, vl), 0);
        if (i == 12 || i == 13 || i == 20 || i == 3000 || i == 3100)
            CHECK_INT(kv_verify(k), 0);     /* also mid-rehash */
    }
    CHECK_INT(kv_size(k), N);
    for (i = 0; i < N; i++) {
        kl = fmt_u(key, "key:", i);
        vl = fmt_u(val, "v", i * 3);
        g = kv_get(k, key, kl, &gl);
        CHECK(g != NULL);
        CHECK_MEM(g, gl, val, vl);
    }
    for (i = N; i < N + 10000; i++) {
        kl = fmt_u(key, "key:", i);
        CHECK(kv_get(k, key, kl, &gl) == NULL);
    }
    for (i = 0; i < N; i += 2) {
        kl = fmt_u(key, "key:", i);
        CHECK_INT(kv_del(k, key, kl), 1);
    }
    CHECK_INT(kv_del(k, "key:0", 5), 0);
    CHECK_INT(kv_size(k), N / 2);
    CHECK_INT(kv_verify(k), 0);
    /* Deleted keys are gone, the others intact (a sample: every value was
     * checked above, and kv_verify() checked the structure). */
    for (i = 0; i < N; i += 7) {
        kl = fmt_u(key, "key:", i);
        g = kv_get(k, key, kl, &gl);
        if (i % 2 == 0) {
            CHECK(g == NULL);
        } else {
            vl = fmt_u(val, "v", i * 3);
            CHECK(g != NULL);
            CHECK_MEM(g, gl, val, vl);
        }
    }
    for (i = 1; i < N; i += 2) {
        kl = fmt_u(key, "key:", i);
        CHECK_INT(kv_del(k, key, kl), 1);
    }
    CHECK_INT(kv_size(k), 0);
    CHECK_INT(kv_verify(k), 0);
    kv_clear(k);
    CHECK_INT(kv_used_memory(k), base);
    CHECK_INT(kv_verify(k), 0);
    kv_free(k);
    printf("test_kv: %d keys set, got, deleted in %.0f ms\n", (int)N, now_ms() - t0);
}

/* ---- random operations against a model ---------------------------------- */

#define MODEL_KEYS 3000

typedef struct {
    int present;
    size_t len;
    char val[48];
} model_val;

static void test_model(void)
{
    static model_val m[MODEL_KEYS];
    char key[32], val[48];
    size_t kl, vl, gl, live = 0, i, j;
    const char *g;
    unsigned long op;
    int round;

    for (round = 0; round < 4; round++) {
        kv_opts_t o = {(uint64_t)round + 1, 0, NULL, NULL};
        kv_t *k = kv_new(round == 3 ? NULL : &o);   /* one with a random seed */
        size_t target = 50 + rnd_below(MODEL_KEYS - 50);

        CHECK(k != NULL);
        memset(m, 0, sizeof(m));
        live = 0;
        for (op = 0; op < 50000; op++) {
            /* Grow towards target, then churn around it. */
            size_t idx = rnd_below(live < target ? MODEL_KEYS : target + 1);
            int what = (int)rnd_below(10);

            if (idx >= MODEL_KEYS)
                idx = MODEL_KEYS - 1;
            kl = fmt_u(key, "k", idx);
            if (what < 5) {
                vl = rnd_below(sizeof(val));
                for (j = 0; j < vl; j++)
                    val[j] = (char)rnd();
                CHECK_INT(kv_set(k, key, kl, val, vl), 0);
                live += !m[idx].present;
                m[idx].present = 1;
                m[idx].len = vl;
                memcpy(m[idx].val, val, vl);
            } else if (what < 7) {
                CHECK_INT(kv_del(k, key, kl), m[idx].present);
                live -= m[idx].present;
                m[idx].present = 0;
            } else {
                g = kv_get(k, key, kl, &gl);
                CHECK_INT(g != NULL, m[idx].present);
                if (g)
                    CHECK_MEM(g, gl, m[idx].val, m[idx].len);
            }
            CHECK_INT(kv_size(k), live);
            if (op % 4096 == 0)
                CHECK_INT(kv_verify(k), 0);
        }
        CHECK_INT(kv_verify(k), 0);
        for (i = 0; i < MODEL_KEYS; i++) {
            kl = fmt_u(key, "k", i);
            g = kv_get(k, key, kl, &gl);
            CHECK_INT(g != NULL, m[i].present);
            if (g)
                CHECK_MEM(g, gl, m[i].val, m[i].len);
        }
        if (round & 1)
            kv_clear(k);
        kv_free(k);
    }
}

/* Operations during a rehash: 3072 keys fill a 4096-slot table to 3/4, the
 * next insert starts moving them into 8192 slots, 8 old slots per
 * operation; meanwhile deletes (tombstones in the old table), inserts and
 * lookups go on and the invariants are checked every few operations. */
static void test_rehash_window(void)
{
    enum { FILL = 3072, MAXK = 4000 };
    static unsigned char present[MAXK];
    char key[32];
    size_t kl, gl, live;
    const char *g;
    int round, op, i;

    for (round = 0; round < 4; round++) {
        kv_opts_t o = {(uint64_t)round * 7919 + 3, 0, NULL, NULL};
        kv_t *k = kv_new(&o);

        CHECK(k != NULL);
        memset(present, 0, sizeof(present));
        for (i = 0; i < FILL; i++) {
            kl = fmt_u(key, "r", (unsigned long)i);
            CHECK_INT(kv_set(k, key, kl, key, kl), 0);
            present[i] = 1;
        }
        live = FILL;
        for (op = 0; op < 700; op++) {
            i = (int)rnd_below(MAXK);
            kl = fmt_u(key, "r", (unsigned long)i);
            switch (op == 0 ? 1 : (int)rnd_below(3)) {
            case 0:
                CHECK_INT(kv_del(k, key, kl), present[i]);
                live -= present[i];
                present[i] = 0;
                break;
            case 1:
                CHECK_INT(kv_set(k, key, kl, key, kl), 0);
                live += !present[i];
                present[i] = 1;
                break;
            default:
                g = kv_get(k, key, kl, &gl);
                CHECK_INT(g != NULL, present[i]);
                if (g)
                    CHECK_MEM(g, gl, key, kl);
            }
            CHECK_INT(kv_size(k), live);
            if (op % 8 == 0)
                CHECK_INT(kv_verify(k), 0);
        }
        CHECK_INT(kv_verify(k), 0);
        for (i = 0; i < MAXK; i++) {
            kl = fmt_u(key, "r", (unsigned long)i);
            CHECK_INT(kv_get(k, key, kl, &gl) != NULL, present[i]);
        }
        kv_free(k);
    }

    /* Free and clear in the middle of a rehash (entries in both tables,
     * migrated old slots still pointing at moved entries). */
    for (round = 0; round < 3; round++) {
        kv_opts_t o = {(uint64_t)round + 100, 0, NULL, NULL};
        kv_t *k = kv_new(&o);
        size_t base = kv_used_memory(k);

        CHECK(k != NULL);
        for (i = 0; i < FILL + 1 + 40 * round; i++) {
            kl = fmt_u(key, "r", (unsigned long)i);
            CHECK_INT(kv_set(k, key, kl, "v", 1), 0);
        }
        CHECK_INT(kv_verify(k), 0);
        if (round == 2) {
            kv_free(k);         /* leaks or double frees show in ASan/valgrind */
            continue;
        }
        kv_clear(k);
        CHECK_INT(kv_size(k), 0);
        CHECK_INT(kv_used_memory(k), base);
        CHECK_INT(kv_verify(k), 0);
        CHECK_INT(kv_set(k, "x", 1, "y", 1), 0);
        kv_free(k);
    }

    /* A small table's rehash lasts two operations: deleting right after it
     * starts often removes the old table's last entry, which ends it. */
    for (round = 0; round < 64; round++) {
        kv_opts_t o = {(uint64_t)round + 500, 0, NULL, NULL};
        kv_t *k = kv_new(&o);

        CHECK(k != NULL);
        for (i = 0; i < 13; i++) {
            kl = fmt_u(key, "s", (unsigned long)i);
            CHECK_INT(kv_set(k, key, kl, "v", 1), 0);
        }
        for (i = 0; i < 13; i++) {
            kl = fmt_u(key, "s", (unsigned long)((i * 5 + round) % 13));
            CHECK_INT(kv_del(k, key, kl), 1);
            CHECK_INT(kv_verify(k), 0);
        }
        CHECK_INT(kv_size(k), 0);
        kv_free(k);
    }
    kv_free(NULL);

    /* Deleting every key while most are still in the old table ends the
     * rehash early. */
    {
        kv_opts_t o = {4242, 0, NULL, NULL};
        kv_t *k = kv_new(&o);

        CHECK(k != NULL);
        for (i = 0; i <= FILL; i++) {
            kl = fmt_u(key, "r", (unsigned long)i);
            CHECK_INT(kv_set(k, key, kl, "v", 1), 0);
        }
        for (i = FILL; i >= 0; i--) {
            kl = fmt_u(key, "r", (unsigned long)i);
            CHECK_INT(kv_del(k, key, kl), 1);
            if (i % 64 == 0)
                CHECK_INT(kv_verify(k), 0);
        }
        CHECK_INT(kv_size(k), 0);
        CHECK_INT(kv_verify(k), 0);
        CHECK_INT(kv_set(k, "x", 1, "y", 1), 0);
        CHECK_INT(kv_verify(k), 0);
        kv_free(k);
    }
}

/* ---- out of memory ---------------------------------------------------------- */

typedef struct {
    long budget;        /* allocations that may still succeed; < 0: any */
    long live;          /* blocks allocated and not freed */
} fail_alloc_t;

static void *fail_alloc(void *ud, void *ptr, size_t size)
{
    fail_alloc_t *f = ud;
    void *p;

    if (size == 0) {
        if (ptr)
            f->live--;
        free(ptr);
        return NULL;
    }
    if (f->budget == 0)
        return NULL;
    if (f->budget > 0)
        f->budget--;
    p = realloc(ptr, size);
    if (p && !ptr)
        f->live++;
    return p;
}

static int reply_is(const char *lit)
{
    return out.len == strlen(lit) && memcmp(out.ptr, lit, out.len) == 0;
}

static void test_oom(void)
{
    static const char nomem[] = "-ERR out of memory\r\n";
    fail_alloc_t f = {0, 0};
    kv_opts_t o = {99, 0, fail_alloc, &f};
    kv_t *saved = kv;
    char req[256], key[32], val[160];
    size_t kl, vl, gl;
    const char *g;
    long budget, failures = 0;
    int i, n;

    /* Creation fails cleanly. */
    f.budget = 0;
    CHECK(kv_new(&o) == NULL);
    f.budget = 1;
    CHECK(kv_new(&o) == NULL);
    CHECK_INT(f.live, 0);

    for (budget = 0; budget < 90; budget++) {
        f.budget = -1;
        kv = kv_new(&o);
        CHECK(kv != NULL);
        T("SET a 1\r\nSET b 22\r\nSET c 333\r\n", "+OK\r\n+OK\r\n+OK\r\n");
        f.budget = budget;
        /* Inserts (some growing the table), an in-place overwrite, a bigger
         * overwrite, INCR of a new key, SET GET: each either works or says
         * out of memory, and nothing else changes. */
        for (i = 0; i < 40; i++) {
            n = snprintf(req, sizeof(req), "SET key%d val%d\r\n", i, i);
            run(req, (size_t)n);
            if (reply_is(nomem)) {
                failures++;
                kl = fmt_u(key, "key", (unsigned long)i);
                CHECK(kv_get(kv, key, kl, &gl) == NULL);
            } else {
                CHECK(reply_is("+OK\r\n"));
            }
            CHECK_INT(kv_verify(kv), 0);
        }
        T("SET a 9\r\n", "+OK\r\n");                  /* in place: no alloc */
        run("INCR a\r\n", 8);
        CHECK(reply_is(":10\r\n"));                   /* fits in place too */
        memset(val, 'v', 150);
        n = snprintf(req, sizeof(req), "SET b %.150s\r\n", val);
        run(req, (size_t)n);
        CHECK(reply_is("+OK\r\n") || reply_is(nomem));
        g = kv_get(kv, "b", 1, &gl);
        CHECK(g != NULL);
        if (reply_is(nomem))
            CHECK_MEM(g, gl, "22", 2);
        else
            CHECK_MEM(g, gl, val, 150);
        run("INCR newcounter\r\n", 17);
        CHECK(reply_is(":1\r\n") || reply_is(nomem));
        run("SET c 44 GET\r\n", 14);
        CHECK(reply_is("$3\r\n333\r\n"));            /* fits in place */
        run("SET d 4444 GET\r\n", 16);
        CHECK(reply_is("$-1\r\n") || reply_is(nomem));
        run("MSET m1 x m2 y\r\n", 16);
        CHECK(reply_is("+OK\r\n") || reply_is(nomem));
        CHECK_INT(kv_verify(kv), 0);
        /* Memory back: everything works again, and old data is intact. */
        f.budget = -1;
        for (i = 0; i < 40; i++) {
            n = snprintf(req, sizeof(req), "SET key%d val%d\r\n", i, i);
            run(req, (size_t)n);
            CHECK(reply_is("+OK\r\n"));
        }
        for (i = 0; i < 40; i++) {
            kl = fmt_u(key, "key", (unsigned long)i);
            vl = fmt_u(val, "val", (unsigned long)i);
            g = kv_get(kv, key, kl, &gl);
            CHECK(g != NULL);
            CHECK_MEM(g, gl, val, vl);
        }
        T("GET a\r\nGET c\r\n", "$2\r\n10\r\n$2\r\n44\r\n");
        CHECK_INT(kv_verify(kv), 0);
        kv_free(kv);
        CHECK_INT(f.live, 0);
    }
    CHECK(failures > 0);

    /* Too long for the store: refused before the value is read. */
    f.budget = -1;
    kv = kv_new(&o);
    CHECK(kv != NULL);
    CHECK_INT(kv_set(kv, "k", 1, "v", KV_MAX_LEN + 1), -E2BIG);
    {
        resp_arg_t a[3] = {{"SET", 3}, {"k", 1}, {"v", KV_MAX_LEN + 1}};

        exec_args(3, a);
        CHECK_OUT("-ERR string exceeds maximum allowed size\r\n");
    }
    CHECK_INT(kv_size(kv), 0);
    /* A big value replaced by a small one is moved to a small block; when
     * that allocation fails the value is rewritten in place instead. */
    memset(val, 'b', 150);
    CHECK_INT(kv_set(kv, "k", 1, val, 150), 0);
    f.budget = 0;
    T("SET k small\r\n", "+OK\r\n");
    T("GET k\r\n", "$5\r\nsmall\r\n");
    CHECK_INT(kv_verify(kv), 0);
    f.budget = -1;
    kv_free(kv);
    CHECK_INT(f.live, 0);
    kv = saved;
}

static void test_maxmemory(void)
{
    static const char oom[] =
        "-OOM command not allowed when used memory > 'maxmemory'.\r\n";
    kv_opts_t o = {7, 0, NULL, NULL};
    kv_t *saved = kv;
    char req[64];
    int i, n, refused = -1;

    char want[80];
    size_t base;

    kv = kv_new(&o);
    CHECK(kv != NULL);
    base = kv_used_memory(kv);
    kv_free(kv);
    o.maxmemory = base + 4096;
    kv = kv_new(&o);
    CHECK(kv != NULL);
    run("CONFIG GET maxmemory\r\n", 22);
    n = snprintf(req, sizeof(req), "%zu", o.maxmemory);
    n = snprintf(want, sizeof(want), "*2\r\n$9\r\nmaxmemory\r\n$%d\r\n%s\r\n", n, req);
    CHECK_MEM(out.ptr, out.len, want, (size_t)n);
    for (i = 0; i < 1000; i++) {
        n = snprintf(req, sizeof(req), "SET key%d 0123456789\r\n", i);
        run(req, (size_t)n);
        if (reply_is(oom)) {
            refused = i;
            break;
        }
        CHECK(reply_is("+OK\r\n"));
    }
    CHECK(refused > 10);
    CHECK(kv_used_memory(kv) > o.maxmemory);
    /* Writes that may grow memory are refused; reads and deletes are not. */
    run("SET key0 x\r\n", 12);
    CHECK(reply_is(oom));
    run("INCR counter\r\n", 14);
    CHECK(reply_is(oom));
    run("MSET a b\r\n", 10);
    CHECK(reply_is(oom));
    T("GET key0\r\n", "$10\r\n0123456789\r\n");
    T("PING\r\n", "+PONG\r\n");
    /* Arity errors win over OOM, as in redis. */
    T("SET x\r\n", "-ERR wrong number of arguments for 'set' command\r\n");
    T("DEL key0 key1 key2 key3 key4 key5 key6 key7\r\n", ":8\r\n");
    T("SET key0 x\r\n", "+OK\r\n");
    CHECK_INT(kv_verify(kv), 0);
    kv_free(kv);
    kv = saved;
}

/* A reply buffer that already lost a reply: nothing more is executed. */
static void test_out_oom(void)
{
    resp_arg_t a[3] = {{"SET", 3}, {"zz", 2}, {"1", 1}};
    resp_buf_t o = RESP_BUF_INIT;
    size_t vl;

    CHECK_INT(resp_buf_reserve(&o, SIZE_MAX), -ENOMEM);
    CHECK_INT(kv_exec(kv, 3, a, &o), -ENOMEM);
    CHECK(kv_get(kv, "zz", 2, &vl) == NULL);
    CHECK_INT(o.len, 0);
    resp_buf_clear(&o);
    CHECK_INT(kv_exec(kv, 3, a, &o), 0);
    CHECK_MEM(o.ptr, o.len, "+OK\r\n", 5);
    CHECK(kv_get(kv, "zz", 2, &vl) != NULL);
    resp_buf_free(&o);
}

int main(void)
{
    double t0 = now_ms();

    kv = kv_new(NULL);
    CHECK(kv != NULL);
    test_connection_cmds();
    test_errors();
    test_strings();
    test_binary();
    test_incr();
    test_out_oom();
    test_oom();
    test_maxmemory();
    test_model();
    test_rehash_window();
    test_large();
    CHECK_INT(kv_verify(kv), 0);
    kv_free(kv);
    resp_buf_free(&out);
    printf("test_kv: %lu checks passed in %.0f ms\n", checks, now_ms() - t0);
    return 0;
}
