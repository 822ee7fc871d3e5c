#!/usr/bin/env bash
# Installs what Baton needs and is missing, on Debian/Ubuntu (apt) or macOS (Homebrew).
#
#   scripts/bootstrap.sh            # build + run: libpq headers, PostgreSQL server binaries
#   scripts/bootstrap.sh --test     # also what the test suite uses as judges: promtool and
#                                   # prometheus, a Python venv with openapi-spec-validator, jsonschema,
#                                   # selenium; chromium + chromedriver (Baton Studio's browser
#                                   # tests) and graphviz (the studio's flow graphs)
#   scripts/bootstrap.sh --bench    # also wrk (load generator) and python3 for Benchmarks/e2e
#
# Safe to run repeatedly: it only installs what is not already there.
set -euo pipefail
want_test=0; want_bench=0
for arg in "$@"; do
  case "$arg" in
    --test) want_test=1;;
    --bench) want_bench=1;;
    *) echo "usage: $0 [--test] [--bench]" >&2; exit 2;;
  esac
done
root=$(cd "$(dirname "$0")/.." && pwd)
say() { printf '==> %s\n' "$*" >&2; }

command -v swift >/dev/null || { echo "Swift is required (https://www.swift.org/install/)" >&2; exit 1; }

if [ "$(uname)" = "Darwin" ]; then
  command -v brew >/dev/null || { echo "Homebrew is required on macOS (https://brew.sh)" >&2; exit 1; }
  need=()
  brew list libpq >/dev/null 2>&1 || need+=(libpq)
  ls -d /opt/homebrew/opt/postgresql@* /usr/local/opt/postgresql@* >/dev/null 2>&1 || need+=(postgresql@16)
  [ "$want_test" = 1 ] && { ! command -v promtool >/dev/null || ! command -v prometheus >/dev/null; } && need+=(prometheus)
  [ "$want_test" = 1 ] && ! command -v dot >/dev/null && need+=(graphviz)
  [ "$want_bench" = 1 ] && ! command -v wrk >/dev/null && need+=(wrk)
  if [ ${#need[@]} -gt 0 ]; then say "brew install ${need[*]}"; brew install "${need[@]}"; fi
  # pkg-config must see Homebrew's keg-only libpq.
  export PKG_CONFIG_PATH="$(brew --prefix libpq)/lib/pkgconfig:${PKG_CONFIG_PATH:-}"
else
  sudo=""
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null && sudo="sudo" || { echo "run as root or install sudo to let this script install packages" >&2; exit 1; }
  fi
  need=()
  dpkg -s libpq-dev >/dev/null 2>&1 || need+=(libpq-dev)
  command -v pkg-config >/dev/null || need+=(pkg-config)
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
  command -v curl >/dev/null || need+=(curl)
  if [ "$want_test" = 1 ]; then
    # The Debian package brings both: promtool checks, prometheus runs the end-to-end test.
    { command -v promtool >/dev/null && command -v prometheus >/dev/null; } || need+=(prometheus)
    command -v python3 >/dev/null || need+=(python3)
    python3 -c 'import venv, ensurepip' 2>/dev/null || need+=(python3-venv)
    # Baton Studio's browser tests drive Debian's chromium through its chromedriver.
    { command -v chromium >/dev/null || command -v chromium-browser >/dev/null; } || need+=(chromium)
    command -v chromedriver >/dev/null || need+=(chromium-driver)
    command -v dot >/dev/null || need+=(graphviz)
  fi
  [ "$want_bench" = 1 ] && ! command -v wrk >/dev/null && need+=(wrk)
  [ "$want_bench" = 1 ] && ! command -v python3 >/dev/null && need+=(python3)
  if [ ${#need[@]} -gt 0 ]; then
    say "apt-get install ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq || true
    $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  fi
fi

if [ "$want_test" = 1 ]; then
  venv="$root/.build/tools-venv"
  if [ ! -x "$venv/bin/openapi-spec-validator" ] || ! "$venv/bin/python" -c 'import jsonschema, yaml, selenium' 2>/dev/null; then
    say "creating $venv (openapi-spec-validator, jsonschema, PyYAML, selenium)"
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check openapi-spec-validator jsonschema PyYAML selenium
  fi
fi
say "dependencies present"
