"""Result records: what a job that asks for one (a Celery-style task, a ``django.tasks``
task) left behind, kept in Redis at ``status:<id>`` for any process to read.

* :mod:`.store`: where records live and how they are read (Redis, or this process's
  memory for runs that never reached it), and which ids a record may have;
* :mod:`.states`: the one vocabulary of states, with Celery's and ``django.tasks``' names;
* :mod:`.record`: the one writer, fed by the push, the worker's job observer and the
  death path (installed by :mod:`.install`);
* :mod:`.buried`: records of jobs another runtime moved to the dead set.

``wurk_django.celery.AsyncResult`` and the ``django.tasks`` backend's ``get_result``
are views over the same records.
"""
