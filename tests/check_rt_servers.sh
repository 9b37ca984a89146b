#!/usr/bin/env bash
# check_rt_servers.sh - the runtime's programs against real clients, on both
# backends, and with --threads 2 (both --accept modes): aco_resp with
# redis-cli and redis-benchmark (every command, its errors, pipelining, malformed and oversized input, acknowledged SETs kept,
# a million-argument command's argv not kept after it,
# many clients), aco_echo with OpenBSD nc, aco_nc against itself and nc
# (byte-exact transfers both ways).  Exit status: the verdict.
set -uo pipefail
cd "$(dirname "$0")/.."
. tests/lib.sh
OUT=${OUTPUT:-output}
need_built aco_resp aco_echo aco_nc
for c in redis-cli redis-benchmark nc; do
    command -v $c > /dev/null ||
        { echo "check_rt_servers: $c not found: install redis-tools and netcat-openbsd"; exit 1; }
done
backends=${ACO_RT_TEST_BACKENDS:-uring epoll}
tmp=$(mktemp -d)
trap cleanup_tmp EXIT
fails=0
expect() {   # expect <what> <want> <got>
    if [ "$2" = "$3" ]; then ok "$1"; else bad "$1: want '$2', got '$3'"; fi
}

# quiet_stop WHAT LOG: the stop left no complaint of an accepting co (with
# --threads 2 the others' sockets, shut by the stop, said EINVAL, and each
# acceptor printed it in a loop until the exit: thousands of lines)
quiet_stop() {
    if grep -q ': accept: ' "$2"; then
        bad "$1: SIGTERM: $(grep -c ': accept: ' "$2") accept complaints: $(grep -m1 ': accept: ' "$2")"
    else
        ok "$1: SIGTERM: no accept complaint"
    fi
}

# stop_and_restart WHAT PID LOG ARGS...: SIGTERM ends aco_resp (on $port)
# with status 0, and one started at once on the same port with ARGS
# listens (once, on io_uring, an accept in flight kept the port until the
# kernel tore the ring down after the process: "Address already in use").
stop_and_restart() {
    local what=$1 pid=$2 log=$3 st
    shift 3
    kill -TERM "$pid"
    wait "$pid"
    st=$?
    forget_pid "$pid"
    [ $st = 0 ] && ok "$what: SIGTERM: exit status 0" || bad "$what: SIGTERM: status $st: $(tail -2 "$log")"
    quiet_stop "$what" "$log"
    if start_server "$port" "$OUT/aco_resp" --port "$port" "$@" 2> "$tmp/restart.log"; then
        ok "$what: restarted at once on the same port"
        stop_pid "$SERVER_PID"
    else
        bad "$what: restart on the same port: $(cat "$tmp/restart.log")"
    fi
}

# aco_nc: a port is 0-65535 (it once took 99999 as 34463, "abc" as 0)
for a in "-l 99999" "-l abc" "127.0.0.1 89046" "127.0.0.1 99999999999999999999"; do
    # shellcheck disable=SC2086
    got=$(timeout 5 "$OUT/aco_nc" $a < /dev/null 2>&1)
    st=$?
    [ $st = 2 ] && [[ $got == *"bad port"* ]] && ok "aco_nc $a: refused" ||
        bad "aco_nc $a: status $st, '$got'"
done

# SIGTERM to two threads, an accepting co on each, five times a backend
# (the complaint came in about two stops of three on epoll)
for be in $backends; do
    n=0
    for i in 1 2 3 4 5; do
        port=$(free_port)
        start_server "$port" "$OUT/aco_resp" --port "$port" --backend "$be" --threads 2 \
            2> "$tmp/stop-$be.log" || { bad "$be: aco_resp --threads 2 did not start"; break; }
        kill -TERM "$SERVER_PID"
        wait "$SERVER_PID"
        forget_pid "$SERVER_PID"
        grep -q ': accept: ' "$tmp/stop-$be.log" && break
        n=$i
    done
    [ $n = 5 ] && ok "$be: --threads 2: five stops, no accept complaint" ||
        bad "$be: --threads 2: stop $((n + 1)): $(grep -c ': accept: ' "$tmp/stop-$be.log") accept complaints"
done

