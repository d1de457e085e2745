#!/usr/bin/env bash
# What exact floats cost a read: this commit built twice, as it is (serde_json
# with `float_roundtrip`, the very double written) and with that feature
# taken out of cache-key/Cargo.toml (serde_json's fast path, up to one ulp
# off; the file is restored on exit), side by side:
#
# - the Redis tier's hit (both drivers) and miss (both drivers), 700 B and
#   73 KB (benches/redis_tier.rs, PROFILE runs): the client's instructions
#   per call by callgrind, collecting in `measured` only;
# - envelope::decode of pages of priced items of 700 B and 73 KB
#   (benches/exact_floats.rs): instructions per decode by cachegrind
#   (benches/instructions.sh's method), then CPU time per decode.
#
#   bash benches/exact_floats.sh   (OPS=2000 Redis calls, REPEAT=3 runs each, N=2000 decodes)
# Needs redis-server, valgrind and jq.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
OPS=${OPS:-2000}
N=${N:-2000}
REPEAT=${REPEAT:-3}
MANIFEST=cache-key/Cargo.toml
SAVED=$(mktemp)
cp "$MANIFEST" "$SAVED"
trap 'cp "$SAVED" "$MANIFEST"; rm -f "$SAVED"' EXIT

binary() {
    cargo bench -p cache-key-benches --bench "$1" --no-run --message-format=json 2>/dev/null |
        jq -r 'select(.executable != null and .target.name == "'"$1"'") | .executable' | tail -1
}

# Instructions per call of a redis_tier PROFILE run (its own redis-server).
tier() {
    local bin=$1 profile=$2 size=$3 ops=$OPS out
    [ "$size" = large ] && ops=$(( OPS / 10 ))
    out=$(mktemp)
    PROFILE=$profile SIZE=$size OPS=$ops valgrind --tool=callgrind --toggle-collect='*measured*' \
        --collect-atstart=no --callgrind-out-file="$out" "$bin" --bench >/dev/null 2>&1
    local total
    total=$(sed -n 's/^totals: *//p;s/^summary: *//p' "$out" | head -1 | awk '{print $1}')
    rm -f "$out"
    echo $(( total / ops ))
}

# Instructions per decode: N decodes minus none, over N.
decode() {
    local bin=$1 spec=$2 zero many
    count() {
        BENCH_FIXED_LOOP="$spec:$1" valgrind --tool=cachegrind --cache-sim=no \
            --cachegrind-out-file=/dev/null "$bin" --bench 2>&1 >/dev/null |
            sed -n 's/.*I *refs: *//p' | tr -d , | tail -1
    }
    zero=$(count 0)
    many=$(count "$N")
    echo $(( (many - zero) / N ))
}

for build in exact fast; do
    if [ "$build" = fast ]; then
        sed -i 's/, features = \["float_roundtrip"\] }/ }/' "$MANIFEST"
        if grep -v '^#' "$MANIFEST" | grep -q float_roundtrip; then
            echo "float_roundtrip is still on in $MANIFEST" >&2
            exit 1
        fi
    fi
    TIER=$(binary redis_tier)
    FLOATS=$(binary exact_floats)
    echo "== $build"
    for size in small large; do
        for profile in cache cache_async miss miss_async; do
            counts=()
            for _ in $(seq "$REPEAT"); do counts+=("$(tier "$TIER" $profile $size)"); done
            echo "redis_tier $profile $size: ${counts[*]} instructions per call ($REPEAT runs)"
        done
    done
    for size in small large; do
        echo "exact_floats decode/$size: $(decode "$FLOATS" decode/$size) instructions per decode"
    done
    "$FLOATS" --bench
done
