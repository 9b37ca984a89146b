/* test_tls_bb_verify.c - a client's verification defaults and mutual TLS, from
 * aco_rt_tls.h alone: the host name checked by default (a wrong host,
 * an IP address that is not the certificate's: -EKEYREJECTED and
 * X509_V_ERR_HOSTNAME_MISMATCH / IP_ADDRESS_MISMATCH), an expired
 * certificate, an unknown issuer, the system's store, NO_VERIFY; case and
 * wildcards in names; VERIFY_CLIENT with no, an unknown and a good client
 * certificate (TLS 1.3 and 1.2); what the other side sees; "done for". */
#include "tls_bb_common.h"

#include <openssl/x509_vfy.h>

static aco_rt_tls_ctx_t *cl, *cl_sys, *cl_nv, *s_srv, *s_exp, *s_unk, *s_rsa;

static void expect_rejected(const char* what, aco_rt_tls_ctx_t* c, const char* host,
                            aco_rt_tls_ctx_t* s, long vr, const char* reason) {
    bb_res_t cr, sr;
    bb_pair(c, host, s, NULL, &cr, &sr, NULL);
    EXPECT(cr.hs == -EKEYREJECTED, "%s: client handshake %d (%s), err \"%s\"", what, cr.hs,
           strerror(-cr.hs), cr.err);
    EXPECT(cr.vr == vr, "%s: verify_result %ld, want %ld", what, cr.vr, vr);
    EXPECT(strstr(cr.err, reason) != NULL, "%s: reason \"%s\" lacks \"%s\"", what, cr.err, reason);
    /* the server hears an alert (bad certificate / unknown CA ...) */
    EXPECT(sr.hs == -EPROTO, "%s: server handshake %d (%s), err \"%s\"", what, sr.hs,
           strerror(-sr.hs), sr.err);
    EXPECT(sr.err[0] != 0, "%s: server's reason empty", what);
}

static void expect_ok(const char* what, aco_rt_tls_ctx_t* c, const char* host,
                      aco_rt_tls_ctx_t* s, bb_res_t* crp, bb_res_t* srp) {
    bb_res_t cr, sr;
    bb_pair(c, host, s, NULL, &cr, &sr, NULL);
    EXPECT(cr.hs == 0 && cr.rd == 5, "%s: client handshake %d read %zd err \"%s\" rderr \"%s\"",
           what, cr.hs, cr.rd, cr.err, cr.rderr);
    EXPECT(sr.hs == 0 && sr.rd == 0, "%s: server handshake %d, its read ended %zd, err \"%s\"",
           what, sr.hs, sr.rd, sr.rderr);
    EXPECT(cr.vr == 0, "%s: client verify_result %ld", what, cr.vr);
    EXPECT(cr.err[0] == 0, "%s: client reason \"%s\" after success", what, cr.err);
    EXPECT(cr.shut == 0 && sr.shut == 0, "%s: shutdowns %d %d", what, cr.shut, sr.shut);
    if (crp) *crp = cr;
    if (srp) *srp = sr;
}

