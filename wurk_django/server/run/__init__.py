"""Running: the processor threads, their manager, and what wraps each run (the run gate,
database hygiene, job log lines, log levels, observers)."""
