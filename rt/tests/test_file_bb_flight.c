/* test_file_bb_flight.c - file calls in flight, black box: a deadline and a
 * cancel that come while openat waits on a FIFO ([meta]: kept exactly; a
 * descriptor opened after the return is closed by the runtime), while
 * preadv / pwritev wait on a pipe or FIFO ([data]: nothing moved, no byte
 * lost), aco_rt_close under a waiting pread, a writer whose reader is
 * gone (-EPIPE, never SIGPIPE, the mask and pending set untouched), a
 * scheduler freed under a waiting call. */
#include "bb_file.h"

#include <sys/uio.h>

static char fifo[PATH_MAX];
static int base_fds;
static int fifo_n;

/* A FIFO of its own for each case (a late open of one case must not
 * meet the next): its path in fifo. */
static void new_fifo(void) {
    char name[32];
    snprintf(name, sizeof(name), "fifo%d.%d", (int)getpid(), fifo_n++);
    CHECK_EQ(mkfifo(bb_path(fifo, name), 0600), 0);
}

/* A late writer's open (and the runtime's close of it) shows to a reader
 * as POLLHUP: look for it for 300 ms (io_uring calls the open off; a
 * helper's open goes through at once).  An observation window, not a
 * bound: a slower late open is only not looked at. */
static void late_writer_gone(int rd) {
    struct pollfd p = {rd, POLLIN, 0};
    int64_t t0 = aco_rt_now();
    int r = poll(&p, 1, 300);
    if (getenv("BB_VERBOSE")) fprintf(stderr, "[%s] late writer: %d %#x after %lld ms\n", test_backend_label, r, p.revents, (long long)((aco_rt_now() - t0) / MS));
}

/* Is an open of the runtime's still in the kernel, one that a late other
 * end lets through after its co left?  io_uring's is an operation in
 * flight (aco_rt_stats' io_inflight, above ur_base: the count when the
 * case began); a helper's is a thread of the process blocked in openat or
 * openat2 (the first field of /proc/self/task/T/syscall).  Once none is,
 * no descriptor of theirs can appear any more: each is there or closed. */
static uint64_t ur_base;
static uint64_t io_inflight(void) {
    aco_rt_stats_t st = {0};            /* (no scheduler: none) */
    aco_rt_stats(NULL, &st);
    return st.io_inflight;
}
static int open_in_kernel(void) {
    if (io_inflight() > ur_base) return 1;
    DIR* d = opendir("/proc/self/task");
    CHECK(d != NULL);
    struct dirent* e;
    int busy = 0;
    while (!busy && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char p[64], b[64] = "";
        snprintf(p, sizeof(p), "/proc/self/task/%s/syscall", e->d_name);
        FILE* f = fopen(p, "r");
        if (f == NULL) continue;        /* (a thread that just ended) */
        long nr;
        if (fgets(b, sizeof(b), f) && sscanf(b, "%ld", &nr) == 1)
            busy = nr == SYS_openat || nr == SYS_openat2;
        fclose(f);
    }
    closedir(d);
    return busy;
}

/* The process's descriptor count once no open of the runtime is in the
 * kernel and the count is n (at most 5 s, in 5 ms sleeps): a late open
 * is then either seen not closed, or was closed.  (The count that ends
 * the wait is the one returned: a second look could meet a late open
 * that came in between, before the runtime had its turn to close it.) */
static int fds_settle(int n) {
    int64_t end = aco_rt_now() + 5000 * MS;
    int got;
    for (;;) {
        int busy = open_in_kernel();
        got = test_open_fds();
        if ((!busy && got == n) || aco_rt_now() >= end) return got;
        if (aco_rt_self()) {
            aco_rt_sleep(5 * MS);
        } else {
            struct timespec ts = {0, 5 * MS};
            nanosleep(&ts, NULL);
        }
    }
}

