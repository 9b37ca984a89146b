/*
 * resp.h - RESP2 (Redis protocol) request parser and reply builder.
 *
 * Pure C11 + glibc, no dependency on the coroutine runtime, no global
 * mutable state.  Thread-compatible: each object must be used by one thread
 * at a time.
 *
 * What it does
 * ------------
 *   - resp_buf_t: a growable byte buffer (the connection's output buffer,
 *     or its input buffer).  Growth failure never aborts: it returns
 *     -ENOMEM and sets buf->oom, which then sticks (see below).
 *   - resp_parse(): parses ONE complete command out of the bytes a client
 *     sent, in either of redis's two request forms:
 *       multibulk  "*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n"
 *       inline     "GET key\r\n"  (words split as redis splits them: a
 *                  space, tab, CR or LF ends one, and any isspace() byte,
 *                  \v and \f too, is skipped between words; with redis's
 *                  "double quotes" (escapes \n \r \t \b \a \xHH, and \c
 *                  for any other c) and 'single quotes' (only \' escapes);
 *                  a closing quote must be followed by a blank or the end
 *                  of the line; a line ends at '\n', a '\r' just before
 *                  it is dropped; blank lines are skipped; unlike redis a
 *                  NUL byte is an ordinary character, not the line's end)
 *     The arguments are returned as pointer+length pairs pointing INTO the
 *     caller's buffer (inline arguments that needed unquoting point into a
 *     scratch buffer owned by the parser): nothing is copied.
 *   - resp_add_*(): append one reply (+simple, -error, :integer, $bulk,
 *     $-1 null, *array header) to a resp_buf_t, formatting integers by hand.
 *   - resp_str2ll() / resp_ll2str(): redis's strict integer syntax.
 *
 * Limits (same as redis-server 7, except where noted)
 * ---------------------------------------------------
 *   RESP_MAX_MULTIBULK  1024*1024 arguments per command ("*N", N larger:
 *                       "invalid multibulk length"; redis lifts this limit
 *                       for authenticated clients, we never do).
 *   RESP_MAX_BULK       512 MiB per argument ("$N", N larger or negative:
 *                       "invalid bulk length").
 *   RESP_MAX_INLINE     64 KiB per inline line, not counting its "\r\n" or
 *                       "\n" ("too big inline request").  Unlike redis, the
 *                       verdict depends only on the bytes, never on how they
 *                       were split into reads: a line of exactly 64 KiB is
 *                       accepted, one byte more is rejected.
 *   Numbers in "*N"/"$N" headers follow resp_str2ll(): no sign other than
 *   a leading '-', no leading zeros, no blanks, at most 19 digits.
 *   "*0" and any other non-positive "*N" is an empty command: it is skipped
 *   silently, as redis does.  "$-1" inside a request is an error.
 *   Stricter than redis: the two bytes after each bulk argument must be
 *   "\r\n" ("Protocol error: bulk data not terminated by CRLF"), and the
 *   byte after the '\r' of a "*N"/"$N" header must be '\n'.
 *
 * Error texts (resp_parser_error(); the server replies "-ERR <text>\r\n" and
 * closes the connection, as redis does)
 * ----------------------------------------------------------------------
 *   "Protocol error: invalid multibulk length"
 *   "Protocol error: invalid bulk length"
 *   "Protocol error: expected '$', got 'x'"    (x is the byte found; '\r',
 *                                               '\n' and NUL print as ' ')
 *   "Protocol error: too big inline request"
 *   "Protocol error: unbalanced quotes in request"
 *   "Protocol error: bulk data not terminated by CRLF"
 *   "out of memory"                           (argv or scratch growth failed)
 */
#ifndef RESP_H
#define RESP_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define RESP_MAX_MULTIBULK (1024L * 1024)
#define RESP_MAX_BULK      (512L * 1024 * 1024)
#define RESP_MAX_INLINE    (64L * 1024)
#define RESP_ARGV_INLINE   16

/* Return values of resp_parse(). */
#define RESP_OK     1   /* one command parsed: p->argc, p->argv are set */
#define RESP_AGAIN  0   /* need more bytes */
#define RESP_EPROTO (-1) /* protocol error: resp_parser_error() says which */
#define RESP_ENOMEM (-2) /* out of memory growing argv or the scratch area */

/* ------------------------------------------------------------------------
 * Growable byte buffer.
 *
 * ptr[0..len) holds data, ptr[len..cap) is free room.  A zeroed struct (or
 * RESP_BUF_INIT) is an empty buffer that owns nothing.
 *
 * oom: set when a reservation failed.  It is sticky: while it is set every
 * reserve/append/resp_add_* fails with -ENOMEM and writes nothing.  A reply
 * that could not be appended means the reply stream no longer matches the
 * request stream, so the owner must notice (check oom or the return value)
 * and close the connection; resp_buf_clear() is the only thing that resets
 * it.  Appends are all-or-nothing: a failed append leaves len unchanged.
 * ---------------------------------------------------------------------- */
