#!/usr/bin/env python3
"""Baton's added latency per service call, beside the downstream's own latency, in one run.

Starts a small downstream tracking API (Python, on loopback, answering after --delay-ms) and
`baton serve` pointed at it (BATON_SERVICE_TRACKING_URL, embedded PostgreSQL), then, one
request at a time over keep-alive connections:

  1. calls the downstream directly (its latency as a client sees it);
  2. runs track-parcel's lookup command through Baton: the step is recorded as calling
     (transaction 1), the GET is made, its result applied (transaction 2), the status screen
     answered.

It prints p50/p99 of both, the difference (what Baton adds to a command that calls a
service: two short transactions, the HTTP client, JSON, fitting), Baton's own view of the call
(baton_service_call_duration_seconds, from /metrics) beside the downstream's service time,
and Baton's CPU per command (from /proc/<pid>/stat).

    Benchmarks/e2e/service-call-latency.py --baton .build/release/baton --requests 500

KEEP=1 keeps the data directory with Baton's log (baton.log); LOG_LEVEL sets its level.
"""
import argparse
import http.client
import json
import os
import shutil
import socket
import statistics
import subprocess
import tempfile
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Downstream(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Head and body are separate writes: without this, Nagle and delayed ACKs add 40 ms.
    disable_nagle_algorithm = True
    delay = 0.0
    service_times = []

    def do_GET(self):
        started = time.perf_counter()
        if self.delay:
            time.sleep(self.delay)
        code = self.path.rsplit("/", 1)[-1]
        body = json.dumps({"code": code, "status": "On its way", "eta": "2026-11-25",
                           "lastScan": {"at": "2026-11-23T08:12:00Z", "place": "Utrecht"}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        Downstream.service_times.append(time.perf_counter() - started)

    def log_message(self, *args):
        pass

    def send_error(self, code, message=None, explain=None):
        print(f"downstream: {code} for {self.raw_requestline[:80]!r}")
        super().send_error(code, message, explain)


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baton", default=".build/release/baton")
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--delay-ms", type=float, default=0.0, help="the downstream's own service time")
    args = parser.parse_args()

    Downstream.delay = args.delay_ms / 1000
    downstream_port = free_port()
    server = ThreadingHTTPServer(("127.0.0.1", downstream_port), Downstream)
    threading.Thread(target=server.serve_forever, daemon=True).start()

    data = tempfile.mkdtemp(prefix="baton-bench-")
    os.chmod(data, 0o755)  # the embedded cluster runs as the postgres account
    port = free_port()
    # The development secrets of scripts/run.sh: `baton token` mints with the same one.
    env = dict(os.environ, BATON_SERVICE_TRACKING_URL=f"http://127.0.0.1:{downstream_port}", LOG_LEVEL=os.environ.get("LOG_LEVEL", "warning"),
               BATON_JWT_HS256_SECRET="development-jwt-secret-not-for-production",
               BATON_SIGNING_KEYS="dev:ZGV2ZWxvcG1lbnQtc2lnbmluZy1rZXktbm90LWZvci1wcm9kdWN0aW9u")
    env.pop("DATABASE_URL", None)
    baton = subprocess.Popen([args.baton, "serve", "--port", str(port), "--data-dir", data],
                             env=env, stdout=open(os.path.join(data, "baton.log"), "w") if os.environ.get("KEEP") else subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        for _ in range(600):
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                c.request("GET", "/readyz")
                if c.getresponse().status == 200:
                    break
            except OSError:
                pass
            time.sleep(0.2)
        else:
            raise SystemExit("baton did not become ready")
        token = subprocess.run([args.baton, "token", "bench"], capture_output=True, text=True, check=True, env=env).stdout.strip()
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json", "X-Client-Platform": "ios"}
        api = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        direct = http.client.HTTPConnection("127.0.0.1", downstream_port, timeout=30)

        def call(method, path, body=None):
            api.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
            response = api.getresponse()
            payload = response.read()
            if response.status != 200:
                raise SystemExit(f"{method} {path}: {response.status} {payload[:200]!r}")
            return json.loads(payload)

        def action(answer, title):
            def walk(node):
                if isinstance(node, dict):
                    if node.get("title") == title and isinstance(node.get("action"), dict) and "payload" in node["action"]:
                        return node["action"]["payload"]
                    if title in ("submit", "cancel") and isinstance(node.get(title), dict):
                        return node[title].get("payload")
                    for value in node.values():
                        found = walk(value)
                        if found:
                            return found
                elif isinstance(node, list):
                    for value in node:
                        found = walk(value)
                        if found:
                            return found
                return None
            return walk(answer)

        home = call("GET", "/v3/screens/home")
        start = action(home, "Track a parcel")
        through, straight = [], []
        warmup = min(50, args.requests // 5)
        cpu_before = None
        for i in range(args.requests + warmup):
            if i == warmup:
                cpu_before = cpu_seconds(baton.pid)
                Downstream.service_times.clear()
            code = f"3SBENCH{i:06d}"
            # The downstream alone.
            t0 = time.perf_counter()
            direct.request("GET", f"/v1/parcels/{code}")
            direct.getresponse().read()
            t1 = time.perf_counter()
            # A fresh session, then the lookup command that calls the downstream.
            home = call("GET", "/v3/screens/home")
            ask = call("POST", "/v3/command", {"payload": action(home, "Track a parcel")})
            t2 = time.perf_counter()
            status = call("POST", "/v3/command", {"payload": action(ask, "submit"), "input": {"text": code}})
            t3 = time.perf_counter()
            if status.get("type") != "screen":
                raise SystemExit(f"unexpected answer {status}")
            if i >= warmup:
                straight.append(t1 - t0)
                through.append(t3 - t2)
        cpu = cpu_seconds(baton.pid) - cpu_before
        # The same sessions without the lookup: what the home screen and the start command cost.
        control_before = cpu_seconds(baton.pid)
        for i in range(args.requests):
            home = call("GET", "/v3/screens/home")
            call("POST", "/v3/command", {"payload": action(home, "Track a parcel")})
        control = cpu_seconds(baton.pid) - control_before
        metrics = http.client.HTTPConnection("127.0.0.1", port)
        metrics.request("GET", "/metrics")
        text = metrics.getresponse().read().decode()
        count = total = 0.0
        for line in text.splitlines():
            if line.startswith('baton_service_call_duration_seconds_sum{service="tracking"}'):
                total = float(line.split()[-1])
            if line.startswith('baton_service_call_duration_seconds_count{service="tracking"}'):
                count = float(line.split()[-1])

        ms = lambda v: f"{v * 1000:.2f} ms"
        n = len(through)
        print(f"requests: {n} sequential (after {warmup} warm-up), downstream delay {args.delay_ms} ms")
        print("| | p50 | p99 |")
        print("|---|---:|---:|")
        print(f"| downstream alone (client view) | {ms(statistics.median(straight))} | {ms(percentile(straight, 99))} |")
        print(f"| lookup command through Baton | {ms(statistics.median(through))} | {ms(percentile(through, 99))} |")
        added = [b - a for a, b in zip(straight, through)]
        print(f"| added by Baton (command − downstream) | {ms(statistics.median(added))} | {ms(percentile(added, 99))} |")
        print(f"downstream service time p50: {ms(statistics.median(Downstream.service_times))}")
        if count:
            print(f"Baton's view of the call (baton_service_call_duration_seconds mean, warm-up included): {ms(total / count)}")
        print(f"Baton CPU per session (home screen, start command, lookup command): {cpu / n * 1e6:.0f} µs")
        print(f"Baton CPU per session without the lookup (home screen, start command): {control / n * 1e6:.0f} µs")
        print(f"Baton CPU of the lookup command (the difference): {(cpu - control) / n * 1e6:.0f} µs")
    finally:
        baton.terminate()
        try:
            baton.wait(timeout=60)
        except subprocess.TimeoutExpired:
            baton.kill()
        server.shutdown()
        if not os.environ.get("KEEP"):
            shutil.rmtree(data, ignore_errors=True)
        else:
            print(f"kept {data}")


if __name__ == "__main__":
    main()
