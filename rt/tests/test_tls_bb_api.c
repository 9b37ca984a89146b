/* test_tls_bb_api.c - aco_rt_tls.h's misuse and argument errors, from the header
 * alone: aco_rt_tls_ctx_new's errno and err line for each refusal,
 * add_host's, aco_rt_tls_new's, NULL t in every call (-EINVAL before
 * anything else, the getters' zeros), -EPERM outside a co, -EFAULT and
 * -EINVAL for buffers and vectors, the session calls' refusals. */
#include "tls_bb_common.h"

#include <limits.h>
#include <openssl/x509_vfy.h>

/* ctx_new(o) must fail with errno e and a non-empty line. */
static void expect_ctx_fail(const char* what, const aco_rt_tls_opts_t* o, int e) {
    char err[256];
    memset(err, 'x', sizeof err);
    errno = 0;
    aco_rt_tls_ctx_t* c = aco_rt_tls_ctx_new(o, err, sizeof err);
    EXPECT(c == NULL && errno == e, "%s: ctx %p errno %d (%s), want %d (%s); err \"%.255s\"",
           what, (void*)c, errno, strerror(errno), e, strerror(e), err);
    if (c == NULL) {
        EXPECT(memchr(err, 0, sizeof err) != NULL && err[0] != 0, "%s: err line empty or unterminated", what);
    }
    aco_rt_tls_ctx_free(c);
}

