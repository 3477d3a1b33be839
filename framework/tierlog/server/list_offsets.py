"""ListOffsets: the offset for a time (or a special spec) in each partition this broker leads.

Nothing past what a consumer may fetch is answered; while the high watermark is not known yet
after a leadership change (KIP-207), LATEST and searches past the stale high watermark answer
OFFSET_NOT_AVAILABLE so the client retries. A search only the remote tier can answer runs as a
delayed remote lookup (``delayed_list_offsets.py``).
"""

from __future__ import annotations

import logging
from concurrent.futures import Future
from typing import TYPE_CHECKING

from ..errors import (
    OffsetNotAvailableError,
    RemoteStorageQueueFullError,
    ReplicaNotAvailableError,
    RequestTimedOutError,
    error_code_of,
)
from ..log import TimestampAndOffset
from . import protocol as p
from .delayed_list_offsets import (
    DelayedRemoteListOffsets,
    PendingRemoteLookup,
    with_list_offsets_results,
)
from .error_responses import NOT_READY_CODE
from .partition import Partition
from .request_validation import check_isolation_level

if TYPE_CHECKING:
    from .broker import Broker

log = logging.getLogger(__name__)


def list_offsets(broker: Broker, request: p.ListOffsetsRequest) -> p.ListOffsetsResponse:
    image = broker.controller.image()
    committed = request.isolation_level == p.IsolationLevel.READ_COMMITTED
    topics = []
    remote: list[PendingRemoteLookup] = []
    for topic_index, topic in enumerate(request.topics):
        results: list[p.ListOffsetsPartitionResponse] = []
        for part in topic.partitions:
            try:
                check_isolation_level(request.isolation_level)
                partition = broker.leader_partition(
                    image, topic.name, part.partition_index, part.current_leader_epoch
                )
                answer = _offset_for(broker, partition, part, committed, request.replica_id)
                if answer is None:
                    remote.append(
                        PendingRemoteLookup(topic_index, len(results), topic.name, partition, part)
                    )
                    answer = p.ListOffsetsPartitionResponse(part.partition_index)
                results.append(answer)
            except Exception as err:
                results.append(
                    p.ListOffsetsPartitionResponse(
                        part.partition_index, error_code=error_code_of(err)
                    )
                )
        topics.append(p.ListOffsetsTopicResponse(topic.name, results))
    response = p.ListOffsetsResponse(topics)
    if remote:
        return _remote_list_offsets(broker, response, remote, committed)
    return response


def _offset_for(
    broker: Broker,
    partition: Partition,
    part: p.ListOffsetsPartition,
    committed: bool,
    replica_id: int = p.CONSUMER_REPLICA_ID,
) -> p.ListOffsetsPartitionResponse | None:
    """The partition's answer, or None when only a remote lookup can give it."""
    plog = partition.log
    rlm = broker.remote_log_manager
    if rlm is not None and plog.config.remote_storage_enable and not rlm.is_ready(partition):
        return p.ListOffsetsPartitionResponse(part.partition_index, error_code=NOT_READY_CODE)
    fetchable = partition.last_stable_offset if committed else partition.high_watermark
    index = part.partition_index
    timestamp = part.timestamp

    def epoch_of(offset: int) -> int:
        epoch = plog.leader_epoch_cache.epoch_for_offset(offset)
        return p.UNKNOWN_EPOCH if epoch is None else epoch

    if timestamp == p.OffsetSpec.LATEST:
        # A follower resetting its fetch position needs the log end, as in Kafka.
        if replica_id >= 0:
            latest = plog.log_end_offset
        elif not partition.high_watermark_known:
            return p.ListOffsetsPartitionResponse(index, error_code=OffsetNotAvailableError.code)
        else:
            latest = fetchable
        return p.ListOffsetsPartitionResponse(
            index, offset=latest, leader_epoch=partition.leader_epoch
        )
    if timestamp == p.OffsetSpec.LATEST_TIERED:
        tiered = plog.highest_offset_in_remote_storage
        return p.ListOffsetsPartitionResponse(
            index, offset=tiered, leader_epoch=epoch_of(tiered) if tiered >= 0 else -1
        )
    if rlm is not None and rlm.needs_remote_search(partition, timestamp):
        return None
    return _timestamp_answer(partition, part, plog.offset_for_timestamp(timestamp), committed)


