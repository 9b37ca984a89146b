/*
 * test_signal_storm.c - timer signals that land anywhere in millions of
 * switches, inside the switch included, always find the stack pointer on a real
 * stack, and corrupt no local of a co or of main.
 *
 * A signal handler runs on whatever stack the interrupted code was using, at
 * its stack pointer.  A context switch that ever points the stack pointer at
 * something that is not a stack (or addresses live data below it) lets the
 * kernel write a signal frame over that data.  So: a timer fires SIGALRM as
 * fast as the machine can deliver it while main resumes cos on shared and
 * standalone stacks millions of times.  The handler
 *   - reads the interrupted pc and sp from its ucontext_t; counts the
 *     signals whose pc lies inside the switch ([acosw, aco__acosw_end):
 *     acosw and, on x86, its copies aco__yieldsw and aco__handsw) and the
 *     distinct pcs among them; counts those whose sp was
 *     outside every stack the program knows (the main thread's stack and
 *     every share stack): that must never happen;
 *   - fills and checks a 256-byte buffer on its own stack, which lives below
 *     the interrupted sp.
 * Cos and main keep patterned locals across every switch and check them.
 * On x86-64 the batches of resumes alternate acosw's two ways with the FP
 * control words (aco__fp_mode), so that signals land on both.
 *
 * The run alternates two phases, a few hundred signals each: "work" (cos
 * with one or two patterned frames, on shared stacks, so resumes copy
 * frames) and, seven times as long, "ping" (cos that only yield, one
 * standalone and two sharing a stack with tiny frames), where a good part
 * of the time is spent inside the switch itself.  Two ping cos on stacks
 * of their own hand off to each other with aco_yield_to every other round,
 * at one call site: aco_yield_to's switch takes its ret where both stopped
 * there, its jump where one stopped in aco_yield.
 *
 * The timer is one-shot, re-armed by the handler as it returns: the next
 * signal comes a period after the last one was handled.  Delivering a
 * signal costs tens of microseconds on a VM (more for an i386 process on an
 * x86-64 kernel), so a fixed short period would keep a signal always pending
 * and the program would make no progress.  Each phase has its own period,
 * which the handler stretches while fewer than MIN_PROGRESS resumes happen
 * between two signals and shrinks while there are plenty: the storm runs at
 * the rate the machine can deliver, with some progress in between.
 *
 * The figures, one line in a fixed format (test.sh collects them):
 *   storm: arch=x86_64 signals=N in_switch=N switch_pcs=N sp_outside=N
 *          corruptions=N resumes=N seconds=S
 * The verdict: sp_outside and corruptions 0; natively (not under valgrind,
 * ASan or TSan) signals >= GOAL_SIGNALS and in_switch >= GOAL_IN_SWITCH.
 *
 * Under valgrind, signals are delivered only between translated blocks (so
 * never inside acosw) and much more slowly: the run is bounded by time
 * (VG_SEC) and only the corruption and sp checks count.  Sanitizer runtimes
 * add their own work to every switch, and qemu-user (the cross variants)
 * delivers signals between its blocks too: there the run is bounded by time
 * (BOUND_SEC) and only those checks count.
 */
#define _GNU_SOURCE     /* REG_RIP / REG_EIP / REG_PC, pthread_getattr_np */
#include "aco_test.h"

#include <pthread.h>
#include <time.h>
#include <ucontext.h>

#define MIN_PERIOD_NS 2000L         /* the storm's period: at least this, */
#define MAX_PERIOD_NS 1000000L      /* at most this (starved) */
#define MIN_PROGRESS 16             /* resumes wanted between two signals */
#define PHASE_SIGNALS 256           /* signals per phase */
#define GOAL_SIGNALS 100000L        /* natively, per run */
#define GOAL_IN_SWITCH 10000L
#define MIN_SIGNALS 1000            /* elsewhere: the storm did happen */
#define MIN_RESUMES 2000000L        /* 4 million switches at least */
#define HARD_SEC 10.0               /* never longer than this */
#define FLOOR_RESUMES 200000L       /* fail below this: nothing was stormed */
#define VG_SEC 4.0                  /* valgrind: switch for this long, */
#define VG_HARD_SEC 15.0            /* at most this long */
#define BOUND_SEC 1.5               /* sanitizers, emulators: this long */

/* acosw's extent (acosw.S); weak, so a port that lacks the label still
 * links and the test says what is missing. */
extern const char aco__acosw_end[] __attribute__((weak, visibility("hidden")));
#define ACOSW_MAX_BYTES 1024        /* for the distinct-pc bitmap */

