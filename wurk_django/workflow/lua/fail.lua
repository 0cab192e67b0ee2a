-- A workflow step's job died: the step fails and so does the workflow; its
-- dependents stay waiting (their counters never reach zero) until it is retried.
-- KEYS = [wf, state, errors]
-- ARGV = [step, error text, now (epoch seconds)]
-- Returns 1 when this call failed the step, 0 when it was already failed, finished
-- or cancelled, -1 when the workflow is gone.
local state = redis.call('HGET', KEYS[1], 'state')
if not state then return -1 end
local was = redis.call('HGET', KEYS[2], ARGV[1])
if not was or was == 'succeeded' or was == 'cancelled' then return 0 end
redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
local ttl = redis.call('TTL', KEYS[1])
if ttl > 0 then redis.call('EXPIRE', KEYS[3], ttl) end
if was == 'failed' then return 0 end
redis.call('HSET', KEYS[2], ARGV[1], 'failed')
redis.call('HINCRBY', KEYS[1], 'failed', 1)
if state == 'running' then
  redis.call('HSET', KEYS[1], 'state', 'failed', 'failed_at', ARGV[3])
end
return 1
