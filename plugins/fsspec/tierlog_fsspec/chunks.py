"""Chunk transforms: zstd compression, then AES-256-GCM, then a CRC-32C of the stored bytes.

Each chunk is transformed on its own so any chunk can be read without its neighbours. The GCM
nonce and associated data bind a chunk to its upload, its object and its position, so stored
chunks cannot be swapped or moved between segments without failing authentication; nonces are
never reused because every upload has a fresh random data key.
"""

from __future__ import annotations

import struct
from typing import Final

import crc32c
from tierlog.errors import RemoteStorageError
from tierlog.model import IndexType

#: Object ids inside one upload: the data chunks, then each index in IndexType order.
DATA_OBJECT: Final = 0
INDEX_OBJECT_IDS: Final = {index_type: number for number, index_type in enumerate(IndexType, 1)}
_NONCE = struct.Struct(">IQ")
_AAD_PREFIX: Final = b"tierlog-fsspec/1"
GCM_TAG_BYTES: Final = 16

#: Skip compressing a segment whose producer already compressed it if a trial chunk shrinks less.
HEURISTIC_MIN_SAVING: Final = 0.05

_RECORD_BATCH_MAGIC_OFFSET: Final = 16
_RECORD_BATCH_ATTRIBUTES_OFFSET: Final = 21
_COMPRESSION_CODEC_MASK: Final = 0x07


def checksum(data: bytes | bytearray | memoryview, previous: int = 0) -> int:
    """CRC-32C (the checksum Kafka's record batches use), hardware-accelerated.

    ``previous`` is the checksum of the bytes before ``data``, to checksum a chunk piece by piece.
    """
    return int(crc32c.crc32c(data, previous))


def nonce_and_aad(upload_id: bytes, object_id: int, index: int) -> tuple[bytes, bytes]:
    """The GCM nonce and associated data of chunk ``index`` of object ``object_id``."""
    position = _NONCE.pack(object_id, index)
    return position, _AAD_PREFIX + upload_id + position


def producer_compressed(head: bytes) -> bool:
    """Whether the segment's first record batch (v2) was compressed by its producer."""
    if len(head) < _RECORD_BATCH_ATTRIBUTES_OFFSET + 2 or head[_RECORD_BATCH_MAGIC_OFFSET] != 2:
        return False
    attributes = int.from_bytes(
        head[_RECORD_BATCH_ATTRIBUTES_OFFSET : _RECORD_BATCH_ATTRIBUTES_OFFSET + 2]
    )
    return attributes & _COMPRESSION_CODEC_MASK != 0


class ChunkCodec:
    """Encodes and decodes the chunks of one upload (thread-safe: no shared codec state)."""

    def __init__(
        self,
        upload_id: bytes,
        *,
        compression_level: int | None,
        data_key: bytes | None,
    ) -> None:
        self.upload_id = upload_id
        self.compression_level = compression_level
        self._aead = None
        if data_key is not None:
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM

            self._aead = AESGCM(data_key)

    @property
    def identity(self) -> bool:
        return self.compression_level is None and self._aead is None

    def _nonce_and_aad(self, object_id: int, index: int) -> tuple[bytes, bytes]:
        return nonce_and_aad(self.upload_id, object_id, index)

    def compress(self, plain: bytes | memoryview) -> bytes | None:
        """The zstd frame of ``plain``, or None when compression is off or saves nothing."""
        if self.compression_level is None:
            return None
        import zstandard

        compressed = zstandard.ZstdCompressor(level=self.compression_level).compress(plain)
        return compressed if len(compressed) < len(plain) else None

    def encode(
        self, object_id: int, index: int, plain: bytes | memoryview, *, compress: bool = True
    ) -> tuple[bytes | memoryview, bool]:
        """Stored bytes of one chunk, and whether they are compressed."""
        compressed = self.compress(plain) if compress else None
        body: bytes | memoryview = plain if compressed is None else compressed
        if self._aead is not None:
            nonce, aad = self._nonce_and_aad(object_id, index)
            body = self._aead.encrypt(nonce, bytes(body), aad)
        return body, compressed is not None

    def decode(
        self,
        object_id: int,
        index: int,
        stored: bytes | memoryview,
        *,
        compressed: bool,
        size: int,
        where: str,
    ) -> bytes | memoryview:
        """Plain bytes of one stored chunk (already checksummed by the caller).

        :raises RemoteStorageError: authentication or decompression failed, naming ``where``.
        """
        body = stored
        if self._aead is not None:
            from cryptography.exceptions import InvalidTag

            nonce, aad = self._nonce_and_aad(object_id, index)
            try:
                body = self._aead.decrypt(nonce, bytes(body), aad)
            except InvalidTag as err:
                raise RemoteStorageError(
                    f"{where} failed authentication: it was altered, moved from another "
                    "position or segment, or encrypted with another data key"
                ) from err
        if compressed:
            import zstandard

            try:
                body = zstandard.ZstdDecompressor().decompress(body, max_output_size=size)
            except zstandard.ZstdError as err:
                raise RemoteStorageError(f"{where} cannot be decompressed: {err}") from err
        if len(body) != size:
            raise RemoteStorageError(
                f"{where} decodes to {len(body)} bytes; the manifest says {size}"
            )
        return body
