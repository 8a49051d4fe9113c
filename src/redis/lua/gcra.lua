-- ratelimit's GCRA script: one limit, nothing but GCRA, as cheap for Redis as a hand-written
-- GCRA (one GET, one SET ... PX, TIME only on server time) while exact: it answers what
-- src/core/bucket.c answers, at microsecond resolution.  The client (src/redis/redis.c) passes
-- the policy precomputed and derives remaining, retry_after and reset_after from the one
-- amount returned, so the script only decides and writes.  The leaky bucket (src/core/leaky.c)
-- runs this script too: its backlog is GCRA's used amount (tat - now), with
-- room = Q*unit - (need-1)*unit; the client derives its delay and its remaining from the reply.
--
-- Amounts are in scaled units: one unit of cost is `unit`, one microsecond is `scale`
-- (unit/scale = W/N exactly).  The state is the string "t" or "t:f" (f absent = 0): the
-- theoretical arrival time t*scale + f, with t in whole microseconds and 0 <= f < scale;
-- lib/40_bucket.lua (the multi-limit script) reads and writes the same format.
--
-- KEYS[1]  the limit's key
-- ARGV[1]  now in microseconds, or -1 for the server's clock (TIME)
-- ARGV[2]  the charge need*unit, or 0 for a peek (cost 0: nothing is written)
-- ARGV[3]  room = cap - need*unit (cap = burst*unit; leaky: Q*unit - (need-1)*unit): allowed
--          iff used <= room; -1 when the cost can never fit
-- ARGV[4]  scale
-- ARGV[5]  optional: the least expiry in ms (the ttl_floor option)
--
-- Reply: an integer, used + charge >= 0 when allowed, -(used + 1) when denied; or, when a
-- clock that stepped far back makes used = q*scale + f pass 2^53, the denial {q, f}.
--
-- Exactness: every number stays below 2^53 (the client refuses policies with cap or scale
-- above 2^50), so + - * are exact.  The two divisions are exact too: for integers a < 2^52 and
-- b > 0 the correctly rounded double a/b never crosses an integer (a/b = k + r/b lies at
-- least 1/b from k + 1, more than half an ulp of k because k*b <= a < 2^52), so floor and ceil
-- of it are the integer quotients.
local now = tonumber(ARGV[1])
if now < 0 then
  if redis.replicate_commands then redis.replicate_commands() end -- Redis < 7: TIME, then write
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2]
end
local room, scale = tonumber(ARGV[3]), tonumber(ARGV[4])
local used = 0
local v = redis.call('GET', KEYS[1])
if v then
  local q, f = tonumber(v), 0
  if q == nil then
    local c = string.find(v, ':', 1, true)
    q, f = tonumber(string.sub(v, 1, c - 1)), tonumber(string.sub(v, c + 1))
  end
  q = q - now
  if q >= 0 then -- else tat < (t+1)*scale <= now*scale: the bucket is full
    if q * scale > room then
      if q * scale >= 4503599627370496 then return {q, f} end -- 2^52: keep it as two numbers
      return -(q * scale + f) - 1
    end
    used = q * scale + f
  end
end
if used > room then return -used - 1 end
local charge = tonumber(ARGV[2])
if charge == 0 then return used end
local after = used + charge -- <= cap <= 2^50
local ms = math.ceil(after / (scale * 1000))
if ARGV[5] and ms < tonumber(ARGV[5]) then ms = tonumber(ARGV[5]) end
if scale == 1 then
  redis.call('SET', KEYS[1], string.format('%.0f', now + after), 'PX', ms)
else
  local k = math.floor(after / scale)
  redis.call('SET', KEYS[1], string.format('%.0f:%.0f', now + k, after - k * scale), 'PX', ms)
end
return after
