-- Token bucket, GCRA and leaky bucket (mirror src/core/bucket.c and leaky.c).  Amounts are in
-- the policy's scaled units at microsecond resolution: one unit of cost is pr.unit, one
-- microsecond of refill is pr.scale (unit/scale = W/N exactly).
--   token bucket: string "u:l", u = used, l = last charge time; no key = never charged (the
--                 format of token_bucket.lua).  A clock
--                 that stepped back behind l refills only from l on: the decision's waits
--                 grow by l - now (`wait`), as in the core.
--   GCRA, leaky:  string "t" or "t:f" (t whole microseconds, f = 0..scale-1, absent = 0): the
--                 theoretical arrival time t*scale + f, kept in two numbers because t*scale
--                 may pass 2^53.  gcra.lua reads and writes the same format.
-- An amount that may pass 2^53 (a GCRA clock stepped far back) is carried as (q, f) meaning
-- q*scale + f; `small` gives it as one number when it is below a bound, else nil.

local function small(q, f, scale, bound)
  if q <= idivq(bound, scale) + 2 then return q * scale + f end
  return nil
end

-- (q*scale + f - k)/scale rounded up to the ns, for a huge amount (q large) and 0 <= k.
local function ceil_minus(q, f, k, scale)
  local kq, kr = idiv(k, scale)
  q, f = q - kq, f - kr
  if f < 0 then q, f = q - 1, f + scale end
  local u, n = ceil_us_ns(f, scale)
  return q + u, n
end

-- The used part of a tat-style state at `now`, as (q, f).
local function tat_used(key, pr, now)
  local v = redis.call('GET', key)
  if not v then return 0, 0 end
  local t, f = tonumber(v), 0
  if t == nil then
    local c = string.find(v, ':', 1, true)
    t, f = tonumber(string.sub(v, 1, c - 1)), tonumber(string.sub(v, c + 1))
  end
  local q = t - now
  if q < 0 then return 0, 0 end -- f < scale, so tat <= now*scale
  return q, f
end

local function tat_write(key, pr, now, after)
  local q, r = idiv(after, pr.scale)
  if r == 0 then
    redis.call('SET', key, S(now + q))
  else
    redis.call('SET', key, S(now + q) .. ':' .. S(r))
  end
end

local function bucket(key, pr, now, cost)
  local scale, unit, B = pr.scale, pr.unit, pr.B
  local cap = B * unit
  local uq, uf, last
  local wait = 0
  if pr.algo == 5 then
    uq, uf = tat_used(key, pr, now)
  else
    local v = redis.call('GET', key)
    local used = 0
    last = now -- never charged: nothing to refill
    if v then
      local c = string.find(v, ':', 1, true)
      used, last = tonumber(string.sub(v, 1, c - 1)), tonumber(string.sub(v, c + 1))
    end
    local elapsed = now - last
    if elapsed < 0 and used > 0 then wait = last - now end
    if elapsed > 0 and used > 0 then
      local uc = idivq(used + scale - 1, scale)
      if elapsed >= uc then used = 0 else used = used - elapsed * scale end
    end
    uq, uf = idiv(used, scale)
  end
  local used = small(uq, uf, scale, cap)
  local need = cost > 0 and cost or 1
  local d = newdec(B)
  if need > B then
    d.ru = -1
    if used ~= nil and used < cap then d.remaining = idivq(cap - used, unit) end
    d.su, d.sn = ceil_minus(uq, uf, 0, scale)
    d.su = d.su + wait
    return d
  end
  local need_s = need * unit
  if used == nil then -- far more than the bucket holds
    d.ru, d.rn = ceil_minus(uq, uf, cap - need_s, scale)
    d.su, d.sn = ceil_minus(uq, uf, 0, scale)
    d.ru, d.su = d.ru + wait, d.su + wait -- a settle's debt behind a clock that stepped back
    return d
  end
  d.allowed = used <= cap - need_s
  local after = used
  if d.allowed then
    if cost > 0 then after = used + need_s end
  else
    d.ru, d.rn = ceil_us_ns(used - (cap - need_s), scale)
    d.ru = d.ru + wait
  end
  if after < cap then d.remaining = idivq(cap - after, unit) end
  d.su, d.sn = ceil_us_ns(after, scale)
  d.su = d.su + wait
  if d.allowed and cost > 0 then
    if pr.algo == 5 then
      d.write = function() tat_write(key, pr, now, after) end
    else
      if now > last then last = now end
      d.write = function() redis.call('SET', key, S(after) .. ':' .. S(last)) end
    end
  end
  return d
end

local function leaky_bucket(key, pr, now, cost)
  local scale, unit, Q = pr.scale, pr.unit, pr.Q
  local cap, free = Q * unit, pr.D * unit
  local bq, bf = tat_used(key, pr, now)
  local backlog = small(bq, bf, scale, cap + unit)
  local need = cost > 0 and cost or 1
  local d = newdec(Q + 1)
  local remaining_now = 0
  if backlog ~= nil and backlog <= cap then remaining_now = idivq(cap - backlog, unit) + 1 end
  if need > Q + 1 then
    d.ru = -1
    d.remaining = remaining_now
    d.su, d.sn = ceil_minus(bq, bf, 0, scale)
    return d
  end
  local extra = (need - 1) * unit
  if backlog == nil then
    d.ru, d.rn = ceil_minus(bq, bf, cap - extra, scale)
    d.su, d.sn = ceil_minus(bq, bf, 0, scale)
    return d
  end
  d.allowed = backlog <= cap - extra
  local after = backlog
  if d.allowed then
    if backlog > free then d.du, d.dn = ceil_us_ns(backlog - free, scale) end
    if cost > 0 then after = backlog + need * unit end
  else
    d.ru, d.rn = ceil_us_ns(backlog - (cap - extra), scale)
  end
  if after <= cap then d.remaining = idivq(cap - after, unit) + 1 end
  d.su, d.sn = ceil_us_ns(after, scale)
  if d.allowed and cost > 0 then
    d.write = function() tat_write(key, pr, now, after) end
  end
  return d
end
