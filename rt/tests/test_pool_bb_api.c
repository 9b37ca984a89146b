/* test_pool_bb_api.c - pools from aco_rt.h alone ("Pools: a scheduler
 * thread per core"), both backends:
 *  - pool_new: threads 0 is one per online CPU, a given count, each thread
 *    its own scheduler (pool_sched(i) distinct, NULL past the end, also
 *    UINT_MAX); a thread's aco_rt_sched_new refusal (a bad backend:
 *    EINVAL, a 2^60-byte stack: ENOMEM) with no thread left; EAGAIN when a
 *    thread cannot be made (RLIMIT_NPROC, in a child, after some were
 *    made): none left; pin (thread i on the i-th CPU the creator may
 *    use, also under a one-CPU mask); the threads asleep when idle (their
 *    CPU time);
 *  - pool_spawn: fn NULL EINVAL; opts (name, private buffer); a co stays
 *    on the thread it started on across yields, sleeps and cross-thread
 *    wakes; a co spawned from a pool co never starts on the spawner's
 *    thread while the spawner runs; a save stack over 1 GiB ENOMEM;
 *    handles as aco_rt_spawn's (joined from
 *    another scheduler's co, -ETIMEDOUT keeps it, detached from a plain
 *    thread); many spawns from two plain threads at once;
 *    aco_rt_spawn(pool_sched(i)) running on thread i;
 *  - pool_wait: -EINVAL (NULL, a bad how) and -EDEADLK (from a pool co,
 *    from a pool thread's timer callback) with nothing cancelled; DRAIN
 *    counting cos spawned into the pool's schedulers, group members and
 *    finished joinable cos; CANCEL with a passed deadline still cancelling,
 *    with a near one -ETIMEDOUT never early while shielded cos go on, and
 *    every later blocking call of a cancelled co failing; a wait from a co
 *    of another scheduler blocking that thread (its other cos do not run);
 *    from another pool's co; from two plain threads at once;
 *  - pool_free: -EDEADLK from a pool co and a pool thread's callback
 *    (nothing done: the pool works on); a busy pool (cos that only yield,
 *    parked cos, a mutex holder: the mutex stays locked, no key destructor
 *    runs) freed; a pool group's joiner on another scheduler woken by the
 *    free (0), the group then sized, joined, cancelled and freed. */
#define _GNU_SOURCE
#include "rt_test.h"

#include <dirent.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <time.h>

static int64_t in_ms(int ms) { return aco_rt_now() + ms * MS; }

/* the threads of this process now (io_uring's workers, iou-*, are the
 * kernel's: not counted) */
static int task_count(void) {
    DIR* d = opendir("/proc/self/task");
    CHECK(d != NULL);
    int n = 0;
    struct dirent* e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char path[300], comm[64] = "";
        snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
        FILE* f = fopen(path, "r");
        if (f == NULL) continue;            /* gone meanwhile */
        if (fgets(comm, sizeof(comm), f) == NULL) comm[0] = 0;
        fclose(f);
        if (strncmp(comm, "iou-", 4) != 0) n++;
    }
    closedir(d);
    return n;
}
/* wait (at most 5 s) for the task count to come down to want */
static int settle_tasks(int want) {
    int64_t end = aco_rt_now() + 5000 * MS;
    int n;
    while ((n = task_count()) > want && aco_rt_now() < end) usleep(1000);
    return n;
}

static aco_rt_pool_t* new_pool(unsigned threads, int b) {
    aco_rt_pool_opts_t o;
    memset(&o, 0, sizeof(o));
    o.threads = threads;
    o.sched.backend = b;
    aco_rt_pool_t* p = aco_rt_pool_new(&o);
    CHECK(p != NULL);
    return p;
}

/* ---------------- pool_new ---------------- */

static aco_rt_sched_t* _Atomic where;
static pthread_t _Atomic where_thread;
static void where_fn(void* arg) {
    (void)arg;
    atomic_store(&where_thread, pthread_self());
    atomic_store(&where, aco_rt_sched_current());
}
/* run where_fn on thread i's scheduler (spawned there with aco_rt_spawn):
 * the thread it ran on */
static pthread_t run_on(aco_rt_pool_t* p, unsigned i) {
    atomic_store(&where, NULL);
    aco_rt_co_t* c = aco_rt_spawn(aco_rt_pool_sched(p, i), where_fn, NULL);
    CHECK(c != NULL);
    CHECK_EQ(aco_rt_detach(c), 0);
    int64_t end = in_ms(5000);
    while (atomic_load(&where) == NULL) {
        CHECK_LT(aco_rt_now(), end);
        usleep(200);
    }
    CHECK(atomic_load(&where) == aco_rt_pool_sched(p, i));
    return atomic_load(&where_thread);
}

