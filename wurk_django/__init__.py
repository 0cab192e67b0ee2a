"""wurk_django: Sidekiq-compatible background jobs for Django, on Redis."""

from .errors import DeadlineExceeded, HardTimeLimitExceeded, JobRevoked, SoftTimeLimitExceeded
from .job import Job, Setter, job
from .redis.app import FastRedis, redis_client
from .redis.shards import via

__version__ = "0.9.0"
__all__ = ["FastRedis", "Job", "Setter", "job", "redis_client", "via", "SoftTimeLimitExceeded", "HardTimeLimitExceeded",
           "JobRevoked", "DeadlineExceeded", "__version__"]
