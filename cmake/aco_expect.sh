#!/bin/sh
# aco_expect.sh EXPECT PROGRAM [ARGUMENT...] - ctest's runner for libaco's
# test programs: runs PROGRAM and passes (exit 0) iff it ends as EXPECTed:
#   0        it exits with status 0
#   SIGABRT  it is killed by SIGABRT (test_aco_tutorial_4 and _5), and not by
#            any other signal nor by a failing exit (ctest's WILL_FAIL would
#            take any failure)
# The shell reports a death by signal N as status 128+N; no program here
# exits with such a status on its own.
expect=$1
shift
# An expected abort must not leave a core file in the build tree.
ulimit -c 0 2>/dev/null
"$@"
rc=$?
if [ "$rc" -gt 128 ] && [ "$rc" -lt 160 ]; then
    got=SIG$(kill -l "$rc")
else
    got=$rc
fi
if [ "$got" = "$expect" ]; then
    [ "$expect" = 0 ] || echo "aco_expect: $1 ended by $got, as expected"
    exit 0
fi
echo "aco_expect: $1 should end with $expect, got $got" >&2
exit 1
