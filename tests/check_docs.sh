#!/usr/bin/env bash
# check_docs.sh - README.md and docs/*.md checked against the tree and the
# build in output/, so the docs cannot rot.  Exit status: the verdict.
#
# (a) Programs.  Every ```c block that contains `main(` is a complete
#     program: it is built with gcc and clang, -Wall -Wextra -Werror, and
#     run; it must exit 0 within 60 s.  A block that includes aco_rt.h or
#     aco_rt_pthread.h is linked with output/libaco_rt.a and
#     output/libaco.a (-luring when the build has io_uring) and run on each
#     backend of ACO_RT_TEST_BACKENDS (default "uring epoll"); one that
#     includes aco_rt_tls.h with output/libaco_rt_tls.a besides, -lssl
#     -lcrypto, and runs with a certificate and key the check makes
#     (openssl req) as its two arguments; any other with output/libaco.a.  A block without `main(` is a fragment and is
#     not built: a block meant to be complete must have main.  An HTML
#     comment alone on the line right before the fence says more:
#       <!-- check_docs: server -->   a TCP server taking its port as its
#           only argument: started on a free port, it must echo a line to
#           each of 5 clients connected at once, and still be running when
#           it is stopped (SIGTERM);
#       <!-- check_docs: stop -->   a server as above that stops well:
#           after the clients, SIGTERM must end it by itself within 5 s,
#           with status 0;
#       <!-- check_docs: abort -->    it must end by SIGABRT (a program
#           that shows a failure);
#       <!-- check_docs: build-only -->   built, not run;
#       <!-- check_docs: hooks -->   a program of the syscall hooks: linked
#           as docs/hooks.md says (pkg-config's libaco_hook, the shared
#           runtime) under -Wl,--as-needed, then run as any other.
# (b) Packages.  The ```sh block after README.md's
#     `<!-- check_docs: packages -->` line names, on its `apt-get install`
#     lines, exactly the packages .ci/run installs (its apt_install calls),
#     and does what .ci/run does around them (dpkg --add-architecture i386,
#     apt-mark manual gcc-12-multilib, the /usr/include/asm link).  Every
#     other `apt-get install` line of README.md names only such packages.
# (c) Links.  Every relative link of README.md and docs/*.md names a file
#     or directory that exists; an anchor (#...) into a markdown file names
#     one of its headings (GitHub's slugs).
# (d) The API index.  docs/api.md is what tools/api_index.py makes of the
#     headers now (its --check: a call added without a comment, or without
#     running the tool, fails), and it names what the libraries really
#     export: every aco* symbol of output/libaco.so, output/libaco_rt.so
#     and output/libaco_rt_tls.so (where built) is a call in it, but for the
#     few internal ones named below; every call in it that is no macro or
#     inline function is exported by one of them.
# (e) Tests described.  Every program of the tests lists and every
#     tests/check_*.sh is named in docs/correctness.md (the forms below).
set -uo pipefail
cd "$(dirname "$0")/.."
. tests/lib.sh
OUT=${OUTPUT:-output}
for t in gcc clang python3; do
    command -v $t > /dev/null || { echo "check_docs: $t not found: install $t"; exit 1; }
done
command -v nm > /dev/null || { echo "check_docs: nm not found: install binutils"; exit 1; }
for f in libaco.a libaco_rt.a libaco.so libaco_rt.so libaco_hook.so libaco_hook.pc; do
    [ -f "$OUT/$f" ] || { echo "check_docs: $OUT/$f not built (bash make.sh)"; exit 1; }
done
tmp=$(mktemp -d); trap cleanup_tmp EXIT
fails=0

