/* aco_rt_tls.h - TLS for the runtime's cos, over OpenSSL 3: a library of
 * its own (libaco_rt_tls; pkg-config libaco_rt_tls, CMake aco::tls), so
 * that programs without TLS do not link OpenSSL.
 *
 * A context (aco_rt_tls_ctx_t: certificate, key, trust, ALPN; a server's
 * or a client's) makes connections (aco_rt_tls_t) over connected stream
 * sockets that stay the caller's.  Every call that waits takes a deadline
 * (aco_rt_now's clock, -1: none) and returns -errno as the runtime's calls
 * do; every error and its OpenSSL reason are the connection's own.
 *
 * How OpenSSL meets the runtime.  A BIO of ours moves the bytes: one
 * recv(2) or send(2) with MSG_DONTWAIT (and MSG_NOSIGNAL: never SIGPIPE;
 * MSG_MORE on each record of a write but its last, so that TCP sends
 * them in large segments), made past the syscall hooks, never changing
 * the socket's O_NONBLOCK.
 * When OpenSSL wants to read or write more, its call returns, and the co
 * waits for the socket outside OpenSSL (aco_rt_wait, with the call's
 * deadline and cancel).  So no co switch ever happens inside these calls'
 * OpenSSL: the thread's OpenSSL error queue, which its cos share, is
 * emptied before each OpenSSL call and read right after it, before any
 * other co runs, so no call here reads another co's error; no OpenSSL lock
 * is held across a switch.  (Another library on the same thread whose own
 * OpenSSL calls park its co inside OpenSSL, through the syscall hooks,
 * would see its queue emptied by ours meanwhile: keep such a library and
 * these calls on different threads.)  The socket must not be one that
 * lends (aco_rt_recv_lend): the BIO reads the socket itself, unless the
 * context says ACO_RT_TLS_LEND (below): then the BIO reads what lends
 * brought, and the connection alone lends on the socket.  (OpenSSL's own socket BIO would let kernel TLS take over the
 * records later; this machine's kernel has none to test: docs/runtime.md,
 * "TLS", says what it would take.)
 *
 * The share-stack rule holds by construction: OpenSSL's buffers and
 * state, and the BIO's, are in the heap; the kernel reads and writes them
 * only during the send and recv calls, made while the co runs; a buffer
 * the caller hands in (which may lie on a share stack) is read or written
 * only inside the call.  OpenSSL's configuration, certificate and key
 * files are read with the syscall hooks paused (aco_rt_hooks_pause: a slow
 * disk blocks the thread there: at aco_rt_tls_ctx_new, and with ca_dir
 * each time a verification looks a certificate up there).
 *
 * Threads.  A context may be used by every thread at once (OpenSSL's
 * SSL_CTX is).  A connection belongs to one thread's cos: one co may read
 * while another writes (a full-duplex copy, as aco_nc --tls makes: no
 * OpenSSL call spans a switch, so their calls interleave whole), but not
 * two readers or two writers at once, nor cos of two threads.
 *
 * Errors of the calls below (each lists its own besides):
 *   -ETIMEDOUT   the deadline passed (see each call for what became of it);
 *   -ECANCELED   the co was cancelled (aco_rt_cancel), likewise;
 *   -EPERM       not in a co of a running scheduler;
 *   -EPROTO      the peer broke the protocol, sent an alert, offered only
 *                what the context refuses (a version, a cipher, a
 *                renegotiation), or OpenSSL failed: aco_rt_tls_error says
 *                why; the connection is done for;
 *   -EKEYREJECTED  the peer's certificate failed verification (expired,
 *                unknown issuer, wrong host name: aco_rt_tls_error and
 *                aco_rt_tls_verify_result say which); done for;
 *   -ECONNRESET  the peer reset the connection, or its stream ended
 *                without close_notify where more was due (a truncation:
 *                the bytes read before it were the peer's, but perhaps not
 *                all it meant to send); done for;
 *   -EPIPE       writing to a peer that reset or closed its socket: the
 *                writing side is done for (every later write and shutdown
 *                gets it), reads go on with what came; a write after our
 *                own aco_rt_tls_shutdown gets it too;
 *   -ENOMEM      no memory (OpenSSL's or ours); done for;
 *   -EBADF       the socket was closed (aco_rt_close); any error of
 *                aco_rt_wait for the socket;
 *   -EINVAL      t NULL (before anything else; then aco_rt_tls_fd says
 *                -EINVAL, aco_rt_tls_error a reason, verify_result
 *                X509_V_ERR_UNSPECIFIED, the other getters NULL or 0);
 *   -EFAULT      buf NULL with n > 0, or an iov (or a piece) NULL with a
 *                non-zero length.
 * After "done for", every later call on the connection but free returns
 * the same error at once (a -ECONNRESET or -EPIPE met by a write ends
 * only the writing side, as said).
 */
