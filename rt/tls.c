/* tls.c - TLS over OpenSSL 3 for the runtime's cos (aco_rt_tls.h): the
 * library libaco_rt_tls, above the runtime's public calls.
 *
 * Every OpenSSL call goes through one door (ossl_*): the thread's error
 * queue emptied, the syscall hooks paused (OpenSSL must never switch cos
 * inside: it may hold a lock or be in pthread_once), the call, the queue
 * read into the connection's own error, emptied again.  Only then may the
 * co wait (aco_rt_wait) and another co run.  The BIO below never blocks:
 * recv/send with MSG_DONTWAIT straight to the kernel (rt_sys.h).
 */
#define _GNU_SOURCE
#include "aco_rt_tls.h"
#include "rt_sys.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#define REC_MAX 16384           /* a record's plaintext, at most */
#define ERR_LEN 200

typedef struct {
    char* name;                 /* as given (compared without case); "*.x.y": one label */
    aco_rt_tls_ctx_t* ctx;
} host_t;

struct aco_rt_tls_ctx {
    SSL_CTX* ssl;
    int refs;                   /* the caller's hold, and one per connection */
    int server;
    unsigned flags;
    unsigned char* alpn;        /* ALPN's wire form: length-prefixed names */
    unsigned alpn_len;
    host_t* hosts;
    int nhosts;
};

struct aco_rt_tls {
    SSL* ssl;
    aco_rt_tls_ctx_t* ctx;
    int fd;
    int dead;                   /* the error that ended it, or 0 */
    int wdead;                  /* the error that ended its writing side, or 0 */
    int sys_err;                /* the BIO's last recv/send errno */
    int sys_sent;               /* ... a send's (not a recv's) */
    int eof;                    /* the BIO met the stream's end */
    int want;                   /* the last call's SSL_ERROR_WANT_*, or 0 (a
                                   wait that saw bytes come clears WANT_READ:
                                   before the handshake's end, WANT_READ says
                                   what t holds is part of a record) */
    int hs_done;                /* the handshake completed */
    int shut;                   /* our close_notify went (or nothing to end) */
    int offered_alpn;           /* a client that offered ALPN */
    int more;                   /* records of this write follow: MSG_MORE */
    int by_lends;               /* ACO_RT_TLS_LEND in effect: 1, not: -1, not yet known: 0 */
    const char* lent;           /* a lent buffer whose bytes OpenSSL has not read: */
    uint32_t lent_off, lent_len;    /* lent[lent_off, lent_len) */
    int lent_end;               /* the lends said the stream's end (0) or an error (-errno) */
    int lent_ended;             /* ... and lent_end holds it */
    char* held;                 /* a record's plaintext OpenSSL holds half
                                   sent after a write's deadline or cancel,
                                   counted as written (REC_MAX, lazily) */
    size_t held_len;
    char* gather;               /* writev's record, REC_MAX bytes (in a writev
                                   that gathers, and only then) */
    char* alpn;                 /* the protocol ALPN chose, as a string (lazily) */
    char* host;                 /* a client's: the host it was made for, or NULL */
    int host_is_ip;             /* ... an address (no SNI) */
    char err[ERR_LEN];
};

/* ------------------------------------------------------------------------ */
/* OpenSSL's start, and the BIO                                              */
/* ------------------------------------------------------------------------ */

static pthread_once_t once = PTHREAD_ONCE_INIT;
static BIO_METHOD* bio_method;

static int bio_write(BIO* b, const char* buf, size_t n, size_t* done) {
    aco_rt_tls_t* t = BIO_get_data(b);
    BIO_clear_retry_flags(b);
    ssize_t r = rt_sys_send(t->fd, buf, n, MSG_DONTWAIT | MSG_NOSIGNAL | (t->more ? MSG_MORE : 0));
    if (r >= 0) {
        *done = (size_t)r;
        return 1;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) BIO_set_retry_write(b);
    else t->sys_err = errno, t->sys_sent = 1;
    return 0;
}

/* A connection that lends (ACO_RT_TLS_LEND): OpenSSL reads what the last
 * lend brought; none left: a retry, without a system call (the co waits
 * for the next lend outside OpenSSL: after). */
static int bio_read_lent(BIO* b, aco_rt_tls_t* t, char* buf, size_t n, size_t* done) {
    if (t->lent) {
        size_t k = t->lent_len - t->lent_off;
        if (k > n) k = n;
        memcpy(buf, t->lent + t->lent_off, k);
        t->lent_off += (uint32_t)k;
        if (t->lent_off == t->lent_len) {
            aco_rt_lend_return(t->lent);
            t->lent = NULL;
        }
        *done = k;
        return 1;
    }
    if (!t->lent_ended) {
        BIO_set_retry_read(b);
        return 0;
    }
    *done = 0;
    if (t->lent_end == 0) t->eof = 1;
    else t->sys_err = -t->lent_end, t->sys_sent = 0;
    return 0;
}

static int bio_read(BIO* b, char* buf, size_t n, size_t* done) {
    aco_rt_tls_t* t = BIO_get_data(b);
    BIO_clear_retry_flags(b);
    if (t->by_lends > 0) return bio_read_lent(b, t, buf, n, done);
    ssize_t r = rt_sys_recv(t->fd, buf, n, MSG_DONTWAIT);
    if (r > 0) {
        *done = (size_t)r;
        return 1;
    }
    if (r == 0) {
        *done = 0;
        t->eof = 1;
        return 0;               /* the end of the stream */
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) BIO_set_retry_read(b);
    else t->sys_err = errno, t->sys_sent = 0;
    return 0;
}

static long bio_ctrl(BIO* b, int cmd, long num, void* ptr) {
    aco_rt_tls_t* t = BIO_get_data(b);
    (void)num;
    switch (cmd) {
    case BIO_CTRL_FLUSH: return 1;          /* nothing is buffered here */
    case BIO_CTRL_EOF: return t->eof;
    case BIO_C_GET_FD:
        if (ptr) *(int*)ptr = t->fd;
        return t->fd;
    default: return 0;
    }
}

static int bio_create(BIO* b) {
    BIO_set_init(b, 1);
    return 1;
}

