/* test_tls.c - TLS for the runtime's cos (aco_rt_tls.h) taken at the
 * header's word, against certificates made here in memory with OpenSSL 3
 * (an ECDSA P-256 CA and a second, untrusted one; leaves for localhost
 * with DNS and IP names, expired, for another name, from the untrusted CA,
 * for SNI names and a wildcard; client certificates from both CAs; the CA
 * and one leaf also as files in a mkdtemp directory, removed at exit), on
 * both backends.  Checked, a line per group:
 *   - aco_rt_hooks_pause/resume: nesting, the depth, resumes beyond it
 *     ignored, per thread; outside cos and in one;
 *   - aco_rt_tls_ctx_new: EINVAL (NULL opts, a server without certificate,
 *     a certificate without key and the other way round, unknown flags and
 *     versions, ALPN lists with an empty or a 256-byte name), ENOENT (a
 *     missing certificate, key or CA file), EMFILE (no descriptor left),
 *     EPROTO (a key that does not
 *     match its certificate, PEM it cannot read, bad cipher strings, a CA
 *     file of no certificates); err filled, at most errlen bytes, NULL
 *     allowed; the hooks' depth as the caller had it; certificates from
 *     files and memory, trust from a file, a hashed ca_dir, $SSL_CERT_FILE
 *     (read once, at ctx_new); from another thread, outside cos;
 *   - aco_rt_tls_new: EINVAL (ctx NULL, fd < 0, a verifying client without
 *     host, a server with one); nothing sent before the handshake; the
 *     frees of NULL; -EPERM outside a co, with its text (the connection
 *     goes on in a co);
 *   - the handshake: 0, again 0 at once; done by the first read and write
 *     too; version, cipher (suites), ALPN, host, resumed, verify_result,
 *     fd, error ""; O_NONBLOCK left as it was; a stale error in the
 *     thread's queue ignored; free sends nothing, leaves the socket open;
 *   - ALPN: the server's first preference the client offers, no overlap
 *     (-EPROTO on both sides), a client offering to a server without ALPN,
 *     a server with ALPN and a client without, a 255-byte name;
 *   - SNI (aco_rt_tls_ctx_add_host): exact names, "*.example.com" (one
 *     label only), case, no SNI for an IP, -EEXIST, -EINVAL, the added
 *     contexts held after their caller freed them; ctx's other options
 *     (ALPN, client verification, tickets) kept for an added name;
 *   - resumption: TLS 1.3 tickets after the first read (NULL before),
 *     resumed on both sides, a session freed after set_session, no tickets
 *     with ACO_RT_TLS_NO_TICKETS, none with another context, set_session
 *     -EINVAL (a server's, after the handshake began), a session of a
 *     connection freed without shutdown, a ticket resumed by a server of
 *     the same context in another thread;
 *   - verification: expired, wrong name, unknown issuer (-EKEYREJECTED,
 *     the text, aco_rt_tls_verify_result; the server hears the alert:
 *     -EPROTO), ACO_RT_TLS_NO_VERIFY accepting them (verify_result 0:
 *     nothing verified), IP addresses against the IP SAN;
 *   - ACO_RT_TLS_VERIFY_CLIENT: without a certificate, with one, with one
 *     from an untrusted CA;
 *   - versions (raw OpenSSL peers on threads): min_version 1.3 against a
 *     TLS 1.2 client and server, TLS 1.0 and 1.1 refused, renegotiation
 *     refused, TLS 1.2 (cipher list, tickets) as server and client;
 *   - deadlines and cancel: a silent peer on either side (-ETIMEDOUT on
 *     time, then the handshake goes on), a client trickling its hello,
 *     garbage (-EPROTO), aco_rt_cancel in handshake and read (-ECANCELED
 *     promptly, then it goes on in another co), a co cancelled before its
 *     call, a cancelled co's goodbye under aco_rt_cancel_shield (write and
 *     close_notify go out), read deadlines with half a record in, past deadlines,
 *     aco_rt_close under a read (-EBADF);
 *   - reads: 0 after close_notify (and again), -ECONNRESET for a socket
 *     closed, a stream shut without close_notify and one cut mid-record,
 *     -EPROTO for a corrupt record though the alert back met EPIPE,
 *     n == 0, -EPIPE after our shutdown while reads go on;
 *   - writes: 1 MiB intact in records of at most 16 KiB (seen on the wire
 *     by a relay), 16384 and 16385 bytes (one record, two), writev of many
 *     small pieces (one record), of a large piece, its -EINVAL; -EPIPE to
 *     a closed peer (no SIGPIPE), then done for; the "offer the same bytes
 *     again" rule after a write's -ETIMEDOUT; shutdown's -ETIMEDOUT behind
 *     a full socket;
 *   - errors: "done for" (the same error at once from every call), errors
 *     per connection (two failing at once in two cos, each its own text),
 *     the thread's OpenSSL error queue empty whenever another co looks;
 *   - out of memory (OpenSSL's allocations through the test's functions,
 *     those of one co failing): a handshake's -ENOMEM on either side, then
 *     done for; ctx_new's ENOMEM;
 *   - bufio over TLS (read_until, read_full, write, flush, fd, end of
 *     stream, truncation, a write's timeout then flush and the rest),
 *     aco_rt_bufio_new_io (EINVAL cases, a transport of our own that takes
 *     a few bytes a call);
 *   - aco_rt_tls_ctx_free while connections live;
 *   - buffers on the stacks of cos sharing one share stack.
 * Exit status 0 only if every check passed; a failed check prints both
 * sides and the run goes on to the end.
 */
#define _GNU_SOURCE
#include "rt_test.h"

#include <sys/resource.h>
#include "aco_rt_tls.h"

#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

/* ------------------------------------------------------------------------ */
/* Checks that count a failure and go on (so that one run shows every     */
/* broken promise); CHECK (rt_test.h) for the test's own machinery.        */
/* ------------------------------------------------------------------------ */

static int g_fail;

#ifndef TEST_NAME
#define TEST_NAME "test_tls"
#endif

/* ACO_RT_TLS_LEND in every context (test_tls_lend.c): the sockets lend,
 * so they are closed with aco_rt_close, as the flag says. */
static unsigned g_lend;
static int test_close(int fd) { return g_lend ? aco_rt_close(fd) : (close)(fd); }
#define close(fd) test_close(fd)

static const char* en(long long v, char* buf, size_t n) {
    if (v < 0 && v > -4096) snprintf(buf, n, "%lld (%s)", v, strerror((int)-v));
    else snprintf(buf, n, "%lld", v);
    return buf;
}

#define T_FAIL(...)                                                           \
    do {                                                                      \
        fprintf(stderr, "%s:%d: [%s] ", __FILE__, __LINE__, test_backend_label); \
        fprintf(stderr, __VA_ARGS__);                                         \
        fputc('\n', stderr);                                                  \
        fflush(stderr);                                                       \
        __atomic_add_fetch(&g_fail, 1, __ATOMIC_SEQ_CST);                     \
    } while (0)
#define T(c)                                                                  \
    do {                                                                      \
        if (!(c)) T_FAIL("T(%s) failed", #c);                                 \
    } while (0)
#define T_OP_(a, op, b)                                                       \
    do {                                                                      \
        long long ta_ = (long long)(a), tb_ = (long long)(b);                 \
        if (!(ta_ op tb_)) {                                                  \
            char ba_[96], bb_[96];                                            \
            T_FAIL("%s %s %s failed: %s vs %s", #a, #op, #b,                  \
                   en(ta_, ba_, sizeof(ba_)), en(tb_, bb_, sizeof(bb_)));     \
        }                                                                     \
    } while (0)
#define T_EQ(a, b) T_OP_(a, ==, b)
#define T_NE(a, b) T_OP_(a, !=, b)
#define T_LT(a, b) T_OP_(a, <, b)
#define T_LE(a, b) T_OP_(a, <=, b)
#define T_GT(a, b) T_OP_(a, >, b)
#define T_GE(a, b) T_OP_(a, >=, b)
#define QS_(s) ((s) ? (s) : "(null)")
#define T_STR(a, b)                                                           \
    do {                                                                      \
        const char *sa_ = (a), *sb_ = (b);                                    \
        if (!(sa_ == sb_ || (sa_ && sb_ && strcmp(sa_, sb_) == 0)))           \
            T_FAIL("%s == %s failed: \"%s\" vs \"%s\"", #a, #b, QS_(sa_), QS_(sb_)); \
    } while (0)
#define T_HAS(s, sub)                                                         \
    do {                                                                      \
        const char* sh_ = (s);                                                \
        if (!(sh_ && strstr(sh_, sub)))                                       \
            T_FAIL("%s contains \"%s\" failed: \"%s\"", #s, sub, QS_(sh_));   \
    } while (0)
#define T_LACKS(s, sub)                                                       \
    do {                                                                      \
        const char* sh_ = (s);                                                \
        if (!(sh_ && !strstr(sh_, sub)))                                      \
            T_FAIL("%s lacks \"%s\" failed: \"%s\"", #s, sub, QS_(sh_));      \
    } while (0)
#define T_TEXT(s)                                                             \
    do {                                                                      \
        const char* sh_ = (s);                                                \
        if (!(sh_ && sh_[0]))                                                 \
            T_FAIL("%s is a non-empty text failed: \"%s\"", #s, QS_(sh_));    \
    } while (0)
/* The OpenSSL error queue of this thread is empty. */
#define T_QUEUE_EMPTY()                                                       \
    do {                                                                      \
        unsigned long e_ = ERR_peek_error();                                  \
        if (e_ != 0) {                                                        \
            char eb_[256];                                                    \
            ERR_error_string_n(e_, eb_, sizeof(eb_));                         \
            T_FAIL("the thread's OpenSSL error queue is not empty: %s", eb_); \
            ERR_clear_error();                                                \
        }                                                                     \
    } while (0)

/* Generous deadline for what must succeed; how late a deadline may end. */
#define D() aco_rt_in_ms(SLOW ? 30000 : 8000)
#define LATE ((SLOW ? 600 : 250) * MS)
#define PROMPT ((SLOW ? 300 : 100) * MS)

static void group_done(const char* name, int before) {
    printf("[%s] %-44s %s\n", test_backend_label, name,
           g_fail == before ? "ok" : "FAILED");
    fflush(stdout);
}

/* ------------------------------------------------------------------------ */
/* Certificates, made in memory                                             */
/* ------------------------------------------------------------------------ */

typedef struct {
    X509* x;
    EVP_PKEY* k;
    char* cert;         /* PEM */
    char* key;          /* PEM */
} cred_t;

static cred_t ca1, ca2, leaf, expired, wrong, untrusted, client1, client2,
    sni_default, sni_exact, sni_wild, sni_rsa;
static int g_rsa;               /* make_cred: an RSA key, not P-256 */

static char* bio_text(BIO* b) {
    char* p;
    long n = BIO_get_mem_data(b, &p);
    CHECK(n > 0);
    char* s = malloc((size_t)n + 1);
    CHECK(s != NULL);
    memcpy(s, p, (size_t)n);
    s[n] = 0;
    BIO_free(b);
    return s;
}

static void add_ext(X509* x, X509V3_CTX* v, int nid, const char* val) {
    X509_EXTENSION* e = X509V3_EXT_conf_nid(NULL, v, nid, val);
    CHECK(e != NULL);
    CHECK(X509_add_ext(x, e, -1) == 1);
    X509_EXTENSION_free(e);
}

/* A certificate for cn (and san, if not NULL) valid from from_days to
 * to_days from now, signed by issuer (NULL: itself, a CA). */
static void make_cred(cred_t* c, const char* cn, const char* san, const cred_t* issuer,
                      int ca, long from_days, long to_days, int client) {
    static long serial = 1000;
    c->k = g_rsa ? EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)2048)
                 : EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    CHECK(c->k != NULL);
    X509* x = X509_new();
    CHECK(x != NULL);
    CHECK(X509_set_version(x, X509_VERSION_3) == 1);
    CHECK(ASN1_INTEGER_set(X509_get_serialNumber(x), serial++) == 1);
    CHECK(X509_gmtime_adj(X509_getm_notBefore(x), from_days * 86400L) != NULL);
    CHECK(X509_gmtime_adj(X509_getm_notAfter(x), to_days * 86400L) != NULL);
    CHECK(X509_set_pubkey(x, c->k) == 1);
    X509_NAME* n = X509_get_subject_name(x);
    CHECK(X509_NAME_add_entry_by_txt(n, "O", MBSTRING_ASC, (const unsigned char*)"aco test", -1, -1, 0) == 1);
    CHECK(X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char*)cn, -1, -1, 0) == 1);
    CHECK(X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer->x) : n) == 1);
    X509V3_CTX v;
    X509V3_set_ctx_nodb(&v);
    X509V3_set_ctx(&v, issuer ? issuer->x : x, x, NULL, NULL, 0);
    add_ext(x, &v, NID_basic_constraints, ca ? "critical,CA:TRUE" : "critical,CA:FALSE");
    add_ext(x, &v, NID_key_usage, ca ? "critical,keyCertSign,cRLSign" : "critical,digitalSignature");
    add_ext(x, &v, NID_subject_key_identifier, "hash");
    if (issuer) add_ext(x, &v, NID_authority_key_identifier, "keyid:always");
    if (!ca) add_ext(x, &v, NID_ext_key_usage, client ? "clientAuth" : "serverAuth");
    if (san) add_ext(x, &v, NID_subject_alt_name, san);
    CHECK(X509_sign(x, issuer ? issuer->k : c->k, EVP_sha256()) > 0);
    c->x = x;
    BIO* b = BIO_new(BIO_s_mem());
    CHECK(b != NULL && PEM_write_bio_X509(b, x) == 1);
    c->cert = bio_text(b);
    b = BIO_new(BIO_s_mem());
    CHECK(b != NULL && PEM_write_bio_PrivateKey(b, c->k, NULL, NULL, 0, NULL, NULL) == 1);
    c->key = bio_text(b);
}

static void free_cred(cred_t* c) {
    X509_free(c->x);
    EVP_PKEY_free(c->k);
    free(c->cert);
    free(c->key);
    memset(c, 0, sizeof(*c));
}

/* Files: a temporary directory with the CA, the leaf's certificate and
 * key, a file that is no PEM, and a hashed directory of the CA. */
static char g_dir[64], g_ca_file[128], g_leaf_file[128], g_key_file[128],
    g_junk_file[128], g_missing[128], g_hash_dir[128], g_hash_file[160];

static void remove_files(void) {
    if (!g_dir[0]) return;
    unlink(g_hash_file);
    rmdir(g_hash_dir);
    unlink(g_ca_file);
    unlink(g_leaf_file);
    unlink(g_key_file);
    unlink(g_junk_file);
    rmdir(g_dir);
    g_dir[0] = 0;
}

static void on_abort(int sig) {
    remove_files();     /* unlink and rmdir: async-signal-safe */
    signal(sig, SIG_DFL);
    raise(sig);
}

static void put_file(const char* path, const char* text) {
    FILE* f = fopen(path, "w");
    CHECK(f != NULL);
    CHECK(fputs(text, f) >= 0);
    CHECK(fclose(f) == 0);
}

static void make_files(void) {
    strcpy(g_dir, "/tmp/test_tls.XXXXXX");
    CHECK(mkdtemp(g_dir) != NULL);
    snprintf(g_ca_file, sizeof(g_ca_file), "%s/ca.pem", g_dir);
    snprintf(g_leaf_file, sizeof(g_leaf_file), "%s/leaf.pem", g_dir);
    snprintf(g_key_file, sizeof(g_key_file), "%s/leaf.key", g_dir);
    snprintf(g_junk_file, sizeof(g_junk_file), "%s/junk.pem", g_dir);
    snprintf(g_missing, sizeof(g_missing), "%s/missing.pem", g_dir);
    snprintf(g_hash_dir, sizeof(g_hash_dir), "%s/hashed", g_dir);
    snprintf(g_hash_file, sizeof(g_hash_file), "%s/%08lx.0", g_hash_dir,
             X509_subject_name_hash(ca1.x));
    atexit(remove_files);
    signal(SIGABRT, on_abort);
    put_file(g_ca_file, ca1.cert);
    put_file(g_leaf_file, leaf.cert);
    put_file(g_key_file, leaf.key);
    put_file(g_junk_file, "this is no certificate\n");
    CHECK(mkdir(g_hash_dir, 0700) == 0);
    put_file(g_hash_file, ca1.cert);
}

/* A ClientHello, as a TLS client (OpenSSL's) sends it first. */
static unsigned char* g_hello;
static size_t g_hello_len;

static void make_hello(void) {
    SSL_CTX* c = SSL_CTX_new(TLS_client_method());
    CHECK(c != NULL);
    SSL* s = SSL_new(c);
    CHECK(s != NULL);
    BIO* rb = BIO_new(BIO_s_mem());
    BIO* wb = BIO_new(BIO_s_mem());
    CHECK(rb != NULL && wb != NULL);
    SSL_set_bio(s, rb, wb);
    CHECK(SSL_set_tlsext_host_name(s, "localhost") == 1);
    CHECK(SSL_connect(s) == -1);
    CHECK(SSL_get_error(s, -1) == SSL_ERROR_WANT_READ);
    char* p;
    long n = BIO_get_mem_data(wb, &p);
    CHECK(n > 100);
    g_hello = malloc((size_t)n);
    CHECK(g_hello != NULL);
    memcpy(g_hello, p, (size_t)n);
    g_hello_len = (size_t)n;
    SSL_free(s);
    SSL_CTX_free(c);
    ERR_clear_error();
}

/* ------------------------------------------------------------------------ */
/* Contexts                                                                 */
/* ------------------------------------------------------------------------ */

static aco_rt_tls_ctx_t* ctx_or_die(const aco_rt_tls_opts_t* o) {
    char err[256] = "";
    aco_rt_tls_ctx_t* c = aco_rt_tls_ctx_new(o, err, sizeof(err));
    if (c == NULL) {
        fprintf(stderr, "aco_rt_tls_ctx_new: %s (%s)\n", err, strerror(errno));
        abort();
    }
    return c;
}

static aco_rt_tls_ctx_t* server_ctx(const cred_t* c, const char* alpn, unsigned flags, int minv) {
    aco_rt_tls_opts_t o = {0};
    flags |= g_lend;
    o.server = 1;
    o.cert_pem = c->cert;
    o.key_pem = c->key;
    o.alpn = alpn;
    o.flags = flags;
    o.min_version = minv;
    if (flags & ACO_RT_TLS_VERIFY_CLIENT) o.ca_file = g_ca_file;
    return ctx_or_die(&o);
}

static aco_rt_tls_ctx_t* client_ctx(const cred_t* c, const char* alpn, unsigned flags, int minv) {
    aco_rt_tls_opts_t o = {0};
    flags |= g_lend;
    o.cert_pem = c ? c->cert : NULL;
    o.key_pem = c ? c->key : NULL;
    o.ca_file = g_ca_file;
    o.alpn = alpn;
    o.flags = flags;
    o.min_version = minv;
    return ctx_or_die(&o);
}

