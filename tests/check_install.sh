#!/usr/bin/env bash
# `make.sh install` lays out the headers (core and runtime), libaco.a,
# libaco.so, libaco_rt.a, libaco_rt.so (SONAME symlinks), libaco_hook.so and
# both pkg-config files under $DESTDIR$PREFIX (and libaco_rt_tls, with its
# header and .pc, where OpenSSL 3 is: a TLS program links with its .pc):
#  - libaco.pc and libaco_rt.pc carry aco.h's version; libaco_rt.pc requires
#    libaco of that version, and `pkg-config --cflags --libs libaco_rt` names
#    the include directory once and -laco_rt before -laco; --static adds
#    pthread (and liburing where the runtime has io_uring);
#  - a core program (test_aco_synopsis.c) builds with pkg-config and runs,
#    linked dynamically (against libaco.so.1) and statically;
#  - a runtime program (tests/cmake_consumer/rt_main.c: a channel, a pipe
#    through the I/O backend, a libaco co) builds with pkg-config libaco_rt
#    and runs: dynamically (NEEDED libaco_rt.so.1), with --static and -static
#    (no libaco library needed at run time), and against the build tree's
#    output/libaco_rt.pc;
#  - the installed libaco_rt.so finds libaco.so beside it ($ORIGIN).
set -euo pipefail
cd "$(dirname "$0")/.."
unset PKG_CONFIG_PATH
command -v pkg-config > /dev/null || { echo "FAIL: pkg-config not found: install the Debian package pkg-config"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
t0=$SECONDS
version=$(awk '/define ACO_VERSION_(MAJOR|MINOR|PATCH)/ {v = v (v ? "." : "") $3} END {print v}' aco.h)
rt_main=tests/cmake_consumer/rt_main.c
runs_ok() {   # runs_ok <what it must print> <command...>
    local want=$1 out; shift
    out=$("$@" 2>&1) || { echo "$out"; fail "$* failed"; }
    grep -q "^$want\$" <<< "$out" || { echo "$out"; fail "$* did not say '$want'"; }
}
needed() { readelf -dW "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]$/\1/p'; }

DESTDIR="$tmp/root" PREFIX=/usr/local OUTPUT="$tmp/out" bash make.sh install
root="$tmp/root/usr/local"
for f in include/aco.h include/aco_assert_override.h include/aco_rt.h include/aco_rt_pthread.h \
         include/aco_rt_pthread_names.h lib/libaco.a lib/libaco.so lib/libaco.so.1 \
         lib/libaco_rt.a lib/libaco_rt.so lib/libaco_rt.so.1 lib/libaco_hook.so \
         lib/pkgconfig/libaco.pc lib/pkgconfig/libaco_rt.pc; do
    [ -e "$root/$f" ] || fail "$f not installed"
done
for l in libaco libaco_rt; do
    [ "$(readlink "$root/lib/$l.so.1")" = "$l.so.$version" ] || fail "$l.so.1 link"
done

export PKG_CONFIG_SYSROOT_DIR="$tmp/root" PKG_CONFIG_PATH="$root/lib/pkgconfig"
for pc in libaco libaco_rt; do
    v=$(pkg-config --modversion $pc)
    [ "$v" = "$version" ] || fail "$pc.pc says $v, aco.h $version"
done
grep -qx "Requires: libaco = $version" "$root/lib/pkgconfig/libaco_rt.pc" ||
    fail "libaco_rt.pc does not require libaco $version"
flags=$(pkg-config --cflags --libs libaco)
rtflags=$(pkg-config --cflags --libs libaco_rt)
rtstatic=$(pkg-config --static --libs libaco_rt)
echo "pkg-config libaco: $flags"
echo "pkg-config libaco_rt: $rtflags"
echo "pkg-config --static libaco_rt: $rtstatic"
[ "$(grep -o -- "-I[^ ]*" <<< "$rtflags" | wc -l)" = 1 ] || fail "libaco_rt: not one -I"
grep -q -- '-laco_rt .*-laco\b' <<< "$rtflags" || fail "libaco_rt: no -laco_rt before -laco"
grep -q -- '-lpthread' <<< "$rtstatic" || fail "--static libaco_rt: no -lpthread"
if printf '#include <liburing.h>\nint main(void){return 0;}\n' | gcc -x c - -luring -o /dev/null 2>/dev/null; then
    grep -q -- '-luring' <<< "$rtstatic" || fail "--static libaco_rt: no -luring"
fi

# The core.
# shellcheck disable=SC2086
gcc -Wall -Wextra -Werror test_aco_synopsis.c $flags -o "$tmp/dyn"
LD_LIBRARY_PATH="$root/lib" "$tmp/dyn" > /dev/null
ldd_out=$(LD_LIBRARY_PATH="$root/lib" ldd "$tmp/dyn")
grep -q 'libaco.so.1 =>' <<< "$ldd_out" || { echo "$ldd_out"; fail "not linked against libaco.so.1"; }
gcc -Wall -Wextra -Werror test_aco_synopsis.c -I"$root/include" "$root/lib/libaco.a" -o "$tmp/static"
"$tmp/static" > /dev/null

# The runtime: dynamic, its run path naming the prefix's lib alone.
# shellcheck disable=SC2086
gcc -Wall -Wextra -Werror "$rt_main" $rtflags -Wl,-rpath,"$root/lib" -o "$tmp/rt_dyn"
grep -qx libaco_rt.so.1 < <(needed "$tmp/rt_dyn") || fail "rt_dyn does not need libaco_rt.so.1"
runs_ok 'rt_consumer: ok' "$tmp/rt_dyn"
# libaco_rt.so finds libaco.so beside it, wherever the prefix is.
grep -q '(RUNPATH).*\[\$ORIGIN\]' < <(readelf -dW "$root/lib/libaco_rt.so") || fail "libaco_rt.so: run path is not \$ORIGIN"
# Static: nothing of libaco's looked for at run time.
# shellcheck disable=SC2046
gcc -Wall -Wextra -Werror "$rt_main" $(pkg-config --static --cflags --libs libaco_rt) -static -o "$tmp/rt_static"
grep -q libaco < <(needed "$tmp/rt_static") && fail "rt_static needs a libaco library"
runs_ok 'rt_consumer: ok' "$tmp/rt_static"

# TLS, where make.sh built it (OpenSSL 3): the header, libaco_rt_tls.a and
# .so, libaco_rt_tls.pc; a program with pkg-config libaco_rt_tls links
# (dynamically: NEEDED libaco_rt_tls.so.1) and runs.
if [ -e "$tmp/out/libaco_rt_tls.a" ]; then
    for f in include/aco_rt_tls.h lib/libaco_rt_tls.a lib/libaco_rt_tls.so lib/libaco_rt_tls.so.1 \
             lib/pkgconfig/libaco_rt_tls.pc; do
        [ -e "$root/$f" ] || fail "$f not installed"
    done
    [ "$(pkg-config --modversion libaco_rt_tls)" = "$version" ] || fail "libaco_rt_tls.pc's version"
    cat > "$tmp/tls.c" <<'TLS'
#include "aco_rt_tls.h"
#include <errno.h>
#include <stdio.h>
int main(void) {
    char err[128];
    aco_rt_tls_opts_t s = {.server = 1};        /* no certificate: EINVAL */
    aco_rt_tls_opts_t c = {.flags = ACO_RT_TLS_NO_VERIFY};
    aco_rt_tls_ctx_t* bad = aco_rt_tls_ctx_new(&s, err, sizeof err);
    int e = errno;
    aco_rt_tls_ctx_t* ok = aco_rt_tls_ctx_new(&c, err, sizeof err);
    if (bad != NULL || e != EINVAL || ok == NULL) return 1;
    aco_rt_tls_ctx_free(ok);
    puts("tls_consumer: ok");
    return 0;
}
TLS
    # shellcheck disable=SC2046
    gcc -Wall -Wextra -Werror "$tmp/tls.c" $(pkg-config --cflags --libs libaco_rt_tls) -Wl,-rpath,"$root/lib" -o "$tmp/tls_dyn"
    grep -qx libaco_rt_tls.so.1 < <(needed "$tmp/tls_dyn") || fail "tls_dyn does not need libaco_rt_tls.so.1"
    LD_LIBRARY_PATH="$root/lib" runs_ok 'tls_consumer: ok' "$tmp/tls_dyn"
    echo "pkg-config libaco_rt_tls: $(pkg-config --cflags --libs libaco_rt_tls)"
fi

# The build tree's pkg-config files (output/, here $tmp/out).
unset PKG_CONFIG_SYSROOT_DIR
export PKG_CONFIG_PATH=$tmp/out
[ -f "$tmp/out/libaco.pc" ] && [ -f "$tmp/out/libaco_rt.pc" ] || fail "no libaco.pc and libaco_rt.pc in the build tree"
# shellcheck disable=SC2046
gcc -Wall -Wextra -Werror "$rt_main" $(pkg-config --cflags --libs libaco_rt) -Wl,-rpath,"$tmp/out" -o "$tmp/rt_tree"
runs_ok 'rt_consumer: ok' "$tmp/rt_tree"
echo "install ok ($((SECONDS - t0)) s)"
