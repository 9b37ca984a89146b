/* test_contract.c - small promises of aco_rt.h that were once broken:
 *   - every negative deadline but -1 is a time in the past: a blocking call
 *     with -2, -1000 or INT64_MIN that would have to wait returns at once
 *     (-ETIMEDOUT; aco_rt_sleep_until: 0), for each kind of wait, and
 *     aco_rt_pool_wait too;
 *   - a read, readv, write or writev of no bytes returns at once, takes
 *     nothing, on stream and datagram sockets, TCP and pipes, empty or full
 *     (it once waited for its deadline): 0, but write(2)'s -EPIPE for a
 *     write of none to a socket shut for writing (writev(2) says 0);
 *   - aco_rt_getspecific after aco_rt_key_delete is NULL, in a co and
 *     outside cos;
 *   - a pthread object that init refused (on a share stack, bad attribute
 *     or count) fails every later call with EINVAL, and the first call
 *     says so on stderr once, naming the object and init's caller (it once
 *     locked, waited and signalled as if it worked);
 *   - a program's own constructor may run cos: a deadline in one works
 *     (the runtime's wait kinds are registered before it);
 *   - a descriptor number past 2^24 gets -ENOMEM from every I/O call that
 *     keeps a record of it, open or not (wait, accept, connect, sendmsg
 *     and recvmsg once said poll(2)'s or fcntl(2)'s -EBADF), -EBADF from
 *     close and shutdown, POLLNVAL from poll;
 *   - aco_rt_dump says "for good" of a co in aco_rt_sleep_until(-1) (it
 *     once printed a deadline 292 years away), which counts among timers;
 *   - standard input read in a co keeps its flags (a pipe, a terminal:
 *     stdio and children share the file); made O_NONBLOCK by a splice,
 *     it is blocking again after the program exits (it once stayed so
 *     for the next reader: `prog; cat` saw EAGAIN); one the program's
 *     parent made O_NONBLOCK stays so; both backends, in a child;
 *   - cos of the pthread-like face destroyed unfinished by
 *     aco_rt_sched_free free their records (the ASan target's leak check
 *     fails otherwise); joinable ones that ended and were never joined too.
 * Both backends.
 */
#define _GNU_SOURCE
#include "rt_test.h"
#include "../aco_rt_pthread.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>

static const int64_t past[] = {-2, -1000, INT64_MIN, 0};
#define NPAST ((int)(sizeof(past) / sizeof(past[0])))

static aco_rt_mutex_t mu;
static aco_rt_cond_t cv;
static aco_rt_sem_t sem;
static aco_rt_wg_t wg;
static aco_rt_chan_t* ch;
static int sv[2];
static int lfd;

/* The holder keeps the mutex, and the blocker lives, until the deadlines
 * are done (released, not a sleep: a slow machine would outlast a sleep). */
static aco_rt_sem_t released;
static void holder(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_mutex_lock(&mu, -1), 0);
    CHECK_EQ(aco_rt_sem_wait(&released, -1), 0);
    CHECK_EQ(aco_rt_mutex_unlock(&mu), 0);
}

static void blocker(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_sem_wait(&released, -1), 0);
}

