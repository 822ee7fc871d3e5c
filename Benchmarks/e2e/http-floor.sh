#!/usr/bin/env bash
# The HTTP floor: what the HTTP stack alone costs per request on this machine, beside what
# `GET /healthz` costs Baton, in one run. Two servers that answer `GET /healthz` with the same
# fixed body and do nothing else (Benchmarks/Benchmarks/HTTPFloor, `baton-http-floor`):
#
#   nio          NIO's HTTP/1 pipeline and one channel handler (no Swift concurrency, no router)
#   hummingbird  Hummingbird 2 with one route, no middleware, tasks on NIO's event loops
#
# each under the same wrk load as Baton's healthz (the same 15-byte body), then both again with
# a body the size of the playlist screen (5 394 bytes; Baton's screen also reads the database,
# so it is not in that pair). Per request: throughput, Baton's or the floor server's CPU (user +
# system, /proc), wrk's CPU, thread switches, wrk's p50 and p99. Baton's healthz is the first
# layer of cpu-layers.sh too; it is measured again here so that the three servers share one
# run of the machine.
#
#   Benchmarks/e2e/http-floor.sh [--connections 32] [--seconds 6] [--floor PATH]
#       [--baton PATH | --no-build] [--port 8096]
#
# The floor server is built (release, in Benchmarks/) unless --floor names one. Needs wrk and
# PostgreSQL's server binaries (scripts/bootstrap.sh --bench): Baton starts as it always does.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
connections=32; seconds=6; port=8096; floor=""
options="connections seconds port floor" # read by common.sh
. "$here/common.sh"

# The floor server: --floor PATH as given (relative to where the script was started: common.sh
# has changed to the repository's root since), else built in Benchmarks/ unless --no-build.
if [ -n "$floor" ]; then
  case "$floor" in /*) ;; *) floor="$OLDPWD/$floor";; esac
else
  floor="$root/Benchmarks/.build/release/baton-http-floor"
  if [ "$build" = 1 ]; then (cd "$root/Benchmarks" && swift build -c release --product baton-http-floor >&2); fi
fi
[ -x "$floor" ] || { echo "no baton-http-floor at $floor (cd Benchmarks && swift build -c release --product baton-http-floor)" >&2; exit 1; }

# serve_pid is the process measured_wrk measures: Baton's, or a floor server's for its rows.
baton_pid=""
floor_pid=""
stop_floor() { if [ -n "$floor_pid" ]; then kill "$floor_pid" 2>/dev/null || true; wait "$floor_pid" 2>/dev/null || true; floor_pid=""; fi; }
trap 'stop_floor; serve_pid=${baton_pid:-$serve_pid}; cleanup' EXIT

# Starts the floor server $1 with a body of $2 bytes on port+1; waits until it answers.
start_floor() {
  stop_floor
  "$floor" "$1" --port $((port + 1)) --body-bytes "$2" >"$data/floor.log" 2>&1 &
  floor_pid=$!
  for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$((port + 1))/healthz" >/dev/null && return; sleep 0.1; done
  echo "baton-http-floor $1 did not answer; log:" >&2; cat "$data/floor.log" >&2; exit 1
}

# wrk on URL $2 as row $1: a warm-up, then a measured run with the process in $serve_pid.
row() {
  wrk -t1 -c"$connections" -d2s -s "$data/get.lua" "$2" >/dev/null 2>&1
  measured_wrk -t1 -c"$connections" -d"${seconds}s" -s "$data/get.lua" "$2"
  fail_on_wrk_errors
  awk -v l="$1" -v r="$wrk_rps" -v c="$wrk_baton_cpu" -v w="$wrk_cpu" -v s="$wrk_switches" -v p50="$wrk_p50" -v p99="$wrk_p99" \
    'BEGIN {printf "| %s | %.0f | %d | %d | %.1f | %.2f | %.2f |\n", l, r, c, w, s, p50 / 1000, p99 / 1000}'
}

start_baton 2
baton_pid=$serve_pid
token="" # layer_script's header; no route here reads it
layer_script get GET "" /healthz

echo "| server | requests/s | server CPU µs/request | wrk CPU µs/request | thread switches/request | p50 ms | p99 ms |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for size in 15 5394; do
  for kind in nio hummingbird; do
    start_floor "$kind" "$size"
    serve_pid=$floor_pid
    row "$kind, $size-byte body" "http://127.0.0.1:$((port + 1))"
  done
  stop_floor
  if [ "$size" = 15 ]; then
    serve_pid=$baton_pid
    row "Baton GET /healthz, 15-byte body" "http://127.0.0.1:$port"
  fi
done
