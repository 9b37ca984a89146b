#!/usr/bin/env bash
# bench_http.sh - aco_http (one thread) side by side with Debian's nginx
# (one worker) and h2o (one thread): `wrk -t1 -c100 -dNs --latency` on a
# 4 KiB and a 1 MiB file (random bytes), the server pinned to CPU 1
# (BENCH_RT_SERVER_CPU), wrk to CPU 0 (BENCH_RT_CLIENT_CPU); aco_http
# --backend uring and epoll, nginx, h2o and the floor (OUTPUT_DIR/
# http_floor, bench/http_floor.c: epoll, recv, one send of a small file
# kept in memory or a send and a sendfile of a large one, nothing else) in
# interleaved rounds (5, BENCH_RT_ROUNDS; the order rotates), medians.
# Called by bench_rt.sh's section g; alone:
#
#   bash bench/bench_http.sh [--quick|--smoke] [--tls] [OUTPUT_DIR]
#
# wrk runs 6 s (--quick 4 s, --smoke 2 s in 1 round, uring and the peers
# only), after a 1 s warm-up of each server on each file (not in --smoke).
# Before any figure every server must answer GET of each file with 200 and
# the file's bytes (curl, cmp): a server answering errors measures nothing.
#
# CPU per request, one method for every server benchmark (docs/
# benchmarks.md, "CPU per request"): the server's utime+stime (/proc/PID/
# stat of the serving process: every thread, io_uring's workers too), wrk's
# (its rusage) and the whole machine's busy time (/proc/stat), each over
# the run's requests, with the server's and wrk's busy % and the steal %
# (what the hypervisor took: stolen time is charged to nobody, so a server
# on a CPU with steal looks idle and cheap at once: a warning from 5%).
# Requests/s and MB/s count only the rounds where the server was >= 95%
# busy, the bottleneck; a round where it was not measured wrk.
#
# nginx at its best for static files (bench/nginx.sh): worker_processes 1,
# sendfile on, tcp_nopush on, tcp_nodelay on, access_log off,
# keepalive_requests 1000000 (the default 1000 makes each of wrk's
# connections reconnect every 1000 requests), keepalive_timeout at its
# default (75 s), accept_mutex off, worker_connections 4096, and here
# open_file_cache max=1000 inactive=60s with open_file_cache_valid 60s (the
# file opened once, not on every request); the error log, pid file and temp
# paths in a directory of its own, unprivileged.  h2o at its best
# (bench/h2o.sh, which argues each setting): num-threads 1, no access log.
#
# Headlines (ours/peer: above 1 better for rps and MB/s, worse for ns and
# ms): http_4k_rps, http_4k_cpu_ns_per_req (the server's),
# http_4k_client_cpu_ns_per_req (wrk's), http_4k_machine_cpu_ns_per_req
# (every CPU's busy time: what no server can shift onto its client),
# http_4k_p99_ms, http_1m_mbps and the 1 MiB file's CPU and p99 figures
# (the server's and the machine's CPU with the floor's as floor=);
# the same for --backend epoll with the suffix _epoll, and against h2o with
# _vs_h2o after those.  A run whose wrk reports socket errors or non-2xx
# responses counts as n/a.  Exit status: non-zero if a peer fails, or in
# --smoke if aco_http is missing or fails.
#
# --tls: HTTPS instead, aco_http (--tls-cert, --tls-key: libaco_rt_tls)
# beside nginx (one worker, `listen ssl`, the same ECDSA P-256 certificate
# and key, ssl_protocols TLSv1.3, ssl_session_cache shared:SSL:10m, tickets
# on: nginx's usual setup; both on Debian's OpenSSL with its defaults, so
# the same cipher suite, which the run prints), wrk -t1 -c100 over https
# on three loads: 4k and 1m as above on kept-alive connections, and hs:
# the 4 KiB file with "Connection: close", every request a new connection
# and a full handshake (wrk offers no session).  No h2o, no http_floor;
# the floors are the crypto each must do, by `openssl speed` on the
# server's CPU: a full TLS 1.3 handshake's ECDSA P-256 signature and two
# X25519 operations (a key made, a secret derived), and a MiB's
# AES-256-GCM (16 KiB records).  Headlines https_4k_rps,
# https_4k_cpu_ns_per_req, https_hs_rps (handshakes/s),
# https_hs_cpu_ns_per_req (the server's CPU per full handshake, floor=),
# https_1m_mbps, https_1m_cpu_ns_per_req (floor=), with their client,
# machine and p99 companions, and _epoll for --backend epoll.
#
# Environment:
#   BENCH_HTTP_OURS_CMD   our server's command line, {port} {root} {backend}
#                         replaced, run with eval; default
#                         "OUTPUT_DIR/aco_http --port {port} --root {root} --threads 1 --backend {backend}".
#                         To check the harness with nginx as "ours", a
#                         second nginx: BENCH_HTTP_OURS_CMD=nginx
#   BENCH_HTTP_SECONDS    wrk's duration, seconds
#   BENCH_HTTP_NGINX_EXTRA  nginx's http {} directives after bench/nginx.sh's
#                         defaults, instead of the open-file cache's (empty:
#                         nginx opens, stats and closes the file per request,
#                         as the issue-50 check ran it)
#   BENCH_AGG             the aggregation program (medians, ratios, headline
#                         lines), default OUTPUT_DIR/bench_agg (bash make.sh)
#   BENCH_HTTP_CPU_CAP    N (1-99): every server runs with N% of one CPU
#                         (a cgroup of its own: cpu.max, or cfs_quota_us on
#                         cgroup v1, a 10 ms period; root), the same cap for
#                         each; a round counts for requests/s when the server
#                         used at least 95% of its cap, and the headlines'
#                         names end in _capN.  Why: one wrk thread on one of
#                         two CPUs cannot load a server that needs less CPU a
#                         request than wrk does (HTTPS here); capped alike,
#                         each server is the bottleneck, and requests/s then
#                         measure what each serves with the CPU it has
set -uo pipefail
export LC_ALL=C     # '.' in numbers: EPOCHREALTIME, bash's time, awk
mode=full
TLS=0
OUT=output
while [ $# -gt 0 ]; do
    case $1 in
        --quick) mode=quick ;;
        --smoke) mode=smoke ;;
        --tls) TLS=1 ;;
        -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        -*) echo "bench_http: unknown option $1" >&2; exit 2 ;;
        *) OUT=$1 ;;
    esac
    shift
