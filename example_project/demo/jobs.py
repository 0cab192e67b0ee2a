"""Demo jobs. The worker imports this module at boot (WURK["AUTODISCOVER"])."""

from __future__ import annotations

import logging
import random
import time

from wurk_django import Job, job

from .models import Report

logger = logging.getLogger(__name__)


class BuildReport(Job):
    """Writes a Report row; pass ids and strings, never model instances."""

    queue = "default"

    def perform(self, title: str) -> None:
        Report.objects.create(title=title, jid=self.jid or "")


@job(queue="low")
def crunch_numbers(numbers: list[int]) -> None:
    total = sum(numbers)
    logger.info("crunch_numbers: %d numbers add up to %d", len(numbers), total)


class FlakyUpstream(Job):
    """Fails now and then, to show retries with a custom back-off in the Web UI."""

    queue = "critical"
    retry = 4
    backtrace = 5

    @staticmethod
    def retry_in(count: int, exc: BaseException, job: dict):
        if isinstance(exc, PermissionError):
            return "kill"  # retrying cannot fix a refusal: straight to the dead set
        return 5 * (count + 1)  # 5 s, 10 s, 15 s... instead of the default back-off

    @staticmethod
    def retries_exhausted(job: dict, exc: BaseException) -> None:
        logger.warning("giving up on %s after %s: %s", job["jid"], job.get("retry_count"), exc)

    def perform(self, failure_rate: float = 0.5) -> None:
        time.sleep(random.uniform(0.05, 0.3))
        if random.random() < failure_rate:
            raise ConnectionError("upstream timed out")
        attempts = (self.payload or {}).get("retry_count", -1) + 2
        Report.objects.create(title="upstream answered", jid=self.jid or "", attempts=attempts)


class HardJob(Job):
    """Answers to the Ruby constant ``HardJob``: a Ruby app's ``HardJob.perform_async("bob", 5)`` runs here."""

    name = "HardJob"

    def perform(self, name: str, count: int) -> None:
        for _ in range(count):
            time.sleep(0.01)
        logger.info("HardJob done for %s", name)
