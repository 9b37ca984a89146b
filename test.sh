#!/usr/bin/env bash
# test.sh - build everything and run the whole test suite; the verdict is the
# last line ("N passed, N failed") and the exit status.
#
#   bash test.sh                   everything (what CI runs)
#   bash test.sh -o no-m32         leave out the i386 variants   } said in the
#   bash test.sh -o no-valgrind    leave out the valgrind ones   } summary
#   bash test.sh -o no-aarch64     leave out the aarch64 ones    }
#   bash test.sh -o no-riscv64     leave out the riscv64 ones    }
#   bash test.sh -k PATTERN        only checks whose name matches PATTERN
#
# What runs: every program of every variant built by make.sh with gcc and
# with clang (memcheck, --error-exitcode, on the valgrind variants; the
# aarch64 and riscv64 cross builds under qemu-aarch64 / qemu-riscv64), then
# the ELF, gdb and install checks.  A missing tool is a failure that names
# the package to install, never a silent skip.
set -uo pipefail
cd "$(dirname "$0")"
top=$(pwd)

make_opts=()
skipped=()
pattern=""
while [ $# -gt 0 ]; do
    case "$1" in
        -o) shift; make_opts+=(-o "${1:-}"); skipped+=("${1:-}") ;;
        -k) shift; pattern=${1:-} ;;
        -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "test.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
    shift
done

# The cross architectures the checks cover too (tests/check_*.sh read it).
ACO_CROSS=""
for a in aarch64 riscv64; do
    case " ${skipped[*]:-} " in *" no-$a "*) ;; *) ACO_CROSS="$ACO_CROSS $a" ;; esac
done
export ACO_CROSS=${ACO_CROSS# }

JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
LOGS="$top/output/test-logs"
rm -rf "$LOGS"; mkdir -p "$LOGS"
results="$LOGS/results"
: > "$results"

pass() { echo "PASS $1" >> "$results"; echo "PASS $1"; }
fail() { echo "FAIL $1" >> "$results"; echo "FAIL $1${2:+: $2}"; }
missing() {  # missing <check> <tool> <package>
    fail "$1" "'$2' not found: install the Debian package $3"
}

# ---------------------------------------------------------------------------
# Build with gcc (output/) and clang (output/clang/), warnings as errors.
# ---------------------------------------------------------------------------
build() {  # build <name> <cc> <outdir>
    if ! command -v "$2" >/dev/null; then missing "build/$1" "$2" "$2"; return; fi
    if CC=$2 OUTPUT=$3 bash make.sh "${make_opts[@]}" > "$LOGS/build-$1.log" 2>&1; then
        pass "build/$1"
    else
        fail "build/$1" "see $LOGS/build-$1.log"; tail -20 "$LOGS/build-$1.log"
    fi
}
build gcc gcc output
build clang clang output/clang

# ---------------------------------------------------------------------------
# Run the programs.  One line per run in a job file, run $JOBS at a time.
# ---------------------------------------------------------------------------
# expected outcome of the top-level programs; tests/ programs must exit 0
expect_of() {
    case "$1" in
        test_aco_tutorial_4|test_aco_tutorial_5) echo SIGABRT ;;
        *) echo 0 ;;
    esac
}
args_of() {
    case "$1" in
        test_aco_benchmark) echo "--smoke" ;;
        *) grep -v '^[[:space:]]*#' tests/tests.list | awk -v n="$1" '$1 == n {$1 = ""; print}' ;;
    esac
}

have_valgrind=1
command -v valgrind >/dev/null || have_valgrind=0

# Cross-built programs run under qemu-user (static binaries: no sysroot).
# aarch64: the "max" cpu (BTI, pointer authentication) with qemu's cheap
# implementation-defined PAC algorithm: the architected QARMA one makes the
# pac_bti programs several times slower, and signal storms time-bound.
runner_of() {  # variant -> emulator command, empty for native
    case "$1" in
        aarch64.*) echo "qemu-aarch64 -cpu max,pauth-impdef=on" ;;
        riscv64.*) echo qemu-riscv64 ;;
    esac
}

