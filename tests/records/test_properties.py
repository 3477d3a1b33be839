"""Properties: any records round-trip through every codec, and no input breaks the reader.

The fuzz tests feed arbitrary bytes and mutated valid batches to every entry point and accept
only two outcomes: a result, or CorruptRecordError. Mutated batches are read three ways: as they
are (the CRC catches most damage), without validation, and with the CRC recomputed over the
damage, so that the decoders behind the CRC see hostile input too. The deadline is generous: it
is there to catch pathological slowness, not to time anything.
"""

from __future__ import annotations

import contextlib
import struct
from datetime import timedelta
from typing import Any

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tierlog.errors import CorruptRecordError
from tierlog.records import (
    BatchHeader,
    Compression,
    ControlType,
    EndTxnMarker,
    Record,
    build_control_batch,
    iter_batches,
    set_base_offset,
    set_max_timestamp,
    set_partition_leader_epoch,
)

from .strategies import batches

FUZZ = settings(
    max_examples=300,
    deadline=timedelta(seconds=5),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
#: A small cap keeps fuzzed decompression cheap; the bomb tests cover the default.
CAP = 1 << 20


@pytest.mark.parametrize("codec", list(Compression), ids=lambda c: c.name.lower())
@settings(deadline=None, max_examples=100)
@given(data=st.data())
def test_round_trip(codec: Compression, data: st.DataObject) -> None:
    batch_bytes, kwargs, specs = data.draw(batches(st.just(codec)))
    assert kwargs["compression"] is codec
    (batch,) = iter_batches(batch_bytes)
    assert batch.compression is codec
    assert batch.base_offset == kwargs["base_offset"]
    assert batch.partition_leader_epoch == kwargs["partition_leader_epoch"]
    assert batch.producer_id == kwargs["producer_id"]
    assert batch.producer_epoch == kwargs["producer_epoch"]
    assert batch.base_sequence == kwargs["base_sequence"]
    assert batch.is_transactional == kwargs["is_transactional"]
    assert batch.records_count == len(specs)
    assert batch.last_offset == kwargs["base_offset"] + len(specs) - 1
    assert batch.max_timestamp == max(-1, *(spec[0] for spec in specs))
    base_sequence = kwargs["base_sequence"]
    expected = [
        Record(
            kwargs["base_offset"] + delta,
            timestamp,
            key,
            value,
            headers,
            -1 if base_sequence < 0 else (base_sequence + delta) % (1 << 31),
        )
        for delta, (timestamp, key, value, headers) in enumerate(specs)
    ]
    assert list(batch.records()) == expected
    assert batch.last_sequence == expected[-1].sequence


def _read_everything(buf: bytes | bytearray, **kwargs: Any) -> int:
    count = 0
    for batch in iter_batches(buf, **kwargs):
        for _ in batch.records(max_decompressed_size=CAP):
            count += 1
    return count


def _only_corrupt(buf: bytes | bytearray, **kwargs: Any) -> None:
    try:
        _read_everything(buf, **kwargs)
    except CorruptRecordError as err:
        assert err.position is not None
        assert 0 <= err.position <= len(buf)


@FUZZ
@given(st.binary(max_size=400))
def test_arbitrary_bytes(junk: bytes) -> None:
    _only_corrupt(junk)
    _only_corrupt(junk, validate=False)
    _only_corrupt(junk, allow_partial_tail=True)


@FUZZ
@given(st.binary(min_size=61, max_size=300))
def test_arbitrary_bytes_behind_a_v2_prefix(junk: bytes) -> None:
    """Arbitrary headers that at least get past the magic and length checks."""
    buf = bytearray(junk)
    struct.pack_into(">ib", buf, 8, len(buf) - 12, 16)
    buf[16] = 2
    _only_corrupt(bytes(buf), validate=False)
    struct.pack_into(">I", buf, 17, crc32c.crc32c(bytes(buf[21:])))
    _only_corrupt(bytes(buf))


@st.composite
def mutated_batches(draw: st.DrawFn) -> bytearray:
    data, _, _ = draw(batches())
    buf = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        if not buf:
            break
        # Half the mutations land in the header, where one byte changes the most.
        index = draw(st.integers(0, min(60, len(buf) - 1)) | st.integers(0, len(buf) - 1))
        kind = draw(st.sampled_from(["flip", "set", "truncate", "insert", "delete"]))
        if kind == "flip":
            buf[index] ^= 1 << draw(st.integers(0, 7))
        elif kind == "set":
            buf[index] = draw(st.integers(0, 255))
        elif kind == "truncate":
            del buf[index:]
        elif kind == "insert":
            buf[index:index] = draw(st.binary(min_size=1, max_size=8))
        else:
            del buf[index : index + draw(st.integers(1, 8))]
    return buf


@FUZZ
@given(mutated_batches())
def test_mutated_batches(buf: bytearray) -> None:
    _only_corrupt(buf)
    _only_corrupt(buf, validate=False)
    if len(buf) >= 21:
        resealed = bytearray(buf)
        struct.pack_into(">I", resealed, 17, crc32c.crc32c(bytes(resealed[21:])))
        _only_corrupt(resealed)


@FUZZ
@given(mutated_batches(), st.integers(0, 1 << 40), st.integers(-1, 1000))
def test_header_path_on_mutated_batches(buf: bytearray, offset: int, epoch: int) -> None:
    try:
        header = BatchHeader.parse(buf)
        for name in ("compression", "timestamp_type", "last_sequence", "delete_horizon_ms"):
            getattr(header, name)
        header.validate()
    except CorruptRecordError:
        pass
    for rewrite in (
        lambda: set_base_offset(buf, offset),
        lambda: set_partition_leader_epoch(buf, epoch),
        lambda: set_max_timestamp(buf, offset),
        lambda: set_max_timestamp(buf, offset, check_crc=False),
    ):
        with contextlib.suppress(CorruptRecordError):
            rewrite()


@FUZZ
@given(
    st.sampled_from(list(ControlType)),
    st.integers(0, 200),
    st.integers(0, 255),
    st.booleans(),
)
def test_mutated_control_batches(
    control_type: ControlType, index: int, byte: int, reseal: bool
) -> None:
    buf = bytearray(
        build_control_batch(control_type, producer_id=3, producer_epoch=1, timestamp=10)
    )
    buf[index % len(buf)] = byte
    if reseal:
        struct.pack_into(">I", buf, 17, crc32c.crc32c(bytes(buf[21:])))
    try:
        for batch in iter_batches(buf):
            EndTxnMarker.from_batch(batch)
    except CorruptRecordError:
        pass
