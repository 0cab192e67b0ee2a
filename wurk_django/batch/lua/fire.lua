-- Fire one batch event (complete, success or death) at most once, and push its
-- callback jobs in the same atomic step: the marker key is claimed with SET NX,
-- and only the claimer pushes, so any number of racing processes enqueue the
-- callbacks once, and a crash can never leave a marker without its callbacks.
-- The callbacks are pushed by the shared push snippet, wake-up tokens included,
-- so an idle worker starts them at once, as it does any other push.
-- KEYS = [b-<bid>, b-<bid>-<event>, dead-batches, queues, queue:<callback queue>,
--         wake:<callback queue>, (b-<parent>, b-<parent>-jids when callbacks join the parent)]
-- ARGV = [event, bid, now, marker ttl, expiry, dead-index cutoff, index max,
--         callback queue, joins parent (0/1), most wake-up tokens, their TTL,
--         jid, payload, jid, payload, ...]
-- The callback jobs' jids are kept in the batch hash (<event>_jids, comma-separated,
-- in the order of the callbacks), so the admin can show each one's state.
-- Returns 1 when this call fired the event, 0 when it had fired already,
-- -1 when the batch is gone.
--!include lua/snippets/push_job

if redis.call("exists", KEYS[1]) == 0 then
  return -1
end
local event = ARGV[1]
if event == "death" then
  -- The death flag is (re)applied every time: a recovered batch can die again
  -- even though its :death callbacks only ever run once.
  redis.call("hset", KEYS[1], "death", "1", "death_at", ARGV[3])
  redis.call("zadd", KEYS[3], ARGV[3], ARGV[2])
  redis.call("zremrangebyscore", KEYS[3], "-inf", "(" .. ARGV[6])
  redis.call("zremrangebyrank", KEYS[3], 0, -tonumber(ARGV[7]))
end
if not redis.call("set", KEYS[2], "1", "NX", "EX", ARGV[4]) then
  return 0
end
if event ~= "death" then
  redis.call("hset", KEYS[1], event, "1", event .. "_at", ARGV[3])
end
redis.call("expire", KEYS[1], ARGV[5], "NX")
local joins = ARGV[9] == "1" and redis.call("exists", KEYS[7]) == 1
local jids = {}
for i = 12, #ARGV, 2 do
  jids[#jids + 1] = ARGV[i]
  if joins then
    if redis.call("sadd", KEYS[8], ARGV[i]) == 1 then
      redis.call("hincrby", KEYS[7], "total", 1)
      redis.call("hincrby", KEYS[7], "pending", 1)
    end
    redis.call("expire", KEYS[7], ARGV[5], "NX")
    redis.call("expire", KEYS[8], ARGV[5], "NX")
  end
  push_job(KEYS[4], ARGV[8], KEYS[5], ARGV[i + 1], KEYS[6], false)
end
if #jids > 0 then
  redis.call("hset", KEYS[1], event .. "_jids", table.concat(jids, ","))
end
wake_fetchers(ARGV[10], ARGV[11])
return 1
