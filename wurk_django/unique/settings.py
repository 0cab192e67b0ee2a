"""Unique jobs' setting: ``WURK["UNIQUE_JOBS"]``, read as ``config.unique_jobs``."""

from __future__ import annotations

from ..conf.setting import FEATURES, Setting
from ..conf.validators import is_bool

ROWS = (
    Setting("UNIQUE_JOBS", False,
            is_bool, "True or False",
            "Turns unique jobs on (`unique_for` on a job class does nothing until this is `True`); needed in every"
            " pushing process and every worker; see docs/unique.md.", FEATURES,
            type=bool),
)
