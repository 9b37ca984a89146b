/* io_epoll.c - the epoll backend: readiness, edge-triggered.
 *
 * A descriptor is added for input and output at the same time (EPOLLET)
 * when a co has to wait on it.  Edge-triggered is enough because a co
 * waits only after its system call said EAGAIN: the next edge comes after
 * that, and epoll keeps an edge that arrives before the co parks (the
 * scheduler is this thread: it cannot wait in epoll before the co has
 * parked).  Descriptors that epoll refuses (EPERM: regular files) are
 * always ready.
 *
 * Every wait adds the descriptor again, and the kernel says EEXIST while
 * it is the same file: epoll knows a registration by file and number, and
 * drops it when the file is closed, so a number closed behind our back
 * (close(2), dup2) and given to another file would otherwise never report
 * a readiness.  A wait that finds the old registration gone tells the cos
 * still waiting on the old file -EBADF.
 */
#define _GNU_SOURCE
#include "rt_impl.h"
#include "rt_fd.h"
#include "rt_sys.h"

#include <poll.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

#define EVENTS 256

typedef struct {
    int epfd;
    int no_pwait2;              /* kernel < 5.11: epoll_wait, ms timeouts */
    struct ep_pblk* blocks;     /* aco_rt_poll's, of cos that wait */
    struct epoll_event ev[EVENTS];
} ep_t;

static int ep_init(aco_rt_sched_t* s, const aco_rt_opts_t* o) {
    (void)o;
    s->backend.ops = &rt_backend_epoll;
    ep_t* e = calloc(1, sizeof(*e));
    if (e == NULL) return -ENOMEM;
    e->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (e->epfd < 0) { int r = -errno; free(e); return r; }
    /* The scheduler's eventfd: other threads' messages (level-triggered:
     * read when seen). */
    struct epoll_event ev = {0};
    ev.events = EPOLLIN;
    ev.data.fd = s->run.evfd;
    if (epoll_ctl(e->epfd, EPOLL_CTL_ADD, s->run.evfd, &ev) < 0) {
        int r = -errno;
        rt_sys_close(e->epfd);
        free(e);
        return r;
    }
    s->backend.data = e;
    return 0;
}

static void pblks_free(ep_t* e);

static void ep_fini(aco_rt_sched_t* s) {
    ep_t* e = (ep_t*)s->backend.data;
    pblks_free(e);
    rt_sys_close(e->epfd);
    free(e);
}

/* Wake the waiters of fd that events concern. */
static void wake_fd(aco_rt_sched_t* s, rt_fd_t* f, uint32_t events) {
    if (events & (EPOLLIN | EPOLLERR | EPOLLHUP | EPOLLRDHUP)) f->rd_empty = 0;
    if (events & (EPOLLERR | EPOLLHUP | EPOLLRDHUP)) f->rd_hup = 1;
    rt_waiter_t* w = rt_wq_first(&f->q);
    while (w) {
        rt_waiter_t* next = w->next;
        int want = w->events | POLLERR | POLLHUP;
        /* (epoll says IN and OUT where poll(2)'s callers may ask for the
         * normal or priority band by name) */
        if (want & (POLLRDNORM | POLLRDBAND)) want |= POLLIN;
        if (want & (POLLWRNORM | POLLWRBAND)) want |= POLLOUT;
        if ((int)events & want) {
            rt_wq_remove(w);
            rt_fd_busy_add(f, -1);
            s->st.io_inflight--;
            rt_wake(w->co, (int)events & (want | POLLRDHUP));
        }
        w = next;
    }
}

/* aco_rt_poll: a waiter per descriptor on its queue, all for the one co,
 * in a heap block (wait_obj).  The first that fires wakes the co (the
 * others find it ready: rt_wake does nothing more); the co then takes
 * them all off and looks again, but for the descriptors closed meanwhile
 * (wake_all marks them), which say POLLNVAL whatever their number holds
 * by then. */
typedef struct {
    rt_waiter_t w;              /* w.q: on fd's queue (NULL: off it) */
    int         fd;
    unsigned    idx;            /* its entry in the caller's array */
    int         closed;
} ep_pent_t;
typedef struct ep_pblk {
    struct ep_pblk* next;       /* ep_t's blocks (a co woken and then */
    struct ep_pblk* prev;       /* destroyed leaves its own: ep_fini) */
    unsigned    n;
    ep_pent_t   e[];
} ep_pblk_t;

/* Wake every waiter of f with err (one by one off busy: a wait that is
 * starting stays counted): the file is gone. */
static void wake_all(aco_rt_sched_t* s, rt_fd_t* f, int err) {
    rt_waiter_t* w;
    while ((w = rt_wq_pop(&f->q)) != NULL) {
        rt_fd_busy_add(f, -1);
        s->st.io_inflight--;
        if (w != &w->co->w) rt_container_of(w, ep_pent_t, w)->closed = 1;     /* aco_rt_poll's */
        rt_wake(w->co, err);
    }
}

