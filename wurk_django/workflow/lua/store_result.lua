-- Keep a step's result (JSON text) until the step is recorded as succeeded; a
-- replay of a step that already succeeded keeps the first result, the one its
-- dependents were given.
-- KEYS = [wf, state, results]
-- ARGV = [step, result JSON]
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
if redis.call('HGET', KEYS[2], ARGV[1]) == 'succeeded' then return 0 end
redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
-- The results hash is created here: it lives as long as the workflow.
local ttl = redis.call('TTL', KEYS[1])
if ttl > 0 then redis.call('EXPIRE', KEYS[3], ttl) end
return 1