/* Made once, freed at the end. */
static aco_rt_tls_ctx_t *g_srv, *g_cli, *g_cli_nv, *g_srv_expired, *g_srv_wrong,
    *g_srv_untrusted;
/* A server that never lends: a socket it does not read fills up (one that
 * lends keeps taking bytes into its scheduler's ring), and aco_rt_close
 * ends it at once (a lending socket's multishot holds it until the loop's
 * next look). */
static aco_rt_tls_ctx_t* g_srv_still;

/* ------------------------------------------------------------------------ */
/* Plumbing: socket pairs, cos, a relay that watches the records            */
/* ------------------------------------------------------------------------ */

static void sp(int sv[2]) { CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0); }

/* 1 if bytes wait to be read on fd. */
static int pending(int fd) {
    char c;
    return recv(fd, &c, 1, MSG_DONTWAIT | MSG_PEEK) > 0;
}

static aco_rt_co_t* go(aco_rt_fn_t fn, void* arg) {
    aco_rt_co_t* co = aco_rt_spawn(NULL, fn, arg);
    CHECK(co != NULL);
    return co;
}

static void join(aco_rt_co_t* co) { CHECK_EQ(aco_rt_join(co, -1), 0); }

static unsigned char pat(size_t i) { return (unsigned char)(i * 131u + (i >> 9) * 7u + 1u); }

/* One direction of a relay: bytes from `from` to `to`, the TLS records'
 * lengths parsed on the way (while counting); it can pause once after a
 * given count and cut the stream (shutdown of `to`) at another. */
typedef struct {
    int from, to;
    long long fwd;              /* bytes forwarded */
    long long cut_at;           /* -1: never */
    long long pause_at;         /* -1: never */
    int64_t pause_ns;
    int counting;
    int nrec;
    long long maxrec;
    unsigned char hdr[5];
    int hdr_have;
    long long body_left;
    char* buf;
} relay_t;

static void relay_parse(relay_t* d, const unsigned char* p, size_t n) {
    while (n > 0) {
        if (d->body_left > 0) {
            size_t k = n < (size_t)d->body_left ? n : (size_t)d->body_left;
            d->body_left -= (long long)k;
            p += k;
            n -= k;
            continue;
        }
        d->hdr[d->hdr_have++] = *p++;
        n--;
        if (d->hdr_have == 5) {
            long long len = ((long long)d->hdr[3] << 8) | d->hdr[4];
            d->hdr_have = 0;
            d->body_left = len;
            if (d->counting) {
                d->nrec++;
                if (len > d->maxrec) d->maxrec = len;
            }
        }
    }
}

static void co_relay(void* arg) {
    relay_t* d = arg;
    for (;;) {
        ssize_t r = aco_rt_read(d->from, d->buf, 65536, -1);
        if (r <= 0) break;
        size_t off = 0;
        while (off < (size_t)r) {
            long long n = r - (ssize_t)off;
            if (d->cut_at >= 0 && d->fwd + n > d->cut_at) n = d->cut_at - d->fwd;
            if (d->pause_at >= 0 && d->fwd < d->pause_at && d->fwd + n > d->pause_at)
                n = d->pause_at - d->fwd;
            if (n > 0) {
                relay_parse(d, (unsigned char*)d->buf + off, (size_t)n);
                ssize_t w = aco_rt_send(d->to, d->buf + off, (size_t)n, MSG_NOSIGNAL, -1);
                if (w != n) goto out;
                d->fwd += n;
                off += (size_t)n;
            }
            if (d->pause_at >= 0 && d->fwd == d->pause_at) {
                d->pause_at = -1;
                aco_rt_sleep(d->pause_ns);
            }
            if (d->cut_at >= 0 && d->fwd >= d->cut_at) goto out;
        }
    }
out:
    shutdown(d->to, SHUT_WR);
}

static relay_t* relay_new(int from, int to) {
    relay_t* d = calloc(1, sizeof(*d));
    CHECK(d != NULL);
    d->from = from;
    d->to = to;
    d->cut_at = d->pause_at = -1;
    d->buf = malloc(65536);
    CHECK(d->buf != NULL);
    return d;
}

/* Start counting the records from now on. */
static void relay_count(relay_t* d) {
    d->counting = 1;
    d->nrec = 0;
    d->maxrec = 0;
}

/* A client and a server connection over a socket pair, or over two with a
 * relay between (c2s, s2c). */
typedef struct {
    int cfd, sfd, xc, xs;
    aco_rt_tls_t *c, *s;
    relay_t *c2s, *s2c;
    aco_rt_co_t *rc2s, *rs2c;
} link_t;

static void link_open(link_t* l, aco_rt_tls_ctx_t* sctx, aco_rt_tls_ctx_t* cctx, const char* host,
                      int relay) {
    memset(l, 0, sizeof(*l));
    l->xc = l->xs = -1;
    int a[2];
    sp(a);
    l->cfd = a[0];
    if (!relay) {
        l->sfd = a[1];
    } else {
        int b[2];
        sp(b);
        l->xc = a[1];
        l->xs = b[0];
        l->sfd = b[1];
        l->c2s = relay_new(l->xc, l->xs);
        l->s2c = relay_new(l->xs, l->xc);
        l->rc2s = go(co_relay, l->c2s);
        l->rs2c = go(co_relay, l->s2c);
    }
    if (sctx) {
        l->s = aco_rt_tls_new(sctx, l->sfd, NULL);
        CHECK(l->s != NULL);
    }
    if (cctx) {
        l->c = aco_rt_tls_new(cctx, l->cfd, host);
        CHECK(l->c != NULL);
    }
}

/* One end goes without a word: its connection freed (no close_notify),
 * its socket closed (client: the client's end; else the server's). */
static void link_gone(link_t* l, int client) {
    aco_rt_tls_t** t = client ? &l->c : &l->s;
    int* fd = client ? &l->cfd : &l->sfd;
    aco_rt_tls_free(*t);
    *t = NULL;
    close(*fd);
    *fd = -1;
}

static void link_close(link_t* l) {
    aco_rt_tls_free(l->c);
    aco_rt_tls_free(l->s);
    l->c = l->s = NULL;
    if (l->cfd >= 0) close(l->cfd);
    if (l->sfd >= 0) close(l->sfd);
    l->cfd = l->sfd = -1;
    if (l->rc2s) {
        join(l->rc2s);
        join(l->rs2c);
        close(l->xc);
        close(l->xs);
        free(l->c2s->buf);
        free(l->s2c->buf);
        free(l->c2s);
        free(l->s2c);
    }
}

/* A handshake in a co of its own. */
typedef struct {
    aco_rt_tls_t* t;
    int64_t deadline;
    int rc;
    int64_t at;             /* when it returned */
} hs_job_t;

static void co_hs(void* a) {
    hs_job_t* j = a;
    j->rc = aco_rt_tls_handshake(j->t, j->deadline);
    j->at = aco_rt_now();
}

/* A handshake that is cancelled; then, cancelled still, a read: -ECANCELED
 * at once, with its text. */
typedef struct {
    hs_job_t j;
    ssize_t again;
    char text[128];
} cancel_job_t;

static void co_hs_cancelled(void* a) {
    cancel_job_t* c = a;
    co_hs(&c->j);
    char b[8];
    c->again = aco_rt_tls_read(c->j.t, b, sizeof(b), -1);
    snprintf(c->text, sizeof(c->text), "%s", aco_rt_tls_error(c->j.t));
}

/* Both handshakes at once: the server's result in *rs, the client's in *rc.
 * (From a standalone co: the job lives on its stack.) */
static void link_hs(link_t* l, int* rs, int* rc) {
    hs_job_t j = {l->s, D(), 0, 0};
    aco_rt_co_t* co = go(co_hs, &j);
    *rc = aco_rt_tls_handshake(l->c, D());
    join(co);
    *rs = j.rc;
}

/* Both handshakes, expected to succeed. */
static int link_up(link_t* l) {
    int rs, rc;
    link_hs(l, &rs, &rc);
    T_EQ(rs, 0);
    T_EQ(rc, 0);
    if (rs != 0) fprintf(stderr, "  server: %s\n", aco_rt_tls_error(l->s));
    if (rc != 0) fprintf(stderr, "  client: %s\n", aco_rt_tls_error(l->c));
    return rs == 0 && rc == 0;
}

/* Exactly n bytes from t (each read at most 16 KiB): n or the error. */
static ssize_t read_n(aco_rt_tls_t* t, void* buf, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = aco_rt_tls_read(t, (char*)buf + got, n - got, D());
        if (r <= 0) return got ? (ssize_t)got : r;
        T_LE(r, 16384);
        got += (size_t)r;
    }
    return (ssize_t)got;
}

/* msg from `from` to `to` (both in this co: small messages fit the sockets'
 * buffers): 1 if it came intact. */
static int pass(aco_rt_tls_t* from, aco_rt_tls_t* to, const char* msg) {
    size_t n = strlen(msg);
    char buf[256];
    ssize_t w = aco_rt_tls_write(from, msg, n, D());
    T_EQ(w, (ssize_t)n);
    if (w != (ssize_t)n) return 0;
    ssize_t r = read_n(to, buf, n);
    T_EQ(r, (ssize_t)n);
    if (r != (ssize_t)n) return 0;
    T(memcmp(buf, msg, n) == 0);
    return memcmp(buf, msg, n) == 0;
}

/* A reader of want bytes that must equal expect[0, want). */
typedef struct {
    aco_rt_tls_t* t;
    size_t want;
    const unsigned char* expect;
    size_t got;
    ssize_t err;
    long long bad_at;
    long long maxread;
} bulk_t;

static void co_bulk_read(void* a) {
    bulk_t* b = a;
    unsigned char buf[20000];
    b->bad_at = -1;
    while (b->got < b->want) {
        ssize_t r = aco_rt_tls_read(b->t, buf, sizeof(buf), D());
        if (r <= 0) {
            b->err = r;
            return;
        }
        if (r > b->maxread) b->maxread = r;
        if (b->got + (size_t)r > b->want) {
            b->err = -E2BIG;
            return;
        }
        if (b->bad_at < 0 && memcmp(buf, b->expect + b->got, (size_t)r) != 0)
            b->bad_at = (long long)b->got;
        b->got += (size_t)r;
    }
}

static void bulk_check(const bulk_t* b) {
    T_EQ(b->err, 0);
    T_EQ(b->got, b->want);
    T_EQ(b->bad_at, -1);
    T_LE(b->maxread, 16384);
}

/* ------------------------------------------------------------------------ */
/* Raw OpenSSL peers on threads of their own (blocking sockets)             */
/* ------------------------------------------------------------------------ */

enum { RAW_CONNECT, RAW_RENEG, RAW_RESUME, RAW_SERVER };

typedef struct {
    int kind;
    int fd, fd2;                /* fd2: a second connection (RAW_RESUME, RAW_SERVER) */
    int minv, maxv;
    const char* ciphers;
    int rc, rc2, reused, reused2;
    char version[32], cipher[64];
    pthread_t th;
} raw_t;

static void* raw_main(void* arg) {
    raw_t* r = arg;
    /* a write to a peer gone says EPIPE here, without killing the test */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    SSL_CTX* c = SSL_CTX_new(r->kind == RAW_SERVER ? TLS_server_method() : TLS_client_method());
    CHECK(c != NULL);
    if (r->minv) CHECK(SSL_CTX_set_min_proto_version(c, r->minv) == 1);
    if (r->maxv) CHECK(SSL_CTX_set_max_proto_version(c, r->maxv) == 1);
    if (r->ciphers) CHECK(SSL_CTX_set_cipher_list(c, r->ciphers) == 1);
    SSL_CTX_set_verify(c, SSL_VERIFY_NONE, NULL);
    if (r->kind == RAW_SERVER) {
        CHECK(SSL_CTX_use_certificate(c, leaf.x) == 1);
        CHECK(SSL_CTX_use_PrivateKey(c, leaf.k) == 1);
        int fds[2] = {r->fd, r->fd2};
        for (int i = 0; i < 2 && fds[i] >= 0; i++) {
            SSL* s = SSL_new(c);
            CHECK(s != NULL);
            SSL_set_fd(s, fds[i]);
            int rc = SSL_accept(s);
            if (i == 0) r->rc = rc;
            else r->rc2 = rc;
            if (rc == 1) {
                if (i == 0) {
                    snprintf(r->version, sizeof(r->version), "%s", SSL_get_version(s));
                    r->reused = SSL_session_reused(s);
                } else {
                    r->reused2 = SSL_session_reused(s);
                }
                char buf[64];
                int n = SSL_read(s, buf, sizeof(buf));
                if (n > 0) SSL_write(s, buf, n);
                SSL_shutdown(s);
            }
            SSL_free(s);
            shutdown(fds[i], SHUT_WR);
        }
    } else {
        SSL* s = SSL_new(c);
        CHECK(s != NULL);
        SSL_set_fd(s, r->fd);
        r->rc = SSL_connect(s);
        if (r->rc == 1) {
            snprintf(r->version, sizeof(r->version), "%s", SSL_get_version(s));
            snprintf(r->cipher, sizeof(r->cipher), "%s", SSL_get_cipher_name(s));
            if (r->kind == RAW_RENEG) {
                CHECK(SSL_write(s, "ping", 4) == 4);
                CHECK(SSL_renegotiate(s) == 1);
                r->rc2 = SSL_do_handshake(s);
                if (r->rc2 == 1) {
                    /* not refused yet: let a read drive it */
                    char b;
                    r->rc2 = SSL_read(s, &b, 1) > 0 && !SSL_renegotiate_pending(s) ? 1 : -1;
                }
            } else if (r->kind == RAW_RESUME) {
                CHECK(SSL_write(s, "x", 1) == 1);
                SSL_SESSION* sess = SSL_get1_session(s);
                SSL_shutdown(s);
                SSL* s2 = SSL_new(c);
                CHECK(s2 != NULL);
                SSL_set_fd(s2, r->fd2);
                if (sess) SSL_set_session(s2, sess);
                r->rc2 = SSL_connect(s2);
                if (r->rc2 == 1) {
                    r->reused2 = SSL_session_reused(s2);
                    CHECK(SSL_write(s2, "y", 1) == 1);
                    SSL_shutdown(s2);
                }
                SSL_free(s2);
                SSL_SESSION_free(sess);
                shutdown(r->fd2, SHUT_WR);
            }
        }
        SSL_free(s);
        shutdown(r->fd, SHUT_WR);
    }
    SSL_CTX_free(c);
    ERR_clear_error();
    return NULL;
}

static void raw_start(raw_t* r) { CHECK_EQ(pthread_create(&r->th, NULL, raw_main, r), 0); }
static void raw_join(raw_t* r) { CHECK_EQ(pthread_join(r->th, NULL), 0); }

/* ======================================================================== */
/* Groups                                                                   */
/* ======================================================================== */

/* ---- aco_rt_hooks_pause/resume ------------------------------------------ */

static void* hooks_thread(void* a) {
    int* out = a;
    out[0] = aco_rt_hooks_paused();
    aco_rt_hooks_pause();
    out[1] = aco_rt_hooks_paused();
    aco_rt_hooks_resume();
    out[2] = aco_rt_hooks_paused();
    aco_rt_hooks_resume();
    out[3] = aco_rt_hooks_paused();
    /* a context made and used by another thread, not in a co */
    aco_rt_tls_opts_t o = {0};
    o.server = 1;
    o.cert_pem = leaf.cert;
    o.key_pem = leaf.key;
    char err[128];
    aco_rt_tls_ctx_t* c = aco_rt_tls_ctx_new(&o, err, sizeof(err));
    out[4] = c != NULL;
    int sv[2];
    sp(sv);
    aco_rt_tls_t* t = c ? aco_rt_tls_new(c, sv[0], NULL) : NULL;
    out[5] = t != NULL;
    aco_rt_tls_free(t);
    aco_rt_tls_ctx_free(c);
    close(sv[0]);
    close(sv[1]);
    return NULL;
}

static void hooks_checks(void) {
    T_EQ(aco_rt_hooks_paused(), 0);
    aco_rt_hooks_pause();
    T_EQ(aco_rt_hooks_paused(), 1);
    aco_rt_hooks_pause();
    T_EQ(aco_rt_hooks_paused(), 2);
    /* per thread: another thread's depth is its own */
    static int out[6];
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, hooks_thread, out), 0);
    CHECK_EQ(pthread_join(th, NULL), 0);
    T_EQ(out[0], 0);
    T_EQ(out[1], 1);
    T_EQ(out[2], 0);
    T_EQ(out[3], 0);
    T_EQ(out[4], 1);
    T_EQ(out[5], 1);
    T_EQ(aco_rt_hooks_paused(), 2);
    aco_rt_hooks_resume();
    T_EQ(aco_rt_hooks_paused(), 1);
    aco_rt_hooks_resume();
    T_EQ(aco_rt_hooks_paused(), 0);
    aco_rt_hooks_resume();     /* more than paused: nothing */
    aco_rt_hooks_resume();
    T_EQ(aco_rt_hooks_paused(), 0);
    aco_rt_hooks_pause();      /* the extra resumes left no debt */
    T_EQ(aco_rt_hooks_paused(), 1);
    aco_rt_hooks_resume();
    T_EQ(aco_rt_hooks_paused(), 0);
}

static void g_hooks(void* arg) {
    (void)arg;
    hooks_checks();
}

/* ---- aco_rt_tls_ctx_new ------------------------------------------------- */

static void ctx_fail_at(int line, const char* what, const aco_rt_tls_opts_t* o, int want) {
    char err[300];
    memset(err, 'Z', sizeof(err));
    errno = 0;
    aco_rt_tls_ctx_t* c = aco_rt_tls_ctx_new(o, err, 256);
    int e = errno;
    if (c != NULL) {
        T_FAIL("line %d: ctx_new(%s) succeeded, want errno %d (%s)", line, what, want, strerror(want));
        aco_rt_tls_ctx_free(c);
        return;
    }
    if (e != want)
        T_FAIL("line %d: ctx_new(%s): errno %d (%s), want %d (%s); err \"%.256s\"", line, what, e,
               strerror(e), want, strerror(want), err);
    if (memchr(err, 0, 256) == NULL) T_FAIL("line %d: ctx_new(%s): err not terminated within errlen", line, what);
    else if (err[0] == 0) T_FAIL("line %d: ctx_new(%s): err empty", line, what);
    if (err[256] != 'Z') T_FAIL("line %d: ctx_new(%s): err written past errlen", line, what);
    if (aco_rt_hooks_paused() != 0) T_FAIL("line %d: ctx_new(%s) left the hooks paused", line, what);
}
#define CTX_FAIL(what, o, want) ctx_fail_at(__LINE__, what, o, want)