done
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=$(cd "$OUT" 2>/dev/null && pwd) || { echo "bench_http: no directory $OUT"; exit 2; }
# shellcheck source=tests/lib.sh
. "$HERE/../tests/lib.sh"
. "$HERE/nginx.sh"
. "$HERE/h2o.sh"
case $mode in
    full) ROUNDS=${BENCH_RT_ROUNDS:-5}; SECS=${BENCH_HTTP_SECONDS:-6}; WARM=1 ;;
    quick) ROUNDS=${BENCH_RT_ROUNDS:-2}; SECS=${BENCH_HTTP_SECONDS:-4}; WARM=1 ;;
    smoke) ROUNDS=1; SECS=${BENCH_HTTP_SECONDS:-2}; WARM=0 ;;
esac
SERVER_CPU=${BENCH_RT_SERVER_CPU:-1}
CLIENT_CPU=${BENCH_RT_CLIENT_CPU:-0}
[ "$(nproc)" -lt 2 ] && [ -z "${BENCH_RT_SERVER_CPU:-}" ] && SERVER_CPU=0
CLK_TCK=$(getconf CLK_TCK)
NGINX_EXTRA=${BENCH_HTTP_NGINX_EXTRA-"open_file_cache max=1000 inactive=60s; open_file_cache_valid 60s;"}
OURS_CMD=${BENCH_HTTP_OURS_CMD:-"$OUT/aco_http --port {port} --root {root} --threads 1 --backend {backend}"}
SCHEME=http
FILES="4k 1m"
if [ $TLS = 1 ]; then
    SCHEME=https FILES="4k hs 1m"
    command -v openssl > /dev/null || { echo "bench_http: openssl not found (install openssl): --tls left out"; exit 1; }
