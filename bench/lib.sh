# bench/lib.sh - what the benchmark scripts share (sourced, not run).

# busy_pct: how busy the machine is over 1 s (all CPUs, as % of them all)
busy_pct() {
    local a b
    a=$(awk '/^cpu / {print $2 + $3 + $4 + $7 + $8, $5 + $6}' /proc/stat)
    sleep 1
    b=$(awk '/^cpu / {print $2 + $3 + $4 + $7 + $8, $5 + $6}' /proc/stat)
    awk -v a="$a" -v b="$b" 'BEGIN {split(a, x, " "); split(b, y, " ");
        busy = y[1] - x[1]; idle = y[2] - x[2];
        printf "%.0f\n", (busy + idle > 0) ? 100 * busy / (busy + idle) : 0}'
}

# check_idle WHEN: one line, a warning (say, from tests/lib.sh) if other
# work keeps the CPUs 10% busy or more
check_idle() {
    local b
    b=$(busy_pct)
    if [ "$b" -ge 10 ]; then
        say "warning: $1 the machine is ${b}% busy with other work (load $(cut -d' ' -f1-3 /proc/loadavg)): the figures will be noisy"
    else
        echo "idle check ($1): ${b}% busy, load $(cut -d' ' -f1-3 /proc/loadavg)"
    fi
}
