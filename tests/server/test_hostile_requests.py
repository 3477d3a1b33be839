"""Every request type with hostile field values gets Kafka's error code, and loses nothing.

Each case sends one well-typed request with malformed values (empty, negative, -1, 2**31-1,
2**63-1 and beyond, huge lists, NUL, path traversal, very long names) through the cluster's
transport, as a client would, and checks every error code of the answer, in the order the
response declares its fields (:func:`codes`). After each case the records acknowledged before it
must still be there and the topics unchanged; at the end no directory may have appeared for a
hostile name. One cluster serves every case: none of them may change it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, get_args

import attrs
import pytest
from tierlog.cluster import EmbeddedCluster
from tierlog.errors import (
    FencedLeaderEpochError,
    FetchSessionIdNotFoundError,
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    InvalidRequiredAcksError,
    InvalidTopicError,
    NoReassignmentInProgressError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    PolicyViolationError,
    StaleControllerEpochError,
    TopicAuthorizationFailedError,
    TopicExistsError,
    UnknownLeaderEpochError,
    UnknownTopicOrPartitionError,
)
from tierlog.model import ZERO_UUID, Uuid
from tierlog.server import protocol as p
from tierlog.server.error_responses import error_response

from .conftest import Client, batch, values

NONE = p.NONE
UNKNOWN = UnknownTopicOrPartitionError.code
INVALID_TOPIC = InvalidTopicError.code
INVALID_REQUEST = InvalidRequestError.code
INVALID_CONFIG = InvalidConfigError.code
OUT_OF_RANGE = OffsetOutOfRangeError.code
BAD_ASSIGNMENT = InvalidReplicaAssignmentError.code
POLICY = PolicyViolationError.code
ACKS = InvalidRequiredAcksError.code
PARTITIONS = InvalidPartitionsError.code
REPLICATION = InvalidReplicationFactorError.code
EXISTS = TopicExistsError.code
AUTHORIZATION = TopicAuthorizationFailedError.code
UNKNOWN_EPOCH = UnknownLeaderEpochError.code
FENCED = FencedLeaderEpochError.code
NOT_LEADER = NotLeaderOrFollowerError.code
NO_REASSIGNMENT = NoReassignmentInProgressError.code
STALE = StaleControllerEpochError.code
SESSION = FetchSessionIdNotFoundError.code

TOPIC, BROKER = p.ResourceType.TOPIC, p.ResourceType.BROKER
SET, APPEND = p.AlterConfigOp.SET, p.AlterConfigOp.APPEND

INT32_MAX, INT64_MAX = (1 << 31) - 1, (1 << 63) - 1
BAD_NAMES = {
    "empty": "",
    "dot": ".",
    "traversal": "../x",
    "deep-traversal": "../../../../tmp/escape",
    "nul": "a\x00b",
    "slash": "a/b",
    "unicode": "tøpic",
    "too-long": "x" * 250,
    "very-long": "x" * 100_000,
}
KEPT = "kept"
SCRATCH = "scratch"  # the one topic cases may write to
INTERNAL = "__consumer_offsets"


@attrs.frozen
class Ctx:
    """The cluster every case runs against; ``leader`` leads kept-0, ``stranger`` is no
    replica of it."""

    client: Client
    leader: int
    stranger: int
    controller_epoch: int
    kept_id: Uuid


def codes(message: object) -> list[int]:
    """Every ``error_code`` in a response, depth first in field order."""
    found: list[int] = []
    if attrs.has(type(message)):
        for field in attrs.fields(type(message)):
            value = getattr(message, field.name)
            if field.name == "error_code":
                found.append(int(value))
            else:
                found.extend(codes(value))
    elif isinstance(message, tuple):
        for item in message:
            found.extend(codes(item))
    return found


@pytest.fixture(scope="module")
def ctx(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ctx]:
    data = tmp_path_factory.mktemp("hostile") / "data"
    with EmbeddedCluster(3, data) as cluster:
        client = Client(cluster)
        client.create(KEPT, partitions=2, replication_factor=2)
        client.create("compacted", cleanup_policy="compact")
        client.create(SCRATCH, replication_factor=2)
        cluster.controller.create_topic(INTERNAL, 1, 1, internal=True)
        assert client.produce(KEPT, 0, batch(3)).error_code == NONE
        topic = client.metadata(KEPT).topics[0]
        replicas = topic.partitions[0].replica_nodes
        yield Ctx(
            client,
            leader=topic.partitions[0].leader_id,
            stranger=next(b for b in cluster.broker_ids if b not in replicas),
            controller_epoch=cluster.controller.image().controller_epoch,
            kept_id=topic.topic_id,
        )
    for broker in cluster.broker_ids:
        logs = data / f"broker-{broker}" / "logs"
        for name in BAD_NAMES.values():
            if name and "\x00" not in name and len(name) < 200:
                assert not (logs / f"{name}-0").exists(), name


Build = Callable[[Ctx], tuple[int, p.Request]]


def to_leader(make: Callable[[Ctx], p.Request]) -> Build:
    return lambda c: (c.leader, make(c))


def to_any(make: Callable[[Ctx], p.Request]) -> Build:
    return lambda c: (0, make(c))


# --- request builders ---------------------------------------------------------------------------


def produce(topic: str = KEPT, index: int = 0, *, acks: int = 1, timeout_ms: int = 5000) -> Build:
    def make(c: Ctx) -> tuple[int, p.Request]:
        data = [p.TopicProduceData(topic, [p.PartitionProduceData(index, batch(1))])]
        leader = c.client.leader(SCRATCH) if topic == SCRATCH else c.leader
        return leader, p.ProduceRequest(acks, timeout_ms, data)

    return make


def fetch(
    topic: str = KEPT,
    index: int = 0,
    offset: int = 0,
    partition_max_bytes: int = 1 << 20,
    **kwargs: Any,
) -> Build:
    epoch = kwargs.pop("current_leader_epoch", p.UNKNOWN_EPOCH)
    part = p.FetchPartition(index, offset, partition_max_bytes, current_leader_epoch=epoch)
    return to_leader(
        lambda c: p.FetchRequest([p.FetchTopic(topic, [part])], **{"max_wait_ms": 0, **kwargs})
    )


def list_offsets(
    topic: str = KEPT, index: int = 0, timestamp: int = -1, epoch: int = -1, **kwargs: Any
) -> Build:
    part = p.ListOffsetsPartition(index, timestamp, epoch)
    return to_leader(lambda c: p.ListOffsetsRequest([p.ListOffsetsTopic(topic, [part])], **kwargs))


def create(*topics: p.CreatableTopic) -> Build:
    return to_any(lambda c: p.CreateTopicsRequest(topics))


def assigned(*replicas: tuple[int, list[int]]) -> Build:
    assignments = [p.CreatableReplicaAssignment(i, b) for i, b in replicas]
    return create(p.CreatableTopic("assigned", assignments=assignments))


def delete_records(topic: str = KEPT, index: int = 0, offset: int = 0) -> Build:
    part = p.DeleteRecordsPartition(index, offset)
    return to_leader(lambda c: p.DeleteRecordsRequest([p.DeleteRecordsTopic(topic, [part])]))


def epochs(topic: str = KEPT, index: int = 0, epoch: int = 0, current: int = -1) -> Build:
    part = p.OffsetForLeaderPartition(index, epoch, current)
    return to_leader(
        lambda c: p.OffsetsForLeaderEpochRequest([p.OffsetForLeaderTopic(topic, [part])])
    )


def marker(
    producer_id: int = 7,
    producer_epoch: int = 0,
    coordinator_epoch: int = 0,
    topic: str = KEPT,
    index: int = 0,
) -> Build:
    entry = p.WritableTxnMarker(
        producer_id,
        producer_epoch,
        True,
        [p.WritableTxnMarkerTopic(topic, [index])],
        coordinator_epoch,
    )
    return to_leader(lambda c: p.WriteTxnMarkersRequest([entry]))


def describe(resource_type: int, name: str, keys: list[str] | None = None) -> Build:
    resource = p.DescribeConfigsResource(resource_type, name, keys)
    return to_any(lambda c: p.DescribeConfigsRequest([resource]))


def alter(resource_type: int, name: str, *ops: tuple[str, int, str | None]) -> Build:
    resource = p.AlterConfigsResource(
        resource_type, name, [p.AlterableConfig(k, op, v) for k, op, v in ops]
    )
    return to_any(lambda c: p.IncrementalAlterConfigsRequest([resource]))


def reassign(topic: str = KEPT, index: int = 0, replicas: list[int] | None = None) -> Build:
    part = p.ReassignablePartition(index, replicas)
    return to_any(
        lambda c: p.AlterPartitionReassignmentsRequest([p.ReassignableTopic(topic, [part])])
    )


def leader_and_isr(
    topic: str,
    index: int = 0,
    *,
    stale: bool = False,
    with_id: bool = True,
    leader_epoch: int = 0,
    partition_epoch: int = 0,
) -> Build:
    def make(c: Ctx) -> p.Request:
        state = p.LeaderAndIsrPartitionState(
            topic,
            index,
            c.leader,
            leader_epoch,
            [c.leader],
            partition_epoch=partition_epoch,
            replicas=[c.leader],
        )
        epoch = -1 if stale else c.controller_epoch
        ids = [(topic, Uuid.random())] if with_id else []
        return p.LeaderAndIsrRequest(0, epoch, [state], topic_ids=ids)

    return lambda c: (c.leader, make(c))


def stop_replica(topic: str, index: int = 0, *, stale: bool = False) -> Build:
    def make(c: Ctx) -> p.Request:
        state = p.StopReplicaPartitionState(topic, index, delete_partition=True)
        return p.StopReplicaRequest(0, -1 if stale else c.controller_epoch, [state])

    return lambda c: (c.leader, make(c))


def metadata(name: str, *, auto_create: bool = False) -> Build:
    return to_any(lambda c: p.MetadataRequest([p.MetadataRequestTopic(name)], auto_create))


def configured(*configs: tuple[str, str | None]) -> p.CreatableTopic:
    return p.CreatableTopic("new", 1, 1, configs=[p.CreatableTopicConfig(k, v) for k, v in configs])


def delete_topics(
    names: list[str] | None = None, states: list[tuple[str | None, bool]] | None = None
) -> Build:
    """DeleteTopics by ``names`` and by ``states`` (a name, and whether kept's id is given)."""
    return to_any(
        lambda c: p.DeleteTopicsRequest(
            names or [],
            topics=[
                p.DeleteTopicState(n, c.kept_id if by_id else ZERO_UUID)
                for n, by_id in states or []
            ],
        )
    )


def list_reassignments(topic: str) -> Build:
    wanted = p.ListPartitionReassignmentsTopics(topic, [-1, 0, INT64_MAX])
    return to_any(lambda c: p.ListPartitionReassignmentsRequest([wanted]))


def stranger_fetch(c: Ctx) -> tuple[int, p.Request]:
    """A broker that is no replica asks for everything past the end, as a follower."""
    part = p.FetchPartition(0, INT64_MAX, 100)
    return c.leader, p.FetchRequest(
        [p.FetchTopic(KEPT, [part])], replica_id=c.stranger, max_wait_ms=0
    )


def compacted_delete_records(c: Ctx) -> tuple[int, p.Request]:
    part = p.DeleteRecordsPartition(0, 0)
    request = p.DeleteRecordsRequest([p.DeleteRecordsTopic("compacted", [part])])
    return c.client.leader("compacted"), request


def alter_twice(c: Ctx) -> tuple[int, p.Request]:
    resource = p.AlterConfigsResource(TOPIC, KEPT, [p.AlterableConfig("retention.ms", SET, "1")])
    return 0, p.IncrementalAlterConfigsRequest([resource, resource])


def case(name: str, build: Build, *expected: int) -> Any:
    return pytest.param(build, list(expected), id=name)


def each(prefix: str, values: Any, make: Callable[[Any], Build], *expected: int) -> list[Any]:
    """One case per value (a mapping gives the ids, else the values do)."""
    pairs = values.items() if isinstance(values, dict) else [(str(v), v) for v in values]
    return [case(f"{prefix}-{key}", make(value), *expected) for key, value in pairs]


def many(count: int, code: int) -> list[int]:
    return [code] * count


EDGES = (-1, INT32_MAX, INT64_MAX)
OUTSIDE_INT32 = (1 << 31, -(1 << 31) - 1)

CASES: list[Any] = [
    # Produce
    *each("produce-name", BAD_NAMES, produce, INVALID_TOPIC),
    *each("produce-partition", EDGES, lambda i: produce(index=i), UNKNOWN),
    *each("produce-acks", (2, -2, INT64_MAX), lambda a: produce(acks=a), ACKS),
    case("produce-internal", produce(INTERNAL), INVALID_TOPIC),
    case("produce-endless-timeout", produce(SCRATCH, acks=-1, timeout_ms=INT64_MAX), NONE),
    case(
        "produce-huge-list",
        to_leader(
            lambda c: p.ProduceRequest(
                1,
                5000,
                [
                    p.TopicProduceData(
                        "missing", [p.PartitionProduceData(i, batch(1)) for i in range(5000)]
                    )
                ],
            )
        ),
        *many(5000, UNKNOWN),
    ),
    # Fetch
    *each("fetch-name", BAD_NAMES, fetch, INVALID_TOPIC, NONE),
    *each(
        "fetch-partition",
        (-1, -INT32_MAX, INT32_MAX, INT64_MAX),
        lambda i: fetch(index=i),
        UNKNOWN,
        NONE,
    ),
    *each(
        "fetch-offset", (-1, -INT64_MAX, INT64_MAX), lambda o: fetch(offset=o), OUT_OF_RANGE, NONE
    ),
    *each(
        "fetch-partition-max-bytes",
        (-1, -INT32_MAX),
        lambda b: fetch(partition_max_bytes=b),
        INVALID_REQUEST,
        NONE,
    ),
    case("fetch-max-bytes", fetch(max_bytes=-1), INVALID_REQUEST),
    *each(
        "fetch-session-epoch",
        (1, -2, INT64_MAX),
        lambda e: fetch(session_id=7, session_epoch=e),
        SESSION,
    ),
    case("fetch-full-closing-a-session", fetch(session_id=INT32_MAX, session_epoch=-1), NONE, NONE),
    *each(
        "fetch-isolation", (2, -1, INT64_MAX), lambda i: fetch(isolation_level=i), INVALID_REQUEST
    ),
    case("fetch-epoch-future", fetch(current_leader_epoch=INT32_MAX), UNKNOWN_EPOCH, NONE),
    case("fetch-epoch-negative", fetch(current_leader_epoch=-2), FENCED, NONE),
    case("fetch-replica-unknown", fetch(replica_id=INT32_MAX), NOT_LEADER, NONE),
    case("fetch-replica-stranger", stranger_fetch, NOT_LEADER, NONE),
    case("fetch-negative-wait-and-min", fetch(max_wait_ms=-1, min_bytes=-1), NONE, NONE),
    case("fetch-endless-wait-no-min", fetch(max_wait_ms=INT64_MAX, min_bytes=0), NONE, NONE),
    case("fetch-huge-sizes", fetch(partition_max_bytes=INT64_MAX, max_bytes=INT64_MAX), NONE, NONE),
    case(
        "fetch-huge-list",
        to_leader(
            lambda c: p.FetchRequest(
                [p.FetchTopic("missing", [p.FetchPartition(i, 0, 100)]) for i in range(5000)],
                max_wait_ms=0,
            )
        ),
        *many(5000, UNKNOWN),
        NONE,
    ),
    # ListOffsets
    *each("list-offsets-name", BAD_NAMES, list_offsets, INVALID_TOPIC),
    *each("list-offsets-partition", (-1, INT64_MAX), lambda i: list_offsets(index=i), UNKNOWN),
    case("list-offsets-isolation", list_offsets(isolation_level=5), INVALID_REQUEST),
    case("list-offsets-epoch-future", list_offsets(epoch=INT32_MAX), UNKNOWN_EPOCH),
    case("list-offsets-epoch-negative", list_offsets(epoch=-7), FENCED),
    # Metadata
    *each("metadata-name", BAD_NAMES, metadata, INVALID_TOPIC),
    *each(
        "metadata-auto-create",
        {"traversal": "../x", "reserved": "__probe"},
        lambda n: metadata(n, auto_create=True),
        INVALID_TOPIC,
    ),
    # CreateTopics
    *each("create-name", BAD_NAMES, lambda n: create(p.CreatableTopic(n, 1, 1)), INVALID_TOPIC),
    *each(
        "create-partitions",
        (0, -2, -INT64_MAX),
        lambda n: create(p.CreatableTopic("new", n, 1)),
        PARTITIONS,
    ),
    *each(
        "create-partitions",
        (10_001, 10**6, INT32_MAX, 1 << 31, INT64_MAX),
        lambda n: create(p.CreatableTopic("new", n, 1)),
        POLICY,
    ),
    *each(
        "create-replication",
        (0, -2, 4, (1 << 15) - 1, INT64_MAX),
        lambda f: create(p.CreatableTopic("new", 1, f)),
        REPLICATION,
    ),
    case("create-both-huge", create(p.CreatableTopic("new", INT64_MAX, INT64_MAX)), REPLICATION),
    case("create-assign-broker-twice", assigned((0, [0, 0])), BAD_ASSIGNMENT),
    case("create-assign-unknown-broker", assigned((0, [9])), BAD_ASSIGNMENT),
    case("create-assign-negative-broker", assigned((0, [-1])), BAD_ASSIGNMENT),
    case("create-assign-empty", assigned((0, [])), BAD_ASSIGNMENT),
    case("create-assign-gap", assigned((0, [0]), (2, [1])), BAD_ASSIGNMENT),
    case("create-assign-partition-twice", assigned((0, [0]), (0, [1])), BAD_ASSIGNMENT),
    case("create-assign-negative-index", assigned((-1, [0])), BAD_ASSIGNMENT),
    case("create-assign-uneven", assigned((0, [0]), (1, [0, 1])), BAD_ASSIGNMENT),
    case("create-assign-too-many", assigned(*((i, [0]) for i in range(10_001))), POLICY),
    case(
        "create-assign-and-count",
        create(p.CreatableTopic("new", 1, 1, [p.CreatableReplicaAssignment(0, [0])])),
        INVALID_REQUEST,
    ),
    case("create-config-null", create(configured(("retention.ms", None))), INVALID_CONFIG),
    case("create-config-unknown", create(configured(("x" * 10_000, "1"))), INVALID_CONFIG),
    case(
        "create-config-twice",
        create(configured(("retention.ms", "1"), ("retention.ms", "1"))),
        INVALID_REQUEST,
    ),
    case(
        "create-twice",
        create(p.CreatableTopic("new", 1, 1), p.CreatableTopic("new", 1, 1)),
        INVALID_REQUEST,
        INVALID_REQUEST,
    ),
    case("create-existing", create(p.CreatableTopic(KEPT, 1, 1)), EXISTS),
    case("create-internal-existing", create(p.CreatableTopic(INTERNAL, 1, 1)), EXISTS),
    case(
        "create-internal-new", create(p.CreatableTopic("__transaction_state", 1, 1)), INVALID_TOPIC
    ),
    case(
        "create-huge-list",
        create(*(p.CreatableTopic(f"bad/{i}", 1, 1) for i in range(2000))),
        *many(2000, INVALID_TOPIC),
    ),
    # DeleteTopics
    *each("delete-topics-name", BAD_NAMES, lambda n: delete_topics(names=[n]), UNKNOWN),
    case("delete-topics-nothing-named", delete_topics(states=[(None, False)]), INVALID_REQUEST),
    case("delete-topics-name-and-id", delete_topics(states=[(KEPT, True)]), INVALID_REQUEST),
    case(
        "delete-topics-twice", delete_topics(names=[KEPT, KEPT]), INVALID_REQUEST, INVALID_REQUEST
    ),
    case(
        "delete-topics-by-name-and-id",
        delete_topics(names=[KEPT], states=[(None, True)]),
        INVALID_REQUEST,
        INVALID_REQUEST,
    ),
    case(
        "delete-topics-unknown-id",
        to_any(lambda c: p.DeleteTopicsRequest(topics=[p.DeleteTopicState(None, Uuid.random())])),
        UNKNOWN,
    ),
    case("delete-topics-internal", delete_topics(names=[INTERNAL]), AUTHORIZATION),
    case(
        "delete-topics-huge-list",
        delete_topics(names=[f"missing-{i}" for i in range(5000)]),
        *many(5000, UNKNOWN),
    ),
    # DeleteRecords
    *each("delete-records-name", BAD_NAMES, delete_records, INVALID_TOPIC),
    *each("delete-records-partition", (-1, INT64_MAX), lambda i: delete_records(index=i), UNKNOWN),
    *each(
        "delete-records-offset",
        (4, INT64_MAX, -2, -INT64_MAX),
        lambda o: delete_records(offset=o),
        OUT_OF_RANGE,
    ),
    case("delete-records-internal", delete_records(INTERNAL), INVALID_TOPIC),
    case("delete-records-compacted", compacted_delete_records, POLICY),
    # OffsetsForLeaderEpoch
    *each("epochs-name", BAD_NAMES, epochs, INVALID_TOPIC),
    *each("epochs-partition", (-1, INT64_MAX), lambda i: epochs(index=i), UNKNOWN),
    case("epochs-current-future", epochs(current=INT32_MAX), UNKNOWN_EPOCH),
    case("epochs-current-negative", epochs(current=-2), FENCED),
    *each("epochs-epoch", EDGES, lambda e: epochs(epoch=e), NONE),
    # WriteTxnMarkers
    *each(
        "marker-producer-id",
        (-1, -INT64_MAX, 1 << 64),
        lambda i: marker(producer_id=i),
        INVALID_REQUEST,
    ),
    *each(
        "marker-producer-epoch",
        (-1, 1 << 15, INT64_MAX),
        lambda e: marker(producer_epoch=e),
        INVALID_REQUEST,
    ),
    *each(
        "marker-coordinator-epoch",
        OUTSIDE_INT32,
        lambda e: marker(coordinator_epoch=e),
        INVALID_REQUEST,
    ),
    *each("marker-name", BAD_NAMES, lambda n: marker(topic=n), INVALID_TOPIC),
    *each("marker-partition", (-1, INT64_MAX), lambda i: marker(index=i), UNKNOWN),
    # DescribeConfigs
    *each("describe-type", (0, 1, 99, -1), lambda t: describe(t, KEPT), INVALID_REQUEST),
    *each("describe-topic", BAD_NAMES, lambda n: describe(TOPIC, n), INVALID_TOPIC),
    case("describe-topic-missing", describe(TOPIC, "missing"), UNKNOWN),
    *each(
        "describe-broker",
        ("x", "-1", str(INT64_MAX), "../0"),
        lambda n: describe(BROKER, n),
        INVALID_REQUEST,
    ),
    case("describe-unknown-keys", describe(TOPIC, KEPT, ["no.such.key", ""]), NONE),
    # IncrementalAlterConfigs
    *each(
        "alter-type",
        (0, 99, -1),
        lambda t: alter(t, KEPT, ("retention.ms", SET, "1")),
        INVALID_REQUEST,
    ),
    case("alter-topic-empty", alter(TOPIC, "", ("retention.ms", SET, "1")), INVALID_REQUEST),
    *each(
        "alter-topic",
        {k: n for k, n in BAD_NAMES.items() if n},
        lambda n: alter(TOPIC, n, ("retention.ms", SET, "1")),
        INVALID_TOPIC,
    ),
    case("alter-topic-missing", alter(TOPIC, "missing", ("retention.ms", SET, "1")), UNKNOWN),
    *each(
        "alter-operation",
        (4, -1, INT64_MAX),
        lambda op: alter(TOPIC, KEPT, ("retention.ms", op, "1")),
        INVALID_REQUEST,
    ),
    *each(
        "alter-null",
        (SET, APPEND),
        lambda op: alter(TOPIC, KEPT, ("cleanup.policy", op, None)),
        INVALID_REQUEST,
    ),
    case(
        "alter-append-to-non-list",
        alter(TOPIC, KEPT, ("retention.ms", APPEND, "1")),
        INVALID_CONFIG,
    ),
    case("alter-unknown-key", alter(TOPIC, KEPT, ("no.such.key", SET, "1")), INVALID_CONFIG),
    case(
        "alter-bad-value", alter(TOPIC, KEPT, ("retention.ms", SET, "x" * 100_000)), INVALID_CONFIG
    ),
    case(
        "alter-key-twice",
        alter(TOPIC, KEPT, ("retention.ms", SET, "1"), ("retention.ms", SET, "2")),
        INVALID_REQUEST,
    ),
    case("alter-resource-twice", alter_twice, INVALID_REQUEST, INVALID_REQUEST),
    case(
        "alter-internal-pinned",
        alter(TOPIC, INTERNAL, ("cleanup.policy", SET, "delete")),
        INVALID_CONFIG,
    ),
    case(
        "alter-broker-name", alter(BROKER, "x", ("log.cleaner.threads", SET, "1")), INVALID_REQUEST
    ),
    case("alter-broker-static-key", alter(BROKER, "0", ("broker.id", SET, "7")), INVALID_CONFIG),
    # AlterPartitionReassignments, ListPartitionReassignments
    *each("reassign-partition", EDGES, lambda i: reassign(index=i, replicas=[0]), UNKNOWN, NONE),
    *each("reassign-name", BAD_NAMES, lambda n: reassign(n, replicas=[0]), UNKNOWN, NONE),
    *each(
        "reassign-replicas",
        ([], [0, 0], [-1], [INT32_MAX], [INT64_MAX]),
        lambda r: reassign(replicas=r),
        BAD_ASSIGNMENT,
        NONE,
    ),
    case("reassign-cancel-nothing", reassign(replicas=None), NO_REASSIGNMENT, NONE),
    *each("list-reassignments", {"kept": KEPT, **BAD_NAMES}, list_reassignments, NONE),
    # LeaderAndIsr, StopReplica (controller to broker)
    case("leader-and-isr-stale", leader_and_isr(KEPT, stale=True), STALE),
    *each("leader-and-isr-name", BAD_NAMES, leader_and_isr, NONE, INVALID_TOPIC),
    case("leader-and-isr-partition-negative", leader_and_isr("fresh", -1), NONE, UNKNOWN),
    *each(
        "leader-and-isr-leader-epoch",
        (-1, 1 << 31, INT64_MAX),
        lambda e: leader_and_isr("fresh", leader_epoch=e),
        NONE,
        INVALID_REQUEST,
    ),
    *each(
        "leader-and-isr-partition-epoch",
        (-1, 1 << 31),
        lambda e: leader_and_isr("fresh", partition_epoch=e),
        NONE,
        INVALID_REQUEST,
    ),
    case(
        "leader-and-isr-no-topic-id", leader_and_isr("fresh", with_id=False), NONE, INVALID_REQUEST
    ),
    case("stop-replica-stale", stop_replica(KEPT, stale=True), STALE),
    *each("stop-replica-name", BAD_NAMES, stop_replica, NONE, INVALID_TOPIC),
    case("stop-replica-partition-negative", stop_replica(KEPT, -1), NONE, UNKNOWN),
]


@pytest.mark.parametrize(("build", "expected"), CASES)
def test_hostile_request_gets_kafkas_error_and_changes_nothing(
    ctx: Ctx, build: Build, expected: list[int]
) -> None:
    broker, request = build(ctx)

    response = ctx.client.transport.send(broker, request)

    assert codes(response) == expected
    kept = ctx.client.fetch(KEPT)
    assert (kept.error_code, values(kept.records)) == (NONE, [b"v-0", b"v-1", b"v-2"])
    topics = sorted(t.name for t in ctx.client.metadata().topics)
    assert topics == [INTERNAL, "compacted", KEPT, SCRATCH]


def test_a_time_before_every_record_finds_the_first_one(ctx: Ctx) -> None:
    """Kafka searches any timestamp below -5 as a time (UnifiedLog.fetchOffsetByTimestamp)."""
    for timestamp in (-6, -1000, -INT64_MAX):
        broker, request = list_offsets(timestamp=timestamp)(ctx)
        answer = ctx.client.transport.send(broker, request)
        assert isinstance(answer, p.ListOffsetsResponse)
        found = answer.topics[0].partitions[0]
        assert (found.error_code, found.offset, found.leader_epoch) == (NONE, 0, 0)


def test_a_forged_follower_fetch_does_not_move_the_high_watermark(
    cluster: EmbeddedCluster, client: Client
) -> None:
    """Only a follower's real log end counts: an offset past the leader's is no log end."""
    client.create("replicated", replication_factor=3)
    leader = client.leader("replicated")
    followers = [b for b in cluster.broker_ids if b != leader]
    # The followers stay in sync on paper, but none of their fetches arrives any more.
    client.transport.faults.add(
        lambda broker, request: (
            isinstance(request, p.FetchRequest)
            and request.replica_id >= 0
            and all(f.fetch_offset != INT64_MAX for t in request.topics for f in t.partitions)
        ),
        drop=True,
    )
    assert client.produce("replicated", 0, batch(2), acks=1).error_code == NONE
    before = client.fetch("replicated").high_watermark
    assert before == 0

    for follower in followers:
        forged = p.FetchRequest(
            [p.FetchTopic("replicated", [p.FetchPartition(0, INT64_MAX, 100)])],
            replica_id=follower,
            max_wait_ms=0,
        )
        answer = client.transport.send(leader, forged).responses[0].partitions[0]
        assert answer.error_code == OUT_OF_RANGE

    assert client.fetch("replicated").high_watermark == before


def test_a_leader_and_isr_for_an_illegal_name_creates_no_directory(
    cluster: EmbeddedCluster, client: Client
) -> None:
    epoch = cluster.controller.image().controller_epoch
    state = p.LeaderAndIsrPartitionState("../outside", 0, 0, 1, [0], replicas=[0])
    request = p.LeaderAndIsrRequest(0, epoch, [state], topic_ids=[("../outside", Uuid.random())])

    answer = client.transport.send(0, request)

    assert codes(answer) == [NONE, INVALID_TOPIC]
    assert not list(cluster.data_dir.glob("**/outside*"))
    assert cluster.broker(0).hosted_partitions() == []


@pytest.fixture
def limited(tmp_path: Path) -> Iterator[Client]:
    config = {"max.partitions.per.request": 4, "max.partitions": 6}
    with EmbeddedCluster(1, tmp_path / "data", config) as cluster:
        yield Client(cluster)


def test_partition_limits_are_checked_per_request_and_for_the_cluster(limited: Client) -> None:
    send = limited.transport.send
    first = send(
        0,
        p.CreateTopicsRequest(
            [p.CreatableTopic("a", 3, 1), p.CreatableTopic("b", 2, 1), p.CreatableTopic("c", 1, 1)]
        ),
    )
    second = send(0, p.CreateTopicsRequest([p.CreatableTopic("d", 2, 1)]))
    validated = send(0, p.CreateTopicsRequest([p.CreatableTopic("e", 1, 1)], validate_only=True))
    third = send(0, p.CreateTopicsRequest([p.CreatableTopic("f", 1, 1)]))

    assert codes(first) == [NONE, POLICY, NONE]
    assert first.topics[1].error_message
    assert "max.partitions.per.request = 4" in first.topics[1].error_message
    assert codes(second) == [NONE]
    assert codes(validated) == [POLICY]
    assert validated.topics[0].error_message
    assert "max.partitions = 6" in validated.topics[0].error_message
    assert codes(third) == [POLICY]
    assert sorted(t.name for t in limited.metadata().topics) == ["a", "c", "d"]


def test_auto_created_topics_count_against_the_limits(tmp_path: Path) -> None:
    config = {"num.partitions": 5, "max.partitions.per.request": 4}
    with EmbeddedCluster(1, tmp_path / "data", config) as cluster:
        asked = cluster.transport.send(
            0, p.MetadataRequest([p.MetadataRequestTopic("auto")], allow_auto_topic_creation=True)
        )
        assert codes(asked) == [POLICY]
        assert len(cluster.controller.image().topics) == 0


ONE_OF_EACH: list[p.Request] = [
    p.ProduceRequest(1, 1, [p.TopicProduceData("t", [p.PartitionProduceData(0, b"")])]),
    p.FetchRequest([p.FetchTopic("t", [p.FetchPartition(0, 0, 1)])]),
    p.ListOffsetsRequest([p.ListOffsetsTopic("t", [p.ListOffsetsPartition(0, -1)])]),
    p.MetadataRequest([p.MetadataRequestTopic("t")]),
    p.CreateTopicsRequest([p.CreatableTopic("t")]),
    p.DeleteTopicsRequest(["t"], topics=[p.DeleteTopicState(None, ZERO_UUID)]),
    p.DeleteRecordsRequest([p.DeleteRecordsTopic("t", [p.DeleteRecordsPartition(0, 0)])]),
    p.InitProducerIdRequest(),
    p.OffsetsForLeaderEpochRequest(
        [p.OffsetForLeaderTopic("t", [p.OffsetForLeaderPartition(0, 0)])]
    ),
    p.WriteTxnMarkersRequest(
        [p.WritableTxnMarker(1, 0, True, [p.WritableTxnMarkerTopic("t", [0])])]
    ),
    p.DescribeConfigsRequest([p.DescribeConfigsResource(TOPIC, "t")]),
    p.CreatePartitionsRequest([p.CreatePartitionsTopic("t", 2)]),
    p.ElectLeadersRequest(0, [p.TopicPartitions("t", [0])]),
    p.IncrementalAlterConfigsRequest([p.AlterConfigsResource(TOPIC, "t", [])]),
    p.AlterPartitionReassignmentsRequest([p.ReassignableTopic("t", [p.ReassignablePartition(0)])]),
    p.ListPartitionReassignmentsRequest(),
    p.DescribeClusterRequest(),
    p.LeaderAndIsrRequest(0, 0, [p.LeaderAndIsrPartitionState("t", 0, 0, 0, [0])]),
    p.StopReplicaRequest(0, 0, [p.StopReplicaPartitionState("t", 0)]),
    p.UpdateMetadataRequest(0, 0, [], []),
    p.ControlledShutdownRequest(0),
    p.AlterPartitionRequest(
        0, [p.AlterPartitionTopicData(ZERO_UUID, [p.AlterPartitionPartitionData(0, 0, [])])]
    ),
    p.AllocateProducerIdsRequest(0),
]


def test_unexpected_failures_are_answered_for_every_request_type() -> None:
    """Every request type has an error response of its own type, each item with the code."""
    assert {type(r) for r in ONE_OF_EACH} == set(get_args(p.Request))
    for request in ONE_OF_EACH:
        response = error_response(request, -1, "boom")
        assert type(response).__name__ == type(request).__name__.replace("Request", "Response")
        assert codes(response) and set(codes(response)) == {-1}