static void ctx_ok_at(int line, const char* what, const aco_rt_tls_opts_t* o) {
    char err[256] = "";
    aco_rt_tls_ctx_t* c = aco_rt_tls_ctx_new(o, err, sizeof(err));
    if (c == NULL) T_FAIL("line %d: ctx_new(%s) failed: %s (%s)", line, what, strerror(errno), err);
    aco_rt_tls_ctx_free(c);
    ERR_clear_error();
}
#define CTX_OK(what, o) ctx_ok_at(__LINE__, what, o)

static void ctx_new_checks(void) {
    aco_rt_tls_opts_t o;
    char name256[257], name255[256], alpn[300];
    memset(name256, 'a', 256);
    name256[256] = 0;
    memset(name255, 'b', 255);
    name255[255] = 0;

    CTX_FAIL("NULL", NULL, EINVAL);
    memset(&o, 0, sizeof(o));
    o.server = 1;
    CTX_FAIL("server without certificate", &o, EINVAL);
    o.cert_pem = leaf.cert;
    CTX_FAIL("server, certificate without key", &o, EINVAL);
    o.cert_pem = NULL;
    o.key_pem = leaf.key;
    CTX_FAIL("server, key without certificate", &o, EINVAL);
    memset(&o, 0, sizeof(o));
    o.cert_pem = client1.cert;
    CTX_FAIL("client, certificate without key", &o, EINVAL);
    o.cert_pem = NULL;
    o.key_pem = client1.key;
    CTX_FAIL("client, key without certificate", &o, EINVAL);
    memset(&o, 0, sizeof(o));
    o.ca_file = g_ca_file;
    o.flags = 0x8;
    CTX_FAIL("unknown flag 0x8", &o, EINVAL);
    o.flags = 0x80000000u;
    CTX_FAIL("unknown flag 0x80000000", &o, EINVAL);
    o.flags = 0;
    int badv[] = {1, 0x0300, 0x0301, 0x0302, 0x0305, -1, 0x7f1c};
    for (size_t i = 0; i < sizeof(badv) / sizeof(badv[0]); i++) {
        char what[64];
        snprintf(what, sizeof(what), "min_version %#x", badv[i]);
        o.min_version = badv[i];
        CTX_FAIL(what, &o, EINVAL);
    }
    o.min_version = 0;
    const char* bad_alpn[] = {",", "", "h2,", ",h2", "h2,,http/1.1"};
    for (size_t i = 0; i < sizeof(bad_alpn) / sizeof(bad_alpn[0]); i++) {
        char what[64];
        snprintf(what, sizeof(what), "alpn \"%s\"", bad_alpn[i]);
        o.alpn = bad_alpn[i];
        CTX_FAIL(what, &o, EINVAL);
    }
    o.alpn = name256;
    CTX_FAIL("alpn of a 256-byte name", &o, EINVAL);
    snprintf(alpn, sizeof(alpn), "h2,%s", name256);
    o.alpn = alpn;
    CTX_FAIL("alpn h2,<256 bytes>", &o, EINVAL);
    o.alpn = name255;
    CTX_OK("alpn of a 255-byte name", &o);
    o.alpn = "h2,http/1.1";
    CTX_OK("alpn h2,http/1.1", &o);
    o.alpn = NULL;
    o.min_version = ACO_RT_TLS_1_2;
    CTX_OK("min_version 1.2", &o);
    o.min_version = ACO_RT_TLS_1_3;
    CTX_OK("min_version 1.3", &o);
    o.min_version = 0;
    o.flags = ACO_RT_TLS_NO_VERIFY;
    CTX_OK("NO_VERIFY", &o);
    o.flags = 0;

    /* files */
    memset(&o, 0, sizeof(o));
    o.server = 1;
    o.cert_file = g_missing;
    o.key_file = g_key_file;
    CTX_FAIL("missing cert_file", &o, ENOENT);
    o.cert_file = g_leaf_file;
    o.key_file = g_missing;
    CTX_FAIL("missing key_file", &o, ENOENT);
    o.key_file = g_key_file;
    CTX_OK("server from files", &o);
    o.cert_file = g_junk_file;
    CTX_FAIL("cert_file of no certificate", &o, EPROTO);
    o.cert_file = g_leaf_file;
    o.flags = ACO_RT_TLS_VERIFY_CLIENT;
    o.ca_file = g_missing;
    CTX_FAIL("VERIFY_CLIENT server, missing ca_file", &o, ENOENT);
    o.ca_file = g_ca_file;
    CTX_OK("VERIFY_CLIENT server, ca_file", &o);
    memset(&o, 0, sizeof(o));
    o.ca_file = g_missing;
    CTX_FAIL("client, missing ca_file", &o, ENOENT);
    o.ca_file = g_junk_file;
    CTX_FAIL("client, ca_file of no certificate", &o, EPROTO);
    o.ca_file = NULL;
    o.ca_dir = g_hash_dir;
    CTX_OK("client, ca_dir", &o);
    /* no descriptor left to open a file with: EMFILE, not EPROTO (a
     * certificate that looked bad) */
    memset(&o, 0, sizeof(o));
    o.server = 1;
    o.cert_file = g_leaf_file;
    o.key_file = g_key_file;
    {
        struct rlimit was, low;
        CHECK_EQ(getrlimit(RLIMIT_NOFILE, &was), 0);
        low = was;
        if (low.rlim_cur > 512) low.rlim_cur = 512;
        CHECK_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
        int fds[512], nfd = 0;
        while (nfd < 512 && (fds[nfd] = dup(0)) >= 0) nfd++;
        CHECK(nfd < 512);
        CTX_FAIL("server from files, out of descriptors", &o, EMFILE);
        while (nfd > 0) close(fds[--nfd]);
        CHECK_EQ(setrlimit(RLIMIT_NOFILE, &was), 0);
    }
    CTX_OK("server from files, descriptors back", &o);

    /* OpenSSL refuses */
    memset(&o, 0, sizeof(o));
    o.server = 1;
    o.cert_pem = leaf.cert;
    o.key_pem = expired.key;
    CTX_FAIL("a key that does not match its certificate", &o, EPROTO);
    o.key_pem = "-----BEGIN PRIVATE KEY-----\nnot base64 at all!\n-----END PRIVATE KEY-----\n";
    CTX_FAIL("key PEM it cannot read", &o, EPROTO);
    o.cert_pem = "garbage";
    o.key_pem = leaf.key;
    CTX_FAIL("certificate PEM it cannot read", &o, EPROTO);
    o.cert_pem = leaf.cert;
    o.ciphers = "NO-SUCH-CIPHER";
    CTX_FAIL("ciphers NO-SUCH-CIPHER", &o, EPROTO);
    o.ciphers = NULL;
    o.suites = "TLS_NO_SUCH_SUITE";
    CTX_FAIL("suites TLS_NO_SUCH_SUITE", &o, EPROTO);
    o.suites = NULL;
    CTX_OK("server from memory", &o);

    /* err: NULL, and at most errlen bytes */
    errno = 0;
    T(aco_rt_tls_ctx_new(NULL, NULL, 0) == NULL);
    T_EQ(errno, EINVAL);
    char small[16];
    memset(small, 'Z', sizeof(small));
    T(aco_rt_tls_ctx_new(NULL, small, 8) == NULL);
    T(memchr(small, 0, 8) != NULL);
    T_EQ(small[8], 'Z');
    memset(small, 'Z', sizeof(small));
    T(aco_rt_tls_ctx_new(NULL, small, 1) == NULL);
    T_EQ(small[0], 0);
    T_EQ(small[1], 'Z');
    memset(small, 'Z', sizeof(small));
    T(aco_rt_tls_ctx_new(NULL, small, 0) == NULL);
    T_EQ(small[0], 'Z');

    /* the hooks' depth is the caller's again after it */
    aco_rt_hooks_pause();
    memset(&o, 0, sizeof(o));
    o.server = 1;
    o.cert_file = g_leaf_file;
    o.key_file = g_key_file;
    CTX_OK("server from files, hooks paused by the caller", &o);
    T_EQ(aco_rt_hooks_paused(), 1);
    aco_rt_hooks_resume();
    T_EQ(aco_rt_hooks_paused(), 0);
}

static void g_ctx_new(void* arg) {
    (void)arg;
    ctx_new_checks();
}

/* ---- aco_rt_tls_new, frees of NULL, -EPERM outside cos ------------------ */

static void new_checks(void) {
    int sv[2];
    sp(sv);
    errno = 0;
    T(aco_rt_tls_new(NULL, sv[0], "localhost") == NULL);
    T_EQ(errno, EINVAL);
    errno = 0;
    T(aco_rt_tls_new(g_cli, -1, "localhost") == NULL);
    T_EQ(errno, EINVAL);
    errno = 0;
    T(aco_rt_tls_new(g_cli, sv[0], NULL) == NULL);
    T_EQ(errno, EINVAL);
    errno = 0;
    aco_rt_tls_t* t = aco_rt_tls_new(g_srv, sv[1], "localhost");
    T(t == NULL);
    T_EQ(errno, EINVAL);
    aco_rt_tls_free(t);
    t = aco_rt_tls_new(g_cli_nv, sv[0], NULL);
    T(t != NULL);
    T_EQ(aco_rt_tls_fd(t), sv[0]);
    aco_rt_tls_free(t);
    T(!pending(sv[1]));         /* nothing sent */
    /* NULLs */
    aco_rt_tls_ctx_free(NULL);
    aco_rt_tls_free(NULL);
    aco_rt_tls_session_free(NULL);
    aco_rt_bufio_free(NULL);
    errno = 0;
    T(aco_rt_tls_bufio_new(NULL, 0, 0) == NULL);
    T_EQ(errno, EINVAL);
    close(sv[0]);
    close(sv[1]);
}

/* -EPERM outside a co: made here (not in a co), the handshake then done in
 * a co. */
static link_t g_eperm_link;

static void eperm_outside(void) {
    link_t* l = &g_eperm_link;
    link_open(l, g_srv, g_cli, "localhost", 0);
    char buf[8];
    struct iovec iov = {buf, 1};
    T_EQ(aco_rt_tls_handshake(l->c, -1), -EPERM);
    T_TEXT(aco_rt_tls_error(l->c));
    T_EQ(aco_rt_tls_read(l->c, buf, sizeof(buf), -1), -EPERM);
    T_EQ(aco_rt_tls_write(l->c, "x", 1, -1), -EPERM);
    T_EQ(aco_rt_tls_writev(l->c, &iov, 1, -1), -EPERM);
    T_EQ(aco_rt_tls_handshake(l->s, -1), -EPERM);
    T_EQ(aco_rt_tls_read(l->s, buf, sizeof(buf), -1), -EPERM);
    T_EQ(aco_rt_tls_wait(l->s, -1), -EPERM);
    T(!pending(l->sfd));
    T(!pending(l->cfd));
    /* t NULL: -EINVAL first (here before -EPERM), the getters' zero */
    T_EQ(aco_rt_tls_handshake(NULL, -1), -EINVAL);
    T_EQ(aco_rt_tls_read(NULL, buf, sizeof(buf), -1), -EINVAL);
    T_EQ(aco_rt_tls_write(NULL, "x", 1, -1), -EINVAL);
    T_EQ(aco_rt_tls_write(NULL, "x", 0, -1), -EINVAL);
    T_EQ(aco_rt_tls_writev(NULL, &iov, 1, -1), -EINVAL);
    T_EQ(aco_rt_tls_shutdown(NULL, -1), -EINVAL);
    T_EQ(aco_rt_tls_wait(NULL, -1), -EINVAL);
    T_EQ(aco_rt_tls_fd(NULL), -EINVAL);
    T_TEXT(aco_rt_tls_error(NULL));
    T_EQ(aco_rt_tls_verify_result(NULL), X509_V_ERR_UNSPECIFIED);
    T(aco_rt_tls_alpn(NULL) == NULL);
    T(aco_rt_tls_host(NULL) == NULL);
    T(aco_rt_tls_version(NULL) == NULL);
    T(aco_rt_tls_cipher(NULL) == NULL);
    T_EQ(aco_rt_tls_resumed(NULL), 0);
    T_EQ(aco_rt_tls_pending(NULL), 0);
    T(aco_rt_tls_session(NULL) == NULL);
    T_EQ(aco_rt_tls_set_session(NULL, NULL), -EINVAL);
}

static void g_eperm_then(void* arg) {
    (void)arg;
    link_t* l = &g_eperm_link;
    if (link_up(l)) pass(l->c, l->s, "after EPERM");
    link_close(l);
}

/* ---- the handshake, getters --------------------------------------------- */

static void g_basics(void* arg) {
    (void)arg;
    link_t l;
    link_open(&l, g_srv, g_cli, "localhost", 0);
    CHECK_EQ(fcntl(l.cfd, F_SETFL, fcntl(l.cfd, F_GETFL) | O_NONBLOCK), 0);
    int fl_c = fcntl(l.cfd, F_GETFL), fl_s = fcntl(l.sfd, F_GETFL);
    T_STR(aco_rt_tls_error(l.c), "");
    T_STR(aco_rt_tls_error(l.s), "");
    T_EQ(aco_rt_tls_verify_result(l.c), 0);
    T_EQ(aco_rt_tls_fd(l.c), l.cfd);
    T_EQ(aco_rt_tls_fd(l.s), l.sfd);
    T(!pending(l.sfd));
    T(!pending(l.cfd));
    /* a stale error in the thread's queue is no call's */
    ERR_raise(ERR_LIB_SSL, SSL_R_BAD_LENGTH);
    if (link_up(&l)) {
        T_QUEUE_EMPTY();
        int64_t t0 = aco_rt_now();
        T_EQ(aco_rt_tls_handshake(l.c, D()), 0);
        T_EQ(aco_rt_tls_handshake(l.s, D()), 0);
        T_LT(aco_rt_now() - t0, PROMPT);
        T_STR(aco_rt_tls_version(l.c), "TLSv1.3");
        T_STR(aco_rt_tls_version(l.s), "TLSv1.3");
        T_TEXT(aco_rt_tls_cipher(l.c));
        T_STR(aco_rt_tls_cipher(l.c), aco_rt_tls_cipher(l.s));
        T(aco_rt_tls_alpn(l.c) == NULL);
        T(aco_rt_tls_alpn(l.s) == NULL);
        T_STR(aco_rt_tls_host(l.s), "localhost");
        T_EQ(aco_rt_tls_resumed(l.c), 0);
        T_EQ(aco_rt_tls_resumed(l.s), 0);
        T_EQ(aco_rt_tls_verify_result(l.c), 0);
        T_EQ(aco_rt_tls_verify_result(l.s), 0);
        T_STR(aco_rt_tls_error(l.c), "");
        T_STR(aco_rt_tls_error(l.s), "");
        /* a NULL buffer or piece with a length: -EFAULT, nothing done */
        struct iovec nv[2] = {{(void*)"ab", 2}, {NULL, 4}};
        T_EQ(aco_rt_tls_read(l.s, NULL, 8, D()), -EFAULT);
        T_EQ(aco_rt_tls_write(l.c, NULL, 8, D()), -EFAULT);
        T_EQ(aco_rt_tls_writev(l.c, NULL, 1, D()), -EFAULT);
        T_EQ(aco_rt_tls_writev(l.c, nv, 2, D()), -EFAULT);
        /* a total over SSIZE_MAX is -EINVAL whatever else is wrong, as
         * aco_rt_writev's (the NULL piece first, the total after it) */
        struct iovec hv[3] = {{NULL, 4}, {(void*)"ab", (size_t)SSIZE_MAX}, {(void*)"ab", 2}};
        T_EQ(aco_rt_tls_writev(l.c, hv, 3, D()), -EINVAL);
        pass(l.c, l.s, "ping");
        pass(l.s, l.c, "pong");
        T_QUEUE_EMPTY();
        T_EQ(fcntl(l.cfd, F_GETFL), fl_c);
        T_EQ(fcntl(l.sfd, F_GETFL), fl_s);
        /* free sends nothing and leaves the socket open */
        aco_rt_tls_free(l.c);
        l.c = NULL;
        T(!pending(l.sfd));
        T(fcntl(l.cfd, F_GETFD) >= 0);
    }
    link_close(&l);

    /* no handshake called: the first read and write do it */
    link_open(&l, g_srv, g_cli, "localhost", 0);
    bulk_t rb;
    memset(&rb, 0, sizeof(rb));
    rb.t = l.s;
    rb.want = 5;
    rb.expect = (const unsigned char*)"first";
    aco_rt_co_t* co = go(co_bulk_read, &rb);
    T_EQ(aco_rt_tls_write(l.c, "first", 5, D()), 5);
    join(co);
    bulk_check(&rb);
    T_STR(aco_rt_tls_version(l.s), "TLSv1.3");
    T_EQ(aco_rt_tls_handshake(l.s, D()), 0);
    T_EQ(aco_rt_tls_handshake(l.c, D()), 0);
    link_close(&l);

    /* suites, min_version 1.3 on both sides */
    aco_rt_tls_opts_t o = {0};
    o.server = 1;
    o.cert_pem = leaf.cert;
    o.key_pem = leaf.key;
    o.suites = "TLS_CHACHA20_POLY1305_SHA256";
    o.min_version = ACO_RT_TLS_1_3;
    aco_rt_tls_ctx_t* s = ctx_or_die(&o);
    aco_rt_tls_ctx_t* c = client_ctx(NULL, NULL, 0, ACO_RT_TLS_1_3);
    link_open(&l, s, c, "localhost", 0);
    if (link_up(&l)) {
        T_STR(aco_rt_tls_cipher(l.c), "TLS_CHACHA20_POLY1305_SHA256");
        T_STR(aco_rt_tls_cipher(l.s), "TLS_CHACHA20_POLY1305_SHA256");
        T_STR(aco_rt_tls_version(l.s), "TLSv1.3");
        pass(l.c, l.s, "chacha");
    }
    link_close(&l);
    aco_rt_tls_ctx_free(s);
    aco_rt_tls_ctx_free(c);

    /* a server whose certificate and key came from files */
    memset(&o, 0, sizeof(o));
    o.server = 1;
    o.cert_file = g_leaf_file;
    o.key_file = g_key_file;
    s = ctx_or_die(&o);
    link_open(&l, s, g_cli, "localhost", 0);
    if (link_up(&l)) pass(l.s, l.c, "from files");
    link_close(&l);
    aco_rt_tls_ctx_free(s);
}

/* ---- ALPN ----------------------------------------------------------------- */

static void alpn_case(int line, const char* salpn, const char* calpn, int want_s, int want_c,
                      const char* chosen) {
    aco_rt_tls_ctx_t* s = server_ctx(&leaf, salpn, 0, 0);
    aco_rt_tls_ctx_t* c = client_ctx(NULL, calpn, 0, 0);
    link_t l;
    link_open(&l, s, c, "localhost", 0);
    int rs, rc;
    link_hs(&l, &rs, &rc);
    if ((want_s != 1 && rs != want_s) || rc != want_c)
        T_FAIL("line %d: ALPN server \"%.20s\" client \"%.20s\": server %d (%s), client %d (%s); want %d, %d",
               line, QS_(salpn), QS_(calpn), rs, aco_rt_tls_error(l.s), rc, aco_rt_tls_error(l.c),
               want_s, want_c);
    if (rs == 0 && rc == 0) {
        T_STR(aco_rt_tls_alpn(l.s), chosen);
        T_STR(aco_rt_tls_alpn(l.c), chosen);
        pass(l.c, l.s, "alpn");
    } else {
        if (rc) T_TEXT(aco_rt_tls_error(l.c));
        if (rs < 0) T_TEXT(aco_rt_tls_error(l.s));
    }
    link_close(&l);
    aco_rt_tls_ctx_free(s);
    aco_rt_tls_ctx_free(c);
}

