-- Sliding window counter (mirrors src/core/sliding_window.c): string "w:p:c", p = previous
-- window's count, c = current window's count (the format of sliding_window.lua); allow iff
-- p*(W-e) + (c+cost)*W <= N*W.
-- A settle's debt can hold counts up to 2^52 (settle.lua), so a count times W may pass 2^53:
-- such products are never formed, only compared through a quotient (prev x (W - e) <= s iff
-- prev <= floor(s / (W - e))), and a weighted count past N x W is kept as N x W + 1.
-- Mixed instants (us, ns) keep 0 <= ns < 1000.
local function mixed_lt(au, an, bu, bn)
  return au < bu or (au == bu and an < bn)
end

-- Earliest instant (us, ns) at which `need` fits (core's earliest(), exact to the ns).
local function sw_earliest(pr, win, prev, curr, e, need)
  local N, W = pr.N, pr.W
  for step = 0, 2 do
    local P, C, e0 = 0, 0, 0
    if step == 0 then P, C, e0 = prev, curr, e elseif step == 1 then P = curr end
    if C + need <= N then
      local slack = (N - C - need) * W -- microseconds x count, <= N x W
      local eu, en = 0, 0 -- emin = W - slack/P in ns, floored in the division
      if P ~= 0 then
        local q, r = idiv(slack, P)
        local extra = mul_div(r, 1000, P) -- floor(1000*slack/P) = 1000q + extra
        if extra == 0 then eu, en = W - q, 0 else eu, en = W - q - 1, 1000 - extra end
      end
      if mixed_lt(eu, en, e0, 0) then eu, en = e0, 0 end
      if mixed_lt(eu, en, W, 0) then return (win + step) * W + eu, en end
    end
  end
  return nil
end

-- The key's window and counts rolled to now's window k (the previous window's count moves
-- back, an older one is gone): what the decision and settle.lua start from.
local function sw_load(key, pr, now)
  local win, prev, curr = 0, 0, 0
  local v = redis.call('GET', key)
  if v then
    local a = string.find(v, ':', 1, true)
    local b = string.find(v, ':', a + 1, true)
    win, prev, curr = tonumber(string.sub(v, 1, a - 1)), tonumber(string.sub(v, a + 1, b - 1)),
                      tonumber(string.sub(v, b + 1))
  end
  local k = idivq(now, pr.W)
  if prev == 0 and curr == 0 then win = k end
  if k == win + 1 then
    prev, curr, win = curr, 0, k
  elseif k > win + 1 then
    prev, curr, win = 0, 0, k
  end
  return win, prev, curr, k
end

local function sliding_window(key, pr, now, cost)
  local win, prev, curr, k = sw_load(key, pr, now)
  local N, W = pr.N, pr.W
  local e = 0
  if k == win then e = now - k * W end
  local need = cost > 0 and cost or 1
  local NW = N * W
  local weighted = NW + 1
  if prev <= idivq(NW, W - e) then weighted = prev * (W - e) end
  local d = newdec(N)
  if need > N then
    d.ru = -1
  else
    d.allowed = curr + need <= N and weighted <= (N - curr - need) * W
    if not d.allowed then
      local tu, tn = sw_earliest(pr, win, prev, curr, e, need)
      d.ru, d.rn = tu - now, tn
    end
  end
  local curr_after = curr
  if d.allowed and cost > 0 then curr_after = curr + cost end
  if curr_after < N then
    local left = NW - weighted - curr_after * W
    if left > 0 then d.remaining = idivq(left, W) end
  end
  if curr_after > 0 then
    d.su = (win + 2) * W - now
  elseif prev > 0 then
    d.su = (win + 1) * W - now
  end
  if d.allowed and cost > 0 then
    d.write = function()
      redis.call('SET', key, S(win) .. ':' .. S(prev) .. ':' .. S(curr_after))
    end
  end
  return d
end
