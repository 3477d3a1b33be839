"""The compression codecs of record batch attributes bits 0-2, in the framings Kafka uses.

Only a batch's records section is compressed, as one block. Each codec writes what Kafka's Java
client writes, so a Java consumer reads our batches and we read theirs:

* gzip: one gzip member (zlib); concatenated members are read too.
* snappy: snappy-java's "xerial" block framing (a 16-byte header, then 32 KiB input blocks, each
  a big-endian int32 length and a raw snappy block). Raw, unframed snappy is read as well, since
  some clients write it.
* lz4: one LZ4 frame with independent 64 KiB blocks and no checksums or content size, as
  Kafka's ``KafkaLZ4BlockOutputStream`` writes it (Kafka cannot read linked blocks).
* zstd: standard zstd frames.

Decompression is where hostile input costs memory, so every decoder learns an upper bound of the
output *before* producing it (the lengths snappy and the LZ4 and zstd block headers declare;
zlib's ``max_length`` for gzip) and refuses anything over ``max_size``. Library errors become
``CorruptRecordError``. Third-party codec libraries are imported on first use.
"""

from __future__ import annotations

import enum
import struct
import threading
import zlib
from collections.abc import Callable
from typing import Any, NoReturn

from ..errors import CorruptRecordError
from ._buffers import ReadableBuffer, byte_view

#: The default cap on one batch's decompressed records section.
DEFAULT_MAX_DECOMPRESSED_SIZE = 64 * 1024 * 1024


