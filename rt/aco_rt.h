/* aco_rt.h - a coroutine runtime on libaco: one scheduler per thread, timers,
 * io_uring / epoll I/O, mutex, condition variable, semaphore, wait group and
 * channels.
 *
 * The model.  A scheduler (aco_rt_sched_t) belongs to the thread that
 * created it and runs there, in that thread's libaco main co, inside
 * aco_rt_sched_run().  Cos (aco_rt_co_t) are libaco cos on the scheduler's
 * share stacks (or on a stack of their own when asked): the scheduler
 * resumes each ready co in turn; a co runs until it blocks in a call of this
 * header (or aco_rt_yield()), and a blocked co costs its object, its live
 * stack bytes and nothing else.  A co that blocks or yields runs the next
 * ready co itself (libaco's aco_yield_to: one switch, not two through the
 * scheduler), in the same FIFO order: a hand-off never jumps the queue, and
 * counts as one of the "co resumes" after every 64 of which the scheduler
 * looks at I/O, timers and other threads.
 *
 * Threads.  A scheduler's own calls (run, free, stats, dump, timers) are
 * made from its thread.  Everything else works across threads, each
 * function saying where it may be called from: the sync objects and
 * channels are shared by the cos of any schedulers (and some calls work
 * outside cos); a co may be joined from a co of any scheduler, and
 * detached or cancelled from any thread; aco_rt_spawn, aco_rt_sched_stop
 * and aco_rt_close work from any thread; keys are process-wide.  Every
 * promise this header makes of "other cos" holds for cos of other threads
 * too.  (The single-thread build, -DACO_RT_NO_THREADS, has none of this:
 * each thread's objects stay with its own cos, and there are no pools.)
 *
 * Blocking calls.  Every call that can block takes `deadline`, an absolute
 * time on aco_rt_now()'s clock in ns: -1 waits without limit, a time in the
 * past (0, and every negative value but -1) does not wait at all.  They
 * return a negative errno:
 *   -ETIMEDOUT  the deadline passed first;
 *   -ECANCELED  the co was cancelled (aco_rt_cancel): this call and every
 *               later blocking call of the co fail so, at once, whether
 *               or not they would have had to wait (a cancelled co cannot
 *               go on looping through calls that happen not to block);
 *   -EPERM      called outside a co of a running scheduler (but
 *               aco_rt_pool_wait, which blocks the calling thread).
 * They never lose data: a call that returns an error transferred nothing
 * (I/O calls: or returns the byte count it did transfer; on a socket the
 * error that cut it short is then said by the next read, write, send or
 * receive on it, as the kernel keeps it: a reset is -ECONNRESET once, not
 * an end of file or -EPIPE).
 *
 * No memory.  A call that needs memory and finds none returns -ENOMEM (or
 * NULL with errno ENOMEM) at once, without parking: a co that retries
 * should sleep first (aco_rt_sleep), or it keeps its thread from the
 * cos whose frees it waits for.  While memory stays short, cos that must
 * be copied back onto a share stack to run wait for it (aco_rt_sched_run),
 * and their deadlines may pass meanwhile.
 *
 * NULL.  A pointer argument may be NULL where its call says what that
 * means; anywhere else NULL is refused and nothing is done: -EINVAL from a
 * call that returns -errno (-EFAULT, the kernel's answer, for a buffer or
 * an I/O vector of a non-zero size, and for a path or structure the
 * kernel reads; a call that needs a co may say -EPERM first outside one),
 * and from the others their zero (0, NULL, nothing done).  A pointer that
 * is wrong in any other way is not looked for: as in libc, it is
 * undefined.
 *
 * The share-stack rule.  A co's stack may be a share stack that other cos
 * use while it is blocked, so nothing that is written while the co is
 * blocked may point into its stack.  The runtime keeps to it itself: its
 * waiter records live in the co's heap object, a channel element waits in
 * heap memory (the co's record, the channel, a ring between two pool
 * threads, or a mailbox beside the record for elements over 8 bytes), and
 * io_uring never gets a buffer that lies on a
 * share stack (such a call waits for readiness instead and then does a plain
 * system call).  What the program must keep to: objects that other cos use
 * (aco_rt_mutex_t, aco_rt_chan_t, aco_rt_timer_t, ...) must not live on a
 * co's stack; put them in static or heap memory, or on the stack of the
 * thread that runs the scheduler (outside any co).
 */
#ifndef ACO_RT_H
#define ACO_RT_H

#include <stddef.h>
#include <stdint.h>
#include <poll.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <sys/uio.h>

/* The runtime is built on libaco and versioned with it: aco.h holds the one
 * version of the project (installed beside this header; in the source tree,
 * compile with -I<the top directory>). */
#include "aco.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ACO_RT_VERSION_MAJOR ACO_VERSION_MAJOR
#define ACO_RT_VERSION_MINOR ACO_VERSION_MINOR
#define ACO_RT_VERSION_PATCH ACO_VERSION_PATCH

typedef struct aco_rt_sched aco_rt_sched_t;
typedef struct aco_rt_co aco_rt_co_t;
typedef void (*aco_rt_fn_t)(void* arg);

/* ======================================================================== */
/* Scheduler                                                                */
/* ======================================================================== */

enum aco_rt_backend {
    ACO_RT_BACKEND_AUTO = 0,    /* $ACO_RT_BACKEND (uring|epoll), else io_uring
                                   where the kernel allows it (Linux 5.11 and
                                   later: IORING_FEAT_EXT_ARG and NODROP; not
                                   refused by seccomp or io_uring_disabled),
                                   else epoll, silently (epoll under valgrind,
                                   which does not see the kernel write
                                   io_uring's buffers).  URING asked of a
                                   kernel without them: NULL, ENOSYS */
    ACO_RT_BACKEND_URING,
    ACO_RT_BACKEND_EPOLL
};

typedef struct {
    int      backend;           /* enum aco_rt_backend */
    unsigned share_stacks;      /* share stacks for the cos (0: 4); new cos
                                   take them in turn */
    size_t   stack_size;        /* bytes of each share stack, and the default
                                   of a standalone co's stack (0: 256 KiB) */
    unsigned uring_entries;     /* io_uring submission queue size (0: 512) */
} aco_rt_opts_t;

/* A scheduler for the calling thread (at most one per thread), with opts
 * (NULL: all defaults).  It runs in the thread's libaco main co if the
 * program made one (aco_create(NULL, ...)); else it calls
 * aco_thread_init(NULL) and makes its own.  NULL with errno set on failure:
 * ENOMEM (also: a stack_size the address space cannot take), EBUSY (the
 * thread has one: from a co of its scheduler, EBUSY), EPERM (called inside
 * a co of the program's own, on a thread without a scheduler),
 * ENOSYS or the kernel's error (a forced backend that cannot start), EINVAL
 * (bad opts, or an unknown $ACO_RT_BACKEND).  A scheduler does not cross
 * fork(2): in the child, neither run nor free the parent's (an io_uring
 * backend's ring and buffers are the parent's too); there the thread that
 * forked has none (aco_rt_sched_current() is NULL), and any other thread
 * of the child may make one, as may the thread that forked if it forked
 * outside any co.  A fork made inside a co leaves the child in that co,
 * on the parent's stacks: there this call says EPERM, as do the calls
 * that need a co (-EPERM), and the co must neither return nor aco_yield
 * (its main co runs the parent's scheduler); exec, _exit, or start a
 * thread to make the child's scheduler. */
aco_rt_sched_t* aco_rt_sched_new(const aco_rt_opts_t* opts);

/* Run the scheduler until no co is left (joined, detached and finished, or
 * never to be joined and finished; a co another thread spawns here counts
 * from the return of its aco_rt_spawn, so one still on its way may find
 * the run over: a co that waits for it keeps the run going) or
 * aco_rt_sched_stop().  Call it from
 * the scheduler's thread, outside any co.  0; -EINVAL (s NULL); -EPERM
 * (another thread's scheduler, from a co, or already running); -EDEADLK when every co left
 * waits on another co (join, sync, channel) without a deadline and nothing
 * else can wake one: no I/O, no timer, and no other scheduler in the
 * process (while other schedulers are alive, a co of theirs or another
 * thread may still wake one, so the run waits, and returns -EDEADLK when
 * the last of them is freed); -ENOMEM when ready cos cannot run for want
 * of memory to save the frames of the co on their share stack and nothing
 * else can happen (as for -EDEADLK) after about half a second of retries
 * (while something else can, the run retries after pauses of up to 128
 * ms, never in a spin); or -errno if the backend failed.  The cos are then
 * left as they are.  A thread with no scheduler does not count:
 * cos that only such a thread will wake (aco_rt_sem_post, ..._cond_signal,
 * ..._wg_done, ..._chan_close, aco_rt_cancel from outside cos) need a
 * deadline, or another scheduler alive meanwhile.  Schedulers count from
 * their aco_rt_sched_new on: one that another thread makes after this run
 * found its cos stuck comes too late (make the others first). */
int aco_rt_sched_run(aco_rt_sched_t* s);

/* Make aco_rt_sched_run() return as soon as the running co (if any) blocks
 * or yields; the cos stay as they are and a later aco_rt_sched_run() goes
 * on with them.  From any
 * thread; asked while s does not run, it makes the next run return at
 * once (a stop is never lost, and ends one run: stops asked while s does
 * not run end the next run only, and several that come before a run sees
 * them end that run together).  Async-signal-safe: a signal handler on
 * any thread, s's own included, may call it (errno is kept); but a co
 * that waits for the signal (aco_rt_signal_wait) is the easier way to
 * stop on SIGINT or SIGTERM. */
void aco_rt_sched_stop(aco_rt_sched_t* s);

/* Free the scheduler and every co it still has (a co that has not finished
 * is destroyed without running any more of its code, and leaves the wait
 * queues of the objects it waited on, also those of a select that a case
 * ended but that did not run since; a mutex it held stays locked).  Cos
 * and threads elsewhere may go on using those objects meanwhile, and free
 * them once their calls return: a wake of one of these cos that another
 * thread has begun (a send, post, unlock, signal or close that took it off
 * a queue) is waited for before the co's record goes, and what it handed
 * over goes with the co (the element sent, the unit posted; a mutex handed
 * to it stays locked for good, as one it held).  A co of a group leaves
 * it as one that ended does (a join of the group elsewhere returns 0 when
 * the last member left; the group may then be sized, joined, cancelled
 * and freed, but not spawned into: its scheduler is gone).  Not
 * from a co: from one, or with s not the calling thread's scheduler (NULL,
 * another thread's, freed already), it does nothing.  Joins across
 * schedulers must be over first: their handles go with them, so no co of
 * another scheduler may be in aco_rt_join for one of them (its join must
 * have returned, even if they finished) or use one after; and none of s's
 * cos may be in aco_rt_join for a co of another scheduler (end that wait
 * first: a deadline, a cancel, or that co's end).  Nor may another thread
 * detach or cancel one of the cos it destroys while it runs, or after. */
void aco_rt_sched_free(aco_rt_sched_t* s);

/* The calling thread's scheduler, or NULL. */
aco_rt_sched_t* aco_rt_sched_current(void);

/* "uring" or "epoll"; NULL for a NULL s. */
const char* aco_rt_backend_name(const aco_rt_sched_t* s);

/* ======================================================================== */
/* Cos                                                                      */
/* ======================================================================== */

typedef struct {
    size_t stack_size;          /* bytes of stack the co needs (0: the
                                   scheduler's stack_size); more than the
                                   share stacks have gives the co a stack
                                   of its own of this size */
    int    standalone;          /* non-zero: a stack of its own instead of a
                                   share stack (nothing is copied when it
                                   switches; costs the stack's memory) */
    const char* name;           /* shown by aco_rt_dump (not copied) */
    size_t private_size;        /* bytes of a private buffer, zeroed, in the
                                   same allocation as the co's record (heap:
                                   io_uring may fill it); aco_rt_private() */
    size_t save_size;           /* bytes of save stack (where the co's frames
                                   wait while another co has the share stack)
                                   in that allocation too, at most 1 GiB
                                   (more: ENOMEM).  0: a guess, what the last
                                   co of the same fn needed if one was ever
                                   copied out, else none; a finished co's
                                   record is reused as it is then.  Frames
                                   that outgrow it (or find none) get a
                                   separate save stack, exactly their size,
                                   when they are first copied out */
} aco_rt_spawn_opts_t;

