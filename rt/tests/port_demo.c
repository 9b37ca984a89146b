/* port_demo.c - a classic pthreads program, as one would find it: producers
 * and consumers around a bounded buffer (a mutex and two conds), a
 * per-thread tally in a key whose destructor adds it up at thread exit,
 * pthread_once, pthread_exit with a value for the joiner, sched_yield.
 *
 * make.sh builds it twice, unchanged: on real pthreads, and with
 * -include aco_rt_pthread_names.h onto the runtime's cos; test_port runs
 * both and compares what they print.  (Both times -Dmain= renames main, so
 * that one test program can hold the two.)
 */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define CAP 8
#define PRODUCERS 3
#define CONSUMERS 4
#define PER_PRODUCER 2000

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t not_full = PTHREAD_COND_INITIALIZER;
static pthread_cond_t not_empty = PTHREAD_COND_INITIALIZER;
static int buf[CAP];
static int head, count, max_count, producers_left;

static pthread_key_t tally_key;
static long consumed, consumed_sum;
static int tallies_flushed;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int once_runs;

struct tally {
    long items;
    long sum;
};

static void count_once(void) { once_runs++; }

static void die(const char* what, int err) {
    fprintf(stderr, "port_demo: %s: error %d\n", what, err);
    abort();
}

/* The key's destructor: a consumer's tally joins the totals at its exit. */
static void flush_tally(void* p) {
    struct tally* t = p;
    pthread_mutex_lock(&lock);
    consumed += t->items;
    consumed_sum += t->sum;
    tallies_flushed++;
    pthread_mutex_unlock(&lock);
    free(t);
}

static void* producer(void* arg) {
    int id = (int)(intptr_t)arg;
    pthread_once(&once, count_once);
    for (int i = 0; i < PER_PRODUCER; i++) {
        pthread_mutex_lock(&lock);
        while (count == CAP) pthread_cond_wait(&not_full, &lock);
        buf[(head + count) % CAP] = id * PER_PRODUCER + i + 1;
        if (++count > max_count) max_count = count;
        pthread_cond_signal(&not_empty);
        pthread_mutex_unlock(&lock);
    }
    pthread_mutex_lock(&lock);
    if (--producers_left == 0) pthread_cond_broadcast(&not_empty);
    pthread_mutex_unlock(&lock);
    pthread_exit((void*)(intptr_t)PER_PRODUCER);
}

static void* consumer(void* arg) {
    (void)arg;
    pthread_once(&once, count_once);
    struct tally* t = calloc(1, sizeof(*t));
    if (t == NULL) die("calloc", 0);
    int err = pthread_setspecific(tally_key, t);
    if (err) die("pthread_setspecific", err);
    for (;;) {
        pthread_mutex_lock(&lock);
        while (count == 0 && producers_left > 0) pthread_cond_wait(&not_empty, &lock);
        if (count == 0) {
            pthread_mutex_unlock(&lock);
            return NULL;
        }
        int v = buf[head];
        head = (head + 1) % CAP;
        count--;
        pthread_cond_signal(&not_full);
        pthread_mutex_unlock(&lock);
        struct tally* mine = pthread_getspecific(tally_key);
        mine->items++;
        mine->sum += v;
        if (mine->items % 100 == 0) sched_yield();      /* let the others in */
    }
}

int main(int argc, char** argv) {
    (void)argc;
    (void)argv;
    pthread_t p[PRODUCERS], c[CONSUMERS];
    int err;
    head = count = max_count = 0;
    producers_left = PRODUCERS;
    consumed = consumed_sum = 0;
    tallies_flushed = 0;
    if ((err = pthread_key_create(&tally_key, flush_tally))) die("pthread_key_create", err);
    for (int i = 0; i < CONSUMERS; i++)
        if ((err = pthread_create(&c[i], NULL, consumer, NULL))) die("pthread_create", err);
    for (int i = 0; i < PRODUCERS; i++)
        if ((err = pthread_create(&p[i], NULL, producer, (void*)(intptr_t)i)))
            die("pthread_create", err);
    long produced = 0;
    for (int i = 0; i < PRODUCERS; i++) {
        void* r;
        if ((err = pthread_join(p[i], &r))) die("pthread_join", err);
        produced += (long)(intptr_t)r;
    }
    for (int i = 0; i < CONSUMERS; i++)
        if ((err = pthread_join(c[i], NULL))) die("pthread_join", err);
    pthread_key_delete(tally_key);
    long n = (long)PRODUCERS * PER_PRODUCER;
    printf("produced %ld, consumed %ld\n", produced, consumed);
    printf("sum %ld, expected %ld\n", consumed_sum, n * (n + 1) / 2);
    printf("tallies flushed by the key's destructor: %d of %d\n", tallies_flushed, CONSUMERS);
    printf("once ran %d time(s); buffer within its %d slots: %s\n", once_runs, CAP,
           max_count <= CAP ? "yes" : "no");
    return consumed == n ? 0 : 1;
}
