-- Take jids out of a batch (PRO-279): they no longer count in total or pending.
-- KEYS = [b-<bid>, b-<bid>-jids, b-<bid>-failed, b-<bid>-pkids]
-- ARGV = [jid, ...]
-- Returns [removed, pending, live, pending kids]; live = -1 when the batch is gone.
local exists = redis.call("exists", KEYS[1]) == 1
local removed = 0
for i = 1, #ARGV do
  if redis.call("srem", KEYS[2], ARGV[i]) == 1 then
    removed = removed + 1
    if redis.call("srem", KEYS[3], ARGV[i]) == 1 and exists then
      redis.call("hincrby", KEYS[1], "failures", -1)
    end
  end
end
if not exists then
  return {removed, 0, -1, -1}
end
local pending
if removed > 0 then
  redis.call("hincrby", KEYS[1], "total", -removed)
  pending = redis.call("hincrby", KEYS[1], "pending", -removed)
else
  pending = tonumber(redis.call("hget", KEYS[1], "pending") or "0")
end
return {removed, pending, redis.call("scard", KEYS[2]), redis.call("scard", KEYS[4])}
