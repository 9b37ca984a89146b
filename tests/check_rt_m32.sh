#!/usr/bin/env bash
# The runtime on i386.  make.sh builds libaco_rt for x86-64 only; here its
# sources and the core are built with gcc -m32 (-Wall -Wextra -Werror, no
# liburing: Debian's i386 liburing-dev would have to be installed beside
# the x86-64 one, so the epoll backend), and each runtime test below runs on
# epoll.  What it guards: the 32-bit layouts (a record's wake and cancel
# messages tell themselves apart by address, rt_impl.h), 64-bit atomics and
# sizes on a 32-bit ABI.  (-Irt: test_alloc looks at a record.)  The tests' stress loops run fewer rounds (ACO_RT_TEST_FEW):
# the x86-64 builds run them whole.
#   bash tests/check_rt_m32.sh [TEST...]     (default: the list below)
set -euo pipefail
cd "$(dirname "$0")/.."
CC=${CC:-gcc}
tests=("$@")
[ ${#tests[@]} -gt 0 ] || tests=(sched handoff lend alloc timer sync chan chan_direct io bufio
                                 fd_identity contract deadlines_load many_conns pool pthread
                                 pthread_threads header offload net file file_ways null)
if ! echo 'int main(void){return 0;}' | $CC -m32 -x c - -o /dev/null 2>/dev/null; then
    echo "FAIL: $CC -m32 cannot link: install the Debian package gcc-multilib"
    exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 143' TERM INT
c="$CC -m32 -O2 -g -Wall -Wextra -Werror -std=gnu11 -I."
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}

# The core and the runtime's sources, then each test linked with them.
srcs="aco.c acosw.S $(grep -v '^#' rt/sources.list | sed 's|^|rt/|' | tr '\n' ' ')"
# shellcheck disable=SC2086
if ! printf '%s\n' $srcs | TMPD=$tmp C=$c xargs -P "$JOBS" -I{} sh -c \
        'o="$TMPD/$(echo "$1" | tr / _).o"; $C -c "$1" -o "$o" 2>"$o.err" || { cat "$o.err"; exit 1; }' _ {}; then
    echo "FAIL: the runtime does not build with -m32"
    exit 1
fi
ar rcs "$tmp/librt32.a" "$tmp"/*.o
fail=0
for t in "${tests[@]}"; do
    # its args= column (rt/tests/tests.list)
    args=$(awk -v n="test_$t" '$1 == n {for (i = 2; i <= NF; i++) if ($i ~ /^args=/)
                                  {sub(/^args=/, "", $i); gsub(/,/, " ", $i); print $i}}' rt/tests/tests.list)
    if ! $c -Irt -DACO_RT_TEST_FEW "rt/tests/test_$t.c" "$tmp/librt32.a" -lpthread -o "$tmp/test_$t" 2>"$tmp/$t.err"; then
        echo "FAIL: rt/tests/test_$t.c does not build with -m32:"; sed 's/^/    | /' "$tmp/$t.err" | head -20
        fail=1; continue
    fi
    start=$SECONDS
    # shellcheck disable=SC2086
    if ACO_RT_TEST_BACKENDS=epoll ACO_RT_BACKEND=epoll ACO_RT_TEST_WATCHDOG=240 \
            timeout -k 10 300 "$tmp/test_$t" $args \
            > "$tmp/$t.log" 2>&1; then
        echo "ok   test_$t (i386, epoll, $((SECONDS - start)) s)"
    else
        echo "FAIL test_$t (i386, epoll): exit $?"; tail -15 "$tmp/$t.log" | sed 's/^/    | /'
        fail=1
    fi
done
[ $fail = 0 ] && echo "check_rt_m32: the runtime builds and its tests pass on i386 (epoll)"
exit $fail
