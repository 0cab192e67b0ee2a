-- Free slots of a capped queue on a Redis Cluster (issue 46 item 3): a run settled, or a
-- job taken with a slot went back unrun. The one-server step (release.lua) also wakes
-- fetchers through fleet-wide keys; a cluster fetcher polls a capped queue instead.
-- KEYS[1] = the queue's slot hash ({q:<name>}:limit).
-- ARGV[1] = the field (the private list the job was fetched into), ARGV[2] = how many.
-- The field goes once it counts none. Returns what it still counts.
local left = redis.call('HINCRBY', KEYS[1], ARGV[1], -tonumber(ARGV[2]))
if left <= 0 then
  redis.call('HDEL', KEYS[1], ARGV[1])
end
return left
