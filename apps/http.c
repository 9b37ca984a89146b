/* http.c - aco_http's request parser, path check, ranges, dates and
 * content types (http.h): no I/O, no allocation. */
#define _GNU_SOURCE
#include "http.h"

#include <string.h>
#include <strings.h>

/* RFC 9110 5.6.2: token characters. */
static int tchar(unsigned char c) {
    if (c >= '0' && c <= '9') return 1;
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return 1;
    return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* A field value byte: visible, space, tab, or obs-text. */
static int vchar(unsigned char c) { return c == '\t' || (c >= 0x20 && c != 0x7f); }

static int name_is(const char* p, size_t n, const char* lit) {
    return strlen(lit) == n && strncasecmp(p, lit, n) == 0;
}

/* Every LF must follow a CR, and no NUL may come: found on any prefix,
 * so that a malformed head is answered at once, not at the limit. */
static int bare_lf_or_nul(const char* b, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (b[i] == '\0') return 1;
        if (b[i] == '\n' && (i == 0 || b[i - 1] != '\r')) return 1;
        if (b[i] == '\r' && i + 1 < n && b[i + 1] != '\n') return 1;
    }
    return 0;
}

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
        if (name_is(v + s, i - s, "close")) *close = 1;
        if (name_is(v + s, i - s, "keep-alive")) *keep = 1;
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

int http_parse(const char* buf, size_t n, size_t limit, http_req_t* r) {
    size_t scan = n < limit ? n : limit;
    size_t start = 0;               /* RFC 9112 2.2: empty lines before it */
    while (start + 1 < scan && buf[start] == '\r' && buf[start + 1] == '\n') start += 2;
    const char* end = start < scan ? memmem(buf + start, scan - start, "\r\n\r\n", 4) : NULL;
    const char* eol = start < scan ? memmem(buf + start, scan - start, "\r\n", 2) : NULL;
    /* only the head's bytes: a body or the next request may follow */
    if (bare_lf_or_nul(buf, end ? (size_t)(end - buf) + 4 : scan)) return 400;
    if (end == NULL) {
        if (n < limit) return HTTP_AGAIN;
        return eol ? 431 : 414;
    }
    memset(r, 0, sizeof(*r));
    r->content_length = -1;
    r->head_len = (size_t)(end - buf) + 4;
    int e = request_line(buf + start, (size_t)(eol - buf) - start, r);
    if (e) return e;
    int hosts = 0, close = 0, keep = 0, te = 0;
    const char* p = eol + 2;
    while (p < end + 2) {           /* each header line */
        const char* le = memmem(p, (size_t)(end + 2 - p), "\r\n", 2);
        size_t ln = (size_t)(le - p);
        size_t i = 0;
        while (i < ln && tchar((unsigned char)p[i])) i++;
        if (i == 0 || i >= ln || p[i] != ':') return 400;     /* also folds */
        const char* name = p;
        size_t nn = i;
        i++;
        while (i < ln && (p[i] == ' ' || p[i] == '\t')) i++;
        size_t vs = i, ve = ln;
        while (ve > vs && (p[ve - 1] == ' ' || p[ve - 1] == '\t')) ve--;
        for (size_t k = vs; k < ve; k++)
            if (!vchar((unsigned char)p[k])) return 400;
        const char* v = p + vs;
        size_t vn = ve - vs;
        if (name_is(name, nn, "host")) {
            hosts++;
        } else if (name_is(name, nn, "connection")) {
            connection_opts(v, vn, &close, &keep);
        } else if (name_is(name, nn, "content-length")) {
            int64_t cl = digits(v, vn);
            if (cl < 0 || (r->content_length >= 0 && r->content_length != cl)) return 400;
            r->content_length = cl;
        } else if (name_is(name, nn, "transfer-encoding")) {
            te = 1;
        } else if (name_is(name, nn, "range")) {
            r->range = v;
            r->range_len = vn;
        } else if (name_is(name, nn, "if-modified-since")) {
            r->ims = v;
            r->ims_len = vn;
        }
        p = le + 2;
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

int http_path(const char* t, size_t len, char* out, size_t cap, int* dir) {
    size_t i = 0;
    if (len && t[0] == '/') {
        i = 0;
    } else if ((len >= 7 && strncasecmp(t, "http://", 7) == 0) ||
               (len >= 8 && strncasecmp(t, "https://", 8) == 0)) {
        i = t[4] == ':' ? 7 : 8;
        while (i < len && t[i] != '/' && t[i] != '?' && t[i] != '#') i++;
    } else {
        return 400;
    }
    size_t o = 0, seg = 0;
    *dir = 1;
    for (;; i++) {
        int c;
        if (i >= len || t[i] == '?' || t[i] == '#') {
            c = -1;
        } else if (t[i] == '%') {
            int h = i + 2 < len ? hexval(t[i + 1]) : -1, l = h >= 0 ? hexval(t[i + 2]) : -1;
            if (l < 0) return 400;
            c = h * 16 + l;
            if (c == 0) return 400;
            i += 2;
        } else {
            c = (unsigned char)t[i];
        }
        if (c == -1 || c == '/') {  /* a segment ends: look at it */
            size_t sl = o - seg;
            if (sl == 0 || (sl == 1 && out[seg] == '.')) {
                o = seg;
                *dir = 1;
            } else if (sl == 2 && out[seg] == '.' && out[seg + 1] == '.') {
                return 403;
            } else {
                *dir = 0;
                if (c == '/') {
                    if (o + 1 >= cap) return 414;
                    out[o++] = '/';
                }
            }
            if (c == -1) break;
            seg = o;
            continue;
        }
        if (o + 1 >= cap) return 414;
        out[o++] = (char)c;
    }
    if (o && out[o - 1] == '/') {
        o--;
        *dir = 1;
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

int64_t http_date_parse(const char* v, size_t len) {
    /* "Sun, 06 Nov 1994 08:49:37 GMT" */
    if (len != 29 || v[3] != ',' || v[4] != ' ' || v[7] != ' ' || v[11] != ' ' ||
        v[16] != ' ' || v[19] != ':' || v[22] != ':' || memcmp(v + 25, " GMT", 4) != 0)
        return -1;
    int wd = -1, mon = -1;
    for (int i = 0; i < 7; i++) if (memcmp(v, days[i], 3) == 0) wd = i;
    for (int i = 0; i < 12; i++) if (memcmp(v + 8, months[i], 3) == 0) mon = i;
    int d = two(v + 5), y1 = two(v + 12), y2 = two(v + 14);
    int h = two(v + 17), mi = two(v + 20), s = two(v + 23);
    if (wd < 0 || mon < 0 || d < 1 || d > 31 || y1 < 0 || y2 < 0 || h < 0 || h > 23 ||
        mi < 0 || mi > 59 || s < 0 || s > 60)
        return -1;
    int64_t days_ = days_from_civil(y1 * 100 + y2, mon + 1, d);
    return days_ * 86400 + h * 3600 + mi * 60 + s;
}

size_t http_date_format(int64_t t, char* out) {
    struct tm tm;
    time_t tt = (time_t)t;
    gmtime_r(&tt, &tm);
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

const char* http_reason(int status) {
    switch (status) {
    case 200: return "OK";
    case 206: return "Partial Content";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 416: return "Range Not Satisfiable";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 505: return "HTTP Version Not Supported";
    default: return "";
    }
}