static void g_alpn(void* arg) {
    (void)arg;
    alpn_case(__LINE__, "h2,http/1.1", "http/1.1,h2", 0, 0, "h2");
    alpn_case(__LINE__, "spdy/3,http/1.1,h2", "foo,h2,http/1.1", 0, 0, "http/1.1");
    alpn_case(__LINE__, "h2", "foo,bar", -EPROTO, -EPROTO, NULL);
    alpn_case(__LINE__, NULL, "h2", 1, -EPROTO, NULL);
    alpn_case(__LINE__, "h2", NULL, 0, 0, NULL);
    alpn_case(__LINE__, NULL, NULL, 0, 0, NULL);
    char n255[300];
    memset(n255, 'p', 255);
    n255[255] = 0;
    char list[600];
    snprintf(list, sizeof(list), "h2,%s", n255);
    alpn_case(__LINE__, list, n255, 0, 0, n255);
}

/* ---- SNI ------------------------------------------------------------------- */

static void sni_case(int line, aco_rt_tls_ctx_t* s, aco_rt_tls_ctx_t* c, const char* host, int want_c,
                     const char* want_host) {
    link_t l;
    link_open(&l, s, c, host, 0);
    int rs, rc;
    link_hs(&l, &rs, &rc);
    if (rc != want_c)
        T_FAIL("line %d: SNI %s: client %d (%s), server %d (%s); want client %d", line, host, rc,
               aco_rt_tls_error(l.c), rs, aco_rt_tls_error(l.s), want_c);
    if (rc == 0 && rs == 0) {
        const char* h = aco_rt_tls_host(l.s);
        if (want_host == NULL ? h != NULL : (h == NULL || strcasecmp(h, want_host) != 0))
            T_FAIL("line %d: SNI %s: the server's host \"%s\", want \"%s\"", line, host, QS_(h),
                   QS_(want_host));
        pass(l.c, l.s, host);
    }
    if (rc == -EKEYREJECTED) T_EQ(aco_rt_tls_verify_result(l.c), X509_V_ERR_HOSTNAME_MISMATCH);
    link_close(&l);
}

static void g_sni(void* arg) {
    (void)arg;
    aco_rt_tls_ctx_t* s = server_ctx(&sni_default, NULL, 0, 0);
    aco_rt_tls_ctx_t* ex = server_ctx(&sni_exact, NULL, 0, 0);
    aco_rt_tls_ctx_t* wi = server_ctx(&sni_wild, NULL, 0, 0);
    char n256[300], n255[300];
    memset(n256, 'h', 256);
    n256[256] = 0;
    memset(n255, 'k', 255);
    n255[255] = 0;
    T_EQ(aco_rt_tls_ctx_add_host(s, "exact.test", ex), 0);
    T_EQ(aco_rt_tls_ctx_add_host(s, "*.example.com", wi), 0);
    T_EQ(aco_rt_tls_ctx_add_host(s, "exact.test", ex), -EEXIST);
    T_EQ(aco_rt_tls_ctx_add_host(s, "EXACT.Test", wi), -EEXIST);
    T_EQ(aco_rt_tls_ctx_add_host(s, "*.EXAMPLE.com", wi), -EEXIST);
    T_EQ(aco_rt_tls_ctx_add_host(g_cli, "x.test", ex), -EINVAL);
    T_EQ(aco_rt_tls_ctx_add_host(s, "x.test", g_cli), -EINVAL);
    T_EQ(aco_rt_tls_ctx_add_host(s, NULL, ex), -EINVAL);
    T_EQ(aco_rt_tls_ctx_add_host(s, "", ex), -EINVAL);
    T_EQ(aco_rt_tls_ctx_add_host(s, n256, ex), -EINVAL);
    T_EQ(aco_rt_tls_ctx_add_host(s, n255, ex), 0);
    /* s holds them */
    aco_rt_tls_ctx_free(ex);
    aco_rt_tls_ctx_free(wi);

    /* each name verifies only against the certificate meant for it */
    sni_case(__LINE__, s, g_cli, "exact.test", 0, "exact.test");
    sni_case(__LINE__, s, g_cli, "Exact.TEST", 0, "exact.test");
    sni_case(__LINE__, s, g_cli, "x.example.com", 0, "x.example.com");
    sni_case(__LINE__, s, g_cli, "Y.Example.COM", 0, "y.example.com");
    /* the wildcard matches one label: these get the default certificate */
    sni_case(__LINE__, s, g_cli, "a.b.example.com", 0, "a.b.example.com");
    sni_case(__LINE__, s, g_cli, "example.com", 0, "example.com");
    sni_case(__LINE__, s, g_cli, "other.test", 0, "other.test");
    sni_case(__LINE__, s, g_cli, "nomatch.test", -EKEYREJECTED, NULL);
    /* an IP address is not sent as SNI */
    sni_case(__LINE__, s, g_cli_nv, "127.0.0.1", 0, NULL);
    aco_rt_tls_ctx_free(s);
}

/* The added contexts give their certificate and key; the other options
 * stay ctx's: ALPN, client verification, tickets. */
static void g_sni_options(void* arg) {
    (void)arg;
    link_t l;
    int rs, rc;
    aco_rt_tls_ctx_t* ex = server_ctx(&sni_exact, NULL, 0, 0);

    /* ALPN */
    aco_rt_tls_ctx_t* s = server_ctx(&sni_default, "h2,http/1.1", 0, 0);
    T_EQ(aco_rt_tls_ctx_add_host(s, "exact.test", ex), 0);
    aco_rt_tls_ctx_t* c = client_ctx(NULL, "http/1.1", 0, 0);
    const char* names[] = {"other.test", "exact.test"};
    for (int i = 0; i < 2; i++) {
        link_open(&l, s, c, names[i], 0);
        link_hs(&l, &rs, &rc);
        if (rs != 0 || rc != 0)
            T_FAIL("SNI %s, ALPN of ctx: server %d (%s), client %d (%s)", names[i], rs,
                   aco_rt_tls_error(l.s), rc, aco_rt_tls_error(l.c));
        else {
            T_STR(aco_rt_tls_alpn(l.s), "http/1.1");
            T_STR(aco_rt_tls_alpn(l.c), "http/1.1");
        }
        link_close(&l);
    }
    aco_rt_tls_ctx_free(s);
    aco_rt_tls_ctx_free(c);

    /* client verification */
    s = server_ctx(&sni_default, NULL, ACO_RT_TLS_VERIFY_CLIENT, 0);
    T_EQ(aco_rt_tls_ctx_add_host(s, "exact.test", ex), 0);
    c = client_ctx(&client1, NULL, 0, 0);
    for (int i = 0; i < 2; i++) {
        link_open(&l, s, c, names[i], 0);
        link_hs(&l, &rs, &rc);
        if (rs != 0 || rc != 0)
            T_FAIL("SNI %s, a client certificate against ctx's ca_file: server %d (%s), client %d (%s)",
                   names[i], rs, aco_rt_tls_error(l.s), rc, aco_rt_tls_error(l.c));
        else
            pass(l.c, l.s, "verified client");
        link_close(&l);
        /* and without a certificate: refused */
        link_open(&l, s, g_cli, names[i], 0);
        link_hs(&l, &rs, &rc);
        if (rs == 0) T_FAIL("SNI %s, VERIFY_CLIENT of ctx: a client without certificate was let in", names[i]);
        link_close(&l);
    }
    aco_rt_tls_ctx_free(s);
    aco_rt_tls_ctx_free(c);

    /* no tickets */
    s = server_ctx(&sni_default, NULL, ACO_RT_TLS_NO_TICKETS, 0);
    T_EQ(aco_rt_tls_ctx_add_host(s, "exact.test", ex), 0);
    link_open(&l, s, g_cli, "exact.test", 0);
    if (link_up(&l)) {
        pass(l.s, l.c, "x");
        aco_rt_tls_session_t* none = aco_rt_tls_session(l.c);
        T(none == NULL);
        aco_rt_tls_session_free(none);
    }
    link_close(&l);
    aco_rt_tls_ctx_free(s);
    aco_rt_tls_ctx_free(ex);
}

/* ---- resumption -------------------------------------------------------------- */

/* A clean end: close_notify both ways. */
static void link_bye(link_t* l) {
    char b[8];
    T_EQ(aco_rt_tls_shutdown(l->c, D()), 0);
    T_EQ(aco_rt_tls_read(l->s, b, sizeof(b), D()), 0);
    T_EQ(aco_rt_tls_shutdown(l->s, D()), 0);
    T_EQ(aco_rt_tls_read(l->c, b, sizeof(b), D()), 0);
}

/* A first connection: the client reads once after the handshake, so that
 * the tickets come; its session (NULL if none).  clean: it ends with
 * close_notify both ways (else both are freed without). */
static aco_rt_tls_session_t* first_conn(aco_rt_tls_ctx_t* s, aco_rt_tls_ctx_t* c, int check_null_before,
                                        int clean) {
    link_t l;
    aco_rt_tls_session_t* sess = NULL;
    link_open(&l, s, c, "localhost", 0);
    if (link_up(&l)) {
        if (check_null_before) {
            aco_rt_tls_session_t* early = aco_rt_tls_session(l.c);
            T(early == NULL);
            aco_rt_tls_session_free(early);
        }
        pass(l.s, l.c, "x");
        sess = aco_rt_tls_session(l.c);
        T_EQ(aco_rt_tls_resumed(l.c), 0);
        T_EQ(aco_rt_tls_resumed(l.s), 0);
        if (sess) {
            T_EQ(aco_rt_tls_set_session(l.s, sess), -EINVAL);
            T_EQ(aco_rt_tls_set_session(l.c, sess), -EINVAL);
        }
        if (clean) link_bye(&l);
    }
    link_close(&l);
    return sess;
}

/* A connection offering sess: resumed on the client, on the server. */
static void resume_conn(aco_rt_tls_ctx_t* s, aco_rt_tls_ctx_t* c, aco_rt_tls_session_t* sess,
                        int free_early, int* rc_out, int* rs_out, aco_rt_tls_session_t** next) {
    link_t l;
    /* a session is its host's: a resumption checks no certificate, so a
     * connection made for another name may not offer it (it once did,
     * and resumed unverified); the name's case does not matter */
    int sp2[2];
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sp2), 0);
    aco_rt_tls_t* other = aco_rt_tls_new(c, sp2[0], "other.example");
    aco_rt_tls_t* upper = aco_rt_tls_new(c, sp2[1], "LOCALHOST");
    CHECK(other != NULL && upper != NULL);
    T_EQ(aco_rt_tls_set_session(other, sess), -EINVAL);
    T_EQ(aco_rt_tls_set_session(upper, sess), 0);
    aco_rt_tls_free(other);
    aco_rt_tls_free(upper);
    CHECK_EQ(close(sp2[0]), 0);
    CHECK_EQ(close(sp2[1]), 0);
    link_open(&l, s, c, "localhost", 0);
    T_EQ(aco_rt_tls_set_session(l.s, sess), -EINVAL);
    T_EQ(aco_rt_tls_set_session(l.c, sess), 0);
    if (free_early) aco_rt_tls_session_free(sess);
    *rc_out = *rs_out = -1;
    if (link_up(&l)) {
        *rc_out = aco_rt_tls_resumed(l.c);
        *rs_out = aco_rt_tls_resumed(l.s);
        T(aco_rt_tls_host(l.c) != NULL && strcmp(aco_rt_tls_host(l.c), "localhost") == 0);
        pass(l.s, l.c, "resumed?");
        if (next) {
            *next = aco_rt_tls_session(l.c);
            T(*next != NULL);
        }
        link_bye(&l);
    }
    link_close(&l);
}

static void g_resume(void* arg) {
    (void)arg;
    aco_rt_tls_session_t* s1 = first_conn(g_srv, g_cli, 1, 1);
    T(s1 != NULL);
    if (s1 == NULL) return;
    int rc, rs;
    aco_rt_tls_session_t* s2 = NULL;
    resume_conn(g_srv, g_cli, s1, 0, &rc, &rs, &s2);
    T_NE(rc, 0);
    T_NE(rs, 0);
    /* t takes its own hold: the session freed before the handshake */
    aco_rt_tls_session_t* s3 = NULL;
    if (s2) {
        resume_conn(g_srv, g_cli, s2, 1, &rc, &rs, &s3);
        T_NE(rc, 0);
        T_NE(rs, 0);
    }
    /* another server context (same certificate) does not resume it */
    aco_rt_tls_ctx_t* other = server_ctx(&leaf, NULL, 0, 0);
    if (s3) {
        resume_conn(other, g_cli, s3, 0, &rc, &rs, NULL);
        T_EQ(rc, 0);
        T_EQ(rs, 0);
    }
    aco_rt_tls_ctx_free(other);
    /* no tickets */
    aco_rt_tls_ctx_t* nt = server_ctx(&leaf, NULL, ACO_RT_TLS_NO_TICKETS, 0);
    aco_rt_tls_session_t* none = first_conn(nt, g_cli, 0, 1);
    T(none == NULL);
    aco_rt_tls_session_free(none);
    aco_rt_tls_ctx_free(nt);
    /* set_session after the handshake began (a timed out one) */
    link_t l;
    link_open(&l, g_srv, g_cli, "localhost", 0);
    T_EQ(aco_rt_tls_handshake(l.c, aco_rt_in_ms(20)), -ETIMEDOUT);
    if (s1) T_EQ(aco_rt_tls_set_session(l.c, s1), -EINVAL);
    link_close(&l);
    aco_rt_tls_session_free(s1);
    aco_rt_tls_session_free(s3);
    /* a session of a connection freed without close_notify: the header
     * sets no condition on how the connection ended */
    aco_rt_tls_session_t* su = first_conn(g_srv, g_cli, 0, 0);
    T(su != NULL);
    if (su) {
        resume_conn(g_srv, g_cli, su, 1, &rc, &rs, NULL);
        if (rc == 0 || rs == 0)
            T_FAIL("a session taken from a connection freed without shutdown did not resume "
                   "(client %d, server %d)", rc, rs);
    }
}

/* A ticket resumed by a server of the same context in another thread. */
typedef struct {
    int fd;
    int hs, resumed;
    ssize_t end;
} far_t;

static void co_far_server(void* a) {
    far_t* f = a;
    aco_rt_tls_t* t = aco_rt_tls_new(g_srv, f->fd, NULL);
    CHECK(t != NULL);
    f->hs = aco_rt_tls_handshake(t, D());
    if (f->hs == 0) {
        f->resumed = aco_rt_tls_resumed(t);
        char buf[64];
        ssize_t r = aco_rt_tls_read(t, buf, sizeof(buf), D());
        if (r > 0) aco_rt_tls_write(t, buf, (size_t)r, D());
        f->end = aco_rt_tls_read(t, buf, sizeof(buf), D());
        aco_rt_tls_shutdown(t, D());
    }
    aco_rt_tls_free(t);
}

static void* far_thread(void* a) {
    aco_rt_sched_t* s = test_sched_on(test_backend_id, NULL);
    test_go(s, co_far_server, a);
    aco_rt_sched_free(s);
    return NULL;
}

static void g_threads(void* arg) {
    (void)arg;
    aco_rt_tls_session_t* sess = first_conn(g_srv, g_cli, 0, 1);
    T(sess != NULL);
    if (!sess) return;
    static far_t f;
    memset(&f, 0, sizeof(f));
    int sv[2];
    sp(sv);
    f.fd = sv[1];
    f.end = 1;
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, far_thread, &f), 0);
    aco_rt_tls_t* t = aco_rt_tls_new(g_cli, sv[0], "localhost");
    CHECK(t != NULL);
    T_EQ(aco_rt_tls_set_session(t, sess), 0);
    aco_rt_tls_session_free(sess);
    T_EQ(aco_rt_tls_handshake(t, D()), 0);
    T_NE(aco_rt_tls_resumed(t), 0);
    char buf[16];
    T_EQ(aco_rt_tls_write(t, "far", 3, D()), 3);
    T_EQ(read_n(t, buf, 3), 3);
    T(memcmp(buf, "far", 3) == 0);
    T_EQ(aco_rt_tls_shutdown(t, D()), 0);
    T_EQ(aco_rt_tls_read(t, buf, sizeof(buf), D()), 0);
    CHECK_EQ(pthread_join(th, NULL), 0);
    T_EQ(f.hs, 0);
    T_NE(f.resumed, 0);
    T_EQ(f.end, 0);
    aco_rt_tls_free(t);
    close(sv[0]);
    close(sv[1]);
}

/* ---- verification ------------------------------------------------------------ */

static void verify_case(int line, aco_rt_tls_ctx_t* s, aco_rt_tls_ctx_t* c, const char* host, int want_c,
                        long want_vr, const char* text) {
    link_t l;
    link_open(&l, s, c, host, 0);
    int rs, rc;
    link_hs(&l, &rs, &rc);
    long vr = aco_rt_tls_verify_result(l.c);
    if (rc != want_c)
        T_FAIL("line %d: host %s: client %d (%s), want %d", line, QS_(host), rc, aco_rt_tls_error(l.c), want_c);
    if (want_vr >= 0 && vr != want_vr)
        T_FAIL("line %d: host %s: verify_result %ld (%s), want %ld (%s)", line, QS_(host), vr,
               X509_verify_cert_error_string(vr), want_vr, X509_verify_cert_error_string(want_vr));
    if (want_vr == -2 && vr != X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY &&
        vr != X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT && vr != X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE)
        T_FAIL("line %d: host %s: verify_result %ld (%s), want an unknown issuer's", line, QS_(host), vr,
               X509_verify_cert_error_string(vr));
    if (text && !strstr(aco_rt_tls_error(l.c), text))
        T_FAIL("line %d: host %s: error \"%s\" lacks \"%s\"", line, QS_(host), aco_rt_tls_error(l.c), text);
    if (want_c == -EKEYREJECTED) {
        T_TEXT(aco_rt_tls_error(l.c));
        /* the server heard the client's alert */
        if (rs != -EPROTO)
            T_FAIL("line %d: host %s: server %d (%s), want -EPROTO", line, QS_(host), rs, aco_rt_tls_error(l.s));
    }
    if (rc == 0 && rs == 0) pass(l.c, l.s, "verified");
    T_QUEUE_EMPTY();
    link_close(&l);
}