/* A new co of scheduler s (NULL: the calling thread's) that runs fn(arg); it
 * is ready at once and starts when the scheduler comes to it.  From any
 * thread, in a co or not (into another thread's scheduler it travels as a
 * message, and a lack of memory there shows at its join: -ENOMEM, and the
 * first time in the process as a line on stderr).  The
 * handle stays valid until aco_rt_join() returned 0 (or -ENOMEM) for it or
 * it was detached.  NULL with errno: ENOMEM, EPERM (s NULL and the thread
 * has no scheduler), EINVAL (fn is NULL). */
aco_rt_co_t* aco_rt_spawn(aco_rt_sched_t* s, aco_rt_fn_t fn, void* arg);
aco_rt_co_t* aco_rt_spawn2(aco_rt_sched_t* s, aco_rt_fn_t fn, void* arg,
                           const aco_rt_spawn_opts_t* opts);

/* Wait until co finished, then free its handle: 0.  -ENOMEM: co never ran
 * (spawned into another thread's scheduler, which found no memory for it);
 * its handle is freed too.  -ETIMEDOUT or -ECANCELED: the handle stays
 * valid (co goes on, or has finished meanwhile).  -EINVAL: co is the
 * caller, or already has a joiner (one whose aco_rt_join has not returned
 * yet, even if co has finished), or was detached.  -EPERM: not in a co.
 * One joiner per co, from a co of any scheduler. */
int aco_rt_join(aco_rt_co_t* co, int64_t deadline);

/* Let co's handle go: freed as soon as co finishes.  0; -EINVAL if co
 * already has a joiner or was detached.  From any thread. */
int aco_rt_detach(aco_rt_co_t* co);

/* Ask co to stop: its blocking call (now or next) returns -ECANCELED, and so
 * does every later one; nothing is unwound by force.  0; cancelling a co
 * twice, or one that finished, does nothing; -EINVAL if co is NULL.  From
 * any thread (a co of another thread's scheduler hears it at its next
 * call, or through that scheduler if it waits: a wake that comes first may
 * still end its blocking call with success, and the next one fails). */
int aco_rt_cancel(aco_rt_co_t* co);

/* The calling co, or NULL outside cos. */
aco_rt_co_t* aco_rt_self(void);

/* The calling co's private buffer (aco_rt_spawn_opts_t.private_size bytes,
 * zeroed when it was spawned, freed with it), its size in *size if size;
 * NULL (and 0) outside a co or when it asked for none. */
void* aco_rt_private(size_t* size);

/* Non-zero if the calling co has been cancelled (a cancel kept by the
 * shield below counts). */
int aco_rt_cancelled(void);

/* What a call of the runtime checks before it does anything, for a
 * library's own calls built on the runtime (aco_rt_bufio's and
 * aco_rt_tls's are): 0 if the calling co's calls go on; -ECANCELED if it
 * is cancelled and its calls fail at once (unlike aco_rt_cancelled, a
 * cancel the shield below keeps does not count while it is on); -EPERM
 * outside a co. */
int aco_rt_cancel_check(void);

/* Hold cancels off (on non-zero) or let them through again (0), in the
 * calling co: the previous setting (0 or 1), -ENOMEM (turning it on needs
 * a small block of the co's, allocated once), -EPERM outside a co.  While
 * the shield is on, a cancel, whether it came before or comes meanwhile,
 * neither fails nor ends any call: it is kept, and when the shield goes
 * off the co is cancelled as usual (its next blocking call fails).  For
 * what a cancelled co must still do: a goodbye on a connection, a log
 * flushed, a library's cleanup.  Nested use: restore the setting it
 * returned.  A co that ends with it on leaves nothing behind. */
int aco_rt_cancel_shield(int on);

/* Let every other ready co run once, then come back: 0; -ECANCELED if the
 * co was cancelled (by then: it still lets the others run first, so a
 * cancelled co that loops on yields starves nobody); -EPERM outside a co. */
int aco_rt_yield(void);

/* Sleep ns nanoseconds / until the deadline (sleep_until(-1): for good;
 * every other negative deadline is long past): 0, or -ECANCELED; -EPERM
 * outside a co.  With ns <= 0 (-1 too), or a deadline passed, the co comes
 * back when a timer due now would fire (aco_rt_timer_start): the other
 * ready cos run meanwhile.  A co asleep for good waits on no other co: a
 * run with one goes on (a cancel or aco_rt_sched_stop ends it), it never
 * says -EDEADLK for it. */
int aco_rt_sleep(int64_t ns);
int aco_rt_sleep_until(int64_t deadline);

/* CLOCK_MONOTONIC in ns: the clock of every deadline. */
int64_t aco_rt_now(void);

/* Relative deadlines: the deadline ns nanoseconds / ms milliseconds from
 * now, so that a timeout reads as one: aco_rt_read(fd, buf, n,
 * aco_rt_in_ms(300)).  A negative timeout is no limit (-1); 0 is now (one
 * try that does not wait); a timeout too far to add saturates at
 * INT64_MAX (about 292 years of uptime: no limit in practice). */
static inline int64_t aco_rt_in_ns(int64_t ns) {
    if (ns < 0) return -1;
    int64_t now = aco_rt_now();
    return ns > INT64_MAX - now ? INT64_MAX : now + ns;
}
static inline int64_t aco_rt_in_ms(int64_t ms) {
    if (ms < 0) return -1;
    return ms > INT64_MAX / 1000000 ? INT64_MAX : aco_rt_in_ns(ms * 1000000);
}

/* ======================================================================== */
/* A co's end, co-local keys                                                */
/* ======================================================================== */

/* End the calling co now, as if its function returned: its key destructors
 * run, then its joiner goes on.  The frames between are dropped, not
 * unwound (no cleanup of theirs runs, a mutex they hold stays held).
 * Outside a co it aborts with a message. */
__attribute__((noreturn)) void aco_rt_exit(void);

/* pthread_key_t for cos: a key names a value per co, NULL until the co sets
 * it.  Keys are process-wide and may be made, used and deleted from any
 * thread, in a co or not; a co's values are its own, wherever the key was
 * made.  Outside any co a thread has values of its own (like a pthread,
 * main thread included), kept apart from its cos'.
 *
 * When a co ends (its function returns or aco_rt_exit), each value that is
 * not NULL and whose key has a destructor is set to NULL and passed to it,
 * in the order of the keys' slots (creation order while none was deleted),
 * in the co (a destructor may block, and may set values again: rounds go on
 * while a round called one, at most ACO_RT_KEY_DTOR_ROUNDS).  Then the co's
 * values are dropped: a record used again by a new co starts with NULLs.  A
 * co destroyed by aco_rt_sched_free before its end runs no destructor (its
 * values' memory is freed).  A thread's values outside cos get their
 * destructors when it exits through pthreads (not at exit(), not for the
 * main thread: as pthreads).
 *
 * Cost: a co that never sets a value has none; the first set allocates a
 * small array in its record, get and set are an index and an atomic load
 * (the key's liveness). */
typedef unsigned aco_rt_key_t;
#define ACO_RT_KEYS_MAX 1024            /* keys alive at once */
#define ACO_RT_KEY_DTOR_ROUNDS 4        /* PTHREAD_DESTRUCTOR_ITERATIONS */

/* A new key with destructor dtor (may be NULL): 0, -EAGAIN (all
 * ACO_RT_KEYS_MAX are taken), or -EINVAL (key NULL). */
int   aco_rt_key_create(aco_rt_key_t* key, void (*dtor)(void*));
/* Delete key: no destructor runs for its values, which no later key sees.
 * 0, or -EINVAL (not a key, or deleted).  (A deleted key's number names a
 * key again after 2^21 creates and deletes of its slot, as pthreads'
 * numbers do at once: the key made then, which sees no value of the old.) */
int   aco_rt_key_delete(aco_rt_key_t key);
/* The caller's value of key (NULL: never set, or key deleted). */
void* aco_rt_getspecific(aco_rt_key_t key);
/* Set the caller's value of key: 0, -EINVAL (not a key), -ENOMEM. */
int   aco_rt_setspecific(aco_rt_key_t key, const void* val);

/* ======================================================================== */
/* Timers                                                                   */
/* ======================================================================== */

/* A callback timer, for code that runs in the scheduler rather than in a co.
 * The struct is the program's (no allocation); its fields are private.
 * Before its first start it is all-zero (static, calloc, = {0}) or given
 * to aco_rt_timer_init: other bytes may read as an armed timer.
 * Insert and cancel are O(1) (a hierarchical timing wheel of 2^14 ns ticks:
 * a timer never fires early, and late by at most a tick plus the time the
 * scheduler needs to come round: while cos stay ready, it looks at its
 * timers every 64 co resumes). */
typedef struct aco_rt_timer {
    struct aco_rt_timer* next_;
    struct aco_rt_timer* prev_;
    int64_t expiry_;            /* in ticks */
    void (*fn_)(struct aco_rt_timer*);
} aco_rt_timer_t;

/* Make t a timer that is not armed, as all-zero memory is (never on an
 * armed timer: the wheel would keep pointing at it). */
void aco_rt_timer_init(aco_rt_timer_t* t);

/* Arm t (not armed) to call fn(t) from the scheduler (not in a co: fn must
 * not block) when aco_rt_now() >= deadline.  Timers live on a wheel of
 * 2^14 ns (16.4 us) ticks: a timer fires at the scheduler's first look at
 * its timers (when no co is ready, else every 64 co resumes) after the
 * clock has entered the tick following its deadline's, never before the
 * deadline.  So a deadline already passed fires soon, but not sooner than
 * the next tick: at most about 16 us later, plus the wait for that look.
 * (The epoll backend before Linux 5.11, without epoll_pwait2, sleeps in
 * whole milliseconds: a timer that waits in an idle loop fires up to
 * about 1 ms late there.) 
 * 0, -EPERM (no scheduler), -EINVAL (t or fn NULL, t lies on a share
 * stack, or is armed). */
int aco_rt_timer_start(aco_rt_timer_t* t, int64_t deadline,
                       void (*fn)(aco_rt_timer_t*));

/* Disarm t: 1 if it was armed, 0 if not (it fired, or never started).  An
 * armed timer does not keep aco_rt_sched_run() going: a run with no co left
 * returns, and the timer fires in a later run that lasts past its deadline;
 * aco_rt_sched_free() disarms those still armed (stop then says 0). */
int aco_rt_timer_stop(aco_rt_timer_t* t);

/* ======================================================================== */
/* Signals: waited for in a co                                              */
/* ======================================================================== */

/* (<signal.h>'s POSIX part: not under a strict -std=c99 alone) */
#if defined(SIG_BLOCK) && defined(SI_USER)

/* Wait for one of the signals of set, as sigwaitinfo(2) does, while the
 * other cos run: the signal's number, and *info (if not NULL) filled as
 * sigwaitinfo fills it (si_signo, si_code, si_errno; then by kind: si_pid
 * and si_uid; with si_value for sigqueue(3) and message queues; si_timerid,
 * si_overrun and si_value for timers; si_status, si_utime and si_stime for
 * SIGCHLD; si_band and si_fd for SIGIO and F_SETSIG's signals; si_addr for
 * a fault's signal sent by the kernel).  A signal of set already pending is taken at once; several cos
 * may wait for the same signal, and each one that comes ends one wait.
 *
 * The signals of set must be blocked (pthread_sigmask(2)) in every thread
 * of the process, or the kernel gives them to a thread that does not
 * block them, the usual way (a handler, or the default action: for
 * SIGINT and SIGTERM the end of the process).  Block them in main()
 * before any thread is made: threads inherit the mask (the runtime's
 * helper threads block every signal themselves; a pool's threads have
 * the mask of the thread that made the pool).  A signal sent to one
 * thread (pthread_kill(3), tgkill(2)) is seen only by a wait on that
 * thread's scheduler.  The wait is a signalfd(2) of set, opened and
 * closed by each call (by aco_rt_sched_free for a co it destroys in the
 * wait).
 *
 * -EPERM    not in a co;
 * -EINVAL   set is NULL, or holds a signal (but SIGKILL and SIGSTOP, which
 *           nobody can block, and which no wait ever sees) that the
 *           calling thread does not block;
 * -ETIMEDOUT, -ECANCELED  as every blocking call;
 * -EMFILE, -ENFILE, -ENOMEM, -ENODEV  no descriptor, memory or
 *           anonymous inode for the signalfd (signalfd(2));
 * -ENOSPC   epoll: fs.epoll.max_user_watches reached (as aco_rt_wait).
 * An empty set waits for the deadline.  A graceful stop: one co waits for
 * SIGINT and SIGTERM, then cancels or tells the others, or calls
 * aco_rt_sched_stop(); docs/runtime.md, "Signals and a graceful stop".
 * Declared where <signal.h> gives sigset_t and siginfo_t: a program built
 * with a strict -std=c99 or c11 defines _POSIX_C_SOURCE 200809L (or
 * _GNU_SOURCE) first, as it must for sigwaitinfo(2) itself. */
