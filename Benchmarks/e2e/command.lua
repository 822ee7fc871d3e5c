-- POSTs each prepared first-time command once: favourite-add for a fresh user per request.
--   wrk -t1 ... -s command.lua URL -- <file of "token payload" lines> <first line, 1-based>
local commands = {}
local next_index = 1

function init(args)
  for line in io.lines(args[1]) do
    local token, payload = line:match("^(%S+) (%S+)$")
    commands[#commands + 1] = { token = token, payload = payload }
  end
  next_index = tonumber(args[2] or "1")
end

function request()
  local command = commands[next_index]
  if command == nil then
    -- Out of fresh commands: the script sizes the file so this does not happen.
    command = commands[#commands]
  end
  next_index = next_index + 1
  return wrk.format("POST", "/v3/command", {
    ["Authorization"] = "Bearer " .. command.token,
    ["Content-Type"] = "application/json",
    ["X-Client-Platform"] = "ios",
  }, '{"payload":"' .. command.payload .. '"}')
end

function response(status, headers, body)
  if status ~= 200 or headers["Idempotent-Replay"] ~= nil then
    io.stderr:write("unexpected answer " .. status .. ": " .. body .. "\n")
  end
end

-- Latency percentiles for the script that runs wrk (common.sh reads this line).
function done(summary, latency, requests)
  io.write(string.format("latency_us p50 %d p99 %d\n", latency:percentile(50), latency:percentile(99)))
end
