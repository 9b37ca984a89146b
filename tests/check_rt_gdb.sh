#!/usr/bin/env bash
# check_rt_gdb.sh - the runtime's dump from gdb: a program stopped inside a
# co, with other cos parked in a sleep, a channel receive and a mutex, and
# one ready; `call aco_rt_dump(0, 1)` lists every co with its state and what
# it waits on, and `aco_rt_stats` counts them.  Exit status: the verdict.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUTPUT:-output}
command -v gdb > /dev/null || { echo "check_rt_gdb: gdb not found: install gdb"; exit 1; }
[ -f "$OUT/libaco_rt.a" ] || { echo "check_rt_gdb: $OUT/libaco_rt.a not built"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/p.c" <<'EOF'
#include "aco_rt.h"
static aco_rt_chan_t* ch;
static aco_rt_mutex_t mu;
static aco_rt_stats_t st;
static void sleeper(void* a) { (void)a; aco_rt_sleep(3600LL * 1000000000); }
static void receiver(void* a) { int v; (void)a; aco_rt_chan_recv(ch, &v, -1); }
static void locker(void* a) { (void)a; aco_rt_mutex_lock(&mu, aco_rt_now() + 3600LL * 1000000000); }
static void ready(void* a) { (void)a; }
__attribute__((noinline)) void stop_here(void) { aco_rt_stats(0, &st); __asm__ volatile("" ::: "memory"); }
static void holder(void* a) {
    (void)a;
    aco_rt_mutex_lock(&mu, -1);
    aco_rt_yield();                 /* the others park meanwhile */
    aco_rt_spawn2(0, ready, 0, &(aco_rt_spawn_opts_t){.name = "ready-one"});
    stop_here();
    aco_rt_sched_stop(aco_rt_sched_current());
}
int main(void) {
    aco_rt_sched_t* s = aco_rt_sched_new(0);
    ch = aco_rt_chan_new(sizeof(int), 0);
    aco_rt_spawn2(s, holder, 0, &(aco_rt_spawn_opts_t){.name = "holder"});
    aco_rt_spawn2(s, sleeper, 0, &(aco_rt_spawn_opts_t){.name = "sleeper"});
    aco_rt_spawn2(s, receiver, 0, &(aco_rt_spawn_opts_t){.name = "receiver"});
    aco_rt_spawn2(s, locker, 0, &(aco_rt_spawn_opts_t){.name = "locker"});
    return aco_rt_sched_run(s) < 0;
}
EOF
fails=0
for be in ${ACO_RT_TEST_BACKENDS:-uring epoll}; do
    gcc -O0 -g -I. -Irt "$tmp/p.c" "$OUT/libaco_rt.a" "$OUT/libaco.a" $(grep -q ACO_RT_HAVE_URING "$OUT/obj/rt/flags" && echo -luring) \
        -lpthread -o "$tmp/p" || { echo "check_rt_gdb: build failed"; exit 1; }
    ACO_RT_BACKEND=$be timeout 60 gdb -q -batch -nx -ex 'break stop_here' -ex run -ex finish \
        -ex 'call aco_rt_dump(0, 1)' -ex 'print st.cos_parked' -ex 'print st.cos_ready' \
        -ex 'print st.cos_alive' -ex 'print st.timers' -ex kill "$tmp/p" > "$tmp/log" 2>&1
    want=(
        "backend $be: 5 cos alive, 3 parked, 1 ready"
        '"holder" running'
        '"sleeper" parked in sleep (nil) deadline in'
        '"receiver" parked in chan_recv 0x'
        '"locker" parked in mutex 0x[0-9a-f]* deadline in'
        '"ready-one" ready'
        '\$1 = 3'
        '\$2 = 1'
        '\$3 = 5'
        '\$4 = 2'
    )
    for w in "${want[@]}"; do
        if grep -q -- "$w" "$tmp/log"; then echo "ok   $be: $w"; else echo "FAIL $be: no '$w'"; fails=$((fails + 1)); fi
    done
    [ $fails = 0 ] || sed 's/^/    | /' "$tmp/log"
done
echo "check_rt_gdb: $fails failed"
[ $fails = 0 ]