#if defined(__x86_64__)
#define UC_PC(uc) ((uintptr_t)(uc)->uc_mcontext.gregs[REG_RIP])
#define UC_SP(uc) ((uintptr_t)(uc)->uc_mcontext.gregs[REG_RSP])
#elif defined(__i386__)
#define UC_PC(uc) ((uintptr_t)(uc)->uc_mcontext.gregs[REG_EIP])
#define UC_SP(uc) ((uintptr_t)(uc)->uc_mcontext.gregs[REG_ESP])
#elif defined(__aarch64__)
#define UC_PC(uc) ((uintptr_t)(uc)->uc_mcontext.pc)
#define UC_SP(uc) ((uintptr_t)(uc)->uc_mcontext.sp)
#elif defined(__riscv)
#define UC_PC(uc) ((uintptr_t)(uc)->uc_mcontext.__gregs[REG_PC])
#define UC_SP(uc) ((uintptr_t)(uc)->uc_mcontext.__gregs[REG_SP])
#else
#error "test_signal_storm: unsupported architecture"
#endif

/* ------------------------------------------------------------------------ */
/* What the handler knows and counts.  The ranges are written before the    */
/* handler is installed and not changed while it can run.                   */
/* ------------------------------------------------------------------------ */

#define N_COS 7                      /* work cos */
#define N_PING 3                     /* ping cos */
#define N_STACKS 6                   /* 4 for the work cos, 2 for the ping cos */
#define N_RANGES (N_STACKS + 1)

static uintptr_t range_lo[N_RANGES], range_hi[N_RANGES];
static int n_ranges;

static uintptr_t sw_lo, sw_hi;           /* [acosw, aco__acosw_end) */

static timer_t storm_timer;
static volatile sig_atomic_t storm_rearm;
static struct itimerspec storm_shot;    /* it_value = the period */
static volatile long progress;          /* resumes so far, bumped by main */
static volatile sig_atomic_t phase;     /* 0 work, 1 ping: set by main */
static long period_of[2] = {20000L, 20000L};
static long progress_seen;
static long period_max_seen;

static volatile long sig_count;
static volatile long sig_in_switch;
static volatile long sig_sp_outside;
static volatile long sig_buf_bad;
static volatile uintptr_t first_bad_sp, first_bad_pc;
static unsigned char sw_pc_seen[ACOSW_MAX_BYTES];

/* A stack grows down from range_hi: sp == range_hi is an empty stack (a
 * co function's entry on aarch64 and riscv64, where no return address is
 * pushed), and a signal frame then goes right below it. */
static int sp_known(uintptr_t sp) {
    for (int i = 0; i < n_ranges; i++)
        if (sp >= range_lo[i] && sp <= range_hi[i]) return 1;
    return 0;
}

/* Say it at once, with write(2) (async-signal-safe): the frame the kernel
 * just wrote off-stack may well crash the program before main can report. */
static void report_outside(uintptr_t sp, uintptr_t pc) {
    char msg[128] = "test_signal_storm: signal with sp outside every stack: sp 0x";
    size_t len = strlen(msg);
    for (int k = 0; k < 2; k++) {
        uintptr_t v = k == 0 ? sp : pc;
        for (int sh = (int)sizeof(v) * 8 - 4; sh >= 0; sh -= 4)
            msg[len++] = "0123456789abcdef"[(v >> sh) & 15];
        if (k == 0) {
            memcpy(msg + len, ", pc 0x", 7);
            len += 7;
        }
    }
    msg[len++] = '\n';
    ssize_t rc = write(2, msg, len);
    (void)rc;
}

