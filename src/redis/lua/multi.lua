-- The entry point.  KEYS: one per limit, all distinct.  ARGV:
--   'd', now, floor, n, then per limit: algo cost N W B Q D scale unit cal (cal: a calendar
--                                        window's zone, lib/05_calendar.lua, or "")
--                                                       (decide, all-or-nothing)
--   'b', now, floor, n, then per limit the same 10 fields and blk fac max (block=, in us;
--        blk 0: none), with KEYS 2n: the limits' keys, then their penalty boxes' companion
--        keys (lib/60_block.lua)          (decide, all-or-nothing, with penalty boxes: the
--        limits that deny start their blocks, the others are charged nothing)
--   'r', now, lease                                                  (concurrency release)
-- now is in microseconds, or -1 for the server's clock (TIME).  A decide returns, per limit,
-- {allowed, limit, remaining, retry_us, retry_ns, reset_us, reset_ns, delay_us, delay_ns,
-- lease}; every key written gets PEXPIRE = its reset_after rounded up to the ms, at least 1
-- and at least `floor` ms (an option for replays whose clock runs slower than real time).
if redis.replicate_commands then redis.replicate_commands() end

local algos = {fixed_window, sliding_log, sliding_window, bucket, bucket, leaky_bucket,
               concurrency}

local now = tonumber(ARGV[2])
if now == nil or now < 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end

if ARGV[1] == 'r' then
  return concurrency_release(KEYS[1], now, tonumber(ARGV[3]))
end
local boxed = ARGV[1] == 'b'
if ARGV[1] ~= 'd' and not boxed then return redis.error_reply('ERR rlt: unknown operation') end

local floor_ms = tonumber(ARGV[3]) or 0
local n = tonumber(ARGV[4])
local stride, nkeys = 10, n
if boxed then stride, nkeys = 13, 2 * (n or 0) end
if n == nil or n < 1 or #KEYS ~= nkeys or #ARGV ~= 4 + stride * n then
  return redis.error_reply('ERR rlt: bad arguments')
end

-- The limit's decision: its algorithm, under its penalty box if it has one.
local function limit_decide(i, pr, cost)
  local f = algos[pr.algo]
  if not boxed then return f(KEYS[i], pr, now, cost) end
  local b = 4 + (i - 1) * 13
  local pb = {b = tonumber(ARGV[b + 11]), f = tonumber(ARGV[b + 12]), m = tonumber(ARGV[b + 13])}
  if pb.b == nil or pb.b <= 0 then return f(KEYS[i], pr, now, cost) end
  return blk_decide(f, KEYS[i], KEYS[n + i], pr, pb, now, cost, floor_ms)
end

local function params(i)
  local b = 4 + (i - 1) * stride
  local pr = {algo = tonumber(ARGV[b + 1]), N = tonumber(ARGV[b + 3]), W = tonumber(ARGV[b + 4]),
              B = tonumber(ARGV[b + 5]), Q = tonumber(ARGV[b + 6]), D = tonumber(ARGV[b + 7]),
              scale = tonumber(ARGV[b + 8]), unit = tonumber(ARGV[b + 9])}
  if ARGV[b + 10] ~= '' then pr.cal = cal_parse(ARGV[b + 10]) end
  return pr, tonumber(ARGV[b + 2])
end

local decs, all = {}, true
for i = 1, n do
  local pr, cost = params(i)
  local f = algos[pr.algo]
  if f == nil or cost == nil or cost < 0 then return redis.error_reply('ERR rlt: bad limit') end
  decs[i] = limit_decide(i, pr, cost)
  if not decs[i].allowed then all = false end
end
if not all then
  -- Nothing is consumed: the limits that would have allowed report as they stand (a peek),
  -- as rlt_store_decide_multi does.
  for i = 1, n do
    if decs[i].allowed then
      local pr = params(i)
      local peek = limit_decide(i, pr, 0)
      decs[i].remaining, decs[i].su, decs[i].sn = peek.remaining, peek.su, peek.sn
      decs[i].ru, decs[i].rn = 0, 0
    end
  end
end
local out = {}
for i = 1, n do
  local d = decs[i]
  if d.bwrite then d.bwrite() end -- only a denial breaches: it stands with or without `all`
  if all and d.write then
    d.write()
    local us = d.su
    if d.sn > 0 then us = us + 1 end
    local ms = idivq(us + 999, 1000)
    if ms < floor_ms then ms = floor_ms end
    if ms < 1 then ms = 1 end
    redis.call('PEXPIRE', KEYS[i], S(ms))
  end
  out[i] = {d.allowed and 1 or 0, d.limit, d.remaining, d.ru, d.rn, d.su, d.sn, d.du, d.dn,
            d.lease}
end
return out
