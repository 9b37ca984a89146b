#!/usr/bin/env bash
# make.sh - build libaco, its tutorials, tests and benchmark into output/.
#
#   bash make.sh                    everything this machine's toolchains can
#                                   build: a variant whose toolchain is missing
#                                   is left out with one line naming the
#                                   Debian package that brings it
#   bash make.sh -o strict          the same, but a missing toolchain is an
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
#   bash make.sh bench              build, then run the benchmark (x86-64,
#                                   shared then per-co FPU env), ending with
#                                   its `headline` lines; BENCH_ARGS replaces
#                                   the default build's arguments (--quick)
#   bash make.sh install            install headers, libaco.a, libaco.so and
#                                   libaco.pc under $DESTDIR$PREFIX
#
# Environment: CC (gcc), CFLAGS (-O2 -g), OUTPUT (output), PREFIX (/usr/local),
# ACO_STRICT (1: as -o strict), BENCH_ARGS (see bench), JOBS (nproc),
# DESTDIR (empty), CC_AARCH64 / CC_RISCV64 (the cross compilers: with CC=gcc
# <arch>-linux-gnu-gcc, with CC=clang "clang --target=<arch>-linux-gnu").
# Every compile uses -Wall -Wextra -Werror.
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
strict=${ACO_STRICT:-0}
san=""
action=build
while [ $# -gt 0 ]; do
    case "$1" in
        -o) shift
            case "${1:-}" in
                no-m32) no_m32=1 ;;
                no-valgrind) no_valgrind=1 ;;
                no-aarch64) no_aarch64=1 ;;
                no-riscv64) no_riscv64=1 ;;
                no-fcontext) no_fcontext=1 ;;
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
        bench) action=bench ;;
        *) echo "make.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
    esac
    shift
done

OUTPUT=${OUTPUT:-output${san:+/$san}}

# Sanitizer builds: the flags, and the variants that make sense: native
# x86-64 and i386 (TSan has no i386 runtime), never valgrind's.  libaco
# detects ASan and TSan itself (aco.h), no macro needed.
case "$san" in
    asan) SANFLAGS="-fsanitize=address -fno-omit-frame-pointer" ;;
    tsan) SANFLAGS="-fsanitize=thread"; no_m32=1 ;;
    ubsan) SANFLAGS="-fsanitize=undefined -fno-sanitize-recover=all" ;;
    *) SANFLAGS="" ;;
esac
if [ -n "$san" ]; then no_valgrind=1; no_aarch64=1; no_riscv64=1; fi
CFLAGS="$CFLAGS${SANFLAGS:+ $SANFLAGS}"

# Programs: the top-level ones, then every test listed in tests/tests.list.
programs() {
    echo test_aco_synopsis
    for i in 0 1 2 3 4 5 6 7; do echo "test_aco_tutorial_$i"; done
    echo test_aco_benchmark
    grep -v '^[[:space:]]*\(#\|$\)' tests/tests.list | awk '{print "tests/" $1}'
}

