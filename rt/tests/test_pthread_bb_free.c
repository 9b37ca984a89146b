/* test_pthread_bb_free.c - "Once destroy returned 0 the memory may be freed
 * at once" (rt/aco_rt_pthread.h), across the two threads of a pool: a
 * mutex freed by whoever drops the last reference right after the other
 * thread's co unlocked it, a barrier freed by its SERIAL_THREAD while the
 * other waiter is still being woken, a cond destroyed and freed right
 * after its broadcast; and a wake that a cancel follows before the woken
 * co runs (mutex hand-over, cond signal, barrier's last arrival): nothing
 * lost.  ASan and memcheck see a late touch; the freed bytes are
 * scribbled over for the plain builds. */
#include "pthread_bb.h"

typedef struct { aco_rt_pthread_mutex_t m; int refs; } ref_t;
typedef struct { aco_rt_pthread_barrier_t b; } bar_t;
typedef struct { aco_rt_pthread_cond_t c; } cv_t;
static int nobj;
static ref_t** refs;
static bar_t** bars;
static cv_t** cvs;
static int* cflag;
static aco_rt_pthread_mutex_t cm = ACO_RT_PTHREAD_MUTEX_INITIALIZER;
static atomic_int freed_ref, freed_bar, freed_cv;

static void scribble_free(void* p, size_t n) {
    memset(p, 0xff, n);
    free(p);
}

static void co(void* arg) {
    int who = (int)(intptr_t)arg;
    for (int i = 0; i < nobj; i++) {
        ref_t* r = refs[i];
        CHECK_EQ(aco_rt_pthread_mutex_lock(&r->m), 0);
        int last = --r->refs == 0;
        CHECK_EQ(aco_rt_pthread_mutex_unlock(&r->m), 0);
        if (last) {
            CHECK_EQ(aco_rt_pthread_mutex_destroy(&r->m), 0);
            scribble_free(r, sizeof(*r));
            atomic_fetch_add(&freed_ref, 1);
        }
        bar_t* b = bars[i];
        int x = aco_rt_pthread_barrier_wait(&b->b);
        CHECK(x == 0 || x == ACO_RT_PTHREAD_BARRIER_SERIAL_THREAD);
        if (x) {
            CHECK_EQ(aco_rt_pthread_barrier_destroy(&b->b), 0);
            scribble_free(b, sizeof(*b));
            atomic_fetch_add(&freed_bar, 1);
        }
        cv_t* c = cvs[i];
        CHECK_EQ(aco_rt_pthread_mutex_lock(&cm), 0);
        if (who == 0) {
            while (!cflag[i]) CHECK_EQ(aco_rt_pthread_cond_wait(&c->c, &cm), 0);
        } else {
            cflag[i] = 1;
            CHECK_EQ(aco_rt_pthread_cond_broadcast(&c->c), 0);
            int d;
            while ((d = aco_rt_pthread_cond_destroy(&c->c)) == EBUSY) {
                CHECK_EQ(aco_rt_pthread_mutex_unlock(&cm), 0);
                CHECK_EQ(aco_rt_pthread_yield(), 0);
                CHECK_EQ(aco_rt_pthread_mutex_lock(&cm), 0);
            }
            CHECK_EQ(d, 0);
            scribble_free(c, sizeof(*c));
            atomic_fetch_add(&freed_cv, 1);
        }
        CHECK_EQ(aco_rt_pthread_mutex_unlock(&cm), 0);
    }
}

static void across_threads(void) {
    nobj = FEW ? 300 : 3000;
    refs = calloc((size_t)nobj, sizeof(*refs));
    bars = calloc((size_t)nobj, sizeof(*bars));
    cvs = calloc((size_t)nobj, sizeof(*cvs));
    cflag = calloc((size_t)nobj, sizeof(*cflag));
    CHECK(refs && bars && cvs && cflag);
    for (int i = 0; i < nobj; i++) {
        refs[i] = calloc(1, sizeof(ref_t));
        bars[i] = calloc(1, sizeof(bar_t));
        cvs[i] = calloc(1, sizeof(cv_t));
        CHECK(refs[i] && bars[i] && cvs[i]);
        CHECK_EQ(aco_rt_pthread_mutex_init(&refs[i]->m, NULL), 0);
        refs[i]->refs = 2;
        CHECK_EQ(aco_rt_pthread_barrier_init(&bars[i]->b, NULL, 2), 0);
        CHECK_EQ(aco_rt_pthread_cond_init(&cvs[i]->c, NULL), 0);
    }
    bb_on_pool(2, co);
    CHECK_EQ(atomic_load(&freed_ref), nobj);
    CHECK_EQ(atomic_load(&freed_bar), nobj);
    CHECK_EQ(atomic_load(&freed_cv), nobj);
    free(refs);
    free(bars);
    free(cvs);
    free(cflag);
}

