"""Zig-zag varints as Kafka writes them inside v2 records.

Kafka encodes lengths, deltas and counts as protobuf-style base-128 varints of the zig-zag
transform, so small negative numbers (the ``-1`` of a null key) stay one byte. ``varint`` values
are 32-bit and take at most 5 bytes; ``varlong`` values are 64-bit and take at most 10. Anything
longer, or wider than its type, is corruption rather than a number to be trusted.
"""

from __future__ import annotations

from ..errors import CorruptRecordError
from ._buffers import ReadableBuffer

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1

#: Encodings of zig-zag values seen so far, up to ``_CACHED_BELOW``: record deltas and lengths
#: repeat, and a dict lookup is much cheaper than encoding. Filled on demand, so it stays small.
encoded_varints: dict[int, bytes] = {n: bytes((n,)) for n in range(0x80)}
_CACHED_BELOW = 1 << 14


def encode_unsigned(zz: int) -> bytes:
    """The varint bytes of a value already zig-zagged (the builder's fast path)."""
    encoded = encoded_varints.get(zz)
    if encoded is not None:
        return encoded
    if zz < _CACHED_BELOW:
        encoded = encoded_varints[zz] = bytes(((zz & 0x7F) | 0x80, zz >> 7))
        return encoded
    out = bytearray()
    while zz >= 0x80:
        out.append((zz & 0x7F) | 0x80)
        zz >>= 7
    out.append(zz)
    return bytes(out)


def encode_varint(value: int) -> bytes:
    """The zig-zag varint bytes of a 32-bit ``value``."""
    if not INT32_MIN <= value <= INT32_MAX:
        raise ValueError(f"varint value {value} is outside the int32 range")
    return encode_unsigned((value << 1) ^ (value >> 63))


def encode_varlong(value: int) -> bytes:
    """The zig-zag varint bytes of a 64-bit ``value``."""
    if not INT64_MIN <= value <= INT64_MAX:
        raise ValueError(f"varlong value {value} is outside the int64 range")
    return encode_unsigned((value << 1) ^ (value >> 63))


def size_of_varint(value: int) -> int:
    """How many bytes ``encode_varint(value)`` / ``encode_varlong(value)`` takes."""
    zz = (value << 1) ^ (value >> 63)
    size = 1
    while zz >= 0x80:
        zz >>= 7
        size += 1
    return size


def _decode(buf: ReadableBuffer, pos: int, max_bytes: int, kind: str) -> tuple[int, int]:
    start = pos
    end = len(buf)
    result = 0
    shift = 0
    for _ in range(max_bytes):
        if pos >= end:
            raise CorruptRecordError(f"truncated {kind}", position=start)
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
    raise CorruptRecordError(f"{kind} longer than {max_bytes} bytes", position=start)


def decode_varint(buf: ReadableBuffer, pos: int) -> tuple[int, int]:
    """Reads a 32-bit zig-zag varint at ``pos``; returns ``(value, position after it)``.

    Raises CorruptRecordError for a varint that is truncated, longer than 5 bytes, or wider than
    32 bits.
    """
    zz, after = _decode(buf, pos, 5, "varint")
    if zz >> 32:
        raise CorruptRecordError("varint does not fit in 32 bits", position=pos)
    return (zz >> 1) ^ -(zz & 1), after


def decode_varlong(buf: ReadableBuffer, pos: int) -> tuple[int, int]:
    """Reads a 64-bit zig-zag varint at ``pos``; returns ``(value, position after it)``.

    Raises CorruptRecordError for a varint that is truncated, longer than 10 bytes, or wider
    than 64 bits.
    """
    zz, after = _decode(buf, pos, 10, "varlong")
    if zz >> 64:
        raise CorruptRecordError("varlong does not fit in 64 bits", position=pos)
    return (zz >> 1) ^ -(zz & 1), after
