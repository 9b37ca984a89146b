/* hook_pq.c - libpq's blocking calls (PQconnectdb, PQexec), unchanged, in
 * cos of one thread through the syscall hooks, against a PostgreSQL server
 * (tests/check_hook_pq.sh starts one).  In order:
 *
 *   outside cos  queries with no scheduler anywhere: libpq as without the
 *                hooks (the shorter of two is "one query", the yardstick
 *                below);
 *   overlap      --clients cos, each with a connection of its own, run
 *                SELECT pg_sleep(0.1), <its number> at once: every value
 *                checked, and together they take under 3 times one query
 *                (one at a time would be --clients times: no hooks);
 *   killed       20 cos inside SELECT pg_sleep(30): a co with a connection
 *                made outside cos ends their backends (pg_terminate_backend)
 *                and each PQexec returns libpq's error, the connection bad,
 *                none left waiting (that connection works outside cos again
 *                at the end);
 *   cancel       a co inside PQexec of SELECT pg_sleep(10) is cancelled
 *                (aco_rt_cancel) after 30 ms, a ticker co running meanwhile:
 *                PQexec returns libpq's error within hk_cancel_check's
 *                bounds; then, under aco_rt_cancel_shield, PQcancel stops
 *                the server's sleep.
 *
 *   hook_pq --hooks|--no-hooks --db CONNINFO [--clients N]
 *
 * --hooks: the hooks must be live (aco_rt_hooks_active), every part runs.
 * --no-hooks: they must not be, and only the first two parts run: the
 * overlap check must fail (PQexec blocks the thread), exit status 1.
 * Exit status 0 only if every check passed.
 */
#define _GNU_SOURCE
#include "hook_lib.h"

#include <libpq-fe.h>

#define KILLED 20               /* cos whose backends are ended */

static const char* conninfo;
static int clients = 50, failures;
static int64_t one_query;       /* ns: one query outside cos */

static void fail(int id, const char* what, const char* detail) {
    failures++;
    if (detail == NULL) detail = "";
    fprintf(stderr, "hook_pq: co %d: %s%s%.*s\n", id, what, *detail ? ": " : "",
            (int)strcspn(detail, "\n"), detail);
}

/* A new connection, or NULL (said). */
static PGconn* connect_db(int id) {
    PGconn* c = PQconnectdb(conninfo);
    if (c == NULL || PQstatus(c) != CONNECTION_OK) {
        fail(id, "connect", c ? PQerrorMessage(c) : "no memory");
        PQfinish(c);
        return NULL;
    }
    return c;
}

/* SELECT pg_sleep(secs), id on c: 0 if the one row says id back. */
static int sleep_query(PGconn* c, int id, const char* secs) {
    char sql[64], want[16];
    snprintf(sql, sizeof(sql), "SELECT pg_sleep(%s), %d", secs, id);
    snprintf(want, sizeof(want), "%d", id);
    PGresult* r = PQexec(c, sql);
    int ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 && PQnfields(r) == 2 &&
             strcmp(PQgetvalue(r, 0, 1), want) == 0;
    if (!ok)
        fail(id, "wrong result", PQresultStatus(r) == PGRES_TUPLES_OK ? PQgetvalue(r, 0, 1)
                                                                     : PQerrorMessage(c));
    PQclear(r);
    return ok ? 0 : -1;
}

/* ------------------------------------------------------------------------ */
/* Outside cos                                                              */
/* ------------------------------------------------------------------------ */

static void outside_cos(void) {
    int64_t calls = hk_calls(), t0 = aco_rt_now();
    PGconn* c = connect_db(-1);
    HK_CHECK(c != NULL, "no connection outside cos");
    /* the shorter of two: the yardstick is the query's, not a hiccup's */
    int64_t t1 = aco_rt_now(), t2, t3;
    HK_CHECK(sleep_query(c, 7, "0.1") == 0, "the query outside cos failed");
    t2 = aco_rt_now();
    HK_CHECK(sleep_query(c, 8, "0.1") == 0, "the query outside cos failed");
    t3 = aco_rt_now();
    one_query = t2 - t1 < t3 - t2 ? t2 - t1 : t3 - t2;
    PQfinish(c);
    calls = calls < 0 ? -1 : hk_calls() - calls;
    printf("outside cos: connect %.1f ms, queries %.1f and %.1f ms, %" PRId64 " hooked calls%s\n",
           (t1 - t0) / 1e6, (t2 - t1) / 1e6, (t3 - t2) / 1e6, calls,
           calls < 0 ? " (not counted)" : "");
}

