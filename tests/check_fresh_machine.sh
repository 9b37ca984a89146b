#!/usr/bin/env bash
# The README's first command on a machine with only gcc: `bash make.sh bench`
# (BENCH_ARGS=--quick: the headline loops only) exits 0, names the one part
# it leaves out (the fcontext peer) with the Debian package that brings it,
# and ends with the headline lines and its verdict; a plain `bash make.sh`
# names every part it leaves out (asked of `make.sh list`, which gets as far
# and compiles nothing); with -o strict the same machine is an error naming
# a package.
#
# "Only gcc" is simulated: a PATH without make (Debian's gcc does not
# bring it: make.sh builds without it), clang, cross compilers, qemu or
# valgrind, and a gcc wrapper that cannot build -m32 programs, finds no
# <valgrind/*.h> and no libboost_context.a, as on a machine without
# gcc-multilib, valgrind and libboost-context-dev.
set -euo pipefail
cd "$(dirname "$0")/.."
real_gcc=$(command -v gcc) || { echo "gcc not found: install the Debian package gcc"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
bin=$tmp/bin
mkdir -p "$bin" "$tmp/include/valgrind"
for d in /usr/local/bin /usr/bin /bin /usr/local/sbin /usr/sbin /sbin; do
    [ -d "$d" ] || continue
    for f in "$d"/*; do
        n=${f##*/}
        case "$n" in
            clang*|*-linux-gnu-*|valgrind*|qemu-*|gcc|make|gmake) continue ;;
        esac
        [ -x "$f" ] && [ ! -e "$bin/$n" ] && ln -s "$f" "$bin/$n"
    done
done
for h in valgrind memcheck; do
    echo '#error "valgrind is not installed (simulated)"' > "$tmp/include/valgrind/$h.h"
done
cat > "$bin/gcc" <<WRAP
#!/bin/sh
for a in "\$@"; do
    case "\$a" in
        -m32) echo "gcc: -m32: no multilib (simulated)" >&2; exit 1 ;;
        -print-file-name=libboost_context.a) echo libboost_context.a; exit 0 ;;
    esac
done
exec "$real_gcc" -I"$tmp/include" "\$@"
WRAP
chmod +x "$bin/gcc"
for t in make clang aarch64-linux-gnu-gcc riscv64-linux-gnu-gcc valgrind qemu-aarch64; do
    if PATH=$bin command -v $t > /dev/null; then echo "FAIL: $t is still on the PATH"; exit 1; fi
done

fail=0
bad() { echo "FAIL: $*"; fail=1; }
out=$tmp/bench.log
rc=0
env -u ACO_STRICT PATH="$bin" OUTPUT="$tmp/out" BENCH_ARGS=--quick bash make.sh bench > "$out" 2>&1 || rc=$?
[ $rc = 0 ] || { bad "make.sh bench exited $rc"; tail -20 "$out"; }
# bench builds only what it runs: of the missing parts only the fcontext
# peer concerns it, and only that one is named.
grep -q -- libboost-context-dev < <(grep '^make.sh: leaving out' "$out") ||
    bad "make.sh bench does not name libboost-context-dev"
n=$(grep -c '^make.sh: leaving out' "$out" || true)
[ "$n" = 1 ] || bad "make.sh bench: $n 'leaving out' lines, expected 1 (fcontext)"
grep -q '^headline solo_roundtrip_ns aco=[0-9.]* fcontext=n/a ratio=n/a floor=[0-9.]* vs_floor=[0-9.]*$' "$out" ||
    bad "no solo headline line"
grep -q '^headline copy120_roundtrip_ns aco=[0-9.]* fcontext=n/a ratio=n/a floor=[0-9.]* vs_floor=[0-9.]*$' "$out" ||
    bad "no copy120 headline line"
[ "$(tail -2 "$out" | head -1 | cut -d' ' -f1-2)" = "headline copy120_roundtrip_ns" ] ||
    bad "make.sh bench does not end with the headline lines"
