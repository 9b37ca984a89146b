/* tls_bb_common.h - what the black-box TLS tests share: soft checks that
 * count broken promises (every one printed, the program exits 1 at the
 * end), contexts from the PEM of tls_bb_certs.h, and a client/server pair
 * over a socketpair whose outcome is recorded on both sides. */
#ifndef TLS_BB_COMMON_H
#define TLS_BB_COMMON_H

#define _GNU_SOURCE
#include "rt_test.h"
#include "../aco_rt_tls.h"
#include "tls_bb_certs.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <sys/socket.h>

static int bb_fail;

#define EXPECT(cond, ...)                                                      \
    do {                                                                       \
        if (!(cond)) {                                                         \
            bb_fail++;                                                         \
            fprintf(stderr, "%s:%d: [%s] BROKEN: %s: ", __FILE__, __LINE__,    \
                    test_backend_label, #cond);                                \
            fprintf(stderr, __VA_ARGS__);                                      \
            fputc('\n', stderr);                                               \
        }                                                                      \
    } while (0)
#define EXPECT_EQ(a, b)                                                        \
    do {                                                                       \
        long long a_ = (long long)(a), b_ = (long long)(b);                    \
        EXPECT(a_ == b_, "%lld (%s) vs %lld (%s)", a_,                         \
               a_ < 0 && a_ > -200 ? strerror((int)-a_) : "", b_,              \
               b_ < 0 && b_ > -200 ? strerror((int)-b_) : "");                 \
    } while (0)
#define EXPECT_STR(a, b)                                                       \
    do {                                                                       \
        const char *sa_ = (a), *sb_ = (b);                                     \
        EXPECT(sa_ != NULL && strcmp(sa_, sb_) == 0, "\"%s\" vs \"%s\"",       \
               sa_ ? sa_ : "(null)", sb_);                                     \
    } while (0)
#define EXPECT_HAS(a, needle)                                                  \
    do {                                                                       \
        const char* sa_ = (a);                                                 \
        EXPECT(sa_ != NULL && strstr(sa_, needle) != NULL,                     \
               "\"%s\" lacks \"%s\"", sa_ ? sa_ : "(null)", needle);           \
    } while (0)

#define DL(ms) aco_rt_in_ms(ms)

/* A context from opts, aborting if it cannot be made. */
static inline aco_rt_tls_ctx_t* bb_ctx(aco_rt_tls_opts_t o) {
    char err[256] = "";
    /* BB_TLS_LEND=1: every context reads through lent receives */
    const char* lend = getenv("BB_TLS_LEND");
    if (lend && *lend == '1') o.flags |= ACO_RT_TLS_LEND;
    aco_rt_tls_ctx_t* c = aco_rt_tls_ctx_new(&o, err, sizeof err);
    if (c == NULL) {
        fprintf(stderr, "bb_ctx: %s (%s)\n", err, strerror(errno));
        abort();
    }
    return c;
}
/* A server of cert/key (PEM text). */
static inline aco_rt_tls_ctx_t* bb_server(const char* cert, const char* key) {
    aco_rt_tls_opts_t o = {.server = 1, .cert_pem = cert, .key_pem = key};
    return bb_ctx(o);
}
/* A client that trusts bb-test-ca (in a file: PEM in memory is not a
 * trust option). */
static const char* bb_ca_file = "/tmp/bb_tls_ca.pem";
static const char* bb_ca2_file = "/tmp/bb_tls_ca2.pem";
static inline void bb_write_file(const char* path, const char* text) {
    FILE* f = fopen(path, "w");
    CHECK(f != NULL);
    CHECK(fputs(text, f) >= 0);
    CHECK(fclose(f) == 0);
}
static inline void bb_files(void) {
    static char a[64], b[64];
    snprintf(a, sizeof a, "/tmp/bb_tls_ca.%d.pem", (int)getpid());
    snprintf(b, sizeof b, "/tmp/bb_tls_ca2.%d.pem", (int)getpid());
    bb_ca_file = a;
    bb_ca2_file = b;
    bb_write_file(a, BB_CA_PEM);
    bb_write_file(b, BB_CA2_PEM);
}
static inline void bb_files_rm(void) {
    unlink(bb_ca_file);
    unlink(bb_ca2_file);
}
static inline aco_rt_tls_ctx_t* bb_client(void) {
    aco_rt_tls_opts_t o = {.ca_file = bb_ca_file};
    return bb_ctx(o);
}

/* What one side of a pair saw. */
typedef struct {
    int hs;                 /* handshake's result */
    char err[256];          /* aco_rt_tls_error after it (or after rd) */
    long vr;
    char alpn[64];
    int has_alpn;
    char host[300];
    int has_host;
    char ver[32];
    int resumed;
    ssize_t rd;             /* the client: its read of the echo; the
                               server: the read that ended its loop */
    char rderr[256];
    int shut;
} bb_res_t;

static inline void bb_record(aco_rt_tls_t* t, bb_res_t* r, int hs) {
    r->hs = hs;
    snprintf(r->err, sizeof r->err, "%s", aco_rt_tls_error(t) ? aco_rt_tls_error(t) : "(null)");
    r->vr = aco_rt_tls_verify_result(t);
    const char* a = hs == 0 ? aco_rt_tls_alpn(t) : NULL;
    r->has_alpn = a != NULL;
    snprintf(r->alpn, sizeof r->alpn, "%s", a ? a : "");
    const char* h = aco_rt_tls_host(t);
    r->has_host = h != NULL;
    snprintf(r->host, sizeof r->host, "%s", h ? h : "");
    const char* v = hs == 0 ? aco_rt_tls_version(t) : NULL;
    snprintf(r->ver, sizeof r->ver, "%s", v ? v : "");
    r->resumed = hs == 0 ? aco_rt_tls_resumed(t) : 0;
}

typedef struct {
    aco_rt_tls_ctx_t* ctx;
    int fd;
    bb_res_t* res;
} bb_srv_arg_t;

/* A server co: handshake, then echo until the peer's end, then close_notify. */
static void bb_srv_co(void* arg) {
    bb_srv_arg_t* a = (bb_srv_arg_t*)arg;
    aco_rt_tls_t* t = aco_rt_tls_new(a->ctx, a->fd, NULL);
    CHECK(t != NULL);
    int hs = aco_rt_tls_handshake(t, DL(5000));
    bb_record(t, a->res, hs);
    if (hs == 0) {
        char buf[4096];
        ssize_t n;
        while ((n = aco_rt_tls_read(t, buf, sizeof buf, DL(5000))) > 0)
            if (aco_rt_tls_write(t, buf, (size_t)n, DL(5000)) != n) break;
        a->res->rd = n;
        snprintf(a->res->rderr, sizeof a->res->rderr, "%s", aco_rt_tls_error(t));
        a->res->shut = aco_rt_tls_shutdown(t, DL(5000));
    }
    aco_rt_tls_free(t);
    aco_rt_close(a->fd);
    free(a);
}

static inline aco_rt_co_t* bb_spawn_server(aco_rt_tls_ctx_t* sctx, int fd, bb_res_t* sres) {
    bb_srv_arg_t* a = (bb_srv_arg_t*)calloc(1, sizeof *a);
    CHECK(a != NULL);
    a->ctx = sctx;
    a->fd = fd;
    a->res = sres;
    aco_rt_co_t* co = aco_rt_spawn(NULL, bb_srv_co, a);
    CHECK(co != NULL);
    return co;
}

/* A connected pair of our own on a socketpair (fds in fd): client *c of
 * cctx (for localhost) and server *s of sctx, both handshaken. */
typedef struct {
    aco_rt_tls_t* t;
    int rc;
} bb_hs_t;
static inline void bb_hs_co(void* arg) {
    bb_hs_t* a = (bb_hs_t*)arg;
    a->rc = aco_rt_tls_handshake(a->t, DL(5000));
}
static inline void bb_make_pair(aco_rt_tls_ctx_t* cctx, aco_rt_tls_ctx_t* sctx,
                                aco_rt_tls_t** c, aco_rt_tls_t** s, int fd[2]) {
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fd) == 0);
    *c = aco_rt_tls_new(cctx, fd[0], "localhost");
    *s = aco_rt_tls_new(sctx, fd[1], NULL);
    CHECK(*c && *s);
    bb_hs_t a = {*s, -1};
    aco_rt_co_t* co = aco_rt_spawn(NULL, bb_hs_co, &a);
    CHECK_EQ(aco_rt_tls_handshake(*c, DL(5000)), 0);
    CHECK_EQ(aco_rt_join(co, DL(5000)), 0);
    CHECK_EQ(a.rc, 0);
}

