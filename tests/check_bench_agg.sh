#!/usr/bin/env bash
# check_bench_agg.sh - bench/bench_agg.c, the one place the bench scripts'
# medians, ratios and headline lines come from: each form's exact output,
# floors (floor=F vs_floor=R, as ns and as rates), n/a carried through, and
# a malformed call refused (exit 2).  Exit status: the verdict.
set -uo pipefail
cd "$(dirname "$0")/.."
. tests/lib.sh
OUT=${OUTPUT:-output}
need_built bench_agg
agg=$OUT/bench_agg
fails=0

# same WANT ARGS...: bench_agg ARGS prints exactly WANT
same() {
    local want=$1 got
    shift
    got=$("$agg" "$@" 2>&1)
    if [ "$got" = "$want" ]; then ok "bench_agg $*"
    else bad "bench_agg $*: '$got', want '$want'"; fi
}

same 3 median 5 1 3
same 2.5 median 4 1 3 2
same 2.50 median -f %.2f 4 1 3 2
same 3 median idle:58% 3 n/a                 # words that are no number are left out
same n/a median idle:58% n/a
same 0.500 ratio 1 2
same n/a ratio 1 0
same n/a ratio n/a 2
same "headline x ours=10.12 peer=20.00 ratio=0.506" headline -f %.2f x ours=10.123 peer=20
same "headline x ours=10.12 peer=20.00 ratio=0.506 floor=5.00 vs_floor=2.025" \
    headline -f %.2f x ours=10.123 peer=20 floor=5
same "headline x ours=3 target=30 ratio=0.100 floor=1.5 vs_floor=2.000" headline x ours=3 target=30 floor=1.5
# -r: ns per operation in, operations per second out; vs_floor as a rate's
same "headline x ours=100000000 peer=50000000 ratio=2.000 floor=200000000 vs_floor=0.500" \
    headline -r -f %.0f x ours=10 peer=20 floor=5
same "headline x ours=n/a peer=20 ratio=n/a floor=n/a vs_floor=n/a" headline x ours=n/a peer=20 floor=n/a
same "headline x ours=8000 peer=12000 ratio=0.667 floor=0 vs_floor=n/a" headline x ours=8000 peer=12000 floor=0

# refused: a fourth figure that is no floor, a missing '=', a format of another shape
for args in "headline x ours=1 peer=2 top=3" "headline x ours=1 peer2" "median -f %d 1" "headline x ours=1"; do
    # shellcheck disable=SC2086
    "$agg" $args > /dev/null 2>&1
    rc=$?
    if [ $rc = 2 ]; then ok "bench_agg $args: refused (2)"
    else bad "bench_agg $args: exit $rc, want 2"; fi
done
[ "$fails" = 0 ] && echo "check_bench_agg: every form as expected"
exit $((fails > 0))
