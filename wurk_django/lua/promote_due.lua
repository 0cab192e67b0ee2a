-- Move due jobs from a sorted set (retry or schedule) onto their queues, in one step.
-- KEYS[1] = the set; KEYS[2] = queues; KEYS[3] = dead
-- ARGV[1] = now, epoch seconds (score bound and dead-set score); ARGV[2] = queue key prefix "queue:";
-- ARGV[3] = the new enqueued_at as JSON number text (integer epoch milliseconds, or float
-- seconds for Sidekiq <= 7 readers: WIRE_FORMAT); ARGV[4] = at most this many jobs per call;
-- ARGV[5..7] (optional) = the wake-up list prefix "wake:", most tokens kept, their TTL: idle
-- fetchers serving several queues block on wake:<queue>, so a promoted job starts at once
-- (the tokens the client writes with a push, by the shared push snippet).
-- Returns {jobs taken from the set, of which moved to dead, then those dead members}: the caller
-- runs the death handlers for them. It calls again while a full batch came back.
--
-- Taking a job out of the set and pushing it happen in one script, so a worker that
-- dies mid-promotion cannot lose it (the push comes before the ZREM; Redis runs the
-- script whole or not at all). The payload is never re-encoded: only the top-level
-- enqueued_at number is rewritten in the text (or added after the opening brace),
-- so Ruby's and Python's bytes survive as written. Queue keys are built here from
-- the prefix, as Sidekiq Pro does; this script is not for Redis Cluster.

--!include lua/snippets/push_job

local function skip_space(s, k)
  while true do
    local b = string.byte(s, k)
    if b == 32 or b == 9 or b == 10 or b == 13 then k = k + 1 else return k end
  end
end

-- End (inclusive) of the string token that starts at i (s[i] == '"').
local function string_end(s, i)
  local j = i + 1
  while true do
    local b = string.byte(s, j)
    if b == nil then return nil end
    if b == 92 then j = j + 2 elseif b == 34 then return j else j = j + 1 end
  end
end

-- End (inclusive) of the scalar value (number, true, false, null) starting at k.
local function scalar_end(s, k)
  local j = k
  while true do
    local b = string.byte(s, j)
    if b == nil or b == 44 or b == 125 or b == 93 or b == 32 or b == 9 or b == 10 or b == 13 then
      return j - 1
    end
    j = j + 1
  end
end

local function stamp(s, now_ms)
  local depth, i, n = 0, 1, #s
  while i <= n do
    local b = string.byte(s, i)
    if b == 34 then
      local j = string_end(s, i)
      if not j then return s end
      if depth == 1 and string.sub(s, i, j) == '"enqueued_at"' then
        local k = skip_space(s, j + 1)
        if string.byte(s, k) == 58 then -- ':' : this string is the top-level key
          k = skip_space(s, k + 1)
          local v
          if string.byte(s, k) == 34 then v = string_end(s, k) else v = scalar_end(s, k) end
          if v and v >= k then
            return string.sub(s, 1, k - 1) .. now_ms .. string.sub(s, v + 1)
          end
        end
      end
      i = j + 1
    else
      if b == 123 or b == 91 then depth = depth + 1
      elseif b == 125 or b == 93 then depth = depth - 1 end
      i = i + 1
    end
  end
  local brace = string.find(s, '{', 1, true)
  local rest = skip_space(s, brace + 1)
  if string.byte(s, rest) == 125 then
    return string.sub(s, 1, brace) .. '"enqueued_at":' .. now_ms .. string.sub(s, brace + 1)
  end
  return string.sub(s, 1, brace) .. '"enqueued_at":' .. now_ms .. ',' .. string.sub(s, brace + 1)
end

local due = redis.call('ZRANGE', KEYS[1], '-inf', ARGV[1], 'BYSCORE', 'LIMIT', 0, tonumber(ARGV[4]))
local buried = 0
local dead = {}
for _, member in ipairs(due) do
  local ok, job = pcall(cjson.decode, member)
  if ok and type(job) == 'table' and type(job['queue']) == 'string' and job['queue'] ~= '' then
    local queue = job['queue']
    push_job(KEYS[2], queue, ARGV[2] .. queue, stamp(member, ARGV[3]), ARGV[5] and (ARGV[5] .. queue), false)
  else
    -- Not a job anybody can run: keep it for a human in the dead set instead of dropping it.
    redis.call('ZADD', KEYS[3], ARGV[1], member)
    buried = buried + 1
    dead[#dead + 1] = member
  end
  redis.call('ZREM', KEYS[1], member)
end
if ARGV[5] then
  wake_fetchers(ARGV[6], ARGV[7])
end
local reply = {#due, buried}
for _, member in ipairs(dead) do reply[#reply + 1] = member end
return reply
