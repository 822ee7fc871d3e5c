#!/usr/bin/env bash
# The screen cache's memory: Baton's resident set (VmRSS) as more and more users' playlist
# screens are held, with the cache at its budget and, in the same run, with it off.
#
#   Benchmarks/e2e/cache-memory.sh [--passes "100 1000 3000 3000 3000"] [--workers 4]
#       [--budget ""] [--baton PATH | --no-build] [--port 8087]
#
# For each setting (the cache at --budget bytes, BATON_SCREEN_CACHE_BYTES unset when empty,
# i.e. the default; then the cache off) a fresh Baton is started as screen-vs-pgbench.sh starts
# it (demo data, pool of 8). Each pass then asks for the playlist screen as that many new
# users (fill-0, fill-1, … continuing across passes), twice each: the first request renders and
# holds the screen, the second is answered from the cache and makes its start payloads'
# templates — so each held screen costs what it costs once it is in use. --workers requests
# run at a time. After each pass: the RSS, and the screens held and rendered so far
# (baton_screens_total). Needs PostgreSQL's server binaries (scripts/bootstrap.sh --bench).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
passes="100 1000 3000 3000 3000"; workers=4; budget=""; port=8087
options="passes workers budget port" # read by common.sh
. "$here/common.sh"

# Asks for the playlist screen twice as each of users fill-$1 … fill-($1 + $2 - 1).
fill() {
  python3 - "$here" "$1" "$2" "$workers" "http://127.0.0.1:$port" "$screen_playlist" "$BATON_JWT_HS256_SECRET" <<'PY'
import concurrent.futures, sys, urllib.request
sys.path.insert(0, sys.argv[1])
from mint_commands import token  # the benchmarks' HS256 bearer token
first, count, workers, base, playlist, secret = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), *sys.argv[5:]
def twice(n):
    request = urllib.request.Request(f"{base}/v3/screens/playlist?id={playlist}",
        headers={"Authorization": f"Bearer {token(f'fill-{n}', secret)}", "X-Client-Platform": "ios"})
    for _ in range(2):
        with urllib.request.urlopen(request, timeout=30) as response: response.read()
with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
    list(pool.map(twice, range(first, first + count)))
PY
}

echo "| cache | after | users so far | Baton RSS MiB | screens answered so far |"
echo "|---|---|---:|---:|---|"
for setting in budget off; do
  if [ "$setting" = off ]; then export BATON_SCREEN_CACHE_BYTES=0; label="off"
  elif [ -n "$budget" ]; then export BATON_SCREEN_CACHE_BYTES=$budget; label="$budget bytes"
  else unset BATON_SCREEN_CACHE_BYTES; label="default budget"; fi
  # A fresh database for each setting: the last Baton (and its embedded PostgreSQL) stopped first.
  stop_baton
  rm -rf "$data/postgres"
  start_baton 8
  LOG_LEVEL=warning "$baton" seed demo --data-dir "$data" >&2
  echo "| $label | start | 0 | $(mib "$(rss_kib)") | |"
  users=0
  for count in $passes; do
    fill "$users" "$count"
    users=$((users + count))
    echo "| $label | $count users, twice each | $users | $(mib "$(rss_kib)") | $(screens_answered) |"
  done
done
