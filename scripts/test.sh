#!/usr/bin/env bash
# Runs the whole test suite against a real PostgreSQL (a throwaway cluster the tests start
# themselves, or BATON_TEST_DATABASE_URL), installing what is missing first.
#
#   scripts/test.sh [extra swift test arguments, e.g. --filter Flows]
#
# With BATON_SANITIZE=address or thread, the same passes run on a build with that sanitizer, in
# a scratch directory of its own (scripts/sanitize.sh sets this up and reads the reports).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
# A pass in which no test starts or ends for BATON_TEST_STALL seconds (300; the longest test
# takes under a minute) is hung: scripts/stall-watch.py names the tests still running and ends
# the test binary, so the run fails then, not at CI's time limit.
stall=${BATON_TEST_STALL:-300}
if ! [[ "$stall" =~ ^[0-9]+$ ]] || [ "$stall" -eq 0 ]; then
  echo "BATON_TEST_STALL must be a whole number of seconds above 0, not '$stall'" >&2
  exit 2
fi
scripts/bootstrap.sh --test
[ "$(uname)" = "Darwin" ] && export PKG_CONFIG_PATH="$(brew --prefix libpq)/lib/pkgconfig:${PKG_CONFIG_PATH:-}"
export PATH="$root/.build/tools-venv/bin:$PATH"
swift_flags=()
first_pass=()
if [ -n "${BATON_SANITIZE:-}" ]; then
  case "$BATON_SANITIZE" in
    address) swift_flags=(--scratch-path "$root/.build/sanitize-address" --sanitize=address) ;;
    # BATON_TSAN swaps Synchronization's Mutex for a pthread mutex that ThreadSanitizer can see
    # (Sources/BatonPostgres/SanitizerMutex.swift says why).
    thread) swift_flags=(--scratch-path "$root/.build/sanitize-thread" --sanitize=thread -Xswiftc -DBATON_TSAN) ;;
    *) echo "BATON_SANITIZE must be address or thread, not '$BATON_SANITIZE'" >&2; exit 2 ;;
  esac
  # Under a sanitizer everything runs several times slower, and tests that bound waits of
  # under a second (a 100 Continue within 0.7 s, a snapshot ending within 1 s) failed in the
  # parallel pass: there it runs one test at a time too.
  first_pass=(--no-parallel)
fi
# The executable is built too: end-to-end tests run the real `baton` binary.
swift build ${swift_flags[@]+"${swift_flags[@]}"} --build-tests
# The fault tests measure wall-clock deadlines (a request on a silent database answers within
# 6 s): they run alone, after everything else, so a busy machine does not starve them. So do
# the listener test that holds the first database loop for 1.5 s, which every other test's
# first connection uses, and the tests that bound waits of a few hundred milliseconds, which
# failed now and then in the parallel pass (docs/benchmarks.md, "One database loop, measured
# again"), and the slow-client tests, whose server has a 1 s request deadline. So do the
# service-call tests: their tracking server runs in the test process, and busy parallel passes
# kept it from answering within the tests' attempt timeouts (2–5 s) in two fresh-clone runs;
# the pool's second waiter-expiry test, whose holder has 30 s (52 s once in the parallel pass,
# 6 s alone); and the end-to-end tests of the executable, which start real clusters (initdb)
# and so load everything running beside them.
faults='DeadlineTests|FaultTests|SlowClientTests|ReleaseTests|ChaosTests|ListenerTests|PoolTests/waitersExpireInDeadlineOrder|PoolTests/oneTimerServesEveryWaiter|ServiceCallTests|ServiceCallCrashTests|ProcessLifecycleTests|TransactionTests/serializationRetry'
# What the tests and the processes they start write to the temporary directory (clusters,
# flows and releases, logs, browser profiles) goes into one directory of this run, removed at
# its end, passed, failed or interrupted: the suite used to leave about a hundred directories
# in /tmp per run. The clusters run as `postgres` when the tests run as root, so it is
# readable by all. A run cut short can leave a cluster running; it is stopped (an immediate
# shutdown) before its files are removed. (An interrupted `swift test` can outlive this
# script by a moment and write SwiftPM's scratch directories into it again.)
tmp_root=${TMPDIR:-/tmp}
run_tmp=$(mktemp -d "${tmp_root%/}/baton-tests-XXXXXX")
chmod 755 "$run_tmp"
export TMPDIR="$run_tmp"
cleanup() {
  local pidfile pid pids=() _
  while IFS= read -r pidfile; do
    pid=$(head -1 "$pidfile" 2>/dev/null || true)
    # Only a postmaster of this run (its data directory is inside it): a stale pid file's
    # number may belong to another process by now, another postgres included.
    case "$(ps -p "${pid:-0}" -o args= 2>/dev/null || true)" in
      *postgres*"$run_tmp"*) kill -QUIT "$pid" 2>/dev/null && pids+=("$pid") || true;;
    esac
  done < <(find "$run_tmp" -name postmaster.pid 2>/dev/null || true)
  # Each of them gone (up to 5 s each) before their files are removed.
  for pid in ${pids[@]+"${pids[@]}"}; do
    for _ in $(seq 1 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
  done
  rm -rf "$run_tmp" 2>/dev/null || true
}
trap cleanup EXIT
# A failing test's lines are repeated at the end, so a log cut to its tail still says which.
log=$(mktemp)
run() {
  local status=0 events stalled watcher
  events=$(mktemp)
  stalled=$(mktemp)
  python3 "$root/scripts/stall-watch.py" $$ "$events" "$stall" "$stalled" &
  watcher=$!
  swift test ${swift_flags[@]+"${swift_flags[@]}"} --skip-build \
    --event-stream-output-path "$events" --event-stream-version 0 "$@" 2>&1 | tee "$log" || status=$?
  kill "$watcher" 2>/dev/null || true
  wait "$watcher" 2>/dev/null || true
  if [ "$status" -ne 0 ]; then
    echo "---- what failed (swift test $*) ----"
    grep -E '✘|recorded an issue|Expectation failed|error:|Fatal error|Caught error' "$log" | head -60 || true
    cat "$stalled"
  fi
  rm -f "$events" "$stalled"
  return "$status"
}
if [ $# -gt 0 ]; then
  run "$@"
else
  run ${first_pass[@]+"${first_pass[@]}"} --skip "$faults"
  run --no-parallel --filter "$faults"
  # The database client again with its connections on the HTTP event loops instead of threads
  # of their own (BATON_DB_LOOPS=0, docs/operations.md), its timing-bound tests alone again.
  BATON_DB_LOOPS=0 run --filter BatonPostgresTests --skip "$faults"
  BATON_DB_LOOPS=0 run --no-parallel --filter "BatonPostgresTests\.($faults)"
  # The pool with one database thread, whatever the cores (the default on two), then with two
  # (the default on four or five cores): callers on an event loop wait for a connection on a
  # database thread, and with two are handed the other thread's connections too.
  BATON_DB_LOOPS=1 run --no-parallel --filter PoolTests
  BATON_DB_LOOPS=2 run --no-parallel --filter PoolTests
fi
