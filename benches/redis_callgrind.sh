#!/usr/bin/env bash
# Where the client's instructions of one call go, by callgrind: the bench
# built with line tables and v0 symbols (in target/callgrind, apart from the
# bench profile's own build), each PROFILE run alone under callgrind with
# collection on in `measured` only (the profiled calls, not the set-up or
# warm-up ones), then grouped by benches/callgrind_groups.py into parts
# (key writing, command packing, reply parsing, SHA-256, decoding, stats,
# allocations...) with the lines of cache-key/src they come from.
#
#   bash benches/redis_callgrind.sh [PROFILE[:SIZE][,PROFILE[:SIZE]...]...]
#       one table per argument, a column per profile; by default
#       `cache,raw tracked,moka_struct,moka_struct_ttl` (700 B); e.g.
#       cache:large,raw:large or cache_async,raw_async
#   OPS=2000 (calls per profile); DETAIL=1 also lists each part's innermost
#   functions. The profiles are redis_tier's (`PROFILE=`), each starting
#   its own redis-server. Needs valgrind, llvm-symbolizer, python3.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OPS=${OPS:-2000}
cd "$ROOT"
export CARGO_TARGET_DIR="$ROOT/target/callgrind"
export CARGO_PROFILE_BENCH_DEBUG=line-tables-only
export RUSTFLAGS="${RUSTFLAGS:-} -C symbol-mangling-version=v0"
BIN=$(cargo bench -p cache-key-benches --bench redis_tier --no-run --message-format=json 2>/dev/null |
    jq -r 'select(.executable != null and .target.name == "redis_tier") | .executable' | tail -1)
OUT="$CARGO_TARGET_DIR/out"
mkdir -p "$OUT"
TABLES=("$@")
[ ${#TABLES[@]} -eq 0 ] && TABLES=(cache,raw tracked,moka_struct,moka_struct_ttl)
for table in "${TABLES[@]}"; do
    columns=()
    IFS=, read -r -a specs <<<"$table"
    for spec in "${specs[@]}"; do
        profile=${spec%%:*}
        size=small
        [ "$spec" != "$profile" ] && size=${spec#*:}
        ops=$OPS
        [ "$size" = large ] && ops=$(( OPS / 10 > 0 ? OPS / 10 : 1 ))
        file="$OUT/callgrind.$profile.$size.out"
        PROFILE=$profile SIZE=$size OPS=$ops valgrind --tool=callgrind --dump-instr=yes \
            --toggle-collect='redis_tier::measured' --collect-atstart=no \
            --callgrind-out-file="$file" "$BIN" --bench >/dev/null 2>&1
        # (An async profile awaits its calls in one measured block: still $ops calls.)
        columns+=("$profile ($size)=$file:$ops")
    done
    echo
    echo "## ${table//,/ vs }"
    echo
    python3 benches/callgrind_groups.py "$BIN" "${columns[@]}"
done
