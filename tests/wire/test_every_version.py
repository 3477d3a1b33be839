"""Every version of every API the listener advertises, sent raw, answered correctly.

ApiVersions promises exactly the table in ``tierlog.wire.APIS``; these tests hold the broker to
each promise, lowest version to highest, with requests built by kafka-python's classes.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kafka.protocol.admin.cluster import DescribeClusterRequest
from kafka.protocol.admin.configs import (
    AlterConfigsRequest,
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
)
from kafka.protocol.admin.topics import (
    AlterPartitionReassignmentsRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
    ElectLeadersRequest,
    ListPartitionReassignmentsRequest,
)
from kafka.protocol.consumer.offsets import ListOffsetsRequest, OffsetForLeaderEpochRequest
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest
from kafka.protocol.metadata.metadata import MetadataRequest
from kafka.protocol.producer.transaction import InitProducerIdRequest
from kafka.record import MemoryRecordsBuilder
from tierlog.client import Admin, NewTopic
from tierlog.cluster import EmbeddedCluster
from tierlog.wire import APIS

from .raw import RawClient, fetch_request, produce_request

TOPIC = "versions"


def _versions(key: int) -> list[int]:
    api = APIS[key]
    return list(range(api.min_version, api.max_version + 1))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    """One listening broker for the whole module: each test makes what it needs."""
    data = tmp_path_factory.mktemp("versions")
    with EmbeddedCluster(1, data, {"listeners": "PLAINTEXT://127.0.0.1:0"}, listen=True) as c:
        Admin(c.transport).create_topics([NewTopic(TOPIC, 1, 1)])
        yield c


@pytest.fixture
def raw(cluster: EmbeddedCluster) -> Iterator[RawClient]:
    with RawClient.to(cluster) as client:
        yield client


def _batch(value: bytes, timestamp: int = 1_700_000_000_000) -> bytes:
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    builder.append(timestamp=timestamp, key=b"k", value=value, headers=[])
    builder.close()
    return bytes(builder.buffer())


def _produce(raw: RawClient, version: int, value: bytes) -> int:
    response = raw.call(produce_request(TOPIC, _batch(value)), version)
    (partition,) = response.responses[0].partition_responses
    assert partition.error_code == 0, partition
    return int(partition.base_offset)


@pytest.mark.parametrize("version", _versions(0))
def test_produce(raw: RawClient, version: int) -> None:
    first = _produce(raw, version, b"produce-%d" % version)
    assert _produce(raw, version, b"again") == first + 1


@pytest.mark.parametrize("version", _versions(1))
def test_fetch_returns_the_batch_as_produced(raw: RawClient, version: int) -> None:
    value = b"fetch-%d" % version
    offset = _produce(raw, 9, value)
    request = fetch_request(TOPIC, offset, max_wait_ms=100)
    response = raw.call(request, version)
    (data,) = response.responses[0].partitions
    assert data.error_code == 0
    assert data.high_watermark >= offset + 1
    assert value in bytes(data.records)


@pytest.mark.parametrize("version", _versions(2))
def test_list_offsets_earliest_and_latest(raw: RawClient, version: int) -> None:
    end = _produce(raw, 9, b"list-offsets") + 1
    r = ListOffsetsRequest
    answers = {}
    for spec in (-2, -1):
        request = r(
            replica_id=-1,
            isolation_level=0,
            topics=[
                r.ListOffsetsTopic(
                    name=TOPIC,
                    partitions=[
                        r.ListOffsetsTopic.ListOffsetsPartition(
                            partition_index=0, current_leader_epoch=-1, timestamp=spec
                        )
                    ],
                )
            ],
        )
        (partition,) = raw.call(request, version).topics[0].partitions
        assert partition.error_code == 0
        answers[spec] = partition.offset
    assert answers == {-2: 0, -1: end}


@pytest.mark.parametrize("version", _versions(3))
def test_metadata_names_the_topic_and_the_listening_broker(
    cluster: EmbeddedCluster, raw: RawClient, version: int
) -> None:
    m = MetadataRequest
    topics = [] if version == 0 else None  # every topic
    response = raw.call(m(topics=topics, allow_auto_topic_creation=False), version)
    endpoint = cluster.endpoints.snapshot()[0]
    assert [(b.node_id, b.host, b.port) for b in response.brokers] == [
        (0, endpoint.host, endpoint.port)
    ]
    (topic,) = [t for t in response.topics if t.name == TOPIC]
    assert topic.error_code == 0
    assert [(p.partition_index, p.leader_id) for p in topic.partitions] == [(0, 0)]
    unknown = f"unknown-v{version}"
    named = raw.call(
        m(topics=[m.MetadataRequestTopic(name=unknown)], allow_auto_topic_creation=False), version
    )
    if version < 4:
        # Before v4 a request cannot opt out: auto.create.topics.enable (true) decides.
        assert [(t.name, t.error_code in (0, 5)) for t in named.topics] == [(unknown, True)]
        assert cluster.controller.image().topic(unknown) is not None
    else:
        assert [(t.name, t.error_code) for t in named.topics] == [(unknown, 3)]
        assert cluster.controller.image().topic(unknown) is None


@pytest.mark.parametrize("version", _versions(23))
def test_offset_for_leader_epoch(raw: RawClient, version: int) -> None:
    end = _produce(raw, 9, b"epochs") + 1
    o = OffsetForLeaderEpochRequest
    request = o(
        replica_id=-1,
        topics=[
            o.OffsetForLeaderTopic(
                topic=TOPIC,
                partitions=[
                    o.OffsetForLeaderTopic.OffsetForLeaderPartition(
                        partition=0, current_leader_epoch=-1, leader_epoch=0
                    )
                ],
            )
        ],
    )
    (partition,) = raw.call(request, version).topics[0].partitions
    assert partition.error_code == 0
    assert partition.end_offset == end


def _create(raw: RawClient, version: int, name: str, partitions: int = 2) -> None:
    c = CreateTopicsRequest
    request = c(
        topics=[
            c.CreatableTopic(
                name=name,
                num_partitions=partitions,
                replication_factor=1,
                assignments=[],
                configs=[
                    c.CreatableTopic.CreatableTopicConfig(name="retention.ms", value="123456")
                ],
            )
        ],
        timeout_ms=10_000,
        validate_only=False,
    )
    (result,) = raw.call(request, version).topics
    assert (result.name, result.error_code) == (name, 0), result


@pytest.mark.parametrize("version", _versions(19))
def test_create_topics(cluster: EmbeddedCluster, raw: RawClient, version: int) -> None:
    name = f"created-v{version}"
    _create(raw, version, name)
    topic = cluster.controller.image().topic(name)
    assert topic is not None
    assert len(topic.partitions) == 2
    assert topic.configs["retention.ms"] == "123456"


@pytest.mark.parametrize("version", _versions(20))
def test_delete_topics(cluster: EmbeddedCluster, raw: RawClient, version: int) -> None:
    name = f"deleted-v{version}"
    _create(raw, 4, name)
    d = DeleteTopicsRequest
    if version >= 6:
        request = d(topics=[d.DeleteTopicState(name=name)], timeout_ms=10_000)
    else:
        request = d(topic_names=[name], timeout_ms=10_000)
    (result,) = raw.call(request, version).responses
    assert (result.name, result.error_code) == (name, 0)
    assert cluster.controller.image().topic(name) is None


@pytest.mark.parametrize("version", _versions(21))
def test_delete_records(raw: RawClient, version: int) -> None:
    offset = _produce(raw, 9, b"to-delete")
    d = DeleteRecordsRequest
    request = d(
        topics=[
            d.DeleteRecordsTopic(
                name=TOPIC,
                partitions=[
                    d.DeleteRecordsTopic.DeleteRecordsPartition(partition_index=0, offset=offset)
                ],
            )
        ],
        timeout_ms=10_000,
    )
    (partition,) = raw.call(request, version).topics[0].partitions
    assert (partition.error_code, partition.low_watermark) == (0, offset)


@pytest.mark.parametrize("version", _versions(32))
def test_describe_configs(raw: RawClient, version: int) -> None:
    name = f"described-v{version}"
    _create(raw, 4, name)
    d = DescribeConfigsRequest
    request = d(
        resources=[
            d.DescribeConfigsResource(
                resource_type=2, resource_name=name, configuration_keys=["retention.ms"]
            )
        ],
        include_synonyms=False,
        include_documentation=False,
    )
    (result,) = raw.call(request, version).results
    assert result.error_code == 0
    assert [(c.name, c.value) for c in result.configs] == [("retention.ms", "123456")]


@pytest.mark.parametrize("version", _versions(44))
def test_incremental_alter_configs(cluster: EmbeddedCluster, raw: RawClient, version: int) -> None:
    name = f"altered-v{version}"
    _create(raw, 4, name)
    a = IncrementalAlterConfigsRequest
    request = a(
        resources=[
            a.AlterConfigsResource(
                resource_type=2,
                resource_name=name,
                configs=[
                    a.AlterConfigsResource.AlterableConfig(
                        name="retention.ms", config_operation=0, value="654321"
                    )
                ],
            )
        ],
        validate_only=False,
    )
    (result,) = raw.call(request, version).responses
    assert result.error_code == 0, result
    topic = cluster.controller.image().topic(name)
    assert topic is not None
    assert topic.configs["retention.ms"] == "654321"


@pytest.mark.parametrize("version", _versions(45))
def test_alter_partition_reassignments_to_an_unknown_broker_fails_per_partition(
    raw: RawClient, version: int
) -> None:
    a = AlterPartitionReassignmentsRequest
    request = a(
        timeout_ms=10_000,
        topics=[
            a.ReassignableTopic(
                name=TOPIC,
                partitions=[
                    a.ReassignableTopic.ReassignablePartition(partition_index=0, replicas=[7])
                ],
            )
        ],
    )
    response = raw.call(request, version)
    assert response.error_code == 0
    (partition,) = response.responses[0].partitions
    assert partition.error_code == 39  # INVALID_REPLICA_ASSIGNMENT


@pytest.mark.parametrize("version", _versions(46))
def test_list_partition_reassignments(raw: RawClient, version: int) -> None:
    response = raw.call(ListPartitionReassignmentsRequest(timeout_ms=10_000, topics=None), version)
    assert response.error_code == 0
    assert list(response.topics) == []


@pytest.mark.parametrize("version", _versions(22))
def test_init_producer_id_hands_out_distinct_ids(raw: RawClient, version: int) -> None:
    request = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60_000)
    first = raw.call(request, version)
    second = raw.call(
        InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60_000), version
    )
    assert (first.error_code, second.error_code) == (0, 0)
    assert first.producer_id >= 0 and second.producer_id >= 0
    assert first.producer_id != second.producer_id
    assert first.producer_epoch == 0


@pytest.mark.parametrize("version", _versions(37))
def test_create_partitions(cluster: EmbeddedCluster, raw: RawClient, version: int) -> None:
    name = f"expanded-v{version}"
    _create(raw, 4, name)
    c = CreatePartitionsRequest
    request = c(
        topics=[c.CreatePartitionsTopic(name=name, count=5, assignments=None)],
        timeout_ms=10_000,
        validate_only=False,
    )
    (result,) = raw.call(request, version).results
    assert (result.name, result.error_code) == (name, 0), result
    topic = cluster.controller.image().topic(name)
    assert topic is not None and len(topic.partitions) == 5
    shrink = c(
        topics=[c.CreatePartitionsTopic(name=name, count=3, assignments=None)],
        timeout_ms=10_000,
        validate_only=False,
    )
    (refused,) = raw.call(shrink, version).results
    assert refused.error_code == 37  # INVALID_PARTITIONS


@pytest.mark.parametrize("version", _versions(43))
def test_elect_leaders_where_the_preferred_leader_already_leads(
    raw: RawClient, version: int
) -> None:
    e = ElectLeadersRequest
    request = e(
        election_type=0,
        topic_partitions=[e.TopicPartitions(topic=TOPIC, partitions=[0])],
        timeout_ms=10_000,
    )
    response = raw.call(request, version)
    assert response.error_code == 0
    (result,) = response.replica_election_results
    assert result.topic == TOPIC
    assert [(r.partition_id, r.error_code) for r in result.partition_result] == [
        (0, 84)  # ELECTION_NOT_NEEDED
    ]


@pytest.mark.parametrize("version", _versions(60))
def test_describe_cluster_lists_the_listening_broker(
    cluster: EmbeddedCluster, raw: RawClient, version: int
) -> None:
    response = raw.call(
        DescribeClusterRequest(include_cluster_authorized_operations=False), version
    )
    assert response.error_code == 0
    assert response.cluster_id == cluster.controller.cluster_id
    endpoint = cluster.endpoints.snapshot()[0]
    assert [(b.broker_id, b.host, b.port) for b in response.brokers] == [
        (0, endpoint.host, endpoint.port)
    ]


@pytest.mark.parametrize("version", _versions(33))
def test_alter_configs_replaces_the_whole_dynamic_set(
    cluster: EmbeddedCluster, raw: RawClient, version: int
) -> None:
    name = f"replaced-v{version}"
    _create(raw, 4, name)  # with retention.ms set
    a = AlterConfigsRequest
    request = a(
        resources=[
            a.AlterConfigsResource(
                resource_type=2,
                resource_name=name,
                configs=[
                    a.AlterConfigsResource.AlterableConfig(name="segment.ms", value="7200000")
                ],
            )
        ],
        validate_only=False,
    )
    (result,) = raw.call(request, version).responses
    assert result.error_code == 0, result
    topic = cluster.controller.image().topic(name)
    assert topic is not None
    assert dict(topic.configs) == {"segment.ms": "7200000"}  # retention.ms back to its default


@pytest.mark.parametrize("version", _versions(10))
def test_find_coordinator_finds_the_group_partitions_leader(raw: RawClient, version: int) -> None:
    """A group's coordinator is the listening broker (the only one); a transaction
    coordinator does not exist: retriable COORDINATOR_NOT_AVAILABLE."""
    endpoint = raw.sock.getpeername()
    if version < 4:
        response = raw.call(FindCoordinatorRequest(key="group", key_type=0), version)
        assert (response.error_code, response.node_id) == (0, 0)
        assert (response.host, response.port) == endpoint
        if version >= 1:
            response = raw.call(FindCoordinatorRequest(key="txn", key_type=1), version)
            assert (response.error_code, response.node_id) == (15, -1)
    else:
        request = FindCoordinatorRequest(key_type=0, coordinator_keys=["a", "b"])
        coordinators = raw.call(request, version).coordinators
        assert [(c.key, c.error_code, c.node_id, c.port) for c in coordinators] == [
            ("a", 0, 0, endpoint[1]),
            ("b", 0, 0, endpoint[1]),
        ]
        request = FindCoordinatorRequest(key_type=1, coordinator_keys=["t"])
        (txn,) = raw.call(request, version).coordinators
        assert (txn.error_code, txn.node_id) == (15, -1)