# Parsing (python3): programs into $tmp/prog_N.c with a manifest line each
# (file|place|kind|mode), then (b) and (c), printing FAIL lines.
python3 - "$tmp" README.md docs/*.md > "$tmp/parse.log" <<'PY'
import os, re, sys
tmp, files = sys.argv[1], sys.argv[2:]
bad = 0
def fail(msg):
    global bad
    bad += 1
    print("FAIL " + msg)

def blocks(path):
    """(language, first line number, text, marker) of every fenced block."""
    lines = open(path).read().split("\n")
    out, i = [], 0
    while i < len(lines):
        m = re.match(r"^```(\w*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        prev = lines[i - 1].strip() if i > 0 else ""
        mk = re.match(r"^<!-- check_docs: (.*?) -->$", prev)
        j = i + 1
        while j < len(lines) and not re.match(r"^```\s*$", lines[j]):
            j += 1
        out.append((m.group(1), i + 1, "\n".join(lines[i + 1:j]) + "\n",
                    mk.group(1) if mk else None))
        i = j + 1
    return out

# (a) the programs
n = 0
with open(os.path.join(tmp, "manifest"), "w") as man:
    for path in files:
        for lang, line, text, mark in blocks(path):
            if lang != "c" or "main(" not in text:
                if lang == "c" and mark:
                    fail("%s:%d: marked '%s' but has no main(" % (path, line, mark))
                continue
            mode = mark or "run"
            if mode not in ("run", "server", "stop", "abort", "build-only", "hooks"):
                fail("%s:%d: unknown mark '%s'" % (path, line, mode))
                continue
            rt = re.search(r'#include\s+"aco_rt(_pthread)?\.h"', text) is not None
            tls = re.search(r'#include\s+"aco_rt_tls\.h"', text) is not None
            n += 1
            name = "prog_%d" % n
            open(os.path.join(tmp, name + ".c"), "w").write(text)
            man.write("%s|%s:%d|%s|%s\n" % (name, path, line,
                                            "tls" if tls else "rt" if rt else "core", mode))

# (b) the packages
def words_after_install(cmd):
    pk = []
    for part in re.split(r"&&|;|\|\||\{|\}", cmd):
        t = part.split()
        if "apt-get" in t and "install" in t:
            for w in t[t.index("install") + 1:]:
                if not w.startswith("-"):
                    pk.append(w)
    return pk

ci = open(".ci/run").read().replace("\\\n", " ")
ci_pk = []
for l in ci.split("\n"):
    t = l.split()
    if t and t[0] == "apt_install":
        ci_pk += [w for w in t[1:] if not w.startswith("-")]
if len(ci_pk) < 10:
    fail(".ci/run: found only %d packages in its apt_install calls" % len(ci_pk))
ci_set = set(ci_pk)
readme = [b for b in blocks("README.md")]
marked = [b for b in readme if b[3] == "packages"]
if len(marked) != 1:
    fail("README.md: %d blocks marked 'check_docs: packages', want 1" % len(marked))
else:
    text = marked[0][2].replace("\\\n", " ")
    got = set()
    for l in text.split("\n"):
        got |= set(words_after_install(l))
    for p in sorted(ci_set - got):
        fail("README.md: .ci/run installs %s, the README's package lines do not" % p)
    for p in sorted(got - ci_set):
        fail("README.md: the package lines install %s, .ci/run does not" % p)
    for need in ("dpkg --add-architecture i386", "apt-mark manual gcc-12-multilib",
                 "ln -s x86_64-linux-gnu/asm /usr/include/asm"):
        if need in ci and need not in text:
            fail("README.md: the package lines lack '%s' (.ci/run does it)" % need)
for lang, line, text, mark in readme:
    if mark == "packages":
        continue
    for l in text.replace("\\\n", " ").split("\n"):
        for p in words_after_install(l):
            if p not in ci_set:
                fail("README.md:%d: apt-get installs %s, .ci/run does not" % (line, p))
print("packages: %d in .ci/run" % len(ci_set))

# (c) the links
def slugs(path):
    s, inblock = set(), False
    for l in open(path).read().split("\n"):
        if l.startswith("```"):
            inblock = not inblock
        if inblock:
            continue
        m = re.match(r"^#+\s+(.*?)\s*$", l)
        if m:
            h = re.sub(r"[^\w\- ]", "", m.group(1).lower().replace("`", ""))
            s.add(h.replace(" ", "-"))
    return s

links = 0
for path in files:
    text = re.sub(r"```.*?```", "", open(path).read(), flags=re.S)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"^[a-z]+:", target):
            continue
        links += 1
        where, _, anchor = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(path), where)) if where else path
        if not os.path.exists(dest):
            fail("%s: link to %s: no such file" % (path, target))
        elif anchor and dest.endswith(".md") and anchor not in slugs(dest):
            fail("%s: link to %s: no such heading in %s" % (path, target, dest))
print("links: %d checked" % links)
sys.exit(1 if bad else 0)
PY
[ $? = 0 ] || fails=$((fails + 1))
cat "$tmp/parse.log"

# (a) build and run every program.
uring=""
grep -q ACO_RT_HAVE_URING "$OUT/obj/rt/flags" 2> /dev/null && uring=-luring
backends=${ACO_RT_TEST_BACKENDS:-uring epoll}
[ -n "$uring" ] || backends=epoll
serve_check() {     # serve_check <binary> <place> [stop]: 5 clients at once echoed
    local port pid served=0
    port=$(free_port)
    "$1" "$port" > "$tmp/server.log" 2>&1 & pid=$!
    python3 - "$port" > "$tmp/client.log" 2>&1 <<'PY' && served=1
import socket, sys, time
port = int(sys.argv[1])
def connect():
    for _ in range(100):
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=5)
        except OSError:
            time.sleep(0.05)
    raise SystemExit("no server on port %d" % port)
cs = [connect() for _ in range(5)]
for i, c in enumerate(cs):
    c.sendall(b"hello from client %d\n" % i)
for i, c in enumerate(cs):
    want, got = b"hello from client %d\n" % i, b""
    while len(got) < len(want):
        b = c.recv(4096)
        if not b:
            break
        got += b
    if got != want:
        raise SystemExit("client %d: sent %r, got back %r" % (i, want, got))
    c.close()
PY
    if ! kill -0 $pid 2> /dev/null; then
        wait $pid; bad "$2: the server ended by itself (status $?)"; cat "$tmp/server.log"
        return
    fi
    if [ "${3:-}" = stop ]; then
        # a graceful stop: SIGTERM, then its own exit 0 within 5 s
        kill -TERM $pid
        local i st=""
        for i in $(seq 50); do kill -0 $pid 2> /dev/null || break; sleep 0.1; done
        if kill -0 $pid 2> /dev/null; then
            stop_pid $pid; bad "$2: still running 5 s after SIGTERM"
        else
            wait $pid; st=$?
            [ "$st" = 0 ] || { bad "$2: SIGTERM ended it with status $st"; cat "$tmp/server.log"; }
        fi
    else
        stop_pid $pid
    fi
    if [ $served = 1 ]; then ok "$2: served 5 clients${3:+, stopped on SIGTERM}"; else
        bad "$2: the server did not echo"; sed 's/^/    | /' "$tmp/client.log"; fi
}
# The TLS programs' certificate, as docs/runtime.md ("TLS") makes it.
if grep -q '|tls|' "$tmp/manifest"; then
    for f in libaco_rt_tls.a; do
        [ -f "$OUT/$f" ] || { echo "check_docs: $OUT/$f not built (install libssl-dev, bash make.sh)"; exit 1; }
    done
    command -v openssl > /dev/null || { echo "check_docs: openssl not found: install openssl"; exit 1; }
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$tmp/key.pem" \
        -out "$tmp/cert.pem" -days 30 -subj /CN=localhost -addext subjectAltName=DNS:localhost \
        > "$tmp/openssl.log" 2>&1 || { bad "openssl req: cannot make a certificate"; cat "$tmp/openssl.log"; }
fi
nprog=0
while IFS='|' read -r name place kind mode; do
    nprog=$((nprog + 1))
    for cc in gcc clang; do
        if [ "$mode" = hooks ]; then
            # shellcheck disable=SC2207
            libs=(-Wl,--as-needed $(PKG_CONFIG_PATH="$OUT" pkg-config --libs libaco_hook)
                  -Wl,-rpath,"$(cd "$OUT" && pwd)")
        elif [ "$kind" = tls ]; then
            libs=("$OUT/libaco_rt_tls.a" "$OUT/libaco_rt.a" "$OUT/libaco.a" $uring -lssl -lcrypto -lpthread)
        elif [ "$kind" = rt ]; then
            libs=("$OUT/libaco_rt.a" "$OUT/libaco.a" $uring -lpthread)
        else
            libs=("$OUT/libaco.a")
        fi
        bin="$tmp/$name.$cc"
        if ! $cc -O2 -g -Wall -Wextra -Werror -I. -Irt "$tmp/$name.c" "${libs[@]}" -o "$bin" \
                > "$tmp/build.log" 2>&1; then
            bad "$place: the program does not build with $cc"; sed 's/^/    | /' "$tmp/build.log"
            continue
        fi
        [ "$mode" = build-only ] && continue
        bes=core
        [ "$kind" = core ] || bes=$backends
        # a TLS program takes a certificate and its key (made below)
        args=()
        [ "$kind" = tls ] && args=("$tmp/cert.pem" "$tmp/key.pem")
        for be in $bes; do
            what="$place ($cc)"
            [ "$be" = core ] || { what="$place ($cc, $be)"; export ACO_RT_BACKEND=$be; }
            if [ "$mode" = server ] || [ "$mode" = stop ]; then
                serve_check "$bin" "$what" "${mode#server}"
                continue
            fi
            timeout 60 "$bin" "${args[@]}" > "$tmp/run.log" 2>&1
            st=$?
            if [ "$mode" = abort ]; then
                [ $st = 134 ] || bad "$what: ended with status $st, not by SIGABRT"
            elif [ $st != 0 ]; then
                bad "$what: exit status $st"; tail -5 "$tmp/run.log" | sed 's/^/    | /'
            else
                ok "$what"
            fi
        done
    done
done < "$tmp/manifest"
echo "programs: $nprog built with gcc and clang and checked"
[ "$nprog" -ge 3 ] || bad "only $nprog complete programs found in README.md and docs/"

# (d) the API index: current, and the libraries' symbols.
if python3 tools/api_index.py --check > "$tmp/api.log" 2>&1; then
    ok "docs/api.md: what tools/api_index.py makes of the headers"
else
    bad "docs/api.md: not what the headers give (python3 tools/api_index.py --check):"
    { grep '^api_index:' "$tmp/api.log"; grep -v '^api_index:' "$tmp/api.log" | head -30; } |
        sed 's/^/    | /'
fi
# Exported but in no index: the internals that aco.h declares in its
# "Internals (not API)" section, because its inline aco_yield and its macros
# (aco_yield1, aco_exit1, aco_is_main_co) call them from the program's code:
# the context switch (acosw, and aco__yieldsw, its way back to the main
# co), the running co (aco_gtls_co, a thread-local variable) and the
# out-of-line halves of those macros (aco__*).  A name here that no
# library exports any more is a failure too: the list stays exact.
internal="acosw aco__yieldsw aco_gtls_co aco__yield1 aco__exit1 aco__yield_misuse aco__not_a_co"
libs="libaco.so libaco_rt.so"
[ -f "$OUT/libaco_rt_tls.so" ] && libs="$libs libaco_rt_tls.so"
for lib in $libs; do
    nm -D --defined-only "$OUT/$lib" | awk -v lib="$lib" '$3 ~ /^aco/ {sub(/@.*/, "", $3); print lib, $2, $3}'
