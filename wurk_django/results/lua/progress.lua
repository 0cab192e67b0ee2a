-- A running job's progress, written into its result record in one step (issue 47 item 2).
-- KEYS[1] status:<jid>; ARGV[1] the record's ttl (s); ARGV[2..] field, value pairs.
-- Only while the record is open: a record gone (expired) is not made again with these
-- fields alone, and a final one (complete, failed, revoked) keeps what its end wrote.
-- Returns 1 when written, else 0.
local state = redis.call("hget", KEYS[1], "state")
if not state or state == "complete" or state == "failed" or state == "revoked" or state == "dead" then
  return 0
end
redis.call("hset", KEYS[1], unpack(ARGV, 2))
redis.call("expire", KEYS[1], ARGV[1])
return 1
