-- Move one in-flight job from a private list back to its public queue (PRO-135).
-- KEYS[1] = private list, KEYS[2] = public queue; ARGV[1] = the exact payload.
-- Only a job still in the private list is pushed, so a job ACKed in the
-- meantime is not run twice, and every job ends in exactly one list.
if redis.call('LREM', KEYS[1], 1, ARGV[1]) == 1 then
  redis.call('RPUSH', KEYS[2], ARGV[1])
  return 1
end
return 0
