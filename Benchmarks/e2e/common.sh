# Shared by the end-to-end benchmark scripts (sourced, not run): finding the tools, a
# throwaway data directory removed on exit, starting Baton on it, medians, and what each
# measured interval costs: latency percentiles from wrk and pgbench, CPU of Baton and of the
# embedded PostgreSQL from /proc.
# The sourcing script sets `root`, `port` and its `options` first.
#
# Which binary: --baton PATH, else $BATON_BIN, else $root/.build/release/baton, built first
# unless --no-build. A binary given either way is used as it is (no build): building the tree
# would not change it.

# The options, read from the sourcing script's arguments: --no-build and --baton PATH for every
# script, and --NAME VALUE for each NAME in the script's `options` (setting the variable of that
# name, dashes as underscores, whose default the script set beforehand).
build=${build:-1}
while [ $# -gt 0 ]; do
  case "$1" in
    --no-build) build=0; shift;;
    --baton) [ $# -ge 2 ] || { echo "--baton needs a path" >&2; exit 2; }; baton_bin=$2; shift 2;;
    --*)
      name=${1#--}; name=${name//-/_}
      case " ${options:-} " in
        *" $name "*) [ $# -ge 2 ] || { echo "$1 needs a value" >&2; exit 2; }; printf -v "$name" '%s' "$2"; shift 2;;
        *) echo "unknown option $1" >&2; exit 2;;
      esac;;
    *) echo "unknown argument $1" >&2; exit 2;;
  esac
done

# Under set -e a failed command inside $(…) ends the script without a word: say where.
set -E
trap 'echo "${BASH_SOURCE[0]##*/}: line $LINENO: a command failed (exit $?)" >&2' ERR

command -v wrk >/dev/null || { echo "wrk is not installed (scripts/bootstrap.sh --bench)" >&2; exit 1; }
pgbin=$(pg_config --bindir 2>/dev/null || ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
pgbench="$pgbin/pgbench"
[ -x "$pgbench" ] || { echo "pgbench not found in $pgbin" >&2; exit 1; }

baton_bin=${baton_bin:-${BATON_BIN:-}}
if [ -n "$baton_bin" ]; then
  # Absolute before the cd below, so a path relative to the caller's directory works.
  baton="$(cd "$(dirname "$baton_bin")" 2>/dev/null && pwd)/$(basename "$baton_bin")"
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
# Stops `baton serve` (and with it its embedded PostgreSQL), if it runs.
stop_baton() {
  if [ -n "$serve_pid" ]; then kill -TERM "$serve_pid" 2>/dev/null || true; wait "$serve_pid" 2>/dev/null || true; fi
  serve_pid=""
}
cleanup() {
  stop_baton
  rm -rf "$data"
}
trap cleanup EXIT

# Fresh secrets for each run: payloads and bearer tokens minted by the scripts use them.
export BATON_SIGNING_KEYS="bench:$(head -c 32 /dev/urandom | base64)"
export BATON_JWT_HS256_SECRET="bench-$(head -c 24 /dev/urandom | base64 | tr -d '/+=')"

# Starts (or restarts) `baton serve` on $data with a pool of $1 connections; waits for /readyz.
start_baton() {
  stop_baton
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

hz=$(getconf CLK_TCK)

# The subjects 1–1000 the diagnostics probe counts for (POST /diagnostics/probe/:id, and the
# probe*.pgbench scripts).
seed_probe_subjects() {
  "$pgbin/psql" -qc "INSERT INTO probe_counters (subject) SELECT g::text FROM generate_series(1, 1000) g ON CONFLICT DO NOTHING"
}

# Sets the variable named $1 to the CPU seconds (user + system) of this shell's children that
# have exited, so far: read just before and after a load generator runs in the foreground, the
# difference is its CPU. (`times` must run in this shell, not in a $(…) subshell, which has
# children of its own; so the result comes back in a variable, not on standard output.)
children_cpu() {
  times >"$data/times"
  printf -v "$1" '%s' "$(tail -1 "$data/times" | awk '{
    total = 0
    for (i = 1; i <= 2; i++) { split($i, t, "m"); sub("s", "", t[2]); total += t[1] * 60 + t[2] }
    printf "%.3f\n", total }')"
}

# Baton's resident set now, in KiB (VmRSS); mib turns KiB into MiB with one decimal.
rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$serve_pid/status"; }
mib() { awk -v k="$1" 'BEGIN {printf "%.1f", k / 1024}'; }

# Thread switches of Baton so far (voluntary + involuntary, summed over its threads).
baton_switches() { cat "/proc/$serve_pid"/task/*/status 2>/dev/null | awk '/ctxt_switches/ {t += $2} END {print t}'; }

# CPU seconds (user + system) Baton's HTTP event loops (NIO's threads, `NIO-…`) and its
# database loops (`baton-db-io-…`) have used so far, as "HTTP DATABASE". A thread that ended
# between two readings is missing from the later one; the loops live as long as the process.
baton_loop_cpu() {
  local task
  for task in "/proc/$serve_pid"/task/*; do
    { printf '%s %s\n' "$(cat "$task/comm")" "$(sed 's/.*) //' "$task/stat")"; } 2>/dev/null || true
  done | awk -v hz="$hz" '
    $1 ~ /^NIO-/ { http += $13 + $14 }
    $1 ~ /^baton-db-io/ { database += $13 + $14 }
    END { printf "%.2f %.2f\n", http / hz, database / hz }'
}

# CPU seconds (user + system, all threads) process $1 has used so far.
process_cpu() {
  sed 's/.*) //' "/proc/$1/stat" | awk -v hz="$hz" '{printf "%.2f\n", ($12 + $13) / hz}'
}

# CPU seconds the embedded PostgreSQL has used so far: the postmaster, its live children
# (backends, checkpointer, WAL writer, autovacuum…), and the children that have exited —
# the kernel adds those to the postmaster's cutime/cstime when it reaps them, so a backend
# whose client disconnected between two readings is still counted, once. Readings are taken
# while no connection opens or closes (before a run starts, after it ended and settled).
postgres_cpu() {
  local postmaster
  postmaster=$(head -1 "$data/postgres/data/postmaster.pid")
  # cat fails when a process exits between the glob and the read (this machine runs other
  # things too); pipefail must not make that a silent exit of the script.
  { cat /proc/[0-9]*/stat 2>/dev/null || true; } | awk -v pm="$postmaster" -v hz="$hz" '
    { pid = $1; rest = $0; sub(/^.*\) /, "", rest); split(rest, f, " ") }
    pid == pm { t += f[12] + f[13] + f[14] + f[15] }
    f[2] == pm { t += f[12] + f[13] }
    END { printf "%.2f\n", t / hz }'
}

