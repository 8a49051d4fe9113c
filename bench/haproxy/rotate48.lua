-- wrk: every request from a new random address inside 2001:db8:77::/48 (80 random bits).
math.randomseed(48)
request = function()
  local r = math.random
  return wrk.format("GET", "/", {["X-Client"] = string.format("2001:db8:77:%x:%x:%x:%x:%x",
    r(0, 65535), r(0, 65535), r(0, 65535), r(0, 65535), r(0, 65535))})
end