/* From a co: a connection of cctx for host to a server of sctx (a socketpair
 * between them), offering sess if not NULL; client: handshake, "ping\n"
 * there and back, the session into *out if out, close_notify, read to the
 * end. */
static inline void bb_pair(aco_rt_tls_ctx_t* cctx, const char* host, aco_rt_tls_ctx_t* sctx,
                           aco_rt_tls_session_t* sess, bb_res_t* cres, bb_res_t* sres,
                           aco_rt_tls_session_t** out) {
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    memset(cres, 0, sizeof *cres);
    memset(sres, 0, sizeof *sres);
    aco_rt_co_t* sco = bb_spawn_server(sctx, sv[1], sres);
    aco_rt_tls_t* t = aco_rt_tls_new(cctx, sv[0], host);
    CHECK(t != NULL);
    if (sess) CHECK_EQ(aco_rt_tls_set_session(t, sess), 0);
    int hs = aco_rt_tls_handshake(t, DL(5000));
    bb_record(t, cres, hs);
    if (out) *out = NULL;
    if (hs == 0) {
        char buf[16];
        ssize_t w = aco_rt_tls_write(t, "ping\n", 5, DL(5000));
        ssize_t n = w == 5 ? aco_rt_tls_read(t, buf, sizeof buf, DL(5000)) : w;
        cres->rd = n;
        snprintf(cres->rderr, sizeof cres->rderr, "%s", aco_rt_tls_error(t));
        if (n == 5) {
            if (out) *out = aco_rt_tls_session(t);
            cres->shut = aco_rt_tls_shutdown(t, DL(5000));
            while (aco_rt_tls_read(t, buf, sizeof buf, DL(5000)) > 0) {
            }
        }
    }
    aco_rt_tls_free(t);
    aco_rt_close(sv[0]);
    CHECK_EQ(aco_rt_join(sco, DL(10000)), 0);
}


