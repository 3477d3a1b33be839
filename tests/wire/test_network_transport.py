"""NetworkTransport against brokers listening on 127.0.0.1: the same answers as the in-process
transport, a follower's fetch, the controller's requests, versions agreed with ApiVersions,
timeouts, and brokers that go away or break their connections."""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import pytest
from kafka.record import MemoryRecordsBuilder
from tierlog.client import Admin, NewTopic
from tierlog.cluster import EmbeddedCluster
from tierlog.errors import (
    BrokerNotAvailableError,
    NetworkError,
    RequestTimedOutError,
    UnsupportedVersionError,
)
from tierlog.model import ZERO_UUID, TopicPartition
from tierlog.server import protocol as p
from tierlog.server.update_metadata import image_from_update_metadata, update_metadata_request
from tierlog.wire.apis import _fetch_response as server_side_fetch_patch
from tierlog.wire.apis import api_versions_response
from tierlog.wire.codec import MESSAGES, encode_response, to_wire
from tierlog.wire.network_transport import NetworkTransport, fetch_response_from_wire

NONE = 0
INVALID_TOPIC_EXCEPTION = 17
STALE_CONTROLLER_EPOCH = 11
NOT_CONTROLLER = 41


def _batch(*values: bytes) -> bytes:
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    for value in values:
        builder.append(timestamp=1_700_000_000_000, key=b"k", value=value, headers=[])
    builder.close()
    return bytes(builder.buffer())


@pytest.fixture
def cluster(make_listening: Callable[..., EmbeddedCluster]) -> EmbeddedCluster:
    cluster = make_listening(3)
    Admin(cluster.transport).create_topics([NewTopic("orders", 1, 3)])
    return cluster


def _transport(cluster: EmbeddedCluster, **options: Any) -> NetworkTransport:
    def resolve(broker_id: int) -> tuple[str, int] | None:
        endpoint = cluster.endpoints.snapshot().get(broker_id)
        return None if endpoint is None else (endpoint.host, endpoint.port)

    return NetworkTransport(
        resolve,
        lambda: tuple(sorted(cluster.endpoints.snapshot())),
        client_id="broker-test",
        **options,
    )


@pytest.fixture
def network(cluster: EmbeddedCluster) -> Iterator[NetworkTransport]:
    transport = _transport(cluster)
    yield transport
    transport.close()


def _leader(cluster: EmbeddedCluster, topic: str = "orders") -> int:
    reg = cluster.controller.image().registration(TopicPartition(topic, 0))
    assert reg is not None
    return reg.leader


def _produce(topic: str, records: bytes, acks: int = p.Acks.ALL) -> p.ProduceRequest:
    return p.ProduceRequest(
        acks, 10_000, [p.TopicProduceData(topic, [p.PartitionProduceData(0, records)])]
    )


def _fetch(offset: int, **fields: Any) -> p.FetchRequest:
    partition = p.FetchPartition(
        0,
        offset,
        1 << 20,
        **{k: fields.pop(k) for k in ("current_leader_epoch", "last_fetched_epoch") if k in fields},
    )
    return p.FetchRequest([p.FetchTopic("orders", [partition])], max_wait_ms=0, **fields)


def _without_topic_ids(answer: p.FetchResponse) -> p.FetchResponse:
    """Fetch up to version 12 names topics by name only."""
    return attrs.evolve(
        answer, responses=[attrs.evolve(t, topic_id=ZERO_UUID) for t in answer.responses]
    )


