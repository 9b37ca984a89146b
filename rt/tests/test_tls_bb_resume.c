/* test_tls_bb_resume.c - sessions, from aco_rt_tls.h alone: TLS 1.3 tickets
 * (the session after the first read, resumed on both sides, the caller's
 * hold dropped after set_session, another host's refused, a name in
 * another case taken, after the handshake refused), NO_TICKETS, a ticket
 * of another context (a full handshake), another thread's connection of
 * the same context; TLS 1.2 against a peer of plain OpenSSL: our client
 * resumes, our server resumes by ticket and by session id, NO_TICKETS
 * refuses both. */
#include "tls_bb_common.h"

static aco_rt_tls_ctx_t *cl, *s1, *s2, *snt;
static aco_rt_tls_session_t* g_sess;

static aco_rt_sem_t g_done;
static void other_thread_co(void* arg) {
    int* ok = (int*)arg;
    bb_res_t cr, sr;
    bb_pair(cl, "localhost", s1, g_sess, &cr, &sr, NULL);
    *ok = cr.hs == 0 && cr.resumed && sr.resumed;
    aco_rt_sem_post(&g_done);
}
static void* other_thread(void* arg) {
    aco_rt_sched_t* s = test_sched_on(test_backend_id, NULL);
    test_go(s, other_thread_co, arg);
    aco_rt_sched_free(s);
    return NULL;
}

static void raw_echo(bb_raw_t* r, SSL* ssl) {
    char b[64];
    int n;
    while ((n = SSL_read(ssl, b, sizeof b)) > 0) SSL_write(ssl, b, n);
    r->out = SSL_get_error(ssl, n);
    SSL_shutdown(ssl);
}
static void raw_ping(bb_raw_t* r, SSL* ssl) {
    char b[8];
    SSL_write(ssl, "ping\n", 5);
    r->out = SSL_read(ssl, b, sizeof b);
    if (r->sess == NULL) r->sess = SSL_get1_session(ssl);
    SSL_shutdown(ssl);
}

