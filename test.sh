#!/usr/bin/env bash
# test.sh - build and run the test matrix; the verdict is the last line
# ("N passed, N failed") and the exit status.
#
#   bash test.sh                  every target below but fresh (CI runs
#                                 this, then bash test.sh fresh)
#   bash test.sh TARGET...        only these targets: bash test.sh asan tsan
#   bash test.sh -l               list the targets of the default run
#   bash test.sh -o no-m32        leave out the i386 variants   } said in the
#   bash test.sh -o no-valgrind   leave out the valgrind ones   } summary
#   bash test.sh -o no-aarch64    leave out the aarch64 ones    }
#   bash test.sh -o no-riscv64    leave out the riscv64 ones    }
#   bash test.sh -k PATTERN       only checks whose name contains PATTERN
#   bash test.sh fresh            README.md's path on a bare machine (below;
#                                 only when named: never in the default run)
#
# Targets (each program of each variant is one check, named
# target/[compiler/]variant/program; builds go to output/<build>/):
#   gcc-O2 clang-O2   every non-valgrind variant, -O2 -g: x86-64 and i386
#                     natively, the aarch64 and riscv64 cross builds under
#                     qemu-aarch64 / qemu-riscv64 (each program under one
#                     compiler there: paired_out)
#   gcc-O0 clang-O0   the same at -O0 -g, x86-64 and i386 (the core's
#                     programs: gcc per-co FPU env, clang shared; the
#                     runtime's tests under one compiler each: paired_out)
#   valgrind          the valgrind variants of gcc-O2 and clang-O2, memcheck
#                     (each program under one compiler, in one FPU env per
#                     compiler: paired_out)
#   asan              -fsanitize=address, gcc and clang, x86-64 and i386, with
#                     detect_stack_use_after_return=0 and =1 (each option on
#                     one FPU env, or one per compiler: paired_out)
#   tsan              -fsanitize=thread, gcc and clang, x86-64 (the FPU env
#                     variants, or the runtime's tests, paired with the
#                     compilers: paired_out)
#   checked           the gcc-O2 programs, x86-64, in checked mode
#                     (ACO_CHECKED=1, aco.h): a correct program runs unchanged
#   ubsan             -fsanitize=undefined -fno-sanitize-recover=all, gcc and
#                     clang, x86-64 and i386 (paired as tsan)
#   checks            tests/check_*.sh: ELF/CET, gdb, gdb extension, install,
#                     headers
#   fresh             tests/fresh_root.sh, one check (fresh/fresh_root), run
#                     only when named, after the others: in a bare Debian 12
#                     root (debootstrap), README.md's package lines, then its
#                     first programs built and run from a clone of HEAD.
#                     4 to 10 minutes; needs root and the network (CI runs it)
# A run passes when it ends as expected (exit 0, or the signal its tests
# list says) and its log holds no sanitizer or memcheck report.  What a
# target leaves out, or runs with an adjusted option, is written in the
# program's tests list with the reason, printed; a missing tool is a
# failure naming the package, never a skip.
# A build makes only the programs its targets run (make.sh list, then
# make.sh OUTPUT...), and for checks gcc-O2's libraries and other programs.
set -uo pipefail
cd "$(dirname "$0")"
top=$(pwd)
t0=$SECONDS

ALL_TARGETS="gcc-O2 clang-O2 gcc-O0 clang-O0 valgrind asan tsan ubsan checked checks"
# Targets run only when named.
NAMED_TARGETS="fresh"

# make.sh strict: a missing toolchain fails the build, never leaves it out
# (only -o no-X does, and the summary says so).
make_opts=(-o strict)
skipped=()
pattern=""
targets=()
while [ $# -gt 0 ]; do
    case "$1" in
        -o) shift; make_opts+=(-o "${1:-}"); skipped+=("${1:-}") ;;
        -k) shift; pattern=${1:-} ;;
        -l) echo "$ALL_TARGETS"; exit 0 ;;
        -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "test.sh: unknown option '$1'" >&2; exit 2 ;;
        *) case " $ALL_TARGETS $NAMED_TARGETS " in
               *" $1 "*) targets+=("$1") ;;
               *) echo "test.sh: unknown target '$1' (targets: $ALL_TARGETS; when named: $NAMED_TARGETS)" >&2; exit 2 ;;
           esac ;;
    esac
    shift
done
[ ${#targets[@]} -gt 0 ] || read -ra targets <<< "$ALL_TARGETS"
want_valgrind=1
for o in "${skipped[@]+"${skipped[@]}"}"; do [ "$o" = no-valgrind ] && want_valgrind=0; done
if [ $want_valgrind = 0 ]; then
    t=(); for x in "${targets[@]}"; do [ "$x" = valgrind ] || t+=("$x"); done
    targets=("${t[@]+"${t[@]}"}")
fi

# The cross architectures the checks cover too (tests/check_*.sh read it).
ACO_CROSS=""
for a in aarch64 riscv64; do
    case " ${skipped[*]:-} " in *" no-$a "*) ;; *) ACO_CROSS="$ACO_CROSS $a" ;; esac
