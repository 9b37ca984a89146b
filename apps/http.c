/* http.c - aco_http's request parser, path check, ranges, dates and
 * content types (http.h): no I/O, no allocation. */
#define _GNU_SOURCE
#include "http.h"

#include <string.h>
#include <strings.h>

/* RFC 9110 5.6.2: token characters (alphanumerics and
 * !#$%&'*+-.^_`|~), a bit each for the bytes below 128. */
static const uint64_t tchars[2] = {0x03ff6cfa00000000u, 0x57ffffffc7fffffeu};
static int tchar(unsigned char c) { return c < 128 && (tchars[c >> 6] >> (c & 63) & 1); }

/* A field value byte: visible, space, tab, or obs-text. */
static int vchar(unsigned char c) { return c == '\t' || (c >= 0x20 && c != 0x7f); }

/* Name p[0, n), all token characters, is lit (lower case, n bytes long:
 * the caller compares lengths first) in any case.  For a token character
 * c, c | 0x20 is a lower-case letter or '-' only if c is that letter in
 * either case or '-' itself. */
static int name_eq(const char* p, const char* lit, size_t n) {
    for (size_t i = 0; i < n; i++)
        if ((p[i] | 0x20) != lit[i]) return 0;
    return 1;
}
static int name_is(const char* p, size_t n, const char* lit) {
    return strlen(lit) == n && strncasecmp(p, lit, n) == 0;
}

#define NAME_IS(p, n, lit) ((n) == sizeof(lit) - 1 && name_eq(p, lit, sizeof(lit) - 1))

/* Digits only, no overflow (at most 18 of them): the value, or -1. */
static int64_t digits(const char* p, size_t n) {
    if (n == 0 || n > 18) return -1;
    int64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9') return -1;
        v = v * 10 + (p[i] - '0');
    }
    return v;
}

/* Connection: a comma list of options; close and keep-alive matter. */
static void connection_opts(const char* v, size_t n, int* close, int* keep) {
    size_t i = 0;
    while (i < n) {
        while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ',')) i++;
        size_t s = i;
        while (i < n && v[i] != ',' && v[i] != ' ' && v[i] != '\t') i++;
        if (NAME_IS(v + s, i - s, "close")) *close = 1;
        if (NAME_IS(v + s, i - s, "keep-alive")) *keep = 1;
    }
}

static int request_line(const char* p, size_t n, http_req_t* r) {
    size_t i = 0;
    while (i < n && tchar((unsigned char)p[i])) i++;
    if (i == 0 || i >= n || p[i] != ' ') return 400;
    if (i == 3 && memcmp(p, "GET", 3) == 0) r->method = HTTP_GET;
    else if (i == 4 && memcmp(p, "HEAD", 4) == 0) r->method = HTTP_HEAD;
    else r->method = HTTP_OTHER;
    size_t t = ++i;
    while (i < n && (unsigned char)p[i] > 0x20 && p[i] != 0x7f) i++;
    if (i == t || i >= n || p[i] != ' ') return 400;
    r->target = p + t;
    r->target_len = i - t;
    const char* v = p + i + 1;
    size_t vn = n - i - 1;
    if (vn != 8 || memcmp(v, "HTTP/", 5) != 0 || v[6] != '.' ||
        v[5] < '0' || v[5] > '9' || v[7] < '0' || v[7] > '9')
        return 400;
    if (v[5] != '1' || (v[7] != '0' && v[7] != '1')) return 505;
    r->minor = v[7] - '0';
    return 0;
}

/* A Host value: uri-host [":" port] (RFC 9112 3.2; empty allowed), no
 * userinfo: any other byte (a space, '@', '/') makes it invalid, which the
 * RFC answers with 400. */
static const uint64_t hostchars[2] = {0x2fff7ff200000000u, 0x47fffffeaffffffeu};
static int host_ok(const char* v, size_t n) {
    /* alphanumerics and -._~%!$&'()*+,;=:[] (a bit each, as tchars) */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)v[i];
        if (c >= 128 || !(hostchars[c >> 6] >> (c & 63) & 1)) return 0;
    }
    return 1;
}

