-- Fetch the next job of the first queue of several that has one and room to run it,
-- taking a slot of a capped queue in the same atomic step (issue 47 item 4).
-- KEYS = public_1, private_1, cap_1, ..., public_n, private_n, cap_n (the fetcher's
-- order; cap_i is the queue's slot hash, or any key for an uncapped queue: never read),
-- then any other key to read when arming (the paused set).
-- ARGV[1] = n, ARGV[2] = '1' to arm: read every queue with room, every slot hash and the
-- other keys, so that the caller's connection (CLIENT TRACKING) hears of a push to one of
-- them and of a slot freed; '0' for a plain fetch. ARGV[3] = the most jobs to move from an
-- uncapped queue (fetching ahead: the caller runs them one after the other; a capped queue
-- gives one job, since a job held ahead would hold a slot without running).
-- ARGV[3 + i] = queue i's limit (0: none).
-- A full queue is neither moved from nor read: a push to it wakes nobody, its slot hash
-- being freed does. The slot is the private list's field (the list names its process,
-- so the reaper can tell a dead owner's slots), counted up by one.
-- Returns {0, queued} when nothing was fetched, {index (1-based), queued, length,
-- payload, ...} otherwise: queued counts the queues with room still holding a job (when
-- arming), length is the private list's length after the moves when it moved more than
-- one job (else 0), so the caller can tell where each sits.
local n = tonumber(ARGV[1])
local arm = ARGV[2] == '1'
local most = tonumber(ARGV[3])
local hit, job
local queued = 0
for i = 1, n do
  local public, private, cap = KEYS[3 * i - 2], KEYS[3 * i - 1], KEYS[3 * i]
  local limit = tonumber(ARGV[3 + i])
  local room = true
  local left = 0
  if limit > 0 then
    local used = 0
    for _, count in ipairs(redis.call('HVALS', cap)) do
      used = used + tonumber(count)
    end
    left = limit - used
    room = left > 0
  end
  if room then
    if not hit then
      job = redis.call('LMOVE', public, private, 'RIGHT', 'LEFT')
      if job then
        hit = i
        if limit > 0 then
          redis.call('HINCRBY', cap, private, 1)
          left = left - 1
        end
        if not arm then
          if limit == 0 and most > 1 then
            local jobs = {job}
            for _ = 2, most do
              local more = redis.call('LMOVE', public, private, 'RIGHT', 'LEFT')
              if not more then
                break
              end
              jobs[#jobs + 1] = more
            end
            if #jobs > 1 then
              return {hit, 0, redis.call('LLEN', private), unpack(jobs)}
            end
          end
          return {hit, 0, 0, job}
        end
      end
    end
    if arm and (limit == 0 or left > 0) then
      queued = queued + redis.call('EXISTS', public)
    end
  end
end
if arm then
  for i = 3 * n + 1, #KEYS do
    redis.call('EXISTS', KEYS[i])
  end
end
if hit then
  return {hit, queued, 0, job}
end
return {0, queued}
