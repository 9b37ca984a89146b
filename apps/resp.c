/*
 * resp.c - RESP2 request parser and reply builder.  See resp.h.
 */
#include "resp.h"

#include <limits.h>
#include <stdlib.h>

enum { ST_IDLE, ST_MBULK };

/* Internal result of the per-form parsers: an empty command was consumed
 * (p->pos bytes), keep going. */
#define R_SKIP 2

/* ========================================================================
 * Buffer
 * ====================================================================== */

void resp_buf_init(resp_buf_t *b)
{
    b->ptr = NULL;
    b->len = b->cap = 0;
    b->oom = 0;
}

void resp_buf_free(resp_buf_t *b)
{
    free(b->ptr);
    resp_buf_init(b);
}

void resp_buf_clear(resp_buf_t *b)
{
    b->len = 0;
    b->oom = 0;
}

void resp_buf_consume(resp_buf_t *b, size_t n)
{
    if (n >= b->len) {
        b->len = 0;
        return;
    }
    memmove(b->ptr, b->ptr + n, b->len - n);
    b->len -= n;
}

void resp_buf_shrink(resp_buf_t *b, size_t keep)
{
    if (b->len == 0 && b->cap > keep) {
        free(b->ptr);
        b->ptr = NULL;
        b->cap = 0;
    }
}

int resp_buf_grow_(resp_buf_t *b, size_t extra)
{
    size_t want, cap;
    char *np;

    if (b->oom)
        return -ENOMEM;
    if (b->cap - b->len >= extra)
        return 0;
    /* Refuse sizes malloc cannot satisfy before asking it: some allocators
     * (ASan's) abort instead of returning NULL for those. */
    if (extra > (size_t)PTRDIFF_MAX - b->len)
        goto oom;
    want = b->len + extra;
    cap = b->cap < 64 ? 64 : b->cap;
    while (cap < want)
        cap = cap > (size_t)PTRDIFF_MAX / 2 ? want : cap * 2;
    np = realloc(b->ptr, cap);
    if (np == NULL)
        goto oom;
    b->ptr = np;
    b->cap = cap;
    return 0;
oom:
    b->oom = 1;
    return -ENOMEM;
}

/* ========================================================================
 * Integers
 * ====================================================================== */

static const char digit_pairs[200] =
    "0001020304050607080910111213141516171819"
    "2021222324252627282930313233343536373839"
    "4041424344454647484950515253545556575859"
    "6061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

static unsigned u64_len(uint64_t v)
{
    unsigned n = 1;

    for (;;) {
        if (v < 10)
            return n;
        if (v < 100)
            return n + 1;
        if (v < 1000)
            return n + 2;
        if (v < 10000)
            return n + 3;
        v /= 10000;
        n += 4;
    }
}

/* Two digits per division: the divisions, not the stores, are the cost. */
static size_t u64_to_str(char *dst, uint64_t v)
{
    size_t n = u64_len(v);
    char *p = dst + n;

    while (v >= 100) {
        unsigned i = (unsigned)(v % 100) * 2;
        v /= 100;
        p -= 2;
        p[0] = digit_pairs[i];
        p[1] = digit_pairs[i + 1];
    }
    if (v >= 10) {
        p -= 2;
        p[0] = digit_pairs[v * 2];
        p[1] = digit_pairs[v * 2 + 1];
    } else {
        *--p = (char)('0' + v);
    }
    return n;
}

size_t resp_ll2str(char *dst, long long v)
{
    if (v < 0) {
        *dst = '-';
        /* Negate in unsigned arithmetic: -LLONG_MIN overflows long long. */
        return 1 + u64_to_str(dst + 1, 0 - (uint64_t)v);
    }
    return u64_to_str(dst, (uint64_t)v);
}

