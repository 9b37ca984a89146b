#!/usr/bin/env bash
# The CMake package (CMakeLists.txt) works the ways the README's users need:
#  1. a top-level build (static, tests on) builds, passes its ctest suite (the
#     x86-64 programs in both FP-env variants) and installs headers,
#     libaco.a, the aco package (lib/cmake/aco) and libaco.pc, nothing else;
#  2. tests/cmake_consumer builds against that prefix with find_package(aco)
#     and runs, libaco linked statically, and pkg-config compiles and links
#     the same main.c;
#  3. it builds and runs with add_subdirectory (ACO_SHARE_FPU_MXCSR_ENV=ON,
#     no libaco tests built) and with FetchContent from an archive of this
#     tree (a file:// URL: no network);
#  4. a shared build installs libaco.so.<version> with the SONAME link,
#     exports aco_* and acosw only, has a non-executable stack, and the
#     consumer (find_package, then pkg-config) links it (NEEDED
#     libaco.so.1) and runs;
#  5. ACO_SHARE_FPU_MXCSR_ENV=ON reaches consumers through aco::aco and
#     libaco.pc (main.c does not compile if it is missing, or present when
#     libaco was built without it; a build expecting the wrong one fails).
# Everything is built out of the source tree, in a temporary directory.
# Environment: CC (gcc), JOBS (2); CFLAGS, ASMFLAGS and LDFLAGS are not
# used (the counts of tests and the checks are those of a plain build).
set -euo pipefail
cd "$(dirname "$0")/.."
unset CFLAGS ASMFLAGS LDFLAGS
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

tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
step() { echo "== $* ($((SECONDS - t0)) s)"; }
# Quiet configures and builds; the log shows on failure.
quiet() {   # quiet <log> <command...>
    local log=$tmp/$1.log; shift
    "$@" > "$log" 2>&1 || { tail -40 "$log"; fail "$* (log above)"; }
}
consumer() {   # consumer <build dir> <cmake -D arguments...>: configure, build, run
    local b=$1; shift
    quiet "$(basename "$b")-configure" cmake -S "$top/tests/cmake_consumer" -B "$b" \
        -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF "$@"
    quiet "$(basename "$b")-build" cmake --build "$b" -j "$jobs"
    "$b/aco_consumer" > "$b/out.txt" || { cat "$b/out.txt"; fail "$b/aco_consumer failed"; }
    grep -q '^aco_consumer: ok$' "$b/out.txt" || fail "$b/aco_consumer did not say ok"
    sed 's/^/    /' "$b/out.txt"
}
needed() {   # needed <ELF file>: its NEEDED libraries
    readelf -dW "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]$/\1/p'
}
installed() {   # installed <prefix> <file>...: every file is there
    local p=$1; shift
    for f in "$@"; do [ -e "$p/$f" ] || fail "$f not installed under $p"; done
}

# ---------------------------------------------------------------------------
step "1. top-level static build with tests ($CC), ctest -j$jobs, install"
st=$tmp/static
quiet lib-static-configure cmake -S "$top" -B "$tmp/build-static" -DCMAKE_INSTALL_PREFIX="$st"
grep -q '^ACO_BUILD_TESTS:BOOL=ON$' "$tmp/build-static/CMakeCache.txt" ||
    fail "ACO_BUILD_TESTS is not ON by default in a top-level build"
quiet lib-static-build cmake --build "$tmp/build-static" -j "$jobs"
# Every program twice: the top-level ones and tests/tests.list's (less the
# ASan-only one).
nprog=$(( 10 + $(grep -v '^[[:space:]]*\(#\|$\)' tests/tests.list | grep -vc '^[[:space:]]*test_asan_overflow\b' || true) ))
ntests=$(cd "$tmp/build-static" && ctest -N | sed -n 's/^Total Tests: //p')
[ "$ntests" = $((2 * nprog)) ] || fail "ctest has $ntests tests, expected $((2 * nprog))"
if ! (cd "$tmp/build-static" && ctest --output-on-failure -j "$jobs") > "$tmp/ctest.log" 2>&1; then
    cat "$tmp/ctest.log"; fail "ctest failed"
