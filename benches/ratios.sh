#!/usr/bin/env bash
# Prints the medians and the ratios BENCHMARKS.md reports, from criterion's
# estimates under target/criterion.
#
#   bash benches/ratios.sh                 the last `cargo bench --bench keys` run
#   bash benches/ratios.sh run1 run2 ...   runs saved with
#                                          `cargo bench --bench keys -- --save-baseline runN`:
#                                          the median over the runs of each time and
#                                          of each ratio, then each ratio's range
#
# A ratio is taken within one run (both variants measured minutes apart at
# most); over several runs its median is what BENCHMARKS.md claims, since this
# machine's speed drifts by several percent from one minute to the next.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${CARGO_TARGET_DIR:-$ROOT/target}/criterion"
RUNS=("$@")
[ ${#RUNS[@]} -eq 0 ] && RUNS=(new)

# estimate CASE VARIANT RUN: criterion's median point estimate, in ns.
estimate() { jq '.median.point_estimate' "$DIR/$1/$2/$3/estimates.json"; }

# One line per run: the four times and three ratios of CASE.
per_run() {
    local case=$1 run d b h j
    for run in "${RUNS[@]}"; do
        d=$(estimate "$case" derived "$run") b=$(estimate "$case" builder "$run")
        h=$(estimate "$case" hand_written "$run") j=$(estimate "$case" serde_json_sha256 "$run")
        awk -v d="$d" -v b="$b" -v h="$h" -v j="$j" \
            'BEGIN { printf "%f %f %f %f %f %f %f\n", d, b, h, j, d / h, b / h, d / j }'
    done
}

# The median of each column of per_run's lines, and each ratio's range.
summarize() {
    awk -v c="$1" '
        { for (i = 1; i <= NF; i++) v[i, NR] = $i }
        END {
            for (i = 1; i <= 7; i++) {
                for (k = 1; k <= NR; k++) s[k] = v[i, k]
                for (a = 1; a <= NR; a++) for (b = a + 1; b <= NR; b++)
                    if (s[b] < s[a]) { t = s[a]; s[a] = s[b]; s[b] = t }
                m[i] = NR % 2 ? s[(NR + 1) / 2] : (s[NR / 2] + s[NR / 2 + 1]) / 2
                lo[i] = s[1]; hi[i] = s[NR]
            }
            printf "| %s | %.1f ns | %.1f ns | %.1f ns | %.1f ns | %.2f | %.2f | %.2f (%.1fx faster) |\n",
                c, m[1], m[2], m[3], m[4], m[5], m[6], m[7], 1 / m[7]
            printf "%s %.2f-%.2f %.2f-%.2f %.2f-%.2f\n", c, lo[5], hi[5], lo[6], hi[6], lo[7], hi[7] > "/dev/stderr"
        }'
}

CASES=(search_2 list_1 search_8_summarized non_ascii vec hash_set)
printf '| case | derived | builder | hand-written | serde_json+sha256 | derived / hand | builder / hand | derived / serde_json |\n'
printf '| --- | --- | --- | --- | --- | --- | --- | --- |\n'
for case in "${CASES[@]}"; do per_run "$case" | summarize "$case" 2>/dev/null; done

in_order=$(for run in "${RUNS[@]}"; do
    b=$(estimate search_2 builder_in_name_order "$run") h=$(estimate search_2 hand_written "$run")
    awk -v b="$b" -v h="$h" 'BEGIN { printf "%f\n", b / h }'
done | sort -g | awk '{ v[NR] = $1 } END {
    printf "%.2f", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
    if (NR > 1) printf " (%.2f-%.2f)", v[1], v[NR] }')
printf '\nsearch_2 with the criteria given to the builder in name order: builder / hand %s\n' "$in_order"
if [ ${#RUNS[@]} -gt 1 ]; then
    printf '\nRanges over %d runs (derived / hand, builder / hand, derived / serde_json):\n' ${#RUNS[@]}
    for case in "${CASES[@]}"; do per_run "$case" | summarize "$case" 2>&1 >/dev/null; done
fi