for be in $backends; do
    # ---- aco_resp ---------------------------------------------------------
    port=$(free_port)
    start_server "$port" "$OUT/aco_resp" --port "$port" --backend "$be" 2> "$tmp/resp-$be.log" ||
        { bad "$be: aco_resp did not start: $(cat "$tmp/resp-$be.log")"; continue; }
    rpid=$SERVER_PID
    # the descriptor table grown before the first client (rt_cli_grow_fds:
    # no doubling later, each an RCU grace period's stall): the kernel's
    # table holds what RLIMIT_NOFILE allows, up to 65536 (it was 256)
    want=$(ulimit -n)
    { [ "$want" = unlimited ] || [ "$want" -gt 65536 ]; } && want=65536
    fdsize=$(awk '/^FDSize:/ {print $2}' /proc/$rpid/status)
    [ "${fdsize:-0}" -ge "$want" ] && ok "$be: descriptor table grown at start ($fdsize)" ||
        bad "$be: descriptor table at start: FDSize ${fdsize:-?}, want >= $want"
    cli() { timeout 20 redis-cli -p "$port" "$@" 2>&1; }
    expect "$be: PING" PONG "$(cli PING)"
    expect "$be: PING msg" hello "$(cli PING hello)"
    expect "$be: ECHO" "a b" "$(cli ECHO 'a b')"
    expect "$be: SET" OK "$(cli SET k1 v1)"
    expect "$be: GET" v1 "$(cli GET k1)"
    expect "$be: GET missing" "" "$(cli GET nosuch)"
    expect "$be: INCR new" 1 "$(cli INCR n)"
    expect "$be: INCR" 2 "$(cli INCR n)"
    expect "$be: INCR not integer" "ERR value is not an integer or out of range" "$(cli INCR k1)"
    expect "$be: DEL" 2 "$(cli DEL k1 n nosuch)"
    expect "$be: GET deleted" "" "$(cli GET k1)"
    expect "$be: arity" "ERR wrong number of arguments for 'get' command" "$(cli GET)"
    expect "$be: unknown" "ERR unknown command 'FOO', with args beginning with: 'x' " "$(cli FOO x)"
    # binary-safe values through redis-cli -x (stdin as the last argument)
    head -c 100000 /dev/urandom > "$tmp/blob"
    cli -x SET blob < "$tmp/blob" > /dev/null
    timeout 20 redis-cli -p "$port" --no-raw GET blob > /dev/null 2>&1
    # pipelining: 10000 commands in one stream, every reply in order
    for i in $(seq 10000); do printf 'SET key:%d %d\r\n' "$i" "$i"; done > "$tmp/pipe"
    expect "$be: --pipe 10000 SETs" "errors: 0, replies: 10000" \
        "$(timeout 30 redis-cli -p "$port" --pipe < "$tmp/pipe" | grep -o 'errors: [0-9]*, replies: [0-9]*')"
    # every acknowledged SET is there
    for i in 1 777 5000 10000; do expect "$be: GET key:$i" "$i" "$(cli GET key:$i)"; done
    # redis-benchmark, real load: no error, every request answered
    if out=$(timeout 120 redis-benchmark -p "$port" -t ping_inline,set,get,incr -n 20000 -c 50 -P 16 -q 2>&1) &&
       [ "$(echo "$out" | grep -c 'requests per second')" = 4 ]; then
        ok "$be: redis-benchmark -P 16 ($(echo "$out" | tr '\r' '\n' | grep -c 'per second') tests)"
    else
        bad "$be: redis-benchmark: $out"
    fi
    if timeout 120 redis-benchmark -p "$port" -t set,get -n 20000 -c 200 -q > "$tmp/b2" 2>&1; then
        ok "$be: redis-benchmark 200 clients"
    else
        bad "$be: redis-benchmark 200 clients: $(cat "$tmp/b2")"
    fi
    # malformed input: an error reply, then the connection closes
    got=$(printf '*1\r\n$abc\r\n' | timeout 5 nc -q 2 127.0.0.1 "$port" | tr -d '\r')
    expect "$be: bad bulk length" "-ERR Protocol error: invalid bulk length" "$got"
    got=$(printf '*99999999999\r\n' | timeout 5 nc -q 2 127.0.0.1 "$port" | tr -d '\r')
    expect "$be: bad multibulk" "-ERR Protocol error: invalid multibulk length" "$got"
    got=$(printf 'SET "abc def\r\n' | timeout 5 nc -q 2 127.0.0.1 "$port" | tr -d '\r')
    expect "$be: unbalanced quotes" "-ERR Protocol error: unbalanced quotes in request" "$got"
    got=$( (head -c 70000 /dev/zero | tr '\0' a; printf '\r\n') | timeout 5 nc -q 2 127.0.0.1 "$port" | tr -d '\r')
    expect "$be: inline too big" "-ERR Protocol error: too big inline request" "$got"
    head -c 2000000 /dev/urandom > "$tmp/junk"
    timeout 10 nc -q 1 127.0.0.1 "$port" < "$tmp/junk" > /dev/null 2>&1
    # a client that resets mid-request
    python3 - "$port" <<'EOF'