static void g_verify(void* arg) {
    (void)arg;
    verify_case(__LINE__, g_srv_expired, g_cli, "localhost", -EKEYREJECTED,
                X509_V_ERR_CERT_HAS_EXPIRED, "expired");
    verify_case(__LINE__, g_srv_wrong, g_cli, "localhost", -EKEYREJECTED, X509_V_ERR_HOSTNAME_MISMATCH, NULL);
    verify_case(__LINE__, g_srv, g_cli, "wrong.example", -EKEYREJECTED, X509_V_ERR_HOSTNAME_MISMATCH, NULL);
    verify_case(__LINE__, g_srv_wrong, g_cli, "wrong.example", 0, 0, NULL);
    verify_case(__LINE__, g_srv_untrusted, g_cli, "localhost", -EKEYREJECTED, -2, NULL);
    /* NO_VERIFY accepts them all, host or not */
    verify_case(__LINE__, g_srv_expired, g_cli_nv, "localhost", 0, 0, NULL);
    verify_case(__LINE__, g_srv_wrong, g_cli_nv, "localhost", 0, 0, NULL);
    verify_case(__LINE__, g_srv_untrusted, g_cli_nv, "localhost", 0, 0, NULL);
    verify_case(__LINE__, g_srv_untrusted, g_cli_nv, NULL, 0, 0, NULL);
    /* IP addresses against the IP SAN */
    verify_case(__LINE__, g_srv, g_cli, "127.0.0.1", 0, 0, NULL);
    verify_case(__LINE__, g_srv, g_cli, "127.0.0.2", -EKEYREJECTED, X509_V_ERR_IP_ADDRESS_MISMATCH, NULL);
    verify_case(__LINE__, g_srv, g_cli, "::1", -EKEYREJECTED, X509_V_ERR_IP_ADDRESS_MISMATCH, NULL);
    verify_case(__LINE__, g_srv_wrong, g_cli, "127.0.0.1", -EKEYREJECTED, X509_V_ERR_IP_ADDRESS_MISMATCH, NULL);
    /* trust from a hashed directory */
    aco_rt_tls_opts_t o = {0};
    o.ca_dir = g_hash_dir;
    aco_rt_tls_ctx_t* c = ctx_or_die(&o);
    verify_case(__LINE__, g_srv, c, "localhost", 0, 0, NULL);
    aco_rt_tls_ctx_free(c);
    /* the system's store: $SSL_CERT_FILE, read at ctx_new */
    char* old = getenv("SSL_CERT_FILE") ? strdup(getenv("SSL_CERT_FILE")) : NULL;
    memset(&o, 0, sizeof(o));
    setenv("SSL_CERT_FILE", g_ca_file, 1);
    c = ctx_or_die(&o);
    setenv("SSL_CERT_FILE", g_junk_file, 1);   /* read once, at ctx_new */
    verify_case(__LINE__, g_srv, c, "localhost", 0, 0, NULL);
    aco_rt_tls_ctx_free(c);
    unsetenv("SSL_CERT_FILE");
    c = ctx_or_die(&o);
    verify_case(__LINE__, g_srv, c, "localhost", -EKEYREJECTED, -2, NULL);
    aco_rt_tls_ctx_free(c);
    if (old) {
        setenv("SSL_CERT_FILE", old, 1);
        free(old);
    }
}

/* ---- client certificates -------------------------------------------------------- */

static void g_client_cert(void* arg) {
    (void)arg;
    aco_rt_tls_ctx_t* s = server_ctx(&leaf, NULL, ACO_RT_TLS_VERIFY_CLIENT, 0);
    aco_rt_tls_ctx_t* c1 = client_ctx(&client1, NULL, 0, 0);
    aco_rt_tls_ctx_t* c2 = client_ctx(&client2, NULL, 0, 0);
    link_t l;
    int rs, rc;
    char buf[16];

    /* no certificate: both fail (TLS 1.3: the client may learn it at its
     * first read, after its side of the handshake) */
    link_open(&l, s, g_cli, "localhost", 0);
    link_hs(&l, &rs, &rc);
    if (rs != -EPROTO && rs != -EKEYREJECTED)
        T_FAIL("no client certificate: server %d (%s), want -EPROTO or -EKEYREJECTED", rs, aco_rt_tls_error(l.s));
    T_TEXT(aco_rt_tls_error(l.s));
    if (rc == 0) rc = (int)aco_rt_tls_read(l.c, buf, sizeof(buf), D());
    T_EQ(rc, -EPROTO);
    T_QUEUE_EMPTY();
    link_close(&l);

    /* with one */
    link_open(&l, s, c1, "localhost", 0);
    if (link_up(&l)) {
        T_EQ(aco_rt_tls_verify_result(l.s), 0);
        pass(l.c, l.s, "client cert");
        pass(l.s, l.c, "back");
    }
    link_close(&l);

    /* with one from an untrusted CA */
    link_open(&l, s, c2, "localhost", 0);
    link_hs(&l, &rs, &rc);
    T_EQ(rs, -EKEYREJECTED);
    T_NE(aco_rt_tls_verify_result(l.s), 0);
    T_TEXT(aco_rt_tls_error(l.s));
    if (rc == 0) rc = (int)aco_rt_tls_read(l.c, buf, sizeof(buf), D());
    T_EQ(rc, -EPROTO);
    link_close(&l);

    aco_rt_tls_ctx_free(s);
    aco_rt_tls_ctx_free(c1);
    aco_rt_tls_ctx_free(c2);
}

/* ---- versions, renegotiation (raw OpenSSL peers) ------------------------------- */

/* Our server against a raw client of versions [minv, maxv]: refused. */
/* A raw TLS 1.2 client connects to c twice, offering the first
 * connection's session the second time: the second resumed or not as
 * want_reused says, on both sides; cipher (unless NULL) agreed. */
static void tls12_twice(aco_rt_tls_ctx_t* c, int want_reused, const char* cipher) {
    int sv[2], sv2[2];
    char buf[64];
    static raw_t r;
    sp(sv);
    sp(sv2);
    memset(&r, 0, sizeof(r));
    r.kind = RAW_RESUME;
    r.fd = sv[0];
    r.fd2 = sv2[0];
    r.maxv = TLS1_2_VERSION;
    aco_rt_tls_t* t = aco_rt_tls_new(c, sv[1], NULL);
    aco_rt_tls_t* t2 = aco_rt_tls_new(c, sv2[1], NULL);
    CHECK(t != NULL && t2 != NULL);
    raw_start(&r);
    T_EQ(aco_rt_tls_handshake(t, D()), 0);
    T_STR(aco_rt_tls_version(t), "TLSv1.2");
    if (cipher) T_STR(aco_rt_tls_cipher(t), cipher);
    T_EQ(aco_rt_tls_resumed(t), 0);
    T_EQ(read_n(t, buf, 1), 1);
    T_EQ(aco_rt_tls_read(t, buf, sizeof(buf), D()), 0);
    T_EQ(aco_rt_tls_handshake(t2, D()), 0);
    T_EQ(aco_rt_tls_resumed(t2) != 0, want_reused);
    T_EQ(read_n(t2, buf, 1), 1);
    T_EQ(aco_rt_tls_read(t2, buf, sizeof(buf), D()), 0);
    aco_rt_tls_free(t);
    aco_rt_tls_free(t2);
    raw_join(&r);
    T_EQ(r.rc, 1);
    if (cipher) T_STR(r.cipher, cipher);
    T_EQ(r.rc2, 1);
    T_EQ(r.reused2, want_reused);
    close(sv[0]);
    close(sv[1]);
    close(sv2[0]);
    close(sv2[1]);
}

/* An encrypted key is refused, not prompted for; an SNI host with an RSA
 * key beside an ECDSA default answers with its own certificate (the
 * default's of the other type gone); NO_TICKETS under TLS 1.2: no
 * resumption by session id either. */
static void g_more(void* arg) {
    (void)arg;
    BIO* b = BIO_new(BIO_s_mem());
    CHECK(b != NULL && PEM_write_bio_PrivateKey(b, leaf.k, EVP_aes_128_cbc(),
                                                (unsigned char*)"secret", 6, NULL, NULL) == 1);
    char* enc = bio_text(b);
    aco_rt_tls_opts_t o = {0};
    o.server = 1;
    o.cert_pem = leaf.cert;
    o.key_pem = enc;
    char err[256] = "";
    errno = 0;
    T(aco_rt_tls_ctx_new(&o, err, sizeof err) == NULL);
    T_EQ(errno, EPROTO);
    T_TEXT(err);
    free(enc);

    aco_rt_tls_ctx_t* s = server_ctx(&sni_default, NULL, 0, 0);
    aco_rt_tls_ctx_t* r = server_ctx(&sni_rsa, NULL, 0, 0);
    T_EQ(aco_rt_tls_ctx_add_host(s, "rsa.test", r), 0);
    aco_rt_tls_ctx_free(r);
    sni_case(__LINE__, s, g_cli, "rsa.test", 0, "rsa.test");
    sni_case(__LINE__, s, g_cli, "default.test", 0, "default.test");
    aco_rt_tls_ctx_free(s);

    char buf[64];
    memset(&o, 0, sizeof(o));
    o.server = 1;
    o.cert_pem = leaf.cert;
    o.key_pem = leaf.key;
    o.flags = ACO_RT_TLS_NO_TICKETS;
    aco_rt_tls_ctx_t* nt = ctx_or_die(&o);
    tls12_twice(nt, 0, NULL);
    aco_rt_tls_ctx_free(nt);

    /* pending: two records sent at once, one read takes the first; the
     * second waits inside t (read ahead) while the socket has nothing */
    link_t l;
    link_open(&l, g_srv, g_cli, "localhost", 0);
    if (link_up(&l)) {
        T_EQ(aco_rt_tls_write(l.c, "first", 5, D()), 5);
        T_EQ(aco_rt_tls_write(l.c, "second", 6, D()), 6);
        aco_rt_sleep(20 * MS);
        T_EQ(aco_rt_tls_read(l.s, buf, 5, D()), 5);
        T_NE(aco_rt_tls_pending(l.s), 0);
        T_EQ(pending(aco_rt_tls_fd(l.s)), 0);
        T_EQ(aco_rt_tls_read(l.s, buf, sizeof(buf), D()), 6);
        T(memcmp(buf, "second", 6) == 0);
        T_EQ(aco_rt_tls_pending(l.s), 0);
    }
    link_close(&l);
}

static void refused_client(int line, aco_rt_tls_ctx_t* sctx, int minv, int maxv, const char* ciphers) {
    int sv[2];
    sp(sv);
    static raw_t r;
    memset(&r, 0, sizeof(r));
    r.kind = RAW_CONNECT;
    r.fd = sv[0];
    r.minv = minv;
    r.maxv = maxv;
    r.ciphers = ciphers;
    aco_rt_tls_t* t = aco_rt_tls_new(sctx, sv[1], NULL);
    CHECK(t != NULL);
    raw_start(&r);
    int rs = aco_rt_tls_handshake(t, D());
    if (rs != -EPROTO)
        T_FAIL("line %d: version %#x client: server %d (%s), want -EPROTO", line, maxv, rs, aco_rt_tls_error(t));
    T_TEXT(aco_rt_tls_error(t));
    T_QUEUE_EMPTY();
    aco_rt_tls_free(t);
    close(sv[1]);
    raw_join(&r);
    if (r.rc == 1) T_FAIL("line %d: version %#x client: its handshake succeeded (%s)", line, maxv, r.version);
    close(sv[0]);
}

static void g_versions(void* arg) {
    (void)arg;
    static raw_t r;
    int sv[2], sv2[2];
    char buf[64];
    aco_rt_tls_t *t, *t2;

    aco_rt_tls_ctx_t* s13 = server_ctx(&leaf, NULL, 0, ACO_RT_TLS_1_3);
    refused_client(__LINE__, s13, 0, TLS1_2_VERSION, NULL);
    aco_rt_tls_ctx_free(s13);
    refused_client(__LINE__, g_srv, TLS1_VERSION, TLS1_VERSION, "DEFAULT@SECLEVEL=0");
    refused_client(__LINE__, g_srv, TLS1_1_VERSION, TLS1_1_VERSION, "DEFAULT@SECLEVEL=0");

    /* renegotiation refused */
    sp(sv);
    memset(&r, 0, sizeof(r));
    r.kind = RAW_RENEG;
    r.fd = sv[0];
    r.maxv = TLS1_2_VERSION;
    t = aco_rt_tls_new(g_srv, sv[1], NULL);
    CHECK(t != NULL);
    raw_start(&r);
    T_EQ(aco_rt_tls_handshake(t, D()), 0);
    T_STR(aco_rt_tls_version(t), "TLSv1.2");
    T_EQ(read_n(t, buf, 4), 4);
    T(memcmp(buf, "ping", 4) == 0);
    ssize_t rr = aco_rt_tls_read(t, buf, sizeof(buf), D());
    T_EQ(rr, -EPROTO);
    T_TEXT(aco_rt_tls_error(t));
    T_QUEUE_EMPTY();
    aco_rt_tls_free(t);
    close(sv[1]);
    raw_join(&r);
    T_EQ(r.rc, 1);
    T_NE(r.rc2, 1);
    close(sv[0]);

    /* TLS 1.2 as a server: a cipher list, a ticket resumed */
    aco_rt_tls_opts_t o = {0};
    o.server = 1;
    o.cert_pem = leaf.cert;
    o.key_pem = leaf.key;
    o.ciphers = "ECDHE-ECDSA-CHACHA20-POLY1305";
    aco_rt_tls_ctx_t* s12 = ctx_or_die(&o);
    tls12_twice(s12, 1, "ECDHE-ECDSA-CHACHA20-POLY1305");
    aco_rt_tls_ctx_free(s12);

    /* TLS 1.2 as a client: version, a session, resumed */
    sp(sv);
    sp(sv2);
    memset(&r, 0, sizeof(r));
    r.kind = RAW_SERVER;
    r.fd = sv[0];
    r.fd2 = sv2[0];
    r.maxv = TLS1_2_VERSION;
    raw_start(&r);
    t = aco_rt_tls_new(g_cli, sv[1], "localhost");
    CHECK(t != NULL);
    T_EQ(aco_rt_tls_handshake(t, D()), 0);
    T_STR(aco_rt_tls_version(t), "TLSv1.2");
    T_TEXT(aco_rt_tls_cipher(t));
    T_EQ(aco_rt_tls_write(t, "hi", 2, D()), 2);
    T_EQ(read_n(t, buf, 2), 2);
    T_EQ(aco_rt_tls_read(t, buf, sizeof(buf), D()), 0);
    aco_rt_tls_session_t* sess = aco_rt_tls_session(t);
    T(sess != NULL);
    t2 = aco_rt_tls_new(g_cli, sv2[1], "localhost");
    CHECK(t2 != NULL);
    if (sess) T_EQ(aco_rt_tls_set_session(t2, sess), 0);
    aco_rt_tls_session_free(sess);
    T_EQ(aco_rt_tls_handshake(t2, D()), 0);
    T_NE(aco_rt_tls_resumed(t2), 0);
    T_EQ(aco_rt_tls_write(t2, "ho", 2, D()), 2);
    T_EQ(read_n(t2, buf, 2), 2);
    T_EQ(aco_rt_tls_read(t2, buf, sizeof(buf), D()), 0);
    aco_rt_tls_free(t);
    aco_rt_tls_free(t2);
    raw_join(&r);
    T_EQ(r.rc, 1);
    T_EQ(r.rc2, 1);
    T_EQ(r.reused2, 1);
    close(sv[0]);
    close(sv[1]);
    close(sv2[0]);
    close(sv2[1]);

    /* min_version 1.3 as a client against a TLS 1.2 server */
    sp(sv);
    memset(&r, 0, sizeof(r));
    r.kind = RAW_SERVER;
    r.fd = sv[0];
    r.fd2 = -1;
    r.maxv = TLS1_2_VERSION;
    raw_start(&r);
    aco_rt_tls_ctx_t* c13 = client_ctx(NULL, NULL, 0, ACO_RT_TLS_1_3);
    t = aco_rt_tls_new(c13, sv[1], "localhost");
    CHECK(t != NULL);
    T_EQ(aco_rt_tls_handshake(t, D()), -EPROTO);
    T_TEXT(aco_rt_tls_error(t));
    aco_rt_tls_free(t);
    close(sv[1]);
    raw_join(&r);
    T_NE(r.rc, 1);
    close(sv[0]);
    aco_rt_tls_ctx_free(c13);
}

/* ---- deadlines, cancel --------------------------------------------------------- */

typedef struct {
    int fd;
    int stop;
    size_t sent;
} trickle_t;

static void co_trickle(void* a) {
    trickle_t* k = a;
    while (!k->stop && k->sent < g_hello_len) {
        if (aco_rt_send(k->fd, g_hello + k->sent, 1, MSG_NOSIGNAL, -1) != 1) break;
        k->sent++;
        aco_rt_sleep(10 * MS);
    }
}

typedef struct {
    aco_rt_tls_t* t;
    ssize_t rc;
    int64_t at;
} rd_job_t;

static void co_read_forever(void* a) {
    rd_job_t* j = a;
    char buf[64];
    j->rc = aco_rt_tls_read(j->t, buf, sizeof(buf), -1);
    j->at = aco_rt_now();
}

/* A co cancelled before its first call on a fresh connection. */
typedef struct {
    aco_rt_tls_t* t;
    int rc;
    char text[128];
} precancel_t;

static void co_precancelled(void* a) {
    precancel_t* p = a;
    CHECK_EQ(aco_rt_cancel(aco_rt_self()), 0);
    p->rc = aco_rt_tls_handshake(p->t, D());
    snprintf(p->text, sizeof(p->text), "%s", aco_rt_tls_error(p->t));
}

/* A cancelled co says goodbye under the shield (aco_rt.h: a kept cancel
 * "neither fails nor ends any call"), then the calls fail again. */
static void co_shielded_bye(void* a) {
    aco_rt_tls_t* t = a;
    CHECK_EQ(aco_rt_cancel(aco_rt_self()), 0);
    T_EQ(aco_rt_tls_write(t, "x", 1, D()), -ECANCELED);
    T_EQ(aco_rt_cancel_shield(1), 0);
    T_EQ(aco_rt_tls_write(t, "bye", 3, D()), 3);
    T_EQ(aco_rt_tls_shutdown(t, D()), 0);
    T_EQ(aco_rt_cancel_shield(0), 1);
    T_EQ(aco_rt_tls_write(t, "x", 1, D()), -ECANCELED);
}