int aco_rt_signal_wait(const sigset_t* set, siginfo_t* info, int64_t deadline);
#endif

/* ======================================================================== */
/* I/O                                                                      */
/* ======================================================================== */

/* POSIX shapes plus a deadline; the result or -errno.  From a co (-EPERM
 * elsewhere).  read/recv return as soon as some bytes are there (recv on
 * a stream socket with MSG_WAITALL, and neither MSG_PEEK nor MSG_DONTWAIT:
 * once n bytes came, or sooner with what came when the end, an error or
 * the deadline does; a datagram or a SOCK_SEQPACKET record is one message
 * whatever the flags); write/send/writev send everything (like a blocking
 * socket) and return less than asked only when an error or the deadline
 * comes after part was sent.  The caller's MSG_DONTWAIT on recv and send
 * is one try, as on a non-blocking socket: what recv(2) or send(2) gives
 * (-EAGAIN if nothing could move), never a wait; so is recv's
 * MSG_ERRQUEUE, whose queue recv(2) never waits on.  A send to a Unix
 * datagram peer by address (aco_rt_sendmsg with msg_name, below) whose
 * queue is full (readiness cannot tell when it has room) tries again
 * after sleeps, 1 ms doubling to 64 ms, until the deadline.  No bytes: a read, readv or writev of none returns 0 at once,
 * whatever the descriptor holds and whatever the buffer or vector (NULL
 * too), as read(2), readv(2) and writev(2) do (or -EBADF); a write of none does what write(2) does, at once: 0, or the
 * descriptor's error (-EPIPE on a socket shut for writing, ...), and on a
 * datagram socket it sends an empty datagram, which alone may wait for
 * room; a recv of none does what recv(2) does on a blocking socket: it
 * waits (until the deadline) for bytes, the end or an error, takes no
 * byte and returns 0 (a datagram socket's next datagram is taken whole
 * and dropped, as there).  (A cancelled co gets -ECANCELED, as from
 * every call.)  read and write of a size over SSIZE_MAX, which no buffer
 * has, say -EFAULT at once, as read(2) and write(2) do on 64-bit Linux
 * (recv and send cut it to what one call moves, as recv(2) and send(2)
 * do); a vector with a length over it, or lengths whose total is, is
 * -EINVAL at once, as readv(2) says (readv, writev, sendmsg, recvmsg).  Buffers may lie anywhere, on the co's share stack too (see the
 * share-stack rule above).  -ENOMEM: no memory for the runtime's record of
 * the descriptor (numbers below 2^24 have one: 2^24 and above get -ENOMEM,
 * open or not, from every call of this section that keeps a record of it:
 * all but aco_rt_close, aco_rt_poll and aco_rt_shutdown; the file calls
 * (aco_rt_pread, ...) need none: they make the system call as for any
 * other number).
 *
 * A descriptor is the file, not the number.  Any descriptor works, blocking
 * or not, however it was made (by a library, by another thread), and the
 * program may close(2) it, dup2 over it or clear O_NONBLOCK behind the
 * runtime's back: no call here ever blocks the thread, or misses a
 * readiness, because of what happened to the number before.  Sockets are
 * left as they are (each call is non-blocking by itself: MSG_DONTWAIT);
 * so are the rest in read, write, readv and writev (and in the Files
 * section's pread, pwrite, preadv and pwritev): their open file is
 * shared with stdio's own calls and with children, which would see the
 * flag (pipes and FIFOs: RWF_NOWAIT, call by call, where the kernel
 * takes it there, Linux 6.4 and later; before, as terminals; terminals and
 * other devices: O_NONBLOCK for the call alone, which another thread's
 * blocking call on the file would see in that moment; a regular file keeps it:
 * a file on a disk never says EAGAIN).  connect's socket, the
 * pipes of splice, tee and sendfile (no per-call flag there) and accept's
 * listening socket when the backend needs it (epoll; on io_uring, an
 * accept whose deadline has passed: one try) are made O_NONBLOCK
 * when a call here uses them, checked again at each call (other processes
 * sharing the open file see it too; with the syscall hooks loaded, the
 * program's own fcntl(F_GETFL) does not, and its blocking calls outside
 * cos still wait: docs/hooks.md; standard input, output and error get
 * it cleared again at exit(3), or a return from main, if they still hold
 * the file the runtime made so).  A
 * descriptor closed by close(2) while cos wait on it is not told to them
 * (only aco_rt_close tells them): they wait until their deadline; with
 * io_uring, whose operation keeps the file open, until what comes to that
 * file ends the call (data, or the end of a pipe whose writer closed);
 * with epoll, until a call here waits on the number for the new file it
 * holds by then (they get -EBADF; a call that finds the new file ready
 * at once does not tell them).
 * A socket that lends (aco_rt_recv_lend) is the exception: close it with
 * aco_rt_close (see there).
 *
 * SIGPIPE.  No call of the runtime raises it (these, the Files section's
 * pwrite, pwritev, sendfile, splice and tee, sendmsg, the buffered
 * writer): a transfer to a socket, pipe or FIFO whose reader is gone
 * returns -EPIPE, whatever the program's SIGPIPE disposition.  Sockets get MSG_NOSIGNAL; a write to anything else
 * blocks SIGPIPE in the calling thread for the duration of the system call
 * and takes back (sigtimedwait) the SIGPIPE that call raised, so the
 * program's disposition and mask are never changed (where the program
 * blocks SIGPIPE itself, one that was pending before the call stays
 * pending, and the call adds none).
 *
 * Terminals.  aco_rt_read of a terminal in non-canonical mode keeps its
 * VMIN and VTIME (termios(3)), as read(2): VMIN bytes (n at most) before
 * it returns, VTIME then the longest gap between bytes, or with VMIN 0
 * the longest wait for one (then 0); the call's deadline and cancel end
 * it too, with what came if anything did.  (One tcgetattr a call on a
 * terminal.  On epoll a read of fewer than VMIN bytes with VTIME 0 returns
 * once VMIN have come: poll(2) says the terminal is readable only then.
 * aco_rt_readv returns what has come.) */
ssize_t aco_rt_read(int fd, void* buf, size_t n, int64_t deadline);
ssize_t aco_rt_write(int fd, const void* buf, size_t n, int64_t deadline);
ssize_t aco_rt_readv(int fd, const struct iovec* iov, int iovcnt, int64_t deadline);
ssize_t aco_rt_writev(int fd, const struct iovec* iov, int iovcnt, int64_t deadline);
ssize_t aco_rt_recv(int fd, void* buf, size_t n, int flags, int64_t deadline);
ssize_t aco_rt_send(int fd, const void* buf, size_t n, int flags, int64_t deadline);

/* accept4(2): the new descriptor (flags: SOCK_NONBLOCK, SOCK_CLOEXEC). */
int aco_rt_accept(int fd, struct sockaddr* addr, socklen_t* addrlen, int flags,
                  int64_t deadline);

/* connect(2) on a socket, waiting for the connection: 0 or -errno, the
 * socket left as a blocking connect(2) leaves it (connected: another
 * connect says -EISCONN; failed: unconnected, another connect tries
 * afresh).  A connection that is not made at once (TCP's never is, over
 * loopback too) waits; a deadline already passed then gives -ETIMEDOUT at
 * once.  A Unix stream listener whose queue is full is waited for too,
 * trying again after 1 ms, then 2, up to every 64 ms (no readiness tells
 * when there is room).  After -ETIMEDOUT or -ECANCELED the connection
 * attempt goes on in the kernel, as a non-blocking connect(2)'s does:
 * another aco_rt_connect on the socket waits for that attempt (as a
 * blocking connect(2) would) and says how it ended; most callers close
 * the socket.  Errors: connect(2)'s (the attempt's own, as SO_ERROR
 * gives it: -ECONNREFUSED, -ECONNRESET after another co's shutdown, ...),
 * -ECONNABORTED if the attempt ended with no error while the call waited
 * (the socket was disconnected behind its back), and the deadline's and
 * cancel's. */
int aco_rt_connect(int fd, const struct sockaddr* addr, socklen_t addrlen,
                   int64_t deadline);

/* Wait until fd is ready for events (POLLIN, POLLOUT): the poll(2) revents
 * (POLLIN, POLLOUT, POLLERR, POLLHUP, POLLRDHUP), or -errno.  The wait
 * first looks (poll(2) without waiting) and returns at once if fd is
 * ready.  events may also carry ACO_RT_WAIT_AFTER_EAGAIN: the caller's own
 * call on fd has just said EAGAIN (no other co ran since), so on a socket
 * the wait skips that look (one system call fewer; the backend's wait
 * still finds fd ready if it became so since that EAGAIN), and a deadline
 * already passed gives -ETIMEDOUT at once.  Without that EAGAIN the wait
 * may miss readiness that came before it (epoll: until the next change).
 * On anything but a socket the flag changes nothing.  A regular file or a
 * directory is ready for reading and writing at once, never for anything
 * else (poll(2)): a wait for other events (POLLPRI, POLLRDHUP, none) is a
 * sleep to the deadline, which an aco_rt_close does not end.  Errors:
 *   -ETIMEDOUT  the deadline passed with fd not ready;
 *   -ECANCELED, -EPERM  as every blocking call;
 *   -EBADF      fd is not open (poll(2)'s POLLNVAL), or aco_rt_close
 *               closed it while the co waited;
 *   -ENOMEM     no memory for the runtime's record of fd (as above);
 *   -EBUSY      fd lends its input on another thread's scheduler and
 *               events has POLLIN (aco_rt_recv_lend);
 *   -ENOSPC     epoll: fs.epoll.max_user_watches reached (and any other
 *               error epoll_ctl(2) gives for fd). */
int aco_rt_wait(int fd, int events, int64_t deadline);
#define ACO_RT_WAIT_AFTER_EAGAIN 0x10000

/* Wait until one of fds[0..n) is ready, as poll(2) does: the count of
 * entries whose revents came back non-zero (each entry's revents written,
 * as poll(2) writes them), or -errno:
 *   -ETIMEDOUT  the deadline passed with none ready (a deadline already
 *               passed: one look, where poll(2) with timeout 0 says 0);
 *   -ECANCELED, -EPERM  as every blocking call;
 *   -EINVAL     n is over the RLIMIT_NOFILE soft limit (poll(2)'s rule);
 *   -ENOMEM     no memory for the wait's records (one per descriptor, in
 *               the heap, while the co waits);
 *   -EBUSY      a descriptor lends its input on another thread's scheduler
 *               (aco_rt_recv_lend);
 *   -ENOSPC     epoll: fs.epoll.max_user_watches reached (and any other
 *               error epoll_ctl(2) gives for a descriptor);
 *   -EFAULT     fds is not memory the caller may read and write (as
 *               poll(2)'s).
 * An entry with fd < 0 is skipped (revents 0); with events 0 it still says
 * POLLERR, POLLHUP and POLLNVAL.  A number not open says POLLNVAL; one
 * closed with aco_rt_close while the co waits ends the wait with POLLNVAL
 * (closed with close(2): as for aco_rt_wait, the backend may not notice).
 * A regular file is ready for reading and writing at once (poll(2)), and
 * never for anything else.  n 0 sleeps until the deadline (-ETIMEDOUT).
 * The wait: the co parks once on all n descriptors (epoll: a waiter on
 * each descriptor's queue; io_uring: a poll operation each, cancelled as
 * the wait ends): O(n) to begin and end, nothing while it waits, no
 * looking again in steps.  fds may lie on the co's share stack: the call
 * reads it before the co parks and writes it once the co runs again,
 * never in between. */
int aco_rt_poll(struct pollfd* fds, nfds_t n, int64_t deadline);

