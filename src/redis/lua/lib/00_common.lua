-- ratelimit's Redis script, part 1: exact integer helpers on Lua numbers (doubles).
-- Every number here stays below 2^53 (the C side refuses policies and times that would not),
-- so + - * on integers are exact; divisions go through idiv, which corrects the rounding of
-- the double quotient.  Durations travel back as (microseconds, extra nanoseconds 0..1000).
local floor = math.floor

-- q, r with a = q*b + r and 0 <= r < b, for b > 0.
local function idiv(a, b)
  local q = floor(a / b)
  local r = a - q * b
  while r < 0 do q = q - 1; r = r + b end
  while r >= b do q = q + 1; r = r - b end
  return q, r
end

local function idivq(a, b)
  local q = idiv(a, b)
  return q
end

-- floor(r * m / b) for 0 <= r < b < 2^52 and 0 <= m < 2^20, where r * m may pass 2^53: m's
-- bits from the top, m' x r = q x b + x with x < b, so every number stays below 2^53.
local function mul_div(r, m, b)
  if r * m < 4503599627370496 then return idivq(r * m, b) end
  local q, x, bit = 0, 0, 524288
  while bit >= 1 do
    q, x = 2 * q, 2 * x
    if x >= b then q, x = q + 1, x - b end
    if m % (2 * bit) >= bit then
      x = x + r
      if x >= b then q, x = q + 1, x - b end
    end
    bit = bit / 2
  end
  return q
end

-- A number as an integer string ("%.0f" never uses an exponent).
local function S(x)
  return string.format('%.0f', x)
end

-- The duration x/scale microseconds (x >= 0) rounded up to the nanosecond, as (us, ns):
-- ns = ceil((x mod scale) * 1000 / scale) in 0..1000.
local function ceil_us_ns(x, scale)
  local q, r = idiv(x, scale)
  if r == 0 then return q, 0 end
  local q2, r2 = idiv(r * 1000, scale)
  if r2 > 0 then q2 = q2 + 1 end
  return q, q2
end

-- A fresh decision.
local function newdec(limit)
  return {allowed = false, limit = limit, remaining = 0, ru = 0, rn = 0, su = 0, sn = 0,
          du = 0, dn = 0, lease = 0, write = nil}
end