static void ctx_cases(void) {
    aco_rt_tls_opts_t o;
    char big[400];
    expect_ctx_fail("o NULL", NULL, EINVAL);
    o = (aco_rt_tls_opts_t){.server = 1};
    expect_ctx_fail("server without cert", &o, EINVAL);
    o = (aco_rt_tls_opts_t){.server = 1, .cert_pem = BB_SRV_PEM};
    expect_ctx_fail("server cert without key", &o, EINVAL);
    o = (aco_rt_tls_opts_t){.server = 1, .key_pem = BB_SRV_KEY};
    expect_ctx_fail("server key without cert", &o, EINVAL);
    o = (aco_rt_tls_opts_t){.cert_pem = BB_CLI_PEM, .ca_file = bb_ca_file};
    expect_ctx_fail("client cert without key", &o, EINVAL);
    o = (aco_rt_tls_opts_t){.server = 1, .cert_file = bb_ca_file, .key_pem = BB_SRV_KEY};
    expect_ctx_fail("cert file, key memory", &o, EINVAL);
    o = (aco_rt_tls_opts_t){.server = 1, .cert_pem = BB_SRV_PEM, .key_pem = BB_SRV_KEY, .flags = 0x8};
    expect_ctx_fail("unknown flag 0x8", &o, EINVAL);
    o = (aco_rt_tls_opts_t){.ca_file = bb_ca_file, .flags = 0x80000000u};
    expect_ctx_fail("unknown flag 0x80000000", &o, EINVAL);
    o = (aco_rt_tls_opts_t){.ca_file = bb_ca_file, .min_version = 0x0302};
    expect_ctx_fail("version TLS 1.1", &o, EINVAL);
    o = (aco_rt_tls_opts_t){.ca_file = bb_ca_file, .min_version = 0x0305};
    expect_ctx_fail("version 0x0305", &o, EINVAL);
    o = (aco_rt_tls_opts_t){.ca_file = bb_ca_file, .min_version = -1};
    expect_ctx_fail("version -1", &o, EINVAL);
    const char* bad_alpn[] = {"", ",", "h2,", ",h2", "h2,,http/1.1"};
    for (size_t i = 0; i < sizeof bad_alpn / sizeof *bad_alpn; i++) {
        o = (aco_rt_tls_opts_t){.ca_file = bb_ca_file, .alpn = bad_alpn[i]};
        char w[64];
        snprintf(w, sizeof w, "alpn \"%s\"", bad_alpn[i]);
        expect_ctx_fail(w, &o, EINVAL);
    }
    memset(big, 'a', 256);
    big[256] = 0;
    o = (aco_rt_tls_opts_t){.ca_file = bb_ca_file, .alpn = big};
    expect_ctx_fail("alpn name of 256 bytes", &o, EINVAL);
    big[255] = 0;
    o = (aco_rt_tls_opts_t){.ca_file = bb_ca_file, .alpn = big};
    aco_rt_tls_ctx_t* c = aco_rt_tls_ctx_new(&o, NULL, 0);
    EXPECT(c != NULL, "alpn name of 255 bytes refused: %s", strerror(errno));
    aco_rt_tls_ctx_free(c);

    o = (aco_rt_tls_opts_t){.server = 1, .cert_file = "/nonexistent/c.pem", .key_file = "/nonexistent/k.pem"};
    expect_ctx_fail("cert file missing", &o, ENOENT);
    o = (aco_rt_tls_opts_t){.ca_file = "/nonexistent/ca.pem"};
    expect_ctx_fail("ca_file missing", &o, ENOENT);
    o = (aco_rt_tls_opts_t){.server = 1, .cert_pem = BB_SRV_PEM, .key_pem = BB_OTHER_KEY};
    expect_ctx_fail("key not matching cert", &o, EPROTO);
    o = (aco_rt_tls_opts_t){.server = 1, .cert_pem = "not pem", .key_pem = BB_SRV_KEY};
    expect_ctx_fail("cert not PEM", &o, EPROTO);
    o = (aco_rt_tls_opts_t){.server = 1, .cert_pem = BB_SRV_PEM, .key_pem = "junk"};
    expect_ctx_fail("key not PEM", &o, EPROTO);
    o = (aco_rt_tls_opts_t){.server = 1, .cert_pem = BB_SRV_PEM, .key_pem = BB_ENC_KEY};
    expect_ctx_fail("encrypted key", &o, EPROTO);
    o = (aco_rt_tls_opts_t){.ca_file = bb_ca_file, .ciphers = "NO-SUCH-CIPHER"};
    expect_ctx_fail("cipher string", &o, EPROTO);
    o = (aco_rt_tls_opts_t){.ca_file = bb_ca_file, .suites = "TLS_NO_SUCH_SUITE"};
    expect_ctx_fail("suite string", &o, EPROTO);
    {
        char p[64];
        snprintf(p, sizeof p, "/tmp/bb_tls_junk.%d.pem", (int)getpid());
        bb_write_file(p, "this is no certificate\n");
        o = (aco_rt_tls_opts_t){.ca_file = p};
        expect_ctx_fail("ca_file junk", &o, EPROTO);
        unlink(p);
    }
    /* err may be NULL; a short errlen is honoured (NUL within it) */
    o = (aco_rt_tls_opts_t){.server = 1};
    errno = 0;
    EXPECT(aco_rt_tls_ctx_new(&o, NULL, 100) == NULL && errno == EINVAL, "err NULL: errno %d", errno);
    char small[8];
    memset(small, 'x', sizeof small);
    char guard = 'G';
    char buf9[9];
    memcpy(buf9, small, 8);
    buf9[8] = guard;
    errno = 0;
    EXPECT(aco_rt_tls_ctx_new(&o, buf9, 8) == NULL && errno == EINVAL, "errlen 8: errno %d", errno);
    EXPECT(buf9[8] == 'G' && memchr(buf9, 0, 8) != NULL, "errlen 8: line not within 8 bytes");
    /* a server ignores trust it does not use; a client ignores nothing */
    o = (aco_rt_tls_opts_t){.server = 1, .cert_pem = BB_SRV_PEM, .key_pem = BB_SRV_KEY,
                            .ca_file = "/nonexistent/ca.pem"};
    c = aco_rt_tls_ctx_new(&o, NULL, 0);
    EXPECT(c != NULL, "server without VERIFY_CLIENT read its ca_file: %s", strerror(errno));
    aco_rt_tls_ctx_free(c);
    o = (aco_rt_tls_opts_t){.ca_file = "/nonexistent/ca.pem", .flags = ACO_RT_TLS_NO_VERIFY};
    c = aco_rt_tls_ctx_new(&o, NULL, 0);
    EXPECT(c != NULL, "NO_VERIFY client read its ca_file: %s", strerror(errno));
    aco_rt_tls_ctx_free(c);
    /* both, all-good */
    o = (aco_rt_tls_opts_t){.server = 1, .cert_pem = BB_SRV_PEM, .key_pem = BB_SRV_KEY,
                            .min_version = ACO_RT_TLS_1_3, .alpn = "h2,http/1.1",
                            .flags = ACO_RT_TLS_NO_TICKETS | ACO_RT_TLS_LEND};
    c = aco_rt_tls_ctx_new(&o, NULL, 0);
    EXPECT(c != NULL, "a good server refused: %s", strerror(errno));
    aco_rt_tls_ctx_free(c);
    aco_rt_tls_ctx_free(NULL);
}