done > "$tmp/exports"
python3 - "$tmp/exports" "$internal" <<'PY' || fails=$((fails + 1))
import os, re, sys
exports = {}
for l in open(sys.argv[1]):
    lib, kind, name = l.split()
    exports[name] = (lib, kind)
internal, bad = set(sys.argv[2].split()), 0
def fail(msg):
    global bad
    bad += 1
    print("FAIL docs/api.md: " + msg)
if not os.path.exists("docs/api.md"):
    fail("missing (python3 tools/api_index.py writes it)")
    sys.exit(1)
index = {}
for m in re.finditer(r"^\| \[`(\w+)`\]\(\.\./([^)#]+)#L\d+\)(?: \((macro|inline)\))? \|",
                     open("docs/api.md").read(), re.M):
    index[m.group(1)] = (m.group(2), m.group(3) or "function")
if len(index) < 100 or len(exports) < 100:
    fail("%d calls in it, %d aco* symbols exported: too few to compare" % (len(index), len(exports)))
for name in sorted(set(exports) - set(index) - internal):
    fail("%s: %s exports it (nm: %s), the index has no line for it (not in a public "
         "header, or not a call the tool sees)" % (name, exports[name][0], exports[name][1]))
for name, (hdr, kind) in sorted(index.items()):
    if kind == "function" and name not in exports:
        fail("%s: a function of %s, yet no library exports it" % (name, hdr))
    if name in internal:
        fail("%s: in the index, and in check_docs.sh's list of internal symbols" % name)