static void g_deadlines(void* arg) {
    (void)arg;
    link_t l;
    char buf[64];
    int64_t dl, t0;
    int r;

    /* the client against a silent server; then the server talks */
    link_open(&l, g_srv, g_cli, "localhost", 0);
    dl = aco_rt_in_ms(150);
    r = aco_rt_tls_handshake(l.c, dl);
    T_EQ(r, -ETIMEDOUT);
    T_GE(aco_rt_now(), dl);
    T_LT(aco_rt_now() - dl, LATE);
    T_TEXT(aco_rt_tls_error(l.c));
    if (link_up(&l)) pass(l.c, l.s, "late");
    link_close(&l);

    /* the server against a silent client; then the client talks */
    link_open(&l, g_srv, g_cli, "localhost", 0);
    dl = aco_rt_in_ms(150);
    r = aco_rt_tls_handshake(l.s, dl);
    T_EQ(r, -ETIMEDOUT);
    T_GE(aco_rt_now(), dl);
    T_LT(aco_rt_now() - dl, LATE);
    if (link_up(&l)) pass(l.s, l.c, "late too");
    link_close(&l);

    /* a client trickling its hello a byte at a time is ended at the
     * server's deadline */
    link_open(&l, g_srv, NULL, NULL, 0);
    trickle_t k = {l.cfd, 0, 0};
    aco_rt_co_t* co = go(co_trickle, &k);
    dl = aco_rt_in_ms(300);
    r = aco_rt_tls_handshake(l.s, dl);
    T_EQ(r, -ETIMEDOUT);
    T_GE(aco_rt_now(), dl);
    T_LT(aco_rt_now() - dl, LATE);
    T_GT(k.sent, 5);
    T_LT(k.sent, g_hello_len);
    k.stop = 1;
    join(co);
    link_close(&l);

    /* garbage for a hello */
    link_open(&l, g_srv, NULL, NULL, 0);
    const char junk[] = "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n";
    CHECK_EQ(send(l.cfd, junk, sizeof(junk) - 1, MSG_NOSIGNAL), (ssize_t)sizeof(junk) - 1);
    T_EQ(aco_rt_tls_handshake(l.s, D()), -EPROTO);
    T_TEXT(aco_rt_tls_error(l.s));
    T_QUEUE_EMPTY();
    link_close(&l);

    /* cancel in the handshake; another co goes on with it */
    link_open(&l, g_srv, g_cli, "localhost", 0);
    cancel_job_t cj = {{l.c, -1, 0, 0}, 0, ""};
    co = go(co_hs_cancelled, &cj);
    aco_rt_sleep(50 * MS);
    t0 = aco_rt_now();
    CHECK_EQ(aco_rt_cancel(co), 0);
    join(co);
    T_EQ(cj.j.rc, -ECANCELED);
    T_LT(cj.j.at - t0, PROMPT);
    T_EQ(cj.again, -ECANCELED);
    T_TEXT(cj.text);
    if (link_up(&l)) {
        /* cancel in a read; then the bytes come to the next read */
        rd_job_t rj = {l.s, 0, 0};
        co = go(co_read_forever, &rj);
        aco_rt_sleep(50 * MS);
        t0 = aco_rt_now();
        CHECK_EQ(aco_rt_cancel(co), 0);
        join(co);
        T_EQ(rj.rc, -ECANCELED);
        T_LT(rj.at - t0, PROMPT);
        pass(l.c, l.s, "after the cancel");
        /* a read's deadline; the bytes come to the next read */
        dl = aco_rt_in_ms(100);
        T_EQ(aco_rt_tls_read(l.s, buf, sizeof(buf), dl), -ETIMEDOUT);
        T_GE(aco_rt_now(), dl);
        T_LT(aco_rt_now() - dl, LATE);
        T_TEXT(aco_rt_tls_error(l.s));
        pass(l.c, l.s, "after the deadline");
        /* a deadline passed: no wait, but what is there is read */
        t0 = aco_rt_now();
        T_EQ(aco_rt_tls_read(l.s, buf, sizeof(buf), 0), -ETIMEDOUT);
        T_EQ(aco_rt_tls_read(l.s, buf, sizeof(buf), aco_rt_now() - 1000), -ETIMEDOUT);
        T_LT(aco_rt_now() - t0, PROMPT);
        T_EQ(aco_rt_tls_write(l.c, "now", 3, D()), 3);
        aco_rt_sleep(20 * MS);
        T_EQ(aco_rt_tls_read(l.s, buf, sizeof(buf), 0), 3);
        /* aco_rt_close under a read: -EBADF */
        rj.rc = 0;
        co = go(co_read_forever, &rj);
        aco_rt_sleep(30 * MS);
        T_EQ(aco_rt_close(l.sfd), 0);
        l.sfd = -1;
        join(co);
        T_EQ(rj.rc, -EBADF);
    }
    link_close(&l);

    /* a cancelled co's call on a fresh connection: -ECANCELED, its text;
     * the connection goes on in another co */
    link_open(&l, g_srv, g_cli, "localhost", 0);
    precancel_t pc = {l.c, 0, ""};
    co = go(co_precancelled, &pc);
    join(co);
    T_EQ(pc.rc, -ECANCELED);
    T_TEXT(pc.text);
    if (link_up(&l)) pass(l.c, l.s, "not cancelled");
    link_close(&l);

    link_open(&l, g_srv, g_cli, "localhost", 0);
    if (link_up(&l)) {
        join(go(co_shielded_bye, l.c));
        T_EQ(read_n(l.s, buf, 3), 3);
        T_EQ(memcmp(buf, "bye", 3), 0);
        T_EQ(aco_rt_tls_read(l.s, buf, sizeof(buf), D()), 0);     /* close_notify */
    }
    link_close(&l);

    /* half a record, then the deadline: nothing lost */
    link_open(&l, g_srv, g_cli, "localhost", 1);
    if (link_up(&l)) {
        pass(l.c, l.s, "whole");
        l.c2s->pause_ns = 300 * MS;
        l.c2s->pause_at = l.c2s->fwd + 10;
        T_EQ(aco_rt_tls_write(l.c, "hello world", 11, D()), 11);
        dl = aco_rt_in_ms(100);
        T_EQ(aco_rt_tls_read(l.s, buf, sizeof(buf), dl), -ETIMEDOUT);
        T_GE(aco_rt_now(), dl);
        T_EQ(read_n(l.s, buf, 11), 11);
        T(memcmp(buf, "hello world", 11) == 0);
    }
    link_close(&l);
}

/* ---- reads ----------------------------------------------------------------------- */

static void g_reads(void* arg) {
    (void)arg;
    link_t l;
    char buf[64];
    struct iovec iov = {(void*)"v", 1};

    /* the peer's close_notify: 0, again 0 */
    link_open(&l, g_srv, g_cli, "localhost", 0);
    if (link_up(&l)) {
        T_EQ(aco_rt_tls_write(l.c, "bye", 3, D()), 3);
        T_EQ(aco_rt_tls_shutdown(l.c, D()), 0);
        int64_t t0 = aco_rt_now();
        T_EQ(aco_rt_tls_shutdown(l.c, D()), 0);
        T_LT(aco_rt_now() - t0, PROMPT);
        T_EQ(read_n(l.s, buf, 3), 3);
        T(memcmp(buf, "bye", 3) == 0);
        T_EQ(aco_rt_tls_read(l.s, buf, sizeof(buf), D()), 0);
        T_EQ(aco_rt_tls_read(l.s, buf, sizeof(buf), D()), 0);
        T_STR(aco_rt_tls_error(l.s), "");
    }
    link_close(&l);

    /* our shutdown: writes -EPIPE, reads go on to the peer's close_notify */
    link_open(&l, g_srv, g_cli, "localhost", 0);
    if (link_up(&l)) {
        T_EQ(aco_rt_tls_shutdown(l.s, D()), 0);
        T_EQ(aco_rt_tls_write(l.s, "x", 1, D()), -EPIPE);
        T_EQ(aco_rt_tls_writev(l.s, &iov, 1, D()), -EPIPE);
        pass(l.c, l.s, "more");
        T_EQ(aco_rt_tls_read(l.c, buf, sizeof(buf), D()), 0);
        T_EQ(aco_rt_tls_shutdown(l.c, D()), 0);
        T_EQ(aco_rt_tls_read(l.s, buf, sizeof(buf), D()), 0);
    }
    link_close(&l);

    /* n == 0: 0, nothing consumed */
    link_open(&l, g_srv, g_cli, "localhost", 0);
    if (link_up(&l)) {
        T_EQ(aco_rt_tls_write(l.c, "abc", 3, D()), 3);
        aco_rt_sleep(10 * MS);
        T_EQ(aco_rt_tls_read(l.s, buf, 0, D()), 0);
        T_EQ(read_n(l.s, buf, 3), 3);
        T(memcmp(buf, "abc", 3) == 0);
        T_EQ(aco_rt_tls_write(l.c, "", 0, D()), 0);
    }
    link_close(&l);

    /* the peer closes its socket (bytes of ours unread there) */
    link_open(&l, g_srv, g_cli, "localhost", 0);
    if (link_up(&l)) {
        T_EQ(aco_rt_tls_write(l.c, "abc", 3, D()), 3);
        link_gone(&l, 1);
        T_EQ(read_n(l.s, buf, 3), 3);
        T_EQ(aco_rt_tls_read(l.s, buf, sizeof(buf), D()), -ECONNRESET);
        T_TEXT(aco_rt_tls_error(l.s));
        T_EQ(aco_rt_tls_read(l.s, buf, sizeof(buf), D()), -ECONNRESET);
    }
    link_close(&l);

    /* the peer ends its stream without close_notify */
    link_open(&l, g_srv, g_cli, "localhost", 0);
    if (link_up(&l)) {
        T_EQ(aco_rt_tls_write(l.c, "abc", 3, D()), 3);
        while (recv(l.cfd, buf, sizeof(buf), MSG_DONTWAIT) > 0) {}     /* (tickets) */
        shutdown(l.cfd, SHUT_WR);
        T_EQ(read_n(l.s, buf, 3), 3);
        T_EQ(aco_rt_tls_read(l.s, buf, sizeof(buf), D()), -ECONNRESET);
        CHECK(strstr(aco_rt_tls_error(l.s), "without close_notify") != NULL);
        T_EQ(aco_rt_tls_read(l.s, buf, sizeof(buf), D()), -ECONNRESET);
        /* and nothing went back to a peer that only closed (OpenSSL's
         * own answer is a decode_error alert: nginx sends none) */
        T_EQ(recv(l.cfd, buf, sizeof(buf), MSG_DONTWAIT), -1);
        T_EQ(errno, EAGAIN);
    }
    link_close(&l);

    /* a corrupt record, then the peer's socket closed: the peer broke
     * the protocol (-EPROTO), though the alert OpenSSL sends back about
     * it meets EPIPE */
    link_open(&l, g_srv, g_cli, "localhost", 0);
    if (link_up(&l)) {
        char rec[5 + 32] = "\x17\x03\x03\x00\x20";
        memset(rec + 5, 0x5a, 32);
        T_EQ(send(l.cfd, rec, sizeof(rec), MSG_NOSIGNAL), (ssize_t)sizeof(rec));
        close(l.cfd);
        l.cfd = -1;
        T_EQ(aco_rt_tls_read(l.s, buf, sizeof(buf), D()), -EPROTO);
        T_HAS(aco_rt_tls_error(l.s), "bad record mac");
        T_EQ(aco_rt_tls_read(l.s, buf, sizeof(buf), D()), -EPROTO);
        T_EQ(aco_rt_tls_write(l.s, "x", 1, D()), -EPROTO);
    }
    link_close(&l);

    /* ... in the middle of a record */
    link_open(&l, g_srv, g_cli, "localhost", 1);
    if (link_up(&l)) {
        pass(l.c, l.s, "whole");
        l.c2s->cut_at = l.c2s->fwd + 10;
        T_EQ(aco_rt_tls_write(l.c, "hello world", 11, D()), 11);
        T_EQ(aco_rt_tls_read(l.s, buf, sizeof(buf), D()), -ECONNRESET);
        T_TEXT(aco_rt_tls_error(l.s));
    }
    link_close(&l);
}

/* ---- writes ---------------------------------------------------------------------- */

#define MIB (1024 * 1024)

static void g_writes(void* arg) {
    (void)arg;
    unsigned char* big = malloc(MIB);
    CHECK(big != NULL);
    for (size_t i = 0; i < MIB; i++) big[i] = pat(i);
    link_t l;
    bulk_t b;
    aco_rt_co_t* co;
    char small[64];

    link_open(&l, g_srv, g_cli, "localhost", 1);
    if (link_up(&l)) {
        pass(l.c, l.s, "warm");
        /* 1 MiB in one write, read in chunks */
        relay_count(l.c2s);
        memset(&b, 0, sizeof(b));
        b.t = l.s;
        b.want = MIB;
        b.expect = big;
        co = go(co_bulk_read, &b);
        T_EQ(aco_rt_tls_write(l.c, big, MIB, D()), MIB);
        join(co);
        bulk_check(&b);
        T_GE(l.c2s->nrec, 64);
        T_LE(l.c2s->maxrec, 16384 + 256);
        /* 16384 bytes: one record; 16385: two */
        size_t sizes[] = {16384, 16385};
        for (int i = 0; i < 2; i++) {
            relay_count(l.c2s);
            memset(&b, 0, sizeof(b));
            b.t = l.s;
            b.want = sizes[i];
            b.expect = big;
            co = go(co_bulk_read, &b);
            T_EQ(aco_rt_tls_write(l.c, big, sizes[i], D()), (ssize_t)sizes[i]);
            join(co);
            bulk_check(&b);
            T_EQ(l.c2s->nrec, i + 1);
            T_LE(l.c2s->maxrec, 16384 + 256);
        }
        /* writev: many small pieces, one record */
        struct iovec* iov = calloc(IOV_MAX + 1, sizeof(*iov));
        CHECK(iov != NULL);
        for (int i = 0; i < 200; i++) iov[i] = (struct iovec){big + i * 10, 10};
        relay_count(l.c2s);
        memset(&b, 0, sizeof(b));
        b.t = l.s;
        b.want = 2000;
        b.expect = big;
        co = go(co_bulk_read, &b);
        T_EQ(aco_rt_tls_writev(l.c, iov, 200, D()), 2000);
        join(co);
        bulk_check(&b);
        T_EQ(l.c2s->nrec, 1);
        for (int i = 0; i < IOV_MAX; i++) iov[i] = (struct iovec){big + i, 1};
        relay_count(l.c2s);
        memset(&b, 0, sizeof(b));
        b.t = l.s;
        b.want = IOV_MAX;
        b.expect = big;
        co = go(co_bulk_read, &b);
        T_EQ(aco_rt_tls_writev(l.c, iov, IOV_MAX, D()), IOV_MAX);
        join(co);
        bulk_check(&b);
        T_EQ(l.c2s->nrec, 1);
        /* a large piece among small ones */
        iov[0] = (struct iovec){big, 5};
        iov[1] = (struct iovec){big + 5, 100000};
        iov[2] = (struct iovec){big + 100005, 7};
        relay_count(l.c2s);
        memset(&b, 0, sizeof(b));
        b.t = l.s;
        b.want = 100012;
        b.expect = big;
        co = go(co_bulk_read, &b);
        T_EQ(aco_rt_tls_writev(l.c, iov, 3, D()), 100012);
        join(co);
        bulk_check(&b);
        T_LE(l.c2s->maxrec, 16384 + 256);
        /* writev's -EINVAL, and the connection goes on */
        T_EQ(aco_rt_tls_writev(l.c, iov, -1, D()), -EINVAL);
        T_EQ(aco_rt_tls_writev(l.c, iov, IOV_MAX + 1, D()), -EINVAL);
        T_EQ(aco_rt_tls_writev(l.c, iov, 0, D()), 0);
        pass(l.c, l.s, "still fine");
        free(iov);
    }
    link_close(&l);

    /* -EPIPE to a peer gone (no SIGPIPE), then done for */
    link_open(&l, g_srv_still, g_cli, "localhost", 0);
    if (link_up(&l)) {
        link_gone(&l, 0);
        T_EQ(aco_rt_tls_write(l.c, "x", 1, D()), -EPIPE);
        T_TEXT(aco_rt_tls_error(l.c));
        /* the writing side is done for; reads go on, and meet the peer's
         * end without close_notify */
        T_EQ(aco_rt_tls_write(l.c, "x", 1, D()), -EPIPE);
        T_EQ(aco_rt_tls_shutdown(l.c, D()), -EPIPE);
        T_EQ(aco_rt_tls_read(l.c, small, sizeof(small), D()), -ECONNRESET);
    }
    link_close(&l);

    /* a write that times out with the peer not reading: the count includes
     * the record the connection keeps half sent; going on from the count
     * (a write of 1 byte, then the rest) delivers every byte in order */
    link_open(&l, g_srv_still, g_cli, "localhost", 0);
    if (link_up(&l)) {
        int64_t dl = aco_rt_in_ms(150);
        ssize_t w = aco_rt_tls_write(l.c, big, MIB, dl);
        T_GE(aco_rt_now(), dl);
        T_LT(aco_rt_now() - dl, LATE);
        T(w > 0 && w < MIB);
        size_t off = w > 0 ? (size_t)w : 0;
        memset(&b, 0, sizeof(b));
        b.t = l.s;
        b.want = MIB;
        b.expect = big;
        co = go(co_bulk_read, &b);
        T_EQ(aco_rt_tls_write(l.c, big + off, 1, D()), 1);
        T_EQ(aco_rt_tls_write(l.c, big + off + 1, MIB - off - 1, D()), (ssize_t)(MIB - off - 1));
        join(co);
        bulk_check(&b);
    }
    link_close(&l);

    /* a writev of pieces that times out: nothing of the later pieces goes
     * before the kept record; going on from the count delivers all */
    link_open(&l, g_srv_still, g_cli, "localhost", 0);
    if (link_up(&l)) {
        /* pieces of one record each: the cut falls at a piece's end */
        struct iovec v[64];
        for (int i = 0; i < 64; i++) v[i] = (struct iovec){big + (size_t)i * 16384, 16384};
        ssize_t w = aco_rt_tls_writev(l.c, v, 64, aco_rt_in_ms(100));
        T(w > 0 && w < MIB);
        size_t off = w > 0 ? (size_t)w : 0;
        memset(&b, 0, sizeof(b));
        b.t = l.s;
        b.want = MIB;
        b.expect = big;
        co = go(co_bulk_read, &b);
        T_EQ(aco_rt_tls_write(l.c, big + off, MIB - off, D()), (ssize_t)(MIB - off));
        join(co);
        bulk_check(&b);
    }
    link_close(&l);

    /* a write that times out, then shutdown: the kept record, then
     * close_notify (the peer reads every counted byte, then 0) */
    link_open(&l, g_srv_still, g_cli, "localhost", 0);
    if (link_up(&l)) {
        ssize_t w = aco_rt_tls_write(l.c, big, MIB, aco_rt_in_ms(100));
        T(w > 0 && w < MIB);
        memset(&b, 0, sizeof(b));
        b.t = l.s;
        b.want = w > 0 ? (size_t)w : 0;
        b.expect = big;
        co = go(co_bulk_read, &b);
        T_EQ(aco_rt_tls_shutdown(l.c, D()), 0);
        join(co);
        bulk_check(&b);
        T_EQ(aco_rt_tls_read(l.s, small, sizeof(small), D()), 0);
        T_EQ(aco_rt_tls_write(l.c, "x", 1, D()), -EPIPE);
    }
    link_close(&l);

    /* close_notify stuck behind a full socket: shutdown's -ETIMEDOUT */
    link_open(&l, g_srv_still, g_cli, "localhost", 0);
    if (link_up(&l)) {
        ssize_t w = aco_rt_tls_write(l.c, big, MIB, aco_rt_in_ms(100));
        T(w == -ETIMEDOUT || (w > 0 && w < MIB));
        int64_t dl = aco_rt_in_ms(100);
        T_EQ(aco_rt_tls_shutdown(l.c, dl), -ETIMEDOUT);
        T_GE(aco_rt_now(), dl);
        T_LT(aco_rt_now() - dl, LATE);
    }
    link_close(&l);
    free(big);
}

