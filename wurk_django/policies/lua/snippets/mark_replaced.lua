-- The status record of a debounced job another push replaced (issue 47 item 3): it would read
-- `scheduled` until it expired; it reads `revoked`, its message naming the jid that took its
-- place. Only an open record: a job pushed again by hand may have ended already.
local function mark_replaced(record, now, by)
  local open = redis.call("hmget", record, "state", "ttl")
  if (open[1] == "scheduled" or open[1] == "enqueued") and tonumber(open[2]) then
    redis.call("hset", record, "state", "revoked", "message", "replaced by a later push " .. by,
               "finished_at", string.format("%d", math.floor(now * 1000)))
    redis.call("expire", record, tonumber(open[2]))
    return 1
  end
  return 0
end
