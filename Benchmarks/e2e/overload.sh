#!/usr/bin/env bash
# What a pool overloaded past its deadline does: the playlist screen (as in scaling.sh) under wrk
# with far more HTTP connections than a small pool (--pool, 1) serves within a short database
# deadline (--timeout, 0.1 s: DATABASE_TIMEOUT). Past the deadline the queue's requests answer
# 503; the question is what else happens. A call whose body starts with its deadline nearly
# spent is sometimes cut mid-statement: taken for a silent database, each such cut would
# drop the whole queue (fail-fast) and replace the connection, with the database healthy
# (docs/benchmarks.md, "Late cuts under overload").
#
#   Benchmarks/e2e/overload.sh [--pool 1] [--timeout 0.1] [--http-connections "64 256 1024"] [--seconds 10]
#
# Per row, from wrk and from Baton's /metrics over the interval: answers per second, those
# that were 2xx and those that were not (503), p99, and the pool's acquire timeouts, calls cut
# at their deadline, fail-fast starts and connections opened ("-" for a build without the
# series). Non-2xx answers are the point here, so they do not fail the run.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
pool=1; timeout=0.1; http_connections="64 256 1024"; seconds=10; port=8087
options="pool timeout http_connections seconds port" # read by common.sh
. "$here/common.sh"

export DATABASE_TIMEOUT=$timeout
start_baton "$pool"
LOG_LEVEL=warning "$baton" seed demo --data-dir "$data" >&2
prepare_screen
echo "Pool of $pool database connection(s), database deadline ${timeout} s (DATABASE_TIMEOUT)."
echo
screen_wrk 3s "$pool"

# The pool's counters now: acquire timeouts, calls cut, fail-fast starts, connections opened.
pool_counters() {
  curl -sf "http://127.0.0.1:$port/metrics" | awk '
    /^baton_db_pool_acquire_timeouts_total / {t = $2}
    /^baton_db_pool_deadline_expiries_total / {c = $2; hc = 1}
    /^baton_db_pool_fail_fast_starts_total / {f = $2; hf = 1}
    /^baton_db_pool_connections_opened_total / {o = $2}
    END {printf "%d %s %s %d\n", t, hc ? c : "-", hf ? f : "-", o}'
}
difference() { if [ "$1" = - ] || [ "$2" = - ]; then echo -; else echo $(($2 - $1)); fi; }

echo "| HTTP connections | answers/s | 2xx/s | non-2xx/s | p99 ms | acquire timeouts | calls cut | fail-fast starts | connections opened |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for c in $http_connections; do
  read -r t0 c0 f0 o0 <<<"$(pool_counters)"
  measured_wrk -t1 -c"$c" -d"${seconds}s" --timeout 30s -s "$here/screen.lua" "$screen_url"
  read -r t1 c1 f1 o1 <<<"$(pool_counters)"
  fail_on_wrk_errors 'Socket errors'
  non2xx=$(awk '/Non-2xx/ {print $NF}' "$data/wrk.out")
  awk -v c="$c" -v n="$wrk_requests" -v bad="${non2xx:-0}" -v s="$seconds" -v p99="$wrk_p99" \
    -v t="$((t1 - t0))" -v cut="$(difference "$c0" "$c1")" -v ff="$(difference "$f0" "$f1")" -v o="$((o1 - o0))" \
    'BEGIN { printf "| %d | %.0f | %.0f | %.0f | %.2f | %d | %s | %s | %d |\n",
             c, n / s, (n - bad) / s, bad / s, p99 / 1000, t, cut, ff, o }'
done
