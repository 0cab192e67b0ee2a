"""wurk_django: Sidekiq-compatible background jobs for Django, on Redis."""

from .app_redis import FastRedis, redis_client
from .errors import HardTimeLimitExceeded, JobRevoked, SoftTimeLimitExceeded
from .job import Job, Setter, job
from .shards import via

__version__ = "0.9.0"
__all__ = ["FastRedis", "Job", "Setter", "job", "redis_client", "via", "SoftTimeLimitExceeded", "HardTimeLimitExceeded",
           "JobRevoked", "__version__"]
