/*
 * test_checked_hook.c - checked mode (aco.h, "Checked mode") through the
 * syscall hooks (rt/hook.c, linked in): a hooked call handed memory in a
 * parked co's frames reports it as the caller's escape before the kernel
 * would fail the call with EFAULT, whether the call goes to the runtime or
 * to libc, in a co or not.  The program turns the mode on itself; builds that
 * ignore it (ASan, valgrind) check that it is off.
 *
 * Each case in a forked child that must die of SIGSEGV with the report
 * ("handed on for writing" or "for reading", the calling co's function, the
 * parked co's): co A parks with a buffer of its frames published; co B, on
 * the same share stack, calls
 *   - recvfrom(2) with an address into A's buffer (the data, the address,
 *     the address' length: each reported as written);
 *   - sendto(2) of A's bytes to an address (read);
 *   - poll(2) of two descriptors whose array is A's (written: revents);
 *   - read(2) of a pipe the program made non-blocking, and recv(2) with
 *     MSG_DONTWAIT: calls the hooks hand to libc, not to the runtime;
 *   - writev(2) of a vector whose second buffer is A's, connect(2) to an
 *     address there, setsockopt(2) of a value there (read);
 * and, outside cos, a timer's callback (the main co) reads into A's buffer.
 * In the parent, the same calls with buffers on B's own stack work.
 */
#include "rt_test.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

/* Two UDP sockets on 127.0.0.1, each knowing the other's address; one
 * datagram waits at u[0]. */
static int u[2];
static struct sockaddr_in ua[2];

static void udp_pair(void) {
    for (int i = 0; i < 2; i++) {
        memset(&ua[i], 0, sizeof(ua[i]));
        ua[i].sin_family = AF_INET;
        ua[i].sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        u[i] = socket(AF_INET, SOCK_DGRAM, 0);      /* the hook's socket() */
        socklen_t l = sizeof(ua[i]);
        CHECK(u[i] >= 0 && bind(u[i], (struct sockaddr*)&ua[i], sizeof(ua[i])) == 0 &&
              getsockname(u[i], (struct sockaddr*)&ua[i], &l) == 0);
    }
    CHECK(sendto(u[1], "ping", 4, 0, (struct sockaddr*)&ua[0], sizeof(ua[0])) == 4);
}

/* ---- co A: parks with its buffer published ------------------------------ */

/* ---- co B: each hands A's buffer on ------------------------------------- */

__attribute__((noinline)) static void hk_recvfrom_data(void* arg) {
    (void)arg;
    struct sockaddr_in from;
    socklen_t l = sizeof(from);
    volatile ssize_t r = recvfrom(u[0], (void*)test_parked_buf, 64, 0, (struct sockaddr*)&from, &l);
    (void)r;    /* not a tail call: this frame is in the report */
}

__attribute__((noinline)) static void hk_recvfrom_addr(void* arg) {
    (void)arg;
    char data[8];
    static socklen_t l = sizeof(struct sockaddr_in);
    volatile ssize_t r = recvfrom(u[0], data, sizeof(data), 0, (struct sockaddr*)test_parked_buf,
                                  &l);
    (void)r;
}

__attribute__((noinline)) static void hk_recvfrom_len(void* arg) {
    (void)arg;
    char data[8];
    struct sockaddr_in from;
    volatile ssize_t r = recvfrom(u[0], data, sizeof(data), 0, (struct sockaddr*)&from,
                                  (socklen_t*)test_parked_buf);
    (void)r;
}

__attribute__((noinline)) static void hk_sendto(void* arg) {
    (void)arg;
    volatile ssize_t r = sendto(u[1], (const void*)test_parked_buf, 16, 0, (struct sockaddr*)&ua[0],
                                sizeof(ua[0]));
    (void)r;
}

__attribute__((noinline)) static void hk_poll(void* arg) {
    (void)arg;
    struct pollfd* p = (struct pollfd*)test_parked_buf;
    volatile int r = poll(p, 2, 1000);
    (void)r;
}

/* A pipe the program made non-blocking itself (the hook's fcntl): in a co
 * its read goes to libc, not to the runtime. */
static int pfd[2];

__attribute__((noinline)) static void hk_read_nonblock(void* arg) {
    (void)arg;
    volatile ssize_t r = read(pfd[0], (void*)test_parked_buf, 64);
    (void)r;
}

__attribute__((noinline)) static void hk_recv_dontwait(void* arg) {
    (void)arg;
    volatile ssize_t r = recv(u[0], (void*)test_parked_buf, 64, MSG_DONTWAIT);
    (void)r;
}

__attribute__((noinline)) static void hk_writev(void* arg) {
    (void)arg;
    static char head[2] = "hd";
    struct iovec v[2] = {{head, sizeof(head)}, {(void*)test_parked_buf, 16}};
    volatile ssize_t r = writev(pfd[1], v, 2);
    (void)r;
}

__attribute__((noinline)) static void hk_connect(void* arg) {
    (void)arg;
    volatile int r = connect(u[1], (const struct sockaddr*)test_parked_buf,
                             sizeof(struct sockaddr_in));
    (void)r;
}

__attribute__((noinline)) static void hk_setsockopt(void* arg) {
    (void)arg;
    volatile int r = setsockopt(u[0], SOL_SOCKET, SO_RCVBUF, (const void*)test_parked_buf,
                                sizeof(int));
    (void)r;
}

/* Outside cos: a timer's callback runs in the scheduler's main co. */
static aco_rt_timer_t tm;

