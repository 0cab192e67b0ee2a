-- Fetch like fetch_first, then read every queue so that Redis tracks it for the caller
-- (issue 25 item 4). Run on the push watch's connection, which has CLIENT TRACKING on:
-- each EXISTS below registers its key, so the next write to it by any client (a Ruby
-- Sidekiq push, a bare LPUSH) sends one invalidation message to the watch's listener.
-- Fetching and arming in one atomic step leaves no gap in which a push goes unnoticed.
-- KEYS = public_1, private_1, ..., public_n, private_n (the fetcher's order), then any
-- other key to watch (the paused set). ARGV[1] = n.
-- Returns {0, queued} when nothing was fetched, {pair index (1-based), queued, payload}
-- otherwise; queued counts the watched queues still holding a job.
local n = tonumber(ARGV[1])
local hit, job
for i = 1, 2 * n, 2 do
  job = redis.call('LMOVE', KEYS[i], KEYS[i + 1], 'RIGHT', 'LEFT')
  if job then
    hit = (i + 1) / 2
    break
  end
end
local queued = 0
for i = 1, 2 * n, 2 do
  queued = queued + redis.call('EXISTS', KEYS[i])
end
for i = 2 * n + 1, #KEYS do
  redis.call('EXISTS', KEYS[i])
end
if hit then
  return {hit, queued, job}
end
return {0, queued}
