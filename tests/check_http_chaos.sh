#!/usr/bin/env bash
# check_http_chaos.sh - aco_http under chaos, on both backends (one thread
# each, short timeouts: --header-timeout-ms and --idle-timeout-ms 2000):
# wrk keeps a load of valid requests beside output/chaos_http
# (apps/tests/chaos_http.c: malformed request lines, huge and many headers,
# pipelined bursts with a bad request inside, half-closes, requests and
# responses cut short, slowloris, idle connections), which checks every
# valid response byte for byte, a 4xx or a close for every bad request, the
# timeouts kept, then a GET of each file, the server's descriptors back to
# their count before and its RSS within a bound.  HTTP_CHAOS_SECONDS (10)
# is each server's run.  HTTP_CHAOS_SERVER=nginx runs the same against
# Debian's nginx instead (bench/nginx.sh; client_header_timeout and
# keepalive_timeout 2 s): the chaos client's own check, since nginx does
# not fail it, except that it aborts a response the client half-closed
# before it was sent (chaos_http --halfclose-max).  Exit status: the
# verdict.
set -uo pipefail
cd "$(dirname "$0")/.."
. tests/lib.sh
OUT=${OUTPUT:-output}
server=${HTTP_CHAOS_SERVER:-aco_http}
secs=${HTTP_CHAOS_SECONDS:-10}
need_built chaos_http
if [ "$server" = aco_http ]; then
    need_built aco_http
    configs=(uring epoll)
else
    command -v nginx > /dev/null || { echo "check_http_chaos: nginx not found: install nginx"; exit 1; }
    . bench/nginx.sh
    configs=(nginx)
fi
command -v wrk > /dev/null || { echo "check_http_chaos: wrk not found: install wrk"; exit 1; }
# A sanitizer's allocator holds freed memory back: more slack in the RSS bound.
slack=32
case "$OUT" in *asan*|*tsan*) slack=512 ;; esac
tmp=$(mktemp -d)
cleanup() {
    kill_pids
    [ "$server" = nginx ] && nginx_stop
    rm -rf "$tmp"
}
trap cleanup EXIT
fails=0

for be in "${configs[@]}"; do
    root="$tmp/root.$be"
    mkdir -p "$root"
    # the file wrk asks for (chaos_http writes its own)
    head -c 4096 /dev/urandom > "$root/wrk.bin"
    port=$(free_port)
    extra=()
    if [ "$be" = nginx ]; then
        nginx_start "$tmp/nginx" "$root" "$port" "" \
            "client_header_timeout 2s; keepalive_timeout 2s;" > "$tmp/server.log" ||
            { bad "nginx did not start: $(cat "$tmp/server.log")"; continue; }
        spid=$NGINX_WORKER
        name="nginx"
        extra=(--halfclose-max 65536)
    else
        name="aco_http, $be"
        start_server "$port" "$OUT/aco_http" --port "$port" --root "$root" --threads 1 --backend "$be" \
            --header-timeout-ms 2000 --idle-timeout-ms 2000 2> "$tmp/server.log" ||
            { bad "$name: did not start: $(cat "$tmp/server.log")"; continue; }
        spid=$SERVER_PID
    fi
    sleep 0.3       # the probe's connection closed: the descriptors' baseline
    "$OUT/chaos_http" --port "$port" --root "$root" --seconds "$secs" --pid "$spid" \
        --header-timeout-ms 2000 --idle-timeout-ms 2000 --slack-mib $slack "${extra[@]}" \
        > "$tmp/chaos.out" 2>&1 &
    cpid=$!; PIDS+=("$cpid")
    # once chaos_http has counted the server's descriptors (its first line)
    wait_until 100 0.05 "" grep -q '^chaos_http: port' "$tmp/chaos.out"
    # wrk beside it: every response a 2xx, no socket errors
    wrk -t1 -c20 -d"$((secs - 1))s" --timeout 10s "http://127.0.0.1:$port/wrk.bin" > "$tmp/wrk.out" 2>&1
    if [ $? = 0 ] && ! grep -q 'Non-2xx\|Socket errors' "$tmp/wrk.out"; then
        ok "$name: wrk -c20 beside the chaos: $(awk '/Requests\/sec/ {print $2}' "$tmp/wrk.out") requests/s"
    else
        bad "$name: wrk beside the chaos:"; sed 's/^/    | /' "$tmp/wrk.out"
    fi
    if wait $cpid; then
        ok "$name: chaos_http $secs s: every valid response exact, every bad request refused, descriptors and RSS back"
    else
        bad "$name: chaos_http:"; sed 's/^/    | /' "$tmp/chaos.out"
    fi
    grep '^chaos_http: \(ran\|server\|slowloris\)' "$tmp/chaos.out" | sed 's/^/    /'
    if [ "$be" = nginx ]; then
        nginx_stop
    elif kill -0 $spid 2>/dev/null; then
        ok "$name: still running"
        stop_pid $spid
    else
        wait $spid; bad "$name: died (status $?): $(tail -5 "$tmp/server.log")"
    fi
done
echo "check_http_chaos: $fails failed"
[ $fails = 0 ]
