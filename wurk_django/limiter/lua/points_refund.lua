-- Settle a points call: add back estimate - actual (negative when the call
-- cost more than estimated), keeping the balance within [0, cap].
-- KEYS[1] = lmtr-p:<name>; ARGV = delta, cap, ttl seconds. `last` is left
-- alone so the refill clock is not disturbed. Returns the balance as a string.
local v = tonumber(redis.call('HGET', KEYS[1], 'points') or '0') + tonumber(ARGV[1])
local cap = tonumber(ARGV[2])
if v < 0 then v = 0 end
if v > cap then v = cap end
redis.call('HSET', KEYS[1], 'points', string.format('%.6f', v))
redis.call('EXPIRE', KEYS[1], ARGV[3])
return string.format('%.6f', v)