static void past_co(void* arg) {
    (void)arg;
    char buf[8];
    aco_rt_co_t* h = aco_rt_spawn(NULL, holder, NULL);
    aco_rt_co_t* b = aco_rt_spawn(NULL, blocker, NULL);
    CHECK(h != NULL && b != NULL);
    aco_rt_yield();                     /* the holder has the mutex */
    for (int i = 0; i < NPAST; i++) {
        int64_t d = past[i], t0 = aco_rt_now();
        CHECK_EQ(aco_rt_read(sv[0], buf, sizeof(buf), d), -ETIMEDOUT);
        CHECK_EQ(aco_rt_recv(sv[0], buf, sizeof(buf), 0, d), -ETIMEDOUT);
        CHECK_EQ(aco_rt_wait(sv[0], POLLIN, d), -ETIMEDOUT);
        CHECK_EQ(aco_rt_accept(lfd, NULL, NULL, 0, d), -ETIMEDOUT);
        CHECK_EQ(aco_rt_mutex_lock(&mu, d), -ETIMEDOUT);
        CHECK_EQ(aco_rt_sem_wait(&sem, d), -ETIMEDOUT);
        CHECK_EQ(aco_rt_wg_wait(&wg, d), -ETIMEDOUT);
        CHECK_EQ(aco_rt_chan_recv(ch, buf, d), -ETIMEDOUT);
        aco_rt_case_t c = {ch, ACO_RT_RECV, buf};
        CHECK_EQ(aco_rt_chan_select(&c, 1, NULL, d), -ETIMEDOUT);
        CHECK_EQ(aco_rt_join(b, d), -ETIMEDOUT);
        aco_rt_mutex_t m2 = {0};
        CHECK_EQ(aco_rt_mutex_lock(&m2, -1), 0);
        CHECK_EQ(aco_rt_cond_wait(&cv, &m2, d), -ETIMEDOUT);
        CHECK_EQ(aco_rt_mutex_unlock(&m2), 0);
        CHECK_EQ(aco_rt_sleep_until(d), 0);
        int64_t took = aco_rt_now() - t0;
        if (took > (SLOW ? 200 : 40) * MS)     /* memcheck on a busy machine: slower */
            TEST_FAIL_AT(__FILE__, __LINE__, "deadline %lld waited %lld ms", (long long)d,
                         (long long)(took / MS));
    }
    aco_rt_sem_post(&released);
    aco_rt_sem_post(&released);
    CHECK_EQ(aco_rt_join(h, -1), 0);
    CHECK_EQ(aco_rt_join(b, -1), 0);
}

static void past_body(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    aco_rt_mutex_init(&mu);
    aco_rt_cond_init(&cv);
    aco_rt_sem_init(&sem, 0);
    aco_rt_sem_init(&released, 0);
    aco_rt_wg_init(&wg);
    CHECK_EQ(aco_rt_wg_add(&wg, 1), 0);
    CHECK((ch = aco_rt_chan_new(8, 1)) != NULL);
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    CHECK((lfd = socket(AF_INET, SOCK_STREAM, 0)) >= 0);
    CHECK_EQ(listen(lfd, 4), 0);
    test_go(s, past_co, NULL);
    CHECK_EQ(aco_rt_chan_free(ch), 0);
    close(sv[0]);
    close(sv[1]);
    close(lfd);
}

static void forever(void* arg) {
    (void)arg;
    aco_rt_sleep(-1);
    aco_rt_sleep_until(-1);
}

static void pool_past(void) {
    aco_rt_pool_opts_t po = {0};
    po.threads = 1;
    aco_rt_pool_t* p = aco_rt_pool_new(&po);
    CHECK(p != NULL);
    CHECK(aco_rt_pool_spawn(p, forever, NULL, NULL) != NULL);
    for (int i = 0; i < NPAST; i++) {
        int64_t t0 = aco_rt_now();
        CHECK_EQ(aco_rt_pool_wait(p, ACO_RT_POOL_DRAIN, past[i]), -ETIMEDOUT);
        CHECK_LT(aco_rt_now() - t0, 1000 * MS);
    }
    CHECK_EQ(aco_rt_pool_wait(p, ACO_RT_POOL_CANCEL, aco_rt_now() + 5000 * MS), 0);
    aco_rt_pool_free(p);
}

/* ------------------------------------------------------------------------ */
/* No bytes: a read, readv, write or writev of none returns 0 at once (not  */
/* at its deadline), consumes nothing, and says -EBADF of a closed number. */
/* ------------------------------------------------------------------------ */

static void fill_up(int fd) {
    static char junk[4096];
    int fl = fcntl(fd, F_GETFL);
    CHECK_EQ(fcntl(fd, F_SETFL, fl | O_NONBLOCK), 0);
    while (write(fd, junk, sizeof(junk)) > 0) {}
    CHECK(errno == EAGAIN);
    CHECK_EQ(fcntl(fd, F_SETFL, fl), 0);
}

static void tcp_pair(int sv[2]) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof(a);
    int l = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(l >= 0);
    CHECK_EQ(bind(l, (struct sockaddr*)&a, sizeof(a)), 0);
    CHECK_EQ(listen(l, 1), 0);
    CHECK_EQ(getsockname(l, (struct sockaddr*)&a, &al), 0);
    CHECK((sv[1] = socket(AF_INET, SOCK_STREAM, 0)) >= 0);
    CHECK_EQ(connect(sv[1], (struct sockaddr*)&a, sizeof(a)), 0);
    CHECK((sv[0] = accept(l, NULL, NULL)) >= 0);
    close(l);
}

