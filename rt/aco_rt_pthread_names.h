/* aco_rt_pthread_names.h - port a pthreads program to cos without editing
 * it: `cc -include aco_rt_pthread_names.h prog.c ...` maps every pthread_
 * and PTHREAD_ name that aco_rt_pthread.h has to its aco_rt_pthread_ twin,
 * and sched_yield to aco_rt_pthread_yield.
 *
 * The system's <pthread.h> (and the headers that declare pthread_ names)
 * are included first, before any mapping, so their own declarations keep
 * their names; the mapping then applies to the program's text.  The calls
 * this face does not have (cancellation, signals, spin locks, fork
 * handlers, names, scheduling, affinity, ...: every other pthread_ call of
 * those headers) are poisoned: the compiler stops at them, whatever its
 * flags, instead of the program calling real pthreads on a co's id.
 *
 * Those system headers come before the program's first line: a feature
 * macro the program defines itself (_GNU_SOURCE) comes too late for them;
 * give it on the command line (-D_GNU_SOURCE=, empty: the program's own
 * "#define _GNU_SOURCE" is then no redefinition, which -Werror refuses
 * after -D_GNU_SOURCE, whose value is 1).
 *
 * main itself is no co: a port runs its main through
 * aco_rt_pthread_run_main (e.g. rename it with -Dmain=prog_main and add a
 * main that calls aco_rt_pthread_run_main(prog_main, argc, argv)).
 */
#ifndef ACO_RT_PTHREAD_NAMES_H
#define ACO_RT_PTHREAD_NAMES_H

#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <time.h>

#include "aco_rt_pthread.h"

/* Types */
#define pthread_t                   aco_rt_pthread_t
#define pthread_attr_t              aco_rt_pthread_attr_t
#define pthread_mutex_t             aco_rt_pthread_mutex_t
#define pthread_mutexattr_t         aco_rt_pthread_mutexattr_t
#define pthread_cond_t              aco_rt_pthread_cond_t
#define pthread_condattr_t          aco_rt_pthread_condattr_t
#define pthread_once_t              aco_rt_pthread_once_t
#define pthread_key_t               aco_rt_pthread_key_t
#define pthread_rwlock_t            aco_rt_pthread_rwlock_t
#define pthread_rwlockattr_t        aco_rt_pthread_rwlockattr_t
#define pthread_barrier_t           aco_rt_pthread_barrier_t
#define pthread_barrierattr_t       aco_rt_pthread_barrierattr_t

/* Constants and initializers (the system's are macros or enumerators) */
#undef PTHREAD_CREATE_JOINABLE
#undef PTHREAD_CREATE_DETACHED
#undef PTHREAD_STACK_MIN
#undef PTHREAD_MUTEX_NORMAL
#undef PTHREAD_MUTEX_RECURSIVE
#undef PTHREAD_MUTEX_ERRORCHECK
#undef PTHREAD_MUTEX_DEFAULT
#undef PTHREAD_PROCESS_PRIVATE
#undef PTHREAD_PROCESS_SHARED
#undef PTHREAD_MUTEX_INITIALIZER
#undef PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP
#undef PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP
#undef PTHREAD_COND_INITIALIZER
#undef PTHREAD_RWLOCK_INITIALIZER
#undef PTHREAD_ONCE_INIT
#undef PTHREAD_KEYS_MAX
#undef PTHREAD_DESTRUCTOR_ITERATIONS
#undef PTHREAD_BARRIER_SERIAL_THREAD
#define PTHREAD_CREATE_JOINABLE     ACO_RT_PTHREAD_CREATE_JOINABLE
#define PTHREAD_CREATE_DETACHED     ACO_RT_PTHREAD_CREATE_DETACHED
#define PTHREAD_STACK_MIN           ACO_RT_PTHREAD_STACK_MIN
#define PTHREAD_MUTEX_NORMAL        ACO_RT_PTHREAD_MUTEX_NORMAL
#define PTHREAD_MUTEX_RECURSIVE     ACO_RT_PTHREAD_MUTEX_RECURSIVE
#define PTHREAD_MUTEX_ERRORCHECK    ACO_RT_PTHREAD_MUTEX_ERRORCHECK
#define PTHREAD_MUTEX_DEFAULT       ACO_RT_PTHREAD_MUTEX_DEFAULT
#define PTHREAD_PROCESS_PRIVATE     ACO_RT_PTHREAD_PROCESS_PRIVATE
#define PTHREAD_PROCESS_SHARED      ACO_RT_PTHREAD_PROCESS_SHARED
#define PTHREAD_MUTEX_INITIALIZER   ACO_RT_PTHREAD_MUTEX_INITIALIZER
#define PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP  ACO_RT_PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP
#define PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP ACO_RT_PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP
#define PTHREAD_COND_INITIALIZER    ACO_RT_PTHREAD_COND_INITIALIZER
#define PTHREAD_RWLOCK_INITIALIZER  ACO_RT_PTHREAD_RWLOCK_INITIALIZER
#define PTHREAD_ONCE_INIT           ACO_RT_PTHREAD_ONCE_INIT
#define PTHREAD_KEYS_MAX            ACO_RT_PTHREAD_KEYS_MAX
#define PTHREAD_DESTRUCTOR_ITERATIONS ACO_RT_PTHREAD_DESTRUCTOR_ITERATIONS
#define PTHREAD_BARRIER_SERIAL_THREAD ACO_RT_PTHREAD_BARRIER_SERIAL_THREAD

