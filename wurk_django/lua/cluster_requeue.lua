-- Give a fetched job back to its queue, unrun, on a Redis Cluster (issue 46 stage 3): out of
-- the process's private list and onto the fetch end of the queue, in one step in the queue's slot.
-- KEYS[1] = the private list ({q:<name>}:private|...); KEYS[2] = the queue's list ({q:<name>}:queue)
-- ARGV[1] = the job, its exact bytes as fetched
-- Returns 1 when the job was in the private list (and is back on its queue), else 0: a job
-- the reaper or a hard shutdown put back already is not pushed twice.
if redis.call('LREM', KEYS[1], 1, ARGV[1]) > 0 then
  redis.call('RPUSH', KEYS[2], ARGV[1])
  return 1
end
return 0
