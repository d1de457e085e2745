#!/usr/bin/env bash
# Prints the medians and the ratios BENCHMARKS.md reports, from criterion's
# estimates under target/criterion.
#
#   bash benches/ratios.sh                 the last `cargo bench -p cache-key-benches --bench keys` run
#   bash benches/ratios.sh run1 run2 ...   runs saved with
#                                          `cargo bench -p cache-key-benches --bench keys -- --save-baseline runN`:
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

# For each column of its input's lines, "median lowest highest".
stats() {
    awk '
        { for (i = 1; i <= NF; i++) v[i, NR] = $i; n = NF }
        END {
            for (i = 1; i <= n; i++) {
                for (k = 1; k <= NR; k++) s[k] = v[i, k]
                for (a = 1; a <= NR; a++) for (b = a + 1; b <= NR; b++)
                    if (s[b] < s[a]) { t = s[a]; s[a] = s[b]; s[b] = t }
                m = NR % 2 ? s[(NR + 1) / 2] : (s[NR / 2] + s[NR / 2 + 1]) / 2
                printf "%s%f %f %f", (i > 1 ? " " : ""), m, s[1], s[NR]
            }
            printf "\n"
        }'
}

CASES=(search_2 list_1 search_8_summarized non_ascii vec hash_set)
printf '| case | derived | builder | hand-written | serde_json+sha256 | derived / hand | builder / hand | derived / serde_json |\n'
printf '| --- | --- | --- | --- | --- | --- | --- | --- |\n'
ranges=""
for case in "${CASES[@]}"; do
    read -r d _ _ b _ _ h _ _ j _ _ dh dh_lo dh_hi bh bh_lo bh_hi dj dj_lo dj_hi < <(per_run "$case" | stats)
    awk -v c="$case" -v d="$d" -v b="$b" -v h="$h" -v j="$j" -v dh="$dh" -v bh="$bh" -v dj="$dj" 'BEGIN {
        printf "| %s | %.1f ns | %.1f ns | %.1f ns | %.1f ns | %.2f | %.2f | %.2f (%.1fx faster) |\n",
            c, d, b, h, j, dh, bh, dj, 1 / dj }'
    ranges+=$(awk -v c="$case" -v a="$dh_lo" -v b="$dh_hi" -v e="$bh_lo" -v f="$bh_hi" -v g="$dj_lo" -v k="$dj_hi" \
        'BEGIN { printf "%s %.2f-%.2f %.2f-%.2f %.2f-%.2f", c, a, b, e, f, g, k }')$'\n'
done

read -r io io_lo io_hi < <(for run in "${RUNS[@]}"; do
    b=$(estimate search_2 builder_in_name_order "$run") h=$(estimate search_2 hand_written "$run")
    awk -v b="$b" -v h="$h" 'BEGIN { printf "%f\n", b / h }'
done | stats)
awk -v m="$io" -v lo="$io_lo" -v hi="$io_hi" -v n=${#RUNS[@]} 'BEGIN {
    printf "\nsearch_2 with the criteria given to the builder in name order: builder / hand %.2f", m
    if (n > 1) printf " (%.2f-%.2f)", lo, hi
    printf "\n" }'
if [ ${#RUNS[@]} -gt 1 ]; then
    printf '\nRanges over %d runs (derived / hand, builder / hand, derived / serde_json):\n%s' ${#RUNS[@]} "$ranges"
fi