static void add_host_cases(void) {
    aco_rt_tls_ctx_t* s1 = bb_server(BB_SRV_PEM, BB_SRV_KEY);
    aco_rt_tls_ctx_t* s2 = bb_server(BB_RSA_PEM, BB_RSA_KEY);
    aco_rt_tls_ctx_t* cl = bb_client();
    char big[300];
    memset(big, 'a', 256);
    big[256] = 0;
    EXPECT_EQ(aco_rt_tls_ctx_add_host(s1, "rsa.test", cl), -EINVAL);
    EXPECT_EQ(aco_rt_tls_ctx_add_host(cl, "rsa.test", s2), -EINVAL);
    EXPECT_EQ(aco_rt_tls_ctx_add_host(s1, "rsa.test", s1), -EINVAL);
    EXPECT_EQ(aco_rt_tls_ctx_add_host(s1, NULL, s2), -EINVAL);
    EXPECT_EQ(aco_rt_tls_ctx_add_host(s1, "", s2), -EINVAL);
    EXPECT_EQ(aco_rt_tls_ctx_add_host(s1, big, s2), -EINVAL);
    EXPECT_EQ(aco_rt_tls_ctx_add_host(NULL, "rsa.test", s2), -EINVAL);
    EXPECT_EQ(aco_rt_tls_ctx_add_host(s1, "rsa.test", NULL), -EINVAL);
    big[255] = 0;
    EXPECT_EQ(aco_rt_tls_ctx_add_host(s1, big, s2), 0);
    EXPECT_EQ(aco_rt_tls_ctx_add_host(s1, "rsa.test", s2), 0);
    EXPECT_EQ(aco_rt_tls_ctx_add_host(s1, "rsa.test", s2), -EEXIST);
    EXPECT_EQ(aco_rt_tls_ctx_add_host(s1, "RSA.Test", s2), -EEXIST);
    /* ctx holds for_host: freeing the caller's hold first is fine */
    aco_rt_tls_ctx_free(s2);
    aco_rt_tls_ctx_free(s1);
    aco_rt_tls_ctx_free(cl);
}

/* Everything with t NULL: -EINVAL, also outside a co (before anything). */
static void null_t_cases(void) {
    char b[4];
    struct iovec iov = {b, 1};
    EXPECT_EQ(aco_rt_tls_handshake(NULL, -1), -EINVAL);
    EXPECT_EQ(aco_rt_tls_read(NULL, b, 1, -1), -EINVAL);
    EXPECT_EQ(aco_rt_tls_read(NULL, NULL, 1, -1), -EINVAL);
    EXPECT_EQ(aco_rt_tls_write(NULL, b, 1, -1), -EINVAL);
    EXPECT_EQ(aco_rt_tls_writev(NULL, &iov, 1, -1), -EINVAL);
    EXPECT_EQ(aco_rt_tls_shutdown(NULL, -1), -EINVAL);
    EXPECT_EQ(aco_rt_tls_wait(NULL, -1), -EINVAL);
    EXPECT_EQ(aco_rt_tls_fd(NULL), -EINVAL);
    const char* e = aco_rt_tls_error(NULL);
    EXPECT(e != NULL && e[0] != 0, "aco_rt_tls_error(NULL) gives no reason: %s", e ? "\"\"" : "NULL");
    EXPECT_EQ(aco_rt_tls_verify_result(NULL), X509_V_ERR_UNSPECIFIED);
    EXPECT(aco_rt_tls_alpn(NULL) == NULL, "alpn(NULL)");
    EXPECT(aco_rt_tls_host(NULL) == NULL, "host(NULL)");
    EXPECT(aco_rt_tls_version(NULL) == NULL, "version(NULL)");
    EXPECT(aco_rt_tls_cipher(NULL) == NULL, "cipher(NULL)");
    EXPECT_EQ(aco_rt_tls_resumed(NULL), 0);
    EXPECT_EQ(aco_rt_tls_pending(NULL), 0);
    EXPECT(aco_rt_tls_session(NULL) == NULL, "session(NULL)");
    EXPECT_EQ(aco_rt_tls_set_session(NULL, NULL), -EINVAL);
    aco_rt_tls_session_free(NULL);
    aco_rt_tls_free(NULL);
    errno = 0;
    EXPECT(aco_rt_tls_bufio_new(NULL, 0, 0) == NULL && errno == EINVAL, "bufio_new(NULL): errno %d", errno);
    errno = 0;
    EXPECT(aco_rt_tls_new(NULL, 0, "localhost") == NULL && errno == EINVAL, "tls_new ctx NULL: errno %d", errno);
}

