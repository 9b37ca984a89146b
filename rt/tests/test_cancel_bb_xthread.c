/* test_cancel_bb_xthread.c - cancels from other threads, from aco_rt.h
 * alone: a co of one pool thread parked without a deadline in each kind of
 * blocking call (sleep, sleep for good, semaphore, mutex, cond_wait, wait
 * group, channel receive and send, select, join, group join, read, recv,
 * wait, poll, accept, lend, signal wait, offload) is cancelled by a plain
 * thread, or by a co of the other pool thread: the call returns -ECANCELED
 * soon (well before a second), a cond_wait holds its mutex again, nothing
 * is taken from the objects (the element, the unit, the bytes stay for
 * the next taker), offload's drop runs once, and every later blocking
 * call of the co fails at once. */
#include "rt_test.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/un.h>

static int64_t in_ms(int ms) { return aco_rt_now() + ms * MS; }
static aco_rt_pool_t* pool;
static aco_rt_sched_t* S(int i) { return aco_rt_pool_sched(pool, (unsigned)i); }
static void drain(void) { CHECK_EQ(aco_rt_pool_wait(pool, ACO_RT_POOL_DRAIN, in_ms(20000)), 0); }

enum {
    OP_SLEEP, OP_SLEEP_GOOD, OP_SEM, OP_MUTEX, OP_COND, OP_WG, OP_RECV_CH, OP_SEND_CH,
    OP_SELECT, OP_JOIN, OP_GROUP, OP_READ, OP_RECV, OP_WAIT, OP_POLL, OP_ACCEPT, OP_LEND,
    OP_SIGWAIT, OP_OFFLOAD, OP_N
};
static const char* op_name[OP_N] = {
    "sleep", "sleep_until(-1)", "sem_wait", "mutex_lock", "cond_wait", "wg_wait",
    "chan_recv", "chan_send", "chan_select", "join", "group_join", "read", "recv", "wait",
    "poll", "accept", "recv_lend", "signal_wait", "offload"};

static aco_rt_sem_t sem, tgt_go, hold_go;
static aco_rt_mutex_t mx, cm;
static aco_rt_cond_t cv;
static aco_rt_wg_t wg;
static aco_rt_chan_t *ch_empty, *ch_full;
static aco_rt_co_t* target;
static aco_rt_group_t* grp;
static int pp[2], sp[2], lp[2], lsn;

static _Atomic int parked, ended;
static _Atomic int drops;
static int op, op_rc;
static int64_t op_end;
static aco_rt_co_t* victim;

static void* slow_fn(void* a) {
    usleep(50000);
    return a;
}
static void drop_fn(void* a, void* r) {
    (void)a;
    (void)r;
    atomic_fetch_add(&drops, 1);
}
static void target_fn(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_sem_wait(&tgt_go, in_ms(20000)), 0);
}
static void mutex_holder(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_mutex_lock(&mx, -1), 0);
    CHECK_EQ(aco_rt_sem_wait(&hold_go, in_ms(20000)), 0);
    CHECK_EQ(aco_rt_mutex_unlock(&mx), 0);
}