/* A peer of plain OpenSSL on a thread of its own (blocking socket): for
 * what the header's contexts cannot make (TLS 1.2 only, renegotiation). */
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <pthread.h>

typedef struct bb_raw {
    int fd, server, maxv;
    const char *cert, *key, *host;
    void (*fn)(struct bb_raw* r, SSL* ssl);     /* after the handshake */
    SSL_SESSION* sess;          /* offered (client) */
    SSL_CTX* share_ctx;         /* use this context instead of a new one */
    int hs;                     /* SSL_do_handshake's result */
    int reused;
    char errs[256];
    long out;                   /* fn's result */
    pthread_t th;
} bb_raw_t;

static inline SSL_CTX* bb_raw_ctx(int server, int maxv, const char* cert, const char* key) {
    SSL_CTX* c = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
    CHECK(c != NULL);
    if (maxv) CHECK(SSL_CTX_set_max_proto_version(c, maxv) == 1);
    SSL_CTX_set_verify(c, SSL_VERIFY_NONE, NULL);
    if (cert) {
        BIO* b = BIO_new_mem_buf(cert, -1);
        X509* x = PEM_read_bio_X509(b, NULL, NULL, NULL);
        CHECK(x != NULL && SSL_CTX_use_certificate(c, x) == 1);
        X509_free(x);
        BIO_free(b);
        b = BIO_new_mem_buf(key, -1);
        EVP_PKEY* k = PEM_read_bio_PrivateKey(b, NULL, NULL, NULL);
        CHECK(k != NULL && SSL_CTX_use_PrivateKey(c, k) == 1);
        EVP_PKEY_free(k);
        BIO_free(b);
    }
    return c;
}

static void* bb_raw_main(void* arg) {
    bb_raw_t* r = (bb_raw_t*)arg;
    /* plain OpenSSL's socket BIO raises SIGPIPE: not in this thread (the
     * runtime's own calls must never raise it, and the program keeps the
     * default action to see it) */
    sigset_t pipe_set;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, NULL);
    SSL_CTX* c = r->share_ctx ? r->share_ctx : bb_raw_ctx(r->server, r->maxv, r->cert, r->key);
    SSL* ssl = SSL_new(c);
    CHECK(ssl != NULL);
    SSL_set_fd(ssl, r->fd);
    if (r->server) SSL_set_accept_state(ssl);
    else {
        SSL_set_connect_state(ssl);
        if (r->host) SSL_set_tlsext_host_name(ssl, r->host);
        if (r->sess) SSL_set_session(ssl, r->sess);
    }
    ERR_clear_error();
    r->hs = SSL_do_handshake(ssl);
    if (r->hs != 1) ERR_error_string_n(ERR_peek_last_error(), r->errs, sizeof r->errs);
    r->reused = SSL_session_reused(ssl);
    if (r->hs == 1 && r->fn) r->fn(r, ssl);
    SSL_free(ssl);
    if (!r->share_ctx) SSL_CTX_free(c);
    close(r->fd);
    return NULL;
}
static inline void bb_raw_start(bb_raw_t* r) {
    CHECK(pthread_create(&r->th, NULL, bb_raw_main, r) == 0);
}
static inline void bb_raw_join(bb_raw_t* r) {
    CHECK(pthread_join(r->th, NULL) == 0);
}
/* From a co: the peer's end of a new socketpair in r->fd, started; ours back. */
static inline int bb_raw_pair(bb_raw_t* r) {
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    r->fd = sv[1];
    bb_raw_start(r);
    return sv[0];
}

/* Run fn(arg) as a co on every backend, a fresh scheduler each. */
typedef struct {
    aco_rt_fn_t fn;
    void* arg;
} bb_body_t;
static void bb_body(aco_rt_sched_t* s, void* arg) {
    bb_body_t* b = (bb_body_t*)arg;
    test_go(s, b->fn, b->arg);
}
static inline void bb_on_backends(aco_rt_fn_t fn, void* arg) {
    bb_body_t b = {fn, arg};
    test_on_backends(NULL, bb_body, &b);
}

static inline int bb_end(const char* name) {
    bb_files_rm();
    if (bb_fail) {
        fprintf(stderr, "%s: %d broken promise(s)\n", name, bb_fail);
        return 1;
    }
    printf("%s: ok\n", name);
    return 0;
}

#endif