/* openat of a FIFO for writing with no reader: the deadline, kept. */
static void open_deadline_co(void* arg) {
    (void)arg;
    ur_base = io_inflight();
    int before = test_open_fds();
    new_fifo();
    int64_t t0 = aco_rt_now();
    int r = aco_rt_openat(AT_FDCWD, fifo, O_WRONLY | O_CLOEXEC, 0, t0 + 300 * MS);
    int64_t t1 = aco_rt_now();
    CHECK_EQ(r, -ETIMEDOUT);
    CHECK_GE(t1 - t0, 300 * MS);
    CHECK_LT(t1 - t0, 3000 * MS);
    /* a reader now lets a late open through, if one still waits: the
     * runtime closes what it opens after the return */
    int rd = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    CHECK_GE(rd, 0);
    late_writer_gone(rd);
    CHECK_EQ(fds_settle(before + 1), before + 1);
    close(rd);
    /* the same for reading: no writer */
    new_fifo();
    t0 = aco_rt_now();
    r = aco_rt_openat(AT_FDCWD, fifo, O_RDONLY | O_CLOEXEC, 0, t0 + 300 * MS);
    t1 = aco_rt_now();
    CHECK_EQ(r, -ETIMEDOUT);
    CHECK_GE(t1 - t0, 300 * MS);
    CHECK_LT(t1 - t0, 3000 * MS);
    int wr = open(fifo, O_RDWR | O_CLOEXEC); /* a writer (and a reader) */
    CHECK_GE(wr, 0);
    CHECK_EQ(write(wr, "x", 1), 1);
    CHECK_EQ(fds_settle(before + 1), before + 1);
    close(wr);
}

/* openat of a FIFO, cancelled by another co while it waits. */
static aco_rt_co_t* victim;
static int victim_result;
static void open_victim(void* arg) {
    int flags = *(int*)arg;
    victim_result = aco_rt_openat(AT_FDCWD, fifo, flags | O_CLOEXEC, 0, -1);
}
static void open_cancel_co(void* arg) {
    static int flags;
    flags = *(int*)arg;
    ur_base = io_inflight();
    int before = test_open_fds();
    new_fifo();
    victim_result = 1;
    victim = aco_rt_spawn(NULL, open_victim, &flags);
    CHECK(victim != NULL);
    /* let it start and park */
    for (int i = 0; i < 5; i++) aco_rt_yield();
    aco_rt_sleep(50 * MS);
    CHECK_EQ(victim_result, 1);
    int64_t t0 = aco_rt_now();
    CHECK_EQ(aco_rt_cancel(victim), 0);
    CHECK_EQ(aco_rt_join(victim, aco_rt_in_ms(5000)), 0);
    CHECK_LT(aco_rt_now() - t0, 3000 * MS);
    CHECK_EQ(victim_result, -ECANCELED);
    /* let a late open through; it must be closed */
    int o = open(fifo, ((flags & O_ACCMODE) == O_WRONLY ? O_RDONLY | O_NONBLOCK : O_RDWR) | O_CLOEXEC);
    CHECK_GE(o, 0);
    if ((flags & O_ACCMODE) == O_RDONLY) CHECK_EQ(write(o, "y", 1), 1);
    else late_writer_gone(o);
    CHECK_EQ(fds_settle(before + 1), before + 1);
    close(o);
}

/* preadv on an empty pipe: deadline, then cancel; bytes that come after
 * are all there. */
