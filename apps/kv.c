/*
 * kv.c - in-memory key-value store and redis command execution.  See kv.h.
 */
#define _DEFAULT_SOURCE /* clock_gettime, getpid under -std=c11 too */
#include "kv.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* ========================================================================
 * Entries and table
 * ====================================================================== */

/* One allocation per key: header, key bytes, then vcap bytes of room for
 * the value (vlen of them used). */
typedef struct kv_entry {
    uint32_t klen, vlen, vcap;
    char data[];
} kv_entry_t;

#define ENTRY_HDR offsetof(kv_entry_t, data)

/* e == NULL marks a free slot: hash 0 means empty (ends a probe), hash
 * KV_TOMB means deleted (probes go on).  Tombstones exist only in the old
 * table of a rehash, where backward-shift deletion could move a live entry
 * into the already migrated part and lose it. */
typedef struct kv_slot {
    uint64_t hash;
    kv_entry_t *e;
} kv_slot_t;

#define KV_TOMB 1

typedef struct kv_table {
    kv_slot_t *slot;
    size_t mask;                /* size - 1, size a power of two */
    size_t used;                /* live entries */
} kv_table_t;

struct kv {
    kv_table_t cur;             /* every insert goes here */
    kv_table_t old;             /* draining into cur; slot NULL if not */
    size_t rehash_idx;          /* old.slot[0..rehash_idx) are migrated */
    uint64_t k0, k1, k2;        /* hash secrets */
    size_t used_memory;
    size_t maxmemory;
    kv_alloc_fn alloc;          /* NULL: libc */
    void *alloc_ud;
};

#define KV_MIN_SLOTS 16
/* Old slots migrated per operation during a rehash.  The new table is
 * twice the old and at most 3/4 of the old is live, so even if every
 * operation inserted, the rehash ends (after size/8 operations) long before
 * the new table reaches its own 3/4 limit. */
#define KV_REHASH_STEP 8

/* ---- memory ---------------------------------------------------------- */

static void *mem_alloc(kv_t *kv, size_t n)
{
    void *p = kv->alloc ? kv->alloc(kv->alloc_ud, NULL, n) : malloc(n);

    if (p)
        kv->used_memory += n;
    return p;
}

static void mem_free(kv_t *kv, void *p, size_t n)
{
    if (p == NULL)
        return;
    kv->used_memory -= n;
    if (kv->alloc)
        kv->alloc(kv->alloc_ud, p, 0);
    else
        free(p);
}

/* Zeroed slot array.  libc's calloc gets fresh pages from mmap already
 * zero, so a big table costs nothing until it is touched. */
static kv_slot_t *slots_alloc(kv_t *kv, size_t nslots)
{
    size_t n = nslots * sizeof(kv_slot_t);
    kv_slot_t *s;

    if (nslots > SIZE_MAX / sizeof(kv_slot_t))
        return NULL;
    if (kv->alloc == NULL) {
        s = calloc(nslots, sizeof(kv_slot_t));
    } else {
        s = kv->alloc(kv->alloc_ud, NULL, n);
        if (s)
            memset(s, 0, n);
    }
    if (s)
        kv->used_memory += n;
    return s;
}

static void slots_free(kv_t *kv, kv_table_t *t)
{
    if (t->slot)
        mem_free(kv, t->slot, (t->mask + 1) * sizeof(kv_slot_t));
    t->slot = NULL;
    t->mask = 0;
    t->used = 0;
}

static size_t entry_size(const kv_entry_t *e)
{
    return ENTRY_HDR + e->klen + e->vcap;
}

/* Rounding to 16 costs nothing with malloc (its chunks are 16-aligned) and
 * leaves room for a slightly longer value next time. */
static size_t entry_alloc_size(size_t klen, size_t vlen)
{
    return (ENTRY_HDR + klen + vlen + 15) & ~(size_t)15;
}

static kv_entry_t *entry_new(kv_t *kv, const char *key, size_t klen,
                             const char *val, size_t vlen)
{
    size_t sz = entry_alloc_size(klen, vlen);
    kv_entry_t *e = mem_alloc(kv, sz);

    if (e == NULL)
        return NULL;
    e->klen = (uint32_t)klen;
    e->vlen = (uint32_t)vlen;
    e->vcap = (uint32_t)(sz - ENTRY_HDR - klen);
    if (klen)
        memcpy(e->data, key, klen);
    if (vlen)
        memcpy(e->data + klen, val, vlen);
    return e;
}

static void entry_free(kv_t *kv, kv_entry_t *e)
{
    mem_free(kv, e, entry_size(e));
}

static inline const char *entry_val(const kv_entry_t *e)
{
    return e->data + e->klen;
}

/* ---- hash ------------------------------------------------------------- */

static inline uint64_t rd64(const unsigned char *p)
{
    uint64_t v;

    memcpy(&v, p, 8);
    return v;
}

static inline uint64_t rd32(const unsigned char *p)
{
    uint32_t v;

    memcpy(&v, p, 4);
    return v;
}

/* Multiply to 128 bits and fold: every output bit depends on every input
 * bit of both operands, at the cost of one mul instruction. */
