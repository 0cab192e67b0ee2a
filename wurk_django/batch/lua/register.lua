-- Register jobs in their batch before they are pushed, on a Redis Cluster (issue 46
-- item 3): push.lua / schedule.lua without the push, which goes to the job's queue's
-- slot afterwards (wurk_django/batch/cluster.py says why in that order). Also the
-- registration of a child's callbacks in its parent (fire.lua's part in the parent).
-- KEYS = [{b:<bid>}, {b:<bid>}:jids, {b:<bid>}:died]
-- ARGV = [expiry seconds, revive (1: a jid back from the dead set becomes live again,
--         as push.lua does), must exist (1: nothing is written for a batch that is
--         gone, as fire.lua does for a parent), jid, jid, ...]
-- A jid already a member is not counted again, so a resend counts nothing twice.
-- Returns how many jids were counted now, -1 when the batch is gone (must exist), or -2 when
-- a jid back from the dead set made the batch live again (its death flag cleared here: the
-- caller then takes it out of the fleet's dead-batches index, a key of another slot).
if ARGV[3] == "1" and redis.call("exists", KEYS[1]) == 0 then
  return -1
end
local counted, revived = 0, false
for i = 4, #ARGV do
  local jid = ARGV[i]
  if ARGV[2] == "1" and redis.call("srem", KEYS[3], jid) == 1 then
    redis.call("sadd", KEYS[2], jid)
    if redis.call("scard", KEYS[3]) == 0 then
      redis.call("hdel", KEYS[1], "death")
      revived = true
    end
  elseif redis.call("sadd", KEYS[2], jid) == 1 then
    redis.call("hincrby", KEYS[1], "total", 1)
    redis.call("hincrby", KEYS[1], "pending", 1)
    counted = counted + 1
  end
end
-- NX: a key this script creates gets a TTL; a live batch's clock is never extended.
redis.call("expire", KEYS[1], ARGV[1], "NX")
redis.call("expire", KEYS[2], ARGV[1], "NX")
if revived then
  return -2
end
return counted