static void pool_new_cases(int b) {
    int base = task_count();
    aco_rt_pool_opts_t o;
    /* a thread's aco_rt_sched_new refusal, no thread left */
    memset(&o, 0, sizeof(o));
    o.threads = 3;
    o.sched.backend = 42;
    errno = 0;
    CHECK(aco_rt_pool_new(&o) == NULL);
    CHECK_EQ(errno, EINVAL);
    CHECK_EQ(settle_tasks(base), base);
    memset(&o, 0, sizeof(o));
    o.threads = 3;
    o.sched.backend = b;
    o.sched.stack_size = (size_t)1 << 60;
    errno = 0;
    CHECK(aco_rt_pool_new(&o) == NULL);
    CHECK_EQ(errno, ENOMEM);
    CHECK_EQ(settle_tasks(base), base);

    /* threads 0: one per online CPU */
    o.sched.stack_size = 0;
    o.threads = 0;
    aco_rt_pool_t* p = aco_rt_pool_new(&o);
    CHECK(p != NULL);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    CHECK_EQ(aco_rt_pool_threads(p), ncpu);
    CHECK(aco_rt_pool_sched(p, (unsigned)ncpu) == NULL);
    CHECK_EQ(aco_rt_pool_free(p), 0);
    CHECK_EQ(settle_tasks(base), base);

    /* NULL opts: the defaults (a thread per online CPU) */
    p = aco_rt_pool_new(NULL);
    CHECK(p != NULL);
    CHECK_EQ(aco_rt_pool_threads(p), ncpu);
    CHECK_EQ(aco_rt_pool_free(p), 0);

    /* three threads, three schedulers, each on its own thread */
    p = new_pool(3, b);
    CHECK_EQ(aco_rt_pool_threads(p), 3);
    pthread_t th[3];
    for (unsigned i = 0; i < 3; i++) {
        aco_rt_sched_t* s = aco_rt_pool_sched(p, i);
        CHECK(s != NULL);
        CHECK(strcmp(aco_rt_backend_name(s), test_backend_str(b)) == 0);
        th[i] = run_on(p, i);
        CHECK(!pthread_equal(th[i], pthread_self()));
        for (unsigned j = 0; j < i; j++) {
            CHECK(aco_rt_pool_sched(p, j) != s);
            CHECK(!pthread_equal(th[j], th[i]));
        }
        CHECK(run_on(p, i) == th[i]);         /* the same thread again */
    }
    CHECK(aco_rt_pool_sched(p, 3) == NULL);
    CHECK(aco_rt_pool_sched(p, UINT_MAX) == NULL);
    CHECK_EQ(task_count(), base + 3);
    CHECK_EQ(aco_rt_pool_wait(p, ACO_RT_POOL_DRAIN, in_ms(5000)), 0);
    CHECK_EQ(aco_rt_pool_free(p), 0);
    CHECK_EQ(settle_tasks(base), base);
}

/* pin: thread i on one CPU only, the (i modulo their number)-th of those
 * the creating thread may run on (CPU i when it may run on all).  Then
 * the same with the creator kept to its last CPU alone (sched_setaffinity,
 * as taskset does): every thread on that CPU, none on a CPU the creator
 * was kept off. */
static _Atomic int pin_cpu_count, pin_cpu_first;
static void pin_probe(void* arg) {
    (void)arg;
    cpu_set_t set;
    CPU_ZERO(&set);
    CHECK_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
    int first = -1;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set) && first < 0) first = c;
    atomic_store(&pin_cpu_first, first);
    atomic_store(&pin_cpu_count, CPU_COUNT(&set));
}
static void pin_check(int b, const cpu_set_t* mine) {
    int cpus[CPU_SETSIZE], n = 0;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, mine)) cpus[n++] = c;
    CHECK(n > 0);
    aco_rt_pool_opts_t o;
    memset(&o, 0, sizeof(o));
    o.threads = (unsigned)n + 1;          /* the last wraps round to the first */
    o.pin = 1;
    o.sched.backend = b;
    aco_rt_pool_t* p = aco_rt_pool_new(&o);
    CHECK(p != NULL);
    for (unsigned i = 0; i < o.threads; i++) {
        atomic_store(&pin_cpu_count, -1);
        CHECK_EQ(aco_rt_detach(aco_rt_spawn(aco_rt_pool_sched(p, i), pin_probe, NULL)), 0);
        while (atomic_load(&pin_cpu_count) < 0) usleep(200);
        CHECK_EQ(atomic_load(&pin_cpu_count), 1);
        CHECK_EQ(atomic_load(&pin_cpu_first), cpus[i % (unsigned)n]);
    }
    CHECK_EQ(aco_rt_pool_free(p), 0);
}
static void pin_case(int b) {
    cpu_set_t mine;
    CPU_ZERO(&mine);
    CHECK_EQ(sched_getaffinity(0, sizeof(mine), &mine), 0);
    pin_check(b, &mine);
    if (CPU_COUNT(&mine) < 2) {
        printf("test_pool_bb_api: pin under a narrower mask not checked: one CPU allowed\n");
        return;
    }
    int last = -1;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &mine)) last = c;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(last, &one);
    CHECK_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
    pin_check(b, &one);
    CHECK_EQ(sched_setaffinity(0, sizeof(mine), &mine), 0);
}

/* EAGAIN: a thread that cannot be made after others were; none left.  In a
 * child: RLIMIT_NPROC (root ignores it: the child becomes a user of its own first). */
static void* idle_thread(void* arg) {
    char c;
    while (read(*(int*)arg, &c, 1) < 0 && errno == EINTR) {}
    return NULL;
}
/* how many threads can be made now (at most 16): each waits for the end
 * of a pipe, then all are joined */