static inline uint64_t fold_mul(uint64_t a, uint64_t b)
{
    __uint128_t r = (__uint128_t)a * b;

    return (uint64_t)r ^ (uint64_t)(r >> 64);
}

/*
 * Both operands of every multiply are xored with a secret first: were one
 * of them a value the attacker controls outright, sending the input that
 * makes it 0 would zero the product whatever the seed, and give collisions
 * that hold for every seed.
 */
static uint64_t kv_hash(const kv_t *kv, const char *key, size_t len)
{
    const unsigned char *p = (const unsigned char *)key;
    uint64_t a, b, s = kv->k0;
    size_t n;

    if (len <= 16) {
        if (len >= 8) {
            a = rd64(p);
            b = rd64(p + len - 8);
        } else if (len >= 4) {
            a = rd32(p);
            b = rd32(p + len - 4);
        } else if (len > 0) {
            a = (uint64_t)p[0] << 16 | (uint64_t)p[len >> 1] << 8 | p[len - 1];
            b = 0;
        } else {
            a = b = 0;
        }
    } else {
        for (n = len; n > 16; n -= 16, p += 16)
            s = fold_mul(rd64(p) ^ kv->k1, rd64(p + 8) ^ s);
        /* The last 16 bytes, overlapping the last block if need be. */
        a = rd64(p + n - 16);
        b = rd64(p + n - 8);
    }
    return fold_mul(fold_mul(a ^ kv->k1, b ^ s) ^ kv->k2, (uint64_t)len ^ kv->k0);
}

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t seed_from_os(const void *salt)
{
    uint64_t s = 0;
    struct timespec ts;

    if (getrandom(&s, sizeof(s), GRND_NONBLOCK) == (ssize_t)sizeof(s))
        return s;
    /* No entropy yet (early boot): weaker, but still not a constant. */
    clock_gettime(CLOCK_MONOTONIC, &ts);
    s = (uint64_t)ts.tv_nsec ^ (uint64_t)ts.tv_sec << 32;
    s ^= (uint64_t)getpid() << 16 ^ (uint64_t)(uintptr_t)salt;
    return s;
}

/* ---- probing ------------------------------------------------------------ */

/* Keys of 8 to 16 bytes (the usual "key:000000001234") compare as two
 * overlapping words instead of a call to memcmp. */
static inline int key_eq(const char *a, const char *b, size_t n)
{
    if (n >= 8 && n <= 16)
        return rd64((const unsigned char *)a) == rd64((const unsigned char *)b) &&
               rd64((const unsigned char *)a + n - 8) ==
                   rd64((const unsigned char *)b + n - 8);
    return n == 0 || memcmp(a, b, n) == 0;
}

static inline int key_is(const kv_slot_t *s, uint64_t h, const char *key,
                         size_t klen)
{
    return s->hash == h && s->e->klen == klen && key_eq(s->e->data, key, klen);
}

/* cur never holds tombstones: the first free slot ends the probe. */
static kv_slot_t *cur_find(kv_table_t *t, uint64_t h, const char *key,
                           size_t klen)
{
    size_t i = h & t->mask;
    kv_slot_t *s;

    for (;;) {
        s = &t->slot[i];
        if (s->e == NULL)
            return NULL;
        if (key_is(s, h, key, klen))
            return s;
        i = (i + 1) & t->mask;
    }
}

/*
 * Find key in the old table of a rehash.  Slots below rehash_idx are
 * migrated and must not be read.  An unmigrated entry sits at a slot >= idx
 * and every slot between its home and it, other than migrated ones, is still
 * occupied (or a tombstone): so start at max(home, idx), and when the probe
 * wraps past the end continue at idx.  At most size - idx slots are looked
 * at, which also ends probes for missing keys if the empty slots happen to
 * all be in the migrated part.
 */
static kv_slot_t *old_find(kv_t *kv, uint64_t h, const char *key,
                           size_t klen)
{
    kv_table_t *t = &kv->old;
    size_t size = t->mask + 1, idx = kv->rehash_idx;
    size_t i = h & t->mask, steps = size - idx;
    kv_slot_t *s;

    if (i < idx)
        i = idx;
    while (steps--) {
        s = &t->slot[i];
        if (s->e) {
            if (key_is(s, h, key, klen))
                return s;
        } else if (s->hash != KV_TOMB) {
            return NULL;
        }
        if (++i == size)
            i = idx;
    }
    return NULL;
}

static void cur_put(kv_table_t *t, uint64_t h, kv_entry_t *e)
{
    size_t i = h & t->mask;

    while (t->slot[i].e)
        i = (i + 1) & t->mask;
    t->slot[i].hash = h;
    t->slot[i].e = e;
    t->used++;
}

/* Backward-shift deletion: pull later members of the cluster back over the
 * hole when the hole lies on their probe path, so no tombstone is needed
 * and probe lengths do not decay with churn. */
static void cur_remove(kv_table_t *t, size_t i)
{
    size_t j = i, home, mask = t->mask;

    for (;;) {
        j = (j + 1) & mask;
        if (t->slot[j].e == NULL)
            break;
        home = t->slot[j].hash & mask;
        if (((j - home) & mask) >= ((j - i) & mask)) {
            t->slot[i] = t->slot[j];
            i = j;
        }
    }
    t->slot[i].e = NULL;
    t->slot[i].hash = 0;
    t->used--;
}