int http_parse(const char* buf, size_t n, size_t limit, http_req_t* r) {
    size_t scan = n < limit ? n : limit;
    size_t start = 0;               /* RFC 9112 2.2: empty lines before it */
    while (start + 1 < scan && buf[start] == '\r' && buf[start + 1] == '\n') start += 2;
    /* One pass up to the empty line that ends the head (a body or the next
     * request may follow): every LF after a CR, every CR before an LF, no
     * NUL, checked on any prefix so that a malformed head is answered at
     * once, not at the limit.  Then every line ends in CRLF.  eol: the
     * first line's LF; end: the empty line's. */
    size_t eol = 0, end = 0;
    for (size_t i = 0; i < scan; i++) {
        unsigned char c = (unsigned char)buf[i];
        if (__builtin_expect(c > '\r', 1)) continue;
        if (c == '\0') return 400;
        if (c == '\r') {
            if (i + 1 < scan && buf[i + 1] != '\n') return 400;
        } else if (c == '\n') {
            if (i == 0 || buf[i - 1] != '\r') return 400;
            if (i > start && eol == 0) eol = i;
            if (i >= start + 3 && buf[i - 2] == '\n') {
                end = i;
                break;
            }
        }
    }
    if (end == 0) {
        if (n < limit) return HTTP_AGAIN;
        return eol ? 431 : 414;
    }
    memset(r, 0, sizeof(*r));
    r->content_length = -1;
    r->head_len = end + 1;
    int e = request_line(buf + start, eol - 1 - start, r);
    if (e) return e;
    int hosts = 0, close = 0, keep = 0, te = 0;
    const char* p = buf + eol + 1;
    const char* stop = buf + end - 1;      /* the empty line's CR */
    while (p < stop) {                      /* each header line */
        size_t i = 0;
        while (tchar((unsigned char)p[i])) i++;
        if (i == 0 || p[i] != ':') return 400;          /* also folds */
        const char* name = p;
        size_t nn = i;
        i++;
        while (p[i] == ' ' || p[i] == '\t') i++;
        size_t vs = i;
        for (; p[i] != '\r'; i++)       /* (a CR here is the line's end) */
            if (!vchar((unsigned char)p[i])) return 400;
        size_t ve = i;
        while (ve > vs && (p[ve - 1] == ' ' || p[ve - 1] == '\t')) ve--;
        const char* v = p + vs;
        size_t vn = ve - vs;
        switch (nn) {
        case 4:
            if (name_eq(name, "host", 4)) {
                if (!host_ok(v, vn)) return 400;
                hosts++;
            }
            break;
        case 5:
            if (name_eq(name, "range", 5)) r->range = v, r->range_len = vn;
            break;
        case 6:
            if (name_eq(name, "expect", 6))
                r->expect_continue = vn == 12 && strncasecmp(v, "100-continue", 12) == 0;
            break;
        case 8:
            if (name_eq(name, "if-range", 8)) r->if_range = v, r->if_range_len = vn;
            else if (name_eq(name, "if-match", 8)) r->im = v, r->im_len = vn;
            break;
        case 10:
            if (name_eq(name, "connection", 10)) connection_opts(v, vn, &close, &keep);
            break;
        case 13:
            if (name_eq(name, "if-none-match", 13)) r->inm = v, r->inm_len = vn;
            break;
        case 14:
            if (name_eq(name, "content-length", 14)) {
                int64_t cl = digits(v, vn);
                if (cl < 0 || (r->content_length >= 0 && r->content_length != cl)) return 400;
                r->content_length = cl;
            }
            break;
        case 17:
            if (name_eq(name, "transfer-encoding", 17)) te = 1;
            else if (name_eq(name, "if-modified-since", 17)) r->ims = v, r->ims_len = vn;
            break;
        case 19:
            if (name_eq(name, "if-unmodified-since", 19)) r->ius = v, r->ius_len = vn;
            break;
        }
        p += i + 2;
    }
    if (te) return r->content_length >= 0 ? 400 : 501;
    if (hosts > 1 || (r->minor == 1 && hosts == 0)) return 400;
    r->keep_alive = r->minor == 1 ? !close : keep && !close;
    return HTTP_DONE;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    c |= 0x20;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* One byte more of out (cap bytes, the NUL's included): 0, or 1 if none
 * is left. */
static int put(char* out, size_t* o, size_t cap, int c) {
    if (*o + 1 >= cap) return 1;
    out[(*o)++] = (char)c;
    return 0;
}

int http_path(const char* t, size_t len, char* out, size_t cap, int* dir) {
    size_t i = 0;
    if (len && t[0] == '/') {
        i = 0;
    } else if ((len >= 7 && strncasecmp(t, "http://", 7) == 0) ||
               (len >= 8 && strncasecmp(t, "https://", 8) == 0)) {
        i = t[4] == ':' ? 7 : 8;
        while (i < len && t[i] != '/' && t[i] != '?' && t[i] != '#')
            if (t[i++] == '@') return -400;     /* userinfo (RFC 9110 4.2.4) */
    } else {
        return -400;
    }
    if (cap == 0) return -414;
    /* Segment by segment; one that may still be "." or ".." (up to two
     * dots so far) is held back (nd), so that what is dropped never needs
     * room: a kept one is written with the '/' before it. */
    size_t o = 0;
    int nd = 0, kept = 0;
    *dir = 1;
    for (;; i++) {
        int c;
        if (i >= len || t[i] == '?' || t[i] == '#') {
            c = -1;
        } else if (t[i] == '%') {
            int h = i + 2 < len ? hexval(t[i + 1]) : -1, l = h >= 0 ? hexval(t[i + 2]) : -1;
            if (l < 0) return -400;
            c = h * 16 + l;
            i += 2;
        } else {
            c = (unsigned char)t[i];
        }
        if (c == 0) return -400;
        if (c == -1 || c == '/') {      /* a segment ends */
            if (!kept && nd == 2) return -403;
            *dir = !kept;               /* (an empty or "." one is dropped) */
            kept = nd = 0;
            if (c == -1) break;
            continue;
        }
        if (!kept && c == '.' && nd < 2) {
            nd++;
            continue;
        }
        if (!kept) {
            if (o && put(out, &o, cap, '/')) return -414;
            for (; nd; nd--)
                if (put(out, &o, cap, '.')) return -414;
            kept = 1;
        }
        if (put(out, &o, cap, c)) return -414;
    }
    out[o] = '\0';
    return (int)o;
}

/* Digits (saturating at 2^62): the value and the count used. */
static size_t num(const char* p, size_t n, int64_t* v) {
    size_t i = 0;
    *v = 0;
    while (i < n && p[i] >= '0' && p[i] <= '9') {
        if (*v < ((int64_t)1 << 58)) *v = *v * 10 + (p[i] - '0');
        else *v = (int64_t)1 << 62;
        i++;
    }
    return i;
}

int http_range(const char* v, size_t len, int64_t size, int64_t* first, int64_t* last) {
    if (len < 6 || strncasecmp(v, "bytes=", 6) != 0) return 0;
    v += 6;
    len -= 6;
    if (memchr(v, ',', len)) return 0;          /* several: the whole file */
    int64_t a, b;
    if (len && v[0] == '-') {                   /* the last b bytes */
        size_t k = num(v + 1, len - 1, &b);
        if (k == 0 || k != len - 1) return 0;
        if (b == 0 || size == 0) return -1;
        *first = b >= size ? 0 : size - b;
        *last = size - 1;
        return 1;
    }
    size_t k = num(v, len, &a);
    if (k == 0 || k >= len || v[k] != '-') return 0;
    size_t k2 = num(v + k + 1, len - k - 1, &b);
    if (k + 1 + k2 != len) return 0;
    if (k2 && b < a) return 0;
    if (a >= size) return -1;
    *first = a;
    *last = k2 == 0 || b >= size ? size - 1 : b;
    return 1;
}

static const char days[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
static const char months[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                   "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

/* Days since 1970-01-01 of a civil date (H. Hinnant's algorithm). */
static int64_t days_from_civil(int64_t y, int m, int d) {
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static int two(const char* p) {
    if (p[0] < '0' || p[0] > '9' || p[1] < '0' || p[1] > '9') return -1;
    return (p[0] - '0') * 10 + (p[1] - '0');
}

/* Seconds since the epoch of a civil time, its fields checked one by one
 * (mon 0-11), or -1. */
static int64_t civil(int64_t y, int mon, int d, int h, int mi, int s) {
    if (mon < 0 || d < 1 || d > 31 || y < 0 || h < 0 || h > 23 || mi < 0 || mi > 59 || s < 0 ||
        s > 60)
        return -1;
    return days_from_civil(y, mon + 1, d) * 86400 + h * 3600 + mi * 60 + s;
}

static int month_of(const char* p) {
    for (int i = 0; i < 12; i++)
        if (memcmp(p, months[i], 3) == 0) return i;
    return -1;
}

/* "hh:mm:ss" at p: 0 and the fields, or -1. */
static int clock_of(const char* p, int* h, int* mi, int* s) {
    if (p[2] != ':' || p[5] != ':') return -1;
    *h = two(p);
    *mi = two(p + 3);
    *s = two(p + 6);
    return 0;
}

int64_t http_date_parse(const char* v, size_t len) {
    int h, mi, s, wd = -1;
    if (len == 29) {
        /* IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT" */
        if (v[3] != ',' || v[4] != ' ' || v[7] != ' ' || v[11] != ' ' || v[16] != ' ' ||
            memcmp(v + 25, " GMT", 4) != 0 || clock_of(v + 17, &h, &mi, &s) < 0)
            return -1;
        for (int i = 0; i < 7; i++) if (memcmp(v, days[i], 3) == 0) wd = i;
        int y1 = two(v + 12), y2 = two(v + 14);
        if (wd < 0 || y1 < 0 || y2 < 0) return -1;
        return civil(y1 * 100 + y2, month_of(v + 8), two(v + 5), h, mi, s);
    }
    if (len == 24) {
        /* asctime: "Sun Nov  6 08:49:37 1994" */
        if (v[3] != ' ' || v[7] != ' ' || v[10] != ' ' || v[19] != ' ' ||
            clock_of(v + 11, &h, &mi, &s) < 0)
            return -1;
        for (int i = 0; i < 7; i++) if (memcmp(v, days[i], 3) == 0) wd = i;
        char dd[2] = {v[8] == ' ' ? '0' : v[8], v[9]};
        int y1 = two(v + 20), y2 = two(v + 22);
        if (wd < 0 || y1 < 0 || y2 < 0) return -1;
        return civil(y1 * 100 + y2, month_of(v + 4), two(dd), h, mi, s);
    }
    /* RFC 850: "Sunday, 06-Nov-94 08:49:37 GMT" */
    static const char* const long_days[7] = {"Sunday", "Monday", "Tuesday", "Wednesday",
                                             "Thursday", "Friday", "Saturday"};
    size_t n = 0;
    for (int i = 0; i < 7 && wd < 0; i++) {
        n = strlen(long_days[i]);
        if (len == n + 24 && memcmp(v, long_days[i], n) == 0) wd = i;
    }
    if (wd < 0) return -1;
    const char* p = v + n;
    if (p[0] != ',' || p[1] != ' ' || p[4] != '-' || p[8] != '-' || p[11] != ' ' ||
        memcmp(p + 20, " GMT", 4) != 0 || clock_of(p + 12, &h, &mi, &s) < 0)
        return -1;
    int yy = two(p + 9);
    if (yy < 0) return -1;
    /* the two-digit year of the hundred years that end 50 years from now
     * (RFC 9110 5.6.7) */
    struct tm tm;
    time_t now = time(NULL);
    int64_t cy = gmtime_r(&now, &tm) ? tm.tm_year + 1900 : 1970;
    int64_t y = cy - cy % 100 + yy;
    if (y > cy + 50) y -= 100;
    else if (y <= cy - 50) y += 100;
    return civil(y, month_of(p + 5), two(p + 2), h, mi, s);
}

size_t http_date_format(int64_t t, char* out) {
    /* four digits of year: 0000-01-01 00:00:00 to 9999-12-31 23:59:59,
     * and what a time_t holds (32 bits on some ABIs) */
    if (t < -62167219200) t = -62167219200;
    if (t > 253402300799) t = 253402300799;
    if ((int64_t)(time_t)t != t) t = t < 0 ? INT32_MIN : INT32_MAX;
    struct tm tm;
    time_t tt = (time_t)t;
    if (gmtime_r(&tt, &tm) == NULL) {
        tt = 0;
        gmtime_r(&tt, &tm);
    }
    int y = tm.tm_year + 1900;
    char* p = out;
    memcpy(p, days[tm.tm_wday], 3);
    p[3] = ',';
    p[4] = ' ';
    p[5] = (char)('0' + tm.tm_mday / 10);
    p[6] = (char)('0' + tm.tm_mday % 10);
    p[7] = ' ';
    memcpy(p + 8, months[tm.tm_mon], 3);
    p[11] = ' ';
    p[12] = (char)('0' + y / 1000 % 10);
    p[13] = (char)('0' + y / 100 % 10);
    p[14] = (char)('0' + y / 10 % 10);
    p[15] = (char)('0' + y % 10);
    p[16] = ' ';
    p[17] = (char)('0' + tm.tm_hour / 10);
    p[18] = (char)('0' + tm.tm_hour % 10);
    p[19] = ':';
    p[20] = (char)('0' + tm.tm_min / 10);
    p[21] = (char)('0' + tm.tm_min % 10);
    p[22] = ':';
    p[23] = (char)('0' + tm.tm_sec / 10);
    p[24] = (char)('0' + tm.tm_sec % 10);
    memcpy(p + 25, " GMT", 4);
    p[29] = '\0';
    return 29;
}

const char* http_mime(const char* path, size_t len) {
    static const struct { const char* ext; const char* type; } tab[] = {
        {"html", "text/html; charset=utf-8"}, {"htm", "text/html; charset=utf-8"},
        {"css", "text/css; charset=utf-8"}, {"js", "text/javascript; charset=utf-8"},
        {"json", "application/json"}, {"txt", "text/plain; charset=utf-8"},
        {"xml", "application/xml"}, {"svg", "image/svg+xml"}, {"png", "image/png"},
        {"jpg", "image/jpeg"}, {"jpeg", "image/jpeg"}, {"gif", "image/gif"},
        {"webp", "image/webp"}, {"ico", "image/x-icon"}, {"pdf", "application/pdf"},
        {"wasm", "application/wasm"}, {"woff2", "font/woff2"}, {"mp4", "video/mp4"},
        {"gz", "application/gzip"}, {"zip", "application/zip"},
    };
    size_t i = len;
    while (i > 0 && path[i - 1] != '.' && path[i - 1] != '/') i--;
    if (i > 0 && path[i - 1] == '.') {
        const char* ext = path + i;
        size_t en = len - i;
        for (size_t k = 0; k < sizeof(tab) / sizeof(tab[0]); k++)
            if (name_is(ext, en, tab[k].ext)) return tab[k].type;
    }
    return "application/octet-stream";
}

/* Is an If-Match / If-None-Match value "*"? */
static int any_tag(const char* v, size_t n) { return n == 1 && v[0] == '*'; }

int http_preconditions(const http_req_t* r, int64_t mtime) {
    if (r->im) {
        if (!any_tag(r->im, r->im_len)) return 412;
    } else if (r->ius) {
        int64_t t = http_date_parse(r->ius, r->ius_len);
        if (t >= 0 && mtime > t) return 412;
    }
    if (r->inm) return any_tag(r->inm, r->inm_len) ? 304 : 0;
    if (r->ims) {
        int64_t t = http_date_parse(r->ims, r->ims_len);
        if (t >= 0 && mtime <= t) return 304;
    }
    return 0;
}

int http_range_applies(const http_req_t* r, int64_t mtime) {
    if (r->if_range == NULL) return 1;
    return http_date_parse(r->if_range, r->if_range_len) == mtime && mtime < (int64_t)time(NULL);
}

const char* http_reason(int status) {
    switch (status) {
    case 200: return "OK";
    case 206: return "Partial Content";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 412: return "Precondition Failed";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 416: return "Range Not Satisfiable";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "";
    }
}
