"""The default partitioner agrees with Kafka's Java client bit for bit."""

from __future__ import annotations

import random
import warnings
from collections import Counter

import pytest
from tierlog.client.partitioner import (
    StickyPartitioner,
    murmur2,
    partition_for_key,
    to_positive,
)

KAFKA_MURMUR2 = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
]


@pytest.mark.parametrize(("key", "expected"), KAFKA_MURMUR2)
def test_murmur2_matches_kafka(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected


def test_murmur2_matches_kafka_python_on_every_tail_length() -> None:
    with warnings.catch_warnings():  # kafka-python's import uses a deprecated importlib API
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka.partitioner.default import murmur2 as reference  # type: ignore[import-untyped]

    rng = random.Random(7)
    for length in range(0, 40):
        data = bytes(rng.randrange(256) for _ in range(length))
        expected = reference(data)
        assert murmur2(data) & 0xFFFFFFFF == expected & 0xFFFFFFFF, data


def test_to_positive_clears_the_sign_bit() -> None:
    assert to_positive(-973932308) == -973932308 & 0x7FFFFFFF
    assert to_positive(-(1 << 31)) == 0
    assert to_positive(5) == 5


def test_keyed_partition_is_kafkas() -> None:
    assert partition_for_key(b"foobar", 7) == (-790332482 & 0x7FFFFFFF) % 7
    with pytest.raises(ValueError, match="at least one partition"):
        partition_for_key(b"x", 0)


def test_sticky_partition_holds_for_a_batch_worth_of_bytes() -> None:
    sticky = StickyPartitioner(1000, random.Random(1))
    first = sticky.partition("t", 4)
    for _ in range(9):
        assert sticky.partition("t", 4) == first
        sticky.on_append("t", 4, first, 100)
    assert sticky.partition("t", 4) == first
    sticky.on_append("t", 4, first, 100)
    moved = sticky.partition("t", 4)
    assert moved != first


def test_explicit_partitions_do_not_count() -> None:
    sticky = StickyPartitioner(100, random.Random(2))
    first = sticky.partition("t", 4)
    sticky.on_append("t", 4, (first + 1) % 4, 10_000)
    assert sticky.partition("t", 4) == first


def test_sticky_partitions_spread_over_time() -> None:
    sticky = StickyPartitioner(10, random.Random(3))
    seen: Counter[int] = Counter()
    for _ in range(400):
        current = sticky.partition("t", 4)
        seen[current] += 1
        sticky.on_append("t", 4, current, 10)
    assert set(seen) == {0, 1, 2, 3}


def test_single_partition_topic_stays_put() -> None:
    sticky = StickyPartitioner(1)
    assert sticky.partition("t", 1) == 0
    sticky.on_append("t", 1, 0, 5)
    assert sticky.partition("t", 1) == 0