static int threads_possible(void) {
    pthread_t t[16];
    int fds[2];
    CHECK_EQ(pipe(fds), 0);
    int k = 0;
    while (k < 16 && pthread_create(&t[k], NULL, idle_thread, &fds[0]) == 0) k++;
    close(fds[1]);
    for (int i = 0; i < k; i++) pthread_join(t[i], NULL);
    close(fds[0]);
    return k;
}
static void eagain_child(void* arg) {
    (void)arg;
    if (getuid() == 0) {
        struct rlimit hi = {RLIM_INFINITY, RLIM_INFINITY};
        setrlimit(RLIMIT_NPROC, &hi);
        /* a user of its own: RLIMIT_NPROC counts the user's threads in
         * every process, and other runs of this test go on meanwhile */
        uid_t u = (uid_t)(30000 + getpid() % 30000);
        if (setgid(u) != 0 || setuid(u) != 0) _exit(3);
    }
    /* a limit that lets 2 to 15 threads be made */
    int k = 0;
    struct rlimit rl;
    CHECK_EQ(getrlimit(RLIMIT_NPROC, &rl), 0);
    for (rlim_t lim = 1; lim < 100000; lim++) {
        rl.rlim_cur = lim;
        if (setrlimit(RLIMIT_NPROC, &rl) != 0) _exit(4);
        k = threads_possible();
        if (k >= 2) break;
    }
    if (k < 2 || k >= 16) _exit(5);
    int base = task_count();
    aco_rt_pool_opts_t o;
    memset(&o, 0, sizeof(o));
    o.threads = (unsigned)k + 4;
    o.sched.backend = ACO_RT_BACKEND_EPOLL;
    errno = 0;
    CHECK(aco_rt_pool_new(&o) == NULL);
    CHECK_EQ(errno, EAGAIN);
    CHECK_EQ(settle_tasks(base), base);
    /* the threads are there again (the kernel's count may lag the
     * tasks' end a moment): a pool of k works */
    int64_t end = aco_rt_now() + 2000 * MS;
    while (threads_possible() != k && aco_rt_now() < end) usleep(1000);
    CHECK_EQ(threads_possible(), k);
    o.threads = (unsigned)k;
    aco_rt_pool_t* p = aco_rt_pool_new(&o);
    CHECK(p != NULL);
    CHECK_EQ(aco_rt_pool_free(p), 0);
    _exit(0);
}
static void eagain_case(void) {
    int st = -1;
    int sig = test_in_child(eagain_child, NULL, &st);
    CHECK_EQ(sig, 0);
    if (st == 3 || st == 4 || st == 5) {
        printf("test_pool_bb_api: EAGAIN not checked: RLIMIT_NPROC cannot be set here (%d)\n", st);
        return;
    }
    CHECK_EQ(st, 0);
}

/* idle threads sleep: their CPU time over 300 ms of nothing to do */
static clockid_t _Atomic idle_clock;
static void clock_probe(void* arg) {
    (void)arg;
    clockid_t c;
    CHECK_EQ(pthread_getcpuclockid(pthread_self(), &c), 0);
    atomic_store(&idle_clock, c);
}
static int64_t cpu_ns(clockid_t c) {
    struct timespec ts;
    CHECK_EQ(clock_gettime(c, &ts), 0);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}
static void idle_case(aco_rt_pool_t* p) {
    clockid_t c[2];
    for (unsigned i = 0; i < 2; i++) {
        atomic_store(&idle_clock, (clockid_t)-1);
        CHECK_EQ(aco_rt_detach(aco_rt_spawn(aco_rt_pool_sched(p, i), clock_probe, NULL)), 0);
        while (atomic_load(&idle_clock) == (clockid_t)-1) usleep(200);
        c[i] = atomic_load(&idle_clock);
    }
    usleep(50 * 1000);
    int64_t t0 = aco_rt_now(), c0 = cpu_ns(c[0]) + cpu_ns(c[1]);
    usleep(300 * 1000);
    int64_t wall = aco_rt_now() - t0, used = cpu_ns(c[0]) + cpu_ns(c[1]) - c0;
    /* a spinning thread would use about the wall time: a tenth is plenty */
    CHECK_LT(used, wall / 10);
}

/* ---------------- pool_spawn ---------------- */


static _Atomic int opts_ok;
static void opts_fn(void* arg) {
    (void)arg;
    size_t n = 0;
    unsigned char* b = aco_rt_private(&n);
    CHECK(b != NULL);
    CHECK_EQ(n, 100);
    for (size_t i = 0; i < n; i++) CHECK_EQ(b[i], 0);
    memset(b, 0xee, n);
    atomic_fetch_add(&opts_ok, 1);
}

/* a co stays on its thread: checked after each kind of wait */
static aco_rt_sem_t ping[2];
static _Atomic int stay_done;
static void stay_fn(void* arg) {
    int k = (int)(intptr_t)arg;
    aco_rt_sched_t* s = aco_rt_sched_current();
    pthread_t t = pthread_self();
    CHECK(s != NULL);
    for (int r = 0; r < 10; r++) {
        CHECK_EQ(aco_rt_yield(), 0);
        CHECK(aco_rt_sched_current() == s);
        CHECK_EQ(aco_rt_sleep((r & 1) * MS), 0);
        CHECK(aco_rt_sched_current() == s);
        /* a wake from whichever co of whichever thread posts */
        aco_rt_sem_post(&ping[k & 1]);
        CHECK_EQ(aco_rt_sem_wait(&ping[(k & 1) ^ 1], in_ms(10000)), 0);
        CHECK(aco_rt_sched_current() == s);
        CHECK(pthread_equal(pthread_self(), t));
    }
    atomic_fetch_add(&stay_done, 1);
}

