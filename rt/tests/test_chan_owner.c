/* test_chan_owner - a channel that one thread's cos use, and then another
 * thread's too, while the first thread's keep using it.
 *
 * The header promises that channels are shared by the cos of any
 * schedulers; inside, the cos of the first scheduler to use a channel go in
 * without its lock until anyone else comes (chan.c, "the owner"), and that
 * moment is a race between the owner inside and the newcomer.  Each round
 * here makes it happen on a fresh channel: two cos of thread 0 send and
 * receive on it, and a co of thread 1 joins after a few hundred of their
 * hand-offs; every element must come once, whole, and each sender's in
 * order.  Then the newcomer is a plain thread: aco_rt_chan_len,
 * aco_rt_chan_close and aco_rt_chan_free from main while a co of thread 0
 * owns the channel and waits in it.  Last, cos of thread 1 wait in a
 * channel with deadlines while a co of thread 0 makes its 64 calls in a
 * row and sends: thread 0 must not own it while they wait (their deadlines
 * take them off the queue with the lock alone): every element sent once,
 * to a receiver that got it.
 */
#include "rt_test.h"

#include <stdint.h>

#define ROUNDS (SLOW ? 40 : FEW ? 150 : 600)
#define PER (SLOW ? 300 : 2000)         /* elements per sender a round */
#define JOIN_AFTER 200                  /* thread 0's sends before thread 1 */

static aco_rt_pool_t* pool;
static aco_rt_chan_t* ch;
static aco_rt_wg_t go;                  /* thread 1 goes when it is 0 */

/* An element: its sender in bits 56-63, its sequence number in 0-31, and
 * the number's complement in 32-55 (a torn element shows). */
static uint64_t elem(unsigned who, uint32_t seq) {
    return (uint64_t)who << 56 | (uint64_t)(~seq & 0xFFFFFF) << 32 | seq;
}

static void sender(void* arg) {
    unsigned who = (unsigned)(uintptr_t)arg;
    if (who == 1) CHECK_EQ(aco_rt_wg_wait(&go, -1), 0);   /* thread 1 */
    for (uint32_t i = 0; i < PER; i++) {
        if (who == 0 && i == JOIN_AFTER) CHECK_EQ(aco_rt_wg_done(&go), 0);
        uint64_t v = elem(who, i);
        CHECK_EQ(aco_rt_chan_send(ch, &v, -1), 0);
    }
}

static void receiver(void* arg) {
    (void)arg;
    uint32_t next[2] = {0, 0};
    for (int k = 0; k < 2 * PER; k++) {
        uint64_t v;
        CHECK_EQ(aco_rt_chan_recv(ch, &v, -1), 0);
        unsigned who = (unsigned)(v >> 56);
        uint32_t seq = (uint32_t)v;
        CHECK(who < 2);
        CHECK_EQ(v, elem(who, seq));
        CHECK_EQ(seq, next[who]);       /* none lost, none twice, in order */
        next[who]++;
    }
    CHECK_EQ(next[0], PER);
    CHECK_EQ(next[1], PER);
    CHECK_EQ(aco_rt_chan_len(ch), 0);
}

static void spawn_on(unsigned i, aco_rt_fn_t fn, void* arg) {
    aco_rt_co_t* co = aco_rt_spawn(aco_rt_pool_sched(pool, i), fn, arg);
    CHECK(co != NULL);
    CHECK_EQ(aco_rt_detach(co), 0);
}

/* A co of thread 0 that owns ch (its 100 calls in a row are more than
 * the 64 that make an owner) and then waits in it for an element that
 * never comes. */
static int owner_r = 1, owner_parked;
static void owner_co(void* arg) {
    (void)arg;
    uint64_t v;
    for (uint64_t i = 0; i < 50; i++) {
        v = i;
        CHECK_EQ(aco_rt_chan_send(ch, &v, -1), 0);      /* buffered: at once */
        CHECK_EQ(aco_rt_chan_recv(ch, &v, -1), 0);
        CHECK_EQ(v, i);
    }
    __atomic_store_n(&owner_parked, 1, __ATOMIC_RELEASE);
    owner_r = aco_rt_chan_recv(ch, &v, -1);
}

/* Cos of thread 1 wait in ch with deadlines; thread 0's sender makes 64
 * calls (an owner, were nobody else's cos waiting), then sends to them
 * while their deadlines pass. */
#define NW 60                           /* waiters a round (under 64 calls) */
static int64_t t0;
static int nparked, ngot, nsent, ntimedout;
static uint64_t got[NW];