fi
say() { echo "bench_http: $*"; }
case $SERVER_CPU$CLIENT_CPU in *[!0-9]*) say "BENCH_RT_SERVER_CPU and BENCH_RT_CLIENT_CPU name one CPU each"; exit 2 ;; esac
for c in wrk nginx curl taskset; do
    command -v $c > /dev/null || { say "$c not found (install wrk, nginx, curl, util-linux): left out"; exit 1; }
done
have_h2o=1
command -v h2o > /dev/null || { have_h2o=0; say "leaving out h2o: install h2o"; }
BUSY_MIN=95     # a round counts for requests/s when the server's CPU was idle less than 100 - this %
# (a smoke run checks the pipeline, not figures: every round counts, and
# its few clock ticks warn of nothing)
[ $mode = smoke ] && BUSY_MIN=0 CPU_WARN=0
CAP=${BENCH_HTTP_CPU_CAP:-}
CAPD=""
if [ -n "$CAP" ]; then
    case $CAP in [1-9]|[1-9][0-9]) ;; *) say "BENCH_HTTP_CPU_CAP is a percent of one CPU, 1-99"; exit 2 ;; esac
    # cgroup v2 (cpu.max) or v1's cpu controller (cfs_quota_us)
    if [ -w /sys/fs/cgroup/cgroup.subtree_control ] &&
            grep -qw cpu /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
        grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control || echo +cpu > /sys/fs/cgroup/cgroup.subtree_control
        CAPD=/sys/fs/cgroup/bench_http.$$
        mkdir "$CAPD" && echo "$((CAP * 100)) 10000" > "$CAPD/cpu.max" || { rmdir "$CAPD"; CAPD=""; }
    elif [ -w /sys/fs/cgroup/cpu ]; then
        CAPD=/sys/fs/cgroup/cpu/bench_http.$$
        mkdir "$CAPD" && echo 10000 > "$CAPD/cpu.cfs_period_us" &&
            echo $((CAP * 100)) > "$CAPD/cpu.cfs_quota_us" || { rmdir "$CAPD"; CAPD=""; }
    fi 2> /dev/null
    [ -n "$CAPD" ] || { say "BENCH_HTTP_CPU_CAP needs a writable cgroup cpu controller (root)"; exit 2; }
fi
# cap PID...: the processes into the cap's cgroup (their threads go along)
cap() {
    [ -n "$CAPD" ] || return 0
    local p
    for p in "$@"; do
        [ -z "$p" ] || echo "$p" > "$CAPD/cgroup.procs" ||
            { say "BENCH_HTTP_CPU_CAP: process $p could not join $CAPD"; exit 2; }
    done
}

TMPD=$(mktemp -d "${TMPDIR:-/tmp}/bench_http.XXXXXX") || exit 2
ROOT=$TMPD/root
mkdir -p "$ROOT"
head -c 4096 /dev/urandom > "$ROOT/4k.bin"
head -c 1048576 /dev/urandom > "$ROOT/1m.bin"
if [ $TLS = 1 ]; then
    # one certificate and key for every server (ECDSA P-256, as a web
    # server's usual one), and nginx's TLS at its usual best
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$TMPD/key.pem" \
        -out "$TMPD/cert.pem" -days 2 -subj /CN=localhost -addext subjectAltName=DNS:localhost \
        > "$TMPD/openssl.log" 2>&1 || { say "openssl req failed: $(tail -1 "$TMPD/openssl.log")"; exit 2; }
    [ -n "${BENCH_HTTP_OURS_CMD:-}" ] || OURS_CMD="$OURS_CMD --tls-cert $TMPD/cert.pem --tls-key $TMPD/key.pem"
    NGINX_EXTRA="ssl_certificate $TMPD/cert.pem; ssl_certificate_key $TMPD/key.pem; ssl_protocols TLSv1.3; ssl_session_cache shared:SSL:10m; ssl_session_tickets on; $NGINX_EXTRA"
    export NGINX_LISTEN_OPTS=" ssl"
