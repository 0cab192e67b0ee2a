-- Move every job of a dead process's private list back onto its queue, on a Redis Cluster
-- (issue 46 stage 3): both lists in the queue's slot, so one step; the jobs go to the fetch
-- end in the order they were fetched (the oldest is fetched first again).
-- KEYS[1] = the private list ({q:<name>}:private|<host>|<pid>|<nonce>|<slot>);
-- KEYS[2] = the queue's list ({q:<name>}:queue)
-- Returns how many jobs were moved.
local moved = 0
while redis.call('LMOVE', KEYS[1], KEYS[2], 'LEFT', 'RIGHT') do
  moved = moved + 1
end
return moved
