/* http.h - aco_http's HTTP/1.1 request parser and the pieces of its
 * responses that need no I/O: the request head (RFC 9112), the path
 * decoded and checked, a single byte range, HTTP dates, content types.
 * Pure functions over caller memory (no allocation, no I/O; the clock
 * read for RFC 850's two-digit year aside): unit-tested
 * by apps/tests/test_http.c. */
#ifndef HTTP_H
#define HTTP_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

enum { HTTP_GET = 1, HTTP_HEAD, HTTP_OTHER };

/* A parsed request head.  The views (pointer + length) point into the
 * buffer given to http_parse and live as long as it. */
typedef struct {
    size_t head_len;            /* bytes of the head, the empty line too */
    int method;                 /* HTTP_GET, HTTP_HEAD, HTTP_OTHER */
    int minor;                  /* HTTP/1.minor: 0 or 1 */
    int keep_alive;             /* the connection stays open after it */
    int64_t content_length;     /* -1: none */
    const char* target;         /* the request target as sent */
    size_t target_len;
    const char* range;          /* the Range value, NULL if none */
    size_t range_len;
    const char* ims;            /* the If-Modified-Since value, or NULL */
    size_t ims_len;
    const char* ius;            /* If-Unmodified-Since, or NULL */
    size_t ius_len;
    const char* inm;            /* If-None-Match, or NULL */
    size_t inm_len;
    const char* im;             /* If-Match, or NULL */
    size_t im_len;
    const char* if_range;       /* If-Range, or NULL */
    size_t if_range_len;
    int expect_continue;        /* Expect: 100-continue */
} http_req_t;

/* What http_parse found, besides an HTTP status (>= 400). */
enum { HTTP_DONE = 0, HTTP_AGAIN = 1 };

/* Parse the request head at the start of buf[0, n), at most limit bytes
 * long: HTTP_DONE (r filled), HTTP_AGAIN (incomplete: read more; n < limit;
 * of the faults below only a bare CR or LF and a NUL are found before the
 * head is whole) or the status that answers it:
 *   400  a malformed request line or header (a bare LF or CR, a control
 *        byte, a space before a header's colon, a folded line, no Host in
 *        HTTP/1.1, two Hosts, a Host that is not a host[:port] (a space,
 *        userinfo's '@'), a Content-Length that is not a number of at
 *        most 18 digits, several different ones (by value: 5 and 05 are
 *        one), or one with Transfer-Encoding);
 *   414  the request line alone (its CRLF too) is over limit;
 *   431  the head is over limit;
 *   501  Transfer-Encoding (request bodies are read by Content-Length only);
 *   505  an HTTP version other than 1.0 and 1.1.
 * After an error the connection must close (the stream has lost its
 * framing). */
int http_parse(const char* buf, size_t n, size_t limit, http_req_t* r);

/* The path of target (origin-form "/a/b?q", or absolute-form
 * "http://host/a/b"), percent-decoded, with "." segments and empty ones
 * dropped, into out (cap bytes, NUL-terminated, without the leading '/':
 * "" for the root): its length, or a status negated (a length may be
 * 400 too): -400 (not a path, a bad % escape, a NUL, userinfo in an
 * absolute-form's authority), -403 (a ".."
 * segment, also encoded: %2e%2e, "..%2f"), -414 (longer than cap - 1,
 * cap 0 included).  *dir is set when the path
 * names a directory: it ends with '/' or a "." segment, or is the root. */
int http_path(const char* target, size_t len, char* out, size_t cap, int* dir);

/* A single range "bytes=a-b", "bytes=a-", "bytes=-n" of a size-byte file:
 *   1  satisfiable: [*first, *last] (last clamped to size - 1);
 *   0  ignore it (not bytes=, several ranges, a syntax error, a > b):
 *      the whole file, 200;
 *  -1  unsatisfiable (a >= size, or -0): 416. */
int http_range(const char* v, size_t len, int64_t size, int64_t* first, int64_t* last);

/* The preconditions of RFC 9110 (13.2.2) on a GET or HEAD of a file
 * modified at mtime (seconds), which has no entity tag: 0 (none fails),
 * 412 (If-Match names tags, none of which can match; or, without
 * If-Match, If-Unmodified-Since is before mtime) or 304 (If-None-Match: *,
 * which the file matches; or, without If-None-Match, If-Modified-Since not
 * before mtime).  If-None-Match naming tags is true, so If-Modified-Since
 * is then ignored, as the RFC says.  A value that is not an HTTP date
 * (any of http_date_parse's three forms) is ignored. */
int http_preconditions(const http_req_t* r, int64_t mtime);

/* Does r's Range apply to a file modified at mtime?  Yes without If-Range;
 * with it, only if it is a date equal to mtime and mtime is a strong
 * validator, a second or more before now (RFC 9110 8.8.2.2, 13.1.5; an
 * entity tag, which cannot match, another date, or a file changed this
 * second: the whole file, 200). */
int http_range_applies(const http_req_t* r, int64_t mtime);

/* An HTTP date to seconds since the epoch; -1 if it is not one.  The three
 * forms RFC 9110 (5.6.7) has recipients accept: IMF-fixdate ("Sun, 06 Nov
 * 1994 08:49:37 GMT"), RFC 850 ("Sunday, 06-Nov-94 08:49:37 GMT": its
 * two-digit year the one of the hundred years ending 50 years from now,
 * by the clock) and asctime ("Sun Nov  6 08:49:37 1994").  The fields are checked one by
 * one (a day up to 31, a second up to 60, the weekday's name but not that
 * it fits the date): days past a month's end run into the next, as
 * timegm(3) counts (Feb 31 2000 is Mar 2); the second before the epoch
 * is -1 too (If-Modified-Since then does nothing). */
int64_t http_date_parse(const char* v, size_t len);

/* t as an IMF-fixdate into out (at least 30 bytes): its length (29).  A t
 * outside years 0000-9999 (or outside a 32-bit time_t) is said as the
 * nearest time that can be. */
size_t http_date_format(int64_t t, char* out);

/* The Content-Type of a path by its extension (application/octet-stream
 * when unknown). */
const char* http_mime(const char* path, size_t len);

/* The reason phrase of status ("" when unknown). */
const char* http_reason(int status);

#endif
