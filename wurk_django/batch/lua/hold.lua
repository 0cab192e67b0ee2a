-- Keep a batch open while a jobs() block runs (PRO-272): a sentinel member
-- counts as pending (not in total), so the batch cannot drain before the block
-- has pushed everything. The same sentinel taken twice counts once.
-- KEYS = [b-<bid>, b-<bid>-jids]
-- ARGV = [sentinel, expiry seconds]
local added = redis.call("sadd", KEYS[2], ARGV[1])
if added == 1 then
  redis.call("hincrby", KEYS[1], "pending", 1)
end
redis.call("expire", KEYS[1], ARGV[2], "NX")
redis.call("expire", KEYS[2], ARGV[2], "NX")
return added