done
export ACO_CROSS=${ACO_CROSS# }

JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
# (as make.sh takes it: xargs -P 0 would mean no limit, and 08 is no octal)
case $JOBS in
    '' | *[!0-9]* | ??????*) jobs_ok=0 ;;
    *) [ $((10#$JOBS)) -ge 1 ] && [ $((10#$JOBS)) -le 4096 ] && jobs_ok=1 || jobs_ok=0 ;;
esac
[ $jobs_ok = 1 ] || { echo "test.sh: JOBS must be a whole number from 1 to 4096, not '$JOBS'" >&2; exit 2; }
JOBS=$((10#$JOBS))
LOGS="$top/output/test-logs"
# A run of named-only targets alone (bash test.sh fresh, after the suite)
# keeps the suite's logs: its own go beside them.
named_only=1
for x in "${targets[@]}"; do case " $NAMED_TARGETS " in *" $x "*) ;; *) named_only=0 ;; esac; done
[ $named_only = 1 ] && LOGS="$top/output/test-logs-${targets[*]// /-}"
# How long each run took last time: the longest start first (below).
DURATIONS="$top/output/test-durations"
[ -f "$LOGS/runs" ] && awk -F'\t' 'NF >= 4 {print $2 "\t" $4}' "$LOGS/runs" > "$DURATIONS.new" &&
    { cat "$DURATIONS.new"; cat "$DURATIONS" 2>/dev/null || true; } | awk -F'\t' '!seen[$1]++' > "$DURATIONS.tmp" &&
    mv "$DURATIONS.tmp" "$DURATIONS"; rm -f "$DURATIONS.new"
rm -rf "$LOGS"; mkdir -p "$LOGS"
results="$LOGS/results"
: > "$results"

pass() { printf 'PASS\t%s\t0\n' "$1" >> "$results"; echo "PASS $1"; }
fail() { printf 'FAIL\t%s\t0\n' "$1" >> "$results"; echo "FAIL $1${2:+: $2}"; }
missing() {  # missing <check> <tool> <package>
    fail "$1" "'$2' not found: install the Debian package $3"
}
has_target() { case " ${targets[*]} " in *" $1 "*) return 0 ;; esac; return 1; }

# ---------------------------------------------------------------------------
# Builds: name -> compiler, CFLAGS, output directory, make.sh options.
# ---------------------------------------------------------------------------
build_spec() {
    case "$1" in
        gcc-O2)     echo "gcc|-O2 -g|output|" ;;
        clang-O2)   echo "clang|-O2 -g|output/clang|" ;;
        gcc-O0)     echo "gcc|-O0 -g|output/gcc-O0|-o no-valgrind -o no-aarch64 -o no-riscv64" ;;
        clang-O0)   echo "clang|-O0 -g|output/clang-O0|-o no-valgrind -o no-aarch64 -o no-riscv64" ;;
        asan-gcc)   echo "gcc|-O1 -g1|output/asan-gcc|-s asan" ;;
        asan-clang) echo "clang|-O1 -g1|output/asan-clang|-s asan" ;;
        tsan-gcc)   echo "gcc|-O1 -g1|output/tsan-gcc|-s tsan" ;;
        tsan-clang) echo "clang|-O1 -g1|output/tsan-clang|-s tsan" ;;
        ubsan-gcc)  echo "gcc|-O1 -g1|output/ubsan-gcc|-s ubsan" ;;
        ubsan-clang) echo "clang|-O1 -g1|output/ubsan-clang|-s ubsan" ;;
    esac
}
# Target -> run sets "build:mode" (mode: how the programs run).
runs_of() {
    case "$1" in
        gcc-O2|clang-O2|gcc-O0|clang-O0) echo "$1:native" ;;
        valgrind) echo "gcc-O2:memcheck clang-O2:memcheck" ;;
        asan) echo "asan-gcc:asan-uar0 asan-gcc:asan-uar1 asan-clang:asan-uar0 asan-clang:asan-uar1" ;;
        tsan) echo "tsan-gcc:tsan tsan-clang:tsan" ;;
        ubsan) echo "ubsan-gcc:ubsan ubsan-clang:ubsan" ;;
        checked) echo "gcc-O2:checked" ;;
        checks|fresh) echo "" ;;
    esac
}
builds_of() {
    case "$1" in
        checks) echo "gcc-O2 clang-O2" ;;
        *) for rs in $(runs_of "$1"); do echo "${rs%%:*}"; done | sort -u ;;
    esac
}

# ---------------------------------------------------------------------------
# What each mode runs, leaves out and adjusts.
# ---------------------------------------------------------------------------
# Each program's facts come from its tests list (tests/tests.list says the
# format): its columns, and its rules for some runs (skip, env, lane), each
# with a reason.  The runtime's and the programs' tests run as rt_<name>.
# A line the format does not know stops the suite, naming it.
declare -A cols=() rules=()
while read -r kind n rest; do
    case $kind in
        E) cols[$n]=$rest ;;
        R) rules[$n]+="$rest"$'\n' ;;
        X) echo "test.sh: $n: $rest" >&2; exit 2 ;;
    esac
