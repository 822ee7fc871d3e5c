#!/usr/bin/env bash
# Prints the SQL Baton sends for one playlist screen and one favourite-add command, as the
# embedded PostgreSQL logs it with log_statement = all: what screen-playlist.pgbench and
# favourite-add.pgbench must mirror. Run it after a change to the screen's loaders or the
# command path and compare.
#
#   Benchmarks/e2e/capture-statements.sh [--baton PATH | --no-build] [--port 8087]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
port=8087
options="port" # read by common.sh
. "$here/common.sh"
playlist=11111111-0000-4000-8000-000000000001

start_baton 1
LOG_LEVEL=warning "$baton" seed demo --data-dir "$data" >&2
"$pgbin/psql" -qAtc "ALTER SYSTEM SET log_statement = 'all'" -c "SELECT pg_reload_conf()" >/dev/null
log="$data/postgres/server.log"

# The statements logged while $@ runs, without the log's timestamp and pid prefix.
statements() {
  local before
  before=$(wc -l <"$log")
  "$@" >/dev/null
  sleep 0.5
  tail -n +"$((before + 1))" "$log" | sed -E 's/^[0-9-]+ [0-9:.]+ [A-Z]+ \[[0-9]+\] //'
}

token=$("$baton" token bench-capture)
echo "## GET /v3/screens/playlist?id=$playlist (as user:bench-capture)"
statements curl -sf -H "Authorization: Bearer $token" -H "X-Client-Platform: ios" \
  "http://127.0.0.1:$port/v3/screens/playlist?id=$playlist"

python3 "$here/mint_commands.py" --base "http://127.0.0.1:$port" --count 1 --prefix capture \
  --secret "$BATON_JWT_HS256_SECRET" --out "$data/command.txt" 2>/dev/null
read -r bearer payload <"$data/command.txt"
echo
echo "## POST /v3/command: favourite-add, first command of user:capture-0"
statements curl -sf -X POST -H "Authorization: Bearer $bearer" -H "Content-Type: application/json" \
  -H "X-Client-Platform: ios" -d "{\"payload\":\"$payload\"}" "http://127.0.0.1:$port/v3/command"