/* Close fd: calls of other cos blocked on it return -EBADF first, on
 * every scheduler of the process (cos of other threads' schedulers hear it
 * through their scheduler, soon after), and so do calls that begin to wait
 * on it while it closes.  From any thread, in a co or not.  (The file
 * calls of the Files section below wait on no readiness: those that run
 * as io_uring's reads and writes are ended so, but one on a helper thread
 * or a [meta] operation holds the number, not the file, until it runs,
 * and io_uring's splice, tee and sendfile are not ended (they end at
 * their deadline, or as bytes or the pipe's end come): close a descriptor
 * only once no other co's file call uses it, as with threads.)  When it
 * returns, the kernel's file is closed unless another descriptor refers to
 * it (a dup's, another process's), as with close(2): the peer of a socket
 * sees the end at once.  On io_uring the operations of this thread's cos
 * on it (receives, lent ones too, sends, waits, polls) hold the file, so
 * the close ends them first (a close with none makes no io_uring call):
 * in one io_uring_enter for those that wait for readiness; one that
 * io_uring's worker runs (a terminal's read, a slow disk's) is waited for
 * up to 50 ms in the thread, then left to end, and the file goes then.
 * One of a co of another thread's scheduler ends when that scheduler
 * hears the close, soon after (the file goes then).  A socket with
 * SO_LINGER on and a time, whose close(2) waits in the kernel for the
 * peer to take what was sent (up to that time): in a co the number goes
 * at once and the co parks while a helper thread's close of a duplicate
 * waits (the thread runs other cos; one getsockopt per close of a socket
 * in a co tells); outside cos, in a co already cancelled, and when no
 * descriptor is left for the duplicate, close(2) waits in the thread, as
 * its own would.
 * 0, -ENOMEM (no memory to tell another thread: nothing was closed), or
 * close(2)'s error. */
int aco_rt_close(int fd);

/* Non-zero if the syscall hooks (libaco_hook, docs/hooks.md) are live in
 * this program: loaded or linked in, bound to this copy of the runtime,
 * and the definitions of read, recv, poll and connect that the program's
 * and its libraries' calls reach.  0 when they are not: the hook library
 * was never loaded (a linker dropped it: link it as libaco_hook.pc or
 * CMake's aco::hook do), another library's definitions come first, or it
 * is bound to another copy of the runtime (this one linked in statically:
 * the first aco_rt_sched_new then says so on stderr, once).  Definitions
 * ahead of the hooks that hand the calls on count as theirs: a sanitizer's
 * interceptors (AddressSanitizer, ThreadSanitizer), or a tracer; they are
 * found by one call of each name that moves nothing (on descriptor -1,
 * poll of no descriptor, with a pointer the hooks know), or a library
 * says so by exporting `const void* aco_rt_hook_forwards_(const char*
 * name)`, returning its dlsym(RTLD_NEXT, name).  From any thread, in a co
 * or not; it looks symbols up (dlsym) and makes those calls: once, at
 * start. */
int aco_rt_hooks_active(void);

/* Let the calling thread's blocking libc calls (I/O, waits, sleeps, file
 * calls) pass the syscall hooks and reach the kernel, as without the
 * hooks, until as many aco_rt_hooks_resume calls: for library code that
 * must not switch cos in its midst, one that holds a lock of its own (or
 * is inside pthread_once) across a read, as OpenSSL is while it loads its
 * configuration, certificates and keys (aco_rt_tls.h pauses them there).
 * Such a call then blocks the whole thread.  The hook of
 * pthread_mutex_lock still tells a mutex held by another co of the thread
 * (it waits for it in a co, as always).  The depth is the thread's: pause
 * and resume around code that does not park (no aco_rt_* call that
 * waits between them), or the thread's other cos run paused meanwhile.
 * Nests; from any thread, in a co or not, hooks loaded or not.  Resume
 * more often than paused does nothing.  aco_rt_hooks_paused: the depth, 0
 * when the hooks act. */
void aco_rt_hooks_pause(void);
void aco_rt_hooks_resume(void);
int aco_rt_hooks_paused(void);

/* ======================================================================== */
/* Lent receives: the runtime's buffers, no copy of the caller's            */
/* ======================================================================== */

/* The most one lend holds. */
#define ACO_RT_LEND_SIZE 16384

/* Receive into a buffer of the runtime's and lend it to the caller: waits
 * as aco_rt_recv does, then *data points at the start of a buffer of
 * ACO_RT_LEND_SIZE bytes holding the bytes that came, all of it the
 * caller's to read and write until aco_rt_lend_return(*data).  The count
 * (1 to ACO_RT_LEND_SIZE), 0 at the peer's end (again at every later
 * call; nothing is lent then, and *data is left as it was), or -errno:
 * those of aco_rt_recv (-EBADF also when aco_rt_close closes fd
 * meanwhile), -EINVAL (data NULL), -EBUSY (below), and -ENOMEM (no memory
 * for a buffer or the descriptor's record).  From a co (-EPERM
 * elsewhere).  A lent buffer is never on a share stack; the caller may
 * keep any number at once and pass them to another co or thread.
 *
 * Where it can, a scheduler lends from io_uring's provided buffer ring (a
 * kernel of 6.0 or later: 5.19 for the ring, 6.0 for multishot receive):
 * 128 buffers (2 MiB), made at its first lend.  A stream socket that lends
 * gets one multishot receive, armed until the peer's end, an error, or the
 * ring runs dry: the kernel fills a ring buffer with whatever comes, while
 * the co does something else too, and the next lend takes it without a
 * system call.  Everywhere else (the epoll backend, an older kernel, other
 * descriptors, a deadline already passed while no multishot is armed) and
 * whenever the ring has no buffer left, a lend is one receive into a
 * buffer from the heap (a datagram longer than ACO_RT_LEND_SIZE is cut, an
 * empty one gives 0, as recv(2) into such a buffer would): a lend never
 * waits for a buffer.  aco_rt_stats() says which (lend_ring, lend_heap).
 *
 * While a socket has a multishot receive (armed, or its bytes still
 * queued):
 *   - aco_rt_read, aco_rt_recv, aco_rt_readv, the buffered reader and
 *     aco_rt_wait(POLLIN) see the bytes it received first, in order, and
 *     may be mixed with lends; recv flags other than MSG_PEEK,
 *     MSG_DONTWAIT, MSG_WAITALL, MSG_NOSIGNAL and MSG_CMSG_CLOEXEC get
 *     -EOPNOTSUPP there (a recvmsg(2) or read(2) of the program's own, past
 *     the runtime, would miss those bytes);
 *   - one co at a time may wait in those receives and lends (another gets
 *     -EBUSY; aco_rt_wait is not counted);
 *   - its bytes are its scheduler's: on another scheduler (a co of another
 *     thread) that does not lend on it too (below), those receives,
 *     aco_rt_poll's POLLIN and aco_rt_wait(POLLIN) get -EBUSY at once
 *     instead of waiting for bytes that would never come to them, until
 *     the multishot has ended and its bytes were read there, or the socket
 *     is closed (by aco_rt_close, from any thread, or by close(2)): another
 *     file under the number is not refused, even before the lending
 *     thread has heard of the close.  So a socket goes to another thread
 *     before its first lend;
 *   - close the socket with aco_rt_close.  close(2) alone is not seen
 *     until a call that waits looks at the socket (below): until then,
 *     calls on the number, whatever file it holds by then, get the old
 *     socket's bytes, and the old socket stays open;
 *   - aco_rt_sched_free drops the bytes it received that no call took;
 *   - some kernels miss a socket's end (no completion comes): so a call
 *     that waits looks at the socket itself after 1 s of waiting, then 2,
 *     4, and every 8 s, and once poll(2) says it ended, or the number holds
 *     another file, receives the plain way (an end is seen within 8 s).
 * Lends on one socket by cos of two threads split its bytes between them
 * unordered, as two threads' recv(2) would: a lend is never -EBUSY for
 * another thread's; it arms its own scheduler's receive, which takes a
 * share of what comes from then on (bytes queued on the first stay
 * there), and that scheduler's receives and waits read its own share. */
ssize_t aco_rt_recv_lend(int fd, const char** data, int64_t deadline);

/* Give back a buffer that aco_rt_recv_lend lent (data as it gave it): 0,
 * or -EINVAL (NULL).  From any thread, in a co or not, before or after
 * the scheduler that lent it is freed.  Anything but a lent buffer, or one
 * returned twice, is undefined, as free(3) of such a pointer is. */
int aco_rt_lend_return(const char* data);

/* ======================================================================== */
/* Files, directories, and the rest of the Linux calls                      */
/* ======================================================================== */

/* A regular file has no readiness (poll(2) says it is always ready), so a
 * co that reads, syncs, opens or stats one on a cold disk would stop its
 * whole thread with a plain system call.  The calls below do the work for
 * the co, which parks meanwhile:
 *   - on io_uring, as the ring's own operation where the running kernel
 *     has it (probed once per scheduler; the way of each call is listed
 *     below and told by aco_rt_file_way());
 *   - else, and on epoll, on a helper thread of aco_rt_offload's pool
 *     (the same threads, queue and limits: aco_rt_offload_limits); an
 *     operation io_uring lacks is said once per process on stderr
 *     ("aco_rt: ... on helper threads"), unless $ACO_RT_QUIET is set;
 *   - the single-thread build (-DACO_RT_NO_THREADS) has no helper
 *     threads: there the fallback is the plain system call, in the
 *     calling thread, which it may block.
 * $ACO_RT_URING_OFF (read when a scheduler is made) turns io_uring
 * operations off by name, comma-separated ("read,statx", or "all"), as if
 * the kernel lacked them: for tests of the fallback.  The names are those
 * of aco_rt_file_way().
 *
 * A file in the page cache costs one system call: aco_rt_pread,
 * aco_rt_preadv and aco_rt_pwrite(v) on a descriptor that is not O_DIRECT
 * first try the call on the calling thread with RWF_NOWAIT (the kernel
 * does it only if it would not wait for the disk), and only when that
 * says EAGAIN go the way above.  (Whether a descriptor is O_DIRECT is
 * looked up once per descriptor table entry and again every 64 calls,
 * since a direct read with RWF_NOWAIT still waits for the disk in the
 * calling thread: a number reopened as O_DIRECT behind the runtime's back
 * may cost a few such waits before it is seen.  aco_rt_openat and
 * aco_rt_close keep the entry right.)  A read that RWF_NOWAIT serves in
 * part goes on the way above for the rest (a short count means the end of
 * the file, as from pread(2)).  Writes where the file system has no
 * RWF_NOWAIT for them (ext4's buffered writes say EOPNOTSUPP) take the
 * way above at once.  A descriptor that is neither a regular file nor a
 * block device (a pipe, a socket, a terminal) has readiness: these four
 * calls take the readiness way there, as aco_rt_read does (a try that
 * does not block, then a wait), never a helper thread; a deadline already
 * passed still fails at once, as for every call of this section (below),
 * where aco_rt_read would make its one try.
 *
 * Deadlines and cancels.  Two kinds of call, told apart below:
 *   [data]  the call moves bytes between the caller's memory and the
 *           file (pread, pwrite, preadv, pwritev) or between descriptors
 *           (splice, tee, sendfile, sendmsg, recvmsg).  A transfer the
 *           kernel has begun cannot be stopped, and the caller's buffer
 *           is used in place (no copy), so nothing is lost and nothing
 *           written after the call returns: at the deadline or a cancel
 *           the runtime asks the kernel (io_uring) or the helper queue to
 *           drop the operation; if it had not begun (or was waiting on a
 *           pipe or socket) the call returns -ETIMEDOUT / -ECANCELED and
 *           nothing moved; if it had, the co waits for its end and the
 *           call returns its result (bytes moved: a deadline bounds the
 *           wait for the transfer to start, not a disk read under way).
 *   [meta]  every other call: the runtime owns all the memory the
 *           operation touches (paths and results are copied through heap
 *           records), so the deadline is kept: at it (or a cancel) the
 *           call returns -ETIMEDOUT / -ECANCELED at once, and the
 *           operation, if it had begun, goes on without the co and may
 *           still take effect: the file may be created, removed, renamed,
 *           linked, synced, allocated or truncated after all (look before
 *           relying on either outcome).  A descriptor that aco_rt_openat
 *           or aco_rt_openat2 opens after its call returned is closed by
 *           the runtime.
 * aco_rt_sched_free of a co in a [data] call whose transfer is under way
 * waits for that transfer's end (it writes the co's memory: its private
 * buffer, its stack), up to 1 s for io_uring's; a [meta] call's operation
 * goes on as when its deadline passed.
 * A deadline already passed, or a cancelled co, fails at once without
 * starting anything, but for sendmsg and recvmsg, which keep the rule of
 * the I/O calls (a passed deadline is one try that does not wait, as
 * for aco_rt_send), and shutdown, which never waits.
 *
 * The share-stack rule.  Paths, struct open_how, struct statx, iovec
 * arrays, offsets and msghdr records are copied into a heap record before
 * the co parks and copied back after; data buffers are used in place
 * unless they lie on the calling co's share stack, which other cos use
 * while it is parked: then the transfer goes through a heap bounce buffer
 * of the same size (aligned to 4096 bytes, so O_DIRECT works there too,
 * even for a buffer that is not aligned itself) and the bytes are copied
 * (the cost of one memcpy; -ENOMEM if it cannot be had).  In checked mode (aco.h) a buffer on a suspended co's stack is
 * reported as an escape, as for every I/O call.
 *
 * Common errors, besides each system call's own (the manual's errno,
 * negated: -ENOENT, -EEXIST, -EBADF, -EINVAL, -EISDIR, -ENOSPC, -EIO,
 * ...): -ETIMEDOUT, -ECANCELED, -EPERM (outside a co of a running
 * scheduler), -ENOMEM (no memory for the operation's record or bounce
 * buffer), -EAGAIN (a helper thread was needed and the pool's queue is
 * full, or none could be started), -ENAMETOOLONG (a path of PATH_MAX
 * bytes or more).  Offsets are int64_t whatever _FILE_OFFSET_BITS. */

