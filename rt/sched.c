/* sched.c - a scheduler made and freed: each part's own init and fini,
 * in order (the kernel's, the timing wheel's, the backend's; at the end
 * lent receives', the descriptor table's).  The top of the runtime: it
 * calls down into every part, and none calls it.
 *
 * The loop that runs cos, and parking and waking, are the kernel's
 * (loop.c, with co.c); the backends' in io_epoll.c and io_uring.c.
 */
#define _GNU_SOURCE
#include "rt_impl.h"
#include "rt_io.h"

#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/socket.h>

/* The syscall hooks (rt/hook.c), if the program has them: linked in (the
 * weak references), or loaded as libaco_hook.so (found by name). */
extern const void* aco_rt_hook_binding_(void) __attribute__((weak));
extern int aco_rt_hook_owns_(const void* fn) __attribute__((weak));
extern unsigned aco_rt_hook_probes_(const void** token) __attribute__((weak));

/* dlsym, leaving no error message behind: glibc keeps a failed lookup's
 * in the heap, per thread, until dlerror is called twice (a pool thread's
 * that forks would leave it lost in the child). */
static void* dl_find(void* h, const char* name) {
    void* f = dlsym(h, name);
    if (f == NULL && dlerror() != NULL) dlerror();
    return f;
}

/* Where the definition f (of name) hands its calls on, if its object says
 * so: a library ahead of the hooks that forwards them (a tracer, the
 * tests' call counter) exports aco_rt_hook_forwards_(name), its
 * dlsym(RTLD_NEXT, name).  NULL if it does not. */
static const void* forwarded(const void* f, const char* name) {
    Dl_info d, n;
    if (!dladdr(f, &d) || d.dli_fname == NULL) return NULL;
    void* h = dlopen(d.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    if (h == NULL) {
        if (dlerror() != NULL) dlerror();
        return NULL;
    }
    const void* (*next)(const char*);
    *(void**)&next = dl_find(h, "aco_rt_hook_forwards_");
    dlclose(h);
    /* its own, not one of its dependencies' */
    if (next == NULL || !dladdr((const void*)(uintptr_t)next, &n) || n.dli_fbase != d.dli_fbase)
        return NULL;
    return next(name);
}

/* Does f, the definition of names[i] that the program's calls reach,
 * hand them on to the hooks?  One call that moves nothing (descriptor -1,
 * poll of no descriptor) with the hooks' token, which they count if it
 * arrives (a sanitizer's interceptors pass it on as it is). */
static const char* const names[] = {"read", "recv", "poll", "connect"};
static int probe(void* f, size_t i, unsigned (*probes)(const void**)) {
    const void* t;
    unsigned before = probes(&t);
    int e = errno;
    ssize_t (*rd)(int, void*, size_t);
    ssize_t (*rv)(int, void*, size_t, int);
    int (*pl)(struct pollfd*, nfds_t, int);
    int (*cn)(int, const struct sockaddr*, socklen_t);
    void* b = (void*)(uintptr_t)t;
    switch (i) {
    case 0:  *(void**)&rd = f; rd(-1, b, 0); break;
    case 1:  *(void**)&rv = f; rv(-1, b, 0, 0); break;
    case 2:  *(void**)&pl = f; pl(b, 0, 0); break;
    default: *(void**)&cn = f; cn(-1, b, 0); break;
    }
    errno = e;
    return probes(&t) != before;
}

/* 1: the program's calls reach the hooks, bound to this copy of the
 * runtime; 0: no hooks, or another definition comes first; -1: hooks
 * bound to another copy of the runtime (this one linked in statically,
 * libaco_hook.so with libaco_rt.so beside it). */
static int hooks_state(void) {
    const void* (*binding)(void) = aco_rt_hook_binding_;
    int (*owns)(const void*) = aco_rt_hook_owns_;
    unsigned (*probes)(const void**) = aco_rt_hook_probes_;
    if (binding == NULL || owns == NULL) {
        *(void**)&binding = dl_find(RTLD_DEFAULT, "aco_rt_hook_binding_");
        *(void**)&owns = dl_find(RTLD_DEFAULT, "aco_rt_hook_owns_");
        *(void**)&probes = dl_find(RTLD_DEFAULT, "aco_rt_hook_probes_");
        if (binding == NULL || owns == NULL) return 0;
    }
    if (binding() != (const void*)(uintptr_t)aco_rt_self) return -1;
    /* Linked into the same object as this runtime (hook.c's object and the
     * static runtime in one program): that object's calls are bound to
     * the hooks, and the libraries' too where it exports the names (it
     * does what a library it links imports). */
    Dl_info a, b;
    if (dladdr((const void*)(uintptr_t)binding, &a) && dladdr((const void*)(uintptr_t)aco_rt_self, &b) &&
        a.dli_fbase == b.dli_fbase)
        return 1;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        void* f0 = dl_find(RTLD_DEFAULT, names[i]);
        const void* f = f0;
        for (int hop = 0; f != NULL && !owns(f) && hop < 8; hop++) f = forwarded(f, names[i]);
        if (f != NULL && owns(f)) continue;
        if (f0 == NULL || probes == NULL || !probe(f0, i, probes)) return 0;
    }
    return 1;
}

int aco_rt_hooks_active(void) { return hooks_state() > 0; }

static RT_TLS int hooks_paused;
void aco_rt_hooks_pause(void) { hooks_paused++; }
void aco_rt_hooks_resume(void) {
    if (hooks_paused > 0) hooks_paused--;
}
int aco_rt_hooks_paused(void) { return hooks_paused; }