/* a co spawned from a pool co: on the spawner's thread it starts only once
 * the spawner stopped running */
static _Atomic int spawner_running[2];
static _Atomic int child_ran, child_here, child_early;
struct child_arg { aco_rt_sched_t* home; int idx; };
static struct child_arg cargs[2];
static void child_fn(void* arg) {
    struct child_arg* a = arg;
    if (aco_rt_sched_current() == a->home) {
        atomic_fetch_add(&child_here, 1);
        if (atomic_load(&spawner_running[a->idx])) atomic_fetch_add(&child_early, 1);
    }
    atomic_fetch_add(&child_ran, 1);
}
static void spawner_fn(void* arg) {
    aco_rt_pool_t* p = arg;
    int idx = aco_rt_sched_current() == aco_rt_pool_sched(p, 0) ? 0 : 1;
    cargs[idx].home = aco_rt_sched_current();
    cargs[idx].idx = idx;
    atomic_store(&spawner_running[idx], 1);
    for (int i = 0; i < 40; i++)
        CHECK_EQ(aco_rt_detach(aco_rt_pool_spawn(p, child_fn, &cargs[idx], NULL)), 0);
    /* keep running a while: 20 ms without a runtime call */
    int64_t end = in_ms(20);
    while (aco_rt_now() < end) {}
    atomic_store(&spawner_running[idx], 0);
}

/* handles: joined from a co of another scheduler */
static aco_rt_sem_t hold;
static void held_fn(void* arg) {
    CHECK_EQ(aco_rt_sem_wait(&hold, in_ms(10000)), 0);
    *(int*)arg = 7;
}
static aco_rt_pool_t* jpool;
static int joined_val;
static void joiner_co(void* arg) {
    (void)arg;
    /* a save stack over 1 GiB: ENOMEM, at once or at the join */
    aco_rt_spawn_opts_t big;
    memset(&big, 0, sizeof(big));
    big.save_size = ((size_t)1 << 30) + 1;
    errno = 0;
    aco_rt_co_t* c = aco_rt_pool_spawn(jpool, held_fn, &joined_val, &big);
    if (c == NULL) CHECK_EQ(errno, ENOMEM);
    else CHECK_EQ(aco_rt_join(c, in_ms(10000)), -ENOMEM);
    CHECK_EQ(joined_val, 0);
    c = aco_rt_pool_spawn(jpool, held_fn, &joined_val, NULL);
    CHECK(c != NULL);
    CHECK_EQ(aco_rt_join(c, 0), -ETIMEDOUT);
    int64_t d = in_ms(20);
    CHECK_EQ(aco_rt_join(c, d), -ETIMEDOUT);       /* the handle stays valid */
    CHECK_GE(aco_rt_now(), d);
    aco_rt_sem_post(&hold);
    CHECK_EQ(aco_rt_join(c, in_ms(10000)), 0);
    CHECK_EQ(joined_val, 7);
}

/* many spawns from two plain threads at once */
static _Atomic int many_ran;
static void many_fn(void* arg) { (void)arg; atomic_fetch_add(&many_ran, 1); }
static int many_n;
static void* many_spawner(void* arg) {
    aco_rt_pool_t* p = arg;
    for (int i = 0; i < many_n; i++) {
        aco_rt_co_t* c = aco_rt_pool_spawn(p, many_fn, NULL, NULL);
        CHECK(c != NULL);
        CHECK_EQ(aco_rt_detach(c), 0);
    }
    return NULL;
}
/* a handle detached by a plain thread */
static void* detacher(void* arg) {
    CHECK_EQ(aco_rt_detach((aco_rt_co_t*)arg), 0);
    CHECK_EQ(aco_rt_detach((aco_rt_co_t*)arg), -EINVAL);
    return NULL;
}