grep -q '^make.sh bench: every correctness check passed; ' < <(tail -1 "$out") ||
    bad "make.sh bench's last line is not its verdict: $(tail -1 "$out")"
grep '^make.sh: leaving out' "$out"
grep -q "^make.sh: 'make' not found: building all that was asked for" "$out" ||
    bad "make.sh bench does not say it builds without make"
# only what it runs: two programs and their two variants' aco.o and acosw.o
grep -q '^make.sh: 6 files made (without make)$' "$out" ||
    bad "make.sh bench without make: $(grep 'made (without make)' "$out")"

# libs without make: libaco_hook.so, declared before libaco_rt.so, links
# it (not libaco_rt.a), and the libraries' run path is $ORIGIN (the
# Makefile's $$ORIGIN, given to sh)
rc=0
env -u ACO_STRICT PATH="$bin" OUTPUT="$tmp/out5" bash make.sh libs > "$tmp/libs.log" 2>&1 || rc=$?
[ $rc = 0 ] || { bad "make.sh libs exited $rc"; tail -20 "$tmp/libs.log"; }
readelf -d "$tmp/out5/libaco_hook.so" 2>/dev/null | grep -q 'NEEDED.*\[libaco_rt\.so\.' ||
    bad "make.sh libs without make: libaco_hook.so does not need libaco_rt.so"
readelf -d "$tmp/out5/libaco_rt.so" 2>/dev/null | grep -q 'R.*PATH.*\[\$ORIGIN\]$' ||
    bad "make.sh libs without make: libaco_rt.so's run path is not \$ORIGIN"

# A plain build on the same machine names every part it leaves out.  It
# names them before it compiles anything, as `make.sh list` does, which
# builds nothing (the suite's time; the bench run above built and ran).
out=$tmp/build.log
rc=0
env -u ACO_STRICT PATH="$bin" OUTPUT="$tmp/out4" bash make.sh list > "$out" 2>&1 || rc=$?
[ $rc = 0 ] || { bad "make.sh list exited $rc"; tail -20 "$out"; }
grep -q "^$tmp/out4/test_aco_synopsis\.\.no_valgrind\.standaloneFPUenv\$" "$out" ||
    bad "make.sh list does not list the x86-64 programs"
grep -q '\.\.m32\.' "$out" && bad "make.sh list lists i386 programs without gcc-multilib"
for pkg in gcc-multilib valgrind gcc-aarch64-linux-gnu libc6-dev-arm64-cross \
           gcc-riscv64-linux-gnu libc6-dev-riscv64-cross libboost-context-dev; do
    grep -q -- "$pkg" < <(grep '^make.sh: leaving out' "$out") || bad "no 'leaving out' line names $pkg"
done
n=$(grep -c '^make.sh: leaving out' "$out" || true)
[ "$n" = 5 ] || bad "$n 'leaving out' lines, expected 5 (m32, valgrind, aarch64, riscv64, fcontext)"

rc=0
PATH="$bin" OUTPUT="$tmp/out2" bash make.sh -o strict > "$tmp/strict.log" 2>&1 || rc=$?
[ $rc != 0 ] || bad "make.sh -o strict succeeded without the toolchains"
grep -q 'cannot build the valgrind variants: .*install valgrind.*strict' "$tmp/strict.log" ||
    bad "strict mode does not name valgrind"; cat "$tmp/strict.log"
rc=0
PATH="$bin" OUTPUT="$tmp/out3" ACO_STRICT=1 bash make.sh -o no-m32 -o no-valgrind \
    -o no-aarch64 -o no-riscv64 > "$tmp/strict2.log" 2>&1 || rc=$?
[ $rc != 0 ] || bad "ACO_STRICT=1 succeeded without libboost_context.a"
grep -q 'libboost-context-dev' "$tmp/strict2.log" || bad "strict mode does not name libboost-context-dev"
[ $fail = 0 ] && echo "fresh machine ok: make.sh bench exits 0 with only gcc; strict mode refuses"
exit $fail
