#!/usr/bin/env bash
# The CMake package (CMakeLists.txt) and the install commands the docs give
# work the ways users need:
#  1. the docs' commands, verbatim: every fenced block that follows a line
#     `<!-- tested by tests/check_cmake.sh -->` in README.md and docs/*.md,
#     in order, in one scratch directory holding a copy of this tree named
#     libaco, with HOME a new empty directory.  An sh block runs in bash -e
#     there; a program ./app it builds is run (by the block, or else here)
#     and must print "rt_consumer: ok" (app.c and main.c there are
#     tests/cmake_consumer/rt_main.c).  A cmake block is the body of a
#     project after `add_executable(app main.c)`, configured with
#     `cmake -S . -B build -DCMAKE_PREFIX_PATH="$HOME/.local"` (as
#     docs/install.md says), built and run; a line ending `# or: X` is
#     tried again with X in its place.  README.md must have such a block;
#  2. the top-level build the docs' commands made (static, tests on: or made
#     here with the same commands if they made none) passes its ctest suite
#     (the x86-64 programs in both FP-env variants) and installed under
#     $HOME/.local the headers (core and runtime), libaco.a, libaco_rt.a, the
#     aco package (lib/cmake/aco), hook.c's object (aco::hook) and the three
#     pkg-config files (where OpenSSL 3 is: aco_rt_tls.h, libaco_rt_tls.a
#     and libaco_rt_tls.pc too), nothing else; the versions agree: aco.h, aco_rt.h
#     (from the installed headers), the package's version file and the .pc
#     files; no header under rt/ spells a version of its own;
#  3. tests/cmake_consumer builds against that prefix with find_package(aco)
#     and runs (aco::aco, aco::rt, aco::hook and aco::tls where built (OpenSSL
#     found through the package), linked statically, liburing
#     passed on; the hooks live in aco_hook_consumer, linked under
#     --as-needed), and pkg-config compiles and links the same programs
#     (libaco, libaco_rt, plain and --static; libaco_hook under --as-needed);
#     docs/porting.md's CMake port (its block, its shim, port_demo.c) builds
#     and prints what the program prints on real pthreads, hooks linked;
#  4. add_subdirectory with ACO_SHARE_FPU_MXCSR_ENV=ON and ACO_RT_URING=OFF
#     (no libaco tests built, no -Werror, hook.c with hidden visibility, the
#     hooks live; the runtime has epoll only: no io_uring symbol in it, a
#     scheduler that asks for io_uring fails);
#     FetchContent from an archive of this tree (a file:// URL: no network)
#     unless step 1 ran a FetchContent block; ACO_RT_URING=ON fails to
#     configure where liburing is not found, AUTO goes on with epoll;
#  5. a shared build installs libaco.so.<version> and libaco_rt.so.<version>
#     with their SONAME links, exporting aco_*/acosw and aco_rt_* only, with
#     non-executable stacks, libaco_rt.so needing libaco.so.1 found through
#     its run path $ORIGIN, and libaco_hook.so (SONAME libaco_hook.so, no
#     copy of the runtime: it needs libaco_rt.so.1, run path $ORIGIN); the
#     consumer (find_package, then pkg-config) links them (NEEDED
#     libaco.so.1, libaco_rt.so.1, libaco_hook.so under --as-needed) and
#     runs; the hook check has teeth: under --as-needed a plain -laco_hook
#     is dropped (no NEEDED, aco_rt_hooks_active() = 0), pkg-config's
#     libaco_hook is kept and live;
#  6. ACO_SHARE_FPU_MXCSR_ENV=ON reaches consumers through aco::aco and
#     libaco.pc (main.c does not compile if it is missing, or present when
#     libaco was built without it; a build expecting the wrong one fails).
# Everything is built out of the source tree, in a temporary directory.
# Environment: CC (gcc), JOBS (2); CFLAGS, ASMFLAGS and LDFLAGS are not
# used (the counts of tests and the checks are those of a plain build).
set -euo pipefail
cd "$(dirname "$0")/.."
unset CFLAGS ASMFLAGS LDFLAGS PKG_CONFIG_PATH CMAKE_PREFIX_PATH
top=$(pwd)
t0=$SECONDS

need() {   # need <command> <Debian package>
    command -v "$1" > /dev/null ||
        { echo "FAIL: '$1' not found: install the Debian package $2"; exit 1; }
}
need cmake cmake
# The default generator, Unix Makefiles, runs make.
case "${CMAKE_GENERATOR:-Unix Makefiles}" in
    "Unix Makefiles") need make make ;;
    Ninja) need ninja ninja-build ;;
esac
need pkg-config pkg-config
need readelf binutils
need nm binutils
export CC=${CC:-gcc}
need "$CC" "$CC"
jobs=${JOBS:-2}
# TLS (aco::tls, libaco_rt_tls) is built where OpenSSL 3 links: expected then.
have_tls=0
printf '#include <openssl/ssl.h>\n#if OPENSSL_VERSION_MAJOR < 3\n#error 3\n#endif\nint main(void){return OPENSSL_init_ssl(0, 0) & 0;}\n' |
    "$CC" -x c - -lssl -lcrypto -o /dev/null > /dev/null 2>&1 && have_tls=1

tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
step() { echo "== $* ($((SECONDS - t0)) s)"; }
# Quiet configures and builds; the log shows on failure.
quiet() {   # quiet <log> <command...>
    local log=$tmp/$1.log; shift
    "$@" > "$log" 2>&1 || { tail -40 "$log"; fail "$* (log above)"; }
}
runs_ok() {   # runs_ok <program> <what it must print>: run it, check its line
    local out
    out=$("$1" 2>&1) || { echo "$out"; fail "$1 failed"; }
    grep -q "^$2\$" <<< "$out" || { echo "$out"; fail "$1 did not say '$2'"; }
    sed 's/^/    /' <<< "$out"
}
consumer() {   # consumer <build dir> <cmake -D arguments...>: configure, build, run
    local b=$1; shift
    quiet "$(basename "$b")-configure" cmake -S "$top/tests/cmake_consumer" -B "$b" \
        -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF "$@"
    quiet "$(basename "$b")-build" cmake --build "$b" -j "$jobs"
    runs_ok "$b/aco_consumer" 'aco_consumer: ok'
    if [ -x "$b/aco_rt_consumer" ]; then
        runs_ok "$b/aco_rt_consumer" 'rt_consumer: ok'
        [ -x "$b/aco_hook_consumer" ] || fail "$b: no aco_hook_consumer beside aco_rt_consumer"
        runs_ok "$b/aco_hook_consumer" 'hook_consumer: ok'
        if [ $have_tls = 1 ]; then
            [ -x "$b/aco_tls_consumer" ] || fail "$b: no aco_tls_consumer (aco::tls), though OpenSSL 3 is here"
            runs_ok "$b/aco_tls_consumer" 'tls_consumer: ok'
        fi
        # What linked it: the --as-needed the hooks must survive, and how
        # (Makefiles keep the line in link.txt).
        local l=$b/CMakeFiles/aco_hook_consumer.dir/link.txt
        if [ -f "$l" ]; then sed 's/^/    link: /' "$l"; fi
    fi
}
needed() {   # needed <ELF file>: its NEEDED libraries
    readelf -dW "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]$/\1/p'
}
installed() {   # installed <prefix> <file>...: every file is there
    local p=$1; shift
    for f in "$@"; do [ -e "$p/$f" ] || fail "$f not installed under $p"; done
}
version=$(awk '/define ACO_VERSION_(MAJOR|MINOR|PATCH)/ {v = v (v ? "." : "") $3} END {print v}' aco.h)
rt_main=$top/tests/cmake_consumer/rt_main.c
hook_main=$top/tests/cmake_consumer/hook_main.c

