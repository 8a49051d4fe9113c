-- Penalty box (mirrors src/core/block.c) around any algorithm's function: a companion string
-- key (the algorithm key's name + ":blk:BLOCK:FACTOR:MAX", same hash tag) holding "u:l",
-- u = the latest block's end in microseconds (exclusive), l = its level; no key = never
-- blocked.  pb = {b = the first block (us), f = the factor, m = the longest block (us)}; W is
-- the policy's period (us).  With e = u:
--   len(k) = min(b x f^k, m); blocked at now iff now < e;
--   while blocked: denied, retry = max(e - now, the algorithm's wait), remaining 0, nothing
--     charged (a cost that never fits still says -1, as the algorithm answers);
--   a breach (cost >= 1 denied with retry >= 0, not blocked) at t: k = l + 1 (kept where
--     len reached m) if e <= t < e + W, else 0; the block is [t, t + len(k)), and retry =
--     max(len(k), the algorithm's wait);
--   reset_after reaches at least the memory end: e + W when f > 1 (a breach then escalates),
--     else e; the companion key expires there (rounded up to the ms, at least `floor`).
-- Peeks (cost 0) see a block and never start one.  Every number stays below 2^53: now <= 2^52,
-- m <= 2^50, W <= 2^50.

local function blk_read(bkey)
  local v = redis.call('GET', bkey)
  if not v then return nil, 0 end
  local c = string.find(v, ':', 1, true)
  return tonumber(string.sub(v, 1, c - 1)), tonumber(string.sub(v, c + 1))
end

-- len(k), and whether it reached m (no further escalation).
local function blk_len(pb, k)
  local len, i = pb.b, 0
  while i < k and len < pb.m do
    if len > idivq(pb.m, pb.f) then len = pb.m else len = len * pb.f end
    i = i + 1
  end
  return len, len >= pb.m
end

local function blk_mem(pb, W, e)
  if pb.f > 1 then return e + W end
  return e
end

-- (x us, 0 ns) > (u us, n ns), n in 0..1000.
local function blk_gt(x, u, n)
  return x > u and (x - u) * 1000 > n
end

-- d = f(key, pr, now, cost) under the penalty box; a breach's block write is d.bwrite (run
-- by the caller only when the request's outcome stands: always, as a denial charges nothing).
local function blk_decide(f, key, bkey, pr, pb, now, cost, floor_ms)
  local d = f(key, pr, now, cost)
  local e, lvl = blk_read(bkey)
  if e ~= nil and now < e then
    if not d.allowed and d.ru < 0 then return d end
    d.allowed, d.remaining, d.du, d.dn, d.lease, d.write = false, 0, 0, 0, 0, nil
    if blk_gt(e - now, d.ru, d.rn) then d.ru, d.rn = e - now, 0 end
    local mem = blk_mem(pb, pr.W, e) - now
    if blk_gt(mem, d.su, d.sn) then d.su, d.sn = mem, 0 end
    return d
  end
  if not d.allowed and d.ru >= 0 and cost > 0 then
    local k = 0
    if e ~= nil and now < e + pr.W then
      local _, top = blk_len(pb, lvl)
      if top or lvl >= 64 then k = lvl else k = lvl + 1 end
    end
    local len = blk_len(pb, k)
    e, lvl = now + len, k
    if blk_gt(len, d.ru, d.rn) then d.ru, d.rn = len, 0 end
    d.remaining = 0
    local ms = idivq(blk_mem(pb, pr.W, e) - now + 999, 1000)
    if ms < floor_ms then ms = floor_ms end
    if ms < 1 then ms = 1 end
    local v = S(e) .. ':' .. S(lvl)
    d.bwrite = function() redis.call('SET', bkey, v, 'PX', S(ms)) end
  end
  if e ~= nil then
    local mem = blk_mem(pb, pr.W, e) - now
    if blk_gt(mem, d.su, d.sn) then d.su, d.sn = mem, 0 end
  end
  return d
end
