#!/usr/bin/env bash
# What a request makes Baton do, counted rather than timed: per request, the `malloc` calls,
# `swift_retain` and `swift_allocObject` calls (perf uprobes on libc and libswiftCore), the
# executor switches Swift concurrency checks (`swift_task_switch`) and the lookups of the task's
# executor preference that take its status lock (`getPreferredTaskExecutor` inside an executor
# preference, such as a lease on a database thread: about one per switch there), the system calls
# and the thread switches of `baton serve`, for requests that stop at successive depths (as
# cpu-layers.sh) and for the benchmarked command and screen:
#
#   healthz    the HTTP stack alone
#   refused    + bearer token, JSON body, payload signature (a tampered payload: 400)
#   probe      POST /diagnostics/probe/:id: two round trips, no token, no flow
#   command    favourite-add for a fresh user each time (as command-vs-pgbench.sh)
#   screen     the playlist screen (as screen-vs-pgbench.sh; held by the screen cache)
#
# CPU time on this machine moves by a factor of three to four between days (docs/benchmarks.md);
# these counts do not, so a lever that removes allocations, retains or system calls shows here
# even when the timings cannot resolve it. A uprobe costs a few microseconds per hit, so the
# server runs several times slower while counted: read the counts, not the rates.
#
#   Benchmarks/e2e/counts.sh [--seconds 4] [--connections 8] [--pool 2] [--layers "healthz refused probe command screen"]
#                            [--baton PATH | --no-build]
#
# Needs perf with uprobes (Debian: linux-perf; as root): the probes are added on the first run
# and left in place (`perf probe -d 'probe_libc:*' -d 'probe_libswiftCore:*' -d
# 'probe_libswift_Concurrency:*'` removes them). The locked lookup is a C++ function of the
# runtime's (the status lock's callback in `getPreferredTaskExecutor`), found by its symbol in
# libswift_Concurrency.so's symbol table.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
seconds=4; connections=8; pool=2; port=8093; layers="healthz refused probe command screen"
options="seconds connections pool port layers" # read by common.sh
. "$here/common.sh"
[[ "$seconds" =~ ^[0-9]+$ ]] || { echo "--seconds takes whole seconds" >&2; exit 2; }
command -v perf >/dev/null || { echo "perf is not installed (Debian: apt-get install linux-perf)" >&2; exit 1; }

# The uprobes, on the libraries this binary loads.
libc=$(ldd "$baton" | awk '$1 ~ /^libc\.so/ {print $3}')  # not libswiftGlibc.so
swiftcore=$(ldd "$baton" | awk '$1 ~ /^libswiftCore\.so/ {print $3}')
concurrency=$(ldd "$baton" | awk '$1 ~ /^libswift_Concurrency\.so/ {print $3}')
[ -n "$libc" ] && [ -n "$swiftcore" ] && [ -n "$concurrency" ] || { echo "ldd $baton names no libc, libswiftCore or libswift_Concurrency" >&2; exit 1; }
add_probe() { # $1 event name, $2 library, $3 function
  grep -q "$1 " <<<"$(perf probe -l 2>/dev/null)" || perf probe -q -x "$2" "$3" >/dev/null 2>&1 \
    || { echo "perf probe -x $2 $3 failed (root? uprobes?)" >&2; exit 1; }
}
add_probe probe_libc:malloc "$libc" malloc
add_probe probe_libswiftCore:swift_retain "$swiftcore" swift_retain
add_probe probe_libswiftCore:swift_allocObject "$swiftcore" swift_allocObject
add_probe probe_libswift_Concurrency:swift_task_switch "$concurrency" swift_task_switch
# By address: placed again on every run, so a probe left from another toolchain's library is
# not reused at an address that means something else now.
command -v nm >/dev/null || { echo "nm is not installed (Debian: binutils)" >&2; exit 1; }
lookups=$(nm "$concurrency" | awk '$3 ~ /withStatusRecordLock.*getPreferredTaskExecutor/ {print "0x" $1}')
[ "$(wc -w <<<"$lookups")" -eq 1 ] || { echo "expected one getPreferredTaskExecutor status-lock callback in $concurrency, found: ${lookups:-none}" >&2; exit 1; }
perf probe -q -d probe_libswift_Concurrency:locked_preference >/dev/null 2>&1 || true
add_probe probe_libswift_Concurrency:locked_preference "$concurrency" "locked_preference=$lookups"
events=probe_libc:malloc,probe_libswiftCore:swift_retain,probe_libswiftCore:swift_allocObject,probe_libswift_Concurrency:swift_task_switch,probe_libswift_Concurrency:locked_preference,raw_syscalls:sys_enter,context-switches

