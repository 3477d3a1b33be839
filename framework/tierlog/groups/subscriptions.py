"""What a member of a classic ``consumer`` group says in its protocol bytes.

Kafka's consumers put a ``ConsumerProtocolSubscription`` (version, topics, user data, ...) in
their JoinGroup metadata and receive a ``ConsumerProtocolAssignment`` (version, topic
partitions, user data) from SyncGroup. The coordinator reads the topics of a subscription to
answer OffsetDelete (GROUP_SUBSCRIBED_TO_TOPIC) and to expire the offsets of topics no member
subscribes to, as Kafka does; the bytes that cannot be read count as no topics.
"""

from __future__ import annotations

from ..errors import CorruptRecordError
from .records import Reader, Writer

CONSUMER_PROTOCOL_TYPE = "consumer"


def subscribed_topics(metadata: bytes) -> frozenset[str] | None:
    """The topics of a consumer subscription, or None if the bytes are not one."""
    try:
        reader = Reader(metadata, "a consumer subscription")
        reader.int16()
        return frozenset(reader.required_string() for _ in range(reader.int32()))
    except CorruptRecordError:
        return None


def assigned_partitions(assignment: bytes) -> dict[str, tuple[int, ...]]:
    """The topic partitions of a consumer assignment (empty if the bytes are not one)."""
    if not assignment:
        return {}
    try:
        reader = Reader(assignment, "a consumer assignment")
        reader.int16()
        result: dict[str, tuple[int, ...]] = {}
        for _ in range(reader.int32()):
            topic = reader.required_string()
            result[topic] = tuple(reader.int32() for _ in range(reader.int32()))
        return result
    except CorruptRecordError:
        return {}


def encode_subscription(topics: list[str], user_data: bytes | None = None) -> bytes:
    """A version-0 subscription, as the simplest consumer sends it."""
    writer = Writer().int16(0).int32(len(topics))
    for topic in topics:
        writer.string(topic)
    return writer.bytes_(user_data).done()


def encode_assignment(partitions: dict[str, list[int]]) -> bytes:
    """A version-0 assignment of ``partitions``."""
    writer = Writer().int16(0).int32(len(partitions))
    for topic, indexes in partitions.items():
        writer.string(topic).int32(len(indexes))
        for index in indexes:
            writer.int32(index)
    return writer.bytes_(None).done()
