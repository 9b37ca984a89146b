#!/usr/bin/env bash
# tools/plot_bench.sh draws from the CSV of an earlier run, named relative to
# the directory it is started from (not the tree's top, where it works): its
# data files hold the CSV's rows, and gnuplot is fed both figures.  A stub
# stands in for gnuplot (it keeps the scripts it reads), so nothing is
# drawn, no image of the tree is touched and gnuplot need not be installed.
set -euo pipefail
cd "$(dirname "$0")/.."
top=$(pwd)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin" "$tmp/run"
cat > "$tmp/bin/gnuplot" <<SH
#!/bin/sh
cat >> "$tmp/gnuplot.in"
SH
chmod +x "$tmp/bin/gnuplot"
# kind,impl,n,bytes,value,extra: what test_aco_benchmark --csv writes
cat > "$tmp/run/bench.csv" <<'CSV'
copy,aco,2,8,10.000,0
copy,aco,2,120,16.000,0
copy,swapcontext,2,8,300.000,0
copy,swapcontext,2,120,300.000,0
standalone,aco,1,8,6.500,0
memory,aco,100000,8,160.000,16000000
memory,aco,100000,120,272.000,27200000
CSV
cd "$tmp/run"
if ! PATH="$tmp/bin:$PATH" bash "$top/tools/plot_bench.sh" bench.csv > "$tmp/out" 2>&1; then
    echo "FAIL: plot_bench.sh with a CSV relative to the current directory:"
    sed 's/^/    /' "$tmp/out"
    exit 1
fi
fail=0
grep -q 'set output "img/bench_roundtrip.svg"' "$tmp/gnuplot.in" &&
    grep -q 'set output "img/bench_memory.svg"' "$tmp/gnuplot.in" ||
    { echo "FAIL: gnuplot was not fed both figures"; fail=1; }
[ "$(cat "$top/output/plot/rt_aco.dat")" = "$(printf '8 10.000\n120 16.000')" ] ||
    { echo "FAIL: output/plot/rt_aco.dat does not hold the CSV's rows"; fail=1; }
[ $fail = 0 ] && echo "check_plot: plot_bench.sh drew from a CSV named relative to $tmp/run"
exit $fail
