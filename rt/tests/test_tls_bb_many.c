/* test_tls_bb_many.c - many connections at once on one thread, and on two
 * threads sharing the contexts, from aco_rt_tls.h alone: each fails (or
 * not) in its own way (a wrong host, an expired certificate, an unknown
 * issuer, a peer speaking HTTP, an ALPN mismatch) while the others
 * handshake and move data around it, and each connection's reason and
 * verify_result are its own: never another co's error (the thread's
 * OpenSSL error queue is shared by its cos). */
#include "tls_bb_common.h"

#include <openssl/x509_vfy.h>

enum { GOOD, WRONGHOST, EXPIRED, UNKNOWN, HTTP, ALPN, KINDS };
static const char* kind_name[] = {"good", "wrong host", "expired", "unknown CA", "http", "alpn"};

static aco_rt_tls_ctx_t *cl, *cl_alpn, *s_srv, *s_exp, *s_unk, *s_alpn;

typedef struct {
    int kind, fd;
    int hs;
    long vr;
    char err[256];
    ssize_t rd;
    int bad;
} side_t;

static void srv_side(void* arg) {
    side_t* x = (side_t*)arg;
    aco_rt_tls_ctx_t* c = x->kind == EXPIRED ? s_exp : x->kind == UNKNOWN ? s_unk
                        : x->kind == ALPN ? s_alpn : s_srv;
    aco_rt_tls_t* t = aco_rt_tls_new(c, x->fd, NULL);
    x->hs = aco_rt_tls_handshake(t, DL(10000));
    snprintf(x->err, sizeof x->err, "%s", aco_rt_tls_error(t));
    x->vr = aco_rt_tls_verify_result(t);
    if (x->hs == 0) {
        char* buf = malloc(20000);
        CHECK(buf != NULL);
        ssize_t n;
        while ((n = aco_rt_tls_read(t, buf, 20000, DL(10000))) > 0)
            if (aco_rt_tls_write(t, buf, (size_t)n, DL(10000)) != n) break;
        free(buf);
        x->rd = n;
        if (n == 0) aco_rt_tls_shutdown(t, DL(5000));
        if (n != 0) snprintf(x->err, sizeof x->err, "%s", aco_rt_tls_error(t));
    }
    aco_rt_tls_free(t);
    aco_rt_close(x->fd);
}

