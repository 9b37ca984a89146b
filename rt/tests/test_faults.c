/* test_faults.c - faults injected: every allocation the runtime (and libaco
 * under it) makes fails once, in turn, and every descriptor it makes fails
 * with EMFILE; the runtime must say so (-ENOMEM, NULL with errno, ...),
 * never crash, abort, hang or leak, and work again afterwards.
 *
 * Memory.  The program is linked with -Wl,--wrap for the malloc family and
 * mmap (make.sh): every such call from the runtime's objects and libaco's
 * comes here, and libaco's own allocations (co objects, save stacks, share
 * stack records) come through aco_set_allocator.  A scenario that makes
 * every public call of aco_rt.h and aco_rt_pthread.h runs once counting the
 * allocations (c of them), then once per N = 1..c in a forked child with the
 * Nth allocation failing.  The scenario checks each result: the call either
 * worked or failed for want of memory, and then the same call, made again,
 * works (only one allocation fails).  A co that never started (a spawn to
 * another pool thread that found no memory there) is spawned again.  Then,
 * nothing failing, a short check that the runtime still works, and the
 * child exits 0 (under ASan, LeakSanitizer looks for leaks at that exit).
 *
 * Descriptors.  The same scenario's descriptor-making calls (eventfd and
 * io_uring/epoll in aco_rt_sched_new, pool threads, accept, the test's own
 * sockets) under RLIMIT_NOFILE lowered to 0, 1, 2, ... descriptors above
 * what is open at the start: each fails with EMFILE (a scheduler with
 * backend AUTO falls back to epoll when io_uring cannot start), nothing
 * crashes or leaks a descriptor, and with the limit back the runtime works.
 *
 * ACO_RT_FAULT_AT=N runs only the child for N, in the foreground.
 */
#define _GNU_SOURCE
#include "rt_test.h"
#include "../aco_rt_pthread.h"
#include "../../aco.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/socket.h>

/* ------------------------------------------------------------------------ */
/* The allocator that fails                                                 */
/* ------------------------------------------------------------------------ */

static long fault_at;           /* the allocation that fails (0: none) */
static long fault_count;        /* allocations counted (atomic) */
static int fault_on;            /* counting (atomic) */
static int fault_given;         /* the failure happened (atomic) */

/* Does this allocation fail? */
static int fault_now(void) {
    if (!__atomic_load_n(&fault_on, __ATOMIC_RELAXED)) return 0;
    if (__atomic_add_fetch(&fault_count, 1, __ATOMIC_RELAXED) != fault_at) return 0;
    __atomic_store_n(&fault_given, 1, __ATOMIC_RELAXED);
    return 1;
}

void* __real_malloc(size_t n);
void* __real_calloc(size_t n, size_t sz);
void* __real_realloc(void* p, size_t n);
void* __real_aligned_alloc(size_t al, size_t n);
int   __real_posix_memalign(void** p, size_t al, size_t n);
void* __real_mmap(void* a, size_t n, int prot, int flags, int fd, off_t off);
int   __real_pthread_create(pthread_t* t, const pthread_attr_t* a, void* (*fn)(void*), void* arg);

void* __wrap_malloc(size_t n);
void* __wrap_calloc(size_t n, size_t sz);
void* __wrap_realloc(void* p, size_t n);
void* __wrap_aligned_alloc(size_t al, size_t n);
int   __wrap_posix_memalign(void** p, size_t al, size_t n);
void* __wrap_mmap(void* a, size_t n, int prot, int flags, int fd, off_t off);
int   __wrap_pthread_create(pthread_t* t, const pthread_attr_t* a, void* (*fn)(void*), void* arg);

void* __wrap_malloc(size_t n) {
    if (fault_now()) { errno = ENOMEM; return NULL; }
    return __real_malloc(n);
}
void* __wrap_calloc(size_t n, size_t sz) {
    if (fault_now()) { errno = ENOMEM; return NULL; }
    return __real_calloc(n, sz);
}
void* __wrap_realloc(void* p, size_t n) {
    if (fault_now()) { errno = ENOMEM; return NULL; }
    return __real_realloc(p, n);
}
void* __wrap_aligned_alloc(size_t al, size_t n) {
    if (fault_now()) { errno = ENOMEM; return NULL; }
    return __real_aligned_alloc(al, n);
}
int __wrap_posix_memalign(void** p, size_t al, size_t n) {
    if (fault_now()) return ENOMEM;
    return __real_posix_memalign(p, al, n);
}
void* __wrap_mmap(void* a, size_t n, int prot, int flags, int fd, off_t off) {
    if (fault_now()) { errno = ENOMEM; return MAP_FAILED; }
    return __real_mmap(a, n, prot, flags, fd, off);
}
/* A thread needs memory too (its stack): EAGAIN as pthreads says. */
int __wrap_pthread_create(pthread_t* t, const pthread_attr_t* a, void* (*fn)(void*), void* arg) {
    if (fault_now()) return EAGAIN;
    return __real_pthread_create(t, a, fn, arg);
}

/* libaco's allocator (aco_set_allocator): 16-byte aligned. */
static void* aco_mem(void* cookie, size_t sz) {
    (void)cookie;
    if (fault_now()) return NULL;
    return __real_aligned_alloc(16, (sz + 15) & ~(size_t)15);
}
static void aco_mem_free(void* cookie, void* p, size_t sz) {
    (void)cookie;
    (void)sz;
    free(p);
}

