/* test_port: the port of a pthreads program (port_demo.c) by renaming alone.
 *
 * make.sh compiles port_demo.c twice: port_main_pthreads on real pthreads,
 * port_main_aco with -include aco_rt_pthread_names.h (every pthread_ name
 * becomes aco_rt_pthread_'s).  Each runs with its stdout in a file; both
 * must exit 0 and print exactly the expected text.  The co build runs
 * through aco_rt_pthread_run_main on each backend, once on a scheduler
 * made for it and once on the thread's own, and twice in a row (the
 * program's statics, once control included, stay as the first run left
 * them, as they would in one process).
 */
#include "rt_test.h"
#include "../aco_rt_pthread.h"

int port_main_pthreads(int argc, char** argv);
int port_main_aco(int argc, char** argv);

static const char expected[] =
    "produced 6000, consumed 6000\n"
    "sum 18003000, expected 18003000\n"
    "tallies flushed by the key's destructor: 4 of 4\n"
    "once ran 1 time(s); buffer within its 8 slots: yes\n";

static char* argv0[] = {(char*)"port_demo", NULL};

/* fn() with stdout going to a file: its result, the text in out. */
static int captured(int (*fn)(void), char* out, size_t cap) {
    fflush(stdout);
    FILE* f = tmpfile();
    CHECK(f != NULL);
    int saved = dup(1);
    CHECK_GE(saved, 0);
    CHECK_EQ(dup2(fileno(f), 1), 1);
    int rc = fn();
    fflush(stdout);
    CHECK_EQ(dup2(saved, 1), 1);
    close(saved);
    rewind(f);
    size_t n = fread(out, 1, cap - 1, f);
    out[n] = '\0';
    fclose(f);
    return rc;
}

static int on_pthreads(void) { return port_main_pthreads(1, argv0); }
static int on_cos(void) { return aco_rt_pthread_run_main(port_main_aco, 1, argv0); }

static void check_run(int (*fn)(void), const char* what) {
    char out[4096];
    int rc = captured(fn, out, sizeof(out));
    if (rc != 0 || strcmp(out, expected) != 0) {
        fprintf(stderr, "%s: exit %d, printed:\n%s---\nexpected:\n%s", what, rc, out, expected);
        CHECK(0);
    }
}

/* On the thread's scheduler (made by test_on_backends). */
static void body(aco_rt_sched_t* s, void* arg) {
    (void)arg;
    check_run(on_cos, "cos, the thread's scheduler");
    check_run(on_cos, "cos, the thread's scheduler, again");
    aco_rt_stats_t st;
    aco_rt_stats(s, &st);
    CHECK_EQ(st.cos_alive, 0);
}

int main(void) {
    check_run(on_pthreads, "pthreads");
    check_run(on_pthreads, "pthreads, again");
    test_on_backends(NULL, body, NULL);
    /* a scheduler of its own, on each backend */
    int bs[8];
    int n = test_backends(bs, 8);
    for (int i = 0; i < n; i++) {
        setenv("ACO_RT_BACKEND", test_backend_str(bs[i]), 1);
        check_run(on_cos, test_backend_str(bs[i]));
    }
    return 0;
}
