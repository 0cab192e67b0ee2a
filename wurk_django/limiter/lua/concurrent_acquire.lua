-- Take one concurrent slot if one is free.
-- KEYS[1] = lmtr-cs:<name> (ZSET slot id -> expiry epoch), KEYS[2] = lmtr-stats:<name>
-- ARGV = limit, lock_timeout seconds, slot id, ttl seconds
-- Slots whose holder outlived lock_timeout (a crashed process, say) are
-- evicted first and counted as reclaimed.
-- An optional last ARGV is "now" (epoch seconds) that the caller read from an
-- earlier Redis TIME; without it the script reads TIME itself.
-- Returns {1 taken | 0 refused, slots held, slots reclaimed by this call}.
local now
if ARGV[5] then
  now = math.floor(tonumber(ARGV[5]))
else
  now = tonumber(redis.call('TIME')[1])
end
local reclaimed = redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. now)
if reclaimed > 0 then
  redis.call('HINCRBY', KEYS[2], 'reclaimed', reclaimed)
end
local held = redis.call('ZCARD', KEYS[1])
if held < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[3])
  redis.call('HINCRBY', KEYS[2], 'held', 1)
  redis.call('EXPIRE', KEYS[1], ARGV[4])
  redis.call('EXPIRE', KEYS[2], ARGV[4])
  return {1, held + 1, reclaimed}
end
return {0, held, reclaimed}
