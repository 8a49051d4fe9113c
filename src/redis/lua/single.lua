-- Entry of the one-algorithm scripts of sliding log and concurrency (the other algorithms have
-- cheaper scripts of their own, built like gcra.lua): the build
-- (embed_lua.cmake) puts lib/00_common.lua and the algorithm's lib file before this one and
-- defines `decide` (the algorithm's function) and ALGO (its number).  One limit, so none of
-- multi.lua's all-or-nothing machinery and none of the other algorithms' code runs.
-- KEYS[1]; ARGV: now (microseconds, or -1 for the server's clock), floor (least expiry, ms),
-- cost, N, W, B, Q, D, scale, unit.  Returns {allowed, limit, remaining, retry_us, retry_ns,
-- reset_us, reset_ns, delay_us, delay_ns, lease}; a key written gets PEXPIRE = reset_after
-- rounded up to the ms, at least 1 and at least floor (as multi.lua).
local now = tonumber(ARGV[1])
if now < 0 then
  if redis.replicate_commands then redis.replicate_commands() end -- Redis < 7: TIME, then write
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2]
end
local pr = {algo = ALGO, N = tonumber(ARGV[4]), W = tonumber(ARGV[5]), B = tonumber(ARGV[6]),
            Q = tonumber(ARGV[7]), D = tonumber(ARGV[8]), scale = tonumber(ARGV[9]),
            unit = tonumber(ARGV[10])}
local d = decide(KEYS[1], pr, now, tonumber(ARGV[3]))
if d.write then
  d.write()
  local us = d.su
  if d.sn > 0 then us = us + 1 end
  local ms = idivq(us + 999, 1000)
  local floor_ms = tonumber(ARGV[2])
  if ms < floor_ms then ms = floor_ms end
  if ms < 1 then ms = 1 end
  redis.call('PEXPIRE', KEYS[1], S(ms))
end
return {d.allowed and 1 or 0, d.limit, d.remaining, d.ru, d.rn, d.su, d.sn, d.du, d.dn, d.lease}