fi
declare -A pid port label live V
NGINX_MASTER=""
cleanup() {
    kill_pids wait
    nginx_stop
    h2o_stop
    rm -rf "$TMPD"
    [ -n "$CAPD" ] && rmdir "$CAPD" 2>/dev/null
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
addv() { V[$1]+="$2 "; }
# Medians, ratios and headline lines are bench_agg's (bench/bench_agg.c).
AGG=${BENCH_AGG:-$OUT/bench_agg}
[ -x "$AGG" ] && [ ! "$HERE/bench_agg.c" -nt "$AGG" ] ||
    { say "$AGG is not built, or older than bench/bench_agg.c: bash make.sh builds it"; exit 2; }
median() { "$AGG" median ${V[$1]:-}; }
med() { "$AGG" median -f "$1" ${V[$2]:-}; }   # med FORMAT KEY

# ---- the servers -------------------------------------------------------------
servers="uring epoll nginx h2o floor"
peers="nginx h2o"
[ $mode = smoke ] && servers="uring nginx h2o floor"
[ $have_h2o = 0 ] && servers=${servers/ h2o/} peers=nginx
if [ $TLS = 1 ]; then
    servers="uring epoll nginx" peers=nginx
    [ $mode = smoke ] && servers="uring nginx"
fi
fail=0
ours_missing=0
for s in $servers; do
    port[$s]=$(free_port)
    live[$s]=1
    case $s in nginx|h2o)            # the peers, from bench/nginx.sh and h2o.sh
        if [ $s = nginx ]; then
            label[$s]="nginx $(nginx -v 2>&1 | sed 's/.*nginx\///')"
            nginx_start "$TMPD/nginx" "$ROOT" "${port[$s]}" "$SERVER_CPU" "$NGINX_EXTRA" > "$TMPD/$s.start" &&
                pid[$s]=$NGINX_WORKER && cap "$NGINX_MASTER" "$NGINX_WORKER"
        else
            label[$s]="h2o $(h2o --version 2>/dev/null | sed -n 's/^h2o version //p')"
            h2o_start "$TMPD/h2o" "$ROOT" "${port[$s]}" "$SERVER_CPU" > "$TMPD/$s.start" &&
                pid[$s]=$H2O_PID && cap "$H2O_PID"
        fi || { say "PEER FAILED: $(cat "$TMPD/$s.start")"; live[$s]=0; fail=1; }
        continue ;;
    esac
    tmpl=$OURS_CMD
    if [ $s = floor ]; then
        label[$s]="http_floor (the floor)"
        tmpl="$OUT/http_floor --port {port} --root {root}"
    elif [ "$OURS_CMD" = nginx ]; then     # the harness checked with nginx as ours
        label[$s]="nginx as ours ($s)"
        m=$NGINX_MASTER
        nginx_start "$TMPD/ours.$s" "$ROOT" "${port[$s]}" "$SERVER_CPU" "$NGINX_EXTRA" > /dev/null
        pid[$s]=$NGINX_WORKER; PIDS+=("$NGINX_MASTER"); cap "$NGINX_MASTER" "$NGINX_WORKER"; NGINX_MASTER=$m
        continue
    else
        label[$s]="aco_http --backend $s"
    fi
    cmd=${tmpl//\{port\}/${port[$s]}}
    cmd=${cmd//\{root\}/$ROOT}
    cmd=${cmd//\{backend\}/$s}
    prog=${cmd%% *}
    if [ ! -x "$prog" ]; then
        say "ours: $prog not built (bash make.sh): ${label[$s]} is n/a"
        live[$s]=0; ours_missing=1; continue
    fi
    # exec: $! is the server itself, whose CPU time is read
    eval "exec taskset -c $SERVER_CPU $cmd" > "$TMPD/ours.$s.log" 2>&1 &
    pid[$s]=$!; PIDS+=("${pid[$s]}")
    cap "${pid[$s]}"
    if ! wait_port "${port[$s]}" "${pid[$s]}" 200; then
        say "ours: ${label[$s]} did not start: $(tail -1 "$TMPD/ours.$s.log"): n/a"
        live[$s]=0; ours_missing=1
    fi
done

# Every server's answers, before any figure: a server that answers with an
# error or a short body measures nothing.
for s in $servers; do
    [ "${live[$s]}" = 1 ] || continue
    for f in 4k 1m; do
        code=$(curl -s -k -m 10 -o "$TMPD/answer" -w '%{http_code}' "$SCHEME://127.0.0.1:${port[$s]}/$f.bin")
        cmp -s "$TMPD/answer" "$ROOT/$f.bin" && [ "$code" = 200 ] && continue
        why="GET /$f.bin: status ${code:-none}, $(wc -c < "$TMPD/answer") bytes, not the file's $(wc -c < "$ROOT/$f.bin")"
        live[$s]=0
        case " $peers " in
            *" $s "*) say "PEER FAILED: ${label[$s]}: $why"; fail=1 ;;
            *) say "ours: ${label[$s]}: $why: n/a"; ours_missing=1 ;;
        esac
        break
    done
done

# ---- one run -----------------------------------------------------------------

# to_ms VALUE: wrk's 1.23ms / 456.78us / 1.02s in ms
to_ms() {
    awk -v v="$1" 'BEGIN {
        if (v ~ /us$/) printf "%.4f\n", v / 1000;
        else if (v ~ /ms$/) printf "%.4f\n", v + 0;
        else if (v ~ /s$/) printf "%.4f\n", v * 1000;
        else print "n/a" }'
}
http_run() {   # http_run SERVER FILE SECONDS [warm]
    local s=$1 f=$2 d=$3 key="$1|$2" c0 c1 m0 m1 k0 k1 w0 w1 out n rps p99 bytes
    [ "${live[$s]}" = 1 ] || { [ -n "${4:-}" ] || addv "$key|rps" n/a; return 0; }
    # hs: the 4 KiB file, a new connection (a full handshake) per request
    local path=$f.bin hdr=()
    [ $f = hs ] && path=4k.bin hdr=(-H "Connection: close")
    c0=$(cpu_ticks "${pid[$s]}"); m0=$(machine_ticks); k0=$(cpu_ticks_of "$SERVER_CPU"); w0=$(now_us)
    out=$(cpu_timed "$TMPD/wrk.cpu" timeout $((d + 30)) taskset -c "$CLIENT_CPU" \
        wrk -t1 -c100 -d"${d}s" --latency "${hdr[@]}" "$SCHEME://127.0.0.1:${port[$s]}/$path" 2>&1)
    c1=$(cpu_ticks "${pid[$s]}"); m1=$(machine_ticks); k1=$(cpu_ticks_of "$SERVER_CPU"); w1=$(now_us)
    [ -n "${4:-}" ] && return 0
    n=$(awk '/requests in/ {print $1}' <<< "$out")
    rps=$(awk '/^Requests\/sec:/ {print $2}' <<< "$out")
    p99=$(awk '$1 == "99%" {print $2}' <<< "$out")
    if [ -z "$n" ] || [ -z "$rps" ] || [ -z "$p99" ] || [ "$n" = 0 ] || [ "$c1" = n/a ] ||
            grep -q 'Socket errors\|Non-2xx' <<< "$out"; then
        local why
        why=$(grep 'Socket errors\|Non-2xx\|unable\|error' <<< "$out" | head -2 | tr '\n' ' ')
        kill -0 "${pid[$s]}" 2>/dev/null || { live[$s]=0; why="the server exited; $why"; }
        case " $peers " in
            *" $s "*) say "PEER FAILED: wrk on $f against ${label[$s]}: ${why:-no figures}"; fail=1 ;;
            *) say "ours: wrk on $f against ${label[$s]}: ${why:-no figures}"; ours_missing=1 ;;
        esac
        addv "$key|rps" n/a
        return 0
    fi
    bytes=$( [ $f = 1m ] && echo 1048576 || echo 4096 )
    # CPU per request, one method (docs/benchmarks.md, "CPU per request")
    local fig
    fig=$(awk -v d=$((c1 - c0)) -v hz="$CLK_TCK" -v n="$n" -v cs="$(cat "$TMPD/wrk.cpu")" \
        -v m0="$m0" -v m1="$m1" -v k0="$k0" -v k1="$k1" -v w=$((w1 - w0)) -v r="$rps" -v b=$bytes 'BEGIN {
        split(m0, a, " "); split(m1, z, " "); split(k0, x, " "); split(k1, y, " "); ws = w / 1e6
        srv = d / hz; util = 100 * srv / ws
        printf "%.0f %.0f %.0f %.0f %.0f %.1f %.1f %.0f %.0f\n", srv * 1e9 / n, cs * 1e9 / n,
            (z[1] - a[1]) / hz * 1e9 / n, util, 100 * cs / ws,
            100 * (y[3] - x[3]) / hz / ws, r * b / 1e6, 100 * (y[1] - x[1]) / hz / ws,
            full(100 - 100 * (y[2] - x[2]) / hz / ws) }
        function full(v) { return v < 0 ? 0 : v > 100 ? 100 : v }')
    local cpu ccpu mcpu util cutil steal mbps cbusy cfull
    read -r cpu ccpu mcpu util cutil steal mbps cbusy cfull <<< "$fig"
    addv "$key|rps" "$rps"
    addv "$key|p99" "$(to_ms "$p99")"
    addv "$key|mbps" "$mbps"
    addv "$key|cpu" "$cpu"; addv "$key|ccpu" "$ccpu"; addv "$key|mcpu" "$mcpu"
    addv "$key|util" "$util"; addv "$key|cutil" "$cutil"; addv "$key|steal" "$steal"
    addv "$key|cbusy" "$cbusy"
    # the requests/s that count: rounds where the server was the bottleneck,
    # its CPU (the server's alone) never idle (busy, or stolen: a warning)
    # (capped: the server used at least BUSY_MIN% of its cap)
    if { [ -z "$CAP" ] && [ "$cfull" -ge "$BUSY_MIN" ]; } ||
            { [ -n "$CAP" ] && [ "$util" -ge $((CAP * BUSY_MIN / 100)) ]; }; then
        addv "$key|rpsb" "$rps"; addv "$key|mbpsb" "$mbps"
    else
        local idle=$((100 - cfull))
        [ -n "$CAP" ] && idle=$((CAP - util))
        addv "$key|rpsb" "idle:$idle%"; addv "$key|mbpsb" "idle:$idle%"
    fi
}

