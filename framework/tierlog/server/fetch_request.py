"""Fetch as the broker answers it: which topics a request names, what a follower's fetch says
about its log, and the waits for local data (``min_bytes``) or remote reads.

The reading itself, under the request's byte budget, is ``fetch.py``'s.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import Future
from typing import TYPE_CHECKING

import attrs

from ..errors import (
    RemoteStorageQueueFullError,
    ReplicaNotAvailableError,
    TierlogError,
    UnknownTopicOrPartitionError,
    error_code_of,
)
from ..model import ZERO_UUID, TopicPartition
from ..remote import RemoteFetchResult
from . import protocol as p
from .error_responses import NOT_READY_CODE
from .fetch import (
    DelayedFetch,
    DelayedRemoteFetch,
    FetchOutcome,
    ResolvedFetchTopic,
    partition_data,
    read_partitions,
    with_partition_results,
)
from .image import ClusterImage
from .partition import Partition
from .request_validation import check_fetch_request, check_fetching_replica, fetch_partition_error
from .topics import validate_topic_name

if TYPE_CHECKING:
    from .broker import Broker

log = logging.getLogger(__name__)

#: How often a fetch held for remote metadata looks again at whether it is ready.
_READY_POLL_S = 0.02


def fetch(broker: Broker, request: p.FetchRequest) -> p.FetchResponse:
    try:
        check_fetch_request(request)
    except TierlogError as err:
        return p.FetchResponse((), error_code=error_code_of(err))
    if request.replica_id < 0:
        # A consumer's response is capped by the broker too, as in Kafka.
        cap = broker.config.get_int("fetch.max.bytes")
        if request.max_bytes > cap:
            request = attrs.evolve(request, max_bytes=cap)
    image = broker.controller.image()
    topics = [_resolve_fetch_topic(image, topic) for topic in request.topics]
    if request.replica_id >= 0:
        _record_follower_fetch(broker, request.replica_id, topics)

    def lookup(tp: TopicPartition, fetch: p.FetchPartition) -> Partition:
        # The latest image: a parked fetch must see a topic deleted while it waited.
        partition = broker.leader_partition(
            broker.controller.image(), tp.topic, tp.partition, fetch.current_leader_epoch
        )
        check_fetching_replica(partition, request.replica_id)
        return partition

    rlm = broker.remote_log_manager
    in_remote = None if rlm is None else rlm.in_remote_range
    outcome = read_partitions(request, topics, lookup, in_remote)
    if outcome.remote_reads and _hold_until_ready(broker, request, outcome):
        outcome = read_partitions(request, topics, lookup, in_remote)
    if outcome.remote_reads:
        return _remote_fetch(broker, outcome)
    keys = [
        TopicPartition(t.name, f.partition)
        for t in topics
        if t.error_code == p.NONE
        for f in t.partitions
        if fetch_partition_error(f) == p.NONE
    ]
    if (
        request.max_wait_ms <= 0
        or outcome.bytes_read >= request.min_bytes
        or outcome.has_error
        or not keys
    ):
        return outcome.response
    purgatory = broker.fetch_purgatory
    assert purgatory is not None
    replica_id = request.replica_id
    delayed = DelayedFetch(
        min(request.max_wait_ms, broker.config.get_int("request.timeout.ms")),
        request.min_bytes,
        lambda: read_partitions(request, topics, lookup),
        None
        if replica_id < 0
        else lambda: replica_id not in broker.controller.image().live_brokers,
    )
    purgatory.try_complete_else_watch(delayed, keys)
    delayed.wait()
    return delayed.response


def _hold_until_ready(broker: Broker, request: p.FetchRequest, outcome: FetchOutcome) -> bool:
    """A fetch with nothing to return but partitions whose remote metadata is still loading
    waits up to its ``max_wait_ms`` for them, instead of answering REPLICA_NOT_AVAILABLE at once:
    clients retry that code immediately, so answering at once makes each consumer a retry storm
    (KAFKA-19599). Returns whether it waited (the fetch must then read afresh).

    A fetch that has data for some partition is answered now, with the others not ready: local
    partitions keep flowing while a remote one loads.
    """
    rlm = broker.remote_log_manager
    assert rlm is not None
    waiting = [r.partition for r in outcome.remote_reads if not rlm.is_ready(r.partition)]
    if not waiting or outcome.bytes_read > 0 or request.max_wait_ms <= 0:
        return False
    budget_s = min(request.max_wait_ms, broker.config.get_int("request.timeout.ms")) / 1000.0
    deadline = time.monotonic() + budget_s
    while broker.serving and not all(rlm.is_ready(partition) for partition in waiting):
        left = deadline - time.monotonic()
        if left <= 0:
            break
        time.sleep(min(_READY_POLL_S, left))
    return True


def _record_follower_fetch(
    broker: Broker, replica_id: int, topics: list[ResolvedFetchTopic]
) -> None:
    """A follower's fetch offset is its log end: track it, move the HW, grow the ISR."""
    for topic in topics:
        if topic.error_code != p.NONE:
            continue
        for fetch in topic.partitions:
            if fetch_partition_error(fetch) != p.NONE:
                continue
            tp = TopicPartition(topic.name, fetch.partition)
            partition = broker.partition(tp)
            if partition is None or not partition.is_leader:
                continue
            if fetch.current_leader_epoch not in (p.UNKNOWN_EPOCH, partition.leader_epoch):
                continue
            update = partition.update_follower_fetch_state(replica_id, fetch.fetch_offset)
            if update.isr_change is not None:
                broker.alter_isr(partition, update.isr_change)
            if update.high_watermark_changed:
                broker.on_append(tp)