import socket, struct, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\n$100000\r\nabc")
s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
s.close()
EOF
    # a client that writes 100 MB of PINGs before it reads a reply: the
    # backlog is executed 256 KiB of replies at a time, and between them the
    # thread's other connections are served (once a side client waited for
    # the whole drain, and the drain moved the rest of the backlog for each
    # batch: 1.6 s of CPU for 100 MB)
    got=$(timeout 120 python3 - "$port" <<'PY'
import socket, sys, threading, time
port = int(sys.argv[1])
side = socket.create_connection(("127.0.0.1", port), timeout=60)
c = socket.create_connection(("127.0.0.1", port), timeout=60)
chunk = b"PING\r\n" * 100000
for i in range(170):
    c.sendall(chunk)
want = 170 * 100000 * len(b"+PONG\r\n")
time.sleep(0.3)
lat = []
def ping():
    t = time.time()
    side.sendall(b"PING\r\n")
    lat.append(time.time() - t if side.recv(16) == b"+PONG\r\n" else 1e9)
t0 = time.time()
th = threading.Thread(target=ping)
th.start()
got = 0
while got < want:
    d = c.recv(1 << 22)
    if not d:
        break
    got += len(d)
drain = time.time() - t0
th.join()
print("ok" if got == want and lat[0] < 0.5 * drain else
      "bad: %d of %d bytes, side PING %.3f s, drain %.3f s" % (got, want, lat[0], drain))
PY
)
    expect "$be: a 100 MB pipeline: every reply, others served meanwhile" ok "$got"
    # a command of a million arguments: the connection, idle after it, does
    # not keep its 16 MiB of argv (8 connections once held 130 MiB); on a
    # server of its own, whose memory no earlier client freed for reuse
    mport=$(free_port)
    if start_server "$mport" "$OUT/aco_resp" --port "$mport" --backend "$be" 2> "$tmp/resp-mem.log"; then
        got=$(timeout 60 python3 - "$mport" "$SERVER_PID" <<'PY'
import socket, sys, time
port, pid = int(sys.argv[1]), sys.argv[2]
def rss():
    return int([l for l in open("/proc/%s/status" % pid) if l.startswith("VmRSS")][0].split()[1]) >> 10
n = 1 << 20
cmd = b"*%d\r\n$3\r\nDEL\r\n" % n + b"$1\r\nx\r\n" * (n - 1)
r0, socks = rss(), []
for i in range(8):
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.sendall(cmd + b"PING\r\n")
    got = b""
    while len(got) < 11:
        got += s.recv(100)
    if got != b":0\r\n+PONG\r\n":
        print("bad reply %r" % got)
    socks.append(s)
time.sleep(0.3)
grown = rss() - r0
print("ok" if grown < 40 else "bad: %d MiB more with 8 idle connections" % grown)
PY
)
        expect "$be: a million-argument command: its argv not kept by the idle connection" ok "$got"
        stop_pid "$SERVER_PID"
    else bad "$be: aco_resp (memory) did not start: $(cat "$tmp/resp-mem.log")"; fi
    expect "$be: alive after bad clients" PONG "$(cli PING)"
    expect "$be: QUIT" OK "$(cli QUIT)"
    kill -0 $rpid 2>/dev/null && ok "$be: aco_resp still running" || bad "$be: aco_resp died: $(cat "$tmp/resp-$be.log")"
    stop_and_restart "$be" "$rpid" "$tmp/resp-$be.log" --backend "$be"
    # SIGTERM while such a backlog drains stops the server then, not after
    # the drain (it once waited 18 s: the draining co never let the stop's
    # co run)
    port=$(free_port)
    if start_server "$port" "$OUT/aco_resp" --port "$port" --backend "$be" 2> "$tmp/resp-term.log"; then
        rpid=$SERVER_PID
        got=$(timeout 120 python3 - "$port" "$rpid" <<'PY'
import os, signal, socket, sys
c = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=60)
for i in range(300):
    c.sendall(b"PING\r\n" * 100000)
