#!/usr/bin/env bash
# Instructions per call of benchmarks, counted by valgrind (cachegrind), which
# the machine's load does not change: the count of BENCH run with
# BENCH_FIXED_LOOP=group/variant:N minus the count with N = 0, over N.
#
#   bash benches/instructions.sh BENCH GROUP/VARIANT...   e.g.
#   bash benches/instructions.sh keys search_2/derived search_2/hand_written
#   bash benches/instructions.sh generations generation_search_2/cache_key generation_search_2/memory_key_for
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BENCH=$1
shift
N=${N:-20000}
cd "$ROOT"
BIN=$(cargo bench -p cache-key-benches --bench "$BENCH" --no-run --message-format=json 2>/dev/null |
    jq -r 'select(.executable != null and .target.name == "'"$BENCH"'") | .executable' | tail -1)
# (The largest count: criterion starts a child process to look for gnuplot.)
count() {
    BENCH_FIXED_LOOP="$1:$2" valgrind --tool=cachegrind --cache-sim=no \
        --cachegrind-out-file=/dev/null "$BIN" --bench 2>&1 >/dev/null |
        sed -n 's/.*I *refs: *//p' | tr -d , | sort -n | tail -1
}
for spec in "$@"; do
    zero=$(count "$spec" 0)
    many=$(count "$spec" "$N")
    echo "$spec $(( (many - zero) / N ))"
done
