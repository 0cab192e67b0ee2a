"""tests.settings with PostgreSQL, for worker processes that exercise real database connections.

Uses the machine's PostgreSQL (WURK_TEST_PG_* to override); no tables are needed.
"""

import json
import os

from tests.settings import *  # noqa: F403

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "HOST": os.environ.get("WURK_TEST_PG_HOST", "127.0.0.1"),
        "NAME": os.environ.get("WURK_TEST_PG_NAME", "test"),
        "USER": os.environ.get("WURK_TEST_PG_USER", "postgres"),
        "CONN_MAX_AGE": 0,
        **json.loads(os.environ.get("WURK_TEST_PG_EXTRA", "{}")),
    }
}
