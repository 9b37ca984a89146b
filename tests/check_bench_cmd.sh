#!/usr/bin/env bash
# `bash make.sh bench` into an empty output directory: it builds only what
# it runs (the benchmark's two x86-64 builds, the fcontext check, the
# libraries they link), never the cross, i386 or valgrind variants, and its
# last line names the targets met and missed, by name; "all checks passed"
# never follows a MISS; nothing in it refers to the project's issues.  --quick: the headline loops only, a few seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
if ! OUTPUT="$tmp/out" BENCH_ARGS=--quick bash make.sh bench > "$tmp/log" 2>&1; then
    cat "$tmp/log"; echo "FAIL: make.sh bench failed"; exit 1
fi
built=$(find "$tmp/out" -maxdepth 1 -type f -perm -u+x -printf '%f\n' | sort)
want="test_aco_benchmark..no_valgrind.shareFPUenv
test_aco_benchmark..no_valgrind.standaloneFPUenv"
[ -x "$tmp/out/fcontext_loop" ] && want="fcontext_loop
$want"
if [ "$built" != "$want" ]; then
    echo "FAIL: make.sh bench built other programs than it runs:"
    diff <(echo "$want") <(echo "$built") | sed 's/^/    /'; fail=1
fi
if grep -q 'leaving out' "$tmp/log"; then
    echo "FAIL: make.sh bench names parts it does not build:"; grep 'leaving out' "$tmp/log"; fail=1
fi
last=$(tail -1 "$tmp/log")
case $last in
    "make.sh bench: every correctness check passed; speed targets: "*" met"*", "*" missed"*) ;;
    *) echo "FAIL: the last line does not name the targets met and missed: '$last'"; fail=1 ;;
esac
if grep -q 'MISS' "$tmp/log" && grep -qi 'all checks passed' "$tmp/log"; then
    echo "FAIL: 'all checks passed' after a MISS"; fail=1
fi
if grep -q 'MISS' "$tmp/log" && ! grep -q '[1-9][0-9]* missed' <<< "$last"; then
    echo "FAIL: a MISS above, but the last line says none missed: '$last'"; fail=1
fi
# A newcomer reads it at once: targets by name, not by number (the last
# line and the targets lines), no reference to the project's issues, the
# build's count said plainly, the shared-FP-env build's summary not
# labelled as the default build's.
if grep -E '(met|missed):? [0-9]+ \(|, [0-9]+ \([0-9.]+ [<>]|^  [0-9]\. ' "$tmp/log"; then
    echo "FAIL: a target named by a number above"; fail=1
fi
if grep -Ei 'issue|#[0-9]' "$tmp/log"; then
    echo "FAIL: the output refers to the project's issues above"; fail=1
fi
if grep -E 'needs [0-9]+ outputs: rebuilt' "$tmp/log"; then
    echo "FAIL: the build's count line above is not plain"; fail=1
fi
if grep -E "shared-FP.*default build's" "$tmp/log"; then
    echo "FAIL: the shared-FP-env build's summary labelled as the default build's"; fail=1
fi
for t in switch copy120; do
    grep -q "$t" <<< "$last" || { echo "FAIL: the last line does not name target $t: '$last'"; fail=1; }
done
[ $fail = 0 ] && echo "make.sh bench: built $(echo "$built" | wc -l) programs; $last"
exit $fail
