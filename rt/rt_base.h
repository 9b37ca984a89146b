/* rt_base.h - what every part of the runtime uses: branch hints, locks
 * and atomics (none in the single-thread build).  A leaf: it includes
 * nothing of the runtime's.
 *
 * Each internal header declares what follows its includes hidden from
 * other modules (libaco_rt.so exports aco_rt_* alone): a function that
 * several sources call is still inlined, and called without the PLT, in
 * its own.
 */
#ifndef ACO_RT_BASE_H
#define ACO_RT_BASE_H

#include <sched.h>
#include <stddef.h>
#include <stdint.h>

#pragma GCC visibility push(hidden)

#define rt_likely(x)   __builtin_expect(!!(x), 1)
#define rt_unlikely(x) __builtin_expect(!!(x), 0)
#define rt_container_of(p, type, field) \
    ((type*)(void*)((char*)(p) - offsetof(type, field)))

/* Thread-local variables, initial-exec as libaco's: every access is one
 * instruction, in libaco_rt.so too (the default model there calls
 * __tls_get_addr through the PLT at each access: rt_tls_sched is read by
 * every call).  The runtime's are a few words of the static TLS block,
 * which a library loaded at start (linked, or LD_PRELOAD) always has and
 * one dlopen'ed later gets from glibc's surplus. */
#define RT_TLS __thread __attribute__((tls_model("initial-exec")))

/* ------------------------------------------------------------------------ */
/* Locks and atomics                                                        */
/* ------------------------------------------------------------------------ */

static inline void rt_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Ask for p's cache line, to write it (a hint: never faults). */
static inline void rt_prefetch_w(const void* p) { __builtin_prefetch(p, 1, 3); }

/* ACO_RT_NO_THREADS: the single-thread build, for programs with one
 * scheduler: no atomics, no locks (objects must not be shared by the cos of
 * two threads, and there is no pool). */
#ifdef ACO_RT_NO_THREADS
#define rt_load(p)         (*(p))
#define rt_store(p, v)     (*(p) = (v))
#define rt_xchg(p, v)      __extension__({ __typeof__(*(p)) o_ = *(p); *(p) = (v); o_; })
#define rt_cas(p, e, d)    (*(p) == *(e) ? (*(p) = (d), 1) : (*(e) = *(p), 0))
#define rt_fetch_add(p, v) __extension__({ __typeof__(*(p)) o_ = *(p); *(p) += (v); o_; })
static inline void rt_lock(uint32_t* l) { (void)l; }
static inline void rt_unlock(uint32_t* l) { (void)l; }
#else
#define rt_load(p)         __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define rt_store(p, v)     __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define rt_xchg(p, v)      __atomic_exchange_n((p), (v), __ATOMIC_ACQ_REL)
#define rt_cas(p, e, d)    __atomic_compare_exchange_n((p), (e), (d), 0, \
                                                       __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)
#define rt_fetch_add(p, v) __atomic_fetch_add((p), (v), __ATOMIC_ACQ_REL)


/* A test-and-test-and-set spin lock: the sections it guards are a few
 * pointer moves, never a call that blocks.  A holder that was preempted is
 * waited for with sched_yield. */
static inline void rt_lock(uint32_t* l) {
    while (rt_unlikely(__atomic_exchange_n(l, 1, __ATOMIC_ACQUIRE))) {
        for (unsigned i = 0; __atomic_load_n(l, __ATOMIC_RELAXED); i++) {
            if (i < 64) rt_pause(); else sched_yield();
        }
    }
}
static inline void rt_unlock(uint32_t* l) { __atomic_store_n(l, 0, __ATOMIC_RELEASE); }
#endif

#pragma GCC visibility pop

#endif /* ACO_RT_BASE_H */
