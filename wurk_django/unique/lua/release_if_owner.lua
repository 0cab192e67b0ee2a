-- Delete a lock only while it still holds the caller's token, in one step: a
-- separate GET then DEL could delete a lock that expired in between and was
-- taken by someone else.
-- KEYS[1] the lock (unique:<sha> or dear-leader); ARGV[1] the owner (jid or identity).
-- Returns 1 when this call deleted the lock, 0 when it was gone or not ours.
if redis.call("get", KEYS[1]) == ARGV[1] then
  redis.call("del", KEYS[1])
  return 1
end
return 0
