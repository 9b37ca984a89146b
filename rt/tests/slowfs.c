/* slowfs.c - a slow disk for tests: a FUSE file system that passes every
 * call through to a backing directory, except that the files a rule names
 * are slow to open, read, fsync or stat.  The tests of the runtime's file
 * hooks (rt/file.c, the offload pool) and of apps/aco_http need a file
 * whose read(2) takes seconds, to show that one co's blocked file call
 * does not stop the others: a delay device (dm-delay) is not available on
 * these machines; FUSE is.
 *
 *   slowfs [-s RULE]... [--ready FILE] [--log FILE] [FUSE options]
 *          BACKING_DIR MOUNTPOINT
 *
 *   RULE = PATTERN:KEY=MS[,KEY=MS]...   KEY = open | read | fsync | stat
 *
 * A file's path relative to the root ("slow.bin", "dir/a.db") is matched
 * against each rule's PATTERN with fnmatch(3), flags 0 (so '*' matches '/'
 * too: "*.db" names every .db file at any depth, "*" every file); the
 * first rule that matches applies, the others are not looked at (so
 * "-s '*-shm:' -s '*.db*:read=20'" exempts the -shm files).  Rules apply
 * to files, never to directories.  The keys:
 *   open=MS   open(2) and creat(2) of the file wait MS ms;
 *   read=MS   every read request waits MS ms.  Such files are opened with
 *             direct_io and without the page cache, so every read(2),
 *             pread(2), readv(2) of a client reaches slowfs and waits (a
 *             large one is split into requests of at most 1 MiB, each
 *             waiting).  They cannot be mmap()ed MAP_SHARED (ENODEV;
 *             MAP_PRIVATE works), so SQLite in WAL mode fails (disk I/O
 *             error) if the -shm file has a read rule: exempt it;
 *   fsync=MS  fsync(2) and fdatasync(2) wait MS ms (close(2), that is
 *             flush, does not);
 *   stat=MS   getattr of the file waits MS ms, and attributes are then
 *             not cached at all (attr_timeout=0 for the whole mount), so
 *             every stat(2) waits (the first of a name twice: its lookup
 *             does a getattr too).
 * Files no rule names use the page cache as usual.  A wait is a sleep in
 * the worker thread of that one request: the loop is libfuse's
 * multithreaded one (up to 256 threads unless -o max_threads=N; libfuse's
 * own default, 10, would let 10 held reads stop everything), so other
 * requests -- a stat, a write, a read of another file or of the same file
 * by another thread -- are served meanwhile.
 *
 * What a test must know of a slow read (seen on Linux 6.18):
 *   - sendfile(2) and splice(2) from a direct_io file go through the page
 *     cache all the same: readahead requests of 128 KiB, each waiting,
 *     several at once; what they brought is then served from the cache,
 *     without a wait, until the file is opened again.  So a sendfile of a
 *     read=MS file is slow once per open, not once per call (the bytes
 *     are right);
 *   - preadv2(RWF_NOWAIT) fails at once with EOPNOTSUPP on every FUSE
 *     file, slow or not (FUSE has no non-blocking reads), so a caller
 *     that tries it first falls back to its blocking way;
 *   - a client killed (SIGKILL) during a wait does not cut it short: the
 *     kernel keeps the dying process until slowfs answers (no -o intr).
 *
 *   --ready FILE  once the mount is live (statfs of MOUNTPOINT says FUSE),
 *                 write "ready\n" to FILE (written aside and renamed, so
 *                 a reader never sees it half done).  A test may instead
 *                 poll `stat -f -c %T MOUNTPOINT` until it prints
 *                 "fuseblk" (some coreutils print "fuse").
 *   --log FILE    append "hold OP PATH MS" to FILE when a wait starts
 *                 (OP one of open, create, read, fsync, fdatasync, stat),
 *                 one write(2) a line: the proof that the delay happened.
 * Other options ("-o max_threads=N", "-d" for libfuse's debug output) go
 * to libfuse, less its -s (single thread), which is slowfs' rule here;
 * slowfs always runs in the foreground.  SIGTERM, SIGINT and SIGHUP
 * unmount and exit 0 (even as a shell's background job, which starts
 * with SIGINT ignored).  POSIX locks (fcntl F_SETLK, which SQLite needs)
 * and flock are done by the kernel, locally, as slowfs implements
 * neither.  A file unlinked (or renamed over) while open is, as libfuse
 * does it, renamed to .fuse_hiddenNNN in its directory until the last
 * close: readdir shows it meanwhile and rmdir of the directory fails
 * with ENOTEMPTY.  No xattrs.  Run as root (without allow_other only the
 * mounting user may enter the mount).
 *
 * Example: a 2 s read of big.bin, 0.5 s fsyncs of the databases:
 *
 *   unshare -m --propagation private bash -c '
 *       slowfs -s "big.bin:read=2000" -s "*.db*:fsync=500" \
 *              --ready /var/tmp/t/ready --log /var/tmp/t/log \
 *              /var/tmp/t/back /var/tmp/t/mnt &
 *       while [ ! -e /var/tmp/t/ready ]; do sleep 0.01; done
 *       ./the_test /var/tmp/t/mnt
 *       kill $!; wait $!'
 *
 * Leftover mounts: a slowfs killed with SIGKILL leaves a dead mount
 * ("Transport endpoint is not connected") behind.  Run it in a private
 * mount namespace, as above (`unshare -m --propagation private`): the
 * mount lives in that namespace only and goes away with its last process,
 * whatever happens.  Otherwise `trap 'umount -l MOUNTPOINT' EXIT` in the
 * test script.
 *
 * Build (libfuse3-dev, 3.12 or later):
 *   gcc -std=gnu11 -O2 -Wall -Wextra -Werror $(pkg-config --cflags fuse3) \
 *       rt/tests/slowfs.c $(pkg-config --libs fuse3) -o slowfs
 */