#ifndef ACO_RT_TLS_H
#define ACO_RT_TLS_H

#include "aco_rt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ======================================================================== */
/* Contexts                                                                 */
/* ======================================================================== */

typedef struct aco_rt_tls_ctx aco_rt_tls_ctx_t;
typedef struct aco_rt_tls aco_rt_tls_t;
typedef struct aco_rt_tls_session aco_rt_tls_session_t;

/* Options of aco_rt_tls_ctx_new: all zero is a client that verifies
 * servers against the system's trust store, TLS 1.2 and 1.3. */
typedef struct aco_rt_tls_opts {
    int server;                 /* non-zero: a server's context */
    /* The context's certificate chain and private key (PEM): a server needs
     * them, a client sends them when a server asks (both or neither).  Both
     * from files, or both from memory (NUL-terminated PEM text: cert_pem
     * and key_pem, the *_file fields NULL).  An encrypted key is refused
     * (EPROTO: no passphrase is asked for). */
    const char* cert_file;
    const char* key_file;
    const char* cert_pem;
    const char* key_pem;
    /* Whom to trust (PEM): a file of certificates and/or a hashed directory
     * (c_rehash); both NULL: the system's store (OpenSSL's default file,
     * $SSL_CERT_FILE if set, on Debian /etc/ssl/certs/ca-certificates.crt,
     * read once, here).  Read only where trust is used: a client that
     * verifies, a server with ACO_RT_TLS_VERIFY_CLIENT (others ignore
     * them).  A directory's certificates are read as verification needs
     * them, with the hooks paused (see above). */
    const char* ca_file;
    const char* ca_dir;
    /* ALPN, the protocols in order of preference, comma-separated
     * ("h2,http/1.1"); NULL: none.  A server picks the first of its list
     * that the client offers; a client that offered some and got none
     * back, or one not offered, fails its handshake (-EPROTO; the server
     * is told nothing but the connection's end).  A server
     * whose client offers only protocols it does not know fails too
     * (no_application_protocol alert); one whose client offers none goes
     * on without. */
    const char* alpn;
    /* The oldest version accepted: 0 or ACO_RT_TLS_1_2 (TLS 1.2), or
     * ACO_RT_TLS_1_3.  Older versions are always refused. */
    int min_version;
    /* OpenSSL's cipher strings: ciphers for TLS 1.2
     * (SSL_CTX_set_cipher_list), suites for TLS 1.3
     * (SSL_CTX_set_ciphersuites); NULL: OpenSSL's defaults. */
    const char* ciphers;
    const char* suites;
    unsigned flags;             /* ACO_RT_TLS_* below, or-ed */
} aco_rt_tls_opts_t;

#define ACO_RT_TLS_1_2 0x0303
#define ACO_RT_TLS_1_3 0x0304

/* A client: do not verify the server's certificate or name (tests only:
 * anyone in the path can then read and change the traffic). */
#define ACO_RT_TLS_NO_VERIFY     0x1u
/* A server: ask each client for a certificate and verify it against
 * ca_file / ca_dir (the system's store if both are NULL).  A client
 * without one fails: the server's handshake returns -EPROTO (one that
 * fails verification: -EKEYREJECTED); with TLS 1.3 the client's own
 * handshake has ended by then, and the server's alert comes to its first
 * read (-EPROTO). */