int resp_str2ll(const char *s, size_t n, long long *v)
{
    size_t i = 0;
    int neg = 0;
    uint64_t u = 0;

    if (n == 0 || n > 20)
        return 0;
    if (s[0] == '-') {
        neg = 1;
        i = 1;
        if (n == 1)
            return 0;
    }
    if (s[i] == '0') {
        /* Only a lone "0": no "-0", no leading zeros. */
        if (n == 1) {
            *v = 0;
            return 1;
        }
        return 0;
    }
    for (; i < n; i++) {
        unsigned d = (unsigned)((unsigned char)s[i] - '0');
        if (d > 9)
            return 0;
        if (u > (UINT64_MAX - d) / 10)
            return 0;
        u = u * 10 + d;
    }
    if (neg) {
        if (u > (uint64_t)LLONG_MAX + 1)
            return 0;
        *v = u == (uint64_t)LLONG_MAX + 1 ? LLONG_MIN : -(long long)u;
    } else {
        if (u > (uint64_t)LLONG_MAX)
            return 0;
        *v = (long long)u;
    }
    return 1;
}

/* ========================================================================
 * Replies
 * ====================================================================== */

/* "<c><v>\r\n": the shape of integer replies and of bulk/array headers. */
static inline char *put_hdr(char *w, char c, long long v)
{
    *w++ = c;
    w += resp_ll2str(w, v);
    w[0] = '\r';
    w[1] = '\n';
    return w + 2;
}

#define HDR_MAX (1 + RESP_LLSTR_SIZE + 2)

static int add_hdr(resp_buf_t *b, char c, long long v)
{
    if (resp_buf_reserve(b, HDR_MAX))
        return -ENOMEM;
    b->len = (size_t)(put_hdr(b->ptr + b->len, c, v) - b->ptr);
    return 0;
}

/* Reserve room for a payload of n bytes plus framing, refusing n so large
 * that adding the framing would wrap. */
static int reserve_framed(resp_buf_t *b, size_t n, size_t framing)
{
    if (n > (size_t)PTRDIFF_MAX - framing) {
        b->oom = 1;
        return -ENOMEM;
    }
    return resp_buf_reserve(b, n + framing);
}

int resp_add_simple(resp_buf_t *b, const char *s, size_t n)
{
    char *w;

    if (reserve_framed(b, n, 3))
        return -ENOMEM;
    w = b->ptr + b->len;
    *w++ = '+';
    if (n)
        memcpy(w, s, n);
    w += n;
    w[0] = '\r';
    w[1] = '\n';
    b->len += n + 3;
    return 0;
}

int resp_add_error(resp_buf_t *b, const char *s, size_t n)
{
    char *w;
    size_t i;

    if (reserve_framed(b, n, 3))
        return -ENOMEM;
    w = b->ptr + b->len;
    *w++ = '-';
    for (i = 0; i < n; i++)
        w[i] = (s[i] == '\r' || s[i] == '\n') ? ' ' : s[i];
    w += n;
    w[0] = '\r';
    w[1] = '\n';
    b->len += n + 3;
    return 0;
}

int resp_add_int(resp_buf_t *b, long long v)
{
    return add_hdr(b, ':', v);
}

int resp_add_array(resp_buf_t *b, long long n)
{
    return add_hdr(b, '*', n < 0 ? -1 : n);
}

int resp_add_bulk(resp_buf_t *b, const char *s, size_t n)
{
    char *w;

    if (reserve_framed(b, n, HDR_MAX + 2))
        return -ENOMEM;
    w = put_hdr(b->ptr + b->len, '$', (long long)n);
    if (n)
        memcpy(w, s, n);
    w += n;
    w[0] = '\r';
    w[1] = '\n';
    b->len = (size_t)(w + 2 - b->ptr);
    return 0;
}

int resp_add_null(resp_buf_t *b)
{
    return resp_buf_append(b, "$-1\r\n", 5);
}

int resp_add_ok(resp_buf_t *b)
{
    return resp_buf_append(b, "+OK\r\n", 5);
}

/* ========================================================================
 * Parser
 *
 * A multibulk command may arrive over many calls.  Its progress is kept in
 * p->pos (bytes parsed so far) and in argv[0..argc), but the caller may
 * move its buffer between calls, so pointers into it cannot be kept.  On
 * RESP_AGAIN the arguments parsed by this call are turned into offsets from
 * the start of the command (stored in the ptr field), and on RESP_OK those
 * offsets are turned back into pointers.  Each argument is converted at
 * most twice, so the cost stays linear however the command is split, and a
 * command parsed in one call never pays for it.
 * ====================================================================== */