static void body(void* arg) {
    (void)arg;
    bb_res_t cr, sr;
    expect_ok("good", cl, "localhost", s_srv, &cr, &sr);
    EXPECT_STR(cr.host, "localhost");
    EXPECT(sr.has_host && strcmp(sr.host, "localhost") == 0, "server's SNI view \"%s\" (%d)", sr.host,
           sr.has_host);
    EXPECT_EQ(sr.vr, 0);
    expect_ok("host in capitals", cl, "LocalHost", s_srv, NULL, NULL);
    expect_ok("second SAN", cl, "a.test", s_srv, NULL, NULL);
    expect_ok("IP address in the SAN", cl, "127.0.0.1", s_srv, &cr, &sr);
    EXPECT(!cr.has_host, "client's host for an address: \"%s\"", cr.host);
    EXPECT(!sr.has_host, "an address was sent as SNI: \"%s\"", sr.host);
    expect_ok("RSA certificate, wildcard", cl, "x.wild.test", s_rsa, NULL, NULL);
    expect_rejected("wildcard covers one label only", cl, "a.b.wild.test", s_rsa,
                    X509_V_ERR_HOSTNAME_MISMATCH, "certificate verify failed");
    expect_rejected("wrong host", cl, "other.test", s_srv, X509_V_ERR_HOSTNAME_MISMATCH,
                    "certificate verify failed");
    expect_rejected("wrong IP", cl, "127.0.0.2", s_srv, X509_V_ERR_IP_ADDRESS_MISMATCH,
                    "certificate verify failed");
    expect_rejected("expired", cl, "localhost", s_exp, X509_V_ERR_CERT_HAS_EXPIRED,
                    "certificate has expired");
    expect_rejected("unknown CA", cl, "localhost", s_unk,
                    X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY, "certificate verify failed");
    expect_rejected("system store (no ca_file)", cl_sys, "localhost", s_srv,
                    X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY, "certificate verify failed");
    /* NO_VERIFY: anything goes, verify_result 0 */
    expect_ok("NO_VERIFY, expired", cl_nv, "localhost", s_exp, &cr, NULL);
    EXPECT_EQ(cr.vr, 0);
    expect_ok("NO_VERIFY, wrong host", cl_nv, "other.test", s_unk, NULL, NULL);
    expect_ok("NO_VERIFY, no host", cl_nv, NULL, s_srv, &cr, &sr);
    EXPECT(!sr.has_host, "no host given, yet SNI \"%s\"", sr.host);

    /* done for: a rejected connection says the same at once, every call */
    {
        int sv[2];
        CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
        bb_res_t s2;
        aco_rt_co_t* sco = bb_spawn_server(s_exp, sv[1], &s2);
        aco_rt_tls_t* t = aco_rt_tls_new(cl, sv[0], "localhost");
        EXPECT_EQ(aco_rt_tls_handshake(t, DL(5000)), -EKEYREJECTED);
        EXPECT_EQ(aco_rt_tls_verify_result(t), X509_V_ERR_CERT_HAS_EXPIRED);
        char b[8];
        int64_t t0 = aco_rt_now();
        EXPECT_EQ(aco_rt_tls_handshake(t, -1), -EKEYREJECTED);
        EXPECT_EQ(aco_rt_tls_read(t, b, sizeof b, -1), -EKEYREJECTED);
        EXPECT_EQ(aco_rt_tls_write(t, "x", 1, -1), -EKEYREJECTED);
        struct iovec iov = {b, 1};
        EXPECT_EQ(aco_rt_tls_writev(t, &iov, 1, -1), -EKEYREJECTED);
        EXPECT_EQ(aco_rt_tls_shutdown(t, -1), -EKEYREJECTED);
        EXPECT_EQ(aco_rt_tls_wait(t, -1), -EKEYREJECTED);
        /* bad arguments too: the kept error, the kept reason */
        EXPECT_EQ(aco_rt_tls_write(t, NULL, 1, -1), -EKEYREJECTED);
        EXPECT_EQ(aco_rt_tls_writev(t, &iov, -1, -1), -EKEYREJECTED);
        EXPECT_EQ(aco_rt_tls_read(t, NULL, 1, -1), -EKEYREJECTED);
        EXPECT(aco_rt_now() - t0 < 2000 * MS, "done-for calls waited");
        EXPECT_HAS(aco_rt_tls_error(t), "certificate has expired");
        EXPECT_EQ(aco_rt_tls_verify_result(t), X509_V_ERR_CERT_HAS_EXPIRED);
        aco_rt_tls_free(t);
        aco_rt_close(sv[0]);
        CHECK_EQ(aco_rt_join(sco, DL(10000)), 0);
    }

    /* mutual TLS, TLS 1.3 */
    {
        aco_rt_tls_opts_t so = {.server = 1, .cert_pem = BB_SRV_PEM, .key_pem = BB_SRV_KEY,
                                .ca_file = bb_ca_file, .flags = ACO_RT_TLS_VERIFY_CLIENT};
        aco_rt_tls_ctx_t* sm = bb_ctx(so);
        aco_rt_tls_opts_t co = {.ca_file = bb_ca_file, .cert_pem = BB_CLI_PEM, .key_pem = BB_CLI_KEY};
        aco_rt_tls_ctx_t* cgood = bb_ctx(co);
        co.cert_pem = BB_CLIUNK_PEM;
        co.key_pem = BB_CLIUNK_KEY;
        aco_rt_tls_ctx_t* cunk = bb_ctx(co);

        bb_pair(cgood, "localhost", sm, NULL, &cr, &sr, NULL);
        EXPECT(cr.hs == 0 && cr.rd == 5 && sr.hs == 0, "mTLS good: %d %zd %d (%s / %s)", cr.hs,
               cr.rd, sr.hs, cr.err, sr.err);
        EXPECT_STR(cr.ver, "TLSv1.3");
        EXPECT_EQ(sr.vr, 0);

        /* no client certificate: the server -EPROTO, the client's first read */
        bb_pair(cl, "localhost", sm, NULL, &cr, &sr, NULL);
        EXPECT(sr.hs == -EPROTO, "mTLS none: server handshake %d (%s)", sr.hs, sr.err);
        EXPECT(cr.hs == 0 && cr.rd == -EPROTO, "mTLS none: client handshake %d, first read %zd (%s)",
               cr.hs, cr.rd, cr.rderr);

        /* an unknown issuer's client certificate */
        bb_pair(cunk, "localhost", sm, NULL, &cr, &sr, NULL);
        EXPECT(sr.hs == -EKEYREJECTED, "mTLS unknown: server handshake %d (%s)", sr.hs, sr.err);
        EXPECT(sr.vr == X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY ||
                   sr.vr == X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE,
               "mTLS unknown: server verify_result %ld", sr.vr);
        EXPECT(cr.hs == 0 && cr.rd == -EPROTO, "mTLS unknown: client handshake %d, first read %zd (%s)",
               cr.hs, cr.rd, cr.rderr);

        /* mutual TLS 1.2: a client of plain OpenSSL, TLS 1.2 at most */
        const char* certs[3][2] = {{BB_CLI_PEM, BB_CLI_KEY}, {NULL, NULL}, {BB_CLIUNK_PEM, BB_CLIUNK_KEY}};
        int want[3] = {0, -EPROTO, -EKEYREJECTED};
        for (int i = 0; i < 3; i++) {
            bb_raw_t r = {.server = 0, .maxv = TLS1_2_VERSION, .cert = certs[i][0],
                          .key = certs[i][1], .host = "localhost"};
            int fd = bb_raw_pair(&r);
            aco_rt_tls_t* t = aco_rt_tls_new(sm, fd, NULL);
            int hs = aco_rt_tls_handshake(t, DL(5000));
            EXPECT(hs == want[i], "mTLS 1.2 case %d: server handshake %d (%s), want %d", i, hs,
                   aco_rt_tls_error(t), want[i]);
            if (hs == 0) EXPECT_STR(aco_rt_tls_version(t), "TLSv1.2");
            if (i == 2) EXPECT(aco_rt_tls_verify_result(t) != 0, "mTLS 1.2 unknown: verify_result 0");
            aco_rt_tls_free(t);
            aco_rt_close(fd);
            bb_raw_join(&r);
            if (i == 0) EXPECT(r.hs == 1, "mTLS 1.2 good: the raw client: %s", r.errs);
        }
        aco_rt_tls_ctx_free(sm);
        aco_rt_tls_ctx_free(cgood);
        aco_rt_tls_ctx_free(cunk);
    }
}

int main(void) {
    bb_files();
    cl = bb_client();
    aco_rt_tls_opts_t o = {0};
    /* the system's store: make sure it is one without our CA */
    setenv("SSL_CERT_FILE", bb_ca2_file, 1);
    unsetenv("SSL_CERT_DIR");
    cl_sys = bb_ctx(o);
    o.flags = ACO_RT_TLS_NO_VERIFY;
    cl_nv = bb_ctx(o);
    s_srv = bb_server(BB_SRV_PEM, BB_SRV_KEY);
    s_exp = bb_server(BB_EXP_PEM, BB_EXP_KEY);
    s_unk = bb_server(BB_UNK_PEM, BB_UNK_KEY);
    s_rsa = bb_server(BB_RSA_PEM, BB_RSA_KEY);
    bb_on_backends(body, NULL);
    aco_rt_tls_ctx_free(cl);
    aco_rt_tls_ctx_free(cl_sys);
    aco_rt_tls_ctx_free(cl_nv);
    aco_rt_tls_ctx_free(s_srv);
    aco_rt_tls_ctx_free(s_exp);
    aco_rt_tls_ctx_free(s_unk);
    aco_rt_tls_ctx_free(s_rsa);
    return bb_end("test_tls_bb_verify");
}
