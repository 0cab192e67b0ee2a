-- Take the next chunk of a bulk action from its sorted set, in one atomic step: the
-- entries leave the set and land in the action's in-hand set (with their scores), and
-- the progress hash counts them. A worker that dies mid-chunk therefore leaves them in
-- Redis, where the next run of the action finds them: never only in a worker's memory.
-- KEYS[1] = the job set, KEYS[2] = the in-hand set, KEYS[3] = the progress hash
-- ARGV[1] = how many to take. Returns the flat list member, score, member, score...
local taken = redis.call('ZPOPMIN', KEYS[1], tonumber(ARGV[1]))
for i = 1, #taken, 2 do
  redis.call('ZADD', KEYS[2], taken[i + 1], taken[i])
end
if #taken > 0 then
  redis.call('HINCRBY', KEYS[3], 'taken', #taken / 2)
end
return taken
