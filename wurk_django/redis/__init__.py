"""The Redis layer: where a config's Redis is, the clients built for it, the socket fast path,
Sentinel, which errors are replayed, Lua scripts, shards and the eviction check.

Inside it, only ``wire`` (a connection's socket and parser, and ``ConnectionState``, what
wurk keeps per connection) and ``pools`` (a pool's undocumented parts) reach into
redis-py's connections or pools; nothing outside it does, and nothing anywhere sets
attributes of wurk's own on redis-py's objects (tests/redis/test_internals_layout.py).
"""
