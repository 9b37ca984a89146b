#!/usr/bin/env bash
# make.sh - build libaco, its tutorials, tests and benchmark into output/.
#
#   bash make.sh                    everything this machine's toolchains can
#                                   build: a variant whose toolchain is missing
#                                   is left out with one line naming the
#                                   Debian package that brings it
#   bash make.sh libs               the libraries alone (libaco.a and .so,
#                                   libaco_rt.a and .so, libaco_hook.so,
#                                   libaco_rt_tls.a and .so where OpenSSL 3
#                                   is, and their .pc files): what a
#                                   program of yours links, in seconds
#   bash make.sh -o strict          the same as plain make.sh, but a missing toolchain is an
#                                   error (also ACO_STRICT=1; test.sh is strict)
#   bash make.sh -o no-m32          without the i386 (-m32) variants
#   bash make.sh -o no-valgrind     without the ACO_USE_VALGRIND variants
#   bash make.sh -o no-aarch64      without the aarch64 cross variants
#   bash make.sh -o no-riscv64      without the riscv64 cross variants
#   bash make.sh -o no-fcontext     the benchmark without its Boost.Context peer
#   bash make.sh -s asan|tsan|ubsan build with that sanitizer (its flags are
#                                   added to CFLAGS) the variants it applies
#                                   to: x86-64 and i386 (tsan: x86-64 only),
#                                   no valgrind, into output/<sanitizer>
#                                   (into $OUTPUT itself when it is set)
#   bash make.sh bench              build only what it runs (the benchmark's
#                                   two x86-64 builds), then run it (shared
#                                   then per-co FPU env), ending with its
#                                   `headline` lines and one line naming the
#                                   targets met and missed.  Its 10M-co
#                                   memory runs need about 3 GiB: it says
#                                   how much before, and leaves them out,
#                                   saying so, where less is available.
#                                   BENCH_ARGS replaces the default build's
#                                   arguments (e.g. --quick)
#   bash make.sh bench-rt           build the runtime's libraries and
#                                   programs, then run its benchmarks
#                                   side by side with redis-server, Go,
#                                   Boost.Fiber, nc, nginx, h2o, fio and cp
#                                   (bench/bench_rt.sh;
#                                   BENCH_RT_ARGS: e.g. --quick)
#   bash make.sh soak               build, then aco_resp under chaos for 10
#                                   minutes (tests/check_rt_chaos.sh, which
#                                   test.sh's checks run for 40 s;
#                                   CHAOS_SECONDS: another length)
#   bash make.sh list               print what a build makes (libraries,
#                                   programs, output/<program>..<variant>:
#                                   everything but output/obj/), one per
#                                   line, and build nothing
#   bash make.sh [...] OUTPUT...    build only these outputs (as `list`
#                                   prints them) and what they are built
#                                   from (test.sh: what it runs)
#   bash make.sh install            install headers, libaco.a, libaco.so and
#                                   libaco.pc under $DESTDIR$PREFIX, and the
#                                   runtime's (aco_rt.h, aco_rt_pthread*.h,
#                                   libaco_rt.*, libaco_rt.pc, libaco_hook.so
#                                   and .pc; aco_rt_tls.h, libaco_rt_tls.*
#                                   and .pc where OpenSSL 3 is);
#                                   docs/install.md
#   bash make.sh -o no-uring        the runtime without its io_uring backend
#   bash make.sh -o no-tls          without libaco_rt_tls (TLS over OpenSSL)
#
# Environment: CC (gcc), CFLAGS (-O2 -g), OUTPUT (output), PREFIX (/usr/local),
# ACO_STRICT (1: as -o strict), BENCH_ARGS (see bench), JOBS (nproc; 1-4096),
# CHAOS_SECONDS (see soak),
# DESTDIR (empty), CC_AARCH64 / CC_RISCV64 (the cross compilers: with CC=gcc
# <arch>-linux-gnu-gcc, with CC=clang "clang --target=<arch>-linux-gnu").
# Every compile uses -Wall -Wextra -Werror.
#
# The runtime (rt/, its library's sources listed in rt/sources.list) is
# built for x86-64 natively: output/libaco_rt.a and .so, output/libaco.pc and
# libaco_rt.pc (PKG_CONFIG_PATH=output), the syscall hooks
# output/libaco_hook.so, the single-thread build output/libaco_rt_st.a, the
# programs output/aco_echo, aco_resp, aco_nc, aco_rt_bench (and
# aco_rt_bench_st), aco_file_bench, hook_hiredis and hook_hiredis_linked (with
# libhiredis-dev), the chaos clients of aco_resp and aco_http
# output/chaos_resp and chaos_http (plain threads, no runtime), and its tests as
# output/rt_test_<name>..<variant> for the variants
# (no_)valgrind.standaloneFPUenv (and rt_test_<name>_st.. for four of them).
#
# Programs are named output/<program>..<variant>, the variant being
# [m32.]{no_valgrind,valgrind}.{standaloneFPUenv,shareFPUenv} natively and
# {aarch64,aarch64.pac_bti,riscv64}.no_valgrind.{standaloneFPUenv,shareFPUenv}
# cross-built (static; test.sh runs them under qemu-user).  aarch64.pac_bti
# is -mbranch-protection=standard (return addresses signed, BTI landing pads),
# per-co FPU env only.
set -euo pipefail
cd "$(dirname "$0")"

CC=${CC:-gcc}
CFLAGS=${CFLAGS:--O2 -g}
PREFIX=${PREFIX:-/usr/local}
DESTDIR=${DESTDIR:-}
WARN="-Wall -Wextra -Werror"
VERSION=$(awk '/define ACO_VERSION_(MAJOR|MINOR|PATCH)/ {v = v (v ? "." : "") $3} END {print v}' aco.h)
SOMAJOR=${VERSION%%.*}

usage() {
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
}

