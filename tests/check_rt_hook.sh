#!/usr/bin/env bash
# check_rt_hook.sh - the syscall hooks with a blocking client library no one
# here wrote: hiredis' synchronous API in 1000 cos on one thread, each doing
# blocking SET/GET against a real redis-server at once, every reply checked
# and the clients overlapping (hook_hiredis says which), by LD_PRELOAD of
# output/libaco_hook.so and with the hooks linked in; on both backends.  The
# same program without the hooks must fail its overlap check (it proves the
# check can fail), and with threads must pass.  Exit status: the verdict.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUTPUT:-output}
for p in libaco_hook.so hook_hiredis hook_hiredis_linked; do
    [ -e "$OUT/$p" ] || { echo "check_rt_hook: $OUT/$p not built: install libhiredis-dev, then bash make.sh"; exit 1; }
done
command -v redis-server > /dev/null || { echo "check_rt_hook: redis-server not found: install redis-server"; exit 1; }
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
[ "$(ulimit -n)" -ge 2200 ] 2>/dev/null || [ "$(ulimit -n)" = unlimited ] ||
    { echo "check_rt_hook: needs 2200 descriptors, the hard limit is $(ulimit -Hn)"; exit 1; }
tmp=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --maxclients 4000 \
    > "$tmp/redis.log" 2>&1 &
rpid=$!
trap 'kill $rpid 2>/dev/null; wait $rpid 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 100); do
    [ "$(redis-cli -p "$port" ping 2>/dev/null)" = PONG ] && break
    sleep 0.05
done
fails=0
run() {   # run <what> <expect: pass|fail> <command...>
    local what=$1 want=$2
    shift 2
    if out=$(timeout 120 "$@" 2>&1); then got=pass; else got=fail; fi
    if [ $got = "$want" ]; then echo "ok   $what: $(echo "$out" | head -1)"
    else echo "FAIL $what: expected $want: $out"; fails=$((fails + 1)); fi
}
for be in ${ACO_RT_TEST_BACKENDS:-uring epoll}; do
    run "$be: LD_PRELOAD, 1000 cos" pass env ACO_RT_BACKEND=$be LD_PRELOAD="$OUT/libaco_hook.so" "$OUT/hook_hiredis" --port "$port"
    run "$be: linked, 1000 cos" pass env ACO_RT_BACKEND=$be "$OUT/hook_hiredis_linked" --port "$port" --cmds 5
done
run "no hooks: the overlap check fails" fail "$OUT/hook_hiredis" --port "$port" --clients 20 --cmds 2
run "1000 threads, no hooks" pass "$OUT/hook_hiredis" --port "$port" --threads --cmds 2
echo "check_rt_hook: $fails failed"
[ $fails = 0 ]