static void spawn_body(aco_rt_pool_t* p) {
    errno = 0;
    CHECK(aco_rt_pool_spawn(p, NULL, NULL, NULL) == NULL);
    CHECK_EQ(errno, EINVAL);
    /* opts */
    aco_rt_spawn_opts_t so;
    memset(&so, 0, sizeof(so));
    so.private_size = 100;
    so.name = "bb-pool";
    atomic_store(&opts_ok, 0);
    for (int i = 0; i < 8; i++) CHECK_EQ(aco_rt_detach(aco_rt_pool_spawn(p, opts_fn, NULL, &so)), 0);
    CHECK_EQ(aco_rt_pool_wait(p, ACO_RT_POOL_DRAIN, in_ms(10000)), 0);
    CHECK_EQ(atomic_load(&opts_ok), 8);

    /* staying on one's thread: cos from outside, pairs waking each other
     * across the threads */
    aco_rt_sem_init(&ping[0], 0);
    aco_rt_sem_init(&ping[1], 0);
    atomic_store(&stay_done, 0);
    for (int i = 0; i < 16; i++)
        CHECK_EQ(aco_rt_detach(aco_rt_pool_spawn(p, stay_fn, (void*)(intptr_t)i, NULL)), 0);
    CHECK_EQ(aco_rt_pool_wait(p, ACO_RT_POOL_DRAIN, in_ms(20000)), 0);
    CHECK_EQ(atomic_load(&stay_done), 16);

    /* spawns from pool cos, on each thread */
    for (int round = 0; round < 3; round++) {
        atomic_store(&child_ran, 0);
        atomic_store(&child_here, 0);
        atomic_store(&child_early, 0);
        for (unsigned i = 0; i < 2; i++)
            CHECK_EQ(aco_rt_detach(aco_rt_spawn(aco_rt_pool_sched(p, i), spawner_fn, p)), 0);
        CHECK_EQ(aco_rt_pool_wait(p, ACO_RT_POOL_DRAIN, in_ms(10000)), 0);
        CHECK_EQ(atomic_load(&child_ran), 80);
        CHECK_EQ(atomic_load(&child_early), 0);
    }

    /* aco_rt_spawn into thread i's scheduler runs there */
    for (unsigned i = 0; i < 2; i++) run_on(p, i);

    /* a handle detached by a plain thread */
    aco_rt_sem_init(&hold, 0);
    int v = 0;
    aco_rt_co_t* c = aco_rt_pool_spawn(p, held_fn, &v, NULL);
    CHECK(c != NULL);
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, detacher, c), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
    aco_rt_sem_post(&hold);
    CHECK_EQ(aco_rt_pool_wait(p, ACO_RT_POOL_DRAIN, in_ms(10000)), 0);
    CHECK_EQ(v, 7);

    /* many spawns from two plain threads at once */
    many_n = FEW ? 300 : CO_MANY(3000);
    atomic_store(&many_ran, 0);
    pthread_t t2[2];
    for (int i = 0; i < 2; i++) CHECK_EQ(pthread_create(&t2[i], NULL, many_spawner, p), 0);
    for (int i = 0; i < 2; i++) CHECK_EQ(pthread_join(t2[i], NULL), 0);
    CHECK_EQ(aco_rt_pool_wait(p, ACO_RT_POOL_DRAIN, in_ms(20000)), 0);
    CHECK_EQ(atomic_load(&many_ran), 2 * many_n);

    idle_case(p);
}

/* joins of pool cos from a co of the main thread's scheduler */
static void join_case(int b) {
    jpool = new_pool(2, b);
    aco_rt_sem_init(&hold, 0);
    joined_val = 0;
    aco_rt_sched_t* s = test_sched_on(b, NULL);
    test_go(s, joiner_co, NULL);
    aco_rt_sched_free(s);
    CHECK_EQ(aco_rt_pool_free(jpool), 0);
}

/* ---------------- pool_wait ---------------- */

static aco_rt_pool_t* wp;
static _Atomic int napped_ok, napped_cancelled;
static void napper(void* arg) {
    int r = aco_rt_sleep((int64_t)(intptr_t)arg * MS);
    if (r == 0) atomic_fetch_add(&napped_ok, 1);
    else if (r == -ECANCELED) atomic_fetch_add(&napped_cancelled, 1);
    else CHECK(0);
}
static int self_drain_rc, self_cancel_rc, self_free_rc;
static void self_waiter(void* arg) {
    (void)arg;
    self_drain_rc = aco_rt_pool_wait(wp, ACO_RT_POOL_DRAIN, in_ms(1000));
    self_cancel_rc = aco_rt_pool_wait(wp, ACO_RT_POOL_CANCEL, in_ms(1000));
    self_free_rc = aco_rt_pool_free(wp);
    CHECK_EQ(aco_rt_cancelled(), 0);
    CHECK_EQ(aco_rt_sleep(1 * MS), 0);
    /* the pool works on */
    CHECK_EQ(aco_rt_detach(aco_rt_pool_spawn(wp, napper, (void*)(intptr_t)1, NULL)), 0);
}
/* the same from a pool thread outside any co: a timer's callback */
static aco_rt_timer_t cb_timer;
static _Atomic int cb_drain_rc = 1, cb_cancel_rc = 1, cb_free_rc = 1;
static void cb_fn(aco_rt_timer_t* t) {
    (void)t;
    CHECK(aco_rt_self() == NULL);
    atomic_store(&cb_drain_rc, aco_rt_pool_wait(wp, ACO_RT_POOL_DRAIN, 0));
    atomic_store(&cb_cancel_rc, aco_rt_pool_wait(wp, ACO_RT_POOL_CANCEL, 0));
    atomic_store(&cb_free_rc, aco_rt_pool_free(wp));
}
static void cb_starter(void* arg) {
    (void)arg;
    aco_rt_timer_init(&cb_timer);
    CHECK_EQ(aco_rt_timer_start(&cb_timer, 0, cb_fn), 0);
    /* stay until it fired (a run with no co left may end before) */
    while (atomic_load(&cb_free_rc) == 1) CHECK_EQ(aco_rt_sleep(1 * MS), 0);
}

