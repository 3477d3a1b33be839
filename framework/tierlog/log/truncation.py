"""Moving a log's end back, or restarting it elsewhere: truncation and starts from remote.

Kafka's ``UnifiedLog.truncateTo`` / ``truncateFullyAndStartAt`` and the follower's rebuild from
remote storage (KIP-405's ``buildRemoteLogAuxState``). Apart from ``PartitionLog`` because each
of these must bring every piece of derived state back in step with the batches (producer state,
leader epochs, the high watermark, the recovery point, the cleaner's checkpoint), and that is
easiest to check in one place. The caller holds the log's lock.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from . import files
from .checkpoint import write_atomically
from .epoch_cache import EpochEntry
from .loading import replay_producers
from .snapshot import snapshot_file_name

if TYPE_CHECKING:
    from .partition_log import PartitionLog

log = logging.getLogger(__name__)


def truncate_to(plog: PartitionLog, offset: int, now: int) -> bool:
    """See :meth:`PartitionLog.truncate_to`."""
    if offset >= plog._next_offset:
        return False
    plog._producer_state.update_map_end_offset(plog._next_offset)
    if offset < plog._segments[0].base_offset:
        truncate_fully(plog, offset, now)
        return True
    while len(plog._segments) > 1 and plog._bases[-1] > offset:
        plog._bases.pop()
        plog._schedule_delete(plog._segments.pop(), now)
    active = plog._active
    plog._forget(active)
    active.truncate_to(offset, now)
    end = plog._next_offset = active.read_next_offset()
    plog._bound_cache = None
    plog._epoch_cache.truncate_from_end(end)
    plog._latest_epoch = plog._epoch_cache.latest_epoch
    plog._log_start_offset = min(plog._log_start_offset, end)
    plog._local_log_start_offset = min(plog._local_log_start_offset, end)
    producers = plog._producer_state
    producers.truncate_and_reload(plog._log_start_offset, end, now)
    replay_producers(plog, producers.map_end_offset, end)
    if plog._high_watermark > end:
        plog._set_high_watermark(end)
    if plog._recovery_point > end:
        plog._recovery_point = end
        plog._write_checkpoint(files.RECOVERY_POINT_CHECKPOINT, end)
    plog._clamp_cleaner_checkpoint(end)
    return True


def truncate_fully(plog: PartitionLog, offset: int, now: int) -> None:
    """Every segment deleted, and an empty log started at ``offset``."""
    for segment in plog._segments:
        plog._schedule_delete(segment, now)
    plog._segments.clear()
    plog._bases.clear()
    plog._add_segment(plog._new_segment(offset))
    plog._bound_cache = None
    plog._next_offset = offset
    plog._epoch_cache.clear_and_flush()
    plog._latest_epoch = None
    plog._producer_state.truncate_fully_and_start_at(offset)
    plog._log_start_offset = plog._local_log_start_offset = offset
    plog._set_high_watermark(offset)
    plog._recovery_point = offset
    plog._unflushed_messages = 0
    plog._write_checkpoint(files.LOG_START_OFFSET_CHECKPOINT, offset)
    plog._write_checkpoint(files.RECOVERY_POINT_CHECKPOINT, offset)
    plog._clamp_cleaner_checkpoint(offset)


def start_from_remote(
    plog: PartitionLog,
    offset: int,
    log_start_offset: int,
    leader_epochs: Sequence[EpochEntry],
    producer_snapshot: bytes,
    now: int,
) -> None:
    """See :meth:`PartitionLog.start_from_remote`; the snapshot is already checked."""
    truncate_fully(plog, offset, now)
    plog._log_start_offset = log_start_offset
    plog._write_checkpoint(files.LOG_START_OFFSET_CHECKPOINT, log_start_offset)
    plog._epoch_cache.assign_entries(e for e in leader_epochs if e.start_offset < offset)
    plog._epoch_cache.truncate_from_start(log_start_offset)
    plog._latest_epoch = plog._epoch_cache.latest_epoch
    write_atomically(plog._dir / snapshot_file_name(offset), producer_snapshot)
    producers = plog._producer_state
    producers.truncate_fully_and_reload_snapshots()
    producers.truncate_and_reload(log_start_offset, offset, now)
    plog._highest_offset_in_remote_storage = max(offset - 1, plog._highest_offset_in_remote_storage)


def restore_remote_lineage(
    plog: PartitionLog, remote_log_start: int, leader_epochs: Sequence[EpochEntry]
) -> None:
    """See :meth:`PartitionLog.restore_remote_lineage`."""
    target = min(remote_log_start, plog._local_log_start_offset)
    if plog._log_start_lost and target > plog._log_start_offset:
        log.info(
            "%s: log start %d raised to %d, where remote storage starts",
            plog._dir,
            plog._log_start_offset,
            target,
        )
        plog._increment_log_start_offset(target)
    plog._log_start_lost = False
    cache = plog._epoch_cache
    known = cache.entries()
    first = known[0].start_offset if known else plog._next_offset
    earlier = [e for e in leader_epochs if e.start_offset < first]
    if not earlier:
        return
    cache.clear()
    cache.assign_entries([*earlier, *known])
    cache.truncate_from_start(plog._log_start_offset)
    plog._latest_epoch = cache.latest_epoch
    log.info("%s: leader epochs restored from remote metadata: %s", plog._dir, earlier)
