"""The user partition → metadata partition mapping, which must match Kafka's bit for bit."""

from __future__ import annotations

import collections
import ctypes
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tierlog.metadata.partitioner import metadata_partition, murmur2
from tierlog.model import TopicIdPartition, Uuid

topic_id_partitions = st.builds(
    TopicIdPartition.of,
    st.binary(min_size=16, max_size=16).map(Uuid),
    st.just("orders"),
    st.integers(0, (1 << 31) - 1),
)
partition_counts = st.integers(1, 1_000)


def java_int(value: int) -> int:
    return ctypes.c_int32(value).value


def unsigned_shift(value: int, bits: int) -> int:
    """Java's ``>>>`` on an int."""
    return (value & 0xFFFFFFFF) >> bits


def java_murmur2(data: bytes) -> int:
    """Kafka's murmur2 with Java's signed 32-bit ints, written independently of the module."""
    m, r = java_int(0x5BD1E995), 24
    h = java_int(java_int(0x9747B28C) ^ len(data))
    signed = [b - 256 if b > 127 else b for b in data]
    for i in range(len(data) // 4):
        k = sum((signed[4 * i + j] & 0xFF) << (8 * j) for j in range(4))
        k = java_int(k * m)
        k = java_int(k ^ unsigned_shift(k, r))
        k = java_int(k * m)
        h = java_int(java_int(h * m) ^ k)
    rest, tail = len(data) % 4, len(data) & ~3
    if rest == 3:
        h = java_int(h ^ ((signed[tail + 2] & 0xFF) << 16))
    if rest >= 2:
        h = java_int(h ^ ((signed[tail + 1] & 0xFF) << 8))
    if rest >= 1:
        h = java_int(h ^ (signed[tail] & 0xFF))
        h = java_int(h * m)
    h = java_int(h ^ unsigned_shift(h, 13))
    h = java_int(h * m)
    return java_int(h ^ unsigned_shift(h, 15))


def java_partitioner(tip: TopicIdPartition, num_partitions: int) -> int:
    """RemoteLogMetadataTopicPartitioner as Java evaluates it."""

    def long_hash(value: int) -> int:
        return java_int(value ^ ((value & (1 << 64) - 1) >> 32))

    h = 1
    for field_hash in (
        long_hash(tip.topic_id.least_significant_bits),
        long_hash(tip.topic_id.most_significant_bits),
        tip.partition,
    ):
        h = java_int(31 * h + field_hash)
    return (java_murmur2(h.to_bytes(4, "big", signed=True)) & 0x7FFFFFFF) % num_partitions


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"21", -973932308),
        (b"foobar", -790332482),
        (b"a-little-bit-long-string", -985981536),
        (b"a-little-bit-longer-string", -1486304829),
        (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
        (b"abc", 479470107),
    ],
)
def test_murmur2_matches_kafkas_test_vectors(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected
    assert java_murmur2(data) == expected


@given(st.binary(max_size=64))
def test_murmur2_is_a_signed_32_bit_value(data: bytes) -> None:
    assert murmur2(data) == java_murmur2(data)
    assert -(1 << 31) <= murmur2(data) < 1 << 31


@given(topic_id_partitions, partition_counts)
def test_mapping_matches_java_semantics(tip: TopicIdPartition, num_partitions: int) -> None:
    assert metadata_partition(tip, num_partitions) == java_partitioner(tip, num_partitions)


@given(topic_id_partitions, partition_counts)
def test_mapping_is_in_range_and_stable(tip: TopicIdPartition, num_partitions: int) -> None:
    chosen = metadata_partition(tip, num_partitions)
    assert 0 <= chosen < num_partitions
    assert metadata_partition(tip, num_partitions) == chosen
    same = TopicIdPartition.of(Uuid(bytes(tip.topic_id.value)), "renamed", tip.partition)
    assert metadata_partition(same, num_partitions) == chosen  # the name plays no part


@pytest.mark.parametrize(
    ("most", "least", "partition", "expected"),
    [
        (1, 2, 0, [0, 3, 30]),
        (-1, -1, 5, [0, 6, 0]),
        (0x123456789ABCDEF0, -42, 3, [0, 2, 26]),
    ],
)
def test_known_mappings_never_change(
    most: int, least: int, partition: int, expected: list[int]
) -> None:
    tip = TopicIdPartition.of(Uuid.from_longs(most, least), "orders", partition)
    assert [metadata_partition(tip, n) for n in (1, 7, 50)] == expected


def test_partitions_spread_over_the_default_fifty() -> None:
    rng = random.Random(1234)
    counts = collections.Counter(
        metadata_partition(
            TopicIdPartition.of(Uuid(rng.randbytes(16)), "orders", rng.randrange(100)), 50
        )
        for _ in range(1_000)
    )
    assert set(counts) == set(range(50))
    assert max(counts.values()) < 50  # 20 expected per partition


def test_partitions_of_one_topic_spread_too() -> None:
    topic_id = Uuid.random()
    chosen = {
        metadata_partition(TopicIdPartition.of(topic_id, "orders", p), 50) for p in range(200)
    }
    assert len(chosen) > 40


@pytest.mark.parametrize("num_partitions", [0, -1])
def test_at_least_one_metadata_partition(num_partitions: int) -> None:
    with pytest.raises(ValueError, match="at least one partition"):
        metadata_partition(TopicIdPartition.of(Uuid.random(), "orders", 0), num_partitions)
