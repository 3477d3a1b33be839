"""The requests a broker answers for the controller running in its process.

In a multi-process cluster one broker at a time runs the controller
(``broker.active_controller``); brokers send it AlterPartition, AllocateProducerIds and
ControlledShutdown over the wire. Any other broker answers NOT_CONTROLLER, and the sender
looks for the controller again, as Kafka's brokers do.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..errors import (
    NotControllerError,
    StaleBrokerEpochError,
    TierlogError,
    UnknownTopicIdError,
    error_code_of,
)
from ..model import TopicPartition
from . import protocol as p
from .image import IsrChange, PartitionRegistration

if TYPE_CHECKING:
    from .broker import Broker
    from .controller import Controller

log = logging.getLogger(__name__)

_NOT_CONTROLLER = NotControllerError.code or 41
_UNKNOWN_TOPIC_ID = UnknownTopicIdError.code or 100
_STALE_BROKER_EPOCH = StaleBrokerEpochError.code or 77


def _stale(controller: Controller, broker_id: int, broker_epoch: int) -> bool:
    """A request from an earlier life of ``broker_id`` (KAFKA-7235): its epoch is not the one
    the broker registered with now. -1 (unknown to the sender or the controller) passes."""
    registered = controller.live_broker_epochs().get(broker_id, -1)
    stale = broker_epoch != -1 and registered != -1 and broker_epoch != registered
    if stale:
        log.info(
            "refusing a request of broker %d from epoch %d (registered: %d)",
            broker_id,
            broker_epoch,
            registered,
        )
    return stale


def _unnamed_registration(controller: Controller, broker_id: int, broker_epoch: int) -> bool:
    """A ControlledShutdown ends one registration, so it must name it: without an epoch it
    could come from a process that never registered (a second broker given the same
    broker.id) and would take the live holder of that id out of the cluster."""
    registered = controller.live_broker_epochs().get(broker_id, -1)
    if broker_epoch == -1 and registered != -1:
        log.info(
            "refusing a ControlledShutdown of broker %d without its epoch (registered: %d)",
            broker_id,
            registered,
        )
        return True
    return False


def alter_partition(broker: Broker, request: p.AlterPartitionRequest) -> p.AlterPartitionResponse:
    """Every partition's ISR change in one commit, each answered on its own: the new
    registration, or the error (UNKNOWN_TOPIC_ID, FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION,
    NOT_LEADER_OR_FOLLOWER...)."""
    controller = broker.active_controller
    if controller is None:
        return p.AlterPartitionResponse(error_code=_NOT_CONTROLLER)
    if _stale(controller, request.broker_id, request.broker_epoch):
        return p.AlterPartitionResponse(error_code=_STALE_BROKER_EPOCH)
    image = controller.image()
    changes: dict[TopicPartition, IsrChange] = {}
    for topic in request.topics:
        found = image.topic_by_id(topic.topic_id)
        for wanted in topic.partitions:
            if found is not None:
                changes[TopicPartition(found.name, wanted.partition_index)] = IsrChange(
                    wanted.leader_epoch,
                    wanted.partition_epoch,
                    tuple(member.broker_id for member in wanted.new_isr_with_epochs),
                )
    answers = controller.alter_partitions(request.broker_id, changes)
    topics = []
    for topic in request.topics:
        found = image.topic_by_id(topic.topic_id)
        results = []
        for wanted in topic.partitions:
            if found is None:
                results.append(
                    p.AlterPartitionPartitionResult(wanted.partition_index, _UNKNOWN_TOPIC_ID)
                )
                continue
            tp = TopicPartition(found.name, wanted.partition_index)
            results.append(_alter_partition_result(tp, request.broker_id, answers[tp]))
        topics.append(p.AlterPartitionTopicResult(topic.topic_id, results))
    return p.AlterPartitionResponse(topics=topics)


def _alter_partition_result(
    tp: TopicPartition, broker_id: int, answer: PartitionRegistration | TierlogError
) -> p.AlterPartitionPartitionResult:
    if isinstance(answer, TierlogError):
        log.info("AlterPartition of %s from broker %d refused: %s", tp, broker_id, answer)
        return p.AlterPartitionPartitionResult(tp.partition, error_code_of(answer))
    return p.AlterPartitionPartitionResult(
        tp.partition,
        leader_id=answer.leader,
        leader_epoch=answer.leader_epoch,
        isr=answer.isr,
        partition_epoch=answer.partition_epoch,
    )


def allocate_producer_ids(
    broker: Broker, request: p.AllocateProducerIdsRequest
) -> p.AllocateProducerIdsResponse:
    controller = broker.active_controller
    if controller is None:
        return p.AllocateProducerIdsResponse(error_code=_NOT_CONTROLLER)
    if _stale(controller, request.broker_id, request.broker_epoch):
        return p.AllocateProducerIdsResponse(error_code=_STALE_BROKER_EPOCH)
    try:
        block = controller.allocate_producer_ids(request.broker_id)
    except TierlogError as err:
        return p.AllocateProducerIdsResponse(error_code=error_code_of(err))
    return p.AllocateProducerIdsResponse(
        producer_id_start=block.first_producer_id, producer_id_len=block.size
    )


def controlled_shutdown(
    broker: Broker, request: p.ControlledShutdownRequest
) -> p.ControlledShutdownResponse:
    """Takes the broker out of the cluster (out of every ISR, its leaderships moved) and
    answers with the partitions it still leads: those with no other replica to lead them."""
    controller = broker.active_controller
    if controller is None:
        return p.ControlledShutdownResponse(error_code=_NOT_CONTROLLER)
    if _stale(controller, request.broker_id, request.broker_epoch) or _unnamed_registration(
        controller, request.broker_id, request.broker_epoch
    ):
        return p.ControlledShutdownResponse(error_code=_STALE_BROKER_EPOCH)
    try:
        controller.unregister_broker(request.broker_id)
    except TierlogError as err:
        return p.ControlledShutdownResponse(error_code=error_code_of(err))
    remaining = [
        p.RemainingPartition(topic.name, index)
        for topic in controller.image().topics.values()
        for index, reg in enumerate(topic.partitions)
        if reg.leader == request.broker_id
    ]
    return p.ControlledShutdownResponse(remaining_partitions=remaining)
