"""The append path: checking a request's batches, stamping their offsets, and writing them.

Kafka's ``UnifiedLog.append``. Apart from ``PartitionLog`` because it is the hottest code of the
broker and the longest: every produced and replicated batch goes through ``append``, which
checks the batches outside the lock and writes the common case (one batch at the current epoch,
no producer id) in as few steps as it can; ``append_locked`` is the general path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from ..errors import FencedLeaderEpochError, InvalidRequestError, RecordTooLargeError
from ..records import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    NO_PRODUCER_ID,
    NO_TIMESTAMP,
    BatchFields,
    RecordBatch,
    TimestampType,
    read_batch_fields,
    set_max_timestamp,
    stamp_batch,
    validate_batch_at,
)
from ..records.batch import CONTROL_MASK
from ..records.validation import validate_produced_batch
from .producer_state import AppendOrigin, BatchMetadata, CompletedTxn, ProducerAppendInfo
from .results import LogAppendInfo

if TYPE_CHECKING:
    from .partition_log import PartitionLog
    from .segment import LogSegment

_INT32_MAX: Final = (1 << 31) - 1
#: Enum members and ``tuple.__new__`` as module constants: the append path reads them for every
#: batch, and a global is several times cheaper than an enum class attribute or a named tuple's
#: ``__new__``.
_FROM_CLIENT: Final = AppendOrigin.CLIENT
_LOG_APPEND_TIME: Final = TimestampType.LOG_APPEND_TIME
_CREATE_TIME: Final = TimestampType.CREATE_TIME
_new_tuple: Final = tuple.__new__


def append(
    plog: PartitionLog, view: memoryview, origin: AppendOrigin, leader_epoch: int | None
) -> LogAppendInfo:
    """``append_as_leader`` (with ``leader_epoch``) and ``append_as_follower`` (without)."""
    # Every batch is checked before anything is written, and outside the lock. This runs
    # for every produced batch, so headers are unpacked once, into tuples (the batches lie
    # back to back: positions are running sums of sizes), enum members are module
    # constants, and the lock is taken without a ``with`` (half the cost).
    config = plog._config
    max_bytes = config.max_message_bytes
    from_client = origin is _FROM_CLIENT
    if from_client:
        rules = config.validation_rules
        created = rules.timestamp_type is _CREATE_TIME
        validated_at = plog._clock()
    checked: list[BatchFields] = []
    position = 0
    end = len(view)
    while position < end:
        fields = validate_batch_at(view, position, max_bytes)
        size = LOG_OVERHEAD + fields[1]
        if size > max_bytes:
            raise RecordTooLargeError(
                f"the batch at byte {position} is {size} bytes, more than max.message.bytes "
                f"({max_bytes}) of {plog._topic_partition}"
            )
        if from_client:
            batch_max = validate_produced_batch(view, position, fields, rules, validated_at)
            if created and batch_max != fields[8]:
                # As Kafka does: the header's max timestamp is set from the records.
                if view.readonly:
                    view = memoryview(bytearray(view))
                set_max_timestamp(
                    view,
                    batch_max,
                    timestamp_type=_CREATE_TIME,
                    position=position,
                    check_crc=False,
                )
                fields = read_batch_fields(view, position)
        checked.append(fields)
        position += size
    if not checked:
        return LogAppendInfo(-1, -1, NO_TIMESTAMP, -1, -1, plog._log_start_offset, 0, 0, 0)
    lock = plog._lock
    lock.acquire()
    try:
        if plog._closed:
            plog._check_open()
        now = plog._clock()
        if (
            len(checked) == 1
            and leader_epoch is not None
            and leader_epoch == plog._latest_epoch
            and fields[9] <= NO_PRODUCER_ID
            and config.message_timestamp_type is not _LOG_APPEND_TIME
        ):
            # The common case, a producer's one batch at the current epoch with no producer
            # id, in fewer steps than the general path takes: no lists, no producer state.
            offset = plog._next_offset
            last = offset + fields[6]
            batch_max = fields[8]
            max_timestamp = batch_max if batch_max > NO_TIMESTAMP else NO_TIMESTAMP
            if view.readonly:
                header = bytearray(view[:HEADER_SIZE])
                stamp_batch(header, 0, fields, offset, leader_epoch)
                records: memoryview | list[bytes | bytearray | memoryview] = [
                    header,
                    view[HEADER_SIZE:],
                ]
            else:
                stamp_batch(view, 0, fields, offset, leader_epoch)
                records = view
            segment = plog._segments[-1]
            if _roll_due(plog, segment, end, last, max_timestamp, now):
                segment = plog._maybe_roll(end, max_timestamp, offset, last, now)
            segment.append_batch(records, last, batch_max)
            plog._next_offset = last + 1
            plog._unflushed_messages += last + 1 - offset
            if (
                plog._unflushed_messages >= config.flush_messages
                or now - plog._last_flush_ms >= config.flush_ms
            ):
                plog._flush_locked(now)
            return _new_tuple(
                LogAppendInfo,
                (
                    offset,
                    last,
                    max_timestamp,
                    last,
                    -1,
                    plog._log_start_offset,
                    end,
                    1,
                    fields[12],
                    False,
                ),
            )
        return append_locked(plog, view, checked, origin, leader_epoch, now)
    finally:
        lock.release()


def append_locked(
    plog: PartitionLog,
    view: memoryview,
    checked: list[BatchFields],
    origin: AppendOrigin,
    leader_epoch: int | None,
    now: int,
) -> LogAppendInfo:
    """The general append, with the lock held: any number of batches, leader or follower,
    producer checks, LogAppendTime, and leader epochs to record."""
    config = plog._config
    latest_epoch = plog._latest_epoch
    append_time = -1
    # Read-only input: stamped header copies alternating with the untouched rest of
    # each batch, written with one pwritev instead of copying the whole request.
    pieces: list[bytes | bytearray | memoryview] | None = None
    # (last offset, max timestamp, size) of each batch, for the segment's indexes.
    batches: list[tuple[int, int, int]] = []
    max_timestamp, offset_of_max = NO_TIMESTAMP, -1
    records_count = 0
    has_producers = False
    if leader_epoch is not None:
        if latest_epoch is not None and leader_epoch < latest_epoch:
            raise FencedLeaderEpochError(
                f"leader epoch {leader_epoch} is older than epoch {latest_epoch} "
                f"of {plog._topic_partition}'s log"
            )
        if config.message_timestamp_type is _LOG_APPEND_TIME:
            append_time = now
        if view.readonly:
            if append_time >= 0 or any(f[5] & CONTROL_MASK for f in checked):
                view = memoryview(bytearray(view))
            else:
                pieces = []
        offset = first_offset = plog._next_offset
        position = 0
        for fields in checked:
            if pieces is None:
                stamp_batch(view, position, fields, offset, leader_epoch)
            else:
                header = bytearray(view[position : position + HEADER_SIZE])
                stamp_batch(header, 0, fields, offset, leader_epoch)
                pieces.append(header)
                pieces.append(view[position + HEADER_SIZE : position + LOG_OVERHEAD + fields[1]])
            _, length, _, _, _, _, delta, _, batch_max, producer_id, _, _, count = fields
            if append_time >= 0:
                set_max_timestamp(view, now, position=position, check_crc=False)
                batch_max = now
            last = offset + delta
            size = LOG_OVERHEAD + length
            batches.append((last, batch_max, size))
            position += size
            if batch_max > max_timestamp:
                max_timestamp, offset_of_max = batch_max, last
            records_count += count
            if producer_id > NO_PRODUCER_ID:
                has_producers = True
            offset = last + 1
    else:
        first_offset = checked[0][0]
        expected = plog._next_offset
        for fields in checked:
            base, length, _, _, _, _, delta, _, batch_max, producer_id, _, _, count = fields
            if base < expected:
                raise InvalidRequestError(
                    f"batch at offset {base} does not follow offset "
                    f"{expected - 1} of {plog._topic_partition}"
                )
            last = base + delta
            expected = last + 1
            batches.append((last, batch_max, LOG_OVERHEAD + length))
            if batch_max > max_timestamp:
                max_timestamp, offset_of_max = batch_max, last
            records_count += count
            if producer_id > NO_PRODUCER_ID:
                has_producers = True
    last_offset = batches[-1][0]
    if offset_of_max < 0:
        offset_of_max = last_offset

    if has_producers:
        infos: dict[int, ProducerAppendInfo] = {}
        completed: list[CompletedTxn] = []
        duplicate = check_producers(
            plog, view if pieces is None else pieces[::2], checked, origin, infos, completed
        )
        if duplicate is not None:
            return LogAppendInfo(
                duplicate.first_offset,
                duplicate.last_offset,
                duplicate.timestamp,
                duplicate.last_offset,
                append_time,
                plog._log_start_offset,
                0,
                0,
                0,
                True,
            )

    size = len(view)
    segment = plog._segments[-1]
    if _roll_due(plog, segment, size, last_offset, max_timestamp, now):
        segment = plog._maybe_roll(size, max_timestamp, first_offset, last_offset, now)
    segment.append(view if pieces is None else pieces, batches)

    if leader_epoch is not None:
        if leader_epoch >= 0 and (latest_epoch is None or leader_epoch > latest_epoch):
            plog._epoch_cache.assign(leader_epoch, first_offset)
            plog._latest_epoch = leader_epoch
    else:
        for base, _, epoch, *_ in checked:
            if epoch >= 0 and (latest_epoch is None or epoch > latest_epoch):
                plog._epoch_cache.assign(epoch, base)
                plog._latest_epoch = latest_epoch = epoch
    if has_producers:
        producers = plog._producer_state
        for info in infos.values():
            producers.update(info)
        for txn in completed:
            plog._complete_txn(txn, segment)
    # The producer state's map end offset is brought up to date when it is needed
    # (snapshots, truncation), not on every append.
    plog._next_offset = next_offset = last_offset + 1

    plog._unflushed_messages += next_offset - first_offset
    if (
        plog._unflushed_messages >= config.flush_messages
        or now - plog._last_flush_ms >= config.flush_ms
    ):
        plog._flush_locked(now)
    return _new_tuple(
        LogAppendInfo,
        (
            first_offset,
            last_offset,
            max_timestamp,
            offset_of_max,
            append_time,
            plog._log_start_offset,
            size,
            len(checked),
            records_count,
            False,
        ),
    )


def _roll_due(
    plog: PartitionLog, segment: LogSegment, size: int, last: int, max_timestamp: int, now: int
) -> bool:
    """Whether ``size`` more bytes ending at offset ``last`` may need a new segment: the cheap
    test on every append; ``_maybe_roll`` decides."""
    config = plog._config
    return (
        not segment.size
        or segment.is_full
        or segment.size > config.segment_bytes - size
        or last - segment.base_offset > _INT32_MAX
        or segment.time_waited_for_roll(now, max_timestamp)
        > config.segment_ms - plog._roll_jitter_ms
    )


def check_producers(
    plog: PartitionLog,
    stamped: memoryview | list[bytes | bytearray | memoryview],
    checked: list[BatchFields],
    origin: AppendOrigin,
    infos: dict[int, ProducerAppendInfo],
    completed: list[CompletedTxn],
) -> BatchMetadata | None:
    """Validates the batches of idempotent and transactional producers, changing nothing.

    ``stamped`` holds the batches with their offsets assigned: the request rewritten in
    place, or the stamped header copies of a read-only request (one per batch; data batches
    need only their headers here). Fills ``infos`` with each producer's pending state and
    ``completed`` with the transactions markers end; returns the original batch if a client
    retried one.
    """
    producers = plog._producer_state
    position = 0
    for index, fields in enumerate(checked):
        at = position
        position += LOG_OVERHEAD + fields[1]
        if fields[9] <= NO_PRODUCER_ID:  # no producer id: neither idempotent nor txn
            continue
        # Parsed again: the offsets and timestamps were just rewritten.
        if isinstance(stamped, list):
            batch = RecordBatch.parse(stamped[index])
        else:
            batch = RecordBatch.parse(stamped, at)
        if origin is AppendOrigin.CLIENT:
            duplicate = producers.find_duplicate_batch(batch)
            if duplicate is not None:
                return duplicate
        info = infos.get(batch.producer_id)
        if info is None:
            info = producers.prepare_update(batch.producer_id, origin)
            infos[batch.producer_id] = info
        done = info.append(batch)
        if done is not None:
            completed.append(done)
    return None
