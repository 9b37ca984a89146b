/* signal.c - signals waited for in a co (aco_rt.h, "Signals").
 *
 * aco_rt_signal_wait is sigwaitinfo(2) for a co: a signalfd(2) of the set,
 * made per call, read on the scheduler's thread (a signalfd gives the
 * signals of the process and of the thread that reads it, so the read
 * never goes to a helper or to io_uring's workers) after the runtime's
 * readiness wait.  Nothing of the wait lies on the co's stack but the
 * descriptor's number; the co's extra block has it too (own_fd), for a
 * scheduler's free to close.
 */
#define _GNU_SOURCE
#include "rt_impl.h"
#include "rt_sys.h"

#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/signalfd.h>

/* *out as sigwaitinfo(2) fills it, from what the signalfd said.  The
 * members of siginfo_t share storage (si_value with si_status, si_addr
 * with si_pid, si_band with si_pid and si_uid), so each kind of signal
 * gets only its own, chosen from the signal and si_code as the kernel
 * chooses (siginfo_layout): a code between SI_USER and SI_KERNEL is the
 * kernel's own (a child's state, a fault's address, seccomp's system
 * call, an I/O event's fd), SI_TIMER a POSIX timer's, another code < 0 a
 * sender's with a value, the rest (SI_USER, SI_KERNEL) a sender's. */
static void to_siginfo(const struct signalfd_siginfo* in, siginfo_t* out) {
    int sig = (int)in->ssi_signo, code = in->ssi_code;
    int kernel = code > SI_USER && code < SI_KERNEL;
    memset(out, 0, sizeof(*out));
    out->si_signo = sig;
    out->si_errno = in->ssi_errno;
    out->si_code = code;
    if (kernel && sig == SIGCHLD) {
        out->si_pid = (pid_t)in->ssi_pid;
        out->si_uid = (uid_t)in->ssi_uid;
        out->si_status = in->ssi_status;
        out->si_utime = (clock_t)in->ssi_utime;
        out->si_stime = (clock_t)in->ssi_stime;
    } else if (kernel && (sig == SIGSEGV || sig == SIGBUS || sig == SIGILL ||
                          sig == SIGFPE || sig == SIGTRAP)) {
        out->si_addr = (void*)(uintptr_t)in->ssi_addr;
        if (sig == SIGBUS && (code == BUS_MCEERR_AR || code == BUS_MCEERR_AO))
            out->si_addr_lsb = (short)in->ssi_addr_lsb;
    } else if (kernel && sig == SIGSYS) {   /* seccomp's SECCOMP_RET_TRAP */
        out->si_call_addr = (void*)(uintptr_t)in->ssi_call_addr;
        out->si_syscall = in->ssi_syscall;
        out->si_arch = in->ssi_arch;
    } else if ((kernel && code <= POLL_HUP) || code == SI_SIGIO) {
        out->si_band = (long)in->ssi_band;  /* SIGIO, or F_SETSIG's signal */
        out->si_fd = in->ssi_fd;
    } else if (code == SI_TIMER) {
        out->si_timerid = (int)in->ssi_tid;
        out->si_overrun = (int)in->ssi_overrun;
        out->si_value.sival_ptr = (void*)(uintptr_t)in->ssi_ptr;
    } else {                        /* a sender's: SI_USER, SI_QUEUE, ... */
        out->si_pid = (pid_t)in->ssi_pid;
        out->si_uid = (uid_t)in->ssi_uid;
        if (code < 0) out->si_value.sival_ptr = (void*)(uintptr_t)in->ssi_ptr;
    }
}

int aco_rt_signal_wait(const sigset_t* set, siginfo_t* info, int64_t deadline) {
    aco_rt_co_t* co = rt_self();
    if (co == NULL) return -EPERM;
    if (rt_co_cancelled(co)) return -ECANCELED;
    if (set == NULL) return -EINVAL;
    /* a signal of set that this thread does not block would be delivered
     * the usual way (its handler, or the default: often the end of the
     * process), never here: say so now */
    sigset_t mask;
    pthread_sigmask(SIG_BLOCK, NULL, &mask);
    for (int sig = 1; sig < NSIG; sig++)
        if (sig != SIGKILL && sig != SIGSTOP && sigismember(set, sig) == 1 &&
            sigismember(&mask, sig) != 1)
            return -EINVAL;
    /* the descriptor is the call's: a co that aco_rt_sched_free destroys
     * in the wait leaves it in its extra block, for the free to close */
    rt_extra_t* x = rt_extra(co, 0);
    if (x == NULL) return -ENOMEM;
    int fd = signalfd(-1, set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (fd < 0) return -errno;
    x->own_fd = fd + 1;
    struct signalfd_siginfo si;
    int r;
    for (;;) {
        ssize_t n = rt_sys_read(fd, &si, sizeof(si));
        if (n == (ssize_t)sizeof(si)) {
            r = (int)si.ssi_signo;
            if (info) to_siginfo(&si, info);
            break;
        }
        if (n < 0 && errno != EAGAIN && errno != EINTR) {
            r = -errno;
            break;
        }
        r = aco_rt_wait(fd, POLLIN, deadline);
        if (r < 0) break;
    }
    x->own_fd = 0;
    aco_rt_close(fd);
    return r;
}
