"""Cron schedules: the five-field grammar, and the next fire time in a time zone.

Grammar (Vixie cron, no extensions): minute 0-59, hour 0-23, day of month
1-31, month 1-12, day of week 0-7 (7 is Sunday, like 0). Each field is a
comma list of ``*``, ``n``, ``a-b``, ``*/s``, ``a-b/s`` or ``n/s`` (from n to
the field's maximum). Names, ``L W # ?``, six fields and ``@reboot`` are
refused, so a schedule means the same to every cron implementation. When
both day fields are restricted (not ``*``), a day matching either fires.

Times are wall-clock times in the loop's zone, and daylight-saving changes
are handled the plain way: minutes the clock skips (spring forward) never
fire and are not made up; minutes the clock repeats (fall back) fire once,
the first time, unless the hour field is ``*`` (an hourly-or-finer schedule
then fires in both copies of the hour, as its interval promises).
"""

from __future__ import annotations

import functools
from datetime import UTC, datetime, timedelta, tzinfo

from django.conf import settings
from django.utils import translation


def gettext_noop(message: str) -> str:
    """Marks a word for the catalog; translated where it is shown (Django's own needs settings)."""
    return message


ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
FIELDS = (("minute", 0, 59), ("hour", 0, 23), ("day of month", 1, 31), ("month", 1, 12), ("day of week", 0, 7))
LOOKAHEAD = timedelta(days=366 * 4)  # a schedule with no match this far ahead is exhausted
_DST_WINDOW = 3 * 3600  # a zone's offset moves by less than this at one change
_MONTHS = (gettext_noop("January"), gettext_noop("February"), gettext_noop("March"), gettext_noop("April"),
           gettext_noop("May"), gettext_noop("June"), gettext_noop("July"), gettext_noop("August"),
           gettext_noop("September"), gettext_noop("October"), gettext_noop("November"), gettext_noop("December"))
_DAYS = (gettext_noop("Sunday"), gettext_noop("Monday"), gettext_noop("Tuesday"), gettext_noop("Wednesday"),
         gettext_noop("Thursday"), gettext_noop("Friday"), gettext_noop("Saturday"))
_FIELD_WORDS = {"minute": gettext_noop("minute"), "hour": gettext_noop("hour"),
                "day of month": gettext_noop("day of month"), "month": gettext_noop("month"),
                "day of week": gettext_noop("day of week")}


# The words of :meth:`Schedule.describe` follow the active language (the admin shows
# them); a process without Django settings (a worker from a bare Config) gets English.
def gettext(message: str) -> str:
    return translation.gettext(message) if settings.configured else message


def ngettext(singular: str, plural: str, number: int) -> str:
    if settings.configured:
        return translation.ngettext(singular, plural, number)
    return singular if number == 1 else plural


