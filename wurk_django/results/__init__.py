"""Result records: what a job that asks for one (a Celery-style task, a ``django.tasks``
task, any job class pushed with ``track``) left behind, kept in Redis at ``status:<id>``
for any process to read: its state, progress, result, errors and timings.

* :mod:`.store`: where records live and how they are read (Redis, or this process's
  memory for runs that never reached it), and which ids a record may have;
* :mod:`.states`: the one vocabulary of states, with Celery's and ``django.tasks``' names;
* :mod:`.record`: the one writer, fed by the push, the worker's job observer and the
  death path (installed by :mod:`.install`);
* :mod:`.buried`: records of jobs another runtime moved to the dead set;
* :mod:`.tracking`: the ``track`` option of any job class, and its first record at the push;
* :mod:`.admin`: the job status page and the JSON its progress bars poll.

``wurk_django.status.get`` (the public read), ``wurk_django.celery.AsyncResult`` and the
``django.tasks`` backend's ``get_result`` are views over the same records.
"""