#define ACO_RT_TLS_VERIFY_CLIENT 0x2u
/* A server: no resumption (no session tickets, no session cache).  By
 * default a server issues tickets (TLS 1.3: two after each full
 * handshake; TLS 1.2: one), sealed with keys of its context, random per
 * context: a ticket resumes with the context (of any thread) that issued
 * it; and a TLS 1.2 client may resume by session id from the context's
 * cache (OpenSSL's, up to 20480 sessions, shared by its threads). */
#define ACO_RT_TLS_NO_TICKETS    0x4u
/* Connections read their sockets through lent receives (aco_rt.h,
 * aco_rt_recv_lend) where the scheduler of the co that first waits on one
 * runs io_uring; elsewhere (epoll) the flag changes nothing.  The kernel
 * then receives into the scheduler's buffer ring while the co does
 * something else: a read or a wait for input takes no system call of its
 * own (a plain connection makes a recv(2) that says EAGAIN and a wait
 * for readiness, then the recv(2) of the bytes; on a kernel without
 * buffer rings, before 6.0, a lend is itself one receive into a heap
 * buffer, and the flag gains nothing).  The cost: the bytes are
 * copied once more, from the lent buffer into OpenSSL's, and a buffer of
 * the ring (16 KiB; 128 per scheduler, then buffers from the heap) is
 * held while part of it waits for OpenSSL (aco_rt_tls_pending: an idle
 * connection waiting in aco_rt_tls_wait holds none).  The socket lends:
 * aco_rt_recv_lend's rules hold for it (close it with aco_rt_close, after
 * aco_rt_tls_free; its input is its scheduler's; the program's own
 * recv(2) on it would miss bytes).  aco_http --tls-cert sets it. */
#define ACO_RT_TLS_LEND          0x100u

/* A context from o: NULL with errno set and, when err is not NULL, a line
 * of at most errlen bytes (NUL-terminated) saying why: EINVAL (o NULL,
 * a server without certificate or key, a certificate without key or the
 * other way round, one from a file and the other from memory, an unknown
 * flag or version, an ALPN list with an empty or over-255-byte name), ENOENT or EACCES (a file),
 * EMFILE or ENFILE (no descriptor left to read a file with), EPROTO (OpenSSL
 * refused a certificate, key, cipher string or trust store: a key that
 * does not match its certificate, PEM it cannot read), ENOMEM.  Renegotiation
 * is off (refused with an alert).  From any thread, in a co or not;
 * reads its files with the hooks paused. */
aco_rt_tls_ctx_t* aco_rt_tls_ctx_new(const aco_rt_tls_opts_t* o, char* err, size_t errlen);

/* Drop the caller's hold on ctx: it lives on while connections made from
 * it do.  NULL does nothing. */
void aco_rt_tls_ctx_free(aco_rt_tls_ctx_t* ctx);

/* A server context answers a client that asks for host (SNI) with the
 * certificate chain and key of for_host (a server context too); everything
 * else (ALPN, versions, verification, tickets) stays ctx's: 0, -EINVAL
 * (not both servers, for_host is ctx itself, host NULL, empty or longer
 * than 255 bytes), -EEXIST (host already added), -ENOMEM.  Names are
 * compared without regard to case; "*.example.com" matches one label in
 * its place; the first host added that matches answers.  ctx holds
 * for_host until it is freed.  Add them before the first connection; not
 * while connections handshake. */
int aco_rt_tls_ctx_add_host(aco_rt_tls_ctx_t* ctx, const char* host, aco_rt_tls_ctx_t* for_host);

/* ======================================================================== */
/* Connections                                                              */
/* ======================================================================== */

/* A connection over the connected stream socket fd (which stays the
 * caller's: close it after aco_rt_tls_free).  A client names the server
 * host it expects (SNI, and the name its certificate must carry; an IP
 * address is checked as one and not sent as SNI); host may be NULL only
 * with ACO_RT_TLS_NO_VERIFY; a server passes NULL.  Nothing is sent until
 * the handshake.  NULL with errno EINVAL (ctx NULL, fd < 0, host as said),
 * ENOMEM.  From any thread. */
