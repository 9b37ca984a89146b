#!/usr/bin/env bash
# bench_file.sh - the runtime's file calls (aco_rt_pread, aco_rt_splice)
# side by side with fio, a pool of plain threads and cp.  Called by
# bench_rt.sh's section h; alone:
#
#   bash bench/bench_file.sh [--quick|--smoke] [--keep] [OUTPUT_DIR]
#
# OUTPUT_DIR (default output) holds aco_file_bench (bench/aco_file_bench.c)
# and bench_agg (bash make.sh builds both).  Every run is pinned with
# taskset to one CPU (BENCH_RT_SERVER_CPU, default 1): ours, fio (its main
# process and its job), the threads, cp.  Interleaved rounds (5, --quick 2,
# --smoke 1; BENCH_RT_ROUNDS), the contenders' order rotating from round to
# round, medians.
#
# The data: a 4 GiB file of random bytes (BENCH_FILE_MIB) in BENCH_FILE_DIR
# (default ${TMPDIR:-/var/tmp}: on the real disk, not a tmpfs, where O_DIRECT
# reaches the device), written once (dd from /dev/urandom, fsync'd) and
# reused while its size is right; deleted at the end unless --keep (or
# BENCH_FILE_KEEP=1).  --smoke: a 64 MiB file and 0.25 s runs, only to prove
# that every piece runs.
#
# Random 4 KiB reads at uniformly random 4 KiB-aligned offsets of the whole
# file, at queue depths 1 and 32, each run BENCH_FILE_SECONDS (5, --quick 3,
# --smoke 1):
#   ours     aco_file_bench randread --backend uring: N cos on one scheduler,
#            each an aco_rt_pread loop into its slice of one block of
#            registered buffers (aco_rt_register_buffers, as fio's
#            --fixedbufs; `ours_nf`, O_DIRECT only: --no-fixed, the same
#            unregistered, for the _fixedbufs headline); the `_epoll` rows: --backend epoll,
#            whose reads go to the runtime's helper threads, 8 at most by
#            default; BENCH_FILE_EPOLL_HELPERS=H passes --helpers H);
#   fio      fio --ioengine=io_uring --rw=randread --bs=4k --iodepth=N
#            --numjobs=1 --time_based at its best (below), in two
#            configurations at qd32: `fio` batched (the least CPU per I/O)
#            and `fio_nb` not (one submission per completion: here the
#            most IOPS in some minutes); each headline takes fio's better
#            median of the two;
#   threads  aco_file_bench threads: N pthreads, each a pread(2) loop.
# --direct (O_DIRECT: the device) and --cached (the file in the page cache,
# read once first; if MemAvailable cannot hold it with 2 GiB to spare, a
# smaller file, the data file's first part, is used for the cached runs and
# the script says so).
#
# CPU per I/O: ours and threads, their process's getrusage (utime + stime,
# every thread: helper threads and io_uring's iou-wrk workers too) over the
# run; fio, its job's usr_cpu + sys_cpu (percent of job_runtime, from its
# JSON) over its total_ios; the fio process's own rusage (bash's time: its
# main process too, and the start-up) is in the table as fio_proc.
#
# fio at its best: these options, measured on the 2-vCPU KVM guest
# (virtio-blk, ext4, kernel 6.18; 4 s runs, 3 interleaved rounds at qd32,
# fio 3.33), against plain --ioengine=io_uring:
#   --iodepth_batch_submit=N --iodepth_batch_complete_min=N/4: the most;
#            CPU per I/O down 20-35% at qd32 (5.3-5.8 us to 4.0-4.3);
#            complete_min=N/2 saves a little more CPU but lost IOPS.  But
#            IOPS moved both ways with it: up 10% in a slow minute of the
#            disk (68-74k to 77-82k), down 10-20% in fast ones (123-136k
#            to 104-119k; submitting all and reaping from 1, as the
#            runtime's loop does, 107-109k): hence fio_nb, the other
#            options without the batching
#   --registerfiles --fixedbufs: another 8-12% (3.7 to 3.5 us with the
#            batching), either alone about half of that
#   --gtod_reduce=1: fio's latency clocks off (ours reads no clock per
#            I/O either): 0-5%
#   --norandommap: the same offsets as ours (uniformly random, repeats
#            allowed) without fio's map of the blocks read so far (each
#            block once a pass); the map cost it 40-90 ns of user time a
#            read (perf: axmap_isset; Zen 4, 3 interleaved pairs)
#   --nonvectored=1: nothing measurable
#   --hipri: needs the device's poll queues; virtio-blk here has none
#            (io_poll 0, num_poll_queues 0): left out.  --sqthread_poll:
#            a kernel thread spinning on a second CPU, not a way to spend
#            less CPU: left out
#   at qd1 the batching options are no-ops, and the rest moved nothing
#   beyond the runs' noise
# and always --invalidate=0: fio otherwise drops the file's page cache
# before every job (posix_fadvise DONTNEED), which empties the cache the
# --cached runs need (even a --direct=1 job does); and always
# --randrepeat=0: fio's default seeds its offsets the same way in every
# run, so each run reads the blocks the last one read, which the host
# under a virtual disk may still hold (this guest, 2026-12-05: 71,094
# IOPS with the default against 16,803 with fresh offsets, two runs a
# minute apart; ours draws fresh offsets each run, seeded by the clock).
# BENCH_FILE_FIO_OPTS replaces the best options (not these two), e.g.
# empty for fio's defaults.
#
# The copy: aco_file_bench copy SRC DST (aco_rt_splice file -> pipe -> file,
# 256 KiB chunks, the pipe sized to match: on the Zen 1 guest, 6 runs each,
# 128 KiB took 0.43-0.67 s a GiB, 256 KiB 0.37-0.43, 512 KiB 0.35-0.50,
# 1 MiB 0.65-0.92, and cp 0.35-0.37) against cp SRC DST (GNU cp: a
# copy_file_range loop, which the kernel does as an in-kernel splice on
# ext4) of a 1 GiB file (BENCH_FILE_COPY_MIB; --smoke 16 MiB), DST removed
# and everything synced (sync) before each copy, untimed; no fsync in either;
# one untimed copy of each first (not in --smoke); 2 x rounds + 1
# interleaved rounds of copies (11, --quick 5): a copy takes about a second,
# and one in four or so, of cp as of ours, took 2-5 times the others here
# (memcpy_orig in the kernel, slower: the guest's memory, not the copy).
# Two states of the source: warm (in the page cache: the headline), and
# cold (its pages dropped before each copy with dd iflag=nocache, the
# file's own posix_fadvise DONTNEED: nothing else is dropped; the _cold
# rows).  Seconds are wall time of the whole command, CPU its rusage.
#
# Headlines (ours/peer: above 1 better for iops, below 1 better for ns and
# s): file_{direct,cached}_qd{1,32}_iops ours= fio=,
# file_{direct,cached}_qd{1,32}_cpu_ns_per_io ours= fio=,
# file_{direct,cached}_qd{1,32}_iops_per_cpu_s ours= threads=, the same
# with _epoll for --backend epoll, file_copy_1g_s ours= cp=,
# file_copy_1g_cpu_s ours= cp=, and the same with _cold.  No floor is
# measured: fio at its best is what a program pays for io_uring reads
# here, and the threads' plain pread(2) what one system call a read costs
# (below io_uring from the page cache).
#
# Without fio (Debian's package `fio`) one line says so and the fio
# comparisons are n/a; the rest runs.  Exit status: non-zero if a peer
# fails (fio, the threads, cp), or in --smoke if ours is missing or fails.
#
# Environment:
#   BENCH_FILE_DIR, BENCH_FILE_MIB, BENCH_FILE_COPY_MIB, BENCH_FILE_SECONDS,
#   BENCH_FILE_KEEP, BENCH_FILE_FIO_OPTS, BENCH_FILE_EPOLL_HELPERS   above
#   BENCH_FILE_OURS_CMD   our program (default OUTPUT_DIR/aco_file_bench)
#   BENCH_RT_ROUNDS, BENCH_RT_SERVER_CPU   as bench_rt.sh's
#   BENCH_AGG             the aggregation program (default OUTPUT_DIR/bench_agg)
set -uo pipefail
export LC_ALL=C     # '.' in numbers: EPOCHREALTIME, bash's time, awk
mode=full
OUT=output
KEEP=${BENCH_FILE_KEEP:-0}
while [ $# -gt 0 ]; do
    case $1 in
        --quick) mode=quick ;;
        --smoke) mode=smoke ;;
        --keep) KEEP=1 ;;
        -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        -*) echo "bench_file: unknown option $1" >&2; exit 2 ;;
        *) OUT=$1 ;;
    esac
    shift