static void start(void) {
    aco_rt_hooks_pause();
    OPENSSL_init_ssl(OPENSSL_INIT_LOAD_SSL_STRINGS | OPENSSL_INIT_LOAD_CRYPTO_STRINGS, NULL);
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "aco_rt_tls");
    if (m && BIO_meth_set_write_ex(m, bio_write) && BIO_meth_set_read_ex(m, bio_read) &&
        BIO_meth_set_ctrl(m, bio_ctrl) && BIO_meth_set_create(m, bio_create))
        bio_method = m;
    else
        BIO_meth_free(m);
    ERR_clear_error();
    aco_rt_hooks_resume();
}

static int started(void) {
    pthread_once(&once, start);
    return bio_method != NULL;
}

/* ------------------------------------------------------------------------ */
/* Errors                                                                     */
/* ------------------------------------------------------------------------ */

/* OpenSSL's last reason in the thread's queue into out ("" if none); the
 * queue emptied.  1 if any error in it is an allocation that failed:
 * OpenSSL 3.0 often ends such a queue with "internal error", "EVP lib"
 * or "ASN1 lib" (or a verification it could not finish), the malloc
 * failure deeper down; 0 else. */
static int take_reason(char* out, size_t len) {
    unsigned long e = ERR_peek_last_error();
    out[0] = 0;
    if (e) {
        const char* r = ERR_reason_error_string(e);
        if (r) snprintf(out, len, "%s", r);
        else snprintf(out, len, "OpenSSL error %lx", e);
    }
    int oom = 0;
    while ((e = ERR_get_error()) != 0)
        if (ERR_SYSTEM_ERROR(e) ? ERR_GET_REASON(e) == ENOMEM
                                : ERR_GET_REASON(e) == ERR_R_MALLOC_FAILURE)
            oom = 1;
    return oom;
}

