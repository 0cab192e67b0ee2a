"""Encrypted job arguments: the last positional argument travels sealed (ENT-601..610).

::

    # settings.py
    WURK = {..., "ENCRYPTION": {"ACTIVE_VERSION": 2, "KEYS": {1: old_key_b64, 2: new_key_b64}}}
    # or in code (takes precedence):  encryption.enable(2, resolver)  # resolver(version) -> 32 bytes

    class ChargeCard(Job):
        encrypt = True

        def perform(self, order_id, card):   # ``card`` is stored encrypted
            ...

AES-256-GCM, in the envelope Ruby wurk uses (``{"__wurk_enc__": true, "v", "iv",
"ct", "tag"}``). See docs/encryption.md.
"""

from typing import Any

from .envelope import PLACEHOLDER, is_envelope
from .errors import DecryptionError, EncryptionError, KeyMissingError
from .keyring import Keyring, current, disable, enable

__all__ = [
    "PLACEHOLDER",
    "DecryptionError",
    "EncryptionError",
    "KeyMissingError",
    "Keyring",
    "decrypt",
    "disable",
    "enable",
    "enabled",
    "encrypt",
    "is_envelope",
]


def enabled() -> bool:
    """True when keys are configured (by setting or :func:`enable`)."""
    return current() is not None


def encrypt(value: Any) -> dict:
    """The envelope of ``value`` under the active key."""
    from .envelope import seal

    ring = current()
    if ring is None:
        raise EncryptionError("encryption is not configured")
    return seal(ring, value)


def decrypt(envelope: dict) -> Any:
    """The value inside an envelope."""
    from .envelope import unseal

    ring = current()
    if ring is None:
        raise EncryptionError("encryption is not configured")
    return unseal(ring, envelope)
