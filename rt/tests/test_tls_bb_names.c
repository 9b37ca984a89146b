/* test_tls_bb_names.c - SNI (aco_rt_tls_ctx_add_host) and ALPN, from
 * aco_rt_tls.h alone: the certificate answered for each name (told by the
 * client's verification, which passes only with the right one), case,
 * wildcards, the first match, the server's view of the name; ALPN's
 * choice (the server's order), a client offering none, a client offering
 * only unknown ones, a server choosing none for a client that offered. */
#include "tls_bb_common.h"

#include <openssl/x509_vfy.h>

static aco_rt_tls_ctx_t *cl, *s_def, *s_rsa, *s_other;

static void body(void* arg) {
    (void)arg;
    bb_res_t cr, sr;
    /* default: srv (localhost); rsa.test -> RSA; *.wild.test -> RSA;
     * y.wild.test -> other (added after the wildcard: never answers) */
    struct {
        const char* host;
        int ok;
    } cases[] = {
        {"localhost", 1},     {"rsa.test", 1},   {"RSA.TEST", 1},    {"x.wild.test", 1},
        {"X.Wild.Test", 1},   {"y.wild.test", 1}, /* the wildcard came first: RSA (other.test would fail) */
        {"other.test", 1},    {"a.b.wild.test", 0}, /* no match: default srv, wrong name */
        {"wild.test", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        bb_pair(cl, cases[i].host, s_def, NULL, &cr, &sr, NULL);
        if (cases[i].ok) {
            EXPECT(cr.hs == 0 && cr.rd == 5, "SNI %s: client %d (%s)", cases[i].host, cr.hs, cr.err);
            EXPECT(sr.has_host && strcmp(sr.host, cases[i].host) == 0,
                   "SNI %s: the server's view \"%s\"", cases[i].host, sr.host);
        } else {
            EXPECT(cr.hs == -EKEYREJECTED && cr.vr == X509_V_ERR_HOSTNAME_MISMATCH,
                   "SNI %s: client %d vr %ld (%s)", cases[i].host, cr.hs, cr.vr, cr.err);
        }
    }
    /* ALPN */
    aco_rt_tls_opts_t so = {.server = 1, .cert_pem = BB_SRV_PEM, .key_pem = BB_SRV_KEY,
                            .alpn = "h2,http/1.1"};
    aco_rt_tls_ctx_t* sa = bb_ctx(so);
    so.alpn = NULL;
    aco_rt_tls_ctx_t* snone = bb_ctx(so);
    aco_rt_tls_opts_t co = {.ca_file = bb_ca_file, .alpn = "http/1.1,h2"};
    aco_rt_tls_ctx_t* c1 = bb_ctx(co);
    co.alpn = "http/1.1";
    aco_rt_tls_ctx_t* c2 = bb_ctx(co);
    co.alpn = "spdy/1,x";
    aco_rt_tls_ctx_t* c3 = bb_ctx(co);

    bb_pair(c1, "localhost", sa, NULL, &cr, &sr, NULL);
    EXPECT(cr.hs == 0 && sr.hs == 0, "ALPN both: %d %d", cr.hs, sr.hs);
    EXPECT_STR(cr.has_alpn ? cr.alpn : NULL, "h2");
    EXPECT_STR(sr.has_alpn ? sr.alpn : NULL, "h2");

    bb_pair(c2, "localhost", sa, NULL, &cr, &sr, NULL);
    EXPECT_STR(cr.has_alpn ? cr.alpn : NULL, "http/1.1");
    EXPECT_STR(sr.has_alpn ? sr.alpn : NULL, "http/1.1");

    /* a client offering none: the server goes on without */
    bb_pair(cl, "localhost", sa, NULL, &cr, &sr, NULL);
    EXPECT(cr.hs == 0 && sr.hs == 0 && cr.rd == 5, "ALPN client none: %d %d %zd", cr.hs, sr.hs, cr.rd);
    EXPECT(!cr.has_alpn && !sr.has_alpn, "ALPN client none: \"%s\" \"%s\"", cr.alpn, sr.alpn);

    /* a client offering only what the server does not know: both fail */
    bb_pair(c3, "localhost", sa, NULL, &cr, &sr, NULL);
    EXPECT(sr.hs == -EPROTO, "ALPN unknown: server %d (%s)", sr.hs, sr.err);
    EXPECT(cr.hs == -EPROTO, "ALPN unknown: client %d (%s)", cr.hs, cr.err);
    EXPECT_HAS(cr.err, "no application protocol");

    /* a client that offered, a server with no ALPN: the client fails */
    bb_pair(c2, "localhost", snone, NULL, &cr, &sr, NULL);
    EXPECT(cr.hs == -EPROTO, "ALPN none back: client %d (%s)", cr.hs, cr.err);
    EXPECT(cr.err[0] != 0, "ALPN none back: no reason");
    /* "the server is told nothing but the connection's end" */
    EXPECT(sr.hs == 0 || sr.hs == -ECONNRESET, "ALPN none back: server %d (%s)", sr.hs, sr.err);
    if (sr.hs == 0)
        EXPECT(sr.rd == -ECONNRESET, "ALPN none back: server's read %zd (%s)", sr.rd, sr.rderr);

    aco_rt_tls_ctx_free(sa);
    aco_rt_tls_ctx_free(snone);
    aco_rt_tls_ctx_free(c1);
    aco_rt_tls_ctx_free(c2);
    aco_rt_tls_ctx_free(c3);
}

int main(void) {
    bb_files();
    cl = bb_client();
    s_def = bb_server(BB_SRV_PEM, BB_SRV_KEY);
    s_rsa = bb_server(BB_RSA_PEM, BB_RSA_KEY);
    s_other = bb_server(BB_OTHER_PEM, BB_OTHER_KEY);
    CHECK_EQ(aco_rt_tls_ctx_add_host(s_def, "rsa.test", s_rsa), 0);
    CHECK_EQ(aco_rt_tls_ctx_add_host(s_def, "*.wild.test", s_rsa), 0);
    CHECK_EQ(aco_rt_tls_ctx_add_host(s_def, "y.wild.test", s_other), 0);
    CHECK_EQ(aco_rt_tls_ctx_add_host(s_def, "other.test", s_other), 0);
    aco_rt_tls_ctx_free(s_rsa);     /* s_def holds them */
    aco_rt_tls_ctx_free(s_other);
    bb_on_backends(body, NULL);
    aco_rt_tls_ctx_free(cl);
    aco_rt_tls_ctx_free(s_def);
    return bb_end("test_tls_bb_names");
}
