-- ratelimit's fixed window script: one limit, nothing but the fixed window (mirrors
-- src/core/fixed_window.c at microsecond resolution), built like gcra.lua: one GET, one
-- SET ... PX, and a two-number reply the client (src/redis/redis.c) turns into the decision.
--
-- The state is the string "w:c": c units accepted in window w = [wW, (w+1)W).  A clock that
-- steps back into an earlier window keeps counting in the latest window seen, as in the core.
-- lib/10_fixed_window.lua (the multi-limit script) reads and writes the same format.
--
-- KEYS[1]  the limit's key
-- ARGV[1]  now in microseconds, or -1 for the server's clock (TIME)
-- ARGV[2]  N, ARGV[3]  W in microseconds, ARGV[4]  cost (0 = a peek: nothing is written)
-- ARGV[5]  optional: the least expiry in ms (the ttl_floor option)
-- ARGV[6]  optional: a calendar window's zone (lib/05_calendar.lua, put before this file by
--          embed_lua.cmake): w is then the calendar window's index and e runs to its real end
--
-- Reply: {a, e}: a = the count after the charge when allowed, -(count + 1) when denied; e =
-- microseconds from now to the end of the counting window.
--
-- Exactness: instants stay at or below 2^52 and W at or below 2^50, so (w+1)W < 2^53 and
-- floor(now / W) is the integer quotient (see gcra.lua).
local now = tonumber(ARGV[1])
if now < 0 then
  if redis.replicate_commands then redis.replicate_commands() end -- Redis < 7: TIME, then write
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2]
end
local N, W, cost = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local cal = ARGV[6] and cal_parse(ARGV[6]) or nil
local win, count, kend = 0, 0, nil
if cal then win, kend = cal_window(cal, now) else win = math.floor(now / W) end
local k = win
local v = redis.call('GET', KEYS[1])
if v then
  local c = string.find(v, ':', 1, true)
  local w, n = tonumber(string.sub(v, 1, c - 1)), tonumber(string.sub(v, c + 1))
  if n ~= 0 and w >= win then win, count = w, n end
end
local e = (win + 1) * W - now
if cal then e = (win == k and kend or cal_end(cal, win)) - now end
local need = cost > 0 and cost or 1
if need > N or count > N - need then return {-count - 1, e} end
if cost == 0 then return {count, e} end
local ms = math.ceil(e / 1000)
if ARGV[5] and ms < tonumber(ARGV[5]) then ms = tonumber(ARGV[5]) end
redis.call('SET', KEYS[1], string.format('%.0f:%.0f', win, count + cost), 'PX', ms)
return {count + cost, e}
