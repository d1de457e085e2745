#!/usr/bin/env bash
# Build cost of `#[derive(CacheKey)]` against `#[derive(serde::Serialize)]`.
#
# Generates, in a temporary directory (removed on exit; nothing is written to
# the repository), two library crates with the same 200 query structs:
#
#   gen_cache_key  `#[derive(cache_key::CacheKey)]`, cache-key by path from this workspace
#   gen_serde      `#[derive(serde::Serialize)]`
#
# What is measured: the dev-profile `cargo build` of the generated crate itself,
# with every dependency (cache-key, cache-key-derive, syn, serde, serde_derive...)
# built beforehand and left in place. So the time is: running the derive
# macro on the 200 structs, then type-checking and compiling the code it
# generated. Two numbers per crate:
#
#   clean        `cargo clean -p <crate>` before each run (dependencies stay built)
#   incremental  `touch src/lib.rs` before each run (a no-op edit: rustc's
#                incremental cache is reused, the macros are expanded again)
#
# Each crate has its own target directory. Uses hyperfine (median of the runs)
# when it is installed, else times the runs itself and takes the median.
#
# COUNT=instructions counts instead of timing (time swings with the machine,
# instruction counts do not): one clean and one incremental build per crate,
# the generated crate's rustc run under `valgrind --tool=cachegrind`.
#
# Usage: bash benches/compile/run.sh [RUNS]   (default 7)
#        COUNT=instructions bash benches/compile/run.sh
#        CACHE_KEY_FEATURES=registry COUNT=instructions bash benches/compile/run.sh
set -euo pipefail

RUNS="${1:-7}"
# CACHE_KEY_FEATURES="registry" builds the cache-key crate with those features
# (comma-separated), as an application's tests would.
FEATURES=$(echo "${CACHE_KEY_FEATURES:-}" | sed -E 's/([^,]+)/"\1"/g')
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
TMP="$(mktemp -d -t cache-key-compile.XXXXXX)"
trap 'rm -rf "$TMP"' EXIT
STRUCTS=200

gen_crate() {
    local name="$1" kind="$2" dir="$TMP/$1"
    mkdir -p "$dir/src"
    if [ "$kind" = cache_key ]; then
        cat >"$dir/Cargo.toml" <<EOF
[package]
name = "$name"
version = "0.0.0"
edition = "2024"
publish = false

[dependencies]
cache-key = { path = "$ROOT/cache-key", features = [$FEATURES] }

[workspace]
EOF
    else
        cat >"$dir/Cargo.toml" <<EOF
[package]
name = "$name"
version = "0.0.0"
edition = "2024"
publish = false

[dependencies]
serde = { version = "1", features = ["derive"] }

[workspace]
EOF
    fi
    # The workspace's lock file pins the same versions; cargo drops what it does not need.
    cp "$ROOT/Cargo.lock" "$dir/Cargo.lock"
    {
        echo "//! $STRUCTS generated query structs."
        echo "#![allow(dead_code)]"
        echo "use std::collections::BTreeSet;"
        for i in $(seq 1 "$STRUCTS"); do
            if [ "$kind" = cache_key ]; then
                echo "#[derive(cache_key::CacheKey)]"
                echo "#[cache_key(namespace = \"svc$i\", operation = \"op$i\", rename_all = \"camelCase\")]"
                echo "pub struct Query$i {"
                echo "    #[tenant] pub branch: String,"
                echo "    #[criterion] pub title: String,"
                echo "    #[criterion] pub author_name: Option<String>,"
                echo "    #[criterion] pub year_from: Option<u16>,"
                echo "    #[criterion] pub page: u32,"
                echo "    #[criterion] pub tags: Vec<String>,"
                echo "    #[criterion] pub status: BTreeSet<String>,"
                echo "    #[skip] pub request_id: u64,"
                echo "}"
            else
                echo "#[derive(serde::Serialize)]"
                echo "#[serde(rename_all = \"camelCase\")]"
                echo "pub struct Query$i {"
                echo "    pub branch: String,"
                echo "    pub title: String,"
                echo "    pub author_name: Option<String>,"
                echo "    pub year_from: Option<u16>,"
                echo "    pub page: u32,"
                echo "    pub tags: Vec<String>,"
                echo "    pub status: BTreeSet<String>,"
                echo "    #[serde(skip)] pub request_id: u64,"
                echo "}"
            fi
        done
    } >"$dir/src/lib.rs"
}

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