/* ---- incremental rehash ------------------------------------------------ */

static void rehash_done(kv_t *kv)
{
    slots_free(kv, &kv->old);
    kv->rehash_idx = 0;
}

static void rehash_step(kv_t *kv, size_t nslots)
{
    kv_table_t *o = &kv->old;
    size_t size = o->mask + 1, i = kv->rehash_idx;
    size_t end = size - i < nslots ? size : i + nslots;
    kv_slot_t *s;

    for (; i < end; i++) {
        s = &o->slot[i];
        if (s->e) {
            cur_put(&kv->cur, s->hash, s->e);
            o->used--;
        }
    }
    kv->rehash_idx = end;
    if (end == size || o->used == 0)
        rehash_done(kv);
}

/* Make room in cur for one more key.  All keys, old ones included, count
 * toward cur's load, since they will all end up there. */
static int ensure_room(kv_t *kv)
{
    size_t size = kv->cur.mask + 1, total = kv->cur.used + kv->old.used;
    kv_slot_t *ns;

    if ((total + 1) * 4 <= size * 3)
        return 0;
    /* Unreachable by the arithmetic above KV_REHASH_STEP; kept so the
     * invariant "one rehash at a time" cannot break. */
    if (kv->old.slot)
        rehash_step(kv, SIZE_MAX);
    if (size > SIZE_MAX / 2 / sizeof(kv_slot_t))
        return -ENOMEM;
    ns = slots_alloc(kv, size * 2);
    if (ns == NULL)
        return -ENOMEM;
    kv->old = kv->cur;
    kv->cur.slot = ns;
    kv->cur.mask = size * 2 - 1;
    kv->cur.used = 0;
    kv->rehash_idx = 0;
    return 0;
}

/* ---- key operations ---------------------------------------------------- */

typedef struct kv_ref {
    kv_slot_t *slot;            /* NULL: key absent */
    uint64_t hash;
    int in_old;
} kv_ref_t;

/* Look key up, first moving a few slots of a pending rehash.  The slot
 * pointer is valid until the next table operation. */
static void lookup(kv_t *kv, const char *key, size_t klen, kv_ref_t *r)
{
    r->hash = kv_hash(kv, key, klen);
    r->in_old = 0;
    if (kv->old.slot)
        rehash_step(kv, KV_REHASH_STEP);
    r->slot = cur_find(&kv->cur, r->hash, key, klen);
    if (r->slot == NULL && kv->old.slot) {
        r->slot = old_find(kv, r->hash, key, klen);
        r->in_old = r->slot != NULL;
    }
}

/* New value for an existing key: in place when it fits and does not leave
 * much of a big allocation unused.  Otherwise copy into a new entry rather
 * than realloc, so val may even point into the old entry. */
static int entry_replace(kv_t *kv, kv_slot_t *s, const char *val, size_t vlen)
{
    kv_entry_t *e = s->e, *ne;

    if (vlen <= e->vcap && (e->vcap - vlen <= 64 || e->vcap / 2 <= vlen)) {
in_place:
        if (vlen)
            memmove(e->data + e->klen, val, vlen);
        e->vlen = (uint32_t)vlen;
        return 0;
    }
    ne = entry_new(kv, e->data, e->klen, val, vlen);
    if (ne == NULL) {
        if (vlen <= e->vcap)
            goto in_place;      /* only wanted to shrink */
        return -ENOMEM;
    }
    s->e = ne;
    entry_free(kv, e);
    return 0;
}

static int entry_insert(kv_t *kv, uint64_t h, const char *key, size_t klen,
                        const char *val, size_t vlen)
{
    kv_entry_t *e;

    if (ensure_room(kv))
        return -ENOMEM;
    e = entry_new(kv, key, klen, val, vlen);
    if (e == NULL)
        return -ENOMEM;
    cur_put(&kv->cur, h, e);
    return 0;
}

static int set_ref(kv_t *kv, const kv_ref_t *r, const char *key, size_t klen,
                   const char *val, size_t vlen)
{
    if (klen > KV_MAX_LEN || vlen > KV_MAX_LEN)
        return -E2BIG;
    if (r->slot)
        return entry_replace(kv, r->slot, val, vlen);
    return entry_insert(kv, r->hash, key, klen, val, vlen);
}

static void del_ref(kv_t *kv, const kv_ref_t *r)
{
    kv_entry_t *e = r->slot->e;

    if (r->in_old) {
        r->slot->e = NULL;
        r->slot->hash = KV_TOMB;
        if (--kv->old.used == 0)
            rehash_done(kv);
    } else {
        cur_remove(&kv->cur, (size_t)(r->slot - kv->cur.slot));
    }
    entry_free(kv, e);
}

int kv_set(kv_t *kv, const char *key, size_t klen, const char *val,
           size_t vlen)
{
    kv_ref_t r;

    lookup(kv, key, klen, &r);
    return set_ref(kv, &r, key, klen, val, vlen);
}

const char *kv_get(kv_t *kv, const char *key, size_t klen, size_t *vlen)
{
    kv_ref_t r;

    lookup(kv, key, klen, &r);
    if (r.slot == NULL)
        return NULL;
    *vlen = r.slot->e->vlen;
    return entry_val(r.slot->e);
}

