/*
 * aco_fault.c - part of aco.c, which includes it: the one SIGSEGV reporter.
 *
 * Copyright 2026 the libaco authors.  Apache License 2.0 (see LICENSE).
 *
 * One handler, installed once per process by whichever asks first
 * (aco_overflow_report_install, or checked mode when it starts), run on an
 * alternate stack of each thread's (a co that overflowed has no stack
 * left).  It writes what it knows in lines of its own (line_buf, written
 * by system calls alone: a signal handler may not allocate, and a program
 * may interpose read() and write(), as the runtime's syscall hooks do) and
 * then hands the fault on: to the handler installed before it, or to the
 * default action, which kills the process by SIGSEGV.
 *
 *   a fault in the guard below the running co's share stack: the overflow
 *       line (aco.h), when aco_overflow_report_install was called;
 *   a fault in a checked-mode window: checked mode's report (fault_checked,
 *       set by aco_checked.c);
 *   anything else: handed on untouched.
 */
#ifndef ACO_CORE_PARTS
typedef int aco_fault_is_part_of_aco_c;     /* compiled alone: nothing */
#else

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <dlfcn.h>
#include <link.h>
#include <unistd.h>

/* NOSAN: a function the sanitizers leave alone (the tools' copies and
 * switch, checked mode's unwinder).  clang's no_sanitize("thread") still
 * brackets a function with TSan's __tsan_func_entry/exit, which must not
 * run around a fiber switch; disable_sanitizer_instrumentation (clang >= 14)
 * drops those, and no_sanitize the memory checks (clang 14's ASan ignores
 * the former). */
#if !aco__san_switch
#define NOSAN
#elif defined(__clang__) && defined(__has_attribute) && \
    __has_attribute(disable_sanitizer_instrumentation)
#define NOSAN __attribute__((noinline, disable_sanitizer_instrumentation, \
                             no_sanitize("address", "thread")))
#elif defined(__clang__)
#define NOSAN __attribute__((noinline, no_sanitize("address", "thread")))
#else
#define NOSAN __attribute__((noinline, no_sanitize_address, no_sanitize_thread))
#endif

/* ---- system calls and lines --------------------------------------------- */

static long sys_read(int fd, void* b, size_t n) { return syscall(SYS_read, fd, b, n); }
static void sys_close(int fd) { (void)syscall(SYS_close, fd); }
static void sys_dup2(int fd, int to) {      /* (dup3: no dup2 on aarch64) */
    if (fd != to) (void)syscall(SYS_dup3, fd, to, 0);
}
/* fork without fork(): no atfork handler runs (the program's, and libaco's
 * and the runtime's, which take locks the faulting thread may hold), and no
 * libc state is reset; the child only dups, opens and execs.  clone with
 * SIGCHLD alone and no new stack is a fork on every ABI (aarch64 and
 * riscv64 have no fork system call), whatever the order of the rest. */
static pid_t sys_fork(void) {
    return (pid_t)syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
}

/* (stderr may be non-blocking: the hooks make a descriptor so when a co
 * waits on it.  Then a full pipe is waited for, a second at a time.) */
static void err_write(const char* p, size_t n) {
    int saved = errno;
    while (n > 0) {
        long r = syscall(SYS_write, 2, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && errno == EAGAIN) {
            struct pollfd pf = {2, POLLOUT, 0};
            struct { long s, ns; } sec = {1, 0};    /* the kernel's timespec on each ABI */
            if (syscall(SYS_ppoll, &pf, 1, &sec, NULL, 0) > 0) continue;
            break;
        }
        if (r <= 0) break;
        p += r;
        n -= (size_t)r;
    }
    errno = saved;
}

static char* put_hex(char* p, uintptr_t v) {
    char tmp[2 * sizeof(v)];
    int n = 0;
    do tmp[n++] = "0123456789abcdef"[v & 15]; while ((v >>= 4) != 0);
    *p++ = '0';
    *p++ = 'x';
    while (n > 0) *p++ = tmp[--n];
    return p;
}

/* Lines built in a buffer and written with err_write: the handler's. */
typedef struct {
    char b[1024];
    size_t n;
} line_buf;

static void lb_str(line_buf* l, const char* s) {
    while (*s && l->n < sizeof(l->b) - 1) l->b[l->n++] = *s++;
}

static void lb_hex(line_buf* l, uintptr_t v) {
    char tmp[2 + 2 * sizeof(v) + 1];
    *put_hex(tmp, v) = '\0';
    lb_str(l, tmp);
}

static void lb_flush(line_buf* l) {
    err_write(l->b, l->n);
    l->n = 0;
}

/* The child of describe_pc's sys_fork: addr2line's answer into fds[1],
 * nothing else of it anywhere.  System calls alone (a sanitizer's libc
 * wrappers may wait for a lock another thread of the parent held). */