static int do_op(void) {
    static int v;
    static char buf[8];
    switch (op) {
    case OP_SLEEP: return aco_rt_sleep(INT64_MAX / 2);
    case OP_SLEEP_GOOD: return aco_rt_sleep_until(-1);
    case OP_SEM: return aco_rt_sem_wait(&sem, -1);
    case OP_MUTEX: return aco_rt_mutex_lock(&mx, -1);
    case OP_COND: {
        CHECK_EQ(aco_rt_mutex_lock(&cm, -1), 0);
        atomic_store(&parked, 1);
        int r = aco_rt_cond_wait(&cv, &cm, -1);
        CHECK_EQ(aco_rt_mutex_trylock(&cm), -EBUSY);
        CHECK_EQ(aco_rt_mutex_unlock(&cm), 0);     /* held again */
        return r;
    }
    case OP_WG: return aco_rt_wg_wait(&wg, -1);
    case OP_RECV_CH: return aco_rt_chan_recv(ch_empty, &v, -1);
    case OP_SEND_CH: v = 77; return aco_rt_chan_send(ch_full, &v, -1);
    case OP_SELECT: {
        static aco_rt_case_t c[2];
        c[0] = (aco_rt_case_t){ch_empty, ACO_RT_RECV, &v};
        c[1] = (aco_rt_case_t){ch_full, ACO_RT_SEND, &v};
        return aco_rt_chan_select(c, 2, NULL, -1);
    }
    case OP_JOIN: return aco_rt_join(target, -1);
    case OP_GROUP: return aco_rt_group_join(grp, -1);
    case OP_READ: return (int)aco_rt_read(pp[0], buf, 1, -1);
    case OP_RECV: return (int)aco_rt_recv(sp[0], buf, 1, 0, -1);
    case OP_WAIT: return aco_rt_wait(sp[0], POLLIN, -1);
    case OP_POLL: {
        static struct pollfd p[2];
        p[0] = (struct pollfd){sp[0], POLLIN, 0};
        p[1] = (struct pollfd){pp[0], POLLIN, 0};
        return aco_rt_poll(p, 2, -1);
    }
    case OP_ACCEPT: return aco_rt_accept(lsn, NULL, NULL, SOCK_CLOEXEC, -1);
    case OP_LEND: {
        const char* d;
        return (int)aco_rt_recv_lend(lp[0], &d, -1);
    }
    case OP_SIGWAIT: {
        static sigset_t set;
        sigemptyset(&set);
        return aco_rt_signal_wait(&set, NULL, -1);
    }
    case OP_OFFLOAD: return aco_rt_offload(slow_fn, NULL, drop_fn, NULL, -1);
    }
    abort();
}

static void victim_fn(void* arg) {
    (void)arg;
    if (op == OP_LEND) {
        /* a lend that takes bytes first: the multishot armed (io_uring) */
        const char* d;
        CHECK_EQ(aco_rt_write(lp[1], "L", 1, -1), 1);
        CHECK_EQ(aco_rt_recv_lend(lp[0], &d, in_ms(2000)), 1);
        CHECK_EQ(aco_rt_lend_return(d), 0);
    }
    if (op != OP_COND) atomic_store(&parked, 1);
    op_rc = do_op();
    op_end = aco_rt_now();
    /* every later blocking call fails at once */
    CHECK_EQ(aco_rt_sem_wait(&sem, -1), -ECANCELED);
    CHECK_EQ(aco_rt_sleep(0), -ECANCELED);
    atomic_store(&ended, 1);
}

static _Atomic int canceller_go;
static void canceller_co(void* arg) {
    (void)arg;
    while (!atomic_load(&canceller_go)) CHECK_EQ(aco_rt_sleep(1 * MS), 0);
    CHECK_EQ(aco_rt_cancel(victim), 0);
}

static void setup(void) {
    aco_rt_sem_init(&sem, 0);
    aco_rt_sem_init(&tgt_go, 0);
    aco_rt_sem_init(&hold_go, 0);
    aco_rt_mutex_init(&mx);
    aco_rt_mutex_init(&cm);
    aco_rt_cond_init(&cv);
    aco_rt_wg_init(&wg);
    CHECK_EQ(aco_rt_wg_add(&wg, 1), 0);
    ch_empty = aco_rt_chan_new(sizeof(int), 1);
    ch_full = aco_rt_chan_new(sizeof(int), 1);
    CHECK(ch_empty && ch_full);
    CHECK_EQ(pipe(pp), 0);
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sp), 0);
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, lp), 0);
    lsn = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK_GE(lsn, 0);
    struct sockaddr_un a;
    memset(&a, 0, sizeof(a));
    a.sun_family = AF_UNIX;
    snprintf(a.sun_path + 1, sizeof(a.sun_path) - 1, "aco_bb_cx_%d_%d", (int)getpid(),
             test_backend_id);
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(a.sun_path + 1));
    CHECK_EQ(bind(lsn, (struct sockaddr*)&a, len), 0);
    CHECK_EQ(listen(lsn, 8), 0);
}

