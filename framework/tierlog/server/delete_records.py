"""DeleteRecords: moving a partition's log start forward, on the leader, as a client asks."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import OffsetOutOfRangeError, error_code_of
from . import protocol as p
from .internal_topics import check_client_delete_records
from .request_validation import check_records_deletable

if TYPE_CHECKING:
    from .broker import Broker


def delete_records(broker: Broker, request: p.DeleteRecordsRequest) -> p.DeleteRecordsResponse:
    image = broker.controller.image()
    topics = []
    for topic in request.topics:
        results = []
        for part in topic.partitions:
            try:
                check_client_delete_records(topic.name)
                partition = broker.leader_partition(image, topic.name, part.partition_index)
                check_records_deletable(partition, broker.topic_config(image.topic(topic.name)))
                offset = part.offset
                if offset == -1:
                    offset = partition.high_watermark
                if offset < 0:
                    raise OffsetOutOfRangeError(f"cannot delete records before {offset}")
                low = partition.log.delete_records(offset)
                results.append(p.DeleteRecordsPartitionResult(part.partition_index, low))
            except Exception as err:
                results.append(
                    p.DeleteRecordsPartitionResult(
                        part.partition_index, error_code=error_code_of(err)
                    )
                )
        topics.append(p.DeleteRecordsTopicResult(topic.name, results))
    return p.DeleteRecordsResponse(topics)
