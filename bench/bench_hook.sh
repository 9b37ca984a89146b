#!/usr/bin/env bash
# bench_hook.sh - hiredis' blocking client, 1000 clients x 10 SET+GET each,
# as 1000 cos on one thread through the syscall hooks (LD_PRELOAD of
# libaco_hook.so) vs as 1000 threads without them: the same program
# (rt/tests/hook_hiredis.c), the same redis-server (pinned to CPU 1), the
# client pinned to CPU 0; interleaved rounds (5, BENCH_RT_ROUNDS), medians
# of the wall time.  Called by bench_rt.sh's section f; alone:
#
#   bash bench/bench_hook.sh [OUTPUT_DIR]
set -uo pipefail
OUT=${1:-output}
ROUNDS=${BENCH_RT_ROUNDS:-5}
for p in libaco_hook.so hook_hiredis; do
    [ -e "$OUT/$p" ] || { echo "bench_hook: $OUT/$p not built (libhiredis-dev missing?): left out"; exit 0; }
done
command -v redis-server > /dev/null || { echo "bench_hook: redis-server not found: left out"; exit 0; }
# medians, ratio and headline line: bench/bench_agg.c's (BENCH_AGG from bench_rt.sh)
AGG=${BENCH_AGG:-$OUT/bench_agg}
[ -x "$AGG" ] && [ ! "$(dirname "$0")/bench_agg.c" -nt "$AGG" ] ||
    { echo "bench_hook: $AGG is not built, or older than bench/bench_agg.c (bash make.sh builds it): left out"; exit 0; }
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
taskset -c 1 redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --maxclients 4000 > /dev/null 2>&1 &
rpid=$!
trap 'kill $rpid 2>/dev/null; wait $rpid 2>/dev/null' EXIT
for _ in $(seq 100); do
    [ "$(redis-cli -p "$port" ping 2>/dev/null)" = PONG ] && break
    sleep 0.05
done
echo
echo "== hooks: hiredis, 1000 clients x 10 SET+GET, client on CPU 0, redis-server on CPU 1, $ROUNDS interleaved rounds"
echo "commands: LD_PRELOAD=$OUT/libaco_hook.so taskset -c 0 $OUT/hook_hiredis --port P"
echo "          taskset -c 0 $OUT/hook_hiredis --port P --threads"
cos="" thr="" fail=0
for r in $(seq 1 "$ROUNDS"); do
    v=$(LD_PRELOAD="$OUT/libaco_hook.so" taskset -c 0 "$OUT/hook_hiredis" --port "$port" 2>&1 |
        awk '$1 == "hook_hiredis_ms" {print $2}')
    [ -n "$v" ] || { echo "bench_hook: the hooked run failed"; fail=1; }
    cos+="${v:-n/a} "
    v=$(taskset -c 0 "$OUT/hook_hiredis" --port "$port" --threads 2>&1 | awk '$1 == "hook_hiredis_ms" {print $2}')
    [ -n "$v" ] || { echo "bench_hook: the threads run failed"; fail=1; }
    thr+="${v:-n/a} "
done
# shellcheck disable=SC2086
c=$("$AGG" median $cos); t=$("$AGG" median $thr)
printf '%-40s %10s   %s\n' program ms "each round"
printf '%-40s %10s   %s\n' "1000 cos, hooked (one thread)" "$c" "$cos"
printf '%-40s %10s   %s\n' "1000 threads" "$t" "$thr"
"$AGG" headline hook_hiredis_1000_ms ours="$c" peer="$t"
exit $fail
