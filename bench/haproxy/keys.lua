-- wrk: each request a random key of KEYS (env, default 1M), as X-Key (k<n>) and as X-Client
-- (an IPv6 address whose /56 is the key's own, so both limit KEYS distinct clients).
math.randomseed(42)
local keys = tonumber(os.getenv("KEYS") or "1000000")
request = function()
  local n = math.random(0, keys - 1)
  return wrk.format("GET", "/", {["X-Key"] = "k" .. n,
    ["X-Client"] = string.format("2001:db8:%x:%x00::%x", n % 65536, math.floor(n / 65536), n % 65536)})
end
