-- A batch job failed and will be retried (PRO-274). Failing twice counts once.
-- KEYS = [b-<bid>, b-<bid>-failed]
-- ARGV = [jid, expiry seconds]
-- A batch that is gone is not brought back by a late failure.
if redis.call("exists", KEYS[1]) == 0 then
  return 0
end
if redis.call("sadd", KEYS[2], ARGV[1]) == 1 then
  redis.call("hincrby", KEYS[1], "failures", 1)
end
redis.call("expire", KEYS[1], ARGV[2], "NX")
redis.call("expire", KEYS[2], ARGV[2], "NX")
return 1