/* ---- errors: done for, per connection, the error queue ---------------------------- */

typedef struct {
    link_t l;
    int which;                  /* 0: expired certificate, 1: garbage */
    int rc;
    int* failed;                /* both count here */
    char text[256];
    int64_t t_start, t_end;
} fail_job_t;

/* Another co: the thread's OpenSSL error queue is empty whenever it runs. */
typedef struct {
    int* failed;
    int looks, dirty;
} watch_t;

static void co_watch_queue(void* a) {
    watch_t* w = a;
    for (int i = 0; i < 5000 && *w->failed < 2; i++) {
        if (ERR_peek_error() != 0) {
            w->dirty++;
            ERR_clear_error();
        }
        w->looks++;
        aco_rt_yield();
    }
}

static void co_fail(void* a) {
    fail_job_t* f = a;
    f->t_start = aco_rt_now();
    if (f->which == 0) {
        /* a client against an expired certificate */
        hs_job_t* j = calloc(1, sizeof(*j));
        CHECK(j != NULL);
        j->t = f->l.s;
        j->deadline = D();
        aco_rt_co_t* co = go(co_hs, j);
        f->rc = aco_rt_tls_handshake(f->l.c, D());
        join(co);
        free(j);
    } else {
        /* a server that gets garbage, a piece at a time */
        aco_rt_sleep(5 * MS);
        CHECK_EQ(send(f->l.cfd, "\x16\x03\x01\x00", 4, MSG_NOSIGNAL), 4);
        aco_rt_sleep(5 * MS);
        CHECK_EQ(send(f->l.cfd, "\x05\xff\xff\xff\xff\xff\xff\xff", 8, MSG_NOSIGNAL), 8);
        f->rc = aco_rt_tls_handshake(f->l.s, D());
    }
    f->t_end = aco_rt_now();
    T_QUEUE_EMPTY();
    (*f->failed)++;
    for (int i = 0; i < 5000 && *f->failed < 2; i++) aco_rt_sleep(MS);
    aco_rt_tls_t* t = f->which == 0 ? f->l.c : f->l.s;
    snprintf(f->text, sizeof(f->text), "%s", aco_rt_tls_error(t));
}

static void g_errors(void* arg) {
    (void)arg;
    link_t l;
    char buf[16];
    struct iovec iov = {buf, 1};

    /* done for: every call returns the same error at once */
    link_open(&l, g_srv_expired, g_cli, "localhost", 0);
    int rs, rc;
    link_hs(&l, &rs, &rc);
    T_EQ(rc, -EKEYREJECTED);
    int64_t t0 = aco_rt_now();
    T_EQ(aco_rt_tls_handshake(l.c, D()), -EKEYREJECTED);
    T_EQ(aco_rt_tls_read(l.c, buf, sizeof(buf), D()), -EKEYREJECTED);
    T_EQ(aco_rt_tls_write(l.c, "x", 1, D()), -EKEYREJECTED);
    T_EQ(aco_rt_tls_writev(l.c, &iov, 1, D()), -EKEYREJECTED);
    T_EQ(aco_rt_tls_shutdown(l.c, D()), -EKEYREJECTED);
    T_LT(aco_rt_now() - t0, PROMPT);
    T_HAS(aco_rt_tls_error(l.c), "expired");
    T_EQ(aco_rt_tls_verify_result(l.c), X509_V_ERR_CERT_HAS_EXPIRED);
    T_EQ(rs, -EPROTO);
    t0 = aco_rt_now();
    T_EQ(aco_rt_tls_read(l.s, buf, sizeof(buf), D()), rs);
    T_EQ(aco_rt_tls_write(l.s, "x", 1, D()), rs);
    T_LT(aco_rt_now() - t0, PROMPT);
    link_close(&l);

    /* two connections failing at once in two cos, each its own reason */
    static int failed;
    failed = 0;
    fail_job_t* f0 = calloc(1, sizeof(*f0));
    fail_job_t* f1 = calloc(1, sizeof(*f1));
    CHECK(f0 != NULL && f1 != NULL);
    link_open(&f0->l, g_srv_expired, g_cli, "localhost", 0);
    link_open(&f1->l, g_srv, NULL, NULL, 0);
    f0->which = 0;
    f1->which = 1;
    f0->failed = f1->failed = &failed;
    static watch_t w;
    memset(&w, 0, sizeof(w));
    w.failed = &failed;
    aco_rt_co_t* cw = go(co_watch_queue, &w);
    aco_rt_co_t* c0 = go(co_fail, f0);
    aco_rt_co_t* c1 = go(co_fail, f1);
    join(c0);
    join(c1);
    join(cw);
    T_QUEUE_EMPTY();
    T_GT(w.looks, 2);
    T_EQ(w.dirty, 0);
    /* both were under way at once */
    T_LT(f0->t_start, f1->t_end);
    T_LT(f1->t_start, f0->t_end);
    T_EQ(f0->rc, -EKEYREJECTED);
    T_EQ(f1->rc, -EPROTO);
    T_HAS(f0->text, "expired");
    T_TEXT(f1->text);
    T_LACKS(f1->text, "expired");
    T(strcmp(f0->text, f1->text) != 0);
    T_HAS(aco_rt_tls_error(f0->l.c), "expired");
    T_EQ(aco_rt_tls_verify_result(f0->l.c), X509_V_ERR_CERT_HAS_EXPIRED);
    T_EQ(aco_rt_tls_verify_result(f1->l.s), 0);
    link_close(&f0->l);
    link_close(&f1->l);
    free(f0);
    free(f1);

    /* a connection that never failed says "" meanwhile */
    link_open(&l, g_srv, g_cli, "localhost", 0);
    if (link_up(&l)) {
        T_STR(aco_rt_tls_error(l.c), "");
        T_STR(aco_rt_tls_error(l.s), "");
    }
    link_close(&l);
}

/* ---- out of memory -------------------------------------------------------------- */

/* OpenSSL allocates through these (main sets them before anything of
 * OpenSSL's runs): every allocation of the co g_starve fails. */
static aco_rt_co_t* g_starve;
static int starved(void) { return g_starve != NULL && aco_rt_self() == g_starve; }
static void* t_malloc(size_t n, const char* f, int l) {
    (void)f, (void)l;
    return starved() ? NULL : malloc(n);
}
static void* t_realloc(void* p, size_t n, const char* f, int l) {
    (void)f, (void)l;
    return starved() ? NULL : realloc(p, n);
}
static void t_free(void* p, const char* f, int l) {
    (void)f, (void)l;
    free(p);
}

/* A handshake that OpenSSL cannot allocate for is -ENOMEM, not the
 * "internal error" (-EPROTO) that OpenSSL 3.0 ends the queue with (the
 * malloc failure deeper in it), nor a verification failure; then done
 * for; the queue left empty. */
static void g_oom(void* arg) {
    (void)arg;
    link_t l;
    char buf[16];
    for (int server = 0; server < 2; server++) {
        link_open(&l, g_srv, g_cli, "localhost", 0);
        aco_rt_tls_t* t = server ? l.s : l.c;
        hs_job_t j = {server ? l.c : l.s, D(), 0, 0};
        aco_rt_co_t* co = go(co_hs, &j);
        g_starve = aco_rt_self();
        int r = aco_rt_tls_handshake(t, D());
        g_starve = NULL;
        /* (the other end fails as it may: an alert, or the end) */
        shutdown(server ? l.sfd : l.cfd, SHUT_RDWR);
        join(co);
        T_EQ(r, -ENOMEM);
        T_HAS(aco_rt_tls_error(t), "memory");
        T_EQ(aco_rt_tls_read(t, buf, sizeof(buf), D()), -ENOMEM);
        T_QUEUE_EMPTY();
        link_close(&l);
    }
    /* a context */
    aco_rt_tls_opts_t o;
    memset(&o, 0, sizeof(o));
    o.server = 1;
    o.cert_pem = leaf.cert;
    o.key_pem = leaf.key;
    char err[256];
    g_starve = aco_rt_self();
    errno = 0;
    aco_rt_tls_ctx_t* c = aco_rt_tls_ctx_new(&o, err, sizeof(err));
    int e = errno;
    g_starve = NULL;
    T(c == NULL);
    T_EQ(e, ENOMEM);
    aco_rt_tls_ctx_free(c);
    T_QUEUE_EMPTY();
}

/* ---- bufio over TLS, bufio_new_io ----------------------------------------------- */

typedef struct {
    aco_rt_tls_t* t;
    int rc;
    const unsigned char* body;
    char reply[32];
    ssize_t reply_n;
} bsrv_t;

static void co_bufio_server(void* a) {
    bsrv_t* s = a;
    s->rc = aco_rt_tls_handshake(s->t, D());
    if (s->rc != 0) return;
    aco_rt_bufio_t* b = aco_rt_tls_bufio_new(s->t, 0, 0);
    CHECK(b != NULL);
    T_EQ(aco_rt_bufio_write(b, "alpha\n", 6, D()), 6);
    T_EQ(aco_rt_bufio_write(b, "beta\n", 5, D()), 5);
    T_EQ(aco_rt_bufio_write(b, s->body, 40000, D()), 40000);
    T_EQ(aco_rt_bufio_flush(b, D()), 0);
    T_EQ(aco_rt_bufio_unflushed(b), 0);
    const char* v;
    s->reply_n = aco_rt_bufio_read_until(b, '\n', 0, &v, D());
    if (s->reply_n > 0 && (size_t)s->reply_n < sizeof(s->reply)) memcpy(s->reply, v, (size_t)s->reply_n);
    aco_rt_bufio_free(b);
    T_EQ(aco_rt_tls_shutdown(s->t, D()), 0);
}

typedef struct {
    const char* in;
    size_t in_len, in_off;
    char out[256];
    size_t out_len;
    int reads, writevs;
} memio_t;

static ssize_t mem_read(void* ctx, void* buf, size_t n, int64_t deadline) {
    (void)deadline;
    memio_t* m = ctx;
    size_t k = m->in_len - m->in_off;
    if (k > 3) k = 3;
    if (k > n) k = n;
    memcpy(buf, m->in + m->in_off, k);
    m->in_off += k;
    m->reads++;
    return (ssize_t)k;
}

static ssize_t mem_writev(void* ctx, const struct iovec* iov, int iovcnt, int64_t deadline) {
    (void)deadline;
    memio_t* m = ctx;
    size_t took = 0;
    m->writevs++;
    for (int i = 0; i < iovcnt && took < 5; i++) {
        size_t k = iov[i].iov_len;
        if (k > 5 - took) k = 5 - took;
        if (m->out_len + k > sizeof(m->out)) return -ENOSPC;
        memcpy(m->out + m->out_len, iov[i].iov_base, k);
        m->out_len += k;
        took += k;
    }
    return (ssize_t)took;
}

static void g_bufio(void* arg) {
    (void)arg;
    unsigned char* body = malloc(MIB);
    CHECK(body != NULL);
    for (size_t i = 0; i < MIB; i++) body[i] = pat(i * 3);
    link_t l;
    const char* v;
    char* got = malloc(40000);
    CHECK(got != NULL);

    link_open(&l, g_srv, g_cli, "localhost", 0);
    bsrv_t s = {l.s, -1, body, "", 0};
    aco_rt_co_t* co = go(co_bufio_server, &s);
    aco_rt_bufio_t* b = aco_rt_tls_bufio_new(l.c, 0, 0);
    CHECK(b != NULL);
    T_EQ(aco_rt_bufio_fd(b), l.cfd);
    T_EQ(aco_rt_bufio_read_until(b, '\n', 0, &v, D()), 6);
    T(memcmp(v, "alpha\n", 6) == 0);
    T_EQ(aco_rt_bufio_read_until(b, '\n', 0, &v, D()), 5);
    T(memcmp(v, "beta\n", 5) == 0);
    T_EQ(aco_rt_bufio_read_full(b, got, 40000, D()), 40000);
    T(memcmp(got, body, 40000) == 0);
    T_EQ(aco_rt_bufio_write(b, "reply\n", 6, D()), 6);
    T_EQ(aco_rt_bufio_unflushed(b), 6);
    T_EQ(aco_rt_bufio_flush(b, D()), 0);
    T_EQ(aco_rt_bufio_unflushed(b), 0);
    T_EQ(aco_rt_bufio_read(b, got, 100, D()), 0);   /* the server's close_notify */
    T_EQ(aco_rt_bufio_read_until(b, '\n', 0, &v, D()), 0);
    join(co);
    T_EQ(s.rc, 0);
    T_EQ(s.reply_n, 6);
    T(memcmp(s.reply, "reply\n", 6) == 0);
    aco_rt_bufio_free(b);
    link_close(&l);

    /* a stream ended without close_notify: the bufio says -ECONNRESET */
    link_open(&l, g_srv, g_cli, "localhost", 0);
    if (link_up(&l)) {
        b = aco_rt_tls_bufio_new(l.c, 0, 0);
        CHECK(b != NULL);
        T_EQ(aco_rt_tls_write(l.s, "partial", 7, D()), 7);
        shutdown(l.sfd, SHUT_WR);
        T_EQ(aco_rt_bufio_read_full(b, got, 7, D()), 7);
        T_EQ(aco_rt_bufio_read(b, got, 100, D()), -ECONNRESET);
        aco_rt_bufio_free(b);
    }
    link_close(&l);

    /* a bufio write that times out (the peer not reading), then a flush and
     * the rest: every byte arrives, in order */
    link_open(&l, g_srv_still, g_cli, "localhost", 0);
    if (link_up(&l)) {
        b = aco_rt_tls_bufio_new(l.c, 0, 0);
        CHECK(b != NULL);
        int64_t dl = aco_rt_in_ms(150);
        ssize_t w = aco_rt_bufio_write(b, body, MIB, dl);
        T_GE(aco_rt_now(), dl);
        T(w == -ETIMEDOUT || (w > 0 && w < MIB));
        size_t off = w > 0 ? (size_t)w : 0;
        bulk_t bk;
        memset(&bk, 0, sizeof(bk));
        bk.t = l.s;
        bk.want = MIB;
        bk.expect = body;
        co = go(co_bulk_read, &bk);
        T_EQ(aco_rt_bufio_flush(b, D()), 0);
        T_EQ(aco_rt_bufio_write(b, body + off, MIB - off, D()), (ssize_t)(MIB - off));
        T_EQ(aco_rt_bufio_flush(b, D()), 0);
        join(co);
        bulk_check(&bk);
        aco_rt_bufio_free(b);
    }
    link_close(&l);

    /* aco_rt_bufio_new_io */
    static const aco_rt_bufio_io_t io = {mem_read, mem_writev};
    static const aco_rt_bufio_io_t no_read = {NULL, mem_writev};
    static const aco_rt_bufio_io_t no_writev = {mem_read, NULL};
    memio_t m;
    memset(&m, 0, sizeof(m));
    errno = 0;
    T(aco_rt_bufio_new_io(NULL, &m, -1, 0, 0) == NULL);
    T_EQ(errno, EINVAL);
    errno = 0;
    T(aco_rt_bufio_new_io(&no_read, &m, -1, 0, 0) == NULL);
    T_EQ(errno, EINVAL);
    errno = 0;
    T(aco_rt_bufio_new_io(&no_writev, &m, -1, 0, 0) == NULL);
    T_EQ(errno, EINVAL);
    errno = 0;
    T(aco_rt_bufio_new_io(&io, &m, -2, 0, 0) == NULL);
    T_EQ(errno, EINVAL);
    errno = 0;
    T(aco_rt_bufio_new_io(&io, &m, -1, (1u << 30) + 1, 0) == NULL);
    T_EQ(errno, EINVAL);
    errno = 0;
    T(aco_rt_bufio_new_io(&io, &m, -1, 0, (1u << 30) + 1) == NULL);
    T_EQ(errno, EINVAL);
    m.in = "one\ntwo\nthree";
    m.in_len = strlen(m.in);
    b = aco_rt_bufio_new_io(&io, &m, -1, 0, 0);
    CHECK(b != NULL);
    T_EQ(aco_rt_bufio_fd(b), -1);
    T_EQ(aco_rt_bufio_read_until(b, '\n', 0, &v, D()), 4);
    T(memcmp(v, "one\n", 4) == 0);
    T_EQ(aco_rt_bufio_read_until(b, '\n', 0, &v, D()), 4);
    T(memcmp(v, "two\n", 4) == 0);
    T_EQ(aco_rt_bufio_read_until(b, '\n', 0, &v, D()), 5);
    T(memcmp(v, "three", 5) == 0);
    T_EQ(aco_rt_bufio_read_until(b, '\n', 0, &v, D()), 0);
    T_EQ(aco_rt_bufio_write(b, "0123456789abcdefghij", 20, D()), 20);
    T_EQ(aco_rt_bufio_flush(b, D()), 0);
    T_EQ(m.out_len, 20);
    T(memcmp(m.out, "0123456789abcdefghij", 20) == 0);
    T_GE(m.writevs, 4);
    aco_rt_bufio_free(b);
    free(got);
    free(body);
}

/* ---- lifetimes ---------------------------------------------------------------- */

/* aco_rt_tls_wait: 0 as soon as a read need not wait (a record came,
 * bytes wait inside t, close_notify came, the socket ended), -ETIMEDOUT
 * not before the deadline, -ECANCELED, a connection done for's error.  In
 * test_tls_lend's pass, on io_uring, the reads went through lends (and on
 * epoll the flag changes nothing). */
typedef struct {
    aco_rt_tls_t* t;
    int64_t dl;
    int r;
} waiter_t;

static void co_wait(void* a) {
    waiter_t* w = a;
    w->r = aco_rt_tls_wait(w->t, w->dl);
}

