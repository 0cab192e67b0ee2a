"""Which keys encrypt and decrypt, from ``WURK["ENCRYPTION"]`` or :func:`enable` (ENT-601, ENT-602, ENT-609).

A keyring is an active version (new pushes are encrypted with its key) and a
resolver answering ``version -> 32 raw bytes`` for every version that may still
be found in Redis. Keys are resolved once per version and kept for the life of
the process. Rotation: give the resolver the new key everywhere, then make it
the active version, then drop the old key once no job encrypted with it is left.
"""

from __future__ import annotations

import base64
import binascii
import threading
from collections.abc import Callable
from typing import Any

from .errors import EncryptionError, KeyMissingError

KEY_BYTES = 32
SETTING_KEYS = ("ACTIVE_VERSION", "KEYS")

Resolver = Callable[[int], bytes]


class Keyring:
    def __init__(self, active_version: int, resolver: Resolver) -> None:
        if isinstance(active_version, bool) or not isinstance(active_version, int) or active_version < 0:
            raise ValueError(f"active_version must be an integer >= 0, not {active_version!r}")
        if not callable(resolver):
            raise ValueError(f"the key resolver must be a callable version -> bytes, not {type(resolver).__name__}")
        self.active_version = active_version
        self.resolver = resolver
        self._keys: dict[int, bytes] = {}
        self._lock = threading.Lock()

    def key(self, version: int) -> bytes:
        """The 32-byte key of ``version``. Errors other than a missing key (a KMS
        timeout...) propagate as they are, so the job retries later."""
        found = self._keys.get(version)
        if found is not None:
            return found
        with self._lock:
            try:
                key = self.resolver(version)
            except (KeyError, IndexError):
                key = None
            if key is None:
                raise KeyMissingError(f"no key for version {version}")
            if not isinstance(key, (bytes, bytearray)) or len(key) != KEY_BYTES:
                size = f"{len(key)} bytes" if isinstance(key, (bytes, bytearray)) else f"a {type(key).__name__}"
                raise EncryptionError(f"the key for version {version} must be {KEY_BYTES} raw bytes, got {size}")
            self._keys[version] = bytes(key)
            return self._keys[version]


_enabled: Keyring | None = None
# The setting object itself is kept (not its id), so a new dict at a recycled address
# can never be mistaken for the one the cached keyring was built from.
_from_settings: tuple[Any, Keyring | None] | None = None


def enable(active_version: int, resolver: Resolver) -> None:
    """Encrypt with ``active_version``; ``resolver(version)`` returns that version's 32 raw bytes.

    Takes precedence over ``WURK["ENCRYPTION"]``. Calling it again rebinds the
    resolver and forgets the keys resolved so far.
    """
    global _enabled
    _enabled = Keyring(active_version, resolver)


def disable() -> None:
    """Forget what :func:`enable` set (``WURK["ENCRYPTION"]`` applies again)."""
    global _enabled
    _enabled = None


def current() -> Keyring | None:
    """The keyring in force, or ``None`` when encryption is not configured."""
    if _enabled is not None:
        return _enabled
    from ..conf import raw_settings

    setting = raw_settings().get("ENCRYPTION")
    global _from_settings
    cached = _from_settings
    if cached is None or cached[0] is not setting:
        cached = _from_settings = (setting, from_setting(setting))
    return cached[1]


def _version(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)  # JSON and environment-built settings have string keys
    return None


def decode_key(text: Any) -> bytes:
    if not isinstance(text, (str, bytes)):
        raise ValueError("not a string")
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("not standard base64") from None


def from_setting(setting: Any) -> Keyring | None:
    """A keyring from ``WURK["ENCRYPTION"]`` (``None`` when unset); refused if :func:`problems` finds any."""
    if setting is None:
        return None
    found = problems(setting)
    if found:
        raise EncryptionError("WURK['ENCRYPTION']: " + "; ".join(found))
    keys = {_version(v): decode_key(k) for v, k in setting["KEYS"].items()}
    return Keyring(_version(setting["ACTIVE_VERSION"]), keys.__getitem__)


def problems(setting: Any) -> list[str]:
    """What is wrong with a ``WURK["ENCRYPTION"]`` value. Messages never quote a key."""
    if setting is None:
        return []
    if not isinstance(setting, dict):
        return [f"must be None or a dict with ACTIVE_VERSION and KEYS, not a {type(setting).__name__}"]
    found = [f"unknown key {k!r} (known: ACTIVE_VERSION, KEYS)" for k in setting if k not in SETTING_KEYS]
    active = _version(setting.get("ACTIVE_VERSION"))
    if active is None:
        found.append("ACTIVE_VERSION must be an integer version number")
    keys = setting.get("KEYS")
    if not isinstance(keys, dict) or not keys:
        found.append("KEYS must be a dict {version: base64 of a 32-byte key}")
        return found
    for version, text in keys.items():
        number = _version(version)
        if number is None:
            found.append(f"KEYS has a version {version!r} that is not an integer")
            continue
        try:
            size = len(decode_key(text))
        except ValueError as exc:
            found.append(f"the key for version {number} is {exc}")
            continue
        if size != KEY_BYTES:
            found.append(f"the key for version {number} is {size} bytes after base64 decoding, not {KEY_BYTES}")
    if active is not None and active not in {_version(v) for v in keys}:
        found.append(f"ACTIVE_VERSION {active} has no key in KEYS")
    return found