__attribute__((noreturn))
static void addr2line_child(const int fds[2], const char* path, const char* obj,
                            const char* hex) {
    sys_dup2(fds[1], 1);
    int null = (int)syscall(SYS_openat, AT_FDCWD, "/dev/null", O_RDWR);
    if (null >= 0) { sys_dup2(null, 0); sys_dup2(null, 2); }
    sys_close(fds[0]);
    const char* argv[] = {"addr2line", "-f", "-i", "-p", "-C", "-e", obj, hex, NULL};
    static const char name[] = "/addr2line";
    char file[512];
    for (const char* d = path; ; d++) {          /* each directory of PATH */
        const char* e = d;
        while (*e != '\0' && *e != ':') e++;
        size_t n = (size_t)(e - d);
        if (n == 0) {
            file[0] = '.';          /* an empty entry: the current directory */
            n = 1;
        } else if (n < sizeof(file) - sizeof(name)) {
            memcpy(file, d, n);
        }
        if (n < sizeof(file) - sizeof(name)) {
            memcpy(file + n, name, sizeof(name));
            (void)syscall(SYS_execve, file, argv, environ);
        }
        if (*e == '\0') break;
        d = e;
    }
    for (;;) (void)syscall(SYS_exit_group, 127);
}

/* "function (file:line)" of pc (the call's line for a return address:
 * pass pc - 1) on lines of their own, through addr2line where it is
 * installed and the program has debug information; else what dladdr
 * knows; else the bare pc. */
static void describe_pc(line_buf* l, const char* indent, uintptr_t pc) {
    Dl_info di;
    memset(&di, 0, sizeof(di));
    int have = dladdr((void*)pc, &di) != 0;
    /* The program's own path (addr2line's /proc/self/exe would be itself). */
    char exe[512];
    ssize_t en = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    exe[en > 0 ? en : 0] = '\0';
    const char* obj = exe;
    uintptr_t rel = pc;
    if (have && di.dli_fname != NULL && di.dli_fname[0] != '\0' && di.dli_fbase != NULL &&
        strcmp(di.dli_fname, program_invocation_name) != 0)
        obj = di.dli_fname;
    if (have && di.dli_fbase != NULL &&
        ((const ElfW(Ehdr)*)di.dli_fbase)->e_type == ET_DYN)
        rel = pc - (uintptr_t)di.dli_fbase;
    char out[1024];
    size_t got = 0;
    int fds[2];
    if (obj[0] != '\0' && pipe(fds) == 0) {
        char hex[2 + 2 * sizeof(rel) + 1];
        *put_hex(hex, rel) = '\0';
        const char* path = getenv("PATH");
        pid_t pid = sys_fork();
        if (pid == 0) addr2line_child(fds, path ? path : "/usr/bin:/bin", obj, hex);
        sys_close(fds[1]);
        if (pid > 0) {
            long r;
            while (got < sizeof(out) - 1 &&
                   ((r = sys_read(fds[0], out + got, sizeof(out) - 1 - got)) > 0 ||
                    (r < 0 && errno == EINTR)))
                if (r > 0) got += (size_t)r;
            int st;
            while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
        }
        sys_close(fds[0]);
    }
    out[got] = '\0';
    if (got > 0 && strncmp(out, "??", 2) != 0) {
        /* "f at file:line\n (inlined by) g at file:line\n": one line each */
        for (char* line = out; *line;) {
            char* nl = strchr(line, '\n');
            if (nl) *nl = '\0';
            lb_str(l, "aco: checked: ");
            lb_str(l, indent);
            lb_str(l, line);
            lb_str(l, "\n");
            if (!nl) break;
            line = nl + 1;
        }
        return;
    }
    lb_str(l, "aco: checked: ");
    lb_str(l, indent);
    if (have && di.dli_sname != NULL) {
        lb_str(l, di.dli_sname);
        lb_str(l, "+");
        lb_hex(l, pc - (uintptr_t)di.dli_saddr);
        lb_str(l, " ");
    }
    lb_str(l, "(pc ");
    lb_hex(l, pc);
    lb_str(l, " in ");
    lb_str(l, have && di.dli_fname ? di.dli_fname : "the program");
    lb_str(l, "; no debug information or no addr2line)\n");
}

/* ---- the handler -------------------------------------------------------- */

#define ALTSTACK_BYTES ((size_t)64 << 10)

static pthread_mutex_t fault_mu = PTHREAD_MUTEX_INITIALIZER;
static struct sigaction fault_prev;     /* the handler before ours */
static int fault_in;                    /* ours is installed */
static int fault_overflow;              /* aco_overflow_report_install was called */
static size_t fault_pg;
/* Checked mode's report (aco_checked.c): non-zero when the fault was in a
 * window, reported, and the handler must let the process die of it. */
