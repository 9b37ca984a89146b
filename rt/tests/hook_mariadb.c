/* hook_mariadb.c - MariaDB Connector/C's blocking API, unchanged, in cos of
 * one thread through the syscall hooks, against a real mariadbd (the one
 * tests/check_hook_mariadb.sh starts).  In order:
 *   outside  no scheduler yet: a connection and a query in main, which
 *            block the thread as without the hooks;
 *   overlap  --cos N cos (50), each with a connection of its own, run
 *            SELECT SLEEP(0.1), <its number> at once: all of them must take
 *            less than 3 times one query alone (without the hooks they
 *            take N times: this check fails), every row checked;
 *   kill     20 cos inside SELECT SLEEP(30) when a thread outside cos KILLs
 *            their connections from one of its own: each query fails with
 *            the library's error within a second of its KILL, the next one
 *            on the same connection with a client error;
 *   cancel   a co inside SELECT SLEEP(10), cancelled by another co after
 *            30 ms while a ticker co runs: hk_cancel_check's bounds;
 *   crash    (--crash PID) as kill, but the thread kills mariadbd itself
 *            (SIGKILL): every query fails with a client error, and so
 *            does a new connection.
 *
 *   hook_mariadb --port P --user U --password W (--hooks | --no-hooks)
 *                [--cos N] [--crash PID]
 *
 * Prints a line per step with its numbers; exit status 0 only if every
 * check held.  Run under LD_PRELOAD="libhook_count.so libaco_hook.so", or
 * linked with libaco_hook (then libhook_count.so alone preloaded).
 */
#define _GNU_SOURCE
#include "hook_lib.h"

#include <errmsg.h>
#include <mysql.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <unistd.h>

#define KILLED 20                   /* cos of the kill and crash steps */

static int port, ncos = 50, want_hooks = -1;
static const char *user = "", *password = "";
static pid_t crash_pid;

/* A client's record, in heap memory: the killer thread reads it. */
typedef struct {
    MYSQL* m;
    unsigned long id;               /* the server's id of its connection */
    int64_t start, end;             /* aco_rt_now() around the query */
    int64_t kill_at;                /* when the killer thread went for it */
    int ok;
    unsigned err, err2;             /* mysql_errno of the query, of the next */
    char msg[200];
} client_t;

static client_t* cl;
static int in_flight, most;
static aco_rt_wg_t connected;
static int entered;                 /* kill step: cos inside their query */
static char summary[512];           /* the result line, step by step */

