#!/usr/bin/env bash
# Runs the whole test suite against a real PostgreSQL (a throwaway cluster the tests start
# themselves, or BATON_TEST_DATABASE_URL), installing what is missing first.
#
#   scripts/test.sh [extra swift test arguments, e.g. --filter Flows]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/bootstrap.sh --test
[ "$(uname)" = "Darwin" ] && export PKG_CONFIG_PATH="$(brew --prefix libpq)/lib/pkgconfig:${PKG_CONFIG_PATH:-}"
export PATH="$root/.build/tools-venv/bin:$PATH"
# The executable is built too: end-to-end tests run the real `baton` binary.
swift build --build-tests
# The fault tests measure wall-clock deadlines (a request on a silent database answers within
# 6 s): they run alone, after everything else, so a busy machine does not starve them.
faults='DeadlineTests|FaultTests|ReleaseTests|ChaosTests'
if [ $# -gt 0 ]; then
  swift test --skip-build "$@"
else
  swift test --skip-build --skip "$faults"
  swift test --skip-build --no-parallel --filter "$faults"
fi