want = 300 * 100000 * len(b"+PONG\r\n")
got = 0
sent = False
while True:
    try:
        d = c.recv(1 << 22)
    except ConnectionResetError:
        break
    if not d:
        break
    got += len(d)
    if not sent and got > want // 8:
        os.kill(int(sys.argv[2]), signal.SIGTERM)
        sent = True
print("early" if got < want else "after the drain")
PY
)
        wait "$rpid"
        st=$?
        forget_pid "$rpid"
        expect "$be: SIGTERM during a 200 MB drain: stopped early, status 0" "early 0" "$got $st"
    else
        bad "$be: aco_resp (SIGTERM during a drain) did not start"
    fi

    # ---- aco_echo with nc -------------------------------------------------
    port=$(free_port)
    start_server "$port" "$OUT/aco_echo" --port "$port" --backend "$be" 2> "$tmp/echo-$be.log" ||
        { bad "$be: aco_echo did not start"; continue; }
    epid=$SERVER_PID
    head -c 5000000 /dev/urandom > "$tmp/e.in"
    timeout 30 nc -N 127.0.0.1 "$port" < "$tmp/e.in" > "$tmp/e.out"
    if cmp -s "$tmp/e.in" "$tmp/e.out"; then ok "$be: aco_echo echoes 5 MB to nc"; else bad "$be: aco_echo: output differs"; fi
    # clients that send 64 KiB and leave without reading: the server's
    # writes meet a closed peer (EPIPE, never SIGPIPE: it must live on)
    timeout 60 python3 - "$port" <<'PY'
import socket, sys
for i in range(300):
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
    s.sendall(b"x" * 65536)
    s.close()
PY
    sleep 0.5
    if kill -0 $epid 2>/dev/null; then ok "$be: aco_echo lives through 300 clients that leave unread"
    else wait $epid; bad "$be: aco_echo died (status $?) of clients that leave unread"; fi
    timeout 30 nc -N 127.0.0.1 "$port" < "$tmp/e.in" > "$tmp/e.out"
    if cmp -s "$tmp/e.in" "$tmp/e.out"; then ok "$be: aco_echo echoes 5 MB after them"; else bad "$be: aco_echo: output differs after them"; fi
    stop_pid $epid

    # ---- aco_nc: to itself and to/from OpenBSD nc --------------------------
    head -c 30000000 /dev/urandom > "$tmp/n.in"
    # (aco_nc -l takes one connection: no wait_port probe, a pause)
    port=$(free_port)
    timeout 60 "$OUT/aco_nc" --backend "$be" -l "$port" > "$tmp/n.out" < /dev/null &
    lpid=$!
    sleep 0.3
    timeout 60 "$OUT/aco_nc" --backend "$be" 127.0.0.1 "$port" < "$tmp/n.in" > /dev/null
    wait $lpid
    if cmp -s "$tmp/n.in" "$tmp/n.out"; then ok "$be: aco_nc -> aco_nc 30 MB (file stdin)"; else bad "$be: aco_nc -> aco_nc differs"; fi
    port=$(free_port)
    timeout 60 nc -l 127.0.0.1 "$port" > "$tmp/n2.out" < /dev/null &
    lpid=$!
    sleep 0.3
    cat "$tmp/n.in" | timeout 60 "$OUT/aco_nc" --backend "$be" 127.0.0.1 "$port" > /dev/null
    wait $lpid
    if cmp -s "$tmp/n.in" "$tmp/n2.out"; then ok "$be: aco_nc (pipe stdin) -> nc"; else bad "$be: aco_nc -> nc differs"; fi
    port=$(free_port)
    timeout 60 "$OUT/aco_nc" --backend "$be" -l "$port" < /dev/null | cat > "$tmp/n3.out" &
    lpid=$!
    sleep 0.3
    timeout 60 nc -N 127.0.0.1 "$port" < "$tmp/n.in"
    wait $lpid
    if cmp -s "$tmp/n.in" "$tmp/n3.out"; then ok "$be: nc -> aco_nc (pipe stdout)"; else bad "$be: nc -> aco_nc differs"; fi
    # stdout a file opened for appending (splice refuses it): after what it held
    port=$(free_port)
    echo head > "$tmp/n4.out"
    timeout 60 "$OUT/aco_nc" --backend "$be" -l "$port" < /dev/null >> "$tmp/n4.out" &
    lpid=$!
    sleep 0.3
    timeout 60 nc -N 127.0.0.1 "$port" < "$tmp/n.in"
    wait $lpid
    if cmp -s <(echo head; cat "$tmp/n.in") "$tmp/n4.out"; then ok "$be: nc -> aco_nc (stdout appended to)"
    else bad "$be: nc -> aco_nc >> file differs"; fi

    # ---- started without stdio, odd ends, the kernel's port -----------------
    # stdin closed: the runtime's eventfd took fd 0 and aco_nc read it as
    # stdin, never ending; with all three closed its error text went to the
    # peer (the socket was fd 2)
    for closed in "<&-" "<&- >&- 2>&-"; do
        port=$(free_port)
        timeout 20 python3 - "$port" > "$tmp/peer.out" <<'PY' &
