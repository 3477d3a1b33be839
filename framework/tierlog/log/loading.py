"""Opening a partition's log: reading its files back and, after an unclean stop, recovering them.

Kafka's ``LogLoader``. Kept apart from ``PartitionLog`` because it runs once, at open, before
anyone else can see the log (so without the log's lock), and because crash recovery is the
trickiest code of the log: here it reads top to bottom. ``replay_producers`` also serves
truncation, which rebuilds producer state the same way.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..errors import KafkaStorageError
from ..records import BatchHeader, RecordBatch
from . import files
from .checkpoint import TEMP_SUFFIX, fsync_directory
from .cleaner.swap import complete_swaps
from .epoch_cache import EpochEntry
from .producer_state import AppendOrigin, CompletedTxn, ProducerAppendInfo
from .segment import LogSegment

if TYPE_CHECKING:
    from .partition_log import PartitionLog

log = logging.getLogger(__name__)


def load(plog: PartitionLog) -> None:
    """Reads the directory into ``plog``, recovering it from the recovery point after a crash."""
    directory = plog._dir
    marker = directory / files.CLEAN_SHUTDOWN_MARKER
    clean = marker.exists()
    complete_swaps(directory)
    remove_leftovers(plog)
    bases = sorted(
        files.offset_from_file_name(p.name)
        for p in directory.iterdir()
        if files.is_segment_file(p.name, files.LOG_SUFFIX)
    )
    remove_orphan_indexes(plog, set(bases))
    checkpointed_start = plog._read_checkpoint(files.LOG_START_OFFSET_CHECKPOINT)
    stored_recovery_point = plog._read_checkpoint(files.RECOVERY_POINT_CHECKPOINT)
    recovery_point = stored_recovery_point or 0
    checkpointed_hw = plog._read_checkpoint(files.HIGH_WATERMARK_CHECKPOINT)
    config = plog._config
    for base in bases:
        plog._add_segment(
            LogSegment.open(
                directory,
                base,
                index_interval_bytes=config.index_interval_bytes,
                max_index_size=config.segment_index_bytes,
            )
        )
    if clean:
        marker.unlink()
        fsync_directory(directory)
    created = not plog._segments
    if created:
        start = checkpointed_start or 0
        plog._add_segment(plog._new_segment(start))
        recovery_point = start
    first_base = plog._segments[0].base_offset
    lost_start = checkpointed_start is None
    if checkpointed_start is None:
        checkpointed_start = first_base
    if plog._config.remote_storage_enable:
        # Remote storage may hold offsets below the local ones: without a checkpoint, start
        # at 0 and let the remote log manager raise it to what remote storage holds.
        plog._log_start_offset = 0 if lost_start else checkpointed_start
        plog._log_start_lost = lost_start and not created
    else:
        plog._log_start_offset = max(checkpointed_start, first_base)
    plog._local_log_start_offset = max(first_base, plog._log_start_offset)

    # A log created just now has nothing to recover, and no state worth a snapshot yet.
    recover_from: int | None = None if clean or created else plog._segment_index(recovery_point)
    for index, segment in enumerate(plog._segments):
        try:
            segment.sanity_check()
        except KafkaStorageError as err:
            log.warning("%s; recovering %s", err, segment.log_path)
            recover_from = index if recover_from is None else min(recover_from, index)
            break
    now = plog._clock()
    producers = plog._producer_state
    plog._segments[-1].load_indexes()
    if recover_from is not None:
        recover_segments(plog, recover_from, now)
    else:
        plog._next_offset = plog._segments[-1].read_next_offset()
        plog._recovery_point = min(recovery_point, plog._next_offset)
        producers.truncate_and_reload(plog._log_start_offset, plog._next_offset, now)
        replay_producers(plog, producers.map_end_offset, plog._next_offset)
    producers.update_map_end_offset(plog._next_offset)
    producers.truncate_and_reload(plog._log_start_offset, plog._next_offset, now)
    if not created:
        producers.take_snapshot()
    if plog._epochs_lost and plog._next_offset > plog._segments[0].base_offset:
        rebuild_epochs(plog)
    plog._epoch_cache.truncate_from_end(plog._next_offset)
    plog._epoch_cache.truncate_from_start(plog._log_start_offset)
    plog._latest_epoch = plog._epoch_cache.latest_epoch
    for segment in plog._segments[:-1]:
        segment.unload_indexes()
    hw = plog._log_start_offset if checkpointed_hw is None else checkpointed_hw
    plog._set_high_watermark(hw)
    if not created or stored_recovery_point is not None:
        plog._write_checkpoint(files.RECOVERY_POINT_CHECKPOINT, plog._recovery_point)
    if created:
        # Kept from the start, so that a crash never leaves the log start to be guessed.
        plog._write_checkpoint(files.LOG_START_OFFSET_CHECKPOINT, plog._log_start_offset)
        log.info("created %s, log start %d", plog._dir, plog._log_start_offset)
        return
    log.info(
        "loaded %s: %d segments, log start %d, log end %d (%s shutdown)",
        plog._dir,
        len(plog._segments),
        plog._log_start_offset,
        plog._next_offset,
        "clean" if clean else "unclean",
    )


def remove_leftovers(plog: PartitionLog) -> None:
    """Deletes what a previous run left half done: temp, deleted, cleaned and swap files.

    Runs after ``complete_swaps``: a cleaned segment whose swap was committed is live by then,
    so the ``.swap`` files left are only indexes of an unfinished one.
    """
    for path in plog._dir.iterdir():
        name = path.name
        if name.endswith(TEMP_SUFFIX) or name.endswith(files.TRANSIENT_SUFFIXES):
            log.info("removing leftover file %s", path)
            path.unlink(missing_ok=True)


def remove_orphan_indexes(plog: PartitionLog, bases: set[int]) -> None:
    for path in plog._dir.iterdir():
        name = path.name
        for suffix in (files.INDEX_SUFFIX, files.TIME_INDEX_SUFFIX, files.TXN_INDEX_SUFFIX):
            if files.is_segment_file(name, suffix):
                if files.offset_from_file_name(name) not in bases:
                    log.info("removing index file %s, which has no segment", path)
                    path.unlink(missing_ok=True)
                break


def recover_segments(plog: PartitionLog, start_index: int, now: int) -> None:
    """Scans segments from ``start_index`` on: cuts the torn tail, rebuilds indexes."""
    producers = plog._producer_state
    first = plog._segments[start_index]
    producers.truncate_and_reload(plog._log_start_offset, first.base_offset, now)
    replay_producers(plog, producers.map_end_offset, first.base_offset)
    producers.update_map_end_offset(first.base_offset)
    index = start_index
    while index < len(plog._segments):
        segment = plog._segments[index]
        if index > start_index:
            producers.update_map_end_offset(segment.base_offset)
            producers.take_snapshot()
        truncated = segment.recover(recovery_replay(plog, segment))
        if truncated and index + 1 < len(plog._segments):
            dropped = plog._segments[index + 1 :]
            log.warning(
                "%s was cut after a corrupt batch; deleting the %d later segments",
                segment.log_path,
                len(dropped),
            )
            for later in dropped:
                later.delete()
            del plog._segments[index + 1 :]
            del plog._bases[index + 1 :]
        segment.flush()
        index += 1
    active = plog._segments[-1]
    plog._next_offset = active.read_next_offset()
    plog._recovery_point = plog._next_offset


def rebuild_epochs(plog: PartitionLog) -> None:
    """Every batch carries the epoch of the leader that wrote it, so a lost
    ``leader-epoch-checkpoint`` is rebuilt from the local segments (epochs of offsets only
    in remote storage come back from their metadata: see ``restore_remote_lineage``)."""
    entries: list[EpochEntry] = []
    for segment in plog._segments:
        for batch in segment.batches_from(0):
            epoch = batch.partition_leader_epoch
            if batch.base_offset >= plog._next_offset:
                break
            if epoch >= 0 and (not entries or epoch > entries[-1].epoch):
                entries.append(EpochEntry(epoch, batch.base_offset))
    plog._epoch_cache.clear()
    plog._epoch_cache.assign_entries(entries)
    plog._epoch_cache.flush()
    log.info("%s: rebuilt the leader epochs from the log: %s", plog._dir, entries)


def recovery_replay(plog: PartitionLog, segment: LogSegment) -> Callable[[BatchHeader], None]:
    producers = plog._producer_state
    epochs = plog._epoch_cache

    def replay(header: BatchHeader) -> None:
        epoch = header.partition_leader_epoch
        if epoch >= 0:
            latest = epochs.latest_epoch
            if latest is None or epoch > latest:
                epochs.assign(epoch, header.base_offset)
        if header.has_producer_id:
            assert isinstance(header, RecordBatch)
            info = producers.prepare_update(header.producer_id, AppendOrigin.REPLICATION)
            completed = info.append(header)
            producers.update(info)
            if completed is not None:
                plog._complete_txn(completed, segment)
        producers.update_map_end_offset(header.last_offset + 1)

    return replay


def replay_producers(plog: PartitionLog, start: int, end: int) -> None:
    """Rebuilds producer state from the batches in ``[start, end)`` (no index changes)."""
    producers = plog._producer_state
    if start >= end:
        return
    infos: dict[int, ProducerAppendInfo] = {}
    completed: list[CompletedTxn] = []
    for segment in plog._segments[plog._segment_index(start) :]:
        if segment.base_offset >= end:
            break
        location = segment.translate_offset(start)
        if location is None:
            continue
        for batch in segment.iter_batches(location.position):
            if batch.base_offset >= end:
                break
            if batch.has_producer_id:
                info = infos.get(batch.producer_id)
                if info is None:
                    info = producers.prepare_update(batch.producer_id, AppendOrigin.REPLICATION)
                    infos[batch.producer_id] = info
                done = info.append(batch)
                if done is not None:
                    completed.append(done)
    for info in infos.values():
        producers.update(info)
    for txn in completed:
        producers.complete_txn(txn)
    producers.update_map_end_offset(end)
