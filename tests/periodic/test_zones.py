"""Zones of loops written by Ruby (issue 26 item 2): an empty ``tz`` is UTC, Rails
zone names are their IANA zones."""

from __future__ import annotations

import shutil
import subprocess
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from wurk_django.periodic import zones
from wurk_django.periodic.loops import Loop
from wurk_django.periodic.rails_zones import RAILS_ZONES


def test_an_empty_zone_is_utc_whatever_djangos_time_zone(settings):
    settings.TIME_ZONE = "Asia/Tokyo"
    assert zones.resolve("") is UTC
    assert zones.resolve(None) is UTC


def test_a_rails_zone_name_is_its_iana_zone(caplog):
    """ENT-409: time zones incl. Rails names."""
    assert zones.resolve("Central Time (US & Canada)") == ZoneInfo("America/Chicago")
    assert zones.resolve("Tokyo") == ZoneInfo("Asia/Tokyo")
    assert zones.is_known("Eastern Time (US & Canada)")
    assert not caplog.records  # a Rails name is not an unknown zone


def test_a_loop_stored_by_ruby_without_a_zone_fires_on_utc_hours(settings):
    settings.TIME_ZONE = "America/New_York"
    loop = Loop.build("0 4 * * *", "Nightly", {}, "")
    assert loop.zone is UTC
    # 04:00 UTC is the fire time, not 04:00 in New York.
    assert datetime(2026, 12, 1, 4, 0, tzinfo=UTC).astimezone(loop.zone).hour == 4


def test_every_rails_zone_maps_to_a_zone_python_knows():
    assert len(RAILS_ZONES) >= 150
    for rails, iana in RAILS_ZONES.items():
        assert ZoneInfo(iana), rails


def _ruby_mapping() -> dict[str, str] | None:
    if shutil.which("ruby") is None:
        return None
    script = ('require "active_support"; require "active_support/values/time_zone"; '
              'ActiveSupport::TimeZone::MAPPING.each { |k, v| puts "#{k}\\t#{v}" }')
    done = subprocess.run(["ruby", "-e", script], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        return None
    return dict(line.split("\t") for line in done.stdout.splitlines() if line)


def test_the_table_is_rails_own():
    ruby = _ruby_mapping()
    if ruby is None:
        pytest.skip("ruby with ActiveSupport (Debian: ruby-activesupport) is not installed")
    assert RAILS_ZONES == ruby
