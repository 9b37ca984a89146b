#!/usr/bin/env bash
# Checked mode as a user meets it (aco.h, "Checked mode"; docs/correctness.md):
# the original README's escape (co_fp0 keeps &ct in a global, co_fp1 on the
# same share stack writes through it), built against the library as a user
# builds it, for gcc and clang, x86-64 and i386:
#   - without ACO_CHECKED it exits 0 (the write lands in co_fp1's own frames);
#   - with ACO_CHECKED=1 it dies of SIGSEGV after the report: both cos by
#     address, the access in co_fp1 at its line, the owner's frame in co_fp0,
#     "read" or "wrote";
#   - under gdb it stops at the faulting line in co_fp1, and tools/aco_gdb.py's
#     aco-bt shows the evicted co_fp0's frames from its save stack, down to
#     aco_protector.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v gdb > /dev/null || { echo "gdb not found: install the Debian package gdb"; exit 1; }
command -v addr2line > /dev/null || { echo "addr2line not found: install the Debian package binutils"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/escape.c" <<'C'
#include "aco.h"
#include <stdio.h>
int* gl_ptr;
aco_t *co0, *co1;
__attribute__((noinline)) static void co_fp0(void) {
    int ct = 0;
    gl_ptr = &ct;
    aco_yield();                                        /* LINE_OWNER */
    aco_exit();
}
__attribute__((noinline)) static void co_fp1(void) {
    (*gl_ptr)++;                                        /* LINE_ACCESS */
    aco_exit();
}
int main(void) {
    aco_thread_init(NULL);
    aco_t* main_co = aco_create(NULL, NULL, 0, NULL, NULL);
    aco_share_stack_t* sstk = aco_share_stack_new(0);
    co0 = aco_create(main_co, sstk, 0, co_fp0, NULL);
    co1 = aco_create(main_co, sstk, 0, co_fp1, NULL);
    fprintf(stderr, "cos %p %p\n", (void*)co0, (void*)co1);
    aco_resume(co0);
    aco_resume(co1);
    return 0;
}
C
line_owner=$(grep -n LINE_OWNER "$tmp/escape.c" | cut -d: -f1)
line_access=$(grep -n LINE_ACCESS "$tmp/escape.c" | cut -d: -f1)
fail=0
for cc in gcc clang; do
    for m in -m64 -m32; do
        for opt in -O0 -O2; do
            what="$cc $m $opt"
            $cc $m $opt -g -Wall -Wextra -Werror -I. "$tmp/escape.c" aco.c acosw.S -o "$tmp/escape"
            if ! "$tmp/escape" 2> /dev/null; then echo "FAIL $what: the escape crashed without checked mode"; fail=1; fi
            set +e
            ACO_CHECKED=1 "$tmp/escape" 2> "$tmp/err"
            rc=$?
            set -e
            read -r _ a0 a1 < "$tmp/err"
            ok=1
            [ $rc = 139 ] || { echo "FAIL $what: exit $rc, want death by SIGSEGV (139)"; ok=0; }
            # (*gl_ptr)++ faults on its load where it is a load and a store
            # (-O0), on the store where it is one instruction.  The owner's
            # pc is in aco_yield, inlined into co_fp0: gcc's debug
            # information names aco.h's line (inlined by) co_fp0's, clang's
            # co_fp0 with aco.h's line.
            for want in "aco: checked: co $a1 " "the stack of co $a0 " "which is suspended" \
                        "co_fp1 at $tmp/escape.c:$line_access" "co_fp0 at "; do
                grep -qF -- "$want" "$tmp/err" || { echo "FAIL $what: the report lacks '$want'"; ok=0; }
            done
            grep -qE " (read|wrote) 0x" "$tmp/err" || { echo "FAIL $what: the report names no read or write"; ok=0; }
            [ $ok = 1 ] || { cat "$tmp/err"; fail=1; }
            out=$(ACO_CHECKED=1 gdb -nx -q -batch -x tools/aco_gdb.py -ex run -ex bt -ex 'aco-bt co0' \
                  "$tmp/escape" 2>&1)
            if ! grep -qE "SIGSEGV" <<< "$out" ||
               ! grep -qE "^#0 .*co_fp1 .* at .*escape.c:$line_access" <<< "$out"; then
                echo "FAIL $what: gdb did not stop in co_fp1 at line $line_access"; echo "$out"; fail=1
            elif ! grep -q "evicted to its save stack" <<< "$out" ||
                 ! grep -qE "^#[0-9]+ .*co_fp0 .*escape.c:$line_owner" <<< "$out"; then
                echo "FAIL $what: aco-bt co0 does not show co_fp0's evicted frames"; echo "$out"; fail=1
            elif ! grep -qE "^#[0-9]+ .* in aco_protector " <<< "$out" || grep -q " in ?? " <<< "$out"; then
                # (the slot above the saved bytes is not in the save stack)
                echo "FAIL $what: aco-bt co0's frames do not end at aco_protector"; echo "$out"; fail=1
            fi
            [ $fail = 1 ] || echo "ok $what"
        done
    done
done
exit $fail