/* ------------------------------------------------------------------------ */
/* Checks of a result that may be a fault's                                 */
/* ------------------------------------------------------------------------ */

/* ENOMEM (memory) or EMFILE (descriptors): the error the fault makes. */
static int fault_err = ENOMEM;
static long retried;            /* calls that failed and were made again */

/* r: 0 (or more), or -err where err is the fault's; made again after the
 * fault (memory: the second call must work). */
#define TRY(expr)                                                             \
    __extension__({                                                           \
        long r_ = (long)(expr);                                               \
        if (r_ == -fault_err && fault_err == ENOMEM) {                        \
            retried++;                                                        \
            r_ = (long)(expr);                                                \
        }                                                                     \
        r_;                                                                   \
    })

/* A pointer, or NULL with errno the fault's (memory: made again, and then
 * it must work). */
#define TRYP(expr)                                                            \
    __extension__({                                                           \
        __typeof__(expr) p_ = (expr);                                         \
        if (p_ == NULL) {                                                     \
            int e_ = errno;                                                   \
            if (e_ != fault_err)                                              \
                TEST_FAIL_AT(__FILE__, __LINE__, "%s: NULL with errno %d (%s)", \
                             #expr, e_, strerror(e_));                        \
            if (fault_err == ENOMEM) {                                        \
                retried++;                                                    \
                p_ = (expr);                                                  \
                if (p_ == NULL)                                               \
                    TEST_FAIL_AT(__FILE__, __LINE__, "%s: NULL again (errno %d)", \
                                 #expr, errno);                               \
            }                                                                 \
        }                                                                     \
        p_;                                                                   \
    })

static int backend;             /* ACO_RT_BACKEND_* of the scenario */

static aco_rt_opts_t sched_opts(void) {
    aco_rt_opts_t o = {0};
    o.backend = backend;
    o.share_stacks = 2;         /* few: cos take turns and are copied out */
    o.stack_size = 64 * 1024;
    o.uring_entries = 64;
    return o;
}

/* ------------------------------------------------------------------------ */
/* The scenario's cos                                                       */
/* ------------------------------------------------------------------------ */

static int64_t soon(int64_t ms) { return aco_rt_now() + ms * MS; }

static aco_rt_key_t key;
static int dtor_calls;
static void dtor(void* v) { (void)v; dtor_calls++; }

static int timer_fired;
static void on_timer(aco_rt_timer_t* t) { (void)t; timer_fired++; }

/* Deep frames, then a yield: copied out when another co takes the share
 * stack (a save stack of libaco's if the record's is too small). */
static int deep(int n) {
    volatile char pad[512];
    pad[0] = (char)n;
    if (n == 0) {
        CHECK_EQ(aco_rt_yield(), 0);
        return pad[0];
    }
    return deep(n - 1) + pad[0];
}
static void co_deep(void* arg) {
    int n = (int)(intptr_t)arg;
    CHECK_EQ(deep(n), n * (n + 1) / 2);
}

static void co_private(void* arg) {
    size_t n = 0;
    unsigned char* p = aco_rt_private(&n);
    CHECK_EQ(n, (size_t)(uintptr_t)arg);
    for (size_t i = 0; i < n; i++) CHECK_EQ(p[i], 0);
    memset(p, 7, n);
    CHECK_EQ(aco_rt_setspecific(key, NULL), 0);
    long r = TRY(aco_rt_setspecific(key, &n));
    CHECK_EQ(r, 0);
    CHECK(aco_rt_getspecific(key) == &n);
    CHECK_EQ(aco_rt_sleep(100000), 0);
}

static void co_sleeper(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_sleep_until(-1), -ECANCELED);
    CHECK_EQ(aco_rt_yield(), -ECANCELED);
}

/* I/O: a writer and a reader on a pipe, a socketpair both ways, TCP
 * accept/connect. */
typedef struct { int fd; int nbytes; } io_arg_t;

static void co_pipe_writer(void* arg) {
    io_arg_t* a = arg;
    static char buf[4096];
    int left = a->nbytes;
    int first = 1;
    while (left > 0) {
        int n = left < (int)sizeof(buf) ? left : (int)sizeof(buf);
        long r;
        if (first) {
            struct iovec v[3] = {{buf, 10}, {buf + 10, 20}, {buf + 30, (size_t)n - 30}};
            r = TRY(aco_rt_writev(a->fd, v, 3, soon(5000)));
            first = 0;
        } else {
            r = TRY(aco_rt_write(a->fd, buf, (size_t)n, soon(5000)));
        }
        CHECK_EQ(r, n);
        left -= n;
    }
    CHECK_EQ(TRY(aco_rt_close(a->fd)), 0);
}

static void co_pipe_reader(void* arg) {
    io_arg_t* a = arg;
    char buf[1000];
    int got = 0, v = 0;
    for (;;) {
        long r;
        if (v++ & 1) {
            struct iovec iv[2] = {{buf, 300}, {buf + 300, 700}};
            r = TRY(aco_rt_readv(a->fd, iv, 2, soon(5000)));
        } else {
            r = TRY(aco_rt_read(a->fd, buf, sizeof(buf), soon(5000)));
        }
        CHECK_GE(r, 0);
        if (r == 0) break;
        got += (int)r;
    }
    CHECK_EQ(got, a->nbytes);
    CHECK_EQ(TRY(aco_rt_close(a->fd)), 0);
}

static void co_sock_echo(void* arg) {
    int fd = *(int*)arg;
    char buf[64];
    /* a wait on two (the second never ready): its records in the heap */
    struct pollfd two[2] = {{fd, POLLIN, 0}, {fd, POLLPRI, 0}};
    long r = TRY(aco_rt_poll(two, 2, soon(5000)));
    CHECK(r == 1 && (two[0].revents & POLLIN));
    r = TRY(aco_rt_wait(fd, POLLIN, soon(5000)));
    CHECK(r > 0 && (r & POLLIN));
    r = TRY(aco_rt_cancel_shield(1));           /* its block, made once */
    CHECK_EQ(r, 0);
    CHECK_EQ(aco_rt_cancel_shield(0), 1);
    r = TRY(aco_rt_recv(fd, buf, sizeof(buf), 0, soon(5000)));
    CHECK_EQ(r, 5);
    CHECK_EQ(TRY(aco_rt_send(fd, buf, 5, 0, soon(5000))), 5);
}

static void co_sock_ask(void* arg) {
    int fd = *(int*)arg;
    char buf[8];
    CHECK_EQ(TRY(aco_rt_send(fd, "hello", 5, 0, soon(5000))), 5);
    CHECK_EQ(TRY(aco_rt_recv(fd, buf, sizeof(buf), 0, soon(5000))), 5);
    CHECK_EQ(memcmp(buf, "hello", 5), 0);
}

/* bufio: blocks larger than the socket holds, so that writes and flushes
 * wait; made (and its descriptor's record: the writer's end is moved to a
 * number of a chunk of the table nothing used yet) under the faults, and
 * every byte comes once, in order. */
enum { BUFIO_BLOCK = 48 * 1024, BUFIO_BLOCKS = 3 };
static unsigned char bufio_byte(long i) { return (unsigned char)(i * 7 + (i >> 9)); }
static void co_bufio_writer(void* arg) {
    int fd = *(int*)arg;
    aco_rt_bufio_t* b = TRYP(aco_rt_bufio_new(fd, 256, 4096));
    static unsigned char blk[BUFIO_BLOCK];
    for (long k = 0; k < BUFIO_BLOCKS; k++) {
        for (long i = 0; i < BUFIO_BLOCK; i++) blk[i] = bufio_byte(k * BUFIO_BLOCK + i);
        /* a small write first (buffered), then the rest (out at once) */
        CHECK_EQ(TRY(aco_rt_bufio_write(b, blk, 100, soon(5000))), 100);
        CHECK_EQ(TRY(aco_rt_bufio_write(b, blk + 100, BUFIO_BLOCK - 100, soon(5000))),
                 BUFIO_BLOCK - 100);
        CHECK_EQ(TRY(aco_rt_bufio_flush(b, soon(5000))), 0);
        CHECK_EQ(aco_rt_bufio_unflushed(b), 0);
    }
    aco_rt_bufio_free(b);
    CHECK_EQ(TRY(aco_rt_shutdown(fd, SHUT_WR, soon(5000))), 0);
}
static void co_bufio_reader(void* arg) {
    int fd = *(int*)arg;
    aco_rt_bufio_t* b = TRYP(aco_rt_bufio_new(fd, 512, 0));
    static unsigned char got[4096];
    long at = 0;
    for (;;) {
        long r = TRY(aco_rt_bufio_read(b, got, sizeof(got), soon(5000)));
        CHECK_GE(r, 0);
        if (r == 0) break;
        for (long i = 0; i < r; i++) CHECK_EQ(got[i], bufio_byte(at + i));
        at += r;
    }
    CHECK_EQ(at, (long)BUFIO_BLOCK * BUFIO_BLOCKS);
    aco_rt_bufio_free(b);
}

static struct sockaddr_in tcp_addr;

static void co_acceptor(void* arg) {
    int lfd = *(int*)arg;
    long c = TRY(aco_rt_accept(lfd, NULL, NULL, SOCK_CLOEXEC, soon(5000)));
    if (c == -EMFILE && fault_err == EMFILE) return;    /* the connector gets a reset */
    CHECK_GE(c, 0);
    char b[4];
    long r = TRY(aco_rt_read((int)c, b, sizeof(b), soon(5000)));
    CHECK_EQ(r, 4);
    CHECK_EQ(TRY(aco_rt_close((int)c)), 0);
}

static void co_connector(void* arg) {
    (void)arg;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 && errno == EMFILE && fault_err == EMFILE) return;
    CHECK_GE(fd, 0);
    long r = TRY(aco_rt_connect(fd, (struct sockaddr*)&tcp_addr, sizeof(tcp_addr), soon(5000)));
    if (fault_err == ENOMEM) {
        CHECK_EQ(r, 0);
        CHECK_EQ(TRY(aco_rt_write(fd, "ping", 4, soon(5000))), 4);
    } else if (r == 0) {
        r = aco_rt_write(fd, "ping", 4, soon(5000));
        CHECK(r == 4 || r == -ECONNRESET || r == -EPIPE);
    }
    CHECK_EQ(TRY(aco_rt_close(fd)), 0);
}

