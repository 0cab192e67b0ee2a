-- One fetch round trip of a worker thread on a Redis Cluster (issue 46): the ACKs of the
-- thread's finished jobs of this queue, then up to ARGV[1] jobs moved from the queue into
-- the thread's private list of that queue. Both keys are in the queue's slot ({q:<name>}),
-- so this is one step on one primary.
-- KEYS[1] = the thread's private list ({q:<name>}:private|<host>|<pid>|<nonce>|<slot>);
-- KEYS[2] = the queue's list ({q:<name>}:queue)
-- ARGV[1] = most jobs to move (0: only acknowledge);
-- ARGV[2] = '1' when a command on the private list failed without a reply: whatever it
--   holds once the ACKs ran goes back onto the queue first (the thread holds none of it:
--   it fetches only when it has nothing of this queue fetched ahead or running), the
--   oldest fetched on the fetch end, as cluster_reclaim.lua does;
-- ARGV[3..] = the exact bytes of each finished job to acknowledge.
-- Returns the jobs moved, in the order they are to run.
for i = 3, #ARGV do
  -- From the tail: a fetch pushes onto the head, so finished jobs are the oldest entries.
  redis.call('LREM', KEYS[1], -1, ARGV[i])
end
if ARGV[2] == '1' then
  while redis.call('LMOVE', KEYS[1], KEYS[2], 'LEFT', 'RIGHT') do end
end
local jobs = {}
for i = 1, tonumber(ARGV[1]) do
  local job = redis.call('LMOVE', KEYS[2], KEYS[1], 'RIGHT', 'LEFT')
  if not job then
    break
  end
  jobs[i] = job
end
return jobs