fi
grep -E 'tests passed|Total Test time' "$tmp/ctest.log" | sed 's/^/    /'
quiet lib-static-install cmake --install "$tmp/build-static"
installed "$st" include/aco.h include/aco_assert_override.h lib/libaco.a \
    lib/cmake/aco/acoConfig.cmake lib/cmake/aco/acoConfigVersion.cmake \
    lib/cmake/aco/acoTargets.cmake lib/pkgconfig/libaco.pc
extra=$(cd "$st" && find . \( -type f -o -type l \) | grep -v -e '^\./include/aco\(_assert_override\)\{0,1\}\.h$' \
    -e '^\./lib/libaco\.a$' -e '^\./lib/cmake/aco/aco[A-Za-z-]*\.cmake$' -e '^\./lib/pkgconfig/libaco\.pc$' || true)
[ -z "$extra" ] || fail "unexpected files installed: $extra"
grep -q "^prefix=$st\$" "$st/lib/pkgconfig/libaco.pc" || fail "libaco.pc: prefix is not $st"

# ---------------------------------------------------------------------------
step "2. consumer: find_package(aco) of the static install; pkg-config"
consumer "$tmp/c-find-static" -DACO_CONSUME=find_package -DCMAKE_PREFIX_PATH="$st" \
    -DACO_EXPECT_SHARE_FPU=OFF
grep -q "found aco 1\.[0-9.]* in $st/lib/cmake/aco" "$tmp/c-find-static-configure.log" ||
    fail "find_package did not find the package under $st"
needed "$tmp/c-find-static/aco_consumer" | grep -q libaco && fail "static consumer needs a libaco.so"
export PKG_CONFIG_PATH=$st/lib/pkgconfig
flags=$(pkg-config --cflags --libs libaco)
echo "    pkg-config --cflags --libs libaco: $flags"
case " $flags " in *" -D"*) fail "libaco.pc has macros that libaco was built without" ;; esac
# shellcheck disable=SC2086
"$CC" -Wall -Wextra -Werror -DACO_CONSUMER_EXPECT_SHARE_FPU=0 tests/cmake_consumer/main.c \
    $flags -o "$tmp/pc-static" || fail "pkg-config build against the static install"
"$tmp/pc-static" | grep -q '^aco_consumer: ok$' || fail "pkg-config build (static) does not run"
# shellcheck disable=SC2046
"$CC" tests/cmake_consumer/main.c $(pkg-config --static --cflags --libs libaco) -o "$tmp/pc-static2" ||
    fail "pkg-config --static build"
"$tmp/pc-static2" > /dev/null || fail "pkg-config --static build does not run"
unset PKG_CONFIG_PATH

# ---------------------------------------------------------------------------
step "3. consumer: add_subdirectory (ACO_SHARE_FPU_MXCSR_ENV=ON), FetchContent"
consumer "$tmp/c-subdir" -DACO_CONSUME=add_subdirectory -DACO_SOURCE_DIR="$top" \
    -DACO_SHARE_FPU_MXCSR_ENV=ON -DACO_EXPECT_SHARE_FPU=ON
grep -q '^ACO_BUILD_TESTS:BOOL=OFF$' "$tmp/c-subdir/CMakeCache.txt" ||
    fail "add_subdirectory: ACO_BUILD_TESTS is not OFF by default"
if find "$tmp/c-subdir" -name 'test_aco_*' | grep -q .; then
    fail "add_subdirectory built libaco's tests"
fi
flags_make=$tmp/c-subdir/aco/CMakeFiles/aco.dir/flags.make
grep -q -- '-Wextra' "$flags_make" || fail "add_subdirectory: no libaco flags in $flags_make"
grep -q -- '-Werror' "$flags_make" &&
    fail "add_subdirectory: libaco compiled with -Werror in someone else's build"
