-- Take one job back from a dead process's private list, counting the recovery (PRO-141, RUN-142).
-- KEYS[1] = private list, KEYS[2] = public queue,
-- [KEYS[3] = the job's recovery counter, KEYS[4] = the reclaimer's own holding list];
-- ARGV[1] = the exact payload, ARGV[2] = poison threshold, ARGV[3] = counter TTL,
-- ARGV[4] = spacing: how many queued jobs to leave between jobs recovered together.
--
-- The move comes first and the count follows only when this call moved the job,
-- so reclaimers racing on one list can never count one recovery twice.
-- A poisoned job goes to the holding list (owned by a live process) for the
-- caller to bury; any other job goes back onto its queue, spaced from the
-- jobs it crashed with: the number of jobs still in the private list decides
-- how deep (the last one goes to the fetch end), so the jobs of one crash land
-- ARGV[4] apart and do not run side by side again while enough other jobs are
-- queued; when the queue is too short they go to its far end. Returns -1 when another
-- reclaimer took the job first, else the recovery count (0: not counted).
if redis.call('LREM', KEYS[1], 1, ARGV[1]) == 0 then
  return -1
end
local count = 0
if #KEYS >= 4 then
  count = redis.call('INCR', KEYS[3])
  redis.call('EXPIRE', KEYS[3], ARGV[3])
  if count >= tonumber(ARGV[2]) then
    redis.call('LPUSH', KEYS[4], ARGV[1])
    return count
  end
end
local spacing = tonumber(ARGV[4])
local depth = redis.call('LLEN', KEYS[1]) * spacing
if depth == 0 then
  redis.call('RPUSH', KEYS[2], ARGV[1])
elseif depth <= 10000 and redis.call('LLEN', KEYS[2]) > depth then
  -- The queue is fetched from its right end: lift the `depth` jobs nearest it,
  -- put this one down, and the lifted ones back in their order. This costs
  -- the depth, not the queue's length (LINSERT would scan the whole list).
  local lifted = redis.call('RPOP', KEYS[2], depth)
  redis.call('RPUSH', KEYS[2], ARGV[1])
  for i = #lifted, 1, -1 do
    redis.call('RPUSH', KEYS[2], lifted[i])
  end
else
  redis.call('LPUSH', KEYS[2], ARGV[1])
end
return count