/* A descriptor call of the test's own (result r): 1 if it made one; 0 if
 * the descriptor limit stopped it. */
static int own_fd(int r) {
    if (r >= 0) return 1;
    CHECK(errno == EMFILE && fault_err == EMFILE);
    return 0;
}

/* Descriptors: accept with every number taken says -EMFILE, and the
 * connection waits for the next accept. */
static void accept_at_limit(int lfd) {
    int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (!own_fd(c)) return;
    CHECK_EQ(aco_rt_connect(c, (struct sockaddr*)&tcp_addr, sizeof(tcp_addr), soon(5000)), 0);
    int held[64], nh = 0;
    while (nh < 64 && (held[nh] = dup(0)) >= 0) nh++;
    CHECK_LT(nh, 64);
    CHECK_EQ(errno, EMFILE);
    CHECK_EQ(aco_rt_accept(lfd, NULL, NULL, SOCK_CLOEXEC, soon(5000)), -EMFILE);
    close(held[--nh]);
    int a = aco_rt_accept(lfd, NULL, NULL, SOCK_CLOEXEC, soon(5000));
    CHECK_GE(a, 0);
    CHECK_EQ(aco_rt_close(a), 0);
    while (nh) close(held[--nh]);
    CHECK_EQ(aco_rt_close(c), 0);
}

