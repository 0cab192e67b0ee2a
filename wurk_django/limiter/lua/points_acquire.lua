-- Points: a balance refilled at `refill` points per second up to `cap`; a
-- call spends its estimate when the balance covers it.
-- KEYS[1] = lmtr-p:<name> (HASH points, last)
-- ARGV = cap, refill per second, estimate, ttl seconds
-- An optional last ARGV is "now" (epoch seconds) that the caller read from an
-- earlier Redis TIME; without it the script reads TIME itself.
-- Returns {1 spent | 0 refused, balance as a string}.
local now
if ARGV[5] then
  now = tonumber(ARGV[5])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) + tonumber(t[2]) / 1000000
end
local cap = tonumber(ARGV[1])
local state = redis.call('HMGET', KEYS[1], 'points', 'last')
local bal = tonumber(state[1] or cap)
local last = tonumber(state[2] or now)
local elapsed = now - last
if elapsed < 0 then elapsed = 0 end
bal = bal + elapsed * tonumber(ARGV[2])
if bal > cap then bal = cap end
local ok = 0
local estimate = tonumber(ARGV[3])
if bal >= estimate then
  bal = bal - estimate
  ok = 1
end
redis.call('HSET', KEYS[1], 'points', string.format('%.6f', bal), 'last', string.format('%.6f', now))
redis.call('EXPIRE', KEYS[1], ARGV[4])
return {ok, string.format('%.6f', bal)}
