-- Delete a lock only if the caller still owns it.
-- KEYS[1] = the lock key (dear-leader); ARGV[1] = the owner that must still hold it.
-- Returns 1 when deleted, 0 otherwise. A GET followed by a DEL in two calls could
-- delete a successor's lock taken in between.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