done < <(awk -v p="$(printf '%s' "rt/tests/tests.list apps/tests/tests.list")" '
    BEGIN { split(p, f, " "); for (i in f) rt[f[i]] = 1 }
    FNR == 1 { n = "" }
    /^[[:space:]]*(#|$)/ { next }
    { pre = (FILENAME in rt) ? "rt_" : ""; at = FILENAME ":" FNR }
    /^[[:space:]]/ {
        sub(/^[[:space:]]+/, "")
        if (n == "") { print "X", at, "a rule before any program"; next }
        if ($1 !~ /^(skip|env|lane)$/ || NF < 3) { print "X", at, "not a rule: " $0; next }
        print "R", pre n, $0; next }
    { n = $1
      for (i = 2; i <= NF; i++)
          if ($i !~ /^(expect|args|with|figures|link|ld|pkg)=./ && $i != "st")
              print "X", at, "not a column: " $i
      $1 = ""; print "E", pre n, $0 }' tests/tests.list rt/tests/tests.list apps/tests/tests.list)
col_of() {  # col_of <program> <column> -> its value, 1 for a bare column, or nothing
    local c cs
    read -ra cs <<< "${cols[$1]:-}"
    for c in "${cs[@]+"${cs[@]}"}"; do
        case $c in "$2"=*) echo "${c#*=}"; return ;; "$2") echo 1; return ;; esac
    done
}
# how each program must end, and its arguments
declare -A expect=() args=()
for n in "${!cols[@]}"; do
    e=$(col_of "$n" expect) a=$(col_of "$n" args)
    expect[$n]=${e:-0} args[$n]=${a//,/ }
done
# runs_match <runs> <target:mode>: does the list's RUNS pattern take this run?
runs_match() {
    local pats=$1 neg=0 p ps
    case $pats in '!'*) neg=1 pats=${pats#!} ;; esac
    IFS=, read -ra ps <<< "$pats"
    for p in "${ps[@]}"; do
        case $p in *:*) ;; *) p="*:$p" ;; esac
        # shellcheck disable=SC2053
        if [[ $2 == $p ]]; then return $neg; fi
    done
    return $((1 - neg))
}
# rules_of <program> <kind> <target:mode>: "SETTING REASON" of each such
# rule that takes the run (skip and lane: "REASON" / "alone|waits REASON")
rules_of() {
    local k runs rest
    [ -n "${rules[$1]:-}" ] || return 0
    while read -r k runs rest; do
        [ "$k" = "$2" ] && runs_match "$runs" "$3" && echo "$rest"
    done <<< "${rules[$1]:-}"
}
# Programs a run leaves out, with the reason (printed, never silent).
excluded_from() {  # excluded_from <target:mode> <program> -> reason or nothing
    [ -n "${rules[$2]:-}" ] || return 0
    rules_of "$2" skip "$1" | head -1
}
# Sanitizer options of the mode, and the program's settings from its list.
env_of() {  # env_of <target:mode> <program> -> VAR=value ...
    local o="" mode=${1#*:} set why out=""
    # valgrind does not see the kernel write io_uring's buffers: the
    # runtime's tests run on epoll there (adjust_reason says so)
    # (AUTO schedulers too: valgrind holds its lock through a blocking
    # io_uring_enter, and the other threads of a pool would wait forever)
    case "$2:$mode" in rt_test_*:memcheck) out="ACO_RT_TEST_BACKENDS=epoll ACO_RT_BACKEND=epoll" ;; esac
    case "$mode" in
        asan-uar*) o="ASAN_OPTIONS=detect_stack_use_after_return=${mode#asan-uar}:detect_leaks=1" ;;
        tsan) o="TSAN_OPTIONS=halt_on_error=1" ;;
        ubsan) o="UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1" ;;
        checked) out="ACO_CHECKED=1" ;;
    esac
    [ -n "${rules[$2]:-}" ] && while read -r set why; do
        case $set in
            '') ;;
            san:*) [ -n "$o" ] && o="$o:${set#san:}" ;;
            *) out="${out:+$out }$set" ;;
        esac
    done < <(rules_of "$2" env "$1")
    echo "$o${o:+${out:+ }}$out"
}
adjust_reason() {  # adjust_reason <target:mode> <program> -> reason or nothing
    local set why all=""
    case "$2:${1#*:}" in
        rt_test_*:memcheck) all="ACO_RT_TEST_BACKENDS=epoll: memcheck cannot see the kernel fill io_uring's buffers (every byte read would look uninitialised); both backends run everywhere else" ;;
    esac
    [ -n "${rules[$2]:-}" ] && while read -r set why; do
        [ -n "$set" ] && all="${all:+$all; }$why"
    done < <(rules_of "$2" env "$1")
    echo "$all"
}
variant_in_mode() {  # does this mode run this variant?
    case "$1:$2" in
        # checked: x86-64 (the suite's time); test_checked and
        # rt_test_checked_rt run on every architecture in every target (they
        # turn the mode on themselves)
        checked:*valgrind.shareFPUenv*|checked:m32.*|checked:aarch64*|checked:riscv64*) return 1 ;;
        memcheck:*no_valgrind*) return 1 ;;
        memcheck:*valgrind*) return 0 ;;
        *:*no_valgrind*) return 0 ;;
    esac
    return 1
}

