"""Prints the settings tables of docs/configuration.md from ``conf.SETTINGS``.

    python -m wurk_django.settings_doc

Paste the output over the block between the two markers in docs/configuration.md
(``tests/test_conf.py`` fails until the docs hold exactly this). A module of its
own because ``python -m wurk_django.conf`` would run a second copy of conf.py.
"""

import sys

from .conf import markdown

if __name__ == "__main__":
    sys.stdout.write(markdown())
