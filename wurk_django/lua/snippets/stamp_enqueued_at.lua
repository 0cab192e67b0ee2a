-- stamp(payload, enqueued_at): the job's JSON text with its top-level enqueued_at
-- rewritten in place as the number text `enqueued_at` (or added after the opening brace).
-- The payload is never re-encoded, so Ruby's and Python's bytes survive as written.
-- Included by the promote scripts (promote_due.lua, promote_queue.lua); not a script of its own.

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
