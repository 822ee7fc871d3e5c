#!/usr/bin/env bash
# Throughput of a one-step flow command over HTTP — POST /v3/command with a favourite-add
# start payload for a fresh user each time: payload check, session row, effect, command log,
# commit — under wrk, beside pgbench running the statements that command issues
# (favourite-add.pgbench, captured with log_statement = all) with the same number of database
# connections, against the same server, in the same run.
#
#   Benchmarks/e2e/command-vs-pgbench.sh [--connections "2 4 8"] [--seconds 10] [--rounds 3] [--no-build]
#
# Every request is a first-time command (a repeat would be a cheap idempotent replay), so the
# script prepares enough signed payloads, one per fresh user, before each measurement
# (mint_commands.py, through the screens API as a client would). Needs wrk, python3 and
# PostgreSQL's server binaries (scripts/bootstrap.sh --bench).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
connections="2 4 8"; seconds=10; rounds=3; build=1; port=8088; guess=2000
while [ $# -gt 0 ]; do
  case "$1" in
    --connections) connections=$2; shift 2;;
    --seconds) seconds=$2; shift 2;;
    --rounds) rounds=$2; shift 2;;
    --no-build) build=0; shift;;
    --port) port=$2; shift 2;;
    --max-rate) guess=$2; shift 2;;
    *) echo "unknown option $1" >&2; exit 2;;
  esac
done
command -v wrk >/dev/null || { echo "wrk is not installed (scripts/bootstrap.sh --bench)" >&2; exit 1; }
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
export BATON_SIGNING_KEYS="bench:$(head -c 32 /dev/urandom | base64)"
export BATON_JWT_HS256_SECRET="bench-$(head -c 24 /dev/urandom | base64 | tr -d '/+=')"

start_baton() {  # $1 = pool size
  [ -n "$serve_pid" ] && { kill -TERM "$serve_pid"; wait "$serve_pid" 2>/dev/null || true; }
  LOG_LEVEL=warning DATABASE_POOL_SIZE=$1 "$baton" serve --data-dir "$data" --port "$port" >"$data/serve.log" 2>&1 &
  serve_pid=$!
  for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && return; sleep 0.2; done
  echo "Baton did not become ready; log:" >&2; cat "$data/serve.log" >&2; exit 1
}

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

start_baton 2
LOG_LEVEL=warning "$baton" seed demo --data-dir "$data" >&2
export PGHOST="$data/postgres/run" PGPORT=5432 PGUSER=postgres PGDATABASE=baton
hash=$("$pgbin/psql" -Atc "SELECT hash FROM flow_definitions WHERE flow = 'favourite-add' ORDER BY created_at DESC LIMIT 1")

echo "| connections | pgbench tps | Baton commands/s | ratio |"
echo "|---:|---:|---:|---:|"
run=0
for n in $connections; do
  start_baton "$n"
  run=$((run + 1))
  commands="$data/commands-$run.txt"
  count=$(( guess * (rounds * seconds + 3) ))
  python3 "$here/mint_commands.py" --base "http://127.0.0.1:$port" --count "$count" --prefix "bench-$run" \
    --secret "$BATON_JWT_HS256_SECRET" --out "$commands"
  wrk_connections=$((n * 4))
  next=1
  send() {  # $1 = duration; prints wrk's output; advances the first unused command
    local out
    out=$(wrk -t1 -c"$wrk_connections" -d"$1" -s "$here/command.lua" "http://127.0.0.1:$port" -- "$commands" "$next" 2>"$data/wrk.err") \
      || { echo "wrk failed:" >&2; cat "$data/wrk.err" >&2; exit 1; }
    local sent
    sent=$(awk '/requests in/ {print $1}' <<<"$out")
    next=$((next + sent + wrk_connections))
    [ "$next" -le "$count" ] || { echo "ran out of prepared commands; raise --max-rate" >&2; exit 1; }
    if [ -s "$data/wrk.err" ]; then echo "unexpected answers:" >&2; sort "$data/wrk.err" | uniq -c | head >&2; exit 1; fi
    echo "$out"
  }
  # Warm-up: prepared statements, caches, connections.
  send 3s >/dev/null
  "$pgbench" -n -c "$n" -j 1 -M prepared -T 3 -D hash="$hash" -f "$here/favourite-add.pgbench" >"$data/pgbench.log" 2>&1 \
    || { echo "pgbench failed:" >&2; tail -5 "$data/pgbench.log" >&2; exit 1; }
  : >"$data/pg"; : >"$data/wrk"
  for _ in $(seq 1 "$rounds"); do
    "$pgbench" -n -c "$n" -j 1 -M prepared -T "$seconds" -D hash="$hash" -f "$here/favourite-add.pgbench" 2>&1 \
      | awk '/^tps/ {print $3}' >>"$data/pg"
    send "${seconds}s" >"$data/wrk.out"
    awk '/^Requests\/sec/ {print $2}' "$data/wrk.out" >>"$data/wrk"
  done
  pg=$(median <"$data/pg"); rps=$(median <"$data/wrk")
  awk -v n="$n" -v pg="$pg" -v rps="$rps" 'BEGIN { printf "| %d | %.0f | %.0f | %.2f |\n", n, pg, rps, rps / pg }'
  # Exactly once under load: one favourite and one completed session per command answered.
  answered=$("$pgbin/psql" -Atc "SELECT count(*) FROM command_log l JOIN flow_sessions s ON s.id = l.session_id WHERE s.subject LIKE 'user:bench-$run-%'")
  favourites=$("$pgbin/psql" -Atc "SELECT count(*) FROM favourites WHERE subject LIKE 'user:bench-$run-%'")
  [ "$answered" = "$favourites" ] || { echo "commands logged ($answered) and favourites ($favourites) differ" >&2; exit 1; }
done