for name in sorted(internal - set(exports)):
    fail("%s: check_docs.sh lists it as an internal symbol, no library exports it" % name)
fn = sum(1 for h, k in index.values() if k == "function")
print("api: %d calls in docs/api.md (%d functions); %d aco* symbols exported, %d of them internal"
      % (len(index), fn, len(exports), len(internal & set(exports))))
sys.exit(1 if bad else 0)
PY

# (e) Every test is described: each program of the tests lists and each
# tests/check_*.sh is named in docs/correctness.md, as `name`, `name.c` or
# `name.sh`, or in the first cell of a table row after a full name, as
# `_suffix` (the full name with it added, or with it in place of its last
# part: `test_bufio_bb_sock`, `_ends`; `test_file_bb_meta`, `_data`),
# `prefix*`, or a range `name0.c` ... `_7.c`.
{ awk '/^[[:space:]]*(#|$)/ || /^[[:space:]]/ {next} {print $1}' tests/tests.list rt/tests/tests.list apps/tests/tests.list
  for f in tests/check_*.sh; do basename "$f" .sh; done; } |
python3 -c '
import re, sys
doc = open("docs/correctness.md").read()
named = set(re.findall(r"`([A-Za-z0-9_]+)(?:\.c|\.sh)?`", doc))
wild, suff = [], []
for line in doc.splitlines():
    if not line.startswith("| `"):
        continue
    last = None
    for tok in re.findall(r"`([^`]+)`", line.split("|")[1]):
        if tok.endswith("*"):
            wild.append(tok[:-1])
        elif tok.startswith("_") and last:
            suff.append((last, tok))
        elif re.fullmatch(r"[A-Za-z0-9_]+", tok):
            last = tok
for a, b, z in re.findall(r"`([A-Za-z0-9_]+?)(\d+)\.c` \.\.\. `_(\d+)\.c`", doc):
    named.update(a + str(i) for i in range(int(b), int(z) + 1))
def described(n):
    if n in named or any(n.startswith(w) for w in wild):
        return True
    for full, sx in suff:
        if n in (full + sx, full.rsplit("_", 1)[0] + sx):
            return True
    return False
missing = sorted({n for n in sys.stdin.read().split() if not described(n)})
for n in missing:
    print("FAIL docs/correctness.md does not say what %s checks" % n)
print("tests described: %s" % ("all" if not missing else "%d missing" % len(missing)))
sys.exit(1 if missing else 0)
' > "$tmp/described.log"
if [ $? = 0 ]; then ok "$(tail -1 "$tmp/described.log")"; else
    bad "docs/correctness.md leaves tests undescribed:"; grep '^FAIL' "$tmp/described.log" | sed 's/^/    | /'; fi

if [ $fails != 0 ]; then echo "check_docs: $fails failed"; exit 1; fi
echo "check_docs: ok"
