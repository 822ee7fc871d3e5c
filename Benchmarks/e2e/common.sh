# Shared by the end-to-end benchmark scripts (sourced, not run): finding the tools, a
# throwaway data directory removed on exit, starting Baton on it, medians.
# The sourcing script sets `root`, `port` and `build` first, and `baton_bin` when it was
# given --baton PATH.
#
# Which binary: --baton PATH, else $BATON_BIN, else $root/.build/release/baton, built first
# unless --no-build. A binary given either way is used as it is (no build): building the tree
# would not change it.

command -v wrk >/dev/null || { echo "wrk is not installed (scripts/bootstrap.sh --bench)" >&2; exit 1; }
pgbin=$(pg_config --bindir 2>/dev/null || ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
pgbench="$pgbin/pgbench"
[ -x "$pgbench" ] || { echo "pgbench not found in $pgbin" >&2; exit 1; }

baton_bin=${baton_bin:-${BATON_BIN:-}}
if [ -n "$baton_bin" ]; then
  # Absolute before the cd below, so a path relative to the caller's directory works.
  baton="$(cd "$(dirname "$baton_bin")" && pwd)/$(basename "$baton_bin")"
  [ -x "$baton" ] || { echo "no executable Baton at $baton_bin" >&2; exit 1; }
  build=0
else
  baton="$root/.build/release/baton"
fi
cd "$root"
if [ "$build" = 1 ]; then swift build -c release --product baton >&2; fi
[ -x "$baton" ] || { echo "no Baton binary at $baton (build it, or pass --baton PATH)" >&2; exit 1; }
data=$(mktemp -d /tmp/baton-bench-XXXXXX)
chmod 755 "$data"
serve_pid=""
cleanup() {
  if [ -n "$serve_pid" ]; then kill -TERM "$serve_pid" 2>/dev/null || true; wait "$serve_pid" 2>/dev/null || true; fi
  rm -rf "$data"
}
trap cleanup EXIT

# Starts (or restarts) `baton serve` on $data with a pool of $1 connections; waits for /readyz.
start_baton() {
  if [ -n "$serve_pid" ]; then kill -TERM "$serve_pid" 2>/dev/null || true; wait "$serve_pid" 2>/dev/null || true; fi
  BATON_DIAGNOSTICS=true LOG_LEVEL=warning DATABASE_POOL_SIZE=$1 \
    "$baton" serve --data-dir "$data" --port "$port" >"$data/serve.log" 2>&1 &
  serve_pid=$!
  for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && return; sleep 0.2; done
  echo "Baton did not become ready; log:" >&2; cat "$data/serve.log" >&2; exit 1
}

# The median of the numbers on standard input; fails when there are none.
median() {
  sort -n | awk '{a[NR]=$1} END {if (NR == 0) exit 1; print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'
}

# psql against the embedded cluster Baton started in $data.
export PGHOST="$data/postgres/run" PGPORT=5432 PGUSER=postgres PGDATABASE=baton
