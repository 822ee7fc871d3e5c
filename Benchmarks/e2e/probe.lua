wrk.method = "POST"
math.randomseed(os.time())
request = function()
  return wrk.format(nil, "/diagnostics/probe/" .. math.random(1, 1000))
end
