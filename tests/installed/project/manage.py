#!/usr/bin/env python
"""A team's own project, as small as it gets: the installed-wheel smoke runs it (tests/installed/smoke.py)."""

import os
import sys

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "smokesite.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