static void *p_realloc(resp_parser_t *p, void *ptr, size_t n)
{
    return p->alloc ? p->alloc(p->alloc_ud, ptr, n) : realloc(ptr, n);
}

static void p_free(resp_parser_t *p, void *ptr)
{
    if (ptr == NULL)
        return;
    if (p->alloc)
        p->alloc(p->alloc_ud, ptr, 0);
    else
        free(ptr);
}

static void cmd_begin(resp_parser_t *p)
{
    p->argc = 0;
    p->argv = p->argv_inline;
    p->argv_cap = RESP_ARGV_INLINE;
    p->nfixed = 0;
}

/* Back to "between commands". */
static void parser_restart(resp_parser_t *p)
{
    p->state = ST_IDLE;
    p->pos = 0;
    p->need = 0;
    p->scanned = 0;
    p->mbcount = 0;
    p->bulklen = -1;
    cmd_begin(p);
}

void resp_parser_init(resp_parser_t *p)
{
    memset(p, 0, sizeof(*p));
    parser_restart(p);
}

void resp_parser_set_alloc(resp_parser_t *p, resp_alloc_fn alloc, void *ud)
{
    p->alloc = alloc;
    p->alloc_ud = ud;
}

void resp_parser_free(resp_parser_t *p)
{
    p_free(p, p->heap);
    p_free(p, p->scratch);
    memset(p, 0, sizeof(*p));
}

void resp_parser_reset(resp_parser_t *p)
{
    parser_restart(p);
    p->err = NULL;
}

void resp_parser_shrink(resp_parser_t *p, size_t keep)
{
    if (p->state != ST_IDLE)
        return;
    if ((size_t)p->heap_cap * sizeof(*p->heap) > keep) {
        p_free(p, p->heap);
        p->heap = NULL;
        p->heap_cap = 0;
        cmd_begin(p);           /* (argv may have been the heap) */
    }
    if (p->scratch_cap > keep) {
        p_free(p, p->scratch);
        p->scratch = NULL;
        p->scratch_cap = 0;
    }
}

static int fail(resp_parser_t *p, int code, const char *msg)
{
    parser_restart(p);
    p->err = msg;
    return code;
}

static int fail_nomem(resp_parser_t *p)
{
    return fail(p, RESP_ENOMEM, "out of memory");
}

static int fail_expected(resp_parser_t *p, char c)
{
    static const char pre[] = "Protocol error: expected '$', got '";
    char *e = p->errbuf;

    memcpy(e, pre, sizeof(pre) - 1);
    e += sizeof(pre) - 1;
    /* Redis prints the byte raw but maps CR/LF to blanks (a NUL ends its
     * format string); a blank keeps the error line well formed. */
    *e++ = (c == '\r' || c == '\n' || c == '\0') ? ' ' : c;
    *e++ = '\'';
    *e = '\0';
    return fail(p, RESP_EPROTO, p->errbuf);
}

/* Room for one more argument.  Growth is by doubling but, for a multibulk
 * command, never past the announced count, and only as arguments actually
 * arrive: "*1048576\r\n" alone does not make us allocate 16 MiB. */
static int argv_grow(resp_parser_t *p)
{
    long want = (long)p->argv_cap * 2;
    int on_heap = p->argv != p->argv_inline;

    if (p->state == ST_MBULK && want > p->mbcount)
        want = p->mbcount;
    if (want > p->heap_cap) {
        resp_arg_t *h = p_realloc(p, p->heap, (size_t)want * sizeof(*h));
        if (h == NULL)
            return -1;
        p->heap = h;
        p->heap_cap = (int)want;
    }
    if (!on_heap)
        memcpy(p->heap, p->argv_inline, (size_t)p->argc * sizeof(*p->heap));
    p->argv = p->heap;
    p->argv_cap = p->heap_cap;
    return 0;
}

