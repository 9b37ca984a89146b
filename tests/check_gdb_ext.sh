#!/usr/bin/env bash
# tools/aco_gdb.py: `aco-bt EXPR` shows the frames of suspended cos - one
# still on its share stack, two evicted to their save stacks, a main co, a
# co that never ran, one evicted by the co it handed off to (aco_yield_to) -
# by name and in order, the live frames of the running co, and a note for
# an ended one; and it leaves gdb's state as it found it:
# the registers, the bytes of both share stacks and the selected frame, and
# the program then runs to its normal end.  gcc and clang, -O0 and -O2;
# x86-64 and i386 natively (also in checked mode), aarch64 and riscv64 (static cross builds) under
# qemu-user's gdb stub with gdb-multiarch, unless make.sh's -o no-aarch64 /
# -o no-riscv64 say otherwise (ACO_CROSS).
set -euo pipefail
cd "$(dirname "$0")/.."
. tests/gdb_common.sh
command -v gdb >/dev/null || { echo "gdb not found: install the Debian package gdb"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/bt_ext.c" <<'C'
#include "aco.h"
aco_t *main_co, *co_a, *co_b, *co_c, *co_d, *co_e, *co_f, *co_g, *co_h;
volatile int sink;
__attribute__((noinline)) void c_here(void) { __asm__ volatile("" ::: "memory"); }
__attribute__((noinline)) static void a_inner(int n) { volatile char pad[64]; pad[0] = (char)n; aco_yield(); sink = pad[0]; }
__attribute__((noinline)) static void a_outer(int n) { volatile char pad[400]; pad[0] = (char)n; a_inner(n + 1); sink = pad[0]; }
static void a_fn(void) { a_outer(1); aco_exit(); }
__attribute__((noinline)) static void b_inner(void) { volatile char pad[3000]; pad[0] = 1; aco_yield(); sink = pad[0]; }
static void b_fn(void) { b_inner(); aco_exit(); }
__attribute__((noinline)) static void c_inner(void) { volatile char pad[100]; pad[0] = 1; c_here(); aco_yield(); sink = pad[0]; }
static void c_fn(void) { c_inner(); aco_exit(); }
__attribute__((noinline)) static void d_inner(void) { aco_yield(); sink = 4; }
static void d_fn(void) { d_inner(); aco_exit(); }
static void e_fn(void) { aco_exit(); }
__attribute__((noinline)) static void g_inner(void) { volatile char pad[200]; pad[0] = 1; aco_yield_to(co_h); sink = pad[0]; }
static void g_fn(void) { g_inner(); aco_exit(); }
static void h_fn(void) { aco_yield(); aco_exit(); }
int main(void) {
    aco_thread_init(NULL);
    main_co = aco_create(NULL, NULL, 0, NULL, NULL);
    aco_share_stack_t* s1 = aco_share_stack_new(0);
    aco_share_stack_t* s2 = aco_share_stack_new(0);
    co_a = aco_create(main_co, s1, 0, a_fn, NULL);
    co_b = aco_create(main_co, s1, 0, b_fn, NULL);
    co_c = aco_create(main_co, s1, 0, c_fn, NULL);
    co_d = aco_create(main_co, s2, 0, d_fn, NULL);
    co_e = aco_create(main_co, s1, 0, e_fn, NULL);   /* never resumed */
    co_f = aco_create(main_co, s2, 0, e_fn, NULL);
    aco_share_stack_t* s3 = aco_share_stack_new(0);
    co_g = aco_create(main_co, s3, 0, g_fn, NULL);
    co_h = aco_create(main_co, s3, 0, h_fn, NULL);
    aco_resume(co_g);   /* hands off to h, which evicts it and yields */
    aco_resume(co_f);   /* ends */
    aco_resume(co_d);   /* suspended on s2, its owner */
    aco_resume(co_a);
    aco_resume(co_b);   /* evicts a (a's frames are shallower than b's) */
    aco_resume(co_c);   /* evicts b; stops in c_here, running on s1 */
    aco_resume(co_a); aco_resume(co_b); aco_resume(co_c); aco_resume(co_d);
    aco_resume(co_g); aco_resume(co_h);
    if (!(co_a->is_end && co_b->is_end && co_c->is_end && co_d->is_end)) return 1;
    if (!(co_g->is_end && co_h->is_end)) return 1;
    return 0;
}
C
# The bytes of both share stacks, from co_a's and co_d's share stacks.
dump() {  # dump <suffix>
    printf '%s\n' \
        "-ex" "dump binary memory $tmp/s1.$1 co_a->share_stack->ptr (char*)co_a->share_stack->ptr + co_a->share_stack->sz" \
        "-ex" "dump binary memory $tmp/s2.$1 co_d->share_stack->ptr (char*)co_d->share_stack->ptr + co_d->share_stack->sz"
}
# Frame names of the backtrace after marker @@<name> (clones count as their
# function).
frames() {  # frames <name>
    awk -v m="@@$1" '$0 == m {on = 1; next} /^@@/ {on = 0} on && /^#[0-9]+ / {print}' "$tmp/out" |
        sed -E 's/^#[0-9]+ +(0x[0-9a-f]+ in )?([A-Za-z_0-9]+).*/\2/' | tr '\n' ' '
}
section() {  # section <name>: the whole output after marker @@<name>
    awk -v m="@@$1" '$0 == m {on = 1; next} /^@@/ {on = 0} on' "$tmp/out"
}

fail=0
for cc in $GDB_CCS; do
    for m in $GDB_TARGETS; do
        gdb_build $cc $m || continue
        # natively also in checked mode, where each co has a window of its
        # own (an evicted or unstarted co's may not hold its return into
        # aco_protector)
        for opt in -O0 -O2 checked; do
            [ $opt = checked ] && [ "$where" != native ] && continue
            what="$cc $m $opt"
            chk=0; [ $opt = checked ] && { chk=1; opt=-O2; }
            export ACO_CHECKED=$chk
            "${build[@]}" $opt -g -I. "$tmp/bt_ext.c" aco.c acosw.S -o "$tmp/bt"
            rm -f "$tmp"/s[12].*
            mapfile -t d0 < <(dump before)
            mapfile -t d1 < <(dump after)
            gdb_run $where "$tmp/bt" -ex 'source tools/aco_gdb.py' -ex 'break c_here' -- \
                -ex 'echo @@regs-before\n' -ex 'info registers' -ex 'echo @@-\n' "${d0[@]}" \
                -ex 'frame 2' \
                -ex 'echo @@a\n' -ex 'aco-bt co_a' -ex 'echo @@b\n' -ex 'aco-bt co_b' \
                -ex 'echo @@c\n' -ex 'aco-bt co_c' -ex 'echo @@d\n' -ex 'aco-bt co_d' \
                -ex 'echo @@main\n' -ex 'aco-bt main_co' -ex 'echo @@e\n' -ex 'aco-bt co_e' \
                -ex 'echo @@f\n' -ex 'aco-bt co_f' -ex 'echo @@g\n' -ex 'aco-bt co_g' \
                -ex 'echo @@selected\n' -ex 'frame' \
                -ex 'frame 0' -ex 'echo @@regs-after\n' -ex 'info registers' -ex 'echo @@-\n' "${d1[@]}" \
                -ex 'echo @@end\n' -ex 'delete' -ex continue \
                > "$tmp/out" 2>&1 || true
            bad() { echo "FAIL $what: $*"; fail=1; }
            check() {  # check <name> <wanted frames>
                local got; got=$(frames "$1")
                [ "$got" = "$2 " ] || bad "aco-bt $1: frames '$got', want '$2'"
            }
            check a "aco__yield_inline a_inner a_outer a_fn aco_protector"
            check b "aco__yield_inline b_inner b_fn aco_protector"
            check c "c_here c_inner c_fn aco_protector"
            check d "aco__yield_inline d_inner d_fn aco_protector"
            # main co: resumed in aco_resume, which tail-jumps to acosw when
            # optimised (then main itself made the call); at -O0 its inline
            # half (resume) and the take path's functions (take_any, take,
            # take16/32/64, take_slow, take_done) stay on the stack; in
            # checked mode its switch is checked_switch (ext_switch: clang)
            got=$(frames main)
            grep -Eq '^((aco_resume|resume|take[a-z0-9_]*|checked_switch|ext_switch) )*main $' <<< "$got" ||
                bad "aco-bt main: frames '$got', want aco_resume's own frames (if any), then main"
            check e "e_fn aco_protector"
            # a co that handed off: aco_yield_to tail-jumps (through the
            # hand-off co's entry, hop_switch) to acosw when optimised; at
            # -O0 both stay on the stack
            got=$(frames g)
            grep -Eq '^(hop_switch )?(aco_yield_to )?g_inner g_fn aco_protector $' <<< "$got" ||
                bad "aco-bt co_g: frames '$got', want [hop_switch aco_yield_to] g_inner g_fn aco_protector"
            grep -q 'evicted to its save stack' < <(section g) || bad "co_g not reported as evicted"
            grep -q 'evicted to its save stack' < <(section a) || bad "co_a not reported as evicted"
            grep -q '(suspended)' < <(section d) || bad "co_d not reported as suspended"
            grep -q 'is running' < <(section c) || bad "co_c not reported as running"
            grep -q 'not started yet' < <(section e) || bad "co_e not reported as not started"
            grep -q 'has ended' < <(section f) || bad "co_f not reported as ended"
            grep -q '^#2 ' < <(section selected) || bad "selected frame not restored: $(section selected | head -1)"
            [ "$(section regs-before)" = "$(section regs-after)" ] || bad "registers changed"
            [ -n "$(section regs-before)" ] || bad "no registers read"
            for s in s1 s2; do
                cmp -s "$tmp/$s.before" "$tmp/$s.after" || bad "share stack $s changed"
            done
            grep -q 'exited normally' < <(section end) || bad "the program did not run to its normal end"
            if grep -qE '\?\?|Backtrace stopped|previous frame identical|corrupt stack|Python Exception|Error' "$tmp/out"; then
                bad "unclean output"
            fi
            if [ $fail = 1 ]; then cat "$tmp/out"; exit 1; fi
            echo "ok $what"
        done
    done
done
echo "aco-bt: all checks passed"