static void zero_co(void* arg) {
    (void)arg;
    int64_t t0 = aco_rt_now(), far = t0 + 10000 * MS;
    char buf[16];
    struct iovec none[2] = {{buf, 0}, {buf + 1, 0}};
    int st[2], pp[2], tc[2], dg[2];
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, st), 0);
    CHECK_EQ(pipe(pp), 0);
    tcp_pair(tc);
    CHECK_EQ(socketpair(AF_UNIX, SOCK_DGRAM, 0, dg), 0);
    int rd[] = {st[0], pp[0], tc[0], dg[0]}, wr[] = {st[1], pp[1], tc[1]};
    for (int i = 0; i < 4; i++) {               /* nothing to read */
        CHECK_EQ(aco_rt_read(rd[i], buf, 0, far), 0);
        CHECK_EQ(aco_rt_read(rd[i], NULL, 0, far), 0);
        CHECK_EQ(aco_rt_readv(rd[i], none, 2, far), 0);
        CHECK_EQ(aco_rt_readv(rd[i], none, 0, far), 0);
    }
    for (int i = 0; i < 3; i++) {               /* bytes there: none taken */
        CHECK_EQ(aco_rt_write(wr[i], "hi", 2, far), 2);
        CHECK_EQ(aco_rt_read(rd[i], buf, 0, far), 0);
        CHECK_EQ(aco_rt_readv(rd[i], none, 2, far), 0);
        CHECK_EQ(aco_rt_read(rd[i], buf, sizeof(buf), far), 2);
    }
    CHECK_EQ(aco_rt_write(dg[1], "x", 1, far), 1);  /* a datagram stays queued */
    CHECK_EQ(aco_rt_read(dg[0], buf, 0, far), 0);
    CHECK_EQ(aco_rt_readv(dg[0], none, 2, far), 0);
    CHECK_EQ(aco_rt_read(dg[0], buf, sizeof(buf), far), 1);
    for (int i = 0; i < 3; i++) {               /* no room to write */
        fill_up(wr[i]);
        CHECK_EQ(aco_rt_write(wr[i], buf, 0, far), 0);
        CHECK_EQ(aco_rt_writev(wr[i], none, 2, far), 0);
        CHECK_EQ(aco_rt_writev(wr[i], none, 0, far), 0);
    }
    /* writev of none is writev(2)'s 0, whatever the socket says; write of
     * none is write(2)'s: -EPIPE once shut for writing */
    CHECK_EQ(shutdown(st[1], SHUT_WR), 0);
    CHECK_EQ(aco_rt_writev(st[1], none, 2, far), 0);
    CHECK_EQ(aco_rt_write(st[1], buf, 0, far), -EPIPE);
    CHECK_EQ(aco_rt_writev(dg[1], none, 2, far), 0);     /* no datagram sent */
    CHECK_EQ(aco_rt_read(dg[0], buf, sizeof(buf), 0), -ETIMEDOUT);
    int gone = dup(st[0]);
    close(gone);
    CHECK_EQ(aco_rt_read(gone, buf, 0, far), -EBADF);
    CHECK_EQ(aco_rt_readv(gone, none, 2, far), -EBADF);
    CHECK_EQ(aco_rt_write(gone, buf, 0, far), -EBADF);
    CHECK_EQ(aco_rt_writev(gone, none, 2, far), -EBADF);
    CHECK_LT(aco_rt_now() - t0, 5000 * MS);     /* the waits would take 10 s each */
    int all[] = {st[0], st[1], pp[0], pp[1], tc[0], tc[1], dg[0], dg[1]};
    for (int i = 0; i < 8; i++) close(all[i]);
}

static void zero_body(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    test_go(s, zero_co, NULL);
}

/* ------------------------------------------------------------------------ */

static void stopper(void* arg);

