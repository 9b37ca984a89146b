/* test_free_close.c - aco_rt_close called while aco_rt_sched_free destroys
 * the scheduler's cos: an offload whose fn ended before its co ran again
 * has its drop run in the freeing call, and that drop closes a socket a
 * parked co reads (an io_uring operation holding the file).  The close
 * may not hand on completions then (a co whose record is freed already
 * would be woken: ASan's heap-use-after-free); the free still waits for
 * every operation.  On every backend; under ASan it is the check. */
#define _GNU_SOURCE
#include "rt_test.h"

#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int A[2], B[2];
static aco_rt_sched_t* S;
static int dropped, w_ran;

static void* slow_fn(void* arg) {
    (void)arg;
    struct timespec t = {0, 2 * 1000 * 1000};
    nanosleep(&t, NULL);
    return (void*)1;
}

/* Run in aco_rt_sched_free (the co that asked is gone): close A[0], on
 * which X's read still waits. */
static void drop(void* arg, void* res) {
    (void)arg, (void)res;
    dropped++;
    CHECK_EQ(aco_rt_close(A[0]), 0);
}

static void reader_a(void* arg) {
    (void)arg;
    char c;
    aco_rt_read(A[0], &c, 1, -1);       /* (destroyed while it waits) */
}

static void offloader(void* arg) {
    (void)arg;
    void* r;
    aco_rt_offload(slow_fn, NULL, drop, &r, -1);
}

/* Woken by a byte, never run: the scheduler stops first. */
static void reader_b(void* arg) {
    (void)arg;
    char c;
    aco_rt_read(B[0], &c, 1, -1);
    w_ran = 1;
}

/* The byte for reader_b, then the thread held until the helper ended
 * slow_fn (its co woken, not run), then the stop. */
static void stopper(void* arg) {
    (void)arg;
    CHECK_EQ(write(B[1], "x", 1), 1);
    struct timespec t = {0, 30 * 1000 * 1000};
    nanosleep(&t, NULL);
    aco_rt_sched_stop(S);
}

static int run(int backend) {
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, A), 0);
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, B), 0);
    S = test_sched_on(backend, NULL);
    dropped = w_ran = 0;
    aco_rt_fn_t fns[] = {reader_a, offloader, reader_b, stopper};
    for (int i = 0; i < 4; i++) CHECK(aco_rt_spawn(S, fns[i], NULL) != NULL);
    CHECK_EQ(aco_rt_sched_run(S), 0);
    aco_rt_sched_free(S);
    CHECK_EQ(w_ran, 0);
    /* the drop ran (fn had ended) and closed A[0]: its peer sees the end */
    if (dropped) {
        char c;
        CHECK_EQ(read(A[1], &c, 1), 0);
    } else {
        close(A[0]);            /* (fn had not ended: the drop comes later) */
    }
    close(A[1]);
    close(B[0]);
    close(B[1]);
    return 0;
}

int main(void) {
    test_watchdog();
    test_backends_apart(run);
    printf("test_free_close: ok\n");
    return 0;
}