#define _GNU_SOURCE
#define FUSE_USE_VERSION 312
#include <fuse.h>
#include <fuse_lowlevel.h>    /* fuse_parse_cmdline */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define SLOWFS_FUSE_MAGIC 0x65735546L    /* FUSE_SUPER_MAGIC */
#define SLOWFS_MAX_THREADS 256u          /* libfuse's own default is 10 */

/* One -s rule; a delay of 0 is none. */
struct rule {
    char* pattern;
    int open_ms, read_ms, fsync_ms, stat_ms;
};

/* An open file: fi->fh points at one.  The delays are the rule's at open
 * time, so read/fsync/getattr need no path (libfuse passes NULL for the
 * calls on an open file: nullpath_ok). */
struct file {
    int fd;
    int read_ms, fsync_ms, stat_ms;
    char* rel;      /* for the log only */
};

static struct rule* rules;
static int nrules;
static int any_stat_rule;
static int root_fd = -1;        /* O_PATH of BACKING_DIR */
static int log_fd = -1;

static const struct rule no_rule = {NULL, 0, 0, 0, 0};

/* A path from libfuse ("/", "/a/b") made relative to root_fd (".",
 * "a/b"). */
static const char* rel(const char* path) {
    if (path == NULL) return NULL;
    while (*path == '/') path++;
    return *path ? path : ".";
}

static const struct rule* rule_for(const char* r) {
    if (r == NULL) return &no_rule;
    for (int i = 0; i < nrules; i++)
        if (fnmatch(rules[i].pattern, r, 0) == 0) return &rules[i];
    return &no_rule;
}

