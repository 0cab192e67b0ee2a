-- Move one queue's due jobs from its own sorted set (retry or schedule) onto its list, in one
-- step: the Redis Cluster layout's promotion (issue 46), every key in the queue's hash slot.
-- KEYS[1] = the set ({q:<name>}:schedule or :retry); KEYS[2] = the queue's list;
-- KEYS[3] = the queue's dead set; KEYS[4] = the queue's wake-up list
-- ARGV[1] = now, epoch seconds (score bound and dead-set score); ARGV[2] = the new enqueued_at
-- as JSON number text (see promote_due.lua); ARGV[3] = at most this many jobs per call;
-- ARGV[4], ARGV[5] = most wake-up tokens kept, their TTL.
-- Returns {jobs taken from the set, of which moved to dead, then those dead members}.
--
-- As promote_due.lua, but for one queue: the set is per queue, so each due job goes onto the
-- list of the set's own queue (a cluster cannot push onto another slot's list from here). The
-- queue set is not touched: a queue is registered when a job is put in its sets.

--!include lua/snippets/stamp_enqueued_at

--!include lua/snippets/promote_members

local taken, buried, dead = promote_members(KEYS[1], KEYS[3], ARGV[1], ARGV[3], function(_queue, member)
  redis.call('LPUSH', KEYS[2], stamp(member, ARGV[2]))
  return true
end)
local moved = taken - buried
if moved > 0 then
  local tokens = {}
  for i = 1, math.min(moved, tonumber(ARGV[4])) do tokens[i] = '1' end
  redis.call('LPUSH', KEYS[4], unpack(tokens))
  redis.call('LTRIM', KEYS[4], 0, tonumber(ARGV[4]) - 1)
  redis.call('EXPIRE', KEYS[4], tonumber(ARGV[5]))
end
local reply = {taken, buried}
for _, member in ipairs(dead) do reply[#reply + 1] = member end
return reply
