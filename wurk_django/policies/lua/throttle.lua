-- Admit one push per slot in one step (issue 47 item 3).
-- KEYS[1] the slot's key (throttle:<digest>:<slot number>); ARGV[1] jid; ARGV[2] lifetime (s).
-- Returns {1, jid} when this push took the slot, else {0, the jid admitted in it}.
if redis.call("set", KEYS[1], ARGV[1], "NX", "EX", ARGV[2]) then
  return {1, ARGV[1]}
end
return {0, redis.call("get", KEYS[1])}
