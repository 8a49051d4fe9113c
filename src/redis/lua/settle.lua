-- Charge after the response in Redis: reserve and settle (mirrors src/core/settle.c, whose
-- header has the maths and the proof that a settle never mints).  The build (embed_lua.cmake)
-- puts every lib/*.lua before this file, so each algorithm's decision function and the
-- helpers of lib/00_common.lua are in scope; this file only adds the settle of each
-- algorithm that can settle and the entry point.  It reads and writes the limits' own values
-- (the formats of lib/10_fixed_window.lua ... lib/40_bucket.lua), so a reservation's key is
-- decided on by every other script and by the module alike.
--
-- A reservation is its own key, KEYS[2] = the limit's key name + ":r:" + 16 hex digits (so it
-- shares the limit's hash tag, hence its Cluster slot), holding "reserved_at:estimate"
-- (microseconds, units) with PEXPIRE = the reservation's timeout: an unsettled reservation
-- simply expires and stays charged as estimated.
--
-- KEYS: the limit's key, the reservation's key.  ARGV:
--   'v', now, floor, algo, estimate, N, W, B, Q, D, scale, unit, cal, timeout_ms   (reserve)
--   's', now, floor, algo, real,     N, W, B, Q, D, scale, unit, cal               (settle)
--   'mv' / 'ms': one reservation over several limits (lua/budget.lua, run before this file)
-- now is in microseconds, or -1 for the server's clock (TIME).  Reserve returns the decision
-- {allowed, limit, remaining, retry_us, retry_ns, reset_us, reset_ns, delay_us, delay_ns,
-- lease} (multi.lua's form) and, when allowed, creates the reservation (or returns -1 if that
-- key exists: nothing charged).  Settle returns 0 when the reservation is not there (never
-- made, settled, expired), else the decision of a peek (cost 0) after the settle.
--
-- Debt saturates, as rlt_settle's does at int64, where these numbers stop being exact: a
-- window's count at SAT = 2^52, a bucket's debt at TAT_MAX = 2^53 - 2^50 us (year 2255, past
-- every instant the scripts take, 2^52 us): a GCRA's tat in (q, f) form (as lib/40_bucket.lua
-- reads it), a token bucket's used amount at most SAT with its `last` ahead of now for the
-- rest (refill waits for it, as behind a clock that stepped back).  A real cost of any size
-- (the client sends at most 2^53 - 1) is charged as far as it fits and the key keeps
-- denying: a count of 2^52 is above every N (<= 2^50) even after the refunds of every
-- outstanding reservation; a saturated bucket until TAT_MAX.  Every number stays below 2^53:
-- the additions below are guarded, never formed past the bound.
if redis.replicate_commands then redis.replicate_commands() end

local SAT = 4503599627370496 -- 2^52
local TAT_MAX = 7881299347898368 -- 2^53 - 2^50

-- a + b saturated at SAT, for 0 <= a (a state never holds more than SAT) and 0 <= b < 2^53.
local function sat_add(a, b)
  if a >= SAT or b >= SAT - a then return SAT end
  return a + b
end

local function smin(a, b)
  if a < b then return a end
  return b
end

-- Fixed window: an extra charge counts in now's window (past N: a debt until its end); a
-- refund only while now is in the reservation's window, never more than it counts.
local function fixed_window_settle(key, pr, now, rat, est, real)
  local win, count = fw_load(key, pr, now)
  local kr
  if real > est then
    count = sat_add(count, real - est) -- still above N: denied to the window's end
  else
    if pr.cal then kr = cal_window(pr.cal, rat) else kr = idivq(rat, pr.W) end
    if win == kr then count = count - smin(est - real, count) end
  end
  return function() redis.call('SET', key, S(win) .. ':' .. S(count)) end
end

-- Sliding window counter: an extra charge counts in the current window; a refund comes off
-- the reservation's window while it is the current or the previous one.
local function sliding_window_settle(key, pr, now, rat, est, real)
  local win, prev, curr = sw_load(key, pr, now)
  local W = pr.W
  if real > est then
    curr = sat_add(curr, real - est) -- lib/30's products are guarded past 2^53
  else
    local back, kr = est - real, idivq(rat, W)
    if win == kr then
      curr = curr - smin(back, curr)
    elseif win == kr + 1 then
      prev = prev - smin(back, prev)
    end
  end
  return function() redis.call('SET', key, S(win) .. ':' .. S(prev) .. ':' .. S(curr)) end
end

-- Sliding log: a refund removes up to k of the newest live units stamped <= reserved_at; an
-- extra charge records min(x, N) units at max(now, newest), the oldest live ones making room
-- past N (the log holds N units: debt beyond a full log is not kept).
local function sliding_log_settle(key, pr, now, rat, est, real)
  local items = redis.call('LRANGE', key, 0, -1)
  local ts, cs = {}, {}
  for _, v in ipairs(items) do
    local colon = string.find(v, ':', 1, true)
    local t, c = tonumber(string.sub(v, 1, colon - 1)), tonumber(string.sub(v, colon + 1))
    if now - t < pr.W then -- live (expired runs form a prefix: dropped)
      ts[#ts + 1], cs[#cs + 1] = t, c
    end
  end
  local live = 0
  for i = 1, #cs do live = live + cs[i] end
  if real > est then
    local x = smin(real - est, pr.N)
    local stamp = now
    if #ts > 0 and ts[#ts] > stamp then stamp = ts[#ts] end
    local drop = live + x - pr.N
    local i = 1
    while drop > 0 do -- the oldest units make room
      local take = smin(drop, cs[i])
      cs[i], drop = cs[i] - take, drop - take
      if cs[i] == 0 then i = i + 1 end
    end
    local nts, ncs = {}, {}
    for j = i, #ts do
      if cs[j] > 0 then nts[#nts + 1], ncs[#ncs + 1] = ts[j], cs[j] end
    end
    if #nts > 0 and nts[#nts] == stamp then
      ncs[#ncs] = ncs[#ncs] + x
    else
      nts[#nts + 1], ncs[#ncs + 1] = stamp, x
    end
    ts, cs = nts, ncs
  else
    local back = est - real
    local j = 0 -- the last run stamped <= reserved_at
    for i = 1, #ts do
      if ts[i] <= rat then j = i end
    end
    while back > 0 and j > 0 do
      local take = smin(back, cs[j])
      cs[j], back = cs[j] - take, back - take
      j = j - 1
    end
  end
  return function()
    redis.call('DEL', key)
    local vals = {}
    for i = 1, #ts do
      if cs[i] > 0 then vals[#vals + 1] = S(ts[i]) .. ':' .. S(cs[i]) end
      if #vals == 1000 or (i == #ts and #vals > 0) then -- RPUSH in chunks (Lua's unpack)
        redis.call('RPUSH', key, unpack(vals))
        vals = {}
      end
    end
  end
end

-- Token bucket: the state at now (refill applied), then an extra charge adds x x unit past
-- the capacity (a debt, saturated at SAT), a refund takes back
-- min(k x unit, max(0, e x unit - elapsed x scale), used), elapsed = max(0, latest -
-- reserved_at), latest = max(now, last).
local function bucket_settle(key, pr, now, rat, est, real)
  local scale, unit = pr.scale, pr.unit
  local v = redis.call('GET', key)
  local used, last = 0, now
  if v then
    local c = string.find(v, ':', 1, true)
    used, last = tonumber(string.sub(v, 1, c - 1)), tonumber(string.sub(v, c + 1))
  end
  local elapsed = now - last
  if elapsed > 0 and used > 0 then
    local uc = idivq(used + scale - 1, scale)
    if elapsed >= uc then used = 0 else used = used - elapsed * scale end
  end
  local after
  if real > est then
    local x = real - est
    if used >= SAT or x > idivq(SAT - used, unit) then
      -- Saturated: empty again at TAT_MAX, as a GCRA's, the part past SAT held by `last`
      -- ahead of now (no refill before it: the wait of a clock that stepped back).
      local span, uq = TAT_MAX - now, idivq(SAT, scale)
      if last > now then span = TAT_MAX - last end -- already saturated: keeps its end
      if span <= uq then
        after = span * scale
      else
        after, last = uq * scale, TAT_MAX - uq
      end
      if after < used then after = used end
    else
      after = used + x * unit
    end
  else
    local k, held = (est - real) * unit, est * unit
    local latest = now
    if last > latest then latest = last end
    local el = 0
    if latest > rat then el = latest - rat end
    if el > idivq(held, scale) then held = 0 else held = held - el * scale end
    if held < 0 then held = 0 end
    after = used - smin(smin(k, held), used)
  end
  if now > last then last = now end
  return function() redis.call('SET', key, S(after) .. ':' .. S(last)) end
end

-- GCRA: the same on the tat, used = q x scale + f past now, kept as (q, f) since q x scale may
-- pass 2^53 (a saturated debt, or a clock stepped back); latest = now.  An extra charge whose
-- x x unit passes SAT, or whose tat passes TAT_MAX, leaves the tat at TAT_MAX.
local function gcra_settle(key, pr, now, rat, est, real)
  local scale, unit = pr.scale, pr.unit
  local q, f = tat_used(key, pr, now)
  if real > est then
    local x = real - est
    if x > idivq(SAT, unit) then
      q, f = TAT_MAX - now, 0
    else
      local dq, df = idiv(x * unit, scale)
      q, f = q + dq, f + df
      if f >= scale then q, f = q + 1, f - scale end
      if q >= TAT_MAX - now then q, f = TAT_MAX - now, 0 end
    end
  else
    local k, held = (est - real) * unit, est * unit
    local el = 0
    if now > rat then el = now - rat end
    if el > idivq(held, scale) then held = 0 else held = held - el * scale end
    if held < 0 then held = 0 end
    local back = smin(k, held) -- <= 2^50
    local used = small(q, f, scale, SAT)
    if used ~= nil then back = smin(back, used) end
    local bq, bf = idiv(back, scale)
    q, f = q - bq, f - bf
    if f < 0 then q, f = q - 1, f + scale end
  end
  return function()
    if f == 0 then
      redis.call('SET', key, S(now + q))
    else
      redis.call('SET', key, S(now + q) .. ':' .. S(f))
    end
  end
end

local algos = {fixed_window, sliding_log, sliding_window, bucket, bucket}
local settles = {fixed_window_settle, sliding_log_settle, sliding_window_settle, bucket_settle,
                 gcra_settle}

local op = ARGV[1]
local now = tonumber(ARGV[2])
if now == nil or now < 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local floor_ms = tonumber(ARGV[3]) or 0
if op == 'mv' or op == 'ms' then return budget(op, now, floor_ms, algos, settles) end
local pr = {algo = tonumber(ARGV[4]), N = tonumber(ARGV[6]), W = tonumber(ARGV[7]),
            B = tonumber(ARGV[8]), Q = tonumber(ARGV[9]), D = tonumber(ARGV[10]),
            scale = tonumber(ARGV[11]), unit = tonumber(ARGV[12])}
if ARGV[13] ~= nil and ARGV[13] ~= '' then pr.cal = cal_parse(ARGV[13]) end
local amount = tonumber(ARGV[5])
if #KEYS ~= 2 or settles[pr.algo] == nil or amount == nil or amount < 0 then
  return redis.error_reply('ERR rlt: bad arguments')
end

-- PEXPIRE of the limit's key: reset_after rounded up to the ms, at least 1 and floor.
local function expire(d)
  local us = d.su
  if d.sn > 0 then us = us + 1 end
  local ms = idivq(us + 999, 1000)
  if ms < floor_ms then ms = floor_ms end
  if ms < 1 then ms = 1 end
  redis.call('PEXPIRE', KEYS[1], S(ms))
end

local function reply(d)
  return {d.allowed and 1 or 0, d.limit, d.remaining, d.ru, d.rn, d.su, d.sn, d.du, d.dn, 0}
end

if op == 'v' then
  local timeout_ms = tonumber(ARGV[14])
  if timeout_ms == nil or timeout_ms < 1 then return redis.error_reply('ERR rlt: bad arguments') end
  if redis.call('EXISTS', KEYS[2]) == 1 then return -1 end
  local d = algos[pr.algo](KEYS[1], pr, now, amount)
  -- An estimate of 0 charges nothing: recorded whatever d says (rlt_store_reserve's rule).
  if d.allowed or amount == 0 then
    if d.allowed and d.write then
      d.write()
      expire(d)
    end
    redis.call('SET', KEYS[2], S(now) .. ':' .. S(amount), 'PX', S(timeout_ms))
  end
  return reply(d)
end
if op ~= 's' then return redis.error_reply('ERR rlt: unknown operation') end

local v = redis.call('GET', KEYS[2])
if not v then return 0 end
local c = string.find(v, ':', 1, true)
local rat, est = tonumber(string.sub(v, 1, c - 1)), tonumber(string.sub(v, c + 1))
local write = settles[pr.algo](KEYS[1], pr, now, rat, est, amount)
redis.call('DEL', KEYS[2])
write()
local d = algos[pr.algo](KEYS[1], pr, now, 0)
if redis.call('EXISTS', KEYS[1]) == 1 then expire(d) end
return reply(d)
