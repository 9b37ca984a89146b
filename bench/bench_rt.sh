#!/usr/bin/env bash
# bench_rt.sh - the coroutine runtime (rt/) side by side with its peers.
#
#   bash bench/bench_rt.sh [--quick|--smoke] [OUTPUT_DIR]
#
# --smoke: one round of tiny runs, every section: not figures, a check that
# every program and peer builds and runs (tests/check_rt_bench.sh).
#
# OUTPUT_DIR (default output) is where the runtime's programs are
# (aco_rt_bench, aco_resp, aco_nc); the peers are built into
# OUTPUT_DIR/bench-peers.  Every figure is the median of interleaved rounds
# (5, --quick 2; the memory figure is one run each), each run pinned with
# taskset.  Sections, each ending with `headline` lines:
#
#   a. resp    redis-benchmark -c 50 -P 1 and -P 16, one test (ping_inline,
#              set, get) per run, against redis-server 7.0 (--save ""
#              --appendonly no), aco_resp --backend uring / epoll and the
#              floor, resp_floor (bench/resp_floor.c: epoll_wait, recv and
#              one send of canned replies, nothing else); server on CPU 1,
#              redis-benchmark on CPU 0: requests/s and p99 (ms) from its
#              --csv line, CPU per request as bench_http.sh counts it (the
#              server's utime+stime, the client's rusage, the machine's
#              busy time; requests/s only from rounds where the server was
#              >= 95% busy: docs/benchmarks.md, "CPU per request").
#   b. chan    ping-pong over unbuffered channels, one CPU: aco_rt_bench
#              pingpong vs Go (go/pingpong.go) and Boost.Fiber
#              (fiber_pingpong.cpp); the single-thread build
#              (aco_rt_bench_st: no locked instructions) in the same rounds;
#              the floor, aco_rt_bench switches: the round trip's two
#              hand-offs (aco_yield_to) with no channel; and switches_call,
#              the same made inside a called function that then returns
#              (what a blocking call cannot avoid: a return the CPU's
#              predictor misses after each switch); and the exchange with
#              both cos in one function (aco_rt_bench pingpong_same, Go's
#              -same: no return missed) beside its floor, switches_deep.
#   c. spawn   aco_rt_bench spawn_join vs Go (go/spawn.go), and the runtime's
#              own wake / timer / mutex / mutex_handoff figures, each also
#              of the single-thread build, in the same rounds; wake's floor
#              one hand-off (half of `switches`); a byte's round trip over
#              a socketpair with the sender's wait on 1, 2 and 16
#              descriptors (aco_rt_bench poll1, poll2, poll16: what
#              aco_rt_poll, the hooks' poll and select, costs beside
#              aco_rt_wait).
#   d. parked  memory per parked coroutine, parked in a sleep and in a
#              channel receive: aco_rt_bench parked N and parked_chan N vs
#              Go (go/parked.go -mode sleep and -mode chan).
#   e. nc      a 4 GiB (--quick 512 MiB) loopback transfer, aco_nc vs
#              OpenBSD nc, same sparse source file, sink /dev/null.
#   f. threads both CPUs: channel ping-pong between two threads
#              (aco_rt_bench xpingpong, pinned to CPUs 0 and 1) vs Go with
#              GOMAXPROCS=2 and Boost.Fiber on two threads (shared_work);
#              (the floor: aco_rt_bench cacheline, one cache line bounced
#              between the same CPUs by two plain threads); the same
#              ping-pong with both pool threads on CPU 0 (xpingpong_1cpu:
#              each thread must sleep for the other to run), its floor two
#              plain threads passing a turn by futex there (futex_1cpu);
#              spawn-to-pool throughput (aco_rt_bench pool_spawn 10000 vs
#              go/spawn.go -batch -procs 2 -n 10000, and vs our own pool of
#              one thread, pool_spawn1); redis-benchmark -c 50
#              -P 16 (set, get; unpinned) against aco_resp --threads 2
#              (--accept reuseport and handoff) vs redis-server
#              --io-threads 2 --io-threads-do-reads yes vs aco_resp
#              --threads 1; and bench/bench_hook.sh when it is there.
#   g. http    bench/bench_http.sh: aco_http (one thread, --backend uring
#              and epoll) vs Debian's nginx (one worker) and h2o (one
#              thread), each at its best (see its header), wrk -t1 -c100 on
#              a 4 KiB and a 1 MiB file, server on CPU 1, wrk on CPU 0:
#              requests/s, p99, server and client CPU ns per request, MB/s
#              (6 s runs, --quick 4 s, --smoke 2 s).
#   h. file    bench/bench_file.sh: 4 KiB random reads of a 4 GiB file
#              (--direct and from the page cache, queue depth 1 and 32):
#              aco_file_bench randread (N cos doing aco_rt_pread, --backend
#              uring and epoll) vs fio --ioengine=io_uring at its best and
#              a pool of N pthreads doing pread(2); a 1 GiB copy,
#              aco_rt_splice through a pipe vs cp; all on CPU 1: IOPS, CPU
#              ns per I/O, IOPS per CPU second, seconds (5 s runs, --quick
#              3 s; --smoke a 64 MiB file and 1 s runs).
#
# A peer whose toolchain is missing is left out with one line naming the
# Debian package; a program of ours not built yet gives ours=n/a.  The exit
# status is non-zero only when a peer that should work fails.
#
# Sizes: -P 16 runs use -n 1000000 (--quick 200000); -P 1 runs use
# -n 300000 (--quick 200000): at -P 1 a server here does 35k-80k requests/s,
# and the section runs 4 servers x 3 tests x 5 rounds of each, so -n 1000000
# at -P 1 alone would take 15-30 minutes; one clock tick (10 ms) over
# 300000 requests is 33 ns a request, the CPU figures' resolution.  The
# whole run must stay within 20 minutes (its time is printed at its end).
#
# Every headline's ratio is ours/peer (or ours/target): above 1 is better
# for rps and MiB/s, worse for ns, bytes and ms.  The machine must be idle:
# the script says how busy it is before and after the run, and after each
# section how much CPU other work took meanwhile (a warning from 10%).
#
# Environment:
#   BENCH_RT_ROUNDS=N          rounds instead of 5 (--quick: 2)
#   BENCH_RT_REDIS_N_P1=N      requests per -P 1 run (see Sizes)
#   BENCH_RT_REDIS_N_P16=N     requests per -P 16 run
#   BENCH_RT_NC_MIB=N          transfer size in MiB (4096, --quick 512)
#   BENCH_RT_NC_SOURCE=data    the nc source holds random data (a 1 MiB
#                              random block repeated, written to /dev/shm
#                              first: it takes the transfer's size in RAM)
#                              instead of sparse (the default; see e. below)
#   BENCH_RT_SECTIONS="a b c d e f g h"   the sections to run
#   BENCH_RT_SERVER_CPU=1, BENCH_RT_CLIENT_CPU=0   the CPUs to pin to: the
#                              servers and the single-CPU programs to the
#                              first, redis-benchmark and nc's client to the
#                              second
#   BENCH_RT_GO=/path/to/go    the Go toolchain (default /usr/local/go/bin/go
#                              when present, else `go` in PATH, Debian's);
#                              a second one (Debian's /usr/lib/go-1.19 or
#                              `go` in PATH) if different runs beside it
#                              in b and c (rows of its own), and the Go
#                              headlines there take the faster of the two
#   BENCH_RT_OURS_RESP_CMD     the command line of our RESP server, {port}
#                              and {backend} replaced (uring, epoll), run
#                              with eval; default
#                              "OUTPUT_DIR/aco_resp --port {port} --backend {backend}".
#                              To check the harness with redis as "ours":
#                              BENCH_RT_OURS_RESP_CMD='redis-server --save "" --appendonly no --port {port}'
#   BENCH_RT_OURS_NC_CMD       our netcat, run as `CMD -l PORT` (server,
#                              stdin /dev/null, stdout the sink) and
#                              `CMD 127.0.0.1 PORT` (client, stdin the
#                              source); default OUTPUT_DIR/aco_nc.  To check
#                              with OpenBSD nc as "ours": BENCH_RT_OURS_NC_CMD='nc -N'
#   BENCH_RT_OURS_BENCH_CMD    our micro-benchmark program (default
#                              OUTPUT_DIR/aco_rt_bench), given a subcommand:
#                              pingpong N, spawn_join N (N: the peers'
#                              segment size, 1000000, --quick 200000), wake,
#                              timer, mutex, mutex_handoff print
#                              `<metric> <ns>`; parked N and parked_chan N
#                              print `parked_bytes_per_co <B>` (the
#                              single-thread build's rows run
#                              OUTPUT_DIR/aco_rt_bench_st, when built)
set -uo pipefail
export LC_ALL=C     # '.' in numbers: EPOCHREALTIME, bash's time, awk

usage() {
    sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'
}

quick=0
OUT=output
while [ $# -gt 0 ]; do
    case $1 in
        --quick) quick=1 ;;
        --smoke) quick=2 ;;
        -h|--help) usage; exit 0 ;;
        -*) echo "bench_rt: unknown option $1" >&2; usage >&2; exit 2 ;;
        *) OUT=$1 ;;
    esac
    shift
done

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/lib.sh
. "$HERE/../tests/lib.sh"
mkdir -p "$OUT" || exit 2
OUT=$(cd "$OUT" && pwd)
PEERS=$OUT/bench-peers
mkdir -p "$PEERS" || exit 2
TMPD=$(mktemp -d "${TMPDIR:-/tmp}/bench_rt.XXXXXX") || exit 2

