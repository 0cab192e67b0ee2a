"""Errors of encrypted arguments (ENT-602, ENT-608)."""

from __future__ import annotations

from ..errors import WurkError


class EncryptionError(WurkError):
    """Encryption cannot work: no keys configured, or a key of the wrong size."""


class KeyMissingError(EncryptionError):
    """No key for an envelope's version (the resolver returned nothing for it)."""


class DecryptionError(EncryptionError):
    """An envelope could not be opened: altered ciphertext, wrong key, malformed envelope."""
