"""The consumer group protocol's requests and responses (KIP-848), field for field as in Kafka.

ConsumerGroupHeartbeat (68) is the whole protocol for a member: join, stay, reconcile, leave.
ConsumerGroupDescribe (69) shows a group's epochs, members and both of each member's
assignments. Like ``protocol.py``, these mirror Kafka's messages in snake_case so the wire
codec converts them by field name; ``client_id``, ``client_host`` and ``api_version`` come from
the request header and the connection.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

import attrs

from ..model import Uuid
from .protocol import GroupRequest


def _tuple(items: Iterable[Any]) -> tuple[Any, ...]:
    return tuple(items)


def _optional_tuple(items: Iterable[Any] | None) -> tuple[Any, ...] | None:
    return None if items is None else tuple(items)


# --- ConsumerGroupHeartbeat (68) --------------------------------------------------------------


@attrs.frozen
class TopicPartitions:
    topic_id: Uuid
    partitions: tuple[int, ...] = attrs.field(converter=_tuple)


@attrs.frozen
class ConsumerGroupHeartbeatRequest(GroupRequest):
    API_KEY: ClassVar[int] = 68

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = attrs.field(
        default=None, converter=_optional_tuple
    )
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    topic_partitions: tuple[TopicPartitions, ...] | None = attrs.field(
        default=None, converter=_optional_tuple
    )
    client_id: str = ""
    client_host: str = ""
    api_version: int = 1


@attrs.frozen
class Assignment:
    topic_partitions: tuple[TopicPartitions, ...] = attrs.field(default=(), converter=_tuple)


@attrs.frozen
class ConsumerGroupHeartbeatResponse:
    error_code: int = 0
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = -1
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None
    throttle_time_ms: int = 0


# --- ConsumerGroupDescribe (69) ---------------------------------------------------------------


@attrs.frozen
class ConsumerGroupDescribeRequest(GroupRequest):
    API_KEY: ClassVar[int] = 69

    group_ids: tuple[str, ...] = attrs.field(converter=_tuple)
    include_authorized_operations: bool = False


@attrs.frozen
class DescribedTopicPartitions:
    topic_id: Uuid
    topic_name: str
    partitions: tuple[int, ...] = attrs.field(converter=_tuple)


@attrs.frozen
class DescribedAssignment:
    topic_partitions: tuple[DescribedTopicPartitions, ...] = attrs.field(
        default=(), converter=_tuple
    )


MEMBER_TYPE_CONSUMER = 1
"""``member_type`` of a member speaking the consumer protocol (0: classic, -1: unknown)."""


@attrs.frozen
class DescribedMember:
    member_id: str
    member_epoch: int
    client_id: str
    client_host: str
    instance_id: str | None = None
    rack_id: str | None = None
    subscribed_topic_names: tuple[str, ...] = attrs.field(default=(), converter=_tuple)
    subscribed_topic_regex: str | None = None
    assignment: DescribedAssignment = DescribedAssignment()
    target_assignment: DescribedAssignment = DescribedAssignment()
    member_type: int = MEMBER_TYPE_CONSUMER


AUTHORIZED_OPERATIONS_OMITTED = -(1 << 31)


@attrs.frozen
class DescribedConsumerGroup:
    group_id: str
    error_code: int = 0
    error_message: str | None = None
    group_state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: tuple[DescribedMember, ...] = attrs.field(default=(), converter=_tuple)
    authorized_operations: int = AUTHORIZED_OPERATIONS_OMITTED


@attrs.frozen
class ConsumerGroupDescribeResponse:
    groups: tuple[DescribedConsumerGroup, ...] = attrs.field(converter=_tuple)
    throttle_time_ms: int = 0