echo
if [ $TLS = 1 ]; then
    echo "== https: wrk -t1 -c100 -d${SECS}s --latency over TLS: 4 KiB kept alive (4k), 4 KiB with a full handshake each (hs), 1 MiB (1m); one server thread on CPU $SERVER_CPU, wrk on CPU $CLIENT_CPU, $ROUNDS interleaved rounds"
    # the floors: the crypto a full handshake and a MiB must do, on the server's CPU
    sp=$(timeout 60 taskset -c "$SERVER_CPU" openssl speed -seconds 2 -mr ecdsap256 ecdhx25519 2>/dev/null)
    ae=$(timeout 60 taskset -c "$SERVER_CPU" openssl speed -seconds 2 -mr -bytes 16384 -evp aes-256-gcm 2>/dev/null)
    FLOOR_HS=$(awk -F: '/^\+F4:/ {s = $4} /^\+F5:/ {x = $4} END {if (s > 0 && x > 0) printf "%.0f", 1e9 / s + 2e9 / x; else print "n/a"}' <<< "$sp")
    FLOOR_1M=$(awk -F: '/^\+F:/ {b = $4} END {if (b > 0) printf "%.0f", 1048576 / b * 1e9; else print "n/a"}' <<< "$ae")
    echo "floors (openssl speed on CPU $SERVER_CPU): a full handshake's ECDSA P-256 sign + 2 X25519 = $FLOOR_HS ns; a MiB of AES-256-GCM in 16 KiB records = $FLOOR_1M ns"
    for s in $servers; do
        [ "${live[$s]}" = 1 ] || continue
        echo "${label[$s]}: $(echo | timeout 10 openssl s_client -connect "127.0.0.1:${port[$s]}" 2>/dev/null | tr -d '\0' | grep -m1 -o 'New, TLS.*')"
    done