no_m32=0
no_valgrind=0
no_aarch64=0
no_riscv64=0
no_fcontext=0
no_uring=0
no_tls=0
strict=${ACO_STRICT:-0}
san=""
action=build
only=()         # outputs named on the command line: only these are built
while [ $# -gt 0 ]; do
    case "$1" in
        -o) shift
            case "${1:-}" in
                no-m32) no_m32=1 ;;
                no-valgrind) no_valgrind=1 ;;
                no-aarch64) no_aarch64=1 ;;
                no-riscv64) no_riscv64=1 ;;
                no-fcontext) no_fcontext=1 ;;
                no-uring) no_uring=1 ;;
                no-tls) no_tls=1 ;;
                strict) strict=1 ;;
                *) echo "make.sh: unknown option -o '${1:-}'" >&2; usage >&2; exit 2 ;;
            esac ;;
        -s) shift
            case "${1:-}" in
                asan|tsan|ubsan) san=$1 ;;
                *) echo "make.sh: unknown sanitizer -s '${1:-}'" >&2; usage >&2; exit 2 ;;
            esac ;;
        -h|--help) usage; exit 0 ;;
        install) action=install ;;
        libs) action=libs ;;
        bench) action=bench ;;
        bench-rt) action=bench-rt ;;
        soak) action=soak ;;
        list) action=list ;;
        */*) only+=("$1") ;;
        *) echo "make.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
    esac
    shift
done

OUTPUT=${OUTPUT:-output${san:+/$san}}

# Sanitizer builds: the flags, and the variants that make sense: native
# x86-64 and i386 (TSan has no i386 runtime), never valgrind's.  libaco
# detects ASan and TSan itself (aco.h), no macro needed; UBSan has no macro
# of its own, so ACO_TEST_UBSAN tells the tests (test_alloc: its frames).
case "$san" in
    asan) SANFLAGS="-fsanitize=address -fno-omit-frame-pointer" ;;
    tsan) SANFLAGS="-fsanitize=thread"; no_m32=1 ;;
    ubsan) SANFLAGS="-fsanitize=undefined -fno-sanitize-recover=all -DACO_TEST_UBSAN=1" ;;
    *) SANFLAGS="" ;;
esac
if [ -n "$san" ]; then no_valgrind=1; no_aarch64=1; no_riscv64=1; fi
# The benchmarks build only what they run: native x86-64, no valgrind.
# So do the libraries alone: the native x86-64 ones.
case $action in bench|bench-rt|libs) no_m32=1; no_valgrind=1; no_aarch64=1; no_riscv64=1 ;; esac
CFLAGS="$CFLAGS${SANFLAGS:+ $SANFLAGS}"

# The programs of tests lists (tests/tests.list says the format: a line of
# name and columns each, rules indented under it, which are test.sh's).
list_lines() { awk '/^[[:space:]]*(#|$)/ || /^[[:space:]]/ {next} {print}' "$@"; }
# Each list's columns, read once: list_cols[<list>|<program>|<column>]
# (an awk per look was 5 CPU s of every make.sh run, 1300 looks).
declare -A list_cols=()
load_cols() {  # load_cols <list>: into list_cols (the first of a key holds)
    local p c v
    while IFS=$'\t' read -r p c v; do
        [ -n "${list_cols["$1|$p|$c"]+x}" ] || list_cols["$1|$p|$c"]=$v
    done < <(awk '/^[^[:space:]#]/ {for (i = 2; i <= NF; i++) {
                  e = index($i, "="); if (e) print $1 "\t" substr($i, 1, e - 1) "\t" substr($i, e + 1)
                  else print $1 "\t" $i "\t1"}}' "$1")
    list_cols["$1"]=1
}
for l in tests/tests.list rt/tests/tests.list apps/tests/tests.list; do [ -f "$l" ] && load_cols "$l"; done
list_col() {  # list_col <list> <program> <column>: its value, 1 for a bare one
    [ -n "${list_cols["$1"]+x}" ] || load_cols "$1"
    [ -z "${list_cols["$1|$2|$3"]+x}" ] || printf '%s\n' "${list_cols["$1|$2|$3"]}"
}
# The core's programs: the top-level ones (<name>.c), then tests/<name>.c.
programs() {
    list_lines tests/tests.list | awk '{print $1}' |
        while read -r n; do if [ -f "tests/$n.c" ]; then echo "tests/$n"; else echo "$n"; fi; done
}

# Can the toolchain build this flavour?  Name what is missing instead of
# skipping silently.  A probe that succeeded is remembered in
# $OUTPUT/obj/probes (keyed by the command and the compiler's file), so that
# a second run compiles nothing; one that failed is asked again next time.
probe_ok() {   # probe_ok <command...>: does it build (or preprocess) p.c?
    local dir="$OUTPUT/obj/probes" key tmp rc
    key=$(printf '%s\n' "$*" "$(ls -lL "$(command -v "$1" 2>/dev/null || echo "$1")" 2>/dev/null)" |
          cksum | tr ' ' '-')
    [ -f "$dir/$key" ] && return 0
    tmp=$(mktemp -d)
    printf '#include <stdio.h>\nint main(void){return 0;}\n' > "$tmp/p.c"
    printf '#include <valgrind/valgrind.h>\n#include <valgrind/memcheck.h>\n' > "$tmp/vg.c"
    (cd "$tmp" && "$@" > /dev/null 2>&1); rc=$?
    rm -rf "$tmp"
    [ $rc = 0 ] && mkdir -p "$dir" && printf '%s\n' "$*" > "$dir/$key"
    return $rc
}
probe() {   # probe <flags...>
    probe_ok "$CC" "$@" p.c -o p
}
have_valgrind_h() {
    probe_ok "$CC" -E vg.c
}

# The cross compiler for an architecture, following CC's family.
cross_cc() {   # cross_cc <aarch64|riscv64>
    local var
    var=CC_$(echo "$1" | tr '[:lower:]' '[:upper:]')
    if [ -n "${!var:-}" ]; then echo "${!var}"; return; fi
    case "$($CC --version 2>/dev/null | head -1)" in
        *clang*) echo "$CC --target=$1-linux-gnu" ;;
        *) echo "$1-linux-gnu-gcc" ;;
    esac
}
cross_probe() {   # cross_probe <arch>: a static C program links
    # shellcheck disable=SC2046
    probe_ok $(cross_cc "$1") -static p.c -o p
}

if [ -n "$san" ] && ! probe $SANFLAGS; then
    case "$CC" in
        *clang*) pkg="libclang-rt-dev (clang's sanitizer runtimes)" ;;
        *) pkg="libasan8, libtsan2 and libubsan1 (gcc's sanitizer runtimes)" ;;
    esac
    echo "make.sh: $CC cannot link with $SANFLAGS: install the Debian package $pkg" >&2
    exit 1
fi

# A variant family whose toolchain is missing: left out with one line that
# names what is missing and the Debian package, or in strict mode an error.
left_out=()
leave_out() {   # leave_out <option> <what> <why, and what to install>...
    local opt=$1 what=$2; shift 2
    [ $action = install ] && return     # installs the library alone
    if [ "$strict" = 1 ]; then
        echo "make.sh: cannot build $what: $* (strict: a missing toolchain is" \
             "an error; pass -o no-$opt to leave it out)" >&2
        exit 1
    fi
    echo "make.sh: leaving out $what: $*" >&2
    left_out+=("$opt")
}

variants=()
for arch in x86_64 m32; do
    if [ $arch = m32 ]; then
        [ $no_m32 = 1 ] && continue
        if ! probe -m32 $SANFLAGS; then
            leave_out m32 "the i386 (-m32) variants" "$CC cannot build -m32 programs: install gcc-multilib (Debian)"
            continue
        fi
    fi
    for vg in no_valgrind valgrind; do
        if [ $vg = valgrind ]; then
            [ $no_valgrind = 1 ] && continue
            if ! have_valgrind_h; then
                # once, not once per architecture
                case " ${left_out[*]:-} " in *" valgrind "*) continue ;; esac
                leave_out valgrind "the valgrind variants" "<valgrind/memcheck.h> not found: install valgrind" \
                                   "(Debian ships the headers in it)"
                continue
            fi
        fi
        for fpu in standaloneFPUenv shareFPUenv; do
            if [ $arch = m32 ]; then variants+=("m32.$vg.$fpu"); else variants+=("$vg.$fpu"); fi
        done
    done
done

for arch in aarch64 riscv64; do
    if [ $arch = aarch64 ] && [ $no_aarch64 = 1 ]; then continue; fi
    if [ $arch = riscv64 ] && [ $no_riscv64 = 1 ]; then continue; fi
    if ! cross_probe $arch; then
        libc=libc6-dev-$( [ $arch = aarch64 ] && echo arm64 || echo riscv64 )-cross
        leave_out $arch "the $arch variants" "'$(cross_cc $arch)' cannot link a static $arch program:" \
            "install gcc-$arch-linux-gnu and $libc (Debian; the libc is only" \
            "a Recommends of the compiler), or set CC_$(echo $arch | tr '[:lower:]' '[:upper:]')" \
            "(e.g. 'clang --target=$arch-linux-gnu')"
        continue
    fi
    variants+=("$arch.no_valgrind.standaloneFPUenv" "$arch.no_valgrind.shareFPUenv")
    [ $arch = aarch64 ] && variants+=("aarch64.pac_bti.no_valgrind.standaloneFPUenv")
done

variant_cc() {   # variant -> compiler command
    case "$1" in
        aarch64.*) cross_cc aarch64 ;;
        riscv64.*) cross_cc riscv64 ;;
        *) echo "$CC" ;;
    esac
}

variant_flags() {   # variant -> compiler flags
    local f=""
    case "$1" in m32.*) f="$f -m32" ;; esac
    case "$1" in aarch64.*|riscv64.*) f="$f -static" ;; esac
    case "$1" in *.pac_bti.*) f="$f -mbranch-protection=standard" ;; esac
    # valgrind 3.19 cannot read clang 14's default DWARF 5: ask for DWARF 4.
    case "$1" in *.valgrind.*|valgrind.*) f="$f -DACO_USE_VALGRIND -gdwarf-4" ;; esac
    case "$1" in *shareFPUenv) f="$f -DACO_CONFIG_SHARE_FPU_MXCSR_ENV" ;; esac
    echo "$f"
}

# The benchmark compares with Boost.Context's fcontext where Debian has it:
# libboost-context-dev's static archive (C linkage), x86-64 only.
BOOST_CONTEXT_A=$($CC -print-file-name=libboost_context.a)
if [ $no_fcontext = 1 ]; then
    BOOST_CONTEXT_A=""
elif [ ! -f "$BOOST_CONTEXT_A" ] && [ $action != install ]; then
    leave_out fcontext "the benchmark's fcontext peer" "libboost_context.a" \
        "not found: the benchmark compares with swapcontext only (install" \
        "libboost-context-dev)"
fi
bench_flags() {   # variant -> extra arguments for test_aco_benchmark
    case "$1" in m32.*|aarch64.*|riscv64.*) return ;; esac
    [ -n "$BOOST_CONTEXT_A" ] && [ -f "$BOOST_CONTEXT_A" ] && echo "-DBENCH_HAVE_FCONTEXT $BOOST_CONTEXT_A"
    return 0
}

# The runtime's io_uring backend needs liburing (liburing-dev).
RT_URING=""
if [ $no_uring = 0 ]; then
    printf '#include <liburing.h>\nint main(void){struct io_uring r; return io_uring_queue_init(8, &r, 0) & 0;}\n' \
        > "${TMPDIR:-/tmp}/aco_uring_probe.$$.c"
    if $CC $SANFLAGS "${TMPDIR:-/tmp}/aco_uring_probe.$$.c" -luring -o /dev/null > /dev/null 2>&1; then
        RT_URING=1
    elif [ $action = install ]; then
        echo "make.sh: installing the runtime without its io_uring backend:" \
             "<liburing.h> or -luring not found (install liburing-dev)" >&2
    elif [ $action != bench ]; then
        leave_out uring "the runtime's io_uring backend" "<liburing.h> or -luring not found:" \
            "install liburing-dev (the runtime then has epoll only)"
    fi
    rm -f "${TMPDIR:-/tmp}/aco_uring_probe.$$.c"
fi
# The runtime's TLS library (libaco_rt_tls, rt/tls.c) needs OpenSSL 3
# (libssl-dev); programs without TLS never link it.
RT_TLS=""
if [ $no_tls = 1 ]; then
    case $action in build|libs|install) echo "make.sh: -o no-tls: no libaco_rt_tls, aco_http without HTTPS, no TLS tests" ;; esac
else
    printf '#include <openssl/ssl.h>\n#if OPENSSL_VERSION_MAJOR < 3\n#error OpenSSL 3 wanted\n#endif\nint main(void){return OPENSSL_init_ssl(0, 0) & 0;}\n' \
        > "${TMPDIR:-/tmp}/aco_tls_probe.$$.c"
    if $CC $SANFLAGS "${TMPDIR:-/tmp}/aco_tls_probe.$$.c" -lssl -lcrypto -o /dev/null > /dev/null 2>&1; then
        RT_TLS=1
    elif [ $action = install ]; then
        echo "make.sh: installing the runtime without libaco_rt_tls:" \
             "OpenSSL 3's <openssl/ssl.h> or -lssl not found (install libssl-dev)" >&2
    elif [ $action != bench ]; then
        leave_out tls "libaco_rt_tls (TLS), aco_http's HTTPS and their tests" \
            "OpenSSL 3's <openssl/ssl.h> or -lssl not found:" "install libssl-dev"
    fi
    rm -f "${TMPDIR:-/tmp}/aco_tls_probe.$$.c"
fi
# The runtime library's sources: rt/sources.list (CMakeLists.txt reads it
# too), as names without .c.
rt_lib_srcs() {
    sed -e 's/#.*//' -e 's/[[:space:]]//g' -e '/^$/d' -e 's/\.c$//' rt/sources.list
}
# The runtime's tests (rt/tests/) and the programs' (apps/tests/): both
# built against the runtime as output/rt_<name>..<variant>.
rt_tests() { list_lines rt/tests/tests.list apps/tests/tests.list | awk '{print $1}'; }
test_src() { if [ -f "rt/tests/$1.c" ]; then echo "rt/tests/$1.c"; else echo "apps/tests/$1.c"; fi; }
test_list() { if [ -f "rt/tests/$1.c" ]; then echo rt/tests/tests.list; else echo apps/tests/tests.list; fi; }
rt_programs() { echo apps/aco_echo apps/aco_resp apps/aco_nc apps/aco_http bench/aco_rt_bench bench/aco_file_bench; }
rt_st_tests() { list_lines rt/tests/tests.list | awk '{for (i = 2; i <= NF; i++) if ($i == "st") print $1}'; }

