#!/usr/bin/env bash
# aco.h and aco_assert_override.h compile as C99, C11 and C++ (extern "C"),
# warning-free with gcc and clang, and libaco 1.2 style code builds unchanged;
# the additions (aco_reset, aco_reset2, aco_new) work from C++ too.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/cxx.cc" <<'CXX'
#include "aco.h"
#include "aco_assert_override.h"
static int steps;
static void co_fn() { steps++; aco_yield(); steps++; aco_exit(); }
int main() {
    aco_thread_init(nullptr);
    aco_t* m = aco_create(nullptr, nullptr, 0, nullptr, nullptr);
    aco_share_stack_t* s = aco_share_stack_new2(0, 0);
    aco_t* co = aco_create(m, s, 0, co_fn, nullptr);
    aco_resume(co); assert(steps == 1 && !co->is_end);
    aco_resume(co); assert(steps == 2 && co->is_end);
    assert(aco_is_main_co(m) && !aco_is_main_co(co));
    aco_reset2(co, co_fn, nullptr);             /* reuse it: from the top */
    aco_resume(co); assert(steps == 3 && !co->is_end);
    aco_reset(co);
    aco_resume(co); assert(steps == 4 && !co->is_end);
    int* buf;
    aco_new(buf, 4 * sizeof(*buf));             /* typed in C++ too */
    buf[3] = steps;
    free(buf);
    aco_destroy(co); aco_share_stack_destroy(s); aco_destroy(m);
    return ACO_VERSION_MAJOR == 1 ? 0 : 1;
}
CXX
for cc in gcc clang; do
    for std in c99 c11 gnu99; do
        $cc -std=$std -Wall -Wextra -Werror -I. -c test_aco_synopsis.c -o "$tmp/s.o"
    done
done
# aco.c is C: build it with gcc, the program with each C++ compiler.
gcc -c -Wall -Wextra -Werror aco.c -o "$tmp/aco.o"
gcc -c acosw.S -o "$tmp/sw.o"
for cxx in g++ clang++; do
    $cxx -std=c++11 -Wall -Wextra -Werror -I. "$tmp/cxx.cc" "$tmp/aco.o" "$tmp/sw.o" -o "$tmp/cxx"
    "$tmp/cxx"
done
echo "headers ok"
