#!/usr/bin/env python3
"""Ends a test pass that has stopped making progress, and says which tests were still running.

    stall-watch.py PARENT EVENTS SECONDS REPORT

scripts/test.sh starts this beside each `swift test` pass. PARENT is the script's process, and
EVENTS is the pass's Swift Testing event stream (`--event-stream-output-path`, version 0). If no
test starts or ends for SECONDS, the script prints the tests that started and have not ended,
with how long each has run, and writes the same to REPORT. It then ends the test binary that
PARENT started (and every process that binary started), so the pass fails at once instead of
waiting for CI's time limit.

A hung test does not end when its `.timeLimit` runs out: Swift Testing cancels it, and an await
that never resumes ignores the cancellation. The longest test takes under a minute, so the
default of 300 seconds without an event means the pass is hung, not slow.

This script ends on its own when PARENT is gone.
"""
import json
import os
import signal
import subprocess
import sys
import time


def processes():
    """Every process's (pid, parent pid, command line)."""
    out = subprocess.run(["ps", "-A", "-o", "pid=,ppid=,args="], capture_output=True, text=True).stdout
    rows = []
    for line in out.splitlines():
        fields = line.split(None, 2)
        if len(fields) >= 2 and fields[0].isdigit() and fields[1].isdigit():
            rows.append((int(fields[0]), int(fields[1]), fields[2] if len(fields) == 3 else ""))
    return rows


def test_binaries(parent):
    """The test binaries below `parent`, with every process below each of them."""
    rows = processes()
    children = {}
    for pid, ppid, _ in rows:
        children.setdefault(ppid, []).append(pid)

    def below(pid):
        found = []
        for child in children.get(pid, []):
            found.append(child)
            found.extend(below(child))
        return found

    # The binary itself on Linux; on macOS, swiftpm-testing-helper with the bundle's path.
    mine = set(below(parent)) - {os.getpid()}
    binaries = [pid for pid, _, args in rows if pid in mine and ".xctest" in args]
    return [pid for binary in binaries for pid in [binary] + below(binary)]


def main():
    parent, events, stall, report = int(sys.argv[1]), sys.argv[2], float(sys.argv[3]), sys.argv[4]
    # The stream lists every test (a function or a suite, with its display name) before its
    # events; test.sh creates the file before the pass starts.
    names = {}  # testID of a test function -> its name
    started = {}  # testID -> (name, when it started)
    stream = open(events, "rb")
    pending = b""
    last_progress = time.monotonic()
    while True:
        time.sleep(2)
        try:
            os.kill(parent, 0)
        except OSError:
            return
        chunk = stream.read()
        if chunk:
            last_progress = time.monotonic()
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                payload = record.get("payload", {})
                if record.get("kind") == "test" and payload.get("kind") == "function":
                    names[payload["id"]] = f'Test "{payload.get("displayName") or payload.get("name")}"'
                elif record.get("kind") == "event" and payload.get("testID") in names:
                    if payload.get("kind") == "testStarted":
                        started[payload["testID"]] = (names[payload["testID"]], time.monotonic())
                    elif payload.get("kind") == "testEnded":
                        started.pop(payload["testID"], None)
        if time.monotonic() - last_progress < stall:
            continue
        now = time.monotonic()
        lines = [f"---- no test started or ended for {stall:.0f} s: the pass is hung, and is stopped ----"]
        if started:
            lines.append("Still running:")
            for name, since in sorted(started.values(), key=lambda entry: entry[1]):
                lines.append(f"  {name} (for {now - since:.0f} s)")
        else:
            lines.append("No test was running: the test binary itself stopped making progress.")
        print("\n" + "\n".join(lines), flush=True)
        with open(report, "w") as out:
            out.write("\n".join(lines) + "\n")
        victims = test_binaries(parent)
        for signum in (signal.SIGTERM, signal.SIGKILL):
            for pid in victims:
                try:
                    os.kill(pid, signum)
                except OSError:
                    pass
            time.sleep(3)
        return


if __name__ == "__main__":
    main()
