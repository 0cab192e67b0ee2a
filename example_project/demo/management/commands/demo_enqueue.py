"""``python manage.py demo_enqueue``: push a handful of demo jobs to watch the worker run."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from example_project.demo.jobs import BuildReport, FlakyUpstream, HardJob, crunch_numbers


class Command(BaseCommand):
    help = "Push demo jobs: reports now and later, a bulk batch, flaky jobs that retry, a Ruby-named job."

    def add_arguments(self, parser):
        parser.add_argument("--count", type=int, default=5, help="reports to push now (default 5)")

    def handle(self, *args, count: int, **options):
        jids = [BuildReport.perform_async(f"report #{i + 1}") for i in range(count)]
        jids.append(BuildReport.perform_in(30, "report due in 30 seconds"))
        jids.append(BuildReport.set(queue="critical").perform_async("urgent report"))
        jids += crunch_numbers.perform_bulk([[list(range(n))] for n in range(1, 11)])
        jids += [FlakyUpstream.perform_async(0.6) for _ in range(3)]
        jids.append(HardJob.perform_async("bob", 5))
        from example_project.demo.tasks import task

        if task is not None:  # Django 6: a django.tasks task through WurkBackend
            from example_project.demo.tasks import count_reports

            result = count_reports.enqueue("report")
            jids.append(result.id)
            self.stdout.write(f"task count_reports enqueued: result id {result.id}")
        self.stdout.write(self.style.SUCCESS(f"pushed {len([j for j in jids if j])} jobs"))
        self.stdout.write("run `python manage.py wurk` to process them")
