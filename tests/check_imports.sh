#!/usr/bin/env bash
# The arrows point one way: apps/ -> rt/ -> the core.  Checked twice:
# in the sources (which headers each part includes) and in the objects
# output/ holds (which symbols each part takes from which).
#   - the core (aco.h, aco.c, acosw.S) includes nothing of rt/;
#   - rt/ includes nothing of apps/, bench/ or tests/, and its objects take
#     no symbol that an app's object defines;
#   - apps/ and bench/ include only the runtime's public headers (aco_rt.h,
#     aco_rt_pthread*.h), never its internals (rt_impl.h, rt_sys.h);
#   - no I/O backend (io_uring.o, io_epoll.o) takes a symbol the I/O front
#     (io.o) defines: the descriptor table and everything both need live
#     below them.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUTPUT:-output}
fail=0
bad() { echo "FAIL: $*"; fail=1; }

includes() { grep -ho '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[^"]*"' "$@" 2>/dev/null |
             sed 's/.*"\(.*\)"/\1/' | sort -u; }
rt_headers=$(cd rt && ls ./*.h | sed 's|^\./||')
app_headers=$(cd apps && ls ./*.h | sed 's|^\./||')

for h in $(includes aco.h aco.c acosw.S); do
    case " $(echo $rt_headers) " in *" ${h##*/} "*) bad "the core includes the runtime's $h" ;; esac
done
for h in $(includes rt/*.c rt/*.h); do
    case " $(echo $app_headers) " in *" ${h##*/} "*) bad "rt/ includes the programs' $h" ;; esac
    case $h in *apps/*|*bench/*|*tests/*) bad "rt/ includes $h" ;; esac
done
for h in $(includes apps/*.c apps/*.h bench/*.c); do
    case ${h##*/} in rt_impl.h|rt_sys.h) bad "apps/ or bench/ include the runtime's internal $h" ;; esac
done

# Symbols: defined (global) and undefined ones of an object.
defined() { nm -g --defined-only "$1" | awk '{print $3}' | sort -u; }
undefined() { nm -u "$1" | awk '{print $2}' | sort -u; }
obj=$OUT/obj/rt
if [ ! -f "$obj/io.o" ]; then
    bad "$obj/io.o not found: run 'bash make.sh' first"
else
    for b in io_uring io_epoll; do
        [ -f "$obj/$b.o" ] || continue
        took=$(comm -12 <(undefined "$obj/$b.o") <(defined "$obj/io.o"))
        [ -z "$took" ] || bad "the backend $b.o takes from the I/O front io.o: $(echo $took)"
    done
    app_syms=$(cat <(defined "$obj/resp.o") <(defined "$obj/kv.o") | sort -u)
    for o in $(ls "$obj"/*.o); do
        case ${o##*/} in resp.o|kv.o|port_*.o) continue ;; esac
        took=$(comm -12 <(undefined "$o") <(echo "$app_syms"))
        [ -z "$took" ] || bad "${o##*/} takes from the programs' objects: $(echo $took)"
    done
    core=$OUT/obj/lib/aco.o
    # hook.o defines libc's names on purpose (the syscall hooks)
    rt_syms=$(for o in "$obj"/*.o; do
                  case ${o##*/} in hook.o|resp.o|kv.o|port_*.o) ;; *) defined "$o" ;; esac
              done | sort -u)
    took=$(comm -12 <(undefined "$core") <(echo "$rt_syms"))
    [ -z "$took" ] || bad "the core's aco.o takes from the runtime: $(echo $took)"
fi
[ $fail = 0 ] && echo "imports: apps -> rt -> core, and no backend takes from the I/O front"
exit $fail
