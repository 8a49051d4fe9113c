-- One reservation over several limits in Redis (mirrors src/store/budget.c, whose header has
-- the accounting): the settle script's ops 'mv' (reserve) and 'ms' (settle).  The build puts
-- this file after lib/*.lua and before settle.lua, which calls budget() with its tables of
-- decisions and settles per algorithm.
--
-- The reservation is a hash, KEYS[n + 1] = the first limit's key name + ":m:" + 16 hex digits
-- (the first limit's hash tag, so its Cluster slot), with PEXPIRE = its timeout: fields
-- at (reserved_at, us), n, and per limit i: k<i> (its key name), h<i> (what it still holds,
-- units: h_i of budget.c) and w<i> (its weighting without the constant term, "name coef ...").
--
-- KEYS: the n limits' keys, then the reservation's.  ARGV:
--   'mv', now, floor, n, timeout_ms, then per limit: algo cost N W B Q D scale unit cal held w
--        (cost: the weighting's cost of the estimate, held: cost less the constant term)
--   'ms', now, floor, n, final (0/1), usage ("name count ..."), then per limit: algo N W B Q D
--        scale unit cal
-- Reserve returns -1 if the reservation's key exists (nothing charged), else per limit
-- {allowed, limit, remaining, retry_us, retry_ns, reset_us, reset_ns, delay_us, delay_ns, 0},
-- all or nothing as multi.lua decides.  Settle returns 0 (no such reservation for these keys),
-- -2 (a usage name no limit weighs, a bad count), -3 (a cost past 2^53 - 1: not exact here), or
-- per limit the decision of a peek after it with a last field: what the settle charged beyond
-- what the reservation held.
local BMAX = 9007199254740991 -- 2^53 - 1

local function budget(op, now, floor_ms, algos, settles)
  local n = tonumber(ARGV[4])
  if n == nil or n < 1 or n > 16 or #KEYS ~= n + 1 then
    return redis.error_reply('ERR rlt: bad arguments')
  end
  local stride, head = 12, 5
  if op == 'ms' then stride, head = 9, 6 end
  if #ARGV ~= head + stride * n then return redis.error_reply('ERR rlt: bad arguments') end
  local function params(i)
    local b = head + (i - 1) * stride
    local pr = {algo = tonumber(ARGV[b + 1])}
    local o = 1 -- 'mv' has the cost after algo
    if op == 'mv' then o = 2 end
    pr.N, pr.W, pr.B = tonumber(ARGV[b + o + 1]), tonumber(ARGV[b + o + 2]), tonumber(ARGV[b + o + 3])
    pr.Q, pr.D = tonumber(ARGV[b + o + 4]), tonumber(ARGV[b + o + 5])
    pr.scale, pr.unit = tonumber(ARGV[b + o + 6]), tonumber(ARGV[b + o + 7])
    if ARGV[b + o + 8] ~= '' then pr.cal = cal_parse(ARGV[b + o + 8]) end
    if settles[pr.algo] == nil then return nil end
    return pr, b
  end
  local function expire(i, d)
    local us = d.su
    if d.sn > 0 then us = us + 1 end
    local ms = idivq(us + 999, 1000)
    if ms < floor_ms then ms = floor_ms end
    if ms < 1 then ms = 1 end
    redis.call('PEXPIRE', KEYS[i], S(ms))
  end
  local function row(d, x)
    return {d.allowed and 1 or 0, d.limit, d.remaining, d.ru, d.rn, d.su, d.sn, d.du, d.dn, x}
  end
  local rk = KEYS[n + 1]

  if op == 'mv' then
    local timeout_ms = tonumber(ARGV[5])
    if timeout_ms == nil or timeout_ms < 1 then return redis.error_reply('ERR rlt: bad arguments') end
    if redis.call('EXISTS', rk) == 1 then return -1 end
    local decs, prs, all = {}, {}, true
    for i = 1, n do
      local pr, b = params(i)
      local cost, held = tonumber(ARGV[b + 2]), tonumber(ARGV[b + 11])
      if pr == nil or cost == nil or cost < 0 or held == nil or held < 0 then
        return redis.error_reply('ERR rlt: bad limit')
      end
      prs[i] = pr
      decs[i] = algos[pr.algo](KEYS[i], pr, now, cost)
      if not decs[i].allowed then all = false end
    end
    local out, rec = {}, {'at', S(now), 'n', S(n)}
    for i = 1, n do
      local d = decs[i]
      if all then
        if d.write then
          d.write()
          expire(i, d)
        end
        local b = head + (i - 1) * stride
        local x = #rec
        rec[x + 1], rec[x + 2] = 'k' .. i, KEYS[i]
        rec[x + 3], rec[x + 4] = 'h' .. i, ARGV[b + 11]
        rec[x + 5], rec[x + 6] = 'w' .. i, ARGV[b + 12]
      elseif d.allowed then -- nothing consumed: as it stands (a peek), as multi.lua does
        local peek = algos[prs[i].algo](KEYS[i], prs[i], now, 0)
        d.remaining, d.su, d.sn, d.ru, d.rn = peek.remaining, peek.su, peek.sn, 0, 0
      end
      out[i] = row(d, 0)
    end
    if all then
      redis.call('HSET', rk, unpack(rec))
      redis.call('PEXPIRE', rk, S(timeout_ms))
    end
    return out
  end

  -- 'ms'
  local final = ARGV[5] == '1'
  local f = redis.call('HGETALL', rk)
  if #f == 0 then return 0 end
  local rec = {}
  for j = 1, #f, 2 do rec[f[j]] = f[j + 1] end
  if tonumber(rec.n) ~= n then return 0 end
  for i = 1, n do
    if rec['k' .. i] ~= KEYS[i] then return 0 end -- another key set: the record stays
  end
  local use, names = {}, {}
  for name, count in string.gmatch(ARGV[6], '(%S+) (%S+)') do
    local c = tonumber(count)
    if c == nil or c < 0 or c > BMAX then return -2 end
    use[name], names[#names + 1] = c, name
  end
  local cost, weighed = {}, {}
  for i = 1, n do
    local u = 0
    for name, coef in string.gmatch(rec['w' .. i] or '', '(%S+) (%S+)') do
      local w, c = tonumber(coef), use[name]
      weighed[name] = true
      if c ~= nil and c > 0 and w > 0 then
        if w > math.floor((BMAX - u) / c) then return -3 end
        u = u + w * c
      end
    end
    cost[i] = u
  end
  for _, name in ipairs(names) do
    if not weighed[name] then return -2 end
  end
  local rat = tonumber(rec.at)
  local out, upd = {}, {}
  for i = 1, n do
    local pr = params(i)
    if pr == nil then return redis.error_reply('ERR rlt: bad limit') end
    local held = tonumber(rec['h' .. i])
    local over = 0
    if cost[i] > held then over = cost[i] - held end
    if final or over > 0 then
      settles[pr.algo](KEYS[i], pr, now, rat, held, cost[i])()
      held = 0
    else
      held = held - cost[i]
    end
    upd[#upd + 1], upd[#upd + 2] = 'h' .. i, S(held)
    local d = algos[pr.algo](KEYS[i], pr, now, 0)
    if redis.call('EXISTS', KEYS[i]) == 1 and (final or over > 0) then expire(i, d) end
    out[i] = row(d, over)
  end
  if final then
    redis.call('DEL', rk)
  else
    redis.call('HSET', rk, unpack(upd))
  end
  return out
end
