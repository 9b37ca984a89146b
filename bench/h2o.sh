# h2o.sh - Debian's h2o (2.2.5) as a peer, unprivileged, from a generated
# config in a directory of its own (sourced like bench/nginx.sh).
#
#   h2o_start DIR ROOT PORT [CPU]   then $H2O_PID
#   h2o_stop
#
# h2o at its best for static files to keep-alive clients on one CPU:
# num-threads 1 (the default is an event loop per online CPU, here all
# sharing the one CPU of taskset; with h2o's defaults, 4 KiB measured ~10%
# dearer a request, near this VM's noise);
# max-connections 4096 (the default 1024 would do for wrk's 100; nginx has
# 4096); http1-request-timeout 75 s, nginx's keepalive_timeout (the default
# 10 s is how long an idle keep-alive connection waits; h2o has no cap of
# requests per connection, nothing to match keepalive_requests); no
# access-log (h2o logs only where one is named); send-server-name OFF (one
# header less); compress and file.send-compressed unset (off: no gzip, no
# stat of a .gz beside each file); ssl-session-resumption mode off (no TLS
# here: it stops the thread h2o starts anyway to rotate session-ticket keys,
# so one thread is all).  ETags stay on, as nginx's (file.etag OFF gained
# nothing measurable).  h2o 2.2.5 has no sendfile and no file cache to tune:
# it pread()s a file into a 65000-byte buffer and writev()s that (1 MiB is
# 17 of them: a copy more than nginx's sendfile), and keeps each file it
# opens open until the end of that event-loop round, always (its capacity is
# not a directive).  Its sockets have TCP_NODELAY; tcp-fastopen (on by
# default) plays no part with wrk.
#
# The process: -m worker (the default; master mode is a perl start_server
# in front) is one process serving on its threads: $H2O_PID, $! itself
# (taskset execs h2o), its utime+stime the server's.  Its one child, the
# perl crash handler (share/h2o/annotate-backtrace-symbols), spawned at
# start, only reads a pipe until h2o exits, and then exits too.
# Run by root, h2o switches to "nobody" unless told, who cannot read a
# mktemp -d directory: it stays root then (user: root).  The error log and
# pid file in DIR.

h2o_start() {
    local dir=$1 root=$2 port=$3 cpu=${4:-} user=""
    [ "$(id -u)" = 0 ] && user="user: root"
    mkdir -p "$dir"
    cat > "$dir/h2o.conf" <<EOF
$user
num-threads: 1
max-connections: 4096
http1-request-timeout: 75
send-server-name: OFF
ssl-session-resumption:
  mode: off
error-log: $dir/error.log
pid-file: $dir/h2o.pid
listen:
  host: 127.0.0.1
  port: $port
hosts:
  default:
    paths:
      /:
        file.dir: $root
EOF
    local pin=()
    [ -n "$cpu" ] && pin=(taskset -c "$cpu")
    "${pin[@]}" h2o -m worker -c "$dir/h2o.conf" >> "$dir/error.log" 2>&1 &
    H2O_PID=$!
    local i
    # its own "ready" line first: another server on PORT would accept too
    for i in $(seq 100); do
        grep -q "(pid:$H2O_PID) is ready" "$dir/error.log" 2>/dev/null &&
            (exec 3<>/dev/tcp/127.0.0.1/"$port") 2>/dev/null && return 0
        kill -0 "$H2O_PID" 2>/dev/null || break
        sleep 0.05
    done
    echo "h2o did not start: $(tail -3 "$dir/error.log")"
    h2o_stop
    return 1
}

h2o_stop() {
    [ -n "${H2O_PID:-}" ] || return 0
    kill -TERM "$H2O_PID" 2>/dev/null   # graceful: waits for open connections
    local i
    for i in $(seq 50); do kill -0 "$H2O_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$H2O_PID" 2>/dev/null
    wait "$H2O_PID" 2>/dev/null
    H2O_PID=""
}
