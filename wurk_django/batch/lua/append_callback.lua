-- Add one callback entry to a batch that was already written (PRO-278).
-- KEYS = [b-<bid>]
-- ARGV = [entry JSON, event, max entries]
-- Returns -1 when the batch is gone, -2 when it already holds max entries,
-- otherwise the event's fired flag ("1", or nil when it has not fired).
-- The stored array is never decoded and re-encoded (cjson would rewrite big
-- integers, empty arrays and "/"): a small scanner walks its bytes, counting
-- top-level entries and comparing each one's exact text with the new entry,
-- so registering the same entry twice stores it once.
if redis.call("exists", KEYS[1]) == 0 then
  return -1
end
local text = redis.call("hget", KEYS[1], "callbacks") or ""
local entry = ARGV[1]
local depth, count, start = 0, 0, 0
local in_string, escaped, valid = false, false, true
if string.sub(text, 1, 1) ~= "[" then
  valid = false
else
  for i = 1, #text do
    local c = string.sub(text, i, i)
    if in_string then
      if escaped then
        escaped = false
      elseif c == "\\" then
        escaped = true
      elseif c == '"' then
        in_string = false
      end
    elseif c == '"' then
      in_string = true
    elseif c == "[" or c == "{" then
      depth = depth + 1
      if depth == 2 then
        start = i
      end
    elseif c == "]" or c == "}" then
      if depth == 2 then
        count = count + 1
        if string.sub(text, start, i) == entry then
          return redis.call("hget", KEYS[1], ARGV[2])
        end
      end
      depth = depth - 1
    end
  end
  if depth ~= 0 or in_string then
    valid = false
  end
end
if not valid then
  count = 0
end
if count >= tonumber(ARGV[3]) then
  return -2
end
local updated
if count == 0 then
  updated = "[" .. entry .. "]"
else
  local last = #text
  while last > 0 and string.sub(text, last, last) ~= "]" do
    last = last - 1
  end
  updated = string.sub(text, 1, last - 1) .. "," .. entry .. "]"
end
redis.call("hset", KEYS[1], "callbacks", updated)
return redis.call("hget", KEYS[1], ARGV[2])