/* DRAIN counts every co of the pool's schedulers */
static _Atomic int drain_flags;
static void flag_after(void* arg) {
    CHECK_EQ(aco_rt_sleep((int64_t)(intptr_t)arg * MS), 0);
    atomic_fetch_add(&drain_flags, 1);
}
static aco_rt_co_t* finished_joinable;
static void join_finished_co(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_join(finished_joinable, 0), 0);
}

/* a cancelled co: every later blocking call fails */
static _Atomic int later_ok;
static aco_rt_sem_t never;
static void cancel_then_calls(void* arg) {
    (void)arg;
    int r;
    while ((r = aco_rt_sleep(1 * MS)) == 0) {}
    CHECK_EQ(r, -ECANCELED);
    CHECK_EQ(aco_rt_sem_wait(&never, -1), -ECANCELED);
    CHECK_EQ(aco_rt_yield(), -ECANCELED);
    CHECK_EQ(aco_rt_sleep(0), -ECANCELED);
    CHECK(aco_rt_cancelled());
    atomic_fetch_add(&later_ok, 1);
}
/* shielded: the cancel kept until its nap is over */
static _Atomic int shield_seen;
static void shielded(void* arg) {
    CHECK_EQ(aco_rt_cancel_shield(1), 0);
    CHECK_EQ(aco_rt_sleep((int64_t)(intptr_t)arg * MS), 0);
    CHECK_EQ(aco_rt_cancel_shield(0), 1);
    CHECK_EQ(aco_rt_sleep(0), -ECANCELED);
    atomic_fetch_add(&shield_seen, 1);
}

/* a wait from a co of another scheduler blocks that thread */
static _Atomic long ticks;
static _Atomic int ticker_stop;
static void ticker(void* arg) {
    (void)arg;
    while (!atomic_load(&ticker_stop)) {
        atomic_fetch_add(&ticks, 1);
        CHECK_EQ(aco_rt_yield(), 0);
    }
}
static _Atomic int frozen_checked, frozen_bad;
static void watcher(void* arg) {
    (void)arg;
    long t0 = atomic_load(&ticks);
    CHECK_EQ(aco_rt_sleep(50 * MS), 0);
    if (atomic_load(&ticks) != t0) atomic_fetch_add(&frozen_bad, 1);
    atomic_fetch_add(&frozen_checked, 1);
}
static int outside_wait_rc = 1;
static void outside_waiter(void* arg) {
    (void)arg;
    /* the ticker has run: it is ready, and would run if this co parked */
    while (atomic_load(&ticks) < 3) CHECK_EQ(aco_rt_yield(), 0);
    CHECK_EQ(aco_rt_detach(aco_rt_pool_spawn(wp, watcher, NULL, NULL)), 0);
    outside_wait_rc = aco_rt_pool_wait(wp, ACO_RT_POOL_DRAIN, in_ms(10000));
    atomic_store(&ticker_stop, 1);
}
/* from a co of another pool */
static _Atomic int other_pool_rc = 1;
static void other_pool_waiter(void* arg) {
    (void)arg;
    atomic_store(&other_pool_rc, aco_rt_pool_wait(wp, ACO_RT_POOL_DRAIN, in_ms(10000)));
}

static void* drain_thread(void* arg) {
    (void)arg;
    int r = aco_rt_pool_wait(wp, ACO_RT_POOL_DRAIN, in_ms(10000));
    /* every co had finished by then */
    if (r == 0) CHECK_EQ(atomic_load(&napped_ok), 4);
    return (void*)(intptr_t)r;
}