static void big_co(void* arg) {
    (void)arg;
    int fd = 1 << 25;
    char sb[4];
    struct msghdr m;
    memset(&m, 0, sizeof(m));
    m.msg_iovlen = 1;
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons(1);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const char* d;
    static char hb[4];          /* (not on the share stack: io_uring's way) */
    for (int k = 0; k < 4; k++) {
        int64_t dl = k & 1 ? aco_rt_in_ms(50) : 0;
        char* b = k & 2 ? hb : sb;
        struct iovec v = {b, 1};
        m.msg_iov = &v;
        CHECK_EQ(aco_rt_read(fd, b, 1, dl), -ENOMEM);
        CHECK_EQ(aco_rt_write(fd, b, 1, dl), -ENOMEM);
        CHECK_EQ(aco_rt_recv(fd, b, 1, 0, dl), -ENOMEM);
        CHECK_EQ(aco_rt_send(fd, b, 1, 0, dl), -ENOMEM);
        CHECK_EQ(aco_rt_readv(fd, &v, 1, dl), -ENOMEM);
        CHECK_EQ(aco_rt_writev(fd, &v, 1, dl), -ENOMEM);
        CHECK_EQ(aco_rt_accept(fd, NULL, NULL, 0, dl), -ENOMEM);
        CHECK_EQ(aco_rt_connect(fd, (struct sockaddr*)&sa, sizeof(sa), dl), -ENOMEM);
        CHECK_EQ(aco_rt_wait(fd, POLLIN, dl), -ENOMEM);
        CHECK_EQ(aco_rt_wait(fd, POLLIN | ACO_RT_WAIT_AFTER_EAGAIN, dl), -ENOMEM);
        CHECK_EQ(aco_rt_sendmsg(fd, &m, 0, dl), -ENOMEM);
        CHECK_EQ(aco_rt_recvmsg(fd, &m, 0, dl), -ENOMEM);
        CHECK_EQ(aco_rt_recv_lend(fd, &d, dl), -ENOMEM);
        CHECK_EQ(aco_rt_shutdown(fd, SHUT_WR, dl), -EBADF);
        struct pollfd p = {fd, POLLIN, 0};
        CHECK_EQ(aco_rt_poll(&p, 1, dl), 1);
        CHECK_EQ(p.revents, POLLNVAL);
    }
    CHECK_EQ(aco_rt_close(fd), -EBADF);
}

static void for_good(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_sleep_until(-1), -ECANCELED);
}

static void big_body(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    test_go(s, big_co, NULL);
    /* a co asleep for good: a timer, and "for good" in the dump */
    aco_rt_co_t* co = aco_rt_spawn(s, for_good, NULL);
    CHECK(co != NULL);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, stopper, s)), 0);
    CHECK_EQ(aco_rt_sched_run(s), 0);
    aco_rt_stats_t st;
    aco_rt_stats(s, &st);
    CHECK_EQ(st.timers, 1);
    CHECK_EQ(st.cos_parked, 1);
    char path[] = "/tmp/test_contract_dumpXXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    unlink(path);
    aco_rt_dump(s, fd);
    char text[4096];
    ssize_t n = pread(fd, text, sizeof(text) - 1, 0);
    CHECK(n > 0);
    text[n] = 0;
    close(fd);
    if (strstr(text, "sleep") == NULL || strstr(text, "for good") == NULL ||
        strstr(text, "deadline in") != NULL)
        TEST_FAIL_AT(__FILE__, __LINE__, "the dump of a co asleep for good:\n%s", text);
    CHECK_EQ(aco_rt_cancel(co), 0);
    CHECK_EQ(aco_rt_sched_run(s), 0);      /* (it ends: never to be joined) */
}

/* ------------------------------------------------------------------------ */

static void stdin_reader(void* arg) {
    char c;
    if (arg) {                          /* (splice: the way that sets the flag) */
        int out = open("/dev/null", O_WRONLY);
        CHECK_GE(out, 0);
        CHECK_EQ(aco_rt_splice(0, NULL, out, NULL, 1, 0, -1), 1);
        CHECK_EQ(aco_rt_close(out), 0);
        return;
    }
    CHECK_EQ(aco_rt_read(0, &c, 1, -1), 1);
    CHECK_EQ(c, 'x');
}

/* A child whose standard input is a pipe or a terminal (nb: made
 * O_NONBLOCK first, as a parent may) reads it in a co and exits: the
 * file's O_NONBLOCK after.  During the run a read leaves the file's flags
 * as the parent made them (O_NONBLOCK on the open file would be seen by
 * all who share it: stdio, a child's stdin): a pipe's tries take
 * RWF_NOWAIT, a terminal's get the flag for the call alone.  A splice
 * from a pipe sets it (no per-call flag there: epoll's way, io_uring's
 * needs none), and the program's exit takes it off. */
