-- Sliding window: admit `used` calls if fewer than `count` were admitted in
-- the last `interval` seconds (Redis clock).
-- KEYS[1] = lmtr-w:<name> (ZSET, score = admission time)
-- ARGV = count, interval seconds, used, ttl seconds, nonce (unique per call)
-- An optional last ARGV is "now" (epoch seconds) that the caller read from an
-- earlier Redis TIME; without it the script reads TIME itself.
-- Returns {1, entries now, -1} or {0, entries, oldest entry's score as a string}.
local now
if ARGV[6] then
  now = tonumber(ARGV[6])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) + tonumber(t[2]) / 1000000
end
local count = tonumber(ARGV[1])
local used = tonumber(ARGV[3])
-- The bound as text with every digit: Lua's `..` would keep 14 significant digits (a
-- tenth of a millisecond at today's epoch) and could round it past a call still inside.
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('(%.17g', now - tonumber(ARGV[2])))
local cur = redis.call('ZCARD', KEYS[1])
if cur + used <= count then
  for i = 1, used do
    redis.call('ZADD', KEYS[1], now, now .. ':' .. ARGV[5] .. ':' .. i)
  end
  redis.call('EXPIRE', KEYS[1], ARGV[4])
  return {1, cur + used, -1}
end
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local oldest = -1
if first[2] then
  oldest = tonumber(first[2])
end
return {0, cur, string.format('%.6f', oldest)}
