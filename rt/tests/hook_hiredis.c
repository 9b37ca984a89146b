/* hook_hiredis.c - hiredis' blocking client, unchanged, in 1000 cos of one
 * thread through the syscall hooks (or, --threads, in 1000 threads, for
 * comparison).  Each client connects, then does SET key val and GET key
 * --cmds times, every reply checked; the clients overlap: the most that
 * are inside a redisCommand at once must reach half of them (one at a time
 * would mean the hooks are not there: the calls blocked the thread).
 *
 *   hook_hiredis --port P [--clients N] [--cmds K] [--threads]
 *
 * Prints one line: mode, clients, commands, the time, the most in flight.
 * Exit status 0 only if every reply was right (and, with cos, they
 * overlapped).  Run under LD_PRELOAD=libaco_hook.so, or linked with it.
 */
#define _GNU_SOURCE
#include "aco_rt.h"

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

static int port = 6379, clients = 1000, cmds = 10, use_threads;
static int in_flight, most, failures;       /* atomic with threads */

static void fail(int id, const char* what, const char* detail) {
    __atomic_fetch_add(&failures, 1, __ATOMIC_RELAXED);
    fprintf(stderr, "hook_hiredis: client %d: %s%s%s\n", id, what, detail ? ": " : "",
            detail ? detail : "");
}

static redisReply* command(redisContext* c, const char* fmt, int id, int k, int v) {
    int now = __atomic_add_fetch(&in_flight, 1, __ATOMIC_RELAXED);
    int m = __atomic_load_n(&most, __ATOMIC_RELAXED);
    while (now > m && !__atomic_compare_exchange_n(&most, &m, now, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}
    redisReply* r = redisCommand(c, fmt, id, k, v);
    __atomic_sub_fetch(&in_flight, 1, __ATOMIC_RELAXED);
    return r;
}

static void client(int id) {
    redisContext* c = redisConnect("127.0.0.1", port);
    if (c == NULL || c->err) {
        fail(id, "connect", c ? c->errstr : "no memory");
        if (c) redisFree(c);
        return;
    }
    for (int k = 0; k < cmds; k++) {
        int v = id * 100000 + k;
        redisReply* r = command(c, "SET hook:%d:%d %d", id, k, v);
        if (r == NULL || r->type != REDIS_REPLY_STATUS || strcmp(r->str, "OK") != 0) {
            fail(id, "SET", r ? r->str : c->errstr);
            if (r) freeReplyObject(r);
            break;
        }
        freeReplyObject(r);
        r = command(c, "GET hook:%d:%d", id, k, 0);
        char want[32];
        snprintf(want, sizeof(want), "%d", v);
        if (r == NULL || r->type != REDIS_REPLY_STRING || strcmp(r->str, want) != 0) {
            fail(id, "GET gave the wrong value", r && r->str ? r->str : c->errstr);
            if (r) freeReplyObject(r);
            break;
        }
        freeReplyObject(r);
    }
    redisFree(c);
}

static void client_co(void* arg) { client((int)(intptr_t)arg); }
static void* client_thread(void* arg) { client((int)(intptr_t)arg); return NULL; }

int main(int argc, char** argv) {
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--port") == 0 && i + 1 < argc) port = atoi(argv[++i]);
        else if (strcmp(argv[i], "--clients") == 0 && i + 1 < argc) clients = atoi(argv[++i]);
        else if (strcmp(argv[i], "--cmds") == 0 && i + 1 < argc) cmds = atoi(argv[++i]);
        else if (strcmp(argv[i], "--threads") == 0) use_threads = 1;
        else {
            fprintf(stderr, "usage: hook_hiredis --port P [--clients N] [--cmds K] [--threads]\n");
            return 2;
        }
    }
    if (clients < 1 || cmds < 1) return 2;
    /* a descriptor per client */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)clients + 64) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    int64_t t0 = aco_rt_now();
    if (use_threads) {
        pthread_t* th = calloc((size_t)clients, sizeof(*th));
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setstacksize(&a, 256 * 1024);
        for (int i = 0; i < clients; i++)
            if (pthread_create(&th[i], &a, client_thread, (void*)(intptr_t)i) != 0) {
                fprintf(stderr, "hook_hiredis: pthread_create failed at %d\n", i);
                return 1;
            }
        for (int i = 0; i < clients; i++) pthread_join(th[i], NULL);
        free(th);
    } else {
        aco_rt_sched_t* s = aco_rt_sched_new(NULL);
        if (s == NULL) { perror("aco_rt_sched_new"); return 1; }
        for (int i = 0; i < clients; i++) {
            aco_rt_co_t* co = aco_rt_spawn(s, client_co, (void*)(intptr_t)i);
            if (co == NULL) { perror("aco_rt_spawn"); return 1; }
            aco_rt_detach(co);
        }
        int r = aco_rt_sched_run(s);
        if (r < 0) { fprintf(stderr, "hook_hiredis: run: %d\n", r); return 1; }
        aco_rt_sched_free(s);
    }
    double ms = (double)(aco_rt_now() - t0) / 1e6;
    printf("hook_hiredis: %s, %d clients x %d SET+GET, %d failures, %.1f ms, most in flight %d\n",
           use_threads ? "threads" : "cos", clients, cmds, failures, ms, most);
    printf("hook_hiredis_ms %.1f\n", ms);
    if (failures) return 1;
    if (!use_threads && clients > 1 && most < clients / 2) {
        fprintf(stderr, "hook_hiredis: only %d clients in flight at once: the hooks did not make "
                "the blocking calls yield\n", most);
        return 1;
    }
    return 0;
}