enum { BY_READ, BY_TTY, BY_SPLICE };
static int stdin_after_exit(int backend, int nb, int how) {
    int p[2];
    if (how == BY_TTY) {
        p[1] = posix_openpt(O_RDWR | O_NOCTTY);
        CHECK_GE(p[1], 0);
        CHECK_EQ(grantpt(p[1]), 0);
        CHECK_EQ(unlockpt(p[1]), 0);
        p[0] = open(ptsname(p[1]), O_RDWR | O_NOCTTY);
        CHECK_GE(p[0], 0);
    } else {
        CHECK_EQ(pipe(p), 0);
    }
    if (nb) CHECK_EQ(fcntl(p[0], F_SETFL, O_NONBLOCK), 0);
    CHECK_EQ(write(p[1], "x\n", 2), 2);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        if (dup2(p[0], 0) < 0) _exit(3);
        aco_rt_opts_t o = {.backend = backend};
        aco_rt_sched_t* s = aco_rt_sched_new(&o);
        if (s == NULL) _exit(4);
        void* arg = how == BY_SPLICE ? (void*)1 : NULL;
        CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, stdin_reader, arg)), 0);
        CHECK_EQ(aco_rt_sched_run(s), 0);
        int made = (fcntl(0, F_GETFL) & O_NONBLOCK) != 0;
        if (how == BY_SPLICE && backend == ACO_RT_BACKEND_EPOLL) exit(made ? 0 : 10);
        if (how != BY_SPLICE) exit(made == nb ? 0 : 11);
        exit(0);                /* (no sched_free: exit alone undoes it) */
    }
    int st;
    CHECK_EQ(waitpid(pid, &st, 0), pid);
    CHECK(WIFEXITED(st));
    CHECK_EQ(WEXITSTATUS(st), 0);
    int fl = fcntl(p[0], F_GETFL);
    close(p[0]);
    close(p[1]);
    return (fl & O_NONBLOCK) != 0;
}

static void stdin_nb(void) {
    int backends[8];
    int n = test_backends(backends, 8);
    for (int i = 0; i < n; i++)
        for (int how = BY_READ; how <= BY_SPLICE; how++) {
            CHECK_EQ(stdin_after_exit(backends[i], 0, how), 0);
            CHECK_EQ(stdin_after_exit(backends[i], 1, how), 1);
        }
}

/* ------------------------------------------------------------------------ */

static aco_rt_key_t key;
static int dummy;

static void key_co(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_setspecific(key, &dummy), 0);
    CHECK(aco_rt_getspecific(key) == &dummy);
    CHECK_EQ(aco_rt_key_delete(key), 0);
    CHECK(aco_rt_getspecific(key) == NULL);
    CHECK_EQ(aco_rt_setspecific(key, &dummy), -EINVAL);
    CHECK(aco_rt_getspecific(key) == NULL);
}

static void key_body(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    /* outside cos */
    CHECK_EQ(aco_rt_key_create(&key, NULL), 0);
    CHECK_EQ(aco_rt_setspecific(key, &dummy), 0);
    CHECK_EQ(aco_rt_key_delete(key), 0);
    CHECK(aco_rt_getspecific(key) == NULL);
    /* in a co */
    CHECK_EQ(aco_rt_key_create(&key, NULL), 0);
    test_go(s, key_co, NULL);
}

/* ------------------------------------------------------------------------ */

static void* pt_forever(void* arg) {
    (void)arg;
    aco_rt_sleep(-1);
    return NULL;
}

static void* pt_quick(void* arg) { return arg; }

static void stopper(void* arg) {
    for (int i = 0; i < 4; i++) aco_rt_yield();
    aco_rt_sched_stop((aco_rt_sched_t*)arg);
}

static void pt_body(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    aco_rt_pthread_attr_t a;
    aco_rt_pthread_attr_init(&a);
    aco_rt_pthread_t t;
    for (int i = 0; i < 8; i++) {
        aco_rt_pthread_attr_setdetachstate(&a, i & 1 ? ACO_RT_PTHREAD_CREATE_DETACHED
                                                     : ACO_RT_PTHREAD_CREATE_JOINABLE);
        CHECK_EQ(aco_rt_pthread_create(&t, &a, i < 4 ? pt_forever : pt_quick, NULL), 0);
    }
    /* run until only the sleepers are left, then stop */
    aco_rt_co_t* st = aco_rt_spawn(s, stopper, s);
    CHECK(st != NULL);
    CHECK_EQ(aco_rt_detach(st), 0);
    CHECK_EQ(aco_rt_sched_run(s), 0);
    /* aco_rt_sched_free (by test_on_backends) destroys them: no leak */
}

