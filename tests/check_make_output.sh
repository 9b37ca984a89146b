#!/usr/bin/env bash
# What `bash make.sh` tells a newcomer: `make.sh libs` into an empty output
# directory makes the libraries alone, says how many files it makes and
# shows its progress in tenths as it goes (in order, never past the total),
# and its last line names every library it made (each of which exists)
# and the runtime's backends, which must be the truth: io_uring (and
# "-luring") exactly when a program using io_uring links here, epoll only
# with -o no-uring; libaco_rt_tls exactly when OpenSSL 3 links here, not
# with -o no-tls (both options in one build).  A second run makes nothing
# and says so; a compile that fails shows the compiler's message and fails
# make.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "check_make_output: $*"; exit 1; }

run() {  # run <dir> [make.sh args]: its output in <dir>.log
    local d=$1; shift
    OUTPUT=$d bash make.sh "$@" libs > "$d.log" 2>&1 || { cat "$d.log"; fail "make.sh $* libs failed"; }
}
run "$tmp/a"
log=$tmp/a.log
total=$(sed -n 's/^make.sh: making \([0-9]*\) files.*/\1/p' "$log")
[ -n "$total" ] || { cat "$log"; fail "no 'making N files' line"; }
# the progress lines: increasing, below the total, at least 5 of them
awk -v total="$total" '
    /^make.sh: [0-9]+% \([0-9]+ of [0-9]+\)$/ {
        n++; k = $3; sub(/\(/, "", k)
        if (k + 0 <= last || k + 0 >= total || $5 + 0 != total) bad = 1
        last = k + 0 }
    END { exit !(n >= 5 && !bad) }' "$log" || { cat "$log"; fail "progress lines missing or out of order"; }
last=$(tail -1 "$log")
for l in libaco.a libaco.so libaco_rt.a libaco_rt.so libaco_hook.so; do
    case "$last" in *"$l"*) ;; *) fail "the last line does not name $l: $last" ;; esac
    [ -f "$tmp/a/$l" ] || fail "$l named but not made"
done
# the backends said are the truth
printf '#include <liburing.h>\nint main(void){struct io_uring r; return io_uring_queue_init(8, &r, 0) & 0;}\n' > "$tmp/u.c"
if gcc "$tmp/u.c" -luring -o "$tmp/u" > /dev/null 2>&1; then
    case "$last" in *"backends: io_uring and epoll (link with -luring)"*) ;;
        *) fail "liburing links here, but the last line says: $last" ;; esac
else
    case "$last" in *"backends: epoll only"*) ;;
        *) fail "liburing does not link here, but the last line says: $last" ;; esac
fi
# (-o no-uring and -o no-tls in one build: each is checked on its own
# words, and a libs build is 12 CPU s)
run "$tmp/b" -o no-uring -o no-tls
case "$(tail -1 "$tmp/b.log")" in *"backends: epoll only (-o no-uring"*"without -luring"*) ;;
    *) fail "-o no-uring: the last line says: $(tail -1 "$tmp/b.log")" ;; esac
# libaco_rt_tls (TLS) exactly when OpenSSL 3 links here, and not with -o no-tls
libs=5
printf '#include <openssl/ssl.h>\n#if OPENSSL_VERSION_MAJOR < 3\n#error 3\n#endif\nint main(void){return OPENSSL_init_ssl(0, 0) & 0;}\n' > "$tmp/s.c"
if gcc "$tmp/s.c" -lssl -lcrypto -o "$tmp/s" > /dev/null 2>&1; then
    libs=7
    for l in libaco_rt_tls.a libaco_rt_tls.so; do
        case "$last" in *"$l"*) ;; *) fail "OpenSSL 3 links here, but the last line does not name $l: $last" ;; esac
        [ -f "$tmp/a/$l" ] || fail "$l named but not made"
    done
else
    case "$last" in *libaco_rt_tls*) fail "OpenSSL 3 does not link here, but the last line names libaco_rt_tls: $last" ;; esac
fi
case "$(tail -1 "$tmp/b.log")" in *libaco_rt_tls*) fail "-o no-tls: the last line names libaco_rt_tls: $(tail -1 "$tmp/b.log")" ;; esac
grep -q '^make.sh: -o no-tls: no libaco_rt_tls' "$tmp/b.log" || fail "-o no-tls: not said"
# nothing to do the second time, said as such
run "$tmp/a"
grep -q "^make.sh: the $libs outputs asked for are up to date (0 made now)\$" "$tmp/a.log" ||
    { cat "$tmp/a.log"; fail "a second run does not say it made nothing"; }
grep -q '^make.sh: [0-9]*%' "$tmp/a.log" && fail "a second run shows progress for nothing"
# a build that fails says why (the compiler's words) and fails
if OUTPUT=$tmp/c CFLAGS="-O2 -include $tmp/absent.h" bash make.sh libs > "$tmp/c.log" 2>&1; then
    cat "$tmp/c.log"; fail "a failed compile did not fail make.sh"
fi
grep -q 'absent.h: No such file' "$tmp/c.log" && grep -q '^make.sh: build failed$' "$tmp/c.log" ||
    { cat "$tmp/c.log"; fail "a failed compile is not reported"; }
echo "check_make_output: make.sh libs made $total files, progress and last line right"
