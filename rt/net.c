/* net.c - connections in one call: aco_rt_listen and aco_rt_dial on
 * "host:port", and the address parsing and name resolution under them.
 *
 * Numeric addresses are parsed here (inet_pton) and never reach the
 * resolver; names go to getaddrinfo(3) on a helper thread (aco_rt_offload)
 * so that the co parks and its thread goes on.  The lookup's record is on
 * the heap: the helper writes it while the co's share stack may belong to
 * another co, and a co that stops waiting (deadline, cancel) leaves the
 * record to the lookup's drop, which frees it once getaddrinfo returns.
 *
 * Nothing is worked around: each failure is returned as -errno and the
 * socket made on the way is closed (the issue this answers: a bind that
 * failed and went on to listen on a random port).
 */
#define _GNU_SOURCE
#include "rt_impl.h"
#include "rt_sys.h"

#include <arpa/inet.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>

#define HOST_MAX 253                    /* a DNS name's longest text form */
#define DEF_BACKLOG 4096
#define KNOWN_FLAGS (ACO_RT_NET_REUSEPORT | ACO_RT_NET_NODELAY | ACO_RT_NET_INHERIT | \
                     ACO_RT_NET_NO_REUSEADDR)

enum { ADDR_NUM, ADDR_ANY, ADDR_NAME };

/* addr taken apart (on the caller's stack: nothing else writes it). */
typedef struct {
    int kind;
    int port;
    struct sockaddr_storage ss;         /* ADDR_NUM */
    socklen_t len;
    char host[HOST_MAX + 1];            /* ADDR_NAME */
} net_addr_t;

/* ------------------------------------------------------------------------ */
/* Parsing                                                                  */
/* ------------------------------------------------------------------------ */

/* "0".."65535", nothing else: the port, or -EINVAL. */
static int parse_port(const char* p) {
    int v = 0, n = 0;
    for (; *p; p++, n++) {
        if (*p < '0' || *p > '9' || n == 5) return -EINVAL;
        v = v * 10 + (*p - '0');
    }
    return n == 0 || v > 65535 ? -EINVAL : v;
}

/* An IPv6 address with an optional "%scope" (an interface name or
 * number), len bytes at h: 0 or -EINVAL. */
static int parse_v6(net_addr_t* a, const char* h, size_t len) {
    char buf[INET6_ADDRSTRLEN + IF_NAMESIZE + 2];
    if (len == 0 || len >= sizeof(buf)) return -EINVAL;
    memcpy(buf, h, len);
    buf[len] = '\0';
    struct sockaddr_in6* s6 = (struct sockaddr_in6*)&a->ss;
    char* pct = strchr(buf, '%');
    if (pct) {
        *pct++ = '\0';
        int idx = parse_port(pct);      /* (digits: a number) */
        if (idx < 0) idx = (int)if_nametoindex(pct);
        if (idx <= 0) return -EINVAL;
        s6->sin6_scope_id = (uint32_t)idx;
    }
    if (inet_pton(AF_INET6, buf, &s6->sin6_addr) != 1) return -EINVAL;
    s6->sin6_family = AF_INET6;
    a->len = sizeof(*s6);
    a->kind = ADDR_NUM;
    return 0;
}

/* A name's characters: letters, digits, '-', '.', '_' (what resolvers
 * take; anything else, a space or a control character, is malformed). */
static int name_ok(const char* h, size_t len) {
    if (len == 0 || len > HOST_MAX) return 0;
    for (size_t i = 0; i < len; i++) {
        char c = h[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '.' || c == '_'))
            return 0;
    }
    return 1;
}

static int parse_addr(const char* addr, net_addr_t* a) {
    if (addr == NULL) return -EINVAL;
    memset(a, 0, sizeof(*a));
    const char* colon;
    int r;
    if (addr[0] == '[') {
        const char* close = strchr(addr, ']');
        if (close == NULL || close[1] != ':') return -EINVAL;
        colon = close + 1;
        if ((r = parse_v6(a, addr + 1, (size_t)(close - addr - 1))) < 0) return r;
    } else {
        colon = strrchr(addr, ':');
        if (colon == NULL) return -EINVAL;
        size_t len = (size_t)(colon - addr);
        if (memchr(addr, ':', len)) return -EINVAL;    /* IPv6 needs brackets */
        if (len == 0) {
            a->kind = ADDR_ANY;
        } else if (name_ok(addr, len)) {
            memcpy(a->host, addr, len);
            a->host[len] = '\0';
            struct sockaddr_in* s4 = (struct sockaddr_in*)&a->ss;
            if (inet_pton(AF_INET, a->host, &s4->sin_addr) == 1) {
                s4->sin_family = AF_INET;
                a->len = sizeof(*s4);
                a->kind = ADDR_NUM;
            } else {
                a->kind = ADDR_NAME;
            }
        } else {
            return -EINVAL;
        }
    }
    if ((r = parse_port(colon + 1)) < 0) return r;
    a->port = r;
    return 0;
}

