"""Metadata: the live brokers and the topics' partitions, leaders and replicas, as the cluster
image has them; a topic named and unknown may be created (``auto.create.topics.enable``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import (
    LeaderNotAvailableError,
    TierlogError,
    UnknownTopicOrPartitionError,
    error_code_of,
)
from . import protocol as p
from .image import ClusterImage, TopicImage
from .internal_topics import is_internal
from .topics import validate_topic_name

if TYPE_CHECKING:
    from .broker import Broker

BROKER_HOST = "in-process"
"""The host an embedded broker reports in Metadata; a network front end reports its own."""


def broker_endpoints(
    broker: Broker, image: ClusterImage | None = None
) -> tuple[p.MetadataResponseBroker, ...]:
    """The live brokers as clients should reach them, for Metadata and DescribeCluster: the
    one place a network front end changes to report its listeners' hosts and ports."""
    if image is None:
        image = broker.controller.image()
    return tuple(p.MetadataResponseBroker(b, BROKER_HOST, 0) for b in sorted(image.live_brokers))


def metadata(broker: Broker, request: p.MetadataRequest) -> p.MetadataResponse:
    image = broker.controller.image()
    results = []
    if request.topics is None:
        results = [_topic_metadata(image, t) for _, t in sorted(image.topics.items())]
    else:
        for wanted in request.topics:
            results.append(_requested_topic_metadata(broker, image, request, wanted))
            image = broker.controller.image()
    return p.MetadataResponse(
        brokers=broker_endpoints(broker, image),
        cluster_id=image.cluster_id,
        controller_id=image.controller_id,
        topics=results,
    )


def _requested_topic_metadata(
    broker: Broker, image: ClusterImage, request: p.MetadataRequest, wanted: p.MetadataRequestTopic
) -> p.MetadataResponseTopic:
    unknown = UnknownTopicOrPartitionError.code or -1
    if wanted.name is None:
        found = image.topic_by_id(wanted.topic_id)
        if found is None:
            return p.MetadataResponseTopic(None, unknown, wanted.topic_id)
        return _topic_metadata(image, found)
    try:
        validate_topic_name(wanted.name, internal_allowed=True)
    except TierlogError as err:
        return p.MetadataResponseTopic(wanted.name, error_code_of(err))
    found = image.topic(wanted.name)
    if found is None:
        if (
            request.allow_auto_topic_creation
            and broker.config.get_bool("auto.create.topics.enable")
            and not is_internal(wanted.name)
        ):
            try:
                found = broker.controller.create_topic(wanted.name)
            except TierlogError as err:
                return p.MetadataResponseTopic(wanted.name, error_code_of(err))
            return _topic_metadata(broker.controller.image(), found)
        return p.MetadataResponseTopic(wanted.name, unknown)
    return _topic_metadata(image, found)


def _topic_metadata(image: ClusterImage, topic: TopicImage) -> p.MetadataResponseTopic:
    partitions = []
    for index, reg in enumerate(topic.partitions):
        partitions.append(
            p.MetadataResponsePartition(
                index,
                error_code=(
                    LeaderNotAvailableError.code or -1 if reg.leader == p.NO_LEADER else p.NONE
                ),
                leader_id=reg.leader,
                leader_epoch=reg.leader_epoch,
                replica_nodes=reg.replicas,
                isr_nodes=reg.isr,
                offline_replicas=[r for r in reg.replicas if r not in image.live_brokers],
            )
        )
    return p.MetadataResponseTopic(
        topic.name,
        topic_id=topic.topic_id,
        is_internal=is_internal(topic.name),
        partitions=partitions,
    )
