/* test_chan_watch - a wake written into the channel's own line.
 *
 * A co that waits as a channel's direct waiter on a channel other
 * threads use has its scheduler watch that line (chan.c, "Watched
 * lines"): a sender of another thread writes the element there and the
 * receiver's thread wakes it from the line, tidying the channel later.
 * What the header promises holds through that road: every element once,
 * in order; a close wakes the receiver with -EPIPE; a deadline passes as
 * it would; a channel freed once the receive returned is freed (before
 * or after its receiver's thread has tidied it: no leak, no use after
 * free), and a free says -EBUSY while another receiver waits behind one
 * whose thread has not; a scheduler freed while the wake waits in the
 * line takes its co and leaves the channel free to free.  The receivers
 * run on schedulers of plain threads (the sender holds them while it
 * writes) and sleep between elements (the write must wake them), and two
 * receivers of one thread share its one watched line (the second wakes
 * the usual way).
 */
#include "rt_test.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#define N (FEW ? 300 : 3000)

static int backend;

static void nap_ms(int ms) {
    struct timespec ts = {0, ms * 1000000L};
    nanosleep(&ts, NULL);
}

/* A plain thread with a scheduler of its own, running fn as its one co
 * (more spawned by fn itself). */
typedef struct {
    aco_rt_fn_t fn;
    void*       arg;
    pthread_t   th;
    atomic_int  made;           /* its scheduler is made (aco_rt_sched_run:
                                   the sender's must not start before) */
} rx_thread_t;

static void* rx_main(void* p) {
    rx_thread_t* t = p;
    aco_rt_sched_t* s = test_sched_on(backend, NULL);
    aco_rt_detach(aco_rt_spawn(s, t->fn, t->arg));
    atomic_store(&t->made, 1);
    test_run(s);
    aco_rt_sched_free(s);
    return NULL;
}

static void rx_start(rx_thread_t* t, aco_rt_fn_t fn, void* arg) {
    t->fn = fn;
    t->arg = arg;
    atomic_store(&t->made, 0);
    CHECK_EQ(pthread_create(&t->th, NULL, rx_main, t), 0);
    while (!atomic_load(&t->made)) nap_ms(1);
}


/* ---- 1. elements in order; the receiver asleep now and then ---- */

static aco_rt_chan_t* ch1;

static void order_rx(void* arg) {
    (void)arg;
    for (uint64_t i = 0; i < N; i++) {
        uint64_t v = ~(uint64_t)0;
        CHECK_EQ(aco_rt_chan_recv(ch1, &v, -1), 0);
        CHECK_EQ(v, i);
    }
    uint64_t v;
    CHECK_EQ(aco_rt_chan_recv(ch1, &v, -1), -EPIPE);
}

static void order_tx(void* arg) {
    (void)arg;
    for (uint64_t i = 0; i < N; i++) {
        /* a pause past the receiver's spin (50 us): it sleeps */
        if (i % 64 == 63) CHECK_EQ(aco_rt_sleep(200000), 0);
        CHECK_EQ(aco_rt_chan_send(ch1, &i, -1), 0);
    }
    CHECK_EQ(aco_rt_chan_close(ch1), 0);
}

/* ---- 2. close, and a deadline, of a watched receiver ---- */

static aco_rt_chan_t* ch2;
static atomic_int stage2;

static void close_rx(void* arg) {
    (void)arg;
    uint32_t v = 7;
    /* nobody sends: the deadline passes (the line was watched) */
    CHECK_EQ(aco_rt_chan_recv(ch2, &v, aco_rt_now() + 5 * MS), -ETIMEDOUT);
    CHECK_EQ(v, 7);
    atomic_store(&stage2, 1);
    /* then a close from a thread outside any co wakes it */
    CHECK_EQ(aco_rt_chan_recv(ch2, &v, -1), -EPIPE);
    CHECK_EQ(v, 7);
    atomic_store(&stage2, 2);
}

/* ---- 3. freed once the receive returned ---- */

static aco_rt_chan_t* ch3;
static atomic_int got3;

static void free_rx(void* arg) {
    int busy = (int)(intptr_t)arg;
    uint16_t v = 0;
    CHECK_EQ(aco_rt_chan_recv(ch3, &v, -1), 0);
    CHECK_EQ(v, 0xbeef);
    atomic_store(&got3, 1);
    /* busy: the thread does not get back to its loop (which tidies the
     * channel) before the sender has freed it */
    if (busy)
        while (atomic_load(&got3) != 2) {}
}

