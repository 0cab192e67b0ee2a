-- A child batch drained: take it off its parent's pending kids and report the
-- parent's state in the same step, so two siblings finishing together cannot
-- both see an empty set (PRO-276).
-- KEYS = [b-<parent>, b-<parent>-jids, b-<parent>-pkids]
-- ARGV = [child bid]
-- Returns [pending, live, pending kids]; live = -1 when the parent is gone.
redis.call("srem", KEYS[3], ARGV[1])
if redis.call("exists", KEYS[1]) == 0 then
  return {0, -1, -1}
end
local pending = tonumber(redis.call("hget", KEYS[1], "pending") or "0")
return {pending, redis.call("scard", KEYS[2]), redis.call("scard", KEYS[3])}
