"""The response that answers a whole request with one error (Kafka's ``getErrorResponse``).

A handler answers per partition and never raises for what a request holds; if it does anyway,
the broker still owes the client an answer of the right type rather than an exception, so
every item of the request gets the error code (UNKNOWN_SERVER_ERROR for a bug). Responses with
a top-level error code carry it there as well.
"""

from __future__ import annotations

from ..errors import RemoteStorageNotReadyError
from . import protocol as p

NOT_READY_CODE = RemoteStorageNotReadyError.wire_fallback_code
"""What a partition whose remote metadata is still loading answers (REPLICA_NOT_AVAILABLE):
Kafka never gave KIP-1007's error a code, and every client already retries this one."""


def error_message(err: BaseException) -> str:
    """The message an error answer carries: the error's own, else its type's name."""
    return str(err) or type(err).__name__


def error_response(request: p.Request, code: int, message: str) -> p.Response:
    """``request`` answered with ``code`` for every topic, partition or resource it names."""
    match request:
        case p.ProduceRequest():
            return p.ProduceResponse(
                [
                    p.TopicProduceResponse(
                        t.name,
                        [
                            p.PartitionProduceResponse(d.index, code, error_message=message)
                            for d in t.partition_data
                        ],
                    )
                    for t in request.topic_data
                ]
            )
        case p.FetchRequest():
            return p.FetchResponse(
                [
                    p.FetchableTopicResponse(
                        t.topic,
                        [p.FetchPartitionData(f.partition, code) for f in t.partitions],
                        topic_id=t.topic_id,
                    )
                    for t in request.topics
                ],
                error_code=code,
            )
        case p.ListOffsetsRequest():
            return p.ListOffsetsResponse(
                [
                    p.ListOffsetsTopicResponse(
                        t.name,
                        [
                            p.ListOffsetsPartitionResponse(q.partition_index, code)
                            for q in t.partitions
                        ],
                    )
                    for t in request.topics
                ]
            )
        case p.MetadataRequest():
            return p.MetadataResponse(
                brokers=(),
                cluster_id=None,
                controller_id=p.NO_LEADER,
                topics=[
                    p.MetadataResponseTopic(t.name, code, t.topic_id) for t in request.topics or ()
                ],
            )
        case p.CreateTopicsRequest():
            return p.CreateTopicsResponse(
                [
                    p.CreatableTopicResult(t.name, error_code=code, error_message=message)
                    for t in request.topics
                ]
            )
        case p.DeleteTopicsRequest():
            return p.DeleteTopicsResponse(
                [
                    *(
                        p.DeletableTopicResult(name, error_code=code, error_message=message)
                        for name in request.topic_names
                    ),
                    *(
                        p.DeletableTopicResult(t.name, t.topic_id, code, message)
                        for t in request.topics
                    ),
                ]
            )
        case p.DeleteRecordsRequest():
            return p.DeleteRecordsResponse(
                [
                    p.DeleteRecordsTopicResult(
                        t.name,
                        [
                            p.DeleteRecordsPartitionResult(q.partition_index, error_code=code)
                            for q in t.partitions
                        ],
                    )
                    for t in request.topics
                ]
            )
        case p.InitProducerIdRequest():
            return p.InitProducerIdResponse(code)
        case p.OffsetsForLeaderEpochRequest():
            return p.OffsetsForLeaderEpochResponse(
                [
                    p.OffsetForLeaderTopicResult(
                        t.topic, [p.EpochEndOffset(q.partition, code) for q in t.partitions]
                    )
                    for t in request.topics
                ]
            )
        case p.WriteTxnMarkersRequest():
            return p.WriteTxnMarkersResponse([txn_marker_error(m, code) for m in request.markers])
        case p.DescribeConfigsRequest():
            return p.DescribeConfigsResponse(
                [
                    p.DescribeConfigsResult(r.resource_type, r.resource_name, code, message)
                    for r in request.resources
                ]
            )
        case p.CreatePartitionsRequest():
            return p.CreatePartitionsResponse(
                [p.CreatePartitionsTopicResult(t.name, code, message) for t in request.topics]
            )
        case p.ElectLeadersRequest():
            return p.ElectLeadersResponse(
                code,
                [
                    p.ReplicaElectionResult(
                        t.topic, [p.PartitionResult(i, code, message) for i in t.partitions]
                    )
                    for t in request.topic_partitions or ()
                ],
            )
        case p.IncrementalAlterConfigsRequest():
            return p.IncrementalAlterConfigsResponse(
                [
                    p.AlterConfigsResourceResponse(r.resource_type, r.resource_name, code, message)
                    for r in request.resources
                ]
            )
        case p.AlterPartitionReassignmentsRequest():
            return p.AlterPartitionReassignmentsResponse(
                [
                    p.ReassignableTopicResponse(
                        t.name,
                        [
                            p.ReassignablePartitionResponse(q.partition_index, code, message)
                            for q in t.partitions
                        ],
                    )
                    for t in request.topics
                ],
                error_code=code,
                error_message=message,
            )
        case p.ListPartitionReassignmentsRequest():
            return p.ListPartitionReassignmentsResponse((), code, message)
        case p.DescribeClusterRequest():
            return p.DescribeClusterResponse(code, message, request.endpoint_type)
        case p.LeaderAndIsrRequest():
            return p.LeaderAndIsrResponse(
                code,
                [
                    p.LeaderAndIsrPartitionError(s.topic_name, s.partition_index, code)
                    for s in request.partition_states
                ],
            )
        case p.StopReplicaRequest():
            return p.StopReplicaResponse(
                code,
                [
                    p.StopReplicaPartitionError(s.topic_name, s.partition_index, code)
                    for s in request.partition_states
                ],
            )
        case p.UpdateMetadataRequest():
            return p.UpdateMetadataResponse(code)
        case p.ControlledShutdownRequest():
            return p.ControlledShutdownResponse(code)
        case p.AllocateProducerIdsRequest():
            return p.AllocateProducerIdsResponse(code)
        case p.AlterPartitionRequest():
            return p.AlterPartitionResponse(
                code,
                [
                    p.AlterPartitionTopicResult(
                        t.topic_id,
                        [
                            p.AlterPartitionPartitionResult(q.partition_index, code)
                            for q in t.partitions
                        ],
                    )
                    for t in request.topics
                ],
            )


def txn_marker_error(marker: p.WritableTxnMarker, code: int) -> p.WritableTxnMarkerResult:
    """One transaction marker answered with ``code`` for each of its partitions."""
    return p.WritableTxnMarkerResult(
        marker.producer_id,
        [
            p.WritableTxnMarkerTopicResult(
                t.name, [p.WritableTxnMarkerPartitionResult(i, code) for i in t.partition_indexes]
            )
            for t in marker.topics
        ],
    )