/* Sync among cos. */
static aco_rt_mutex_t mu;
static aco_rt_cond_t cv;
static aco_rt_sem_t sem;
static aco_rt_wg_t wg;
static int shared_n;

static void co_sync(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_mutex_lock(&mu, soon(5000)), 0);
    shared_n++;
    aco_rt_cond_broadcast(&cv);
    CHECK_EQ(aco_rt_mutex_unlock(&mu), 0);
    CHECK_EQ(aco_rt_sem_wait(&sem, soon(5000)), 0);
    aco_rt_sem_post(&sem);
    CHECK_EQ(aco_rt_wg_done(&wg), 0);
}

/* Channels: small and big elements, and a select of many cases. */
#define NSEL 12
typedef struct { char b[3000]; } big_t;
static aco_rt_chan_t* ch_small;
static aco_rt_chan_t* ch_big;
static aco_rt_chan_t* ch_sel[NSEL];

static void co_chan_sender(void* arg) {
    (void)arg;
    for (int i = 0; i < 6; i++) CHECK_EQ(TRY(aco_rt_chan_send(ch_small, &i, soon(5000))), 0);
    CHECK_EQ(aco_rt_chan_close(ch_small), 0);
    static big_t b;
    for (int i = 0; i < 3; i++) {
        memset(b.b, 'a' + i, sizeof(b.b));
        CHECK_EQ(TRY(aco_rt_chan_send(ch_big, &b, soon(5000))), 0);
    }
    int v = 42;
    CHECK_EQ(TRY(aco_rt_chan_send(ch_sel[NSEL - 1], &v, soon(5000))), 0);
    /* a select that sends */
    aco_rt_case_t cs[2] = {{ch_sel[0], ACO_RT_SEND, &v}, {ch_sel[1], ACO_RT_SEND, &v}};
    int err = 1;
    long r = TRY(aco_rt_chan_select(cs, 2, &err, soon(5000)));
    CHECK(r == 0 || r == 1);
    CHECK_EQ(err, 0);
}

static void co_chan_receiver(void* arg) {
    (void)arg;
    int v, n = 0;
    long r;
    while ((r = TRY(aco_rt_chan_recv(ch_small, &v, soon(5000)))) == 0) CHECK_EQ(v, n++);
    CHECK_EQ(r, -EPIPE);
    CHECK_EQ(n, 6);
    static big_t b;
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(TRY(aco_rt_chan_recv(ch_big, &b, soon(5000))), 0);
        CHECK_EQ(b.b[0], 'a' + i);
        CHECK_EQ(b.b[sizeof(b.b) - 1], 'a' + i);
    }
    aco_rt_case_t cs[NSEL];
    int vals[NSEL];
    for (int i = 0; i < NSEL; i++) cs[i] = (aco_rt_case_t){ch_sel[i], ACO_RT_RECV, &vals[i]};
    int err = 1;
    r = TRY(aco_rt_chan_select(cs, NSEL, &err, soon(5000)));
    CHECK_EQ(r, NSEL - 1);
    CHECK_EQ(err, 0);
    CHECK_EQ(vals[NSEL - 1], 42);
    r = TRY(aco_rt_chan_select(cs, 2, &err, soon(5000)));
    CHECK(r == 0 || r == 1);
    CHECK_EQ(vals[r], 42);
}

/* Spawn on s, made again on ENOMEM. */
static aco_rt_co_t* spawn(aco_rt_fn_t fn, void* arg, const aco_rt_spawn_opts_t* o) {
    return TRYP(aco_rt_spawn2(NULL, fn, arg, o));
}

static void join(aco_rt_co_t* co) {
    CHECK_EQ(aco_rt_join(co, soon(10000)), 0);
}

