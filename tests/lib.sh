# tests/lib.sh - the shell helpers that tests/check_*.sh and bench/*.sh share.
# It owns the ports servers listen on (free_port, fresh_port), the waits
# until one listens (port_open, port_listening, wait_until, wait_port), the
# background processes a script starts, stops and ends at its exit (PIDS,
# start_server, forget_pid, stop_pid, kill_pids, cleanup_tmp), the check
# scripts' lines (need_built, ok, bad) and a process's CPU time
# (cpu_ticks).  Sourced: `. tests/lib.sh` from the repository's root,
# `. "$HERE/../tests/lib.sh"` from bench/.  It sets no shell option; under
# `set -euo pipefail` a status other than 0 is a function's answer (its
# contract says when), never a slip.

PIDS=()             # the background processes started and not reaped yet
PORTS_TAKEN=" "     # the ports fresh_port has handed out

# free_port: prints a TCP port of 127.0.0.1 that the kernel picks as unused.
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# fresh_port: sets FREE_PORT to a port in 20000-31999 (below the ephemeral range) that no socket holds and no earlier call chose; exits 2 when there is none.
fresh_port() {
    local used=" " h p
    for h in $(awk 'FNR > 1 {n = split($2, a, ":"); print a[n]}' \
            /proc/net/tcp /proc/net/tcp6 2>/dev/null); do
        used+="$((16#$h)) "
    done
    for _ in $(seq 1 500); do
        p=$((20000 + RANDOM % 12000))
        case "$used$PORTS_TAKEN" in *" $p "*) continue ;; esac
        PORTS_TAKEN+="$p "
        # shellcheck disable=SC2034  # the caller reads FREE_PORT
        FREE_PORT=$p
        return 0
    done
    echo "$(basename "$0" .sh): no free port found" >&2
    exit 2
}