static aco_rt_tls_ctx_t *g_cl, *g_srv, *g_nv;
static aco_rt_tls_t* g_out;     /* made in a co, used outside */
static int g_outfd[2];

static void in_co(void* arg) {
    (void)arg;
    null_t_cases();
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    errno = 0;
    EXPECT(aco_rt_tls_new(g_cl, -1, "localhost") == NULL && errno == EINVAL, "fd -1: errno %d", errno);
    errno = 0;
    EXPECT(aco_rt_tls_new(g_cl, sv[0], NULL) == NULL && errno == EINVAL,
           "verifying client with host NULL: errno %d", errno);
    aco_rt_tls_t* nv = aco_rt_tls_new(g_nv, sv[0], NULL);
    EXPECT(nv != NULL, "NO_VERIFY client with host NULL refused: %s", strerror(errno));
    EXPECT(aco_rt_tls_host(nv) == NULL, "host of a NULL-host client");
    aco_rt_tls_free(nv);
    aco_rt_tls_t* t = aco_rt_tls_new(g_cl, sv[0], "localhost");
    CHECK(t != NULL);
    EXPECT_EQ(aco_rt_tls_fd(t), sv[0]);
    EXPECT_STR(aco_rt_tls_error(t), "");
    EXPECT_STR(aco_rt_tls_host(t), "localhost");
    EXPECT(aco_rt_tls_alpn(t) == NULL, "alpn before the handshake");
    EXPECT_EQ(aco_rt_tls_resumed(t), 0);
    EXPECT_EQ(aco_rt_tls_pending(t), 0);
    EXPECT(aco_rt_tls_session(t) == NULL, "session before the handshake");
    EXPECT_EQ(aco_rt_tls_verify_result(t), 0);
    char b[8];
    /* EFAULT before any I/O: nothing sent */
    /* (each failed call's reason is its errno's text, "" after one that
     * did not fail) */
    EXPECT_EQ(aco_rt_tls_read(t, NULL, 1, DL(100)), -EFAULT);
    EXPECT_STR(aco_rt_tls_error(t), strerror(EFAULT));
    EXPECT_EQ(aco_rt_tls_read(t, b, 0, DL(100)), 0);
    EXPECT_STR(aco_rt_tls_error(t), "");
    EXPECT_EQ(aco_rt_tls_write(t, NULL, 1, DL(100)), -EFAULT);
    EXPECT_STR(aco_rt_tls_error(t), strerror(EFAULT));
    EXPECT_EQ(aco_rt_tls_writev(t, NULL, 1, DL(100)), -EFAULT);
    EXPECT_STR(aco_rt_tls_error(t), strerror(EFAULT));
    struct iovec iov[3] = {{b, 1}, {NULL, 5}, {b, 1}};
    EXPECT_EQ(aco_rt_tls_writev(t, iov, 3, DL(100)), -EFAULT);
    EXPECT_STR(aco_rt_tls_error(t), strerror(EFAULT));
    EXPECT_EQ(aco_rt_tls_writev(t, iov, -1, DL(100)), -EINVAL);
    EXPECT_STR(aco_rt_tls_error(t), strerror(EINVAL));
    EXPECT_EQ(aco_rt_tls_read(t, NULL, 1, DL(100)), -EFAULT);
    EXPECT_EQ(aco_rt_tls_writev(t, iov, IOV_MAX + 1, DL(100)), -EINVAL);
    EXPECT_STR(aco_rt_tls_error(t), strerror(EINVAL));
    EXPECT_EQ(aco_rt_tls_read(t, NULL, 1, DL(100)), -EFAULT);
    EXPECT_EQ(aco_rt_tls_write(t, b, (size_t)SSIZE_MAX + 1, DL(100)), -EINVAL);
    EXPECT_STR(aco_rt_tls_error(t), strerror(EINVAL));
    EXPECT_EQ(aco_rt_tls_read(t, NULL, 1, DL(100)), -EFAULT);
    struct iovec huge[2] = {{b, (size_t)SSIZE_MAX}, {b, 2}};
    EXPECT_EQ(aco_rt_tls_writev(t, huge, 2, DL(100)), -EINVAL);
    EXPECT_STR(aco_rt_tls_error(t), strerror(EINVAL));
    /* none of those sent anything, nor made the connection done for */
    EXPECT_EQ(recv(sv[1], b, sizeof b, MSG_DONTWAIT), -1);
    EXPECT_EQ(errno, EAGAIN);
    /* a shutdown before the handshake: 0, nothing sent */
    EXPECT_EQ(aco_rt_tls_shutdown(t, DL(100)), 0);
    EXPECT_EQ(recv(sv[1], b, sizeof b, MSG_DONTWAIT), -1);
    EXPECT_EQ(errno, EAGAIN);
    aco_rt_tls_free(t);

    /* set_session: a server's t, NULL s */
    aco_rt_tls_t* st = aco_rt_tls_new(g_srv, sv[1], NULL);
    CHECK(st != NULL);
    EXPECT(aco_rt_tls_host(st) == NULL, "a server's host before the handshake");
    EXPECT_EQ(aco_rt_tls_set_session(st, NULL), -EINVAL);
    EXPECT_STR(aco_rt_tls_error(st), strerror(EINVAL));
    aco_rt_tls_free(st);
    aco_rt_close(sv[0]);
    aco_rt_close(sv[1]);

    /* a t for the outside-co cases */
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, g_outfd) == 0);
    g_out = aco_rt_tls_new(g_cl, g_outfd[0], "localhost");
    CHECK(g_out != NULL);
}