# ---------------------------------------------------------------------------
step "1. the docs' commands, verbatim (README.md, docs/*.md)"
work=$tmp/work home=$tmp/home
mkdir -p "$work/libaco" "$home"
# The tree as it is (tracked and new files, not ignored ones).
tree_files() {
    (git -C "$top" ls-files -z -c -o --exclude-standard 2>/dev/null ||
         { cd "$top" && find . -path ./.git -prune -o -path ./output -prune -o -type f -printf '%P\0'; }) |
        (cd "$top" && while IFS= read -r -d '' f; do if [ -f "$f" ]; then printf '%s\0' "$f"; fi; done)
}
tree_files | tar -C "$top" --null -T - -cf - | tar -C "$work/libaco" -xf -
cp "$rt_main" "$work/app.c"; cp "$rt_main" "$work/main.c"
# Each block after a marker becomes a file <n>.<language> in $tmp/blocks;
# a marker followed by anything but blank lines and a fence is an error.
marker='<!-- tested by tests/check_cmake.sh -->'
mkdir -p "$tmp/blocks"
extract() {   # extract <doc> <first number>: prints the number of blocks
    awk -v m="$marker" -v dir="$tmp/blocks" -v n="$2" -v doc="$1" '
        inb && /^```[[:space:]]*$/ { inb = 0; close(f); next }
        inb { print > f; next }
        $0 == m { if (armed) { bad = NR; exit } armed = 1; next }
        armed && /^[[:space:]]*$/ { next }
        armed && /^```[a-z]+[[:space:]]*$/ {
            lang = $0; sub(/^```/, "", lang); sub(/[[:space:]]*$/, "", lang)
            f = sprintf("%s/%03d.%s", dir, n++, lang); printf "" > f
            print doc > (f ".from"); armed = 0; inb = 1; next }
        armed { bad = NR; exit }
        END { if (bad || armed || inb) { print "bad " (bad ? bad : NR); exit }
              print n }' "$1"
}
n=0 readme_blocks=0
for doc in README.md docs/*.md; do
    [ -f "$doc" ] || continue
    r=$(extract "$doc" "$n")
    case "$r" in bad*) fail "$doc:${r#bad }: '$marker' is not followed by a fenced block (\`\`\`sh or \`\`\`cmake)" ;; esac
    [ "$doc" = README.md ] && readme_blocks=$((r - n))
    n=$r
done
run_app() {   # run_app <log>: ./app said ok, in the log or when run now
    if [ -f "$1" ] && grep -q '^rt_consumer: ok$' "$1"; then return; fi
    runs_ok ./app 'rt_consumer: ok' > /dev/null
}
ran_fetch=0
for f in "$tmp"/blocks/*.sh "$tmp"/blocks/*.cmake; do
    [ -e "$f" ] || continue
    echo "$f"
done | sort | while read -r f; do
    from=$(cat "$f.from") name=$(basename "$f")
    echo "    $from: $name: $(head -1 "$f")"
    case "$f" in
    *.sh)
        rm -f "$work/app"
        (cd "$work" && HOME=$home bash -euo pipefail "$f") > "$f.log" 2>&1 ||
            { tail -30 "$f.log"; fail "$from: the block $name failed (above)"; }
        if [ -e "$work/app" ]; then (cd "$work" && run_app "$f.log") || fail "$from: $name: ./app"; fi
        ;;
    *.cmake)
        # The block as written, then each `# or:` alternative.
        alts=("$(cat "$f")")
        while IFS= read -r line; do
            alt=$(awk -v l="$line" '$0 == l { x = $0; sub(/^.*# or: */, "", x); print x; next } { print }' "$f")
            alts+=("$alt")
        done < <(grep '# or: ' "$f" || true)
        i=0
        for body in "${alts[@]}"; do
            i=$((i + 1))
            printf '%s\n' "cmake_minimum_required(VERSION 3.16)" "project(app C)" \
                "add_executable(app main.c)" "$body" > "$work/CMakeLists.txt"
            b=build-${name%.cmake}-$i
            (cd "$work" && HOME=$home quiet "$name-$i-configure" cmake -S . -B "$b" \
                 -DCMAKE_PREFIX_PATH="$home/.local" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF &&
             quiet "$name-$i-build" cmake --build "$b" -j "$jobs") ||
                fail "$from: $name ($i): the project does not build"
            runs_ok "$work/$b/app" 'rt_consumer: ok' > /dev/null
            [ $i = 1 ] || echo "      and with: $(grep -v -x -F -f "$f" <<< "$body" | head -1)"
        done
        rm -f "$work/CMakeLists.txt"
        ;;
    esac
done
echo "    ran $n blocks ($readme_blocks from README.md)"
grep -l FetchContent_MakeAvailable "$tmp"/blocks/*.cmake > /dev/null 2>&1 && ran_fetch=1

# ---------------------------------------------------------------------------
step "2. the top-level build (static, tests on, $CC): ctest -j$jobs, the install, versions"
st=$home/.local
if [ ! -f "$work/libaco/build/CMakeCache.txt" ]; then
    echo "    (no block built libaco/build: the README's commands, here)"
    (cd "$work" && HOME=$home quiet lib-static-configure cmake -S libaco -B libaco/build &&
     quiet lib-static-build cmake --build libaco/build -j "$jobs" &&
     HOME=$home quiet lib-static-install cmake --install libaco/build --prefix "$st")
fi
bs=$work/libaco/build
grep -q '^ACO_BUILD_TESTS:BOOL=ON$' "$bs/CMakeCache.txt" ||
    fail "ACO_BUILD_TESTS is not ON by default in a top-level build"
# Every program of tests/tests.list twice, less those a rule keeps to some
# runs only ("skip !RUNS": the ASan-only one).
nprog=$(awk '/^[^[:space:]#]/ {n++; p = $1} /^[[:space:]]+skip[[:space:]]+!/ && !(p in out) {out[p]; n--}
             END {print n}' tests/tests.list)
ntests=$(cd "$bs" && ctest -N | sed -n 's/^Total Tests: //p')
[ "$ntests" = $((2 * nprog)) ] || fail "ctest has $ntests tests, expected $((2 * nprog))"
if ! (cd "$bs" && ctest --output-on-failure -j "$jobs") > "$tmp/ctest.log" 2>&1; then
    cat "$tmp/ctest.log"; fail "ctest failed"
fi
grep -E 'tests passed|Total Test time' "$tmp/ctest.log" | sed 's/^/    /'
installed "$st" include/aco.h include/aco_assert_override.h include/aco_rt.h \
    include/aco_rt_pthread.h include/aco_rt_pthread_names.h lib/libaco.a lib/libaco_rt.a \
    lib/cmake/aco/acoConfig.cmake lib/cmake/aco/acoConfigVersion.cmake \
    lib/cmake/aco/acoTargets.cmake lib/cmake/aco/acoLiburing.cmake \
    lib/pkgconfig/libaco.pc lib/pkgconfig/libaco_rt.pc lib/pkgconfig/libaco_hook.pc \
    lib/objects-RelWithDebInfo/aco_hook/rt/hook.c.o
[ $have_tls = 0 ] || installed "$st" include/aco_rt_tls.h lib/libaco_rt_tls.a lib/pkgconfig/libaco_rt_tls.pc
extra=$(cd "$st" && find . \( -type f -o -type l \) | grep -v \
    -e '^\./include/aco\(_assert_override\|_rt\|_rt_tls\|_rt_pthread\|_rt_pthread_names\)\{0,1\}\.h$' \
    -e '^\./lib/libaco\(_rt\|_rt_tls\)\{0,1\}\.a$' -e '^\./lib/cmake/aco/aco[A-Za-z-]*\.cmake$' \
    -e '^\./lib/objects-RelWithDebInfo/aco_hook/rt/hook\.c\.o$' \
    -e '^\./lib/pkgconfig/libaco\(_rt\|_hook\|_rt_tls\)\{0,1\}\.pc$' || true)
[ -z "$extra" ] || fail "unexpected files installed: $extra"
pcs="libaco libaco_rt libaco_hook"
[ $have_tls = 0 ] || pcs="$pcs libaco_rt_tls"
for pc in $pcs; do
    grep -q "^prefix=$st\$" "$st/lib/pkgconfig/$pc.pc" || fail "$pc.pc: prefix is not $st"
done
# One version: aco.h's, in aco_rt.h as the compiler sees it, the package and
# the pkg-config files; and none spelled out under rt/.
rtv=$(printf '#include "aco_rt.h"\nv ACO_RT_VERSION_MAJOR.ACO_RT_VERSION_MINOR.ACO_RT_VERSION_PATCH\n' |
      "$CC" -E -P -I"$st/include" -x c - | sed -n 's/^v \([0-9]*\) *\. *\([0-9]*\) *\. *\([0-9]*\)$/\1.\2.\3/p')
pkgv=$(sed -n 's/^set(PACKAGE_VERSION "\(.*\)")$/\1/p' "$st/lib/cmake/aco/acoConfigVersion.cmake")
pcv=$(PKG_CONFIG_PATH=$st/lib/pkgconfig pkg-config --modversion libaco)
pcrtv=$(PKG_CONFIG_PATH=$st/lib/pkgconfig pkg-config --modversion libaco_rt)
pchookv=$(PKG_CONFIG_PATH=$st/lib/pkgconfig pkg-config --modversion libaco_hook)
echo "    versions: aco.h $version, aco_rt.h $rtv, package $pkgv, libaco.pc $pcv, libaco_rt.pc $pcrtv, libaco_hook.pc $pchookv"
for v in "$rtv" "$pkgv" "$pcv" "$pcrtv" "$pchookv"; do
    [ "$v" = "$version" ] || fail "the versions disagree (aco.h says $version)"
done
if grep -n 'define[[:space:]]\+ACO_RT_VERSION_[A-Z]*[[:space:]]\+[0-9]' rt/*.h; then
    fail "a header under rt/ spells a version of its own: the version is aco.h's"
fi

# ---------------------------------------------------------------------------
step "3. consumer: find_package(aco) of the static install; pkg-config"
consumer "$tmp/c-find-static" -DACO_CONSUME=find_package -DCMAKE_PREFIX_PATH="$st" \
    -DACO_EXPECT_SHARE_FPU=OFF
grep -q "found aco 1\.[0-9.]* in $st/lib/cmake/aco" "$tmp/c-find-static-configure.log" ||
    fail "find_package did not find the package under $st"
for p in aco_consumer aco_rt_consumer aco_hook_consumer; do
    grep -q libaco < <(needed "$tmp/c-find-static/$p") && fail "static consumer $p needs a libaco.so"
done
# The hooks are in the program itself, beside its static runtime.
grep -q ' T aco_rt_hook_binding_$' < <(nm "$tmp/c-find-static/aco_hook_consumer") ||
    fail "the static aco_hook_consumer has no hook.c object in it"
export PKG_CONFIG_PATH=$st/lib/pkgconfig
flags=$(pkg-config --cflags --libs libaco)
echo "    pkg-config --cflags --libs libaco: $flags"
case " $flags " in *" -D"*) fail "libaco.pc has macros that libaco was built without" ;; esac
# shellcheck disable=SC2086
"$CC" -Wall -Wextra -Werror -DACO_CONSUMER_EXPECT_SHARE_FPU=0 tests/cmake_consumer/main.c \
    $flags -o "$tmp/pc-static" || fail "pkg-config build against the static install"
grep -q '^aco_consumer: ok$' < <("$tmp/pc-static") || fail "pkg-config build (static) does not run"
# shellcheck disable=SC2046
"$CC" tests/cmake_consumer/main.c $(pkg-config --static --cflags --libs libaco) -o "$tmp/pc-static2" ||
    fail "pkg-config --static build"
"$tmp/pc-static2" > /dev/null || fail "pkg-config --static build does not run"
rtflags=$(pkg-config --cflags --libs libaco_rt)
echo "    pkg-config --cflags --libs libaco_rt: $rtflags"
[ "$(grep -o -- "-I$st/include" <<< "$rtflags" | wc -l)" = 1 ] || fail "libaco_rt: -I$st/include not once"
for opt in "" --static; do
    # shellcheck disable=SC2046
    "$CC" -Wall -Wextra -Werror "$rt_main" $(pkg-config $opt --cflags --libs libaco_rt) \
        -o "$tmp/pc-rt" || fail "pkg-config $opt libaco_rt build against the static install"
    runs_ok "$tmp/pc-rt" 'rt_consumer: ok' > /dev/null
done
hookflags=$(pkg-config --cflags --libs libaco_hook)
echo "    pkg-config --cflags --libs libaco_hook: $hookflags"
# shellcheck disable=SC2086
"$CC" -Wall -Wextra -Werror "$hook_main" -Wl,--as-needed $hookflags -ldl -o "$tmp/pc-hook" ||
    fail "pkg-config libaco_hook build against the static install"
runs_ok "$tmp/pc-hook" 'hook_consumer: ok' > /dev/null
# libaco_rt_tls.pc of the static install: a plain --libs links (OpenSSL
# required by it)
if [ $have_tls = 1 ]; then
    tlsflags=$(pkg-config --cflags --libs libaco_rt_tls)
    echo "    pkg-config --cflags --libs libaco_rt_tls: $tlsflags"
    # shellcheck disable=SC2086
    "$CC" -Wall -Wextra -Werror "$top/tests/cmake_consumer/tls_main.c" $tlsflags -o "$tmp/pc-tls" ||
        fail "pkg-config libaco_rt_tls build against the static install"
    runs_ok "$tmp/pc-tls" 'tls_consumer: ok' > /dev/null
fi
unset PKG_CONFIG_PATH

# docs/porting.md's port as a CMake project, verbatim: its CMakeLists.txt
# (the block after `<!-- check_cmake: port -->`), its shim.c (the heredoc
# of its first sh block), rt/tests/port_demo.c as prog.c; against the
# static install it must print what the program prints on real pthreads,
# with the hooks in it.
port=$tmp/port
mkdir -p "$port"
awk '/^<!-- check_cmake: port -->$/ {m = 1; next} m && /^```cmake$/ {on = 1; next}
     on && /^```$/ {exit} on {print}' docs/porting.md > "$port/CMakeLists.txt"
grep -q 'find_package(aco' "$port/CMakeLists.txt" ||
    fail "docs/porting.md has no CMake block after '<!-- check_cmake: port -->'"
awk "/^cat > shim.c <<'C'\$/ {on = 1; next} on && /^C\$/ {exit} on {print}" docs/porting.md > "$port/shim.c"
grep -q aco_rt_pthread_run_main "$port/shim.c" || fail "docs/porting.md's shim.c not found"
cp rt/tests/port_demo.c "$port/prog.c"
quiet port-configure cmake -S "$port" -B "$port/build" -DCMAKE_PREFIX_PATH="$st" \
    -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
quiet port-build cmake --build "$port/build" -j "$jobs"
"$CC" -O2 rt/tests/port_demo.c -lpthread -o "$tmp/port-pthreads" || fail "port_demo.c on pthreads"
want=$("$tmp/port-pthreads") || fail "port_demo.c on pthreads failed"
got=$("$port/build/prog") || fail "docs/porting.md's CMake port failed"
[ "$got" = "$want" ] || { echo "$got"; fail "docs/porting.md's CMake port printed other than pthreads"; }
grep -q ' T usleep$' < <(nm "$port/build/prog") || fail "docs/porting.md's CMake port has no hooks in it"
echo "    docs/porting.md's CMake port: prints what pthreads print, hooks in"

# ---------------------------------------------------------------------------
step "4. consumer: add_subdirectory (FPU env shared, epoll only), FetchContent; ACO_RT_URING"
consumer "$tmp/c-subdir" -DACO_CONSUME=add_subdirectory -DACO_SOURCE_DIR="$top" \
    -DACO_SHARE_FPU_MXCSR_ENV=ON -DACO_EXPECT_SHARE_FPU=ON -DACO_RT_URING=OFF -DACO_EXPECT_EPOLL_ONLY=ON
grep -q '^ACO_BUILD_TESTS:BOOL=OFF$' "$tmp/c-subdir/CMakeCache.txt" ||
    fail "add_subdirectory: ACO_BUILD_TESTS is not OFF by default"
if grep -q . < <(find "$tmp/c-subdir" -name 'test_aco_*'); then
    fail "add_subdirectory built libaco's tests"
fi
grep -q -- '-fvisibility=hidden' "$tmp/c-subdir/aco/CMakeFiles/aco_hook.dir/flags.make" ||
    fail "add_subdirectory: hook.c not compiled with hidden visibility"
for t in aco aco_rt aco_hook; do
    flags_make=$tmp/c-subdir/aco/CMakeFiles/$t.dir/flags.make
    grep -q -- '-Wextra' "$flags_make" || fail "add_subdirectory: no libaco flags in $flags_make"
    grep -q -- '-Werror' "$flags_make" &&
        fail "add_subdirectory: $t compiled with -Werror in someone else's build"
done
grep -q -- '-DACO_RT_HAVE_URING' "$tmp/c-subdir/aco/CMakeFiles/aco_rt.dir/flags.make" &&
    fail "ACO_RT_URING=OFF: the runtime was compiled with ACO_RT_HAVE_URING"
# The undefined symbols only: nm also prints each member's name (io_uring.c.o:),
# and grep -q under pipefail made this pass only when nm died of SIGPIPE first.
undef=$(nm -u "$tmp/c-subdir/aco/libaco_rt.a")
grep -qE '^ +U io_uring_' <<< "$undef" && fail "ACO_RT_URING=OFF: libaco_rt.a calls io_uring_*"
# The options as a parent sets them, plain variables before add_subdirectory
# (docs/install.md): obeyed on the first configure, not only the second.
mkdir -p "$tmp/c-parent"
cat > "$tmp/c-parent/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.16)
project(parent C)
set(ACO_RT_TLS OFF)
set(ACO_RT_URING OFF)
add_subdirectory("$top" aco)
if(TARGET aco::tls)
    message(FATAL_ERROR "aco::tls made though the parent set ACO_RT_TLS OFF")
endif()
EOF
cmake -S "$tmp/c-parent" -B "$tmp/c-parent/build" > "$tmp/c-parent.log" 2>&1 ||
    { tail -20 "$tmp/c-parent.log"; fail "a parent's set(ACO_RT_TLS OFF): first configure failed"; }
grep -q -- '-DACO_RT_HAVE_URING' "$tmp/c-parent/build/aco/CMakeFiles/aco_rt.dir/flags.make" &&
    fail "a parent's set(ACO_RT_URING OFF) was ignored on the first configure"
echo "    a parent's set(ACO_RT_TLS OFF), set(ACO_RT_URING OFF): obeyed on the first configure"
if [ $ran_fetch = 0 ]; then
    tree_files | tar -C "$top" --null -T - --transform 's|^|libaco/|' -czf "$tmp/libaco-src.tar.gz"
    consumer "$tmp/c-fetch" -DACO_CONSUME=fetchcontent -DACO_URL="file://$tmp/libaco-src.tar.gz" \
        -DACO_EXPECT_SHARE_FPU=OFF
    [ -f "$tmp/c-fetch/_deps/aco-src/aco.h" ] || fail "FetchContent did not extract the archive"
else
    echo "    FetchContent: step 1 built a docs' FetchContent block"
fi
# liburing hidden from the search: ON fails, AUTO goes on with epoll.
nouring=-DCMAKE_IGNORE_PATH="/usr/include;/usr/local/include;/usr/lib/x86_64-linux-gnu;/usr/lib;/usr/local/lib"
if cmake -S "$top" -B "$tmp/uring-on" -DACO_BUILD_TESTS=OFF -DACO_RT_URING=ON "$nouring" \
        > "$tmp/uring-on.log" 2>&1; then
    fail "ACO_RT_URING=ON configured without liburing"
fi
grep -q 'ACO_RT_URING=ON, but liburing' "$tmp/uring-on.log" ||
    { tail -20 "$tmp/uring-on.log"; fail "ACO_RT_URING=ON failed for another reason"; }
quiet uring-auto cmake -S "$top" -B "$tmp/uring-auto" -DACO_BUILD_TESTS=OFF "$nouring"
grep -q 'epoll backend only' "$tmp/uring-auto.log" || fail "ACO_RT_URING=AUTO without liburing: no epoll-only note"
echo "    ACO_RT_URING=ON without liburing: configure fails; AUTO: epoll only"

# ---------------------------------------------------------------------------
step "5. shared build (ACO_BUILD_SHARED=ON, ACO_SHARE_FPU_MXCSR_ENV=ON), install, consumers"
sh=$tmp/shared
quiet lib-shared-configure cmake -S "$top" -B "$tmp/build-shared" -DCMAKE_INSTALL_PREFIX="$sh" \
    -DACO_BUILD_SHARED=ON -DACO_SHARE_FPU_MXCSR_ENV=ON -DACO_BUILD_TESTS=OFF
quiet lib-shared-build cmake --build "$tmp/build-shared" -j "$jobs"
quiet lib-shared-install cmake --install "$tmp/build-shared"
installed "$sh" lib/pkgconfig/libaco.pc lib/pkgconfig/libaco_rt.pc lib/pkgconfig/libaco_hook.pc \
    lib/cmake/aco/acoConfig.cmake lib/libaco_hook.so
shared_libs="libaco libaco_rt"
[ $have_tls = 0 ] || shared_libs="$shared_libs libaco_rt_tls"
for l in $shared_libs; do
    installed "$sh" "lib/$l.so.$version" "lib/$l.so.1" "lib/$l.so"
    [ "$(readlink "$sh/lib/$l.so.1")" = "$l.so.$version" ] || fail "$l.so.1 link"
    [ "$(readlink "$sh/lib/$l.so")" = "$l.so.1" ] || fail "$l.so link"
    [ ! -e "$sh/lib/$l.a" ] || fail "the shared build installed $l.a"
    [ "$(readelf -lW "$sh/lib/$l.so" | awk '/GNU_STACK/ {print $(NF-1)}')" = RW ] ||
        fail "$l.so: executable stack"
done
so=$sh/lib/libaco.so.$version
grep -q 'SONAME.*\[libaco\.so\.1\]' < <(readelf -dW "$so") || fail "SONAME is not libaco.so.1"
exports=$(nm -D --defined-only "$so" | awk '{print $3}' | sed 's/@.*//' | sort -u)
grep -q '^acosw$' <<< "$exports" || fail "libaco.so does not export acosw"
grep -q '^aco__yieldsw$' <<< "$exports" || fail "libaco.so does not export aco__yieldsw (aco_yield calls it)"
grep -q '^aco_resume$' <<< "$exports" || fail "libaco.so does not export aco_resume"
bad=$(echo "$exports" | grep -v -e '^aco_' -e '^acosw$' || true)
[ -z "$bad" ] || fail "libaco.so exports more than aco_* and acosw: $bad"
echo "    libaco.so.$version: SONAME libaco.so.1, $(echo "$exports" | wc -l) symbols exported, all aco_*/acosw"
rtso=$sh/lib/libaco_rt.so.$version
grep -q 'SONAME.*\[libaco_rt\.so\.1\]' < <(readelf -dW "$rtso") || fail "SONAME is not libaco_rt.so.1"
grep -q '(RUNPATH).*\[\$ORIGIN\]' < <(readelf -dW "$rtso") || fail "libaco_rt.so: run path is not \$ORIGIN"
grep -qx 'libaco.so.1' < <(needed "$rtso") || fail "libaco_rt.so does not need libaco.so.1"
exports=$(nm -D --defined-only "$rtso" | awk '{print $3}' | sed 's/@.*//' | sort -u)
grep -q '^aco_rt_sched_new$' <<< "$exports" || fail "libaco_rt.so does not export aco_rt_sched_new"
bad=$(echo "$exports" | grep -v -e '^aco_rt_' || true)
[ -z "$bad" ] || fail "libaco_rt.so exports more than aco_rt_*: $bad"
echo "    libaco_rt.so.$version: SONAME libaco_rt.so.1, run path \$ORIGIN, $(echo "$exports" | wc -l) symbols exported, all aco_rt_*"
hookso=$sh/lib/libaco_hook.so
# One file, no version links: LD_PRELOAD names it, as make.sh installs it.
[ -f "$hookso" ] && [ ! -L "$hookso" ] || fail "libaco_hook.so is a link, not the library"
grep -q 'SONAME.*\[libaco_hook\.so\]' < <(readelf -dW "$hookso") || fail "SONAME is not libaco_hook.so"
grep -q '(RUNPATH).*\[\$ORIGIN\]' < <(readelf -dW "$hookso") || fail "libaco_hook.so: run path is not \$ORIGIN"
# The program's runtime is the one the hooks call: no copy of it inside.
grep -qx 'libaco_rt.so.1' < <(needed "$hookso") || fail "libaco_hook.so does not need libaco_rt.so.1"
exports=$(nm -D --defined-only "$hookso" | awk '{print $3}' | sed 's/@.*//' | sort -u)
grep -q '^read$' <<< "$exports" || fail "libaco_hook.so does not export read"
bad=$(grep '^aco' <<< "$exports" | grep -v '^aco_rt_hook_' || true)
[ -z "$bad" ] || fail "libaco_hook.so exports the runtime's or libaco's names: $bad"
[ "$(readelf -lW "$hookso" | awk '/GNU_STACK/ {print $(NF-1)}')" = RW ] || fail "libaco_hook.so: executable stack"
echo "    libaco_hook.so: SONAME libaco_hook.so, run path \$ORIGIN, needs libaco_rt.so.1, $(echo "$exports" | wc -l) symbols exported"
# aco::hook's link item, whole in the installed package: push-state, the
# library and pop-state in one (CMake moves items; ld must see them so).
grep -q 'INTERFACE_LINK_LIBRARIES "-Wl,--push-state,--no-as-needed,\${_IMPORT_PREFIX}/lib/libaco_hook\.so,--pop-state;' \
    "$sh/lib/cmake/aco/acoTargets.cmake" || fail "acoTargets.cmake: aco::hook does not link libaco_hook.so as one no-as-needed item"

consumer "$tmp/c-find-shared" -DACO_CONSUME=find_package -DCMAKE_PREFIX_PATH="$sh" \
    -DACO_EXPECT_SHARE_FPU=ON
grep -qx 'libaco.so.1' < <(needed "$tmp/c-find-shared/aco_consumer") ||
    fail "the find_package consumer of the shared install does not need libaco.so.1"
grep -qx 'libaco_rt.so.1' < <(needed "$tmp/c-find-shared/aco_rt_consumer") ||
    fail "the find_package consumer of the shared install does not need libaco_rt.so.1"
grep -qx 'libaco_hook.so' < <(needed "$tmp/c-find-shared/aco_hook_consumer") ||
    fail "aco::hook under --as-needed: the consumer does not need libaco_hook.so"
# The macro's check has teeth: expecting the wrong one fails the build.
if cmake -S "$top/tests/cmake_consumer" -B "$tmp/c-wrong" -DCMAKE_PREFIX_PATH="$sh" \
         -DACO_EXPECT_SHARE_FPU=OFF > "$tmp/c-wrong.log" 2>&1 &&
   cmake --build "$tmp/c-wrong" >> "$tmp/c-wrong.log" 2>&1; then
    fail "a consumer expecting no ACO_CONFIG_SHARE_FPU_MXCSR_ENV built against a libaco with it"
fi
grep -q 'ACO_CONFIG_SHARE_FPU_MXCSR_ENV reached this program' "$tmp/c-wrong.log" ||
    { tail -20 "$tmp/c-wrong.log"; fail "the wrong-expectation build failed for another reason"; }

export PKG_CONFIG_PATH=$sh/lib/pkgconfig
flags=$(pkg-config --cflags --libs libaco)
echo "    pkg-config --cflags --libs libaco: $flags"
case " $flags " in *" -DACO_CONFIG_SHARE_FPU_MXCSR_ENV "*) ;; *) fail "libaco.pc lacks the FPU macro" ;; esac
# shellcheck disable=SC2086
"$CC" -Wall -Wextra -Werror -DACO_CONSUMER_EXPECT_SHARE_FPU=1 tests/cmake_consumer/main.c \
    $flags -o "$tmp/pc-shared" || fail "pkg-config build against the shared install"
grep -qx 'libaco.so.1' < <(needed "$tmp/pc-shared") || fail "the pkg-config build does not need libaco.so.1"
out=$(LD_LIBRARY_PATH=$sh/lib "$tmp/pc-shared") || fail "pkg-config build (shared) does not run"
grep -q 'FP control state shared' <<< "$out" || fail "pkg-config build: the macro did not arrive"
# The runtime with a run path to the prefix alone: libaco_rt.so finds
# libaco.so beside it.
# shellcheck disable=SC2046
"$CC" -Wall -Wextra -Werror "$rt_main" $(pkg-config --cflags --libs libaco_rt) -Wl,-rpath,"$sh/lib" \
    -o "$tmp/pc-rt-shared" || fail "pkg-config libaco_rt build against the shared install"
grep -qx 'libaco_rt.so.1' < <(needed "$tmp/pc-rt-shared") || fail "the pkg-config build does not need libaco_rt.so.1"
runs_ok "$tmp/pc-rt-shared" 'rt_consumer: ok' > /dev/null
# The hooks under --as-needed: a plain -laco_hook is dropped (hook_main.c
# names none of the hooked functions, as a program whose libraries make
# its blocking calls), and the program says they are dead; libaco_hook.pc
# keeps them.
# shellcheck disable=SC2046
"$CC" "$hook_main" $(pkg-config --cflags libaco_rt) -Wl,--as-needed -L"$sh/lib" -laco_hook \
    $(pkg-config --libs libaco_rt) -ldl -Wl,-rpath,"$sh/lib" -o "$tmp/plain-hook" ||
    fail "the plain -laco_hook build"
grep -q libaco_hook < <(needed "$tmp/plain-hook") &&
    fail "--as-needed kept a plain -laco_hook: the hook check below proves nothing"
out=$("$tmp/plain-hook" 2>&1) && fail "the program without its hooks ran as if it had them: $out"
grep -q '^hook_consumer: aco_rt_hooks_active() = 0$' <<< "$out" ||
    { echo "$out"; fail "the program without its hooks did not say aco_rt_hooks_active() = 0"; }
echo "    plain -laco_hook under --as-needed: dropped, aco_rt_hooks_active() = 0"
hookflags=$(pkg-config --cflags --libs libaco_hook)
echo "    pkg-config --cflags --libs libaco_hook: $hookflags"
# shellcheck disable=SC2086
"$CC" -Wall -Wextra -Werror "$hook_main" -Wl,--as-needed $hookflags -ldl -Wl,-rpath,"$sh/lib" \
    -o "$tmp/pc-hook-shared" || fail "pkg-config libaco_hook build against the shared install"
grep -qx 'libaco_hook.so' < <(needed "$tmp/pc-hook-shared") ||
    fail "pkg-config libaco_hook under --as-needed: no NEEDED libaco_hook.so"
runs_ok "$tmp/pc-hook-shared" 'hook_consumer: ok' > /dev/null
unset PKG_CONFIG_PATH

# ---------------------------------------------------------------------------
# Last, so that everything else has run: the README must have its commands
# under the marker (step 1 ran them).
[ "$readme_blocks" -gt 0 ] ||
    fail "README.md has no fenced block after a line '$marker': its install and CMake lines are not tested"

echo "cmake ok ($CC, $((SECONDS - t0)) s)"
