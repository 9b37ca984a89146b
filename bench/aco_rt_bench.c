/* aco_rt_bench - the runtime's micro-benchmarks, one per run:
 *
 *   aco_rt_bench pingpong [N]       chan_pingpong_ns: two cos, two unbuffered
 *                                   int channels, one send each way a round
 *   aco_rt_bench pingpong_same [N]  chan_pingpong_same_ns: the same exchange
 *                                   with both cos running one function (the
 *                                   same calls in each): no return the CPU
 *                                   mispredicts after a switch; its floor
 *                                   is switches_deep
 *   aco_rt_bench switches [N]       switches_rtrip_ns: pingpong's floor: two
 *                                   plain cos (aco.h, no scheduler) that
 *                                   hand off to each other with
 *                                   aco_yield_to, the two switches a
 *                                   pingpong round trip makes, no queue
 *   aco_rt_bench switches_call [N]  switches_call_rtrip_ns: the same, each
 *                                   aco_yield_to made in a function the
 *                                   co's loop calls (one site for both),
 *                                   which then returns to its own loop:
 *                                   the shape of a blocking call, whose
 *                                   return after the switch the CPU's
 *                                   return predictor cannot know
 *   aco_rt_bench switches_deep [N]  switches_deep_rtrip_ns: two cos running
 *                                   one function, each aco_yield_to two
 *                                   calls deep: cos parked at one place in
 *                                   the same code (a server's connections)
 *   aco_rt_bench spawn_join [N]     spawn_join_ns: spawn an empty co, join it
 *   aco_rt_bench wake [N]           wake_ns: from a semaphore post in one co
 *                                   to the waiting co running: half a
 *                                   round trip of two cos that post to
 *                                   each other; then wake_clocked_ns, each
 *                                   wake timed alone (one clock read
 *                                   included: clock_ns says its cost)
 *   aco_rt_bench timer [N]          timer_ns: aco_rt_timer_start + _stop
 *   aco_rt_bench mutex [N]          mutex_ns: lock + unlock, uncontended
 *   aco_rt_bench mutex_handoff [N]  mutex_handoff_ns: two cos that each lock,
 *                                   yield, unlock: every lock waits and is
 *                                   handed over; ns per lock+unlock
 *   aco_rt_bench parked [N]         parked_bytes_per_co: RSS growth per co
 *                                   of N cos parked in aco_rt_sleep
 *   aco_rt_bench parked_chan [N]    the same, the cos parked in
 *                                   aco_rt_chan_recv on one unbuffered int
 *                                   channel nobody sends on
 *   aco_rt_bench xpingpong [N]      xchan_pingpong_ns: pingpong with the two
 *                                   cos on two threads of a pool (pinned to
 *                                   CPUs 0 and 1): every send crosses
 *   aco_rt_bench cacheline [N]      cacheline_rtrip_ns: the machine's floor
 *                                   for the two above: two plain threads on
 *                                   CPUs 0 and 1 bounce one cache line (a
 *                                   counter each writes in turn)
 *   aco_rt_bench xpingpong_1cpu [N] xchan_pingpong_1cpu_ns: xpingpong with
 *                                   both pool threads on CPU 0 (a pool
 *                                   larger than its CPUs: each thread must
 *                                   sleep for the other to run)
 *   aco_rt_bench futex_1cpu [N]     futex_pingpong_1cpu_ns: its floor, two
 *                                   plain threads on CPU 0 passing a turn
 *                                   by futex: each wakes the other and
 *                                   sleeps (two switches a round trip)
 *   aco_rt_bench locked [N]         locked_xchg_ns, locked_add_ns,
 *                                   locked_cas_ns, plain_add_ns: one
 *                                   instruction of each kind in a dependent
 *                                   chain on one cache line, one thread
 *   aco_rt_bench pool_spawn [N]     pool_spawn_ns: a co of a 2-thread pool
 *                                   spawns N empty cos with aco_rt_pool_spawn
 *                                   (each ends with a wait group's done) and
 *                                   waits for them all; ns per co
 *   aco_rt_bench pool_spawn1 [N]    pool_spawn1_ns: the same with a pool of
 *                                   one thread (what two threads are
 *                                   compared with)
 *   aco_rt_bench poll1 [N]          poll1_rtrip_ns: two cos, a byte each way
 *                                   over a socketpair; the sender waits for
 *                                   the answer with aco_rt_wait on its end
 *                                   (the receiver reads, which waits too)
 *   aco_rt_bench poll2|poll16 [N]   poll2_rtrip_ns, poll16_rtrip_ns: the
 *                                   same, the sender waiting with
 *                                   aco_rt_poll on its end and 1 or 15 idle
 *                                   sockets (what a wait on several
 *                                   descriptors adds to one: libcurl's
 *                                   waits are on two)
 *
 * Each timed figure is the median of 7 segments of N operations after a
 * warm-up segment.  The scheduler's backend is $ACO_RT_BACKEND's (only
 * the poll ones do I/O).  Pin it (taskset) for stable figures.
 */