__attribute__((noinline)) static void hk_main_read(aco_rt_timer_t* t) {
    (void)t;
    volatile ssize_t r = read(pfd[0], (void*)test_parked_buf, 64);
    (void)r;
}

__attribute__((noinline)) static void timer_starter(void* arg) {
    (void)arg;
    CHECK(aco_rt_timer_start(&tm, aco_rt_now() + 20 * MS, hk_main_read) == 0);
}

static void child_with(aco_rt_fn_t fn) {
    udp_pair();
    CHECK(pipe(pfd) == 0);
    CHECK(fcntl(pfd[0], F_SETFL, O_NONBLOCK) == 0);
    CHECK(write(pfd[1], "data", 4) == 4);
    aco_rt_sched_t* s = test_one_stack_sched(ACO_RT_BACKEND_AUTO);
    aco_rt_spawn(s, test_buf_owner, NULL);
    aco_rt_spawn(s, fn, NULL);
    aco_rt_sched_run(s);
}
static void child_recvfrom_data(void) { child_with(hk_recvfrom_data); }
static void child_recvfrom_addr(void) { child_with(hk_recvfrom_addr); }
static void child_recvfrom_len(void) { child_with(hk_recvfrom_len); }
static void child_sendto(void) { child_with(hk_sendto); }
static void child_poll(void) { child_with(hk_poll); }
static void child_read_nonblock(void) { child_with(hk_read_nonblock); }
static void child_recv_dontwait(void) { child_with(hk_recv_dontwait); }
static void child_writev(void) { child_with(hk_writev); }
static void child_connect(void) { child_with(hk_connect); }
static void child_setsockopt(void) { child_with(hk_setsockopt); }
static void child_main_read(void) { child_with(timer_starter); }

/* ---- in the parent: the same calls, buffers on the caller's own stack --- */

static int own_ok;

__attribute__((noinline)) static void own_calls(void* arg) {
    (void)arg;
    char data[8];
    struct sockaddr_in from;
    socklen_t l = sizeof(from);
    CHECK(recvfrom(u[0], data, sizeof(data), 0, (struct sockaddr*)&from, &l) == 4);
    CHECK(memcmp(data, "ping", 4) == 0 && l == sizeof(from) && from.sin_port == ua[1].sin_port);
    CHECK(sendto(u[0], "pong", 4, 0, (struct sockaddr*)&ua[1], sizeof(ua[1])) == 4);
    struct pollfd p[2] = {{u[1], POLLIN, 0}, {u[0], POLLIN, 0}};
    CHECK(poll(p, 2, 1000) == 1 && (p[0].revents & POLLIN) && p[1].revents == 0);
    CHECK(recvfrom(u[1], data, sizeof(data), 0, (struct sockaddr*)&from, &l) == 4);
    CHECK(memcmp(data, "pong", 4) == 0);
    own_ok = 1;
}

static void parent_case(void) {
    udp_pair();
    aco_rt_sched_t* s = test_one_stack_sched(ACO_RT_BACKEND_AUTO);
    aco_rt_spawn(s, test_buf_owner, NULL);       /* checks its bytes at the end */
    aco_rt_spawn(s, own_calls, NULL);
    CHECK(aco_rt_sched_run(s) == 0);
    aco_rt_sched_free(s);
    CHECK(own_ok);
    close(u[0]);
    close(u[1]);
}

int main(void) {
    setenv("ACO_CHECKED", "1", 1);
    if (!aco_checked()) {
        printf("test_checked_hook: this build ignores ACO_CHECKED (ASan or valgrind): it is off\n");
        return 0;
    }
    static const struct {
        const char* what;
        void (*fn)(void);
        const char* needles;
    } cases[] = {
        {"recvfrom's data into a parked co's frames", child_recvfrom_data,
         "handed on for writing |hk_recvfrom_data at|"},
        {"recvfrom's address into a parked co's frames", child_recvfrom_addr,
         "handed on for writing |hk_recvfrom_addr at|"},
        {"recvfrom's address length in a parked co's frames", child_recvfrom_len,
         "handed on for writing |hk_recvfrom_len at|"},
        {"sendto from a parked co's frames", child_sendto, "handed on for reading |hk_sendto at|"},
        {"poll of an array in a parked co's frames", child_poll,
         "handed on for writing |hk_poll at|"},
        {"read (to libc: the program's O_NONBLOCK) into a parked co's frames", child_read_nonblock,
         "handed on for writing |hk_read_nonblock at|"},
        {"recv with MSG_DONTWAIT into a parked co's frames", child_recv_dontwait,
         "handed on for writing |hk_recv_dontwait at|"},
        {"writev of a vector reaching a parked co's frames", child_writev,
         "handed on for reading |hk_writev at|"},
        {"connect to an address in a parked co's frames", child_connect,
         "handed on for reading |hk_connect at|"},
        {"setsockopt of a value in a parked co's frames", child_setsockopt,
         "handed on for reading |hk_setsockopt at|"},
        {"read by a timer's callback (main co) into a parked co's frames", child_main_read,
         "main co |handed on for writing |hk_main_read at|"},
    };
    int fails = 0;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char needles[256];
        snprintf(needles, sizeof(needles), "%sthe co whose stack it is, co 0x|test_buf_owner at",
                 cases[i].needles);
        fails += test_expect_fault(cases[i].what, cases[i].fn, needles);
    }
    parent_case();
    if (fails) {
        fprintf(stderr, "test_checked_hook: %d case(s) failed\n", fails);
        return 1;
    }
    printf("test_checked_hook: every hooked call handing a parked co's frames to the kernel "
           "faulted with its report; the same calls with the caller's own buffers worked\n");
    return 0;
}
