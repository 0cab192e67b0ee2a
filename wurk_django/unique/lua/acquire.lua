-- Take a unique lock for a jid, or say who holds it, in one step.
-- KEYS[1] unique:<sha>; ARGV[1] jid; ARGV[2] ttl in whole seconds (>= 1).
-- Returns {1, jid} when this call took the lock, else {0, holder}; the holder
-- may be the same jid (a retry, a scheduled promotion or a reschedule of the
-- job that owns the lock).
if redis.call("set", KEYS[1], ARGV[1], "NX", "EX", ARGV[2]) then
  return {1, ARGV[1]}
end
return {0, redis.call("get", KEYS[1])}
