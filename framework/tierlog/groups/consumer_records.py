"""The records a consumer-protocol group keeps in ``__consumer_offsets``, in Kafka's formats.

Kafka 4 writes a group of the consumer protocol as six kinds of record, told apart by the
version that starts the key: 3 the group epoch, 4 the subscribed topics, 5 a member's
subscription, 6 the target assignment epoch, 7 a member's target assignment, 8 a member's
current assignment and reconciliation state. Values are flexible-version messages starting with
their own version (0). A tombstone (null value) removes what the key names, so compaction keeps
one record per key and the topic stays bounded by the live groups and members.

The layouts are Kafka's JSON schemas (``consumer_schemas``) read by the codec's message machinery,
so the bytes are Kafka's and a Kafka tool reading the topic understands them.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import CorruptRecordError
from ..model import ZERO_UUID, Uuid
from .consumer_group import ConsumerGroup, TopicMetadata
from .consumer_member import ConsumerGroupMember, MemberState
from .consumer_schemas import load_data
from .records import CoordinatorRecord

GROUP_EPOCH_KEY_VERSION = 3
SUBSCRIPTION_METADATA_KEY_VERSION = 4
MEMBER_METADATA_KEY_VERSION = 5
TARGET_EPOCH_KEY_VERSION = 6
TARGET_MEMBER_KEY_VERSION = 7
CURRENT_ASSIGNMENT_KEY_VERSION = 8

KEY_VERSIONS = (3, 4, 5, 6, 7, 8)
"""The key versions of a consumer-protocol group's records."""

ConsumerGroupMetadataKey = load_data("ConsumerGroupMetadataKey")
ConsumerGroupMetadataValue = load_data("ConsumerGroupMetadataValue")
ConsumerGroupPartitionMetadataKey = load_data("ConsumerGroupPartitionMetadataKey")
ConsumerGroupPartitionMetadataValue = load_data("ConsumerGroupPartitionMetadataValue")
ConsumerGroupMemberMetadataKey = load_data("ConsumerGroupMemberMetadataKey")
ConsumerGroupMemberMetadataValue = load_data("ConsumerGroupMemberMetadataValue")
ConsumerGroupTargetAssignmentMetadataKey = load_data("ConsumerGroupTargetAssignmentMetadataKey")
ConsumerGroupTargetAssignmentMetadataValue = load_data("ConsumerGroupTargetAssignmentMetadataValue")
ConsumerGroupTargetAssignmentMemberKey = load_data("ConsumerGroupTargetAssignmentMemberKey")
ConsumerGroupTargetAssignmentMemberValue = load_data("ConsumerGroupTargetAssignmentMemberValue")
ConsumerGroupCurrentMemberAssignmentKey = load_data("ConsumerGroupCurrentMemberAssignmentKey")
ConsumerGroupCurrentMemberAssignmentValue = load_data("ConsumerGroupCurrentMemberAssignmentValue")

_KEYS: dict[int, Any] = {
    3: ConsumerGroupMetadataKey,
    4: ConsumerGroupPartitionMetadataKey,
    5: ConsumerGroupMemberMetadataKey,
    6: ConsumerGroupTargetAssignmentMetadataKey,
    7: ConsumerGroupTargetAssignmentMemberKey,
    8: ConsumerGroupCurrentMemberAssignmentKey,
}
_VALUES: dict[int, Any] = {
    3: ConsumerGroupMetadataValue,
    4: ConsumerGroupPartitionMetadataValue,
    5: ConsumerGroupMemberMetadataValue,
    6: ConsumerGroupTargetAssignmentMetadataValue,
    7: ConsumerGroupTargetAssignmentMemberValue,
    8: ConsumerGroupCurrentMemberAssignmentValue,
}


def _key(version: int, group_id: str, member_id: str | None = None) -> bytes:
    fields = {"group_id": group_id}
    if member_id is not None:
        fields["member_id"] = member_id
    return bytes(_KEYS[version](version=version, **fields).encode(version=version))


