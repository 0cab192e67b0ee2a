-- Take the next job from the first non-empty queue of several, in one round trip (PRO-122).
-- KEYS = public_1, private_1, public_2, private_2, ... in the fetcher's order.
-- Same move as the fetcher's own: LMOVE public private RIGHT LEFT. Returns
-- {pair index (1-based), payload} for the first hit, or nil when all are empty.
-- The order is the caller's: this script never reorders or filters.
for i = 1, #KEYS, 2 do
  local job = redis.call('LMOVE', KEYS[i], KEYS[i + 1], 'RIGHT', 'LEFT')
  if job then
    return {(i + 1) / 2, job}
  end
end
return nil
