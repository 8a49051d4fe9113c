-- Concurrency (mirrors src/core/concurrency.c): hash {n = last lease id, <lease> = expiry}.
-- A lease is live while its expiry (microseconds) is after `now`.  Lease ids are
-- max(last + 1, now in microseconds), so they grow with the clock as in the core.
local function concurrency(key, pr, now, cost)
  local all = redis.call('HGETALL', key)
  local N, W = pr.N, pr.W
  local last, in_use, soonest, latest, dead = 0, 0, nil, nil, {}
  for i = 1, #all, 2 do
    local field, v = all[i], tonumber(all[i + 1])
    if field == 'n' then
      last = v
    elseif v > now then
      in_use = in_use + 1
      if soonest == nil or v < soonest then soonest = v end
      if latest == nil or v > latest then latest = v end
    else
      dead[#dead + 1] = field
    end
  end
  local d = newdec(N)
  d.allowed = in_use < N
  if not d.allowed then d.ru = soonest - now end
  if d.allowed and cost > 0 then
    local expires = now + W
    local lease = last + 1
    if now > lease then lease = now end
    if lease <= 0 then lease = 1 end
    in_use = in_use + 1
    if latest == nil or expires > latest then latest = expires end
    d.lease = lease
    d.write = function()
      if #dead > 0 then redis.call('HDEL', key, unpack(dead)) end
      redis.call('HSET', key, 'n', S(lease), S(lease), S(expires))
    end
  end
  d.remaining = N - in_use
  if in_use > 0 then d.su = latest - now end
  return d
end

-- 1 if `lease` was live and is now released, 0 if unknown, released or reclaimed.
local function concurrency_release(key, now, lease)
  local v = redis.call('HGET', key, S(lease))
  if not v then return 0 end
  redis.call('HDEL', key, S(lease))
  if tonumber(v) > now then return 1 end
  return 0
end
