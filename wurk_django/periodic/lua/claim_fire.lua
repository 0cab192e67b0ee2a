-- Claim one cron slot of a loop: compare-and-swap its fire marks.
-- KEYS[1] = loops:<lid>
-- ARGV[1] = the next-fire mark the caller read (verbatim), or the slot it derived when there was none
-- ARGV[2] = the new last-fire mark; ARGV[3] = the new next-fire mark, "" when the schedule is exhausted
-- Returns 1 when this caller owns the slot (and must enqueue), 0 when another process took it.
-- Right after a leader handover two processes may both think they lead; each
-- reads the marks, but only the first to swap them enqueues.
local key = KEYS[1]
local cur = redis.call('HGET', key, 'nf')
if cur and cur ~= '' then
  -- Someone advanced the mark since the caller read it (byte compare: no parsing drift).
  if cur ~= ARGV[1] then return 0 end
else
  -- No mark: the caller derived the slot from lf; refuse a slot the last fire already covered.
  local lf = tonumber(redis.call('HGET', key, 'lf') or '')
  if lf and lf >= tonumber(ARGV[1]) then return 0 end
end
redis.call('HSET', key, 'lf', ARGV[2])
if ARGV[3] == '' then
  redis.call('HDEL', key, 'nf')
else
  redis.call('HSET', key, 'nf', ARGV[3])
end
return 1
