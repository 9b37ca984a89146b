#!/usr/bin/env bash
# check_hook_curl.sh - the syscall hooks with libcurl: hook_curl (see there)
# runs curl's blocking and multi APIs in cos of one thread against an HTTP
# server of its own, by LD_PRELOAD of output/libaco_hook.so and with the
# hooks linked in, output/libhook_count.so ahead of them so that the cancel's
# hooked calls are counted, on both backends: the transfers overlap, a
# request costs what it costs outside cos, every body is checked, a cancel
# ends curl_easy_perform at once, a killed server ends every transfer with
# curl's error.  Without the hooks the same program must fail its overlap
# check, and for that reason (it proves the check can fail).  Exit status:
# the verdict.
set -uo pipefail
cd "$(dirname "$0")/.."
. tests/lib.sh
OUT=${OUTPUT:-output}
for p in libaco_hook.so libhook_count.so hook_curl hook_curl_linked; do
    [ -e "$OUT/$p" ] || { echo "check_hook_curl: $OUT/$p not built: install libcurl4-openssl-dev, then bash make.sh"; exit 1; }
done
fails=0
# run <what> <expect: pass, or the message its failure must carry> <command...>
# A run that must pass and fails the cancel's bound on the other cos' wait
# (20 ms, hook_lib.h) gets a second run (stall_run): a stall of this host
# can miss it, as check_hook_mariadb's did.
STALL_RETRY='CHECK(t->max_late <= 20 \* HK_MS) failed'
run() {
    local what=$1 want=$2 out got again expect="every check to hold, hooked calls counted"
    shift 2
    [ "$want" = pass ] || expect="a failure saying \"$want\""
    if [ "$want" = pass ]; then
        if stall_run 60 "$@"; then got=pass; else got=fail; fi
        [ -z "$again" ] || echo "     (a second run: at first $again)"
    elif out=$(timeout 60 "$@" 2>&1); then got=pass; else got=fail; fi
    if [ "$want" = pass ]; then
        # the cancel's bound on hooked calls held only if they were counted
        if [ $got = pass ] && ! grep -q "not counted" <<< "$out"; then got=ok; fi
    elif [ $got = fail ] && grep -q -- "$want" <<< "$out"; then
        got=ok
    fi
    if [ $got = ok ]; then echo "ok   $what"
    else echo "FAIL $what: expected $expect"; fails=$((fails + 1)); fi
    sed 's/^/     /' <<< "$out"
}
for be in ${ACO_RT_TEST_BACKENDS:-uring epoll}; do
    run "$be: LD_PRELOAD" pass env ACO_RT_BACKEND=$be \
        LD_PRELOAD="$OUT/libhook_count.so $OUT/libaco_hook.so" "$OUT/hook_curl" --hooks
    run "$be: linked" pass env ACO_RT_BACKEND=$be LD_PRELOAD="$OUT/libhook_count.so" \
        "$OUT/hook_curl_linked" --hooks
    run "$be: no hooks, the overlap check fails" "did not overlap (curl.s waits blocked the thread)" env ACO_RT_BACKEND=$be \
        LD_PRELOAD="$OUT/libhook_count.so" "$OUT/hook_curl" --no-hooks --cos 8
done
echo "check_hook_curl: $fails failed"
[ $fails = 0 ]
