#!lua flags=allow-oom
-- The fetch used while Redis is at its maxmemory limit. Redis then refuses LMOVE and
-- BLMOVE (they may grow memory) and every script not flagged allow-oom, so without
-- this the queues could not drain, and draining is what frees memory: a job moved
-- here is acknowledged with LREM (accepted at the limit) once it ran. The move itself
-- adds nothing but, at most, the private list's key. Same move and reply as fetch_first.
--!include lua/snippets/first_move
