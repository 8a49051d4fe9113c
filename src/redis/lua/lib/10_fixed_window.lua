-- Fixed window (mirrors src/core/fixed_window.c): hash {w = window index, c = count}.
local function fixed_window(key, pr, now, cost)
  local s = redis.call('HMGET', key, 'w', 'c')
  local win, count = tonumber(s[1]) or 0, tonumber(s[2]) or 0
  local N, W = pr.N, pr.W
  local k = idivq(now, W)
  if count == 0 or k > win then win = k; count = 0 end
  local need = cost > 0 and cost or 1
  local d = newdec(N)
  if need > N then
    d.ru = -1
  else
    d.allowed = count <= N - need
    if not d.allowed then d.ru = (win + 1) * W - now end
  end
  local after = count
  if d.allowed and cost > 0 then after = count + cost end
  d.remaining = N - after > 0 and N - after or 0
  if after > 0 then d.su = (win + 1) * W - now end
  if d.allowed and cost > 0 then
    d.write = function() redis.call('HSET', key, 'w', S(win), 'c', S(after)) end
  end
  return d
end
