#!/usr/bin/env bash
# Requests per second of Baton's database-backed probe endpoint (one transaction: SELECT … FOR
# UPDATE, UPDATE, INSERT) under wrk, beside pgbench running the same statements with the same
# number of connections against the same server, in the same run.
#
#   Benchmarks/e2e/probe-vs-pgbench.sh [--connections "2 4 8"] [--seconds 10] [--rounds 3] [--no-build]
#
# Each round runs pgbench (one statement per round trip, -M prepared), pgbench pipelined (the
# same two round trips Baton makes) and wrk against Baton, back to back; the table reports the
# median of the rounds. Needs wrk and PostgreSQL's server binaries (scripts/bootstrap.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
connections="2 4 8"; seconds=10; rounds=3; build=1; port=8089
while [ $# -gt 0 ]; do
  case "$1" in
    --connections) connections=$2; shift 2;;
    --seconds) seconds=$2; shift 2;;
    --rounds) rounds=$2; shift 2;;
    --no-build) build=0; shift;;
    --port) port=$2; shift 2;;
    *) echo "unknown option $1" >&2; exit 2;;
  esac
done
command -v wrk >/dev/null || { echo "wrk is not installed (apt-get install wrk)" >&2; exit 1; }
pgbin=$(pg_config --bindir 2>/dev/null || ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
pgbench="$pgbin/pgbench"
[ -x "$pgbench" ] || { echo "pgbench not found in $pgbin" >&2; exit 1; }

cd "$root"
[ "$build" = 1 ] && swift build -c release --product baton >&2
baton="$root/.build/release/baton"
data=$(mktemp -d /tmp/baton-bench-XXXXXX)
chmod 755 "$data"
serve_pid=""
cleanup() {
  [ -n "$serve_pid" ] && kill -TERM "$serve_pid" 2>/dev/null && wait "$serve_pid" 2>/dev/null || true
  rm -rf "$data"
}
trap cleanup EXIT

start_baton() {  # $1 = pool size
  [ -n "$serve_pid" ] && { kill -TERM "$serve_pid"; wait "$serve_pid" 2>/dev/null || true; }
  BATON_DIAGNOSTICS=true LOG_LEVEL=warning DATABASE_POOL_SIZE=$1 \
    "$baton" serve --data-dir "$data" --port "$port" >"$data/serve.log" 2>&1 &
  serve_pid=$!
  for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && return; sleep 0.2; done
  echo "Baton did not become ready; log:" >&2; cat "$data/serve.log" >&2; exit 1
}

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

start_baton 2
export PGHOST="$data/postgres/run" PGPORT=5432 PGUSER=postgres PGDATABASE=baton
if [ ! -S "$PGHOST/.s.PGSQL.5432" ]; then PGHOST=$(ls -d /tmp/baton-* 2>/dev/null | head -1); fi
"$pgbin/psql" -qc "INSERT INTO probe_counters (subject) SELECT g::text FROM generate_series(1, 1000) g ON CONFLICT DO NOTHING"

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
