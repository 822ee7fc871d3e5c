#!/usr/bin/env bash
# Requests per second of Baton's database-backed probe endpoint (one transaction: SELECT … FOR
# UPDATE, UPDATE, INSERT) under wrk, beside pgbench running the same statements with the same
# number of connections against the same server, in the same run.
#
#   Benchmarks/e2e/probe-vs-pgbench.sh [--connections "2 4 8"] [--seconds 10] [--rounds 3] [--baton PATH | --no-build]
#
# Each round runs pgbench (one statement per round trip, -M prepared), pgbench pipelined (the
# same two round trips Baton makes) and wrk against Baton, back to back; the table reports the
# median of the rounds. Needs wrk and PostgreSQL's server binaries (scripts/bootstrap.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
connections="2 4 8"; seconds=10; rounds=3; port=8089
options="connections seconds rounds port" # read by common.sh
. "$here/common.sh"

start_baton 2
seed_probe_subjects

echo "| connections | pgbench tps | pgbench pipelined tps | Baton req/s | ratio | ratio (pipelined) |"
echo "|---:|---:|---:|---:|---:|---:|"
for n in $connections; do
  start_baton "$n"
  wrk_connections=$((n * 4))
  # Warm-up: prepared statements, caches, connections.
  wrk -t1 -c"$wrk_connections" -d3s -s "$here/probe.lua" "http://127.0.0.1:$port" >/dev/null
  "$pgbench" -n -c "$n" -j 1 -M prepared -T 3 -f "$here/probe.pgbench" >/dev/null 2>&1
  : >"$data/pg"; : >"$data/pgp"; : >"$data/wrk"
  for _ in $(seq 1 "$rounds"); do
    "$pgbench" -n -c "$n" -j 1 -M prepared -T "$seconds" -f "$here/probe.pgbench" 2>&1 | awk '/^tps/ {print $3}' >>"$data/pg"
    "$pgbench" -n -c "$n" -j 1 -M prepared -T "$seconds" -f "$here/probe-pipelined.pgbench" 2>&1 | awk '/^tps/ {print $3}' >>"$data/pgp"
    wrk -t1 -c"$wrk_connections" -d"${seconds}s" -s "$here/probe.lua" "http://127.0.0.1:$port" | awk '/^Requests\/sec/ {print $2}' >>"$data/wrk"
  done
  pg=$(median <"$data/pg"); pgp=$(median <"$data/pgp"); rps=$(median <"$data/wrk")
  awk -v n="$n" -v pg="$pg" -v pgp="$pgp" -v rps="$rps" \
    'BEGIN { printf "| %d | %.0f | %.0f | %.0f | %.2f | %.2f |\n", n, pg, pgp, rps, rps / pg, rps / pgp }'
done