static int ep_poll(aco_rt_sched_t* s, int64_t timeout) {
    ep_t* e = (ep_t*)s->backend.data;
    struct timespec ts, *tsp = NULL;
    if (timeout >= 0) {
        ts.tv_sec = timeout / 1000000000;
        ts.tv_nsec = timeout % 1000000000;
        tsp = &ts;
    }
    if (timeout != 0) s->st.polls++;
    int n = e->no_pwait2 ? -1 : epoll_pwait2(e->epfd, e->ev, EVENTS, tsp, NULL);
    if (n < 0 && (e->no_pwait2 || errno == ENOSYS)) {
        /* Rounded up to whole ms: a deadline must not fire early. */
        e->no_pwait2 = 1;
        int ms = timeout < 0 ? -1
               : timeout > (int64_t)INT32_MAX * 1000000 ? INT32_MAX
               : (int)((timeout + 999999) / 1000000);
        n = epoll_wait(e->epfd, e->ev, EVENTS, ms);
    }
    if (n < 0) return errno == EINTR ? 0 : -errno;
    for (int i = 0; i < n; i++) {
        int fd = e->ev[i].data.fd;
        if (fd == s->run.evfd) {
            uint64_t v;
            if (rt_sys_read(fd, &v, sizeof(v)) < 0) { /* EINTR: the next poll says again */ }
            continue;
        }
        rt_fd_t* f = rt_fd_peek(&s->fds, fd);
        if (f) wake_fd(s, f, e->ev[i].events);
    }
    return 0;
}

static void ep_abort(aco_rt_co_t* co, int err) {
    co->s->st.io_inflight--;
    if (co->w.q) rt_fd_busy_add(rt_container_of(co->w.q, rt_fd_t, q), -1);
    rt_abort_waitq(co, err);
}

RT_WAIT_KINDS(ep, {RT_W_FD_IN, {"fd_in", ep_abort, NULL}},
              {RT_W_FD_OUT, {"fd_out", ep_abort, NULL}})

/* Register fd for input and output at once, edge-triggered: 0; 1 if
 * epoll refuses it (a regular file: ready for reading and writing at
 * every look, so a wait here is for nothing else, which never comes); 2
 * if the number was closed meanwhile (look again: POLLNVAL); or -errno.
 * Added anew while we had added it before: that file is gone, its
 * waiters are told -EBADF. */
static int ep_add(aco_rt_sched_t* s, ep_t* e, rt_fd_t* f, int fd) {
    struct epoll_event ev = {0};
    ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLPRI | EPOLLET;
    ev.data.fd = fd;
    if (epoll_ctl(e->epfd, EPOLL_CTL_ADD, fd, &ev) == 0) {
        if (f->registered) {
            wake_all(s, f, -EBADF);
            __atomic_store_n(&f->gen, f->gen + 1, __ATOMIC_RELEASE);
            f->rd_empty = f->rd_hup = 0;
        }
        f->registered = 1;
        return 0;
    }
    return errno == EEXIST ? 0 : errno == EPERM ? 1 : errno == EBADF ? 2 : -errno;
}

static int ep_wait_fd(aco_rt_co_t* co, int fd, int events, int64_t deadline) {
    aco_rt_sched_t* s = co->s;
    rt_fd_t* f = rt_fd_get(&s->fds, fd);
    if (f == NULL) return fd < 0 ? -EBADF : -ENOMEM;
    /* Counted before the add: an aco_rt_close on another thread either
     * sees us waiting, or closes after it looked and looks again. */
    rt_fd_busy_inc_fenced(f);
    int r = ep_add(s, (ep_t*)s->backend.data, f, fd);
    if (r != 0) {
        rt_fd_busy_add(f, -1);
        return r == 1 ? events : r == 2 ? -EBADF : r;      /* a regular file: ready */
    }
    co->w.events = events;
    rt_wq_push(&f->q, &co->w);
    s->st.io_inflight++;
    return rt_park(co, events & POLLOUT ? RT_W_FD_OUT : RT_W_FD_IN, (void*)(intptr_t)fd,
                   deadline);
}

static void pblk_off(aco_rt_sched_t* s, ep_pblk_t* b) {
    for (unsigned i = 0; i < b->n; i++) {
        if (b->e[i].w.q == NULL) continue;
        rt_fd_busy_add(rt_container_of(b->e[i].w.q, rt_fd_t, q), -1);
        rt_wq_remove(&b->e[i].w);
        s->st.io_inflight--;
    }
}