int main(void) {
    bb_files();
    g_cl = bb_client();
    g_srv = bb_server(BB_SRV_PEM, BB_SRV_KEY);
    aco_rt_tls_opts_t o = {.flags = ACO_RT_TLS_NO_VERIFY};
    g_nv = bb_ctx(o);
    ctx_cases();
    add_host_cases();
    null_t_cases();
    int bs[4];
    int nb = test_backends(bs, 4);
    for (int i = 0; i < nb; i++) {
        test_backend_label = test_backend_str(bs[i]);
        aco_rt_sched_t* s = test_sched_on(bs[i], NULL);
        test_go(s, in_co, NULL);
        /* outside a co, with a live scheduler on the thread: -EPERM */
        char b[4];
        struct iovec iov = {b, 1};
        EXPECT_EQ(aco_rt_tls_handshake(g_out, -1), -EPERM);
        EXPECT_EQ(aco_rt_tls_read(g_out, b, 1, -1), -EPERM);
        EXPECT_EQ(aco_rt_tls_write(g_out, b, 1, -1), -EPERM);
        EXPECT_EQ(aco_rt_tls_writev(g_out, &iov, 1, -1), -EPERM);
        EXPECT_EQ(aco_rt_tls_shutdown(g_out, -1), -EPERM);
        EXPECT_EQ(aco_rt_tls_wait(g_out, -1), -EPERM);
        aco_rt_sched_free(s);
        /* and with no scheduler at all */
        EXPECT_EQ(aco_rt_tls_handshake(g_out, -1), -EPERM);
        EXPECT_EQ(aco_rt_tls_read(g_out, b, 1, 0), -EPERM);
        aco_rt_tls_free(g_out);
        close(g_outfd[0]);
        close(g_outfd[1]);
        test_backend_label = "";
    }
    aco_rt_tls_ctx_free(g_cl);
    aco_rt_tls_ctx_free(g_srv);
    aco_rt_tls_ctx_free(g_nv);
    return bb_end("test_tls_bb_api");
}
