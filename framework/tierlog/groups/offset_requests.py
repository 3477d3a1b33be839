"""OffsetCommit, OffsetFetch and OffsetDelete, for groups of every type.

A commit is checked against its group (generation fencing for members; a simple commit with
generation -1 only to a group with no members), written to ``__consumer_offsets`` with acks=all,
and applied once committed. A partition of a topic that does not exist is answered
UNKNOWN_TOPIC_OR_PARTITION, metadata over ``offset.metadata.max.bytes``
OFFSET_METADATA_TOO_LARGE; the others of the request are still committed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import (
    GroupIdNotFoundError,
    GroupSubscribedToTopicError,
    IllegalGenerationError,
    InvalidCommitOffsetSizeError,
    InvalidGroupIdError,
    OffsetMetadataTooLargeError,
    RecordListTooLargeError,
    RecordTooLargeError,
    TierlogError,
    UnknownTopicOrPartitionError,
    error_code_of,
)
from ..model import TopicPartition
from . import protocol as gp
from .classic_group import ClassicGroup, now_ms
from .dispatch import register_handler
from .offsets import CommittedOffset, OffsetStore
from .records import CoordinatorRecord

if TYPE_CHECKING:
    from .runtime import GroupCoordinator

NONE = 0
#: From OffsetCommit v9 a commit to a group that does not exist gets GROUP_ID_NOT_FOUND
#: (before: ILLEGAL_GENERATION).
_GROUP_ID_NOT_FOUND_VERSION = 9

# --- OffsetCommit ----------------------------------------------------------------------------


def offset_commit(
    coordinator: GroupCoordinator, request: gp.OffsetCommitRequest
) -> gp.OffsetCommitResponse:
    if not request.group_id:
        raise InvalidGroupIdError("a group id must not be empty")
    image = coordinator.broker.controller.image()
    shard = coordinator.shard_for(request.group_id)
    codes: dict[tuple[str, int], int] = {}
    to_write: dict[TopicPartition, CommittedOffset] = {}
    now = now_ms()
    expire = now + request.retention_time_ms if request.retention_time_ms >= 0 else None
    max_metadata = coordinator.offset_metadata_max_bytes
    with shard.lock:
        shard.check_active()
        group = shard.groups.get(request.group_id)
        if group is None:
            if request.generation_id_or_member_epoch >= 0:
                if request.api_version >= _GROUP_ID_NOT_FOUND_VERSION:
                    raise GroupIdNotFoundError(f"group {request.group_id!r} does not exist")
                raise IllegalGenerationError(
                    f"group {request.group_id!r} does not exist, so generation "
                    f"{request.generation_id_or_member_epoch} is not current"
                )
            group = ClassicGroup(request.group_id, created_ms=now)
            created = True
        else:
            created = False
        group.validate_offset_commit(
            request.member_id, request.group_instance_id, request.generation_id_or_member_epoch
        )
        for topic in request.topics:
            for partition in topic.partitions:
                named = (topic.name, partition.partition_index)
                tp = _topic_partition(*named)
                if tp is None or image.registration(tp) is None:
                    codes[named] = UnknownTopicOrPartitionError.code or 3
                    continue
                metadata = partition.committed_metadata or ""
                if len(metadata.encode()) > max_metadata:
                    codes[named] = OffsetMetadataTooLargeError.code or 12
                    continue
                to_write[tp] = CommittedOffset(
                    partition.committed_offset,
                    partition.committed_leader_epoch,
                    metadata,
                    now,
                    expire,
                )
        records = [OffsetStore.record(request.group_id, tp, c) for tp, c in to_write.items()]
        try:
            shard.append(records)
        except TierlogError as err:
            code = _commit_write_error(err)
            for tp in to_write:
                codes[tp.topic, tp.partition] = code
        else:
            if created and to_write:
                shard.groups[request.group_id] = group
            for tp, committed in to_write.items():
                shard.offsets.put(request.group_id, tp, committed)
                codes[tp.topic, tp.partition] = NONE
            if coordinator.metrics is not None:
                coordinator.metrics.offset_commits.mark(len(to_write))
    return gp.OffsetCommitResponse(
        [
            gp.OffsetCommitResponseTopic(
                topic.name,
                [
                    gp.OffsetCommitResponsePartition(
                        p.partition_index,
                        codes[topic.name, p.partition_index],
                    )
                    for p in topic.partitions
                ],
            )
            for topic in request.topics
        ]
    )


def _topic_partition(topic: str, partition: int) -> TopicPartition | None:
    """The partition a request names, or None for a name or index no partition can have."""
    try:
        return TopicPartition(topic, partition)
    except ValueError:
        return None


def _commit_write_error(err: TierlogError) -> int:
    if isinstance(err.__cause__, RecordTooLargeError | RecordListTooLargeError):
        return InvalidCommitOffsetSizeError.code or 28
    return error_code_of(err)


def _commit_error(
    request: gp.OffsetCommitRequest, code: int, _message: str
) -> gp.OffsetCommitResponse:
    return gp.OffsetCommitResponse(
        [
            gp.OffsetCommitResponseTopic(
                t.name,
                [gp.OffsetCommitResponsePartition(p.partition_index, code) for p in t.partitions],
            )
            for t in request.topics
        ]
    )


# --- OffsetFetch -----------------------------------------------------------------------------


def offset_fetch(
    coordinator: GroupCoordinator, request: gp.OffsetFetchRequest
) -> gp.OffsetFetchResponse:
    return gp.OffsetFetchResponse([_fetch_group(coordinator, g) for g in request.groups])


def _fetch_group(
    coordinator: GroupCoordinator, request: gp.OffsetFetchRequestGroup
) -> gp.OffsetFetchResponseGroup:
    try:
        with coordinator.locked_shard(request.group_id) as shard:
            group = shard.groups.get(request.group_id)
            if group is not None and (request.member_id is not None or request.member_epoch >= 0):
                group.validate_offset_fetch(request.member_id, request.member_epoch)
            offsets = shard.offsets.of_group(request.group_id)
    except TierlogError as err:
        return _fetch_group_error(request, error_code_of(err))
    wanted: dict[str, list[int]] = {}
    if request.topics is None:
        for tp in sorted(offsets):
            wanted.setdefault(tp.topic, []).append(tp.partition)
    else:
        for topic in request.topics:
            wanted.setdefault(topic.name, []).extend(topic.partition_indexes)
    topics = []
    for name, indexes in wanted.items():
        partitions = []
        for index in indexes:
            asked = _topic_partition(name, index)
            committed = None if asked is None else offsets.get(asked)
            if committed is None:
                partitions.append(gp.OffsetFetchResponsePartitions(index))
            else:
                partitions.append(
                    gp.OffsetFetchResponsePartitions(
                        index, committed.offset, committed.leader_epoch, committed.metadata
                    )
                )
        topics.append(gp.OffsetFetchResponseTopics(name, partitions))
    return gp.OffsetFetchResponseGroup(request.group_id, topics)


def _fetch_group_error(
    request: gp.OffsetFetchRequestGroup, code: int
) -> gp.OffsetFetchResponseGroup:
    """The group's error, also on each partition asked for (v1 has no group-level code)."""
    topics = [
        gp.OffsetFetchResponseTopics(
            t.name,
            [gp.OffsetFetchResponsePartitions(i, error_code=code) for i in t.partition_indexes],
        )
        for t in request.topics or ()
    ]
    return gp.OffsetFetchResponseGroup(request.group_id, topics, code)


