/*
 * test_checked_rt.c - checked mode (aco.h, "Checked mode") with the
 * runtime: a pointer into a parked co's frames, handed on through the
 * runtime, faults with a report naming both cos.  The program turns the mode
 * on itself (ACO_CHECKED=1 before the first libaco call); builds that ignore
 * it (ASan, valgrind) check that it is off.
 *
 * Escapes, each in a forked child that must die of SIGSEGV with the report:
 *   - a channel of pointers: co A sends &local and parks; co B, on the same
 *     share stack, receives it and writes through it;
 *   - a co's argument: A spawns B with &local as B's arg and parks; B reads;
 *   - the kernel: B asks aco_rt_read (or aco_rt_readv, one of its buffers,
 *     or aco_rt_accept, the peer's address) to fill a buffer in A's frames
 *     (a read that the kernel would complete while A is parked): the
 *     runtime reports it as B's escape, "handed on for writing", before
 *     handing it on, on the default backend and on epoll; aco_rt_send from
 *     A's frames is "handed on for reading" (the kernel only reads it).
 * The runtime itself owns every waiter and timer node (no call takes one
 * from the caller), so those escapes are the program's own structures: the
 * channel and argument cases are their shape.  In the parent: the kernel
 * writing through a raw read(2) into a parked co's frames fails with EFAULT
 * and changes nothing, and correct cos (a parked co's own locals, buffers on
 * the co's own stack given to aco_rt_read) run as ever.
 */
#include "rt_test.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/uio.h>

static int backend = ACO_RT_BACKEND_AUTO;

/* ---- a channel of pointers ---------------------------------------------- */

static aco_rt_chan_t* ch;

__attribute__((noinline)) static void parked_sender(void* arg) {
    (void)arg;
    volatile int local = 41;
    volatile int* p = &local;
    CHECK(aco_rt_chan_send(ch, &p, -1) == 0);
    aco_rt_sleep(200 * 1000 * 1000LL);      /* parked while B runs */
    CHECK(local == 41);
}

__attribute__((noinline)) static void receiving_writer(void* arg) {
    (void)arg;
    volatile int* p;
    CHECK(aco_rt_chan_recv(ch, &p, -1) == 0);
    *p = 42;
}

static void child_chan(void) {
    aco_rt_sched_t* s = test_one_stack_sched(backend);
    ch = aco_rt_chan_new(sizeof(int*), 1);
    aco_rt_spawn(s, parked_sender, NULL);
    aco_rt_spawn(s, receiving_writer, NULL);
    aco_rt_sched_run(s);
}

/* ---- a co's argument on its spawner's stack ------------------------------ */

__attribute__((noinline)) static void arg_reader(void* arg) {
    int v = *(volatile int*)arg;
    (void)v;
}

__attribute__((noinline)) static void arg_spawner(void* arg) {
    (void)arg;
    volatile int local = 7;
    aco_rt_spawn(NULL, arg_reader, (void*)&local);
    aco_rt_sleep(200 * 1000 * 1000LL);
    CHECK(local == 7);
}

static void child_arg(void) {
    aco_rt_sched_t* s = test_one_stack_sched(backend);
    aco_rt_spawn(s, arg_spawner, NULL);
    aco_rt_sched_run(s);
}

/* ---- the kernel --------------------------------------------------------- */

static int pfd[2];

__attribute__((noinline)) static void rt_reader(void* arg) {
    (void)arg;
    volatile ssize_t r = aco_rt_read(pfd[0], (void*)test_parked_buf, 64, aco_rt_in_ms(1000));
    (void)r;    /* not a tail call: rt_reader's frame is in the report */
}

__attribute__((noinline)) static void rt_vec_reader(void* arg) {
    (void)arg;
    static char head[2];
    struct iovec v[2] = {{head, sizeof(head)}, {(void*)test_parked_buf, 64}};
    volatile ssize_t r = aco_rt_readv(pfd[0], v, 2, aco_rt_in_ms(1000));
    (void)r;
}

static int lfd = -1;

__attribute__((noinline)) static void rt_acceptor(void* arg) {
    (void)arg;
    static socklen_t len = sizeof(struct sockaddr_in);
    volatile int r = aco_rt_accept(lfd, (struct sockaddr*)test_parked_buf, &len, 0,
                                   aco_rt_in_ms(1000));
    (void)r;
}

static void child_kernel_with(aco_rt_fn_t reader) {
    CHECK(pipe(pfd) == 0);
    CHECK(write(pfd[1], "data", 4) == 4);
    aco_rt_sched_t* s = test_one_stack_sched(backend);
    aco_rt_spawn(s, test_buf_owner, NULL);
    aco_rt_spawn(s, reader, NULL);
    aco_rt_sched_run(s);
}
static void child_kernel(void) { child_kernel_with(rt_reader); }
static void child_kernel_accept(void) {
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    lfd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(lfd >= 0 && bind(lfd, (struct sockaddr*)&a, sizeof(a)) == 0 && listen(lfd, 4) == 0);
    child_kernel_with(rt_acceptor);
}
static void child_kernel_vec(void) { child_kernel_with(rt_vec_reader); }