done
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=$(cd "$OUT" 2>/dev/null && pwd) || { echo "bench_file: no directory $OUT"; exit 2; }
# shellcheck source=tests/lib.sh
. "$HERE/../tests/lib.sh"
say() { echo "bench_file: $*"; }
case $mode in
    full) ROUNDS=${BENCH_RT_ROUNDS:-5}; SECS=${BENCH_FILE_SECONDS:-5}
          MIB=${BENCH_FILE_MIB:-4096}; COPY_MIB=${BENCH_FILE_COPY_MIB:-1024} ;;
    quick) ROUNDS=${BENCH_RT_ROUNDS:-2}; SECS=${BENCH_FILE_SECONDS:-3}
           MIB=${BENCH_FILE_MIB:-4096}; COPY_MIB=${BENCH_FILE_COPY_MIB:-1024} ;;
    smoke) ROUNDS=1; SECS=0.25; MIB=64; COPY_MIB=16 ;;
esac
FIO_RUNTIME=$(awk -v s="$SECS" 'BEGIN { printf "%dms", s * 1000 }')   # (fio takes whole units)
CPU=${BENCH_RT_SERVER_CPU:-1}
[ "$(nproc)" -lt 2 ] && [ -z "${BENCH_RT_SERVER_CPU:-}" ] && CPU=0
case $CPU in ''|*[!0-9]*) say "BENCH_RT_SERVER_CPU names one CPU"; exit 2 ;; esac
case $MIB$COPY_MIB${SECS/./} in *[!0-9]*) say "BENCH_FILE_MIB, _COPY_MIB and _SECONDS are numbers"; exit 2 ;; esac
CLK_TCK=$(getconf CLK_TCK)
DEPTHS="1 32"
OURS=${BENCH_FILE_OURS_CMD:-$OUT/aco_file_bench}
for c in taskset dd cp sync; do
    command -v $c > /dev/null || { say "$c not found (install util-linux, coreutils): left out"; exit 1; }
