"""Kafka message schemas that the pinned codec does not ship, in Kafka's JSON schema format.

kafka-python builds a message class from ``<Name>.json`` in the package it is told to load
from; these files describe the wire layout of the APIs tierlog serves beyond that codec's set
(the KIP-848 consumer group APIs, and the inter-broker APIs of a multi-process cluster),
version for version as Kafka 3.9 defines them. UpdateMetadata also carries tierlog's own
tagged fields (tags 100 and up), which a Kafka broker skips as unknown.
"""

from __future__ import annotations

import warnings

with warnings.catch_warnings():
    # The codec reads schema files with importlib's deprecated read_text.
    warnings.filterwarnings("ignore", r"(read|open)_text is deprecated", DeprecationWarning)
    from kafka.protocol.api_message import ApiMessage

    class ConsumerGroupHeartbeatRequest(ApiMessage, load_json=__name__):  # type: ignore[misc,call-arg]
        pass

    class ConsumerGroupHeartbeatResponse(ApiMessage, load_json=__name__):  # type: ignore[misc,call-arg]
        pass

    class ConsumerGroupDescribeRequest(ApiMessage, load_json=__name__):  # type: ignore[misc,call-arg]
        pass

    class ConsumerGroupDescribeResponse(ApiMessage, load_json=__name__):  # type: ignore[misc,call-arg]
        pass

    class LeaderAndIsrRequest(ApiMessage, load_json=__name__):  # type: ignore[misc,call-arg]
        pass

    class LeaderAndIsrResponse(ApiMessage, load_json=__name__):  # type: ignore[misc,call-arg]
        pass

    class StopReplicaRequest(ApiMessage, load_json=__name__):  # type: ignore[misc,call-arg]
        pass

    class StopReplicaResponse(ApiMessage, load_json=__name__):  # type: ignore[misc,call-arg]
        pass

    class UpdateMetadataRequest(ApiMessage, load_json=__name__):  # type: ignore[misc,call-arg]
        pass

    class UpdateMetadataResponse(ApiMessage, load_json=__name__):  # type: ignore[misc,call-arg]
        pass

    class ControlledShutdownRequest(ApiMessage, load_json=__name__):  # type: ignore[misc,call-arg]
        pass

    class ControlledShutdownResponse(ApiMessage, load_json=__name__):  # type: ignore[misc,call-arg]
        pass

    class AlterPartitionRequest(ApiMessage, load_json=__name__):  # type: ignore[misc,call-arg]
        pass

    class AlterPartitionResponse(ApiMessage, load_json=__name__):  # type: ignore[misc,call-arg]
        pass

    class AllocateProducerIdsRequest(ApiMessage, load_json=__name__):  # type: ignore[misc,call-arg]
        pass

    class AllocateProducerIdsResponse(ApiMessage, load_json=__name__):  # type: ignore[misc,call-arg]
        pass