def _remote_fetch(broker: Broker, outcome: FetchOutcome) -> p.FetchResponse:
    """Reads the remote partitions on the reader pool and waits for them, within bounds.

    The wait is ``remote.fetch.max.wait.ms`` (read now, so a change applies to the next
    fetch); a read not done by then is dropped and its partition answered empty.
    """
    rlm = broker.remote_log_manager
    purgatory = broker.remote_fetch_purgatory
    assert rlm is not None and purgatory is not None
    results: dict[tuple[int, int], p.FetchPartitionData] = {}
    reads = []
    for pending in outcome.remote_reads:
        key = (pending.topic_index, pending.partition_index)
        index = outcome.response.responses[key[0]].partitions[key[1]].partition_index
        if not rlm.is_ready(pending.partition):
            results[key] = p.FetchPartitionData(index, error_code=NOT_READY_CODE)
            continue
        if rlm.fetch_quota.throttle_time_ms() > 0:
            continue  # over the remote fetch quota: answered empty, retried by the client
        try:
            future = rlm.async_read(
                pending.partition,
                pending.fetch_offset,
                pending.max_bytes,
                min_one_message=pending.min_one_message,
                committed=pending.committed,
            )
        except RemoteStorageQueueFullError as err:
            log.info("broker %d: %s", broker.broker_id, err)
            code = ReplicaNotAvailableError.code
            assert code is not None
            results[key] = p.FetchPartitionData(index, error_code=code)
            continue
        reads.append((key, index, pending, future))
    if reads:
        token = object()
        futures: list[Future[RemoteFetchResult]] = [read[3] for read in reads]
        delayed = DelayedRemoteFetch(
            min(
                broker.config.get_int("remote.fetch.max.wait.ms"),
                broker.config.get_int("request.timeout.ms"),
            ),
            list(futures),  # type: ignore[arg-type]
            rlm.expired_fetches.mark,
        )
        for future in futures:
            future.add_done_callback(lambda _f: purgatory.check_and_complete(token))
        purgatory.try_complete_else_watch(delayed, [token])
        delayed.wait()
        for key, index, pending, future in reads:
            if future.cancelled() or not future.done():
                continue
            error = future.exception()
            if error is not None:
                results[key] = p.FetchPartitionData(index, error_code=error_code_of(error))
            else:
                read = future.result()
                results[key] = partition_data(
                    index, pending.partition, read.records, read.aborted_transactions
                )
    return with_partition_results(outcome.response, results)


def _resolve_fetch_topic(image: ClusterImage, topic: p.FetchTopic) -> ResolvedFetchTopic:
    unknown = UnknownTopicOrPartitionError.code or -1
    if topic.topic_id != ZERO_UUID:
        found = image.topic_by_id(topic.topic_id)
        if found is None or (topic.topic and topic.topic != found.name):
            return ResolvedFetchTopic(topic.topic, topic.topic_id, topic.partitions, unknown)
        return ResolvedFetchTopic(found.name, found.topic_id, topic.partitions)
    try:
        validate_topic_name(topic.topic, internal_allowed=True)
    except TierlogError as err:
        return ResolvedFetchTopic(topic.topic, ZERO_UUID, topic.partitions, error_code_of(err))
    found = image.topic(topic.topic)
    if found is None:
        return ResolvedFetchTopic(topic.topic, ZERO_UUID, topic.partitions, unknown)
    return ResolvedFetchTopic(found.name, found.topic_id, topic.partitions)