/* Hold this request ms ms, in its own worker thread. */
static void hold(const char* op, const char* r, int ms) {
    if (ms <= 0) return;
    if (log_fd >= 0) {
        char line[PATH_MAX + 64];
        int n = snprintf(line, sizeof line, "hold %s %s %d\n", op,
                         r ? r : "?", ms);
        if (n > (int)sizeof line - 1) n = (int)sizeof line - 1;
        ssize_t w = write(log_fd, line, (size_t)n);
        (void)w;
    }
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

static struct file* fh(const struct fuse_file_info* fi) {
    return fi ? (struct file*)(uintptr_t)fi->fh : NULL;
}

/* ---- the operations: each returns 0 (or a count) or -errno ---- */

static void* sf_init(struct fuse_conn_info* conn, struct fuse_config* cfg) {
    (void)conn;
    cfg->use_ino = 1;
    cfg->entry_timeout = 1.0;
    cfg->attr_timeout = any_stat_rule ? 0.0 : 1.0;
    cfg->negative_timeout = 0.0;
    /* Calls on an open file come with a NULL path and use the fd.  (Not
     * hard_remove: with it, fstat(2) of a file unlinked while open fails
     * with ESTALE, as the kernel sends that getattr without the fd.) */
    cfg->nullpath_ok = 1;
    return NULL;
}

static int sf_getattr(const char* path, struct stat* st,
                      struct fuse_file_info* fi) {
    struct file* f = fh(fi);
    const char* r = rel(path);
    int ms;
    if (f != NULL) {
        if (fstat(f->fd, st) != 0) return -errno;
        ms = f->stat_ms;
        if (r == NULL) r = f->rel;
    } else {
        if (r == NULL) return -ENOENT;
        if (fstatat(root_fd, r, st, AT_SYMLINK_NOFOLLOW) != 0) return -errno;
        ms = rule_for(r)->stat_ms;
    }
    if (!S_ISDIR(st->st_mode)) hold("stat", r, ms);
    return 0;
}

static int sf_access(const char* path, int mask) {
    return faccessat(root_fd, rel(path), mask, 0) == 0 ? 0 : -errno;
}

static int sf_readlink(const char* path, char* buf, size_t size) {
    if (size == 0) return -EINVAL;
    ssize_t n = readlinkat(root_fd, rel(path), buf, size - 1);
    if (n < 0) return -errno;
    buf[n] = '\0';
    return 0;
}

static int sf_mknod(const char* path, mode_t mode, dev_t rdev) {
    return mknodat(root_fd, rel(path), mode, rdev) == 0 ? 0 : -errno;
}

static int sf_mkdir(const char* path, mode_t mode) {
    return mkdirat(root_fd, rel(path), mode) == 0 ? 0 : -errno;
}

static int sf_unlink(const char* path) {
    return unlinkat(root_fd, rel(path), 0) == 0 ? 0 : -errno;
}

static int sf_rmdir(const char* path) {
    return unlinkat(root_fd, rel(path), AT_REMOVEDIR) == 0 ? 0 : -errno;
}

static int sf_symlink(const char* target, const char* path) {
    return symlinkat(target, root_fd, rel(path)) == 0 ? 0 : -errno;
}

static int sf_rename(const char* from, const char* to, unsigned int flags) {
    if (flags & ~(unsigned)(RENAME_NOREPLACE | RENAME_EXCHANGE)) return -EINVAL;
    return renameat2(root_fd, rel(from), root_fd, rel(to), flags) == 0
               ? 0 : -errno;
}

static int sf_link(const char* from, const char* to) {
    return linkat(root_fd, rel(from), root_fd, rel(to), 0) == 0 ? 0 : -errno;
}

static int sf_chmod(const char* path, mode_t mode, struct fuse_file_info* fi) {
    struct file* f = fh(fi);
    int rc = f ? fchmod(f->fd, mode) : fchmodat(root_fd, rel(path), mode, 0);
    return rc == 0 ? 0 : -errno;
}

static int sf_chown(const char* path, uid_t uid, gid_t gid,
                    struct fuse_file_info* fi) {
    struct file* f = fh(fi);
    int rc = f ? fchown(f->fd, uid, gid)
               : fchownat(root_fd, rel(path), uid, gid, AT_SYMLINK_NOFOLLOW);
    return rc == 0 ? 0 : -errno;
}

static int sf_truncate(const char* path, off_t size,
                       struct fuse_file_info* fi) {
    struct file* f = fh(fi);
    if (f != NULL) return ftruncate(f->fd, size) == 0 ? 0 : -errno;
    int fd = openat(root_fd, rel(path), O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return -errno;
    int rc = ftruncate(fd, size) == 0 ? 0 : -errno;
    close(fd);
    return rc;
}

static int sf_utimens(const char* path, const struct timespec tv[2],
                      struct fuse_file_info* fi) {
    struct file* f = fh(fi);
    int rc = f ? futimens(f->fd, tv)
               : utimensat(root_fd, rel(path), tv, AT_SYMLINK_NOFOLLOW);
    return rc == 0 ? 0 : -errno;
}

/* open and create: the backing file is opened with the client's flags,
 * less O_DIRECT (libfuse's buffers are not aligned for it), plus
 * O_CLOEXEC. */
static int open_common(const char* path, int flags, mode_t mode,
                       struct fuse_file_info* fi, const char* op) {
    const char* r = rel(path);
    const struct rule* ru = rule_for(r);
    struct file* f = malloc(sizeof *f);
    char* name = strdup(r);
    if (f == NULL || name == NULL) {
        free(f);
        free(name);
        return -ENOMEM;
    }
    hold(op, r, ru->open_ms);
    int fd = openat(root_fd, r, (flags & ~O_DIRECT) | O_CLOEXEC, mode);
    if (fd < 0) {
        int e = errno;
        free(f);
        free(name);
        return -e;
    }
    f->fd = fd;
    f->read_ms = ru->read_ms;
    f->fsync_ms = ru->fsync_ms;
    f->stat_ms = ru->stat_ms;
    f->rel = name;
    fi->fh = (uint64_t)(uintptr_t)f;
    if (ru->read_ms > 0) {
        fi->direct_io = 1;
        fi->keep_cache = 0;
    }
    return 0;
}

static int sf_open(const char* path, struct fuse_file_info* fi) {
    return open_common(path, fi->flags, 0, fi, "open");
}

static int sf_create(const char* path, mode_t mode,
                     struct fuse_file_info* fi) {
    return open_common(path, fi->flags | O_CREAT, mode, fi, "create");
}

static int sf_read(const char* path, char* buf, size_t size, off_t off,
                   struct fuse_file_info* fi) {
    struct file* f = fh(fi);
    (void)path;
    hold("read", f->rel, f->read_ms);
    size_t done = 0;
    while (done < size) {
        ssize_t n = pread(f->fd, buf + done, size - done, off + (off_t)done);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (done > 0) break;
            return -errno;
        }
        if (n == 0) break;
        done += (size_t)n;
    }
    return (int)done;
}

static int sf_write(const char* path, const char* buf, size_t size,
                    off_t off, struct fuse_file_info* fi) {
    struct file* f = fh(fi);
    (void)path;
    size_t done = 0;
    while (done < size) {
        ssize_t n = pwrite(f->fd, buf + done, size - done, off + (off_t)done);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (done > 0) break;
            return -errno;
        }
        done += (size_t)n;
    }
    return (int)done;
}