def _fetch_error(
    request: gp.OffsetFetchRequest, code: int, _message: str
) -> gp.OffsetFetchResponse:
    return gp.OffsetFetchResponse([_fetch_group_error(g, code) for g in request.groups])


# --- OffsetDelete ----------------------------------------------------------------------------


def offset_delete(
    coordinator: GroupCoordinator, request: gp.OffsetDeleteRequest
) -> gp.OffsetDeleteResponse:
    with coordinator.locked_shard(request.group_id) as shard:
        group = shard.groups.get(request.group_id)
        if (group is None or group.is_dead()) and not shard.offsets.has_offsets(request.group_id):
            raise GroupIdNotFoundError(f"group {request.group_id!r} does not exist")
        if group is not None:
            group.validate_offset_delete()
        subscribed = group.subscribed_topics() if group is not None else frozenset()
        in_use = not (group is None or group.is_empty())
        codes: dict[tuple[str, int], int] = {}
        records: list[CoordinatorRecord] = []
        deleted: list[TopicPartition] = []
        for topic in request.topics:
            for partition in topic.partitions:
                named = (topic.name, partition.partition_index)
                tp = _topic_partition(*named)
                if tp is None:
                    codes[named] = UnknownTopicOrPartitionError.code or 3
                    continue
                if in_use and (subscribed is None or topic.name in subscribed):
                    codes[named] = GroupSubscribedToTopicError.code or 86
                    continue
                codes[named] = NONE
                deleted.append(tp)
                if shard.offsets.get(request.group_id, tp) is not None:
                    records.append(OffsetStore.record(request.group_id, tp, None))
        shard.append(records)
        for tp in deleted:
            shard.offsets.remove(request.group_id, tp)
        if coordinator.metrics is not None:
            coordinator.metrics.offset_deletions.mark(len(records))
    return gp.OffsetDeleteResponse(
        NONE,
        [
            gp.OffsetDeleteResponseTopic(
                topic.name,
                [
                    gp.OffsetDeleteResponsePartition(
                        p.partition_index, codes[topic.name, p.partition_index]
                    )
                    for p in topic.partitions
                ],
            )
            for topic in request.topics
        ],
    )


def _delete_error(
    _request: gp.OffsetDeleteRequest, code: int, _message: str
) -> gp.OffsetDeleteResponse:
    return gp.OffsetDeleteResponse(code)


register_handler(gp.OffsetCommitRequest, offset_commit, _commit_error)
register_handler(gp.OffsetFetchRequest, offset_fetch, _fetch_error)
register_handler(gp.OffsetDeleteRequest, offset_delete, _delete_error)
