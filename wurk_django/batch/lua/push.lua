-- Push one batch job and register it in its batch, atomically (PRO-270).
-- KEYS = [b-<bid>, b-<bid>-jids, queue:<q>, queues, b-<bid>-died, dead-batches, wake:<q>]
-- ARGV = [queue name, jid, payload, bid, expiry seconds, front (0/1), most wake-up tokens, their TTL]
-- A jid that is already a member (a retry, a scheduled promotion) is pushed
-- without being counted again; a jid coming back from the dead set (a retry
-- from the morgue) becomes live again without a recount, and when the last
-- dead job of the batch is back the batch loses its death flag. The push is
-- the shared one, wake-up token included, so an idle fetcher starts the job
-- when it lands, even when a jobs() block sends it late from its buffer.
--!include lua/snippets/push_job

if redis.call("srem", KEYS[5], ARGV[2]) == 1 then
  redis.call("sadd", KEYS[2], ARGV[2])
  if redis.call("scard", KEYS[5]) == 0 then
    redis.call("hdel", KEYS[1], "death")
    redis.call("zrem", KEYS[6], ARGV[4])
  end
elseif redis.call("sadd", KEYS[2], ARGV[2]) == 1 then
  redis.call("hincrby", KEYS[1], "total", 1)
  redis.call("hincrby", KEYS[1], "pending", 1)
end
-- NX: a key this script creates gets a TTL; a live batch's clock (or its
-- shorter post-success linger) is never extended.
redis.call("expire", KEYS[1], ARGV[5], "NX")
redis.call("expire", KEYS[2], ARGV[5], "NX")
push_job(KEYS[4], ARGV[1], KEYS[3], ARGV[3], KEYS[7], ARGV[6] == "1")
wake_fetchers(ARGV[7], ARGV[8])
return 1