static int sf_statfs(const char* path, struct statvfs* sv) {
    (void)path;
    return fstatvfs(root_fd, sv) == 0 ? 0 : -errno;
}

static int sf_flush(const char* path, struct fuse_file_info* fi) {
    (void)path;
    /* What close(2) of the client's copy of the fd would do here; fast. */
    int d = dup(fh(fi)->fd);
    if (d < 0) return -errno;
    return close(d) == 0 ? 0 : -errno;
}

static int sf_release(const char* path, struct fuse_file_info* fi) {
    struct file* f = fh(fi);
    (void)path;
    close(f->fd);
    free(f->rel);
    free(f);
    return 0;
}

static int sf_fsync(const char* path, int datasync,
                    struct fuse_file_info* fi) {
    struct file* f = fh(fi);
    (void)path;
    hold(datasync ? "fdatasync" : "fsync", f->rel, f->fsync_ms);
    int rc = datasync ? fdatasync(f->fd) : fsync(f->fd);
    return rc == 0 ? 0 : -errno;
}

static int sf_opendir(const char* path, struct fuse_file_info* fi) {
    int fd = openat(root_fd, rel(path), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -errno;
    DIR* d = fdopendir(fd);
    if (d == NULL) {
        int e = errno;
        close(fd);
        return -e;
    }
    fi->fh = (uint64_t)(uintptr_t)d;
    return 0;
}

/* The whole directory at once (offsets 0): libfuse keeps it and hands it
 * out in pieces. */
static int sf_readdir(const char* path, void* buf, fuse_fill_dir_t fill,
                      off_t off, struct fuse_file_info* fi,
                      enum fuse_readdir_flags flags) {
    DIR* d = (DIR*)(uintptr_t)fi->fh;
    (void)path;
    (void)off;
    (void)flags;
    rewinddir(d);
    for (;;) {
        errno = 0;
        struct dirent* e = readdir(d);
        if (e == NULL) return errno ? -errno : 0;
        struct stat st;
        memset(&st, 0, sizeof st);
        st.st_ino = e->d_ino;
        st.st_mode = (mode_t)(DTTOIF(e->d_type));
        if (fill(buf, e->d_name, &st, 0, 0) != 0) return 0;
    }
}

static int sf_releasedir(const char* path, struct fuse_file_info* fi) {
    (void)path;
    closedir((DIR*)(uintptr_t)fi->fh);
    return 0;
}

static int sf_fsyncdir(const char* path, int datasync,
                       struct fuse_file_info* fi) {
    int fd = dirfd((DIR*)(uintptr_t)fi->fh);
    (void)path;
    int rc = datasync ? fdatasync(fd) : fsync(fd);
    return rc == 0 ? 0 : -errno;
}

static int sf_fallocate(const char* path, int mode, off_t off, off_t len,
                        struct fuse_file_info* fi) {
    (void)path;
    if (fi == NULL) return -EOPNOTSUPP;
    return fallocate(fh(fi)->fd, mode, off, len) == 0 ? 0 : -errno;
}

static off_t sf_lseek(const char* path, off_t off, int whence,
                      struct fuse_file_info* fi) {
    (void)path;
    if (fi == NULL) return -EOPNOTSUPP;
    off_t r = lseek(fh(fi)->fd, off, whence);
    return r < 0 ? -errno : r;
}

/* No lock, no flock: the kernel then does both locally. */
static const struct fuse_operations ops = {
    .init = sf_init,
    .getattr = sf_getattr,
    .access = sf_access,
    .readlink = sf_readlink,
    .mknod = sf_mknod,
    .mkdir = sf_mkdir,
    .unlink = sf_unlink,
    .rmdir = sf_rmdir,
    .symlink = sf_symlink,
    .rename = sf_rename,
    .link = sf_link,
    .chmod = sf_chmod,
    .chown = sf_chown,
    .truncate = sf_truncate,
    .utimens = sf_utimens,
    .open = sf_open,
    .create = sf_create,
    .read = sf_read,
    .write = sf_write,
    .statfs = sf_statfs,
    .flush = sf_flush,
    .release = sf_release,
    .fsync = sf_fsync,
    .opendir = sf_opendir,
    .readdir = sf_readdir,
    .releasedir = sf_releasedir,
    .fsyncdir = sf_fsyncdir,
    .fallocate = sf_fallocate,
    .lseek = sf_lseek,
};

/* ---- --ready ---- */

struct ready_arg {
    const char* mountpoint;
    const char* file;
    dev_t dev_before;       /* of MOUNTPOINT before the mount */
};

/* Waits (10 ms polls, at most a minute) until MOUNTPOINT is this FUSE
 * mount, then writes "ready\n" to FILE.tmp and renames it to FILE. */
static void* ready_main(void* p) {
    struct ready_arg* a = p;
    for (int i = 0; i < 6000; i++) {
        struct statfs sfs;
        struct stat st;
        if (statfs(a->mountpoint, &sfs) == 0 &&
            (long)sfs.f_type == SLOWFS_FUSE_MAGIC &&
            stat(a->mountpoint, &st) == 0 && st.st_dev != a->dev_before) {
            size_t n = strlen(a->file);
            char* tmp = malloc(n + 5);
            if (tmp == NULL) break;
            memcpy(tmp, a->file, n);
            memcpy(tmp + n, ".tmp", 5);
            int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
            if (fd < 0 || write(fd, "ready\n", 6) != 6 || close(fd) != 0 ||
                rename(tmp, a->file) != 0)
                fprintf(stderr, "slowfs: --ready %s: %s\n", a->file,
                        strerror(errno));
            free(tmp);
            return NULL;
        }
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
    fprintf(stderr, "slowfs: %s never became a FUSE mount\n", a->mountpoint);
    return NULL;
}

/* ---- options ---- */

static void usage(FILE* out) {
    fprintf(out,
            "usage: slowfs [-s PATTERN:KEY=MS[,KEY=MS]...]... [--ready FILE]\n"
            "              [--log FILE] [FUSE options] BACKING_DIR MOUNTPOINT\n"
            "  KEY: open, read (direct_io), fsync (and fdatasync), stat\n"
            "  the first rule whose fnmatch(3) PATTERN matches the path\n"
            "  relative to the root applies\n"
            "  --ready FILE  write \"ready\\n\" to FILE once mounted\n"
            "  --log FILE    append \"hold OP PATH MS\" per held request\n"
            "  (-s is slowfs' rule, not libfuse's single-thread option)\n");
}

static int parse_ms(const char* s, int* out) {
    char* end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end != '\0' || v < 0 || v > INT_MAX) return -1;
    *out = (int)v;
    return 0;
}

static int add_rule(const char* arg) {
    const char* colon = strrchr(arg, ':');
    if (colon == NULL || colon == arg) return -1;
    struct rule ru = no_rule;
    const char* pat = arg;
    while (*pat == '/' && pat < colon) pat++;
    ru.pattern = strndup(pat, (size_t)(colon - pat));
    char* keys = strdup(colon + 1);
    if (ru.pattern == NULL || keys == NULL) return -1;
    char* save = NULL;
    for (char* kv = strtok_r(keys, ",", &save); kv != NULL;
         kv = strtok_r(NULL, ",", &save)) {
        char* eq = strchr(kv, '=');
        if (eq == NULL) return -1;
        *eq = '\0';
        int* dst = strcmp(kv, "open") == 0    ? &ru.open_ms
                   : strcmp(kv, "read") == 0  ? &ru.read_ms
                   : strcmp(kv, "fsync") == 0 ? &ru.fsync_ms
                   : strcmp(kv, "stat") == 0  ? &ru.stat_ms
                                              : NULL;
        if (dst == NULL || parse_ms(eq + 1, dst) != 0) return -1;
    }
    free(keys);
    struct rule* nr = realloc(rules, sizeof *rules * (size_t)(nrules + 1));
    if (nr == NULL) return -1;
    rules = nr;
    rules[nrules++] = ru;
    if (ru.stat_ms > 0) any_stat_rule = 1;
    return 0;
}

int main(int argc, char** argv) {
    const char* ready_file = NULL;
    const char* log_file = NULL;
    const char* pos[2];
    int npos = 0, help = 0, max_threads_given = 0;
    struct fuse_args args = FUSE_ARGS_INIT(0, NULL);

    if (fuse_opt_add_arg(&args, argv[0]) != 0) return 1;
    for (int i = 1; i < argc; i++) {
        const char* a = argv[i];
        const char* val = NULL;
        if (strcmp(a, "-s") == 0 || strcmp(a, "--ready") == 0 ||
            strcmp(a, "--log") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "slowfs: %s needs an argument\n", a);
                return 2;
            }
            val = argv[++i];
        } else if (strncmp(a, "-s", 2) == 0) {
            val = a + 2;
            a = "-s";
        } else if (strncmp(a, "--ready=", 8) == 0) {
            val = a + 8;
            a = "--ready";
        } else if (strncmp(a, "--log=", 6) == 0) {
            val = a + 6;
            a = "--log";
        }
        if (val != NULL) {
            if (strcmp(a, "-s") == 0) {
                if (add_rule(val) != 0) {
                    fprintf(stderr, "slowfs: bad rule \"%s\"\n", val);
                    return 2;
                }
            } else if (strcmp(a, "--ready") == 0) {
                ready_file = val;
            } else {
                log_file = val;
            }
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            help = 1;
        } else if (a[0] == '-' && a[1] != '\0') {
            /* libfuse's: "-o OPTS", "-oOPTS", "-d", ... */
            if (fuse_opt_add_arg(&args, a) != 0) return 1;
            if (strcmp(a, "-o") == 0 && i + 1 < argc) {
                a = argv[++i];
                if (fuse_opt_add_arg(&args, a) != 0) return 1;
            }
            if (strstr(a, "max_threads=") != NULL) max_threads_given = 1;
        } else if (npos < 2) {
            pos[npos++] = a;
        } else {
            fprintf(stderr, "slowfs: one argument too many: %s\n", a);
            return 2;
        }
    }
    if (help) {
        usage(stdout);
        printf("\nlibfuse options:\n");
        fuse_cmdline_help();
        fuse_lib_help(&args);
        return 0;
    }
    if (npos != 2) {
        usage(stderr);
        return 2;
    }

    root_fd = open(pos[0], O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (root_fd < 0) {
        fprintf(stderr, "slowfs: %s: %s\n", pos[0], strerror(errno));
        return 1;
    }
    if (log_file != NULL) {
        log_fd = open(log_file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC,
                      0644);
        if (log_fd < 0) {
            fprintf(stderr, "slowfs: %s: %s\n", log_file, strerror(errno));
            return 1;
        }
    }
    if (fuse_opt_add_arg(&args, "-f") != 0 ||
        fuse_opt_add_arg(&args, pos[1]) != 0)
        return 1;

    struct fuse_cmdline_opts opts;
    if (fuse_parse_cmdline(&args, &opts) != 0) return 2;
    if (opts.mountpoint == NULL) {
        usage(stderr);
        return 2;
    }
    struct stat before;
    if (stat(opts.mountpoint, &before) != 0) {
        fprintf(stderr, "slowfs: %s: %s\n", opts.mountpoint, strerror(errno));
        return 1;
    }

    int ret = 1;
    struct fuse* f = fuse_new(&args, &ops, sizeof ops, NULL);
    if (f == NULL) goto out_args;
    if (fuse_mount(f, opts.mountpoint) != 0) goto out_destroy;
    /* libfuse leaves alone a signal that is ignored, and a non-interactive
     * shell starts its background jobs with SIGINT ignored: so that
     * `kill -INT` ends slowfs too, these three are made default first. */
    struct fuse_session* se = fuse_get_session(f);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    if (fuse_set_signal_handlers(se) != 0) goto out_unmount;

    static struct ready_arg ra;
    if (ready_file != NULL) {
        ra.mountpoint = opts.mountpoint;
        ra.file = ready_file;
        ra.dev_before = before.st_dev;
        /* Signals go to the main thread, as libfuse's workers block them
         * too: it is the one that sees the loop should end. */
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, &old);
        pthread_t t;
        int e = pthread_create(&t, NULL, ready_main, &ra);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (e != 0) {
            fprintf(stderr, "slowfs: pthread_create: %s\n", strerror(e));
            goto out_signals;
        }
        pthread_detach(t);
    }

    struct fuse_loop_config* lc = fuse_loop_cfg_create();
    if (lc == NULL) goto out_signals;
    fuse_loop_cfg_set_clone_fd(lc, (unsigned)opts.clone_fd);
    if (opts.max_idle_threads != UINT_MAX)  /* given: -o max_idle_threads */
        fuse_loop_cfg_set_idle_threads(lc, opts.max_idle_threads);
    fuse_loop_cfg_set_max_threads(
        lc, max_threads_given ? opts.max_threads : SLOWFS_MAX_THREADS);
    /* After SIGTERM/SIGINT/SIGHUP the loop returns the signal's number. */
    int r = fuse_loop_mt(f, lc);
    ret = r == 0 || r == SIGTERM || r == SIGINT || r == SIGHUP ? 0 : 1;
    fuse_loop_cfg_destroy(lc);
out_signals:
    fuse_remove_signal_handlers(se);
out_unmount:
    fuse_unmount(f);
out_destroy:
    fuse_destroy(f);
out_args:
    free(opts.mountpoint);
    fuse_opt_free_args(&args);
    return ret;
}
