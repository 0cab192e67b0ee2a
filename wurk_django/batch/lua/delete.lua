-- Delete a batch (PRO-280) and unlink it from its parent, its indexes and tags.
-- KEYS = [<n own keys>, batches, dead-batches,
--         (b-<parent>, parent -jids, parent -pkids, parent -kids when it has a parent),
--         tags:<t>, ...]
-- ARGV = [bid, n, has parent (0/1)]
-- Returns the parent's state [pending, live, pending kids] so the caller can
-- run the parent's gate; [0, -1, -1] without a parent.
local bid = ARGV[1]
local n = tonumber(ARGV[2])
for i = 1, n do
  redis.call("unlink", KEYS[i])
end
redis.call("zrem", KEYS[n + 1], bid)
redis.call("zrem", KEYS[n + 2], bid)
local nxt = n + 3
local state = {0, -1, -1}
if ARGV[3] == "1" then
  redis.call("srem", KEYS[nxt + 3], bid)
  redis.call("srem", KEYS[nxt + 2], bid)
  if redis.call("exists", KEYS[nxt]) == 1 then
    local pending = tonumber(redis.call("hget", KEYS[nxt], "pending") or "0")
    state = {pending, redis.call("scard", KEYS[nxt + 1]), redis.call("scard", KEYS[nxt + 2])}
  end
  nxt = nxt + 4
end
for i = nxt, #KEYS do
  redis.call("srem", KEYS[i], bid)
end
return state
