/* keys.c - co-local keys (pthread_key_* for cos), and aco_rt_exit.
 *
 * Keys.  A process-wide table of ACO_RT_KEYS_MAX slots, each with a
 * sequence number (odd while a key holds the slot) and a destructor.  A key
 * names its slot and the low bits of the slot's sequence number when it was
 * made (low 10 bits: the slot; above: 22 bits of the sequence).  A value
 * keeps the slot's whole sequence number (64 bits: it never comes round)
 * from its set, so a value set under a key that was deleted is not seen
 * through a later key of the same slot, and its destructor never runs, even
 * once the 22 bits came round (2M creates and deletes of the slot: then an
 * old key's number names the new key, as pthreads' numbers do at once).
 * Creating and deleting take a lock; getting and setting take none: they
 * touch only the caller's own values, plus one atomic load of the slot's
 * sequence number to refuse a deleted key.
 *
 * Values.  Each co's hang from its extra block (co->x->keys), allocated the
 * first time it sets one (a co that never does costs nothing) and sized up to
 * the highest slot it used; freed when the co ends, after its destructors,
 * so a record that is used again starts with every value NULL.  Outside
 * any co, a thread has values of its own (a thread-local block): like a
 * pthread's, their destructors run when the thread exits through pthreads
 * (a real pthread key of ours calls them), never at exit() or for the main
 * thread returning from main.
 *
 * Destructors.  When a co's function returns (or it calls aco_rt_exit),
 * every value that is not NULL and whose key has a destructor is set to
 * NULL and passed to it, in slot order; the destructors run in the co, and
 * may block or set values again: rounds go on while a round called one, at
 * most ACO_RT_KEY_DTOR_ROUNDS rounds; what is left then is dropped.  A co
 * destroyed unfinished (aco_rt_sched_free) runs none: its values are only
 * freed.
 *
 * Thread safety.  A destructor is read under the slot's sequence number,
 * seqlock fashion: sequence, destructor, sequence again; the maker stores
 * the destructor before it publishes the odd sequence number (release).
 */
#define _GNU_SOURCE
#include "rt_impl.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define SLOT_BITS 10
_Static_assert(ACO_RT_KEYS_MAX == 1u << SLOT_BITS, "a key's slot fits its low bits");
#define SLOT_MASK (ACO_RT_KEYS_MAX - 1u)
#define SEQ_MASK  (~0u >> SLOT_BITS)    /* the sequence bits a key keeps */

static struct {
    uint64_t seq;                       /* odd: a key holds the slot */
    void (*dtor)(void*);
} keys[ACO_RT_KEYS_MAX];
static pthread_mutex_t keys_lock = PTHREAD_MUTEX_INITIALIZER;

typedef struct {
    uint64_t seq;                       /* the slot's sequence at the set */
    void*    val;
} kv_t;

typedef struct {
    uint32_t cap;                       /* entries */
    kv_t     v[];
} kvs_t;

static inline uint32_t key_slot(aco_rt_key_t k) { return k & SLOT_MASK; }
static inline uint32_t key_seq(aco_rt_key_t k) { return k >> SLOT_BITS; }

/* Does seq (a slot's) say that k is a key now (not deleted)? */
static inline int seq_live(uint64_t seq, aco_rt_key_t k) {
    return (seq & 1) && (seq & SEQ_MASK) == key_seq(k);
}
static inline uint64_t slot_seq(aco_rt_key_t k) {
    return __atomic_load_n(&keys[key_slot(k)].seq, __ATOMIC_ACQUIRE);
}
static inline int key_live(aco_rt_key_t k) { return seq_live(slot_seq(k), k); }

int aco_rt_key_create(aco_rt_key_t* key, void (*dtor)(void*)) {
    if (key == NULL) return -EINVAL;
    pthread_mutex_lock(&keys_lock);
    for (uint32_t i = 0; i < ACO_RT_KEYS_MAX; i++) {
        uint64_t seq = keys[i].seq;
        if (seq & 1) continue;
        seq++;
        __atomic_store_n(&keys[i].dtor, dtor, __ATOMIC_RELEASE);
        __atomic_store_n(&keys[i].seq, seq, __ATOMIC_RELEASE);
        pthread_mutex_unlock(&keys_lock);
        *key = i | (uint32_t)(seq & SEQ_MASK) << SLOT_BITS;
        return 0;
    }
    pthread_mutex_unlock(&keys_lock);
    return -EAGAIN;
}

int aco_rt_key_delete(aco_rt_key_t key) {
    pthread_mutex_lock(&keys_lock);
    int r = -EINVAL;
    if (key_live(key)) {
        __atomic_store_n(&keys[key_slot(key)].seq, keys[key_slot(key)].seq + 1,
                         __ATOMIC_RELEASE);
        r = 0;
    }
    pthread_mutex_unlock(&keys_lock);
    return r;
}

/* ------------------------------------------------------------------------ */
/* Whose values                                                             */
/* ------------------------------------------------------------------------ */

static RT_TLS kvs_t* thread_kvs;      /* outside cos */
static pthread_key_t thread_exit_key;   /* calls thread_exit at thread exit */
static pthread_once_t thread_exit_once = PTHREAD_ONCE_INIT;
static int thread_exit_ok;

