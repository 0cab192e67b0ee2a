-- Remove the job at one index of a queue list, if it still holds the expected bytes.
-- The entry is overwritten with a tombstone that no job can equal, and LREM removes the
-- tombstone scanning from the nearer end, so the caller never downloads the list.
-- KEYS[1] = queue:<name>; ARGV[1] = index (negative counts from the right end),
-- ARGV[2] = the stored bytes expected there, ARGV[3] = the tombstone.
-- Returns 1 when removed, 0 when that index holds something else now.
local length = redis.call('LLEN', KEYS[1])
local at = tonumber(ARGV[1])
if at < 0 then
  at = length + at
end
if at < 0 or at >= length then
  return 0
end
-- Address the entry from the nearer end: LINDEX and LSET walk the list from there.
local near = at
local from_left = at < length / 2
if not from_left then
  near = at - length
end
if redis.call('LINDEX', KEYS[1], near) ~= ARGV[2] then
  return 0
end
redis.call('LSET', KEYS[1], near, ARGV[3])
if from_left then
  return redis.call('LREM', KEYS[1], 1, ARGV[3])
end
return redis.call('LREM', KEYS[1], -1, ARGV[3])
