#!/usr/bin/env bash
# Throughput of a screen over HTTP — GET /v3/screens/playlist?id=… as a signed-in user: bearer
# token checked, the screen's loaders run in one read-only transaction (the playlist, its 9
# tracks, the user's favourite), the template rendered with a signed start payload for each
# action, the screen fitted to the client and encoded (about 5 KB) — under wrk, beside pgbench
# running the loaders' statements (screen-playlist.pgbench, captured with log_statement = all;
# capture-statements.sh shows them again) with the same number of database connections,
# against the same server, in the same run; with p50/p99 latency of both and the CPU each side
# costs per screen.
#
#   Benchmarks/e2e/screen-vs-pgbench.sh [--connections "2 4 8"] [--seconds 10] [--rounds 3]
#       [--http-per-connection 4] [--baton PATH | --no-build] [--port 8086]
#
# Columns as in command-vs-pgbench.sh (median of the rounds): throughput of both and Baton /
# pgbench; latency from pgbench's per-transaction log (--log) and from wrk's histogram; CPU
# per screen from /proc: PostgreSQL's (the embedded cluster's postmaster and all its
# processes) during each side's run, and Baton's serve process during its run. wrk opens
# --http-per-connection HTTP connections per database connection, so Baton's latency includes
# the wait for a pool connection; with 1, both sides have the same number of requests in
# flight. Every request is the same (one user, one playlist): wrk sends it without Lua. So
# after the first, every screen is answered from the screen cache (its data does not change);
# BATON_SCREEN_CACHE_BYTES=0 in the environment renders each one. The last line says how many
# screens each way (baton_screens_total).
# Needs wrk and PostgreSQL's server binaries (scripts/bootstrap.sh --bench).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
connections="2 4 8"; seconds=10; rounds=3; port=8086; http_per_connection=4
options="connections seconds rounds http_per_connection port" # read by common.sh
. "$here/common.sh"

start_baton 2
LOG_LEVEL=warning "$baton" seed demo --data-dir "$data" >&2
prepare_screen
echo

comparison_header screen
for n in $connections; do
  start_baton "$n"
  wrk_connections=$((n * http_per_connection))
  pgbench_args=(-n -c "$n" -j 1 -M prepared -D playlist="$screen_playlist" -D subject="user:$screen_user" -f "$here/screen-playlist.pgbench")
  # Warm-up: prepared statements, caches, connections.
  screen_wrk 3s "$wrk_connections"
  measured_pgbench "${pgbench_args[@]}" -T 3
  : >"$data/pg"; : >"$data/wrk"
  for _ in $(seq 1 "$rounds"); do
    measured_pgbench "${pgbench_args[@]}" -T "$seconds"
    echo "$pg_tps $pg_p50 $pg_p99 $pg_cpu $pg_client_cpu" >>"$data/pg" # the columns comparison_row reads
    screen_wrk "${seconds}s" "$wrk_connections"
    echo "$wrk_rps $wrk_p50 $wrk_p99 $wrk_pg_cpu $wrk_baton_cpu $wrk_cpu" >>"$data/wrk"
  done
  comparison_row "$n" "$wrk_connections"
done
echo
echo "screens: $(screens_answered) (last run, warm-up included)"
