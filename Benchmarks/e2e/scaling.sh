#!/usr/bin/env bash
# What happens as clients outnumber the database pool: the playlist screen (as in
# screen-vs-pgbench.sh) under wrk with a pool of --pool connections (8) and more and more HTTP
# connections (8 to 128 by default). Past the pool's size the extra requests wait for a
# connection: throughput should hold and latency grow about linearly with the queue's depth
# (HTTP connections per pool connection), not collapse or time out.
#
#   Benchmarks/e2e/scaling.sh [--pool 8] [--http-connections "8 16 32 64 128"] [--seconds 10]
#       [--rounds 3] [--baton PATH | --no-build] [--port 8085]
#
# Columns (median of the rounds): throughput, wrk's p50/p99, the mean latency that Little's
# law gives for that throughput (HTTP connections / throughput: what p50 should track when
# the queue is the only thing that grows), CPU per screen of Baton and of PostgreSQL, and
# Baton's thread switches per screen (voluntary + involuntary, all threads, from /proc).
# The screen is used rather than a command because every request can be the same, so each
# point sees the same work. wrk's timeout is 30 s and any timeout or error fails the run.
# Needs wrk and PostgreSQL's server binaries (scripts/bootstrap.sh --bench).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
pool=8; http_connections="8 16 32 64 128"; seconds=10; rounds=3; port=8085
options="pool http_connections seconds rounds port" # read by common.sh
. "$here/common.sh"

start_baton "$pool"
LOG_LEVEL=warning "$baton" seed demo --data-dir "$data" >&2
prepare_screen
echo "Pool of $pool database connections (DATABASE_POOL_SIZE=$pool)."
echo
# Warm-up: prepared statements on every pool connection, caches.
screen_wrk 3s "$pool"

echo "| HTTP connections | per pool connection | screens/s | p50 ms | p99 ms | Little's law mean ms | Baton CPU µs/screen | PostgreSQL CPU µs/screen | Baton thread switches/screen |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for c in $http_connections; do
  : >"$data/wrk"
  for _ in $(seq 1 "$rounds"); do
    screen_wrk "${seconds}s" "$c"
    echo "$wrk_rps $wrk_p50 $wrk_p99 $wrk_baton_cpu $wrk_pg_cpu $wrk_switches" >>"$data/wrk"
  done
  awk -v c="$c" -v pool="$pool" -v rps="$(column_median "$data/wrk" 1)" \
    -v p50="$(column_median "$data/wrk" 2)" -v p99="$(column_median "$data/wrk" 3)" \
    -v bcpu="$(column_median "$data/wrk" 4)" -v pgcpu="$(column_median "$data/wrk" 5)" -v sw="$(column_median "$data/wrk" 6)" \
    'BEGIN { printf "| %d | %g | %.0f | %.2f | %.2f | %.2f | %.0f | %.0f | %.1f |\n",
             c, c / pool, rps, p50 / 1000, p99 / 1000, c / rps * 1000, bcpu, pgcpu, sw }'
done