aco_rt_tls_t* aco_rt_tls_new(aco_rt_tls_ctx_t* ctx, int fd, const char* host);

/* Free t (OpenSSL's state, buffered bytes); sends nothing (call
 * aco_rt_tls_shutdown first for a clean end) and never closes fd.  NULL
 * does nothing. */
void aco_rt_tls_free(aco_rt_tls_t* t);

/* The handshake: 0 once it is complete (a second call: 0 at once).  A
 * read or write first does it too.  -ETIMEDOUT or -ECANCELED leave it half
 * done: call again to go on (a server usually closes the connection: a
 * client that trickles its hello is ended so), and every error of the
 * list above. */
int aco_rt_tls_handshake(aco_rt_tls_t* t, int64_t deadline);

/* Up to n decrypted bytes into buf: the count (>= 1; at most one record's
 * worth, 16 KiB), 0 once the peer's close_notify came (and at n == 0), or
 * -errno.  -ETIMEDOUT and -ECANCELED consume nothing: call again.  A
 * stream that ended without close_notify is -ECONNRESET (a truncation).
 * OpenSSL reads ahead: whole records may wait inside t while the socket
 * has nothing (aco_rt_tls_pending); read, do not wait for the socket. */
ssize_t aco_rt_tls_read(aco_rt_tls_t* t, void* buf, size_t n, int64_t deadline);

/* All n bytes of buf, encrypted and sent (records of at most 16 KiB): n,
 * or, when an error or the deadline came after part of buf was taken, the
 * count taken; -errno when none was.  A write cut short by the deadline or
 * a cancel while the socket was full may leave one record (at most 16 KiB
 * of what it counted as taken) half sent: t keeps its bytes, and the next
 * write, writev or shutdown sends them first, before anything new (free
 * drops them, as a bufio's free drops unflushed bytes).  So the caller
 * goes on from the count, as after a short write to a socket.  -EINVAL:
 * n over SSIZE_MAX. */
ssize_t aco_rt_tls_write(aco_rt_tls_t* t, const void* buf, size_t n, int64_t deadline);

/* The bytes of iov[0..iovcnt) in order, as aco_rt_tls_write would write
 * them one after the other (small pieces are gathered into one record):
 * the count, as there.  -EINVAL: iovcnt < 0 or over IOV_MAX, or a total
 * over SSIZE_MAX. */
ssize_t aco_rt_tls_writev(aco_rt_tls_t* t, const struct iovec* iov, int iovcnt, int64_t deadline);

/* Send close_notify (once; again: 0 at once), without waiting for the
 * peer's, after a record a write left half sent: 0, or -errno (the
 * connection or its writing side was done for, or the deadline came while
 * the alert or that record was stuck in the socket's buffer: call again).
 * Before the handshake completed there is nothing to end: 0, nothing
 * sent.  After it, writes return -EPIPE; reads go on until the peer's
 * close_notify (0). */
int aco_rt_tls_shutdown(aco_rt_tls_t* t, int64_t deadline);

/* The socket under t. */
int aco_rt_tls_fd(const aco_rt_tls_t* t);

/* Why the last failed call on t failed: OpenSSL's reason ("certificate
 * verify failed: certificate has expired", "unsupported protocol",
 * "wrong version number", ...), or the errno's text; "" when no call
 * failed.  Valid until the next call on t. */
const char* aco_rt_tls_error(const aco_rt_tls_t* t);

/* The outcome of the peer certificate's verification (OpenSSL's X509_V_*
 * code, 0: X509_V_OK, also when nothing was verified: ACO_RT_TLS_NO_VERIFY,
 * a server without ACO_RT_TLS_VERIFY_CLIENT). */
long aco_rt_tls_verify_result(const aco_rt_tls_t* t);

/* After the handshake: the protocol ALPN chose (NULL: none); valid while
 * t lives. */
