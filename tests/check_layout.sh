#!/usr/bin/env bash
# aco.h's public types have one layout whatever the build flags: the size and
# every field's offset of aco_t, aco_share_stack_t and aco_save_stack_t are
# the same with -fsanitize=address, thread or undefined, ACO_USE_VALGRIND and
# ACO_CONFIG_SHARE_FPU_MXCSR_ENV as without, for gcc and clang, on x86-64 and
# i386 (and aarch64 / riscv64 where their cross compilers are, ACO_CROSS).
# So a libaco built with a sanitizer and a program built without (or the
# other way round) agree on every field.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/layout.c" <<'C'
#include <stddef.h>
#include <stdio.h>
#include "aco.h"
#define F(t, f) printf(#t "." #f " %zu %zu\n", offsetof(t, f), sizeof(((t*)0)->f))
int main(void) {
    printf("aco_t %zu\n", sizeof(aco_t));
    F(aco_t, reg); F(aco_t, is_end); F(aco_t, state); F(aco_t, main_co);
    F(aco_t, arg); F(aco_t, fp); F(aco_t, share_stack); F(aco_t, save_stack);
#if defined(__x86_64__) || defined(__i386__)
    F(aco_t, reg_fpucw); F(aco_t, reg_mxcsr);
#else
    F(aco_t, reg_fpctl);
#endif
    printf("aco_share_stack_t %zu\n", sizeof(aco_share_stack_t));
    F(aco_share_stack_t, ptr); F(aco_share_stack_t, sz);
    F(aco_share_stack_t, align_highptr); F(aco_share_stack_t, align_retptr);
    F(aco_share_stack_t, align_limit); F(aco_share_stack_t, owner);
    F(aco_share_stack_t, guard_page_enabled); F(aco_share_stack_t, real_ptr);
    F(aco_share_stack_t, real_sz); F(aco_share_stack_t, co_ct);
    F(aco_share_stack_t, valgrind_stk_id); F(aco_share_stack_t, thread);
    printf("aco_save_stack_t %zu\n", sizeof(aco_save_stack_t));
    F(aco_save_stack_t, ptr); F(aco_save_stack_t, sz); F(aco_save_stack_t, valid_sz);
    F(aco_save_stack_t, max_cpsz); F(aco_save_stack_t, ct_save);
    F(aco_save_stack_t, ct_restore);
    return 0;
}
C
fail=0
flavours=("" "-fsanitize=address" "-fsanitize=thread" "-fsanitize=undefined"
          "-DACO_USE_VALGRIND" "-DACO_CONFIG_SHARE_FPU_MXCSR_ENV")
# layout <compiler and target flags...>: the same output for every flavour
layout() {
    local ref="" out f what
    for f in "${flavours[@]}"; do
        what="$* $f"
        # TSan has no i386 runtime; the cross builds are static, without
        # sanitizer runtimes: their layout is compiled, not linked.
        case "$what" in *-m32*-fsanitize=thread*|*--target*-fsanitize*|*linux-gnu-gcc*-fsanitize*) continue ;; esac
        # shellcheck disable=SC2086
        if ! "$@" $f -Wall -Wextra -Werror -I. "$tmp/layout.c" -o "$tmp/l" 2> "$tmp/err"; then
            echo "FAIL: '$what' does not build"; cat "$tmp/err"; fail=1; continue
        fi
        if [ -n "${RUN:-}" ]; then out=$($RUN "$tmp/l"); else out=$("$tmp/l"); fi
        if [ -z "$ref" ]; then ref=$out; echo "$* : $(echo "$out" | head -1), share stack $(echo "$out" | grep '^aco_share_stack_t ' | cut -d' ' -f2) bytes"
        elif [ "$out" != "$ref" ]; then
            echo "FAIL: '$what' lays aco.h's types out differently:"
            diff <(echo "$ref") <(echo "$out") | sed 's/^/    /'; fail=1
        fi
    done
}
layout gcc
layout gcc -m32
layout clang
layout clang -m32
for a in ${ACO_CROSS-aarch64 riscv64}; do
    emu=qemu-$a; [ $a = aarch64 ] && emu="qemu-aarch64 -cpu max"
    RUN=$emu layout "$a-linux-gnu-gcc" -static
done
[ $fail = 0 ] && echo "layout ok: aco_t, aco_share_stack_t and aco_save_stack_t are the same in every build"
exit $fail
