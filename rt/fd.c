/* fd.c - the descriptor table: a scheduler's entries by descriptor number
 * (what the runtime guesses of the file under each, and epoll's wait
 * queues), made on first use, freed with the scheduler.
 *
 * Below both the I/O calls (io.c) and the backends (io_epoll.c,
 * io_uring.c): it calls neither.  The entry's fields and the lookups that
 * never allocate (rt_fd_peek, rt_fd_peek_remote) are in rt_fd.h.
 */
#include "rt_fd.h"

#include <errno.h>

#include <stdlib.h>
#include <sys/socket.h>

rt_fd_t* rt_fd_get(rt_fdtab_t* t, int fd) {
    if (fd < 0 || rt_fd_too_big(fd)) return NULL;
    if (t->top == NULL) {
        /* Large and zeroed: fresh pages, touched only where used. */
        rt_fd_t** top = calloc(RT_FD_CHUNKS, sizeof(*top));
        if (top == NULL) return NULL;
        __atomic_store_n(&t->top, top, __ATOMIC_RELEASE);
    }
    rt_fd_t* c = t->top[fd / RT_FD_CHUNK];
    if (c == NULL) {
        if ((c = calloc(RT_FD_CHUNK, sizeof(rt_fd_t))) == NULL) return NULL;
        __atomic_store_n(&t->top[fd / RT_FD_CHUNK], c, __ATOMIC_RELEASE);
    }
    return &c[fd % RT_FD_CHUNK];
}

void rt_fd_free_all(rt_fdtab_t* t) {
    for (int i = 0; t->top && i < RT_FD_CHUNKS; i++) free(t->top[i]);
    free(t->top);
    t->top = NULL;
}

/* The entry's guess of whether fd is a socket, made if it has none. */
int rt_fd_kind(rt_fd_t* e, int fd) {
    if (rt_likely(e->kind != RT_FD_UNKNOWN)) return e->kind;
    int type = 0;
    socklen_t len = sizeof(type);
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0) {
        e->kind = RT_FD_SOCK;
        e->stream = type == SOCK_STREAM;
    } else {
        e->kind = errno == EBADF ? RT_FD_UNKNOWN : RT_FD_OTHER;
    }
    return e->kind;
}

void rt_fd_forget(rt_fd_t* e) {
    e->kind = RT_FD_UNKNOWN;
    e->registered = e->stream = e->rd_empty = e->rd_hup = e->fmode = e->pend_err = e->tty = 0;
    __atomic_store_n(&e->busy, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&e->gen, e->gen + 1, __ATOMIC_RELEASE);
}