/* Positioned reads and writes, as pread(2), pwrite(2), preadv2(2) and
 * pwritev2(2) (flags: RWF_HIPRI, RWF_DSYNC, RWF_SYNC, RWF_NOWAIT,
 * RWF_APPEND; off -1 with preadv/pwritev: the file position, as
 * preadv2(2), moved under the file's position lock as read(2) moves it
 * (a transfer that must wait goes to a helper thread there, never
 * io_uring, whose transfers at the position take no lock; one the page
 * cache served in part takes the lock once for each part)): the count, 0
 * at end of file, or -errno.  [data]  A read
 * of a file is short only at its end (a transfer the page cache served
 * in part, or the kernel cut short, goes on for the rest); a write is
 * short only when the kernel's was (a full disk), as pwrite(2) is; on a
 * pipe or socket each is one transfer, as there.  O_DIRECT works when buf,
 * n and off are aligned as the file system asks (else -EINVAL, the
 * kernel's).  RWF_NOWAIT asked by the caller is passed through: -EAGAIN
 * instead of a wait for the disk (also where pwritev2(2) would say
 * EOPNOTSUPP: a file system that cannot write without waiting).  n over
 * SSIZE_MAX, which no buffer has: -EFAULT at once, as aco_rt_read (a
 * vector's total over it: -EINVAL, as preadv2(2)). */
ssize_t aco_rt_pread(int fd, void* buf, size_t n, int64_t off, int64_t deadline);
ssize_t aco_rt_pwrite(int fd, const void* buf, size_t n, int64_t off, int64_t deadline);
ssize_t aco_rt_preadv(int fd, const struct iovec* iov, int iovcnt, int64_t off,
                      int flags, int64_t deadline);
ssize_t aco_rt_pwritev(int fd, const struct iovec* iov, int iovcnt, int64_t off,
                       int flags, int64_t deadline);

/* Registered buffers (io_uring's fixed buffers) of the calling thread's
 * scheduler: the kernel pins the pages of iov[0..n) once, so that a
 * transfer into or out of them skips pinning its pages on every call (the
 * gain is an O_DIRECT transfer's: docs/benchmarks.md, "Files").  An
 * aco_rt_pread or aco_rt_pwrite (or aco_rt_preadv / aco_rt_pwritev of one
 * iovec) on this scheduler whose bytes lie whole inside one registered
 * buffer, and that goes as an io_uring operation (not a page cache hit
 * served on the thread, not a helper's), uses it (IORING_OP_READ_FIXED,
 * IORING_OP_WRITE_FIXED; aco_rt_stats' file_fixed counts them); every
 * other transfer goes as before.  Each thread's scheduler has its own set
 * (a pool's threads each register theirs).  The memory must stay mapped
 * as it was (not unmapped, remapped or given back by free) until
 * aco_rt_unregister_buffers, or aco_rt_sched_free and the end of the
 * transfers it waited for: the kernel moves bytes to and from the pages
 * it pinned, not whatever is mapped there later.  Pinned bytes count
 * against RLIMIT_MEMLOCK (ulimit -l: 8 MiB by default on Debian 12, 64 KiB
 * on kernels before 5.16) unless the process has CAP_IPC_LOCK.  At most
 * 16384 buffers of at most 1 GiB each, not overlapping, none on one of
 * the scheduler's share stacks (a standalone co's own stack is its own:
 * allowed; in checked mode a suspended co's stack is reported as an
 * escape).  A scheduler on epoll, on a kernel before 5.13 (whose
 * registration waits for every operation in the ring), or where
 * io_uring_register(2) itself is refused (a seccomp filter's EPERM or
 * EACCES), makes the -EINVAL checks only, remembers the set (for -EBUSY
 * and -ENXIO) and pins nothing.  Returns 0, or -EPERM (the calling thread has no scheduler),
 * -EINVAL (iov NULL, n 0 or above 16384, a buffer NULL, empty, above 1 GiB
 * or wrapping, buffers that overlap, a buffer on a share stack), -EBUSY
 * (buffers are registered: unregister them first), -ENOMEM (no memory;
 * on io_uring also RLIMIT_MEMLOCK reached); on io_uring the kernel's
 * refusals to pin: -EFAULT (memory not mapped, not writable, or a shared
 * mapping of a file, which the kernel does not pin for long), -EOPNOTSUPP
 * (older kernels' answer for those file mappings). */
int aco_rt_register_buffers(const struct iovec* iov, unsigned n);

/* The calling thread's scheduler forgets its registered buffers.  Called
 * from a co, it first waits (parked, in 1 ms steps) for the transfers in
 * the kernel that use them to end.  0, or -EPERM (no scheduler on the
 * thread), -ENXIO (none are registered), -EBUSY (called outside a co while
 * such transfers are in flight), -ECANCELED (the co was cancelled while it
 * waited: the buffers stay registered). */
int aco_rt_unregister_buffers(void);

/* fsync(2), fdatasync(2), sync_file_range(2) (flags SYNC_FILE_RANGE_*),
 * fallocate(2) (mode FALLOC_FL_*), ftruncate(2): 0 or -errno.  [meta]:
 * after -ETIMEDOUT or -ECANCELED the sync, allocation or truncation may
 * still happen. */
int aco_rt_fsync(int fd, int64_t deadline);
int aco_rt_fdatasync(int fd, int64_t deadline);
int aco_rt_sync_file_range(int fd, int64_t off, int64_t nbytes, unsigned flags,
                           int64_t deadline);
int aco_rt_fallocate(int fd, int mode, int64_t off, int64_t len, int64_t deadline);
int aco_rt_ftruncate(int fd, int64_t len, int64_t deadline);

/* openat(2) and openat2(2) (how: struct open_how of <linux/openat2.h>,
 * size its size): the new descriptor, or -errno.  [meta]: after
 * -ETIMEDOUT or -ECANCELED the file may have been created (O_CREAT) or
 * truncated (O_TRUNC); a descriptor opened after the return is closed.
 * The descriptor is the caller's, made as asked (add O_CLOEXEC yourself);
 * its table entry here is made fresh.  A FIFO without O_NONBLOCK: opened
 * for writing, the call waits for a reader, as openat(2); opened for
 * reading through io_uring (which opens FIFOs without waiting), it
 * returns once a writer has written or has come and gone, not at the
 * writer's open (a writer that opens and stays silent keeps it waiting,
 * within the deadline); through a helper, as openat(2). */
struct open_how;
int aco_rt_openat(int dirfd, const char* path, int flags, mode_t mode, int64_t deadline);
int aco_rt_openat2(int dirfd, const char* path, const struct open_how* how, size_t size,
                   int64_t deadline);

/* statx(2) (flags AT_*, mask STATX_*): 0 with *buf filled, or -errno;
 * buf is written only on success.  path NULL with AT_EMPTY_PATH is ""
 * (dirfd's own file, as Linux 6.11 takes it, on every kernel); NULL
 * otherwise: -EFAULT.  [meta] */
struct statx;
int aco_rt_statx(int dirfd, const char* path, int flags, unsigned mask, struct statx* buf,
                 int64_t deadline);

/* unlinkat(2) (flags AT_REMOVEDIR), renameat(2), renameat2(2) (flags
 * RENAME_NOREPLACE, RENAME_EXCHANGE, RENAME_WHITEOUT), mkdirat(2),
 * symlinkat(2), linkat(2) (flags AT_SYMLINK_FOLLOW, AT_EMPTY_PATH): 0 or
 * -errno.  [meta]: after -ETIMEDOUT or -ECANCELED the change may still
 * happen. */
int aco_rt_unlinkat(int dirfd, const char* path, int flags, int64_t deadline);
int aco_rt_renameat(int olddirfd, const char* oldpath, int newdirfd, const char* newpath,
                    int64_t deadline);
int aco_rt_renameat2(int olddirfd, const char* oldpath, int newdirfd, const char* newpath,
                     unsigned flags, int64_t deadline);
int aco_rt_mkdirat(int dirfd, const char* path, mode_t mode, int64_t deadline);
int aco_rt_symlinkat(const char* target, int newdirfd, const char* linkpath, int64_t deadline);
int aco_rt_linkat(int olddirfd, const char* oldpath, int newdirfd, const char* newpath,
                  int flags, int64_t deadline);

/* splice(2) and tee(2) (flags SPLICE_F_MOVE, SPLICE_F_MORE; SPLICE_F_GIFT
 * is taken and means nothing here; SPLICE_F_NONBLOCK is the runtime's to
 * set: passing it, or a bit splice(2) does not know, gets -EINVAL, though
 * a splice of len 0 with such a bit is 0, as the system call's): the
 * bytes moved
 * (at most len; 0: end of input, or len 0), or -errno.  [data]  One of
 * the descriptors (both for tee) must be a pipe (-EINVAL), as splice(2)
 * asks; *off_in / *off_out (NULL: the file position) are read before the
 * co parks and advanced by the count after.  Waits for the pipe, the
 * socket or the disk as one call: returns once some bytes moved. */
ssize_t aco_rt_splice(int fd_in, int64_t* off_in, int fd_out, int64_t* off_out, size_t len,
                      unsigned flags, int64_t deadline);
ssize_t aco_rt_tee(int fd_in, int fd_out, size_t len, unsigned flags, int64_t deadline);

/* sendfile(2): count bytes of in_fd (a file that mmap can read: a regular
 * file) from *offset (NULL: its file position) to out_fd (a socket, a
 * pipe, a file), all of them, as aco_rt_write sends all: the count sent,
 * fewer only at the end of in_fd's data or when an error or the deadline
 * came after part was sent, or -errno.  *offset is advanced by the count.
 * [data]  out_fd is made O_NONBLOCK (sendfile(2) has no per-call flag) if
 * it is a socket or a pipe; the bytes go on the calling thread when the
 * whole range (or, chunk by chunk, each 8 MiB of it) is in the page cache,
 * as cachestat(2) tells (kernel 6.5; before it mincore(2) of a mapping of
 * the range: a file that cannot be mapped counts as not cached; both tell
 * only of files the caller owns or may write: any other counts as not
 * cached), else each chunk on a helper thread (io_uring has no sendfile).  A range found
 * cached at the call's start is sent from the thread to its end: pages
 * evicted meanwhile are read in there. */
ssize_t aco_rt_sendfile(int out_fd, int in_fd, int64_t* offset, size_t count,
                        int64_t deadline);

/* sendmsg(2) and recvmsg(2) on a socket, ancillary data included (a
 * descriptor passed over a Unix socket with SCM_RIGHTS arrives as a new
 * descriptor of this process: MSG_CMSG_CLOEXEC asks for it close-on-exec):
 * the count, or -errno.  [data]  sendmsg sends everything, as aco_rt_send
 * (on a stream socket; a datagram is one message), the ancillary data with
 * the first bytes only; recvmsg returns as soon as a message or some bytes
 * are there (MSG_WAITALL: as aco_rt_recv; MSG_DONTWAIT, and MSG_ERRQUEUE,
 * whose queue recvmsg(2) never waits on, are one try: -EAGAIN if
 * nothing is there), with msg_namelen,
 * msg_controllen and msg_flags written as recvmsg(2) writes them (MSG_CTRUNC:
 * descriptors that did not fit in msg_control were closed by the kernel).
 * msg and every buffer it points to may lie anywhere (io_uring gets heap
 * copies, or the call takes the readiness way).  A socket that lends
 * (aco_rt_recv_lend) gets -EOPNOTSUPP from recvmsg while its bytes are
 * queued in the runtime.  They keep a record of the descriptor, as the
 * I/O section's calls do: a number of 2^24 or more gets -ENOMEM. */
ssize_t aco_rt_sendmsg(int fd, const struct msghdr* msg, int flags, int64_t deadline);
ssize_t aco_rt_recvmsg(int fd, struct msghdr* msg, int flags, int64_t deadline);

