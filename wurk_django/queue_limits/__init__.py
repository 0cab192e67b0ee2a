"""Queue limits: a cap on the jobs of one queue running at once, across every worker
process (issue 47 item 4). ``settings.WURK["QUEUE_LIMITS"] = {"reports": 2}``.

A capped queue's jobs are taken with a slot, in the same Lua step that moves the job
into the fetching thread's private list (:mod:`.caps`); a full queue is skipped by that
step, so no job is fetched and put back. Settling the run frees the slot
(:func:`wurk_django.server.run.settle.settle`), and the reaper frees the slots of a
process that died (:func:`.caps.free_dead`). Off, and free, when the setting is empty.
"""