/* ------------------------------------------------------------------------ */
/* Overlap                                                                  */
/* ------------------------------------------------------------------------ */

static aco_rt_wg_t connected;   /* every client co connected */
static int in_flight, most;
static int64_t t_spawn, t_connected, t_done, overlap_ns;

static void overlap_co(void* arg) {
    int id = (int)(intptr_t)arg;
    PGconn* c = connect_db(id);
    /* the queries start together: the connects' time is not the queries' */
    if (aco_rt_wg_done(&connected) == 0 && aco_rt_wg_wait(&connected, 0) == 0 && !t_connected)
        t_connected = aco_rt_now();
    aco_rt_wg_wait(&connected, -1);
    if (c == NULL) return;
    if (++in_flight > most) most = in_flight;
    sleep_query(c, id, "0.1");
    in_flight--;
    int64_t now = aco_rt_now();
    if (now > t_done) t_done = now;
    PQfinish(c);
}

/* 0 if the clients overlapped and every result was right. */
static int overlap(void) {
    aco_rt_co_t** cos = calloc((size_t)clients, sizeof(*cos));
    HK_CHECK(cos, "no memory");
    aco_rt_wg_init(&connected);
    aco_rt_wg_add(&connected, clients);
    t_spawn = aco_rt_now();
    for (int i = 0; i < clients; i++)
        HK_CHECK((cos[i] = aco_rt_spawn(NULL, overlap_co, (void*)(intptr_t)i)), "spawn: %s",
                 strerror(errno));
    int64_t give_up = aco_rt_in_ms(15000);
    for (int i = 0; i < clients; i++)
        HK_CHECK(aco_rt_join(cos[i], give_up) == 0, "client %d still in libpq after 15 s", i);
    free(cos);
    overlap_ns = t_done - t_connected;
    printf("overlap: %d cos, connects %.1f ms, queries %.1f ms (one query %.1f ms, limit %.1f), "
           "most in flight %d, %d failures\n", clients, (t_connected - t_spawn) / 1e6,
           overlap_ns / 1e6, one_query / 1e6, 3 * one_query / 1e6, most, failures);
    if (failures) return -1;
    if (overlap_ns >= 3 * one_query) {
        fprintf(stderr, "hook_pq: %d queries of %.1f ms took %.1f ms: they did not overlap\n",
                clients, one_query / 1e6, overlap_ns / 1e6);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Killed: the server ends the backends while the cos wait in PQexec        */
/* ------------------------------------------------------------------------ */

static PGconn* killer;          /* made outside cos, used in a co */
static int victim_pid[KILLED], victims_in;
static int64_t t_kill, t_victim_back[KILLED], killed_ns;
static char kill_msg[256];

static void victim_co(void* arg) {
    int id = (int)(intptr_t)arg;
    PGconn* c = connect_db(id);
    if (c == NULL) return;
    victim_pid[id] = PQbackendPID(c);
    victims_in++;
    PGresult* r = PQexec(c, "SELECT pg_sleep(30)");
    t_victim_back[id] = aco_rt_now();
    if (PQresultStatus(r) != PGRES_FATAL_ERROR || PQstatus(c) != CONNECTION_BAD) {
        fail(id, "the killed query did not fail", PQresStatus(PQresultStatus(r)));
    } else if (!kill_msg[0]) {
        snprintf(kill_msg, sizeof(kill_msg), "%s", PQerrorMessage(c));
        kill_msg[strcspn(kill_msg, "\n")] = 0;
    }
    PQclear(r);
    PQfinish(c);
}

/* The killer's query, its one value as a number, or -1 (said). */
static long killer_query(const char* sql) {
    PGresult* r = PQexec(killer, sql);
    long v = -1;
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1) v = atol(PQgetvalue(r, 0, 0));
    else fail(-1, "killer", PQerrorMessage(killer));
    PQclear(r);
    return v;
}

static void killed(void) {
    aco_rt_co_t* cos[KILLED];
    int64_t t0 = aco_rt_now();
    for (int i = 0; i < KILLED; i++)
        HK_CHECK((cos[i] = aco_rt_spawn(NULL, victim_co, (void*)(intptr_t)i)), "spawn: %s",
                 strerror(errno));
    /* until the server shows each victim asleep in its query */
    char pids[KILLED * 12 + 2], sql[KILLED * 12 + 200];
    int64_t give_up = aco_rt_in_ms(5000);
    long asleep = 0;
    while (asleep != KILLED && aco_rt_now() < give_up && failures == 0) {
        aco_rt_sleep(5 * HK_MS);
        if (victims_in < KILLED) continue;
        int at = 0;
        for (int i = 0; i < KILLED; i++)
            at += snprintf(pids + at, sizeof(pids) - (size_t)at, "%s%d", i ? "," : "", victim_pid[i]);
        snprintf(sql, sizeof(sql), "SELECT count(*) FROM pg_stat_activity WHERE wait_event = "
                 "'PgSleep' AND pid IN (%s)", pids);
        asleep = killer_query(sql);
    }
    HK_CHECK(asleep == KILLED, "%ld of %d victims asleep in the server", asleep, KILLED);
    /* (a WHERE would not keep the others' backends safe: its order is the
     * planner's) */
    snprintf(sql, sizeof(sql), "SELECT count(*) FILTER (WHERE pg_terminate_backend(p)) "
             "FROM unnest(ARRAY[%s]) p", pids);
    t_kill = aco_rt_now();
    long ended = killer_query(sql);
    HK_CHECK(ended == KILLED, "pg_terminate_backend ended %ld of %d", ended, KILLED);
    /* none may stay in PQexec: a second is long for a closed socket */
    int64_t latest = 0;
    for (int i = 0; i < KILLED; i++) {
        int r = aco_rt_join(cos[i], t_kill + 1000 * HK_MS);
        HK_CHECK(r == 0, "victim %d still in PQexec 1 s after its backend ended (%s)", i,
                 strerror(-r));
        if (t_victim_back[i] - t_kill > latest) latest = t_victim_back[i] - t_kill;
    }
    killed_ns = latest;
    /* their backends gone before the next part: its bounds are not for a
     * thread that waits for a CPU while 20 processes exit */
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM pg_stat_activity WHERE pid IN (%s)", pids);
    give_up = aco_rt_in_ms(5000);
    while ((asleep = killer_query(sql)) > 0 && aco_rt_now() < give_up) aco_rt_sleep(5 * HK_MS);
    HK_CHECK(asleep == 0, "%ld killed backends still there after 5 s", asleep);
    printf("killed: %d cos in pg_sleep(30), waited %.1f ms for them, every PQexec failed by "
           "%.1f ms after pg_terminate_backend: \"%s\"\n", KILLED, (t_kill - t0) / 1e6,
           latest / 1e6, kill_msg);
    HK_CHECK(failures == 0, "%d failures", failures);
}

/* ------------------------------------------------------------------------ */
/* Cancel: a co cancelled inside PQexec                                     */
/* ------------------------------------------------------------------------ */

static hk_cancel_t cancel;
static int64_t cancel_late;
static int cancel_status, in_exec;
static char cancel_msg[256];

static void cancelled_co(void* arg) {
    PGconn* c = (PGconn*)arg;
    in_exec = 1;
    PGresult* r = PQexec(c, "SELECT pg_sleep(10)");
    hk_return_mark(&cancel);
    cancel_status = PQresultStatus(r);
    snprintf(cancel_msg, sizeof(cancel_msg), "%s", PQerrorMessage(c));
    cancel_msg[strcspn(cancel_msg, "\n")] = 0;
    PQclear(r);
    /* The server sleeps on: ask it to stop, under the shield (the cancel
     * would fail the connection PQcancel makes).  The connection is out of
     * step with the server now, though PQstatus says OK (the next PQexec
     * would get this query's answer): only PQfinish is left for it. */
    aco_rt_cancel_shield(1);
    char err[256];
    PGcancel* pc = PQgetCancel(c);
    if (pc == NULL || !PQcancel(pc, err, sizeof(err))) fail(-1, "PQcancel", pc ? err : "no memory");
    PQfreeCancel(pc);
    aco_rt_cancel_shield(0);
    PQfinish(c);
}

static void cancel_one(void) {
    PGconn* c = connect_db(-1);
    HK_CHECK(c != NULL, "no connection to cancel");
    hk_ticker_t tick = {0};
    aco_rt_co_t* tc = aco_rt_spawn(NULL, hk_ticker_co, &tick);
    aco_rt_co_t* victim = aco_rt_spawn(NULL, cancelled_co, c);
    HK_CHECK(tc && victim, "spawn: %s", strerror(errno));
    aco_rt_sleep(30 * HK_MS);
    HK_CHECK(in_exec, "the co to cancel is not in PQexec after 30 ms");
    hk_cancel_mark(&cancel);
    aco_rt_cancel(victim);
    HK_CHECK(aco_rt_join(victim, aco_rt_in_ms(5000)) == 0, "the cancelled co did not end");
    tick.stop = 1;
    aco_rt_join(tc, -1);
    printf("cancel: PQexec says %s: \"%s\"\n", PQresStatus(cancel_status), cancel_msg);
    HK_CHECK(cancel_status == PGRES_FATAL_ERROR, "PQexec of the cancelled co says %s",
             PQresStatus(cancel_status));
    hk_cancel_check("cancel: PQexec", &cancel, &tick);
    HK_CHECK(failures == 0, "%d failures", failures);
    cancel_late = tick.max_late;
}

/* ------------------------------------------------------------------------ */

static int want_hooks = -1, overlap_result;

static void main_co(void* arg) {
    (void)arg;
    overlap_result = overlap();
    if (!want_hooks) return;
    HK_CHECK(overlap_result == 0, "the overlap check failed");
    killed();
    cancel_one();
}

int main(int argc, char** argv) {
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--hooks") == 0) want_hooks = 1;
        else if (strcmp(argv[i], "--no-hooks") == 0) want_hooks = 0;
        else if (strcmp(argv[i], "--db") == 0 && i + 1 < argc) conninfo = argv[++i];
        else if (strcmp(argv[i], "--clients") == 0 && i + 1 < argc) clients = atoi(argv[++i]);
        else want_hooks = -2;
    }
    if (want_hooks < 0 || conninfo == NULL || clients < 1) {
        fprintf(stderr, "usage: hook_pq --hooks|--no-hooks --db CONNINFO [--clients N]\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);   /* in order with stderr's */
    hk_mode_check(want_hooks);
    outside_cos();
    if (want_hooks) {
        killer = connect_db(-1);
        HK_CHECK(killer != NULL, "no killer connection");
    }
    aco_rt_sched_t* s = aco_rt_sched_new(NULL);
    HK_CHECK(s != NULL, "aco_rt_sched_new: %s", strerror(errno));
    aco_rt_co_t* m = aco_rt_spawn(s, main_co, NULL);
    HK_CHECK(m != NULL, "spawn: %s", strerror(errno));
    aco_rt_detach(m);
    int r = aco_rt_sched_run(s);
    HK_CHECK(r == 0, "aco_rt_sched_run: %d", r);
    char be[16];
    snprintf(be, sizeof(be), "%s", aco_rt_backend_name(s));
    aco_rt_sched_free(s);
    if (!want_hooks) {
        printf("result: %s, no hooks: %d queries took %.1f ms (one: %.1f ms)\n", be, clients,
               overlap_ns / 1e6, one_query / 1e6);
        return overlap_result ? 1 : 0;
    }
    /* made outside cos, used in one, and outside again */
    HK_CHECK(killer_query("SELECT 1") == 1, "the killer's connection is broken after the cos");
    PQfinish(killer);
    int64_t calls = cancel.calls_cancel < 0 ? -1 : cancel.calls_return - cancel.calls_cancel;
    printf("result: %s, hooks live: %d queries overlapped in %.1f ms (one: %.1f ms); %d killed "
           "queries failed within %.1f ms; the cancelled PQexec returned in %.2f ms (%" PRId64
           " hooked calls, %.2f ms CPU, others waited %.2f ms)\n", be, clients, overlap_ns / 1e6,
           one_query / 1e6, KILLED, killed_ns / 1e6, (cancel.t_return - cancel.t_cancel) / 1e6,
           calls, (cancel.cpu_return - cancel.cpu_cancel) / 1e6, cancel_late / 1e6);
    return 0;
}
