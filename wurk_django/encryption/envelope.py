"""The envelope an encrypted argument travels in (ENT-604, ENT-605).

``{"__wurk_enc__": true, "v": <key version>, "iv": b64, "ct": b64, "tag": b64}``:
AES-256-GCM with a fresh 12-byte IV, a 16-byte tag and no associated data,
over the canonical JSON of the value, in standard padded base64. Ruby wurk
writes and reads the same document, so both can share keys and jobs.
"""

from __future__ import annotations

import base64
import binascii
import os
from typing import Any

from .. import canonical, payload
from .errors import DecryptionError
from .keyring import Keyring

MARKER = "__wurk_enc__"
FIELDS = ("v", "iv", "ct", "tag")
IV_BYTES = 12
TAG_BYTES = 16
PLACEHOLDER = "[encrypted data]"


def is_envelope(value: Any) -> bool:
    """True for an envelope: the marker set to true plus all four fields."""
    return isinstance(value, dict) and value.get(MARKER) is True and all(f in value for f in FIELDS)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def seal(keyring: Keyring, value: Any) -> dict:
    """Encrypt ``value`` (anything JSON can hold) with the active key."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    version = keyring.active_version
    key = keyring.key(version)
    iv = os.urandom(IV_BYTES)
    sealed = AESGCM(key).encrypt(iv, canonical.dumps(value).encode("utf-8"), None)  # ciphertext then tag
    return {MARKER: True, "v": version, "iv": _b64(iv), "ct": _b64(sealed[:-TAG_BYTES]),
            "tag": _b64(sealed[-TAG_BYTES:])}


def _field(envelope: dict, name: str) -> bytes:
    try:
        return base64.b64decode(envelope[name], validate=True)
    except (binascii.Error, ValueError, TypeError):
        raise DecryptionError(f"malformed envelope: {name!r} is not standard base64") from None


def unseal(keyring: Keyring, envelope: dict) -> Any:
    """The value inside ``envelope``. Raises :class:`DecryptionError` (or a key error)
    whose message never contains any of the plaintext."""
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    version = envelope.get("v")
    if isinstance(version, bool) or not isinstance(version, int):
        raise DecryptionError(f"malformed envelope: version {version!r} is not an integer")
    key = keyring.key(version)
    iv, ct, tag = _field(envelope, "iv"), _field(envelope, "ct"), _field(envelope, "tag")
    if len(tag) != TAG_BYTES:
        raise DecryptionError(f"malformed envelope: the tag is {len(tag)} bytes, not {TAG_BYTES}")
    try:
        plain = AESGCM(key).decrypt(iv, ct + tag, None)
    except InvalidTag:
        raise DecryptionError(
            f"authentication failed: the key of version {version} does not open it, or it was altered") from None
    except ValueError as exc:  # e.g. an IV of an impossible length
        raise DecryptionError(f"malformed envelope: {exc}") from None
    try:
        return payload.loads(plain)
    except ValueError:
        raise DecryptionError("the decrypted value is not JSON") from None