# After a wrk run of command.lua on $2 connections (output in $data/wrk.out and wrk.err): moves
# `next` past every prepared command the run may have used — answered, timed out, in flight at
# its end — and fails when that passes $1, the number prepared, or command.lua reported an
# unexpected answer (not 200, or a replay).
advance_commands() {
  local requests timeouts
  requests=$(awk '/requests in/ {print $1}' "$data/wrk.out")
  timeouts=$(awk '/Socket errors/ {for (i = 1; i <= NF; i++) if ($i == "timeout") print $(i + 1)}' "$data/wrk.out")
  next=$((next + requests + ${timeouts:-0} + $2))
  [ "$next" -le "$1" ] || { echo "ran out of prepared commands; raise --max-rate" >&2; exit 1; }
  if [ -s "$data/wrk.err" ]; then echo "unexpected answers:" >&2; sort "$data/wrk.err" | uniq -c | head >&2; exit 1; fi
}

# Runs wrk with the arguments given (its script's done() prints "latency_us p50 N p99 N"), between
# two CPU readings. Output in $data/wrk.out and $data/wrk.err; sets wrk_requests, wrk_rps,
# wrk_p50 and wrk_p99 (µs), wrk_baton_cpu, wrk_pg_cpu and wrk_cpu (µs of CPU per request of
# Baton, PostgreSQL and wrk itself), and wrk_switches (thread switches per request of Baton).
# "Baton" is the process in $serve_pid.
measured_wrk() {
  local baton0 pg0 baton1 pg1 wrk0 wrk1 switches0 switches1
  switches0=$(baton_switches)
  baton0=$(process_cpu "$serve_pid"); pg0=$(postgres_cpu)
  children_cpu wrk0
  wrk "$@" >"$data/wrk.out" 2>"$data/wrk.err" || { echo "wrk failed:" >&2; cat "$data/wrk.err" >&2; exit 1; }
  children_cpu wrk1
  baton1=$(process_cpu "$serve_pid"); pg1=$(postgres_cpu)
  switches1=$(baton_switches)
  wrk_requests=$(awk '/requests in/ {print $1}' "$data/wrk.out")
  wrk_rps=$(awk '/^Requests\/sec/ {print $2}' "$data/wrk.out")
  wrk_p50=$(awk '/^latency_us/ {print $3}' "$data/wrk.out")
  wrk_p99=$(awk '/^latency_us/ {print $5}' "$data/wrk.out")
  [ -n "$wrk_p50" ] || { echo "wrk printed no latency line (its script needs the done() of command.lua)" >&2; exit 1; }
  [ "${wrk_requests:-0}" -gt 0 ] || { echo "wrk got no answers:" >&2; cat "$data/wrk.out" >&2; exit 1; }
  wrk_baton_cpu=$(awk -v a="$baton0" -v b="$baton1" -v n="$wrk_requests" 'BEGIN {printf "%.0f", (b - a) * 1e6 / n}')
  wrk_pg_cpu=$(awk -v a="$pg0" -v b="$pg1" -v n="$wrk_requests" 'BEGIN {printf "%.0f", (b - a) * 1e6 / n}')
  wrk_cpu=$(awk -v a="$wrk0" -v b="$wrk1" -v n="$wrk_requests" 'BEGIN {printf "%.0f", (b - a) * 1e6 / n}')
  wrk_switches=$(awk -v a="$switches0" -v b="$switches1" -v n="$wrk_requests" 'BEGIN {printf "%.2f", (b - a) / n}')
}