const char* aco_rt_tls_alpn(const aco_rt_tls_t* t);
/* The name the client asked for (SNI: a server's view; a client's own,
 * the host given to aco_rt_tls_new), NULL if none (an address, or none
 * given). */
const char* aco_rt_tls_host(const aco_rt_tls_t* t);
/* The version agreed ("TLSv1.3", "TLSv1.2"). */
const char* aco_rt_tls_version(const aco_rt_tls_t* t);
/* The cipher suite's name ("TLS_AES_128_GCM_SHA256"). */
const char* aco_rt_tls_cipher(const aco_rt_tls_t* t);
/* Non-zero if the handshake resumed a session (no certificate sent). */
int aco_rt_tls_resumed(const aco_rt_tls_t* t);
/* Non-zero if bytes wait inside t (read ahead from the socket, decrypted
 * or not; with ACO_RT_TLS_LEND, a lent buffer not yet read through): a
 * read may return at once though the socket is not readable.  Ask before
 * waiting for the socket (aco_rt_wait, aco_rt_poll) on t's behalf, or
 * wait with aco_rt_tls_wait. */
int aco_rt_tls_pending(const aco_rt_tls_t* t);

/* Wait until a read on t may not need to wait: a record's bytes inside
 * t (decrypted, or whole: OpenSSL looks, and a record it decrypts stays
 * for the read), the peer's close_notify came, or new bytes came to the
 * socket (bytes, its end, an error: the read says which).  Part of a
 * record inside t is not enough: the wait goes on until more bytes come
 * (they may still not finish the record: read with a deadline).  0, or
 * -ETIMEDOUT, -ECANCELED, -EPERM, and for a connection done for its
 * error; -EBADF and aco_rt_wait's others for the socket (then done for).
 * It holds no buffer of the caller's: an idle connection waits here with
 * its buffers given back.  Plainly it waits as aco_rt_wait(POLLIN) on the
 * socket; with ACO_RT_TLS_LEND on io_uring it waits for the next lend,
 * which it keeps in t (aco_rt_wait on a lending socket would ask the
 * kernel for a readiness the lends never see). */
int aco_rt_tls_wait(aco_rt_tls_t* t, int64_t deadline);

/* ======================================================================== */
/* Sessions: resumption, a client's side                                    */
/* ======================================================================== */

/* The session to resume later (a copy of its own: it outlives t), or
 * NULL (none yet: with TLS 1.3 the server's tickets come after the
 * handshake, with the first read that meets them; a server that issues
 * none).  The caller frees it.  A session may be offered by any later
 * connection of the same context made for the same host (the name or
 * address given to aco_rt_tls_new, in any case), in any thread: a
 * resumption checks no certificate, so another host's connection may not
 * offer it. */
aco_rt_tls_session_t* aco_rt_tls_session(aco_rt_tls_t* t);
/* Offer s in t's handshake (before it): 0, -EINVAL (t is a server's, or
 * its handshake began, or s is another host's), -ENOMEM.  t takes its own
 * hold on s. */
int aco_rt_tls_set_session(aco_rt_tls_t* t, aco_rt_tls_session_t* s);
/* Drop the caller's hold on s.  NULL does nothing. */
void aco_rt_tls_session_free(aco_rt_tls_session_t* s);

/* ======================================================================== */
/* Buffered I/O over TLS                                                    */
/* ======================================================================== */


/* A bufio over t (aco_rt.h, "Buffered I/O"): protocol code written for
 * the bufio calls runs over TLS unchanged.  Its reads and writes are
 * aco_rt_tls_read and aco_rt_tls_writev, with their errors (a write cut
 * short counts the record t keeps as sent, see aco_rt_tls_write);
 * aco_rt_bufio_fd says t's socket; aco_rt_bufio_buffered counts the
 * bufio's bytes, not those waiting inside t (aco_rt_tls_pending).  t stays
 * the caller's: free the bufio first.  NULL with errno EINVAL or ENOMEM. */
aco_rt_bufio_t* aco_rt_tls_bufio_new(aco_rt_tls_t* t, size_t rsize, size_t wsize);

#ifdef __cplusplus
}
#endif

#endif
