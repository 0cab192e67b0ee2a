-- Admit one push per slot in one step (issue 47 item 3).
-- KEYS[1] the slot's key (throttle:<digest>:<slot number>); KEYS[2] the drop counters (a hash).
-- ARGV[1] jid; ARGV[2] lifetime (s); ARGV[3] this class and key's counter field.
-- Returns {1, jid} when this push took the slot, else {0, the jid admitted in it}; only a
-- dropped push counts (HINCRBY, and the counters live a day after the last drop).
if redis.call("set", KEYS[1], ARGV[1], "NX", "EX", ARGV[2]) then
  return {1, ARGV[1]}
end
local holder = redis.call("get", KEYS[1])
if holder ~= ARGV[1] then
  redis.call("hincrby", KEYS[2], ARGV[3], 1)
  redis.call("expire", KEYS[2], 86400)
end
return {0, holder}