# The slow modes run a core program in both FPU env variants, but not
# every pairing twice: the FPU env is acosw's alone, which no sanitizer nor
# memcheck looks into, and each pairing still runs on both ABIs.
#   asan      detect_stack_use_after_return=0 on the per-co FPU env
#             variants, =1 on the shared ones
#   memcheck  gcc's per-co FPU env variants, clang's shared ones
#   tsan      the same
#   ubsan     gcc's shared variants, clang's per-co FPU env ones
#   -O0       as memcheck
# and in asan, memcheck, ubsan and the cross variants of the -O2 targets
# (qemu-user) each program under one compiler, by its name's parity
# (rt_parity): gcc (0) or clang (1), asan and the cross runs the other way.
# The runtime's tests, built in one FPU env, are paired by their parity too:
#   asan      each under both compilers, with each option once: gcc with
#             detect_stack_use_after_return=<parity>, clang with the other
#   memcheck  each under one compiler: gcc (parity 0) or clang (parity 1)
#   ubsan     the same, and -O0 too
#   tsan      each under one compiler: gcc (parity 1) or clang (parity 0)
# so that a test's memcheck and TSan runs are of different compilers.
rt_parity() {  # rt_parity <program>: 0 or 1, by its name
    echo $(( $(printf '%s' "$1" | cksum | cut -d' ' -f1) % 2 ))
}
paired_out() {  # paired_out <mode> <compiler> <variant> <program> <target>: left out?
    local p clang=0
    p=$(rt_parity "$4")
    [ "$2" = clang ] && clang=1
    case "$4" in
        rt_*)
            case "$1:$5" in
                asan-uar*) [ "${1#asan-uar}" != $((p ^ clang)) ] ;;
                memcheck:*|ubsan:*|native:gcc-O0|native:clang-O0) [ "$p" != "$clang" ] ;;
                tsan:*) [ "$p" = "$clang" ] ;;
                *) return 1 ;;
            esac
            return ;;
    esac
    # The core's programs: one FPU env per compiler (or per option) ...
    case "$1:$2:$3" in
        asan-uar0:*:*shareFPUenv|asan-uar1:*:*standaloneFPUenv) return 0 ;;
        memcheck:gcc:*shareFPUenv|memcheck:clang:*standaloneFPUenv) return 0 ;;
        tsan:gcc:*shareFPUenv|tsan:clang:*standaloneFPUenv) return 0 ;;
        ubsan:gcc:*standaloneFPUenv|ubsan:clang:*shareFPUenv) return 0 ;;
    esac
    case "$5:$3" in
        gcc-O0:*shareFPUenv|clang-O0:*standaloneFPUenv) return 0 ;;
    esac
    # ... and in the slowest modes under one compiler, by parity
    case "$1:$3" in
        memcheck:*|ubsan:*) [ "$p" != "$clang" ] ;;
        asan-*|native:aarch64*|native:riscv64*) [ "$p" = "$clang" ] ;;
        *) return 1 ;;
    esac
}
paired_note() {  # paired_note <target> <program>: the line "By design" prints
    local q="'"
    case "$1:$2" in
        asan:rt_*) printf 'the runtime%ss tests (rt_*) run in\tasan\tunder gcc with detect_stack_use_after_return=0 and clang with =1, or the other way round, half of them each way (by their names%s parity)\n' "$q" "$q" ;;
        *:rt_*) printf 'the runtime%ss tests (rt_*) run in\t%s\tunder gcc%ss build or clang%ss, half of them each (by their names%s parity; a test%ss memcheck and TSan runs under different compilers)\n' "$q" "$1" "$q" "$q" "$q" "$q" ;;
        asan:*) printf 'the core programs (not rt_*) run in\tasan\tunder gcc or clang, half of them each (by their names%s parity), on both ABIs, with detect_stack_use_after_return=0 on the per-co FPU env variants, =1 on the shared ones (the FPU env is acosw%ss alone, which ASan does not look into)\n' "$q" "$q" ;;
        valgrind:*) printf 'the core programs (not rt_*) run in\tvalgrind\tunder gcc%ss per-co FPU env variants or clang%ss shared ones, half of them each (by their names%s parity), on both ABIs (the FPU env is acosw%ss alone, which memcheck does not look into)\n' "$q" "$q" "$q" "$q" ;;
        tsan:*) printf 'the core programs (not rt_*) run in\ttsan\tgcc%ss per-co FPU env variants and clang%ss shared ones (the FPU env is acosw%ss alone, which TSan does not look into)\n' "$q" "$q" "$q" ;;
        ubsan:*) printf 'the core programs (not rt_*) run in\tubsan\tunder gcc%ss shared FPU env variants or clang%ss per-co ones, half of them each (by their names%s parity), on both ABIs (the FPU env is acosw%ss alone, which UBSan does not look into)\n' "$q" "$q" "$q" "$q" ;;
        gcc-O0:*|clang-O0:*) printf 'the core programs (not rt_*) run in\t%s\tgcc%ss per-co FPU env variants and clang%ss shared ones (both FPU envs and both ABIs still run unoptimised)\n' "$1" "$q" "$q" ;;
        gcc-O2:*|clang-O2:*) printf 'the core programs (not rt_*) run in\t%s\ton aarch64 and riscv64 (qemu-user) under gcc%ss build or clang%ss, half of them each (by their names%s parity); on x86-64 and i386 under both\n' "$1" "$q" "$q" "$q" ;;
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

