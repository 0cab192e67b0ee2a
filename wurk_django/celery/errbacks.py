"""``link_error``: the errbacks of a call, called when its job ends for good.

The errbacks ride in the job's payload (``link_error``: JSON signatures) and this
module's death handler, installed on workers, calls them when the job dies there (its
retries used up, a hard time limit), as Celery 5 does when it stores the failure. (A
kill from a web process, the admin or the data API, calls none: the handler is not
installed with the death part every process loads. With it there, the results
feature's hard-time-limit retry test in tests/results/test_deaths.py failed twice; that
test also fails now and then on main, so whether the death part is to blame is open.)

* an errback task taking more than one positional argument is Celery 5's documented
  form ``errback(request, exc, traceback)``: called right there, in the process that
  saw the death (a worker), with the call's :class:`~.request.Request`, the exception and the
  traceback as text;
* one taking a single argument is Celery's old form: pushed as a task with the failed
  call's ``task_id`` in front of its own arguments.

An errback that fails is logged; it never changes how the job died.
"""

from __future__ import annotations

import logging
import traceback as tb

logger = logging.getLogger("wurk_django.worker")


def on_death(job: dict, exc: BaseException, reason: str) -> None:
    """Death handler: call the dead job's errbacks, if it has any."""
    errbacks = job.get("link_error")
    if not errbacks or not isinstance(errbacks, list):
        return
    from .canvas import Signature, arity_takes_request
    from .request import Request

    request = Request.from_payload(job, is_eager=False)
    trace = "".join(tb.format_exception(exc))
    for data in errbacks:
        try:
            errback = Signature(data)
            if arity_takes_request(errback.type.fn):
                errback(request, exc, trace)
            else:
                errback.apply_async((job.get("jid"),))
        except Exception:
            logger.exception("the errback %r of job %s failed", data, job.get("jid"))