#define _GNU_SOURCE
#include "aco_rt.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#define SEGMENTS 7

static long n_ops;
static double seg[SEGMENTS + 1];

static int cmp_double(const void* a, const void* b) {
    double x = *(const double*)a, y = *(const double*)b;
    return x < y ? -1 : x > y;
}

static double median(double* v, int n) {
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Run body(n_ops) SEGMENTS+1 times in a co, the first as warm-up; print the
 * median ns per operation under name. */
typedef void (*body_fn)(long n);
static body_fn body;
static const char* body_name;

static void timed_co(void* arg) {
    (void)arg;
    for (int i = 0; i <= SEGMENTS; i++) {
        int64_t t0 = aco_rt_now();
        body(n_ops);
        seg[i] = (double)(aco_rt_now() - t0) / (double)n_ops;
    }
    printf("%s %.2f\n", body_name, median(seg + 1, SEGMENTS));
}

static void run_timed(const char* name, body_fn fn) {
    body = fn;
    body_name = name;
    aco_rt_detach(aco_rt_spawn(NULL, timed_co, NULL));
}

/* ---- pingpong ---- */
static aco_rt_chan_t *ch_ping, *ch_pong;
static void pong_co(void* arg) {
    (void)arg;
    int v;
    while (aco_rt_chan_recv(ch_ping, &v, -1) == 0) aco_rt_chan_send(ch_pong, &v, -1);
}
static void pingpong_body(long n) {
    for (int i = 0; i < n; i++) {
        int v = i;
        aco_rt_chan_send(ch_ping, &v, -1);
        aco_rt_chan_recv(ch_pong, &v, -1);
    }
}

/* ---- pingpong_same: the same exchange, both cos in one function ----
 * Each co's send and receive are the very calls of the other's (the pong
 * co receives once first, at a call of its own, then joins the loop), so
 * after every switch the CPU's return predictor, which holds the other
 * co's return addresses, is right: what pingpong costs without the
 * returns it misses (docs/benchmarks.md, "Returns after a switch").  Its
 * floor is switches_deep (two cos running one function). */
__attribute__((noinline)) static void pp_same_loop(aco_rt_chan_t* tx, aco_rt_chan_t* rx, long n) {
    int v = 0;
    for (long i = 0; i < n; i++) {
        if (aco_rt_chan_send(tx, &v, -1) != 0 || aco_rt_chan_recv(rx, &v, -1) != 0) return;
        v++;
    }
}
static void pong_same_co(void* arg) {
    (void)arg;
    int v;
    if (aco_rt_chan_recv(ch_ping, &v, -1) == 0) pp_same_loop(ch_pong, ch_ping, LONG_MAX);
}
static void pingpong_same_body(long n) { pp_same_loop(ch_ping, ch_pong, n); }

/* ---- switches: pingpong without channels, queues or scheduler ----
 * A pingpong round trip hands off twice (the sender parks in its receive
 * and aco_yield_to's the receiver, made ready by the send; then back), so
 * its floor is two aco_yield_to's, timed here in a's loop as pingpong_body
 * is timed in its co. */
static aco_t *sw_a, *sw_b;
static int sw_mode;         /* 0 switches, 1 switches_call, 2 switches_deep */
/* (not tail calls: the asm after each; the switch returns here first) */
__attribute__((noinline)) static void switch_in_call(aco_t* to) {
    aco_yield_to(to);
    __asm__ volatile("" ::: "memory");
}
__attribute__((noinline)) static void switch_deeper(aco_t* to) {
    switch_in_call(to);
    __asm__ volatile("" ::: "memory");
}
static void sw_b_co(void) {
    if (sw_mode == 1) for (;;) switch_in_call(sw_a);
    for (;;) aco_yield_to(sw_a);
}
static void sw_a_co(void) {
    for (int i = 0; i <= SEGMENTS; i++) {
        int64_t t0 = aco_rt_now();
        if (sw_mode == 1) for (long k = 0; k < n_ops; k++) switch_in_call(sw_b);
        else for (long k = 0; k < n_ops; k++) aco_yield_to(sw_b);
        seg[i] = (double)(aco_rt_now() - t0) / (double)n_ops;
    }
    aco_exit();
}
/* switches_deep: a and b both (arg: a's segments, NULL for b) */
static void sw_deep_co(void) {
    double* times = aco_get_arg();
    aco_t* to = times ? sw_b : sw_a;
    for (int i = 0; times == NULL || i <= SEGMENTS; i++) {
        int64_t t0 = aco_rt_now();
        for (long k = 0; k < n_ops; k++) switch_deeper(to);
        if (times) times[i] = (double)(aco_rt_now() - t0) / (double)n_ops;
    }
    aco_exit();
}
static int switches(void) {
    aco_thread_init(NULL);
    aco_t* main_co = aco_create(NULL, NULL, 0, NULL, NULL);
    aco_share_stack_t* st[2] = {aco_share_stack_new(0), aco_share_stack_new(0)};
    int deep = sw_mode == 2;
    sw_a = aco_create(main_co, st[0], 0, deep ? sw_deep_co : sw_a_co, deep ? seg : NULL);
    sw_b = aco_create(main_co, st[1], 0, deep ? sw_deep_co : sw_b_co, NULL);
    aco_resume(sw_a);       /* returns when a exits */
    static const char* name[] = {"switches_rtrip_ns", "switches_call_rtrip_ns",
                                 "switches_deep_rtrip_ns"};
    printf("%s %.2f\n", name[sw_mode], median(seg + 1, SEGMENTS));
    aco_destroy(sw_a);
    aco_destroy(sw_b);
    aco_share_stack_destroy(st[0]);
    aco_share_stack_destroy(st[1]);
    aco_destroy(main_co);
    return 0;
}

/* ---- spawn_join ---- */
static void empty_co(void* arg) { (void)arg; }
static void spawn_join_body(long n) {
    for (long i = 0; i < n; i++) aco_rt_join(aco_rt_spawn(NULL, empty_co, NULL), -1);
}

/* ---- wake ----
 * Two cos hand a semaphore unit back and forth: each post wakes the other,
 * each wait parks the poster, so half a round trip is one wake-to-run (the
 * post, the poster parking, the switch, the waiter's return).  wake_ns is
 * that half, with no clock read in the loop; wake_clocked_ns times each
 * wake alone, from before the post to the waiter running, and so includes
 * one clock read (clock_ns: this machine's aco_rt_now). */
static aco_rt_sem_t sem_a, sem_b;
static int64_t wake_t0, wake_sum;
static int wake_clocked;
static void waker_peer_co(void* arg) {
    (void)arg;
    while (aco_rt_sem_wait(&sem_b, -1) == 0) {
        if (wake_clocked) wake_sum += aco_rt_now() - wake_t0;
        aco_rt_sem_post(&sem_a);
    }
}
static void wake_body(long n) {
    for (long i = 0; i < n; i++) {
        aco_rt_sem_post(&sem_b);
        aco_rt_sem_wait(&sem_a, -1);
    }
}
static void wake_clocked_body(long n) {
    for (long i = 0; i < n; i++) {
        wake_t0 = aco_rt_now();
        aco_rt_sem_post(&sem_b);
        aco_rt_sem_wait(&sem_a, -1);
    }
}
static void wake_co(void* arg) {
    (void)arg;
    for (int i = 0; i <= SEGMENTS; i++) {
        int64_t t0 = aco_rt_now();
        wake_body(n_ops);
        seg[i] = (double)(aco_rt_now() - t0) / (double)n_ops / 2;
    }
    printf("wake_ns %.2f\n", median(seg + 1, SEGMENTS));
    wake_clocked = 1;
    for (int i = 0; i <= SEGMENTS; i++) {
        wake_sum = 0;
        wake_clocked_body(n_ops);
        seg[i] = (double)wake_sum / (double)n_ops;
    }
    printf("wake_clocked_ns %.2f\n", median(seg + 1, SEGMENTS));
    for (int i = 0; i < SEGMENTS; i++) {
        int64_t t0 = aco_rt_now();
        for (long k = 0; k < n_ops; k++) wake_t0 = aco_rt_now();
        seg[i] = (double)(aco_rt_now() - t0) / (double)n_ops;
    }
    printf("clock_ns %.2f\n", median(seg, SEGMENTS));
}

/* ---- timer ---- */
static aco_rt_timer_t* timers;
static void timer_cb(aco_rt_timer_t* t) { (void)t; }
static void timer_body(long n) {
    int64_t d = aco_rt_now() + 3600LL * 1000000000;
    for (long i = 0; i < n; i++) {
        aco_rt_timer_t* t = &timers[i & 1023];
        aco_rt_timer_start(t, d + i, timer_cb);
        aco_rt_timer_stop(t);
    }
}

/* ---- mutex ---- */
static aco_rt_mutex_t mu;
static void mutex_body(long n) {
    for (long i = 0; i < n; i++) {
        aco_rt_mutex_lock(&mu, -1);
        aco_rt_mutex_unlock(&mu);
    }
}
static volatile int handoff_stop;
static void handoff_peer_co(void* arg) {
    (void)arg;
    while (!handoff_stop) {
        aco_rt_mutex_lock(&mu, -1);
        aco_rt_yield();
        aco_rt_mutex_unlock(&mu);
    }
}
static void handoff_body(long n) {
    /* n lock+unlock pairs: half here, half in the peer */
    for (long i = 0; i < n / 2; i++) {
        aco_rt_mutex_lock(&mu, -1);
        aco_rt_yield();
        aco_rt_mutex_unlock(&mu);
    }
}
static void handoff_co(void* arg) {
    (void)arg;
    timed_co(NULL);
    handoff_stop = 1;
}

/* ---- xpingpong, pool_spawn ---- */
static aco_rt_pool_t* pool;
static void xpingpong_co(void* arg) {
    (void)arg;
    aco_rt_co_t* p = aco_rt_spawn(aco_rt_pool_sched(pool, 1), pong_co, NULL);
    timed_co(NULL);
    aco_rt_chan_close(ch_ping);
    aco_rt_join(p, -1);
}
static aco_rt_wg_t spawn_wg;
static void wg_done_co(void* arg) { (void)arg; aco_rt_wg_done(&spawn_wg); }
static void pool_spawn_body(long n) {
    aco_rt_wg_add(&spawn_wg, n);
    for (long i = 0; i < n; i++) aco_rt_detach(aco_rt_pool_spawn(pool, wg_done_co, NULL, NULL));
    aco_rt_wg_wait(&spawn_wg, -1);
}
static int run_in_pool_pinned(aco_rt_fn_t fn, unsigned threads, int pin) {
    aco_rt_pool_opts_t o = {0};
    o.threads = threads;
    o.pin = pin;
    pool = aco_rt_pool_new(&o);
    if (pool == NULL) { perror("aco_rt_pool_new"); return 1; }
    aco_rt_detach(aco_rt_spawn(aco_rt_pool_sched(pool, 0), fn, NULL));
    aco_rt_pool_wait(pool, ACO_RT_POOL_DRAIN, -1);
    aco_rt_pool_free(pool);
    return 0;
}
static int run_in_pool(aco_rt_fn_t fn, unsigned threads) { return run_in_pool_pinned(fn, threads, 1); }

/* ---- locked: what one locked instruction costs this machine ----
 * Dependent chains (each on the last one's result, as in the runtime's
 * lock-then-unlock sequences), one thread, its own cache line: the floor
 * of the thread-safe build's figures above the single-thread build's. */
static _Alignas(64) long lk_word;
static int locked(void) {
    static const char* name[4] = {"locked_xchg_ns", "locked_add_ns", "locked_cas_ns",
                                  "plain_add_ns"};
    for (int w = 0; w < 4; w++) {
        long v = 0;
        for (int sg = 0; sg <= SEGMENTS; sg++) {
            int64_t t0 = aco_rt_now();
            for (long k = 0; k < n_ops; k++) {
                if (w == 0) v += __atomic_exchange_n(&lk_word, v, __ATOMIC_ACQ_REL);
                else if (w == 1) v += __atomic_fetch_add(&lk_word, 1, __ATOMIC_ACQ_REL);
                else if (w == 2) {
                    long e = v;
                    __atomic_compare_exchange_n(&lk_word, &e, e + 1, 0, __ATOMIC_ACQ_REL,
                                                __ATOMIC_ACQUIRE);
                    v = e + 1;
                } else {
                    v = *(volatile long*)&lk_word + 1;
                    *(volatile long*)&lk_word = v;
                }
            }
            seg[sg] = (double)(aco_rt_now() - t0) / (double)n_ops;
        }
        printf("%s %.2f\n", name[w], median(seg + 1, SEGMENTS));
        if (v == 42) printf(" ");       /* keep v */
    }
    return 0;
}

/* ---- cacheline ----
 * One line, one counter: each thread waits for the other's value and
 * writes the next, so the line moves once each way.  (Two lines, each
 * written by one thread and spun on by the other, measured twice as slow
 * on the Intel guest: docs/benchmarks.md.) */
static _Alignas(64) long cl_line;
static int pin_to(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}
/* The _1cpu figures mean nothing unless both threads share CPU 0. */
static int pin_or_say(const char* what) {
    if (pin_to(0) == 0) return 0;
    fprintf(stderr, "aco_rt_bench %s: cannot run on CPU 0 (not in this process's CPU set)\n", what);
    return -1;
}
static void* cl_peer(void* arg) {
    long total = *(long*)arg;
    pin_to(1);
    for (long i = 1; i <= total; i++) {
        while (__atomic_load_n(&cl_line, __ATOMIC_ACQUIRE) != 2 * i - 1) {}
        __atomic_store_n(&cl_line, 2 * i, __ATOMIC_RELEASE);
    }
    return NULL;
}
static int cacheline(void) {
    long total = n_ops * (SEGMENTS + 1);
    pthread_t t;
    if (pthread_create(&t, NULL, cl_peer, &total) != 0) return 1;
    pin_to(0);
    long i = 0;
    for (int sg = 0; sg <= SEGMENTS; sg++) {
        int64_t t0 = aco_rt_now();
        for (long k = 0; k < n_ops; k++) {
            i++;
            __atomic_store_n(&cl_line, 2 * i - 1, __ATOMIC_RELEASE);
            while (__atomic_load_n(&cl_line, __ATOMIC_ACQUIRE) != 2 * i) {}
        }
        seg[sg] = (double)(aco_rt_now() - t0) / (double)n_ops;
    }
    pthread_join(t, NULL);
    printf("cacheline_rtrip_ns %.2f\n", median(seg + 1, SEGMENTS));
    return 0;
}

/* ---- futex_1cpu ----
 * The turn is a counter: odd, the peer's; even, main's.  Each side sets
 * the other's turn, wakes it and sleeps until its own comes back. */
static _Alignas(64) int fx_turn;
static void fx_pass(int v) {
    __atomic_store_n(&fx_turn, v, __ATOMIC_RELEASE);
    syscall(SYS_futex, &fx_turn, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}
static void fx_await(int want) {
    int v;
    while ((v = __atomic_load_n(&fx_turn, __ATOMIC_ACQUIRE)) != want)
        syscall(SYS_futex, &fx_turn, FUTEX_WAIT_PRIVATE, v, NULL, NULL, 0);
}
static void* fx_peer(void* arg) {
    long total = *(long*)arg;
    for (long i = 1; i <= total; i++) {
        fx_await((int)(2 * i - 1));
        fx_pass((int)(2 * i));
    }
    return NULL;
}
static int futex_1cpu(void) {
    long total = n_ops * (SEGMENTS + 1);
    pthread_t t;
    if (pin_or_say("futex_1cpu") < 0) return 1;    /* (the peer inherits CPU 0) */
    if (pthread_create(&t, NULL, fx_peer, &total) != 0) return 1;
    long i = 0;
    for (int sg = 0; sg <= SEGMENTS; sg++) {
        int64_t t0 = aco_rt_now();
        for (long k = 0; k < n_ops; k++) {
            i++;
            fx_pass((int)(2 * i - 1));
            fx_await((int)(2 * i));
        }
        seg[sg] = (double)(aco_rt_now() - t0) / (double)n_ops;
    }
    pthread_join(t, NULL);
    printf("futex_pingpong_1cpu_ns %.2f\n", median(seg + 1, SEGMENTS));
    return 0;
}

/* ---- parked ---- */
static long rss_kib(void) {
    FILE* f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    while (f && fgets(line, sizeof(line), f))
        if (strncmp(line, "VmRSS:", 6) == 0) v = atol(line + 6);
    if (f) fclose(f);
    return v;
}
static long rss_before;
static void sleeper_co(void* arg) { (void)arg; aco_rt_sleep(3600LL * 1000000000); }
static aco_rt_chan_t* ch_never;     /* parked_chan: nobody sends on it */
static void receiver_co(void* arg) {
    int v;
    (void)arg;
    aco_rt_chan_recv(ch_never, &v, -1);
}
static void measure_co(void* arg) {
    (void)arg;
    long after = rss_kib();
    printf("parked_bytes_per_co %.1f\n", (double)(after - rss_before) * 1024.0 / (double)n_ops);
    fflush(stdout);
    _exit(0);   /* the sleepers would sleep for an hour */
}

/* ---- poll: a round trip over a socketpair, the sender's wait on 1, 2
 * or 16 descriptors ---- */
static int poll_nfds, poll_sv[2], poll_idle[15][2];
static void poll_peer_co(void* arg) {
    (void)arg;
    char c;
    while (aco_rt_read(poll_sv[1], &c, 1, -1) == 1 && aco_rt_write(poll_sv[1], &c, 1, -1) == 1) {}
}
static void poll_body(long n) {
    struct pollfd p[16];
    char c = 0;
    for (long i = 0; i < n; i++) {
        if (aco_rt_write(poll_sv[0], &c, 1, -1) != 1) abort();
        if (poll_nfds == 1) {
            if (aco_rt_wait(poll_sv[0], POLLIN, -1) < 0) abort();
        } else {
            p[0] = (struct pollfd){poll_sv[0], POLLIN, 0};
            for (int k = 1; k < poll_nfds; k++) p[k] = (struct pollfd){poll_idle[k - 1][0], POLLIN, 0};
            if (aco_rt_poll(p, (nfds_t)poll_nfds, -1) != 1) abort();
        }
        if (aco_rt_read(poll_sv[0], &c, 1, -1) != 1) abort();
    }
}
static void poll_timed_co(void* arg) {
    timed_co(arg);
    aco_rt_close(poll_sv[0]);           /* the peer reads its end and goes */
}
static int poll_setup(int nfds) {
    poll_nfds = nfds;
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, poll_sv) < 0) return -1;
    for (int k = 0; k < nfds - 1; k++)
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, poll_idle[k]) < 0) return -1;
    return 0;
}