static void on_alarm(int sig, siginfo_t* si, void* ucv) {
    (void)sig;
    (void)si;
    int saved_errno = errno;
    const ucontext_t* uc = ucv;
    uintptr_t pc = UC_PC(uc), sp = UC_SP(uc);
    long n = sig_count + 1;
    sig_count = n;
    if (pc >= sw_lo && pc < sw_hi) {
        sig_in_switch++;
        if (pc - sw_lo < ACOSW_MAX_BYTES) sw_pc_seen[pc - sw_lo] = 1;
    }
    if (!sp_known(sp)) {
        if (sig_sp_outside++ == 0) {
            first_bad_sp = sp;
            first_bad_pc = pc;
            report_outside(sp, pc);
        }
    }
    /* This buffer sits just below the interrupted sp: on a share stack
     * when a co was interrupted. */
    volatile uint8_t buf[256];
    for (unsigned i = 0; i < sizeof(buf); i++) buf[i] = (uint8_t)(n * 7 + i);
    for (unsigned i = 0; i < sizeof(buf); i++)
        if (buf[i] != (uint8_t)(n * 7 + i)) {
            sig_buf_bad++;
            break;
        }
    if (storm_rearm) {
        int ph = phase;
        long p = period_of[ph], done = progress - progress_seen;
        progress_seen = progress;
        if (done < MIN_PROGRESS) p += p / 4;
        else if (done > 4 * MIN_PROGRESS) p -= p / 8;
        if (p < MIN_PERIOD_NS) p = MIN_PERIOD_NS;
        if (p > MAX_PERIOD_NS) p = MAX_PERIOD_NS;
        if (p > period_max_seen) period_max_seen = p;
        period_of[ph] = p;
        storm_shot.it_value.tv_nsec = p;
        /* timer_settime is async-signal-safe (POSIX.1-2008, 2.4.3). */
        timer_settime(storm_timer, 0, &storm_shot, NULL);
    }
    errno = saved_errno;
}

/* ------------------------------------------------------------------------ */
/* Cos: patterned locals in one or two frames, checked after every resume.  */
/* ------------------------------------------------------------------------ */

struct storm {
    uint32_t id;
    uint32_t round;
    long bad;           /* words found changed after a resume */
    int stop;           /* main asks it to finish */
};

static uint32_t pattern(uint32_t key, uint32_t i) {
    uint32_t x = key * 0x9e3779b1u + i * 0x85ebca77u;
    x ^= x >> 15;
    x *= 0x2c1b3c6du;
    x ^= x >> 13;
    return x;
}

/* Scalars the compiler keeps in callee-saved registers across the yield,
 * plus an array in memory: both halves of a co's state. */
__attribute__((noinline)) static long hold_and_yield(uint32_t key,
                                                     unsigned words) {
    uint32_t a[48];
    uint32_t r0 = pattern(key, 1000), r1 = pattern(key, 1001),
             r2 = pattern(key, 1002), r3 = pattern(key, 1003);
    for (unsigned i = 0; i < words; i++) a[i] = pattern(key, i);
    __asm__ volatile("" : : "r"(a) : "memory");
    aco_yield();
    __asm__ volatile("" : : "r"(a) : "memory");
    long bad = 0;
    for (unsigned i = 0; i < words; i++) bad += a[i] != pattern(key, i);
    bad += r0 != pattern(key, 1000);
    bad += r1 != pattern(key, 1001);
    bad += r2 != pattern(key, 1002);
    bad += r3 != pattern(key, 1003);
    return bad;
}

/* Sometimes one frame deeper, so the saved size keeps changing. */
__attribute__((noinline)) static long nested(uint32_t key) {
    uint32_t outer[16];
    for (unsigned i = 0; i < 16; i++) outer[i] = pattern(~key, i);
    __asm__ volatile("" : : "r"(outer) : "memory");
    long bad = hold_and_yield(key, 16 + key % 32);
    __asm__ volatile("" : : "r"(outer) : "memory");
    for (unsigned i = 0; i < 16; i++) bad += outer[i] != pattern(~key, i);
    return bad;
}

static void storm_co(void) {
    struct storm* st = aco_get_arg();
    while (!st->stop) {
        uint32_t key = st->id << 24 ^ st->round;
        st->bad += st->round % 3 == 0 ? nested(key)
                                      : hold_and_yield(key, 8 + key % 40);
        st->round++;
    }
    aco_exit();
}

/* The ping phase: a value in memory and one in a register, checked after
 * every resume; as little else as possible between two switches. */
static aco_t* ping_peer[N_PING];   /* whom ping co i hands off to */

static void ping_co(void) {
    struct storm* st = aco_get_arg();
    uint32_t key = st->id * 0x9e3779b1u;
    aco_t* peer = ping_peer[st->id - 1 - N_COS];
    while (!st->stop) {
        uint32_t reg = key + st->round;
        volatile uint32_t mem = reg;
        if (peer != NULL && (st->round & 1)) aco_yield_to(peer);
        else aco_yield();
        if (mem != reg || reg != key + st->round) st->bad++;
        st->round++;
    }
    aco_exit();
}

/* ------------------------------------------------------------------------ */

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}


static const char* arch_name(void) {
#if defined(__x86_64__)
    return "x86_64";
#elif defined(__i386__)
    return "i386";
#elif defined(__aarch64__)
    return "aarch64";
#elif defined(__riscv)
    return "riscv64";
#else
    return "unknown";
#endif
}