# port_open PORT: succeeds when something accepts a connection at 127.0.0.1:PORT (the probe closes it at once).
port_open() { (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null; }

# port_listening PORT: succeeds when a TCP socket listens at PORT, read from /proc/net/tcp{,6} without connecting (iproute2's ss is not on every machine).
port_listening() {
    local hex
    hex=$(printf '%04X' "$1")
    awk -v p="$hex" 'FNR > 1 {n = split($2, a, ":"); if (a[n] == p && $4 == "0A") f = 1}
        END {exit !f}' /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

# wait_until TRIES PAUSE PID CMD...: runs CMD up to TRIES times, PAUSE seconds apart, until it succeeds; fails at once when PID (unless empty) has ended.
wait_until() {
    local tries=$1 pause=$2 watch=$3
    shift 3
    for _ in $(seq 1 "$tries"); do
        "$@" && return 0
        [ -z "$watch" ] || kill -0 "$watch" 2>/dev/null || return 1
        sleep "$pause"
    done
    return 1
}

# wait_port PORT [PID [TRIES]]: waits until port_open PORT, trying every 0.05 s, TRIES times (100: 5 s); fails at once when PID has ended.
wait_port() { wait_until "${3:-100}" 0.05 "${2:-}" port_open "$1"; }

# start_server PORT CMD...: runs CMD in the background (with the call's redirections), sets SERVER_PID and adds it to PIDS, then waits as wait_port PORT SERVER_PID.
start_server() {
    local at=$1
    shift
    "$@" &
    SERVER_PID=$!
    PIDS+=("$SERVER_PID")
    wait_port "$at" "$SERVER_PID"
}

# forget_pid PID: drops PID from PIDS (it is reaped: nothing may signal its number again).
forget_pid() {
    local i
    for i in "${!PIDS[@]}"; do
        [ "${PIDS[$i]}" != "$1" ] || unset 'PIDS[i]'
    done
    return 0
}

# stop_pid PID: ends a process this shell started (SIGTERM), reaps it and forgets it; succeeds whatever its status.
stop_pid() {
    kill "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
    forget_pid "$1"
}

# kill_pids [wait]: sends SIGTERM to every process in PIDS; with "wait", then reaps them all and empties PIDS.
kill_pids() {
    local p
    for p in "${PIDS[@]+"${PIDS[@]}"}"; do
        kill "$p" 2>/dev/null || true
    done
    [ "${1:-}" = wait ] || return 0
    for p in "${PIDS[@]+"${PIDS[@]}"}"; do
        wait "$p" 2>/dev/null || true
    done
    PIDS=()
}

# cleanup_tmp: kill_pids, then removes the directory $tmp; a check script's EXIT trap.
cleanup_tmp() {
    kill_pids
    [ -z "${tmp:-}" ] || rm -rf "$tmp"
}

# need_built PROG...: exits 1 with the script's "not built" line unless every PROG is an executable in $OUT.
need_built() {
    local p
    for p in "$@"; do
        [ -x "$OUT/$p" ] || { echo "$(basename "$0" .sh): $OUT/$p not built (bash make.sh)"; exit 1; }
    done
}

# in_private_mounts "$0" "$@": re-runs the calling script in a mount namespace of its own, once: a FUSE file system it
# mounts goes away with its processes, whatever ends them.  unshare -m (as root; a user namespace otherwise) with its
# mounts private, or, in a chroot (whose root is no mount point, which makes that EINVAL), as they are: slow_disk then
# makes its own directory a private mount first.
in_private_mounts() {
    [ -z "${ACO_PRIVATE_MOUNTS:-}" ] || return 0
    local u=(unshare -m) p
    [ "$(id -u)" = 0 ] || u=(unshare -Urm)
    for p in ${ACO_MOUNTNS_PROPAGATION:-private unchanged}; do
        if "${u[@]}" --propagation "$p" true 2>/dev/null; then
            ACO_PRIVATE_MOUNTS=$p exec "${u[@]}" --propagation "$p" bash "$@"
        fi
    done
    echo "$(basename "$1" .sh): cannot make a mount namespace (${u[*]})"
    exit 1
}

# slow_disk DIR RULE...: mounts output/slowfs (rt/tests/slowfs.c) at DIR/mnt over DIR/back with its -s RULEs (as
# 'slow.bin:open=2000,read=2000'), adds it to PIDS, and waits until it is live; fails with what it printed.
slow_disk() {
    local d=$1 r args=()
    shift
    for r in "$@"; do args+=(-s "$r"); done
    [ -e /dev/fuse ] || { echo "no /dev/fuse: FUSE is needed for the slow disk"; return 1; }
    mkdir -p "$d/back" "$d/mnt"
    rm -f "$d/ready"
    # (mounts not private: ours made so, so that nothing reaches the parent's)
    if [ "${ACO_PRIVATE_MOUNTS:-}" = unchanged ]; then
        mount --bind "$d" "$d" && mount --make-private "$d" ||
            { echo "cannot make $d a private mount"; return 1; }
    fi
    nice -n 19 "$OUT/slowfs" "${args[@]}" --ready "$d/ready" --log "$d/holds.log" "$d/back" "$d/mnt" > "$d/slowfs.log" 2>&1 &
    SLOWFS_PID=$!
    PIDS+=("$SLOWFS_PID")
    wait_until 100 0.05 "$SLOWFS_PID" test -e "$d/ready" ||
        { echo "slowfs did not start:"; cat "$d/slowfs.log"; return 1; }
}

# slow_disk_cleanup DIR: the EXIT trap of a script that made a slow_disk in DIR: its processes ended (slowfs unmounts
# on SIGTERM), what is still mounted under DIR let go, DIR removed.
slow_disk_cleanup() {
    kill_pids wait
    umount -l "$1/mnt" 2>/dev/null
    umount -l "$1" 2>/dev/null
    rm -rf "$1"
}

# ok WHAT: prints the line of a check that passed.
ok() { echo "ok   $*"; }

# bad WHAT: prints the line of a check that failed and counts it in $fails.
bad() { echo "FAIL $*"; fails=$(( ${fails:-0} + 1 )); }

# stall_run SECONDS COMMAND...: runs COMMAND (killed after SECONDS), its
# output in $out, and returns its status.  If it fails and its output
# matches $STALL_RETRY (a grep pattern: a latency bound that this host's
# vCPU stalls can miss; 10-22 ms stalls with no counter to show them were
# seen on 2026-12-03), it runs once more, whole: $again then holds the
# first run's matching line.  Missed twice running, it fails.
stall_run() {
    local secs=$1
    shift
    again=
    out=$(timeout "$secs" "$@" 2>&1) && return 0
    [ -n "${STALL_RETRY:-}" ] && grep -q -- "$STALL_RETRY" <<< "$out" || return 1
    again=$(grep -m1 -- "$STALL_RETRY" <<< "$out")
    out=$(timeout "$secs" "$@" 2>&1)
}

# verdict_run SECONDS WHAT WANT COMMAND...: runs COMMAND (killed after
# SECONDS); WANT is pass (it must exit 0: the line shows its "result:"
# line; $STALL_RETRY as for stall_run) or the text its failure must print
# (a failure for another reason is a FAIL).  $VERBOSE shows its whole
# output.
verdict_run() {
    local secs=$1 what=$2 want=$3 out got again
    shift 3
    if [ "$want" = pass ]; then
        if stall_run "$secs" "$@"; then got=pass; else got=fail; fi
    elif out=$(timeout "$secs" "$@" 2>&1); then got=pass; else got=fail; fi
    # (here-strings, not `echo | grep -q`: bash's echo writes line by
    # line, and a grep that stops at its match leaves a later line to
    # SIGPIPE, which pipefail takes for no match: check_hook_pq's no-hooks
    # run once failed so, its 'did not overlap' in plain sight)
    if [ "$want" = pass ] && [ $got = pass ]; then
        ok "$what${again:+ (again; at first: $again)}: $(grep -m1 '^result:' <<< "$out")"
    elif [ "$want" != pass ] && [ $got = fail ] && grep -q -- "$want" <<< "$out"; then
        ok "$what: $(grep -m1 -- "$want" <<< "$out")"
    else bad "$what: expected ${want}: $out"; fi
    [ -z "${VERBOSE:-}" ] || echo "$out" | sed 's/^/     /'
}

# cpu_ticks PID: prints utime + stime of the whole process (every thread, io_uring's workers too) in clock ticks, n/a once it is gone.
cpu_ticks() {
    local s
    s=$(cat "/proc/$1/stat" 2>/dev/null) || { echo n/a; return 0; }
    s=${s##*) }
    # shellcheck disable=SC2086
    set -- $s   # $1 is field 3 (state): utime is field 14, stime field 15
    echo $(( ${12} + ${13} ))
}

# now_us: prints the wall clock in microseconds.
now_us() { echo "${EPOCHREALTIME/./}"; }

# machine_ticks: prints the busy and the stolen clock ticks of all CPUs since boot ("BUSY STEAL", /proc/stat's
# cpu line: busy is user + nice + system + irq + softirq; stolen, what the hypervisor gave other guests).
machine_ticks() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8, $9; exit}' /proc/stat; }

# cpu_ticks_of N: prints CPU N's busy, idle and stolen clock ticks since boot ("BUSY IDLE STEAL": its /proc/stat
# line, busy as machine_ticks, idle with iowait).
cpu_ticks_of() { awk -v c="cpu$1" '$1 == c {print $2 + $3 + $4 + $7 + $8, $5 + $6, $9; exit}' /proc/stat; }

# cpu_timed FILE CMD...: runs CMD (stdout and stderr its own) and writes the CPU seconds it used, user + system
# of every thread of it and of its children (their rusage, as bash's `time` reports it), to FILE; CMD's status.
cpu_timed() {
    local f=$1 rc TIMEFORMAT='%3U %3S'
    shift
    { time "$@" 2>&4; } 4>&2 2> "$f.time"
    rc=$?
    awk '{printf "%.3f\n", $1 + $2}' "$f.time" > "$f"
    rm -f "$f.time"
    return $rc
}

# warn_cpu WHAT STEAL% SERVER% CPU%: a benchmark's warning line when a server's CPU figure cannot be trusted: time
# the hypervisor stole from the server's CPU (5% or more), or that CPU busier than the server was charged for (10 points or
# more: ksoftirqd, interrupts or another task did work there that the server's utime+stime then lacks).  Not when
# $CPU_WARN is 0 (a smoke run's few clock ticks would make it say so at random).
warn_cpu() {
    local me
    [ "${CPU_WARN:-1}" = 0 ] && return 0
    me=$(basename "$0" .sh)
    [ "$2" != n/a ] && [ "$2" -ge 5 ] &&
        echo "$me: warning: the hypervisor took $2% of the server's CPU while $1 ran: its figures are suspect"
    [ "$3" != n/a ] && [ "$4" != n/a ] && [ $(($4 - $3)) -ge 10 ] &&
        echo "$me: warning: $1: its CPU was $4% busy, the server charged $3%: its CPU per request lacks the rest"
    return 0
}
