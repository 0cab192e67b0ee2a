-- Fetch one job of a capped queue on a Redis Cluster, taking a slot in the same atomic
-- step (issue 46 item 3; the one-server step is fetch.lua). Every key is in the queue's
-- hash slot ({q:<name>}), so the cap's check, the move and the count are one script.
-- KEYS[1] = the queue ({q:<name>}:queue), KEYS[2] = the fetching thread's private list
-- ({q:<name>}:private|<host>|<pid>|<nonce>|<slot>), KEYS[3] = the queue's slot hash
-- ({q:<name>}:limit: private list -> jobs of it running).
-- ARGV[1] = the queue's limit.
-- A full queue is not touched. Returns the job, or false when the queue is empty or full.
local used = 0
for _, count in ipairs(redis.call('HVALS', KEYS[3])) do
  used = used + tonumber(count)
end
if used >= tonumber(ARGV[1]) then
  return false
end
local job = redis.call('LMOVE', KEYS[1], KEYS[2], 'RIGHT', 'LEFT')
if job then
  redis.call('HINCRBY', KEYS[3], KEYS[2], 1)
end
return job
