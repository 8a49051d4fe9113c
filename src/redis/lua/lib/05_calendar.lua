-- Calendar windows (fixed_window:N/1mo, /1y in a time zone): src/core/calendar.c in Lua, line
-- for line, so the scripts and the C library put every instant in the same month.  The zone
-- comes as the string the C side writes (layout.c, rlt__rpol.cal): "months,std_off,dst_off,
-- has_dst,start kind,day,month,week,secs,end kind,day,month,week,secs".  Every number is an
-- integer below 2^53 (seconds since 1970, days), so + - * are exact and cdiv corrects the
-- rounding of the double quotient.  Used by fixed_window.lua and lib/10_fixed_window.lua.
local function cdiv(a, b)
  local q = math.floor(a / b)
  local r = a - q * b
  while r < 0 do q = q - 1; r = r + b end
  while r >= b do q = q + 1; r = r - b end
  return q
end

local function days_from_civil(y, m, d)
  if m <= 2 then y = y - 1 end
  local era = cdiv(y, 400)
  local yoe = y - era * 400
  local mp = m > 2 and m - 3 or m + 9
  local doy = cdiv(153 * mp + 2, 5) + d - 1
  local doe = yoe * 365 + cdiv(yoe, 4) - cdiv(yoe, 100) + doy
  return era * 146097 + doe - 719468
end

local function civil_from_days(z)
  z = z + 719468
  local era = cdiv(z, 146097)
  local doe = z - era * 146097
  local yoe = cdiv(doe - cdiv(doe, 1460) + cdiv(doe, 36524) - cdiv(doe, 146096), 365)
  local doy = doe - (365 * yoe + cdiv(yoe, 4) - cdiv(yoe, 100))
  local mp = cdiv(5 * doy + 2, 153)
  local m = mp < 10 and mp + 3 or mp - 9
  local y = yoe + era * 400
  if m <= 2 then y = y + 1 end
  return y, m
end

local function cal_leap(y)
  return (y % 4 == 0 and y % 100 ~= 0) or y % 400 == 0
end

-- The day (since 1970-01-01) of rule date r = {kind, day, month, week, secs} in year y.
local function rule_day(r, y)
  local jan1 = days_from_civil(y, 1, 1)
  if r.kind == 0 then
    local x = jan1 + r.day - 1
    if cal_leap(y) and r.day >= 60 then x = x + 1 end
    return x
  end
  if r.kind == 1 then return jan1 + r.day end
  local m = r.month
  local first = days_from_civil(y, m, 1)
  local nxt = m == 12 and days_from_civil(y + 1, 1, 1) or days_from_civil(y, m + 1, 1)
  local wd = (first + 4) % 7
  local d = first + (r.day - wd) % 7 + 7 * (r.week - 1)
  while d >= nxt do d = d - 7 end
  return d
end

local function cal_parse(s)
  local v = {}
  for x in string.gmatch(s, '[^,]+') do v[#v + 1] = tonumber(x) end
  return {months = v[1], std = v[2], dst = v[3], has_dst = v[4] == 1,
          s = {kind = v[5], day = v[6], month = v[7], week = v[8], secs = v[9]},
          e = {kind = v[10], day = v[11], month = v[12], week = v[13], secs = v[14]}}
end

-- The DST changes of the years y-2..y+2, sorted (an end before a start at the same second).
local function span_of(z, y)
  local c = {}
  for yy = y - 2, y + 2 do
    c[#c + 1] = {at = rule_day(z.s, yy) * 86400 + z.s.secs - z.std, off = z.dst, start = 1}
    c[#c + 1] = {at = rule_day(z.e, yy) * 86400 + z.e.secs - z.dst, off = z.std, start = 0}
  end
  table.sort(c, function(a, b)
    if a.at ~= b.at then return a.at < b.at end
    return a.start < b.start
  end)
  return c
end

local function span_offset(z, c, t)
  local off = z.std
  for i = 1, #c do
    if c[i].at > t then break end
    off = c[i].off
  end
  return off
end

-- The first Unix second whose local date is in `month` (months since 1970-01).
local function span_month_start(z, c, month)
  local y = 1970 + cdiv(month, 12)
  local T = days_from_civil(y, month - cdiv(month, 12) * 12 + 1, 1) * 86400
  if not z.has_dst then return T - z.std end
  local a, o = nil, z.std
  for i = 1, #c + 1 do
    local u = T - o
    if a and u < a then u = a end
    if i > #c or u < c[i].at then return u end
    a, o = c[i].at, c[i].off
  end
end

local function cal_year_of(t)
  local y = civil_from_days(cdiv(t, 86400))
  return y
end

local function cal_month_start(z, month)
  local c = z.has_dst and span_of(z, 1970 + cdiv(month, 12)) or {}
  return span_month_start(z, c, month)
end

-- The end (Unix microseconds) of calendar window `win`.
local function cal_end(z, win)
  return cal_month_start(z, (win + 1) * z.months) * 1000000
end

-- The calendar window of Unix microsecond `now`, and its end (Unix microseconds).
local function cal_window(z, now)
  local t = cdiv(now, 1000000)
  local c = z.has_dst and span_of(z, cal_year_of(t + z.std)) or {}
  local off = z.has_dst and span_offset(z, c, t) or z.std
  local y, m = civil_from_days(cdiv(t + off, 86400))
  local month = (y - 1970) * 12 + m - 1
  local here, nxt = span_month_start(z, c, month), nil
  if t < here then
    nxt = here
    month = month - 1
  else
    nxt = span_month_start(z, c, month + 1)
    if t >= nxt then
      month = month + 1
      nxt = span_month_start(z, c, month + 1)
    end
  end
  local win = cdiv(month, z.months)
  if z.months == 1 then return win, nxt * 1000000 end
  return win, cal_end(z, win)
end
