/* hook_sqlite.c - Debian's libsqlite3, unchanged, in cos of one thread on
 * a slow disk, through the syscall hooks' file calls.  --dir names a
 * directory on a file system that holds each read and each fdatasync for
 * a while (tests/check_hook_sqlite.sh mounts rt/tests/slowfs.c there, 50
 * ms each).  In order:
 *
 *   outside cos  (--outside) one database made and read with no scheduler
 *                anywhere: libsqlite3 as without the hooks;
 *   cos          --cos cos (100), each with a database of its own on the
 *                slow disk: create a table, insert 50 rows in one
 *                transaction (a journal, fdatasyncs), read them back with
 *                a query that reads the file again, check the sum; a
 *                ticker co on the same thread sleeps 1 ms at a time and
 *                keeps the longest it waited past its wake-up: at most 5 ms
 *                more than a plain thread of the process that sleeps 1 ms
 *                at a time meanwhile waited (the machine's own lateness:
 *                on a 2-CPU virtual machine under this load it is seen
 *                at 5 to 30 ms now and then); a held read or sync in the
 *                thread would be the file system's whole delay.  Every
 *                co's rows checked.
 *
 *   hook_sqlite --hooks|--no-hooks --dir DIR [--cos N] [--outside]
 *
 * --hooks: the hooks must be live (aco_rt_hooks_active).  --no-hooks: they
 * must not be, and the ticker check must fail ("the ticker waited"), exit
 * status 1: the check can fail.  Exit status 0 only if every check passed.
 */
#define _GNU_SOURCE
#include "hook_lib.h"

#include <pthread.h>
#include <sqlite3.h>
#include <unistd.h>

#define ROWS 50

static const char* dir;
static int cos = 100, failures, done, outside;

static void fail(int id, const char* what, const char* detail) {
    failures++;
    fprintf(stderr, "hook_sqlite: co %d: %s%s%s\n", id, what, detail ? ": " : "",
            detail ? detail : "");
}

/* Database id: made anew, ROWS rows in one transaction, read back: 0 if the
 * sum is right. */
static int one_db(int id) {
    char path[512];
    snprintf(path, sizeof path, "%s/c%d.db", dir, id);
    unlink(path);
    sqlite3* db = NULL;
    if (sqlite3_open(path, &db) != SQLITE_OK) {
        fail(id, "open", db ? sqlite3_errmsg(db) : "no memory");
        sqlite3_close(db);
        return -1;
    }
    sqlite3_busy_timeout(db, 10000);
    char* err = NULL;
    /* journal_mode DELETE (the default) with synchronous FULL: each commit
     * writes and syncs a journal, then the database; the page cache is
     * kept small so that the read back reads the file */
    if (sqlite3_exec(db, "PRAGMA synchronous=FULL; PRAGMA cache_size=2;"
                         "CREATE TABLE t(k INTEGER PRIMARY KEY, v INTEGER, pad TEXT);",
                     NULL, NULL, &err) != SQLITE_OK) {
        fail(id, "create", err);
        sqlite3_free(err);
        sqlite3_close(db);
        return -1;
    }
    sqlite3_stmt* ins = NULL;
    int ok = sqlite3_exec(db, "BEGIN", NULL, NULL, &err) == SQLITE_OK &&
             sqlite3_prepare_v2(db, "INSERT INTO t(v, pad) VALUES(?, zeroblob(300))", -1, &ins,
                                NULL) == SQLITE_OK;
    for (int i = 0; ok && i < ROWS; i++) {
        sqlite3_bind_int(ins, 1, id * 1000 + i);
        ok = sqlite3_step(ins) == SQLITE_DONE && sqlite3_reset(ins) == SQLITE_OK;
    }
    sqlite3_finalize(ins);
    if (!ok || sqlite3_exec(db, "COMMIT", NULL, NULL, &err) != SQLITE_OK) {
        fail(id, "insert", err ? err : sqlite3_errmsg(db));
        sqlite3_free(err);
        sqlite3_close(db);
        return -1;
    }
    sqlite3_close(db);          /* the read back opens the file anew */
    db = NULL;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        fail(id, "reopen", db ? sqlite3_errmsg(db) : "no memory");
        sqlite3_close(db);
        return -1;
    }
    sqlite3_stmt* q = NULL;
    long long sum = -1, n = -1;
    if (sqlite3_prepare_v2(db, "SELECT count(*), sum(v) FROM t", -1, &q, NULL) == SQLITE_OK &&
        sqlite3_step(q) == SQLITE_ROW) {
        n = sqlite3_column_int64(q, 0);
        sum = sqlite3_column_int64(q, 1);
    }
    sqlite3_finalize(q);
    long long want = (long long)id * 1000 * ROWS + (long long)ROWS * (ROWS - 1) / 2;
    int r = 0;
    if (n != ROWS || sum != want) {
        char m[128];
        snprintf(m, sizeof m, "%lld rows summing to %lld, expected %d rows, %lld", n, sum, ROWS,
                 want);
        fail(id, "read back", n < 0 ? sqlite3_errmsg(db) : m);
        r = -1;
    }
    sqlite3_close(db);
    unlink(path);
    return r;
}

static hk_ticker_t ticker;