typedef struct resp_buf {
    char *ptr;
    size_t len, cap;
    int oom;
} resp_buf_t;

#define RESP_BUF_INIT {NULL, 0, 0, 0}

/* Make b an empty buffer owning nothing. */
void resp_buf_init(resp_buf_t *b);
/* Free b's memory; b becomes empty (as resp_buf_init), oom cleared. */
void resp_buf_free(resp_buf_t *b);
/* len = 0 and oom = 0; the memory is kept for reuse. */
void resp_buf_clear(resp_buf_t *b);
/* Drop the first n bytes (n <= len; larger n drops everything), moving the
 * rest to the front.  For "n bytes were written to the socket". */
void resp_buf_consume(resp_buf_t *b, size_t n);
/* If b is empty and holds more than keep bytes of capacity, free it, so an
 * idle connection does not keep a big buffer from one large reply. */
void resp_buf_shrink(resp_buf_t *b, size_t keep);
/* Slow path of resp_buf_reserve(); do not call directly. */
int resp_buf_grow_(resp_buf_t *b, size_t extra);

/* Ensure cap - len >= extra.  0 on success.  -ENOMEM, with oom set, if oom
 * was already set, if len + extra would exceed PTRDIFF_MAX (refused without
 * calling realloc), or if realloc fails.  Growth at least doubles the
 * capacity, so appends are amortised O(1). */
static inline int resp_buf_reserve(resp_buf_t *b, size_t extra)
{
    if (__builtin_expect(!b->oom && b->cap - b->len >= extra, 1))
        return 0;
    return resp_buf_grow_(b, extra);
}

/* Append n bytes of p.  0 or -ENOMEM (nothing appended, see oom). */
static inline int resp_buf_append(resp_buf_t *b, const void *p, size_t n)
{
    if (resp_buf_reserve(b, n))
        return -ENOMEM;
    if (n) {
        memcpy(b->ptr + b->len, p, n);
        b->len += n;
    }
    return 0;
}

/* ------------------------------------------------------------------------
 * Reply builders.  Each appends one complete RESP2 reply to b and returns 0,
 * or -ENOMEM having appended nothing (and b->oom set).
 * ---------------------------------------------------------------------- */
/* "+<s>\r\n".  s must not contain '\r' or '\n' (not checked: pass
 * constants). */
int resp_add_simple(resp_buf_t *b, const char *s, size_t n);
/* "-<s>\r\n" where s starts with the error code, e.g. "ERR syntax error" or
 * "OOM ...".  Any '\r' or '\n' in s is written as ' ' (as redis does), so
 * user data in a message cannot break the protocol. */
int resp_add_error(resp_buf_t *b, const char *s, size_t n);
/* ":<v>\r\n". */
int resp_add_int(resp_buf_t *b, long long v);
/* "$<n>\r\n<s>\r\n"; binary safe. */
int resp_add_bulk(resp_buf_t *b, const char *s, size_t n);
/* "$-1\r\n", the null bulk string (GET of a missing key). */
int resp_add_null(resp_buf_t *b);
/* "*<n>\r\n" (n < 0 gives the null array "*-1\r\n"); the caller then appends
 * the n elements. */
int resp_add_array(resp_buf_t *b, long long n);
/* "+OK\r\n". */
int resp_add_ok(resp_buf_t *b);

/* ------------------------------------------------------------------------
 * Integers.
 * ---------------------------------------------------------------------- */
/* Longest output of resp_ll2str(), without a terminating NUL. */
#define RESP_LLSTR_SIZE 20

/* Parse s[0..n) as a long long with redis's string2ll rules: optional '-',
 * then "0" or a digit 1-9 followed by digits; nothing else (no '+', no
 * blanks, no leading zeros, no "-0"); must fit in long long.  Returns 1 and
 * sets *v on success, 0 otherwise (*v untouched). */
int resp_str2ll(const char *s, size_t n, long long *v);

/* Write v in decimal to dst (which has room for RESP_LLSTR_SIZE bytes) and
 * return the number of bytes written.  No NUL terminator. */
size_t resp_ll2str(char *dst, long long v);

/* ------------------------------------------------------------------------
 * Request parser.
 * ---------------------------------------------------------------------- */
/* A realloc-like allocator: (ud, NULL, n) allocates, (ud, ptr, n) resizes,
 * (ud, ptr, 0) frees and returns NULL.  NULL on failure, the old block
 * staying valid. */
typedef void *(*resp_alloc_fn)(void *ud, void *ptr, size_t size);

typedef struct resp_arg {
    const char *ptr;
    size_t len;
} resp_arg_t;

