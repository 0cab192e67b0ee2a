"""ASGI lifespan wrapper for embedded mode; the public import path of :mod:`wurk_django.embed.asgi`.

    from wurk_django.asgi import wrap

    application = wrap(get_asgi_application())
"""

from .embed.asgi import wrap

__all__ = ["wrap"]