def test_answers_equal_the_in_process_transports(
    cluster: EmbeddedCluster, network: NetworkTransport
) -> None:
    leader = _leader(cluster)
    over_tcp = network.send(leader, _produce("orders", _batch(b"a", b"b")))
    in_process = cluster.transport.send(leader, _produce("orders", _batch(b"c")))
    first = over_tcp.responses[0].partition_responses[0]
    second = in_process.responses[0].partition_responses[0]
    assert (first.error_code, first.base_offset, second.base_offset) == (NONE, 0, 2)
    assert over_tcp == attrs.evolve(
        in_process,
        responses=[
            attrs.evolve(
                in_process.responses[0], partition_responses=[attrs.evolve(second, base_offset=0)]
            )
        ],
    )

    fetched = network.send(leader, _fetch(0))
    assert fetched == _without_topic_ids(cluster.transport.send(leader, _fetch(0)))
    assert fetched.responses[0].partitions[0].high_watermark == 3
    assert len(fetched.responses[0].partitions[0].records) > 0

    for spec in (p.OffsetSpec.EARLIEST, p.OffsetSpec.LATEST):
        request = p.ListOffsetsRequest(
            [p.ListOffsetsTopic("orders", [p.ListOffsetsPartition(0, spec)])]
        )
        answer = network.send(leader, request)
        assert answer == cluster.transport.send(leader, request)
        assert answer.topics[0].partitions[0].offset == (0 if spec == p.OffsetSpec.EARLIEST else 3)

    metadata = network.send(leader, p.MetadataRequest([p.MetadataRequestTopic("orders")]))
    assert (
        metadata.topics
        == cluster.transport.send(
            leader, p.MetadataRequest([p.MetadataRequestTopic("orders")])
        ).topics
    )
    assert network.node_ids() == (0, 1, 2)


def test_a_follower_fetch_with_its_replica_id_and_a_diverging_epoch(
    cluster: EmbeddedCluster, network: NetworkTransport
) -> None:
    leader = _leader(cluster)
    network.send(leader, _produce("orders", _batch(b"a", b"b")))
    reg = cluster.controller.image().registration(TopicPartition("orders", 0))
    assert reg is not None
    follower = next(b for b in reg.replicas if b != leader)
    as_follower = _fetch(0, replica_id=follower, current_leader_epoch=reg.leader_epoch)
    answer = network.send(leader, as_follower)
    assert answer.responses[0].partitions[0].error_code == NONE
    assert len(answer.responses[0].partitions[0].records) > 0

    assert answer == _without_topic_ids(cluster.transport.send(leader, as_follower))


def test_a_diverging_epoch_comes_back_as_sent() -> None:
    """tierlog's leaders leave truncation to OffsetsForLeaderEpoch, so no broker sends one yet:
    the listener's encoding of it is decoded here."""
    answer = p.FetchResponse(
        [
            p.FetchableTopicResponse(
                "orders",
                [
                    p.FetchPartitionData(
                        0, NONE, 7, 7, 0, p.EpochEndOffset(0, leader_epoch=3, end_offset=5)
                    ),
                    p.FetchPartitionData(1, NONE, 2, 2, 0, records=_batch(b"a")),
                ],
            )
        ]
    )
    wire = to_wire(answer, MESSAGES[1][1][12])
    wire = server_side_fetch_patch(None, answer, wire)  # type: ignore[arg-type]
    wire.API_VERSION = 12
    wire.with_header(correlation_id=1)
    decoded = MESSAGES[1][1].decode(bytes(wire.encode(header=True)), version=12, header=True)
    assert fetch_response_from_wire(decoded) == answer


def test_a_long_poll_holds_up_no_other_request_and_a_late_answer_times_out(
    cluster: EmbeddedCluster, network: NetworkTransport
) -> None:
    leader = _leader(cluster)
    long_poll = attrs.evolve(_fetch(0), max_wait_ms=1500)
    results: list[Any] = []
    poller = threading.Thread(target=lambda: results.append(network.send(leader, long_poll)))
    poller.start()
    time.sleep(0.2)
    listed = network.send(
        leader,
        p.ListOffsetsRequest(
            [p.ListOffsetsTopic("orders", [p.ListOffsetsPartition(0, p.OffsetSpec.LATEST)])]
        ),
    )
    assert not results, "answered while the long poll still waits, not queued behind it"
    assert listed.topics[0].partitions[0].offset == 0
    poller.join(10)
    assert results and results[0].responses[0].partitions[0].records == b""

    with pytest.raises(RequestTimedOutError, match="not answered in time"):
        network.send(leader, long_poll, timeout_ms=300)
    # The timed-out connection is dropped; the next request gets a fresh one.
    answer = network.send(leader, _produce("orders", _batch(b"after")))
    assert answer.responses[0].partition_responses[0].error_code == NONE