/* ------------------------------------------------------------------------ */
/* A refused pthread object stays refused: every call on it EINVAL, one     */
/* line on stderr per object naming the call, the object and init's caller. */
/* ------------------------------------------------------------------------ */

static char said[8192];

/* Run fn in a co of a child process's scheduler (this backend), its
 * stderr going to a file: what it wrote into said[].  A child that fails
 * fails the test, with what it said. */
static void (*capture_after)(void);     /* run outside any co, after fn */

static void capture_stderr(aco_rt_fn_t fn) {
    FILE* f = tmpfile();
    CHECK(f != NULL);
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        dup2(fileno(f), 2);
        aco_rt_sched_t* s = test_sched_on(test_backend_id, NULL);
        test_go(s, fn, NULL);
        if (capture_after) capture_after();
        aco_rt_sched_free(s);
        fflush(NULL);
        _exit(0);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0) CHECK(errno == EINTR);
    size_t n = (size_t)pread(fileno(f), said, sizeof(said) - 1, 0);
    said[n < sizeof(said) ? n : 0] = 0;
    fclose(f);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        TEST_FAIL_AT(__FILE__, __LINE__, "the child failed (status %#x); its stderr:\n%s", st,
                     said);
}

/* Lines of said[] that contain all of a, b and c. */
static int lines_with(const char* a, const char* b, const char* c) {
    int n = 0;
    for (char* p = said; *p;) {
        char* e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        char line[1024];
        snprintf(line, sizeof(line), "%.*s", (int)len, p);
        if (strstr(line, a) && strstr(line, b) && strstr(line, c)) n++;
        p += len + (e != NULL);
    }
    return n;
}

static int count_lines(void) {
    int n = 0;
    for (char* p = said; *p; p++) n += *p == '\n';
    return n;
}

static char (*addr)[32];    /* the refused objects' addresses, as %p says
                               (shared with the child that fills it) */

/* The objects lie on the co's share stack: alloca's memory is in the
 * frame (ASan's detect_stack_use_after_return moves plain locals off it,
 * to its fake stack). */
#define ON_STACK(T, name) T* name = memset(__builtin_alloca(sizeof(T)), 0, sizeof(T))

