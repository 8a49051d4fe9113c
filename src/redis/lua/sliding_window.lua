-- ratelimit's sliding window counter script: one limit, nothing but the sliding window counter
-- (mirrors src/core/sliding_window.c at microsecond resolution), built like gcra.lua: one GET,
-- one SET ... PX, and a three-number reply the client (src/redis/redis.c) turns into the
-- decision (remaining, the exact earliest retry, reset_after), so the script only decides and
-- writes.
--
-- The state is the string "w:p:c": p units accepted in window w - 1, c in window w, where
-- window w = [wW, (w+1)W).  A clock that steps back into an earlier window keeps counting in
-- the latest window seen, as in the core.  lib/30_sliding_window.lua (the multi-limit script)
-- reads and writes the same format.
--
-- KEYS[1]  the limit's key
-- ARGV[1]  now in microseconds, or -1 for the server's clock (TIME)
-- ARGV[2]  N, ARGV[3]  W in microseconds, ARGV[4]  cost (0 = a peek: nothing is written)
-- ARGV[5]  optional: the least expiry in ms (the ttl_floor option)
--
-- Reply: {c, p, x}: c = the current window's count after the charge when allowed, -(count + 1)
-- when denied; p = the previous window's count; x = microseconds from now to the end of the
-- current window (x > W when the clock stepped back behind the window).
--
-- Exactness: instants stay at or below 2^52, W at or below 2^50 and N x W at or below 2^50
-- (the client refuses more), so every product and sum below stays under 2^53 and
-- floor(now / W) is the integer quotient (see gcra.lua).  A settle's debt (settle.lua) can
-- leave counts up to 2^52: prev x (W - e) is then compared through the quotient
-- floor(s / (W - e)) instead of being formed, and curr + need > N needs no product.
local now = tonumber(ARGV[1])
if now < 0 then
  if redis.replicate_commands then redis.replicate_commands() end -- Redis < 7: TIME, then write
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2]
end
local N, W, cost = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local win = math.floor(now / W)
local prev, curr = 0, 0
local v = redis.call('GET', KEYS[1])
if v then
  local a = string.find(v, ':', 1, true)
  local b = string.find(v, ':', a + 1, true)
  local w, p, c = tonumber(string.sub(v, 1, a - 1)), tonumber(string.sub(v, a + 1, b - 1)),
                  tonumber(string.sub(v, b + 1))
  if p ~= 0 or c ~= 0 then
    if win == w + 1 then
      prev = c
    elseif win <= w then
      win, prev, curr = w, p, c
    end
  end
end
local x = (win + 1) * W - now
local e = 0 -- the elapsed part of the window; 0 when the clock stepped back behind it
if x <= W then e = W - x end
local need = cost > 0 and cost or 1
local fits = need <= N and curr + need <= N
if fits then -- prev x (W - e) <= s, with s = (N - curr - need) x W <= N x W
  local s, w = (N - curr - need) * W, W - e
  local q = math.floor(s / w)
  if q * w > s then q = q - 1 elseif (q + 1) * w <= s then q = q + 1 end
  fits = prev <= q
end
if not fits then return {-curr - 1, prev, x} end
if cost == 0 then return {curr, prev, x} end
local ms = math.ceil((x + W) / 1000) -- reset_after: the end of the next window
if ARGV[5] and ms < tonumber(ARGV[5]) then ms = tonumber(ARGV[5]) end
redis.call('SET', KEYS[1], string.format('%.0f:%.0f:%.0f', win, prev, curr + cost), 'PX', ms)
return {curr + cost, prev, x}
