#!/usr/bin/env bash
# Two builds compared in alternating runs of one benchmark script: on two shared cores a
# single run of each build differs by more than most levers move, and the machine drifts
# within minutes, so each pair runs both builds back to back and every other pair swaps
# their order (A B, B A, A B, …). Prints each run's table rows, labelled, as they finish.
#
#   Benchmarks/e2e/alternate.sh --a PATH --b PATH [--pairs 2] SCRIPT [SCRIPT'S OPTIONS…]
#
# SCRIPT is one of this directory's scripts that take --baton (command-vs-pgbench.sh,
# screen-vs-pgbench.sh, cpu-layers.sh, counts.sh, …); its options are passed on unchanged,
# with --baton set to each build in turn. Example, the command at 2 and 8 connections:
#
#   Benchmarks/e2e/alternate.sh --a /tmp/baton-before --b /tmp/baton-after --pairs 3 \
#     command-vs-pgbench.sh --connections "2 8" --seconds 10 --rounds 1 --max-rate 5000
#
# Rows are the script's table rows (lines starting with "|" but not the header or its rule),
# prefixed with the build's label and the pair's number; the first table header is printed
# once (a script with several tables: only its first header), and the script's other output is
# dropped. A run that fails says so with the end of its error output, its rows are marked
# FAILED, and alternate.sh exits 1 at the end. Compare the builds over all pairs, not one pair.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
a=""; b=""; pairs=2
while [ $# -gt 0 ]; do
  case "$1" in
    --a|--b|--pairs)
      [ $# -ge 2 ] || { echo "$1 needs a value" >&2; exit 2; }
      printf -v "${1#--}" '%s' "$2"; shift 2;;
    --*) echo "unknown option $1 (alternate.sh's own options come before the script)" >&2; exit 2;;
    *) break;;
  esac
done
[ $# -ge 1 ] || { echo "usage: alternate.sh --a PATH --b PATH [--pairs N] SCRIPT [OPTIONS…]" >&2; exit 2; }
script=$1; shift
[ -x "$here/$script" ] || { echo "no script $script in $here" >&2; exit 2; }
for build in "$a" "$b"; do
  [ -n "$build" ] && [ -x "$build" ] || { echo "--a and --b each need an executable Baton (got '$build')" >&2; exit 2; }
done
case "$pairs" in ''|*[!0-9]*) pairs=0;; esac
[ "$((10#$pairs))" -ge 1 ] || { echo "--pairs needs a whole number above 0" >&2; exit 2; }
for option in "$@"; do
  [ "$option" != --baton ] || { echo "--baton is set by alternate.sh (--a, --b); leave it out of the script's options" >&2; exit 2; }
done

# Runs the script once with one build; prints its table rows labelled "<label> <pair>", and
# the first run's table header (the line above each "|---" rule) once.
header_printed=0
failed=0
run() { # $1 label, $2 binary, $3 pair, then the script's options
  local label=$1 binary=$2 pair=$3 out errors
  shift 3
  errors=$(mktemp)
  if ! out=$("$here/$script" --baton "$binary" "$@" 2>"$errors"); then
    echo "$label $pair: $script failed; the end of its error output:"
    tail -5 "$errors" | sed 's/^/    /'
    label="$label FAILED"; failed=1
  fi
  rm -f "$errors"
  printf '%s\n' "$out" | awk -v label="$label" -v pair="$pair" -v header="$header_printed" -v script="$script" '
    /^\|/ { lines[++n] = $0 }
    END {
      if (n == 0) print label " " pair ": " script " printed no table"
      for (i = 1; i <= n; i++) {
        if (lines[i] ~ /^\|-/) continue
        if (i < n && lines[i + 1] ~ /^\|-/) { if (header == 0) { print "    " lines[i]; header = 1 }; continue }
        print label " " pair " " lines[i]
      }
    }'
  if grep -q '^|-' <<<"$out"; then header_printed=1; fi
}

echo "A = $a"
echo "B = $b"
for pair in $(seq 1 "$pairs"); do
  if [ $((pair % 2)) = 1 ]; then order="A B"; else order="B A"; fi
  for label in $order; do
    if [ "$label" = A ]; then binary=$a; else binary=$b; fi
    run "$label" "$binary" "$pair" "$@"
  done
done
[ "$failed" = 0 ] || { echo "at least one run failed (marked FAILED above)" >&2; exit 1; }
