-- A batch deleted on a Redis Cluster leaves its parent (issue 46 item 3): the part of
-- delete.lua that touches the parent's keys, all in the parent's slot ({b:<parent>}).
-- KEYS[1] = the parent's hash, KEYS[2] = its -jids, KEYS[3] = its -pkids, KEYS[4] = its -kids.
-- ARGV[1] = the deleted batch's bid.
-- Returns the parent's state [pending, live, pending kids] so the caller can run the
-- parent's gate; [0, -1, -1] when the parent is gone.
redis.call("srem", KEYS[4], ARGV[1])
redis.call("srem", KEYS[3], ARGV[1])
if redis.call("exists", KEYS[1]) == 1 then
  local pending = tonumber(redis.call("hget", KEYS[1], "pending") or "0")
  return {pending, redis.call("scard", KEYS[2]), redis.call("scard", KEYS[3])}
end
return {0, -1, -1}
