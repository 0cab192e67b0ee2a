-- Move the next job of the first non-empty queue of several (included by fetch_first and
-- fetch_at_limit, see wurk_django/scripts.py; not a script of its own): LMOVE public private
-- RIGHT LEFT, the fetcher's own move. KEYS = public_1, private_1, public_2, private_2,
-- ... in the fetcher's order (never reordered or filtered here). Returns {pair index
-- (1-based), payload} for the first hit, or nil when all are empty.
for i = 1, #KEYS, 2 do
  local job = redis.call('LMOVE', KEYS[i], KEYS[i + 1], 'RIGHT', 'LEFT')
  if job then
    return {(i + 1) / 2, job}
  end
end
return nil