def _value(version: int, **fields: Any) -> bytes:
    return bytes(_VALUES[version](version=0, **fields).encode(version=0))


def _wire_uuid(topic: Uuid) -> uuid.UUID:
    return uuid.UUID(bytes=topic.value)


def _our_uuid(value: uuid.UUID | None) -> Uuid:
    return ZERO_UUID if value is None else Uuid(value.bytes)


def _partitions_out(cls: Any, partitions: Mapping[Uuid, frozenset[int]]) -> list[Any]:
    return [
        cls(topic_id=_wire_uuid(topic), partitions=sorted(parts))
        for topic, parts in sorted(partitions.items())
    ]


def _partitions_in(entries: list[Any]) -> dict[Uuid, frozenset[int]]:
    return {_our_uuid(e.topic_id): frozenset(e.partitions) for e in entries if e.partitions}


# --- building records -------------------------------------------------------------------------


def group_epoch_record(group_id: str, epoch: int) -> CoordinatorRecord:
    return CoordinatorRecord(_key(3, group_id), _value(3, epoch=epoch))


def subscription_metadata_record(
    group_id: str, topics: Mapping[str, TopicMetadata]
) -> CoordinatorRecord:
    entry = ConsumerGroupPartitionMetadataValue.TopicMetadata
    value = _value(
        4,
        topics=[
            entry(
                topic_id=_wire_uuid(meta.topic_id),
                topic_name=meta.name,
                num_partitions=meta.num_partitions,
                partition_metadata=[],
            )
            for _, meta in sorted(topics.items())
        ],
    )
    return CoordinatorRecord(_key(4, group_id), value)


def member_record(group_id: str, member: ConsumerGroupMember) -> CoordinatorRecord:
    value = _value(
        5,
        instance_id=member.instance_id,
        rack_id=member.rack_id,
        client_id=member.client_id,
        client_host=member.client_host,
        subscribed_topic_names=list(member.subscribed_topic_names),
        subscribed_topic_regex=member.subscribed_topic_regex,
        rebalance_timeout_ms=member.rebalance_timeout_ms,
        server_assignor=member.server_assignor,
    )
    return CoordinatorRecord(_key(5, group_id, member.member_id), value)


def target_epoch_record(group_id: str, epoch: int) -> CoordinatorRecord:
    return CoordinatorRecord(_key(6, group_id), _value(6, assignment_epoch=epoch))


def target_member_record(
    group_id: str, member_id: str, partitions: Mapping[Uuid, frozenset[int]]
) -> CoordinatorRecord:
    entry = ConsumerGroupTargetAssignmentMemberValue.TopicPartition
    value = _value(7, topic_partitions=_partitions_out(entry, partitions))
    return CoordinatorRecord(_key(7, group_id, member_id), value)


def current_assignment_record(group_id: str, member: ConsumerGroupMember) -> CoordinatorRecord:
    entry = ConsumerGroupCurrentMemberAssignmentValue.TopicPartitions
    value = _value(
        8,
        member_epoch=member.member_epoch,
        previous_member_epoch=member.previous_member_epoch,
        state=int(member.state),
        assigned_partitions=_partitions_out(entry, member.assigned_partitions),
        partitions_pending_revocation=_partitions_out(entry, member.partitions_pending_revocation),
    )
    return CoordinatorRecord(_key(8, group_id, member.member_id), value)


def member_tombstones(group_id: str, member_id: str) -> list[CoordinatorRecord]:
    """The records that remove a member, in Kafka's order: its current assignment, its target,
    then its subscription."""
    return [
        CoordinatorRecord(_key(8, group_id, member_id), None),
        CoordinatorRecord(_key(7, group_id, member_id), None),
        CoordinatorRecord(_key(5, group_id, member_id), None),
    ]


