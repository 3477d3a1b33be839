"""Choosing a partition for a record, exactly as Kafka's Java producer does.

A keyed record goes to ``toPositive(murmur2(key)) % numPartitions``, bit for bit Kafka's
``Utils.murmur2``, so tierlog and Kafka producers place the same key on the same partition. A
keyless record sticks to one partition until a batch for it fills up or is sent (KIP-480), which
makes fuller batches than round-robin without skewing the partitions over time.
"""

from __future__ import annotations

import random
import threading

_MASK32 = 0xFFFFFFFF
_M = 0x5BD1E995
_SEED = 0x9747B28C


def murmur2(data: bytes | bytearray | memoryview) -> int:
    """Kafka's ``Utils.murmur2``: a signed 32-bit hash of ``data``."""
    data = bytes(data)
    length = len(data)
    h = (_SEED ^ length) & _MASK32
    length4 = length // 4
    for i in range(length4):
        i4 = i * 4
        k = data[i4] | (data[i4 + 1] << 8) | (data[i4 + 2] << 16) | (data[i4 + 3] << 24)
        k = (k * _M) & _MASK32
        k ^= k >> 24
        k = (k * _M) & _MASK32
        h = (h * _M) & _MASK32
        h ^= k
    tail = length & ~3
    rest = length % 4
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(number: int) -> int:
    """Kafka's ``Utils.toPositive``: clears the sign bit (not ``abs``, which overflows)."""
    return number & 0x7FFFFFFF


def partition_for_key(key: bytes | bytearray | memoryview, num_partitions: int) -> int:
    """The partition Kafka's default partitioner picks for ``key``."""
    if num_partitions <= 0:
        raise ValueError(f"a topic has at least one partition, not {num_partitions}")
    return to_positive(murmur2(key)) % num_partitions


class StickyPartitioner:
    """The partition for keyless records of each topic, moved on after ``batch_size`` bytes.

    Kafka's built-in sticky partitioning (KIP-794): records stick to one partition so they
    fill a batch, and once a batch's worth of bytes went there the next partition is chosen at
    random among the others.
    """

    def __init__(self, batch_size: int, rng: random.Random | None = None) -> None:
        self._batch_size = max(batch_size, 1)
        self._lock = threading.Lock()
        self._current: dict[str, tuple[int, int]] = {}
        self._rng = rng or random.Random()

    def partition(self, topic: str, num_partitions: int) -> int:
        """The current sticky partition for ``topic``, choosing one at random the first time."""
        with self._lock:
            current = self._current.get(topic)
            if current is None or current[0] >= num_partitions:
                current = self._current[topic] = (self._rng.randrange(num_partitions), 0)
            return current[0]

    def on_append(self, topic: str, num_partitions: int, partition: int, size: int) -> None:
        """Counts ``size`` bytes sent to ``partition``; moves on once a batch's worth went there."""
        with self._lock:
            current = self._current.get(topic)
            if current is None or current[0] != partition:
                return
            produced = current[1] + size
            if produced < self._batch_size:
                self._current[topic] = (partition, produced)
                return
            if num_partitions > 1:
                choice = self._rng.randrange(num_partitions - 1)
                partition = choice if choice < partition else choice + 1
            self._current[topic] = (partition, 0)
