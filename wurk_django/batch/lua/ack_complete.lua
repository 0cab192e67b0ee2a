-- A batch job died (PRO-275): it leaves the live set (so :complete can fire)
-- but stays pending (so :success cannot, until a retry from the morgue works).
-- KEYS = [b-<bid>, b-<bid>-jids, b-<bid>-died, b-<bid>-failed, b-<bid>-pkids]
-- ARGV = [jid, expiry seconds]
-- Returns [live, died, first death (0/1), pending kids, pending]; live = -1
-- when the batch is gone (nothing is written then).
if redis.call("exists", KEYS[1]) == 0 then
  redis.call("srem", KEYS[2], ARGV[1])
  return {-1, 0, 0, -1, 0}
end
local prior = redis.call("scard", KEYS[3])
redis.call("srem", KEYS[2], ARGV[1])
if redis.call("srem", KEYS[4], ARGV[1]) == 1 then
  redis.call("hincrby", KEYS[1], "failures", -1)
end
local added = redis.call("sadd", KEYS[3], ARGV[1])
redis.call("expire", KEYS[1], ARGV[2], "NX")
redis.call("expire", KEYS[3], ARGV[2], "NX")
local first = 0
if prior == 0 and added == 1 then
  first = 1
end
local pending = tonumber(redis.call("hget", KEYS[1], "pending") or "0")
return {redis.call("scard", KEYS[2]), redis.call("scard", KEYS[3]), first, redis.call("scard", KEYS[5]), pending}
