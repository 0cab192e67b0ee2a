-- Schedule one batch job and register it in its batch, atomically (PRO-271).
-- KEYS = [schedule, b-<bid>, b-<bid>-jids]
-- ARGV = [run-at score, payload, jid, expiry seconds]
if redis.call("sadd", KEYS[3], ARGV[3]) == 1 then
  redis.call("hincrby", KEYS[2], "total", 1)
  redis.call("hincrby", KEYS[2], "pending", 1)
end
redis.call("expire", KEYS[2], ARGV[4], "NX")
redis.call("expire", KEYS[3], ARGV[4], "NX")
redis.call("zadd", KEYS[1], ARGV[1], ARGV[2])
return 1
