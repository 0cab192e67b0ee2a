-- Claim a batch event and push its callback jobs in one step, on a Redis Cluster (issue
-- 46 item 3): fire.lua's claim and push, in the slot of the callback queue, where the
-- marker lives, so any number of racing processes push the callbacks once and a crash
-- never leaves a claim without its callbacks. The batch's own bookkeeping (the event's
-- flag, its callbacks' jids) is written in the batch's slot afterwards
-- (wurk_django/batch/cluster.py).
-- KEYS = [{q:<queue>}:batch-fired:<bid>:<event>, {q:<queue>}:queue, {q:<queue>}:wake]
-- ARGV = [marker ttl, most wake-up tokens, their TTL, payload, payload, ...]
-- Returns 1 when this call claimed the event (and pushed), 0 when it was claimed already.
if not redis.call("set", KEYS[1], "1", "NX", "EX", ARGV[1]) then
  return 0
end
local count = 0
for i = 4, #ARGV do
  redis.call("lpush", KEYS[2], ARGV[i])
  count = count + 1
end
if count > 0 then
  local most = tonumber(ARGV[2])
  local tokens = {}
  for i = 1, math.min(count, most) do tokens[i] = "1" end
  redis.call("lpush", KEYS[3], unpack(tokens))
  redis.call("ltrim", KEYS[3], 0, most - 1)
  redis.call("expire", KEYS[3], tonumber(ARGV[3]))
end
return 1
