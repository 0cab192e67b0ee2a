"""Prints the settings tables of docs/configuration.md from the settings rows (``conf.SETTINGS``:
the engine's in wurk_django/conf/core.py, each feature's in wurk_django/<feature>/settings.py).

    python -m wurk_django.settings_doc

Paste the output over the block between the two markers in docs/configuration.md
(``tests/test_conf.py`` fails until the docs hold exactly this). A module of its
own so that ``python -m`` runs it without running a second copy of a conf module.
"""

import sys

from .conf import markdown

if __name__ == "__main__":
    sys.stdout.write(markdown())
