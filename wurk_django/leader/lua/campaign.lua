-- Take or keep the cluster leader lock in one step.
-- KEYS[1] = dear-leader; ARGV[1] = this process's identity, ARGV[2] = lock TTL in milliseconds.
-- Returns 1 when the caller holds the lock afterwards, 0 when another process does.
-- Taking a free lock and extending our own must be one server-side step: with a
-- GET then EXPIRE in two calls, the lock can lapse in between and a follower's
-- fresh lock would get our TTL.
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return 1
end
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
