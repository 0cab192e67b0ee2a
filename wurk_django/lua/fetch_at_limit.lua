#!lua flags=allow-oom
-- The fetch used while Redis is at its maxmemory limit. Redis then refuses LMOVE and
-- BLMOVE (they may grow memory) and every script not flagged allow-oom, so without
-- this the queues could not drain, and draining is what frees memory: a job moved
-- here is acknowledged with LREM (accepted at the limit) once it ran. The move itself
-- adds nothing but, at most, the private list's key.
-- Same move and reply as fetch_first: KEYS = public_1, private_1, public_2, private_2, ...
-- in the fetcher's order; returns {pair index (1-based), payload} or nil.
for i = 1, #KEYS, 2 do
  local job = redis.call('LMOVE', KEYS[i], KEYS[i + 1], 'RIGHT', 'LEFT')
  if job then
    return {(i + 1) / 2, job}
  end
end
return nil
