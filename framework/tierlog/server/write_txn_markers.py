"""WriteTxnMarkers: the commit or abort markers a transaction coordinator writes to the
partitions of a finished transaction."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ..errors import InvalidRequestError, error_code_of
from ..log import AppendOrigin
from ..records import ControlType, build_control_batch
from . import protocol as p
from .error_responses import txn_marker_error
from .request_validation import check_txn_marker

if TYPE_CHECKING:
    from .broker import Broker


def write_txn_markers(
    broker: Broker, request: p.WriteTxnMarkersRequest
) -> p.WriteTxnMarkersResponse:
    image = broker.controller.image()
    markers = []
    for marker in request.markers:
        try:
            check_txn_marker(marker)
        except InvalidRequestError as err:
            markers.append(txn_marker_error(marker, err.code or -1))
            continue
        control = ControlType.COMMIT if marker.transaction_result else ControlType.ABORT
        records = build_control_batch(
            control,
            producer_id=marker.producer_id,
            producer_epoch=marker.producer_epoch,
            timestamp=int(time.time() * 1000),
            coordinator_epoch=marker.coordinator_epoch,
        )
        topics = []
        for topic in marker.topics:
            results = []
            for index in topic.partition_indexes:
                try:
                    partition = broker.leader_partition(image, topic.name, index)
                    partition.append_records_to_leader(records, AppendOrigin.COORDINATOR)
                    broker.on_append(partition.topic_partition)
                    results.append(p.WritableTxnMarkerPartitionResult(index))
                except Exception as err:
                    results.append(p.WritableTxnMarkerPartitionResult(index, error_code_of(err)))
            topics.append(p.WritableTxnMarkerTopicResult(topic.name, results))
        markers.append(p.WritableTxnMarkerResult(marker.producer_id, topics))
    return p.WriteTxnMarkersResponse(markers)