static inline int push_arg(resp_parser_t *p, const char *s, size_t n)
{
    resp_arg_t *a;

    if (p->argc == p->argv_cap && argv_grow(p))
        return -1;
    a = &p->argv[p->argc++];
    a->ptr = s;
    a->len = n;
    return 0;
}

/*
 * The number of a "*N\r\n" or "$N\r\n" header; s points past the '*'/'$'.
 * Returns 1 (*v set, *used = bytes through the "\r\n"), 0 if more bytes are
 * needed, -1 if no continuation can make it valid.  It accepts exactly what
 * "find the '\r', then resp_str2ll()" accepts, but gives up as soon as the
 * bytes cannot become valid, and never reads past 22 bytes: a peer cannot
 * make us buffer or rescan a long header.
 */
static int parse_hdr_num(const char *s, size_t n, long long *v, size_t *used)
{
    size_t i = 0, d0, nd;
    int neg = 0;
    uint64_t u = 0;

    if (n > 0 && s[0] == '-') {
        neg = 1;
        i = 1;
    }
    d0 = i;
    for (; i < n; i++) {
        unsigned d = (unsigned)((unsigned char)s[i] - '0');
        if (d > 9)
            break;
        if (i - d0 == 19)
            return -1;          /* 20 digits never fit a long long */
        u = u * 10 + d;
    }
    nd = i - d0;
    if (nd > 0 && s[d0] == '0' && (nd > 1 || neg))
        return -1;              /* leading zero, or "-0" */
    if (i == n)
        return 0;
    if (s[i] != '\r' || nd == 0)
        return -1;
    if (u > (uint64_t)LLONG_MAX + (uint64_t)neg)
        return -1;
    if (i + 1 == n)
        return 0;
    if (s[i + 1] != '\n')
        return -1;
    if (neg)
        *v = u == (uint64_t)LLONG_MAX + 1 ? LLONG_MIN : -(long long)u;
    else
        *v = (long long)u;
    *used = i + 2;
    return 1;
}

/* Most headers are "$3\r\n" or "$16\r\n": decide those without the loop. */
static inline int parse_hdr_num_fast(const char *s, size_t n, long long *v,
                                     size_t *used)
{
    unsigned d0, d1;

    if (n >= 4) {
        d0 = (unsigned)((unsigned char)s[0] - '1');
        d1 = (unsigned)((unsigned char)s[1] - '0');
        if (d0 < 9) {
            if (s[1] == '\r' && s[2] == '\n') {
                *v = d0 + 1;
                *used = 3;
                return 1;
            }
            if (d1 < 10 && s[2] == '\r' && s[3] == '\n') {
                *v = (d0 + 1) * 10 + d1;
                *used = 4;
                return 1;
            }
        }
    }
    return parse_hdr_num(s, n, v, used);
}

