"""Committed offsets of the groups of one shard."""

from __future__ import annotations

import attrs

from ..model import TopicPartition
from .records import CoordinatorRecord, OffsetCommitKey, OffsetCommitValue


@attrs.frozen
class CommittedOffset:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    #: Only set by a commit that asked for its own retention (OffsetCommit v2-4).
    expire_timestamp: int | None = None

    def value(self) -> OffsetCommitValue:
        return OffsetCommitValue(
            self.offset,
            self.metadata,
            self.commit_timestamp,
            self.leader_epoch,
            self.expire_timestamp,
        )

    @classmethod
    def of(cls, value: OffsetCommitValue) -> CommittedOffset:
        return cls(
            value.offset,
            value.leader_epoch,
            value.metadata,
            value.commit_timestamp,
            value.expire_timestamp,
        )


class OffsetStore:
    """group -> partition -> committed offset. Not thread-safe: the shard's lock guards it."""

    def __init__(self) -> None:
        self._offsets: dict[str, dict[TopicPartition, CommittedOffset]] = {}

    def get(self, group_id: str, tp: TopicPartition) -> CommittedOffset | None:
        return self._offsets.get(group_id, {}).get(tp)

    def of_group(self, group_id: str) -> dict[TopicPartition, CommittedOffset]:
        return dict(self._offsets.get(group_id, {}))

    def count(self) -> int:
        return sum(len(group) for group in list(self._offsets.values()))

    def groups(self) -> list[str]:
        return list(self._offsets)

    def has_offsets(self, group_id: str) -> bool:
        return bool(self._offsets.get(group_id))

    def put(self, group_id: str, tp: TopicPartition, committed: CommittedOffset) -> None:
        self._offsets.setdefault(group_id, {})[tp] = committed

    def remove(self, group_id: str, tp: TopicPartition) -> None:
        group = self._offsets.get(group_id)
        if group is not None:
            group.pop(tp, None)
            if not group:
                del self._offsets[group_id]

    def remove_group(self, group_id: str) -> list[TopicPartition]:
        return list(self._offsets.pop(group_id, {}))

    @staticmethod
    def record(
        group_id: str, tp: TopicPartition, committed: CommittedOffset | None
    ) -> CoordinatorRecord:
        """The record that stores ``committed`` (None: its tombstone)."""
        key = OffsetCommitKey(group_id, tp.topic, tp.partition).encode()
        return CoordinatorRecord(key, None if committed is None else committed.value().encode())
