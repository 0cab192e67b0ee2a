-- Move due jobs from a sorted set (retry or schedule) onto their queues, in one step.
-- KEYS[1] = the set; KEYS[2] = queues; KEYS[3] = dead; then for each queue named in ARGV[6..],
-- in that order, its list ("queue:<name>") and its wake-up list ("wake:<name>").
-- ARGV[1] = now, epoch seconds (score bound and dead-set score); ARGV[2] = the new enqueued_at
-- as JSON number text (integer epoch milliseconds, or float seconds for Sidekiq <= 7 readers:
-- WIRE_FORMAT); ARGV[3] = at most this many jobs per call; ARGV[4], ARGV[5] = the most wake-up
-- tokens a list keeps and their TTL: idle fetchers serving several queues block on
-- wake:<queue>, so a promoted job starts at once (the tokens the client writes with a push, by
-- the shared push snippet); ARGV[6..] = the names of the queues whose keys follow in KEYS.
-- Returns {jobs taken from the set, of which moved to dead, the dead members, the names of the
-- queues of due jobs left in the set because their keys were not given}: the caller runs the
-- death handlers for the dead, and calls again with the missing queues' keys, or while a full
-- batch came back.
--
-- Taking a job out of the set and pushing it happen in one script, so a worker that
-- dies mid-promotion cannot lose it (the push comes before the ZREM; Redis runs the
-- script whole or not at all). The payload is never re-encoded: only the top-level
-- enqueued_at number is rewritten in the text (or added after the opening brace),
-- so Ruby's and Python's bytes survive as written. Every key is given in KEYS: the caller
-- reads the due jobs' queues first (scheduler.py), and a job whose queue's keys it did not
-- give (a job due meanwhile) waits in the set for the next call, which names them. The keys
-- are Sidekiq's, on one server; the Redis Cluster layout has promote_queue.lua.

--!include lua/snippets/push_job

--!include lua/snippets/stamp_enqueued_at

--!include lua/snippets/promote_members

-- Where each named queue's two keys are in KEYS.
local key_at = {}
for i = 6, #ARGV do key_at[ARGV[i]] = 2 + 2 * (i - 5) end
local missing, noted = {}, {}
local taken, buried, dead = promote_members(KEYS[1], KEYS[3], ARGV[1], ARGV[3], function(queue, member)
  local index = key_at[queue]
  if index == nil then
    if not noted[queue] then
      noted[queue] = true
      missing[#missing + 1] = queue
    end
    return false
  end
  push_job(KEYS[2], queue, KEYS[index], stamp(member, ARGV[2]), KEYS[index + 1], false)
  return true
end)
wake_fetchers(ARGV[4], ARGV[5])
return {taken, buried, dead, missing}
