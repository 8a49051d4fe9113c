-- ratelimit's token bucket script: one limit, nothing but the token bucket (mirrors
-- src/core/bucket.c at microsecond resolution), built like gcra.lua: one GET, one SET ... PX,
-- and a reply the client (src/redis/redis.c) turns into the decision.
--
-- Amounts are in scaled units (one unit of cost is `unit`, one microsecond of refill is
-- `scale`).  The state is the string "u:l": u the used amount (0..cap), l the latest instant
-- (whole microseconds) that charged the bucket; no key = never charged.  A clock that stepped
-- back behind l refills only from l on, and the decision's waits grow by l - now (`wait`), as
-- in the core.  lib/40_bucket.lua (the multi-limit script) reads and writes the same format.
--
-- KEYS[1]  the limit's key
-- ARGV[1]  now in microseconds, or -1 for the server's clock (TIME)
-- ARGV[2]  the charge need*unit, or 0 for a peek (cost 0: nothing is written)
-- ARGV[3]  room = cap - need*unit: allowed iff used <= room; -1 when the cost never fits
-- ARGV[4]  scale
-- ARGV[5]  optional: the least expiry in ms (the ttl_floor option)
--
-- Reply: with wait = 0 an integer, used + charge >= 0 when allowed, -(used + 1) when denied;
-- else {allowed (0/1), used + charge or used, wait in microseconds}.
--
-- Exactness: amounts stay at or below cap <= 2^50 and instants below 2^53; a product
-- elapsed*scale that rounds is only compared with an exact used < 2^51, and rounding is
-- monotonic, so the comparison is exact; divisions are of integers below 2^52 (see gcra.lua).
local now = tonumber(ARGV[1])
if now < 0 then
  if redis.replicate_commands then redis.replicate_commands() end -- Redis < 7: TIME, then write
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2]
end
local room, scale = tonumber(ARGV[3]), tonumber(ARGV[4])
local used, last, wait = 0, now, 0
local v = redis.call('GET', KEYS[1])
if v then
  local c = string.find(v, ':', 1, true)
  used, last = tonumber(string.sub(v, 1, c - 1)), tonumber(string.sub(v, c + 1))
  if used > 0 then
    local elapsed = now - last
    if elapsed < 0 then
      wait = -elapsed
    elseif elapsed * scale >= used then
      used = 0
    else
      used = used - elapsed * scale
    end
  end
end
local charge = tonumber(ARGV[2])
if used > room or charge == 0 then
  local a = used
  if used > room then a = -used - 1 end
  if wait == 0 then return a end
  return {used <= room and 1 or 0, used, wait}
end
local after = used + charge -- <= cap <= 2^50
if now > last then last = now end
-- PX = (reset_after = after/scale us + wait) rounded up to the ms, split so nothing passes 2^52
local wk = math.floor(wait / 1000)
local ms = wk + math.ceil((after + (wait - wk * 1000) * scale) / (scale * 1000))
if ARGV[5] and ms < tonumber(ARGV[5]) then ms = tonumber(ARGV[5]) end
redis.call('SET', KEYS[1], string.format('%.0f:%.0f', after, last), 'PX', ms)
if wait == 0 then return after end
return {1, after, wait}
