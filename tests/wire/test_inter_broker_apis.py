"""The inter-broker APIs over real sockets: LeaderAndIsr, StopReplica, UpdateMetadata from the
controller, AlterPartition, AllocateProducerIds, ControlledShutdown to it; hidden and refused
unless the broker is a node of a multi-process cluster; and the cluster image carried whole by
UpdateMetadata."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import pytest
from kafka.protocol.metadata.api_versions import ApiVersionsRequest
from tierlog.client import Admin, NewTopic
from tierlog.cluster import EmbeddedCluster
from tierlog.model import TopicPartition, Uuid
from tierlog.server import protocol as p
from tierlog.server.image import ClusterImage, PartitionRegistration, TopicImage
from tierlog.server.update_metadata import image_from_update_metadata, update_metadata_request
from tierlog.wire.codec import MESSAGES, from_wire, to_wire
from tierlog.wire.endpoints import Endpoint
from tierlog.wire.inter_broker_apis import (
    INTER_BROKER_VERSIONS,
    leader_and_isr_to_wire,
    stop_replica_to_wire,
    update_metadata_from_wire,
)

from .raw import RawClient

NONE = 0
NOT_LEADER_OR_FOLLOWER = 6
STALE_CONTROLLER_EPOCH = 11
NOT_CONTROLLER = 41
STALE_BROKER_EPOCH = 77
INVALID_REQUEST = 42
FENCED_LEADER_EPOCH = 74
INVALID_UPDATE_VERSION = 95
UNKNOWN_TOPIC_ID = 100


def _image() -> ClusterImage:
    """An image with every kind of content UpdateMetadata must carry."""
    return ClusterImage(
        cluster_id="Zq1u3QyKTtC8Wb1f3m3xVg",
        controller_id=2,
        controller_epoch=9,
        live_brokers=frozenset({1, 2, 3}),
        topics={
            "orders": TopicImage(
                "orders",
                Uuid(uuid.UUID("6a1d0c4e-7b7e-4a55-9d57-1c3f1f0a2b11").bytes),
                (
                    PartitionRegistration((1, 2, 3), (1, 2), 1, 4, 7),
                    PartitionRegistration((3, 4, 1, 2), (3, 1, 2), 3, 2, 11, (4,), (2,)),
                    PartitionRegistration((4,), (4,), p.NO_LEADER, 5, 6),
                ),
                {"remote.storage.enable": "true", "retention.ms": "600000"},
            ),
            "empty-configs": TopicImage(
                "empty-configs",
                Uuid(uuid.UUID("0b5e5c8e-2f00-4c5e-8a90-5d4a1a9e0c22").bytes),
                (PartitionRegistration((2,), (2,), 2),),
                {},
            ),
        },
        broker_configs={"": {"log.retention.ms": "1000"}, "2": {"num.io.threads": "4"}},
    )


_ENDPOINTS = {
    1: (Endpoint("PLAINTEXT", "10.0.0.1", 9092), Endpoint("INTERNAL", "broker-1", 9093)),
    2: (Endpoint("PLAINTEXT", "10.0.0.2", 9092),),
    3: (),
}


def _same_image(a: ClusterImage, b: ClusterImage) -> bool:
    """Equal in everything, topics and configs included (``ClusterImage``'s own ``==`` leaves
    its mappings out)."""

    def content(image: ClusterImage) -> Any:
        return (
            image,
            {name: (t, t.to_json()) for name, t in image.topics.items()},
            {k: dict(v) for k, v in image.broker_configs.items()},
        )

    return bool(content(a) == content(b))


def test_update_metadata_carries_the_whole_image() -> None:
    image = _image()
    request = update_metadata_request(image, _ENDPOINTS, broker_epoch=42)
    assert request.broker_epoch == 42
    offline = {
        s.partition_index: s.offline_replicas for s in request.topic_states[0].partition_states
    }
    assert offline == {0: (), 1: (4,), 2: (4,)}
    back, endpoints = image_from_update_metadata(request)
    assert _same_image(back, image)
    assert endpoints == {1: _ENDPOINTS[1], 2: _ENDPOINTS[2], 3: ()}


def test_update_metadata_carries_the_whole_image_through_the_wire_codec() -> None:
    image = _image()
    request = update_metadata_request(image, _ENDPOINTS)
    wire_class = MESSAGES[6][0]
    message = to_wire(request, wire_class)
    message.API_VERSION = 8
    message.with_header(correlation_id=7, client_id="controller")
    decoded = wire_class.decode(bytes(message.encode(header=True)), version=8, header=True)
    assert update_metadata_from_wire(decoded) == request
    back, endpoints = image_from_update_metadata(update_metadata_from_wire(decoded))
    assert _same_image(back, image)
    assert endpoints[1] == _ENDPOINTS[1]
    assert not _same_image(back, ClusterImage("other", 2, 9, frozenset({1, 2, 3}), {}))


def test_update_metadata_refuses_a_topic_with_a_gap_in_its_partitions() -> None:
    request = update_metadata_request(_image(), _ENDPOINTS)
    topic = request.topic_states[0]
    gapped = p.UpdateMetadataTopicState(
        topic.topic_name, topic.topic_id, topic.partition_states[1:], topic.topic_configs
    )
    broken = p.UpdateMetadataRequest(
        request.controller_id, request.controller_epoch, [gapped], request.live_brokers
    )
    with pytest.raises(ValueError, match=r"orders are not 0\.\.n-1"):
        image_from_update_metadata(broken)


# --- over the wire ------------------------------------------------------------------------------


@pytest.fixture
def cluster(make_listening: Callable[..., EmbeddedCluster]) -> EmbeddedCluster:
    cluster = make_listening(3)
    Admin(cluster.transport).create_topics([NewTopic("replicated", 2, 3), NewTopic("single", 1, 1)])
    return cluster


@pytest.fixture
def inter_broker(cluster: EmbeddedCluster) -> Iterator[EmbeddedCluster]:
    for broker_id in cluster.broker_ids:
        cluster.broker(broker_id).inter_broker_enabled = True
    yield cluster


def _call(cluster: EmbeddedCluster, broker_id: int, message: Any, version: int) -> Any:
    with RawClient.to(cluster, broker_id) as client:
        return client.call(message, version)


def _wire(key: int, version: int, request: Any) -> Any:
    return to_wire(request, MESSAGES[key][0][version])


def test_the_inter_broker_apis_are_hidden_and_refused_outside_a_multi_process_cluster(
    cluster: EmbeddedCluster,
) -> None:
    listed = _call(cluster, 0, ApiVersionsRequest[3](), 3)
    assert not {a.api_key for a in listed.api_keys} & {k for k, _, _ in INTER_BROKER_VERSIONS}
    request = _wire(67, 0, p.AllocateProducerIdsRequest(broker_id=0))
    with RawClient.to(cluster, 0) as client, pytest.raises(ConnectionError, match="closed"):
        client.call(request, 0)


def test_a_node_of_a_multi_process_cluster_lists_them(inter_broker: EmbeddedCluster) -> None:
    listed = _call(inter_broker, 1, ApiVersionsRequest[3](), 3)
    versions = {a.api_key: (a.min_version, a.max_version) for a in listed.api_keys}
    for key, low, high in INTER_BROKER_VERSIONS:
        assert versions[key] == (low, high)


def test_requests_for_the_controller_get_not_controller_where_it_does_not_run(
    inter_broker: EmbeddedCluster,
) -> None:
    topic = inter_broker.controller.image().topic("single")
    assert topic is not None
    alter = p.AlterPartitionRequest(
        0, [p.AlterPartitionTopicData(topic.topic_id, [p.AlterPartitionPartitionData(0, 0, [])])]
    )
    answers = [
        _call(inter_broker, 0, _wire(56, 3, alter), 3),
        _call(inter_broker, 0, _wire(67, 0, p.AllocateProducerIdsRequest(0)), 0),
        _call(inter_broker, 0, _wire(7, 3, p.ControlledShutdownRequest(0, 1)), 3),
    ]
    assert [a.error_code for a in answers] == [NOT_CONTROLLER] * 3
    assert inter_broker.controller.live_brokers() == {0, 1, 2}


def _alter(
    cluster: EmbeddedCluster,
    sender: int,
    topic_id: Uuid,
    leader_epoch: int,
    partition_epoch: int,
    isr: tuple[int, ...],
) -> Any:
    request = p.AlterPartitionRequest(
        sender,
        [
            p.AlterPartitionTopicData(
                topic_id,
                [
                    p.AlterPartitionPartitionData(
                        0, leader_epoch, [p.BrokerState(b, 1) for b in isr], partition_epoch
                    )
                ],
            )
        ],
    )
    answer = _call(cluster, sender, _wire(56, 3, request), 3)
    assert answer.error_code == NONE
    return from_wire(answer, p.AlterPartitionResponse).topics[0].partitions[0]


def test_alter_partition_through_the_controller_of_the_broker(
    inter_broker: EmbeddedCluster,
) -> None:
    controller = inter_broker.controller
    topic = controller.image().topic("single")
    assert topic is not None
    reg = topic.partitions[0]
    leader = reg.leader
    for broker_id in inter_broker.broker_ids:
        inter_broker.broker(broker_id).active_controller = controller

    changed = _alter(
        inter_broker, leader, topic.topic_id, reg.leader_epoch, reg.partition_epoch, (leader,)
    )
    assert changed == p.AlterPartitionPartitionResult(
        0, NONE, leader, reg.leader_epoch, (leader,), 0, reg.partition_epoch + 1
    )
    now = controller.image().registration(TopicPartition("single", 0))
    assert now is not None and now.partition_epoch == reg.partition_epoch + 1

    again = _alter(
        inter_broker, leader, topic.topic_id, reg.leader_epoch, reg.partition_epoch, (leader,)
    )
    assert again == changed, "the same change again (its answer lost) learns the current state"
    unknown_epoch = _alter(
        inter_broker, leader, topic.topic_id, reg.leader_epoch, now.partition_epoch + 1, (leader,)
    )
    assert unknown_epoch.error_code == INVALID_UPDATE_VERSION
    fenced = _alter(
        inter_broker, leader, topic.topic_id, reg.leader_epoch + 1, now.partition_epoch, (leader,)
    )
    assert fenced.error_code == FENCED_LEADER_EPOCH
    other = (leader + 1) % 3
    not_leader = _alter(
        inter_broker, other, topic.topic_id, reg.leader_epoch, now.partition_epoch, (other,)
    )
    assert not_leader.error_code == NOT_LEADER_OR_FOLLOWER
    unknown = _alter(
        inter_broker,
        leader,
        Uuid(uuid.uuid4().bytes),
        reg.leader_epoch,
        now.partition_epoch,
        (leader,),
    )
    assert unknown.error_code == UNKNOWN_TOPIC_ID
    after = controller.image().registration(TopicPartition("single", 0))
    assert after is not None and after.partition_epoch == now.partition_epoch


def test_allocate_producer_ids_hands_out_distinct_blocks(inter_broker: EmbeddedCluster) -> None:
    inter_broker.broker(1).active_controller = inter_broker.controller
    first = _call(inter_broker, 1, _wire(67, 0, p.AllocateProducerIdsRequest(2, 5)), 0)
    second = _call(inter_broker, 1, _wire(67, 0, p.AllocateProducerIdsRequest(0, 5)), 0)
    assert (first.error_code, second.error_code) == (NONE, NONE)
    assert first.producer_id_len > 0
    assert second.producer_id_start >= first.producer_id_start + first.producer_id_len


def test_controlled_shutdown_moves_the_brokers_leaderships_away(
    inter_broker: EmbeddedCluster,
) -> None:
    controller = inter_broker.controller
    inter_broker.broker(0).active_controller = controller
    replicated = controller.image().topic("replicated")
    assert replicated is not None
    leaving = replicated.partitions[0].leader
    answer = _call(inter_broker, 0, _wire(7, 3, p.ControlledShutdownRequest(leaving, 1)), 3)
    assert answer.error_code == NONE
    assert answer.remaining_partitions == []
    image = controller.image()
    assert leaving not in image.live_brokers
    topic = image.topic("replicated")
    assert topic is not None
    assert all(reg.leader not in (leaving, p.NO_LEADER) for reg in topic.partitions)


def test_controlled_shutdown_must_name_the_registration_it_ends(
    inter_broker: EmbeddedCluster,
) -> None:
    controller = inter_broker.controller
    inter_broker.broker(0).active_controller = controller
    holder = 1
    controller.unregister_broker(holder)
    controller.register_broker(holder, broker_epoch=4242)
    for unnamed_or_stale in (-1, 4241):
        request = p.ControlledShutdownRequest(holder, unnamed_or_stale)
        answer = _call(inter_broker, 0, _wire(7, 3, request), 3)
        assert answer.error_code == STALE_BROKER_EPOCH
        assert holder in controller.image().live_brokers
    answer = _call(inter_broker, 0, _wire(7, 3, p.ControlledShutdownRequest(holder, 4242)), 3)
    assert answer.error_code == NONE
    assert holder not in controller.image().live_brokers


def test_update_metadata_goes_to_the_brokers_receiver(inter_broker: EmbeddedCluster) -> None:
    received: list[p.UpdateMetadataRequest] = []
    inter_broker.broker(2).metadata_receiver = received.append
    image = inter_broker.controller.image()
    endpoints = {b: (e,) for b, e in inter_broker.endpoints.snapshot().items()}
    request = update_metadata_request(image, endpoints, broker_epoch=3)
    answer = _call(inter_broker, 2, _wire(6, 8, request), 8)
    assert answer.error_code == NONE
    assert received == [request]
    back, listeners = image_from_update_metadata(received[0])
    assert _same_image(back, image)
    assert listeners == endpoints


def test_update_metadata_is_refused_by_a_broker_without_a_receiver(
    inter_broker: EmbeddedCluster,
) -> None:
    request = update_metadata_request(inter_broker.controller.image(), {})
    answer = _call(inter_broker, 1, _wire(6, 8, request), 8)
    assert answer.error_code == INVALID_REQUEST


def _leader_and_isr(cluster: EmbeddedCluster, broker_id: int, controller_epoch: int) -> Any:
    image = cluster.controller.image()
    topic = image.topic("replicated")
    assert topic is not None
    request = p.LeaderAndIsrRequest(
        controller_id=image.controller_id,
        controller_epoch=controller_epoch,
        partition_states=[
            p.LeaderAndIsrPartitionState(
                "replicated",
                i,
                reg.leader,
                reg.leader_epoch,
                reg.isr,
                reg.partition_epoch,
                reg.replicas,
            )
            for i, reg in enumerate(topic.partitions)
        ],
        topic_ids=[("replicated", topic.topic_id)],
        live_leaders=sorted({reg.leader for reg in topic.partitions}),
    )
    message = leader_and_isr_to_wire(request, 7, leader_address=lambda b: ("127.0.0.1", 9000 + b))
    return topic.topic_id, _call(cluster, broker_id, message, 7)


def test_leader_and_isr_answers_per_partition_by_topic_id(inter_broker: EmbeddedCluster) -> None:
    epoch = inter_broker.controller.image().controller_epoch
    topic_id, answer = _leader_and_isr(inter_broker, 1, epoch)
    assert answer.error_code == NONE
    assert [Uuid(t.topic_id.bytes) for t in answer.topics] == [topic_id]
    assert sorted((e.partition_index, e.error_code) for e in answer.topics[0].partition_errors) == [
        (0, NONE),
        (1, NONE),
    ]
    assert inter_broker.broker(1).partition(TopicPartition("replicated", 0)) is not None


def test_leader_and_isr_from_an_older_controller_is_refused(inter_broker: EmbeddedCluster) -> None:
    epoch = inter_broker.controller.image().controller_epoch
    _, answer = _leader_and_isr(inter_broker, 1, epoch - 1)
    assert answer.error_code == STALE_CONTROLLER_EPOCH


def test_stop_replica_stops_hosting_the_partition(inter_broker: EmbeddedCluster) -> None:
    image = inter_broker.controller.image()
    tp = TopicPartition("replicated", 1)
    reg = image.registration(tp)
    assert reg is not None
    follower = next(b for b in reg.replicas if b != reg.leader)
    assert inter_broker.broker(follower).partition(tp) is not None
    request = p.StopReplicaRequest(
        image.controller_id,
        image.controller_epoch,
        [p.StopReplicaPartitionState("replicated", 1, reg.leader_epoch, delete_partition=False)],
    )
    stale = p.StopReplicaRequest(
        image.controller_id, image.controller_epoch - 1, request.partition_states
    )
    refused = _call(inter_broker, follower, stop_replica_to_wire(stale, 4), 4)
    assert refused.error_code == STALE_CONTROLLER_EPOCH
    assert inter_broker.broker(follower).partition(tp) is not None
    answer = _call(inter_broker, follower, stop_replica_to_wire(request, 4), 4)
    assert answer.error_code == NONE
    assert from_wire(answer, p.StopReplicaResponse).partition_errors == (
        p.StopReplicaPartitionError("replicated", 1, NONE),
    )
    assert inter_broker.broker(follower).partition(tp) is None


def test_a_null_inside_a_tagged_field_closes_the_connection(
    inter_broker: EmbeddedCluster,
) -> None:
    request = update_metadata_request(inter_broker.controller.image(), {})
    message = _wire(
        6, 8, attrs.evolve(request, broker_configs=[p.UpdateMetadataBrokerConfigs("", [])])
    )
    message.broker_configs[0].configs = None
    with RawClient.to(inter_broker, 1) as client, pytest.raises(ConnectionError, match="closed"):
        client.call(message, 8)
    assert _call(inter_broker, 1, _wire(6, 8, request), 8).error_code == INVALID_REQUEST