static void sum(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
static void sum(const char* fmt, ...) {
    size_t n = strlen(summary);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(summary + n, sizeof(summary) - n, fmt, ap);
    va_end(ap);
}

/* A new connection over TCP; NULL with the library's error in err/msg. */
static MYSQL* dial(unsigned* err, char* msg, size_t len) {
    MYSQL* m = mysql_init(NULL);
    HK_CHECK(m != NULL, "mysql_init: no memory");
    if (mysql_real_connect(m, "127.0.0.1", user, password, NULL, (unsigned)port, NULL, 0) != NULL)
        return m;
    if (err) *err = mysql_errno(m);
    snprintf(msg, len, "connect: %u %s", mysql_errno(m), mysql_error(m));
    mysql_close(m);
    return NULL;
}

/* SELECT SLEEP(secs), n: 0 when its row is (0, n); else -1, why in msg. */
static int sleep_query(MYSQL* m, const char* secs, int n, char* msg, size_t len) {
    char sql[64], want[16];
    snprintf(sql, sizeof(sql), "SELECT SLEEP(%s), %d", secs, n);
    snprintf(want, sizeof(want), "%d", n);
    if (mysql_query(m, sql) != 0) {
        snprintf(msg, len, "%s: %u %s", sql, mysql_errno(m), mysql_error(m));
        return -1;
    }
    MYSQL_RES* r = mysql_store_result(m);
    if (r == NULL) {
        snprintf(msg, len, "%s: no result: %u %s", sql, mysql_errno(m), mysql_error(m));
        return -1;
    }
    MYSQL_ROW row = mysql_fetch_row(r);
    int ok = row && mysql_num_fields(r) == 2 && row[0] && strcmp(row[0], "0") == 0 && row[1] &&
             strcmp(row[1], want) == 0;
    if (!ok)
        snprintf(msg, len, "%s gave (%s, %s)", sql, row && row[0] ? row[0] : "NULL",
                 row && row[1] ? row[1] : "NULL");
    mysql_free_result(r);
    return ok ? 0 : -1;
}

/* ------------------------------------------------------------------------ */
/* A step: its cos spawned and joined by a driver co, with a deadline       */
/* ------------------------------------------------------------------------ */

typedef struct {
    const char* what;
    aco_rt_fn_t fn;
    int n;
    int64_t limit_ms;               /* a co not done by then hangs */
    void (*after)(void);            /* in the driver, once they are done */
} step_t;

static void driver_co(void* arg) {
    step_t* st = arg;
    aco_rt_co_t** co = calloc((size_t)st->n, sizeof(*co));
    HK_CHECK(co != NULL, "no memory");
    for (int i = 0; i < st->n; i++) {
        co[i] = aco_rt_spawn(NULL, st->fn, (void*)(intptr_t)i);
        HK_CHECK(co[i] != NULL, "aco_rt_spawn: %s", strerror(errno));
    }
    int64_t dl = aco_rt_in_ms(st->limit_ms);
    for (int i = 0; i < st->n; i++) {
        int r = aco_rt_join(co[i], dl);
        HK_CHECK(r == 0, "%s: co %d not done %" PRId64 " ms after the start (join %d): it hangs",
                 st->what, i, st->limit_ms, r);
    }
    free(co);
    if (st->after) st->after();
}

static void run_step(aco_rt_sched_t* s, step_t* st) {
    aco_rt_co_t* d = aco_rt_spawn(s, driver_co, st);
    HK_CHECK(d != NULL, "aco_rt_spawn: %s", strerror(errno));
    aco_rt_detach(d);
    int r = aco_rt_sched_run(s);
    HK_CHECK(r == 0, "%s: aco_rt_sched_run: %d", st->what, r);
}

/* ------------------------------------------------------------------------ */
/* Outside cos                                                              */
/* ------------------------------------------------------------------------ */

/* With no scheduler the hooks are libc's: the query's SLEEP holds the
 * thread for its whole time, and the row is right. */
static void outside(void) {
    int n = (int)(getpid() % 100000);
    char msg[256];
    unsigned err = 0;
    int64_t c0 = hk_calls();
    MYSQL* m = dial(&err, msg, sizeof(msg));
    HK_CHECK(m != NULL, "outside cos: %s", msg);
    int64_t t0 = aco_rt_now();
    HK_CHECK(sleep_query(m, "0.05", n, msg, sizeof(msg)) == 0, "outside cos: %s", msg);
    int64_t took = aco_rt_now() - t0;
    mysql_close(m);
    int64_t calls = c0 < 0 ? -1 : hk_calls() - c0;
    printf("outside cos: SELECT SLEEP(0.05), %d right, the thread blocked %.1f ms in it; "
           "%" PRId64 " hooked calls passed to libc%s\n", n, took / 1e6, calls,
           calls < 0 ? " (not counted)" : "");
    HK_CHECK(took >= 50 * HK_MS, "a blocking query outside cos took %.1f ms, less than its SLEEP",
             took / 1e6);
}

/* ------------------------------------------------------------------------ */
/* One query alone, then many at once                                       */
/* ------------------------------------------------------------------------ */

static int64_t one_ns, overlap_calls0;

static void one_co(void* arg) {
    (void)arg;
    char msg[256];
    MYSQL* m = dial(NULL, msg, sizeof(msg));
    HK_CHECK(m != NULL, "one: %s", msg);
    int64_t t0 = aco_rt_now();
    HK_CHECK(sleep_query(m, "0.1", 1, msg, sizeof(msg)) == 0, "one: %s", msg);
    one_ns = aco_rt_now() - t0;
    mysql_close(m);
}

static void overlap_co(void* arg) {
    int i = (int)(intptr_t)arg;
    client_t* c = &cl[i];
    c->m = dial(NULL, c->msg, sizeof(c->msg));
    aco_rt_wg_done(&connected);
    if (c->m == NULL) return;
    aco_rt_wg_wait(&connected, -1);     /* every connection made: queries only */
    c->start = aco_rt_now();
    if (++in_flight > most) most = in_flight;
    c->ok = sleep_query(c->m, "0.1", i, c->msg, sizeof(c->msg)) == 0;
    in_flight--;
    c->end = aco_rt_now();
    mysql_close(c->m);
}

static void overlap_check(void) {
    int64_t first = INT64_MAX, last = 0;
    int bad = 0;
    for (int i = 0; i < ncos; i++) {
        if (!cl[i].ok) {
            if (bad++ < 3) fprintf(stderr, "hook_mariadb: co %d: %s\n", i, cl[i].msg);
            continue;
        }
        if (cl[i].start < first) first = cl[i].start;
        if (cl[i].end > last) last = cl[i].end;
    }
    HK_CHECK(bad == 0, "overlap: %d of %d queries failed or gave a wrong row", bad, ncos);
    double span = (last - first) / 1e6, one = one_ns / 1e6;
    char calls[64] = "hooked calls not counted";
    if (overlap_calls0 >= 0)
        snprintf(calls, sizeof(calls), "%.1f hooked calls a co (connect, query, close)",
                 (double)(hk_calls() - overlap_calls0) / ncos);
    printf("overlap: %d cos, each its own connection and SELECT SLEEP(0.1), <its number>: "
           "%d rows right, all in %.1f ms, one alone %.1f ms (x%.2f), most in flight %d; %s\n",
           ncos, ncos, span, one, span / one, most, calls);
    HK_CHECK(span < 3 * one, "the queries did not overlap: %d took %.1f ms, %.1f times one "
             "alone (the hooks did not make the blocking calls park)", ncos, span, span / one);
    sum("%d queries overlapped in %.1f ms (one %.1f ms)", ncos, span, one);
}

/* ------------------------------------------------------------------------ */
/* Connections killed under the queries: KILL, or the server's death        */
/* ------------------------------------------------------------------------ */

static char killer_msg[256];

/* A thread of its own, outside cos: a plain blocking connection, through
 * the hooks (which are libc's here) at the same time as the cos. */
static void* killer(void* arg) {
    (void)arg;
    MYSQL* m = NULL;
    mysql_thread_init();                /* the API's rule for threads (a no-op in 3.x) */
    if (!crash_pid) {
        m = dial(NULL, killer_msg, sizeof(killer_msg));
        if (m == NULL) {                /* the cos will be said to hang: why */
            fprintf(stderr, "hook_mariadb: the killer thread: %s\n", killer_msg);
            mysql_thread_end();
            return NULL;
        }
    }
    while (__atomic_load_n(&entered, __ATOMIC_ACQUIRE) < KILLED) usleep(1000);
    usleep(30000);                      /* their queries are on the server */
    if (crash_pid) {
        int64_t t = aco_rt_now();
        for (int i = 0; i < KILLED; i++) __atomic_store_n(&cl[i].kill_at, t, __ATOMIC_RELAXED);
        if (kill(crash_pid, SIGKILL) != 0)
            snprintf(killer_msg, sizeof(killer_msg), "kill %d: %s", (int)crash_pid, strerror(errno));
        mysql_thread_end();
        return NULL;
    }
    /* One at a time, each co timed from its own KILL: the server shuts the
     * connection at once, but its KILL may then take 2 s to return (it
     * tries to wake the victim's wait on a mutex all SLEEPs share, and
     * gives up after 2 s), which holds the KILLs after it. */
    for (int i = 0; i < KILLED; i++) {
        char sql[64];
        snprintf(sql, sizeof(sql), "KILL CONNECTION %lu", cl[i].id);
        __atomic_store_n(&cl[i].kill_at, aco_rt_now(), __ATOMIC_RELAXED);
        if (mysql_query(m, sql) != 0) {
            snprintf(killer_msg, sizeof(killer_msg), "%s: %u %s", sql, mysql_errno(m), mysql_error(m));
            break;
        }
    }
    mysql_close(m);
    mysql_thread_end();
    return NULL;
}

static int client_error(unsigned e) { return e >= CR_MIN_ERROR && e <= CR_MAX_ERROR; }

static void killed_co(void* arg) {
    int i = (int)(intptr_t)arg;
    client_t* c = &cl[i];
    char msg[256];
    c->m = dial(NULL, msg, sizeof(msg));
    HK_CHECK(c->m != NULL, "co %d: %s", i, msg);
    c->id = mysql_thread_id(c->m);
    __atomic_add_fetch(&entered, 1, __ATOMIC_RELEASE);
    char sql[64];
    snprintf(sql, sizeof(sql), "SELECT SLEEP(30), %d", i);
    c->start = aco_rt_now();
    if (mysql_query(c->m, sql) == 0) {
        c->ok = 1;                      /* it should not have */
        mysql_free_result(mysql_store_result(c->m));
    }
    c->end = aco_rt_now();
    c->err = mysql_errno(c->m);
    snprintf(c->msg, sizeof(c->msg), "%s", mysql_error(c->m));
    c->ok = mysql_query(c->m, "SELECT 1") == 0 || c->ok;
    c->err2 = mysql_errno(c->m);
    mysql_close(c->m);
}

static void killed_check(void) {
    const char* what = crash_pid ? "crash" : "kill";
    HK_CHECK(killer_msg[0] == 0, "%s: the killer thread: %s", what, killer_msg);
    int64_t worst = 0;
    unsigned codes[4] = {0}, counts[4] = {0}, code2 = 0;
    int kinds = 0, same2 = 1;
    for (int i = 0; i < KILLED; i++) {
        client_t* c = &cl[i];
        HK_CHECK(!c->ok, "%s: co %d's queries went on after the connection was gone", what, i);
        HK_CHECK(c->err != 0, "%s: co %d: mysql_query failed with no error", what, i);
        /* (KILL shuts the socket before the victim's thread can say why) */
        HK_CHECK(client_error(c->err), "%s: co %d: mysql_query said %u %s, not a client error",
                 what, i, c->err, c->msg);
        HK_CHECK(client_error(c->err2), "%s: co %d: the next query said %u, not a client error",
                 what, i, c->err2);
        int64_t late = c->end - c->kill_at;
        HK_CHECK(c->kill_at && late >= 0, "%s: co %d's query failed before its kill", what, i);
        HK_CHECK(late <= 1000 * HK_MS, "%s: co %d's query returned %.1f ms after its kill", what,
                 i, late / 1e6);
        if (late > worst) worst = late;
        int k = 0;
        while (k < kinds && codes[k] != c->err) k++;
        if (k == kinds && kinds < 4) codes[kinds++] = c->err;
        if (k < 4) counts[k]++;
        if (i == 0) code2 = c->err2;
        else if (c->err2 != code2) same2 = 0;
    }
    printf("%s: %d cos inside SELECT SLEEP(30), %s from a thread outside cos: every query "
           "failed at most %.2f ms after its kill:", what, KILLED, crash_pid ? "SIGKILL of mariadbd" :
           "KILL CONNECTION", worst / 1e6);
    for (int k = 0; k < kinds; k++) {
        int i = 0;
        while (cl[i].err != codes[k]) i++;
        printf(" %u \"%s\" x%u;", codes[k], cl[i].msg, counts[k]);
    }
    printf(" the next query %u%s\n", code2, same2 ? "" : " and others");
    sum("; %s: %d errors within %.2f ms", what, KILLED, worst / 1e6);
}

/* After the crash, a new connection fails too, at once. */
static void redial_co(void* arg) {
    (void)arg;
    char msg[256];
    unsigned err = 0;
    int64_t t0 = aco_rt_now();
    MYSQL* m = dial(&err, msg, sizeof(msg));
    double ms = (aco_rt_now() - t0) / 1e6;
    HK_CHECK(m == NULL, "crash: a new connection succeeded with mariadbd killed");
    printf("crash: a new connection failed in %.2f ms: %s\n", ms, msg);
    HK_CHECK(client_error(err), "crash: a new connection said %u, not a client error", err);
    HK_CHECK(ms < 1000, "crash: a new connection took %.1f ms to fail", ms);
}

/* ------------------------------------------------------------------------ */
/* Cancel inside mysql_query                                                */
/* ------------------------------------------------------------------------ */

static hk_cancel_t cancel;
static hk_ticker_t ticker;
static volatile int victim_in;
static struct {
    int r;
    unsigned err;
    char msg[200];
} vres;

static void victim_co(void* arg) {
    (void)arg;
    char msg[256];
    MYSQL* m = dial(NULL, msg, sizeof(msg));
    HK_CHECK(m != NULL, "cancel: %s", msg);
    victim_in = 1;
    vres.r = mysql_query(m, "SELECT SLEEP(10)");
    hk_return_mark(&cancel);
    vres.err = mysql_errno(m);
    snprintf(vres.msg, sizeof(vres.msg), "%s", mysql_error(m));
    if (vres.r == 0) mysql_free_result(mysql_store_result(m));
    mysql_close(m);
}

static void canceller_co(void* arg) {
    (void)arg;
    aco_rt_co_t* t = aco_rt_spawn(NULL, hk_ticker_co, &ticker);
    aco_rt_co_t* v = aco_rt_spawn(NULL, victim_co, NULL);
    HK_CHECK(t && v, "aco_rt_spawn: %s", strerror(errno));
    while (!victim_in) aco_rt_sleep(HK_MS);
    aco_rt_sleep(30 * HK_MS);           /* well inside its query */
    hk_cancel_mark(&cancel);
    aco_rt_cancel(v);
    int r = aco_rt_join(v, aco_rt_in_ms(2000));
    HK_CHECK(r == 0, "cancel: the cancelled co still runs 2 s later (join %d): it hangs", r);
    ticker.stop = 1;
    aco_rt_join(t, -1);
}

static void cancel_check(void) {
    printf("cancel: mysql_query(SELECT SLEEP(10)) cancelled 30 ms in: %d, %u \"%s\"; "
           "the ticker ticked %" PRId64 " times\n", vres.r, vres.err, vres.msg, ticker.ticks);
    HK_CHECK(vres.r != 0, "cancel: mysql_query went on to its end after the cancel");
    HK_CHECK(client_error(vres.err), "cancel: mysql_query said %u, not the library's error",
             vres.err);
    hk_cancel_check("cancel: mysql_query", &cancel, &ticker);
    sum("; cancel: error %u in %.2f ms, others waited <= %.2f ms", vres.err,
        (cancel.t_return - cancel.t_cancel) / 1e6, ticker.max_late / 1e6);
}

/* ------------------------------------------------------------------------ */

static void usage(void) {
    fprintf(stderr, "usage: hook_mariadb --port P --user U --password W (--hooks | --no-hooks) "
            "[--cos N] [--crash PID]\n");
    exit(2);
}

/* KILLED cos in their queries while the killer thread ends them (KILL
 * CONNECTION each, or the server's SIGKILL when crash_pid is set); a co
 * still in its query 20 s on hangs (the SLEEP is 30 s). */
static void kill_round(aco_rt_sched_t* s, const char* name) {
    pthread_t th;
    entered = 0;
    memset(cl, 0, (size_t)KILLED * sizeof(*cl));
    HK_CHECK(pthread_create(&th, NULL, killer, NULL) == 0, "pthread_create failed");
    step_t st = {name, killed_co, KILLED, 20000, NULL};
    run_step(s, &st);
    pthread_join(th, NULL);
    killed_check();
}

int main(int argc, char** argv) {
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--port") == 0 && i + 1 < argc) port = atoi(argv[++i]);
        else if (strcmp(argv[i], "--user") == 0 && i + 1 < argc) user = argv[++i];
        else if (strcmp(argv[i], "--password") == 0 && i + 1 < argc) password = argv[++i];
        else if (strcmp(argv[i], "--cos") == 0 && i + 1 < argc) ncos = atoi(argv[++i]);
        else if (strcmp(argv[i], "--crash") == 0 && i + 1 < argc) crash_pid = (pid_t)atoi(argv[++i]);
        else if (strcmp(argv[i], "--hooks") == 0) want_hooks = 1;
        else if (strcmp(argv[i], "--no-hooks") == 0) want_hooks = 0;
        else usage();
    }
    if (port <= 0 || ncos < 1 || want_hooks < 0) usage();
    setvbuf(stdout, NULL, _IOLBF, 0);   /* in order with the checks' stderr */
    hk_mode_check(want_hooks);
    printf("hook_mariadb: Connector/C %s, hooks %s\n", mysql_get_client_info(),
           want_hooks ? "live" : "absent");

    /* Before the first co.  The per-process setup (character sets, error
     * texts, the plugin list) runs under pthread_once, which mysql_init
     * would otherwise enter from a co: were that co to park inside it (it
     * makes no hooked call today: counted below; a plugin to load may
     * change that), the next co of the thread to reach mysql_init would
     * block the whole thread in pthread_once's wait, for a co the thread
     * can then never run.  Threaded programs owe Connector/C this call
     * first anyway. */
    int64_t c0 = hk_calls();
    HK_CHECK(mysql_library_init(0, NULL, NULL) == 0, "mysql_library_init failed");
    if (c0 >= 0) printf("mysql_library_init: %" PRId64 " hooked calls\n", hk_calls() - c0);

    outside();

    aco_rt_sched_t* s = aco_rt_sched_new(NULL);
    HK_CHECK(s != NULL, "aco_rt_sched_new: %s", strerror(errno));
    printf("backend %s\n", aco_rt_backend_name(s));
    sum("%s: ", aco_rt_backend_name(s));
    cl = calloc((size_t)(ncos > KILLED ? ncos : KILLED), sizeof(*cl));
    HK_CHECK(cl != NULL, "no memory");

    step_t one = {"one", one_co, 1, 5000, NULL};
    run_step(s, &one);
    aco_rt_wg_add(&connected, ncos);
    overlap_calls0 = hk_calls();
    step_t overlap = {"overlap", overlap_co, ncos, 10000 + (int64_t)ncos * 200, overlap_check};
    run_step(s, &overlap);

    pid_t crash = crash_pid;
    crash_pid = 0;                      /* KILL first, the crash last */
    kill_round(s, "kill");

    step_t cancel_step = {"cancel", canceller_co, 1, 5000, cancel_check};
    run_step(s, &cancel_step);

    if (crash) {
        crash_pid = crash;
        kill_round(s, "crash");
        step_t redial = {"redial", redial_co, 1, 5000, NULL};
        run_step(s, &redial);
    }

    aco_rt_sched_free(s);
    free(cl);
    mysql_library_end();
    printf("result: %s; every check held\n", summary);
    return 0;
}