static void wait_case(int b) {
    wp = new_pool(2, b);
    /* -EINVAL, nothing cancelled */
    atomic_store(&napped_ok, 0);
    atomic_store(&napped_cancelled, 0);
    for (int i = 0; i < 4; i++)
        CHECK_EQ(aco_rt_detach(aco_rt_pool_spawn(wp, napper, (void*)(intptr_t)60, NULL)), 0);
    CHECK_EQ(aco_rt_pool_wait(NULL, ACO_RT_POOL_DRAIN, in_ms(1000)), -EINVAL);
    CHECK_EQ(aco_rt_pool_wait(NULL, ACO_RT_POOL_CANCEL, in_ms(1000)), -EINVAL);
    CHECK_EQ(aco_rt_pool_wait(wp, 2, in_ms(1000)), -EINVAL);
    CHECK_EQ(aco_rt_pool_wait(wp, -1, in_ms(1000)), -EINVAL);
    /* -EDEADLK from a pool co and from a pool thread's callback */
    self_drain_rc = self_cancel_rc = self_free_rc = 1;
    CHECK_EQ(aco_rt_detach(aco_rt_pool_spawn(wp, self_waiter, NULL, NULL)), 0);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(aco_rt_pool_sched(wp, 1), cb_starter, NULL)), 0);
    CHECK_EQ(aco_rt_pool_wait(wp, ACO_RT_POOL_DRAIN, in_ms(10000)), 0);
    CHECK_EQ(self_drain_rc, -EDEADLK);
    CHECK_EQ(self_cancel_rc, -EDEADLK);
    CHECK_EQ(self_free_rc, -EDEADLK);
    CHECK_EQ(atomic_load(&cb_drain_rc), -EDEADLK);
    CHECK_EQ(atomic_load(&cb_cancel_rc), -EDEADLK);
    CHECK_EQ(atomic_load(&cb_free_rc), -EDEADLK);
    CHECK_EQ(atomic_load(&napped_ok), 5);
    CHECK_EQ(atomic_load(&napped_cancelled), 0);

    /* DRAIN waits for cos spawned into the schedulers, group members and
     * joinable cos, and a finished joinable co counts as finished */
    atomic_store(&drain_flags, 0);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(aco_rt_pool_sched(wp, 0), flag_after, (void*)(intptr_t)40)), 0);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(aco_rt_pool_sched(wp, 1), flag_after, (void*)(intptr_t)50)), 0);
    aco_rt_group_t* g = aco_rt_pool_group_new(wp);
    CHECK(g != NULL);
    CHECK_EQ(aco_rt_group_spawn(g, flag_after, (void*)(intptr_t)60, NULL), 0);
    finished_joinable = aco_rt_pool_spawn(wp, flag_after, (void*)(intptr_t)30, NULL);
    CHECK(finished_joinable != NULL);
    CHECK_EQ(aco_rt_pool_wait(wp, ACO_RT_POOL_DRAIN, in_ms(10000)), 0);
    CHECK_EQ(atomic_load(&drain_flags), 4);
    CHECK_EQ(aco_rt_group_size(g), 0);
    CHECK_EQ(aco_rt_group_free(g), 0);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(aco_rt_pool_sched(wp, 0), join_finished_co, NULL)), 0);
    CHECK_EQ(aco_rt_pool_wait(wp, ACO_RT_POOL_DRAIN, in_ms(10000)), 0);

    /* CANCEL with a passed deadline still cancels */
    aco_rt_sem_init(&never, 0);
    atomic_store(&later_ok, 0);
    for (int i = 0; i < 4; i++)
        CHECK_EQ(aco_rt_detach(aco_rt_pool_spawn(wp, cancel_then_calls, NULL, NULL)), 0);
    usleep(5000);
    int r = aco_rt_pool_wait(wp, ACO_RT_POOL_CANCEL, 0);
    CHECK(r == 0 || r == -ETIMEDOUT);
    CHECK_EQ(aco_rt_pool_wait(wp, ACO_RT_POOL_DRAIN, in_ms(10000)), 0);
    CHECK_EQ(atomic_load(&later_ok), 4);
    /* ... with a near one: -ETIMEDOUT never early, shielded cos go on */
    atomic_store(&shield_seen, 0);
    for (int i = 0; i < 2; i++)
        CHECK_EQ(aco_rt_detach(aco_rt_pool_spawn(wp, shielded, (void*)(intptr_t)300, NULL)), 0);
    usleep(5000);
    int64_t d = in_ms(30);
    CHECK_EQ(aco_rt_pool_wait(wp, ACO_RT_POOL_CANCEL, d), -ETIMEDOUT);
    CHECK_GE(aco_rt_now(), d);
    CHECK_EQ(atomic_load(&shield_seen), 0);
    CHECK_EQ(aco_rt_pool_wait(wp, ACO_RT_POOL_DRAIN, in_ms(10000)), 0);
    CHECK_EQ(atomic_load(&shield_seen), 2);

    /* from a co of the main thread's scheduler: the thread waits (its
     * other co, always ready, does not run meanwhile) */
    atomic_store(&ticks, 0);
    atomic_store(&ticker_stop, 0);
    atomic_store(&frozen_checked, 0);
    atomic_store(&frozen_bad, 0);
    aco_rt_sched_t* s = test_sched_on(b, NULL);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, ticker, NULL)), 0);
    CHECK_EQ(aco_rt_detach(aco_rt_spawn(s, outside_waiter, NULL)), 0);
    test_run(s);
    aco_rt_sched_free(s);
    CHECK_EQ(outside_wait_rc, 0);
    CHECK_EQ(atomic_load(&frozen_checked), 1);
    CHECK_EQ(atomic_load(&frozen_bad), 0);

    /* two plain threads waiting at once */
    atomic_store(&napped_ok, 0);
    for (int i = 0; i < 4; i++)
        CHECK_EQ(aco_rt_detach(aco_rt_pool_spawn(wp, napper, (void*)(intptr_t)40, NULL)), 0);
    pthread_t wt[2];
    for (int i = 0; i < 2; i++) CHECK_EQ(pthread_create(&wt[i], NULL, drain_thread, NULL), 0);
    for (int i = 0; i < 2; i++) {
        void* rv;
        CHECK_EQ(pthread_join(wt[i], &rv), 0);
        CHECK_EQ((intptr_t)rv, 0);
    }
    CHECK_EQ(atomic_load(&napped_ok), 4);

    /* from a co of another pool */
    aco_rt_pool_t* other = new_pool(1, b);
    atomic_store(&napped_ok, 0);
    CHECK_EQ(aco_rt_detach(aco_rt_pool_spawn(wp, napper, (void*)(intptr_t)40, NULL)), 0);
    CHECK_EQ(aco_rt_detach(aco_rt_pool_spawn(other, other_pool_waiter, NULL, NULL)), 0);
    CHECK_EQ(aco_rt_pool_wait(other, ACO_RT_POOL_DRAIN, in_ms(10000)), 0);
    CHECK_EQ(atomic_load(&other_pool_rc), 0);
    CHECK_EQ(atomic_load(&napped_ok), 1);
    CHECK_EQ(aco_rt_pool_free(other), 0);
    CHECK_EQ(aco_rt_pool_free(wp), 0);
}

