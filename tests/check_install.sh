#!/usr/bin/env bash
# `make.sh install` lays out headers, libaco.a, libaco.so (SONAME symlinks)
# and libaco.pc; a program builds with pkg-config against it and runs, linked
# dynamically and statically.  The same for the runtime (aco_rt.h,
# libaco_rt.*, libaco_rt.pc) with the README's echo server, which must echo,
# and docs/threads.md's pool example, which must print its sum.
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

# The runtime, with the README's example program.
for f in include/aco_rt.h lib/libaco_rt.a lib/libaco_rt.so lib/libaco_rt.so.1 lib/pkgconfig/libaco_rt.pc; do
    [ -e "$root/$f" ] || { echo "FAIL: $f not installed"; exit 1; }
done
# The echo server is the C block after the README's `<!-- check_docs: server -->`
# line; it takes its port as its argument.
awk '/^<!-- check_docs: server -->$/{m=1;next} m&&/^```c$/{f=1;next} f&&/^```$/{exit} f' README.md > "$tmp/echo.c"
grep -q aco_rt_sched_new "$tmp/echo.c" || { echo "FAIL: no echo server in the README"; exit 1; }
rtflags=$(pkg-config --cflags --libs libaco_rt)
echo "pkg-config: $rtflags"
gcc -Wall -Wextra -Werror "$tmp/echo.c" $rtflags -o "$tmp/echo_dyn"
gcc -Wall -Wextra -Werror "$tmp/echo.c" -I"$root/include" "$root/lib/libaco_rt.a" "$root/lib/libaco.a" \
    $(pkg-config --static --libs-only-l libaco_rt | sed 's/-laco_rt//; s/-laco//') -o "$tmp/echo_static"
for prog in echo_dyn echo_static; do
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    LD_LIBRARY_PATH="$root/lib" "$tmp/$prog" "$port" & pid=$!
    got=""
    for _ in $(seq 50); do
        got=$(echo "hello $prog" | timeout 5 nc -N 127.0.0.1 "$port" 2>/dev/null) && [ -n "$got" ] && break
        sleep 0.1
    done
    kill $pid 2>/dev/null; wait $pid 2>/dev/null || true
    [ "$got" = "hello $prog" ] || { echo "FAIL: $prog echoed '$got'"; exit 1; }
done
# The pool example of docs/threads.md: it prints and checks its sum.
awk '/^```c$/{f=1;next}/^```$/{f=0}f' docs/threads.md > "$tmp/pool.c"
grep -q aco_rt_pool_new "$tmp/pool.c" || { echo "FAIL: no example in docs/threads.md"; exit 1; }
gcc -Wall -Wextra -Werror "$tmp/pool.c" $rtflags -o "$tmp/pool_dyn"
got=$(LD_LIBRARY_PATH="$root/lib" timeout 60 "$tmp/pool_dyn") || { echo "FAIL: the pool example failed ($got)"; exit 1; }
[ "$got" = 333833500 ] || { echo "FAIL: the pool example printed '$got'"; exit 1; }
echo "install ok"