class Compression(enum.IntEnum):
    """A batch's codec (attributes bits 0-2); names match Kafka's ``compression.type`` values."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @classmethod
    def from_name(cls, name: str) -> Compression:
        """The codec a Kafka ``compression.type`` value names (``"none"``, ``"gzip"``, ...)."""
        try:
            return cls[name.strip().upper()]
        except KeyError:
            known = ", ".join(c.name.lower() for c in cls)
            raise ValueError(f"unknown compression type {name!r}; known: {known}") from None


def compress(compression: Compression, data: ReadableBuffer, level: int | None = None) -> bytes:
    """``data`` compressed with ``compression`` at ``level`` (None: the codec's Kafka default)."""
    return _CODECS[Compression(compression)][0](data, level)


def decompress(
    compression: Compression,
    data: ReadableBuffer,
    *,
    max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> bytes:
    """``data`` decompressed; CorruptRecordError if malformed or larger than ``max_size`` bytes."""
    compression = Compression(compression)
    view = byte_view(data)
    try:
        return _CODECS[compression][1](view, max_size)
    except (CorruptRecordError, MemoryError):
        raise
    except Exception as err:  # whatever a codec library raises, the input is what is wrong
        raise CorruptRecordError(f"{compression.name.lower()} data is corrupt: {err}") from err


def _corrupt(reason: str) -> NoReturn:
    raise CorruptRecordError(reason)


def _too_big(codec: str, size: int, max_size: int, how: str) -> NoReturn:
    raise CorruptRecordError(
        f"{codec} data decompresses to more than {max_size} bytes ({how} {size})"
    )


# --- none ---------------------------------------------------------------------------------------


def _none_compress(data: ReadableBuffer, level: int | None) -> bytes:
    return bytes(data)


def _none_decompress(data: memoryview, max_size: int) -> bytes:
    return bytes(data)


# --- gzip ---------------------------------------------------------------------------------------


def _gzip_compress(data: ReadableBuffer, level: int | None) -> bytes:
    return zlib.compress(data, -1 if level is None else level, wbits=31)


def _gzip_decompress(data: memoryview, max_size: int) -> bytes:
    parts: list[bytes] = []
    total = 0
    remaining: bytes | memoryview = data
    while True:
        member = zlib.decompressobj(wbits=31)
        part = member.decompress(remaining, max_size - total + 1)
        total += len(part)
        if total > max_size:
            _too_big("gzip", total, max_size, "at least")
        if not member.eof:
            _corrupt("gzip data is truncated")
        parts.append(part)
        remaining = member.unused_data
        if not remaining:
            return b"".join(parts)


# --- snappy -------------------------------------------------------------------------------------

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
#: Magic, then format version 1 and minimum compatible version 1, as snappy-java writes them.
_XERIAL_HEADER = _XERIAL_MAGIC + b"\x00\x00\x00\x01\x00\x00\x00\x01"
_XERIAL_BLOCK_SIZE = 32 * 1024
_INT32 = struct.Struct(">i")


def _snappy_compress(data: ReadableBuffer, level: int | None) -> bytes:
    import cramjam

    view = byte_view(data)
    parts: list[Any] = [_XERIAL_HEADER]
    for start in range(0, len(view), _XERIAL_BLOCK_SIZE):
        block = cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK_SIZE])
        parts.append(_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_raw_decompress(block: memoryview, total: int, max_size: int) -> bytes:
    """One raw snappy block, refused if its declared length would take ``total`` past the cap."""
    import cramjam

    size = int(cramjam.snappy.decompress_raw_len(block))
    if total + size > max_size:
        _too_big("snappy", total + size, max_size, "its block lengths declare")
    return bytes(cramjam.snappy.decompress_raw(block))


def _snappy_decompress(data: memoryview, max_size: int) -> bytes:
    end = len(data)
    if end < len(_XERIAL_HEADER) or data[: len(_XERIAL_MAGIC)] != _XERIAL_MAGIC:
        return _snappy_raw_decompress(data, 0, max_size)
    parts: list[bytes] = []
    total = 0
    pos = len(_XERIAL_HEADER)
    while pos < end:
        if end - pos < 4:
            _corrupt(f"snappy block length truncated at byte {pos} of the compressed data")
        (length,) = _INT32.unpack_from(data, pos)
        if length < 0:
            # snappy-java lets a stream continue with another header (concatenated streams).
            if data[pos : pos + len(_XERIAL_MAGIC)] == _XERIAL_MAGIC:
                pos += len(_XERIAL_HEADER)
                continue
            _corrupt(f"negative snappy block length {length}")
        pos += 4
        if length > end - pos:
            _corrupt(f"snappy block of {length} bytes overruns the {end - pos} bytes left")
        part = _snappy_raw_decompress(data[pos : pos + length], total, max_size)
        total += len(part)
        parts.append(part)
        pos += length
    return b"".join(parts)


# --- lz4 ----------------------------------------------------------------------------------------

_LZ4_MAGIC = 0x184D2204
_LZ4_BLOCK_SIZES = {4: 64 * 1024, 5: 256 * 1024, 6: 1024 * 1024, 7: 4 * 1024 * 1024}


def _lz4_compress(data: ReadableBuffer, level: int | None) -> bytes:
    import lz4.frame

    return bytes(
        lz4.frame.compress(
            data,
            compression_level=0 if level is None else level,
            block_size=lz4.frame.BLOCKSIZE_MAX64KB,
            block_linked=False,
            content_checksum=False,
            block_checksum=False,
            store_size=False,
        )
    )


def _lz4_frame_bound(data: memoryview) -> int:
    """The most bytes the single LZ4 frame in ``data`` can decompress to, from its block headers."""
    end = len(data)
    if end < 7:
        _corrupt("lz4 frame header is truncated")
    if int.from_bytes(data[0:4], "little") != _LZ4_MAGIC:
        _corrupt("lz4 data does not start with the LZ4 frame magic")
    flags, block_descriptor = data[4], data[5]
    if flags >> 6 != 1:
        _corrupt(f"unsupported lz4 frame version {flags >> 6}")
    if not flags & 0x20:
        _corrupt("lz4 frame uses linked blocks, which Kafka does not support")
    block_max = _LZ4_BLOCK_SIZES.get((block_descriptor >> 4) & 0x7)
    if block_max is None:
        _corrupt(f"bad lz4 block size code {(block_descriptor >> 4) & 0x7}")
    has_block_checksum = bool(flags & 0x10)
    content_size = None
    pos = 6
    if flags & 0x08:
        if end - pos < 8:
            _corrupt("lz4 frame header is truncated")
        content_size = int.from_bytes(data[pos : pos + 8], "little")
        pos += 8
    if flags & 0x01:
        pos += 4
    pos += 1  # header checksum
    bound = 0
    while True:
        if end - pos < 4:
            _corrupt("lz4 frame is truncated")
        word = int.from_bytes(data[pos : pos + 4], "little")
        pos += 4
        if word == 0:
            break
        size = word & 0x7FFFFFFF
        if size > block_max:
            _corrupt(f"lz4 block of {size} bytes exceeds the frame's {block_max}-byte blocks")
        pos += size + (4 if has_block_checksum else 0)
        bound += block_max
    if flags & 0x04:
        pos += 4
    if pos > end:
        _corrupt("lz4 frame is truncated")
    if pos < end:
        _corrupt(f"{end - pos} bytes of trailing data after the lz4 frame")
    return bound if content_size is None else min(bound, content_size)


def _lz4_decompress(data: memoryview, max_size: int) -> bytes:
    import lz4.frame

    bound = _lz4_frame_bound(data)
    if bound > max_size:
        _too_big("lz4", bound, max_size, "its blocks allow up to")
    return bytes(lz4.frame.decompress(data))


# --- zstd ---------------------------------------------------------------------------------------

_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_BLOCK_MAX = 128 * 1024
_ZSTD_DEFAULT_LEVEL = 3
_zstd_contexts = threading.local()


def _zstd_compress(data: ReadableBuffer, level: int | None) -> bytes:
    import zstandard

    level = _ZSTD_DEFAULT_LEVEL if level is None else level
    cache: dict[int, Any] | None = getattr(_zstd_contexts, "compressors", None)
    if cache is None:
        cache = _zstd_contexts.compressors = {}
    compressor = cache.get(level)
    if compressor is None:
        compressor = cache[level] = zstandard.ZstdCompressor(level=level)
    return bytes(compressor.compress(byte_view(data)))


def _zstd_frame_extent(data: memoryview, pos: int) -> tuple[int, int]:
    """Where the zstd frame at ``pos`` ends, and the most bytes it can decompress to.

    A skippable frame, which carries no compressed data, has a bound of -1.
    """
    end = len(data)
    if end - pos < 4:
        _corrupt("zstd frame is truncated")
    magic = int.from_bytes(data[pos : pos + 4], "little")
    if magic & 0xFFFFFFF0 == 0x184D2A50:  # a skippable frame: no output
        if end - pos < 8:
            _corrupt("zstd skippable frame is truncated")
        frame_end = pos + 8 + int.from_bytes(data[pos + 4 : pos + 8], "little")
        if frame_end > end:
            _corrupt("zstd skippable frame is truncated")
        return frame_end, -1
    if magic != _ZSTD_MAGIC:
        _corrupt("zstd data does not start with a zstd frame magic")
    pos += 4
    if pos >= end:
        _corrupt("zstd frame header is truncated")
    descriptor = data[pos]
    pos += 1
    if descriptor & 0x08:
        _corrupt("zstd frame header has its reserved bit set")
    single_segment = bool(descriptor & 0x20)
    pos += (0 if single_segment else 1) + (0, 1, 2, 4)[descriptor & 0x03]
    content_size_bytes = (1 if single_segment else 0, 2, 4, 8)[descriptor >> 6]
    if end - pos < content_size_bytes:
        _corrupt("zstd frame header is truncated")
    content_size = None
    if content_size_bytes:
        content_size = int.from_bytes(data[pos : pos + content_size_bytes], "little")
        if content_size_bytes == 2:
            content_size += 256
    pos += content_size_bytes
    bound = 0
    while True:
        if end - pos < 3:
            _corrupt("zstd frame is truncated")
        block_header = data[pos] | data[pos + 1] << 8 | data[pos + 2] << 16
        pos += 3
        block_type = (block_header >> 1) & 0x3
        block_size = block_header >> 3
        if block_type == 0:  # raw
            pos += block_size
            bound += block_size
        elif block_type == 1:  # run-length: one byte, repeated block_size times
            pos += 1
            bound += block_size
        elif block_type == 2:  # compressed
            pos += block_size
            bound += _ZSTD_BLOCK_MAX
        else:
            _corrupt("zstd block has the reserved block type")
        if block_header & 1:
            break
    if descriptor & 0x04:
        pos += 4
    if pos > end:
        _corrupt("zstd frame is truncated")
    return pos, bound if content_size is None else min(bound, content_size)


def _zstd_decompress(data: memoryview, max_size: int) -> bytes:
    import zstandard

    decompressor = getattr(_zstd_contexts, "decompressor", None)
    if decompressor is None:
        decompressor = _zstd_contexts.decompressor = zstandard.ZstdDecompressor()
    end = len(data)
    if end == 0:
        _corrupt("zstd data is empty")
    parts: list[bytes] = []
    total = 0
    pos = 0
    while pos < end:
        frame_end, bound = _zstd_frame_extent(data, pos)
        if total + bound > max_size:
            _too_big("zstd", total + bound, max_size, "its blocks allow up to")
        if bound >= 0:
            frame = decompressor.decompressobj()
            part = bytes(frame.decompress(data[pos:frame_end]))
            if not frame.eof:
                _corrupt("zstd frame is truncated")
            total += len(part)
            parts.append(part)
        pos = frame_end
    return b"".join(parts)


_Compress = Callable[[ReadableBuffer, int | None], bytes]
_Decompress = Callable[[memoryview, int], bytes]

#: The codec registry: attribute value to (compress, decompress).
_CODECS: dict[Compression, tuple[_Compress, _Decompress]] = {
    Compression.NONE: (_none_compress, _none_decompress),
    Compression.GZIP: (_gzip_compress, _gzip_decompress),
    Compression.SNAPPY: (_snappy_compress, _snappy_decompress),
    Compression.LZ4: (_lz4_compress, _lz4_decompress),
    Compression.ZSTD: (_zstd_compress, _zstd_decompress),
}
