-- Free slots of a capped queue (issue 47 item 4): a run settled, or a job taken with a
-- slot went back unrun. KEYS[1] = the queue's slot hash, KEYS[2] = the queue's wake-up
-- list, KEYS[3] = the marker saying a fetcher waits on wake-up lists.
-- ARGV[1] = the field (the private list the job was fetched into), ARGV[2] = how many.
-- ARGV[3] = most wake-up tokens, ARGV[4] = their time to live.
-- The field goes once it counts none. A fetcher polling the wake-up lists (no push watch)
-- is told at once that a slot is free; one on the push watch hears the hash change.
local left = redis.call('HINCRBY', KEYS[1], ARGV[1], -tonumber(ARGV[2]))
if left <= 0 then
  redis.call('HDEL', KEYS[1], ARGV[1])
end
if redis.call('EXISTS', KEYS[3]) == 1 then
  redis.call('LPUSH', KEYS[2], '1')
  redis.call('LTRIM', KEYS[2], 0, tonumber(ARGV[3]) - 1)
  redis.call('EXPIRE', KEYS[2], tonumber(ARGV[4]))
end
return left
