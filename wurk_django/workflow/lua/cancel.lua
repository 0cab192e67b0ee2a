-- Cancel a workflow: steps not yet succeeded or failed become 'cancelled' (jobs of
-- enqueued steps are skipped when a worker takes them), and every key gets the
-- after-finishing TTL.
-- KEYS = [wf, state, left, results, errors, wire, steps]
-- ARGV = [now (epoch seconds), seconds kept after finishing]
-- Returns 1 when cancelled now, 0 when it had already finished, -1 when gone.
local state = redis.call('HGET', KEYS[1], 'state')
if not state then return -1 end
if state ~= 'running' and state ~= 'failed' then return 0 end
local all = redis.call('HGETALL', KEYS[2])
for i = 1, #all, 2 do
  local s = all[i + 1]
  if s == 'waiting' or s == 'enqueued' then redis.call('HSET', KEYS[2], all[i], 'cancelled') end
end
redis.call('HSET', KEYS[1], 'state', 'cancelled', 'finished_at', ARGV[1])
for i = 1, #KEYS do redis.call('EXPIRE', KEYS[i], ARGV[2]) end
return 1