static int (*fault_checked)(siginfo_t* si, void* ctx);
static pthread_key_t fault_key;

/* The overflow line of aco.h: co ran into the guard below s, which lies at
 * [lo, lo + sz) where co runs. */
static void overflow_line(const aco_t* co, const aco_share_stack_t* s, uintptr_t a) {
    line_buf l;
    l.n = 0;
    lb_str(&l, "aco: co ");
    lb_hex(&l, (uintptr_t)co);
    lb_str(&l, " overflowed its share stack ");
    lb_hex(&l, (uintptr_t)s);
    lb_str(&l, " [");
    lb_hex(&l, (uintptr_t)s->ptr);
    lb_str(&l, ", ");
    lb_hex(&l, (uintptr_t)s->ptr + s->sz);
    lb_str(&l, "), ");
    lb_hex(&l, s->sz);
    lb_str(&l, " bytes: fault at ");
    lb_hex(&l, a);
    lb_str(&l, " in its guard region (co function ");
    lb_hex(&l, (uintptr_t)co->fp);
    lb_str(&l, ")\n");
    lb_flush(&l);
}

/* Hand the fault on: to the previous handler, or die of it now, as without
 * us (SA_NODEFER: raise delivers at once).  Not by returning to the fault
 * to repeat it: valgrind's registers at a fault may be stale, so that the
 * repeat can write where the fault did not. */
static void fault_chain(int sig, siginfo_t* si, void* ctx) {
    if (fault_prev.sa_flags & SA_SIGINFO) {
        fault_prev.sa_sigaction(sig, si, ctx);
    } else if (fault_prev.sa_handler != SIG_DFL && fault_prev.sa_handler != SIG_IGN) {
        fault_prev.sa_handler(sig);
    } else {
        signal(sig, SIG_DFL);
        raise(sig);
    }
}

static TLS int fault_depth;     /* this thread is in a report of ours */

/* The running co's share stack is where it runs now (checked mode moves
 * it into the co's window), so its guard lies right below s->ptr. */
static void fault_handler(int sig, siginfo_t* si, void* ctx) {
    int saved = errno, mine = 0;
    aco_t* co = aco_gtls_co;
    uintptr_t a = (uintptr_t)si->si_addr;
    aco_share_stack_t* s = co != NULL && co->main_co != NULL ? co->share_stack : NULL;
    if (fault_depth) {              /* a fault in the report itself (SA_NODEFER) */
        signal(sig, SIG_DFL);
        raise(sig);
    }
    fault_depth = 1;
    if (s != NULL && s->guard_page_enabled && a < (uintptr_t)s->ptr &&
        a >= (uintptr_t)s->ptr - guard_bytes(fault_pg)) {
        if (fault_overflow) overflow_line(co, s, a);
    } else {
        mine = fault_checked != NULL && fault_checked(si, ctx);
    }
    fault_depth = 0;
    if (!mine) fault_chain(sig, si, ctx);
    errno = saved;
}

static void fault_altstack_free(void* mem) {
    stack_t off = {.ss_flags = SS_DISABLE};
    sigaltstack(&off, NULL);
    munmap(mem, ALTSTACK_BYTES);
}

/* The calling thread's alternate signal stack, unless it has one. */
static void fault_altstack(const char* fn) {
    stack_t cur;
    if (sigaltstack(NULL, &cur) != 0 || !(cur.ss_flags & SS_DISABLE)) return;
    void* mem = mmap(NULL, ALTSTACK_BYTES, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    check(fn, mem != MAP_FAILED, "out of memory (mmap of an alternate signal stack "
          "failed: %s)", strerror(errno));
    stack_t st = {.ss_sp = mem, .ss_size = ALTSTACK_BYTES, .ss_flags = 0};
    check(fn, sigaltstack(&st, NULL) == 0, "sigaltstack failed: %s", strerror(errno));
    pthread_setspecific(fault_key, mem);        /* unmapped at thread exit */
}

/* Our handler in, once per process, and the calling thread's stack for it;
 * aco_thread_init gives every later thread one (ext_init). */
static void fault_install(const char* fn) {
    pthread_mutex_lock(&fault_mu);
    if (!fault_in) {
        check(fn, pthread_key_create(&fault_key, fault_altstack_free) == 0,
              "pthread_key_create failed");
        fault_pg = page_size(fn);
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_sigaction = fault_handler;
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
        sigemptyset(&sa.sa_mask);
        check(fn, sigaction(SIGSEGV, &sa, &fault_prev) == 0, "sigaction failed: %s",
              strerror(errno));
        __atomic_store_n(&fault_in, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&fault_mu);
    fault_altstack(fn);
}

void aco_overflow_report_install(void) {
    fault_install("aco_overflow_report_install");
    fault_overflow = 1;
}

#endif /* ACO_CORE_PARTS */
