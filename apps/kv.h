/*
 * kv.h - in-memory key-value store and redis command execution.
 *
 * Pure C11 + glibc, no dependency on the coroutine runtime.  A kv_t is
 * thread-compatible: any number of them, each used by one thread at a time.
 * No global mutable state: each store has its own hash seed.
 *
 * The store
 * ---------
 * Keys and values are binary-safe byte strings (pointer + length), each at
 * most KV_MAX_LEN bytes.  Each key and its value live in ONE allocation;
 * overwriting a value with one that fits the allocation's spare room (it is
 * rounded up to 16 bytes) rewrites it in place without allocating, so
 * "SET existing-key same-size-value" and INCR of an existing counter do
 * not allocate (the latter unless its number of digits outgrows the room).
 *
 * The index is an open-addressing table (linear probing, power-of-two size,
 * the full 64-bit hash kept beside each entry pointer so a probe touches
 * entries only on a hash match, backward-shift deletion, load <= 3/4).
 * Growth is incremental: when the table is 3/4 full a table twice the size
 * is allocated (zero-filled, so no pass over it) and every later operation
 * moves the entries of 8 old slots into it, so no single command pays for
 * moving the whole table.  The table never shrinks, except by FLUSHALL,
 * FLUSHDB or kv_clear().
 *
 * The hash is a 64x64->128-bit multiply-fold function with three secret
 * 64-bit keys derived from the store's seed, which by default comes from
 * getrandom(): an attacker who does not know it cannot choose colliding
 * keys offline.  (It is not a cryptographic PRF like redis's SipHash: it is
 * cheaper on short keys, which is what a store hashes most.)
 *
 * Memory: kv_used_memory() counts the bytes the store asked its allocator
 * for (entries and tables).  Out of memory never crashes and never leaves a
 * half-done change: a command whose allocation fails replies
 * "-ERR out of memory" and the store is as before that command (MSET
 * excepted: the pairs before the failing one stay set).  With maxmemory set,
 * commands that may add memory (SET, MSET, INCR, DECR, INCRBY, DECRBY) are
 * refused, as redis does with the noeviction policy, while the used memory
 * is above it:
 *   "-OOM command not allowed when used memory > 'maxmemory'."
 *
 * Commands (names case-insensitive; replies and errors as redis 7.0)
 * ------------------------------------------------------------------
 *   PING [msg]            +PONG, or msg as a bulk string
 *   ECHO msg              msg as a bulk string
 *   SET key value [NX|XX] [GET] [KEEPTTL]
 *                         +OK; $-1 if NX/XX prevented it; with GET the old
 *                         value (or $-1) instead.  There is no expiry:
 *                         EX/PX/EXAT/PXAT (and anything else) reply
 *                         "-ERR syntax error"; KEEPTTL is accepted (no-op).
 *                         NX with XX: "-ERR syntax error".
 *   GET key               the value, or $-1
 *   DEL key [key ...]     :number of keys deleted  (UNLINK is the same)
 *   EXISTS key [key ...]  :number of keys that exist (repeats count)
 *   INCR/DECR key, INCRBY/DECRBY key n
 *                         :new value; a missing key counts from 0; the
 *                         value is stored as its decimal string.
 *                         "-ERR value is not an integer or out of range"
 *                           if the value or n is not a resp_str2ll() number
 *                         "-ERR increment or decrement would overflow"
 *                           if the result leaves [INT64_MIN, INT64_MAX]
 *                         "-ERR decrement would overflow"
 *                           for DECRBY key -9223372036854775808
 *   MGET key [key ...]    array of values / $-1
 *   MSET key value [key value ...]   +OK
 *   DBSIZE                :number of keys
 *   FLUSHDB/FLUSHALL [ASYNC|SYNC]    +OK (always synchronous)
 *   SELECT index          +OK for 0; "-ERR DB index is out of range" for
 *                         other integers (there is one database);
 *                         "-ERR value is not an integer or out of range";
 *                         "-ERR value is out of range, value must between
 *                         -2147483648 and 2147483647" (sic, as redis 7.0)
 *   CONFIG GET pattern [pattern ...]
 *                         pairs for the few parameters clients probe:
 *                         save "", appendonly "no", databases "1",
 *                         maxmemory <bytes>; a pattern may use '*' and
 *                         '?'; a pattern without them echoes the name as
 *                         the client spelled it (as redis does).  Other
 *                         subcommands: "-ERR unknown subcommand 'x'. Try
 *                         CONFIG HELP."
 *   COMMAND [...]         *0 (an empty array); COMMAND COUNT: :n
 *   QUIT [...]            +OK, and kv_exec() returns KV_CLOSE
 * Errors for any command:
 *   "-ERR wrong number of arguments for 'get' command" (name lowercased,
 *     'config|get' for CONFIG GET)
 *   "-ERR unknown command 'foo', with args beginning with: 'a' 'b' "
 *     (the name cut at 128 bytes; then each argument as '<arg>' plus a
 *     blank, while that text is shorter than 128 bytes, each argument cut
 *     to what remains of the 128; cut at a NUL byte as redis's %s does;
 *     '\r' and '\n' shown as blanks)
 *   "-ERR syntax error"
 *   "-ERR out of memory", "-OOM command not allowed ..." (see Memory)
 *   "-ERR string exceeds maximum allowed size" (a key or value longer than
 *     KV_MAX_LEN, only possible through a caller other than resp_parse())
 */