class Schedule:
    """A parsed cron expression. Raises ``ValueError`` naming what is wrong."""

    def __init__(self, expression: str) -> None:
        if not isinstance(expression, str):
            raise ValueError(f"a cron schedule must be a string, not {expression!r}")
        self.expression = expression
        text = expression.strip()
        if text.startswith("@"):
            if text.lower() not in ALIASES:
                raise ValueError(f"cron schedule {expression!r}: unknown alias (known: {', '.join(ALIASES)})")
            text = ALIASES[text.lower()]
        parts = text.split()
        if len(parts) != 5:
            raise ValueError(f"cron schedule {expression!r} must have 5 fields "
                             f"(minute hour day-of-month month day-of-week), not {len(parts)}")
        self.fields: list[tuple[int, ...]] = []
        for part, (name, low, high) in zip(parts, FIELDS, strict=True):
            values = _parse_field(expression, part, name, low, high)
            if name == "day of week":
                values = sorted({v % 7 for v in values})
            self.fields.append(tuple(values))
        self.texts = parts
        self.minutes, self.hours, self.days, self.months, self.weekdays = self.fields
        #: An hour field of literally ``*``: both copies of a repeated (fall-back) hour fire.
        self.every_hour = parts[1] == "*"
        # What croniter iterates: explicit value lists, "*" only where the text says "*",
        # so its either-day rule for two restricted day fields is the one above.
        self._croniter_text = " ".join(
            "*" if part == "*" else ",".join(str(v) for v in values)
            for part, values in zip(parts, self.fields, strict=True)
        )

    def __repr__(self) -> str:
        return f"Schedule({self.expression!r})"

    def next_fire_at(self, after: float, zone: tzinfo = UTC) -> int | None:
        """The first minute-aligned epoch second strictly after ``after`` whose wall-clock
        time in ``zone`` matches; None when nothing matches within four years."""
        # Here, not at the top: parsing and checking a schedule (settings checks in
        # every process) needs no cron library; only the poller asks for fire times.
        from croniter import croniter
        from croniter.croniter import CroniterBadDateError

        t = int(after // 1)
        wall = _wall(t, zone)
        # Around a fall-back change the clock shows some wall times twice: just after
        # it, times a little before "now" on the clock still lie ahead; just before
        # it, so do the times now to the change. Start the search that far back.
        here = _offset(t, zone)
        back = max(0, _offset(t - _DST_WINDOW, zone) - here, here - _offset(t + _DST_WINDOW, zone))
        iterator = croniter(self._croniter_text, wall - timedelta(seconds=back), day_or=True)
        limit = wall + LOOKAHEAD
        best: int | None = None
        best_wall: datetime | None = None
        while True:
            try:
                candidate = iterator.get_next(datetime)
            except CroniterBadDateError:
                return best
            if candidate > limit:
                return best
            if best is not None and best_wall is not None:
                # A later wall time is an earlier instant only where the zone's offset
                # is larger than at ``best`` (the other side of a change); past that
                # margin nothing can beat ``best``.
                there = _offset(best, zone)
                ahead = max(0, _offset(best - _DST_WINDOW, zone) - there, _offset(best + _DST_WINDOW, zone) - there)
                if (candidate - best_wall).total_seconds() > ahead:
                    return best
            for instant in self._instants(candidate, zone):
                if instant > t and (best is None or instant < best):
                    best, best_wall = instant, candidate

    def _instants(self, wall: datetime, zone: tzinfo) -> list[int]:
        """The epochs at which the clock in ``zone`` shows ``wall``: none in a
        spring-forward gap, two in a fall-back hour (the second only when the hour is ``*``)."""
        first = int(wall.replace(tzinfo=zone, fold=0).timestamp())
        second = int(wall.replace(tzinfo=zone, fold=1).timestamp())
        if _wall(first, zone) != wall:
            return []  # the clock skips this minute
        if first == second:
            return [first]
        early, late = min(first, second), max(first, second)
        return [early, late] if self.every_hour else [early]

    def describe(self) -> str:
        """The schedule in words, e.g. ``every day at 04:00``."""
        minute, hour, dom, month, dow = self.texts
        at = None
        if len(self.minutes) == 1 and len(self.hours) == 1 and "/" not in minute + hour:
            at = f"{self.hours[0]:02d}:{self.minutes[0]:02d}"
        days = dom == "*" and month == "*" and dow == "*"
        if all(p == "*" for p in self.texts):
            return gettext("every minute")
        if minute.startswith("*/") and hour == "*" and days:
            step = int(minute[2:])
            return ngettext("every %(n)d minute", "every %(n)d minutes", step) % {"n": step}
        if len(self.minutes) == 1 and hour == "*" and days:
            return gettext("every hour at minute %(minute)d") % {"minute": self.minutes[0]}
        if len(self.minutes) == 1 and hour.startswith("*/") and days:
            step = int(hour[2:])
            return ngettext("every %(n)d hour at minute %(minute)d", "every %(n)d hours at minute %(minute)d",
                            step) % {"n": step, "minute": self.minutes[0]}
        if at and days:
            return gettext("every day at %(time)s") % {"time": at}
        if at and dom == "*" and month == "*":
            return gettext("every %(days)s at %(time)s") % {
                "days": _join([gettext(_DAYS[d]) for d in self.weekdays]), "time": at}
        if at and dow == "*" and month == "*":
            return gettext("on day %(days)s of every month at %(time)s") % {
                "days": _join([str(d) for d in self.days]), "time": at}
        if at and dow == "*":
            return gettext("every year on %(months)s %(days)s at %(time)s") % {
                "months": _join([gettext(_MONTHS[m - 1]) for m in self.months]),
                "days": _join([str(d) for d in self.days]), "time": at}
        pieces = [f"{gettext(_FIELD_WORDS[name])} {text}"
                  for text, (name, _lo, _hi) in zip(self.texts, FIELDS, strict=True) if text != "*"]
        return gettext("at %(fields)s") % {"fields": ", ".join(pieces)}


@functools.lru_cache(maxsize=512)
def parse(expression: str) -> Schedule:
    """A cached :class:`Schedule` (schedules are immutable)."""
    return Schedule(expression)


def _parse_field(expression: str, text: str, name: str, low: int, high: int) -> list[int]:
    values: set[int] = set()
    for item in text.split(","):
        base, slash, step_text = item.partition("/")
        step = 1
        if slash:
            if not step_text.isdigit() or int(step_text) < 1:
                raise ValueError(f"cron schedule {expression!r}: {name} step {step_text!r} must be a number >= 1")
            step = int(step_text)
        if base == "*":
            start, end = low, high
        elif "-" in base:
            a, _, b = base.partition("-")
            start, end = _number(expression, a, name, low, high), _number(expression, b, name, low, high)
            if start > end:
                raise ValueError(f"cron schedule {expression!r}: {name} range {base!r} runs backwards")
        else:
            start = _number(expression, base, name, low, high)
            # "5/15" runs from 5 to the field's end (Vixie cron); a bare "5" is just 5.
            end = high if slash else start
        values.update(range(start, end + 1, step))
    return sorted(values)


def _number(expression: str, text: str, name: str, low: int, high: int) -> int:
    if not text.isdigit():
        raise ValueError(f"cron schedule {expression!r}: {name} value {text!r} is not a number "
                         "(names and L, W, #, ? are not supported)")
    value = int(text)
    if not low <= value <= high:
        raise ValueError(f"cron schedule {expression!r}: {name} value {value} is outside {low}-{high}")
    return value


def _wall(epoch: int, zone: tzinfo) -> datetime:
    return datetime.fromtimestamp(epoch, zone).replace(tzinfo=None)


def _offset(epoch: int, zone: tzinfo) -> int:
    offset = datetime.fromtimestamp(epoch, zone).utcoffset()
    return int(offset.total_seconds()) if offset is not None else 0


def _join(items: list[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return gettext("%(items)s and %(last)s") % {"items": ", ".join(items[:-1]), "last": items[-1]}