# An archive of this tree as it is (tracked and new files, not ignored ones).
(git -C "$top" ls-files -z -c -o --exclude-standard 2>/dev/null ||
     { cd "$top" && find . -path ./.git -prune -o -path ./output -prune -o -type f -printf '%P\0'; }) |
    (cd "$top" && while IFS= read -r -d '' f; do if [ -f "$f" ]; then printf '%s\0' "$f"; fi; done) |
    tar -C "$top" --null -T - --transform 's|^|libaco/|' -czf "$tmp/libaco-src.tar.gz"
consumer "$tmp/c-fetch" -DACO_CONSUME=fetchcontent -DACO_URL="file://$tmp/libaco-src.tar.gz" \
    -DACO_EXPECT_SHARE_FPU=OFF
[ -f "$tmp/c-fetch/_deps/aco-src/aco.h" ] || fail "FetchContent did not extract the archive"

# ---------------------------------------------------------------------------
step "4. shared build (ACO_BUILD_SHARED=ON, ACO_SHARE_FPU_MXCSR_ENV=ON), install, consumers"
sh=$tmp/shared
quiet lib-shared-configure cmake -S "$top" -B "$tmp/build-shared" -DCMAKE_INSTALL_PREFIX="$sh" \
    -DACO_BUILD_SHARED=ON -DACO_SHARE_FPU_MXCSR_ENV=ON -DACO_BUILD_TESTS=OFF
quiet lib-shared-build cmake --build "$tmp/build-shared" -j "$jobs"
quiet lib-shared-install cmake --install "$tmp/build-shared"
version=$(awk '/define ACO_VERSION_(MAJOR|MINOR|PATCH)/ {v = v (v ? "." : "") $3} END {print v}' aco.h)
installed "$sh" "lib/libaco.so.$version" lib/libaco.so.1 lib/libaco.so lib/pkgconfig/libaco.pc \
    lib/cmake/aco/acoConfig.cmake
[ "$(readlink "$sh/lib/libaco.so.1")" = "libaco.so.$version" ] || fail "libaco.so.1 link"
[ "$(readlink "$sh/lib/libaco.so")" = libaco.so.1 ] || fail "libaco.so link"
[ ! -e "$sh/lib/libaco.a" ] || fail "the shared build installed libaco.a"
so=$sh/lib/libaco.so.$version
readelf -dW "$so" | grep -q 'SONAME.*\[libaco\.so\.1\]' || fail "SONAME is not libaco.so.1"
[ "$(readelf -lW "$so" | awk '/GNU_STACK/ {print $(NF-1)}')" = RW ] || fail "libaco.so: executable stack"
exports=$(nm -D --defined-only "$so" | awk '{print $3}' | sed 's/@.*//' | sort -u)
echo "$exports" | grep -q '^acosw$' || fail "libaco.so does not export acosw"
echo "$exports" | grep -q '^aco_resume$' || fail "libaco.so does not export aco_resume"
bad=$(echo "$exports" | grep -v -e '^aco_' -e '^acosw$' || true)
[ -z "$bad" ] || fail "libaco.so exports more than aco_* and acosw: $bad"
echo "    libaco.so.$version: SONAME libaco.so.1, $(echo "$exports" | wc -l) symbols exported, all aco_*/acosw"

consumer "$tmp/c-find-shared" -DACO_CONSUME=find_package -DCMAKE_PREFIX_PATH="$sh" \
    -DACO_EXPECT_SHARE_FPU=ON
needed "$tmp/c-find-shared/aco_consumer" | grep -qx 'libaco.so.1' ||
    fail "the find_package consumer of the shared install does not need libaco.so.1"
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
needed "$tmp/pc-shared" | grep -qx 'libaco.so.1' || fail "the pkg-config build does not need libaco.so.1"
out=$(LD_LIBRARY_PATH=$sh/lib "$tmp/pc-shared") || fail "pkg-config build (shared) does not run"
echo "$out" | grep -q 'FP control state shared' || fail "pkg-config build: the macro did not arrive"
unset PKG_CONFIG_PATH

echo "cmake ok ($CC, $((SECONDS - t0)) s)"
