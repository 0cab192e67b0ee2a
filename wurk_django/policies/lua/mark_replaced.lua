-- On a Redis Cluster (issue 46 item 3), the second step of a debounced push that replaced a
-- tracked job: its status record (`status:<jid>`, a key of its own slot, so not in the
-- debounce step's KEYS there) is marked revoked, once debounce.lua answered that the job it
-- removed from the schedule set is the one named here. On one server debounce.lua does it.
-- KEYS[1] the replaced job's status record. ARGV[1] now (epoch seconds); ARGV[2] the jid of
-- the push that took its place. Returns 1 when the record was open and is now revoked.
--!include policies/lua/snippets/mark_replaced
return mark_replaced(KEYS[1], tonumber(ARGV[1]), ARGV[2])
