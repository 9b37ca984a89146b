/* test_free_inflight.c - aco_rt_sched_free with a co's read of a regular
 * file still in the kernel.  aco_rt.h: after aco_rt_sched_free returns,
 * nothing the runtime started writes the program's memory.  A file whose
 * reads the kernel serves from an io-wq worker that blocks (FUSE, NFS)
 * keeps writing the buffer after the ring's cancel; the scheduler must wait
 * for that end before it returns (it once returned at once, and the read
 * wrote the buffer later: a use after free in a real program).
 *
 * The file: a FUSE file system that this test's parent process serves
 * over /dev/fuse (no libfuse; the page cache and asynchronous readahead,
 * so that io_uring hands the read to an io-wq worker), whose READ replies
 * 300 ms after it came.  In a child, a co of an io_uring scheduler reads
 * the file with aco_rt_read into a heap buffer; once the server has the
 * READ (and has not answered), a second co stops the scheduler and
 * aco_rt_sched_free runs; then the buffer is filled with a canary and,
 * after the server answered, must still hold it.  (The server is another
 * process so that a failing child still exits: a process whose own
 * thread serves the file cannot end while a read of it waits.)  Needs
 * root, /dev/fuse and the io_uring backend: otherwise it says why and
 * passes.
 */
#define _GNU_SOURCE
#include "rt_test.h"

#include <fcntl.h>
#include <linux/fuse.h>
#include <poll.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>

#define FILE_SIZE 4096
#define SLOW_MS 300

static int fuse_fd = -1;
static char mnt[] = "/tmp/test_free_inflight.XXXXXX";
static int* flags;              /* shared: [0] the READ came, [1] answered */
#define got_read (flags[0])
#define replied (flags[1])

static void reply(uint64_t unique, int error, const void* body, size_t n) {
    struct fuse_out_header h = {(uint32_t)(sizeof(h) + (error ? 0 : n)), error, unique};
    struct iovec v[2] = {{&h, sizeof(h)}, {(void*)body, error ? 0 : n}};
    ssize_t r = writev(fuse_fd, v, 2);
    (void)r;                    /* (ENOENT: the request was interrupted) */
}

static void attr_of(uint64_t node, struct fuse_attr* a) {
    memset(a, 0, sizeof(*a));
    a->ino = node;
    a->mode = node == FUSE_ROOT_ID ? S_IFDIR | 0755 : S_IFREG | 0644;
    a->nlink = 1;
    a->size = node == FUSE_ROOT_ID ? 0 : FILE_SIZE;
    a->blksize = 4096;
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0) {}
}

/* The file system: the root and one file, "slow". */
/* The parent: serves the file system until the child has ended; its
 * status. */
static int serve(pid_t child) {
    size_t cap = FUSE_MIN_READ_BUFFER + 65536;
    char* b = malloc(cap);
    CHECK(b != NULL);
    int status;
    for (;;) {
        if (waitpid(child, &status, WNOHANG) == child) break;
        struct pollfd p = {fuse_fd, POLLIN, 0};
        if (poll(&p, 1, 20) <= 0) continue;
        ssize_t n = read(fuse_fd, b, cap);
        if (n < 0 && (errno == EINTR || errno == ENOENT || errno == EAGAIN)) continue;
        CHECK_GE(n, (ssize_t)sizeof(struct fuse_in_header));
        struct fuse_in_header* in = (struct fuse_in_header*)b;
        void* body = b + sizeof(*in);
        switch (in->opcode) {
        case FUSE_INIT: {
            struct fuse_init_in* ii = body;
            struct fuse_init_out o;
            memset(&o, 0, sizeof(o));
            o.major = FUSE_KERNEL_VERSION;
            o.minor = ii->minor < FUSE_KERNEL_MINOR_VERSION ? ii->minor : FUSE_KERNEL_MINOR_VERSION;
            o.max_readahead = ii->max_readahead;
            o.flags = ii->flags & FUSE_ASYNC_READ;  /* (readahead: no wait inline) */
            o.max_write = 4096;
            o.max_pages = 1;
            reply(in->unique, 0, &o, sizeof(o));
            break;
        }
        case FUSE_LOOKUP:
            if (in->nodeid == FUSE_ROOT_ID && strcmp(body, "slow") == 0) {
                struct fuse_entry_out e;
                memset(&e, 0, sizeof(e));
                e.nodeid = 2;
                attr_of(2, &e.attr);
                reply(in->unique, 0, &e, sizeof(e));
            } else {
                reply(in->unique, -ENOENT, NULL, 0);
            }
            break;
        case FUSE_GETATTR: {
            struct fuse_attr_out a;
            memset(&a, 0, sizeof(a));
            attr_of(in->nodeid, &a.attr);
            reply(in->unique, 0, &a, sizeof(a));
            break;
        }
        case FUSE_OPEN:
        case FUSE_OPENDIR: {
            struct fuse_open_out o;
            memset(&o, 0, sizeof(o));
            o.open_flags = 0;           /* (the page cache: io-wq reads it) */
            reply(in->unique, 0, &o, sizeof(o));
            break;
        }
        case FUSE_READ: {
            struct fuse_read_in* r = body;
            __atomic_store_n(&got_read, 1, __ATOMIC_SEQ_CST);
            sleep_ms(SLOW_MS);
            size_t len = r->offset >= FILE_SIZE ? 0 : FILE_SIZE - r->offset;
            if (len > r->size) len = r->size;
            char* d = malloc(len + 1);
            CHECK(d != NULL);
            memset(d, 'D', len);
            reply(in->unique, 0, d, len);
            free(d);
            __atomic_store_n(&replied, 1, __ATOMIC_SEQ_CST);
            break;
        }
        case FUSE_FORGET:
        case FUSE_BATCH_FORGET:
        case FUSE_INTERRUPT:
            break;                              /* (no reply) */
        case FUSE_FLUSH:
        case FUSE_RELEASE:
        case FUSE_RELEASEDIR:
            reply(in->unique, 0, NULL, 0);
            break;
        default:
            reply(in->unique, -ENOSYS, NULL, 0);
            break;
        }
    }
    free(b);
    return status;
}