static int parse_multibulk(resp_parser_t *p, const char *b, size_t n)
{
    resp_arg_t *argv;
    long long v;
    long blen;
    size_t used, pos;
    int r, i, argc, cap;

    if (p->state == ST_IDLE) {
        r = parse_hdr_num_fast(b + 1, n - 1, &v, &used);
        if (r == 0) {
            p->need = n + 1;
            return RESP_AGAIN;
        }
        if (r < 0 || v > RESP_MAX_MULTIBULK)
            return fail(p, RESP_EPROTO,
                        "Protocol error: invalid multibulk length");
        p->pos = 1 + used;
        if (v <= 0)
            return R_SKIP;      /* redis ignores "*0" and "*-1" */
        cmd_begin(p);
        p->state = ST_MBULK;
        p->mbcount = (long)v;
        p->bulklen = -1;
        /* A heap argv kept from an earlier big command saves the copy. */
        if (v > RESP_ARGV_INLINE && p->heap_cap > RESP_ARGV_INLINE) {
            p->argv = p->heap;
            p->argv_cap = p->heap_cap;
        }
    }

    /* Work on locals: the stores into argv could alias the parser's own
     * fields as far as the compiler knows, forcing reloads. */
    argv = p->argv;
    argc = p->argc;
    cap = p->argv_cap;
    pos = p->pos;
    blen = p->bulklen;
    while (argc < p->mbcount) {
        if (blen < 0) {
            if (pos == n) {
                p->need = n + 1;
                goto again;
            }
            if (b[pos] != '$')
                return fail_expected(p, b[pos]);
            r = parse_hdr_num_fast(b + pos + 1, n - pos - 1, &v, &used);
            if (r == 0) {
                p->need = n + 1;
                goto again;
            }
            if (r < 0 || v < 0 || v > RESP_MAX_BULK)
                return fail(p, RESP_EPROTO,
                            "Protocol error: invalid bulk length");
            pos += 1 + used;
            blen = (long)v;
        }
        if (n - pos < (size_t)blen + 2) {
            p->need = pos + (size_t)blen + 2;
            goto again;
        }
        if (b[pos + blen] != '\r' || b[pos + blen + 1] != '\n')
            return fail(p, RESP_EPROTO,
                        "Protocol error: bulk data not terminated by CRLF");
        if (argc == cap) {
            p->argc = argc;
            if (argv_grow(p))
                return fail_nomem(p);
            argv = p->argv;
            cap = p->argv_cap;
        }
        argv[argc].ptr = b + pos;
        argv[argc].len = (size_t)blen;
        argc++;
        pos += (size_t)blen + 2;
        blen = -1;
    }
    p->argc = argc;
    p->pos = pos;
    p->bulklen = -1;
    for (i = 0; i < p->nfixed; i++)
        argv[i].ptr = b + (uintptr_t)argv[i].ptr;
    return RESP_OK;

again:
    p->argc = argc;
    p->pos = pos;
    p->bulklen = blen;
    for (i = p->nfixed; i < argc; i++)
        argv[i].ptr = (const char *)(uintptr_t)(argv[i].ptr - b);
    p->nfixed = argc;
    return RESP_AGAIN;
}

/* isspace() in the C locale: what redis skips between inline words, and
 * what must follow a closing quote. */
static inline int is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' ||
           c == '\f';
}

/* What ends an unquoted inline word in redis (sdssplitargs): not \v or \f,
 * which stay in it. */
