"""The codecs: Kafka's framings, reading what other writers produce, and refusing bombs."""

from __future__ import annotations

import contextlib
import gzip
import os
import struct
import zlib

import cramjam
import lz4.frame
import pytest
import zstandard
from hypothesis import given
from hypothesis import strategies as st
from tierlog.errors import CorruptRecordError
from tierlog.records import Compression, compress, decompress

SAMPLE = b"".join(b"record %d: " % i + os.urandom(20) + b"." * 40 for i in range(3000))
CODECS = [c for c in Compression if c is not Compression.NONE]


@pytest.mark.parametrize("codec", list(Compression), ids=lambda c: c.name.lower())
@pytest.mark.parametrize("data", [b"", b"x", SAMPLE], ids=["empty", "one-byte", "large"])
def test_round_trip(codec: Compression, data: bytes) -> None:
    packed = compress(codec, data)
    assert decompress(codec, packed) == data
    assert decompress(codec, memoryview(packed)) == data
    if codec is not Compression.NONE and len(data) > 1000:
        assert len(packed) < len(data)


@given(st.sampled_from(list(Compression)), st.binary(max_size=5000), st.none() | st.integers(1, 5))
def test_round_trip_property(codec: Compression, data: bytes, level: int | None) -> None:
    assert decompress(codec, compress(codec, data, level)) == data


def test_compression_names() -> None:
    assert Compression.from_name("zstd") is Compression.ZSTD
    assert Compression.from_name(" GZip ") is Compression.GZIP
    with pytest.raises(ValueError, match="known: none, gzip, snappy, lz4, zstd"):
        Compression.from_name("brotli")


# --- the framings Kafka's Java client writes ------------------------------------------------------


