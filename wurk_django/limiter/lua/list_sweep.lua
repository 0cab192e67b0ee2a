-- Drop names whose metadata has expired from the name list.
-- KEYS[1] = lmtr-list, KEYS[i+1] = lmtr:<ARGV[i]>
-- Existence is checked again here, so a name registered again between the
-- caller's probe and this script stays listed.
local removed = 0
for i = 1, #ARGV do
  if redis.call('EXISTS', KEYS[i + 1]) == 0 then
    removed = removed + redis.call('SREM', KEYS[1], ARGV[i])
  end
end
return removed
