-- Fixed window (mirrors src/core/fixed_window.c): string "w:c", c units accepted in window w
-- (the format of fixed_window.lua); with pr.cal, w is a calendar window (lib/05_calendar.lua).
-- The key's window and count as of now (a count of an earlier window is 0 in now's), now's
-- window k and, for a calendar window, its end: what the decision and settle.lua start from.
local function fw_load(key, pr, now)
  local win, count = 0, 0
  local v = redis.call('GET', key)
  if v then
    local c = string.find(v, ':', 1, true)
    win, count = tonumber(string.sub(v, 1, c - 1)), tonumber(string.sub(v, c + 1))
  end
  local k, kend
  if pr.cal then k, kend = cal_window(pr.cal, now) else k = idivq(now, pr.W) end
  if count == 0 or k > win then win = k; count = 0 end
  return win, count, k, kend
end

local function fixed_window(key, pr, now, cost)
  local win, count, k, kend = fw_load(key, pr, now)
  local N, W = pr.N, pr.W
  local e = (win + 1) * W - now -- microseconds to the counting window's end
  if pr.cal then e = (win == k and kend or cal_end(pr.cal, win)) - now end
  local need = cost > 0 and cost or 1
  local d = newdec(N)
  if need > N then
    d.ru = -1
  else
    d.allowed = count <= N - need
    if not d.allowed then d.ru = e end
  end
  local after = count
  if d.allowed and cost > 0 then after = count + cost end
  d.remaining = N - after > 0 and N - after or 0
  if after > 0 then d.su = e end
  if d.allowed and cost > 0 then
    d.write = function() redis.call('SET', key, S(win) .. ':' .. S(after)) end
  end
  return d
end
