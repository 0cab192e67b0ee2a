-- Drop a held list from the index of held lists once it is empty.
-- KEYS[1] = the index (ZSET), KEYS[2] = the held list. One script: a reaper that holds
-- a job in that list meanwhile adds it back after its push, never between the check
-- and the removal. Returns 1 when the list was dropped.
if redis.call('LLEN', KEYS[2]) == 0 then
  return redis.call('ZREM', KEYS[1], KEYS[2])
end
return 0