/* shutdown(2) (how: SHUT_RD, SHUT_WR, SHUT_RDWR): 0 or -errno.  It never
 * waits (the kernel queues the FIN), so it is done at once on the calling
 * thread; deadline is taken for the shape of the other calls (a deadline
 * passed does not stop it, a cancelled co gets -ECANCELED).  Cos of this
 * process waiting to read from fd see the end of input after SHUT_RD, as
 * from shutdown(2). */
int aco_rt_shutdown(int fd, int how, int64_t deadline);

/* How the calling thread's scheduler does a call now: "uring" (an io_uring
 * operation), "helper" (a helper thread), "thread" (the calling thread:
 * shutdown; tee, sendmsg and recvmsg by readiness, where io_uring does not
 * take them; every fallback of the single-thread build), or NULL for a
 * name it does not know.  ("helper" for splice and sendfile means their
 * file end's transfers: one between two pipes, or whose file range is in
 * the page cache, runs on the calling thread.)  Names: "read", "write"
 * (pread, pwrite, preadv, pwritev), "fsync" (fsync, fdatasync),
 * "sync_file_range", "fallocate", "ftruncate", "openat", "openat2",
 * "statx", "unlinkat", "renameat", "mkdirat", "symlinkat", "linkat",
 * "splice", "tee", "sendfile", "sendmsg", "recvmsg", "shutdown".  Outside
 * a scheduler's thread: what a new epoll scheduler would do. */
const char* aco_rt_file_way(const char* call);

/* ======================================================================== */
/* Buffered I/O: a reader and a writer per connection, for protocols        */
/* ======================================================================== */

/* A buffered reader and writer on one descriptor (a socket, a pipe, ...):
 * "exactly n bytes", "up to a delimiter, at most limit bytes", "is a whole
 * message here yet?" without copying, and small writes gathered into one
 * system call.  One heap allocation holds the object and both buffers
 * (heap: io_uring may fill the read buffer while the co is parked, so it
 * keeps the share-stack rule by itself; the caller's buffers may lie
 * anywhere, on a share stack too).
 *
 * One co uses a bufio at a time (no lock inside; it may move between cos
 * and threads between calls).  Every call that takes a deadline fails at
 * once with -EPERM outside a co of a running scheduler and -ECANCELED in a
 * cancelled co (as every blocking call here), even when the bytes are
 * already buffered; besides, they return the errors of aco_rt_read /
 * aco_rt_writev (-ETIMEDOUT, -ECONNRESET, -EPIPE, -EBADF, -ENOMEM, ...).
 * b NULL: -EINVAL from every call that returns -errno (first of all),
 * aco_rt_bufio_fd's -EINVAL too, 0 bytes buffered and unflushed; buf NULL
 * with n > 0, or n over SSIZE_MAX (read, read_full, write): -EFAULT,
 * nothing taken or buffered.
 *
 * Reading.  A failed read call consumes nothing: what was buffered stays
 * for the next call (read_full for more than the read buffer holds is the
 * exception, said there).  Views (const char** out) point into the read
 * buffer and stay valid until the next call on b that reads or consumes.
 *
 * Writing.  write copies into the write buffer and sends when it is full;
 * flush sends what is buffered.  After an error other than -ETIMEDOUT,
 * -ECANCELED and -ENOMEM the writer is broken: every later write and flush
 * returns that error at once (the connection is done for: close it) and
 * what it still held is never sent.  After -ETIMEDOUT, -ECANCELED or
 * -ENOMEM (see "No memory" above) the unsent bytes stay buffered, in
 * order, and a later flush goes on with them. */
typedef struct aco_rt_bufio aco_rt_bufio_t;

/* A bufio on fd with rsize bytes of read buffer and wsize of write buffer
 * (0: 16 KiB each; read_until holds one byte more, rsize + 1, where it
 * looks past a limit of rsize).  fd stays the caller's.  From any thread.  NULL with
 * errno ENOMEM, or EINVAL (fd < 0, a size over 1 GiB). */
aco_rt_bufio_t* aco_rt_bufio_new(int fd, size_t rsize, size_t wsize);

/* A transport of the program's own under a bufio, in place of a
 * descriptor (aco_rt_tls_bufio_new, aco_rt_tls.h, makes one over TLS):
 * read and writev do on ctx what aco_rt_read and aco_rt_writev do on a
 * descriptor, with their results (a count, 0 at end of file, -errno) and
 * their deadline; writev may take fewer bytes than offered (the bufio
 * offers the rest again).  The bufio calls them only from the calls below,
 * in the calling co; flush_more is a plain flush over them. */
typedef struct aco_rt_bufio_io {
    ssize_t (*read)(void* ctx, void* buf, size_t n, int64_t deadline);
    ssize_t (*writev)(void* ctx, const struct iovec* iov, int iovcnt, int64_t deadline);
} aco_rt_bufio_io_t;

/* A bufio over io (kept, not copied: it must outlive b) on ctx, as
 * aco_rt_bufio_new makes one over a descriptor; fd is only what
 * aco_rt_bufio_fd says (-1 for none).  NULL with errno ENOMEM, or EINVAL
 * (io NULL or without read or writev, fd < -1, a size over 1 GiB). */
aco_rt_bufio_t* aco_rt_bufio_new_io(const aco_rt_bufio_io_t* io, void* ctx, int fd,
                                    size_t rsize, size_t wsize);

/* Free b and its buffers: unflushed bytes are dropped (flush first), fd is
 * not closed.  NULL does nothing.  The runtime keeps up to 8 freed blocks
 * (buffers of up to 256 KiB together; not in ASan builds nor under
 * valgrind, whose reports of a use after free need the free) for
 * the next bufios of the same sizes, made by any thread: a server that
 * frees an idle connection's bufio and makes one at its next request skips
 * malloc and free. */
void aco_rt_bufio_free(aco_rt_bufio_t* b);

/* b's descriptor. */
int aco_rt_bufio_fd(const aco_rt_bufio_t* b);

/* Bytes read from fd and not yet taken by the program (the reading side
 * only: aco_rt_bufio_unflushed is the writing side's). */
size_t aco_rt_bufio_buffered(const aco_rt_bufio_t* b);
/* Bytes written by the program and not yet sent. */
size_t aco_rt_bufio_unflushed(const aco_rt_bufio_t* b);

/* Some bytes, at most n, into buf: the buffered ones if any (no system
 * call; so even with a deadline already passed), else one read of fd (straight into buf when n is at least the
 * read buffer's size).  The count (>= 1), 0 at end of file (or n == 0), or
 * -errno. */
ssize_t aco_rt_bufio_read(aco_rt_bufio_t* b, void* buf, size_t n, int64_t deadline);

/* Exactly n bytes into buf: n.  Fewer only when the end of file came first:
 * the count read (0 when nothing came; the bytes are in buf).  -errno when
 * an error or the deadline came first: with n up to the read buffer's size
 * nothing is consumed (the bytes that came stay buffered, a later call has
 * them); a larger n reads its tail straight into buf, and an error or the
 * deadline after part of it returns the count taken so far instead (the
 * bytes it took from the buffer count; r < n: the next call that reads
 * says why, once: -ETIMEDOUT for the deadline, even with a new one and
 * bytes come since; 0 again at the end of file; for a cancel, the
 * cancelled co's own -ECANCELED, as every later call of that co: b keeps
 * nothing of it, and another co that takes b over reads on). */
ssize_t aco_rt_bufio_read_full(aco_rt_bufio_t* b, void* buf, size_t n, int64_t deadline);

/* The bytes up to and including the first delim (a byte: delim as an
 * unsigned char, as memchr(3) takes it), within the first limit
 * bytes (0: the read buffer's size), as a view *out: their count.  They are
 * consumed.  At end of file: what is left, if it is at most limit bytes,
 * without delim (its last byte is not delim), then 0.  -EMSGSIZE: more than
 * limit bytes are there and none of the first limit is delim, at end of
 * file too (they stay buffered: read or consume them to go on; with
 * exactly limit bytes and no delim the call reads on, to tell a tail from
 * a longer record); -EINVAL: limit over the read buffer's size, or out
 * NULL; -errno (nothing consumed). */
ssize_t aco_rt_bufio_read_until(aco_rt_bufio_t* b, int delim, size_t limit,
                                const char** out, int64_t deadline);

/* Wait until at least n bytes are buffered (n = 0: do not read), without
 * consuming any: the count buffered (>= n; fewer only at end of file), with
 * *out viewing them.  For parsers that look at a whole message before
 * taking it (aco_rt_bufio_consume).  -EINVAL: n over the read buffer's
 * size, or out NULL; -errno. */
ssize_t aco_rt_bufio_peek(aco_rt_bufio_t* b, size_t n, const char** out, int64_t deadline);

/* One read of fd into all the read buffer's free room (what is buffered
 * moves to its start first): the count of new bytes, 0 at end of file,
 * -ENOBUFS when rsize bytes are buffered, -errno. */
ssize_t aco_rt_bufio_fill(aco_rt_bufio_t* b, int64_t deadline);

/* Drop n buffered bytes (after peek): 0, or -EINVAL (fewer are buffered;
 * nothing dropped).  Never blocks. */
int aco_rt_bufio_consume(aco_rt_bufio_t* b, size_t n);

/* Take n bytes of buf: into the write buffer while they fit (no system
 * call); else the buffer and buf go out together (writev), the part of buf
 * the buffer cannot keep too.  n; fewer when an error or the deadline came
 * after part of buf was taken (sent or buffered); -errno when none was. */
ssize_t aco_rt_bufio_write(aco_rt_bufio_t* b, const void* buf, size_t n, int64_t deadline);

/* Send everything buffered: 0 or -errno (what was not sent stays buffered,
 * see "Writing").  flush_more tells the kernel that more data follows
 * (MSG_MORE on a socket: it holds back a partial segment until the next
 * send without it, as for a response head followed by sendfile(2) of the
 * body; a plain flush elsewhere). */
int aco_rt_bufio_flush(aco_rt_bufio_t* b, int64_t deadline);
int aco_rt_bufio_flush_more(aco_rt_bufio_t* b, int64_t deadline);

/* ======================================================================== */
/* Blocking work: functions run on helper threads while the co waits        */
/* ======================================================================== */

/* Work that blocks with no readiness to wait on (name resolution, stat or
 * open on a slow disk, a library without sockets) goes to a small
 * process-wide pool of helper threads; the calling co parks, and its
 * thread runs other cos meanwhile.
 *
 * aco_rt_offload runs fn(arg) on a helper thread and waits for it: 0, with
 * fn's result in *result (if result is not NULL).  It fails with:
 *   -ETIMEDOUT  the deadline passed first;
 *   -ECANCELED  the co was cancelled (before or while it waited);
 *   -EAGAIN     the queue is full (aco_rt_offload_limits), or no helper
 *               thread exists and none could be started (pthread_create
 *               failed): nothing was queued;
 *   -ENOMEM     no memory for the call's record;
 *   -EINVAL     fn is NULL, or arg lies on the calling co's share stack (a
 *               helper thread would work in memory that other cos take over
 *               while this one waits: the share-stack rule); arg on a
 *               standalone co's stack, static or heap memory is fine;
 *   -EPERM      called outside a co of a running scheduler;
 *   -ENOSYS     the single-thread build (-DACO_RT_NO_THREADS): it has no
 *               helper threads.
 * -EPERM and -EINVAL come before -ECANCELED (a cancelled co that passes a
 * NULL fn is told -EINVAL).  arg itself may be NULL: it is fn's.  After an
 * error *result is left as it was.
 * Who owns arg.  After 0, and after -EAGAIN, -ENOMEM, -EINVAL, -EPERM and
 * -ENOSYS, arg is the caller's again (after the errors fn never ran, and
 * drop is not called).  After -ETIMEDOUT and -ECANCELED the co stopped
 * waiting, and drop (if not NULL) is called exactly once, which is where
 * arg (and fn's result) can be freed:
 *   - if fn was running, it runs to its end (nothing interrupts it), then
 *     drop(arg, its result) is called on the helper thread;
 *   - if fn had not started (queued), it never runs: drop(arg, NULL) is
 *     called on a helper thread when the queue comes to it;
 *   - if the co was cancelled or its deadline had passed when it called
 *     (nothing queued), fn never runs: drop(arg, NULL) is called in the
 *     calling co before aco_rt_offload returns.
 * So drop must not block for long, and must expect to run on any thread.
 * A co destroyed while it waits (aco_rt_sched_free, aco_rt_pool_free) is
 * treated as one that stopped waiting: drop is called once, on the helper
 * thread or, if fn had already ended, by the free of the co's scheduler,
 * on that scheduler's thread (aco_rt_pool_free: the pool's), before the
 * free returns.
 *
 * The pool: helper threads are started when work waits and none is idle, up
 * to the limit; a thread idle for 10 s ends.  Work is taken in FIFO order.
 * Helper threads block every signal.  One heap record (malloc) per call,
 * freed when the call is over.  At exit(3) the helper threads end with the
 * process: work running or queued is abandoned (no drop is called).  In
 * the child of a fork(2), the helper threads are gone, and so are the
 * parent's schedulers (aco_rt_sched_new) with the cos that waited for
 * them: their work, running or queued, never runs there (only in the
 * parent); calls of the child's own schedulers start threads of its own. */
