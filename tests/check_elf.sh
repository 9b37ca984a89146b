#!/usr/bin/env bash
# ELF hygiene of what make.sh built: no executable stacks, a truthful CET
# property on acosw.S (x86) and BTI property (aarch64), the protector's CFI
# ending backtraces on every architecture, and a shared library that exports
# the API only.
set -euo pipefail
cd "$(dirname "$0")/.."
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# 1. Every program and libaco.so: GNU_STACK present and not executable.
n=0
for f in output/*..* output/clang/*..* output/libaco.so; do
    [ -x "$f" ] || continue
    line=$(readelf -lW "$f" | grep GNU_STACK || true)
    [ -n "$line" ] || { bad "$f has no GNU_STACK header"; continue; }
    flags=$(echo "$line" | awk '{print $(NF-1)}')
    [ "$flags" = RW ] || bad "$f GNU_STACK flags are '$flags' (want RW)"
    n=$((n + 1))
done
[ $n -gt 50 ] || bad "only $n ELF files checked: was make.sh run?"
echo "GNU_STACK non-executable in $n files"

# 2. acosw.S with -fcf-protection: IBT claimed, SHSTK never; endbr at acosw.
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for m in -m64 -m32; do
    for cc in gcc clang; do
        $cc $m -fcf-protection=full -c acosw.S -o "$tmp/sw.o"
        notes=$(readelf -nW "$tmp/sw.o")
        grep -q 'x86 feature: IBT' <<< "$notes" || bad "$cc $m -fcf-protection: no IBT property"
        if grep -q SHSTK <<< "$notes"; then bad "$cc $m: acosw.S claims SHSTK"; fi
        first=$(awk '/<acosw>:/ {getline; print $2; exit}' < <(objdump -d --no-show-raw-insn "$tmp/sw.o"))
        case "$first" in endbr64|endbr32) ;; *) bad "$cc $m: acosw starts with '$first', not endbr" ;; esac
        # Without CET nothing is claimed.
        $cc $m -c acosw.S -o "$tmp/sw0.o"
        if grep -q 'x86 feature' < <(readelf -nW "$tmp/sw0.o"); then bad "$cc $m: property note without -fcf-protection"; fi
    done
done
echo "CET property notes checked"

# 2b. The link: the linker ANDs the x86 feature properties of its inputs, so
# a program whose C is built with -fcf-protection=full (IBT and SHSTK) ends up
# IBT-only once acosw.o is linked in, and glibc never enables shadow stacks
# for it.  Debian's crt files carry no notes, so a full link would drop both;
# a relocatable link of everything else shows the AND.  Also: every indirect
# branch in acosw.o is notrack (it jumps to resume addresses, which are not
# landing pads), and every exported asm entry starts with endbr.
for m in -m64 -m32; do
    case $m in -m64) emu=elf_x86_64 ;; *) emu=elf_i386 ;; esac
    for cc in gcc clang; do
        $cc $m -fcf-protection=full -I. -c test_aco_synopsis.c -o "$tmp/p.o"
        $cc $m -fcf-protection=full -c aco.c -o "$tmp/a.o"
        $cc $m -fcf-protection=full -c acosw.S -o "$tmp/s.o"
        ld -m $emu -r "$tmp/p.o" "$tmp/a.o" -o "$tmp/c_only.o"
        ld -m $emu -r "$tmp/p.o" "$tmp/a.o" "$tmp/s.o" -o "$tmp/all.o"
        c_only=$(readelf -nW "$tmp/c_only.o" | grep -o 'x86 feature: .*' || true)
        all=$(readelf -nW "$tmp/all.o" | grep -o 'x86 feature: .*' || true)
        [ "$c_only" = "x86 feature: IBT, SHSTK" ] || bad "$cc $m: the C objects claim '$c_only', want IBT, SHSTK"
        [ "$all" = "x86 feature: IBT" ] || bad "$cc $m: the program with acosw.o claims '$all', want IBT only"
        ind=$(objdump -d --no-show-raw-insn "$tmp/s.o" | grep -E '(jmp|call) +\*' || true)
        if grep -vq notrack <<< "$ind"; then bad "$cc $m: an indirect branch in acosw.o is not notrack: $ind"; fi
        for sym in $(nm --defined-only -g "$tmp/s.o" | awk '$2 == "T" {print $3}'); do
            case $sym in aco_protector_ret|aco__acosw_end) continue ;; esac  # labels, never branch targets
            insn=$(awk -v s="<$sym>:" '$2 == s {getline; print $2; exit}' < <(objdump -d --no-show-raw-insn "$tmp/s.o"))
            case "$insn" in endbr64|endbr32) ;;
                *) # acosw and aco__yieldsw are reached indirectly (PLT,
                   # function pointers);
                   # aco_protector is reached by ret alone
                   [ "$sym" = aco_protector ] || bad "$cc $m: $sym starts with '$insn', not endbr" ;;
            esac
        done
        # The switch's CFA is the stack pointer plus 8 (i386: 4) before the
        # pop of the return address and plus 0 after it, plus 8 (4) again
        # after aco__handsw's push for its ret, on every path of the three
        # copies (clang's assembler once put a second path's at -8);
        # the protector's is plus 24 (20) after its sub.
        cfa=$(readelf --debug-dump=frames-interp "$tmp/s.o" | awk '$2 ~ /^[re]sp/ {print $2}' | sort -u | tr '\n' ' ')
        want_cfa="rsp+0 rsp+24 rsp+8 "; [ $m = -m32 ] && want_cfa="esp+0 esp+20 esp+4 "
        [ "$cfa" = "$want_cfa" ] || bad "$cc $m: acosw.o's CFA rows are '$cfa', want '$want_cfa'"
    done
done
# Where the crt files do carry notes, the whole program shows it directly.
printf 'int main(void){return 0;}\n' > "$tmp/m.c"
gcc -fcf-protection=full "$tmp/m.c" -o "$tmp/m"
if grep -q 'x86 feature: IBT, SHSTK' < <(readelf -nW "$tmp/m"); then
    gcc -fcf-protection=full -I. test_aco_synopsis.c aco.c acosw.S -o "$tmp/whole"
    grep -q 'x86 feature: IBT$' < <(readelf -nW "$tmp/whole") || bad "the whole program is not IBT-only"
    echo "whole-program link: IBT only"
else
    echo "this system's crt files carry no CET notes: the link was checked with ld -r"
fi
echo "CET: C objects IBT+SHSTK, with acosw.o IBT only; indirect branches notrack; entries endbr"
# A whole program built with -fcf-protection runs (notrack jumps, endbr).
gcc -O2 -fcf-protection=full -I. test_aco_synopsis.c aco.c acosw.S -o "$tmp/cet" && "$tmp/cet" > /dev/null \
    || bad "-fcf-protection build of the synopsis failed"

# 2b. aarch64 and riscv64 (unless left out: ACO_CROSS, set by test.sh).
cross=${ACO_CROSS-aarch64 riscv64}
for arch in $cross; do
    var=CC_$(echo $arch | tr '[:lower:]' '[:upper:]')
    for cc in "${!var:-$arch-linux-gnu-gcc}" "clang --target=$arch-linux-gnu"; do
        name="${cc%% *} ($arch)"
        # shellcheck disable=SC2086
        $cc -c acosw.S -o "$tmp/sw.o"
        grep -q '\.note\.GNU-stack' < <(readelf -SW "$tmp/sw.o") || bad "$name: acosw.o has no .note.GNU-stack"
        # The protector's FDE marks the return-address column undefined.
        ra=r30; [ $arch = riscv64 ] && ra=r1
        grep -q "DW_CFA_undefined: $ra " < <(readelf -wf "$tmp/sw.o") ||
            bad "$name: no DW_CFA_undefined $ra (return address) in acosw.o's CFI"
        if grep -q 'feature' < <(readelf -nW "$tmp/sw.o"); then bad "$name: property note without branch protection"; fi
        [ $arch = aarch64 ] || continue
        # -mbranch-protection: BTI claimed, PAC never; bti c opens acosw.
        for bp in standard bti; do
            $cc -mbranch-protection=$bp -c acosw.S -o "$tmp/sw.o"
            notes=$(readelf -nW "$tmp/sw.o")
            grep -q 'AArch64 feature: BTI' <<< "$notes" || bad "$name -mbranch-protection=$bp: no BTI property"
            if grep -q 'PAC' <<< "$notes"; then bad "$name -mbranch-protection=$bp: acosw.S claims PAC"; fi
            # (aco__yieldsw and aco__handsw are acosw here: objdump may
            # label the address with any of the names)
            first=$(awk '/<(acosw|aco__yieldsw|aco__handsw)>:/ {getline; print $3, $4; exit}' < <(aarch64-linux-gnu-objdump -d "$tmp/sw.o"))
            [ "$first" = "bti c" ] || bad "$name -mbranch-protection=$bp: acosw starts with '$first', not bti c"
        done
        $cc -mbranch-protection=pac-ret -c acosw.S -o "$tmp/sw.o"
        if grep -q 'feature' < <(readelf -nW "$tmp/sw.o"); then bad "$name -mbranch-protection=pac-ret: a property note"; fi
    done
    echo "$arch: GNU-stack note, protector CFI$([ $arch = aarch64 ] && echo ', BTI property notes') checked"
done

# 3. libaco.so: a SONAME, and the exported symbols are the API only.
so=output/libaco.so
grep -q 'SONAME.*\[libaco\.so\.[0-9]*\]' < <(readelf -dW "$so") || bad "$so has no SONAME"
syms=$(nm -D --defined-only "$so" | awk '{print $3}' | sort | tr '\n' ' ')
# Exactly the API, plus the thread-local current co, the out-of-line
# half of aco.h's inline aco_yield and the switch it calls.
want=$(printf '%s\n' aco_thread_init aco_share_stack_new aco_share_stack_new2 \
    aco_share_stack_destroy aco_create aco_resume aco_yield aco_get_co aco_get_arg \
    aco_exit aco_destroy aco_reset aco_reset2 acosw aco__yieldsw aco_gtls_co aco__yield_misuse \
    aco_runtime_test aco_save_fpucw_mxcsr aco_funcp_protector aco_funcp_protector_asm \
    aco_overflow_report_install aco_set_allocator aco__not_a_co aco__yield1 aco__exit1 \
    aco_create_in aco_co_size aco_alloc aco_free \
    aco_share_stack_try_new2 aco_create_main_in aco_resume_reserve \
    aco_checked aco_on_share_stack aco_checked_access aco_yield_to aco_resume_last |
    sort | tr '\n' ' ')
[ "$syms" = "$want" ] || bad "$so exports '$syms', want '$want'"
echo "libaco.so exports: $(echo $syms)"

# 4. The shared libraries reach their thread-local state in one instruction
#    (initial-exec: rt_base.h's RT_TLS, aco.c's TLS): no __tls_get_addr call,
#    which libaco_rt.so once made at every runtime call (187 sites).
tls_ok=1
for so in output/libaco.so output/libaco_rt.so output/libaco_hook.so output/libaco_rt_tls.so; do
    [ -f "$so" ] || { [ "$so" = output/libaco_rt_tls.so ] || bad "$so not built"; continue; }
    n=$(objdump -d "$so" | grep -c 'call.*<__tls_get_addr' || true)
    [ "$n" = 0 ] || { bad "$so calls __tls_get_addr at $n sites (a __thread without RT_TLS?)"; tls_ok=0; }
done
[ $tls_ok = 0 ] || echo "no __tls_get_addr in the shared libraries"
exit $fail
