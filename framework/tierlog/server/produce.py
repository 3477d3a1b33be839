"""Produce: appending to the partitions this broker leads, and acks=all waits.

Each partition is appended on its own and answered with its own error code. With acks=-1 the
request refuses a partition whose ISR is below ``min.insync.replicas`` before appending, then
waits in the produce purgatory until the ISR has what it appended (or ``timeout_ms`` passes).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from ..errors import InvalidRequiredAcksError, NotEnoughReplicasError, TierlogError, error_code_of
from ..model import TopicPartition
from ..records.validation import check_produce_partition_data
from . import protocol as p
from .delayed_produce import DelayedProduce, PendingAck
from .error_responses import error_message
from .image import ClusterImage
from .internal_topics import check_client_append
from .partition import Partition

if TYPE_CHECKING:
    from .broker import Broker


def _record_errors(err: BaseException) -> list[p.BatchIndexAndErrorMessage]:
    """The records a refused batch was refused for, as a produce answer lists them."""
    if not isinstance(err, TierlogError):
        return []
    return [p.BatchIndexAndErrorMessage(e.batch_index, e.message) for e in err.record_errors]


def produce(
    broker: Broker, request: p.ProduceRequest, *, internal_topics_allowed: bool = False
) -> p.ProduceResponse:
    image = broker.controller.image()
    appended: list[TopicPartition] = []
    topics: list[p.TopicProduceResponse] = []
    waits: dict[tuple[int, int], PendingAck] = {}
    for topic in request.topic_data:
        results: list[p.PartitionProduceResponse] = []
        for data in topic.partition_data:
            minimum = 1
            try:
                if request.acks not in (p.Acks.NONE, p.Acks.LEADER, p.Acks.ALL):
                    raise InvalidRequiredAcksError(f"acks must be 0, 1 or -1, got {request.acks}")
                if not internal_topics_allowed:
                    check_client_append(topic.name)
                partition = broker.leader_partition(image, topic.name, data.index)
                check_produce_partition_data(data.records)
                if request.acks == p.Acks.ALL:
                    minimum = _check_min_insync(broker, partition, image)
                info = partition.append_records_to_leader(data.records)
                appended.append(partition.topic_partition)
                if request.acks == p.Acks.ALL:
                    waits[(len(topics), len(results))] = PendingAck(
                        partition, partition.leader_epoch, info.last_offset + 1, minimum
                    )
                results.append(
                    p.PartitionProduceResponse(
                        data.index,
                        base_offset=info.first_offset,
                        log_append_time_ms=info.log_append_time,
                        log_start_offset=info.log_start_offset,
                    )
                )
            except Exception as err:
                results.append(
                    p.PartitionProduceResponse(
                        data.index,
                        error_code=error_code_of(err),
                        record_errors=_record_errors(err),
                        error_message=error_message(err),
                    )
                )
        topics.append(p.TopicProduceResponse(topic.name, results))
    for tp in appended:
        broker.on_append(tp)
    if waits:
        _await_replication(broker, waits, request.timeout_ms)
        for (ti, ri), ack in waits.items():
            if ack.error_code is not None and ack.error_code != p.NONE:
                answers = list(topics[ti].partition_responses)
                answers[ri] = attrs.evolve(answers[ri], error_code=ack.error_code)
                topics[ti] = attrs.evolve(topics[ti], partition_responses=answers)
    if request.acks == p.Acks.NONE:
        return p.ProduceResponse(())
    return p.ProduceResponse(topics)


def _check_min_insync(broker: Broker, partition: Partition, image: ClusterImage) -> int:
    """Refuses an acks=all append to a partition with too small an ISR; returns the
    partition's ``min.insync.replicas``."""
    topic = image.topic(partition.topic_partition.topic)
    minimum = broker.topic_config(topic)["min.insync.replicas"]
    assert isinstance(minimum, int)
    isr = partition.in_sync_replicas()
    if len(isr) < minimum:
        raise NotEnoughReplicasError(
            f"{partition.topic_partition}: {len(isr)} in-sync replicas, "
            f"min.insync.replicas is {minimum}"
        )
    return minimum


def _await_replication(
    broker: Broker, waits: dict[tuple[int, int], PendingAck], timeout_ms: int
) -> None:
    """acks=-1: waits in the produce purgatory until the ISR has the data, at most
    ``timeout_ms``; each wait then holds its partition's error code."""
    purgatory = broker.produce_purgatory
    assert purgatory is not None
    pending = list(waits.values())
    delayed = DelayedProduce(timeout_ms, pending)
    keys = {ack.partition.topic_partition for ack in pending}
    purgatory.try_complete_else_watch(delayed, keys)
    delayed.wait()
