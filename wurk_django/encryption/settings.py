"""Encryption's setting: ``WURK["ENCRYPTION"]``, read as ``config.encryption`` (the dict as
written; :mod:`wurk_django.encryption.keyring` turns it into keys)."""

from __future__ import annotations

from ..conf.setting import FEATURES, Setting

ROWS = (
    Setting("ENCRYPTION", None,
            lambda v: v is None or isinstance(v, dict), "None or a dict with ACTIVE_VERSION and KEYS",
            'Encrypted job arguments: `{"ACTIVE_VERSION": n, "KEYS": {n: base64 of a 32-byte key}}` (versions may'
            " be ints or digit strings); checked by `wurk.E007`; see docs/encryption.md.", FEATURES,
            # Its own messages: the generic one would print the value, i.e. the keys.
            detail="wurk_django.encryption.keyring.problems", kind="encryption",
            type=dict | None),
)
