-- Leaky bucket: the level drains continuously at drain_per_sec; a call is
-- admitted when one more unit fits under bucket_size.
-- KEYS[1] = lmtr-l:<name> (HASH level, last)
-- ARGV = bucket_size, drain_per_sec, ttl seconds
-- An optional last ARGV is "now" (epoch seconds) that the caller read from an
-- earlier Redis TIME; without it the script reads TIME itself.
-- Numbers are stored as decimal strings with microsecond precision (Lua's own
-- number-to-string keeps 14 digits, which drops the fraction of an epoch time).
-- Returns {1 admitted | 0 refused, level as a string}.
local now
if ARGV[4] then
  now = tonumber(ARGV[4])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) + tonumber(t[2]) / 1000000
end
local size = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local state = redis.call('HMGET', KEYS[1], 'level', 'last')
local level = tonumber(state[1] or '0')
local last = tonumber(state[2] or now)
local elapsed = now - last
if elapsed < 0 then elapsed = 0 end
level = level - elapsed * rate
if level < 0 then level = 0 end
local ok = 0
if level + 1 <= size then
  level = level + 1
  ok = 1
end
redis.call('HSET', KEYS[1], 'level', string.format('%.6f', level), 'last', string.format('%.6f', now))
redis.call('EXPIRE', KEYS[1], ARGV[3])
return {ok, string.format('%.6f', level)}