done
have_fio=1
command -v fio > /dev/null || { have_fio=0; say "leaving out fio: install fio (Debian's package fio): its comparisons are n/a"; }
have_fincore=0
command -v fincore > /dev/null && have_fincore=1

AGG=${BENCH_AGG:-$OUT/bench_agg}
[ -x "$AGG" ] && [ ! "$HERE/bench_agg.c" -nt "$AGG" ] ||
    { say "$AGG is not built, or older than bench/bench_agg.c: bash make.sh builds it"; exit 2; }
declare -A V
addv() { V[$1]+="$2 "; }
median() { "$AGG" median ${V[$1]:-}; }
med() { "$AGG" median -f "$1" ${V[$2]:-}; }   # med FORMAT KEY
rounds() { echo "${V[$1]:-}" | sed 's/ *$//'; }

# ---- where, and the files ------------------------------------------------------
DIR=${BENCH_FILE_DIR:-${TMPDIR:-/var/tmp}}
mkdir -p "$DIR" 2>/dev/null
fs_type() { findmnt -n -o FSTYPE -T "$1" 2>/dev/null | head -1 | grep . || stat -f -c %T "$1" 2>/dev/null || echo unknown; }
fstype=$(fs_type "$DIR")
case $fstype in tmpfs|ramfs)
    if [ -z "${BENCH_FILE_DIR:-}" ]; then
        say "$DIR is on $fstype (memory, not a disk): using /var/tmp"
        DIR=/var/tmp; fstype=$(fs_type "$DIR")
    else
        say "warning: $DIR is on $fstype: the --direct figures are not a disk's"
    fi ;;