static void set_port(struct sockaddr* sa, int port) {
    if (sa->sa_family == AF_INET) ((struct sockaddr_in*)sa)->sin_port = htons((uint16_t)port);
    else ((struct sockaddr_in6*)sa)->sin6_port = htons((uint16_t)port);
}

/* ------------------------------------------------------------------------ */
/* Names                                                                    */
/* ------------------------------------------------------------------------ */

/* A lookup, in the heap (see the top). */
typedef struct {
    char   host[HOST_MAX + 1];
    int    passive;
    int    rc;                          /* getaddrinfo's */
    int    err;                         /* errno after it (EAI_SYSTEM) */
    struct addrinfo* res;
} lookup_t;

static void* lookup_run(void* arg) {
    lookup_t* l = arg;
    struct addrinfo hints;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = l->passive ? AI_PASSIVE : 0;
    errno = 0;
    l->rc = getaddrinfo(l->host, NULL, &hints, &l->res);
    l->err = errno;
    return l;
}

/* The co stopped waiting: nobody else will take the result. */
__attribute__((unused)) static void lookup_drop(void* arg, void* result) {
    (void)result;
    lookup_t* l = arg;
    if (l->rc == 0 && l->res) freeaddrinfo(l->res);
    free(l);
}

/* getaddrinfo's failure as an errno (the list is in aco_rt.h).  glibc says
 * EAI_NONAME also when it could not open a file or socket to look with:
 * errno tells that from a name not found. */
static int gai_errno(int rc, int err) {
    switch (rc) {
    case EAI_NONAME:
#ifdef EAI_NODATA
    case EAI_NODATA:
#endif
        return err == EMFILE || err == ENFILE || err == ENOMEM ? -err : -ENXIO;
    case EAI_AGAIN:  return -EAGAIN;
    case EAI_MEMORY: return -ENOMEM;
    case EAI_FAMILY:
#ifdef EAI_ADDRFAMILY
    case EAI_ADDRFAMILY:
#endif
        return -EAFNOSUPPORT;
    case EAI_SYSTEM: return err > 0 ? -err : -EIO;
    default:         return -EIO;
    }
}

/* Resolve a->host: the addresses in *out (freeaddrinfo them), or -errno.
 * In a co of the threaded build on a helper thread; elsewhere here. */
static int resolve(const net_addr_t* a, int passive, struct addrinfo** out, int64_t deadline) {
    lookup_t* l = calloc(1, sizeof(*l));
    if (l == NULL) return -ENOMEM;
    memcpy(l->host, a->host, sizeof(l->host));
    l->passive = passive;
#ifndef ACO_RT_NO_THREADS
    if (rt_self()) {
        int r = aco_rt_offload(lookup_run, l, lookup_drop, NULL, deadline);
        if (r == -ETIMEDOUT || r == -ECANCELED) return r;   /* l is drop's */
        if (r < 0) { free(l); return r; }
    } else
#endif
    {
        (void)deadline;
        lookup_run(l);
    }
    int r = l->rc ? gai_errno(l->rc, l->err) : 0;
    if (r == 0 && l->res == NULL) r = -ENXIO;
    if (r == 0) *out = l->res;
    else if (l->rc == 0) freeaddrinfo(l->res);
    free(l);
    return r;
}

/* ------------------------------------------------------------------------ */
/* Listen                                                                   */
/* ------------------------------------------------------------------------ */

/* (dial ignores the backlog) */
static int opts_check(const aco_rt_net_opts_t* o, int listening) {
    return o && ((listening && o->backlog < 0) || (o->flags & ~(unsigned)KNOWN_FLAGS))
           ? -EINVAL : 0;
}

static int set_int(int fd, int level, int opt, int v) {
    return setsockopt(fd, level, opt, &v, sizeof(v)) < 0 ? -errno : 0;
}

/* A listening socket on sa: the descriptor or -errno.  dual: an IPv6
 * wildcard that takes IPv4 too. */
static int listen_on(const struct sockaddr* sa, socklen_t len, const aco_rt_net_opts_t* o,
                     int dual) {
    unsigned fl = o ? o->flags : 0;
    int backlog = o && o->backlog ? o->backlog : DEF_BACKLOG;
    int fd = socket(sa->sa_family, SOCK_STREAM | (fl & ACO_RT_NET_INHERIT ? 0 : SOCK_CLOEXEC), 0);
    if (fd < 0) return -errno;
    int r = 0;
    if (!(fl & ACO_RT_NET_NO_REUSEADDR)) r = set_int(fd, SOL_SOCKET, SO_REUSEADDR, 1);
    if (!r && (fl & ACO_RT_NET_REUSEPORT)) r = set_int(fd, SOL_SOCKET, SO_REUSEPORT, 1);
    if (!r && (fl & ACO_RT_NET_NODELAY)) r = set_int(fd, IPPROTO_TCP, TCP_NODELAY, 1);
    if (!r && dual) r = set_int(fd, IPPROTO_IPV6, IPV6_V6ONLY, 0);
    if (!r && bind(fd, sa, len) < 0) r = -errno;
    if (!r && listen(fd, backlog) < 0) r = -errno;
    if (r == 0) return fd;
    rt_sys_close(fd);
    return r;
}

