#!/usr/bin/env bash
# check_hook_link.sh - linking the syscall hooks so that they cannot be
# dropped, and knowing when they are not live.  A program that names no
# hooked call itself (its blocking read is inside a library of its own,
# as a client library's would be), built with -Wl,--as-needed (Debian's
# gcc default, said explicitly):
#   - linked with pkg-config's libaco_hook: libaco_hook.so in its NEEDED,
#     aco_rt_hooks_active() 1, its read parks the co;
#   - linked with a plain -laco_hook: the linker drops it (this proves the
#     first check can fail), aco_rt_hooks_active() 0;
#   - with the static runtime and LD_PRELOAD=libaco_hook.so: the hooks are
#     bound to another copy of the runtime: aco_rt_hooks_active() 0, and
#     the first aco_rt_sched_new says so on stderr, once;
#   - built with -fsanitize=address (gcc's and clang's, pkg-config's
#     flags): the sanitizer's read, recv and poll come first and hand the
#     calls on, so the hooks are live: aco_rt_hooks_active() 1 (it probes
#     them), the read parks the co;
#   - the shared runtime, built with -fsanitize=thread and address (clang
#     links the sanitizer's runtime into the program; gcc's is a shared
#     library, preloaded first as ASan asks), with LD_PRELOAD=
#     libaco_hook.so: the program's interceptors come first and hand the
#     calls to the hooks, live and parked as above.
# Exit status: the verdict.
set -uo pipefail
cd "$(dirname "$0")/.."
. tests/lib.sh
OUT=${OUTPUT:-output}
for f in libaco_hook.so libaco_hook.pc libaco_rt.so libaco_rt.a libaco.a; do
    [ -e "$OUT/$f" ] || { echo "check_hook_link: $OUT/$f not built (bash make.sh)"; exit 1; }
done
command -v pkg-config > /dev/null || { echo "check_hook_link: pkg-config not found: install pkg-config"; exit 1; }
tmp=$(mktemp -d); trap cleanup_tmp EXIT
out=$(cd "$OUT" && pwd)
fails=0

# The library: a blocking read, as libpq's or hiredis' would be.
cat > "$tmp/reader.c" <<'EOF'
#include <unistd.h>
ssize_t lib_read(int fd, void* b, size_t n) { return read(fd, b, n); }
EOF
# The program: a co reads through the library while another writes 10 ms
# later; the write must find the reader parked (with no hooks the read
# blocks the thread, the writer never runs: a watchdog ends that).
cat > "$tmp/prog.c" <<'EOF'
#include "aco_rt.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
ssize_t lib_read(int fd, void* b, size_t n);
static int fds[2], parked;
static void reader(void* arg) {
    (void)arg;
    char c;
    if (lib_read(fds[0], &c, 1) != 1) abort();
}
static void writer(void* arg) {
    (void)arg;
    aco_rt_sleep(10 * 1000000);
    aco_rt_stats_t st;
    aco_rt_stats(NULL, &st);
    parked = st.cos_parked > 0;
    if (syscall(SYS_write, fds[1], "x", 1) != 1) abort();
}
int main(int argc, char** argv) {
    int want = argc > 1 && strcmp(argv[1], "live") == 0;
    int live = aco_rt_hooks_active();
    printf("aco_rt_hooks_active: %d\n", live);
    if (!want) {                        /* a scheduler made, nothing run */
        aco_rt_sched_free(aco_rt_sched_new(NULL));
        return live;                    /* 0: as expected */
    }
    alarm(5);                           /* no hooks: the read blocks for good */
    if (syscall(SYS_pipe, fds) != 0) return 2;
    aco_rt_sched_t* s = aco_rt_sched_new(NULL);
    aco_rt_detach(aco_rt_spawn(s, reader, NULL));
    aco_rt_detach(aco_rt_spawn(s, writer, NULL));
    if (aco_rt_sched_run(s) != 0) return 3;
    aco_rt_sched_free(s);
    printf("the reader was parked when the writer ran: %d\n", parked);
    return live && parked ? 0 : 4;
}
EOF
cc=${CC:-gcc}
$cc -O2 -fPIC -shared "$tmp/reader.c" -o "$tmp/libreader.so" || { echo "check_hook_link: libreader.so does not build"; exit 1; }
# shellcheck disable=SC2046
$cc -O2 -Wall -Wextra -Werror -I. -Irt "$tmp/prog.c" -Wl,--as-needed -L"$tmp" -lreader \
    $(PKG_CONFIG_PATH="$OUT" pkg-config --libs libaco_hook) -Wl,-rpath,"$out:$tmp" -o "$tmp/pc" ||
    { echo "check_hook_link: the pkg-config build fails"; exit 1; }
$cc -O2 -Wall -Wextra -Werror -I. -Irt "$tmp/prog.c" -Wl,--as-needed -L"$tmp" -lreader \
    -L"$OUT" -laco_hook -laco_rt -laco -Wl,-rpath,"$out:$tmp" -o "$tmp/plain" ||
    { echo "check_hook_link: the plain build fails"; exit 1; }