int kv_del(kv_t *kv, const char *key, size_t klen)
{
    kv_ref_t r;

    lookup(kv, key, klen, &r);
    if (r.slot == NULL)
        return 0;
    del_ref(kv, &r);
    return 1;
}

size_t kv_size(const kv_t *kv)
{
    return kv->cur.used + kv->old.used;
}

size_t kv_used_memory(const kv_t *kv)
{
    return kv->used_memory;
}

/* Free every entry; the slot arrays stay as they are. */
static void free_entries(kv_t *kv)
{
    size_t i;

    for (i = 0; i <= kv->cur.mask; i++)
        if (kv->cur.slot[i].e)
            entry_free(kv, kv->cur.slot[i].e);
    /* Migrated old slots still hold pointers to entries now owned by cur. */
    if (kv->old.slot)
        for (i = kv->rehash_idx; i <= kv->old.mask; i++)
            if (kv->old.slot[i].e)
                entry_free(kv, kv->old.slot[i].e);
}

void kv_clear(kv_t *kv)
{
    kv_slot_t *ns;

    free_entries(kv);
    rehash_done(kv);
    if (kv->cur.mask + 1 > KV_MIN_SLOTS &&
        (ns = slots_alloc(kv, KV_MIN_SLOTS)) != NULL) {
        slots_free(kv, &kv->cur);
        kv->cur.slot = ns;
        kv->cur.mask = KV_MIN_SLOTS - 1;
    } else {
        /* Could not get a small table: empty the big one instead. */
        memset(kv->cur.slot, 0, (kv->cur.mask + 1) * sizeof(kv_slot_t));
    }
    kv->cur.used = 0;
}

kv_t *kv_new(const kv_opts_t *opts)
{
    kv_opts_t defaults = {0, 0, NULL, NULL};
    kv_t *kv;
    uint64_t x;

    if (opts == NULL)
        opts = &defaults;
    kv = opts->alloc ? opts->alloc(opts->alloc_ud, NULL, sizeof(*kv))
                     : malloc(sizeof(*kv));
    if (kv == NULL)
        return NULL;
    memset(kv, 0, sizeof(*kv));
    kv->alloc = opts->alloc;
    kv->alloc_ud = opts->alloc_ud;
    kv->maxmemory = opts->maxmemory;
    kv->used_memory = sizeof(*kv);
    x = opts->seed ? opts->seed : seed_from_os(kv);
    kv->k0 = splitmix64(&x);
    kv->k1 = splitmix64(&x);
    kv->k2 = splitmix64(&x);
    kv->cur.slot = slots_alloc(kv, KV_MIN_SLOTS);
    if (kv->cur.slot == NULL) {
        mem_free(kv, kv, sizeof(*kv));
        return NULL;
    }
    kv->cur.mask = KV_MIN_SLOTS - 1;
    return kv;
}

void kv_free(kv_t *kv)
{
    if (kv == NULL)
        return;
    free_entries(kv);
    rehash_done(kv);
    slots_free(kv, &kv->cur);
    mem_free(kv, kv, sizeof(*kv));
}

int kv_verify(kv_t *kv)
{
    size_t i, n, mem = sizeof(*kv);
    kv_slot_t *s;
    kv_entry_t *e;

    if (kv->cur.slot == NULL || (kv->cur.mask & (kv->cur.mask + 1)))
        return -1;
    if ((kv->cur.used + kv->old.used) * 4 > (kv->cur.mask + 1) * 3)
        return -2;
    mem += (kv->cur.mask + 1) * sizeof(kv_slot_t);
    for (i = 0, n = 0; i <= kv->cur.mask; i++) {
        s = &kv->cur.slot[i];
        if ((e = s->e) == NULL) {
            if (s->hash != 0)
                return -3;
            continue;
        }
        n++;
        mem += entry_size(e);
        if (e->vlen > e->vcap || s->hash != kv_hash(kv, e->data, e->klen))
            return -4;
        if (cur_find(&kv->cur, s->hash, e->data, e->klen) != s)
            return -5;
        if (kv->old.slot && old_find(kv, s->hash, e->data, e->klen))
            return -6;          /* in both tables */
    }
    if (n != kv->cur.used)
        return -7;
    if (kv->old.slot) {
        if (kv->rehash_idx > kv->old.mask || kv->old.used == 0)
            return -8;
        mem += (kv->old.mask + 1) * sizeof(kv_slot_t);
        for (i = kv->rehash_idx, n = 0; i <= kv->old.mask; i++) {
            s = &kv->old.slot[i];
            if ((e = s->e) == NULL)
                continue;
            n++;
            mem += entry_size(e);
            if (s->hash != kv_hash(kv, e->data, e->klen))
                return -9;
            if (old_find(kv, s->hash, e->data, e->klen) != s)
                return -10;
        }
        if (n != kv->old.used)
            return -11;
    } else if (kv->old.used != 0 || kv->rehash_idx != 0) {
        return -12;
    }
    if (mem != kv->used_memory)
        return -13;
    return 0;
}

/* ========================================================================
 * Commands
 * ====================================================================== */

