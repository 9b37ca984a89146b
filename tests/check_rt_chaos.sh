#!/usr/bin/env bash
# check_rt_chaos.sh - aco_resp under chaos, on both backends with 1 and 2
# threads (2: reuseport on uring, handoff on epoll): redis-benchmark runs
# beside output/chaos_resp (apps/tests/chaos_resp.c: clients that reset and
# half-close mid-request, send garbage, protocol errors and oversized input,
# trickle bytes, hold 3000 idle connections), then every acknowledged SET
# must read back, the server answer PING, its descriptors return to their
# count before the run and its RSS to within a bound of the data it stores.
# CHAOS_SECONDS (40) is the whole run, shared by the four servers
# (`bash make.sh soak`: 600).  Exit status: the verdict.
set -uo pipefail
cd "$(dirname "$0")/.."
. tests/lib.sh
OUT=${OUTPUT:-output}
need_built aco_resp chaos_resp
command -v redis-benchmark > /dev/null ||
    { echo "check_rt_chaos: redis-benchmark not found: install redis-tools"; exit 1; }
total=${CHAOS_SECONDS:-40}
# A sanitizer's allocator holds freed memory back (ASan's quarantine: 256
# MiB): more slack in the RSS bound.
slack=32
case "$OUT" in *asan*|*tsan*) slack=512 ;; esac
configs=("uring 1 reuseport" "epoll 1 reuseport" "uring 2 reuseport" "epoll 2 handoff")
# Each server's share, less what reading back and settling take (~5 s).
secs=$(( total / ${#configs[@]} - 5 ))
[ $secs -ge 5 ] || secs=5
tmp=$(mktemp -d)
trap cleanup_tmp EXIT
fails=0

for cfg in "${configs[@]}"; do
    read -r be threads accept <<< "$cfg"
    name="$be, 1 thread"
    [ "$threads" -gt 1 ] && name="$be, $threads threads, $accept"
    port=$(free_port)
    start_server "$port" "$OUT/aco_resp" --port "$port" --backend "$be" --threads "$threads" \
        --accept "$accept" 2> "$tmp/resp.log" ||
        { bad "$name: aco_resp did not start: $(cat "$tmp/resp.log")"; continue; }
    rpid=$SERVER_PID
    sleep 0.3       # the probe's connection closed: the descriptors' baseline
    "$OUT/chaos_resp" --port "$port" --seconds "$secs" --pid "$rpid" --slack-mib $slack > "$tmp/chaos.out" 2>&1 &
    cpid=$!; PIDS+=("$cpid")
    # (after chaos_resp counted the server's descriptors: a loaded machine
    # may start it late, and redis-benchmark's connections are not the
    # baseline's)
    for _ in $(seq 200); do
        grep -q '^chaos_resp: baseline' "$tmp/chaos.out" 2>/dev/null && break
        kill -0 $cpid 2>/dev/null || break
        sleep 0.05
    done
    # redis-benchmark beside it, run after run, until the chaos ends
    end=$((SECONDS + secs)); runs=0; bench_ok=1
    while [ $SECONDS -lt $end ]; do
        out=$(timeout 60 redis-benchmark -p "$port" -c 50 -n 20000 -t set,get -q 2>&1)
        if [ $? != 0 ] || [ "$(echo "$out" | tr '\r' '\n' | grep -c 'requests per second')" -lt 2 ]; then
            bench_ok=0; echo "$out" | tail -5 > "$tmp/bench.err"; break
        fi
        runs=$((runs + 1))
    done
    if [ $bench_ok = 1 ]; then ok "$name: redis-benchmark beside the chaos ($runs runs)"
    else bad "$name: redis-benchmark: $(cat "$tmp/bench.err")"; fi
    if wait $cpid; then
        ok "$name: chaos_resp $secs s: $(grep -o '[0-9]* acknowledged SETs' "$tmp/chaos.out") read back, descriptors and RSS back"
    else
        bad "$name: chaos_resp:"; sed 's/^/    | /' "$tmp/chaos.out"
    fi
    grep '^chaos_resp: \(ran\|server\)' "$tmp/chaos.out" | sed 's/^/    /'
    if kill -0 $rpid 2>/dev/null; then
        ok "$name: aco_resp still running"
    else
        wait $rpid; bad "$name: aco_resp died (status $?): $(cat "$tmp/resp.log")"
    fi
    stop_pid $rpid
done
echo "check_rt_chaos: $fails failed"
[ $fails = 0 ]