else
    echo "== http: wrk -t1 -c100 -d${SECS}s --latency, 4 KiB and 1 MiB files, one server thread on CPU $SERVER_CPU, wrk on CPU $CLIENT_CPU, $ROUNDS interleaved rounds"
fi
for s in $servers; do
    [ "${live[$s]}" = 1 ] && echo "server: ${label[$s]} (pid ${pid[$s]})"
done
[ -n "$CAP" ] && echo "cap: every server's processes in $CAPD, $CAP% of one CPU (a 10 ms period); requests/s count rounds where a server used >= $((CAP * BUSY_MIN / 100))% of one CPU"
HS=${CAP:+_cap$CAP}
echo "nginx: $TMPD/nginx/nginx.conf, worker_processes 1, sendfile, tcp_nopush, access_log off, keepalive_requests 1000000${NGINX_EXTRA:+, $NGINX_EXTRA}"
if [ $WARM = 1 ]; then
    for s in $servers; do for f in $FILES; do http_run "$s" "$f" 1 warm; done; done
fi
for r in $(seq 1 "$ROUNDS"); do
    # rotate the servers' order from round to round
    order=$servers
    for _ in $(seq 2 "$r"); do order="${order#* } ${order%% *}"; done
    for f in $FILES; do
        for s in $order; do http_run "$s" "$f" "$SECS"; done
    done
    echo "round $r/$ROUNDS done ($(date -u +%H:%M:%S))"
