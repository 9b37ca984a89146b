/*
 * hook_main.c - a program on the syscall hooks, for the packaging checks:
 * tests/check_cmake.sh links it through aco::hook (find_package,
 * add_subdirectory) and through pkg-config libaco_hook, always under
 * -Wl,--as-needed.  Like a program whose blocking calls are made by its
 * libraries (hiredis, libcurl), it names none of the hooked functions: it
 * finds pipe, read, write, fcntl and close by name at run time, where a library
 * would reach them, so nothing it links against needs libaco_hook and
 * --as-needed drops a plainly linked -laco_hook.  It says whether the hooks
 * are live (aco_rt_hooks_active); if they are, one co calls read(2) on an
 * empty blocking pipe and another co writes it later: the reader parks
 * and the thread runs the writer (without the hooks the read would block
 * the thread for good: an alarm ends that).  Exit status 0 iff the hooks
 * are live and the read gets the bytes, after printing "hook_consumer: ok".
 */
#define _GNU_SOURCE
#include "aco_rt.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int failures;

static void expect(int ok, const char* what) {
    if (!ok) {
        fprintf(stderr, "hook_consumer: FAIL: %s\n", what);
        failures++;
    }
}

/* What a library's call to these names reaches. */
static ssize_t (*read_fn)(int, void*, size_t);
static ssize_t (*write_fn)(int, const void*, size_t);
static int (*fcntl_fn)(int, int, ...);
static int (*close_fn)(int);
static int (*pipe_fn)(int*);

static int fds[2];
static int reader_in_read, reader_done;

static void reader(void* arg) {
    (void)arg;
    char buf[8] = {0};
    reader_in_read = 1;
    ssize_t n = read_fn(fds[0], buf, sizeof(buf) - 1);
    reader_done = 1;
    expect(n == 4 && memcmp(buf, "ping", 4) == 0, "read(2) in a co gets \"ping\"");
}

static void writer(void* arg) {
    (void)arg;
    aco_rt_sleep(1000000);      /* the reader is in read(2) by now */
    expect(reader_in_read && !reader_done, "the reader parked in read(2) and let the writer run");
    expect(write_fn(fds[1], "ping", 4) == 4, "write(2) to the pipe");
}

int main(void) {
    int live = aco_rt_hooks_active();
    printf("hook_consumer: aco_rt_hooks_active() = %d\n", live);
    if (live != 1) {
        /* The co's read would block the thread: nothing more to see. */
        fprintf(stderr, "hook_consumer: FAIL: the hooks are not live (was libaco_hook dropped at link time?)\n");
        return 1;
    }
    *(void**)&read_fn = dlsym(RTLD_DEFAULT, "read");
    *(void**)&write_fn = dlsym(RTLD_DEFAULT, "write");
    *(void**)&fcntl_fn = dlsym(RTLD_DEFAULT, "fcntl");
    *(void**)&close_fn = dlsym(RTLD_DEFAULT, "close");
    *(void**)&pipe_fn = dlsym(RTLD_DEFAULT, "pipe");
    expect(read_fn && write_fn && fcntl_fn && close_fn, "read, write, fcntl and close by name");
    alarm(30);
    aco_rt_sched_t* s = aco_rt_sched_new(NULL);
    expect(s != NULL && pipe_fn(fds) == 0, "a scheduler and a pipe");
    if (failures) return 1;
    aco_rt_spawn(s, reader, NULL);
    aco_rt_spawn(s, writer, NULL);
    expect(aco_rt_sched_run(s) == 0, "aco_rt_sched_run");
    expect(reader_done, "the reader finished");
    /* The runtime's O_NONBLOCK stays its own (docs/hooks.md). */
    expect(!(fcntl_fn(fds[0], F_GETFL) & O_NONBLOCK), "F_GETFL shows the pipe blocking, as the program left it");
    close_fn(fds[0]);
    close_fn(fds[1]);
    aco_rt_sched_free(s);
    if (failures) return 1;
    printf("hook_consumer: ok\n");
    return 0;
}
