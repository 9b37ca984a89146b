# tests/gdb_common.sh - what check_gdb.sh and check_gdb_ext.sh share (they
# source it): the builds they debug, and gdb run on a program natively or
# under qemu-user's gdb stub.

# The compilers and targets both checks go through: gdb_build each pair.
GDB_CCS="gcc clang"
GDB_TARGETS="-m64 -m32 aarch64 riscv64"

# gdb_build <cc> <target>: sets `build` (the compile command, an array) and
# `where` (native, or the qemu arch).  Returns 1 for a cross arch make.sh
# leaves out (ACO_CROSS); exits when a needed tool is missing.
gdb_build() {
    local cc=$1 m=$2 var
    case $m in
        aarch64|riscv64)
            case " ${ACO_CROSS-aarch64 riscv64} " in *" $m "*) ;; *) return 1 ;; esac
            command -v gdb-multiarch >/dev/null ||
                { echo "FAIL: gdb-multiarch not found: install the Debian package gdb-multiarch"; exit 1; }
            command -v qemu-$m >/dev/null ||
                { echo "FAIL: qemu-$m not found: install the Debian package qemu-user"; exit 1; }
            # the cross compilers make.sh uses (CC_AARCH64 / CC_RISCV64)
            var=CC_$(echo $m | tr '[:lower:]' '[:upper:]')
            if [ $cc = gcc ]; then build=(${!var:-$m-linux-gnu-gcc} -static)
            else build=(clang --target=$m-linux-gnu -static); fi
            where=$m ;;
        *) build=($cc $m); where=native ;;
    esac
}

# gdb_run <where> <program> <setup>... -- <commands>...: gdb in batch mode
# with the setup arguments (scripts, breakpoints), then the program started
# (natively `run`; under qemu-<where> -g, gdb-multiarch's `target remote`
# and `continue`), then the commands; prints gdb's output.
gdb_run() {
    local where=$1 prog=$2 setup=()
    shift 2
    while [ "$1" != -- ]; do setup+=("$1"); shift; done
    shift
    if [ "$where" = native ]; then
        gdb -nx -q -batch "${setup[@]}" -ex run "$@" "$prog" 2>&1
        return
    fi
    local try port qpid out="" qlog why=""
    qlog=$(mktemp)
    # A subshell ($(gdb_run ...)) inherits RANDOM's state: without a seed
    # of its own every call tried the same three ports, and one taken by
    # another program of the suite failed them all.
    RANDOM=$(( BASHPID ^ $(date +%N | sed 's/^0*//;s/^$/0/') ))
    for try in 1 2 3 4 5; do
        # (after a failed try, a pause that grows: under the whole suite's
        # load qemu-user has died at its start three times in a row, its
        # reason kept below)
        [ $try -gt 1 ] && sleep $((try - 1))
        port=$(( 20000 + (RANDOM * 7 + try) % 30000 ))
        # -k: a qemu-user still waiting for gdb keeps a TERM for its guest
        # and never dies of it
        timeout -k 5 120 qemu-"$where" -g "$port" "$prog" > /dev/null 2> "$qlog" &
        qpid=$!
        # Until qemu listens gdb is refused (and, retrying refusals for its
        # tcp connect-timeout, says "timed out" when qemu starts slowly
        # under the suite's load); if qemu is gone, the port was taken.
        for _ in $(seq 100); do
            kill -0 $qpid 2>/dev/null || break
            # an address, not a name: a minimal root has no /etc/hosts
            out=$(timeout 120 gdb-multiarch -nx -q -batch -ex "target remote 127.0.0.1:$port" \
                  "${setup[@]}" -ex continue "$@" "$prog" 2>&1)
            grep -qE 'Connection (refused|timed out)' <<< "$out" || break
            sleep 0.1
        done
        local st=0
        wait $qpid || st=$?
        if [ $st = 0 ]; then rm -f "$qlog"; echo "$out"; return; fi
        why="$why
try $try, port $port, qemu-$where exited $st: $(head -c 400 "$qlog")"
    done
    rm -f "$qlog"
    echo "$out"
    echo "qemu-$where -g failed 5 times:$why"
}
