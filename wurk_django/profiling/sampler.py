"""A wall-clock sampling profiler for one thread, in pure Python.

A helper thread reads the profiled thread's current stack
(``sys._current_frames()``) every ``interval`` seconds and counts it. Wall
mode, as Sidekiq's default: time spent waiting (I/O, sleep, locks) shows up
as much as time spent computing, which is what a slow job usually needs.
"""

from __future__ import annotations

import sys
import threading
import time

# A frame as the profile stores it: (function name, file name, first line of the function, current line).
Frame = tuple[str, str, int, int]


class Sampler:
    def __init__(self, thread_ident: int | None = None, interval: float = 0.001, max_samples: int = 200_000) -> None:
        if not interval > 0:
            raise ValueError(f"profiler interval must be > 0 seconds, not {interval!r}")
        self.target = thread_ident if thread_ident is not None else threading.get_ident()
        self.interval = interval
        self.max_samples = max_samples
        self.samples: list[tuple[float, tuple[Frame, ...]]] = []  # (ms since start, stack root first)
        self.started_at = 0.0  # epoch seconds
        self.elapsed = 0.0  # seconds
        self._start = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Sampler:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        self.started_at = time.time()
        self._start = time.perf_counter()
        self._thread = threading.Thread(target=self._run, name="wurk-profiler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self.elapsed = time.perf_counter() - self._start
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            frame = sys._current_frames().get(self.target)
            if frame is None or len(self.samples) >= self.max_samples:
                continue
            stack = []
            while frame is not None:
                code = frame.f_code
                stack.append((getattr(code, "co_qualname", code.co_name), code.co_filename, code.co_firstlineno,
                              frame.f_lineno or 0))
                frame = frame.f_back
            stack.reverse()
            self.samples.append(((time.perf_counter() - self._start) * 1000.0, tuple(stack)))