static void free_tx(void* arg) {
    (void)arg;
    uint16_t v = 0xbeef;
    CHECK_EQ(aco_rt_chan_send(ch3, &v, -1), 0);
    while (atomic_load(&got3) != 1) aco_rt_sleep(100000);
    CHECK_EQ(aco_rt_chan_free(ch3), 0);
    atomic_store(&got3, 2);
}

/* ---- 3b. freed while a handed receiver's thread has not tidied it, and
 * another receiver waits on the queue: -EBUSY, as for any waiter ---- */

static aco_rt_chan_t* ch6;
static atomic_int stage6;

static void busy_rx(void* arg) {
    (void)arg;
    uint32_t v = 0;
    CHECK_EQ(aco_rt_chan_recv(ch6, &v, -1), 0);     /* the direct waiter */
    CHECK_EQ(v, 1);
    atomic_store(&stage6, 2);
    while (atomic_load(&stage6) != 3) {}            /* no tidying meanwhile */
}

static void queued_rx(void* arg) {
    (void)arg;
    uint32_t v = 0;
    CHECK_EQ(aco_rt_chan_recv(ch6, &v, -1), 0);     /* queued behind it */
    CHECK_EQ(v, 2);
}

static void busy_tx(void* arg) {
    (void)arg;
    aco_rt_co_t* q = aco_rt_spawn(NULL, queued_rx, NULL);
    CHECK_EQ(aco_rt_yield(), 0);                    /* q queued */
    uint32_t v = 1;
    CHECK_EQ(aco_rt_chan_send(ch6, &v, -1), 0);     /* to the direct waiter */
    while (atomic_load(&stage6) != 2) aco_rt_sleep(100000);
    CHECK_EQ(aco_rt_chan_free(ch6), -EBUSY);        /* q waits */
    atomic_store(&stage6, 3);
    v = 2;
    CHECK_EQ(aco_rt_chan_send(ch6, &v, -1), 0);
    CHECK_EQ(aco_rt_join(q, -1), 0);
}

/* ---- 4. the receiver's scheduler freed with the wake in the line ---- */

static aco_rt_chan_t* ch4;
static atomic_int stage4;
static aco_rt_sched_t* s4;

static void parked_rx(void* arg) {
    (void)arg;
    uint64_t v;
    aco_rt_chan_recv(ch4, &v, -1);
    CHECK(0);                       /* destroyed before it runs again */
}
static void stopper(void* arg) {
    (void)arg;
    aco_rt_sched_stop(s4);
}

static void* freed_main(void* p) {
    int free_first = (int)(intptr_t)p;
    s4 = test_sched_on(backend, NULL);
    aco_rt_detach(aco_rt_spawn(s4, parked_rx, NULL));
    aco_rt_detach(aco_rt_spawn(s4, stopper, NULL));
    atomic_store(&stage4, 9);
    test_run(s4);                   /* stopped: parked_rx waits in ch4 */
    atomic_store(&stage4, 1);
    while (atomic_load(&stage4) != 2) nap_ms(1);        /* sent */
    aco_rt_sched_free(s4);
    atomic_store(&stage4, 3);
    (void)free_first;
    return NULL;
}

static void freed_tx(void* arg) {
    int free_first = (int)(intptr_t)arg;
    while (atomic_load(&stage4) != 1) aco_rt_sleep(200000);
    uint64_t v = 42;
    CHECK_EQ(aco_rt_chan_send(ch4, &v, -1), 0);
    if (free_first) CHECK_EQ(aco_rt_chan_free(ch4), 0);  /* its end frees */
    atomic_store(&stage4, 2);
    while (atomic_load(&stage4) != 3) aco_rt_sleep(200000);
    if (!free_first) CHECK_EQ(aco_rt_chan_free(ch4), 0);
}

/* ---- 5. two receivers of one thread: one line watched ---- */

static aco_rt_chan_t *ch5a, *ch5b;

