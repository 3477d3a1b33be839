"""Which partition of ``__remote_log_metadata`` carries a user partition's events.

The mapping is Kafka's (``RemoteLogMetadataTopicPartitioner``), bit for bit, so tierlog brokers and
Kafka brokers agree on where a partition's metadata lives:

1. Take the topic id as Java's two signed 64-bit halves (the first eight bytes of the id are the
   most significant half) and hash ``(least significant, most significant, partition)`` the way
   Java's ``Objects.hash`` does: start at 1, then ``h = 31 * h + hash(value)`` in 32-bit
   arithmetic, where a long hashes to ``(int) (x ^ (x >>> 32))`` and an int to itself.
2. Write that hash as four big-endian bytes and take Kafka's ``murmur2`` of them.
3. Clear the sign bit (Kafka's ``toPositive``) and take the remainder by the number of metadata
   partitions.

The mapping depends on the partition count, which is why a metadata topic's partition count can
never change once brokers have written to it.
"""

from __future__ import annotations

from typing import Final

from ..model import TopicIdPartition

__all__ = ["metadata_partition", "murmur2"]

_MASK32: Final = 0xFFFFFFFF
_MASK64: Final = 0xFFFFFFFFFFFFFFFF
_SEED: Final = 0x9747B28C
_M: Final = 0x5BD1E995


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2`` of ``data``, as the signed 32-bit value Java returns."""
    length = len(data)
    h = (_SEED ^ length) & _MASK32
    blocks_end = length - length % 4
    for index in range(0, blocks_end, 4):
        k = int.from_bytes(data[index : index + 4], "little")
        k = (k * _M) & _MASK32
        k ^= k >> 24
        k = (k * _M) & _MASK32
        h = ((h * _M) & _MASK32) ^ k
    tail = data[blocks_end:]
    if tail:
        h ^= int.from_bytes(tail, "little")
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def metadata_partition(topic_id_partition: TopicIdPartition, num_partitions: int) -> int:
    """The metadata topic partition, in ``[0, num_partitions)``, for ``topic_id_partition``."""
    if num_partitions < 1:
        raise ValueError(f"the metadata topic needs at least one partition, got {num_partitions}")
    raw = topic_id_partition.topic_id.value
    most = int.from_bytes(raw[:8], "big")
    least = int.from_bytes(raw[8:], "big")
    h = 1
    for value in (_long_hash(least), _long_hash(most), topic_id_partition.partition):
        h = (31 * h + value) & _MASK32
    return (murmur2(h.to_bytes(4, "big")) & 0x7FFFFFFF) % num_partitions


def _long_hash(unsigned: int) -> int:
    """Java's ``Long.hashCode`` of the 64-bit value whose unsigned form is ``unsigned``."""
    return (unsigned ^ (unsigned >> 32)) & _MASK32