/* Threads */
#define pthread_attr_init           aco_rt_pthread_attr_init
#define pthread_attr_destroy        aco_rt_pthread_attr_destroy
#define pthread_attr_setstacksize   aco_rt_pthread_attr_setstacksize
#define pthread_attr_getstacksize   aco_rt_pthread_attr_getstacksize
#define pthread_attr_setdetachstate aco_rt_pthread_attr_setdetachstate
#define pthread_attr_getdetachstate aco_rt_pthread_attr_getdetachstate
#define pthread_create              aco_rt_pthread_create
#define pthread_join                aco_rt_pthread_join
#define pthread_tryjoin_np          aco_rt_pthread_tryjoin_np
#define pthread_timedjoin_np        aco_rt_pthread_timedjoin_np
#define pthread_detach              aco_rt_pthread_detach
#define pthread_self                aco_rt_pthread_self
#define pthread_equal               aco_rt_pthread_equal
#define pthread_exit                aco_rt_pthread_exit
#define pthread_yield               aco_rt_pthread_yield
#define sched_yield                 aco_rt_pthread_yield   /* in a co: the others run */

/* Mutexes */
#define pthread_mutexattr_init      aco_rt_pthread_mutexattr_init
#define pthread_mutexattr_destroy   aco_rt_pthread_mutexattr_destroy
#define pthread_mutexattr_settype   aco_rt_pthread_mutexattr_settype
#define pthread_mutexattr_gettype   aco_rt_pthread_mutexattr_gettype
#define pthread_mutexattr_setpshared aco_rt_pthread_mutexattr_setpshared
#define pthread_mutexattr_getpshared aco_rt_pthread_mutexattr_getpshared
#define pthread_mutex_init          aco_rt_pthread_mutex_init
#define pthread_mutex_destroy       aco_rt_pthread_mutex_destroy
#define pthread_mutex_lock          aco_rt_pthread_mutex_lock
#define pthread_mutex_trylock       aco_rt_pthread_mutex_trylock
#define pthread_mutex_timedlock     aco_rt_pthread_mutex_timedlock
#define pthread_mutex_clocklock     aco_rt_pthread_mutex_clocklock
#define pthread_mutex_unlock        aco_rt_pthread_mutex_unlock

/* Condition variables */
#define pthread_condattr_init       aco_rt_pthread_condattr_init
#define pthread_condattr_destroy    aco_rt_pthread_condattr_destroy
#define pthread_condattr_setclock   aco_rt_pthread_condattr_setclock
#define pthread_condattr_getclock   aco_rt_pthread_condattr_getclock
#define pthread_condattr_setpshared aco_rt_pthread_condattr_setpshared
#define pthread_condattr_getpshared aco_rt_pthread_condattr_getpshared
#define pthread_cond_init           aco_rt_pthread_cond_init
#define pthread_cond_destroy        aco_rt_pthread_cond_destroy
#define pthread_cond_wait           aco_rt_pthread_cond_wait
#define pthread_cond_timedwait      aco_rt_pthread_cond_timedwait
#define pthread_cond_clockwait      aco_rt_pthread_cond_clockwait
#define pthread_cond_signal         aco_rt_pthread_cond_signal
#define pthread_cond_broadcast      aco_rt_pthread_cond_broadcast

/* Once, keys */
#define pthread_once                aco_rt_pthread_once
#define pthread_key_create          aco_rt_pthread_key_create
#define pthread_key_delete          aco_rt_pthread_key_delete
#define pthread_getspecific         aco_rt_pthread_getspecific
#define pthread_setspecific         aco_rt_pthread_setspecific

