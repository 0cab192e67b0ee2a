-- A step's run failed (it may be retried): keep its error for the workflow's readers.
-- KEYS = [wf, state, errors]
-- ARGV = [step, error text]
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
if redis.call('HGET', KEYS[2], ARGV[1]) == 'succeeded' then return 0 end
redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
local ttl = redis.call('TTL', KEYS[1])
if ttl > 0 then redis.call('EXPIRE', KEYS[3], ttl) end
return 1
