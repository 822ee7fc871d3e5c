#!/usr/bin/env bash
# Runs the test suite on a build with AddressSanitizer or ThreadSanitizer, then prints what the
# sanitizer reported (README, "Under sanitizers"). Exits non-zero when a test failed or a
# sanitizer reported anything, from the test process or from a `baton` it started.
#
#   scripts/sanitize.sh address|thread [swift test arguments, e.g. --filter BatonPostgresTests]
#
# The build goes to .build/sanitize-<kind> (about 5 minutes the first time on two cores); the
# passes are scripts/test.sh's. The reports are kept in the directory printed at the end.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
kind=${1:-}
case "$kind" in
  address|thread) shift ;;
  *) echo "usage: scripts/sanitize.sh address|thread [swift test arguments]" >&2; exit 2 ;;
esac
reports=$(mktemp -d "${TMPDIR:-/tmp}/baton-sanitize-$kind-XXXXXX")
# Each process writes its reports to a file of its own (log_path.<pid>). Leaks are not checked:
# the Swift runtime keeps its metadata caches and the processes' singletons for good.
export ASAN_OPTIONS="detect_leaks=0:log_path=$reports/report${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export TSAN_OPTIONS="halt_on_error=0:log_path=$reports/report:suppressions=$root/scripts/tsan-suppressions.txt${TSAN_OPTIONS:+:$TSAN_OPTIONS}"
status=0
BATON_SANITIZE=$kind scripts/test.sh "$@" || status=$?

# Every report ends with one SUMMARY line: counted, then listed once per distinct summary with
# Swift's names demangled.
summaries=$(cat "$reports"/report.* 2>/dev/null | grep '^SUMMARY:' || true)
count=$(printf '%s' "$summaries" | grep -c . || true)
echo "---- $kind sanitizer: $count report(s) in $reports ----"
if [ "$count" -gt 0 ]; then
  printf '%s\n' "$summaries" | sort | uniq -c | sort -rn | swift demangle --simplified | cut -c1-300
  status=1
fi
exit "$status"
