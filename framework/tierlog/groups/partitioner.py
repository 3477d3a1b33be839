"""Which partition of ``__consumer_offsets`` holds a group, exactly as Kafka computes it.

Kafka takes ``Utils.abs(groupId.hashCode()) % partitionCount``: Java's ``String.hashCode`` over
UTF-16 code units with 32-bit overflow, and ``Utils.abs``, which maps ``Integer.MIN_VALUE`` to 0
rather than leaving it negative. A group must land on the same partition as in Kafka, so that a
Kafka tool reading the topic finds it where it expects.
"""

from __future__ import annotations

_INT32 = 1 << 32


def java_string_hashcode(text: str) -> int:
    """Java's ``String.hashCode``: ``s[0]*31^(n-1) + ... + s[n-1]`` in signed 32-bit ints."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - _INT32 if h >= 1 << 31 else h


def java_utils_abs(value: int) -> int:
    """Kafka's ``Utils.abs``: ``value & 0x7fffffff``, so the minimum int becomes 0."""
    return value & 0x7FFFFFFF


def group_partition(group_id: str, num_partitions: int) -> int:
    """The ``__consumer_offsets`` partition of ``group_id``."""
    if num_partitions < 1:
        raise ValueError(f"the offsets topic needs at least one partition, got {num_partitions}")
    return java_utils_abs(java_string_hashcode(group_id)) % num_partitions
