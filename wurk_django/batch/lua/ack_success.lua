-- A batch job succeeded (or a hold was released) (PRO-273).
-- KEYS = [b-<bid>, b-<bid>-jids, b-<bid>-failed, b-<bid>-pkids]
-- ARGV = [jid]
-- Returns [removed, pending, live, pending kids]; live = -1 when the batch is
-- gone, so a straggler can never fire a deleted or expired batch.
if redis.call("exists", KEYS[1]) == 0 then
  local gone = redis.call("srem", KEYS[2], ARGV[1])
  return {gone, 0, -1, -1}
end
-- Before the live-set removal, so an invalidated batch still converges.
if redis.call("srem", KEYS[3], ARGV[1]) == 1 then
  redis.call("hincrby", KEYS[1], "failures", -1)
end
local removed = redis.call("srem", KEYS[2], ARGV[1])
local pending
if removed == 1 then
  pending = redis.call("hincrby", KEYS[1], "pending", -1)
else
  pending = tonumber(redis.call("hget", KEYS[1], "pending") or "0")
end
return {removed, pending, redis.call("scard", KEYS[2]), redis.call("scard", KEYS[4])}