MICRO_N=
if [ $quick = 2 ]; then
    ROUNDS=1
    export BENCH_RT_ROUNDS=1
    REDIS_N_P1=5000 REDIS_N_P16=20000 NC_MIB=16 PARKED_N=10000
    LOOP_N=20000 LOOP_SEG=2 LOOP_WARM=2000
    # section c's own figures in segments of MICRO_N (else aco_rt_bench's
    # sizes: poll16's 8 x 100000 round trips took 17 s)
    MICRO_N=2000
elif [ $quick = 1 ]; then
    ROUNDS=${BENCH_RT_ROUNDS:-2}
    REDIS_N_P1=${BENCH_RT_REDIS_N_P1:-200000}
    REDIS_N_P16=${BENCH_RT_REDIS_N_P16:-200000}
    NC_MIB=${BENCH_RT_NC_MIB:-512}
    PARKED_N=100000
    # the peers' own loop sizes: per segment, segments, warm-up
    LOOP_N=200000 LOOP_SEG=5 LOOP_WARM=50000
else
    ROUNDS=${BENCH_RT_ROUNDS:-5}
    REDIS_N_P1=${BENCH_RT_REDIS_N_P1:-300000}
    REDIS_N_P16=${BENCH_RT_REDIS_N_P16:-1000000}
    NC_MIB=${BENCH_RT_NC_MIB:-4096}
    PARKED_N=1000000
    LOOP_N=1000000 LOOP_SEG=7 LOOP_WARM=200000
fi
SECTIONS=" ${BENCH_RT_SECTIONS:-a b c d e f g h} "
SERVER_CPU=${BENCH_RT_SERVER_CPU:-1}
CLIENT_CPU=${BENCH_RT_CLIENT_CPU:-0}
if [ "$(nproc)" -lt 2 ] && [ -z "${BENCH_RT_SERVER_CPU:-}" ]; then
    SERVER_CPU=0
    echo "bench_rt: one CPU only: servers and clients share CPU 0"
fi
case $SERVER_CPU$CLIENT_CPU in
    *[!0-9]*) echo "bench_rt: BENCH_RT_SERVER_CPU and BENCH_RT_CLIENT_CPU name one CPU each" >&2; exit 2 ;;
esac
CLK_TCK=$(getconf CLK_TCK)
# a round counts for requests/s when the server's CPU was idle less than
# 100 - BUSY_MIN % of it: the bottleneck (a smoke run counts every round:
# it checks the pipeline)
BUSY_MIN=95
[ $quick = 2 ] && BUSY_MIN=0 CPU_WARN=0    # (nor its few ticks a warning)

peer_fail=0
SRC_FILE=""      # the sparse source of the nc transfer

