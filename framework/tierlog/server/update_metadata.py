"""The cluster image as an UpdateMetadata request, and back.

In a multi-process cluster the controller pushes its whole image to every broker after each
change, as Kafka's ZooKeeper-mode controller does; a broker rebuilds from it exactly the
:class:`ClusterImage` the controller holds, so every reader of ``image()`` works unchanged.
Kafka's fields carry topics, partitions and live brokers; tierlog's own (tagged on the wire)
carry what Kafka's brokers read from ZooKeeper instead: the cluster id, configs and the
replicas a reassignment adds and removes.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from ..errors import InvalidRequestError, TierlogError, error_code_of
from ..wire.endpoints import Endpoint
from . import protocol as p
from .image import ClusterImage, PartitionRegistration, TopicImage

if TYPE_CHECKING:
    from .broker import Broker

log = logging.getLogger(__name__)

#: Kafka's ids of the security protocols (``SecurityProtocol.java``).
SECURITY_PROTOCOL_IDS: Mapping[str, int] = {
    "PLAINTEXT": 0,
    "SSL": 1,
    "SASL_PLAINTEXT": 2,
    "SASL_SSL": 3,
}
_SECURITY_PROTOCOL_NAMES = {v: k for k, v in SECURITY_PROTOCOL_IDS.items()}


def update_metadata_request(
    image: ClusterImage,
    endpoints: Mapping[int, Sequence[Endpoint]],
    *,
    broker_epoch: int = -1,
) -> p.UpdateMetadataRequest:
    """``image`` whole, with the listeners of each live broker (one it has none for is sent
    without endpoints); ``broker_epoch`` is the receiver's, as the controller knows it."""
    live = image.live_brokers
    topic_states = [
        p.UpdateMetadataTopicState(
            topic_name=topic.name,
            topic_id=topic.topic_id,
            partition_states=[
                p.UpdateMetadataPartitionState(
                    partition_index=index,
                    controller_epoch=image.controller_epoch,
                    leader=reg.leader,
                    leader_epoch=reg.leader_epoch,
                    isr=reg.isr,
                    zk_version=reg.partition_epoch,
                    replicas=reg.replicas,
                    offline_replicas=[b for b in reg.replicas if b not in live],
                    adding_replicas=reg.adding_replicas,
                    removing_replicas=reg.removing_replicas,
                )
                for index, reg in enumerate(topic.partitions)
            ],
            topic_configs=_configs(topic.configs),
        )
        for topic in image.topics.values()
    ]
    brokers = [
        p.UpdateMetadataBroker(
            id=broker_id,
            endpoints=[
                p.UpdateMetadataEndpoint(
                    port=e.port,
                    host=e.host,
                    listener=e.name,
                    security_protocol=_protocol_id(e.security_protocol),
                )
                for e in endpoints.get(broker_id, ())
            ],
        )
        for broker_id in sorted(live)
    ]
    return p.UpdateMetadataRequest(
        controller_id=image.controller_id,
        controller_epoch=image.controller_epoch,
        topic_states=topic_states,
        live_brokers=brokers,
        broker_epoch=broker_epoch,
        cluster_id=image.cluster_id,
        broker_configs=[
            p.UpdateMetadataBrokerConfigs(resource, _configs(configs))
            for resource, configs in image.broker_configs.items()
        ],
    )


def image_from_update_metadata(
    request: p.UpdateMetadataRequest,
) -> tuple[ClusterImage, dict[int, tuple[Endpoint, ...]]]:
    """The image the request carries, and each live broker's endpoints.

    :raises InvalidRequestError: a topic whose partition indexes are not 0..n-1, a topic named
        twice, or an unknown security protocol id.
    """
    topics: dict[str, TopicImage] = {}
    for state in request.topic_states:
        if state.topic_name in topics:
            raise InvalidRequestError(f"UpdateMetadata names topic {state.topic_name} twice")
        ordered = sorted(state.partition_states, key=lambda s: s.partition_index)
        if [s.partition_index for s in ordered] != list(range(len(ordered))):
            raise InvalidRequestError(
                f"UpdateMetadata: the partitions of {state.topic_name} are not 0..n-1: "
                f"{[s.partition_index for s in ordered]}"
            )
        topics[state.topic_name] = TopicImage(
            name=state.topic_name,
            topic_id=state.topic_id,
            partitions=tuple(
                PartitionRegistration(
                    replicas=s.replicas,
                    isr=s.isr,
                    leader=s.leader,
                    leader_epoch=s.leader_epoch,
                    partition_epoch=s.zk_version,
                    adding_replicas=s.adding_replicas,
                    removing_replicas=s.removing_replicas,
                )
                for s in ordered
            ),
            configs={c.name: c.value for c in state.topic_configs},
        )
    endpoints = {
        broker.id: tuple(
            Endpoint(e.listener, e.host, e.port, _protocol_name(e.security_protocol))
            for e in broker.endpoints
        )
        for broker in request.live_brokers
    }
    image = ClusterImage(
        cluster_id=request.cluster_id or "",
        controller_id=request.controller_id,
        controller_epoch=request.controller_epoch,
        live_brokers=frozenset(endpoints),
        topics=topics,
        broker_configs={
            entry.resource_name: {c.name: c.value for c in entry.configs}
            for entry in request.broker_configs
        },
    )
    return image, endpoints


def _configs(configs: Mapping[str, str]) -> list[p.UpdateMetadataConfig]:
    return [p.UpdateMetadataConfig(name, value) for name, value in configs.items()]


def _protocol_id(name: str) -> int:
    try:
        return SECURITY_PROTOCOL_IDS[name]
    except KeyError:
        raise InvalidRequestError(f"unknown security protocol {name!r}") from None


def _protocol_name(protocol_id: int) -> str:
    try:
        return _SECURITY_PROTOCOL_NAMES[protocol_id]
    except KeyError:
        raise InvalidRequestError(f"unknown security protocol id {protocol_id}") from None


def receive_update_metadata(
    broker: Broker, request: p.UpdateMetadataRequest
) -> p.UpdateMetadataResponse:
    """Hands the pushed image to the broker's ``metadata_receiver``; a broker without one (an
    embedded cluster's, which reads its controller's image in-process) refuses it with
    INVALID_REQUEST. The receiver may answer with a response, or return None for success;
    an error it raises is answered with its code."""
    receiver = broker.metadata_receiver
    if receiver is None:
        log.info(
            "broker %d refuses UpdateMetadata from controller %d: it takes its metadata from "
            "the controller in its own process",
            broker.broker_id,
            request.controller_id,
        )
        return p.UpdateMetadataResponse(error_code=InvalidRequestError.code or 42)
    try:
        answer = receiver(request)
    except TierlogError as err:
        return p.UpdateMetadataResponse(error_code=error_code_of(err))
    return answer if isinstance(answer, p.UpdateMetadataResponse) else p.UpdateMetadataResponse()
