"""tests.settings plus what the operations tests need, from the environment:
``WURK_TEST_LOGFILE`` (a file handler on ``wurk_django``) and ``WURK_TEST_PROBE_MODULE``
(a module imported at startup, which the --reload test then edits)."""

import importlib
import os

from tests.settings import *  # noqa: F403
from tests.settings import LOGGING

if os.environ.get("WURK_TEST_LOGFILE"):
    LOGGING = {
        **LOGGING,
        "handlers": {**LOGGING["handlers"],
                     "file": {"class": "logging.FileHandler", "filename": os.environ["WURK_TEST_LOGFILE"]}},
        "loggers": {"wurk_django": {"handlers": ["file"], "level": "INFO", "propagate": False}},
    }

if os.environ.get("WURK_TEST_PROBE_MODULE"):
    importlib.import_module(os.environ["WURK_TEST_PROBE_MODULE"])
