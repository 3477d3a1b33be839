"""Envelope encryption keys: a random data key per segment, wrapped by a key of the key ring.

Rotation is adding a key to ``encryption.keys`` and making it ``encryption.active.key``: new
segments are wrapped with it, and older ones still name (in their manifest) the key that
wrapped them, so they stay readable while that key is kept in the ring.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from tierlog.errors import RemoteStorageError

from .manifest import Encryption

DATA_KEY_BYTES = 32


class KeyRing:
    """The configured key-encryption keys; never shows key material."""

    def __init__(self, keys: Mapping[str, bytes], active_key_id: str | None) -> None:
        if active_key_id is not None and active_key_id not in keys:
            raise ValueError(f"active key {active_key_id!r} is not in the key ring")
        self._keys = dict(keys)
        self.active_key_id = active_key_id

    @property
    def key_ids(self) -> tuple[str, ...]:
        return tuple(sorted(self._keys))

    def new_data_key(self) -> tuple[bytes, Encryption]:
        """A fresh data key and its wrapped form under the active key."""
        from cryptography.hazmat.primitives.keywrap import aes_key_wrap

        if self.active_key_id is None:
            raise RuntimeError("encryption is not configured")
        data_key = os.urandom(DATA_KEY_BYTES)
        wrapped = aes_key_wrap(self._keys[self.active_key_id], data_key)
        return data_key, Encryption(key_id=self.active_key_id, wrapped_key=wrapped)

    def unwrap(self, encryption: Encryption, where: str) -> bytes:
        """The data key of a segment.

        :raises RemoteStorageError: the wrapping key is not in the ring, or the ring's key of
            that id is not the one the segment was written with.
        """
        from cryptography.hazmat.primitives.keywrap import InvalidUnwrap, aes_key_unwrap

        kek = self._keys.get(encryption.key_id)
        if kek is None:
            known = ", ".join(self.key_ids) or "none"
            raise RemoteStorageError(
                f"{where} was encrypted with key {encryption.key_id!r}, which is not in "
                f"encryption.keys (known ids: {known}); keep retired keys in the ring"
            )
        try:
            return aes_key_unwrap(kek, encryption.wrapped_key)
        except (InvalidUnwrap, ValueError) as err:
            raise RemoteStorageError(
                f"cannot unwrap the data key of {where} with key {encryption.key_id!r}: the key "
                "of that id in encryption.keys is not the one the segment was written with"
            ) from err

    def __repr__(self) -> str:
        return f"KeyRing(ids={list(self.key_ids)}, active={self.active_key_id!r})"