static void body(void* arg) {
    (void)arg;
    bb_res_t cr, sr;
    aco_rt_tls_session_t* s = NULL;
    bb_pair(cl, "localhost", s1, NULL, &cr, &sr, &s);
    EXPECT(cr.hs == 0 && !cr.resumed && !sr.resumed, "first: %d %d %d", cr.hs, cr.resumed, sr.resumed);
    EXPECT(s != NULL, "TLS 1.3: no session after a read");
    if (s == NULL) return;

    /* resumed on both sides; the session outlived its t */
    bb_pair(cl, "localhost", s1, s, &cr, &sr, NULL);
    EXPECT(cr.hs == 0 && cr.resumed && sr.resumed, "resume: hs %d resumed %d/%d (%s)", cr.hs,
           cr.resumed, sr.resumed, cr.err);
    EXPECT_EQ(cr.vr, 0);

    /* a host in other case: the same host */
    bb_pair(cl, "LOCALHOST", s1, s, &cr, &sr, NULL);
    EXPECT(cr.hs == 0 && cr.resumed && sr.resumed, "resume, LOCALHOST: %d %d %d", cr.hs, cr.resumed,
           sr.resumed);

    /* the caller's hold dropped right after set_session */
    {
        aco_rt_tls_session_t* s3 = NULL;
        bb_pair(cl, "localhost", s1, NULL, &cr, &sr, &s3);
        CHECK(s3 != NULL);
        int sv[2];
        CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
        aco_rt_co_t* sco = bb_spawn_server(s1, sv[1], &sr);
        aco_rt_tls_t* t = aco_rt_tls_new(cl, sv[0], "localhost");
        EXPECT_EQ(aco_rt_tls_set_session(t, s3), 0);
        aco_rt_tls_session_free(s3);
        EXPECT_EQ(aco_rt_tls_handshake(t, DL(5000)), 0);
        EXPECT(aco_rt_tls_resumed(t), "not resumed after the session's own hold was dropped");
        /* set_session after the handshake: -EINVAL */
        EXPECT_EQ(aco_rt_tls_set_session(t, s), -EINVAL);
        EXPECT_EQ(aco_rt_tls_shutdown(t, DL(5000)), 0);
        aco_rt_tls_free(t);
        aco_rt_close(sv[0]);
        CHECK_EQ(aco_rt_join(sco, DL(10000)), 0);
    }

    /* another host's session: refused */
    {
        int sv[2];
        CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
        aco_rt_tls_t* t = aco_rt_tls_new(cl, sv[0], "a.test");
        EXPECT_EQ(aco_rt_tls_set_session(t, s), -EINVAL);
        aco_rt_tls_free(t);
        t = aco_rt_tls_new(cl, sv[0], "127.0.0.1");
        EXPECT_EQ(aco_rt_tls_set_session(t, s), -EINVAL);
        aco_rt_tls_free(t);
        /* set_session after the handshake began (cut short by its deadline) */
        t = aco_rt_tls_new(cl, sv[0], "localhost");
        EXPECT_EQ(aco_rt_tls_handshake(t, DL(50)), -ETIMEDOUT);
        EXPECT_EQ(aco_rt_tls_set_session(t, s), -EINVAL);
        aco_rt_tls_free(t);
        aco_rt_close(sv[0]);    /* it may lend (BB_TLS_LEND): aco_rt_close */
        aco_rt_close(sv[1]);
    }

    /* a context of another server (same certificate): a full handshake */
    bb_pair(cl, "localhost", s2, s, &cr, &sr, NULL);
    EXPECT(cr.hs == 0 && !cr.resumed && !sr.resumed, "other ctx: %d %d %d (%s / %s)", cr.hs,
           cr.resumed, sr.resumed, cr.err, sr.err);

    /* NO_TICKETS: no session, and no resumption of one from elsewhere */
    {
        aco_rt_tls_session_t* s4 = NULL;
        bb_pair(cl, "localhost", snt, NULL, &cr, &sr, &s4);
        EXPECT(cr.hs == 0 && cr.rd == 5, "NO_TICKETS: %d %zd", cr.hs, cr.rd);
        EXPECT(s4 == NULL, "NO_TICKETS server, TLS 1.3: a session came");
        if (s4) {
            bb_pair(cl, "localhost", snt, s4, &cr, &sr, NULL);
            EXPECT(cr.hs == 0 && !cr.resumed && !sr.resumed, "NO_TICKETS resumed: %d %d %d", cr.hs,
                   cr.resumed, sr.resumed);
            aco_rt_tls_session_free(s4);
        }
        bb_pair(cl, "localhost", snt, s, &cr, &sr, NULL);
        EXPECT(cr.hs == 0 && !cr.resumed && !sr.resumed, "NO_TICKETS, foreign ticket: %d %d %d",
               cr.hs, cr.resumed, sr.resumed);
    }

    /* another thread, same contexts */
    {
        g_sess = s;
        int ok = 0;
        pthread_t th;
        aco_rt_sem_init(&g_done, 0);
        CHECK(pthread_create(&th, NULL, other_thread, &ok) == 0);
        CHECK_EQ(aco_rt_sem_wait(&g_done, DL(10000)), 0);
        CHECK(pthread_join(th, NULL) == 0);
        EXPECT(ok, "another thread's connection did not resume");
    }

    /* TLS 1.2: our client against a server of plain OpenSSL */
    {
        SSL_CTX* rc = bb_raw_ctx(1, TLS1_2_VERSION, BB_SRV_PEM, BB_SRV_KEY);
        aco_rt_tls_session_t* s12 = NULL;
        for (int round = 0; round < 2; round++) {
            bb_raw_t r = {.server = 1, .share_ctx = rc, .fn = raw_echo};
            int fd = bb_raw_pair(&r);
            aco_rt_tls_t* t = aco_rt_tls_new(cl, fd, "localhost");
            if (s12) EXPECT_EQ(aco_rt_tls_set_session(t, s12), 0);
            int hs = aco_rt_tls_handshake(t, DL(5000));
            EXPECT_EQ(hs, 0);
            if (hs == 0) {
                EXPECT_STR(aco_rt_tls_version(t), "TLSv1.2");
                EXPECT_EQ(aco_rt_tls_resumed(t), round);
                if (round == 0) {
                    s12 = aco_rt_tls_session(t);
                    EXPECT(s12 != NULL, "TLS 1.2: no session after the handshake");
                }
                char b[8];
                EXPECT_EQ(aco_rt_tls_write(t, "ping\n", 5, DL(5000)), 5);
                EXPECT_EQ(aco_rt_tls_read(t, b, sizeof b, DL(5000)), 5);
                EXPECT_EQ(aco_rt_tls_shutdown(t, DL(5000)), 0);
                EXPECT_EQ(aco_rt_tls_read(t, b, sizeof b, DL(5000)), 0);
            }
            aco_rt_tls_free(t);
            aco_rt_close(fd);
            bb_raw_join(&r);
            EXPECT_EQ(r.reused, round);
            if (s12 == NULL) break;
        }
        aco_rt_tls_session_free(s12);
        SSL_CTX_free(rc);
    }

    /* TLS 1.2: our server against a client of plain OpenSSL, by ticket and
     * by session id (SSL_OP_NO_TICKET on the client) */
    for (int by_id = 0; by_id < 2; by_id++)
        for (int nt = 0; nt < 2; nt++) {
            aco_rt_tls_ctx_t* sc = nt ? snt : s1;
            SSL_CTX* rc = bb_raw_ctx(0, TLS1_2_VERSION, NULL, NULL);
            if (by_id) SSL_CTX_set_options(rc, SSL_OP_NO_TICKET);
            SSL_SESSION* rs = NULL;
            for (int round = 0; round < 2; round++) {
                bb_raw_t r = {.server = 0, .share_ctx = rc, .fn = raw_ping, .host = "localhost", .sess = rs};
                int fd = bb_raw_pair(&r);
                aco_rt_tls_t* t = aco_rt_tls_new(sc, fd, NULL);
                int hs = aco_rt_tls_handshake(t, DL(5000));
                EXPECT_EQ(hs, 0);
                int want = round == 1 && !nt;
                if (hs == 0) {
                    EXPECT(aco_rt_tls_resumed(t) == want, "TLS 1.2 server, %s, %s, round %d: resumed %d",
                           by_id ? "by id" : "by ticket", nt ? "NO_TICKETS" : "tickets", round,
                           aco_rt_tls_resumed(t));
                    char b[8];
                    EXPECT_EQ(aco_rt_tls_read(t, b, sizeof b, DL(5000)), 5);
                    EXPECT_EQ(aco_rt_tls_write(t, b, 5, DL(5000)), 5);
                    EXPECT_EQ(aco_rt_tls_read(t, b, sizeof b, DL(5000)), 0);
                    EXPECT_EQ(aco_rt_tls_shutdown(t, DL(5000)), 0);
                }
                aco_rt_tls_free(t);
                aco_rt_close(fd);
                bb_raw_join(&r);
                EXPECT(r.reused == want, "TLS 1.2 raw client, %s, %s, round %d: reused %d",
                       by_id ? "by id" : "by ticket", nt ? "NO_TICKETS" : "tickets", round, r.reused);
                rs = r.sess;
            }
            SSL_SESSION_free(rs);
            SSL_CTX_free(rc);
        }

    aco_rt_tls_session_free(s);
}

int main(void) {
    bb_files();
    cl = bb_client();
    s1 = bb_server(BB_SRV_PEM, BB_SRV_KEY);
    s2 = bb_server(BB_SRV_PEM, BB_SRV_KEY);
    aco_rt_tls_opts_t o = {.server = 1, .cert_pem = BB_SRV_PEM, .key_pem = BB_SRV_KEY,
                           .flags = ACO_RT_TLS_NO_TICKETS};
    snt = bb_ctx(o);
    bb_on_backends(body, NULL);
    aco_rt_tls_ctx_free(cl);
    aco_rt_tls_ctx_free(s1);
    aco_rt_tls_ctx_free(s2);
    aco_rt_tls_ctx_free(snt);
    return bb_end("test_tls_bb_resume");
}
