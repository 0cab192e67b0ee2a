"""Read and manage what is in Redis: queues, scheduled/retry/dead jobs, processes,
running work, counters, iterable-job progress, profiles and deploy marks
(spec section 5, CORE-161..172).

Every object takes an optional ``redis`` client and otherwise uses the
process-wide one from :func:`wurk_django.redis.connection.get_redis`. Names follow
Sidekiq's Ruby API so the two stay easy to compare.
"""

from .deploy import Deploy
from .iterable import IterableJobQuery
from .process import EmbeddedProcessError, Process, ProcessSet, Work, Workers, WorkSet
from .profile import ProfileRecord, ProfileSet
from .queue import Queue
from .record import JobRecord
from .sorted import DeadSet, JobSet, NotPushed, RetrySet, ScheduledSet, SortedEntry, SortedSet
from .stats import QueueSummary, Stats, StatsHistory

__all__ = [
    "DeadSet",
    "Deploy",
    "EmbeddedProcessError",
    "IterableJobQuery",
    "JobRecord",
    "JobSet",
    "NotPushed",
    "Process",
    "ProcessSet",
    "ProfileRecord",
    "ProfileSet",
    "Queue",
    "QueueSummary",
    "RetrySet",
    "ScheduledSet",
    "SortedEntry",
    "SortedSet",
    "Stats",
    "StatsHistory",
    "Work",
    "WorkSet",
    "Workers",
]
