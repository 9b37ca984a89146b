#!/usr/bin/env bash
# Commit subjects: at most 72 characters, so that `git log --oneline` reads
# as the project's history.  The rule holds from the commit after 9218a4b
# (earlier subjects are as they were written).  Outside a git checkout, or
# in a clone too shallow to hold 9218a4b, the commits there are checked.
#   bash tests/check_commits.sh
set -euo pipefail
cd "$(dirname "$0")/.."
if ! git rev-parse --git-dir > /dev/null 2>&1; then
    echo "check_commits: not a git checkout: nothing to check"
    exit 0
fi
range=HEAD
git cat-file -e 9218a4b^{commit} 2> /dev/null && range=9218a4b..HEAD
long=$(git log --format='%h %s' "$range" | awk '{s = $0; sub(/^[^ ]+ /, "", s); if (length(s) > 72) print}')
if [ -n "$long" ]; then
    echo "FAIL: commit subjects over 72 characters:"
    echo "$long" | sed 's/^/    /'
    exit 1
fi
echo "check_commits: $(git log --format=%h "$range" | wc -l) subjects, each at most 72 characters"