run_one() {  # one job line: name, bin, mode, expect, env, lane, emulator, args
    local name bin mode expect envs excl emu args
    IFS='|' read -r name bin mode expect envs excl emu args <<< "$1"
    local log="$LOGS/${name//\//_}.log"
    local cmd=("$bin")
    if [ "$mode" = check ]; then
        cmd=(bash "$bin")
    elif [ -n "$emu" ]; then
        # qemu writes a core file of an aborting program (expected aborts
        # included) into the working directory unless told not to.
        ulimit -c 0
        # shellcheck disable=SC2206
        cmd=($emu "$bin")
        # the benchmark re-executes itself: through the emulator too; the
        # signal storm knows its signals come between translated blocks
        export BENCH_EXEC_WRAPPER="$emu" ACO_TEST_EMULATOR="$emu"
    elif [ "$mode" = memcheck ]; then
        # --fair-sched: valgrind runs one thread at a time, and its default
        # lock let a co spinning on calls that never block keep it for
        # good (rt_test_cancel_busy: the canceller thread never ran)
        cmd=(valgrind --tool=memcheck --fair-sched=yes --error-exitcode=99 --leak-check=full
             --errors-for-leak-kinds=definite --child-silent-after-fork=yes
             --suppressions="$PWD/tests/valgrind.supp"
             --max-stackframe=8388608 -q "$bin")
    fi
    local start=$SECONDS cpu TIMEFORMAT='%U %S'
    # shellcheck disable=SC2086
    cpu=$( { time env $envs timeout -k 10 600 "${cmd[@]}" $args > "$log" 2>&1; } 2>&1; exit $?)
    local rc=$? got secs=$((SECONDS - start))
    # CPU seconds (user + system) of the run and everything it waited for
    cpu=$(awk '{printf "%.1f", $1 + $2}' <<< "$cpu")
    if [ $rc -gt 128 ] && [ $rc -lt 160 ]; then got="SIG$(kill -l $((rc - 128)))"; else got=$rc; fi
    # Reports: sanitizer reports, or memcheck's error count.
    local reports
    reports=$(grep -cE 'ERROR: (AddressSanitizer|LeakSanitizer)|WARNING: ThreadSanitizer|runtime error:' "$log")
    [ "$mode" = check ] && reports=0    # a check's own verdict is its status
    if [ "$mode" = memcheck ]; then
        reports=$(awk '/ERROR SUMMARY: [0-9]+ errors/ {n += $4} END {print n + 0}' "$log")
        # -q prints only a non-zero summary; --error-exitcode covers the rest
        [ "$rc" = 99 ] && [ "$reports" = 0 ] && reports=1
    fi
    if [ "$got" = "$expect" ] && [ "$reports" = 0 ]; then
        printf 'PASS\t%s\t0\t%s\t%s\n' "$name" "$secs" "$cpu" >> "$LOGS/runs"
        echo "PASS $name (${secs}s)"
    else
        printf 'FAIL\t%s\t%s\t%s\t%s\n' "$name" "$reports" "$secs" "$cpu" >> "$LOGS/runs"
        echo "FAIL $name: expected $expect, got $got, $reports reports; log: $log"
        tail -15 "$log" | sed 's/^/    | /'
    fi
}
export -f run_one
export LOGS

: > "$LOGS/runs"

jobs_file="$LOGS/jobs"
matched=0       # did -k PATTERN take a name (to run, or left out by design)?
notes="$LOGS/notes"
: > "$jobs_file"; : > "$notes"
# The runs of every target on build $1, into $jobs_file (one line each),
# from the programs the build makes (file $2: make.sh list).  Planned before
# the build, which then makes only the programs these runs need.
add_jobs() {
    local t rs b mode cc out label prefix v bin prog name why emu excl envs
    for t in "${targets[@]}"; do
        for rs in $(runs_of "$t"); do
            b=${rs%%:*} mode=${rs#*:}
            [ "$b" = "$1" ] || continue
            IFS='|' read -r cc _ out _ <<< "$(build_spec "$b")"
            label=$cc
            case "$mode" in asan-uar*) label="$cc-uar${mode#asan-uar}" ;; esac
            prefix="$t/$label"
            case "$mode" in native) prefix=$t ;; esac
            while read -r bin; do
                v=${bin##*..}
                variant_in_mode "$mode" "$v" || continue
                prog=$(basename "$bin"); prog=${prog%%..*}
                name="$prefix/$v/$prog"
                if [ -n "$pattern" ] && [[ "$name" != *$pattern* ]]; then continue; fi
                matched=1
                if paired_out "$mode" "$cc" "$v" "$prog" "$t"; then
                    paired_note "$t" "$prog" >> "$notes"; continue
                fi
                why=""
                [ -n "${rules[$prog]:-}" ] && why=$(excluded_from "$t:$mode" "$prog")
                if [ -n "$why" ]; then
                    printf '%s left out of\t%s\t%s\n' "$prog" "$t" "$why" >> "$notes"
                    continue
                fi
                why=$(adjust_reason "$t:$mode" "$prog")
                [ -n "$why" ] && printf '%s runs in\t%s\twith %s\n' "$prog" "$t" "$why" >> "$notes"
                if [ "$mode" = memcheck ] && [ $have_valgrind = 0 ]; then
                    missing "$name" valgrind valgrind; continue
                fi
                emu=$(runner_of "$v")
                if [ -n "$emu" ] && ! command -v "${emu%% *}" >/dev/null; then
                    missing "$name" "${emu%% *}" qemu-user; continue
                fi
                # The lane (native runs: not under an emulator): 0 the
                # CPU's, 1 alone, 2 the programs that mostly wait.
                excl=0 envs=$(env_of "$t:$mode" "$prog")
                if [ -z "$emu" ] && [ -n "${rules[$prog]:-}" ]; then
                    case $(rules_of "$prog" lane "$t:$mode" | head -1) in
                        alone*) excl=1 ;;
                        waits*) excl=2 ;;
                    esac
                fi
                # '|'-separated: IFS would merge the empty fields of tabs
                printf '%s|%s|%s|%s|%s|%s|%s|%s\n' "$name" "$bin" "$mode" "${expect[$prog]:-0}" \
                    "$envs" "$excl" "$emu" "${args[$prog]:-}" >> "$jobs_file"
            done < "$2"
        done
    done
}

