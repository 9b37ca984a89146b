/*
 * rt_main.c - a program on the runtime and the core, for the packaging
 * checks: tests/check_cmake.sh builds it through aco::rt (find_package,
 * add_subdirectory, FetchContent), as the main.c of the docs' CMake lines
 * and as the app.c of their pkg-config line; tests/check_install.sh through
 * pkg-config libaco_rt.  A scheduler runs a producer and a consumer on a
 * channel and a writer and a reader on a pipe (the I/O backend); a plain
 * libaco co yields squares to main before.  Exit status 0 iff every value
 * arrives, after printing "rt_consumer: ok".
 *
 * It prints the version of libaco and of the runtime, and the backend the
 * scheduler picked.  ACO_CONSUMER_EXPECT_EPOLL_ONLY, when defined, makes it
 * fail unless a scheduler that asks for io_uring cannot be made (a runtime
 * built without its io_uring backend).
 */
#include "aco.h"
#include "aco_rt.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

enum { COUNT = 100, SQUARES = 5 };

static int failures;

static void expect(int ok, const char* what) {
    if (!ok) {
        fprintf(stderr, "rt_consumer: FAIL: %s\n", what);
        failures++;
    }
}

/* The core: a co on a share stack yields 1, 4, 9, ... through its arg. */
static void squares(void) {
    int* out = aco_get_arg();
    for (int i = 1; i <= SQUARES; i++) {
        *out = i * i;
        aco_yield();
    }
    aco_exit();
}

static void core_part(void) {
    aco_thread_init(NULL);
    aco_t* main_co = aco_create(NULL, NULL, 0, NULL, NULL);
    aco_share_stack_t* sstk = aco_share_stack_new(0);
    int value = 0, got = 0;
    aco_t* co = aco_create(main_co, sstk, 0, squares, &value);
    for (int i = 1; i <= SQUARES; i++) {
        aco_resume(co);
        got += value == i * i;
    }
    aco_resume(co);
    expect(got == SQUARES && co->is_end, "the libaco co yields its squares and ends");
    aco_destroy(co);
    aco_share_stack_destroy(sstk);
    aco_destroy(main_co);
}

/* The runtime: a channel and a pipe, two cos on each. */
static aco_rt_chan_t* chan;
static long sum;
static int pipe_fds[2];
static char pipe_got[8];

static void producer(void* arg) {
    (void)arg;
    for (int i = 1; i <= COUNT; i++)
        expect(aco_rt_chan_send(chan, &i, -1) == 0, "chan_send");
    expect(aco_rt_chan_close(chan) == 0, "chan_close");
}

static void consumer(void* arg) {
    (void)arg;
    int v;
    while (aco_rt_chan_recv(chan, &v, -1) == 0) sum += v;
}

static void writer(void* arg) {
    (void)arg;
    aco_rt_sleep(1000000);      /* the reader waits in the backend first */
    expect(aco_rt_write(pipe_fds[1], "ping", 4, -1) == 4, "write to the pipe");
}

static void reader(void* arg) {
    (void)arg;
    ssize_t n = aco_rt_read(pipe_fds[0], pipe_got, sizeof(pipe_got) - 1,
                            aco_rt_now() + 10 * 1000000000LL);
    expect(n == 4 && memcmp(pipe_got, "ping", 4) == 0, "read \"ping\" from the pipe");
}

static void rt_part(void) {
    aco_rt_sched_t* s = aco_rt_sched_new(NULL);
    expect(s != NULL, "aco_rt_sched_new");
    if (!s) return;
    printf("rt_consumer: backend %s\n", aco_rt_backend_name(s));
    chan = aco_rt_chan_new(sizeof(int), 4);
    expect(chan != NULL && pipe(pipe_fds) == 0, "a channel and a pipe");
    aco_rt_spawn(s, consumer, NULL);
    aco_rt_spawn(s, producer, NULL);
    aco_rt_spawn(s, reader, NULL);
    aco_rt_spawn(s, writer, NULL);
    expect(aco_rt_sched_run(s) == 0, "aco_rt_sched_run");
    expect(sum == (long)COUNT * (COUNT + 1) / 2, "the consumer sums every element");
    aco_rt_chan_free(chan);
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    aco_rt_sched_free(s);
}

int main(void) {
    printf("rt_consumer: libaco %d.%d.%d, runtime %d.%d.%d\n", ACO_VERSION_MAJOR,
           ACO_VERSION_MINOR, ACO_VERSION_PATCH, ACO_RT_VERSION_MAJOR,
           ACO_RT_VERSION_MINOR, ACO_RT_VERSION_PATCH);
    core_part();
#ifdef ACO_CONSUMER_EXPECT_EPOLL_ONLY
    {
        aco_rt_opts_t o = {.backend = ACO_RT_BACKEND_URING};
        aco_rt_sched_t* u = aco_rt_sched_new(&o);
        expect(u == NULL && errno == ENOSYS, "no io_uring backend in an epoll-only runtime");
        if (u) aco_rt_sched_free(u);
    }
#endif
    rt_part();
    if (failures) return 1;
    printf("rt_consumer: ok\n");
    return 0;
}
