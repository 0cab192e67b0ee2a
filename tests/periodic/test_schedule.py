"""Cron grammar (ENT-407), next_fire_at (ENT-408) and DST (ENT-410), with fixed datetimes."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from wurk_django.periodic.schedule import Schedule

NY = ZoneInfo("America/New_York")
BERLIN = ZoneInfo("Europe/Berlin")


def fires(expr: str, start: datetime, count: int, zone=UTC) -> list[str]:
    schedule = Schedule(expr)
    t = int(start.timestamp())
    out = []
    for _ in range(count):
        t = schedule.next_fire_at(t, zone)
        if t is None:
            out.append(None)
            break
        out.append(datetime.fromtimestamp(t, zone).strftime("%m-%d %H:%M %Z"))
    return out


@pytest.mark.parametrize("expr", [
    "* * * * *", "0 4 * * *", "*/5 * * * *", "5/15 * * * *", "0 0 1-7 * 1", "0,30 8-18/2 * 1-6 0-7",
    "@hourly", "@daily", "@midnight", "@weekly", "@monthly", "@yearly", "@annually",
])
def test_valid_schedules(expr):
    Schedule(expr)


@pytest.mark.parametrize("expr,message", [
    ("* * * *", "5 fields"), ("0 * * * * *", "5 fields"), ("@reboot", "alias"), ("60 * * * *", "outside"),
    ("* 24 * * *", "outside"), ("* * 0 * *", "outside"), ("* * * 13 *", "outside"), ("* * * * 8", "outside"),
    ("* * * JAN *", "not a number"), ("* * * * MON", "not a number"), ("* * L * *", "not a number"),
    ("* * 15W * *", "not a number"), ("* * * * 1#2", "not a number"), ("* * ? * *", "not a number"),
    ("5-1 * * * *", "backwards"), ("*/0 * * * *", "step"), ("*/x * * * *", "step"), ("", "5 fields"),
])
def test_invalid_schedules_raise_value_error(expr, message):
    # ENT-407, ENT-401: invalid cron strings raise ValueError at once
    with pytest.raises(ValueError, match=message):
        Schedule(expr)


def test_not_a_string():
    with pytest.raises(ValueError):
        Schedule(None)  # type: ignore[arg-type]


def test_bare_value_step_runs_to_the_field_max():
    # ENT-407 (Vixie): 5/15 = 5,20,35,50
    assert Schedule("5/15 * * * *").minutes == (5, 20, 35, 50)
    assert Schedule("* * * * 7").weekdays == (0,)


def test_next_fire_is_strictly_after_and_minute_aligned():
    # ENT-408
    s = Schedule("* * * * *")
    assert s.next_fire_at(1_700_000_040) == 1_700_000_100
    assert s.next_fire_at(1_700_000_041) == 1_700_000_100
    assert s.next_fire_at(1_700_000_099) == 1_700_000_100


def test_day_fields_or_when_both_restricted():
    # ENT-407: both restricted -> either matches; one restricted -> it must match
    start = datetime(2024, 5, 1, tzinfo=UTC)  # a Wednesday
    assert fires("0 0 13 * 5", start, 3) == ["05-03 00:00 UTC", "05-10 00:00 UTC", "05-13 00:00 UTC"]
    assert fires("0 0 * * 5", start, 2) == ["05-03 00:00 UTC", "05-10 00:00 UTC"]
    assert fires("0 0 1-31 * 5", start, 2) == ["05-02 00:00 UTC", "05-03 00:00 UTC"]


def test_time_zone_wall_clock():
    # ENT-409: 04:00 in Tokyo is 19:00 UTC the day before
    s = Schedule("0 4 * * *")
    t = s.next_fire_at(datetime(2024, 1, 1, 12, tzinfo=UTC).timestamp(), ZoneInfo("Asia/Tokyo"))
    assert datetime.fromtimestamp(t, UTC) == datetime(2024, 1, 1, 19, tzinfo=UTC)


def test_spring_forward_skips_the_missing_minutes_without_catch_up():
    # ENT-410: 2024-03-10 02:00 -> 03:00 in New York; 02:30 does not exist that day
    assert fires("30 2 * * *", datetime(2024, 3, 9, 12, tzinfo=NY), 2, NY) == ["03-11 02:30 EDT", "03-12 02:30 EDT"]
    assert fires("*/20 * * * *", datetime(2024, 3, 10, 1, 10, tzinfo=NY), 4, NY) == [
        "03-10 01:20 EST", "03-10 01:40 EST", "03-10 03:00 EDT", "03-10 03:20 EDT"]


def test_fall_back_fires_a_fixed_hour_once():
    # ENT-410: 2024-11-03 01:00-02:00 happens twice in New York; "30 1" fires the first time only
    assert fires("30 1 * * *", datetime(2024, 11, 2, 12, tzinfo=NY), 2, NY) == ["11-03 01:30 EDT", "11-04 01:30 EST"]


def test_fall_back_fires_both_copies_when_the_hour_is_star():
    # ENT-410: hour field literally "*": both copies of the repeated hour fire
    assert fires("30 * * * *", datetime(2024, 11, 3, 0, 10, tzinfo=NY), 4, NY) == [
        "11-03 00:30 EDT", "11-03 01:30 EDT", "11-03 01:30 EST", "11-03 02:30 EST"]
    assert fires("*/20 * * * *", datetime(2024, 11, 3, 0, 50, tzinfo=NY), 7, NY) == [
        "11-03 01:00 EDT", "11-03 01:20 EDT", "11-03 01:40 EDT",
        "11-03 01:00 EST", "11-03 01:20 EST", "11-03 01:40 EST", "11-03 02:00 EST"]


def test_fall_back_in_europe():
    # 2024-10-27 03:00 CEST -> 02:00 CET in Berlin
    assert fires("15 2 * * *", datetime(2024, 10, 26, 12, tzinfo=BERLIN), 2, BERLIN) == [
        "10-27 02:15 CEST", "10-28 02:15 CET"]
    assert fires("15 * * * *", datetime(2024, 10, 27, 1, 30, tzinfo=BERLIN), 3, BERLIN) == [
        "10-27 02:15 CEST", "10-27 02:15 CET", "10-27 03:15 CET"]


def test_matches_a_minute_by_minute_scan_around_dst_changes():
    # ENT-408's definition, checked by brute force across four changes
    def scan(s: Schedule, t: int, zone) -> int:
        m = (t // 60 + 1) * 60
        while True:
            w = datetime.fromtimestamp(m, zone)
            dom, dow = w.day in s.days, (w.isoweekday() % 7) in s.weekdays
            both = s.texts[2] != "*" and s.texts[4] != "*"
            day = (dom or dow) if both else (dom and dow)
            repeat = w.fold == 1 and datetime.fromtimestamp(m - 3600, zone).replace(tzinfo=None) == w.replace(tzinfo=None)
            if w.minute in s.minutes and w.hour in s.hours and w.month in s.months and day:
                if not (repeat and not s.every_hour):
                    return m
            m += 60

    for zone in (NY, BERLIN):
        for expr in ("*/20 * * * *", "30 1 * * *", "0,30 1-3 * * *", "15 2 * * 0", "*/7 */2 * * *", "45 * * * *"):
            s = Schedule(expr)
            for base in (datetime(2024, 11, 3, tzinfo=NY), datetime(2024, 3, 10, tzinfo=NY),
                         datetime(2024, 10, 27, tzinfo=UTC), datetime(2024, 3, 31, tzinfo=UTC)):
                t = int(base.timestamp()) - 4 * 3600
                for _ in range(30):
                    got = s.next_fire_at(t, zone)
                    assert got == scan(s, t, zone), (zone, expr, t)
                    t = got


def test_impossible_date_is_exhausted():
    # ENT-408: no match within the lookahead -> None
    assert Schedule("0 0 31 2 *").next_fire_at(1_700_000_000) is None
    assert Schedule("0 0 29 2 *").next_fire_at(datetime(2025, 3, 1, tzinfo=UTC).timestamp()) == int(
        datetime(2028, 2, 29, tzinfo=UTC).timestamp())


@pytest.mark.parametrize("expr,words", [
    ("* * * * *", "every minute"), ("*/5 * * * *", "every 5 minutes"), ("15 * * * *", "every hour at minute 15"),
    ("0 4 * * *", "every day at 04:00"), ("30 9 * * 1-5", "every Monday, Tuesday, Wednesday, Thursday and Friday at 09:30"),
    ("0 0 1 * *", "on day 1 of every month at 00:00"), ("@yearly", "every year on January 1 at 00:00"),
])
def test_describe(expr, words):
    assert Schedule(expr).describe() == words