/* ---------------- pool_free ---------------- */

static aco_rt_mutex_t held_mutex;
static _Atomic int busy_started, dtor_calls;
static aco_rt_key_t key;
static void key_dtor(void* v) { (void)v; atomic_fetch_add(&dtor_calls, 1); }
static void yielder(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_setspecific(key, &key), 0);
    atomic_fetch_add(&busy_started, 1);
    for (;;) aco_rt_yield();
}
static void parked(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_setspecific(key, &key), 0);
    atomic_fetch_add(&busy_started, 1);
    aco_rt_sem_wait(&never, -1);
    abort();
}
static void locker(void* arg) {
    (void)arg;
    CHECK_EQ(aco_rt_mutex_lock(&held_mutex, -1), 0);
    atomic_fetch_add(&busy_started, 1);
    aco_rt_sem_wait(&never, -1);
    abort();
}
static int trylock_rc = 1;
static void trylocker(void* arg) {
    (void)arg;
    trylock_rc = aco_rt_mutex_trylock(&held_mutex);
}

/* a pool group joined from the main thread's scheduler, its pool freed by
 * a plain thread meanwhile */
static aco_rt_group_t* fg;
static aco_rt_pool_t* fp;
static _Atomic int fg_joining;
static int fg_rc = 1;
static void fg_joiner(void* arg) {
    (void)arg;
    atomic_store(&fg_joining, 1);
    fg_rc = aco_rt_group_join(fg, in_ms(10000));
    CHECK_EQ(aco_rt_group_size(fg), 0);
    CHECK_EQ(aco_rt_group_join(fg, 0), 0);
    CHECK_EQ(aco_rt_group_cancel(fg, in_ms(1000)), 0);
    CHECK_EQ(aco_rt_group_free(fg), 0);
}
static void* pool_freer(void* arg) {
    (void)arg;
    while (!atomic_load(&fg_joining)) usleep(500);
    usleep(20 * 1000);
    CHECK_EQ(aco_rt_pool_free(fp), 0);
    return NULL;
}

static void free_case(int b) {
    aco_rt_pool_t* p = new_pool(2, b);
    aco_rt_sem_init(&never, 0);
    aco_rt_mutex_init(&held_mutex);
    CHECK_EQ(aco_rt_key_create(&key, key_dtor), 0);
    atomic_store(&busy_started, 0);
    atomic_store(&dtor_calls, 0);
    for (int i = 0; i < 4; i++) CHECK_EQ(aco_rt_detach(aco_rt_pool_spawn(p, yielder, NULL, NULL)), 0);
    for (int i = 0; i < 4; i++) CHECK_EQ(aco_rt_detach(aco_rt_pool_spawn(p, parked, NULL, NULL)), 0);
    CHECK_EQ(aco_rt_detach(aco_rt_pool_spawn(p, locker, NULL, NULL)), 0);
    int64_t end = in_ms(10000);
    while (atomic_load(&busy_started) < 9) {
        CHECK_LT(aco_rt_now(), end);
        usleep(500);
    }
    CHECK_EQ(aco_rt_pool_wait(p, ACO_RT_POOL_DRAIN, in_ms(20)), -ETIMEDOUT);
    CHECK_EQ(aco_rt_pool_free(p), 0);
    CHECK_EQ(atomic_load(&dtor_calls), 0);
    CHECK_EQ(aco_rt_key_delete(key), 0);
    /* the mutex stays locked */
    aco_rt_sched_t* s = test_sched_on(b, NULL);
    test_go(s, trylocker, NULL);
    CHECK_EQ(trylock_rc, -EBUSY);

    /* a pool group's joiner elsewhere, the pool freed by a plain thread */
    CHECK_EQ(aco_rt_key_create(&key, NULL), 0);
    fp = new_pool(2, b);
    fg = aco_rt_pool_group_new(fp);
    CHECK(fg != NULL);
    for (int i = 0; i < 3; i++) CHECK_EQ(aco_rt_group_spawn(fg, parked, NULL, NULL), 0);
    atomic_store(&fg_joining, 0);
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, pool_freer, NULL), 0);
    test_go(s, fg_joiner, NULL);
    CHECK_EQ(pthread_join(t, NULL), 0);
    CHECK_EQ(fg_rc, 0);
    CHECK_EQ(aco_rt_key_delete(key), 0);
    aco_rt_sched_free(s);
}

static void per_backend(int b) {
    pool_new_cases(b);
    pin_case(b);
    join_case(b);
    wait_case(b);
    free_case(b);
}

static void* nothing(void* arg) { return arg; }

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    eagain_case();
    /* a thread made and joined first: a sanitizer's own thread (TSan
     * starts one at the first pthread_create) is in every count after */
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, nothing, NULL), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
    test_each_backend(per_backend);
    test_on_pools(2, spawn_body, NULL);
    puts("test_pool_bb_api: ok");
    return 0;
}