#define ADD_ERR(out, lit) resp_add_error((out), (lit), sizeof(lit) - 1)

static const char err_syntax[] = "ERR syntax error";
static const char err_notint[] = "ERR value is not an integer or out of range";
static const char err_nomem[] = "ERR out of memory";
static const char err_oom[] =
    "OOM command not allowed when used memory > 'maxmemory'.";

static int add_store_err(resp_buf_t *out, int err)
{
    if (err == -E2BIG)
        return ADD_ERR(out, "ERR string exceeds maximum allowed size");
    return ADD_ERR(out, err_nomem);
}

typedef int (*kv_cmd_fn)(kv_t *kv, int argc, const resp_arg_t *argv,
                         resp_buf_t *out);

typedef struct kv_cmd {
    const char *name;           /* lowercase letters only */
    int arity;                  /* > 0: exactly; < 0: at least -arity */
    int denyoom;                /* may add memory: refused over maxmemory */
    kv_cmd_fn fn;
} kv_cmd_t;

/* Bit 0x20 is the only difference between an ASCII letter's two cases, and
 * only '@'..'Z' / '`'..'z' map onto a lowercase letter with it set: so for
 * a lowercase-letters-only name this is an exact case-insensitive test. */
static int name_is(const char *s, size_t n, const char *lower)
{
    size_t i;

    for (i = 0; i < n; i++)
        if ((s[i] | 0x20) != lower[i])
            return 0;
    return lower[n] == '\0';
}

static int arg_is(const resp_arg_t *a, const char *lower)
{
    return name_is(a->ptr, a->len, lower);
}

/* ---- connection / server ---------------------------------------------- */

static int reply_arity(const char *name, resp_buf_t *out);

static int cmd_ping(kv_t *kv, int argc, const resp_arg_t *argv,
                    resp_buf_t *out)
{
    (void)kv;
    /* Arity -1 in redis's table, but the command itself takes at most 1. */
    if (argc > 2)
        return reply_arity("ping", out);
    if (argc == 2)
        return resp_add_bulk(out, argv[1].ptr, argv[1].len);
    return resp_add_simple(out, "PONG", 4);
}

static int cmd_echo(kv_t *kv, int argc, const resp_arg_t *argv,
                    resp_buf_t *out)
{
    (void)kv;
    (void)argc;
    return resp_add_bulk(out, argv[1].ptr, argv[1].len);
}

static int cmd_quit(kv_t *kv, int argc, const resp_arg_t *argv,
                    resp_buf_t *out)
{
    (void)kv;
    (void)argc;
    (void)argv;
    return resp_add_ok(out) ? -ENOMEM : KV_CLOSE;
}

static int cmd_select(kv_t *kv, int argc, const resp_arg_t *argv,
                      resp_buf_t *out)
{
    long long id;

    (void)kv;
    (void)argc;
    if (!resp_str2ll(argv[1].ptr, argv[1].len, &id))
        return ADD_ERR(out, err_notint);
    if (id < INT_MIN || id > INT_MAX)
        return ADD_ERR(out, "ERR value is out of range, value must between "
                            "-2147483648 and 2147483647");
    if (id != 0)
        return ADD_ERR(out, "ERR DB index is out of range");
    return resp_add_ok(out);
}

static int cmd_dbsize(kv_t *kv, int argc, const resp_arg_t *argv,
                      resp_buf_t *out)
{
    (void)argc;
    (void)argv;
    return resp_add_int(out, (long long)kv_size(kv));
}

static int cmd_flush(kv_t *kv, int argc, const resp_arg_t *argv,
                     resp_buf_t *out)
{
    if (argc > 2 ||
        (argc == 2 && !arg_is(&argv[1], "async") && !arg_is(&argv[1], "sync")))
        return ADD_ERR(out, err_syntax);
    kv_clear(kv);
    return resp_add_ok(out);
}

/* '*' and '?' glob, ASCII case-insensitive.  Backtracks only to the last
 * '*', which is enough for correctness with these two metacharacters and
 * keeps it linear-ish; patterns and names here are short anyway. */
static int glob_nocase(const char *p, size_t pn, const char *s, size_t sn)
{
    size_t pi = 0, si = 0, star_p = SIZE_MAX, star_s = 0;
    unsigned char a, b;

    while (si < sn) {
        if (pi < pn && p[pi] == '*') {
            star_p = pi++;
            star_s = si;
            continue;
        }
        if (pi < pn) {
            a = (unsigned char)p[pi];
            b = (unsigned char)s[si];
            if (a >= 'A' && a <= 'Z')
                a |= 0x20;
            if (b >= 'A' && b <= 'Z')
                b |= 0x20;
            if (a == '?' || a == b) {
                pi++;
                si++;
                continue;
            }
        }
        if (star_p == SIZE_MAX)
            return 0;
        pi = star_p + 1;
        si = ++star_s;
    }
    while (pi < pn && p[pi] == '*')
        pi++;
    return pi == pn;
}