/* A send from a parked co's frames: the kernel only reads there. */
static int sfd[2];

__attribute__((noinline)) static void rt_sender(void* arg) {
    (void)arg;
    volatile ssize_t r = aco_rt_send(sfd[0], (const void*)test_parked_buf, 64, 0,
                                     aco_rt_in_ms(1000));
    (void)r;
}

static void child_kernel_send(void) {
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sfd) == 0);
    child_kernel_with(rt_sender);
}

/* ---- in the parent: correct cos, and a raw read(2) ----------------------- */

static int raw_errno, own_ok;

__attribute__((noinline)) static void raw_reader(void* arg) {
    (void)arg;
    volatile unsigned char mine[128];
    memset((void*)mine, 0x5c, sizeof(mine));
    errno = 0;
    ssize_t r = read(pfd[0], (void*)test_parked_buf, 64);   /* no runtime: the kernel */
    raw_errno = r < 0 ? errno : 0;
    /* A buffer on its own stack: the runtime takes it (and it stays ours). */
    char own[8];
    ssize_t n = aco_rt_read(pfd[0], own, 4, aco_rt_in_ms(1000));
    own_ok = n == 4 && memcmp(own, "data", 4) == 0;
    for (size_t i = 0; i < sizeof(mine); i++) CHECK(mine[i] == 0x5c);
}

static void parent_cases(void) {
    CHECK(pipe(pfd) == 0);
    CHECK(write(pfd[1], "data", 4) == 4);
    aco_rt_sched_t* s = test_one_stack_sched(backend);
    aco_rt_spawn(s, test_buf_owner, NULL);       /* checks its bytes at the end */
    aco_rt_spawn(s, raw_reader, NULL);
    CHECK(aco_rt_sched_run(s) == 0);
    aco_rt_sched_free(s);
    CHECK(raw_errno == EFAULT);
    CHECK(own_ok);
    close(pfd[0]);
    close(pfd[1]);
}

int main(void) {
    setenv("ACO_CHECKED", "1", 1);
    if (!aco_checked()) {
        printf("test_checked_rt: this build ignores ACO_CHECKED (ASan or valgrind): it is off\n");
        return 0;
    }
    int fails = 0;
    fails += test_expect_fault("a channel of pointers", child_chan,
                               "aco: checked: co 0x|receiving_writer at|"
                               "the co whose stack it is, co 0x|"
                               "which is suspended|parked_sender at");
    fails += test_expect_fault("a co's argument", child_arg,
                               "aco: checked: co 0x|arg_reader at|"
                               "the co whose stack it is, co 0x|"
                               "arg_spawner at");
    /* The kernel case on the default backend (io_uring where it works) and
     * on epoll: the readiness way checks the buffer too. */
    for (int i = 0; i < 2; i++) {
        backend = i ? ACO_RT_BACKEND_EPOLL : ACO_RT_BACKEND_AUTO;
        fails += test_expect_fault(i ? "aco_rt_read into a parked co's frames (epoll)"
                                     : "aco_rt_read into a parked co's frames",
                                   child_kernel,
                                   "handed on for writing |rt_reader at|"
                                   "the co whose stack it is, co 0x|"
                                   "test_buf_owner at");
        fails += test_expect_fault(i ? "aco_rt_accept's address in a parked co's frames (epoll)"
                                     : "aco_rt_accept's address in a parked co's frames",
                                   child_kernel_accept,
                                   "handed on for writing |rt_acceptor at|"
                                   "the co whose stack it is, "
                                   "co 0x|test_buf_owner at");
        fails += test_expect_fault(i ? "aco_rt_readv into a parked co's frames (epoll)"
                                     : "aco_rt_readv into a parked co's frames",
                                   child_kernel_vec,
                                   "handed on for writing |rt_vec_reader at|"
                                   "the co whose stack it is, "
                                   "co 0x|test_buf_owner at");
        fails += test_expect_fault(i ? "aco_rt_send from a parked co's frames (epoll)"
                                     : "aco_rt_send from a parked co's frames",
                                   child_kernel_send,
                                   "handed on for reading |rt_sender at|the co whose stack it is, "
                                   "co 0x|test_buf_owner at");
    }
    backend = ACO_RT_BACKEND_AUTO;
    parent_cases();
    if (fails) {
        fprintf(stderr, "test_checked_rt: %d case(s) failed\n", fails);
        return 1;
    }
    printf("test_checked_rt: every escape through the runtime faulted with its report\n");
    return 0;
}