int aco_rt_offload(void* (*fn)(void* arg), void* arg,
                   void (*drop)(void* arg, void* result),
                   void** result, int64_t deadline);

/* The pool's bounds: at most threads helper threads (0: 8) and queue calls
 * waiting for one (0: 1024).  A call counts as queued until a helper has
 * taken it: one given to an idle helper that has not woken yet still holds
 * its place, so back-to-back calls may find the queue full sooner.  From
 * any thread, at any time: lowering the thread count lets the extra threads
 * end once their current work is done; calls already queued stay queued.
 * A scheduler made afterwards on io_uring lets the ring run at least
 * threads of its blocking file operations at once too (io_uring's own
 * workers: 4 per CPU unless raised so), so both backends wait on a slow
 * disk as many times at once.  0, -EINVAL (more than 1024 threads or 2^20
 * queued), -ENOSYS (single-thread build). */
int aco_rt_offload_limits(unsigned threads, unsigned queue);

/* ======================================================================== */
/* Connections: listen on and dial "host:port"                              */
/* ======================================================================== */

/* Addresses (addr), always with a port (decimal, 0-65535; service names
 * are not taken):
 *   "1.2.3.4:80"         an IPv4 address;
 *   "[::1]:80"           an IPv6 address in brackets ("[fe80::1%eth0]:80":
 *                        with its scope, an interface name or number);
 *   ":80"                listen: every local address, IPv6 and IPv4 on one
 *                        dual-stack socket (IPV6_V6ONLY off), or IPv4 alone
 *                        where the kernel has no IPv6; dial: this host
 *                        (127.0.0.1, then ::1);
 *   "name:80"            a host name, resolved by getaddrinfo(3) through
 *                        aco_rt_offload: the co parks, never the thread.
 *                        Numeric addresses never go to the resolver.
 * Port 0: listen on a port the kernel picks (aco_rt_net_port says which);
 * dial refuses it (-EINVAL).
 *
 * The socket is SOCK_STREAM (TCP), close-on-exec unless asked otherwise;
 * listen's is left blocking (aco_rt_accept may make it O_NONBLOCK: the I/O
 * section), dial's was connected by aco_rt_connect and is O_NONBLOCK.
 * Every failure is returned, none is worked around (a port that is taken
 * is -EADDRINUSE, never another port), and the socket made on the way is
 * closed. */
typedef struct {
    int      backlog;           /* listen: queue of connections not yet
                                   accepted (0: 4096; the kernel clamps it
                                   to net.core.somaxconn) */
    unsigned flags;             /* ACO_RT_NET_*, or'ed */
} aco_rt_net_opts_t;

enum {
    /* listen: SO_REUSEPORT (several sockets, e.g. one per pool thread, on
     * one port: the kernel spreads the connections) */
    ACO_RT_NET_REUSEPORT    = 1 << 0,
    /* TCP_NODELAY (no Nagle delay on small writes).  Dial: on the
     * connected socket.  Listen: on the listening socket, whose accepted
     * sockets inherit it on Linux. */
    ACO_RT_NET_NODELAY      = 1 << 1,
    /* not close-on-exec (the descriptor survives execve).  Sockets that
     * aco_rt_accept returns take their own flags (SOCK_CLOEXEC). */
    ACO_RT_NET_INHERIT      = 1 << 2,
    /* listen: no SO_REUSEADDR (by default it is on, so that a restarted
     * server can bind while old connections are in TIME_WAIT; it never lets
     * two listening sockets share a port) */
    ACO_RT_NET_NO_REUSEADDR = 1 << 3,
};

/* A listening socket on addr (opts NULL: the defaults): the descriptor, or
 * -errno.  A name is resolved and the first address it has is used (the
 * others are not tried: listening elsewhere than asked is an error, not a
 * fallback).  From a co, or from any thread outside cos (a program's main
 * before its scheduler runs): there a name is resolved in the calling
 * thread, which getaddrinfo blocks (and deadline does not bound).  Errors:
 *   -EINVAL       addr malformed (no port, a port out of range, brackets
 *                 that do not close, an IPv6 address without them, an
 *                 empty or over-long host), or bad opts (backlog < 0,
 *                 unknown flags);
 *   -EADDRINUSE   the port is taken;
 *   -EADDRNOTAVAIL the address is not one of this host's;
 *   -EACCES       a port below 1024 without the privilege;
 *   -EAFNOSUPPORT the kernel has no such family (IPv6);
 *   -EMFILE, -ENFILE, -ENOBUFS, -ENOMEM: out of descriptors or memory;
 *   name resolution: -ENXIO (no such name, or no address for it:
 *                 EAI_NONAME, EAI_NODATA; -EMFILE, -ENFILE or -ENOMEM
 *                 where glibc said EAI_NONAME for want of them), -EAGAIN (EAI_AGAIN: the name
 *                 server did not answer, try later; also aco_rt_offload's
 *                 full queue), -EIO (EAI_FAIL and any other failure of the
 *                 resolver), -ENOMEM (EAI_MEMORY), -EAFNOSUPPORT
 *                 (EAI_FAMILY, EAI_ADDRFAMILY), the errno of EAI_SYSTEM;
 *                 -ETIMEDOUT, -ECANCELED while it resolves (the lookup
 *                 goes on on its helper thread and its result is dropped;
 *                 a numeric address is not resolved: nothing waits, and a
 *                 cancelled co's listen on one works);
 *                 -ENOSYS never: the single-thread build resolves names in
 *                 the calling thread, which blocks it (nothing else there
 *                 can run the lookup);
 *   and any other error of socket(2), setsockopt(2), bind(2), listen(2). */
int aco_rt_listen(const char* addr, const aco_rt_net_opts_t* opts, int64_t deadline);

/* A socket connected to addr: the descriptor, or -errno.  A name's
 * addresses are tried in the order the resolver gives them, each until it
 * connects or fails, all within deadline; the error is the last address's.
 * From a co (-EPERM elsewhere).  Errors: those of aco_rt_listen for addr,
 * opts (backlog and the listen-only flags are ignored) and names; -EINVAL
 * for port 0; -EPERM outside a co; -ECONNREFUSED, -ETIMEDOUT (the deadline, or
 * the kernel gave up), -ENETUNREACH, -EHOSTUNREACH, -ECANCELED, and
 * connect(2)'s others.  A deadline already passed allows one connect(2)
 * that does not wait, which over TCP says "in progress" even to a
 * listener on this host: -ETIMEDOUT then. */
int aco_rt_dial(const char* addr, const aco_rt_net_opts_t* opts, int64_t deadline);

/* The local port of socket fd (what a listen on port 0 got): 0-65535, or
 * -errno (getsockname(2)'s; -EAFNOSUPPORT: not an IPv4/IPv6 socket).  From
 * any thread. */
int aco_rt_net_port(int fd);

/* ======================================================================== */
/* Sync, among the cos of any schedulers and threads.  FIFO: the longest    */
/* waiter goes first.  No allocation per wait.  Each object is zero-         */
/* initialisable (all-zero = ready to use, as after _init); none needs       */
/* destroying.  A spin lock guards each object's wait queue for a few        */
/* instructions; the uncontended mutex lock/unlock and semaphore wait are    */
/* one atomic instruction each.  The calls that never wait (sem_trywait,     */
/* sem_post, wg_add, wg_done, cond_signal, cond_broadcast) work from any     */
/* thread, in a co or not, and in a cancelled co too; the mutex calls and    */
/* the waits need a co (-EPERM), and mutex_trylock and mutex_unlock work in  */
/* a cancelled co too.  A call's error about its arguments (-EINVAL: an     */
/* object NULL, first of all; -EDEADLK, -EPERM: the mutex already held, or   */
/* not held, by the caller) comes before -ECANCELED.  The calls that return  */
/* nothing do nothing with a NULL object.                                    */
/* ======================================================================== */

typedef struct aco_rt_waitq { void* head_; void* tail_; } aco_rt_waitq_t;

/* owner_: the holder, its low bit set while others may wait. */
typedef struct { uintptr_t owner_; uint32_t lock_; aco_rt_waitq_t q_; } aco_rt_mutex_t;
/* Make m an unlocked mutex (as all-zero memory is). */
void aco_rt_mutex_init(aco_rt_mutex_t* m);
/* 0, -ETIMEDOUT, -ECANCELED; -EDEADLK if the caller holds it; -EPERM
 * outside a co; -EINVAL (m NULL). */
int  aco_rt_mutex_lock(aco_rt_mutex_t* m, int64_t deadline);
/* 0, or -EBUSY; -EPERM outside a co (a mutex is held by a co); -EINVAL. */
int  aco_rt_mutex_trylock(aco_rt_mutex_t* m);
/* 0; -EPERM if the caller does not hold it (outside a co: always, a mutex
 * is held by a co); -EINVAL.  Hands m to the first waiter.  A co that ends, or is
 * destroyed, holding m leaves it held for good (its record, a few hundred
 * bytes, stays allocated: no later co is taken for the holder). */
int  aco_rt_mutex_unlock(aco_rt_mutex_t* m);

typedef struct { uint32_t lock_; aco_rt_waitq_t q_; } aco_rt_cond_t;
/* Make c a condition variable with no waiter (as all-zero memory is). */
void aco_rt_cond_init(aco_rt_cond_t* c);
/* Unlock m, wait for a signal, lock m again (also when the wait failed):
 * 0, -ETIMEDOUT, -ECANCELED, -EPERM (m not held by the caller, or not in
 * a co: nothing done), -EINVAL (c or m NULL: nothing done). */
int  aco_rt_cond_wait(aco_rt_cond_t* c, aco_rt_mutex_t* m, int64_t deadline);
/* Wake the longest waiter of c, if any.  Never lost to a deadline or a
 * cancel: the waiter it takes returns 0 even if its deadline passes
 * meanwhile, and one whose wait ended first is no longer a waiter (the
 * signal goes to the next). */
void aco_rt_cond_signal(aco_rt_cond_t* c);
/* Wake every waiter of c. */
void aco_rt_cond_broadcast(aco_rt_cond_t* c);

typedef struct { int64_t count_; uint32_t lock_; aco_rt_waitq_t q_; } aco_rt_sem_t;
/* Make s a semaphore holding count (a negative count is a debt: posts pay
 * it off before a wait can take one). */
void aco_rt_sem_init(aco_rt_sem_t* s, int64_t count);
/* Take one: 0, -ETIMEDOUT, -ECANCELED, -EPERM (not in a co), -EINVAL. */
int  aco_rt_sem_wait(aco_rt_sem_t* s, int64_t deadline);
/* 0, or -EAGAIN if none is free; -EINVAL. */
int  aco_rt_sem_trywait(aco_rt_sem_t* s);
/* Give one back: to the longest waiter, if any (and no debt is left).  A
 * count of INT64_MAX stays so. */
void aco_rt_sem_post(aco_rt_sem_t* s);

typedef struct { int64_t count_; uint32_t lock_; aco_rt_waitq_t q_; } aco_rt_wg_t;
/* Make wg a wait group whose counter is 0 (as all-zero memory is). */
void aco_rt_wg_init(aco_rt_wg_t* wg);
/* Add n (may be negative) to the counter; at 0 the waiters go on.
 * -EINVAL if it would go below 0 or past INT64_MAX (nothing changes), or
 * wg is NULL. */
int  aco_rt_wg_add(aco_rt_wg_t* wg, int64_t n);
int  aco_rt_wg_done(aco_rt_wg_t* wg);           /* aco_rt_wg_add(wg, -1) */
/* Wait for the counter to be 0: 0, -ETIMEDOUT, -ECANCELED, -EPERM (not in
 * a co), -EINVAL.  Once it returned 0 the program may add to wg for
 * another round at once, and free it once no other call on it is under
 * way: the add that made the counter 0 took every waiter then queued
 * (each returns 0, but one whose deadline or cancel came first: that one
 * still takes wg's lock on its way out) and is done with wg. */
int  aco_rt_wg_wait(aco_rt_wg_t* wg, int64_t deadline);

