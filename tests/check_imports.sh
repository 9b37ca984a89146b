#!/usr/bin/env bash
# The arrows point one way: apps/ -> rt/ -> the core.  Checked twice:
# in the sources (which headers each part includes) and in the objects
# output/ holds (which symbols each part takes from which).
#   - the core (aco.h, aco.c, acosw.S) includes nothing of rt/;
#   - rt/ includes nothing of apps/, bench/ or tests/, and its objects take
#     no symbol that an app's object defines;
#   - apps/ and bench/ include only the runtime's public headers (aco_rt.h,
#     aco_rt_pthread*.h), never its internals (rt_impl.h, rt_sys.h);
#   - no I/O backend (io_uring.o, io_epoll.o) takes a symbol the I/O front
#     (io.o) defines: the descriptor table and everything both need live
#     below them;
#   - inside rt/, the layers of the table below (LAYERS): every file is in
#     it; a file's object takes symbols only from files of lower layers or
#     of its own unit, and it includes only headers of its layer or lower:
#     no set of more than two files depends on itself in a circle;
#   - each part of struct aco_rt_sched (rt_impl.h) is written only by its
#     owners (OWNERS): an assignment, ++/--, or atomic store through
#     ->part (->part.field) anywhere else fails, and so does a write to a
#     counter of ->st by a file that does not own it.
#   - the core path, aco.c without the parts it includes at its end
#     (aco_fault.c, aco_checked.c, aco_tools.c), is at most 1,200 lines; it
#     names no function or variable of a part but the six hooks, and its
#     opening comment names those six (docs/core.md, "Inside the core").
# It prints both tables.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUTPUT:-output}
fail=0
bad() { echo "FAIL: $*"; fail=1; }

includes() { grep -ho '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[^"]*"' "$@" 2>/dev/null |
             sed 's/.*"\(.*\)"/\1/' | sort -u; }
rt_headers=$(cd rt && ls ./*.h | sed 's|^\./||')
app_headers=$(cd apps && ls ./*.h | sed 's|^\./||')

for h in $(includes aco.h aco.c acosw.S); do
    case " $(echo $rt_headers) " in *" ${h##*/} "*) bad "the core includes the runtime's $h" ;; esac
done
python3 - <<'PY' || fail=1
import re, sys
def code(path):     # comments and strings blanked, lines kept
    src = open(path).read()
    src = re.sub(r"/\*.*?\*/|//[^\n]*|\"(?:\\.|[^\"\\\n])*\"",
                 lambda m: re.sub(r"[^\n]", " ", m.group(0)), src, flags=re.S)
    return src
core_all = open("aco.c").read()
n = core_all.count("\n")
if n > 1200:
    print("FAIL: aco.c is %d lines: the core path is at most 1,200 (docs/core.md)" % n)
    sys.exit(1)
core = code("aco.c").split("#define ACO_CORE_PARTS")[0]
hooks = sorted(set(re.findall(r"\b(ext_[a-z]+)\s*\(", core)))
want = ["ext_co", "ext_copy", "ext_init", "ext_mem", "ext_stack", "ext_switch"]
bad = []
if hooks != want:
    bad.append("aco.c calls the hooks %s, not the six %s" % (hooks, want))
opening = core_all.split("*/")[0]
bad += ["aco.c's opening comment does not name the hook %s" % h for h in want
        if not re.search(r"\b%s\b" % h, opening)]
for part in ("aco_fault.c", "aco_checked.c", "aco_tools.c"):
    names = set(re.findall(r"^(?:static |void |int |aco_t\* )[^;=(]*?\(?\*?\b([A-Za-z_]\w*)\)?\s*[(;=\[]",
                           code(part), flags=re.M)) - set(want)
    names |= set(re.findall(r"^static [^;=(]*\(\*\s*(\w+)\)", code(part), flags=re.M))
    names -= {"int", "void", "char", "size_t", "__attribute__", "inline"}
    for name in sorted(names):
        m = re.search(r"\b%s\b" % name, core)
        if m:
            bad.append("aco.c:%d names %s of %s: the parts join the core only through the hooks"
                       % (core.count("\n", 0, m.start()) + 1, name, part))
for b in bad:
    print("FAIL: " + b)
sys.exit(1 if bad else 0)
PY
for h in $(includes rt/*.c rt/*.h); do
    case " $(echo $app_headers) " in *" ${h##*/} "*) bad "rt/ includes the programs' $h" ;; esac
    case $h in *apps/*|*bench/*|*tests/*) bad "rt/ includes $h" ;; esac
done
for h in $(includes apps/*.c apps/*.h bench/*.c); do
    case ${h##*/} in rt_impl.h|rt_sys.h) bad "apps/ or bench/ include the runtime's internal $h" ;; esac
done