static void two_rx_one(void* arg) {
    aco_rt_chan_t* c = arg;
    for (uint32_t i = 0; i < N; i++) {
        uint32_t v;
        CHECK_EQ(aco_rt_chan_recv(c, &v, -1), 0);
        CHECK_EQ(v, i);
    }
}
static void two_rx(void* arg) {
    (void)arg;
    aco_rt_co_t* a = aco_rt_spawn(NULL, two_rx_one, ch5a);
    aco_rt_co_t* b = aco_rt_spawn(NULL, two_rx_one, ch5b);
    CHECK_EQ(aco_rt_join(a, -1), 0);
    CHECK_EQ(aco_rt_join(b, -1), 0);
}
static void two_tx(void* arg) {
    (void)arg;
    for (uint32_t i = 0; i < N; i++) {
        CHECK_EQ(aco_rt_chan_send(i & 1 ? ch5b : ch5a, &i, -1), 0);
        CHECK_EQ(aco_rt_chan_send(i & 1 ? ch5a : ch5b, &i, -1), 0);
    }
}

/* The sender's side of one part: fn as a co of this thread's scheduler,
 * made first (a scheduler another thread makes after a run found its cos
 * stuck comes too late: aco_rt_sched_run). */
static aco_rt_sched_t* tx_s;
static void tx_run(aco_rt_fn_t fn, void* arg) {
    aco_rt_detach(aco_rt_spawn(tx_s, fn, arg));
    test_run(tx_s);
}

static int body(int b) {
    backend = b;
    rx_thread_t t;
    tx_s = test_sched_on(backend, NULL);

    CHECK((ch1 = aco_rt_chan_new(8, 0)) != NULL);
    rx_start(&t, order_rx, NULL);
    tx_run(order_tx, NULL);
    CHECK_EQ(pthread_join(t.th, NULL), 0);
    CHECK_EQ(aco_rt_chan_free(ch1), 0);

    CHECK((ch2 = aco_rt_chan_new(4, 0)) != NULL);
    atomic_store(&stage2, 0);
    rx_start(&t, close_rx, NULL);
    while (atomic_load(&stage2) != 1) nap_ms(1);
    nap_ms(20);                     /* parked again, asleep */
    CHECK_EQ(aco_rt_chan_close(ch2), 0);
    CHECK_EQ(pthread_join(t.th, NULL), 0);
    CHECK_EQ(atomic_load(&stage2), 2);
    CHECK_EQ(aco_rt_chan_free(ch2), 0);

    for (int busy = 0; busy < 2; busy++) {
        CHECK((ch3 = aco_rt_chan_new(2, 0)) != NULL);
        atomic_store(&got3, 0);
        rx_start(&t, free_rx, (void*)(intptr_t)busy);
        nap_ms(5);                  /* (the receiver waits first, mostly) */
        tx_run(free_tx, NULL);
        CHECK_EQ(pthread_join(t.th, NULL), 0);
    }

    CHECK((ch6 = aco_rt_chan_new(4, 0)) != NULL);
    atomic_store(&stage6, 0);
    rx_start(&t, busy_rx, NULL);
    nap_ms(5);                      /* (the direct waiter, mostly) */
    tx_run(busy_tx, NULL);
    CHECK_EQ(pthread_join(t.th, NULL), 0);
    CHECK_EQ(aco_rt_chan_free(ch6), 0);

    for (int free_first = 0; free_first < 2; free_first++) {
        CHECK((ch4 = aco_rt_chan_new(8, 0)) != NULL);
        atomic_store(&stage4, 0);
        pthread_t th;
        CHECK_EQ(pthread_create(&th, NULL, freed_main, (void*)(intptr_t)free_first), 0);
        while (atomic_load(&stage4) == 0) nap_ms(1);        /* s4 made */
        tx_run(freed_tx, (void*)(intptr_t)free_first);
        CHECK_EQ(pthread_join(th, NULL), 0);
    }

    CHECK((ch5a = aco_rt_chan_new(4, 0)) != NULL);
    CHECK((ch5b = aco_rt_chan_new(4, 0)) != NULL);
    rx_start(&t, two_rx, NULL);
    tx_run(two_tx, NULL);
    CHECK_EQ(pthread_join(t.th, NULL), 0);
    CHECK_EQ(aco_rt_chan_free(ch5a), 0);
    CHECK_EQ(aco_rt_chan_free(ch5b), 0);
    aco_rt_sched_free(tx_s);
    return 0;
}

int main(void) {
    test_watchdog();
    test_backends_apart(body);
    return 0;
}