esac
DIR=$(cd "$DIR" && pwd) || { say "no directory $DIR"; exit 2; }
DATA=$DIR/aco_file_bench.$MIB.data
COPY_SRC=$DIR/aco_file_bench.copy.$COPY_MIB.src
TMPD=$(mktemp -d "$DIR/bench_file.XXXXXX") || exit 2
COPY_DST=$TMPD/copy.dst
CACHED=$DATA            # the file of the --cached runs (a smaller one if RAM is short)
made_cached=""
cleanup() {
    kill_pids wait
    rm -rf "$TMPD"
    [ -n "$made_cached" ] && rm -f "$made_cached"
    if [ "$KEEP" = 1 ]; then
        say "kept $DATA and $COPY_SRC (--keep)"
    else
        rm -f "$DATA" "$COPY_SRC"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

mem_avail_mib() { awk '/^MemAvailable:/ {print int($2 / 1024)}' /proc/meminfo; }
disk_free_mib() { df -Pm "$DIR" | awk 'NR == 2 {print $4}'; }
size_of() { stat -c %s "$1" 2>/dev/null || echo 0; }
# cached_pct FILE: the share of FILE's pages in the page cache (fincore), n/a without it
cached_pct() {
    [ $have_fincore = 1 ] || { echo n/a; return 0; }
    local p
    p=$(fincore -nb -o PAGES "$1" 2>/dev/null | awk 'NR == 1 {print $1}')
    awk -v p="${p:-0}" -v s="$(size_of "$1")" 'BEGIN {printf "%.1f\n", (s > 0 ? 100 * p * 4096 / s : 0)}'
}
# make_random FILE MIB: FILE of MIB MiB of random bytes, fsync'd, unless its size is right
make_random() {
    local f=$1 mib=$2 t0
    if [ "$(size_of "$f")" = $((mib * 1048576)) ]; then
        echo "data: reusing $f ($mib MiB)"
        return 0
    fi
    t0=$(now_us)
    rm -f "$f"
    dd if=/dev/urandom of="$f" bs=1M count="$mib" conv=fsync status=none ||
        { say "FAILED: could not write $f"; rm -f "$f"; return 1; }
    echo "data: wrote $f ($mib MiB of /dev/urandom, fsync'd) in $(( ($(now_us) - t0) / 1000000 )) s"
}

echo
echo "== file: 4 KiB random reads (qd ${DEPTHS// /, }) and a ${COPY_MIB} MiB copy, pinned to CPU $CPU, $ROUNDS interleaved rounds of ${SECS} s runs ($(date -u '+%Y-%m-%d %H:%M:%S UTC'))"
echo "machine: $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1), nproc $(nproc), kernel $(uname -r), MemAvailable $(mem_avail_mib) MiB"
dev=$(findmnt -n -o SOURCE -T "$DIR" 2>/dev/null | head -1)
blk=${dev##*/}
qinfo=""
if [ -n "$blk" ] && [ -d "/sys/class/block/$blk" ]; then
    q=/sys/class/block/$blk/queue
    [ -d "$q" ] || q=/sys/class/block/$blk/../queue     # a partition: its disk's queue
    qinfo=", scheduler $(sed 's/.*\[\(.*\)\].*/\1/' "$q/scheduler" 2>/dev/null), rotational $(cat "$q/rotational" 2>/dev/null), io_poll $(cat "$q/io_poll" 2>/dev/null)"
fi
echo "disk: $DIR on ${dev:-?} ($fstype$qinfo)"
[ $have_fio = 1 ] && echo "fio: $(fio --version)"
echo "cp: $(cp --version | head -1)"

. "$HERE/lib.sh"         # busy_pct, check_idle
[ $mode = smoke ] || check_idle "before the runs"

need=$((MIB + 2 * COPY_MIB + 512))
[ "$(size_of "$DATA")" = $((MIB * 1048576)) ] && need=$((need - MIB))
if [ "$(disk_free_mib)" -lt "$need" ]; then
    say "FAILED: $DIR has $(disk_free_mib) MiB free, $need MiB needed (BENCH_FILE_DIR, BENCH_FILE_MIB)"
    exit 1
fi
make_random "$DATA" "$MIB" || exit 1

ours_ok=1
if [ ! -x "${OURS%% *}" ]; then
    say "ours: ${OURS%% *} is not built (bash make.sh): ours=n/a"
    ours_ok=0
fi
fail=0
direct_ok=1
if ! dd if="$DATA" of=/dev/null bs=4096 count=1 iflag=direct status=none 2>/dev/null; then
    say "O_DIRECT is refused on $DIR ($fstype): the --direct runs are n/a"
    direct_ok=0
fi

# The cached file: the data file if the page cache can hold it with 2 GiB
# to spare, else the data file's first part that fits.
avail=$(mem_avail_mib)
if [ $((MIB + 2048)) -gt "$avail" ]; then
    cmib=$(( (avail - 2048) / 1024 * 1024 ))
    [ "$cmib" -lt 256 ] && cmib=$(( avail / 2 ))
    CACHED=$DIR/aco_file_bench.cached.$cmib.data
    made_cached=$CACHED
    dd if="$DATA" of="$CACHED" bs=1M count="$cmib" status=none
    say "MemAvailable is $avail MiB: the --cached runs read a $cmib MiB file (the data file's first $cmib MiB), not the $MIB MiB one"
fi
t0=$(now_us)
cat "$CACHED" > /dev/null
echo "cache: read $CACHED once ($(( ($(now_us) - t0) / 1000 )) ms), $(cached_pct "$CACHED")% of it in the page cache"

# ---- the runs --------------------------------------------------------------------
# fio_best DEPTH: the options that made fio cheapest (the header)
fio_best() {
    if [ -n "${BENCH_FILE_FIO_OPTS+x}" ]; then echo "$BENCH_FILE_FIO_OPTS"; return 0; fi
    local c=$(( $1 / 4 ))
    [ $c -lt 1 ] && c=1
    echo "--registerfiles --fixedbufs --gtod_reduce=1 --norandommap --iodepth_batch_submit=$1 --iodepth_batch_complete_min=$c"
}
FIO_NB="--registerfiles --fixedbufs --gtod_reduce=1 --norandommap"      # fio_nb: the same without the batching
# field NAME TEXT: the value of TEXT's `NAME <value>` line
field() { awk -v k="$1" '$1 == k {print $2; exit}' <<< "$2"; }
# steal_begin / steal_end KEY: the share of the pinned CPU the hypervisor took meanwhile
steal_begin() { ST0=$(cpu_ticks_of "$CPU"); SW0=$(now_us); }
steal_end() {
    local st1 w
    st1=$(cpu_ticks_of "$CPU"); w=$(( $(now_us) - SW0 ))
    addv "$1|steal" "$(awk -v a="$ST0" -v b="$st1" -v hz="$CLK_TCK" -v w="$w" 'BEGIN {
        split(a, x, " "); split(b, y, " "); printf "%.1f\n", (w > 0 ? 100 * (y[3] - x[3]) / hz / (w / 1e6) : 0) }')"
}

# read_run WHO STATE DEPTH: one run; its figures into V[STATE|DEPTH|WHO|...]
read_run() {
    local who=$1 st=$2 qd=$3 key="$2|$3|$1" f=$DATA out iops cpu ipc
    [ "$st" = cached ] && f=$CACHED
    if [ "$st" = direct ] && [ $direct_ok = 0 ]; then
        addv "$key|iops" n/a; addv "$key|cpu" n/a; addv "$key|ipc" n/a; return 0
    fi
    case $who in
    ours|ours_nf|epoll)
        # ours_nf: ours without registered buffers (O_DIRECT only: what they save)
        if [ $ours_ok = 0 ] || { [ $who = ours_nf ] && [ $st != direct ]; }; then
            addv "$key|iops" n/a; addv "$key|cpu" n/a; addv "$key|ipc" n/a; return 0
        fi
        local be=uring extra=""
        [ "$who" = epoll ] && be=epoll && [ -n "${BENCH_FILE_EPOLL_HELPERS:-}" ] && extra="--helpers $BENCH_FILE_EPOLL_HELPERS"
        [ "$who" = ours_nf ] && extra="--no-fixed"
        steal_begin
        # shellcheck disable=SC2086
        out=$(timeout $((${SECS%.*} + 60)) taskset -c "$CPU" $OURS randread --$st --file "$f" \
            --depth "$qd" --secs "$SECS" --backend $be $extra 2>&1)
        local rc=$?
        steal_end "$key"
        echo "$out" >> "$TMPD/ours.log"
        iops=$(field iops "$out"); cpu=$(field cpu_ns_per_io "$out"); ipc=$(field iops_per_cpu_s "$out")
        if [ $rc != 0 ] || [ -z "$iops" ]; then
            say "ours: randread --$st --depth $qd --backend $be failed (status $rc): $(tail -1 <<< "$out")"
            ours_ok=0; iops=n/a cpu=n/a ipc=n/a
        else
            V["$key|stats"]="$(grep -E '^(way|stats) ' <<< "$out" | tr '\n' ' ')"
        fi ;;
    threads|floor)
        # floor: preadv2(RWF_NOWAIT), what aco_rt_pread tries first on a file
        # that is not O_DIRECT (the page cache's cost under our call)
        if [ $who = floor ] && [ $st != cached ]; then addv "$key|iops" n/a; addv "$key|cpu" n/a; addv "$key|ipc" n/a; return 0; fi
        local nw=""; [ $who = floor ] && nw=--nowait
        steal_begin
        # shellcheck disable=SC2086
        out=$(timeout $((${SECS%.*} + 60)) taskset -c "$CPU" $OURS threads --$st --file "$f" \
            --depth "$qd" --secs "$SECS" $nw 2>&1)
        local rc=$?
        steal_end "$key"
        iops=$(field iops "$out"); cpu=$(field cpu_ns_per_io "$out"); ipc=$(field iops_per_cpu_s "$out")
        if [ $rc != 0 ] || [ -z "$iops" ]; then
            # the threads live in our program: without it they are n/a, not failed
            if [ -x "${OURS%% *}" ]; then
                say "PEER FAILED: threads --$st --depth $qd (status $rc): $(tail -1 <<< "$out")"; fail=1
            fi
            iops=n/a cpu=n/a ipc=n/a
        fi ;;
    fio|fio_nb)
        # (fio_nb at qd1 would be fio again: the batching options are no-ops there)
        if [ $have_fio = 0 ] || { [ $who = fio_nb ] && { [ "$qd" = 1 ] || [ -n "${BENCH_FILE_FIO_OPTS+x}" ]; }; }; then
            addv "$key|iops" n/a; addv "$key|cpu" n/a; addv "$key|pcpu" n/a; return 0
        fi
        local d=1 j=$TMPD/fio.json opts
        opts=$(fio_best "$qd")
        [ $who = fio_nb ] && opts=$FIO_NB
        [ "$st" = cached ] && d=0
        steal_begin
        # shellcheck disable=SC2086
        cpu_timed "$TMPD/fio.cpu" timeout $((${SECS%.*} + 60)) taskset -c "$CPU" fio --name=randread \
            --filename="$f" --ioengine=io_uring --direct=$d --rw=randread --bs=4k --iodepth="$qd" \
            --numjobs=1 --time_based --runtime="$FIO_RUNTIME" --invalidate=0 --randrepeat=0 $opts \
            --output-format=json --output="$j" > "$TMPD/fio.out" 2>&1
        local rc=$?
        steal_end "$key"
        # fio's JSON: read.iops, read.total_ios, job_runtime (ms), usr_cpu and
        # sys_cpu (% of job_runtime), error
        local fig
        fig=$(awk -v pcpu="$(cat "$TMPD/fio.cpu" 2>/dev/null)" '
            /"read" : \{/ {r = 1}
            r && /"iops" :/ && iops == "" {iops = $3}
            r && /"total_ios" :/ && ios == "" {ios = $3}
            /"job_runtime" :/ {rt = $3} /"usr_cpu" :/ {u = $3} /"sys_cpu" :/ {s = $3}
            /"error" :/ && err == "" {err = $3}
            END {
                gsub(/,/, "", iops); gsub(/,/, "", ios); gsub(/,/, "", rt); gsub(/,/, "", u);
                gsub(/,/, "", s); gsub(/,/, "", err)
                if (ios + 0 <= 0 || rt + 0 <= 0 || err != "0") { print "fail"; exit }
                printf "%s %.1f %.1f\n", iops, (u + s) / 100 * rt / 1000 * 1e9 / ios, pcpu * 1e9 / ios
            }' "$j" 2>/dev/null)
        if [ $rc != 0 ] || [ -z "$fig" ] || [ "$fig" = fail ]; then
            say "PEER FAILED: fio --direct=$d --iodepth=$qd (status $rc): $(tail -2 "$TMPD/fio.out" | tr '\n' ' ')"
            fail=1
            addv "$key|iops" n/a; addv "$key|cpu" n/a; addv "$key|pcpu" n/a; return 0
        fi
        local pcpu
        read -r iops cpu pcpu <<< "$fig"
        addv "$key|pcpu" "$pcpu"; ipc=n/a ;;
    esac
    addv "$key|iops" "$iops"; addv "$key|cpu" "$cpu"; addv "$key|ipc" "$ipc"
}

WHO="ours ours_nf epoll fio fio_nb threads floor"
if [ $have_fio = 1 ]; then
    echo "fio: fio --name=randread --filename=F --ioengine=io_uring --direct=1|0 --rw=randread --bs=4k --iodepth=N --numjobs=1 --time_based --runtime=$FIO_RUNTIME --invalidate=0 --randrepeat=0 $(fio_best 32 | sed 's/=32/=N/; s/=8$/=N\/4/') --output-format=json"
    echo "fio_nb: the same with $FIO_NB only (qd32)"
fi
echo "ours: $OURS randread --direct|--cached --file F --depth N --secs $SECS --backend uring|epoll${BENCH_FILE_EPOLL_HELPERS:+ --helpers $BENCH_FILE_EPOLL_HELPERS} (its buffers registered; ours_nf: --no-fixed, not registered); threads: $OURS threads ... (pread(2) in N pthreads)"
T0=$(now_us)
for r in $(seq 1 "$ROUNDS"); do
    order=$WHO
    for _ in $(seq 2 "$r"); do order="${order#* } ${order%% *}"; done
    for st in direct cached; do
        # (again each round: this machine's reclaim may have taken pages
        # nobody read for a while)
        [ $st = cached ] && cat "$CACHED" > /dev/null
        for qd in $DEPTHS; do
            for who in $order; do read_run "$who" "$st" "$qd"; done
        done
    done
    echo "round $r/$ROUNDS done ($(date -u +%H:%M:%S))"
done
echo "cache: $(cached_pct "$CACHED")% of $CACHED in the page cache after the runs"

# ---- the copy ----------------------------------------------------------------------
dd if="$DATA" of="$COPY_SRC" bs=1M count="$COPY_MIB" status=none 2>/dev/null ||
    { [ "$(size_of "$COPY_SRC")" = $((COPY_MIB * 1048576)) ] || { say "FAILED: could not make $COPY_SRC"; exit 1; }; }
# copy_run WHO STATE: one copy; seconds and CPU seconds into V[copy|STATE|WHO|...]
copy_run() {
    local who=$1 st=$2 key="copy|$2|$1" t0 t1 rc out
    if [ "$who" = ours ] && [ $ours_ok = 0 ]; then addv "$key|s" n/a; addv "$key|cpu" n/a; return 0; fi
    rm -f "$COPY_DST"
    sync
    if [ "$st" = warm ]; then
        cat "$COPY_SRC" > /dev/null
    else
        dd if="$COPY_SRC" iflag=nocache count=0 status=none 2>/dev/null
    fi
    if [ -z "${SAID[$st]:-}" ]; then
        echo "copy: the source $st: $(cached_pct "$COPY_SRC")% of it in the page cache before the copy"
        SAID[$st]=1
    fi
    steal_begin
    t0=$(now_us)
    if [ "$who" = ours ]; then
        # shellcheck disable=SC2086
        out=$(cpu_timed "$TMPD/copy.cpu" timeout 600 taskset -c "$CPU" $OURS copy "$COPY_SRC" "$COPY_DST" 2>&1)
    else
        out=$(cpu_timed "$TMPD/copy.cpu" timeout 600 taskset -c "$CPU" cp "$COPY_SRC" "$COPY_DST" 2>&1)
    fi
    rc=$?
    t1=$(now_us)
    steal_end "$key"
    if [ $rc = 0 ] && [ -z "${COPY_CHECKED:-}" ] && [ "$who" = ours ]; then
        # the copy's bytes, once
        if cmp -s "$COPY_SRC" "$COPY_DST"; then COPY_CHECKED=1
        else say "ours: the copy differs from its source"; rc=1
        fi
    fi
    if [ $rc != 0 ]; then
        if [ "$who" = ours ]; then say "ours: copy failed (status $rc): $(tail -1 <<< "$out")"; ours_ok=0
        else say "PEER FAILED: cp (status $rc): $(tail -1 <<< "$out")"; fail=1
        fi
        addv "$key|s" n/a; addv "$key|cpu" n/a; return 0
    fi
    [ "$who" = ours ] && V["$key|stats"]="$(grep -E '^(way|stats|mode) ' <<< "$out" | tr '\n' ' ')"
    addv "$key|s" "$(awk -v w=$((t1 - t0)) 'BEGIN {printf "%.3f\n", w / 1e6}')"
    addv "$key|cpu" "$(cat "$TMPD/copy.cpu")"
}
declare -A SAID
COPY_ROUNDS=$((ROUNDS == 1 ? 1 : 2 * ROUNDS + 1))
echo "copy: $OURS copy SRC DST (aco_rt_splice through a pipe, 256 KiB chunks) vs cp SRC DST; $COPY_MIB MiB, DST removed and sync before each, untimed; $COPY_ROUNDS interleaved rounds"
# One untimed copy of each first: the first copy after the reads took 2.1-2.2 s
# here where the next ones took 0.4-0.5 (the destination's page cache
# taking memory the guest had not touched for a while), whoever ran it.
if [ $mode != smoke ]; then
    for who in ours cp; do
        rm -f "$COPY_DST"; sync
        if [ $who = ours ]; then
            [ $ours_ok = 1 ] && timeout 600 taskset -c "$CPU" $OURS copy "$COPY_SRC" "$COPY_DST" > /dev/null 2>&1
        else
            timeout 600 taskset -c "$CPU" cp "$COPY_SRC" "$COPY_DST"
        fi
    done
    echo "copy: one untimed copy of each done"
fi
order="ours cp"
for r in $(seq 1 "$COPY_ROUNDS"); do
    for st in warm cold; do
        for who in $order; do copy_run "$who" "$st"; done
    done
    order="${order#* } ${order%% *}"
done
rm -f "$COPY_DST"
echo "(the reads and the copy took $(( ($(now_us) - T0) / 1000000 )) s)"
[ $mode = smoke ] || check_idle "after the runs"

# ---- the table and the headlines -----------------------------------------------
echo
echo "(CPU per I/O: utime + stime of the process (ours, threads: getrusage over the run; fio: its job's"
echo " usr_cpu + sys_cpu over job_runtime, from its JSON; fio_proc: the fio command's rusage, start-up and"
echo " main process included) over the reads; steal%: what the hypervisor took of CPU $CPU meanwhile;"
echo " fio batched, fio_nb not: the headlines take the better of the two)"
printf '%-7s %-3s %-8s %10s %9s %11s %7s   %s\n' state qd who iops cpu_ns iops/cpu_s steal% "iops of each round"
for st in direct cached; do
    for qd in $DEPTHS; do
        for who in $WHO; do
            [ $who = fio_nb ] && [ "$qd" = 1 ] && continue
            [ $who = floor ] && [ $st = direct ] && continue
            [ $who = ours_nf ] && [ $st = cached ] && continue
            k="$st|$qd|$who"
            printf '%-7s %-3s %-8s %10s %9s %11s %7s   %s\n' $st $qd $who "$(med %.0f "$k|iops")" \
                "$(med %.0f "$k|cpu")" "$(med %.0f "$k|ipc")" "$(med %.1f "$k|steal")" "$(rounds "$k|iops")"
            case $who in fio|fio_nb) [ $have_fio = 1 ] && [ -n "$(median "$k|pcpu" | grep -v n/a)" ] &&
                printf '%-7s %-3s %-8s %10s %9s\n' $st $qd "${who}_proc" "" "$(med %.0f "$k|pcpu")" ;;
            esac
        done
        for who in ours epoll; do
            [ -n "${V[$st|$qd|$who|stats]:-}" ] && echo "        ($who, the last run: ${V[$st|$qd|$who|stats]})"
        done
    done
