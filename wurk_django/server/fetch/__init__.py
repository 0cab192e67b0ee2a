"""Fetching: how a worker's threads take jobs from their queues (reliable or basic fetch, the
fetch slot, the one thread that blocks in Redis, queue order, push notices)."""