static void ep_pabort(aco_rt_co_t* co, int err) {
    pblk_off(co->s, (ep_pblk_t*)co->wait_obj);
    rt_wake(co, err);
}

/* (ep_fini: the blocks of cos woken in aco_rt_poll and destroyed before
 * they ran again) */
static void pblks_free(ep_t* e) {
    while (e->blocks) {
        ep_pblk_t* b = e->blocks;
        e->blocks = b->next;
        free(b);
    }
}

static void pblk_unlink(ep_t* e, ep_pblk_t* b) {
    if (b->prev) b->prev->next = b->next; else e->blocks = b->next;
    if (b->next) b->next->prev = b->prev;
}

static void ep_pforget(aco_rt_co_t* co) {
    ep_pblk_t* b = (ep_pblk_t*)co->wait_obj;
    pblk_off(co->s, b);
    pblk_unlink((ep_t*)co->s->backend.data, b);
    free(b);
}

RT_WAIT_KINDS(ep_poll, {RT_W_POLLN, {"poll", ep_pabort, ep_pforget}})

static int ep_wait_many(aco_rt_co_t* co, struct pollfd* p, unsigned n, int64_t deadline) {
    aco_rt_sched_t* s = co->s;
    ep_t* e = (ep_t*)s->backend.data;
    ep_pblk_t* b = malloc(sizeof(*b) + n * sizeof(b->e[0]));
    if (b == NULL) return -ENOMEM;
    b->n = 0;
    b->prev = NULL;
    b->next = e->blocks;
    if (b->next) b->next->prev = b;
    e->blocks = b;
    int r = 0;
    for (unsigned i = 0; i < n && r == 0; i++) {
        if (p[i].fd < 0) continue;
        rt_fd_t* f = rt_fd_get(&s->fds, p[i].fd);
        if (f == NULL) { r = -ENOMEM; break; }
        rt_fd_busy_inc_fenced(f);
        if ((r = ep_add(s, e, f, p[i].fd)) != 0) {
            rt_fd_busy_add(f, -1);
            if (r == 1) r = 0;                  /* nothing to wait for on it */
            continue;
        }
        ep_pent_t* pe = &b->e[b->n++];
        pe->fd = p[i].fd;
        pe->idx = i;
        pe->closed = 0;
        pe->w.co = co;
        pe->w.events = p[i].events;
        rt_wq_push(&f->q, &pe->w);
        s->st.io_inflight++;
    }
    if (r == 0) {
        /* nothing to wait for but the deadline: a sleep (for good: INT64_MAX,
         * as aco_rt_sleep_until's, which no run calls a deadlock) */
        if (b->n == 0 && deadline == -1) deadline = INT64_MAX;
        r = rt_park(co, RT_W_POLLN, b, deadline);
        if (r != -ETIMEDOUT && r != -ECANCELED) {       /* one fired, or was closed */
            r = 0;
            for (unsigned k = 0; k < b->n; k++)
                if (b->e[k].closed) p[b->e[k].idx].revents = POLLNVAL, r++;
        }
    } else if (r == 2) {
        r = 0;
    }
    pblk_off(s, b);
    pblk_unlink(e, b);
    free(b);
    return r;
}

static int ep_poll_fd(const aco_rt_co_t* co, unsigned k) {
    const ep_pblk_t* b = (const ep_pblk_t*)co->wait_obj;
    return co->state == RT_PARKED && co->wait == RT_W_POLLN && k < b->n ? b->e[k].fd : -1;
}

static void ep_closing(aco_rt_sched_t* s, int fd, int gone) {
    ep_t* e = (ep_t*)s->backend.data;
    rt_fd_t* f = rt_fd_peek(&s->fds, fd);
    if (f == NULL) return;
    /* (gone: the number may hold another file now, that we must not drop;
     * a closed file left epoll by itself) */
    if (f->registered && !gone) epoll_ctl(e->epfd, EPOLL_CTL_DEL, fd, NULL);
    f->registered = 0;
    wake_all(s, f, -EBADF);
}

/* Our registration belongs to the file we added: a file closed for good
 * left epoll, and another file now under the number was not added by us
 * (or it was, by a wait here that began after: then its registration is
 * what we find, and the waiters are its own). */
static int ep_stale(aco_rt_sched_t* s, int fd) {
    ep_t* e = (ep_t*)s->backend.data;
    struct epoll_event ev = {0};
    ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLPRI | EPOLLET;
    ev.data.fd = fd;
    return epoll_ctl(e->epfd, EPOLL_CTL_MOD, fd, &ev) < 0 && (errno == EBADF || errno == ENOENT);
}

const rt_backend_t rt_backend_epoll = {
    "epoll", ep_init, ep_fini, ep_poll, ep_wait_fd, ep_wait_many, ep_poll_fd, ep_closing, ep_stale,
};