static void say(char* err, size_t len, const char* fmt, ...) {
    if (err == NULL || len == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
}

/* ------------------------------------------------------------------------ */
/* Contexts                                                                  */
/* ------------------------------------------------------------------------ */

/* "a,b" into ALPN's wire form: 0 or -EINVAL/-ENOMEM. */
static int alpn_wire(const char* list, unsigned char** out, unsigned* outlen) {
    size_t n = strlen(list);
    unsigned char* w = malloc(n + 1);
    if (w == NULL) return -ENOMEM;
    size_t k = 0;
    const char* p = list;
    for (;;) {
        const char* c = strchr(p, ',');
        size_t l = c ? (size_t)(c - p) : strlen(p);
        if (l == 0 || l > 255) {
            free(w);
            return -EINVAL;
        }
        w[k++] = (unsigned char)l;
        memcpy(w + k, p, l);
        k += l;
        if (c == NULL) break;
        p = c + 1;
    }
    *out = w;
    *outlen = (unsigned)k;
    return 0;
}

/* A server picks the first of its list that the client offers. */
static int alpn_select(SSL* ssl, const unsigned char** out, unsigned char* outlen,
                       const unsigned char* in, unsigned inlen, void* arg) {
    (void)ssl;
    aco_rt_tls_ctx_t* c = arg;
    for (unsigned i = 0; i < c->alpn_len; i += 1u + c->alpn[i])
        for (unsigned j = 0; j < inlen; j += 1u + in[j])
            if (in[j] == c->alpn[i] && j + 1u + in[j] <= inlen &&
                memcmp(in + j + 1, c->alpn + i + 1, in[j]) == 0) {
                *out = c->alpn + i + 1;
                *outlen = c->alpn[i];
                return SSL_TLSEXT_ERR_OK;
            }
    return SSL_TLSEXT_ERR_ALERT_FATAL;     /* no_application_protocol */
}

static int host_match(const char* pat, const char* name) {
    if (pat[0] == '*' && pat[1] == '.') {
        const char* dot = strchr(name, '.');
        return dot != NULL && dot != name && strcasecmp(dot + 1, pat + 2) == 0;
    }
    return strcasecmp(pat, name) == 0;
}

static int servername(SSL* ssl, int* alert, void* arg) {
    aco_rt_tls_ctx_t* c = arg;
    const char* name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
    if (name == NULL) return SSL_TLSEXT_ERR_OK;
    /* the host's certificate chain and key alone: ALPN, versions, trust
     * and tickets stay this context's (SSL_set_SSL_CTX would switch them) */
    for (int i = 0; i < c->nhosts; i++)
        if (host_match(c->hosts[i].name, name)) {
            SSL_CTX* h = c->hosts[i].ctx->ssl;
            STACK_OF(X509)* chain = NULL;
            SSL_CTX_get0_chain_certs(h, &chain);
            /* (the default's certificates of other key types go too: a
             * client preferring ECDSA must not get the default's) */
            SSL_certs_clear(ssl);
            if (!SSL_use_cert_and_key(ssl, SSL_CTX_get0_certificate(h), SSL_CTX_get0_privatekey(h),
                                      chain, 1)) {
                *alert = SSL_AD_INTERNAL_ERROR;
                return SSL_TLSEXT_ERR_ALERT_FATAL;
            }
            break;
        }
    return SSL_TLSEXT_ERR_OK;
}

/* No passphrase: an encrypted key is refused (OpenSSL would otherwise ask
 * on the terminal, stopping the thread). */
static int no_pass(char* buf, int size, int rw, void* u) {
    (void)buf, (void)size, (void)rw, (void)u;
    return 0;
}

/* The certificate chain and key from PEM text. */
static int use_pem(SSL_CTX* s, const char* cert, const char* key) {
    int ok = 0;
    BIO* b = BIO_new_mem_buf(cert, -1);
    X509* x = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
    if (x && SSL_CTX_use_certificate(s, x) == 1) {
        ok = 1;
        X509* more;
        while (ok && (more = PEM_read_bio_X509(b, NULL, NULL, NULL)) != NULL)
            if (!SSL_CTX_add0_chain_cert(s, more)) {
                X509_free(more);
                ok = 0;
            }
        ERR_clear_error();      /* (the end of the PEM text) */
    }
    X509_free(x);
    BIO_free(b);
    if (!ok) return 0;
    b = BIO_new_mem_buf(key, -1);
    EVP_PKEY* k = b ? PEM_read_bio_PrivateKey(b, NULL, no_pass, NULL) : NULL;
    ok = k && SSL_CTX_use_PrivateKey(s, k) == 1;
    EVP_PKEY_free(k);
    BIO_free(b);
    return ok;
}

static int readable(const char* path, const char* what, char* err, size_t errlen) {
    if (access(path, R_OK) == 0) return 0;
    int e = errno;
    say(err, errlen, "aco_rt_tls_ctx_new: %s %s: %s", what, path, strerror(e));
    return e;
}

static SSL_CTX* make_ctx(const aco_rt_tls_opts_t* o, aco_rt_tls_ctx_t* c, char* err,
                         size_t errlen, int* eno) {
    char why[ERR_LEN];
    const char* step = "SSL_CTX_new";
    SSL_CTX* s = SSL_CTX_new(o->server ? TLS_server_method() : TLS_client_method());
    if (s == NULL) goto ossl;
    step = "the oldest version";
    if (!SSL_CTX_set_min_proto_version(s, o->min_version ? o->min_version : TLS1_2_VERSION))
        goto ossl;
    /* IGNORE_UNEXPECTED_EOF: a stream that ends without close_notify is
     * OpenSSL's close_notify then, not a fatal error with a decode_error
     * alert sent to a peer that only closed (after() tells the two apart
     * by the BIO's end) */
    SSL_CTX_set_options(s, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION |
                               SSL_OP_IGNORE_UNEXPECTED_EOF |
                               (o->flags & ACO_RT_TLS_NO_TICKETS ? SSL_OP_NO_TICKET : 0));
    /* partial writes: one record at a time (a deadline can end a write
     * between them); a retry may offer the bytes from another address (a
     * bufio moves them); an idle connection keeps no record buffers */
    SSL_CTX_set_mode(s, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                            SSL_MODE_RELEASE_BUFFERS);
    if (o->flags & ACO_RT_TLS_NO_TICKETS) {
        SSL_CTX_set_num_tickets(s, 0);
        /* (TLS 1.2 would resume by session id from the server's cache) */
        SSL_CTX_set_session_cache_mode(s, SSL_SESS_CACHE_OFF);
    }
    SSL_CTX_set_default_passwd_cb(s, no_pass);
    /* read ahead: a record's header and body (and whatever follows) in one
     * recv, not two (measured: 2.02 recv per keep-alive request without) */
    SSL_CTX_set_read_ahead(s, 1);
    step = "the cipher list";
    if (o->ciphers && !SSL_CTX_set_cipher_list(s, o->ciphers)) goto ossl;
    step = "the TLS 1.3 suites";
    if (o->suites && !SSL_CTX_set_ciphersuites(s, o->suites)) goto ossl;
    if (o->cert_file || o->key_file) {
        if ((*eno = readable(o->cert_file, "certificate", err, errlen)) != 0 ||
            (*eno = readable(o->key_file, "key", err, errlen)) != 0) {
            SSL_CTX_free(s);
            return NULL;
        }
        step = o->cert_file;
        if (SSL_CTX_use_certificate_chain_file(s, o->cert_file) != 1) goto ossl;
        step = o->key_file;
        if (SSL_CTX_use_PrivateKey_file(s, o->key_file, SSL_FILETYPE_PEM) != 1) goto ossl;
    } else if (o->cert_pem) {
        step = "the PEM certificate and key";
        if (!use_pem(s, o->cert_pem, o->key_pem)) goto ossl;
    }
    if (o->cert_file || o->cert_pem) {
        step = "the key against its certificate";
        if (SSL_CTX_check_private_key(s) != 1) goto ossl;
    }
    int verify = o->server ? (o->flags & ACO_RT_TLS_VERIFY_CLIENT) != 0
                           : !(o->flags & ACO_RT_TLS_NO_VERIFY);
    if (verify) {
        if (o->ca_file || o->ca_dir) {
            if ((o->ca_file && (*eno = readable(o->ca_file, "ca_file", err, errlen)) != 0) ||
                (o->ca_dir && (*eno = readable(o->ca_dir, "ca_dir", err, errlen)) != 0)) {
                SSL_CTX_free(s);
                return NULL;
            }
            step = "the trusted certificates";
            if (SSL_CTX_load_verify_locations(s, o->ca_file, o->ca_dir) != 1) goto ossl;
        } else {
            const char* f = getenv(X509_get_default_cert_file_env());
            if (f == NULL || *f == 0) f = X509_get_default_cert_file();
            if ((*eno = readable(f, "the system's trust store (install ca-certificates, or give "
                                    "ca_file)", err, errlen)) != 0) {
                SSL_CTX_free(s);
                return NULL;
            }
            step = f;
            if (SSL_CTX_load_verify_file(s, f) != 1) goto ossl;
        }
        SSL_CTX_set_verify(s, SSL_VERIFY_PEER | (o->server ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0),
                           NULL);
    }
    if (o->server) {
        static const unsigned char sid[] = "aco_rt_tls";
        SSL_CTX_set_session_id_context(s, sid, sizeof sid - 1);
        SSL_CTX_set_tlsext_servername_callback(s, servername);
        SSL_CTX_set_tlsext_servername_arg(s, c);
        if (c->alpn) SSL_CTX_set_alpn_select_cb(s, alpn_select, c);
    } else if (c->alpn && SSL_CTX_set_alpn_protos(s, c->alpn, c->alpn_len) != 0) {
        step = "ALPN";
        goto ossl;
    }
    return s;
ossl:
    /* a file OpenSSL could not open for want of a descriptor: the
     * system's error first in the queue (EMFILE, not a bad file) */
    {
        unsigned long first = ERR_peek_error();
        int sys = ERR_SYSTEM_ERROR(first) ? ERR_GET_REASON(first) : 0;
        int oom = take_reason(why, sizeof why);
        *eno = sys == EMFILE || sys == ENFILE ? sys : oom ? ENOMEM : EPROTO;
    }
    say(err, errlen, "aco_rt_tls_ctx_new: %s: %s", step, why[0] ? why : "refused");
    SSL_CTX_free(s);
    return NULL;
}

aco_rt_tls_ctx_t* aco_rt_tls_ctx_new(const aco_rt_tls_opts_t* o, char* err, size_t errlen) {
    const unsigned known =
        ACO_RT_TLS_NO_VERIFY | ACO_RT_TLS_VERIFY_CLIENT | ACO_RT_TLS_NO_TICKETS | ACO_RT_TLS_LEND;
    const char* bad = NULL;
    if (err && errlen) err[0] = 0;
    if (o == NULL) bad = "no options";
    else if (o->flags & ~known) bad = "an unknown flag";
    else if (o->min_version != 0 && o->min_version != ACO_RT_TLS_1_2 && o->min_version != ACO_RT_TLS_1_3)
        bad = "an unknown min_version";
    else if (o->cert_file && o->cert_pem) bad = "both cert_file and cert_pem";
    else if (o->key_file && o->key_pem) bad = "both key_file and key_pem";
    else if (!(o->cert_file || o->cert_pem) != !(o->key_file || o->key_pem))
        bad = "a certificate without its key, or a key without its certificate";
    else if ((o->cert_file != NULL) != (o->key_file != NULL))
        bad = "a certificate and key not both from files or both from memory";
    else if (o->server && !(o->cert_file || o->cert_pem)) bad = "a server without certificate and key";
    if (bad) {
        say(err, errlen, "aco_rt_tls_ctx_new: %s", bad);
        errno = EINVAL;
        return NULL;
    }
    if (!started()) {
        say(err, errlen, "aco_rt_tls_ctx_new: OpenSSL did not start");
        errno = ENOMEM;
        return NULL;
    }
    aco_rt_tls_ctx_t* c = calloc(1, sizeof(*c));
    if (c == NULL) {
        say(err, errlen, "aco_rt_tls_ctx_new: no memory");
        errno = ENOMEM;
        return NULL;
    }
    c->refs = 1;
    c->server = o->server != 0;
    c->flags = o->flags;
    if (o->alpn) {
        int r = alpn_wire(o->alpn, &c->alpn, &c->alpn_len);
        if (r < 0) {
            say(err, errlen, "aco_rt_tls_ctx_new: %s", r == -ENOMEM ? "no memory"
                                                   : "an ALPN name empty or over 255 bytes");
            free(c);
            errno = -r;
            return NULL;
        }
    }
    int eno = 0;
    aco_rt_hooks_pause();
    ERR_clear_error();
    c->ssl = make_ctx(o, c, err, errlen, &eno);
    ERR_clear_error();
    aco_rt_hooks_resume();
    if (c->ssl == NULL) {
        free(c->alpn);
        free(c);
        errno = eno ? eno : EPROTO;
        return NULL;
    }
    return c;
}

static void ctx_put(aco_rt_tls_ctx_t* c) {
    if (c == NULL || __atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
    for (int i = 0; i < c->nhosts; i++) {
        free(c->hosts[i].name);
        ctx_put(c->hosts[i].ctx);
    }
    free(c->hosts);
    aco_rt_hooks_pause();
    SSL_CTX_free(c->ssl);
    ERR_clear_error();
    aco_rt_hooks_resume();
    free(c->alpn);
    free(c);
}

void aco_rt_tls_ctx_free(aco_rt_tls_ctx_t* ctx) { ctx_put(ctx); }

int aco_rt_tls_ctx_add_host(aco_rt_tls_ctx_t* ctx, const char* host, aco_rt_tls_ctx_t* for_host) {
    if (ctx == NULL || for_host == NULL || !ctx->server || !for_host->server || host == NULL ||
        host[0] == 0 || strlen(host) > 255 || for_host == ctx)
        return -EINVAL;
    for (int i = 0; i < ctx->nhosts; i++)
        if (strcasecmp(ctx->hosts[i].name, host) == 0) return -EEXIST;
    host_t* h = realloc(ctx->hosts, (size_t)(ctx->nhosts + 1) * sizeof(*h));
    if (h == NULL) return -ENOMEM;
    ctx->hosts = h;
    char* name = strdup(host);
    if (name == NULL) return -ENOMEM;
    __atomic_add_fetch(&for_host->refs, 1, __ATOMIC_RELAXED);
    h[ctx->nhosts].name = name;
    h[ctx->nhosts].ctx = for_host;
    ctx->nhosts++;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Connections                                                               */
/* ------------------------------------------------------------------------ */

aco_rt_tls_t* aco_rt_tls_new(aco_rt_tls_ctx_t* ctx, int fd, const char* host) {
    if (ctx == NULL || fd < 0 || (ctx->server && host != NULL) ||
        (!ctx->server && host == NULL && !(ctx->flags & ACO_RT_TLS_NO_VERIFY)) ||
        (host && (host[0] == 0 || strlen(host) > 255))) {
        errno = EINVAL;
        return NULL;
    }
    aco_rt_tls_t* t = calloc(1, sizeof(*t));
    if (t == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    t->fd = fd;
    t->ctx = ctx;
    int ok = 0;
    aco_rt_hooks_pause();
    ERR_clear_error();
    BIO* b = NULL;
    t->ssl = SSL_new(ctx->ssl);
    if (t->ssl && (b = BIO_new(bio_method)) != NULL) {
        BIO_set_data(b, t);
        SSL_set_bio(t->ssl, b, b);
        if (ctx->server) {
            SSL_set_accept_state(t->ssl);
            ok = 1;
        } else {
            SSL_set_connect_state(t->ssl);
            ok = 1;
            if (host) {
                unsigned char ip[16];
                int is_ip = inet_pton(AF_INET, host, ip) == 1 || inet_pton(AF_INET6, host, ip) == 1;
                t->host_is_ip = is_ip;
                if ((t->host = strdup(host)) == NULL) ok = 0;
                else if (is_ip) {
                    ok = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(t->ssl), host);
                } else {
                    SSL_set_hostflags(t->ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
                    ok = SSL_set_tlsext_host_name(t->ssl, host) && SSL_set1_host(t->ssl, host);
                }
            }
            t->offered_alpn = ctx->alpn != NULL;
        }
    }
    ERR_clear_error();
    aco_rt_hooks_resume();
    if (!ok) {                  /* (each step fails only for memory) */
        SSL_free(t->ssl);
        free(t->host);
        free(t);
        errno = ENOMEM;
        return NULL;
    }
    __atomic_add_fetch(&ctx->refs, 1, __ATOMIC_RELAXED);
    return t;
}

void aco_rt_tls_free(aco_rt_tls_t* t) {
    if (t == NULL) return;
    aco_rt_hooks_pause();
    SSL_free(t->ssl);
    ERR_clear_error();
    aco_rt_hooks_resume();
    ctx_put(t->ctx);
    if (t->lent) aco_rt_lend_return(t->lent);
    free(t->gather);
    free(t->held);
    free(t->alpn);
    free(t->host);
    free(t);
}

int aco_rt_tls_fd(const aco_rt_tls_t* t) { return t ? t->fd : -EINVAL; }

const char* aco_rt_tls_error(const aco_rt_tls_t* t) { return t ? t->err : "no connection (NULL)"; }

long aco_rt_tls_verify_result(const aco_rt_tls_t* t) {
    if (t == NULL) return X509_V_ERR_UNSPECIFIED;
    /* (OpenSSL still checks under SSL_VERIFY_NONE, and keeps its verdict) */
    if (SSL_get_verify_mode(t->ssl) == SSL_VERIFY_NONE) return X509_V_OK;
    return SSL_get_verify_result(t->ssl);
}

/* A call on t refused for its arguments: e, its text the reason; but a
 * connection done for says its own error, and keeps its reason. */
static int refuse(aco_rt_tls_t* t, int e) {
    if (t->dead) return t->dead;
    snprintf(t->err, sizeof t->err, "%s", strerror(-e));
    return e;
}

/* What every call that may wait checks first: t, then the co. */
static int gate(aco_rt_tls_t* t) {
    if (t == NULL) return -EINVAL;
    int e = aco_rt_cancel_check();      /* (a shielded co's close_notify goes out) */
    if (e) {
        snprintf(t->err, sizeof t->err, "%s", strerror(-e));
        return e;
    }
    if (t->dead) {
        if (t->err[0] == 0) snprintf(t->err, sizeof t->err, "%s", strerror(-t->dead));
        return t->dead;
    }
    t->err[0] = 0;
    return 0;
}

/* Does t read through lends (ACO_RT_TLS_LEND)?  Decided at its first
 * wait, by the scheduler of the co that waits (a connection stays with
 * its thread's cos): where it lends from io_uring's buffer ring.  Lends
 * elsewhere would be a heap buffer and a recv each: the plain way is
 * cheaper there. */
static int lends(aco_rt_tls_t* t) {
    if (t->by_lends == 0) {
        const char* b = aco_rt_backend_name(aco_rt_sched_current());
        t->by_lends = (t->ctx->flags & ACO_RT_TLS_LEND) && b && strcmp(b, "uring") == 0 ? 1 : -1;
    }
    return t->by_lends > 0;
}

/* Wait until OpenSSL's read can go on: 0, or -errno (t not marked).  The
 * plain way: the socket readable (after_eagain: the BIO's recv just said
 * EAGAIN, no look first).  Lending: the next lend taken and kept in t for
 * the BIO (no system call when the multishot has brought it), or the
 * stream's end or error kept for the BIO to say. */
static int wait_in(aco_rt_tls_t* t, int after_eagain, int64_t deadline) {
    if (!lends(t)) {
        int w = aco_rt_wait(t->fd, POLLIN | (after_eagain ? ACO_RT_WAIT_AFTER_EAGAIN : 0), deadline);
        return w < 0 ? w : 0;
    }
    if (t->lent || t->lent_ended) return 0;
    const char* d;
    ssize_t r = aco_rt_recv_lend(t->fd, &d, deadline);
    if (r > 0) {
        t->lent = d;
        t->lent_off = 0;
        t->lent_len = (uint32_t)r;
        return 0;
    }
    if (r == -EBUSY) {
        /* another co of t's (a reader and a writer) waits in a lend: wait
         * for what it brings (aco_rt_wait sees a lending socket's bytes) */
        int w = aco_rt_wait(t->fd, POLLIN, deadline);
        return w < 0 ? w : 0;
    }
    /* the wait's own errors, as aco_rt_wait would say them */
    if (r == -ETIMEDOUT || r == -ECANCELED || r == -EPERM || r == -EBADF || r == -ENOMEM ||
        r == -EINVAL)
        return (int)r;
    t->lent_ended = 1;          /* the end, or the socket's error: the BIO says it */
    t->lent_end = (int)r;
    return 0;
}

/* An OpenSSL call that returned r <= 0: what it wants.  1: wait done, call
 * again; 0: a clean end (close_notify); -errno: failed (the reason in
 * t->err; a fatal one kept in t->dead).  Reads the thread's error queue
 * before anything can switch. */
static int after(aco_rt_tls_t* t, int r, int64_t deadline, int writing) {
    int e = SSL_get_error(t->ssl, r), err;
    char why[ERR_LEN];
    why[0] = 0;
    t->want = 0;
    switch (e) {
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE: {    /* (nothing queued: OpenSSL pushes no error for these) */
        t->want = e;
        /* (our BIO asks for a retry only when its recv or send said
         * EAGAIN, just now: no look first) */
        int w = e == SSL_ERROR_WANT_READ
                    ? wait_in(t, 1, deadline)
                    : aco_rt_wait(t->fd, POLLOUT | ACO_RT_WAIT_AFTER_EAGAIN, deadline);
        if (w >= 0) return 1;
        snprintf(t->err, sizeof t->err, "%s", strerror(-w));
        if (w != -ETIMEDOUT && w != -ECANCELED) t->dead = w;
        return w;
    }
    case SSL_ERROR_ZERO_RETURN:
        if (t->eof) {           /* no close_notify came: the stream just ended */
            err = -ECONNRESET;
            snprintf(why, sizeof why, "the stream ended without close_notify");
            break;
        }
        ERR_clear_error();
        return 0;
    case SSL_ERROR_SYSCALL:
        if (take_reason(why, sizeof why)) {
            err = -ENOMEM;
            snprintf(why, sizeof why, "out of memory (OpenSSL)");
            break;
        }
        err = t->sys_err ? -t->sys_err : -ECONNRESET;
        if (why[0] == 0)
            snprintf(why, sizeof why, "%s", t->sys_err ? strerror(t->sys_err)
                                                       : "the stream ended without close_notify");
        if (writing && t->sys_err) {
            /* the socket refused a send (EPIPE, ECONNRESET): the writing
             * side is over; what already came may still be read */
            ERR_clear_error();
            snprintf(t->err, sizeof t->err, "%s", why);
            return t->wdead = err;
        }
        break;
    case SSL_ERROR_SSL: {
        unsigned long l = ERR_peek_last_error();
        int reason = ERR_GET_REASON(l);
        int oom = take_reason(why, sizeof why);
        long v = SSL_get_verify_result(t->ssl);
        if (oom || v == X509_V_ERR_OUT_OF_MEM) {
            /* (not the peer's fault: not -EPROTO nor -EKEYREJECTED) */
            err = -ENOMEM;
            snprintf(why, sizeof why, "out of memory (OpenSSL)");
        } else if (reason == SSL_R_CERTIFICATE_VERIFY_FAILED ||
            (v != X509_V_OK && SSL_get_verify_mode(t->ssl) != SSL_VERIFY_NONE &&
             !SSL_is_init_finished(t->ssl))) {
            err = -EKEYREJECTED;
            snprintf(why, sizeof why, "certificate verify failed: %s", X509_verify_cert_error_string(v));
        } else if (reason == SSL_R_UNEXPECTED_EOF_WHILE_READING) {
            err = -ECONNRESET;
            snprintf(why, sizeof why, "the stream ended without close_notify");
        } else if (t->sys_err && (writing || !t->sys_sent)) {
            err = -t->sys_err;
        } else {
            /* (a read's or handshake's send that failed is the alert
             * OpenSSL sends about the protocol error: the peer's socket
             * may be gone; the error is the peer's breach, not EPIPE) */
            err = -EPROTO;
        }
        break;
    }
    default:
        err = -EPROTO;
        if (take_reason(why, sizeof why)) {
            err = -ENOMEM;
            snprintf(why, sizeof why, "out of memory (OpenSSL)");
        }
        break;
    }
    ERR_clear_error();
    snprintf(t->err, sizeof t->err, "%s", why[0] ? why : strerror(-err));
    t->dead = err;
    return err;
}

/* (the queue is looked at first: emptying it walks all its slots) */
#define OSSL(t, call)                                                          \
    ({                                                                         \
        if (ERR_peek_error() != 0) ERR_clear_error();                          \
        (t)->sys_err = 0;                                                      \
        aco_rt_hooks_pause();                                                  \
        int r_ = (call);                                                       \
        aco_rt_hooks_resume();                                                 \
        r_;                                                                    \
    })

int aco_rt_tls_handshake(aco_rt_tls_t* t, int64_t deadline) {
    int g = gate(t);
    if (g) return g;
    if (t->hs_done) return 0;
    for (;;) {
        int r = OSSL(t, SSL_do_handshake(t->ssl));
        if (r == 1) break;
        int a = after(t, r, deadline, 0);
        if (a < 0) return a;
        if (a == 0) {               /* close_notify in a handshake */
            snprintf(t->err, sizeof t->err, "the peer ended the handshake");
            return t->dead = -ECONNRESET;
        }
    }
    if (t->offered_alpn) {
        const unsigned char* p;
        unsigned l;
        SSL_get0_alpn_selected(t->ssl, &p, &l);
        if (l == 0) {
            snprintf(t->err, sizeof t->err, "the server chose no ALPN protocol");
            return t->dead = -EPROTO;
        }
    }
    t->hs_done = 1;
    return 0;
}

ssize_t aco_rt_tls_read(aco_rt_tls_t* t, void* buf, size_t n, int64_t deadline) {
    int g = gate(t);
    if (g) return g;
    if (n == 0) return 0;
    if (buf == NULL) return refuse(t, -EFAULT);
    if (!t->hs_done && (g = aco_rt_tls_handshake(t, deadline)) != 0) return g;
    for (;;) {
        size_t got = 0;
        int r = OSSL(t, SSL_read_ex(t->ssl, buf, n, &got));
        if (r == 1) return (ssize_t)got;
        int a = after(t, r, deadline, 0);
        if (a <= 0) return a;
    }
}

/* The end of a write that was cut short (deadline, cancel) while OpenSSL
 * holds a record of buf[0, n) half sent: its plaintext is kept (t->held)
 * and counted as written; the next write or shutdown finishes it first.
 * (OpenSSL wants a retry to offer those bytes again: kept here, the
 * caller may go on with the next ones, or with others, as after a short
 * write to a socket.)  0, or -ENOMEM (then the connection is done for:
 * the record can never be finished). */
static int hold(aco_rt_tls_t* t, const char* buf, size_t n) {
    if (t->held == NULL && (t->held = malloc(REC_MAX)) == NULL) {
        snprintf(t->err, sizeof t->err, "no memory to keep a record half sent");
        return t->dead = -ENOMEM;
    }
    memcpy(t->held, buf, n);
    t->held_len = n;
    return 0;
}

/* buf[0, n) as records, one call a record (at most REC_MAX bytes offered
 * at once: OpenSSL then holds at most that record when the socket is
 * full, and exactly what was offered): the count taken, or -errno when
 * none was.  From finish_held, buf is t->held itself.  Every record but
 * the last goes with MSG_MORE: TCP gathers them into segments of up to
 * 64 KiB instead of one a record (a MiB over loopback: a quarter of the
 * packets, less CPU on both ends: bench_http.sh's https_1m headlines),
 * and the last pushes them all.  (A write cut short by the
 * socket's being full leaves data in flight, whose acknowledgements
 * push what MSG_MORE held.) */
static ssize_t put(aco_rt_tls_t* t, const char* buf, size_t n, int64_t deadline) {
    size_t off = 0;
    while (off < n) {
        size_t w = 0, ask = n - off < REC_MAX ? n - off : REC_MAX;
        t->more = off + ask < n;
        int r = OSSL(t, SSL_write_ex(t->ssl, buf + off, ask, &w));
        t->more = 0;
        if (r == 1) {
            off += w;
            continue;
        }
        int a = after(t, r, deadline, 1);
        if (a > 0) continue;        /* waited: the same bytes again */
        if (a == 0) {
            snprintf(t->err, sizeof t->err, "the peer ended the stream");
            a = t->wdead = -EPIPE;
        }
        if ((a == -ETIMEDOUT || a == -ECANCELED) && t->want == SSL_ERROR_WANT_WRITE &&
            buf != t->held) {
            int h = hold(t, buf + off, ask);
            if (h < 0) a = h;
            else off += ask;
        }
        return off ? (ssize_t)off : a;
    }
    return (ssize_t)off;
}

/* A record held half sent (see hold), sent: 0 or -errno (on -ETIMEDOUT or
 * -ECANCELED what is left stays held). */
static int finish_held(aco_rt_tls_t* t, int64_t deadline) {
    while (t->held_len) {
        ssize_t r = put(t, t->held, t->held_len, deadline);
        if (r < 0) return (int)r;
        memmove(t->held, t->held + r, t->held_len - (size_t)r);
        t->held_len -= (size_t)r;
    }
    free(t->held);          /* (kept only while a record waits in it) */
    t->held = NULL;
    return 0;
}

/* The checks of a write: 0, or -errno; a held record goes first. */
static int write_gate(aco_rt_tls_t* t, int64_t deadline) {
    int g = gate(t);
    if (g) return g;
    if (t->wdead) return t->wdead;
    if (t->shut || (SSL_get_shutdown(t->ssl) & SSL_SENT_SHUTDOWN)) {
        snprintf(t->err, sizeof t->err, "writing after close_notify");
        return -EPIPE;
    }
    if (!t->hs_done) return aco_rt_tls_handshake(t, deadline);
    return finish_held(t, deadline);
}

ssize_t aco_rt_tls_write(aco_rt_tls_t* t, const void* buf, size_t n, int64_t deadline) {
    if (n == 0 || t == NULL) return gate(t);
    if (n > SSIZE_MAX) return refuse(t, -EINVAL);
    if (buf == NULL) return refuse(t, -EFAULT);
    int g = write_gate(t, deadline);
    if (g) return g;
    return put(t, buf, n, deadline);
}

/* aco_rt_tls_writev's work; the gather buffer, if it made one, is freed by
 * its caller. */
static ssize_t writev_pieces(aco_rt_tls_t* t, const struct iovec* iov, int iovcnt,
                             int64_t deadline) {
    /* A piece of a record or more goes as it is, and so does the last one
     * when nothing waits to be gathered (a bufio's flush: no copy); smaller
     * ones are gathered into records of up to REC_MAX bytes. */
    int last = iovcnt - 1;
    while (last > 0 && iov[last].iov_len == 0) last--;
    size_t done = 0, fill = 0;
    int i = 0;
    size_t at = 0;              /* offset in iov[i] */
    while (i < iovcnt || fill) {
        if (i < iovcnt && at == iov[i].iov_len) {
            i++, at = 0;
            continue;
        }
        if (i < iovcnt && fill == 0 && (iov[i].iov_len - at >= REC_MAX || i == last)) {
            ssize_t r = put(t, (const char*)iov[i].iov_base + at, iov[i].iov_len - at, deadline);
            if (r < 0) return done ? (ssize_t)done : r;
            done += (size_t)r;
            at += (size_t)r;
            /* cut short (a record kept: nothing more may go before it) */
            if (at < iov[i].iov_len || t->held_len) return (ssize_t)done;
            continue;
        }
        if (i < iovcnt && fill < REC_MAX) {
            if (t->gather == NULL && (t->gather = malloc(REC_MAX)) == NULL)
                return done ? (ssize_t)done : -ENOMEM;
            size_t k = iov[i].iov_len - at;
            if (k > REC_MAX - fill) k = REC_MAX - fill;
            memcpy(t->gather + fill, (const char*)iov[i].iov_base + at, k);
            fill += k, at += k;
            continue;
        }
        ssize_t r = put(t, t->gather, fill, deadline);
        if (r < 0) return done ? (ssize_t)done : r;
        done += (size_t)r;
        if ((size_t)r < fill || t->held_len) return (ssize_t)done;
        fill = 0;
    }
    return (ssize_t)done;
}

ssize_t aco_rt_tls_writev(aco_rt_tls_t* t, const struct iovec* iov, int iovcnt, int64_t deadline) {
    if (t == NULL) return -EINVAL;
    if (iovcnt < 0 || iovcnt > IOV_MAX) return refuse(t, -EINVAL);
    if (iov == NULL && iovcnt) return refuse(t, -EFAULT);
    /* (a total over SSIZE_MAX before a NULL piece, as aco_rt_writev) */
    size_t total = 0;
    int fault = 0;
    for (int i = 0; i < iovcnt; i++) {
        if (iov[i].iov_len > (size_t)SSIZE_MAX - total) return refuse(t, -EINVAL);
        total += iov[i].iov_len;
        if (iov[i].iov_base == NULL && iov[i].iov_len) fault = -EFAULT;
    }
    if (fault) return refuse(t, fault);
    if (total == 0) return gate(t);
    int g = write_gate(t, deadline);
    if (g) return g;
    ssize_t r = writev_pieces(t, iov, iovcnt, deadline);
    /* a connection keeps no buffer between writes (gathers are rare: a
     * bufio's flush is one piece, or its buffer and a large one) */
    free(t->gather);
    t->gather = NULL;
    return r;
}

int aco_rt_tls_shutdown(aco_rt_tls_t* t, int64_t deadline) {
    int g = gate(t);
    if (g) return g;
    if (t->shut) return 0;
    if (!t->hs_done) {          /* nothing to end cleanly */
        t->shut = 1;
        return 0;
    }
    if (t->wdead) return t->wdead;
    if ((g = finish_held(t, deadline)) != 0) return g;     /* the stream's last bytes first */
    for (;;) {
        int r = OSSL(t, SSL_shutdown(t->ssl));
        if (r >= 0) break;          /* 0: ours went; 1: theirs came too */
        int a = after(t, r, deadline, 1);
        if (a < 0) return a;
        if (a == 0) break;
    }
    t->shut = 1;
    return 0;
}

const char* aco_rt_tls_alpn(const aco_rt_tls_t* t) {
    const unsigned char* p;
    unsigned l;
    if (t == NULL) return NULL;
    SSL_get0_alpn_selected(t->ssl, &p, &l);
    if (l == 0) return NULL;
    if (t->alpn == NULL) {      /* (kept: t's own, freed with it) */
        char* name = malloc(l + 1u);
        if (name == NULL) return NULL;
        memcpy(name, p, l);
        name[l] = 0;
        ((aco_rt_tls_t*)t)->alpn = name;
    }
    return t->alpn;
}

/* (a client's own name, not OpenSSL's: after a TLS 1.2 resumption that
 * is the session's, which may be another host's) */
const char* aco_rt_tls_host(const aco_rt_tls_t* t) {
    if (t == NULL) return NULL;
    if (!t->ctx->server) return t->host_is_ip ? NULL : t->host;
    return SSL_get_servername(t->ssl, TLSEXT_NAMETYPE_host_name);
}

const char* aco_rt_tls_version(const aco_rt_tls_t* t) { return t ? SSL_get_version(t->ssl) : NULL; }

const char* aco_rt_tls_cipher(const aco_rt_tls_t* t) { return t ? SSL_get_cipher_name(t->ssl) : NULL; }

int aco_rt_tls_resumed(const aco_rt_tls_t* t) { return t ? SSL_session_reused(t->ssl) : 0; }

int aco_rt_tls_pending(const aco_rt_tls_t* t) { return t && (t->lent || SSL_has_pending(t->ssl)); }

int aco_rt_tls_wait(aco_rt_tls_t* t, int64_t deadline) {
    int g = gate(t);
    if (g) return g;
    if (SSL_pending(t->ssl) > 0 || t->lent_ended ||
        (SSL_get_shutdown(t->ssl) & SSL_RECEIVED_SHUTDOWN))
        return 0;
    int after_eagain = 0;
    if (!aco_rt_tls_pending(t)) {
        /* (nothing inside t: the socket's next bytes) */
    } else if (!t->hs_done) {
        /* Before the handshake's end no peek (it would handshake): a
         * handshake that left for want of bytes holds part of a record,
         * and the wait goes on (its BIO said EAGAIN); else the bytes are
         * new, and the handshake's next look may use them. */
        if (t->want != SSL_ERROR_WANT_READ || t->lent) return 0;
        after_eagain = 1;
    } else {
        /* Bytes inside t, none decrypted: whole records a read returns
         * at once, or part of one it would wait for the rest of (a wait
         * that said 0 there would spin its caller).  OpenSSL looks: a
         * peek, which leaves the bytes for the read. */
        char c;
        size_t got = 0;
        int r = OSSL(t, SSL_peek_ex(t->ssl, &c, 1, &got));
        if (r == 1 || SSL_get_error(t->ssl, r) != SSL_ERROR_WANT_READ) {
            ERR_clear_error();          /* (an end or an error: the read says it) */
            return 0;
        }
        after_eagain = 1;               /* (the BIO just said so) */
    }
    int w = wait_in(t, after_eagain, deadline);
    if (w == 0 && t->want == SSL_ERROR_WANT_READ) t->want = 0;     /* (more came) */
    if (w < 0) {
        snprintf(t->err, sizeof t->err, "%s", strerror(-w));
        if (w != -ETIMEDOUT && w != -ECANCELED) t->dead = w;
    }
    return w;
}

aco_rt_tls_session_t* aco_rt_tls_session(aco_rt_tls_t* t) {
    if (t == NULL || t->ctx->server) return NULL;
    /* a copy: the connection's own is spoilt for resumption when it is
     * freed without a close_notify (OpenSSL's rule for a session that may
     * have ended badly), which says nothing about the ticket's worth */
    SSL_SESSION* s = SSL_get0_session(t->ssl);
    if (s == NULL || !SSL_SESSION_is_resumable(s)) return NULL;
    aco_rt_hooks_pause();
    SSL_SESSION* d = SSL_SESSION_dup(s);
    /* the host it was verified for (a name or an address): a resumption
     * checks no certificate, so only a connection to that host may offer
     * it (aco_rt_tls_set_session) */
    if (d && !SSL_SESSION_set1_hostname(d, t->host)) {
        SSL_SESSION_free(d);
        d = NULL;
    }
    ERR_clear_error();
    aco_rt_hooks_resume();
    return (aco_rt_tls_session_t*)d;
}

int aco_rt_tls_set_session(aco_rt_tls_t* t, aco_rt_tls_session_t* s) {
    if (t == NULL) return -EINVAL;
    if (t->ctx->server || s == NULL || !SSL_in_before(t->ssl)) return refuse(t, -EINVAL);
    const char* h = SSL_SESSION_get0_hostname((SSL_SESSION*)s);
    if ((h == NULL) != (t->host == NULL) || (h && strcasecmp(h, t->host) != 0))
        return refuse(t, -EINVAL);
    int ok = OSSL(t, SSL_set_session(t->ssl, (SSL_SESSION*)s));
    ERR_clear_error();
    return ok == 1 ? 0 : refuse(t, -ENOMEM);
}

void aco_rt_tls_session_free(aco_rt_tls_session_t* s) { SSL_SESSION_free((SSL_SESSION*)s); }

/* ------------------------------------------------------------------------ */
/* A bufio over TLS                                                          */
/* ------------------------------------------------------------------------ */

static ssize_t bio_tls_read(void* ctx, void* buf, size_t n, int64_t deadline) {
    return aco_rt_tls_read(ctx, buf, n, deadline);
}

static ssize_t bio_tls_writev(void* ctx, const struct iovec* iov, int k, int64_t deadline) {
    return aco_rt_tls_writev(ctx, iov, k, deadline);
}

static const aco_rt_bufio_io_t tls_io = {bio_tls_read, bio_tls_writev};

aco_rt_bufio_t* aco_rt_tls_bufio_new(aco_rt_tls_t* t, size_t rsize, size_t wsize) {
    if (t == NULL) {
        errno = EINVAL;
        return NULL;
    }
    return aco_rt_bufio_new_io(&tls_io, t, t->fd, rsize, wsize);
}