/* The machine's own lateness: a thread that sleeps 1 ms at a time
 * (clock_nanosleep, past the hooks: not in a co) while the cos run. */
static volatile int floor_stop;
static int64_t floor_late;
static void* floor_thread(void* arg) {
    (void)arg;
    while (!floor_stop) {
        struct timespec now, due;
        clock_gettime(CLOCK_MONOTONIC, &now);
        due = now;
        due.tv_nsec += 1000000;
        if (due.tv_nsec >= 1000000000) due.tv_sec++, due.tv_nsec -= 1000000000;
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &due, NULL) == EINTR) {}
        clock_gettime(CLOCK_MONOTONIC, &now);
        int64_t late = (int64_t)(now.tv_sec - due.tv_sec) * 1000000000 + (now.tv_nsec - due.tv_nsec);
        if (late > floor_late) floor_late = late;
    }
    return NULL;
}

/* This thread's time waiting for a CPU (run queue), ns: /proc's schedstat. */
static int64_t run_delay_ns(void) {
    long long run = 0, wait = 0;
    FILE* f = fopen("/proc/thread-self/schedstat", "r");
    if (f == NULL) return 0;
    if (fscanf(f, "%lld %lld", &run, &wait) != 2) wait = 0;
    fclose(f);
    return wait;
}

static void db_co(void* arg) {
    if (one_db((int)(intptr_t)arg) == 0) done++;
}

static void main_co(void* arg) {
    (void)arg;
    aco_rt_co_t* t = aco_rt_spawn(NULL, hk_ticker_co, &ticker);
    aco_rt_co_t** c = calloc((size_t)cos, sizeof(*c));
    HK_CHECK(t && c, "spawn");
    for (int i = 0; i < cos; i++) {
        c[i] = aco_rt_spawn(NULL, db_co, (void*)(intptr_t)i);
        HK_CHECK(c[i] != NULL, "spawn");
    }
    for (int i = 0; i < cos; i++) aco_rt_join(c[i], -1);
    ticker.stop = 1;
    aco_rt_join(t, -1);
    free(c);
}

int main(int argc, char** argv) {
    int want_hooks = -1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--hooks") == 0) want_hooks = 1;
        else if (strcmp(argv[i], "--no-hooks") == 0) want_hooks = 0;
        else if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc) dir = argv[++i];
        else if (strcmp(argv[i], "--cos") == 0 && i + 1 < argc) cos = atoi(argv[++i]);
        else if (strcmp(argv[i], "--outside") == 0) outside = 1;
        else want_hooks = -2;
    }
    if (want_hooks < 0 || dir == NULL || cos < 1) {
        fprintf(stderr, "usage: hook_sqlite --hooks|--no-hooks --dir DIR [--cos N] [--outside]\n");
        return 2;
    }
    hk_mode_check(want_hooks);
    HK_CHECK(sqlite3_threadsafe() != 0, "libsqlite3 built without threads");

    /* outside cos: libsqlite3 as without the hooks */
    int64_t t0 = aco_rt_now();
    if (outside) {
        HK_CHECK(one_db(-1) == 0, "outside cos");
        printf("hook_sqlite: outside cos, one database: %.1f ms\n", (aco_rt_now() - t0) / 1e6);
    }

    /* 24 helper threads (io_uring workers): 24 of the cos wait on the disk
     * at once (the default 8 would take 14 s on epoll; a thread per co
     * wakes them in bursts of 100, whose turns keep the ticker waiting) */
    HK_CHECK(aco_rt_offload_limits(24, 0) == 0, "aco_rt_offload_limits");
    aco_rt_sched_t* s = aco_rt_sched_new(NULL);
    HK_CHECK(s != NULL, "aco_rt_sched_new: %s", strerror(errno));
    HK_CHECK(aco_rt_spawn(s, main_co, NULL) != NULL, "spawn");
    pthread_t fl;
    HK_CHECK(pthread_create(&fl, NULL, floor_thread, NULL) == 0, "pthread_create");
    t0 = aco_rt_now();
    int64_t cpu0 = hk_cpu_ns(), rq0 = run_delay_ns();
    int r = aco_rt_sched_run(s);
    int64_t cpu = hk_cpu_ns() - cpu0, rq = run_delay_ns() - rq0;
    floor_stop = 1;
    pthread_join(fl, NULL);
    HK_CHECK(r == 0, "aco_rt_sched_run: %d", r);
    printf("result: %s, %d cos x (create, %d rows in a transaction, read back): %d done, "
           "%d failures, %.1f ms (the thread's CPU %.1f ms, waiting for a CPU %.1f ms); the ticker "
           "(%lld ticks) waited at most %.2f ms, a plain thread %.2f ms\n",
           aco_rt_backend_name(s), cos, ROWS, done, failures, (aco_rt_now() - t0) / 1e6, cpu / 1e6,
           rq / 1e6, (long long)ticker.ticks, ticker.max_late / 1e6, floor_late / 1e6);
    aco_rt_sched_free(s);
    HK_CHECK(failures == 0 && done == cos, "%d failures", failures);
    HK_CHECK(ticker.max_late <= floor_late + 5 * HK_MS,
             "the ticker waited %.2f ms (at most 5 ms more than the plain thread's %.2f ms)",
             ticker.max_late / 1e6, floor_late / 1e6);
    return 0;
}
