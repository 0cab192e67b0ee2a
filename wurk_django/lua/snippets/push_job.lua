-- Push a job onto a queue, as the client's writer does (included by every script that
-- pushes, see wurk_django/scripts.py; not a script of its own).
--
-- push_job(queues, queue, queue_key, payload, wake_key, front): add the queue's name to
-- `queues`, push the payload onto `queue_key` (LPUSH; RPUSH when `front`, the end workers
-- take from next), and count one wake-up token for `wake_key` (nil: none).
-- wake_fetchers(most, ttl): once the pushes are done, up to `most` tokens (one per job) on
-- each wake-up list counted, which is then trimmed to `most` and expires in `ttl` seconds.
-- An idle fetcher serving several queues blocks on wake:<queue>, since no blocking move
-- can take from more than one list: the token tells it to look again now.
local push_job_tokens = {}
local push_job_lists = {}

local function push_job(queues, queue, queue_key, payload, wake_key, front)
  redis.call('SADD', queues, queue)
  if front then
    redis.call('RPUSH', queue_key, payload)
  else
    redis.call('LPUSH', queue_key, payload)
  end
  if wake_key then
    local count = push_job_tokens[wake_key]
    if count == nil then
      push_job_lists[#push_job_lists + 1] = wake_key
      count = 0
    end
    push_job_tokens[wake_key] = count + 1
  end
end

local function wake_fetchers(most, ttl)
  most = tonumber(most)
  for _, key in ipairs(push_job_lists) do
    local tokens = {}
    for i = 1, math.min(push_job_tokens[key], most) do tokens[i] = '1' end
    redis.call('LPUSH', key, unpack(tokens))
    redis.call('LTRIM', key, 0, most - 1)
    redis.call('EXPIRE', key, tonumber(ttl))
  end
  push_job_tokens, push_job_lists = {}, {}
end