# Runs pgbench with the arguments given plus --log, between two CPU readings. Sets pg_tps,
# pg_p50 and pg_p99 (µs, from the per-transaction log), pg_cpu and pg_client_cpu (µs of CPU
# per transaction of PostgreSQL and of the pgbench client). Output in $data/pgbench.log.
measured_pgbench() {
  local pg0 pg1 transactions client0 client1
  rm -f "$data"/pgbench_tx.*
  pg0=$(postgres_cpu)
  children_cpu client0
  "$pgbench" "$@" --log --log-prefix="$data/pgbench_tx" >"$data/pgbench.log" 2>&1 \
    || { echo "pgbench failed:" >&2; grep -v '^pgbench: client' "$data/pgbench.log" | head -20 >&2; exit 1; }
  children_cpu client1
  sleep 0.2 # the postmaster reaps the exited backends (their CPU moves to its cutime/cstime)
  pg1=$(postgres_cpu)
  pg_tps=$(awk '/^tps/ {print $3}' "$data/pgbench.log")
  # Log lines: client, transaction, latency (µs), script, epoch s, µs.
  cat "$data"/pgbench_tx.* | awk '{print $3}' | sort -n >"$data/pgbench.latency"
  transactions=$(wc -l <"$data/pgbench.latency")
  [ "$transactions" -gt 0 ] || { echo "pgbench logged no transactions; see $data/pgbench.log" >&2; exit 1; }
  pg_p50=$(percentile 50 <"$data/pgbench.latency")
  pg_p99=$(percentile 99 <"$data/pgbench.latency")
  pg_cpu=$(awk -v a="$pg0" -v b="$pg1" -v n="$transactions" 'BEGIN {printf "%.0f", (b - a) * 1e6 / n}')
  pg_client_cpu=$(awk -v a="$client0" -v b="$client1" -v n="$transactions" 'BEGIN {printf "%.0f", (b - a) * 1e6 / n}')
}

# The $1th percentile (nearest rank) of the sorted numbers on standard input.
percentile() {
  awk -v p="$1" '{a[NR] = $1} END {if (NR == 0) exit 1; i = int(p / 100 * NR + 0.999999); if (i < 1) i = 1; print a[i]}'
}

# µs to ms with two decimals.
ms() { awk -v us="$1" 'BEGIN {printf "%.2f", us / 1000}'; }

# The median of column $2 of file $1 (one line per round).
column_median() {
  awk -v k="$2" '{print $k}' "$1" | median
}

# The header of the table comparing Baton with pgbench; $1 names what one request is.
comparison_header() {
  echo "| DB connections | HTTP connections | pgbench tps | Baton $1s/s | ratio | pgbench p50 ms | pgbench p99 ms | Baton p50 ms | Baton p99 ms | PostgreSQL CPU µs/tx (pgbench) | PostgreSQL CPU µs/$1 (Baton) | Baton CPU µs/$1 | pgbench client CPU µs/tx | wrk CPU µs/$1 | CPU ratio |"
  echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
}