int aco_rt_listen(const char* addr, const aco_rt_net_opts_t* opts, int64_t deadline) {
    net_addr_t a;
    int r = opts_check(opts, 1);
    if (r == 0) r = parse_addr(addr, &a);
    if (r < 0) return r;
    if (a.kind == ADDR_NUM) {
        set_port((struct sockaddr*)&a.ss, a.port);
        return listen_on((struct sockaddr*)&a.ss, a.len, opts, 0);
    }
    if (a.kind == ADDR_ANY) {
        struct sockaddr_in6 s6 = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)a.port),
                                  .sin6_addr = IN6ADDR_ANY_INIT};
        r = listen_on((struct sockaddr*)&s6, sizeof(s6), opts, 1);
        if (r != -EAFNOSUPPORT) return r;
        /* no IPv6 in this kernel: every address there is is IPv4 */
        struct sockaddr_in s4 = {.sin_family = AF_INET, .sin_port = htons((uint16_t)a.port),
                                 .sin_addr = {htonl(INADDR_ANY)}};
        return listen_on((struct sockaddr*)&s4, sizeof(s4), opts, 0);
    }
    struct addrinfo* ai;
    if ((r = resolve(&a, 1, &ai, deadline)) < 0) return r;
    set_port(ai->ai_addr, a.port);
    r = listen_on(ai->ai_addr, ai->ai_addrlen, opts, 0);    /* the first only */
    freeaddrinfo(ai);
    return r;
}

/* ------------------------------------------------------------------------ */
/* Dial                                                                     */
/* ------------------------------------------------------------------------ */

static int dial_one(const struct sockaddr* sa, socklen_t len, unsigned fl, int64_t deadline) {
    int fd = socket(sa->sa_family, SOCK_STREAM | (fl & ACO_RT_NET_INHERIT ? 0 : SOCK_CLOEXEC), 0);
    if (fd < 0) return -errno;
    int r = fl & ACO_RT_NET_NODELAY ? set_int(fd, IPPROTO_TCP, TCP_NODELAY, 1) : 0;
    if (r < 0) {
        rt_sys_close(fd);
        return r;
    }
    if ((r = aco_rt_connect(fd, sa, len, deadline)) == 0) return fd;
    aco_rt_close(fd);                   /* the runtime has seen it: tell it */
    return r;
}

/* Try each address in order: the first descriptor that connects, or the
 * last error.  Errors no other address can mend end the tries. */
static int dial_list(struct addrinfo* ai, int port, unsigned fl, int64_t deadline) {
    int r = -ENXIO;
    for (; ai; ai = ai->ai_next) {
        set_port(ai->ai_addr, port);
        r = dial_one(ai->ai_addr, ai->ai_addrlen, fl, deadline);
        if (r >= 0 || r == -ECANCELED || r == -EMFILE || r == -ENFILE || r == -ENOMEM ||
            (r == -ETIMEDOUT && deadline != -1 && (deadline <= 0 || rt_now() >= deadline)))
            return r;
    }
    return r;
}

int aco_rt_dial(const char* addr, const aco_rt_net_opts_t* opts, int64_t deadline) {
    if (rt_self() == NULL) return -EPERM;
    net_addr_t a;
    int r = opts_check(opts, 0);
    if (r == 0) r = parse_addr(addr, &a);
    if (r < 0) return r;
    if (a.port == 0) return -EINVAL;
    unsigned fl = opts ? opts->flags : 0;
    if (a.kind == ADDR_NUM) {
        set_port((struct sockaddr*)&a.ss, a.port);
        return dial_one((struct sockaddr*)&a.ss, a.len, fl, deadline);
    }
    if (a.kind == ADDR_ANY) {           /* this host: 127.0.0.1, then ::1 */
        struct sockaddr_in s4 = {.sin_family = AF_INET, .sin_addr = {htonl(INADDR_LOOPBACK)}};
        struct sockaddr_in6 s6 = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
        struct addrinfo a6 = {.ai_family = AF_INET6, .ai_addr = (struct sockaddr*)&s6,
                              .ai_addrlen = sizeof(s6)};
        struct addrinfo a4 = {.ai_family = AF_INET, .ai_addr = (struct sockaddr*)&s4,
                              .ai_addrlen = sizeof(s4), .ai_next = &a6};
        return dial_list(&a4, a.port, fl, deadline);
    }
    struct addrinfo* ai;
    if ((r = resolve(&a, 0, &ai, deadline)) < 0) return r;
    r = dial_list(ai, a.port, fl, deadline);
    freeaddrinfo(ai);
    return r;
}

int aco_rt_net_port(int fd) {
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    if (getsockname(fd, (struct sockaddr*)&ss, &len) < 0) return -errno;
    if (ss.ss_family == AF_INET) return ntohs(((struct sockaddr_in*)&ss)->sin_port);
    if (ss.ss_family == AF_INET6) return ntohs(((struct sockaddr_in6*)&ss)->sin6_port);
    return -EAFNOSUPPORT;
}
