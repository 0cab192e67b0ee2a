-- Read a sliding window without changing it: {entries inside the window,
-- oldest score inside it or "-1"}. KEYS[1] = lmtr-w:<name>, ARGV[1] = interval,
-- optional ARGV[2] = "now" read by the caller from an earlier Redis TIME.
-- Only the acquire script trims: a reader must never free a live window
-- (a dashboard host with a clock running ahead once did exactly that).
local now
if ARGV[2] then
  now = tonumber(ARGV[2])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) + tonumber(t[2]) / 1000000
end
local cutoff = now - tonumber(ARGV[1])
local n = redis.call('ZCOUNT', KEYS[1], cutoff, '+inf')
local first = redis.call('ZRANGEBYSCORE', KEYS[1], cutoff, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
if first[2] then
  return {n, first[2]}
end
return {n, '-1'}
