#!/usr/bin/env bash
# tools/plot_bench.sh - run the benchmark's comparison and memory runs, then
# draw the figures of docs/benchmarks.md with gnuplot:
#
#   img/bench_roundtrip.svg  ns per resume + yield round trip against the
#                            live bytes per co: libaco (copied on a shared
#                            stack) vs fcontext and swapcontext (own stacks)
#   img/bench_memory.svg     peak RSS per co against the live bytes per co,
#                            for a few numbers of cos, and the memory target
#
#   bash tools/plot_bench.sh            run everything (~4 min, ~7 GiB RAM)
#   bash tools/plot_bench.sh CSV        only draw, from a CSV of an earlier run
#
# Environment: BENCH (the benchmark; default: the default build's, from
# `bash make.sh`), MEMORY_N (numbers of cos, default "100000 1000000
# 10000000"), MEMORY_K (live bytes per co, default "8 56 120 232 488"),
# ROUNDS (comparison rounds, default the benchmark's 15).  The CSV and the
# benchmark's output are kept in output/plot/.
set -euo pipefail
# A CSV named relative to where the script was started, before the cd.
if [ $# -ge 1 ]; then
    [ -f "$1" ] || { echo "plot_bench.sh: $1: no such file" >&2; exit 1; }
    set -- "$(realpath "$1")"
fi
cd "$(dirname "$0")/.."

BENCH=${BENCH:-output/test_aco_benchmark..no_valgrind.standaloneFPUenv}
MEMORY_N=${MEMORY_N:-100000 1000000 10000000}
MEMORY_K=${MEMORY_K:-8 56 120 232 488}
ROUNDS=${ROUNDS:-}
out=output/plot
mkdir -p "$out" img
command -v gnuplot >/dev/null || { echo "plot_bench.sh: install gnuplot-nox" >&2; exit 1; }

if [ $# -ge 1 ]; then
    csv=$1
else
    [ -x "$BENCH" ] || { echo "plot_bench.sh: $BENCH not found: run 'bash make.sh' first" >&2; exit 1; }
    csv=$out/bench.csv
    : > "$csv"
    log=$out/bench.log
    echo "plot_bench.sh: $BENCH --compare (output in $log)"
    "$BENCH" --compare --csv "$csv" ${ROUNDS:+--rounds "$ROUNDS"} > "$log"
    for n in $MEMORY_N; do
        for k in $MEMORY_K; do
            echo "plot_bench.sh: $BENCH --memory $n $k"
            "$BENCH" --memory "$n" "$k" --csv "$csv" >> "$log"
        done
    done
    grep -E '^\+(build|peer|cpu)' "$log" | sort -u > "$out/build.txt"
fi

# One data file per series: "x y" lines (the CSV is kind,impl,n,bytes,value,extra).
series() {  # series <kind> <impl> [n] -> bytes and value, sorted by bytes
    awk -F, -v k="$1" -v i="$2" -v n="${3:-}" \
        '$1 == k && $2 == i && (n == "" || $3 == n) {print $4, $5}' "$csv" | sort -n
}
series copy aco > "$out/rt_aco.dat"
series copy fcontext > "$out/rt_fctx.dat"
series copy swapcontext > "$out/rt_uctx.dat"
standalone=$(awk -F, '$1 == "standalone" && $2 == "aco" {print $5}' "$csv" | tail -1)
[ -s "$out/rt_aco.dat" ] || { echo "plot_bench.sh: no round-trip rows in $csv" >&2; exit 1; }

build=$(grep -o 'compiler: .*' "$out/build.txt" 2>/dev/null | head -1 | sed 's/compiler: //' || true)
cpu=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //; s/([^)]*)//g; s/  */ /g')

has_fctx=0; [ -s "$out/rt_fctx.dat" ] && has_fctx=1
gnuplot <<EOF
set terminal svg size 800,480 dynamic font "Helvetica,13" background rgb "white"
set output "img/bench_roundtrip.svg"
set title "resume + yield round trip, median of interleaved rounds\n{/*0.8 x86-64, $build, default build; $cpu, one pinned CPU}"
set xlabel "live bytes per co at its yield (libaco copies them; the others keep them on their own stacks)"
set ylabel "ns per round trip"
set logscale xy
set xrange [6:10000]
set yrange [2:6000]
set format x "%.0f"
set format y "%.0f"
set grid xtics ytics mxtics lc rgb "#dddddd"
set key top left box opaque
set style line 1 lc rgb "#1f77b4" lw 2.5 pt 7 ps 0.8
set style line 2 lc rgb "#d62728" lw 2.5 pt 5 ps 0.8
set style line 3 lc rgb "#7f7f7f" lw 2.5 pt 9 ps 0.9
set style line 4 lc rgb "#17becf" lw 2 dt 3
plot "$out/rt_aco.dat" using 1:2 with linespoints ls 1 title "libaco: 2 cos alternating on one share stack", \
     ${standalone:-NaN} with lines ls 4 title "libaco: standalone co (nothing copied)", \
     $( [ $has_fctx = 1 ] && echo "\"$out/rt_fctx.dat\" using 1:2 with linespoints ls 2 title \"Boost.Context fcontext (own stacks)\"," ) \
     "$out/rt_uctx.dat" using 1:2 with linespoints ls 3 title "glibc swapcontext (own stacks)"
EOF

# Memory: one line per number of cos.
mem_plot=""
i=0
colors=("#2ca02c" "#1f77b4" "#9467bd" "#ff7f0e" "#8c564b")
points=(7 6 4 8 10)   # later (larger) N: open symbols, so equal values show
for n in $(awk -F, '$1 == "memory" {print $3}' "$csv" | sort -nu); do
    series memory aco "$n" > "$out/mem_$n.dat"
    label=$(awk -v n="$n" 'BEGIN {
        if (n % 1000000 == 0) printf "%dM", n / 1000000;
        else if (n % 1000 == 0) printf "%dk", n / 1000;
        else printf "%d", n }')
    mem_plot+="\"$out/mem_$n.dat\" using 1:2 with linespoints lw 2 pt ${points[$((i % 5))]} ps 1.1 lc rgb \"${colors[$((i % 5))]}\" title \"$label cos\", "
    i=$((i + 1))
done
if [ -n "$mem_plot" ]; then
gnuplot <<EOF
set terminal svg size 800,480 dynamic font "Helvetica,13" background rgb "white"
set output "img/bench_memory.svg"
set title "memory per suspended co: peak RSS / N, cos on one share stack\n{/*0.8 default aco\\\\_create arguments, glibc malloc; the benchmark's 8-byte pointer per co included}"
set xlabel "live bytes per co at its yield (its saved copy)"
set ylabel "bytes of peak RSS per co"
set xrange [0:520]
set yrange [0:*]
set grid lc rgb "#dddddd"
set key top left box opaque
set arrow from 0,280 to 520,280 nohead dt 2 lw 1.5 lc rgb "#d62728"
set label "memory target: 280 B per co (10M cos, 120 B live)" at 200,295 tc rgb "#d62728"
set object circle at 120,280 size 4 fc rgb "#d62728" fs solid
plot $mem_plot x with lines dt 3 lw 1.5 lc rgb "#7f7f7f" title "the live bytes alone"
EOF
fi
echo "plot_bench.sh: wrote img/bench_roundtrip.svg${mem_plot:+ and img/bench_memory.svg} (data: $csv)"