# Symbols: defined (global) and undefined ones of an object.
defined() { nm -g --defined-only "$1" | awk '{print $3}' | sort -u; }
undefined() { nm -u "$1" | awk '{print $2}' | sort -u; }
obj=$OUT/obj/rt
if [ ! -f "$obj/io.o" ]; then
    bad "$obj/io.o not found: run 'bash make.sh' first"
else
    for b in io_uring io_epoll; do
        [ -f "$obj/$b.o" ] || continue
        took=$(comm -12 <(undefined "$obj/$b.o") <(defined "$obj/io.o"))
        [ -z "$took" ] || bad "the backend $b.o takes from the I/O front io.o: $(echo $took)"
    done
    app_syms=$(cat <(defined "$obj/resp.o") <(defined "$obj/kv.o") | sort -u)
    for o in $(ls "$obj"/*.o); do
        case ${o##*/} in resp.o|kv.o|port_*.o) continue ;; esac
        took=$(comm -12 <(undefined "$o") <(echo "$app_syms"))
        [ -z "$took" ] || bad "${o##*/} takes from the programs' objects: $(echo $took)"
    done
    core=$OUT/obj/lib/aco.o
    # hook.o defines libc's names on purpose (the syscall hooks)
    rt_syms=$(for o in "$obj"/*.o; do
                  case ${o##*/} in hook.o|resp.o|kv.o|port_*.o) ;; *) defined "$o" ;; esac
              done | sort -u)
    took=$(comm -12 <(undefined "$core") <(echo "$rt_syms"))
    [ -z "$took" ] || bad "the core's aco.o takes from the runtime: $(echo $took)"
fi

# ---------------------------------------------------------------------------
# The runtime's layers.  unit rank files: a file calls only lower ranks, or
# the other file of its unit.
LAYERS='
wheel     0  timer.c            the timing wheel (rt_wheel.h)
fdtab     0  fd.c               the descriptor table (rt_fd.h)
kernel    1  loop.c co.c        loop, park/wake, wait kinds, inbox; cos, records, pool exchange (rt_impl.h)
sync      2  sync.c             mutex, cond, sem, wait group
chan      2  chan.c             channels, select
keys      2  keys.c             co-local keys
offload   2  offload.c          helper threads
epoll     2  io_epoll.c         the epoll backend
ready     3  ready.c            the readiness way (rt_io.h)
uring     4  io_uring.c lend.c  the io_uring backend, lent receives
io        5  io.c               the I/O calls, closes across threads
file      5  file.c             files, directories, splice, sendfile
sched     6  sched.c            a scheduler made and freed: every part in order
pool      7  pool.c             pools of threads, groups
bufio     7  bufio.c            buffered I/O
net       7  net.c              listen, dial
signal    7  signal.c           signals waited for in a co
pthread   7  pthread.c          the pthread-like face
hook      7  hook.c             the syscall hooks (libaco_hook.so)
tls       8  tls.c              TLS over OpenSSL (libaco_rt_tls), on bufio
'
# Headers: name rank (public headers and the core's: any file).
HEADERS='rt_base.h 0 rt_sys.h 0 rt_wheel.h 0 rt_fd.h 0 rt_impl.h 1 rt_io.h 3'
# Parts of struct aco_rt_sched and the files that may write them (rt_impl.h:
# the kernel's inlines); st.FIELD: a counter of aco_rt_stats_t.
OWNERS='
run         loop.c rt_impl.h
recs        co.c rt_impl.h
pooled      co.c
newq        co.c
mail        loop.c co.c
ld          loop.c co.c rt_impl.h
ask         loop.c
wheel       timer.c
fds         fd.c
backend     io_epoll.c io_uring.c
reg         io.c
cl          io.c
lend        lend.c
offloads    offload.c
st.switches     loop.c rt_impl.h
st.handoffs     rt_impl.h
st.cos_alive    loop.c co.c
st.cos_parked   rt_impl.h
st.cos_ready    rt_impl.h
st.timers       loop.c rt_impl.h
st.spawned      co.c
st.io_inflight  io_epoll.c io_uring.c lend.c
st.polls        io_epoll.c io_uring.c
st.lends        lend.c
st.lend_heap    lend.c
st.lend_ring    lend.c
st.file_nowait  file.c
st.file_uring   file.c
st.file_helper  file.c
st.file_bounce  file.c
st.file_fixed   file.c
fbuf        file.c
'
export LAYERS HEADERS OWNERS
python3 - "$obj" <<'PY' || fail=1
import os, re, subprocess, sys, collections
obj = sys.argv[1]
unit, rank, files = {}, {}, []
print("layers (a file calls lower ranks and its own unit only):")
for line in os.environ["LAYERS"].strip().splitlines():
    u, r, rest = line.split(None, 2)
    fs = [w for w in rest.split() if w.endswith(".c")]
    for f in fs:
        unit[f], rank[f] = u, int(r)
    files += fs
    print("  %-8s %s  %s" % (u, r, rest))