/* Read-write locks, barriers */
#define pthread_rwlockattr_init     aco_rt_pthread_rwlockattr_init
#define pthread_rwlockattr_destroy  aco_rt_pthread_rwlockattr_destroy
#define pthread_rwlockattr_setpshared aco_rt_pthread_rwlockattr_setpshared
#define pthread_rwlockattr_getpshared aco_rt_pthread_rwlockattr_getpshared
#define pthread_rwlock_init         aco_rt_pthread_rwlock_init
#define pthread_rwlock_destroy      aco_rt_pthread_rwlock_destroy
#define pthread_rwlock_rdlock       aco_rt_pthread_rwlock_rdlock
#define pthread_rwlock_tryrdlock    aco_rt_pthread_rwlock_tryrdlock
#define pthread_rwlock_timedrdlock  aco_rt_pthread_rwlock_timedrdlock
#define pthread_rwlock_wrlock       aco_rt_pthread_rwlock_wrlock
#define pthread_rwlock_trywrlock    aco_rt_pthread_rwlock_trywrlock
#define pthread_rwlock_timedwrlock  aco_rt_pthread_rwlock_timedwrlock
#define pthread_rwlock_unlock       aco_rt_pthread_rwlock_unlock
#define pthread_barrierattr_init    aco_rt_pthread_barrierattr_init
#define pthread_barrierattr_destroy aco_rt_pthread_barrierattr_destroy
#define pthread_barrierattr_setpshared aco_rt_pthread_barrierattr_setpshared
#define pthread_barrierattr_getpshared aco_rt_pthread_barrierattr_getpshared
#define pthread_barrier_init        aco_rt_pthread_barrier_init
#define pthread_barrier_destroy     aco_rt_pthread_barrier_destroy
#define pthread_barrier_wait        aco_rt_pthread_barrier_wait

/* Not in this face: stop at compile time.  Every other pthread_ call of
 * glibc's <pthread.h> and <signal.h> (as of 2.36, and those it may add are
 * no safer: they take a pthread_t or one of the mapped types) is poisoned:
 * any use after this line is an error ("attempt to use poisoned"), with
 * any compiler flags, instead of a call of the real one on a co's id or on
 * one of this face's objects.  (The system headers above declared them
 * already; a program that includes them again gets nothing new: their
 * guards.) */
#if defined(__cplusplus) && defined(__has_include)
#if __has_include(<bits/gthr.h>)
#include <bits/gthr.h>  /* libstdc++'s: it names every pthread_ call itself */
#endif
#endif
#undef pthread_cleanup_push
#undef pthread_cleanup_pop
#undef pthread_cleanup_push_defer_np
#undef pthread_cleanup_pop_restore_np
/* cancellation */
#pragma GCC poison pthread_cancel pthread_testcancel pthread_setcancelstate
#pragma GCC poison pthread_setcanceltype pthread_cleanup_push pthread_cleanup_pop
#pragma GCC poison pthread_cleanup_push_defer_np pthread_cleanup_pop_restore_np
/* signals */
#pragma GCC poison pthread_kill pthread_sigmask pthread_sigqueue
#pragma GCC poison pthread_attr_setsigmask_np pthread_attr_getsigmask_np
/* fork handlers, spin locks, names */
#pragma GCC poison pthread_atfork
#pragma GCC poison pthread_spin_init pthread_spin_destroy pthread_spin_lock
#pragma GCC poison pthread_spin_trylock pthread_spin_unlock
#pragma GCC poison pthread_setname_np pthread_getname_np
/* scheduling, CPUs, clocks: a co is not a kernel thread */
#pragma GCC poison pthread_setschedparam pthread_getschedparam pthread_setschedprio
#pragma GCC poison pthread_setaffinity_np pthread_getaffinity_np pthread_getcpuclockid
#pragma GCC poison pthread_setconcurrency pthread_getconcurrency
#pragma GCC poison pthread_getattr_np pthread_getattr_default_np pthread_setattr_default_np
#pragma GCC poison pthread_clockjoin_np
/* attributes this face has no field for */
#pragma GCC poison pthread_attr_setaffinity_np pthread_attr_getaffinity_np
#pragma GCC poison pthread_attr_setguardsize pthread_attr_getguardsize
#pragma GCC poison pthread_attr_setinheritsched pthread_attr_getinheritsched
#pragma GCC poison pthread_attr_setschedparam pthread_attr_getschedparam
#pragma GCC poison pthread_attr_setschedpolicy pthread_attr_getschedpolicy
#pragma GCC poison pthread_attr_setscope pthread_attr_getscope
#pragma GCC poison pthread_attr_setstack pthread_attr_getstack
#pragma GCC poison pthread_attr_setstackaddr pthread_attr_getstackaddr
/* robust and priority mutexes, rwlock kinds and clocks */
#pragma GCC poison pthread_mutex_consistent pthread_mutex_consistent_np
#pragma GCC poison pthread_mutex_getprioceiling pthread_mutex_setprioceiling
#pragma GCC poison pthread_mutexattr_getprioceiling pthread_mutexattr_setprioceiling
#pragma GCC poison pthread_mutexattr_getprotocol pthread_mutexattr_setprotocol
#pragma GCC poison pthread_mutexattr_getrobust pthread_mutexattr_setrobust
#pragma GCC poison pthread_mutexattr_getrobust_np pthread_mutexattr_setrobust_np
#pragma GCC poison pthread_rwlockattr_getkind_np pthread_rwlockattr_setkind_np
#pragma GCC poison pthread_rwlock_clockrdlock pthread_rwlock_clockwrlock

#endif /* ACO_RT_PTHREAD_NAMES_H */