def test_a_broker_going_away(cluster: EmbeddedCluster, network: NetworkTransport) -> None:
    addresses = {b: (e.host, e.port) for b, e in cluster.endpoints.snapshot().items()}
    stale = NetworkTransport(addresses.get, lambda: tuple(addresses), client_id="stale")
    try:
        metadata = p.MetadataRequest(())
        assert stale.send(2, metadata).brokers  # a pooled connection to broker 2 now
        cluster.stop_broker(2)
        with pytest.raises(BrokerNotAvailableError):
            stale.send(2, metadata)  # the pooled connection: closed by the broker
        with pytest.raises(BrokerNotAvailableError, match="cannot connect to broker 2"):
            stale.send(2, metadata)  # nobody listens there any more
        with pytest.raises(BrokerNotAvailableError, match="broker 2 is not registered"):
            network.send(2, metadata)
        assert network.node_ids() == (0, 1)
        assert stale.send(1, metadata).brokers
    finally:
        stale.close()
    with pytest.raises(BrokerNotAvailableError, match="closed"):
        stale.send(1, p.MetadataRequest(()))


def test_a_connection_closed_before_any_answer(network: NetworkTransport) -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]

        def hang_up() -> None:
            connection, _ = server.accept()
            connection.recv(1024)
            connection.close()

        thread = threading.Thread(target=hang_up)
        thread.start()
        transport = NetworkTransport(
            lambda _: ("127.0.0.1", port), lambda: (9,), client_id="t", connect_timeout_ms=2000
        )
        with pytest.raises(BrokerNotAvailableError, match="broke during ApiVersions"):
            transport.send(9, p.MetadataRequest(()))
        thread.join(5)
        transport.close()


def test_versions_are_agreed_per_api(cluster: EmbeddedCluster, network: NetworkTransport) -> None:
    image = cluster.controller.image()
    stop = p.StopReplicaRequest(image.controller_id, image.controller_epoch, [])
    with pytest.raises(
        UnsupportedVersionError, match="StopReplica versions none, this one sends 4-4"
    ):
        network.send(1, stop)
    cluster.broker(1).inter_broker_enabled = True
    # The connection pooled after the refusal knows the old list; a new one asks again.
    network.close()
    fresh = _transport(cluster)
    try:
        assert fresh.send(1, stop) == p.StopReplicaResponse()
    finally:
        fresh.close()


def test_the_controllers_requests_round_trip(
    cluster: EmbeddedCluster, network: NetworkTransport
) -> None:
    for broker_id in cluster.broker_ids:
        cluster.broker(broker_id).inter_broker_enabled = True
    image = cluster.controller.image()
    topic = image.topic("orders")
    assert topic is not None
    reg = topic.partitions[0]
    follower = next(b for b in reg.replicas if b != reg.leader)
    state = p.LeaderAndIsrPartitionState(
        "orders", 0, reg.leader, reg.leader_epoch, reg.isr, reg.partition_epoch, reg.replicas
    )
    leader_and_isr = p.LeaderAndIsrRequest(
        image.controller_id,
        image.controller_epoch,
        [state],
        topic_ids=[("orders", topic.topic_id)],
        live_leaders=[reg.leader],
    )
    assert network.send(follower, leader_and_isr) == p.LeaderAndIsrResponse(
        partition_errors=[p.LeaderAndIsrPartitionError("orders", 0, NONE)]
    )
    stale = attrs.evolve(leader_and_isr, controller_epoch=image.controller_epoch - 1)
    assert network.send(follower, stale).error_code == STALE_CONTROLLER_EPOCH

    received: list[p.UpdateMetadataRequest] = []
    cluster.broker(follower).metadata_receiver = received.append
    endpoints = {b: (e,) for b, e in cluster.endpoints.snapshot().items()}
    update = update_metadata_request(image, endpoints)
    assert network.send(follower, update) == p.UpdateMetadataResponse()
    assert image_from_update_metadata(received[0])[1] == endpoints

    assert network.send(0, p.AllocateProducerIdsRequest(1)).error_code == NOT_CONTROLLER
    cluster.broker(0).active_controller = cluster.controller
    block = network.send(0, p.AllocateProducerIdsRequest(1))
    assert (block.error_code, block.producer_id_len > 0) == (NONE, True)
    alter = p.AlterPartitionRequest(
        reg.leader,
        [
            p.AlterPartitionTopicData(
                topic.topic_id,
                [
                    p.AlterPartitionPartitionData(
                        0,
                        reg.leader_epoch,
                        [p.BrokerState(b) for b in reg.isr],
                        reg.partition_epoch,
                    )
                ],
            )
        ],
    )
    altered = network.send(0, alter).topics[0].partitions[0]
    assert (altered.error_code, altered.partition_epoch) == (NONE, reg.partition_epoch + 1)
    assert network.send(0, p.ControlledShutdownRequest(follower)) == p.ControlledShutdownResponse()

    stop = p.StopReplicaRequest(
        image.controller_id,
        image.controller_epoch,
        [p.StopReplicaPartitionState("orders", 0, reg.leader_epoch)],
    )
    assert network.send(follower, stop) == p.StopReplicaResponse(
        partition_errors=[p.StopReplicaPartitionError("orders", 0, NONE)]
    )
    assert cluster.broker(follower).partition(TopicPartition("orders", 0)) is None