# Can the toolchain build this flavour?  Name what is missing instead of
# skipping silently.
probe() {   # probe <flags...>
    local tmp; tmp=$(mktemp -d)
    printf '#include <stdio.h>\nint main(void){return 0;}\n' > "$tmp/p.c"
    "$CC" "$@" "$tmp/p.c" -o "$tmp/p" 2>/dev/null; local rc=$?
    rm -rf "$tmp"; return $rc
}
have_valgrind_h() {
    printf '#include <valgrind/valgrind.h>\n#include <valgrind/memcheck.h>\n' |
        "$CC" -E -x c - >/dev/null 2>&1
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
    local tmp; tmp=$(mktemp -d)
    printf '#include <stdio.h>\nint main(void){return 0;}\n' > "$tmp/p.c"
    # shellcheck disable=SC2046
    $(cross_cc "$1") -static "$tmp/p.c" -o "$tmp/p" 2>/dev/null; local rc=$?
    rm -rf "$tmp"; return $rc
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

# Run up to $JOBS commands at once; stop at the first failure.
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
pids=()
run_bg() {
    "$@" &
    pids+=($!)
    if [ ${#pids[@]} -ge "$JOBS" ]; then wait_all; fi
}
wait_all() {
    local p rc=0
    for p in "${pids[@]}"; do wait "$p" || rc=1; done
    pids=()
    [ $rc = 0 ] || { echo "make.sh: build failed" >&2; exit 1; }
}

build_libs() {
    local obj="$OUTPUT/obj/lib"
    mkdir -p "$obj"
    $CC $CFLAGS $WARN -fPIC -c aco.c -o "$obj/aco.o"
    $CC $CFLAGS $WARN -fPIC -c acosw.S -o "$obj/acosw.o"
    rm -f "$OUTPUT/libaco.a"
    ar rcs "$OUTPUT/libaco.a" "$obj/aco.o" "$obj/acosw.o"
    # Export the API and what aco.h's inline fast paths call (aco_*, acosw);
    # internals are hidden in the sources.
    printf '{\n  global: aco_*; acosw;\n  local: *;\n};\n' > "$obj/libaco.map"
    $CC $CFLAGS -shared -Wl,-soname,libaco.so.$SOMAJOR -Wl,--version-script,"$obj/libaco.map" \
        -Wl,-z,noexecstack -pthread "$obj/aco.o" "$obj/acosw.o" -o "$OUTPUT/libaco.so"
    ln -sf libaco.so "$OUTPUT/libaco.so.$SOMAJOR"
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

build_variant() {   # variant
    local v=$1 flags obj cc
    flags=$(variant_flags "$v")
    cc=$(variant_cc "$v")
    obj="$OUTPUT/obj/$v"
    mkdir -p "$obj"
    $cc $CFLAGS $WARN $flags -c aco.c -o "$obj/aco.o"
    $cc $CFLAGS $WARN $flags -c acosw.S -o "$obj/acosw.o"
    local p name extra
    for p in $(programs); do
        name=$(basename "$p")
        extra=""
        [ "$name" = test_aco_benchmark ] && extra=$(bench_flags "$v")
        # shellcheck disable=SC2086
        run_bg $cc $CFLAGS $WARN $flags -I. "$p.c" "$obj/aco.o" "$obj/acosw.o" \
            $extra -lpthread -lm -o "$OUTPUT/$name..$v"
    done
    wait_all
}

do_install() {
    local inc="$DESTDIR$PREFIX/include" lib="$DESTDIR$PREFIX/lib"
    [ -f "$OUTPUT/libaco.so" ] || build_libs
    install -d "$inc" "$lib" "$lib/pkgconfig"
    install -m 644 aco.h aco_assert_override.h "$inc/"
    install -m 644 "$OUTPUT/libaco.a" "$lib/"
    install -m 755 "$OUTPUT/libaco.so" "$lib/libaco.so.$VERSION"
    ln -sf "libaco.so.$VERSION" "$lib/libaco.so.$SOMAJOR"
    ln -sf "libaco.so.$SOMAJOR" "$lib/libaco.so"
    cat > "$lib/pkgconfig/libaco.pc" <<EOF
prefix=$PREFIX
exec_prefix=\${prefix}
libdir=\${exec_prefix}/lib
includedir=\${prefix}/include

Name: libaco
Description: Asymmetric stackful coroutines for C with a hand-written context switch
Version: $VERSION
Libs: -L\${libdir} -laco
Cflags: -I\${includedir}
EOF
    echo "installed libaco $VERSION under $DESTDIR$PREFIX"
}

if [ $action = install ]; then do_install; exit 0; fi

mkdir -p "$OUTPUT"
echo "make.sh: CC=$CC CFLAGS='$CFLAGS' variants: ${variants[*]}"
# Name the cross compilers for the log: a wrapper may stand for another one.
for arch in aarch64 riscv64; do
    case " ${variants[*]} " in *" $arch."*) ;; *) continue ;; esac
    # shellcheck disable=SC2046
    id=$($(cross_cc $arch) -dM -E -x c /dev/null | sed -n 's/^#define __VERSION__ //p')
    echo "make.sh: $arch: $(cross_cc $arch) is $id"
done
build_libs
for v in "${variants[@]}"; do build_variant "$v"; done
# The benchmark's independent check (tools/fcontext_loop.c), where fcontext is.
if [ -z "$san" ] && [ -n "$(bench_flags no_valgrind.standaloneFPUenv)" ]; then
    $CC $CFLAGS $WARN tools/fcontext_loop.c "$BOOST_CONTEXT_A" -lm -o "$OUTPUT/fcontext_loop"
fi
printf '%s\n' "${variants[@]}" > "$OUTPUT/variants"
echo "make.sh: built $OUTPUT/libaco.a, $OUTPUT/libaco.so and $(( $(programs | wc -l) * ${#variants[@]} )) programs"

if [ $action = bench ]; then
    [ -n "$san" ] && { echo "make.sh: bench with -s $san measures the sanitizer: build without -s" >&2; exit 2; }
    bench=$OUTPUT/test_aco_benchmark..no_valgrind
    log=$OUTPUT/bench.log
    # The shared-FP-env build's headline loops first, for comparison (its
    # lines renamed: the headline lines are the default build's).
    echo; echo "== $bench.shareFPUenv --quick (ACO_CONFIG_SHARE_FPU_MXCSR_ENV)"
    "$bench.shareFPUenv" --quick | sed 's/^headline /shared-FP-env build: /'
    echo; echo "== $bench.standaloneFPUenv ${BENCH_ARGS:-}"
    # The benchmark runs tools/fcontext_loop.c right after its headline
    # loops, as an independent check of the fcontext figure.
    fl=""; [ -x "$OUTPUT/fcontext_loop" ] && fl=$OUTPUT/fcontext_loop
    # shellcheck disable=SC2086
    BENCH_FCONTEXT_LOOP=$fl "$bench.standaloneFPUenv" ${BENCH_ARGS:-} | tee "$log"
    [ "${PIPESTATUS[0]}" = 0 ] || { echo "make.sh: the benchmark failed" >&2; exit 1; }
    echo; echo "== headline (the default build: $bench.standaloneFPUenv)"
    grep '^check: headline fcontext' "$log" || true
    grep '^headline ' "$log" || true
fi