def test_snappy_is_written_in_xerial_framing_with_32k_blocks() -> None:
    packed = compress(Compression.SNAPPY, SAMPLE)
    # snappy-java's header: marker, "SNAPPY", NUL, version 1, minimum compatible version 1.
    assert packed[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    pos, blocks = 16, []
    while pos < len(packed):
        (length,) = struct.unpack_from(">i", packed, pos)
        blocks.append(bytes(cramjam.snappy.decompress_raw(packed[pos + 4 : pos + 4 + length])))
        pos += 4 + length
    assert pos == len(packed)
    assert [len(b) for b in blocks[:-1]] == [32 * 1024] * (len(blocks) - 1)
    assert b"".join(blocks) == SAMPLE


def test_raw_snappy_is_read_too() -> None:
    raw = bytes(cramjam.snappy.compress_raw(SAMPLE))
    assert decompress(Compression.SNAPPY, raw) == SAMPLE


def test_concatenated_xerial_streams_are_read() -> None:
    first, second = SAMPLE[:50_000], SAMPLE[50_000:]
    packed = compress(Compression.SNAPPY, first) + compress(Compression.SNAPPY, second)
    assert decompress(Compression.SNAPPY, packed) == SAMPLE


def test_lz4_is_one_frame_of_independent_64k_blocks_without_checksums() -> None:
    packed = compress(Compression.LZ4, SAMPLE)
    assert packed[:4] == b"\x04\x22\x4d\x18"  # LZ4 frame magic, little-endian
    # FLG: version 01, independent blocks, no block checksum, no content size, no content
    # checksum, no dictionary; BD: 64 KiB maximum block size. Kafka's reader needs both.
    assert packed[4] == 0x60
    assert packed[5] == 0x40
    assert packed[-4:] == b"\x00\x00\x00\x00"  # end mark, no content checksum after it


def test_lz4_frames_with_checksums_and_content_size_are_read() -> None:
    packed = lz4.frame.compress(
        SAMPLE, block_linked=False, content_checksum=True, block_checksum=True, store_size=True
    )
    assert decompress(Compression.LZ4, packed) == SAMPLE


def test_lz4_linked_blocks_are_refused_as_kafka_does() -> None:
    packed = lz4.frame.compress(SAMPLE, block_linked=True)
    with pytest.raises(CorruptRecordError, match="linked blocks"):
        decompress(Compression.LZ4, packed)


def test_gzip_members_from_other_writers_are_read() -> None:
    assert decompress(Compression.GZIP, gzip.compress(SAMPLE, mtime=0)) == SAMPLE
    two_members = gzip.compress(SAMPLE[:1000]) + gzip.compress(SAMPLE[1000:])
    assert decompress(Compression.GZIP, two_members) == SAMPLE
    assert compress(Compression.GZIP, b"abc")[:3] == b"\x1f\x8b\x08"


def test_zstd_frames_from_streaming_writers_are_read() -> None:
    # Kafka's Java client streams, so its frames carry no content size.
    streamed = zstandard.ZstdCompressor(write_content_size=False, write_checksum=True).compress(
        SAMPLE
    )
    assert zstandard.frame_content_size(streamed) == -1
    assert decompress(Compression.ZSTD, streamed) == SAMPLE
    two_frames = compress(Compression.ZSTD, SAMPLE[:7]) + compress(Compression.ZSTD, SAMPLE[7:])
    assert decompress(Compression.ZSTD, two_frames) == SAMPLE


def test_zstd_skippable_frames_are_skipped() -> None:
    skippable = struct.pack("<II", 0x184D2A50, 3) + b"abc"
    assert decompress(Compression.ZSTD, skippable + compress(Compression.ZSTD, b"xyz")) == b"xyz"


# --- decompression bombs ----------------------------------------------------------------------

ZEROS = bytes(8 * 1024 * 1024)


def _bombs() -> dict[str, tuple[Compression, bytes]]:
    return {
        "gzip": (Compression.GZIP, zlib.compress(ZEROS, 9, wbits=31)),
        "snappy-xerial": (Compression.SNAPPY, compress(Compression.SNAPPY, ZEROS)),
        "snappy-raw": (Compression.SNAPPY, bytes(cramjam.snappy.compress_raw(ZEROS))),
        "lz4": (Compression.LZ4, compress(Compression.LZ4, ZEROS)),
        "lz4-content-size": (Compression.LZ4, lz4.frame.compress(ZEROS, block_linked=False)),
        "zstd": (Compression.ZSTD, compress(Compression.ZSTD, ZEROS, 19)),
        "zstd-streamed": (
            Compression.ZSTD,
            zstandard.ZstdCompressor(write_content_size=False).compress(ZEROS),
        ),
    }


@pytest.mark.parametrize("name", list(_bombs()))
def test_bombs_are_refused_past_the_cap(name: str) -> None:
    codec, packed = _bombs()[name]
    assert len(packed) < len(ZEROS) // 20
    assert decompress(codec, packed, max_size=len(ZEROS)) == ZEROS
    with pytest.raises(CorruptRecordError, match="decompresses to more than 1048576 bytes"):
        decompress(codec, packed, max_size=1024 * 1024)


def test_snappy_block_claiming_a_huge_length_is_refused_before_allocating() -> None:
    # A raw snappy block whose length preamble claims 4 GiB - 1.
    claim = b"\xff\xff\xff\xff\x0f" + b"\x00"
    with pytest.raises(CorruptRecordError, match="more than"):
        decompress(Compression.SNAPPY, claim)


def test_zstd_frame_claiming_a_huge_content_size_is_refused_before_allocating() -> None:
    packed = bytearray(compress(Compression.ZSTD, b"x" * 100))
    # Descriptor 0x20 = single segment with a 1-byte size; rewrite as an 8-byte size of 2**40.
    assert packed[4] & 0xC0 == 0
    header = bytes([0xE0]) + (1 << 40).to_bytes(8, "little")
    size_bytes = 1 if packed[4] & 0x20 else 0
    forged = bytes(packed[:4]) + header + bytes(packed[5 + size_bytes :])
    with pytest.raises(CorruptRecordError):
        decompress(Compression.ZSTD, forged, max_size=1 << 20)


# --- malformed input ----------------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name.lower())
def test_truncated_data_is_corrupt(codec: Compression) -> None:
    packed = compress(codec, SAMPLE)
    for cut in (0, 1, len(packed) // 2, len(packed) - 1):
        with pytest.raises(CorruptRecordError, match=codec.name.lower()):
            decompress(codec, packed[:cut])


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name.lower())
def test_trailing_garbage_is_corrupt(codec: Compression) -> None:
    with pytest.raises(CorruptRecordError):
        decompress(codec, compress(codec, SAMPLE) + b"\x01\x02\x03\x04\x05")


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name.lower())
@given(junk=st.binary(max_size=200))
def test_arbitrary_bytes_only_ever_raise_corrupt(codec: Compression, junk: bytes) -> None:
    with contextlib.suppress(CorruptRecordError):
        decompress(codec, junk, max_size=1 << 16)
