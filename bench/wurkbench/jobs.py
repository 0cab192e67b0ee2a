"""wurk_django jobs for the benchmark (class names ``wurkbench.jobs.Noop`` etc.)."""

import time

from peers.recorder import IO_SECONDS, cpu_work, done

from wurk_django import Job


class Noop(Job):
    queue = "bench"

    def perform(self):
        done()


class Cpu(Job):
    queue = "bench"

    def perform(self):
        cpu_work()
        done()


class Io(Job):
    queue = "bench"

    def perform(self):
        time.sleep(IO_SECONDS)
        done()
