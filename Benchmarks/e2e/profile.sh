#!/usr/bin/env bash
# Where Baton's CPU goes on one path: `perf record -F 1999 -g` on `baton serve` while wrk loads
# it, then each matching function's share of the samples, inclusive (itself and what it calls).
# The profile shares quoted in docs/benchmarks.md are read this way.
#
#   Benchmarks/e2e/profile.sh [--path screen|command] [--match REGEX] [--view functions|jobs]
#                             [--seconds 7] [--connections 32] [--pool 8] [--baton PATH | --no-build]
#
# --match picks the functions listed (default: Baton's own modules and the Swift runtime's
# executor checks); the 25 most sampled leaf functions are listed first. perf must
# be installed (Debian: linux-perf) and allowed to attach (run as root, or lower
# kernel.perf_event_paranoid). perf makes thread switches dearer: compare shares, not µs.
#
# --view jobs lists instead, per thread group (the HTTP event loops, the database loops), the
# share of the samples taken in each kind of Swift job. Async code runs as jobs, one per stretch
# between suspension points; a job's stack starts at the executor, not at the function that
# awaited, so an async function's stretches do not add up in the inclusive shares above. Here
# each sample goes to the function its job entered (a stretch with everything it called).
# Samples outside jobs go to the event loop's own work they were found in: waiting in
# epoll_wait or poll, NIO handling a readable socket (the read, the HTTP parser, the inbound
# handlers), a flush. Stacks through libraries built without frame pointers (libpq, parts of
# libc) are not unwound, so the database loops' samples in libpq's socket calls land under
# "elsewhere".
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
path=screen; match='Baton|getPreferredTaskExecutor'; view=functions; seconds=7; connections=32; pool=8; port=8089
options="path match view seconds connections pool port" # read by common.sh
. "$here/common.sh"
command -v perf >/dev/null || { echo "perf is not installed (Debian: apt-get install linux-perf)" >&2; exit 1; }
case "$view" in functions | jobs) ;; *) echo "--view is functions or jobs" >&2; exit 2 ;; esac

start_baton "$pool"
LOG_LEVEL=warning "$baton" seed demo --data-dir "$data" >&2
case "$path" in
  screen)
    prepare_screen
    load=(-s "$here/screen.lua" "$screen_url")
    ;;
  command)
    # Fresh users, one command each (a repeat is a much cheaper replay): enough for the run.
    python3 "$here/mint_commands.py" --base "http://127.0.0.1:$port" --count $((seconds * 6000 + 12000)) --prefix profile \
      --secret "$BATON_JWT_HS256_SECRET" --out "$data/commands.txt" >/dev/null
    load=(-s "$here/command.lua" "http://127.0.0.1:$port" -- "$data/commands.txt" 1)
    ;;
  *) echo "--path is screen or command" >&2; exit 2 ;;
esac

# A second of load before the samples start, and a second after they end.
wrk -t1 -c"$connections" -d$((seconds + 2))s "${load[@]}" >"$data/wrk.out" 2>&1 &
load_pid=$!
sleep 1
perf record -q -F 1999 -g -p "$serve_pid" -o "$data/perf.data" -- sleep "$seconds" 2>/dev/null
wait "$load_pid"
grep -E 'Requests/sec|Non-2xx|Socket errors' "$data/wrk.out" || true
perf script -i "$data/perf.data" -F comm,ip,sym 2>/dev/null | python3 -c '
import collections, re, shutil, subprocess, sys
view, match = sys.argv[1], sys.argv[2]

def samples_in(lines):
    """(thread name, stack from the leaf up) for each sample of `perf script -F comm,ip,sym`."""
    comm, stack = None, None
    for line in lines:
        if not line.strip():
            if stack is not None: yield comm, stack
            stack = None
        elif not line[0].isspace(): comm, stack = line.strip(), []
        else:
            parts = line.split(None, 1)
            stack.append(re.sub(r"\+0x[0-9a-f]+$", "", parts[1].strip()) if len(parts) > 1 else "?")
    if stack is not None: yield comm, stack

def group(comm):
    if comm.startswith("NIO-"): return "HTTP event loops"
    if comm.startswith("baton-db-io"): return "database loops"
    return "other threads"

def place(stack):
    # In a job: the function swift_job_run called (past the runtime frames).
    for i, name in enumerate(stack):
        if name.startswith("swift_job_run"):
            j = i - 1
            while j >= 0 and re.match(r"swift::|swift_job_run", stack[j]): j -= 1
            return "job: " + (stack[j] if j >= 0 else "?")
    for name in stack:
        if "epoll_wait" in name: return "waiting in epoll_wait"
        if name == "__poll": return "waiting in poll"
        if "BaseSocketChannelC9readable" in name: return "NIO: a readable socket (read, HTTP parse, inbound handlers)"
        if "flushNow" in name: return "NIO: flush"
    return "elsewhere (stack not unwound, or outside the loops)"

samples = 0
if view == "jobs":
    groups = collections.defaultdict(collections.Counter)
    for comm, stack in samples_in(sys.stdin):
        samples += 1
        groups[group(comm)][place(stack)] += 1
    # Swift names demangled: the stretches of one async function then read as one name, and add up.
    names = sorted({where for places in groups.values() for where in places})
    tool = ["swift-demangle"] if shutil.which("swift-demangle") else ["swift", "demangle"] if shutil.which("swift") else None
    if tool:
        out = subprocess.run(tool + ["--simplified", "--compact"], input="\n".join(names) + "\n",
                             capture_output=True, text=True).stdout.splitlines()
        if len(out) == len(names):
            readable = dict(zip(names, out))
            for key in groups:
                merged = collections.Counter()
                for where, count in groups[key].items(): merged[readable[where]] += count
                groups[key] = merged
    print(f"{samples} samples; shares of all of them")
    for name, places in sorted(groups.items(), key=lambda g: -sum(g[1].values())):
        print(f"\n{name}: {100 * sum(places.values()) / samples:.1f} %")
        for where, count in places.most_common(30):
            if count * 1000 >= samples: print(f"{100 * count / samples:5.1f} %  {where[:150]}")
else:
    pattern = re.compile(match)
    leaf, inclusive = collections.Counter(), collections.Counter()
    for _, stack in samples_in(sys.stdin):
        samples += 1
        if stack: leaf[stack[0]] += 1
        for name in set(stack): inclusive[name] += 1
    print(f"{samples} samples\n\nleaf functions (self):")
    for name, count in leaf.most_common(25): print(f"{100 * count / samples:5.1f} %  {name[:150]}")
    print(f"\ninclusive, matching {match}:")
    for name, count in inclusive.most_common():
        if pattern.search(name) and count * 1000 >= samples: print(f"{100 * count / samples:5.1f} %  {name[:150]}")
' "$view" "$match"
