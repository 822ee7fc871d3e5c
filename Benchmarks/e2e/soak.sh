#!/usr/bin/env bash
# A soak: the playlist screen (as in screen-vs-pgbench.sh) under steady wrk load for
# --seconds (600), watching Baton's memory. Its resident set (VmRSS in /proc/<pid>/status) is
# sampled every --sample seconds (10); throughput, latency and CPU are reported per
# --interval (60 s: one wrk run each). Fails (exit 1) when the RSS grows by more than
# --max-growth percent (10) from the --baseline (120 s into the load, once caches, pools and
# allocator arenas have filled) to the end, or on any error or timeout wrk sees — so it is a
# check, not only a report. A run shorter than twice the baseline takes its baseline halfway.
#
#   Benchmarks/e2e/soak.sh [--seconds 600] [--interval 60] [--sample 10] [--connections 16]
#       [--pool 4] [--baseline 120] [--max-growth 10] [--baton PATH | --no-build] [--port 8084]
#
# The screen rather than a command: every request can be the same, so a rise in memory or a
# fall in throughput is Baton's, not a growing table's. Needs wrk and PostgreSQL's server
# binaries (scripts/bootstrap.sh --bench).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
seconds=600; interval=60; sample=10; connections=16; pool=4; baseline=120; max_growth=10; port=8084
options="seconds interval sample connections pool baseline max_growth port" # read by common.sh
. "$here/common.sh"
if [ $((2 * baseline)) -gt "$seconds" ]; then baseline=$((seconds / 2)); fi

start_baton "$pool"
LOG_LEVEL=warning "$baton" seed demo --data-dir "$data" >&2
prepare_screen
echo "Soak: $connections HTTP connections, pool of $pool database connections, $seconds s;" \
  "RSS every $sample s, baseline at $baseline s, limit +$max_growth %."
echo

# "seconds-into-the-load RSS-in-KiB" every $sample seconds, in the background until stopped.
: >"$data/rss"
(
  started=$(date +%s)
  while kill -0 "$serve_pid" 2>/dev/null; do
    echo "$(($(date +%s) - started)) $(rss_kib)" >>"$data/rss"
    sleep "$sample"
  done
) &
sampler=$!
trap 'kill "$sampler" 2>/dev/null || true; cleanup' EXIT

echo "| load time s | screens/s | p50 ms | p99 ms | Baton CPU µs/screen | Baton RSS MiB at the end |"
echo "|---:|---:|---:|---:|---:|---:|"
elapsed=0
while [ "$elapsed" -lt "$seconds" ]; do
  length=$interval
  if [ $((elapsed + length)) -gt "$seconds" ]; then length=$((seconds - elapsed)); fi
  screen_wrk "${length}s" "$connections"
  elapsed=$((elapsed + length))
  awk -v t="$elapsed" -v rps="$wrk_rps" -v p50="$wrk_p50" -v p99="$wrk_p99" -v cpu="$wrk_baton_cpu" -v rss="$(rss_kib)" \
    'BEGIN { printf "| %d | %.0f | %.2f | %.2f | %.0f | %.1f |\n", t, rps, p50 / 1000, p99 / 1000, cpu, rss / 1024 }'
done
end=$(rss_kib)
kill "$sampler" 2>/dev/null || true

start=$(awk 'NR == 1 {print $2}' "$data/rss")
peak=$( (awk '{print $2}' "$data/rss"; echo "$end") | sort -n | tail -1)
base=$(awk -v b="$baseline" '$1 >= b {print $2; exit}' "$data/rss")
base=${base:-$end}
growth=$(awk -v a="$base" -v b="$end" 'BEGIN {printf "%.1f", (b - a) * 100 / a}')
echo
echo "| Baton RSS | MiB |"
echo "|---|---:|"
echo "| start (before the load) | $(mib "$start") |"
echo "| baseline ($baseline s into the load) | $(mib "$base") |"
echo "| peak | $(mib "$peak") |"
echo "| end | $(mib "$end") |"
echo "| growth, baseline → end | $growth % |"
echo
echo "RSS every $sample s (MiB): $(awk '{printf "%s%.1f", (NR > 1 ? " " : ""), $2 / 1024}' "$data/rss")"
if awk -v g="$growth" -v m="$max_growth" 'BEGIN {exit !(g > m)}'; then
  echo "FAIL: Baton's RSS grew $growth % from $baseline s to the end (limit $max_growth %)" >&2
  exit 1
fi
echo "RSS held: +$growth % from $baseline s to the end (limit $max_growth %)."