int main(int argc, char** argv) {
    if (argc < 2) {
usage:
        fprintf(stderr, "usage: aco_rt_bench pingpong|pingpong_same|switches|switches_call|switches_deep|spawn_join|wake|timer|mutex|"
                        "mutex_handoff|parked|parked_chan|xpingpong|xpingpong_1cpu|futex_1cpu|pool_spawn|pool_spawn1|"
                        "cacheline|locked|"
                        "poll1|poll2|poll16 [N]\n");
        return 2;
    }
    const char* what = argv[1];
    n_ops = argc > 2 ? atol(argv[2]) : 0;
    if (strcmp(what, "locked") == 0) {
        if (!n_ops) n_ops = 10000000;
        return locked();
    }
    if (strncmp(what, "switches", 8) == 0) {
        if (!n_ops) n_ops = 1000000;
        if (strcmp(what + 8, "_call") == 0) sw_mode = 1;
        else if (strcmp(what + 8, "_deep") == 0) sw_mode = 2;
        else if (what[8] != 0) goto usage;
        return switches();
    }
    if (strcmp(what, "cacheline") == 0) {
        if (!n_ops) n_ops = 200000;
        return cacheline();
    }
    if (strcmp(what, "futex_1cpu") == 0) {
        if (!n_ops) n_ops = 20000;
        return futex_1cpu();
    }
    if (strcmp(what, "xpingpong") == 0 || strcmp(what, "xpingpong_1cpu") == 0 ||
        strncmp(what, "pool_spawn", 10) == 0) {
        int one = strcmp(what, "xpingpong_1cpu") == 0;
        if (!n_ops) n_ops = one ? 20000 : what[0] == 'x' ? 200000 : 1000000;
        if (what[0] == 'x') {
            ch_ping = aco_rt_chan_new(sizeof(int), 0);
            ch_pong = aco_rt_chan_new(sizeof(int), 0);
            body = pingpong_body;
            body_name = one ? "xchan_pingpong_1cpu_ns" : "xchan_pingpong_ns";
            /* (the pool's threads inherit CPU 0) */
            if (one && pin_or_say("xpingpong_1cpu") < 0) return 1;
            return run_in_pool_pinned(xpingpong_co, 2, !one);
        }
        body = pool_spawn_body;
        if (strcmp(what, "pool_spawn1") == 0) {
            body_name = "pool_spawn1_ns";
            return run_in_pool(timed_co, 1);
        }
        if (strcmp(what, "pool_spawn") != 0) goto usage;
        body_name = "pool_spawn_ns";
        return run_in_pool(timed_co, 2);
    }
    aco_rt_sched_t* s = aco_rt_sched_new(NULL);
    if (s == NULL) { perror("aco_rt_sched_new"); return 1; }
    if (strcmp(what, "pingpong") == 0 || strcmp(what, "pingpong_same") == 0) {
        if (!n_ops) n_ops = 1000000;
        int same = what[8] != 0;
        ch_ping = aco_rt_chan_new(sizeof(int), 0);
        ch_pong = aco_rt_chan_new(sizeof(int), 0);
        aco_rt_co_t* p = aco_rt_spawn(s, same ? pong_same_co : pong_co, NULL);
        if (same) run_timed("chan_pingpong_same_ns", pingpong_same_body);
        else run_timed("chan_pingpong_ns", pingpong_body);
        aco_rt_detach(p);
        aco_rt_sched_run(s);        /* ends in -EDEADLK: pong waits */
        aco_rt_chan_close(ch_ping); /* and the run below ends it */
    } else if (strcmp(what, "spawn_join") == 0) {
        if (!n_ops) n_ops = 1000000;
        run_timed("spawn_join_ns", spawn_join_body);
    } else if (strcmp(what, "wake") == 0) {
        if (!n_ops) n_ops = 1000000;
        aco_rt_spawn(s, waker_peer_co, NULL);
        aco_rt_detach(aco_rt_spawn(s, wake_co, NULL));
        aco_rt_sched_run(s);        /* -EDEADLK at the end: the peer waits */
        return 0;
    } else if (strcmp(what, "timer") == 0) {
        if (!n_ops) n_ops = 10000000;
        timers = calloc(1024, sizeof(*timers));
        run_timed("timer_ns", timer_body);
    } else if (strcmp(what, "mutex") == 0) {
        if (!n_ops) n_ops = 10000000;
        run_timed("mutex_ns", mutex_body);
    } else if (strcmp(what, "mutex_handoff") == 0) {
        if (!n_ops) n_ops = 1000000;
        body = handoff_body;
        body_name = "mutex_handoff_ns";
        aco_rt_detach(aco_rt_spawn(s, handoff_co, NULL));
        aco_rt_detach(aco_rt_spawn(s, handoff_peer_co, NULL));
    } else if (strcmp(what, "poll1") == 0 || strcmp(what, "poll2") == 0 ||
               strcmp(what, "poll16") == 0) {
        if (!n_ops) n_ops = 100000;
        if (poll_setup(atoi(what + 4)) < 0) { perror("socketpair"); return 1; }
        aco_rt_detach(aco_rt_spawn(s, poll_peer_co, NULL));
        body = poll_body;
        body_name = what[4] == '1' && what[5] == 0 ? "poll1_rtrip_ns"
                  : what[4] == '2' ? "poll2_rtrip_ns" : "poll16_rtrip_ns";
        aco_rt_detach(aco_rt_spawn(s, poll_timed_co, NULL));
    } else if (strcmp(what, "parked") == 0 || strcmp(what, "parked_chan") == 0) {
        if (!n_ops) n_ops = 1000000;
        aco_rt_fn_t fn = sleeper_co;
        if (what[6] == '_') {
            ch_never = aco_rt_chan_new(sizeof(int), 0);
            fn = receiver_co;
        }
        rss_before = rss_kib();
        for (long i = 0; i < n_ops; i++) aco_rt_detach(aco_rt_spawn(s, fn, NULL));
        aco_rt_detach(aco_rt_spawn(s, measure_co, NULL));
    } else {
        fprintf(stderr, "aco_rt_bench: unknown benchmark '%s'\n", what);
        return 2;
    }
    int r = aco_rt_sched_run(s);
    if (r < 0 && r != -EDEADLK) { fprintf(stderr, "aco_rt_bench: run: %d\n", r); return 1; }
    return 0;
}
