#!/usr/bin/env bash
# check_tls.sh - HTTPS from output/aco_http (--tls-cert, --tls-key: TLS
# over libaco_rt_tls) with real clients and misbehaving ones, on both
# backends:
#   curl           GET of a 4 KiB and a 3 MiB file byte-exact, three on
#                  one connection (keep-alive), HEAD, a range, a 404,
#                  HTTP/1.1 chosen by ALPN; the certificate checked
#                  against the test's CA and the name localhost;
#   openssl        s_client: ALPN http/1.1, TLS 1.3, a session resumed
#                  from its ticket (-sess_out, -sess_in); a client that
#                  really offers TLS 1.0 (security level 0) refused; a
#                  TLS 1.2 client's renegotiation refused;
#   aco_nc --tls   our own client over aco_rt_tls: a file byte-exact; the
#                  same server refused without the CA (unknown issuer) and
#                  under a wrong name;
#   python3        garbage instead of a ClientHello; a ClientHello trickled
#                  byte by byte (the handshake deadline,
#                  --tls-handshake-timeout-ms, ends it); clients that leave
#                  mid-handshake and mid-record; a request then a stream
#                  cut without close_notify; a request whose body comes in
#                  a record of the size limit (16 KiB); requests pipelined,
#                  each a record of its own, all arriving at once (OpenSSL
#                  reads them ahead: none may wait for the socket); a
#                  kept-alive connection idle between requests (aco_http
#                  gives its buffers back then) asking again.
# After the misbehaving clients the server still serves, and holds no
# descriptor more than before them.  Exit status: the verdict.
set -uo pipefail
cd "$(dirname "$0")/.."
. tests/lib.sh
OUT=${OUTPUT:-output}
need_built aco_http aco_nc
for c in curl openssl python3; do
    command -v $c > /dev/null || { echo "check_tls: $c not found: install it"; exit 1; }
done
tmp=$(mktemp -d)
trap cleanup_tmp EXIT
fails=0
HANDSHAKE_MS=600

# A CA of the test's own, and the server's certificate for localhost.
(
    cd "$tmp" &&
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key \
        -out ca.pem -days 30 -subj /CN=check_tls-ca &&
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout key.pem \
        -out srv.csr -subj /CN=localhost &&
    printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' > ext &&
    openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 30 \
        -extfile ext -out cert.pem
) > "$tmp/openssl.log" 2>&1 || { cat "$tmp/openssl.log"; echo "check_tls: openssl cannot make the certificates"; exit 1; }
root=$tmp/root
mkdir -p "$root"
head -c 4096 /dev/urandom > "$root/small.bin"
head -c 3145728 /dev/urandom > "$root/large.bin"

# The misbehaving clients: python3 bad.py <port> <case>; prints one line.
cat > "$tmp/bad.py" << 'EOF'
import socket, ssl, sys, time
port, case = int(sys.argv[1]), sys.argv[2]
def ctx():
    c = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    c.check_hostname = False
    c.verify_mode = ssl.CERT_NONE
    return c
def conn():
    return socket.create_connection(("127.0.0.1", port), timeout=10)
def until_closed(s, limit):
    """Seconds until the server closes s (EOF or reset), or None."""
    t0 = time.monotonic()
    s.settimeout(limit)
    try:
        while s.recv(4096):
            pass
    except (ConnectionResetError, BrokenPipeError):
        pass
    except socket.timeout:
        return None
    return time.monotonic() - t0
def pump(o, s, inc, out):
    """A handshake over a raw socket with an SSLObject."""
    while True:
        try:
            o.do_handshake()
            s.sendall(out.read())
            return
        except ssl.SSLWantReadError:
            s.sendall(out.read())
            d = s.recv(65536)
            if not d:
                raise SystemExit("closed in the handshake")
            inc.write(d)
def client_hello():
    """A real client's first flight (its ClientHello), never followed."""
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    o = ctx().wrap_bio(inc, out, server_hostname="localhost")
    try:
        o.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return out.read()
if case == "garbage":
    s = conn()
    s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" * 4)
    t = until_closed(s, 5)
    print("closed" if t is not None else "still open")
elif case == "trickle":
    hello = client_hello()
    s = conn()
    t0 = time.monotonic()
    try:
        for b in hello:
            s.sendall(bytes([b]))
            time.sleep(0.05)
        print("sent all %d bytes in %.1fs without being closed" % (len(hello), time.monotonic() - t0))
    except (ConnectionResetError, BrokenPipeError):
        print("closed after %.2f" % (time.monotonic() - t0))
        sys.exit(0)
    t = until_closed(s, 10)
    print("closed after %.2f" % (time.monotonic() - t0) if t is not None else "still open")
