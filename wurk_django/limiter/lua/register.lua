-- Publish a limiter: metadata hash, its TTL, and membership of the name list.
-- KEYS[1] = lmtr:<name>   KEYS[2] = lmtr-list
-- ARGV = name, type, options JSON, fingerprint, ttl seconds
-- The SADD only happens when HSET created fields (new or expired metadata):
-- a limiter built per call with an interpolated name then touches the list
-- once per metadata lifetime instead of on every call. That gate is safe only
-- because it runs in the same atomic step as the HSET; the list sweep removes
-- the name again once the metadata has expired.
local created = redis.call('HSET', KEYS[1], 'type', ARGV[2], 'options', ARGV[3], 'fingerprint', ARGV[4])
redis.call('EXPIRE', KEYS[1], ARGV[5])
if created > 0 then
  return redis.call('SADD', KEYS[2], ARGV[1])
end
return 0
