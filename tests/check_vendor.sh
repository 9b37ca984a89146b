#!/usr/bin/env bash
# Vendoring, as the README promises it: only the files the README's
# "you can vendor" line names are copied into an empty directory, with
# aco_assert_override.h and the programs upstream libaco 1.2.4 builds (its
# tutorials 0-6, synopsis and benchmark), and each program is built with
# upstream's own build line
#     cc -g -O2 -Wall -Werror <variant> acosw.S aco.c <program>.c -o ...
# in upstream's eight variants (-m32, -DACO_CONFIG_SHARE_FPU_MXCSR_ENV,
# -DACO_USE_VALGRIND, each on or off): the first program of a variant by
# that line itself, the others by it with acosw.S and aco.c replaced by
# their objects, compiled once a variant with the line's flags and -c (as
# the line compiles them each time: aco.c took 1.0 of a build's 1.5 s,
# nine times a variant).  Then every program but the benchmark runs as
# upstream's test.sh runs it: the valgrind variants under memcheck
# (--leak-check=full --error-exitcode=2), tutorials 4 and 5 must end by
# SIGABRT (status 134, as tests/tests.list says), the others exit 0.
#   bash tests/check_vendor.sh
set -euo pipefail
cd "$(dirname "$0")/.."
top=$PWD
CC=${CC:-cc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 143' TERM INT

# The README's list: the backquoted file names of the bullet that says
# "you can vendor", up to the next bullet or blank line.
files=$(awk '/you can vendor/ {on = 1} on && (/^$/ || (/^- / && !/you can vendor/)) {exit}
             on {print}' README.md | grep -o '`[A-Za-z0-9_]*\.[chS]`' | tr -d '`' | sort -u)
if [ -z "$files" ]; then
    echo "FAIL: README.md has no \"you can vendor\" line naming the core's files"
    exit 1
fi
echo "the README's files: $(echo $files)"
mkdir "$tmp/v" "$tmp/out"
for f in $files aco_assert_override.h; do cp "$f" "$tmp/v/"; done
progs="test_aco_tutorial_0 test_aco_tutorial_1 test_aco_tutorial_2 test_aco_tutorial_3
       test_aco_tutorial_4 test_aco_tutorial_5 test_aco_tutorial_6 test_aco_synopsis
       test_aco_benchmark"
for p in $progs; do cp "$p.c" "$tmp/v/"; done

if ! echo 'int main(void){return 0;}' | $CC -m32 -x c - -o /dev/null 2>/dev/null; then
    echo "FAIL: $CC -m32 cannot link: install the Debian package gcc-multilib"
    exit 1
fi
if ! command -v valgrind > /dev/null; then
    echo "FAIL: no valgrind: install the Debian package valgrind"
    exit 1
fi

fail=0 built=0 ran=0
cd "$tmp/v"
for m in "" -m32; do
    for fpu in "" -DACO_CONFIG_SHARE_FPU_MXCSR_ENV; do
        for vg in "" -DACO_USE_VALGRIND; do
            suffix="..${m:+m32.}$([ -n "$vg" ] && echo valgrind || echo no_valgrind)"
            suffix="$suffix.$([ -n "$fpu" ] && echo shareFPUenv || echo standaloneFPUenv)"
            flags="-g -O2 -Wall -Werror $m $fpu $vg"
            core="acosw.S aco.c"
            for p in $progs; do
                extra=""
                [ "$p" = test_aco_tutorial_3 ] && extra=-lpthread
                # shellcheck disable=SC2086
                if ! $CC $flags $core "$p.c" $extra -o "$tmp/out/$p$suffix" 2> "$tmp/err"; then
                    echo "FAIL: $CC $flags $core $p.c $extra:"
                    sed 's/^/    | /' "$tmp/err" | head -20
                    fail=1
                    continue
                fi
                built=$((built + 1))
                if [ "$core" = "acosw.S aco.c" ]; then
                    # shellcheck disable=SC2086
                    $CC $flags -c acosw.S -o "$tmp/acosw.o" && $CC $flags -c aco.c -o "$tmp/aco.o" ||
                        { echo "FAIL: $CC $flags -c acosw.S, aco.c"; fail=1; break; }
                    core="$tmp/acosw.o $tmp/aco.o"
                fi
            done
        done
    done
done

# Upstream's test.sh, in its semantics.
cd "$tmp/out"
for bin in *; do
    case $bin in test_aco_benchmark..*) continue ;; esac
    # upstream's test.sh wants 134 (SIGABRT) of tutorials 4 and 5: ours say
    # so in tests/tests.list (expect=SIGABRT)
    want=0
    grep -q "^${bin%%..*} .*expect=SIGABRT" "$top/tests/tests.list" && want=134
    run=("./$bin")
    case $bin in *.valgrind.*) run=(valgrind -q --leak-check=full --error-exitcode=2 "./$bin") ;; esac
    st=0    # (the subshell keeps bash's "Aborted" line out of the output)
    (timeout -k 10 300 "${run[@]}" > "$tmp/run.log" 2>&1; exit $?) 2> /dev/null || st=$?
    ran=$((ran + 1))
    if [ "$st" != "$want" ]; then
        echo "FAIL: $bin exited $st, upstream's test.sh wants $want:"
        tail -15 "$tmp/run.log" | sed 's/^/    | /'
        fail=1
    fi
done
if [ $fail = 0 ]; then
    echo "check_vendor: $built programs built from the README's files with upstream's build" \
         "line in its 8 variants; $ran ran as upstream's test.sh runs them"
fi
exit $fail