/* Once, at the first scheduler: hooks that cannot see it say so. */
static void hooks_check(void) {
    static int done;
    if (__atomic_exchange_n(&done, 1, __ATOMIC_RELAXED)) return;
    if (hooks_state() < 0)
        fputs("aco_rt: libaco_hook is loaded, but bound to another copy of the runtime than "
              "this program's (linked in statically?): its hooks never see these cos, and "
              "blocking calls block the thread; link the program with the shared libaco_rt "
              "(-laco_rt), or link rt/hook.c's object in\n", stderr);
}

/* libaco aborts when a share stack cannot be mapped; the runtime says
 * ENOMEM instead: can the address space take sz bytes (and the stack's
 * guard, 1 MiB and a page)? */
static int stack_possible(size_t sz) {
    size_t extra = (size_t)2 << 20;
    if (sz > SIZE_MAX / 2) return 0;
    void* p = mmap(NULL, sz + extra, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (p == MAP_FAILED) return 0;
    munmap(p, sz + extra);
    return 1;
}

/* Under valgrind (its preloads are in LD_PRELOAD): it sees neither the
 * kernel write the buffers io_uring fills (every byte received reads as
 * undefined) nor another thread run while one waits in io_uring_enter
 * (it holds its lock through the call: a pool's threads would wait for
 * good), so AUTO takes epoll there. */
static int under_valgrind(void) {
    const char* p = getenv("LD_PRELOAD");
    return p && strstr(p, "/vgpreload_") != NULL;
}

static const rt_backend_t* pick_backend(int want) {
    if (want == ACO_RT_BACKEND_AUTO) {
        const char* e = getenv("ACO_RT_BACKEND");
        if (e && *e) {
            if (strcmp(e, "uring") == 0) want = ACO_RT_BACKEND_URING;
            else if (strcmp(e, "epoll") == 0) want = ACO_RT_BACKEND_EPOLL;
            else { errno = EINVAL; return NULL; }
        }
    }
    if (want == ACO_RT_BACKEND_URING) {
        if (rt_backend_uring.name == NULL) { errno = ENOSYS; return NULL; }
        return &rt_backend_uring;
    }
    if (want == ACO_RT_BACKEND_EPOLL) return &rt_backend_epoll;
    if (want != ACO_RT_BACKEND_AUTO) { errno = EINVAL; return NULL; }
    return rt_backend_uring.name && !under_valgrind() ? &rt_backend_uring : &rt_backend_epoll;
}

aco_rt_sched_t* aco_rt_sched_new(const aco_rt_opts_t* opts) {
    aco_rt_opts_t o = {0};
    if (opts) o = *opts;
    if (rt_tls_sched) { errno = EBUSY; return NULL; }
    /* inside a co (a libaco co of the program's, or the co that forked
     * when this is the child of a fork made in one): a scheduler runs in
     * the thread's main co, which libaco makes outside any co */
    aco_t* cur = aco_get_co();
    if (cur && !aco_is_main_co(cur)) { errno = EPERM; return NULL; }
    const rt_backend_t* be = pick_backend(o.backend);
    if (be == NULL) return NULL;
    hooks_check();
    if (o.share_stacks == 0) o.share_stacks = 4;
    if (o.stack_size == 0) o.stack_size = 256 * 1024;
    if (o.uring_entries == 0) o.uring_entries = 512;
    if (o.share_stacks > 1024) { errno = EINVAL; return NULL; }
    if (!stack_possible(o.stack_size)) { errno = ENOMEM; return NULL; }

    aco_rt_sched_t* s = aligned_alloc(64, (sizeof(*s) + 63) & ~(size_t)63);
    if (s == NULL) return NULL;
    memset(s, 0, sizeof(*s));
    int r = rt_kernel_init(s, &o);
    if (r < 0) {
        free(s);
        errno = -r;
        return NULL;
    }
    rt_wheel_init(&s->wheel, rt_now());
    if (be == &rt_backend_uring && o.backend == ACO_RT_BACKEND_AUTO &&
        getenv("ACO_RT_BACKEND") == NULL) {
        /* auto: fall back to epoll where the kernel refuses io_uring */
        if ((r = be->init(s, &o)) < 0) {
            be = &rt_backend_epoll;
            r = be->init(s, &o);
        }
    } else {
        r = be->init(s, &o);
    }
    if (r < 0) {
        rt_kernel_fini(s);
        free(s);
        errno = -r;
        return NULL;
    }
    rt_tls_sched = s;
    rt_sched_reg(s, 1);
    __atomic_fetch_add(&rt_nsched, 1u, __ATOMIC_ACQ_REL);   /* atomic in every build */
    return s;
}

void aco_rt_sched_free(aco_rt_sched_t* s) {
    if (s == NULL || s != rt_tls_sched || s->run.running) return;
    rt_sched_reg(s, 0);     /* no more closes from other threads */
    rt_offload_quiesce();   /* no helper thread is still sending to us */
    /* First the wheel: the parked cos' deadline timers are in their
     * records, freed next; the program's timers outlive us disarmed. */
    rt_wheel_clear(&s->wheel);
    rt_kernel_drop_cos(s);
    rt_lend_fini(s);
    rt_file_fini(s);
    s->backend.ops->fini(s);
    rt_cos_free_held(s, s->backend.left_ops);     /* (the kernel writes none now) */
    rt_fd_free_all(&s->fds);
    rt_sched_quiesce(s);    /* no other thread is still waking us */
    rt_kernel_fini(s);
    /* A scheduler whose cos all wait on cos may be left alone now: it looks
     * again (asked(): the count, seq_cst, against its sleeping flag). */
    if (__atomic_sub_fetch(&rt_nsched, 1u, __ATOMIC_SEQ_CST) == 1) rt_sched_notify_all();
    rt_tls_sched = NULL;
    free(s);
}
