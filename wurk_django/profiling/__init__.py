"""Job profiling: run one job under a sampling profiler and keep the result for a day.

Push a job with a ``profile`` token (any label you will recognise)::

    ReportJob.set(profile="slow-report").perform_async(2025)

and its successful run is profiled (wall clock, 1 ms samples; a job's
``profiler_options`` may set ``{"interval": seconds}``). The result is stored
as Sidekiq 8 stores it (``profiles`` sorted set, ``<token>-<jid>`` hash with
gzip'd Firefox Profiler JSON) and listed on the admin's Profiles tab, next to
profiles written by Ruby Sidekiq workers: a table of the functions that took
the time, and the file to open in https://profiler.firefox.com.
"""

from __future__ import annotations

from .gecko import build, load, to_gzip, top_functions
from .sampler import Sampler
from .store import EXPIRY, store

__all__ = ["EXPIRY", "Sampler", "build", "load", "store", "to_gzip", "top_functions"]
