-- Count `used` calls into the current period's bucket if they all fit.
-- KEYS[1] = lmtr-b:<name>:<epoch> (the caller derived epoch from Redis TIME)
-- ARGV = count, used, key lifetime (2 x interval), seconds to the next period
-- The last argument is not needed here: the caller keeps it, because a Lua
-- number comes back as a truncated integer.
-- Returns {1, new count} or {0, current count}.
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
local used = tonumber(ARGV[2])
if cur + used <= tonumber(ARGV[1]) then
  local new = redis.call('INCRBY', KEYS[1], used)
  redis.call('EXPIRE', KEYS[1], ARGV[3])
  return {1, new}
end
return {0, cur}
