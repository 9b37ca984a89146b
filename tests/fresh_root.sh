#!/usr/bin/env bash
# A newcomer's path from a bare machine, as README.md gives it (bash test.sh
# fresh; not in the default run: it takes 4 to 10 minutes on 2 vCPUs,
# root and the network):
#  1. a bare Debian 12 (bookworm) root made by debootstrap --variant=minbase
#     (no gcc, no git, no python3, no sudo) from the mirror of this
#     machine's apt sources, with its package sources (updates, security);
#     /proc, /sys, /dev, /dev/pts and /dev/shm mounted for it, and
#     /etc/hosts as Debian's installer writes it (debootstrap writes none);
#  2. a clean clone of the project's HEAD in it as /root/libaco (cloned from
#     here: the root has no git);
#  3. there, as root with no sudo, in a clean environment (PATH, HOME=/root,
#     LANG=C.UTF-8), README.md's fenced blocks in order, each run as
#     `bash -ex` from the checkout: every ```sh block of its "Packages"
#     section, then its first ```c block written as counter.c and its echo
#     server (the ```c block marked `<!-- check_docs: server -->`) as
#     echo.c, each followed by the ```sh block after it (gcc ... counter.c;
#     bash make.sh ..., gcc ... echo.c); ./counter must print "got 0", "got 1",
#     "got 2", and `./echo PORT` must send back byte for byte a line sent
#     with nc (netcat-openbsd, which the README installed);
#  4. none of the services the installs bring (redis-server, nginx, h2o,
#     postgresql, mariadb) is enabled after the paste (no link to them
#     under /etc/systemd/system/*.wants/, no S link in /etc/rc[2-5].d/),
#     though the installs enabled each (deb-systemd-helper's records of
#     what it enabled say so: else the check proves nothing), and no
#     process is left running in the root.
# The blocks are read from this checkout's README.md as it is (uncommitted
# changes too: a README change is what gets tested), the code from HEAD.  A
# block that fails is named by its line, with its output's tail.  The mounts
# are undone and the root removed whatever ends the script; with a mount
# left, the root is left too, said.  It works inside a chroot (CI's: .ci/run
# runs there as root, and this makes a root inside it).
# Prints the time of each step and ends with a one-line verdict; exit status
# non-zero on any failure.
# Environment: FRESH_MIRROR (the Debian mirror; default: this machine's apt
# sources' one, else deb.debian.org), TMPDIR (where the root is made: /tmp).
set -uo pipefail
cd "$(dirname "$0")/.."
. tests/lib.sh
# its mounts in a namespace of its own: they go with it, whatever ends it
in_private_mounts "$0" "$@"
top=$(pwd)
t0=$SECONDS
me=fresh_root

# Each step's start, printed as it starts; their lengths at the end.
times=()
step_name="" step_t=$SECONDS
step() {    # step <name>: the previous step ends, this one starts
    [ -z "$step_name" ] || times+=("$(printf '%5d s  %s' $((SECONDS - step_t)) "$step_name")")
    step_name=$1 step_t=$SECONDS
    [ -z "$1" ] || echo "== $1 (at $((SECONDS - t0)) s)"
}

root=""       # the root, once made
# What undoes the root, whatever ends the script.
mounts_under() {    # mounts_under <dir>: the mount points under it, deepest first
    awk -v d="$1/" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo | sort -r
}
in_root() {         # in_root: the processes whose root is the root
    local p
    for p in /proc/[0-9]*; do
        [ "$(readlink "$p/root" 2> /dev/null)" = "$root" ] && echo "${p#/proc/}"
    done
    return 0
}
cleanup() {
    local m p t=$SECONDS
    [ -n "$root" ] && [ -d "$root" ] || return 0
    # what the blocks left running there (a server): ours, ended by id
    for p in $(in_root); do kill -9 "$p" 2> /dev/null; done
    for m in $(mounts_under "$root"); do umount -l "$m" || echo "$me: umount -l $m failed"; done
    if mountpoint -q "$root"; then umount -l "$root" || echo "$me: umount -l $root failed"; fi
    if [ -n "$(mounts_under "$root")" ] || mountpoint -q "$root"; then
        echo "$me: still mounted under $root, so it is left in place:"
        mounts_under "$root" | sed 's/^/    /'
        return 1
    fi
    rm -rf --one-file-system "$root" "$root.debootstrap.log"
    echo "$me: the root removed ($((SECONDS - t)) s)"
}
# The verdict, one line, the last: after the root is undone.
finish() {      # finish <status> <verdict>
    local l
    trap - EXIT
    step ""
    for l in "${times[@]+"${times[@]}"}"; do echo "$me: $l"; done
    cleanup || { [ "$1" != 0 ] || set -- 1 "$me: FAIL: the root could not be removed (above)"; }
    echo "$2 ($((SECONDS - t0)) s)"
    exit "$1"
}
verdict_fail() { finish 1 "$me: FAIL: $*"; }
[ "$(id -u)" = 0 ] || verdict_fail "needs root (debootstrap, mount, chroot): run it as root"
[ -d .git ] || [ -f .git ] || verdict_fail "$top is not a git checkout: the root gets a clone of HEAD"

