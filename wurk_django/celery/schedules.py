"""Celery's ``celery.schedules`` on wurk's periodic jobs (:mod:`wurk_django.periodic`),
whose schedules are five-field cron strings fired by the cluster's leader.

::

    # before: from celery.schedules import crontab
    from wurk_django.celery.schedules import crontab, schedule

    CELERY_BEAT_SCHEDULE = {
        "nightly": {"task": "shop.tasks.purge_carts", "schedule": crontab(hour=3, minute=0)},
        "every-5-min": {"task": "shop.tasks.sweep", "schedule": schedule(run_every=300)},
    }

* :class:`crontab` takes Celery's fields (``minute``, ``hour``, ``day_of_week``,
  ``day_of_month``, ``month_of_year``), as strings, numbers or sets of numbers, day and
  month names included; ``.cron`` is the cron string it fires on.
* :class:`schedule` (an interval) becomes the cron string with the same period, aligned
  to the clock: ``schedule(300)`` fires at :00, :05, :10...; Celery counts from the
  last run. An interval no cron string repeats evenly (7 minutes, 90 seconds) or
  under a minute is refused, naming the ``crontab`` to use instead.
* ``solar`` is refused: wurk has no sunrise clock.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from typing import Any

DAYS = {name: i for i, name in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}
MONTHS = {name: i + 1 for i, name in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep",
                                                  "oct", "nov", "dec"))}
_WORD = re.compile(r"[a-zA-Z]+")


def _field(name: str, value: Any, names: dict[str, int] | None = None) -> str:
    if isinstance(value, bool):
        raise ValueError(f"crontab {name} must be a cron field, a number or numbers, not {value!r}")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        text = value.strip().replace(" ", "")
        if names is not None:
            def number(match: re.Match[str]) -> str:
                word = match.group(0).lower()
                found = names.get(word[:3])
                if found is None:
                    raise ValueError(f"crontab {name}: {match.group(0)!r} is not a name wurk knows")
                return str(found)

            text = _WORD.sub(number, text)
        return text or "*"
    if isinstance(value, Iterable):
        items = sorted({int(_field(name, item, names)) for item in value})
        if not items:
            raise ValueError(f"crontab {name} must not be empty")
        return ",".join(str(i) for i in items)
    raise ValueError(f"crontab {name} must be a cron field, a number or numbers, not {value!r}")


class crontab:  # noqa: N801 - Celery's name
    """A cron schedule from Celery's fields (defaults ``"*"``: every minute).
    ``ValueError`` names a field wurk's cron grammar does not take."""

    def __init__(self, minute: Any = "*", hour: Any = "*", day_of_week: Any = "*", day_of_month: Any = "*",
                 month_of_year: Any = "*", **options: Any) -> None:
        unknown = set(options) - {"nowfun", "app"}
        if unknown:
            raise TypeError(f"crontab() got unknown arguments {sorted(unknown)}")
        self.minute, self.hour, self.day_of_week = minute, hour, day_of_week
        self.day_of_month, self.month_of_year = day_of_month, month_of_year
        #: The five-field cron string wurk's periodic jobs fire on.
        self.cron = " ".join((_field("minute", minute), _field("hour", hour), _field("day_of_month", day_of_month),
                              _field("month_of_year", month_of_year, MONTHS),
                              _field("day_of_week", day_of_week, DAYS)))
        from ..periodic.schedule import parse

        try:
            parse(self.cron)
        except ValueError as exc:
            raise ValueError(f"crontab(minute={minute!r}, hour={hour!r}, day_of_week={day_of_week!r}, "
                             f"day_of_month={day_of_month!r}, month_of_year={month_of_year!r}): {exc}") from None

    def __repr__(self) -> str:
        return f"<crontab: {self.cron}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, crontab) and other.cron == self.cron

    def __hash__(self) -> int:
        return hash(self.cron)


class schedule:  # noqa: N801 - Celery's name
    """Every ``run_every`` (seconds or a timedelta), as the cron string with that period."""

    def __init__(self, run_every: float | dt.timedelta | None = None, relative: bool = False, **options: Any) -> None:
        if run_every is None:
            raise TypeError("schedule() needs run_every (seconds or a timedelta)")
        self.run_every = run_every if isinstance(run_every, dt.timedelta) else dt.timedelta(seconds=run_every)
        self.relative = relative
        #: The five-field cron string wurk's periodic jobs fire on.
        self.cron = interval_cron(self.run_every)

    def __repr__(self) -> str:
        return f"<freq: {self.run_every}>"


def interval_cron(every: dt.timedelta) -> str:
    """The cron string firing every ``every``, aligned to the clock; ``ValueError`` when none does."""
    seconds = every.total_seconds()
    hint = ("wurk's periodic jobs fire on cron minutes: give a period that divides an hour or a day "
            "(1, 2, 5, 10, 15, 30 minutes; 1, 2, 3, 4, 6, 8, 12 hours; a day; a week), or write the times as "
            "crontab(...)")
    if seconds < 60 or seconds % 60:
        raise ValueError(f"schedule every {every} cannot fire on wurk: {hint}")
    minutes = int(seconds // 60)
    if minutes < 60 and 60 % minutes == 0:
        return "* * * * *" if minutes == 1 else f"*/{minutes} * * * *"
    if minutes % 60 == 0:
        hours = minutes // 60
        if hours < 24 and 24 % hours == 0:
            return "0 * * * *" if hours == 1 else f"0 */{hours} * * *"
        if hours == 24:
            return "0 0 * * *"
        if hours == 24 * 7:
            return "0 0 * * 0"
    raise ValueError(f"schedule every {every} cannot fire on wurk: {hint}")


class solar:  # noqa: N801 - Celery's name
    """Refused: wurk's periodic jobs have no sunrise or sunset clock."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError(
            "solar schedules are not supported by wurk_django: use crontab(hour=..., minute=...) at a fixed "
            "time in the zone you want (CELERY_TIMEZONE, or the loop's tz), or a crontab every few minutes "
            "whose task checks the sun's position itself")


def cron_of(value: Any) -> str:
    """The cron string of a beat entry's ``schedule``: a :class:`crontab`, a
    :class:`schedule`, a timedelta or seconds (``ValueError`` for anything else)."""
    if isinstance(value, (crontab, schedule)):
        return value.cron
    if isinstance(value, dt.timedelta):
        return interval_cron(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return interval_cron(dt.timedelta(seconds=value))
    if isinstance(value, str):
        from ..periodic.schedule import parse

        parse(value)  # wurk's own cron string, accepted as it is
        return value
    raise ValueError(f"a beat schedule must be a crontab, a schedule, a timedelta or seconds, not {value!r}")