int main(void) {
    const int on_vg = aco_test_on_valgrind();
    /* The goals hold for native runs: sanitizer runtimes slow every switch,
     * and an emulator (test.sh names it in ACO_TEST_EMULATOR) delivers
     * signals between its translated blocks, as valgrind does. */
    const char* emu = getenv("ACO_TEST_EMULATOR");
    /* ACO_TEST_STORM_GOALS=0: a native run without the goals, time-bound as
     * under a sanitizer (test.sh: -O0 and UBSan builds, whose acosw is the
     * -O2 builds' and which run alongside other programs). */
    const char* goals = getenv("ACO_TEST_STORM_GOALS");
    const int native = !on_vg && !aco__san_switch && (emu == NULL || *emu == 0) &&
                       !(goals != NULL && strcmp(goals, "0") == 0);
    if (aco__acosw_end == NULL) {
        fprintf(stderr, "test_signal_storm: acosw.S defines no aco__acosw_end "
                "for this architecture: add it at the end of acosw\n");
        return 1;
    }
    sw_lo = (uintptr_t)&acosw;
    sw_hi = (uintptr_t)aco__acosw_end;
    CHECK(sw_hi > sw_lo && sw_hi - sw_lo <= ACOSW_MAX_BYTES);

    aco_thread_init(NULL);
    aco_t* main_co = aco_create(NULL, NULL, 0, NULL, NULL);

    /* Work cos: two shared stacks (3 and 2 cos), two standalone ones.  Ping
     * cos: one standalone, two sharing a stack.  Both kinds of memory (mmap
     * with guard, malloc without). */
    static const struct { size_t sz; char guard; } kinds[N_STACKS] = {
        {128 * 1024, 1}, {64 * 1024, 0}, {64 * 1024, 1}, {64 * 1024, 0},
        {64 * 1024, 1}, {64 * 1024, 0}};
    static const int stack_of[N_COS + N_PING] = {0, 0, 0, 1, 1, 2, 3, 4, 5, 5};
    aco_share_stack_t* stacks[N_STACKS];
    for (int k = 0; k < N_STACKS; k++)
        stacks[k] = aco_share_stack_new2(kinds[k].sz, kinds[k].guard);
    struct storm states[N_COS + N_PING];
    aco_t* cos[N_COS + N_PING];
    aco_t** pings = cos + N_COS;
    for (int i = 0; i < N_COS + N_PING; i++) {
        states[i] = (struct storm){.id = (uint32_t)i + 1};
        cos[i] = aco_create(main_co, stacks[stack_of[i]], 0,
                            i < N_COS ? storm_co : ping_co, &states[i]);
    }
    ping_peer[0] = pings[1];        /* stacks 4 and 5: the direct hand-off */
    ping_peer[1] = pings[0];

    /* The known stacks: the main thread's whole reserved stack (glibc takes
     * it from /proc/self/maps and RLIMIT_STACK) and every share stack. */
    pthread_attr_t attr;
    void* main_lo;
    size_t main_sz;
    CHECK(pthread_getattr_np(pthread_self(), &attr) == 0);
    CHECK(pthread_attr_getstack(&attr, &main_lo, &main_sz) == 0);
    pthread_attr_destroy(&attr);
    range_lo[0] = (uintptr_t)main_lo;
    range_hi[0] = (uintptr_t)main_lo + main_sz;
    n_ranges = 1;
    CHECK(sp_known(aco_test_sp()));  /* main's own frame is in range */
    for (int k = 0; k < N_STACKS; k++) {
        range_lo[n_ranges] = (uintptr_t)stacks[k]->ptr;
        range_hi[n_ranges] = (uintptr_t)stacks[k]->ptr + stacks[k]->sz;
        n_ranges++;
    }

    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_alarm;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGALRM, &sa, NULL) == 0);

    /* Main's own patterned frame, checked as it goes: handlers also run on
     * the main stack, right below it. */
    uint32_t mine[64];
    for (unsigned i = 0; i < 64; i++) mine[i] = pattern(0xa11, i);
    long main_bad = 0;

    struct sigevent sev;
    memset(&sev, 0, sizeof(sev));
    sev.sigev_notify = SIGEV_SIGNAL;
    sev.sigev_signo = SIGALRM;
    CHECK(timer_create(CLOCK_MONOTONIC, &sev, &storm_timer) == 0);
    storm_shot.it_value.tv_nsec = period_of[0];

    double hard_sec = on_vg ? VG_HARD_SEC : HARD_SEC;
    uint32_t rng = 0x2545f491u;
    long resumes = 0;
    double start = now();
    storm_rearm = 1;
    CHECK(timer_settime(storm_timer, 0, &storm_shot, NULL) == 0);
    int next_ping = 0;
    int fp_dflt = aco__fp_mode(-1);     /* x86-64: two ways through the switch */
    for (;;) {
        /* One work phase, then seven ping phases. */
        int ping = (sig_count / PHASE_SIGNALS) % 8 != 0;
        phase = ping;
        /* Each batch of 1024 resumes goes the other way with the FP words
         * (where there are two), so that signals land on both paths. */
        if (fp_dflt >= 0) aco__fp_mode((int)((resumes / 1024) & 1));
        if (ping) {
            /* The same co 1024 times, then the next: few copies, and as
             * little as possible besides the switches, even at -O0. */
            aco_t* co = pings[next_ping];
            next_ping = next_ping + 1 == N_PING ? 0 : next_ping + 1;
            for (int j = 0; j < 1024; j++) {
                aco_resume(co);
                progress = progress + 1;
            }
        } else {
            for (int j = 0; j < 1024; j++) {
                rng ^= rng << 13;
                rng ^= rng >> 17;
                rng ^= rng << 5;
                aco_resume(cos[rng % N_COS]);
                progress = progress + 1;
            }
        }
        resumes += 1024;
        __asm__ volatile("" : : "r"(mine) : "memory");
        for (unsigned i = 0; i < 64; i++) main_bad += mine[i] != pattern(0xa11, i);
        double t = now() - start;
        if (t > hard_sec) break;
        if (native) {
            if (resumes >= MIN_RESUMES && sig_count >= GOAL_SIGNALS &&
                sig_in_switch >= GOAL_IN_SWITCH)
                break;
        } else if (resumes >= FLOOR_RESUMES && sig_count >= 2 * MIN_SIGNALS &&
                   t > (on_vg ? VG_SEC : BOUND_SEC)) {
            break;
        }
    }
    if (fp_dflt >= 0) aco__fp_mode(fp_dflt);
    /* Stop the handler re-arming first, then disarm: no expiry after this. */
    storm_rearm = 0;
    struct itimerspec off;
    memset(&off, 0, sizeof(off));
    CHECK(timer_settime(storm_timer, 0, &off, NULL) == 0);
    double elapsed = now() - start;
    CHECK(timer_delete(storm_timer) == 0);
    signal(SIGALRM, SIG_IGN);

    long co_bad = 0;
    for (int i = 0; i < N_COS + N_PING; i++) {
        states[i].stop = 1;
        aco_resume(cos[i]);
        CHECK(cos[i]->is_end);
        co_bad += states[i].bad;
        aco_destroy(cos[i]);
    }
    for (int k = 0; k < N_STACKS; k++) aco_share_stack_destroy(stacks[k]);
    aco_destroy(main_co);

    int pcs = 0;
    for (unsigned i = 0; i < ACOSW_MAX_BYTES; i++) pcs += sw_pc_seen[i];
    long corrupt = co_bad + main_bad + sig_buf_bad;
    printf("storm: arch=%s signals=%ld in_switch=%ld switch_pcs=%d "
           "sp_outside=%ld corruptions=%ld resumes=%ld seconds=%.2f\n",
           arch_name(), sig_count, sig_in_switch, pcs, sig_sp_outside, corrupt,
           resumes, elapsed);
    printf("test_signal_storm: %ld switches; the switch is %u bytes; periods "
           "%ld..%ld ns (work %ld, ping %ld at the end); corruptions: cos %ld, "
           "main %ld, handler %ld\n", 2 * resumes, (unsigned)(sw_hi - sw_lo),
           MIN_PERIOD_NS, period_max_seen, period_of[0], period_of[1], co_bad,
           main_bad, sig_buf_bad);
    if (sig_sp_outside != 0)
        fprintf(stderr, "first signal outside the stacks: sp %p, pc %p "
                "(acosw at %p)\n", (void*)first_bad_sp, (void*)first_bad_pc,
                (void*)sw_lo);
    ASSERT_EQ(sig_sp_outside, 0);
    ASSERT_EQ(corrupt, 0);
    if (!on_vg) {
        CHECK(sig_count >= MIN_SIGNALS);
        CHECK(resumes >= FLOOR_RESUMES);
    }
    if (native) {
        CHECK(sig_count >= GOAL_SIGNALS);
        CHECK(sig_in_switch >= GOAL_IN_SWITCH);
    }
    printf("test_signal_storm: ok\n");
    return 0;
}