/* Where the caller's values are: its co's extra block (made here when
 * make is set: NULL without memory for it), else its thread's. */
static kvs_t* const no_kvs;
static inline kvs_t** my_kvs(int make) {
    aco_rt_co_t* co = rt_self();
    if (co == NULL) return &thread_kvs;
    rt_extra_t* x = co->x;
    if (x == NULL && (!make || (x = rt_extra(co, 0)) == NULL))
        return make ? NULL : (kvs_t**)&no_kvs;
    return (kvs_t**)&x->keys;
}

void* aco_rt_getspecific(aco_rt_key_t key) {
    const kvs_t* kv = *my_kvs(0);
    uint32_t i = key_slot(key);
    if (kv == NULL || i >= kv->cap) return NULL;
    uint64_t seq = slot_seq(key);
    if (!seq_live(seq, key) || kv->v[i].seq != seq) return NULL;
    return kv->v[i].val;
}

static void run_dtors(kvs_t** where);

/* A thread that had values outside cos exits. */
static void thread_exit(void* p) {
    (void)p;
    run_dtors(&thread_kvs);
}

static void thread_exit_init_dtor(void) {
    thread_exit_ok = pthread_key_create(&thread_exit_key, thread_exit) == 0;
}

/* Room for slot i in *where: NULL on ENOMEM. */
static kvs_t* kvs_grow(kvs_t** where, uint32_t i) {
    kvs_t* kv = *where;
    if (kv && i < kv->cap) return kv;
    int first_of_thread = kv == NULL && where == &thread_kvs;
    uint32_t cap = kv ? kv->cap : 0, n = cap ? cap : 8;
    while (n <= i) n *= 2;
    kv = realloc(kv, sizeof(kvs_t) + n * sizeof(kv_t));
    if (kv == NULL) return NULL;
    memset(&kv->v[cap], 0, (n - cap) * sizeof(kv_t));
    kv->cap = n;
    *where = kv;
    if (first_of_thread) {
        /* Its destructors at the thread's exit; a failure leaves them to
         * never run, as for the main thread. */
        pthread_once(&thread_exit_once, thread_exit_init_dtor);
        if (thread_exit_ok) pthread_setspecific(thread_exit_key, kv);
    }
    return kv;
}

int aco_rt_setspecific(aco_rt_key_t key, const void* val) {
    uint64_t seq = slot_seq(key);
    if (!seq_live(seq, key)) return -EINVAL;
    kvs_t** where = my_kvs(val != NULL);
    if (where == NULL) return -ENOMEM;
    uint32_t i = key_slot(key);
    kvs_t* kv = *where;
    if (kv == NULL || i >= kv->cap) {
        if (val == NULL) return 0;      /* nothing to keep */
        if ((kv = kvs_grow(where, i)) == NULL) return -ENOMEM;
    }
    kv->v[i].seq = seq;
    kv->v[i].val = (void*)val;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Destructors                                                              */
/* ------------------------------------------------------------------------ */

/* The destructor of the key that set kv, NULL if none or deleted since. */
static void (*dtor_of(uint32_t slot, const kv_t* e))(void*) {
    uint64_t s1 = __atomic_load_n(&keys[slot].seq, __ATOMIC_ACQUIRE);
    void (*d)(void*) = __atomic_load_n(&keys[slot].dtor, __ATOMIC_ACQUIRE);
    uint64_t s2 = __atomic_load_n(&keys[slot].seq, __ATOMIC_ACQUIRE);
    if (s1 != s2 || !(s1 & 1) || s1 != e->seq) return NULL;
    return d;
}

/* The destructor rounds over the values at *where (re-read after each
 * call: a destructor may set values and so move them), then free them. */
static void run_dtors(kvs_t** where) {
    for (int round = 0; round < ACO_RT_KEY_DTOR_ROUNDS && *where; round++) {
        int called = 0;
        for (uint32_t i = 0; *where && i < (*where)->cap; i++) {
            kv_t* e = &(*where)->v[i];
            if (e->val == NULL) continue;
            void (*d)(void*) = dtor_of(i, e);
            if (d == NULL) continue;
            void* v = e->val;
            e->val = NULL;
            d(v);
            called = 1;
        }
        if (!called) break;
    }
    free(*where);
    *where = NULL;
}

/* The running co ends: its key destructors, then its values go (a record
 * freed unended: the kernel frees its values, no destructor runs). */
static void keys_exit(aco_rt_co_t* co) { run_dtors((kvs_t**)&co->x->keys); }
RT_HOOK(rt_hook_keys_exit, keys_exit)

/* ------------------------------------------------------------------------ */
/* The end of a co                                                          */
/* ------------------------------------------------------------------------ */

void aco_rt_exit(void) {
    aco_rt_co_t* co = rt_self();
    if (co == NULL) {
        fprintf(stderr, "aco_rt_exit: called outside a co (a thread is not a "
                "co: return from its function, or pthread_exit)\n");
        abort();
    }
    rt_co_exit(co);
}
