#!/usr/bin/env bash
# check_rt_bench.sh - `bench_rt.sh --smoke`: every section once, tiny: the
# runtime's benchmark programs and every peer (Go, Boost.Fiber,
# redis-server, OpenBSD nc, h2o, nginx, hiredis through the hooks, fio, cp)
# build and run, every headline line has figures (no n/a), every headline
# whose work has a floor prints it, and section h (bench_file.sh) prints
# all 34 of its file_ headlines.  Not a measurement: the figures are not
# looked at.  Exit status: the verdict.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUTPUT:-output}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! timeout 900 bash bench/bench_rt.sh --smoke "$OUT" > "$log" 2>&1; then
    cat "$log"
    echo "check_rt_bench: bench_rt.sh --smoke failed"
    exit 1
fi
n=$(grep -c '^headline ' "$log")
# (a server's CPU per request is counted in clock ticks of 10 ms: over a
# smoke run's few requests it can be 0 ticks, and its ratio n/a; the
# floor's too; so can fio's own usr+sys percent of a smoke job, under load)
bad=$(grep '^headline ' "$log" | grep -E '=n/a( |$)' |
    grep -vE '_cpu_ns_per_req(_[a-z0-9_]+)? (ours|peer)=0 |_cpu_ns_per_req(_[a-z0-9_]+)? ours=[0-9.]+ peer=0 ' |
    grep -vE '_cpu_ns_per_io(_[a-z0-9_]+)? ours=[0-9.]+ fio=0 |_iops_per_cpu_s_fio fio=n/a ' |
    grep -vE '_cpu_ns_per_req(_[a-z0-9_]+)? ours=[0-9.]+ peer=[0-9.]+ ratio=[0-9.]+ floor=0 vs_floor=n/a$')
if [ "$n" -lt 40 ] || [ -n "$bad" ]; then
    cat "$log"
    echo "check_rt_bench: $n headline lines (40 or more expected); without figures:"
    echo "$bad"
    exit 1
fi
# section h's headlines: 3 figures x 2 backends x 2 depths x 2 cache states, 4 of the copy, 2 of registered buffers
nfile=$(grep -c '^headline file_' "$log")
if [ "$nfile" -lt 36 ]; then
    cat "$log"
    echo "check_rt_bench: $nfile file_ headline lines from bench_file.sh (36 expected)"
    exit 1
fi
# every headline whose work has a floor prints it (docs/benchmarks.md, "Floors")
floored='^headline (chan_pingpong_[a-z_]*|wake_to_run_[a-z_]*|xchan_pingpong_[a-z0-9_]*|resp_[a-z_]*_P(1|16)_cpu_ns_per_req[a-z_]*|resp_[a-z_]*_P(1|16)_machine_cpu_ns_per_req[a-z_]*|http_(4k|1m)_(machine_)?cpu_ns_per_req[a-z0-9_]*) '
nf=$(grep -cE "$floored" "$log")
lacking=$(grep -E "$floored" "$log" | grep -vE ' floor=[0-9.]+ vs_floor=([0-9.]+|n/a)$')
if [ "$nf" -lt 39 ] || [ -n "$lacking" ]; then
    echo "check_rt_bench: $nf headlines that must print their floor (39 or more expected); without it:"
    echo "$lacking"
    exit 1
fi
grep -E 'PEER FAILED|warning' "$log" | grep -v 'busy\|noisy\|suspect' && { echo "check_rt_bench: see above"; exit 1; }
# bench_http.sh's equal CPU cap (BENCH_HTTP_CPU_CAP): where a cgroup cpu
# controller is writable, every server's CPU stays within its cap and the
# headlines say so (_cap30); elsewhere the run is refused with the reason
capped=$(BENCH_HTTP_CPU_CAP=30 timeout 300 bash bench/bench_http.sh --smoke "$OUT" 2>&1); rc=$?
if grep -q 'needs a writable cgroup' <<< "$capped"; then
    echo "check_rt_bench: BENCH_HTTP_CPU_CAP not tried: no writable cgroup cpu controller here"
else
    # srv% (the server's CPU, % of one CPU: the 7th figure after the
    # 24-column server name) of each 4k and 1m row, against the 30% cap
    # (clock ticks of 10 ms over a 2 s run: a margin of 6)
    over=$(awk '($1 == "4k" || $1 == "1m") && NF > 10 { n++; split(substr($0, 32), f, " ");
                   if (f[7] !~ /^[0-9]+$/ || f[7] > 36) print }
               END { if (n < 4) print "only " n " rows" }' <<< "$capped")
    if [ $rc != 0 ] || [ -n "$over" ] || ! grep -q '^headline http_4k_rps_cap30 ' <<< "$capped"; then
        echo "$capped"
        echo "check_rt_bench: BENCH_HTTP_CPU_CAP=30: a server over its cap, or no _cap30 headlines: ${over:-exit $rc}"
        exit 1
    fi
fi
echo "check_rt_bench: $n headline lines, every one with its figures"