static int cmd_config(kv_t *kv, int argc, const resp_arg_t *argv,
                      resp_buf_t *out)
{
    static const char *const names[] = {"save", "appendonly", "databases",
                                        "maxmemory"};
    enum { NPARAM = sizeof(names) / sizeof(names[0]) };
    char mm[RESP_LLSTR_SIZE];
    const char *vals[NPARAM];
    size_t vlens[NPARAM], out_len0;
    const resp_arg_t *as_given[NPARAM];
    unsigned found = 0;
    int i, j, n = 0;

    if (!arg_is(&argv[1], "get")) {
        char msg[200];
        size_t len = argv[1].len > 128 ? 128 : argv[1].len;
        size_t at;
        const char *nul = len ? memchr(argv[1].ptr, '\0', len) : NULL;

        if (nul)
            len = (size_t)(nul - argv[1].ptr);
        static const char pre[] = "ERR unknown subcommand '";
        static const char post[] = "'. Try CONFIG HELP.";

        memcpy(msg, pre, sizeof(pre) - 1);
        at = sizeof(pre) - 1;
        if (len)
            memcpy(msg + at, argv[1].ptr, len);
        at += len;
        memcpy(msg + at, post, sizeof(post) - 1);
        at += sizeof(post) - 1;
        return resp_add_error(out, msg, at);
    }
    if (argc < 3)
        return ADD_ERR(out,
                       "ERR wrong number of arguments for 'config|get' command");
    vals[0] = "";
    vlens[0] = 0;
    vals[1] = "no";
    vlens[1] = 2;
    vals[2] = "1";
    vlens[2] = 1;
    vals[3] = mm;
    vlens[3] = resp_ll2str(mm, (long long)kv->maxmemory);
    for (i = 0; i < NPARAM; i++)
        as_given[i] = NULL;
    for (j = 2; j < argc; j++) {
        const resp_arg_t *a = &argv[j];
        int glob = a->len && (memchr(a->ptr, '*', a->len) ||
                              memchr(a->ptr, '?', a->len));

        for (i = 0; i < NPARAM; i++) {
            if (found & (1u << i))
                continue;
            if (glob ? glob_nocase(a->ptr, a->len, names[i], strlen(names[i]))
                     : name_is(a->ptr, a->len, names[i])) {
                found |= 1u << i;
                as_given[i] = glob ? NULL : a;
                n++;
            }
        }
    }
    out_len0 = out->len;
    if (resp_add_array(out, 2 * n))
        return -ENOMEM;
    for (i = 0; i < NPARAM; i++) {
        if (!(found & (1u << i)))
            continue;
        if ((as_given[i] ? resp_add_bulk(out, as_given[i]->ptr, as_given[i]->len)
                         : resp_add_bulk(out, names[i], strlen(names[i]))) ||
            resp_add_bulk(out, vals[i], vlens[i])) {
            out->len = out_len0;
            return -ENOMEM;
        }
    }
    return 0;
}

static int cmd_command(kv_t *kv, int argc, const resp_arg_t *argv,
                       resp_buf_t *out);

/* ---- strings ----------------------------------------------------------- */

static int cmd_get(kv_t *kv, int argc, const resp_arg_t *argv,
                   resp_buf_t *out)
{
    kv_ref_t r;

    (void)argc;
    lookup(kv, argv[1].ptr, argv[1].len, &r);
    if (r.slot == NULL)
        return resp_add_null(out);
    return resp_add_bulk(out, entry_val(r.slot->e), r.slot->e->vlen);
}

#define SET_NX 1
#define SET_XX 2
#define SET_GET 4

static int cmd_set(kv_t *kv, int argc, const resp_arg_t *argv,
                   resp_buf_t *out)
{
    const resp_arg_t *k = &argv[1], *v = &argv[2];
    int flags = 0, i, err;
    size_t len0 = out->len;
    kv_ref_t r;

    for (i = 3; i < argc; i++) {
        if (arg_is(&argv[i], "nx") && !(flags & SET_XX))
            flags |= SET_NX;
        else if (arg_is(&argv[i], "xx") && !(flags & SET_NX))
            flags |= SET_XX;
        else if (arg_is(&argv[i], "get"))
            flags |= SET_GET;
        else if (!arg_is(&argv[i], "keepttl"))
            return ADD_ERR(out, err_syntax);
    }
    lookup(kv, k->ptr, k->len, &r);
    if (flags & SET_GET) {
        /* Copied out before the value may be overwritten in place. */
        if (r.slot ? resp_add_bulk(out, entry_val(r.slot->e), r.slot->e->vlen)
                   : resp_add_null(out))
            return -ENOMEM;
    }
    if (((flags & SET_NX) && r.slot) || ((flags & SET_XX) && !r.slot))
        return (flags & SET_GET) ? 0 : resp_add_null(out);
    err = set_ref(kv, &r, k->ptr, k->len, v->ptr, v->len);
    if (err) {
        out->len = len0;        /* one reply only: the error */
        return add_store_err(out, err);
    }
    return (flags & SET_GET) ? 0 : resp_add_ok(out);
}

static int cmd_mget(kv_t *kv, int argc, const resp_arg_t *argv,
                    resp_buf_t *out)
{
    kv_ref_t r;
    int i;

    if (resp_add_array(out, argc - 1))
        return -ENOMEM;
    for (i = 1; i < argc; i++) {
        lookup(kv, argv[i].ptr, argv[i].len, &r);
        if (r.slot ? resp_add_bulk(out, entry_val(r.slot->e), r.slot->e->vlen)
                   : resp_add_null(out))
            return -ENOMEM;
    }
    return 0;
}