# ---------------------------------------------------------------------------
# The build proper: make.sh writes every output's rule (what it is built
# from, and the command) into $OUTPUT/build.mk, a makefile, and runs
# `make -j$JOBS` on it.  Incremental: the compilers' -MMD dependency files
# name the headers each file includes, and each build directory's `flags`
# file, rewritten only when the flags change, is a prerequisite of
# everything built with them, so a second run with nothing changed compiles
# nothing.  Without make, what was asked for is built every time, in stages.
# ---------------------------------------------------------------------------
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
# (make -j says no to 0 and hangs above 65537; xargs -P 0, the way without
# make, means no limit)
case $JOBS in
    '' | *[!0-9]* | ??????*) jobs_ok=0 ;;
    *) [ $((10#$JOBS)) -ge 1 ] && [ $((10#$JOBS)) -le 4096 ] && jobs_ok=1 || jobs_ok=0 ;;
esac
[ $jobs_ok = 1 ] || { echo "make.sh: JOBS must be a whole number from 1 to 4096, not '$JOBS'" >&2; exit 2; }
JOBS=$((10#$JOBS))      # (08 is 8, not an octal error)
MK=$OUTPUT/build.mk
rules=()        # "target|prerequisites|command" (prerequisites space-separated)

# Write file only if its content changes: its time stamp is a prerequisite.
put_if_changed() {   # put_if_changed <file> <content>
    if [ ! -f "$1" ] || [ "$(cat "$1")" != "$2" ]; then printf '%s\n' "$2" > "$1"; fi
}
rule() { rules+=("$1|$2|$3"); }    # rule <target> <prerequisites> <command>
# A compile rule: its -MMD file joins the target's prerequisites.
# Its dependency file goes into the build directory, beside its flags.
# Each target's command is kept beside it (<name>.cmd): a changed command
# (a source that moved, a new flag) rebuilds the target, and drops its old
# dependency file, which may name files that are gone.
cc_rule() {    # cc_rule <target> <prerequisites> <dir> <command...>
    local t=$1 pre=$2 dir=$3; shift 3
    local base="$dir/${t##*/}"
    if [ ! -f "$base.cmd" ] || [ "$(< "$base.cmd")" != "$*" ]; then
        printf '%s\n' "$*" > "$base.cmd"; rm -f "$base.d"
    fi
    rule "$t" "$pre $dir/flags $base.cmd" "$* -MMD -MP -MT $t -MF $base.d"
}

lib_rules() {
    local obj="$OUTPUT/obj/lib" c="$CC $CFLAGS $WARN -fPIC"
    mkdir -p "$obj"
    put_if_changed "$obj/flags" "$c / $CC $CFLAGS -shared"
    cc_rule "$obj/aco.o" "aco.c" "$obj" "$c -c aco.c -o $obj/aco.o"
    cc_rule "$obj/acosw.o" "acosw.S" "$obj" "$c -c acosw.S -o $obj/acosw.o"
    rule "$OUTPUT/libaco.a" "$obj/aco.o $obj/acosw.o" \
         "rm -f $OUTPUT/libaco.a && ar rcs $OUTPUT/libaco.a $obj/aco.o $obj/acosw.o"
    # Export the API and what aco.h's inline fast paths call (aco_*: among
    # them aco__yieldsw, aco_yield's switch; acosw);
    # internals are hidden in the sources.
    put_if_changed "$obj/libaco.map" "$(printf '{\n  global: aco_*; acosw;\n  local: *;\n};')"
    rule "$OUTPUT/libaco.so" "$obj/aco.o $obj/acosw.o $obj/libaco.map $obj/flags" \
         "$CC $CFLAGS -shared -Wl,-soname,libaco.so.$SOMAJOR -Wl,--version-script,$obj/libaco.map -Wl,-z,noexecstack -pthread $obj/aco.o $obj/acosw.o -o $OUTPUT/libaco.so && ln -sf libaco.so $OUTPUT/libaco.so.$SOMAJOR"
    put_if_changed "$OUTPUT/libaco.pc" "$(aco_pc "" "$(abs_output)" "$(pwd)")"
}

variant_rules() {   # variant
    local v=$1 flags obj cc c p name extra
    flags=$(variant_flags "$v")
    cc=$(variant_cc "$v")
    obj="$OUTPUT/obj/$v"
    c="$cc $CFLAGS $WARN $flags"
    mkdir -p "$obj"
    extra=$(bench_flags "$v")
    put_if_changed "$obj/flags" "$c / $extra"
    cc_rule "$obj/aco.o" "aco.c" "$obj" "$c -c aco.c -o $obj/aco.o"
    cc_rule "$obj/acosw.o" "acosw.S" "$obj" "$c -c acosw.S -o $obj/acosw.o"
    for p in $(programs); do
        name=$(basename "$p")
        local x=""
        [ "$(list_col tests/tests.list "$name" with)" = fcontext ] && x=$extra
        cc_rule "$OUTPUT/$name..$v" "$p.c $obj/aco.o $obj/acosw.o" "$obj" \
            "$c -I. $p.c $obj/aco.o $obj/acosw.o $x -lpthread -lm -o $OUTPUT/$name..$v"
    done
}

# The runtime: its objects (one build for every variant: it uses only
# aco.h's API), the libraries, the programs (linked with the default
# variant's libaco objects), and its tests for the x86-64 standaloneFPUenv
# variants (the valgrind one: valgrind runs them).
# The runtime's library: objects, libaco_rt.a, libaco_rt.so (rt_objs and
# rt_libs say what the programs link).
rt_objs=""
rt_libs=""
rt_lib_rules() {
    # DWARF 4: the valgrind variants' programs link these objects too;
    # -I.: aco_rt.h includes aco.h
    local obj="$OUTPUT/obj/rt" c="$CC $CFLAGS $WARN -fPIC -std=gnu11 -gdwarf-4 -I." f
    rt_libs="-ldl -lpthread"
    [ -n "$RT_URING" ] && { c="$c -DACO_RT_HAVE_URING"; rt_libs="-luring $rt_libs"; }
    mkdir -p "$obj"
    put_if_changed "$obj/flags" "$c / $rt_libs / so: rpath \$ORIGIN"
    rt_objs=""
    for f in $(rt_lib_srcs); do
        cc_rule "$obj/$f.o" "rt/$f.c" "$obj" "$c -c rt/$f.c -o $obj/$f.o"
        rt_objs="$rt_objs $obj/$f.o"
    done
    rule "$OUTPUT/libaco_rt.a" "$rt_objs" "rm -f $OUTPUT/libaco_rt.a && ar rcs $OUTPUT/libaco_rt.a$rt_objs"
    put_if_changed "$obj/libaco_rt.map" "$(printf '{\n  global: aco_rt_*;\n  local: *;\n};')"
    # The syscall hooks (rt/hook.c): libaco_hook.so, for LD_PRELOAD or
    # linking ahead of libc; hook.o for programs that link it in.
    cc_rule "$obj/hook.o" "rt/hook.c" "$obj" "$c -fvisibility=hidden -c rt/hook.c -o $obj/hook.o"
    rule "$OUTPUT/libaco_hook.so" "$obj/hook.o $OUTPUT/libaco_rt.so" \
         "$CC $CFLAGS -shared -Wl,-soname,libaco_hook.so -Wl,-z,noexecstack -Wl,-rpath,'\$\$ORIGIN' $obj/hook.o -L$OUTPUT -laco_rt -laco -ldl -lpthread -o $OUTPUT/libaco_hook.so"
    # TLS (rt/tls.c): libaco_rt_tls.a and .so, on libaco_rt and OpenSSL
    if [ -n "$RT_TLS" ]; then
        cc_rule "$obj/tls.o" "rt/tls.c" "$obj" "$c -c rt/tls.c -o $obj/tls.o"
        rule "$OUTPUT/libaco_rt_tls.a" "$obj/tls.o" "rm -f $OUTPUT/libaco_rt_tls.a && ar rcs $OUTPUT/libaco_rt_tls.a $obj/tls.o"
        put_if_changed "$obj/libaco_rt_tls.map" "$(printf '{\n  global: aco_rt_tls_*;\n  local: *;\n};')"
        rule "$OUTPUT/libaco_rt_tls.so" "$obj/tls.o $OUTPUT/libaco_rt.so $obj/libaco_rt_tls.map" \
             "$CC $CFLAGS -shared -Wl,-soname,libaco_rt_tls.so.$SOMAJOR -Wl,--version-script,$obj/libaco_rt_tls.map -Wl,-z,noexecstack -Wl,-rpath,'\$\$ORIGIN' $obj/tls.o -L$OUTPUT -laco_rt -laco -lssl -lcrypto -lpthread -o $OUTPUT/libaco_rt_tls.so && ln -sf libaco_rt_tls.so $OUTPUT/libaco_rt_tls.so.$SOMAJOR"
        put_if_changed "$OUTPUT/libaco_rt_tls.pc" "$(tls_pc "" "$(abs_output)")"
    fi
    # the build tree's libaco_rt.pc (lib_rules writes its libaco.pc)
    put_if_changed "$OUTPUT/libaco_rt.pc" "$(rt_pc "" "$(abs_output)" "$(pwd)/rt")"
    put_if_changed "$OUTPUT/libaco_hook.pc" "$(hook_pc "" "$(abs_output)")"
    rule "$OUTPUT/libaco_rt.so" "$rt_objs $OUTPUT/libaco.so $obj/libaco_rt.map" \
         "$CC $CFLAGS -shared -Wl,-soname,libaco_rt.so.$SOMAJOR -Wl,--version-script,$obj/libaco_rt.map -Wl,-z,noexecstack -Wl,-rpath,'\$\$ORIGIN'$rt_objs -L$OUTPUT -laco $rt_libs -o $OUTPUT/libaco_rt.so && ln -sf libaco_rt.so $OUTPUT/libaco_rt.so.$SOMAJOR"
}

# The runtime's programs and tests, linked with the default variant's (and
# for the tests also the valgrind variant's) libaco objects.
rt_rules() {
    local obj="$OUTPUT/obj/rt" c="$CC $CFLAGS $WARN -fPIC -std=gnu11 -gdwarf-4 -I." f
    [ -n "$RT_URING" ] && c="$c -DACO_RT_HAVE_URING"
    rt_lib_rules
    local objs=$rt_objs libs=$rt_libs
    # aco_resp's parser and store, aco_http's parser: linked by the
    # programs and by their tests
    for f in resp kv http; do
        cc_rule "$obj/$f.o" "apps/$f.c" "$obj" "$c -Irt -c apps/$f.c -o $obj/$f.o"
    done
    local v=no_valgrind.standaloneFPUenv vo p extra ld l o pk pf lk
    vo="$OUTPUT/obj/$v"
    # test_port: one pthreads program (port_demo.c) built twice, on real
    # pthreads and renamed onto aco_rt_pthread.h by -include
    cc_rule "$obj/port_pthreads.o" "rt/tests/port_demo.c" "$obj" \
        "$c -Dmain=port_main_pthreads -c rt/tests/port_demo.c -o $obj/port_pthreads.o"
    cc_rule "$obj/port_aco.o" "rt/tests/port_demo.c" "$obj" \
        "$c -Irt -include rt/aco_rt_pthread_names.h -Dmain=port_main_aco -c rt/tests/port_demo.c -o $obj/port_aco.o"
    local src
    for src in $(rt_programs); do
        p=${src##*/}
        extra=""
        [ $p = aco_resp ] && extra="$obj/resp.o $obj/kv.o"
        local pc="" pl=""
        [ $p = aco_http ] && extra="$obj/http.o"
        # aco_http serves HTTPS too where libaco_rt_tls is built
        [ $p = aco_http ] && [ -n "$RT_TLS" ] && { extra="$extra $obj/tls.o"; pc=" -DACO_HTTP_TLS"; pl=" -lssl -lcrypto"; }
        [ $p = aco_nc ] && [ -n "$RT_TLS" ] && { extra="$obj/tls.o"; pc=" -DACO_NC_TLS"; pl=" -lssl -lcrypto"; }
        cc_rule "$OUTPUT/$p" "$src.c$objs $extra $vo/aco.o $vo/acosw.o" "$obj" \
            "$c$pc -Irt $src.c$objs $extra $vo/aco.o $vo/acosw.o $libs$pl -lm -o $OUTPUT/$p"
    done
    for v in no_valgrind.standaloneFPUenv valgrind.standaloneFPUenv; do
        case " ${variants[*]} " in *" $v "*) ;; *) continue ;; esac
        vo="$OUTPUT/obj/$v"
        for p in $(rt_tests); do
            # its list's link= objects and ld= flags
            extra="" l=$(test_list "$p")
            [ -z "$RT_TLS" ] && case ",$(list_col "$l" "$p" link)," in *,tls,*) continue ;; esac
            lk=$(list_col "$l" "$p" link)
            for o in ${lk//,/ }; do extra="${extra:+$extra }$obj/$o.o"; done
            ld=$(list_col "$l" "$p" ld)
            # its list's pkg= modules (pkg-config): their flags, or, where
            # one is missing, -DTEST_PKG_MISSING (the program then fails,
            # naming what to install)
            pk=$(list_col "$l" "$p" pkg)
            if [ -n "$pk" ]; then
                # shellcheck disable=SC2086
                if pf=$(pkg-config --cflags --libs ${pk//,/ } 2>/dev/null); then ld="$ld $pf"
                else
                    ld="$ld -DTEST_PKG_MISSING"
                    if [ $v = no_valgrind.standaloneFPUenv ] && [ $action != bench ]; then
                        echo "make.sh: output/rt_$p: pkg-config finds no ${pk//,/ }: it is built to fail, naming the packages to install" >&2
                    fi
                fi
            fi
            src=$(test_src $p)
            cc_rule "$OUTPUT/rt_$p..$v" "$src$objs $extra $vo/aco.o $vo/acosw.o" "$obj" \
                "$c $(variant_flags $v) -Irt -Irt/tests -Iapps $src$objs $extra $vo/aco.o $vo/acosw.o $libs $ld -lm -o $OUTPUT/rt_$p..$v"
        done
    done
    # The chaos client of aco_resp (check_rt_chaos.sh): plain threads and
    # sockets, no runtime, so that it judges the server independently.
    cc_rule "$OUTPUT/chaos_resp" "apps/tests/chaos_resp.c" "$obj" \
        "$CC $CFLAGS $WARN -std=gnu11 apps/tests/chaos_resp.c -lpthread -o $OUTPUT/chaos_resp"
    # aco_http's (check_http_chaos.sh), likewise.
    cc_rule "$OUTPUT/chaos_http" "apps/tests/chaos_http.c" "$obj" \
        "$CC $CFLAGS $WARN -std=gnu11 apps/tests/chaos_http.c -lpthread -o $OUTPUT/chaos_http"
    # hiredis' blocking client in 1000 cos through the hooks (check_rt_hook.sh,
    # bench_hook.sh): by LD_PRELOAD (linked to the shared runtime, as the
    # hook library is) and with hook.o linked in.
    vo="$OUTPUT/obj/no_valgrind.standaloneFPUenv"
    if echo '#include <hiredis/hiredis.h>' | $CC -E -x c - > /dev/null 2>&1; then
        cc_rule "$OUTPUT/hook_hiredis" "rt/tests/hook_hiredis.c $OUTPUT/libaco_rt.so" "$obj" \
            "$c -Irt rt/tests/hook_hiredis.c -L$OUTPUT -laco_rt -laco -lhiredis -lpthread -Wl,-rpath,'\$\$ORIGIN' -o $OUTPUT/hook_hiredis"
        cc_rule "$OUTPUT/hook_hiredis_linked" "rt/tests/hook_hiredis.c $obj/hook.o$objs $vo/aco.o $vo/acosw.o" "$obj" \
            "$c -Irt rt/tests/hook_hiredis.c $obj/hook.o$objs $vo/aco.o $vo/acosw.o -lhiredis -ldl $libs -o $OUTPUT/hook_hiredis_linked"
    elif [ $action != bench ]; then
        echo "make.sh: leaving out output/hook_hiredis (the hooks with hiredis): install libhiredis-dev" >&2
    fi
    # The real-library tests' instrument (rt/tests/hook_count.c), and the
    # client libraries through the hooks (tests/check_hook_*.sh): each
    # program twice, hook_L with the shared runtime (the hooks preloaded)
    # and hook_L_linked linked as docs/hooks.md says, libaco_hook.pc's
    # flags, under --as-needed (Debian's gcc default, said explicitly).
    cc_rule "$OUTPUT/libhook_count.so" "rt/tests/hook_count.c" "$obj" \
        "$CC $CFLAGS $WARN -std=gnu11 -fPIC -shared rt/tests/hook_count.c -ldl -o $OUTPUT/libhook_count.so"
    local hook_libs
    hook_libs=$(PKG_CONFIG_PATH="$OUTPUT" pkg-config --libs libaco_hook 2>/dev/null) || hook_libs=""
    hook_lib_prog() {   # hook_lib_prog <name> <pkg-config module> <Debian package>
        local cf lf
        if cf=$(pkg-config --cflags "$2" 2>/dev/null) && lf=$(pkg-config --libs "$2" 2>/dev/null) &&
           [ -n "$hook_libs" ]; then
            cc_rule "$OUTPUT/hook_$1" "rt/tests/hook_$1.c rt/tests/hook_lib.h $OUTPUT/libaco_rt.so" "$obj" \
                "$c -Irt $cf rt/tests/hook_$1.c -L$OUTPUT -laco_rt -laco $lf -ldl -lpthread -Wl,-rpath,'\$\$ORIGIN' -o $OUTPUT/hook_$1"
            cc_rule "$OUTPUT/hook_$1_linked" "rt/tests/hook_$1.c rt/tests/hook_lib.h $OUTPUT/libaco_hook.so" "$obj" \
                "$c -Irt $cf rt/tests/hook_$1.c -Wl,--as-needed $hook_libs $lf -ldl -lpthread -Wl,-rpath,'\$\$ORIGIN' -o $OUTPUT/hook_$1_linked"
        elif [ $action != bench ]; then
            echo "make.sh: leaving out output/hook_$1 (the hooks with $2): install $3" >&2
        fi
    }
    hook_lib_prog curl libcurl libcurl4-openssl-dev
    hook_lib_prog pq libpq libpq-dev
    hook_lib_prog mariadb libmariadb libmariadb-dev
    hook_lib_prog sqlite sqlite3 libsqlite3-dev
    # The slow disk of the file hooks' and aco_http's tests: a FUSE file
    # system whose chosen files are slow to open, read and sync.
    local fuse_cf fuse_lf
    if fuse_cf=$(pkg-config --cflags fuse3 2>/dev/null) && fuse_lf=$(pkg-config --libs fuse3 2>/dev/null); then
        cc_rule "$OUTPUT/slowfs" "rt/tests/slowfs.c" "$obj" \
            "$CC $CFLAGS $WARN -std=gnu11 $fuse_cf rt/tests/slowfs.c $fuse_lf -o $OUTPUT/slowfs"
    elif [ $action != bench ]; then
        echo "make.sh: leaving out output/slowfs (a slow disk for the file tests): install libfuse3-dev" >&2
    fi
    # The single-thread build (ACO_RT_NO_THREADS: no atomics, no locks, no
    # pools): libaco_rt_st.a, the benchmarks and four tests linked with it.
    local sto="$OUTPUT/obj/rt_st" stc="$c -DACO_RT_NO_THREADS" st_objs=""
    mkdir -p "$sto"
    put_if_changed "$sto/flags" "$stc"
    for f in $(rt_lib_srcs); do
        cc_rule "$sto/$f.o" "rt/$f.c" "$sto" "$stc -c rt/$f.c -o $sto/$f.o"
        st_objs="$st_objs $sto/$f.o"
    done
    rule "$OUTPUT/libaco_rt_st.a" "$st_objs" "rm -f $OUTPUT/libaco_rt_st.a && ar rcs $OUTPUT/libaco_rt_st.a$st_objs"
    v=no_valgrind.standaloneFPUenv
    vo="$OUTPUT/obj/$v"
    cc_rule "$OUTPUT/aco_rt_bench_st" "bench/aco_rt_bench.c$st_objs $vo/aco.o $vo/acosw.o" "$sto" \
        "$stc -Irt bench/aco_rt_bench.c$st_objs $vo/aco.o $vo/acosw.o $libs -lm -o $OUTPUT/aco_rt_bench_st"
    for p in $(rt_st_tests); do
        cc_rule "$OUTPUT/rt_${p}_st..$v" "rt/tests/$p.c$st_objs $vo/aco.o $vo/acosw.o" "$sto" \
            "$stc $(variant_flags $v) -Irt rt/tests/$p.c$st_objs $vo/aco.o $vo/acosw.o $libs -lm -o $OUTPUT/rt_${p}_st..$v"
    done
}

# pkg-config files, for the build tree (output/) and for an install.  Both
# libraries exist as .a and .so: what a static link needs besides them goes
# into Libs.private.  libaco_rt requires libaco of the same version, whose
# -I, -L and -laco come from libaco.pc.
abs_output() { case "$OUTPUT" in /*) echo "$OUTPUT" ;; *) echo "$(pwd)/$OUTPUT" ;; esac; }
pc_head() {   # pc_head <prefix or empty> <libdir> <includedir>
    [ -z "$1" ] || printf 'prefix=%s\n' "$1"
    printf 'libdir=%s\n' "$2"
    [ -z "$3" ] || printf 'includedir=%s\n' "$3"
    echo
}
aco_pc() {    # aco_pc <prefix or empty> <libdir> <includedir>
    pc_head "$@"
    printf '%s\n' "Name: libaco" \
        "Description: Asymmetric stackful coroutines for C with a hand-written context switch" \
        "Version: $VERSION" 'Libs: -L${libdir} -laco' "Libs.private: -lpthread" \
        'Cflags: -I${includedir}'
}
rt_pc() {     # rt_pc <prefix or empty> <libdir> <includedir, or empty: libaco's>
    pc_head "$@"
    printf '%s\n' "Name: libaco_rt" \
        "Description: Coroutine runtime on libaco: scheduler, timers, io_uring/epoll I/O, sync, channels" \
        "Version: $VERSION" "Requires: libaco = $VERSION" 'Libs: -L${libdir} -laco_rt' \
        "Libs.private: ${RT_URING:+-luring }-ldl -lpthread"
    [ -z "$3" ] || printf '%s\n' 'Cflags: -I${includedir}'
}
tls_pc() {    # tls_pc <prefix or empty> <libdir>
    pc_head "$1" "$2" ""
    printf '%s\n' "Name: libaco_rt_tls" \
        "Description: TLS over OpenSSL 3 for libaco_rt's cos" \
        "Version: $VERSION" "Requires: libaco_rt = $VERSION" "Requires.private: libssl libcrypto" \
        'Libs: -L${libdir} -laco_rt_tls'
}
# The hooks are called by nothing the program names, so a linker that
# drops unneeded libraries (--as-needed, Debian's and Ubuntu's default)
# would drop them: their -l goes between --no-as-needed and the setting
# the command line had before.
hook_pc() {   # hook_pc <prefix or empty> <libdir>
    pc_head "$1" "$2" ""
    printf '%s\n' "Name: libaco_hook" \
        "Description: libaco_rt's syscall hooks: blocking calls in cos park the co" \
        "Version: $VERSION" "Requires: libaco_rt = $VERSION" \
        'Libs: -L${libdir} -Wl,--push-state,--no-as-needed -laco_hook -Wl,--pop-state'
}

write_makefile() {
    local r t pre cmd all=""
    {
        echo "# Generated by make.sh: every output of this build, what it is built"
        echo "# from and how.  Run make.sh, not make: it rewrites this file."
        echo ".DELETE_ON_ERROR:"
        echo ".SUFFIXES:"
        echo "Q = \$(if \$(V),,@)"
        for r in "${rules[@]}"; do all="$all ${r%%|*}"; done
        echo ".PHONY: all"
        echo "all:$all"
        for r in "${rules[@]}"; do
            IFS='|' read -r t pre cmd <<< "$r"
            echo
            echo "$t: $pre"
            # one line per output; V=1 shows the commands too
            echo "	\$(Q)echo '  built $t' && $cmd"
        done
        echo
        echo "-include \$(wildcard $OUTPUT/obj/*/*.d)"
    } > "$MK.tmp"
    if [ -f "$MK" ] && cmp -s "$MK" "$MK.tmp"; then rm -f "$MK.tmp"; else mv "$MK.tmp" "$MK"; fi
}

# Build what is out of date: make, or without it everything.  Targets:
# only these outputs (and what they are built from), else all.
run_build() {   # run_build [target...]
    write_makefile
    if command -v make > /dev/null; then
        local log=$OUTPUT/obj/build.out n todo
        # what is out of date, for the progress lines: make -n prints each
        # rule's echo without running it
        todo=$(make -n -f "$MK" --no-print-directory "$@" 2>/dev/null | grep -c "^echo '  built " || true)
        [ "$todo" -gt 0 ] && echo "make.sh: making $todo file$([ "$todo" = 1 ] || echo s) ($JOBS at a time)"
        # a line at each tenth done, when there are enough to wait for
        # (make's status as the log's last line: set -e would end the
        # group at a failed make, and say nothing)
        { local rc=0; make -f "$MK" -j"$JOBS" --no-print-directory "$@" 2>&1 || rc=$?; echo "rc=$rc"; } |
            tee "$log" | awk -v todo="$todo" -v t0="$SECONDS" '
                /^  built / && todo >= 20 && int(10 * ++n / todo) > shown {
                    shown = int(10 * n / todo)
                    if (n < todo) printf "make.sh: %d%% (%d of %d)\n", 10 * shown, n, todo
                    fflush() }'
        grep -qx 'rc=0' "$log" || {
            grep -v '^  built \|^rc=' "$log" >&2; echo "make.sh: build failed" >&2; exit 1; }
        grep -v "^  built \|^rc=\|^make: '.*' is up to date\|^make: Nothing to be done" "$log" || true
        n=$(grep -c '^  built ' "$log" || true)
        if [ $# -gt 0 ]; then
            echo "make.sh: the $# output$([ $# = 1 ] || echo s) asked for $([ $# = 1 ] && echo is || echo are) up to date ($n made now)"
        else
            echo "make.sh: all ${#rules[@]} files are up to date ($n made now; the rules: $MK)"
        fi
    elif [ "$strict" = 1 ]; then
        echo "make.sh: 'make' not found: install the Debian package make (strict:" \
             "building all that was asked for every time is an error)" >&2
        exit 1
    else
        echo "make.sh: 'make' not found: building all that was asked for, not" \
             "only what changed (install the Debian package make)" >&2
        build_without_make "$@"
    fi
}

# Without make: each rule's command once the rules that make its
# prerequisites have run, in stages (every rule whose prerequisites are
# done), each stage as parallel as JOBS allows; with targets, only what
# they need.  After a command fails, the rest of its stage is passed over
# (each looks for the stop file the failure left) and those running are
# waited for, as make starts no more jobs and waits for its own.  The
# commands are the Makefile's: $$ there is a $.
build_without_make() {  # build_without_make [target...]
    local n=${#rules[@]} i t pre cmd p left stage_n
    local -a pr=() cm=() todo=() stage=()
    local -A at=() need=() made=()
    for ((i = 0; i < n; i++)); do
        IFS='|' read -r t pre cmd <<< "${rules[i]}"
        pr[i]=$pre; cm[i]=${cmd//\$\$/\$}; at[$t]=$i
    done
    if [ $# -eq 0 ]; then
        for ((i = 0; i < n; i++)); do need[$i]=1; done
    else
        for t in "$@"; do [ -n "${at[$t]+x}" ] && todo+=("${at[$t]}"); done
        while [ ${#todo[@]} -gt 0 ]; do
            i=${todo[-1]}; unset 'todo[-1]'
            [ -n "${need[$i]+x}" ] && continue
            need[$i]=1
            for p in ${pr[i]}; do [ -n "${at[$p]+x}" ] && todo+=("${at[$p]}"); done
        done
    fi
    left=${#need[@]}
    local stop="$OUTPUT/.build-failed.$$"
    rm -f "$stop"
    while [ "$left" -gt 0 ]; do
        stage=()
        for ((i = 0; i < n; i++)); do
            [ -n "${need[$i]+x}" ] && [ -z "${made[$i]+x}" ] || continue
            for p in ${pr[i]}; do
                [ -z "${at[$p]+x}" ] || [ -n "${made[${at[$p]}]+x}" ] || continue 2
            done
            stage+=("$i")
        done
        stage_n=${#stage[@]}
        [ "$stage_n" -gt 0 ] || { echo "make.sh: the rules wait on each other" >&2; exit 1; }
        for i in "${stage[@]}"; do printf '%s\0' "${cm[i]}"; done |
            STOP="$stop" xargs -0 -P "$JOBS" -n 1 \
                sh -c '[ -e "$STOP" ] && exit 1; eval "$0" || { : > "$STOP"; exit 1; }' ||
            { rm -f "$stop"; echo "make.sh: build failed" >&2; exit 1; }
        for i in "${stage[@]}"; do made[$i]=1; done
        left=$((left - stage_n))
    done
    echo "make.sh: ${#need[@]} file$([ ${#need[@]} = 1 ] || echo s) made (without make)"
}

do_install() {
    local inc="$DESTDIR$PREFIX/include" lib="$DESTDIR$PREFIX/lib"
    mkdir -p "$OUTPUT"
    lib_rules
    rt_lib_rules
    run_build
    install -d "$inc" "$lib" "$lib/pkgconfig"
    install -m 644 aco.h aco_assert_override.h rt/aco_rt.h "$inc/"
    install -m 644 rt/aco_rt_pthread.h rt/aco_rt_pthread_names.h "$inc/"
    install -m 644 "$OUTPUT/libaco.a" "$lib/"
    install -m 755 "$OUTPUT/libaco.so" "$lib/libaco.so.$VERSION"
    ln -sf "libaco.so.$VERSION" "$lib/libaco.so.$SOMAJOR"
    ln -sf "libaco.so.$SOMAJOR" "$lib/libaco.so"
    aco_pc "$PREFIX" '${prefix}/lib' '${prefix}/include' > "$lib/pkgconfig/libaco.pc"
    install -m 644 "$OUTPUT/libaco_rt.a" "$lib/"
    install -m 755 "$OUTPUT/libaco_rt.so" "$lib/libaco_rt.so.$VERSION"
    install -m 755 "$OUTPUT/libaco_hook.so" "$lib/libaco_hook.so"
    ln -sf "libaco_rt.so.$VERSION" "$lib/libaco_rt.so.$SOMAJOR"
    ln -sf "libaco_rt.so.$SOMAJOR" "$lib/libaco_rt.so"
    # its headers are beside libaco's: libaco.pc's -I serves
    rt_pc "$PREFIX" '${prefix}/lib' "" > "$lib/pkgconfig/libaco_rt.pc"
    hook_pc "$PREFIX" '${prefix}/lib' > "$lib/pkgconfig/libaco_hook.pc"
    if [ -n "$RT_TLS" ]; then
        install -m 644 rt/aco_rt_tls.h "$inc/"
        install -m 644 "$OUTPUT/libaco_rt_tls.a" "$lib/"
        install -m 755 "$OUTPUT/libaco_rt_tls.so" "$lib/libaco_rt_tls.so.$VERSION"
        ln -sf "libaco_rt_tls.so.$VERSION" "$lib/libaco_rt_tls.so.$SOMAJOR"
        ln -sf "libaco_rt_tls.so.$SOMAJOR" "$lib/libaco_rt_tls.so"
        tls_pc "$PREFIX" '${prefix}/lib' > "$lib/pkgconfig/libaco_rt_tls.pc"
    fi
    echo "installed libaco and its runtime (libaco_rt) $VERSION under $DESTDIR$PREFIX"
}

if [ $action = install ]; then do_install; exit 0; fi

mkdir -p "$OUTPUT"
[ $action = list ] || echo "make.sh: CC=$CC CFLAGS='$CFLAGS' variants: ${variants[*]}"
# Name the cross compilers for the log: a wrapper may stand for another one.
for arch in aarch64 riscv64; do
    [ $action = list ] && break
    case " ${variants[*]} " in *" $arch."*) ;; *) continue ;; esac
    # shellcheck disable=SC2046
    id=$($(cross_cc $arch) --version 2>/dev/null | head -1)
    echo "make.sh: $arch: $(cross_cc $arch) is $id"
done
lib_rules
for v in "${variants[@]}"; do variant_rules "$v"; done
case " ${variants[*]} " in *" no_valgrind.standaloneFPUenv "*) rt_rules ;; esac
# The benchmark's independent check (bench/fcontext_loop.c), where fcontext is.
if [ -z "$san" ] && [ -n "$(bench_flags no_valgrind.standaloneFPUenv)" ]; then
    mkdir -p "$OUTPUT/obj/tools"
    put_if_changed "$OUTPUT/obj/tools/flags" "$CC $CFLAGS $WARN $BOOST_CONTEXT_A"
    cc_rule "$OUTPUT/fcontext_loop" "bench/fcontext_loop.c" "$OUTPUT/obj/tools" \
        "$CC $CFLAGS $WARN bench/fcontext_loop.c $BOOST_CONTEXT_A -lm -o $OUTPUT/fcontext_loop"
fi
# The bench scripts' aggregation (bench/bench_agg.c): plain C with no
# library, so every build has it.
mkdir -p "$OUTPUT/obj/agg"
put_if_changed "$OUTPUT/obj/agg/flags" "$CC $CFLAGS $WARN"
cc_rule "$OUTPUT/bench_agg" "bench/bench_agg.c" "$OUTPUT/obj/agg" \
    "$CC $CFLAGS $WARN bench/bench_agg.c -o $OUTPUT/bench_agg"
# bench-rt's floor under the RESP servers (bench/resp_floor.c): a bare epoll
# loop making the same recv and send calls, plain C with no library too.
cc_rule "$OUTPUT/resp_floor" "bench/resp_floor.c bench/floor_loop.h" "$OUTPUT/obj/agg" \
    "$CC $CFLAGS $WARN bench/resp_floor.c -o $OUTPUT/resp_floor"
# bench_http.sh's floor under the HTTP servers (bench/http_floor.c): the
# same recv, send and sendfile calls for wrk's GETs, plain C as well.
cc_rule "$OUTPUT/http_floor" "bench/http_floor.c bench/floor_loop.h" "$OUTPUT/obj/agg" \
    "$CC $CFLAGS $WARN bench/http_floor.c -o $OUTPUT/http_floor"
# What the benchmarks run: bench, the benchmark's two x86-64 builds and the
# fcontext check; bench-rt, the runtime's libraries and programs (no tests).
bench_targets=()
if [ $action = bench ]; then
    bench_targets=("$OUTPUT/test_aco_benchmark..no_valgrind.standaloneFPUenv"
                   "$OUTPUT/test_aco_benchmark..no_valgrind.shareFPUenv")
    [ -n "$(bench_flags no_valgrind.standaloneFPUenv)" ] && bench_targets+=("$OUTPUT/fcontext_loop")
elif [ $action = libs ]; then
    bench_targets=("$OUTPUT/libaco.a" "$OUTPUT/libaco.so" "$OUTPUT/libaco_rt.a" "$OUTPUT/libaco_rt.so"
                   "$OUTPUT/libaco_hook.so")
    [ -n "$RT_TLS" ] && bench_targets+=("$OUTPUT/libaco_rt_tls.a" "$OUTPUT/libaco_rt_tls.so")
elif [ $action = bench-rt ]; then
    for r in "${rules[@]}"; do
        t=${r%%|*}
        case $t in "$OUTPUT"/obj/*|*..*) ;; *) bench_targets+=("$t") ;; esac
    done
fi
if [ $action = list ]; then
    for r in "${rules[@]}"; do
        t=${r%%|*}
        case $t in "$OUTPUT"/obj/*) ;; *) echo "$t" ;; esac
    done
    exit 0
fi
# The last word of a build: the libraries it made, and the runtime's
# backends (what a program links with).
say_built() {   # say_built [what else]
    local backends="epoll only (liburing-dev not found: link without -luring)"
    [ $no_uring = 1 ] && backends="epoll only (-o no-uring: link without -luring)"
    [ -n "$RT_URING" ] && backends="io_uring and epoll (link with -luring)"
    local tls=""
    [ -n "$RT_TLS" ] && tls=", libaco_rt_tls.a, libaco_rt_tls.so"
    echo "make.sh: built $OUTPUT/libaco.a, libaco.so, libaco_rt.a, libaco_rt.so, libaco_hook.so$tls${1:+ and $1}; the runtime's backends: $backends"
}
if [ ${#bench_targets[@]} -gt 0 ]; then
    run_build "${bench_targets[@]}"
    [ $action = libs ] && say_built
else
if [ ${#only[@]} -gt 0 ]; then
    # each must be one of this build's outputs: a typo is an error, not a no-op
    declare -A known=()
    for r in "${rules[@]}"; do known[${r%%|*}]=1; done
    for t in "${only[@]}"; do
        [ -n "${known[$t]:-}" ] || { echo "make.sh: '$t' is not an output of this build (bash make.sh list)" >&2; exit 2; }
    done
    run_build "${only[@]}"
else
    run_build
fi
# Programs no longer built (a test renamed or removed) go: nobody should
# run a stale one from $OUTPUT.
names=" $(programs | sed 's|.*/||' | tr '\n' ' ') $(rt_tests | sed 's|^|rt_|' | tr '\n' ' ') $(for p in $(rt_st_tests); do printf 'rt_%s_st ' $p; done)"
for v in "${variants[@]}"; do
    for f in "$OUTPUT"/*.."$v"; do
        [ -e "$f" ] || continue
        n=${f##*/}; n=${n%%..*}
        case "$names" in *" $n "*) ;; *) rm -f "$f"; echo "make.sh: removed $f (no longer built)" ;; esac
    done
done
printf '%s\n' "${variants[@]}" > "$OUTPUT/variants"
if [ ${#only[@]} -gt 0 ]; then
    echo "make.sh: built the ${#only[@]} output$([ ${#only[@]} = 1 ] || echo s) asked for"
else
    nprog=0
    for r in "${rules[@]}"; do
        case ${r%%|*} in "$OUTPUT"/obj/*|*.a|*.so|*.pc) ;; *) nprog=$((nprog + 1)) ;; esac
    done
    say_built "$nprog programs (tests, tutorials, benchmarks, apps: bash make.sh list)"
fi
fi

if [ $action = bench ]; then
    [ -n "$san" ] && { echo "make.sh: bench with -s $san measures the sanitizer: build without -s" >&2; exit 2; }
    bench=$OUTPUT/test_aco_benchmark..no_valgrind
    log=$OUTPUT/bench.log
    # The shared-FP-env build's headline loops first, for comparison (its
    # lines renamed: the headline lines are the default build's).
    echo; echo "== $bench.shareFPUenv --quick (ACO_CONFIG_SHARE_FPU_MXCSR_ENV)"
    "$bench.shareFPUenv" --quick | sed 's/^headline /shared-FP-env build: /' | tee "$log.shared"
    echo; echo "== $bench.standaloneFPUenv ${BENCH_ARGS:-}"
    # The benchmark runs bench/fcontext_loop.c right after its headline
    # loops, as an independent check of the fcontext figure.
    fl=""; [ -x "$OUTPUT/fcontext_loop" ] && fl=$OUTPUT/fcontext_loop
    # shellcheck disable=SC2086
    BENCH_FCONTEXT_LOOP=$fl "$bench.standaloneFPUenv" ${BENCH_ARGS:-} | tee "$log"
    [ "${PIPESTATUS[0]}" = 0 ] || { echo "make.sh: the benchmark failed" >&2; exit 1; }
    echo; echo "== headline (the default build: $bench.standaloneFPUenv)"
    grep '^check: headline fcontext' "$log" || true
    grep '^headline ' "$log" || true
    # the last word: which targets were met and which missed (the
    # shared-FP-env build's too, for information: its MISS lines are above)
    shared=$(sed -n 's/^+every correctness check passed;.*targets[^:]*: \([0-9]*\) met.*, \([0-9]*\) missed.*/\1 met, \2 missed/p' "$log.shared")
    echo "make.sh bench: $(grep '^+every correctness check passed' "$log" | sed 's/^+//')${shared:+; the shared-FP-env build (for comparison, above): $shared}"
fi

if [ $action = bench-rt ]; then
    [ -n "$san" ] && { echo "make.sh: bench-rt with -s $san measures the sanitizer: build without -s" >&2; exit 2; }
    # shellcheck disable=SC2086
    bash bench/bench_rt.sh ${BENCH_RT_ARGS:-} "$OUTPUT"
fi

if [ $action = soak ]; then
    # the sanitizers' builds serve too (OUTPUT tells the script where)
    OUTPUT=$OUTPUT CHAOS_SECONDS=${CHAOS_SECONDS:-600} bash tests/check_rt_chaos.sh
fi
