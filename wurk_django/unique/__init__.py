"""Unique jobs: at most one pending job per class, queue and arguments (ENT-201..209).

::

    # settings.py
    WURK = {..., "UNIQUE_JOBS": True}

    class SyncAccount(Job):
        unique_for = 300          # seconds (or a timedelta) the lock may live
        unique_until = "success"  # or "start"

    SyncAccount.perform_async(42)   # the jid, or None: a live duplicate holds the lock
    locked(SyncAccount, [42])       # the jid holding the lock, or None

See docs/unique.md.
"""

from .lock import UniqueConfigurationError, coerce_ttl, context_of, lock_key, locked, release_if_owner
from .unlock import digest_of, holder, release_digest

__all__ = ["UniqueConfigurationError", "coerce_ttl", "context_of", "digest_of", "holder", "lock_key", "locked",
           "release_digest", "release_if_owner"]