def test_send_internal_appends_to_internal_topics(
    cluster: EmbeddedCluster, network: NetworkTransport
) -> None:
    cluster.controller.create_topic("__transaction_state", 1, 1, internal=True)
    leader = _leader(cluster, "__transaction_state")
    refused = network.send(leader, _produce("__transaction_state", _batch(b"x")))
    assert refused.responses[0].partition_responses[0].error_code == INVALID_TOPIC_EXCEPTION
    allowed = network.send_internal(leader, _produce("__transaction_state", _batch(b"x")))
    assert allowed.responses[0].partition_responses[0].error_code == NONE


def test_an_acks_0_produce_waits_for_no_answer(
    cluster: EmbeddedCluster, network: NetworkTransport
) -> None:
    leader = _leader(cluster)
    assert network.send(leader, _produce("orders", _batch(b"a"), acks=p.Acks.NONE)) == (
        p.ProduceResponse(())
    )
    latest = p.ListOffsetsRequest(
        [p.ListOffsetsTopic("orders", [p.ListOffsetsPartition(0, p.OffsetSpec.LATEST)])]
    )
    # The same connection carries the next requests: each answer is the next frame. The high
    # watermark moves once the followers have the record.
    deadline = time.monotonic() + 10
    while network.send(leader, latest).topics[0].partitions[0].offset != 1:
        assert time.monotonic() < deadline, "the acks=0 record never became visible"
        time.sleep(0.05)


def _serve_once(server: socket.socket, answer: Callable[[int, int], bytes]) -> None:
    """Answers ApiVersions as a broker would, then the next request with ``answer(key,
    correlation id)``, then hangs up."""
    connection, _ = server.accept()
    with connection, connection.makefile("rb") as reader:
        for _ in range(2):
            (size,) = struct.unpack(">i", reader.read(4))
            frame = reader.read(size)
            key, version, correlation_id = struct.unpack_from(">hhi", frame)
            if key == 18:
                connection.sendall(
                    encode_response(api_versions_response(version), version, correlation_id)
                )
            else:
                connection.sendall(answer(key, correlation_id))


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        (
            lambda key, cid: encode_response(
                MESSAGES[key][1][12](brokers=[], topics=[], cluster_id="c", controller_id=0),
                12,
                cid + 1,
            ),
            "correlation id",
        ),
        (lambda key, cid: struct.pack(">ii", 8, cid) + b"\xff" * 4, "undecodable"),
        (lambda key, cid: struct.pack(">i", -5), "of size -5"),
    ],
    ids=["wrong-correlation-id", "garbage", "negative-size"],
)
def test_a_garbled_answer_drops_the_connection(
    answer: Callable[[int, int], bytes], problem: str
) -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        thread = threading.Thread(target=_serve_once, args=(server, answer))
        thread.start()
        transport = NetworkTransport(lambda _: ("127.0.0.1", port), lambda: (7,), client_id="t")
        try:
            with pytest.raises(NetworkError, match=problem):
                transport.send(7, p.MetadataRequest(()), timeout_ms=5000)
            thread.join(5)
            # Dropped, not pooled: the next request connects again, and nobody listens now.
            server.close()
            with pytest.raises(BrokerNotAvailableError, match="cannot connect"):
                transport.send(7, p.MetadataRequest(()), timeout_ms=5000)
        finally:
            transport.close()