static void refused_co(void* arg) {
    (void)arg;
    static aco_rt_pthread_mutex_t ok = ACO_RT_PTHREAD_MUTEX_INITIALIZER;
    static aco_rt_pthread_cond_t okc = ACO_RT_PTHREAD_COND_INITIALIZER;
    /* zeroed: what a working object holds */
    ON_STACK(aco_rt_pthread_mutex_t, mp);
    ON_STACK(aco_rt_pthread_cond_t, cp);
    ON_STACK(aco_rt_pthread_rwlock_t, lp);
    ON_STACK(aco_rt_pthread_barrier_t, bp);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 10;
    CHECK_EQ(aco_rt_pthread_mutex_init(mp, NULL), EINVAL);
    CHECK_EQ(aco_rt_pthread_cond_init(cp, NULL), EINVAL);
    CHECK_EQ(aco_rt_pthread_rwlock_init(lp, NULL), EINVAL);
    CHECK_EQ(aco_rt_pthread_barrier_init(bp, NULL, 2), EINVAL);
    for (int round = 0; round < 2; round++) {
        CHECK_EQ(aco_rt_pthread_mutex_lock(mp), EINVAL);
        CHECK_EQ(aco_rt_pthread_mutex_trylock(mp), EINVAL);
        CHECK_EQ(aco_rt_pthread_mutex_timedlock(mp, &ts), EINVAL);
        CHECK_EQ(aco_rt_pthread_mutex_unlock(mp), EINVAL);
        CHECK_EQ(aco_rt_pthread_cond_signal(cp), EINVAL);
        CHECK_EQ(aco_rt_pthread_cond_broadcast(cp), EINVAL);
        CHECK_EQ(aco_rt_pthread_mutex_lock(&ok), 0);
        CHECK_EQ(aco_rt_pthread_cond_wait(cp, &ok), EINVAL);
        CHECK_EQ(aco_rt_pthread_cond_timedwait(cp, &ok, &ts), EINVAL);
        CHECK_EQ(aco_rt_pthread_cond_clockwait(cp, &ok, CLOCK_MONOTONIC, &ts), EINVAL);
        CHECK_EQ(aco_rt_pthread_cond_timedwait(&okc, &ok, NULL), EINVAL);   /* a bad abstime */
        CHECK_EQ(aco_rt_pthread_cond_wait(&okc, mp), EINVAL);   /* the mutex refused */
        CHECK_EQ(aco_rt_pthread_cond_timedwait(&okc, mp, &ts), EINVAL);
        CHECK_EQ(aco_rt_pthread_mutex_unlock(&ok), 0);
        CHECK_EQ(aco_rt_pthread_rwlock_rdlock(lp), EINVAL);
        CHECK_EQ(aco_rt_pthread_rwlock_wrlock(lp), EINVAL);
        CHECK_EQ(aco_rt_pthread_rwlock_tryrdlock(lp), EINVAL);
        CHECK_EQ(aco_rt_pthread_rwlock_timedwrlock(lp, &ts), EINVAL);
        CHECK_EQ(aco_rt_pthread_rwlock_unlock(lp), EINVAL);
        CHECK_EQ(aco_rt_pthread_barrier_wait(bp), EINVAL);
        CHECK_EQ(aco_rt_pthread_mutex_destroy(mp), EINVAL);
        CHECK_EQ(aco_rt_pthread_cond_destroy(cp), EINVAL);
        CHECK_EQ(aco_rt_pthread_rwlock_destroy(lp), EINVAL);
        CHECK_EQ(aco_rt_pthread_barrier_destroy(bp), EINVAL);
    }
    snprintf(addr[0], 32, "%p", (void*)mp);
    snprintf(addr[1], 32, "%p", (void*)cp);
    snprintf(addr[2], 32, "%p", (void*)lp);
    snprintf(addr[3], 32, "%p", (void*)bp);
}

/* Refused for a bad attribute or count: the same, and a later good init
 * makes a working object. */
static aco_rt_pthread_mutex_t bad_m;
static aco_rt_pthread_barrier_t bad_b;
static void bad_args_co(void* arg) {
    (void)arg;
    aco_rt_pthread_mutexattr_t a;
    memset(&a, 0, sizeof(a));
    a.type_ = 99;
    CHECK_EQ(aco_rt_pthread_mutex_init(&bad_m, &a), EINVAL);
    CHECK_EQ(aco_rt_pthread_mutex_lock(&bad_m), EINVAL);
    CHECK_EQ(aco_rt_pthread_mutex_lock(&bad_m), EINVAL);
    CHECK_EQ(aco_rt_pthread_barrier_init(&bad_b, NULL, 0), EINVAL);
    CHECK_EQ(aco_rt_pthread_barrier_wait(&bad_b), EINVAL);
    CHECK_EQ(aco_rt_pthread_mutex_init(&bad_m, NULL), 0);
    CHECK_EQ(aco_rt_pthread_mutex_lock(&bad_m), 0);
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&bad_m), 0);
    CHECK_EQ(aco_rt_pthread_mutex_destroy(&bad_m), 0);
    CHECK_EQ(aco_rt_pthread_barrier_init(&bad_b, NULL, 1), 0);
    CHECK_EQ(aco_rt_pthread_barrier_wait(&bad_b), ACO_RT_PTHREAD_BARRIER_SERIAL_THREAD);
    CHECK_EQ(aco_rt_pthread_barrier_destroy(&bad_b), 0);
}

