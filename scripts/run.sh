#!/usr/bin/env bash
# From a fresh clone to a running Baton with demo data: installs what is missing, builds,
# starts an embedded PostgreSQL under .baton/, migrates, loads the demo data, and serves on
# http://127.0.0.1:8080 (Ctrl-C stops the server and the database).
#
#   scripts/run.sh [baton serve options, e.g. --port 9090]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/bootstrap.sh
[ "$(uname)" = "Darwin" ] && export PKG_CONFIG_PATH="$(brew --prefix libpq)/lib/pkgconfig:${PKG_CONFIG_PATH:-}"
swift build --product baton
baton="$(swift build --show-bin-path)/baton"
# Development keys: fine on a laptop, never in production (see docs/operations.md).
export BATON_SIGNING_KEYS="${BATON_SIGNING_KEYS:-dev:ZGV2ZWxvcG1lbnQtc2lnbmluZy1rZXktbm90LWZvci1wcm9kdWN0aW9u}"
export BATON_JWT_HS256_SECRET="${BATON_JWT_HS256_SECRET:-development-jwt-secret-not-for-production}"
export LOG_FORMAT="${LOG_FORMAT:-logfmt}"
if "$baton" seed --help >/dev/null 2>&1; then
  "$baton" seed demo
fi
# --watch: edits to Flows/ are served within a second (lint gates each reload). --dev: this is a
# development machine, so the development secrets above are accepted even if --host widens the
# bind; on the loopback address it also opens Baton Studio at http://127.0.0.1:8080/studio
# (docs/studio.md), which --host elsewhere leaves off. Database settings (DATABASE_URL,
# BATON_DATA_DIR) go in the environment, where both `seed` above and `serve` read them.
exec "$baton" serve --dev --watch "$@"
