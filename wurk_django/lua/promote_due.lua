-- Move due jobs from a sorted set (retry or schedule) onto their queues, in one step.
-- KEYS[1] = the set; KEYS[2] = queues; KEYS[3] = dead
-- ARGV[1] = now, epoch seconds (score bound and dead-set score); ARGV[2] = queue key prefix "queue:";
-- ARGV[3] = the new enqueued_at as JSON number text (integer epoch milliseconds, or float
-- seconds for Sidekiq <= 7 readers: WIRE_FORMAT); ARGV[4] = at most this many jobs per call;
-- ARGV[5..7] (optional) = the wake-up list prefix "wake:", most tokens kept, their TTL: idle
-- fetchers serving several queues block on wake:<queue>, so a promoted job starts at once
-- (the tokens the client writes with a push, by the shared push snippet).
-- Returns {jobs taken from the set, of which moved to dead, then those dead members}: the caller
-- runs the death handlers for them. It calls again while a full batch came back.
--
-- Taking a job out of the set and pushing it happen in one script, so a worker that
-- dies mid-promotion cannot lose it (the push comes before the ZREM; Redis runs the
-- script whole or not at all). The payload is never re-encoded: only the top-level
-- enqueued_at number is rewritten in the text (or added after the opening brace),
-- so Ruby's and Python's bytes survive as written. Queue keys are built here from
-- the prefix, as Sidekiq Pro does; this script is not for Redis Cluster.

--!include lua/snippets/push_job

--!include lua/snippets/stamp_enqueued_at

--!include lua/snippets/promote_members

local taken, buried, dead = promote_members(KEYS[1], KEYS[3], ARGV[1], ARGV[4], function(queue, member)
  push_job(KEYS[2], queue, ARGV[2] .. queue, stamp(member, ARGV[3]), ARGV[5] and (ARGV[5] .. queue), false)
  return true
end)
if ARGV[5] then
  wake_fetchers(ARGV[6], ARGV[7])
end
local reply = {taken, buried}
for _, member in ipairs(dead) do reply[#reply + 1] = member end
return reply
