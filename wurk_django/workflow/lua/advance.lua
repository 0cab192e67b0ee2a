-- A workflow step succeeded (or the workflow starts): record it, then push every
-- candidate step whose dependencies have all succeeded, in one atomic step.
-- KEYS = [wf, state, left, results, errors, wire, steps, queues, then per candidate: queue key, wake key]
-- ARGV = [step ('' to only push), payload timestamp (JSON number), seconds kept after finishing,
--         wake most, wake ttl, candidate names...]
-- A step moves to 'succeeded' once, whatever replays: its dependents' 'left' counters
-- drop once, and a candidate is pushed only from 'waiting' with nothing left, so it is
-- pushed once. Returns {how many pushed, workflow finished now (0/1)}, or {-1, 0} when
-- the workflow is gone.
--
-- On a Redis Cluster (issue 46 item 3) the queues are in other hash slots than the
-- workflow's keys, so KEYS stops at the 7 workflow keys and nothing is pushed here: each
-- candidate that becomes 'enqueued' is returned as {name, queue, job} after the two
-- counts, and so is each candidate already 'enqueued' (a replay after a crash between
-- this script and the pushes). The caller pushes them with a claim per step in the
-- queue's slot, so a step returned twice is pushed once (wurk_django/workflow/cluster.py).
--!include lua/snippets/push_job

local function split(text, sep)
  local out = {}
  if text == nil or text == '' then return out end
  local start = 1
  while true do
    local at = string.find(text, sep, start, true)
    if not at then
      out[#out + 1] = string.sub(text, start)
      return out
    end
    out[#out + 1] = string.sub(text, start, at - 1)
    start = at + 1
  end
end

-- The wire record: mode, queue, dependencies, dependents, own args (no brackets), payload head.
local function record(name)
  local raw = redis.call('HGET', KEYS[6], name)
  if not raw then return nil end
  local parts = {}
  local start = 1
  for i = 1, 5 do
    local at = string.find(raw, '\n', start, true)
    parts[i] = string.sub(raw, start, at - 1)
    start = at + 1
  end
  parts[6] = string.sub(raw, start)
  return {mode = parts[1], queue = parts[2], deps = split(parts[3], ','), dependents = split(parts[4], ','),
          args = parts[5], head = parts[6]}
end

-- One server: push here. A cluster: hand the jobs back (see above).
local push = #KEYS > 7
local handed = {}

local state = redis.call('HGET', KEYS[1], 'state')
if not state then return {-1, 0} end
local finished = 0
local step = ARGV[1]
if step ~= '' then
  local was = redis.call('HGET', KEYS[2], step)
  if was ~= 'succeeded' and was ~= 'cancelled' and was then
    if state == 'cancelled' then
      redis.call('HSET', KEYS[2], step, 'cancelled')
      return {0, 0}
    end
    if redis.call('HEXISTS', KEYS[4], step) == 0 then
      redis.call('HSET', KEYS[4], step, 'null')
      local ttl = redis.call('TTL', KEYS[1])
      if ttl > 0 then redis.call('EXPIRE', KEYS[4], ttl) end
    end
    if was == 'failed' then
      if redis.call('HINCRBY', KEYS[1], 'failed', -1) <= 0 and state == 'failed' then
        redis.call('HSET', KEYS[1], 'state', 'running')
        state = 'running'
      end
    end
    redis.call('HSET', KEYS[2], step, 'succeeded')
    redis.call('HDEL', KEYS[5], step)
    local rec = record(step)
    if rec then
      for _, dependent in ipairs(rec.dependents) do
        redis.call('HINCRBY', KEYS[3], dependent, -1)
      end
    end
    local done = redis.call('HINCRBY', KEYS[1], 'succeeded', 1)
    if done >= tonumber(redis.call('HGET', KEYS[1], 'total') or '0') then
      local now = redis.call('TIME')
      redis.call('HSET', KEYS[1], 'state', 'succeeded', 'finished_at', now[1] .. '.' .. string.format('%06d', now[2]))
      for i = 1, 7 do redis.call('EXPIRE', KEYS[i], ARGV[3]) end
      return {0, 1}
    end
  end
end
if state == 'cancelled' then return {0, 0} end

local pushed = 0
local base = 8
for i = 6, #ARGV do
  local name = ARGV[i]
  local at = base + 2 * (i - 6) + 1
  local now_state = redis.call('HGET', KEYS[2], name)
  local ready = now_state == 'waiting' and tonumber(redis.call('HGET', KEYS[3], name) or '1') <= 0
  if ready or (not push and now_state == 'enqueued') then
    local rec = record(name)
    if not rec then return redis.error_reply('workflow step ' .. name .. ' has no wire record') end
    local given = ''
    if rec.mode == 'one' then
      given = redis.call('HGET', KEYS[4], rec.deps[1]) or 'null'
    elseif rec.mode == 'list' then
      local values = {}
      for j, dep in ipairs(rec.deps) do values[j] = redis.call('HGET', KEYS[4], dep) or 'null' end
      given = '[' .. table.concat(values, ',') .. ']'
    end
    local args = given
    if rec.args ~= '' then
      if args ~= '' then args = args .. ',' end
      args = args .. rec.args
    end
    local job = rec.head .. '"args":[' .. args .. '],"enqueued_at":' .. ARGV[2] .. '}'
    if push then
      push_job(KEYS[8], rec.queue, KEYS[at], job, KEYS[at + 1], false)
    else
      handed[#handed + 1] = name
      handed[#handed + 1] = rec.queue
      handed[#handed + 1] = job
    end
    if ready then
      redis.call('HSET', KEYS[2], name, 'enqueued')
      pushed = pushed + 1
    end
  end
end
wake_fetchers(ARGV[4], ARGV[5])
local out = {pushed, finished}
for _, value in ipairs(handed) do out[#out + 1] = value end
return out
