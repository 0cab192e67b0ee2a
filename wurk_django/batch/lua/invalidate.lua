-- Flag a batch invalidated (PRO-277). Its members stay: queued jobs are
-- skipped by the workers, acked as successes, and the batch drains normally.
-- KEYS = [b-<bid>]
if redis.call("exists", KEYS[1]) == 0 then
  return 0
end
redis.call("hset", KEYS[1], "invalidated", "1")
return 1
