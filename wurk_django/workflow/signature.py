"""A signature: one job call written down, to run later as a workflow step.

``SendEmail.s(42, "welcome")`` (or ``send_email.s(...)`` for a ``@job``
function) does not push anything: it holds the job's class name, its
arguments, its keyword arguments and push options (``queue``, ``retry``, ...)
so :mod:`wurk_django.workflow` can push it when its turn comes.

A signature is *mutable* by default: in a chain (or any step with
dependencies) the results of the steps it waits for are put in front of its
positional arguments. ``.si(...)`` makes an immutable one, which gets exactly
the arguments written down.
"""

from __future__ import annotations

from typing import Any

from .. import payload

#: Push options a signature may carry (the payload options of a job, as ``Job.set`` takes them).
OPTION_NAMES = frozenset({"queue", "retry", "retry_for", "backtrace", "dead", "tags", "retry_queue", "log_level",
                          "display_class", "expires_in", "jid", "result_ttl", "link_error"})


def _job_name(target: Any) -> str:
    from ..job import Job, JobFunction

    if isinstance(target, JobFunction):
        return target.job_class.job_name
    if isinstance(target, type) and issubclass(target, Job):
        return target.job_name
    if isinstance(target, str) and target and "|" not in target:
        return target
    raise ValueError(f"a signature's target must be a Job class, a @job function or a job class name, "
                     f"not {target!r}")


def _json_checked(value: Any, what: str) -> Any:
    """``value`` as it comes back from JSON; refuses what JSON cannot carry, naming it."""
    try:
        return payload.loads(payload.dumps(value))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"a signature's {what} must survive JSON: {exc} (in {value!r:.200})") from None


class Signature:
    """One job call, not pushed yet: ``target`` (a job class name), ``args``, ``kwargs``, ``options``.

    Build it with ``JobClass.s(*args, **kwargs)`` / ``.si(...)``; change push
    options with :meth:`set` (``Job.s(1).set(queue="low")``).
    """

    __slots__ = ("target", "args", "kwargs", "options", "immutable")

    def __init__(self, target: Any, args: tuple | list = (), kwargs: dict | None = None,
                 options: dict | None = None, immutable: bool = False) -> None:
        self.target = _job_name(target)
        self.args = list(_json_checked(list(args), "arguments"))
        self.kwargs = dict(_json_checked(dict(kwargs or {}), "keyword arguments"))
        options = dict(options or {})
        unknown = set(options) - OPTION_NAMES
        if unknown:
            raise ValueError(f"unknown signature options {sorted(unknown)}; known: {sorted(OPTION_NAMES)}")
        self.options = _json_checked(options, "options")
        self.immutable = bool(immutable)

    def set(self, **options: Any) -> Signature:
        """A copy with these push options added (``queue``, ``retry``, ...)."""
        return Signature(self.target, self.args, self.kwargs, {**self.options, **options}, self.immutable)

    def __or__(self, other: Any) -> Any:
        """``a.s() | b.s()``: the chain of both."""
        from .canvas import chain

        return chain(self, other)

    def to_dict(self) -> dict[str, Any]:
        return {"target": self.target, "args": self.args, "kwargs": self.kwargs, "options": self.options,
                "immutable": self.immutable}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Signature:
        return cls(data["target"], data.get("args") or [], data.get("kwargs") or {}, data.get("options") or {},
                   bool(data.get("immutable")))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Signature) and other.to_dict() == self.to_dict()

    def __repr__(self) -> str:
        parts = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs.items()]
        return f"{self.target}.{'si' if self.immutable else 's'}({', '.join(parts)})"
