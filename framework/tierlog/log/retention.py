"""Retention: which old segments go, oldest first, and when a log start offset moves with them.

Kafka's ``UnifiedLog.deleteOldSegments``. Each rule (below the log start, over
``retention.bytes``, older than ``retention.ms``; their ``local.`` forms on a tiered topic) is a
predicate on a segment and the next one's base offset (a topic whose ``cleanup.policy`` lacks
``delete`` applies only the first); ``delete_while`` applies one with the
limits every rule shares: never the active segment, never at or above the high watermark, and
on a tiered topic never a segment remote storage does not hold yet. The caller holds the lock.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from .segment import LogSegment

if TYPE_CHECKING:
    from .partition_log import PartitionLog

log = logging.getLogger(__name__)


def apply_retention(plog: PartitionLog, now: int) -> int:
    """Deletes the segments the topic's retention rules let go; returns how many."""
    config = plog._config
    tiered = config.remote_storage_enable
    if tiered:
        retention_ms = config.effective_local_retention_ms
        retention_bytes = config.effective_local_retention_bytes
    else:
        retention_ms, retention_bytes = config.retention_ms, config.retention_bytes
    deleted = delete_while(plog, lambda s, nxt: nxt <= plog._log_start_offset, now)
    if not config.delete:
        # cleanup.policy=compact alone: the cleaner, not retention, decides what goes.
        return deleted
    if retention_bytes >= 0:
        excess = [plog.size - retention_bytes]

        def over_size(segment: LogSegment, _next: int) -> bool:
            if excess[0] - segment.size >= 0:
                excess[0] -= segment.size
                return True
            return False

        deleted += delete_while(plog, over_size, now)
    if retention_ms >= 0:
        deleted += delete_while(plog, lambda s, _n: now - s.largest_timestamp > retention_ms, now)
    return deleted


def delete_while(plog: PartitionLog, predicate: Callable[[LogSegment, int], bool], now: int) -> int:
    """Deletes segments from the oldest while ``predicate(segment, next_base)`` holds."""
    tiered = plog._config.remote_copy_enabled
    count = 0
    while True:
        if len(plog._segments) == 1:
            roll_if_retention_breached(plog, predicate, now)
            break
        segment, upper = plog._touch(plog._segments[0]), plog._bases[1]
        if upper > plog._high_watermark or not predicate(segment, upper):
            break
        if (
            tiered
            and upper - 1 > plog._highest_offset_in_remote_storage
            and upper > plog._log_start_offset
        ):
            break
        plog._segments.pop(0)
        plog._bases.pop(0)
        plog._schedule_delete(segment, now)
        count += 1
    if count:
        first = plog._bases[0]
        if not plog._config.remote_storage_enable and first > plog._log_start_offset:
            plog._increment_log_start_offset(first)
        plog._local_log_start_offset = max(first, plog._log_start_offset)
        plog._producer_state.delete_snapshots_below(first)
    return count


def roll_if_retention_breached(
    plog: PartitionLog, predicate: Callable[[LogSegment, int], bool], now: int
) -> None:
    """Rolls a tiered log's active segment once retention holds for it (KAFKA-15047).

    Otherwise the newest records of a partition that receives no more writes would never
    be tiered nor leave the local disk. As in Kafka, only a non-empty active segment wholly
    below the high watermark is rolled; it is deleted by a later pass once tiered.
    """
    active = plog._touch(plog._active)
    upper = plog._next_offset
    if (
        plog._config.remote_storage_enable
        and active.size > 0
        and upper <= plog._high_watermark
        and predicate(active, upper)
    ):
        log.info("rolling the active segment of %s to make it eligible for deletion", plog._dir)
        plog._roll_locked(upper, now)
