-- Redis mode of Envoy's Rate Limit Quota Service (RLQS): the claims of several ratelimitd on one
-- quota bucket's global budget, changed by this one script so that every change is atomic
-- (src/redis/quota.c calls it; docs/envoy.md "RLQS in Redis mode" has the model).
--
-- KEYS[1]: the bucket's hash, one field per server: "demand claim_q claim_b expires_ms", and
-- while the fleet may have lost its state, the field "!lost": "expires_ms".
-- ARGV: server id (hex), demand d (the server's streams' demand, tokens per F), held_q, held_b
-- (an upper bound of what the server's ledger may hold until it applies this call's answer:
-- the larger of its live sums and the budget it divides now), Q, B (the bucket's global
-- tokens per F and burst), ttl_ms (how long the claim stays reserved without another
-- exchange: past the last assignment the server may make from it), flags (1: the server's
-- previous exchange stored a field that should still be live; 2: the server's Redis view had
-- a gap, a failed exchange, less than ttl_ms ago).
--
-- Per call: fields whose expiry has passed (by Redis's clock, TIME) are dropped; a field that
-- does not parse (not four decimal integers of at most 15 digits, a demand past 2^40) is
-- counted as a claim of the whole Q and B and rewritten so until now + ttl_ms: whose ever it
-- was, what it reserved stays reserved for one claim's life; a claim past Q or B counts as Q
-- or B.  The target is demand-proportional with a minimum of one token (Q and B alike, D the
-- sum of the live demands): floor(Q x d / D), but a server with d > 0 whose floor is 0 (a
-- light one) gets 1, and when there are r such light servers the others' floors are taken of
-- Q - r over their own demands (at least 1 each), so that a light server next to heavy ones
-- is not left with nothing; d = 0 gets 0; with D = 0 an equal share of the live servers.  The
-- budget given back is min(target, Q - the others' claims) (never below 0), both parts 0 when
-- either is (a part without the other admits nothing: claiming it would only strand it), and
-- the claim stored is max(budget, held).  The key lives until its last field expires
-- (PEXPIRE).
--
-- Lost state: a server that expects its field (flag 1) and does not find it (Redis restarted
-- empty, the key evicted or flushed, the field overwritten) writes "!lost" until now + ttl_ms;
-- while it is live, and for a server after a gap (flag 2) that does not find its own field,
-- the budget is also capped at held: every server keeps at most what it held, so the servers
-- whose claims were lost, and may still divide them, are not overtaken.  held is at most the
-- server's last claim (below), and the lost claims summed to at most Q and B.
--
-- Invariant (tests/redis/test_redis_quota.c checks it): the stored claims sum to <= Q and to
-- <= B.  A claim is raised only into what the others leave free; the max with held never
-- raises it above the previous claim, because held is at most the previous claim: the ledger
-- rises only up to the budget in force, which is at most the claim stored with it, and is
-- only lowered towards a lowered budget (rlt__quota_bucket_budget's contract).  So a lowered
-- claim is stored one exchange after its budget is lowered.  A server in a fail mode divides
-- at most its last claim until that claim's expiry less one assignment TTL (rlqs_redis.c),
-- so it holds nothing the others may take.
--
-- Returns {budget_q, budget_b, claim_q, claim_b, live servers (this one included), D}.
if redis.replicate_commands then redis.replicate_commands() end

local key, me = KEYS[1], ARGV[1]
local d, hq, hb = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local Q, B, ttl = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local flags = tonumber(ARGV[8]) or 0
local expect, gap = flags % 2 == 1, math.floor(flags / 2) % 2 == 1
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local all = redis.call('HGETALL', key)
local oq, ob, D, n, last = 0, 0, d, 1, now + ttl
local ds = {d}
local mine, lost = false, false

-- a decimal integer of 1..15 digits (exact in a double), or nil
local function int(s)
  if s == nil or #s > 15 then return nil end
  return tonumber(s)
end

for i = 1, #all, 2 do
  local f, v = all[i], all[i + 1]
  if f == '!lost' then
    local ex = int(string.match(v, '^(%d+)$'))
    if not ex or ex > now + 86400000 then -- junk: lost from now, for one claim's life
      ex = now + ttl
      redis.call('HSET', key, f, string.format('%d', ex))
    end
    if ex > now then
      lost = true
      if ex > last then last = ex end
    else
      redis.call('HDEL', key, f)
    end
  else
    local sd, sq, sb, se = string.match(v, '^(%d+) (%d+) (%d+) (%d+)$')
    local od, cq, cb, ex = int(sd), int(sq), int(sb), int(se)
    local ok = od and cq and cb and ex and od <= 1099511627776
    if f == me then
      mine = ok and ex > now
    elseif not ok then
      -- junk: the most it could be, for one claim's life
      od, cq, cb, ex = 0, Q, B, now + ttl
      redis.call('HSET', key, f, string.format('0 %d %d %d', Q, B, ex))
    end
    if f ~= me then
      if ex <= now then
        redis.call('HDEL', key, f)
      else
        if cq > Q then cq = Q end
        if cb > B then cb = B end
        oq, ob, D, n = oq + cq, ob + cb, D + od, n + 1
        ds[n] = od
        if ex > last then last = ex end
      end
    end
  end
end
if expect and not mine then
  lost = true
  redis.call('HSET', key, '!lost', string.format('%d', now + ttl))
end

local function target(cap)
  if D == 0 then return math.floor(cap / n) end
  if d == 0 then return 0 end
  local t = math.floor(cap * d / D)
  if t == 0 then return 1 end
  local r, dl = 0, 0
  for i = 1, n do
    if ds[i] > 0 and math.floor(cap * ds[i] / D) == 0 then r, dl = r + 1, dl + ds[i] end
  end
  if r == 0 then return t end
  local rest = cap - r
  if rest < 0 then rest = 0 end
  t = math.floor(rest * d / (D - dl))
  if t < 1 then t = 1 end
  return t
end
local tq, tb = target(Q), target(B)
local function part(target, cap, others)
  local free = cap - others
  if free < 0 then free = 0 end
  if target > free then return free end
  return target
end
local bq, bb = part(tq, Q, oq), part(tb, B, ob)
if lost or (gap and not mine) then
  if bq > hq then bq = hq end
  if bb > hb then bb = hb end
end
if bq == 0 or bb == 0 then bq, bb = 0, 0 end
local cq, cb = bq, bb
if hq > cq then cq = hq end
if hb > cb then cb = hb end
redis.call('HSET', key, me, string.format('%d %d %d %d', d, cq, cb, now + ttl))
redis.call('PEXPIRE', key, last - now)
return {bq, bb, cq, cb, n, D}
