-- wrk: each request a random key of KEYS (env, default 1M), as X-Key (k<n>) and as X-Client
-- (an IPv6 address whose /56 is the key's own, so both limit KEYS distinct clients), and as
-- X-Long (a plain key of the address key's length).
math.randomseed(42)
local keys = tonumber(os.getenv("KEYS") or "1000000")
request = function()
  local n = math.random(0, keys - 1)
  return wrk.format("GET", "/", {["X-Key"] = "k" .. n,
    ["X-Client"] = string.format("2001:db8:%x:%x00::%x", n % 65536, math.floor(n / 65536), n % 65536),
    -- a plain key as long as the address's key (2001:db8:X:Y00::/56): what a longer key costs
    ["X-Long"] = string.format("2001-db8-%x-%x00--/56", n % 65536, math.floor(n / 65536))})
end
