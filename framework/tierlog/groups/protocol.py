"""The group coordinator's requests and responses, field for field as in Kafka's protocol.

Like ``server/protocol.py``, each class mirrors one Kafka message in snake_case, so the wire
codec converts them by field name. Where versions of a message differ in shape (OffsetFetch
before and after batching groups, LeaveGroup before and after batching members,
FindCoordinator before and after batching keys) these types hold the newest shape and the
wire front end converts the old ones. ``client_id``, ``client_host`` and ``api_version`` are
not in Kafka's bodies: they come from the request header and the connection, and JoinGroup
needs them (a member's client id and host are part of the group; MEMBER_ID_REQUIRED depends on
the version).

Every request type derives from :class:`GroupRequest`, which is how the broker knows to hand
it to its coordinator.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

import attrs

#: The newest version of each group API this runtime answers (JoinGroup, for KIP-394).
JOIN_GROUP_MAX_VERSION = 9


def _tuple(items: Iterable[Any]) -> tuple[Any, ...]:
    return tuple(items)


def _optional_tuple(items: Iterable[Any] | None) -> tuple[Any, ...] | None:
    return None if items is None else tuple(items)


def _bytes(data: bytes | bytearray | memoryview | None) -> bytes:
    return b"" if data is None else bytes(data)


class GroupRequest:
    """Base of every request the group coordinator answers."""

    __slots__ = ()
    API_KEY: ClassVar[int]


# --- FindCoordinator (10) ---------------------------------------------------------------------


class CoordinatorType:
    GROUP = 0
    TRANSACTION = 1


@attrs.frozen
class FindCoordinatorRequest(GroupRequest):
    API_KEY: ClassVar[int] = 10

    key_type: int = CoordinatorType.GROUP
    coordinator_keys: tuple[str, ...] = attrs.field(default=(), converter=_tuple)


@attrs.frozen
class Coordinator:
    key: str
    node_id: int = -1
    host: str = ""
    port: int = -1
    error_code: int = 0
    error_message: str | None = None


@attrs.frozen
class FindCoordinatorResponse:
    coordinators: tuple[Coordinator, ...] = attrs.field(converter=_tuple)
    throttle_time_ms: int = 0


# --- JoinGroup (11) ---------------------------------------------------------------------------


@attrs.frozen
class JoinGroupRequestProtocol:
    name: str
    metadata: bytes = attrs.field(converter=_bytes, repr=False)


@attrs.frozen
class JoinGroupRequest(GroupRequest):
    API_KEY: ClassVar[int] = 11

    group_id: str
    session_timeout_ms: int
    member_id: str
    protocol_type: str
    protocols: tuple[JoinGroupRequestProtocol, ...] = attrs.field(converter=_tuple)
    rebalance_timeout_ms: int = -1
    group_instance_id: str | None = None
    reason: str | None = None
    client_id: str = ""
    client_host: str = ""
    api_version: int = JOIN_GROUP_MAX_VERSION


@attrs.frozen
class JoinGroupResponseMember:
    member_id: str
    metadata: bytes = attrs.field(converter=_bytes, repr=False)
    group_instance_id: str | None = None


@attrs.frozen
class JoinGroupResponse:
    error_code: int
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    member_id: str = ""
    members: tuple[JoinGroupResponseMember, ...] = attrs.field(default=(), converter=_tuple)
    throttle_time_ms: int = 0


# --- SyncGroup (14) ---------------------------------------------------------------------------


@attrs.frozen
class SyncGroupRequestAssignment:
    member_id: str
    assignment: bytes = attrs.field(converter=_bytes, repr=False)


@attrs.frozen
class SyncGroupRequest(GroupRequest):
    API_KEY: ClassVar[int] = 14

    group_id: str
    generation_id: int
    member_id: str
    assignments: tuple[SyncGroupRequestAssignment, ...] = attrs.field(default=(), converter=_tuple)
    group_instance_id: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None


@attrs.frozen
class SyncGroupResponse:
    error_code: int
    assignment: bytes = attrs.field(default=b"", converter=_bytes, repr=False)
    protocol_type: str | None = None
    protocol_name: str | None = None
    throttle_time_ms: int = 0


# --- Heartbeat (12) ---------------------------------------------------------------------------


@attrs.frozen
class HeartbeatRequest(GroupRequest):
    API_KEY: ClassVar[int] = 12

    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None


@attrs.frozen
class HeartbeatResponse:
    error_code: int
    throttle_time_ms: int = 0


# --- LeaveGroup (13) --------------------------------------------------------------------------


@attrs.frozen
class MemberIdentity:
    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None


@attrs.frozen
class LeaveGroupRequest(GroupRequest):
    API_KEY: ClassVar[int] = 13

    group_id: str
    members: tuple[MemberIdentity, ...] = attrs.field(default=(), converter=_tuple)


@attrs.frozen
class MemberResponse:
    member_id: str
    group_instance_id: str | None
    error_code: int


@attrs.frozen
class LeaveGroupResponse:
    error_code: int
    members: tuple[MemberResponse, ...] = attrs.field(default=(), converter=_tuple)
    throttle_time_ms: int = 0


# --- OffsetCommit (8) -------------------------------------------------------------------------


@attrs.frozen
class OffsetCommitRequestPartition:
    partition_index: int
    committed_offset: int
    committed_leader_epoch: int = -1
    commit_timestamp: int = -1
    committed_metadata: str | None = None


@attrs.frozen
class OffsetCommitRequestTopic:
    name: str
    partitions: tuple[OffsetCommitRequestPartition, ...] = attrs.field(converter=_tuple)


@attrs.frozen
class OffsetCommitRequest(GroupRequest):
    API_KEY: ClassVar[int] = 8

    group_id: str
    topics: tuple[OffsetCommitRequestTopic, ...] = attrs.field(converter=_tuple)
    generation_id_or_member_epoch: int = -1
    member_id: str = ""
    group_instance_id: str | None = None
    retention_time_ms: int = -1
    api_version: int = 9


@attrs.frozen
class OffsetCommitResponsePartition:
    partition_index: int
    error_code: int


@attrs.frozen
class OffsetCommitResponseTopic:
    name: str
    partitions: tuple[OffsetCommitResponsePartition, ...] = attrs.field(converter=_tuple)


@attrs.frozen
class OffsetCommitResponse:
    topics: tuple[OffsetCommitResponseTopic, ...] = attrs.field(converter=_tuple)
    throttle_time_ms: int = 0


# --- OffsetFetch (9) --------------------------------------------------------------------------


@attrs.frozen
class OffsetFetchRequestTopics:
    name: str
    partition_indexes: tuple[int, ...] = attrs.field(converter=_tuple)


@attrs.frozen
class OffsetFetchRequestGroup:
    group_id: str
    #: None: every partition the group has an offset for.
    topics: tuple[OffsetFetchRequestTopics, ...] | None = attrs.field(
        default=None, converter=_optional_tuple
    )
    member_id: str | None = None
    member_epoch: int = -1


@attrs.frozen
class OffsetFetchRequest(GroupRequest):
    API_KEY: ClassVar[int] = 9

    groups: tuple[OffsetFetchRequestGroup, ...] = attrs.field(converter=_tuple)
    require_stable: bool = False


@attrs.frozen
class OffsetFetchResponsePartitions:
    partition_index: int
    committed_offset: int = -1
    committed_leader_epoch: int = -1
    metadata: str | None = ""
    error_code: int = 0


@attrs.frozen
class OffsetFetchResponseTopics:
    name: str
    partitions: tuple[OffsetFetchResponsePartitions, ...] = attrs.field(converter=_tuple)


@attrs.frozen
class OffsetFetchResponseGroup:
    group_id: str
    topics: tuple[OffsetFetchResponseTopics, ...] = attrs.field(default=(), converter=_tuple)
    error_code: int = 0


@attrs.frozen
class OffsetFetchResponse:
    groups: tuple[OffsetFetchResponseGroup, ...] = attrs.field(converter=_tuple)
    throttle_time_ms: int = 0


# --- OffsetDelete (47) ------------------------------------------------------------------------


@attrs.frozen
class OffsetDeleteRequestPartition:
    partition_index: int


@attrs.frozen
class OffsetDeleteRequestTopic:
    name: str
    partitions: tuple[OffsetDeleteRequestPartition, ...] = attrs.field(converter=_tuple)


@attrs.frozen
class OffsetDeleteRequest(GroupRequest):
    API_KEY: ClassVar[int] = 47

    group_id: str
    topics: tuple[OffsetDeleteRequestTopic, ...] = attrs.field(converter=_tuple)


@attrs.frozen
class OffsetDeleteResponsePartition:
    partition_index: int
    error_code: int


@attrs.frozen
class OffsetDeleteResponseTopic:
    name: str
    partitions: tuple[OffsetDeleteResponsePartition, ...] = attrs.field(converter=_tuple)


@attrs.frozen
class OffsetDeleteResponse:
    error_code: int
    topics: tuple[OffsetDeleteResponseTopic, ...] = attrs.field(default=(), converter=_tuple)
    throttle_time_ms: int = 0


# --- DescribeGroups (15), ListGroups (16), DeleteGroups (42) ----------------------------------


@attrs.frozen
class DescribeGroupsRequest(GroupRequest):
    API_KEY: ClassVar[int] = 15

    groups: tuple[str, ...] = attrs.field(converter=_tuple)
    include_authorized_operations: bool = False


@attrs.frozen
class DescribedGroupMember:
    member_id: str
    client_id: str
    client_host: str
    member_metadata: bytes = attrs.field(default=b"", converter=_bytes, repr=False)
    member_assignment: bytes = attrs.field(default=b"", converter=_bytes, repr=False)
    group_instance_id: str | None = None


@attrs.frozen
class DescribedGroup:
    group_id: str
    error_code: int = 0
    group_state: str = ""
    protocol_type: str = ""
    protocol_data: str = ""
    members: tuple[DescribedGroupMember, ...] = attrs.field(default=(), converter=_tuple)
    error_message: str | None = None


@attrs.frozen
class DescribeGroupsResponse:
    groups: tuple[DescribedGroup, ...] = attrs.field(converter=_tuple)
    throttle_time_ms: int = 0


@attrs.frozen
class ListGroupsRequest(GroupRequest):
    API_KEY: ClassVar[int] = 16

    states_filter: tuple[str, ...] = attrs.field(default=(), converter=_tuple)
    types_filter: tuple[str, ...] = attrs.field(default=(), converter=_tuple)


@attrs.frozen
class ListedGroup:
    group_id: str
    protocol_type: str
    group_state: str
    group_type: str


@attrs.frozen
class ListGroupsResponse:
    error_code: int
    groups: tuple[ListedGroup, ...] = attrs.field(default=(), converter=_tuple)
    throttle_time_ms: int = 0


@attrs.frozen
class DeleteGroupsRequest(GroupRequest):
    API_KEY: ClassVar[int] = 42

    groups_names: tuple[str, ...] = attrs.field(converter=_tuple)


@attrs.frozen
class DeletableGroupResult:
    group_id: str
    error_code: int


@attrs.frozen
class DeleteGroupsResponse:
    results: tuple[DeletableGroupResult, ...] = attrs.field(converter=_tuple)
    throttle_time_ms: int = 0