static inline int ends_word(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static int hex_val(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static int scratch_reserve(resp_parser_t *p, size_t n)
{
    char *s;

    if (p->scratch_cap >= n)
        return 0;
    if (n < 2 * p->scratch_cap)
        n = 2 * p->scratch_cap;
    s = p_realloc(p, p->scratch, n);
    if (s == NULL)
        return -1;
    p->scratch = s;
    p->scratch_cap = n;
    return 0;
}

/*
 * Split an inline line b[0..n) into words the way redis's sdssplitargs()
 * does, but binary safe (a NUL is an ordinary byte).  Plain words point into
 * b.  A word with a quote in it is unescaped into p->scratch, which is sized
 * for the whole line up front (unescaping never lengthens), so pointers into
 * it stay valid while later words are added.  A word holds at most one
 * quoted part, at its end: the closing quote must end the word.
 */
static int split_inline(resp_parser_t *p, const char *b, size_t n)
{
    size_t i = 0, start;
    char *out = NULL, *w, c;
    int hi, lo;

    for (;;) {
        while (i < n && is_blank(b[i]))
            i++;
        if (i == n)
            return 0;
        start = i;
        while (i < n && !ends_word(b[i]) && b[i] != '"' && b[i] != '\'')
            i++;
        if (i == n || ends_word(b[i])) {
            if (push_arg(p, b + start, i - start))
                return fail_nomem(p);
            continue;
        }
        if (out == NULL) {
            if (scratch_reserve(p, n))
                return fail_nomem(p);
            out = p->scratch;
        }
        w = out;
        memcpy(out, b + start, i - start);
        out += i - start;
        if (b[i++] == '"') {
            for (;;) {
                if (i == n)
                    goto unbalanced;
                c = b[i];
                if (c == '\\' && i + 3 < n && b[i + 1] == 'x' &&
                    (hi = hex_val(b[i + 2])) >= 0 &&
                    (lo = hex_val(b[i + 3])) >= 0) {
                    *out++ = (char)(hi << 4 | lo);
                    i += 4;
                } else if (c == '\\' && i + 1 < n) {
                    switch (b[i + 1]) {
                    case 'n': c = '\n'; break;
                    case 'r': c = '\r'; break;
                    case 't': c = '\t'; break;
                    case 'b': c = '\b'; break;
                    case 'a': c = '\a'; break;
                    default: c = b[i + 1]; break;
                    }
                    *out++ = c;
                    i += 2;
                } else if (c == '"') {
                    i++;
                    break;
                } else {
                    *out++ = c;
                    i++;
                }
            }
        } else {
            for (;;) {
                if (i == n)
                    goto unbalanced;
                c = b[i];
                if (c == '\\' && i + 1 < n && b[i + 1] == '\'') {
                    *out++ = '\'';
                    i += 2;
                } else if (c == '\'') {
                    i++;
                    break;
                } else {
                    *out++ = c;
                    i++;
                }
            }
        }
        if (i < n && !is_blank(b[i]))
            goto unbalanced;
        if (push_arg(p, w, (size_t)(out - w)))
            return fail_nomem(p);
    }

unbalanced:
    return fail(p, RESP_EPROTO, "Protocol error: unbalanced quotes in request");
}

static int parse_inline(resp_parser_t *p, const char *b, size_t n)
{
    size_t lim = n < RESP_MAX_INLINE + 2 ? n : RESP_MAX_INLINE + 2;
    const char *nl = NULL;
    size_t end;
    int r;

    /* Scan only bytes not scanned before, and never more than a line of
     * the maximum size, so a slow peer costs linear time. */
    if (p->scanned < lim)
        nl = memchr(b + p->scanned, '\n', lim - p->scanned);
    if (nl == NULL) {
        p->scanned = lim;
        /* Too big whatever follows: even if the next byte is '\n' and the
         * last one here a '\r', the line holds more than the limit. */
        if (n > RESP_MAX_INLINE + 1 ||
            (n == RESP_MAX_INLINE + 1 && b[n - 1] != '\r'))
            return fail(p, RESP_EPROTO,
                        "Protocol error: too big inline request");
        p->need = n + 1;
        return RESP_AGAIN;
    }
    end = (size_t)(nl - b);
    p->scanned = 0;
    p->pos = end + 1;
    if (end > 0 && b[end - 1] == '\r')
        end--;
    if (end > RESP_MAX_INLINE)
        return fail(p, RESP_EPROTO, "Protocol error: too big inline request");
    cmd_begin(p);
    r = split_inline(p, b, end);
    if (r < 0)
        return r;
    return p->argc > 0 ? RESP_OK : R_SKIP;
}

int resp_parse(resp_parser_t *p, const char *buf, size_t len,
               size_t *consumed)
{
    size_t off = 0;
    const char *b;
    size_t n;
    int r;

    *consumed = 0;
    p->err = NULL;
    /* Fewer bytes than last time: the caller broke the contract; the saved
     * progress would point past the data, so start over. */
    if ((p->state == ST_MBULK && p->pos > len) || p->scanned > len)
        parser_restart(p);
    if (len == 0) {
        /* Also keeps an empty buffer's NULL pointer out of arithmetic. */
        p->need = 1;
        return RESP_AGAIN;
    }
    for (;;) {
        b = buf + off;
        n = len - off;
        if (p->state == ST_MBULK)
            r = parse_multibulk(p, b, n);
        else if (n == 0) {
            p->need = 1;
            r = RESP_AGAIN;
        } else if (b[0] == '*')
            r = parse_multibulk(p, b, n);
        else
            r = parse_inline(p, b, n);

        if (r == R_SKIP) {
            off += p->pos;
            parser_restart(p);
            continue;
        }
        if (r == RESP_OK) {
            *consumed = off + p->pos;
            p->state = ST_IDLE;
            p->pos = 0;
            p->need = 0;
            p->nfixed = 0;
            return RESP_OK;
        }
        if (r == RESP_AGAIN)
            *consumed = off;
        return r;
    }
}