static int pp[2];
static int read_result;
static void pipe_reader(void* arg) {
    char* buf = arg;    /* heap, or NULL: on this co's stack */
    char st[64];
    struct iovec v = {buf ? buf : st, 64};
    read_result = (int)aco_rt_preadv(pp[0], &v, 1, -1, 0, -1);
}
static void pipe_flight_co(void* arg) {
    (void)arg;
    CHECK_EQ(pipe2(pp, O_CLOEXEC), 0);
    char* heapb = malloc(64);
    char st[64];
    struct iovec v = {st, sizeof(st)};
    int64_t t0 = aco_rt_now();
    CHECK_EQ(aco_rt_preadv(pp[0], &v, 1, -1, 0, t0 + 200 * MS), -ETIMEDOUT);
    CHECK_GE(aco_rt_now() - t0, 200 * MS);
    v.iov_base = heapb;
    t0 = aco_rt_now();
    CHECK_EQ(aco_rt_pread(pp[0], heapb, 64, 0, t0 + 200 * MS), BB_SYS(pread(pp[0], heapb, 64, 0)));
    CHECK_EQ(aco_rt_preadv(pp[0], &v, 1, -1, 0, t0 + 200 * MS), -ETIMEDOUT);
    for (int k = 0; k < 2; k++) {
        read_result = 1;
        aco_rt_co_t* c = aco_rt_spawn(NULL, pipe_reader, k ? heapb : NULL);
        CHECK(c != NULL);
        aco_rt_sleep(50 * MS);
        CHECK_EQ(read_result, 1);
        CHECK_EQ(aco_rt_cancel(c), 0);
        CHECK_EQ(aco_rt_join(c, aco_rt_in_ms(5000)), 0);
        CHECK_EQ(read_result, -ECANCELED);
    }
    /* nothing was taken from the pipe */
    CHECK_EQ(write(pp[1], "0123456789", 10), 10);
    v.iov_base = st;
    CHECK_EQ(aco_rt_preadv(pp[0], &v, 1, -1, 0, aco_rt_in_ms(1000)), 10);
    CHECK_EQ(memcmp(st, "0123456789", 10), 0);

    /* aco_rt_close ends a waiting read: -EBADF */
    read_result = 1;
    aco_rt_co_t* c = aco_rt_spawn(NULL, pipe_reader, heapb);
    aco_rt_sleep(50 * MS);
    CHECK_EQ(read_result, 1);
    CHECK_EQ(aco_rt_close(pp[0]), 0);
    CHECK_EQ(aco_rt_join(c, aco_rt_in_ms(5000)), 0);
    CHECK_EQ(read_result, -EBADF);
    close(pp[1]);

    /* a full pipe: pwritev waits, its deadline moves nothing */
    CHECK_EQ(pipe2(pp, O_CLOEXEC | O_NONBLOCK), 0);
    int cap = fcntl(pp[1], F_GETPIPE_SZ);
    CHECK_GT(cap, 0);
    char* fillb = calloc(1, (size_t)cap);
    CHECK_EQ(write(pp[1], fillb, (size_t)cap), cap);
    CHECK_EQ(write(pp[1], "z", 1), -1);
    int fl = fcntl(pp[1], F_GETFL);
    CHECK_EQ(fcntl(pp[1], F_SETFL, fl & ~O_NONBLOCK), 0); /* blocking, as a program's */
    struct iovec w = {"abc", 3};
    t0 = aco_rt_now();
    CHECK_EQ(aco_rt_pwritev(pp[1], &w, 1, -1, 0, t0 + 200 * MS), -ETIMEDOUT);
    CHECK_GE(aco_rt_now() - t0, 200 * MS);
    CHECK_EQ(aco_rt_pwritev(pp[1], &w, 1, -1, 0, 0), -ETIMEDOUT);
    /* drain: exactly the fill came through */
    CHECK_EQ(fcntl(pp[0], F_SETFL, O_NONBLOCK), 0);
    CHECK_EQ(read(pp[0], fillb, (size_t)cap), cap);
    CHECK_EQ(read(pp[0], fillb, 1), -1);
    CHECK_EQ(errno, EAGAIN);
    /* the thread never blocked: the descriptor is as the program left it */
    CHECK_EQ(fcntl(pp[1], F_GETFL) & O_NONBLOCK, 0);
    close(pp[0]);
    close(pp[1]);
    free(fillb);
    free(heapb);
}

/* -EPIPE, never SIGPIPE, with the default disposition; and with SIGPIPE
 * blocked and one already pending: it stays pending, none added. */
static void epipe_co(void* arg) {
    (void)arg;
    int p[2];
    CHECK_EQ(pipe2(p, O_CLOEXEC), 0);
    close(p[0]);
    char st[16] = "abcdefgh";
    struct iovec v = {st, 8};
    CHECK_EQ(aco_rt_pwritev(p[1], &v, 1, -1, 0, -1), -EPIPE);
    CHECK_EQ(aco_rt_pwrite(p[1], st, 8, 0, -1), BB_SYS(pwrite(p[1], st, 8, 0)) == -ESPIPE ? -ESPIPE : -EPIPE);
    CHECK_EQ(aco_rt_write(p[1], st, 8, -1), -EPIPE);
    CHECK_EQ(aco_rt_writev(p[1], &v, 1, -1), -EPIPE);
    {
        aco_rt_bufio_t* b = aco_rt_bufio_new(p[1], 0, 0);
        CHECK(b != NULL);
        CHECK_EQ(aco_rt_bufio_write(b, st, 8, -1), 8);
        CHECK_EQ(aco_rt_bufio_flush(b, -1), -EPIPE);
        aco_rt_bufio_free(b);
    }
    close(p[1]);
    /* a FIFO whose reader left */
    new_fifo();
    int r = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    CHECK_GE(r, 0);
    int w = aco_rt_openat(AT_FDCWD, fifo, O_WRONLY | O_CLOEXEC, 0, aco_rt_in_ms(2000));
    CHECK_GE(w, 0);
    close(r);
    CHECK_EQ(aco_rt_pwritev(w, &v, 1, -1, 0, -1), -EPIPE);
    close(w);
    /* SIGPIPE blocked with one pending: still exactly that one */
    sigset_t pipe_set, old;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    CHECK_EQ(pthread_sigmask(SIG_BLOCK, &pipe_set, &old), 0);
    CHECK_EQ(raise(SIGPIPE), 0);
    CHECK_EQ(pipe2(p, O_CLOEXEC), 0);
    close(p[0]);
    CHECK_EQ(aco_rt_pwritev(p[1], &v, 1, -1, 0, -1), -EPIPE);
    sigset_t pend;
    CHECK_EQ(sigpending(&pend), 0);
    CHECK(sigismember(&pend, SIGPIPE));
    struct timespec z = {0, 0};
    CHECK_EQ(sigtimedwait(&pipe_set, NULL, &z), SIGPIPE);
    CHECK_EQ(sigtimedwait(&pipe_set, NULL, &z), -1); /* none added */
    CHECK_EQ(aco_rt_pwritev(p[1], &v, 1, -1, 0, -1), -EPIPE);
    CHECK_EQ(sigpending(&pend), 0);
    CHECK(!sigismember(&pend, SIGPIPE));
    sigset_t now;
    CHECK_EQ(pthread_sigmask(SIG_SETMASK, &old, &now), 0);
    CHECK(sigismember(&now, SIGPIPE));
    close(p[1]);
}

