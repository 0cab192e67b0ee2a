-- Remove every job on one queue list whose payload contains one of the needles
-- (the literal text "class":"<name>": the top-level class, never a wrapped one).
-- KEYS[1] = queue:<name>; ARGV = needles. Returns how many were removed.
local items = redis.call('LRANGE', KEYS[1], 0, -1)
local removed = 0
for _, item in ipairs(items) do
  for i = 1, #ARGV do
    if string.find(item, ARGV[i], 1, true) then
      removed = removed + redis.call('LREM', KEYS[1], 1, item)
      break
    end
  end
end
return removed