/* The single scheduler's part, in a co. */
static void co_main(void* arg) {
    (void)arg;
    CHECK_EQ(TRY(aco_rt_setspecific(key, &key)), 0);
    static aco_rt_timer_t t;
    CHECK_EQ(aco_rt_timer_start(&t, soon(1), on_timer), 0);

    aco_rt_co_t* cos[24];
    int n = 0;
    aco_rt_spawn_opts_t po = {.private_size = 200, .save_size = 256};
    cos[n++] = spawn(co_private, (void*)(uintptr_t)200, &po);
    aco_rt_spawn_opts_t so = {.standalone = 1, .private_size = 16};
    cos[n++] = spawn(co_private, (void*)(uintptr_t)16, &so);
    aco_rt_spawn_opts_t bo = {.stack_size = 128 * 1024, .name = "big"};
    cos[n++] = spawn(co_deep, (void*)(intptr_t)40, &bo);
    for (int i = 0; i < 4; i++) cos[n++] = spawn(co_deep, (void*)(intptr_t)(8 + 8 * i), NULL);
    aco_rt_co_t* sl = spawn(co_sleeper, NULL, NULL);
    CHECK_EQ(aco_rt_yield(), 0);
    CHECK_EQ(aco_rt_cancel(sl), 0);
    join(sl);
    aco_rt_co_t* d = spawn(co_deep, (void*)(intptr_t)3, NULL);
    CHECK_EQ(aco_rt_detach(d), 0);

    /* I/O (the test's own descriptors may meet the limit too) */
    int p[2], sp[2] = {-1, -1}, lfd = -1;
    static io_arg_t wa, ra;
    if (own_fd(pipe2(p, O_CLOEXEC))) {
        wa = (io_arg_t){p[1], 20000};
        ra = (io_arg_t){p[0], 20000};
        cos[n++] = spawn(co_pipe_writer, &wa, NULL);
        cos[n++] = spawn(co_pipe_reader, &ra, NULL);
    }
    if (own_fd(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp))) {
        cos[n++] = spawn(co_sock_echo, &sp[0], NULL);
        cos[n++] = spawn(co_sock_ask, &sp[1], NULL);
    }
    /* (the writer's end moved to a number of a chunk of the descriptor
     * table nothing used yet: its first flush makes the runtime's record,
     * an allocation that can fail; not with a lowered limit) */
    static int bp[2] = {-1, -1};
    if (fault_err == ENOMEM && own_fd(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, bp))) {
        int hi = fcntl(bp[0], F_DUPFD_CLOEXEC, 700);
        CHECK_GE(hi, 700);
        close(bp[0]);
        bp[0] = hi;
        int small = 4096;
        CHECK_EQ(setsockopt(hi, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);
        cos[n++] = spawn(co_bufio_writer, &bp[0], NULL);
        cos[n++] = spawn(co_bufio_reader, &bp[1], NULL);
    }
    if (own_fd(lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0))) {
        memset(&tcp_addr, 0, sizeof(tcp_addr));
        tcp_addr.sin_family = AF_INET;
        tcp_addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t al = sizeof(tcp_addr);
        CHECK_EQ(bind(lfd, (struct sockaddr*)&tcp_addr, al), 0);
        CHECK_EQ(getsockname(lfd, (struct sockaddr*)&tcp_addr, &al), 0);
        CHECK_EQ(listen(lfd, 4), 0);
        cos[n++] = spawn(co_acceptor, &lfd, NULL);
        cos[n++] = spawn(co_connector, NULL, NULL);
    }

    /* sync */
    aco_rt_mutex_init(&mu);
    aco_rt_cond_init(&cv);
    aco_rt_sem_init(&sem, 1);
    aco_rt_wg_init(&wg);
    CHECK_EQ(aco_rt_wg_add(&wg, 2), 0);
    shared_n = 0;
    cos[n++] = spawn(co_sync, NULL, NULL);
    cos[n++] = spawn(co_sync, NULL, NULL);
    CHECK_EQ(aco_rt_mutex_lock(&mu, soon(5000)), 0);
    while (shared_n < 2) CHECK_EQ(aco_rt_cond_wait(&cv, &mu, soon(5000)), 0);
    CHECK_EQ(aco_rt_mutex_unlock(&mu), 0);
    CHECK_EQ(aco_rt_wg_wait(&wg, soon(5000)), 0);
    CHECK_EQ(aco_rt_mutex_trylock(&mu), 0);
    CHECK_EQ(aco_rt_mutex_unlock(&mu), 0);
    CHECK_EQ(aco_rt_sem_trywait(&sem), 0);
    aco_rt_sem_post(&sem);

    /* channels */
    ch_small = TRYP(aco_rt_chan_new(sizeof(int), 2));
    ch_big = TRYP(aco_rt_chan_new(sizeof(big_t), 0));
    for (int i = 0; i < NSEL; i++) ch_sel[i] = TRYP(aco_rt_chan_new(sizeof(int), i & 1));
    aco_rt_co_t* cs = spawn(co_chan_sender, NULL, NULL);
    aco_rt_co_t* cr = spawn(co_chan_receiver, NULL, NULL);
    join(cs);
    join(cr);
    CHECK_EQ(aco_rt_chan_len(ch_small), 0);
    CHECK_EQ(aco_rt_chan_free(ch_small), 0);
    CHECK_EQ(aco_rt_chan_free(ch_big), 0);
    for (int i = 0; i < NSEL; i++) CHECK_EQ(aco_rt_chan_free(ch_sel[i]), 0);

    for (int i = 0; i < n; i++) join(cos[i]);
    if (sp[0] >= 0) {
        CHECK_EQ(aco_rt_close(sp[0]), 0);
        CHECK_EQ(aco_rt_close(sp[1]), 0);
    }
    if (bp[0] >= 0) {
        CHECK_EQ(aco_rt_close(bp[0]), 0);
        CHECK_EQ(aco_rt_close(bp[1]), 0);
        bp[0] = bp[1] = -1;
    }
    if (lfd >= 0 && fault_err == EMFILE) accept_at_limit(lfd);
    if (lfd >= 0) CHECK_EQ(aco_rt_close(lfd), 0);
    CHECK(aco_rt_self() != NULL);
    CHECK_EQ(aco_rt_cancelled(), 0);
    aco_rt_stats_t st;
    aco_rt_stats(NULL, &st);
    CHECK_GE(st.spawned, 10);
    while (!timer_fired) CHECK_EQ(aco_rt_sleep(MS), 0);
}

