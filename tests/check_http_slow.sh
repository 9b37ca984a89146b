#!/usr/bin/env bash
# check_http_slow.sh - output/aco_http with one thread on a slow disk: the
# root is output/slowfs (rt/tests/slowfs.c, FUSE) over a directory, and its
# slow.bin takes 2 s to open and 2 s a read.  While one client fetches
# slow.bin (twice: the small-body path, read with the head, and a large
# one sent by sendfile), other clients fetch a 4 KiB file over and over,
# each a connection of its own (python3's http.client): none may wait more
# than 100 ms, on both backends, and every body is checked byte for byte.
# The same clients against a server that opens and reads its files in its
# one thread (python3's HTTPServer without threads) must fail the latency
# check (it proves the check can fail).  Runs in a mount namespace of its own.  Exit
# status: the verdict.
# test.sh: alone (its verdict is a latency: not beside the suite's other runs)
set -uo pipefail
cd "$(dirname "$0")/.."
. tests/lib.sh
OUT=${OUTPUT:-output}
need_built aco_http slowfs
command -v python3 > /dev/null || { echo "check_http_slow: python3 not found: install python3"; exit 1; }
in_private_mounts "$0" "$@"
PIDS=()
tmp=$(mktemp -d /var/tmp/aco_http_slow.XXXXXX)
trap 'slow_disk_cleanup "$tmp"' EXIT
trap 'exit 1' INT TERM HUP
mkdir -p "$tmp/back"
head -c 4096 /dev/urandom > "$tmp/back/fast.bin"
head -c 8192 /dev/urandom > "$tmp/back/slow.bin"
head -c 200000 /dev/urandom > "$tmp/back/slow_big.bin"
slow_disk "$tmp" 'slow*:open=2000,read=2000' || exit 1
root=$tmp/mnt
fails=0

# measure PORT [NAMES]: fetches slow.bin and then slow_big.bin (or NAMES)
# in the background while fetching fast.bin over and over; prints "max_ms
# N fast_ok N slow_ok N", the longest fast fetch and the counts of right
# bodies.
measure() {
    python3 - "$1" "$tmp/back" "${2:-slow.bin slow_big.bin}" <<'PY'
import socket, sys, threading, time, http.client
port, back, slow_names = int(sys.argv[1]), sys.argv[2], sys.argv[3].split()
want = {n: open("%s/%s" % (back, n), "rb").read() for n in ("fast.bin", "slow.bin", "slow_big.bin")}
def get(name, timeout):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    c.request("GET", "/" + name)
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status == 200 and body == want[name]
slow_ok = [0]
def slow():
    for n in slow_names:
        try:
            slow_ok[0] += get(n, 30)
        except Exception as e:
            print("slow fetch of %s failed: %r" % (n, e), file=sys.stderr)
t = threading.Thread(target=slow)
t.start()
time.sleep(0.2)             # the slow fetch is under way
worst, fast_ok = 0.0, 0
while t.is_alive():
    t0 = time.monotonic()
    try:
        fast_ok += get("fast.bin", 3)
    except Exception as e:
        print("fast fetch failed: %r" % (e,), file=sys.stderr)
    worst = max(worst, time.monotonic() - t0)
    time.sleep(0.01)
t.join()
print("max_ms %d fast_ok %d slow_ok %d" % (worst * 1000, fast_ok, slow_ok[0]))
PY
}

# The servers side by side, measured at once: aco_http on each backend, and
# a server that does its file work in its one thread (python3's HTTPServer
# without threads), which must fail the same check.
cat > "$tmp/one_thread.py" <<'PY'
import functools, http.server, sys
handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[2])
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), handler).serve_forever()
PY
names=() ports=()
for be in ${ACO_RT_TEST_BACKENDS:-uring epoll}; do
    port=$(free_port)
    if start_server "$port" "$OUT/aco_http" --root "$root" --port "$port" --backend "$be" --threads 1 \
            > "$tmp/server_$be.log" 2>&1; then
        names+=("$be") ports+=("$port")
    else
        bad "$be: aco_http did not start: $(cat "$tmp/server_$be.log")"
    fi
done
port=$(free_port)
if start_server "$port" python3 "$tmp/one_thread.py" "$port" "$root" > "$tmp/py.log" 2>&1; then
    names+=(one_thread) ports+=("$port")
else
    bad "the one-thread server did not start: $(cat "$tmp/py.log")"
fi
for i in "${!names[@]}"; do
    if [ "${names[$i]}" = one_thread ]; then measure "${ports[$i]}" slow.bin > "$tmp/m_one_thread" 2>&1 &
    else measure "${ports[$i]}" > "$tmp/m_${names[$i]}" 2>&1 &
    fi
done
wait_measures=0
for i in "${!names[@]}"; do
    while ! grep -q '^max_ms' "$tmp/m_${names[$i]}" 2>/dev/null; do
        sleep 0.2
        wait_measures=$((wait_measures + 1))
        [ $wait_measures -lt 600 ] || break
    done
done
for i in "${!names[@]}"; do
    n=${names[$i]}
    out=$(grep '^max_ms' "$tmp/m_$n")
    set -- $out
    if [ $n = one_thread ]; then
        if [ "${1:-}" = max_ms ] && [ "$2" -gt 100 ]; then
            ok "a server that opens and reads in its one thread: the longest fast fetch $2 ms (the check can fail)"
        else
            bad "a one-thread server should fail the latency check: got '$(cat "$tmp/m_$n")'"
        fi
    elif [ "${1:-}" = max_ms ] && [ "$2" -le 100 ] && [ "$4" -ge 20 ] && [ "$6" = 2 ]; then
        ok "$n: while slow.bin took its 2 s opens and reads, $4 fetches of fast.bin, the longest $2 ms; both slow bodies right"
    else
        bad "$n: want the longest fast fetch <= 100 ms, >= 20 of them, 2 slow bodies right: got '$(cat "$tmp/m_$n")'"
    fi
done
grep -q "^hold open slow" "$tmp/holds.log" && grep -q "^hold read slow" "$tmp/holds.log" &&
    ok "the slow disk held opens and reads" || bad "the slow disk held no open or no read: $(head -5 "$tmp/holds.log" 2>&1)"
echo "check_http_slow: $fails failed"
[ $fails = 0 ]