static int cmd_mset(kv_t *kv, int argc, const resp_arg_t *argv,
                    resp_buf_t *out)
{
    int i, err;

    if (argc % 2 == 0)
        return ADD_ERR(out, "ERR wrong number of arguments for 'mset' command");
    for (i = 1; i < argc; i += 2) {
        err = kv_set(kv, argv[i].ptr, argv[i].len, argv[i + 1].ptr,
                     argv[i + 1].len);
        if (err)
            return add_store_err(out, err);
    }
    return resp_add_ok(out);
}

static int cmd_del(kv_t *kv, int argc, const resp_arg_t *argv,
                   resp_buf_t *out)
{
    long long n = 0;
    int i;

    for (i = 1; i < argc; i++)
        n += kv_del(kv, argv[i].ptr, argv[i].len);
    return resp_add_int(out, n);
}

static int cmd_exists(kv_t *kv, int argc, const resp_arg_t *argv,
                      resp_buf_t *out)
{
    long long n = 0;
    kv_ref_t r;
    int i;

    for (i = 1; i < argc; i++) {
        lookup(kv, argv[i].ptr, argv[i].len, &r);
        n += r.slot != NULL;
    }
    return resp_add_int(out, n);
}

static int incr_by(kv_t *kv, const resp_arg_t *key, long long by,
                   resp_buf_t *out)
{
    char buf[RESP_LLSTR_SIZE];
    long long v = 0;
    kv_ref_t r;
    int err;

    lookup(kv, key->ptr, key->len, &r);
    if (r.slot && !resp_str2ll(entry_val(r.slot->e), r.slot->e->vlen, &v))
        return ADD_ERR(out, err_notint);
    if ((by < 0 && v < 0 && by < LLONG_MIN - v) ||
        (by > 0 && v > 0 && by > LLONG_MAX - v))
        return ADD_ERR(out, "ERR increment or decrement would overflow");
    v += by;
    err = set_ref(kv, &r, key->ptr, key->len, buf, resp_ll2str(buf, v));
    if (err)
        return add_store_err(out, err);
    return resp_add_int(out, v);
}

static int cmd_incr(kv_t *kv, int argc, const resp_arg_t *argv,
                    resp_buf_t *out)
{
    (void)argc;
    return incr_by(kv, &argv[1], 1, out);
}

static int cmd_decr(kv_t *kv, int argc, const resp_arg_t *argv,
                    resp_buf_t *out)
{
    (void)argc;
    return incr_by(kv, &argv[1], -1, out);
}

static int cmd_incrby(kv_t *kv, int argc, const resp_arg_t *argv,
                      resp_buf_t *out)
{
    long long by;

    (void)argc;
    if (!resp_str2ll(argv[2].ptr, argv[2].len, &by))
        return ADD_ERR(out, err_notint);
    return incr_by(kv, &argv[1], by, out);
}

static int cmd_decrby(kv_t *kv, int argc, const resp_arg_t *argv,
                      resp_buf_t *out)
{
    long long by;

    (void)argc;
    if (!resp_str2ll(argv[2].ptr, argv[2].len, &by))
        return ADD_ERR(out, err_notint);
    if (by == LLONG_MIN)
        return ADD_ERR(out, "ERR decrement would overflow");
    return incr_by(kv, &argv[1], -by, out);
}

/* ---- dispatch ---------------------------------------------------------- */

enum {
    C_GET, C_SET, C_DEL, C_PING, C_ECHO, C_INCR, C_DECR, C_MGET, C_MSET,
    C_QUIT, C_SELECT, C_CONFIG, C_INCRBY, C_DECRBY, C_DBSIZE, C_EXISTS,
    C_UNLINK, C_COMMAND, C_FLUSHDB, C_FLUSHALL, C_COUNT
};

static const kv_cmd_t cmd_table[C_COUNT] = {
    [C_GET] = {"get", 2, 0, cmd_get},
    [C_SET] = {"set", -3, 1, cmd_set},
    [C_DEL] = {"del", -2, 0, cmd_del},
    [C_PING] = {"ping", -1, 0, cmd_ping},
    [C_ECHO] = {"echo", 2, 0, cmd_echo},
    [C_INCR] = {"incr", 2, 1, cmd_incr},
    [C_DECR] = {"decr", 2, 1, cmd_decr},
    [C_MGET] = {"mget", -2, 0, cmd_mget},
    [C_MSET] = {"mset", -3, 1, cmd_mset},
    [C_QUIT] = {"quit", -1, 0, cmd_quit},
    [C_SELECT] = {"select", 2, 0, cmd_select},
    [C_CONFIG] = {"config", -2, 0, cmd_config},
    [C_INCRBY] = {"incrby", 3, 1, cmd_incrby},
    [C_DECRBY] = {"decrby", 3, 1, cmd_decrby},
    [C_DBSIZE] = {"dbsize", 1, 0, cmd_dbsize},
    [C_EXISTS] = {"exists", -2, 0, cmd_exists},
    [C_UNLINK] = {"unlink", -2, 0, cmd_del},
    [C_COMMAND] = {"command", -1, 0, cmd_command},
    [C_FLUSHDB] = {"flushdb", -1, 0, cmd_flush},
    [C_FLUSHALL] = {"flushall", -1, 0, cmd_flush},
};