static void scenario_sched(void) {
    aco_rt_opts_t o = sched_opts();
    aco_rt_sched_t* s = TRYP(aco_rt_sched_new(&o));
    if (s == NULL) return;
    CHECK(aco_rt_sched_current() == s);
    CHECK(aco_rt_backend_name(s) != NULL);
    aco_rt_co_t* m = TRYP(aco_rt_spawn(s, co_main, NULL));
    if (m) CHECK_EQ(aco_rt_detach(m), 0);
    CHECK_EQ(aco_rt_sched_run(s), 0);
    CHECK_GE(timer_fired, 1);
    aco_rt_sched_free(s);
}

/* ------------------------------------------------------------------------ */
/* The pthread-like face                                                    */
/* ------------------------------------------------------------------------ */

static aco_rt_pthread_mutex_t pmu = ACO_RT_PTHREAD_MUTEX_INITIALIZER;
static aco_rt_pthread_cond_t pcv = ACO_RT_PTHREAD_COND_INITIALIZER;
static aco_rt_pthread_once_t ponce = ACO_RT_PTHREAD_ONCE_INIT;
static aco_rt_pthread_rwlock_t prw = ACO_RT_PTHREAD_RWLOCK_INITIALIZER;
static aco_rt_pthread_barrier_t pbar;
static aco_rt_pthread_key_t pkey;
static int once_runs, pdone;

static void once_fn(void) { once_runs++; }

static void* pt_fn(void* arg) {
    CHECK_EQ(aco_rt_pthread_once(&ponce, once_fn), 0);
    int r = aco_rt_pthread_setspecific(pkey, arg);
    if (r == ENOMEM) { retried++; r = aco_rt_pthread_setspecific(pkey, arg); }
    CHECK_EQ(r, 0);
    CHECK_EQ(aco_rt_pthread_rwlock_rdlock(&prw), 0);
    CHECK_EQ(aco_rt_pthread_rwlock_unlock(&prw), 0);
    CHECK_EQ(aco_rt_pthread_mutex_lock(&pmu), 0);
    pdone++;
    CHECK_EQ(aco_rt_pthread_cond_broadcast(&pcv), 0);
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&pmu), 0);
    r = aco_rt_pthread_barrier_wait(&pbar);
    CHECK(r == 0 || r == ACO_RT_PTHREAD_BARRIER_SERIAL_THREAD);
    return arg;
}

/* pthread_create, made again when it said there was no memory (EAGAIN). */
static aco_rt_pthread_t pcreate(const aco_rt_pthread_attr_t* a, void* arg) {
    aco_rt_pthread_t t;
    int r = aco_rt_pthread_create(&t, a, pt_fn, arg);
    if (r == EAGAIN) { retried++; r = aco_rt_pthread_create(&t, a, pt_fn, arg); }
    CHECK_EQ(r, 0);
    return t;
}

static int pmain(int argc, char** argv) {
    (void)argc;
    (void)argv;
    CHECK_EQ(aco_rt_pthread_key_create(&pkey, NULL), 0);
    CHECK_EQ(aco_rt_pthread_barrier_init(&pbar, NULL, 3), 0);
    aco_rt_pthread_attr_t a;
    CHECK_EQ(aco_rt_pthread_attr_init(&a), 0);
    aco_rt_pthread_t t1 = pcreate(NULL, (void*)1);
    CHECK_EQ(aco_rt_pthread_attr_setstacksize(&a, 256 * 1024), 0);
    aco_rt_pthread_t t2 = pcreate(&a, (void*)2);
    CHECK_EQ(aco_rt_pthread_attr_setdetachstate(&a, ACO_RT_PTHREAD_CREATE_DETACHED), 0);
    CHECK_EQ(aco_rt_pthread_attr_setstacksize(&a, ACO_RT_PTHREAD_STACK_MIN), 0);
    pcreate(&a, (void*)3);
    void* ret = NULL;
    CHECK_EQ(aco_rt_pthread_join(t1, &ret), 0);
    CHECK(ret == (void*)1);
    CHECK_EQ(aco_rt_pthread_join(t2, &ret), 0);
    CHECK(ret == (void*)2);
    CHECK_EQ(aco_rt_pthread_mutex_lock(&pmu), 0);
    while (pdone < 3) CHECK_EQ(aco_rt_pthread_cond_wait(&pcv, &pmu), 0);
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&pmu), 0);
    CHECK_EQ(once_runs, 1);
    CHECK_EQ(aco_rt_pthread_key_delete(pkey), 0);
    CHECK_EQ(aco_rt_pthread_barrier_destroy(&pbar), 0);
    return 7;
}

static void scenario_pthread(void) {
    /* Its own scheduler (default options): "no scheduler" is said with 1. */
    int r = aco_rt_pthread_run_main(pmain, 0, NULL);
    if (r == 1 && fault_err == ENOMEM) { retried++; r = aco_rt_pthread_run_main(pmain, 0, NULL); }
    if (r == 1 && fault_err == EMFILE) return;
    CHECK_EQ(r, 7);
}

