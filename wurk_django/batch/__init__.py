"""Batches: groups of jobs with callbacks when they are all done (Sidekiq Pro's batches).

::

    from wurk_django.batch import Batch, Status

    batch = Batch()
    batch.description = "Import 10,000 rows"
    batch.on("success", "shop.jobs.ImportDone", {"file": name})
    with batch.jobs():
        for row in rows:
            ImportRow.perform_async(row.id)
    Status(batch.bid).pending

See docs/batches.md.
"""

from .batch import Batch, NoSuchBatch
from .callbacks import CallbackJob, EmptyJob, UnresolvableTarget
from .fire import CallbackEnqueueError
from .status import BatchSet, DeadBatchSet, Status

Batch.DeadSet = DeadBatchSet  # type: ignore[attr-defined]  # Sidekiq Pro's Batch::DeadSet

__all__ = [
    "Batch",
    "BatchSet",
    "CallbackEnqueueError",
    "CallbackJob",
    "DeadBatchSet",
    "EmptyJob",
    "NoSuchBatch",
    "Status",
    "UnresolvableTarget",
]