hrank = dict(zip(*[iter(os.environ["HEADERS"].split())] * 2))
bad = []
for f in sorted(os.listdir("rt")):
    if f.endswith(".c") and f not in unit:
        bad.append("rt/%s is in no layer (tests/check_imports.sh, LAYERS)" % f)
# includes
for f in sorted(os.listdir("rt")):
    if not (f.endswith(".c") or f in hrank):
        continue
    me = rank.get(f, int(hrank.get(f, 99)))
    for inc in re.findall(r'^\s*#\s*include\s*"([^"]+)"', open("rt/" + f).read(), re.M):
        h = os.path.basename(inc)
        if h in hrank and int(hrank[h]) > me:
            bad.append("rt/%s (rank %d) includes %s (rank %s)" % (f, me, h, hrank[h]))
# symbols
def syms(o, undef):
    out = subprocess.run(["nm"] + (["-u"] if undef else ["-g", "--defined-only"]) + [o],
                         capture_output=True, text=True, check=True).stdout
    return {l.split()[-1] for l in out.splitlines() if l.strip()}
defs, needs = {}, {}
for f in files:
    o = os.path.join(obj, f[:-2] + ".o")
    if not os.path.exists(o):
        bad.append("%s not found: run 'bash make.sh' first" % o)
        continue
    defs[f], needs[f] = syms(o, False), syms(o, True)
owner = {s: f for f in defs for s in defs[f]}
edges = collections.defaultdict(set)
for f in needs:
    for s in needs[f]:
        t = owner.get(s)
        if t and t != f and t != "hook.c":
            edges[f].add(t)
            if not (rank[t] < rank[f] or unit[t] == unit[f]):
                bad.append("%s takes %s from %s: an edge up (%s %d -> %s %d)"
                           % (f, s, t, unit[f], rank[f], unit[t], rank[t]))
index, low, stack, on, sccs, n = {}, {}, [], set(), [], [0]
def strong(v):
    index[v] = low[v] = n[0]; n[0] += 1; stack.append(v); on.add(v)
    for w in sorted(edges[v]):
        if w not in index:
            strong(w); low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        c = []
        while True:
            w = stack.pop(); on.discard(w); c.append(w)
            if w == v: break
        sccs.append(sorted(c))
for f in sorted(defs):
    if f not in index:
        strong(f)
circles = [c for c in sccs if len(c) > 1]
for c in circles:
    if len(c) > 2:
        bad.append("files that depend on each other in a circle: " + " ".join(c))
print("circles (two files at most): " + ("; ".join(" <-> ".join(c) for c in circles) or "none"))
# writes
own = {}
print("owners (who writes each part of struct aco_rt_sched):")
for line in os.environ["OWNERS"].strip().splitlines():
    p, fs = line.split(None, 1)
    own[p] = fs.split()
    print("  %-15s %s" % (p, fs))
ASSIGN = r"(?:\[[^\]]*\])?\s*(?:=(?!=)|\+=|-=|\*=|/=|%=|\|=|&=|\^=|<<=|>>=|\+\+|--)"
WRITER = (r"(?:__atomic_(?:store|exchange|compare_exchange|fetch_\w+|\w+_fetch)\w*|rt_store|rt_xchg|"
          r"rt_cas|rt_fetch_add|rt_lock|rt_unlock|memset|memcpy|inbox_push)\s*\(\s*&?")
for f in sorted(os.listdir("rt")):
    if not (f.endswith(".c") or f.endswith(".h")):
        continue
    src = re.sub(r"/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group(0)),
                 open("rt/" + f).read(), flags=re.S)
    for p, fs in own.items():
        if f in fs:
            continue
        if p.startswith("st."):
            acc = r"(?:->|\.)st\." + p[3:] + r"\b"
        else:
            acc = r"->" + p + r"\b(?:\.\w+)*"
            if p.startswith("st"):
                continue
        for pat in (acc + ASSIGN, r"(?:\+\+|--)\s*[\w\[\]>.()-]*?" + acc,
                    WRITER + r"[\w\[\]>.()-]*?" + acc):
            for m in re.finditer(pat, src):
                ln = src.count("\n", 0, m.start()) + 1
                bad.append("rt/%s:%d writes %s, which only %s may: %s"
                           % (f, ln, p, " ".join(fs), m.group(0).strip()))
for b in bad:
    print("FAIL: " + b)
sys.exit(1 if bad else 0)
PY
[ $fail = 0 ] && echo "imports: apps -> rt -> core, rt/ in layers, each part written by its owners," \
                     "the core path $(wc -l < aco.c) lines, its parts behind six hooks"
exit $fail