/* ======================================================================== */
/* Channels: bounded FIFO of fixed-size elements.  Capacity 0: rendezvous   */
/* (send returns once a receiver has the element).                          */
/* ======================================================================== */

typedef struct aco_rt_chan aco_rt_chan_t;

/* A channel of cap elements of elem_size bytes (>= 1): NULL with errno
 * ENOMEM or EINVAL.  Once the cos of one scheduler have made 64 calls on
 * it in a row, its calls there take no locked instruction; the first call
 * after that from any other thread (a co of another scheduler, or close,
 * len or free outside) costs one membarrier(2), a barrier on every CPU that
 * runs a thread of the process, and from then on every call takes the
 * channel's spin lock. */
aco_rt_chan_t* aco_rt_chan_new(size_t elem_size, size_t cap);
/* Free it: 0 (NULL: nothing, 0, as free(3)); -EBUSY (nothing freed) while
 * a co waits on it (a select that another of its channels woke, until it
 * has run on).  From any thread, in a co or not.  Free it only once every call on it has
 * returned (a precondition, not checked: a co woken by another thread's
 * send or close may still be inside its call). */
int  aco_rt_chan_free(aco_rt_chan_t* ch);
/* Copy elem (elem_size bytes) in: 0, -EPIPE (closed), -ETIMEDOUT,
 * -ECANCELED, -EPERM (not in a co), -ENOMEM (an element over 8 bytes
 * finds no room to wait in), -EINVAL (ch or elem NULL: first). */
int  aco_rt_chan_send(aco_rt_chan_t* ch, const void* elem, int64_t deadline);
/* Copy an element out into elem: 0; -EPIPE once closed and empty;
 * -ETIMEDOUT, -ECANCELED, -EPERM (not in a co), -ENOMEM (as send),
 * -EINVAL (as send). */
int  aco_rt_chan_recv(aco_rt_chan_t* ch, void* elem, int64_t deadline);
/* No more sends: waiting senders get -EPIPE, receivers drain what is
 * buffered and then get -EPIPE.  0, -EPIPE if already closed, -EINVAL
 * (ch NULL).  From any thread, in a co or not.  (A cancelled co's send,
 * receive and select fail with -ECANCELED, closed channel or not.) */
int  aco_rt_chan_close(aco_rt_chan_t* ch);
/* Elements buffered now in its ring (0 for capacity 0; the elements of
 * senders that wait are not counted).  From any thread, in a co or not. */
size_t aco_rt_chan_len(const aco_rt_chan_t* ch);

/* One case of aco_rt_chan_select: send *elem on ch, or receive into elem. */
enum { ACO_RT_SEND = 1, ACO_RT_RECV = 2 };
typedef struct {
    aco_rt_chan_t* ch;
    int            op;          /* ACO_RT_SEND or ACO_RT_RECV */
    void*          elem;
} aco_rt_case_t;

/* Do the first case that can go on (in case order when several can now;
 * else the first to become possible): its index, with the element sent or
 * received.  A select never pairs its own send case with its own receive
 * case (capacity 0: another co must take part); one channel may be in
 * several cases.  A case goes on as its call would: a send on a closed
 * channel, and a receive on one closed and empty, go on and fail: the
 * index is returned and *err (if not NULL) is -EPIPE, else 0 (a receive on
 * a closed channel that still holds elements takes one, *err 0).  A close
 * that ends a waiting select's send and receive cases on that channel at
 * once gives a send case's index (the close takes the senders first).
 * -ETIMEDOUT, -ECANCELED, -EPERM (not in a co), -EINVAL (cases NULL, n <
 * 1, or a case with a NULL channel or element or an op other than
 * ACO_RT_SEND and ACO_RT_RECV), -ENOMEM (no room for its waiters and
 * elements, which a co keeps from one select to the next). */
int  aco_rt_chan_select(aco_rt_case_t* cases, int n, int* err, int64_t deadline);

/* ======================================================================== */
/* Pools: a scheduler thread per core                                       */
/* ======================================================================== */

typedef struct aco_rt_pool aco_rt_pool_t;

typedef struct {
    unsigned      threads;      /* 0: one per online CPU */
    int           pin;          /* non-zero: thread i runs on one CPU only,
                                   the (i modulo their number)-th of those
                                   the calling thread may run on at
                                   aco_rt_pool_new (its affinity mask: CPU
                                   i when that holds CPUs 0 to n-1) */
    aco_rt_opts_t sched;        /* every thread's scheduler */
} aco_rt_pool_opts_t;

/* Start a pool of threads, each running a scheduler that waits for cos
 * (asleep in the kernel while it has nothing to do).  NULL with errno
 * (ENOMEM, EINVAL, EAGAIN (a thread could not be made: all or none are
 * made, so then none is left), ENOSYS in the single-thread build, what
 * sched_getaffinity(2) or pthread_setaffinity_np(3) said for pin (a CPU
 * taken out of the cpuset meanwhile: EINVAL), or what a thread's
 * aco_rt_sched_new said). */
aco_rt_pool_t* aco_rt_pool_new(const aco_rt_pool_opts_t* opts);

/* A new co of the pool, from any thread, in a co or not.  From outside the
 * pool's threads it goes to the thread with the fewest cos; from a co of a
 * pool thread it waits, unstarted, in that thread's queue, and an idle
 * thread of the pool may take it before it starts.  Once started, a co
 * stays on its thread (its stack is one of that thread's share stacks).
 * The handle is as aco_rt_spawn's.  NULL with errno: ENOMEM, EINVAL, EPIPE
 * (aco_rt_pool_free has begun: a spawn that overlaps it is the program's
 * error all the same, see there, and this answer is not assured). */
aco_rt_co_t* aco_rt_pool_spawn(aco_rt_pool_t* p, aco_rt_fn_t fn, void* arg,
                               const aco_rt_spawn_opts_t* opts);

/* Number of threads, and thread i's scheduler (for aco_rt_spawn,
 * aco_rt_group_new): NULL past the end. */
unsigned        aco_rt_pool_threads(const aco_rt_pool_t* p);
/* Thread i's scheduler of p (for aco_rt_spawn, aco_rt_group_new): NULL
 * past the end. */
aco_rt_sched_t* aco_rt_pool_sched(aco_rt_pool_t* p, unsigned i);

/* Wait, outside the pool's threads, until every co of the pool has
 * finished: ACO_RT_POOL_DRAIN lets them run to their end,
 * ACO_RT_POOL_CANCEL first cancels each (aco_rt_cancel: their blocking
 * calls fail with -ECANCELED from then on; cos spawned later are not, a
 * co spawned once the cancel has reached the thread it was spawned on
 * among them, say by a cancelled co, on whichever thread it runs).
 * 0, -ETIMEDOUT (they go on), -EDEADLK (called from one of its threads),
 * -EINVAL; those two before anything is cancelled.  It blocks the calling
 * thread (called from a co of another scheduler, that scheduler's other
 * cos wait too, and a cancel of the calling co does not end the wait). */
enum { ACO_RT_POOL_DRAIN = 0, ACO_RT_POOL_CANCEL = 1 };
int aco_rt_pool_wait(aco_rt_pool_t* p, int how, int64_t deadline);

/* Stop the threads and free the pool, outside the pool's threads.  Cos
 * still there are destroyed where they stand, as by aco_rt_sched_free
 * (whose rules hold for their handles): call aco_rt_pool_wait first to
 * drain or cancel them.  As with free(3), no other call on p may overlap
 * it or come after it: spawns from other threads must have returned
 * before it begins.  0 (p NULL: nothing to do); -EDEADLK from one of its
 * threads (nothing done). */
int aco_rt_pool_free(aco_rt_pool_t* p);

/* ======================================================================== */
/* Groups: cos of one scheduler, joined or cancelled together               */
/* ======================================================================== */

typedef struct aco_rt_group aco_rt_group_t;

/* A group bound to scheduler s (NULL: the calling thread's).  NULL with
 * errno ENOMEM, or EPERM (s NULL and no scheduler on the calling
 * thread). */
aco_rt_group_t* aco_rt_group_new(aco_rt_sched_t* s);
/* A group bound to the thread of pool p with the fewest cos.  NULL with
 * errno ENOMEM, or EINVAL (p is NULL). */
aco_rt_group_t* aco_rt_pool_group_new(aco_rt_pool_t* p);
/* The scheduler g is bound to. */
aco_rt_sched_t* aco_rt_group_sched(const aco_rt_group_t* g);

/* A new co in g, on g's scheduler (from any thread).  Members are
 * detached: the group is how one waits for them.  0, -ENOMEM, -EINVAL. */
int aco_rt_group_spawn(aco_rt_group_t* g, aco_rt_fn_t fn, void* arg,
                       const aco_rt_spawn_opts_t* opts);

/* Members alive now. */
size_t aco_rt_group_size(aco_rt_group_t* g);

/* Wait until g has no member: 0, -ETIMEDOUT, -ECANCELED, -EDEADLK (the
 * caller is a member), -EPERM (not in a co), -EINVAL (g is NULL). */
int aco_rt_group_join(aco_rt_group_t* g, int64_t deadline);

/* Cancel every member (and those spawned until it is empty), then wait as
 * aco_rt_group_join.  Its -EPERM, -EINVAL and -EDEADLK come before anything
 * is cancelled; a caller that is cancelled itself cancels the members,
 * then gets -ECANCELED at once.  On a group that is empty it cancels
 * nothing, now or later. */
int aco_rt_group_cancel(aco_rt_group_t* g, int64_t deadline);

/* Free g (NULL: nothing, 0): 0; -EBUSY (nothing freed) while it has
 * members, or cos waiting in aco_rt_group_join or _cancel.  A join that the
 * last member's end woke waits no more: it returns 0 without looking at g
 * again, so g may be freed before that co runs. */
int aco_rt_group_free(aco_rt_group_t* g);

/* ======================================================================== */
/* Seeing inside                                                            */
/* ======================================================================== */

typedef struct {
    uint64_t switches;          /* cos run: resumed by the scheduler or
                                   handed off to */
    uint64_t cos_alive;         /* spawned, not yet finished */
    uint64_t cos_parked;        /* blocked in a call */
    uint64_t cos_ready;         /* waiting for their turn */
    uint64_t timers;            /* armed timers (deadlines included, and
                                   one per co asleep for good) */
    uint64_t io_inflight;       /* io_uring operations in the kernel, or
                                   waits on epoll readiness (an aco_rt_poll
                                   counts one per descriptor, as on
                                   io_uring) */
    uint64_t spawned;           /* cos spawned so far */
    uint64_t polls;             /* backend waits (syscalls that block) */
    uint64_t handoffs;          /* of switches: cos run straight from the
                                   co that blocked or yielded before them
                                   (aco_yield_to), not from the loop */
    uint64_t lend_ring;         /* 1 while it has io_uring's provided
                                   buffer ring (made at its first lend;
                                   0: epoll, a kernel before 6.0, no lend
                                   yet) */
    uint64_t lends;             /* aco_rt_recv_lend calls that lent a buffer */
    uint64_t lend_heap;         /* of lends: from a heap buffer (no ring,
                                   the ring was empty, not a stream socket) */
    uint64_t file_nowait;       /* file calls (Files section) done on the
                                   thread: reads and writes RWF_NOWAIT
                                   served whole; each splice, tee or
                                   sendfile system call made there */
    uint64_t file_uring;        /* ... that were io_uring operations */
    uint64_t file_helper;       /* ... that ran on a helper thread */
    uint64_t file_bounce;       /* ... that went through a bounce buffer
                                   (a buffer on the co's share stack that
                                   the kernel or a helper had to reach
                                   while the co was parked; one that
                                   RWF_NOWAIT served in place is not) */
    uint64_t file_fixed;        /* of file_uring: those on a registered
                                   buffer (aco_rt_register_buffers) */
} aco_rt_stats_t;

/* Counters of s (NULL: the calling thread's scheduler; every counter 0 on
 * a thread that has none).  out NULL: nothing done. */
void aco_rt_stats(const aco_rt_sched_t* s, aco_rt_stats_t* out);

/* Write to fd a line for s (NULL: the current; its counters), then one
 * line per co of s: its handle, name, state and what it waits on (object
 * address, deadline); with no scheduler, one line that says so.  From s's
 * thread (a scheduler's own call), or from a debugger that stopped the
 * process: async-signal-unsafe but lock-free, so gdb may call it (`call
 * aco_rt_dump(0, 2)`) wherever the program stopped. */
void aco_rt_dump(const aco_rt_sched_t* s, int fd);

#ifdef __cplusplus
}
#endif

#endif /* ACO_RT_H */
