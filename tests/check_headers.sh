#!/usr/bin/env bash
# aco.h and aco_assert_override.h compile as C99, C11 and C++ (extern "C"),
# warning-free with gcc and clang, and libaco 1.2 style code builds unchanged;
# the additions (aco_reset, aco_reset2, aco_new) work from C++ too.
# The runtime's public headers (rt/aco_rt.h, aco_rt_pthread.h,
# aco_rt_pthread_names.h) each compile alone and twice over (their guards)
# as C99, C11, GNU C11 (-Wpedantic) and C++11, with gcc and clang, and
# aco_rt.h's ACO_RT_VERSION_* are aco.h's ACO_VERSION_*.  A pthread_ call
# that aco_rt_pthread_names.h does not map stops the compiler.
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
# The runtime's headers, as a program includes them: -I. for aco.h (which
# aco_rt.h includes; an install puts both in one directory), -Irt.
for h in aco_rt.h aco_rt_tls.h aco_rt_pthread.h aco_rt_pthread_names.h; do
    printf '#include "%s"\n#include "%s"\nint main(void) { return 0; }\n' "$h" "$h" > "$tmp/h.c"
    cp "$tmp/h.c" "$tmp/h.cc"
    for cc in gcc clang; do
        for std in c99 c11 gnu11; do
            $cc -std=$std -Wall -Wextra -Wpedantic -Werror -I. -Irt -c "$tmp/h.c" -o "$tmp/h.o" ||
                { echo "FAIL: rt/$h alone, $cc -std=$std"; exit 1; }
        done
    done
    for cxx in g++ clang++; do
        $cxx -std=c++11 -Wall -Wextra -Werror -I. -Irt -c "$tmp/h.cc" -o "$tmp/h.o" ||
            { echo "FAIL: rt/$h alone, $cxx -std=c++11"; exit 1; }
    done
done
# aco_rt_pthread_names.h: a pthread_ call the face does not have stops the
# compiler whatever the flags (poisoned: no call of the real one on a co's
# id), and a C++ program that includes libstdc++'s thread headers after it
# still builds.
for f in pthread_cancel pthread_testcancel pthread_cleanup_push pthread_kill \
         pthread_sigmask pthread_sigqueue pthread_atfork pthread_spin_lock \
         pthread_setname_np pthread_getattr_np pthread_setaffinity_np \
         pthread_getcpuclockid pthread_setschedprio pthread_clockjoin_np \
         pthread_rwlock_clockrdlock pthread_attr_setguardsize \
         pthread_mutexattr_setrobust; do
    printf 'void f(void);\nvoid f(void) { (void)%s; }\n' "$f" > "$tmp/p.c"
    for cc in gcc clang; do
        if $cc -w -I. -Irt -include aco_rt_pthread_names.h -c "$tmp/p.c" -o "$tmp/p.o" \
               2> "$tmp/p.err"; then
            echo "FAIL: $f compiled through aco_rt_pthread_names.h ($cc)"; exit 1
        fi
        grep -q poisoned "$tmp/p.err" ||
            { echo "FAIL: $f: $cc did not say poisoned"; cat "$tmp/p.err"; exit 1; }
    done
done
cat > "$tmp/port.cc" <<'PORT'
#include <condition_variable>
#include <iostream>
#include <mutex>
#include <thread>
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
int main() {
    std::mutex sm;
    std::lock_guard<std::mutex> g(sm);
    pthread_mutex_lock(&m);
    std::cout << "x";
    return pthread_mutex_unlock(&m);
}
PORT
for cxx in g++ clang++; do
    $cxx -std=c++11 -Wall -Wextra -Werror -I. -Irt -include aco_rt_pthread_names.h \
        -c "$tmp/port.cc" -o "$tmp/port.o" ||
        { echo "FAIL: a C++ port with libstdc++'s headers ($cxx)"; exit 1; }
done
cat > "$tmp/v.c" <<'VERSION'
#include "aco_rt.h"
#if !defined(ACO_RT_VERSION_PATCH) || ACO_RT_VERSION_MAJOR != ACO_VERSION_MAJOR || \
    ACO_RT_VERSION_MINOR != ACO_VERSION_MINOR || ACO_RT_VERSION_PATCH != ACO_VERSION_PATCH
#error "aco_rt.h's version is not aco.h's"
#endif
int main(void) { return 0; }
VERSION
gcc -Wall -Wextra -Werror -I. -Irt -c "$tmp/v.c" -o "$tmp/v.o" || { echo "FAIL: the versions"; exit 1; }
echo "headers ok"
