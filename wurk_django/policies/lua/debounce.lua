-- Debounce one push in one step (issue 47 item 3): the pending job of a key is an ordinary
-- member of the schedule set; a new push takes its place (the last payload wins) and fires
-- after `quiet` seconds, but never later than `max_wait` seconds after the burst's first push.
-- KEYS[1] the key's state hash (member, first); KEYS[2] the schedule set; KEYS[3] the index of
-- pending debounced jobs (state key -> fire time), which the admin lists.
-- ARGV[1] the new member (the job's bytes); ARGV[2] now (epoch seconds); ARGV[3] quiet;
-- ARGV[4] max_wait; ARGV[5] the state's lifetime in whole seconds; ARGV[6] the prefix of status
-- record keys ("status:"); ARGV[7] the new job's jid.
-- Returns {score, replaced}: when the job fires, and 1 when it took a pending job's place.
--
-- A replaced job that keeps a status record (a tracked class: its payload carries "track")
-- would read `scheduled` until the record expired; it reads `revoked` from this same step,
-- its message naming the jid that took its place. That record's key is built here from the
-- prefix, as promote_due.lua builds queue keys: the replaced jid is known only inside this
-- step (the state hash holds it), so no caller could declare the key without a round trip
-- more. Redis Cluster is refused today (docs/redis.md); the cluster layout must put a
-- debounced job's status key in its state key's slot. A job without "track" costs a
-- substring search.
local now, quiet, max_wait = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local state = redis.call("hmget", KEYS[1], "member", "first")
local first, replaced = now, 0
-- Only a pending job still in the set belongs to this burst; one already promoted has run
-- (or is running), and this push starts a new burst.
if state[1] and redis.call("zrem", KEYS[2], state[1]) == 1 then
  first = tonumber(state[2]) or now
  replaced = 1
  if ARGV[6] and string.find(state[1], '"track"', 1, true) then
    local ok, old = pcall(cjson.decode, state[1])
    if ok and type(old) == "table" and type(old.jid) == "string" then
      local record = ARGV[6] .. old.jid
      local open = redis.call("hmget", record, "state", "ttl")
      -- Only an open record: a job pushed again by hand may have ended already.
      if (open[1] == "scheduled" or open[1] == "enqueued") and tonumber(open[2]) then
        redis.call("hset", record, "state", "revoked", "message", "replaced by a later push " .. ARGV[7],
                   "finished_at", string.format("%d", math.floor(now * 1000)))
        redis.call("expire", record, tonumber(open[2]))
      end
    end
  end
end
local at = now + quiet
if at > first + max_wait then
  at = first + max_wait
end
redis.call("zadd", KEYS[2], at, ARGV[1])
redis.call("hset", KEYS[1], "member", ARGV[1], "first", tostring(first))
redis.call("expire", KEYS[1], ARGV[5])
redis.call("zadd", KEYS[3], at, KEYS[1])
-- Index entries due more than an hour ago fired long since (or were dropped): pruned here, so
-- the index stays as small as the keys debounced in the last hour without the admin opening it.
redis.call("zremrangebyscore", KEYS[3], "-inf", now - 3600)
return {tostring(at), replaced}
