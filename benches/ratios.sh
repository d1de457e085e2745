#!/usr/bin/env bash
# Prints the medians of the last `cargo bench --bench keys` run and the ratios
# BENCHMARKS.md reports, from criterion's estimates under target/criterion.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${CARGO_TARGET_DIR:-$ROOT/target}/criterion"
median() { jq '.median.point_estimate' "$DIR/$1/$2/new/estimates.json"; }
printf '| case | derived | builder | hand-written | serde_json+sha256 | derived / hand | builder / hand | derived / serde_json |\n'
printf '| --- | --- | --- | --- | --- | --- | --- | --- |\n'
for case in search_2 list_1 search_8_summarized non_ascii vec hash_set; do
    d=$(median "$case" derived) b=$(median "$case" builder)
    h=$(median "$case" hand_written) j=$(median "$case" serde_json_sha256)
    awk -v c="$case" -v d="$d" -v b="$b" -v h="$h" -v j="$j" 'BEGIN {
        printf "| %s | %.1f ns | %.1f ns | %.1f ns | %.1f ns | %.2f | %.2f | %.2f (%.1fx faster) |\n",
            c, d, b, h, j, d / h, b / h, d / j, j / d }'
done
b=$(median search_2 builder_in_name_order) h=$(median search_2 hand_written)
awk -v b="$b" -v h="$h" 'BEGIN {
    printf "\nsearch_2 with the criteria given to the builder in name order: %.1f ns, builder / hand %.2f\n", b, b / h }'