typedef struct resp_parser {
    /* Output, valid after resp_parse() returned RESP_OK, until the next
     * resp_parse()/resp_parser_reset()/resp_parser_free() on this parser or
     * until the caller modifies or frees the bytes it passed. */
    int argc;                   /* >= 1 */
    resp_arg_t *argv;

    /* Everything below is private. */
    int state;                  /* idle, or inside a multibulk command */
    size_t pos;                 /* bytes of the current command parsed */
    size_t need;                /* see resp_parser_need() */
    size_t scanned;             /* inline: bytes known to hold no '\n' */
    long mbcount;               /* multibulk: arguments announced */
    long bulklen;               /* multibulk: length of the pending bulk,
                                   -1 when its "$N" header comes next */
    int nfixed;                 /* argv[0..nfixed) hold offsets (see .c) */
    int argv_cap;               /* room in argv */
    resp_arg_t *heap;           /* argv beyond RESP_ARGV_INLINE, kept */
    int heap_cap;
    char *scratch;              /* unescaped quoted inline words, kept */
    size_t scratch_cap;
    resp_alloc_fn alloc;        /* NULL: realloc()/free() */
    void *alloc_ud;
    const char *err;
    char errbuf[48];
    resp_arg_t argv_inline[RESP_ARGV_INLINE];
} resp_parser_t;

/* Prepare p (any memory contents) for use. */
void resp_parser_init(resp_parser_t *p);
/* Allocate p's argv and scratch memory with alloc (NULL: realloc/free)
 * instead.  Call right after resp_parser_init(), before p owns memory. */
void resp_parser_set_alloc(resp_parser_t *p, resp_alloc_fn alloc, void *ud);
/* Free the memory p owns; p must be re-initialised before reuse. */
void resp_parser_free(resp_parser_t *p);
/* Forget any partially parsed command (and a previous error); keeps the
 * memory for reuse.  Use it if the input buffer is discarded. */
void resp_parser_reset(resp_parser_t *p);
/* Between commands (nothing partly parsed), free the argv and scratch
 * memory kept from a big command when it is over keep bytes, so that an
 * idle connection does not hold what its largest command needed (16 MiB
 * of argv for a million arguments).  The last command's argc and argv are
 * gone after it. */
void resp_parser_shrink(resp_parser_t *p, size_t keep);

/*
 * Parse one command from buf[0..len).
 *
 * Returns RESP_OK (1): a command is complete; p->argc (>= 1) and p->argv
 *   describe it.  The command occupied buf[0..*consumed) (this also counts
 *   any empty lines or "*0" commands skipped before it).
 * Returns RESP_AGAIN (0): buf holds no complete command.  buf[0..*consumed)
 *   (empty commands that were skipped) may be discarded; the parser
 *   remembers how far it got into the rest, so parsing a large command that
 *   arrives in many pieces costs time linear in its size, not quadratic.
 * Returns RESP_EPROTO/RESP_ENOMEM (< 0): the input is invalid (or memory ran
 *   out); resp_parser_error() gives the text.  The connection should get
 *   "-ERR <text>\r\n" and be closed.  *consumed is 0.  The partial command
 *   is forgotten, so the parser can serve a fresh stream; the message stays
 *   readable until the next call.
 *
 * Contract: after EVERY call the caller drops the first *consumed bytes of
 * its input, and the next call's buf must begin with the bytes that
 * followed them, unchanged, possibly moved to another address, possibly
 * with more bytes appended.  (Passing fewer bytes than a previous call saw
 * restarts the command's parse from scratch, which is correct but slow.)
 * While RESP_AGAIN is returned, resp_parser_need() tells how many bytes
 * (counted from buf after dropping *consumed) are needed at least before
 * another call can make progress; a caller may size its buffer by it and
 * skip calls until that many bytes are there.
 *
 * Typical loop over a pipelined input buffer in[0..n):
 *     size_t off = 0, used;
 *     while ((r = resp_parse(&p, in + off, n - off, &used)) == RESP_OK) {
 *         off += used;
 *         kv_exec(kv, p.argc, p.argv, &out);
 *     }
 *     if (r < 0) { reply "-ERR " + resp_parser_error(&p); close; }
 *     off += used;    // RESP_AGAIN: drop in[0..off), keep the rest
 */
int resp_parse(resp_parser_t *p, const char *buf, size_t len,
               size_t *consumed);

/* After RESP_AGAIN: the minimum number of bytes (from the start of the
 * pending command) needed before resp_parse() can make progress; always
 * more than were available.  For a bulk argument whose header has arrived
 * this covers the whole argument and its "\r\n" (up to about 512 MiB more
 * than what is there: apply your own query buffer limit). */
static inline size_t resp_parser_need(const resp_parser_t *p)
{
    return p->need;
}

/* The message of the last error returned by resp_parse(). */
static inline const char *resp_parser_error(const resp_parser_t *p)
{
    return p->err ? p->err : "";
}

#endif /* RESP_H */