static void late_receiver(void* arg) {
    int i = (int)(uintptr_t)arg;
    uint64_t v;
    __atomic_fetch_add(&nparked, 1, __ATOMIC_RELAXED);
    /* (the first waits in the channel itself, without a deadline) */
    int r = aco_rt_chan_recv(ch, &v, i == 0 ? -1 : t0 + i * 5000);
    if (r == 0) {
        got[__atomic_fetch_add(&ngot, 1, __ATOMIC_RELAXED)] = v;
    } else {
        CHECK_EQ(r, -ETIMEDOUT);
        __atomic_fetch_add(&ntimedout, 1, __ATOMIC_RELAXED);
    }
}

static void busy_until(int64_t t) { while (aco_rt_now() < t) {} }

static void late_sender(void* arg) {
    (void)arg;
    for (int i = 0; i < 64; i++) aco_rt_chan_len(ch);
    busy_until(t0 - 20000);
    for (uint64_t k = 1;; k++) {
        int r = aco_rt_chan_send(ch, &k, aco_rt_now() + 50000);
        if (r == -ETIMEDOUT) break;
        CHECK_EQ(r, 0);
        nsent++;
        busy_until(aco_rt_now() + 10000);       /* (through the deadlines) */
    }
}

int main(void) {
    aco_rt_pool_opts_t o = {0};
    o.threads = 2;
    const char* b = getenv("ACO_RT_TEST_BACKENDS");
    if (b && strstr(b, "uring") == NULL) o.sched.backend = ACO_RT_BACKEND_EPOLL;
    pool = aco_rt_pool_new(&o);
    CHECK(pool != NULL);

    for (int r = 0; r < ROUNDS; r++) {
        /* rendezvous and buffered, elements through the waiters and the
         * ring; the channel made outside the schedulers: the first co to
         * use it makes thread 0 its owner */
        CHECK((ch = aco_rt_chan_new(8, (size_t)(r % 3 == 0 ? 0 : r % 3 == 1 ? 1 : 16))) != NULL);
        aco_rt_wg_init(&go);
        CHECK_EQ(aco_rt_wg_add(&go, 1), 0);
        spawn_on(0, receiver, NULL);
        spawn_on(0, sender, (void*)(uintptr_t)0);
        spawn_on(1, sender, (void*)(uintptr_t)1);
        CHECK_EQ(aco_rt_pool_wait(pool, ACO_RT_POOL_DRAIN, aco_rt_now() + 120000 * MS), 0);
        CHECK_EQ(aco_rt_chan_free(ch), 0);
    }

    /* A plain thread comes while the owner's co waits in the channel. */
    CHECK((ch = aco_rt_chan_new(8, 1)) != NULL);
    spawn_on(0, owner_co, NULL);
    while (!__atomic_load_n(&owner_parked, __ATOMIC_ACQUIRE)) usleep(1000);
    usleep(20 * 1000);                  /* (parked by now) */
    CHECK_EQ(aco_rt_chan_len(ch), 0);
    CHECK_EQ(aco_rt_chan_free(ch), -EBUSY);
    CHECK_EQ(aco_rt_chan_close(ch), 0);
    CHECK_EQ(aco_rt_pool_wait(pool, ACO_RT_POOL_DRAIN, aco_rt_now() + 120000 * MS), 0);
    CHECK_EQ(owner_r, -EPIPE);
    CHECK_EQ(aco_rt_chan_free(ch), 0);

    /* Deadlines on thread 1 while thread 0 would own the channel. */
    for (int r = 0; r < (FEW ? 300 : 1000); r++) {
        CHECK((ch = aco_rt_chan_new(8, 0)) != NULL);
        nparked = ngot = nsent = ntimedout = 0;
        t0 = aco_rt_now() + 2 * MS;
        for (int i = 0; i < NW; i++) {
            spawn_on(1, late_receiver, (void*)(uintptr_t)i);
            if (i == NW / 2) {          /* (thread 1's calls: no run of 64) */
                while (__atomic_load_n(&nparked, __ATOMIC_RELAXED) <= i) usleep(50);
                usleep(100);
                aco_rt_chan_len(ch);
            }
        }
        while (__atomic_load_n(&nparked, __ATOMIC_RELAXED) < NW) usleep(100);
        usleep(200);
        spawn_on(0, late_sender, NULL);
        CHECK_EQ(aco_rt_pool_wait(pool, ACO_RT_POOL_DRAIN, aco_rt_now() + 120000 * MS), 0);
        CHECK_EQ(ngot + ntimedout, NW);
        CHECK_EQ(ngot, nsent);
        for (int i = 0; i < ngot; i++)
            for (int j = i + 1; j < ngot; j++) CHECK(got[i] != got[j]);
        CHECK_EQ(aco_rt_chan_free(ch), 0);
    }
    aco_rt_pool_free(pool);
    return 0;
}
