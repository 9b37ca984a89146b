#!/usr/bin/env bash
# aarch64 Branch Target Identification, at run time: under qemu-aarch64 (its
# default cpu implements BTI) the pages holding a program's co code and acosw
# are made guarded (mprotect PROT_BTI), then cos switch back and forth with
# acosw called through a function pointer.  Every indirect call must land on
# a "bti c", and acosw's continuation of the other side - a branch to a
# resume address, which is no landing pad - must not count as one (acosw
# uses ret).  Two controls prove the guard is real: a blr to a non-landing
# pad dies by SIGILL, and so does the same program with acosw.S assembled
# without -mbranch-protection (no bti c at acosw).  Debian's libc carries no
# BTI marking, so the whole program cannot run guarded; this is the next best.
# Skipped only when make.sh's -o no-aarch64 said so (ACO_CROSS).
set -euo pipefail
cd "$(dirname "$0")/.."
case " ${ACO_CROSS-aarch64 riscv64} " in
    *" aarch64 "*) ;;
    *) echo "aarch64 left out by request (-o no-aarch64)"; exit 0 ;;
esac
command -v qemu-aarch64 >/dev/null ||
    { echo "FAIL: qemu-aarch64 not found: install the Debian package qemu-user"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/bti.c" <<'C'
#include "aco.h"
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>

#define PROT_BTI_ 0x10          /* PROT_BTI, asm/mman.h on arm64 */
#define ROUNDS 1000
extern char aco_protector[];    /* hidden, but this is one static link */
extern const char aco_protector_ret[];

static aco_t *main_co, *co;
static volatile long co_steps;
static void (*volatile sw)(aco_t*, aco_t*) = acosw;   /* blr, not bl */

/* The guarded range starts here, page-aligned (64 KiB covers every page
 * size), and ends with acosw.o, linked last of this program's objects. */
__attribute__((aligned(65536), noinline)) void guarded_start(void) {
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void co_fn(void) {
    for (;;) {
        co_steps++;
        aco_yield();            /* bl acosw; main continues by acosw's ret */
    }
}

/* Both sides' resume addresses lie in guarded pages. */
__attribute__((noinline)) static void ping_pong(void) {
    for (int i = 0; i < ROUNDS; i++) {
        aco_gtls_co = co;
        sw(main_co, co);        /* as aco_resume, but through a pointer */
        aco_gtls_co = main_co;
    }
}

static void guard(int on) {
    long pg = sysconf(_SC_PAGESIZE);
    uintptr_t lo = (uintptr_t)guarded_start & ~(uintptr_t)(pg - 1);
    uintptr_t hi = ((uintptr_t)aco_protector + 64 + pg - 1) & ~(uintptr_t)(pg - 1);
    if (mprotect((void*)lo, hi - lo, PROT_READ | PROT_EXEC | (on ? PROT_BTI_ : 0))) {
        perror("mprotect");
        _exit(3);
    }
}

int main(int argc, char** argv) {
    aco_thread_init(NULL);
    main_co = aco_create(NULL, NULL, 0, NULL, NULL);
    aco_share_stack_t* s = aco_share_stack_new(0);
    co = aco_create(main_co, s, 0, co_fn, NULL);
    aco_resume(co);             /* takes the stack; unguarded */
    guard(1);
    if (argc > 1) {             /* control: blr to a non-landing pad */
        void (*volatile bad)(void) = (void (*)(void))(uintptr_t)aco_protector_ret;
        bad();
    }
    ping_pong();
    guard(0);                   /* libc is not BTI-marked: unguard first */
    printf("%ld co steps\n", co_steps);
    (void)argv;
    return co_steps == ROUNDS + 1 ? 0 : 1;
}
C

fail=0
run() {  # run <what> <expected: 0 or SIGILL> <binary> [args]
    local what=$1 want=$2 bin=$3 rc got
    shift 3
    set +e
    # (the braces keep the shell's "Illegal instruction" notice quiet)
    { (ulimit -c 0; qemu-aarch64 "$bin" "$@" > "$tmp/out" 2>&1); rc=$?; } 2>/dev/null
    set -e
    if [ $rc -gt 128 ]; then got="SIG$(kill -l $((rc - 128)))"; else got=$rc; fi
    if [ "$got" = "$want" ]; then
        echo "ok $what: $got"
    else
        echo "FAIL $what: expected $want, got $got"; cat "$tmp/out"; fail=1
    fi
}

for cc in "${CC_AARCH64:-aarch64-linux-gnu-gcc}" "clang --target=aarch64-linux-gnu"; do
    bp=-mbranch-protection=standard
    # shellcheck disable=SC2086
    $cc $bp -O2 -g -I. -c "$tmp/bti.c" -o "$tmp/bti.o"
    $cc $bp -O2 -g -c aco.c -o "$tmp/aco.o"
    $cc $bp -c acosw.S -o "$tmp/sw.o"
    $cc -c acosw.S -o "$tmp/sw-nobti.o"
    $cc -static "$tmp/bti.o" "$tmp/aco.o" "$tmp/sw.o" -o "$tmp/bti"
    $cc -static "$tmp/bti.o" "$tmp/aco.o" "$tmp/sw-nobti.o" -o "$tmp/bti-nobti"
    name=${cc%% *}
    run "$name: guarded switches" 0 "$tmp/bti"
    run "$name: control, blr to a non-landing pad" SIGILL "$tmp/bti" control
    run "$name: control, acosw without bti c" SIGILL "$tmp/bti-nobti"
done
exit $fail