import socket, sys
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("127.0.0.1", int(sys.argv[1]))); l.listen(1)
c, _ = l.accept(); c.sendall(b"x" * 100); c.settimeout(5); d = b""
while True:
    b = c.recv(1000)
    if not b: break
    d += b
print(len(d))
PY
        ppid=$!
        wait_until 100 0.05 $ppid port_listening "$port" || true   # (no probe: one accept)
        eval "timeout 10 \"$OUT/aco_nc\" --backend $be 127.0.0.1 $port > /dev/null $closed"
        st=$?
        wait $ppid
        expect "$be: aco_nc $closed: exit status, the peer's EOF and bytes" "0 0" "$st $(cat "$tmp/peer.out")"
    done
    # aco_echo without stdio: the listening socket was fd 2 and its first
    # message killed it with SIGPIPE
    port=$(free_port)
    "$OUT/aco_echo" --port "$port" --backend "$be" <&- >&- 2>&- &
    epid=$!
    PIDS+=("$epid")
    if wait_port "$port" $epid && [ "$(printf hi | timeout 5 nc -N 127.0.0.1 "$port")" = hi ]; then
        ok "$be: aco_echo started without stdio echoes"
    else bad "$be: aco_echo started without stdio did not serve"; fi
    stop_pid $epid
    # --port 0: the port the kernel gave is the one said; an idle timeout
    "$OUT/aco_echo" --port 0 --backend "$be" --idle-timeout-ms 300 2> "$tmp/e0.log" &
    epid=$!
    PIDS+=("$epid")
    wait_until 100 0.05 $epid grep -q listening "$tmp/e0.log" || true
    port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\) .*/\1/p' "$tmp/e0.log")
    if [ -n "$port" ] && [ "$port" != 0 ] && [ "$(printf hi | timeout 5 nc -N 127.0.0.1 "$port")" = hi ]; then
        ok "$be: aco_echo --port 0 says the port it listens on"
    else bad "$be: aco_echo --port 0: '$(cat "$tmp/e0.log")'"; fi
    t0=$(date +%s%N)
    [ -n "$port" ] && timeout 10 nc 127.0.0.1 "$port" < /dev/null > /dev/null 2>&1
    ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    [ $ms -ge 250 ] && [ $ms -lt 5000 ] && ok "$be: aco_echo --idle-timeout-ms 300 closed a silent client ($ms ms)" ||
        bad "$be: aco_echo --idle-timeout-ms 300: a silent client lasted $ms ms"
    stop_pid $epid
    # aco_nc -l on IPv6 and on a name (it took IPv4 literals only)
    for a in ::1 localhost; do
        [ $a = ::1 ] && ! grep -qs . /proc/net/if_inet6 && { echo "skip $be: aco_nc -l ::1 (no IPv6)"; continue; }
        port=$(free_port)
        timeout 20 "$OUT/aco_nc" --backend "$be" -l "$port" "$a" < /dev/null > "$tmp/l6.out" 2> "$tmp/l6.err" &
        lpid=$!
        wait_until 200 0.05 $lpid port_listening "$port" || true
        printf 'over %s' "$a" | timeout 5 nc -N "$a" "$port" 2>/dev/null
        wait $lpid
        expect "$be: aco_nc -l PORT $a" "over $a" "$(cat "$tmp/l6.out")$(cat "$tmp/l6.err")"
    done
    # a reset ends aco_nc although stdin stays open (it waited for stdin's end)
    port=$(free_port)
    timeout 20 python3 - "$port" <<'PY' &
