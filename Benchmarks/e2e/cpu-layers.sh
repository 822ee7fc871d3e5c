#!/usr/bin/env bash
# Where a command's CPU goes, layer by layer: Baton's CPU per request (from /proc/<pid>/stat),
# the part of it spent on the HTTP event loops and on the database loops (from
# /proc/<pid>/task/*/stat, by thread name), and thread switches per request (voluntary +
# involuntary, all threads, from /proc/<pid>/task/*/status) for requests that stop at
# successive depths of the command path, under wrk, in one run:
#
#   healthz            the HTTP stack alone (GET /healthz)
#   refused command    + bearer token, JSON body, payload signature (a tampered payload: 400)
#   replayed command   + one transaction of three round trips (the same command again: the
#                        claim finds the session, the log's reply is sent again)
#   probe              POST /diagnostics/probe/:id: two round trips (SELECT … FOR UPDATE;
#                        UPDATE + INSERT + COMMIT pipelined), no token, no flow
#   command            a fresh command: favourite-add, each request a new user's first (the
#                        tables' command; about --max-rate × (--seconds + 2) are minted first,
#                        through the screens API, which takes a while)
#
# and, beside them, the CPU the pgbench client spends per transaction of favourite-add.pgbench
# (seven round trips, one thread, as the peer's cost of talking to PostgreSQL).
#
#   Benchmarks/e2e/cpu-layers.sh [--seconds 8] [--connections 32] [--max-rate 7000]
#                                [--baton PATH | --no-build] [--port 8088]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
seconds=8; connections=32; port=8088; max_rate=7000
options="seconds connections max_rate port" # read by common.sh
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
# Fresh commands, one per request: a repeat would be the replayed layer.
count=$((max_rate * (seconds + 2) + 2 * connections)) # in flight at the end of each of two runs
python3 "$here/mint_commands.py" --base "http://127.0.0.1:$port" --count "$count" --prefix layers-fresh \
  --secret "$BATON_JWT_HS256_SECRET" --out "$data/commands.txt" >/dev/null
next=1

echo "| request | requests/s | Baton CPU µs/request | on HTTP loops | on database loops | thread switches/request | PostgreSQL CPU µs/request |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for layer in healthz refused replayed probe command; do
  for run in warm-up measured; do
    if [ "$layer" = command ]; then
      load=(-s "$here/command.lua" "http://127.0.0.1:$port" -- "$data/commands.txt" "$next")
    else
      load=(-s "$data/$layer.lua" "http://127.0.0.1:$port")
    fi
    if [ "$run" = warm-up ]; then
      wrk -t1 -c"$connections" -d2s "${load[@]}" >"$data/wrk.out" 2>"$data/wrk.err"
    else
      loops_before=$(baton_loop_cpu)
      measured_wrk -t1 -c"$connections" -d"${seconds}s" "${load[@]}"
      loops_after=$(baton_loop_cpu)
    fi
    if [ "$layer" = command ]; then advance_commands "$count" "$connections"; fi
  done
  awk -v l="$layer" -v r="$wrk_rps" -v c="$wrk_baton_cpu" -v p="$wrk_pg_cpu" -v s="$wrk_switches" -v n="$wrk_requests" \
    -v lb="$loops_before" -v la="$loops_after" \
    'BEGIN {split(lb, x, " "); split(la, y, " ")
      printf "| %s | %.0f | %d | %d | %d | %.1f | %d |\n", l, r, c, (y[1] - x[1]) * 1e6 / n, (y[2] - x[2]) * 1e6 / n, s, p}'
done

hash=$("$pgbin/psql" -Atc "SELECT hash FROM flow_definitions WHERE flow = 'favourite-add' ORDER BY created_at DESC LIMIT 1")
# `times` in the subshell prints the CPU its children (pgbench) used: user, then system.
( "$pgbench" -n -c 8 -j 1 -M prepared -D hash="$hash" -f "$here/favourite-add.pgbench" -T "$seconds" >"$data/pgbench.out" 2>&1; times ) \
  | tail -1 | sed 's/[ms]/ /g' | awk '{print $1 * 60 + $2, $3 * 60 + $4}' >"$data/pgbench.time"
transactions=$(awk '/number of transactions actually processed/ {print $NF}' "$data/pgbench.out")
awk -v n="$transactions" '{printf "\npgbench client (favourite-add.pgbench, 8 connections, one thread): %d µs of CPU per transaction (user %.2f s, system %.2f s, %d transactions)\n", ($1 + $2) * 1e6 / n, $1, $2, n}' "$data/pgbench.time"