def _timestamp_answer(
    partition: Partition,
    part: p.ListOffsetsPartition,
    found: TimestampAndOffset | None,
    committed: bool,
) -> p.ListOffsetsPartitionResponse:
    """The answer for a record found by time; nothing past what a consumer may fetch."""
    fetchable = partition.last_stable_offset if committed else partition.high_watermark
    special = part.timestamp in (p.OffsetSpec.EARLIEST, p.OffsetSpec.EARLIEST_LOCAL)
    beyond = found is None or found.offset >= fetchable
    if not special and beyond and not partition.high_watermark_known:
        # Past a stale high watermark "nothing yet" may be a mistake: the client retries.
        return p.ListOffsetsPartitionResponse(
            part.partition_index, error_code=OffsetNotAvailableError.code
        )
    if found is None or (not special and found.offset >= fetchable):
        return p.ListOffsetsPartitionResponse(part.partition_index)
    return p.ListOffsetsPartitionResponse(
        part.partition_index,
        timestamp=found.timestamp,
        offset=found.offset,
        leader_epoch=p.UNKNOWN_EPOCH if found.leader_epoch is None else found.leader_epoch,
    )


def _remote_list_offsets(
    broker: Broker,
    response: p.ListOffsetsResponse,
    lookups: list[PendingRemoteLookup],
    committed: bool,
) -> p.ListOffsetsResponse:
    """Runs the remote lookups on the reader pool and waits for them, within bounds.

    The wait is ``remote.list.offsets.request.timeout.ms``, read now so a change applies to
    the next request (the request carries no timeout of its own). A lookup not done by then
    answers REQUEST_TIMED_OUT; one that failed answers its error; the others their offsets.
    """
    rlm = broker.remote_log_manager
    purgatory = broker.remote_list_offsets_purgatory
    assert rlm is not None and purgatory is not None
    results: dict[tuple[int, int], p.ListOffsetsPartitionResponse] = {}
    started: list[tuple[PendingRemoteLookup, Future[TimestampAndOffset | None]]] = []
    for lookup in lookups:
        try:
            future = rlm.async_offset_for_timestamp(lookup.partition, lookup.request.timestamp)
        except RemoteStorageQueueFullError as err:
            log.info("broker %d: %s", broker.broker_id, err)
            code = ReplicaNotAvailableError.code
            assert code is not None
            results[lookup.key] = p.ListOffsetsPartitionResponse(
                lookup.request.partition_index, error_code=code
            )
            continue
        started.append((lookup, future))
    if started:
        token = object()
        delayed = DelayedRemoteListOffsets(
            broker.config.get_int("remote.list.offsets.request.timeout.ms"),
            [future for _, future in started],
            rlm.expired_list_offsets.mark,
        )
        for _, future in started:
            future.add_done_callback(lambda _f: purgatory.check_and_complete(token))
        purgatory.try_complete_else_watch(delayed, [token])
        delayed.wait()
        for lookup, future in started:
            results[lookup.key] = _remote_lookup_answer(broker, lookup, future, committed)
    return with_list_offsets_results(response, results)


def _remote_lookup_answer(
    broker: Broker,
    lookup: PendingRemoteLookup,
    future: Future[TimestampAndOffset | None],
    committed: bool,
) -> p.ListOffsetsPartitionResponse:
    index = lookup.request.partition_index
    if future.cancelled() or not future.done():
        code = RequestTimedOutError.code
        assert code is not None
        return p.ListOffsetsPartitionResponse(index, error_code=code)
    error = future.exception()
    if error is not None:
        return p.ListOffsetsPartitionResponse(index, error_code=error_code_of(error))
    try:
        # Leadership may have moved while the lookup waited: answer as the request would now.
        partition = broker.leader_partition(
            broker.controller.image(), lookup.topic, index, lookup.request.current_leader_epoch
        )
    except Exception as err:
        return p.ListOffsetsPartitionResponse(index, error_code=error_code_of(err))
    return _timestamp_answer(partition, lookup.request, future.result(), committed)
