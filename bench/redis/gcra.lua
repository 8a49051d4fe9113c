-- A hand-written GCRA for redis-benchmark, the baseline bench_redis is compared with:
-- KEYS[1], ARGV[1] = emission interval (us), ARGV[2] = burst tolerance (us).  Server time.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local tat = tonumber(redis.call('GET', KEYS[1])) or now
if tat < now then tat = now end
local new = tat + tonumber(ARGV[1])
if new - now > tonumber(ARGV[2]) then return 0 end
redis.call('SET', KEYS[1], string.format('%.0f', new), 'PX', math.ceil((new - now) / 1000))
return 1