def group_tombstones(group: ConsumerGroup) -> list[CoordinatorRecord]:
    """The records that remove a whole group (not its offsets)."""
    records = []
    for member_id in sorted(group.members):
        records += member_tombstones(group.group_id, member_id)
    for member_id in sorted(set(group.target) - set(group.members)):
        records.append(CoordinatorRecord(_key(7, group.group_id, member_id), None))
    records += [
        CoordinatorRecord(_key(6, group.group_id), None),
        CoordinatorRecord(_key(4, group.group_id), None),
        CoordinatorRecord(_key(3, group.group_id), None),
    ]
    return records


# --- replaying records --------------------------------------------------------------------------


def decode_key(version: int, key: bytes) -> tuple[str, str | None]:
    """The group id and member id (None for group-wide records) of a record key."""
    try:
        decoded = _KEYS[version].decode(key, version=version)
    except Exception as err:
        raise CorruptRecordError(f"consumer group record key v{version}: {err}") from None
    return decoded.group_id, getattr(decoded, "member_id", None)


def _decode_value(version: int, value: bytes) -> Any:
    try:
        return _VALUES[version].decode(value, version=0)
    except Exception as err:
        raise CorruptRecordError(f"consumer group record value (key v{version}): {err}") from None


def replay(
    version: int,
    key: bytes,
    value: bytes | None,
    group_for: Callable[[str, bool], ConsumerGroup | None],
) -> None:
    """Applies one record to the group it names. ``group_for(group_id, create)`` finds the
    group (making it if ``create``); a tombstone of the group epoch marks it dead, for the
    shard to drop."""
    group_id, member_id = decode_key(version, key)
    group = group_for(group_id, value is not None)
    if group is None:
        return
    if value is None:
        _replay_tombstone(group, version, member_id)
        return
    data = _decode_value(version, value)
    if version == GROUP_EPOCH_KEY_VERSION:
        group.dead = False
        group.replay_group_epoch(data.epoch)
    elif version == SUBSCRIPTION_METADATA_KEY_VERSION:
        group.replay_subscription_metadata(
            TopicMetadata(_our_uuid(t.topic_id), t.topic_name, t.num_partitions)
            for t in data.topics
        )
    elif version == MEMBER_METADATA_KEY_VERSION:
        assert member_id is not None
        group.replay_member(
            ConsumerGroupMember(
                member_id,
                instance_id=data.instance_id,
                rack_id=data.rack_id,
                rebalance_timeout_ms=data.rebalance_timeout_ms,
                client_id=data.client_id,
                client_host=data.client_host,
                subscribed_topic_names=tuple(data.subscribed_topic_names),
                subscribed_topic_regex=data.subscribed_topic_regex,
                server_assignor=data.server_assignor,
            ),
            member_id,
        )
    elif version == TARGET_EPOCH_KEY_VERSION:
        group.replay_target_epoch(data.assignment_epoch)
    elif version == TARGET_MEMBER_KEY_VERSION:
        assert member_id is not None
        group.replay_target_member(member_id, _partitions_in(data.topic_partitions))
    else:
        assert member_id is not None
        try:
            state = MemberState(data.state)
        except ValueError:
            state = MemberState.UNKNOWN
        group.replay_current_assignment(
            member_id,
            data.member_epoch,
            data.previous_member_epoch,
            state,
            _partitions_in(data.assigned_partitions),
            _partitions_in(data.partitions_pending_revocation),
        )


def _replay_tombstone(group: ConsumerGroup, version: int, member_id: str | None) -> None:
    if version == GROUP_EPOCH_KEY_VERSION:
        group.dead = True
    elif version == SUBSCRIPTION_METADATA_KEY_VERSION:
        group.replay_subscription_metadata(())
    elif version == MEMBER_METADATA_KEY_VERSION:
        assert member_id is not None
        group.replay_member(None, member_id)
    elif version == TARGET_EPOCH_KEY_VERSION:
        group.replay_target_epoch(0)
    elif version == TARGET_MEMBER_KEY_VERSION:
        assert member_id is not None
        group.replay_target_member(member_id, None)
    else:
        assert member_id is not None
        group.replay_current_assignment_removed(member_id)
