"""Settings for the abandoned-thread tests (tests/server/run/test_settle.py): the limit of
abandoned threads still stuck comes from ``TEST_ABANDONED_LIMIT``."""

import os

from tests.settings import *  # noqa: F403

WURK = {**WURK, "ABANDONED_THREADS_LIMIT": int(os.environ["TEST_ABANDONED_LIMIT"])}  # noqa: F405