elif case == "half_hello":
    hello = client_hello()
    s = conn()
    s.sendall(hello[: len(hello) // 2])
    s.close()
    print("left")
elif case == "mid_handshake":
    # the server's flight read, ours never sent
    s = conn()
    s.sendall(client_hello())
    s.recv(65536)
    s.close()
    print("left")
elif case == "mid_record":
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    o = ctx().wrap_bio(inc, out, server_hostname="localhost")
    s = conn()
    pump(o, s, inc, out)
    o.write(b"GET /small.bin HTTP/1.1\r\nHost: x\r\n\r\n")
    rec = out.read()
    s.sendall(rec[: len(rec) // 2])
    time.sleep(0.05)
    s.close()
    print("left")
elif case == "truncated":
    s = ctx().wrap_socket(conn(), server_hostname="localhost")
    s.sendall(b"GET /small.bin HTTP/1.1\r\nHost: x\r\n\r\n")
    got = b""
    while b"\r\n\r\n" not in got or len(got) < got.find(b"\r\n\r\n") + 4 + 4096:
        d = s.recv(65536)
        if not d:
            break
        got += d
    s.close()       # no close_notify
    print("read %d bytes, cut" % len(got))
elif case in ("pipelined", "idle"):
    # pipelined: 6 requests, one record each, in one send; idle: 3, a
    # pause after each answer; every response read and checked
    want = open(sys.argv[3], "rb").read()
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    o = ctx().wrap_bio(inc, out, server_hostname="localhost")
    s = conn()
    pump(o, s, inc, out)
    n = 6 if case == "pipelined" else 3
    req = b"GET /small.bin HTTP/1.1\r\nHost: x\r\n\r\n"
    def read_some():
        while True:
            try:
                return o.read(65536)
            except ssl.SSLWantReadError:
                d = s.recv(65536)
                if not d:
                    raise SystemExit("closed after %d responses" % done)
                inc.write(d)
    buf, done = b"", 0
    for i in range(n if case == "pipelined" else 1):
        o.write(req)
    s.sendall(out.read())
    while done < n:
        while b"\r\n\r\n" not in buf or len(buf) < buf.index(b"\r\n\r\n") + 4 + len(want):
            buf += read_some()
        h = buf.index(b"\r\n\r\n") + 4
        if not buf.startswith(b"HTTP/1.1 200") or buf[h:h + len(want)] != want:
            raise SystemExit("response %d: %r" % (done, buf[:40]))
        buf, done = buf[h + len(want):], done + 1
        if case == "idle" and done < n:
            time.sleep(0.3)
            o.write(req)
            s.sendall(out.read())
    print("%d responses byte-exact" % done)
elif case == "big_record":
    s = ctx().wrap_socket(conn(), server_hostname="localhost")
    s.sendall(b"GET /small.bin HTTP/1.1\r\nHost: x\r\nContent-Length: 16384\r\nConnection: close\r\n\r\n")
    s.sendall(b"x" * 16384)     # one record of 16 KiB, the most a record holds
    got = b""
    while True:
        try:
            d = s.recv(65536)
        except ssl.SSLError:
            break
        if not d:
            break
        got += d
    print(got.split(b"\r\n")[0].decode())
EOF

# A renegotiation by openssl s_client (TLS 1.2): its "R" command.
reneg() {   # reneg <port>: prints what s_client says
    { printf 'R\n'; sleep 1; printf 'GET /small.bin HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'; sleep 1; } |
        timeout 10 openssl s_client -connect "127.0.0.1:$1" -tls1_2 -CAfile "$tmp/ca.pem" \
            -servername localhost 2>&1 | tr -d '\0'
}

fds_of() { ls "/proc/$1/fd" 2>/dev/null | wc -l; }
fds_at_most() { [ "$(fds_of "$1")" -le "$2" ]; }     # fds_at_most PID N

for be in ${ACO_RT_TEST_BACKENDS:-uring epoll}; do
    cfg=$be
    port=$(free_port)
    if ! start_server "$port" "$OUT/aco_http" --root "$root" --port "$port" --backend "$be" \
            --tls-cert "$tmp/cert.pem" --tls-key "$tmp/key.pem" \
            --tls-handshake-timeout-ms $HANDSHAKE_MS 2> "$tmp/server.log"; then
        bad "$cfg: aco_http did not start: $(cat "$tmp/server.log")"; continue
    fi
    pid=$SERVER_PID
    url=https://localhost:$port
    c=(curl -sS --cacert "$tmp/ca.pem")

    # curl
    if "${c[@]}" -o "$tmp/got" "$url/small.bin" && cmp -s "$tmp/got" "$root/small.bin"; then
        ok "$cfg: curl: 4 KiB byte-exact"; else bad "$cfg: curl: 4 KiB"; fi
    if "${c[@]}" -o "$tmp/got" "$url/large.bin" && cmp -s "$tmp/got" "$root/large.bin"; then
        ok "$cfg: curl: 3 MiB byte-exact"; else bad "$cfg: curl: 3 MiB"; fi
    got=$("${c[@]}" -o /dev/null -o /dev/null -o /dev/null -w '%{http_code}/%{num_connects}/%{http_version} ' \
          "$url/small.bin" "$url/large.bin" "$url/small.bin")
    [ "$got" = "200/1/1.1 200/0/1.1 200/0/1.1 " ] && ok "$cfg: curl: three requests on one connection, HTTP/1.1" ||
        bad "$cfg: curl keep-alive: '$got'"
    got=$("${c[@]}" -I -o /dev/null -w '%{http_code}' "$url/small.bin")
    [ "$got" = 200 ] && ok "$cfg: curl: HEAD" || bad "$cfg: curl HEAD: $got"
    got=$("${c[@]}" -r 10-19 -o "$tmp/got" -w '%{http_code}' "$url/large.bin")
    if [ "$got" = 206 ] && cmp -s "$tmp/got" <(tail -c +11 "$root/large.bin" | head -c 10); then
        ok "$cfg: curl: a range"; else bad "$cfg: curl range: $got"; fi
    got=$("${c[@]}" -o /dev/null -w '%{http_code}' "$url/nope")
    [ "$got" = 404 ] && ok "$cfg: curl: 404" || bad "$cfg: curl 404: $got"
    got=$(curl -sS -o /dev/null -w '%{http_code}' "$url/small.bin" 2>&1)
    case $got in *"certificate"*|*"issuer"*) ok "$cfg: curl without the CA refuses the server" ;;
                 *) bad "$cfg: curl without the CA: '$got'" ;; esac

    # openssl s_client
    out=$(printf 'GET /small.bin HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n' |
          timeout 10 openssl s_client -connect "127.0.0.1:$port" -alpn http/1.1 -CAfile "$tmp/ca.pem" \
              -servername localhost -verify_hostname localhost -sess_out "$tmp/sess" -ign_eof 2>&1 | tr -d '\0')
    case $out in *"ALPN protocol: http/1.1"*"Verify return code: 0 (ok)"*) ok "$cfg: s_client: ALPN http/1.1, verified" ;;
                 *) bad "$cfg: s_client: $(echo "$out" | grep -E 'ALPN|Verify|error' | head -3)" ;; esac
    case $out in *"TLSv1.3"*"HTTP/1.1 200 OK"*) ok "$cfg: s_client: TLS 1.3, 200" ;;
                 *) bad "$cfg: s_client: no TLS 1.3 200" ;; esac
    out=$(printf 'GET /small.bin HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n' |
          timeout 10 openssl s_client -connect "127.0.0.1:$port" -CAfile "$tmp/ca.pem" \
              -servername localhost -sess_in "$tmp/sess" -ign_eof 2>&1 | tr -d '\0')
    case $out in *"Reused, TLSv1.3"*) ok "$cfg: s_client: the session resumed from its ticket" ;;
                 *) bad "$cfg: s_client -sess_in: $(echo "$out" | grep -E '^(New|Reused)' | head -2)" ;; esac
    out=$(timeout 10 openssl s_client -connect "127.0.0.1:$port" -tls1 -cipher 'DEFAULT@SECLEVEL=0' \
              -servername localhost < /dev/null 2>&1 | tr -d '\0'); st=$?   # (pipefail)
    # (s_client says "Protocol : TLSv1", the version it tried, either way)
    if [ $st != 0 ] && grep -q "alert protocol version" <<< "$out" && grep -q "Cipher is (NONE)" <<< "$out"; then
        ok "$cfg: s_client offering TLS 1.0 (security level 0) refused: alert protocol version"
    else bad "$cfg: TLS 1.0: status $st: $(grep -E 'Protocol|alert|error' <<< "$out" | head -3)"; fi
    out=$(reneg "$port")
    if grep -q "RENEGOTIATING" <<< "$out" && ! grep -q "HTTP/1.1 200" <<< "$out"; then
        ok "$cfg: s_client's TLS 1.2 renegotiation refused: $(grep -oE 'no renegotiation|alert [a-z ]+' <<< "$out" | head -1)"
    else bad "$cfg: renegotiation: $(grep -E 'RENEGOTIATING|alert|HTTP/1.1|error' <<< "$out" | head -3)"; fi

    # aco_nc --tls, our own client
    req='GET /large.bin HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'
    printf "$req" | "$OUT/aco_nc" --backend "$be" --tls --tls-ca "$tmp/ca.pem" localhost "$port" > "$tmp/nc.out" 2> "$tmp/nc.err"
    if tail -c 3145728 "$tmp/nc.out" | cmp -s - "$root/large.bin" && head -1 "$tmp/nc.out" | grep -q "200 OK"; then
        ok "$cfg: aco_nc --tls: 3 MiB byte-exact"; else bad "$cfg: aco_nc --tls: $(head -c 200 "$tmp/nc.err")"; fi
    printf "$req" | "$OUT/aco_nc" --backend "$be" --tls localhost "$port" > /dev/null 2> "$tmp/nc.err"
    grep -q "certificate verify failed" "$tmp/nc.err" && ok "$cfg: aco_nc --tls without the CA: $(head -1 "$tmp/nc.err")" ||
        bad "$cfg: aco_nc --tls without the CA: $(head -c 200 "$tmp/nc.err")"
    printf "$req" | "$OUT/aco_nc" --backend "$be" --tls --tls-ca "$tmp/ca.pem" --tls-name wrong.example \
        127.0.0.1 "$port" > /dev/null 2> "$tmp/nc.err"
    grep -q "certificate verify failed" "$tmp/nc.err" && ok "$cfg: aco_nc --tls under a wrong name: $(head -1 "$tmp/nc.err")" ||
        bad "$cfg: aco_nc --tls, wrong name: $(head -c 200 "$tmp/nc.err")"

    # misbehaving clients
    fds0=$(fds_of "$pid")
    got=$(python3 "$tmp/bad.py" "$port" garbage 2>&1)
    [ "$got" = closed ] && ok "$cfg: garbage instead of a ClientHello: closed" || bad "$cfg: garbage: $got"
    got=$(python3 "$tmp/bad.py" "$port" trickle 2>&1)
    t=${got#closed after }
    if [ "$t" != "$got" ] && awk -v t="$t" -v d=$HANDSHAKE_MS 'BEGIN {exit !(t >= d / 1000 * 0.9 && t < d / 1000 + 2)}'; then
        ok "$cfg: a ClientHello trickled byte by byte: closed after ${t}s (--tls-handshake-timeout-ms $HANDSHAKE_MS)"
    else bad "$cfg: trickled ClientHello: $got"; fi
    for k in half_hello mid_handshake mid_record; do
        got=$(python3 "$tmp/bad.py" "$port" $k 2>&1)
        [ "$got" = left ] && ok "$cfg: a client that leaves ($k)" || bad "$cfg: $k: $got"
    done
    got=$(python3 "$tmp/bad.py" "$port" truncated 2>&1)
    case $got in "read "*", cut") ok "$cfg: a stream cut without close_notify after a response" ;;
                 *) bad "$cfg: truncated: $got" ;; esac
    got=$(python3 "$tmp/bad.py" "$port" pipelined "$root/small.bin" 2>&1)
    [ "$got" = "6 responses byte-exact" ] && ok "$cfg: 6 requests pipelined, a record each, in one send: $got" ||
        bad "$cfg: pipelined: $got"
    got=$(python3 "$tmp/bad.py" "$port" idle "$root/small.bin" 2>&1)
    [ "$got" = "3 responses byte-exact" ] && ok "$cfg: a kept-alive connection idle between requests: $got" ||
        bad "$cfg: idle between requests: $got"
    got=$(python3 "$tmp/bad.py" "$port" big_record 2>&1)
    [ "$got" = "HTTP/1.1 200 OK" ] && ok "$cfg: a body in a record of 16 KiB: 200" || bad "$cfg: big record: $got"
    # (the count read again at each try: a client's close may still be on its way)
    if wait_until 60 0.05 "$pid" fds_at_most "$pid" "$fds0"; then
        ok "$cfg: no descriptor kept ($fds0 open)"; else bad "$cfg: descriptors: $fds0 before, $(fds_of "$pid") after"; fi
    if "${c[@]}" -o "$tmp/got" "$url/small.bin" && cmp -s "$tmp/got" "$root/small.bin"; then
        ok "$cfg: still serving after them"; else bad "$cfg: not serving after the misbehaving clients"; fi
    if kill -0 "$pid" 2>/dev/null; then ok "$cfg: server alive at the end"
    else bad "$cfg: server died: $(cat "$tmp/server.log")"; fi
    stop_pid "$pid"
done
[ $fails = 0 ] && echo "check_tls: all passed" || echo "check_tls: $fails failed"
[ $fails = 0 ]