# time_build DIR PREPARE -> median seconds of `cargo build` after PREPARE.
time_build() {
    local dir="$1" prepare="$2"
    if command -v hyperfine >/dev/null; then
        (cd "$dir" && hyperfine --style none --runs "$RUNS" --warmup 1 \
            --prepare "$prepare" --export-json "$dir/hf.json" \
            "cargo build --offline --quiet" >/dev/null)
        jq '.results[0].median' "$dir/hf.json"
    else
        local i start end
        for i in $(seq 0 "$RUNS"); do
            (cd "$dir" && eval "$prepare")
            start=$(date +%s.%N)
            (cd "$dir" && cargo build --offline --quiet)
            end=$(date +%s.%N)
            # The first run is a warm-up.
            [ "$i" -gt 0 ] && echo "$end - $start" | bc
        done | median
    fi
}

# count_build DIR PREPARE -> rustc instructions of the generated crate's
# `cargo build` after PREPARE (its dependencies are not counted).
count_build() {
    local dir="$1" prepare="$2" log="$TMP/cachegrind.log"
    (cd "$dir" && eval "$prepare")
    rm -f "$log"
    (cd "$dir" && COUNT_LOG="$log" RUSTC_WRAPPER="$TMP/count-rustc.sh" cargo build --offline --quiet)
    awk '/I *refs/ { gsub(",", "", $NF); print $NF }' "$log"
}

if [ "${COUNT:-time}" = instructions ]; then
    cat >"$TMP/count-rustc.sh" <<'WRAPPER'
#!/usr/bin/env bash
if [[ "$*" == *"--crate-name gen_"* ]]; then
    exec valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \
        --log-file="$COUNT_LOG" "$@"
fi
exec "$@"
WRAPPER
    chmod +x "$TMP/count-rustc.sh"
    measure() { count_build "$@"; }
else
    measure() { time_build "$@"; }
fi

declare -A CLEAN INCR
for kind in cache_key serde; do
    name="gen_$kind"
    gen_crate "$name" "$kind"
    # Fetched here if need be; the measured builds are offline.
    echo "building the dependencies of $name once..." >&2
    (cd "$TMP/$name" && cargo build --quiet)
    CLEAN[$kind]=$(measure "$TMP/$name" "cargo clean --offline --quiet -p $name")
    INCR[$kind]=$(measure "$TMP/$name" "touch src/lib.rs")
done

if [ "${COUNT:-time}" = instructions ]; then
    printf '\n%s structs, dev profile, rustc instructions (rustc %s)\n\n' \
        "$STRUCTS" "$(rustc --version | cut -d' ' -f2)"
    unit=G scale=1000000000
else
    printf '\n%s structs, dev profile, median of %s runs (rustc %s)\n\n' \
        "$STRUCTS" "$RUNS" "$(rustc --version | cut -d' ' -f2)"
    unit=s scale=1
fi
printf '| build | derive(CacheKey) | derive(Serialize) | ratio CacheKey / Serialize |\n'
printf '| --- | --- | --- | --- |\n'
for what in clean incremental; do
    if [ "$what" = clean ]; then a=${CLEAN[cache_key]} b=${CLEAN[serde]}; else a=${INCR[cache_key]} b=${INCR[serde]}; fi
    printf '| %s | %.2f %s | %.2f %s | %.2f |\n' "$what" "$(echo "$a / $scale" | bc -l)" "$unit" \
        "$(echo "$b / $scale" | bc -l)" "$unit" "$(echo "$a / $b" | bc -l)"
done
