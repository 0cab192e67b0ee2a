-- Hand back the jobs one thread fetched ahead of the job it runs, unrun, in one step.
-- KEYS[1] = the slot's private list, KEYS[2] = the public queue; ARGV = the exact
-- payloads, in the order the thread would have run them.
-- Each job moves only if it is still in the private list (a job the thread started
-- meanwhile stays), from the private list to the fetch end of the queue, the last
-- first, so the queue hands them out again in the same order. One script: at every
-- moment each job is in exactly one list, so a kill -9 loses none.
-- The slot's "running" marker is not touched: it counts the running job's place from
-- the oldest end of the list, and every job handed back sits on the newest side of it.
local moved = 0
for i = #ARGV, 1, -1 do
  if redis.call('LREM', KEYS[1], 1, ARGV[i]) == 1 then
    redis.call('RPUSH', KEYS[2], ARGV[i])
    moved = moved + 1
  end
end
return moved