/* ---- a wake, then a cancel before the woken co runs ------------------ */

static aco_rt_pthread_mutex_t m;
static aco_rt_pthread_cond_t c;
static aco_rt_pthread_barrier_t b;
static int stage[3], res[3];
static void* mlocker(void* a) {
    (void)a;
    stage[0] = 1;
    res[0] = aco_rt_pthread_mutex_lock(&m);
    if (res[0] == 0) CHECK_EQ(aco_rt_pthread_mutex_unlock(&m), 0);
    stage[0] = 2;
    return NULL;
}
static void* cwaiter(void* a) {
    int i = (int)(intptr_t)a;
    CHECK_EQ(aco_rt_pthread_mutex_lock(&cm), 0);
    stage[i] = 1;
    res[i] = aco_rt_pthread_cond_wait(&c, &cm);
    CHECK(res[i] == 0 || res[i] == ECANCELED);
    stage[i] = 2;
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&cm), 0);
    return NULL;
}
static void* bwaiter(void* a) {
    (void)a;
    stage[0] = 1;
    res[0] = aco_rt_pthread_barrier_wait(&b);
    stage[0] = 2;
    return NULL;
}
static void settle(void) {
    for (int i = 0; i < 6; i++) CHECK_EQ(aco_rt_pthread_yield(), 0);
}
static void wake_then_cancel(void) {
    aco_rt_pthread_t t, t2;
    /* the mutex handed over: the co keeps it (0) or it is passed on */
    memset(stage, 0, sizeof(stage));
    CHECK_EQ(aco_rt_pthread_mutex_lock(&m), 0);
    CHECK_EQ(aco_rt_pthread_create(&t, NULL, mlocker, NULL), 0);
    settle();
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&m), 0);
    CHECK_EQ(aco_rt_cancel((aco_rt_co_t*)t), 0);
    CHECK_EQ(aco_rt_pthread_join(t, NULL), 0);
    CHECK(res[0] == 0 || res[0] == ECANCELED);
    CHECK_EQ(aco_rt_pthread_mutex_trylock(&m), 0);              /* not lost */
    CHECK_EQ(aco_rt_pthread_mutex_unlock(&m), 0);

    /* a signal to a co cancelled before it runs: it returns 0, or the
     * signal goes to the other waiter (never lost) */
    memset(stage, 0, sizeof(stage));
    CHECK_EQ(aco_rt_pthread_create(&t, NULL, cwaiter, (void*)1), 0);
    CHECK_EQ(aco_rt_pthread_create(&t2, NULL, cwaiter, (void*)2), 0);
    settle();
    CHECK_EQ(aco_rt_pthread_cond_signal(&c), 0);
    CHECK_EQ(aco_rt_cancel((aco_rt_co_t*)t), 0);
    settle();
    CHECK_EQ(stage[1], 2);
    CHECK(res[1] == 0 || stage[2] == 2);
    CHECK_EQ(aco_rt_pthread_join(t, NULL), 0);
    CHECK_EQ(aco_rt_pthread_cond_broadcast(&c), 0);
    CHECK_EQ(aco_rt_pthread_join(t2, NULL), 0);

    /* the barrier's round completed: the waiter counted, so it gets 0 */
    memset(stage, 0, sizeof(stage));
    CHECK_EQ(aco_rt_pthread_barrier_init(&b, NULL, 2), 0);
    CHECK_EQ(aco_rt_pthread_create(&t, NULL, bwaiter, NULL), 0);
    settle();
    CHECK_EQ(aco_rt_pthread_barrier_wait(&b), ACO_RT_PTHREAD_BARRIER_SERIAL_THREAD);
    CHECK_EQ(aco_rt_cancel((aco_rt_co_t*)t), 0);
    CHECK_EQ(aco_rt_pthread_join(t, NULL), 0);
    CHECK_EQ(res[0], 0);
    CHECK_EQ(aco_rt_pthread_barrier_destroy(&b), 0);
}

int main(void) {
    bb_on_backends(wake_then_cancel);
    across_threads();
    printf("test_pthread_bb_free: ok\n");
    return 0;
}