/* Outside any co too: EINVAL (not EPERM) from a refused object. */
static aco_rt_pthread_mutex_t out_m;
static aco_rt_pthread_cond_t out_c;
static void bad_outside(void) {
    aco_rt_pthread_mutexattr_t a;
    memset(&a, 0, sizeof(a));
    a.type_ = 77;
    aco_rt_pthread_condattr_t ca;
    memset(&ca, 0, sizeof(ca));
    ca.clock_ = 99;
    CHECK_EQ(aco_rt_pthread_mutex_init(&out_m, &a), EINVAL);
    CHECK_EQ(aco_rt_pthread_cond_init(&out_c, &ca), EINVAL);
    CHECK_EQ(aco_rt_pthread_mutex_lock(&out_m), EINVAL);
    CHECK_EQ(aco_rt_pthread_mutex_trylock(&out_m), EINVAL);
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&out_m), EINVAL);
    CHECK_EQ(aco_rt_pthread_cond_signal(&out_c), EINVAL);
    CHECK_EQ(aco_rt_pthread_cond_broadcast(&out_c), EINVAL);
}

static void refused_body(aco_rt_sched_t* s, void* arg) {
    (void)s;
    (void)arg;
    addr = mmap(NULL, 4 * 32, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(addr != MAP_FAILED);
    capture_stderr(refused_co);
    static const char* what[4][2] = {{"aco_rt_pthread_mutex_lock", "mutex_init"},
                                     {"aco_rt_pthread_cond_signal", "cond_init"},
                                     {"aco_rt_pthread_rwlock_rdlock", "rwlock_init"},
                                     {"aco_rt_pthread_barrier_wait", "barrier_init"}};
    for (int i = 0; i < 4; i++) {
        char at[32 + 2];
        snprintf(at, sizeof(at), " %s ", addr[i]);
        if (lines_with(what[i][0], at, what[i][1]) != 1 ||
            lines_with(at, "share stack", program_invocation_short_name) != 1)
            TEST_FAIL_AT(__FILE__, __LINE__, "no line for the refused %s at %s; stderr:\n%s",
                         what[i][1], addr[i], said);
    }
    if (count_lines() != 4)
        TEST_FAIL_AT(__FILE__, __LINE__, "4 lines expected, one per object:\n%s", said);
    capture_after = bad_outside;
    capture_stderr(bad_args_co);
    capture_after = NULL;
    if (count_lines() != 4 || lines_with("mutex_lock", "bad attributes", "mutex_init") != 2 ||
        lines_with("barrier_wait", "bad attributes or count", "barrier_init") != 1 ||
        lines_with("cond_signal", "bad attributes", "cond_init") != 1)
        TEST_FAIL_AT(__FILE__, __LINE__, "a line each for the bad mutexes, barrier and cond:\n%s",
                     said);
    munmap(addr, 4 * 32);
}

/* ------------------------------------------------------------------------ */
/* The program's own constructors may use the runtime: the wait kinds are   */
/* registered before them (a deadline's abort goes through their table).   */
/* ------------------------------------------------------------------------ */

static int early_result = 1;
static aco_rt_mutex_t early_mu;
static aco_rt_sem_t early_done;

static void early_holder(void* arg) {
    (void)arg;
    aco_rt_mutex_lock(&early_mu, -1);
    aco_rt_sem_wait(&early_done, -1);   /* until the waiter gave up */
    aco_rt_mutex_unlock(&early_mu);
}

static void early_waiter(void* arg) {
    (void)arg;
    aco_rt_yield();                     /* the holder has it */
    early_result = aco_rt_mutex_lock(&early_mu, aco_rt_now() + 2 * MS);
    aco_rt_sem_post(&early_done);
}

/* (This file's object comes first in the link: its constructor runs
 * before those of the runtime's objects that have no priority.) */
__attribute__((constructor)) static void early(void) {
    aco_rt_sched_t* s = aco_rt_sched_new(NULL);
    if (s == NULL) return;
    aco_rt_mutex_init(&early_mu);
    aco_rt_sem_init(&early_done, 0);
    aco_rt_detach(aco_rt_spawn(s, early_holder, NULL));
    aco_rt_detach(aco_rt_spawn(s, early_waiter, NULL));
    aco_rt_sched_run(s);
    aco_rt_sched_free(s);
}

int main(void) {
    CHECK_EQ(early_result, -ETIMEDOUT);
    stdin_nb();         /* (first: its children's leak check inherits no threads) */
    test_on_backends(NULL, zero_body, NULL);
    test_on_backends(NULL, past_body, NULL);
    pool_past();
    test_on_backends(NULL, key_body, NULL);
    test_on_backends(NULL, big_body, NULL);
    test_on_backends(NULL, pt_body, NULL);
    test_on_backends(NULL, refused_body, NULL);
    printf("test_contract: ok\n");
    return 0;
}
