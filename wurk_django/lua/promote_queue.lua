-- Move one queue's due jobs from its own sorted set (retry or schedule) onto its list, in one
-- step: the Redis Cluster layout's promotion (issue 46), every key in the queue's hash slot.
-- KEYS[1] = the set ({q:<name>}:schedule or :retry); KEYS[2] = the queue's list;
-- KEYS[3] = the queue's dead set; KEYS[4] = the queue's wake-up list
-- ARGV[1] = now, epoch seconds (score bound and dead-set score); ARGV[2] = the new enqueued_at
-- as JSON number text (see promote_due.lua); ARGV[3] = at most this many jobs per call;
-- ARGV[4], ARGV[5] = most wake-up tokens kept, their TTL.
-- Returns {jobs taken from the set, of which moved to dead, then those dead members}.
--
-- As promote_due.lua, but every key is declared: the set is per queue, so each due job goes
-- onto the list of the set's own queue (a cluster cannot push onto another slot's list from
-- here). The queue set is not touched: a queue is registered when a job is put in its sets.

--!include lua/snippets/stamp_enqueued_at

local due = redis.call('ZRANGE', KEYS[1], '-inf', ARGV[1], 'BYSCORE', 'LIMIT', 0, tonumber(ARGV[3]))
local buried = 0
local dead = {}
for _, member in ipairs(due) do
  local ok, job = pcall(cjson.decode, member)
  if ok and type(job) == 'table' and type(job['queue']) == 'string' and job['queue'] ~= '' then
    redis.call('LPUSH', KEYS[2], stamp(member, ARGV[2]))
  else
    -- Not a job anybody can run: keep it for a human in the dead set instead of dropping it.
    redis.call('ZADD', KEYS[3], ARGV[1], member)
    buried = buried + 1
    dead[#dead + 1] = member
  end
  redis.call('ZREM', KEYS[1], member)
end
local moved = #due - buried
if moved > 0 then
  local tokens = {}
  for i = 1, math.min(moved, tonumber(ARGV[4])) do tokens[i] = '1' end
  redis.call('LPUSH', KEYS[4], unpack(tokens))
  redis.call('LTRIM', KEYS[4], 0, tonumber(ARGV[4]) - 1)
  redis.call('EXPIRE', KEYS[4], tonumber(ARGV[5]))
end
local reply = {#due, buried}
for _, member in ipairs(dead) do reply[#reply + 1] = member end
return reply