static int cmd_command(kv_t *kv, int argc, const resp_arg_t *argv,
                       resp_buf_t *out)
{
    (void)kv;
    if (argc >= 2 && arg_is(&argv[1], "count"))
        return resp_add_int(out, C_COUNT);
    return resp_add_array(out, 0);
}

/* Length and first letter pick at most one candidate; one compare confirms
 * it.  No table scan, no hashing of the name. */
static const kv_cmd_t *cmd_lookup(const char *s, size_t n)
{
    int c;

    if (n < 3 || n > 8)
        return NULL;
    switch (n * 256 + (unsigned char)(s[0] | 0x20)) {
    case 3 * 256 + 'g': c = C_GET; break;
    case 3 * 256 + 's': c = C_SET; break;
    case 3 * 256 + 'd': c = C_DEL; break;
    case 4 * 256 + 'p': c = C_PING; break;
    case 4 * 256 + 'e': c = C_ECHO; break;
    case 4 * 256 + 'i': c = C_INCR; break;
    case 4 * 256 + 'd': c = C_DECR; break;
    case 4 * 256 + 'm': c = (s[1] | 0x20) == 'g' ? C_MGET : C_MSET; break;
    case 4 * 256 + 'q': c = C_QUIT; break;
    case 6 * 256 + 's': c = C_SELECT; break;
    case 6 * 256 + 'c': c = C_CONFIG; break;
    case 6 * 256 + 'i': c = C_INCRBY; break;
    case 6 * 256 + 'd': c = (s[1] | 0x20) == 'e' ? C_DECRBY : C_DBSIZE; break;
    case 6 * 256 + 'e': c = C_EXISTS; break;
    case 6 * 256 + 'u': c = C_UNLINK; break;
    case 7 * 256 + 'c': c = C_COMMAND; break;
    case 7 * 256 + 'f': c = C_FLUSHDB; break;
    case 8 * 256 + 'f': c = C_FLUSHALL; break;
    default: return NULL;
    }
    return name_is(s, n, cmd_table[c].name) ? &cmd_table[c] : NULL;
}

/* Appends s[0..n), cut at 'lim' bytes and at a NUL as printf's "%.*s". */
static size_t put_cstr(char *dst, const char *s, size_t n, size_t lim)
{
    const char *nul;

    if (n > lim)
        n = lim;
    if (n == 0)
        return 0;
    nul = memchr(s, '\0', n);
    if (nul)
        n = (size_t)(nul - s);
    memcpy(dst, s, n);
    return n;
}

/* Redis 7.0: "unknown command '%.128s', with args beginning with: " and
 * then "'%.*s' " per argument while the list is under 128 bytes, each
 * argument cut to what is left of the 128. */
static int reply_unknown(int argc, const resp_arg_t *argv, resp_buf_t *out)
{
    static const char a[] = "ERR unknown command '";
    static const char b[] = "', with args beginning with: ";
    char msg[sizeof(a) + 128 + sizeof(b) + 128 + 3 + 1];
    size_t at, args0;
    int i;

    memcpy(msg, a, sizeof(a) - 1);
    at = sizeof(a) - 1;
    at += put_cstr(msg + at, argv[0].ptr, argv[0].len, 128);
    memcpy(msg + at, b, sizeof(b) - 1);
    at += sizeof(b) - 1;
    args0 = at;
    for (i = 1; i < argc && at - args0 < 128; i++) {
        msg[at++] = '\'';
        at += put_cstr(msg + at, argv[i].ptr, argv[i].len,
                       128 - (at - 1 - args0));
        msg[at++] = '\'';
        msg[at++] = ' ';
    }
    return resp_add_error(out, msg, at);
}

static int reply_arity(const char *name, resp_buf_t *out)
{
    static const char a[] = "ERR wrong number of arguments for '";
    static const char b[] = "' command";
    char msg[sizeof(a) + 16 + sizeof(b)];
    size_t at = sizeof(a) - 1, n = strlen(name);

    memcpy(msg, a, at);
    memcpy(msg + at, name, n);
    at += n;
    memcpy(msg + at, b, sizeof(b) - 1);
    at += sizeof(b) - 1;
    return resp_add_error(out, msg, at);
}

int kv_exec(kv_t *kv, int argc, const resp_arg_t *argv, resp_buf_t *out)
{
    const kv_cmd_t *c;
    int r;

    if (out->oom)
        return -ENOMEM;
    if (argc <= 0)
        return 0;
    c = cmd_lookup(argv[0].ptr, argv[0].len);
    if (c == NULL)
        r = reply_unknown(argc, argv, out);
    else if (c->arity > 0 ? argc != c->arity : argc < -c->arity)
        r = reply_arity(c->name, out);
    else if (c->denyoom && kv->maxmemory && kv->used_memory > kv->maxmemory)
        r = ADD_ERR(out, err_oom);
    else
        r = c->fn(kv, argc, argv, out);
    return out->oom ? -ENOMEM : r;
}
