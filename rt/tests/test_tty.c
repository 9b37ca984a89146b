/* test_tty.c - a terminal's read keeps termios' VMIN and VTIME in
 * non-canonical mode, as read(2) does (termios(3)): VMIN 0 and VTIME 0
 * return what is there (0 at once); VMIN 0 with VTIME waits that long for
 * a byte (then 0); VMIN above 1 waits for that many bytes (n at most),
 * VTIME then an inter-byte timer once one has come.  Each case runs twice
 * on a fresh pseudo-terminal: read(2) in a plain thread (the kernel's
 * answer, checked against the table too) and aco_rt_read in a co, the
 * same bytes written at the same times by another thread; the counts must
 * agree, ours never early, and not late by more than a margin (300 ms;
 * 600 under memcheck and the sanitizers: the counts are what tell).  A
 * case whose writer came 50 ms late or more (a busy machine) runs again,
 * twice at most.  Before, aco_rt_read returned the first bytes that came
 * (VMIN 3: 2 bytes after 50 ms, where the kernel waits for the next 2).
 */
#define _GNU_SOURCE
#include "rt_test.h"

#include <fcntl.h>
#include <pthread.h>
#include <termios.h>
#include <time.h>

typedef struct {
    int vmin, vtime;        /* VTIME in tenths of a second */
    size_t n;               /* the read's size */
    int first_ms;           /* "ab" at first_ms, "cd" 50 ms later */
    int ef_ms;              /* "ef" then, if not 0 */
    ssize_t want;           /* the count read(2) returns */
    int at_ms;              /* about when */
} tty_case_t;

static const tty_case_t cases[] = {
    {0, 0, 8, 50, 0, 0, 0},         /* nothing there: 0 at once */
    {0, 3, 8, 50, 0, 2, 50},        /* a byte within VTIME: what came */
    {0, 1, 8, 600, 0, 0, 100},      /* none within VTIME: 0 */
    {1, 0, 8, 50, 0, 2, 50},        /* cfmakeraw's */
    {3, 0, 8, 50, 0, 4, 100},       /* VMIN bytes: the second write's */
    {4, 5, 8, 50, 0, 4, 100},       /* VMIN before the gap */
    {6, 2, 8, 50, 1000, 4, 300},    /* the gap after "cd" (200 ms) ends it */
    {3, 0, 2, 50, 0, 2, 50},        /* n below VMIN: n (epoll: at VMIN's, 100
                                       ms: poll(2) says readable only then) */
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

static int64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0) {}
}

/* A pseudo-terminal in raw mode with the case's VMIN and VTIME: [0] the
 * terminal read, [1] the master written. */
static void open_tty(const tty_case_t* c, int p[2]) {
    p[1] = posix_openpt(O_RDWR | O_NOCTTY);
    CHECK_GE(p[1], 0);
    CHECK_EQ(grantpt(p[1]), 0);
    CHECK_EQ(unlockpt(p[1]), 0);
    p[0] = open(ptsname(p[1]), O_RDWR | O_NOCTTY);
    CHECK_GE(p[0], 0);
    struct termios t;
    CHECK_EQ(tcgetattr(p[0], &t), 0);
    cfmakeraw(&t);
    t.c_cc[VMIN] = (cc_t)c->vmin;
    t.c_cc[VTIME] = (cc_t)c->vtime;
    CHECK_EQ(tcsetattr(p[0], TCSANOW, &t), 0);
}

typedef struct {
    const tty_case_t* c;
    int fd;
    int64_t t0;             /* the case's start (mono_ms) */
    int64_t late;           /* how late its latest write was, ms */
} writer_t;

/* Write s when due (at ms after the start), noting how late. */
static void write_at(writer_t* w, const char* s, int ms) {
    int64_t late = mono_ms() - w->t0 - ms;
    if (late > w->late) w->late = late;
    CHECK_EQ(write(w->fd, s, 2), 2);
}

static void* writer(void* arg) {
    writer_t* w = arg;
    sleep_ms(w->c->first_ms);
    write_at(w, "ab", w->c->first_ms);
    sleep_ms(50);
    write_at(w, "cd", w->c->first_ms + 50);
    if (w->c->ef_ms) {
        sleep_ms(w->c->ef_ms - 50 - w->c->first_ms);
        write_at(w, "ef", w->c->ef_ms);
    }
    return NULL;
}

typedef struct {
    const tty_case_t* c;
    int fd;
    ssize_t got;
    int64_t ms;
} read_t;

/* One case: the reader (the kernel's or ours) while a thread writes.
 * Returns how late the writer was (ms). */
static int64_t run_case(const tty_case_t* c, void (*reader)(read_t*), read_t* r) {
    int p[2];
    open_tty(c, p);
    int64_t t0 = mono_ms();
    writer_t w = {c, p[1], t0, 0};
    r->c = c;
    r->fd = p[0];
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, writer, &w), 0);
    reader(r);
    r->ms -= t0;
    CHECK_EQ(pthread_join(th, NULL), 0);
    close(p[0]);
    close(p[1]);
    return w.late;
}

static void kernel_read(read_t* r) {
    char b[16];
    r->got = read(r->fd, b, r->c->n);
    r->ms = mono_ms();
}

static read_t ours;
static void ours_co(void* arg) {
    (void)arg;
    char b[16];
    ours.got = aco_rt_read(ours.fd, b, ours.c->n, aco_rt_in_ms(3000));
    ours.ms = mono_ms();
}

static aco_rt_sched_t* cur;
static void ours_read(read_t* r) {
    (void)r;
    test_go(cur, ours_co, NULL);
}

static void body(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    cur = s;
    int slack = SLOW ? 600 : 300;       /* (a busy machine's late wakes) */
    for (size_t i = 0, tries = 0; i < NCASES; i++) {
        const tty_case_t* c = &cases[i];
        read_t k;
        int64_t late = run_case(c, kernel_read, &k), olate = run_case(c, ours_read, &ours);
        if (olate > late) late = olate;
        fprintf(stderr, "[%s] VMIN %d VTIME %d n %zu: kernel %zd at %" PRId64 " ms, ours %zd at %" PRId64
                " ms (the writer up to %" PRId64 " ms late)\n",
                test_backend_label, c->vmin, c->vtime, c->n, k.got, k.ms, ours.got, ours.ms, late);
        /* A write 50 ms late or more (a busy machine) is not the case's
         * timing (50 ms between "ab" and "cd"): the case again, twice at
         * most.  (Seen under ASan in the full suite: "cd" came after
         * VTIME's 200 ms, ours read 2 where the kernel had read 4.) */
        if (late >= 50 && tries++ < 2) { i--; continue; }
        tries = 0;
        CHECK_EQ(k.got, c->want);               /* the table is the kernel's */
        CHECK_EQ(ours.got, k.got);
        CHECK_GE(ours.ms, c->at_ms - 10);
        CHECK_LE(ours.ms, c->at_ms + slack);
    }
}

int main(void) {
    test_on_backends(NULL, body, NULL);
    printf("test_tty: ok\n");
    return 0;
}