static void one(int from_co) {
    atomic_store(&parked, 0);
    atomic_store(&ended, 0);
    atomic_store(&canceller_go, 0);
    op_rc = 12345;
    if (op == OP_JOIN) {
        target = aco_rt_spawn(S(0), target_fn, NULL);
        CHECK(target != NULL);
    }
    if (op == OP_GROUP) {
        grp = aco_rt_group_new(S(0));
        CHECK(grp != NULL);
        CHECK_EQ(aco_rt_group_spawn(grp, target_fn, NULL, NULL), 0);
    }
    if (op == OP_MUTEX) {
        CHECK_EQ(aco_rt_detach(aco_rt_spawn(S(1), mutex_holder, NULL)), 0);
        usleep(5000);
    }
    atomic_store(&drops, 0);
    victim = aco_rt_spawn(S(0), victim_fn, NULL);
    CHECK(victim != NULL);
    if (from_co) CHECK_EQ(aco_rt_detach(aco_rt_spawn(S(1), canceller_co, NULL)), 0);
    while (!atomic_load(&parked)) sched_yield();
    usleep(10000);              /* parked by now */
    CHECK_EQ(atomic_load(&ended), 0);
    int64_t t0 = aco_rt_now();
    if (from_co) atomic_store(&canceller_go, 1);
    else CHECK_EQ(aco_rt_cancel(victim), 0);
    while (!atomic_load(&ended)) {
        if (aco_rt_now() - t0 > 5000 * MS)
            TEST_FAIL_AT(__FILE__, __LINE__, "%s: a cancel from %s did not end it in 5 s",
                         op_name[op], from_co ? "a co" : "a thread");
        usleep(500);
    }
    if (op_rc != -ECANCELED)
        TEST_FAIL_AT(__FILE__, __LINE__, "%s cancelled from %s: %d", op_name[op],
                     from_co ? "a co" : "a thread", op_rc);
    CHECK_LT(op_end - t0, 1000 * MS);
    CHECK_EQ(aco_rt_detach(victim), 0);
    /* the objects are as they were */
    int v = 0;
    char c;
    switch (op) {
    case OP_SEM: CHECK_EQ(aco_rt_sem_trywait(&sem), -EAGAIN); break;
    case OP_MUTEX: aco_rt_sem_post(&hold_go); break;
    case OP_JOIN: aco_rt_sem_post(&tgt_go); break;
    case OP_GROUP: aco_rt_sem_post(&tgt_go); break;
    case OP_SEND_CH: case OP_SELECT: CHECK_EQ(aco_rt_chan_len(ch_full), 1); break;
    case OP_READ:
        CHECK_EQ(write(pp[1], "r", 1), 1);
        CHECK_EQ(read(pp[0], &c, 1), 1);
        break;
    case OP_RECV: case OP_WAIT: case OP_POLL:
        CHECK_EQ(write(sp[1], "s", 1), 1);
        CHECK_EQ(recv(sp[0], &c, 1, 0), 1);
        CHECK_EQ(c, 's');
        break;
    }
    (void)v;
    drain();
    if (op == OP_JOIN) {
        /* the cancelled join returned: the handle is the program's again */
        CHECK_EQ(aco_rt_detach(target), 0);
        drain();
    }
    if (op == OP_GROUP) {
        drain();
        CHECK_EQ(aco_rt_group_free(grp), 0);
    }
    if (op == OP_OFFLOAD) {
        for (int i = 0; i < 400 && atomic_load(&drops) == 0; i++) usleep(1000);
        CHECK_EQ(atomic_load(&drops), 1);
    }
}

static void filler(void* arg) {
    (void)arg;
    static int nine = 9;
    CHECK_EQ(aco_rt_chan_send(ch_full, &nine, in_ms(1000)), 0);
}
static void lend_after(void) {
    /* the cancelled lends took nothing: the next bytes go to a new lender */
    CHECK_EQ(write(lp[1], "Z", 1), 1);
}
static void lend_reader(void* arg) {
    (void)arg;
    const char* d;
    CHECK_EQ(aco_rt_recv_lend(lp[0], &d, in_ms(2000)), 1);
    CHECK_EQ(d[0], 'Z');
    CHECK_EQ(aco_rt_lend_return(d), 0);
}

static void body(aco_rt_pool_t* p) {
    pool = p;
    setup();
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(S(1), filler, NULL)), 0);
    drain();
    for (op = 0; op < OP_N; op++) {
        one(0);
        one(1);
    }
    lend_after();
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(S(0), lend_reader, NULL)), 0);
    drain();
}

static void after_pool(void) {
    CHECK_EQ(aco_rt_chan_free(ch_empty), 0);
    CHECK_EQ(aco_rt_chan_free(ch_full), 0);
    int fds[] = {pp[0], pp[1], sp[0], sp[1], lp[0], lp[1], lsn};
    for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++) close(fds[i]);
}

int main(void) {
    test_on_pools(2, body, after_pool);
    puts("test_cancel_bb_xthread: ok");
    return 0;
}
