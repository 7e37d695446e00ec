local threads = {}
setup = function(thread) table.insert(threads, thread) end
init = function(args) codes = {} end
local n = 0
request = function()
  n = n + 1
  if n % 2 == 0 then
    return wrk.format("POST", "/upload", {["Content-Type"]="application/octet-stream"}, string.rep("x", 2000))
  end
  return wrk.format("GET", "/hello")
end
response = function(status, headers, body) codes[status] = (codes[status] or 0) + 1 end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("RESULT requests=%d non2xx=%d connect=%d read=%d write=%d timeout=%d\n",
    summary.requests, e.status, e.connect, e.read, e.write, e.timeout))
  local total = {}
  for _, t in ipairs(threads) do
    for k, v in pairs(t:get("codes")) do total[k] = (total[k] or 0) + v end
  end
  io.write("CODES")
  for k, v in pairs(total) do io.write(string.format(" %d=%d", k, v)) end
  io.write("\n")
end