# Longest first keeps the cores busy to the end: by last run's durations
# (output/test-durations), else by a guess from the mode and the program
# (a runtime test takes longer than a core one).
order() {
    awk -F'|' -v d="$DURATIONS" '
        BEGIN { while ((getline l < d) > 0) { split(l, f, "\t"); t[f[1]] = f[2] } }
        { e = ($1 in t) ? t[$1] : ($3 == "check" ? 60 : $3 == "memcheck" ? 20 : $7 != "" ? 10 : index($2, "/rt_") ? 6 : 3)
          print e "\t" $0 }' | sort -t$'\t' -k1,1nr | cut -f2-
}

# Two lanes run the programs, each fed through a FIFO as soon as their build
# is done, so that they run during the later builds (which are niced: the
# runs come first, the compilers take the CPU time left over):
#  - the programs that mostly wait (their lists' "lane ... waits"), $JOBS
#    at a time;
#  - the others and the checks, one more than $JOBS at a time: many of them
#    wait part of their time (a peer, a deadline, the other thread's turn).
# The checks join the second lane once gcc-O2 and clang-O2 are built (their
# output/ and output/clang).  Then, both lanes done, the exclusive runs, one
# at a time.
for lane in waits main; do
    mkfifo "$LOGS/$lane.fifo" || { echo "test.sh: mkfifo $LOGS/$lane.fifo failed" >&2; exit 2; }
done
xargs -r -d '\n' -P "$JOBS" -n 1 bash -c 'run_one "$1" 2>/dev/null' _ < "$LOGS/waits.fifo" |
    grep -v '^PASS' > "$LOGS/lane-waits" &
waits_lane=$!
xargs -r -d '\n' -P $((JOBS + 1)) -n 1 bash -c 'run_one "$1" 2>/dev/null' _ < "$LOGS/main.fifo" |
    grep -v '^PASS' > "$LOGS/lane-main" &
main_lane=$!
exec 4> "$LOGS/waits.fifo" 5> "$LOGS/main.fifo"
# feed FILE: FILE's job lines onto stdout (a lane's FIFO), one write each.
# Batches are fed in the background and overlap: a write to a pipe is
# atomic only up to PIPE_BUF (4096 bytes), and cat's large writes, cut
# short by a full FIFO, let another batch's bytes into the middle of a
# line (seen as jobs named "tutorial_0..no__saved..": exit 127).
feed() {
    local line
    while IFS= read -r line; do printf '%s\n' "$line"; done < "$1"
}
# Whole-artifact checks (tests/check_*.sh), one verdict each, into the main
# lane.
checks_queued=0
queue_checks() {
    local chk n excl k=$(wc -l < "$jobs_file")
    checks_queued=1
    has_target checks || return 0
    for chk in tests/check_*.sh; do
        [ -f "$chk" ] || continue
        n="checks/$(basename "$chk" .sh)"
        if [ -n "$pattern" ] && [[ "$n" != *$pattern* ]]; then continue; fi
        # a check whose verdict is a latency ("# test.sh: alone" in it)
        # runs with the exclusive runs, after the lanes, one at a time
        excl=0
        grep -q '^# test.sh: alone' "$chk" && excl=1
        printf '%s|%s|check|0||%s||\n' "$n" "$chk" "$excl" >> "$jobs_file"
    done
    tail -n +$((k + 1)) "$jobs_file" | awk -F'|' '$6 == 0' | order > "$LOGS/batch-checks.main"
    feed "$LOGS/batch-checks.main" >&5 4>&- &
}

# Does a check's name take -k's pattern (no pattern: all do)?  Else the
# checks need no build of their own (a -k typo says so without one).
checks_match() {
    local chk
    [ -z "$pattern" ] && return 0
    for chk in tests/check_*.sh; do
        [[ "checks/$(basename "$chk" .sh)" == *$pattern* ]] && return 0
    done
    return 1
}