static void g_wait(void* arg) {
    (void)arg;
    aco_rt_stats_t st0, st1;
    aco_rt_stats(aco_rt_sched_current(), &st0);
    char buf[64];
    link_t l;
    link_open(&l, g_srv, g_cli, "localhost", 0);
    if (link_up(&l)) {
        int64_t dl = aco_rt_in_ms(50);
        T_EQ(aco_rt_tls_wait(l.s, dl), -ETIMEDOUT);
        T_GE(aco_rt_now(), dl);
        T_LT(aco_rt_now() - dl, LATE);
        T_TEXT(aco_rt_tls_error(l.s));
        /* a waiter wakes when a record comes, and a read takes it without
         * waiting (a deadline long past) */
        waiter_t w = {l.s, D(), 1};
        aco_rt_co_t* co = go(co_wait, &w);
        aco_rt_sleep(20 * MS);
        T_EQ(w.r, 1);
        T_EQ(aco_rt_tls_write(l.c, "ping", 4, D()), 4);
        join(co);
        T_EQ(w.r, 0);
        T_STR(aco_rt_tls_error(l.s), "");
        T_EQ(aco_rt_tls_read(l.s, buf, sizeof(buf), 0), 4);
        T(memcmp(buf, "ping", 4) == 0);
        T_EQ(aco_rt_tls_pending(l.s), 0);
        /* bytes inside t: at once */
        T_EQ(aco_rt_tls_write(l.c, "abc", 3, D()), 3);
        T_EQ(aco_rt_tls_wait(l.s, D()), 0);
        T_EQ(aco_rt_tls_read(l.s, buf, 1, 0), 1);
        T(aco_rt_tls_pending(l.s));
        T_EQ(aco_rt_tls_wait(l.s, 0), 0);
        T_EQ(aco_rt_tls_read(l.s, buf + 1, sizeof(buf) - 1, 0), 2);
        T(memcmp(buf, "abc", 3) == 0);
        /* cancelled while it waits: -ECANCELED, and the connection goes on */
        w = (waiter_t){l.s, D(), 1};
        co = go(co_wait, &w);
        aco_rt_sleep(20 * MS);
        CHECK_EQ(aco_rt_cancel(co), 0);
        int64_t t0 = aco_rt_now();
        join(co);
        T_EQ(w.r, -ECANCELED);
        T_LT(aco_rt_now() - t0, PROMPT);
        pass(l.c, l.s, "after a cancelled wait");
        /* close_notify: 0 at once, and again after the read said 0 */
        T_EQ(aco_rt_tls_shutdown(l.c, D()), 0);
        T_EQ(aco_rt_tls_wait(l.s, D()), 0);
        T_EQ(aco_rt_tls_read(l.s, buf, sizeof(buf), D()), 0);
        t0 = aco_rt_now();
        T_EQ(aco_rt_tls_wait(l.s, D()), 0);
        T_LT(aco_rt_now() - t0, PROMPT);
    }
    link_close(&l);
    /* the peer's socket closed without close_notify: 0, the read says
     * -ECONNRESET, and a wait on the connection done for says it too */
    link_open(&l, g_srv, g_cli, "localhost", 0);
    if (link_up(&l)) {
        link_gone(&l, 1);
        T_EQ(aco_rt_tls_wait(l.s, D()), 0);
        T_EQ(aco_rt_tls_read(l.s, buf, sizeof(buf), D()), -ECONNRESET);
        T_EQ(aco_rt_tls_wait(l.s, D()), -ECONNRESET);
    }
    link_close(&l);
    /* part of a record inside t: the wait waits for more bytes instead of
     * saying 0 at once (a loop of waits and reads that do not wait would
     * spin); the record whole, the read has it */
    link_open(&l, g_srv, g_cli, "localhost", 1);
    if (link_up(&l)) {
        static char rec[1000], got_b[2048];
        memset(rec, 'r', sizeof rec);
        l.c2s->pause_ns = 150 * MS;
        l.c2s->pause_at = l.c2s->fwd + 100;
        T_EQ(aco_rt_tls_write(l.c, rec, sizeof rec, D()), (ssize_t)sizeof rec);
        int64_t t0 = aco_rt_now(), end = aco_rt_in_ms(SLOW ? 30000 : 8000);
        size_t got = 0;
        int turns = 0;
        while (got < sizeof rec && aco_rt_now() < end && turns < 1000) {
            turns++;
            int w = aco_rt_tls_wait(l.s, end);
            T_EQ(w, 0);
            if (w) break;
            ssize_t r = aco_rt_tls_read(l.s, got_b + got, sizeof got_b - got, 0);
            if (r > 0) got += (size_t)r;
            else T_EQ(r, -ETIMEDOUT);
        }
        T_EQ(got, sizeof rec);
        T(memcmp(got_b, rec, sizeof rec) == 0);
        T_GE(aco_rt_now() - t0, 140 * MS);
        T_LT(turns, 10);
    }
    link_close(&l);
    /* the same before the handshake: part of the ClientHello inside t,
     * the wait waits for the rest instead of saying 0 at once (a server
     * that waits, then handshakes without waiting, would spin) */
    link_open(&l, g_srv, g_cli, "localhost", 1);
    {
        l.c2s->pause_ns = 150 * MS;
        l.c2s->pause_at = 100;
        hs_job_t j = {l.c, D(), 0, 0};
        aco_rt_co_t* co = go(co_hs, &j);
        int64_t t0 = aco_rt_now(), end = aco_rt_in_ms(SLOW ? 30000 : 8000);
        int turns = 0, h = -ETIMEDOUT;
        while (h == -ETIMEDOUT && aco_rt_now() < end && turns < 1000) {
            turns++;
            int w = aco_rt_tls_wait(l.s, end);
            T_EQ(w, 0);
            if (w) break;
            h = aco_rt_tls_handshake(l.s, 0);
        }
        T_EQ(h, 0);
        join(co);
        T_EQ(j.rc, 0);
        T_GE(aco_rt_now() - t0, 140 * MS);
        T_LT(turns, 10);
    }
    link_close(&l);
    /* its own socket closed by aco_rt_close while it waits: -EBADF, and
     * the connection is done for */
    link_open(&l, g_srv, g_cli, "localhost", 0);
    if (link_up(&l)) {
        waiter_t w = {l.s, D(), 1};
        aco_rt_co_t* co = go(co_wait, &w);
        aco_rt_sleep(20 * MS);
        T_EQ(w.r, 1);
        T_EQ(aco_rt_close(l.sfd), 0);
        l.sfd = -1;
        join(co);
        T_EQ(w.r, -EBADF);
        T_EQ(aco_rt_tls_read(l.s, buf, sizeof(buf), D()), -EBADF);
    }
    link_close(&l);
    aco_rt_stats(aco_rt_sched_current(), &st1);
    if (g_lend && strcmp(aco_rt_backend_name(aco_rt_sched_current()), "uring") == 0)
        T(st1.lends > st0.lends);
    else
        T_EQ(st1.lends, st0.lends);
}

/* Over TCP (loopback, Nagle on): a write's records but the last go with
 * MSG_MORE, and the last pushes them: every size arrives whole, at once
 * after the write returned (nothing held back for TCP's 200 ms), and in
 * order; the server's writes too. */
static void tcp_pair(int* a, int* b) {
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK_GE(l, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    CHECK_EQ(bind(l, (struct sockaddr*)&sa, sizeof sa), 0);
    CHECK_EQ(getsockname(l, (struct sockaddr*)&sa, &sl), 0);
    CHECK_EQ(listen(l, 1), 0);
    *a = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK_GE(*a, 0);
    CHECK_EQ(connect(*a, (struct sockaddr*)&sa, sizeof sa), 0);
    *b = accept4(l, NULL, NULL, SOCK_CLOEXEC);
    CHECK_GE(*b, 0);
    CHECK_EQ(close(l), 0);
}

static void g_tcp(void* arg) {
    (void)arg;
    static const size_t sizes[] = {1, 100, 16384, 16385, 20000, 65536, 65537, 300000, MIB + 7};
    unsigned char* big = malloc(MIB + 7);
    CHECK(big != NULL);
    for (size_t i = 0; i < MIB + 7; i++) big[i] = pat(i);
    link_t l;
    memset(&l, 0, sizeof l);
    l.xc = l.xs = -1;
    tcp_pair(&l.cfd, &l.sfd);
    l.s = aco_rt_tls_new(g_srv, l.sfd, NULL);
    l.c = aco_rt_tls_new(g_cli, l.cfd, "localhost");
    CHECK(l.s && l.c);
    if (link_up(&l)) {
        for (int dir = 0; dir < 2; dir++) {
            aco_rt_tls_t* from = dir ? l.s : l.c;
            aco_rt_tls_t* to = dir ? l.c : l.s;
            for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
                bulk_t b;
                memset(&b, 0, sizeof b);
                b.t = to;
                b.want = sizes[k];
                b.expect = big;
                aco_rt_co_t* co = go(co_bulk_read, &b);
                T_EQ(aco_rt_tls_write(from, big, sizes[k], D()), (ssize_t)sizes[k]);
                int64_t t0 = aco_rt_now();
                join(co);
                bulk_check(&b);
                /* (the large ones' bytes in flight when the write returns
                 * take their own time to decrypt: only sizes that fit in
                 * flight are timed) */
                if (sizes[k] <= 65537) T_LT(aco_rt_now() - t0, PROMPT);
            }
        }
        /* a writev of pieces, each its own put, then the peer's reply */
        struct iovec v[3] = {{big, 100}, {big + 100, 40000}, {big + 40100, 5}};
        bulk_t b;
        memset(&b, 0, sizeof b);
        b.t = l.s;
        b.want = 40105;
        b.expect = big;
        aco_rt_co_t* co = go(co_bulk_read, &b);
        T_EQ(aco_rt_tls_writev(l.c, v, 3, D()), 40105);
        int64_t t0 = aco_rt_now();
        join(co);
        bulk_check(&b);
        T_LT(aco_rt_now() - t0, PROMPT);
        pass(l.s, l.c, "and back");
    }
    link_close(&l);
    free(big);
}

static void g_lifetimes(void* arg) {
    (void)arg;
    aco_rt_tls_ctx_t* s = server_ctx(&leaf, "h2", 0, 0);
    aco_rt_tls_ctx_t* c = client_ctx(&client1, "h2", 0, 0);
    link_t l;
    link_open(&l, s, c, "localhost", 0);
    aco_rt_tls_ctx_free(s);
    aco_rt_tls_ctx_free(c);
    if (link_up(&l)) {
        T_STR(aco_rt_tls_alpn(l.c), "h2");
        pass(l.c, l.s, "ctx gone");
        pass(l.s, l.c, "still fine");
        aco_rt_tls_session_t* sess = aco_rt_tls_session(l.c);
        aco_rt_tls_session_free(sess);
        T_EQ(aco_rt_tls_shutdown(l.s, D()), 0);
        T_EQ(aco_rt_tls_read(l.c, (char[8]){0}, 8, D()), 0);
    }
    link_close(&l);
}

/* ---- buffers on the stacks of cos sharing one share stack ---------------------- */

typedef struct {
    aco_rt_tls_t *c, *s;
    int done;
    int rounds;
} stk_t;

static void co_stk_server(void* a) {
    stk_t* k = a;
    char buf[20000];
    T_EQ(aco_rt_tls_handshake(k->s, D()), 0);
    for (;;) {
        ssize_t r = aco_rt_tls_read(k->s, buf, sizeof(buf), D());
        if (r <= 0) {
            T_EQ(r, 0);
            break;
        }
        T_EQ(aco_rt_tls_write(k->s, buf, (size_t)r, D()), r);
        memset(buf, 0x5a, sizeof(buf));
    }
    T_EQ(aco_rt_tls_shutdown(k->s, D()), 0);
}

static void co_stk_client(void* a) {
    stk_t* k = a;
    unsigned char out[20000], in[20000];
    T_EQ(aco_rt_tls_handshake(k->c, D()), 0);
    for (int round = 0; round < 8; round++) {
        for (size_t i = 0; i < sizeof(out); i++) out[i] = pat(i + (size_t)round * 977);
        T_EQ(aco_rt_tls_write(k->c, out, sizeof(out), D()), (ssize_t)sizeof(out));
        memset(in, 0, sizeof(in));
        T_EQ(read_n(k->c, in, sizeof(in)), (ssize_t)sizeof(in));
        T(memcmp(in, out, sizeof(in)) == 0);
        k->rounds++;
    }
    T_EQ(aco_rt_tls_shutdown(k->c, D()), 0);
    char last[16];
    T_EQ(aco_rt_tls_read(k->c, last, sizeof(last), D()), 0);
    k->done = 1;
}

static void co_stk_noise(void* a) {
    stk_t* k = a;
    volatile unsigned char junk[30000];
    for (int i = 0; !k->done && i < 20000; i++) {
        memset((void*)junk, i & 0xff, sizeof(junk));
        aco_rt_sleep(200000);
    }
}

static void body_stacks(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    int before = g_fail;
    int sv[2];
    sp(sv);
    stk_t* k = calloc(1, sizeof(*k));
    CHECK(k != NULL);
    k->c = aco_rt_tls_new(g_cli, sv[0], "localhost");
    k->s = aco_rt_tls_new(g_srv, sv[1], NULL);
    CHECK(k->c != NULL && k->s != NULL);
    CHECK(aco_rt_detach(aco_rt_spawn(s, co_stk_noise, k)) == 0);
    CHECK(aco_rt_detach(aco_rt_spawn(s, co_stk_server, k)) == 0);
    CHECK(aco_rt_detach(aco_rt_spawn(s, co_stk_noise, k)) == 0);
    CHECK(aco_rt_detach(aco_rt_spawn(s, co_stk_client, k)) == 0);
    test_run(s);
    T_EQ(k->rounds, 8);
    aco_rt_tls_free(k->c);
    aco_rt_tls_free(k->s);
    free(k);
    close(sv[0]);
    close(sv[1]);
    group_done("buffers on one share stack", before);
}

/* ======================================================================== */

static void run_group(aco_rt_sched_t* s, const char* name, aco_rt_fn_t fn) {
    int before = g_fail;
    aco_rt_spawn_opts_t o;
    memset(&o, 0, sizeof(o));
    o.standalone = 1;
    o.stack_size = 1024 * 1024;
    o.name = name;
    aco_rt_co_t* co = aco_rt_spawn2(s, fn, NULL, &o);
    CHECK(co != NULL);
    CHECK_EQ(aco_rt_detach(co), 0);
    test_run(s);
    T_QUEUE_EMPTY();
    group_done(name, before);
}

static void body(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    int before = g_fail;
    hooks_checks();
    ctx_new_checks();
    new_checks();
    eperm_outside();
    group_done("outside cos: hooks, ctx_new, tls_new, EPERM", before);
    run_group(s, "handshake after EPERM", g_eperm_then);
    run_group(s, "hooks in a co", g_hooks);
    run_group(s, "ctx_new in a co", g_ctx_new);
    run_group(s, "handshake, getters", g_basics);
    run_group(s, "ALPN", g_alpn);
    run_group(s, "SNI", g_sni);
    run_group(s, "SNI: the other options stay ctx's", g_sni_options);
    run_group(s, "resumption", g_resume);
    run_group(s, "resumption across threads", g_threads);
    run_group(s, "verification", g_verify);
    run_group(s, "client certificates", g_client_cert);
    run_group(s, "versions, renegotiation", g_versions);
    run_group(s, "keys, SNI key types, TLS 1.2 without tickets", g_more);
    run_group(s, "deadlines, cancel", g_deadlines);
    run_group(s, "reads", g_reads);
    run_group(s, "writes", g_writes);
    run_group(s, "errors", g_errors);
    run_group(s, "out of memory", g_oom);
    run_group(s, "bufio", g_bufio);
    run_group(s, "lifetimes", g_lifetimes);
    run_group(s, "aco_rt_tls_wait", g_wait);
    run_group(s, "over TCP: records gathered by MSG_MORE", g_tcp);
}

int main(void) {
    CHECK(CRYPTO_set_mem_functions(t_malloc, t_realloc, t_free) == 1);
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (!getenv("ACO_RT_TEST_WATCHDOG")) setenv("ACO_RT_TEST_WATCHDOG", "240", 1);

    make_cred(&ca1, "aco test CA", NULL, NULL, 1, -60, 3650, 0);
    make_cred(&ca2, "aco other CA", NULL, NULL, 1, -60, 3650, 0);
    make_cred(&leaf, "localhost", "DNS:localhost,IP:127.0.0.1", &ca1, 0, -1, 365, 0);
    make_cred(&expired, "localhost", "DNS:localhost,IP:127.0.0.1", &ca1, 0, -30, -1, 0);
    make_cred(&wrong, "wrong.example", "DNS:wrong.example", &ca1, 0, -1, 365, 0);
    make_cred(&untrusted, "localhost", "DNS:localhost,IP:127.0.0.1", &ca2, 0, -1, 365, 0);
    make_cred(&client1, "client one", NULL, &ca1, 0, -1, 365, 1);
    make_cred(&client2, "client two", NULL, &ca2, 0, -1, 365, 1);
    make_cred(&sni_default, "default.test",
              "DNS:default.test,DNS:a.b.example.com,DNS:example.com,DNS:other.test", &ca1, 0, -1, 365, 0);
    make_cred(&sni_exact, "exact.test", "DNS:exact.test", &ca1, 0, -1, 365, 0);
    make_cred(&sni_wild, "*.example.com", "DNS:*.example.com", &ca1, 0, -1, 365, 0);
    g_rsa = 1;
    make_cred(&sni_rsa, "rsa.test", "DNS:rsa.test", &ca1, 0, -1, 365, 0);
    g_rsa = 0;
    make_files();
    make_hello();
#ifdef TEST_TLS_LEND
    g_lend = ACO_RT_TLS_LEND;
#endif

    g_srv = server_ctx(&leaf, NULL, 0, 0);
    unsigned lend = g_lend;
    g_lend = 0;
    g_srv_still = server_ctx(&leaf, NULL, 0, 0);
    g_lend = lend;
    g_cli = client_ctx(NULL, NULL, 0, 0);
    g_cli_nv = client_ctx(NULL, NULL, ACO_RT_TLS_NO_VERIFY, 0);
    g_srv_expired = server_ctx(&expired, NULL, 0, 0);
    g_srv_wrong = server_ctx(&wrong, NULL, 0, 0);
    g_srv_untrusted = server_ctx(&untrusted, NULL, 0, 0);

    test_on_backends(NULL, body, NULL);
    aco_rt_opts_t one = {0};
    one.share_stacks = 1;
    one.stack_size = 256 * 1024;
    test_on_backends(&one, body_stacks, NULL);

    aco_rt_tls_ctx_free(g_srv);
    aco_rt_tls_ctx_free(g_srv_still);
    aco_rt_tls_ctx_free(g_cli);
    aco_rt_tls_ctx_free(g_cli_nv);
    aco_rt_tls_ctx_free(g_srv_expired);
    aco_rt_tls_ctx_free(g_srv_wrong);
    aco_rt_tls_ctx_free(g_srv_untrusted);
    cred_t* all[] = {&ca1, &ca2, &leaf, &expired, &wrong, &untrusted, &client1, &client2, &sni_rsa,
                     &sni_default, &sni_exact, &sni_wild};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) free_cred(all[i]);
    free(g_hello);
    remove_files();
    if (g_fail) {
        printf("%s: %d check(s) FAILED\n", TEST_NAME, g_fail);
        return 1;
    }
    printf("%s: all checks passed\n", TEST_NAME);
    return 0;
}
