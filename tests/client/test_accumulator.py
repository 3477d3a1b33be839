"""When the accumulator closes batches and hands them to the sender."""

from __future__ import annotations

from concurrent.futures import Future

import pytest
from tierlog.client.accumulator import (
    PendingRecord,
    RecordAccumulator,
    complete_batch,
    estimate_record_size,
    fail_batch,
)
from tierlog.client.records import RecordMetadata
from tierlog.errors import RecordTooLargeError
from tierlog.model import TopicPartition
from tierlog.records import HEADER_SIZE, RecordBatchBuilder

TP = TopicPartition("t", 0)
OTHER = TopicPartition("t", 1)


class Clock:
    """A clock the test moves by hand, so linger is checked without sleeping."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _record(value: bytes | None = b"v" * 100, key: bytes | None = None) -> PendingRecord:
    future: Future[RecordMetadata] = Future()
    return PendingRecord(1000, key, value, (), future)


def _accumulator(clock: Clock, batch_size: int = 1000, linger_ms: int = 5) -> RecordAccumulator:
    return RecordAccumulator(
        batch_size=batch_size, linger_ms=linger_ms, delivery_timeout_ms=120000, clock=clock
    )


def test_estimate_is_an_upper_bound_of_the_built_size() -> None:
    cases = [(None, b""), (b"k", b"v" * 300), (b"key" * 50, None)]
    for key, value in cases:
        builder = RecordBatchBuilder()
        builder.append(1_700_000_000_000, key, value, [("h", b"x"), ("n", None)])
        built = len(builder.build()) - HEADER_SIZE
        assert built <= estimate_record_size(key, value, (("h", b"x"), ("n", None)))


def test_a_batch_waits_for_linger_then_is_ready() -> None:
    clock = Clock()
    acc = _accumulator(clock)
    assert acc.append(TP, _record())
    assert not acc.append(TP, _record())
    ready, wait = acc.ready()
    assert ready == []
    assert wait is not None and 0 < wait <= 0.005
    clock.now += 0.005
    ready, _ = acc.ready()
    assert [len(b) for b in ready] == [2]


def test_a_full_batch_is_ready_at_once_and_the_next_record_starts_another() -> None:
    clock = Clock()
    acc = _accumulator(clock, batch_size=400)
    started = [acc.append(TP, _record()) for _ in range(5)]
    assert started == [True, False, True, False, True]
    ready, _ = acc.ready()
    assert [len(b) for b in ready] == [2]
    assert ready[0].closed


def test_a_record_larger_than_batch_size_gets_a_batch_of_its_own() -> None:
    clock = Clock()
    acc = _accumulator(clock, batch_size=100)
    acc.append(TP, _record(b"x" * 500))
    ready, _ = acc.ready()
    assert [len(b) for b in ready] == [1]


def test_one_batch_in_flight_per_partition() -> None:
    clock = Clock()
    acc = _accumulator(clock, batch_size=400)
    for _ in range(4):
        acc.append(TP, _record())
    acc.append(OTHER, _record())
    clock.now += 1
    first, _ = acc.ready()
    assert sorted(b.tp.partition for b in first) == [0, 1]
    assert acc.ready()[0] == []
    head = next(b for b in first if b.tp == TP)
    acc.done(head)
    second, _ = acc.ready()
    assert [b.tp for b in second] == [TP]
    assert second[0] is not head


def test_a_retried_batch_keeps_its_place_and_waits_for_its_backoff() -> None:
    clock = Clock()
    acc = _accumulator(clock, batch_size=400)
    for _ in range(4):
        acc.append(TP, _record())
    clock.now += 1
    (batch,), _ = acc.ready()
    batch.attempts = 1
    acc.retry_later(batch, 0.2)
    ready, wait = acc.ready()
    assert ready == []
    assert wait == pytest.approx(0.2)
    clock.now += 0.2
    assert acc.ready()[0] == [batch]


def test_flush_and_close_skip_linger() -> None:
    clock = Clock()
    acc = _accumulator(clock, linger_ms=60000)
    acc.append(TP, _record())
    assert acc.ready()[0] == []
    acc.begin_flush()
    assert len(acc.ready()[0]) == 1
    acc.end_flush()
    acc.append(OTHER, _record())
    acc.begin_close()
    assert [b.tp for b in acc.ready()[0]] == [OTHER]


def test_completion_gives_each_record_its_offset_and_failure_reaches_every_future() -> None:
    clock = Clock()
    acc = _accumulator(clock)
    records = [_record(key=b"k"), _record(value=None)]
    for record in records:
        acc.append(TP, record)
    (batch,) = list(acc.batches())
    complete_batch(batch, 41, -1)
    metas = [r.future.result() for r in records]
    assert [(m.offset, m.serialized_key_size, m.serialized_value_size) for m in metas] == [
        (41, 1, 100),
        (42, -1, -1),
    ]
    other = [_record(), _record()]
    for record in other:
        acc.append(OTHER, record)
    (_, failed) = list(acc.batches())
    fail_batch(failed, RecordTooLargeError("too big"))
    assert all(isinstance(r.future.exception(), RecordTooLargeError) for r in other)
