"""Segment bytes the decoder tests of both readers are built from: records exercising every
field, and two producers' interleaved transactions."""

from __future__ import annotations

from typing import Any

from tierlog.records import Compression, ControlType, RecordBatchBuilder, build_control_batch

T0 = 1_700_000_000_000
Spec = tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]


def spec(i: int) -> Spec:
    """Record ``i``: null and empty keys and values, long values, headers (null values, non-ASCII
    keys), and timestamps that step backwards as well as forwards."""
    key = None if i % 4 == 0 else (b"" if i % 4 == 1 else b"key-%d" % i)
    value = None if i % 5 == 0 else bytes(range(256)) * (i % 3) + b"v%d" % i
    headers: list[tuple[str, bytes | None]] = []
    if i % 3 == 1:
        headers = [("trace-id", b"%08d" % i), ("nullable", None), ("ünïcode", b"")]
    return T0 + (i * 37) % 1000 - 300, key, value, headers


def record_batch(
    specs: list[Spec], compression: Compression = Compression.NONE, **kwargs: Any
) -> bytes:
    builder = RecordBatchBuilder(compression, **kwargs)
    for timestamp, key, value, headers in specs:
        builder.append(timestamp, key, value, headers)
    return builder.build()


P_COMMITS, P_ABORTS = 1000, 2000


def transactional(producer: int, base_offset: int, count: int, sequence: int) -> bytes:
    return record_batch(
        [spec(base_offset + i) for i in range(count)],
        base_offset=base_offset,
        producer_id=producer,
        producer_epoch=0,
        base_sequence=sequence,
        is_transactional=True,
    )


def marker(kind: ControlType, producer: int, offset: int) -> bytes:
    return build_control_batch(
        kind, producer_id=producer, producer_epoch=0, timestamp=T0, base_offset=offset
    )


#: Two producers interleaved: P_COMMITS commits offsets 0-2 and 6-7; P_ABORTS aborts 3-5 and
#: 8-9, then commits 12-13; 15-16 are not transactional.
INTERLEAVED = b"".join(
    [
        transactional(P_COMMITS, 0, 3, 0),
        transactional(P_ABORTS, 3, 3, 0),
        transactional(P_COMMITS, 6, 2, 3),
        transactional(P_ABORTS, 8, 2, 3),
        marker(ControlType.COMMIT, P_COMMITS, 10),
        marker(ControlType.ABORT, P_ABORTS, 11),
        transactional(P_ABORTS, 12, 2, 5),
        marker(ControlType.COMMIT, P_ABORTS, 14),
        record_batch([spec(15), spec(16)], base_offset=15),
    ]
)
