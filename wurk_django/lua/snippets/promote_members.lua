-- Take the due members of a retry or schedule set to where they go (included by the promote
-- scripts, promote_due.lua and promote_queue.lua; not a script of its own).
--
-- promote_members(set, dead, now, limit, push): each member of `set` due by `now` (at most
-- `limit` of them, the earliest first) is handed to push(queue, member) when it is a job a
-- worker can run (a JSON object with a non-empty "queue" string), which pushes it and returns
-- true, or returns false to leave it in the set for a later call; anything else is no job
-- anybody can run, and goes to the dead set `dead` (scored `now`) to be kept for a human
-- instead of dropped. A member leaves the set after its push, so a script that stops halfway
-- (it cannot: Redis runs it whole) would push twice rather than lose a job.
-- Returns how many members left the set, how many of them went to `dead`, and those members.
local function promote_members(set, dead, now, limit, push)
  local due = redis.call('ZRANGE', set, '-inf', now, 'BYSCORE', 'LIMIT', 0, tonumber(limit))
  local taken, buried, buried_members = 0, 0, {}
  for _, member in ipairs(due) do
    local ok, job = pcall(cjson.decode, member)
    local runnable = ok and type(job) == 'table' and type(job['queue']) == 'string' and job['queue'] ~= ''
    if runnable then
      if push(job['queue'], member) then
        redis.call('ZREM', set, member)
        taken = taken + 1
      end
    else
      redis.call('ZADD', dead, now, member)
      redis.call('ZREM', set, member)
      taken = taken + 1
      buried = buried + 1
      buried_members[#buried_members + 1] = member
    end
  end
  return taken, buried, buried_members
end