# A row of that table for $1 database and $2 HTTP connections: the median of each column over
# the rounds in $data/pg ("tps p50 p99 postgres-cpu client-cpu" per pgbench run) and $data/wrk
# ("rps p50 p99 postgres-cpu baton-cpu wrk-cpu" per wrk run). The last column is the ratio the
# CPU alone allows when the cores are saturated: what one pgbench transaction costs everyone
# (PostgreSQL and the pgbench client) over what one of Baton's requests does (PostgreSQL, Baton
# and wrk).
comparison_row() {
  awk -v n="$1" -v c="$2" -v pg="$(column_median "$data/pg" 1)" -v rps="$(column_median "$data/wrk" 1)" \
    -v pg50="$(column_median "$data/pg" 2)" -v pg99="$(column_median "$data/pg" 3)" \
    -v b50="$(column_median "$data/wrk" 2)" -v b99="$(column_median "$data/wrk" 3)" \
    -v pgcpu="$(column_median "$data/pg" 4)" -v bpgcpu="$(column_median "$data/wrk" 4)" -v bcpu="$(column_median "$data/wrk" 5)" \
    -v clientcpu="$(column_median "$data/pg" 5)" -v wrkcpu="$(column_median "$data/wrk" 6)" \
    'BEGIN { printf "| %d | %d | %.0f | %.0f | %.2f | %.2f | %.2f | %.2f | %.2f | %.0f | %.0f | %.0f | %.0f | %.0f | %.2f |\n",
             n, c, pg, rps, rps / pg, pg50 / 1000, pg99 / 1000, b50 / 1000, b99 / 1000, pgcpu, bpgcpu, bcpu,
             clientcpu, wrkcpu, (pgcpu + clientcpu) / (bpgcpu + bcpu + wrkcpu) }'
}

# The playlist screen as one user, the load of screen-vs-pgbench, scaling and soak: sets
# screen_url, exports the token screen.lua sends, and prints what one answer is. Baton must be
# running, with the demo data seeded.
screen_playlist=11111111-0000-4000-8000-000000000001
screen_user=bench-screen
prepare_screen() {
  BATON_BENCH_TOKEN=$("$baton" token "$screen_user")
  export BATON_BENCH_TOKEN
  screen_url="http://127.0.0.1:$port/v3/screens/playlist?id=$screen_playlist"
  local status
  status=$(curl -s -o "$data/screen.json" -w '%{http_code}' -H "Authorization: Bearer $BATON_BENCH_TOKEN" -H "X-Client-Platform: ios" "$screen_url" || true)
  [ "$status" = 200 ] || {
    echo "the playlist screen did not answer 200 but ${status:-nothing}: $(head -c 500 "$data/screen.json" 2>/dev/null)" >&2
    tail -5 "$data/serve.log" >&2
    exit 1
  }
  echo "GET /v3/screens/playlist?id=$screen_playlist as user:$screen_user: $(wc -c <"$data/screen.json") bytes," \
    "$(grep -o '"type":"startFlow"' "$data/screen.json" | wc -l) start actions."
}

# measured_wrk on the screen for $1 (a wrk duration) with $2 connections, failing on any
# answer but 2xx and on any socket error (a timeout included: wrk's is 30 s here, so a slow
# answer is measured, not dropped).
screen_wrk() {
  measured_wrk -t1 -c"$2" -d"$1" --timeout 30s -s "$here/screen.lua" "$screen_url"
  fail_on_wrk_errors
}

# Fails when the last measured_wrk run saw an answer but 2xx or a socket error (a timeout
# included); with an argument, when its output matched that pattern instead.
fail_on_wrk_errors() {
  if grep -qE "${1:-Non-2xx|Socket errors}" "$data/wrk.out"; then echo "wrk saw errors:" >&2; cat "$data/wrk.out" >&2; exit 1; fi
}

# The screens Baton answered so far, by how (baton_screens_total): "held N, rendered M".
screens_answered() {
  curl -sf "http://127.0.0.1:$port/metrics" |
    awk '/^baton_screens_total/ {split($1, l, "\""); n[l[2]] = $2} END {printf "held %d, rendered %d", n["held"], n["rendered"]}'
}

# A wrk script $data/$1.lua for cpu-layers.sh and counts.sh: method $2, body $3 ('' for none),
# path $4 (a %d in it becomes 1–1000), as the bearer token in $token; its done() prints the
# latency line measured_wrk reads.
layer_script() {
  cat >"$data/$1.lua" <<LUA
math.randomseed(os.time())
local body = [[$3]]
request = function()
  local path = string.gsub("$4", "%%d", tostring(math.random(1, 1000)))
  return wrk.format("$2", path, {
    ["Authorization"] = "Bearer $token", ["Content-Type"] = "application/json", ["X-Client-Platform"] = "ios",
  }, body ~= "" and body or nil)
end
function done(summary, latency, requests)
  io.write(string.format("latency_us p50 %d p99 %d\n", latency:percentile(50), latency:percentile(99)))
end
LUA
}
