"""Offset retention: what ``offsets.retention.minutes`` removes, as Kafka 2.1+ does (KIP-211).

An offset expires when its group has had no members for the retention period (counted from
when the group became empty, or from the commit for a group never joined), or, in a consumer
group with members, when no member subscribes to its topic any more and it was committed
longer ago than that. An offset committed with its own retention time (OffsetCommit v2-4)
expires at that time. A group left empty with no offsets is deleted. Each removal is a
tombstone in ``__consumer_offsets``.
"""

from __future__ import annotations

import logging

from ..model import TopicPartition
from .classic_group import ClassicGroup, now_ms
from .offsets import CommittedOffset, OffsetStore
from .shard import CoordinatorShard, ShardState
from .subscriptions import CONSUMER_PROTOCOL_TYPE

log = logging.getLogger(__name__)


def delete_offsets_of_topics(shard: CoordinatorShard, topics: set[str]) -> int:
    """Removes every committed offset of ``topics`` (deleted) on ``shard``; returns how many."""
    with shard.lock:
        if shard.state is not ShardState.ACTIVE:
            return 0
        doomed = [
            (group_id, tp)
            for group_id in shard.offsets.groups()
            for tp in shard.offsets.of_group(group_id)
            if tp.topic in topics
        ]
        shard.append([OffsetStore.record(g, tp, None) for g, tp in doomed])
        for group_id, tp in doomed:
            shard.offsets.remove(group_id, tp)
        return len(doomed)


def _expired(committed: CommittedOffset, since: int, now: int, retention_ms: int) -> bool:
    if committed.expire_timestamp is not None:
        return now >= committed.expire_timestamp
    return now - since >= retention_ms


def expire_offsets(shard: CoordinatorShard, retention_ms: int, now: int | None = None) -> int:
    """Removes what has expired on ``shard``; returns the offsets removed."""
    now = now_ms() if now is None else now
    with shard.lock:
        if shard.state is not ShardState.ACTIVE:
            return 0
        expired: list[tuple[str, TopicPartition]] = []
        for group_id in shard.offsets.groups():
            group = shard.groups.get(group_id)
            offsets = shard.offsets.of_group(group_id)
            if group is None or group.is_empty():
                base = group.current_state_timestamp() if group is not None else None
                for tp, committed in offsets.items():
                    since = base if base is not None else committed.commit_timestamp
                    if _expired(committed, since, now, retention_ms):
                        expired.append((group_id, tp))
            elif group.protocol_type == CONSUMER_PROTOCOL_TYPE:
                subscribed = group.subscribed_topics()
                if subscribed is None:
                    continue
                for tp, committed in offsets.items():
                    if tp.topic not in subscribed and _expired(
                        committed, committed.commit_timestamp, now, retention_ms
                    ):
                        expired.append((group_id, tp))
        left = {g: len(shard.offsets.of_group(g)) for g in shard.offsets.groups()}
        for group_id, _tp in expired:
            left[group_id] -= 1
        doomed = [
            g
            for g, group in shard.groups.items()
            if group.is_empty()
            and left.get(g, 0) == 0
            and not (isinstance(group, ClassicGroup) and group.pending_members)
        ]
        records = [OffsetStore.record(g, tp, None) for g, tp in expired]
        for group_id in doomed:
            records += shard.groups[group_id].tombstones()
        if not records:
            return 0
        shard.append(records)
        for group_id, tp in expired:
            shard.offsets.remove(group_id, tp)
        for group_id in doomed:
            shard.groups.pop(group_id).close(0)
        log.info("%s: expired %d offsets and %d empty groups", shard, len(expired), len(doomed))
        return len(expired)