/* ------------------------------------------------------------------------ */
/* Pools and groups                                                         */
/* ------------------------------------------------------------------------ */

static int pool_ran;            /* atomic */

static void co_pool_work(void* arg) {
    (void)arg;
    /* The last one, spawned from outside just before the pool's cancel,
     * may start cancelled (the cancel reaches spawns already sent). */
    int r = aco_rt_yield();
    if (r != -ECANCELED) CHECK_EQ(r, 0);
    __atomic_fetch_add(&pool_ran, 1, __ATOMIC_RELAXED);
}

/* In the pool: spawn to the pool and join; a co that could not start on
 * its thread (join: -ENOMEM) is spawned again. */
static void co_pool_boss(void* arg) {
    aco_rt_pool_t* p = arg;
    aco_rt_co_t* cos[8];
    for (int i = 0; i < 8; i++) cos[i] = TRYP(aco_rt_pool_spawn(p, co_pool_work, NULL, NULL));
    for (int i = 0; i < 8; i++) {
        int r = aco_rt_join(cos[i], soon(10000));
        if (r == -ENOMEM && fault_err == ENOMEM) {
            retried++;
            aco_rt_co_t* again = TRYP(aco_rt_pool_spawn(p, co_pool_work, NULL, NULL));
            r = aco_rt_join(again, soon(10000));
        }
        CHECK_EQ(r, 0);
    }
    aco_rt_group_t* g = TRYP(aco_rt_pool_group_new(p));
    for (int i = 0; i < 4; i++) CHECK_EQ(TRY(aco_rt_group_spawn(g, co_pool_work, NULL, NULL)), 0);
    CHECK_EQ(aco_rt_group_join(g, soon(10000)), 0);
    CHECK_EQ(aco_rt_group_size(g), 0);
    CHECK_EQ(aco_rt_group_free(g), 0);
}

static aco_rt_pool_t* pool_make(void) {
    aco_rt_pool_opts_t po = {.threads = 2, .sched = sched_opts()};
    aco_rt_pool_t* p = aco_rt_pool_new(&po);
    if (p == NULL && errno == EAGAIN && fault_err == ENOMEM) errno = ENOMEM;    /* a thread */
    if (p == NULL && errno == ENOMEM && fault_err == ENOMEM) {
        retried++;
        p = aco_rt_pool_new(&po);
        CHECK(p != NULL);
    }
    if (p == NULL) CHECK_EQ(errno, fault_err);
    return p;
}

static void scenario_pool(void) {
    aco_rt_pool_t* p = pool_make();
    if (p == NULL) return;
    CHECK_EQ(aco_rt_pool_threads(p), 2);
    CHECK(aco_rt_pool_sched(p, 1) != NULL);
    aco_rt_co_t* b = TRYP(aco_rt_pool_spawn(p, co_pool_boss, p, NULL));
    CHECK_EQ(aco_rt_detach(b), 0);
    /* a group on thread 0's scheduler, from outside */
    aco_rt_group_t* g = TRYP(aco_rt_group_new(aco_rt_pool_sched(p, 0)));
    CHECK(aco_rt_group_sched(g) == aco_rt_pool_sched(p, 0));
    CHECK_EQ(TRY(aco_rt_group_spawn(g, co_pool_work, NULL, NULL)), 0);
    CHECK_EQ(aco_rt_pool_wait(p, ACO_RT_POOL_DRAIN, soon(20000)), 0);
    CHECK_EQ(aco_rt_group_free(g), 0);
    /* spawned from outside, to a thread's scheduler */
    aco_rt_co_t* c = TRYP(aco_rt_spawn(aco_rt_pool_sched(p, 1), co_pool_work, NULL));
    CHECK_EQ(aco_rt_detach(c), 0);
    CHECK_EQ(aco_rt_pool_wait(p, ACO_RT_POOL_CANCEL, soon(20000)), 0);
    aco_rt_pool_free(p);
}

/* ------------------------------------------------------------------------ */
/* After the fault: nothing fails now, everything must work                 */
/* ------------------------------------------------------------------------ */

static void co_after(void* arg) {
    aco_rt_chan_t* ch = aco_rt_chan_new(sizeof(int), 0);
    CHECK(ch != NULL);
    int p[2];
    CHECK_EQ(pipe2(p, O_CLOEXEC), 0);
    aco_rt_co_t* c = aco_rt_spawn(NULL, co_deep, (void*)(intptr_t)20);
    CHECK(c != NULL);
    CHECK_EQ(aco_rt_write(p[1], "x", 1, soon(5000)), 1);
    char b;
    CHECK_EQ(aco_rt_read(p[0], &b, 1, soon(5000)), 1);
    CHECK_EQ(aco_rt_join(c, soon(5000)), 0);
    CHECK_EQ(aco_rt_setspecific(key, arg), 0);
    CHECK_EQ(aco_rt_close(p[0]), 0);
    CHECK_EQ(aco_rt_close(p[1]), 0);
    CHECK_EQ(aco_rt_chan_free(ch), 0);
}