done
printf '%-5s %-6s %8s %8s %7s   %s\n' copy who s cpu_s steal% "s of each round"
for st in warm cold; do
    for who in ours cp; do
        k="copy|$st|$who"
        printf '%-5s %-6s %8s %8s %7s   %s\n' $st $who "$(med %.3f "$k|s")" "$(med %.3f "$k|cpu")" \
            "$(med %.1f "$k|steal")" "$(rounds "$k|s")"
    done
    [ -n "${V[copy|$st|ours|stats]:-}" ] && echo "      (ours, the last run: ${V[copy|$st|ours|stats]})"
done
# a row whose CPU the hypervisor took 5% or more of: a warning (not in --smoke,
# whose 1 s runs are a few clock ticks)
if [ $mode != smoke ]; then
    for k in "${!V[@]}"; do
        case $k in *"|steal") ;; *) continue ;; esac
        st=$(med %.0f "$k")
        [ "$st" != n/a ] && [ "$st" -ge 5 ] &&
            say "warning: the hypervisor took ${st}% of CPU $CPU (steal) during ${k%|steal} (median): its figures are suspect"
    done | sort
fi
# better HOW A B: the better of two figures (HOW max or min), either n/a
better() {
    awk -v how="$1" -v a="$2" -v b="$3" 'BEGIN {
        if (a == "n/a") { print b; exit } if (b == "n/a") { print a; exit }
        if (how == "max") print (a + 0 >= b + 0 ? a : b); else print (a + 0 <= b + 0 ? a : b) }'
}
for st in direct cached; do
    for qd in $DEPTHS; do
        k="$st|$qd"
        fio_iops=$(better max "$(median "$k|fio|iops")" "$(median "$k|fio_nb|iops")")
        fio_cpu=$(better min "$(median "$k|fio|cpu")" "$(median "$k|fio_nb|cpu")")
        for who in ours epoll; do
            sfx=""; [ $who = epoll ] && sfx=_epoll
            "$AGG" headline -f %.0f "file_${st}_qd${qd}_iops$sfx" ours="$(median "$k|$who|iops")" fio="$fio_iops"
            "$AGG" headline -f %.0f "file_${st}_qd${qd}_cpu_ns_per_io$sfx" ours="$(median "$k|$who|cpu")" fio="$fio_cpu"
            "$AGG" headline -f %.0f "file_${st}_qd${qd}_iops_per_cpu_s$sfx" ours="$(median "$k|$who|ipc")" threads="$(median "$k|threads|ipc")"
        done
        # registered buffers (aco_rt_register_buffers) against none
        [ $st = direct ] && "$AGG" headline -f %.0f "file_direct_qd${qd}_cpu_ns_per_io_fixedbufs" \
            ours="$(median "$k|ours|cpu")" unregistered="$(median "$k|ours_nf|cpu")"
        # what the best io_uring user gets against the threads: the machine's
        # own limit on that ratio (its kernel's cost per read)
        fio_ipc=$(awk -v c="$fio_cpu" 'BEGIN { if (c == "n/a" || c + 0 <= 0) print "n/a"; else printf "%.0f", 1e9 / c }')
        "$AGG" headline -f %.0f "file_${st}_qd${qd}_iops_per_cpu_s_fio" fio="$fio_ipc" threads="$(median "$k|threads|ipc")"
        # a page cache hit against one pread(2) per read, with the floor:
        # preadv2(RWF_NOWAIT), the call aco_rt_pread makes for it
        [ $st = cached ] && "$AGG" headline -f %.0f "file_cached_qd${qd}_cpu_ns_per_io_vs_pread" \
            ours="$(median "$k|ours|cpu")" pread="$(median "$k|threads|cpu")" floor="$(median "$k|floor|cpu")"
    done
done
for st in warm cold; do
    sfx=""; [ $st = cold ] && sfx=_cold
    "$AGG" headline -f %.3f "file_copy_1g_s$sfx" ours="$(median "copy|$st|ours|s")" cp="$(median "copy|$st|cp|s")"
    "$AGG" headline -f %.3f "file_copy_1g_cpu_s$sfx" ours="$(median "copy|$st|ours|cpu")" cp="$(median "copy|$st|cp|cpu")"
done
[ $mode = smoke ] && [ $ours_ok = 0 ] && { say "aco_file_bench is missing or failed: --smoke fails"; fail=1; }
exit $fail
