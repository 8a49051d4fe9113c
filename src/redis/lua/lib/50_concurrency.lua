-- Concurrency (mirrors src/core/concurrency.c): hash {n = last lease id, s<i> = "lease:expiry"
-- for each occupied slot i of 0..N-1}.  A lease is live while its expiry (microseconds) is
-- after `now`.  As in the core, a new lease takes the first slot that is empty or holds an
-- expired lease (which a clock stepping back could otherwise revive), and lease ids are
-- max(last + 1, now in microseconds), so they grow with the clock.
local function cc_slots(key)
  local all = redis.call('HGETALL', key)
  local last, slots = 0, {}
  for i = 1, #all, 2 do
    local field, v = all[i], all[i + 1]
    if field == 'n' then
      last = tonumber(v)
    else
      local colon = string.find(v, ':', 1, true)
      slots[tonumber(string.sub(field, 2))] = {tonumber(string.sub(v, 1, colon - 1)),
                                               tonumber(string.sub(v, colon + 1))}
    end
  end
  return last, slots
end

local function concurrency(key, pr, now, cost)
  local N, W = pr.N, pr.W
  local last, slots = cc_slots(key)
  local in_use, free_slot, soonest, latest = 0, nil, nil, nil
  for i = 0, N - 1 do
    local s = slots[i]
    if s and s[2] > now then
      in_use = in_use + 1
      if soonest == nil or s[2] < soonest then soonest = s[2] end
      if latest == nil or s[2] > latest then latest = s[2] end
    elseif free_slot == nil then
      free_slot = i
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
      redis.call('HSET', key, 'n', S(lease), 's' .. free_slot, S(lease) .. ':' .. S(expires))
    end
  end
  d.remaining = N - in_use
  if in_use > 0 then d.su = latest - now end
  return d
end

-- 1 if `lease` was live and is now released, 0 if unknown, released or reclaimed.
local function concurrency_release(key, now, lease)
  if lease <= 0 then return 0 end
  local _, slots = cc_slots(key)
  for i, s in pairs(slots) do
    if s[1] == lease then
      redis.call('HDEL', key, 's' .. i)
      if s[2] > now then return 1 end
      return 0
    end
  end
  return 0
end
