"""wurk_django: Sidekiq-compatible background jobs for Django, on Redis."""

from .job import Job, Setter, job
from .shards import via

__version__ = "0.1.0"
__all__ = ["Job", "Setter", "job", "via", "__version__"]
