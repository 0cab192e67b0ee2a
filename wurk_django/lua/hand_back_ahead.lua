-- Hand back the jobs one thread fetched ahead of the job it runs, unrun, in one step.
-- KEYS[1] = the slot's private list, KEYS[2] = the public queue, KEYS[3] = the slot's
-- "running" marker. ARGV[1] = the marker value naming the running job by its place in
-- the private list ('' when it names "the oldest"), ARGV[2] = that value once the jobs
-- handed back are gone, ARGV[3] = the marker's lifetime in seconds, ARGV[4..] = the
-- exact payloads, in the order the thread would have run them.
-- Each job moves only if it is still in the private list (a job the thread started
-- meanwhile stays), from the private list to the fetch end of the queue, the last
-- first, so the queue hands them out again in the same order. One script: at every
-- moment each job is in exactly one list, so a kill -9 loses none.
local moved = 0
for i = #ARGV, 4, -1 do
  if redis.call('LREM', KEYS[1], 1, ARGV[i]) == 1 then
    redis.call('RPUSH', KEYS[2], ARGV[i])
    moved = moved + 1
  end
end
-- The running job sat behind the ones handed back (they were pushed onto the head of
-- the list after it): its place changed, and so does the marker that names it, unless
-- the thread wrote another one meanwhile.
if moved > 0 and ARGV[1] ~= '' and redis.call('GET', KEYS[3]) == ARGV[1] then
  redis.call('SET', KEYS[3], ARGV[2], 'EX', tonumber(ARGV[3]))
end
return moved