built=" "
TIMEFORMAT='%U %S'
: > "$LOGS/builds"
for t in "${targets[@]}"; do
    for b in $(builds_of "$t"); do
        case "$built" in *" $b "*) continue ;; esac
        built="$built$b "
        IFS='|' read -r cc cflags out opts <<< "$(build_spec "$b")"
        if ! command -v "$cc" >/dev/null; then missing "build/$b" "$cc" "$cc"; continue; fi
        # The runs first, planned from the programs the build would make;
        # then the build makes only what they run, and for the checks
        # gcc-O2's libraries and other programs (check_elf looks at the
        # test programs there are, of output/ and output/clang).
        bstart=$SECONDS
        # shellcheck disable=SC2086
        if ! CC=$cc CFLAGS=$cflags OUTPUT=$out bash make.sh "${make_opts[@]+"${make_opts[@]}"}" $opts list \
                > "$LOGS/outputs-$b" 2> "$LOGS/build-$b.log" 4>&- 5>&-; then
            fail "build/$b" "see $LOGS/build-$b.log"; tail -20 "$LOGS/build-$b.log" | sed 's/^/    | /'
            continue
        fi
        n=$(wc -l < "$jobs_file")
        grep -F .. "$LOGS/outputs-$b" > "$LOGS/programs-$b" || true
        add_jobs "$b" "$LOGS/programs-$b"
        mapfile -t only < <(tail -n +$((n + 1)) "$jobs_file" | cut -d'|' -f2 | sort -u)
        case " $(builds_of checks) " in
            *" $b "*)
                if has_target checks && checks_match; then
                    # nothing of it runs (test.sh checks): all of it
                    [ ${#only[@]} = 0 ] && mapfile -t only < "$LOGS/outputs-$b"
                    [ "$b" = gcc-O2 ] && mapfile -t -O ${#only[@]} only < <(grep -vF .. "$LOGS/outputs-$b")
                fi ;;
        esac
        if [ ${#only[@]} = 0 ]; then echo "build/$b: none of its programs runs: not built"; continue; fi
        # shellcheck disable=SC2086
        if bcpu=$( { time CC=$cc CFLAGS=$cflags OUTPUT=$out nice -n 10 bash make.sh "${make_opts[@]+"${make_opts[@]}"}" $opts \
                "${only[@]+"${only[@]}"}" >> "$LOGS/build-$b.log" 2>&1 4>&- 5>&-; } 2>&1); then
            pass "build/$b"
            printf 'build/%s\t%s\t%s\n' "$b" $((SECONDS - bstart)) "$(awk '{printf "%.0f", $1 + $2}' <<< "$bcpu")" >> "$LOGS/builds"
        else
            fail "build/$b" "see $LOGS/build-$b.log"; tail -20 "$LOGS/build-$b.log" | sed 's/^/    | /'
            # its runs go: the build's failure is their verdict
            head -n "$n" "$jobs_file" > "$jobs_file.tmp" && mv "$jobs_file.tmp" "$jobs_file"
            continue
        fi
        # its programs start now, while the next build compiles (written
        # in the background: a lane reads its FIFO only as fast as it runs)
        tail -n +$((n + 1)) "$jobs_file" | awk -F'|' '$6 == 2' | order > "$LOGS/batch-$b.waits"
        tail -n +$((n + 1)) "$jobs_file" | awk -F'|' '$6 == 0' | order > "$LOGS/batch-$b.main"
        feed "$LOGS/batch-$b.waits" >&4 5>&- &
        feed "$LOGS/batch-$b.main" >&5 4>&- &
        case "$built" in *" gcc-O2 "*) case "$built" in *" clang-O2 "*)
            [ $checks_queued = 1 ] || queue_checks ;; esac ;; esac
    done
done
builds_end=$((SECONDS - t0))
[ $checks_queued = 1 ] || queue_checks
exec 4>&- 5>&-
if [ -s "$notes" ]; then
    echo "By design:"
    # One line per program and reason, naming the targets.
    sort -u "$notes" | awk -F'\t' '{k = $1 "\t" $3; if (!(k in t)) o[n++] = k; t[k] = t[k] (t[k] ? ", " : "") $2}
        END {for (i = 0; i < n; i++) {split(o[i], f, "\t"); printf "  %s %s: %s\n", f[1], t[o[i]], f[2]}}'
fi
wait "$main_lane" "$waits_lane"
cat "$LOGS/lane-main" "$LOGS/lane-waits"
awk -F'|' '$6 == 1' "$jobs_file" |
    xargs -r -d '\n' -P 1 -n 1 bash -c 'run_one "$1" 2>/dev/null' _ | grep -v '^PASS' || true
# fresh: last and alone (it takes both CPUs for its minutes), its step
# lines shown as they come; its log holds them all.
if has_target fresh && { [ -z "$pattern" ] || [[ fresh/fresh_root == *$pattern* ]]; }; then
    echo "fresh/fresh_root: README.md's path in a bare Debian 12 root (4 to 10 minutes)"
    fstart=$SECONDS
    exec 3>&1
    fcpu=$( { time timeout -k 10 2400 bash tests/fresh_root.sh 2>&1 | tee "$LOGS/fresh_fresh_root.log" |
        { grep --line-buffered -E '^(== |fresh_root: )' || true; } | sed -u 's/^/    /' >&3; } 2>&1 )
    frc=$?
    exec 3>&-
    fcpu=$(awk '{printf "%.1f", $1 + $2}' <<< "$fcpu")
    if [ $frc = 0 ]; then
        printf 'PASS\t%s\t0\t%s\t%s\n' fresh/fresh_root $((SECONDS - fstart)) "$fcpu" >> "$LOGS/runs"
        echo "PASS fresh/fresh_root ($((SECONDS - fstart))s)"
    else
        printf 'FAIL\t%s\t0\t%s\t%s\n' fresh/fresh_root $((SECONDS - fstart)) "$fcpu" >> "$LOGS/runs"
        echo "FAIL fresh/fresh_root: exited $frc; log: $LOGS/fresh_fresh_root.log"
        tail -15 "$LOGS/fresh_fresh_root.log" | sed 's/^/    | /'
    fi
fi
cat "$LOGS/runs" >> "$results"
# A job that left no verdict (its xargs gave up after a killed child, or
# the lane never started) fails, by name.
comm -23 <(cut -d'|' -f1 "$jobs_file" | sort -u) <(cut -f2 "$LOGS/runs" | sort -u) |
    while read -r name; do fail "$name" "it never ran (see $LOGS/lane-waits)"; done
echo "ran $(wc -l < "$jobs_file") program runs and checks; the longest:"
sort -t$'\t' -k4,4nr "$LOGS/runs" | head -8 | awk -F'\t' '{printf "  %4ds %s\n", $4, $2}'
# Where the suite's time goes: each build's wall and CPU seconds, and the
# runs' per target (the CPU seconds count every process a run waited for).
echo "Time (wall s, CPU s): the builds ended at $builds_end s, the runs at $((SECONDS - t0)) s"
awk -F'\t' '{w += $2; c += $3; printf "  %-22s %5d %6d\n", $1, $2, $3}
    END {printf "  %-22s %5d %6d\n", "builds", w, c}' "$LOGS/builds"
awk -F'\t' '{split($2, p, "/"); w[p[1]] += $4; c[p[1]] += $5; if (!(p[1] in w0)) o[n++] = p[1]; w0[p[1]] = 1}
    END {for (i = 0; i < n; i++) printf "  runs of %-14s %5d %6d\n", o[i], w[o[i]], c[o[i]]}' "$LOGS/runs"

# ---------------------------------------------------------------------------
# Figures: per target, and the signal storms.
# ---------------------------------------------------------------------------
echo "Per target (checks passed/failed, sanitizer or memcheck reports):"
for t in "${targets[@]}"; do
    awk -F'\t' -v t="$t" 'index($2, t "/") == 1 { if ($1 == "PASS") p++; else f++; r += $3 }
        END { printf "  %-9s %4d passed, %d failed, %d reports\n", t, p, f, r }' "$results"
done
# The figures of the programs whose list says figures=WORD: the first
# "WORD:" line of each run's log.
first=1
while IFS='|' read -r name _; do
    prog=${name##*/} fig=$(col_of "${name##*/}" figures)
    [ -n "$fig" ] || continue
    log="$LOGS/$(echo "$name" | tr '/' '_').log"
    line=$(grep -m1 "^$fig:" "$log" 2>/dev/null | sed "s/^$fig: //")
    [ $first = 1 ] && echo "Figures (the first \"WORD:\" line of each run of a program whose list says figures=WORD):" && first=0
    printf '  %-52s %s\n' "${name%/"$prog"} $fig" "${line:-(no figures: see $log)}"
done < "$jobs_file"

np=$(grep -c '^PASS' "$results")
nf=$(grep -c '^FAIL' "$results")
# A -k that takes nothing is a typo, not a pass.
# (Said only when nothing else failed: a failed build's runs are dropped
# from jobs_file, a missing tool's never reach it.)
if [ -n "$pattern" ] && [ "$nf" = 0 ] && [ "$(wc -l < "$jobs_file")" = 0 ] &&
   ! grep -q 'fresh/fresh_root' "$results"; then
    if [ $matched = 0 ]; then
        echo "no check's name contains '$pattern': nothing ran (a name is" \
             "target/[compiler/]variant/program or checks/check_NAME)"
    else
        echo "every check whose name contains '$pattern' is left out of these" \
             "targets (By design, above): nothing ran"
    fi
    nf=$((nf + 1))
fi
if [ ${#skipped[@]} -gt 0 ]; then
    echo "left out by request (-o): ${skipped[*]}"
fi
if [ "$nf" -gt 0 ]; then
    echo "failed:"; grep '^FAIL' "$results" | cut -f2 | sed 's/^/  /'
    [ "$nf" -gt "$(grep -c '^FAIL' "$results")" ] && echo "  -k $pattern (no check)"
fi
echo "targets: ${targets[*]}; $((SECONDS - t0)) s"
echo "$np passed, $nf failed"
[ "$nf" = 0 ]
