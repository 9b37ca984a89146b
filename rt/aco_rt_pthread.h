/* aco_rt_pthread.h - pthreads' shapes over the runtime's cos (aco_rt.h), so
 * that a program written for pthreads ports by renaming pthread_ to
 * aco_rt_pthread_ and PTHREAD_ to ACO_RT_PTHREAD_ (aco_rt_pthread_names.h
 * does it with macros).  A "thread" here is a co of the calling thread's
 * scheduler.
 *
 * Results are pthreads': 0 or a positive errno.  What differs:
 *  - EPERM: a call that needs a co (lock, wait, join, once, ...) made
 *    outside any co.  Creating cos and the attribute, init and destroy calls
 *    work anywhere; aco_rt_pthread_create needs a scheduler on the calling
 *    thread (EPERM if none).
 *  - EINVAL: a NULL object, attribute object, out-pointer or function
 *    where a call does not say what NULL means (attr NULL: the defaults,
 *    as in pthreads), before anything else (pthreads: undefined).
 *  - ECANCELED: a co cancelled with aco_rt_cancel gets it from every call
 *    that can block, as from the runtime's own; there is no
 *    pthread_cancel (a co is never unwound by force).
 *  - A co stays on the thread that created it, on a share stack of its
 *    scheduler, unless the attributes ask for a stack bigger than the share
 *    stacks: then it has one of its own of that size.
 *  - The share-stack rule (aco_rt.h): the objects of this header (mutexes,
 *    conds, once controls, ...) must not lie on the stack of a co that has a
 *    share stack: put them in static or heap memory, or on the stack of a
 *    co with a stack of its own (aco_rt_pthread_run_main's main co has
 *    one).  An init call refuses such an object (EINVAL).  The same goes
 *    for what a co hands others by pointer (create's arg, say).
 *  - A refused object stays refused.  When a mutex, cond, rwlock or barrier
 *    init returns EINVAL (the object on a share stack, a bad attribute, a
 *    barrier count of 0), it marks the object so: every later call on it
 *    (lock, unlock, wait, signal, broadcast, destroy, ...) fails with
 *    EINVAL and does nothing, from any co or thread, and the first such
 *    call writes one line to stderr naming the call, the object's address
 *    and the code that called init (its address, and file+offset for
 *    addr2line where dladdr(3) can tell).  A later init that succeeds (or
 *    the static initializer assigned to it) makes it a working object.  (A program that never checks init cannot
 *    run on unprotected; init writes the object, which lies in the
 *    caller's own frames or memory.)
 *  - Mutexes: a NORMAL (= DEFAULT) mutex locked again by its holder fails
 *    with EDEADLK instead of hanging, and every kind's unlock by a non-holder
 *    fails with EPERM (pthreads: undefined for NORMAL).  FIFO, handed over
 *    by unlock: no overtaking.
 *  - Conds: no spurious wakeups; a cond wait on a RECURSIVE mutex held n
 *    times releases it fully and takes it back n times.
 *  - Deadlines (timedlock, timedwait, timedjoin_np): abstime on
 *    CLOCK_REALTIME (conds: their clock, REALTIME or MONOTONIC) is turned
 *    into a deadline on aco_rt_now's CLOCK_MONOTONIC when the call starts:
 *    a change of the wall clock during the wait is not followed.  Never
 *    early.
 *
 * Every object is zero-initialisable (= the static initializer: a NORMAL
 * mutex, a cond on CLOCK_REALTIME, ...), and destroy needs no memory back.
 * Once destroy returned 0 the memory may be freed at once, as with pthreads:
 * no co that waited on the object touches it again (the cos a cond's
 * broadcast or a barrier's last arrival woke; and a co whose deadline or
 * cancel ended its wait just then, which destroy waits for while it
 * leaves, as glibc's does).
 * Thread safety: as the runtime's (mutex, cond: aco_rt_mutex_t and
 * aco_rt_cond_t): every object (once, rwlock and barrier too, which are
 * built of a mutex and conds) may be shared by cos of any schedulers.
 */
