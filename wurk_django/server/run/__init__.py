"""Running: the processor threads, their manager, and what wraps each run (database
hygiene, job log lines, log levels, observers)."""
