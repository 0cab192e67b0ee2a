"""The Redis layer: where a config's Redis is, the clients built for it, the socket fast path,
Sentinel, which errors are replayed, Lua scripts, shards and the eviction check.

Nothing outside this package reaches into redis-py's connections or pools.
"""
