-- Remove every job on one queue list whose payload contains one of the needles
-- (the literal text "jid":"<jid>", compact or with a space after the colon).
-- Runs in Redis so the read and the removals are one atomic step.
-- KEYS[1] = queue:<name>; ARGV = needles. Returns the first payload removed, or nil.
local items = redis.call('LRANGE', KEYS[1], 0, -1)
local first = false
for _, item in ipairs(items) do
  for i = 1, #ARGV do
    if string.find(item, ARGV[i], 1, true) then
      redis.call('LREM', KEYS[1], 1, item)
      if not first then first = item end
      break
    end
  end
end
return first
