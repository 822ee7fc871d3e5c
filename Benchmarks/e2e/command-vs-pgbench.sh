#!/usr/bin/env bash
# Throughput of a one-step flow command over HTTP — POST /v3/command with a favourite-add
# start payload for a fresh user each time: payload check, session row, effect, command log,
# commit — under wrk, beside pgbench running the statements that command issues
# (favourite-add.pgbench, captured with log_statement = all; capture-statements.sh shows them
# again) with the same number of database connections, against the same server, in the same
# run; with p50/p99 latency of both and the CPU each side costs per command.
#
#   Benchmarks/e2e/command-vs-pgbench.sh [--connections "2 4 8"] [--seconds 10] [--rounds 3]
#       [--http-per-connection 4] [--baton PATH | --no-build] [--port 8088] [--max-rate 2000]
#
# Every request is a first-time command (a repeat would be a cheap idempotent replay), so the
# script prepares enough signed payloads, one per fresh user, before each measurement
# (mint_commands.py, through the screens API as a client would). Needs wrk, python3 and
# PostgreSQL's server binaries (scripts/bootstrap.sh --bench).
#
# Columns (median of the rounds): throughput of both and Baton / pgbench; latency from
# pgbench's per-transaction log (--log) and from wrk's own histogram; CPU per command from
# /proc: PostgreSQL's (the embedded cluster's postmaster and all its processes) during each
# side's run, and Baton's serve process during its run. wrk opens --http-per-connection HTTP
# connections per database connection so the pool stays busy: Baton's latency includes the
# wait for a pool connection; with 1, both sides have the same number of requests in flight.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
connections="2 4 8"; seconds=10; rounds=3; port=8088; max_rate=2000; http_per_connection=4
options="connections seconds rounds http_per_connection port max_rate" # read by common.sh
. "$here/common.sh"

start_baton 2
LOG_LEVEL=warning "$baton" seed demo --data-dir "$data" >&2
hash=$("$pgbin/psql" -Atc "SELECT hash FROM flow_definitions WHERE flow = 'favourite-add' ORDER BY created_at DESC LIMIT 1")

comparison_header command
run=0
for n in $connections; do
  start_baton "$n"
  run=$((run + 1))
  commands="$data/commands-$run.txt"
  count=$(( max_rate * (rounds * seconds + 3) ))
  python3 "$here/mint_commands.py" --base "http://127.0.0.1:$port" --count "$count" --prefix "bench-$run" \
    --secret "$BATON_JWT_HS256_SECRET" --out "$commands"
  wrk_connections=$((n * http_per_connection))
  next=1; answered_by_wrk=0; sends=0
  # $1 = duration. Runs wrk between CPU readings (measured_wrk) and moves `next` past every
  # command this run may have used: those answered, those timed out, and those still in flight.
  send() {
    measured_wrk -t1 -c"$wrk_connections" -d"$1" -s "$here/command.lua" "http://127.0.0.1:$port" -- "$commands" "$next"
    answered_by_wrk=$((answered_by_wrk + wrk_requests)); sends=$((sends + 1))
    advance_commands "$count" "$wrk_connections"
  }
  pgbench_args=(-n -c "$n" -j 1 -M prepared -D hash="$hash" -f "$here/favourite-add.pgbench")
  # Warm-up: prepared statements, caches, connections.
  send 3s
  measured_pgbench "${pgbench_args[@]}" -T 3
  : >"$data/pg"; : >"$data/wrk"
  for _ in $(seq 1 "$rounds"); do
    measured_pgbench "${pgbench_args[@]}" -T "$seconds"
    echo "$pg_tps $pg_p50 $pg_p99 $pg_cpu $pg_client_cpu" >>"$data/pg" # the columns comparison_row reads
    send "${seconds}s"
    echo "$wrk_rps $wrk_p50 $wrk_p99 $wrk_pg_cpu $wrk_baton_cpu $wrk_cpu" >>"$data/wrk"
  done
  comparison_row "$n" "$wrk_connections"
  # Exactly once under load: a logged command and a favourite for every command wrk saw
  # answered, and at most the requests in flight when a run ended besides.
  logged=$("$pgbin/psql" -Atc "SELECT count(*) FROM command_log l JOIN flow_sessions s ON s.id = l.session_id WHERE s.subject LIKE 'user:bench-$run-%'")
  favourites=$("$pgbin/psql" -Atc "SELECT count(*) FROM favourites WHERE subject LIKE 'user:bench-$run-%'")
  most=$((answered_by_wrk + sends * wrk_connections))
  for rows in "$logged" "$favourites"; do
    [ "$rows" -ge "$answered_by_wrk" ] && [ "$rows" -le "$most" ] \
      || { echo "exactly-once check failed: $answered_by_wrk answered, $logged logged, $favourites favourites" >&2; exit 1; }
  done
done
