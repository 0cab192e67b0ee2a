-- Pop the oldest due member of a sorted set (CORE-146).
-- KEYS[1] = set; ARGV[1] = now, epoch seconds as a float string.
local due = redis.call('ZRANGE', KEYS[1], '-inf', ARGV[1], 'BYSCORE', 'LIMIT', 0, 1)
if due[1] then
  redis.call('ZREM', KEYS[1], due[1])
  return due[1]
end
return nil