# ---------------------------------------------------------------------------
# The host's tools: debootstrap and git, installed here if missing.
step "host tools"
want=()
command -v debootstrap > /dev/null || want+=(debootstrap)
command -v git > /dev/null || want+=(git)
if [ ${#want[@]} -gt 0 ]; then
    echo "$me: installing ${want[*]} on this machine"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq --no-install-recommends "${want[@]}" > /dev/null 2>&1 ||
        { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${want[@]}" > /dev/null; } ||
        verdict_fail "cannot install ${want[*]} (apt-get)"
fi
for c in debootstrap git chroot mount umount mountpoint; do
    command -v $c > /dev/null || verdict_fail "'$c' not found"
done
# The mirror of this machine's apt sources (deb822 or one-line format).
mirror=${FRESH_MIRROR:-}
if [ -z "$mirror" ]; then
    mirror=$(cat /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2> /dev/null |
        awk '/^URIs:/ || /^deb / {for (i = 2; i <= NF; i++) if ($i ~ /^https?:\/\/.*\/debian\/?$/) {print $i; exit}}')
fi
mirror=${mirror:-http://deb.debian.org/debian}

# ---------------------------------------------------------------------------
# The root, and what undoes it whatever ends the script.
root=$(mktemp -d "${TMPDIR:-/tmp}/fresh_root.XXXXXX") && root=$(cd "$root" && pwd -P) ||
    verdict_fail "mktemp -d failed"
# a machine's / is 755: mktemp's 700 keeps apt's _apt and postgres out
chmod 755 "$root"
trap cleanup EXIT
trap 'verdict_fail "ended by SIGHUP"' HUP
trap 'verdict_fail "ended by SIGINT"' INT
trap 'verdict_fail "ended by SIGTERM"' TERM

step "debootstrap --variant=minbase bookworm ($mirror)"
debootstrap --variant=minbase bookworm "$root" "$mirror" > "$root.debootstrap.log" 2>&1 ||
    { tail -15 "$root.debootstrap.log" | sed 's/^/    | /'; verdict_fail "debootstrap failed (above)"; }
# This machine's package sources: the same updates and security suites.
if [ -f /etc/apt/sources.list.d/debian.sources ]; then
    rm -f "$root/etc/apt/sources.list"
    cp /etc/apt/sources.list.d/debian.sources "$root/etc/apt/sources.list.d/"
elif grep -qE '^deb .*/debian(-security)?/? ' /etc/apt/sources.list 2> /dev/null; then
    grep -E '^deb .*/debian(-security)?/? ' /etc/apt/sources.list > "$root/etc/apt/sources.list"
fi
cp /etc/resolv.conf "$root/etc/resolv.conf" 2> /dev/null
printf '127.0.0.1\tlocalhost\n127.0.1.1\t%s\n::1\tlocalhost ip6-localhost ip6-loopback\n' \
    "$(hostname 2> /dev/null || cat /proc/sys/kernel/hostname)" > "$root/etc/hosts"
# Nothing mounted here may reach the machine's own mounts: in a namespace
# whose mounts are not private (in a chroot, in_private_mounts leaves them
# as they are), the root's own bind, made private, holds what goes under
# it; and each bind of a shared /dev is made private before anything is
# mounted on it (else a tmpfs on its shm would show in the machine's /dev).
if [ "${ACO_PRIVATE_MOUNTS:-}" != private ]; then
    mount --bind "$root" "$root" && mount --make-private "$root" ||
        verdict_fail "cannot make $root a private mount"
fi
mount --bind /dev "$root/dev" && mount --make-private "$root/dev" &&
    mount --bind /dev/pts "$root/dev/pts" && mount --make-private "$root/dev/pts" &&
    mkdir -p "$root/dev/shm" && mount -t tmpfs tmpfs "$root/dev/shm" &&
    mount -t proc proc "$root/proc" && mount -t sysfs sysfs "$root/sys" ||
    verdict_fail "cannot mount /dev, /proc or /sys for the root"
for c in sudo gcc git python3; do
    [ ! -e "$root/usr/bin/$c" ] || verdict_fail "the bare root has $c: it is not the bare machine this check needs"
done

step "a clean clone of HEAD as /root/libaco"
head=$(git rev-parse --short HEAD)
git clone -q "$top" "$root/root/libaco" || verdict_fail "git clone $top failed"
work=$root/root/fresh   # the blocks, their logs, the proof's files
mkdir -p "$work"

# ---------------------------------------------------------------------------
# README.md's fenced blocks: NN.<language> each, and an index line
# "NN <tab> language <tab> line <tab> section <tab> the line before".
step "README.md's blocks"
awk -v dir="$work" '
    inb && /^```[[:space:]]*$/ { inb = 0; close(f); next }
    inb { print > f; next }
    /^```[A-Za-z0-9_+-]*[[:space:]]*$/ {
        lang = $0; sub(/^```/, "", lang); sub(/[[:space:]]*$/, "", lang)
        if (lang == "") lang = "-"
        n++; f = sprintf("%s/%02d.%s", dir, n, lang); printf "" > f
        printf "%02d\t%s\t%d\t%s\t%s\n", n, lang, NR, sec, prev > (dir "/index")
        inb = 1; next }
    /^## / { sec = substr($0, 4) }
    { prev = $0 }
    END { if (inb) { print "README.md: a block is not closed"; exit 1 } }' README.md ||
    verdict_fail "README.md's blocks cannot be read"
git diff --quiet HEAD -- README.md 2> /dev/null ||
    echo "$me: README.md has uncommitted changes: its blocks as they are now run against HEAD's code"
field() { awk -F'\t' -v n="$1" -v c="$2" '$1 == n {print $c}' "$work/index"; }
pkg_blocks=$(awk -F'\t' '$2 == "sh" && $4 == "Packages" {print $1}' "$work/index")
counter=$(awk -F'\t' '$2 == "c" {print $1; exit}' "$work/index")
server=$(awk -F'\t' '$2 == "c" && $5 == "<!-- check_docs: server -->" {print $1; exit}' "$work/index")
[ -n "$pkg_blocks" ] || verdict_fail "README.md: no \`\`\`sh block in its \"Packages\" section"
[ -n "$counter" ] || verdict_fail "README.md: no \`\`\`c block"
[ -n "$server" ] || verdict_fail "README.md: no \`\`\`c block marked '<!-- check_docs: server -->'"
# The block after each program compiles it by the name this check gives it.
declare -A write_before=()
for pair in "$counter:counter.c" "$server:echo.c"; do
    n=${pair%%:*} file=${pair#*:}
    next=$(printf '%02d' $((10#$n + 1)))
    [ "$(field "$next" 2)" = sh ] && grep -qw "${file%.c}\.c" "$work/$next.sh" ||
        verdict_fail "README.md:$(field "$n" 3): the block after this program is no \`\`\`sh block compiling $file"
    cp "$work/$n.c" "$work/$file"
    write_before[$next]=$file
done
run_list=$(printf '%s\n' $pkg_blocks "${!write_before[@]}" | sort -u)
echo "$me: $(echo "$pkg_blocks" | wc -w) blocks of \"Packages\", counter.c, echo.c and" \
     "the blocks that build them (README.md lines $(for n in $run_list; do field "$n" 3; done | paste -sd' '))"

# ---------------------------------------------------------------------------
# The blocks, as a newcomer pastes them: root, no sudo, a clean environment,
# in the checkout, nothing on stdin.
in_chroot() {       # in_chroot <seconds> <command...>: in the root, from the checkout, killed after <seconds>
    local secs=$1
    shift
    timeout --foreground -k 10 "$secs" chroot "$root" /usr/bin/env -i \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
        /bin/bash -c 'cd /root/libaco && exec "$@"' _ "$@" < /dev/null
}
svc='(redis-server|nginx|h2o|postgresql|mariadb)'
enabled() {         # enabled: the services' links that enable them, one a line
    find "$root/etc/systemd/system" -path '*.wants/*' 2> /dev/null |
        grep -E "/$svc(@[^/]*)?\.service\$"
    find "$root"/etc/rc[2-5].d -name 'S*' 2> /dev/null | grep -E "/S[0-9]+$svc\$"
    return 0
}
for n in $run_list; do
    what="README.md:$(field "$n" 3) (\`\`\`sh in \"$(field "$n" 4)\")"
    step "$what"
    if [ -n "${write_before[$n]:-}" ]; then
        cp "$work/${write_before[$n]}" "$root/root/libaco/${write_before[$n]}"
        echo "$me: wrote ${write_before[$n]} (README.md:$(field $(printf '%02d' $((10#$n - 1))) 3))"
    fi
    sed 's/^/    /' "$work/$n.sh"
    # (20 minutes at most: a block that waits for an answer fails)
    if ! in_chroot 1200 /bin/bash -ex -o pipefail "/root/fresh/$n.sh" > "$work/$n.log" 2>&1; then
        tail -25 "$work/$n.log" | sed 's/^/    | /'
        verdict_fail "the block at $what failed (its output's tail above)"
    fi
done

# ---------------------------------------------------------------------------
step "./counter and ./echo PORT with nc"
fresh_port
port=$FREE_PORT
cat > "$work/prove.sh" <<'SH'
set -u
port=$1
cd /root/libaco
./counter > /root/fresh/counter.out 2>&1 || { rc=$?; cat /root/fresh/counter.out; echo "./counter exited $rc"; exit 1; }
printf 'got 0\ngot 1\ngot 2\n' | cmp -s - /root/fresh/counter.out ||
    { cat /root/fresh/counter.out; echo "./counter did not print got 0, got 1, got 2 (above)"; exit 1; }
echo "./counter: $(paste -sd, /root/fresh/counter.out)"
./echo "$port" > /root/fresh/echo.log 2>&1 &
pid=$!
trap 'kill $pid 2> /dev/null' EXIT
for _ in $(seq 100); do
    nc -z localhost "$port" 2> /dev/null && break
    kill -0 $pid 2> /dev/null || { cat /root/fresh/echo.log; echo "./echo $port ended by itself"; exit 1; }
    sleep 0.1
done
printf 'a line from a fresh root, %s: tab\t, bytes \001\377 and UTF-8 \303\251\n' "$(date +%s.%N)" > /root/fresh/sent
nc -N -w 10 localhost "$port" < /root/fresh/sent > /root/fresh/got 2> /root/fresh/nc.log ||
    { cat /root/fresh/nc.log; echo "nc localhost $port failed"; exit 1; }
if ! cmp /root/fresh/sent /root/fresh/got; then
    echo "sent:"; od -c /root/fresh/sent; echo "got back:"; od -c /root/fresh/got; exit 1
fi
kill -0 $pid 2> /dev/null || { cat /root/fresh/echo.log; echo "./echo $port ended after the line"; exit 1; }
echo "./echo $port: nc localhost $port got back the $(wc -c < /root/fresh/sent) bytes it sent"
SH
if ! in_chroot 120 /bin/bash /root/fresh/prove.sh "$port" > "$work/prove.log" 2>&1; then
    tail -25 "$work/prove.log" | sed 's/^/    | /'
    verdict_fail "./counter or ./echo with nc (above)"
fi
sed 's/^/    /' "$work/prove.log"

# ---------------------------------------------------------------------------
step "the services: disabled, none running"
left=$(enabled)
if [ -n "$left" ]; then
    echo "$left" | sed "s|^$root|    |"
    verdict_fail "after README.md's blocks these services are still enabled (above)"
fi
# What the packages' installs enabled (deb-systemd-helper keeps a record
# of each link it made, which a disable leaves).
for s in redis-server nginx h2o postgresql mariadb; do
    ls "$root"/var/lib/systemd/deb-systemd-helper-enabled/*.wants/$s.service > /dev/null 2>&1 ||
        verdict_fail "the install did not enable $s.service: the check that the README disables it proves nothing"
done
# the policy-rc.d the blocks made for their installs is gone again
[ ! -e "$root/usr/sbin/policy-rc.d" ] ||
    verdict_fail "README.md's blocks left /usr/sbin/policy-rc.d behind: no service could start there again"
sleep 1
running=$(for p in $(in_root); do echo "$p $(tr '\0' ' ' < "/proc/$p/cmdline" 2> /dev/null)"; done)
if [ -n "$running" ]; then
    echo "$running" | sed 's/^/    /'
    verdict_fail "processes left running in the root after the paste (above)"
fi
echo "    the installs enabled redis-server, nginx, h2o, postgresql and mariadb; the paste disabled them all; no process runs; no policy-rc.d left"
finish 0 "$me: ok: a bare Debian 12 root took README.md's packages, built HEAD ($head) as it says, ran counter.c and echo.c (nc got its line back), no service left enabled"