import socket, struct, sys, time
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("127.0.0.1", int(sys.argv[1]))); l.listen(1)
c, _ = l.accept(); c.sendall(b"hello\n"); time.sleep(0.2)
c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)); c.close()
PY
    ppid=$!
    wait_until 100 0.05 $ppid port_listening "$port" || true   # (no probe: one accept)
    t0=$(date +%s%N)
    timeout 20 "$OUT/aco_nc" --backend "$be" 127.0.0.1 "$port" < <(exec sleep 20) > /dev/null 2> "$tmp/rst.err"
    st=$?
    ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    wait $ppid
    [ $st = 1 ] && [ $ms -lt 5000 ] && grep -q "reset" "$tmp/rst.err" && ! grep -q sending "$tmp/rst.err" &&
        ok "$be: aco_nc ends at a reset, stdin still open ($ms ms)" ||
        bad "$be: aco_nc at a reset: status $st after $ms ms, '$(cat "$tmp/rst.err")'"
    # stdout's reader gone: that direction ends, stdin still goes whole
    port=$(free_port)
    head -c 2000000 /dev/urandom > "$tmp/up.in"
    timeout 30 python3 - "$port" > "$tmp/up.got" <<'PY' &
import socket, sys, threading
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("127.0.0.1", int(sys.argv[1]))); l.listen(1)
c, _ = l.accept()
def pour():
    try: c.sendall(b"y" * 20000000)
    except OSError: pass
threading.Thread(target=pour, daemon=True).start()
n = 0
try:        # (its close, our 20 MB unread, is a reset: after all it sent)
    while True:
        b = c.recv(1 << 16)
        if not b: break
        n += len(b)
except ConnectionResetError:
    pass
print(n)
PY
    ppid=$!
    wait_until 100 0.05 $ppid port_listening "$port" || true   # (no probe: one accept)
    timeout 20 "$OUT/aco_nc" --backend "$be" 127.0.0.1 "$port" < <(cat "$tmp/up.in") 2> /dev/null | head -c 1 > /dev/null
    wait $ppid
    expect "$be: aco_nc | head -c 1: stdin still sent whole" 2000000 "$(cat "$tmp/up.got")"
    # stdout a device without splice: write's own error (splice said EINVAL)
    port=$(free_port)
    timeout 20 python3 -c 'import socket,sys
l=socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("127.0.0.1", int(sys.argv[1]))); l.listen(1); c,_=l.accept(); c.sendall(b"x"*10000); c.close()' "$port" &
    ppid=$!
    wait_until 100 0.05 $ppid port_listening "$port" || true   # (no probe: one accept)
    timeout 10 "$OUT/aco_nc" --backend "$be" 127.0.0.1 "$port" < /dev/null > /dev/full 2> "$tmp/full.err"
    st=$?
    wait $ppid
    [ $st = 1 ] && grep -q "No space left on device" "$tmp/full.err" && ok "$be: aco_nc > /dev/full: ENOSPC, said" ||
        bad "$be: aco_nc > /dev/full: status $st, '$(cat "$tmp/full.err")'"