done

echo
echo "(CPU per request, docs/benchmarks.md \"CPU per request\": srv the server process's utime+stime, every"
echo " thread; cli wrk's (its rusage); all every CPU's busy time (/proc/stat: user, system, irq, softirq),"
echo " each over the run's requests; srv% and cli% of one CPU, cpu% how busy the server's CPU was (the"
echo " server's and whatever the kernel did there), steal% what the hypervisor took.  Requests/s count only"
if [ -n "$CAP" ]; then
echo " rounds where the server used at least $BUSY_MIN% of its cap ($CAP% of one CPU), the bottleneck (rps_b; idle:N%"
echo " a round where it left N% of one CPU of its cap unused): in another round the client's speed is measured)"
else
echo " rounds where the server's CPU was idle less than $((100 - BUSY_MIN))% of the time, the bottleneck (rps_b; idle:N%"
echo " a round where it was idle N%): in another round the client's speed is measured, not the server's)"
fi
printf '%-5s %-24s %8s %8s %8s %7s %7s %7s %5s %5s %5s %6s %8s   %s\n' file server rps_b rps p99_ms \
    srv_ns cli_ns all_ns srv% cpu% cli% steal% MB/s "rps_b of each round"
for f in $FILES; do
    for s in $servers; do
        printf '%-5s %-24s %8s %8s %8s %7s %7s %7s %5s %5s %5s %6s %8s   %s\n' $f "${label[$s]}" \
            "$(med %.0f "$s|$f|rpsb")" "$(med %.0f "$s|$f|rps")" "$(med %.3f "$s|$f|p99")" \
            "$(med %.0f "$s|$f|cpu")" "$(med %.0f "$s|$f|ccpu")" "$(med %.0f "$s|$f|mcpu")" \
            "$(med %.0f "$s|$f|util")" "$(med %.0f "$s|$f|cbusy")" "$(med %.0f "$s|$f|cutil")" \
            "$(med %.1f "$s|$f|steal")" "$(med %.1f "$s|$f|mbps")" "$(echo "${V[$s|$f|rpsb]:-}" | sed 's/ *$//')"
        warn_cpu "${label[$s]} ($f)" "$(med %.0f "$s|$f|steal")" "$(med %.0f "$s|$f|util")" "$(med %.0f "$s|$f|cbusy")"
    done
