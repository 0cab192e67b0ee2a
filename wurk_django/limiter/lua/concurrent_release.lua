-- Give a concurrent slot back. KEYS[1] = lmtr-cs:<name>, ARGV[1] = slot id.
-- Returns 1, or 0 when the slot was already evicted (its holder outran
-- lock_timeout: the caller counts an overage).
return redis.call('ZREM', KEYS[1], ARGV[1])
