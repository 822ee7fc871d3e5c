-- GETs one screen as one user, the same request every time (wrk sends it without calling Lua
-- per request). The screen is the URL's path; the bearer token comes from the environment:
--   BATON_BENCH_TOKEN=… wrk -t1 ... -s screen.lua "http://127.0.0.1:PORT/v3/screens/playlist?id=…"
-- wrk counts answers other than 2xx/3xx itself ("Non-2xx or 3xx responses"); the script
-- running wrk fails on them.
wrk.headers["Authorization"] = "Bearer " .. assert(os.getenv("BATON_BENCH_TOKEN"), "BATON_BENCH_TOKEN is not set")
wrk.headers["X-Client-Platform"] = "ios"

-- Latency percentiles for the script that runs wrk (common.sh reads this line).
function done(summary, latency, requests)
  io.write(string.format("latency_us p50 %d p99 %d\n", latency:percentile(50), latency:percentile(99)))
end