cleanup() {
    kill_pids wait
    [ -n "$SRC_FILE" ] && rm -f "$SRC_FILE" "$SRC_FILE.chunk"
    rm -rf "$TMPD"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

say() { echo "bench_rt: $*"; }
peer_failed() { say "PEER FAILED: $*"; peer_fail=1; }
have() { command -v "$1" >/dev/null 2>&1; }

# ---- numbers ---------------------------------------------------------------
declare -A V   # V[key] = the rounds' values, space separated ("n/a" kept)

# Medians, ratios and headline lines are bench_agg's (bench/bench_agg.c),
# as bench_http.sh's and bench_hook.sh's are (BENCH_AGG): one not built, or
# older than its source, is built into the peers' directory.
AGG=""
for agg in "$OUT/bench_agg" "$PEERS/bench_agg"; do
    [ -x "$agg" ] && [ ! "$HERE/bench_agg.c" -nt "$agg" ] && { AGG=$agg; break; }
done
if [ -z "$AGG" ]; then
    AGG=$PEERS/bench_agg
    echo "build: ${CC:-gcc} -O2 $HERE/bench_agg.c -o $AGG"
    # shellcheck disable=SC2086
    ${CC:-gcc} -O2 "$HERE/bench_agg.c" -o "$AGG" || { say "FAILED: bench_agg.c does not build"; exit 2; }
fi
export BENCH_AGG=$AGG

addv() { V[$1]+="$2 "; }
# median KEY: the median of the numeric values of KEY, n/a if none.
median() { "$AGG" median ${V[$1]:-}; }
# med FORMAT KEY: the median, formatted
med() { "$AGG" median -f "$1" ${V[$2]:-}; }
# The faster Go of the two toolchains (the peer at its best): the value of
# metric $2 (the main Go's) or $3 (the second's, when there and lower),
# and which one, in G_BEST and G_BEST_VER.
go_best() {
    G_BEST=$(med "$1" "$2") G_BEST_VER=$GO_VER
    if [ $have_go_alt = 1 ]; then
        local a
        a=$(med "$1" "$3")
        if [ "$a" != n/a ] && { [ "$G_BEST" = n/a ] || awk -v a="$a" -v b="$G_BEST" 'BEGIN {exit !(a < b)}'; }; then
            G_BEST=$a G_BEST_VER=$GO_ALT_VER
        fi
    fi
}
# headline [-f FORMAT] [-r] NAME KEY=OURS KEY=PEER: its `headline` line
headline() { "$AGG" headline "$@"; }
# rounds KEY: the values of every round, for the tables
rounds() { echo "${V[$1]:-}" | sed 's/ *$//'; }

# ---- the machine -----------------------------------------------------------
echo "== bench_rt $(date -u '+%Y-%m-%d %H:%M:%S UTC')$( [ $quick = 1 ] && echo ' (--quick)')"
echo "machine: $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1), nproc $(nproc), kernel $(uname -r)"
echo "rounds: $ROUNDS (interleaved, medians), server CPU $SERVER_CPU, client CPU $CLIENT_CPU, CLK_TCK $CLK_TCK"
. "$HERE/lib.sh"         # busy_pct, check_idle
check_idle "before the run"
# others_start / others_end NAME: the CPU time the machine spent on other
# work than this script and its children (all reaped by then) during a
# section: /proc/stat's busy ticks less our own and our children's
others_ticks() {
    local all mine s
    all=$(awk '/^cpu / {print $2 + $3 + $4 + $7 + $8}' /proc/stat)   # steal apart: others_end
    s=$(cat /proc/$$/stat)
    s=${s##*) }
    # shellcheck disable=SC2086
    set -- $s
    mine=$(( ${12} + ${13} + ${14} + ${15} ))
    echo $((all - mine))
}
others_start() { OTHERS0=$(others_ticks); SECTION_T0=$(now_us); read -r _ STEAL0 <<< "$(machine_ticks)"; }
others_end() {
    local d w pct
    d=$(( $(others_ticks) - OTHERS0 ))
    w=$(( $(now_us) - SECTION_T0 ))
    pct=$(awk -v d="$d" -v hz="$CLK_TCK" -v w="$w" -v n="$(nproc)" \
        'BEGIN {printf "%.0f\n", (w > 0) ? 100 * d / hz / (w / 1e6) / n : 0}')
    [ "$pct" -lt 0 ] && pct=0   # tick rounding
    # what the hypervisor gave other guests meanwhile (steal)
    local steal st
    read -r _ steal <<< "$(machine_ticks)"
    st=$(awk -v d=$((steal - STEAL0)) -v hz="$CLK_TCK" -v w="$w" -v n="$(nproc)" \
        'BEGIN {printf "%.0f\n", (w > 0) ? 100 * d / hz / (w / 1e6) / n : 0}')
    [ "$w" -ge 2000000 ] && [ "$st" -ge 5 ] &&
        say "warning: during $1 the hypervisor took ${st}% of the machine's CPUs (steal): its figures are suspect"
    if [ "$w" -lt 2000000 ]; then
        return 0                # too short to tell
    elif [ "$pct" -ge 10 ]; then
        say "warning: during $1 ($((w / 1000000)) s) other work used ${pct}% of the machine's CPUs: its figures are suspect"
    else
        echo "($1 took $((w / 1000000)) s; other work used ${pct}% of the CPUs meanwhile)"
    fi
}

# ---- the peers -------------------------------------------------------------
# Go: /usr/local/go when present, else Debian's (golang-go) in PATH.
GO=${BENCH_RT_GO:-}
if [ -z "$GO" ]; then
    if [ -x /usr/local/go/bin/go ]; then GO=/usr/local/go/bin/go
    elif have go; then GO=$(command -v go)
    fi
fi
GO_ALT=""
if [ -n "$GO" ]; then
    for g in "$(command -v go 2>/dev/null)" /usr/lib/go-1.19/bin/go /usr/lib/go/bin/go; do
        if [ -n "$g" ] && [ -x "$g" ] && [ "$(readlink -f "$g")" != "$(readlink -f "$GO")" ]; then
            GO_ALT=$g
            break
        fi
    done
fi
export GOFLAGS=-mod=mod GOTOOLCHAIN=local GOPROXY=off GO111MODULE=on
if [ -z "${HOME:-}" ] && [ -z "${GOCACHE:-}" ]; then
    export GOCACHE=$PEERS/go-cache GOPATH=$PEERS/go-path
fi

GO_VER="" GO_ALT_VER=""
go_build() {   # go_build GO SUFFIX PROGRAM...: go_<program>SUFFIX
    local go=$1 suf=$2 p
    shift 2
    for p in "$@"; do
        echo "build: (cd $HERE/go && GOFLAGS=-mod=mod GOTOOLCHAIN=local $go build -o $PEERS/go_$p$suf $p.go)"
        (cd "$HERE/go" && "$go" build -o "$PEERS/go_$p$suf" "$p.go") || return 1
    done
}
have_go=0 have_go_alt=0
if [ -z "$GO" ]; then
    say "leaving out go: install golang-go"
elif GO_VER=$("$GO" env GOVERSION 2>/dev/null) && go_build "$GO" "" pingpong spawn parked; then
    have_go=1
    if [ -n "$GO_ALT" ] && GO_ALT_VER=$("$GO_ALT" env GOVERSION 2>/dev/null) &&
            [ "$GO_ALT_VER" != "$GO_VER" ]; then
        if go_build "$GO_ALT" "_alt" pingpong spawn; then
            have_go_alt=1
        else
            say "the second Go ($GO_ALT) failed to build the peers: the first runs alone"
        fi
    fi
else
    peer_failed "go ($GO) failed to build the peers"
fi

# Boost.Fiber: linked statically when libboost_fiber.a is there: the shared
# library reaches its thread_local active-fiber pointer through
# __tls_get_addr on every switch (~18% of the ping-pong round trip here);
# linked into the executable, that access becomes a plain %fs load.
have_fiber=0 FIBER_LINK="" BOOST_VER=n/a
CXX=${CXX:-g++}
if [ -r /usr/include/boost/version.hpp ]; then
    BOOST_VER=$(sed -n 's/^#define BOOST_LIB_VERSION "\(.*\)"/\1/p' /usr/include/boost/version.hpp | tr _ .)
fi
if ! have "$CXX"; then
    say "leaving out boost_fiber: install g++ libboost-fiber-dev"
elif [ ! -r /usr/include/boost/fiber/all.hpp ]; then
    say "leaving out boost_fiber: install libboost-fiber-dev"
else
    if [ -f "$("$CXX" -print-file-name=libboost_fiber.a)" ] &&
            [ -f "$("$CXX" -print-file-name=libboost_context.a)" ]; then
        FIBER_LINK="-Wl,-Bstatic -lboost_fiber -lboost_context -Wl,-Bdynamic"
        fiber_kind=static
    else
        FIBER_LINK="-lboost_fiber -lboost_context"
        fiber_kind=shared
    fi
    cmd="$CXX -O2 -std=c++17 $HERE/fiber_pingpong.cpp $FIBER_LINK -o $PEERS/fiber_pingpong"
    echo "build: $cmd"
    # shellcheck disable=SC2086
    if $cmd; then have_fiber=1
    else peer_failed "boost_fiber: the build failed"
    fi
fi

have_redis=0
if have redis-server && have redis-benchmark && have redis-cli; then
    have_redis=1
else
    say "leaving out redis: install redis-server redis-tools"
fi

have_nc=0
if have nc && grep -q OpenBSD < <(nc -h 2>&1); then
    have_nc=1
else
    say "leaving out nc: install netcat-openbsd"
fi

echo "versions (peers):"
[ $have_redis = 1 ] && echo "  $(redis-server --version)" && echo "  $(redis-benchmark --version)"
[ $have_go = 1 ] && echo "  $("$GO" version) ($GO)"
[ $have_go_alt = 1 ] && echo "  $("$GO_ALT" version) ($GO_ALT, the second Go)"
[ $have_fiber = 1 ] && echo "  Boost $BOOST_VER (/usr/include/boost/version.hpp), Boost.Fiber linked $fiber_kind, $("$CXX" --version | head -1)"
[ $have_nc = 1 ] && echo "  $(nc -h 2>&1 | head -1)"

# ---- ours ------------------------------------------------------------------
OURS_BENCH=${BENCH_RT_OURS_BENCH_CMD:-$OUT/aco_rt_bench}
OURS_RESP_DEFAULT="$OUT/aco_resp --port {port} --backend {backend}"
OURS_RESP=${BENCH_RT_OURS_RESP_CMD:-$OURS_RESP_DEFAULT}
OURS_NC=${BENCH_RT_OURS_NC_CMD:-$OUT/aco_nc}
# exists CMD: its first word is an executable
exists() {
    local w
    read -r w _ <<< "$1"
    [ -n "$w" ] && { [ -x "$w" ] && [ -f "$w" ] || { [[ $w != */* ]] && have "$w"; }; }
}
have_ours_bench=0 have_ours_resp=0 have_ours_nc=0
if exists "$OURS_BENCH"; then have_ours_bench=1
else say "ours: ${OURS_BENCH%% *} is not built yet: its figures are n/a"
fi
if exists "$OURS_RESP"; then have_ours_resp=1
else say "ours: ${OURS_RESP%% *} is not built yet: ours=n/a in the resp section"
fi
if exists "$OURS_NC"; then have_ours_nc=1
else say "ours: ${OURS_NC%% *} is not built yet: ours=n/a in the nc section"
fi
echo "ours: bench '$OURS_BENCH', resp '$OURS_RESP', nc '$OURS_NC'"

# resp_pong PORT: the RESP server at 127.0.0.1:PORT answers PING with PONG
resp_pong() { [ "$(redis-cli -h 127.0.0.1 -p "$1" ping 2>/dev/null)" = PONG ]; }

# run_metric KEY KEYNAME TIMEOUT CMD...: run CMD pinned to the server CPU,
# add the value of its `KEYNAME <v>` line to V[KEY] (n/a if none); returns 1
# when it failed.
run_metric() {
    local key=$1 name=$2 to=$3 out v
    shift 3
    out=$(timeout "$to" taskset -c "$SERVER_CPU" "$@" 2>"$TMPD/metric.err")
    v=$(awk -v k="$name" '$1 == k && NF >= 2 {print $2; exit}' <<< "$out")
    if [ -z "$v" ]; then
        addv "$key" n/a
        LAST_ERR="$(tail -1 "$TMPD/metric.err" 2>/dev/null)"
        return 1
    fi
    addv "$key" "$v"
}

# ---- a. resp ---------------------------------------------------------------
RESP_TESTS="ping_inline set get"
resp_section() {
    echo
    echo "== a. resp: redis-benchmark -c 50, -P 1 -n $REDIS_N_P1, -P 16 -n $REDIS_N_P16, one test per run"
    echo "commands: taskset -c $SERVER_CPU redis-server --save \"\" --appendonly no --port P"
    echo "          taskset -c $SERVER_CPU ${OURS_RESP//\{port\}/P}   ({backend}: uring, epoll)"
    echo "          taskset -c $SERVER_CPU $OUT/resp_floor --port P   (the floor: epoll_wait, recv, one send of canned replies)"
    echo "          taskset -c $CLIENT_CPU redis-benchmark -h 127.0.0.1 -p P -t TEST -c 50 -n N -P {1,16} --csv"
    local -A port pid live label
    local servers="" s cmd tmpl r t p n
    label[redis]="redis-server $(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p')"
    label[uring]="aco_resp uring"
    label[epoll]="aco_resp epoll"
    label[floor]="resp_floor (the floor)"
    servers="redis uring epoll floor"
    for s in $servers; do
        live[$s]=0
        if [ $s != redis ] && [ $s != floor ] && [ $have_ours_resp = 0 ]; then continue; fi
        if [ $s = floor ] && [ ! -x "$OUT/resp_floor" ]; then
            say "ours: $OUT/resp_floor is not built (bash make.sh): floor=n/a"
            continue
        fi
        fresh_port; port[$s]=$FREE_PORT
        if [ $s = redis ]; then
            tmpl='redis-server --save "" --appendonly no --port {port}'
        elif [ $s = floor ]; then
            tmpl="$OUT/resp_floor --port {port}"
        else
            tmpl=$OURS_RESP
        fi
        cmd=${tmpl//\{port\}/${port[$s]}}
        cmd=${cmd//\{backend\}/$s}
        echo "start: taskset -c $SERVER_CPU $cmd"
        ( cd "$TMPD" && eval "exec taskset -c $SERVER_CPU $cmd" ) \
            </dev/null >"$TMPD/server.$s.log" 2>&1 &
        pid[$s]=$!
        PIDS+=("${pid[$s]}")
        if wait_until 100 0.1 "${pid[$s]}" resp_pong "${port[$s]}"; then
            live[$s]=1
        fi
        if [ "${live[$s]}" = 0 ]; then
            local why
            why=$(grep -v '^\s*$' "$TMPD/server.$s.log" | tail -1)
            kill -0 "${pid[$s]}" 2>/dev/null && why="no PONG within 10 s${why:+; last output: $why}"
            if [ $s = uring ] && [ -r /proc/sys/kernel/io_uring_disabled ] &&
                    [ "$(cat /proc/sys/kernel/io_uring_disabled)" != 0 ]; then
                why="io_uring is disabled here (kernel.io_uring_disabled=$(cat /proc/sys/kernel/io_uring_disabled)); $why"
            fi
            stop_pid "${pid[$s]}"
            if [ $s = redis ]; then
                peer_failed "redis-server did not start: ${why:-no output}"
            else
                say "ours: ${label[$s]} did not start: ${why:-no output}: its column is n/a"
            fi
        fi
    done

    # one run: the server's CPU ticks around one redis-benchmark of one test
    resp_run() {   # resp_run SERVER TEST P N
        local s=$1 t=$2 p=$3 n=$4 key="$1|$2|$3" c0 c1 w0 w1 m0 m1 k0 k1 out line ok=1
        if [ "${live[$s]}" = 0 ]; then
            addv "$key|rps" n/a; addv "$key|p50" n/a; addv "$key|p99" n/a
            addv "$key|cpu" n/a; addv "$key|util" n/a
            return 0
        fi
        c0=$(cpu_ticks "${pid[$s]}"); m0=$(machine_ticks); k0=$(cpu_ticks_of "$SERVER_CPU")
        w0=$(now_us)
        out=$(cpu_timed "$TMPD/rb.cpu" timeout $((n / 5000 + 60)) taskset -c "$CLIENT_CPU" redis-benchmark \
            -h 127.0.0.1 -p "${port[$s]}" -t "$t" -c 50 -n "$n" -P "$p" --csv 2>"$TMPD/rb.err")
        w1=$(now_us)
        c1=$(cpu_ticks "${pid[$s]}"); m1=$(machine_ticks); k1=$(cpu_ticks_of "$SERVER_CPU")
        line=$(grep -i "^\"$t\"," <<< "$out" | tr -d '"')
        # "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms",
        # "p95_latency_ms","p99_latency_ms","max_latency_ms"
        if [ -z "$line" ] || [ "$c0" = n/a ] || [ "$c1" = n/a ]; then
            ok=0
        fi
        if [ $ok = 1 ]; then
            IFS=, read -r _ rps _ _ p50 _ p99 _ <<< "$line"
            addv "$key|rps" "$rps"; addv "$key|p50" "$p50"; addv "$key|p99" "$p99"
            # CPU per request, one method (docs/benchmarks.md, "CPU per request")
            local cpu ccpu mcpu util steal cbusy cfull
            read -r cpu ccpu mcpu util steal cbusy cfull <<< "$(awk -v d=$((c1 - c0)) -v hz="$CLK_TCK" -v n="$n" \
                -v cs="$(cat "$TMPD/rb.cpu")" -v m0="$m0" -v m1="$m1" -v k0="$k0" -v k1="$k1" -v w=$((w1 - w0)) 'BEGIN {
                split(m0, a, " "); split(m1, z, " "); split(k0, x, " "); split(k1, y, " "); ws = w / 1e6
                printf "%.1f %.1f %.1f %.0f %.1f %.0f %.0f\n", d * 1e9 / hz / n, cs * 1e9 / n,
                    (z[1] - a[1]) * 1e9 / hz / n, 100 * d / hz / ws, 100 * (y[3] - x[3]) / hz / ws,
                    100 * (y[1] - x[1]) / hz / ws, full(100 - 100 * (y[2] - x[2]) / hz / ws) }
        function full(v) { return v < 0 ? 0 : v > 100 ? 100 : v }')"
            addv "$key|cpu" "$cpu"; addv "$key|ccpu" "$ccpu"; addv "$key|mcpu" "$mcpu"
            addv "$key|util" "$util"; addv "$key|steal" "$steal"; addv "$key|cbusy" "$cbusy"
            # requests/s count where the server's CPU was never idle: the bottleneck
            if [ "$cfull" -ge "$BUSY_MIN" ]; then addv "$key|rpsb" "$rps"
            else addv "$key|rpsb" "idle:$((100 - cfull))%"; fi
        else
            addv "$key|rps" n/a; addv "$key|p50" n/a; addv "$key|p99" n/a
            addv "$key|cpu" n/a; addv "$key|util" n/a
            local why
            why=$( { tail -1 "$TMPD/rb.err"; tail -1 <<< "$out"; } 2>/dev/null | tr '\n\r' '  ')
            kill -0 "${pid[$s]}" 2>/dev/null || { live[$s]=0; why="the server exited; $why"; }
            if [ $s = redis ]; then
                peer_failed "redis-benchmark -t $t -P $p against ${label[$s]}: ${why:-no csv line}"
            else
                say "ours: redis-benchmark -t $t -P $p against ${label[$s]} failed: ${why:-no csv line}"
            fi
        fi
    }

    local order
    for r in $(seq 1 "$ROUNDS"); do
        # rotate the servers' order from round to round
        case $((r % 4)) in
            1) order="redis uring epoll floor" ;;
            2) order="uring epoll floor redis" ;;
            3) order="epoll floor redis uring" ;;
            0) order="floor redis uring epoll" ;;
        esac
        for p in 1 16; do
            if [ $p = 1 ]; then n=$REDIS_N_P1; else n=$REDIS_N_P16; fi
            for t in $RESP_TESTS; do
                for s in $order; do
                    resp_run "$s" "$t" "$p" "$n"
                done
            done
        done
        echo "round $r/$ROUNDS done ($(date -u +%H:%M:%S))"
    done

    echo
    echo "(CPU per request, docs/benchmarks.md \"CPU per request\": srv the server process's utime+stime (every"
    echo " thread), cli redis-benchmark's (its rusage), all every CPU's busy time (/proc/stat), each over -n"
    echo " requests; srv% of one CPU, cpu% how busy the server's CPU was; steal% what the hypervisor took.  rps_b"
    echo " counts only rounds where the server's CPU was idle less than $((100 - BUSY_MIN))% of the time, the bottleneck"
    echo " (idle:N% a round where it was idle N%: it measured the client))"
    printf '%-12s %3s  %-22s %8s %8s %8s %8s %7s %7s %7s %5s %5s %6s   %s\n' test P server rps_b rps p50_ms p99_ms \
        srv_ns cli_ns all_ns srv% cpu% steal% "rps_b of each round"
    for p in 1 16; do
        for t in $RESP_TESTS; do
            for s in $servers; do
                printf '%-12s %3s  %-22s %8s %8s %8s %8s %7s %7s %7s %5s %5s %6s   %s\n' "$t" "$p" "${label[$s]}" \
                    "$(med %.0f "$s|$t|$p|rpsb")" "$(med %.0f "$s|$t|$p|rps")" \
                    "$(med %.3f "$s|$t|$p|p50")" "$(med %.3f "$s|$t|$p|p99")" \
                    "$(med %.0f "$s|$t|$p|cpu")" "$(med %.0f "$s|$t|$p|ccpu")" \
                    "$(med %.0f "$s|$t|$p|mcpu")" "$(med %.0f "$s|$t|$p|util")" \
                    "$(med %.0f "$s|$t|$p|cbusy")" "$(med %.1f "$s|$t|$p|steal")" "$(rounds "$s|$t|$p|rpsb")"
                warn_cpu "${label[$s]} -t $t -P $p" "$(med %.0f "$s|$t|$p|steal")" \
                    "$(med %.0f "$s|$t|$p|util")" "$(med %.0f "$s|$t|$p|cbusy")"
            done
        done
    done
    echo "(the clock tick is $((1000000000 / CLK_TCK)) ns: srv_ns is that over -n requests at worst)"
    local suffix m f q fl
    for s in uring epoll; do
        if [ $s = uring ]; then suffix=""; else suffix=_epoll; fi
        for p in 1 16; do
            for t in $RESP_TESTS; do
                for m in rps cpu_ns_per_req client_cpu_ns_per_req machine_cpu_ns_per_req p99_ms; do
                    fl=()
                    case $m in
                        rps) f=rpsb; q=%.0f ;;
                        cpu_ns_per_req) f=cpu; q=%.0f; fl=(floor="$(median "floor|$t|$p|cpu")") ;;
                        client_cpu_ns_per_req) f=ccpu; q=%.0f ;;
                        machine_cpu_ns_per_req) f=mcpu; q=%.0f; fl=(floor="$(median "floor|$t|$p|mcpu")") ;;
                        p99_ms) f=p99; q=%.3f ;;
                    esac
                    headline -f $q "resp_${t}_P${p}_${m}${suffix}" \
                        ours="$(median "$s|$t|$p|$f")" peer="$(median "redis|$t|$p|$f")" "${fl[@]}"
                done
            done
        done
    done
    for s in $servers; do
        [ -n "${pid[$s]:-}" ] && stop_pid "${pid[$s]}"
    done
}

# ---- b. channel ping-pong, c. spawn+join and the runtime's own figures ----
loop_args_go="-n $LOOP_N -segments $LOOP_SEG -warmup $LOOP_WARM"
chan_section() {
    echo
    echo "== b. chan ping-pong over unbuffered channels, one CPU (taskset -c $SERVER_CPU), $ROUNDS interleaved rounds"
    echo "commands: $OURS_BENCH pingpong $LOOP_N"
    echo "          $OURS_BENCH switches $LOOP_N   (the floor: the two hand-offs of a round trip, no channel)"
    echo "          $OURS_BENCH switches_call $LOOP_N   (the same inside a called function: a blocking call's floor)"
    echo "          $OURS_BENCH pingpong_same $LOOP_N   (both cos in one function: no return mispredicted after a switch)"
    echo "          $OURS_BENCH switches_deep $LOOP_N   (its floor: two cos handing off in one function)"
    [ $have_go = 1 ] && echo "          $PEERS/go_pingpong $loop_args_go   ($GO_VER)"
    [ $have_go_alt = 1 ] && echo "          $PEERS/go_pingpong_alt $loop_args_go   ($GO_ALT_VER, the second Go)"
    [ $have_go = 1 ] && echo "          $PEERS/go_pingpong{,_alt} -same $loop_args_go   (both goroutines in one function)"
    [ $have_fiber = 1 ] && echo "          $PEERS/fiber_pingpong $LOOP_N $LOOP_SEG $LOOP_WARM   (Boost $BOOST_VER, $fiber_kind)"
    # the single-thread build (ACO_RT_NO_THREADS: no locked instructions)
    # in the same rounds, an extra row and headline
    local st=0 st_ok=0
    [ -x "$OUT/aco_rt_bench_st" ] && st=1 st_ok=1
    [ $st = 1 ] && echo "          $OUT/aco_rt_bench_st pingpong $LOOP_N   (single-thread build)"
    local r ours_ok=$have_ours_bench
    for r in $(seq 1 "$ROUNDS"); do
        if [ $ours_ok = 1 ]; then
            run_metric ours_pp chan_pingpong_ns 120 $OURS_BENCH pingpong "$LOOP_N" ||
                { say "ours: '$OURS_BENCH pingpong' gave no chan_pingpong_ns: ${LAST_ERR:-no output}"; ours_ok=0; }
            run_metric floor_pp switches_rtrip_ns 120 $OURS_BENCH switches "$LOOP_N" ||
                say "ours: '$OURS_BENCH switches' gave no switches_rtrip_ns: ${LAST_ERR:-no output}"
            run_metric call_pp switches_call_rtrip_ns 120 $OURS_BENCH switches_call "$LOOP_N" ||
                say "ours: '$OURS_BENCH switches_call' gave no switches_call_rtrip_ns: ${LAST_ERR:-no output}"
            run_metric same_pp chan_pingpong_same_ns 120 $OURS_BENCH pingpong_same "$LOOP_N" ||
                say "ours: '$OURS_BENCH pingpong_same' gave no chan_pingpong_same_ns: ${LAST_ERR:-no output}"
            run_metric deep_pp switches_deep_rtrip_ns 120 $OURS_BENCH switches_deep "$LOOP_N" ||
                say "ours: '$OURS_BENCH switches_deep' gave no switches_deep_rtrip_ns: ${LAST_ERR:-no output}"
        else
            addv ours_pp n/a
            addv same_pp n/a
        fi
        if [ $st_ok = 1 ]; then
            run_metric st_pp chan_pingpong_ns 120 "$OUT/aco_rt_bench_st" pingpong "$LOOP_N" ||
                { say "ours: 'aco_rt_bench_st pingpong' gave no chan_pingpong_ns: ${LAST_ERR:-no output}"; st_ok=0; }
        elif [ $st = 1 ]; then
            addv st_pp n/a
        fi
        if [ $have_go = 1 ]; then
            # shellcheck disable=SC2086
            run_metric go_pp chan_pingpong_ns 120 "$PEERS/go_pingpong" $loop_args_go ||
                peer_failed "go_pingpong: ${LAST_ERR:-no output}"
            # shellcheck disable=SC2086
            run_metric go_same_pp chan_pingpong_same_ns 120 "$PEERS/go_pingpong" -same $loop_args_go ||
                peer_failed "go_pingpong -same: ${LAST_ERR:-no output}"
        fi
        if [ $have_go_alt = 1 ]; then
            # shellcheck disable=SC2086
            run_metric go_alt_pp chan_pingpong_ns 120 "$PEERS/go_pingpong_alt" $loop_args_go ||
                peer_failed "go_pingpong_alt: ${LAST_ERR:-no output}"
            # shellcheck disable=SC2086
            run_metric go_alt_same_pp chan_pingpong_same_ns 120 "$PEERS/go_pingpong_alt" -same $loop_args_go ||
                peer_failed "go_pingpong_alt -same: ${LAST_ERR:-no output}"
        fi
        if [ $have_fiber = 1 ]; then
            run_metric fiber_pp chan_pingpong_ns 120 "$PEERS/fiber_pingpong" $LOOP_N $LOOP_SEG $LOOP_WARM ||
                peer_failed "fiber_pingpong: ${LAST_ERR:-no output}"
        fi
    done
    printf '%-34s %10s   %s\n' program ns/rtrip "each round"
    printf '%-34s %10s   %s\n' "aco_rt (ours)" "$(med %.2f ours_pp)" "$(rounds ours_pp)"
    [ $st = 1 ] && printf '%-34s %10s   %s\n' "aco_rt_st (ours, single-thread)" "$(med %.2f st_pp)" "$(rounds st_pp)"
    [ $have_go = 1 ] && printf '%-34s %10s   %s\n' "go $GO_VER" "$(med %.2f go_pp)" "$(rounds go_pp)"
    [ $have_go_alt = 1 ] && printf '%-34s %10s   %s\n' "go $GO_ALT_VER (second Go)" "$(med %.2f go_alt_pp)" "$(rounds go_alt_pp)"
    [ $have_fiber = 1 ] && printf '%-34s %10s   %s\n' "boost.fiber $BOOST_VER ($fiber_kind)" "$(med %.2f fiber_pp)" "$(rounds fiber_pp)"
    printf '%-34s %10s   %s\n' "(floor: 2 aco_yield_to, no channel)" "$(med %.2f floor_pp)" "$(rounds floor_pp)"
    printf '%-34s %10s   %s\n' "(the same inside a call)" "$(med %.2f call_pp)" "$(rounds call_pp)"
    echo "both sides of the exchange in one function (pingpong_same, go -same):"
    printf '%-34s %10s   %s\n' "aco_rt (ours)" "$(med %.2f same_pp)" "$(rounds same_pp)"
    [ $have_go = 1 ] && printf '%-34s %10s   %s\n' "go $GO_VER" "$(med %.2f go_same_pp)" "$(rounds go_same_pp)"
    [ $have_go_alt = 1 ] && printf '%-34s %10s   %s\n' "go $GO_ALT_VER (second Go)" "$(med %.2f go_alt_same_pp)" "$(rounds go_alt_same_pp)"
    printf '%-34s %10s   %s\n' "(floor: switches_deep)" "$(med %.2f deep_pp)" "$(rounds deep_pp)"
    local o g f fl
    o=$(med %.2f ours_pp); f=$(med %.2f fiber_pp); fl=$(med %.2f floor_pp)
    go_best %.2f go_pp go_alt_pp; g=$G_BEST
    [ $have_go = 1 ] && echo "(the Go headlines' peer: $G_BEST_VER, the faster Go here)"
    headline chan_pingpong_vs_go_ns ours="$o" peer="$g" floor="$fl"
    headline chan_pingpong_vs_boost_fiber_ns ours="$o" peer="$f" floor="$fl"
    # the same against the floor of a blocking call (switches_call)
    headline chan_pingpong_vs_go_call_floor_ns ours="$o" peer="$g" floor="$(med %.2f call_pp)"
    if [ $st = 1 ]; then
        o=$(med %.2f st_pp)
        headline chan_pingpong_single_thread_build_vs_go_ns ours="$o" peer="$g" floor="$fl"
    fi
    # the same exchange with every return after a switch predictable: what
    # pingpong's returns cost is the difference (docs/benchmarks.md)
    go_best %.2f go_same_pp go_alt_same_pp
    [ $have_go = 1 ] && echo "(the same-code headline's peer: $G_BEST_VER, the faster Go here)"
    headline chan_pingpong_same_code_vs_go_ns ours="$(med %.2f same_pp)" peer="$G_BEST" floor="$(med %.2f deep_pp)"
}

# The N argument of aco_rt_bench SUB in section c (none: its own).
micro_n() { if [ "$1" = spawn_join ]; then echo "$LOOP_N"; else echo "$MICRO_N"; fi; }
OURS_MICRO="spawn_join:spawn_join_ns wake:wake_ns timer:timer_ns mutex:mutex_ns mutex_handoff:mutex_handoff_ns poll1:poll1_rtrip_ns poll2:poll2_rtrip_ns poll16:poll16_rtrip_ns"
spawn_section() {
    echo
    echo "== c. spawn+join one at a time, and the runtime's own figures, one CPU (taskset -c $SERVER_CPU), $ROUNDS interleaved rounds"
    echo "commands: $OURS_BENCH spawn_join $LOOP_N; $OURS_BENCH {wake,timer,mutex,mutex_handoff,poll1,poll2,poll16}"
    [ $have_go = 1 ] && echo "          $PEERS/go_spawn $loop_args_go   ($GO_VER)"
    [ $have_go_alt = 1 ] && echo "          $PEERS/go_spawn_alt $loop_args_go   ($GO_ALT_VER, the second Go)"
    local r sm sub name st=0
    local -A ok st_ok
    [ -x "$OUT/aco_rt_bench_st" ] && st=1 &&
        echo "          $OUT/aco_rt_bench_st {spawn_join $LOOP_N,wake,timer,mutex,mutex_handoff,poll1,poll2,poll16}   (single-thread build)"
    for sm in $OURS_MICRO; do ok[${sm%%:*}]=$have_ours_bench; st_ok[${sm%%:*}]=$st; done
    for r in $(seq 1 "$ROUNDS"); do
        for sm in $OURS_MICRO; do
            sub=${sm%%:*} name=${sm#*:}
            if [ "${ok[$sub]}" = 1 ]; then
                # spawn_join gets the Go peer's segment size; the others
                # keep aco_rt_bench's own (MICRO_N in a smoke run)
                # shellcheck disable=SC2046
                run_metric "ours_$sub" "$name" 120 $OURS_BENCH "$sub" $(micro_n $sub) ||
                    { say "ours: '$OURS_BENCH $sub' gave no $name: ${LAST_ERR:-no output}"; ok[$sub]=0; }
            else
                addv "ours_$sub" n/a
            fi
            # the single-thread build (ACO_RT_NO_THREADS) in the same rounds
            if [ "${st_ok[$sub]}" = 1 ]; then
                # shellcheck disable=SC2046
                run_metric "st_$sub" "$name" 120 "$OUT/aco_rt_bench_st" "$sub" $(micro_n $sub) ||
                    { say "ours: 'aco_rt_bench_st $sub' gave no $name: ${LAST_ERR:-no output}"; st_ok[$sub]=0; }
            elif [ $st = 1 ]; then
                addv "st_$sub" n/a
            fi
            if [ $sub = wake ] && [ "${ok[wake]}" = 1 ]; then
                # wake's floor: one hand-off, half of `switches`
                # shellcheck disable=SC2046
                run_metric sw_floor switches_rtrip_ns 120 $OURS_BENCH switches $(micro_n switches) ||
                    say "ours: '$OURS_BENCH switches' gave no switches_rtrip_ns: ${LAST_ERR:-no output}"
            fi
            if [ $sub = spawn_join ]; then
                if [ $have_go = 1 ]; then
                    # shellcheck disable=SC2086
                    run_metric go_spawn spawn_join_ns 120 "$PEERS/go_spawn" $loop_args_go ||
                        peer_failed "go_spawn: ${LAST_ERR:-no output}"
                fi
                if [ $have_go_alt = 1 ]; then
                    # shellcheck disable=SC2086
                    run_metric go_alt_spawn spawn_join_ns 120 "$PEERS/go_spawn_alt" $loop_args_go ||
                        peer_failed "go_spawn_alt: ${LAST_ERR:-no output}"
                fi
            fi
        done
    done
    printf '%-34s %10s   %s\n' figure ns "each round"
    for sm in $OURS_MICRO; do
        printf '%-34s %10s   %s\n' "aco_rt (ours) ${sm#*:}" "$(med %.2f "ours_${sm%%:*}")" "$(rounds "ours_${sm%%:*}")"
    done
    [ $have_go = 1 ] && printf '%-34s %10s   %s\n' "go $GO_VER spawn_join_ns" "$(med %.2f go_spawn)" "$(rounds go_spawn)"
    [ $have_go_alt = 1 ] && printf '%-34s %10s   %s\n' "go $GO_ALT_VER spawn_join_ns (second Go)" "$(med %.2f go_alt_spawn)" "$(rounds go_alt_spawn)"
    local o g
    o=$(med %.2f ours_spawn_join)
    go_best %.2f go_spawn go_alt_spawn; g=$G_BEST
    [ $have_go = 1 ] && echo "(the Go headline's peer: $G_BEST_VER, the faster Go here)"
    headline spawn_join_vs_go_ns ours="$o" peer="$g"
    headline spawn_join_ns ours="$o" target=100
    # one switch (half of the two hand-offs `switches` times a round)
    local wfl
    wfl=$(awk -v x="$(median sw_floor)" 'BEGIN {if (x == "n/a") print x; else printf "%.2f\n", x / 2}')
    headline wake_to_run_ns ours="$(med %.2f ours_wake)" target=30 floor="$wfl"
    headline timer_insert_cancel_ns ours="$(med %.2f ours_timer)" target=25
    headline mutex_uncontended_ns ours="$(med %.2f ours_mutex)" target=5
    headline mutex_handoff_ns ours="$(med %.2f ours_mutex_handoff)" target=30
    # a wait on 2 and on 16 descriptors (aco_rt_poll) against one
    # (aco_rt_wait), in a byte's round trip over a socketpair
    headline poll_2fds_vs_1fd_rtrip_ns ours="$(med %.2f ours_poll2)" one_fd="$(med %.2f ours_poll1)"
    headline poll_16fds_vs_1fd_rtrip_ns ours="$(med %.2f ours_poll16)" one_fd="$(med %.2f ours_poll1)"
    # What separates the two builds: a locked instruction on this machine
    # (one run, for information)
    if [ $have_ours_bench = 1 ]; then
        echo "this machine's locked instructions ($OURS_BENCH locked, dependent chains, one thread):"
        timeout 60 taskset -c "$SERVER_CPU" $OURS_BENCH locked $( [ "$quick" = 2 ] && echo 200000) 2>/dev/null | sed 's/^/  /'
    fi
    # The same figures of the single-thread build (ACO_RT_NO_THREADS), run
    # in the same rounds
    if [ $st = 1 ]; then
        echo "single-thread build ($OUT/aco_rt_bench_st):"
        for sm in $OURS_MICRO; do
            printf '%-34s %10s   %s\n' "aco_rt_st ${sm#*:}" "$(med %.2f "st_${sm%%:*}")" "$(rounds "st_${sm%%:*}")"
        done
        headline mutex_uncontended_single_thread_build_ns ours="$(med %.2f st_mutex)" target=5
        headline spawn_join_single_thread_build_ns ours="$(med %.2f st_spawn_join)" target=100
        headline wake_to_run_single_thread_build_ns ours="$(med %.2f st_wake)" target=30 floor="$wfl"
        headline mutex_handoff_single_thread_build_ns ours="$(med %.2f st_mutex_handoff)" target=30
    fi
}

# ---- d. parked memory ------------------------------------------------------
parked_section() {
    echo
    echo "== d. parked memory: $PARKED_N coroutines each blocked for good (in a sleep; in a receive on one unbuffered channel nobody sends on), VmRSS growth / N, one run each (taskset -c $SERVER_CPU)"
    echo "commands: $OURS_BENCH parked $PARKED_N; $OURS_BENCH parked_chan $PARKED_N"
    [ $have_go = 1 ] && echo "          $PEERS/go_parked -mode sleep $PARKED_N; $PEERS/go_parked -mode chan $PARKED_N"
    if [ $have_ours_bench = 1 ]; then
        run_metric ours_parked parked_bytes_per_co 300 $OURS_BENCH parked "$PARKED_N" ||
            say "ours: '$OURS_BENCH parked $PARKED_N' gave no parked_bytes_per_co: ${LAST_ERR:-no output}"
        run_metric ours_parked_chan parked_bytes_per_co 300 $OURS_BENCH parked_chan "$PARKED_N" ||
            say "ours: '$OURS_BENCH parked_chan $PARKED_N' gave no parked_bytes_per_co: ${LAST_ERR:-no output}"
    fi
    if [ $have_go = 1 ]; then
        run_metric go_parked parked_bytes_per_co 300 "$PEERS/go_parked" -mode sleep "$PARKED_N" ||
            peer_failed "go_parked -mode sleep: ${LAST_ERR:-no output}"
        run_metric go_parked_chan parked_bytes_per_co 300 "$PEERS/go_parked" -mode chan "$PARKED_N" ||
            peer_failed "go_parked -mode chan: ${LAST_ERR:-no output}"
    fi
    printf '%-34s %10s %10s\n' program "sleep B/co" "chan B/co"
    printf '%-34s %10s %10s\n' "aco_rt (ours)" "$(med %.1f ours_parked)" "$(med %.1f ours_parked_chan)"
    [ $have_go = 1 ] && printf '%-34s %10s %10s\n' "go $GO_VER" "$(med %.1f go_parked)" "$(med %.1f go_parked_chan)"
    headline parked_bytes_per_co_sleep ours="$(med %.1f ours_parked)" peer="$(med %.1f go_parked)"
    headline parked_bytes_per_co_chan ours="$(med %.1f ours_parked_chan)" peer="$(med %.1f go_parked_chan)"
}

# ---- e. nc -----------------------------------------------------------------
# Both tools read the same sparse file (truncate -s, on /dev/shm when it is
# there): reads of a tmpfs hole come from the zero page, so the source costs
# one copy to user space (or nothing, for a tool that splices/sendfiles it)
# and never touches a disk.  The server's stdout is /dev/null: writes to it
# are free, so the tool and the loopback TCP path are what is measured.  The
# time runs from the client's start to the server's exit.  Once per tool, a
# checking run sends the server's stdout through a FIFO into `wc -c` and must
# count every byte; its MiB/s (a real pipe as the sink) is shown too.
#
# OpenBSD nc (netcat-openbsd 1.219): one poll() loop over stdin, stdout and
# the socket, read()/write() of at most 16384 bytes (BUFSIZE) at a time, a
# poll() before each read and each write; no splice, sendfile or
# zero-copy; socket buffers left at the kernel's defaults (autotuning) unless
# -I/-O are given.  -N: shutdown(SHUT_WR) the socket at EOF on stdin; the
# listening side exits when the peer has closed and stdin (here /dev/null)
# is at EOF.
# aco_nc (apps/aco_nc.c as written): sendfile(2) from stdin to the socket when
# stdin is a regular file (so here the sender copies nothing: the pages it
# sends are the tmpfs hole's zero page, or the data file's page-cache
# pages), splice(2) socket -> pipe -> stdout when stdout is a pipe or a file
# (the wc -c check), read()/write() through a 256 KiB buffer otherwise: so
# /dev/null, a character device, gets read() copies on the receiving side,
# as nc's does.  Measured here (4 GiB, 2 vCPU KVM): the sparse source
# flatters nc a little more than aco_nc (nc ~2080 MiB/s sparse vs ~1690 with
# BENCH_RT_NC_SOURCE=data; aco_nc ~6300 vs ~6050).
nc_section() {
    echo
    local dir=/dev/shm
    { [ -d "$dir" ] && [ -w "$dir" ]; } || dir=$TMPD
    SRC_FILE=$dir/bench_rt.$$.src
    local bytes=$((NC_MIB * 1024 * 1024)) kind=sparse
    if [ "${BENCH_RT_NC_SOURCE:-sparse}" = data ]; then
        kind="random-data"
        # a 1 MiB random block doubled up to a chunk, the chunk repeated
        local chunk=1 i
        head -c 1048576 /dev/urandom >"$SRC_FILE.chunk" || { peer_failed "no room for $SRC_FILE"; return; }
        while [ $((NC_MIB % (chunk * 2))) = 0 ] && [ $chunk -lt 64 ]; do
            cat "$SRC_FILE.chunk" "$SRC_FILE.chunk" >"$SRC_FILE" && mv "$SRC_FILE" "$SRC_FILE.chunk"
            chunk=$((chunk * 2))
        done
        for ((i = 0; i < NC_MIB / chunk; i++)); do cat "$SRC_FILE.chunk"; done >"$SRC_FILE" ||
            { rm -f "$SRC_FILE.chunk"; peer_failed "could not write $SRC_FILE"; return; }
        rm -f "$SRC_FILE.chunk"
    else
        truncate -s "${NC_MIB}M" "$SRC_FILE" || { peer_failed "truncate -s ${NC_MIB}M $SRC_FILE"; return; }
    fi
    echo "== e. nc: ${NC_MIB} MiB over loopback TCP, $kind source $SRC_FILE, server on CPU $SERVER_CPU, client on CPU $CLIENT_CPU, $ROUNDS interleaved rounds"
    echo "commands: taskset -c $SERVER_CPU nc -l PORT </dev/null >/dev/null;  taskset -c $CLIENT_CPU nc -N 127.0.0.1 PORT <$SRC_FILE >/dev/null"
    echo "          taskset -c $SERVER_CPU $OURS_NC -l PORT </dev/null >/dev/null;  taskset -c $CLIENT_CPU $OURS_NC 127.0.0.1 PORT <$SRC_FILE >/dev/null"

    # nc_run KEY SERVERCMD CLIENTCMD SINK: one transfer; SINK is /dev/null or
    # "count" (FIFO into wc -c); sets NC_ERR on failure
    nc_run() {
        local key=$1 scmd=$2 ccmd=$3 sink=$4 port spid wpid=0 t0 t1 to got
        fresh_port; port=$FREE_PORT
        to=$((NC_MIB / 20 + 30))
        NC_ERR=""
        if [ "$sink" = count ]; then
            rm -f "$TMPD/nc.fifo" "$TMPD/nc.count"
            mkfifo "$TMPD/nc.fifo"
            wc -c <"$TMPD/nc.fifo" >"$TMPD/nc.count" &
            wpid=$!
            PIDS+=("$wpid")
            # shellcheck disable=SC2086
            timeout "$to" taskset -c "$SERVER_CPU" $scmd -l "$port" </dev/null >"$TMPD/nc.fifo" 2>"$TMPD/nc.srv.err" &
        else
            # shellcheck disable=SC2086
            timeout "$to" taskset -c "$SERVER_CPU" $scmd -l "$port" </dev/null >/dev/null 2>"$TMPD/nc.srv.err" &
        fi
        spid=$!
        PIDS+=("$spid")
        if ! wait_until 200 0.025 "$spid" port_listening "$port"; then
            NC_ERR="the server ($scmd -l $port) is not listening: $(tail -1 "$TMPD/nc.srv.err")"
            stop_pid "$spid"
            [ $wpid != 0 ] && stop_pid "$wpid"
            addv "$key" n/a
            return 1
        fi
        t0=$(now_us)
        # shellcheck disable=SC2086
        timeout "$to" taskset -c "$CLIENT_CPU" $ccmd 127.0.0.1 "$port" <"$SRC_FILE" >/dev/null 2>"$TMPD/nc.cli.err"
        local crc=$?
        wait "$spid"
        local src=$?
        t1=$(now_us)
        forget_pid "$spid"
        if [ $wpid != 0 ]; then
            wait "$wpid"
            forget_pid "$wpid"
            got=$(tr -d ' ' <"$TMPD/nc.count")
            if [ "$got" != "$bytes" ]; then
                NC_ERR="the server wrote $got bytes, not $bytes"
            fi
        fi
        [ $crc != 0 ] && NC_ERR="the client exited with $crc: $(tail -1 "$TMPD/nc.cli.err") $NC_ERR"
        [ $src != 0 ] && NC_ERR="the server exited with $src: $(tail -1 "$TMPD/nc.srv.err") $NC_ERR"
        if [ -n "$NC_ERR" ]; then
            addv "$key" n/a
            return 1
        fi
        addv "$key" "$(awk -v b="$bytes" -v us=$((t1 - t0)) 'BEGIN {printf "%.0f", b / 1048576 / (us / 1e6)}')"
    }

    local ours_ok=$have_ours_nc r
    if [ $have_nc = 1 ]; then
        nc_run peer_check "nc" "nc -N" count ||
            peer_failed "nc checking run: $NC_ERR"
    fi
    if [ $ours_ok = 1 ]; then
        nc_run ours_check "$OURS_NC" "$OURS_NC" count ||
            { say "ours: checking run of $OURS_NC: $NC_ERR: ours=n/a"; ours_ok=0; }
    fi
    for r in $(seq 1 "$ROUNDS"); do
        if [ $((r % 2)) = 1 ]; then
            [ $have_nc = 1 ] && { nc_run peer "nc" "nc -N" /dev/null || peer_failed "nc: $NC_ERR"; }
        fi
        if [ $ours_ok = 1 ]; then
            nc_run ours "$OURS_NC" "$OURS_NC" /dev/null ||
                { say "ours: $OURS_NC: $NC_ERR: ours=n/a"; ours_ok=0; }
        else
            addv ours n/a
        fi
        if [ $((r % 2)) = 0 ]; then
            [ $have_nc = 1 ] && { nc_run peer "nc" "nc -N" /dev/null || peer_failed "nc: $NC_ERR"; }
        fi
    done
    printf '%-34s %10s %14s   %s\n' program MiB/s "MiB/s to wc-c" "each round (/dev/null)"
    printf '%-34s %10s %14s   %s\n' "aco_nc (ours)" "$(med %.0f ours)" "$(med %.0f ours_check)" "$(rounds ours)"
    [ $have_nc = 1 ] && printf '%-34s %10s %14s   %s\n' "OpenBSD nc" "$(med %.0f peer)" "$(med %.0f peer_check)" "$(rounds peer)"
    headline "nc_$( [ "$NC_MIB" = 4096 ] && echo 4GiB || echo "${NC_MIB}MiB")_MiBps" \
        ours="$(med %.0f ours)" peer="$(med %.0f peer)"
    rm -f "$SRC_FILE"
    SRC_FILE=""
}

# ---- f. threads ------------------------------------------------------------
XPP_N=$(case $quick in 1) echo 100000 ;; 2) echo 10000 ;; *) echo 200000 ;; esac)
XPP1_N=$(case $quick in 1) echo 5000 ;; 2) echo 1000 ;; *) echo 20000 ;; esac)
threads_section() {
    echo
    echo "== f. threads: both CPUs, $ROUNDS interleaved rounds"
    echo "commands: $OURS_BENCH xpingpong $XPP_N; $OURS_BENCH pool_spawn 10000; $OURS_BENCH pool_spawn1 10000"
    echo "          $OURS_BENCH xpingpong_1cpu $XPP1_N; $OURS_BENCH futex_1cpu $XPP1_N   (both threads on CPU 0)"
    local out OURS_RESP_BIN="$OUT/aco_resp"
    [ $have_go = 1 ] && echo "          $PEERS/go_pingpong -procs 2 -n $XPP_N -segments $LOOP_SEG -warmup 50000; $PEERS/go_spawn -batch -procs 2 -n 10000   ($GO_VER)"
    [ $have_fiber = 1 ] && echo "          $PEERS/fiber_pingpong $XPP_N $LOOP_SEG 50000 threads   (Boost $BOOST_VER, $fiber_kind)"
    local r
    for r in $(seq 1 "$ROUNDS"); do
        if [ $have_ours_bench = 1 ]; then
            # (not pinned to one CPU: the pool pins its two threads itself)
            out=$(timeout 120 $OURS_BENCH xpingpong "$XPP_N" 2>/dev/null | awk '$1 == "xchan_pingpong_ns" {print $2}')
            addv ours_xpp "${out:-n/a}"
            out=$(timeout 120 $OURS_BENCH pool_spawn 10000 2>/dev/null | awk '$1 == "pool_spawn_ns" {print $2}')
            addv ours_pspawn "${out:-n/a}"
            out=$(timeout 120 $OURS_BENCH pool_spawn1 10000 2>/dev/null | awk '$1 == "pool_spawn1_ns" {print $2}')
            addv ours_pspawn1 "${out:-n/a}"
            out=$(timeout 120 $OURS_BENCH cacheline 2>/dev/null | awk '$1 == "cacheline_rtrip_ns" {print $2}')
            addv cacheline "${out:-n/a}"
            out=$(timeout 120 $OURS_BENCH xpingpong_1cpu "$XPP1_N" 2>/dev/null | awk '$1 == "xchan_pingpong_1cpu_ns" {print $2}')
            addv ours_xpp1 "${out:-n/a}"
            out=$(timeout 120 $OURS_BENCH futex_1cpu "$XPP1_N" 2>/dev/null | awk '$1 == "futex_pingpong_1cpu_ns" {print $2}')
            addv futex1 "${out:-n/a}"
        fi
        if [ $have_go = 1 ]; then
            out=$(timeout 120 "$PEERS/go_pingpong" -procs 2 -n "$XPP_N" -segments "$LOOP_SEG" -warmup 50000 2>/dev/null |
                awk '$1 == "chan_pingpong_ns" {print $2}')
            [ -n "$out" ] || peer_failed "go_pingpong -procs 2: no output"
            addv go_xpp "${out:-n/a}"
            out=$(timeout 120 "$PEERS/go_spawn" -batch -procs 2 -n 10000 2>/dev/null | awk '$1 == "pool_spawn_ns" {print $2}')
            [ -n "$out" ] || peer_failed "go_spawn -batch -procs 2: no output"
            addv go_pspawn "${out:-n/a}"
        fi
        if [ $have_fiber = 1 ]; then
            out=$(timeout 120 "$PEERS/fiber_pingpong" "$XPP_N" "$LOOP_SEG" 50000 threads 2>/dev/null |
                awk '$1 == "xchan_pingpong_ns" {print $2}')
            [ -n "$out" ] || peer_failed "fiber_pingpong threads: no output"
            addv fiber_xpp "${out:-n/a}"
        fi
    done
    printf '%-40s %10s   %s\n' program ns "each round"
    printf '%-40s %10s   %s\n' "aco_rt xpingpong (ns/round trip)" "$(med %.2f ours_xpp)" "$(rounds ours_xpp)"
    [ $have_go = 1 ] && printf '%-40s %10s   %s\n' "go $GO_VER GOMAXPROCS=2 pingpong" "$(med %.2f go_xpp)" "$(rounds go_xpp)"
    [ $have_fiber = 1 ] && printf '%-40s %10s   %s\n' "boost.fiber shared_work, 2 threads" "$(med %.2f fiber_xpp)" "$(rounds fiber_xpp)"
    printf '%-40s %10s   %s\n' "(floor: one cache line, CPU 0 <-> 1)" "$(med %.2f cacheline)" "$(rounds cacheline)"
    printf '%-40s %10s   %s\n' "aco_rt xpingpong, both on CPU 0" "$(med %.2f ours_xpp1)" "$(rounds ours_xpp1)"
    printf '%-40s %10s   %s\n' "(floor: futex hand-over, both on CPU 0)" "$(med %.2f futex1)" "$(rounds futex1)"
    printf '%-40s %10s   %s\n' "aco_rt pool_spawn (ns/co)" "$(med %.2f ours_pspawn)" "$(rounds ours_pspawn)"
    printf '%-40s %10s   %s\n' "aco_rt pool_spawn, a 1-thread pool" "$(med %.2f ours_pspawn1)" "$(rounds ours_pspawn1)"
    [ $have_go = 1 ] && printf '%-40s %10s   %s\n' "go $GO_VER GOMAXPROCS=2 go+WaitGroup" "$(med %.2f go_pspawn)" "$(rounds go_pspawn)"
    local o g f fl
    o=$(med %.2f ours_xpp); g=$(med %.2f go_xpp); f=$(med %.2f fiber_xpp)
    fl=$(med %.2f cacheline)
    headline xchan_pingpong_vs_go2_ns ours="$o" peer="$g" floor="$fl"
    headline xchan_pingpong_vs_boost_fiber_ns ours="$o" peer="$f" floor="$fl"
    # a pool larger than its CPUs: the two threads on one CPU, each must
    # sleep for the other to run (the floor: two plain threads doing only
    # that, by futex); beside the same ping-pong on two CPUs
    headline -f %.0f xchan_pingpong_1cpu_vs_2cpus_ns ours="$(med %.2f ours_xpp1)" two_cpus="$o" \
        floor="$(med %.2f futex1)"
    # throughput: spawns per second (-r); above 1 is better: two threads
    # against one (the second thread helps), ours against Go's
    o=$(med %.2f ours_pspawn)
    headline -r -f %.0f pool_spawn_throughput_2_vs_1_thread ours="$o" one_thread="$(med %.2f ours_pspawn1)"
    headline -r -f %.0f pool_spawn_throughput_vs_go2 ours="$o" peer="$(med %.2f go_pspawn)"

    # redis-benchmark against the threaded servers
    [ $have_redis = 1 ] || return 0
    local -A port pid label
    local s cmd t
    local servers="t2rp t2ho redis2 t1"
    label[t2rp]="aco_resp --threads 2 (reuseport)"
    label[t2ho]="aco_resp --threads 2 --accept handoff"
    label[redis2]="redis-server --io-threads 2"
    label[t1]="aco_resp --threads 1"
    for s in $servers; do
        fresh_port; port[$s]=$FREE_PORT
        case $s in
            t2rp) cmd="${OURS_RESP_BIN} --port ${port[$s]} --threads 2" ;;
            t2ho) cmd="${OURS_RESP_BIN} --port ${port[$s]} --threads 2 --accept handoff" ;;
            t1) cmd="${OURS_RESP_BIN} --port ${port[$s]}" ;;
            redis2) cmd="redis-server --save '' --appendonly no --io-threads 2 --io-threads-do-reads yes --port ${port[$s]}" ;;
        esac
        [ $s != redis2 ] && [ $have_ours_resp = 0 ] && continue
        echo "start: $cmd"
        ( cd "$TMPD" && eval "exec $cmd" ) </dev/null >"$TMPD/tserver.$s.log" 2>&1 &
        pid[$s]=$!
        PIDS+=("${pid[$s]}")
        wait_until 100 0.1 "" resp_pong "${port[$s]}"
    done
    echo "commands: redis-benchmark -h 127.0.0.1 -p P -t TEST -c 50 -n $REDIS_N_P16 -P 16 --csv (client and servers unpinned)"
    for r in $(seq 1 "$ROUNDS"); do
        for t in set get; do
            for s in $servers; do
                [ -n "${pid[$s]:-}" ] || { addv "thr|$s|$t" n/a; continue; }
                out=$(timeout $((REDIS_N_P16 / 5000 + 60)) redis-benchmark -h 127.0.0.1 -p "${port[$s]}" \
                    -t "$t" -c 50 -n "$REDIS_N_P16" -P 16 --csv 2>/dev/null | grep -i "^\"$t\"," | tr -d '"' | cut -d, -f2)
                if [ -z "$out" ]; then
                    if [ $s = redis2 ]; then peer_failed "redis-benchmark -t $t against ${label[$s]}"
                    else say "ours: redis-benchmark -t $t against ${label[$s]} failed"; fi
                fi
                addv "thr|$s|$t" "${out:-n/a}"
            done
        done
    done
    printf '%-40s %6s %12s   %s\n' server test rps "each round"
    for t in set get; do
        for s in $servers; do
            printf '%-40s %6s %12s   %s\n' "${label[$s]}" "$t" "$(med %.0f "thr|$s|$t")" "$(rounds "thr|$s|$t")"
        done
    done
    # ours: the default (--accept reuseport); handoff beside it
    local a
    for t in set get; do
        a=$(median "thr|t2rp|$t")
        headline -f %.0f "resp_threads2_handoff_vs_reuseport_${t}_P16_rps" ours="$(median "thr|t2ho|$t")" peer="$a"
        headline -f %.0f "resp_threads2_vs_redis_io_threads2_${t}_P16_rps" ours="$a" peer="$(median "thr|redis2|$t")"
        headline -f %.0f "resp_threads2_vs_threads1_${t}_P16_rps" ours="$a" peer="$(median "thr|t1|$t")"
    done
    for s in $servers; do
        [ -n "${pid[$s]:-}" ] && stop_pid "${pid[$s]}"
    done
    # the hooked hiredis run (bench/bench_hook.sh), when it is there
    if [ -f "$HERE/bench_hook.sh" ]; then
        bash "$HERE/bench_hook.sh" "$OUT" || peer_failed "bench_hook.sh"
    fi
}

T_START=$(now_us)
case $SECTIONS in *" a "*)
    if [ $have_redis = 1 ]; then others_start; resp_section; others_end "a. resp"; fi ;;
esac
case $SECTIONS in *" b "*) others_start; chan_section; others_end "b. chan" ;; esac
case $SECTIONS in *" c "*) others_start; spawn_section; others_end "c. spawn" ;; esac
case $SECTIONS in *" d "*) others_start; parked_section; others_end "d. parked" ;; esac
case $SECTIONS in *" f "*) others_start; threads_section; others_end "f. threads" ;; esac
case $SECTIONS in *" g "*)
    others_start
    mode=""; [ $quick = 1 ] && mode=--quick; [ $quick = 2 ] && mode=--smoke
    if ! BENCH_RT_SERVER_CPU=$SERVER_CPU BENCH_RT_CLIENT_CPU=$CLIENT_CPU bash "$HERE/bench_http.sh" $mode "$OUT"; then
        say "FAILED: bench_http.sh (see above)"; peer_fail=1
    fi
    others_end "g. http" ;;
esac
case $SECTIONS in *" h "*)
    others_start
    mode=""; [ $quick = 1 ] && mode=--quick; [ $quick = 2 ] && mode=--smoke
    if ! BENCH_RT_SERVER_CPU=$SERVER_CPU bash "$HERE/bench_file.sh" $mode "$OUT"; then
        say "FAILED: bench_file.sh (see above)"; peer_fail=1
    fi
    others_end "h. file" ;;
esac
case $SECTIONS in *" e "*)
    if [ $have_nc = 1 ] || [ $have_ours_nc = 1 ]; then
        others_start; nc_section; others_end "e. nc"
    fi ;;
esac
echo
check_idle "after the run"
echo "bench_rt: done in $(( ($(now_us) - T_START) / 1000000 )) s$( [ $peer_fail = 1 ] && echo ', a peer FAILED')"
exit $peer_fail