#ifndef KV_H
#define KV_H

#include <stddef.h>
#include <stdint.h>

#include "resp.h"

/* Longest key or value the store accepts (the parser's bulk limit is far
 * lower). */
#define KV_MAX_LEN ((size_t)UINT32_MAX - 64)

/* kv_exec() result bit: send the reply, then close the connection (QUIT). */
#define KV_CLOSE 1

typedef struct kv kv_t;

/* The realloc-like allocator of resp.h (resp_alloc_fn); a custom one is
 * used for every allocation the store makes. */
typedef resp_alloc_fn kv_alloc_fn;

typedef struct kv_opts {
    uint64_t seed;              /* hash seed; 0: from getrandom() */
    size_t maxmemory;           /* bytes, see above; 0: no limit */
    kv_alloc_fn alloc;          /* NULL: realloc()/free() */
    void *alloc_ud;
} kv_opts_t;

/* Create an empty store.  opts may be NULL (all defaults).  NULL if out of
 * memory. */
kv_t *kv_new(const kv_opts_t *opts);

/* Free the store and everything in it.  kv may be NULL. */
void kv_free(kv_t *kv);

/*
 * Execute one command, argv[0] being its name, and append its complete
 * reply to out.  argc must be >= 1 (argc <= 0 does nothing and returns 0).
 * The arguments are only read during the call (they may point into the
 * caller's input buffer); nothing keeps pointers to them.
 *
 * Returns 0, or KV_CLOSE after QUIT (flush out, then close), or -ENOMEM if
 * the reply could not be appended to out (out->oom is set; the connection's
 * replies are out of step, so close it).  If out->oom is already set the
 * command is not executed and -ENOMEM is returned.  Store-level failures
 * (out of memory, maxmemory) are error replies, not negative returns.
 */
int kv_exec(kv_t *kv, int argc, const resp_arg_t *argv, resp_buf_t *out);

/* Number of keys. */
size_t kv_size(const kv_t *kv);

/* Bytes the store has allocated (its kv_t, entries and tables). */
size_t kv_used_memory(const kv_t *kv);

/* Direct access, for tests and embedding.  Same semantics as the commands
 * of the same name without the protocol. */

/* Set key to value (replacing any value).  0, or -ENOMEM (store unchanged)
 * or -E2BIG (key or value longer than KV_MAX_LEN).  val may point into the
 * store itself (a kv_get() result).  maxmemory is not consulted here, only
 * by kv_exec(). */
int kv_set(kv_t *kv, const char *key, size_t klen, const char *val,
           size_t vlen);

/* The value of key and its length in *vlen, or NULL if there is none.  The
 * pointer stays valid until key is next modified or deleted, or the store
 * is cleared or freed. */
const char *kv_get(kv_t *kv, const char *key, size_t klen, size_t *vlen);

/* Delete key.  1 if it existed, 0 if not. */
int kv_del(kv_t *kv, const char *key, size_t klen);

/* Delete every key and shrink the table to its initial size. */
void kv_clear(kv_t *kv);

/* Check the table's invariants (counts, every entry reachable from its home
 * slot, stored hashes right, memory accounting).  0 if all hold, else a
 * negative number naming the first broken one.  O(size); a debugging aid. */
int kv_verify(kv_t *kv);

#endif /* KV_H */
