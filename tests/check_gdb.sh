#!/usr/bin/env bash
# gdb backtraces taken inside a co show its frames down to the co function and
# end cleanly at the switch's protector frame (no "??", no unwinder error),
# for gcc and clang, x86-64 and i386, and for a co whose frames were evicted to
# its save stack and restored.  aarch64 and riscv64 (static cross builds)
# likewise, run under qemu-user's gdb stub and debugged with gdb-multiarch,
# unless make.sh's -o no-aarch64 / -o no-riscv64 say otherwise (ACO_CROSS).
set -euo pipefail
cd "$(dirname "$0")/.."
. tests/gdb_common.sh
command -v gdb >/dev/null || { echo "gdb not found: install the Debian package gdb"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/bt.c" <<'C'
#include "aco.h"
__attribute__((noinline)) void bt_here(int round) { __asm__ volatile("" :: "r"(round) : "memory"); }
__attribute__((noinline)) static void inner(int round) { bt_here(round); aco_yield(); }
__attribute__((noinline)) static void outer(int round) { volatile char pad[200]; pad[0] = 1; inner(round); (void)pad[0]; }
static void co_fn(void) {
    for (int round = 0; round < 2; round++) outer(round);
    aco_exit();
}
static void other_fn(void) { volatile char big[3000]; big[0] = 2; aco_yield(); (void)big[0]; aco_exit(); }
int main(void) {
    aco_thread_init(NULL);
    aco_t* main_co = aco_create(NULL, NULL, 0, NULL, NULL);
    aco_share_stack_t* s = aco_share_stack_new(0);
    aco_t* co = aco_create(main_co, s, 0, co_fn, NULL);
    aco_t* other = aco_create(main_co, s, 0, other_fn, NULL);
    aco_resume(co);      /* round 0: fresh stack */
    aco_resume(other);   /* evicts co */
    aco_resume(co);      /* round 1: co's frames restored from its save stack */
    aco_resume(co);
    aco_resume(other);
    aco_destroy(co); aco_destroy(other); aco_share_stack_destroy(s); aco_destroy(main_co);
    return 0;
}
C
fail=0
for cc in $GDB_CCS; do
    for m in $GDB_TARGETS; do
        gdb_build $cc $m || continue
        for opt in -O0 -O2; do
            "${build[@]}" $opt -g -I. "$tmp/bt.c" aco.c acosw.S -o "$tmp/bt"
            out=$(gdb_run $where "$tmp/bt" -ex 'break bt_here' -- \
                  -ex bt -ex continue -ex bt -ex continue)
            # Frame names of each "bt" (blocks start at "#0"); clones such as
            # "inner.constprop.0" count as their function.
            blocks=$(echo "$out" | awk '/^#0 / {b++} /^#[0-9]+ / {print b, $0}')
            for b in 1 2; do
                names=$(echo "$blocks" | awk -v b=$b '$1 == b' | cut -d' ' -f2- |
                        sed -E 's/^#[0-9]+ +(0x[0-9a-f]+ in )?([A-Za-z_0-9]+).*/\2/' | tr '\n' ' ')
                want="bt_here inner outer co_fn aco_protector "
                if [ "$names" != "$want" ]; then
                    echo "FAIL $cc $m $opt bt $b: frames '$names', want '$want'"; echo "$out"; fail=1
                fi
            done
            if grep -qE '\?\?|Backtrace stopped|previous frame identical|corrupt stack' <<< "$out"; then
                echo "FAIL $cc $m $opt: unclean backtrace"; echo "$out"; fail=1
            fi
            echo "ok $cc $m $opt"
        done
    done
done
exit $fail