uring=""
grep -q ACO_RT_HAVE_URING "$OUT/obj/rt/flags" 2> /dev/null && uring=-luring
# shellcheck disable=SC2086
$cc -O2 -Wall -Wextra -Werror -I. -Irt "$tmp/prog.c" -L"$tmp" -lreader "$OUT/libaco_rt.a" \
    "$OUT/libaco.a" $uring -ldl -lpthread -Wl,-rpath,"$tmp" -o "$tmp/static" ||
    { echo "check_hook_link: the static build fails"; exit 1; }
needs() { readelf -dW "$1" | grep -q "NEEDED.*\[$2\]"; }
asans=""
for c in gcc clang; do
    command -v $c > /dev/null || { echo "check_hook_link: $c not found: install it"; exit 1; }
    # shellcheck disable=SC2046
    $c -O1 -g -fsanitize=address -Wall -Wextra -Werror -I. -Irt "$tmp/prog.c" -Wl,--as-needed \
        -L"$tmp" -lreader $(PKG_CONFIG_PATH="$OUT" pkg-config --libs libaco_hook) \
        -Wl,-rpath,"$out:$tmp" -o "$tmp/asan_$c" ||
        { echo "check_hook_link: the $c -fsanitize=address build fails"; exit 1; }
    asans="$asans $c"
    for san in address thread; do
        $c -O1 -g -fsanitize=$san -Wall -Wextra -Werror -I. -Irt "$tmp/prog.c" -L"$tmp" -lreader \
            -L"$OUT" -laco_rt -laco -Wl,-rpath,"$out:$tmp" -o "$tmp/pre_${c}_$san" ||
            { echo "check_hook_link: the $c -fsanitize=$san build with the shared runtime fails"; exit 1; }
    done
done

for be in ${ACO_RT_TEST_BACKENDS:-uring epoll}; do
    export ACO_RT_BACKEND=$be
    if needs "$tmp/pc" libaco_hook.so && r=$("$tmp/pc" live 2>&1); then
        ok "$be: pkg-config's flags under --as-needed: NEEDED libaco_hook.so, $(echo "$r" | tr '\n' ' ')"
    else
        bad "$be: pkg-config's flags under --as-needed: $(readelf -dW "$tmp/pc" | grep NEEDED | tr -s ' ') ${r:-}"
    fi
done
unset ACO_RT_BACKEND
if ! needs "$tmp/plain" libaco_hook.so && r=$("$tmp/plain" dead 2>&1); then
    ok "a plain -laco_hook under --as-needed is dropped, and says so: $r"
else
    bad "a plain -laco_hook under --as-needed: expected it dropped and inactive: ${r:-}"
fi
r=$(LD_PRELOAD="$out/libaco_hook.so" "$tmp/static" dead 2> "$tmp/err")
st=$?
n=$(grep -c 'libaco_hook is loaded, but bound to another copy of the runtime' "$tmp/err")
if [ $st = 0 ] && [ "$n" = 1 ] && grep -q 'aco_rt_hooks_active: 0' <<< "$r"; then
    ok "the static runtime with LD_PRELOAD: inactive, and said once on stderr"
else
    bad "the static runtime with LD_PRELOAD: status $st, $n warnings: $r $(cat "$tmp/err")"
fi
for c in $asans; do
    for be in ${ACO_RT_TEST_BACKENDS:-uring epoll}; do
        if r=$(ACO_RT_BACKEND=$be ASAN_OPTIONS=detect_leaks=0 "$tmp/asan_$c" live 2>&1); then
            ok "$be: $c -fsanitize=address: live through the sanitizer's interceptors: $(echo "$r" | tr '\n' ' ')"
        else
            bad "$be: $c -fsanitize=address: expected live and parked: $(echo "$r" | tr '\n' ' ')"
        fi
    done
done
for c in $asans; do
    for san in address thread; do
        pre="$out/libaco_hook.so"       # (gcc's ASan must come first: it says so)
        [ $c = gcc ] && [ $san = address ] && pre="$(gcc -print-file-name=libasan.so) $pre"
        for be in ${ACO_RT_TEST_BACKENDS:-uring epoll}; do
            if r=$(ACO_RT_BACKEND=$be ASAN_OPTIONS=detect_leaks=0 LD_PRELOAD="$pre" \
                   "$tmp/pre_${c}_$san" live 2>&1); then
                ok "$be: $c -fsanitize=$san, LD_PRELOAD=$(basename -a $pre | tr '\n' ' '): live: $(echo "$r" | tr '\n' ' ')"
            else
                bad "$be: $c -fsanitize=$san with LD_PRELOAD=$pre: expected live and parked: $(echo "$r" | tr '\n' ' ')"
            fi
        done
    done
done
echo "check_hook_link: $fails failed"
[ $fails = 0 ]
