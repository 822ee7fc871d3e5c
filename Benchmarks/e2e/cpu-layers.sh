#!/usr/bin/env bash
# Where a command's CPU goes, layer by layer: Baton's CPU per request (from /proc/<pid>/stat)
# and thread switches per request (voluntary + involuntary, all threads, from
# /proc/<pid>/task/*/status) for requests that stop at successive depths of the command path,
# under wrk, in one run:
#
#   healthz            the HTTP stack alone (GET /healthz)
#   refused command    + bearer token, JSON body, payload signature (a tampered payload: 400)
#   replayed command   + one transaction of three round trips (the same command again: the
#                        claim finds the session, the log's reply is sent again)
#   probe              POST /diagnostics/probe/:id: two round trips (SELECT … FOR UPDATE;
#                        UPDATE + INSERT + COMMIT pipelined), no token, no flow
#
# and, beside them, the CPU the pgbench client spends per transaction of favourite-add.pgbench
# (seven round trips, one thread, as the peer's cost of talking to PostgreSQL).
#
#   Benchmarks/e2e/cpu-layers.sh [--seconds 8] [--connections 32] [--baton PATH | --no-build] [--port 8088]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
seconds=8; connections=32; port=8088
options="seconds connections port" # read by common.sh
. "$here/common.sh"

start_baton 8
LOG_LEVEL=warning "$baton" seed demo --data-dir "$data" >&2
seed_probe_subjects
python3 "$here/mint_commands.py" --base "http://127.0.0.1:$port" --count 1 --prefix layers \
  --secret "$BATON_JWT_HS256_SECRET" --out "$data/command.txt" >/dev/null
read -r token payload <"$data/command.txt"
curl -sf -o /dev/null -X POST -H "Authorization: Bearer $token" -H "Content-Type: application/json" \
  -d "{\"payload\":\"$payload\"}" "http://127.0.0.1:$port/v3/command"

layer_script healthz GET "" /healthz
layer_script refused POST "{\"payload\":\"x${payload:1}\"}" /v3/command
layer_script replayed POST "{\"payload\":\"$payload\"}" /v3/command
layer_script probe POST "" /diagnostics/probe/%d

echo "| request | requests/s | Baton CPU µs/request | thread switches/request | PostgreSQL CPU µs/request |"
echo "|---|---:|---:|---:|---:|"
for layer in healthz refused replayed probe; do
  wrk -t1 -c"$connections" -d2s -s "$data/$layer.lua" "http://127.0.0.1:$port" >/dev/null # warm-up
  before=$(baton_switches)
  measured_wrk -t1 -c"$connections" -d"${seconds}s" -s "$data/$layer.lua" "http://127.0.0.1:$port"
  after=$(baton_switches)
  awk -v l="$layer" -v r="$wrk_rps" -v c="$wrk_baton_cpu" -v p="$wrk_pg_cpu" -v a="$before" -v b="$after" -v n="$wrk_requests" \
    'BEGIN {printf "| %s | %.0f | %d | %.1f | %d |\n", l, r, c, (b - a) / n, p}'
done

hash=$("$pgbin/psql" -Atc "SELECT hash FROM flow_definitions WHERE flow = 'favourite-add' ORDER BY created_at DESC LIMIT 1")
# `times` in the subshell prints the CPU its children (pgbench) used: user, then system.
( "$pgbench" -n -c 8 -j 1 -M prepared -D hash="$hash" -f "$here/favourite-add.pgbench" -T "$seconds" >"$data/pgbench.out" 2>&1; times ) \
  | tail -1 | sed 's/[ms]/ /g' | awk '{print $1 * 60 + $2, $3 * 60 + $4}' >"$data/pgbench.time"
transactions=$(awk '/number of transactions actually processed/ {print $NF}' "$data/pgbench.out")
awk -v n="$transactions" '{printf "\npgbench client (favourite-add.pgbench, 8 connections, one thread): %d µs of CPU per transaction (user %.2f s, system %.2f s, %d transactions)\n", ($1 + $2) * 1e6 / n, $1, $2, n}' "$data/pgbench.time"