static void cli_side(void* arg) {
    side_t* x = (side_t*)arg;
    if (x->kind == HTTP) {
        /* a client speaking HTTP to the TLS server */
        const char req[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
        aco_rt_write(x->fd, req, sizeof req - 1, DL(5000));
        char b[64];
        while (aco_rt_read(x->fd, b, sizeof b, DL(5000)) > 0) {
        }
        aco_rt_close(x->fd);
        return;
    }
    aco_rt_tls_t* t = aco_rt_tls_new(x->kind == ALPN ? cl_alpn : cl, x->fd,
                                     x->kind == WRONGHOST ? "other.test" : "localhost");
    x->hs = aco_rt_tls_handshake(t, DL(10000));
    snprintf(x->err, sizeof x->err, "%s", aco_rt_tls_error(t));
    x->vr = aco_rt_tls_verify_result(t);
    if (x->hs == 0) {
        /* 200 KiB there and back, in pieces, while the others fail */
        unsigned char* out = malloc(8192);
        unsigned char* in = malloc(20000);
        CHECK(out && in);
        for (size_t i = 0; i < 8192; i++) out[i] = (unsigned char)(i + (size_t)x->fd);
        size_t sent = 0, got = 0;
        for (int r = 0; r < 25 && !x->bad; r++) {
            if (aco_rt_tls_write(t, out, 8192, DL(10000)) != (ssize_t)8192) x->bad = 1;
            sent += 8192;
            while (got < sent && !x->bad) {
                ssize_t n = aco_rt_tls_read(t, in, 20000, DL(10000));
                if (n <= 0) {
                    x->bad = 2;
                    x->rd = n;
                    break;
                }
                for (ssize_t i = 0; i < n; i++)
                    if (in[i] != out[(got + (size_t)i) % 8192]) x->bad = 3;
                got += (size_t)n;
            }
            aco_rt_yield();
        }
        if (aco_rt_tls_shutdown(t, DL(5000)) != 0) x->bad = 4;
        x->rd = aco_rt_tls_read(t, in, 20000, DL(5000));
        if (x->bad || x->rd != 0) snprintf(x->err, sizeof x->err, "%s", aco_rt_tls_error(t));
        free(out);
        free(in);
    }
    aco_rt_tls_free(t);
    aco_rt_close(x->fd);
}

static void check(const char* where, side_t* c, side_t* s) {
    int k = c->kind;
    const char* kn = kind_name[k];
    switch (k) {
    case GOOD:
        EXPECT(c->hs == 0 && !c->bad && c->rd == 0 && c->err[0] == 0 && c->vr == 0,
               "%s %s: client hs %d bad %d rd %zd vr %ld err \"%s\"", where, kn, c->hs, c->bad, c->rd,
               c->vr, c->err);
        EXPECT(s->hs == 0 && s->rd == 0 && s->err[0] == 0, "%s %s: server hs %d rd %zd err \"%s\"",
               where, kn, s->hs, s->rd, s->err);
        break;
    case WRONGHOST:
    case EXPIRED:
    case UNKNOWN: {
        long vr = k == WRONGHOST ? X509_V_ERR_HOSTNAME_MISMATCH
                : k == EXPIRED ? X509_V_ERR_CERT_HAS_EXPIRED
                               : X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY;
        const char* why = k == WRONGHOST ? "hostname mismatch" : k == EXPIRED ? "certificate has expired"
                        : "unable to get local issuer certificate";
        EXPECT(c->hs == -EKEYREJECTED && c->vr == vr && strstr(c->err, why) != NULL,
               "%s %s: client hs %d vr %ld err \"%s\"", where, kn, c->hs, c->vr, c->err);
        EXPECT(s->hs == -EPROTO && strstr(s->err, "alert") != NULL && strstr(s->err, "http") == NULL,
               "%s %s: server hs %d err \"%s\"", where, kn, s->hs, s->err);
        break;
    }
    case HTTP:
        EXPECT(s->hs == -EPROTO && strstr(s->err, "alert") == NULL && strstr(s->err, "certificate") == NULL &&
                   strstr(s->err, "application") == NULL && s->err[0] != 0,
               "%s %s: server hs %d err \"%s\"", where, kn, s->hs, s->err);
        break;
    case ALPN:
        EXPECT(c->hs == -EPROTO && strstr(c->err, "no application protocol") != NULL,
               "%s %s: client hs %d err \"%s\"", where, kn, c->hs, c->err);
        EXPECT(s->hs == -EPROTO && strstr(s->err, "certificate") == NULL && s->err[0] != 0 &&
                   strstr(s->err, "http") == NULL,
               "%s %s: server hs %d err \"%s\"", where, kn, s->hs, s->err);
        break;
    }
}

#define PAIRS (KINDS * (FEW ? 3 : 12))

static void crowd(void* arg) {
    const char* where = (const char*)arg;
    side_t* cs = calloc(PAIRS, sizeof *cs);
    side_t* ss = calloc(PAIRS, sizeof *ss);
    aco_rt_co_t** cos = calloc(2 * PAIRS, sizeof *cos);
    CHECK(cs && ss && cos);
    for (int i = 0; i < PAIRS; i++) {
        int sv[2];
        CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
        cs[i].kind = ss[i].kind = (i * 7) % KINDS;
        cs[i].fd = sv[0];
        ss[i].fd = sv[1];
        cos[2 * i] = aco_rt_spawn(NULL, srv_side, &ss[i]);
        cos[2 * i + 1] = aco_rt_spawn(NULL, cli_side, &cs[i]);
        CHECK(cos[2 * i] && cos[2 * i + 1]);
    }
    for (int i = 0; i < 2 * PAIRS; i++) CHECK_EQ(aco_rt_join(cos[i], DL(30000)), 0);
    for (int i = 0; i < PAIRS; i++) check(where, &cs[i], &ss[i]);
    free(cs);
    free(ss);
    free(cos);
}

static void* thread_main(void* arg) {
    aco_rt_sched_t* s = test_sched_on(test_backend_id, NULL);
    test_go(s, crowd, arg);
    aco_rt_sched_free(s);
    return NULL;
}

static int per_backend(int b) {
    /* one thread */
    aco_rt_sched_t* s = test_sched_on(b, NULL);
    test_go(s, crowd, "one thread");
    aco_rt_sched_free(s);
    /* two threads at once on the same contexts */
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        CHECK(pthread_create(&th[i], NULL, thread_main, i ? "thread 2" : "thread 1") == 0);
    for (int i = 0; i < 2; i++) CHECK(pthread_join(th[i], NULL) == 0);
    return bb_fail;
}

int main(void) {
    bb_files();
    cl = bb_client();
    aco_rt_tls_opts_t o = {.ca_file = bb_ca_file, .alpn = "x-unknown"};
    cl_alpn = bb_ctx(o);
    s_srv = bb_server(BB_SRV_PEM, BB_SRV_KEY);
    s_exp = bb_server(BB_EXP_PEM, BB_EXP_KEY);
    s_unk = bb_server(BB_UNK_PEM, BB_UNK_KEY);
    aco_rt_tls_opts_t so = {.server = 1, .cert_pem = BB_SRV_PEM, .key_pem = BB_SRV_KEY, .alpn = "h2"};
    s_alpn = bb_ctx(so);
    test_backends_apart(per_backend);
    aco_rt_tls_ctx_free(cl);
    aco_rt_tls_ctx_free(cl_alpn);
    aco_rt_tls_ctx_free(s_srv);
    aco_rt_tls_ctx_free(s_exp);
    aco_rt_tls_ctx_free(s_unk);
    aco_rt_tls_ctx_free(s_alpn);
    return bb_end("test_tls_bb_many");
}
