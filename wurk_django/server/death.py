"""The engine's name for :mod:`wurk_django.death`, the death path.

It lives at the top of the package since the data API's kills and revokes take it
too, and a process that only pushes must load no ``wurk_django.server`` module.
This name is the same module object, so the engine's imports (and a test that
patches it) see one registry of death handlers.
"""

import sys

from .. import death

sys.modules[__name__] = death
