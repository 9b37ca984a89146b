# nginx.sh - Debian's nginx as a peer, unprivileged, from a generated
# config in a directory of its own (sourced by bench/bench_http.sh and
# tests/check_http_chaos.sh).
#
#   nginx_start DIR ROOT PORT [CPU] [DIRECTIVES]   then $NGINX_WORKER, $NGINX_MASTER
#   nginx_stop DIR
#
# One worker process; the error log, pid file and temp paths in DIR;
# NGINX_LISTEN_OPTS (" ssl" for HTTPS) after the listen address;
# DIRECTIVES (for http {}) after the defaults, which are nginx at its best
# for static files: sendfile, tcp_nopush, access_log off,
# keepalive_requests raised from 1000 (each wrk connection would reconnect
# every 1000 requests), accept_mutex off (one worker: nothing to share),
# 4096 connections.  open_file_cache is the benchmark's to add (it keeps
# files open: a descriptor count would see them).  With CPU, started under taskset (the worker inherits it).
# Run by root, nginx would switch its worker to "nobody", who cannot read a
# mktemp -d directory: the worker stays root then.

nginx_start() {
    local dir=$1 root=$2 port=$3 cpu=${4:-} extra=${5:-} user=""
    [ "$(id -u)" = 0 ] && user="user root root;"
    mkdir -p "$dir/tmp"
    cat > "$dir/nginx.conf" <<EOF
$user
worker_processes 1;
error_log $dir/error.log;
events { worker_connections 4096; accept_mutex off; use epoll; }
http {
    access_log off;
    log_not_found off;
    types { }
    default_type application/octet-stream;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    keepalive_requests 1000000;
    client_body_temp_path $dir/tmp/body;
    proxy_temp_path $dir/tmp/proxy;
    fastcgi_temp_path $dir/tmp/fastcgi;
    uwsgi_temp_path $dir/tmp/uwsgi;
    scgi_temp_path $dir/tmp/scgi;
    $extra
    server {
        listen 127.0.0.1:$port${NGINX_LISTEN_OPTS:-};
        root $root;
    }
}
EOF
    local pin=()
    [ -n "$cpu" ] && pin=(taskset -c "$cpu")
    "${pin[@]}" nginx -e "$dir/error.log" -p "$dir" -c "$dir/nginx.conf" \
        -g "daemon off; pid $dir/nginx.pid;" 2>> "$dir/error.log" &
    NGINX_MASTER=$!
    NGINX_WORKER=""
    local i
    for i in $(seq 100); do
        NGINX_WORKER=$(cat /proc/$NGINX_MASTER/task/$NGINX_MASTER/children 2>/dev/null | awk '{print $1}')
        [ -n "$NGINX_WORKER" ] && (exec 3<>/dev/tcp/127.0.0.1/"$port") 2>/dev/null && return 0
        kill -0 $NGINX_MASTER 2>/dev/null || break
        sleep 0.05
    done
    echo "nginx did not start: $(tail -3 "$dir/error.log")"
    return 1
}

nginx_stop() {
    [ -n "${NGINX_MASTER:-}" ] || return 0
    kill -QUIT "$NGINX_MASTER" 2>/dev/null
    local i
    for i in $(seq 50); do kill -0 "$NGINX_MASTER" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$NGINX_MASTER" 2>/dev/null
    wait "$NGINX_MASTER" 2>/dev/null
    NGINX_MASTER=""
}
