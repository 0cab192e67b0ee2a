-- A failed step is being run again: it is 'enqueued' once more, and the workflow
-- runs again when no step is left failed.
-- KEYS = [wf, state]
-- ARGV = [step]
-- Returns 1 when the step was failed (and is now enqueued), 0 otherwise, -1 when the workflow is gone.
local state = redis.call('HGET', KEYS[1], 'state')
if not state then return -1 end
if state == 'cancelled' or redis.call('HGET', KEYS[2], ARGV[1]) ~= 'failed' then return 0 end
redis.call('HSET', KEYS[2], ARGV[1], 'enqueued')
if redis.call('HINCRBY', KEYS[1], 'failed', -1) <= 0 and state == 'failed' then
  redis.call('HSET', KEYS[1], 'state', 'running')
end
return 1