done
for s in uring epoll; do
    case " $servers " in *" $s "*) ;; *) continue ;; esac
    for p in $peers; do
        suffix=""; [ $s = epoll ] && suffix=_epoll
        [ $p = h2o ] && suffix=${suffix}_vs_h2o
        for f in $FILES; do
            for m in rps cpu_ns_per_req client_cpu_ns_per_req machine_cpu_ns_per_req p99_ms mbps; do
                case $f.$m in
                    4k.mbps|hs.mbps|1m.rps) continue ;;
                esac
                fl=()
                case $m in
                    rps) k=rpsb; q=%.0f ;;
                    cpu_ns_per_req) k=cpu; q=%.0f ;;
                    client_cpu_ns_per_req) k=ccpu; q=%.0f ;;
                    machine_cpu_ns_per_req) k=mcpu; q=%.0f ;;
                    p99_ms) k=p99; q=%.3f ;;
                    mbps) k=mbpsb; q=%.1f ;;
                esac
                case $m in cpu_ns_per_req|machine_cpu_ns_per_req) fl=(floor="$(median "floor|$f|$k")") ;; esac
                if [ $TLS = 1 ]; then
                    fl=()
                    [ $m = cpu_ns_per_req ] && [ $f = hs ] && fl=(floor="$FLOOR_HS")
                    [ $m = cpu_ns_per_req ] && [ $f = 1m ] && fl=(floor="$FLOOR_1M")
                fi
                "$AGG" headline -f $q "${SCHEME}_${f}_${m}${suffix}${HS}" \
                    ours="$(median "$s|$f|$k")" peer="$(median "$p|$f|$k")" "${fl[@]}"
            done
        done
    done
done
# --tls: the memory an idle TLS connection costs each server: IDLE (600)
# clients connect, handshake, GET the 4 KiB file on a kept-alive
# connection and stay; the server's RSS grows by what they hold (record
# buffers released when idle: both servers use SSL_MODE_RELEASE_BUFFERS;
# both free their own buffers between requests; ours keeps the co and a
# 5 KiB connection object besides OpenSSL's state; heap fragmentation
# counts too)
if [ $TLS = 1 ]; then
    IDLE=${BENCH_HTTP_IDLE:-600}
    cat > "$TMPD/idle.py" <<'PY'
import resource, socket, ssl, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
keep = []
for i in range(n):
    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="localhost")
    s.sendall(b"GET /4k.bin HTTP/1.1\r\nHost: x\r\n\r\n")
    got = b""
    while b"\r\n\r\n" not in got or len(got) < got.index(b"\r\n\r\n") + 4 + 4096:
        got += s.recv(65536)
    keep.append(s)
print("ready", flush=True)
sys.stdin.read()
PY
    rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null; }
    for s in $servers; do
        [ "${live[$s]}" = 1 ] || continue
        r0=$(rss_kb "${pid[$s]}")
        coproc IDLEPY { python3 "$TMPD/idle.py" "${port[$s]}" "$IDLE" 2>&1; }
        read -r -t 120 line <&"${IDLEPY[0]}" || line=""
        r1=$(rss_kb "${pid[$s]}")
        kill "$IDLEPY_PID" 2>/dev/null; wait "$IDLEPY_PID" 2>/dev/null
        if [ "$line" = ready ] && [ -n "$r0" ] && [ -n "$r1" ]; then
            addv "$s|idle" "$(( (r1 - r0) * 1024 / IDLE ))"
            echo "idle: ${label[$s]}: RSS $r0 KiB, with $IDLE idle TLS connections $r1 KiB: $(( (r1 - r0) * 1024 / IDLE )) B each"
        else
            say "idle connections against ${label[$s]}: ${line:-no answer}"; addv "$s|idle" n/a
        fi
    done
    for s in uring epoll; do
        case " $servers " in *" $s "*) ;; *) continue ;; esac
        suffix=""; [ $s = epoll ] && suffix=_epoll
        "$AGG" headline -f %.0f "https_idle_conn_bytes$suffix$HS" ours="$(median "$s|idle")" peer="$(median "nginx|idle")"
    done
fi
[ $mode = smoke ] && [ $ours_missing = 1 ] && { say "aco_http or http_floor is missing or failed: --smoke fails"; fail=1; }
exit $fail