jobs_file="$LOGS/jobs"
: > "$jobs_file"
for dir in output output/clang; do
    [ -f "$dir/variants" ] || continue
    cc=gcc; [ "$dir" = output/clang ] && cc=clang
    while read -r v; do
        for bin in "$dir"/*.."$v"; do
            [ -x "$bin" ] || continue
            prog=$(basename "$bin"); prog=${prog%%..*}
            name="$cc/$v/$prog"
            if [ -n "$pattern" ] && [[ "$name" != *$pattern* ]]; then continue; fi
            case "$v" in
                *valgrind*) case "$v" in *no_valgrind*) vg=0 ;; *) vg=1 ;; esac ;;
                *) vg=0 ;;
            esac
            if [ $vg = 1 ] && [ $have_valgrind = 0 ]; then
                missing "$name" valgrind valgrind; continue
            fi
            emu=$(runner_of "$v")
            if [ -n "$emu" ] && ! command -v "${emu%% *}" >/dev/null; then
                missing "$name" "${emu%% *}" qemu-user; continue
            fi
            # "-": no emulator (a tab is whitespace to read: no empty fields)
            printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$bin" "$vg" "$(expect_of "$prog")" \
                "${emu:--}" "$(args_of "$prog")" >> "$jobs_file"
        done
    done < "$dir/variants"
done

run_one() {  # one job line: name, bin, vg, expect, emulator, args (tabs)
    local name bin vg expect emu args
    IFS=$'\t' read -r name bin vg expect emu args <<< "$1"
    local log="$LOGS/$(echo "$name" | tr '/' '_').log"
    local cmd=("$bin")
    if [ "$emu" != - ]; then
        # qemu writes a core file of an aborting program (expected aborts
        # included) into the working directory unless told not to.
        ulimit -c 0
        # shellcheck disable=SC2206
        cmd=($emu "$bin")
        # the benchmark re-executes itself: through the emulator too
        export BENCH_EXEC_WRAPPER="$emu"
    elif [ "$vg" = 1 ]; then
        cmd=(valgrind --tool=memcheck --error-exitcode=99 --leak-check=full
             --errors-for-leak-kinds=definite --child-silent-after-fork=yes
             --max-stackframe=8388608 -q "$bin")
    fi
    local start=$SECONDS
    # shellcheck disable=SC2086
    timeout 600 "${cmd[@]}" $args > "$log" 2>&1
    local rc=$? got
    if [ $rc -gt 128 ] && [ $rc -lt 160 ]; then got="SIG$(kill -l $((rc - 128)))"; else got=$rc; fi
    if [ "$vg" = 1 ] && [ "$expect" != 0 ] && grep -q 'ERROR SUMMARY: [1-9]' "$log"; then
        got="$got+memcheck-errors"
    fi
    if [ "$got" = "$expect" ]; then
        echo "PASS $name ($((SECONDS - start))s)"
    else
        echo "FAIL $name: expected $expect, got $got; log: $log"
        tail -15 "$log" | sed 's/^/    | /'
    fi
}
export -f run_one
export LOGS

# Longest first keeps both cores busy to the end: valgrind runs first.
sort -t$'\t' -k3,3r "$jobs_file" |
    xargs -d '\n' -P "$JOBS" -n 1 bash -c 'run_one "$1" 2>/dev/null' _ |
    tee -a "$LOGS/runs" | grep -v '^PASS' || true
grep -o '^\(PASS\|FAIL\) [^ :]*' "$LOGS/runs" >> "$results"
echo "ran $(wc -l < "$jobs_file") program runs"

# ---------------------------------------------------------------------------
# Whole-artifact checks (tests/check_*.sh), each one verdict.
# ---------------------------------------------------------------------------
for chk in tests/check_*.sh; do
    [ -f "$chk" ] || continue
    n="check/$(basename "$chk" .sh)"
    if [ -n "$pattern" ] && [[ "$n" != *$pattern* ]]; then continue; fi
    if bash "$chk" > "$LOGS/$(basename "$chk").log" 2>&1; then
        pass "$n"
    else
        fail "$n" "see $LOGS/$(basename "$chk").log"; tail -15 "$LOGS/$(basename "$chk").log" | sed 's/^/    | /'
    fi
done

# ---------------------------------------------------------------------------
np=$(grep -c '^PASS' "$results")
nf=$(grep -c '^FAIL' "$results")
if [ ${#skipped[@]} -gt 0 ]; then
    echo "left out by request (-o): ${skipped[*]}"
fi
if [ "$nf" -gt 0 ]; then
    echo "failed:"; grep '^FAIL' "$results" | sed 's/^FAIL /  /'
fi
echo "$np passed, $nf failed"
[ "$nf" = 0 ]