typedef struct {
    aco_rt_sched_t* s;
    int fd;
    char* buf;
    ssize_t r;
} reader_t;

static void reader_co(void* arg) {
    reader_t* x = arg;
    x->r = aco_rt_read(x->fd, x->buf, FILE_SIZE, -1);
}

static void stopper_co(void* arg) {
    reader_t* x = arg;
    while (!__atomic_load_n(&got_read, __ATOMIC_SEQ_CST)) aco_rt_sleep(1 * MS);
    CHECK_EQ(__atomic_load_n(&replied, __ATOMIC_SEQ_CST), 0);   /* (in flight) */
    aco_rt_sched_stop(x->s);
}

/* The child: the runtime's part. */
static void reader(int uring) {
    char path[64];
    snprintf(path, sizeof(path), "%s/slow", mnt);
    reader_t x;
    memset(&x, 0, sizeof(x));
    x.fd = open(path, O_RDONLY);
    CHECK_GE(x.fd, 0);
    x.buf = malloc(FILE_SIZE);
    CHECK(x.buf != NULL);
    memset(x.buf, 0, FILE_SIZE);
    x.s = test_sched_on(uring, NULL);
    aco_rt_co_t* c = aco_rt_spawn(x.s, reader_co, &x);
    CHECK(c != NULL);
    CHECK_EQ(aco_rt_detach(c), 0);
    c = aco_rt_spawn(x.s, stopper_co, &x);
    CHECK(c != NULL);
    CHECK_EQ(aco_rt_detach(c), 0);
    CHECK_EQ(aco_rt_sched_run(x.s), 0);
    aco_rt_sched_free(x.s);
    /* from here the buffer is the program's again */
    memset(x.buf, 'C', FILE_SIZE);
    while (!__atomic_load_n(&replied, __ATOMIC_SEQ_CST)) sleep_ms(10);
    sleep_ms(100);              /* (the worker's copy, after the reply) */
    int kept = 0;
    for (int i = 0; i < FILE_SIZE; i++) kept += x.buf[i] == 'C';
    CHECK_EQ(kept, FILE_SIZE);
    close(x.fd);
    free(x.buf);
}

int main(void) {
    if (geteuid() != 0 || access("/dev/fuse", R_OK | W_OK) != 0) {
        printf("test_free_inflight: skipped (needs root and /dev/fuse)\n");
        return 0;
    }
    int bs[8], nb = test_backends(bs, 8), uring = -1;
    for (int i = 0; i < nb; i++)
        if (bs[i] == ACO_RT_BACKEND_URING) uring = bs[i];
    if (uring < 0) {
        printf("test_free_inflight: skipped (no io_uring backend here)\n");
        return 0;
    }
    flags = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(flags != MAP_FAILED);
    fuse_fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
    CHECK_GE(fuse_fd, 0);
    /* (a mount namespace of its own where it can, its mounts private
     * where "/" is a mount point (in a chroot it is not): a failure leaves
     * no mount behind in the machine's) */
    if (unshare(CLONE_NEWNS) == 0) (void)mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL);
    CHECK(mkdtemp(mnt) != NULL);
    char opts[128];
    snprintf(opts, sizeof(opts), "fd=%d,rootmode=40000,user_id=0,group_id=0", fuse_fd);
    if (mount("test_free_inflight", mnt, "fuse", MS_NOSUID | MS_NODEV, opts) != 0) {
        printf("test_free_inflight: skipped (mount of a FUSE file system: %s)\n", strerror(errno));
        rmdir(mnt);
        return 0;
    }
    pid_t child = fork();
    CHECK_GE(child, 0);
    if (child == 0) {
        close(fuse_fd);
        reader(uring);
        _exit(0);
    }
    int status = serve(child);
    CHECK_EQ(umount2(mnt, MNT_DETACH), 0);
    close(fuse_fd);
    rmdir(mnt);
    CHECK(WIFEXITED(status));
    CHECK_EQ(WEXITSTATUS(status), 0);
    printf("test_free_inflight: ok\n");
    return 0;
}
