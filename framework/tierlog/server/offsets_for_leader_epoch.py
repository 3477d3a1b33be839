"""OffsetsForLeaderEpoch: where an epoch ended in the leader's log, so a replica or consumer
can find where its copy diverged and truncate there."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import error_code_of
from . import protocol as p

if TYPE_CHECKING:
    from .broker import Broker


def offsets_for_leader_epoch(
    broker: Broker, request: p.OffsetsForLeaderEpochRequest
) -> p.OffsetsForLeaderEpochResponse:
    image = broker.controller.image()
    topics = []
    for topic in request.topics:
        results = []
        for part in topic.partitions:
            try:
                partition = broker.leader_partition(
                    image, topic.topic, part.partition, part.current_leader_epoch
                )
                epoch, end = partition.log.end_offset_for_epoch(part.leader_epoch)
                results.append(p.EpochEndOffset(part.partition, leader_epoch=epoch, end_offset=end))
            except Exception as err:
                results.append(p.EpochEndOffset(part.partition, error_code=error_code_of(err)))
        topics.append(p.OffsetForLeaderTopicResult(topic.topic, results))
    return p.OffsetsForLeaderEpochResponse(topics)