/* a directory through the plain I/O calls */
static void dir_co(void* arg) {
    (void)arg;
    int d = open(bb_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    CHECK_GE(d, 0);
    char st[32] = {0};
    CHECK_EQ(aco_rt_read(d, st, sizeof(st), aco_rt_in_ms(1000)), -EISDIR);
    struct iovec v = {st, sizeof(st)};
    CHECK_EQ(aco_rt_readv(d, &v, 1, aco_rt_in_ms(1000)), -EISDIR);
    CHECK_EQ(aco_rt_write(d, st, 1, aco_rt_in_ms(1000)), -EBADF);
    close(d);
}

/* a scheduler freed while its co waits in preadv on a pipe and in openat
 * of a FIFO: no hang, no crash, the descriptors given back */
static void park_read(void* arg) {
    (void)arg;
    char st[64];
    struct iovec v = {st, sizeof(st)};
    aco_rt_preadv(pp[0], &v, 1, -1, 0, -1);
    CHECK(0);
}
static void park_open(void* arg) {
    (void)arg;
    aco_rt_openat(AT_FDCWD, fifo, O_WRONLY | O_CLOEXEC, 0, -1);
    CHECK(0);
}
static void stop_co(void* arg) {
    aco_rt_sleep(100 * MS);
    aco_rt_sched_stop((aco_rt_sched_t*)arg);
}
static void free_under(void) {
    CHECK_EQ(pipe2(pp, O_CLOEXEC), 0);
    new_fifo();
    aco_rt_sched_t* s = test_sched_on(test_backend_id, NULL);
    CHECK(aco_rt_spawn(s, park_read, NULL) != NULL);
    CHECK(aco_rt_spawn(s, park_open, NULL) != NULL);
    aco_rt_co_t* st = aco_rt_spawn(s, stop_co, s);
    CHECK_EQ(aco_rt_detach(st), 0);
    CHECK_EQ(aco_rt_sched_run(s), 0);
    aco_rt_sched_free(s);
    close(pp[0]);
    close(pp[1]);
    /* let the helper's late open finish and be closed: a reader */
    int r = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    CHECK_GE(r, 0);
    late_writer_gone(r);
    ur_base = 0;                /* (the scheduler is gone) */
    int got = fds_settle(base_fds + 1);
#ifndef ACO_USE_VALGRIND /* (memcheck's own descriptors come and go) */
    CHECK_EQ(got, base_fds + 1);
#else
    (void)got;
#endif
    close(r);
}

static void flight_backend(void) {
    bb_run(NULL, open_deadline_co, NULL);
    int wr = O_WRONLY, rd = O_RDONLY;
    bb_run(NULL, open_cancel_co, &wr);
    bb_run(NULL, open_cancel_co, &rd);
    bb_run(NULL, pipe_flight_co, NULL);
    aco_rt_opts_t o = {0};
    o.share_stacks = 1;
    bb_run(&o, pipe_flight_co, NULL);
    bb_run(NULL, epipe_co, NULL);
    bb_run(NULL, dir_co, NULL);
    free_under();
#ifndef ACO_USE_VALGRIND /* (memcheck's own descriptors come and go) */
    CHECK_EQ(test_open_fds(), base_fds);
#endif
}

int main(void) {
    test_watchdog();
    signal(SIGPIPE, SIG_DFL);
    bb_mkdir();
    base_fds = test_open_fds();
    bb_apart(flight_backend);
    printf("test_file_bb_flight: ok\n");
    return 0;
}
