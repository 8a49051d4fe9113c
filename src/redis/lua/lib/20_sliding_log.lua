-- Sliding log (mirrors src/core/sliding_log.c): a list of runs "t:c", c units accepted at
-- time t (microseconds), oldest first.  A unit counts at `now` iff now - t < W.
local function sliding_log(key, pr, now, cost)
  local items = redis.call('LRANGE', key, 0, -1)
  local ts, cs, total = {}, {}, 0
  for i, v in ipairs(items) do
    local colon = string.find(v, ':', 1, true)
    ts[i] = tonumber(string.sub(v, 1, colon - 1))
    cs[i] = tonumber(string.sub(v, colon + 1))
    total = total + cs[i]
  end
  local N, W = pr.N, pr.W
  local runs_gone, gone = 0, 0
  while runs_gone < #ts and now - ts[runs_gone + 1] >= W do
    runs_gone = runs_gone + 1
    gone = gone + cs[runs_gone]
  end
  local live = total - gone
  local need = cost > 0 and cost or 1
  local d = newdec(N)
  if need > N then
    d.ru = -1
  else
    d.allowed = live <= N - need
    if not d.allowed then
      -- the live unit whose expiry frees the last unit needed (0-based, oldest first)
      local idx, i, seen = live + need - N - 1, runs_gone, 0
      repeat
        i = i + 1
        seen = seen + cs[i]
      until seen > idx
      d.ru = ts[i] + W - now
    end
  end
  local charge = d.allowed and cost > 0
  local newest = now
  if live > 0 then newest = ts[#ts] end
  if charge and now > newest then newest = now end
  local after = live
  if charge then after = live + cost end
  d.remaining = N - after
  if after > 0 then
    d.su = newest + W - now
    if d.su < 0 then d.su = 0 end
  end
  if charge then
    d.write = function()
      if runs_gone == #ts then
        redis.call('DEL', key)
        redis.call('RPUSH', key, S(newest) .. ':' .. S(cost))
        return
      end
      if runs_gone > 0 then redis.call('LTRIM', key, runs_gone, -1) end
      if ts[#ts] == newest then
        redis.call('LSET', key, -1, S(newest) .. ':' .. S(cs[#cs] + cost))
      else
        redis.call('RPUSH', key, S(newest) .. ':' .. S(cost))
      end
    end
  end
  return d
end