done
# ---- threads: aco_resp and aco_echo with --threads 2, both accept modes ----
for mode in reuseport handoff; do
    port=$(free_port)
    start_server "$port" "$OUT/aco_resp" --port "$port" --threads 2 --accept $mode 2> "$tmp/resp-t2.log" ||
        { bad "threads $mode: aco_resp did not start: $(cat "$tmp/resp-t2.log")"; continue; }
    rpid=$SERVER_PID
    cli() { timeout 20 redis-cli -p "$port" "$@" 2>&1; }
    expect "threads $mode: PING" PONG "$(cli PING)"
    # INCRs from 4 connections at once (on both threads): none lost
    for i in $(seq 5000); do printf 'INCR counter\r\n'; done > "$tmp/incr"
    cpids=()
    for c in 1 2 3 4; do timeout 60 redis-cli -p "$port" --pipe < "$tmp/incr" > "$tmp/incr.$c" & cpids+=($!); done
    wait_ok=1
    for c in "${cpids[@]}"; do wait "$c" || wait_ok=0; done
    expect "threads $mode: 4 x 5000 INCR from 4 clients" 20000 "$(cli GET counter)"
    for c in 1 2 3 4; do grep -q 'errors: 0, replies: 5000' "$tmp/incr.$c" || wait_ok=0; done
    [ $wait_ok = 1 ] && ok "threads $mode: every INCR answered" || bad "threads $mode: --pipe: $(cat "$tmp"/incr.*)"
    if out=$(timeout 120 redis-benchmark -p "$port" -t set,get,incr -n 50000 -c 50 -P 16 -q 2>&1) &&
       [ "$(echo "$out" | tr '\r' '\n' | grep -c 'requests per second')" -ge 3 ]; then
        ok "threads $mode: redis-benchmark -c 50 -P 16"
    else
        bad "threads $mode: redis-benchmark: $out"
    fi
    expect "threads $mode: SET" OK "$(cli SET k v)"
    expect "threads $mode: GET from another connection" v "$(cli GET k)"
    kill -0 $rpid 2>/dev/null && ok "threads $mode: aco_resp still running" || bad "threads $mode: aco_resp died: $(cat "$tmp/resp-t2.log")"
    stop_and_restart "threads $mode" "$rpid" "$tmp/resp-t2.log" --threads 2 --accept $mode

    port=$(free_port)
    start_server "$port" "$OUT/aco_echo" --port "$port" --threads 2 --accept $mode 2> "$tmp/echo-t2.log" ||
        { bad "threads $mode: aco_echo did not start"; continue; }
    epid=$SERVER_PID
    head -c 1000000 /dev/urandom > "$tmp/e1.in"
    cpids=()
    for c in $(seq 20); do timeout 60 nc -N 127.0.0.1 "$port" < "$tmp/e1.in" > "$tmp/e1.out.$c" & cpids+=($!); done
    wait "${cpids[@]}"
    same=0
    for c in $(seq 20); do cmp -s "$tmp/e1.in" "$tmp/e1.out.$c" && same=$((same + 1)); done
    expect "threads $mode: aco_echo echoes 1 MB to 20 nc at once" 20 "$same"
    stop_pid $epid
done
# Out of descriptors: aco_echo under RLIMIT_NOFILE 64 and 100 clients
# that stay: the refused accepts are said on stderr, once (a line in 10 s
# at most), the connections it has are served, and once the clients leave
# a new one is served too.
for be in $backends; do
    port=$(free_port)
    start_server "$port" prlimit --nofile=64 "$OUT/aco_echo" --port "$port" --backend "$be" \
        2> "$tmp/emfile-$be.log" || { bad "$be: aco_echo (64 descriptors) did not start"; continue; }
    epid=$SERVER_PID
    got=$(timeout 60 python3 - "$port" <<'PY'
import socket, sys, time
port = int(sys.argv[1])
held = []
for i in range(100):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    held.append(s)
time.sleep(1.0)
first = held[0]                     # accepted before the table filled
first.sendall(b"ping")
first.settimeout(10)
a = first.recv(16)
for s in held:
    s.close()
time.sleep(0.5)                     # the server closes its ends
s = socket.create_connection(("127.0.0.1", port), timeout=10)
s.settimeout(10)
s.sendall(b"again")
b = b""
while len(b) < 5:
    c = s.recv(16)
    if not c:
        break
    b += c
print(a.decode(), b.decode())
PY
)
    expect "$be: 64 descriptors, 100 clients: served, then a new one" "ping again" "$got"
    n=$(grep -c 'accept: Too many open files: new connections wait' "$tmp/emfile-$be.log")
    [ "$n" = 1 ] && ok "$be: out of descriptors said once on stderr" ||
        bad "$be: out of descriptors: $n lines: $(head -c 500 "$tmp/emfile-$be.log")"
    stop_pid "$epid"
done
echo "check_rt_servers: $fails failed"
[ $fails = 0 ]
