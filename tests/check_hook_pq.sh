#!/usr/bin/env bash
# check_hook_pq.sh - the syscall hooks with libpq, PostgreSQL's client
# library, against a private cluster started here: hook_pq (see there) runs
# its queries in cos of one thread, by LD_PRELOAD of output/libaco_hook.so
# (output/libhook_count.so ahead of it, to count the hooked calls) and with
# the hooks linked in, on both backends: the queries overlap, every result
# is checked, a killed server ends each co's query with libpq's error, a
# cancelled co leaves PQexec at once.  The same program without the hooks
# must fail its overlap check (it proves the check can fail).  Exit status:
# the verdict.
set -uo pipefail
cd "$(dirname "$0")/.."
. tests/lib.sh
OUT=${OUTPUT:-output}
for p in libaco_hook.so libhook_count.so hook_pq hook_pq_linked; do
    [ -e "$OUT/$p" ] || { echo "check_hook_pq: $OUT/$p not built: install libpq-dev, then bash make.sh"; exit 1; }
done
# libpq reads PG* from the environment (PGSSLMODE, PGOPTIONS, ...): the
# connection is the one named below only.
unset $(compgen -e | grep '^PG')
# The server's programs: pg_config --bindir names the client's, which
# Debian keeps apart; the newest installed server wins.
pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -x "$pgbin/initdb" ] && [ -x "$pgbin/pg_ctl" ] ||
    { echo "check_hook_pq: no PostgreSQL server (initdb, pg_ctl) in /usr/lib/postgresql/*/bin: install postgresql"; exit 1; }
tmp=$(mktemp -d)
# PostgreSQL will not run as root: then the cluster is nobody's.
as_pg=()
if [ "$(id -u)" = 0 ]; then
    as_pg=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
    chown nobody:nogroup "$tmp"
fi
pg() { (cd "$tmp" && "${as_pg[@]}" "$pgbin/$1" "${@:2}"); }
trap 'pg pg_ctl -D "$tmp/data" -m immediate -w stop > /dev/null 2>&1; rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM HUP
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
# No fsync, trust on 127.0.0.1, room for a run's 50 clients and the
# backends of the run before it while they exit.
if ! pg initdb -D "$tmp/data" -U aco -A trust -E UTF8 --locale=C --no-sync > "$tmp/initdb.log" 2>&1 ||
   ! pg pg_ctl -D "$tmp/data" -l "$tmp/server.log" -w -t 30 -o "-c listen_addresses=127.0.0.1 -p $port \
        -c unix_socket_directories=$tmp -c fsync=off -c synchronous_commit=off -c max_connections=200" \
        start > /dev/null 2>&1; then
    echo "check_hook_pq: the cluster did not start:"
    cat "$tmp/initdb.log" "$tmp/server.log" 2>/dev/null | tail -20
    exit 1
fi
db="host=127.0.0.1 port=$port user=aco dbname=postgres connect_timeout=10"
fails=0
run() { verdict_run 20 "$@"; }     # run <what> <pass | the error that must end it> <command...>
# The cancel's bound on the other cos' wait (20 ms, hook_lib.h) gets a
# second run: as check_hook_mariadb's, it can meet a stall of the host.
STALL_RETRY='CHECK(t->max_late <= 20 \* HK_MS) failed'
for be in ${ACO_RT_TEST_BACKENDS:-uring epoll}; do
    run "$be: LD_PRELOAD" pass env ACO_RT_BACKEND=$be LD_PRELOAD="$OUT/libhook_count.so $OUT/libaco_hook.so" \
        "$OUT/hook_pq" --hooks --db "$db"
    run "$be: linked" pass env ACO_RT_BACKEND=$be LD_PRELOAD="$OUT/libhook_count.so" \
        "$OUT/hook_pq_linked" --hooks --db "$db"
done
# Without the hooks PQexec blocks the thread: 10 queries one after another.
run "no hooks: the overlap check fails" "did not overlap" "$OUT/hook_pq" --no-hooks --clients 10 --db "$db"
echo "check_hook_pq: $fails failed"
[ $fails = 0 ]
