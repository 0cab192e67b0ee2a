-- Debounce one push in one step (issue 47 item 3): the pending job of a key is an ordinary
-- member of the schedule set; a new push takes its place (the last payload wins) and fires
-- after `quiet` seconds, but never later than `max_wait` seconds after the burst's first push.
-- KEYS[1] the key's state hash (member, first); KEYS[2] the schedule set; KEYS[3] the index of
-- pending debounced jobs (state key -> fire time), which the admin lists; KEYS[4] (optional)
-- the status record of the tracked job the caller found pending when it read the state hash
-- just before this step.
-- ARGV[1] the new member (the job's bytes); ARGV[2] now (epoch seconds); ARGV[3] quiet;
-- ARGV[4] max_wait; ARGV[5] the state's lifetime in whole seconds; ARGV[6] the new job's jid;
-- ARGV[7] the jid of the job whose record is KEYS[4].
-- Returns {score, replaced, named}: when the job fires, 1 when it took a pending job's place,
-- and 1 when that job is the tracked one ARGV[7] names (on a Redis Cluster KEYS[4] is not
-- given, the record being in another slot: the caller marks it after, mark_replaced.lua).
--
-- A replaced job that keeps a status record (a tracked class: its payload carries "track")
-- would read `scheduled` until the record expired; it reads `revoked` from this same step,
-- its message naming the jid that took its place. Its record is in KEYS like every key: the
-- caller read the pending job's jid from the state hash (policies/client.py). Should another
-- push of the same key have come between that read and this step, the job replaced here is
-- not the one the caller named, and its record is left as it is (it expires with its TTL):
-- only a record this step can name is written. A job without "track" costs a substring search.
--!include policies/lua/snippets/mark_replaced
local now, quiet, max_wait = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local state = redis.call("hmget", KEYS[1], "member", "first")
local first, replaced, named = now, 0, 0
-- Only a pending job still in the set belongs to this burst; one already promoted has run
-- (or is running), and this push starts a new burst.
if state[1] and redis.call("zrem", KEYS[2], state[1]) == 1 then
  first = tonumber(state[2]) or now
  replaced = 1
  if ARGV[7] ~= "" and string.find(state[1], '"track"', 1, true) then
    local ok, old = pcall(cjson.decode, state[1])
    if ok and type(old) == "table" and old.jid == ARGV[7] then
      named = 1
      if KEYS[4] then
        mark_replaced(KEYS[4], now, ARGV[6])
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
return {tostring(at), replaced, named}