start_baton "$pool"
LOG_LEVEL=warning "$baton" seed demo --data-dir "$data" >&2
seed_probe_subjects
prepare_screen >&2
# Fresh users, one command each: at most a few hundred a second are answered while counted.
python3 "$here/mint_commands.py" --base "http://127.0.0.1:$port" --count $((seconds * 1500 + 500)) --prefix counts \
  --secret "$BATON_JWT_HS256_SECRET" --out "$data/commands.txt" >/dev/null
read -r token payload <"$data/commands.txt"

layer_script healthz GET "" /healthz
layer_script refused POST "{\"payload\":\"x${payload:1}\"}" /v3/command
layer_script probe POST "" /diagnostics/probe/%d

echo "| request | requests counted | malloc/request | swift_retain/request | swift_allocObject/request | swift_task_switch/request | locked preference lookups/request | system calls/request | thread switches/request |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for layer in $layers; do
  case "$layer" in
    command) load=(-s "$here/command.lua" "http://127.0.0.1:$port" -- "$data/commands.txt" 2);;
    screen) load=(-s "$here/screen.lua" "$screen_url");;
    healthz|refused|probe) load=(-s "$data/$layer.lua" "http://127.0.0.1:$port");;
    *) echo "unknown layer $layer" >&2; exit 2;;
  esac
  wrk -t1 -c"$connections" -d1s -s "$data/probe.lua" "http://127.0.0.1:$port" >/dev/null # settle
  perf stat -x, -e "$events" -p "$serve_pid" -o "$data/stat.$layer" -- \
    wrk -t1 -c"$connections" -d"${seconds}s" "${load[@]}" >"$data/wrk.$layer" 2>&1
  requests=$(awk '/requests in/ {print $1}' "$data/wrk.$layer")
  [ "${requests:-0}" -gt 0 ] || { echo "wrk got no answers for $layer:" >&2; cat "$data/wrk.$layer" >&2; exit 1; }
  # Only the refused command is meant to fail (400). A command answered as a replay (the minted
  # ones ran out) is a 200 that command.lua reports as an unexpected answer.
  if [ "$layer" != refused ] && grep -qE 'Non-2xx|Socket errors|unexpected answer' "$data/wrk.$layer"; then
    echo "$layer: answers other than 2xx:" >&2; cat "$data/wrk.$layer" >&2; exit 1
  fi
  awk -F, -v layer="$layer" -v n="$requests" '
    /probe_libc:malloc|swift_retain|swift_allocObject|swift_task_switch|locked_preference|sys_enter|context-switches/ && $1 !~ /^[0-9]+$/ {
      print "perf did not count " $3 ": " $1 > "/dev/stderr"; bad = 1 }
    /probe_libc:malloc/ {m = $1} /swift_retain/ {r = $1} /swift_allocObject/ {a = $1}
    /swift_task_switch/ {w = $1} /locked_preference/ {p = $1}
    /sys_enter/ {s = $1} /context-switches/ {c = $1}
    END {
      if (bad) exit 1
      printf "| %s | %d | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.2f |\n", layer, n, m / n, r / n, a / n, w / n, p / n, s / n, c / n}' "$data/stat.$layer"
done
