#!/usr/bin/env bash
# Baton's database client alone, without HTTP, beside the pgbench client: the CPU each client
# process spends per transaction and per round trip, and its context switches, running the
# diagnostics probe's transaction (SELECT … FOR UPDATE, UPDATE, INSERT) with the same number
# of connections against the same server, in the same run.
#
#   Benchmarks/e2e/db-client-vs-pgbench.sh [--connections "1 2 8"] [--seconds 8] [--rounds 3] [--baton PATH | --no-build]
#
# Baton's side is `baton-db-client-bench` (Benchmarks/Benchmarks/DatabaseClient): one task per
# connection on a PostgresPool, two round trips per transaction (BEGIN rides with the SELECT;
# UPDATE, INSERT and COMMIT go together in pipeline mode). pgbench runs probe-pipelined.pgbench
# (the same two round trips) and probe.pgbench (one statement per round trip, five), with one
# thread (-j 1), as it does in the other scripts. `baton serve` only provides the migrated,
# embedded PostgreSQL here; it serves no request while the clients run.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
connections="1 2 8"; seconds=8; rounds=3; port=8090
options="connections seconds rounds port" # read by common.sh
. "$here/common.sh"

client="$root/Benchmarks/.build/release/baton-db-client-bench"
if [ "$build" = 1 ]; then (cd "$root/Benchmarks" && swift build -c release --product baton-db-client-bench >&2); fi
[ -x "$client" ] || { echo "no $client (build it: cd Benchmarks && swift build -c release --product baton-db-client-bench)" >&2; exit 1; }

start_baton 1
seed_probe_subjects
conninfo="host=$PGHOST port=$PGPORT user=$PGUSER dbname=$PGDATABASE"

# Runs pgbench with the arguments given; prints "tps cpu-µs-per-tx switches-per-tx" of the
# pgbench process (getrusage of the child).
pgbench_client() {
  python3 - "$pgbench" "$@" <<'PY'
import re, resource, subprocess, sys
out = subprocess.run(sys.argv[1:], capture_output=True, text=True)
if out.returncode != 0:
    sys.exit("pgbench failed:\n" + out.stderr[-2000:])
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
tx = int(re.search(r"number of transactions actually processed: (\d+)", out.stdout).group(1))
tps = float(re.search(r"^tps = ([\d.]+)", out.stdout, re.M).group(1))
print(f"{tps:.0f} {(usage.ru_utime + usage.ru_stime) * 1e6 / tx:.0f} {(usage.ru_nvcsw + usage.ru_nivcsw) / tx:.1f}")
PY
}

echo "| connections | client | transactions/s | round trips/tx | client CPU µs/tx | client CPU µs/round trip | context switches/tx |"
echo "|---:|---|---:|---:|---:|---:|---:|"
for n in $connections; do
  # Warm-up: connections, prepared statements, caches.
  "$pgbench" -n -c "$n" -j 1 -M prepared -T 2 -f "$here/probe.pgbench" >/dev/null 2>&1
  : >"$data/plain"; : >"$data/pipelined"; : >"$data/baton"
  for _ in $(seq 1 "$rounds"); do
    pgbench_client -n -c "$n" -j 1 -M prepared -T "$seconds" -f "$here/probe.pgbench" >>"$data/plain"
    pgbench_client -n -c "$n" -j 1 -M prepared -T "$seconds" -f "$here/probe-pipelined.pgbench" >>"$data/pipelined"
    "$client" --conninfo "$conninfo" --connections "$n" --seconds "$seconds" \
      | awk '{print $4, $6, $10}' >>"$data/baton"
  done
  for side in "pgbench:plain:5" "pgbench, pipelined:pipelined:2" "Baton's PostgresPool:baton:2"; do
    IFS=: read -r name file trips <<<"$side"
    awk -v n="$n" -v name="$name" -v trips="$trips" \
      -v tps="$(column_median "$data/$file" 1)" -v cpu="$(column_median "$data/$file" 2)" -v sw="$(column_median "$data/$file" 3)" \
      'BEGIN { printf "| %d | %s | %.0f | %d | %.0f | %.0f | %.1f |\n", n, name, tps, trips, cpu, cpu / trips, sw }'
  done
done