static void after(void) {
    aco_rt_opts_t o = sched_opts();
    aco_rt_sched_t* s = aco_rt_sched_new(&o);
    CHECK(s != NULL);
    aco_rt_co_t* c = aco_rt_spawn(s, co_after, &o);
    CHECK(c != NULL);
    CHECK_EQ(aco_rt_detach(c), 0);
    CHECK_EQ(aco_rt_sched_run(s), 0);
    aco_rt_sched_free(s);
    aco_rt_pool_opts_t po = {.threads = 2, .sched = sched_opts()};
    aco_rt_pool_t* p = aco_rt_pool_new(&po);
    CHECK(p != NULL);
    for (int i = 0; i < 4; i++) {
        aco_rt_co_t* w = aco_rt_pool_spawn(p, co_pool_work, NULL, NULL);
        CHECK(w != NULL);
        CHECK_EQ(aco_rt_detach(w), 0);
    }
    CHECK_EQ(aco_rt_pool_wait(p, ACO_RT_POOL_DRAIN, soon(20000)), 0);
    aco_rt_pool_free(p);
}

/* ------------------------------------------------------------------------ */
/* Driver                                                                   */
/* ------------------------------------------------------------------------ */

static void scenario(void) {
    scenario_sched();
    scenario_pthread();
    scenario_pool();
}

/* The child for fault N (memory) or limit N (descriptors): exits 0, or
 * fails (a check, a crash, the watchdog).  Writes the allocation count to
 * out if out >= 0. */
static void child(long n, int out) {
    alarm(SLOW ? 120 : 30);
    signal(SIGALRM, SIG_DFL);
    int fds0 = test_open_fds();
    if (fault_err == ENOMEM) {
        fault_at = n;
        __atomic_store_n(&fault_on, 1, __ATOMIC_RELAXED);
        scenario();
        __atomic_store_n(&fault_on, 0, __ATOMIC_RELAXED);
        if (n) CHECK(fault_given || fault_count < n);
    } else {
        struct rlimit old, rl;
        CHECK_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
        /* the lowest free number is where the next descriptor goes */
        int low = dup(0);
        CHECK_GE(low, 0);
        close(low);
        rl = old;
        rl.rlim_cur = (rlim_t)(low + n);
        CHECK_EQ(setrlimit(RLIMIT_NOFILE, &rl), 0);
        scenario();
        CHECK_EQ(setrlimit(RLIMIT_NOFILE, &old), 0);
    }
    CHECK_EQ(test_open_fds(), fds0);
    after();
    CHECK_EQ(test_open_fds(), fds0);
    if (out >= 0) {
        long v[2] = {fault_count, retried};
        CHECK_EQ(write(out, v, sizeof(v)), (ssize_t)sizeof(v));
    }
    exit(0);    /* (not _exit: LeakSanitizer looks at exit) */
}

/* Run child(n) in a process: 0 if it exited 0, else reports and 1. */
static int run_child(long n, long* count) {
    int pfd[2];
    CHECK_EQ(pipe(pfd), 0);
    fflush(NULL);
    pid_t pid = fork();
    CHECK_GE(pid, 0);
    if (pid == 0) {
        close(pfd[0]);
        child(n, pfd[1]);
    }
    close(pfd[1]);
    long v[2] = {0, 0};
    ssize_t got = read(pfd[0], v, sizeof(v));
    close(pfd[0]);
    int st;
    CHECK_EQ(waitpid(pid, &st, 0), pid);
    if (count) *count = got == (ssize_t)sizeof(v) ? v[0] : -1;
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return 0;
    fprintf(stderr, "FAIL: backend %s, %s %ld: %s %d\n", test_backend_str(backend),
            fault_err == ENOMEM ? "allocation" : "descriptor limit +", n,
            WIFSIGNALED(st) ? "killed by signal" : "exit status",
            WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
    return 1;
}

int main(void) {
    aco_set_allocator(aco_mem, aco_mem_free, NULL);
    test_raise_nofile(1024);
    CHECK_EQ(aco_rt_key_create(&key, dtor), 0);
    const char* one = getenv("ACO_RT_FAULT_AT");
    int bs[4];
    int nb = test_backends(bs, 3);
    bs[nb++] = ACO_RT_BACKEND_AUTO;
    if (one && *one) {      /* ACO_RT_FAULT_AT=N [ACO_RT_FAULT_EMFILE=1] */
        backend = bs[0];
        if (getenv("ACO_RT_FAULT_EMFILE")) fault_err = EMFILE;
        child(atol(one), -1);
    }
    int fails = 0;
    for (int b = 0; b < nb; b++) {
        backend = bs[b];
        /* memory: every allocation of the scenario, failing in turn */
        fault_err = ENOMEM;
        long count = 0;
        CHECK_EQ(run_child(0, &count), 0);
        CHECK_GT(count, 0);
        int64_t t0 = aco_rt_now();
        for (long n = 1; n <= count + 8; n++) fails += run_child(n, NULL);
        printf("%s: %ld allocations, each failed once: %.1f s\n", test_backend_str(backend),
               count, (double)(aco_rt_now() - t0) / 1e9);
        /* descriptors: the limit at 0, 1, 2, ... more than are open */
        fault_err = EMFILE;
        t0 = aco_rt_now();
        int lim = 0;
        for (; lim < 64; lim++) fails += run_child(lim, NULL);
        printf("%s: descriptor limits +0..+%d: %.1f s\n", test_backend_str(backend), lim - 1,
               (double)(aco_rt_now() - t0) / 1e9);
    }
    CHECK_EQ(fails, 0);
    printf("test_faults: OK\n");
    return 0;
}
