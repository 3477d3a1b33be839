"""Batches assembled field by field, with a correct length and CRC, so that the produce path's
deep checks (not the CRC) are what must catch them.

``record`` lays out one record the way ``RecordBatchBuilder`` would, except that any field may
be given a wrong value; ``forge`` wraps records in a batch header whose every field can be set;
``refix`` recomputes the length and CRC of a batch edited in place.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence

import crc32c
from tierlog.records import HEADER_SIZE, LOG_OVERHEAD, Compression, compress
from tierlog.records.batch import CRC_OFFSET, LENGTH_OFFSET
from tierlog.records.varint import encode_varint, encode_varlong

from .conftest import T0

_COVERED = struct.Struct(">hiqqqhii")
_PREFIX = struct.Struct(">qiibI")


def record(
    offset_delta: int = 0,
    *,
    timestamp_delta: int = 0,
    key: bytes | None = b"k",
    value: bytes | None = b"value",
    headers: Iterable[tuple[bytes, bytes | None]] = (),
    key_length: int | None = None,
    length_adjust: int = 0,
) -> bytes:
    """One record; ``key_length`` overrides the stored key length, ``length_adjust`` is added to
    the stored record length (header keys are raw bytes, so they can be invalid UTF-8)."""
    body = bytearray(b"\x00")
    body += encode_varlong(timestamp_delta)
    body += encode_varint(offset_delta)
    if key is None:
        body += encode_varint(-1 if key_length is None else key_length)
    else:
        body += encode_varint(len(key) if key_length is None else key_length) + key
    body += encode_varint(-1) if value is None else encode_varint(len(value)) + value
    pairs = list(headers)
    body += encode_varint(len(pairs))
    for name, content in pairs:
        body += encode_varint(len(name)) + name
        body += encode_varint(-1) if content is None else encode_varint(len(content)) + content
    return encode_varint(len(body) + length_adjust) + bytes(body)


def records(count: int, *, tag: str = "r") -> bytes:
    """``count`` well-formed records valued ``<tag>-0``, ``<tag>-1``..., a millisecond apart."""
    return b"".join(record(i, timestamp_delta=i, value=f"{tag}-{i}".encode()) for i in range(count))


def forge(
    section: bytes,
    count: int,
    *,
    last_offset_delta: int | None = None,
    compression: Compression = Compression.NONE,
    attributes: int = 0,
    base_timestamp: int = T0,
    max_timestamp: int | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    base_offset: int = 0,
    magic: int = 2,
    max_timestamp_from: Sequence[int] = (),
    payload: bytes | None = None,
) -> bytes:
    """A batch around ``section`` (uncompressed records, compressed here with ``compression``,
    unless ``payload`` gives the stored records section as it is).

    ``last_offset_delta`` defaults to ``count - 1`` and ``max_timestamp`` to the largest of
    ``base_timestamp + d`` for the deltas in ``max_timestamp_from`` (or ``base_timestamp``).
    """
    if payload is None:
        payload = compress(compression, section) if compression else section
    if max_timestamp is None:
        max_timestamp = base_timestamp + max(max_timestamp_from, default=0)
    covered = _COVERED.pack(
        attributes | compression,
        count - 1 if last_offset_delta is None else last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    )
    crc = crc32c.crc32c(payload, crc32c.crc32c(covered))
    length = HEADER_SIZE - LOG_OVERHEAD + len(payload)
    return _PREFIX.pack(base_offset, length, -1, magic, crc) + covered + payload


def refix(batch: bytes | bytearray) -> bytes:
    """``batch`` with its length set to its size and its CRC recomputed."""
    fixed = bytearray(batch)
    struct.pack_into(">i", fixed, LENGTH_OFFSET, len(fixed) - LOG_OVERHEAD)
    struct.pack_into(">I", fixed, CRC_OFFSET, crc32c.crc32c(bytes(fixed[CRC_OFFSET + 4 :])))
    return bytes(fixed)
