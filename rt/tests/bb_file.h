/* bb_file.h - what the black-box file tests (test_file_bb_*.c) share:
 * a scratch directory, a co run on a fresh scheduler, and a check
 * that a runtime call gives what the plain system call gives. */
#ifndef BB_FILE_H
#define BB_FILE_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "rt_test.h"

/* paths are built with snprintf into PATH_MAX buffers: never cut short
 * here (gcc's -Wformat-truncation cannot know; clang has no such group) */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wformat-truncation"
#endif

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/syscall.h>

/* The scratch directory (mkdtemp under $TMPDIR or /tmp), removed at exit. */
static char bb_dir[320];

static void bb_rm_tree(const char* p) {
    DIR* d = opendir(p);
    if (d == NULL) {
        unlink(p);
        return;
    }
    struct dirent* e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        char q[PATH_MAX];
        snprintf(q, sizeof(q), "%s/%s", p, e->d_name);
        struct stat st;
        if (lstat(q, &st) == 0 && S_ISDIR(st.st_mode)) bb_rm_tree(q);
        else unlink(q);
    }
    closedir(d);
    rmdir(p);
}

static pid_t bb_dir_owner;
static void bb_dir_cleanup(void) {
    if (bb_dir[0] && getpid() == bb_dir_owner) bb_rm_tree(bb_dir);
}

static __attribute__((unused)) void bb_mkdir(void) {
    const char* t = getenv("TMPDIR");
    snprintf(bb_dir, sizeof(bb_dir), "%s/bb_file_XXXXXX", t && *t ? t : "/tmp");
    CHECK(mkdtemp(bb_dir) != NULL);
    bb_dir_owner = getpid();
    atexit(bb_dir_cleanup);
}

/* out = bb_dir/name */
static inline char* bb_path(char* out, const char* name) {
    snprintf(out, PATH_MAX, "%s/%s", bb_dir, name);
    return out;
}

/* The plain call's result as the runtime says it: r, or -errno. */
#define BB_SYS(expr) ({ long r_ = (long)(expr); r_ < 0 ? -(long)errno : r_; })

/* fn(arg) in a detached co of a fresh scheduler on the backend under test
 * (opts o: NULL for defaults); the run must end with 0. */
static inline void bb_run(const aco_rt_opts_t* o, aco_rt_fn_t fn, void* arg) {
    aco_rt_sched_t* s = test_sched_on(test_backend_id, o);
    test_go(s, fn, arg);
    aco_rt_sched_free(s);
}


/* A file of n bytes, byte i being (i * 7 + seed) & 0xff: its descriptor
 * (O_RDWR). */
/* Is p on the running co's share stack?  Not when ASan's
 * detect_stack_use_after_return moved the co's locals to its fake stack
 * (heap): then the share-stack rules do not apply to them. */
static inline int bb_on_share(const void* p) {
    aco_t* co = aco_get_co();
    const aco_share_stack_t* ss = co ? co->share_stack : NULL;
    return ss && (const char*)p >= (const char*)ss->ptr &&
           (const char*)p < (const char*)ss->ptr + ss->sz;
}

static inline unsigned char bb_byte(size_t i, unsigned seed) {
    return (unsigned char)((i * 7 + seed) & 0xff);
}
static inline int bb_make_file(const char* name, size_t n, unsigned seed) {
    char p[PATH_MAX];
    int fd = open(bb_path(p, name), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    CHECK_GE(fd, 0);
    unsigned char* b = malloc(n ? n : 1);
    CHECK(b != NULL);
    for (size_t i = 0; i < n; i++) b[i] = bb_byte(i, seed);
    CHECK_EQ(pwrite(fd, b, n, 0), (ssize_t)n);
    free(b);
    return fd;
}

/* Run body once per backend of $ACO_RT_TEST_BACKENDS (test_backend_id set,
 * a fresh scheduler per bb_run). */
static inline void bb_each_backend(void (*body)(void)) {
    int bs[8];
    int n = test_backends(bs, 8);
    for (int i = 0; i < n; i++) {
        test_backend_id = bs[i];
        test_backend_label = test_backend_str(bs[i]);
        body();
        test_backend_label = "";
    }
}

/* body() in a child process for each backend of $ACO_RT_TEST_BACKENDS,
 * and for io_uring once more with $ACO_RT_URING_OFF=all (the helper way
 * of every file call), all at once: for bodies whose time goes to
 * waiting.  Any child that fails fails the test. */
static inline void bb_apart(void (*body)(void)) {
    int bs[8];
    int n = test_backends(bs, 8);
    pid_t pids[16];
    const char* labels[16];
    int k = 0;
    fflush(NULL);
    for (int i = 0; i < n; i++)
        for (int off = 0; off < 2; off++) {
            if (off && bs[i] != ACO_RT_BACKEND_URING) continue;
            labels[k] = off ? "uring+helpers" : test_backend_str(bs[i]);
            pid_t pid = fork();
            CHECK(pid >= 0);
            if (pid == 0) {
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                test_watchdog();
                if (off) {
                    setenv("ACO_RT_URING_OFF", "all", 1);
                    setenv("ACO_RT_QUIET", "1", 1);
                }
                test_backend_id = bs[i];
                test_backend_label = labels[k];
                if (bb_dir[0]) { /* a directory of its own, inside the test's */
                    size_t l = strlen(bb_dir);
                    snprintf(bb_dir + l, sizeof(bb_dir) - l, "/%s", labels[k]);
                    CHECK_EQ(mkdir(bb_dir, 0700), 0);
                }
                body();
                exit(0);
            }
            pids[k++] = pid;
        }
    alarm(0);
    int bad = 0;
    for (int i = 0; i < k; i++) {
        int st;
        while (waitpid(pids[i], &st, 0) < 0) CHECK_EQ(errno, EINTR);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "FAIL [%s]: status %#x\n", labels[i], st);
            bad++;
        }
    }
    if (bad) exit(1);
    test_watchdog();
}

#endif