#ifndef ACO_RT_PTHREAD_H
#define ACO_RT_PTHREAD_H

#include "aco_rt.h"

#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* Strict C99's <time.h> has no struct timespec (POSIX's, C11's): declared
 * here, the prototypes below take the same type the program's headers
 * define. */
struct timespec;

#ifdef __cplusplus
extern "C" {
#endif

/* The static initializers' shapes: all zero, or all zero but the last
 * member (as compilers take them with -Wall -Wextra, in C and C++). */
#ifdef __cplusplus
#define ACO_RT_PTHREAD_ZERO_ {}
#define ACO_RT_PTHREAD_LAST_(v) {{}, nullptr, 0, (v)}
#else
#define ACO_RT_PTHREAD_ZERO_ {0}
#define ACO_RT_PTHREAD_LAST_(v) {.type_ = (v)}
#endif

/* ======================================================================== */
/* Threads: cos                                                             */
/* ======================================================================== */

/* A co's id (pthread_t is an unsigned long in glibc too): what
 * aco_rt_pthread_create stores, and aco_rt_pthread_self() in that co.  It
 * is the co's aco_rt_co_t* (for aco_rt_cancel, say), valid as long as the
 * id is (until joined; detached: until the co ends). */
typedef unsigned long aco_rt_pthread_t;

enum { ACO_RT_PTHREAD_CREATE_JOINABLE = 0, ACO_RT_PTHREAD_CREATE_DETACHED = 1 };
#define ACO_RT_PTHREAD_STACK_MIN 16384

typedef struct {
    size_t stacksize_;          /* 0: the scheduler's share stack size */
    int    detachstate_;
} aco_rt_pthread_attr_t;

int aco_rt_pthread_attr_init(aco_rt_pthread_attr_t* a);
int aco_rt_pthread_attr_destroy(aco_rt_pthread_attr_t* a);
/* EINVAL below ACO_RT_PTHREAD_STACK_MIN.  More than the scheduler's share
 * stacks have: the co gets a stack of its own of that size. */
int aco_rt_pthread_attr_setstacksize(aco_rt_pthread_attr_t* a, size_t n);
/* The size set, else the calling thread's scheduler's share stack size
 * (256 KiB without a scheduler). */
int aco_rt_pthread_attr_getstacksize(const aco_rt_pthread_attr_t* a, size_t* n);
/* ACO_RT_PTHREAD_CREATE_JOINABLE or _DETACHED, else EINVAL. */
int aco_rt_pthread_attr_setdetachstate(aco_rt_pthread_attr_t* a, int st);
int aco_rt_pthread_attr_getdetachstate(const aco_rt_pthread_attr_t* a, int* st);

/* A new co of the calling thread's scheduler running fn(arg), ready at once
 * (it runs when the caller blocks or yields, or the scheduler starts); a
 * NULL attr: joinable, share stack.  0, EAGAIN (no memory), EINVAL (bad
 * attr), EPERM (no scheduler on this thread). */
int aco_rt_pthread_create(aco_rt_pthread_t* t, const aco_rt_pthread_attr_t* attr,
                          void* (*fn)(void*), void* arg);
/* Wait for t to end, then store what fn returned (or aco_rt_pthread_exit's
 * value) in *ret if ret is not NULL, and let t go.  0, EDEADLK (t is the
 * caller), EINVAL (t detached, or has a joiner), ESRCH (t was not made by
 * aco_rt_pthread_create), EPERM (outside a co), ECANCELED.  An id joined
 * already is gone, as in pthreads: joining or detaching it again is the
 * program's error (its memory may be another co's by then), not ESRCH. */
int aco_rt_pthread_join(aco_rt_pthread_t t, void** ret);
/* As join, but EBUSY at once if t has not ended, another co waiting to
 * join it or not (glibc's _np calls); a
 * cancelled caller gets ECANCELED, as from join, whether t has ended or
 * not. */
int aco_rt_pthread_tryjoin_np(aco_rt_pthread_t t, void** ret);
/* As join, but ETIMEDOUT once abstime (CLOCK_REALTIME) passed; EINVAL for
 * a bad abstime while t runs (one that has ended is joined: 0, as
 * glibc's).  A NULL abstime waits as join does (glibc's too). */
int aco_rt_pthread_timedjoin_np(aco_rt_pthread_t t, void** ret,
                                const struct timespec* abstime);
/* t is freed as soon as it ends; nobody joins it.  0, EINVAL (detached
 * already, or has a joiner), ESRCH. */
int aco_rt_pthread_detach(aco_rt_pthread_t t);
/* The calling co's id (any co's, not only those made here), or outside cos
 * an id of the calling thread (never a co's). */
aco_rt_pthread_t aco_rt_pthread_self(void);
int aco_rt_pthread_equal(aco_rt_pthread_t a, aco_rt_pthread_t b);
/* End the calling co (aco_rt_exit: its key destructors run; the frames in
 * between are dropped, not unwound) with ret for its joiner.  Outside a co
 * it aborts with a message. */
__attribute__((noreturn)) void aco_rt_pthread_exit(void* ret);
/* Let the other ready cos run (sched_yield's shape): 0.  Outside a co it
 * is sched_yield(). */
int aco_rt_pthread_yield(void);

/* Run main_fn(argc, argv) as a co with a stack of its own (8 MiB, mapped
 * lazily: objects on its stack may be shared), on the calling thread's
 * scheduler (made with default options if it has none, and freed after),
 * and run the scheduler.  As when main returns in a pthreads program, the
 * other cos are stopped when main_fn returns (aco_rt_sched_stop; destroyed
 * if the scheduler was made here); after aco_rt_pthread_exit in main_fn
 * they run to their end.  main_fn's result (0 when it ended with
 * aco_rt_pthread_exit); 1 with a message on stderr if main_fn is NULL,
 * the scheduler could not start or failed, or stopped with every co
 * waiting for another (aco_rt_sched_run's -EDEADLK). */
int aco_rt_pthread_run_main(int (*main_fn)(int, char**), int argc, char** argv);

/* ======================================================================== */
/* Mutexes                                                                  */
/* ======================================================================== */

enum {
    ACO_RT_PTHREAD_MUTEX_NORMAL = 0,
    ACO_RT_PTHREAD_MUTEX_RECURSIVE = 1,
    ACO_RT_PTHREAD_MUTEX_ERRORCHECK = 2,
    ACO_RT_PTHREAD_MUTEX_DEFAULT = ACO_RT_PTHREAD_MUTEX_NORMAL
};
enum { ACO_RT_PTHREAD_PROCESS_PRIVATE = 0, ACO_RT_PTHREAD_PROCESS_SHARED = 1 };

typedef struct { int type_; int pshared_; } aco_rt_pthread_mutexattr_t;
int aco_rt_pthread_mutexattr_init(aco_rt_pthread_mutexattr_t* a);
int aco_rt_pthread_mutexattr_destroy(aco_rt_pthread_mutexattr_t* a);
int aco_rt_pthread_mutexattr_settype(aco_rt_pthread_mutexattr_t* a, int type);
int aco_rt_pthread_mutexattr_gettype(const aco_rt_pthread_mutexattr_t* a, int* type);
/* Every setpshared: PROCESS_PRIVATE, else ENOTSUP (SHARED) or EINVAL. */
int aco_rt_pthread_mutexattr_setpshared(aco_rt_pthread_mutexattr_t* a, int ps);
int aco_rt_pthread_mutexattr_getpshared(const aco_rt_pthread_mutexattr_t* a, int* ps);

typedef struct {
    aco_rt_mutex_t m_;
    void*          owner_;      /* the holding co (atomic) */
    unsigned       count_;      /* RECURSIVE: times held */
    int            type_;       /* ACO_RT_PTHREAD_MUTEX_*, -1: destroyed */
} aco_rt_pthread_mutex_t;
#define ACO_RT_PTHREAD_MUTEX_INITIALIZER ACO_RT_PTHREAD_ZERO_      /* NORMAL */
#define ACO_RT_PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP \
    ACO_RT_PTHREAD_LAST_(ACO_RT_PTHREAD_MUTEX_RECURSIVE)
#define ACO_RT_PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP \
    ACO_RT_PTHREAD_LAST_(ACO_RT_PTHREAD_MUTEX_ERRORCHECK)

/* attr NULL: NORMAL.  EINVAL: m on a share stack, or a bad attr. */
int aco_rt_pthread_mutex_init(aco_rt_pthread_mutex_t* m, const aco_rt_pthread_mutexattr_t* attr);
/* EBUSY while held (or waited for); EINVAL (destroyed, or refused). */
int aco_rt_pthread_mutex_destroy(aco_rt_pthread_mutex_t* m);
/* 0, EDEADLK (held by the caller, not RECURSIVE), EAGAIN (RECURSIVE held
 * too many times), EINVAL (destroyed, or refused by init), EPERM,
 * ECANCELED (a RECURSIVE mutex the co holds too; EDEADLK comes first). */
int aco_rt_pthread_mutex_lock(aco_rt_pthread_mutex_t* m);
/* 0, EBUSY (held by another, or by the caller and not RECURSIVE), EAGAIN
 * (RECURSIVE held too many times), EINVAL (destroyed, or refused), EPERM. */
int aco_rt_pthread_mutex_trylock(aco_rt_pthread_mutex_t* m);
/* As lock, or ETIMEDOUT once abstime (CLOCK_REALTIME) passed; EINVAL for a
 * bad abstime when it has to wait (a free mutex is taken without a look at
 * abstime, NULL too: glibc's). */
int aco_rt_pthread_mutex_timedlock(aco_rt_pthread_mutex_t* m, const struct timespec* abstime);
/* The same on clock clk: CLOCK_REALTIME or CLOCK_MONOTONIC (EINVAL else). */
int aco_rt_pthread_mutex_clocklock(aco_rt_pthread_mutex_t* m, clockid_t clk,
                                   const struct timespec* abstime);
/* 0, EPERM (the caller does not hold it), EINVAL (refused by init). */
int aco_rt_pthread_mutex_unlock(aco_rt_pthread_mutex_t* m);

/* ======================================================================== */
/* Condition variables                                                      */
/* ======================================================================== */

typedef struct { clockid_t clock_; int pshared_; } aco_rt_pthread_condattr_t;
int aco_rt_pthread_condattr_init(aco_rt_pthread_condattr_t* a);
int aco_rt_pthread_condattr_destroy(aco_rt_pthread_condattr_t* a);
/* CLOCK_REALTIME (the default) or CLOCK_MONOTONIC: the clock of
 * timedwait's abstime.  EINVAL else. */
int aco_rt_pthread_condattr_setclock(aco_rt_pthread_condattr_t* a, clockid_t clk);
int aco_rt_pthread_condattr_getclock(const aco_rt_pthread_condattr_t* a, clockid_t* clk);
int aco_rt_pthread_condattr_setpshared(aco_rt_pthread_condattr_t* a, int ps);
int aco_rt_pthread_condattr_getpshared(const aco_rt_pthread_condattr_t* a, int* ps);

typedef struct {
    aco_rt_cond_t c_;
    clockid_t     clock_;       /* CLOCK_REALTIME is 0 */
} aco_rt_pthread_cond_t;
#define ACO_RT_PTHREAD_COND_INITIALIZER ACO_RT_PTHREAD_ZERO_       /* REALTIME */

/* EINVAL: c on a share stack, or a bad attr. */
int aco_rt_pthread_cond_init(aco_rt_pthread_cond_t* c, const aco_rt_pthread_condattr_t* attr);
/* EBUSY while cos wait on it; EINVAL (refused by init). */
int aco_rt_pthread_cond_destroy(aco_rt_pthread_cond_t* c);
/* 0, EPERM (m not held by the caller), ECANCELED (m held again), EINVAL
 * (c or m refused by init: nothing done). */
int aco_rt_pthread_cond_wait(aco_rt_pthread_cond_t* c, aco_rt_pthread_mutex_t* m);
/* As wait, or ETIMEDOUT (m held again) once abstime, on the cond's clock,
 * passed; EINVAL for a bad abstime. */
int aco_rt_pthread_cond_timedwait(aco_rt_pthread_cond_t* c, aco_rt_pthread_mutex_t* m,
                                  const struct timespec* abstime);
/* The same on clock clk (CLOCK_REALTIME or CLOCK_MONOTONIC). */
int aco_rt_pthread_cond_clockwait(aco_rt_pthread_cond_t* c, aco_rt_pthread_mutex_t* m,
                                  clockid_t clk, const struct timespec* abstime);
/* From anywhere (a co or not); 0, or EINVAL (c refused by init).  (A
 * thread with no scheduler wakes a co only while its scheduler runs: see
 * aco_rt_sched_run on -EDEADLK.) */
int aco_rt_pthread_cond_signal(aco_rt_pthread_cond_t* c);
int aco_rt_pthread_cond_broadcast(aco_rt_pthread_cond_t* c);

/* ======================================================================== */
/* Once                                                                     */
/* ======================================================================== */

typedef struct {
    uint32_t       done_;
    aco_rt_mutex_t m_;          /* held while the init routine runs */
} aco_rt_pthread_once_t;
#define ACO_RT_PTHREAD_ONCE_INIT ACO_RT_PTHREAD_ZERO_

/* Run init once for o: the first caller runs it (it may block); callers
 * that come meanwhile wait for it to return.  init must return (an
 * aco_rt_pthread_exit in it leaves them waiting for good).  0, EPERM
 * (outside a co, unless init already ran), EDEADLK (init called once on o),
 * ECANCELED (in a cancelled co, whether or not init already ran). */
int aco_rt_pthread_once(aco_rt_pthread_once_t* o, void (*init)(void));

/* ======================================================================== */
/* Keys: the runtime's co-local keys (aco_rt.h)                             */
/* ======================================================================== */

typedef aco_rt_key_t aco_rt_pthread_key_t;
#define ACO_RT_PTHREAD_KEYS_MAX ACO_RT_KEYS_MAX
#define ACO_RT_PTHREAD_DESTRUCTOR_ITERATIONS ACO_RT_KEY_DTOR_ROUNDS

/* 0, EAGAIN (no key left). */
int   aco_rt_pthread_key_create(aco_rt_pthread_key_t* key, void (*dtor)(void*));
/* 0, EINVAL. */
int   aco_rt_pthread_key_delete(aco_rt_pthread_key_t key);
void* aco_rt_pthread_getspecific(aco_rt_pthread_key_t key);
/* 0, EINVAL, ENOMEM. */
int   aco_rt_pthread_setspecific(aco_rt_pthread_key_t key, const void* val);

/* ======================================================================== */
/* Read-write locks (readers first, as glibc's default) and barriers        */
/* ======================================================================== */

typedef struct { int pshared_; } aco_rt_pthread_rwlockattr_t;
int aco_rt_pthread_rwlockattr_init(aco_rt_pthread_rwlockattr_t* a);
int aco_rt_pthread_rwlockattr_destroy(aco_rt_pthread_rwlockattr_t* a);
int aco_rt_pthread_rwlockattr_setpshared(aco_rt_pthread_rwlockattr_t* a, int ps);
int aco_rt_pthread_rwlockattr_getpshared(const aco_rt_pthread_rwlockattr_t* a, int* ps);

typedef struct {
    aco_rt_mutex_t m_;          /* guards the fields below */
    aco_rt_cond_t  readers_q_;
    aco_rt_cond_t  writers_q_;
    void*          writer_;     /* the co that holds it for writing */
    unsigned       readers_;    /* cos that hold it for reading */
    unsigned       mark_;       /* a refused rwlock's mark (pthread.c) */
} aco_rt_pthread_rwlock_t;
#define ACO_RT_PTHREAD_RWLOCK_INITIALIZER ACO_RT_PTHREAD_ZERO_

/* A reader gets in while no writer holds it (waiting writers do not stop
 * it: a reader may lock again while holding it).  EDEADLK: the caller holds
 * it for writing (tryrdlock and trywrlock too, not EBUSY as glibc says).
 * EBUSY (try), ETIMEDOUT (abstime: CLOCK_REALTIME),
 * EAGAIN (too many readers), EINVAL (l on a share stack or a bad attr;
 * every call on a refused l; a bad abstime, even when l is free, as glibc's rwlock),
 * EPERM, ECANCELED. */
int aco_rt_pthread_rwlock_init(aco_rt_pthread_rwlock_t* l, const aco_rt_pthread_rwlockattr_t* attr);
int aco_rt_pthread_rwlock_destroy(aco_rt_pthread_rwlock_t* l);  /* EBUSY, EINVAL */
int aco_rt_pthread_rwlock_rdlock(aco_rt_pthread_rwlock_t* l);
int aco_rt_pthread_rwlock_tryrdlock(aco_rt_pthread_rwlock_t* l);
int aco_rt_pthread_rwlock_timedrdlock(aco_rt_pthread_rwlock_t* l, const struct timespec* abstime);
int aco_rt_pthread_rwlock_wrlock(aco_rt_pthread_rwlock_t* l);
int aco_rt_pthread_rwlock_trywrlock(aco_rt_pthread_rwlock_t* l);
int aco_rt_pthread_rwlock_timedwrlock(aco_rt_pthread_rwlock_t* l, const struct timespec* abstime);
/* 0, EPERM (held by nobody, or for writing by another co), EINVAL
 * (refused). */
int aco_rt_pthread_rwlock_unlock(aco_rt_pthread_rwlock_t* l);

typedef struct { int pshared_; } aco_rt_pthread_barrierattr_t;
int aco_rt_pthread_barrierattr_init(aco_rt_pthread_barrierattr_t* a);
int aco_rt_pthread_barrierattr_destroy(aco_rt_pthread_barrierattr_t* a);
int aco_rt_pthread_barrierattr_setpshared(aco_rt_pthread_barrierattr_t* a, int ps);
int aco_rt_pthread_barrierattr_getpshared(const aco_rt_pthread_barrierattr_t* a, int* ps);

typedef struct {
    aco_rt_mutex_t m_;
    aco_rt_cond_t  q_;
    unsigned       n_;          /* cos per round */
    unsigned       arrived_;
    unsigned       round_;      /* (unused since 244c339: the layout kept) */
} aco_rt_pthread_barrier_t;
#define ACO_RT_PTHREAD_BARRIER_SERIAL_THREAD (-1)

/* count cos per round: EINVAL if 0, a bad attr, or b lies on a share
 * stack. */
int aco_rt_pthread_barrier_init(aco_rt_pthread_barrier_t* b,
                                const aco_rt_pthread_barrierattr_t* attr, unsigned count);
/* EBUSY; EINVAL (refused, destroyed, or never made by init). */
int aco_rt_pthread_barrier_destroy(aco_rt_pthread_barrier_t* b);
/* Wait for count cos: ACO_RT_PTHREAD_BARRIER_SERIAL_THREAD to the last to
 * come, 0 to the others; EPERM, ECANCELED (the co no longer counts),
 * EINVAL (b refused, destroyed, or never made by init). */
int aco_rt_pthread_barrier_wait(aco_rt_pthread_barrier_t* b);

#ifdef __cplusplus
}
#endif

#endif /* ACO_RT_PTHREAD_H */
