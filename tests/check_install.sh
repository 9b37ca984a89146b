#!/usr/bin/env bash
# `make.sh install` lays out headers, libaco.a, libaco.so (SONAME symlinks)
# and libaco.pc; a program builds with pkg-config against it and runs, linked
# dynamically and statically.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
DESTDIR="$tmp/root" PREFIX=/usr/local OUTPUT="$tmp/out" bash make.sh install
root="$tmp/root/usr/local"
for f in include/aco.h include/aco_assert_override.h lib/libaco.a lib/libaco.so \
         lib/libaco.so.1 lib/pkgconfig/libaco.pc; do
    [ -e "$root/$f" ] || { echo "FAIL: $f not installed"; exit 1; }
done
readlink "$root/lib/libaco.so.1" | grep -q '^libaco\.so\.1\.' || { echo "FAIL: libaco.so.1 link"; exit 1; }
export PKG_CONFIG_SYSROOT_DIR="$tmp/root" PKG_CONFIG_PATH="$root/lib/pkgconfig"
command -v pkg-config >/dev/null || { echo "pkg-config not found: install the Debian package pkg-config"; exit 1; }
flags=$(pkg-config --cflags --libs libaco)
echo "pkg-config: $flags"
gcc -Wall -Wextra -Werror test_aco_synopsis.c $flags -o "$tmp/dyn"
LD_LIBRARY_PATH="$root/lib" "$tmp/dyn" > /dev/null
ldd_out=$(LD_LIBRARY_PATH="$root/lib" ldd "$tmp/dyn")
echo "$ldd_out" | grep -q 'libaco.so.1 =>' || { echo "FAIL: not linked against libaco.so.1"; echo "$ldd_out"; exit 1; }
gcc -Wall -Wextra -Werror test_aco_synopsis.c -I"$root/include" "$root/lib/libaco.a" -o "$tmp/static"
"$tmp/static" > /dev/null
echo "install ok"
